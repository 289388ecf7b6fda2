/* SPDX-License-Identifier: Apache-2.0 */
/* A process that becomes another program image with execve(), for the
 * recording-across-exec test (test-ctxdump-record.c).  No tracing code:
 * run it under libctxshim.so with OTEL_SERVICE_NAME and TRACEPARENT.
 *
 *   exec-self before SERVICE TRACEPARENT
 *
 * spins in exec_before_spin() (user space, no system calls) on a thread
 * of its own and prints "READY <pid>"; on a line "exec" on stdin, execs
 * itself as
 *
 *   exec-self after
 *
 * with OTEL_SERVICE_NAME=SERVICE and TRACEPARENT=TRACEPARENT instead.
 * The new image spins in exec_after_spin() the same way and prints
 * "READY <pid>"; it exits with status 0 when stdin is closed.  The two
 * spin functions are distinct symbols, so a frame names which image it
 * came from, and the spinning thread never blocks, so every round finds
 * it in its function. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static atomic_ulong spins;

__attribute__((noinline)) void exec_before_spin(void);
__attribute__((noinline)) void exec_after_spin(void);

__attribute__((noinline)) void
exec_before_spin(void)
{
	for (;;)
		atomic_fetch_add_explicit(&spins, 1, memory_order_relaxed);
}

__attribute__((noinline)) void
exec_after_spin(void)
{
	for (;;)
		atomic_fetch_add_explicit(&spins, 1, memory_order_relaxed);
}

static void *
spinner(void *arg)
{
	((void (*)(void))arg)();
	return NULL;
}

/* The environment with name=value set (replacing an earlier one). */
static char **
env_with(char **env, const char *name, const char *value)
{
	size_t n = 0, nl = strlen(name), i, j = 0;
	char **ne, *kv;

	while (env[n])
		n++;
	ne = calloc(n + 2, sizeof(*ne));
	kv = malloc(nl + strlen(value) + 2);
	if (!ne || !kv)
		exit(3);
	sprintf(kv, "%s=%s", name, value);
	for (i = 0; i < n; i++)
		if (strncmp(env[i], name, nl) != 0 || env[i][nl] != '=')
			ne[j++] = env[i];
	ne[j++] = kv;
	ne[j] = NULL;
	return ne;
}

int
main(int argc, char **argv)
{
	bool before = argc == 4 && strcmp(argv[1], "before") == 0;
	char line[64];
	pthread_t t;

	if (!before && !(argc == 2 && strcmp(argv[1], "after") == 0)) {
		fprintf(stderr, "usage: exec-self before SERVICE TRACEPARENT\n");
		return 2;
	}
	if (pthread_create(&t, NULL, spinner,
			   (void *)(before ? exec_before_spin : exec_after_spin)) != 0)
		return 3;
	printf("READY %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (before && strcmp(line, "exec\n") == 0) {
			char *nargv[] = {argv[0], "after", NULL};
			char **env = env_with(environ, "OTEL_SERVICE_NAME", argv[2]);

			env = env_with(env, "TRACEPARENT", argv[3]);
			execve(argv[0], nargv, env);
			return 4;
		}
	}
	return 0;
}
