/* SPDX-License-Identifier: Apache-2.0 */
/* A legacy TLS server's request timeout, for hooks/hook-openssl.c and
 * hooks/hook-longjmp.c: a one-shot timer whose handler siglongjmp()s out
 * of a blocking read, for a client that sends nothing.
 *
 *   tls-jump read|bio
 *
 * read: the server reads with SSL_read() and reuses its session for the
 *       next connection (SSL_clear(), SSL_set_fd());
 * bio:  the server reads through an SSL BIO (BIO_f_ssl, BIO_read) and
 *       makes a new one per connection.
 *
 * A forked client opens connection 1, completes the handshake and sends
 * nothing: the server's read times out (the jump), it gives the
 * connection up.  Connection 2 sends GET /two with trace 2222...; the
 * server prints "conn2 <ctx>" with its thread's context (ctxobs.h) after
 * reading it, answers, and prints "DONE". */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctxobs.h"
#include "listen-loopback.h"
#include "tls-selfsigned.h"

static const char req2[] =
	"GET /two HTTP/1.1\r\nHost: x\r\ntraceparent: "
	"00-22222222222222222222222222222222-00f067aa0ba902b7-01\r\n\r\n";
static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

static sigjmp_buf env;
static volatile sig_atomic_t armed;

static void
on_alarm(int sig)
{
	(void)sig;
	if (armed) {
		armed = 0;
		siglongjmp(env, 1); /* the request timed out */
	}
}

static void
die(const char *what)
{
	fprintf(stderr, "tls-jump: %s\n", what);
	exit(2);
}

static void
client(struct sockaddr_in *a)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	int k;

	for (k = 1; k <= 2; k++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		SSL *s = SSL_new(ctx);
		char buf[256];

		if (fd < 0 || connect(fd, (struct sockaddr *)a, sizeof(*a)) < 0)
			die("connect");
		SSL_set_fd(s, fd);
		if (SSL_connect(s) != 1)
			die("SSL_connect");
		if (k == 2 && SSL_write(s, req2, sizeof(req2) - 1) <= 0)
			die("SSL_write");
		/* connection 1: until the server gives it up */
		while (SSL_read(s, buf, sizeof(buf)) > 0)
			if (k == 2)
				break;
		SSL_free(s);
		close(fd);
	}
	SSL_CTX_free(ctx);
	_exit(0);
}

int
main(int argc, char **argv)
{
	struct sockaddr_in a;
	struct sigaction sa = {.sa_handler = on_alarm};
	static SSL_CTX *ctx;
	static SSL *s;
	static BIO *b;
	static bool bio;
	static int k, fd;
	int ls, st;
	pid_t pid;

	if (argc != 2 ||
	    (strcmp(argv[1], "read") != 0 && strcmp(argv[1], "bio") != 0)) {
		fprintf(stderr, "usage: tls-jump read|bio\n");
		return 64;
	}
	bio = strcmp(argv[1], "bio") == 0;
	signal(SIGPIPE, SIG_IGN);
	ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx || !tls_self_signed(ctx))
		die("server context");
	ls = listen_loopback(4, SOCK_CLOEXEC, &a);
	if (ls < 0)
		die("listen");
	pid = fork();
	if (pid == 0)
		client(&a);
	sigaction(SIGALRM, &sa, NULL);
	for (k = 1; k <= 2; k++) {
		struct itimerval it = {{0, 0}, {0, 200000}}, off = {{0, 0}, {0, 0}};
		char buf[512];
		int n;

		fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			die("accept");
		if (!s)
			s = SSL_new(ctx);
		else if (SSL_clear(s) != 1) /* the same session, a new client */
			die("SSL_clear");
		SSL_set_fd(s, fd);
		if (bio) {
			SSL_set_accept_state(s); /* the handshake runs in the read */
			b = BIO_new(BIO_f_ssl());
			BIO_set_ssl(b, s, BIO_CLOSE);
		} else if (SSL_accept(s) != 1) {
			die("SSL_accept");
		}
		if (sigsetjmp(env, 1)) {
			/* timed out: give the connection up */
			if (k == 2)
				die("connection 2 timed out");
			if (bio) {
				BIO_free_all(b);
				s = NULL;
			}
			close(fd);
			continue;
		}
		armed = 1;
		setitimer(ITIMER_REAL, &it, NULL);
		n = bio ? BIO_read(b, buf, sizeof(buf)) : SSL_read(s, buf, sizeof(buf));
		armed = 0;
		setitimer(ITIMER_REAL, &off, NULL);
		if (n <= 0)
			die("read");
		printf("conn%d %s\n", k, ctxobs_shown());
		if ((bio ? BIO_write(b, resp, sizeof(resp) - 1)
			 : SSL_write(s, resp, sizeof(resp) - 1)) <= 0)
			die("write");
		if (bio)
			(void)BIO_flush(b);
	}
	waitpid(pid, &st, 0);
	printf("DONE\n");
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
