/* SPDX-License-Identifier: Apache-2.0 */
/* An event-loop style server with no tracing code, for the tests of
 * hooks/hook-nghttp2.c: one thread, two connections it makes to itself on
 * 127.0.0.1.  It reads connection A's "Upgrade: h2c" head, then
 * connection B's HTTP/1.1 request, and only then upgrades A's nghttp2
 * session (the thread shows B's request at that call), writes the 101,
 * sends stream 1's response, answers B, reads and answers B's second request, reads A's
 * HTTP/2 preface and SETTINGS into the session, and reads and answers B's
 * third request.  After each step it prints "<STEP> <trace-id the thread
 * shows>" (or "none"):
 *   READ-A READ-B1 UPGRADE-A READ-B2 WROTE-B2 PREFACE-A READ-B3 WROTE-B3
 * and "STREAM1-READ <trace>" from stream 1's data source. */
#include "config.h"

#include "ctxobs.h"
#include "listen-loopback.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

static int server_a;

static void
seen(const char *step)
{
	char t[33];

	printf("%s %s\n", step, ctxobs_trace(t));
	fflush(stdout);
}

static void
die(const char *what)
{
	perror(what);
	exit(1);
}

static void
send_all(int fd, const void *p, size_t len)
{
	if (send(fd, p, len, 0) != (ssize_t)len)
		die("send");
}

/* One read of fd: everything a peer sent at once on loopback. */
static size_t
read_some(int fd, uint8_t *buf, size_t cap)
{
	ssize_t n = recv(fd, buf, cap, 0);

	if (n <= 0)
		die("recv");
	return (size_t)n;
}

static ssize_t
on_send(nghttp2_session *s, const uint8_t *d, size_t n, int flags, void *ud)
{
	(void)s;
	(void)flags;
	(void)ud;
	return send(server_a, d, n, 0);
}

static ssize_t
on_read(nghttp2_session *s,
	int32_t id,
	uint8_t *buf,
	size_t len,
	uint32_t *flags,
	nghttp2_data_source *src,
	void *ud)
{
	(void)s;
	(void)id;
	(void)buf;
	(void)len;
	(void)src;
	(void)ud;
	seen("STREAM1-READ");
	*flags = NGHTTP2_DATA_FLAG_EOF;
	return 0;
}

int
main(void)
{
	static const char head_a[] =
		"GET /a HTTP/1.1\r\nHost: x\r\n"
		"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
		"HTTP2-Settings: \r\n"
		"traceparent: "
		"00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-1111111111111111-01\r\n\r\n";
	static const char head_b[3][128] = {
		"GET /b1 HTTP/1.1\r\nHost: x\r\n"
		"traceparent: "
		"00-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb-2222222222222222-01\r\n\r\n",
		"GET /b2 HTTP/1.1\r\nHost: x\r\n"
		"traceparent: "
		"00-cccccccccccccccccccccccccccccccc-3333333333333333-01\r\n\r\n",
		"GET /b3 HTTP/1.1\r\nHost: x\r\n"
		"traceparent: "
		"00-dddddddddddddddddddddddddddddddd-4444444444444444-01\r\n\r\n",
	};
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	static const char switching[] = "HTTP/1.1 101 Switching Protocols\r\n"
					"Connection: Upgrade\r\nUpgrade: h2c\r\n\r\n";
	/* The client's preface and an empty SETTINGS frame. */
	static const uint8_t preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
					 "\0\0\0\4\0\0\0\0\0";
	struct sockaddr_in a;
	nghttp2_session_callbacks *cbs;
	nghttp2_session *s;
	nghttp2_nv nv = {(uint8_t *)":status", (uint8_t *)"200", 7, 3,
			 NGHTTP2_NV_FLAG_NONE};
	nghttp2_data_provider dp = {.read_callback = on_read};
	uint8_t buf[4096];
	size_t n;
	int l, client_a, client_b, server_b, r;

	l = listen_loopback(4, 0, &a);
	if (l < 0)
		die("listen");
	client_a = socket(AF_INET, SOCK_STREAM, 0);
	if (client_a < 0 || connect(client_a, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    (server_a = accept(l, NULL, NULL)) < 0)
		die("connect A");
	client_b = socket(AF_INET, SOCK_STREAM, 0);
	if (client_b < 0 || connect(client_b, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    (server_b = accept(l, NULL, NULL)) < 0)
		die("connect B");

	send_all(client_a, head_a, sizeof(head_a) - 1);
	(void)read_some(server_a, buf, sizeof(buf));
	seen("READ-A");
	send_all(client_b, head_b[0], strlen(head_b[0]));
	(void)read_some(server_b, buf, sizeof(buf));
	seen("READ-B1");

	/* A's turn again: upgrade, 101 (written after the call, as nghttpx
	 * does; written before, it would make the thread show A again),
	 * stream 1's response. */
	if (nghttp2_session_callbacks_new(&cbs) != 0)
		die("callbacks");
	nghttp2_session_callbacks_set_send_callback(cbs, on_send);
	if (nghttp2_session_server_new(&s, cbs, NULL) != 0)
		die("session");
	nghttp2_session_callbacks_del(cbs);
	r = nghttp2_session_upgrade2(s, (const uint8_t *)"", 0, 0, NULL);
	if (r != 0)
		die("upgrade");
	seen("UPGRADE-A");
	send_all(server_a, switching, sizeof(switching) - 1);
	if (nghttp2_submit_response(s, 1, &nv, 1, &dp) != 0 ||
	    nghttp2_session_send(s) != 0)
		die("stream 1");

	/* B's turn: its first answer, its second request. */
	send_all(server_b, ok, sizeof(ok) - 1);
	send_all(client_b, head_b[1], strlen(head_b[1]));
	(void)read_some(server_b, buf, sizeof(buf));
	seen("READ-B2");
	send_all(server_b, ok, sizeof(ok) - 1);
	seen("WROTE-B2");

	/* A's client got the 101: the preface comes. */
	send_all(client_a, preface, sizeof(preface) - 1);
	n = read_some(server_a, buf, sizeof(buf));
	if (nghttp2_session_mem_recv(s, buf, n) != (ssize_t)n ||
	    nghttp2_session_send(s) != 0)
		die("preface");
	seen("PREFACE-A");

	send_all(client_b, head_b[2], strlen(head_b[2]));
	(void)read_some(server_b, buf, sizeof(buf));
	seen("READ-B3");
	send_all(server_b, ok, sizeof(ok) - 1);
	seen("WROTE-B3");

	nghttp2_session_del(s);
	close(server_a);
	close(server_b);
	close(client_a);
	close(client_b);
	close(l);
	return 0;
}
