/* SPDX-License-Identifier: Apache-2.0 */
/* dlopen-main LIB ARGS...: a program that links none of the libraries its
 * work needs.  It dlopen()s LIB (RTLD_LOCAL, so LIB's own dependencies
 * are loaded local to it, as an application's plugin's are) and runs its
 * helper_main(ARGS...).  Used to check that hooks bind to libraries that
 * appear only after start-up. */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>

int
main(int argc, char **argv)
{
	int (*fn)(int, char **);
	void *lib;

	if (argc < 2) {
		fprintf(stderr, "usage: dlopen-main LIB [ARGS...]\n");
		return 64;
	}
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "dlopen-main: %s\n", dlerror());
		return 1;
	}
	*(void **)&fn = dlsym(lib, "helper_main");
	if (!fn) {
		fprintf(stderr, "dlopen-main: %s\n", dlerror());
		return 1;
	}
	return fn(argc - 1, argv + 1);
}
