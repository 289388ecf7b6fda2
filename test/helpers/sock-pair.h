/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the socket-level helpers (sock-attack, sock-edge) have in common:
 * a connected client/server pair on 127.0.0.1 and whole sends and reads
 * that retry EINTR.  Include after self-check.h (die()). */

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "listen-loopback.h"

static int lfd;

/* A new connection to the one listening socket: *cli the client's end
 * (TCP_NODELAY), *srv the server's. */
static void
pair(int *cli, int *srv)
{
	static struct sockaddr_in a;
	int one = 1;

	if (lfd == 0) {
		lfd = listen_loopback(16, SOCK_CLOEXEC, &a);
		if (lfd < 0)
			die("listen");
	}
	*cli = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*cli < 0 || connect(*cli, (struct sockaddr *)&a, sizeof(a)))
		die("connect");
	(void)setsockopt(*cli, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	*srv = accept(lfd, NULL, NULL);
	if (*srv < 0)
		die("accept");
}

static __attribute__((unused)) void
send_all(int fd, const char *s, size_t n, int flags)
{
	while (n) {
		ssize_t r = send(fd, s, n, flags);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			die("send");
		s += r;
		n -= (size_t)r;
	}
}

/* Read exactly n bytes. */
static __attribute__((unused)) void
read_n(int fd, char *buf, size_t n)
{
	while (n) {
		ssize_t r = read(fd, buf, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			die("read");
		buf += r;
		n -= (size_t)r;
	}
}

/* Reads a request head from fd byte by byte, so that nothing after it is
 * consumed (at most 512 bytes). */
static __attribute__((unused)) void
read_head(int fd)
{
	char buf[512];
	size_t n = 0;

	while (n < 4 || memcmp(buf + n - 4, "\r\n\r\n", 4) != 0) {
		if (n == sizeof(buf))
			die("head too long");
		read_n(fd, buf + n, 1);
		n++;
	}
}

/* A new connection (pair()) on which a GET head with trace's traceparent
 * was sent, not yet read; returns the head's length. */
static __attribute__((unused)) size_t
pair_sent(int *cli, int *srv, const char *trace)
{
	char head[256];
	int n = snprintf(head, sizeof(head),
			 "GET /c HTTP/1.1\r\nHost: x\r\n"
			 "traceparent: 00-%s-00f067aa0ba902b7-01\r\n\r\n",
			 trace);

	pair(cli, srv);
	send_all(*cli, head, (size_t)n, 0);
	return (size_t)n;
}

/* The same, read by the server's end. */
static __attribute__((unused)) void
pair_traced(int *cli, int *srv, const char *trace)
{
	char buf[256];
	size_t n = pair_sent(cli, srv, trace);

	read_n(*srv, buf, n);
}
