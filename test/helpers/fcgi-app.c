/* SPDX-License-Identifier: Apache-2.0 */
/* A libfcgi (FastCGI) application with no tracing code, for the
 * integration tests (test-integration-fcgi.c).
 *
 * usage: fcgi-app threaded|stdio
 *   threaded  two threads, each with its own FCGX_Request, in a loop of
 *             FCGX_Accept_r() ... FCGX_Finish_r() (fcgiapp.h)
 *   stdio     the main thread in a loop of FCGI_Accept() (fcgi_stdio.h:
 *             the parameters in environ, the response with printf()),
 *             calling FCGI_Finish() only for /linger (below): the next
 *             FCGI_Accept() ends the request
 *
 * Listens on 127.0.0.1 (ephemeral port; in stdio mode the listening
 * socket is moved to fd 0, where FCGI_Accept() expects it) and prints
 * "READY <port>".  Every request is answered with
 * "<method> <uri> id=<x-request-id> body=<body bytes>\n".  A request for a
 * path starting with /block first sends the response's header (flushed:
 * a write on the connection), then prints "IN <tid> <uri>" and waits until
 * the test writes a line "GO" on stdin; the handler is then inside the
 * request, which is what the test looks at.  Each answered request prints
 * "DONE <tid> <uri>".  A request for a path starting with /linger is
 * finished first (FCGX_Finish_r(), or FCGI_Finish() in stdio mode), one
 * starting with /drop (threaded mode) freed without a response
 * (FCGX_Free()); then the handler prints "LINGER <tid> <uri>" and waits
 * for "GO" before it accepts again: the request is over, and the thread
 * not yet waiting for the next one.  EOF on stdin exits 0.  The response never depends
 * on threads or time, so runs with and without the shim are
 * byte-identical. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/* fcgi_stdio.h replaces stdio's names with its own (printf() writes the
 * response): this program's own lines go out with dprintf(). */
#include <fcgi_stdio.h>
#include <fcgiapp.h>

#include "listen-loopback.h"

static int go_pipe[2];
static int ctl_fd = STDIN_FILENO;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static long
tid(void)
{
	return (long)syscall(SYS_gettid);
}

static void
say(const char *what, const char *uri)
{
	pthread_mutex_lock(&out_lock);
	dprintf(STDOUT_FILENO, "%s %ld %s\n", what, tid(), uri ? uri : "-");
	pthread_mutex_unlock(&out_lock);
}

/* The test's lines ("GO") become one byte each on go_pipe; EOF ends the
 * program (worker threads may be blocked in accept). */
static void *
control(void *arg)
{
	char buf[256];
	ssize_t n;

	(void)arg;
	for (;;) {
		n = read(ctl_fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0);
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] == '\n' && write(go_pipe[1], "g", 1) != 1)
				_exit(3);
	}
	return NULL;
}

static void
wait_go(void)
{
	char c;

	while (read(go_pipe[0], &c, 1) < 0 && errno == EINTR)
		;
}

static bool
blocks(const char *uri)
{
	return uri && strncmp(uri, "/block", 6) == 0;
}

static bool
lingers(const char *uri, const char *prefix)
{
	return uri && strncmp(uri, prefix, strlen(prefix)) == 0;
}

static const char *
or_dash(const char *s)
{
	return s ? s : "-";
}

static void *
threaded_worker(void *arg)
{
	int sock = *(int *)arg;
	FCGX_Request req;
	char buf[4096], path[1024];

	if (FCGX_InitRequest(&req, sock, 0) != 0)
		_exit(4);
	while (FCGX_Accept_r(&req) == 0) {
		const char *uri = FCGX_GetParam("REQUEST_URI", req.envp);
		const char *method = FCGX_GetParam("REQUEST_METHOD", req.envp);
		const char *id = FCGX_GetParam("HTTP_X_REQUEST_ID", req.envp);
		long body = 0;
		int n;

		while ((n = FCGX_GetStr(buf, sizeof(buf), req.in)) > 0)
			body += n;
		/* A blocking request's response starts before it blocks:
		 * the header goes out (FCGX_FFlush(): a write on the
		 * connection) while the request is still being served. */
		if (blocks(uri)) {
			FCGX_PutS("Content-Type: text/plain\r\n\r\n", req.out);
			FCGX_FFlush(req.out);
			say("IN", uri);
			wait_go();
		} else if (!lingers(uri, "/drop")) {
			FCGX_PutS("Content-Type: text/plain\r\n\r\n", req.out);
		}
		/* uri points into the request's parameters, which
		 * FCGX_Free() and FCGX_Finish_r() free. */
		strncpy(path, or_dash(uri), sizeof(path) - 1);
		path[sizeof(path) - 1] = '\0';
		if (lingers(path, "/drop")) {
			FCGX_Free(&req, 1);
			say("LINGER", path);
			wait_go();
			say("DONE", path);
			continue;
		}
		FCGX_FPrintF(req.out, "%s %s id=%s body=%ld\n", or_dash(method),
			     or_dash(uri), or_dash(id), body);
		FCGX_Finish_r(&req);
		if (lingers(path, "/linger")) {
			say("LINGER", path);
			wait_go();
		}
		say("DONE", path);
	}
	return NULL;
}

static void
run_stdio(void)
{
	char buf[4096];

	while (FCGI_Accept() >= 0) {
		const char *uri = getenv("REQUEST_URI");
		const char *method = getenv("REQUEST_METHOD");
		const char *id = getenv("HTTP_X_REQUEST_ID");
		long body = 0;
		size_t n;

		while ((n = fread(buf, 1, sizeof(buf), stdin)) > 0)
			body += (long)n;
		printf("Content-Type: text/plain\r\n\r\n");
		if (blocks(uri)) {
			fflush(stdout);
			say("IN", uri);
			wait_go();
		}
		printf("%s %s id=%s body=%ld\n", or_dash(method), or_dash(uri),
		       or_dash(id), body);
		if (lingers(uri, "/linger")) {
			strncpy(buf, uri, sizeof(buf) - 1);
			buf[sizeof(buf) - 1] = '\0';
			FCGI_Finish();
			say("LINGER", buf);
			wait_go();
			say("DONE", buf);
			continue;
		}
		/* Answered once the next FCGI_Accept() finishes it: DONE says
		 * the handler is through, the response follows. */
		say("DONE", uri);
	}
}

int
main(int argc, char **argv)
{
	struct sockaddr_in sin;
	pthread_t ctl, w[2];
	bool threaded;
	int sock;

	if (argc != 2 ||
	    (strcmp(argv[1], "threaded") != 0 && strcmp(argv[1], "stdio") != 0)) {
		dprintf(STDERR_FILENO, "usage: fcgi-app threaded|stdio\n");
		return 64;
	}
	threaded = strcmp(argv[1], "threaded") == 0;
	if (pipe2(go_pipe, O_CLOEXEC) != 0)
		return 1;
	sock = listen_loopback(16, SOCK_CLOEXEC, &sin);
	if (sock < 0)
		return 1;
	if (!threaded) {
		/* FCGI_Accept() listens on fd 0: stdin (the test's lines)
		 * moves elsewhere. */
		ctl_fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
		if (ctl_fd < 0 || dup2(sock, STDIN_FILENO) != STDIN_FILENO)
			return 1;
		close(sock);
		sock = STDIN_FILENO;
	}
	if (FCGX_Init() != 0)
		return 1;
	dprintf(STDOUT_FILENO, "READY %u\n", (unsigned)ntohs(sin.sin_port));
	if (!threaded) {
		if (pthread_create(&ctl, NULL, control, NULL) != 0)
			return 1;
		run_stdio();
		return 0;
	}
	for (int i = 0; i < 2; i++)
		if (pthread_create(&w[i], NULL, threaded_worker, &sock) != 0)
			return 1;
	control(NULL);
	return 0;
}
