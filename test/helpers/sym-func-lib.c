/* SPDX-License-Identifier: Apache-2.0 */
/* libsym-func.so: a library that exports a function named
 * otel_thread_ctx_v1, for ctxdump's hostile target tests.  Preloaded
 * beside libctxshim.so (before or after it), it makes the shim passive
 * (preload/shim.c other_writer()): ctxdump shows the shim's variable and
 * names this definition. */
#include "config.h"

__attribute__((visibility("default"))) void otel_thread_ctx_v1(void);

void
otel_thread_ctx_v1(void)
{
}
