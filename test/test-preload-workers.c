/* SPDX-License-Identifier: Apache-2.0 */
/* Worker pools that hand connections between threads (helpers/pool-server.c,
 * shaped like Apache httpd's event MPM): after its response a worker gives
 * the connection back to a listener thread and waits on a condition
 * variable, with no read, poll or close of the connection on its own
 * thread.  It must stop showing the request then (hooks/hook-pthread.c,
 * hook_socket_thread_wait()), and keep it through a wait before the
 * answer.  Observed with the event log and ctxdump -j. */
#include "test-common.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test-integration.h"
#pragma GCC diagnostic pop

#include <sys/syscall.h>

#define T1  "0af7651916cd43dd8448eb211c80319c"
#define T2  "4bf92f3577b34da6a3ce929d0e0e4736"
#define TP1 "traceparent: 00-" T1 "-b7ad6b7169203331-01\r\n"
#define TP2 "traceparent: 00-" T2 "-00f067aa0ba902b7-01\r\n"

/* How the workers wait for their next job (pool-server --wait). */
static const char *const waits[] = {"cond", "cnd", "sem"};

static void
pool_start_waiting(struct it_server *s, const char *wait)
{
	char *argv[] = {(char *)test_helper_path("pool-server"), "--wait", (char *)wait,
			NULL};

	it_server_start(s, argv, true, NULL);
}

static void
pool_start(struct it_server *s)
{
	pool_start_waiting(s, "cond");
}

/* Reads lines until "<word> <tid> ..." and returns the tid. */
static long
expect_tid(struct it_server *s, const char *word, const char *rest)
{
	char line[1200], *p;
	long tid;

	test_child_expect(&s->child, word, line, sizeof(line), IT_TIMEOUT_MS);
	tid = strtol(line + strlen(word), &p, 10);
	ck_assert_int_gt(tid, 0);
	if (rest)
		ck_assert_msg(strcmp(p + 1, rest) == 0, "%s, expected %s", line, rest);
	return tid;
}

/* Each request of a keep-alive connection: published by the worker that
 * reads it, gone once that worker waits for its next job, whichever wait
 * it is (pthread_cond_wait, C11's cnd_wait, sem_wait). */
START_TEST(test_worker_released_after_response)
{
	struct it_server s;
	long tid;
	int fd;

	pool_start_waiting(&s, waits[_i]);
	fd = it_connect(s.port);
	it_send_str(fd, "GET /a HTTP/1.1\r\nHost: x\r\n" TP1 "\r\n");
	it_assert_path_body(it_read_response(fd), "/a");
	tid = expect_tid(&s, "DONE ", "/a");
	ck_assert_int_eq(expect_tid(&s, "PARKED ", NULL), tid);
	it_wait_detached(&s, tid, T1, "pool-wait");
	it_assert_gone(&s, tid, T1);

	it_send_str(fd, "GET /b HTTP/1.1\r\nHost: x\r\n" TP2 "\r\n");
	it_assert_path_body(it_read_response(fd), "/b");
	tid = expect_tid(&s, "DONE ", "/b");
	ck_assert_int_eq(expect_tid(&s, "PARKED ", NULL), tid);
	it_wait_detached(&s, tid, T2, "pool-wait");
	it_assert_gone(&s, tid, T2);
	close(fd);
	(void)expect_tid(&s, "CLOSED ", NULL);
	it_server_stop(&s);
}
END_TEST

/* A handler that waits on a condition variable before it answers keeps
 * its request's context through the wait. */
START_TEST(test_wait_before_answer_keeps_context)
{
	struct it_server s;
	struct it_thread_ctx t;
	char *json;
	long tid;
	int fd;

	pool_start(&s);
	fd = it_connect(s.port);
	it_send_str(fd, "GET /block/x HTTP/1.1\r\nHost: x\r\n" TP1 "\r\n");
	tid = expect_tid(&s, "BLOCK ", "/block/x");
	/* in the condition variable's futex(2), past the hook */
	test_wait_syscall(s.child.pid, (pid_t)tid, SYS_futex, IT_TIMEOUT_MS);
	json = it_ctxdump(s.child.pid);
	ck_assert_msg(it_dump_thread(json, tid, &t) && t.has_ctx,
		      "thread %ld lost its context while waiting:\n%s", tid, json);
	ck_assert_str_eq(t.trace, T1);
	ck_assert_str_eq(t.path, "/block/x");
	free(json);

	test_child_send(&s.child, "go\n");
	it_assert_path_body(it_read_response(fd), "/block/x");
	ck_assert_int_eq(expect_tid(&s, "DONE ", "/block/x"), tid);
	ck_assert_int_eq(expect_tid(&s, "PARKED ", NULL), tid);
	it_wait_detached(&s, tid, T1, "pool-wait");
	it_assert_gone(&s, tid, T1);
	close(fd);
	it_server_stop(&s);
}
END_TEST

/* A handler that has written its response's head and then waits for a
 * lock handed between threads, 5 ms at a time (a short timed wait: how
 * CPython's threads wait for the GIL, as a threading server's handlers do
 * after each write), is not back in its pool: it keeps its request's
 * context while it works on the rest (it once lost it until its next
 * write).  _i 1: the condition variable is on CLOCK_MONOTONIC, as
 * CPython's own, which the wait hook cannot ask (its deadline is checked
 * on either clock). */
START_TEST(test_short_wait_after_head_keeps_context)
{
	static const char *const paths[] = {"/gil/x", "/gilmono/x"};
	const char *path = paths[_i];
	struct it_server s;
	struct it_thread_ctx t;
	char *json, req[256];
	long tid;
	int fd;

	pool_start(&s);
	fd = it_connect(s.port);
	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\n" TP1 "\r\n", path);
	it_send_str(fd, req);
	tid = expect_tid(&s, "GIL ", path);
	json = it_ctxdump(s.child.pid);
	ck_assert_msg(it_dump_thread(json, tid, &t) && t.has_ctx,
		      "thread %ld lost its context after short waits:\n%s", tid, json);
	ck_assert_str_eq(t.trace, T1);
	ck_assert_str_eq(t.path, path);
	free(json);

	test_child_send(&s.child, "go\n");
	it_assert_path_body(it_read_response(fd), path);
	ck_assert_int_eq(expect_tid(&s, "DONE ", path), tid);
	ck_assert_int_eq(expect_tid(&s, "PARKED ", NULL), tid);
	it_wait_detached(&s, tid, T1, "pool-wait");
	it_assert_gone(&s, tid, T1);
	close(fd);
	it_server_stop(&s);
}
END_TEST

/* Two pipelined requests: one job, answered in order by one worker, each
 * with its own context; nothing left once the worker waits. */
START_TEST(test_pipelined_in_one_job)
{
	struct it_server s;
	char *resp, *p1, *p2;
	size_t len, cap;
	long tid;
	int fd;

	pool_start(&s);
	fd = it_connect(s.port);
	it_send_str(fd, "GET /p1 HTTP/1.1\r\nHost: x\r\n" TP1 "\r\n"
			"GET /p2 HTTP/1.1\r\nHost: x\r\n" TP2 "\r\n");
	tid = expect_tid(&s, "DONE ", "/p1");
	ck_assert_int_eq(expect_tid(&s, "DONE ", "/p2"), tid);
	ck_assert_int_eq(expect_tid(&s, "PARKED ", NULL), tid);
	/* Both responses (the connection stays open: a close would reach the
	 * worker before it waits, and end the request another way). */
	resp = NULL;
	len = cap = 0;
	while (!(p2 = resp ? memmem(resp, len, "path=/p2\n", 9) : NULL))
		ck_assert_msg(it_read_some(fd, &resp, &len, &cap), "closed early");
	p1 = memmem(resp, len, "path=/p1\n", 9);
	ck_assert_msg(p1 && p1 < p2, "unexpected responses: %s", resp);
	free(resp);
	it_wait_detached(&s, tid, T2, "pool-wait");
	{
		char *log = it_events(&s);

		ck_assert_msg(it_events_count(log, T1, "request") == 1 &&
				      it_events_spans(log, T1, NULL) == 1 &&
				      it_events_spans(log, T2, NULL) == 1,
			      "pipelined requests not published once each:\n%s", log);
		free(log);
	}
	it_assert_gone(&s, tid, T1);
	it_assert_gone(&s, tid, T2);
	close(fd);
	it_server_stop(&s);
}
END_TEST

/* The request "/block/b" (just sent) runs as a job on worker, which must
 * show no context while it blocks there: not the earlier request it
 * inherited (name: the server, for the message). */
static void
assert_next_job_clean(struct it_server *s, long worker, const char *name)
{
	struct it_thread_ctx t;
	char *json;

	ck_assert_int_eq(expect_tid(s, "JOB ", "/block/b"), worker);
	ck_assert_int_eq(expect_tid(s, "BLOCK ", "/block/b"), worker);
	test_wait_syscall(s->child.pid, (pid_t)worker, SYS_futex, IT_TIMEOUT_MS);
	json = it_ctxdump(s->child.pid);
	ck_assert_msg(it_dump_thread(json, worker, &t), "%s: no worker %ld:\n%.3000s",
		      name, worker, json);
	ck_assert_msg(!t.has_ctx,
		      "%s: worker %ld still shows a context (%s) in the next "
		      "request's job:\n%.3000s",
		      name, worker, t.trace, json);
	free(json);
}

/* Python's ThreadingHTTPServer with a ThreadPoolExecutor that runs each
 * request's work (its first worker starts on the first submit, from that
 * request's thread): "JOB <tid> <path>" for each job, and a "/block" job
 * waits on a semaphore that a line on stdin releases. */
static const char py_pool[] =
	"import os, sys, threading\n"
	"import concurrent.futures as cf\n"
	"from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler\n"
	"pool = cf.ThreadPoolExecutor(max_workers=1)\n"
	"go = threading.Semaphore(0)\n"
	"def job(path):\n"
	"    tid = threading.get_native_id()\n"
	"    print('JOB %d %s' % (tid, path), flush=True)\n"
	"    if path.startswith('/block'):\n"
	"        print('BLOCK %d %s' % (tid, path), flush=True)\n"
	"        go.acquire()\n"
	"    return path\n"
	"class H(BaseHTTPRequestHandler):\n"
	"    protocol_version = 'HTTP/1.1'\n"
	"    def do_GET(self):\n"
	"        path = pool.submit(job, self.path).result()\n"
	"        body = ('path=%s\\n' % path).encode()\n"
	"        self.send_response(200)\n"
	"        self.send_header('Content-Length', str(len(body)))\n"
	"        self.end_headers()\n"
	"        self.wfile.write(body)\n"
	"    def log_message(self, *a):\n"
	"        pass\n"
	"def control():\n"
	"    for line in sys.stdin:\n"
	"        go.release()\n"
	"    os._exit(0)\n"
	"srv = ThreadingHTTPServer(('127.0.0.1', 0), H)\n"
	"threading.Thread(target=control, daemon=True).start()\n"
	"print('READY %d' % srv.server_address[1], flush=True)\n"
	"srv.serve_forever()\n";

/* The servers whose pool a request starts, each with the next request on
 * the same connection and on another one. */
static const struct {
	const char *name;
	bool python;
	bool same_conn;
	bool co;
} lazy_pools[] = {
	{"tpc-server --pool, same connection", false, true, false},
	{"tpc-server --pool, another connection", false, false, false},
	{"python3 ThreadPoolExecutor, same connection", true, true, false},
	{"python3 ThreadPoolExecutor, another connection", true, false, false},
	/* Its jobs in a coroutine made with the first request's context: a
	 * switch to it shows that request again after the worker cleared
	 * it, and the worker once kept it then. */
	{"tpc-server --pool --co, same connection", false, true, true},
	{"tpc-server --pool --co, another connection", false, false, true},
};

/* A pool that a request starts: the worker inherits that request's
 * context and keeps it while it works for it, and must not show it any
 * more once the request is answered -- here while it works on the next
 * request's job.  It once kept it for good: a profiler charged every later
 * job to the first request. */
START_TEST(test_pool_started_by_request)
{
	char *tpc[] = {(char *)test_helper_path("tpc-server"), "--pool",
		       lazy_pools[_i].co ? "--co" : NULL, NULL};
	char *py[] = {"/usr/bin/python3", "-c", (char *)py_pool, NULL};
	struct it_server s;
	struct it_thread_ctx t;
	char *json;
	long worker;
	int fd, fd2;

	it_server_start(&s, lazy_pools[_i].python ? py : tpc, true, NULL);
	fd = it_connect(s.port);
	it_send_str(fd, "GET /block/a HTTP/1.1\r\nHost: x\r\n" TP1 "\r\n");
	worker = expect_tid(&s, "JOB ", "/block/a");
	ck_assert_int_eq(expect_tid(&s, "BLOCK ", "/block/a"), worker);
	test_wait_syscall(s.child.pid, (pid_t)worker, SYS_futex, IT_TIMEOUT_MS);
	json = it_ctxdump(s.child.pid);
	ck_assert_msg(it_dump_thread(json, worker, &t) && t.has_ctx,
		      "%s: worker %ld did not inherit its request:\n%.3000s",
		      lazy_pools[_i].name, worker, json);
	ck_assert_str_eq(t.trace, T1);
	ck_assert_str_eq(t.path, "/block/a");
	free(json);
	test_child_send(&s.child, "go\n");
	it_assert_path_body(it_read_response(fd), "/block/a");

	fd2 = lazy_pools[_i].same_conn ? fd : it_connect(s.port);
	it_send_str(fd2, "GET /block/b HTTP/1.1\r\nHost: x\r\n" TP2 "\r\n");
	assert_next_job_clean(&s, worker, lazy_pools[_i].name);
	it_wait_detached(&s, worker, T1, "inherited-answered");
	test_child_send(&s.child, "go\n");
	it_assert_path_body(it_read_response(fd2), "/block/b");
	if (fd2 != fd)
		close(fd2);
	close(fd);
	it_server_stop(&s);
}
END_TEST

/* A pool that a request starts, whose job calls an upstream with libcurl
 * (tpc-curl-server --pool --call) and waits while the client span is
 * shown, as Python code in a pycurl callback waits for the GIL: once the
 * request is answered the worker must not show it, in the next request's
 * job.  The wait under the client span once made the worker forget the
 * request it inherited; the end of the call restored that request's
 * context, and the worker kept it for good. */
START_TEST(test_pool_job_calls_upstream)
{
	char url[64];
	char *argv[] = {(char *)test_helper_path("tpc-curl-server"), "--pool", "--call",
			url, NULL};
	struct test_child sink;
	struct it_sink_req r;
	struct it_server s;
	char line[256];
	long worker;
	int fd;

	snprintf(url, sizeof(url), "http://127.0.0.1:%u/up", it_sink_start(&sink));
	it_server_start(&s, argv, true, NULL);
	fd = it_connect(s.port);
	it_send_str(fd, "GET /call/a HTTP/1.1\r\nHost: x\r\n" TP1 "\r\n");
	worker = expect_tid(&s, "JOB ", "/call/a");
	test_child_expect(&s.child, "CALLED ", line, sizeof(line), IT_TIMEOUT_MS);
	ck_assert_msg(strstr(line, " 200"), "upstream call failed: %s", line);
	it_sink_read(&sink, &r);
	it_assert_path_body(it_read_response(fd), "/call/a");

	it_send_str(fd, "GET /block/b HTTP/1.1\r\nHost: x\r\n" TP2 "\r\n");
	assert_next_job_clean(&s, worker, "tpc-curl-server --pool");
	test_child_send(&s.child, "go\n");
	it_assert_path_body(it_read_response(fd), "/block/b");
	close(fd);
	it_server_stop(&s);
	it_sink_finish(&sink);
}
END_TEST

TEST_SUITE(workers_suite)
{
	Suite *s = suite_create("preload-workers");
	TCase *tc = tcase_create("pool-server");

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_worker_released_after_response, 0,
			    (int)(sizeof(waits) / sizeof(waits[0])));
	tcase_add_test(tc, test_wait_before_answer_keeps_context);
	tcase_add_loop_test(tc, test_short_wait_after_head_keeps_context, 0, 2);
	tcase_add_test(tc, test_pipelined_in_one_job);
	suite_add_tcase(s, tc);
	tc = tcase_create("lazy-pool");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_pool_started_by_request, 0,
			    (int)(sizeof(lazy_pools) / sizeof(lazy_pools[0])));
	/* tpc-curl-server is built only with libcurl's -dev package. */
	if (access(test_helper_path("tpc-curl-server"), X_OK) == 0)
		tcase_add_test(tc, test_pool_job_calls_upstream);
	suite_add_tcase(s, tc);
	return s;
}
