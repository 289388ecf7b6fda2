/* SPDX-License-Identifier: Apache-2.0 */
/* tls-clear: a server session over memory BIOs (no fd: the shim follows it
 * by its SSL pointer) reused for a new client with SSL_clear(), as
 * SSL_clear(3) documents (hooks/hook-openssl.c, "Reuse").  Both sides in
 * this process, on one thread, no network; no tracing code.  Prints the
 * context this thread publishes (ctxobs.h) after each step, with the
 * attribute values:
 *
 *   <step>: trace=<32 hex>|- span=<16 hex>|- [a<key>=<value> ...]
 *
 * then "DONE".  Connection 2's request carries trace 2222...; connection
 * 1's (trace 1111..., path /one) is, by mode:
 *   clean       answered
 *   unanswered  read, never answered
 *   cut         its head cut short (no empty line)
 *   implicit    answered; the server never calls SSL_do_handshake, its
 *               first SSL_read runs the handshake (and libssl's own
 *               SSL_clear) for both connections
 * Exits 1 on a failure ("FAILED <what>"). */
#include "config.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ctxobs.h"
#include "tls-selfsigned.h"

#define TP1 "00-11111111111111111111111111111111-1111111111111111-01"
#define TP2 "00-22222222222222222222222222222222-2222222222222222-01"

/* the context plus its attribute values (printable ones) */
static const char *
shown(void)
{
	static char out[1024];
	const struct otel_thread_ctx_record *r = ctxobs_record();
	size_t n, i;
	n = (size_t)snprintf(out, sizeof out, "%s", ctxobs_shown());
	if (r && r->valid == 1)
		for (i = 0; i + 2 <= r->attrs_data_size && n < sizeof out - 80;) {
			unsigned k = r->attrs_data[i], l = r->attrs_data[i + 1];
			n += (size_t)snprintf(out + n, sizeof out - n, " a%u=%.*s", k,
					      (int)(l < 40 ? l : 40),
					      (const char *)r->attrs_data + i + 2);
			i += 2 + l;
		}
	return out;
}

static void
fail(const char *w)
{
	printf("FAILED %s\n", w);
	ERR_print_errors_fp(stdout);
	exit(1);
}

static SSL_CTX *sctx, *cctx;
static SSL *srv, *cli;
static BIO *s_in, *s_out, *c_in, *c_out; /* each side: rbio, wbio */

/* move pending bytes between the two sides; returns bytes moved */
static int
pump(void)
{
	char buf[16384];
	int n, moved = 0;
	while ((n = BIO_read(s_out, buf, sizeof buf)) > 0) {
		BIO_write(c_in, buf, n);
		moved += n;
	}
	while ((n = BIO_read(c_out, buf, sizeof buf)) > 0) {
		BIO_write(s_in, buf, n);
		moved += n;
	}
	return moved;
}

static void
new_client(void)
{
	cli = SSL_new(cctx);
	c_in = BIO_new(BIO_s_mem());
	c_out = BIO_new(BIO_s_mem());
	BIO_set_mem_eof_return(c_in, -1);
	SSL_set_bio(cli, c_in, c_out);
	SSL_set_connect_state(cli);
}

static void
handshake(void)
{
	int i, a = 0, b = 0;
	for (i = 0; i < 50 && (a != 1 || b != 1); i++) {
		if (a != 1)
			a = SSL_do_handshake(srv);
		if (b != 1)
			b = SSL_do_handshake(cli);
		pump();
	}
	if (a != 1 || b != 1)
		fail("handshake");
}

/* the server never calls SSL_do_handshake: its first SSL_read runs the
 * handshake (and libssl's internal SSL_clear) and returns the request */
static void
implicit_exchange(const char *req, const char *what)
{
	char buf[4096];
	int i, r = -1, b = 0, sent = 0;
	for (i = 0; i < 50 && r <= 0; i++) {
		r = SSL_read(srv, buf, sizeof buf - 1);
		if (b != 1)
			b = SSL_do_handshake(cli);
		if (b == 1 && !sent) {
			SSL_write(cli, req, (int)strlen(req));
			sent = 1;
		}
		pump();
	}
	if (r <= 0)
		fail("implicit read");
	printf("%-34s %s\n", what, shown());
}

static void
client_send(const char *req)
{
	if (SSL_write(cli, req, (int)strlen(req)) != (int)strlen(req))
		fail("client write");
	pump();
}

static void
server_read(const char *what)
{
	char buf[4096];
	int r = SSL_read(srv, buf, sizeof buf - 1);
	if (r <= 0)
		fail("server read");
	printf("%-34s %s\n", what, shown());
}

static void
server_answer(const char *what)
{
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	if (SSL_write(srv, resp, (int)strlen(resp)) != (int)strlen(resp))
		fail("server write");
	pump();
	printf("%-34s %s\n", what, shown());
}

static void
drop_client(void)
{
	SSL_free(cli); /* the peer goes away (no close_notify) */
	cli = NULL;
}

/* The server SSL reset for a new client, as SSL_clear(3) documents. */
static void
reuse_server(void)
{
	if (SSL_clear(srv) != 1)
		fail("SSL_clear");
	(void)BIO_reset(s_in);
	(void)BIO_reset(s_out);
	SSL_set_accept_state(srv);
	printf("%-34s %s\n", "after SSL_clear:", shown());
}

/* Connection 2 answered and ended, the server SSL freed. */
static int
finish(void)
{
	server_answer("conn2 answered:");
	drop_client();
	SSL_free(srv);
	printf("%-34s %s\n", "server SSL freed:", shown());
	SSL_CTX_free(sctx);
	SSL_CTX_free(cctx);
	printf("DONE\n");
	return 0;
}

int
main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "unanswered";
	sctx = SSL_CTX_new(TLS_server_method());
	cctx = SSL_CTX_new(TLS_client_method());
	if (!tls_self_signed(sctx))
		fail("cert");
	SSL_CTX_set_verify(cctx, SSL_VERIFY_NONE, NULL);

	srv = SSL_new(sctx);
	s_in = BIO_new(BIO_s_mem());
	s_out = BIO_new(BIO_s_mem());
	BIO_set_mem_eof_return(s_in, -1);
	SSL_set_bio(srv, s_in, s_out);
	SSL_set_accept_state(srv);

	/* ---- connection 1 ---- */
	new_client();
	if (strcmp(mode, "implicit") == 0) {
		implicit_exchange("GET /one HTTP/1.1\r\nHost: x\r\ntraceparent: " TP1
				  "\r\n\r\n",
				  "conn1 read (implicit handshake):");
		server_answer("conn1 answered:");
		drop_client();
		reuse_server();
		new_client();
		implicit_exchange("GET /two HTTP/1.1\r\nHost: x\r\ntraceparent: " TP2
				  "\r\n\r\n",
				  "conn2 read (implicit handshake):");
		return finish();
	}
	handshake();
	printf("%-34s %s\n", "conn1 handshake done:", shown());
	if (strcmp(mode, "cut") == 0) {
		client_send("GET /one HTTP/1.1\r\nHost: x\r\ntraceparent: " TP1 "\r\n");
		server_read("conn1 read (head cut):");
	} else {
		client_send("GET /one HTTP/1.1\r\nHost: x\r\ntraceparent: " TP1
			    "\r\n\r\n");
		server_read("conn1 read:");
		if (strcmp(mode, "clean") == 0)
			server_answer("conn1 answered:");
	}
	drop_client();

	reuse_server();

	/* ---- connection 2 on the same SSL* ---- */
	new_client();
	handshake();
	printf("%-34s %s\n", "conn2 handshake done:", shown());
	client_send("GET /two HTTP/1.1\r\nHost: x\r\ntraceparent: " TP2 "\r\n\r\n");
	server_read("conn2 read (expect trace 2222):");
	return finish();
}
