/* SPDX-License-Identifier: Apache-2.0 */
/* http-sink: an HTTP/1.1 server on 127.0.0.1 that reports every request it
 * receives on stdout, header lines exactly as received, so a test can see
 * what a client under the shim really sent (how many traceparent fields,
 * in which case, in which order):
 *
 *   READY <port>
 *   REQ <method> <target>
 *   H <header line>        (one per field, as received)
 *   BODY <length>
 *   END
 *
 * Each request gets "200 OK" and the connection is closed.  The sink
 * exits when its stdin reaches end of file.  No tracing code. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "listen-loopback.h"

#define HEAD_MAX      (256 * 1024)
#define BODY_MAX      (16 * 1024 * 1024)
#define IO_TIMEOUT_MS 20000

static char head[HEAD_MAX + 1];

/* Read more bytes into buf; false on end, error or timeout. */
static bool
read_some(int fd, char *buf, size_t cap, size_t *len)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ssize_t r;

	if (*len >= cap || poll(&p, 1, IO_TIMEOUT_MS) <= 0)
		return false;
	r = read(fd, buf + *len, cap - *len);
	if (r <= 0)
		return false;
	*len += (size_t)r;
	return true;
}

static void
write_all(int fd, const char *s, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, s, len);

		if (w <= 0) {
			if (w < 0 && errno == EINTR)
				continue;
			return;
		}
		s += w;
		len -= (size_t)w;
	}
}

static void
serve(int fd)
{
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
				 "Connection: close\r\n\r\nok";
	size_t len = 0, head_len, body_have, content_length = 0;
	char *end = NULL, *line, *next;
	bool expect_continue = false;

	while (!(end = memmem(head, len, "\r\n\r\n", 4)))
		if (!read_some(fd, head, HEAD_MAX, &len))
			return;
	head_len = (size_t)(end - head) + 4;
	body_have = len - head_len;
	*end = '\0';

	line = head;
	next = strstr(line, "\r\n");
	if (next)
		*next = '\0';
	{
		char *sp1 = strchr(line, ' ');
		char *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;

		if (!sp1 || !sp2)
			return;
		printf("REQ %.*s %.*s\n", (int)(sp1 - line), line, (int)(sp2 - sp1 - 1),
		       sp1 + 1);
	}
	while (next) {
		line = next + 2;
		next = strstr(line, "\r\n");
		if (next)
			*next = '\0';
		printf("H %s\n", line);
		if (strncasecmp(line, "content-length:", 15) == 0)
			content_length = strtoul(line + 15, NULL, 10);
		if (strncasecmp(line, "expect:", 7) == 0 &&
		    strcasestr(line, "100-continue"))
			expect_continue = true;
	}
	if (content_length > BODY_MAX)
		return;
	if (expect_continue && body_have < content_length) {
		static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

		write_all(fd, cont, sizeof(cont) - 1);
	}
	/* The body only needs to be drained. */
	while (body_have < content_length) {
		size_t n = 0;

		if (!read_some(fd, head, sizeof(head) - 1, &n))
			break;
		body_have += n;
	}
	printf("BODY %zu\nEND\n", body_have);
	fflush(stdout);
	write_all(fd, ok, sizeof(ok) - 1);
}

int
main(void)
{
	struct sockaddr_in a;
	int lfd;

	lfd = listen_loopback(64, SOCK_CLOEXEC, &a);
	if (lfd < 0) {
		perror("http-sink: listen");
		return 1;
	}
	printf("READY %u\n", (unsigned)ntohs(a.sin_port));
	fflush(stdout);
	for (;;) {
		struct pollfd p[2] = {{.fd = lfd, .events = POLLIN},
				      {.fd = 0, .events = POLLIN}};
		char buf[256];
		int cfd;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		if (p[1].revents) {
			ssize_t r = read(0, buf, sizeof(buf));

			if (r <= 0)
				return 0;
		}
		if (!(p[0].revents & POLLIN))
			continue;
		cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (cfd < 0)
			continue;
		serve(cfd);
		close(cfd);
	}
}
