/* SPDX-License-Identifier: Apache-2.0 */
/* A small OTEP-4947 writer whose threads come and go while ctxdump stops
 * it (the executable defines and exports otel_thread_ctx_v1, local-exec).
 *
 *   churn N          start N long-lived threads, each with a known valid
 *                    record: trace id = 16 bytes of (index + 1), span id =
 *                    8 bytes of (0xa0 + index), flags 01, one attribute
 *                    (index 0, "worker-<index>").  The main thread has no
 *                    record.  Prints "READY <pid> <gone-tid> <tid>..." where
 *                    gone-tid is a thread that has already exited, then
 *                    blocks until stdin is closed and exits 0.
 *   churn --churn N  in addition, a spawner thread keeps creating 8
 *                    threads every 0.5 ms; each sets a record, lives about
 *                    200 us and exits (reader.md §2.1).
 *   churn --odd N    in addition, one thread with hostile bytes in its name
 *                    and attribute values (control bytes, invalid UTF-8),
 *                    announced as "ODD <tid>" before READY: trace id 16 x
 *                    0xee, span id 8 x 0xdd, flags 03, attributes index 0
 *                    "x<01>y", index 1 "<c3>(", index 2 "€", index 200 "z".
 *   churn --vfork N  in addition, one thread that is nearly always blocked in
 *                    vfork() (its child sleeps 1.5 s): a thread that cannot
 *                    enter ptrace-stop, like one in D state.  Announced as
 *                    "VFORK <tid>" before READY.
 *   churn --spin N   in addition, one thread that spins until stdin is
 *                    closed (a thread that is always runnable), announced
 *                    as "SPIN <tid>" before READY.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "target-threads.h"

#define MAX_THREADS 64

static struct target_worker workers[MAX_THREADS];
static pthread_barrier_t started;
static atomic_bool stopping;

static void *
short_lived(void *arg)
{
	struct record r;
	struct timespec ts = {0, 200000};

	fill(&r, (unsigned)(long)arg, "short");
	publish(&r);
	nanosleep(&ts, NULL);
	publish(NULL);
	return NULL;
}

static void *
spawner(void *arg)
{
	struct timespec ts = {0, 500000};
	pthread_attr_t attr;
	long k = 0;

	(void)arg;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	while (!atomic_load(&stopping)) {
		int j;

		for (j = 0; j < 8; j++) {
			pthread_t t;

			if (pthread_create(&t, &attr, short_lived,
					   (void *)(32 + (k++ % 32))) != 0)
				break;
		}
		nanosleep(&ts, NULL);
	}
	pthread_attr_destroy(&attr);
	return NULL;
}

static void *
odd(void *arg)
{
	static const uint8_t attrs[] = {0, 3, 'x',  1,    'y',  1,   2, 0xc3, '(',
					2, 3, 0xe2, 0x82, 0xac, 200, 1, 'z'};
	static struct record r;

	memset(r.h.trace_id, 0xee, sizeof(r.h.trace_id));
	memset(r.h.span_id, 0xdd, sizeof(r.h.span_id));
	r.h.trace_flags = 3;
	memcpy(r.attrs, attrs, sizeof(attrs));
	r.h.attrs_data_size = sizeof(attrs);
	r.h.valid = 1;
	prctl(PR_SET_NAME, "o\n\x1b\xff\"\\d", 0, 0, 0);
	*(pid_t *)arg = (pid_t)syscall(SYS_gettid);
	publish(&r);
	pthread_barrier_wait(&started);
	for (;;)
		pause();
	return NULL;
}

static void *
spin(void *arg)
{
	*(pid_t *)arg = (pid_t)syscall(SYS_gettid);
	pthread_barrier_wait(&started);
	while (!atomic_load_explicit(&stopping, memory_order_relaxed))
		;
	return NULL;
}

static void *
gone(void *arg)
{
	*(pid_t *)arg = (pid_t)syscall(SYS_gettid);
	return NULL;
}

int
main(int argc, char **argv)
{
	bool churn = false, with_odd = false, with_vfork = false, with_spin = false;
	struct target_vforker vfork_thread = {.child_sleep = {1, 500000000},
					      .started = &started,
					      .stopping = &stopping};
	pid_t odd_tid = 0, spin_tid = 0;
	pthread_t vf, spinner;
	pthread_t t, sp;
	pid_t gone_tid = 0;
	unsigned n, i;
	char buf[64];
	int a = 1;

	for (; a < argc && argv[a][0] == '-'; a++) {
		if (strcmp(argv[a], "--churn") == 0)
			churn = true;
		else if (strcmp(argv[a], "--odd") == 0)
			with_odd = true;
		else if (strcmp(argv[a], "--vfork") == 0)
			with_vfork = true;
		else if (strcmp(argv[a], "--spin") == 0)
			with_spin = true;
	}
	if (a >= argc) {
		fprintf(stderr,
			"usage: churn [--churn] [--odd] [--vfork] [--spin] N\n");
		return 2;
	}
	n = (unsigned)atoi(argv[a]);
	if (n < 1 || n > 32)
		n = 4;

	if (pthread_create(&t, NULL, gone, &gone_tid) != 0 ||
	    pthread_join(t, NULL) != 0)
		return 1;
	pthread_barrier_init(&started, NULL, n + 1 + with_odd + with_vfork + with_spin);
	for (i = 0; i < n; i++) {
		workers[i] = (struct target_worker){.index = i, .started = &started};
		if (pthread_create(&t, NULL, target_worker_run, &workers[i]) != 0)
			return 1;
	}
	if (with_odd && pthread_create(&t, NULL, odd, &odd_tid) != 0)
		return 1;
	if (with_vfork &&
	    pthread_create(&vf, NULL, target_vforker_run, &vfork_thread) != 0)
		return 1;
	if (with_spin && pthread_create(&spinner, NULL, spin, &spin_tid) != 0)
		return 1;
	pthread_barrier_wait(&started);
	if (with_odd)
		printf("ODD %d\n", (int)odd_tid);
	if (with_vfork)
		printf("VFORK %d\n", (int)vfork_thread.tid);
	if (with_spin)
		printf("SPIN %d\n", (int)spin_tid);
	if (churn && pthread_create(&sp, NULL, spawner, NULL) != 0)
		return 1;

	printf("READY %d %d", (int)getpid(), (int)gone_tid);
	for (i = 0; i < n; i++)
		printf(" %d", (int)workers[i].tid);
	printf("\n");
	fflush(stdout);

	while (read(0, buf, sizeof(buf)) > 0)
		;
	atomic_store(&stopping, true);
	if (churn)
		pthread_join(sp, NULL);
	if (with_vfork)
		pthread_join(vf, NULL);
	if (with_spin)
		pthread_join(spinner, NULL);
	return 0;
}
