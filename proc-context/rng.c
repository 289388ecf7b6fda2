/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "rng.h"

#define GOLDEN_GAMMA 0x9e3779b97f4a7c15ULL

static inline uint64_t
rotl64(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* SplitMix64 output function (rng.h): a bijection on 64-bit words with
 * good avalanche, so neighbouring seeds end up far apart. */
#define mix64 ctx_mix64

/* Written out byte by byte rather than as loops: gcc merges eight shifted
 * byte stores (or loads) into one 64-bit access on little-endian targets,
 * but only when they are not in a loop, and every request draws a span-id
 * (a loop cost ~55 instructions per id, B4). */
static uint64_t
load_le64(const uint8_t *p)
{
	return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 |
	       (uint64_t)p[3] << 24 | (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 |
	       (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}

static void
fix_zero_state(struct ctx_rng *r)
{
	/* the all-zero state only ever produces zeros */
	if ((r->s[0] | r->s[1] | r->s[2] | r->s[3]) == 0)
		r->s[0] = GOLDEN_GAMMA;
}

void
ctx_rng_seed(struct ctx_rng *r, const uint8_t seed[CTX_RNG_SEED_SIZE])
{
	uint64_t prev = 0;

	/* Each step is a bijection of one word given the words already final,
	 * so the whole map from seed to state is one-to-one.  The second pass
	 * carries the last seed word back to the first state words: without it
	 * seeds differing only at the end would start with the same outputs. */
	for (int i = 0; i < 4; i++) {
		prev = mix64(load_le64(seed + 8 * i) +
			     GOLDEN_GAMMA * (uint64_t)(i + 1) + prev);
		r->s[i] = prev;
	}
	for (int i = 0; i < 4; i++) {
		prev = mix64(r->s[i] + prev);
		r->s[i] = prev;
	}
	fix_zero_state(r);
}

void
ctx_rng_mix(struct ctx_rng *r, uint64_t v)
{
	uint64_t h = mix64(v + GOLDEN_GAMMA);

	for (int i = 0; i < 4; i++) {
		r->s[i] ^= h;
		h = mix64(h + GOLDEN_GAMMA);
	}
	fix_zero_state(r);
	(void)ctx_rng_next(r);
}

uint64_t
ctx_rng_next(struct ctx_rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl64(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl64(s[3], 45);
	return result;
}

void
ctx_rng_trace_id(struct ctx_rng *r, uint8_t id[16])
{
	uint64_t hi, lo;

	do {
		hi = ctx_rng_next(r);
		lo = ctx_rng_next(r);
	} while ((hi | lo) == 0);
	ctx_store_le64(id, hi);
	ctx_store_le64(id + 8, lo);
}

void
ctx_rng_span_id(struct ctx_rng *r, uint8_t id[8])
{
	uint64_t v;

	do
		v = ctx_rng_next(r);
	while (v == 0);
	ctx_store_le64(id, v);
}

void
ctx_rng_uuid4(struct ctx_rng *r, char out[CTX_UUID_STR_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	uint8_t b[16];
	int o = 0;

	ctx_store_le64(b, ctx_rng_next(r));
	ctx_store_le64(b + 8, ctx_rng_next(r));
	b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
	b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* variant 10xx */
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hex[b[i] >> 4];
		out[o++] = hex[b[i] & 0x0f];
	}
	out[o] = '\0';
}

void
ctx_splitmix_seed(struct ctx_splitmix *g, const uint8_t seed[CTX_SPLITMIX_SEED_SIZE])
{
	uint64_t gamma = mix64(load_le64(seed + 8) + 2 * GOLDEN_GAMMA) | 1;

	/* SplittableRandom's rule: a gamma like 0x5555... or 1 changes few
	 * bits from one state to the next; xor with 0xaaaa... keeps it odd */
	if (__builtin_popcountll(gamma ^ (gamma >> 1)) < 24)
		gamma ^= 0xaaaaaaaaaaaaaaaaULL;
	g->state = mix64(load_le64(seed) + GOLDEN_GAMMA);
	g->gamma = gamma;
}
