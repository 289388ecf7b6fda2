/* SPDX-License-Identifier: Apache-2.0 */
/* An executable that exports a symbol named otel_thread_ctx_v1 of the
 * wrong kind, for ctxdump's hostile target tests.  Built once per kind:
 *
 *   hostile-sym-object   a global (not thread-local) pointer, STT_OBJECT
 *   hostile-sym-size     a thread-local int: STT_TLS of size 4
 *   hostile-sym-array    a thread-local array: STT_TLS of size 64
 *   hostile-sym-func     a function
 *   hostile-sym-ifunc    an IFUNC (STT_GNU_IFUNC) that nothing calls: its
 *                        resolver, which writes "RESOLVER RAN" to stderr,
 *                        runs only if someone looks the name up (dlsym())
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
#elif defined(HOSTILE_IFUNC)
static void
ifunc_target(void)
{
}

/* ld.so runs it for a relocation or a lookup of the name; the program
 * makes neither, so without the shim it never runs. */
static void (*ifunc_resolver(void))(void)
{
	static const char msg[] = "RESOLVER RAN\n";

	(void)!write(2, msg, sizeof(msg) - 1);
	return ifunc_target;
}

__attribute__((visibility("default"))) void otel_thread_ctx_v1(void)
	__attribute__((ifunc("ifunc_resolver")));
#define SET(p) ((void)(p))
#else
#error "one of HOSTILE_OBJECT, HOSTILE_SIZE, HOSTILE_ARRAY, HOSTILE_FUNC, HOSTILE_IFUNC"
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
