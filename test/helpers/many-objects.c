/* SPDX-License-Identifier: Apache-2.0 */
/* A target that maps many objects (test-ctxdump-hostile.c): more than a
 * low RLIMIT_NOFILE lets ctxdump hold descriptors for.
 *
 *   many-objects DIR LIB N
 *
 * Copies LIB N times into DIR (each another inode, so another object to
 * ctxdump), dlopen()s each copy, prints "READY <pid>" and waits for the
 * end of stdin; then removes the copies and exits 0. */
#include "config.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void
copy(const char *from, const char *to)
{
	char buf[65536];
	ssize_t n;
	int in = open(from, O_RDONLY | O_CLOEXEC),
	    out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);

	if (in < 0 || out < 0) {
		perror(in < 0 ? from : to);
		exit(1);
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n) {
			perror(to);
			exit(1);
		}
	close(in);
	close(out);
}

int
main(int argc, char **argv)
{
	char path[4096], c;
	int i, n;

	if (argc != 4 || (n = atoi(argv[3])) <= 0) {
		fprintf(stderr, "usage: many-objects DIR LIB N\n");
		return 64;
	}
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/libmany-%d.so", argv[1], i);
		copy(argv[2], path);
		if (!dlopen(path, RTLD_NOW | RTLD_LOCAL)) {
			fprintf(stderr, "many-objects: %s\n", dlerror());
			return 1;
		}
	}
	printf("READY %d\n", (int)getpid());
	fflush(stdout);
	while (read(STDIN_FILENO, &c, 1) > 0)
		;
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/libmany-%d.so", argv[1], i);
		unlink(path);
	}
	return 0;
}
