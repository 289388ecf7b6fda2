/* SPDX-License-Identifier: Apache-2.0 */
/* HAProxy from Debian (haproxy 2.6) under the shim, socket level only, as a
 * reverse proxy in front of tpc-server (started without the shim): its own
 * configuration in a temporary directory (mode http, 127.0.0.1, a free
 * port, two threads, keep-alive on both sides, "http-reuse always",
 * request and response bodies spliced), in the foreground.  Two more
 * backends, both without the shim: http-sink, which prints the request
 * heads it gets, and a thread of this test that answers every request
 * with request-shaped bytes.  HAProxy is an event loop on each of its
 * threads: after it has read a request and sent it to the backend, the
 * thread goes back to epoll_wait() and serves other connections, so the
 * request is published only while haproxy's own code works on it --
 * from the read of its head until that wait, and again from the first
 * write of its response to the client until the next one.  Checked:
 *
 * 1. A request held by a Lua action (blocked on a FIFO: haproxy's own
 *    work on it, frozen) is published by exactly one haproxy thread,
 *    with a span of its own, the incoming parent and its method and
 *    path.  A request the backend holds ("GET /block/...") is published
 *    by no thread meanwhile: the event log shows it attached on one
 *    thread at its head and detached by that thread's epoll_wait() once
 *    the request went out to the backend.  That is what users see of a
 *    proxy waiting for its backend.  When the backend answers, the read
 *    of its response from the upstream connection publishes the request
 *    again (event reason "upstream": hooks/hook-socket.c, "Upstreams"),
 *    on the thread that then writes the response to the client.
 * 2. After each response no thread publishes its trace: the thread's
 *    last event is a detach, and ctxdump finds the trace nowhere.
 * 3. What haproxy reads from its backends is never taken for a request:
 *    a backend answering with a request head (traceparent included)
 *    gets a 502 from haproxy and its trace appears nowhere; the read of
 *    that answer publishes the client's request, not the backend's.  A
 *    traceparent and tracestate sent by the client reach the backend
 *    exactly as sent.
 * 4. The same requests (keep-alive with two traces, pipelining,
 *    HTTP/1.0, no traceparent, junk and a bad header that haproxy
 *    answers 400 itself, a spliced 300 KB body followed by a request on
 *    the same connection) get the same bytes with and without the shim;
 *    nothing differs between two runs without it (no Date: tpc-server
 *    sends none and haproxy adds none), so nothing is normalised.  Each
 *    traced request is started once, with one span, and released. */
#include "test-common.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test-integration.h"
#include "test-nginx.h"
#pragma GCC diagnostic pop

#include <pthread.h>

#define HAPROXY      "/usr/sbin/haproxy"
#define SETPRIV      "/usr/bin/setpriv"
#define TRACE_PREFIX "7c4e2a9b1d3f45a6b8c0d2e4f6a8b0"
#define PARENT_SPAN  "00f067aa0ba902b7" /* nx_traceparent()'s */
#define EVIL_TRACE   "e0e1e2e3e4e5e6e7e8e9eaebecedee01"
#define TRACESTATE   "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
#define BIG_BODY     (300 * 1024)

/* The traced requests: trace k is nx_trace(TRACE_PREFIX, k). */
enum {
	T_HOLD = 1,  /* held by the Lua action */
	T_BLOCK,     /* held by the backend */
	T_KA1,       /* keep-alive, first request */
	T_KA2,       /* keep-alive, second */
	T_PIPE1,     /* pipelined, first */
	T_PIPE2,     /* pipelined, second */
	T_HTTP10,    /* HTTP/1.0 */
	T_BADHDR,    /* a header haproxy rejects: its own 400 */
	T_BIG,       /* POST with a spliced body */
	T_AFTER_BIG, /* the next request on that connection */
	T_SINK,      /* to http-sink: forwarded unchanged */
	T_RAW,       /* to the backend that answers with a request */
	T_LAST = T_RAW,
};

struct hx_run {
	struct nx_server n; /* haproxy: srv (event log, port), dir, conf */
	struct test_child backend, sink;
	unsigned backend_port, sink_port, raw_port;
	int raw_lfd;
	pthread_t raw_thread;
	char fifo[128];
};

/* ---- the backend that answers with a request head ---- */

/* Each connection: read up to the end of the request head, then "answer"
 * with bytes that are a valid request head with a traceparent of
 * EVIL_TRACE, and close.  Stops when the listening socket is shut down. */
static void *
hx_raw_serve(void *arg)
{
	static const char evil[] =
		"GET /from-backend HTTP/1.1\r\nHost: b\r\n"
		"traceparent: 00-" EVIL_TRACE "-b7ad6b7169203331-01\r\n\r\n";
	int lfd = *(int *)arg;

	for (;;) {
		char buf[4096];
		size_t len = 0;
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR)
				continue;
			return NULL;
		}
		for (;;) {
			ssize_t r = read(fd, buf + len, sizeof(buf) - 1 - len);

			if (r <= 0)
				break;
			len += (size_t)r;
			buf[len] = '\0';
			if (strstr(buf, "\r\n\r\n") || len == sizeof(buf) - 1) {
				(void)!write(fd, evil, sizeof(evil) - 1);
				break;
			}
		}
		close(fd);
	}
}

static void
hx_raw_start(struct hx_run *h)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	h->raw_lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(h->raw_lfd, 0);
	ck_assert_int_eq(bind(h->raw_lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(h->raw_lfd, 16), 0);
	ck_assert_int_eq(getsockname(h->raw_lfd, (struct sockaddr *)&a, &al), 0);
	h->raw_port = ntohs(a.sin_port);
	ck_assert_int_eq(
		pthread_create(&h->raw_thread, NULL, hx_raw_serve, &h->raw_lfd), 0);
}

/* ---- haproxy ---- */

static void
hx_write_conf(struct hx_run *h)
{
	char conf[2048], lua[512], path[160];
	int len;

	/* The Lua action: opens the FIFO (blocks until the test opens it
	 * for writing) and reads one line from it, on the haproxy thread
	 * that works on the request. */
	len = snprintf(lua, sizeof(lua),
		       "core.register_action(\"hold\", {\"http-req\"}, function(txn)\n"
		       "\tlocal f = io.open(\"%s\", \"r\")\n"
		       "\tif f then\n"
		       "\t\tf:read(\"l\")\n"
		       "\t\tf:close()\n"
		       "\tend\n"
		       "end)\n",
		       h->fifo);
	ck_assert_int_lt(len, (int)sizeof(lua));
	snprintf(path, sizeof(path), "%s/hold.lua", h->n.dir);
	nx_write_file(path, lua, (size_t)len);
	/* Nothing from /etc/haproxy; no log (haproxy's warnings go to its
	 * stderr, the test's log).  splice-request/-response: bodies go
	 * through pipes (splice(2)) whenever haproxy can, which it does for
	 * the big body. */
	len = snprintf(conf, sizeof(conf),
		       "global\n"
		       "    nbthread 2\n"
		       "    lua-load %1$s\n"
		       "defaults\n"
		       "    mode http\n"
		       "    timeout connect 10s\n"
		       "    timeout client 30s\n"
		       "    timeout server 30s\n"
		       "    option http-keep-alive\n"
		       "    http-reuse always\n"
		       "    option splice-request\n"
		       "    option splice-response\n"
		       "frontend fe\n"
		       "    bind 127.0.0.1:%2$u\n"
		       "    http-request lua.hold if { path_beg /hold }\n"
		       "    use_backend sink if { path_beg /sink }\n"
		       "    use_backend raw if { path_beg /raw }\n"
		       "    default_backend tpc\n"
		       "backend tpc\n"
		       "    server tpc 127.0.0.1:%3$u\n"
		       "backend sink\n"
		       "    server sink 127.0.0.1:%4$u\n"
		       "backend raw\n"
		       "    server raw 127.0.0.1:%5$u\n",
		       path, h->n.srv.port, h->backend_port, h->sink_port, h->raw_port);
	ck_assert_int_lt(len, (int)sizeof(conf));
	nx_write_file(h->n.conf, conf, (size_t)len);
}

/* The backends, then haproxy in front of them (under the shim with an
 * event log if preload); returns once a request through it was
 * answered. */
static void
hx_start(struct hx_run *h, bool preload)
{
	char backend_path[4096], line[256], dir[64];
	char *backend_argv[] = {backend_path, NULL};
	/* -db: foreground, no fork.  setpriv --pdeathsig: should the test
	 * die before hx_stop(), haproxy is killed with it (the backends end
	 * at the end of their stdin). */
	char *argv[] = {SETPRIV, "--pdeathsig=KILL", HAPROXY, "-db",
			"-f",    h->n.conf,          NULL};
	char *resp;

	memset(h, 0, sizeof(*h));
	snprintf(dir, sizeof(dir), "/tmp/ctxshim-haproxy-XXXXXX");
	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	snprintf(h->n.dir, sizeof(h->n.dir), "%s", dir);
	snprintf(h->n.conf, sizeof(h->n.conf), "%s/haproxy.cfg", dir);
	snprintf(h->n.err, sizeof(h->n.err), "haproxy's stderr above");
	snprintf(h->fifo, sizeof(h->fifo), "%s/hold.fifo", dir);
	ck_assert_int_eq(mkfifo(h->fifo, 0600), 0);
	snprintf(backend_path, sizeof(backend_path), "%s",
		 test_helper_path("tpc-server"));
	test_child_start(&h->backend, backend_argv, NULL, false);
	test_child_expect(&h->backend, "READY ", line, sizeof(line), IT_TIMEOUT_MS);
	h->backend_port = (unsigned)strtoul(line + 6, NULL, 10);
	ck_assert_uint_gt(h->backend_port, 0);
	h->sink_port = it_sink_start(&h->sink);
	hx_raw_start(h);
	h->n.srv.port = nx_free_port();
	hx_write_conf(h);
	nx_launch(&h->n, argv, preload, "haproxy");
	resp = it_exchange(
		h->n.srv.port,
		"GET /ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", NULL);
	ck_assert_msg(strstr(resp, "\r\n\r\npath=/ready\n"), "first response: %s",
		      resp);
	free(resp);
}

/* SIGUSR1: haproxy's soft stop; it closes its idle connections and exits
 * 0.  Then the backends and the directory. */
static void
hx_stop(struct hx_run *h)
{
	int st;

	nx_halt(&h->n, SIGUSR1, "haproxy");
	st = test_child_finish(&h->backend, IT_TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "tpc-server exit status %#x", st);
	st = test_child_finish(&h->sink, IT_TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "http-sink exit status %#x", st);
	ck_assert_int_eq(shutdown(h->raw_lfd, SHUT_RDWR), 0);
	ck_assert_int_eq(pthread_join(h->raw_thread, NULL), 0);
	close(h->raw_lfd);
	nx_cleanup(&h->n);
}

/* ---- checks ---- */

static const char *
hx_trace(unsigned k, char out[33])
{
	return nx_trace(TRACE_PREFIX, k, out);
}

/* Check 1, a request haproxy itself works on: "GET /hold/1" stops in the
 * Lua action until the test writes a line into the FIFO. */
static void
hx_held_by_haproxy(struct hx_run *h, bool preload, char **acc, size_t *acc_len)
{
	char req[512], tp[128], trace[33];
	long deadline = nx_now_ms() + IT_TIMEOUT_MS;
	int fd = it_connect(h->n.srv.port), w, n;
	size_t got;
	char *resp;

	hx_trace(T_HOLD, trace);
	n = snprintf(req, sizeof(req),
		     "GET /hold/1 HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n",
		     nx_traceparent(TRACE_PREFIX, T_HOLD, tp));
	it_send(fd, req, (size_t)n);
	/* A writer's non-blocking open succeeds once the action has the
	 * FIFO open for reading (or is blocked opening it). */
	while ((w = open(h->fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)) < 0) {
		ck_assert_int_eq(errno, ENXIO);
		ck_assert_msg(nx_now_ms() < deadline, "the Lua action never ran");
		usleep(5000);
	}
	if (preload) {
		struct it_thread_ctx t;
		long tid = nx_wait_attach_tid(&h->n.srv, trace);
		char *json = it_ctxdump(h->n.srv.child.pid);

		ck_assert_msg(it_dump_count_trace(json, trace) == 1,
			      "not exactly one thread publishes the held request:\n"
			      "%.3000s",
			      json);
		ck_assert_msg(it_dump_thread(json, tid, &t) && t.has_ctx,
			      "thread %ld does not publish it:\n%.3000s", tid, json);
		ck_assert_str_eq(t.trace, trace);
		ck_assert_str_ne(t.span, PARENT_SPAN);
		ck_assert_str_ne(t.span, "0000000000000000");
		ck_assert_str_eq(t.parent, PARENT_SPAN);
		ck_assert_uint_eq(t.flags, 1);
		ck_assert_str_eq(t.method, "GET");
		ck_assert_str_eq(t.path, "/hold/1");
		free(json);
	}
	it_send_str(w, "go\n");
	close(w);
	resp = it_read_all(fd, &got);
	close(fd);
	nx_append(acc, acc_len, "== held by haproxy\n", resp, got);
	free(resp);
}

/* Checks 1 and 2, a request the backend holds: "GET /block/2" on a
 * connection kept alive. */
static void
hx_held_by_backend(struct hx_run *h, bool preload, char **acc, size_t *acc_len)
{
	char req[512], tp[128], trace[33], line[256], *resp;
	int fd = it_connect(h->n.srv.port), n;
	unsigned up0 = 0;
	long tid = -1;

	hx_trace(T_BLOCK, trace);
	n = snprintf(req, sizeof(req), "GET /block/2 HTTP/1.1\r\nHost: x\r\n%s\r\n",
		     nx_traceparent(TRACE_PREFIX, T_BLOCK, tp));
	it_send(fd, req, (size_t)n);
	test_child_expect(&h->backend, "BLOCK ", line, sizeof(line), IT_TIMEOUT_MS);
	ck_assert_ptr_nonnull(strstr(line, " /block/2"));
	if (preload) {
		char *log, *json;

		/* Attached at its head, by one thread, which let it go when
		 * it went back to its loop (the request was sent to the
		 * backend by then: the backend holds it). */
		tid = nx_wait_attach_tid(&h->n.srv, trace);
		it_wait_detached(&h->n.srv, tid, trace, "epoll_wait");
		log = it_events(&h->n.srv);
		ck_assert_msg(it_events_count(log, trace, "request") == 1 &&
				      it_events_spans(log, trace, NULL) == 1,
			      "not started once with one span:\n%.3000s", log);
		free(log);
		json = it_ctxdump(h->n.srv.child.pid);
		ck_assert_msg(it_dump_count_trace(json, trace) == 0,
			      "published while haproxy waits for the backend:\n%.3000s",
			      json);
		free(json);
		/* A read of the upstream before the answer (haproxy tries
		 * one after sending) may have published it for a moment
		 * already: only those after "go" count below. */
		log = it_events(&h->n.srv);
		up0 = it_events_count(log, trace, "upstream");
		free(log);
	}
	test_child_send(&h->backend, "go\n");
	resp = it_read_response(fd);
	ck_assert_msg(strstr(resp, "\r\n\r\npath=/block/2\n"), "response: %s", resp);
	nx_append(acc, acc_len, "== held by the backend\n", resp, strlen(resp));
	free(resp);
	/* Checks 1 and 2, with the connection still open (its close would
	 * clear the context anyway): the read of the backend's answer
	 * published the request again on the thread that then wrote the
	 * response (which kept it, or published it again after a wait in
	 * between), and its wait ended that. */
	if (preload) {
		char *log = it_events(&h->n.srv);
		long wtid = nx_last_tid(log, trace);

		ck_assert_msg(it_events_count(log, trace, "upstream") > up0,
			      "the backend's answer was read with no context:\n%.3000s",
			      log);
		ck_assert_msg(wtid == tid && it_events_count(log, trace, "write") <= 1,
			      "the response was not written on thread %ld:\n%.3000s",
			      tid, log);
		free(log);
		it_wait_detached(&h->n.srv, wtid, trace, NULL);
		it_assert_gone(&h->n.srv, wtid, trace);
	}
	close(fd);
}

/* Check 3: the client's traceparent and tracestate reach http-sink as
 * sent, once each. */
static void
hx_to_sink(struct hx_run *h, char **acc, size_t *acc_len)
{
	char req[512], tp[128], want[80], trace[33];
	struct it_sink_req r;
	const char *v;
	int n;

	n = snprintf(req, sizeof(req),
		     "GET /sink/x HTTP/1.1\r\nHost: x\r\n%stracestate: " TRACESTATE
		     "\r\nConnection: close\r\n\r\n",
		     nx_traceparent(TRACE_PREFIX, T_SINK, tp));
	nx_exchange_tcp(h->n.srv.port, "== sink\n", req, (size_t)n, 0, acc, acc_len);
	it_sink_read(&h->sink, &r);
	snprintf(want, sizeof(want), "00-%s-" PARENT_SPAN "-01",
		 hx_trace(T_SINK, trace));
	v = it_sink_field(&r, "traceparent");
	ck_assert_msg(v && strcmp(v, want) == 0, "the backend got traceparent %s",
		      v ? v : "(none)");
	v = it_sink_field(&r, "tracestate");
	ck_assert_msg(v && strcmp(v, TRACESTATE) == 0, "the backend got tracestate %s",
		      v ? v : "(none)");
}

/* Check 4's requests (and check 3's request-shaped response); the
 * responses, labelled. */
static void
hx_requests(unsigned port, char **acc, size_t *acc_len)
{
	char req[1024], tp[128], tp2[128], *big, *resp;
	size_t got, off;
	int fd, n;

	/* Two requests on one connection, each with its own trace. */
	fd = it_connect(port);
	n = snprintf(req, sizeof(req), "GET /ka/1 HTTP/1.1\r\nHost: x\r\n%s\r\n",
		     nx_traceparent(TRACE_PREFIX, T_KA1, tp));
	it_send(fd, req, (size_t)n);
	resp = it_read_response(fd);
	nx_append(acc, acc_len, "== keep-alive 1\n", resp, strlen(resp));
	free(resp);
	n = snprintf(req, sizeof(req),
		     "GET /ka/2 HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n",
		     nx_traceparent(TRACE_PREFIX, T_KA2, tp));
	it_send(fd, req, (size_t)n);
	resp = it_read_all(fd, &got);
	close(fd);
	nx_append(acc, acc_len, "== keep-alive 2\n", resp, got);
	free(resp);
	/* Two requests in one write. */
	n = snprintf(req, sizeof(req),
		     "GET /pipe/1 HTTP/1.1\r\nHost: x\r\n%s\r\n"
		     "GET /pipe/2 HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n",
		     nx_traceparent(TRACE_PREFIX, T_PIPE1, tp),
		     nx_traceparent(TRACE_PREFIX, T_PIPE2, tp2));
	nx_exchange_tcp(port, "== pipelined\n", req, (size_t)n, 0, acc, acc_len);
	n = snprintf(req, sizeof(req), "GET /old HTTP/1.0\r\n%s\r\n",
		     nx_traceparent(TRACE_PREFIX, T_HTTP10, tp));
	nx_exchange_tcp(port, "== http/1.0\n", req, (size_t)n, 0, acc, acc_len);
	/* No traceparent: a trace of its own (gone afterwards, see
	 * hx_run()). */
	n = snprintf(req, sizeof(req),
		     "GET /untraced HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	nx_exchange_tcp(port, "== untraced\n", req, (size_t)n, 0, acc, acc_len);
	/* haproxy's own 400s: bytes the shim gives up on (a TLS record),
	 * and a head the shim takes but haproxy rejects (a control byte in
	 * a header name). */
	nx_exchange_tcp(port, "== junk\n", "\x16\x03\x01\x00\x10junkjunkjunk\r\n\r\n",
			21, 0, acc, acc_len);
	n = snprintf(req, sizeof(req),
		     "GET /badhdr HTTP/1.1\r\nHost: x\r\n%sBad\x01Name: y\r\n\r\n",
		     nx_traceparent(TRACE_PREFIX, T_BADHDR, tp));
	nx_exchange_tcp(port, "== bad header\n", req, (size_t)n, 0, acc, acc_len);
	/* A body haproxy splices (it is bigger than its buffer), then a
	 * request on the same connection, in one go. */
	n = snprintf(req, sizeof(req),
		     "POST /big HTTP/1.1\r\nHost: x\r\n%sContent-Length: %u\r\n\r\n",
		     nx_traceparent(TRACE_PREFIX, T_BIG, tp), (unsigned)BIG_BODY);
	big = malloc((size_t)n + BIG_BODY + sizeof(req));
	ck_assert_ptr_nonnull(big);
	memcpy(big, req, (size_t)n);
	off = (size_t)n;
	for (got = 0; got < BIG_BODY; got++)
		big[off++] = (char)('a' + got % 26);
	off += (size_t)snprintf(
		big + off, sizeof(req),
		"GET /after-big HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n",
		nx_traceparent(TRACE_PREFIX, T_AFTER_BIG, tp));
	nx_exchange_tcp(port, "== big body\n", big, off, 0, acc, acc_len);
	free(big);
	/* Check 3: haproxy's 502 for the request-shaped response. */
	n = snprintf(req, sizeof(req),
		     "GET /raw/x HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n",
		     nx_traceparent(TRACE_PREFIX, T_RAW, tp));
	nx_exchange_tcp(port, "== request-shaped response\n", req, (size_t)n, 0, acc,
			acc_len);
}

/* tid is a thread of pid. */
static bool
hx_is_thread(pid_t pid, long tid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task/%ld", (int)pid, tid);
	return access(path, F_OK) == 0;
}

/* Each traced request of hx_requests() and hx_to_sink(): started exactly
 * once (at its head, or its turn when pipelined), with one span, on a
 * haproxy thread, and released by the thread that had it last (checks 2
 * and 4); polls the event log until then.  The backend's request-shaped
 * response appears nowhere (check 3). */
static void
hx_assert_traced(struct hx_run *h)
{
	static const unsigned traced[] = {T_KA1,    T_KA2,    T_PIPE1, T_PIPE2,
					  T_HTTP10, T_BADHDR, T_BIG,   T_AFTER_BIG,
					  T_SINK,   T_RAW};
	long deadline = nx_now_ms() + IT_TIMEOUT_MS;
	char *log = NULL;
	size_t i;

	for (i = 0; i < sizeof(traced) / sizeof(traced[0]);) {
		char trace[33];
		long tid, last;

		free(log);
		log = it_events(&h->n.srv);
		ck_assert_msg(
			!strstr(log, EVIL_TRACE),
			"the backend's response was taken for a request:\n%.3000s",
			log);
		hx_trace(traced[i], trace);
		tid = nx_attach_tid(log, trace);
		ck_assert_msg(tid > 0, "trace %u never attached:\n%.3000s", traced[i],
			      log);
		ck_assert_msg(hx_is_thread(h->n.srv.child.pid, tid),
			      "trace %u attached by %ld, not haproxy:\n%.3000s",
			      traced[i], tid, log);
		ck_assert_msg(
			it_events_count(log, trace, "request") +
					it_events_count(log, trace, "pipelined") ==
				1,
			"trace %u: not started exactly once:\n%.3000s", traced[i], log);
		ck_assert_msg(it_events_spans(log, trace, NULL) == 1,
			      "trace %u: more than one span:\n%.3000s", traced[i], log);
		/* Check 3: the request-shaped answer was read under the
		 * client's request (before haproxy's 502 answered it). */
		ck_assert_msg(traced[i] != T_RAW ||
				      it_events_count(log, trace, "upstream") >= 1 ||
				      !nx_released(log, trace, nx_last_tid(log, trace)),
			      "the request-shaped answer was read with no context:\n"
			      "%.3000s",
			      log);
		last = nx_last_tid(log, trace);
		if (nx_released(log, trace, last)) {
			i++;
			continue;
		}
		ck_assert_msg(nx_now_ms() < deadline,
			      "trace %u never released:\n%.3000s", traced[i], log);
		usleep(5000);
	}
	free(log);
}

/* Polls ctxdump until no thread of haproxy publishes trace (NULL: any
 * context). */
static void
hx_wait_unpublished(struct hx_run *h, const char *trace, const char *label)
{
	long deadline = nx_now_ms() + IT_TIMEOUT_MS;

	for (;;) {
		char *json = it_ctxdump(h->n.srv.child.pid);
		bool found = trace ? it_dump_count_trace(json, trace) > 0
				   : strstr(json, "\"trace_id\": \"") != NULL;

		if (!found) {
			free(json);
			return;
		}
		ck_assert_msg(nx_now_ms() < deadline,
			      "%s: still published after the response:\n%.3000s", label,
			      json);
		free(json);
		usleep(10000);
	}
}

static char *
hx_run(bool preload)
{
	struct hx_run h;
	char *acc = NULL;
	size_t acc_len = 0;
	unsigned k;

	hx_start(&h, preload);
	hx_held_by_haproxy(&h, preload, &acc, &acc_len);
	hx_held_by_backend(&h, preload, &acc, &acc_len);
	hx_requests(h.n.srv.port, &acc, &acc_len);
	hx_to_sink(&h, &acc, &acc_len);
	if (preload) {
		hx_assert_traced(&h);
		for (k = 1; k <= T_LAST; k++) {
			char trace[33], label[48];

			snprintf(label, sizeof(label), "trace %u", k);
			hx_wait_unpublished(&h, hx_trace(k, trace), label);
		}
		hx_wait_unpublished(&h, EVIL_TRACE, "the backend's request head");
		/* Nor any other context: the untraced request's own trace. */
		hx_wait_unpublished(&h, NULL, "any request");
	}
	hx_stop(&h);
	return acc;
}

START_TEST(test_haproxy_proxy)
{
	char *plain = hx_run(false), *shim = hx_run(true);

	nx_assert_same(plain, shim, NULL);
	ck_assert_ptr_nonnull(strstr(plain, "== keep-alive 1\nHTTP/1.1 200 OK\r\n"));
	ck_assert_ptr_nonnull(strstr(plain, "\r\n\r\npath=/after-big\n"));
	ck_assert_ptr_nonnull(strstr(plain, "== junk\nHTTP/1.1 400 Bad request\r\n"));
	ck_assert_ptr_nonnull(
		strstr(plain, "== bad header\nHTTP/1.1 400 Bad request\r\n"));
	ck_assert_ptr_nonnull(strstr(
		plain, "== request-shaped response\nHTTP/1.1 502 Bad Gateway\r\n"));
	free(plain);
	free(shim);
}
END_TEST

TEST_SUITE(haproxy_suite)
{
	Suite *s = suite_create("integration-haproxy");
	TCase *tc = tcase_create("haproxy");

	if (access(HAPROXY, X_OK) != 0)
		test_skip("%s is not installed (Debian: apt-get install haproxy)",
			  HAPROXY);
	if (access(SETPRIV, X_OK) != 0)
		test_skip("%s is not installed (Debian: util-linux)", SETPRIV);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_haproxy_proxy);
	suite_add_tcase(s, tc);
	return s;
}
