/* SPDX-License-Identifier: Apache-2.0 */
/* libnames-emfile.so: preloaded into ctxdump (test-ctxdump-hostile.c), it
 * fails the openat() of a thread's name (".../comm" or ".../stat") with
 * EMFILE: on any thread but the main one, or with NAMES_EMFILE=all on
 * every thread.  The names thread's file table is a copy of ctxdump's
 * as that thread started, and may be full where the main thread's is
 * not; a limit alone cannot choose which of the two runs out. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static int
is_name(const char *path)
{
	size_t l = strlen(path);

	if (l >= 5 && strcmp(path + l - 5, "/comm") == 0)
		return 1;
	if (l < 5 || strcmp(path + l - 5, "/stat") != 0)
		return 0;
	/* also "TID/stat" under the task directory's descriptor (stop.c
	 * read_task_stat_at(), without STOP_STATE_AT_STOP; old: let through,
	 * and the names read there) */
	return strstr(path, "task") || strspn(path, "0123456789") == l - 5;
}

EXPORT int
openat(int dirfd, const char *path, int flags, ...)
{
	const char *all = getenv("NAMES_EMFILE");
	mode_t mode = 0;

	if (flags & (O_CREAT | O_TMPFILE)) {
		va_list ap;

		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	if (is_name(path) &&
	    ((all && strcmp(all, "all") == 0) || syscall(SYS_gettid) != getpid())) {
		errno = EMFILE;
		return -1;
	}
	return (int)syscall(SYS_openat, dirfd, path, flags, mode);
}
