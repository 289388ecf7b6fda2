/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "bind.h"

#include "sys.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
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

/* dlerror() state is per thread and any dl*() call discards what it
 * holds (glibc >= 2.34, _dlerror_run()), so a lookup here, on whatever
 * application thread first calls a hook, cannot keep an error message the
 * application has not read yet; glibc offers no way to put one back.
 * What we can keep is not to leave a message of ours behind: each failed
 * lookup's message is consumed at once, so the thread's next dlerror()
 * returns NULL, as after any successful dl*() call of its own.  The hooks
 * of optional libraries also bind eagerly in constructors when the library
 * is loaded at start-up, so that most processes make no dl*() call on an
 * application thread at all. */
void *
ctxshim_bind(const char *name, const char *version, const void *self, bool required)
{
	void *p;

	p = version ? dlvsym(RTLD_NEXT, name, version) : dlsym(RTLD_NEXT, name);
	if (p && p == self)
		die("binding resolved to our own hook for", name, "refusing to recurse");
	if (!p) {
		const char *why = dlerror(); /* consumes the message */

		if (required)
			die("cannot resolve real", name, why);
	}
	return p;
}

void *
ctxshim_bind_loaded(const char *const *sonames,
		    const char *name,
		    const char *version,
		    const void *self)
{
	void *p = ctxshim_bind(name, version, self, false);
	size_t i;

	for (i = 0; !p && sonames && sonames[i]; i++) {
		/* RTLD_NOLOAD: never loads anything.  The reference kept on
		 * success pins the library, so p cannot outlive it. */
		void *lib = dlopen(sonames[i], RTLD_LAZY | RTLD_NOLOAD);

		if (!lib) {
			(void)dlerror();
			continue;
		}
		p = version ? dlvsym(lib, name, version) : dlsym(lib, name);
		if (!p || p == self) {
			p = NULL;
			(void)dlerror();
			(void)dlclose(lib);
		}
	}
	return p;
}

bool
ctxshim_lib_loaded(const char *const *sonames)
{
	int saved_errno = errno;
	bool found = false;
	size_t i;

	for (i = 0; !found && sonames[i]; i++) {
		found = dlopen(sonames[i], RTLD_LAZY | RTLD_NOLOAD) != NULL;
		if (!found)
			(void)dlerror();
	}
	errno = saved_errno;
	return found;
}

struct text_find {
	uintptr_t addr, lo, hi;
};

static int
text_find_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct text_find *f = data;
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	bool mine = false;
	ElfW(Half) i;

	(void)size;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t s = info->dlpi_addr + ph->p_vaddr, e = s + ph->p_memsz;

		if (ph->p_type != PT_LOAD)
			continue;
		if (f->addr >= s && f->addr < e)
			mine = true;
		if (ph->p_flags & PF_X) {
			lo = s < lo ? s : lo;
			hi = e > hi ? e : hi;
		}
	}
	if (!mine || hi == 0)
		return 0;
	f->lo = lo;
	f->hi = hi;
	return 1;
}

bool
ctxshim_text_range(const void *addr, uintptr_t *lo, uintptr_t *hi)
{
	struct text_find f = {(uintptr_t)addr, 0, 0};

	if (!addr || dl_iterate_phdr(text_find_cb, &f) != 1)
		return false;
	*lo = f.lo;
	*hi = f.hi;
	return true;
}
