/* SPDX-License-Identifier: Apache-2.0 */
/* The library hostile-truncate copies, loads and then truncates under
 * ctxdump: it defines otel_thread_ctx_v1, so that the dump opens it to
 * find the symbol and its relocation, and a thread blocks in trunc_wait(), so that every
 * stack has a frame in it to unwind and name. */
#include "config.h"

#include <unistd.h>

void trunc_set(void *rec);
int trunc_wait(int fd);

__attribute__((visibility("default"))) __thread void *otel_thread_ctx_v1;

/* Its TLS relocation tells the dump where the symbol is in each thread. */
__attribute__((visibility("default"))) void
trunc_set(void *rec)
{
	otel_thread_ctx_v1 = rec;
}

/* Blocks in read() of fd with its own frame on the stack: the result is
 * used after the call, which is then no tail call. */
__attribute__((visibility("default"), noinline)) int
trunc_wait(int fd)
{
	char c;
	ssize_t r = read(fd, &c, 1);

	__asm__ volatile("" ::: "memory");
	return (int)r + 1;
}
