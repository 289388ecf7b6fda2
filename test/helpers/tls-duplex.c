/* SPDX-License-Identifier: Apache-2.0 */
/* A TLS server whose reads and writes of one connection run as two
 * coroutines of one thread, for hooks/hook-openssl.c: a reader parked
 * inside SSL_read() while its transport has no data, and a writer that
 * answers the request before meanwhile (green threads that switch inside
 * read()).  The switch is made by the session's read BIO, which calls
 * the writer directly: SSL_write() of the session from inside its own
 * SSL_read().
 *
 *   tls-duplex CERT KEY
 *
 * A forked client (no shim) sends GET /a (trace aaaa…), reads the answer,
 * then sends GET /b (trace bbbb…).  The server prints "READ <path> <ctx>"
 * with its thread's context (ctxobs.h) after reading each request.  The
 * answer to /a is written while SSL_read() waits for /b: the shim must
 * see it, so that /b gets its own context (not /a's, as a request queued
 * behind an unanswered one would).  Exits 0 when both requests were
 * served. */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctxobs.h"

static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

static SSL *srv;
static int sfd;
static bool answer_pending; /* the writer coroutine has work */

/* The read BIO: the socket's bytes; while there are none, the "other
 * coroutine" runs. */
static int
coro_read(BIO *b, char *buf, int n)
{
	(void)b;
	for (;;) {
		struct pollfd pfd = {.fd = sfd, .events = POLLIN};
		ssize_t r = recv(sfd, buf, (size_t)n, MSG_DONTWAIT);

		if (r >= 0)
			return (int)r;
		if (errno != EAGAIN && errno != EINTR)
			return -1;
		if (answer_pending) {
			answer_pending = false;
			if (SSL_write(srv, resp, (int)sizeof(resp) - 1) <= 0)
				return -1;
		}
		(void)poll(&pfd, 1, -1);
	}
}

static long
coro_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	(void)b;
	(void)num;
	(void)ptr;
	return cmd == BIO_CTRL_FLUSH;
}

static int
coro_create(BIO *b)
{
	BIO_set_init(b, 1);
	return 1;
}

static void
client(int fd)
{
	static const char a[] =
		"GET /a HTTP/1.1\r\nHost: x\r\ntraceparent: "
		"00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-1111111111111111-01\r\n\r\n";
	static const char b[] =
		"GET /b HTTP/1.1\r\nHost: x\r\ntraceparent: "
		"00-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb-2222222222222222-01\r\n\r\n";
	SSL_CTX *c = SSL_CTX_new(TLS_client_method());
	SSL *s = c ? SSL_new(c) : NULL;
	char buf[256];

	if (!s || SSL_set_fd(s, fd) != 1 || SSL_connect(s) != 1 ||
	    SSL_write(s, a, sizeof(a) - 1) <= 0 || SSL_read(s, buf, sizeof(buf)) <= 0 ||
	    SSL_write(s, b, sizeof(b) - 1) <= 0 || SSL_read(s, buf, sizeof(buf)) <= 0)
		_exit(2);
	(void)SSL_shutdown(s);
	_exit(0);
}

/* One request head (it fits in one record here); prints what the thread
 * shows once it is read. */
static int
read_request(void)
{
	char buf[512], path[8];
	int n = SSL_read(srv, buf, sizeof(buf) - 1);

	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if (sscanf(buf, "GET %7s ", path) != 1)
		return -1;
	printf("READ %s %s\n", path, ctxobs_shown());
	fflush(stdout);
	return 0;
}

int
main(int argc, char **argv)
{
	BIO_METHOD *m;
	SSL_CTX *ctx;
	int sv[2], st = 1;
	pid_t pid;

	if (argc != 3) {
		fprintf(stderr, "usage: tls-duplex CERT KEY\n");
		return 64;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		close(sv[0]);
		client(sv[1]);
	}
	close(sv[1]);
	sfd = sv[0];
	ctx = SSL_CTX_new(TLS_server_method());
	m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "coro-read");
	if (!ctx || !m ||
	    SSL_CTX_use_certificate_file(ctx, argv[1], SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, argv[2], SSL_FILETYPE_PEM) != 1 ||
	    !BIO_meth_set_read(m, coro_read) || !BIO_meth_set_ctrl(m, coro_ctrl) ||
	    !BIO_meth_set_create(m, coro_create) || !(srv = SSL_new(ctx)))
		return 1;
	SSL_set_bio(srv, BIO_new(m), BIO_new_socket(sfd, BIO_NOCLOSE));
	if (SSL_accept(srv) != 1 || read_request() < 0)
		goto out;
	/* /a is answered by the writer while the reader waits for /b */
	answer_pending = true;
	if (read_request() < 0 || SSL_write(srv, resp, (int)sizeof(resp) - 1) <= 0)
		goto out;
	(void)SSL_shutdown(srv);
	st = 0;
out:
	if (st)
		ERR_print_errors_fp(stderr);
	close(sfd);
	waitpid(pid, NULL, 0);
	return st;
}
