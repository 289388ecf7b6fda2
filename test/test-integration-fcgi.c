/* SPDX-License-Identifier: Apache-2.0 */
/* libfcgi (FastCGI) applications behind nginx from Debian
 * (hooks/hook-fcgi.c).  nginx runs without the shim, with its own
 * configuration in a temporary directory and fastcgi_pass to the
 * application on 127.0.0.1; the application runs under the shim:
 *
 * 1. fcgi-app (test/helpers/fcgi-app.c) in libfcgi's threaded API
 *    (FCGX_Accept_r() on two threads) and in its stdio API
 *    (FCGI_Accept()): while a traced request blocks inside the
 *    application, ctxdump shows exactly one thread with its trace (a span
 *    of its own, the client's parent kept, method, path, x-request-id),
 *    and after the response no thread publishes anything; two requests
 *    blocked at once are each on their own thread; an untraced request
 *    gets a new trace.
 * 2. The responses are byte-identical with and without the shim (the
 *    Date header aside).
 * 3. fcgiwrap (Debian) running a CGI shell script: the script publishes
 *    the request it is handed (the CGI carrier, preload/shim.c), and
 *    fcgiwrap's own thread the same request with another span while it
 *    waits for the script; with CTXSHIM_EXEC_TRACEPARENT=1 in fcgiwrap's
 *    environment, the script's span is a child of fcgiwrap's. */
#include "test-common.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test-integration.h"
#include "test-nginx.h"
#include "test-integration-block.h"
#pragma GCC diagnostic pop

#include <sys/stat.h>

#define FCGIWRAP "/usr/sbin/fcgiwrap"
#define ENV      "/usr/bin/env"

/* The nginx front of one test: the directory, and where / goes. */
static void
fc_setup(struct nx_server *n)
{
	char dir[64];

	memset(n, 0, sizeof(*n));
	snprintf(dir, sizeof(dir), "/tmp/ctxshim-fcgi-XXXXXX");
	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	/* Workers run as nobody when the test runs as root. */
	ck_assert_int_eq(chmod(dir, 0755), 0);
	nx_setup(n, dir, "<html>ctxshim</html>\n", 16);
}

/* nginx on a new free port, every request passed to the FastCGI server
 * on 127.0.0.1:upstream with the usual CGI parameters plus extra
 * (fastcgi_param lines). */
static void
fc_nginx_start(struct nx_server *n, unsigned upstream, const char *extra)
{
	char *argv[] = {NX_NGINX, "-p", n->dir, "-c", n->conf, "-e", n->err, NULL};
	char loc[3072];
	int len;

	n->srv.port = nx_free_port();
	len = snprintf(loc, sizeof(loc),
		       "    location / {\n"
		       "      fastcgi_pass 127.0.0.1:%1$u;\n"
		       "      fastcgi_param GATEWAY_INTERFACE CGI/1.1;\n"
		       "      fastcgi_param SERVER_PROTOCOL $server_protocol;\n"
		       "      fastcgi_param REQUEST_METHOD $request_method;\n"
		       "      fastcgi_param REQUEST_URI $request_uri;\n"
		       "      fastcgi_param QUERY_STRING $query_string;\n"
		       "      fastcgi_param SCRIPT_NAME $fastcgi_script_name;\n"
		       "      fastcgi_param SCRIPT_FILENAME "
		       "$document_root$fastcgi_script_name;\n"
		       "      fastcgi_param DOCUMENT_ROOT $document_root;\n"
		       "      fastcgi_param CONTENT_TYPE $content_type;\n"
		       "      fastcgi_param CONTENT_LENGTH $content_length;\n"
		       "%2$s"
		       "    }\n",
		       upstream, extra ? extra : "");
	ck_assert_int_lt(len, (int)sizeof(loc));
	nx_write_conf(n, n->srv.port, loc);
	nx_launch(n, argv, false, "nginx");
}

/* How many threads publish a context. */
static unsigned
fc_contexts(const char *json)
{
	const char *p = json;
	unsigned n = 0;

	while ((p = strstr(p, "\"trace_id\": \""))) {
		n++;
		p++;
	}
	return n;
}

/* Send req to nginx; the application's handler blocks in it (its "IN"
 * line): returns the connection, the handler's thread in *tid. */
static int
fc_send_blocking(struct it_server *app,
		 const struct nx_server *n,
		 const char *req,
		 long *tid)
{
	return it_send_blocking(app, it_connect(n->srv.port), req, tid);
}

/* The response through nginx has body (nginx adds chunked framing to a
 * FastCGI response of unknown length: compared as a substring). */
static void
fc_assert_body(const char *resp, const char *body)
{
	ck_assert_msg(strncmp(resp, "HTTP/1.1 200 OK\r\n", 17) == 0, "response: %s",
		      resp);
	ck_assert_msg(strstr(resp, body) != NULL, "response: %s\nwanted: %s", resp,
		      body);
}

/* Nothing published by any thread of the application. */
static void
fc_assert_idle(const struct it_server *app)
{
	char *json = it_ctxdump(app->child.pid);

	ck_assert_msg(fc_contexts(json) == 0,
		      "a thread still publishes a context after the response:\n%s",
		      json);
	free(json);
}

/* A third trace, for the second traced request of a run. */
#define TP3_TRACE "5bf92f3577b34da6a3ce929d0e0e4737"

/* A traced request (traceparent "00-<trace>-" TP_PARENT "-01") blocked in
 * the application: exactly one thread, the handler's, with that trace
 * and nothing else published; after the response, nothing at all. */
static void
fc_check_traced(struct it_server *app, const struct nx_server *n, const char *trace)
{
	struct it_thread_ctx t;
	char req[512], *json, *log, *resp, line[512];
	long tid;
	int fd;

	snprintf(req, sizeof(req),
		 "GET /block/orders?x=1 HTTP/1.1\r\nHost: t\r\n"
		 "traceparent: 00-%s-" TP_PARENT "-01\r\nx-request-id: req-1\r\n"
		 "Connection: close\r\n\r\n",
		 trace);
	fd = fc_send_blocking(app, n, req, &tid);
	json = it_dump_blocked(app, tid, &t);
	it_assert_continued(&t, json, trace, TP_PARENT, "GET", "/block/orders",
			    "req-1");
	ck_assert_msg(fc_contexts(json) == 1, "other threads publish too:\n%s", json);
	free(json);
	test_child_send(&app->child, "GO\n");
	resp = it_read_all(fd, NULL);
	close(fd);
	fc_assert_body(resp, "GET /block/orders?x=1 id=req-1 body=0\n");
	free(resp);
	test_child_expect(&app->child, "DONE ", line, sizeof(line), IT_TIMEOUT_MS);
	/* The thread answered and waits for the next request (in the stdio
	 * API, inside the next FCGI_Accept()).  The request ended at its
	 * finish, after the flush of its response: in the stdio API, the one
	 * nested in that FCGI_Accept() (which sends the whole response). */
	it_wait_detached(app, tid, NULL, "fcgi-finish");
	log = it_events(app);
	ck_assert_msg(it_events_count(log, trace, "fcgi-request") == 1, "log:\n%s",
		      log);
	it_assert_one_span(log, trace, t.span);
	free(log);
	it_assert_gone(app, tid, trace);
	fc_assert_idle(app);
}

/* An untraced request: a new random trace on its thread, one span, gone
 * after the response. */
static void
fc_check_new_trace(struct it_server *app, const struct nx_server *n)
{
	const char *req = "POST /block/new HTTP/1.1\r\nHost: t\r\n"
			  "Content-Length: 5\r\nConnection: close\r\n\r\nhello";
	struct it_thread_ctx t;
	char *json, *log, *resp, line[512];
	long tid;
	int fd;

	fd = fc_send_blocking(app, n, req, &tid);
	json = it_dump_blocked(app, tid, &t);
	it_assert_new_trace(&t);
	ck_assert_str_eq(t.method, "POST");
	ck_assert_str_eq(t.path, "/block/new");
	ck_assert_msg(fc_contexts(json) == 1, "other threads publish too:\n%s", json);
	free(json);
	test_child_send(&app->child, "GO\n");
	resp = it_read_all(fd, NULL);
	close(fd);
	fc_assert_body(resp, "POST /block/new id=- body=5\n");
	free(resp);
	test_child_expect(&app->child, "DONE ", line, sizeof(line), IT_TIMEOUT_MS);
	it_wait_detached(app, tid, NULL, NULL);
	log = it_events(app);
	it_assert_one_span(log, t.trace, t.span);
	free(log);
	it_assert_gone(app, tid, t.trace);
	fc_assert_idle(app);
}

/* A traced request the application finishes (/linger: FCGX_Finish_r(),
 * FCGI_Finish()) or frees (/drop: FCGX_Free()) and then lingers before it
 * accepts again: the request's end, not the next accept, cleared its
 * context (the event's reason says which). */
static void
fc_check_end(struct it_server *app,
	     const struct nx_server *n,
	     const char *path,
	     const char *trace,
	     const char *reason,
	     const char *status)
{
	struct it_thread_ctx t;
	char req[512], line[512], *json, *resp;
	long tid;
	int fd;

	snprintf(req, sizeof(req),
		 "GET %s HTTP/1.1\r\nHost: t\r\n"
		 "traceparent: 00-%s-" TP_PARENT "-01\r\nConnection: close\r\n\r\n",
		 path, trace);
	fd = it_connect(n->srv.port);
	it_send_str(fd, req);
	test_child_expect(&app->child, "LINGER ", line, sizeof(line), IT_TIMEOUT_MS);
	tid = strtol(line + 7, NULL, 10);
	ck_assert_int_gt(tid, 0);
	resp = it_read_all(fd, NULL);
	close(fd);
	ck_assert_msg(strncmp(resp, status, strlen(status)) == 0, "response: %s", resp);
	free(resp);
	it_wait_detached(app, tid, NULL, reason);
	json = it_ctxdump(app->child.pid);
	ck_assert_msg(it_dump_thread(json, tid, &t), "thread %ld not in:\n%s", tid,
		      json);
	ck_assert_msg(!t.has_ctx && fc_contexts(json) == 0,
		      "a context after the request's end:\n%s", json);
	free(json);
	test_child_send(&app->child, "GO\n");
	test_child_expect(&app->child, "DONE ", line, sizeof(line), IT_TIMEOUT_MS);
}

/* Two requests blocked at once (threaded API): each on its own thread. */
static void
fc_check_two(struct it_server *app, const struct nx_server *n)
{
	const char *r1 = "GET /block/a HTTP/1.1\r\nHost: t\r\ntraceparent: " TP
			 "\r\nx-request-id: a\r\nConnection: close\r\n\r\n";
	const char *r2 = "GET /block/b HTTP/1.1\r\nHost: t\r\ntraceparent: " TP2
			 "\r\nx-request-id: b\r\nConnection: close\r\n\r\n";
	struct it_thread_ctx t1, t2;
	char *json, *resp, line[512];
	long tid1, tid2;
	int fd1, fd2;

	fd1 = fc_send_blocking(app, n, r1, &tid1);
	fd2 = fc_send_blocking(app, n, r2, &tid2);
	ck_assert_int_ne(tid1, tid2);
	json = it_ctxdump(app->child.pid);
	ck_assert(it_dump_thread(json, tid1, &t1) && t1.has_ctx);
	ck_assert(it_dump_thread(json, tid2, &t2) && t2.has_ctx);
	ck_assert_str_eq(t1.trace, TP_TRACE);
	ck_assert_str_eq(t1.path, "/block/a");
	ck_assert_str_eq(t1.extra, "a");
	ck_assert_str_eq(t2.trace, TP2_TRACE);
	ck_assert_str_eq(t2.path, "/block/b");
	ck_assert_str_eq(t2.extra, "b");
	ck_assert_msg(fc_contexts(json) == 2, "dump:\n%s", json);
	free(json);
	/* One GO each; either handler may take either. */
	test_child_send(&app->child, "GO\nGO\n");
	resp = it_read_all(fd1, NULL);
	close(fd1);
	fc_assert_body(resp, "GET /block/a id=a body=0\n");
	free(resp);
	resp = it_read_all(fd2, NULL);
	close(fd2);
	fc_assert_body(resp, "GET /block/b id=b body=0\n");
	free(resp);
	test_child_expect(&app->child, "DONE ", line, sizeof(line), IT_TIMEOUT_MS);
	test_child_expect(&app->child, "DONE ", line, sizeof(line), IT_TIMEOUT_MS);
	it_wait_detached(app, tid1, NULL, NULL);
	it_wait_detached(app, tid2, NULL, NULL);
	fc_assert_idle(app);
}

static void
fc_run(const char *mode)
{
	struct it_server app;
	struct nx_server n;

	fc_setup(&n);
	it_block_start(&app, "fcgi-app", mode, true);
	fc_nginx_start(&n, app.port, NULL);
	/* Before any request: the waiting threads publish nothing. */
	fc_assert_idle(&app);
	fc_check_traced(&app, &n, TP_TRACE);
	if (strcmp(mode, "threaded") == 0)
		fc_check_two(&app, &n);
	fc_check_new_trace(&app, &n);
	fc_check_end(&app, &n, "/linger/x", "6bf92f3577b34da6a3ce929d0e0e4738",
		     "fcgi-finish", "HTTP/1.1 200 OK\r\n");
	if (strcmp(mode, "threaded") == 0)
		fc_check_end(&app, &n, "/drop/x", "7bf92f3577b34da6a3ce929d0e0e4739",
			     "fcgi-free", "HTTP/1.1 502 ");
	/* Again, on a thread that served a request before. */
	fc_check_traced(&app, &n, TP3_TRACE);
	it_server_stop(&app);
	nx_stop(&n);
	nx_cleanup(&n);
}

START_TEST(test_fcgi_threaded)
{
	fc_run("threaded");
}
END_TEST

START_TEST(test_fcgi_stdio)
{
	fc_run("stdio");
}
END_TEST

/* A program started with TRACEPARENT publishes that context until its
 * thread waits for its first request (stdio API: the main thread, in
 * FCGI_Accept()): then nothing, as a FastCGI server's thread works for
 * its requests only, and a waiting one is idle.  (The helper's own
 * threads keep the process's context.) */
START_TEST(test_fcgi_traceparent_idle)
{
	static char path[4096];
	char *argv[] = {path, "stdio", NULL};
	char *env[] = {"TRACEPARENT=00-" TP3_TRACE "-" TP_PARENT "-01", NULL};
	struct it_thread_ctx t;
	struct it_server app;
	char *json;

	snprintf(path, sizeof(path), "%s/fcgi-app", test_env_path("HELPER_DIR"));
	it_server_start(&app, argv, true, env);
	it_wait_detached(&app, app.child.pid, NULL, "fcgi-accept");
	json = it_ctxdump(app.child.pid);
	ck_assert_msg(it_dump_thread(json, app.child.pid, &t),
		      "main thread not in:\n%s", json);
	ck_assert_msg(!t.has_ctx, "the waiting thread publishes a context:\n%s", json);
	free(json);
	it_server_stop(&app);
}
END_TEST

/* ---- 2. the same bytes with and without the shim ---- */

static const char *const fc_same_reqs[] = {
	IT_SAME_BYTES_HEAD,
	"GET /id HTTP/1.1\r\nHost: t\r\nx-request-id: r-7\r\ntraceparent: " TP2
	"\r\ntracestate: a=1,b=2\r\nConnection: close\r\n\r\n",
	"GET /q?a=b&c=%20d HTTP/1.1\r\nHost: t\r\ntraceparent: 00-zz\r\n"
	"Connection: close\r\n\r\n",
	IT_SAME_BYTES_TAIL,
};
#define FC_N_SAME (sizeof(fc_same_reqs) / sizeof(fc_same_reqs[0]))

/* The responses to fc_same_reqs through nginx to the application in mode,
 * run under the shim if preload; joined, Date values removed. */
static char *
fc_responses(const char *mode, bool preload)
{
	struct it_server app;
	struct nx_server n;
	char *acc = NULL;
	size_t acc_len = 0, i;

	fc_setup(&n);
	it_block_start(&app, "fcgi-app", mode, preload);
	fc_nginx_start(&n, app.port, NULL);
	for (i = 0; i < FC_N_SAME; i++) {
		size_t len;
		char *r = it_exchange(n.srv.port, fc_same_reqs[i], &len);

		ck_assert_msg(len > 0, "no response to request %zu", i);
		nx_append(&acc, &acc_len, "\n== request\n", r, len);
		free(r);
	}
	nx_strip_date(acc);
	it_server_stop(&app);
	nx_stop(&n);
	nx_cleanup(&n);
	return acc;
}

START_TEST(test_fcgi_same_bytes)
{
	static const char *const modes[] = {"threaded", "stdio"};
	size_t m;

	for (m = 0; m < 2; m++) {
		char *plain = fc_responses(modes[m], false);
		char *shim = fc_responses(modes[m], true);

		nx_assert_same(plain, shim, modes[m]);
		/* Answered by the application, not nginx. */
		ck_assert_ptr_nonnull(strstr(plain, "GET /hello?x=1 id=- body=0\n"));
		ck_assert_ptr_nonnull(strstr(plain, "POST /p id=- body=10\n"));
		ck_assert_ptr_nonnull(strstr(plain, "GET /id id=r-7 body=0\n"));
		free(plain);
		free(shim);
	}
}
END_TEST

/* ---- 3. fcgiwrap and a CGI script ---- */

static void
fc_file(const struct nx_server *n, const char *name, const char *text, mode_t mode)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", n->dir, name);
	nx_write_file(path, text, strlen(text));
	ck_assert_int_eq(chmod(path, mode), 0);
}

/* The pid the held script wrote, once it is there (0 never). */
static pid_t
fc_script_pid(const struct nx_server *n)
{
	long deadline = test_now_ms() + IT_TIMEOUT_MS;
	char path[256];

	snprintf(path, sizeof(path), "%s/script.pid", n->dir);
	for (;;) {
		FILE *f = fopen(path, "re");
		long pid = 0;

		if (f) {
			if (fscanf(f, "%ld", &pid) != 1)
				pid = 0;
			fclose(f);
			if (pid > 0)
				return (pid_t)pid;
		}
		ck_assert_msg(test_now_ms() < deadline, "the CGI script never started");
		usleep(5000);
	}
}

/* _i = 1: fcgiwrap runs with CTXSHIM_EXEC_TRACEPARENT=1 and hands the
 * script the request's context with its own span as the parent. */
START_TEST(test_fcgiwrap_cgi)
{
	const char *req = "GET /cgi/hold.sh?x=1 HTTP/1.1\r\nHost: t\r\n"
			  "traceparent: " TP "\r\nx-request-id: req-9\r\n"
			  "Connection: close\r\n\r\n";
	char *wargv[] = {
		ENV,
		_i ? "CTXSHIM_EXEC_TRACEPARENT=1" : "CTXSHIM_EXEC_TRACEPARENT=0",
		FCGIWRAP,
		"-s",
		NULL,
		NULL};
	char sock[64], script[1024], extra[1024], path[256], *json, *log, *resp;
	struct it_thread_ctx ts, tw;
	struct nx_server n, w;
	pid_t spid;
	int fd, ffd;

	fc_setup(&n);
	snprintf(path, sizeof(path), "%s/www/cgi", n.dir);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	/* The held script, builtins only (a program it ran would be a CGI
	 * program too, with a request of its own): it opens the fifo, which
	 * blocks until the test opens it for writing. */
	snprintf(script, sizeof(script),
		 "#!/bin/sh\n"
		 "echo $$ > %1$s/script.pid\n"
		 "read line < %1$s/go.fifo\n"
		 "printf 'Content-Type: text/plain\\r\\n\\r\\ncgi %%s %%s %%s\\n' "
		 "\"$REQUEST_METHOD\" \"$REQUEST_URI\" \"$line\"\n",
		 n.dir);
	fc_file(&n, "www/cgi/hold.sh", script, 0755);
	snprintf(path, sizeof(path), "%s/go.fifo", n.dir);
	ck_assert_int_eq(mkfifo(path, 0600), 0);

	/* fcgiwrap under the shim; the script gets LD_PRELOAD and the
	 * shim's settings as FastCGI parameters, which fcgiwrap passes on as
	 * its environment (a CGI program's, from nginx's fastcgi_param). */
	memset(&w, 0, sizeof(w));
	snprintf(w.err, sizeof(w.err), "fcgiwrap's stderr");
	w.srv.port = nx_free_port();
	snprintf(sock, sizeof(sock), "tcp:127.0.0.1:%u", w.srv.port);
	wargv[4] = sock;
	nx_launch(&w, wargv, true, "fcgiwrap");
	snprintf(extra, sizeof(extra),
		 "      fastcgi_param LD_PRELOAD \"%s\";\n"
		 "      fastcgi_param CTXSHIM_HEADER_ATTRS x-request-id;\n"
		 "      fastcgi_param CTXSHIM_EVENTS %s/cgi-events.log;\n",
		 getenv("CTXSHIM_LIB"), n.dir);
	fc_nginx_start(&n, w.srv.port, extra);

	fd = it_connect(n.srv.port);
	it_send_str(fd, req);
	spid = fc_script_pid(&n);

	/* fcgiwrap's thread publishes the request, while it waits for the
	 * script. */
	json = it_ctxdump(w.srv.child.pid);
	ck_assert_msg(it_dump_thread(json, w.srv.child.pid, &tw) && tw.has_ctx,
		      "fcgiwrap publishes no context:\n%s", json);
	ck_assert_str_eq(tw.trace, TP_TRACE);
	ck_assert_str_eq(tw.parent, TP_PARENT);
	ck_assert_str_eq(tw.path, "/cgi/hold.sh");
	free(json);
	/* The script publishes the request it was handed, in a span of its
	 * own: a sibling of fcgiwrap's, or its child. */
	json = it_ctxdump(spid);
	ck_assert_msg(it_dump_thread(json, spid, &ts) && ts.has_ctx,
		      "the CGI script publishes no context:\n%s", json);
	it_assert_continued(&ts, json, TP_TRACE, _i ? tw.span : TP_PARENT, "GET",
			    "/cgi/hold.sh", "req-9");
	ck_assert_str_ne(tw.span, ts.span);
	free(json);

	snprintf(path, sizeof(path), "%s/go.fifo", n.dir);
	ffd = open(path, O_WRONLY | O_CLOEXEC);
	ck_assert_int_ge(ffd, 0);
	ck_assert_int_eq(write(ffd, "go\n", 3), 3);
	close(ffd);
	resp = it_read_all(fd, NULL);
	close(fd);
	fc_assert_body(resp, "cgi GET /cgi/hold.sh?x=1 go\n");
	free(resp);

	log = it_read_file(n.dir, "cgi-events.log");
	ck_assert_msg(it_events_count(log, TP_TRACE, "cgi-request") == 1,
		      "CGI event log:\n%s", log);
	free(log);
	/* fcgiwrap finished the request: it publishes nothing. */
	it_wait_detached(&w.srv, w.srv.child.pid, NULL, NULL);
	log = it_events(&w.srv);
	ck_assert_msg(it_events_count(log, TP_TRACE, "fcgi-request") == 1,
		      "fcgiwrap's event log:\n%s", log);
	free(log);
	json = it_ctxdump(w.srv.child.pid);
	ck_assert_msg(fc_contexts(json) == 0, "fcgiwrap after the response:\n%s", json);
	free(json);

	/* fcgiwrap has no graceful stop: SIGTERM ends it. */
	kill(w.srv.child.pid, SIGTERM);
	(void)test_child_finish(&w.srv.child, IT_TIMEOUT_MS);
	nx_stop(&n);
	nx_cleanup(&n);
	unlink(w.srv.events);
}
END_TEST

TEST_SUITE(fcgi_suite)
{
	Suite *s = suite_create("integration-fcgi");
	TCase *tc = tcase_create("fcgi");

	if (access(NX_NGINX, X_OK) != 0)
		test_skip("%s is not installed (Debian: apt-get install nginx-light)",
			  NX_NGINX);
	if (access(test_helper_path("fcgi-app"), X_OK) != 0)
		test_skip(
			"fcgi-app was not built (Debian: apt-get install libfcgi-dev)");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_fcgi_threaded);
	tcase_add_test(tc, test_fcgi_stdio);
	tcase_add_test(tc, test_fcgi_traceparent_idle);
	tcase_add_test(tc, test_fcgi_same_bytes);
	if (access(FCGIWRAP, X_OK) == 0)
		tcase_add_loop_test(tc, test_fcgiwrap_cgi, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}
