/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* FastCGI records as a web server (nginx, a FastCGI client) writes them to
 * its application, for the helpers that play that client on a loopback
 * connection: request id 1, no padding, names and values shorter than
 * 128 bytes. */

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A record header: version 1, type, request id 1, content length len. */
static inline size_t
fcgi_rec(uint8_t *b, unsigned type, size_t len)
{
	b[0] = 1;
	b[1] = (uint8_t)type;
	b[2] = 0;
	b[3] = 1;
	b[4] = (uint8_t)(len >> 8);
	b[5] = (uint8_t)len;
	b[6] = 0;
	b[7] = 0;
	return 8;
}

/* One name-value pair of FCGI_PARAMS. */
static inline size_t
fcgi_nv(uint8_t *b, const char *name, const char *value)
{
	size_t nl = strlen(name), vl = strlen(value);

	b[0] = (uint8_t)nl;
	b[1] = (uint8_t)vl;
	memcpy(b + 2, name, nl);
	memcpy(b + 2 + nl, value, vl);
	return 2 + nl + vl;
}

/* FCGI_BEGIN_REQUEST: FCGI_RESPONDER, FCGI_KEEP_CONN. */
static inline __attribute__((unused)) size_t
fcgi_begin(uint8_t *b)
{
	size_t n = fcgi_rec(b, 1, 8);

	memset(b + n, 0, 8);
	b[n + 1] = 1; /* FCGI_RESPONDER */
	b[n + 2] = 1; /* FCGI_KEEP_CONN */
	return n + 8;
}

/* The parameters of a GET of path with a traceparent, and their end (an
 * empty FCGI_PARAMS). */
static inline __attribute__((unused)) size_t
fcgi_get(uint8_t *b, const char *path, const char *traceparent)
{
	size_t n = 8;

	n += fcgi_nv(b + n, "REQUEST_METHOD", "GET");
	n += fcgi_nv(b + n, "REQUEST_URI", path);
	n += fcgi_nv(b + n, "HTTP_TRACEPARENT", traceparent);
	(void)fcgi_rec(b, 4, n - 8);
	return n + fcgi_rec(b + n, 4, 0);
}
