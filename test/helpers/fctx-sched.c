/* SPDX-License-Identifier: Apache-2.0 */
/* fctx-sched: a single-threaded scheduler of Boost.Context coroutines,
 * through the library's C switch functions (libboost_context.so), as
 * Boost.Asio's spawn, Boost.Fiber and folly fibers use them.  Coroutines
 * A and B each read a request head with a traceparent of their own from
 * their own accepted connection (the socket level publishes it), then
 * switch back to the scheduler (A through jump_fcontext(), B through
 * ontop_fcontext()); the scheduler then resumes A, which works, and B.
 * C is made by main and first jumped to by A.  Each prints what its
 * thread's record shows (ctxobs.h), one line each:
 *
 *   A-read <trace>, B-read <trace>, C-start <trace>, A-work <trace>,
 *   B-work <trace>, MAIN-end <trace>     (<trace>: 32 hex or "none")
 *
 * No tracing code but the read of the record. */
#include "config.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctxobs.h"

static __attribute__((noreturn)) void
die(const char *what)
{
	perror(what);
	exit(2);
}

#include "sock-pair.h"

/* boost/context/detail/fcontext.hpp (extern "C"). */
typedef void *fcontext_t;
typedef struct {
	fcontext_t fctx;
	void *data;
} transfer_t;
transfer_t jump_fcontext(fcontext_t const to, void *vp);
fcontext_t make_fcontext(void *sp, size_t size, void (*fn)(transfer_t));
transfer_t ontop_fcontext(fcontext_t const to, void *vp, transfer_t (*fn)(transfer_t));

#define STACK (64 * 1024)

static char stack_a[STACK] __attribute__((aligned(16)));
static char stack_b[STACK] __attribute__((aligned(16)));
static char stack_c[STACK] __attribute__((aligned(16)));
static fcontext_t ctx_a, ctx_b, ctx_c;
static int srv_a, srv_b;

static void
show(const char *who)
{
	char t[33];

	printf("%s %s\n", who, ctxobs_trace(t));
	fflush(stdout);
}

static void
read_head(int fd)
{
	char buf[512];
	size_t n = 0;

	while (n < 4 || memcmp(buf + n - 4, "\r\n\r\n", 4) != 0) {
		if (n == sizeof(buf))
			die("head too long");
		read_n(fd, buf + n, 1);
		n++;
	}
}

static transfer_t
pass(transfer_t t)
{
	return t;
}

static void
coro_c(transfer_t t)
{
	show("C-start");
	jump_fcontext(t.fctx, NULL);
	die("C resumed");
}

static void
coro_a(transfer_t t)
{
	read_head(srv_a);
	show("A-read");
	/* C starts on A's first jump to it and goes back to A. */
	ctx_c = jump_fcontext(ctx_c, NULL).fctx;
	t = jump_fcontext(t.fctx, NULL);
	show("A-work");
	jump_fcontext(t.fctx, NULL);
	die("A resumed");
}

static void
coro_b(transfer_t t)
{
	read_head(srv_b);
	show("B-read");
	t = ontop_fcontext(t.fctx, NULL, pass);
	show("B-work");
	jump_fcontext(t.fctx, NULL);
	die("B resumed");
}

static void
request(int *cli, int *srv, const char *trace)
{
	char head[256];
	int n = snprintf(head, sizeof(head),
			 "GET /c HTTP/1.1\r\nHost: x\r\n"
			 "traceparent: 00-%s-00f067aa0ba902b7-01\r\n\r\n",
			 trace);

	pair(cli, srv);
	send_all(*cli, head, (size_t)n, 0);
}

int
main(void)
{
	int cli_a, cli_b;

	request(&cli_a, &srv_a, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	request(&cli_b, &srv_b, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
	ctx_a = make_fcontext(stack_a + STACK, STACK, coro_a);
	ctx_b = make_fcontext(stack_b + STACK, STACK, coro_b);
	ctx_c = make_fcontext(stack_c + STACK, STACK, coro_c);
	ctx_a = jump_fcontext(ctx_a, NULL).fctx;
	ctx_b = jump_fcontext(ctx_b, NULL).fctx;
	ctx_a = jump_fcontext(ctx_a, NULL).fctx;
	ctx_b = jump_fcontext(ctx_b, NULL).fctx;
	show("MAIN-end");
	return 0;
}
