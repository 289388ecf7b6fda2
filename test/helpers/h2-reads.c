/* SPDX-License-Identifier: Apache-2.0 */
/* A server with HTTP/2 code of its own, as the socket level sees one
 * (preload/conn.c, "HTTP/2"), and its h2c client, in one thread: it
 * writes frames built by hand on one end of a loopback connection and
 * reads them, one request per read, on the other, and never answers
 * (every request waits, as on an upstream).  After each read it prints
 * "REQ <stream> <trace-id the thread shows>" (or "none").
 *
 *   h2-reads wait N     N requests, a wait with a timeout (poll) before
 *                       each read: the thread let the previous one go
 *   h2-reads nowait N   the same without the waits: each read is on top
 *                       of the previous one, whose handler may still run
 *   h2-reads unknown    with waits, 5 requests: 3 with 510-byte :path
 *                       values the client indexes (the scanner's arena of
 *                       kept values fills), a 4th whose traceparent
 *                       (k = 4) it indexes too (its value not kept: no
 *                       room), and a 5th that sends that traceparent as
 *                       a reference to the dynamic table
 *
 * The request of stream 2k - 1 has the trace-id
 * 4bf92f3577b34da6a3ce929d0e0eKKKK (k in 4 hex digits). */
#include "config.h"

#include "ctxobs.h"
#include "h2-build.h"
#include "listen-loopback.h"

#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void
die(const char *what)
{
	perror(what);
	exit(1);
}

static void
seen(unsigned stream)
{
	char t[33];

	printf("REQ %u %s\n", stream, ctxobs_trace(t));
}

static void
send_all(int fd, const void *p, size_t n)
{
	if (write(fd, p, n) != (ssize_t)n)
		die("write");
}

/* Exactly n bytes, in one read: the peer wrote them at once. */
static void
read_one(int fd, size_t n)
{
	uint8_t buf[640];

	if (n > sizeof(buf) || read(fd, buf, n) != (ssize_t)n)
		die("read");
}

/* A GET's HEADERS frame (END_HEADERS | END_STREAM) for stream, its
 * traceparent a literal never indexed.  Returns its length. */
static size_t
headers(uint8_t *f, uint32_t stream, unsigned k)
{
	char tp[64];
	size_t n = 9, l;

	l = (size_t)snprintf(tp, sizeof(tp),
			     "00-4bf92f3577b34da6a3ce929d0e0e%04x-00f067aa0ba902b7-01",
			     k);
	f[n++] = 0x82; /* :method GET */
	f[n++] = 0x86; /* :scheme http */
	f[n++] = 0x04; /* :path, literal */
	f[n++] = 2;
	f[n++] = '/';
	f[n++] = 'p';
	f[n++] = 0x10; /* traceparent, never indexed */
	f[n++] = 11;
	memcpy(f + n, "traceparent", 11);
	n += 11;
	f[n++] = (uint8_t)l;
	memcpy(f + n, tp, l);
	n += l;
	(void)h2_frame(f, n - 9, 0x1, 0x4 | 0x1, stream);
	return n;
}

/* "unknown"'s request k (0..4), HPACK by hand: literals with
 * incremental indexing, then an indexed field. */
static size_t
unknown_req(uint8_t *f, unsigned k)
{
	char tp[64];
	size_t n = 9, l;

	f[n++] = 0x82; /* :method GET */
	f[n++] = 0x86; /* :scheme http */
	if (k < 4) {
		f[n++] = 0x44; /* :path, indexed name, incremental indexing */
		f[n++] = 0x7f; /* length 510 = 127 + 383 */
		f[n++] = 0xff;
		f[n++] = 0x02;
		memset(f + n, 'a' + (int)k, 510);
		f[n] = '/';
		n += 510;
	} else {
		f[n++] = 0x84; /* :path / */
	}
	if (k == 3) {
		l = (size_t)snprintf(
			tp, sizeof(tp),
			"00-4bf92f3577b34da6a3ce929d0e0e%04x-00f067aa0ba902b7-01", 4);
		f[n++] = 0x40; /* new name, incremental indexing */
		f[n++] = 11;
		memcpy(f + n, "traceparent", 11);
		n += 11;
		f[n++] = (uint8_t)l;
		memcpy(f + n, tp, l);
		n += l;
	} else if (k == 4) {
		f[n++] = 0x80 | 62; /* the newest dynamic entry: that traceparent */
	}
	(void)h2_frame(f, n - 9, 0x1, 0x4 | 0x1, 2 * k + 1);
	return n;
}

int
main(int argc, char **argv)
{
	struct sockaddr_in a;
	uint8_t start[64];
	size_t start_len;
	int l, cl, sv, one = 1;
	unsigned k, n;
	bool wait, unknown = false;

	if (argc == 2 && strcmp(argv[1], "unknown") == 0) {
		unknown = true;
		n = 5;
	} else if (argc != 3 ||
		   (strcmp(argv[1], "wait") && strcmp(argv[1], "nowait"))) {
		fprintf(stderr, "usage: h2-reads wait|nowait N | unknown\n");
		return 2;
	} else {
		n = (unsigned)strtoul(argv[2], NULL, 10);
	}
	wait = strcmp(argv[1], "nowait") != 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	l = listen_loopback(1, SOCK_CLOEXEC, &a);
	if (l < 0)
		die("listen");
	cl = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (cl < 0 || setsockopt(cl, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) ||
	    connect(cl, (struct sockaddr *)&a, sizeof(a)))
		die("connect");
	sv = accept(l, NULL, NULL);
	if (sv < 0)
		die("accept");
	start_len = h2_preface(start);
	send_all(cl, start, start_len);
	read_one(sv, start_len);
	for (k = 1; k <= n; k++) {
		uint8_t f[640];
		size_t len = unknown ? unknown_req(f, k - 1) : headers(f, 2 * k - 1, k);

		send_all(cl, f, len);
		if (wait) {
			struct pollfd p = {.fd = sv, .events = POLLIN};

			if (poll(&p, 1, 10000) != 1)
				die("poll");
		}
		read_one(sv, len);
		seen(2 * k - 1);
	}
	close(sv);
	close(cl);
	close(l);
	return 0;
}
