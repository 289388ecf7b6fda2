/* SPDX-License-Identifier: Apache-2.0 */
/* A reverse proxy in one thread, run under the shim by
 * test-preload-upstream.c: it accepts a client connection and reads its
 * request head (with a traceparent), connect()s to a backend (a thread of
 * its own here, on 127.0.0.1), sends it a request, goes to epoll_wait(),
 * then reads the backend's answer -- and checks the context its own
 * thread publishes at each step (ctxobs.h), as a profiler would see it
 * (hooks/hook-socket.c, "Upstreams").
 *
 *   upstream proxy read|recv|readv|recvmsg
 *                       a blocking connect and the request written under
 *                       the client's context: the wait clears it, the
 *                       read of the answer gives it back (same span),
 *                       the response to the client keeps it, the next
 *                       wait clears it, and once the client's request is
 *                       answered a read of the upstream brings nothing
 *                       back
 *   upstream nonblock   a non-blocking connect (EINPROGRESS), the wait
 *                       for it to complete (which clears the context) and
 *                       the request written with no context: the answer
 *                       still brings the client's request back
 *   upstream shaped     the backend answers with a request head with a
 *                       traceparent of its own: never a request; the
 *                       client's context is what the read shows, and
 *                       nothing once that is answered
 *   upstream gone       the client connection is closed before the answer
 *                       comes: its read brings nothing back
 *   upstream keepalive  one upstream for two client requests in turn: the
 *                       second request's write names it, its answer
 *                       brings that one back
 *   upstream reuse      the upstream's number reused while the request it
 *                       carried is still live, by a socket connect()ed
 *                       with no context, by dup2() of a pipe, and by
 *                       accept(): none of them shows that request
 *   upstream round      a loop round that reads the upstream's answer
 *                       (back to its request) and then another client's
 *                       request head: a zero-timeout wait after it must
 *                       not keep that head's request, whose handler need
 *                       not be the one that runs next (the answer's
 *                       continuation may be)
 *   upstream client     a client program: connect()s and I/O with no
 *                       server context publish nothing, and return values
 *                       and errno are the real calls'
 *
 * Prints "RESULT <mode> fails=N" and exits 0 when every check held. */
#include "ctxobs.h"

#include "listen-loopback.h"
#include "self-check.h"
#include "sock-pair.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define TRACE1 "4bf92f3577b34da6a3ce929d0e0e4736"
#define TRACE2 "5c0a3f4688c45eb7b4df03ae1f1f5847"
#define EVIL   "e0e1e2e3e4e5e6e7e8e9eaebecedee01"
#define TP(t)  "traceparent: 00-" t "-00f067aa0ba902b7-01\r\n"

static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
static const char evil[] = "GET /from-backend HTTP/1.1\r\nHost: b\r\n" TP(EVIL) "\r\n";
static const char response[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";

static struct sockaddr_in backend_addr;
static unsigned backend_accepted; /* connections the backend accept()ed */
static unsigned backend_closed;   /* and closed */
static unsigned up_made;          /* connections made to it */
static const char *how = "read";

/* ---- the backend: a thread per connection, one answer per request head
 * (evil for a path starting /evil) ---- */

static void *
backend_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[2048];
	size_t len = 0;

	for (;;) {
		ssize_t r = read(fd, buf + len, sizeof(buf) - 1 - len);
		char *end;

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
		buf[len] = '\0';
		while ((end = strstr(buf, "\r\n\r\n"))) {
			size_t used = (size_t)(end + 4 - buf);
			bool bad = strncmp(buf, "GET /evil", 9) == 0;

			send_all(fd, bad ? evil : answer,
				 bad ? sizeof(evil) - 1 : sizeof(answer) - 1,
				 MSG_NOSIGNAL);
			memmove(buf, buf + used, len - used + 1);
			len -= used;
		}
		if (len == sizeof(buf) - 1)
			break;
	}
	close(fd);
	__atomic_add_fetch(&backend_closed, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* The backend's listener waits in poll(), not in accept(): the kernel
 * takes the descriptor number of an accept() when the call starts, so a
 * thread blocked in accept() holds the lowest free number (unseen in
 * /proc/self/fd) -- the one mode_reuse() has just freed, whenever the
 * listener went back to its accept() after the close. */
static void *
backend_main(void *arg)
{
	int blfd = (int)(intptr_t)arg;

	for (;;) {
		struct pollfd p = {.fd = blfd, .events = POLLIN};
		pthread_t t;
		int fd;

		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			die("backend poll");
		fd = accept4(blfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			die("backend accept");
		}
		__atomic_add_fetch(&backend_accepted, 1, __ATOMIC_SEQ_CST);
		if (pthread_create(&t, NULL, backend_conn, (void *)(intptr_t)fd))
			die("pthread_create");
		pthread_detach(t);
	}
	return NULL;
}

static void
backend_start(void)
{
	pthread_t t;
	int blfd;

	blfd = listen_loopback(16, SOCK_CLOEXEC | SOCK_NONBLOCK, &backend_addr);
	if (blfd < 0)
		die("backend listen");
	if (pthread_create(&t, NULL, backend_main, (void *)(intptr_t)blfd))
		die("pthread_create");
	pthread_detach(t);
}

/* ---- what the proxy thread publishes ---- */

static bool
shows_none(void)
{
	return strcmp(ctxobs_shown(), "trace=- span=-") == 0;
}

/* Does the thread publish trace (with span-id span, unless NULL)? */
static bool
shows(const char *trace, const char *span)
{
	char want[128];

	if (span)
		snprintf(want, sizeof(want), "trace=%s span=%s", trace, span);
	else
		snprintf(want, sizeof(want), "trace=%s ", trace);
	return strncmp(ctxobs_shown(), want, strlen(want)) == 0;
}

/* A request head with trace read on a new client connection: *span gets
 * the span-id its context was published with. */
static void
request(int *cli, int *srv, const char *trace, char span[17])
{
	pair_traced(cli, srv, trace);
	CHECK(shows(trace, NULL), "request %s: %s", trace, ctxobs_shown());
	snprintf(span, 17, "%s", strstr(ctxobs_shown(), "span=") + 5);
}

/* A socket connected to the backend; nonblock: with O_NONBLOCK, the
 * connect()'s result in *r and errno in *e. */
static int
up_connect(bool nonblock, int *r, int *e)
{
	int u = socket(AF_INET,
		       SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);

	if (u < 0)
		die("socket");
	errno = 0;
	*r = connect(u, (void *)&backend_addr, sizeof(backend_addr));
	*e = errno;
	if (!nonblock && *r)
		die("connect");
	up_made++;
	return u;
}

/* Wait until the backend has accept()ed every connection made to it and
 * closed all (the proxy closed its ends): its accept() and close() take
 * and free numbers of this process, and mode_reuse() wants to know which
 * are free. */
static void
backend_quiet(void)
{
	while (__atomic_load_n(&backend_accepted, __ATOMIC_SEQ_CST) < up_made ||
	       __atomic_load_n(&backend_closed, __ATOMIC_SEQ_CST) <
		       __atomic_load_n(&backend_accepted, __ATOMIC_SEQ_CST))
		usleep(1000);
}

/* The event loop's wait: for ev on fd (EPOLLIN, EPOLLOUT), or 0 ms. */
static int
wait_for(int fd, unsigned ev, int timeout)
{
	struct epoll_event e = {.events = ev, .data.fd = fd}, out;
	int ep = epoll_create1(EPOLL_CLOEXEC), r;

	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e))
		die("epoll");
	do
		r = epoll_wait(ep, &out, 1, timeout);
	while (r < 0 && errno == EINTR);
	close(ep);
	return r;
}

/* One read of fd through the call `how' names. */
static ssize_t
up_read(int fd, char *buf, size_t n)
{
	struct iovec v[2] = {{buf, 8}, {buf + 8, n - 8}};
	struct msghdr m = {.msg_iov = v, .msg_iovlen = 2};

	if (strcmp(how, "recv") == 0)
		return recv(fd, buf, n, 0);
	if (strcmp(how, "readv") == 0)
		return readv(fd, v, 2);
	if (strcmp(how, "recvmsg") == 0)
		return recvmsg(fd, &m, 0);
	return read(fd, buf, n);
}

/* Wait for the backend's answer of len bytes on u (the wait clears the
 * context), then read it whole. */
static void
up_answer(int u, size_t len)
{
	char buf[512];
	size_t got = 0;

	while (got < len) {
		ssize_t r;

		if (wait_for(u, EPOLLIN, 10000) != 1)
			die("no answer");
		if (got == 0)
			CHECK(shows_none(), "the wait did not clear: %s",
			      ctxobs_shown());
		r = up_read(u, buf + got, sizeof(buf) - got);
		if (r <= 0)
			die("upstream read");
		got += (size_t)r;
	}
}

static void
up_send(int u, const char *path)
{
	char req[128];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: b\r\n\r\n", path);

	send_all(u, req, (size_t)n, MSG_NOSIGNAL);
}

/* ---- modes ---- */

static void
mode_proxy(void)
{
	char span[17];
	int cli, srv, u, r, e;

	request(&cli, &srv, TRACE1, span);
	u = up_connect(false, &r, &e);
	CHECK(shows(TRACE1, span), "after connect: %s", ctxobs_shown());
	up_send(u, "/a");
	CHECK(shows(TRACE1, span), "after the upstream write: %s", ctxobs_shown());
	up_answer(u, sizeof(answer) - 1);
	CHECK(shows(TRACE1, span), "%s of the answer: %s", how, ctxobs_shown());
	send_all(srv, response, sizeof(response) - 1, 0);
	CHECK(shows(TRACE1, span), "response write: %s", ctxobs_shown());
	wait_for(u, EPOLLIN, 0);
	CHECK(shows_none(), "wait after the response: %s", ctxobs_shown());
	/* The client's request is answered: more from the upstream (a
	 * request sent with no context) brings it back no more. */
	up_send(u, "/b");
	up_answer(u, sizeof(answer) - 1);
	CHECK(shows_none(), "answer after the response: %s", ctxobs_shown());
	close(u);
	close(cli);
	close(srv);
}

static void
mode_round(void)
{
	char span1[17], span2[17], buf[512];
	size_t got = 0;
	int cli1, srv1, cli2, srv2, u, r, e;

	request(&cli1, &srv1, TRACE1, span1);
	u = up_connect(false, &r, &e);
	up_send(u, "/a");
	while (got < sizeof(answer) - 1) {
		ssize_t n;

		if (wait_for(u, EPOLLIN, 10000) != 1)
			die("no answer");
		n = up_read(u, buf + got, sizeof(buf) - got);
		if (n <= 0)
			die("upstream read");
		got += (size_t)n;
	}
	CHECK(shows(TRACE1, span1), "%s of the answer: %s", how, ctxobs_shown());
	request(&cli2, &srv2, TRACE2, span2);
	wait_for(u, EPOLLIN, 0);
	CHECK(shows_none(), "zero-timeout wait after an answer and another head: %s",
	      ctxobs_shown());
	close(u);
	close(cli1);
	close(srv1);
	close(cli2);
	close(srv2);
}

static void
mode_nonblock(void)
{
	char span[17];
	int cli, srv, u, r, e;

	request(&cli, &srv, TRACE1, span);
	u = up_connect(true, &r, &e);
	CHECK(r == 0 || (r == -1 && e == EINPROGRESS), "connect: %d errno %d", r, e);
	CHECK(shows(TRACE1, span), "after connect: %s", ctxobs_shown());
	if (wait_for(u, EPOLLOUT, 10000) != 1)
		die("connect never completed");
	CHECK(shows_none(), "the wait did not clear: %s", ctxobs_shown());
	up_send(u, "/a");
	CHECK(shows_none(), "after the upstream write: %s", ctxobs_shown());
	up_answer(u, sizeof(answer) - 1);
	CHECK(shows(TRACE1, span), "%s of the answer: %s", how, ctxobs_shown());
	send_all(srv, response, sizeof(response) - 1, 0);
	wait_for(u, EPOLLIN, 0);
	CHECK(shows_none(), "wait after the response: %s", ctxobs_shown());
	close(u);
	close(cli);
	close(srv);
}

static void
mode_shaped(void)
{
	char span[17];
	int cli, srv, u, r, e;

	request(&cli, &srv, TRACE1, span);
	u = up_connect(false, &r, &e);
	up_send(u, "/evil/1");
	up_answer(u, sizeof(evil) - 1);
	CHECK(shows(TRACE1, span), "the request-shaped answer: %s", ctxobs_shown());
	send_all(srv, response, sizeof(response) - 1, 0);
	wait_for(u, EPOLLIN, 0);
	CHECK(shows_none(), "wait after the response: %s", ctxobs_shown());
	/* Nothing published: a request head read from the upstream is no
	 * request of its own either. */
	up_send(u, "/evil/2");
	up_answer(u, sizeof(evil) - 1);
	CHECK(shows_none(), "a second request-shaped answer: %s", ctxobs_shown());
	CHECK(!shows(EVIL, NULL), "the backend's trace published");
	close(u);
	close(cli);
	close(srv);
}

static void
mode_gone(void)
{
	char span[17];
	int cli, srv, u, r, e;

	request(&cli, &srv, TRACE1, span);
	u = up_connect(false, &r, &e);
	up_send(u, "/a");
	close(srv);
	CHECK(shows_none(), "close of the client connection: %s", ctxobs_shown());
	up_answer(u, sizeof(answer) - 1);
	CHECK(shows_none(), "answer for a closed connection: %s", ctxobs_shown());
	close(u);
	close(cli);
}

static void
mode_keepalive(void)
{
	char span1[17], span2[17];
	int cli1, srv1, cli2, srv2, u, r, e;

	request(&cli1, &srv1, TRACE1, span1);
	u = up_connect(false, &r, &e);
	up_send(u, "/a");
	up_answer(u, sizeof(answer) - 1);
	CHECK(shows(TRACE1, span1), "first answer: %s", ctxobs_shown());
	send_all(srv1, response, sizeof(response) - 1, 0);
	wait_for(u, EPOLLIN, 0);
	request(&cli2, &srv2, TRACE2, span2);
	up_send(u, "/b");
	up_answer(u, sizeof(answer) - 1);
	CHECK(shows(TRACE2, span2), "second answer: %s", ctxobs_shown());
	send_all(srv2, response, sizeof(response) - 1, 0);
	wait_for(u, EPOLLIN, 0);
	CHECK(shows_none(), "wait after the response: %s", ctxobs_shown());
	close(u);
	close(cli1);
	close(srv1);
	close(cli2);
	close(srv2);
}

/* Publish srv's live request again (a read of its connection switches to
 * it), without reading anything. */
static void
republish(int srv, const char *span)
{
	char c;

	CHECK(recv(srv, &c, 1, MSG_DONTWAIT) == -1 && errno == EAGAIN,
	      "recv of an idle connection");
	CHECK(shows(TRACE1, span), "back on the request: %s", ctxobs_shown());
}

/* Make u (closed) the lowest free number: free numbers below it (the
 * backend's ends of earlier connections, closed since) are held (on
 * /dev/null) until release_held(). */
static int held[64], nheld;

static void
lowest_free(int u)
{
	while (nheld < 64) {
		int x = open("/dev/null", O_RDONLY | O_CLOEXEC);

		if (x < 0)
			die("open");
		if (x >= u) {
			close(x);
			return;
		}
		held[nheld++] = x;
	}
}

static void
release_held(void)
{
	while (nheld)
		close(held[--nheld]);
}

/* What fd is open on now (readlink of /proc/self/fd/FD), for a failure
 * message: "free" if nothing. */
static const char *
fd_holder(int fd, char *buf, size_t n)
{
	char path[64];
	ssize_t l;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	l = readlink(path, buf, n - 1);
	if (l < 0)
		return "free";
	buf[l] = '\0';
	return buf;
}

/* Make mode_reuse()'s fd numbers come out as it wants: a number freed is
 * the next one a socket() or accept() returns, unless something else in
 * the process (the shim's own threads too) takes it in between; then the
 * step is tried again.  (The backend's listener once did, in every try:
 * backend_main().)  A failure names what holds the number. */
#define REUSE_TRIES 8

static void
mode_reuse(void)
{
	char span[17], buf[256], head[] = "GET /plain HTTP/1.1\r\nHost: y\r\n\r\n";
	char holder[256] = "free";
	int cli, srv, u = -1, n = -2, r, e, p[2], c2 = -1, s2 = -2, tries;
	struct sockaddr_in a;
	socklen_t al = sizeof(a);

	/* TRACE1's request stays live (unanswered) throughout: a stale
	 * upstream word would bring it back. */
	request(&cli, &srv, TRACE1, span);

	/* 1. close, then socket() and connect() with no context. */
	for (tries = 0; tries < REUSE_TRIES && n != u; tries++) {
		if (tries) {
			close(n);
			republish(srv, span);
		}
		u = up_connect(false, &r, &e);
		up_send(u, "/a");
		close(u);
		/* The proxy's idle wait, with a timeout (srv is writable: it
		 * returns at once): a zero timeout would keep the request
		 * just read (hook-socket.c, "Handlers run after the next
		 * wait"). */
		wait_for(srv, EPOLLOUT, 10000);
		CHECK(shows_none(), "wait: %s", ctxobs_shown());
		backend_quiet();
		lowest_free(u);
		n = up_connect(false, &r, &e);
		if (n != u)
			fd_holder(u, holder, sizeof(holder));
		release_held();
	}
	CHECK(n == u, "socket() did not reuse %d (%s): %d", u, holder, n);
	up_send(n, "/b");
	up_answer(n, sizeof(answer) - 1);
	CHECK(shows_none(), "read of a new socket on a reused number: %s",
	      ctxobs_shown());
	close(n);

	/* 2. dup2() of a pipe over it. */
	republish(srv, span);
	u = up_connect(false, &r, &e);
	up_send(u, "/a");
	if (pipe2(p, O_CLOEXEC) || dup2(p[0], u) != u)
		die("pipe/dup2");
	wait_for(srv, EPOLLOUT, 10000);
	CHECK(write(p[1], "xyz", 3) == 3, "pipe write");
	CHECK(read(u, buf, sizeof(buf)) == 3, "read of the pipe's copy");
	CHECK(shows_none(), "read of a pipe dup2()ed over it: %s", ctxobs_shown());
	close(u);
	close(p[0]);
	close(p[1]);

	/* 3. accept() on its number: a server connection from scratch. */
	for (tries = 0; tries < REUSE_TRIES && s2 != u; tries++) {
		if (tries) {
			close(s2);
			close(c2);
		}
		republish(srv, span);
		u = up_connect(false, &r, &e);
		up_send(u, "/a");
		c2 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (c2 < 0 || getsockname(lfd, (void *)&a, &al) ||
		    connect(c2, (void *)&a, sizeof(a)))
			die("connect");
		close(u);
		wait_for(srv, EPOLLOUT, 10000);
		backend_quiet();
		lowest_free(u);
		s2 = accept(lfd, NULL, NULL);
		if (s2 != u)
			fd_holder(u, holder, sizeof(holder));
		release_held();
	}
	CHECK(s2 == u, "accept() did not reuse %d (%s): %d", u, holder, s2);
	send_all(c2, head, sizeof(head) - 1, 0);
	read_n(s2, buf, sizeof(head) - 1);
	/* Its own request, with a trace of its own: scanned as a connection
	 * again. */
	CHECK(!shows_none() && !shows(TRACE1, NULL),
	      "a request on an accept()ed reused number: %s", ctxobs_shown());
	close(s2);
	close(c2);
	close(cli);
	close(srv);
}

static void
mode_client(void)
{
	struct sockaddr_in closed = backend_addr;
	char buf[256];
	int u, r, e, s;

	/* A port nobody listens on: a socket bound and closed. */
	s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	closed.sin_port = 0;
	if (s < 0 || bind(s, (void *)&closed, sizeof(closed)))
		die("bind");
	{
		socklen_t l = sizeof(closed);

		if (getsockname(s, (void *)&closed, &l))
			die("getsockname");
	}
	close(s);
	u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	errno = 0;
	r = connect(u, (void *)&closed, sizeof(closed));
	e = errno;
	CHECK(r == -1 && e == ECONNREFUSED, "refused connect: %d errno %d", r, e);
	close(u);
	u = up_connect(true, &r, &e);
	CHECK(r == 0 || (r == -1 && e == EINPROGRESS), "connect: %d errno %d", r, e);
	if (wait_for(u, EPOLLOUT, 10000) != 1)
		die("connect never completed");
	up_send(u, "/evil/x");
	up_answer(u, sizeof(evil) - 1);
	CHECK(shows_none(), "a client's read: %s", ctxobs_shown());
	errno = 4321;
	CHECK(read(u, buf, sizeof(buf)) == -1 && errno == EAGAIN, "EAGAIN: errno %d",
	      errno);
	close(u);
	/* errno of a connect() that succeeds is left as it was, also under a
	 * context (the hook's own work keeps it). */
	u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	errno = 4321;
	r = connect(u, (void *)&backend_addr, sizeof(backend_addr));
	CHECK(r == 0 && errno == 4321, "connect: %d errno %d", r, errno);
	close(u);
	{
		char span[17];
		int cli, srv;

		request(&cli, &srv, TRACE1, span);
		u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		errno = 4321;
		r = connect(u, (void *)&backend_addr, sizeof(backend_addr));
		CHECK(r == 0 && errno == 4321, "connect under a context: %d errno %d",
		      r, errno);
		errno = 4321;
		CHECK(recv(u, buf, sizeof(buf), MSG_DONTWAIT) == -1 && errno == EAGAIN,
		      "upstream EAGAIN: errno %d", errno);
		close(u);
		close(cli);
		close(srv);
	}
}

int
main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (argc > 2)
		how = argv[2];
	backend_start();
	if (strcmp(mode, "proxy") == 0)
		mode_proxy();
	else if (strcmp(mode, "nonblock") == 0)
		mode_nonblock();
	else if (strcmp(mode, "shaped") == 0)
		mode_shaped();
	else if (strcmp(mode, "gone") == 0)
		mode_gone();
	else if (strcmp(mode, "keepalive") == 0)
		mode_keepalive();
	else if (strcmp(mode, "reuse") == 0)
		mode_reuse();
	else if (strcmp(mode, "round") == 0)
		mode_round();
	else if (strcmp(mode, "client") == 0)
		mode_client();
	else
		die("mode");
	printf("RESULT %s fails=%d\n", mode, fails);
	return fails ? 1 : 0;
}
