/* SPDX-License-Identifier: Apache-2.0 */
/* read() in a loop, for counting the instructions the shim adds to a read
 * that is not on a tracked connection (issue 8, B3).
 *
 *   bench-readloop file|pipe N
 *
 * file: N one-byte read()s from a regular file of N bytes (an unlinked
 * temporary file); pipe: N one-byte read()s from a pipe filled beforehand
 * (N <= 65536, the default pipe capacity).  One warm-up read before the
 * loop binds every symbol.  Run under callgrind with
 * --toggle-collect=readloop_run: only the loop (with read() and whatever
 * the shim puts in front of it) is counted; the difference per call with
 * and without LD_PRELOAD=libctxshim.so is the shim's cost. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READLOOP_PIPE_MAX 65536

/* noinline: callgrind's --toggle-collect needs it as a function */
__attribute__((noinline)) long readloop_run(int fd, long n);

__attribute__((noinline)) long
readloop_run(int fd, long n)
{
	long i, sum = 0;
	char c;

	for (i = 0; i < n; i++) {
		if (read(fd, &c, 1) != 1)
			return -1;
		sum += c;
	}
	return sum;
}

static int
make_file(long n)
{
	char path[] = "/tmp/ctxshim-readloop.XXXXXX", buf[4096];
	int fd = mkstemp(path);
	long left = n + 1;

	if (fd < 0)
		return -1;
	unlink(path);
	memset(buf, 'x', sizeof(buf));
	while (left > 0) {
		size_t k = left > (long)sizeof(buf) ? sizeof(buf) : (size_t)left;

		if (write(fd, buf, k) != (ssize_t)k)
			return -1;
		left -= (long)k;
	}
	return lseek(fd, 0, SEEK_SET) == 0 ? fd : -1;
}

static int
make_pipe(long n)
{
	static char buf[READLOOP_PIPE_MAX];
	int p[2];

	if (n + 1 > READLOOP_PIPE_MAX || pipe(p) < 0)
		return -1;
	memset(buf, 'x', sizeof(buf));
	if (write(p[1], buf, (size_t)n + 1) != n + 1)
		return -1;
	return p[0];
}

int
main(int argc, char **argv)
{
	long n, r;
	char c;
	int fd;

	if (argc != 3 || (strcmp(argv[1], "file") && strcmp(argv[1], "pipe"))) {
		fprintf(stderr, "usage: bench-readloop file|pipe N\n");
		return 64;
	}
	n = strtol(argv[2], NULL, 10);
	if (n < 1) {
		fprintf(stderr, "bench-readloop: N must be positive\n");
		return 64;
	}
	fd = argv[1][0] == 'f' ? make_file(n) : make_pipe(n);
	if (fd < 0) {
		perror("bench-readloop: setup");
		return 1;
	}
	if (read(fd, &c, 1) != 1) /* warm-up: lazy binding, first-call paths */
		return 1;
	r = readloop_run(fd, n);
	if (r < 0) {
		fprintf(stderr, "bench-readloop: short read\n");
		return 1;
	}
	printf("%ld reads\n", n);
	return 0;
}
