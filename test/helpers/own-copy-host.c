/* SPDX-License-Identifier: Apache-2.0 */
/* own-copy-host PLUGIN [LIB...]: dlopen()s each LIB, then PLUGIN, all
 * RTLD_LOCAL (as Perl's DynaLoader or Python load extensions), and runs
 * PLUGIN's own_copy_main() (helpers/own-copy.c, test-preload-plugins.c);
 * then unloads PLUGIN and does it all again.
 * A LIB is the real library loaded beside the plugin's copy: the shim's
 * fallback by soname finds it, and must not send the copy's calls
 * there.  With OWN_COPY_POINTER=1 in the environment, the host also calls
 * the plugin's function through the pointer own_copy_pointer() gives, and
 * has own_copy_pointer_check() say what it returned; with
 * OWN_COPY_LATE=1 too, the LIBs are loaded only after the first such call,
 * which is then made again. */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static int
load_libs(int argc, char **argv)
{
	int i;

	for (i = 2; i < argc; i++)
		if (!dlopen(argv[i], RTLD_NOW | RTLD_LOCAL)) {
			fprintf(stderr, "own-copy-host: %s\n", dlerror());
			return 1;
		}
	return 0;
}

int
main(int argc, char **argv)
{
	int late = getenv("OWN_COPY_POINTER") && getenv("OWN_COPY_LATE");
	int (*fn)(void);
	void *lib;
	int round, r = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: own-copy-host PLUGIN [LIB...]\n");
		return 64;
	}
	if (!late && load_libs(argc, argv) != 0)
		return 1;
	/* Twice: the plugin must unload at dlclose() (the shim keeps no
	 * reference to a caller), and loaded again, likely at the same
	 * addresses, its calls must still reach its own copy. */
	for (round = 0; round < 2; round++) {
		lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
		if (!lib) {
			fprintf(stderr, "own-copy-host: %s\n", dlerror());
			return 1;
		}
		*(void **)&fn = dlsym(lib, "own_copy_main");
		if (!fn) {
			fprintf(stderr, "own-copy-host: %s\n", dlerror());
			return 1;
		}
		r |= fn();
		if (getenv("OWN_COPY_POINTER")) {
			void *(*(*ptr)(void))(void);
			void (*check)(void *);

			*(void **)&ptr = dlsym(lib, "own_copy_pointer");
			*(void **)&check = dlsym(lib, "own_copy_pointer_check");
			if (!ptr || !check) {
				fprintf(stderr, "own-copy-host: %s\n", dlerror());
				return 1;
			}
			check(ptr()());
			if (late) {
				late = 0;
				if (load_libs(argc, argv) != 0)
					return 1;
				check(ptr()());
			}
		}
		fflush(stdout);
		dlclose(lib);
		lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
		printf("round %d: the plugin %s after dlclose\n", round,
		       lib ? "is still loaded" : "is unloaded");
		if (lib) {
			dlclose(lib);
			r = 1;
		}
	}
	return r;
}
