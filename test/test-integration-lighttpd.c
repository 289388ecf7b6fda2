/* SPDX-License-Identifier: Apache-2.0 */
/* lighttpd from Debian (1.4.69) under the shim, socket level and, over
 * HTTPS, OpenSSL (mod_openssl, package lighttpd-mod-openssl).  lighttpd
 * runs with its own configuration in a temporary directory (127.0.0.1,
 * free ports, in the foreground, as the test's user), under setpriv
 * --pdeathsig so that it dies with a test that fails before stopping it.
 *
 * lighttpd is one thread: an epoll loop that runs CGI scripts and proxied
 * requests as other processes and connections it waits for in that loop.
 * A request it waits for there is not worked on: the shim clears the
 * record in epoll_wait (hooks/hook-socket.c), as for nginx, and publishes
 * it again when lighttpd writes the response.  Publishing it in the loop
 * would charge the idle loop, and every other connection it serves
 * meanwhile, to that request.  So a request is checked with ctxdump while
 * lighttpd itself blocks inside it: mod_ssi runs "exec" commands
 * synchronously (it forks the command and waits for it in waitpid()), and
 * a held mod_cgi script or mod_proxy backend is checked through the event
 * log and by its absence from ctxdump.  Checked:
 *
 * 1. A traced request to a CGI script that blocks on a fifo: while it is
 *    held, lighttpd sits in epoll_wait and publishes nothing (the request
 *    was attached at its head, with one span, and detached by the wait);
 *    the script (a CGI program: GATEWAY_INTERFACE, HTTP_TRACEPARENT)
 *    publishes the request on its main thread, in a span of its own.
 *    Its response is written under lighttpd's span,
 *    and then nobody publishes it.  A traced .shtml page whose exec
 *    command blocks on the fifo: while it is held, ctxdump shows exactly
 *    one thread with the trace, lighttpd's, with a new span-id, the
 *    parent span, the flags, method, path and x-request-id; after the
 *    response nobody publishes it, while the keep-alive connection is
 *    still open (its next request is answered).  The same with a request
 *    pipelined behind the held one: only the held one shows, then the
 *    second gets its turn.
 * 2. The same requests (static files, a 404, pipelining, 1-byte writes, a
 *    POST, a big file, HTTP/1.0, two traced requests on one keep-alive
 *    connection, an untraced one, TLS-looking junk and binary junk) get
 *    the same bytes with and without the shim (Date aside, the only thing
 *    that differs between two runs without it); each traced request is
 *    attached once, with one span, and released; and afterwards no
 *    context is published at all.
 * 3. mod_proxy in front of tpc-server (without the shim): while the
 *    backend holds a traced request, lighttpd publishes nothing (it waits
 *    in epoll_wait) and the request was attached once; the backend's
 *    answer is read under it again (reason "upstream": hooks/hook-socket.c,
 *    "Upstreams"), the response goes out under the same span and is gone
 *    afterwards.  A second backend,
 *    this test itself, answers with bytes that are a complete traced
 *    request head instead of a response: lighttpd reads them on its
 *    outgoing (connect()ed) connection, which the shim must never scan,
 *    so that trace must appear nowhere.
 * 4. Over HTTPS (mod_openssl; curl as the client), the .shtml check of 1
 *    with HTTP/1.1.  HTTP/2: lighttpd speaks it with its own code (no
 *    nghttp2), which the socket level follows (preload/conn.c,
 *    "HTTP/2"): h2 over TLS (ALPN) and h2c with prior knowledge show the
 *    request like HTTP/1.1 (old: no context at all); h2c by "Upgrade:
 *    h2c" is an HTTP/1.1 head, so that request gets its context too.  The
 *    bar for all three: lighttpd answers (the page, over h2), the held
 *    request shows, no thread publishes a context other than the
 *    request's, and none is left.  On an upgraded connection the later
 *    streams are requests of their own, and the upgrade request's
 *    context does not come back with them (old: on their responses'
 *    writes). */
#include "test-common.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test-integration-block.h"
#include "test-nginx.h"
#pragma GCC diagnostic pop

#include <sys/syscall.h>

#define LIGHTTPD     "/usr/sbin/lighttpd"
#define LT_MOD_SSL   "/usr/lib/lighttpd/mod_openssl.so"
#define SETPRIV      "/usr/bin/setpriv"
#define ENV          "/usr/bin/env"
#define CURL         "/usr/bin/curl"
#define TRACE_PREFIX "7d3e5f1a9c2b4e6d8f0a1b3c5d7e9f"
#define PARENT_SPAN  "00f067aa0ba902b7" /* nx_traceparent()'s */
/* What the rogue backend answers with: a traced request head. */
#define ROGUE_TRACE "1111111111111111111111111111111a"

struct lt_server {
	struct nx_server nx; /* dir, conf, error log, the server and its port */
	bool tls;            /* an HTTPS listener on tls_port */
	unsigned tls_port;
	unsigned backend_port; /* /block/ and /be/ go there when not 0 */
	unsigned rogue_port;   /* /rogue/ goes there when not 0 */
	char fifo[128];        /* the held CGI script and exec command read it */
	bool exec_tp;          /* CTXSHIM_EXEC_TRACEPARENT=1 */
};

static void
lt_write(const struct lt_server *l, const char *name, const char *text, mode_t mode)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", l->nx.dir, name);
	nx_write_file(path, text, strlen(text));
	ck_assert_int_eq(chmod(path, mode), 0);
}

/* The directory, its pages and scripts, and with tls a self-signed
 * certificate (nx_self_signed()). */
static void
lt_setup(struct lt_server *l, bool tls)
{
	char dir[64], path[256], text[512];

	memset(l, 0, sizeof(*l));
	snprintf(dir, sizeof(dir), "/tmp/ctxshim-lighttpd-XXXXXX");
	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	ck_assert_int_eq(chmod(dir, 0755), 0);
	nx_setup(&l->nx, dir, "<html>ctxshim</html>\n", 200 * 1024);
	snprintf(l->nx.conf, sizeof(l->nx.conf), "%s/lighttpd.conf", l->nx.dir);
	snprintf(l->fifo, sizeof(l->fifo), "%s/hold.fifo", l->nx.dir);
	ck_assert_int_eq(mkfifo(l->fifo, 0600), 0);
	snprintf(path, sizeof(path), "%s/cgi", l->nx.dir);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	/* The held CGI script: it opens the fifo, which blocks until the
	 * test opens it for writing, and answers with the line it reads. */
	snprintf(text, sizeof(text),
		 "#!/bin/sh\n"
		 "read line < %s\n"
		 "printf 'Content-Type: text/plain\\r\\n\\r\\n'\n"
		 "echo \"cgi $REQUEST_METHOD $line\"\n",
		 l->fifo);
	lt_write(l, "cgi/hold", text, 0755);
	snprintf(text, sizeof(text),
		 "before <!--#exec cmd=\"read l < %s; echo got $l\" --> after\n",
		 l->fifo);
	lt_write(l, "www/hold.shtml", text, 0644);
	l->tls = tls;
	if (tls) {
		char key[128], cert[128];

		nx_self_signed(l->nx.dir, cert, key);
	}
}

static void
lt_write_conf(const struct lt_server *l)
{
	char conf[4096];
	int len;

	/* Nothing from /etc/lighttpd.  server.username unset: lighttpd and
	 * its CGI children keep the test's user, whom ctxdump may trace.
	 * mod_cgi passes LD_PRELOAD on in the scripts' environment, so they
	 * run under the shim too. */
	len = snprintf(
		conf, sizeof(conf),
		"server.document-root = \"%1$s/www\"\n"
		"server.bind = \"127.0.0.1\"\n"
		"server.port = %2$u\n"
		"server.errorlog = \"%1$s/error.log\"\n"
		"server.modules = ( \"mod_alias\", \"mod_setenv\", \"mod_cgi\", "
		"\"mod_ssi\", \"mod_proxy\"%3$s )\n"
		"setenv.set-environment = ( \"CTXSHIM_EVENTS\" => "
		"\"%1$s/cgi-events.log\", \"CTXSHIM_HEADER_ATTRS\" => "
		"\"x-request-id\" )\n"
		"index-file.names = ( \"index.html\" )\n"
		"mimetype.assign = ( \".html\" => \"text/html\", "
		"\".txt\" => \"text/plain\", \".shtml\" => \"text/html\" )\n"
		"ssi.extension = ( \".shtml\" )\n"
		"alias.url = ( \"/cgi/\" => \"%1$s/cgi/\" )\n"
		"$HTTP[\"url\"] =~ \"^/cgi/\" { cgi.assign = ( \"\" => \"\" ) }\n",
		l->nx.dir, l->nx.srv.port, l->tls ? ", \"mod_openssl\"" : "");
	if (l->backend_port)
		len += snprintf(conf + len, sizeof(conf) - (size_t)len,
				"$HTTP[\"url\"] =~ \"^/(block|be)/\" { proxy.server = "
				"( \"\" => (( \"host\" => \"127.0.0.1\", \"port\" => "
				"%u )) ) }\n",
				l->backend_port);
	if (l->rogue_port)
		len += snprintf(conf + len, sizeof(conf) - (size_t)len,
				"$HTTP[\"url\"] =~ \"^/rogue/\" { proxy.server = "
				"( \"\" => (( \"host\" => \"127.0.0.1\", \"port\" => "
				"%u )) ) }\n",
				l->rogue_port);
	if (l->tls)
		len += snprintf(conf + len, sizeof(conf) - (size_t)len,
				"$SERVER[\"socket\"] == \"127.0.0.1:%2$u\" {\n"
				"  ssl.engine = \"enable\"\n"
				"  ssl.pemfile = \"%1$s/cert.pem\"\n"
				"  ssl.privkey = \"%1$s/key.pem\"\n"
				"}\n",
				l->nx.dir, l->tls_port);
	ck_assert_int_lt(len, (int)sizeof(conf));
	nx_write_file(l->nx.conf, conf, (size_t)len);
}

/* Start lighttpd on new free ports, under the shim if preload (with
 * CTXSHIM_HEADER_ATTRS=x-request-id, set by env(1): nx_launch() gives it
 * the event log only).  env and setpriv exec, so the pid is lighttpd's. */
static void
lt_start(struct lt_server *l, bool preload)
{
	char *argv[] = {ENV,
			"CTXSHIM_HEADER_ATTRS=x-request-id",
			l->exec_tp ? "CTXSHIM_EXEC_TRACEPARENT=1"
				   : "CTXSHIM_EXEC_TRACEPARENT=0",
			SETPRIV,
			"--pdeathsig=KILL",
			LIGHTTPD,
			"-D",
			"-f",
			l->nx.conf,
			NULL};

	l->nx.srv.port = nx_free_port();
	if (l->tls)
		l->tls_port = nx_free_port();
	lt_write_conf(l);
	nx_launch(&l->nx, argv, preload, "lighttpd");
}

/* SIGINT: lighttpd's graceful shutdown, which waits for the connections
 * it still has (a client's close it has not handled yet) and exits 0.
 * SIGTERM stops it at once, and then it exits 1 if a connection was still
 * open (server.c, server_main()), which depends on timing. */
static void
lt_stop(struct lt_server *l)
{
	nx_halt(&l->nx, SIGINT, "lighttpd");
}

/* ---- the fifo that holds the CGI script and the exec command ---- */

/* Wait until the script or command opened the fifo (it blocks there until
 * a writer comes); returns the writing end. */
static int
lt_fifo_held(const struct lt_server *l)
{
	long deadline = nx_now_ms() + IT_TIMEOUT_MS;

	for (;;) {
		/* Without a reader, O_NONBLOCK fails with ENXIO at once. */
		int fd = open(l->fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);

		if (fd >= 0)
			return fd;
		ck_assert_int_eq(errno, ENXIO);
		ck_assert_msg(nx_now_ms() < deadline,
			      "the held script never opened %s; see %s", l->fifo,
			      l->nx.err);
		usleep(5000);
	}
}

static void
lt_fifo_release(int fd)
{
	ck_assert_int_eq(write(fd, "go\n", 3), 3);
	close(fd);
}

/* ---- what the shim publishes ---- */

static void
lt_request(char *out, size_t cap, const char *path, unsigned k, const char *conn)
{
	char tp[128];

	snprintf(out, cap,
		 "GET %s HTTP/1.1\r\nHost: x\r\n%sx-request-id: lt-%u\r\n%s\r\n", path,
		 nx_traceparent(TRACE_PREFIX, k, tp), k, conn);
}

/* Nobody publishes trace: ctxdump of lighttpd lists none. */
static void
lt_assert_unpublished(const struct lt_server *l, const char *trace, const char *when)
{
	char *json = it_ctxdump(l->nx.srv.child.pid);

	ck_assert_msg(it_dump_count_trace(json, trace) == 0, "%s: %s published:\n%s",
		      when, trace, json);
	free(json);
}

/* No thread of lighttpd publishes any context. */
static void
lt_assert_no_context(const struct lt_server *l, const char *when)
{
	char *json = it_ctxdump(l->nx.srv.child.pid);

	ck_assert_msg(!strstr(json, "\"trace_id\""), "%s: a context is published:\n%s",
		      when, json);
	free(json);
}

/* While lighttpd waits in its loop for a held request (trace k): it was
 * attached once at its head, with one span (copied to span), on
 * lighttpd's thread, and the wait detached it; nobody publishes it. */
static void
lt_assert_idle_wait(struct lt_server *l, unsigned k, char span[17])
{
	pid_t pid = l->nx.srv.child.pid;
	char trace[33], *log;

	nx_trace(TRACE_PREFIX, k, trace);
	test_wait_syscall(pid, pid, SYS_epoll_wait, IT_TIMEOUT_MS);
	it_wait_detached(&l->nx.srv, pid, trace, "epoll_wait");
	log = it_events(&l->nx.srv);
	ck_assert_int_eq(nx_attach_tid(log, trace), pid);
	ck_assert_msg(it_events_count(log, trace, "request") == 1,
		      "trace %u not attached once at its head:\n%s", k, log);
	it_assert_one_span(log, trace, NULL);
	(void)it_events_spans(log, trace, span);
	free(log);
	lt_assert_unpublished(l, trace, "while lighttpd waits for the request");
}

/* After the response: its last write was under span (one span in all),
 * which an event of reason `how' published again after the wait ("write":
 * the response's write; "upstream": the read of a backend's answer, which
 * the response's write then continued), the thread ended with a detach,
 * and nobody publishes it. */
static void
lt_assert_answered(struct lt_server *l, unsigned k, const char *span, const char *how)
{
	pid_t pid = l->nx.srv.child.pid;
	char trace[33], *log;

	nx_trace(TRACE_PREFIX, k, trace);
	it_wait_detached(&l->nx.srv, pid, trace, NULL);
	log = it_events(&l->nx.srv);
	it_assert_one_span(log, trace, span);
	ck_assert_msg(it_events_count(log, trace, how) >= 1,
		      "trace %u: the response was not written under it (no %s):\n%s", k,
		      how, log);
	free(log);
	it_assert_gone(&l->nx.srv, pid, trace);
}

/* While lighttpd blocks inside request k (waitpid() for its exec command):
 * ctxdump shows exactly one thread, lighttpd's, with the request's
 * context. */
static void
lt_assert_blocked_inside(struct lt_server *l, unsigned k, const char *path)
{
	pid_t pid = l->nx.srv.child.pid;
	struct it_thread_ctx t;
	char trace[33], rid[32], *json, *log;

	nx_trace(TRACE_PREFIX, k, trace);
	snprintf(rid, sizeof(rid), "lt-%u", k);
	test_wait_syscall(pid, pid, SYS_wait4, IT_TIMEOUT_MS);
	json = it_dump_blocked(&l->nx.srv, pid, &t);
	it_assert_continued(&t, json, trace, PARENT_SPAN, "GET", path, rid);
	free(json);
	log = it_events(&l->nx.srv);
	it_assert_one_span(log, trace, t.span);
	free(log);
}

/* Trace k (of prefix): attached once, with one span, on lighttpd's
 * thread, and released.  Polls the event log. */
static void
lt_assert_traced(struct lt_server *l, const char *prefix, unsigned k)
{
	long deadline = nx_now_ms() + IT_TIMEOUT_MS;
	pid_t pid = l->nx.srv.child.pid;
	char trace[33], *log;

	nx_trace(prefix, k, trace);
	for (;;) {
		log = it_events(&l->nx.srv);
		ck_assert_msg(nx_attach_tid(log, trace) == pid,
			      "trace %s not attached on lighttpd's thread:\n%s", trace,
			      log);
		ck_assert_msg(
			it_events_count(log, trace, "request") +
					it_events_count(log, trace, "pipelined") ==
				1,
			"trace %s: not started exactly once:\n%s", trace, log);
		ck_assert_msg(it_events_spans(log, trace, NULL) == 1,
			      "trace %s: more than one span:\n%s", trace, log);
		if (nx_released(log, trace, pid))
			break;
		ck_assert_msg(nx_now_ms() < deadline, "trace %s never released:\n%s",
			      trace, log);
		free(log);
		usleep(5000);
	}
	free(log);
}

/* The CGI script cgi, held in request k, publishes that request on its
 * main thread: the trace, a span that is neither the client's nor
 * lighttpd's (lspan), as parent the client's (or lighttpd's span, which
 * lighttpd hands it as TRACEPARENT with CTXSHIM_EXEC_TRACEPARENT=1), the
 * method, the path without its query and the x-request-id; its event log
 * (its own file, setenv.set-environment) says so. */
static void
lt_assert_cgi(const struct lt_server *l, pid_t cgi, unsigned k, const char *lspan)
{
	const char *parent = l->exec_tp ? lspan : PARENT_SPAN;
	struct it_thread_ctx t;
	char trace[33], rid[32], *json, *log;

	nx_trace(TRACE_PREFIX, k, trace);
	snprintf(rid, sizeof(rid), "lt-%u", k);
	json = it_ctxdump(cgi);
	ck_assert_msg(it_dump_thread(json, cgi, &t) && t.has_ctx,
		      "the CGI script publishes no context:\n%s", json);
	ck_assert_str_eq(t.trace, trace);
	ck_assert_str_ne(t.span, lspan);
	ck_assert_str_ne(t.span, PARENT_SPAN);
	ck_assert_str_eq(t.parent, parent);
	ck_assert_uint_eq(t.flags, 1);
	ck_assert_str_eq(t.method, "GET");
	ck_assert_str_eq(t.path, "/cgi/hold");
	ck_assert_str_eq(t.extra, rid);
	free(json);
	log = it_read_file(l->nx.dir, "cgi-events.log");
	ck_assert_msg(it_events_count(log, trace, "cgi-request") == 1 &&
			      it_events_spans(log, trace, NULL) == 1,
		      "CGI event log:\n%s", log);
	free(log);
}

/* ---- 1. the held CGI script and the held exec command ---- */

/* Trace 1 to the CGI script, held: lighttpd waits for it in epoll_wait
 * (span: its span for the request) and the script publishes the request
 * lighttpd hands it (a CGI program's environment: HTTP_TRACEPARENT,
 * REQUEST_METHOD, REQUEST_URI, HTTP_X_REQUEST_ID), in a span of its own
 * (lt_assert_cgi()); then released and answered.  Returns the script's
 * pid. */
static pid_t
lt_held_cgi(struct lt_server *l, char span[17])
{
	char req[512], *resp;
	pid_t cgi;
	int fd, hold;

	lt_request(req, sizeof(req), "/cgi/hold?x=1", 1, "Connection: close\r\n");
	fd = it_connect(l->nx.srv.port);
	it_send_str(fd, req);
	hold = lt_fifo_held(l);
	lt_assert_idle_wait(l, 1, span);
	cgi = it_child(l->nx.srv.child.pid, 0);
	ck_assert_int_gt(cgi, 0);
	lt_assert_cgi(l, cgi, 1, span);
	lt_fifo_release(hold);
	resp = it_read_all(fd, NULL);
	close(fd);
	ck_assert_msg(strncmp(resp, "HTTP/1.1 200 OK\r\n", 17) == 0 &&
			      strstr(resp, "\r\n\r\ncgi GET go\n"),
		      "CGI response: %s", resp);
	free(resp);
	return cgi;
}

START_TEST(test_lighttpd_held)
{
	struct lt_server l;
	char req[512], span[17], trace[33], *resp;
	int fd, hold;

	lt_setup(&l, false);
	lt_start(&l, true);

	(void)lt_held_cgi(&l, span);
	lt_assert_answered(&l, 1, span, "write");

	/* mod_ssi's exec: lighttpd waits for the command inside the request,
	 * on a keep-alive connection. */
	lt_request(req, sizeof(req), "/hold.shtml?x=1", 2, "");
	fd = it_connect(l.nx.srv.port);
	it_send_str(fd, req);
	hold = lt_fifo_held(&l);
	lt_assert_blocked_inside(&l, 2, "/hold.shtml");
	lt_fifo_release(hold);
	resp = it_read_response(fd);
	it_assert_ok_body(resp, "before got go\n after\n");
	free(resp);
	/* Checked with the connection still open: the next request on it
	 * must still be answered (lighttpd closes an idle keep-alive
	 * connection after a few seconds, which would clear it too). */
	nx_trace(TRACE_PREFIX, 2, trace);
	it_wait_detached(&l.nx.srv, l.nx.srv.child.pid, trace, NULL);
	it_assert_gone(&l.nx.srv, l.nx.srv.child.pid, trace);
	lt_request(req, sizeof(req), "/index.html", 3, "Connection: close\r\n");
	it_send_str(fd, req);
	resp = it_read_all(fd, NULL);
	close(fd);
	it_assert_ok_body(resp, "<html>ctxshim</html>\n");
	free(resp);
	lt_assert_traced(&l, TRACE_PREFIX, 3);

	/* The exec held with a request pipelined behind it (one write):
	 * lighttpd works on the first, so only the first shows; then the
	 * second gets its turn. */
	{
		char both[1024], second[512];

		lt_request(req, sizeof(req), "/hold.shtml", 4, "");
		lt_request(second, sizeof(second), "/index.html", 5,
			   "Connection: close\r\n");
		snprintf(both, sizeof(both), "%s%s", req, second);
		fd = it_connect(l.nx.srv.port);
		it_send_str(fd, both);
		hold = lt_fifo_held(&l);
		lt_assert_blocked_inside(&l, 4, "/hold.shtml");
		lt_assert_unpublished(&l, nx_trace(TRACE_PREFIX, 5, trace),
				      "behind the held request");
		lt_fifo_release(hold);
		resp = it_read_all(fd, NULL);
		close(fd);
		ck_assert_msg(strstr(resp, "\r\n\r\nbefore got go\n after\n") &&
				      strstr(resp, "\r\n\r\n<html>ctxshim</html>\n"),
			      "responses: %s", resp);
		free(resp);
		lt_assert_traced(&l, TRACE_PREFIX, 4);
		lt_assert_traced(&l, TRACE_PREFIX, 5);
	}
	lt_assert_no_context(&l, "after the held requests");
	lt_stop(&l);
	nx_cleanup(&l.nx);
}
END_TEST

/* ---- 1b. CTXSHIM_EXEC_TRACEPARENT=1: the request's span to its programs ---- */

START_TEST(test_lighttpd_exec_traceparent)
{
	struct lt_server l;
	struct it_thread_ctx t, c;
	char req[512], span[17], trace[33], *resp, *json;
	pid_t cgi, child;
	int fd, hold;

	lt_setup(&l, false);
	l.exec_tp = true;
	lt_start(&l, true);

	/* mod_cgi forks and execs the script while lighttpd's thread
	 * publishes the request: the script's parent is lighttpd's span. */
	cgi = lt_held_cgi(&l, span);

	/* mod_ssi's exec command (sh -c, under the shim: it inherits
	 * LD_PRELOAD) continues the request in a child span of lighttpd's,
	 * while lighttpd waits for it inside the request. */
	lt_request(req, sizeof(req), "/hold.shtml", 2, "Connection: close\r\n");
	fd = it_connect(l.nx.srv.port);
	it_send_str(fd, req);
	hold = lt_fifo_held(&l);
	nx_trace(TRACE_PREFIX, 2, trace);
	test_wait_syscall(l.nx.srv.child.pid, l.nx.srv.child.pid, SYS_wait4,
			  IT_TIMEOUT_MS);
	json = it_dump_blocked(&l.nx.srv, l.nx.srv.child.pid, &t);
	it_assert_continued(&t, json, trace, PARENT_SPAN, "GET", "/hold.shtml", "lt-2");
	free(json);
	child = it_child(l.nx.srv.child.pid, cgi);
	ck_assert_int_gt(child, 0);
	json = it_ctxdump(child);
	ck_assert_msg(it_dump_thread(json, child, &c) && c.has_ctx,
		      "the exec command publishes no context:\n%s", json);
	ck_assert_str_eq(c.trace, trace);
	ck_assert_str_eq(c.parent, t.span);
	ck_assert_str_ne(c.span, t.span);
	ck_assert_uint_eq(c.flags, 1);
	free(json);
	lt_fifo_release(hold);
	resp = it_read_all(fd, NULL);
	close(fd);
	ck_assert_msg(strstr(resp, "\r\n\r\nbefore got go\n after\n"), "responses: %s",
		      resp);
	free(resp);
	lt_stop(&l);
	nx_cleanup(&l.nx);
}
END_TEST

/* ---- 2. the same bytes, and nothing left ---- */

/* Two traced requests on one keep-alive connection (traces 18, 19). */
static void
lt_keepalive(unsigned port, char **acc, size_t *acc_len)
{
	char req[512], *resp;
	int fd = it_connect(port);
	size_t got;

	lt_request(req, sizeof(req), "/index.html", 18, "");
	it_send_str(fd, req);
	resp = it_read_response(fd);
	nx_append(acc, acc_len, "== keep-alive 1\n", resp, strlen(resp));
	free(resp);
	lt_request(req, sizeof(req), "/big.txt", 19, "Connection: close\r\n");
	it_send_str(fd, req);
	resp = it_read_all(fd, &got);
	close(fd);
	nx_append(acc, acc_len, "== keep-alive 2\n", resp, got);
	free(resp);
}

static char *
lt_same_requests(unsigned port)
{
	static const char tls_junk[] = "\x16\x03\x01\x00\x10junkjunkjunk\r\n\r\n",
			  junk[] = "\x01\x02\x03 / HTTP/1.1\r\n\r\n";
	char *acc = NULL, req[1024], tp[128];
	size_t acc_len = 0;
	int n;

	/* Traces 1..7. */
	nx_traced_requests(port, TRACE_PREFIX, nx_exchange_tcp, "== 1-byte\n",
			   "== big\n", &acc, &acc_len);
	n = snprintf(req, sizeof(req), "GET /index.html HTTP/1.0\r\n%s\r\n",
		     nx_traceparent(TRACE_PREFIX, 17, tp));
	nx_exchange_tcp(port, "== http/1.0\n", req, (size_t)n, 0, &acc, &acc_len);
	lt_keepalive(port, &acc, &acc_len);
	n = snprintf(req, sizeof(req),
		     "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	nx_exchange_tcp(port, "== untraced\n", req, (size_t)n, 0, &acc, &acc_len);
	nx_exchange_tcp(port, "== tls junk\n", tls_junk, sizeof(tls_junk) - 1, 0, &acc,
			&acc_len);
	nx_exchange_tcp(port, "== junk\n", junk, sizeof(junk) - 1, 0, &acc, &acc_len);
	nx_strip_date(acc);
	return acc;
}

START_TEST(test_lighttpd_same_bytes)
{
	struct lt_server l;
	char *plain, *shim;
	unsigned k;

	lt_setup(&l, false);
	lt_start(&l, false);
	plain = lt_same_requests(l.nx.srv.port);
	lt_stop(&l);

	lt_start(&l, true);
	shim = lt_same_requests(l.nx.srv.port);
	nx_assert_same(plain, shim, NULL);
	ck_assert_ptr_nonnull(strstr(plain, "HTTP/1.1 200 OK"));
	ck_assert_ptr_nonnull(strstr(plain, "HTTP/1.1 404 Not Found"));
	ck_assert_ptr_nonnull(strstr(plain, "HTTP/1.0 200 OK"));
	ck_assert_ptr_nonnull(strstr(plain, " 400 Bad Request\r\n"));
	ck_assert_ptr_nonnull(strstr(plain, " 501 Not Implemented\r\n"));
	for (k = 1; k <= 7; k++)
		lt_assert_traced(&l, TRACE_PREFIX, k);
	for (k = 17; k <= 19; k++)
		lt_assert_traced(&l, TRACE_PREFIX, k);
	lt_assert_no_context(&l, "after the requests");
	lt_stop(&l);
	free(plain);
	free(shim);
	nx_cleanup(&l.nx);
}
END_TEST

/* ---- 3. mod_proxy ---- */

static unsigned
lt_count(const char *s, const char *what)
{
	unsigned n = 0;

	while ((s = strstr(s, what))) {
		n++;
		s++;
	}
	return n;
}

/* The rogue backend: accept lighttpd's connection on lfd, read the
 * forwarded head (it must carry the incoming traceparent unchanged, once),
 * answer with a traced request head and close. */
static void
lt_rogue_answer(int lfd, const char *traceparent)
{
	static const char rogue[] =
		"GET /from-backend HTTP/1.1\r\nHost: b\r\n"
		"traceparent: 00-" ROGUE_TRACE "-2222222222222222-01\r\n\r\n";
	struct pollfd p = {.fd = lfd, .events = POLLIN};
	char *head = NULL;
	size_t len = 0, cap = 0;
	int fd;

	ck_assert_msg(poll(&p, 1, IT_TIMEOUT_MS) == 1, "lighttpd never connected");
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	while (!head || !strstr(head, "\r\n\r\n"))
		ck_assert_msg(it_read_some(fd, &head, &len, &cap),
			      "lighttpd closed before its request head");
	ck_assert_msg(strstr(head, traceparent) && lt_count(head, "traceparent:") == 1,
		      "forwarded head:\n%s", head);
	free(head);
	it_send(fd, rogue, sizeof(rogue) - 1);
	close(fd);
}

START_TEST(test_lighttpd_proxy)
{
	struct test_child backend;
	struct lt_server l;
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);
	char req[512], tp[128], line[256], span[17], *resp, *log, *bpath;
	char *bargv[2];
	int fd, lfd;

	lt_setup(&l, false);
	bpath = strdup(test_helper_path("tpc-server"));
	bargv[0] = bpath;
	bargv[1] = NULL;
	test_child_start(&backend, bargv, NULL, false);
	test_child_expect(&backend, "READY ", line, sizeof(line), IT_TIMEOUT_MS);
	l.backend_port = (unsigned)strtoul(line + 6, NULL, 10);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(lfd, 4), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
	l.rogue_port = ntohs(a.sin_port);
	lt_start(&l, true);

	/* Held by the backend. */
	lt_request(req, sizeof(req), "/block/p1", 1, "");
	fd = it_connect(l.nx.srv.port);
	it_send_str(fd, req);
	test_child_expect(&backend, "BLOCK ", line, sizeof(line), IT_TIMEOUT_MS);
	ck_assert_ptr_nonnull(strstr(line, " /block/p1"));
	lt_assert_idle_wait(&l, 1, span);
	test_child_send(&backend, "go\n");
	resp = it_read_response(fd);
	it_assert_ok_body(resp, "path=/block/p1\n");
	free(resp);
	lt_assert_answered(&l, 1, span, "upstream");

	/* The next one on the same client connection, not held. */
	lt_request(req, sizeof(req), "/be/2", 2, "");
	it_send_str(fd, req);
	resp = it_read_response(fd);
	it_assert_ok_body(resp, "path=/be/2\n");
	free(resp);
	lt_assert_traced(&l, TRACE_PREFIX, 2);

	/* The rogue backend's answer, a request head, is read by lighttpd
	 * (which answers 502) and never taken for one. */
	lt_request(req, sizeof(req), "/rogue/3", 3, "Connection: close\r\n");
	it_send_str(fd, req);
	lt_rogue_answer(lfd, nx_traceparent(TRACE_PREFIX, 3, tp));
	resp = it_read_all(fd, NULL);
	close(fd);
	ck_assert_msg(strncmp(resp, "HTTP/1.1 502 ", 13) == 0, "response: %s", resp);
	free(resp);
	lt_assert_traced(&l, TRACE_PREFIX, 3);
	log = it_events(&l.nx.srv);
	ck_assert_msg(!strstr(log, ROGUE_TRACE),
		      "the backend's bytes were taken "
		      "for a request:\n%s",
		      log);
	/* Every attach at a head is one of the three requests'. */
	ck_assert_msg(lt_count(log, " reason=request\n") == 3, "log:\n%s", log);
	free(log);
	lt_assert_no_context(&l, "after the proxied requests");
	lt_stop(&l);
	close(lfd);
	ck_assert_int_eq(test_child_finish(&backend, IT_TIMEOUT_MS), 0);
	free(bpath);
	nx_cleanup(&l.nx);
}
END_TEST

/* ---- 4. HTTPS and HTTP/2, with curl ---- */

/* Start curl (without the shim) on url with request k's headers and the
 * extra options; it prints the body, then "HTTP <version>". */
static void
lt_curl_start(struct test_child *c,
	      const char *const opts[],
	      const char *url,
	      unsigned k)
{
	char tp[128], rid[48], *argv[24];
	size_t n = 0;

	nx_traceparent(TRACE_PREFIX, k, tp);
	tp[strlen(tp) - 2] = '\0'; /* without its CRLF */
	snprintf(rid, sizeof(rid), "x-request-id: lt-%u", k);
	argv[n++] = CURL;
	argv[n++] = "-sS";
	argv[n++] = "--max-time";
	argv[n++] = "20";
	argv[n++] = "-w";
	argv[n++] = "HTTP %{http_version}\\n";
	argv[n++] = "-H";
	argv[n++] = tp;
	argv[n++] = "-H";
	argv[n++] = rid;
	while (*opts)
		argv[n++] = (char *)*opts++;
	argv[n++] = (char *)url;
	argv[n] = NULL;
	test_child_start(c, argv, NULL, false);
}

/* curl's output: the held page, then the protocol version it spoke. */
static void
lt_curl_finish(struct test_child *c, const char *version)
{
	char line[256], want[32];

	test_child_expect(c, "before got go", line, sizeof(line), IT_TIMEOUT_MS);
	test_child_expect(c, " after", line, sizeof(line), IT_TIMEOUT_MS);
	test_child_expect(c, "HTTP ", line, sizeof(line), IT_TIMEOUT_MS);
	snprintf(want, sizeof(want), "HTTP %s", version);
	ck_assert_str_eq(line, want);
	ck_assert_int_eq(test_child_finish(c, IT_TIMEOUT_MS), 0);
}

/* Request k to url with curl (opts), held in its exec command: the
 * context lighttpd publishes meanwhile is the request's (want_ctx) or
 * none; after the response, none is left.  curl spoke version. */
static void
lt_curl_held(struct lt_server *l,
	     const char *const opts[],
	     const char *url,
	     unsigned k,
	     bool want_ctx,
	     const char *version)
{
	pid_t pid = l->nx.srv.child.pid;
	struct test_child curl;
	char trace[33], *json;
	int hold;

	nx_trace(TRACE_PREFIX, k, trace);
	lt_curl_start(&curl, opts, url, k);
	hold = lt_fifo_held(l);
	if (want_ctx) {
		lt_assert_blocked_inside(l, k, "/hold.shtml");
	} else {
		test_wait_syscall(pid, pid, SYS_wait4, IT_TIMEOUT_MS);
		json = it_ctxdump(pid);
		ck_assert_msg(!strstr(json, "\"trace_id\""),
			      "%s: a context is published:\n%s", url, json);
		free(json);
	}
	lt_fifo_release(hold);
	lt_curl_finish(&curl, version);
	if (want_ctx)
		it_wait_detached(&l->nx.srv, pid, trace, NULL);
	lt_assert_no_context(l, url);
}

/* HTTP/1.1 over TLS: the held exec command shows the request. */
START_TEST(test_lighttpd_https)
{
	static const char *const opts[] = {"-k", "--http1.1", NULL};
	struct lt_server l;
	char url[128], trace[33];

	lt_setup(&l, true);
	lt_start(&l, true);
	snprintf(url, sizeof(url), "https://127.0.0.1:%u/hold.shtml?x=1", l.tls_port);
	lt_curl_held(&l, opts, url, 1, true, "1.1");
	it_assert_gone(&l.nx.srv, l.nx.srv.child.pid, nx_trace(TRACE_PREFIX, 1, trace));
	lt_stop(&l);
	nx_cleanup(&l.nx);
}
END_TEST

/* HTTP/2, which lighttpd speaks itself: h2 over TLS (ALPN) and h2c with
 * prior knowledge are followed by the socket level's HTTP/2 scanner
 * (old: no context); h2c by Upgrade starts as an HTTP/1.1 head.  Each
 * way the held request shows, lighttpd answers, and nothing is left
 * published. */
START_TEST(test_lighttpd_h2c)
{
	static const char *const prior[] = {"--http2-prior-knowledge", NULL};
	static const char *const upgrade[] = {"--http2", NULL};
	struct lt_server l;
	char url[128];

	lt_setup(&l, false);
	lt_start(&l, true);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/hold.shtml", l.nx.srv.port);
	lt_curl_held(&l, prior, url, 1, true, "2");
	lt_curl_held(&l, upgrade, url, 2, true, "2");
	lt_stop(&l);
	nx_cleanup(&l.nx);
}
END_TEST

/* Three requests on one connection upgraded by "Upgrade: h2c" (curl
 * --http2 with three URLs, each with its own traceparent): stream 1, the
 * upgrade request, held in its exec command, shows its own context (the
 * head's); streams 3 and 5 are each attached once at their header block
 * with a span of their own and released (old: never attached), and the
 * upgrade request's context never comes back once stream 3 arrived (old:
 * on the write of each later stream's response, reason "write"). */
START_TEST(test_lighttpd_h2c_streams)
{
	pid_t pid;
	struct test_child curl;
	struct lt_server l;
	char url[3][128], tp[3][128], rid[3][48], line[256], trace[33], *log;
	const char *p, *second;
	char *argv[40];
	size_t n = 0;
	int hold;
	unsigned k;

	lt_setup(&l, false);
	lt_start(&l, true);
	pid = l.nx.srv.child.pid;
	argv[n++] = CURL;
	for (k = 0; k < 3; k++) {
		snprintf(url[k], sizeof(url[k]), "http://127.0.0.1:%u/%s",
			 l.nx.srv.port, k == 0 ? "hold.shtml" : "index.html");
		nx_traceparent(TRACE_PREFIX, 11 + k, tp[k]);
		tp[k][strlen(tp[k]) - 2] = '\0'; /* without its CRLF */
		snprintf(rid[k], sizeof(rid[k]), "x-request-id: lt-%u", 11 + k);
		if (k)
			argv[n++] = "--next";
		argv[n++] = "-sS";
		argv[n++] = "--max-time";
		argv[n++] = "20";
		argv[n++] = "--http2";
		argv[n++] = "-w";
		argv[n++] = "HTTP %{http_version}\\n";
		argv[n++] = "-H";
		argv[n++] = tp[k];
		argv[n++] = "-H";
		argv[n++] = rid[k];
		argv[n++] = url[k];
	}
	argv[n] = NULL;
	test_child_start(&curl, argv, NULL, false);

	/* Stream 1: the upgrade request. */
	hold = lt_fifo_held(&l);
	lt_assert_blocked_inside(&l, 11, "/hold.shtml");
	lt_fifo_release(hold);
	test_child_expect(&curl, "before got go", line, sizeof(line), IT_TIMEOUT_MS);
	test_child_expect(&curl, " after", line, sizeof(line), IT_TIMEOUT_MS);
	for (k = 0; k < 3; k++) {
		if (k)
			test_child_expect(&curl, "<html>ctxshim</html>", line,
					  sizeof(line), IT_TIMEOUT_MS);
		test_child_expect(&curl, "HTTP ", line, sizeof(line), IT_TIMEOUT_MS);
		ck_assert_str_eq(line, "HTTP 2");
	}
	ck_assert_int_eq(test_child_finish(&curl, IT_TIMEOUT_MS), 0);

	/* Streams 3 and 5: their own contexts. */
	lt_assert_traced(&l, TRACE_PREFIX, 12);
	lt_assert_traced(&l, TRACE_PREFIX, 13);
	/* Nothing of the upgrade request from stream 3 on. */
	log = it_events(&l.nx.srv);
	second = strstr(log, nx_trace(TRACE_PREFIX, 12, trace));
	ck_assert_ptr_nonnull(second);
	nx_trace(TRACE_PREFIX, 11, trace);
	for (p = second; (p = strstr(p, " attach trace=")); p++)
		ck_assert_msg(strncmp(p + 14, trace, 32) != 0,
			      "the upgrade request came back after stream 3:\n%s", log);
	ck_assert_msg(it_events_count(log, trace, "request") == 1, "log:\n%s", log);
	free(log);
	for (k = 11; k <= 13; k++)
		it_assert_gone(&l.nx.srv, pid, nx_trace(TRACE_PREFIX, k, trace));
	lt_assert_no_context(&l, "after the upgraded connection");
	lt_stop(&l);
	nx_cleanup(&l.nx);
}
END_TEST

START_TEST(test_lighttpd_h2_tls)
{
	static const char *const opts[] = {"-k", "--http2", NULL};
	struct lt_server l;
	char url[128];

	lt_setup(&l, true);
	lt_start(&l, true);
	snprintf(url, sizeof(url), "https://127.0.0.1:%u/hold.shtml", l.tls_port);
	lt_curl_held(&l, opts, url, 1, true, "2");
	lt_stop(&l);
	nx_cleanup(&l.nx);
}
END_TEST

TEST_SUITE(lighttpd_suite)
{
	Suite *s = suite_create("integration-lighttpd");
	TCase *tc = tcase_create("lighttpd");

	if (access(LIGHTTPD, X_OK) != 0)
		test_skip("%s is not installed (Debian: apt-get install lighttpd)",
			  LIGHTTPD);
	if (access(SETPRIV, X_OK) != 0)
		test_skip("%s is not installed (Debian: util-linux)", SETPRIV);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_lighttpd_held);
	tcase_add_test(tc, test_lighttpd_exec_traceparent);
	tcase_add_test(tc, test_lighttpd_same_bytes);
	tcase_add_test(tc, test_lighttpd_proxy);
	if (access(CURL, X_OK) == 0) {
		tcase_add_test(tc, test_lighttpd_h2c);
		tcase_add_test(tc, test_lighttpd_h2c_streams);
	} else {
		fprintf(stderr, "note: no %s: HTTP/2 not tested\n", CURL);
	}
	/* HTTPS needs lighttpd's TLS module (Debian: lighttpd-mod-openssl),
	 * curl and openssl(1) for the certificate. */
	if (access(LT_MOD_SSL, R_OK) == 0 && access(CURL, X_OK) == 0 &&
	    access(NX_OPENSSL, X_OK) == 0) {
		tcase_add_test(tc, test_lighttpd_https);
		tcase_add_test(tc, test_lighttpd_h2_tls);
	} else {
		fprintf(stderr, "note: no %s, %s or %s: HTTPS not tested\n", LT_MOD_SSL,
			CURL, NX_OPENSSL);
	}
	suite_add_tcase(s, tc);
	return s;
}
