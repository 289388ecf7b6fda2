/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Checks shared by the integration tests of servers whose handlers block
 * until the test says "GO" (test-integration-mhd.c, -evhttp.c): both run
 * the same requests against helper servers that answer alike, so what they
 * check about a blocked request, its event log and the response bytes is
 * written once here.  Static functions: each test program includes this
 * once. */

#include "test-integration.h"

/* Two valid, sampled traceparents of different traces. */
#define TP_TRACE  "0af7651916cd43dd8448eb211c80319c"
#define TP_PARENT "b7ad6b7169203331"
#define TP        "00-" TP_TRACE "-" TP_PARENT "-01"
#define TP2_TRACE "4bf92f3577b34da6a3ce929d0e0e4736"
#define TP2       "00-" TP2_TRACE "-00f067aa0ba902b7-01"

/* Start the helper program (with its one argument arg unless NULL), which
 * records the x-request-id header. */
static void __attribute__((unused))
it_block_start(struct it_server *s, const char *helper, const char *arg, bool preload)
{
	static char path[4096];
	char *argv[] = {path, (char *)arg, NULL};
	char *env[] = {"CTXSHIM_HEADER_ATTRS=x-request-id", NULL};

	snprintf(path, sizeof(path), "%s/%s", test_env_path("HELPER_DIR"), helper);
	it_server_start(s, argv, preload, env);
}

/* ctxdump's JSON (malloc'd) while the handler of thread tid blocks; that
 * thread must be listed and publish a context, returned in *t. */
static inline char *
it_dump_blocked(const struct it_server *s, long tid, struct it_thread_ctx *t)
{
	char *json = it_ctxdump(s->child.pid);

	ck_assert_msg(it_dump_thread(json, tid, t), "thread %ld not in:\n%s", tid,
		      json);
	ck_assert_msg(t->has_ctx, "no context on the handler thread %ld:\n%s", tid,
		      json);
	return json;
}

/* The context continues traceparent "00-<trace>-<parent>-01", names the
 * request and the x-request-id header, and no other thread publishes it. */
static inline void
it_assert_continued(const struct it_thread_ctx *t,
		    const char *json,
		    const char *trace,
		    const char *parent,
		    const char *method,
		    const char *path,
		    const char *request_id)
{
	ck_assert_str_eq(t->trace, trace);
	ck_assert_str_ne(t->span, parent);
	ck_assert_str_ne(t->span, "0000000000000000");
	ck_assert_uint_eq(t->flags, 1);
	ck_assert_str_eq(t->method, method);
	ck_assert_str_eq(t->path, path);
	ck_assert_str_eq(t->parent, parent);
	ck_assert_str_eq(t->extra, request_id);
	ck_assert_msg(it_dump_count_trace(json, trace) == 1,
		      "the trace is published on another thread too:\n%s", json);
}

/* Exactly one span-id in the log for trace; it is span unless span is
 * NULL. */
static inline void
it_assert_one_span(const char *log, const char *trace, const char *span)
{
	char got[17];

	ck_assert_msg(it_events_spans(log, trace, got) == 1, "log:\n%s", log);
	if (span)
		ck_assert_str_eq(got, span);
}

/* Lets the handler blocked on fd answer; the response must be 200 OK with
 * exactly body (when !exact, only some response must have that body:
 * pipelined responses precede it). */
static inline void
it_release_ok(struct it_server *s, int fd, const char *body, bool exact)
{
	char *resp = it_release(s, fd), tail[512];

	if (exact) {
		it_assert_ok_body(resp, body);
	} else {
		snprintf(tail, sizeof(tail), "\r\n\r\n%s", body);
		ck_assert_msg(strstr(resp, tail), "response: %s", resp);
	}
	free(resp);
}

/* t is a new random trace of the shim's (not the zero trace, neither TP's
 * nor TP2's, the random flag set, no parent). */
static void __attribute__((unused)) it_assert_new_trace(const struct it_thread_ctx *t)
{
	ck_assert_str_ne(t->trace, "00000000000000000000000000000000");
	ck_assert_str_ne(t->trace, TP_TRACE);
	ck_assert_str_ne(t->trace, TP2_TRACE);
	ck_assert_uint_eq(t->flags & 0x02, 0x02); /* random trace-id */
	ck_assert_str_eq(t->parent, "");
}

/* A request without a (valid) traceparent, extra_headers added to
 * "GET <path>", gets a new random trace on its handler's thread, with one
 * span, gone after the response.  method is checked unless NULL.  Stops
 * s. */
static void __attribute__((unused)) it_check_new_trace(struct it_server *s,
						       const char *path,
						       const char *extra_headers,
						       const char *method,
						       const char *body)
{
	struct it_thread_ctx t;
	char req[1024], *json, *log;
	long tid;
	int fd;

	snprintf(req, sizeof(req),
		 "GET %s HTTP/1.1\r\nHost: t\r\n%sConnection: close\r\n\r\n", path,
		 extra_headers);
	fd = it_send_blocking(s, -1, req, &tid);
	json = it_dump_blocked(s, tid, &t);
	it_assert_new_trace(&t);
	if (method)
		ck_assert_str_eq(t.method, method);
	ck_assert_str_eq(t.path, path);
	ck_assert_uint_eq(it_dump_count_trace(json, t.trace), 1);
	free(json);
	it_release_ok(s, fd, body, true);
	log = it_events(s);
	it_assert_one_span(log, t.trace, NULL);
	free(log);
	it_assert_gone(s, tid, t.trace);
	it_server_stop(s);
}

/* Two requests on one connection, one after the other (keep-alive) or in
 * one write (pipelined): "GET /one" (TP) answered with first_body, then
 * "GET <path>" (TP2), which blocks.  Each gets its own context; the path
 * is checked in it when check_path.  Stops s. */
static void __attribute__((unused)) it_check_second_request(struct it_server *s,
							    bool pipelined,
							    const char *path,
							    bool check_path,
							    const char *first_body,
							    const char *body)
{
	const char *first =
		"GET /one HTTP/1.1\r\nHost: t\r\ntraceparent: " TP "\r\n\r\n";
	struct it_thread_ctx t;
	char *json, *log, *resp, second[512], both[1024];
	long tid;
	int fd;

	snprintf(second, sizeof(second),
		 "GET %s HTTP/1.1\r\nHost: t\r\ntraceparent: " TP2 "\r\n"
		 "Connection: close\r\n\r\n",
		 path);
	fd = it_connect(s->port);
	if (pipelined) {
		snprintf(both, sizeof(both), "%s%s", first, second);
		fd = it_send_blocking(s, fd, both, &tid);
	} else {
		it_send_str(fd, first);
		resp = it_read_response(fd);
		it_assert_ok_body(resp, first_body);
		free(resp);
		fd = it_send_blocking(s, fd, second, &tid);
	}
	json = it_dump_blocked(s, tid, &t);
	ck_assert_str_eq(t.trace, TP2_TRACE);
	if (check_path)
		ck_assert_str_eq(t.path, path);
	ck_assert_uint_eq(it_dump_count_trace(json, TP_TRACE), 0);
	free(json);
	it_release_ok(s, fd, body, false);
	log = it_events(s);
	it_assert_one_span(log, TP_TRACE, NULL);
	it_assert_one_span(log, TP2_TRACE, t.span);
	free(log);
	it_assert_gone(s, tid, TP2_TRACE);
	it_server_stop(s);
}

/* A folded traceparent line (obs-fold, RFC 9110 5.5): the library joins
 * it, the socket level takes the field for invalid, so the two give the
 * request different contexts.  The handler of "GET <path>" shows the
 * library's (TP); after it returns, answered with body, the thread must
 * not show the socket level's context of the same request again (the fd
 * is the hook's): no event of reason restore ("mhd-restore", ...).  Stops
 * s. */
static void __attribute__((unused)) it_check_layers_disagree(struct it_server *s,
							     const char *path,
							     const char *body,
							     const char *restore)
{
	struct it_thread_ctx t;
	char req[512], reason[64], *json, *log;
	long tid;
	int fd;

	snprintf(req, sizeof(req),
		 "GET %s HTTP/1.1\r\nHost: t\r\ntraceparent: " TP
		 "\r\n \r\nConnection: close\r\n\r\n",
		 path);
	fd = it_send_blocking(s, -1, req, &tid);
	json = it_dump_blocked(s, tid, &t);
	ck_assert_str_eq(t.trace, TP_TRACE);
	free(json);
	it_release_ok(s, fd, body, true);
	log = it_events(s);
	snprintf(reason, sizeof(reason), " reason=%s\n", restore);
	ck_assert_msg(!strstr(log, reason), "log:\n%s", log);
	free(log);
	it_assert_gone(s, tid, TP_TRACE);
	it_server_stop(s);
}

/* x-request-id sent on two lines is one list (RFC 9110 5.3): published
 * joined with ", ", like the socket level's, and cut as one value: when
 * long, the first line whole, then as much of the second as fits the
 * shim's 256 bytes and the record's 255.  lines picks short lines (0),
 * 200-byte lines (1), or an empty first line (2), which the socket level
 * joins as ", req-2".  "GET <path>" is answered with body.  Stops s. */
static void __attribute__((unused))
it_check_attr_lines(struct it_server *s, const char *path, const char *body, int lines)
{
	struct it_thread_ctx t;
	char a[201], b[201], req[1024], want[512], *json;
	long tid;
	int fd;

	if (lines == 1) {
		memset(a, 'a', 200);
		a[200] = '\0';
		memset(b, 'b', 200);
		b[200] = '\0';
	} else {
		strcpy(a, lines == 2 ? "" : "req-1");
		strcpy(b, "req-2");
	}
	snprintf(req, sizeof(req),
		 "GET %s HTTP/1.1\r\nHost: t\r\ntraceparent: " TP
		 "\r\nX-Request-Id: %s\r\nx-request-id: %s\r\n"
		 "Connection: close\r\n\r\n",
		 path, a, b);
	/* What the record keeps (TREC_VALUE_MAX, 255) of "a, b". */
	snprintf(want, sizeof(want), "%s, %s", a, b);
	want[255] = '\0';
	fd = it_send_blocking(s, -1, req, &tid);
	json = it_dump_blocked(s, tid, &t);
	ck_assert_str_eq(t.trace, TP_TRACE);
	ck_assert_str_eq(t.extra, want);
	free(json);
	it_release_ok(s, fd, body, true);
	it_assert_gone(s, tid, TP_TRACE);
	it_server_stop(s);
}

/* The helpers' /stream/a (TP) and /stream/b (TP2): bodies the
 * application writes after its handler returned, from the library's
 * callbacks (a content reader, chunk-written callbacks), each line the
 * trace its thread showed; the helper says "BODY <tid> <path>" when a
 * handler starts one, "END <path>" when it is written, "SEEN <path>
 * <trace>" from its completion callback and, with frees, "FREE <path>"
 * from the response's free callback.  /stream/a goes to a connection with
 * a small receive buffer and is read only after the whole of /stream/b,
 * so that the two bodies' callbacks interleave (b ends first).  check()
 * asserts a body (and frees it); the event log has reason for both
 * traces; afterwards neither thread shows either request.  Stops s. */
static void __attribute__((unused))
it_check_two_streams(struct it_server *s,
		     void (*check)(char *resp, size_t len, const char *trace),
		     const char *reason,
		     bool frees)
{
	char line[512], *ra, *rb, *log;
	size_t la, lb;
	long tida, tidb = 0;
	int fa, fb, ends = 0, freed = 0, seen = 0;
	bool end_b = false;

	fa = it_connect_small(s->port);
	it_send_str(fa, "GET /stream/a HTTP/1.1\r\nHost: t\r\ntraceparent: " TP
			"\r\nConnection: close\r\n\r\n");
	test_child_expect(&s->child, "BODY ", line, sizeof(line), IT_TIMEOUT_MS);
	tida = strtol(line + 5, NULL, 10);
	ck_assert_ptr_nonnull(strstr(line, " /stream/a"));
	fb = it_connect(s->port);
	it_send_str(fb, "GET /stream/b HTTP/1.1\r\nHost: t\r\ntraceparent: " TP2
			"\r\nConnection: close\r\n\r\n");
	rb = it_read_all(fb, &lb);
	ra = it_read_all(fa, &la);
	close(fa);
	close(fb);
	while (ends < 2 || (frees && freed != 3) || seen != 3) {
		test_child_readline(&s->child, line, sizeof(line), IT_TIMEOUT_MS);
		if (strncmp(line, "BODY ", 5) == 0) {
			ck_assert_ptr_nonnull(strstr(line, " /stream/b"));
			tidb = strtol(line + 5, NULL, 10);
		} else if (strncmp(line, "END ", 4) == 0) {
			ck_assert_msg(end_b || strstr(line, " /stream/b"),
				      "/stream/a ended before /stream/b: %s", line);
			end_b = true;
			ends++;
		} else if (strncmp(line, "SEEN ", 5) == 0) {
			/* the completion callback */
			if (strcmp(line, "SEEN /stream/a " TP_TRACE) == 0)
				seen |= 1;
			else if (strcmp(line, "SEEN /stream/b " TP2_TRACE) == 0)
				seen |= 2;
			else
				ck_abort_msg("completion: %s", line);
		} else if (strcmp(line, "FREE /stream/a") == 0) {
			freed |= 1;
		} else if (strcmp(line, "FREE /stream/b") == 0) {
			freed |= 2;
		}
	}
	ck_assert_int_gt(tidb, 0);
	check(ra, la, TP_TRACE);
	check(rb, lb, TP2_TRACE);
	log = it_events(s);
	ck_assert_msg(it_events_count(log, TP_TRACE, reason) >= 1, "log:\n%.3000s",
		      log);
	ck_assert_msg(it_events_count(log, TP2_TRACE, reason) >= 1, "log:\n%.3000s",
		      log);
	free(log);
	it_assert_gone(s, tida, TP_TRACE);
	it_assert_gone(s, tidb, TP2_TRACE);
	it_server_stop(s);
}

/* Requests both servers answer; it_check_same_bytes() lists are
 * { IT_SAME_BYTES_HEAD, <the server's own>, IT_SAME_BYTES_TAIL }. */
#define IT_SAME_BYTES_HEAD                                                \
	"GET /hello?x=1 HTTP/1.1\r\nHost: t\r\ntraceparent: " TP "\r\n"   \
	"Connection: close\r\n\r\n",                                      \
		"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", \
		"GET /two HTTP/1.1\r\nHost: t\r\ntraceparent: " TP        \
		"\r\ntraceparent: " TP2 "\r\n"                            \
		"Connection: close\r\n\r\n",                              \
		"POST /p HTTP/1.1\r\nHost: t\r\ntraceparent: " TP         \
		"\r\nContent-Length: 10\r\n"                              \
		"Connection: close\r\n\r\n0123456789",                    \
		"GET /one HTTP/1.0\r\ntraceparent: " TP "\r\n\r\n"
#define IT_SAME_BYTES_TAIL                                                      \
	"BREW /pot HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",           \
		"POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n" \
		"Connection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n"

/* The same requests get the same response bytes from s0 (without the
 * shim) and s1 (with it).  Stops both. */
static void __attribute__((unused)) it_check_same_bytes(struct it_server *s0,
							struct it_server *s1,
							const char *const reqs[],
							size_t n)
{
	size_t i, len0, len1;

	for (i = 0; i < n; i++) {
		char *r0 = it_exchange(s0->port, reqs[i], &len0);
		char *r1 = it_exchange(s1->port, reqs[i], &len1);

		ck_assert_msg(len0 > 0, "no response to request %zu", i);
		ck_assert_msg(
			len0 == len1 && memcmp(r0, r1, len0) == 0,
			"request %zu: responses differ:\n--- without\n%s\n--- with\n%s",
			i, r0, r1);
		free(r0);
		free(r1);
	}
	it_server_stop(s0);
	it_server_stop(s1);
}
