/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The HTTP/1.1 request loop of the thread-per-connection test servers
 * tpc-server (plain sockets, several read calls) and tls-server (OpenSSL
 * or GnuTLS): request heads read with reads of at most read_size bytes,
 * Content-Length bodies read and dropped, pipelined requests kept in the
 * buffer for the next round, and one fixed response; a "100 Continue"
 * before the body of a head that expects one, if the server asks.  Shared so that the
 * shim's socket and TLS hooks see the same read pattern from both. */

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

struct http1_conn {
	/* > 0: bytes read; otherwise the connection is over (a read that
	 * wants EINTR retried retries itself). */
	ssize_t (*read)(void *io, char *buf, size_t n);
	void *io;
	size_t read_size; /* bytes per read, at most */
	char *buf;
	size_t cap, len;
	size_t req_len; /* head and body of the request http1_next() returned */
	/* If set: called before the body of a head with "Expect:
	 * 100-continue" is read, to write the interim "100 Continue"
	 * (RFC 9110, 10.1.1); < 0: the connection is over. */
	int (*cont)(void *io);
};

/* The end of the head at the start of buf (after its blank line), or
 * NULL. */
static inline const char *
http1_head_end(const char *buf, size_t len)
{
	size_t i;

	for (i = 3; i < len; i++)
		if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' &&
		    buf[i - 3] == '\r')
			return buf + i + 1;
	return NULL;
}

/* Does the head have "Expect: 100-continue"? */
static inline bool
http1_expects_continue(const char *head, size_t len)
{
	const char *p = head, *end = head + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));

		if (!nl)
			break;
		if ((size_t)(nl - p) > 7 && strncasecmp(p, "expect:", 7) == 0) {
			const char *v = p + 7;

			while (v < nl && *v == ' ')
				v++;
			return (size_t)(nl - v) >= 12 &&
			       strncasecmp(v, "100-continue", 12) == 0;
		}
		p = nl + 1;
	}
	return false;
}

/* The head's Content-Length, 0 if none. */
static inline size_t
http1_content_length(const char *head, size_t len)
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

static inline ssize_t
http1_read_more(struct http1_conn *c)
{
	size_t n = c->read_size < c->cap - c->len ? c->read_size : c->cap - c->len;
	ssize_t r = c->read(c->io, c->buf + c->len, n);

	if (r > 0)
		c->len += (size_t)r;
	return r;
}

/* Reads until the buffer starts with a whole request (head and body).
 * Returns the head's length (the head is c->buf, until http1_drop()) and
 * the request's path in path; 0 when the connection is over or a request
 * does not fit in the buffer. */
static inline size_t
http1_next(struct http1_conn *c, char *path, size_t path_cap)
{
	const char *end, *s1, *s2;
	size_t head_len, body, sp;

	while ((end = http1_head_end(c->buf, c->len)) == NULL)
		if (c->len == c->cap || http1_read_more(c) <= 0)
			return 0;
	head_len = (size_t)(end - c->buf);
	body = http1_content_length(c->buf, head_len);
	if (c->cont && body && c->len < head_len + body &&
	    http1_expects_continue(c->buf, head_len) && c->cont(c->io) < 0)
		return 0;
	while (c->len < head_len + body && c->len < c->cap)
		if (http1_read_more(c) <= 0)
			return 0;
	if (head_len + body > c->len)
		return 0;
	s1 = memchr(c->buf, ' ', head_len);
	s2 = s1 ? memchr(s1 + 1, ' ', head_len - (size_t)(s1 + 1 - c->buf)) : NULL;
	sp = s1 && s2 ? (size_t)(s2 - s1 - 1) : 0;
	if (sp >= path_cap)
		sp = path_cap - 1;
	memcpy(path, s1 ? s1 + 1 : "", sp);
	path[sp] = '\0';
	c->req_len = head_len + body;
	return head_len;
}

/* Drops the request http1_next() returned; what follows it (pipelined
 * requests) stays. */
static inline void
http1_drop(struct http1_conn *c)
{
	memmove(c->buf, c->buf + c->req_len, c->len - c->req_len);
	c->len -= c->req_len;
	c->req_len = 0;
}

/* The response to every request: status 200, body "path=<path>\n". */
static inline size_t
http1_response(char *out, size_t cap, const char *path)
{
	return (size_t)snprintf(
		out, cap, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\npath=%s\n",
		strlen(path) + 6, path);
}
