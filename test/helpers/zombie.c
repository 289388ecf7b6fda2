/* SPDX-License-Identifier: Apache-2.0 */
/* A zombie that its parent reaps in the end: for tests of what the tools
 * say about a process that has exited and is not reaped yet.
 *
 *   zombie
 *
 * Forks a child that exits at once, waits until it has (without reaping
 * it), prints "READY <pid> <child pid>", and then reaps it and exits 0
 * once stdin is closed or on SIGTERM, SIGINT or SIGHUP.  A test that
 * kills a parent that does not reap instead (sh -c 'sleep 0 & exec sleep
 * 30') leaves the zombie to PID 1, which in a container may never reap
 * it. */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t child;

/* The end on a signal as on EOF: reap, then exit.  waitpid() and _exit()
 * are async-signal-safe. */
static void
on_signal(int sig)
{
	(void)sig;
	(void)waitpid(child, NULL, 0);
	_exit(0);
}

int
main(void)
{
	static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
	struct sigaction sa;
	siginfo_t si;
	char buf[64];
	size_t i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&sa.sa_mask, sigs[i]);
	/* before the fork: a signal from now on finds the handler, which
	 * reaps a child that exists */
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (sigaction(sigs[i], &sa, NULL) < 0) {
			perror("zombie: sigaction");
			return 1;
		}
	fflush(stdout);
	child = fork();
	if (child < 0) {
		perror("zombie: fork");
		return 1;
	}
	if (child == 0)
		_exit(0);
	/* WNOWAIT: returns once the child is a zombie and leaves it one */
	memset(&si, 0, sizeof(si));
	while (waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT) < 0)
		if (errno != EINTR) {
			perror("zombie: waitid");
			return 1;
		}
	printf("READY %d %d\n", (int)getpid(), (int)child);
	fflush(stdout);
	while (read(0, buf, sizeof(buf)) > 0)
		;
	(void)waitpid(child, NULL, 0);
	return 0;
}
