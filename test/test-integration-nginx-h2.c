/* SPDX-License-Identifier: Apache-2.0 */
/* nginx from Debian with its own HTTP/2 code under the shim, followed at
 * the socket level (preload/conn.c, "HTTP/2"): "listen ... ssl http2"
 * (ALPN h2, the plaintext from the TLS hooks) and "listen ... http2" (h2c
 * with prior knowledge), one worker.  To read the worker's record while
 * a request runs, its access log is a FIFO the test fills: the worker
 * blocks in the log write of the request, after its response, before it
 * goes back to epoll_wait() (as test-integration-tls.c's early-data test).
 * Two FIFOs, chosen by the request's traceparent (map, access_log if=),
 * so that the second request of a connection blocks too once the first
 * one's line went through.
 *
 *  - curl --http2 over TLS, and curl --http2-prior-knowledge in clear, two
 *    requests on one connection (curl URL --next URL: the second one's
 *    :path an indexed field of the dynamic table), each with a
 *    traceparent: while each runs, the worker shows its trace, a new
 *    span-id (a child of the traceparent), GET and the path; each is
 *    attached once, with one span, and detached at the next wait.  Old:
 *    no context at all (the HTTP scanner gave up on "PRI").
 *  - helpers/h2-frames on h2c, one connection: a request whose preface
 *    and frames come in pieces, one read each (split in "PRI", inside the
 *    SETTINGS frame's header and inside the traceparent's literal), is
 *    shown; two requests in one read are not (event log and ctxdump:
 *    nginx runs both handlers while it parses the read, nothing tells
 *    which one runs); a later request on the connection is shown again,
 *    with its path from the dynamic table.
 *  - helpers/h2-frames over TLS, one TLS record per piece: the preface
 *    split across records is followed as in one. */
#include "test-common.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test-integration.h"
#include "test-nginx.h"
#pragma GCC diagnostic pop

#include <sys/syscall.h>

#define NGINX NX_NGINX
#define TA    "4bf92f3577b34da6a3ce929d0e0e4a01"
#define PA    "00f067aa0ba902a1"
#define TB    "4bf92f3577b34da6a3ce929d0e0e4b02"
#define PB    "00f067aa0ba902b2"
#define TF(k) "4bf92f3577b34da6a3ce929d0e0e4f0" #k
#define PF    "00f067aa0ba902f0"

struct h2n {
	struct nx_server nx;
	unsigned tls_port, h2c_port;
	char fifo_a[160], fifo_b[160];
	int fa, fb; /* the FIFOs, read side, nonblocking */
};

static int
fifo_make(const char *path)
{
	int fd;

	ck_assert_int_eq(mkfifo(path, 0666), 0);
	/* Opened before nginx does (its open for writing would wait for a
	 * reader); small, so that a few bytes fill it. */
	fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	(void)fcntl(fd, F_SETPIPE_SZ, 4096);
	return fd;
}

/* Fill the FIFO: the worker's next log write to it blocks. */
static void
fifo_fill(int fd)
{
	char nl[256];

	memset(nl, '\n', sizeof(nl));
	while (write(fd, nl, sizeof(nl)) > 0)
		;
	ck_assert_int_eq(errno, EAGAIN);
	while (write(fd, nl, 1) > 0)
		;
	ck_assert_int_eq(errno, EAGAIN);
}

/* Read the FIFO until a log line containing want went by, then empty it;
 * that line (without its newline) in line. */
static void
fifo_drain(int fd, const char *want, char *line, size_t cap)
{
	long deadline = test_now_ms() + IT_TIMEOUT_MS;
	char buf[4096], acc[16384] = "";
	size_t al = 0;
	const char *hit = NULL;

	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t r = read(fd, buf, sizeof(buf));

		if (r > 0) {
			size_t i;

			/* the newlines of the filling are left out */
			for (i = 0; i < (size_t)r; i++)
				if ((buf[i] != '\n' || (al && acc[al - 1] != '\n')) &&
				    al + 1 < sizeof(acc))
					acc[al++] = buf[i];
			acc[al] = '\0';
			hit = strstr(acc, want);
			continue;
		}
		ck_assert_int_eq(errno, EAGAIN);
		if (hit) {
			const char *b = hit, *e = strchr(hit, '\n');

			while (b > acc && b[-1] != '\n')
				b--;
			snprintf(line, cap, "%.*s", e ? (int)(e - b) : (int)strlen(b),
				 b);
			return;
		}
		ck_assert_msg(test_now_ms() < deadline, "no access log line with %s",
			      want);
		(void)poll(&pfd, 1, 100);
	}
}

/* nginx with both listeners; the TLS port is the one nx_launch() waits
 * for, and the first it listens on. */
static void
h2n_start_extra(struct h2n *n, const char *extra)
{
	char dir[64], conf[4096], cert[128], key[128];
	char *argv[] = {NGINX,      "-p", n->nx.dir, "-c",
			n->nx.conf, "-e", n->nx.err, NULL};
	int len;

	memset(n, 0, sizeof(*n));
	snprintf(dir, sizeof(dir), "/tmp/ctxshim-nginx-h2-XXXXXX");
	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	/* Workers run as nobody when the test runs as root. */
	ck_assert_int_eq(chmod(dir, 0755), 0);
	nx_setup(&n->nx, dir, "<html>ctxshim h2</html>\n", 1024);
	nx_self_signed(dir, cert, key);
	snprintf(n->fifo_a, sizeof(n->fifo_a), "%s/a.fifo", dir);
	snprintf(n->fifo_b, sizeof(n->fifo_b), "%s/b.fifo", dir);
	n->fa = fifo_make(n->fifo_a);
	n->fb = fifo_make(n->fifo_b);
	n->tls_port = nx_free_port();
	do
		n->h2c_port = nx_free_port();
	while (n->h2c_port == n->tls_port);
	len = snprintf(conf, sizeof(conf),
		       "worker_processes 1;\n"
		       "daemon off;\n"
		       "master_process on;\n"
		       "pid %1$s/nginx.pid;\n"
		       "error_log %1$s/error.log info;\n"
		       "events { worker_connections 64; }\n"
		       "http {\n"
		       "  client_body_temp_path %1$s/body;\n"
		       "  proxy_temp_path %1$s/proxy;\n"
		       "  fastcgi_temp_path %1$s/fastcgi;\n"
		       "  uwsgi_temp_path %1$s/uwsgi;\n"
		       "  scgi_temp_path %1$s/scgi;\n"
		       "  log_format tp 'conn=$connection $http_traceparent';\n"
		       "  map $http_traceparent $to_a { \"~-" TA "-\" 1; default 0; }\n"
		       "  map $http_traceparent $to_b { \"~-" TA "-\" 0; default 1; }\n"
		       "  access_log %2$s tp if=$to_a;\n"
		       "  access_log %3$s tp if=$to_b;\n"
		       "  server {\n"
		       "    listen 127.0.0.1:%4$u ssl http2;\n"
		       "    listen 127.0.0.1:%5$u http2;\n"
		       "    ssl_certificate %6$s;\n"
		       "    ssl_certificate_key %7$s;\n"
		       "    root %1$s/www;\n"
		       "%8$s"
		       "  }\n"
		       "}\n",
		       dir, n->fifo_a, n->fifo_b, n->tls_port, n->h2c_port, cert, key,
		       extra);
	ck_assert_int_lt(len, (int)sizeof(conf));
	nx_write_file(n->nx.conf, conf, (size_t)len);
	n->nx.srv.port = n->tls_port;
	nx_launch(&n->nx, argv, true, "nginx");
}

static void
h2n_start(struct h2n *n)
{
	h2n_start_extra(n, "");
}

static void
h2n_stop(struct h2n *n)
{
	nx_stop(&n->nx);
	close(n->fa);
	close(n->fb);
	nx_cleanup(&n->nx);
}

static void
assert_no_ctx(long worker)
{
	char *json = it_ctxdump((pid_t)worker);
	struct it_thread_ctx t;

	ck_assert_msg(it_dump_thread(json, worker, &t), "worker %ld not listed:\n%s",
		      worker, json);
	ck_assert_msg(!t.has_ctx, "worker %ld shows %s:\n%s", worker, t.trace, json);
	free(json);
}

/* Attached once by its request, with one span-id, then detached. */
static void
assert_once(const char *log, const char *trace)
{
	ck_assert_msg(it_events_count(log, trace, "request") == 1 &&
			      it_events_spans(log, trace, NULL) == 1,
		      "%s not attached exactly once, with one span:\n%s", trace, log);
}

/* curl, two requests on one connection (loop index 0: https, ALPN h2; 1:
 * h2c with prior knowledge). */
START_TEST(test_nginx_h2_curl)
{
	struct h2n n;
	struct test_child curl;
	char url[96], line_a[256], line_b[256], span_a[17], span_b[17], *log;
	const char *proto = _i == 0 ? "--http2" : "--http2-prior-knowledge";
	/* The second transfer reuses the connection; curl 7.88 fails it
	 * ("Error in the HTTP2 framing layer", without the shim too) when
	 * --http2-prior-knowledge is given again. */
	char *argv[] = {"/usr/bin/curl",
			"-s",
			"-k",
			(char *)proto,
			"-o",
			"/dev/null",
			"-H",
			"traceparent: 00-" TA "-" PA "-01",
			url,
			"--next",
			"-s",
			"-k",
			_i == 0 ? (char *)proto : "-s",
			"-o",
			"/dev/null",
			"-H",
			"traceparent: 00-" TB "-" PB "-01",
			url,
			NULL};
	long worker;

	h2n_start(&n);
	if (_i == 0)
		snprintf(url, sizeof(url), "https://127.0.0.1:%u/index.html",
			 n.tls_port);
	else
		snprintf(url, sizeof(url), "http://127.0.0.1:%u/index.html",
			 n.h2c_port);
	fifo_fill(n.fa);
	fifo_fill(n.fb);
	test_child_start(&curl, argv, NULL, false);

	worker = nx_wait_attach_tid(&n.nx.srv, TA);
	ck_assert_int_ne(worker, n.nx.srv.child.pid);
	it_assert_get(worker, TA, PA, "/index.html", span_a);
	fifo_drain(n.fa, TA, line_a, sizeof(line_a));

	/* The second request, once the first one's log line went through. */
	ck_assert_int_eq(nx_wait_attach_tid(&n.nx.srv, TB), worker);
	it_assert_get(worker, TB, PB, "/index.html", span_b);
	ck_assert_str_ne(span_a, span_b);
	fifo_drain(n.fb, TB, line_b, sizeof(line_b));
	/* One connection: nginx's connection serial number. */
	ck_assert_msg(strncmp(line_a, line_b, strcspn(line_a, " ")) == 0,
		      "not one connection: %s / %s", line_a, line_b);
	ck_assert_int_eq(test_child_finish(&curl, IT_TIMEOUT_MS), 0);
	it_wait_detached(&n.nx.srv, worker, TB, NULL);

	log = it_events(&n.nx.srv);
	assert_once(log, TA);
	assert_once(log, TB);
	free(log);
	h2n_stop(&n);
}
END_TEST

static void
frames(struct test_child *c, const char *cmds, const char *want)
{
	char line[256];

	test_child_send(c, cmds);
	test_child_expect(c, want, line, sizeof(line), IT_TIMEOUT_MS);
}

/* helpers/h2-frames on h2c: a split request, two in one read, one more. */
START_TEST(test_nginx_h2_frames)
{
	struct h2n n;
	struct test_child cl;
	char port[16], line[256], *log;
	char *argv[] = {(char *)test_helper_path("h2-frames"), port, NULL};
	long worker;

	h2n_start(&n);
	snprintf(port, sizeof(port), "%u", n.h2c_port);
	test_child_start(&cl, argv, NULL, false);
	test_child_expect(&cl, "READY ", line, sizeof(line), IT_TIMEOUT_MS);

	/* The preface and a request in pieces, each read on its own: "PR",
	 * then the rest of the preface and 8 bytes of the SETTINGS frame's
	 * header, then its last byte, the HEADERS frame's header and the
	 * first 10 bytes of its block, then the rest. */
	fifo_fill(n.fb);
	frames(&cl,
	       "PREFACE\nHEADERS 1 /index.html 00-" TF(1) "-" PF "-01\n"
							  "WRITE 2,30,20\n",
	       "WROTE");
	worker = nx_wait_attach_tid(&n.nx.srv, TF(1));
	it_assert_get(worker, TF(1), PF, "/index.html", NULL);
	frames(&cl, "WAIT 1\n", "RESP 1");
	fifo_drain(n.fb, TF(1), line, sizeof(line));
	it_wait_detached(&n.nx.srv, worker, TF(1), "epoll_wait");

	/* Two requests in one read: neither is shown, while nginx blocks
	 * in the log write of the first. */
	fifo_fill(n.fb);
	frames(&cl,
	       "HEADERS 3 /index.html 00-" TF(3) "-" PF "-01\n"
						 "HEADERS 5 /index.html 00-" TF(
							 5) "-" PF "-01\n"
							    "WRITE 0\n",
	       "WROTE");
	test_wait_syscall((pid_t)worker, (pid_t)worker, SYS_write, IT_TIMEOUT_MS);
	assert_no_ctx(worker);
	fifo_drain(n.fb, TF(5), line, sizeof(line));
	frames(&cl, "WAIT 3 5\n", "RESP 3 5");

	/* The next request on the connection is shown again. */
	fifo_fill(n.fb);
	frames(&cl, "HEADERS 7 /index.html 00-" TF(7) "-" PF "-01\nWRITE 0\n", "WROTE");
	ck_assert_int_eq(nx_wait_attach_tid(&n.nx.srv, TF(7)), worker);
	it_assert_get(worker, TF(7), PF, "/index.html", NULL);
	frames(&cl, "WAIT 7\n", "RESP 7");
	fifo_drain(n.fb, TF(7), line, sizeof(line));
	ck_assert_int_eq(test_child_finish(&cl, IT_TIMEOUT_MS), 0);
	it_wait_detached(&n.nx.srv, worker, TF(7), NULL);

	log = it_events(&n.nx.srv);
	assert_once(log, TF(1));
	assert_once(log, TF(7));
	ck_assert_msg(!strstr(log, TF(3)) && !strstr(log, TF(5)),
		      "a request of the read with two was shown:\n%s", log);
	free(log);
	h2n_stop(&n);
}
END_TEST

/* helpers/h2-frames over TLS (ALPN h2), each piece one TLS record, so
 * one SSL_read of nginx's: the preface split across records, "PRI *
 * HTTP/2.0\r\n" in one and the rest with the frames in the next (a
 * client writing it so), or cut right after "PRI" (where the HTTP
 * scanner gives up: at the next record's first byte) and again after the
 * request line; the request is shown, attached once. */
static const char *const tls_split[] = {"16", "3,13,8"};

START_TEST(test_nginx_h2_tls_split)
{
	struct h2n n;
	struct test_child cl;
	char port[16], line[256], cmds[256], *log;
	char *argv[] = {(char *)test_helper_path("h2-frames"), port, "tls", NULL};
	long worker;

	h2n_start(&n);
	snprintf(port, sizeof(port), "%u", n.tls_port);
	test_child_start(&cl, argv, NULL, false);
	test_child_expect(&cl, "READY ", line, sizeof(line), IT_TIMEOUT_MS);
	fifo_fill(n.fb);
	snprintf(cmds, sizeof(cmds),
		 "PREFACE\nHEADERS 1 /index.html 00-" TF(1) "-" PF "-01\nWRITE %s\n",
		 tls_split[_i]);
	frames(&cl, cmds, "WROTE");
	worker = nx_wait_attach_tid(&n.nx.srv, TF(1));
	it_assert_get(worker, TF(1), PF, "/index.html", NULL);
	frames(&cl, "WAIT 1\n", "RESP 1");
	fifo_drain(n.fb, TF(1), line, sizeof(line));
	ck_assert_int_eq(test_child_finish(&cl, IT_TIMEOUT_MS), 0);
	it_wait_detached(&n.nx.srv, worker, TF(1), NULL);
	log = it_events(&n.nx.srv);
	assert_once(log, TF(1));
	free(log);
	h2n_stop(&n);
}
END_TEST

#define TC(k) "4bf92f3577b34da6a3ce929d0e0e4c0" #k
#define PC    "00f067aa0ba902c0"

/* nginx as a reverse proxy over HTTP/2 (loop index 0: https, ALPN h2; 1:
 * h2c with prior knowledge), proxy_pass to tpc-server (without the
 * shim), which holds each request until told: three requests on one
 * connection, the first one in the client's first flight (preface,
 * SETTINGS, HEADERS), the third a POST with a body.  While the backend
 * holds a request, the worker let it go in its wait; the backend's answer
 * read from the upstream must show it again (reason "upstream"), as with
 * HTTP/1 (test-integration-nginx.c).  Old: nginx's own frames (its
 * SETTINGS, the SETTINGS ACK, a WINDOW_UPDATE for the body), written
 * after the request went to the backend, counted as the response: the
 * request was answered and its upstream read showed nothing. */
START_TEST(test_nginx_h2_proxy)
{
	struct h2n n;
	struct test_child backend, curl;
	char backend_path[4096], line[256], extra[256], url[3][96], body[64];
	char tp[3][96], *log, miss[512] = "";
	char *backend_argv[] = {backend_path, NULL};
	const char *proto = _i == 0 ? "--http2" : "--http2-prior-knowledge";
	/* As in test_nginx_h2_curl: the proto once for h2c. */
	char *argv[] = {"/usr/bin/curl",
			"-s",
			"-k",
			(char *)proto,
			"-o",
			"/dev/null",
			"-H",
			tp[0],
			url[0],
			"--next",
			"-s",
			"-k",
			_i == 0 ? (char *)proto : "-s",
			"-o",
			"/dev/null",
			"-H",
			tp[1],
			url[1],
			"--next",
			"-s",
			"-k",
			_i == 0 ? (char *)proto : "-s",
			"-o",
			"/dev/null",
			"-H",
			tp[2],
			"--data-binary",
			body,
			url[2],
			NULL};
	static const char *const traces[3] = {TC(1), TC(2), TC(3)};
	unsigned backend_port, k, up0;
	long worker = -1;
	int len;

	snprintf(backend_path, sizeof(backend_path), "%s",
		 test_helper_path("tpc-server"));
	test_child_start(&backend, backend_argv, NULL, false);
	test_child_expect(&backend, "READY ", line, sizeof(line), IT_TIMEOUT_MS);
	backend_port = (unsigned)strtoul(line + 6, NULL, 10);
	ck_assert_uint_gt(backend_port, 0);
	len = snprintf(extra, sizeof(extra),
		       "    location /block/ {\n"
		       "      proxy_pass http://127.0.0.1:%u;\n"
		       "    }\n",
		       backend_port);
	ck_assert_int_lt(len, (int)sizeof(extra));
	h2n_start_extra(&n, extra);
	for (k = 0; k < 3; k++) {
		snprintf(url[k], sizeof(url[k]), "%s://127.0.0.1:%u/block/%u",
			 _i == 0 ? "https" : "http", _i == 0 ? n.tls_port : n.h2c_port,
			 k + 1);
		snprintf(tp[k], sizeof(tp[k]), "traceparent: 00-%s-" PC "-01",
			 traces[k]);
	}
	memset(body, 'b', sizeof(body) - 1);
	body[sizeof(body) - 1] = '\0';
	test_child_start(&curl, argv, NULL, false);

	for (k = 0; k < 3; k++) {
		long tid;

		test_child_expect(&backend, "BLOCK ", line, sizeof(line),
				  IT_TIMEOUT_MS);
		ck_assert_ptr_nonnull(strstr(line, " /block/"));
		/* Shown from its header block until the worker's wait, once
		 * the request went to the backend. */
		tid = nx_wait_attach_tid(&n.nx.srv, traces[k]);
		ck_assert_int_ne(tid, n.nx.srv.child.pid);
		if (worker < 0)
			worker = tid;
		ck_assert_int_eq(tid, worker);
		it_wait_detached(&n.nx.srv, tid, traces[k], "epoll_wait");
		log = it_events(&n.nx.srv);
		up0 = it_events_count(log, traces[k], "upstream");
		free(log);
		test_child_send(&backend, "go\n");
		/* The response went out once curl sent the next request (or
		 * ended) and the worker let this one go.  (Not the backend's
		 * "DONE" line: its thread may print it after the next
		 * request's "BLOCK".) */
		if (k == 2) {
			ck_assert_int_eq(test_child_finish(&curl, IT_TIMEOUT_MS), 0);
			it_wait_detached(&n.nx.srv, worker, traces[k], NULL);
		} else {
			(void)nx_wait_attach_tid(&n.nx.srv, traces[k + 1]);
		}
		log = it_events(&n.nx.srv);
		if (it_events_count(log, traces[k], "upstream") <= up0)
			snprintf(miss + strlen(miss), sizeof(miss) - strlen(miss),
				 " %u", k + 1);
		assert_once(log, traces[k]);
		free(log);
	}
	log = it_events(&n.nx.srv);
	ck_assert_msg(!miss[0],
		      "the backend's answer to request(s)%s was read with no "
		      "context:\n%s",
		      miss, log);
	free(log);
	h2n_stop(&n);
	ck_assert_int_eq(test_child_finish(&backend, IT_TIMEOUT_MS), 0);
}
END_TEST

#define TD(k) "4bf92f3577b34da6a3ce929d0e0e4d0" #k

/* The events of trace with reason "upstream", once there are more than
 * n (polling the event log). */
static unsigned
wait_upstream(struct h2n *n, const char *trace, unsigned more_than)
{
	long deadline = test_now_ms() + IT_TIMEOUT_MS;

	for (;;) {
		char *log = it_events(&n->nx.srv);
		unsigned k = it_events_count(log, trace, "upstream");

		if (k > more_than) {
			free(log);
			return k;
		}
		ck_assert_msg(
			test_now_ms() < deadline,
			"the backend's answer to %s was read with no context:\n%s",
			trace, log);
		free(log);
		usleep(5000);
	}
}

/* nginx proxying /own/ to a backend that the test plays (the listening
 * socket returned), helpers/h2-frames started as its h2c client in *cl. */
static int
own_backend(struct h2n *n, struct test_child *cl, bool unbuffered)
{
	static char port[16];
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);
	char line[256], extra[256];
	char *argv[] = {(char *)test_helper_path("h2-frames"), port, NULL};
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), len;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(lfd, 4), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
	len = snprintf(extra, sizeof(extra),
		       "    location /own/ {\n"
		       "      proxy_pass http://127.0.0.1:%u;\n"
		       "%s"
		       "    }\n",
		       ntohs(a.sin_port),
		       unbuffered ? "      proxy_buffering off;\n" : "");
	ck_assert_int_lt(len, (int)sizeof(extra));
	h2n_start_extra(n, extra);
	snprintf(port, sizeof(port), "%u", n->h2c_port);
	test_child_start(cl, argv, NULL, false);
	test_child_expect(cl, "READY ", line, sizeof(line), IT_TIMEOUT_MS);
	return lfd;
}

/* nginx's connection to the backend of own_backend() (listening on lfd),
 * its request head read into *head (malloc'd). */
static int
own_accept(int lfd, char **head)
{
	struct pollfd p = {.fd = lfd, .events = POLLIN};
	size_t hl = 0, hc = 0;
	int ufd;

	ck_assert_msg(poll(&p, 1, IT_TIMEOUT_MS) == 1, "nginx never connected");
	ufd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(ufd, 0);
	*head = NULL;
	while (!*head || !strstr(*head, "\r\n\r\n"))
		ck_assert_msg(it_read_some(ufd, head, &hl, &hc),
			      "nginx closed before its request head");
	return ufd;
}

/* nginx as a reverse proxy over h2c, with helpers/h2-frames as the client
 * and the test as the backend (proxy_buffering off: each piece of the
 * backend's answer is read and sent on as it comes): the first request's
 * HEADERS in the same read as the preface and SETTINGS (nginx handles it,
 * the request goes to the backend, and then it writes its SETTINGS,
 * WINDOW_UPDATE and the SETTINGS ACK: old, that write answered the
 * request), then a later one on the connection.  The backend's response
 * head (and some of the body) read shows the request again ("upstream");
 * nginx writes the response's HEADERS frame then, which answers it: the
 * rest of the body read from the backend shows it no more, as with
 * HTTP/1 (hooks/hook-socket.c, "Upstreams"). */
START_TEST(test_nginx_h2_proxy_frames)
{
	static const char part1[] = "HTTP/1.1 200 OK\r\nContent-Length: 20\r\n"
				    "Content-Type: text/plain\r\n\r\n0123456789";
	static const char part2[] = "abcdefghij";
	static const char *const traces[2] = {TD(1), TD(3)};
	struct h2n n;
	struct test_child cl;
	char line[256], cmd[256], *log;
	unsigned k, up0, up1;
	long worker = -1;
	int lfd;

	lfd = own_backend(&n, &cl, true);

	for (k = 0; k < 2; k++) {
		char *head;
		long tid;
		int ufd;

		snprintf(cmd, sizeof(cmd),
			 "%sHEADERS %u /own/%u 00-%s-" PC "-01\nWRITE 0\n",
			 k == 0 ? "PREFACE\n" : "", 2 * k + 1, k + 1, traces[k]);
		frames(&cl, cmd, "WROTE");
		ufd = own_accept(lfd, &head);
		ck_assert_msg(strstr(head, traces[k]), "forwarded head:\n%s", head);
		free(head);
		/* Let go by the worker's wait once the request went out. */
		tid = nx_wait_attach_tid(&n.nx.srv, traces[k]);
		if (worker < 0)
			worker = tid;
		ck_assert_int_eq(tid, worker);
		it_wait_detached(&n.nx.srv, worker, traces[k], "epoll_wait");
		log = it_events(&n.nx.srv);
		up0 = it_events_count(log, traces[k], "upstream");
		free(log);

		/* The head and half the body: shown again, and let go once
		 * the response's HEADERS and DATA went out. */
		it_send(ufd, part1, sizeof(part1) - 1);
		up1 = wait_upstream(&n, traces[k], up0);
		it_wait_detached(&n.nx.srv, worker, traces[k], "epoll_wait");
		/* The rest: the request is answered. */
		it_send(ufd, part2, sizeof(part2) - 1);
		snprintf(cmd, sizeof(cmd), "WAIT %u\n", 2 * k + 1);
		snprintf(line, sizeof(line), "RESP %u", 2 * k + 1);
		frames(&cl, cmd, line);
		close(ufd);
		it_wait_detached(&n.nx.srv, worker, traces[k], NULL);
		log = it_events(&n.nx.srv);
		ck_assert_msg(it_events_count(log, traces[k], "upstream") == up1,
			      "the rest of the body, read after the response's "
			      "HEADERS frame, showed %s again:\n%s",
			      traces[k], log);
		assert_once(log, traces[k]);
		free(log);
	}
	ck_assert_int_eq(test_child_finish(&cl, IT_TIMEOUT_MS), 0);
	close(lfd);
	h2n_stop(&n);
}
END_TEST

/* nginx as a reverse proxy over h2c, helpers/h2-frames as the client:
 * a request sent to the backend (the test), then cancelled by the client
 * (RST_STREAM; nginx closes its upstream), then a PING (nginx reads it and
 * writes its acknowledgement) and another request.  The cancelled request
 * is shown by the read that brings its RST_STREAM, never after it: old,
 * it stayed the connection's current request, and the PING's read and
 * its acknowledgement's write showed it again. */
START_TEST(test_nginx_h2_client_reset)
{
	struct pollfd p;
	struct h2n n;
	struct test_child cl;
	char *log, *head, b;
	unsigned reads, writes;
	long worker;
	int lfd, ufd;

	lfd = own_backend(&n, &cl, false);

	frames(&cl, "PREFACE\nHEADERS 1 /own/1 00-" TD(5) "-" PC "-01\nWRITE 0\n",
	       "WROTE");
	ufd = own_accept(lfd, &head);
	free(head);
	worker = nx_wait_attach_tid(&n.nx.srv, TD(5));
	it_wait_detached(&n.nx.srv, worker, TD(5), "epoll_wait");

	/* The cancel: nginx lets go of its upstream. */
	frames(&cl, "RST 1\nWRITE 0\n", "WROTE");
	p = (struct pollfd){.fd = ufd, .events = POLLIN};
	ck_assert_msg(poll(&p, 1, IT_TIMEOUT_MS) == 1 && read(ufd, &b, 1) == 0,
		      "nginx kept the cancelled request's upstream");
	close(ufd);
	it_wait_detached(&n.nx.srv, worker, TD(5), "epoll_wait");
	log = it_events(&n.nx.srv);
	reads = it_events_count(log, TD(5), "read");
	writes = it_events_count(log, TD(5), "write");
	free(log);

	/* A PING, then a request answered: both handled after the cancel. */
	frames(&cl, "PING\nWRITE 0\n", "WROTE");
	frames(&cl, "HEADERS 3 /index.html 00-" TD(7) "-" PC "-01\nWRITE 0\nWAIT 3\n",
	       "RESP 3");
	ck_assert_int_eq(test_child_finish(&cl, IT_TIMEOUT_MS), 0);
	it_wait_detached(&n.nx.srv, worker, TD(7), NULL);
	log = it_events(&n.nx.srv);
	ck_assert_msg(it_events_count(log, TD(5), "read") == reads &&
			      it_events_count(log, TD(5), "write") == writes,
		      "the cancelled request was shown again after its "
		      "RST_STREAM:\n%s",
		      log);
	assert_once(log, TD(7));
	free(log);
	close(lfd);
	h2n_stop(&n);
}
END_TEST

TEST_SUITE(nginx_h2_suite)
{
	Suite *s = suite_create("integration-nginx-h2");
	TCase *tc = tcase_create("nginx-h2");

	if (access(NGINX, X_OK) != 0)
		test_skip("%s is not installed (Debian: apt-get install nginx-light)",
			  NGINX);
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_nginx_h2_curl, 0, 2);
	tcase_add_test(tc, test_nginx_h2_frames);
	tcase_add_loop_test(tc, test_nginx_h2_tls_split, 0,
			    (int)(sizeof(tls_split) / sizeof(tls_split[0])));
	tcase_add_loop_test(tc, test_nginx_h2_proxy, 0, 2);
	tcase_add_test(tc, test_nginx_h2_proxy_frames);
	tcase_add_test(tc, test_nginx_h2_client_reset);
	suite_add_tcase(s, tc);
	return s;
}
