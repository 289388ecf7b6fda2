/* SPDX-License-Identifier: Apache-2.0 */
/* tls-resume-gnutls MODE: a GnuTLS server whose response to a first
 * request is interrupted and finished another way; the request after it
 * prints "REQ2 <ctx>", which must be its own context.  A client process
 * of its own (anonymous credentials, TLS 1.2; early: a certificate,
 * TLS 1.3).
 *
 *   hints  the response ("103 Early Hints", its head longer than the 64
 *          bytes hook-gnutls.c keeps of an interrupted send, and the final
 *          response, in one buffer) is interrupted by its push function
 *          (EAGAIN) and resumed with gnutls_record_send(s, NULL, 0) (old:
 *          the response was taken for the interim one alone, the request
 *          it answered stayed current, and request 2 was queued behind it,
 *          with its context).
 *   jump   the response, sent with gnutls_record_send(), is left by a
 *          longjmp out of its push function (a timeout's siglongjmp out of
 *          a blocking write) and sent again with
 *          gnutls_record_send2(s, buf, n, 0, 0), which flushes the record
 *          left pending (old: the send's marker that its send2 call is its
 *          own, gt_sending in hook-gnutls.c, outlived the jump, and the
 *          send2 of the same session was taken for that call and not
 *          followed: the same outcome).
 *   early  TLS 1.3 with a certificate: request 1 on a first connection;
 *          the client resumes its session on a second one and sends
 *          request 2 as 0-RTT data (gnutls_record_send_early_data), which
 *          the server reads with gnutls_record_recv_early_data after the
 *          handshake (old: not hooked, request 2 had no context). */
#include "ctxobs.h"
#include "listen-loopback.h"
#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define T(n)  "0af7651916cd43dd8448eb211c80319" #n
#define TP(n) "traceparent: 00-" T(n) "-b7ad6b716920333" #n "-01\r\n"

static gnutls_session_t S;
static int fd, fail_next, jump_next;
static sigjmp_buf jb;

static ssize_t
push(gnutls_transport_ptr_t p, const void *d, size_t n)
{
	if (fail_next) {
		fail_next = 0;
		gnutls_transport_set_errno(S, EAGAIN);
		return -1;
	}
	if (jump_next) {
		/* nothing written: the record stays pending in libgnutls */
		jump_next = 0;
		siglongjmp(jb, 1);
	}
	return send((int)(intptr_t)p, d, n, 0);
}

static void
die(const char *w)
{
	fprintf(stderr, "%s\n", w);
	exit(1);
}

static void
recv_head(void)
{
	char b[2048];
	size_t n = 0;
	ssize_t r;

	while (!memmem(b, n, "\r\n\r\n", 4)) {
		r = gnutls_record_recv(S, b + n, sizeof(b) - n);
		if (r <= 0)
			die("recv");
		n += r;
	}
}

static const char hints[] = "HTTP/1.1 103 Early Hints\r\n"
			    "Link: </style.css>; rel=preload; as=style\r\n\r\n"
			    "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";

static int
loopback_connect(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	int s = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(s, (void *)&a, sizeof(a)) < 0)
		die("connect");
	return s;
}

static void
client(int port)
{
	gnutls_session_t c;
	gnutls_anon_client_credentials_t ac;
	int s = loopback_connect(port);
	char b[4096];
	static const char r1[] = "GET /one HTTP/1.1\r\nHost: x\r\n" TP(1) "\r\n";
	static const char r2[] = "GET /two HTTP/1.1\r\nHost: x\r\n" TP(2) "\r\n";

	gnutls_anon_allocate_client_credentials(&ac);
	gnutls_init(&c, GNUTLS_CLIENT);
	gnutls_priority_set_direct(c, "NORMAL:-VERS-TLS1.3:+ANON-ECDH:+ANON-DH", NULL);
	gnutls_credentials_set(c, GNUTLS_CRD_ANON, ac);
	gnutls_transport_set_int(c, s);
	if (gnutls_handshake(c) < 0)
		die("client hs");
	gnutls_record_send(c, r1, sizeof(r1) - 1);
	gnutls_record_recv(c, b, sizeof(b)); /* (103 +) 200 */
	gnutls_record_send(c, r2, sizeof(r2) - 1);
	gnutls_record_recv(c, b, sizeof(b));
	_exit(0);
}

/* hints: the response to request 1, interrupted and resumed. */
static void
answer_hints(void)
{
	ssize_t r;

	fail_next = 1;
	r = gnutls_record_send(S, hints, sizeof(hints) - 1);
	if (r != GNUTLS_E_AGAIN)
		die("no EAGAIN");
	r = gnutls_record_send(S, NULL, 0);
	if (r != sizeof(hints) - 1)
		die("resume");
}

/* jump: the response to request 1, left by a jump and sent with send2. */
static void
answer_jump(void)
{
	if (!sigsetjmp(jb, 0)) {
		jump_next = 1;
		(void)gnutls_record_send(S, ok, sizeof(ok) - 1);
		die("no jump");
	}
	if (gnutls_record_send2(S, ok, sizeof(ok) - 1, 0, 0) != sizeof(ok) - 1)
		die("send2");
}

/* ---- early: 0-RTT data on a resumed TLS 1.3 session ---------------------- */

#define EARLY_PRIO "NORMAL:-VERS-ALL:+VERS-TLS1.3"

static gnutls_certificate_credentials_t early_creds;
static gnutls_anti_replay_t early_replay;

/* The anti-replay database (GnuTLS 3.7 refuses early data without one):
 * each ClientHello is new here. */
static int
early_replay_add(void *p,
		 time_t exp,
		 const gnutls_datum_t *key,
		 const gnutls_datum_t *data)
{
	(void)p;
	(void)exp;
	(void)key;
	(void)data;
	return 0;
}

/* A P-256 key and a self-signed certificate for it: no files. */
static void
early_server_creds(void)
{
	gnutls_x509_privkey_t key;
	gnutls_x509_crt_t crt;
	time_t now = time(NULL);

	if (gnutls_x509_privkey_init(&key) < 0 ||
	    gnutls_x509_privkey_generate(
		    key, GNUTLS_PK_ECDSA,
		    GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0) < 0 ||
	    gnutls_x509_crt_init(&crt) < 0 || gnutls_x509_crt_set_version(crt, 3) < 0 ||
	    gnutls_x509_crt_set_serial(crt, "\x01", 1) < 0 ||
	    gnutls_x509_crt_set_activation_time(crt, now - 60) < 0 ||
	    gnutls_x509_crt_set_expiration_time(crt, now + 3600) < 0 ||
	    gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0,
					  "localhost", 9) < 0 ||
	    gnutls_x509_crt_set_key(crt, key) < 0 ||
	    gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0) < 0 ||
	    gnutls_certificate_allocate_credentials(&early_creds) < 0 ||
	    gnutls_certificate_set_x509_key(early_creds, &crt, 1, key) < 0)
		die("server creds");
}

/* The handshake, again after a non-fatal result. */
static int
early_handshake(gnutls_session_t s)
{
	int r;

	do
		r = gnutls_handshake(s);
	while (r < 0 && !gnutls_error_is_fatal(r));
	return r;
}

/* A read that goes on past a ticket (TLS 1.3: GNUTLS_E_AGAIN after one,
 * even on a blocking socket). */
static ssize_t
early_recv(gnutls_session_t s, char *b, size_t n)
{
	ssize_t r;

	do
		r = gnutls_record_recv(s, b, n);
	while (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED);
	return r;
}

/* Request 1 on a full handshake, then request 2 as early data of the
 * session resumed with the ticket it got.  The certificate is not
 * verified (no gnutls_session_set_verify_cert). */
static void
early_client(int port)
{
	gnutls_certificate_credentials_t cc;
	gnutls_session_t c;
	gnutls_datum_t sd;
	char b[4096];
	static const char r1[] = "GET /one HTTP/1.1\r\nHost: x\r\n" TP(1) "\r\n";
	static const char r2[] = "GET /two HTTP/1.1\r\nHost: x\r\n" TP(2) "\r\n";
	int s = loopback_connect(port);

	gnutls_certificate_allocate_credentials(&cc);
	gnutls_init(&c, GNUTLS_CLIENT);
	gnutls_priority_set_direct(c, EARLY_PRIO, NULL);
	gnutls_credentials_set(c, GNUTLS_CRD_CERTIFICATE, cc);
	gnutls_transport_set_int(c, s);
	if (early_handshake(c) < 0)
		die("client hs 1");
	gnutls_record_send(c, r1, sizeof(r1) - 1);
	/* the ticket comes before the response, and is taken with it */
	if (early_recv(c, b, sizeof(b)) <= 0 || gnutls_session_get_data2(c, &sd) < 0)
		die("client ticket");
	gnutls_bye(c, GNUTLS_SHUT_WR);
	gnutls_deinit(c);
	close(s);

	s = loopback_connect(port);
	gnutls_init(&c, GNUTLS_CLIENT | GNUTLS_ENABLE_EARLY_DATA);
	gnutls_priority_set_direct(c, EARLY_PRIO, NULL);
	gnutls_credentials_set(c, GNUTLS_CRD_CERTIFICATE, cc);
	gnutls_transport_set_int(c, s);
	if (gnutls_session_set_data(c, sd.data, sd.size) < 0 ||
	    gnutls_record_send_early_data(c, r2, sizeof(r2) - 1) < 0)
		die("client early");
	if (early_handshake(c) < 0)
		die("client hs 2");
	(void)early_recv(c, b, sizeof(b));
	_exit(0);
}

static void
early_session(int l, const gnutls_datum_t *ticket_key)
{
	fd = accept(l, NULL, NULL);
	gnutls_init(&S, GNUTLS_SERVER | GNUTLS_ENABLE_EARLY_DATA);
	gnutls_priority_set_direct(S, EARLY_PRIO, NULL);
	gnutls_credentials_set(S, GNUTLS_CRD_CERTIFICATE, early_creds);
	gnutls_session_ticket_enable_server(S, ticket_key);
	gnutls_record_set_max_early_data_size(S, 16384);
	gnutls_anti_replay_enable(S, early_replay);
	gnutls_transport_set_int(S, fd);
	if (early_handshake(S) < 0)
		die("server hs");
}

/* Request 2 is read with gnutls_record_recv_early_data only. */
static void
early_serve(int l, int port)
{
	gnutls_datum_t tk;
	char b[2048];
	ssize_t r;
	pid_t kid;
	int st;

	early_server_creds();
	if (gnutls_session_ticket_key_generate(&tk) < 0 ||
	    gnutls_anti_replay_init(&early_replay) < 0)
		die("ticket key");
	gnutls_anti_replay_set_add_function(early_replay, early_replay_add);
	kid = fork();
	if (!kid)
		early_client(port);
	early_session(l, &tk);
	recv_head();
	printf("REQ1 %s\n", ctxobs_shown());
	if (gnutls_record_send(S, ok, sizeof(ok) - 1) != sizeof(ok) - 1)
		die("send ok1");
	gnutls_deinit(S);
	close(fd);

	early_session(l, &tk);
	if (!(gnutls_session_get_flags(S) & GNUTLS_SFLAGS_EARLY_DATA))
		die("no early data accepted");
	r = gnutls_record_recv_early_data(S, b, sizeof(b));
	if (r <= 0 || !memmem(b, (size_t)r, "\r\n\r\n", 4))
		die("recv early");
	printf("REQ2 %s\n", ctxobs_shown());
	if (gnutls_record_send(S, ok, sizeof(ok) - 1) != sizeof(ok) - 1)
		die("send ok2");
	waitpid(kid, &st, 0);
	exit(WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1);
}

int
main(int argc, char **argv)
{
	struct sockaddr_in a;
	int l, st;
	gnutls_anon_server_credentials_t as;
	gnutls_dh_params_t dh;
	pid_t kid;
	bool jump = argc == 2 && strcmp(argv[1], "jump") == 0;
	bool early = argc == 2 && strcmp(argv[1], "early") == 0;

	if (argc != 2 || (!jump && !early && strcmp(argv[1], "hints") != 0))
		die("usage: tls-resume-gnutls hints|jump|early");
	l = listen_loopback(1, 0, &a);
	if (l < 0)
		die("listen");
	if (early)
		early_serve(l, ntohs(a.sin_port));
	kid = fork();
	if (!kid)
		client(ntohs(a.sin_port));
	fd = accept(l, NULL, NULL);
	gnutls_anon_allocate_server_credentials(&as);
	gnutls_dh_params_init(&dh);
	gnutls_dh_params_generate2(dh, 1024);
	gnutls_anon_set_server_dh_params(as, dh);
	gnutls_init(&S, GNUTLS_SERVER);
	gnutls_priority_set_direct(S, "NORMAL:-VERS-TLS1.3:+ANON-ECDH:+ANON-DH", NULL);
	gnutls_credentials_set(S, GNUTLS_CRD_ANON, as);
	gnutls_transport_set_int(S, fd);
	gnutls_transport_set_push_function(S, push);
	if (gnutls_handshake(S) < 0)
		die("server hs");
	recv_head();
	printf("REQ1 %s\n", ctxobs_shown());
	if (jump)
		answer_jump();
	else
		answer_hints();
	recv_head();
	printf("REQ2 %s\n", ctxobs_shown());
	if (gnutls_record_send(S, ok, sizeof(ok) - 1) != sizeof(ok) - 1)
		die("send ok2");
	waitpid(kid, &st, 0);
	return 0;
}
