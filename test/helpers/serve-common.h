/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the thread-per-connection test servers (tpc-server, tls-server,
 * h2-server) have in common: their output lines, how a "/block" request
 * waits for the test's go-ahead, and the listen/accept loop.  Shared
 * because the tests drive all three the same way and rely on it:
 * "READY <port>" on stdout once listening on 127.0.0.1, one line on stdin
 * releases one blocked request, end of stdin ends the server, each
 * connection is served on a thread of its own. */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "listen-loopback.h"

/* tpc-server --block-poll: a blocked request waits in poll() on a pipe, as
 * a handler waiting on a database or an upstream would, instead of in
 * sem_wait().  Set before serve_forever(). */
static bool serve_block_poll;

static pthread_mutex_t serve_out_lock = PTHREAD_MUTEX_INITIALIZER;
static sem_t serve_go;
static int serve_go_pipe[2];

static inline void serve_say(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* One line to stdout, whole and flushed at once, from any thread: the
 * tests read the lines as they come. */
static inline void
serve_say(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&serve_out_lock);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
	pthread_mutex_unlock(&serve_out_lock);
}

/* A request whose path starts with "/block" prints "BLOCK <tid> <path>"
 * and waits until the test releases it (one line on stdin); others go
 * on at once. */
static inline void
serve_maybe_block(long tid, const char *path)
{
	if (strncmp(path, "/block", 6) != 0)
		return;
	serve_say("BLOCK %ld %s\n", tid, path);
	if (serve_block_poll) {
		struct pollfd p = {.fd = serve_go_pipe[0], .events = POLLIN};
		char c;

		while (poll(&p, 1, -1) < 0 || read(serve_go_pipe[0], &c, 1) != 1)
			;
	} else {
		while (sem_wait(&serve_go) < 0)
			;
	}
}

static inline void *
serve_control(void *arg)
{
	char line[256];

	(void)arg;
	/* One line on stdin releases one blocked request; EOF ends it all. */
	while (fgets(line, sizeof(line), stdin)) {
		if (serve_block_poll)
			(void)!write(serve_go_pipe[1], "x", 1);
		else
			sem_post(&serve_go);
	}
	exit(0);
}

/* Listens on 127.0.0.1 (port chosen by the kernel), prints "READY <port>"
 * and runs serve() on a detached thread of its own for each accepted
 * connection, with the fd as its argument (TCP_NODELAY set first if
 * nodelay).  Returns only on failure, with the exit status to use; name
 * prefixes the error message. */
static inline int
serve_forever(const char *name, void *(*serve)(void *), bool nodelay)
{
	struct sockaddr_in a;
	pthread_t th;
	int ls, one = 1;

	sem_init(&serve_go, 0, 0);
	if (serve_block_poll && pipe2(serve_go_pipe, O_CLOEXEC) < 0)
		return 1;
	ls = listen_loopback(64, SOCK_CLOEXEC, &a);
	if (ls < 0) {
		fprintf(stderr, "%s: listen: %s\n", name, strerror(errno));
		return 1;
	}
	pthread_create(&th, NULL, serve_control, NULL);
	serve_say("READY %d\n", ntohs(a.sin_port));
	for (;;) {
		int fd = accept(ls, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			fprintf(stderr, "%s: accept: %s\n", name, strerror(errno));
			return 1;
		}
		if (nodelay)
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (pthread_create(&th, NULL, serve, (void *)(long)fd) != 0)
			close(fd);
		else
			pthread_detach(th);
	}
}
