/* SPDX-License-Identifier: Apache-2.0 */
/* Every call hook-socket.c interposes, on success and failure paths, on
 * plain fds and on a tracked server connection (accepted here from a
 * client in the same process, with a traced HTTP request going through
 * it).  Prints one line per call: "<what> ret=<r> errno=<name>", where a
 * successful call must leave errno at the sentinel value set before it.
 * The test runs this with and without the shim and compares the output;
 * the program also checks the expected results itself (exit 1 on a
 * mismatch, with "MISMATCH" lines).  No tracing code. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "listen-loopback.h"

ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd,
		       void *buf,
		       size_t len,
		       size_t buflen,
		       int flags,
		       struct sockaddr *addr,
		       socklen_t *addrlen);
int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds,
		nfds_t nfds,
		const struct timespec *timeout,
		const sigset_t *ss,
		size_t fdslen);

#define SENTINEL 4242

static int failures;

/* exp_ret: expected return (or -2: any >= 0, printed as "ok");
 * exp_errno: expected errno (SENTINEL on success). */
static void
check(const char *what, long r, long exp_ret, int exp_errno)
{
	int e = errno;
	const char *name = e == SENTINEL ? "unchanged" : strerrorname_np(e);

	if (exp_ret == -2 && r >= 0)
		printf("%s ret=ok errno=%s\n", what, name ? name : "?");
	else
		printf("%s ret=%ld errno=%s\n", what, r, name ? name : "?");
	if ((exp_ret == -2 ? r < 0 : r != exp_ret) || e != exp_errno) {
		printf("MISMATCH %s: want ret=%ld errno=%d, got ret=%ld errno=%d\n",
		       what, exp_ret, exp_errno, r, e);
		failures++;
	}
}

#define CALL(what, expr, exp_ret, exp_errno)         \
	do {                                         \
		long r_;                             \
		errno = SENTINEL;                    \
		r_ = (long)(expr);                   \
		check(what, r_, exp_ret, exp_errno); \
	} while (0)

static int
listen_local(unsigned short *port)
{
	struct sockaddr_in a;
	int s = listen_loopback(8, SOCK_CLOEXEC, &a);

	if (s < 0) {
		perror("socket-errno: listen");
		exit(2);
	}
	*port = ntohs(a.sin_port);
	return s;
}

static int
connect_local(unsigned short port)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("socket-errno: connect");
		exit(2);
	}
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return c;
}

static void
send_all(int fd, const char *s)
{
	size_t n = strlen(s);

	if (send(fd, s, n, MSG_NOSIGNAL) != (ssize_t)n) {
		perror("socket-errno: send");
		exit(2);
	}
}

/* Wait until fd has at least n bytes queued (so one read gets them). */
static void
wait_bytes(int fd, size_t n)
{
	char tmp[4096];

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t r = recv(fd, tmp, sizeof(tmp) < n ? sizeof(tmp) : n,
				 MSG_PEEK | MSG_DONTWAIT);

		if (r >= (ssize_t)n)
			return;
		poll(&p, 1, 1000);
	}
}

static void
plain_fds(void)
{
	char buf[64];
	int p[2], bad;
	struct iovec iov = {buf, sizeof(buf)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	struct mmsghdr mm = {.msg_hdr = mh};
	struct pollfd pf;
	struct timespec ts0 = {0, 0};
	struct timeval tv0 = {0, 0};
	struct epoll_event ev;
	off_t off = 0;
	int ep;
	/* Out of the compiler's sight: these are the failures we want. */
	volatile int neg = -1;
	struct pollfd *volatile bad_ptr = (struct pollfd *)8;

	memset(buf, 0, sizeof(buf));
	if (pipe2(p, O_CLOEXEC) < 0)
		exit(2);
	bad = p[1] + 100;
	CALL("read-badf", read(bad, buf, 1), -1, EBADF);
	CALL("__read_chk-badf", __read_chk(bad, buf, 1, sizeof(buf)), -1, EBADF);
	CALL("recv-notsock", recv(p[0], buf, 1, 0), -1, ENOTSOCK);
	CALL("__recv_chk-notsock", __recv_chk(p[0], buf, 1, sizeof(buf), 0), -1,
	     ENOTSOCK);
	CALL("recvfrom-notsock", recvfrom(p[0], buf, 1, 0, NULL, NULL), -1, ENOTSOCK);
	CALL("__recvfrom_chk-notsock",
	     __recvfrom_chk(p[0], buf, 1, sizeof(buf), 0, NULL, NULL), -1, ENOTSOCK);
	CALL("recvmsg-notsock", recvmsg(p[0], &mh, 0), -1, ENOTSOCK);
	CALL("recvmmsg-notsock", recvmmsg(p[0], &mm, 1, 0, NULL), -1, ENOTSOCK);
	CALL("readv-badf", readv(bad, &iov, 1), -1, EBADF);
	CALL("readv-einval", readv(p[0], &iov, neg), -1, EINVAL);
	(void)fcntl(p[0], F_SETFL, O_NONBLOCK);
	CALL("read-eagain", read(p[0], buf, 1), -1, EAGAIN);
	CALL("write-ok", write(p[1], "abc", 3), 3, SENTINEL);
	CALL("writev-ok", writev(p[1], &(struct iovec){"de", 2}, 1), 2, SENTINEL);
	CALL("read-ok", read(p[0], buf, 2), 2, SENTINEL);
	CALL("__read_chk-ok", __read_chk(p[0], buf, 1, sizeof(buf)), 1, SENTINEL);
	CALL("readv-ok", readv(p[0], &iov, 1), 2, SENTINEL);
	CALL("send-notsock", send(p[1], "x", 1, 0), -1, ENOTSOCK);
	CALL("sendto-notsock", sendto(p[1], "x", 1, 0, NULL, 0), -1, ENOTSOCK);
	CALL("sendmsg-notsock", sendmsg(p[1], &mh, 0), -1, ENOTSOCK);
	CALL("write-badf", write(bad, "x", 1), -1, EBADF);
	CALL("writev-badf", writev(bad, &iov, 1), -1, EBADF);
	CALL("sendfile-badf", sendfile(bad, bad, &off, 1), -1, EBADF);
	CALL("sendfile64-badf", sendfile64(bad, bad, NULL, 1), -1, EBADF);
	CALL("splice-badf", splice(bad, NULL, bad, NULL, 1, 0), -1, EBADF);
	CALL("accept-notsock", accept(p[0], NULL, NULL), -1, ENOTSOCK);
	CALL("accept4-einval", accept4(p[0], NULL, NULL, -1), -1, EINVAL);
	{
		struct sockaddr_in a = {.sin_family = AF_INET};

		CALL("connect-notsock", connect(p[0], (struct sockaddr *)&a, sizeof(a)),
		     -1, ENOTSOCK);
	}
	CALL("close-badf", close(bad), -1, EBADF);
	CALL("dup2-badf", dup2(bad, bad + 1), -1, EBADF);
	CALL("dup3-einval", dup3(p[0], p[0], 0), -1, EINVAL);
	CALL("dup2-same", dup2(p[0], p[0]), p[0], SENTINEL);
	CALL("close_range-einval", close_range(10, 5, 0), -1, EINVAL);
	CALL("close_range-ok", close_range(bad, bad + 10, 0), 0, SENTINEL);
	pf.fd = p[0];
	pf.events = POLLIN;
	CALL("poll-timeout", poll(&pf, 1, 0), 0, SENTINEL);
	CALL("__poll_chk-timeout", __poll_chk(&pf, 1, 0, sizeof(pf)), 0, SENTINEL);
	CALL("ppoll-timeout", ppoll(&pf, 1, &ts0, NULL), 0, SENTINEL);
	CALL("__ppoll_chk-timeout", __ppoll_chk(&pf, 1, &ts0, NULL, sizeof(pf)), 0,
	     SENTINEL);
	CALL("poll-efault", poll(bad_ptr, 1, 0), -1, EFAULT);
	CALL("read-eagain-badptr", read(p[0], bad_ptr, 1), -1, EAGAIN);
	CALL("select-timeout", select(0, NULL, NULL, NULL, &tv0), 0, SENTINEL);
	CALL("select-einval", select(-1, NULL, NULL, NULL, &tv0), -1, EINVAL);
	CALL("pselect-timeout", pselect(0, NULL, NULL, NULL, &ts0, NULL), 0, SENTINEL);
	CALL("epoll_wait-badf", epoll_wait(bad, &ev, 1, 0), -1, EBADF);
	CALL("epoll_pwait-badf", epoll_pwait(bad, &ev, 1, 0, NULL), -1, EBADF);
	CALL("epoll_pwait2-badf", epoll_pwait2(bad, &ev, 1, &ts0, NULL), -1, EBADF);
	ep = epoll_create1(EPOLL_CLOEXEC);
	CALL("epoll_wait-timeout", epoll_wait(ep, &ev, 1, 0), 0, SENTINEL);
	CALL("epoll_pwait2-timeout", epoll_pwait2(ep, &ev, 1, &ts0, NULL), 0, SENTINEL);
	CALL("epoll_wait-einval", epoll_wait(ep, &ev, 0, 0), -1, EINVAL);
	CALL("close-ok", close(ep), 0, SENTINEL);
	CALL("close-pipe", close(p[0]), 0, SENTINEL);
	CALL("close-pipe2", close(p[1]), 0, SENTINEL);
	CALL("read-closed", read(p[0], buf, 1), -1, EBADF);
}

#define REQ                                      \
	"GET /errno?q=1 HTTP/1.1\r\nHost: x\r\n" \
	"traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\n\r\n"

/* A proxy's upstream, connect()ed while the thread publishes a request
 * (hook-socket.c, "Upstreams"): connect(), its I/O and close. */
static void
upstream_fds(char *buf, size_t cap)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	unsigned short port;
	int uls = listen_local(&port), u, us;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons(port);
	close(uls);
	u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CALL("connect-refused", connect(u, (struct sockaddr *)&a, sizeof(a)), -1,
	     ECONNREFUSED);
	close(u);
	uls = listen_local(&port);
	a.sin_port = htons(port);
	u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CALL("connect-upstream", connect(u, (struct sockaddr *)&a, sizeof(a)), 0,
	     SENTINEL);
	CALL("connect-upstream-again", connect(u, (struct sockaddr *)&a, sizeof(a)), -1,
	     EISCONN);
	(void)fcntl(u, F_SETFL, O_NONBLOCK);
	CALL("recv-upstream-eagain", recv(u, buf, cap, 0), -1, EAGAIN);
	CALL("write-upstream", write(u, "GET / HTTP/1.1\r\n\r\n", 18), 18, SENTINEL);
	us = accept(uls, NULL, NULL);
	send_all(us, "HTTP/1.1 200 OK\r\n\r\n");
	wait_bytes(u, 19);
	CALL("read-upstream", read(u, buf, cap), 19, SENTINEL);
	CALL("read-upstream-eagain", read(u, buf, cap), -1, EAGAIN);
	CALL("close-upstream", close(u), 0, SENTINEL);
	CALL("close-upstream-again", close(u), -1, EBADF);
	close(us);
	close(uls);
}

static void
tracked_fds(void)
{
	unsigned short port;
	int ls = listen_local(&port), c, s, s2, p[1], sp[2];
	char buf[4096];
	struct iovec iov[3] = {{buf, 5}, {buf + 5, 7}, {buf + 12, sizeof(buf) - 12}};
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 3};
	struct mmsghdr mm = {.msg_hdr = mh};
	size_t req_len = strlen(REQ);
	struct pollfd pf;

	c = connect_local(port);
	CALL("accept-ok", s = accept(ls, NULL, NULL), -2, SENTINEL);
	(void)fcntl(s, F_SETFL, O_NONBLOCK);
	CALL("recv-eagain", recv(s, buf, sizeof(buf), 0), -1, EAGAIN);
	CALL("read-eagain", read(s, buf, sizeof(buf)), -1, EAGAIN);
	CALL("readv-eagain", readv(s, iov, 3), -1, EAGAIN);
	CALL("recvmsg-eagain", recvmsg(s, &mh, 0), -1, EAGAIN);
	CALL("recvmmsg-eagain", recvmmsg(s, &mm, 1, 0, NULL), -1, EAGAIN);
	CALL("__read_chk-eagain", __read_chk(s, buf, 10, sizeof(buf)), -1, EAGAIN);
	send_all(c, REQ);
	wait_bytes(s, req_len);
	CALL("recv-peek", recv(s, buf, sizeof(buf), MSG_PEEK), (long)req_len, SENTINEL);
	CALL("recv-efault", recv(s, (void *)8, 16, 0), -1, EFAULT);
	CALL("recv-head", recv(s, buf, 20, 0), 20, SENTINEL);
	CALL("readv-head", readv(s, iov, 3), (long)req_len - 20, SENTINEL);
	upstream_fds(buf, sizeof(buf));
	CALL("send-response",
	     send(s, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 38, 0), 38,
	     SENTINEL);
	send_all(c, REQ);
	wait_bytes(s, req_len);
	CALL("recvmsg-head", recvmsg(s, &mh, 0), (long)req_len, SENTINEL);
	CALL("writev-response",
	     writev(s,
		    (struct iovec[]){{"HTTP/1.1 200 OK\r\n", 17},
				     {"Content-Length: 0\r\n\r\n", 21}},
		    2),
	     38, SENTINEL);
	send_all(c, REQ);
	wait_bytes(s, req_len);
	CALL("recvmmsg-head", recvmmsg(s, &mm, 1, 0, NULL), 1, SENTINEL);
	CALL("write-response", write(s, "HTTP/1.1 204 No Content\r\n\r\n", 27), 27,
	     SENTINEL);
	send_all(c, REQ);
	wait_bytes(s, req_len);
	CALL("__recv_chk-head", __recv_chk(s, buf, 30, sizeof(buf), 0), 30, SENTINEL);
	CALL("__recvfrom_chk-head",
	     __recvfrom_chk(s, buf, sizeof(buf), sizeof(buf), 0, NULL, NULL),
	     (long)req_len - 30, SENTINEL);
	p[0] = memfd_create("body", MFD_CLOEXEC);
	CALL("write-file", write(p[0], "body", 4), 4, SENTINEL);
	CALL("sendfile-response", sendfile(s, p[0], &(off_t){0}, 4), 4, SENTINEL);
	close(p[0]);
	send_all(c, REQ);
	wait_bytes(s, req_len);
	CALL("__read_chk-head", __read_chk(s, buf, sizeof(buf), sizeof(buf)),
	     (long)req_len, SENTINEL);
	CALL("sendto-response", sendto(s, "HTTP/1.1 200 OK\r\n\r\n", 19, 0, NULL, 0),
	     19, SENTINEL);
	pf.fd = s;
	pf.events = POLLIN;
	CALL("poll-tracked", poll(&pf, 1, 0), 0, SENTINEL);
	CALL("dup2-tracked", s2 = dup2(s, s + 20), s + 20, SENTINEL);
	CALL("dup3-tracked", dup3(s, s2, O_CLOEXEC), s2, SENTINEL);
	send_all(c, REQ);
	wait_bytes(s2, req_len);
	CALL("read-dup", read(s2, buf, sizeof(buf)), (long)req_len, SENTINEL);
	/* While the request's context is published, select/pselect look at
	 * their sets first (hook-socket.c): sets they cannot read must give
	 * EFAULT, as without the shim, not a fault in the hook. */
	{
		long pg = sysconf(_SC_PAGESIZE);
		char *m = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		fd_set *none = (fd_set *)(void *)(m + pg), /* PROT_NONE */
			*straddle = (fd_set *)(void *)(m + pg - 8), ok;
		struct timeval tv0 = {0, 0};
		struct timespec ts0 = {0, 0};

		if (m == MAP_FAILED || mprotect(m + pg, (size_t)pg, PROT_NONE) < 0)
			exit(2);
		FD_ZERO(&ok);
		FD_SET(s2, &ok);
		CALL("select-efault-tracked",
		     select(s2 + 1, (fd_set *)8, NULL, NULL, &tv0), -1, EFAULT);
		CALL("select-efault-none", select(s2 + 1, &ok, none, NULL, &tv0), -1,
		     EFAULT);
		/* 8 readable bytes, the rest on the PROT_NONE page: fds 64
		 * and up are there */
		memset(straddle, 0, 8);
		CALL("select-efault-straddle", select(65, straddle, NULL, NULL, &tv0),
		     -1, EFAULT);
		CALL("select-straddle-ok", select(64, straddle, NULL, NULL, &tv0), 0,
		     SENTINEL);
		CALL("pselect-efault-tracked",
		     pselect(s2 + 1, NULL, NULL, none, &ts0, NULL), -1, EFAULT);
		munmap(m, (size_t)pg * 2);
	}
	CALL("close-dup", close(s2), 0, SENTINEL);
	CALL("sendmsg-response",
	     sendmsg(s,
		     &(struct msghdr){
			     .msg_iov = &(struct iovec){"HTTP/1.1 200 OK\r\n\r\n", 19},
			     .msg_iovlen = 1},
		     0),
	     19, SENTINEL);
	send_all(c, REQ);
	wait_bytes(s, req_len);
	CALL("read-head", read(s, buf, sizeof(buf)), (long)req_len, SENTINEL);
	CALL("sendmmsg-response",
	     sendmmsg(
		     s,
		     &(struct mmsghdr){
			     .msg_hdr = {.msg_iov =
						 &(struct iovec){
							 "HTTP/1.1 200 OK\r\n\r\n", 19},
					 .msg_iovlen = 1}},
		     1, 0),
	     1, SENTINEL);
	/* Two pipelined requests, both answered by one sendmmsg(), a
	 * response a message: the second message makes the second request
	 * current and answers it (sk_out_next()). */
	send_all(c, REQ REQ);
	wait_bytes(s, 2 * req_len);
	CALL("read-heads", read(s, buf, sizeof(buf)), (long)(2 * req_len), SENTINEL);
	CALL("sendmmsg-pipelined",
	     sendmmsg(s,
		      (struct mmsghdr[2]){
			      {.msg_hdr = {.msg_iov =
						   &(struct iovec){
							   "HTTP/1.1 200 OK\r\n\r\n",
							   19},
					   .msg_iovlen = 1}},
			      {.msg_hdr = {.msg_iov =
						   &(struct iovec){
							   "HTTP/1.1 200 OK\r\n\r\n",
							   19},
					   .msg_iovlen = 1}}},
		      2, 0),
	     2, SENTINEL);
	send_all(c, REQ);
	wait_bytes(s, req_len);
	CALL("read-head", read(s, buf, sizeof(buf)), (long)req_len, SENTINEL);
	CALL("pwritev2-response",
	     pwritev2(s, &(struct iovec){"HTTP/1.1 200 OK\r\n\r\n", 19}, 1, -1, 0), 19,
	     SENTINEL);
	CALL("pwritev2-offset", pwritev2(s, &(struct iovec){"x", 1}, 1, 0, 0), -1,
	     ESPIPE);
	/* splice(): a head out of the connection (which gives it up), a
	 * response into it. */
	if (pipe2(sp, O_CLOEXEC) < 0)
		exit(2);
	CALL("splice-eagain", splice(s, NULL, sp[1], NULL, 16, SPLICE_F_NONBLOCK), -1,
	     EAGAIN);
	send_all(c, REQ);
	wait_bytes(s, req_len);
	CALL("splice-head", splice(s, NULL, sp[1], NULL, req_len, 0), (long)req_len,
	     SENTINEL);
	CALL("read-pipe", read(sp[0], buf, req_len), (long)req_len, SENTINEL);
	CALL("write-pipe", write(sp[1], "HTTP/1.1 200 OK\r\n\r\n", 19), 19, SENTINEL);
	CALL("splice-response", splice(sp[0], NULL, s, NULL, 19, 0), 19, SENTINEL);
	CALL("splice-espipe", splice(sp[0], &(loff_t){0}, s, NULL, 1, 0), -1, ESPIPE);
	close(sp[0]);
	close(sp[1]);
	CALL("shutdown-client", shutdown(c, SHUT_WR), 0, SENTINEL);
	wait_bytes(c, 38 + 38 + 27 + 4 + 19 + 19 + 19);
	CALL("read-eof", read(s, buf, sizeof(buf)), 0, SENTINEL);
	CALL("close-client", close(c), 0, SENTINEL);
	/* The peer is gone: the first send may still succeed (RST pending). */
	{
		int k;
		long r = 0;

		for (k = 0; k < 50 && r >= 0; k++) {
			pf.fd = s;
			pf.events = POLLOUT;
			(void)poll(&pf, 1, 100);
			r = send(s, "x", 1, MSG_NOSIGNAL);
		}
		int e = errno;

		printf("send-after-close ret=%ld errno=%s\n", r,
		       r >= 0                          ? "none"
		       : e == EPIPE || e == ECONNRESET ? "EPIPE|ECONNRESET"
						       : "?");
	}
	CALL("close-tracked", close(s), 0, SENTINEL);
	CALL("close-tracked-again", close(s), -1, EBADF);
	CALL("recv-closed", recv(s, buf, 1, 0), -1, EBADF);
	CALL("write-closed", write(s, "x", 1), -1, EBADF);

	/* close_range over a tracked connection. */
	c = connect_local(port);
	s = accept(ls, NULL, NULL);
	send_all(c, REQ);
	wait_bytes(s, req_len);
	CALL("read-range", read(s, buf, sizeof(buf)), (long)req_len, SENTINEL);
	CALL("close_range-tracked", close_range((unsigned)s, (unsigned)s, 0), 0,
	     SENTINEL);
	CALL("read-after-range", read(s, buf, 1), -1, EBADF);
	close(c);
	close(ls);
}

int
main(void)
{
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	plain_fds();
	tracked_fds();
	printf("failures=%d\n", failures);
	return failures ? 1 : 0;
}
