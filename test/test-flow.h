/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Shared by the "context follows the work" tests (test-preload-flow*.c,
 * test-ctxdump-flow.c): HTTP clients for the flow-http helper and small
 * parsers for the helpers' output and ctxdump's JSON.  Static inline so
 * each test program takes what it uses. */

#include "test-common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define FLOW_NONE "trace=- span=-"

/* A connection to 127.0.0.1:port with one request's head sent, its
 * traceparent's trace-id made of one repeated hex digit: a GET, or with
 * body_len > 0 a POST announcing a body of body_len bytes (sent by the
 * caller). */
static inline int
flow_http_send_head(int port, char digit, size_t body_len)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port)};
	char trace[33], cl[48] = "", req[512];
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), n;

	ck_assert_int_ge(fd, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	memset(trace, digit, 32);
	trace[32] = '\0';
	if (body_len)
		snprintf(cl, sizeof(cl), "\r\nContent-Length: %zu", body_len);
	n = snprintf(req, sizeof(req),
		     "%s /r%c HTTP/1.1\r\nHost: 127.0.0.1\r\ntraceparent: "
		     "00-%s-00f067aa0ba902b7-01%s"
		     "\r\nConnection: close\r\n\r\n",
		     body_len ? "POST" : "GET", digit, trace, cl);
	ck_assert_int_eq(write(fd, req, (size_t)n), n);
	return fd;
}

/* The same, a GET: the whole request. */
static inline int
flow_http_send(int port, char digit)
{
	return flow_http_send_head(port, digit, 0);
}

/* The whole response (until the server closes), malloc'd. */
static inline char *
flow_http_read(int fd)
{
	size_t cap = 8192, len = 0;
	char *b = malloc(cap);

	ck_assert_ptr_nonnull(b);
	for (;;) {
		ssize_t r = read(fd, b + len, cap - len - 1);

		ck_assert_int_ge(r, 0);
		if (r == 0)
			break;
		len += (size_t)r;
		ck_assert_uint_lt(len, cap - 1);
	}
	b[len] = '\0';
	close(fd);
	return b;
}

/* The first line starting with prefix, malloc'd, or NULL. */
static inline char *
flow_line(const char *out, const char *prefix)
{
	size_t pl = strlen(prefix);
	const char *p = out;

	while (p && *p) {
		const char *nl = strchr(p, '\n');

		if (strncmp(p, prefix, pl) == 0)
			return strndup(p, nl ? (size_t)(nl - p) : strlen(p));
		p = nl ? nl + 1 : NULL;
	}
	return NULL;
}

/* The context ("trace=… span=…") a response body reports for where. */
static inline void
flow_body_ctx(const char *resp, const char *where, char *ctx, size_t n)
{
	const char *body = strstr(resp, "\r\n\r\n");
	char prefix[64];
	char *l;

	ck_assert_msg(body, "no response head: %s", resp);
	snprintf(prefix, sizeof(prefix), "%s=", where);
	l = flow_line(body + 4, prefix);
	ck_assert_msg(l, "no %s in %s", where, resp);
	snprintf(ctx, n, "%s", l + strlen(prefix));
	free(l);
}

/* The string value of "key" in a JSON fragment, or "" (also for null). */
static inline void
flow_json_str(const char *frag, const char *key, char *out, size_t n)
{
	char k[64];
	const char *p;

	snprintf(k, sizeof(k), "\"%s\": \"", key);
	p = strstr(frag, k);
	if (!p) {
		snprintf(out, n, "%s", "");
		return;
	}
	p += strlen(k);
	snprintf(out, n, "%.*s", (int)strcspn(p, "\""), p);
}
