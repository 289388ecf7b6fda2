/* SPDX-License-Identifier: Apache-2.0 */
/* The initial-exec half of libwtls-mixed.so (writer-tls-mixed.c). */
#include "config.h"

#include <stdatomic.h>

#include "writer.h"

extern __thread void *otel_thread_ctx_v1 __attribute__((tls_model("initial-exec")));

WRITER_TLS_ACCESSORS(__attribute__((visibility("default"))))
