/* SPDX-License-Identifier: Apache-2.0 */
#include "test-common.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

/* Under valgrind (meson test --setup valgrind) the samples shrink 10 to
 * 40 times: the same code paths, in seconds instead of minutes (every
 * passing ck_assert is a write to Check's log; RUNNING_ON_VALGRIND:
 * test-common.h). */

/* Every test uses fixed seeds, so the statistical bounds below are not
 * flaky: they either hold for these sequences or they never do. */

static void
seed_from(struct ctx_rng *r, uint8_t fill, uint8_t first)
{
	uint8_t seed[CTX_RNG_SEED_SIZE];

	memset(seed, fill, sizeof(seed));
	seed[0] = first;
	ctx_rng_seed(r, seed);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int
cmp_id16(const void *a, const void *b)
{
	return memcmp(a, b, 16);
}

static int
cmp_uuid(const void *a, const void *b)
{
	return memcmp(a, b, 37);
}

static uint64_t
id8_to_u64(const uint8_t id[8])
{
	uint64_t v = 0;

	/* ids hold the generator's words little-endian */
	for (int i = 7; i >= 0; i--)
		v = v << 8 | id[i];
	return v;
}

/* xoshiro256** from its definition: from state {1, 2, 3, 4} the first
 * output is rotl(2 * 5, 7) * 9 = 0x2d00, the second rotl(0, 7) * 9 = 0,
 * the rest come from a separate (Python) implementation of the recurrence. */
START_TEST(test_known_answer)
{
	static const uint64_t want[] = {
		0x2d00,
		0x0,
		0x5a007080,
		0x10e0000000009d80,
		0x10e0b61ce1009d80,
		0x870021ce143ad00,
	};
	struct ctx_rng r = {{1, 2, 3, 4}};

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		uint64_t v = ctx_rng_next(&r);

		ck_assert_msg(v == want[i], "output %zu: %#llx, want %#llx", i,
			      (unsigned long long)v, (unsigned long long)want[i]);
	}
}
END_TEST

/* The state {1,2,3,4} then one draw yields a 0 next: a span id must skip it. */
START_TEST(test_span_id_skips_zero)
{
	struct ctx_rng r = {{1, 2, 3, 4}};
	uint8_t id[8], tid[16];

	(void)ctx_rng_next(&r);
	ctx_rng_span_id(&r, id);
	ck_assert_uint_eq(id8_to_u64(id), 0x5a007080); /* the third output */

	/* a trace id only needs one non-zero half */
	r = (struct ctx_rng){{1, 2, 3, 4}};
	(void)ctx_rng_next(&r);
	ctx_rng_trace_id(&r, tid);
	ck_assert_uint_eq(id8_to_u64(tid), 0);
	ck_assert_uint_eq(id8_to_u64(tid + 8), 0x5a007080);

	/* from {1, 0, 1, 0} the first two outputs are both 0 (s[1] stays 0),
	 * then 0x1680 twice: the all-zero trace id is drawn again */
	r = (struct ctx_rng){{1, 0, 1, 0}};
	ctx_rng_trace_id(&r, tid);
	ck_assert_uint_eq(id8_to_u64(tid), 0x1680);
	ck_assert_uint_eq(id8_to_u64(tid + 8), 0x1680);
}
END_TEST

START_TEST(test_deterministic)
{
	struct ctx_rng a, b;

	seed_from(&a, 0x5c, 1);
	seed_from(&b, 0x5c, 1);
	for (int i = 0; i < 10000; i++)
		ck_assert_uint_eq(ctx_rng_next(&a), ctx_rng_next(&b));
	/* ids and uuids are functions of the state too */
	{
		uint8_t x[16], y[16];
		char ux[37], uy[37];

		ctx_rng_trace_id(&a, x);
		ctx_rng_trace_id(&b, y);
		ck_assert_mem_eq(x, y, 16);
		ctx_rng_uuid4(&a, ux);
		ctx_rng_uuid4(&b, uy);
		ck_assert_str_eq(ux, uy);
	}
}
END_TEST

/* Flipping any one of the 256 seed bits changes the first output in about
 * half of its bits: neighbouring seeds (a pid, a counter) do not give
 * neighbouring sequences. */
START_TEST(test_seed_avalanche)
{
	uint8_t seed[CTX_RNG_SEED_SIZE] = {0};
	struct ctx_rng r;
	uint64_t base;

	ctx_rng_seed(&r, seed);
	base = ctx_rng_next(&r);
	for (int bit = 0; bit < 256; bit++) {
		int d;

		seed[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		ctx_rng_seed(&r, seed);
		d = __builtin_popcountll(ctx_rng_next(&r) ^ base);
		seed[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		ck_assert_msg(d >= 12 && d <= 52, "seed bit %d: %d output bits changed",
			      bit, d);
	}
}
END_TEST

START_TEST(test_zero_seed)
{
	uint8_t seed[CTX_RNG_SEED_SIZE] = {0};
	uint64_t v[64];
	struct ctx_rng r;

	ctx_rng_seed(&r, seed);
	ck_assert((r.s[0] | r.s[1] | r.s[2] | r.s[3]) != 0);
	for (int i = 0; i < 64; i++)
		v[i] = ctx_rng_next(&r);
	qsort(v, 64, sizeof(v[0]), cmp_u64);
	for (int i = 1; i < 64; i++)
		ck_assert_msg(v[i] != v[i - 1], "repeat among the first 64 outputs");

	/* White box: the one seed whose state would be all-zero (each seed
	 * word cancels the SplitMix64 increment rng.c adds to it) is repaired. */
	for (int i = 0; i < 4; i++) {
		uint64_t w = -(0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1));

		for (int k = 0; k < 8; k++)
			seed[8 * i + k] = (uint8_t)(w >> (8 * k));
	}
	ctx_rng_seed(&r, seed);
	ck_assert((r.s[0] | r.s[1] | r.s[2] | r.s[3]) != 0);
	ck_assert(ctx_rng_next(&r) != 0 || ctx_rng_next(&r) != 0);

	/* the all-zero state itself is repaired, not left as a fixed point */
	r = (struct ctx_rng){{0, 0, 0, 0}};
	ctx_rng_mix(&r, 0);
	ck_assert((r.s[0] | r.s[1] | r.s[2] | r.s[3]) != 0);
	ck_assert(ctx_rng_next(&r) != 0 || ctx_rng_next(&r) != 0);
}
END_TEST

#define N_IDS (RUNNING_ON_VALGRIND ? 5000 : 200000)

START_TEST(test_span_ids_nonzero_distinct)
{
	uint64_t *v = malloc(N_IDS * sizeof(*v));
	struct ctx_rng r;

	ck_assert_ptr_nonnull(v);
	seed_from(&r, 0x11, 0x22);
	for (int i = 0; i < N_IDS; i++) {
		uint8_t id[8];

		ctx_rng_span_id(&r, id);
		v[i] = id8_to_u64(id);
		ck_assert(v[i] != 0);
	}
	qsort(v, N_IDS, sizeof(*v), cmp_u64);
	for (int i = 1; i < N_IDS; i++)
		ck_assert_msg(v[i] != v[i - 1], "duplicate span id %#llx",
			      (unsigned long long)v[i]);
	free(v);
}
END_TEST

START_TEST(test_trace_ids_nonzero_distinct)
{
	uint8_t(*v)[16] = malloc(N_IDS * sizeof(*v));
	static const uint8_t zero[16];
	struct ctx_rng r;

	ck_assert_ptr_nonnull(v);
	seed_from(&r, 0x33, 0x44);
	for (int i = 0; i < N_IDS; i++) {
		ctx_rng_trace_id(&r, v[i]);
		ck_assert(memcmp(v[i], zero, 16) != 0);
	}
	qsort(v, N_IDS, sizeof(*v), cmp_id16);
	for (int i = 1; i < N_IDS; i++)
		ck_assert_msg(memcmp(v[i], v[i - 1], 16) != 0, "duplicate trace id");
	free(v);
}
END_TEST

/* A forked child that only mixes in its pid must not repeat the parent. */
START_TEST(test_mix_diverges)
{
	const int N = RUNNING_ON_VALGRIND ? 2000 : 20000;
	uint64_t *v = malloc(2 * N * sizeof(*v));
	struct ctx_rng parent, child, child2;

	ck_assert_ptr_nonnull(v);
	seed_from(&parent, 0x77, 0x01);
	child = parent;
	child2 = parent;
	ctx_rng_mix(&child, 4242);
	ctx_rng_mix(&child2, 4243);
	ck_assert(ctx_rng_next(&child) != ctx_rng_next(&child2));
	for (int i = 0; i < N; i++) {
		uint8_t a[8], b[8];

		ctx_rng_span_id(&parent, a);
		ctx_rng_span_id(&child, b);
		v[2 * i] = id8_to_u64(a);
		v[2 * i + 1] = id8_to_u64(b);
	}
	qsort(v, 2 * N, sizeof(*v), cmp_u64);
	for (int i = 1; i < 2 * N; i++)
		ck_assert_msg(v[i] != v[i - 1], "parent and child share a span id");
	free(v);

	/* mixing is deterministic: the same value gives the same stream */
	seed_from(&parent, 0x77, 0x01);
	child = parent;
	ctx_rng_mix(&parent, 99);
	ctx_rng_mix(&child, 99);
	ck_assert_uint_eq(ctx_rng_next(&parent), ctx_rng_next(&child));
}
END_TEST

static bool
is_lower_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

START_TEST(test_uuid4_format)
{
	const int N = RUNNING_ON_VALGRIND ? 2000 : 20000;
	char(*u)[37] = malloc(N * sizeof(*u));
	unsigned seen[36] = {0}; /* bitmask of hex digits seen per position */
	struct ctx_rng r;

	ck_assert_ptr_nonnull(u);
	seed_from(&r, 0x99, 0x03);
	for (int i = 0; i < N; i++) {
		memset(u[i], 'X', 37);
		ctx_rng_uuid4(&r, u[i]);
		ck_assert_msg(u[i][36] == '\0' && strlen(u[i]) == 36, "length of %s",
			      u[i]);
		for (int p = 0; p < 36; p++) {
			char c = u[i][p];

			if (p == 8 || p == 13 || p == 18 || p == 23) {
				ck_assert_msg(c == '-', "%s: no dash at %d", u[i], p);
				continue;
			}
			ck_assert_msg(is_lower_hex(c), "%s: char %d", u[i], p);
			seen[p] |= 1u << (c <= '9' ? c - '0' : c - 'a' + 10);
		}
		ck_assert_msg(u[i][14] == '4', "%s: version nibble", u[i]);
		/* variant 10xx: the first digit of the fourth group is 8, 9, a or b */
		ck_assert_msg(strchr("89ab", u[i][19]), "%s: variant", u[i]);
	}
	/* every random nibble takes all 16 values, the variant digit all 4 */
	for (int p = 0; p < 36; p++) {
		if (p == 8 || p == 13 || p == 18 || p == 23 || p == 14)
			continue;
		if (p == 19)
			ck_assert_uint_eq(seen[p], 0xf00u);
		else
			ck_assert_msg(seen[p] == 0xffffu, "position %d: %#x", p,
				      seen[p]);
	}
	qsort(u, N, sizeof(*u), cmp_uuid);
	for (int i = 1; i < N; i++)
		ck_assert_msg(strcmp(u[i], u[i - 1]) != 0, "duplicate uuid %s", u[i]);
	free(u);
}
END_TEST

/* Crude uniformity: each output bit is set about half the time (within
 * 6 sigma), and the bytes of span ids pass a loose chi-square. */
START_TEST(test_bit_frequencies)
{
	const int N = RUNNING_ON_VALGRIND ? 1 << 13 : 1 << 17;
	static unsigned bits[64], trace_bits[128], bytes[256];
	const double sigma = RUNNING_ON_VALGRIND ? 45.25 : 181.02; /* sqrt(N) / 2 */
	struct ctx_rng r;
	double chi2 = 0;

	seed_from(&r, 0x00, 0x01);
	for (int i = 0; i < N; i++) {
		uint64_t v = ctx_rng_next(&r);
		uint8_t tid[16], sid[8];

		for (int b = 0; b < 64; b++)
			bits[b] += (v >> b) & 1;
		ctx_rng_trace_id(&r, tid);
		for (int b = 0; b < 128; b++)
			trace_bits[b] += (tid[b / 8] >> (b % 8)) & 1;
		ctx_rng_span_id(&r, sid);
		for (int k = 0; k < 8; k++)
			bytes[sid[k]]++;
	}
	for (int b = 0; b < 64; b++)
		ck_assert_msg(bits[b] > N / 2 - 6 * sigma &&
				      bits[b] < N / 2 + 6 * sigma,
			      "bit %d set %u times of %d", b, bits[b], N);
	for (int b = 0; b < 128; b++)
		ck_assert_msg(trace_bits[b] > N / 2 - 6 * sigma &&
				      trace_bits[b] < N / 2 + 6 * sigma,
			      "trace-id bit %d set %u times of %d", b, trace_bits[b],
			      N);
	for (int k = 0; k < 256; k++) {
		double e = N * 8.0 / 256, d = bytes[k] - e;

		chi2 += d * d / e;
	}
	/* 255 degrees of freedom: mean 255, sd ~22.6 */
	ck_assert_msg(chi2 < 400, "span-id byte chi-square %.1f", chi2);
}
END_TEST

/* ---- span-ids: SplitMix64 ----
 *
 * The expected values below come from a separate Python implementation of
 * the published algorithm (state += gamma; out = mix64(state), Stafford's
 * variant 13), not from this code's output.  From state 0 with the golden
 * gamma the generator is the reference splitmix64 seeded with 0, whose
 * first outputs 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f
 * are also the ones other implementations publish. */
START_TEST(test_splitmix_known_answer)
{
	static const uint64_t want[] = {
		0xe220a8397b1dcdafULL,
		0x6e789e6aa1b965f4ULL,
		0x06c45d188009454fULL,
		0xf88bb8a8724c81ecULL,
	};
	struct ctx_splitmix g = {0, 0x9e3779b97f4a7c15ULL};

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		uint8_t id[8];

		ctx_splitmix_span_id(&g, id);
		ck_assert_msg(id8_to_u64(id) == want[i],
			      "output %zu: %#llx, want %#llx", i,
			      (unsigned long long)id8_to_u64(id),
			      (unsigned long long)want[i]);
		/* the state is a Weyl sequence: after i + 1 draws (i + 1) * gamma */
		ck_assert_uint_eq(g.state, 0x9e3779b97f4a7c15ULL * (i + 1));
	}
	ck_assert_uint_eq(ctx_mix64(0), 0);
	ck_assert_uint_eq(ctx_mix64(0x9e3779b97f4a7c15ULL), want[0]);
}
END_TEST

/* ctx_splitmix_seed(): state = mix64(w0 + G), gamma = mix64(w1 + 2G) | 1
 * (w0, w1 the seed's little-endian words), values from the Python model. */
START_TEST(test_splitmix_seed_vectors)
{
	uint8_t seed[CTX_SPLITMIX_SEED_SIZE];
	struct ctx_splitmix g;
	uint8_t id[8];

	for (int i = 0; i < 16; i++)
		seed[i] = (uint8_t)i;
	ctx_splitmix_seed(&g, seed);
	ck_assert_uint_eq(g.state, 0xea3c324570509d0dULL);
	ck_assert_uint_eq(g.gamma, 0x487cd1072714f633ULL);
	ctx_splitmix_span_id(&g, id);
	ck_assert_uint_eq(id8_to_u64(id), 0x9b4f1696e86c64a4ULL);
	ctx_splitmix_span_id(&g, id);
	ck_assert_uint_eq(id8_to_u64(id), 0xadc0a802142c1a31ULL);
	ctx_splitmix_span_id(&g, id);
	ck_assert_uint_eq(id8_to_u64(id), 0x07ba432c3aa8195aULL);

	/* the all-zero seed is as good as any */
	memset(seed, 0, sizeof(seed));
	ctx_splitmix_seed(&g, seed);
	ck_assert_uint_eq(g.state, 0xe220a8397b1dcdafULL);
	ck_assert_uint_eq(g.gamma, 0x6e789e6aa1b965f5ULL);
	ctx_splitmix_span_id(&g, id);
	ck_assert_uint_eq(id8_to_u64(id), 0x7a5f1ee27171f1beULL);
}
END_TEST

/* A gamma with fewer than 24 bit transitions is flipped with 0xaaaa...
 * (SplittableRandom's rule).  The seed's second word here is the one whose
 * mixed value is exactly 1 (one transition), found by inverting mix64 in
 * Python: its gamma must become 0xaaaaaaaaaaaaaaab.  And any seed gives an
 * odd gamma with at least 24 transitions. */
START_TEST(test_splitmix_gamma_rule)
{
	static const uint8_t w1[8] = {0xa8, 0xcd, 0x7e, 0x6a, 0x4e, 0xcc, 0xfe, 0x59};
	uint8_t seed[CTX_SPLITMIX_SEED_SIZE] = {0};
	struct ctx_splitmix g;
	struct ctx_rng r;

	memcpy(seed + 8, w1, 8);
	ctx_splitmix_seed(&g, seed);
	ck_assert_uint_eq(g.gamma, 0xaaaaaaaaaaaaaaabULL);

	seed_from(&r, 0x42, 0x24);
	for (int i = 0; i < 10000; i++) {
		uint64_t a = ctx_rng_next(&r), b = ctx_rng_next(&r);

		for (int k = 0; k < 8; k++) {
			seed[k] = (uint8_t)(a >> (8 * k));
			seed[8 + k] = (uint8_t)(b >> (8 * k));
		}
		ctx_splitmix_seed(&g, seed);
		ck_assert(g.gamma & 1);
		ck_assert(__builtin_popcountll(g.gamma ^ (g.gamma >> 1)) >= 24);
	}
}
END_TEST

/* The state 0 would give the all-zero id (mix64(0) = 0): it is stepped
 * over to its successor, gamma.  A generator never seeded (gamma 0) still
 * gives no zero id. */
START_TEST(test_splitmix_skips_zero)
{
	struct ctx_splitmix g = {-0x9e3779b97f4a7c15ULL, 0x9e3779b97f4a7c15ULL};
	uint8_t id[8];

	ctx_splitmix_span_id(&g, id);
	ck_assert_uint_eq(id8_to_u64(id), 0xe220a8397b1dcdafULL); /* mix64(gamma) */
	ck_assert_uint_eq(g.state, 0x9e3779b97f4a7c15ULL);
	ctx_splitmix_span_id(&g, id);
	ck_assert_uint_eq(id8_to_u64(id), 0x6e789e6aa1b965f4ULL);

	g = (struct ctx_splitmix){0, 0};
	for (int i = 0; i < 3; i++) {
		ctx_splitmix_span_id(&g, id);
		ck_assert(id8_to_u64(id) != 0);
	}
}
END_TEST

/* Flipping any one of the 128 seed bits changes the first id in about half
 * of its bits. */
START_TEST(test_splitmix_seed_avalanche)
{
	uint8_t seed[CTX_SPLITMIX_SEED_SIZE] = {0}, id[8];
	struct ctx_splitmix g;
	uint64_t base;

	ctx_splitmix_seed(&g, seed);
	ctx_splitmix_span_id(&g, id);
	base = id8_to_u64(id);
	for (int bit = 0; bit < 128; bit++) {
		int d;

		seed[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		ctx_splitmix_seed(&g, seed);
		ctx_splitmix_span_id(&g, id);
		d = __builtin_popcountll(id8_to_u64(id) ^ base);
		seed[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		ck_assert_msg(d >= 12 && d <= 52, "seed bit %d: %d id bits changed",
			      bit, d);
	}
}
END_TEST

/* One generator never repeats (a property of the algorithm over 2^64
 * draws; checked here over a sample), and two generators seeded one bit
 * apart -- two threads, a parent and its forked child -- share no id. */
START_TEST(test_splitmix_ids_distinct)
{
	uint64_t *v = malloc(2 * N_IDS * sizeof(*v));
	uint8_t seed[CTX_SPLITMIX_SEED_SIZE];
	struct ctx_splitmix a, b;

	ck_assert_ptr_nonnull(v);
	memset(seed, 0x11, sizeof(seed));
	ctx_splitmix_seed(&a, seed);
	seed[15] ^= 0x80;
	ctx_splitmix_seed(&b, seed);
	ck_assert(a.gamma != b.gamma);
	for (int i = 0; i < N_IDS; i++) {
		uint8_t x[8], y[8];

		ctx_splitmix_span_id(&a, x);
		ctx_splitmix_span_id(&b, y);
		v[2 * i] = id8_to_u64(x);
		v[2 * i + 1] = id8_to_u64(y);
		ck_assert(v[2 * i] != 0 && v[2 * i + 1] != 0);
	}
	qsort(v, 2 * N_IDS, sizeof(*v), cmp_u64);
	for (int i = 1; i < 2 * N_IDS; i++)
		ck_assert_msg(v[i] != v[i - 1], "duplicate span id %#llx",
			      (unsigned long long)v[i]);
	free(v);
}
END_TEST

/* As test_bit_frequencies, for the span-ids' generator. */
START_TEST(test_splitmix_bit_frequencies)
{
	const int N = RUNNING_ON_VALGRIND ? 1 << 13 : 1 << 17;
	static unsigned bits[64], bytes[256];
	const double sigma = RUNNING_ON_VALGRIND ? 45.25 : 181.02; /* sqrt(N) / 2 */
	uint8_t seed[CTX_SPLITMIX_SEED_SIZE] = {1};
	struct ctx_splitmix g;
	double chi2 = 0;

	ctx_splitmix_seed(&g, seed);
	for (int i = 0; i < N; i++) {
		uint8_t id[8];
		uint64_t v;

		ctx_splitmix_span_id(&g, id);
		v = id8_to_u64(id);
		for (int b = 0; b < 64; b++)
			bits[b] += (v >> b) & 1;
		for (int k = 0; k < 8; k++)
			bytes[id[k]]++;
	}
	for (int b = 0; b < 64; b++)
		ck_assert_msg(bits[b] > N / 2 - 6 * sigma &&
				      bits[b] < N / 2 + 6 * sigma,
			      "bit %d set %u times of %d", b, bits[b], N);
	for (int k = 0; k < 256; k++) {
		double e = N * 8.0 / 256, d = bytes[k] - e;

		chi2 += d * d / e;
	}
	ck_assert_msg(chi2 < 400, "span-id byte chi-square %.1f", chi2);
}
END_TEST

/* ctx_hash_bytes(): a function of the bytes and the seed only, FNV-1a
 * put through ctx_mix64(), and keys that share their low bits (the tids
 * of a crafted recording: multiples of 4096) spread over a table's slots
 * (the old multiplicative tid hash put all of them in one). */
START_TEST(test_hash_bytes)
{
	enum { SLOTS = 4096, KEYS = 4096 };
	static unsigned load[SLOTS];
	static const uint64_t seeds[] = {0, 0x0123456789abcdefULL};
	const uint8_t a[] = {'a'};

	ck_assert_uint_eq(ctx_hash_bytes("", 0, 0), ctx_mix64(0xcbf29ce484222325ULL));
	ck_assert_uint_eq(
		ctx_hash_bytes(a, 1, 7),
		ctx_mix64(((0xcbf29ce484222325ULL ^ 'a') * 0x100000001b3ULL) ^ 7));
	ck_assert_uint_eq(ctx_hash_bytes("abc", 3, 9), ctx_hash_bytes("abcd", 3, 9));
	ck_assert_uint_ne(ctx_hash_bytes("abc", 3, 9), ctx_hash_bytes("abc", 3, 10));
	for (unsigned s = 0; s < sizeof(seeds) / sizeof(seeds[0]); s++) {
		unsigned max = 0;

		memset(load, 0, sizeof(load));
		for (uint32_t i = 0; i < KEYS; i++) {
			uint32_t key[2] = {i % 25, i * 4096};
			uint64_t h = ctx_hash_bytes(key, sizeof(key), seeds[s]);

			if (++load[h & (SLOTS - 1)] > max)
				max = load[h & (SLOTS - 1)];
		}
		/* about 7 for a random function (balls into bins) */
		ck_assert_msg(max < 16, "seed %u: %u keys in one slot", s, max);
	}
}
END_TEST

TEST_SUITE(rng_suite)
{
	Suite *s = suite_create("rng");
	TCase *tc = tcase_create("generator");

	tcase_add_test(tc, test_known_answer);
	tcase_add_test(tc, test_span_id_skips_zero);
	tcase_add_test(tc, test_deterministic);
	tcase_add_test(tc, test_seed_avalanche);
	tcase_add_test(tc, test_zero_seed);
	tcase_add_test(tc, test_mix_diverges);
	tcase_add_test(tc, test_hash_bytes);
	suite_add_tcase(s, tc);

	tc = tcase_create("ids");
	tcase_add_test(tc, test_span_ids_nonzero_distinct);
	tcase_add_test(tc, test_trace_ids_nonzero_distinct);
	tcase_add_test(tc, test_uuid4_format);
	tcase_add_test(tc, test_bit_frequencies);
	suite_add_tcase(s, tc);

	tc = tcase_create("span-ids");
	tcase_add_test(tc, test_splitmix_known_answer);
	tcase_add_test(tc, test_splitmix_seed_vectors);
	tcase_add_test(tc, test_splitmix_gamma_rule);
	tcase_add_test(tc, test_splitmix_skips_zero);
	tcase_add_test(tc, test_splitmix_seed_avalanche);
	tcase_add_test(tc, test_splitmix_ids_distinct);
	tcase_add_test(tc, test_splitmix_bit_frequencies);
	suite_add_tcase(s, tc);
	return s;
}
