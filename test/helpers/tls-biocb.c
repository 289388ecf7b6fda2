/* SPDX-License-Identifier: Apache-2.0 */
/* What a BIO callback of the application's sees (BIO_set_callback_ex()),
 * for the test that it is the same under the shim as without it
 * (hooks/hook-openssl.c, ossl_fd(); test-integration-tls.c).  No tracing
 * code.
 *
 *   tls-biocb CERT KEY
 *
 * Two HTTPS/1.1 exchanges over 127.0.0.1 inside this process: a server on
 * the main thread (an accept()ed fd, so the shim follows it) and a client
 * on another thread (a connect()ed one, which the shim passes through).
 * The first uses socket BIOs (SSL_set_fd), the second fd BIOs
 * (BIO_new_fd() and SSL_set_bio()).  Each side puts a callback on its
 * session's read BIO before the handshake and then calls, in order:
 * SSL_accept or SSL_connect, SSL_peek (server), SSL_read, SSL_write,
 * SSL_up_ref and SSL_free (not the last reference), SSL_free.  The server
 * reads a request head carrying the traceparent given for the exchange,
 * and writes its response through an SSL BIO (BIO_f_ssl) with a callback
 * of its own (not followed: hooks/hook-openssl.c, "The SSL BIO").
 * Prints, per exchange and side, the callback's calls:
 *
 *   <socket|fd> <server|client> calls=N ctrl=N get_fd=N
 *   <socket|fd> server ssl-bio calls=N ctrl=N
 *
 * (all of them, the BIO_CB_CTRL ones, the BIO_C_GET_FD ones among those),
 * then "DONE".  Exits 1 on any failure ("FAILED <what>"). */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/ssl.h>

#include "listen-loopback.h"
#include "tls-exchange.h"

struct counts {
	int calls, ctrl, get_fd;
};

struct exchange {
	bool fd_bio;
	const char *traceparent;
	unsigned port;
	struct counts server, client, ssl_bio;
};

static SSL_CTX *server_ctx, *client_ctx;

static long
count(BIO *b,
      int oper,
      const char *argp,
      size_t len,
      int argi,
      long argl,
      int ret,
      size_t *processed)
{
	struct counts *c = (struct counts *)BIO_get_callback_arg(b);

	(void)argp;
	(void)len;
	(void)argl;
	(void)processed;
	c->calls++;
	if ((oper & ~BIO_CB_RETURN) == BIO_CB_CTRL) {
		c->ctrl++;
		if (argi == BIO_C_GET_FD)
			c->get_fd++;
	}
	return ret;
}

/* A session on fd with the counting callback on its read BIO. */
static SSL *
session(SSL_CTX *ctx, int fd, bool fd_bio, struct counts *c)
{
	SSL *s = SSL_new(ctx);
	BIO *b;

	if (!s)
		fail("SSL_new");
	if (fd_bio) {
		b = BIO_new_fd(fd, BIO_NOCLOSE);
		if (!b)
			fail("BIO_new_fd");
		SSL_set_bio(s, b, b);
	} else if (SSL_set_fd(s, fd) != 1) {
		fail("SSL_set_fd");
	}
	b = SSL_get_rbio(s);
	BIO_set_callback_arg(b, (char *)c);
	BIO_set_callback_ex(b, count);
	return s;
}

static void *
client(void *arg)
{
	struct exchange *x = arg;
	struct sockaddr_in a = {.sin_family = AF_INET};
	char req[256];
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), n;
	SSL *s;

	a.sin_port = htons((uint16_t)x->port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		fail("connect");
	s = session(client_ctx, fd, x->fd_bio, &x->client);
	if (SSL_connect(s) != 1)
		fail("SSL_connect");
	n = snprintf(req, sizeof(req),
		     "GET /x HTTP/1.1\r\nHost: x\r\ntraceparent: %s\r\n\r\n",
		     x->traceparent);
	if (SSL_write(s, req, n) != n)
		fail("client SSL_write");
	read_head(s);
	finish(s);
	close(fd);
	return NULL;
}

static void
serve(int ls, struct exchange *x)
{
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	int len = (int)strlen(resp), fd;
	pthread_t t;
	char c;
	SSL *s;
	BIO *sb;

	if (pthread_create(&t, NULL, client, x) != 0)
		fail("pthread_create");
	fd = accept(ls, NULL, NULL);
	if (fd < 0)
		fail("accept");
	s = session(server_ctx, fd, x->fd_bio, &x->server);
	if (SSL_accept(s) != 1)
		fail("SSL_accept");
	if (SSL_peek(s, &c, 1) != 1)
		fail("SSL_peek");
	read_head(s);
	sb = BIO_new(BIO_f_ssl());
	if (!sb || BIO_set_ssl(sb, s, BIO_NOCLOSE) != 1)
		fail("BIO_f_ssl");
	BIO_set_callback_arg(sb, (char *)&x->ssl_bio);
	BIO_set_callback_ex(sb, count);
	if (BIO_write(sb, resp, len) != len)
		fail("server BIO_write");
	BIO_free(sb);
	finish(s);
	close(fd);
	pthread_join(t, NULL);
}

static void
report(const struct exchange *x)
{
	const char *kind = x->fd_bio ? "fd" : "socket";

	printf("%s server calls=%d ctrl=%d get_fd=%d\n", kind, x->server.calls,
	       x->server.ctrl, x->server.get_fd);
	printf("%s client calls=%d ctrl=%d get_fd=%d\n", kind, x->client.calls,
	       x->client.ctrl, x->client.get_fd);
	printf("%s server ssl-bio calls=%d ctrl=%d\n", kind, x->ssl_bio.calls,
	       x->ssl_bio.ctrl);
}

int
main(int argc, char **argv)
{
	struct exchange x[2] = {
		{.fd_bio = false,
		 .traceparent =
			 "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		{.fd_bio = true,
		 .traceparent =
			 "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"},
	};
	struct sockaddr_in a;
	int ls, i;

	if (argc != 3) {
		fprintf(stderr, "usage: tls-biocb CERT KEY\n");
		return 64;
	}
	server_ctx = SSL_CTX_new(TLS_server_method());
	client_ctx = SSL_CTX_new(TLS_client_method());
	if (!server_ctx || !client_ctx ||
	    SSL_CTX_use_certificate_file(server_ctx, argv[1], SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_use_PrivateKey_file(server_ctx, argv[2], SSL_FILETYPE_PEM) != 1)
		fail("credentials");
	SSL_CTX_set_verify(client_ctx, SSL_VERIFY_NONE, NULL);
	ls = listen_loopback(4, SOCK_CLOEXEC, &a);
	if (ls < 0)
		fail("listen");
	for (i = 0; i < 2; i++) {
		x[i].port = ntohs(a.sin_port);
		serve(ls, &x[i]);
		report(&x[i]);
	}
	printf("DONE\n");
	SSL_CTX_free(server_ctx);
	SSL_CTX_free(client_ctx);
	return 0;
}
