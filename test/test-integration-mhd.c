/* SPDX-License-Identifier: Apache-2.0 */
/* libmicrohttpd servers (thread-per-connection, internal select, internal
 * epoll) under the shim: while the access handler of a traced request
 * blocks, ctxdump shows that request's context on the handler's thread and
 * on no other; the several handler calls of one request share one span-id;
 * after the response the context is gone; responses are byte-identical
 * without the shim.  url.path is the target as sent, on every request of a
 * keep-alive connection, whatever options the application passes, and
 * what the application's own callbacks see (URI log, completion) is the
 * same as without the shim.  A body written by a content reader after the
 * handler returned shows its request too. */
#include "test-integration-block.h"

#include <sys/socket.h>

/* external (MHD_run_from_select() on the main thread) only where no
 * handler blocks. */
static const char *const modes[] = {"thread", "select", "epoll", "external"};

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

/* Loop index: mode * 3 + it_check_attr_lines()'s lines. */
START_TEST(test_attr_two_lines)
{
	struct it_server s;

	start(&s, _i / 3, true);
	it_check_attr_lines(&s, "/block/a", "GET /block/a 0\n", _i % 3);
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

/* The library and the socket level disagree on a request's context
 * (it_check_layers_disagree()). */
START_TEST(test_layers_disagree)
{
	struct it_server s;

	start(&s, _i, true);
	it_check_layers_disagree(&s, "/block/fold", "GET /block/fold 0\n",
				 "mhd-restore");
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

/* ---- bodies from a content reader ---- */

/* mhd-server's /stream bodies: STREAM_LINES lines of 33 bytes. */
#define STREAM_LINE  33
#define STREAM_LINES 262144

/* What the reader writes while its thread shows no trace. */
#define NONE32 "none                            "

/* resp (freed here) is 200 with a whole /stream body, every line of which
 * the reader wrote while its thread showed trace. */
static void
assert_stream(char *resp, size_t len, const char *trace)
{
	const char *b = strstr(resp, "\r\n\r\n");
	size_t i;

	ck_assert_msg(strncmp(resp, "HTTP/1.1 200 OK\r\n", 17) == 0, "response: %.300s",
		      resp);
	ck_assert_ptr_nonnull(b);
	b += 4;
	ck_assert_uint_eq(len - (size_t)(b - resp), (size_t)STREAM_LINE * STREAM_LINES);
	for (i = 0; i < STREAM_LINES; i++) {
		const char *l = b + i * STREAM_LINE;

		ck_assert_msg(memcmp(l, trace, 32) == 0 && l[32] == '\n',
			      "line %zu of the body of trace %s: %.32s", i, trace, l);
	}
	free(resp);
}

/* How many lines of the /stream body in resp (freed here) show TP_TRACE
 * (n[0]), TP2_TRACE (n[1]), none (n[2]), or a mix (n[3]: MHD called the
 * reader at a position inside a line, where a connection's send() of the
 * shared buffer stopped). */
static void
count_stream(char *resp, size_t len, size_t n[4])
{
	static const char *const kind[] = {TP_TRACE, TP2_TRACE, NONE32};
	const char *b = strstr(resp, "\r\n\r\n");
	size_t i, k;

	ck_assert_ptr_nonnull(b);
	b += 4;
	ck_assert_uint_eq(len - (size_t)(b - resp), (size_t)STREAM_LINE * STREAM_LINES);
	memset(n, 0, 4 * sizeof(n[0]));
	for (i = 0; i < STREAM_LINES; i++) {
		for (k = 0; k < 3; k++)
			if (memcmp(b + i * STREAM_LINE, kind[k], 32) == 0)
				break;
		n[k]++;
	}
	free(resp);
}

/* Bodies a content reader writes over many calls, after the access
 * handler returned, for two requests at once (on one thread in select,
 * epoll and external mode): each call shows its own request's trace, the
 * completion callback too, and the application's free callback got its
 * own closure, once per response (it_check_two_streams()). */
START_TEST(test_stream_bodies)
{
	struct it_server s;

	start(&s, _i, true);
	it_check_two_streams(&s, assert_stream, "mhd-body", true);
}
END_TEST

/* One response queued on several connections (/shared): on one
 * connection after the other (keep-alive: MHD drops it before it reads
 * the next request) each body shows its request; while a connection
 * still holds it, the reader cannot tell which connection it writes for,
 * so it shows no trace from the second queue on.  MHD keeps one buffer per
 * response: a connection may send a block the reader wrote for the other
 * one (with its trace, before the second queue), but none was written
 * showing the second request's trace. */
START_TEST(test_shared_body)
{
	struct it_server s;
	char line[512], *ra, *rb;
	size_t la, lb, na[4], nb[4];
	int fk, fa, fb;

	start(&s, _i, true);
	fk = it_connect(s.port);
	it_send_str(fk,
		    "GET /shared HTTP/1.1\r\nHost: t\r\ntraceparent: " TP "\r\n\r\n");
	ra = it_read_response(fk);
	assert_stream(ra, strlen(ra), TP_TRACE);
	it_send_str(fk,
		    "GET /shared HTTP/1.1\r\nHost: t\r\ntraceparent: " TP2 "\r\n\r\n");
	rb = it_read_response(fk);
	assert_stream(rb, strlen(rb), TP2_TRACE);
	test_child_expect(&s.child, "END ", line, sizeof(line), IT_TIMEOUT_MS);
	test_child_expect(&s.child, "END ", line, sizeof(line), IT_TIMEOUT_MS);
	/* The second request's completion callback ("DONE"; the first one's
	 * went by before the second "END"): MHD drops the connection's hold
	 * on the response right after it, not when the body is written. */
	test_child_expect(&s.child, "DONE ", line, sizeof(line), IT_TIMEOUT_MS);

	/* fk stays open: it no longer holds the response. */
	fa = it_connect_small(s.port);
	it_send_str(fa, "GET /shared HTTP/1.1\r\nHost: t\r\ntraceparent: " TP
			"\r\nConnection: close\r\n\r\n");
	test_child_expect(&s.child, "BODY ", line, sizeof(line), IT_TIMEOUT_MS);
	fb = it_connect(s.port);
	it_send_str(fb, "GET /shared HTTP/1.1\r\nHost: t\r\ntraceparent: " TP2
			"\r\nConnection: close\r\n\r\n");
	rb = it_read_all(fb, &lb);
	ra = it_read_all(fa, &la);
	close(fa);
	close(fb);
	close(fk);
	count_stream(ra, la, na);
	count_stream(rb, lb, nb);
	ck_assert_msg(na[0] > 0 && na[1] == 0 && na[2] > 0 && nb[1] == 0 && nb[2] > 0,
		      "lines of %s, %s, none, mixed: first body %zu %zu %zu %zu, "
		      "second body %zu %zu %zu %zu",
		      TP_TRACE, TP2_TRACE, na[0], na[1], na[2], na[3], nb[0], nb[1],
		      nb[2], nb[3]);
	it_server_stop(&s);
}
END_TEST

/* ---- url.path as sent, and the application's callbacks ---- */

/* What mhd-server says, one line at a time, without what differs between
 * any two runs (thread ids, descriptor numbers, the port). */
struct transcript {
	char *buf;
	size_t len, cap;
};

static void
tr_add(struct transcript *tr, const char *s, size_t n)
{
	if (tr->cap - tr->len < n + 1) {
		tr->cap = tr->cap * 2 + n + 4096;
		tr->buf = realloc(tr->buf, tr->cap);
		ck_assert_ptr_nonnull(tr->buf);
	}
	memcpy(tr->buf + tr->len, s, n);
	tr->len += n;
	tr->buf[tr->len] = '\0';
}

/* "IN <tid> GET /x" -> "IN GET /x", "DONE <tid> fd=<fd> <code>" ->
 * "DONE <code>"; READY is left out. */
static void
tr_line(struct transcript *tr, const char *line)
{
	const char *p;

	if (strncmp(line, "READY ", 6) == 0)
		return;
	if (strncmp(line, "IN ", 3) == 0 && (p = strchr(line + 3, ' '))) {
		tr_add(tr, "IN", 2);
		line = p;
	} else if (strncmp(line, "DONE ", 5) == 0 && (p = strrchr(line, ' '))) {
		tr_add(tr, "DONE", 4);
		line = p;
	}
	tr_add(tr, line, strlen(line));
	tr_add(tr, "\n", 1);
}

/* Read lines into tr until one starts with prefix (returned in line). */
static void
tr_expect(struct it_server *s,
	  struct transcript *tr,
	  const char *prefix,
	  char *line,
	  size_t n)
{
	do {
		test_child_readline(&s->child, line, n, IT_TIMEOUT_MS);
		tr_line(tr, line);
	} while (strncmp(line, prefix, strlen(prefix)) != 0);
}

/* it_server_start() that keeps what the server says before READY (MHD's
 * messages with -a, part of what is compared). */
static void
mhd_start_rec(struct it_server *s,
	      char *const argv[],
	      bool preload,
	      char *const env[],
	      struct transcript *tr)
{
	char *e[4], evenv[96], line[512];
	size_t n = 0;

	memset(s, 0, sizeof(*s));
	if (preload) {
		snprintf(s->events, sizeof(s->events), "/tmp/ctxshim-it-events-XXXXXX");
		s->events_fd = mkostemp(s->events, O_CLOEXEC);
		ck_assert_int_gt(s->events_fd, 2);
		snprintf(evenv, sizeof(evenv), "CTXSHIM_EVENTS=%s", s->events);
		e[n++] = evenv;
	}
	while (env && *env && n < 3)
		e[n++] = *env++;
	e[n] = NULL;
	test_child_start(&s->child, argv, e, preload);
	tr_expect(s, tr, "READY ", line, sizeof(line));
	s->port = (unsigned)strtoul(line + 6, NULL, 10);
	ck_assert_uint_gt(s->port, 0);
	if (s->events[0])
		unlink(s->events);
}

/* Wait until the server has read everything sent on fd (its socket's
 * receive queue in /proc/net/tcp is empty).  A FIN arriving with the data
 * can go unnoticed by an epoll daemon, which then never closes: MHD's
 * edge-triggered loop reads once and waits for the next edge. */
static void
wait_read(unsigned port, int fd)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	long deadline = test_now_ms() + IT_TIMEOUT_MS;
	char want[64];

	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	/* "local_address rem_address st tx_queue:rx_queue" of the server's
	 * side of this connection, in /proc/net/tcp's hex. */
	snprintf(want, sizeof(want), "0100007F:%04X 0100007F:%04X", port,
		 (unsigned)ntohs(sin.sin_port));
	for (;;) {
		char line[512], *p;
		bool empty = false;
		FILE *f = fopen("/proc/net/tcp", "re");

		ck_assert_ptr_nonnull(f);
		while (fgets(line, sizeof(line), f)) {
			p = strstr(line, want);
			if (!p)
				continue;
			/* after the state: "tx_queue:rx_queue" */
			p = strchr(p + strlen(want) + 1, ' ');
			p = p ? strchr(p, ':') : NULL;
			empty = p && strtoul(p + 1, NULL, 16) == 0;
		}
		(void)fclose(f);
		if (empty)
			return;
		ck_assert_msg(test_now_ms() < deadline, "the server never read %s",
			      want);
		usleep(1000);
	}
}

static const char *const variants[] = {"", "-u", "-a"};

/* The events of one run: a traced request that blocks and a second one on
 * the same connection (keep-alive), both for "/block/caf%C3%A9" with a
 * query, whose url.path must be the target as sent without the query
 * (when checked, under the shim); then requests whose completion MHD
 * reports without calling the handler unless it made them client-aware:
 * a bad header line (MHD answers 400 itself), the same after a request on
 * the connection, a client that goes away mid-headers, the same after a
 * request.  Returns the transcript of what the server said and answered. */
static char *
mhd_session(int mode, const char *variant, bool preload)
{
	static char prog[4096];
	char *argv[4], *env[] = {"CTXSHIM_HEADER_ATTRS=x-request-id", NULL};
	static const char *const closing[] = {
		"GET /bad HTTP/1.1\r\nHost: t\r\nNoColon\r\n\r\n",
		"GET /cut HTTP/1.1\r\nHost: lo",
	};
	struct transcript tr = {0};
	struct it_thread_ctx t;
	struct it_server s;
	char line[1024], *resp, *json;
	int fd, n = 0, st;
	long tid;
	size_t i, k;

	snprintf(prog, sizeof(prog), "%s/mhd-server", test_env_path("HELPER_DIR"));
	argv[n++] = prog;
	if (variant[0])
		argv[n++] = (char *)variant;
	argv[n++] = (char *)modes[mode];
	argv[n] = NULL;
	mhd_start_rec(&s, argv, preload, env, &tr);

	fd = it_connect(s.port);
	it_send_str(fd, "GET /block/caf%C3%A9?q=1 HTTP/1.1\r\nHost: t\r\n"
			"traceparent: " TP "\r\n\r\n");
	tr_expect(&s, &tr, "IN ", line, sizeof(line));
	tid = strtol(line + 3, NULL, 10);
	if (preload) {
		json = it_dump_blocked(&s, tid, &t);
		ck_assert_str_eq(t.trace, TP_TRACE);
		ck_assert_str_eq(t.path, "/block/caf%C3%A9");
		free(json);
	}
	test_child_send(&s.child, "GO\n");
	resp = it_read_response(fd);
	tr_add(&tr, resp, strlen(resp));
	free(resp);
	it_send_str(fd, "GET /block/caf%C3%A9/2?q=2 HTTP/1.1\r\nHost: t\r\n"
			"traceparent: " TP2 "\r\nConnection: close\r\n\r\n");
	tr_expect(&s, &tr, "IN ", line, sizeof(line));
	tid = strtol(line + 3, NULL, 10);
	if (preload) {
		json = it_dump_blocked(&s, tid, &t);
		ck_assert_str_eq(t.trace, TP2_TRACE);
		ck_assert_str_eq(t.path, "/block/caf%C3%A9/2");
		free(json);
	}
	test_child_send(&s.child, "GO\n");
	resp = it_read_all(fd, NULL);
	tr_add(&tr, resp, strlen(resp));
	free(resp);
	close(fd);
	tr_expect(&s, &tr, "DONE ", line, sizeof(line));

	for (i = 0; i < 2; i++) {
		for (k = 0; k < sizeof(closing) / sizeof(closing[0]); k++) {
			fd = it_connect(s.port);
			if (i) {
				/* a request first: MHD resets the connection's
				 * state before the next one */
				it_send_str(fd, "GET /a HTTP/1.1\r\nHost: t\r\n\r\n");
				resp = it_read_response(fd);
				tr_add(&tr, resp, strlen(resp));
				free(resp);
				tr_expect(&s, &tr, "DONE ", line, sizeof(line));
			}
			it_send_str(fd, closing[k]);
			wait_read(s.port, fd);
			(void)shutdown(fd, SHUT_WR);
			resp = it_read_all(fd, NULL);
			tr_add(&tr, "== ", 3);
			tr_add(&tr, resp, strlen(resp));
			tr_add(&tr, "\n", 1);
			free(resp);
			close(fd);
		}
	}

	/* The rest of what the server says, until it exits. */
	close(s.child.in_fd);
	s.child.in_fd = -1;
	for (;;) {
		char *nl;
		ssize_t r;

		while ((nl = memchr(s.child.buf, '\n', s.child.len))) {
			*nl = '\0';
			tr_line(&tr, s.child.buf);
			s.child.len -= (size_t)(nl + 1 - s.child.buf);
			memmove(s.child.buf, nl + 1, s.child.len);
		}
		r = read(s.child.out_fd, s.child.buf + s.child.len,
			 sizeof(s.child.buf) - s.child.len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		s.child.len += (size_t)r;
	}
	st = test_child_finish(&s.child, IT_TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "server exit status %#x",
		      st);
	if (s.events_fd > 2)
		close(s.events_fd);
	if (s.events[0])
		unlink(s.events);
	return tr.buf;
}

/* Loop index: mode * 3 + variant.  The application's own URI log callback
 * (-u) is called with the same uri and its value arrives as *req_cls
 * ("URI", "REQCLS" lines); its completion callback is called for the same
 * requests with the same codes ("DONE"), with or without a URI log
 * callback of its own; options in an MHD_OPTION_ARRAY (-a) are taken,
 * with MHD's messages unchanged (-a logs them). */
START_TEST(test_raw_path_same_callbacks)
{
	int mode = _i / 3;
	const char *variant = variants[_i % 3];
	char *plain = mhd_session(mode, variant, false);
	char *shim = mhd_session(mode, variant, true);

	ck_assert_msg(strcmp(plain, shim) == 0,
		      "%s %s: transcripts differ:\n--- without\n%s\n--- with\n%s",
		      modes[mode], variant, plain, shim);
	/* They say what they are meant to. */
	ck_assert_ptr_nonnull(strstr(plain, "400 Bad Request"));
	if (strcmp(variant, "-u") == 0) {
		ck_assert_ptr_nonnull(strstr(plain, "URI /block/caf%C3%A9?q=1\n"
						    "REQCLS /block/caf\xc3\xa9\n"));
		ck_assert_ptr_nonnull(strstr(plain, "URI /cut\n"));
	}
	if (strcmp(variant, "-a") == 0)
		ck_assert_ptr_nonnull(strstr(
			plain, "MHD MHD_OPTION_EXTERNAL_LOGGER is not the first"));
	free(plain);
	free(shim);
}
END_TEST

/* CTXSHIM_URL_QUERY=1 keeps the query, as sent. */
START_TEST(test_raw_path_query)
{
	static char prog[4096];
	char *argv[] = {prog, (char *)modes[_i], NULL};
	char *env[] = {"CTXSHIM_URL_QUERY=1", NULL};
	struct it_thread_ctx t;
	struct it_server s;
	char *json;
	long tid;
	int fd;

	snprintf(prog, sizeof(prog), "%s/mhd-server", test_env_path("HELPER_DIR"));
	it_server_start(&s, argv, true, env);
	fd = it_send_blocking(&s, -1,
			      "GET /block/caf%C3%A9?q=%C3%A9&r HTTP/1.1\r\nHost: t\r\n"
			      "Connection: close\r\n\r\n",
			      &tid);
	json = it_dump_blocked(&s, tid, &t);
	ck_assert_str_eq(t.path, "/block/caf%C3%A9?q=%C3%A9&r");
	free(json);
	it_release_ok(&s, fd, "GET /block/caf\xc3\xa9 0\n", true);
	it_server_stop(&s);
}
END_TEST

/* An option the shim's table does not know: the daemon is started with
 * the application's list as it is (here MHD refuses it, and says so as
 * without the shim), and the shim says once why url.path stays decoded. */
START_TEST(test_unknown_option)
{
	static char prog[4096];
	char *argv[] = {prog, "-x", "select", NULL};
	char *env[] = {"CTXSHIM_LOG=stderr", NULL};
	char *out0, *err0, *out1, *err1;
	int st0, st1;

	snprintf(prog, sizeof(prog), "%s/mhd-server", test_env_path("HELPER_DIR"));
	st0 = test_run_capture(argv, NULL, false, &out0, &err0, IT_TIMEOUT_MS);
	st1 = test_run_capture(argv, env, true, &out1, &err1, IT_TIMEOUT_MS);
	ck_assert_int_eq(st0, st1);
	ck_assert_msg(WIFEXITED(st0) && WEXITSTATUS(st0) == 1, "status %#x", st0);
	ck_assert_str_eq(out0, out1);
	ck_assert_ptr_nonnull(strstr(out0, "MHD Invalid option 99!"));
	ck_assert_msg(strstr(err1, "libmicrohttpd: daemon option 99 not rewritten"),
		      "shim log: %s", err1);
	free(out0);
	free(err0);
	free(out1);
	free(err1);
}
END_TEST

/* Start an mhd-server (argv) with the shim's log in a file, and read
 * what the shim logged while it started into logbuf. */
static void
mhd_start_logged(struct it_server *s, char **argv, char *logbuf, size_t cap)
{
	char logpath[] = "/tmp/ctxshim-it-log-XXXXXX", logenv[64];
	char *env[] = {logenv, NULL};
	ssize_t n;
	int logfd;

	logfd = mkostemp(logpath, O_CLOEXEC);
	ck_assert_int_ge(logfd, 0);
	snprintf(logenv, sizeof(logenv), "CTXSHIM_LOG=%s", logpath);
	it_server_start(s, argv, true, env);
	unlink(logpath);
	n = read(logfd, logbuf, cap - 1);
	close(logfd);
	ck_assert_int_ge(n, 0);
	logbuf[n] = '\0';
}

/* Options the shim leaves to MHD (here more than it rewrites, which its
 * log says): url.path is MHD's decoded url, where a '?' or '#' sent
 * escaped is escaped again, so that the path is not cut there. */
START_TEST(test_decoded_url_path)
{
	static char prog[4096];
	static const char *const cases[][3] = {
		{"/block/a%3Fb?q=1", "/block/a%3Fb", "GET /block/a?b 0\n"},
		{"/block/x%23y", "/block/x%23y", "GET /block/x#y 0\n"},
	};
	char *argv[] = {prog, "-m", "select", NULL}, req[256], *json, logbuf[4096];
	struct it_thread_ctx t;
	struct it_server s;
	size_t i;
	long tid;
	int fd;

	snprintf(prog, sizeof(prog), "%s/mhd-server", test_env_path("HELPER_DIR"));
	mhd_start_logged(&s, argv, logbuf, sizeof(logbuf));
	ck_assert_msg(strstr(logbuf, "libmicrohttpd: more than 256 daemon options"),
		      "shim log: %s", logbuf);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(req, sizeof(req),
			 "GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
			 cases[i][0]);
		fd = it_send_blocking(&s, -1, req, &tid);
		json = it_dump_blocked(&s, tid, &t);
		ck_assert_str_eq(t.path, cases[i][1]);
		free(json);
		it_release_ok(&s, fd, cases[i][2], true);
	}
	it_server_stop(&s);
}
END_TEST

/* The bound of the options the shim rewrites, at its edge: 256 (the
 * plain daemon's two and 254 in an array) are rewritten, url.path is the
 * target as sent; 257 are left to MHD, which the log says. */
START_TEST(test_options_bound)
{
	static char prog[4096];
	char opt[16], *argv[] = {prog, opt, "select", NULL}, *json, logbuf[4096];
	struct it_thread_ctx t;
	struct it_server s;
	long tid;
	int fd;

	snprintf(prog, sizeof(prog), "%s/mhd-server", test_env_path("HELPER_DIR"));
	snprintf(opt, sizeof(opt), "-m%d", 254 + _i);
	mhd_start_logged(&s, argv, logbuf, sizeof(logbuf));
	ck_assert_msg(!strstr(logbuf, "more than 256 daemon options") == !_i,
		      "%s: shim log: %s", opt, logbuf);
	fd = it_send_blocking(&s, -1,
			      "GET /block/caf%C3%A9 HTTP/1.1\r\nHost: t\r\n"
			      "Connection: close\r\n\r\n",
			      &tid);
	json = it_dump_blocked(&s, tid, &t);
	if (!_i)
		ck_assert_str_eq(t.path, "/block/caf%C3%A9");
	free(json);
	it_release_ok(&s, fd, "GET /block/caf\xc3\xa9 0\n", true);
	it_server_stop(&s);
}
END_TEST

TEST_SUITE(integration_mhd_suite)
{
	Suite *s = suite_create("libmicrohttpd servers under the shim");
	TCase *tc = tcase_create(
		"thread-per-connection (0), select (1), epoll (2), external (3)");

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_traced_request, 0, 3);
	tcase_add_loop_test(tc, test_no_traceparent, 0, 3);
	tcase_add_loop_test(tc, test_two_traceparents, 0, 3);
	tcase_add_loop_test(tc, test_attr_two_lines, 0, 9);
	tcase_add_loop_test(tc, test_upload_one_span, 0, 3);
	tcase_add_loop_test(tc, test_keepalive_second_request, 0, 3);
	tcase_add_loop_test(tc, test_pipelined_requests, 0, 3);
	tcase_add_loop_test(tc, test_layers_disagree, 0, 3);
	tcase_add_loop_test(tc, test_same_bytes, 0, 3);
	tcase_add_loop_test(tc, test_stream_bodies, 0, 4);
	tcase_add_loop_test(tc, test_shared_body, 0, 4);
	tcase_add_loop_test(tc, test_raw_path_same_callbacks, 0, 9);
	tcase_add_loop_test(tc, test_raw_path_query, 0, 3);
	tcase_add_test(tc, test_unknown_option);
	tcase_add_test(tc, test_decoded_url_path);
	tcase_add_loop_test(tc, test_options_bound, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}
