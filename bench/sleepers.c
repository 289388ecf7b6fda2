/* SPDX-License-Identifier: Apache-2.0 */
/* The benchmark target for ctxdump, gdb and eu-stack (issue 8, B5-B7).
 *
 *   bench-sleepers N   run N threads in total (the main thread and N - 1
 *                      workers), every worker blocked in read() on a pipe
 *                      that never gets data, like the idle workers of a
 *                      thread-pool server.  Prints "READY <pid>" once every
 *                      worker runs, then blocks until stdin is closed and
 *                      exits 0.
 *
 * No tracing code: run it under libctxshim.so with a TRACEPARENT so that
 * every thread carries a valid record (threads inherit their creator's
 * context), which is what ctxdump and the floor then read.  Default stack
 * size, as a real server would have. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define SLEEPERS_MAX 100000

static int never[2];
static pthread_barrier_t started;

static void *
sleeper(void *arg)
{
	char c;

	(void)arg;
	pthread_barrier_wait(&started);
	/* Blocks forever: nobody writes to the pipe; exit() ends us. */
	while (read(never[0], &c, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

int
main(int argc, char **argv)
{
	char buf[64];
	long n, i;

	n = argc > 1 ? strtol(argv[1], NULL, 10) : 1000;
	if (n < 1 || n > SLEEPERS_MAX) {
		fprintf(stderr, "bench-sleepers: thread count must be 1..%d\n",
			SLEEPERS_MAX);
		return 64;
	}
	if (pipe(never) < 0) {
		perror("bench-sleepers: pipe");
		return 1;
	}
	pthread_barrier_init(&started, NULL, (unsigned)n);
	for (i = 1; i < n; i++) {
		pthread_t th;
		int e = pthread_create(&th, NULL, sleeper, NULL);

		if (e) {
			fprintf(stderr, "bench-sleepers: thread %ld: error %d\n", i, e);
			return 1;
		}
		pthread_detach(th);
	}
	pthread_barrier_wait(&started);
	printf("READY %d\n", (int)getpid());
	fflush(stdout);
	while (read(0, buf, sizeof(buf)) > 0)
		;
	return 0;
}
