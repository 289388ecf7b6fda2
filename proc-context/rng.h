/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Fast pseudo-random ids: xoshiro256** (Blackman and Vigna), written from
 * the published algorithm.  Pure: the state lives wherever the caller puts
 * it (the shim keeps one per thread); no I/O, no locks, async-signal-safe.
 * Not a cryptographic generator; ids only need to be unique and uniform.
 *
 * Seeding from getrandom(2) and fork safety are the caller's job.  After
 * fork the child should call ctx_rng_seed() with fresh bytes, or at least
 * ctx_rng_mix() its pid (cheap, no syscall), so that it never repeats the
 * parent's sequence. */

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
