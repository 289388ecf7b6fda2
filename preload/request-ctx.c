/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "request-ctx.h"

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
 * first overall); short targets go byte by byte. */
static const char *
url_path_end(const char *p, size_t n)
{
	size_t i = 0;

#if defined(__SSE2__)
	if (n >= 16) {
		const __m128i qm = _mm_set1_epi8('?'), hash = _mm_set1_epi8('#');

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
static __attribute__((noinline)) const char *
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

const char *
ctxshim_url_path(const char *target, size_t len, bool keep_query, size_t *path_len)
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

/* trec_attrs_add() for the request's attributes, inline for the usual
 * entry: a value of at most 255 bytes that fits whole.  The call and its
 * generic checks were about half the cost of encoding them (B4); anything
 * else goes through trec_attrs_add(), which keeps the rules for capping
 * and dropping in one place.  v is never NULL here. */
static inline void
attr_put(struct trec_attr_writer *w, uint8_t key, const void *v, size_t n)
{
	size_t pos = w->len;

	if (n <= TREC_VALUE_MAX && pos <= w->cap &&
	    w->cap - pos >= TREC_ENTRY_OVERHEAD + n) {
		uint8_t *d = w->buf + pos;

		d[0] = key;
		d[1] = (uint8_t)n;
		memcpy(d + TREC_ENTRY_OVERHEAD, v, n);
		w->len = pos + TREC_ENTRY_OVERHEAD + n;
		return;
	}
	(void)trec_attrs_add(w, key, v, n);
}

void
ctxshim_request_ctx(struct ctxshim_ctx *c, const struct ctxshim_request *r)
{
	struct w3c_traceparent tp;
	struct trec_attr_writer w;
	bool valid = false;
	const char *path;
	size_t path_len;
	unsigned i;

	if (r->traceparent && !r->traceparent_repeated &&
	    w3c_traceparent_parse(r->traceparent, r->traceparent_len, &tp) == 0)
		valid = true;

	if (valid) {
		ctxshim_ctx_begin(c, &tp);
		if (r->n_tracestate)
			(void)ctxshim_ctx_set_tracestate(c, r->tracestate, r->tracestate_lens,
							 r->n_tracestate);
	} else if (ctxshim_cfg.new_traces) {
		ctxshim_ctx_begin(c, NULL);
		if (ctxshim_cfg.sample_new)
			c->flags |= W3C_FLAG_SAMPLED;
	} else {
		memset(c, 0, offsetof(struct ctxshim_ctx, attrs));
	}

	trec_attrs_init(&w, c->attrs, sizeof(c->attrs));
	if (r->method && r->method_len)
		attr_put(&w, CTXSHIM_KEY_METHOD, r->method, r->method_len);
	if (r->target && r->target_len) {
		path = ctxshim_url_path(r->target, r->target_len, ctxshim_cfg.url_query,
					&path_len);
		attr_put(&w, CTXSHIM_KEY_PATH, path, path_len);
	}
	ctxshim_ctx_add_parent_attr(c, &w);
	for (i = 0; i < ctxshim_cfg.n_header_attrs; i++)
		if (r->extra[i])
			attr_put(&w, (uint8_t)(CTXSHIM_KEY_FIRST_HEADER + i),
				 r->extra[i], r->extra_len[i]);
	c->attrs_len = (uint16_t)w.len;
}
