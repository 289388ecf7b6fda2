/* SPDX-License-Identifier: Apache-2.0 */
/* Threads in known states for ctxdump's state and zombie-leader tests
 * (test-ctxdump-states.c).  No tracing code: run it under libctxshim.so
 * with a TRACEPARENT, so that every thread carries a valid record.
 *
 *   states [--spin] [--leader-exit] [--extra N] [--first] [--nap]
 *
 * starts three named sleepers: "reader" blocked in read() on stdin (it
 * exits the process with status 0 when stdin is closed), "sleep-1" and
 * "sleep-2" blocked in read() on a pipe nobody writes to.  With --spin, a
 * fourth thread "spin) R (x" (a name with the characters /proc/TID/stat
 * puts around the name) loops in user space without system calls.  Prints
 * "READY <pid> <tid>..." (the threads in that order) once all of them run.
 * Then the main thread blocks in read() on the pipe as well or, with
 * --leader-exit, ends with pthread_exit(): the thread-group leader is a
 * zombie while the other threads run.  --extra N adds N more threads
 * "extra" blocked like sleep-1 (not in READY): enough threads for
 * ctxdump to read their names on a second thread.  --first starts, before
 * all others, a thread "first" (not in READY) that returns once the reader
 * reads a 'q' on stdin: the thread a reader of an exited leader uses
 * first, gone during a recording.  --nap: the main thread sleeps in
 * nanosleep() instead (a stop finds it with ERESTART_RESTARTBLOCK, not
 * the ERESTARTSYS of read()). */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int never[2], first_quit[2];
static pthread_barrier_t started;
static pid_t tids[4];
static atomic_ulong spins;

static void
block_on(int fd)
{
	char c;

	while (read(fd, &c, 1) < 0 && errno == EINTR)
		;
}

static void *
reader(void *arg)
{
	char buf[64];

	(void)arg;
	tids[0] = (pid_t)syscall(SYS_gettid);
	pthread_barrier_wait(&started);
	for (;;) {
		ssize_t r = read(0, buf, sizeof(buf));

		if (r > 0 && memchr(buf, 'q', (size_t)r) &&
		    write(first_quit[1], "q", 1) < 0)
			break;
		if (r == 0 || (r < 0 && errno != EINTR))
			break;
	}
	exit(0);
}

static void *
first_main(void *arg)
{
	(void)arg;
	block_on(first_quit[0]);
	return NULL;
}

static void *
sleeper(void *arg)
{
	tids[(long)arg] = (pid_t)syscall(SYS_gettid);
	pthread_barrier_wait(&started);
	block_on(never[0]);
	return NULL;
}

static void *
spinner(void *arg)
{
	(void)arg;
	tids[3] = (pid_t)syscall(SYS_gettid);
	pthread_barrier_wait(&started);
	for (;;)
		atomic_fetch_add_explicit(&spins, 1, memory_order_relaxed);
	return NULL;
}

static void *
extra_main(void *arg)
{
	(void)arg;
	block_on(never[0]);
	return NULL;
}

int
main(int argc, char **argv)
{
	static const char *const names[] = {"reader", "sleep-1", "sleep-2",
					    "spin) R (x"};
	void *(*const fns[])(void *) = {reader, sleeper, sleeper, spinner};
	bool spin = false, leader_exit = false, first = false, nap = false;
	unsigned n, i;
	long extra = 0;
	int k;

	for (k = 1; k < argc; k++) {
		if (strcmp(argv[k], "--spin") == 0) {
			spin = true;
		} else if (strcmp(argv[k], "--leader-exit") == 0) {
			leader_exit = true;
		} else if (strcmp(argv[k], "--first") == 0) {
			first = true;
		} else if (strcmp(argv[k], "--nap") == 0) {
			nap = true;
		} else if (strcmp(argv[k], "--extra") == 0 && k + 1 < argc) {
			extra = strtol(argv[++k], NULL, 10);
		} else {
			fprintf(stderr,
				"usage: states [--spin] [--leader-exit] [--extra N] "
				"[--first] [--nap]\n");
			return 64;
		}
	}
	if (pipe(never) < 0 || pipe(first_quit) < 0) {
		perror("states: pipe");
		return 1;
	}
	if (first) {
		pthread_t th;

		if (pthread_create(&th, NULL, first_main, NULL) != 0) {
			fprintf(stderr, "states: pthread_create failed\n");
			return 1;
		}
		pthread_setname_np(th, "first");
		pthread_detach(th);
	}
	n = spin ? 4 : 3;
	pthread_barrier_init(&started, NULL, n + 1);
	for (i = 0; i < n; i++) {
		pthread_t th;
		int e = pthread_create(&th, NULL, fns[i], (void *)(long)i);

		if (e) {
			fprintf(stderr, "states: pthread_create: %s\n", strerror(e));
			return 1;
		}
		pthread_setname_np(th, names[i]);
		pthread_detach(th);
	}
	for (; extra > 0; extra--) {
		pthread_t th;

		if (pthread_create(&th, NULL, extra_main, NULL) != 0) {
			fprintf(stderr, "states: pthread_create failed\n");
			return 1;
		}
		pthread_setname_np(th, "extra");
		pthread_detach(th);
	}
	pthread_barrier_wait(&started);
	printf("READY %d", (int)getpid());
	for (i = 0; i < n; i++)
		printf(" %d", (int)tids[i]);
	printf("\n");
	fflush(stdout);
	if (leader_exit)
		pthread_exit(NULL);
	while (nap) {
		struct timespec ts = {3600, 0};

		(void)nanosleep(&ts, NULL);
	}
	block_on(never[0]);
	return 0;
}
