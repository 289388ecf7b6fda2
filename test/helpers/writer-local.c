/* SPDX-License-Identifier: Apache-2.0 */
/* writer-local: like writer-le, but otel_thread_ctx_v1 is a file-scope
 * static (STB_LOCAL in .symtab, not exported).  Built once alone, where
 * ctxdump reads it (the only symbol of that name), and once with
 * writer-local-twin.c, a second translation unit with a static of the
 * same name, where ctxdump cannot tell which one is the writer's and must
 * read neither (test-ctxdump-static.c).  main() is writer-main-lib.c's. */
#include "config.h"

#include <stdatomic.h>

#include "writer.h"

static __thread void *otel_thread_ctx_v1 __attribute__((tls_model("local-exec")));

WRITER_TLS_ACCESSORS()
