/* SPDX-License-Identifier: Apache-2.0 */
/* A library with thread-local storage and none of the variables ctxdump
 * knows, initial-exec so that dlopen() gives it static TLS: writer-reload
 * loads it into the room an unloaded writer library left. */
#include "config.h"

__attribute__((visibility("default"))) __thread char reload_pad[256]
	__attribute__((tls_model("initial-exec")));

char *reload_pad_get(void);

__attribute__((visibility("default"))) char *
reload_pad_get(void)
{
	return reload_pad;
}
