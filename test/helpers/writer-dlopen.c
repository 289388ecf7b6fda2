/* SPDX-License-Identifier: Apache-2.0 */
/* writer-dlopen LIB: loads LIB (libwtls-tlsdesc.so or libwtls-gd.so) with
 * dlopen() after its worker threads already run, so the variable's TLS is
 * set up for existing threads: in glibc's static TLS surplus, or, with
 * GLIBC_TUNABLES=glibc.rtld.optional_static_tls=0, as dynamic TLS reached
 * through each thread's DTV (allocated only when a thread touches it). */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>

#include "writer.h"

static void (*dl_set)(void *rec);
static void *(*dl_get)(void);

static void
forward_set(void *rec)
{
	dl_set(rec);
}

static void *
forward_get(void)
{
	return dl_get();
}

static int
load_lib(const struct writer_tls_ops *ops, int argc, char **argv)
{
	void *h;

	if (argc < 2) {
		fprintf(stderr, "usage: writer-dlopen LIBRARY\n");
		return -1;
	}
	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "writer-dlopen: %s\n", dlerror());
		return -1;
	}
	*(void **)&dl_set = dlsym(h, "writer_tls_set");
	*(void **)&dl_get = dlsym(h, "writer_tls_get");
	if (!dl_set || !dl_get) {
		fprintf(stderr, "writer-dlopen: %s lacks writer_tls_set/get\n",
			argv[1]);
		return -1;
	}
	/* The library stays loaded until exit: threads point into it. */
	return 0;
}

int
main(int argc, char **argv)
{
	struct writer_tls_ops ops = {
		.model = "dlopen",
		.load = load_lib,
		.set = forward_set,
		.get = forward_get,
	};

	return writer_main(argc, argv, &ops);
}
