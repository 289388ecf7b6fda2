/* SPDX-License-Identifier: Apache-2.0 */
/* deep-stack DEPTH PAD: a thread with a 16 MiB stack calls deep() DEPTH + 1
 * times, each frame holding PAD bytes more, and waits in pause(2) at the
 * bottom: stacks larger than 4 MiB and deeper than 4096 frames for
 * ctxdump's --stack-size and -n 0 (test-ctxdump-cli.c).  Prints
 * "READY <pid> <tid>" once there; exits when stdin is closed. */
#include "config.h"

#include <alloca.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

/* found in .dynsym, so that ctxdump accepts the process */
__thread void *otel_thread_ctx_v1;

static size_t pad;
static atomic_int bottom;

int deep(unsigned n);

/* Never set: the compiler cannot tell that the bottom never returns (it
 * would call deep() infinitely recursive). */
static volatile int leave;

/* The bottom: says where, then waits. */
__attribute__((noinline)) static int
bottom_wait(void)
{
	atomic_store(&bottom, (int)syscall(SYS_gettid));
	while (!leave)
		pause();
	return 0;
}

/* Not a loop, not a tail call: the frame is used after the call. */
__attribute__((noinline)) int
deep(unsigned n)
{
	volatile char *frame = alloca(pad + 1);

	frame[0] = (char)n;
	if (n == 0)
		return bottom_wait();
	return deep(n - 1) + frame[0];
}

static void *
run(void *arg)
{
	return (void *)(long)deep((unsigned)(long)arg);
}

int
main(int argc, char **argv)
{
	pthread_attr_t a;
	pthread_t th;
	char line[64];

	if (argc != 3) {
		fprintf(stderr, "usage: deep-stack DEPTH PAD\n");
		return 64;
	}
	pad = (size_t)atol(argv[2]);
	if (pthread_attr_init(&a) != 0 ||
	    pthread_attr_setstacksize(&a, 16u << 20) != 0 ||
	    pthread_create(&th, &a, run, (void *)atol(argv[1])) != 0)
		return 1;
	while (!atomic_load(&bottom))
		usleep(1000);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("READY %d %d\n", (int)getpid(), atomic_load(&bottom));
	while (fgets(line, sizeof(line), stdin))
		;
	return 0;
}
