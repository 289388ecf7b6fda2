/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "log.h"
#include "maps.h"
#include "sys.h"

#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

/* Applications close or dup2() over low descriptors freely (daemons close
 * 0..1023 at start-up, shells juggle 0..9).  Keeping our log descriptor
 * high makes it unlikely that we write into one of theirs. */
#define LOG_FD_MIN 700

int ctxshim_log_fd = -1;
static int log_fd_kind;

int
sys_fd_high(int fd, int min)
{
	struct rlimit rl;
	int hi = (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, min);

	/* EINVAL: min is at or past the limit (ulimit -n 256); EMFILE: no
	 * number from min on is free */
	if (hi >= 0 || (errno != EINVAL && errno != EMFILE))
		return hi;
	if (syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &rl) == 0 &&
	    rl.rlim_cur > 64 + 3 && rl.rlim_cur <= (rlim_t)min) {
		hi = (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC,
				  (int)(rl.rlim_cur - 64));
		if (hi >= 0)
			return hi;
	}
	return (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 3);
}

ssize_t
sys_read_file(const char *path, char *buf, size_t cap)
{
	size_t len = 0;
	int fd;

	if (cap == 0)
		return -EINVAL;
	fd = sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	while (len < cap - 1) {
		ssize_t r = sys_read(fd, buf + len, cap - 1 - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	sys_close(fd);
	buf[len] = '\0';
	return (ssize_t)len;
}

/* One parsed line of buf to fn (sys_maps_scan()); cut: the line did not
 * fit, its pathname is not all there. */
static bool
maps_scan_line(const char *line,
	       size_t len,
	       bool cut,
	       bool (*fn)(const struct maps_entry *e, void *arg),
	       void *arg)
{
	struct maps_entry e;

	if (maps_parse_line(line, len, &e) < 0)
		return false;
	if (cut) {
		e.path = NULL;
		e.path_len = 0;
	}
	return fn(&e, arg);
}

bool
sys_maps_scan(char *buf,
	      size_t cap,
	      bool (*fn)(const struct maps_entry *e, void *arg),
	      void *arg)
{
	int fd = sys_open("/proc/self/maps", O_RDONLY | O_CLOEXEC, 0);
	size_t len = 0;
	bool stop = false, rest = false; /* rest: of a line given cut */

	if (fd < 0)
		return false;
	while (!stop) {
		ssize_t r = sys_read(fd, buf + len, cap - len);
		char *line = buf, *nl;

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
		while (!stop && (nl = memchr(line, '\n', len - (size_t)(line - buf)))) {
			if (!rest)
				stop = maps_scan_line(line, (size_t)(nl - line), false,
						      fn, arg);
			rest = false;
			line = nl + 1;
		}
		len -= (size_t)(line - buf);
		memmove(buf, line, len);
		if (!stop && len == cap) {
			/* a line longer than buf: its start, then skip to its end */
			if (!rest)
				stop = maps_scan_line(buf, len, true, fn, arg);
			rest = true;
			len = 0;
		}
	}
	sys_close(fd);
	return stop;
}

/* Writing a line of ours must never kill the application: the log and the
 * event log are often its stderr, a pipe or a socket whose reader can go
 * away (journald restarted, "| head" done), and write(2) then raises
 * SIGPIPE, whose default action ends the process; a regular file that
 * would grow past RLIMIT_FSIZE (ulimit -f) raises SIGXFSZ, whose default
 * action ends it too.  The application's signal state stays as it was: a
 * socket gets send(MSG_NOSIGNAL); anything else but a regular file, and a
 * regular file while the limit is finite, is written with that signal
 * blocked in this thread, and a signal that the write raised (pending
 * after it, not before) is taken back with a zero-timeout sigtimedwait()
 * before the mask is restored.  A signal the application had pending
 * already stays pending (ours merges into it) and is delivered as it would
 * have been.  Raw system calls only: async-signal-safe and free of libc
 * state; the kernel's sigset_t on x86_64 is one 64-bit word.  *kind caches
 * what fd is (0 until the first write). */
enum { SINK_UNKNOWN, SINK_FILE, SINK_SOCKET, SINK_OTHER };

/* write(2) with sig blocked; a sig it raised (its failure with err) taken
 * back. */
static ssize_t
sink_write_blocked(int fd, const void *buf, size_t len, int sig, int err)
{
	const uint64_t set = 1ull << (sig - 1);
	const struct timespec zero = {0, 0};
	uint64_t old, pending;
	bool was_pending;
	ssize_t r;

	if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, &set, &old, sizeof(old)) != 0)
		return -1; /* cannot happen; the line is lost, never the process */
	was_pending = syscall(SYS_rt_sigpending, &pending, sizeof(pending)) == 0 &&
		      (pending & set);
	r = sys_write(fd, buf, len);
	if (r < 0 && errno == err && !was_pending &&
	    syscall(SYS_rt_sigpending, &pending, sizeof(pending)) == 0 &&
	    (pending & set)) {
		int saved_errno = errno;

		(void)syscall(SYS_rt_sigtimedwait, &set, NULL, &zero, sizeof(set));
		errno = saved_errno;
	}
	(void)syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, sizeof(old));
	return r;
}

ssize_t
ctxshim_sink_write(int fd, int *kind, const void *buf, size_t len)
{
	struct rlimit rl;
	ssize_t r;
	int k = *kind;

	if (k == SINK_UNKNOWN) {
		struct stat st;

		if (syscall(SYS_fstat, fd, &st) != 0)
			k = SINK_OTHER;
		else if (S_ISREG(st.st_mode))
			k = SINK_FILE;
		else if (S_ISSOCK(st.st_mode))
			k = SINK_SOCKET;
		else
			k = SINK_OTHER;
		*kind = k;
	}
	if (k == SINK_FILE) {
		/* Asked at each write: the application may lower it. */
		if (syscall(SYS_prlimit64, 0, RLIMIT_FSIZE, NULL, &rl) == 0 &&
		    rl.rlim_cur == RLIM_INFINITY)
			return sys_write(fd, buf, len);
		return sink_write_blocked(fd, buf, len, SIGXFSZ, EFBIG);
	}
	if (k == SINK_SOCKET) {
		r = (ssize_t)syscall(SYS_sendto, fd, buf, len, MSG_NOSIGNAL, NULL, 0);
		if (r >= 0 || errno != ENOTSOCK)
			return r;
		*kind = SINK_OTHER; /* the number was reused */
	}
	return sink_write_blocked(fd, buf, len, SIGPIPE, EPIPE);
}

int
ctxshim_sink_open(const char *path)
{
	/* O_NONBLOCK: opening a FIFO for writing waits for a reader, and
	 * this runs in the constructor, before main(): a reader not started
	 * yet, or gone, kept the program from starting.  Without one the
	 * open fails (ENXIO) and only the log is lost.  Writes then block as
	 * before. */
	int fd = sys_open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK,
			  0644);

	if (fd >= 0)
		(void)syscall(SYS_fcntl, fd, F_SETFL, O_APPEND);
	return fd;
}

void
ctxshim_log_open(const char *target)
{
	int fd;

	if (!target || !*target)
		return;
	if (strcmp(target, "stderr") == 0) {
		fd = sys_fd_high(2, LOG_FD_MIN);
	} else {
		int f = ctxshim_sink_open(target);

		if (f < 0)
			return;
		fd = sys_fd_high(f, LOG_FD_MIN);
		sys_close(f);
	}
	if (fd >= 0) {
		log_fd_kind = SINK_UNKNOWN;
		ctxshim_log_fd = fd;
	}
}

void
ctxshim_log(const char *fmt, ...)
{
	char buf[1024];
	int saved_errno = errno, out = ctxshim_log_fd;
	va_list ap;
	int n, m;

	if (out < 0)
		return;
	n = snprintf(buf, sizeof(buf), "ctxshim[%d]: ", (int)getpid());
	va_start(ap, fmt);
	m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	n += m;
	if ((size_t)n > sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	/* A reader that went away does not come back, nor room in a file
	 * at its size limit: stop there. */
	if (ctxshim_sink_write(out, &log_fd_kind, buf, (size_t)n) < 0 &&
	    (errno == EPIPE || errno == EFBIG))
		ctxshim_log_fd = -1;
	errno = saved_errno;
}
