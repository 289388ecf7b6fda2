/* SPDX-License-Identifier: Apache-2.0 */
/* A thread-per-connection HTTPS/1.1 server with no tracing code, for the
 * tests of hooks/hook-openssl.c and hooks/hook-gnutls.c.  Built once with
 * OpenSSL (tls-server-openssl, and as a plugin libtls-server-plugin.so
 * that dlopen-main loads at run time) and once with GnuTLS
 * (tls-server-gnutls).
 *
 *   tls-server CERT KEY [--ex] [--bio mem] [--up-ref] [--read-size N]
 *                       [--send again|file]
 *
 * --ex:       OpenSSL: SSL_read_ex/SSL_write_ex instead of SSL_read/SSL_write
 * --bio mem:  OpenSSL: the session talks to memory BIOs that this program
 *             pumps to and from the socket itself (a transport without an
 *             fd, as event-loop frameworks have)
 * --up-ref:   OpenSSL: a second reference to the session is held from the
 *             end of the handshake on (SSL_up_ref, before the first read);
 *             each request head, once read, and each response, once
 *             written, frees it (SSL_free: the session lives on) and takes
 *             a new one (SSL_dup, which returns the session itself after
 *             the handshake), as a server handing the session to another
 *             component at each step; the end of the connection frees both,
 *             and so does a request whose path contains "/end", at once
 *             (before it blocks; it gets no response, the connection is
 *             closed)
 * --send again: GnuTLS: the first push of each response fails with
 *             EAGAIN (a push function of this program's), and the send
 *             is retried as gnutls_record_send(s, NULL, 0), as
 *             gnutls_record_send(3) allows
 * --send file: GnuTLS: each response is written to a temporary file and
 *             sent with gnutls_record_send_file() (without kTLS libgnutls
 *             reads it and sends it through gnutls_record_send())
 *
 * Listens on 127.0.0.1 (kernel-chosen port), prints "READY <port>", serves
 * each connection on its own thread: TLS handshake, then request heads
 * read with N-byte reads (keep-alive, Content-Length bodies skipped).  For
 * each request it prints "REQ <tid> <path> <n> <value>" (n traceparent
 * header lines received, the first one's value or "-"); a path starting
 * with "/block" prints "BLOCK <tid> <path>" and waits for one line on
 * stdin before answering.  The response body is "path=<path>\n"; then
 * "DONE <tid> <path>".  Exits when stdin is closed. */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "http1-reader.h"
#include "serve-common.h"

#ifdef TLS_GNUTLS
#include <gnutls/gnutls.h>
#else
#include <openssl/err.h>
#include <openssl/ssl.h>
#endif

#define BUF_MAX (64 * 1024)

static size_t read_size = 4096;
static bool opt_ex, opt_mem_bio, opt_up_ref;
#ifdef TLS_GNUTLS
static const char *opt_send = "";
#endif

/* ---- TLS backends ---- */

struct tconn {
	int fd;
#ifdef TLS_GNUTLS
	gnutls_session_t s;
	bool refuse_push; /* --send again: the next push fails */
#else
	SSL *ssl;
	BIO *rb, *wb; /* --bio mem */
	bool extra;   /* --up-ref: the second reference is held */
#endif
};

#ifdef TLS_GNUTLS
static gnutls_certificate_credentials_t creds;

static int
t_init(const char *cert, const char *key)
{
	if (gnutls_certificate_allocate_credentials(&creds) < 0 ||
	    gnutls_certificate_set_x509_key_file(creds, cert, key,
						 GNUTLS_X509_FMT_PEM) < 0)
		return -1;
	return 0;
}

/* --send again: the socket's send(), but the first push of a response
 * fails as a full socket buffer would. */
static ssize_t
push_refusing(gnutls_transport_ptr_t ptr, const void *buf, size_t n)
{
	struct tconn *c = ptr;

	if (c->refuse_push) {
		c->refuse_push = false;
		gnutls_transport_set_errno(c->s, EAGAIN);
		return -1;
	}
	return send(c->fd, buf, n, MSG_NOSIGNAL);
}

static int
t_accept(struct tconn *c)
{
	int r;

	if (gnutls_init(&c->s, GNUTLS_SERVER) < 0)
		return -1;
	if (gnutls_set_default_priority(c->s) < 0 ||
	    gnutls_credentials_set(c->s, GNUTLS_CRD_CERTIFICATE, creds) < 0)
		return -1;
	gnutls_transport_set_int(c->s, c->fd);
	do
		r = gnutls_handshake(c->s);
	while (r < 0 && !gnutls_error_is_fatal(r));
	return r < 0 ? -1 : 0;
}

static ssize_t
t_read(struct tconn *c, char *buf, size_t n)
{
	ssize_t r;

	do
		r = gnutls_record_recv(c->s, buf, n);
	while (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED);
	return r < 0 ? -1 : r;
}

/* --send file */
static int
write_file(struct tconn *c, const char *buf, size_t n)
{
	char path[] = "/tmp/tls-server-XXXXXX";
	int fd = mkstemp(path);
	off_t off = 0;
	ssize_t r;

	if (fd < 0)
		return -1;
	unlink(path);
	/* from the start: without kTLS, libgnutls read()s from the file
	 * position whatever the offset says */
	if (write(fd, buf, n) != (ssize_t)n || lseek(fd, 0, SEEK_SET) != 0) {
		close(fd);
		return -1;
	}
	do
		r = gnutls_record_send_file(c->s, fd, &off, n);
	while (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED);
	close(fd);
	return r == (ssize_t)n ? 0 : -1;
}

static int
t_write(struct tconn *c, const char *buf, size_t n)
{
	bool again = strcmp(opt_send, "again") == 0;

	if (strcmp(opt_send, "file") == 0)
		return write_file(c, buf, n);
	if (again) {
		/* the push function takes the session's fd from c from now on
		 * (the transport pointer stays the fd: as a server that sets
		 * its own push function over a plain socket) */
		gnutls_transport_set_push_function(c->s, push_refusing);
		gnutls_transport_set_ptr2(c->s, (gnutls_transport_ptr_t)(intptr_t)c->fd,
					  c);
		c->refuse_push = true;
	}
	while (n) {
		ssize_t r = gnutls_record_send(c->s, buf, n);

		while (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
			r = again ? gnutls_record_send(c->s, NULL, 0)
				  : gnutls_record_send(c->s, buf, n);
		if (r <= 0)
			return -1;
		buf += r;
		n -= (size_t)r;
	}
	return 0;
}

static int
t_hand_over(struct tconn *c)
{
	(void)c;
	return 0;
}

static void
t_close(struct tconn *c)
{
	if (c->s) {
		(void)gnutls_bye(c->s, GNUTLS_SHUT_WR);
		gnutls_deinit(c->s);
		c->s = NULL;
	}
}
#else
static SSL_CTX *ctx;

static int
t_init(const char *cert, const char *key)
{
	ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx || SSL_CTX_use_certificate_file(ctx, cert, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1)
		return -1;
	return 0;
}

/* --bio mem: move what the session wrote to the socket. */
static int
mem_flush(struct tconn *c)
{
	char buf[16384];
	int n;

	while ((n = BIO_read(c->wb, buf, sizeof(buf))) > 0) {
		char *p = buf;

		while (n > 0) {
			ssize_t w = send(c->fd, p, (size_t)n, MSG_NOSIGNAL);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return -1;
			p += w;
			n -= (int)w;
		}
	}
	return 0;
}

/* --bio mem: after a call that returned r, flush its output and, if it
 * wants input, read some from the socket.  1: call again, 0: done, -1:
 * failed or end of stream. */
static int
mem_pump(struct tconn *c, int r)
{
	char buf[16384];
	ssize_t n;
	int err = SSL_get_error(c->ssl, r);

	if (mem_flush(c) < 0)
		return -1;
	if (r > 0)
		return 0;
	if (err != SSL_ERROR_WANT_READ)
		return err == SSL_ERROR_WANT_WRITE ? 1 : -1;
	do
		n = recv(c->fd, buf, sizeof(buf), 0);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return -1;
	return BIO_write(c->rb, buf, (int)n) == n ? 1 : -1;
}

static int
t_accept_session(struct tconn *c)
{
	int r;

	c->ssl = SSL_new(ctx);
	if (!c->ssl)
		return -1;
	if (opt_mem_bio) {
		c->rb = BIO_new(BIO_s_mem());
		c->wb = BIO_new(BIO_s_mem());
		if (!c->rb || !c->wb)
			return -1;
		SSL_set_bio(c->ssl, c->rb, c->wb);
		SSL_set_accept_state(c->ssl);
		do
			r = mem_pump(c, SSL_do_handshake(c->ssl));
		while (r == 1);
		return r;
	}
	if (SSL_set_fd(c->ssl, c->fd) != 1)
		return -1;
	return SSL_accept(c->ssl) == 1 ? 0 : -1;
}

static int
t_accept(struct tconn *c)
{
	if (t_accept_session(c) < 0)
		return -1;
	if (opt_up_ref) {
		if (SSL_up_ref(c->ssl) != 1)
			return -1;
		c->extra = true;
	}
	return 0;
}

/* --up-ref: the other component is done with the session, and the next
 * step's takes it again. */
static int
t_hand_over(struct tconn *c)
{
	SSL *dup;

	if (!c->extra)
		return 0;
	SSL_free(c->ssl);
	c->extra = false;
	dup = SSL_dup(c->ssl);
	if (dup != c->ssl) {
		SSL_free(dup); /* a copy: not what this server is about */
		return -1;
	}
	c->extra = true;
	return 0;
}

static ssize_t
t_read(struct tconn *c, char *buf, size_t n)
{
	for (;;) {
		size_t got = 0;
		int r;

		if (opt_ex) {
			r = SSL_read_ex(c->ssl, buf, n, &got);
			r = r == 1 ? (int)got : 0;
		} else {
			r = SSL_read(c->ssl, buf, (int)n);
		}
		if (!opt_mem_bio)
			return r > 0 ? r : -1;
		if (r > 0)
			return r;
		if (mem_pump(c, r) != 1)
			return -1;
	}
}

static int
t_write(struct tconn *c, const char *buf, size_t n)
{
	while (n) {
		size_t done = 0;
		int r;

		if (opt_ex) {
			r = SSL_write_ex(c->ssl, buf, n, &done);
			r = r == 1 ? (int)done : 0;
		} else {
			r = SSL_write(c->ssl, buf, (int)n);
		}
		if (opt_mem_bio) {
			int p = mem_pump(c, r);

			if (p < 0)
				return -1;
			if (p == 1)
				continue;
		} else if (r <= 0) {
			return -1;
		}
		buf += r;
		n -= (size_t)r;
	}
	return 0;
}

static void
t_close(struct tconn *c)
{
	if (c->ssl) {
		(void)SSL_shutdown(c->ssl);
		if (opt_mem_bio)
			(void)mem_flush(c);
		if (c->extra)
			SSL_free(c->ssl);
		SSL_free(c->ssl);
		c->ssl = NULL;
		c->extra = false;
	}
}
#endif

/* ---- HTTP ---- */

/* The traceparent lines of a request head: how many, the first one's
 * value ("-" if none). */
static unsigned
traceparents(const char *head, size_t len, char *tp, size_t tp_cap)
{
	const char *p = head, *end = head + len;
	unsigned n = 0;

	snprintf(tp, tp_cap, "-");
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));

		if (!nl)
			break;
		if ((size_t)(nl - p) > 12 && strncasecmp(p, "traceparent:", 12) == 0) {
			const char *v = p + 12;
			size_t vl;

			while (*v == ' ')
				v++;
			vl = (size_t)(nl - v);
			if (vl && v[vl - 1] == '\r')
				vl--;
			if (n++ == 0 && vl < tp_cap) {
				memcpy(tp, v, vl);
				tp[vl] = '\0';
			}
		}
		p = nl + 1;
	}
	return n;
}

/* The read of http1-reader.h. */
static ssize_t
conn_read(void *c, char *buf, size_t n)
{
	return t_read(c, buf, n);
}

static void *
serve(void *arg)
{
	struct tconn c = {.fd = (int)(long)arg};
	long tid = syscall(SYS_gettid);
	struct http1_conn h = {.read = conn_read,
			       .io = &c,
			       .read_size = read_size,
			       .buf = malloc(BUF_MAX),
			       .cap = BUF_MAX};
	char path[1024], resp[1400], tp[128];
	size_t head_len;

	serve_say("CONN %ld\n", tid);
	if (!h.buf || t_accept(&c) < 0) {
		serve_say("HANDSHAKE-FAILED %ld\n", tid);
		goto out;
	}
	while ((head_len = http1_next(&h, path, sizeof(path))) != 0) {
		unsigned n_tp = traceparents(h.buf, head_len, tp, sizeof(tp));
		size_t n;

		http1_drop(&h);
		if (t_hand_over(&c) < 0) {
			serve_say("UP-REF-FAILED %ld\n", tid);
			break;
		}
		serve_say("REQ %ld %s %u %s\n", tid, path, n_tp, tp);
		if (opt_up_ref && strstr(path, "/end")) {
			t_close(&c);
			serve_maybe_block(tid, path);
			break;
		}
		serve_maybe_block(tid, path);
		n = http1_response(resp, sizeof(resp), path);
		if (t_write(&c, resp, n) < 0)
			break;
		serve_say("DONE %ld %s\n", tid, path);
		if (t_hand_over(&c) < 0) {
			serve_say("UP-REF-FAILED %ld\n", tid);
			break;
		}
	}
out:
	t_close(&c);
	close(c.fd);
	free(h.buf);
	serve_say("CLOSED %ld\n", tid);
	return NULL;
}

#ifdef HELPER_PLUGIN
int helper_main(int argc, char **argv) __attribute__((visibility("default")));

int
helper_main(int argc, char **argv)
#else
int
main(int argc, char **argv)
#endif
{
	int i;

	if (argc < 3) {
		fprintf(stderr, "usage: tls-server CERT KEY [options]\n");
		return 64;
	}
	for (i = 3; i < argc; i++) {
		if (strcmp(argv[i], "--ex") == 0)
			opt_ex = true;
		else if (strcmp(argv[i], "--bio") == 0 && i + 1 < argc &&
			 strcmp(argv[i + 1], "mem") == 0 && ++i)
			opt_mem_bio = true;
		else if (strcmp(argv[i], "--up-ref") == 0)
			opt_up_ref = true;
		else if (strcmp(argv[i], "--read-size") == 0 && i + 1 < argc)
			read_size = (size_t)strtoul(argv[++i], NULL, 10);
#ifdef TLS_GNUTLS
		else if (strcmp(argv[i], "--send") == 0 && i + 1 < argc &&
			 (strcmp(argv[i + 1], "again") == 0 ||
			  strcmp(argv[i + 1], "file") == 0))
			opt_send = argv[++i];
#endif
		else {
			fprintf(stderr, "tls-server: unknown option %s\n", argv[i]);
			return 64;
		}
	}
	if (read_size == 0 || read_size > BUF_MAX)
		read_size = 4096;
	if (t_init(argv[1], argv[2]) < 0) {
		fprintf(stderr, "tls-server: cannot load %s / %s\n", argv[1], argv[2]);
		return 1;
	}
	return serve_forever("tls-server", serve, false);
}
