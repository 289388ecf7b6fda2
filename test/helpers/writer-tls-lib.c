/* SPDX-License-Identifier: Apache-2.0 */
/* Defines and exports otel_thread_ctx_v1 from a shared object.  Built
 * twice: -mtls-dialect=gnu2 (R_X86_64_TLSDESC, the OTEP's recommended
 * model) and -mtls-dialect=gnu (legacy general dynamic: DTPMOD64 +
 * DTPOFF64 and __tls_get_addr).  Linked by writer-tlsdesc / writer-gd and
 * dlopen()ed by writer-dlopen. */
#include "config.h"

#include <stdatomic.h>

#include "writer.h"

__attribute__((visibility("default"))) __thread void *otel_thread_ctx_v1;

__attribute__((visibility("default"))) void
writer_tls_set(void *rec)
{
	/* OTEP-4947 publication: compiler fences and a volatile store. */
	atomic_signal_fence(memory_order_seq_cst);
	*(void *volatile *)&otel_thread_ctx_v1 = rec;
	atomic_signal_fence(memory_order_seq_cst);
}

__attribute__((visibility("default"))) void *
writer_tls_get(void)
{
	return *(void *volatile *)&otel_thread_ctx_v1;
}
