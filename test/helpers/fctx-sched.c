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
 * With "migrate": main (thread T1) makes coroutine A and jumps to it; A
 * reads its request and switches back; thread T2, which read a request of
 * its own (trace c), resumes A, which works and switches back to T2:
 *
 *   A-read <trace>, T1-back <trace>, T2-read <trace>, A-work <trace> (on
 *   T2), T2-back <trace>, T1-end <trace> (after T2 ended)
 *
 * With "answered": A reads its request and switches back; main writes the
 * response on A's connection, then resumes A:
 *
 *   A-read <trace>, MAIN-answered <trace>, A-resumed <trace>,
 *   MAIN-end <trace>
 *
 * With "reactor", as Boost.Asio's io_context: coroutines A, B and C each
 * read their connection, find nothing (non-blocking) and switch back.
 * C's connection is closed, and a new one, D, gets its descriptor number.
 * Requests arrive on A, B and D; main reads their heads (B, A, D), then
 * resumes B, A and C, which each work and switch back:
 *
 *   B-work <trace>, A-work <trace>, C-work <trace>, MAIN-end <trace>
 *
 * With "handover", main plays the reactor for one coroutine: A reads its
 * connection and finds nothing, and switches back; the request arrives,
 * main reads its head and resumes A, which works and switches back (a
 * timer); main resumes it again, A reads the body and finds nothing yet,
 * and switches back; main reads the body and resumes A, which switches
 * back once more:
 *
 *   A-wait <trace>, MAIN-read <trace>, A-work <trace>, MAIN-idle <trace>,
 *   A-timer <trace>, MAIN-body <trace>, A-body <trace>, MAIN-end <trace>
 *
 * No tracing code but the read of the record. */
#include "config.h"

#include <fcntl.h>
#include <pthread.h>
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

/* A, resumed by a thread other than the one it switched away on. */
static void
coro_migrate(transfer_t t)
{
	read_head(srv_a);
	show("A-read");
	t = jump_fcontext(t.fctx, NULL);
	show("A-work");
	jump_fcontext(t.fctx, NULL);
	die("A resumed");
}

static void *
t2_main(void *arg)
{
	int cli, srv;

	(void)arg;
	(void)pair_sent(&cli, &srv, "cccccccccccccccccccccccccccccccc");
	read_head(srv);
	show("T2-read");
	ctx_a = jump_fcontext(ctx_a, NULL).fctx;
	show("T2-back");
	return NULL;
}

static void
migrate(void)
{
	pthread_t t2;
	int cli_a;

	(void)pair_sent(&cli_a, &srv_a, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	ctx_a = make_fcontext(stack_a + STACK, STACK, coro_migrate);
	ctx_a = jump_fcontext(ctx_a, NULL).fctx;
	show("T1-back");
	if (pthread_create(&t2, NULL, t2_main, NULL) || pthread_join(t2, NULL))
		die("T2");
	show("T1-end");
}

/* A, whose request main answers while A is suspended. */
static void
coro_answered(transfer_t t)
{
	read_head(srv_a);
	show("A-read");
	t = jump_fcontext(t.fctx, NULL);
	show("A-resumed");
	jump_fcontext(t.fctx, NULL);
	die("A resumed");
}

static void
answered(void)
{
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	int cli_a;

	(void)pair_sent(&cli_a, &srv_a, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	ctx_a = make_fcontext(stack_a + STACK, STACK, coro_answered);
	ctx_a = jump_fcontext(ctx_a, NULL).fctx;
	send_all(srv_a, resp, sizeof(resp) - 1, 0);
	show("MAIN-answered");
	ctx_a = jump_fcontext(ctx_a, NULL).fctx;
	show("MAIN-end");
}

/* A, whose reads main does for it. */
static void
coro_handover(transfer_t t)
{
	char b;

	if (recv(srv_a, &b, 1, MSG_DONTWAIT) != -1)
		die("recv");
	show("A-wait");
	t = jump_fcontext(t.fctx, NULL);
	show("A-work");
	t = jump_fcontext(t.fctx, NULL);
	show("A-timer");
	if (recv(srv_a, &b, 1, MSG_DONTWAIT) != -1)
		die("recv");
	t = jump_fcontext(t.fctx, NULL);
	show("A-body");
	jump_fcontext(t.fctx, NULL);
	die("A resumed");
}

static void
handover(void)
{
	char head[256], b;
	int cli_a, n;

	pair(&cli_a, &srv_a);
	ctx_a = make_fcontext(stack_a + STACK, STACK, coro_handover);
	ctx_a = jump_fcontext(ctx_a, NULL).fctx;
	n = snprintf(head, sizeof(head),
		     "POST /c HTTP/1.1\r\nContent-Length: 1\r\n"
		     "traceparent: 00-%s-00f067aa0ba902b7-01\r\n\r\n",
		     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	send_all(cli_a, head, (size_t)n, 0);
	read_head(srv_a);
	show("MAIN-read");
	ctx_a = jump_fcontext(ctx_a, NULL).fctx;
	show("MAIN-idle");
	ctx_a = jump_fcontext(ctx_a, NULL).fctx;
	send_all(cli_a, "x", 1, 0);
	read_n(srv_a, &b, 1);
	show("MAIN-body");
	ctx_a = jump_fcontext(ctx_a, NULL).fctx;
	show("MAIN-end");
}

/* A, B or C of "reactor" (t.data). */
struct waiter {
	int fd;
	const char *who;
};

static void
coro_wait(transfer_t t)
{
	const struct waiter *w = t.data;
	char c;

	if (read(w->fd, &c, 1) >= 0 || errno != EAGAIN)
		die("read before the request");
	t = jump_fcontext(t.fctx, NULL);
	show(w->who);
	jump_fcontext(t.fctx, NULL);
	die("resumed");
}

static void
reactor(void)
{
	static char *const stacks[3] = {stack_a, stack_b, stack_c};
	static struct waiter w[3] = {{0, "A-work"}, {0, "B-work"}, {0, "C-work"}};
	int cli[3];
	fcontext_t fc[3];
	static const char *const traces[3] = {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
					      "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
					      "dddddddddddddddddddddddddddddddd"};
	int i, cli_d, srv_d;

	for (i = 0; i < 3; i++) {
		pair(&cli[i], &w[i].fd);
		if (fcntl(w[i].fd, F_SETFL, O_NONBLOCK))
			die("fcntl");
		fc[i] = make_fcontext(stacks[i] + STACK, STACK, coro_wait);
		fc[i] = jump_fcontext(fc[i], &w[i]).fctx;
	}
	/* D takes C's numbers: its client end C's client's, its server
	 * end C's server's (pair() makes the client end first). */
	close(w[2].fd);
	close(cli[2]);
	(void)pair_sent(&cli_d, &srv_d, traces[2]);
	if (srv_d != w[2].fd)
		die("D got another descriptor");
	for (i = 0; i < 2; i++) {
		char head[256];
		int n = snprintf(head, sizeof(head),
				 "GET /c HTTP/1.1\r\nHost: x\r\n"
				 "traceparent: 00-%s-00f067aa0ba902b7-01\r\n\r\n",
				 traces[i]);

		send_all(cli[i], head, (size_t)n, 0);
	}
	if (fcntl(w[0].fd, F_SETFL, 0) || fcntl(w[1].fd, F_SETFL, 0))
		die("fcntl");
	read_head(w[1].fd);
	read_head(w[0].fd);
	read_head(srv_d);
	fc[1] = jump_fcontext(fc[1], NULL).fctx;
	fc[0] = jump_fcontext(fc[0], NULL).fctx;
	fc[2] = jump_fcontext(fc[2], NULL).fctx;
	show("MAIN-end");
}

int
main(int argc, char **argv)
{
	int cli_a, cli_b;

	if (argc > 1 && strcmp(argv[1], "migrate") == 0) {
		migrate();
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "answered") == 0) {
		answered();
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "handover") == 0) {
		handover();
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "reactor") == 0) {
		reactor();
		return 0;
	}
	(void)pair_sent(&cli_a, &srv_a, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	(void)pair_sent(&cli_b, &srv_b, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
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
