/* SPDX-License-Identifier: Apache-2.0 */
/* php-fpm from Debian (php8.2-fpm) under the shim: its FastCGI code reads
 * the records from the accepted socket itself, so the socket level
 * follows them (preload/conn.c, "FastCGI").  One worker (pm = static, 1
 * child) runs a PHP script that blocks on a FIFO until the test lets it
 * go; meanwhile ctxdump shows the worker's request:
 *
 * 1. A FastCGI client of our own on a kept connection (FCGI_KEEP_CONN),
 *    its parameters split over records: a traced POST, then an untraced
 *    GET on the same connection, each with its own context (the trace
 *    continued with a new span and the client's parent, or a new trace;
 *    method, path without the query, x-request-id), and none once each is
 *    answered.
 * 2. nginx (not under the shim) passing an HTTP request to php-fpm:
 *    the same, from nginx's own records, and the response is the
 *    script's.
 * 3. Parameters sent twice (a fastcgi_param over one of
 *    fastcgi_params, a header the client sent twice): the script sees the
 *    last, and so does the worker's context.
 * 4. A request without FCGI_KEEP_CONN followed by another: php-fpm
 *    answers the first, then reads the rest of the stream until the
 *    client closes, and never runs the second, which the worker must not
 *    show meanwhile. */
#include "test-common.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test-integration.h"
#include "test-nginx.h"
#pragma GCC diagnostic pop

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define PHPFPM "/usr/sbin/php-fpm8.2"

#define TP_TRACE  "4bf92f3577b34da6a3ce929d0e0e4736"
#define TP_PARENT "00f067aa0ba902b7"
#define TP        "00-" TP_TRACE "-" TP_PARENT "-01"
#define TP2_TRACE "0af7651916cd43dd8448eb211c80319c"
#define TP2       "00-" TP2_TRACE "-" TP_PARENT "-01"

/* The script: tells the test its pid and request through the FIFO "in",
 * then waits for a line on the FIFO "go". */
static const char script[] = "<?php\n"
			     "$d = __DIR__;\n"
			     "file_put_contents(\"$d/in\", getmypid() . ' ' .\n"
			     "  $_SERVER['REQUEST_URI'] . \"\\n\");\n"
			     "$g = fopen(\"$d/go\", 'r');\n"
			     "fgets($g);\n"
			     "fclose($g);\n"
			     "echo 'done ', $_SERVER['REQUEST_URI'], \"\\n\";\n";

/* A failed check ends the test's process (Check's fork mode): php-fpm's
 * master, its worker (blocked on a FIFO, say) and nginx would live on,
 * holding the output meson waits on.  Their pids go to memory shared with
 * the test runner, whose unchecked teardown kills what is still there
 * (each master's children, the worker, first). */
#define FPM_PIDS 8
static pid_t *fpm_pids;

static void
fpm_pids_setup(void)
{
	fpm_pids = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			-1, 0);
	ck_assert_ptr_ne(fpm_pids, MAP_FAILED);
}

static void
fpm_pids_teardown(void)
{
	unsigned i;

	for (i = 0; i < FPM_PIDS; i++) {
		char path[64], kids[256];
		pid_t pid = fpm_pids[i];
		FILE *f;

		if (pid <= 0)
			continue;
		fpm_pids[i] = 0;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid,
			 (int)pid);
		f = fopen(path, "re");
		if (f && fgets(kids, sizeof(kids), f)) {
			char *p = kids, *end;
			long k;

			while ((k = strtol(p, &end, 10)) > 0 && end != p) {
				kill((pid_t)k, SIGKILL);
				p = end;
			}
		}
		if (f)
			fclose(f);
		kill(pid, SIGKILL);
	}
	munmap(fpm_pids, 4096);
}

static void
fpm_pids_add(pid_t pid)
{
	unsigned i;

	for (i = 0; i < FPM_PIDS; i++)
		if (fpm_pids[i] <= 0) {
			fpm_pids[i] = pid;
			return;
		}
}

static void
fpm_pids_del(pid_t pid)
{
	unsigned i;

	for (i = 0; i < FPM_PIDS; i++)
		if (fpm_pids[i] == pid)
			fpm_pids[i] = 0;
}

/* A worker, once its script started: a failed check may leave it blocked
 * on the FIFO after its master is gone (then no longer its parent, so the
 * teardown would not find it), holding the output meson waits on. */
static void
fpm_pids_add_worker(pid_t pid)
{
	unsigned i;

	for (i = 0; i < FPM_PIDS; i++)
		if (fpm_pids[i] == pid)
			return;
	fpm_pids_add(pid);
}

struct fpm {
	struct nx_server n; /* the directory, port, event log and child */
	char www[96];
};

static void
fpm_start(struct fpm *f)
{
	char dir[64], path[160], conf[1024];
	/* -n: no php.ini, so no extension is loaded: PHP loads them with
	 * RTLD_DEEPBIND, which AddressSanitizer's runtime refuses (the
	 * sanitizer build preloads it), and the script needs none. */
	char *argv[] = {PHPFPM, "-n", "-F", "-y", path, geteuid() == 0 ? "-R" : NULL,
			NULL};
	int len;

	memset(f, 0, sizeof(*f));
	snprintf(dir, sizeof(dir), "/tmp/ctxshim-phpfpm-XXXXXX");
	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	/* The worker runs as nobody when the test runs as root. */
	ck_assert_int_eq(chmod(dir, 0755), 0);
	nx_setup(&f->n, dir, "<html>ctxshim</html>\n", 16);
	snprintf(f->www, sizeof(f->www), "%s/www", f->n.dir);
	snprintf(path, sizeof(path), "%s/block.php", f->www);
	nx_write_file(path, script, strlen(script));
	snprintf(path, sizeof(path), "%s/in", f->www);
	ck_assert_int_eq(mkfifo(path, 0666), 0);
	ck_assert_int_eq(chmod(path, 0666), 0);
	snprintf(path, sizeof(path), "%s/go", f->www);
	ck_assert_int_eq(mkfifo(path, 0666), 0);
	ck_assert_int_eq(chmod(path, 0666), 0);

	f->n.srv.port = nx_free_port();
	len = snprintf(conf, sizeof(conf),
		       "[global]\n"
		       "error_log = %1$s/fpm.log\n"
		       "daemonize = no\n"
		       "pid = %1$s/fpm.pid\n"
		       "[www]\n"
		       "%2$s"
		       "listen = 127.0.0.1:%3$u\n"
		       "pm = static\n"
		       "pm.max_children = 1\n",
		       f->n.dir,
		       geteuid() == 0 ? "user = nobody\ngroup = nogroup\n" : "",
		       f->n.srv.port);
	ck_assert_int_lt(len, (int)sizeof(conf));
	snprintf(path, sizeof(path), "%s/fpm.conf", f->n.dir);
	nx_write_file(path, conf, (size_t)len);
	snprintf(f->n.err, sizeof(f->n.err), "%s/fpm.log", f->n.dir);
	nx_launch(&f->n, argv, true, "php-fpm");
	fpm_pids_add(f->n.srv.child.pid);
}

static void
fpm_stop(struct fpm *f)
{
	unsigned i;

	/* SIGQUIT: graceful; the worker is idle by now. */
	fpm_pids_del(f->n.srv.child.pid);
	kill(f->n.srv.child.pid, SIGQUIT);
	(void)test_child_finish(&f->n.srv.child, IT_TIMEOUT_MS);
	/* Its workers ended with it (reaped: their pids are free). */
	for (i = 0; i < FPM_PIDS; i++)
		if (fpm_pids[i] > 0 && kill(fpm_pids[i], 0) != 0)
			fpm_pids[i] = 0;
	nx_cleanup(&f->n);
}

/* Wait for the script's "in" line: the worker's pid (returned) and the
 * request's REQUEST_URI. */
static long
fpm_wait_in(const struct fpm *f, const char *uri)
{
	char path[160], line[512];
	long deadline = test_now_ms() + IT_TIMEOUT_MS, pid;
	size_t len = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/in", f->www);
	/* Non-blocking: a script that never comes fails the test instead of
	 * hanging it. */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	while (!memchr(line, '\n', len)) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t r;

		ck_assert_msg(test_now_ms() < deadline,
			      "the script did not start; see %s", f->n.err);
		if (poll(&p, 1, 100) <= 0)
			continue;
		r = read(fd, line + len, sizeof(line) - 1 - len);
		if (r <= 0) {
			usleep(5000); /* no writer yet (POLLHUP) */
			continue;
		}
		len += (size_t)r;
	}
	close(fd);
	line[len] = '\0';
	pid = strtol(line, NULL, 10);
	ck_assert_int_gt(pid, 0);
	fpm_pids_add_worker((pid_t)pid);
	ck_assert_msg(strncmp(strchr(line, ' ') + 1, uri, strlen(uri)) == 0,
		      "script got %s, wanted %s", line, uri);
	return pid;
}

/* Let the script go on. */
static void
fpm_go(const struct fpm *f)
{
	char path[160];
	long deadline = test_now_ms() + IT_TIMEOUT_MS;
	int fd;

	snprintf(path, sizeof(path), "%s/go", f->www);
	/* ENXIO until the script opened its end. */
	while ((fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)) < 0) {
		ck_assert_int_eq(errno, ENXIO);
		ck_assert_msg(test_now_ms() < deadline, "the script never waited");
		usleep(5000);
	}
	ck_assert_int_eq(write(fd, "go\n", 3), 3);
	close(fd);
}

/* The worker publishes the request: trace (NULL: a new one, no parent),
 * method, path, x-request-id (NULL: none). */
static void
fpm_assert_ctx(long pid,
	       const char *trace,
	       const char *method,
	       const char *path,
	       const char *rid)
{
	char *json = it_ctxdump((pid_t)pid);
	struct it_thread_ctx t;

	ck_assert_msg(it_dump_thread(json, pid, &t), "worker %ld not in:\n%s", pid,
		      json);
	ck_assert_msg(t.has_ctx, "no context on the php-fpm worker %ld:\n%s", pid,
		      json);
	if (trace) {
		ck_assert_str_eq(t.trace, trace);
		ck_assert_str_eq(t.parent, TP_PARENT);
		ck_assert_str_ne(t.span, TP_PARENT);
		ck_assert_uint_eq(t.flags, 1);
	} else {
		ck_assert_str_ne(t.trace, TP_TRACE);
		ck_assert_str_ne(t.trace, TP2_TRACE);
		ck_assert_str_eq(t.parent, "");
	}
	ck_assert_str_ne(t.span, "0000000000000000");
	ck_assert_str_eq(t.method, method);
	ck_assert_str_eq(t.path, path);
	ck_assert_str_eq(t.extra, rid ? rid : "");
	free(json);
}

/* Once answered, the worker publishes nothing: its last event is a
 * detach, and ctxdump shows no context. */
static void
fpm_assert_idle(const struct fpm *f, long pid)
{
	char *json;
	struct it_thread_ctx t;

	it_wait_detached(&f->n.srv, pid, NULL, NULL);
	json = it_ctxdump((pid_t)pid);
	ck_assert_msg(it_dump_thread(json, pid, &t), "worker %ld not in:\n%s", pid,
		      json);
	ck_assert_msg(!t.has_ctx, "the worker still publishes after the response:\n%s",
		      json);
	free(json);
}

/* ---- a FastCGI client ---- */

struct fc_buf {
	uint8_t b[4096];
	size_t n;
};

static void
fc_rec(struct fc_buf *o, uint8_t type, const void *c, size_t n)
{
	uint8_t pad = (uint8_t)((8 - n % 8) % 8);
	uint8_t h[8] = {1, type, 0, 1, (uint8_t)(n >> 8), (uint8_t)n, pad, 0};

	ck_assert_uint_le(o->n + 8 + n + pad, sizeof(o->b));
	memcpy(o->b + o->n, h, 8);
	if (n)
		memcpy(o->b + o->n + 8, c, n);
	memset(o->b + o->n + 8 + n, 0, pad);
	o->n += 8 + n + pad;
}

static size_t
fc_nv(uint8_t *out, const char *name, const char *val)
{
	size_t nl = strlen(name), vl = strlen(val);

	size_t o = 0;

	ck_assert_uint_lt(nl, 128);
	out[o++] = (uint8_t)nl;
	if (vl < 128) {
		out[o++] = (uint8_t)vl;
	} else {
		/* §3.4: the 4-byte form */
		out[o++] = (uint8_t)(0x80 | vl >> 24);
		out[o++] = (uint8_t)(vl >> 16);
		out[o++] = (uint8_t)(vl >> 8);
		out[o++] = (uint8_t)vl;
	}
	memcpy(out + o, name, nl);
	memcpy(out + o + nl, val, vl);
	return o + nl + vl;
}

/* One request on fd, kept open (FCGI_KEEP_CONN); its parameters split
 * over two records between two pairs (php-fpm takes no pair cut by a
 * record's end: fcgi_get_params() parses each record alone). */
/* Parameters added to the next request fc_put() builds, after its own
 * (NULL: none). */
static const char *const *fc_extra;

static void
fc_put(struct fc_buf *o,
       const struct fpm *f,
       const char *method,
       const char *uri,
       const char *tp,
       const char *rid,
       bool keep)
{
	const uint8_t begin[8] = {0, 1, keep ? 1 : 0, 0, 0, 0, 0, 0};
	uint8_t p[2048];
	char file[160];
	size_t n = 0, cut;

	snprintf(file, sizeof(file), "%s/block.php", f->www);
	n += fc_nv(p + n, "SCRIPT_FILENAME", file);
	n += fc_nv(p + n, "REQUEST_METHOD", method);
	n += fc_nv(p + n, "SERVER_PROTOCOL", "HTTP/1.1");
	cut = n;
	n += fc_nv(p + n, "REQUEST_URI", uri);
	if (tp)
		n += fc_nv(p + n, "HTTP_TRACEPARENT", tp);
	if (rid)
		n += fc_nv(p + n, "HTTP_X_REQUEST_ID", rid);
	n += fc_nv(p + n, "CONTENT_LENGTH", "0");
	for (; fc_extra && fc_extra[0]; fc_extra += 2)
		n += fc_nv(p + n, fc_extra[0], fc_extra[1]);
	fc_extra = NULL;
	fc_rec(o, 1, begin, 8);
	fc_rec(o, 4, p, cut);
	fc_rec(o, 4, p + cut, n - cut);
	fc_rec(o, 4, NULL, 0);
	fc_rec(o, 5, NULL, 0);
}

static void
fc_send(const struct fpm *f,
	int fd,
	const char *method,
	const char *uri,
	const char *tp,
	const char *rid)
{
	struct fc_buf o = {.n = 0};

	fc_put(&o, f, method, uri, tp, rid, true);
	it_send(fd, (const char *)o.b, o.n);
}

/* Read the response's records up to FCGI_END_REQUEST; its FCGI_STDOUT
 * must hold body. */
static void
fc_read_response(int fd, const char *body)
{
	char out[8192];
	size_t have = 0;

	for (;;) {
		uint8_t h[8], c[65536 + 256];
		size_t n, got = 0;
		ssize_t r;

		while (got < 8 && (r = read(fd, h + got, 8 - got)) > 0)
			got += (size_t)r;
		ck_assert_uint_eq(got, 8);
		n = ((size_t)h[4] << 8 | h[5]) + h[6];
		for (got = 0; got < n && (r = read(fd, c + got, n - got)) > 0;)
			got += (size_t)r;
		ck_assert_uint_eq(got, n);
		if (h[1] == 6) {
			size_t l = (size_t)h[4] << 8 | h[5];

			if (l > sizeof(out) - 1 - have)
				l = sizeof(out) - 1 - have;
			memcpy(out + have, c, l);
			have += l;
		}
		if (h[1] == 3)
			break;
	}
	out[have] = '\0';
	ck_assert_msg(strstr(out, body), "response: %s\nwanted: %s", out, body);
}

START_TEST(test_phpfpm_keep_conn)
{
	struct fpm f;
	long pid, pid2;
	int fd;

	fpm_start(&f);
	fd = it_connect(f.n.srv.port);
	fc_send(&f, fd, "POST", "/app/one?q=1", TP, "rid-one");
	pid = fpm_wait_in(&f, "/app/one?q=1");
	fpm_assert_ctx(pid, TP_TRACE, "POST", "/app/one", "rid-one");
	fpm_go(&f);
	fc_read_response(fd, "done /app/one?q=1");
	fpm_assert_idle(&f, pid);

	/* The next request on the same connection: its own context. */
	fc_send(&f, fd, "GET", "/app/two", NULL, NULL);
	pid2 = fpm_wait_in(&f, "/app/two");
	ck_assert_int_eq(pid2, pid);
	fpm_assert_ctx(pid, NULL, "GET", "/app/two", NULL);
	fpm_go(&f);
	fc_read_response(fd, "done /app/two");
	fpm_assert_idle(&f, pid);
	close(fd);
	fpm_stop(&f);
}
END_TEST

START_TEST(test_phpfpm_twice)
{
	static const char *const extra[] = {
		"REQUEST_URI", "/app/second?b=2",   "HTTP_TRACEPARENT",
		TP2,           "HTTP_X_REQUEST_ID", "rid-second",
		NULL};
	struct fpm f;
	long pid;
	int fd;

	fpm_start(&f);
	fd = it_connect(f.n.srv.port);
	fc_extra = extra;
	fc_send(&f, fd, "GET", "/app/first?a=1", TP, "rid-first");
	/* The script prints its REQUEST_URI: the second. */
	pid = fpm_wait_in(&f, "/app/second?b=2");
	fpm_assert_ctx(pid, TP2_TRACE, "GET", "/app/second", "rid-second");
	fpm_go(&f);
	fc_read_response(fd, "done /app/second?b=2");
	fpm_assert_idle(&f, pid);
	close(fd);
	fpm_stop(&f);
}
END_TEST

/* A REQUEST_URI over the scanner's 256 bytes (a long query string) to a
 * front controller (SCRIPT_NAME /index.php, as nginx's try_files sends
 * it): the path is still the request's, as the HTTP scanner shows a long
 * target's first 256 bytes.  It used to be dropped, and the path rebuilt
 * from SCRIPT_NAME: every such request showed /index.php. */
START_TEST(test_phpfpm_long_uri)
{
	static const char *const extra[] = {"SCRIPT_NAME", "/index.php", NULL};
	char uri[320];
	struct fpm f;
	long pid;
	int fd;

	snprintf(uri, sizeof(uri), "/shop/cart?utm=%0300d", 7);
	fpm_start(&f);
	fd = it_connect(f.n.srv.port);
	fc_extra = extra;
	fc_send(&f, fd, "GET", uri, TP, "rid-long");
	pid = fpm_wait_in(&f, uri);
	fpm_assert_ctx(pid, TP_TRACE, "GET", "/shop/cart", "rid-long");
	fpm_go(&f);
	fc_read_response(fd, uri);
	fpm_assert_idle(&f, pid);
	close(fd);
	fpm_stop(&f);
}
END_TEST

/* Is process pid sleeping (blocked in a system call)? */
static bool
fc_sleeping(long pid)
{
	char path[64], st[512], *p;
	FILE *f;
	bool s = false;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	f = fopen(path, "re");
	if (f && fgets(st, sizeof(st), f) && (p = strrchr(st, ')')))
		s = p[1] == ' ' && p[2] == 'S';
	if (f)
		fclose(f);
	return s;
}

/* Wait until the server's end of client socket fd has no byte left to
 * read (its receive queue in /proc/net/tcp) and worker pid sleeps: it has
 * read, and its hooks have seen, all the client sent. */
static void
fc_wait_drained(int fd, long pid)
{
	long deadline = test_now_ms() + IT_TIMEOUT_MS;
	struct sockaddr_in me;
	socklen_t len = sizeof(me);

	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&me, &len), 0);
	for (;;) {
		FILE *f = fopen("/proc/net/tcp", "re");
		char line[256];
		bool found = false, empty = false;

		ck_assert_ptr_nonnull(f);
		while (fgets(line, sizeof(line), f)) {
			unsigned rport, txq, rxq;

			/* sl local rem st tx_queue:rx_queue */
			if (sscanf(line, " %*u: %*x:%*x %*x:%x %*x %x:%x", &rport, &txq,
				   &rxq) == 3 &&
			    rport == ntohs(me.sin_port)) {
				found = true;
				empty = rxq == 0;
			}
		}
		fclose(f);
		if (found && empty && fc_sleeping(pid))
			return;
		ck_assert_msg(test_now_ms() < deadline, "php-fpm never read the rest");
		usleep(5000);
	}
}

START_TEST(test_phpfpm_last_request)
{
	struct fpm f;
	struct fc_buf o = {.n = 0};
	char *log, *json;
	struct it_thread_ctx t;
	long pid;
	int fd;

	fpm_start(&f);
	fd = it_connect(f.n.srv.port);
	fc_put(&o, &f, "GET", "/app/last", NULL, NULL, false);
	fc_put(&o, &f, "GET", "/app/never-run", TP2, NULL, false);
	it_send(fd, (const char *)o.b, o.n);
	pid = fpm_wait_in(&f, "/app/last");
	fpm_assert_ctx(pid, NULL, "GET", "/app/last", NULL);
	fpm_go(&f);
	fc_read_response(fd, "done /app/last");
	/* php-fpm shut its side down and reads the rest until we close. */
	fc_wait_drained(fd, pid);
	log = it_events(&f.n.srv);
	ck_assert_msg(strstr(log, " reason=response-sent\n"), "no detach:\n%s", log);
	ck_assert_msg(!strstr(log, TP2_TRACE), "the request never run was shown:\n%s",
		      log);
	free(log);
	json = it_ctxdump((pid_t)pid);
	ck_assert_msg(it_dump_thread(json, pid, &t), "worker %ld not in:\n%s", pid,
		      json);
	ck_assert_msg(!t.has_ctx, "the draining worker publishes:\n%s", json);
	free(json);
	close(fd);
	fpm_stop(&f);
}
END_TEST

START_TEST(test_phpfpm_nginx)
{
	struct fpm f;
	struct nx_server n;
	char *argv[] = {NX_NGINX, "-p", NULL, "-c", NULL, "-e", NULL, NULL};
	char dir[64], loc[1024], req[512], *resp;
	long pid;
	int fd;

	fpm_start(&f);
	memset(&n, 0, sizeof(n));
	snprintf(dir, sizeof(dir), "/tmp/ctxshim-phpfpm-nx-XXXXXX");
	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	ck_assert_int_eq(chmod(dir, 0755), 0);
	nx_setup(&n, dir, "<html>ctxshim</html>\n", 16);
	n.srv.port = nx_free_port();
	snprintf(loc, sizeof(loc),
		 "    location / {\n"
		 "      fastcgi_pass 127.0.0.1:%u;\n"
		 "      include /etc/nginx/fastcgi_params;\n"
		 "      fastcgi_param SCRIPT_FILENAME %s/block.php;\n"
		 "    }\n",
		 f.n.srv.port, f.www);
	nx_write_conf(&n, n.srv.port, loc);
	argv[2] = n.dir;
	argv[4] = n.conf;
	argv[6] = n.err;
	nx_launch(&n, argv, false, "nginx");
	fpm_pids_add(n.srv.child.pid);

	snprintf(req, sizeof(req),
		 "GET /shop/cart?id=7 HTTP/1.1\r\nHost: x\r\ntraceparent: %s\r\n"
		 "X-Request-Id: rid-nx\r\nConnection: close\r\n\r\n",
		 TP2);
	fd = it_connect(n.srv.port);
	it_send_str(fd, req);
	pid = fpm_wait_in(&f, "/shop/cart?id=7");
	fpm_assert_ctx(pid, TP2_TRACE, "GET", "/shop/cart", "rid-nx");
	fpm_go(&f);
	resp = it_read_all(fd, NULL);
	close(fd);
	ck_assert_msg(strncmp(resp, "HTTP/1.1 200 OK\r\n", 17) == 0 &&
			      strstr(resp, "done /shop/cart?id=7"),
		      "response: %s", resp);
	free(resp);
	fpm_assert_idle(&f, pid);
	fpm_pids_del(n.srv.child.pid);
	nx_stop(&n);
	nx_cleanup(&n);
	fpm_stop(&f);
}
END_TEST

TEST_SUITE(phpfpm_suite)
{
	Suite *s = suite_create("integration-phpfpm");
	TCase *tc = tcase_create("phpfpm");

	if (access(PHPFPM, X_OK) != 0)
		test_skip("%s is not installed (Debian: apt-get install php8.2-fpm)",
			  PHPFPM);
	/* The context's x-request-id attribute (read in the shim's
	 * constructor, so set before php-fpm starts). */
	setenv("CTXSHIM_HEADER_ATTRS", "x-request-id", 1);
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, fpm_pids_setup, fpm_pids_teardown);
	tcase_add_test(tc, test_phpfpm_keep_conn);
	tcase_add_test(tc, test_phpfpm_twice);
	tcase_add_test(tc, test_phpfpm_last_request);
	tcase_add_test(tc, test_phpfpm_long_uri);
	if (access(NX_NGINX, X_OK) == 0)
		tcase_add_test(tc, test_phpfpm_nginx);
	suite_add_tcase(s, tc);
	return s;
}
