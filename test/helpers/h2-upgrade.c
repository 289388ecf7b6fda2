/* SPDX-License-Identifier: Apache-2.0 */
/* A cleartext HTTP/2 server with HTTP/2 code of its own (no nghttp2
 * session but with --lib, as the socket level sees lighttpd's:
 * preload/conn.c, "Upgrade: h2c") that
 * upgrades each connection from HTTP/1.1 and writes the 101 the way a
 * test needs, for real clients (curl --http2, several URLs on one
 * connection: stream 1 is the upgrade request, then 3, 5, ...).  One
 * thread, the connections handled in lockstep, so that what one reads
 * comes between what another reads and writes.
 *
 *   h2-upgrade [--conns N] [--split K | --writev K] [--fill N] [--lib]
 *     --conns N  serve N connections (1): each one's head is read, then
 *                each gets its 101, then for each round each one's next
 *                request is read, then each gets its response
 *     --split K  write the 101's first K bytes alone (K up to its
 *                length, 71), then the rest of it with the server's
 *                SETTINGS and stream 1's response (else all of it in one
 *                write)
 *     --writev K  all of it in one writev, its first K bytes one iovec,
 *                the rest another
 *     --fill N   before READY, N idle connections to itself, each with
 *                an HTTP/2 client preface read on the server's end (h2c
 *                with prior knowledge: each holds a pool entry for its
 *                life, as test/helpers/pipeline.c's "reserve" does)
 *     --lib      once the 101s are written, make (and delete) an nghttp2
 *                server session, as a server that chooses its HTTP/2
 *                code once it switched: the socket level hands the
 *                connections back (preload/conn.c, conn_h2_undo()); then
 *                a FastCGI connection to itself (FCGI_KEEP_CONN, which
 *                holds a pool entry for its life) reads a request with
 *                traceparent TPF and prints "FCGI <trace-id shown>": with
 *                --fill, it gets an entry only if the undone connections
 *                gave theirs back
 *     --lib-thread  as --lib, but the session made on a thread of its
 *                own, which follows no connection (a server whose worker
 *                threads make the sessions): the socket level hands each
 *                connection back at its next read instead
 *                (ctxshim_conn_h2_feed()), and the FastCGI connection
 *                comes after the first round's reads
 *
 * Prints "READY <port>", then after each step "<STEP> <conn> <stream>
 * <trace-id the thread shows>" (or "none"): HEAD (the upgrade request's
 * head read), WROTE (a response written: stream 1's with the 101), READ
 * (a read that brought a request's HEADERS), FCGI (--lib, --lib-thread),
 * and "END" once every client closed.  Every response is a HEADERS frame (:status 200, END_STREAM). */
#include "config.h"

#include "ctxobs.h"
#include "fcgi-build.h"
#include "h2-build.h"
#include "listen-loopback.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#define TPF "00-7f0e1d2c3b4a59687766554433221100-0102030405060708-01"

#define MAX_CONNS 4

struct conn {
	int fd;
	uint8_t buf[16384];
	size_t len;
	bool preface, acked;
	uint32_t last;
};

static void
die(const char *what)
{
	perror(what);
	exit(1);
}

static void
seen(const char *step, unsigned conn, uint32_t stream)
{
	char t[33];

	printf("%s %u %u %s\n", step, conn, stream, ctxobs_trace(t));
	fflush(stdout);
}

static void
write_all(int fd, const void *p, size_t n)
{
	if (write(fd, p, n) != (ssize_t)n)
		die("write");
}

/* One read of c's socket appended to its buffer; false at its end. */
static bool
read_more(struct conn *c)
{
	ssize_t n;

	if (c->len == sizeof(c->buf))
		die("buffer full");
	n = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
	if (n < 0)
		die("read");
	c->len += (size_t)n;
	return n > 0;
}

/* Stream's response at b: a HEADERS frame, ":status: 200" (HPACK static
 * index 8), END_STREAM | END_HEADERS. */
static size_t
response(uint8_t *b, uint32_t stream)
{
	size_t n = h2_frame(b, 1, 1, 0x5, stream);

	b[n] = 0x88;
	return n + 1;
}

/* Reads c until a HEADERS frame of a new stream is whole in its buffer;
 * that stream, or 0 at the client's end. */
static uint32_t
next_request(struct conn *c)
{
	const size_t pl = H2_PREFACE_LEN;

	for (;;) {
		size_t off = 0, flen;
		uint32_t found = 0, id;

		if (!c->preface && c->len >= pl) {
			if (memcmp(c->buf, H2_PREFACE, pl) != 0)
				die("no client preface");
			c->preface = true;
			off = pl;
		}
		while (c->preface && !found && c->len - off >= 9 &&
		       c->len - off >= 9 + (flen = (size_t)c->buf[off] << 16 |
						   (size_t)c->buf[off + 1] << 8 |
						   c->buf[off + 2])) {
			id = ((uint32_t)c->buf[off + 5] << 24 |
			      (uint32_t)c->buf[off + 6] << 16 |
			      (uint32_t)c->buf[off + 7] << 8 | c->buf[off + 8]) &
			     0x7fffffff;
			if (c->buf[off + 3] == 1 && id > c->last)
				found = c->last = id;
			off += 9 + flen;
		}
		memmove(c->buf, c->buf + off, c->len - off);
		c->len -= off;
		if (found)
			return found;
		if (!read_more(c))
			return 0;
	}
}

/* An idle h2c connection to itself (prior knowledge) whose preface the
 * server's end read: the socket level follows it as HTTP/2. */
static void
fill_one(int l, const struct sockaddr_in *a)
{
	uint8_t start[64], b[sizeof(start)];
	size_t have = 0, len = h2_preface(start);
	ssize_t n;
	int cl = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), sv;

	if (cl < 0 || connect(cl, (const struct sockaddr *)a, sizeof(*a)) != 0 ||
	    (sv = accept4(l, NULL, NULL, SOCK_CLOEXEC)) < 0)
		die("fill");
	write_all(cl, start, len);
	while (have < len) {
		n = read(sv, b + have, len - have);
		if (n <= 0)
			die("fill read");
		have += (size_t)n;
	}
}

static void
read_n(int fd, size_t n)
{
	uint8_t b[512];
	ssize_t r;

	while (n) {
		r = read(fd, b, n < sizeof(b) ? n : sizeof(b));
		if (r <= 0)
			die("read");
		n -= (size_t)r;
	}
}

/* --lib: an nghttp2 server session, made and deleted (the thread's
 * argument unused: --lib-thread runs it as a thread's start). */
static void *
session(void *unused)
{
	nghttp2_session_callbacks *cbs;
	nghttp2_session *s;

	(void)unused;
	if (nghttp2_session_callbacks_new(&cbs) != 0 ||
	    nghttp2_session_server_new(&s, cbs, NULL) != 0)
		die("nghttp2 session");
	nghttp2_session_del(s);
	nghttp2_session_callbacks_del(cbs);
	return NULL;
}

/* --lib: the FastCGI connection, after the session. */
static void
fcgi(int l, const struct sockaddr_in *a)
{
	uint8_t b[256];
	size_t n, p;
	int cl, sv;

	cl = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (cl < 0 || connect(cl, (const struct sockaddr *)a, sizeof(*a)) != 0 ||
	    (sv = accept4(l, NULL, NULL, SOCK_CLOEXEC)) < 0)
		die("fcgi");
	n = fcgi_begin(b);
	write_all(cl, b, n);
	read_n(sv, n);
	p = fcgi_get(b, "/fcgi", TPF);
	write_all(cl, b, p);
	read_n(sv, p);
	seen("FCGI", 0, 0);
	close(cl);
	close(sv);
}

int
main(int argc, char **argv)
{
	static const char switching[] = "HTTP/1.1 101 Switching Protocols\r\n"
					"Connection: Upgrade\r\nUpgrade: h2c\r\n\r\n";
	static struct conn conns[MAX_CONNS];
	struct sockaddr_in a;
	unsigned n_conns = 1, fill = 0, i, done;
	size_t split = 0, iov_at = 0, n;
	uint8_t out[256];
	struct rlimit rl;
	bool lib = false, lib_thread = false;
	pthread_t t;
	int l;

	for (i = 1; i < (unsigned)argc; i++) {
		const char *v = i + 1 < (unsigned)argc ? argv[i + 1] : NULL;

		if (strcmp(argv[i], "--lib") == 0)
			lib = true;
		else if (strcmp(argv[i], "--lib-thread") == 0)
			lib_thread = true;
		else if (v && strcmp(argv[i], "--conns") == 0)
			n_conns = (unsigned)atoi(argv[++i]);
		else if (v && strcmp(argv[i], "--split") == 0)
			split = (size_t)atoi(argv[++i]);
		else if (v && strcmp(argv[i], "--writev") == 0)
			iov_at = (size_t)atoi(argv[++i]);
		else if (v && strcmp(argv[i], "--fill") == 0)
			fill = (unsigned)atoi(argv[++i]);
		else
			break;
	}
	if (i != (unsigned)argc || !n_conns || n_conns > MAX_CONNS ||
	    split > sizeof(switching) - 1 || iov_at > sizeof(switching) - 1 ||
	    (split && iov_at) || (lib && lib_thread)) {
		fputs("usage: h2-upgrade [--conns N] [--split K | --writev K]\n"
		      "                  [--fill N] [--lib | --lib-thread]\n",
		      stderr);
		return 2;
	}
	/* --fill holds two descriptors a connection (pipeline.c's way). */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4096 &&
	    rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	l = listen_loopback(1024, SOCK_CLOEXEC, &a);
	if (l < 0)
		die("listen");
	for (i = 0; i < fill; i++)
		fill_one(l, &a);
	printf("READY %u\n", ntohs(a.sin_port));
	fflush(stdout);

	for (i = 0; i < n_conns; i++) {
		struct conn *c = &conns[i];

		if ((c->fd = accept4(l, NULL, NULL, SOCK_CLOEXEC)) < 0)
			die("accept");
		/* The client sends nothing after its head before the 101. */
		do
			if (!read_more(c))
				die("no head");
		while (c->len < 4 || memcmp(c->buf + c->len - 4, "\r\n\r\n", 4) != 0);
		c->len = 0;
		seen("HEAD", i, 1);
	}
	for (i = 0; i < n_conns; i++) {
		/* The 101, the server's SETTINGS (empty), stream 1's
		 * response: lighttpd's one writev. */
		memcpy(out, switching, sizeof(switching) - 1);
		n = sizeof(switching) - 1;
		n += h2_settings(out + n);
		n += response(out + n, 1);
		if (iov_at) {
			struct iovec v[2] = {{out, iov_at}, {out + iov_at, n - iov_at}};

			if (writev(conns[i].fd, v, 2) != (ssize_t)n)
				die("writev");
			seen("WROTE", i, 1);
			continue;
		}
		if (split)
			write_all(conns[i].fd, out, split);
		write_all(conns[i].fd, out + split, n - split);
		seen("WROTE", i, 1);
	}
	if (lib) {
		(void)session(NULL);
		fcgi(l, &a);
	}
	if (lib_thread && (pthread_create(&t, NULL, session, NULL) != 0 ||
			   pthread_join(t, NULL) != 0))
		die("session thread");
	for (done = 0; done < n_conns;) {
		for (i = 0; i < n_conns; i++) {
			if (conns[i].fd < 0)
				continue;
			if (!next_request(&conns[i])) {
				close(conns[i].fd);
				conns[i].fd = -1;
				done++;
				continue;
			}
			seen("READ", i, conns[i].last);
		}
		/* Every connection has been read since the session, which
		 * handed it back (with its pool entry) at that read. */
		if (lib_thread) {
			fcgi(l, &a);
			lib_thread = false;
		}
		for (i = 0; i < n_conns; i++) {
			struct conn *c = &conns[i];

			if (c->fd < 0)
				continue;
			n = 0;
			if (!c->acked) {
				n += h2_settings_ack(out);
				c->acked = true;
			}
			n += response(out + n, c->last);
			write_all(c->fd, out, n);
			seen("WROTE", i, c->last);
		}
	}
	printf("END\n");
	fflush(stdout);
	return 0;
}
