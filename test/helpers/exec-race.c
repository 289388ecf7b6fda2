/* SPDX-License-Identifier: Apache-2.0 */
/* A process that runs execve() while ctxdump holds some of its threads
 * (test-ctxdump-exits.c): the kernel's exec then waits for ctxdump to
 * collect the exits of the traced threads it killed, and meanwhile holds
 * a lock that every PTRACE_SEIZE of the process waits for.
 * The executable defines and exports otel_thread_ctx_v1 (local-exec).
 *
 *   exec-race N
 *
 * starts a worker with a valid record (fill(0, "worker"),
 * target-threads.h), then N threads that only sleep, then a watcher, in
 * that order: ctxdump lists and seizes them in that order too.  The watcher reads the worker's TracerPid in a
 * loop, and the moment it is not 0 (ctxdump has seized the worker and is
 * seizing the others) it execs this program as
 *
 *   exec-race after
 *
 * which publishes fill(1, "after") on its one thread, prints "EXECED <pid>"
 * and exits 0 when stdin is closed.  Before that the first image prints
 * "READY <pid>", and exits 0 when stdin is closed without an exec. */
#include "config.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "target-threads.h"

static pthread_barrier_t started;
static struct target_worker worker = {.index = 0, .started = &started};
static const char *self;

static void *
sleeper(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&started);
	for (;;)
		pause();
	return NULL;
}

static void *
watcher(void *arg)
{
	char path[64], buf[4096], *p;
	ssize_t n;
	int fd;

	(void)arg;
	pthread_barrier_wait(&started);
	/* the worker's tid is set before it reaches the barrier */
	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)worker.tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		exit(3);
	for (;;) {
		n = pread(fd, buf, sizeof(buf) - 1, 0);
		if (n <= 0)
			exit(3);
		buf[n] = '\0';
		p = strstr(buf, "\nTracerPid:");
		if (p && atoi(p + 11) != 0)
			break;
	}
	execl(self, self, "after", (char *)NULL);
	exit(3);
	return NULL;
}

static void
wait_stdin_eof(void)
{
	char b[64];

	while (read(STDIN_FILENO, b, sizeof(b)) > 0)
		;
}

int
main(int argc, char **argv)
{
	pthread_attr_t attr;
	pthread_t th;
	unsigned n, i;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc == 2 && strcmp(argv[1], "after") == 0) {
		static struct record r;

		fill(&r, 1, "after");
		publish(&r);
		printf("EXECED %d\n", (int)getpid());
		wait_stdin_eof();
		return 0;
	}
	if (argc != 2)
		return 2;
	self = "/proc/self/exe";
	n = (unsigned)atoi(argv[1]);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	pthread_barrier_init(&started, NULL, n + 3);
	if (pthread_create(&th, &attr, target_worker_run, &worker) != 0)
		return 3;
	for (i = 0; i < n; i++)
		if (pthread_create(&th, &attr, sleeper, NULL) != 0)
			return 3;
	if (pthread_create(&th, &attr, watcher, NULL) != 0)
		return 3;
	pthread_barrier_wait(&started);
	printf("READY %d\n", (int)getpid());
	wait_stdin_eof();
	return 0;
}
