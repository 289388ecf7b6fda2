/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the split-independence checks of the HTTP head scanner compare:
 * a copy of a capture's values (struct snap), its equality, and a feed
 * from a buffer of exactly the read's size.  Shared by test/test-http-scan.c
 * and the fuzz harness test/fuzz/fuzz-http-scan.c, which check the
 * capture's bounds themselves before snap_take(). */

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "http-scan.h"

struct snap {
	char method[HTTP_SCAN_METHOD_MAX + 1];
	char target[HTTP_SCAN_TARGET_MAX + 1];
	char tp[HTTP_SCAN_TRACEPARENT_MAX + 1];
	char ts[HTTP_SCAN_TRACESTATE_MAX + 1];
	char extra[HTTP_SCAN_EXTRA_MAX][HTTP_SCAN_VALUE_MAX + 1];
	size_t method_len, target_len, tp_len, ts_len, extra_len[HTTP_SCAN_EXTRA_MAX];
	bool ts_truncated;
	unsigned extra_present, extra_truncated, extra_bad;
};

static inline size_t
snap_min(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* Copy the first n_extra extra values and everything else; lengths are
 * clamped (the callers assert them first), strings NUL-terminated. */
static inline void
snap_take(struct snap *s, const struct http_scan_capture *cap, unsigned n_extra)
{
	unsigned k;

	memset(s, 0, sizeof(*s));
	s->method_len = snap_min(cap->method_len, HTTP_SCAN_METHOD_MAX);
	memcpy(s->method, cap->method, s->method_len);
	s->target_len = snap_min(cap->target_len, HTTP_SCAN_TARGET_MAX);
	memcpy(s->target, cap->target, s->target_len);
	s->tp_len = snap_min(cap->traceparent_len, HTTP_SCAN_TRACEPARENT_MAX);
	memcpy(s->tp, cap->traceparent, s->tp_len);
	s->ts_len = snap_min(cap->tracestate_len, HTTP_SCAN_TRACESTATE_MAX);
	memcpy(s->ts, cap->tracestate, s->ts_len);
	s->ts_truncated = cap->tracestate_truncated;
	s->extra_present = cap->extra_present;
	s->extra_truncated = cap->extra_truncated;
	s->extra_bad = cap->extra_bad;
	for (k = 0; k < n_extra && k < HTTP_SCAN_EXTRA_MAX; k++) {
		s->extra_len[k] = snap_min(cap->extra_len[k], HTTP_SCAN_VALUE_MAX);
		memcpy(s->extra[k], cap->extra[k], s->extra_len[k]);
	}
}

static inline bool
snap_eq(const struct snap *a, const struct snap *b)
{
	unsigned k;

	if (a->method_len != b->method_len ||
	    memcmp(a->method, b->method, a->method_len) ||
	    a->target_len != b->target_len ||
	    memcmp(a->target, b->target, a->target_len) || a->tp_len != b->tp_len ||
	    memcmp(a->tp, b->tp, a->tp_len) || a->ts_len != b->ts_len ||
	    memcmp(a->ts, b->ts, a->ts_len) || a->ts_truncated != b->ts_truncated ||
	    a->extra_present != b->extra_present ||
	    a->extra_truncated != b->extra_truncated || a->extra_bad != b->extra_bad)
		return false;
	for (k = 0; k < HTTP_SCAN_EXTRA_MAX; k++)
		if (a->extra_len[k] != b->extra_len[k] ||
		    memcmp(a->extra[k], b->extra[k], a->extra_len[k]))
			return false;
	return true;
}

/* Each read from a heap block of exactly its size, as a read() buffer
 * may end at the end of a mapping: ASan and valgrind report any byte the
 * scanner reads outside it (its 16-byte loads must stay inside). */
static inline enum http_scan_status
feed_exact(struct http_scan *st,
	   const struct http_scan_config *cfg,
	   struct http_scan_capture *cap,
	   const uint8_t *d,
	   size_t n,
	   size_t *used)
{
	uint8_t *copy = malloc(n ? n : 1);
	enum http_scan_status r;

	if (!copy)
		abort();
	memcpy(copy, d, n);
	r = http_scan_feed(st, cfg, cap, copy, n, used);
	free(copy);
	return r;
}

/* The same values from a head http_scan_whole() took in place.  A capture
 * also says whether the tracestate or a value was cut (the request model
 * does not read those bits): snap_norm() clears them before a
 * comparison. */
static inline void
snap_take_head(struct snap *s, const struct http_scan_head *h, unsigned n_extra)
{
	unsigned k;

	memset(s, 0, sizeof(*s));
	s->method_len = snap_min(h->method_len, HTTP_SCAN_METHOD_MAX);
	memcpy(s->method, h->method, s->method_len);
	s->target_len = snap_min(h->target_len, HTTP_SCAN_TARGET_MAX);
	memcpy(s->target, h->target, s->target_len);
	if (h->traceparent) {
		s->tp_len = snap_min(h->traceparent_len, HTTP_SCAN_TRACEPARENT_MAX);
		memcpy(s->tp, h->traceparent, s->tp_len);
	}
	if (h->tracestate) {
		s->ts_len = snap_min(h->tracestate_len, HTTP_SCAN_TRACESTATE_MAX);
		memcpy(s->ts, h->tracestate, s->ts_len);
	}
	s->extra_present = h->extra_present;
	for (k = 0; k < n_extra && k < HTTP_SCAN_EXTRA_MAX; k++) {
		if (!(h->extra_present & (1u << k)))
			continue;
		s->extra_len[k] = snap_min(h->extra_len[k], HTTP_SCAN_VALUE_MAX);
		memcpy(s->extra[k], h->extra[k], s->extra_len[k]);
	}
}

static inline void
snap_norm(struct snap *s)
{
	s->ts_truncated = false;
	s->extra_truncated = 0;
}
