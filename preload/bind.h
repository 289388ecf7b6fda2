/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Finds the definition of name that our hook hides (RTLD_NEXT, or the given
 * symbol version with dlvsym).  self is our own hook, so that a loader
 * quirk that hands it back to us cannot recurse.  A required symbol that
 * cannot be found ends the process with a message (a hook without its real
 * function cannot keep its promise to pass calls through); an optional one
 * returns NULL. */
void *ctxshim_bind(const char *name, const char *version, const void *self,
		   bool required);

/* ctxshim_bind(name, version, self, false), then, when RTLD_NEXT does not
 * see the library (loaded RTLD_LOCAL as a plugin's dependency after
 * start-up), the first of sonames (NULL-terminated) that is already loaded
 * and defines name (dlopen RTLD_NOLOAD, which also pins it).  Returns NULL
 * if none has it, never ends the process, and leaves no dlerror() message
 * behind.  A hook whose library is not found must retry at its next call:
 * the library may be loaded later. */
void *ctxshim_bind_loaded(const char *const *sonames,
			  const char *name,
			  const char *version,
			  const void *self);

/* For a hook file's constructor: true if one of sonames (NULL-terminated)
 * is loaded already, so that binding now finds it.  The RTLD_NOLOAD handle
 * is kept (it pins the library our pointers will point into); no
 * dlerror() message is left behind, and errno is kept. */
bool ctxshim_lib_loaded(const char *const *sonames);

/* The executable segments' range [*lo, *hi) of the loaded object that
 * contains addr (a function of a library we interpose), so a hook can tell
 * the library's calls to its own exported functions (through the PLT) from
 * the application's.  Returns false if no object contains addr. */
bool ctxshim_text_range(const void *addr, uintptr_t *lo, uintptr_t *hi);
