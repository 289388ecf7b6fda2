/* SPDX-License-Identifier: Apache-2.0 */
/* A libuv event loop whose after-work callback answers its own request
 * while the socket level publishes another one, run under the shim by
 * test-preload-sockedge.c.  The loop reads request B and, in the same
 * iteration, runs request A's after-work callback: the uv hook saves B,
 * publishes A, the callback writes A's response (the socket level follows
 * connection A now) and the hook restores B.  The loop then waits with
 * nothing to do: B must not stay published there (it did: the socket
 * level had forgotten B, and nothing else clears a restored context).
 *
 * The order within one iteration is the kernel's (epoll's ready list):
 * each round makes B readable before A's work completes and checks only
 * rounds where the callbacks ran in that order.  Prints
 * "RESULT uv-restore rounds=N fails=N" and exits 0 when every check held
 * and the order was seen at least once. */
#include "ctxobs.h"

#include "listen-loopback.h"
#include "self-check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#define TRACE_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define TRACE_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static int lsn, seq, b_seq, after_seq, sA, sB;
static sem_t go;

static int
pair(int *srv)
{
	struct sockaddr_in a;
	socklen_t al = sizeof(a);
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (c < 0 || getsockname(lsn, (void *)&a, &al) ||
	    connect(c, (void *)&a, sizeof(a)))
		die("connect");
	*srv = accept(lsn, NULL, NULL);
	if (*srv < 0)
		die("accept");
	return c;
}

static bool
shows(const char *trace)
{
	char want[64];

	snprintf(want, sizeof(want), "trace=%s ", trace);
	return strncmp(ctxobs_shown(), want, strlen(want)) == 0;
}

static void
send_req(int c, const char *path, const char *trace)
{
	char req[256];
	int n = snprintf(
		req, sizeof(req),
		"GET %s HTTP/1.1\r\nHost: x\r\ntraceparent: 00-%s-1111111111111111-01"
		"\r\n\r\n",
		path, trace);

	if (write(c, req, (size_t)n) != n)
		die("write");
}

static void
wait_readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	if (poll(&p, 1, 10000) != 1)
		die("poll");
}

static void
work(uv_work_t *w)
{
	(void)w;
	while (sem_wait(&go) && errno == EINTR)
		;
}

static void
after(uv_work_t *w, int st)
{
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";

	(void)w;
	(void)st;
	after_seq = ++seq;
	CHECK(shows(TRACE_A), "after_work(A) runs with %s", ctxobs_shown());
	if (write(sA, resp, sizeof(resp) - 1) != (ssize_t)sizeof(resp) - 1)
		die("write response");
}

static void
on_b(uv_poll_t *p, int status, int ev)
{
	char buf[512];

	(void)status;
	(void)ev;
	if (read(sB, buf, sizeof(buf)) <= 0)
		die("read B");
	b_seq = ++seq;
	CHECK(shows(TRACE_B), "read(B) -> %s", ctxobs_shown());
	uv_poll_stop(p);
}

/* One round; true if the callbacks ran in the order under test. */
static bool
round_once(uv_loop_t *loop, int ep)
{
	char buf[512];
	struct epoll_event ev;
	uv_work_t w;
	uv_poll_t pb;
	int cA, cB, i;
	bool checked = false;

	cA = pair(&sA);
	cB = pair(&sB);
	uv_poll_init(loop, &pb, sB);
	uv_poll_start(&pb, UV_READABLE, on_b);
	uv_run(loop, UV_RUN_NOWAIT);

	send_req(cA, "/a", TRACE_A);
	wait_readable(sA);
	if (read(sA, buf, sizeof(buf)) <= 0)
		die("read A");
	CHECK(shows(TRACE_A), "read(A) -> %s", ctxobs_shown());
	uv_queue_work(loop, &w, work, after);
	/* The loop's idle wait for the pool (a timeout: a zero one would
	 * keep the request just read, hook-socket.c, "Handlers run after
	 * the next wait"); ep is empty: 1 ms. */
	(void)epoll_wait(ep, &ev, 1, 1);
	CHECK(!shows(TRACE_A), "idle -> %s", ctxobs_shown());

	/* B readable first, then A's work completes. */
	send_req(cB, "/b", TRACE_B);
	wait_readable(sB);
	seq = b_seq = after_seq = 0;
	sem_post(&go);
	usleep(20000); /* the pool thread's completion reaches the loop */
	uv_run(loop, UV_RUN_ONCE);
	if (b_seq == 1 && after_seq == 2) {
		checked = true;
		(void)epoll_wait(ep, &ev, 1, 0);
		CHECK(!shows(TRACE_B) && !shows(TRACE_A),
		      "idle after B's read and A's after_work: %s", ctxobs_shown());
	}
	for (i = 0; i < 100 && (!b_seq || !after_seq); i++)
		uv_run(loop, UV_RUN_ONCE);
	if (!b_seq || !after_seq)
		die("callbacks did not run");
	uv_close((uv_handle_t *)&pb, NULL);
	uv_run(loop, UV_RUN_NOWAIT);
	(void)epoll_wait(ep, &ev, 1, 0);
	close(cA);
	close(cB);
	close(sA);
	close(sB);
	return checked;
}

int
main(void)
{
	uv_loop_t *loop = uv_default_loop();
	int ep = epoll_create1(EPOLL_CLOEXEC), i, rounds = 0;

	if (!ctxobs_record() && !dlsym(RTLD_DEFAULT, OTEL_THREAD_CTX_SYMBOL)) {
		fprintf(stderr, "uv-restore: not run under the shim\n");
		return 2;
	}
	if (ep < 0 || sem_init(&go, 0, 0))
		die("setup");
	lsn = listen_loopback(8, SOCK_CLOEXEC, NULL);
	if (lsn < 0)
		die("listen");
	for (i = 0; i < 20 && rounds < 3; i++)
		if (round_once(loop, ep))
			rounds++;
	printf("RESULT uv-restore rounds=%d fails=%d\n", rounds, fails);
	return fails || !rounds ? 1 : 0;
}
