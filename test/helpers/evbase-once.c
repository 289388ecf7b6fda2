/* SPDX-License-Identifier: Apache-2.0 */
/* libevent's event_base_once() in a program with no tracing code, linked
 * with libevent_core alone (hooks/hook-evhttp.c).  Started with
 * TRACEPARENT, the main thread has a context; the "early" thread
 * (early-thread.h) has none.
 *
 *   evbase-once ctx  the main thread schedules a zero timer, then the
 *                    early thread schedules one and runs the loop: a ONCE
 *                    line from each callback with what it shows, an AFTER
 *                    line once the loop is done; then the main thread runs
 *                    a loop with a timer of the early thread's and one of
 *                    its own
 *   evbase-once api  what the application gets back (a refused event, the
 *                    callback's arguments, a read event, timers pending
 *                    when their base is freed, with event_base_free() and
 *                    event_base_free_nofinalize(), event_base_loopexit()): no
 *                    contexts, the same output with and without the shim
 */
#include "config.h"

#include "ctxobs.h"
#include "early-thread.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <event2/event.h>

static struct event_base *base;
static const struct timeval zero = {0, 0};

static int
tid(void)
{
	return (int)syscall(SYS_gettid);
}

/* ---- ctx ---- */

static void
show(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	printf("ONCE %s tid=%d %s\n", (const char *)arg, tid(), ctxobs_shown());
}

static void
schedule(struct event_base *b, const char *name)
{
	if (event_base_once(b, -1, EV_TIMEOUT, show, (void *)name, &zero) != 0)
		abort();
}

static void
early_loop(void *unused)
{
	(void)unused;
	schedule(base, "without");
	if (event_base_dispatch(base) != 1)
		abort();
	printf("AFTER early tid=%d %s\n", tid(), ctxobs_shown());
	event_base_free(base);
	base = event_base_new();
	if (!base)
		abort();
	schedule(base, "early-on-main");
}

static int
cmd_ctx(void)
{
	printf("MAIN tid=%d %s\n", tid(), ctxobs_shown());
	base = event_base_new();
	if (!base)
		abort();
	/* Runs first, on the early thread, which shows nothing. */
	schedule(base, "with");
	on_early(early_loop, NULL);
	/* A thread with a context of its own runs a timer of the early
	 * thread's (passed on as it is: the thread's own context) and one of
	 * its own. */
	schedule(base, "main-on-main");
	if (event_base_dispatch(base) != 1)
		abort();
	printf("AFTER main tid=%d %s\n", tid(), ctxobs_shown());
	event_base_free(base);
	return 0;
}

/* ---- api ---- */

static void
args(evutil_socket_t fd, short what, void *arg)
{
	printf("CB fd=%s what=%#x arg=%s errno=%d\n", fd < 0 ? "-1" : "pipe",
	       (unsigned)what, (const char *)arg, errno);
	errno = 42;
}

static int
cmd_api(void)
{
	struct timeval hour = {3600, 0};
	int p[2], r;

	base = event_base_new();
	if (!base || pipe(p) != 0)
		abort();
	errno = 7;
	r = event_base_once(base, -1, EV_SIGNAL, args, "signal", &zero);
	printf("signal r=%d errno=%d\n", r, errno);
	errno = 7;
	r = event_base_once(base, -1, EV_TIMEOUT | EV_PERSIST, args, "persist", &zero);
	printf("persist r=%d errno=%d\n", r, errno);
	errno = 7;
	r = event_base_once(base, -1, EV_TIMEOUT, args, "timer", NULL);
	printf("timer r=%d errno=%d\n", r, errno);
	r = event_base_once(base, p[0], EV_READ, args, "read", NULL);
	printf("read r=%d\n", r);
	if (write(p[1], "x", 1) != 1)
		abort();
	errno = 9;
	r = event_base_dispatch(base);
	printf("dispatch r=%d errno=%d\n", r, errno);
	/* Pending when the base goes: libevent frees it without a call. */
	r = event_base_once(base, -1, EV_TIMEOUT, args, "never", &hour);
	printf("pending r=%d\n", r);
	r = event_base_loopexit(base, &zero);
	printf("loopexit r=%d dispatch r=%d\n", r, event_base_dispatch(base));
	event_base_free(base);
	base = event_base_new();
	if (!base)
		abort();
	r = event_base_once(base, -1, EV_TIMEOUT, args, "never", &hour);
	printf("pending r=%d\n", r);
	event_base_free_nofinalize(base);
	close(p[0]);
	close(p[1]);
	return 0;
}

int
main(int argc, char **argv)
{
	int r = 2;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && strcmp(argv[1], "ctx") == 0)
		r = cmd_ctx();
	else if (argc == 2 && strcmp(argv[1], "api") == 0)
		r = cmd_api();
	else
		fprintf(stderr, "usage: evbase-once ctx|api\n");
	return r;
}
