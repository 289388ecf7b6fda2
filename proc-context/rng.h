/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Fast pseudo-random ids: xoshiro256** (Blackman and Vigna) for trace-ids
 * and UUIDs, SplitMix64 for span-ids (below), both written from the
 * published algorithms.  Pure: the state lives wherever the caller puts
 * it (the shim keeps one per thread); no I/O, no locks, async-signal-safe.
 * Not a cryptographic generator; ids only need to be unique and uniform.
 *
 * Seeding from getrandom(2) and fork safety are the caller's job.  After
 * fork the child should call ctx_rng_seed() with fresh bytes, or at least
 * ctx_rng_mix() its pid (cheap, no syscall), so that it never repeats the
 * parent's sequence. */

#include <stddef.h>
#include <stdint.h>

#define CTX_RNG_SEED_SIZE 32
#define CTX_UUID_STR_LEN  36 /* without the NUL */

struct ctx_rng {
	uint64_t s[4];
};

/* Any 32 bytes are a good seed, all-zero included: they are spread over
 * the state with the SplitMix64 finaliser and the state is never all-zero
 * (which would be a fixed point).  The map from seed to state is one-to-one
 * (but for the single seed that would give the all-zero state). */
void ctx_rng_seed(struct ctx_rng *r, const uint8_t seed[CTX_RNG_SEED_SIZE]);

/* Stirs v (a pid, a timestamp, a fork generation) into the current state
 * without discarding it; two copies mixed with different values diverge. */
void ctx_rng_mix(struct ctx_rng *r, uint64_t v);

uint64_t ctx_rng_next(struct ctx_rng *r);

/* Fully random ids, never all-zero (drawn again in that 2^-128 case).  All
 * 16 trace-id bytes are random, so W3C_FLAG_RANDOM may be set for them. */
void ctx_rng_trace_id(struct ctx_rng *r, uint8_t id[16]);
void ctx_rng_span_id(struct ctx_rng *r, uint8_t id[8]);

/* RFC 4122 (RFC 9562) version 4 UUID as lowercase text
 * "xxxxxxxx-xxxx-4xxx-Vxxx-xxxxxxxxxxxx" (V in 8-b) plus a NUL. */
void ctx_rng_uuid4(struct ctx_rng *r, char out[CTX_UUID_STR_LEN + 1]);

/* ---- span-ids: SplitMix64 ----
 *
 * The generator of Java's SplittableRandom (Steele, Lea and Flood, "Fast
 * splittable pseudorandom number generators", OOPSLA 2014), written from
 * the published algorithm: a Weyl sequence, state += gamma with gamma odd,
 * put through ctx_mix64() (Stafford's variant 13 of the MurmurHash3
 * finaliser, a bijection).  About a dozen instructions per id where
 * xoshiro256** took ~25 (every traced request draws one, B4c).
 *
 * Uniqueness, which is what a span-id needs: with an odd gamma the state
 * visits all 2^64 values before it repeats, and ctx_mix64() is one-to-one,
 * so one generator never repeats an id within 2^64 - 1 draws.  ctx_mix64(0)
 * is 0, and the state 0 is skipped: never the all-zero id (W3C: invalid).  Each
 * thread draws its own random state and gamma (ctx_splitmix_seed()), so two
 * threads' streams are two different sequences rather than one sequence at
 * two offsets; a forked child seeds its copy again (there is no
 * ctx_rng_mix() for it).  Trace-ids, UUIDs and everything else keep
 * ctx_rng. */
#define CTX_SPLITMIX_SEED_SIZE 16

struct ctx_splitmix {
	uint64_t state;
	uint64_t gamma; /* odd once seeded */
};

/* state from the first 8 seed bytes, gamma from the last 8 (both through
 * ctx_mix64(), so that weak fallback seeds like a pid still spread; gamma
 * made odd, and flipped as SplittableRandom does when it has fewer than 24
 * bit transitions, which mix consecutive states poorly). */
void ctx_splitmix_seed(struct ctx_splitmix *g,
		       const uint8_t seed[CTX_SPLITMIX_SEED_SIZE]);

static inline uint64_t
ctx_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* A hash of the n bytes at p for tables keyed by what a file or another
 * process supplies: FNV-1a, then ctx_mix64() of it with seed, a secret the
 * caller draws once (getrandom()), so that its low bits, which index the
 * table, cannot be aimed at by choosing the bytes. */
static inline uint64_t
ctx_hash_bytes(const void *p, size_t n, uint64_t seed)
{
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return ctx_mix64(h ^ seed);
}

/* Never 0 (see above): the state 0 is stepped over to its successor,
 * 0 + gamma (| 1: not 0 even for a generator never seeded, whose gamma is
 * 0).  Inline: the shim's per-thread wrapper is the function that
 * bench/run.sh's B4c counts. */
static inline uint64_t
ctx_splitmix_next_nonzero(struct ctx_splitmix *g)
{
	uint64_t s = g->state + g->gamma;

	if (__builtin_expect(s == 0, 0))
		s = g->gamma | 1;
	g->state = s;
	return ctx_mix64(s);
}

/* Byte stores rather than a loop: gcc merges them into one 64-bit store
 * on little-endian targets. */
static inline void
ctx_store_le64(uint8_t *id, uint64_t v)
{
	id[0] = (uint8_t)v;
	id[1] = (uint8_t)(v >> 8);
	id[2] = (uint8_t)(v >> 16);
	id[3] = (uint8_t)(v >> 24);
	id[4] = (uint8_t)(v >> 32);
	id[5] = (uint8_t)(v >> 40);
	id[6] = (uint8_t)(v >> 48);
	id[7] = (uint8_t)(v >> 56);
}

/* The id holds the output little-endian, as ctx_rng_span_id() does. */
static inline void
ctx_splitmix_span_id(struct ctx_splitmix *g, uint8_t id[8])
{
	ctx_store_le64(id, ctx_splitmix_next_nonzero(g));
}
