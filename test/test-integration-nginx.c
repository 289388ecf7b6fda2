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
 * ends it.
 *
 * Through a binary upgrade (USR2, then QUIT to the old master), with the
 * env directives doc/deployment.md gives for it: the new master and its
 * worker keep the shim and its settings (service name, event log), and the
 * new worker publishes its requests. */
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

/* The block of doc/deployment.md after "<!-- test: nginx-env -->": the
 * env directives a binary upgrade needs (malloc'd). */
static char *
ngx_doc_env(void)
{
	static const char mark[] = "<!-- test: nginx-env -->\n```nginx\n";
	char dir[512], *doc, *from, *end, *out;

	snprintf(dir, sizeof(dir), "%s/doc", test_env_path("CTXSHIM_SRCDIR"));
	doc = it_read_file(dir, "deployment.md");
	from = strstr(doc, mark);
	ck_assert_msg(from != NULL, "%s/deployment.md has no nginx-env block", dir);
	from += strlen(mark);
	end = strstr(from, "```");
	ck_assert_ptr_nonnull(end);
	out = strndup(from, (size_t)(end - from));
	ck_assert_ptr_nonnull(out);
	free(doc);
	return out;
}

/* The pid in dir/nginx.pid, 0 if it cannot be read. */
static pid_t
ngx_pidfile(const char *dir)
{
	char path[160], buf[32];

	snprintf(path, sizeof(path), "%s/nginx.pid", dir);
	if (test_read_small(path, buf, sizeof(buf)) <= 0)
		return 0;
	return (pid_t)atol(buf);
}

static bool
ngx_has_shim(pid_t pid)
{
	char dir[32];
	char *maps;
	bool has;

	snprintf(dir, sizeof(dir), "/proc/%d", (int)pid);
	maps = it_read_file(dir, "maps");
	has = strstr(maps, "libctxshim") != NULL;
	free(maps);
	return has;
}

/* nginx executes the new master of a binary upgrade with TZ and the
 * variables of its env directives only (ngx_exec_new_binary()). */
START_TEST(test_nginx_binary_upgrade)
{
	struct nx_server n;
	char *env_lines, *conf, *both, *json, *log = NULL, req[512], tp[128], trace[33];
	char evenv[96], *daemon_off;
	long deadline = nx_now_ms() + IT_TIMEOUT_MS;
	pid_t old, master = 0, worker = 0;
	int len, st, fd;

	ngx_setup(&n);
	n.srv.port = nx_free_port();
	nx_write_conf(&n, n.srv.port, NULL);
	env_lines = ngx_doc_env();
	conf = it_read_file(n.dir, "nginx.conf");
	daemon_off = strstr(conf, "daemon off;");
	ck_assert_ptr_nonnull(daemon_off);
	memcpy(daemon_off, "daemon on; ", 11);
	/* The event log is one of the settings the doc's text asks for. */
	len = asprintf(&both, "%senv CTXSHIM_EVENTS;\n%s", env_lines, conf);
	ck_assert_int_gt(len, 0);
	nx_write_file(n.conf, both, (size_t)len);
	ck_assert_int_eq(setenv("OTEL_SERVICE_NAME", "nginx-upgrade", 1), 0);
	snprintf(n.srv.events, sizeof(n.srv.events), "/tmp/ctxshim-it-events-XXXXXX");
	fd = test_mkstemp(n.srv.events);
	ck_assert_int_ge(fd, 0);
	close(fd);
	/* Written by a worker that may run as nobody. */
	ck_assert_int_eq(chmod(n.srv.events, 0666), 0);
	n.srv.events_fd = -1;
	snprintf(evenv, sizeof(evenv), "CTXSHIM_EVENTS=%s", n.srv.events);
	{
		char *argv[] = {NGINX, "-p", n.dir, "-c", n.conf, "-e", n.err, NULL};
		char *env[] = {evenv, NULL};

		/* A master whose parent is still the process that started it
		 * ignores USR2 (ngx_master_process_cycle(): getppid() ==
		 * ngx_parent), as a "daemon off" one under the test would:
		 * this one daemonizes, as under the init script or systemd's
		 * Type=forking.  test-main.c's reaper kills it if a check
		 * fails. */
		test_child_start(&n.srv.child, argv, env, true);
		st = test_child_finish(&n.srv.child, IT_TIMEOUT_MS);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			      "nginx status %#x; see %s", st, n.err);
	}
	while ((old = ngx_pidfile(n.dir)) == 0 || !it_port_listening(n.srv.port)) {
		ck_assert_msg(nx_now_ms() < deadline, "nginx did not start; see %s",
			      n.err);
		usleep(5000);
	}

	/* A signal that comes before the master's loop waits for signals is
	 * acted on only at the next one (its flag is tested after
	 * sigsuspend() returns): seen here, the upgrade never came.  So USR2
	 * is sent again until a new master shows; one that comes while an
	 * upgrade is under way is ignored by nginx. */
	for (int i = 0; (master = ngx_pidfile(n.dir)) == old || master == 0 ||
			!(worker = it_child(master, 0));
	     i++) {
		ck_assert_msg(nx_now_ms() < deadline, "no new master or worker; see %s",
			      n.err);
		if (i % 40 == 0)
			ck_assert_int_eq(kill(old, SIGUSR2), 0);
		usleep(5000);
	}
	/* Debian's "service nginx upgrade": the old master quits, its worker
	 * with it. */
	ck_assert_int_eq(kill(old, SIGQUIT), 0);
	while (test_proc_state(old) != 'Z' && test_proc_state(old) != '?') {
		ck_assert_msg(nx_now_ms() < deadline, "old master did not exit");
		usleep(5000);
	}

	ck_assert_msg(ngx_has_shim(master), "new master %d without the shim",
		      (int)master);
	ck_assert_msg(ngx_has_shim(worker), "new worker %d without the shim",
		      (int)worker);
	json = it_ctxdump(worker);
	ck_assert_msg(strstr(json, "\"nginx-upgrade\""),
		      "new worker lost OTEL_SERVICE_NAME:\n%s", json);
	free(json);

	/* The new worker publishes, into the same event log. */
	len = snprintf(req, sizeof(req),
		       "GET / HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n",
		       nx_traceparent(TRACE_PREFIX, 9, tp));
	free(it_exchange(n.srv.port, req, NULL));
	nx_trace(TRACE_PREFIX, 9, trace);
	for (;;) {
		free(log);
		log = it_events(&n.srv);
		if (nx_attach_tid(log, trace) > 0)
			break;
		ck_assert_msg(nx_now_ms() < deadline, "new worker never attached:\n%s",
			      log);
		usleep(5000);
	}
	ck_assert_int_eq(nx_attach_tid(log, trace), worker);

	ck_assert_int_eq(kill(master, SIGQUIT), 0);
	while (test_proc_state(master) != 'Z' && test_proc_state(master) != '?') {
		ck_assert_msg(nx_now_ms() < deadline, "new master did not exit");
		usleep(5000);
	}
	free(log);
	free(both);
	free(conf);
	free(env_lines);
	unsetenv("OTEL_SERVICE_NAME"); /* the next test's, with CK_FORK=no */
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
	tcase_add_test(tc, test_nginx_binary_upgrade);
	suite_add_tcase(s, tc);
	return s;
}
