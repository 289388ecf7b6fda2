/* SPDX-License-Identifier: Apache-2.0 */
/* A thread-per-connection HTTP/1.1 server with no tracing code, for the
 * socket-level tests.
 *
 *   tpc-server [--read-size N] [--io read|recv|recvfrom|readv|recvmsg|
 *               read_chk|recv_chk|recvfrom_chk]
 *              [--wio write|send|sendto|writev|sendmsg] [--block-poll]
 *
 * Listens on 127.0.0.1, port chosen by the kernel, prints "READY <port>",
 * then serves each connection on its own thread: reads request
 * heads with N-byte reads through the chosen call, skips Content-Length
 * bodies, keeps the connection open (keep-alive, pipelining from its own
 * buffer) until the client closes.  A request whose path starts with
 * "/block" prints "BLOCK <tid> <path>" and waits for one line on stdin
 * before answering (with --block-poll it waits in poll() on a pipe, as a
 * handler waiting on a database or an upstream would); every answered
 * request prints "DONE <tid> <path>".
 * The response body is "path=<path>\n".  Exits when stdin is closed. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* The fortified entry points, called directly as a fortified build
 * would. */
ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd,
		       void *buf,
		       size_t len,
		       size_t buflen,
		       int flags,
		       struct sockaddr *addr,
		       socklen_t *addrlen);

#define BUF_MAX (512 * 1024)

static size_t read_size = 4096;
static const char *io = "read";
static const char *wio = "write";
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static sem_t go;
static bool block_poll;
static int go_pipe[2];

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
say(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&out_lock);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
	pthread_mutex_unlock(&out_lock);
}

static ssize_t
do_read(int fd, char *buf, size_t n)
{
	if (strcmp(io, "recv") == 0)
		return recv(fd, buf, n, 0);
	if (strcmp(io, "recvfrom") == 0)
		return recvfrom(fd, buf, n, 0, NULL, NULL);
	if (strcmp(io, "readv") == 0 || strcmp(io, "recvmsg") == 0) {
		/* Two iovecs, so the split between them is exercised too. */
		size_t a = n / 2 ? n / 2 : n, b = n - a;
		struct iovec v[2] = {{buf, a}, {buf + a, b}};
		struct msghdr m = {.msg_iov = v, .msg_iovlen = b ? 2 : 1};

		if (strcmp(io, "readv") == 0)
			return readv(fd, v, b ? 2 : 1);
		return recvmsg(fd, &m, 0);
	}
	if (strcmp(io, "read_chk") == 0)
		return __read_chk(fd, buf, n, n);
	if (strcmp(io, "recv_chk") == 0)
		return __recv_chk(fd, buf, n, n, 0);
	if (strcmp(io, "recvfrom_chk") == 0)
		return __recvfrom_chk(fd, buf, n, n, 0, NULL, NULL);
	return read(fd, buf, n);
}

static int
do_write(int fd, const char *buf, size_t n)
{
	while (n) {
		ssize_t r;

		if (strcmp(wio, "send") == 0) {
			r = send(fd, buf, n, MSG_NOSIGNAL);
		} else if (strcmp(wio, "sendto") == 0) {
			r = sendto(fd, buf, n, MSG_NOSIGNAL, NULL, 0);
		} else if (strcmp(wio, "writev") == 0 || strcmp(wio, "sendmsg") == 0) {
			size_t a = n > 8 ? 8 : n;
			struct iovec v[2] = {{(void *)buf, a},
					     {(void *)(buf + a), n - a}};
			struct msghdr m = {.msg_iov = v, .msg_iovlen = 2};

			r = wio[1] == 'r' ? writev(fd, v, 2)
					  : sendmsg(fd, &m, MSG_NOSIGNAL);
		} else {
			r = write(fd, buf, n);
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		buf += r;
		n -= (size_t)r;
	}
	return 0;
}

static const char *
find_head_end(const char *buf, size_t len)
{
	size_t i;

	for (i = 3; i < len; i++)
		if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' &&
		    buf[i - 3] == '\r')
			return buf + i + 1;
	return NULL;
}

static size_t
content_length(const char *head, size_t len)
{
	const char *p = head, *end = head + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));

		if (!nl)
			break;
		if ((size_t)(nl - p) > 15 && strncasecmp(p, "content-length:", 15) == 0)
			return (size_t)strtoul(p + 15, NULL, 10);
		p = nl + 1;
	}
	return 0;
}

static void *
serve(void *arg)
{
	int fd = (int)(long)arg;
	long tid = syscall(SYS_gettid);
	char *buf = malloc(BUF_MAX);
	size_t len = 0;

	say("CONN %ld\n", tid);
	for (;;) {
		const char *end = find_head_end(buf, len);
		char path[1024], resp[1400];
		size_t head_len, body, sp, n;
		const char *s1, *s2;
		ssize_t r;

		if (!end) {
			if (len == BUF_MAX)
				break;
			n = read_size < BUF_MAX - len ? read_size : BUF_MAX - len;
			r = do_read(fd, buf + len, n);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
			len += (size_t)r;
			continue;
		}
		head_len = (size_t)(end - buf);
		body = content_length(buf, head_len);
		/* Read the body, then drop head and body from the buffer. */
		while (len < head_len + body && len < BUF_MAX) {
			r = do_read(fd, buf + len,
				    BUF_MAX - len < read_size ? BUF_MAX - len
							      : read_size);
			if (r <= 0)
				goto out;
			len += (size_t)r;
		}
		s1 = memchr(buf, ' ', head_len);
		s2 = s1 ? memchr(s1 + 1, ' ', head_len - (size_t)(s1 + 1 - buf)) : NULL;
		sp = s1 && s2 ? (size_t)(s2 - s1 - 1) : 0;
		if (sp >= sizeof(path))
			sp = sizeof(path) - 1;
		memcpy(path, s1 ? s1 + 1 : "", sp);
		path[sp] = '\0';
		if (head_len + body > len)
			break;
		memmove(buf, buf + head_len + body, len - head_len - body);
		len -= head_len + body;

		if (strncmp(path, "/block", 6) == 0) {
			say("BLOCK %ld %s\n", tid, path);
			if (block_poll) {
				struct pollfd p = {.fd = go_pipe[0], .events = POLLIN};
				char c;

				while (poll(&p, 1, -1) < 0 || read(go_pipe[0], &c, 1) != 1)
					;
			} else {
				while (sem_wait(&go) < 0)
					;
			}
		}
		n = (size_t)snprintf(
			resp, sizeof(resp),
			"HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\npath=%s\n",
			strlen(path) + 6, path);
		if (do_write(fd, resp, n) < 0)
			break;
		say("DONE %ld %s\n", tid, path);
	}
out:
	close(fd);
	free(buf);
	say("CLOSED %ld\n", tid);
	return NULL;
}

static void *
control(void *arg)
{
	char line[256];

	(void)arg;
	/* One line on stdin releases one blocked request; EOF ends it all. */
	while (fgets(line, sizeof(line), stdin)) {
		if (block_poll)
			(void)!write(go_pipe[1], "x", 1);
		else
			sem_post(&go);
	}
	exit(0);
}

int
main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);
	pthread_t th;
	int ls, i, one = 1;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--read-size") == 0 && i + 1 < argc)
			read_size = (size_t)strtoul(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--io") == 0 && i + 1 < argc)
			io = argv[++i];
		else if (strcmp(argv[i], "--wio") == 0 && i + 1 < argc)
			wio = argv[++i];
		else if (strcmp(argv[i], "--block-poll") == 0)
			block_poll = true;
		else {
			fprintf(stderr, "tpc-server: unknown option %s\n", argv[i]);
			return 64;
		}
	}
	if (read_size == 0 || read_size > BUF_MAX)
		read_size = 4096;
	sem_init(&go, 0, 0);
	if (pipe2(go_pipe, O_CLOEXEC) < 0)
		return 1;
	ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(ls, 64) < 0 || getsockname(ls, (struct sockaddr *)&a, &al) < 0) {
		perror("tpc-server: listen");
		return 1;
	}
	pthread_create(&th, NULL, control, NULL);
	say("READY %d\n", ntohs(a.sin_port));
	for (;;) {
		int fd = accept(ls, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			perror("tpc-server: accept");
			return 1;
		}
		if (pthread_create(&th, NULL, serve, (void *)(long)fd) != 0)
			close(fd);
		else
			pthread_detach(th);
	}
}
