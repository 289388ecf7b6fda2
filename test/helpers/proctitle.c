/* SPDX-License-Identifier: Apache-2.0 */
/* A pre-forking server's start, with no tracing code: like nginx's
 * ngx_setproctitle() (and PostgreSQL's, sendmail's), it moves environ to
 * the heap and writes its process title over the memory of argv and of the
 * original environment strings, then forks a worker.
 *
 *   proctitle    the child prints "CHILD <pid>", the parent "PARENT <pid>";
 *                both wait for stdin to close.
 */
#include "config.h"

#include "fork-wait.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Copy environ to the heap, then overwrite argv[0] .. the end of the last
 * original environment string with the title (NUL-padded). */
static int
set_title(char **argv, const char *title)
{
	char *start = argv[0], *end = argv[0] + strlen(argv[0]) + 1;
	size_t n = 0, i;
	char **env;

	for (i = 1; argv[i]; i++)
		if (argv[i] == end)
			end = argv[i] + strlen(argv[i]) + 1;
	while (environ[n])
		n++;
	env = calloc(n + 1, sizeof(*env));
	if (!env)
		return -1;
	for (i = 0; i < n; i++) {
		if (environ[i] == end)
			end = environ[i] + strlen(environ[i]) + 1;
		env[i] = strdup(environ[i]);
		if (!env[i])
			return -1;
	}
	environ = env;
	memset(start, 0, (size_t)(end - start));
	strncpy(start, title, (size_t)(end - start) - 1);
	return 0;
}

int
main(int argc, char **argv)
{
	(void)argc;
	/* Not UTF-8, and long enough to cover the environment strings. */
	if (set_title(argv, "\xff\xfe master process, a title over argv and environ") <
	    0)
		return 1;
	return fork_and_wait();
}
