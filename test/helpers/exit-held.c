/* SPDX-License-Identifier: Apache-2.0 */
/* A process whose last thread ends while ctxdump can only see it end
 * (test-ctxdump-exits.c):
 *
 *   exit-held
 *
 * starts one thread, prints "READY <pid> <tid>" and ends its main thread
 * (pthread_exit()): a zombie leader.  The thread ends when a line (or
 * EOF) comes on stdin.  A tracer that seized it and does not wait for it
 * keeps it listed as a zombie: a process whose threads have all exited
 * but one that is not reaped yet, as one blocked in the kernel's exit
 * path is (not one held by a core dump: that waits before it exits). */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

static void *
last(void *arg)
{
	char c;

	(void)arg;
	printf("READY %d %ld\n", (int)getpid(), (long)syscall(SYS_gettid));
	fflush(stdout);
	while (read(0, &c, 1) == 1 && c != '\n')
		;
	return NULL;
}

int
main(void)
{
	pthread_t t;

	if (pthread_create(&t, NULL, last, NULL) != 0) {
		perror("exit-held: pthread_create");
		return 1;
	}
	pthread_exit(NULL);
}
