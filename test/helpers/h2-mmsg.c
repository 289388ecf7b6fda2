/* SPDX-License-Identifier: Apache-2.0 */
/* A cleartext HTTP/2 server with HTTP/2 code of its own (no nghttp2
 * session: the socket level follows it, preload/conn.c, "HTTP/2") for a
 * real client that upgrades its connection from HTTP/1.1 (curl --http2,
 * several URLs on one connection: the upgrade request is stream 1, then
 * 3, 5, ...; curl 7.88's --http2-prior-knowledge cannot reuse a
 * connection, curl issue 10634), which writes the 101 alone, then each
 * response with one sendmmsg() of several messages, the frames split
 * across them as a test needs, so that the shim's walk of the server's
 * frames (conn_h2_written()) must see every message's bytes, in order.
 *
 *   h2-mmsg settings|cut|frames|interim|interim-v
 *     settings  the first response's first message holds the server's
 *               SETTINGS, its second the response (HEADERS, DATA with
 *               END_STREAM); the second's, the ACK of the client's
 *               SETTINGS, then the response; later ones: HEADERS, then
 *               DATA
 *     cut       HEADERS (after SETTINGS or ACK in the first two) and a
 *               DATA frame's header with the first 10 bytes of its 100,
 *               then the other 90 bytes in the next message
 *     frames    one message per piece: SETTINGS or ACK (the first two),
 *               HEADERS, DATA's header, its payload in 4 messages of 25
 *               bytes
 *     interim   no sendmmsg(): the frames before DATA in one write(),
 *               DATA's 9-byte header in a second, its payload in a third,
 *               a payload that starts with "HTTP/1.1 100 Continue\r\n\r\n"
 *               (bytes of a body, not a status line: the connection
 *               speaks HTTP/2)
 *     interim-v the same, the payload written with writev() of two
 *               iovecs, the first those 25 bytes
 *
 * One thread, one connection, blocking reads (no wait between requests).
 * Prints "READY <port>", then "READ <stream> <trace-id the thread shows>"
 * (or "none") after the read that brought a request (for stream 1 its
 * HTTP/1.1 head, for the others their HEADERS), "WROTE
 * <stream> <trace-id>" after its response, "END" once the client closed. */
#include "config.h"

#include "ctxobs.h"
#include "h2-build.h"
#include "listen-loopback.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define BODY 100

static uint8_t in[16384];
static size_t in_len;
static bool preface;
static uint32_t last;

static void
die(const char *what)
{
	perror(what);
	exit(1);
}

static void
seen(const char *step, uint32_t stream)
{
	char t[33];

	printf("%s %u %s\n", step, stream, ctxobs_trace(t));
	fflush(stdout);
}

/* Reads fd until a HEADERS frame of a new stream is whole in the buffer;
 * that stream, or 0 at the client's end. */
static uint32_t
next_request(int fd)
{
	static const char pre[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	const size_t pl = sizeof(pre) - 1;

	for (;;) {
		size_t off = 0, flen;
		uint32_t found = 0, id;
		ssize_t n;

		if (!preface && in_len >= pl) {
			if (memcmp(in, pre, pl) != 0)
				die("no client preface");
			preface = true;
			off = pl;
		}
		while (preface && !found && in_len - off >= 9 &&
		       in_len - off >=
			       9 + (flen = (size_t)in[off] << 16 |
					   (size_t)in[off + 1] << 8 | in[off + 2])) {
			id = ((uint32_t)in[off + 5] << 24 |
			      (uint32_t)in[off + 6] << 16 | (uint32_t)in[off + 7] << 8 |
			      in[off + 8]) &
			     0x7fffffff;
			if (in[off + 3] == 1 && id > last)
				found = last = id;
			off += 9 + flen;
		}
		memmove(in, in + off, in_len - off);
		in_len -= off;
		if (found)
			return found;
		if (in_len == sizeof(in))
			die("buffer full");
		n = read(fd, in + in_len, sizeof(in) - in_len);
		if (n < 0)
			die("read");
		if (n == 0)
			return 0;
		in_len += (size_t)n;
	}
}

static void
write_all(int fd, const uint8_t *p, size_t n)
{
	if (write(fd, p, n) != (ssize_t)n)
		die("write");
}

/* The response in out, its DATA payload at data (BODY bytes), written as
 * "interim" or "interim-v" says. */
static void
respond_interim(int fd, const char *how, uint8_t *out, size_t data)
{
	static const char st[] = "HTTP/1.1 100 Continue\r\n\r\n";
	const size_t sl = sizeof(st) - 1;

	memcpy(out + data, st, sl);
	write_all(fd, out, data - 9);
	write_all(fd, out + data - 9, 9);
	if (strcmp(how, "interim-v") == 0) {
		struct iovec v[2] = {{out + data, sl}, {out + data + sl, BODY - sl}};

		if (writev(fd, v, 2) != BODY)
			die("writev");
	} else {
		write_all(fd, out + data, BODY);
	}
}

/* Stream's response, in the messages how says, with one sendmmsg();
 * first: the first response, after the 101 (the server's SETTINGS first),
 * ack: the first after the client's preface (the ACK of its SETTINGS
 * first). */
static void
respond(int fd, const char *how, uint32_t stream, bool first, bool ack)
{
	static uint8_t out[512];
	struct iovec iov[8];
	struct mmsghdr mm[8];
	size_t n = 0, at[9], k = 0, i, data;
	int r;

	/* The frames, end to end in out; at[]: where each message starts. */
	at[k++] = 0;
	if (first || ack) {
		n += h2_frame(out + n, 0, 4, ack ? 1 : 0, 0); /* SETTINGS, or ACK */
		if (strcmp(how, "settings") == 0 || strcmp(how, "frames") == 0)
			at[k++] = n;
	}
	n += h2_frame(out + n, 1, 1, 0x4, stream); /* HEADERS, END_HEADERS */
	out[n++] = 0x88;                           /* :status 200 */
	if (strcmp(how, "frames") == 0 ||
	    (!first && !ack && strcmp(how, "settings") == 0))
		at[k++] = n;
	n += h2_frame(out + n, BODY, 0, 0x1, stream); /* DATA, END_STREAM */
	data = n;
	memset(out + n, 'a', BODY);
	n += BODY;
	if (strncmp(how, "interim", 7) == 0) {
		respond_interim(fd, how, out, data);
		return;
	}
	if (strcmp(how, "cut") == 0) {
		at[k++] = data + 10;
	} else if (strcmp(how, "frames") == 0) {
		for (i = 0; i < 4; i++)
			at[k++] = data + i * (BODY / 4);
	}
	at[k] = n;
	memset(mm, 0, sizeof(mm));
	for (i = 0; i < k; i++) {
		iov[i] = (struct iovec){out + at[i], at[i + 1] - at[i]};
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	r = sendmmsg(fd, mm, (unsigned)k, 0);
	if (r != (int)k)
		die("sendmmsg");
	for (i = 0; i < k; i++)
		if (mm[i].msg_len != at[i + 1] - at[i]) {
			fprintf(stderr, "sendmmsg: message %zu short\n", i);
			exit(1);
		}
}

int
main(int argc, char **argv)
{
	static const char switching[] = "HTTP/1.1 101 Switching Protocols\r\n"
					"Connection: Upgrade\r\nUpgrade: h2c\r\n\r\n";
	struct sockaddr_in a;
	uint32_t stream;
	bool first = true;
	int l, fd;

	if (argc != 2 ||
	    (strcmp(argv[1], "settings") != 0 && strcmp(argv[1], "cut") != 0 &&
	     strcmp(argv[1], "frames") != 0 && strcmp(argv[1], "interim") != 0 &&
	     strcmp(argv[1], "interim-v") != 0)) {
		fputs("usage: h2-mmsg settings|cut|frames|interim|interim-v\n", stderr);
		return 2;
	}
	l = listen_loopback(16, SOCK_CLOEXEC, &a);
	if (l < 0)
		die("listen");
	printf("READY %u\n", ntohs(a.sin_port));
	fflush(stdout);
	if ((fd = accept4(l, NULL, NULL, SOCK_CLOEXEC)) < 0)
		die("accept");
	/* The upgrade request: the client sends nothing after its head
	 * before the 101. */
	do {
		ssize_t k = read(fd, in + in_len, sizeof(in) - in_len);

		if (k <= 0)
			die("no head");
		in_len += (size_t)k;
	} while (in_len < 4 || memcmp(in + in_len - 4, "\r\n\r\n", 4) != 0);
	if (!memmem(in, in_len, "h2c", 3))
		die("no Upgrade: h2c");
	in_len = 0;
	stream = last = 1;
	do {
		seen("READ", stream);
		if (first && write(fd, switching, sizeof(switching) - 1) !=
				     (ssize_t)sizeof(switching) - 1)
			die("write 101");
		respond(fd, argv[1], stream, first, stream == 3);
		first = false;
		seen("WROTE", stream);
	} while ((stream = next_request(fd)) != 0);
	close(fd);
	close(l);
	printf("END\n");
	fflush(stdout);
	return 0;
}
