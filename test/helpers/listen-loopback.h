/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The listening TCP socket on 127.0.0.1 that most helper programs serve on
 * or connect their own pairs through, on a port of the kernel's choice so
 * that tests can run in parallel.  One function, so that the helpers stop
 * opening it each a little differently; what does differ and can matter
 * to a test (the backlog: pipeline floods 1024 connections; SOCK_NONBLOCK
 * on an epoll listener; SOCK_CLOEXEC) stays the caller's choice, and so
 * does what to do on failure (exit status and message). */

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>
#include <unistd.h>

/* A TCP socket listening on 127.0.0.1 at a port of the kernel's choice,
 * with backlog; flags (SOCK_CLOEXEC, SOCK_NONBLOCK) are or-ed into
 * socket()'s type.  SO_REUSEADDR is always set: harmless on a listener
 * with an ephemeral port, and what the servers that set it wanted.  If addr
 * is not NULL it receives the bound address (ready for connect(); the port
 * is ntohs(addr->sin_port)).  Returns the fd, or -1 with errno as the call
 * that failed left it (the socket closed). */
static inline int
listen_loopback(int backlog, int flags, struct sockaddr_in *addr)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr = {.s_addr = htonl(INADDR_LOOPBACK)}};
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | flags, 0), one = 1, e;

	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, backlog) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
		e = errno;
		(void)close(fd);
		errno = e;
		return -1;
	}
	if (addr)
		*addr = a;
	return fd;
}
