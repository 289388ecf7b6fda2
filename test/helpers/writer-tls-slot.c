/* SPDX-License-Identifier: Apache-2.0 */
/* otel_thread_ctx_v1 in a shared object built -mtls-dialect=gnu2 (as
 * writer-tls-lib.c), which also tells where its TLSDESC descriptor is, so
 * that dlopen-loop can break it (test-ctxdump-reload.c). */
#include "config.h"

#include <stdatomic.h>

#include "writer.h"

__attribute__((visibility("default"))) __thread void *otel_thread_ctx_v1;

WRITER_TLS_ACCESSORS(__attribute__((visibility("default"))))

void *writer_tls_slot(void);

/* The GOT entry of the descriptor that the accessors' TLS call uses (the
 * one ctxdump reads, from the relocation against the variable). */
__attribute__((visibility("default"))) void *
writer_tls_slot(void)
{
	void *p = 0;

#if defined(__x86_64__)
	__asm__("leaq otel_thread_ctx_v1@TLSDESC(%%rip), %0" : "=r"(p));
#endif
	return p;
}
