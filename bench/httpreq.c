/* SPDX-License-Identifier: Apache-2.0 */
/* A keep-alive HTTP/1.1 exchange on 127.0.0.1 inside one process, for
 * counting the instructions the shim spends from an incoming request head
 * with a traceparent to a published record (issue 8, B4).
 *
 *   bench-httpreq N       print the head length, serve N requests
 *   bench-httpreq scan N  scan the same head N times with http_scan_whole()
 *
 * The server side is an accept()ed socket (a connection the shim tracks);
 * the client side writes one request head per round and reads the
 * response, outside the counted functions.  Each round the server read()s
 * the head with one call (httpreq_read) and write()s a small response
 * (httpreq_respond).  Under callgrind, --toggle-collect=httpreq_read counts
 * what happens from the head to the published record (the shim's read
 * hook, the scanner, the context building and the publication),
 * --toggle-collect=http_scan_feed the scanning of heads split across
 * reads (none here; see "scan" below for the usual read).  A few rounds
 * through *_warm copies first bind every symbol and map the shim's
 * connection table.  The difference per request with and without
 * LD_PRELOAD=libctxshim.so is what the shim adds.
 *
 * The shim's read hook scans a read that holds one whole head, as every
 * read here does, without http_scan_feed(): http_scan_whole()'s body,
 * inlined into ctxshim_request_ctx_whole() and not countable apart from
 * the context building there.  "scan" runs the same code out of line
 * (http_scan_whole() of the proc-context library the shim links) over
 * this head, the way the hook calls it: a scanner at a message start,
 * the shim's default configuration (16 KiB heads, no CTXSHIM_HEADER_ATTRS).
 * --toggle-collect=http_scan_whole counts it (B4a, bench/run.sh).
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http-scan.h"

/* A browser-like head: 7 header lines, traceparent among them. */
static const char httpreq_head[] =
	"GET /api/v1/orders/12345/items?page=2&limit=50 HTTP/1.1\r\n"
	"Host: 127.0.0.1:8080\r\n"
	"User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:115.0) Gecko/20100101 "
	"Firefox/115.0\r\n"
	"Accept: application/json, text/plain, */*\r\n"
	"Accept-Language: en-US,en;q=0.5\r\n"
	"Accept-Encoding: gzip, deflate, br\r\n"
	"traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n"
	"Connection: keep-alive\r\n"
	"\r\n";

static const char httpreq_resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";

__attribute__((noinline)) int httpreq_read(int fd, char *buf, size_t cap);
__attribute__((noinline)) int httpreq_respond(int fd);
__attribute__((noinline)) int httpreq_read_warm(int fd, char *buf, size_t cap);
__attribute__((noinline)) int httpreq_respond_warm(int fd);

/* The server's two calls per request, each in its own function so that
 * callgrind can count them apart (--toggle-collect=httpreq_read: from the
 * head to the published record; httpreq_respond: the response), and in
 * *_warm copies for the rounds that are not counted. */
static inline __attribute__((always_inline)) int
read_body(int fd, char *buf, size_t cap)
{
	return read(fd, buf, cap) == (ssize_t)(sizeof(httpreq_head) - 1) ? 0 : -1;
}

static inline __attribute__((always_inline)) int
respond_body(int fd)
{
	return write(fd, httpreq_resp, sizeof(httpreq_resp) - 1) ==
			       (ssize_t)(sizeof(httpreq_resp) - 1)
		       ? 0
		       : -1;
}

__attribute__((noinline)) int
httpreq_read(int fd, char *buf, size_t cap)
{
	return read_body(fd, buf, cap);
}

__attribute__((noinline)) int
httpreq_respond(int fd)
{
	return respond_body(fd);
}

__attribute__((noinline)) int
httpreq_read_warm(int fd, char *buf, size_t cap)
{
	return read_body(fd, buf, cap);
}

__attribute__((noinline)) int
httpreq_respond_warm(int fd)
{
	return respond_body(fd);
}

static int
round_trip(int cfd, int sfd, bool warm)
{
	static char buf[8192], rbuf[256];
	size_t got = 0;

	if (write(cfd, httpreq_head, sizeof(httpreq_head) - 1) !=
	    (ssize_t)(sizeof(httpreq_head) - 1))
		return -1;
	if ((warm ? httpreq_read_warm(sfd, buf, sizeof(buf))
		  : httpreq_read(sfd, buf, sizeof(buf))) < 0)
		return -1;
	if ((warm ? httpreq_respond_warm(sfd) : httpreq_respond(sfd)) < 0)
		return -1;
	while (got < sizeof(httpreq_resp) - 1) {
		ssize_t r = read(cfd, rbuf + got, sizeof(rbuf) - got);

		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

/* bench-httpreq scan N: the whole-head scan of the head above, N times,
 * each from a fresh scanner at a message start (what the hook's scanner is
 * before a head: http_scan_at_start()), from a buffer like the server's. */
static int
scan_heads(long n)
{
	static struct http_scan_config cfg;
	static char buf[8192];
	const size_t len = sizeof(httpreq_head) - 1;
	struct http_scan st;
	struct http_scan_head h;
	long i;

	/* conn_scan_config() with CTXSHIM_MAX_HEADER_BYTES unset: the defaults */
	http_scan_config_init(&cfg);
	memcpy(buf, httpreq_head, len);
	for (i = 0; i < n; i++) {
		memset(&st, 0, sizeof(st));
		if (http_scan_whole(&st, &cfg, buf, len, &h) != 0 ||
		    h.traceparent_len != W3C_TRACEPARENT_LEN ||
		    !http_scan_at_start(&st)) {
			fprintf(stderr, "bench-httpreq: http_scan_whole() did not take "
					"the head\n");
			return 1;
		}
	}
	printf("head_bytes=%zu scans=%ld\n", len, n);
	return 0;
}

int
main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);
	long n, i;
	int lfd, cfd, sfd, one = 1;

	if (argc > 2 && strcmp(argv[1], "scan") == 0) {
		n = strtol(argv[2], NULL, 10);
		return n < 1 ? 64 : scan_heads(n);
	}
	n = argc > 1 ? strtol(argv[1], NULL, 10) : 1000;
	if (n < 1) {
		fprintf(stderr, "usage: bench-httpreq N | bench-httpreq scan N\n");
		return 64;
	}
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || cfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(lfd, 1) < 0 || getsockname(lfd, (struct sockaddr *)&a, &al) < 0 ||
	    connect(cfd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("bench-httpreq: socket setup");
		return 1;
	}
	sfd = accept(lfd, NULL, NULL);
	if (sfd < 0) {
		perror("bench-httpreq: accept");
		return 1;
	}
	/* the whole head arrives in one segment, read by one read() */
	setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (i = 0; i < 8; i++)
		if (round_trip(cfd, sfd, true) < 0)
			goto fail;
	for (i = 0; i < n; i++)
		if (round_trip(cfd, sfd, false) < 0)
			goto fail;
	printf("head_bytes=%zu requests=%ld\n", sizeof(httpreq_head) - 1, n);
	close(sfd);
	close(cfd);
	close(lfd);
	return 0;
fail:
	fprintf(stderr, "bench-httpreq: a round trip failed\n");
	return 1;
}
