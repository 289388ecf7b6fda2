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

WRITER_TLS_ACCESSORS(__attribute__((visibility("default"))))
