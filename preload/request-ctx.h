/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The context model for an incoming HTTP request, shared by the socket
 * level and the library hooks so that a request gets the same context
 * whichever layer saw it:
 *
 * - valid traceparent: a server span like a non-recording SDK span -- the
 *   same trace-id, a new span-id, the incoming flags (known bits), the
 *   incoming parent-id kept for ctxdump, tracestate kept (truncated to 512
 *   bytes by whole entries), or dropped whole if it is invalid anywhere
 *   (W3C), including past what a layer stores: the socket level and
 *   HTTP/2 check those bytes as they go (w3c_tracestate_check_*()) and
 *   pass no tracestate, or HTTP_SCAN_F_TRACESTATE_BAD, for such a list;
 * - none, or invalid (which also drops tracestate, W3C): a new trace with
 *   random ids and the random flag (plus sampled if CTXSHIM_SAMPLED=1),
 *   unless CTXSHIM_NEW_TRACES=0, which publishes the attributes with zero
 *   ids;
 * - attributes: http.request.method, url.path (query removed unless
 *   CTXSHIM_URL_QUERY=1), then the CTXSHIM_HEADER_ATTRS headers;
 * - a method other than the nine semantic conventions know (RFC 9110 and
 *   PATCH, case-sensitive) is published as "_OTHER", the method itself as
 *   http.request.method_original (right after it);
 * - every value published is well-formed UTF-8 (OTEP-4947 values are
 *   UTF-8 strings, and readers such as the eBPF profiler drop others): a
 *   value whose published bytes are not (raw bytes >= 0x80 in a path,
 *   obs-text in a header) is left out whole, never cut to its valid part,
 *   which would look like a complete, different value.  Values longer
 *   than 255 bytes are still cut before the character that straddles
 *   byte 255 (thread-record.h), and that part is what is checked. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "cfg.h"
#include "thread-ctx.h"

/* Key index of http.request.method_original: appended to the key map
 * after the configured headers (process-ctx-pub.c), so that no earlier
 * index moves. */
#define CTXSHIM_KEY_NAME_METHOD_ORIGINAL "http.request.method_original"
static inline uint8_t
ctxshim_key_method_original(void)
{
	return (uint8_t)(CTXSHIM_KEY_FIRST_HEADER + ctxshim_cfg.n_header_attrs);
}

struct ctxshim_request {
	const char *method;
	size_t method_len;
	/* The method went on past method_len (a layer kept only its first
	 * bytes, hook-h2.h): it is no known method, and its original is left
	 * out rather than published cut. */
	bool method_cut;
	const char *target; /* request-target as received */
	size_t target_len;
	const char *traceparent; /* NULL = absent */
	size_t traceparent_len;
	bool traceparent_repeated;     /* two traceparent fields: invalid */
	const char *const *tracestate; /* header lines in order */
	const size_t *tracestate_lens;
	size_t n_tracestate;
	/* Values of the configured headers, by CTXSHIM_HEADER_ATTRS index;
	 * NULL = absent. */
	const char *extra[CTXSHIM_MAX_HEADER_ATTRS];
	size_t extra_len[CTXSHIM_MAX_HEADER_ATTRS];
};

/* Fill c for request r.  Pure apart from drawing random ids. */
void ctxshim_request_ctx(struct ctxshim_ctx *c, const struct ctxshim_request *r);

/* A request handed over as CGI meta-variables (RFC 3875), looked up by
 * name (NULL: absent): REQUEST_METHOD, the target as REQUEST_URI (else
 * SCRIPT_NAME + PATH_INFO + "?" QUERY_STRING), HTTP_TRACEPARENT and
 * HTTP_TRACESTATE as the request's headers, HTTP_<NAME> for each
 * CTXSHIM_HEADER_ATTRS header.  Fills c as ctxshim_request_ctx() does
 * (preload/request-cgi.c).  A CGI program's environment (shim.c) and a
 * FastCGI request's parameters (hooks/hook-fcgi.c) are the same list. */
typedef const char *ctxshim_cgi_lookup_fn(const char *name, void *arg);
void ctxshim_request_ctx_cgi(struct ctxshim_ctx *c,
			     ctxshim_cgi_lookup_fn *lookup,
			     void *arg);
/* The CGI meta-variable ctxshim_request_ctx_cgi() looks up for
 * CTXSHIM_HEADER_ATTRS header h: HTTP_<NAME> (RFC 3875 §4.1.18), or
 * CONTENT_TYPE / CONTENT_LENGTH; built in name, a pointer into it. */
#define CTXSHIM_CGI_VAR_MAX (sizeof("HTTP_") + CTXSHIM_HEADER_NAME_MAX)
const char *ctxshim_cgi_header_var(char name[CTXSHIM_CGI_VAR_MAX], const char *h);
/* A ctxshim_cgi_lookup_fn over an environ-style array (char **envp,
 * "NAME=value" strings, NULL-terminated): the first entry named name. */
const char *ctxshim_cgi_envp_lookup(const char *name, void *envp);

/* OTEL_INSTRUMENTATION_HTTP_KNOWN_METHODS: a comma-separated list of
 * case-sensitive methods that replaces the semantic conventions' nine as
 * the methods published as themselves (others: "_OTHER").  NULL or empty:
 * the default.  Call before any request (the constructor).  0, or
 * -EINVAL for more than 32 entries or one longer than 20 bytes (what was
 * in force stays). */
int ctxshim_request_known_methods(const char *list);

struct http_scan_capture;

/* ctxshim_request_ctx() for a head the scanner captured with flags
 * (http_scan_flags()); extra_index[i] is the scanner's extra-header index
 * of CTXSHIM_HEADER_ATTRS entry i (-1: none).  The socket level's
 * per-request path: one call, the request never leaves registers (B4). */
void ctxshim_request_ctx_capture(struct ctxshim_ctx *c,
				 const struct http_scan_capture *cap,
				 unsigned flags,
				 const int extra_index[CTXSHIM_MAX_HEADER_ATTRS]);

struct http_scan;
struct http_scan_config;

/* The socket level's usual read: if buf[0, len) is one whole request head
 * http_scan_whole() takes, fill c with
 * ctxshim_request_ctx_capture()'s context for it, leave st as
 * http_scan_feed() would, and return 0.  Else -EAGAIN, st unchanged and c
 * untouched: feed the bytes as usual.  The caller has made the cheap tests
 * first (http_scan_whole_ready(st, buf, len) is true: st between messages,
 * the read at least 16 bytes ending in LF), which are not repeated here
 * (B1). */
int ctxshim_request_ctx_whole(struct ctxshim_ctx *c,
			      struct http_scan *st,
			      const struct http_scan_config *cfg,
			      const void *buf,
			      size_t len,
			      const int extra_index[CTXSHIM_MAX_HEADER_ATTRS]);

/* The path part of an HTTP request-target (origin-form or absolute-form),
 * with the query unless keep_query.  Returns a pointer into target. */
const char *
ctxshim_url_path(const char *target, size_t len, bool keep_query, size_t *path_len);

/* memcpy() of n bytes, inline for the short values of a request's
 * attributes (method, path) and their copies (conn.c): a libc call and its
 * set-up cost more than the copy itself (B4).  Overlapping loads and
 * stores, so nothing outside s[0..n) is read or d[0..n) written. */
static inline void
ctxshim_copy_short(uint8_t *d, const void *src, size_t n)
{
	const uint8_t *s = src;

	if (n > 64) {
		memcpy(d, s, n);
	} else if (n >= 16) {
#if defined(__SSE2__)
		size_t i;

		for (i = 0; i + 16 < n; i += 16)
			_mm_storeu_si128((__m128i *)(void *)(d + i),
					 _mm_loadu_si128((const void *)(s + i)));
		_mm_storeu_si128((__m128i *)(void *)(d + n - 16),
				 _mm_loadu_si128((const void *)(s + n - 16)));
#else
		memcpy(d, s, n);
#endif
	} else if (n >= 8) {
		uint64_t a, b;

		memcpy(&a, s, 8);
		memcpy(&b, s + n - 8, 8);
		memcpy(d, &a, 8);
		memcpy(d + n - 8, &b, 8);
	} else if (n >= 4) {
		uint32_t a, b;

		memcpy(&a, s, 4);
		memcpy(&b, s + n - 4, 4);
		memcpy(d, &a, 4);
		memcpy(d + n - 4, &b, 4);
	} else if (n) {
		d[0] = s[0];
		d[n / 2] = s[n / 2];
		d[n - 1] = s[n - 1];
	}
}
