/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>

/* Finds the definition of name that our hook hides (RTLD_NEXT, or the given
 * symbol version with dlvsym).  self is our own hook, so that a loader
 * quirk that hands it back to us cannot recurse.  A required symbol that
 * cannot be found ends the process with a message (a hook without its real
 * function cannot keep its promise to pass calls through); an optional one
 * returns NULL. */
void *ctxshim_bind(const char *name, const char *version, const void *self,
		   bool required);
