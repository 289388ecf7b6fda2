/* SPDX-License-Identifier: Apache-2.0 */
/* The per-stream HTTP/2 header handling of hooks/hook-nghttp2.c
 * (hooks/hook-h2.h): pure code, checked field by field, including the
 * bounds (long values, many fields, repeated and split lists). */
#include "test-common.h"

#include "hook-h2.h"

#include <stdlib.h>
#include <string.h>

static const char names[2][CTXSHIM_HEADER_NAME_MAX] = {"x-request-id", "x-tenant"};

static void
hdr(struct hook_h2_req *q, const char *name, const char *value)
{
	hook_h2_req_header(q, names, 2, (const uint8_t *)name, strlen(name),
			   (const uint8_t *)value, strlen(value));
}

static void
hdr_n(struct hook_h2_req *q, const char *name, const char *value, size_t len)
{
	hook_h2_req_header(q, names, 2, (const uint8_t *)name, strlen(name),
			   (const uint8_t *)value, len);
}

static bool
eq(const char *p, size_t len, const char *want)
{
	return p && len == strlen(want) && memcmp(p, want, len) == 0;
}

START_TEST(test_basic_request)
{
	struct hook_h2_req q;
	struct hook_h2_view v;

	hook_h2_req_init(&q);
	hdr(&q, ":method", "GET");
	hdr(&q, ":scheme", "https");
	hdr(&q, ":authority", "example.org");
	hdr(&q, ":path", "/a/b?c=1");
	hdr(&q, "traceparent",
	    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
	hdr(&q, "tracestate", "congo=t61rcWkgMzE");
	hdr(&q, "x-request-id", "rid-1");
	hdr(&q, "user-agent", "test");
	hook_h2_req_view(&q, &v);
	ck_assert(eq(v.r.method, v.r.method_len, "GET"));
	ck_assert(eq(v.r.target, v.r.target_len, "/a/b?c=1"));
	ck_assert(eq(v.r.traceparent, v.r.traceparent_len,
		     "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
	ck_assert(!v.r.traceparent_repeated);
	ck_assert_uint_eq(v.r.n_tracestate, 1);
	ck_assert(eq(v.r.tracestate[0], v.r.tracestate_lens[0], "congo=t61rcWkgMzE"));
	ck_assert(eq(v.r.extra[0], v.r.extra_len[0], "rid-1"));
	ck_assert_ptr_null(v.r.extra[1]);
}
END_TEST

START_TEST(test_absent_and_first_wins)
{
	struct hook_h2_req q;
	struct hook_h2_view v;

	hook_h2_req_init(&q);
	hook_h2_req_view(&q, &v);
	ck_assert_ptr_null(v.r.method);
	ck_assert_ptr_null(v.r.target);
	ck_assert_ptr_null(v.r.traceparent);
	ck_assert_uint_eq(v.r.n_tracestate, 0);

	/* Pseudo-headers: the first one counts (nghttp2 rejects repeats). */
	hdr(&q, ":method", "POST");
	hdr(&q, ":method", "GET");
	hdr(&q, ":path", "/first");
	hdr(&q, ":path", "/second");
	hdr(&q, ":unknown", "x");
	hook_h2_req_view(&q, &v);
	ck_assert(eq(v.r.method, v.r.method_len, "POST"));
	ck_assert(eq(v.r.target, v.r.target_len, "/first"));
}
END_TEST

START_TEST(test_traceparent_repeated_and_case)
{
	struct hook_h2_req q;
	struct hook_h2_view v;

	hook_h2_req_init(&q);
	hdr(&q, "TraceParent",
	    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
	hook_h2_req_view(&q, &v);
	ck_assert_ptr_nonnull(v.r.traceparent);
	ck_assert(!v.r.traceparent_repeated);
	hdr(&q, "traceparent",
	    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
	hook_h2_req_view(&q, &v);
	ck_assert(v.r.traceparent_repeated);
	/* The first value is kept (the request is invalid anyway). */
	ck_assert(eq(v.r.traceparent, v.r.traceparent_len,
		     "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
}
END_TEST

START_TEST(test_bounds)
{
	struct hook_h2_req q;
	struct hook_h2_view v;
	char *big = malloc(100000);
	unsigned i;

	ck_assert_ptr_nonnull(big);
	memset(big, 'a', 100000);
	hook_h2_req_init(&q);
	hdr_n(&q, ":method", big, 100000);
	hdr_n(&q, ":path", big, 100000);
	hdr_n(&q, "traceparent", big, 100000);
	for (i = 0; i < 300; i++)
		hdr_n(&q, "x-request-id", big, 100);
	hook_h2_req_view(&q, &v);
	ck_assert_uint_eq(v.r.method_len, HOOK_H2_METHOD_MAX);
	ck_assert_uint_eq(v.r.target_len, HOOK_H2_PATH_MAX);
	ck_assert_uint_eq(v.r.traceparent_len, HOOK_H2_TP_MAX);
	ck_assert_uint_eq(v.r.extra_len[0], HOOK_H2_EXTRA_MAX);
	/* 300 traceparent-free fields; then 300 traceparent fields. */
	for (i = 0; i < 300; i++)
		hdr(&q, "traceparent", "x");
	hook_h2_req_view(&q, &v);
	ck_assert(v.r.traceparent_repeated);
	ck_assert_uint_eq(q.n_tp, 255);
	/* Empty and NULL values with no length. */
	hook_h2_req_header(&q, names, 2, (const uint8_t *)"x-tenant", 8, NULL, 0);
	hook_h2_req_view(&q, &v);
	ck_assert_ptr_nonnull(v.r.extra[1]);
	ck_assert_uint_eq(v.r.extra_len[1], 0);
	/* A NULL value with a length is ignored. */
	hook_h2_req_header(&q, names, 2, (const uint8_t *)"x-tenant", 8, NULL, 5);
	hook_h2_req_view(&q, &v);
	ck_assert_uint_eq(v.r.extra_len[1], 0);
	free(big);
}
END_TEST

START_TEST(test_extra_joined)
{
	struct hook_h2_req q;
	struct hook_h2_view v;

	hook_h2_req_init(&q);
	hdr(&q, "X-Tenant", "a");
	hdr(&q, "x-tenant", "b");
	hook_h2_req_view(&q, &v);
	ck_assert(eq(v.r.extra[1], v.r.extra_len[1], "a, b"));
}
END_TEST

START_TEST(test_tracestate_joined_and_cut)
{
	struct hook_h2_req q;
	struct hook_h2_view v;
	char member[64], field[1024];
	size_t len;
	unsigned i;

	hook_h2_req_init(&q);
	hdr(&q, "tracestate", "a=1,b=2");
	hdr(&q, "tracestate", "c=3");
	hook_h2_req_view(&q, &v);
	ck_assert(eq(v.ts_line, v.ts_len, "a=1,b=2,c=3"));

	/* A field that does not fit: its whole members that fit, then
	 * nothing more. */
	field[0] = '\0';
	for (i = 0; i < 100; i++) {
		snprintf(member, sizeof(member), "%sk%02u=v%02u", i ? "," : "", i, i);
		strcat(field, member);
	}
	hdr(&q, "tracestate", field);
	hook_h2_req_view(&q, &v);
	len = v.ts_len;
	ck_assert_uint_le(len, HOOK_H2_TS_MAX);
	ck_assert_uint_gt(len, HOOK_H2_TS_MAX - 8);
	ck_assert_int_ne(v.ts_line[len - 1], ',');
	/* Ends with a whole member "kNN=vNN". */
	ck_assert_int_eq(v.ts_line[len - 4], '=');
	ck_assert_int_eq(v.ts_line[len - 8], ',');
	hdr(&q, "tracestate", "z=9");
	hook_h2_req_view(&q, &v);
	ck_assert_uint_eq(v.ts_len, len);

	/* One member longer than everything: dropped. */
	hook_h2_req_init(&q);
	memset(field, 'k', 999);
	field[999] = '\0';
	hdr(&q, "tracestate", field);
	hook_h2_req_view(&q, &v);
	ck_assert_uint_eq(v.r.n_tracestate, 1);
	ck_assert_uint_eq(v.ts_len, 0);
}
END_TEST

TEST_SUITE(h2req_suite)
{
	Suite *s = suite_create("h2req");
	TCase *tc = tcase_create("h2req");

	tcase_add_test(tc, test_basic_request);
	tcase_add_test(tc, test_absent_and_first_wins);
	tcase_add_test(tc, test_traceparent_repeated_and_case);
	tcase_add_test(tc, test_bounds);
	tcase_add_test(tc, test_extra_joined);
	tcase_add_test(tc, test_tracestate_joined_and_cut);
	suite_add_tcase(s, tc);
	return s;
}
