/* SPDX-License-Identifier: Apache-2.0 */
/* A thread-per-connection HTTPS/1.1 server with no tracing code, for the
 * tests of hooks/hook-openssl.c and hooks/hook-gnutls.c.  Built once with
 * OpenSSL (tls-server-openssl, and as a plugin libtls-server-plugin.so
 * that dlopen-main loads at run time) and once with GnuTLS
 * (tls-server-gnutls).
 *
 *   tls-server CERT KEY [--ex] [--bio mem] [--read-size N]
 *
 * --ex:       OpenSSL: SSL_read_ex/SSL_write_ex instead of SSL_read/SSL_write
 * --bio mem:  OpenSSL: the session talks to memory BIOs that this program
 *             pumps to and from the socket itself (a transport without an
 *             fd, as event-loop frameworks have)
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

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef TLS_GNUTLS
#include <gnutls/gnutls.h>
#else
#include <openssl/err.h>
#include <openssl/ssl.h>
#endif

#define BUF_MAX (64 * 1024)

static size_t read_size = 4096;
static bool opt_ex, opt_mem_bio;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static sem_t go;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
say(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&out_lock);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
	pthread_mutex_unlock(&out_lock);
}

/* ---- TLS backends ---- */

struct tconn {
	int fd;
#ifdef TLS_GNUTLS
	gnutls_session_t s;
#else
	SSL *ssl;
	BIO *rb, *wb; /* --bio mem */
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

static int
t_write(struct tconn *c, const char *buf, size_t n)
{
	while (n) {
		ssize_t r = gnutls_record_send(c->s, buf, n);

		if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
			continue;
		if (r <= 0)
			return -1;
		buf += r;
		n -= (size_t)r;
	}
	return 0;
}

static void
t_close(struct tconn *c)
{
	if (c->s) {
		(void)gnutls_bye(c->s, GNUTLS_SHUT_WR);
		gnutls_deinit(c->s);
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
t_accept(struct tconn *c)
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
		SSL_free(c->ssl);
	}
}
#endif

/* ---- HTTP ---- */

static const char *
find_head_end(const char *buf, size_t len)
{
	size_t i;

	for (i = 3; i < len; i++)
		if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' &&
		    buf[i - 3] == '\r')
			return buf + i + 1;
	return NULL;
}

/* Content-Length, and the traceparent lines (count, first value). */
static size_t
scan_head(const char *head, size_t len, unsigned *n_tp, char *tp, size_t tp_cap)
{
	const char *p = head, *end = head + len;
	size_t cl = 0;

	*n_tp = 0;
	snprintf(tp, tp_cap, "-");
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l;

		if (!nl)
			break;
		l = (size_t)(nl - p);
		if (l > 15 && strncasecmp(p, "content-length:", 15) == 0)
			cl = (size_t)strtoul(p + 15, NULL, 10);
		if (l > 12 && strncasecmp(p, "traceparent:", 12) == 0) {
			const char *v = p + 12;
			size_t vl;

			while (*v == ' ')
				v++;
			vl = (size_t)(nl - v);
			if (vl && v[vl - 1] == '\r')
				vl--;
			if ((*n_tp)++ == 0 && vl < tp_cap) {
				memcpy(tp, v, vl);
				tp[vl] = '\0';
			}
		}
		p = nl + 1;
	}
	return cl;
}

static void *
serve(void *arg)
{
	struct tconn c = {.fd = (int)(long)arg};
	long tid = syscall(SYS_gettid);
	char *buf = malloc(BUF_MAX);
	size_t len = 0;

	say("CONN %ld\n", tid);
	if (!buf || t_accept(&c) < 0) {
		say("HANDSHAKE-FAILED %ld\n", tid);
		goto out;
	}
	for (;;) {
		const char *end = find_head_end(buf, len);
		char path[1024], resp[1400], tp[128];
		size_t head_len, body, sp, n;
		const char *s1, *s2;
		unsigned n_tp;
		ssize_t r;

		if (!end) {
			if (len == BUF_MAX)
				break;
			n = read_size < BUF_MAX - len ? read_size : BUF_MAX - len;
			r = t_read(&c, buf + len, n);
			if (r <= 0)
				break;
			len += (size_t)r;
			continue;
		}
		head_len = (size_t)(end - buf);
		body = scan_head(buf, head_len, &n_tp, tp, sizeof(tp));
		while (len < head_len + body && len < BUF_MAX) {
			r = t_read(&c, buf + len,
				   BUF_MAX - len < read_size ? BUF_MAX - len
							     : read_size);
			if (r <= 0)
				goto out;
			len += (size_t)r;
		}
		s1 = memchr(buf, ' ', head_len);
		s2 = s1 ? memchr(s1 + 1, ' ', head_len - (size_t)(s1 + 1 - buf)) : NULL;
		sp = s1 && s2 ? (size_t)(s2 - s1 - 1) : 0;
		if (sp >= sizeof(path))
			sp = sizeof(path) - 1;
		memcpy(path, s1 ? s1 + 1 : "", sp);
		path[sp] = '\0';
		if (head_len + body > len)
			break;
		memmove(buf, buf + head_len + body, len - head_len - body);
		len -= head_len + body;

		say("REQ %ld %s %u %s\n", tid, path, n_tp, tp);
		if (strncmp(path, "/block", 6) == 0) {
			say("BLOCK %ld %s\n", tid, path);
			while (sem_wait(&go) < 0)
				;
		}
		n = (size_t)snprintf(
			resp, sizeof(resp),
			"HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\npath=%s\n",
			strlen(path) + 6, path);
		if (t_write(&c, resp, n) < 0)
			break;
		say("DONE %ld %s\n", tid, path);
	}
out:
	t_close(&c);
	close(c.fd);
	free(buf);
	say("CLOSED %ld\n", tid);
	return NULL;
}

static void *
control(void *arg)
{
	char line[256];

	(void)arg;
	/* One line on stdin releases one blocked request; EOF ends it all. */
	while (fgets(line, sizeof(line), stdin))
		sem_post(&go);
	exit(0);
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
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);
	pthread_t th;
	int ls, i, one = 1;

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
		else if (strcmp(argv[i], "--read-size") == 0 && i + 1 < argc)
			read_size = (size_t)strtoul(argv[++i], NULL, 10);
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
	sem_init(&go, 0, 0);
	ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(ls, 64) < 0 || getsockname(ls, (struct sockaddr *)&a, &al) < 0) {
		perror("tls-server: listen");
		return 1;
	}
	pthread_create(&th, NULL, control, NULL);
	say("READY %d\n", ntohs(a.sin_port));
	for (;;) {
		int fd = accept(ls, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			perror("tls-server: accept");
			return 1;
		}
		if (pthread_create(&th, NULL, serve, (void *)(long)fd) != 0)
			close(fd);
		else
			pthread_detach(th);
	}
}
