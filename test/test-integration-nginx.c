/* SPDX-License-Identifier: Apache-2.0 */
/* nginx from Debian under the shim, socket level only (nginx's internals
 * cannot be interposed): with its own configuration in a temporary
 * directory (127.0.0.1, a free port, one worker, master process, no
 * daemon), the same requests must get the same bytes with and without the
 * shim (the Date header aside), and the event log must show each traced
 * request's trace-id attached on the worker, with one span, and detached
 * afterwards. */
#include "test-common.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test-integration.h"
#pragma GCC diagnostic pop

#include <fcntl.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

#define NGINX     "/usr/sbin/nginx"
#define TRACE_FMT "4bf92f3577b34da6a3ce929d0e0e47%02x"
#define N_TRACED  8

struct ngx {
	struct it_server srv;
	char dir[64];
	char conf[128];
};

static void
write_file(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static unsigned
free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	close(fd);
	return ntohs(a.sin_port);
}

static long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

static void
ngx_setup(struct ngx *n)
{
	char path[256], *big;
	size_t i;

	memset(n, 0, sizeof(*n));
	snprintf(n->dir, sizeof(n->dir), "/tmp/ctxshim-nginx-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(n->dir));
	/* Workers run as nobody when the test runs as root. */
	ck_assert_int_eq(chmod(n->dir, 0755), 0);
	snprintf(path, sizeof(path), "%s/www", n->dir);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/www/index.html", n->dir);
	write_file(path, "<html>ctxshim</html>\n", 21);
	big = malloc(200 * 1024);
	for (i = 0; i < 200 * 1024; i++)
		big[i] = (char)('a' + i % 26);
	snprintf(path, sizeof(path), "%s/www/big.txt", n->dir);
	write_file(path, big, 200 * 1024);
	free(big);
	snprintf(n->conf, sizeof(n->conf), "%s/nginx.conf", n->dir);
}

static void
ngx_write_conf(struct ngx *n, unsigned port)
{
	char conf[2048];
	int len;

	len = snprintf(conf, sizeof(conf),
		       "worker_processes 1;\n"
		       "daemon off;\n"
		       "master_process on;\n"
		       "pid %1$s/nginx.pid;\n"
		       "error_log %1$s/error.log info;\n"
		       "events { worker_connections 64; }\n"
		       "http {\n"
		       "  access_log %1$s/access.log;\n"
		       "  client_body_temp_path %1$s/body;\n"
		       "  proxy_temp_path %1$s/proxy;\n"
		       "  fastcgi_temp_path %1$s/fastcgi;\n"
		       "  uwsgi_temp_path %1$s/uwsgi;\n"
		       "  scgi_temp_path %1$s/scgi;\n"
		       "  keepalive_requests 100;\n"
		       "  sendfile on;\n"
		       "  server {\n"
		       "    listen 127.0.0.1:%2$u;\n"
		       "    root %1$s/www;\n"
		       "  }\n"
		       "}\n",
		       n->dir, port);
	ck_assert_int_lt(len, (int)sizeof(conf));
	write_file(n->conf, conf, (size_t)len);
}

static void
ngx_start(struct ngx *n, bool preload)
{
	char err[160], *argv[] = {NGINX, "-p", n->dir, "-c", n->conf, "-e", err, NULL};
	char evenv[96], *env[] = {evenv, NULL};
	long deadline = now_ms() + IT_TIMEOUT_MS;

	snprintf(err, sizeof(err), "%s/error.log", n->dir);
	n->srv.port = free_port();
	ngx_write_conf(n, n->srv.port);
	n->srv.events[0] = '\0';
	if (preload) {
		int fd;

		snprintf(n->srv.events, sizeof(n->srv.events),
			 "/tmp/ctxshim-it-events-XXXXXX");
		fd = mkstemp(n->srv.events);
		ck_assert_int_ge(fd, 0);
		close(fd);
		snprintf(evenv, sizeof(evenv), "CTXSHIM_EVENTS=%s", n->srv.events);
	}
	test_child_start(&n->srv.child, argv, preload ? env : NULL, preload);
	/* Readiness: nginx prints nothing; it is ready when the port accepts. */
	for (;;) {
		struct sockaddr_in sin = {.sin_family = AF_INET};
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int r;

		sin.sin_port = htons((uint16_t)n->srv.port);
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		r = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
		close(fd);
		if (r == 0)
			break;
		ck_assert_msg(test_proc_state(n->srv.child.pid) != 'Z' &&
				      test_proc_state(n->srv.child.pid) != '?',
			      "nginx exited; see %s", err);
		ck_assert_msg(now_ms() < deadline,
			      "nginx did not start listening; see %s", err);
		usleep(5000);
	}
}

static void
ngx_stop(struct ngx *n)
{
	int st;

	kill(n->srv.child.pid, SIGQUIT);
	st = test_child_finish(&n->srv.child, IT_TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "nginx exit status %#x",
		      st);
}

static void
ngx_cleanup(struct ngx *n)
{
	char *argv[] = {"/bin/rm", "-rf", n->dir, NULL};

	(void)test_run_capture(argv, NULL, false, NULL, NULL, IT_TIMEOUT_MS);
	if (n->srv.events[0])
		unlink(n->srv.events);
}

/* Remove the value of the Date header (the only part that changes between
 * runs); everything else is compared byte for byte. */
static void
strip_date(char *s)
{
	char *p = s;

	while ((p = strstr(p, "\r\nDate: "))) {
		char *v = p + 8, *eol = strstr(v, "\r\n");

		if (!eol)
			break;
		memmove(v, eol, strlen(eol) + 1);
		p = v;
	}
}

static void
append(char **acc, size_t *acc_len, const char *label, const char *data, size_t len)
{
	size_t l = strlen(label);

	*acc = realloc(*acc, *acc_len + l + len + 2);
	ck_assert_ptr_nonnull(*acc);
	memcpy(*acc + *acc_len, label, l);
	memcpy(*acc + *acc_len + l, data, len);
	*acc_len += l + len;
	(*acc)[*acc_len] = '\0';
}

/* Send req (in chunk-byte writes if chunk) and read until nginx closes. */
static void
exchange(unsigned port,
	 const char *label,
	 const char *req,
	 size_t len,
	 size_t chunk,
	 char **acc,
	 size_t *acc_len)
{
	int fd = it_connect(port), one = 1;
	size_t got;
	char *resp;

	if (chunk) {
		ck_assert_int_eq(
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)), 0);
		while (len) {
			size_t k = len < chunk ? len : chunk;

			it_send(fd, req, k);
			req += k;
			len -= k;
		}
	} else {
		it_send(fd, req, len);
	}
	resp = it_read_all(fd, &got);
	close(fd);
	append(acc, acc_len, label, resp, got);
	free(resp);
}

static char *
traceparent(unsigned k, char out[128])
{
	snprintf(out, 128, "traceparent: 00-" TRACE_FMT "-00f067aa0ba902b7-01\r\n", k);
	return out;
}

/* The request set; traced requests use trace ids 1..N_TRACED. */
static char *
run_requests(unsigned port)
{
	char *acc = NULL, req[1024], tp[128], tp2[128];
	size_t acc_len = 0;
	int n;

	n = snprintf(req, sizeof(req),
		     "GET / HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n",
		     traceparent(1, tp));
	exchange(port, "== index\n", req, (size_t)n, 0, &acc, &acc_len);
	n = snprintf(
		req, sizeof(req),
		"GET /missing?x=1 HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n",
		traceparent(2, tp));
	exchange(port, "== 404\n", req, (size_t)n, 0, &acc, &acc_len);
	n = snprintf(
		req, sizeof(req),
		"GET /index.html HTTP/1.1\r\nHost: x\r\n%s\r\n"
		"HEAD /index.html HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n",
		traceparent(3, tp), traceparent(4, tp2));
	exchange(port, "== pipelined\n", req, (size_t)n, 0, &acc, &acc_len);
	n = snprintf(req, sizeof(req),
		     "GET /index.html HTTP/1.1\r\nHost: x\r\n%sUser-Agent: split\r\n"
		     "Connection: close\r\n\r\n",
		     traceparent(5, tp));
	exchange(port, "== 1-byte\n", req, (size_t)n, 1, &acc, &acc_len);
	n = snprintf(req, sizeof(req),
		     "POST /index.html HTTP/1.1\r\nHost: x\r\n%sContent-Length: 5\r\n"
		     "Connection: close\r\n\r\nhello",
		     traceparent(6, tp));
	exchange(port, "== post\n", req, (size_t)n, 7, &acc, &acc_len);
	n = snprintf(req, sizeof(req),
		     "GET /big.txt HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n",
		     traceparent(7, tp));
	exchange(port, "== sendfile\n", req, (size_t)n, 0, &acc, &acc_len);
	n = snprintf(req, sizeof(req), "GET /index.html HTTP/1.0\r\n%s\r\n",
		     traceparent(8, tp));
	exchange(port, "== http/1.0\n", req, (size_t)n, 0, &acc, &acc_len);
	n = snprintf(req, sizeof(req),
		     "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	exchange(port, "== untraced\n", req, (size_t)n, 0, &acc, &acc_len);
	exchange(port, "== junk\n", "\x16\x03\x01\x00\x10junkjunkjunk\r\n\r\n", 21, 0,
		 &acc, &acc_len);
	strip_date(acc);
	return acc;
}

/* Start of the line containing log[off]. */
static size_t
line_start(const char *log, size_t off)
{
	while (off > 0 && log[off - 1] != '\n')
		off--;
	return off;
}

static long
line_tid(const char *log, size_t off)
{
	const char *p = strstr(log + line_start(log, off), " tid=");

	return p ? strtol(p + 5, NULL, 10) : -1;
}

/* tid of the first line about trace k (its attach at the head, or the
 * switch to it when it was pipelined). */
static long
attach_tid(const char *log, unsigned k)
{
	char pat[80];
	const char *p;

	snprintf(pat, sizeof(pat), " trace=" TRACE_FMT " ", k);
	p = strstr(log, pat);
	return p ? line_tid(log, (size_t)(p - log)) : -1;
}

static char *
read_events(const struct ngx *n)
{
	int fd = open(n->srv.events, O_RDONLY | O_CLOEXEC);
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap);
	ssize_t r;

	ck_assert_int_ge(fd, 0);
	ck_assert_ptr_nonnull(buf);
	while ((r = read(fd, buf + len, cap - len - 1)) > 0) {
		len += (size_t)r;
		if (cap - len < 4096) {
			cap *= 2;
			buf = realloc(buf, cap);
			ck_assert_ptr_nonnull(buf);
		}
	}
	close(fd);
	buf[len] = '\0';
	return buf;
}

/* Thread tid no longer publishes trace k: its last line about k is a
 * detach, or a later line of tid replaced it (a pipelined switch). */
static bool
released(const char *log, unsigned k, long tid)
{
	char pat[80], tidpat[32];
	size_t off = 0, last = (size_t)-1;
	const char *p, *eol;

	snprintf(pat, sizeof(pat), " trace=" TRACE_FMT " ", k);
	while ((p = strstr(log + off, pat))) {
		last = (size_t)(p - log);
		off = last + 1;
	}
	if (last == (size_t)-1 || line_tid(log, last) != tid)
		return false;
	if (last >= 7 && strncmp(log + last - 7, " detach", 7) == 0)
		return true;
	eol = strchr(log + last, '\n');
	snprintf(tidpat, sizeof(tidpat), " tid=%ld ", tid);
	return eol && strstr(eol, tidpat) != NULL;
}

START_TEST(test_nginx_identical_and_events)
{
	struct ngx n;
	char *plain, *shim, *log = NULL;
	long deadline, worker = -1;
	unsigned k;

	ngx_setup(&n);
	ngx_start(&n, false);
	plain = run_requests(n.srv.port);
	ngx_stop(&n);

	ngx_start(&n, true);
	shim = run_requests(n.srv.port);
	ck_assert_msg(strcmp(plain, shim) == 0,
		      "responses differ:\n--- without\n%.3000s\n--- with\n%.3000s",
		      plain, shim);
	ck_assert_ptr_nonnull(strstr(plain, "HTTP/1.1 200 OK"));
	ck_assert_ptr_nonnull(strstr(plain, "HTTP/1.1 404 Not Found"));
	ck_assert_ptr_nonnull(strstr(plain, "HTTP/1.1 405 Not Allowed"));
	ck_assert_ptr_nonnull(strstr(plain, "HTTP/1.1 400 Bad Request"));

	/* Each traced request: attached on the worker (not the master), one
	 * span, and detached once the worker went back to its loop. */
	deadline = now_ms() + IT_TIMEOUT_MS;
	for (k = 1; k <= N_TRACED;) {
		long tid;
		char trace[33];

		free(log);
		log = read_events(&n);
		tid = attach_tid(log, k);
		ck_assert_msg(tid > 0, "trace %u never attached:\n%s", k, log);
		ck_assert_msg(tid != n.srv.child.pid, "attached on the master:\n%s",
			      log);
		if (worker < 0)
			worker = tid;
		ck_assert_int_eq(tid, worker);
		snprintf(trace, sizeof(trace), TRACE_FMT, k);
		ck_assert_msg(
			it_events_count(log, trace, "request") +
					it_events_count(log, trace, "pipelined") ==
				1,
			"trace %u: not started exactly once:\n%s", k, log);
		ck_assert_msg(it_events_spans(log, trace, NULL) == 1,
			      "trace %u: more than one span:\n%s", k, log);
		if (released(log, k, tid)) {
			k++;
			continue;
		}
		ck_assert_msg(now_ms() < deadline, "trace %u never detached:\n%s", k,
			      log);
		usleep(5000);
	}
	ngx_stop(&n);
	free(log);
	free(plain);
	free(shim);
	ngx_cleanup(&n);
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
	suite_add_tcase(s, tc);
	return s;
}
