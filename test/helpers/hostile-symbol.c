/* SPDX-License-Identifier: Apache-2.0 */
/* An executable that exports a symbol named otel_thread_ctx_v1 of the
 * wrong kind, for ctxdump's hostile target tests.  Built once per kind:
 *
 *   hostile-sym-object   a global (not thread-local) pointer, STT_OBJECT
 *   hostile-sym-size     a thread-local int: STT_TLS of size 4
 *   hostile-sym-array    a thread-local array: STT_TLS of size 64
 *   hostile-sym-func     a function
 *
 * Each holds what would look like a valid record if it were read, prints
 * "READY <pid>" and blocks until stdin is closed. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "thread-record.h"

static _Alignas(8) uint8_t rec[TREC_MAX_SIZE];

#define EXPORT __attribute__((visibility("default"), used))

#if defined(HOSTILE_OBJECT)
EXPORT void *otel_thread_ctx_v1;
#define SET(p) (otel_thread_ctx_v1 = (p))
#elif defined(HOSTILE_SIZE)
EXPORT __thread uint32_t otel_thread_ctx_v1;
#define SET(p) (otel_thread_ctx_v1 = (uint32_t)(uintptr_t)(p))
#elif defined(HOSTILE_ARRAY)
EXPORT __thread void *otel_thread_ctx_v1[8];
#define SET(p) (otel_thread_ctx_v1[0] = (p))
#elif defined(HOSTILE_FUNC)
void otel_thread_ctx_v1(void);

EXPORT void
otel_thread_ctx_v1(void)
{
}
#define SET(p) ((void)(p))
#else
#error "one of HOSTILE_OBJECT, HOSTILE_SIZE, HOSTILE_ARRAY, HOSTILE_FUNC"
#endif

int
main(void)
{
	char line[64];

	memset(rec, 0x55, TREC_HEADER_SIZE);
	rec[24] = 1;
	rec[26] = rec[27] = 0;
	SET(rec);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("READY %d\n", (int)getpid());
	while (fgets(line, sizeof(line), stdin))
		;
	return 0;
}
