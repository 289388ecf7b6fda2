/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Shared by the libFuzzer harnesses in test/fuzz/.  Each fuzz-<name>.c
 * defines LLVMFuzzerTestOneInput() and checks its own invariants with
 * FUZZ_CHECK(), which aborts: libFuzzer reports that as a crash, and
 * fuzz-main.c (the replay driver of the meson unit tests) as a failure. */

#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static inline void __attribute__((noreturn))
fuzz_fail(const char *file, int line, const char *what)
{
	fprintf(stderr, "%s:%d: invariant failed: %s\n", file, line, what);
	abort();
}

#define FUZZ_CHECK(cond)                                      \
	do {                                                  \
		if (!(cond))                                  \
			fuzz_fail(__FILE__, __LINE__, #cond); \
	} while (0)

/* Consume input from the front: small structured choices for a harness,
 * the rest is the bytes under test. */
struct fuzz_in {
	const uint8_t *p;
	size_t left;
};

static inline unsigned
fuzz_byte(struct fuzz_in *in)
{
	if (in->left == 0)
		return 0;
	in->left--;
	return *in->p++;
}

static inline uint64_t
fuzz_u64(struct fuzz_in *in)
{
	uint64_t v = 0;
	unsigned i;

	for (i = 0; i < 8; i++)
		v |= (uint64_t)fuzz_byte(in) << (8 * i);
	return v;
}
