/* SPDX-License-Identifier: Apache-2.0 */
/* A target whose threads end while ctxdump holds it (test-ctxdump-exits.c).
 * The executable defines and exports otel_thread_ctx_v1 (local-exec).
 *
 *   exits [options] N
 *
 * starts N long-lived workers, worker i with a valid record: trace id 16
 * bytes of (i + 1), span id 8 bytes of (0xa0 + i), flags 01, attribute 0
 * "worker-<i>".  Prints "READY <pid> <tid>..." and exits 0 when stdin is
 * closed.  Options:
 *   --burst K    K spawner threads, each creating detached threads that set
 *                a record and exit at once, back to back: threads end all
 *                the time, also between ctxdump's listing and its stop.
 *   --vfork      one more thread nearly always blocked in vfork() (its child
 *                sleeps 2 s): a thread that cannot stop, so ctxdump holds
 *                the others until its deadline.  Announced as "VFORK <tid>".
 *   --vfork-gap MS  with --vfork: sleep MS between the children, a time in
 *                which that thread can stop.
 *   --leader-exit  the main thread ends (pthread_exit()) after READY instead
 *                of waiting for stdin: a zombie leader, and a process that
 *                ends only when killed.
 *   --relay K    K relays of threads: each sleeps 30 ms in relay_wait(),
 *                starts the next and ends.  With --leader-exit and N 0,
 *                every thread ctxdump can read memory through lives 30 ms.
 * N may be 0 (no workers). */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "relay-threads.h"
#include "target-threads.h"

#define MAX_WORKERS 32
/* Short-lived threads alive at once, at most: enough for some to end in
 * every stop, few enough for a sanitizer build's per-thread memory. */
#define MAX_LIVE 8

static struct target_worker workers[MAX_WORKERS];
static pthread_barrier_t started;
static atomic_bool stopping;
static atomic_int live;

static void *
ephemeral(void *arg)
{
	struct record r;

	fill(&r, (unsigned)(long)arg, "short");
	publish(&r);
	publish(NULL);
	atomic_fetch_sub(&live, 1);
	return NULL;
}

static void *
spawner(void *arg)
{
	pthread_attr_t attr;
	long k = (long)arg * 1000;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	while (!atomic_load(&stopping)) {
		struct timespec ts = {0, 50000};
		pthread_t t;

		if (atomic_load(&live) >= MAX_LIVE) {
			/* let some end first */
			nanosleep(&ts, NULL);
			continue;
		}
		atomic_fetch_add(&live, 1);
		if (pthread_create(&t, &attr, ephemeral, (void *)(32 + (k++ % 32))) !=
		    0) {
			atomic_fetch_sub(&live, 1);
			nanosleep(&ts, NULL);
		}
	}
	pthread_attr_destroy(&attr);
	return NULL;
}

static void
stdin_waiter(void)
{
	char buf[64];

	while (read(0, buf, sizeof(buf)) > 0)
		;
	atomic_store(&stopping, true);
	atomic_store(&relay_stop, true);
	/* the spawners and the vforker may be mid-call: end the process */
	exit(0);
}

int
main(int argc, char **argv)
{
	bool with_vfork = false, leader_exit = false;
	unsigned n, i, burst = 0, relays = 0;
	/* static: its thread outlives main() with --leader-exit */
	static struct target_vforker vfork_thread = {
		.child_sleep = {2, 0}, .started = &started, .stopping = &stopping};
	pthread_t t;
	int a = 1;

	for (; a < argc && argv[a][0] == '-'; a++) {
		if (strcmp(argv[a], "--burst") == 0 && a + 1 < argc)
			burst = (unsigned)atoi(argv[++a]);
		else if (strcmp(argv[a], "--vfork") == 0)
			with_vfork = true;
		else if (strcmp(argv[a], "--leader-exit") == 0)
			leader_exit = true;
		else if (strcmp(argv[a], "--relay") == 0 && a + 1 < argc)
			relays = (unsigned)atoi(argv[++a]);
		else if (strcmp(argv[a], "--vfork-gap") == 0 && a + 1 < argc) {
			long ms = atol(argv[++a]);

			vfork_thread.gap.tv_sec = ms / 1000;
			vfork_thread.gap.tv_nsec = ms % 1000 * 1000000;
		}
	}
	if (a >= argc) {
		fprintf(stderr, "usage: exits [--burst K] [--vfork [--vfork-gap MS]] "
				"[--leader-exit] [--relay K] N\n");
		return 2;
	}
	n = (unsigned)atoi(argv[a]);
	if (n > MAX_WORKERS)
		n = 4;
	if (burst > 8)
		burst = 8;
	if (relays > 8)
		relays = 8;

	pthread_barrier_init(&started, NULL, n + 1 + with_vfork);
	for (i = 0; i < n; i++) {
		workers[i] = (struct target_worker){.index = i, .started = &started};
		if (pthread_create(&t, NULL, target_worker_run, &workers[i]) != 0)
			return 1;
	}
	if (with_vfork &&
	    pthread_create(&t, NULL, target_vforker_run, &vfork_thread) != 0)
		return 1;
	pthread_barrier_wait(&started);
	for (i = 0; i < burst; i++)
		if (pthread_create(&t, NULL, spawner, (void *)(long)i) != 0)
			return 1;
	if (!relay_start(relays))
		return 1;
	if (with_vfork)
		printf("VFORK %d\n", (int)vfork_thread.tid);
	printf("READY %d", (int)getpid());
	for (i = 0; i < n; i++)
		printf(" %d", (int)workers[i].tid);
	printf("\n");
	fflush(stdout);
	if (leader_exit)
		pthread_exit(NULL);
	stdin_waiter();
	return 0;
}
