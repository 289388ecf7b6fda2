/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "bind.h"

#include "sys.h"

#include <dlfcn.h>
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
