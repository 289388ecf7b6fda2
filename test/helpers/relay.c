/* SPDX-License-Identifier: Apache-2.0 */
/* A process whose threads all live a few ms, for ctxdump to read through
 * (test-ctxdump-exits.c).  No writer of its own: run it under the shim,
 * which publishes the process context and defines otel_thread_ctx_v1.
 *
 *   relay K MS
 *
 * starts K relays of threads: each sleeps MS ms in relay_wait(), starts
 * the next and ends.  Prints "READY <pid>", then the main thread ends
 * (pthread_exit()): a zombie leader, so every thread ctxdump can read the
 * process through lives MS ms.  The process ends only when killed. */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long life_ns;

static __attribute__((noinline)) void
relay_wait(void)
{
	struct timespec ts = {life_ns / 1000000000L, life_ns % 1000000000L};

	nanosleep(&ts, NULL);
	__asm__ volatile(""); /* no tail call: relay_wait stays on the stack */
}

static void *
relay(void *arg)
{
	pthread_attr_t attr;
	pthread_t t;

	relay_wait();
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	while (pthread_create(&t, &attr, relay, arg) != 0)
		relay_wait();
	pthread_attr_destroy(&attr);
	return NULL;
}

int
main(int argc, char **argv)
{
	pthread_attr_t attr;
	unsigned k, i;

	if (argc != 3 || atoi(argv[1]) <= 0 || atoi(argv[2]) <= 0) {
		fprintf(stderr, "usage: relay K MS\n");
		return 2;
	}
	k = (unsigned)atoi(argv[1]);
	life_ns = atol(argv[2]) * 1000000L;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	for (i = 0; i < k; i++) {
		pthread_t t;
		struct timespec gap = {0, life_ns / k};

		if (pthread_create(&t, &attr, relay, NULL) != 0) {
			perror("relay: pthread_create");
			return 1;
		}
		nanosleep(&gap, NULL); /* the relays' ends spread over MS */
	}
	pthread_attr_destroy(&attr);
	printf("READY %d\n", (int)getpid());
	fflush(stdout);
	pthread_exit(NULL);
}
