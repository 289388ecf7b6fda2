/* SPDX-License-Identifier: Apache-2.0 */
/* plugin-host PLUGIN: a program that links none of the libraries its
 * plugin uses (test-preload-plugins.c).  First it calls the shim's
 * g_thread_pool_push() blindly, as a program would that finds the name
 * with dlsym() before any GLib is loaded, and reports what dlerror() says
 * afterwards: the shim's failed binding must leave no message behind.
 * Then it dlopen()s PLUGIN RTLD_LOCAL (its GLib, libmicrohttpd, libevent
 * and libuv are loaded local to it, invisible to RTLD_NEXT) and runs its
 * plugin_main().  Prints the same with and without the shim. */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>

int
main(int argc, char **argv)
{
	int (*push)(void *, void *, void **);
	int (*fn)(void);
	const char *e;
	void *lib;

	if (argc != 2) {
		fprintf(stderr, "usage: plugin-host PLUGIN\n");
		return 64;
	}
	/* The shim's export when preloaded; NULL (and a message, read now)
	 * without it. */
	*(void **)&push = dlsym(RTLD_DEFAULT, "g_thread_pool_push");
	(void)dlerror();
	if (push)
		(void)push(NULL, NULL, NULL);
	e = dlerror();
	printf("dlerror after a blind call: %s\n", e ? e : "none");

	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "plugin-host: %s\n", dlerror());
		return 1;
	}
	*(void **)&fn = dlsym(lib, "plugin_main");
	if (!fn) {
		fprintf(stderr, "plugin-host: %s\n", dlerror());
		return 1;
	}
	(void)dlerror();
	if (fn() != 0)
		return 1;
	e = dlerror();
	printf("dlerror after the plugin: %s\n", e ? e : "none");
	fflush(stdout);
	return 0;
}
