/* SPDX-License-Identifier: Apache-2.0 */
/* A single-threaded HTTPS/1.1 server with no tracing code that frees a
 * TLS session long after closing its fd, for the test of the session word
 * (preload/conn.c, "Sessions"; test-integration-tls.c).  Built with
 * OpenSSL (tls-defer-openssl) and with GnuTLS (tls-defer-gnutls).
 *
 *   tls-defer CERT KEY
 *
 * Listens on 127.0.0.1 (kernel-chosen port), prints "READY <port>", then:
 *
 *  1. accepts connection A ("ACCEPT <fd>"), handshakes, reads one request
 *     head ("REQ <tid> <path>"), answers it and close()s the fd, keeping
 *     the session;
 *  2. accepts connection B, which gets A's fd number ("ACCEPT <fd>"),
 *     handshakes, reads one request head ("REQ ..."), then frees session A
 *     (SSL_free, gnutls_deinit) while B's request is in progress, and
 *     prints "BLOCK <tid> <path>": the test looks at the thread's context
 *     and releases it with a line on stdin;
 *  3. answers B's request, reads a second one on B, frees session B with
 *     the fd still open (the end of the session that does own it) and
 *     prints "BLOCK <tid> <path>" again; after a line on stdin it closes
 *     the fd and prints "CLOSED <tid>".
 *
 * Exits 0 at the end of stdin, 1 on any failure ("FAILED <what>"). */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef TLS_GNUTLS
#include <gnutls/gnutls.h>
#else
#include <openssl/ssl.h>
#endif

#include "listen-loopback.h"

#define HEAD_MAX 8192

static long tid;

static void __attribute__((noreturn)) fail(const char *what)
{
	printf("FAILED %s\n", what);
	fflush(stdout);
	exit(1);
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One line to stdout, flushed at once: the test reads lines as they come. */
static void
say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
}

/* One line on stdin, or the end of the test. */
static void
wait_go(void)
{
	char line[64];

	if (!fgets(line, sizeof(line), stdin))
		exit(0);
}

/* ---- TLS backends ---- */

#ifdef TLS_GNUTLS
typedef gnutls_session_t session;
static gnutls_certificate_credentials_t creds;

static void
t_init(const char *cert, const char *key)
{
	if (gnutls_certificate_allocate_credentials(&creds) < 0 ||
	    gnutls_certificate_set_x509_key_file(creds, cert, key,
						 GNUTLS_X509_FMT_PEM) < 0)
		fail("credentials");
}

static session
t_accept(int fd)
{
	gnutls_session_t s;
	int r;

	if (gnutls_init(&s, GNUTLS_SERVER) < 0 || gnutls_set_default_priority(s) < 0 ||
	    gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, creds) < 0)
		fail("session");
	gnutls_transport_set_int(s, fd);
	do
		r = gnutls_handshake(s);
	while (r < 0 && !gnutls_error_is_fatal(r));
	if (r < 0)
		fail("handshake");
	return s;
}

static long
t_read(session s, char *buf, size_t n)
{
	ssize_t r;

	do
		r = gnutls_record_recv(s, buf, n);
	while (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED);
	return r;
}

static long
t_write(session s, const char *buf, size_t n)
{
	return gnutls_record_send(s, buf, n);
}

static void
t_free(session s)
{
	gnutls_deinit(s);
}
#else
typedef SSL *session;
static SSL_CTX *ctx;

static void
t_init(const char *cert, const char *key)
{
	ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx || SSL_CTX_use_certificate_file(ctx, cert, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1)
		fail("credentials");
}

static session
t_accept(int fd)
{
	SSL *s = SSL_new(ctx);

	if (!s || SSL_set_fd(s, fd) != 1 || SSL_accept(s) != 1)
		fail("handshake");
	return s;
}

static long
t_read(session s, char *buf, size_t n)
{
	return SSL_read(s, buf, (int)n);
}

static long
t_write(session s, const char *buf, size_t n)
{
	return SSL_write(s, buf, (int)n);
}

static void
t_free(session s)
{
	SSL_free(s);
}
#endif

/* ---- HTTP ---- */

/* Read one request head (no body) into path; prints "REQ". */
static void
read_head(session s, char *path, size_t cap)
{
	char buf[HEAD_MAX + 1];
	size_t len = 0;
	const char *sp, *sp2;

	while (!memmem(buf, len, "\r\n\r\n", 4)) {
		long r;

		if (len == HEAD_MAX)
			fail("head too large");
		r = t_read(s, buf + len, HEAD_MAX - len);
		if (r <= 0)
			fail("read");
		len += (size_t)r;
	}
	buf[len] = '\0';
	sp = strchr(buf, ' ');
	sp2 = sp ? strchr(sp + 1, ' ') : NULL;
	if (!sp2 || (size_t)(sp2 - sp - 1) >= cap)
		fail("request line");
	memcpy(path, sp + 1, (size_t)(sp2 - sp - 1));
	path[sp2 - sp - 1] = '\0';
	say("REQ %ld %s\n", tid, path);
}

static void
respond(session s, const char *path)
{
	char body[600], resp[800];
	int bl = snprintf(body, sizeof(body), "path=%s\n", path);
	int n = snprintf(resp, sizeof(resp),
			 "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", bl, body);

	if (t_write(s, resp, (size_t)n) != n)
		fail("write");
}

static int
accept_one(int ls)
{
	int fd = accept(ls, NULL, NULL);

	if (fd < 0)
		fail("accept");
	say("ACCEPT %d\n", fd);
	return fd;
}

int
main(int argc, char **argv)
{
	struct sockaddr_in a;
	char path[512];
	session sa, sb;
	int ls, fa, fb;

	if (argc != 3) {
		fprintf(stderr, "usage: tls-defer CERT KEY\n");
		return 64;
	}
	tid = syscall(SYS_gettid);
	t_init(argv[1], argv[2]);
	ls = listen_loopback(4, SOCK_CLOEXEC, &a);
	if (ls < 0)
		fail("listen");
	say("READY %d\n", ntohs(a.sin_port));

	/* 1: A, closed with its session kept */
	fa = accept_one(ls);
	sa = t_accept(fa);
	read_head(sa, path, sizeof(path));
	respond(sa, path);
	close(fa);

	/* 2: B on the same number; A freed in the middle of B's request */
	fb = accept_one(ls);
	sb = t_accept(fb);
	read_head(sb, path, sizeof(path));
	t_free(sa);
	say("BLOCK %ld %s\n", tid, path);
	wait_go();
	respond(sb, path);

	/* 3: B's own end, with its fd open */
	read_head(sb, path, sizeof(path));
	t_free(sb);
	say("BLOCK %ld %s\n", tid, path);
	wait_go();
	close(fb);
	say("CLOSED %ld\n", tid);
	wait_go();
	return 0;
}
