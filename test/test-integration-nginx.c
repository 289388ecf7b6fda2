/* SPDX-License-Identifier: Apache-2.0 */
/* nginx from Debian under the shim, socket level only (nginx's internals
 * cannot be interposed): with its own configuration in a temporary
 * directory (127.0.0.1, a free port, one worker, master process, no
 * daemon), the same requests must get the same bytes with and without the
 * shim (the Date header aside), and the event log must show each traced
 * request's trace-id attached on the worker, with one span, and detached
 * afterwards.
 *
 * As a reverse proxy (proxy_pass to tpc-server, started without the
 * shim): a request the backend holds is published by the worker from its
 * head until it goes back to epoll_wait() with the request sent on; when
 * the backend answers, the worker's read of the answer from the upstream
 * connection publishes it again (reason "upstream": hooks/hook-socket.c,
 * "Upstreams"), its response to the client keeps it, and its next wait
 * ends it. */
#include "test-common.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test-integration.h"
#include "test-nginx.h"
#pragma GCC diagnostic pop

#define NGINX        NX_NGINX
#define TRACE_PREFIX "4bf92f3577b34da6a3ce929d0e0e47"
#define N_TRACED     8

static void
ngx_setup(struct nx_server *n)
{
	char dir[64];

	memset(n, 0, sizeof(*n));
	snprintf(dir, sizeof(dir), "/tmp/ctxshim-nginx-XXXXXX");
	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	/* Workers run as nobody when the test runs as root. */
	ck_assert_int_eq(chmod(dir, 0755), 0);
	nx_setup(n, dir, "<html>ctxshim</html>\n", 200 * 1024);
}

/* The request set; traced requests use trace ids 1..N_TRACED. */
static char *
run_requests(unsigned port)
{
	char *acc = NULL, req[1024], tp[128];
	size_t acc_len = 0;
	int n;

	nx_traced_requests(port, TRACE_PREFIX, nx_exchange_tcp, "== 1-byte\n",
			   "== sendfile\n", &acc, &acc_len);
	n = snprintf(req, sizeof(req), "GET /index.html HTTP/1.0\r\n%s\r\n",
		     nx_traceparent(TRACE_PREFIX, 8, tp));
	nx_exchange_tcp(port, "== http/1.0\n", req, (size_t)n, 0, &acc, &acc_len);
	n = snprintf(req, sizeof(req),
		     "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	nx_exchange_tcp(port, "== untraced\n", req, (size_t)n, 0, &acc, &acc_len);
	nx_exchange_tcp(port, "== junk\n", "\x16\x03\x01\x00\x10junkjunkjunk\r\n\r\n",
			21, 0, &acc, &acc_len);
	nx_strip_date(acc);
	return acc;
}

START_TEST(test_nginx_identical_and_events)
{
	struct nx_server n;
	char *plain, *shim;

	ngx_setup(&n);
	nx_start(&n, false);
	plain = run_requests(n.srv.port);
	nx_stop(&n);

	nx_start(&n, true);
	shim = run_requests(n.srv.port);
	nx_assert_same(plain, shim, NULL);
	ck_assert_ptr_nonnull(strstr(plain, "HTTP/1.1 200 OK"));
	ck_assert_ptr_nonnull(strstr(plain, "HTTP/1.1 404 Not Found"));
	ck_assert_ptr_nonnull(strstr(plain, "HTTP/1.1 405 Not Allowed"));
	ck_assert_ptr_nonnull(strstr(plain, "HTTP/1.1 400 Bad Request"));

	/* Each traced request: attached on the worker (not the master), one
	 * span, and detached once the worker went back to its loop. */
	nx_assert_traced(&n, TRACE_PREFIX, N_TRACED, "detached");
	nx_stop(&n);
	free(plain);
	free(shim);
	nx_cleanup(&n);
}
END_TEST

START_TEST(test_nginx_proxy_pass)
{
	struct nx_server n;
	struct test_child backend;
	char backend_path[4096], line[256], extra[256], req[512], tp[128], trace[33];
	char *backend_argv[] = {backend_path, NULL};
	char *argv[] = {NGINX, "-p", n.dir, "-c", n.conf, "-e", n.err, NULL};
	char *log, *resp;
	unsigned backend_port, k, up0;
	long tid;
	int fd, len;

	ngx_setup(&n);
	snprintf(backend_path, sizeof(backend_path), "%s",
		 test_helper_path("tpc-server"));
	test_child_start(&backend, backend_argv, NULL, false);
	test_child_expect(&backend, "READY ", line, sizeof(line), IT_TIMEOUT_MS);
	backend_port = (unsigned)strtoul(line + 6, NULL, 10);
	ck_assert_uint_gt(backend_port, 0);
	len = snprintf(extra, sizeof(extra),
		       "    location / {\n"
		       "      proxy_pass http://127.0.0.1:%u;\n"
		       "    }\n",
		       backend_port);
	ck_assert_int_lt(len, (int)sizeof(extra));
	n.srv.port = nx_free_port();
	nx_write_conf(&n, n.srv.port, extra);
	nx_launch(&n, argv, true, "nginx");

	/* Two requests the backend holds, one after the other. */
	for (k = 1; k <= 2; k++) {
		nx_trace(TRACE_PREFIX, 20 + k, trace);
		fd = it_connect(n.srv.port);
		len = snprintf(req, sizeof(req),
			       "GET /block/%u HTTP/1.1\r\nHost: x\r\n%s\r\n", k,
			       nx_traceparent(TRACE_PREFIX, 20 + k, tp));
		it_send(fd, req, (size_t)len);
		test_child_expect(&backend, "BLOCK ", line, sizeof(line),
				  IT_TIMEOUT_MS);
		ck_assert_ptr_nonnull(strstr(line, " /block/"));
		/* Attached at its head, let go by the worker's wait once the
		 * request went out. */
		tid = nx_wait_attach_tid(&n.srv, trace);
		it_wait_detached(&n.srv, tid, trace, "epoll_wait");
		log = it_events(&n.srv);
		up0 = it_events_count(log, trace, "upstream");
		free(log);
		test_child_send(&backend, "go\n");
		resp = it_read_response(fd);
		snprintf(req, sizeof(req), "\r\n\r\npath=/block/%u\n", k);
		ck_assert_msg(strstr(resp, req), "response: %s", resp);
		free(resp);
		/* The answer's read published it again, on the worker, which
		 * wrote the response under it and let it go in its wait. */
		log = it_events(&n.srv);
		ck_assert_msg(it_events_count(log, trace, "upstream") > up0,
			      "the backend's answer was read with no context:\n%.3000s",
			      log);
		ck_assert_msg(it_events_count(log, trace, "request") == 1 &&
				      it_events_spans(log, trace, NULL) == 1,
			      "not started once with one span:\n%.3000s", log);
		ck_assert_msg(nx_last_tid(log, trace) == tid,
			      "not on the worker %ld:\n%.3000s", tid, log);
		free(log);
		it_wait_detached(&n.srv, tid, trace, NULL);
		it_assert_gone(&n.srv, tid, trace);
		close(fd);
	}
	nx_stop(&n);
	ck_assert_int_eq(test_child_finish(&backend, IT_TIMEOUT_MS), 0);
	nx_cleanup(&n);
}
END_TEST

TEST_SUITE(nginx_suite)
{
	Suite *s = suite_create("integration-nginx");
	TCase *tc = tcase_create("nginx");

	if (access(NGINX, X_OK) != 0)
		test_skip("%s is not installed (Debian: apt-get install nginx-light)",
			  NGINX);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_nginx_identical_and_events);
	tcase_add_test(tc, test_nginx_proxy_pass);
	suite_add_tcase(s, tc);
	return s;
}
