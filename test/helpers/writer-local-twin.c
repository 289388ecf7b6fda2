/* SPDX-License-Identifier: Apache-2.0 */
/* The second file-scope static otel_thread_ctx_v1 of writer-local-twin
 * (writer-local.c). */
#include "config.h"

static __thread void *otel_thread_ctx_v1;

void writer_twin_set(void *p);

void
writer_twin_set(void *p)
{
	*(void *volatile *)&otel_thread_ctx_v1 = p;
}
