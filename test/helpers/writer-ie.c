/* SPDX-License-Identifier: Apache-2.0 */
/* writer-ie: the executable uses libwtls-def.so's otel_thread_ctx_v1 with
 * the initial-exec model (a GOT slot filled through R_X86_64_TPOFF64). */
#include "config.h"

#include <stdatomic.h>

#include "writer.h"

extern __thread void *otel_thread_ctx_v1 __attribute__((tls_model("initial-exec")));

WRITER_TLS_ACCESSORS()

WRITER_TLS_MAIN("ie")
