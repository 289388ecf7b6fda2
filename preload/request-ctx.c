/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "request-ctx.h"

#include "w3c.h"

#include <string.h>

const char *
ctxshim_url_path(const char *target, size_t len, bool keep_query, size_t *path_len)
{
	const char *p = target, *end = target + len, *q;

	/* absolute-form (proxies): scheme "://" authority path */
	if (len > 0 && target[0] != '/') {
		const char *s = memchr(target, ':', len);

		if (s && end - s > 3 && s[1] == '/' && s[2] == '/') {
			const char *slash = memchr(s + 3, '/', (size_t)(end - s - 3));
			const char *qm = memchr(s + 3, '?', (size_t)(end - s - 3));

			if (slash && (!qm || slash < qm))
				p = slash;
			else if (qm)
				p = qm; /* no path: "" then the query */
			else
				p = end;
		}
	}
	if (!keep_query) {
		q = memchr(p, '?', (size_t)(end - p));
		if (q)
			end = q;
		q = memchr(p, '#', (size_t)(end - p));
		if (q)
			end = q;
	}
	*path_len = (size_t)(end - p);
	return p;
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
		(void)trec_attrs_add(&w, CTXSHIM_KEY_METHOD, r->method, r->method_len);
	if (r->target && r->target_len) {
		path = ctxshim_url_path(r->target, r->target_len, ctxshim_cfg.url_query,
					&path_len);
		(void)trec_attrs_add(&w, CTXSHIM_KEY_PATH, path, path_len);
	}
	ctxshim_ctx_add_parent_attr(c, &w);
	for (i = 0; i < ctxshim_cfg.n_header_attrs; i++)
		if (r->extra[i])
			(void)trec_attrs_add(&w, (uint8_t)(CTXSHIM_KEY_FIRST_HEADER + i),
					     r->extra[i], r->extra_len[i]);
	c->attrs_len = (uint16_t)w.len;
}
