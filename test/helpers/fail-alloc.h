/* SPDX-License-Identifier: Apache-2.0 */
/* An executable's malloc() and calloc() that fail while fail_now is set
 * (curl-oom.c, curl-lists.c).  They interpose the ones every library uses:
 * hook-curl.c takes its handle entries from calloc() and its table from
 * malloc().  glibc's dlsym() does not allocate when it finds the symbol;
 * the next allocator is libc's, or the sanitizer runtime's in an ASan
 * build. */
#pragma once

#include <dlfcn.h>
#include <stddef.h>

static volatile int fail_now;
static void *(*next_malloc)(size_t);
static void *(*next_calloc)(size_t, size_t);

void *malloc(size_t n);
void *calloc(size_t n, size_t size);

void *
malloc(size_t n)
{
	if (fail_now)
		return NULL;
	if (!next_malloc)
		next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
	return next_malloc(n);
}

void *
calloc(size_t n, size_t size)
{
	if (fail_now)
		return NULL;
	if (!next_calloc)
		next_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
	return next_calloc(n, size);
}
