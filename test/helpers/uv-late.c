/* SPDX-License-Identifier: Apache-2.0 */
/* libuv loaded after start-up: this program does not link it, and
 * dlopen()s it RTLD_LOCAL (as a plugin's dependency would be), then starts
 * libuv's pool with a file-system request from the main thread, which
 * continues TRACEPARENT.  Prints a MAIN line with the main thread's
 * context and "STAT done" once the request completed. */
#include "config.h"

#include "ctxobs.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define CTX_TEXT 80

static void
stat_done(void *req)
{
	(void)req;
	printf("STAT done\n");
}

int
main(void)
{
	void *(*default_loop)(void);
	int (*fs_stat)(void *, void *, const char *, void (*)(void *));
	int (*run)(void *, int);
	/* a uv_fs_t, which is smaller, without <uv.h> */
	static char req[4096] __attribute__((aligned(16)));
	char c[CTX_TEXT];
	void *uv;

	uv = dlopen("libuv.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!uv) {
		fprintf(stderr, "uv-late: %s\n", dlerror());
		return 1;
	}
	*(void **)&default_loop = dlsym(uv, "uv_default_loop");
	*(void **)&fs_stat = dlsym(uv, "uv_fs_stat");
	*(void **)&run = dlsym(uv, "uv_run");
	if (!default_loop || !fs_stat || !run)
		abort();
	ctxobs_format(c, sizeof(c));
	printf("MAIN %s\n", c);
	if (fs_stat(default_loop(), req, "/", stat_done) != 0)
		abort();
	run(default_loop(), 0 /* UV_RUN_DEFAULT */);
	return 0;
}
