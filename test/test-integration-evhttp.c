/* SPDX-License-Identifier: Apache-2.0 */
/* A libevent evhttp server under the shim: while the callback of a traced
 * request blocks, ctxdump shows that request's context on the loop thread
 * and nowhere else; the socket level and the library level agree on one
 * span-id per request; after the response the context is gone; virtual
 * hosts and deleted callbacks are covered; responses are byte-identical
 * without the shim. */
#include "test-integration.h"

#define TP_TRACE  "0af7651916cd43dd8448eb211c80319c"
#define TP_PARENT "b7ad6b7169203331"
#define TP        "00-" TP_TRACE "-" TP_PARENT "-01"
#define TP2_TRACE "4bf92f3577b34da6a3ce929d0e0e4736"
#define TP2       "00-" TP2_TRACE "-00f067aa0ba902b7-01"

static void
start(struct it_server *s, bool preload)
{
	static char path[4096];
	char *argv[] = {path, NULL};
	char *env[] = {"CTXSHIM_HEADER_ATTRS=x-request-id", NULL};

	snprintf(path, sizeof(path), "%s/evhttp-server", test_env_path("HELPER_DIR"));
	it_server_start(s, argv, preload, env);
}

START_TEST(test_traced_request)
{
	struct it_server s;
	struct it_thread_ctx t;
	char *json, *log, *resp, span[17];
	long tid;
	int fd;

	start(&s, true);
	fd = it_send_blocking(&s, -1,
			   "GET /block?q=1 HTTP/1.1\r\nHost: t\r\ntraceparent: " TP
			   "\r\n"
			   "x-request-id: req-7\r\nConnection: close\r\n\r\n",
			   &tid);
	json = it_ctxdump(s.child.pid);
	ck_assert_msg(it_dump_thread(json, tid, &t), "thread %ld not in:\n%s", tid,
		      json);
	ck_assert_msg(t.has_ctx, "no context on the loop thread:\n%s", json);
	ck_assert_str_eq(t.trace, TP_TRACE);
	ck_assert_str_ne(t.span, TP_PARENT);
	ck_assert_str_ne(t.span, "0000000000000000");
	ck_assert_uint_eq(t.flags, 1);
	ck_assert_str_eq(t.method, "GET");
	ck_assert_str_eq(t.path, "/block");
	ck_assert_str_eq(t.parent, TP_PARENT);
	ck_assert_str_eq(t.extra, "req-7");
	ck_assert_uint_eq(it_dump_count_trace(json, TP_TRACE), 1);
	free(json);

	resp = it_release(&s, fd);
	it_assert_ok_body(resp, "block GET /block?q=1 0\n");
	free(resp);

	log = it_events(&s);
	ck_assert_msg(it_events_spans(log, TP_TRACE, span) == 1, "log:\n%s", log);
	ck_assert_str_eq(span, t.span);
	ck_assert_msg(it_events_count(log, TP_TRACE, "evhttp-callback") <= 1,
		      "log:\n%s", log);
	free(log);
	it_assert_gone(&s, tid, TP_TRACE);
	it_server_stop(&s);
}
END_TEST

static void
check_new_trace(const char *extra_headers)
{
	struct it_server s;
	struct it_thread_ctx t;
	char req[1024], *json, *log, *resp;
	long tid;
	int fd;

	snprintf(req, sizeof(req),
		 "GET /block HTTP/1.1\r\nHost: t\r\n%sConnection: close\r\n\r\n",
		 extra_headers);
	start(&s, true);
	fd = it_send_blocking(&s, -1, req, &tid);
	json = it_ctxdump(s.child.pid);
	ck_assert(it_dump_thread(json, tid, &t));
	ck_assert_msg(t.has_ctx, "no context on the loop thread:\n%s", json);
	ck_assert_str_ne(t.trace, "00000000000000000000000000000000");
	ck_assert_str_ne(t.trace, TP_TRACE);
	ck_assert_str_ne(t.trace, TP2_TRACE);
	ck_assert_uint_eq(t.flags & 0x02, 0x02);
	ck_assert_str_eq(t.parent, "");
	ck_assert_str_eq(t.path, "/block");
	ck_assert_uint_eq(it_dump_count_trace(json, t.trace), 1);
	free(json);
	resp = it_release(&s, fd);
	it_assert_ok_body(resp, "block GET /block 0\n");
	free(resp);
	log = it_events(&s);
	ck_assert_msg(it_events_spans(log, t.trace, NULL) == 1, "log:\n%s", log);
	free(log);
	it_assert_gone(&s, tid, t.trace);
	it_server_stop(&s);
}

START_TEST(test_no_traceparent)
{
	check_new_trace("");
}
END_TEST

START_TEST(test_two_traceparents)
{
	check_new_trace("traceparent: " TP "\r\ntraceparent: " TP2 "\r\n");
}
END_TEST

START_TEST(test_post_body)
{
	struct it_server s;
	struct it_thread_ctx t;
	char *json, *resp;
	long tid;
	int fd;

	start(&s, true);
	fd = it_connect(s.port);
	it_send_str(fd, "POST /block HTTP/1.1\r\nHost: t\r\ntraceparent: " TP "\r\n"
			"Content-Length: 5\r\nConnection: close\r\n\r\nab");
	fd = it_send_blocking(&s, fd, "cde", &tid);
	json = it_ctxdump(s.child.pid);
	ck_assert(it_dump_thread(json, tid, &t));
	ck_assert_msg(t.has_ctx, "%s", json);
	ck_assert_str_eq(t.trace, TP_TRACE);
	ck_assert_str_eq(t.method, "POST");
	free(json);
	resp = it_release(&s, fd);
	it_assert_ok_body(resp, "block POST /block 5\n");
	free(resp);
	it_assert_gone(&s, tid, TP_TRACE);
	it_server_stop(&s);
}
END_TEST

static void
check_second_request(bool pipelined)
{
	const char *first =
		"GET /one HTTP/1.1\r\nHost: t\r\ntraceparent: " TP "\r\n\r\n";
	const char *second =
		"GET /block HTTP/1.1\r\nHost: t\r\ntraceparent: " TP2 "\r\n"
		"Connection: close\r\n\r\n";
	struct it_server s;
	struct it_thread_ctx t;
	char *json, *log, *resp, both[1024], span[17];
	long tid;
	int fd;

	start(&s, true);
	fd = it_connect(s.port);
	if (pipelined) {
		snprintf(both, sizeof(both), "%s%s", first, second);
		fd = it_send_blocking(&s, fd, both, &tid);
	} else {
		it_send_str(fd, first);
		resp = it_read_response(fd);
		it_assert_ok_body(resp, "generic GET /one 0\n");
		free(resp);
		fd = it_send_blocking(&s, fd, second, &tid);
	}
	json = it_ctxdump(s.child.pid);
	ck_assert(it_dump_thread(json, tid, &t));
	ck_assert_msg(t.has_ctx, "%s", json);
	ck_assert_str_eq(t.trace, TP2_TRACE);
	ck_assert_uint_eq(it_dump_count_trace(json, TP_TRACE), 0);
	free(json);
	resp = it_release(&s, fd);
	ck_assert_msg(strstr(resp, "\r\n\r\nblock GET /block 0\n"), "response: %s",
		      resp);
	free(resp);
	log = it_events(&s);
	ck_assert_msg(it_events_spans(log, TP_TRACE, NULL) == 1, "log:\n%s", log);
	ck_assert_msg(it_events_spans(log, TP2_TRACE, span) == 1, "log:\n%s", log);
	ck_assert_str_eq(span, t.span);
	free(log);
	it_assert_gone(&s, tid, TP2_TRACE);
	it_server_stop(&s);
}

START_TEST(test_keepalive_second_request)
{
	check_second_request(false);
}
END_TEST

START_TEST(test_pipelined_requests)
{
	check_second_request(true);
}
END_TEST

/* Callbacks that do not block: the virtual host's, and the generic one
 * answering a path whose own callback was deleted.  The event log shows
 * each request attached under its trace, with one span, then detached. */
START_TEST(test_vhost_and_deleted_cb)
{
	static const struct {
		const char *req, *body;
	} cases[] = {
		{"GET /v HTTP/1.1\r\nHost: vhost.test\r\ntraceparent: " TP "\r\n"
		 "Connection: close\r\n\r\n",
		 "vhost GET /v 0\n"},
		{"GET /gone HTTP/1.1\r\nHost: t\r\ntraceparent: " TP2 "\r\n"
		 "Connection: close\r\n\r\n",
		 "generic GET /gone 0\n"},
	};
	const char *traces[] = {TP_TRACE, TP2_TRACE};
	struct it_server s;
	char *resp, *log, line[512];
	size_t i;

	start(&s, true);
	for (i = 0; i < 2; i++) {
		resp = it_exchange(s.port, cases[i].req, NULL);
		it_assert_ok_body(resp, cases[i].body);
		free(resp);
		test_child_expect(&s.child, "DONE ", line, sizeof(line), IT_TIMEOUT_MS);
		log = it_events(&s);
		ck_assert_msg(it_events_spans(log, traces[i], NULL) == 1, "log:\n%s",
			      log);
		free(log);
		it_assert_gone(&s, s.child.pid, traces[i]);
	}
	it_server_stop(&s);
}
END_TEST

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
		"GET /v HTTP/1.1\r\nHost: vhost.test\r\nConnection: close\r\n\r\n",
		"GET /gone HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
		"BREW /pot HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
		"POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
		"Connection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	};
	size_t n = sizeof(reqs) / sizeof(reqs[0]), i, len0, len1;
	struct it_server s0, s1;

	start(&s0, false);
	start(&s1, true);
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

TEST_SUITE(integration_evhttp_suite)
{
	Suite *s = suite_create("libevent evhttp server under the shim");
	TCase *tc = tcase_create("evhttp");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_traced_request);
	tcase_add_test(tc, test_no_traceparent);
	tcase_add_test(tc, test_two_traceparents);
	tcase_add_test(tc, test_post_body);
	tcase_add_test(tc, test_keepalive_second_request);
	tcase_add_test(tc, test_pipelined_requests);
	tcase_add_test(tc, test_vhost_and_deleted_cb);
	tcase_add_test(tc, test_same_bytes);
	suite_add_tcase(s, tc);
	return s;
}
