/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What threads --fork and proctitle do once set up: fork; the child prints
 * "CHILD <pid>", the parent "PARENT <pid>"; both wait for stdin to close
 * (the test's handshake) and the parent then reaps the child. */

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static void
wait_stdin_eof(void)
{
	char buf[64];

	while (read(0, buf, sizeof(buf)) > 0)
		;
}

/* Returns the exit status for main(): 0 in the child; in the parent the
 * child's exit status, 1 if it did not exit or the fork failed. */
static __attribute__((unused)) int
fork_and_wait(void)
{
	pid_t child;
	int status;

	fflush(stdout);
	child = fork();
	if (child < 0)
		return 1;
	if (child == 0) {
		printf("CHILD %d\n", (int)getpid());
		fflush(stdout);
		wait_stdin_eof();
		return 0;
	}
	printf("PARENT %d\n", (int)getpid());
	fflush(stdout);
	wait_stdin_eof();
	waitpid(child, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
