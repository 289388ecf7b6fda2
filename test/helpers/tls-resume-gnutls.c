/* SPDX-License-Identifier: Apache-2.0 */
/* tls-resume-gnutls MODE: a GnuTLS server whose response to a first
 * request is interrupted and finished another way; the request after it
 * prints "REQ2 <ctx>", which must be its own context.  A client process
 * of its own (anonymous credentials, TLS 1.2).
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
 *          followed: the same outcome). */
#include "ctxobs.h"
#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
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

static void
client(int port)
{
	gnutls_session_t c;
	gnutls_anon_client_credentials_t ac;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	int s = socket(AF_INET, SOCK_STREAM, 0);
	char b[4096];
	static const char r1[] = "GET /one HTTP/1.1\r\nHost: x\r\n" TP(1) "\r\n";
	static const char r2[] = "GET /two HTTP/1.1\r\nHost: x\r\n" TP(2) "\r\n";

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(s, (void *)&a, sizeof(a)) < 0)
		die("connect");
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

int
main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0), st;
	gnutls_anon_server_credentials_t as;
	gnutls_dh_params_t dh;
	pid_t kid;
	bool jump = argc == 2 && strcmp(argv[1], "jump") == 0;

	if (argc != 2 || (!jump && strcmp(argv[1], "hints") != 0))
		die("usage: tls-resume-gnutls hints|jump");
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(l, (void *)&a, sizeof(a)) < 0 || listen(l, 1) < 0 ||
	    getsockname(l, (void *)&a, &al) < 0)
		die("listen");
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
