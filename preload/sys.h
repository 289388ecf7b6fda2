/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Raw system calls for the shim's own I/O.  The shim interposes read(),
 * close() and friends, so calling the libc names from inside the shim would
 * re-enter our own hooks; these never do, and they touch no libc state, so
 * they are safe in constructors, fork handlers and signal handlers. */

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static inline int
sys_open(const char *path, int flags, int mode)
{
	return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

static inline ssize_t
sys_read(int fd, void *buf, size_t len)
{
	return (ssize_t)syscall(SYS_read, fd, buf, len);
}

static inline ssize_t
sys_write(int fd, const void *buf, size_t len)
{
	return (ssize_t)syscall(SYS_write, fd, buf, len);
}

static inline int
sys_close(int fd)
{
	return (int)syscall(SYS_close, fd);
}

static inline pid_t
sys_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* Can the 8 bytes at p be read?  rt_sigprocmask() copies its set before
 * it checks how: with an invalid one (-1) it fails with EFAULT for an
 * unreadable set and with EINVAL otherwise, and changes nothing.  Every
 * program makes that call, so seccomp filters allow it (unlike
 * process_vm_readv()).  p must not be 0, which the call takes for "no
 * set".  Changes errno. */
static inline bool
sys_readable8(uintptr_t p)
{
	return syscall(SYS_rt_sigprocmask, -1, p, NULL, (size_t)8) == 0 ||
	       errno != EFAULT;
}

/* A close-on-exec copy of fd where applications do not manage descriptors
 * themselves: at min or above; under an RLIMIT_NOFILE at or below min, among
 * the top 64 numbers the limit allows, else the lowest free above 2 -- never
 * 0, 1 or 2, which a program started with them closed gets from its next
 * open() and takes for stdin, stdout or stderr.  fd stays open.  -1 if no
 * number above 2 is free.  Changes errno. */
int sys_fd_high(int fd, int min);

/* Read a whole small file (e.g. /proc/self/comm) into buf, NUL-terminated.
 * Returns the length or a negative errno. */
ssize_t sys_read_file(const char *path, char *buf, size_t cap);

struct maps_entry;
/* Each line of /proc/self/maps, read through buf (cap bytes: a signal
 * stack's few hundred do) and parsed (proc-context/maps.h), to fn until it
 * returns true; a line longer than buf comes without its pathname
 * (path_len 0).  Raw system calls only: async-signal-safe if fn is.
 * Returns true if fn stopped the scan.  Changes errno. */
bool sys_maps_scan(char *buf,
		   size_t cap,
		   bool (*fn)(const struct maps_entry *e, void *arg),
		   void *arg);
