/* SPDX-License-Identifier: Apache-2.0 */
/* What the socket level propagates of an incoming tracestate longer than
 * the 512 bytes it keeps: a thread-per-connection server without tracing
 * code (helpers/tpc-server.c built with libcurl as tpc-curl-server) reads
 * each request under the shim and calls http-sink with libcurl, whose hook
 * sends the context the socket level published.  W3C Trace Context: a
 * list with an invalid member or more than 32 members is discarded whole
 * (the call carries no tracestate), wherever the fault is -- past byte
 * 512, in a later header line, in a later read -- and the traceparent
 * still continues the trace; a valid long list goes on cut after a whole
 * member (the libmicrohttpd and libevent hooks, which see whole lists,
 * already behave so: test-integration-w3c.c). */
#include "test-common.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test-integration.h"
#pragma GCC diagnostic pop

#include <strings.h>

#define T1  "0af7651916cd43dd8448eb211c80319c"
#define P1  "b7ad6b7169203331"
#define TP1 "traceparent: 00-" T1 "-" P1 "-01\r\n"
/* A member value that brings "{1-20}" (419 bytes) to 512 with ",pad=". */
#define PAD22 "vvvvvvvvvvvvvvvvvvvvvv"
#define PAD88 PAD22 PAD22 PAD22 PAD22

static void
helper_path(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", test_env_path("HELPER_DIR"), name);
}

/* Each case: its tracestate header lines ("{a-b}": members a..b, then the
 * rest literally); NULL expect: no tracestate on the call, "" the whole
 * list cut after a whole member, else exactly that. */
static const struct {
	const char *name;
	const char *lines[4];
	const char *expect;
} cases[] = {
	{"33 members (692 B)", {"{1-33}"}, NULL},
	{"32 valid members, then INVALID=1", {"{1-32},INVALID=1"}, NULL},
	{"33 members in 3 lines", {"{1-11}", "{12-22}", "{23-33}"}, NULL},
	{"a bad member in a line past byte 512", {"{1-26}", "ok=1,Bad=1"}, NULL},
	{"30 valid members (629 B)", {"{1-30}"}, ""},
	{"20 valid members (419 B)", {"{1-20}"}, "{1-20}"},
	/* the limit itself, kept whole, and one byte past it, cut */
	{"21 valid members (512 B)", {"{1-20},pad=" PAD88}, "{1-20},pad=" PAD88},
	{"21 valid members (513 B)", {"{1-20},pad=" PAD88 "v"}, ""},
};

static size_t
expand(const char *t, char *out, size_t cap)
{
	unsigned a, b;
	int used = 0;
	size_t len = 0;

	if (sscanf(t, "{%u-%u}%n", &a, &b, &used) == 2 && used > 0) {
		len = test_ts_members(out, cap, a, b);
		t += used;
	}
	len += (size_t)snprintf(out + len, cap - len, "%s", t);
	ck_assert_uint_lt(len, cap);
	return len;
}

/* Read sizes of the server: whole heads, or 7 bytes a read (the list then
 * spans ~100 reads). */
static const char *const read_sizes[] = {"4096", "7"};

START_TEST(test_long_tracestate_propagated)
{
	char url[64], helper[4096], head[4096], list[2048], want[1024], line[1024];
	/* one case and read size per iteration */
	const size_t c = (size_t)_i / 2;
	const char *rs = read_sizes[_i % 2];
	char *argv[] = {helper, "--call", url, "--read-size", (char *)rs, NULL};
	struct test_child sink;
	struct it_sink_req r;
	struct it_server s;

	helper_path(helper, sizeof(helper), "tpc-curl-server");
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/cb", it_sink_start(&sink));
	it_server_start(&s, argv, true, NULL);

	{
		const char *tp, *got;
		size_t o, lo = 0;
		char *resp;
		int fd;

		o = (size_t)snprintf(head, sizeof(head),
				     "GET /call/%zu HTTP/1.1\r\nHost: x\r\n%s", c, TP1);
		for (size_t l = 0; l < 4 && cases[c].lines[l]; l++) {
			expand(cases[c].lines[l], line, sizeof(line));
			o += (size_t)snprintf(head + o, sizeof(head) - o,
					      "tracestate: %s\r\nX-Other: %zu\r\n",
					      line, l);
			lo += (size_t)snprintf(list + lo, sizeof(list) - lo, "%s%s",
					       lo ? "," : "", line);
		}
		o += (size_t)snprintf(head + o, sizeof(head) - o, "\r\n");
		ck_assert_uint_lt(o, sizeof(head) - 1);

		fd = it_connect(s.port);
		it_send_str(fd, head);
		test_child_expect(&s.child, "CALLED ", line, sizeof(line),
				  IT_TIMEOUT_MS);
		ck_assert_msg(strstr(line, " 200"), "upstream call failed: %s", line);
		it_sink_read(&sink, &r);
		resp = it_read_response(fd);
		ck_assert_ptr_nonnull(resp);
		free(resp);
		close(fd);

		/* the trace continues whatever the tracestate */
		tp = it_sink_field(&r, "traceparent");
		ck_assert_ptr_nonnull(tp);
		ck_assert_msg(strncmp(tp, "00-" T1 "-", 36) == 0,
			      "case '%s': traceparent %s", cases[c].name, tp);
		got = it_sink_field(&r, "tracestate");
		if (!cases[c].expect) {
			ck_assert_msg(got == NULL,
				      "case '%s' (reads of %s): tracestate %s",
				      cases[c].name, rs, got);
		} else if (cases[c].expect[0] == '\0') {
			size_t n;

			ck_assert_msg(got != NULL, "case '%s': no tracestate",
				      cases[c].name);
			n = strlen(got);
			ck_assert_msg(n > 400 && n <= 512 &&
					      strncmp(got, list, n) == 0 &&
					      list[n] == ',',
				      "case '%s': tracestate %s", cases[c].name, got);
		} else {
			expand(cases[c].expect, want, sizeof(want));
			ck_assert_msg(got != NULL && strcmp(got, want) == 0,
				      "case '%s': tracestate %s", cases[c].name,
				      got ? got : "(none)");
		}
	}
	it_server_stop(&s);
	it_sink_finish(&sink);
}
END_TEST

TEST_SUITE(preload_tracestate_suite)
{
	Suite *s = suite_create("preload-tracestate");
	TCase *tc = tcase_create("long-lists");
	char path[4096];

	/* tpc-curl-server is built only with libcurl's -dev package. */
	helper_path(path, sizeof(path), "tpc-curl-server");
	if (access(path, X_OK) != 0)
		test_skip("tpc-curl-server was not built (libcurl missing)");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_long_tracestate_propagated, 0,
			    (int)(2 * sizeof(cases) / sizeof(cases[0])));
	suite_add_tcase(s, tc);
	return s;
}
