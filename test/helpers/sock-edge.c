/* SPDX-License-Identifier: Apache-2.0 */
/* Edge cases of the socket level (hooks/hook-socket.c) found by review,
 * run under the shim by test-preload-sockedge.c.  A server and its client
 * in one process on 127.0.0.1; the server checks the context its own
 * thread publishes (ctxobs.h).
 *
 *   sock-edge oob recv|recvmsg   TCP urgent data inside a request head,
 *                                read with MSG_OOB between the head's
 *                                reads: not stream bytes, the head (and
 *                                its traceparent) must stay intact
 *   sock-edge poll-efault        poll/ppoll/__poll_chk with bad pointers
 *                                and an nfds larger than the array while a
 *                                request's context is published: -1/EFAULT
 *                                as without the shim (it used to be
 *                                SIGSEGV in the hook; select/pselect read
 *                                their sets first, hook-socket.c says
 *                                why); ppoll/__ppoll_chk with an invalid
 *                                timeout on a ready fd: -1/EINVAL (the
 *                                hook's probe with its own timeout used
 *                                to return the ready count); and what the
 *                                check is for: a wait on a client
 *                                connection clears the context, also a
 *                                select that blocks, one on a pipe keeps
 *                                it
 *   sock-edge continue writev|sendmsg|writev1
 *                                "HTTP/1.1 " and "100 Continue" in two
 *                                iovecs (writev1: in one) is an interim
 *                                response: the context stays while the
 *                                body is read, the final response then
 *                                ends it
 *   sock-edge continue-final write|writev
 *                                "100 Continue" and the final response in
 *                                one write (writev: in two iovecs) answer
 *                                the request: the next request on the
 *                                connection gets its own context (the
 *                                write used to count as interim only)
 *   sock-edge short write|send|writev|sendmsg|pipelined
 *                                a response write the kernel takes only
 *                                the first 4 bytes of ("HTTP", under
 *                                libshort-write.so), the rest of its
 *                                buffer on a PROT_NONE page: the hook
 *                                looks at those 4 only (it used to read
 *                                12 from the buffer, and fault), and the
 *                                next request gets its own context;
 *                                pipelined: the first 37 bytes of a head
 *                                (no blank line yet) with a pipelined
 *                                request queued, whose length the hook
 *                                looked for past them (and faulted)
 *   sock-edge batch              two pipelined requests read together and
 *                                both answered in one write: the third
 *                                request gets its own context (it used to
 *                                be read under the second's)
 *   sock-edge writers sendmmsg|pwritev2
 *                                a response written with sendmmsg() or
 *                                pwritev2() at offset -1 answers its
 *                                request: the next request on the
 *                                connection gets its own context (it
 *                                used to be queued behind the unanswered
 *                                one and read under its context)
 *   sock-edge splice             a request body moved out of the
 *                                connection with splice() (HAProxy's
 *                                splice-request): the next request on the
 *                                connection gets its context (the body
 *                                used to swallow it); a head spliced out
 *                                gives the connection up, with no context
 *                                from its later bytes; a response
 *                                spliced into the connection answers its
 *                                request
 *   sock-edge after dup-read|other-write
 *                                after a response, the next request's
 *                                first byte read through a dup() of the
 *                                connection, or a write on another
 *                                connection with no request: the
 *                                answered request's context is gone
 *   sock-edge connect 407|200    a CONNECT answered 407: the retry on the
 *                                connection gets its context; answered
 *                                200: a request sent through the tunnel
 *                                is no request of the proxy's
 *   sock-edge fd dup2-self|accept4-0|readv1
 *                                dup2() of a connection onto itself: it
 *                                stays followed; a connection accept4()
 *                                returns as fd 0: followed; a head read
 *                                with readv() of one iovec: seen
 *   sock-edge idle epoll_wait|epoll_pwait|epoll_pwait2|poll|__poll_chk|
 *                  ppoll|__ppoll_chk|select|pselect
 *                                after a response, the server's wait for
 *                                the next request on the connection: the
 *                                answered request's context is gone
 *
 * Prints "RESULT <mode> fails=N" and exits 0 when every check held. */
#include "ctxobs.h"

#include "self-check.h"
#include "sock-pair.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds,
		nfds_t nfds,
		const struct timespec *timeout,
		const sigset_t *ss,
		size_t fdslen);

#define TRACE "4bf92f3577b34da6a3ce929d0e0e4736"
#define TP    "traceparent: 00-" TRACE "-00f067aa0ba902b7-01\r\n"

/* Does the thread publish TRACE now? */
static bool
shows_trace(void)
{
	char s[128];

	ctxobs_format(s, sizeof(s));
	return strncmp(s, "trace=" TRACE " ", 6 + 32 + 1) == 0;
}

static bool
shows_none(void)
{
	char s[128];

	ctxobs_format(s, sizeof(s));
	return strcmp(s, "trace=- span=-") == 0;
}

/* A complete request read on a new connection: its context is current. */
static void
request(int *cli, int *srv)
{
	static const char head[] = "GET /edge HTTP/1.1\r\nHost: x\r\n" TP "\r\n";
	char buf[sizeof(head)];

	pair(cli, srv);
	send_all(*cli, head, sizeof(head) - 1, 0);
	read_n(*srv, buf, sizeof(head) - 1);
	CHECK(shows_trace(), "request: %s", ctxobs_shown());
}

static void
mode_oob(const char *how)
{
	static const char p1[] = "GET /oob HTTP/1.1\r\nHost: x\r\ntraceparent: 00-";
	static const char p2[] = TRACE "-00f067aa0ba902b7-01\r\n\r\n";
	char buf[256], urg = 0;
	struct pollfd pf;
	ssize_t r;
	int cli, srv;

	pair(&cli, &srv);
	send_all(cli, p1, sizeof(p1) - 1, 0);
	send_all(cli, "Z", 1, MSG_OOB);
	send_all(cli, p2, sizeof(p2) - 1, 0);
	read_n(srv, buf, sizeof(p1) - 1);
	pf.fd = srv;
	pf.events = POLLPRI;
	if (poll(&pf, 1, 10000) != 1)
		die("poll POLLPRI");
	if (strcmp(how, "recvmsg") == 0) {
		struct iovec v = {&urg, 1};
		struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};

		r = recvmsg(srv, &m, MSG_OOB);
	} else {
		r = recv(srv, &urg, 1, MSG_OOB);
	}
	CHECK(r == 1 && urg == 'Z', "urgent byte: %zd %c", r, urg);
	read_n(srv, buf, sizeof(p2) - 1);
	CHECK(shows_trace(), "oob %s: the head's traceparent was not seen: %s", how,
	      ctxobs_shown());
	close(cli);
	close(srv);
}

/* A page of pg bytes, read-write, followed by a PROT_NONE one (unmapped
 * with munmap(m, 2 * pg)): a call that reads past the first faults. */
static char *
page_before_none(long pg)
{
	char *m = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED || mprotect(m + pg, (size_t)pg, PROT_NONE))
		die("mmap");
	return m;
}

static void
mode_poll_efault(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	struct pollfd *volatile bad = (struct pollfd *)16, *edge, pf;
	struct timespec ts0 = {0, 0};
	struct timeval tv0 = {0, 0};
	char *map;
	int cli, srv, r, e, p[2];
	fd_set rs;

	/* Two pollfds at the end of a page followed by an inaccessible one:
	 * nfds 8 reaches into it. */
	map = page_before_none(pg);
	edge = (struct pollfd *)(map + pg - 2 * sizeof(struct pollfd));

	request(&cli, &srv);
	edge[0] = (struct pollfd){.fd = srv, .events = POLLIN};
	edge[1] = edge[0];

#define EFAULT_CALL(name, call)                                                  \
	do {                                                                     \
		CHECK(shows_trace(), "%s: no context before the call: %s", name, \
		      ctxobs_shown());                                           \
		errno = 0;                                                       \
		r = (call);                                                      \
		e = errno;                                                       \
		CHECK(r == -1 && e == EFAULT, "%s -> %d errno %d", name, r, e);  \
	} while (0)
	EFAULT_CALL("poll bad", poll(bad, 4, 0));
	EFAULT_CALL("poll bad blocking", poll(bad, 4, -1));
	EFAULT_CALL("poll nfds", poll(edge, 8, 0));
	EFAULT_CALL("poll nfds blocking", poll(edge, 8, 1000));
	EFAULT_CALL("__poll_chk bad", __poll_chk(bad, 4, 0, 4 * sizeof(pf)));
	EFAULT_CALL("ppoll bad", ppoll(bad, 4, &ts0, NULL));
	EFAULT_CALL("ppoll nfds", ppoll(edge, 8, NULL, NULL));
	close(cli);
	close(srv);

	/* An invalid timeout is EINVAL whatever the fds, also ready ones. */
	request(&cli, &srv);
	send_all(cli, "G", 1, 0);
	pf = (struct pollfd){.fd = srv, .events = POLLIN};
	for (r = 0; r < 2; r++) {
		struct timespec bad_ts = {0, 1000000000L};
		const char *name =
			r ? "__ppoll_chk invalid timeout" : "ppoll invalid timeout";
		int rr;

		CHECK(shows_trace(), "%s: no context before the call: %s", name,
		      ctxobs_shown());
		errno = 0;
		rr = r ? __ppoll_chk(&pf, 1, &bad_ts, NULL, sizeof(pf))
		       : ppoll(&pf, 1, &bad_ts, NULL);
		e = errno;
		CHECK(rr == -1 && e == EINVAL, "%s -> %d errno %d", name, rr, e);
	}
	close(cli);
	close(srv);
	request(&cli, &srv);

	/* What the check is for.  A wait on something else (a pipe: an
	 * upstream, a database) is part of the request... */
	if (pipe2(p, O_CLOEXEC))
		die("pipe");
	pf = (struct pollfd){.fd = p[0], .events = POLLIN};
	r = poll(&pf, 1, 0);
	CHECK(r == 0 && shows_trace(), "poll on a pipe: %d %s", r, ctxobs_shown());
	r = poll(&pf, 1, 20);
	CHECK(r == 0 && shows_trace(), "blocking poll on a pipe: %d %s", r,
	      ctxobs_shown());
	FD_ZERO(&rs);
	FD_SET(p[0], &rs);
	(void)write(p[1], "x", 1);
	r = select(p[0] + 1, &rs, NULL, NULL, NULL);
	CHECK(r == 1 && shows_trace(), "select on a pipe: %d %s", r, ctxobs_shown());
	/* ...one on a client connection is an idle loop or a server waiting
	 * for the next request: blocking (nothing to read yet)... */
	pf = (struct pollfd){.fd = srv, .events = POLLIN};
	r = poll(&pf, 1, 20);
	CHECK(r == 0 && shows_none(), "blocking poll on the client: %d %s", r,
	      ctxobs_shown());
	close(cli);
	close(srv);
	/* ...also in select, which clears it as it starts to wait... */
	request(&cli, &srv);
	FD_ZERO(&rs);
	FD_SET(srv, &rs);
	tv0 = (struct timeval){0, 20000};
	r = select(srv + 1, &rs, NULL, NULL, &tv0);
	CHECK(r == 0 && shows_none(), "blocking select on the client: %d %s", r,
	      ctxobs_shown());
	close(cli);
	close(srv);
	/* ...or not (data ready)... */
	request(&cli, &srv);
	send_all(cli, "G", 1, 0);
	pf.fd = srv;
	r = ppoll(&pf, 1, NULL, NULL);
	CHECK(r == 1 && shows_none(), "ppoll on a ready client: %d %s", r,
	      ctxobs_shown());
	close(cli);
	close(srv);
	/* ...and select on a ready client. */
	request(&cli, &srv);
	send_all(cli, "G", 1, 0);
	FD_ZERO(&rs);
	FD_SET(srv, &rs);
	FD_SET(p[0], &rs);
	r = select((srv > p[0] ? srv : p[0]) + 1, &rs, NULL, NULL, NULL);
	CHECK(r >= 1 && shows_none(), "select on a ready client: %d %s", r,
	      ctxobs_shown());
	close(cli);
	close(srv);
	close(p[0]);
	close(p[1]);
	(void)munmap(map, (size_t)pg * 2);
}

static ssize_t
out2(int fd, const char *how, const char *a, const char *b)
{
	struct iovec v[3] = {{(void *)a, strlen(a)}, {NULL, 0}, {(void *)b, strlen(b)}};

	if (strcmp(how, "writev1") == 0) {
		/* The whole status line in one iovec: the response write's
		 * usual path (hook-socket.c, sk_out_fast()). */
		char one[128];

		snprintf(one, sizeof(one), "%s%s", a, b);
		v[0].iov_base = one;
		v[0].iov_len = strlen(one);
		return writev(fd, v, 1);
	}
	if (strcmp(how, "sendmsg") == 0) {
		struct msghdr m = {.msg_iov = v, .msg_iovlen = 3};

		return sendmsg(fd, &m, 0);
	}
	return writev(fd, v, 3);
}

static void
mode_continue(const char *how)
{
	static const char head[] = "POST /up HTTP/1.1\r\nHost: x\r\n" TP
				   "Expect: 100-continue\r\nContent-Length: 5\r\n\r\n";
	char buf[sizeof(head)];
	int cli, srv;
	ssize_t r;

	pair(&cli, &srv);
	send_all(cli, head, sizeof(head) - 1, 0);
	read_n(srv, buf, sizeof(head) - 1);
	CHECK(shows_trace(), "head: %s", ctxobs_shown());
	r = out2(srv, how, "HTTP/1.1 ", "100 Continue\r\n\r\n");
	CHECK(r == 25, "%s 100: %zd", how, r);
	CHECK(shows_trace(), "after 100 Continue: %s", ctxobs_shown());
	send_all(cli, "hello", 5, 0);
	read_n(srv, buf, 5);
	CHECK(shows_trace(), "%s: the body was read without the request's context: %s",
	      how, ctxobs_shown());
	r = out2(srv, how, "HTTP/1.1 ", "200 OK\r\nContent-Length: 0\r\n\r\n");
	CHECK(r > 0, "%s 200: %zd", how, r);
	/* The next request's first byte: the answered one is gone. */
	send_all(cli, "G", 1, 0);
	read_n(srv, buf, 1);
	CHECK(shows_none(), "%s: after the final response: %s", how, ctxobs_shown());
	close(cli);
	close(srv);
}

#define TRACE2 "0af7651916cd43dd8448eb211c80319c"
#define TP2    "traceparent: 00-" TRACE2 "-b7ad6b7169203331-01\r\n"

/* Does the thread publish TRACE2 now? */
static bool
shows_trace2(void)
{
	char s[128];

	ctxobs_format(s, sizeof(s));
	return strncmp(s, "trace=" TRACE2 " ", 6 + 32 + 1) == 0;
}

/* A request head whose traceparent has TRACE2 read on the keep-alive
 * connection cli/srv after its last response: it must show TRACE2. */
static void
next_shows_trace2(int cli, int srv, const char *what)
{
	static const char next[] = "GET /next HTTP/1.1\r\nHost: x\r\n" TP2 "\r\n";
	char buf[sizeof(next)];

	send_all(cli, next, sizeof(next) - 1, 0);
	read_n(srv, buf, sizeof(next) - 1);
	CHECK(shows_trace2(), "%s: the next request: %s", what, ctxobs_shown());
}

static void
mode_continue_final(const char *how)
{
	static const char head[] =
		"POST /up HTTP/1.1\r\nHost: x\r\n" TP
		"Expect: 100-continue\r\nContent-Length: 5\r\n\r\nhello";
	static const char resp[] = "HTTP/1.1 100 Continue\r\n\r\n"
				   "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	char buf[sizeof(head) + sizeof(resp)];
	ssize_t r;
	int cli, srv;

	pair(&cli, &srv);
	send_all(cli, head, sizeof(head) - 1, 0);
	read_n(srv, buf, sizeof(head) - 1);
	CHECK(shows_trace(), "continue-final: head: %s", ctxobs_shown());
	if (strcmp(how, "writev") == 0) {
		struct iovec v[2] = {{(void *)resp, 25},
				     {(void *)(resp + 25), sizeof(resp) - 1 - 25}};

		r = writev(srv, v, 2);
	} else {
		r = write(srv, resp, sizeof(resp) - 1);
	}
	CHECK(r == (ssize_t)sizeof(resp) - 1, "continue-final %s: %zd", how, r);
	read_n(cli, buf, sizeof(resp) - 1);
	next_shows_trace2(cli, srv, how);
	close(cli);
	close(srv);
}

/* A forward proxy's CONNECT (preload/conn.c, "Tunnels"): answered 407, the
 * connection stays an HTTP/1 one and the retry on it gets its context;
 * answered 200, the bytes after it are the tunnel's, and a plain request
 * sent through it is not the proxy's (no context of its own). */
static void
mode_connect(const char *how)
{
	static const char head[] = "CONNECT origin:80 HTTP/1.1\r\n"
				   "Host: origin:80\r\n" TP "\r\n";
	static const char r407[] = "HTTP/1.1 407 Proxy Authentication Required\r\n"
				   "Content-Length: 0\r\n\r\n";
	static const char r200[] = "HTTP/1.1 200 Connection Established\r\n\r\n";
	static const char inner[] =
		"GET /inner HTTP/1.1\r\nHost: origin\r\n" TP2 "\r\n";
	bool ok = strcmp(how, "200") == 0;
	const char *resp = ok ? r200 : r407;
	size_t n = ok ? sizeof(r200) - 1 : sizeof(r407) - 1;
	char buf[sizeof(r407) + sizeof(inner)];
	int cli, srv;

	pair(&cli, &srv);
	send_all(cli, head, sizeof(head) - 1, 0);
	read_n(srv, buf, sizeof(head) - 1);
	CHECK(shows_trace(), "connect: head: %s", ctxobs_shown());
	send_all(srv, resp, n, 0);
	read_n(cli, buf, n);
	if (!ok) {
		next_shows_trace2(cli, srv, "connect 407");
	} else {
		send_all(cli, inner, sizeof(inner) - 1, 0);
		read_n(srv, buf, sizeof(inner) - 1);
		CHECK(!shows_trace2(), "connect 200: a request in the tunnel: %s",
		      ctxobs_shown());
	}
	close(cli);
	close(srv);
}

/* Descriptor edges of the connection table (hooks/hook-socket.c):
 * dup2() of a connection onto itself changes nothing, so the connection
 * stays followed (it is no copy over it: it was forgotten), a connection
 * accept4() returns as fd 0 (stdin closed, as a daemon's) is one like any
 * other, and so is a head read with readv() of a single iovec. */
static void
mode_fd(const char *how)
{
	static const char head[] = "GET /fd HTTP/1.1\r\nHost: x\r\n" TP "\r\n";
	char buf[sizeof(head)];
	int cli, srv;

	if (strcmp(how, "accept4-0") == 0) {
		static struct sockaddr_in a;
		int l = listen_loopback(1, SOCK_CLOEXEC, &a);

		cli = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (l < 0 || cli < 0 || connect(cli, (void *)&a, sizeof(a)))
			die("connect");
		close(0);
		srv = accept4(l, NULL, NULL, SOCK_CLOEXEC);
		CHECK(srv == 0, "accept4: fd %d", srv);
		close(l);
		send_all(cli, head, sizeof(head) - 1, 0);
		read_n(srv, buf, sizeof(head) - 1);
		CHECK(shows_trace(), "accept4 to fd 0: %s", ctxobs_shown());
	} else if (strcmp(how, "readv1") == 0) {
		struct iovec v = {buf, sizeof(head) - 1};

		pair(&cli, &srv);
		send_all(cli, head, sizeof(head) - 1, 0);
		CHECK(readv(srv, &v, 1) > 0, "readv: %s", strerror(errno));
		CHECK(shows_trace(), "readv of one iovec: %s", ctxobs_shown());
	} else {
		request(&cli, &srv);
		send_all(srv, "HTTP/1.1 204 No Content\r\n\r\n", 27, 0);
		read_n(cli, buf, 27);
		CHECK(dup2(srv, srv) == srv, "dup2: %s", strerror(errno));
		next_shows_trace2(cli, srv, "dup2 onto itself");
	}
	close(cli);
	close(srv);
}

/* Two pipelined requests; the first one's response head written in part
 * from a buffer that ends at end (a PROT_NONE page after it): its 37
 * bytes do not tell the response's length, so the second request is
 * made current at once, as for a head cut in two writes. */
static void
mode_short_pipelined(void (*arm)(size_t), char *end)
{
	static const char two[] = "GET /a HTTP/1.1\r\nHost: x\r\n" TP "\r\n"
				  "GET /b HTTP/1.1\r\nHost: x\r\n" TP2 "\r\n";
	static const char head[] = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n";
	char buf[sizeof(two)], *h = end - (sizeof(head) - 1);
	int cli, srv;
	ssize_t r;

	memcpy(h, head, sizeof(head) - 1);
	pair(&cli, &srv);
	send_all(cli, two, sizeof(two) - 1, 0);
	read_n(srv, buf, sizeof(two) - 1);
	CHECK(shows_trace(), "short pipelined: first request: %s", ctxobs_shown());
	arm(sizeof(head) - 1);
	r = write(srv, h, 64);
	CHECK(r == (ssize_t)sizeof(head) - 1, "short pipelined: %zd", r);
	send_all(srv, "\r\na", 3, 0);
	read_n(cli, buf, sizeof(head) - 1 + 3);
	CHECK(shows_trace2(), "short pipelined: second request: %s", ctxobs_shown());
	send_all(srv, "HTTP/1.1 204 No Content\r\n\r\n", 27, 0);
	read_n(cli, buf, 27);
	close(cli);
	close(srv);
}

/* A buffer whose stated length runs past its mapping, written in part:
 * the 4 bytes the kernel took end the mapping (libshort-write.so makes
 * the short write).  As the byte stream says, they start the final
 * response: the rest, written next, completes it, and the next request
 * has its own context. */
static void
mode_short(const char *how)
{
	static const char rest[] = "/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	void (*arm)(size_t) = (void (*)(size_t))dlsym(RTLD_DEFAULT, "short_write_arm");
	long pg = sysconf(_SC_PAGESIZE);
	char buf[64], *m, *h;
	ssize_t r;
	int cli, srv;

	if (!arm) {
		fprintf(stderr, "sock-edge: libshort-write.so is not preloaded\n");
		exit(2);
	}
	m = page_before_none(pg);
	h = m + pg - 4;
	memcpy(h, "HTTP", 4);
	if (strcmp(how, "pipelined") == 0) {
		mode_short_pipelined(arm, m + pg);
		(void)munmap(m, (size_t)pg * 2);
		return;
	}
	request(&cli, &srv);
	arm(4);
	if (strcmp(how, "write") == 0) {
		r = write(srv, h, 64);
	} else if (strcmp(how, "send") == 0) {
		r = send(srv, h, 64, 0);
	} else {
		struct iovec v[2] = {{h, 64}, {(void *)rest, sizeof(rest) - 1}};
		struct msghdr msg = {.msg_iov = v, .msg_iovlen = 2};

		r = strcmp(how, "sendmsg") == 0 ? sendmsg(srv, &msg, 0)
						: writev(srv, v, 2);
	}
	CHECK(r == 4, "short %s: %zd", how, r);
	send_all(srv, rest, sizeof(rest) - 1, 0);
	read_n(cli, buf, 4 + sizeof(rest) - 1);
	CHECK(memcmp(buf, "HTTP/1.1 200 OK\r\n", 17) == 0, "short %s: %.17s", how, buf);
	next_shows_trace2(cli, srv, how);
	close(cli);
	close(srv);
	(void)munmap(m, (size_t)pg * 2);
}

static void
mode_batch(void)
{
	static const char two[] = "GET /a HTTP/1.1\r\nHost: x\r\n" TP "\r\n"
				  "GET /b HTTP/1.1\r\nHost: x\r\n"
				  "traceparent: 00-5e0c63257de34c926f9efcd03aa62e11-"
				  "b7ad6b7169203331-01\r\n\r\n";
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na"
				   "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb";
	char buf[sizeof(two)];
	int cli, srv;

	pair(&cli, &srv);
	send_all(cli, two, sizeof(two) - 1, 0);
	read_n(srv, buf, sizeof(two) - 1);
	CHECK(write(srv, resp, sizeof(resp) - 1) == (ssize_t)sizeof(resp) - 1,
	      "batch: write: %s", strerror(errno));
	read_n(cli, buf, sizeof(resp) - 1);
	next_shows_trace2(cli, srv, "batch");
	close(cli);
	close(srv);
}

#define TRACEB "5e0c63257de34c926f9efcd03aa62e11"
#define TRACEC "6c2b1e0f9a8d7c6b5a4f3e2d1c0b9a88"

/* Does the thread publish trace (32 hex) now? */
static bool
shows(const char *trace)
{
	char s[128];

	ctxobs_format(s, sizeof(s));
	return strncmp(s, "trace=", 6) == 0 && strncmp(s + 6, trace, 32) == 0;
}

/* Pipelined requests answered with sendmmsg(), each message a sendmsg()
 * of its own on a stream socket, all of them written:
 *   two       the two responses in two messages: the third request gets
 *             its own context (old: only the first message was seen, the
 *             second request stayed unanswered, the third was queued
 *             behind it and read under its context)
 *   headbody  the first response's head (Content-Length: 1) in one
 *             message, its body in the next: one response, after which
 *             the second request is current; the same for the second
 *             response, then the third request gets its own context
 *   short     three requests; the first response whole in message 0, the
 *             second's head and a body of 4 MiB in message 1, which the
 *             kernel takes in part (non-blocking, the client not
 *             reading), and the third response in message 2, which it
 *             does not take: the second request stays current until the
 *             rest of its body is written (only the bytes the kernel took
 *             count, none of message 2's), then the third is current
 *   empty     the two responses in messages 0 and 2, with message 1
 *             empty between them (msg_len 0: an iovec of length 0 whose
 *             base is no valid address, which the kernel never reads):
 *             the empty one answers nothing and is not read, the third
 *             request gets its own context */
static void
mode_mmsg(const char *how)
{
	static const char two[] =
		"GET /a HTTP/1.1\r\nHost: x\r\n" TP "\r\n"
		"GET /b HTTP/1.1\r\nHost: x\r\n"
		"traceparent: 00-" TRACEB "-b7ad6b7169203331-01\r\n\r\n";
	static const char third[] =
		"GET /c HTTP/1.1\r\nHost: x\r\n"
		"traceparent: 00-" TRACEC "-b7ad6b7169203331-01\r\n\r\n";
	static const char ra[] = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na";
	static const char rhead[] = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n";
	static const char big_head[] =
		"HTTP/1.1 200 OK\r\nContent-Length: 4194304\r\n\r\n";
	const size_t big = 4194304;
	char buf[sizeof(two) + sizeof(third)], *body;
	struct iovec v[4];
	struct mmsghdr mm[3];
	int cli, srv, r, i;

	memset(mm, 0, sizeof(mm));
	for (i = 0; i < 3; i++) {
		mm[i].msg_hdr.msg_iov = &v[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	pair(&cli, &srv);
	send_all(cli, two, sizeof(two) - 1, 0);
	if (strcmp(how, "short") == 0)
		send_all(cli, third, sizeof(third) - 1, 0);
	read_n(srv, buf,
	       sizeof(two) - 1 + (strcmp(how, "short") == 0 ? sizeof(third) - 1 : 0));
	CHECK(shows_trace(), "mmsg %s: first request: %s", how, ctxobs_shown());
	if (strcmp(how, "two") == 0) {
		v[0] = (struct iovec){(void *)ra, sizeof(ra) - 1};
		v[1] = (struct iovec){(void *)ra, sizeof(ra) - 1};
		r = sendmmsg(srv, mm, 2, 0);
		CHECK(r == 2, "mmsg two: sendmmsg: %d", r);
		read_n(cli, buf, 2 * (sizeof(ra) - 1));
		next_shows_trace2(cli, srv, "mmsg two");
	} else if (strcmp(how, "empty") == 0) {
		v[0] = (struct iovec){(void *)ra, sizeof(ra) - 1};
		v[1] = (struct iovec){(void *)8, 0};
		v[2] = (struct iovec){(void *)ra, sizeof(ra) - 1};
		r = sendmmsg(srv, mm, 3, 0);
		CHECK(r == 3 && mm[1].msg_len == 0, "mmsg empty: sendmmsg: %d (%u)", r,
		      mm[1].msg_len);
		read_n(cli, buf, 2 * (sizeof(ra) - 1));
		next_shows_trace2(cli, srv, "mmsg empty");
	} else if (strcmp(how, "headbody") == 0) {
		v[0] = (struct iovec){(void *)rhead, sizeof(rhead) - 1};
		v[1] = (struct iovec){(void *)"a", 1};
		r = sendmmsg(srv, mm, 2, 0);
		CHECK(r == 2, "mmsg headbody: sendmmsg: %d", r);
		CHECK(shows(TRACEB), "mmsg headbody: after the first response: %s",
		      ctxobs_shown());
		r = sendmmsg(srv, mm, 2, 0);
		CHECK(r == 2, "mmsg headbody: sendmmsg: %d", r);
		CHECK(shows(TRACEB), "mmsg headbody: after the second response: %s",
		      ctxobs_shown());
		read_n(cli, buf, 2 * sizeof(rhead));
		next_shows_trace2(cli, srv, "mmsg headbody");
	} else {
		size_t off;
		pid_t pid;
		int st;

		body = malloc(big);
		if (!body)
			die("malloc");
		memset(body, 'b', big);
		if (fcntl(srv, F_SETFL, O_NONBLOCK) != 0)
			die("O_NONBLOCK");
		v[0] = (struct iovec){(void *)ra, sizeof(ra) - 1};
		/* Message 1: the head and the body, two iovecs. */
		v[1] = (struct iovec){(void *)big_head, sizeof(big_head) - 1};
		v[2] = (struct iovec){body, big};
		mm[1].msg_hdr.msg_iovlen = 2;
		v[3] = (struct iovec){(void *)ra, sizeof(ra) - 1};
		mm[2].msg_hdr.msg_iov = &v[3];
		r = sendmmsg(srv, mm, 3, 0);
		if (r != 2 || mm[1].msg_len >= sizeof(big_head) - 1 + big ||
		    mm[1].msg_len < sizeof(big_head) - 1)
			die("mmsg short: sendmmsg did not stop inside message 1");
		CHECK(shows(TRACEB), "mmsg short: after the partial sendmmsg: %s",
		      ctxobs_shown());
		/* The rest of the body, with a child draining the client. */
		pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			size_t left = sizeof(ra) - 1 + sizeof(big_head) - 1 + big;

			while (left) {
				ssize_t k = read(cli, body, left < big ? left : big);

				if (k <= 0)
					_exit(1);
				left -= (size_t)k;
			}
			_exit(0);
		}
		if (fcntl(srv, F_SETFL, 0) != 0)
			die("blocking");
		off = mm[1].msg_len - (sizeof(big_head) - 1);
		send_all(srv, body + off, big - off, 0);
		CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
			      WEXITSTATUS(st) == 0,
		      "mmsg short: drain: %#x", st);
		CHECK(shows(TRACEC), "mmsg short: after the second response: %s",
		      ctxobs_shown());
		free(body);
	}
	close(cli);
	close(srv);
}

/* Move n bytes out of srv through the pipe p, as a proxy that splices
 * bodies does (pipe to the backend; here, read and dropped). */
static void
splice_out(int srv, const int p[2], size_t n)
{
	char buf[4096];

	while (n) {
		ssize_t r = splice(srv, NULL, p[1], NULL,
				   n < sizeof(buf) ? n : sizeof(buf), SPLICE_F_MOVE);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			die("splice out");
		read_n(p[0], buf, (size_t)r);
		n -= (size_t)r;
	}
}

/* A response written with sendmmsg() (how "sendmmsg") or pwritev2() at
 * offset -1 (else), then the connection's next request. */
static void
mode_writers(const char *how)
{
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	struct iovec v = {(void *)resp, sizeof(resp) - 1};
	char buf[sizeof(resp)];
	int cli, srv;
	ssize_t r;

	request(&cli, &srv);
	if (strcmp(how, "sendmmsg") == 0) {
		struct mmsghdr mm = {.msg_hdr = {.msg_iov = &v, .msg_iovlen = 1}};

		r = sendmmsg(srv, &mm, 1, 0);
		CHECK(r == 1 && mm.msg_len == sizeof(resp) - 1,
		      "sendmmsg: %zd, %u bytes", r, mm.msg_len);
	} else {
		r = pwritev2(srv, &v, 1, -1, 0);
		CHECK(r == (ssize_t)sizeof(resp) - 1, "pwritev2: %zd", r);
	}
	read_n(cli, buf, sizeof(resp) - 1);
	next_shows_trace2(cli, srv, how);
	close(cli);
	close(srv);
}

static void
mode_splice(void)
{
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	static const char next[] = "GET /next HTTP/1.1\r\nHost: x\r\n" TP2 "\r\n";
	char head[256], buf[sizeof(head)], *body;
	size_t body_len = 20000, i;
	int cli, srv, p[2], n;

	if (pipe2(p, O_CLOEXEC))
		die("pipe");
	body = malloc(body_len);
	if (!body)
		die("malloc");
	for (i = 0; i < body_len; i++)
		body[i] = (char)('a' + i % 26);
	/* A body spliced out, then the next request. */
	pair(&cli, &srv);
	n = snprintf(head, sizeof(head),
		     "POST /up HTTP/1.1\r\nHost: x\r\n" TP
		     "Content-Length: %zu\r\n\r\n",
		     body_len);
	send_all(cli, head, (size_t)n, 0);
	send_all(cli, body, body_len, 0);
	send_all(cli, next, sizeof(next) - 1, 0);
	read_n(srv, buf, (size_t)n);
	CHECK(shows_trace(), "splice: head: %s", ctxobs_shown());
	splice_out(srv, p, body_len);
	CHECK(shows_trace(), "splice: while the body is spliced: %s", ctxobs_shown());
	send_all(srv, resp, sizeof(resp) - 1, 0);
	read_n(srv, buf, sizeof(next) - 1);
	CHECK(shows_trace2(), "splice: the request after a spliced body: %s",
	      ctxobs_shown());
	/* That request's head spliced out: the scanner cannot follow; the
	 * one after it, read, gets no context (not the lost one's either). */
	send_all(srv, resp, sizeof(resp) - 1, 0);
	send_all(cli, head, (size_t)n, 0);
	splice_out(srv, p, (size_t)n);
	send_all(cli, body, body_len, 0);
	splice_out(srv, p, body_len);
	send_all(cli, next, sizeof(next) - 1, 0);
	read_n(srv, buf, sizeof(next) - 1);
	CHECK(shows_none(), "splice: a request after a spliced head: %s",
	      ctxobs_shown());
	close(cli);
	close(srv);
	/* A response spliced into the connection answers the request: the
	 * next read (of the next request's first byte) ends its context. */
	request(&cli, &srv);
	if (write(p[1], resp, sizeof(resp) - 1) != (ssize_t)sizeof(resp) - 1)
		die("write pipe");
	CHECK(splice(p[0], NULL, srv, NULL, sizeof(resp) - 1, SPLICE_F_MOVE) ==
		      (ssize_t)sizeof(resp) - 1,
	      "splice in: %s", strerror(errno));
	send_all(cli, "G", 1, 0);
	read_n(srv, buf, 1);
	CHECK(shows_none(), "splice: after a spliced response: %s", ctxobs_shown());
	close(cli);
	close(srv);
	close(p[0]);
	close(p[1]);
	free(body);
}

/* The keep-alive read that follows a response, through a copy of the
 * connection (dup(): conn.c, "Copies") rather than the descriptor the
 * request was read from ("dup-read"), and a write on another connection
 * that has no request ("other-write"): either way the thread no longer
 * works on the answered request, and its context must go before the
 * call (hook-socket.c, sk_follow(): "response-sent"/"other-conn").  One
 * byte of the next head is read, so no new request replaces it. */
static void
mode_after(const char *how)
{
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	char buf[sizeof(resp)];
	int cli, srv, cli2, srv2, d;

	request(&cli, &srv);
	if (strcmp(how, "dup-read") == 0) {
		d = dup(srv);
		if (d < 0)
			die("dup");
		send_all(srv, resp, sizeof(resp) - 1, 0);
		CHECK(shows_trace(), "dup-read: while answering: %s", ctxobs_shown());
		read_n(cli, buf, sizeof(resp) - 1);
		send_all(cli, "G", 1, 0);
		read_n(d, buf, 1);
		CHECK(shows_none(), "dup-read: next byte read through a copy: %s",
		      ctxobs_shown());
		close(d);
	} else {
		pair(&cli2, &srv2);
		CHECK(shows_trace(), "other-write: before: %s", ctxobs_shown());
		send_all(srv2, "x", 1, 0);
		CHECK(shows_none(), "other-write: after the write: %s", ctxobs_shown());
		close(cli2);
		close(srv2);
	}
	close(cli);
	close(srv);
}

/* One wait for srv to be readable with the function how, blocking (no
 * timeout), checked to start with the answered request still shown (after
 * the epoll set's setup); -2 for an unknown how. */
static int
wait_on(const char *how, int srv)
{
	struct pollfd pf = {.fd = srv, .events = POLLIN};
	struct epoll_event ev = {.events = EPOLLIN};
	int ep = -1, r = -2;
	fd_set rs;

	FD_ZERO(&rs);
	FD_SET(srv, &rs);
	if (strncmp(how, "epoll_", 6) == 0) {
		ep = epoll_create1(EPOLL_CLOEXEC);
		if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, srv, &ev))
			die("epoll");
	}
	CHECK(shows_trace(), "%s: answered request not shown before the wait: %s", how,
	      ctxobs_shown());
	if (strcmp(how, "epoll_wait") == 0)
		r = epoll_wait(ep, &ev, 1, -1);
	else if (strcmp(how, "epoll_pwait") == 0)
		r = epoll_pwait(ep, &ev, 1, -1, NULL);
	else if (strcmp(how, "epoll_pwait2") == 0)
		r = epoll_pwait2(ep, &ev, 1, NULL, NULL);
	else if (strcmp(how, "poll") == 0)
		r = poll(&pf, 1, -1);
	else if (strcmp(how, "__poll_chk") == 0)
		r = __poll_chk(&pf, 1, -1, sizeof(pf));
	else if (strcmp(how, "ppoll") == 0)
		r = ppoll(&pf, 1, NULL, NULL);
	else if (strcmp(how, "__ppoll_chk") == 0)
		r = __ppoll_chk(&pf, 1, NULL, NULL, sizeof(pf));
	else if (strcmp(how, "select") == 0)
		r = select(srv + 1, &rs, NULL, NULL, NULL);
	else if (strcmp(how, "pselect") == 0)
		r = pselect(srv + 1, &rs, NULL, NULL, NULL, NULL);
	if (ep >= 0)
		close(ep);
	return r;
}

/* A server back in its wait after a response (an event loop, or a
 * keep-alive connection's next request): the answered request's context
 * must go as the wait starts ("detach", the call's name).  With the event
 * log off that is the waits' fast path (hook-socket.c,
 * ctxshim_sk_idle_fast(): inline in the epoll_wait/epoll_pwait hooks, in
 * sk_idle_quiet() for the others), which the event log sends down its
 * slow path: each runs with it off and on.  The client's next byte is
 * there before the wait, so the wait returns at once, and nothing between
 * its clear and its return publishes. */
static void
mode_idle(const char *how)
{
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	char buf[sizeof(resp)];
	int cli, srv, r;

	request(&cli, &srv);
	send_all(srv, resp, sizeof(resp) - 1, 0);
	read_n(cli, buf, sizeof(resp) - 1);
	send_all(cli, "G", 1, 0);
	r = wait_on(how, srv);
	if (r == -2) {
		fprintf(stderr, "sock-edge idle: unknown wait %s\n", how);
		exit(64);
	}
	CHECK(r == 1 && shows_none(), "%s after a response -> %d: %s", how, r,
	      ctxobs_shown());
	close(cli);
	close(srv);
}

int
main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	const char *arg = argc > 2 ? argv[2] : "";

	signal(SIGPIPE, SIG_IGN);
	if (!ctxobs_record() && !dlsym(RTLD_DEFAULT, OTEL_THREAD_CTX_SYMBOL)) {
		fprintf(stderr, "sock-edge: not run under the shim\n");
		return 2;
	}
	if (strcmp(mode, "oob") == 0)
		mode_oob(arg);
	else if (strcmp(mode, "poll-efault") == 0)
		mode_poll_efault();
	else if (strcmp(mode, "continue") == 0)
		mode_continue(arg);
	else if (strcmp(mode, "continue-final") == 0)
		mode_continue_final(arg);
	else if (strcmp(mode, "short") == 0)
		mode_short(arg);
	else if (strcmp(mode, "batch") == 0)
		mode_batch();
	else if (strcmp(mode, "writers") == 0)
		mode_writers(arg);
	else if (strcmp(mode, "mmsg") == 0)
		mode_mmsg(arg);
	else if (strcmp(mode, "splice") == 0)
		mode_splice();
	else if (strcmp(mode, "after") == 0)
		mode_after(arg);
	else if (strcmp(mode, "idle") == 0)
		mode_idle(arg);
	else if (strcmp(mode, "connect") == 0)
		mode_connect(arg);
	else if (strcmp(mode, "fd") == 0)
		mode_fd(arg);
	else {
		fprintf(stderr, "usage: sock-edge "
				"oob|poll-efault|continue|continue-final|short|batch|"
				"writers|mmsg|splice|after|idle|connect|fd [how]\n");
		return 64;
	}
	printf("RESULT %s fails=%d\n", mode, fails);
	return fails ? 1 : 0;
}
