/* SPDX-License-Identifier: Apache-2.0 */
/* A worker thread that serves STEP_PUBLISH_REQUESTS HTTP/1.1 requests on
 * a loopback connection, for a test that single-steps it under the shim
 * (test-preload-publish.c); the main thread is the client, every other
 * request with a traceparent.  No tracing code.
 *
 *   READY <worker tid> <&otel_thread_ctx_v1 on the worker> <&done>
 *
 * The worker starts when a line arrives on stdin; done becomes 1 after
 * its last response.  Exits when stdin is closed. */
#include "config.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define STEP_PUBLISH_REQUESTS 4

static int listen_fd, go_pipe[2];
volatile int done;

static void
die(const char *what)
{
	perror(what);
	exit(2);
}

/* Reads up to the end of a request head into buf (no body is sent). */
static void
read_head(int fd, char *buf, size_t cap)
{
	size_t have = 0;

	while (!memmem(buf, have, "\r\n\r\n", 4)) {
		ssize_t r = recv(fd, buf + have, cap - have, 0);

		if (r <= 0)
			die("recv");
		have += (size_t)r;
	}
}

static void *
worker(void *arg)
{
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	char buf[4096], c;
	int fd, i;

	(void)arg;
	/* dlsym() of a thread-local gives the calling thread's copy. */
	printf("READY %ld %p %p\n", (long)syscall(SYS_gettid),
	       dlsym(RTLD_DEFAULT, "otel_thread_ctx_v1"), (void *)&done);
	fflush(stdout);
	if (read(go_pipe[0], &c, 1) != 1)
		die("read");
	fd = accept(listen_fd, NULL, NULL);
	if (fd < 0)
		die("accept");
	for (i = 0; i < STEP_PUBLISH_REQUESTS; i++) {
		read_head(fd, buf, sizeof(buf));
		if (send(fd, resp, sizeof(resp) - 1, 0) != sizeof(resp) - 1)
			die("send");
	}
	done = 1;
	for (;;)
		pause();
	return NULL;
}

int
main(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);
	pthread_t t;
	char line[64], buf[256];
	int c, i;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (listen_fd < 0 || bind(listen_fd, (void *)&a, sizeof(a)) ||
	    listen(listen_fd, 1) || getsockname(listen_fd, (void *)&a, &al) ||
	    pipe(go_pipe))
		die("listen");
	if (pthread_create(&t, NULL, worker, NULL) != 0)
		die("pthread_create");
	if (!fgets(line, sizeof(line), stdin))
		return 0;
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c < 0 || connect(c, (void *)&a, sizeof(a)))
		die("connect");
	if (write(go_pipe[1], "g", 1) != 1)
		die("write");
	for (i = 0; i < STEP_PUBLISH_REQUESTS; i++) {
		size_t got = 0;
		int n = snprintf(
			buf, sizeof(buf), "GET /step/%d HTTP/1.1\r\nHost: x\r\n%s\r\n",
			i,
			i % 2 ? "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-"
				"00f067aa0ba902b7-01\r\n"
			      : "");

		if (write(c, buf, (size_t)n) != n)
			die("write");
		while (!memmem(buf, got, "\r\n\r\nok", 6)) {
			ssize_t r = read(c, buf + got, sizeof(buf) - got);

			if (r <= 0)
				die("read");
			got += (size_t)r;
		}
	}
	while (fgets(line, sizeof(line), stdin))
		;
	return 0;
}
