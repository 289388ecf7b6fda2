/* SPDX-License-Identifier: Apache-2.0 */
/* Libraries mapped while ctxdump records (test-ctxdump-live.c):
 *
 *   late-dlopen DIR
 *
 * prints "READY <pid>", then on each line "load" on stdin dlopen()s
 * DIR/liblate-a.so and starts a thread blocked in its late_a(), waits
 * 300 ms (less than the second ctxdump record waits between two readings
 * of the module list), does the same with DIR/liblate-b.so and late_b(),
 * and prints "LOADED".  Exits 0 when stdin is closed. */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int block[2];

struct late {
	void (*fn)(int);
};

static void *
late_main(void *arg)
{
	struct late *l = arg;

	l->fn(block[0]);
	return NULL;
}

static int
load(const char *dir, const char *name, const char *sym, struct late *l)
{
	char path[4096];
	pthread_t th;
	void *h;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "late-dlopen: %s\n", dlerror());
		return -1;
	}
	*(void **)&l->fn = dlsym(h, sym);
	if (!l->fn || pthread_create(&th, NULL, late_main, l) != 0)
		return -1;
	return pthread_detach(th);
}

int
main(int argc, char **argv)
{
	static struct late a, b;
	char line[64];

	if (argc != 2) {
		fprintf(stderr, "usage: late-dlopen DIR\n");
		return 64;
	}
	if (pipe(block) != 0)
		return 1;
	printf("READY %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (strcmp(line, "load\n") != 0 || a.fn)
			continue;
		if (load(argv[1], "liblate-a.so", "late_a", &a) != 0)
			return 1;
		usleep(300000);
		if (load(argv[1], "liblate-b.so", "late_b", &b) != 0)
			return 1;
		printf("LOADED\n");
		fflush(stdout);
	}
	return 0;
}
