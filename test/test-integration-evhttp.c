/* SPDX-License-Identifier: Apache-2.0 */
/* A libevent evhttp server under the shim: while the callback of a traced
 * request blocks, ctxdump shows that request's context on the loop thread
 * and nowhere else; the socket level and the library level agree on one
 * span-id per request; after the response the context is gone; virtual
 * hosts and deleted callbacks are covered; responses are byte-identical
 * without the shim; a reply streamed from chunk callbacks shows its
 * request in each of them. */
#include "test-integration-block.h"

static void
start(struct it_server *s, bool preload)
{
	it_block_start(s, "evhttp-server", NULL, preload);
}

START_TEST(test_traced_request)
{
	struct it_server s;
	struct it_thread_ctx t;
	char *json, *log;
	long tid;
	int fd;

	start(&s, true);
	fd = it_send_blocking(&s, -1,
			      "GET /block?q=1 HTTP/1.1\r\nHost: t\r\ntraceparent: " TP
			      "\r\n"
			      "x-request-id: req-7\r\nConnection: close\r\n\r\n",
			      &tid);
	json = it_dump_blocked(&s, tid, &t);
	it_assert_continued(&t, json, TP_TRACE, TP_PARENT, "GET", "/block", "req-7");
	free(json);

	it_release_ok(&s, fd, "block GET /block?q=1 0\n", true);
	log = it_events(&s);
	it_assert_one_span(log, TP_TRACE, t.span);
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

	start(&s, true);
	it_check_new_trace(&s, "/block", extra_headers, NULL, "block GET /block 0\n");
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

START_TEST(test_attr_two_lines)
{
	struct it_server s;

	start(&s, true);
	it_check_attr_lines(&s, "/block", "block GET /block 0\n", _i);
}
END_TEST

START_TEST(test_post_body)
{
	struct it_server s;
	struct it_thread_ctx t;
	char *json;
	long tid;
	int fd;

	start(&s, true);
	fd = it_connect(s.port);
	it_send_str(fd, "POST /block HTTP/1.1\r\nHost: t\r\ntraceparent: " TP "\r\n"
			"Content-Length: 5\r\nConnection: close\r\n\r\nab");
	fd = it_send_blocking(&s, fd, "cde", &tid);
	json = it_dump_blocked(&s, tid, &t);
	ck_assert_str_eq(t.trace, TP_TRACE);
	ck_assert_str_eq(t.method, "POST");
	free(json);
	it_release_ok(&s, fd, "block POST /block 5\n", true);
	it_assert_gone(&s, tid, TP_TRACE);
	it_server_stop(&s);
}
END_TEST

static void
check_second_request(bool pipelined)
{
	struct it_server s;

	start(&s, true);
	it_check_second_request(&s, pipelined, "/block", false, "generic GET /one 0\n",
				"block GET /block 0\n");
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

/* The library and the socket level disagree on a request's context
 * (it_check_layers_disagree()). */
START_TEST(test_layers_disagree)
{
	struct it_server s;

	start(&s, true);
	it_check_layers_disagree(&s, "/block", "block GET /block 0\n",
				 "evhttp-restore");
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
		it_assert_one_span(log, traces[i], NULL);
		free(log);
		it_assert_gone(&s, s.child.pid, traces[i]);
	}
	it_server_stop(&s);
}
END_TEST

START_TEST(test_same_bytes)
{
	static const char *const reqs[] = {
		IT_SAME_BYTES_HEAD,
		"GET /v HTTP/1.1\r\nHost: vhost.test\r\nConnection: close\r\n\r\n",
		"GET /gone HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
		IT_SAME_BYTES_TAIL,
	};
	struct it_server s0, s1;

	start(&s0, false);
	start(&s1, true);
	it_check_same_bytes(&s0, &s1, reqs, sizeof(reqs) / sizeof(reqs[0]));
}
END_TEST

/* A method libevent 2.1 does not know, which it passes on as the type
 * 2.2 calls MOVE when the application allows it: "_OTHER", without an
 * original, since evhttp does not give its name. */
START_TEST(test_unknown_method)
{
	struct it_server s;
	struct it_thread_ctx t;
	char *json;
	long tid;
	int fd;

	it_block_start(&s, "evhttp-server", "-m", true);
	fd = it_send_blocking(&s, -1,
			      "PROPFIND /block HTTP/1.1\r\nHost: t\r\n"
			      "Connection: close\r\n\r\n",
			      &tid);
	json = it_dump_blocked(&s, tid, &t);
	ck_assert_str_eq(t.method, "_OTHER");
	ck_assert_str_eq(t.path, "/block");
	ck_assert_msg(!strstr(json, "\"key\": \"http.request.method_original\""), "%s",
		      json);
	free(json);
	it_release_ok(&s, fd, "block OTHER /block 0\n", true);
	it_server_stop(&s);
}
END_TEST

/* ---- chunked replies written from chunk callbacks ---- */

/* evhttp-server's /stream replies: STREAM_CHUNKS chunks of
 * STREAM_CHUNK_LINES lines of 33 bytes. */
#define STREAM_LINE        33
#define STREAM_CHUNK_LINES 496
#define STREAM_CHUNKS      512
#define STREAM_CHUNK_BYTES (STREAM_LINE * STREAM_CHUNK_LINES)

/* The first n chunks of the chunked /stream reply in resp (len bytes) are
 * whole, and every line of them was written while its thread showed
 * trace; returns where the rest of the reply starts. */
static const char *
check_chunks(const char *resp, size_t len, size_t n, const char *trace)
{
	const char *b = strstr(resp, "\r\n\r\n"), *end = resp + len;
	size_t i, k;

	ck_assert_msg(strncmp(resp, "HTTP/1.1 200 OK\r\n", 17) == 0, "response: %.300s",
		      resp);
	ck_assert_ptr_nonnull(strstr(resp, "Transfer-Encoding: chunked\r\n"));
	ck_assert_ptr_nonnull(b);
	b += 4;
	for (k = 0; k < n; k++) {
		char *e;
		unsigned long sz = strtoul(b, &e, 16);

		ck_assert_msg(sz == STREAM_CHUNK_BYTES && strncmp(e, "\r\n", 2) == 0,
			      "chunk %zu of trace %s: %.40s", k, trace, b);
		b = e + 2;
		ck_assert_msg((size_t)(end - b) >= sz + 2, "chunk %zu of trace %s cut",
			      k, trace);
		for (i = 0; i < STREAM_CHUNK_LINES; i++) {
			const char *l = b + i * STREAM_LINE;

			ck_assert_msg(
				memcmp(l, trace, 32) == 0 && l[32] == '\n',
				"chunk %zu line %zu of the reply of trace %s: %.32s", k,
				i, trace, l);
		}
		b += sz;
		ck_assert_msg(strncmp(b, "\r\n", 2) == 0, "chunk %zu of trace %s", k,
			      trace);
		b += 2;
	}
	return b;
}

/* resp (freed here) is a whole /stream reply of trace. */
static void
assert_stream(char *resp, size_t len, const char *trace)
{
	ck_assert_str_eq(check_chunks(resp, len, STREAM_CHUNKS, trace), "0\r\n\r\n");
	free(resp);
}

/* Chunked replies written chunk after chunk from
 * evhttp_send_reply_chunk_with_cb()'s callback, after the request
 * callback returned, for two requests at once: each callback shows its
 * own request's trace, the completion callback too
 * (it_check_two_streams()). */
START_TEST(test_stream_chunks)
{
	struct it_server s;

	start(&s, true);
	it_check_two_streams(&s, assert_stream, "evhttp-chunk", false);
}
END_TEST

/* The same replies started by a zero timer that the request callback
 * scheduled (event_base_once()), as a server that answers from its
 * backend's reply does: the timer, the chunk callbacks it set and the
 * completion callback show the request, as when set from the request
 * callback itself (they showed none). */
START_TEST(test_stream_chunks_later)
{
	struct it_server s;

	it_block_start(&s, "evhttp-server", "-l", true);
	it_check_two_streams(&s, assert_stream, "evhttp-chunk", false);
}
END_TEST

/* A once event scheduled by a request that was answered and freed before
 * it ran, and a later request at the freed one's address (the allocator
 * hands evhttp the same block again: glibc does for calloc() once the
 * per-thread cache is off, or full, as in a busy server): the chunk and
 * completion callbacks the once event sets for the later request are not
 * the first request's (they showed it, for the whole reply). */
START_TEST(test_stream_later_stale_request)
{
	static char path[4096];
	char *argv[] = {path, NULL};
	char *env[] = {"GLIBC_TUNABLES=glibc.malloc.tcache_count=0", NULL};
	char line[512], *resp;
	struct it_server s;
	int fd;

	snprintf(path, sizeof(path), "%s/evhttp-server", test_env_path("HELPER_DIR"));
	it_server_start(&s, argv, true, env);
	fd = it_connect(s.port);
	it_send_str(fd,
		    "GET /stale HTTP/1.1\r\nHost: t\r\ntraceparent: " TP "\r\n\r\n");
	resp = it_read_response(fd);
	it_assert_ok_body(resp, "stale GET /stale 0\n");
	free(resp);
	it_send_str(fd, "GET /stream/stale HTTP/1.1\r\nHost: t\r\ntraceparent: " TP2
			"\r\nConnection: close\r\n\r\n");
	test_child_expect(&s.child, "STALE ", line, sizeof(line), IT_TIMEOUT_MS);
	/* ASan's allocator keeps a freed block in quarantine: there the
	 * addresses differ and the check below proves nothing. */
#ifndef __SANITIZE_ADDRESS__
	ck_assert_msg(strcmp(line, "STALE 1") == 0,
		      "%s: the second request is not at the first's address", line);
#endif
	free(it_read_all(fd, NULL));
	close(fd);
	test_child_expect(&s.child, "SEEN /stream/stale ", line, sizeof(line),
			  IT_TIMEOUT_MS);
	ck_assert_msg(strstr(line, TP_TRACE) == NULL, "%s", line);
	it_server_stop(&s);
}
END_TEST

/* A client that closes in the middle of a /stream reply: evhttp drops the
 * pending chunk callback with the connection, and the request goes when
 * the application ends it (the helper's close callback).  The chunks
 * written before showed the request; the server goes on serving, and its
 * loop thread shows the request no more.  Under ASan (test/sanitize.sh)
 * and valgrind this is also the test that nothing of ours is freed twice
 * or used after the request went. */
START_TEST(test_stream_cut)
{
	struct it_server s;
	char line[512], *buf = NULL, *resp;
	size_t len = 0, cap = 0;
	long tid;
	int fd;

	start(&s, true);
	fd = it_connect_small(s.port);
	it_send_str(fd, "GET /stream/c HTTP/1.1\r\nHost: t\r\ntraceparent: " TP
			"\r\nConnection: close\r\n\r\n");
	test_child_expect(&s.child, "BODY ", line, sizeof(line), IT_TIMEOUT_MS);
	tid = strtol(line + 5, NULL, 10);
	/* The head and four whole chunks, three of them from chunk
	 * callbacks. */
	while (len < 512 + 4 * (STREAM_CHUNK_BYTES + 8) + 8)
		ck_assert(it_read_some(fd, &buf, &len, &cap));
	(void)check_chunks(buf, len, 4, TP_TRACE);
	free(buf);
	close(fd);
	test_child_expect(&s.child, "CUT /stream/c", line, sizeof(line), IT_TIMEOUT_MS);
	resp = it_exchange(
		s.port, "GET /after HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
		NULL);
	it_assert_ok_body(resp, "generic GET /after 0\n");
	free(resp);
	it_assert_gone(&s, tid, TP_TRACE);
	it_server_stop(&s);
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
	tcase_add_loop_test(tc, test_attr_two_lines, 0, 3);
	tcase_add_test(tc, test_post_body);
	tcase_add_test(tc, test_keepalive_second_request);
	tcase_add_test(tc, test_pipelined_requests);
	tcase_add_test(tc, test_layers_disagree);
	tcase_add_test(tc, test_vhost_and_deleted_cb);
	tcase_add_test(tc, test_same_bytes);
	tcase_add_test(tc, test_unknown_method);
	tcase_add_test(tc, test_stream_chunks);
	tcase_add_test(tc, test_stream_chunks_later);
	tcase_add_test(tc, test_stream_later_stale_request);
	tcase_add_test(tc, test_stream_cut);
	suite_add_tcase(s, tc);
	return s;
}
