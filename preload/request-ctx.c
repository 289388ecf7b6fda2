/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "request-ctx.h"

#include "http-scan.h"
#include "w3c.h"

#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* The first '?' or '#' in p[0..n), or NULL: where the path of a
 * request-target ends.  One pass instead of a memchr() for each byte (two
 * libc calls per request, B4): with SSE2, 16 bytes per step, the last
 * step re-reading the final 16 bytes so that nothing outside p[0..n) is
 * ever read (the bytes read twice held neither, so its first match is the
 * first overall).  Targets of 4 to 15 bytes ("/small.html") take one step
 * too: the first and the last 8 (or 4) bytes, overlapping, in the two
 * halves of a register -- a match in the first half is the first overall
 * -- where the byte loop cost ~100 instructions (B1i).  Shorter ones go
 * byte by byte. */
static inline __attribute__((always_inline)) const char *
url_path_end(const char *p, size_t n)
{
	size_t i = 0;

#if defined(__SSE2__)
	const __m128i qm = _mm_set1_epi8('?'), hash = _mm_set1_epi8('#');

	if (n >= 16) {
		for (;;) {
			__m128i x =
				_mm_loadu_si128((const __m128i *)(const void *)(p + i));
			unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(
				_mm_cmpeq_epi8(x, qm), _mm_cmpeq_epi8(x, hash)));

			if (m)
				return p + i + (unsigned)__builtin_ctz(m);
			if (i + 16 == n)
				return NULL;
			i = n - i - 16 >= 16 ? i + 16 : n - 16;
		}
	}
	if (n >= 4) {
		size_t k;
		__m128i x;
		unsigned m;

		if (n >= 8) {
			k = n - 8;
			x = _mm_unpacklo_epi64(
				_mm_loadl_epi64((const __m128i *)(const void *)p),
				_mm_loadl_epi64((const __m128i *)(const void *)(p + k)));
		} else {
			uint32_t a, b;

			k = n - 4;
			memcpy(&a, p, 4);
			memcpy(&b, p + k, 4);
			x = _mm_unpacklo_epi64(_mm_cvtsi32_si128((int)a),
					       _mm_cvtsi32_si128((int)b));
		}
		m = (unsigned)_mm_movemask_epi8(
			_mm_or_si128(_mm_cmpeq_epi8(x, qm), _mm_cmpeq_epi8(x, hash)));
		if (m & 0xff)
			return p + (unsigned)__builtin_ctz(m);
		if (m)
			return p + k + ((unsigned)__builtin_ctz(m) - 8);
		return NULL;
	}
#endif
	for (; i < n; i++)
		if (p[i] == '?' || p[i] == '#')
			return p + i;
	return NULL;
}

/* Where the path of an absolute-form target (proxies: scheme "://"
 * authority path) starts; target itself if it is not one.  Out of line so
 * that the usual origin-form target ("/...") does not pay for its memchr()
 * calls' register saves. */
static __attribute__((noinline, cold)) const char *
url_absolute_path(const char *target, size_t len)
{
	const char *end = target + len, *s = memchr(target, ':', len);

	if (s && end - s > 3 && s[1] == '/' && s[2] == '/') {
		const char *slash = memchr(s + 3, '/', (size_t)(end - s - 3));
		const char *qm = memchr(s + 3, '?', (size_t)(end - s - 3));

		if (slash && (!qm || slash < qm))
			return slash;
		if (qm)
			return qm; /* no path: "" then the query */
		return end;
	}
	return target;
}

static inline __attribute__((always_inline)) const char *
url_path(const char *target, size_t len, bool keep_query, size_t *path_len)
{
	const char *p = target, *end = target + len, *q;

	if (len > 0 && target[0] != '/')
		p = url_absolute_path(target, len);
	if (!keep_query) {
		/* The path ends at the query or at a fragment (which clients
		 * should not send), whichever comes first. */
		q = url_path_end(p, (size_t)(end - p));
		if (q)
			end = q;
	}
	*path_len = (size_t)(end - p);
	return p;
}

const char *
ctxshim_url_path(const char *target, size_t len, bool keep_query, size_t *path_len)
{
	return url_path(target, len, keep_query, path_len);
}

/* The request's attributes are encoded into c->attrs with the length in a
 * local (a trec_attr_writer whose address is passed to a function lives
 * in memory, which made every inline entry reload and store it, B4).
 * Anything but the usual entry goes through trec_attrs_add(), which keeps
 * the rules for capping and dropping in one place. */
static __attribute__((noinline, cold)) size_t
attr_add_slow(uint8_t *buf, size_t len, uint8_t key, const void *v, size_t n)
{
	struct trec_attr_writer w;

	trec_attrs_init(&w, buf, TREC_ATTRS_MAX);
	w.len = len;
	(void)trec_attrs_add(&w, key, v, n);
	return w.len;
}

/* trec_attrs_add() inline for the usual entry: a value of at most 255
 * bytes that fits whole.  Returns the new length.  v is never NULL. */
static inline size_t
attr_put(uint8_t *buf, size_t len, uint8_t key, const void *v, size_t n)
{
	if (n <= TREC_VALUE_MAX && len <= TREC_ATTRS_MAX &&
	    TREC_ATTRS_MAX - len >= TREC_ENTRY_OVERHEAD + n) {
		uint8_t *d = buf + len;

		d[0] = key;
		d[1] = (uint8_t)n;
		ctxshim_copy_short(d + TREC_ENTRY_OVERHEAD, v, n);
		return len + TREC_ENTRY_OVERHEAD + n;
	}
	return attr_add_slow(buf, len, key, v, n);
}

/* ctxshim_ctx_add_parent_attr(), inline: every traced request adds this
 * entry, and the call plus w3c_hex_encode() were ~55 instructions per
 * request (B4).  Same rules: the digits straight into place when the
 * entry fits, else trec_attrs_add(), which counts it as dropped. */
static inline size_t
attr_put_parent(uint8_t *buf, size_t len, const uint8_t id[8])
{
	char hex[16];
	bool direct = len <= TREC_ATTRS_MAX &&
		      TREC_ATTRS_MAX - len >= TREC_ENTRY_OVERHEAD + sizeof(hex);
	char *out = hex;

	if (direct) {
		buf[len] = CTXSHIM_KEY_PARENT;
		buf[len + 1] = sizeof(hex);
		out = (char *)buf + len + TREC_ENTRY_OVERHEAD;
	}
#if defined(__SSE2__)
	{
		/* Nibbles high then low per byte; '0'..'9' then 'a'..'f'. */
		__m128i x = _mm_loadl_epi64((const __m128i *)(const void *)id);
		__m128i mask = _mm_set1_epi8(0x0f);
		__m128i hi = _mm_and_si128(_mm_srli_epi16(x, 4), mask);
		__m128i lo = _mm_and_si128(x, mask);
		__m128i nib = _mm_unpacklo_epi8(hi, lo);
		__m128i alpha = _mm_and_si128(_mm_cmpgt_epi8(nib, _mm_set1_epi8(9)),
					      _mm_set1_epi8('a' - '0' - 10));
		__m128i zero = _mm_set1_epi8('0');

		_mm_storeu_si128((__m128i *)(void *)out,
				 _mm_add_epi8(nib, _mm_add_epi8(alpha, zero)));
	}
#else
	w3c_hex_encode(out, id, 8);
#endif
	if (direct)
		return len + TREC_ENTRY_OVERHEAD + sizeof(hex);
	return attr_add_slow(buf, len, CTXSHIM_KEY_PARENT, hex, sizeof(hex));
}

/* Inline in both entry points, so that the capture path's request (a
 * local struct) is never stored and reloaded (B4). */
static inline __attribute__((always_inline)) void
request_ctx(struct ctxshim_ctx *c, const struct ctxshim_request *r)
{
	struct w3c_traceparent tp;
	bool valid = false;
	const char *path;
	size_t path_len, len = 0;
	unsigned i;

	if (r->traceparent && !r->traceparent_repeated &&
	    w3c_traceparent_parse(r->traceparent, r->traceparent_len, &tp) == 0)
		valid = true;

	/* What ctxshim_ctx_begin() does, inline (one call fewer per
	 * request). */
	memset(c, 0, offsetof(struct ctxshim_ctx, attrs));
	if (valid) {
		memcpy(c->trace_id, tp.trace_id, sizeof(c->trace_id));
		memcpy(c->parent_id, tp.parent_id, sizeof(c->parent_id));
		c->has_parent = 1;
		/* W3C: unknown flag bits are not propagated. */
		c->flags = tp.flags & W3C_FLAGS_KNOWN;
		ctxshim_new_span_id(c->span_id);
		if (__builtin_expect(r->n_tracestate != 0, 0))
			(void)ctxshim_ctx_set_tracestate(c, r->tracestate,
							 r->tracestate_lens,
							 r->n_tracestate);
	} else if (ctxshim_cfg.new_traces) {
		ctxshim_new_trace_id(c->trace_id);
		c->flags = W3C_FLAG_RANDOM;
		ctxshim_new_span_id(c->span_id);
		if (ctxshim_cfg.sample_new)
			c->flags |= W3C_FLAG_SAMPLED;
	}

	_Static_assert(sizeof(c->attrs) == TREC_ATTRS_MAX, "attrs is a whole record's");
	if (r->method && r->method_len)
		len = attr_put(c->attrs, len, CTXSHIM_KEY_METHOD, r->method,
			       r->method_len);
	if (r->target && r->target_len) {
		path = url_path(r->target, r->target_len, ctxshim_cfg.url_query,
				&path_len);
		len = attr_put(c->attrs, len, CTXSHIM_KEY_PATH, path, path_len);
	}
	if (c->has_parent)
		len = attr_put_parent(c->attrs, len, c->parent_id);
	for (i = 0; __builtin_expect(i < ctxshim_cfg.n_header_attrs, 0); i++)
		if (r->extra[i])
			len = attr_put(c->attrs, len,
				       (uint8_t)(CTXSHIM_KEY_FIRST_HEADER + i),
				       r->extra[i], r->extra_len[i]);
	c->attrs_len = (uint16_t)len;
}

void
ctxshim_request_ctx(struct ctxshim_ctx *c, const struct ctxshim_request *r)
{
	request_ctx(c, r);
}

CTXSHIM_HOT void
ctxshim_request_ctx_capture(struct ctxshim_ctx *c,
			    const struct http_scan_capture *cap,
			    unsigned flags,
			    const int extra_index[CTXSHIM_MAX_HEADER_ATTRS])
{
	struct ctxshim_request r;
	const char *ts_line = cap->tracestate;
	size_t ts_len = cap->tracestate_len;
	unsigned i;

	/* Only the fields request_ctx() reads: extra[] beyond
	 * n_header_attrs is never looked at (a memset of the whole 216-byte
	 * struct was ~27 instructions per request). */
	r.traceparent = NULL;
	r.traceparent_len = 0;
	r.tracestate = NULL;
	r.tracestate_lens = NULL;
	r.n_tracestate = 0;
	r.method = cap->method;
	r.method_len = cap->method_len;
	r.target = cap->target;
	r.target_len = cap->target_len;
	if (flags & HTTP_SCAN_F_TRACEPARENT) {
		r.traceparent = cap->traceparent;
		r.traceparent_len = cap->traceparent_len;
	}
	r.traceparent_repeated = (flags & HTTP_SCAN_F_TRACEPARENT_BAD) != 0;
	/* A folded tracestate is invalid as a whole, and so is one the
	 * scanner found invalid past the 512 bytes it keeps (W3C: drop it
	 * all, keep the traceparent). */
	if (__builtin_expect(
		    (flags & (HTTP_SCAN_F_TRACESTATE | HTTP_SCAN_F_TRACESTATE_BAD)) ==
			    HTTP_SCAN_F_TRACESTATE,
		    0)) {
		r.tracestate = &ts_line;
		r.tracestate_lens = &ts_len;
		r.n_tracestate = 1;
	}
	for (i = 0; __builtin_expect(i < ctxshim_cfg.n_header_attrs, 0) &&
		    i < CTXSHIM_MAX_HEADER_ATTRS;
	     i++) {
		int k = extra_index[i];

		r.extra[i] = NULL;
		if (k < 0 || !(cap->extra_present & (1u << k)) ||
		    (cap->extra_bad & (1u << k)))
			continue;
		r.extra[i] = cap->extra[k];
		r.extra_len[i] = cap->extra_len[k];
	}
	request_ctx(c, &r);
}
