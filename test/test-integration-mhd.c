/* SPDX-License-Identifier: Apache-2.0 */
/* libmicrohttpd servers (thread-per-connection, internal select, internal
 * epoll) under the shim: while the access handler of a traced request
 * blocks, ctxdump shows that request's context on the handler's thread and
 * on no other; the several handler calls of one request share one span-id;
 * after the response the context is gone; responses are byte-identical
 * without the shim. */
#include "test-integration-block.h"

static const char *const modes[] = {"thread", "select", "epoll"};

static void
start(struct it_server *s, int mode, bool preload)
{
	it_block_start(s, "mhd-server", modes[mode], preload);
}

START_TEST(test_traced_request)
{
	struct it_server s;
	struct it_thread_ctx t;
	char *json, *log;
	long tid;
	int fd;

	start(&s, _i, true);
	fd = it_send_blocking(&s, -1,
			   "GET /block/a?q=1 HTTP/1.1\r\nHost: t\r\ntraceparent: " TP
			   "\r\n"
			   "X-Request-Id: req-42\r\nConnection: close\r\n\r\n",
			   &tid);
	json = it_dump_blocked(&s, tid, &t);
	it_assert_continued(&t, json, TP_TRACE, TP_PARENT, "GET", "/block/a", "req-42");
	free(json);

	it_release_ok(&s, fd, "GET /block/a 0\n", true);
	log = it_events(&s);
	it_assert_one_span(log, TP_TRACE, t.span);
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

	start(&s, mode, true);
	it_check_new_trace(&s, "/block/new", extra_headers, "GET",
			   "GET /block/new 0\n");
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
	char *json, *log;
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
	json = it_dump_blocked(&s, tid, &t);
	ck_assert_str_eq(t.trace, TP_TRACE);
	ck_assert_str_eq(t.method, "POST");
	ck_assert_str_eq(t.path, "/block/up");
	free(json);
	it_release_ok(&s, fd, "POST /block/up 3000\n", true);
	log = it_events(&s);
	it_assert_one_span(log, TP_TRACE, t.span);
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
	struct it_server s;

	start(&s, mode, true);
	it_check_second_request(&s, pipelined, "/block/two", true, "GET /one 0\n",
				"GET /block/two 0\n");
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
		IT_SAME_BYTES_HEAD,
		IT_SAME_BYTES_TAIL,
	};
	struct it_server s0, s1;

	start(&s0, _i, false);
	start(&s1, _i, true);
	it_check_same_bytes(&s0, &s1, reqs, sizeof(reqs) / sizeof(reqs[0]));
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
