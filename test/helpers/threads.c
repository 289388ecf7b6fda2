/* SPDX-License-Identifier: Apache-2.0 */
/* A multi-threaded program with no tracing code.
 *
 *   threads N            N workers compute and print a checksum each, in
 *                        order, then the number of malloc arenas; the
 *                        output is deterministic.  The workers allocate
 *                        nothing, so the process keeps glibc's main arena
 *                        alone: a shim that frees or allocates on them
 *                        makes each attach an arena of its own (a tcache
 *                        and, up to 8 per core, a new 64 MiB heap).
 *   threads --wait N     additionally, once every worker runs, print
 *                        "READY <pid> <tid>..." and block until stdin is
 *                        closed (the test's readiness handshake).
 *   threads --fork       fork; the child prints "CHILD <pid>" and both wait
 *                        for stdin to close.
 */
#include "config.h"

#include "fork-wait.h"

#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_THREADS 1024

static pthread_barrier_t started;
static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
static pid_t tids[MAX_THREADS];
static unsigned long sums[MAX_THREADS];

/* How many arenas malloc_info() reports (one <heap nr=...> each). */
static int
arena_count(void)
{
	char *xml = NULL, *p;
	size_t len = 0;
	FILE *f = open_memstream(&xml, &len);
	int n = 0;

	if (!f || malloc_info(0, f) != 0 || fclose(f) != 0)
		return -1;
	for (p = xml; (p = strstr(p, "<heap nr=")); p++)
		n++;
	free(xml);
	return n;
}

static void *
worker(void *arg)
{
	long i = (long)arg;
	unsigned long s = 0, k;

	tids[i] = (pid_t)syscall(SYS_gettid);
	for (k = 0; k < 100000; k++)
		s = s * 31 + (unsigned long)(k ^ (unsigned long)i);
	sums[i] = s;
	pthread_barrier_wait(&started);
	/* Blocks while the main thread holds the gate (the --wait mode). */
	pthread_mutex_lock(&gate);
	pthread_mutex_unlock(&gate);
	return NULL;
}

int
main(int argc, char **argv)
{
	pthread_t th[MAX_THREADS];
	bool wait_mode = false;
	long n, i;

	if (argc > 1 && strcmp(argv[1], "--fork") == 0)
		return fork_and_wait();
	if (argc > 1 && strcmp(argv[1], "--wait") == 0) {
		wait_mode = true;
		argv++;
		argc--;
	}
	n = argc > 1 ? strtol(argv[1], NULL, 10) : 4;
	if (n < 1 || n > MAX_THREADS) {
		fprintf(stderr, "threads: thread count must be 1..%d\n", MAX_THREADS);
		return 2;
	}
	pthread_barrier_init(&started, NULL, (unsigned)n + 1);
	pthread_mutex_lock(&gate);
	for (i = 0; i < n; i++)
		if (pthread_create(&th[i], NULL, worker, (void *)i) != 0)
			return 1;
	pthread_barrier_wait(&started);
	if (wait_mode) {
		printf("READY %d", (int)getpid());
		for (i = 0; i < n; i++)
			printf(" %d", (int)tids[i]);
		printf("\n");
		fflush(stdout);
		wait_stdin_eof();
	}
	pthread_mutex_unlock(&gate);
	for (i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		if (!wait_mode)
			printf("thread %ld: %lu\n", i, sums[i]);
	}
	if (!wait_mode)
		printf("malloc arenas: %d\n", arena_count());
	printf("done\n");
	return 0;
}
