/* SPDX-License-Identifier: Apache-2.0 */
/* Stands in for a library whose constructor loads an OpenTelemetry SDK
 * plugin RTLD_LOCAL before the shim's constructor runs (preloaded after
 * libctxshim.so, its constructor runs first; a library the program links
 * would do the same): libwtls-tlsdesc.so then defines otel_thread_ctx_v1
 * outside the global scope, where dlsym(RTLD_DEFAULT) and dlsym(RTLD_NEXT)
 * do not look.  Never closed: the plugin stays, as an SDK would. */
#include "config.h"

#include <dlfcn.h>

__attribute__((constructor)) static void
load_writer_first(void)
{
	(void)dlopen("libwtls-tlsdesc.so", RTLD_NOW | RTLD_LOCAL);
}
