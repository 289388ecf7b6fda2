/* SPDX-License-Identifier: Apache-2.0 */
/* A request handed over as CGI meta-variables (preload/request-cgi.c,
 * linked into this program): the lookup over an environ-style array that
 * a FastCGI request's parameters come in (hooks/hook-fcgi.c), and the
 * request model built from such a list, including the target rebuilt
 * from SCRIPT_NAME, PATH_INFO and QUERY_STRING and its bound.  A CGI
 * program's environment goes through the same builder
 * (test-ctxdump-shim.c runs those end to end). */
#include "test-common.h"

#include <stdlib.h>
#include <string.h>

#include "cfg.h"
#include "request-ctx.h"
#include "shim.h"
#include "thread-ctx.h"
#include "thread-record.h"
#include "w3c.h"

__thread void *otel_thread_ctx_v1;
/* the name the shim's code writes through (shim.h) */
extern __thread void *ctxshim_own_slot __attribute__((alias("otel_thread_ctx_v1")));
enum ctxshim_mode ctxshim_mode = CTXSHIM_ACTIVE;

#define TRACE  "0af7651916cd43dd8448eb211c80319c"
#define PARENT "b7ad6b7169203331"

static bool
attr_is(const struct trec_attrs_decoded *d, uint8_t key, const char *want)
{
	const struct trec_attr *a = trec_attrs_find(d, key);

	return a && a->len == strlen(want) && memcmp(a->val, want, a->len) == 0;
}

static void
build(char **envp, struct ctxshim_ctx *c, struct trec_attrs_decoded *d)
{
	memset(c, 0, sizeof(*c));
	ctxshim_cfg.new_traces = true;
	ctxshim_cfg.url_query = false;
	snprintf(ctxshim_cfg.header_attrs[0], CTXSHIM_HEADER_NAME_MAX, "x-request-id");
	ctxshim_cfg.n_header_attrs = 1;
	ctxshim_request_ctx_cgi(c, ctxshim_cgi_envp_lookup, envp);
	ck_assert_int_eq(trec_attrs_decode(c->attrs, c->attrs_len, 8, d), 0);
}

START_TEST(test_envp_lookup)
{
	char *envp[] = {"HTTP_TRACEPARENTX=longer name",
			"HTTP_TRACEPARENT",
			"HTTP_TRACEPARENT=first",
			"HTTP_TRACEPARENT=second",
			"EMPTY=",
			NULL};

	/* The whole name, up to '='; the first entry wins (as getenv()). */
	ck_assert_str_eq(ctxshim_cgi_envp_lookup("HTTP_TRACEPARENT", envp), "first");
	ck_assert_ptr_null(ctxshim_cgi_envp_lookup("HTTP_TRACE", envp));
	ck_assert_ptr_null(ctxshim_cgi_envp_lookup("MISSING", envp));
	ck_assert_str_eq(ctxshim_cgi_envp_lookup("EMPTY", envp), "");
	ck_assert_ptr_null(ctxshim_cgi_envp_lookup("EMPTY", NULL));
}
END_TEST

START_TEST(test_traced_request)
{
	char *envp[] = {"GATEWAY_INTERFACE=CGI/1.1",
			"REQUEST_METHOD=POST",
			"REQUEST_URI=/orders/7?page=2",
			"SCRIPT_NAME=/ignored",
			"HTTP_TRACEPARENT=00-" TRACE "-" PARENT "-01",
			"HTTP_TRACESTATE=congo=t61rcWkgMzE",
			"HTTP_X_REQUEST_ID=rid-1",
			NULL};
	struct trec_attrs_decoded d;
	struct ctxshim_ctx c;
	uint8_t want[16];

	build(envp, &c, &d);
	ck_assert_int_eq(w3c_hex_decode(want, TRACE, 16), 0);
	ck_assert_int_eq(memcmp(c.trace_id, want, 16), 0);
	ck_assert_int_eq(w3c_hex_decode(want, PARENT, 8), 0);
	ck_assert_int_eq(memcmp(c.parent_id, want, 8), 0);
	ck_assert_int_ne(memcmp(c.span_id, want, 8), 0);
	ck_assert_uint_eq(c.has_parent, 1);
	ck_assert_uint_eq(c.tracestate_len, strlen("congo=t61rcWkgMzE"));
	ck_assert(attr_is(&d, CTXSHIM_KEY_METHOD, "POST"));
	ck_assert(attr_is(&d, CTXSHIM_KEY_PATH, "/orders/7"));
	ck_assert(attr_is(&d, CTXSHIM_KEY_PARENT, PARENT));
	ck_assert(attr_is(&d, CTXSHIM_KEY_FIRST_HEADER, "rid-1"));
}
END_TEST

START_TEST(test_target_rebuilt)
{
	char *envp[] = {"REQUEST_METHOD=GET", "SCRIPT_NAME=/cgi-bin/x",
			"PATH_INFO=/p/q", "QUERY_STRING=a=b", NULL};
	struct trec_attrs_decoded d;
	struct ctxshim_ctx c;

	build(envp, &c, &d);
	/* No traceparent: a new trace. */
	ck_assert_uint_eq(c.has_parent, 0);
	ck_assert(!w3c_id_is_zero(c.trace_id, 16));
	ck_assert_uint_eq(c.flags & 0x02, 0x02);
	ck_assert(attr_is(&d, CTXSHIM_KEY_PATH, "/cgi-bin/x/p/q"));
	ck_assert_ptr_null(trec_attrs_find(&d, CTXSHIM_KEY_FIRST_HEADER));
	ctxshim_cfg.url_query = true;
	ctxshim_request_ctx_cgi(&c, ctxshim_cgi_envp_lookup, envp);
	ck_assert_int_eq(trec_attrs_decode(c.attrs, c.attrs_len, 8, &d), 0);
	ck_assert(attr_is(&d, CTXSHIM_KEY_PATH, "/cgi-bin/x/p/q?a=b"));
	ctxshim_cfg.url_query = false;
}
END_TEST

/* SCRIPT_NAME and PATH_INFO come decoded: a '?' or '#' in them is part
 * of the path, encoded again as a request-target carries it; a query
 * alone is no path. */
START_TEST(test_target_decoded)
{
	char *envp[] = {"REQUEST_METHOD=GET", "SCRIPT_NAME=/cgi-bin/s",
			"PATH_INFO=/a?b c#d%e\x01\xc3\xa9", "QUERY_STRING=q=1", NULL};
	char *query_only[] = {"REQUEST_METHOD=GET", "QUERY_STRING=q=1", NULL};
	struct trec_attrs_decoded d;
	struct ctxshim_ctx c;

	build(envp, &c, &d);
	ck_assert(
		attr_is(&d, CTXSHIM_KEY_PATH, "/cgi-bin/s/a%3Fb%20c%23d%25e%01%C3%A9"));
	build(query_only, &c, &d);
	ck_assert_ptr_null(trec_attrs_find(&d, CTXSHIM_KEY_PATH));
	ck_assert(attr_is(&d, CTXSHIM_KEY_METHOD, "GET"));
	/* a REQUEST_URI without a path gives way to SCRIPT_NAME, or to none */
	for (int i = 0; i < 3; i++) {
		char *uris[] = {"REQUEST_URI=", "REQUEST_URI=?q=1", "REQUEST_URI=#f"};
		char *with_script[] = {"REQUEST_METHOD=GET", uris[i], "SCRIPT_NAME=/s",
				       NULL};
		char *alone[] = {"REQUEST_METHOD=GET", uris[i], NULL};

		build(with_script, &c, &d);
		ck_assert_msg(attr_is(&d, CTXSHIM_KEY_PATH, "/s"), "%s", uris[i]);
		build(alone, &c, &d);
		ck_assert_msg(!trec_attrs_find(&d, CTXSHIM_KEY_PATH), "%s", uris[i]);
	}
}
END_TEST

/* Content-Type and Content-Length are CONTENT_TYPE and CONTENT_LENGTH in
 * a CGI request, not HTTP_*. */
START_TEST(test_content_headers)
{
	char *envp[] = {"REQUEST_METHOD=POST",     "REQUEST_URI=/f",
			"CONTENT_TYPE=text/plain", "CONTENT_LENGTH=5",
			"HTTP_CONTENT_TYPE=wrong", NULL};
	struct trec_attrs_decoded d;
	struct ctxshim_ctx c;

	ctxshim_cfg.new_traces = true;
	snprintf(ctxshim_cfg.header_attrs[0], CTXSHIM_HEADER_NAME_MAX, "content-type");
	snprintf(ctxshim_cfg.header_attrs[1], CTXSHIM_HEADER_NAME_MAX,
		 "Content-Length");
	ctxshim_cfg.n_header_attrs = 2;
	memset(&c, 0, sizeof(c));
	ctxshim_request_ctx_cgi(&c, ctxshim_cgi_envp_lookup, envp);
	ck_assert_int_eq(trec_attrs_decode(c.attrs, c.attrs_len, 8, &d), 0);
	ck_assert(attr_is(&d, CTXSHIM_KEY_FIRST_HEADER, "text/plain"));
	ck_assert(attr_is(&d, CTXSHIM_KEY_FIRST_HEADER + 1, "5"));
	ctxshim_cfg.n_header_attrs = 0;
}
END_TEST

START_TEST(test_target_bound)
{
	/* The rebuilt target has room for 2047 bytes: SCRIPT_NAME of 2046
	 * plus PATH_INFO "b" fits, "bc" does not, and then there is no
	 * url.path rather than a cut one. */
	static char sn[sizeof("SCRIPT_NAME=") + 2046];
	char *envp[] = {"REQUEST_METHOD=GET", sn, "PATH_INFO=b", NULL};
	struct trec_attrs_decoded d;
	struct ctxshim_ctx c;
	size_t n = strlen("SCRIPT_NAME=");

	memcpy(sn, "SCRIPT_NAME=/", n + 1);
	memset(sn + n + 1, 'a', 2045);
	sn[n + 2046] = '\0';
	build(envp, &c, &d);
	ck_assert_ptr_nonnull(trec_attrs_find(&d, CTXSHIM_KEY_PATH));
	envp[2] = "PATH_INFO=bc";
	build(envp, &c, &d);
	ck_assert_ptr_null(trec_attrs_find(&d, CTXSHIM_KEY_PATH));
	ck_assert(attr_is(&d, CTXSHIM_KEY_METHOD, "GET"));
}
END_TEST

TEST_SUITE(request_cgi_suite)
{
	Suite *s = suite_create("request-cgi");
	TCase *tc = tcase_create("cgi");

	tcase_add_test(tc, test_envp_lookup);
	tcase_add_test(tc, test_traced_request);
	tcase_add_test(tc, test_target_rebuilt);
	tcase_add_test(tc, test_target_decoded);
	tcase_add_test(tc, test_content_headers);
	tcase_add_test(tc, test_target_bound);
	suite_add_tcase(s, tc);
	return s;
}
