/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "bind.h"

#include "sys.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

static void
die(const char *what, const char *name, const char *why)
{
	char msg[512];
	size_t n = 0;
	const char *parts[] = {"ctxshim: ", what, " ", name, "(): ", why ? why : "not found",
			       "\n"};
	size_t i;

	/* Built by hand: stdio may be what is broken. */
	for (i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		size_t l = strlen(parts[i]);

		if (n + l >= sizeof(msg))
			l = sizeof(msg) - n - 1;
		memcpy(msg + n, parts[i], l);
		n += l;
	}
	(void)!sys_write(2, msg, n);
	abort();
}

void *
ctxshim_bind(const char *name, const char *version, const void *self, bool required)
{
	void *p;

	(void)dlerror();
	p = version ? dlvsym(RTLD_NEXT, name, version) : dlsym(RTLD_NEXT, name);
	if (p && p == self)
		die("binding resolved to our own hook for", name, "refusing to recurse");
	if (!p && required)
		die("cannot resolve real", name, dlerror());
	return p;
}
