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
#include <unistd.h>

#include "relay-threads.h"

int
main(int argc, char **argv)
{
	if (argc != 3 || atoi(argv[1]) <= 0 || atoi(argv[2]) <= 0) {
		fprintf(stderr, "usage: relay K MS\n");
		return 2;
	}
	relay_life_ns = atol(argv[2]) * 1000000L;
	if (!relay_start((unsigned)atoi(argv[1]))) {
		perror("relay: pthread_create");
		return 1;
	}
	printf("READY %d\n", (int)getpid());
	fflush(stdout);
	pthread_exit(NULL);
}
