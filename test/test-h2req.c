/* SPDX-License-Identifier: Apache-2.0 */
/* The per-stream HTTP/2 header handling of hooks/hook-nghttp2.c
 * (hooks/hook-h2.h): pure code, checked field by field, including the
 * bounds (long values, many fields, repeated and split lists). */
#include "test-common.h"

#include "hook-h2.h"
#include "w3c.h"

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

/* The traceparent's bytes are kept exactly, whatever its length (the copy
 * of a long one is two fixed-size halves that overlap). */
START_TEST(test_traceparent_copy_lengths)
{
	struct hook_h2_req q;
	char v[HOOK_H2_TP_MAX + 8];
	size_t n, i;

	for (i = 0; i < sizeof(v); i++)
		v[i] = (char)('0' + i % 75);
	for (n = 1; n <= sizeof(v); n++) {
		hook_h2_req_init(&q);
		memset(q.tp, 0xa5, sizeof(q.tp));
		hdr_n(&q, "traceparent", v, n);
		ck_assert_int_eq(
			memcmp(q.tp, v, n < HOOK_H2_TP_MAX ? n : HOOK_H2_TP_MAX), 0);
		for (i = n; i < HOOK_H2_TP_MAX; i++)
			ck_assert_uint_eq((uint8_t)q.tp[i], 0xa5);
	}
}
END_TEST

START_TEST(test_bounds)
{
	struct hook_h2_req q, q2;
	struct hook_h2_view v, v2;
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
	/* A valid value, a space as its 56th character, more after it:
	 * invalid, and kept as such (length 0) rather than cut to bytes the
	 * parser would trim into a valid value. */
	hook_h2_req_init(&q2);
	memcpy(big, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", 55);
	memset(big + 55, ' ', 20);
	big[75] = 'x';
	hdr_n(&q2, "traceparent", big, 76);
	hook_h2_req_view(&q2, &v2);
	ck_assert_uint_eq(v2.r.traceparent_len, 0);
	/* The same value with OWS around it (nghttp2 passes it on when its
	 * RFC 9113 whitespace check is off): valid with trailing OWS only,
	 * as over HTTP/1, and invalid with the 'x' after it. */
	hook_h2_req_init(&q2);
	hdr_n(&q2, "traceparent", big, 75);
	hook_h2_req_view(&q2, &v2);
	ck_assert(eq(v2.r.traceparent, v2.r.traceparent_len,
		     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
	memmove(big + 1, big, 76);
	big[0] = ' ';
	hook_h2_req_init(&q2);
	hdr_n(&q2, "traceparent", big, 77);
	hook_h2_req_view(&q2, &v2);
	ck_assert_uint_eq(v2.r.traceparent_len, 0);
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

	/* A field that does not fit (a valid list: 28 members in all): its
	 * whole members that fit, then nothing more. */
	field[0] = '\0';
	for (i = 0; i < 25; i++) {
		snprintf(member, sizeof(member), "%sk%02u=v%020u", i ? "," : "", i, i);
		strcat(field, member);
	}
	hdr(&q, "tracestate", field);
	hook_h2_req_view(&q, &v);
	len = v.ts_len;
	ck_assert_uint_le(len, HOOK_H2_TS_MAX);
	ck_assert_uint_gt(len, HOOK_H2_TS_MAX - 26);
	ck_assert_int_ne(v.ts_line[len - 1], ',');
	/* Ends with a whole 25-byte member "kNN=v<20 digits>". */
	ck_assert_int_eq(v.ts_line[len - 22], '=');
	ck_assert_int_eq(v.ts_line[len - 26], ',');
	hdr(&q, "tracestate", "z=9");
	hook_h2_req_view(&q, &v);
	ck_assert_uint_eq(v.r.n_tracestate, 1);
	ck_assert_uint_eq(v.ts_len, len);

	/* One valid member longer than everything (a 256-byte key and a
	 * 256-byte value): dropped, the list is then empty. */
	hook_h2_req_init(&q);
	memset(field, 'k', 256);
	field[256] = '=';
	memset(field + 257, 'v', 256);
	field[513] = '\0';
	hdr(&q, "tracestate", field);
	hook_h2_req_view(&q, &v);
	ck_assert_uint_eq(v.r.n_tracestate, 1);
	ck_assert_uint_eq(v.ts_len, 0);

	/* 100 members, or a 999-byte key without '=': invalid, dropped whole
	 * (W3C), not cut to a prefix that looks valid. */
	hook_h2_req_init(&q);
	field[0] = '\0';
	for (i = 0; i < 100; i++) {
		snprintf(member, sizeof(member), "%sk%02u=v%02u", i ? "," : "", i, i);
		strcat(field, member);
	}
	hdr(&q, "tracestate", field);
	hook_h2_req_view(&q, &v);
	ck_assert_uint_eq(v.r.n_tracestate, 0);
	hook_h2_req_init(&q);
	memset(field, 'k', 999);
	field[999] = '\0';
	hdr(&q, "tracestate", field);
	hook_h2_req_view(&q, &v);
	ck_assert_uint_eq(v.r.n_tracestate, 0);
}
END_TEST

/* Past 512 bytes, W3C's truncation policy: OWS does not count (a list of
 * 499 characters sent with ", " is kept whole, normalised), and an entry
 * over 128 characters goes first (old: cut after the last member that
 * fit, in both cases). */
START_TEST(test_tracestate_w3c_truncation)
{
	struct hook_h2_req q;
	struct hook_h2_view v;
	char list[2048], want[1024];

	test_ts_members(want, sizeof(want), 1, 24);
	ck_assert_uint_gt(test_ts_spaced(list, sizeof(list), want), HOOK_H2_TS_MAX);
	hook_h2_req_init(&q);
	hdr(&q, "tracestate", list);
	hook_h2_req_view(&q, &v);
	ck_assert_uint_eq(v.r.n_tracestate, 1);
	ck_assert(eq(v.ts_line, v.ts_len, want));

	/* in two fields, the long entry in the first */
	snprintf(list, sizeof(list), "big=%0201d,k=1", 0);
	hook_h2_req_init(&q);
	hdr(&q, "tracestate", list);
	test_ts_members(list, sizeof(list), 1, 16);
	hdr(&q, "tracestate", list);
	hook_h2_req_view(&q, &v);
	snprintf(want, sizeof(want), "k=1,%s", list);
	ck_assert_uint_eq(v.r.n_tracestate, 1);
	ck_assert(eq(v.ts_line, v.ts_len, want));
}
END_TEST

/* Lists longer than the 512 bytes kept: an invalid member or a 33rd
 * member anywhere, past the stored bytes too, drops the whole list (W3C),
 * whatever the fields look like; a valid one keeps its cut at whole
 * members.  Whatever the list, the traceparent is kept. */
static const struct {
	const char *name;
	unsigned n;
	const char *f[4]; /* "{a-b}" members a..b, else literal */
	bool valid;
} long_cases[] = {
	{"33 members in 2 fields", 2, {"{1-16}", "{17-33}"}, false},
	{"33 members in 1 field", 1, {"{1-33}"}, false},
	{"32 + INVALID=1", 2, {"{1-32}", "INVALID=1"}, false},
	{"33rd member in a third field", 3, {"{1-16}", "{17-32}", "x=1"}, false},
	{"bad member past byte 512", 2, {"{1-26}", "ok=1,Bad=1"}, false},
	{"CR in a field past the cut", 2, {"{1-26}", "a=1\r"}, false},
	{"empty value past the cut", 2, {"{1-26}", "a="}, false},
	{"32 members in 4 fields", 4, {"{1-8}", "{9-16}", "{17-24}", "{25-32}"}, true},
	{"30 members and empty fields", 4, {"{1-10}", "", " , ", "{11-30}"}, true},
	{"bad member stored, list overflows", 2, {"{1-3},Z=1", "{4-30}"}, false},
};

START_TEST(test_tracestate_long_checked)
{
	char f[4][1024];
	struct hook_h2_req q;
	struct hook_h2_view v;
	struct w3c_tracestate ts;
	const char *lines[4];
	size_t lens[4], total = 0;
	unsigned i, a, b;
	bool kept;

	hook_h2_req_init(&q);
	hdr(&q, "traceparent",
	    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
	for (i = 0; i < long_cases[_i].n; i++) {
		const char *t = long_cases[_i].f[i];

		if (sscanf(t, "{%u-%u}", &a, &b) == 2 && strchr(t, '}')[1] == '\0')
			test_ts_members(f[i], sizeof(f[i]), a, b);
		else if (sscanf(t, "{%u-%u}", &a, &b) == 2) {
			test_ts_members(f[i], sizeof(f[i]), a, b);
			strcat(f[i], strchr(t, '}') + 1);
		} else
			snprintf(f[i], sizeof(f[i]), "%s", t);
		lines[i] = f[i];
		lens[i] = strlen(f[i]);
		total += lens[i];
		hdr(&q, "tracestate", f[i]);
	}
	ck_assert_uint_gt(total, HOOK_H2_TS_MAX);
	ck_assert((w3c_tracestate_parse(lines, lens, long_cases[_i].n, &ts) == 0) ==
		  long_cases[_i].valid);
	hook_h2_req_view(&q, &v);
	ck_assert_ptr_nonnull(v.r.traceparent);
	ck_assert(!v.r.traceparent_repeated);
	/* what ctxshim_request_ctx() keeps: a list that parses */
	kept = v.r.n_tracestate == 1 &&
	       w3c_tracestate_parse(v.r.tracestate, v.r.tracestate_lens, 1, &ts) == 0;
	ck_assert_msg(kept == long_cases[_i].valid, "%s: tracestate %s (%zu bytes)",
		      long_cases[_i].name, kept ? "kept" : "dropped", v.ts_len);
	if (kept) {
		ck_assert_uint_le(v.ts_len, HOOK_H2_TS_MAX);
		ck_assert_uint_gt(ts.n, 20);
	}
}
END_TEST

/* The socket level works out once what each configured name does
 * (preload/conn.c, conn_h2_kind[]), nghttp2's hook per field: both must
 * make the same request of the same fields, also for a configured header
 * that is one of the names read anyway (CTXSHIM_HEADER_ATTRS=traceparent
 * is the trace's header, not an extra one as well) and for one
 * configured twice or in upper case. */
START_TEST(test_kind_once_same_as_per_field)
{
	static const char cfg[5][CTXSHIM_HEADER_NAME_MAX] = {
		"traceparent", "X-Tenant", ":path", "x-tenant", "tracestate"};
	static const char *const fields[][2] = {
		{":method", "GET"},
		{":path", "/p"},
		{"traceparent",
		 "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		{"tracestate", "a=1"},
		{"x-tenant", "t1"},
		{"x-tenant", "t2"},
		{":path", "/second"},
	};
	struct hook_h2_req a, b;
	struct hook_h2_view va, vb;
	unsigned i, j;

	hook_h2_req_init(&a);
	hook_h2_req_init(&b);
	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		const uint8_t *n = (const uint8_t *)fields[i][0];
		size_t nl = strlen(fields[i][0]), vl = strlen(fields[i][1]);
		struct hook_h2_kind k = hook_h2_field_kind(cfg, 5, n, nl);

		hook_h2_req_header(&a, cfg, 5, n, nl, (const uint8_t *)fields[i][1],
				   vl);
		hook_h2_req_field(&b, k, (const uint8_t *)fields[i][1], vl);
	}
	hook_h2_req_view(&a, &va);
	hook_h2_req_view(&b, &vb);
	for (j = 0; j < 2; j++) {
		const struct hook_h2_view *v = j ? &vb : &va;

		ck_assert(eq(v->r.method, v->r.method_len, "GET"));
		ck_assert(eq(v->r.target, v->r.target_len, "/p"));
		ck_assert(
			eq(v->r.traceparent, v->r.traceparent_len,
			   "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
		ck_assert(!v->r.traceparent_repeated);
		ck_assert_uint_eq(v->r.n_tracestate, 1);
		ck_assert(eq(v->r.tracestate[0], v->r.tracestate_lens[0], "a=1"));
		/* the names of the trace and the pseudo-headers: not extras */
		ck_assert_ptr_null(v->r.extra[0]);
		ck_assert_ptr_null(v->r.extra[2]);
		ck_assert_ptr_null(v->r.extra[4]);
		ck_assert(eq(v->r.extra[1], v->r.extra_len[1], "t1, t2"));
		ck_assert(eq(v->r.extra[3], v->r.extra_len[3], "t1, t2"));
	}
}
END_TEST

TEST_SUITE(h2req_suite)
{
	Suite *s = suite_create("h2req");
	TCase *tc = tcase_create("h2req");

	tcase_add_test(tc, test_basic_request);
	tcase_add_test(tc, test_absent_and_first_wins);
	tcase_add_test(tc, test_traceparent_repeated_and_case);
	tcase_add_test(tc, test_traceparent_copy_lengths);
	tcase_add_test(tc, test_bounds);
	tcase_add_test(tc, test_extra_joined);
	tcase_add_test(tc, test_kind_once_same_as_per_field);
	tcase_add_test(tc, test_tracestate_joined_and_cut);
	tcase_add_test(tc, test_tracestate_w3c_truncation);
	tcase_add_loop_test(tc, test_tracestate_long_checked, 0,
			    (int)(sizeof(long_cases) / sizeof(long_cases[0])));
	suite_add_tcase(s, tc);
	return s;
}
