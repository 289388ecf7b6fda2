/* SPDX-License-Identifier: Apache-2.0 */
/* The second file-scope static otel_thread_ctx_v1 of writer-local-twin
 * (writer-local.c). */
#include "config.h"

static __thread void *otel_thread_ctx_v1;

static const char not_a_record[] = "writer-local-twin";

/* Before main(), on the main thread: the variable is used (so it is kept)
 * and holds a pointer, never a record. */
__attribute__((constructor)) static void
twin_set(void)
{
	*(void *volatile *)&otel_thread_ctx_v1 = (void *)not_a_record;
}
