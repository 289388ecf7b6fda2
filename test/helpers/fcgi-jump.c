/* SPDX-License-Identifier: Apache-2.0 */
/* fcgi-jump: a libfcgi loop (FCGX_Accept_r() ... FCGX_Finish_r()) with a
 * request timeout the legacy way: a SIGALRM handler that siglongjmp()s
 * back to the loop, which then drops the request it gave up
 * (FCGX_Free()) and accepts the next.  The signal is raised, once, from
 * this program's write(), which libfcgi calls to flush the first
 * response inside FCGX_Finish_r(): the jump leaves the shim's
 * FCGX_Finish_r hook (hooks/hook-fcgi.c).  A client thread sends
 * FastCGI requests with an HTTP_TRACEPARENT.  No tracing code but
 * ctxobs.h.
 *
 *   fcgi-jump
 *
 * Prints "free-ends <0|1>" (after FCGX_Free() of the dropped request the
 * thread shows what it showed before its first request: hook-fcgi.c used
 * to keep that request published until the next accept) and "next-ends
 * <0|1>" (the same after the next request's FCGX_Finish_r()); the same
 * with and without the shim (test-preload-host.c). */
#include "config.h"

#include <arpa/inet.h>
#include <fcgiapp.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ctxobs.h"
#include "listen-loopback.h"

static sigjmp_buf loop_env;
static unsigned port;
static volatile sig_atomic_t armed;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int dropped;

static void
on_alarm(int sig)
{
	(void)sig;
	siglongjmp(loop_env, 1);
}

/* libfcgi's write(): the timeout lands in FCGX_Finish_r()'s flush. */
ssize_t
write(int fd, const void *buf, size_t n)
{
	if (armed) {
		armed = 0;
		(void)raise(SIGALRM);
	}
	return syscall(SYS_write, fd, buf, n);
}

/* One FastCGI record of request 1. */
static void
record(char *out, size_t *n, int type, const void *body, size_t len)
{
	unsigned char h[8] = {1,
			      (unsigned char)type,
			      0,
			      1,
			      (unsigned char)(len >> 8),
			      (unsigned char)len,
			      0,
			      0};

	memcpy(out + *n, h, 8);
	memcpy(out + *n + 8, body, len);
	*n += 8 + len;
}

/* A name-value pair, both shorter than 128 bytes. */
static void
param(char *p, size_t *n, const char *k, const char *v)
{
	p[(*n)++] = (char)strlen(k);
	p[(*n)++] = (char)strlen(v);
	memcpy(p + *n, k, strlen(k));
	*n += strlen(k);
	memcpy(p + *n, v, strlen(v));
	*n += strlen(v);
}

static int
send_request(const char *uri, const char *tp)
{
	static const unsigned char begin[8] = {0, 1, 0, 0, 0, 0, 0, 0}; /* responder */
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	char buf[2048], p[1024];
	size_t n = 0, pn = 0;
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) != 0)
		exit(2);
	param(p, &pn, "REQUEST_METHOD", "GET");
	param(p, &pn, "REQUEST_URI", uri);
	param(p, &pn, "HTTP_TRACEPARENT", tp);
	record(buf, &n, 1, begin, sizeof(begin));
	record(buf, &n, 4, p, pn);
	record(buf, &n, 4, "", 0);
	record(buf, &n, 5, "", 0);
	if (syscall(SYS_write, s, buf, n) != (long)n)
		exit(2);
	return s;
}

static void *
client(void *arg)
{
	char buf[4096];
	int s0, s;

	(void)arg;
	s0 = send_request("/timeout",
			  "00-0af7651916cd43dd8448eb211c803190-b7ad6b7169203330-01");
	pthread_mutex_lock(&lock);
	while (!dropped)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	s = send_request("/ok",
			 "00-0af7651916cd43dd8448eb211c803191-b7ad6b7169203331-01");
	while (read(s, buf, sizeof(buf)) > 0)
		;
	close(s);
	close(s0);
	return NULL;
}

int
main(void)
{
	struct sockaddr_in a;
	int ls = listen_loopback(8, SOCK_CLOEXEC, &a);
	char before[128];
	FCGX_Request req;
	pthread_t th;

	if (ls < 0 || FCGX_Init() != 0 || FCGX_InitRequest(&req, ls, 0) != 0)
		return 2;
	port = ntohs(a.sin_port);
	(void)signal(SIGALRM, on_alarm);
	snprintf(before, sizeof(before), "%s", ctxobs_shown());
	if (pthread_create(&th, NULL, client, NULL) != 0)
		return 2;
	if (sigsetjmp(loop_env, 1)) {
		/* the request timed out: drop it */
		FCGX_Free(&req, 1);
		printf("free-ends %d\n", strcmp(before, ctxobs_shown()) == 0);
		pthread_mutex_lock(&lock);
		dropped = 1;
		pthread_cond_signal(&cond);
		pthread_mutex_unlock(&lock);
	}
	for (;;) {
		bool timeout;

		if (FCGX_Accept_r(&req) != 0)
			return 2;
		timeout =
			strcmp(FCGX_GetParam("REQUEST_URI", req.envp), "/timeout") == 0;
		FCGX_FPrintF(req.out, "Content-type: text/plain\r\n\r\nok\n");
		armed = timeout;
		FCGX_Finish_r(&req);
		if (!timeout)
			break;
	}
	printf("next-ends %d\n", strcmp(before, ctxobs_shown()) == 0);
	pthread_join(th, NULL);
	return 0;
}
