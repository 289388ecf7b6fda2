/* SPDX-License-Identifier: Apache-2.0 */
/* otel_thread_ctx_v1 in a shared object reached two ways: general dynamic
 * here (through a function no one calls) and initial-exec in the
 * accessors (writer-tls-mixed-ie.c).  Linked with lld, which keeps both
 * DTPMOD64 + DTPOFF64 and TPOFF64 against the variable (GNU ld turns the
 * general-dynamic code into initial-exec).  dlopen()ed by writer-dlopen,
 * the threads that existed before publish through initial-exec code
 * only: their DTVs never learn of the module, yet their records are in
 * its static TLS block. */
#include "config.h"

__attribute__((visibility("default"))) __thread void *otel_thread_ctx_v1;

__attribute__((visibility("default"))) void *writer_tls_addr(void);

void *
writer_tls_addr(void)
{
	return &otel_thread_ctx_v1;
}
