/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Shared by the tests that run nginx from Debian under the shim
 * (test-integration-nginx.c over plain TCP, test-integration-tls.c with
 * "listen ... ssl"): a private configuration in a temporary directory
 * (127.0.0.1, a free port, one worker, master process, no daemon), start
 * and stop, the common request set, and the check that each traced
 * request was attached once, with one span, on the worker, then released.
 * test-integration-apache.c runs Apache httpd with the same directory
 * layout, launch and request set.
 * Static functions: include after test-integration.h, with
 * -Wunused-function silenced. */

#include "test-integration.h"

#include <fcntl.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

#define NX_NGINX   "/usr/sbin/nginx"
#define NX_OPENSSL "/usr/bin/openssl"

struct nx_server {
	struct it_server srv;
	char dir[64];
	char conf[128];
	char err[160];
	const char *cert; /* NULL: plain HTTP; else "listen ... ssl" */
	const char *key;
};

/* Send req (len bytes, in writes or TLS records of chunk bytes if chunk)
 * on a new connection, read until nginx closes it, and append label and
 * the response to *acc. */
typedef void nx_exchange_fn(unsigned port,
			    const char *label,
			    const char *req,
			    size_t len,
			    size_t chunk,
			    char **acc,
			    size_t *acc_len);

static void
nx_write_file(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static unsigned
nx_free_port(void)
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
nx_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

/* dir exists (readable by the workers, which run as nobody when the test
 * runs as root): fill dir/www with index.html and big.txt (big bytes) and
 * set the paths of the configuration and the error log. */
static void
nx_setup(struct nx_server *n, const char *dir, const char *index, size_t big)
{
	char path[256], *buf;
	size_t i;

	snprintf(n->dir, sizeof(n->dir), "%s", dir);
	snprintf(path, sizeof(path), "%s/www", n->dir);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/www/index.html", n->dir);
	nx_write_file(path, index, strlen(index));
	buf = malloc(big);
	ck_assert_ptr_nonnull(buf);
	for (i = 0; i < big; i++)
		buf[i] = (char)('a' + i % 26);
	snprintf(path, sizeof(path), "%s/www/big.txt", n->dir);
	nx_write_file(path, buf, big);
	free(buf);
	snprintf(n->conf, sizeof(n->conf), "%s/nginx.conf", n->dir);
	snprintf(n->err, sizeof(n->err), "%s/error.log", n->dir);
}

/* A self-signed P-256 certificate for localhost, valid for a day, made
 * with openssl(1) as dir/cert.pem and dir/key.pem (their paths in cert
 * and key).  The key is world-readable: nginx's and lighttpd's workers
 * run as nobody when the test runs as root. */
static void
nx_self_signed(const char *dir, char cert[static 128], char key[static 128])
{
	char *argv[] = {NX_OPENSSL,
			"req",
			"-x509",
			"-newkey",
			"ec",
			"-pkeyopt",
			"ec_paramgen_curve:P-256",
			"-nodes",
			"-keyout",
			key,
			"-out",
			cert,
			"-days",
			"1",
			"-subj",
			"/CN=localhost",
			NULL};
	char *err = NULL;
	int st;

	snprintf(cert, 128, "%s/cert.pem", dir);
	snprintf(key, 128, "%s/key.pem", dir);
	st = test_run_capture(argv, NULL, false, NULL, &err, IT_TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "openssl req in %s: %s",
		      dir, err ? err : "");
	free(err);
	ck_assert_int_eq(chmod(key, 0644), 0);
}

/* nginx's configuration for port, with the server block's extra lines
 * (locations; NULL: none) after its root. */
static void
nx_write_conf(const struct nx_server *n, unsigned port, const char *extra)
{
	char conf[4096], listen[512];
	int len;

	if (n->cert)
		snprintf(listen, sizeof(listen),
			 "    listen 127.0.0.1:%u ssl;\n"
			 "    ssl_certificate %s;\n"
			 "    ssl_certificate_key %s;\n",
			 port, n->cert, n->key);
	else
		snprintf(listen, sizeof(listen), "    listen 127.0.0.1:%u;\n", port);
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
		       "%2$s"
		       "    root %1$s/www;\n"
		       "%3$s"
		       "  }\n"
		       "}\n",
		       n->dir, listen, extra ? extra : "");
	ck_assert_int_lt(len, (int)sizeof(conf));
	nx_write_file(n->conf, conf, (size_t)len);
}

/* Start argv (a server configured for port n->srv.port, whose error log
 * is n->err), under the shim with an event log if preload; returns once the
 * port accepts connections.  name is for the failure messages. */
static void
nx_launch(struct nx_server *n, char *const argv[], bool preload, const char *name)
{
	char evenv[96], *env[] = {evenv, NULL};
	long deadline = nx_now_ms() + IT_TIMEOUT_MS;

	n->srv.events[0] = '\0';
	/* it_events() reads the log by its path. */
	n->srv.events_fd = -1;
	if (preload) {
		int fd;

		snprintf(n->srv.events, sizeof(n->srv.events),
			 "/tmp/ctxshim-it-events-XXXXXX");
		fd = test_mkstemp(n->srv.events);
		ck_assert_int_ge(fd, 0);
		close(fd);
		/* Written by a worker that may run as nobody. */
		ck_assert_int_eq(chmod(n->srv.events, 0666), 0);
		snprintf(evenv, sizeof(evenv), "CTXSHIM_EVENTS=%s", n->srv.events);
	}
	test_child_start(&n->srv.child, argv, preload ? env : NULL, preload);
	/* Readiness: the server prints nothing; it is ready when the port
	 * listens (a connection waits in the backlog until it is accepted). */
	while (!it_port_listening(n->srv.port)) {
		ck_assert_msg(test_proc_state(n->srv.child.pid) != 'Z' &&
				      test_proc_state(n->srv.child.pid) != '?',
			      "%s exited; see %s", name, n->err);
		ck_assert_msg(nx_now_ms() < deadline,
			      "%s did not start listening; see %s", name, n->err);
		usleep(5000);
	}
}

/* Start nginx on a new free port (nx_launch()). */
static void
nx_start(struct nx_server *n, bool preload)
{
	char *argv[] = {NX_NGINX, "-p", n->dir, "-c", n->conf, "-e", n->err, NULL};

	n->srv.port = nx_free_port();
	nx_write_conf(n, n->srv.port, NULL);
	nx_launch(n, argv, preload, "nginx");
}

/* Stop the server with sig; it must exit 0. */
static void
nx_halt(struct nx_server *n, int sig, const char *name)
{
	int st;

	kill(n->srv.child.pid, sig);
	st = test_child_finish(&n->srv.child, IT_TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s exit status %#x", name,
		      st);
}

/* SIGQUIT: nginx's graceful shutdown. */
static void
nx_stop(struct nx_server *n)
{
	nx_halt(n, SIGQUIT, "nginx");
}

/* Removes the directory and the event log. */
static void
nx_cleanup(struct nx_server *n)
{
	char *argv[] = {"/bin/rm", "-rf", n->dir, NULL};

	(void)test_run_capture(argv, NULL, false, NULL, NULL, IT_TIMEOUT_MS);
	if (n->srv.events[0])
		unlink(n->srv.events);
}

/* The transcripts without and with the shim are the same; if not, fail
 * showing where they part (what (a case name) may be NULL). */
static void
nx_assert_same(const char *plain, const char *shim, const char *what)
{
	size_t at = 0, from;

	if (strcmp(plain, shim) == 0)
		return;
	while (plain[at] && plain[at] == shim[at])
		at++;
	from = at > 200 ? at - 200 : 0;
	ck_abort_msg("%s%sresponses differ at byte %zu:\n--- without\n%.1000s\n"
		     "--- with\n%.1000s",
		     what ? what : "", what ? ": " : "", at, plain + from, shim + from);
}

/* Remove the value of the Date header (the only part that changes between
 * runs); everything else is compared byte for byte. */
static void
nx_strip_date(char *s)
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
nx_append(char **acc, size_t *acc_len, const char *label, const char *data, size_t len)
{
	size_t l = strlen(label);

	*acc = realloc(*acc, *acc_len + l + len + 2);
	ck_assert_ptr_nonnull(*acc);
	memcpy(*acc + *acc_len, label, l);
	memcpy(*acc + *acc_len + l, data, len);
	*acc_len += l + len;
	(*acc)[*acc_len] = '\0';
}

/* The trace-id of traced request k: prefix (30 hex digits) and k. */
static char *
nx_trace(const char *prefix, unsigned k, char out[33])
{
	snprintf(out, 33, "%.30s%02x", prefix, k);
	return out;
}

static char *
nx_traceparent(const char *prefix, unsigned k, char out[128])
{
	char trace[33];

	snprintf(out, 128, "traceparent: 00-%s-00f067aa0ba902b7-01\r\n",
		 nx_trace(prefix, k, trace));
	return out;
}

/* The requests both tests send, traced with trace-ids 1..7 (see
 * nx_trace()): index, 404, two pipelined, one in 1-byte writes, a POST in
 * 7-byte writes, a big file.  The two labels given differ between the
 * tests. */
static void
nx_traced_requests(unsigned port,
		   const char *prefix,
		   nx_exchange_fn *exchange,
		   const char *label_1byte,
		   const char *label_big,
		   char **acc,
		   size_t *acc_len)
{
	char req[1024], tp[128], tp2[128];
	int n;

	n = snprintf(req, sizeof(req),
		     "GET / HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n",
		     nx_traceparent(prefix, 1, tp));
	exchange(port, "== index\n", req, (size_t)n, 0, acc, acc_len);
	n = snprintf(
		req, sizeof(req),
		"GET /missing?x=1 HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n",
		nx_traceparent(prefix, 2, tp));
	exchange(port, "== 404\n", req, (size_t)n, 0, acc, acc_len);
	n = snprintf(
		req, sizeof(req),
		"GET /index.html HTTP/1.1\r\nHost: x\r\n%s\r\n"
		"HEAD /index.html HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n",
		nx_traceparent(prefix, 3, tp), nx_traceparent(prefix, 4, tp2));
	exchange(port, "== pipelined\n", req, (size_t)n, 0, acc, acc_len);
	n = snprintf(req, sizeof(req),
		     "GET /index.html HTTP/1.1\r\nHost: x\r\n%sUser-Agent: split\r\n"
		     "Connection: close\r\n\r\n",
		     nx_traceparent(prefix, 5, tp));
	exchange(port, label_1byte, req, (size_t)n, 1, acc, acc_len);
	n = snprintf(req, sizeof(req),
		     "POST /index.html HTTP/1.1\r\nHost: x\r\n%sContent-Length: 5\r\n"
		     "Connection: close\r\n\r\nhello",
		     nx_traceparent(prefix, 6, tp));
	exchange(port, "== post\n", req, (size_t)n, 7, acc, acc_len);
	n = snprintf(req, sizeof(req),
		     "GET /big.txt HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n",
		     nx_traceparent(prefix, 7, tp));
	exchange(port, label_big, req, (size_t)n, 0, acc, acc_len);
}

/* nx_exchange_fn over plain TCP: req in writes of chunk bytes if chunk,
 * then read until the server closes. */
static void
nx_exchange_tcp(unsigned port,
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
	nx_append(acc, acc_len, label, resp, got);
	free(resp);
}

/* Start of the line containing log[off]. */
static size_t
nx_line_start(const char *log, size_t off)
{
	while (off > 0 && log[off - 1] != '\n')
		off--;
	return off;
}

static long
nx_line_tid(const char *log, size_t off)
{
	const char *p = strstr(log + nx_line_start(log, off), " tid=");

	return p ? strtol(p + 5, NULL, 10) : -1;
}

/* tid of the first line about trace (its attach at the head, or the
 * switch to it when it was pipelined). */
static long
nx_attach_tid(const char *log, const char *trace)
{
	char pat[80];
	const char *p;

	snprintf(pat, sizeof(pat), " trace=%s ", trace);
	p = strstr(log, pat);
	return p ? nx_line_tid(log, (size_t)(p - log)) : -1;
}

/* The thread of srv that attached trace (its head's read), polling the
 * event log until it did. */
static long
nx_wait_attach_tid(struct it_server *srv, const char *trace)
{
	long deadline = nx_now_ms() + IT_TIMEOUT_MS;

	for (;;) {
		char *log = it_events(srv);
		long tid = nx_attach_tid(log, trace);

		if (tid > 0) {
			free(log);
			return tid;
		}
		ck_assert_msg(nx_now_ms() < deadline, "%s never attached:\n%.3000s",
			      trace, log);
		free(log);
		usleep(5000);
	}
}

/* tid of the last line about trace: the thread that had it last (-1: no
 * line about it). */
static long
nx_last_tid(const char *log, const char *trace)
{
	char pat[80];
	const char *p = NULL, *q = log;

	snprintf(pat, sizeof(pat), " trace=%s ", trace);
	while ((q = strstr(q, pat)))
		p = q++;
	return p ? nx_line_tid(log, (size_t)(p - log)) : -1;
}

/* Thread tid no longer publishes trace: its last line about it is a
 * detach, or a later line of tid replaced it (a pipelined switch). */
static bool
nx_released(const char *log, const char *trace, long tid)
{
	char pat[80], tidpat[32];
	size_t off = 0, last = (size_t)-1;
	const char *p, *eol;

	snprintf(pat, sizeof(pat), " trace=%s ", trace);
	while ((p = strstr(log + off, pat))) {
		last = (size_t)(p - log);
		off = last + 1;
	}
	if (last == (size_t)-1 || nx_line_tid(log, last) != tid)
		return false;
	if (last >= 7 && strncmp(log + last - 7, " detach", 7) == 0)
		return true;
	eol = strchr(log + last, '\n');
	snprintf(tidpat, sizeof(tidpat), " tid=%ld ", tid);
	return eol && strstr(eol, tidpat) != NULL;
}

/* Each traced request 1..n_traced: attached on the worker (not the
 * master, the same worker for all), started exactly once, with one span,
 * and released once the worker went back to its loop.  Polls the event
 * log until then; not_released is the failure message's verb. */
static void
nx_assert_traced(struct nx_server *n,
		 const char *prefix,
		 unsigned n_traced,
		 const char *not_released)
{
	long deadline = nx_now_ms() + IT_TIMEOUT_MS, worker = -1;
	char *log = NULL;
	unsigned k;

	for (k = 1; k <= n_traced;) {
		char trace[33];
		long tid;

		free(log);
		log = it_events(&n->srv);
		nx_trace(prefix, k, trace);
		tid = nx_attach_tid(log, trace);
		ck_assert_msg(tid > 0, "trace %u never attached:\n%s", k, log);
		ck_assert_msg(tid != n->srv.child.pid, "attached on the master:\n%s",
			      log);
		if (worker < 0)
			worker = tid;
		ck_assert_int_eq(tid, worker);
		ck_assert_msg(
			it_events_count(log, trace, "request") +
					it_events_count(log, trace, "pipelined") ==
				1,
			"trace %u: not started exactly once:\n%s", k, log);
		ck_assert_msg(it_events_spans(log, trace, NULL) == 1,
			      "trace %u: more than one span:\n%s", k, log);
		if (nx_released(log, trace, tid)) {
			k++;
			continue;
		}
		ck_assert_msg(nx_now_ms() < deadline, "trace %u never %s:\n%s", k,
			      not_released, log);
		usleep(5000);
	}
	free(log);
}
