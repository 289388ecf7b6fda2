/* SPDX-License-Identifier: Apache-2.0 */
/* writer-le: the executable defines otel_thread_ctx_v1 and accesses it
 * with the local-exec model (no relocation at all); it is exported into
 * .dynsym with -Wl,--export-dynamic-symbol as the OTEP requires. */
#include "config.h"

#include <stdatomic.h>

#include "writer.h"

__thread void *otel_thread_ctx_v1 __attribute__((tls_model("local-exec")));

WRITER_TLS_ACCESSORS()

WRITER_TLS_MAIN("le")
