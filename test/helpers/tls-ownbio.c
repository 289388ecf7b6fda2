/* SPDX-License-Identifier: Apache-2.0 */
/* tls-ownbio: TLS sessions whose transport is a descriptor BIO of the
 * application's own method (BIO_meth_new(BIO_get_new_index() |
 * BIO_TYPE_DESCRIPTOR ...), a socket BIO of its own making, e.g. to count
 * bytes).  Its ctrl is the application's code: the shim must not call it
 * (hooks/hook-openssl.c, ossl_fd(), used to ask it for BIO_C_GET_FD), so
 * it sees the same calls with the shim as without (test-preload-host.c).
 * No tracing code.
 *
 * One HTTPS/1.1 exchange over 127.0.0.1 inside this process, with a key
 * and a self-signed certificate made in memory: a server on the main
 * thread (an accept()ed fd, which the shim follows) and a client on
 * another thread, both on such a BIO.  Each side calls SSL_accept or
 * SSL_connect, SSL_write and SSL_read (the client's request carries a
 * traceparent), SSL_up_ref and SSL_free, SSL_free.  Prints the calls each
 * side's ctrl got:
 *
 *   <server|client> ctrl=N get_fd=N
 *
 * then "DONE".  Exits 1 on any failure ("FAILED <what>"). */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "listen-loopback.h"
#include "tls-exchange.h"
#include "tls-selfsigned.h"

struct side {
	int fd;
	int ctrl, get_fd;
};

static BIO_METHOD *own_method;
static SSL_CTX *server_ctx, *client_ctx;
static struct side server_side, client_side;
static unsigned port;

static int
own_write(BIO *b, const char *data, int n)
{
	struct side *s = BIO_get_data(b);

	return (int)write(s->fd, data, (size_t)n);
}

static int
own_read(BIO *b, char *data, int n)
{
	struct side *s = BIO_get_data(b);

	return (int)read(s->fd, data, (size_t)n);
}

/* Counts every call; answers BIO_C_GET_FD as a socket BIO would, so that
 * SSL_get_fd() works for the application (and for whoever else asks). */
static long
own_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	struct side *s = BIO_get_data(b);

	(void)num;
	s->ctrl++;
	switch (cmd) {
	case BIO_C_GET_FD:
		s->get_fd++;
		if (ptr)
			*(int *)ptr = s->fd;
		return s->fd;
	case BIO_CTRL_FLUSH:
		return 1;
	default:
		return 0;
	}
}

static int
own_create(BIO *b)
{
	BIO_set_init(b, 1);
	return 1;
}

/* A session on fd through the application's BIO. */
static SSL *
session(SSL_CTX *ctx, int fd, struct side *side)
{
	SSL *s = SSL_new(ctx);
	BIO *b = BIO_new(own_method);

	if (!s || !b)
		fail("SSL_new");
	side->fd = fd;
	BIO_set_data(b, side);
	SSL_set_bio(s, b, b);
	return s;
}

static void *
client(void *arg)
{
	static const char req[] =
		"GET /x HTTP/1.1\r\nHost: x\r\n"
		"traceparent: "
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\n"
		"\r\n";
	struct sockaddr_in a = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	SSL *s;

	(void)arg;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		fail("connect");
	s = session(client_ctx, fd, &client_side);
	if (SSL_connect(s) != 1)
		fail("SSL_connect");
	if (SSL_write(s, req, (int)strlen(req)) != (int)strlen(req))
		fail("client SSL_write");
	read_head(s);
	finish(s);
	close(fd);
	return NULL;
}

int
main(void)
{
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	struct sockaddr_in a;
	pthread_t t;
	int ls, fd;
	SSL *s;

	own_method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK |
					  BIO_TYPE_DESCRIPTOR,
				  "counting socket");
	if (!own_method || !BIO_meth_set_write(own_method, own_write) ||
	    !BIO_meth_set_read(own_method, own_read) ||
	    !BIO_meth_set_ctrl(own_method, own_ctrl) ||
	    !BIO_meth_set_create(own_method, own_create))
		fail("BIO_meth_new");
	server_ctx = SSL_CTX_new(TLS_server_method());
	client_ctx = SSL_CTX_new(TLS_client_method());
	if (!server_ctx || !client_ctx)
		fail("SSL_CTX_new");
	if (!tls_self_signed(server_ctx))
		fail("certificate");
	SSL_CTX_set_verify(client_ctx, SSL_VERIFY_NONE, NULL);
	ls = listen_loopback(4, SOCK_CLOEXEC, &a);
	if (ls < 0)
		fail("listen");
	port = ntohs(a.sin_port);
	if (pthread_create(&t, NULL, client, NULL) != 0)
		fail("pthread_create");
	fd = accept(ls, NULL, NULL);
	if (fd < 0)
		fail("accept");
	s = session(server_ctx, fd, &server_side);
	if (SSL_accept(s) != 1)
		fail("SSL_accept");
	read_head(s);
	if (SSL_write(s, resp, (int)strlen(resp)) != (int)strlen(resp))
		fail("server SSL_write");
	finish(s);
	close(fd);
	pthread_join(t, NULL);
	printf("server ctrl=%d get_fd=%d\n", server_side.ctrl, server_side.get_fd);
	printf("client ctrl=%d get_fd=%d\n", client_side.ctrl, client_side.get_fd);
	printf("DONE\n");
	close(ls);
	SSL_CTX_free(server_ctx);
	SSL_CTX_free(client_ctx);
	BIO_meth_free(own_method);
	return 0;
}
