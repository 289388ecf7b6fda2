/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP/2 under the shim (hooks/hook-nghttp2.c), cleartext with prior
 * knowledge on 127.0.0.1:
 *
 *  - an nghttp2 server with no tracing code (helpers/h2-server.c) gets
 *    several concurrent streams on one connection with different
 *    traceparents (a POST whose body comes last, then two GETs): each
 *    stream's handler runs under that stream's context (the helper reports
 *    what its thread published), and while the POST's handler blocks,
 *    ctxdump shows the POST's context on the connection's thread, not the
 *    context of the streams handled after its headers arrived; afterwards
 *    nothing is left;
 *  - the same server answering three streams (two traceparents, one
 *    without) at once, each body handed out in pieces by the data source
 *    read callback (with nghttp2_submit_response, with
 *    nghttp2_submit_data, with NGHTTP2_DATA_FLAG_NO_COPY and a
 *    send_data_callback, from a second data source submitted after the
 *    first ended with NGHTTP2_DATA_FLAG_NO_END_STREAM, and from one
 *    submitted before the response's HEADERS and their own), under a thread context of its own
 *    (TRACEPARENT): the pieces of the three bodies interleave, each is
 *    produced under its own stream's trace, so is each frame's
 *    before_frame_send and on_frame_send callback (the connection's
 *    frames under the thread's own context), and when
 *    nghttp2_session_mem_send returns the thread shows its own context
 *    again;
 *  - the same server upgrading each connection from HTTP/1.1
 *    ("Upgrade: h2c", driven by the real curl with three URLs: the
 *    upgrade request is stream 1, the others come as streams 3 and 5),
 *    the 101 written before or after nghttp2_session_upgrade2() (or
 *    nghttp2_session_upgrade()), the session made before the 101 or
 *    after it (the socket level followed the connection as HTTP/2 from
 *    the 101 and hands it back), the
 *    responses sent one by one or all at once after the other streams'
 *    callbacks ran: stream 1's handling and every callback of its
 *    response run under its trace with the span the socket level gave
 *    the request, the other streams' under theirs, and after each send
 *    the thread shows nothing (not the upgrade request), but for the
 *    first, made before the session received anything (the connection is
 *    the socket level's until its first frame confirms the upgrade);
 *  - a single-thread server (helpers/h2-loop.c) that reads another
 *    connection's HTTP/1.1 request between the h2c head and the upgrade:
 *    that other connection's later requests are still published;
 *  - a server session made at the address of one being deleted (while
 *    nghttp2_session_del frees it) answers as without the shim, its body
 *    made under its request's trace;
 *  - an nghttp2 client (helpers/h2-client.c) and a libcurl HTTP/2 client
 *    (helpers/curl-get.c) under the shim with TRACEPARENT: every request
 *    carries exactly one traceparent, a new child of TRACEPARENT, or the
 *    application's own one untouched, or none when the application sent
 *    a tracestate of its own; libcurl's requests are injected once, by
 *    the libcurl hook, and not at all when the application disabled the
 *    header;
 *  - a tracestate of 511, 512 (W3C's maximum) or 513 bytes: an nghttp2
 *    server's handler propagates what its request brought, an nghttp2
 *    client under TRACESTATE sends it, whole up to 512 bytes, else cut
 *    after a whole member. */
#include "test-common.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test-integration.h"
#pragma GCC diagnostic pop

#include <time.h>

#define TA  "0af7651916cd43dd8448eb211c80319c"
#define PA  "b7ad6b7169203331"
#define TPA "00-" TA "-" PA "-01"
#define TB  "4bf92f3577b34da6a3ce929d0e0e4736"
#define PB  "00f067aa0ba902b7"
#define TPB "00-" TB "-" PB "-01"
#define TC  "5b8aa5a2d2c872e8321cf37308d69df2"
#define TPC "00-" TC "-051581bf3cb55c13-01"

static void
helper(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", test_env_path("HELPER_DIR"), name);
}

static void
server_start(struct it_server *s, bool preload, bool header2)
{
	static char path[4096];
	char *argv[] = {path, header2 ? "--header2" : NULL, NULL};

	helper(path, sizeof(path), "h2-server");
	it_server_start(s, argv, preload, NULL);
}

/* One "REQ <tid> <stream> <method> <path> <n> <tp> <seen> <ts>" line. */
struct req_line {
	long tid;
	int stream;
	char method[16], path[256], tp[128], seen[40], ts[600];
	unsigned n_tp;
};

static void
expect_req(struct it_server *s, struct req_line *r)
{
	char line[2048];

	test_child_expect(&s->child, "REQ ", line, sizeof(line), IT_TIMEOUT_MS);
	ck_assert_msg(sscanf(line, "REQ %ld %d %15s %255s %u %127s %39s %599s", &r->tid,
			     &r->stream, r->method, r->path, &r->n_tp, r->tp, r->seen,
			     r->ts) == 8,
		      "bad line: %s", line);
}

/* Run argv to completion (under the shim with env, if preload); its
 * stdout, malloc'd. */
static char *
run(char *const argv[], char *const env[], bool preload)
{
	char *out, *err;
	int st = test_run_capture(argv, env, preload, &out, &err, IT_TIMEOUT_MS);

	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: status %#x: %s%s",
		      argv[0], st, out, err);
	free(err);
	return out;
}

/* ---- server side ---- */

START_TEST(test_server_streams)
{
	struct it_server s;
	struct test_child client;
	struct req_line x, y, post;
	struct it_thread_ctx t;
	char cpath[4096], port[16], block[128], line[512], *json, *log, span[17];
	char *cargv[] = {cpath, port, block, "/x@" TPB, "/y", NULL};
	long deadline;
	int st;

	server_start(&s, true, _i == 1);
	helper(cpath, sizeof(cpath), "h2-client");
	snprintf(port, sizeof(port), "%u", s.port);
	snprintf(block, sizeof(block), "+/block/post?q=1@%s", TPA);
	test_child_start(&client, cargv, NULL, false);

	/* The GETs complete while the POST waits for its body. */
	expect_req(&s, &x);
	expect_req(&s, &y);
	expect_req(&s, &post);
	ck_assert_str_eq(x.path, "/x");
	ck_assert_str_eq(x.seen, TB);
	ck_assert_str_eq(y.path, "/y");
	ck_assert_str_ne(y.seen, "none");
	ck_assert_str_ne(y.seen, TA);
	ck_assert_str_ne(y.seen, TB);
	ck_assert_str_eq(post.path, "/block/post?q=1");
	ck_assert_str_eq(post.method, "POST");
	ck_assert_str_eq(post.seen, TA);
	ck_assert_int_eq(post.tid, x.tid);
	ck_assert_int_eq(post.tid, y.tid);
	test_child_expect(&s.child, "BLOCK ", line, sizeof(line), IT_TIMEOUT_MS);

	json = it_ctxdump(s.child.pid);
	ck_assert_msg(it_dump_thread(json, post.tid, &t), "thread %ld not in:\n%s",
		      post.tid, json);
	ck_assert_msg(t.has_ctx, "no context on the connection's thread:\n%s", json);
	ck_assert_str_eq(t.trace, TA);
	ck_assert_str_ne(t.span, PA);
	ck_assert_str_eq(t.parent, PA);
	ck_assert_uint_eq(t.flags, 1);
	ck_assert_str_eq(t.method, "POST");
	ck_assert_str_eq(t.path, "/block/post");
	ck_assert_uint_eq(it_dump_count_trace(json, TA), 1);
	ck_assert_uint_eq(it_dump_count_trace(json, TB), 0);
	ck_assert_uint_eq(it_dump_count_trace(json, y.seen), 0);
	free(json);

	test_child_send(&s.child, "go\n");
	test_child_expect(&client, "RESP /x ", line, sizeof(line), IT_TIMEOUT_MS);
	ck_assert_str_eq(line, "RESP /x 200 path=/x");
	test_child_expect(&client, "RESP /y ", line, sizeof(line), IT_TIMEOUT_MS);
	ck_assert_str_eq(line, "RESP /y 200 path=/y");
	test_child_expect(&client, "RESP /block/post?q=1 ", line, sizeof(line),
			  IT_TIMEOUT_MS);
	ck_assert_str_eq(line, "RESP /block/post?q=1 200 path=/block/post?q=1");
	test_child_expect(&client, "DONE ", line, sizeof(line), IT_TIMEOUT_MS);
	ck_assert_str_eq(line, "DONE 0");
	st = test_child_finish(&client, IT_TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "client status %#x", st);

	/* One span per stream, published only inside its callbacks. */
	deadline = test_now_ms() + IT_TIMEOUT_MS;
	for (;;) {
		const char *last;

		log = it_events(&s);
		last = it_events_last(log, post.tid);
		if (last && strstr(last, " detach ") &&
		    strstr(last, " reason=h2-return"))
			break;
		ck_assert_msg(test_now_ms() < deadline, "never detached:\n%s", log);
		free(log);
		usleep(5000);
	}
	ck_assert_msg(it_events_spans(log, TA, span) == 1, "log:\n%s", log);
	ck_assert_str_eq(span, t.span);
	ck_assert_msg(it_events_spans(log, TB, NULL) == 1, "log:\n%s", log);
	ck_assert_msg(it_events_count(log, TA, "h2-stream") >= 3, "log:\n%s", log);
	free(log);
	it_assert_gone(&s, post.tid, TA);
	it_server_stop(&s);
}
END_TEST

/* A server that reads the connection's first bytes (the preface, SETTINGS
 * and, usually, the request's HEADERS) before it makes its nghttp2
 * session (h2-server --read-first): the socket level saw the preface
 * first and follows the connection as HTTP/2 until the session is made
 * (preload/conn.c, "HTTP/2"), and no longer.  What it published for the
 * request is taken off the thread there ("h2-library") and handed to the
 * session's stream, whose callbacks run under it: one request, one
 * span-id in the event log.  Without the hand-over the stream got a span
 * of its own; without the rule, moreover, the socket level's came back
 * after each callback ("h2-restore"). */
START_TEST(test_server_read_first)
{
	struct it_server s;
	struct req_line x;
	char spath[4096], cpath[4096], port[16], *log;
	char *sargv[] = {spath, "--read-first", NULL};
	char *cargv[] = {cpath, port, "/x@" TPB, NULL};
	long deadline;

	helper(spath, sizeof(spath), "h2-server");
	it_server_start(&s, sargv, true, NULL);
	helper(cpath, sizeof(cpath), "h2-client");
	snprintf(port, sizeof(port), "%u", s.port);
	free(run(cargv, NULL, false));
	expect_req(&s, &x);
	ck_assert_str_eq(x.path, "/x");
	ck_assert_str_eq(x.seen, TB);
	deadline = test_now_ms() + IT_TIMEOUT_MS;
	for (;;) {
		const char *last;

		log = it_events(&s);
		last = it_events_last(log, x.tid);
		if (last && strstr(last, " detach ") &&
		    strstr(last, " reason=h2-return"))
			break;
		ck_assert_msg(test_now_ms() < deadline, "never detached:\n%s", log);
		free(log);
		usleep(5000);
	}
	ck_assert_msg(it_events_spans(log, TB, NULL) == 1, "two spans:\n%s", log);
	ck_assert_msg(it_events_count(log, TB, "h2-stream") >= 1, "log:\n%s", log);
	ck_assert_msg(it_events_count(log, TB, "request") ==
			      it_events_count(log, TB, "h2-library"),
		      "log:\n%s", log);
	ck_assert_msg(it_events_count(log, TB, "h2-restore") == 0, "log:\n%s", log);
	free(log);
	it_assert_gone(&s, x.tid, TB);
	it_server_stop(&s);
}
END_TEST

/* The REQ line of stream id among n, or NULL. */
static const struct req_line *
req_of(const struct req_line *r, unsigned n, int id)
{
	unsigned i;

	for (i = 0; i < n; i++)
		if (r[i].stream == id)
			return &r[i];
	return NULL;
}

/* test_server_bodies: how h2-server answers, beyond --chunks 3 --batch 3. */
static const struct {
	const char *opt[2];
	bool no_copy;
} body_variant[] = {
	{{NULL, NULL}, false},                 /* nghttp2_submit_response */
	{{"--submit-data", NULL}, false},      /* headers, then submit_data */
	{{"--no-copy", "--frame-send"}, true}, /* + send_data_callback */
	{{"--two-parts", NULL}, false},        /* a second source after EOF */
	{{"--data-first", NULL}, false},       /* DATA source before HEADERS' */
};

START_TEST(test_server_bodies)
{
	char tp_env[] = "TRACEPARENT=" TPC, *extra[] = {tp_env, NULL};
	char spath[4096], cpath[4096], port[16], line[512], *out, *log;
	char *sargv[] = {spath,
			 "--chunks",
			 "3",
			 "--batch",
			 "3",
			 (char *)body_variant[_i].opt[0],
			 (char *)body_variant[_i].opt[1],
			 NULL};
	char *cargv[] = {cpath, port, "/a@" TPA, "/b@" TPB, "/c", NULL};
	bool no_copy = body_variant[_i].no_copy, done = false;
	size_t bytes[3] = {0, 0, 0}, sent[3] = {0, 0, 0};
	int order[64];
	unsigned n_chunks = 0, n_frames = 0, i, k;
	bool interleaved = false;
	struct req_line r[3];
	struct it_server s;

	helper(spath, sizeof(spath), "h2-server");
	helper(cpath, sizeof(cpath), "h2-client");
	it_server_start(&s, sargv, true, extra);
	snprintf(port, sizeof(port), "%u", s.port);
	out = run(cargv, NULL, false);
	ck_assert_msg(strstr(out, "RESP /a 200 path=/a\n") &&
			      strstr(out, "RESP /b 200 path=/b\n") &&
			      strstr(out, "RESP /c 200 path=/c\n") &&
			      strstr(out, "DONE 0\n"),
		      "client:\n%s", out);
	free(out);

	for (i = 0; i < 3; i++)
		expect_req(&s, &r[i]);
	ck_assert_str_eq(r[0].path, "/a");
	ck_assert_str_eq(r[0].seen, TA);
	ck_assert_str_eq(r[1].path, "/b");
	ck_assert_str_eq(r[1].seen, TB);
	ck_assert_str_eq(r[2].path, "/c");
	ck_assert_str_ne(r[2].seen, "none");
	ck_assert_str_ne(r[2].seen, TA);
	ck_assert_str_ne(r[2].seen, TB);
	ck_assert_str_ne(r[2].seen, TC);

	/* Every piece under its stream's trace; after every send that made
	 * some, the thread's own context again.  Until the send that made
	 * the last piece of the three bodies ("path=/a\n": 8 bytes each). */
	while (!done) {
		char seen[40], before[40], after[40];
		const struct req_line *q;
		unsigned type;
		long tid;
		size_t len;
		int id;

		test_child_readline(&s.child, line, sizeof(line), IT_TIMEOUT_MS);
		ck_assert_msg(strncmp(line, "WRONG ", 6) != 0,
			      "%s: a data source read that nghttp2 never reads", line);
		if (sscanf(line, "CHUNK %ld %d %zu %39s", &tid, &id, &len, seen) == 4 ||
		    sscanf(line, "SENDDATA %ld %d %zu %39s", &tid, &id, &len, seen) ==
			    4) {
			q = req_of(r, 3, id);
			ck_assert_msg(q && tid == q->tid,
				      "%s: not a stream of the test", line);
			ck_assert_msg(strcmp(seen, q->seen) == 0,
				      "%s: a piece of %s (trace %s) produced under %s",
				      line, q->path, q->seen, seen);
			if (line[0] == 'S') {
				sent[q - r] += len;
			} else {
				ck_assert_uint_lt(n_chunks, 64);
				order[n_chunks++] = id;
				bytes[q - r] += len;
			}
		} else if (sscanf(line, "BEFORESEND %ld %d %u %39s", &tid, &id, &type,
				  seen) == 4 ||
			   sscanf(line, "FRAMESEND %ld %d %u %39s", &tid, &id, &type,
				  seen) == 4) {
			q = req_of(r, 3, id);
			ck_assert_msg(id == 0 || q, "%s: not a stream of the test",
				      line);
			ck_assert_msg(strcmp(seen, q ? q->seen : TC) == 0,
				      "%s: a frame of %s (trace %s) sent under %s",
				      line, q ? q->path : "the connection",
				      q ? q->seen : TC, seen);
			n_frames++;
		} else if (sscanf(line, "SENT %ld %39s %39s", &tid, before, after) ==
			   3) {
			ck_assert_msg(strcmp(before, TC) == 0 && strcmp(after, TC) == 0,
				      "%s: the thread's own context is %s", line, TC);
			done = bytes[0] == 8 && bytes[1] == 8 && bytes[2] == 8;
		}
	}
	for (i = 0; i < 3; i++)
		ck_assert_uint_eq(sent[i], no_copy ? 8 : 0);
	/* At least each response's HEADERS twice and its DATA frames once. */
	if (no_copy)
		ck_assert_uint_ge(n_frames, 3 * 2 + n_chunks);
	/* The test means something only if the streams took turns: some
	 * stream's pieces are not all in a row. */
	for (i = 0; i < 3; i++) {
		unsigned first = n_chunks, last = 0, n = 0;

		for (k = 0; k < n_chunks; k++)
			if (order[k] == r[i].stream) {
				if (first == n_chunks)
					first = k;
				last = k;
				n++;
			}
		if (n > 0 && last - first + 1 > n)
			interleaved = true;
	}
	ck_assert_msg(interleaved, "the bodies did not interleave");

	/* One span per stream, whichever callback published it. */
	log = it_events(&s);
	ck_assert_msg(it_events_spans(log, TA, NULL) == 1, "log:\n%s", log);
	ck_assert_msg(it_events_spans(log, TB, NULL) == 1, "log:\n%s", log);
	ck_assert_msg(it_events_spans(log, r[2].seen, NULL) == 1, "log:\n%s", log);
	ck_assert_msg(it_events_count(log, TA, "h2-stream") >= 1 + 3, "log:\n%s", log);
	free(log);
	it_server_stop(&s);
}
END_TEST

/* A session made at the address of one being deleted (its memory freed
 * by nghttp2_session_del, and taken by the new one before the deletion
 * returned: what another thread's new session may do) answers its
 * request exactly as without the shim, the body made under its trace. */
START_TEST(test_server_reused_address)
{
	char spath[4096], *out;
	char *argv[] = {spath, "--reuse-in-del", NULL};

	helper(spath, sizeof(spath), "h2-server");
	out = run(argv, NULL, false);
	ck_assert_msg(strcmp(out, "REUSE 1 200 0 none ok\n") == 0,
		      "without the shim: %s", out);
	free(out);
	out = run(argv, NULL, true);
	ck_assert_msg(strcmp(out, "REUSE 1 200 0 " TA " ok\n") == 0,
		      "under the shim: %s", out);
	free(out);
}
END_TEST

/* test_server_upgrade: how the connection is upgraded and how curl sends
 * its three requests. */
static const struct {
	const char *opt[4];
	bool parallel;
	/* Stream 1's response is sent after the client's preface was read,
	 * before the session received a frame. */
	bool window;
} upgrade_variant[] = {
	/* one after the other: each answered before the next comes */
	{{"--upgrade", NULL, NULL}, false, false},
	/* nghttp2_session_upgrade2() before the 101 is written */
	{{"--upgrade-first", NULL, NULL}, false, false},
	/* the deprecated nghttp2_session_upgrade() */
	{{"--upgrade-old", NULL, NULL}, false, false},
	/* the session made only after the 101 is written: the socket level
	 * followed the connection as HTTP/2 from the 101 on, and hands it
	 * back at the session (preload/conn.c, conn_h2_undo()) */
	{{"--upgrade-late", NULL, NULL}, false, false},
	{{"--upgrade-late", "--batch", "3"}, true, false},
	/* multiplexed (curl -Z): all three answered together, once the
	 * other two were handled (their callbacks ran in between) */
	{{"--upgrade", "--batch", "3"}, true, false},
	/* the client's preface read alone (its 24 bytes) and handed to the
	 * session, which then sends stream 1's response: the connection is
	 * the session's candidate, not yet confirmed (hook-nghttp2.c,
	 * nh_upgrade_confirm()) */
	{{"--preface-alone", NULL, NULL}, false, true},
	/* the same, the connection read after its head through a dup() of
	 * its fd and written through the fd: the socket level's state moved
	 * to the copy at the preface, still the session's candidate
	 * (preload/conn.c, "Upgrade candidates") */
	{{"--preface-alone", "--dup", NULL}, false, true},
	/* the same, once upgraded carried on through a dup(), the fd it was
	 * upgraded on closed: the candidate goes on to the copy */
	{{"--preface-alone", "--dup-close", NULL}, false, true},
	/* the same with the responses sent all at once: stream 1's after
	 * the session's first frame confirmed the candidate, which names
	 * the copy by then */
	{{"--upgrade", "--dup-close", "--batch", "3"}, true, false},
	{{"--upgrade", "--dup", "--batch", "3"}, true, false},
};

#define CURL "/usr/bin/curl"

/* A connection upgraded from HTTP/1.1 (Upgrade: h2c, real curl): stream 1,
 * the upgrade request, has no HEADERS frame, only the head the socket
 * level parsed; its handling and every callback of its response run
 * under its own trace, as the other streams' do, with the span-id the
 * socket level gave the request, and none of its context is left on the
 * thread when it is done (the connection's writes for the other streams
 * do not bring it back). */
START_TEST(test_server_upgrade)
{
	static const char *const path[3] = {"one", "two", "three"};
	char spath[4096], url[3][128], tp1[] = "traceparent: " TPA;
	char tp2[] = "traceparent: " TPB;
	char *sargv[] = {spath,
			 "--chunks",
			 "2",
			 "--frame-send",
			 (char *)upgrade_variant[_i].opt[0],
			 (char *)upgrade_variant[_i].opt[1],
			 (char *)upgrade_variant[_i].opt[2],
			 (char *)upgrade_variant[_i].opt[3],
			 NULL};
	char *cargv[32], line[512], *out, *log, span[17];
	struct req_line r[3];
	struct it_server s;
	unsigned n = 0, n_req = 0, n_stream1 = 0, n_sent = 0, i;
	long tid = 0;

	helper(spath, sizeof(spath), "h2-server");
	it_server_start(&s, sargv, true, NULL);
	for (i = 0; i < 3; i++)
		snprintf(url[i], sizeof(url[i]), "http://127.0.0.1:%u/%s", s.port,
			 path[i]);
	cargv[n++] = CURL;
	cargv[n++] = "-sS";
	if (upgrade_variant[_i].parallel)
		cargv[n++] = "-Z";
	for (i = 0; i < 3; i++) {
		if (i > 0)
			cargv[n++] = "--next";
		cargv[n++] = "--http2";
		cargv[n++] = url[i];
		/* With -Z the bodies' pieces interleave on stdout. */
		cargv[n++] = "-o";
		cargv[n++] = "/dev/null";
		cargv[n++] = "-w";
		cargv[n++] = "%{url_effective} %{response_code} %{size_download}\n";
		if (i < 2) {
			cargv[n++] = "-H";
			cargv[n++] = i == 0 ? tp1 : tp2;
		}
	}
	cargv[n] = NULL;
	out = run(cargv, NULL, false);
	for (i = 0; i < 3; i++) {
		char want[512];

		/* "path=/one\n" and so on */
		snprintf(want, sizeof(want), "%s 200 %zu\n", url[i],
			 strlen(path[i]) + 7);
		ck_assert_msg(strstr(out, want), "curl, not %s:\n%s", want, out);
	}
	free(out);

	/* Everything the connection's thread reported, until it closed. */
	for (;;) {
		char seen[40], before[40], after[40];
		const struct req_line *q;
		unsigned type;
		long t;
		size_t len;
		int id;

		test_child_readline(&s.child, line, sizeof(line), IT_TIMEOUT_MS);
		if (sscanf(line, "CONN %ld", &t) == 1) {
			ck_assert_msg(tid == 0, "curl opened a second connection");
			tid = t;
		} else if (strncmp(line, "CLOSED ", 7) == 0) {
			break;
		} else if (strncmp(line, "REQ ", 4) == 0) {
			ck_assert_uint_lt(n_req, 3);
			ck_assert_msg(
				sscanf(line, "REQ %ld %d %15s %255s %u %127s %39s",
				       &r[n_req].tid, &r[n_req].stream, r[n_req].method,
				       r[n_req].path, &r[n_req].n_tp, r[n_req].tp,
				       r[n_req].seen) == 7,
				"bad line: %s", line);
			n_req++;
		} else if ((sscanf(line, "CHUNK %ld %d %zu %39s", &t, &id, &len,
				   seen) == 4 ||
			    sscanf(line, "BEFORESEND %ld %d %u %39s", &t, &id, &type,
				   seen) == 4 ||
			    sscanf(line, "FRAMESEND %ld %d %u %39s", &t, &id, &type,
				   seen) == 4 ||
			    sscanf(line, "CLOSE %ld %d %39s", &t, &id, seen) == 3) &&
			   id > 0) {
			q = req_of(r, n_req, id);
			ck_assert_msg(q != NULL, "%s: before its request", line);
			ck_assert_msg(strcmp(seen, q->seen) == 0,
				      "%s: a callback of %s (trace %s) ran under %s",
				      line, q->path, q->seen, seen);
			if (id == 1)
				n_stream1++;
		} else if (sscanf(line, "SENT %ld %39s %39s", &t, before, after) == 3) {
			/* The thread has no context of its own.  The first
			 * send (stream 1's response, before the session
			 * read anything: curl sends the preface after the
			 * 101) is the socket level's, the connection not yet
			 * confirmed upgraded (hook-nghttp2.c): as on any
			 * HTTP/1.1 connection, the upgrade request may stay
			 * on the thread after it.  Not after the others. */
			ck_assert_msg(strcmp(after, "none") == 0 ||
					      (n_sent == 0 && strcmp(after, TA) == 0),
				      "%s: after sending, the thread shows %s", line,
				      after);
			/* The preface read alone, the thread let the
			 * request go (a read after its 101); the writes
			 * of its response, the connection the session's
			 * candidate, show it again (without:
			 * "response-sent", as for any HTTP/1.1
			 * connection whose client sent something else). */
			ck_assert_msg(!upgrade_variant[_i].window || n_sent > 0 ||
					      strcmp(after, TA) == 0,
				      "%s: stream 1's response sent under %s", line,
				      after);
			n_sent++;
		}
	}
	ck_assert_uint_eq(n_req, 3);
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(r[i].tid, tid);
	ck_assert_int_eq(r[0].stream, 1);
	ck_assert_str_eq(r[0].path, "/one");
	ck_assert_str_eq(r[0].seen, TA);
	for (i = 1; i < 3; i++) {
		if (strcmp(r[i].path, "/two") == 0) {
			ck_assert_str_eq(r[i].seen, TB);
		} else {
			ck_assert_str_eq(r[i].path, "/three");
			ck_assert_str_ne(r[i].seen, "none");
			ck_assert_str_ne(r[i].seen, TA);
			ck_assert_str_ne(r[i].seen, TB);
		}
	}
	/* HEADERS, two DATA frames and the close at least. */
	ck_assert_uint_ge(n_stream1, 2 + 2 + 2 + 1);

	/* One span for the upgrade request: the socket level's. */
	log = it_events(&s);
	ck_assert_msg(it_events_spans(log, TA, span) == 1, "log:\n%s", log);
	ck_assert_msg(it_events_count(log, TA, "request") == 1, "log:\n%s", log);
	ck_assert_msg(it_events_spans(log, TB, NULL) == 1, "log:\n%s", log);
	free(log);
	it_assert_gone(&s, tid, TA);
	it_server_stop(&s);
}
END_TEST

/* What helpers/h2-loop printed for step ("<step> <trace>"), or fails. */
static void
loop_step(const char *out, const char *step, char trace[40])
{
	size_t n = strlen(step);
	const char *p;

	for (p = out; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, step, n) == 0 && p[n] == ' ' &&
		    sscanf(p + n + 1, "%39s", trace) == 1)
			return;
	ck_abort_msg("no %s:\n%s", step, out);
}

/* One thread reads connection A's "Upgrade: h2c" head, then connection
 * B's HTTP/1.1 request, and only then upgrades A's session: the thread
 * shows B's request at that call, not A's.  B stays the socket level's
 * (its later requests are published as they come), whether or not A's
 * preface came yet; A is not taken for B. */
START_TEST(test_server_upgrade_other)
{
	static const struct {
		const char *step, *trace;
	} want[] = {
		{"READ-A", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
		{"READ-B1", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"},
		{"READ-B2", "cccccccccccccccccccccccccccccccc"},
		{"WROTE-B2", "cccccccccccccccccccccccccccccccc"},
		{"READ-B3", "dddddddddddddddddddddddddddddddd"},
		{"WROTE-B3", "dddddddddddddddddddddddddddddddd"},
	};
	char path[4096], trace[40], *out;
	char *argv[] = {path, NULL};
	size_t i;

	helper(path, sizeof(path), "h2-loop");
	out = run(argv, NULL, true);
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		loop_step(out, want[i].step, trace);
		ck_assert_msg(strcmp(trace, want[i].trace) == 0,
			      "%s: the thread shows %s, not %s:\n%s", want[i].step,
			      trace, want[i].trace, out);
	}
	free(out);
}
END_TEST

/* ---- the socket level's "Upgrade: h2c" (helpers/h2-upgrade) ---- */

#define TD  "6c2b1e0f9a8d7c6b5a4f3e2d1c0b9a88"
#define TPD "00-" TD "-1a2b3c4d5e6f7081-01"

/* Args for one curl: three URLs on one connection upgraded by "Upgrade:
 * h2c", the first with traceparent tp1 (stream 1), the second with tp2
 * (stream 3), the third without (stream 5).  argv has room for 32. */
static void
upgrade_curl(char **argv,
	     char (*url)[128],
	     char (*tp)[128],
	     unsigned port,
	     const char *tp1,
	     const char *tp2)
{
	unsigned n = 0, i;

	snprintf(tp[0], 128, "traceparent: %s", tp1);
	snprintf(tp[1], 128, "traceparent: %s", tp2);
	argv[n++] = CURL;
	argv[n++] = "-sS";
	argv[n++] = "--max-time";
	argv[n++] = "20";
	for (i = 0; i < 3; i++) {
		snprintf(url[i], 128, "http://127.0.0.1:%u/%u", port, i);
		if (i > 0)
			argv[n++] = "--next";
		argv[n++] = "--http2";
		argv[n++] = "-o";
		argv[n++] = "/dev/null";
		argv[n++] = "-w";
		argv[n++] = "%{http_version} %{response_code}\n";
		if (i < 2) {
			argv[n++] = "-H";
			argv[n++] = tp[i];
		}
		argv[n++] = url[i];
	}
	argv[n] = NULL;
}

/* What helpers/h2-upgrade printed: per connection, the trace the thread
 * showed at each step of streams 1, 3 and 5. */
struct up_seen {
	char head[40], read[6][40], wrote[6][40], fcgi[40];
	char all[1024]; /* every line, in [0] only, for messages */
};

static void
upgrade_lines(struct it_server *s, struct up_seen *c, unsigned n_conns)
{
	char line[256], step[16], trace[40];
	unsigned i, id;

	memset(c, 0, sizeof(*c) * n_conns);
	for (;;) {
		test_child_readline(&s->child, line, sizeof(line), IT_TIMEOUT_MS);
		if (strcmp(line, "END") == 0)
			break;
		if (strlen(c[0].all) + strlen(line) + 2 < sizeof(c[0].all))
			strcat(strcat(c[0].all, line), "\n");
		if (sscanf(line, "FCGI 0 0 %39s", c[0].fcgi) == 1)
			continue;
		ck_assert_msg(sscanf(line, "%15s %u %u %39s", step, &i, &id, trace) ==
					      4 &&
				      i < n_conns && id % 2 == 1 && id < 6,
			      "bad line: %s", line);
		if (strcmp(step, "HEAD") == 0)
			memcpy(c[i].head, trace, 40);
		else if (strcmp(step, "READ") == 0)
			memcpy(c[i].read[id], trace, 40);
		else
			memcpy(c[i].wrote[id], trace, 40);
	}
}

/* test_upgrade_socket: how the 101 is written. */
static const struct {
	const char *opt[3];
	bool followed;
} up_variant[] = {
	/* its head whole in one write, with the frames after it
	 * (lighttpd's writev) */
	{{NULL, NULL, NULL}, true},
	/* its head whole in one write, the frames in the next: followed,
	 * the server's frame walk starts at that next write */
	{{"--split", "71", NULL}, true},
	/* split inside its Upgrade field: in doubt */
	{{"--split", "50", NULL}, false},
	/* split right after its status line: in doubt */
	{{"--split", "34", NULL}, false},
	/* whole in one writev, but its head across two iovecs (the shim
	 * looks at the first only): in doubt */
	{{"--writev", "50", NULL}, false},
	/* the head whole, but the pool's long-lived entries all held by
	 * idle h2c connections (704: preload/conn.c, CONN_POOL_LONG_END -
	 * CONN_POOL_LONG_FIRST) */
	{{"--fill", "704", NULL}, false},
};

/* A server with HTTP/2 code of its own (no nghttp2) upgrades a real
 * curl's connection from HTTP/1.1 ("Upgrade: h2c"), three requests on
 * it.  A 101 whose head is whole in one write makes the connection
 * followed as HTTP/2 (preload/conn.c, "Upgrade: h2c"): stream 3 and 5
 * show their own contexts while read and answered, never the upgrade
 * request's.  One the shim cannot follow so (a 101 split across writes,
 * no pool entry free: "in doubt") shows nothing after the client's
 * preface, on reads and writes: not the upgrade request's context
 * (old, before the h2c following: every later write showed it). */
START_TEST(test_upgrade_socket)
{
	char path[4096], url[3][128], tp[2][128], *cargv[32], *out, *log;
	char *sargv[] = {path, (char *)up_variant[_i].opt[0],
			 (char *)up_variant[_i].opt[1], (char *)up_variant[_i].opt[2],
			 NULL};
	struct up_seen c;
	struct it_server s;
	unsigned id;

	helper(path, sizeof(path), "h2-upgrade");
	it_server_start(&s, sargv, true, NULL);
	upgrade_curl(cargv, url, tp, s.port, TPA, TPB);
	out = run(cargv, NULL, false);
	ck_assert_msg(strcmp(out, "2 200\n2 200\n2 200\n") == 0, "curl:\n%s", out);
	free(out);
	upgrade_lines(&s, &c, 1);
	ck_assert_str_eq(c.head, TA);
	for (id = 3; id <= 5; id += 2) {
		ck_assert_msg(strcmp(c.read[id], TA) != 0 &&
				      strcmp(c.wrote[id], TA) != 0,
			      "stream %u shows the upgrade request (read %s, wrote %s)",
			      id, c.read[id], c.wrote[id]);
		if (!up_variant[_i].followed) {
			ck_assert_msg(strcmp(c.read[id], "none") == 0 &&
					      strcmp(c.wrote[id], "none") == 0,
				      "in doubt, stream %u shows read %s, wrote %s", id,
				      c.read[id], c.wrote[id]);
			continue;
		}
		ck_assert_str_eq(c.wrote[id], c.read[id]);
		if (id == 3)
			ck_assert_str_eq(c.read[id], TB);
		else
			ck_assert(strcmp(c.read[id], "none") != 0 &&
				  strcmp(c.read[id], TB) != 0);
	}
	log = it_events(&s);
	/* The path taken: pool-full logged only when the pool was full. */
	ck_assert_msg((strstr(log, " reason=pool-full\n") != NULL) ==
			      (up_variant[_i].opt[0] &&
			       strcmp(up_variant[_i].opt[0], "--fill") == 0),
		      "log:\n%s", log);
	ck_assert_msg(it_events_spans(log, TA, NULL) == 1, "log:\n%s", log);
	free(log);
	it_server_stop(&s);
}
END_TEST

/* Two curls, each with a connection upgraded by "Upgrade: h2c", served
 * in lockstep by one thread: both heads read, both 101s written, then
 * each round both streams read before either is answered.  Each
 * connection is followed as HTTP/2 on its own: every read and write
 * shows its own stream's context (the write of one connection's stream
 * right after the read of the other's), never the other connection's or
 * an upgrade request's. */
START_TEST(test_upgrade_socket_two)
{
	char path[4096], url[2][3][128], tp[2][2][128], *cargv[2][32], line[256];
	char *sargv[] = {path, "--conns", "2", NULL};
	static const char *const want[2][2] = {{TA, TB}, {TC, TD}}, *const tps[2][2] = {
									    {TPA, TPB},
									    {TPC, TPD}};
	struct up_seen c[2];
	struct test_child curl[2];
	struct it_server s;
	unsigned k, i, id;

	helper(path, sizeof(path), "h2-upgrade");
	it_server_start(&s, sargv, true, NULL);
	for (k = 0; k < 2; k++) {
		upgrade_curl(cargv[k], url[k], tp[k], s.port, tps[k][0], tps[k][1]);
		test_child_start(&curl[k], cargv[k], NULL, false);
	}
	for (k = 0; k < 2; k++) {
		for (i = 0; i < 3; i++) {
			test_child_readline(&curl[k], line, sizeof(line),
					    IT_TIMEOUT_MS);
			ck_assert_str_eq(line, "2 200");
		}
		ck_assert_int_eq(test_child_finish(&curl[k], IT_TIMEOUT_MS), 0);
	}
	upgrade_lines(&s, c, 2);
	for (i = 0; i < 2; i++) {
		/* Which curl the server accepted first is the kernel's. */
		k = strcmp(c[i].head, TA) == 0 ? 0 : 1;
		ck_assert_msg(strcmp(c[i].head, want[k][0]) == 0 &&
				      strcmp(c[i].read[3], want[k][1]) == 0,
			      "server:\n%s", c[0].all);
		for (id = 3; id <= 5; id += 2) {
			ck_assert_msg(strcmp(c[i].wrote[id], c[i].read[id]) == 0,
				      "connection %u stream %u: read under %s, "
				      "answered under %s",
				      i, id, c[i].read[id], c[i].wrote[id]);
			ck_assert_str_ne(c[i].read[id], "none");
			ck_assert_str_ne(c[i].read[id], TA);
			ck_assert_str_ne(c[i].read[id], TC);
			ck_assert_str_ne(c[i].read[id], want[!k][1]);
		}
		ck_assert_str_ne(c[i].read[5], want[k][1]);
		ck_assert_str_ne(c[i].read[5], c[!i].read[5]);
	}
	it_server_stop(&s);
}
END_TEST

/* test_upgrade_socket_undo: where the session is made, and the idle h2c
 * connections that hold the pool's long-lived entries (704 of them:
 * CONN_POOL_LONG_END - CONN_POOL_LONG_FIRST), and the FastCGI request's context
 * then. */
static const struct {
	const char *lib, *fill, *fcgi;
} undo_variant[] = {
	/* on the thread that follows the upgraded connection: handed back
	 * at the session (ctxshim_conn_h2_library()); it takes the last
	 * entry, gives it back */
	{"--lib", "703", "7f0e1d2c3b4a59687766554433221100"},
	/* none for it (in doubt): none for the FastCGI connection either,
	 * the control that the fill leaves it no other */
	{"--lib", "704", "none"},
	/* on another thread: handed back at its next read
	 * (ctxshim_conn_h2_feed()), its entry with it */
	{"--lib-thread", "703", "7f0e1d2c3b4a59687766554433221100"},
	{"--lib-thread", "704", "none"},
};

/* A connection followed as HTTP/2 from its 101 (whole in one write) in a
 * process that then makes an nghttp2 server session is handed back
 * (preload/conn.c, conn_h2_undo()): its pool entry with it, whether the
 * thread that made the session followed it or not (then at its next
 * read).  The pool's long-lived entries but the one the upgrade takes are
 * held by idle h2c connections; a FastCGI connection (FCGI_KEEP_CONN)
 * made after it was handed back gets that entry, so its request shows its
 * context. */
START_TEST(test_upgrade_socket_undo)
{
	char path[4096], url[3][128], tp[2][128], *cargv[32], *out;
	char *sargv[] = {path, "--fill", (char *)undo_variant[_i].fill,
			 (char *)undo_variant[_i].lib, NULL};
	struct up_seen c;
	struct it_server s;
	unsigned id;

	helper(path, sizeof(path), "h2-upgrade");
	it_server_start(&s, sargv, true, NULL);
	upgrade_curl(cargv, url, tp, s.port, TPA, TPB);
	out = run(cargv, NULL, false);
	ck_assert_msg(strcmp(out, "2 200\n2 200\n2 200\n") == 0, "curl:\n%s", out);
	free(out);
	upgrade_lines(&s, &c, 1);
	ck_assert_str_eq(c.head, TA);
	ck_assert_msg(strcmp(c.fcgi, undo_variant[_i].fcgi) == 0,
		      "%s --fill %s: FastCGI request shows %s, not %s:\n%s",
		      undo_variant[_i].lib, undo_variant[_i].fill, c.fcgi,
		      undo_variant[_i].fcgi, c.all);
	/* Handed back (an entry for it), the connection's streams are
	 * followed by nothing: the session is not this server's HTTP/2
	 * code.  The upgrade request ended with stream 1's response, in
	 * the 101's write: the writes of streams 3 and 5 show nothing,
	 * as their reads do (old: the upgrade request's trace).  So too
	 * for one never followed as HTTP/2 (no entry for it): no session
	 * took it for its upgrade (old: every write after the preface
	 * showed the upgrade request, in a process with a session). */
	for (id = 3; id <= 5; id += 2)
		ck_assert_msg(
			strcmp(c.read[id], "none") == 0 &&
				strcmp(c.wrote[id], "none") == 0,
			"%s --fill %s: stream %u read under %s, answered under %s:\n%s",
			undo_variant[_i].lib, undo_variant[_i].fill, id, c.read[id],
			c.wrote[id], c.all);
	it_server_stop(&s);
}
END_TEST

/* helpers/h2-reads: a server with HTTP/2 code of its own (the socket
 * level follows it, preload/conn.c, "HTTP/2") reads requests one per
 * read and answers none.  With a wait before each read, each request is
 * shown while it is read: the thread had let the previous one go, and
 * the request its read brings is the one whose handler runs (old: every
 * other one was taken for a second request of the read, "h2-several",
 * and shown without a context).  So for 300 of them (old: the 255th
 * read as answered, the distance seq/2 - answered of its connection
 * wrapped).  Without the waits, a request read on top of the previous one is not
 * shown (its server may still run the first one's handler). */
static const struct {
	const char *mode, *n;
} reads_variant[] = {{"wait", "3"}, {"nowait", "2"}, {"wait", "300"}};

START_TEST(test_server_socket_reads)
{
	char path[4096], want[40], step[16], trace[40], *out;
	char *argv[] = {path, (char *)reads_variant[_i].mode,
			(char *)reads_variant[_i].n, NULL};
	unsigned k, n = (unsigned)atoi(reads_variant[_i].n);

	helper(path, sizeof(path), "h2-reads");
	out = run(argv, NULL, true);
	for (k = 1; k <= n; k++) {
		snprintf(step, sizeof(step), "REQ %u", 2 * k - 1);
		loop_step(out, step, trace);
		if (_i == 1 && k == 2)
			snprintf(want, sizeof(want), "none");
		else
			snprintf(want, sizeof(want), "4bf92f3577b34da6a3ce929d0e0e%04x",
				 k);
		ck_assert_msg(strcmp(trace, want) == 0, "%s %s: %s shows %s, not %s",
			      reads_variant[_i].mode, reads_variant[_i].n, step, trace,
			      want);
	}
	free(out);
}
END_TEST

/* helpers/h2-reads unknown: a request whose traceparent is a reference
 * to the client's dynamic table, to an entry whose value the socket
 * level's model did not keep, gets no context (old: a new trace, one the
 * client did not send); the request that indexed it, its own. */
START_TEST(test_server_socket_unknown)
{
	char path[4096], trace[40], *out;
	char *argv[] = {path, "unknown", NULL};

	helper(path, sizeof(path), "h2-reads");
	out = run(argv, NULL, true);
	loop_step(out, "REQ 7", trace);
	ck_assert_msg(strcmp(trace, "4bf92f3577b34da6a3ce929d0e0e0004") == 0,
		      "REQ 7 shows %s:\n%s", trace, out);
	loop_step(out, "REQ 9", trace);
	ck_assert_msg(strcmp(trace, "none") == 0, "REQ 9 shows %s:\n%s", trace, out);
	free(out);
}
END_TEST

/* ---- client side ---- */

/* r carries exactly one traceparent: a new child of TA (span returned). */
static void
assert_child(const struct req_line *r, char span[17])
{
	ck_assert_msg(r->n_tp == 1, "%s: %u traceparent fields", r->path, r->n_tp);
	ck_assert_msg(strncmp(r->tp, "00-" TA "-", 36) == 0 && strlen(r->tp) == 55 &&
			      strcmp(r->tp + 52, "-01") == 0,
		      "%s: traceparent %s", r->path, r->tp);
	memcpy(span, r->tp + 36, 16);
	span[16] = '\0';
	ck_assert_str_ne(span, PA);
}

/* ---- the socket level's frame walk across sendmmsg() (helpers/h2-mmsg) ---- */

static const char *const mmsg_variant[] = {"settings", "cut", "frames", "interim",
					   "interim-v"};

/* A server with HTTP/2 code of its own writes each response with one
 * sendmmsg() of several messages; a real curl sends three requests on
 * one connection, one after the other, the first the upgrade request
 * ("Upgrade: h2c", the 101 written alone: the connection is followed as
 * HTTP/2 from there).  The walk of the
 * server's frames (preload/conn.c, conn_h2_written()) must see every
 * message, in order: each stream's HEADERS answers its request, so the
 * next stream's read shows its own context.  Old: only the first message
 * that carried bytes was walked.  "settings" and "frames" put the first
 * response's HEADERS past that message: stream 1 stayed unanswered and
 * stream 3's read showed nothing (h2-several); "cut" leaves 90 bytes of a
 * DATA payload to the second message: the walk, out of step, took the
 * next response's HEADERS for payload, and stream 5's read showed
 * nothing.  "interim" and "interim-v" write DATA's header alone, then a
 * payload that starts with "HTTP/1.1 100 Continue\r\n\r\n" (write(),
 * writev() with those bytes in an iovec of their own): old, the socket
 * level took them for an HTTP/1 interim response and stepped over them,
 * the walk lost them, and stream 5's read showed nothing as well. */
START_TEST(test_server_socket_mmsg)
{
	char path[4096], url[3][128], tp[3][128], *cargv[40], *out, *log;
	char *sargv[] = {path, (char *)mmsg_variant[_i], NULL};
	const char *want[3] = {TA, TB, TC}, *tps[3] = {TPA, TPB, TPC};
	char line[256], step[16], trace[40];
	struct it_server s;
	unsigned n = 0, i, id;

	helper(path, sizeof(path), "h2-mmsg");
	it_server_start(&s, sargv, true, NULL);
	cargv[n++] = CURL;
	cargv[n++] = "-sS";
	cargv[n++] = "--max-time";
	cargv[n++] = "20";
	for (i = 0; i < 3; i++) {
		snprintf(url[i], sizeof(url[i]), "http://127.0.0.1:%u/%u", s.port, i);
		snprintf(tp[i], sizeof(tp[i]), "traceparent: %s", tps[i]);
		if (i > 0)
			cargv[n++] = "--next";
		cargv[n++] = "--http2";
		cargv[n++] = "-o";
		cargv[n++] = "/dev/null";
		cargv[n++] = "-w";
		cargv[n++] = "%{http_version} %{response_code} %{size_download}\n";
		cargv[n++] = "-H";
		cargv[n++] = tp[i];
		cargv[n++] = url[i];
	}
	cargv[n] = NULL;
	out = run(cargv, NULL, false);
	ck_assert_msg(strcmp(out, "2 200 100\n2 200 100\n2 200 100\n") == 0,
		      "curl:\n%s", out);
	free(out);
	for (i = 0; i < 6; i++) {
		test_child_readline(&s.child, line, sizeof(line), IT_TIMEOUT_MS);
		ck_assert_msg(sscanf(line, "%15s %u %39s", step, &id, trace) == 3 &&
				      id == 2 * (i / 2) + 1 &&
				      strcmp(step, i % 2 ? "WROTE" : "READ") == 0,
			      "%s: bad line: %s", mmsg_variant[_i], line);
		ck_assert_msg(strcmp(trace, want[i / 2]) == 0,
			      "%s: stream %u %s shows %s, not %s", mmsg_variant[_i], id,
			      step, trace, want[i / 2]);
	}
	test_child_readline(&s.child, line, sizeof(line), IT_TIMEOUT_MS);
	ck_assert_str_eq(line, "END");
	log = it_events(&s);
	ck_assert_msg(!strstr(log, " reason=h2-several") &&
			      !strstr(log, " reason=h2-stop"),
		      "%s: log:\n%s", mmsg_variant[_i], log);
	for (i = 0; i < 3; i++)
		ck_assert_msg(it_events_spans(log, want[i], NULL) == 1, "%s: log:\n%s",
			      mmsg_variant[_i], log);
	free(log);
	it_server_stop(&s);
}
END_TEST

START_TEST(test_client_nghttp2)
{
	char tp_env[] = "TRACEPARENT=" TPA, *env[] = {tp_env, NULL};
	char cpath[4096], port[16], sa[17], sc[17], s1[17], s2[17], *out;
	char *argv1[] = {cpath, port, "/a", "/b@" TPB, "/d^t@v=1", "+/c", NULL};
	char *argv2[] = {cpath, "-s", port, "/s1", "/s2", "/s3^t@v=1", NULL};
	struct it_server s;
	struct req_line a, b, c, d, r1, r2, r3;

	server_start(&s, false, false);
	helper(cpath, sizeof(cpath), "h2-client");
	snprintf(port, sizeof(port), "%u", s.port);

	out = run(argv1, env, true);
	ck_assert_ptr_nonnull(strstr(out, "DONE 0"));
	free(out);
	expect_req(&s, &a);
	expect_req(&s, &b);
	expect_req(&s, &d);
	expect_req(&s, &c);
	ck_assert_str_eq(a.path, "/a");
	assert_child(&a, sa);
	/* The application's own field, untouched. */
	ck_assert_str_eq(b.path, "/b");
	ck_assert_uint_eq(b.n_tp, 1);
	ck_assert_str_eq(b.tp, TPB);
	ck_assert_str_eq(c.path, "/c");
	assert_child(&c, sc);
	ck_assert_str_ne(sa, sc);
	/* Its tracestate alone: it owns propagation, no traceparent added. */
	ck_assert_str_eq(d.path, "/d");
	ck_assert_uint_eq(d.n_tp, 0);

	out = run(argv2, env, true);
	ck_assert_ptr_nonnull(strstr(out, "DONE 0"));
	free(out);
	expect_req(&s, &r1);
	expect_req(&s, &r2);
	expect_req(&s, &r3);
	assert_child(&r1, s1);
	assert_child(&r2, s2);
	ck_assert_str_ne(s1, s2);
	ck_assert_str_eq(r3.path, "/s3");
	ck_assert_uint_eq(r3.n_tp, 0);

	/* Without a context (no TRACEPARENT) nothing is added. */
	out = run(argv1, NULL, true);
	free(out);
	expect_req(&s, &a);
	expect_req(&s, &b);
	expect_req(&s, &d);
	expect_req(&s, &c);
	ck_assert_uint_eq(a.n_tp, 0);
	ck_assert_uint_eq(b.n_tp, 1);
	ck_assert_uint_eq(c.n_tp, 0);
	ck_assert_uint_eq(d.n_tp, 0);
	it_server_stop(&s);
}
END_TEST

START_TEST(test_client_curl_h2)
{
	char tp_env[] = "TRACEPARENT=" TPA, *env[] = {tp_env, NULL};
	char cpath[4096], url[128], span[17], *out;
	char *argv1[] = {cpath, "-2", url, NULL};
	char *argv2[] = {cpath, "-2", "-H", "traceparent:", url, NULL};
	char *argv3[] = {cpath, "-2", "-H", "traceparent: " TPB, url, NULL};
	char *argv4[] = {cpath, "-2", "-H", "tracestate: t@v=1", url, NULL};
	struct it_server s;
	struct req_line r;

	server_start(&s, false, false);
	helper(cpath, sizeof(cpath), "curl-get");
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/curl", s.port);

	out = run(argv1, env, true);
	ck_assert_ptr_nonnull(strstr(out, "BODY path=/curl"));
	free(out);
	expect_req(&s, &r);
	assert_child(&r, span);

	/* The application disabled the header: libcurl sends none, and the
	 * nghttp2 hook adds none to libcurl's request either. */
	out = run(argv2, env, true);
	free(out);
	expect_req(&s, &r);
	ck_assert_uint_eq(r.n_tp, 0);

	out = run(argv3, env, true);
	free(out);
	expect_req(&s, &r);
	ck_assert_uint_eq(r.n_tp, 1);
	ck_assert_str_eq(r.tp, TPB);

	/* The application's tracestate alone: neither hook adds a
	 * traceparent. */
	out = run(argv4, env, true);
	free(out);
	expect_req(&s, &r);
	ck_assert_uint_eq(r.n_tp, 0);
	it_server_stop(&s);
}
END_TEST

/* A tracestate of len bytes (three members of '0's), into out. */
static void
ts_of_len(char *out, size_t len)
{
	size_t v = len - 8; /* "a=" ",b=" ",c=" */

	ck_assert_uint_le(v, 3 * 256);
	snprintf(out, len + 1, "a=%0*d,b=%0*d,c=%0*d", (int)(v / 3), 0, (int)(v / 3), 0,
		 (int)(v - 2 * (v / 3)), 0);
	ck_assert_uint_eq(strlen(out), len);
}

/* Tracestates of 511, 512 (W3C's maximum) and 513 bytes (cut after its
 * second member).  An nghttp2 server's stream keeps its request's whole
 * tracestate: a request the handler submits carries it (nh_ctx_dup()).
 * An nghttp2 client under TRACEPARENT and TRACESTATE sends it (nh_plan()). */
static const size_t ts_lens[] = {511, 512, 513};

START_TEST(test_tracestate_max)
{
	char tp_env[] = "TRACEPARENT=" TPA, ts_env[640],
	     *env[] = {tp_env, ts_env, NULL};
	char cpath[4096], port[16], req[700], ts[600], want[600], line[2048];
	char *argv1[] = {cpath, port, req, NULL},
	     *argv2[] = {cpath, port, "/relay", NULL};
	struct it_server s;
	struct req_line r;
	size_t len = ts_lens[_i];

	ts_of_len(ts, len);
	strcpy(want, ts);
	if (len > 512)
		*strrchr(want, ',') = '\0';
	snprintf(ts_env, sizeof(ts_env), "TRACESTATE=%s", ts);
	snprintf(req, sizeof(req), "/relay@%s^%s", TPB, ts);
	server_start(&s, true, false);
	helper(cpath, sizeof(cpath), "h2-client");
	snprintf(port, sizeof(port), "%u", s.port);

	free(run(argv2, env, true));
	expect_req(&s, &r);
	ck_assert_msg(strcmp(r.ts, want) == 0, "%zu bytes: client sent tracestate %s",
		      len, r.ts);
	test_child_expect(&s.child, "RELAY ", line, sizeof(line), IT_TIMEOUT_MS);

	/* The fields the client sends itself (no shim there): the handler's
	 * request carries its stream's copy, nh_ctx_dup()'s (it is injected
	 * by nh_plan() as well, checked above). */
	free(run(argv1, NULL, false));
	expect_req(&s, &r);
	ck_assert_str_eq(r.seen, TB);
	ck_assert_str_eq(r.ts, ts);
	test_child_expect(&s.child, "RELAY ", line, sizeof(line), IT_TIMEOUT_MS);
	ck_assert_msg(strcmp(strrchr(line, ' ') + 1, want) == 0,
		      "%zu bytes: the handler's request carried: %s", len, line);
	it_server_stop(&s);
}
END_TEST

TEST_SUITE(h2_suite)
{
	Suite *s = suite_create("integration-h2");
	TCase *tc = tcase_create("h2");
	char p[4096];

	helper(p, sizeof(p), "h2-server");
	if (access(p, X_OK) != 0)
		test_skip("%s not built (Debian: apt-get install libnghttp2-dev)", p);
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_server_streams, 0, 2);
	tcase_add_loop_test(tc, test_server_bodies, 0,
			    (int)(sizeof(body_variant) / sizeof(body_variant[0])));
	tcase_add_test(tc, test_server_reused_address);
	tcase_add_test(tc, test_server_read_first);
	if (access(CURL, X_OK) == 0)
		tcase_add_loop_test(
			tc, test_server_upgrade, 0,
			(int)(sizeof(upgrade_variant) / sizeof(upgrade_variant[0])));
	else
		fprintf(stderr, "note: no %s: h2c upgrade not tested\n", CURL);
	helper(p, sizeof(p), "h2-loop");
	if (access(p, X_OK) == 0)
		tcase_add_test(tc, test_server_upgrade_other);
	helper(p, sizeof(p), "h2-upgrade");
	if (access(CURL, X_OK) == 0 && access(p, X_OK) == 0) {
		tcase_add_loop_test(tc, test_upgrade_socket, 0,
				    (int)(sizeof(up_variant) / sizeof(up_variant[0])));
		tcase_add_test(tc, test_upgrade_socket_two);
		tcase_add_loop_test(
			tc, test_upgrade_socket_undo, 0,
			(int)(sizeof(undo_variant) / sizeof(undo_variant[0])));
	}
	helper(p, sizeof(p), "h2-mmsg");
	if (access(CURL, X_OK) == 0 && access(p, X_OK) == 0)
		tcase_add_loop_test(
			tc, test_server_socket_mmsg, 0,
			(int)(sizeof(mmsg_variant) / sizeof(mmsg_variant[0])));
	helper(p, sizeof(p), "h2-reads");
	if (access(p, X_OK) == 0)
		tcase_add_loop_test(
			tc, test_server_socket_reads, 0,
			(int)(sizeof(reads_variant) / sizeof(reads_variant[0])));
	if (access(p, X_OK) == 0)
		tcase_add_test(tc, test_server_socket_unknown);
	tcase_add_test(tc, test_client_nghttp2);
	tcase_add_loop_test(tc, test_tracestate_max, 0,
			    (int)(sizeof(ts_lens) / sizeof(ts_lens[0])));
	helper(p, sizeof(p), "curl-get");
	if (access(p, X_OK) == 0)
		tcase_add_test(tc, test_client_curl_h2);
	suite_add_tcase(s, tc);
	return s;
}
