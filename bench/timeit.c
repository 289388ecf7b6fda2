/* SPDX-License-Identifier: Apache-2.0 */
/* Wall time of one command, for bench/run.sh (the shell's own fork and
 * date(1) calls would add more noise than the ~20 ms being measured).
 *
 *   bench-timeit OUT CMD [ARG...]
 *
 * Runs CMD with stdout to the file OUT (stderr to OUT.err, stdin from
 * /dev/null), measures fork to reaped exit with CLOCK_MONOTONIC and prints
 * "<wall_ns> <exit status>".  Exit status 0 unless CMD could not be run. */
#include "config.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t
timeit_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int
main(int argc, char **argv)
{
	char err_path[4096];
	uint64_t t0, t1;
	int out, err, in, st;
	pid_t child;

	if (argc < 3) {
		fprintf(stderr, "usage: bench-timeit OUT CMD [ARG...]\n");
		return 64;
	}
	snprintf(err_path, sizeof(err_path), "%s.err", argv[1]);
	out = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (out < 0 || err < 0 || in < 0) {
		perror("bench-timeit: open");
		return 2;
	}
	t0 = timeit_now_ns();
	child = fork();
	if (child < 0) {
		perror("bench-timeit: fork");
		return 2;
	}
	if (child == 0) {
		dup2(in, 0);
		dup2(out, 1);
		dup2(err, 2);
		execvp(argv[2], argv + 2);
		_exit(127);
	}
	if (waitpid(child, &st, 0) < 0) {
		perror("bench-timeit: waitpid");
		return 2;
	}
	t1 = timeit_now_ns();
	printf("%llu %d\n", (unsigned long long)(t1 - t0),
	       WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	return 0;
}
