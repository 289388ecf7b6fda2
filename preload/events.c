/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "events.h"

#include "log.h"
#include "sys.h"
#include "thread-ctx.h"
#include "w3c.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

/* As for the log: keep the descriptor out of the range applications
 * manage themselves. */
#define EVENTS_FD_MIN 701

int ctxshim_events_fd = -1;
static int events_fd_kind; /* for ctxshim_sink_write() */

void
ctxshim_events_open(const char *path)
{
	bool own;
	int fd, hi;

	if (!path || !*path)
		return;
	/* Whether fd is ours to close, not its number: with standard error
	 * closed ("2>&-") the file opens as 2, and left there it would take
	 * the program's writes to standard error. */
	own = strcmp(path, "stderr") != 0;
	fd = own ? ctxshim_sink_open(path) : 2;
	if (fd < 0) {
		ctxshim_log("cannot open the event log %s: %s%s", path, strerror(errno),
			    errno == ENXIO ? " (a FIFO without a reader?)" : "");
		return;
	}
	hi = sys_fd_high(fd, EVENTS_FD_MIN);
	if (own)
		sys_close(fd);
	if (hi < 0) {
		/* EBADF: only 2 can be closed here (a daemon, "2>&-") */
		ctxshim_log("cannot keep the event log %s: %s", path,
			    errno == EBADF ? "standard error is not open"
					   : "no descriptor free");
		return;
	}
	fd = hi;
	events_fd_kind = 0;
	ctxshim_events_fd = fd;
}

/* Decimal formatting by hand: snprintf is not async-signal-safe, and this
 * runs inside hooks. */
static char *
put_u64(char *p, unsigned long long v)
{
	char tmp[24];
	int n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

static char *
put_str(char *p, const char *s)
{
	size_t l = strlen(s);

	memcpy(p, s, l);
	return p + l;
}

void
ctxshim_event(enum ctxshim_ev ev,
	      int fd,
	      const struct ctxshim_ctx *c,
	      const char *reason)
{
	static const char *const names[] = {"attach", "switch", "detach"};
	char line[256], *p = line;
	int saved_errno = errno, out = ctxshim_events_fd;
	struct timespec ts;

	if (out < 0)
		return; /* turned off since the caller looked */

	clock_gettime(CLOCK_MONOTONIC, &ts);
	p = put_u64(p, (unsigned long long)ts.tv_sec * 1000000000ull +
			       (unsigned long long)ts.tv_nsec);
	p = put_str(p, " tid=");
	p = put_u64(p, (unsigned long long)sys_gettid());
	p = put_str(p, " fd=");
	if (fd < 0) {
		*p++ = '-';
	} else {
		p = put_u64(p, (unsigned long long)fd);
	}
	*p++ = ' ';
	p = put_str(p, names[ev]);
	p = put_str(p, " trace=");
	if (c) {
		w3c_hex_encode(p, c->trace_id, 16);
		p += 32;
	} else {
		*p++ = '-';
	}
	p = put_str(p, " span=");
	if (c) {
		w3c_hex_encode(p, c->span_id, 8);
		p += 16;
	} else {
		*p++ = '-';
	}
	p = put_str(p, " reason=");
	/* Reasons are our own short literals; bound them anyway. */
	if (strlen(reason) > 64)
		reason = "?";
	p = put_str(p, reason);
	*p++ = '\n';
	/* Never SIGPIPE or SIGXFSZ (log.c); a reader that went away does not
	 * come back, nor room in a file at its size limit. */
	if (ctxshim_sink_write(out, &events_fd_kind, line, (size_t)(p - line)) < 0 &&
	    (errno == EPIPE || errno == EFBIG))
		ctxshim_events_fd = -1;
	errno = saved_errno;
}
