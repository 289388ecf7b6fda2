/* SPDX-License-Identifier: Apache-2.0 */
/* The socket level's fused path for one whole request head in one read
 * (preload/conn-whole.h, ctxshim_conn_feed_whole()) where it must not apply or must
 * agree with the general path, run under the shim by
 * test-preload-fastpath.c.  A server and its clients in one process on
 * 127.0.0.1; the server side checks the context its own thread publishes
 * (otel_thread_ctx_v1, found with dlsym) after each read.
 *
 *   fastpath-edge separate    a second whole head read (in its own read)
 *                             before the first is answered is queued: the
 *                             first's context stays, the write of its
 *                             response makes the second current; two
 *                             heads in one read (the general path after
 *                             the fused one declined) likewise
 *   fastpath-edge exhausted   every pool entry held by split heads: a
 *                             whole head of another connection still gets
 *                             its own context (never another's)
 *   fastpath-edge body        a whole head with Content-Length, its body
 *                             in later reads, then the next whole head
 *   fastpath-edge readv       a whole head in the first iovec and a
 *                             pipelined one in the second
 *   fastpath-edge signal      a signal handler reads whole heads of
 *                             another connection while this thread reads
 *                             whole heads: no read publishes a context
 *                             mixed from two heads or another
 *                             connection's
 *
 * Prints "RESULT <mode> ok=... none=... wrong=... fails=N" and exits 0
 * when every check held. */
#include "self-check.h"
#include "sock-pair.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

/* preload/conn.c's CONN_POOL_N */
#define POOL 1024

static unsigned n_ok, n_none, n_wrong;

/* read_n() of sock-pair.h into a scratch buffer: the bytes only have to go
 * through the shim's read hook. */
static void
read_drop(int fd, size_t n)
{
	char buf[8192];

	if (n > sizeof(buf))
		die("read_drop: too long");
	read_n(fd, buf, n);
}

/* Wait until fd has n bytes to read (so that one read takes them all). */
static void
wait_bytes(int fd, size_t n)
{
	char buf[8192];
	unsigned tries;

	for (tries = 0; tries < 20000; tries++) {
		ssize_t r = recv(fd, buf, n < sizeof(buf) ? n : sizeof(buf),
				 MSG_PEEK | MSG_DONTWAIT);

		if (r >= (ssize_t)n)
			return;
		usleep(50);
	}
	die("wait_bytes");
}

static int
make_head(char *buf, unsigned k)
{
	return sprintf(buf,
		       "GET /p%u HTTP/1.1\r\nHost: x\r\n"
		       "traceparent: 00-%032x-00000000000000%02x-01\r\n\r\n",
		       k, k + 1, (k % 250) + 1);
}

static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
#define RESP_LEN (sizeof(resp) - 1)

static void *slot_addr;

/* 1 request k's context, 0 none, -1 another trace-id, -2 k's trace-id with
 * another path.  Async-signal-safe (slot_addr looked up first). */
static int
ctx_is(unsigned k)
{
	const uint8_t *r = *(const uint8_t *const *)slot_addr;
	uint8_t want[16] = {0};
	char path[24];
	size_t pl, i, n;
	uint16_t al;
	unsigned v;

	if (!r || !r[24])
		return 0;
	want[15] = (uint8_t)(k + 1);
	want[14] = (uint8_t)((k + 1) >> 8);
	want[13] = (uint8_t)((k + 1) >> 16);
	if (memcmp(r, want, 16) != 0)
		return -1;
	memcpy(&al, r + 26, 2);
	/* "/p<k>" without snprintf (signal handlers) */
	path[0] = '/';
	path[1] = 'p';
	for (v = k, n = 0; n == 0 || v; v /= 10)
		n++;
	for (v = k, i = 0; i < n; i++, v /= 10)
		path[2 + n - 1 - i] = (char)('0' + v % 10);
	pl = 2 + n;
	for (i = 0; i + 2 <= al; i += 2 + r[28 + i + 1])
		if (r[28 + i + 1] == pl && i + 2 + pl <= al &&
		    memcmp(r + 28 + i + 2, path, pl) == 0)
			return 1;
	return -2;
}

static void
count(int r)
{
	if (r == 1)
		n_ok++;
	else if (r == 0)
		n_none++;
	else
		n_wrong++;
}

static void
answer(int srv, int cli)
{
	send_all(srv, resp, RESP_LEN, 0);
	read_drop(cli, RESP_LEN);
}

/* A whole head sent in one write and read in one read. */
static void
whole(int c, int s, unsigned k)
{
	char h[256];
	int n = make_head(h, k);

	send_all(c, h, (size_t)n, 0);
	wait_bytes(s, (size_t)n);
	/* one read; a successful read leaves errno alone, and so must the
	 * hook's fused path */
	errno = EDOM;
	if (read(s, h, (size_t)n) != n)
		die("read whole");
	CHECK(errno == EDOM, "head %u: errno %d after the read", k, errno);
}

static void
t_separate(void)
{
	int c, s, r;
	unsigned round;

	pair(&c, &s);
	for (round = 0; round < 50; round++) {
		unsigned a = 10 * round + 1, b = a + 1, d = a + 2;

		whole(c, s, a);
		r = ctx_is(a);
		count(r);
		CHECK(r == 1, "round %u: first head: %d", round, r);
		/* pipelined, in its own read, before the first is answered */
		whole(c, s, b);
		r = ctx_is(a);
		count(r);
		CHECK(r == 1, "round %u: second head replaced the first: %d", round, r);
		answer(s, c);
		r = ctx_is(b);
		count(r);
		CHECK(r == 1, "round %u: second head after the first response: %d",
		      round, r);
		answer(s, c);
		whole(c, s, d);
		r = ctx_is(d);
		count(r);
		CHECK(r == 1, "round %u: keep-alive head after: %d", round, r);
		answer(s, c);
		/* two heads in one read: left to the general path (which
		 * must find the thread's buffer free again) */
		{
			char h[512];
			int n1 = make_head(h, a + 3), n2 = make_head(h + n1, a + 4);

			send_all(c, h, (size_t)(n1 + n2), 0);
			wait_bytes(s, (size_t)(n1 + n2));
			read_drop(s, (size_t)(n1 + n2));
			r = ctx_is(a + 3);
			count(r);
			CHECK(r == 1, "round %u: first of two heads in one read: %d",
			      round, r);
			answer(s, c);
			r = ctx_is(a + 4);
			count(r);
			CHECK(r == 1, "round %u: second of two heads in one read: %d",
			      round, r);
			answer(s, c);
		}
	}
	close(c);
	close(s);
}

static void
t_exhausted(void)
{
	const unsigned n = POOL + 8;
	int *c = calloc(n, sizeof(int)), *s = calloc(n, sizeof(int)), wc, ws, r;
	unsigned k;
	char h[256];

	if (!c || !s)
		die("calloc");
	pair(&wc, &ws);
	for (k = 0; k < n; k++) {
		pair(&c[k], &s[k]);
		make_head(h, 1000 + k);
		send_all(c[k], h, 30, 0);
		wait_bytes(s[k], 30);
		read_drop(s[k], 30);
	}
	/* every pool entry is held: whole heads still get their context */
	for (k = 0; k < 20; k++) {
		whole(wc, ws, 5000 + k);
		r = ctx_is(5000 + k);
		count(r);
		CHECK(r >= 0, "whole head with the pool exhausted: another's (%d)", r);
		CHECK(r == 1, "whole head with the pool exhausted: none (%d)", r);
		answer(ws, wc);
	}
	for (k = 0; k < n; k++) {
		int len = make_head(h, 1000 + k);

		send_all(c[k], h + 30, (size_t)len - 30, 0);
		wait_bytes(s[k], (size_t)len - 30);
		read_drop(s[k], (size_t)len - 30);
		r = ctx_is(1000 + k);
		CHECK(r >= 0, "split head %u: another's context (%d)", k, r);
		answer(s[k], c[k]);
		close(c[k]);
		close(s[k]);
	}
	close(wc);
	close(ws);
	free(c);
	free(s);
}

static void
t_body(void)
{
	int c, s, r;
	unsigned round;
	char h[512];

	pair(&c, &s);
	for (round = 0; round < 30; round++) {
		unsigned k = 100 + round;
		int n = sprintf(
			h,
			"POST /p%u HTTP/1.1\r\nHost: x\r\nContent-Length: 26\r\n"
			"traceparent: 00-%032x-00000000000000%02x-01\r\n\r\n",
			k, k + 1, (k % 250) + 1);

		send_all(c, h, (size_t)n, 0);
		wait_bytes(s, (size_t)n);
		read_drop(s, (size_t)n);
		r = ctx_is(k);
		count(r);
		CHECK(r == 1, "round %u: head with a body to come: %d", round, r);
		/* a body that looks like a whole head */
		send_all(c, "GET /x HTTP/1.1\r\nA: b\r\n\r\n", 26, 0);
		wait_bytes(s, 26);
		read_drop(s, 26);
		r = ctx_is(k);
		count(r);
		CHECK(r == 1, "round %u: body taken for a head: %d", round, r);
		answer(s, c);
	}
	close(c);
	close(s);
}

static void
t_readv(void)
{
	int c, s, r;
	unsigned round;
	char h[512];

	pair(&c, &s);
	for (round = 0; round < 30; round++) {
		unsigned a = 200 + 2 * round, b = a + 1;
		int na = make_head(h, a), nb = make_head(h + na, b);
		char ba[256], bb[256];
		struct iovec v[2] = {{ba, (size_t)na}, {bb, sizeof(bb)}};
		ssize_t got;

		send_all(c, h, (size_t)(na + nb), 0);
		wait_bytes(s, (size_t)(na + nb));
		got = readv(s, v, 2);
		CHECK(got == na + nb, "readv got %zd", got);
		r = ctx_is(a);
		count(r);
		CHECK(r == 1, "round %u: first iovec's head: %d", round, r);
		answer(s, c);
		r = ctx_is(b);
		count(r);
		CHECK(r == 1, "round %u: second iovec's head after the response: %d",
		      round, r);
		answer(s, c);
	}
	close(c);
	close(s);
}

/* signal: the handler reads one whole head of connection B, already in its
 * socket buffer; what the thread publishes must be one connection's own
 * request context or none. */
static int sig_bc, sig_bs;
static volatile unsigned sig_k, sig_reads, sig_bad;
static char sig_buf[256];
static volatile int sig_len;

static void
on_alarm(int sig)
{
	int saved = errno, r;
	ssize_t got;

	(void)sig;
	if (sig_len <= 0)
		return;
	got = recv(sig_bs, sig_buf, (size_t)sig_len, MSG_DONTWAIT);
	if (got == sig_len) {
		sig_reads++;
		r = ctx_is(sig_k);
		/* B's context, or A's (the read was not followed while A's
		 * read hook was busy): never a mix */
		if (r < 0 && r != -1)
			sig_bad++;
		sig_len = 0;
	}
	errno = saved;
}

static void
t_signal(void)
{
	int ac, as, r;
	unsigned round;
	struct sigaction sa;
	struct itimerval it = {{0, 50}, {0, 50}};

	pair(&ac, &as);
	pair(&sig_bc, &sig_bs);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	for (round = 0; round < 3000; round++) {
		unsigned a = 20000 + 2 * round;
		char hb[256];

		if (sig_len == 0) {
			int nb;

			if (sig_k) {
				/* answer B's request (outside the handler) */
				send_all(sig_bs, resp, RESP_LEN, 0);
				read_drop(sig_bc, RESP_LEN);
			}
			sig_k = a + 1;
			nb = make_head(hb, a + 1);
			memcpy(sig_buf, hb, (size_t)nb);
			send_all(sig_bc, hb, (size_t)nb, 0);
			wait_bytes(sig_bs, (size_t)nb);
			sig_len = nb;
		}
		whole(ac, as, a);
		r = ctx_is(a);
		count(r);
		CHECK(r >= 0 || r == -1, "round %u: A's read: mixed context %d", round,
		      r);
		answer(as, ac);
	}
	it.it_value.tv_usec = 0;
	it.it_interval.tv_usec = 0;
	setitimer(ITIMER_REAL, &it, NULL);
	CHECK(sig_bad == 0, "%u handler reads saw a mixed context", sig_bad);
	printf("signal reads %u\n", sig_reads);
	close(ac);
	close(as);
	close(sig_bc);
	close(sig_bs);
}

int
main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	slot_addr = dlsym(RTLD_DEFAULT, "otel_thread_ctx_v1");
	if (!slot_addr) {
		printf("RESULT %s no shim\n", mode);
		return 2;
	}
	/* exhausted holds over 1000 connections (both ends). */
	{
		struct rlimit rl;

		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4096 &&
		    rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
			(void)setrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	if (strcmp(mode, "separate") == 0)
		t_separate();
	else if (strcmp(mode, "exhausted") == 0)
		t_exhausted();
	else if (strcmp(mode, "body") == 0)
		t_body();
	else if (strcmp(mode, "readv") == 0)
		t_readv();
	else if (strcmp(mode, "signal") == 0)
		t_signal();
	else {
		fprintf(stderr,
			"usage: fastpath-edge separate|exhausted|body|readv|signal\n");
		return 2;
	}
	printf("RESULT %s ok=%u none=%u wrong=%u fails=%d\n", mode, n_ok, n_none,
	       n_wrong, fails);
	return fails ? 1 : 0;
}
