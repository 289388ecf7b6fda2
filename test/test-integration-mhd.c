/* SPDX-License-Identifier: Apache-2.0 */
/* libmicrohttpd servers (thread-per-connection, internal select, internal
 * epoll) under the shim: while the access handler of a traced request
 * blocks, ctxdump shows that request's context on the handler's thread and
 * on no other; the several handler calls of one request share one span-id;
 * after the response the context is gone; responses are byte-identical
 * without the shim. */
#include "test-integration.h"

#define TP_TRACE  "0af7651916cd43dd8448eb211c80319c"
#define TP_PARENT "b7ad6b7169203331"
#define TP        "00-" TP_TRACE "-" TP_PARENT "-01"
#define TP2_TRACE "4bf92f3577b34da6a3ce929d0e0e4736"
#define TP2       "00-" TP2_TRACE "-00f067aa0ba902b7-01"

static const char *const modes[] = {"thread", "select", "epoll"};

static void
start(struct it_server *s, int mode, bool preload)
{
	static char path[4096];
	char *argv[] = {path, (char *)modes[mode], NULL};
	char *env[] = {"CTXSHIM_HEADER_ATTRS=x-request-id", NULL};

	snprintf(path, sizeof(path), "%s/mhd-server", test_env_path("HELPER_DIR"));
	it_server_start(s, argv, preload, env);
}

START_TEST(test_traced_request)
{
	struct it_server s;
	struct it_thread_ctx t;
	char *json, *log, *resp, span[17];
	long tid;
	int fd;

	start(&s, _i, true);
	fd = it_send_blocking(&s, -1,
			   "GET /block/a?q=1 HTTP/1.1\r\nHost: t\r\ntraceparent: " TP
			   "\r\n"
			   "X-Request-Id: req-42\r\nConnection: close\r\n\r\n",
			   &tid);
	json = it_ctxdump(s.child.pid);
	ck_assert_msg(it_dump_thread(json, tid, &t), "thread %ld not in:\n%s", tid,
		      json);
	ck_assert_msg(t.has_ctx, "no context on the handler thread:\n%s", json);
	ck_assert_str_eq(t.trace, TP_TRACE);
	ck_assert_str_ne(t.span, TP_PARENT);
	ck_assert_str_ne(t.span, "0000000000000000");
	ck_assert_uint_eq(t.flags, 1);
	ck_assert_str_eq(t.method, "GET");
	ck_assert_str_eq(t.path, "/block/a");
	ck_assert_str_eq(t.parent, TP_PARENT);
	ck_assert_str_eq(t.extra, "req-42");
	ck_assert_msg(it_dump_count_trace(json, TP_TRACE) == 1,
		      "the trace is published on another thread too:\n%s", json);
	free(json);

	resp = it_release(&s, fd);
	it_assert_ok_body(resp, "GET /block/a 0\n");
	free(resp);

	log = it_events(&s);
	ck_assert_msg(it_events_spans(log, TP_TRACE, span) == 1, "log:\n%s", log);
	ck_assert_str_eq(span, t.span);
	ck_assert_msg(it_events_count(log, TP_TRACE, "mhd-handler") >= 1, "log:\n%s",
		      log);
	free(log);
	it_assert_gone(&s, tid, TP_TRACE);
	it_server_stop(&s);
}
END_TEST

/* No traceparent, or two of them (invalid): a new trace. */
static void
check_new_trace(int mode, const char *extra_headers)
{
	struct it_server s;
	struct it_thread_ctx t;
	char req[1024], *json, *log, *resp;
	long tid;
	int fd;

	snprintf(req, sizeof(req),
		 "GET /block/new HTTP/1.1\r\nHost: t\r\n%sConnection: close\r\n\r\n",
		 extra_headers);
	start(&s, mode, true);
	fd = it_send_blocking(&s, -1, req, &tid);
	json = it_ctxdump(s.child.pid);
	ck_assert(it_dump_thread(json, tid, &t));
	ck_assert_msg(t.has_ctx, "no context on the handler thread:\n%s", json);
	ck_assert_str_ne(t.trace, "00000000000000000000000000000000");
	ck_assert_str_ne(t.trace, TP_TRACE);
	ck_assert_str_ne(t.trace, TP2_TRACE);
	ck_assert_uint_eq(t.flags & 0x02, 0x02); /* random trace-id */
	ck_assert_str_eq(t.parent, "");
	ck_assert_str_eq(t.method, "GET");
	ck_assert_str_eq(t.path, "/block/new");
	ck_assert_uint_eq(it_dump_count_trace(json, t.trace), 1);
	free(json);
	resp = it_release(&s, fd);
	it_assert_ok_body(resp, "GET /block/new 0\n");
	free(resp);
	log = it_events(&s);
	ck_assert_msg(it_events_spans(log, t.trace, NULL) == 1, "log:\n%s", log);
	free(log);
	it_assert_gone(&s, tid, t.trace);
	it_server_stop(&s);
}

START_TEST(test_no_traceparent)
{
	check_new_trace(_i, "");
}
END_TEST

START_TEST(test_two_traceparents)
{
	check_new_trace(_i, "traceparent: " TP "\r\ntraceparent: " TP2 "\r\n");
}
END_TEST

/* An upload: the handler is called for the head, for the body and once
 * more at the end, all under the same span. */
START_TEST(test_upload_one_span)
{
	static char body[3000];
	struct it_server s;
	struct it_thread_ctx t;
	char *json, *log, *resp, span[17];
	long tid;
	int fd;

	memset(body, 'b', sizeof(body));
	start(&s, _i, true);
	fd = it_connect(s.port);
	it_send_str(fd, "POST /block/up HTTP/1.1\r\nHost: t\r\ntraceparent: " TP "\r\n"
			"Content-Length: 3000\r\nConnection: close\r\n\r\n");
	it_send(fd, body, 1000);
	it_send(fd, body, 2000);
	fd = it_send_blocking(&s, fd, "", &tid);
	json = it_ctxdump(s.child.pid);
	ck_assert(it_dump_thread(json, tid, &t));
	ck_assert_msg(t.has_ctx, "%s", json);
	ck_assert_str_eq(t.trace, TP_TRACE);
	ck_assert_str_eq(t.method, "POST");
	ck_assert_str_eq(t.path, "/block/up");
	free(json);
	resp = it_release(&s, fd);
	it_assert_ok_body(resp, "POST /block/up 3000\n");
	free(resp);
	log = it_events(&s);
	ck_assert_msg(it_events_spans(log, TP_TRACE, span) == 1, "log:\n%s", log);
	ck_assert_str_eq(span, t.span);
	/* Head, body and final call: at least two of them attach (the first
	 * may find the socket level's attach of the same span). */
	ck_assert_msg(it_events_count(log, TP_TRACE, "mhd-handler") >= 2, "log:\n%s",
		      log);
	free(log);
	it_assert_gone(&s, tid, TP_TRACE);
	it_server_stop(&s);
}
END_TEST

/* Two requests on one connection, one after the other (keep-alive) or in
 * one write (pipelined): each gets its own context. */
static void
check_second_request(int mode, bool pipelined)
{
	const char *first =
		"GET /one HTTP/1.1\r\nHost: t\r\ntraceparent: " TP "\r\n\r\n";
	const char *second =
		"GET /block/two HTTP/1.1\r\nHost: t\r\ntraceparent: " TP2 "\r\n"
		"Connection: close\r\n\r\n";
	struct it_server s;
	struct it_thread_ctx t;
	char *json, *log, *resp, span1[17], span2[17], both[1024];
	long tid;
	int fd;

	start(&s, mode, true);
	fd = it_connect(s.port);
	if (pipelined) {
		snprintf(both, sizeof(both), "%s%s", first, second);
		fd = it_send_blocking(&s, fd, both, &tid);
	} else {
		it_send_str(fd, first);
		resp = it_read_response(fd);
		it_assert_ok_body(resp, "GET /one 0\n");
		free(resp);
		fd = it_send_blocking(&s, fd, second, &tid);
	}
	json = it_ctxdump(s.child.pid);
	ck_assert(it_dump_thread(json, tid, &t));
	ck_assert_msg(t.has_ctx, "%s", json);
	ck_assert_str_eq(t.trace, TP2_TRACE);
	ck_assert_str_eq(t.path, "/block/two");
	ck_assert_uint_eq(it_dump_count_trace(json, TP_TRACE), 0);
	free(json);
	resp = it_release(&s, fd);
	/* The first response precedes it when pipelined. */
	ck_assert_msg(strstr(resp, "\r\n\r\nGET /block/two 0\n"), "response: %s", resp);
	free(resp);
	log = it_events(&s);
	ck_assert_msg(it_events_spans(log, TP_TRACE, span1) == 1, "log:\n%s", log);
	ck_assert_msg(it_events_spans(log, TP2_TRACE, span2) == 1, "log:\n%s", log);
	ck_assert_str_eq(span2, t.span);
	free(log);
	it_assert_gone(&s, tid, TP2_TRACE);
	it_server_stop(&s);
}

START_TEST(test_keepalive_second_request)
{
	check_second_request(_i, false);
}
END_TEST

START_TEST(test_pipelined_requests)
{
	check_second_request(_i, true);
}
END_TEST

/* The same requests get the same response bytes with and without the
 * shim. */
START_TEST(test_same_bytes)
{
	static const char *const reqs[] = {
		"GET /hello?x=1 HTTP/1.1\r\nHost: t\r\ntraceparent: " TP "\r\n"
		"Connection: close\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
		"GET /two HTTP/1.1\r\nHost: t\r\ntraceparent: " TP
		"\r\ntraceparent: " TP2 "\r\n"
		"Connection: close\r\n\r\n",
		"POST /p HTTP/1.1\r\nHost: t\r\ntraceparent: " TP
		"\r\nContent-Length: 10\r\n"
		"Connection: close\r\n\r\n0123456789",
		"GET /one HTTP/1.0\r\ntraceparent: " TP "\r\n\r\n",
		"BREW /pot HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
		"POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
		"Connection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	};
	size_t n = sizeof(reqs) / sizeof(reqs[0]), i, len0, len1;
	struct it_server s0, s1;

	start(&s0, _i, false);
	start(&s1, _i, true);
	for (i = 0; i < n; i++) {
		char *r0 = it_exchange(s0.port, reqs[i], &len0);
		char *r1 = it_exchange(s1.port, reqs[i], &len1);

		ck_assert_msg(len0 > 0, "no response to request %zu", i);
		ck_assert_msg(
			len0 == len1 && memcmp(r0, r1, len0) == 0,
			"request %zu: responses differ:\n--- without\n%s\n--- with\n%s",
			i, r0, r1);
		free(r0);
		free(r1);
	}
	it_server_stop(&s0);
	it_server_stop(&s1);
}
END_TEST

TEST_SUITE(integration_mhd_suite)
{
	Suite *s = suite_create("libmicrohttpd servers under the shim");
	TCase *tc = tcase_create("thread-per-connection (0), select (1), epoll (2)");

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_traced_request, 0, 3);
	tcase_add_loop_test(tc, test_no_traceparent, 0, 3);
	tcase_add_loop_test(tc, test_two_traceparents, 0, 3);
	tcase_add_loop_test(tc, test_upload_one_span, 0, 3);
	tcase_add_loop_test(tc, test_keepalive_second_request, 0, 3);
	tcase_add_loop_test(tc, test_pipelined_requests, 0, 3);
	tcase_add_loop_test(tc, test_same_bytes, 0, 3);
	suite_add_tcase(s, tc);
	return s;
}
