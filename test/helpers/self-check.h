/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The self-checking helper programs (pipeline, sock-edge, uv-restore):
 * CHECK() counts a failed condition in `fails` and says where on stderr,
 * and the program goes on, so that one run reports every failure (its
 * test reads the count from the program's RESULT line and its exit
 * status); die() is for a setup step that failed (exit status 2). */

#include <stdio.h>
#include <stdlib.h>

static int fails;

#define CHECK(c, ...)                                                \
	do {                                                         \
		if (!(c)) {                                          \
			fails++;                                     \
			fprintf(stderr, "FAIL line %d: ", __LINE__); \
			fprintf(stderr, __VA_ARGS__);                \
			fputc('\n', stderr);                         \
		}                                                    \
	} while (0)

static __attribute__((noreturn, unused)) void
die(const char *what)
{
	perror(what);
	exit(2);
}
