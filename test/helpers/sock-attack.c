/* SPDX-License-Identifier: Apache-2.0 */
/* How an unmodified host stresses the socket level (hooks/hook-socket.c,
 * preload/conn.c), run under the shim by test-preload-sockattack.c.  A
 * server and its client in one process on 127.0.0.1; the server checks
 * the context its own thread publishes (ctxobs.h).  No tracing code.
 *
 *   sock-attack peek            MSG_PEEK of a whole head, and of the rest
 *                               of a split one: nothing is published until
 *                               the bytes are read for real, then exactly
 *                               the request's context
 *   sock-attack iov             recvmsg with many iovecs (zero-length ones
 *                               among them) and a head split across them,
 *                               readv, recvmmsg of two messages
 *   sock-attack close-range-einval
 *                               close_range() over a connection with flags
 *                               the kernel rejects (EINVAL): nothing was
 *                               closed, so the connection is still followed
 *   sock-attack close-range-unshare
 *                               close_range(CLOSE_RANGE_UNSHARE) over a
 *                               connection: in a process's only thread it
 *                               closes it (a pipe that gets the number
 *                               publishes nothing); in another thread it
 *                               closes that thread's copy of the table only,
 *                               and the connection is still followed
 *   sock-attack closefrom-negative [_Fork]
 *                               closefrom(-1) closes everything (glibc takes
 *                               it as 0): the connection's number, reused
 *                               by a pipe, carries no connection any more
 *                               (in a fork() child, or a _Fork() one)
 *   sock-attack fork-ids [fork|_Fork]
 *                               parent and child each read a traced request
 *                               right after the fork: their span-ids differ
 *   sock-attack vfork-dup2 [closefrom|close_range]
 *                               a vfork() child dup2()s a connection onto
 *                               the number of one of its parent's pipes,
 *                               closes everything from 3 up and exits: the
 *                               parent's pipe stays a pipe (its HTTP-looking
 *                               bytes publish nothing) and its connection
 *                               is still followed
 *   sock-attack dup2-mid-head   a connection dup2()ed onto another number in
 *                               the middle of a head: the rest of that head
 *                               never publishes the values of a head read
 *                               before on that number, the next one is
 *                               followed
 *   sock-attack eintr           a head split by EAGAIN, EINTR and a read
 *                               returning 0 on another connection
 *   sock-attack fdopen-fclose   a connection fdopen()ed and fclose()d (glibc
 *                               closes the fd internally): the request's
 *                               context goes, and a pipe that gets the
 *                               number publishes nothing
 *   sock-attack fclose-results  fclose() of files, of fmemopen(),
 *                               open_memstream() and fopencookie() streams,
 *                               and of a stream whose fd was closed under
 *                               it: the return value and errno are libc's
 *   sock-attack dup-answer [dup|fcntl|fcntl-cloexec|fcntl-sym]
 *                               a connection copied by dup() or
 *                               fcntl(F_DUPFD[_CLOEXEC]) (the header's
 *                               fcntl, i.e. fcntl64, or the plain fcntl
 *                               symbol), the original closed: the response
 *                               through the copy is the request's, the
 *                               next keep-alive request on the copy shows
 *                               its own trace
 *   sock-attack vfork-dup       a vfork() child dup()s a connection and
 *                               copies it with fcntl(F_DUPFD): the numbers
 *                               the copies got in the child's table are
 *                               free in its parent's, whose pipes on them
 *                               stay pipes
 *   sock-attack copy-rw [dup|dup2|dup3|fcntl]
 *                               requests read on a connection, responses
 *                               written through a copy of it (made before
 *                               the first request, as inetd's fd 0 and 1,
 *                               and another made in the middle of one):
 *                               the thread keeps the request's context
 *                               while writing, the response answers it,
 *                               the next keep-alive request gets its own;
 *                               closing the copies changes nothing
 *   sock-attack copy-read       requests read through either descriptor
 *                               (one head half through each), answered
 *                               through the other or the same one
 *   sock-attack copy-close [original|copy|read-copy]
 *                               the same, one of the two closed in the
 *                               middle of a request (the original before
 *                               the response, the copy after it was
 *                               written through it, or the copy the head
 *                               was read through before the response):
 *                               the other one carries the connection on,
 *                               and the thread the request until it is
 *                               answered
 *   sock-attack copy-ring [long|copy-of-copy|dup2-leader|close-range|
 *                          closefrom|pipelined]
 *                               rings of copies: their longest, copies of
 *                               copies, and the ways of leaving one (see
 *                               mode_copy_ring())
 *   sock-attack copy-wait [close|read]
 *                               a request read through one of two
 *                               descriptors of its connection, then
 *                               another thread closes it ("close") or
 *                               reads the body through the other one and
 *                               answers there ("read"); the thread's next
 *                               wait on a semaphore keeps the request
 *                               until it is answered, and only until then
 *   sock-attack inherit-wait [close|read|gone]
 *                               a request read through one of two
 *                               descriptors of its connection, and a
 *                               thread started then; the original is
 *                               closed ("close", "gone") or the body read
 *                               through the copy ("read"): the new
 *                               thread's waits on a semaphore keep the
 *                               request it inherited until it is
 *                               answered through the copy (and with
 *                               "read" a newer one read), or the copy is
 *                               closed too ("gone"), and only until then
 *   sock-attack copy-reuse      a copy closed and its number given to a new
 *                               connection: no link to the old one
 *   sock-attack copy-race [close|read|signal] [MS]
 *                               for MS milliseconds (default 1500, "read"
 *                               1000, "signal" 2500), on a
 *                               new connection each round: pipelined requests
 *                               read on it, one thread writing their
 *                               responses through a copy while another
 *                               closes the original and then the other
 *                               copies ("read": reads the heads one at a
 *                               time through three descriptors, each read
 *                               moving the state; "signal": a SIGALRM
 *                               handler on the writer's thread, every 29 us,
 *                               copies the descriptor holding the state
 *                               and closes it), and a third thread
 *                               churning pipelined requests of another
 *                               connection through the shim's pool: the
 *                               writer never publishes a context that is not
 *                               one of its own connection's requests
 *   sock-attack stdin-server [on|off|unix|pair]
 *                               run again with a server-side connection as
 *                               fd 0 and fd 1 (inetd): requests read on 0,
 *                               responses written on 1, keep-alive; TCP, or
 *                               AF_UNIX accepted from a named listener;
 *                               nothing shows with "off" (CTXSHIM_INHERITED
 *                               =0) or "pair" (a socketpair(): sshd's and
 *                               socat's way to connect a child's stdio)
 *   sock-attack stdin-client    run again with a client-side socket as fd 0
 *                               and fd 1 (an ssh ProxyCommand, a socat
 *                               child): an HTTP request written on 1 and
 *                               its response read on 0 publish nothing,
 *                               results and errno are the kernel's, and
 *                               then I/O on 0 and 1 leaves the context of
 *                               a request on another connection alone
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
#include <pthread.h>
#include <poll.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TRACE  "4bf92f3577b34da6a3ce929d0e0e4736"
#define TRACE2 "0af7651916cd43dd8448eb211c80319c"
#define HEAD(path, trace)                                            \
	"GET " path " HTTP/1.1\r\nHost: x\r\ntraceparent: 00-" trace \
	"-00f067aa0ba902b7-01\r\n\r\n"
#define RESP "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"

static void
send_str(int fd, const char *s)
{
	send_all(fd, s, strlen(s), MSG_NOSIGNAL);
}

/* Wait until fd has n bytes queued. */
static void
wait_queued(int fd, size_t n)
{
	char tmp[4096];

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t r = recv(fd, tmp, n < sizeof(tmp) ? n : sizeof(tmp),
				 MSG_PEEK | MSG_DONTWAIT);

		if (r >= (ssize_t)n)
			return;
		(void)poll(&p, 1, 1000);
	}
}

/* The trace the thread publishes: 1 TRACE, 2 TRACE2, 0 none, -1 another. */
static int
shown(void)
{
	char s[128];

	ctxobs_format(s, sizeof(s));
	if (strncmp(s, "trace=- ", 8) == 0)
		return 0;
	if (strncmp(s, "trace=" TRACE " ", 6 + 32 + 1) == 0)
		return 1;
	if (strncmp(s, "trace=" TRACE2 " ", 6 + 32 + 1) == 0)
		return 2;
	return -1;
}

/* Without the shim nothing is ever published: checks of what is shown
 * hold only under it. */
static bool shim;

/* Under the shim but nothing may be published (a child run with
 * CTXSHIM_INHERITED=0): every check wants 0. */
static bool force_none;

#define SHOWN(want, what)                                                             \
	CHECK(!shim || shown() == (force_none ? 0 : (want)), "%s: shows %d, want %d", \
	      (what), shown(), (force_none ? 0 : (want)))

/* ---- peek ---- */

static void
mode_peek(void)
{
	static const char h[] = HEAD("/peek", TRACE);
	char buf[512];
	int c, s;
	ssize_t r;

	pair(&c, &s);
	send_str(c, h);
	wait_queued(s, sizeof(h) - 1);
	r = recv(s, buf, sizeof(buf), MSG_PEEK);
	CHECK(r == (ssize_t)sizeof(h) - 1 && memcmp(buf, h, (size_t)r) == 0,
	      "peek returned %zd", r);
	SHOWN(0, "after a peek of the whole head");
	r = recv(s, buf, sizeof(h) - 1, MSG_PEEK | MSG_WAITALL);
	CHECK(r == (ssize_t)sizeof(h) - 1, "second peek returned %zd", r);
	SHOWN(0, "after two peeks");
	/* half the head for real, then a peek of the rest, then the rest */
	read_n(s, buf, 20);
	SHOWN(0, "after half the head");
	r = recv(s, buf, sizeof(buf), MSG_PEEK);
	CHECK(r == (ssize_t)sizeof(h) - 1 - 20, "peek of the rest returned %zd", r);
	SHOWN(0, "after a peek of the rest");
	read_n(s, buf, sizeof(h) - 1 - 20);
	CHECK(memcmp(buf, h + 20, sizeof(h) - 1 - 20) == 0, "bytes differ");
	SHOWN(1, "after the head");
	send_str(s, RESP);
	close(c);
	close(s);
}

/* ---- iov ---- */

static void
mode_iov(void)
{
	static const char h[] = HEAD("/iov", TRACE);
	static const char h2[] = HEAD("/iov2", TRACE2);
	char buf[1024];
	struct iovec v[64];
	struct msghdr m = {.msg_iov = v, .msg_iovlen = 64};
	struct mmsghdr mm[2];
	int c, s, i;
	size_t off = 0;
	ssize_t r;

	pair(&c, &s);
	send_str(c, h);
	wait_queued(s, sizeof(h) - 1);
	/* 64 iovecs: every third empty, the others 1..4 bytes */
	for (i = 0; i < 64; i++) {
		size_t len = i % 3 == 0 ? 0 : (size_t)(1 + i % 2);

		v[i].iov_base = buf + off;
		v[i].iov_len = len;
		off += len;
	}
	r = recvmsg(s, &m, 0);
	CHECK(r == (ssize_t)off && memcmp(buf, h, off) == 0, "recvmsg returned %zd", r);
	SHOWN(0, "in the middle of the head");
	/* the rest through readv with an empty first iovec */
	{
		struct iovec rv[3] = {{buf, 0}, {buf, 5}, {buf + 5, sizeof(buf) - 5}};

		r = readv(s, rv, 3);
	}
	CHECK(r == (ssize_t)(sizeof(h) - 1 - off) &&
		      memcmp(buf, h + off, (size_t)r) == 0,
	      "readv returned %zd", r);
	SHOWN(1, "after recvmsg + readv");
	send_str(s, RESP);

	/* two requests read with one recvmmsg (a stream socket fills one) */
	send_str(c, h2);
	wait_queued(s, sizeof(h2) - 1);
	memset(mm, 0, sizeof(mm));
	v[0] = (struct iovec){buf, 7};
	v[1] = (struct iovec){buf + 7, 0};
	v[2] = (struct iovec){buf + 7, sizeof(buf) - 7};
	mm[0].msg_hdr.msg_iov = v;
	mm[0].msg_hdr.msg_iovlen = 3;
	v[3] = (struct iovec){buf + 512, 512};
	mm[1].msg_hdr.msg_iov = &v[3];
	mm[1].msg_hdr.msg_iovlen = 1;
	r = recvmmsg(s, mm, 2, MSG_DONTWAIT, NULL);
	CHECK(r >= 1 && mm[0].msg_len == sizeof(h2) - 1 &&
		      memcmp(buf, h2, sizeof(h2) - 1) == 0,
	      "recvmmsg returned %zd", r);
	SHOWN(2, "after recvmmsg");
	send_str(s, RESP);
	close(c);
	close(s);
}

/* ---- close_range with flags the kernel rejects ---- */

static void
mode_close_range_einval(void)
{
	static const char h[] = HEAD("/cr", TRACE);
	char buf[512];
	int c, s, r, e;

	pair(&c, &s);
	errno = 0;
	r = close_range((unsigned)s, (unsigned)s, 1 << 20);
	e = errno;
	CHECK(r == -1 && e == EINVAL, "close_range gave %d errno %d", r, e);
	send_str(c, h);
	read_n(s, buf, sizeof(h) - 1);
	SHOWN(1, "after the head on the connection close_range() did not close");
	send_str(s, RESP);
	close(c);
	close(s);
}

/* ---- close_range(CLOSE_RANGE_UNSHARE) ---- */

/* A pipe whose reading end gets the free number fd, the n bytes of head
 * written into it and read from fd.  The free numbers below fd are filled
 * first, with open() and a close() system call, which no hook sees. */
static void
pipe_on(int fd, const char *head, size_t n)
{
	char buf[512];
	int p[2], low[64], nlow = 0, i;

	while (nlow < 64 && (low[nlow] = open("/dev/null", O_RDONLY)) >= 0 &&
	       low[nlow] < fd)
		nlow++;
	if (nlow < 64 && low[nlow] >= 0)
		syscall(SYS_close, low[nlow]);
	if (pipe(p) || p[0] != fd)
		die("pipe");
	for (i = 0; i < nlow; i++)
		close(low[i]);
	if (write(p[1], head, n) != (ssize_t)n ||
	    read(fd, buf, sizeof(buf)) != (ssize_t)n)
		die("pipe I/O");
	close(p[1]);
}

static void *
unshare_closer(void *arg)
{
	(void)arg;
	/* The thread's own copy of the table is closed; the process's stays. */
	CHECK(close_range(3, ~0u, CLOSE_RANGE_UNSHARE) == 0, "close_range: %s",
	      strerror(errno));
	return NULL;
}

static void
mode_close_range_unshare(void)
{
	static const char h[] = HEAD("/unshare", TRACE);
	static const char h2[] = HEAD("/alone", TRACE2);
	static const char ph[] = HEAD("/pipe", TRACE);
	char buf[512];
	pthread_t t;
	int c, s;

	/* The process's only thread: its table is not shared, the flag
	 * changes nothing, the connection is closed. */
	pair(&c, &s);
	send_str(c, h2);
	read_n(s, buf, sizeof(h2) - 1);
	SHOWN(2, "after the head on the connection");
	send_str(s, RESP);
	CHECK(close_range((unsigned)s, (unsigned)s, CLOSE_RANGE_UNSHARE) == 0,
	      "close_range: %s", strerror(errno));
	pipe_on(s, ph, sizeof(ph) - 1);
	SHOWN(0, "after a pipe's head on the number the only thread closed");
	close(c);
	close(s);

	pair(&c, &s);
	if (pthread_create(&t, NULL, unshare_closer, NULL) || pthread_join(t, NULL))
		die("pthread_create");
	send_str(c, h);
	read_n(s, buf, sizeof(h) - 1);
	SHOWN(1, "after the head on a connection another thread closed in its "
		 "unshared table");
	send_str(s, RESP);
	close(c);
	close(s);
}

/* ---- vfork + dup2 ---- */

static void
mode_vfork_dup2(bool how_range)
{
	static const char h[] = HEAD("/vfork", TRACE);
	static const char ph[] = HEAD("/pipe", TRACE2);
	char buf[512];
	int c, s, p[2], st;
	pid_t pid;

	pair(&c, &s);
	if (pipe2(p, O_CLOEXEC))
		die("pipe");
	/* a request on s, read and answered: the usual state of a CGI
	 * server when it starts the program */
	send_str(c, h);
	read_n(s, buf, sizeof(h) - 1);
	SHOWN(1, "after the head");
	pid = vfork();
	if (pid == 0) {
		/* the child's own table: p[0]'s number becomes the socket */
		if (dup2(s, p[0]) != p[0])
			_exit(3);
		/* and closes all else before its exec */
		if (how_range)
			(void)close_range(3, ~0u, 0);
		else
			closefrom(3);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0)
		die("vfork child");
	SHOWN(1, "after the vfork child");
	/* answered; the next read finds no request: the thread is idle */
	send_str(s, RESP);
	(void)fcntl(s, F_SETFL, O_NONBLOCK);
	CHECK(read(s, buf, sizeof(buf)) == -1 && errno == EAGAIN, "read after");
	SHOWN(0, "waiting for the next request");
	/* the parent's p[0] is still its pipe */
	if (write(p[1], ph, sizeof(ph) - 1) != (ssize_t)sizeof(ph) - 1)
		die("write pipe");
	read_n(p[0], buf, sizeof(ph) - 1);
	CHECK(memcmp(buf, ph, sizeof(ph) - 1) == 0, "pipe bytes differ");
	SHOWN(0, "after reading the pipe");
	/* the parent's connection is still followed */
	send_str(c, h);
	(void)fcntl(s, F_SETFL, 0);
	read_n(s, buf, sizeof(h) - 1);
	SHOWN(1, "after the next head");
	send_str(s, RESP);
	close(p[0]);
	close(p[1]);
	close(c);
	close(s);
}

/* ---- dup2 in the middle of a head ---- */

/* The shim's captures of heads in progress come from a pool, lowest free
 * entry first (preload/conn.c).  The steps below make the entry that the
 * dup2() copy takes for the rest of its head one whose last head was
 * scanned on the copy's fd number, with another request's traceparent in
 * it: that old value must never come out as the new request's context. */
static void
mode_dup2_mid_head(void)
{
	static const char h1[] = HEAD("/old", TRACE2);
	static const char h2[] = HEAD("/new", TRACE);
	static const char hc[] = HEAD("/other", TRACE);
	/* h2 up to and past its traceparent line */
	const size_t cut = sizeof(h2) - 1 - 4;
	char buf[512];
	int ca, sa, c7, s7, cb, sb, p[2], num;

	/* a head in progress on another connection holds the first entry */
	pair(&ca, &sa);
	send_str(ca, hc);
	wait_queued(sa, 10);
	read_n(sa, buf, 10);
	/* a whole head on fd s7 is scanned into the second one */
	pair(&c7, &s7);
	num = s7;
	send_str(c7, h1);
	read_n(s7, buf, sizeof(h1) - 1);
	SHOWN(2, "after the old head");
	send_str(s7, RESP);
	close(c7);
	close(s7);
	/* keep s7's number from the next accept() */
	if (pipe2(p, O_CLOEXEC) || (p[0] != num && p[1] != num))
		die("pipe over the old number");
	/* the first entry free again */
	read_n(sa, buf, sizeof(hc) - 1 - 10);
	send_str(sa, RESP);
	/* a new head, read past its traceparent (into the first entry) */
	pair(&cb, &sb);
	send_str(cb, h2);
	wait_queued(sb, sizeof(h2) - 1);
	read_n(sb, buf, cut);
	/* moved to the old number; its rest read there */
	if (dup2(sb, num) != num)
		die("dup2");
	read_n(num, buf, 4);
	CHECK(memcmp(buf, "\r\n\r\n", 4) == 0, "bytes differ");
	/* no context (the copy lost the head's capture) or this request's,
	 * never one made of the old head's values */
	CHECK(!shim || shown() == 0 || shown() == 1,
	      "the copy's head published %d (an old head's values)", shown());
	send_str(num, RESP);
	/* the copy's next head is followed */
	send_str(cb, h2);
	read_n(num, buf, sizeof(h2) - 1);
	SHOWN(1, "after the copy's next head");
	send_str(num, RESP);
	close(p[0] == num ? p[1] : p[0]);
	close(num);
	close(sb);
	close(cb);
	close(sa);
	close(ca);
}

/* ---- closefrom() with a negative number ---- */

/* In a child (it closes all, stdout too): a connection with a request,
 * closefrom(-1), which glibc takes as closefrom(0); a pipe then gets the
 * connection's number, and HTTP-looking bytes through it must publish
 * nothing.  The child's exit status is what the thread shows then.  With
 * raw, the child is made by _Fork(), which runs no atfork handler: the
 * shim must still know it for a process of its own, not a vfork() child
 * whose closes leave its parent's table alone. */
static void
mode_closefrom_negative(bool raw)
{
	static const char h[] = HEAD("/cf", TRACE2);
	static const char ph[] = HEAD("/pipe", TRACE);
	char buf[512];
	int c, s, st;
	pid_t pid;

	pair(&c, &s);
	pid = raw ? _Fork() : fork();
	if (pid == 0) {
		int p[2], fd;

		send_str(c, h);
		read_n(s, buf, sizeof(h) - 1);
		if (shim && shown() != 2)
			_exit(10);
		closefrom(-1);
		if (pipe(p) || (fd = fcntl(p[0], F_DUPFD, s)) != s)
			_exit(11);
		if (write(p[1], ph, sizeof(ph) - 1) != (ssize_t)sizeof(ph) - 1 ||
		    read(fd, buf, sizeof(buf)) != (ssize_t)sizeof(ph) - 1)
			_exit(12);
		_exit(shown() < 0 ? 3 : shown());
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		die("fork");
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "after closefrom(-1), a pipe's bytes: child status %#x "
	      "(exit 1..3: it published a context)",
	      st);
	close(c);
	close(s);
}

/* ---- span-ids after fork ---- */

/* A forking server: parent and child each read a traced request of their
 * own right after the fork (how: "fork", or "_Fork", which runs no atfork
 * handler).  Both start from the same copy of the id generators, so the
 * child must draw from new ones: the same trace with the same span-id in
 * two processes would be one span to a profiler. */
static void
mode_fork_ids(const char *how)
{
	static const char h[] = HEAD("/ids", TRACE);
	const struct otel_thread_ctx_record *r;
	uint8_t mine[8] = {0}, theirs[8] = {0};
	char buf[512], hex[17];
	int c1, s1, c2, s2, p[2], st;
	pid_t pid;

	pair(&c1, &s1);
	pair(&c2, &s2);
	if (pipe(p))
		die("pipe");
	send_str(c1, h);
	send_str(c2, h);
	pid = strcmp(how, "_Fork") == 0 ? _Fork() : fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		read_n(s2, buf, sizeof(h) - 1);
		r = ctxobs_record();
		if (shim && (shown() != 1 || !r))
			_exit(10);
		if (r)
			memcpy(mine, r->span_id, sizeof(mine));
		if (write(p[1], mine, sizeof(mine)) != (ssize_t)sizeof(mine))
			_exit(11);
		_exit(0);
	}
	read_n(s1, buf, sizeof(h) - 1);
	SHOWN(1, "the parent's request");
	r = ctxobs_record();
	if (r)
		memcpy(mine, r->span_id, sizeof(mine));
	read_n(p[0], (char *)theirs, sizeof(theirs));
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "%s: child status %#x", how, st);
	ctxobs_hex(hex, mine, sizeof(mine));
	CHECK(!shim || memcmp(mine, theirs, sizeof(mine)) != 0,
	      "%s: the child drew the parent's span-id %s", how, hex);
	close(p[0]);
	close(p[1]);
	close(c1);
	close(s1);
	close(c2);
	close(s2);
}

/* ---- EAGAIN / EINTR / EOF in the middle of a head ---- */

static void
on_usr1(int sig)
{
	(void)sig;
}

static void
mode_eintr(void)
{
	static const char h[] = HEAD("/eintr", TRACE);
	char buf[512];
	int c, s, c2, s2, fl;
	ssize_t r;
	struct sigaction sa = {.sa_handler = on_usr1};

	sigaction(SIGUSR1, &sa, NULL); /* no SA_RESTART */
	pair(&c, &s);
	pair(&c2, &s2);
	fl = fcntl(s, F_GETFL);
	(void)fcntl(s, F_SETFL, fl | O_NONBLOCK);
	errno = 0;
	r = read(s, buf, sizeof(buf));
	CHECK(r == -1 && errno == EAGAIN, "empty read gave %zd errno %d", r, errno);
	send_str(c, "GET /eintr HTTP/1.1\r\nHo");
	wait_queued(s, 23);
	read_n(s, buf, 23);
	errno = 0;
	r = read(s, buf, sizeof(buf));
	CHECK(r == -1 && errno == EAGAIN, "mid-head read gave %zd errno %d", r, errno);
	/* another connection at EOF, read in the middle of this head */
	close(c2);
	r = read(s2, buf, sizeof(buf));
	CHECK(r == 0, "EOF read gave %zd", r);
	SHOWN(0, "in the middle of the head");
	send_str(c, h + 23);
	wait_queued(s, sizeof(h) - 1 - 23);
	r = read(s, buf, sizeof(buf));
	CHECK(r == (ssize_t)(sizeof(h) - 1 - 23) && memcmp(buf, h + 23, (size_t)r) == 0,
	      "rest gave %zd", r);
	SHOWN(1, "after the head");
	send_str(s, RESP);
	close(s2);
	close(c);
	close(s);
}

/* ---- fdopen() + fclose() ---- */

static void
mode_fdopen_fclose(void)
{
	static const char h[] = HEAD("/stdio", TRACE);
	static const char ph[] = HEAD("/pipe", TRACE2);
	char buf[512];
	int c, s, num, p[2];
	FILE *f;

	pair(&c, &s);
	num = s;
	send_str(c, h);
	read_n(s, buf, sizeof(h) - 1);
	SHOWN(1, "after the head");
	/* the legacy way: the response through stdio, then fclose(), which
	 * writes and closes inside libc */
	f = fdopen(s, "w");
	if (!f)
		die("fdopen");
	fputs(RESP, f);
	errno = 4321;
	CHECK(fclose(f) == 0 && errno == 4321, "fclose of the connection: errno %d",
	      errno);
	SHOWN(0, "after the fclose() of the connection");
	wait_queued(c, sizeof(RESP) - 1);
	/* a pipe gets the number: its HTTP-looking bytes are no request */
	if (pipe2(p, O_CLOEXEC) || p[0] != num)
		die("pipe over the old number");
	if (write(p[1], ph, sizeof(ph) - 1) != (ssize_t)sizeof(ph) - 1)
		die("write pipe");
	read_n(p[0], buf, sizeof(ph) - 1);
	CHECK(memcmp(buf, ph, sizeof(ph) - 1) == 0, "pipe bytes differ");
	SHOWN(0, "after reading a pipe on the fclose()d connection's number");
	/* and writing to it is no response either: the next connection is */
	close(p[0]);
	close(p[1]);
	close(c);
}

/* ---- fclose() results ---- */

static ssize_t
cookie_write(void *cookie, const char *b, size_t n)
{
	(void)cookie;
	(void)b;
	return (ssize_t)n;
}

static int
cookie_close(void *cookie)
{
	(void)cookie;
	errno = EIO;
	return -1;
}

/* Runs f's fclose() with errno preset: the result and errno after it. */
static void
check_fclose(FILE *f, int want_r, int want_errno, const char *what)
{
	int r, e;

	if (!f)
		die(what);
	errno = 1234;
	r = fclose(f);
	e = errno;
	CHECK(r == want_r && e == want_errno, "fclose(%s) gave %d errno %d, want %d %d",
	      what, r, e, want_r, want_errno);
}

static void
mode_fclose_results(void)
{
	static char mem[64];
	cookie_io_functions_t io = {.write = cookie_write, .close = cookie_close};
	char *ms = NULL;
	size_t msn = 0;
	int c, s, fd;
	FILE *f;

	/* a connection is tracked meanwhile: its number among the others */
	pair(&c, &s);
	f = fopen("/dev/null", "re");
	check_fclose(f, 0, 1234, "/dev/null");
	f = fmemopen(mem, sizeof(mem), "w");
	if (f)
		fputs("x", f);
	check_fclose(f, 0, 1234, "fmemopen");
	f = open_memstream(&ms, &msn);
	if (f)
		fputs("y", f);
	check_fclose(f, 0, 1234, "open_memstream");
	free(ms);
	f = fopencookie(NULL, "w", io);
	check_fclose(f, EOF, EIO, "fopencookie, close fails");
	/* its fd closed under it: fclose() fails with EBADF */
	fd = fcntl(s, F_DUPFD_CLOEXEC, 0);
	f = fd < 0 ? NULL : fdopen(fd, "w");
	if (f)
		close(fd);
	check_fclose(f, EOF, EBADF, "a stream whose fd was closed");
	/* the connection's own stream, with unwritten bytes and a failed
	 * write: the peer is gone */
	f = fdopen(s, "w");
	close(c);
	if (f) {
		(void)shutdown(s, SHUT_RDWR);
		fputs(RESP, f);
	}
	check_fclose(f, EOF, EPIPE, "a connection's stream, peer gone");
}

/* ---- a response through dup() / fcntl(F_DUPFD) ---- */

static int
copy_fd(int fd, const char *how)
{
	if (strcmp(how, "fcntl") == 0)
		return fcntl(fd, F_DUPFD, 10);
	if (strcmp(how, "fcntl-cloexec") == 0)
		return fcntl(fd, F_DUPFD_CLOEXEC, 20);
	if (strcmp(how, "fcntl-sym") == 0) {
		/* the unredirected name, as a binary built without LFS calls it */
		int (*fn)(int, int, ...) =
			(int (*)(int, int, ...))(uintptr_t)dlsym(RTLD_DEFAULT, "fcntl");

		return fn ? fn(fd, F_DUPFD_CLOEXEC, 30) : -1;
	}
	return dup(fd);
}

/* The usual use of dup(): the copy carries on and the original goes (a
 * daemon that moves the connection off a fixed number, a stdio stream of
 * its own).  The copy must be the connection: its response ends the
 * request, its next keep-alive request shows its own trace. */
static void
mode_dup_answer(const char *how)
{
	static const char h[] = HEAD("/dup", TRACE);
	static const char h2[] = HEAD("/dup2nd", TRACE2);
	char buf[512];
	int c, s, d;

	pair(&c, &s);
	send_str(c, h);
	read_n(s, buf, sizeof(h) - 1);
	SHOWN(1, "after the head");
	d = copy_fd(s, how);
	if (d < 0)
		die("copy");
	SHOWN(1, "after the copy");
	/* the socket is not closed: the request goes on through the copy
	 * (old: the close cleared it until the response's first write) */
	close(s);
	SHOWN(1, "after closing the original");
	/* the response through the copy is the request's */
	send_str(d, RESP);
	SHOWN(1, "writing the response through the copy");
	wait_queued(c, sizeof(RESP) - 1);
	/* answered: the next read finds no request, the thread is idle */
	(void)fcntl(d, F_SETFL, O_NONBLOCK);
	CHECK(read(d, buf, sizeof(buf)) == -1 && errno == EAGAIN, "read after");
	SHOWN(0, "waiting for the next request");
	(void)fcntl(d, F_SETFL, 0);
	/* the next keep-alive request gets its own trace */
	send_str(c, h2);
	read_n(d, buf, sizeof(h2) - 1);
	SHOWN(2, "after the next head on the copy");
	send_str(d, RESP);
	close(d);
	SHOWN(0, "after closing the copy");
	close(c);
}

/* ---- vfork() + dup() / fcntl(F_DUPFD) ---- */

static void
mode_vfork_dup(void)
{
	static const char h[] = HEAD("/vfork", TRACE);
	static const char ph[] = HEAD("/pipe", TRACE2);
	char buf[512];
	int c, s, p[2], st, n1, n2;
	pid_t pid;

	pair(&c, &s);
	send_str(c, h);
	read_n(s, buf, sizeof(h) - 1);
	SHOWN(1, "after the head");
	send_str(s, RESP);
	/* answered; the next read finds no request: the thread is idle */
	(void)fcntl(s, F_SETFL, O_NONBLOCK);
	CHECK(read(s, buf, sizeof(buf)) == -1 && errno == EAGAIN, "read after");
	(void)fcntl(s, F_SETFL, 0);
	SHOWN(0, "waiting for the next request");
	/* the two lowest free numbers (valgrind runs vfork() as fork(): the
	 * child's variables are not ours to read) */
	n1 = open("/dev/null", O_RDONLY | O_CLOEXEC);
	n2 = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (n1 < 0 || n2 < 0)
		die("open");
	close(n1);
	close(n2);
	pid = vfork();
	if (pid == 0) {
		/* they are the child's copies, free in our table */
		if (dup(s) != n1 || fcntl(s, F_DUPFD, 0) != n2)
			_exit(3);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0)
		die("vfork child");
	/* our pipe gets those numbers: HTTP-looking bytes written to the
	 * second and read from the first are no request */
	if (pipe2(p, O_CLOEXEC) || p[0] != n1 || p[1] != n2)
		die("pipe over the child's numbers");
	if (write(p[1], ph, sizeof(ph) - 1) != (ssize_t)sizeof(ph) - 1)
		die("write pipe");
	SHOWN(0, "after writing to a pipe on the child's fcntl() number");
	read_n(p[0], buf, sizeof(ph) - 1);
	SHOWN(0, "after reading a pipe on the child's dup() number");
	/* the connection is still followed */
	send_str(c, h);
	read_n(s, buf, sizeof(h) - 1);
	SHOWN(1, "after the next head");
	send_str(s, RESP);
	close(p[0]);
	close(p[1]);
	close(c);
	close(s);
}

/* ---- a connection used through two descriptors ---- */

/* A copy of fd made as `how` says; for dup2/dup3 onto at (free). */
static int
copy_to(int fd, const char *how, int at)
{
	if (strcmp(how, "dup2") == 0)
		return dup2(fd, at);
	if (strcmp(how, "dup3") == 0)
		return dup3(fd, at, O_CLOEXEC);
	if (strcmp(how, "fcntl") == 0)
		return fcntl(fd, F_DUPFD_CLOEXEC, at);
	return dup(fd);
}

/* No request waits on fd: a read fails with EAGAIN (and the thread goes
 * idle, waiting for the next one). */
static void
read_none(int fd)
{
	char b[64];
	int fl = fcntl(fd, F_GETFL);
	ssize_t r;

	(void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	errno = 0;
	r = read(fd, b, sizeof(b));
	CHECK(r == -1 && errno == EAGAIN, "read with nothing queued gave %zd errno %d",
	      r, errno);
	(void)fcntl(fd, F_SETFL, fl);
}

/* One request (trace 1 or 2) read on rd and answered on wr, the context
 * checked at each step; wait for the client to get the response. */
static void
exchange(int c, int rd, int wr, int trace, const char *what)
{
	static const char h1[] = HEAD("/one", TRACE);
	static const char h2[] = HEAD("/two", TRACE2);
	const char *h = trace == 1 ? h1 : h2;
	size_t n = strlen(h);
	char buf[512], msg[128];

	send_str(c, h);
	read_n(rd, buf, n);
	snprintf(msg, sizeof(msg), "%s: after the head", what);
	SHOWN(trace, msg);
	send_str(wr, RESP);
	snprintf(msg, sizeof(msg), "%s: after writing the response", what);
	SHOWN(trace, msg);
	read_n(c, buf, sizeof(RESP) - 1);
	read_none(rd);
	snprintf(msg, sizeof(msg), "%s: waiting for the next request", what);
	SHOWN(0, msg);
}

static void
mode_copy_rw(const char *how)
{
	static const char h[] = HEAD("/mid", TRACE);
	char buf[512];
	int c, s, d, d2;

	pair(&c, &s);
	/* the copy exists before any request, like inetd's fd 0 and fd 1 */
	d = copy_to(s, how, 40);
	if (d < 0)
		die("copy");
	exchange(c, s, d, 1, "request 1");
	exchange(c, s, d, 2, "request 2 (keep-alive)");
	/* a copy made in the middle of a request answers it too */
	send_str(c, h);
	read_n(s, buf, sizeof(h) - 1);
	SHOWN(1, "request 3: after the head");
	d2 = copy_to(s, how, 50);
	if (d2 < 0)
		die("copy 2");
	SHOWN(1, "request 3: after the second copy");
	send_str(d2, RESP);
	SHOWN(1, "request 3: after writing the response through the second copy");
	read_n(c, buf, sizeof(RESP) - 1);
	read_none(s);
	SHOWN(0, "request 3: waiting for the next request");
	/* the copies go, the connection stays */
	close(d2);
	close(d);
	exchange(c, s, s, 2, "request 4 (copies closed)");
	close(s);
	SHOWN(0, "after closing it");
	close(c);
}

/* Reads through either descriptor: the connection's state follows the
 * one its bytes are read through, even in the middle of a head. */
static void
mode_copy_read(void)
{
	static const char h[] = HEAD("/split", TRACE);
	char buf[512];
	int c, s, d;

	pair(&c, &s);
	d = dup(s);
	if (d < 0)
		die("dup");
	exchange(c, d, s, 1, "read through the copy, answered through the original");
	exchange(c, s, d, 2, "read through the original, answered through the copy");
	exchange(c, d, d, 1, "read and answered through the copy");
	/* one head, its first half read through one, the rest through the
	 * other */
	send_str(c, h);
	read_n(s, buf, 30);
	SHOWN(0, "after half a head");
	read_n(d, buf, sizeof(h) - 1 - 30);
	SHOWN(1, "after the rest of it through the copy");
	send_str(s, RESP);
	SHOWN(1, "after writing the response");
	read_n(c, buf, sizeof(RESP) - 1);
	read_none(d);
	SHOWN(0, "waiting for the next request");
	exchange(c, s, s, 2, "then through the original alone");
	close(d);
	exchange(c, s, s, 1, "the copy closed");
	close(s);
	close(c);
}

static void
mode_copy_close(const char *which)
{
	static const char h[] = HEAD("/close", TRACE);
	bool read_copy = strcmp(which, "read-copy") == 0;
	bool orig = strcmp(which, "copy") != 0;
	char buf[512];
	int c, s, d, keep;

	pair(&c, &s);
	d = dup(s);
	if (d < 0)
		die("dup");
	send_str(c, h);
	read_n(read_copy ? d : s, buf, sizeof(h) - 1);
	SHOWN(1, "after the head");
	if (read_copy) {
		/* the reverse: read through the copy (its descriptor holds
		 * the connection now), which goes before the response; the
		 * original carries the request on */
		close(d);
		keep = s;
		SHOWN(1, "after closing the copy read through");
	} else if (orig) {
		/* close A, keep B: the copy carries the connection on, and
		 * the thread its request, not answered yet (old: the close
		 * cleared it until the response's first write) */
		close(s);
		keep = d;
		SHOWN(1, "after closing the original");
	} else {
		/* close B, keep A: the response was written through the copy,
		 * which goes; the original carries on */
		send_str(d, RESP);
		SHOWN(1, "after writing the response through the copy");
		close(d);
		keep = s;
		SHOWN(1, "after closing the copy");
	}
	if (orig) {
		send_str(keep, RESP);
		SHOWN(1, "after writing the response through the one kept");
	}
	read_n(c, buf, sizeof(RESP) - 1);
	read_none(keep);
	SHOWN(0, "waiting for the next request");
	exchange(c, keep, keep, 2, "the next request on the one kept");
	close(keep);
	SHOWN(0, "after closing it");
	close(c);
}

/* What another thread does to the connection in mode_copy_wait(). */
struct copy_wait {
	int s, d;
	bool read_copy;
};

static void *
copy_wait_other(void *arg)
{
	const struct copy_wait *w = arg;
	char buf[8];

	if (w->read_copy) {
		/* the body through the copy (its descriptor holds the
		 * connection now), the response through it */
		read_n(w->d, buf, 4);
		send_str(w->d, RESP);
	} else {
		close(w->s);
	}
	return NULL;
}

/* A pool worker's wait (a semaphore: hook-pthread.c) judges the request
 * the thread shows where its connection is now, as a switch back does
 * (hook_socket_ctx_answered()): another thread closing the descriptor it
 * was read from while a copy carries the connection on does not end it,
 * and a response written through a copy whose read took the connection's
 * state does. */
static void
mode_copy_wait(const char *which)
{
	static const char h[] =
		"POST /wait HTTP/1.1\r\nHost: x\r\ntraceparent: 00-" TRACE
		"-00f067aa0ba902b7-01\r\nContent-Length: 4\r\n\r\n";
	struct copy_wait w = {.read_copy = strcmp(which, "read") == 0};
	char buf[512];
	pthread_t t;
	sem_t sem;
	int c;

	if (sem_init(&sem, 0, 0))
		die("sem_init");
	pair(&c, &w.s);
	w.d = dup(w.s);
	if (w.d < 0)
		die("dup");
	send_str(c, h);
	send_str(c, "body");
	read_n(w.s, buf, sizeof(h) - 1);
	SHOWN(1, "after the head");
	if (pthread_create(&t, NULL, copy_wait_other, &w) || pthread_join(t, NULL))
		die("pthread_create");
	(void)sem_post(&sem);
	(void)sem_wait(&sem);
	if (w.read_copy) {
		/* old: the slot the head was read from, a copy now, is never
		 * answered: shown at every wait */
		SHOWN(0, "waiting after the response through the copy read through");
		close(w.s);
		read_n(c, buf, sizeof(RESP) - 1);
	} else {
		/* old: the closed descriptor's slot read as closed */
		SHOWN(1, "waiting after another thread closed the original");
		send_str(w.d, RESP);
		read_n(c, buf, sizeof(RESP) - 1);
		(void)sem_post(&sem);
		(void)sem_wait(&sem);
		SHOWN(0, "waiting after the response through the copy");
	}
	close(w.d);
	close(c);
	(void)sem_destroy(&sem);
}

/* A pool worker started while the thread showed a request: the thread
 * of mode_inherit_wait() and the worker, a semaphore each way. */
struct inherit_wait {
	sem_t go, back;
	bool read_copy;
};

static void *
inherit_wait_worker(void *arg)
{
	struct inherit_wait *w = arg;

	SHOWN(1, "worker: the request it was started with");
	(void)sem_post(&w->back);
	(void)sem_wait(&w->go);
	/* old: judged by the slot it was read from, whose generation (the
	 * close) or sequence (the read that took the state) moved on */
	SHOWN(1, w->read_copy ? "worker: waiting after the body was read through "
				"the copy"
			      : "worker: waiting after the original was closed");
	(void)sem_post(&w->back);
	(void)sem_wait(&w->go);
	SHOWN(0, "worker: waiting after its connection went on");
	return NULL;
}

/* A worker inherits a request read through one of two descriptors of its
 * connection, and waits on a semaphore (hook-pthread.c) while the request
 * goes on: the descriptor it was read from closed ("close", "gone"), or
 * its body read through the copy, which takes the connection's state
 * ("read").  The worker keeps showing the request while it is live
 * wherever the connection is now (hook_socket_inherited_wait()), and stops
 * once it is answered through the copy ("close"; "read", and a newer
 * request read through the original) or the copy is closed too
 * ("gone"). */
static void
mode_inherit_wait(const char *which)
{
	static const char h[] =
		"POST /inherit HTTP/1.1\r\nHost: x\r\ntraceparent: 00-" TRACE
		"-00f067aa0ba902b7-01\r\nContent-Length: 4\r\n\r\n";
	struct inherit_wait w = {.read_copy = strcmp(which, "read") == 0};
	bool gone = strcmp(which, "gone") == 0;
	char buf[512];
	pthread_t t;
	int c, s, d;

	if (sem_init(&w.go, 0, 0) || sem_init(&w.back, 0, 0))
		die("sem_init");
	pair(&c, &s);
	d = dup(s);
	if (d < 0)
		die("dup");
	send_str(c, h);
	send_str(c, "body");
	read_n(s, buf, sizeof(h) - 1);
	SHOWN(1, "after the head");
	if (pthread_create(&t, NULL, inherit_wait_worker, &w))
		die("pthread_create");
	(void)sem_wait(&w.back);
	if (w.read_copy)
		read_n(d, buf, 4);
	else
		close(s);
	(void)sem_post(&w.go);
	(void)sem_wait(&w.back);
	if (gone) {
		close(d);
	} else {
		send_str(d, RESP);
		read_n(c, buf, sizeof(RESP) - 1);
	}
	if (w.read_copy) {
		/* and a newer request read through the original, which takes
		 * the state back */
		send_str(c, HEAD("/next", TRACE2));
		read_n(s, buf, sizeof(HEAD("/next", TRACE2)) - 1);
		SHOWN(2, "after the next head");
	}
	(void)sem_post(&w.go);
	if (pthread_join(t, NULL))
		die("pthread_join");
	if (w.read_copy)
		close(s);
	if (!gone)
		close(d);
	close(c);
	(void)sem_destroy(&w.go);
	(void)sem_destroy(&w.back);
}

static void
mode_copy_reuse(void)
{
	static const char h[] = HEAD("/reuse", TRACE);
	struct sockaddr_in a;
	socklen_t al = sizeof(a);
	char buf[512];
	int c, s, d, num, c2, s2;

	pair(&c, &s);
	d = dup(s);
	if (d < 0)
		die("dup");
	exchange(c, s, d, 1, "through the copy");
	/* the copy goes; a new connection, accepted, gets its number */
	num = d;
	c2 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c2 < 0 || getsockname(lfd, (void *)&a, &al) ||
	    connect(c2, (void *)&a, sizeof(a)))
		die("connect");
	close(d);
	s2 = accept(lfd, NULL, NULL);
	if (s2 != num)
		die("accept did not reuse the copy's number");
	/* a request on the first connection; writing on the new one (no
	 * request of its own) is I/O on another connection, not this
	 * request's response */
	send_str(c, h);
	read_n(s, buf, sizeof(h) - 1);
	SHOWN(1, "after the head");
	send_str(s2, "x");
	SHOWN(0, "after writing on the connection that got the copy's number");
	read_n(c2, buf, 1);
	send_str(s, RESP);
	SHOWN(1, "after writing the response");
	read_n(c, buf, sizeof(RESP) - 1);
	read_none(s);
	SHOWN(0, "waiting for the next request");
	/* each connection's requests are its own */
	exchange(c2, s2, s2, 2, "a request on the new connection");
	exchange(c, s, s, 1, "a request on the first one");
	close(s2);
	close(c2);
	close(s);
	close(c);
}

/* ---- rings of copies: shapes and ways to leave them ---- */

/* how: "long" (sixteen descriptors, the most one ring holds, and four
 * more copies: a copy fifteen links away from the reader answers its
 * request and reads the next; a copy of a copy beyond the ring is a
 * connection of its own, left alone), "copy-of-copy" (copies of copies, the
 * original closed in the middle of a request), "dup2-leader" (a copy
 * dup2()ed over the descriptor the requests are read through),
 * "close-range" and "closefrom" (the reader closed with others of the
 * ring around it), "pipelined" (two requests in one packet, the second
 * read through a copy before the first is answered). */
static void
mode_copy_ring(const char *how)
{
	static const char h[] = HEAD("/ring", TRACE);
	static const char hh[] = HEAD("/p1", TRACE) HEAD("/p2", TRACE2);
	char buf[1024];
	int c, s, d[20], i, keep;

	pair(&c, &s);
	if (strcmp(how, "long") == 0) {
		/* sixteen descriptors (the most a ring holds), then four
		 * more copies */
		for (i = 0; i < 19; i++)
			if ((d[i] = dup(i < 18 ? s : d[3])) < 0)
				die("dup");
		/* each copy joins right after s: s -> d[14] -> ... -> d[0]
		 * -> s, d[14] fifteen links away from s */
		exchange(c, s, d[14], 1, "answered through the farthest copy");
		exchange(c, s, d[0], 2, "answered through the nearest copy");
		exchange(c, d[14], d[7], 1, "read through the farthest copy");
		exchange(c, d[0], d[13], 2, "read through the nearest copy");
		for (i = 15; i < 18; i++)
			close(d[i]);
		exchange(c, s, d[14], 1, "three copies beyond the ring closed");
		for (i = 0; i < 15; i++)
			close(d[i]);
		exchange(c, s, s, 2, "the copies closed");
		close(s);
		/* the last copy beyond the ring, made from a copy, is a
		 * connection of its own */
		exchange(c, d[18], d[18], 1, "the copy of a copy beyond the ring");
		close(d[18]);
	} else if (strcmp(how, "copy-of-copy") == 0) {
		d[0] = dup(s);
		d[1] = dup(d[0]);
		d[2] = fcntl(d[1], F_DUPFD, 60);
		if (d[0] < 0 || d[1] < 0 || d[2] < 0)
			die("dup");
		send_str(c, h);
		read_n(s, buf, sizeof(h) - 1);
		SHOWN(1, "after the head");
		close(s);
		send_str(d[2], RESP);
		SHOWN(1, "after the response through a copy of a copy");
		read_n(c, buf, sizeof(RESP) - 1);
		read_none(d[1]);
		SHOWN(0, "waiting for the next request");
		exchange(c, d[1], d[0], 2, "the copies carry on");
		close(d[1]);
		exchange(c, d[2], d[0], 1, "two copies left");
		close(d[0]);
		close(d[2]);
	} else if (strcmp(how, "dup2-leader") == 0) {
		d[0] = dup(s);
		if (d[0] < 0)
			die("dup");
		exchange(c, s, d[0], 1, "before");
		send_str(c, h);
		read_n(s, buf, sizeof(h) - 1);
		SHOWN(1, "after the head");
		if (dup2(d[0], s) != s)
			die("dup2");
		send_str(s, RESP);
		SHOWN(1, "after the response through the replaced number");
		read_n(c, buf, sizeof(RESP) - 1);
		read_none(s);
		SHOWN(0, "waiting for the next request");
		exchange(c, s, d[0], 2, "after dup2 over the reader");
		exchange(c, d[0], s, 1, "read through the other one");
		close(d[0]);
		close(s);
	} else if (strcmp(how, "close-range") == 0 || strcmp(how, "closefrom") == 0) {
		/* s, then copies at 70 and 71, the one kept at 80 */
		if (dup2(s, 70) != 70 || dup2(s, 71) != 71)
			die("dup2");
		keep = fcntl(s, F_DUPFD, 80);
		if (keep != 80 || dup2(s, 72) != 72 || close(s))
			die("dup");
		send_str(c, h);
		read_n(71, buf, sizeof(h) - 1);
		SHOWN(1, "after the head");
		if (strcmp(how, "closefrom") == 0) {
			if (dup2(80, 90) != 90 || close(80))
				die("move");
			keep = 90;
			/* keep is 90, above: close 70..89 */
			if (close_range(70, 89, 0))
				die("close_range");
		} else if (close_range(70, 79, 0)) {
			die("close_range");
		}
		send_str(keep, RESP);
		SHOWN(1, "after the response through the one left");
		read_n(c, buf, sizeof(RESP) - 1);
		read_none(keep);
		SHOWN(0, "waiting for the next request");
		exchange(c, keep, keep, 2, "the one left carries on");
		if (strcmp(how, "closefrom") == 0)
			closefrom(keep);
		else
			close(keep);
	} else if (strcmp(how, "pipelined") == 0) {
		d[0] = dup(s);
		if (d[0] < 0)
			die("dup");
		send_str(c, hh);
		read_n(s, buf, sizeof(HEAD("/p1", TRACE)) - 1);
		SHOWN(1, "after the first head");
		read_n(d[0], buf, sizeof(HEAD("/p2", TRACE2)) - 1);
		SHOWN(1, "after the second head, read through the copy");
		send_str(s, RESP);
		SHOWN(2, "after answering the first");
		send_str(d[0], RESP);
		SHOWN(2, "after answering the second");
		read_n(c, buf, 2 * (sizeof(RESP) - 1));
		read_none(s);
		SHOWN(0, "waiting for the next request");
		exchange(c, s, d[0], 1, "then one at a time");
		close(d[0]);
		close(s);
	} else {
		die("copy-ring: unknown variant");
	}
	SHOWN(0, "after closing");
	close(c);
}

/* ---- copy-race ----
 *
 * The race of preload/conn.c, "Copies": requests pipelined behind the
 * current one wait in the shim's queue, held by the descriptor that holds
 * the connection's state.  A response written through a copy promotes the
 * next one (it pops the queue); closing the original hands the queue to
 * the copy.  Both at once used to hand on an entry the writer then freed,
 * which another connection's requests took: its context then came out as
 * this connection's next one.  Every round is a new connection whose
 * traces start with 11111111 and the round number; the churning
 * connection's start with 22222222.  The writer reads its own thread's
 * record after each response: none, or one of its round's traces. */

#define RACE_K 12 /* requests per round: 1 current, 11 queued */

static _Atomic int race_go, race_stop;
static unsigned race_foreign, race_mine, race_none, race_churned;

static size_t
race_head(char *out, size_t cap, uint32_t who, uint32_t round, uint32_t k)
{
	int n = snprintf(out, cap,
			 "GET /r HTTP/1.1\r\nHost: x\r\ntraceparent: 00-"
			 "%08x%08x%08x%08x-00f067aa0ba902b7-01\r\n\r\n",
			 who, round, k, 0x5eedu);

	if (n < 0 || (size_t)n >= cap)
		die("race_head");
	return (size_t)n;
}

static uint32_t
race_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* What the calling thread publishes after a response of round r. */
static void
race_check(unsigned r, unsigned k)
{
	const struct otel_thread_ctx_record *rec = ctxobs_record();

	if (!rec || rec->valid != 1) {
		race_none++;
		return;
	}
	if (race_be32(rec->trace_id) == 0x11111111u &&
	    race_be32(rec->trace_id + 4) == r &&
	    race_be32(rec->trace_id + 8) < RACE_K) {
		race_mine++;
		return;
	}
	race_foreign++;
	CHECK(false,
	      "round %u, response %u: published trace %08x%08x%08x%08x, not one of "
	      "this connection's",
	      r, k, race_be32(rec->trace_id), race_be32(rec->trace_id + 4),
	      race_be32(rec->trace_id + 8), race_be32(rec->trace_id + 12));
}

/* Copies per round: closing the original and then each copy in turn but
 * the writer's moves the state 1 + RACE_COPIES - 1 times under the
 * writer's responses. */
#define RACE_COPIES 8

struct race_arg {
	int fd;
	unsigned round;
	unsigned spin;
	int close[RACE_COPIES]; /* the closer's, in order */
	int n_close;
	/* variant "read": the reader reads one head at a time through
	 * rfd[0], rfd[1], rfd[2] in turn (each read through a copy moves the
	 * state there); the writer answers head k once it was read */
	int rfd[3];
	size_t head_len;
	_Atomic unsigned n_read;
	bool sig; /* the writer takes SIGALRM */
};

static void
race_wait_go(void)
{
	while (!atomic_load(&race_go))
		;
}

static void *
race_writer(void *p)
{
	struct race_arg *a = p;
	unsigned k;

	if (a->sig) {
		sigset_t alrm;

		sigemptyset(&alrm);
		sigaddset(&alrm, SIGALRM);
		pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
	}
	race_wait_go();
	for (k = 0; k < RACE_K; k++) {
		while (a->head_len && atomic_load(&a->n_read) <= k)
			;
		if (send(a->fd, RESP, sizeof(RESP) - 1, MSG_NOSIGNAL) <= 0)
			break;
		race_check(a->round, k);
	}
	return NULL;
}

/* Variant "signal": the moves run in a SIGALRM handler on the writer's
 * own thread, every RACE_TICK_US of real time, so that they land anywhere
 * in the writer's code, the shim's hooks included (which are signal-safe
 * and let a handler dup and close fds), and not only where two threads on
 * two CPUs happen to meet.  The handler copies the descriptor holding the
 * state (the copy joins the ring right after it) and closes it: the state
 * and its queue move to the copy, as often as the timer fires. */
#define RACE_TICK_US 29

static _Atomic int race_sig_leader = -1;

static void
race_on_alarm(int sig)
{
	int saved = errno, l = atomic_load(&race_sig_leader), n;

	(void)sig;
	if (l >= 0 && (n = dup(l)) >= 0) {
		close(l);
		atomic_store(&race_sig_leader, n);
	}
	errno = saved;
}

static void *
race_reader(void *p)
{
	struct race_arg *a = p;
	char buf[256];
	unsigned k;

	race_wait_go();
	for (k = 0; k < RACE_K; k++) {
		read_n(a->rfd[k % 3], buf, a->head_len);
		atomic_store(&a->n_read, k + 1);
	}
	return NULL;
}

static void *
race_closer(void *p)
{
	struct race_arg *a = p;
	volatile unsigned i;

	int k;

	race_wait_go();
	for (k = 0; k < a->n_close; k++) {
		for (i = 0; i < a->spin; i++)
			;
		close(a->close[k]);
	}
	return NULL;
}

/* Another connection taking and freeing pool entries all the time:
 * RACE_CHURN pipelined requests per read (all but one queued: the lowest
 * free entries, where a freed one goes first), answered, again. */
#define RACE_CHURN 14
static void *
race_churn(void *p)
{
	char h[RACE_CHURN * 256], buf[RACE_CHURN * 256];
	const int *fds = p;
	int c = fds[0], s = fds[1], one = 1;
	uint32_t n = 0;

	(void)setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	while (!atomic_load(&race_stop)) {
		size_t len = 0;
		int k;

		for (k = 0; k < RACE_CHURN; k++)
			len += race_head(h + len, sizeof(h) - len, 0x22222222u, n,
					 (uint32_t)k);
		send_all(c, h, len, MSG_NOSIGNAL);
		read_n(s, buf, len);
		for (k = 0; k < RACE_CHURN; k++)
			send_all(s, RESP, sizeof(RESP) - 1, MSG_NOSIGNAL);
		read_n(c, buf, RACE_CHURN * (sizeof(RESP) - 1));
		n++;
	}
	race_churned = n;
	close(s);
	close(c);
	return NULL;
}

static uint64_t
race_now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static void
mode_copy_race(const char *how, const char *ms)
{
	bool rd = strcmp(how, "read") == 0, sig = strcmp(how, "signal") == 0;
	struct itimerval it = {.it_interval = {.tv_usec = RACE_TICK_US},
			       .it_value = {.tv_usec = RACE_TICK_US}};
	struct sigaction sa = {.sa_handler = race_on_alarm, .sa_flags = SA_RESTART};
	sigset_t alrm;
	uint64_t until = race_now_ms() + (ms    ? strtoul(ms, NULL, 10)
					  : sig ? 2500
					  : rd  ? 1000
						: 1500);
	pthread_t churn;
	unsigned round = 0;
	int churn_fds[2];
	char h[RACE_K * 256], buf[RACE_K * 256];

	/* SIGALRM reaches the writer only (threads inherit the mask; the
	 * writer unblocks it) */
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &alrm, NULL);
	if (sig && (sigaction(SIGALRM, &sa, NULL) || setitimer(ITIMER_REAL, &it, NULL)))
		die("setitimer");
	/* its connection made here: two threads in pair() at once could
	 * each accept the other's */
	pair(&churn_fds[0], &churn_fds[1]);
	if (pthread_create(&churn, NULL, race_churn, churn_fds))
		die("pthread_create");
	srand(12345);
	while (race_now_ms() < until) {
		struct race_arg wa, ca;
		pthread_t w, cl;
		size_t len = 0;
		int c, s, d[RACE_COPIES], k;

		round++;
		pair(&c, &s);
		/* the ring is s, d[n-1], ..., d[0] (a copy joins right after
		 * its original): closing s and then d[n-1] .. d[1] moves the
		 * state each time, and d[0], the writer's, is the last one */
		for (k = 0; k < RACE_COPIES; k++)
			if ((d[k] = dup(s)) < 0)
				die("dup");
		for (k = 0; k < RACE_K; k++)
			len += race_head(h + len, sizeof(h) - len, 0x11111111u, round,
					 (uint32_t)k);
		send_all(c, h, len, MSG_NOSIGNAL);
		wa = (struct race_arg){.fd = d[0], .round = round};
		ca = (struct race_arg){.spin = (unsigned)rand() % 3000};
		if (rd) {
			/* heads read one at a time through s, d[1], d[2] */
			ca.fd = d[0];
			ca.round = round;
			wa.head_len = ca.head_len = len / RACE_K;
			ca.rfd[0] = s;
			ca.rfd[1] = d[1];
			ca.rfd[2] = d[2];
		} else {
			/* all heads read through the original: one current,
			 * the rest queued */
			wait_queued(s, len);
			read_n(s, buf, len);
			ca.close[ca.n_close++] = s;
			for (k = RACE_COPIES - 1; k > 0; k--)
				ca.close[ca.n_close++] = d[k];
		}
		if (sig) {
			/* the handler moves the state from s on; the closer
			 * closes the other copies */
			atomic_store(&race_sig_leader, s);
			ca.close[0] = ca.close[--ca.n_close];
			wa.sig = true;
		}
		atomic_store(&race_go, 0);
		if (pthread_create(&w, NULL, race_writer, rd ? &ca : &wa) ||
		    pthread_create(&cl, NULL, rd ? race_reader : race_closer, &ca))
			die("pthread_create");
		atomic_store(&race_go, 1);
		pthread_join(w, NULL);
		pthread_join(cl, NULL);
		if (sig)
			close(atomic_exchange(&race_sig_leader, -1));
		if (rd) {
			close(s);
			for (k = RACE_COPIES - 1; k > 0; k--)
				close(d[k]);
		}
		close(d[0]);
		close(c);
	}
	atomic_store(&race_stop, 1);
	if (sig) {
		it = (struct itimerval){0};
		(void)setitimer(ITIMER_REAL, &it, NULL);
	}
	pthread_join(churn, NULL);
	fprintf(stderr,
		"copy-race: %u rounds, %u responses showed this connection's context, "
		"%u none, %u another's; %u churn rounds\n",
		round, race_mine, race_none, race_foreign, race_churned);
	CHECK(!shim || race_mine > 0, "no response ever showed a context");
}

/* ---- a connection inherited on fd 0 and fd 1 ---- */

/* The number the children of run_on_stdin() find the other end on. */
#define PEER_FD 9

/* Run this program again (mode child) with sock as fd 0 and fd 1, peer
 * (the other end) as PEER_FD, and env_extra in its environment; its exit
 * status must be 0. */
static void
run_on_stdin(int sock, int peer, const char *child, const char *env_extra)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	int st;
	pid_t pid;

	if (n <= 0)
		die("readlink");
	self[n] = '\0';
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		if (dup2(sock, 0) != 0 || dup2(sock, 1) != 1 ||
		    dup2(peer, PEER_FD) != PEER_FD)
			_exit(120);
		if (env_extra)
			putenv((char *)env_extra);
		execl(self, self, child, (char *)NULL);
		_exit(121);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		die("fork");
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: child status %#x", child, st);
}

/* An AF_UNIX connection to a listener with an abstract name: *c the
 * client's end, *s the server's (accepted). */
static void
unix_pair(int *c, int *s)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	socklen_t al;
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int n = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1,
			 "ctxshim-sock-attack-%d", (int)getpid());

	al = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
	if (l < 0 || bind(l, (void *)&a, al) || listen(l, 1))
		die("unix listen");
	*c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*c < 0 || connect(*c, (void *)&a, al))
		die("unix connect");
	*s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	if (*s < 0)
		die("unix accept");
	close(l);
}

/* how: "on" (TCP), "off" (TCP, CTXSHIM_INHERITED=0), "unix" (the server's
 * end of an AF_UNIX connection to a named listener): followed unless off;
 * "pair" (a socketpair(), as sshd or socat's EXEC give a child): not. */
static void
mode_stdin_server(const char *how)
{
	bool none = strcmp(how, "off") == 0 || strcmp(how, "pair") == 0;
	int c, s, sp[2];

	if (strcmp(how, "unix") == 0) {
		unix_pair(&c, &s);
	} else if (strcmp(how, "pair") == 0) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp))
			die("socketpair");
		s = sp[0];
		c = sp[1];
	} else {
		pair(&c, &s);
	}
	run_on_stdin(s, c, none ? "stdin-server-child-none" : "stdin-server-child",
		     strcmp(how, "off") == 0 ? "CTXSHIM_INHERITED=0" : NULL);
	close(s);
	close(c);
}

/* The child: the server's end on fd 0 and fd 1 (the same socket), the
 * client's on PEER_FD.  Keep-alive requests read on 0, answered on 1. */
static void
mode_stdin_server_child(bool off)
{
	force_none = off;
	exchange(PEER_FD, 0, 1, 1, "request 1 on fd 0, answered on fd 1");
	exchange(PEER_FD, 0, 1, 2, "request 2 (keep-alive)");
	exchange(PEER_FD, 0, 0, 1, "request 3 answered on fd 0");
	close(1);
	exchange(PEER_FD, 0, 0, 2, "request 4, fd 1 closed");
	close(0);
	SHOWN(0, "after closing fd 0");
}

static void
mode_stdin_client(void)
{
	int c, s;

	pair(&c, &s);
	run_on_stdin(c, s, "stdin-client-child", NULL);
	close(s);
	close(c);
}

/* The child: a client's socket on fd 0 and fd 1, its server on PEER_FD. */
static void
mode_stdin_client_child(void)
{
	static const char req[] = HEAD("/out", TRACE);
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
	static const char h[] = HEAD("/in", TRACE2);
	char buf[512];
	int c, s;
	ssize_t r;

	/* the client's request out, the response in */
	errno = 777;
	r = write(1, req, sizeof(req) - 1);
	CHECK(r == (ssize_t)sizeof(req) - 1 && errno == 777,
	      "write on fd 1: %zd errno %d", r, errno);
	SHOWN(0, "after writing a request on the client socket");
	read_n(PEER_FD, buf, sizeof(req) - 1);
	send_str(PEER_FD, resp);
	errno = 778;
	r = read(0, buf, sizeof(buf));
	CHECK(r == (ssize_t)sizeof(resp) - 1 && memcmp(buf, resp, (size_t)r) == 0 &&
		      errno == 778,
	      "read on fd 0: %zd errno %d", r, errno);
	SHOWN(0, "after reading the response on the client socket");
	/* the process serves a request on a connection of its own: the
	 * client socket's I/O is not I/O on a connection */
	pair(&c, &s);
	send_str(c, h);
	read_n(s, buf, sizeof(h) - 1);
	SHOWN(2, "after the head on an accepted connection");
	send_str(1, "more");
	SHOWN(2, "after writing on the client socket");
	read_n(PEER_FD, buf, 4);
	send_str(PEER_FD, "GET / HTTP/1.1\r\n\r\n");
	read_n(0, buf, 18);
	SHOWN(2, "after reading request-looking bytes on the client socket");
	send_str(s, RESP);
	read_n(c, buf, sizeof(RESP) - 1);
	read_none(s);
	SHOWN(0, "waiting for the next request");
	close(s);
	close(c);
}

int
main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	signal(SIGPIPE, SIG_IGN);
	shim = dlsym(RTLD_DEFAULT, OTEL_THREAD_CTX_SYMBOL) != NULL;
	if (strcmp(mode, "peek") == 0)
		mode_peek();
	else if (strcmp(mode, "iov") == 0)
		mode_iov();
	else if (strcmp(mode, "close-range-einval") == 0)
		mode_close_range_einval();
	else if (strcmp(mode, "vfork-dup2") == 0)
		mode_vfork_dup2(argc > 2 && strcmp(argv[2], "close_range") == 0);
	else if (strcmp(mode, "dup2-mid-head") == 0)
		mode_dup2_mid_head();
	else if (strcmp(mode, "close-range-unshare") == 0)
		mode_close_range_unshare();
	else if (strcmp(mode, "closefrom-negative") == 0)
		mode_closefrom_negative(argc > 2 && strcmp(argv[2], "_Fork") == 0);
	else if (strcmp(mode, "fork-ids") == 0)
		mode_fork_ids(argc > 2 ? argv[2] : "fork");
	else if (strcmp(mode, "eintr") == 0)
		mode_eintr();
	else if (strcmp(mode, "fdopen-fclose") == 0)
		mode_fdopen_fclose();
	else if (strcmp(mode, "fclose-results") == 0)
		mode_fclose_results();
	else if (strcmp(mode, "dup-answer") == 0)
		mode_dup_answer(argc > 2 ? argv[2] : "dup");
	else if (strcmp(mode, "vfork-dup") == 0)
		mode_vfork_dup();
	else if (strcmp(mode, "copy-rw") == 0)
		mode_copy_rw(argc > 2 ? argv[2] : "dup");
	else if (strcmp(mode, "copy-close") == 0)
		mode_copy_close(argc > 2 ? argv[2] : "original");
	else if (strcmp(mode, "copy-wait") == 0)
		mode_copy_wait(argc > 2 ? argv[2] : "close");
	else if (strcmp(mode, "inherit-wait") == 0)
		mode_inherit_wait(argc > 2 ? argv[2] : "close");
	else if (strcmp(mode, "copy-reuse") == 0)
		mode_copy_reuse();
	else if (strcmp(mode, "copy-read") == 0)
		mode_copy_read();
	else if (strcmp(mode, "copy-race") == 0)
		mode_copy_race(argc > 2 ? argv[2] : "close", argc > 3 ? argv[3] : NULL);
	else if (strcmp(mode, "copy-ring") == 0)
		mode_copy_ring(argc > 2 ? argv[2] : "long");
	else if (strcmp(mode, "stdin-server") == 0)
		mode_stdin_server(argc > 2 ? argv[2] : "on");
	else if (strcmp(mode, "stdin-server-child") == 0)
		mode_stdin_server_child(false);
	else if (strcmp(mode, "stdin-server-child-none") == 0)
		mode_stdin_server_child(true);
	else if (strcmp(mode, "stdin-client") == 0)
		mode_stdin_client();
	else if (strcmp(mode, "stdin-client-child") == 0)
		mode_stdin_client_child();
	else {
		fprintf(stderr, "usage: sock-attack MODE\n");
		return 64;
	}
	printf("RESULT %s fails=%d\n", mode, fails);
	return fails ? 1 : 0;
}
