/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* A TLS client over OpenSSL for the tests of TLS servers (this process,
 * not under the shim): test-integration-tls.c, test-preload-flow.c.
 * Certificates are not verified (the servers' are self-signed).  Static
 * functions; include test-integration.h first. */

#include <netinet/tcp.h>
#include <poll.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

struct tc {
	int fd;
	SSL *ssl;
};

static SSL_CTX *
client_ctx(void)
{
	static SSL_CTX *ctx;

	if (!ctx) {
		ctx = SSL_CTX_new(TLS_client_method());
		ck_assert_ptr_nonnull(ctx);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	}
	return ctx;
}

static void
tc_connect(struct tc *c, unsigned port)
{
	int one = 1;

	c->fd = it_connect(port);
	ck_assert_int_eq(setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)),
			 0);
	c->ssl = SSL_new(client_ctx());
	ck_assert_ptr_nonnull(c->ssl);
	ck_assert_int_eq(SSL_set_fd(c->ssl, c->fd), 1);
	ck_assert_msg(SSL_connect(c->ssl) == 1, "TLS handshake failed");
}

/* Send data as TLS records of chunk bytes (0: one write). */
static void
tc_send(struct tc *c, const char *data, size_t len, size_t chunk)
{
	while (len) {
		size_t k = chunk && chunk < len ? chunk : len;

		ck_assert_int_eq(SSL_write(c->ssl, data, (int)k), (int)k);
		data += k;
		len -= k;
	}
}

/* Append what one read of the struct tc at src returns; false at the end
 * of the stream (it_read_some() over TLS). */
static bool
tc_read_some(void *src, char **buf, size_t *len, size_t *cap)
{
	struct tc *c = src;
	struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
	int r;

	if (*cap - *len < 4096) {
		*cap = *cap * 2 + 8192;
		*buf = realloc(*buf, *cap);
		ck_assert_ptr_nonnull(*buf);
	}
	if (!SSL_pending(c->ssl))
		ck_assert_msg(poll(&pfd, 1, IT_TIMEOUT_MS) == 1,
			      "no answer from the server");
	r = SSL_read(c->ssl, *buf + *len, (int)(*cap - *len - 1));
	if (r <= 0) {
		ERR_clear_error();
		(*buf)[*len] = '\0';
		return false;
	}
	*len += (size_t)r;
	(*buf)[*len] = '\0';
	return true;
}

/* One response with a Content-Length body; malloc'd. */
static char *
tc_read_response(struct tc *c)
{
	return it_read_response_from(tc_read_some, c);
}

static char *
tc_read_all(struct tc *c, size_t *len_out)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;

	while (tc_read_some(c, &buf, &len, &cap))
		;
	*len_out = len;
	return buf;
}

static void
tc_close(struct tc *c)
{
	SSL_free(c->ssl);
	close(c->fd);
}
