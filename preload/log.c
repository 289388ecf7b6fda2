/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "log.h"
#include "sys.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Applications close or dup2() over low descriptors freely (daemons close
 * 0..1023 at start-up, shells juggle 0..9).  Keeping our log descriptor
 * high makes it unlikely that we write into one of theirs. */
#define LOG_FD_MIN 700

int ctxshim_log_fd = -1;

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

void
ctxshim_log_open(const char *target)
{
	int fd, hi;

	if (!target || !*target)
		return;
	if (strcmp(target, "stderr") == 0) {
		fd = (int)syscall(SYS_fcntl, 2, F_DUPFD_CLOEXEC, LOG_FD_MIN);
	} else {
		int f = sys_open(target, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

		if (f < 0)
			return;
		hi = (int)syscall(SYS_fcntl, f, F_DUPFD_CLOEXEC, LOG_FD_MIN);
		if (hi >= 0) {
			sys_close(f);
			fd = hi;
		} else {
			fd = f;
		}
	}
	if (fd >= 0)
		ctxshim_log_fd = fd;
}

void
ctxshim_log(const char *fmt, ...)
{
	char buf[1024];
	int saved_errno = errno;
	va_list ap;
	int n, m;

	if (ctxshim_log_fd < 0)
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
	(void)!sys_write(ctxshim_log_fd, buf, (size_t)n);
	errno = saved_errno;
}
