/* SPDX-License-Identifier: Apache-2.0 */
/* A single-threaded epoll HTTP/1.1 server with no tracing code, for the
 * socket-level tests of event loops.
 *
 * Listens on 127.0.0.1 (kernel-chosen port), prints "READY <port>",
 * and serves every connection from one loop (non-blocking sockets, recv
 * and send).  Per request path:
 *   /hold...   not answered yet ("HELD <path>"): the connection stays open
 *              with its request pending;
 *   /block...  "BLOCK <tid> <path>", then the loop blocks until a line
 *              arrives on stdin; it then answers this request and every
 *              held one ("DONE <path>" each);
 *   other      answered at once ("DONE <path>").
 * Responses are "HTTP/1.1 200 OK" with body "path=<path>\n".  Exits when
 * stdin is closed (checked between events). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "listen-loopback.h"

#define MAX_CONN 64
#define BUF      16384

struct conn {
	int fd;
	size_t len;
	char buf[BUF];
	bool held;
	char held_path[256];
};

static struct conn *conns[MAX_CONN];

static void
respond(struct conn *c, const char *path)
{
	char resp[600];
	size_t n = (size_t)snprintf(
		resp, sizeof(resp),
		"HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\npath=%s\n",
		strlen(path) + 6, path);
	size_t off = 0;

	while (off < n) {
		ssize_t r = send(c->fd, resp + off, n - off, MSG_NOSIGNAL);

		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue; /* tiny responses: the buffer is never full */
		if (r <= 0)
			return;
		off += (size_t)r;
	}
	printf("DONE %s\n", path);
	fflush(stdout);
}

static void
wait_line(void)
{
	char ch;

	for (;;) {
		ssize_t r = read(0, &ch, 1);

		if (r <= 0)
			exit(0);
		if (ch == '\n')
			return;
	}
}

static void
handle(struct conn *c, const char *path)
{
	int i;

	if (strncmp(path, "/hold", 5) == 0) {
		c->held = true;
		snprintf(c->held_path, sizeof(c->held_path), "%s", path);
		printf("HELD %s\n", path);
		fflush(stdout);
		return;
	}
	if (strncmp(path, "/block", 6) == 0) {
		printf("BLOCK %ld %s\n", (long)syscall(SYS_gettid), path);
		fflush(stdout);
		wait_line();
	}
	respond(c, path);
	for (i = 0; i < MAX_CONN; i++)
		if (conns[i] && conns[i]->held) {
			conns[i]->held = false;
			respond(conns[i], conns[i]->held_path);
		}
}

/* Take every complete head out of c's buffer. */
static void
process(struct conn *c)
{
	for (;;) {
		char *end = NULL, path[256];
		size_t i, head_len, sp;
		char *s1, *s2;

		for (i = 3; i < c->len; i++)
			if (memcmp(c->buf + i - 3, "\r\n\r\n", 4) == 0) {
				end = c->buf + i + 1;
				break;
			}
		if (!end)
			return;
		head_len = (size_t)(end - c->buf);
		s1 = memchr(c->buf, ' ', head_len);
		s2 = s1 ? memchr(s1 + 1, ' ', head_len - (size_t)(s1 + 1 - c->buf))
			: NULL;
		sp = s1 && s2 ? (size_t)(s2 - s1 - 1) : 0;
		if (sp >= sizeof(path))
			sp = sizeof(path) - 1;
		memcpy(path, s1 ? s1 + 1 : "", sp);
		path[sp] = '\0';
		memmove(c->buf, end, c->len - head_len);
		c->len -= head_len;
		handle(c, path);
	}
}

int
main(void)
{
	struct sockaddr_in a;
	struct epoll_event ev, evs[16];
	int ls, ep;

	ls = listen_loopback(64, SOCK_CLOEXEC | SOCK_NONBLOCK, &a);
	if (ls < 0) {
		perror("epoll-server: listen");
		return 1;
	}
	ep = epoll_create1(EPOLL_CLOEXEC);
	ev.events = EPOLLIN;
	ev.data.fd = ls;
	epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
	/* stdin closing ends the server even while it is idle. */
	ev.data.fd = 0;
	epoll_ctl(ep, EPOLL_CTL_ADD, 0, &ev);
	printf("READY %d\n", ntohs(a.sin_port));
	fflush(stdout);

	for (;;) {
		int n = epoll_wait(ep, evs, 16, -1), i;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			perror("epoll-server: epoll_wait");
			return 1;
		}
		for (i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			struct conn *c;

			if (fd == 0) {
				/* Outside /block, stdin only matters at EOF. */
				char tmp[64];

				if (read(0, tmp, sizeof(tmp)) <= 0)
					return 0;
				continue;
			}
			if (fd == ls) {
				int cfd = accept4(ls, NULL, NULL,
						  SOCK_NONBLOCK | SOCK_CLOEXEC);

				if (cfd < 0)
					continue;
				if (cfd >= MAX_CONN) {
					close(cfd);
					continue;
				}
				c = calloc(1, sizeof(*c));
				c->fd = cfd;
				conns[cfd] = c;
				ev.events = EPOLLIN;
				ev.data.fd = cfd;
				epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &ev);
				continue;
			}
			c = conns[fd];
			for (;;) {
				ssize_t r;

				if (c->len == BUF)
					c->len =
						0; /* oversized: drop (not used by tests) */
				r = recv(fd, c->buf + c->len, BUF - c->len, 0);
				if (r > 0) {
					c->len += (size_t)r;
					continue;
				}
				if (r < 0 && errno == EINTR)
					continue;
				if (r < 0 && errno == EAGAIN)
					break;
				/* EOF or error */
				epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
				close(fd);
				conns[fd] = NULL;
				free(c);
				c = NULL;
				break;
			}
			if (c)
				process(c);
		}
	}
}
