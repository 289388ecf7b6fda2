/* SPDX-License-Identifier: Apache-2.0 */
/* Apache httpd from Debian (apache2, the event MPM) under the shim, socket
 * level only (httpd's own functions live in the executable, which
 * LD_PRELOAD cannot interpose).  With its own configuration in a
 * temporary directory (127.0.0.1, a free port, in the foreground, one
 * child process with four worker threads), the same requests must get the
 * same bytes with and without the shim (the Date header aside), and the
 * event log must show each traced request's trace-id attached once, with
 * one span, on a worker thread of the child process, and detached once
 * that thread is done with it.  Unlike nginx's single worker thread,
 * httpd's requests land on whichever worker thread is free, and the event
 * MPM hands a keep-alive connection's next request to any of them.  The
 * CGI script, given the shim with PassEnv LD_PRELOAD, publishes its
 * request (HTTP_TRACEPARENT) in a span of its own. */
#include "test-common.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test-integration.h"
#include "test-nginx.h"
#pragma GCC diagnostic pop

#include <sys/time.h>

#define APACHE       "/usr/sbin/apache2"
#define AP_MODULES   "/usr/lib/apache2/modules"
#define TRACE_PREFIX "4bf92f3577b34da6a3ce929d0e0e48"
#define N_TRACED     10

static void
ap_setup(struct nx_server *n)
{
	static const char script[] = "#!/bin/sh\n"
				     "printf 'Content-Type: text/plain\\r\\n\\r\\n'\n"
				     "echo \"cgi $REQUEST_METHOD\"\n";
	static const char *const www[] = {"index.html", "big.txt"};
	char dir[64], path[256];
	size_t i;

	memset(n, 0, sizeof(*n));
	snprintf(dir, sizeof(dir), "/tmp/ctxshim-apache-XXXXXX");
	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	/* The workers run as nobody: they read www and write the event log. */
	ck_assert_int_eq(chmod(dir, 0755), 0);
	nx_setup(n, dir, "<html>ctxshim</html>\n", 200 * 1024);
	snprintf(n->conf, sizeof(n->conf), "%s/httpd.conf", n->dir);
	snprintf(path, sizeof(path), "%s/cgi", n->dir);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/cgi/hello", n->dir);
	nx_write_file(path, script, strlen(script));
	ck_assert_int_eq(chmod(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/cgi-events.log", n->dir);
	nx_write_file(path, "", 0);
	ck_assert_int_eq(chmod(path, 0666), 0);
	/* httpd makes the ETag of a file modified within the second of the
	 * request a weak one: an hour old, it is the same in both runs. */
	for (i = 0; i < sizeof(www) / sizeof(www[0]); i++) {
		struct timeval tv[2];

		gettimeofday(&tv[0], NULL);
		tv[0].tv_sec -= 3600;
		tv[1] = tv[0];
		snprintf(path, sizeof(path), "%s/www/%s", n->dir, www[i]);
		ck_assert_int_eq(utimes(path, tv), 0);
	}
}

static void
ap_write_conf(const struct nx_server *n, unsigned port)
{
	char conf[4096];
	int len;

	/* Nothing from Debian's /etc/apache2: the modules a static site
	 * needs, loaded by path.  Access log without the time, so that it is
	 * the same in both runs too. */
	len = snprintf(conf, sizeof(conf),
		       "ServerRoot %1$s\n"
		       "DefaultRuntimeDir %1$s\n"
		       "PidFile %1$s/httpd.pid\n"
		       "Listen 127.0.0.1:%2$u\n"
		       "LoadModule mpm_event_module " AP_MODULES "/mod_mpm_event.so\n"
		       "LoadModule authz_core_module " AP_MODULES "/mod_authz_core.so\n"
		       "LoadModule mime_module " AP_MODULES "/mod_mime.so\n"
		       "LoadModule dir_module " AP_MODULES "/mod_dir.so\n"
		       "LoadModule alias_module " AP_MODULES "/mod_alias.so\n"
		       "LoadModule cgid_module " AP_MODULES "/mod_cgid.so\n"
		       "LoadModule env_module " AP_MODULES "/mod_env.so\n"
		       "LoadModule proxy_module " AP_MODULES "/mod_proxy.so\n"
		       "LoadModule proxy_connect_module " AP_MODULES
		       "/mod_proxy_connect.so\n"
		       "User nobody\n"
		       "Group nogroup\n"
		       "ServerName localhost\n"
		       "TypesConfig /etc/mime.types\n"
		       "DocumentRoot %1$s/www\n"
		       "ErrorLog %1$s/error.log\n"
		       "LogLevel info\n"
		       "LogFormat \"%%h %%r %%>s %%b\" plain\n"
		       "CustomLog %1$s/access.log plain\n"
		       "StartServers 1\n"
		       "ServerLimit 1\n"
		       "ThreadsPerChild 4\n"
		       "ThreadLimit 4\n"
		       "MinSpareThreads 1\n"
		       "MaxSpareThreads 4\n"
		       "MaxRequestWorkers 4\n"
		       "KeepAlive On\n"
		       "KeepAliveTimeout 1\n"
		       /* a forward proxy whose tunnels lead to httpd itself */
		       "ProxyRequests On\n"
		       "AllowCONNECT %2$u\n"
		       "ScriptAlias /cgi/ %1$s/cgi/\n"
		       "ScriptSock %1$s/cgid.sock\n"
		       /* CGI scripts get only what httpd passes: the shim,
			* and an event log of their own (nobody may write
			* ours; its checks count the server's lines) */
		       "PassEnv LD_PRELOAD\n"
		       "SetEnv CTXSHIM_EVENTS %1$s/cgi-events.log\n"
		       "<Directory %1$s/www>\n"
		       "  Require all granted\n"
		       "</Directory>\n",
		       n->dir, port);
	ck_assert_int_lt(len, (int)sizeof(conf));
	nx_write_file(n->conf, conf, (size_t)len);
}

/* Start httpd in the foreground on a new free port (nx_launch()). */
static void
ap_start(struct nx_server *n, bool preload)
{
	char *argv[] = {APACHE, "-f", n->conf, "-DFOREGROUND", NULL};

	n->srv.port = nx_free_port();
	ap_write_conf(n, n->srv.port);
	nx_launch(n, argv, preload, "apache2");
}

/* SIGTERM: httpd stops its child and exits 0. */
static void
ap_stop(struct nx_server *n)
{
	nx_halt(n, SIGTERM, "apache2");
}

/* A keep-alive connection: trace 9's request, then an untraced one, then
 * trace 9 again (its own span each time), read up to the final response. */
static void
ap_keepalive(unsigned port, char **acc, size_t *acc_len)
{
	char req[512], tp[128], *resp;
	int fd = it_connect(port), n;
	size_t got;

	nx_traceparent(TRACE_PREFIX, 9, tp);
	n = snprintf(req, sizeof(req), "GET /index.html HTTP/1.1\r\nHost: x\r\n%s\r\n",
		     tp);
	it_send(fd, req, (size_t)n);
	resp = it_read_response(fd);
	nx_append(acc, acc_len, "== keep-alive 1\n", resp, strlen(resp));
	free(resp);
	it_send_str(fd, "GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n");
	resp = it_read_response(fd);
	nx_append(acc, acc_len, "== keep-alive 2\n", resp, strlen(resp));
	free(resp);
	n = snprintf(req, sizeof(req),
		     "GET / HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n", tp);
	it_send(fd, req, (size_t)n);
	resp = it_read_all(fd, &got);
	close(fd);
	nx_append(acc, acc_len, "== keep-alive 3\n", resp, got);
	free(resp);
}

/* The request set: nginx's (traces 1..7), HTTP/1.0 (8), a keep-alive
 * connection (9), an untraced request, TLS-looking junk. */
static char *
run_requests(unsigned port)
{
	char *acc = NULL, *cgi = NULL, req[1024], tp[128];
	size_t acc_len = 0, cgi_len = 0;
	int n;

	nx_traced_requests(port, TRACE_PREFIX, nx_exchange_tcp, "== 1-byte\n",
			   "== big\n", &acc, &acc_len);
	n = snprintf(req, sizeof(req), "GET /index.html HTTP/1.0\r\n%s\r\n",
		     nx_traceparent(TRACE_PREFIX, 8, tp));
	nx_exchange_tcp(port, "== http/1.0\n", req, (size_t)n, 0, &acc, &acc_len);
	ap_keepalive(port, &acc, &acc_len);
	n = snprintf(req, sizeof(req),
		     "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	nx_exchange_tcp(port, "== untraced\n", req, (size_t)n, 0, &acc, &acc_len);
	nx_exchange_tcp(port, "== junk\n", "\x16\x03\x01\x00\x10junkjunkjunk\r\n\r\n",
			21, 0, &acc, &acc_len);
	/* Last, and kept alive (httpd closes it after KeepAliveTimeout, on
	 * its listener thread): the worker that answers it does no more I/O
	 * on any connection, so only its wait for the next job releases it. */
	n = snprintf(req, sizeof(req), "GET /cgi/hello HTTP/1.1\r\nHost: x\r\n%s\r\n",
		     nx_traceparent(TRACE_PREFIX, 10, tp));
	nx_exchange_tcp(port, "", req, (size_t)n, 0, &cgi, &cgi_len);
	/* Checked apart: whether httpd gives the script's output a
	 * Content-Length or chunks it depends on when the script ends. */
	ck_assert_msg(strncmp(cgi, "HTTP/1.1 200 OK\r\n", 17) == 0 &&
			      strstr(cgi, "cgi GET\n"),
		      "CGI response: %s", cgi);
	free(cgi);
	nx_strip_date(acc);
	return acc;
}

/* Each traced request 1..N_TRACED (9 twice, on one connection): started
 * exactly once per request, one span each, attached on a thread of the
 * child process, released by that thread.  Polls the event log. */
static void
ap_assert_traced(struct nx_server *n)
{
	long deadline = nx_now_ms() + IT_TIMEOUT_MS;
	char *log = NULL;
	unsigned k;

	for (k = 1; k <= N_TRACED;) {
		char trace[33];
		unsigned want = k == 9 ? 2 : 1;
		long tid;

		free(log);
		log = it_events(&n->srv);
		nx_trace(TRACE_PREFIX, k, trace);
		tid = nx_attach_tid(log, trace);
		ck_assert_msg(tid > 0, "trace %u never attached:\n%.3000s", k, log);
		ck_assert_msg(tid != n->srv.child.pid,
			      "attached in the parent:\n%.3000s", log);
		ck_assert_msg(
			it_events_count(log, trace, "request") +
					it_events_count(log, trace, "pipelined") ==
				want,
			"trace %u: not started %u time(s):\n%.3000s", k, want, log);
		ck_assert_msg(it_events_spans(log, trace, NULL) == want,
			      "trace %u: not %u span(s):\n%.3000s", k, want, log);
		if (nx_released(log, trace, nx_last_tid(log, trace))) {
			k++;
			continue;
		}
		ck_assert_msg(nx_now_ms() < deadline,
			      "trace %u never detached:\n%.3000s", k, log);
		usleep(5000);
	}
	free(log);
}

/* The CGI script's event log: with the shim passed on (PassEnv), the
 * script published its request, trace 10, once, in a span of its own
 * (not the server's, whose span is read from the server's log); without
 * it, nothing. */
static void
ap_assert_cgi(const struct nx_server *n, bool preload)
{
	char trace[33], span[17], *log = it_read_file(n->dir, "cgi-events.log"), *srv;

	if (!preload) {
		ck_assert_msg(!*log, "CGI events without the shim:\n%s", log);
		free(log);
		return;
	}
	nx_trace(TRACE_PREFIX, 10, trace);
	srv = it_events(&n->srv);
	ck_assert_int_eq(it_events_spans(srv, trace, span), 1);
	free(srv);
	ck_assert_msg(it_events_count(log, trace, "cgi-request") == 1 &&
			      it_events_spans(log, trace, NULL) == 1 &&
			      !strstr(log, span),
		      "CGI events (server span %s):\n%s", span, log);
	free(log);
}

START_TEST(test_apache_identical_and_events)
{
	struct nx_server n;
	char *plain, *shim;

	ap_setup(&n);
	ap_start(&n, false);
	plain = run_requests(n.srv.port);
	ap_stop(&n);
	ap_assert_cgi(&n, false);

	ap_start(&n, true);
	shim = run_requests(n.srv.port);
	nx_assert_same(plain, shim, NULL);
	ck_assert_ptr_nonnull(strstr(plain, "HTTP/1.1 200 OK"));
	ck_assert_ptr_nonnull(strstr(plain, "HTTP/1.1 404 Not Found"));
	ck_assert_ptr_nonnull(strstr(plain, "HTTP/1.1 400 Bad Request"));
	ap_assert_traced(&n);
	ap_assert_cgi(&n, true);
	ap_stop(&n);
	free(plain);
	free(shim);
	nx_cleanup(&n);
}
END_TEST

/* A tunnel (CONNECT, mod_proxy_connect) to httpd itself carrying a plain
 * HTTP request: that request is the one httpd reads from the tunnel's far
 * end, a connection of its own; on the client's connection it is bytes
 * relayed, not a request of httpd's, and must not start there too. */
START_TEST(test_apache_connect_tunnel)
{
	struct nx_server n;
	char req[512], tp[128], trace[33], *resp, *log;
	long deadline;
	size_t got, cap;
	int fd, len;

	ap_setup(&n);
	ap_start(&n, true);
	fd = it_connect(n.srv.port);
	len = snprintf(req, sizeof(req),
		       "CONNECT 127.0.0.1:%1$u HTTP/1.1\r\nHost: 127.0.0.1:%1$u\r\n"
		       "%2$s\r\n",
		       n.srv.port, nx_traceparent(TRACE_PREFIX, 11, tp));
	it_send(fd, req, (size_t)len);
	/* The answer's head alone (no body, no Content-Length). */
	resp = NULL;
	got = cap = 0;
	while (!resp || !strstr(resp, "\r\n\r\n"))
		ck_assert_msg(it_read_some(fd, &resp, &got, &cap),
			      "connection closed early");
	ck_assert_msg(strstr(resp, " 200 "), "CONNECT answered: %s", resp);
	free(resp);
	len = snprintf(req, sizeof(req),
		       "GET /index.html HTTP/1.1\r\nHost: x\r\n%s"
		       "Connection: close\r\n\r\n",
		       nx_traceparent(TRACE_PREFIX, 12, tp));
	it_send(fd, req, (size_t)len);
	resp = it_read_all(fd, &got);
	close(fd);
	ck_assert_msg(strstr(resp, "HTTP/1.1 200 OK") && strstr(resp, "ctxshim"),
		      "tunnelled response: %s", resp);
	free(resp);

	/* Once the inner request was released, the log has all it gets. */
	nx_trace(TRACE_PREFIX, 12, trace);
	deadline = nx_now_ms() + IT_TIMEOUT_MS;
	for (;;) {
		log = it_events(&n.srv);
		if (nx_attach_tid(log, trace) > 0 &&
		    nx_released(log, trace, nx_last_tid(log, trace)))
			break;
		ck_assert_msg(nx_now_ms() < deadline,
			      "tunnelled trace never released:\n%.3000s", log);
		free(log);
		usleep(5000);
	}
	ck_assert_msg(it_events_count(log, trace, "request") == 1 &&
			      it_events_spans(log, trace, NULL) == 1,
		      "tunnelled request started on the tunnel too:\n%.3000s", log);
	free(log);
	ap_stop(&n);
	nx_cleanup(&n);
}
END_TEST

TEST_SUITE(apache_suite)
{
	Suite *s = suite_create("integration-apache");
	TCase *tc = tcase_create("apache");

	if (access(APACHE, X_OK) != 0 ||
	    access(AP_MODULES "/mod_mpm_event.so", R_OK) != 0)
		test_skip("%s is not installed (Debian: apt-get install apache2)",
			  APACHE);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_apache_identical_and_events);
	tcase_add_test(tc, test_apache_connect_tunnel);
	suite_add_tcase(s, tc);
	return s;
}
