/* SPDX-License-Identifier: Apache-2.0 */
/* usage: global-reload-host PLUGIN
 *
 * A plugin host that loads PLUGIN (global-reload-plugin.c, which depends
 * on libfcgi) RTLD_GLOBAL, calls it, unloads it, maps something where
 * libfcgi was (any allocation may take that hole) and loads and calls it
 * again: libfcgi comes back at other addresses.  Prints the plugin's
 * results; the shim must pass the second call to the library now loaded
 * (it once called the unmapped old copy and crashed). */
#include "config.h"

#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

static uintptr_t lo, hi;

static int
find(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	if (!strstr(info->dlpi_name, "libfcgi.so"))
		return 0;
	lo = ~(uintptr_t)0;
	hi = 0;
	for (int k = 0; k < info->dlpi_phnum; k++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[k];
		uintptr_t a = info->dlpi_addr + p->p_vaddr;

		if (p->p_type != PT_LOAD)
			continue;
		if (a < lo)
			lo = a;
		if (a + p->p_memsz > hi)
			hi = a + p->p_memsz;
	}
	return 1;
}

static int
round_(const char *path, int n)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	int (*plug)(void);

	if (!h) {
		printf("dlopen: %s\n", dlerror());
		return 1;
	}
	plug = (int (*)(void))dlsym(h, "plug");
	if (!plug)
		return 1;
	lo = hi = 0;
	(void)dl_iterate_phdr(find, NULL);
	printf("round %d: FCGX_Accept_r() = %d\n", n, plug());
	dlclose(h);
	return 0;
}

int
main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc != 2 || round_(argv[1], 0) != 0 || !hi)
		return 1;
	/* libfcgi's old addresses, if it is gone; else nothing to take. */
	lo &= ~(uintptr_t)4095;
	hi = (hi + 4095) & ~(uintptr_t)4095;
	(void)mmap((void *)lo, hi - lo, PROT_NONE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	return round_(argv[1], 1);
}
