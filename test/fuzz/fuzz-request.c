/* SPDX-License-Identifier: Apache-2.0 */
/* The request model's attributes (preload/request-ctx.c, compiled into
 * this harness with stubs for the id generator and the configuration):
 * any method, target and header values, through both entry points.
 * Checks what a reader relies on: the entries decode whole within the
 * record, every value is well-formed UTF-8, http.request.method is a
 * known method or "_OTHER", http.request.method_original appears only
 * with "_OTHER" and then holds the method (capped), and the socket level's
 * entry (the scanner's capture) publishes exactly what the library hooks'
 * entry does.  Input: [flags][method len][target len, u16][value 0 len]
 * [value 1 len][bytes...]. */
#include "fuzz.h"

#include <string.h>

#include "http-scan.h"
#include "request-ctx.c"

#define TEST_REQUEST_STUBS_OWN_TRACESTATE
#include "../test-request-stubs.h"

/* Drops every tracestate: the fuzzer checks the attributes only. */
int
ctxshim_ctx_set_tracestate(struct ctxshim_ctx *c,
			   const char *const *lines,
			   const size_t *lens,
			   size_t n_lines)
{
	(void)lines, (void)lens, (void)n_lines;
	c->tracestate_len = 0;
	return -1;
}

static const char *const known[] = {
	"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
};

static bool
is_known(const uint8_t *m, size_t n)
{
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strlen(known[i]) == n && memcmp(known[i], m, n) == 0)
			return true;
	return false;
}

static void
check_ctx(const struct ctxshim_ctx *c, const struct ctxshim_request *r)
{
	struct trec_attrs_decoded d;
	const struct trec_attr *m, *o;
	uint8_t okey = ctxshim_key_method_original();

	FUZZ_CHECK(c->attrs_len <= TREC_ATTRS_MAX);
	FUZZ_CHECK(trec_attrs_decode(c->attrs, c->attrs_len, 255, &d) == 0);
	FUZZ_CHECK(!d.truncated && d.n_duplicates == 0);
	for (unsigned i = 0; i < d.n; i++) {
		FUZZ_CHECK(trec_utf8_valid(d.attr[i].val, d.attr[i].len));
		FUZZ_CHECK(d.attr[i].key <= okey);
	}
	m = trec_attrs_find(&d, CTXSHIM_KEY_METHOD);
	o = trec_attrs_find(&d, okey);
	FUZZ_CHECK((m != NULL) == (r->method && r->method_len));
	if (!m)
		return;
	if (m->len == 6 && memcmp(m->val, "_OTHER", 6) == 0) {
		FUZZ_CHECK(r->method_cut ||
			   !is_known((const uint8_t *)r->method, r->method_len));
		if (o) {
			FUZZ_CHECK(!r->method_cut);
			FUZZ_CHECK(o->len <= r->method_len);
			FUZZ_CHECK(memcmp(o->val, r->method, o->len) == 0);
			FUZZ_CHECK(o->len == r->method_len || r->method_len > 255);
		} else {
			FUZZ_CHECK(r->method_cut ||
				   !trec_utf8_valid((const uint8_t *)r->method,
						    text_cap((const uint8_t *)r->method,
							     r->method_len)));
		}
	} else {
		FUZZ_CHECK(!r->method_cut && m->len == r->method_len &&
			   memcmp(m->val, r->method, m->len) == 0);
		FUZZ_CHECK(is_known(m->val, m->len));
		FUZZ_CHECK(!o);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct http_scan_capture cap;
	static struct ctxshim_ctx a, b;
	struct fuzz_in in = {data, size};
	struct ctxshim_request r;
	unsigned flags = fuzz_byte(&in);
	size_t ml = fuzz_byte(&in) + ((flags & 0x80) ? 256 : 0);
	size_t tl = fuzz_byte(&in) | fuzz_byte(&in) << 8;
	size_t el[2] = {fuzz_byte(&in) + ((flags & 0x40) ? 200 : 0),
			fuzz_byte(&in) + ((flags & 0x20) ? 200 : 0)};
	int idx[CTXSHIM_MAX_HEADER_ATTRS] = {0, 1, -1, -1, -1, -1, -1, -1};

	ctxshim_cfg.new_traces = true;
	ctxshim_cfg.url_query = (flags & 1) != 0;
	ctxshim_cfg.n_header_attrs = (flags >> 1) & 3;
	if (ml > in.left)
		ml = in.left;
	memset(&r, 0, sizeof(r));
	r.method = (const char *)in.p;
	r.method_len = ml;
	r.method_cut = (flags & 0x10) != 0;
	in.p += ml, in.left -= ml;
	if (tl > in.left)
		tl = in.left;
	r.target = (const char *)in.p;
	r.target_len = tl;
	in.p += tl, in.left -= tl;
	for (unsigned i = 0; i < 2; i++) {
		if (el[i] > in.left)
			el[i] = in.left;
		r.extra[i] = (const char *)in.p;
		r.extra_len[i] = el[i];
		in.p += el[i], in.left -= el[i];
	}
	ctxshim_request_ctx(&a, &r);
	check_ctx(&a, &r);

	/* The same request as the scanner would capture it. */
	if (r.method_cut || ml > sizeof(cap.method) || tl > sizeof(cap.target) ||
	    el[0] > sizeof(cap.extra[0]) || el[1] > sizeof(cap.extra[1]))
		return 0;
	memset(&cap, 0x5a, sizeof(cap));
	memcpy(cap.method, r.method, ml);
	cap.method_len = (uint8_t)ml;
	memcpy(cap.target, r.target, tl);
	cap.target_len = (uint16_t)tl;
	cap.extra_present = 3;
	cap.extra_bad = 0;
	for (unsigned i = 0; i < 2; i++) {
		memcpy(cap.extra[i], r.extra[i], el[i]);
		cap.extra_len[i] = (uint16_t)el[i];
	}
	ctxshim_request_ctx_capture(&b, &cap, HTTP_SCAN_F_CAPTURED, idx);
	FUZZ_CHECK(a.attrs_len == b.attrs_len);
	FUZZ_CHECK(memcmp(a.attrs, b.attrs, a.attrs_len) == 0);
	return 0;
}
