/* SPDX-License-Identifier: Apache-2.0 */
/* A thread-per-connection HTTPS/1.1 server with no tracing code, for the
 * tests of hooks/hook-openssl.c and hooks/hook-gnutls.c.  Built once with
 * OpenSSL (tls-server-openssl, and as a plugin libtls-server-plugin.so
 * that dlopen-main loads at run time) and once with GnuTLS
 * (tls-server-gnutls).
 *
 *   tls-server CERT KEY [--ex] [--bio mem|fd-type|ssl|ssl-out|ssl-plt]
 *                       [--up-ref]
 *                       [--read-size N] [--send again|file|send2|range]
 *                       [--recv packet|seq] [--transport int2] [--timeout]
 *                       [--yield]
 *
 * --ex:       OpenSSL: SSL_read_ex/SSL_write_ex instead of SSL_read/SSL_write
 *             (with --bio ssl: BIO_read_ex/BIO_write_ex on the SSL BIO)
 * --bio mem:  OpenSSL: the session talks to memory BIOs that this program
 *             pumps to and from the socket itself (a transport without an
 *             fd, as event-loop frameworks have)
 * --bio fd-type: OpenSSL: as --bio mem, but the session's BIOs are of this
 *             program's own method of type BIO_TYPE_FD, which hands the
 *             bytes to and from the memory BIOs (h2o's BIO_meth_new(
 *             BIO_TYPE_FD, "h2o_socket"): initialised, no fd set, its
 *             ctrl answers no BIO_C_GET_FD, so SSL_get_fd() gives -1)
 * --bio ssl:  OpenSSL: the session (on the accepted fd, SSL_set_fd) is
 *             used only through an SSL BIO (BIO_f_ssl, BIO_CLOSE), as
 *             `openssl s_server -WWW` does: under a buffer BIO
 *             (BIO_f_buffer), requests read with BIO_gets, responses
 *             written with BIO_write and BIO_flush; with --ex, the SSL BIO
 *             alone, BIO_read_ex and BIO_write_ex.  No SSL_accept: the
 *             handshake runs inside the first read.  (OpenSSL 3.0's SSL
 *             BIO reads and writes without the exported SSL_read_ex and
 *             SSL_write_ex: only the BIO calls show the plaintext.)
 * --bio ssl-out: OpenSSL: SSL_accept and requests read with SSL_read
 *             (SSL_read_ex with --ex), responses written as with --bio ssl
 *             (one unseen response left the next request on the
 *             connection under the context of the one before)
 * --bio ssl-plt: OpenSSL: as --bio ssl, but the SSL BIO is one of this
 *             program's own method (type BIO_TYPE_SSL) whose reads and
 *             writes call SSL_read_ex and SSL_write_ex: as an SSL BIO
 *             that goes through libssl's exported calls would (the shim
 *             must see its bytes once, and never call its ctrl: it
 *             aborts on a BIO_get_ssl(), which this program never makes)
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
 * --send again: GnuTLS: the first push of each response (an interim
 *             "100 Continue" too) fails with EAGAIN (a push function of
 *             this program's), and the send is retried as
 *             gnutls_record_send(s, NULL, 0), as gnutls_record_send(3)
 *             allows
 * --send file: GnuTLS: each response is written to a temporary file and
 *             sent with gnutls_record_send_file() (without kTLS libgnutls
 *             reads it and sends it through gnutls_record_send())
 * --send send2: GnuTLS: responses sent with gnutls_record_send2(s, buf, n,
 *             0, 0) (GnuTLS 3.6.3)
 * --send range: GnuTLS: responses sent with gnutls_record_send_range(),
 *             the length hidden in a range up to 64 bytes longer
 * --recv packet: GnuTLS: requests read with gnutls_record_recv_packet()
 *             (a record at a time, handed out N bytes at a time, then
 *             gnutls_packet_deinit())
 * --recv seq: GnuTLS: requests read with gnutls_record_recv_seq()
 * --transport int2: GnuTLS: the session reads through a copy of the fd
 *             (F_DUPFD_CLOEXEC) and writes through the fd itself
 *             (gnutls_transport_set_int2 with two fds)
 * --timeout:  GnuTLS: reads with a record timeout (gnutls_record_set_timeout,
 *             one minute): libgnutls waits for each record in poll()
 * --yield:   each request head, once read, is followed by a switch to a
 *             coroutine (makecontext, swapcontext) that returns at once
 *             (through uc_link), as a coroutine server's scheduler
 *             switches while a request is in flight
 *
 * Listens on 127.0.0.1 (kernel-chosen port), prints "READY <port>", serves
 * each connection on its own thread: TLS handshake, then request heads
 * read with N-byte reads (keep-alive, Content-Length bodies skipped; a
 * head with "Expect: 100-continue" gets "100 Continue" first).  For
 * each request it prints "REQ <tid> <path> <n> <value>" (n traceparent
 * header lines received, the first one's value or "-"); a path starting
 * with "/block" prints "BLOCK <tid> <path>" and waits for one line on
 * stdin before answering.  The response body is "path=<path>\n"; then
 * "DONE <tid> <path>".  Exits when stdin is closed. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <ucontext.h>
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
static bool opt_ex, opt_mem_bio, opt_up_ref, opt_yield;
#ifdef TLS_GNUTLS
static const char *opt_send = "", *opt_recv = "";
static bool opt_int2, opt_timeout;
#else
static enum { SSL_BIO_NONE, SSL_BIO_ALL, SSL_BIO_OUT, SSL_BIO_PLT } opt_ssl_bio;
#endif

/* ---- TLS backends ---- */

struct tconn {
	int fd;
#ifdef TLS_GNUTLS
	gnutls_session_t s;
	int rfd;             /* --transport int2: the recv fd (0: none) */
	bool refuse_push;    /* --send again: the next push fails */
	gnutls_packet_t pkt; /* --recv packet: the record being handed out */
	size_t pkt_off;      /* ... from here */
#else
	SSL *ssl;
	BIO *rb, *wb; /* --bio mem */
	BIO *io;      /* --bio ssl: the BIO chain, which owns ssl */
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
	if (opt_int2) {
		/* --transport int2: reads through a copy of the fd */
		c->rfd = fcntl(c->fd, F_DUPFD_CLOEXEC, 0);
		if (c->rfd < 0)
			return -1;
		gnutls_transport_set_int2(c->s, c->rfd, c->fd);
	} else {
		gnutls_transport_set_int(c->s, c->fd);
	}
	do
		r = gnutls_handshake(c->s);
	while (r < 0 && !gnutls_error_is_fatal(r));
	if (opt_timeout)
		gnutls_record_set_timeout(c->s, 60 * 1000);
	return r < 0 ? -1 : 0;
}

/* --recv packet: at most n bytes of the current record, the next one
 * received first when none is left. */
static ssize_t
read_packet(struct tconn *c, char *buf, size_t n)
{
	gnutls_datum_t d;
	size_t k;

	if (!c->pkt) {
		ssize_t r;

		do
			r = gnutls_record_recv_packet(c->s, &c->pkt);
		while (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED);
		if (r <= 0) {
			c->pkt = NULL; /* NULL at the end of the stream */
			return -1;
		}
		c->pkt_off = 0;
	}
	gnutls_packet_get(c->pkt, &d, NULL);
	k = d.size - c->pkt_off < n ? d.size - c->pkt_off : n;
	memcpy(buf, d.data + c->pkt_off, k);
	c->pkt_off += k;
	if (c->pkt_off == d.size) {
		gnutls_packet_deinit(c->pkt);
		c->pkt = NULL;
	}
	return k ? (ssize_t)k : -1;
}

static ssize_t
t_read(struct tconn *c, char *buf, size_t n)
{
	unsigned char seq[8];
	ssize_t r;

	if (strcmp(opt_recv, "packet") == 0)
		return read_packet(c, buf, n);
	do
		r = strcmp(opt_recv, "seq") == 0
			    ? gnutls_record_recv_seq(c->s, buf, n, seq)
			    : gnutls_record_recv(c->s, buf, n);
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

/* One send of --send send2/range, or of gnutls_record_send(). */
static ssize_t
t_send(struct tconn *c, const char *buf, size_t n)
{
	gnutls_range_st range = {n, n + 64};

	if (strcmp(opt_send, "send2") == 0)
		return gnutls_record_send2(c->s, buf, n, 0, 0);
	if (strcmp(opt_send, "range") == 0)
		return gnutls_record_send_range(c->s, buf, n, &range);
	return gnutls_record_send(c->s, buf, n);
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
		ssize_t r = t_send(c, buf, n);

		while (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
			r = again ? gnutls_record_send(c->s, NULL, 0)
				  : t_send(c, buf, n);
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
	if (c->pkt) {
		gnutls_packet_deinit(c->pkt);
		c->pkt = NULL;
	}
	if (c->s) {
		(void)gnutls_bye(c->s, GNUTLS_SHUT_WR);
		gnutls_deinit(c->s);
		c->s = NULL;
	}
	if (c->rfd > 0) {
		close(c->rfd);
		c->rfd = 0;
	}
}
#else
static SSL_CTX *ctx;

/* --bio fd-type: the method's calls, on the memory BIO in the data. */
static bool opt_fd_type;
static BIO_METHOD *fd_type_method;

static int
fd_type_read(BIO *b, char *buf, int n)
{
	BIO *m = BIO_get_data(b);
	int r = BIO_read(m, buf, n);

	BIO_clear_retry_flags(b);
	if (r <= 0 && BIO_should_retry(m))
		BIO_set_retry_read(b);
	return r;
}

static int
fd_type_write(BIO *b, const char *buf, int n)
{
	return BIO_write(BIO_get_data(b), buf, n);
}

static long
fd_type_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	(void)b, (void)num, (void)ptr;
	return cmd == BIO_CTRL_FLUSH;
}

/* The memory BIO goes with the session's BIO, as with --bio mem. */
static int
fd_type_destroy(BIO *b)
{
	BIO_free(BIO_get_data(b));
	return 1;
}

static BIO *
fd_type_bio(BIO *m)
{
	BIO *b = BIO_new(fd_type_method);

	if (b) {
		BIO_set_data(b, m);
		BIO_set_init(b, 1);
	}
	return b;
}

static BIO_METHOD *plt_method; /* --bio ssl-plt */

/* --bio ssl-plt: the SSL BIO of this program's, over the session in its
 * data, which it owns (as BIO_CLOSE). */
static int
plt_read(BIO *b, char *buf, size_t n, size_t *got)
{
	int r = SSL_read_ex(BIO_get_data(b), buf, n, got);

	BIO_clear_retry_flags(b);
	return r;
}

static int
plt_write(BIO *b, const char *buf, size_t n, size_t *done)
{
	int r = SSL_write_ex(BIO_get_data(b), buf, n, done);

	BIO_clear_retry_flags(b);
	return r;
}

static long
plt_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	(void)num;
	switch (cmd) {
	case BIO_C_GET_SSL:
		/* this program never asks: the shim must not either (it
		 * follows libssl's own SSL BIO only) */
		fprintf(stderr, "tls-server: ssl-plt: BIO_get_ssl() this program "
				"never made\n");
		abort();
	case BIO_CTRL_FLUSH:
		return 1;
	default:
		return 0;
	}
}

static int
plt_destroy(BIO *b)
{
	SSL_free(BIO_get_data(b));
	BIO_set_data(b, NULL);
	return 1;
}

static int
t_init(const char *cert, const char *key)
{
	ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx || SSL_CTX_use_certificate_file(ctx, cert, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1)
		return -1;
	if (opt_fd_type) {
		fd_type_method = BIO_meth_new(BIO_TYPE_FD, "fd-type");
		if (!fd_type_method ||
		    !BIO_meth_set_read(fd_type_method, fd_type_read) ||
		    !BIO_meth_set_write(fd_type_method, fd_type_write) ||
		    !BIO_meth_set_ctrl(fd_type_method, fd_type_ctrl) ||
		    !BIO_meth_set_destroy(fd_type_method, fd_type_destroy))
			return -1;
	}
	if (opt_ssl_bio == SSL_BIO_PLT) {
		plt_method = BIO_meth_new(BIO_TYPE_SSL, "ssl-plt");
		if (!plt_method || !BIO_meth_set_read_ex(plt_method, plt_read) ||
		    !BIO_meth_set_write_ex(plt_method, plt_write) ||
		    !BIO_meth_set_ctrl(plt_method, plt_ctrl) ||
		    !BIO_meth_set_destroy(plt_method, plt_destroy))
			return -1;
	}
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
		if (opt_fd_type) {
			BIO *rd = fd_type_bio(c->rb), *wr = fd_type_bio(c->wb);

			if (!rd || !wr)
				return -1;
			SSL_set_bio(c->ssl, rd, wr);
		} else {
			SSL_set_bio(c->ssl, c->rb, c->wb);
		}
		SSL_set_accept_state(c->ssl);
		do
			r = mem_pump(c, SSL_do_handshake(c->ssl));
		while (r == 1);
		return r;
	}
	if (SSL_set_fd(c->ssl, c->fd) != 1)
		return -1;
	if (opt_ssl_bio) {
		BIO *sb = BIO_new(plt_method ? plt_method : BIO_f_ssl());

		if (!sb)
			return -1;
		SSL_set_accept_state(c->ssl);
		if (plt_method) {
			BIO_set_data(sb, c->ssl);
			BIO_set_init(sb, 1);
		} else {
			(void)BIO_set_ssl(sb, c->ssl, BIO_CLOSE);
		}
		if (opt_ex) {
			c->io = sb;
		} else {
			c->io = BIO_new(BIO_f_buffer());
			if (!c->io) {
				BIO_free(sb);
				return -1;
			}
			(void)BIO_push(c->io, sb);
		}
		if (opt_ssl_bio != SSL_BIO_OUT)
			return 0;
	}
	return SSL_accept(c->ssl) == 1 ? 0 : -1;
}

/* --bio ssl: a read through the BIO chain. */
static ssize_t
ssl_bio_read(struct tconn *c, char *buf, size_t n)
{
	size_t got = 0;
	int r;

	if (opt_ex)
		r = BIO_read_ex(c->io, buf, n, &got) == 1 ? (int)got : -1;
	else if (n > 1) /* a line at most, as s_server -WWW reads */
		r = BIO_gets(c->io, buf, (int)n);
	else
		r = BIO_read(c->io, buf, 1);
	return r > 0 ? r : -1;
}

/* --bio ssl: a write through the BIO chain, flushed. */
static int
ssl_bio_write(struct tconn *c, const char *buf, size_t n)
{
	while (n) {
		size_t done = 0;
		int r;

		if (opt_ex)
			r = BIO_write_ex(c->io, buf, n, &done) == 1 ? (int)done : -1;
		else
			r = BIO_write(c->io, buf, (int)n);
		if (r <= 0)
			return -1;
		buf += r;
		n -= (size_t)r;
	}
	return BIO_flush(c->io) == 1 ? 0 : -1;
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
	if (opt_ssl_bio && opt_ssl_bio != SSL_BIO_OUT)
		return ssl_bio_read(c, buf, n);
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
	if (opt_ssl_bio)
		return ssl_bio_write(c, buf, n);
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
	if (c->io) {
		/* frees the session too (BIO_CLOSE), from inside libssl */
		(void)SSL_shutdown(c->ssl);
		if (c->extra)
			SSL_free(c->ssl);
		BIO_free_all(c->io);
		c->io = NULL;
		c->ssl = NULL;
		c->extra = false;
	}
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

/* --yield: a round trip through a coroutine that does nothing; both
 * switches are hooked (the coroutine's start, and the return to the
 * swapcontext() frame through uc_link). */
static void
co_nothing(void)
{
}

static int
yield_once(void)
{
	ucontext_t self, co;
	char *stack = malloc(64 * 1024);

	if (!stack || getcontext(&co) < 0) {
		free(stack);
		return -1;
	}
	co.uc_stack.ss_sp = stack;
	co.uc_stack.ss_size = 64 * 1024;
	co.uc_link = &self;
	makecontext(&co, co_nothing, 0);
	if (swapcontext(&self, &co) < 0) {
		free(stack);
		return -1;
	}
	free(stack);
	return 0;
}

/* The read of http1-reader.h. */
static ssize_t
conn_read(void *c, char *buf, size_t n)
{
	return t_read(c, buf, n);
}

/* The interim response of http1-reader.h, written as a response is. */
static int
conn_continue(void *c)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

	return t_write(c, cont, sizeof(cont) - 1);
}

static void *
serve(void *arg)
{
	struct tconn c = {.fd = (int)(long)arg};
	long tid = syscall(SYS_gettid);
	struct http1_conn h = {.read = conn_read,
			       .io = &c,
			       .read_size = read_size,
			       .cont = conn_continue,
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
		if (opt_yield && yield_once() < 0) {
			serve_say("YIELD-FAILED %ld\n", tid);
			break;
		}
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
#ifndef TLS_GNUTLS
		else if (strcmp(argv[i], "--bio") == 0 && i + 1 < argc &&
			 strcmp(argv[i + 1], "ssl") == 0 && ++i)
			opt_ssl_bio = SSL_BIO_ALL;
		else if (strcmp(argv[i], "--bio") == 0 && i + 1 < argc &&
			 strcmp(argv[i + 1], "ssl-out") == 0 && ++i)
			opt_ssl_bio = SSL_BIO_OUT;
		else if (strcmp(argv[i], "--bio") == 0 && i + 1 < argc &&
			 strcmp(argv[i + 1], "ssl-plt") == 0 && ++i)
			opt_ssl_bio = SSL_BIO_PLT;
		else if (strcmp(argv[i], "--bio") == 0 && i + 1 < argc &&
			 strcmp(argv[i + 1], "fd-type") == 0 && ++i)
			opt_mem_bio = opt_fd_type = true;
#endif
		else if (strcmp(argv[i], "--up-ref") == 0)
			opt_up_ref = true;
		else if (strcmp(argv[i], "--yield") == 0)
			opt_yield = true;
		else if (strcmp(argv[i], "--read-size") == 0 && i + 1 < argc)
			read_size = (size_t)strtoul(argv[++i], NULL, 10);
#ifdef TLS_GNUTLS
		else if (strcmp(argv[i], "--send") == 0 && i + 1 < argc &&
			 (strcmp(argv[i + 1], "again") == 0 ||
			  strcmp(argv[i + 1], "file") == 0 ||
			  strcmp(argv[i + 1], "send2") == 0 ||
			  strcmp(argv[i + 1], "range") == 0))
			opt_send = argv[++i];
		else if (strcmp(argv[i], "--recv") == 0 && i + 1 < argc &&
			 (strcmp(argv[i + 1], "packet") == 0 ||
			  strcmp(argv[i + 1], "seq") == 0))
			opt_recv = argv[++i];
		else if (strcmp(argv[i], "--transport") == 0 && i + 1 < argc &&
			 strcmp(argv[i + 1], "int2") == 0 && ++i)
			opt_int2 = true;
		else if (strcmp(argv[i], "--timeout") == 0)
			opt_timeout = true;
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
