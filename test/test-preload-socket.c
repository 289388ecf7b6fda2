/* SPDX-License-Identifier: Apache-2.0 */
/* The socket level (hooks/hook-socket.c, preload/conn.c) against real
 * servers without tracing code: a thread-per-connection server
 * (helpers/tpc-server.c) and an epoll loop (helpers/epoll-server.c), both
 * started under the shim on 127.0.0.1 and observed with ctxdump -j and the
 * event log while a request blocks inside the server.  Plus every hook's
 * return values and errno (helpers/socket-errno.c, with and without the
 * shim). */
#include "test-common.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test-integration.h"
#pragma GCC diagnostic pop

#include <fcntl.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>

#define T1         "0af7651916cd43dd8448eb211c80319c"
#define P1         "b7ad6b7169203331"
#define T2         "4bf92f3577b34da6a3ce929d0e0e4736"
#define P2         "00f067aa0ba902b7"
#define TP1        "traceparent: 00-" T1 "-" P1 "-01\r\n"
#define TP2        "traceparent: 00-" T2 "-" P2 "-00\r\n"
#define ZERO_TRACE "00000000000000000000000000000000"

static void
helper_path(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", test_env_path("HELPER_DIR"), name);
}

/* Start tpc-server with extra arguments and environment. */
static void
tpc_start(struct it_server *s, char *const args[], char *const env[])
{
	char path[4096], *argv[16];
	size_t n = 0;

	helper_path(path, sizeof(path), "tpc-server");
	argv[n++] = path;
	while (args && *args && n < 15)
		argv[n++] = *args++;
	argv[n] = NULL;
	it_server_start(s, argv, true, env);
}

/* Send data in chunk-byte writes (TCP_NODELAY: each is its own segment). */
static void
send_chunks(int fd, const char *data, size_t len, size_t chunk)
{
	int one = 1;

	ck_assert_int_eq(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)),
			 0);
	while (len) {
		size_t n = len < chunk ? len : chunk;

		it_send(fd, data, n);
		data += n;
		len -= n;
	}
}

/* Wait for "BLOCK <tid> <path>"; checks the path, returns the tid. */
static long
expect_block(struct it_server *s, const char *path)
{
	char line[1200], *p;
	long tid;

	test_child_expect(&s->child, "BLOCK ", line, sizeof(line), IT_TIMEOUT_MS);
	tid = strtol(line + 6, &p, 10);
	ck_assert_int_gt(tid, 0);
	ck_assert_msg(strcmp(p + 1, path) == 0, "blocked in %s, expected %s", p + 1,
		      path);
	return tid;
}

static void
release(struct it_server *s)
{
	test_child_send(&s->child, "go\n");
}

static void
dump_tid(struct it_server *s, long tid, struct it_thread_ctx *t)
{
	char *json = it_ctxdump(s->child.pid);

	ck_assert_msg(it_dump_thread(json, tid, t),
		      "thread %ld not in ctxdump output:\n%s", tid, json);
	free(json);
}

/* ctxdump: tid publishes trace (a child span of parent if given) with
 * this method and path; no other thread publishes trace. */
static void
assert_ctx(struct it_server *s,
	   long tid,
	   const char *trace,
	   const char *parent,
	   const char *method,
	   const char *path,
	   struct it_thread_ctx *out)
{
	char *json = it_ctxdump(s->child.pid);
	struct it_thread_ctx t;

	ck_assert_msg(it_dump_thread(json, tid, &t), "thread %ld not listed:\n%s", tid,
		      json);
	ck_assert_msg(t.has_ctx, "thread %ld has no context:\n%s", tid, json);
	if (trace)
		ck_assert_str_eq(t.trace, trace);
	ck_assert_str_ne(t.span, "0000000000000000");
	if (parent) {
		/* A new span: same trace, its own span-id, the parent kept. */
		ck_assert_str_ne(t.span, parent);
		ck_assert_str_eq(t.parent, parent);
	} else {
		ck_assert_str_eq(t.parent, "");
	}
	ck_assert_str_eq(t.method, method);
	ck_assert_str_eq(t.path, path);
	ck_assert_msg(it_dump_count_trace(json, t.trace) == 1,
		      "trace %s published by more than one thread:\n%s", t.trace, json);
	free(json);
	if (out)
		*out = t;
}

/* The request for path just sent on fd: blocked in the server, shown
 * with trace (a child of parent), released and answered.  Its thread. */
static long
serve_traced(struct it_server *s,
	     int fd,
	     const char *path,
	     const char *trace,
	     const char *parent)
{
	long tid = expect_block(s, path);

	assert_ctx(s, tid, trace, parent, "GET", path, NULL);
	release(s);
	it_assert_path_body(it_read_response(fd), path);
	return tid;
}

/* tpc_start(), then a connection to it. */
static int
tpc_connect(struct it_server *s, char *const args[], char *const env[])
{
	tpc_start(s, args, env);
	return it_connect(s->port);
}

/* The blocked request for path on fd (by thread tid, with trace) is
 * released and answered, and the thread's context goes away when the
 * server reaches where (an event of it_wait_detached()). */
static void
answer_detached(struct it_server *s,
		int fd,
		long tid,
		const char *path,
		const char *where,
		const char *trace)
{
	release(s);
	it_assert_path_body(it_read_response(fd), path);
	it_wait_detached(s, tid, NULL, where);
	it_assert_gone(s, tid, trace);
}

/* What the server wrote on fd, read until it holds needle (malloc'd). */
static char *
read_until(int fd, const char *needle)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;

	while (!buf || !strstr(buf, needle))
		ck_assert(it_read_some(fd, &buf, &len, &cap));
	return buf;
}

/* "GET path" with TP1 and a header of pad bytes, into req; its length. */
static size_t
padded_head(char *req, const char *path, size_t pad)
{
	size_t n = (size_t)sprintf(req, "GET %s HTTP/1.1\r\n" TP1 "X-Pad: ", path);

	memset(req + n, 'a', pad);
	n += pad;
	memcpy(req + n, "\r\n\r\n", 4);
	return n + 4;
}

/* ---- thread-per-connection ---- */

START_TEST(test_tpc_traced)
{
	char *env[] = {"CTXSHIM_HEADER_ATTRS=x-request-id", NULL};
	struct it_server s;
	struct it_thread_ctx t;
	char *log, span[17];
	long tid;
	int fd;

	fd = tpc_connect(&s, NULL, env);
	it_send_str(fd, "GET /block/traced?q=1&r=2 HTTP/1.1\r\nHost: x\r\n" TP1
			"X-Request-ID: rid-42\r\n\r\n");
	tid = expect_block(&s, "/block/traced?q=1&r=2");
	assert_ctx(&s, tid, T1, P1, "GET", "/block/traced", &t);
	ck_assert_uint_eq(t.flags, 1);
	ck_assert_str_eq(t.extra, "rid-42");

	/* Thread-per-connection: cleared when the server reads again. */
	answer_detached(&s, fd, tid, "/block/traced?q=1&r=2", "response-sent", T1);

	log = it_events(&s);
	ck_assert_uint_eq(it_events_count(log, T1, "request"), 1);
	ck_assert_uint_eq(it_events_spans(log, T1, span), 1);
	ck_assert_str_eq(span, t.span);
	free(log);
	close(fd);
	it_server_stop(&s);
}
END_TEST

/* A handler that waits in poll() on something that is not a client
 * connection (an upstream, a database) is still working on its request:
 * the context must stay.  Then the server's own read of the answered
 * connection clears it. */
START_TEST(test_tpc_handler_polls)
{
	char *args[] = {"--block-poll", NULL};
	struct it_server s;
	struct it_thread_ctx t;
	long tid;
	int fd;

	fd = tpc_connect(&s, args, NULL);
	it_send_str(fd, "GET /block/poll HTTP/1.1\r\nHost: x\r\n" TP1 "\r\n");
	tid = expect_block(&s, "/block/poll");
	assert_ctx(&s, tid, T1, P1, "GET", "/block/poll", &t);
	answer_detached(&s, fd, tid, "/block/poll", "response-sent", T1);
	close(fd);
	it_server_stop(&s);
}
END_TEST

/* Every read and write entry point, with heads split into 1- and 7-byte
 * reads; each variant checks the context and that the response write was
 * seen (the detach when the server reads again). */
static const struct {
	const char *io, *size, *wio;
} variants[] = {
	{"read", "1", "write"},           {"read", "7", "send"},
	{"recv", "7", "sendto"},          {"recvfrom", "1", "writev"},
	{"readv", "7", "sendmsg"},        {"recvmsg", "7", "write"},
	{"read_chk", "7", "send"},        {"recv_chk", "1", "writev"},
	{"recvfrom_chk", "7", "sendmsg"}, {"recv", "1", "sendfile"},
};

START_TEST(test_tpc_split_reads)
{
	char *args[] = {"--io",        (char *)variants[_i].io,
			"--read-size", (char *)variants[_i].size,
			"--wio",       (char *)variants[_i].wio,
			NULL};
	static const char req[] =
		"POST /block/split HTTP/1.1\r\nHost: x\r\n"
		"Content-Length: 5\r\n" TP2 "tracestate: a=1\r\n\r\nhello";
	struct it_server s;
	struct it_thread_ctx t;
	long tid;
	int fd;

	fd = tpc_connect(&s, args, NULL);
	send_chunks(fd, req, sizeof(req) - 1, strtoul(variants[_i].size, NULL, 10));
	tid = expect_block(&s, "/block/split");
	assert_ctx(&s, tid, T2, P2, "POST", "/block/split", &t);
	ck_assert_uint_eq(t.flags, 0);
	answer_detached(&s, fd, tid, "/block/split", "response-sent", T2);
	close(fd);
	it_server_stop(&s);
}
END_TEST

START_TEST(test_tpc_pipelined)
{
	struct it_server s;
	struct it_thread_ctx a, b;
	char *log;
	long tid, tid2;
	int fd;

	fd = tpc_connect(&s, NULL, NULL);
	/* One write: the server reads both heads in one read. */
	it_send_str(fd, "GET /block/p1 HTTP/1.1\r\n" TP1 "\r\n"
			"GET /block/p2 HTTP/1.1\r\n" TP2 "\r\n");
	tid = expect_block(&s, "/block/p1");
	assert_ctx(&s, tid, T1, P1, "GET", "/block/p1", &a);
	release(&s);
	/* Answering p1 moves the thread on to p2. */
	tid2 = expect_block(&s, "/block/p2");
	ck_assert_int_eq(tid, tid2);
	assert_ctx(&s, tid, T2, P2, "GET", "/block/p2", &b);
	release(&s);
	{
		/* Both responses, possibly in one read. */
		char *buf = read_until(fd, "path=/block/p2\n"), *p1, *p2;

		p1 = strstr(buf, "path=/block/p1\n");
		p2 = strstr(buf, "path=/block/p2\n");
		ck_assert_ptr_nonnull(p1);
		ck_assert(p1 < p2);
		free(buf);
	}
	it_wait_detached(&s, tid, NULL, "response-sent");
	it_assert_gone(&s, tid, T2);
	log = it_events(&s);
	ck_assert_uint_eq(it_events_count(log, T2, "pipelined"), 1);
	free(log);
	close(fd);
	it_server_stop(&s);
}
END_TEST

START_TEST(test_tpc_keepalive)
{
	struct it_server s;
	struct it_thread_ctx a, b;
	long tid;
	int fd;

	fd = tpc_connect(&s, NULL, NULL);
	it_send_str(fd, "GET /block/k1 HTTP/1.1\r\n" TP1 "\r\n");
	tid = expect_block(&s, "/block/k1");
	assert_ctx(&s, tid, T1, P1, "GET", "/block/k1", &a);
	answer_detached(&s, fd, tid, "/block/k1", "response-sent", T1);

	/* Same connection, another trace. */
	it_send_str(fd, "DELETE /block/k2 HTTP/1.1\r\n" TP2 "\r\n");
	ck_assert_int_eq(expect_block(&s, "/block/k2"), tid);
	assert_ctx(&s, tid, T2, P2, "DELETE", "/block/k2", &b);
	ck_assert_str_ne(a.span, b.span);
	release(&s);
	it_assert_path_body(it_read_response(fd), "/block/k2");
	close(fd);
	/* The server closes its side: cleared at close at the latest. */
	it_wait_detached(&s, tid, NULL, "response-sent");
	it_assert_gone(&s, tid, T2);
	it_server_stop(&s);
}
END_TEST

/* A request without a usable traceparent starts a new trace. */
static void
check_new_trace(const char *headers, const char *not_trace)
{
	struct it_server s;
	struct it_thread_ctx t;
	char req[512];
	long tid;
	int fd;

	fd = tpc_connect(&s, NULL, NULL);
	snprintf(req, sizeof(req), "GET /block/new HTTP/1.1\r\nHost: x\r\n%s\r\n",
		 headers);
	it_send_str(fd, req);
	tid = expect_block(&s, "/block/new");
	assert_ctx(&s, tid, NULL, NULL, "GET", "/block/new", &t);
	ck_assert_str_ne(t.trace, ZERO_TRACE);
	if (not_trace)
		ck_assert_str_ne(t.trace, not_trace);
	/* Random trace-id flag (W3C Level 2); not sampled by default. */
	ck_assert_uint_eq(t.flags, 2);
	release(&s);
	it_assert_path_body(it_read_response(fd), "/block/new");
	close(fd);
	it_server_stop(&s);
}

START_TEST(test_tpc_no_traceparent)
{
	check_new_trace("", NULL);
}
END_TEST

START_TEST(test_tpc_invalid_traceparent)
{
	/* Upper-case hex is invalid. */
	check_new_trace(
		"traceparent: 00-0AF7651916CD43DD8448EB211C80319C-" P1 "-01\r\n", T1);
	/* Two traceparent fields are invalid together. */
	check_new_trace(TP1 TP2, T1);
	/* All-zero parent-id. */
	check_new_trace("traceparent: 00-" T1 "-0000000000000000-01\r\n", T1);
}
END_TEST

START_TEST(test_tpc_no_new_traces)
{
	char *env[] = {"CTXSHIM_NEW_TRACES=0", NULL};
	struct it_server s;
	struct it_thread_ctx t;
	long tid;
	int fd;

	fd = tpc_connect(&s, NULL, env);
	it_send_str(fd, "HEAD /block/zero HTTP/1.1\r\nHost: x\r\n\r\n");
	tid = expect_block(&s, "/block/zero");
	dump_tid(&s, tid, &t);
	ck_assert(t.has_ctx);
	ck_assert_str_eq(t.trace, ZERO_TRACE);
	ck_assert_str_eq(t.method, "HEAD");
	ck_assert_str_eq(t.path, "/block/zero");
	release(&s);
	it_assert_path_body(it_read_response(fd), "/block/zero");
	/* A traced request still gets its context. */
	it_send_str(fd, "GET /block/traced HTTP/1.1\r\n" TP1 "\r\n");
	ck_assert_int_eq(expect_block(&s, "/block/traced"), tid);
	assert_ctx(&s, tid, T1, P1, "GET", "/block/traced", NULL);
	release(&s);
	it_assert_path_body(it_read_response(fd), "/block/traced");
	close(fd);
	it_server_stop(&s);
}
END_TEST

/* CTXSHIM_SAMPLED=1: a new trace is sampled (and has the random flag); a
 * traceparent keeps its own flags (TP2: not sampled). */
START_TEST(test_tpc_sampled)
{
	char *env[] = {"CTXSHIM_SAMPLED=1", NULL};
	struct it_server s;
	struct it_thread_ctx t;
	long tid;
	int fd;

	fd = tpc_connect(&s, NULL, env);
	it_send_str(fd, "GET /block/new HTTP/1.1\r\nHost: x\r\n\r\n");
	tid = expect_block(&s, "/block/new");
	assert_ctx(&s, tid, NULL, NULL, "GET", "/block/new", &t);
	ck_assert_str_ne(t.trace, ZERO_TRACE);
	ck_assert_uint_eq(t.flags, 3);
	release(&s);
	it_assert_path_body(it_read_response(fd), "/block/new");
	it_send_str(fd, "GET /block/tp2 HTTP/1.1\r\n" TP2 "\r\n");
	ck_assert_int_eq(expect_block(&s, "/block/tp2"), tid);
	assert_ctx(&s, tid, T2, P2, "GET", "/block/tp2", &t);
	ck_assert_uint_eq(t.flags, 0);
	release(&s);
	it_assert_path_body(it_read_response(fd), "/block/tp2");
	close(fd);
	it_server_stop(&s);
}
END_TEST

START_TEST(test_tpc_url_query)
{
	char *env[] = {"CTXSHIM_URL_QUERY=1", NULL};
	struct it_server s;
	int fd;

	fd = tpc_connect(&s, NULL, env);
	it_send_str(fd, "GET /block/q?a=1&b=two HTTP/1.1\r\n" TP1 "\r\n");
	(void)serve_traced(&s, fd, "/block/q?a=1&b=two", T1, P1);
	close(fd);
	it_server_stop(&s);
}
END_TEST

START_TEST(test_tpc_non_http)
{
	/* A TLS-record-looking stream; the server's own parser still finds a
	 * "path" in it and blocks there. */
	static const char junk[] = "\x16\x03\x01\x02\x00 /block/junk " TP1 "\r\n\r\n";
	struct it_server s;
	struct it_thread_ctx t;
	char *log, pat[48];
	long tid;
	int fd;

	fd = tpc_connect(&s, NULL, NULL);
	it_send(fd, junk, sizeof(junk) - 1);
	tid = expect_block(&s, "/block/junk");
	dump_tid(&s, tid, &t);
	ck_assert_msg(!t.has_ctx, "a non-HTTP stream got a context");
	release(&s);
	free(it_read_response(fd));
	close(fd);

	/* The server is fine for the next client. */
	fd = it_connect(s.port);
	it_send_str(fd, "GET /block/after HTTP/1.1\r\n" TP2 "\r\n");
	(void)serve_traced(&s, fd, "/block/after", T2, P2);
	close(fd);

	log = it_events(&s);
	ck_assert_uint_eq(it_events_count(log, T1, "request"), 0);
	snprintf(pat, sizeof(pat), " trace=%s ", T1);
	ck_assert_ptr_null(strstr(log, pat));
	free(log);
	it_server_stop(&s);
}
END_TEST

/* CTXSHIM_MAX_HEADER_BYTES: a value in range is the limit (a 600-byte head
 * over 512 or 256 gets no context, a 20000-byte one under 1048576 does);
 * one out of range, below 256, over 1048576, negative (not 2^64 minus it,
 * as strtoul() reads it) or not all digits, is ignored: the default (16 KiB)
 * is used, and the 600-byte head gets its context, the 20000-byte one not. */
static const struct {
	char *env;
	size_t pad;
	bool ctx;
} max_header[] = {
	{"CTXSHIM_MAX_HEADER_BYTES=-18446744073709551360", 600, true},
	{"CTXSHIM_MAX_HEADER_BYTES=255", 600, true},
	{"CTXSHIM_MAX_HEADER_BYTES=512", 600, false},
	{"CTXSHIM_MAX_HEADER_BYTES=256", 600, false},
	{"CTXSHIM_MAX_HEADER_BYTES=512k", 600, true},
	{"CTXSHIM_MAX_HEADER_BYTES=1048576", 20000, true},
	{"CTXSHIM_MAX_HEADER_BYTES=1048577", 20000, false},
	{NULL, 20000, false},
};

START_TEST(test_tpc_max_header_bytes)
{
	char *env[] = {max_header[_i].env, NULL};
	static char req[21000];
	struct it_server s;
	struct it_thread_ctx t;
	size_t n = padded_head(req, "/block/max", max_header[_i].pad);
	long tid;
	int fd;

	fd = tpc_connect(&s, NULL, env);
	it_send(fd, req, n);
	if (max_header[_i].ctx) {
		(void)serve_traced(&s, fd, "/block/max", T1, P1);
	} else {
		tid = expect_block(&s, "/block/max");
		dump_tid(&s, tid, &t);
		ck_assert_msg(!t.has_ctx, "a head over the limit got a context");
		release(&s);
		it_assert_path_body(it_read_response(fd), "/block/max");
	}
	close(fd);
	it_server_stop(&s);
}
END_TEST

START_TEST(test_tpc_big_header)
{
	size_t big = 64 * 1024, n;
	char *req = malloc(big + 256);
	struct it_server s;
	struct it_thread_ctx t;
	char *log;
	long tid;
	int fd;

	ck_assert_ptr_nonnull(req);
	n = padded_head(req, "/block/big", big);

	fd = tpc_connect(&s, NULL, NULL);
	it_send(fd, req, n);
	tid = expect_block(&s, "/block/big");
	/* Over CTXSHIM_MAX_HEADER_BYTES (16 KiB): ignored, no context. */
	dump_tid(&s, tid, &t);
	ck_assert_msg(!t.has_ctx, "an oversized head got a context");
	release(&s);
	it_assert_path_body(it_read_response(fd), "/block/big");

	/* The scanner kept framing: the next request is seen. */
	it_send_str(fd, "GET /block/next HTTP/1.1\r\n" TP2 "\r\n");
	ck_assert_int_eq(serve_traced(&s, fd, "/block/next", T2, P2), tid);
	log = it_events(&s);
	ck_assert_uint_eq(it_events_count(log, T1, "request"), 0);
	free(log);
	close(fd);
	free(req);
	it_server_stop(&s);
}
END_TEST

/* Two connections on two threads at once: each thread shows its own. */
START_TEST(test_tpc_two_threads)
{
	struct it_server s;
	long tid1, tid2;
	int fd1, fd2;

	tpc_start(&s, NULL, NULL);
	fd1 = it_connect(s.port);
	fd2 = it_connect(s.port);
	it_send_str(fd1, "GET /block/one HTTP/1.1\r\n" TP1 "\r\n");
	tid1 = expect_block(&s, "/block/one");
	it_send_str(fd2, "PUT /block/two HTTP/1.1\r\n" TP2 "Content-Length: 0\r\n\r\n");
	tid2 = expect_block(&s, "/block/two");
	ck_assert_int_ne(tid1, tid2);
	assert_ctx(&s, tid1, T1, P1, "GET", "/block/one", NULL);
	assert_ctx(&s, tid2, T2, P2, "PUT", "/block/two", NULL);
	release(&s);
	release(&s);
	it_assert_path_body(it_read_response(fd1), "/block/one");
	it_assert_path_body(it_read_response(fd2), "/block/two");
	close(fd1);
	close(fd2);
	it_server_stop(&s);
}
END_TEST

/* ---- contexts larger than the connection's slot ---- */

/* The slot keeps a compact copy of the context (preload/conn.h, 178 bytes
 * of attributes and tracestate).  A request's first publication must not
 * be that copy: a path of "/block/" and n 'p's, a 419-byte tracestate of
 * 20 valid members and an X-Request-ID must all be published, and the
 * whole tracestate propagated. */
#define LONG_TS_MEMBERS 20

static void
long_tracestate(char *out, size_t cap)
{
	ck_assert_uint_eq(test_ts_members(out, cap, 1, LONG_TS_MEMBERS), 419);
}

static void
long_path(char *out, size_t cap, const char *prefix, size_t n)
{
	size_t len = strlen(prefix);

	ck_assert_uint_lt(len + n, cap);
	memcpy(out, prefix, len);
	memset(out + len, 'p', n);
	out[len + n] = '\0';
}

/* A GET head for path with traceparent tp (a "traceparent: ...\r\n" line),
 * the long tracestate and "X-Request-ID: rid". */
static void
long_head(char *out, size_t cap, const char *path, const char *tp, const char *rid)
{
	char ts[512];
	int n;

	long_tracestate(ts, sizeof(ts));
	n = snprintf(out, cap,
		     "GET %s HTTP/1.1\r\nHost: x\r\n%stracestate: %s\r\n"
		     "X-Request-ID: %s\r\n\r\n",
		     path, tp, ts, rid);
	ck_assert(n > 0 && (size_t)n < cap);
}

/* Path lengths around the slot: all attributes fit it (20), the path fits
 * but the parent does not (160), the path does not (200). */
static const size_t long_path_n[] = {20, 160, 200};

START_TEST(test_tpc_long_request)
{
	char *env[] = {"CTXSHIM_HEADER_ATTRS=x-request-id", NULL};
	char path[256], head[1024];
	struct it_server s;
	struct it_thread_ctx t;
	long tid;
	int fd;

	long_path(path, sizeof(path), "/block/", long_path_n[_i]);
	long_head(head, sizeof(head), path, TP1, "rid-42");
	fd = tpc_connect(&s, NULL, env);
	it_send_str(fd, head);
	tid = expect_block(&s, path);
	assert_ctx(&s, tid, T1, P1, "GET", path, &t);
	ck_assert_str_eq(t.extra, "rid-42");
	release(&s);
	it_assert_path_body(it_read_response(fd), path);
	close(fd);
	it_server_stop(&s);
}
END_TEST

/* A request pipelined behind one not answered yet waits in the compact
 * form (preload/conn.h) and is published from it: an attribute that does
 * not fit (the 207-byte path) is left out whole, and the later ones (the
 * parent, the header attribute) are still there. */
START_TEST(test_tpc_pipelined_long)
{
	char *env[] = {"CTXSHIM_HEADER_ATTRS=x-request-id", NULL};
	char path[256], head[1200];
	struct it_server s;
	struct it_thread_ctx t;
	size_t n;
	long tid;
	int fd;

	long_path(path, sizeof(path), "/block/", 200);
	n = (size_t)snprintf(head, sizeof(head),
			     "GET /block/first HTTP/1.1\r\n" TP2 "\r\n");
	long_head(head + n, sizeof(head) - n, path, TP1, "rid-43");
	fd = tpc_connect(&s, NULL, env);
	it_send_str(fd, head);
	tid = expect_block(&s, "/block/first");
	release(&s);
	ck_assert_int_eq(expect_block(&s, path), tid);
	dump_tid(&s, tid, &t);
	ck_assert(t.has_ctx);
	ck_assert_str_eq(t.trace, T1);
	ck_assert_str_eq(t.method, "GET");
	ck_assert_msg(t.path[0] == '\0', "url.path cut instead of left out: %s",
		      t.path);
	ck_assert_str_eq(t.parent, P1);
	ck_assert_str_eq(t.extra, "rid-43");
	release(&s);
	free(read_until(fd, "path=/block/pp"));
	close(fd);
	it_server_stop(&s);
}
END_TEST

/* A path cut at 255 bytes inside a percent-escape is published up to the
 * escape (request-ctx.c, path_cap()); the server gets every byte. */
START_TEST(test_tpc_path_cut_escape)
{
	static const size_t kept[] = {255, 253, 254, 255};
	char path[301], want[256], head[512];
	struct it_server s;
	int fd;

	fd = tpc_connect(&s, NULL, NULL);
	for (size_t at = 252; at <= 255; at++) {
		size_t k = kept[at - 252];
		long tid;
		int n;

		long_path(path, sizeof(path), "/block/", 293);
		memcpy(path + at, "%3F", 3);
		n = snprintf(head, sizeof(head), "GET %s HTTP/1.1\r\n" TP1 "\r\n",
			     path);
		ck_assert(n > 0 && (size_t)n < sizeof(head));
		it_send_str(fd, head);
		tid = expect_block(&s, path);
		memcpy(want, path, k);
		want[k] = '\0';
		assert_ctx(&s, tid, T1, P1, "GET", want, NULL);
		release(&s);
		it_assert_path_body(it_read_response(fd), path);
	}
	close(fd);
	it_server_stop(&s);
}
END_TEST

/* ---- what a socket-level server propagates (tpc-curl-server) ---- */

/* The call's traceparent: trace T1; its parent-id the incoming P1 with
 * transparent, a new one otherwise. */
static void
assert_call_traceparent(const struct it_sink_req *r, bool transparent)
{
	const char *tp = it_sink_field(r, "traceparent");

	ck_assert_ptr_nonnull(tp);
	ck_assert_msg(strlen(tp) == 55 && strncmp(tp, "00-" T1 "-", 36) == 0,
		      "traceparent %s", tp);
	if (transparent)
		ck_assert_msg(strncmp(tp + 36, P1, 16) == 0, "traceparent %s", tp);
	else
		ck_assert_msg(strncmp(tp + 36, P1, 16) != 0, "traceparent %s", tp);
}

static void
expect_called(struct it_server *s)
{
	char line[256];

	test_child_expect(&s->child, "CALLED ", line, sizeof(line), IT_TIMEOUT_MS);
	ck_assert_msg(strstr(line, " 200"), "upstream call failed: %s", line);
}

static const char *const propagate_modes[] = {"1", "transparent"};

START_TEST(test_tpc_call_tracestate)
{
	bool transparent = strcmp(propagate_modes[_i], "transparent") == 0;
	char mode[64], url[64], ts[512], path[256], head[1400];
	char *env[] = {mode, "CTXSHIM_HEADER_ATTRS=x-request-id", NULL};
	char helper[4096], *argv[] = {helper, "--call", url, NULL};
	struct test_child sink;
	struct it_sink_req r;
	struct it_server s;
	const char *got;
	size_t n, cut;
	int fd;

	helper_path(helper, sizeof(helper), "tpc-curl-server");
	snprintf(mode, sizeof(mode), "CTXSHIM_PROPAGATE=%s", propagate_modes[_i]);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/cb", it_sink_start(&sink));
	long_tracestate(ts, sizeof(ts));
	it_server_start(&s, argv, true, env);
	fd = it_connect(s.port);

	/* The first publication: the whole list goes out. */
	long_path(path, sizeof(path), "/call/", 200);
	long_head(head, sizeof(head), path, TP1, "rid-44");
	it_send_str(fd, head);
	expect_called(&s);
	it_sink_read(&sink, &r);
	assert_call_traceparent(&r, transparent);
	got = it_sink_field(&r, "tracestate");
	ck_assert_ptr_nonnull(got);
	ck_assert_str_eq(got, ts);
	it_assert_path_body(it_read_response(fd), path);

	/* Pipelined behind an unanswered request, the call runs under the
	 * compact copy (preload/conn.h, ctxshim(7) LIMITS): the list is
	 * cut from the right after a whole member, in both modes. */
	n = (size_t)snprintf(head, sizeof(head),
			     "GET /block/first HTTP/1.1\r\n" TP2 "\r\n");
	long_head(head + n, sizeof(head) - n, "/call/second", TP1, "rid-45");
	it_send_str(fd, head);
	(void)expect_block(&s, "/block/first");
	release(&s);
	expect_called(&s);
	it_sink_read(&sink, &r);
	assert_call_traceparent(&r, transparent);
	got = it_sink_field(&r, "tracestate");
	ck_assert_ptr_nonnull(got);
	cut = strlen(got);
	ck_assert_msg(cut > 0 && cut < strlen(ts) && strncmp(got, ts, cut) == 0 &&
			      ts[cut] == ',',
		      "tracestate %s", got);
	free(read_until(fd, "path=/call/second\n"));
	close(fd);
	it_server_stop(&s);
	it_sink_finish(&sink);
}
END_TEST

/* ---- event loop ---- */

START_TEST(test_epoll_two_connections)
{
	char path[4096], *argv[] = {path, NULL}, *log;
	struct it_server s;
	struct it_thread_ctx t;
	char line[256];
	long tid;
	int a, b;

	helper_path(path, sizeof(path), "epoll-server");
	it_server_start(&s, argv, true, NULL);
	a = it_connect(s.port);
	it_send_str(a, "GET /hold/a HTTP/1.1\r\n" TP1 "\r\n");
	test_child_expect(&s.child, "HELD /hold/a", line, sizeof(line), IT_TIMEOUT_MS);
	b = it_connect(s.port);
	it_send_str(b, "GET /block/b HTTP/1.1\r\n" TP2 "\r\n");
	tid = expect_block(&s, "/block/b");
	ck_assert_int_eq(tid, s.child.pid);
	/* The loop works on b now: b's context, not a's. */
	assert_ctx(&s, tid, T2, P2, "GET", "/block/b", &t);
	{
		char *json = it_ctxdump(s.child.pid);

		ck_assert_uint_eq(it_dump_count_trace(json, T1), 0);
		free(json);
	}
	release(&s);
	it_assert_path_body(it_read_response(b), "/block/b");
	it_assert_path_body(it_read_response(a), "/hold/a");
	/* Back in epoll_wait: nothing published. */
	it_wait_detached(&s, tid, NULL, "epoll_wait");
	it_assert_gone(&s, tid, T2);
	it_assert_gone(&s, tid, T1);

	log = it_events(&s);
	ck_assert_uint_eq(it_events_count(log, T1, "request"), 1);
	ck_assert_uint_eq(it_events_count(log, T2, "request"), 1);
	/* Writing a's held response switched to a's context... */
	ck_assert_uint_eq(it_events_count(log, T1, "write"), 1);
	/* ...and the loop cleared a's context before it read b. */
	ck_assert_uint_ge(it_events_count(log, T1, "epoll_wait"), 1);
	ck_assert_uint_eq(it_events_spans(log, T1, NULL), 1);
	ck_assert_uint_eq(it_events_spans(log, T2, NULL), 1);
	free(log);
	close(a);
	close(b);
	it_server_stop(&s);
}
END_TEST

/* Wait until pid's main thread blocks in epoll_wait (or epoll_pwait). */
static void
wait_in_epoll(pid_t pid)
{
	long deadline = test_now_ms() + IT_TIMEOUT_MS;
	char path[64], buf[256];

	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
	for (;;) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t r = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
		long nr;

		if (fd >= 0)
			close(fd);
		buf[r > 0 ? r : 0] = '\0';
		nr = strtol(buf, NULL, 10);
		if (r > 0 && (nr == SYS_epoll_wait || nr == SYS_epoll_pwait))
			return;
		ck_assert_msg(test_now_ms() < deadline,
			      "pid %d never waited in epoll (%s)", (int)pid, buf);
		usleep(2000);
	}
}

/* A context the thread did not get from a connection (here TRACEPARENT)
 * survives the waits; one it got from a request does not. */
START_TEST(test_epoll_inherited_kept)
{
	char path[4096], *argv[] = {path, NULL};
	char *env[] = {"TRACEPARENT=00-" T1 "-" P1 "-01", NULL};
	struct it_server s;
	struct it_thread_ctx t;
	int b;

	helper_path(path, sizeof(path), "epoll-server");
	it_server_start(&s, argv, true, env);
	wait_in_epoll(s.child.pid);
	dump_tid(&s, s.child.pid, &t);
	ck_assert_msg(t.has_ctx, "the TRACEPARENT context was cleared by epoll_wait");
	ck_assert_str_eq(t.trace, T1);

	b = it_connect(s.port);
	it_send_str(b, "GET /block/b HTTP/1.1\r\n" TP2 "\r\n");
	ck_assert_int_eq(expect_block(&s, "/block/b"), s.child.pid);
	assert_ctx(&s, s.child.pid, T2, P2, "GET", "/block/b", NULL);
	answer_detached(&s, b, s.child.pid, "/block/b", "epoll_wait", T2);
	close(b);
	it_server_stop(&s);
}
END_TEST

/* ---- a signal handler in the middle of a build ---- */

/* A handler that interrupts the shim while it holds its busy flags
 * (test/helpers/hold-jump.c lands it there exactly) and never returns
 * (a request timeout that siglongjmp()s back to the request loop, also
 * from a signal stack): the thread publishes the next request's context.
 * One that jumps inside itself and returns (also on a signal stack above
 * the shim's frame) still finds the flags held: its own read publishes
 * nothing, and the interrupted request's context is published whole. */
static const char *const hold_modes[] = {"out", "outalt", "inside", "insidealt"};
#define N_HOLD_MODES (sizeof(hold_modes) / sizeof(hold_modes[0]))

/* Each mode twice: plain, and built with _FORTIFY_SOURCE, whose jumps
 * are __longjmp_chk() calls (hooks/hook-longjmp.c). */
START_TEST(test_hold_jump)
{
	const char *mode = hold_modes[_i % N_HOLD_MODES];
	const char *prog = _i < (int)N_HOLD_MODES ? "hold-jump" : "hold-jump-fortify";
	char path[4096], *argv[] = {path, (char *)mode, NULL}, *out, *err;
	char want[64];
	int st;

	helper_path(path, sizeof(path), prog);
	st = test_run_capture(argv, NULL, true, &out, &err, IT_TIMEOUT_MS);
	snprintf(want, sizeof(want), "RESULT %s ok", mode);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, want),
		      "%s %s: status %#x:\n%s%s", prog, mode, st, out, err);
	free(out);
	free(err);
}
END_TEST

/* ---- return values and errno ---- */

START_TEST(test_errno_unchanged)
{
	char path[4096], *argv[] = {path, NULL}, *out0, *out1, *err0, *err1;
	char *env[] = {"CTXSHIM_EVENTS=/dev/null", NULL};
	int st0, st1;

	helper_path(path, sizeof(path), "socket-errno");
	st0 = test_run_capture(argv, NULL, false, &out0, &err0, IT_TIMEOUT_MS);
	st1 = test_run_capture(argv, env, true, &out1, &err1, IT_TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st0) && WEXITSTATUS(st0) == 0,
		      "without the shim:\n%s%s", out0, err0);
	ck_assert_msg(WIFEXITED(st1) && WEXITSTATUS(st1) == 0, "with the shim:\n%s%s",
		      out1, err1);
	ck_assert_msg(strcmp(out0, out1) == 0,
		      "output differs:\n--- without\n%s\n--- with\n%s", out0, out1);
	ck_assert_ptr_nonnull(strstr(out1, "recv-head ret=20 errno=unchanged"));
	free(out0);
	free(out1);
	free(err0);
	free(err1);
}
END_TEST

/* An application that closes or reuses every descriptor (daemons do)
 * takes the event log's fd away: the shim must stop writing to it rather
 * than write its lines into the application's file. */
START_TEST(test_events_fd_given_up)
{
	static const char script[] =
		"import os, socket, sys\n"
		"ev = sys.argv[1]\n"
		"fds = [int(f) for f in os.listdir('/proc/self/fd')]\n"
		"mine = [f for f in fds if f > 2 and os.path.exists('/proc/self/fd/%d' "
		"% f)\n"
		"        and os.readlink('/proc/self/fd/%d' % f) == ev]\n"
		"assert len(mine) == 1, mine\n"
		"victim = sys.argv[2]\n"
		"fd = os.open(victim, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)\n"
		"os.dup2(fd, mine[0]) if sys.argv[3] == 'dup2' else "
		"(os.close(mine[0]),\n"
		"    os.dup2(fd, mine[0]))\n"
		"pid = os.fork()\n"
		"os._exit(0) if pid == 0 else os.waitpid(pid, 0)\n"
		"srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen()\n"
		"c = socket.create_connection(srv.getsockname())\n"
		"s, _ = srv.accept()\n"
		"c.sendall(b'GET / HTTP/1.1\\r\\ntraceparent: 00-" T1 "-" P1
		"-01\\r\\n\\r\\n')\n"
		"s.recv(1000)\n"
		"s.sendall(b'HTTP/1.1 204 No Content\\r\\n\\r\\n'); s.close()\n"
		"print(os.fstat(mine[0]).st_size)\n";
	/* The forked child logs its new process context: with the log fd
	 * taken over, that line must not reach the application's file. */
	const char *how[] = {"dup2", "close", "dup2", "close"};
	const char *var[] = {"CTXSHIM_EVENTS", "CTXSHIM_EVENTS", "CTXSHIM_LOG",
			     "CTXSHIM_LOG"};
	unsigned i;

	if (access("/usr/bin/python3", X_OK) != 0)
		return;
	for (i = 0; i < 4; i++) {
		char dir[] = "/tmp/ctxshim-evfd-XXXXXX", ev[64], victim[64], evenv[96];
		char *argv[] = {"/usr/bin/python3", "-c", (char *)script, ev, victim,
				(char *)how[i],     NULL};
		char *env[] = {evenv, NULL}, *out, *err;
		int st;

		ck_assert_ptr_nonnull(test_mkdtemp(dir));
		snprintf(ev, sizeof(ev), "%s/events", dir);
		snprintf(victim, sizeof(victim), "%s/victim", dir);
		snprintf(evenv, sizeof(evenv), "%s=%s", var[i], ev);
		st = test_run_capture(argv, env, true, &out, &err, IT_TIMEOUT_MS);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s %s: %s%s",
			      var[i], how[i], out, err);
		ck_assert_msg(
			strcmp(out, "0\n") == 0,
			"%s %s: the shim wrote into the application's file (size %s)",
			var[i], how[i], out);
		unlink(ev);
		unlink(victim);
		rmdir(dir);
		free(out);
		free(err);
	}
}
END_TEST

TEST_SUITE(socket_suite)
{
	Suite *s = suite_create("preload-socket");
	TCase *tc = tcase_create("tpc");
	if (access(test_ctxdump_path(), X_OK) != 0)
		test_skip("ctxdump is not built (%s)", test_ctxdump_path());
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_tpc_traced);
	tcase_add_loop_test(tc, test_tpc_split_reads, 0,
			    (int)(sizeof(variants) / sizeof(variants[0])));
	tcase_add_test(tc, test_tpc_handler_polls);
	tcase_add_test(tc, test_tpc_pipelined);
	tcase_add_test(tc, test_tpc_keepalive);
	tcase_add_test(tc, test_tpc_no_traceparent);
	tcase_add_test(tc, test_tpc_invalid_traceparent);
	tcase_add_test(tc, test_tpc_no_new_traces);
	tcase_add_test(tc, test_tpc_sampled);
	tcase_add_test(tc, test_tpc_url_query);
	tcase_add_test(tc, test_tpc_non_http);
	tcase_add_test(tc, test_tpc_big_header);
	tcase_add_loop_test(tc, test_tpc_max_header_bytes, 0,
			    (int)(sizeof(max_header) / sizeof(max_header[0])));
	tcase_add_test(tc, test_tpc_two_threads);
	tcase_add_loop_test(tc, test_tpc_long_request, 0,
			    (int)(sizeof(long_path_n) / sizeof(long_path_n[0])));
	tcase_add_test(tc, test_tpc_pipelined_long);
	tcase_add_test(tc, test_tpc_path_cut_escape);
	/* tpc-curl-server is built only with libcurl's -dev package. */
	if (access(test_helper_path("tpc-curl-server"), X_OK) == 0)
		tcase_add_loop_test(
			tc, test_tpc_call_tracestate, 0,
			(int)(sizeof(propagate_modes) / sizeof(propagate_modes[0])));
	suite_add_tcase(s, tc);

	tc = tcase_create("epoll");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_epoll_two_connections);
	tcase_add_test(tc, test_epoll_inherited_kept);
	suite_add_tcase(s, tc);

	tc = tcase_create("hold");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_hold_jump, 0, 2 * (int)N_HOLD_MODES);
	suite_add_tcase(s, tc);

	tc = tcase_create("errno");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_errno_unchanged);
	tcase_add_test(tc, test_events_fd_given_up);
	suite_add_tcase(s, tc);
	return s;
}
