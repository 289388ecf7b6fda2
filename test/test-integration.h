/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Shared by the integration tests of HTTP servers (test-integration-*.c):
 * start a helper server under the shim with an event log, talk HTTP/1.1
 * to it over plain sockets on 127.0.0.1, read the handler thread's context
 * with ctxdump -j, and read the event log.  Static functions: each test
 * program includes this once. */

#include "test-common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define IT_TIMEOUT_MS 20000

struct it_server {
	struct test_child child;
	unsigned port;
	char events[64]; /* event log path; "" without the shim */
	/* The log stays readable through this descriptor (> 2 when open):
	 * its path is removed as soon as the server has opened it, so a
	 * failing test leaves no file behind. */
	int events_fd;
};

/* Start argv under the shim (preload) with CTXSHIM_EVENTS and extra env
 * entries (NULL-terminated, may be NULL); waits for "READY <port>". */
static void
it_server_start(struct it_server *s,
		char *const argv[],
		bool preload,
		char *const extra[])
{
	char *env[16], evenv[96], line[256];
	size_t n = 0;

	memset(s, 0, sizeof(*s));
	if (preload) {
		int fd;

		snprintf(s->events, sizeof(s->events), "/tmp/ctxshim-it-events-XXXXXX");
		fd = mkostemp(s->events, O_CLOEXEC);
		ck_assert_int_gt(fd, 2);
		s->events_fd = fd;
		snprintf(evenv, sizeof(evenv), "CTXSHIM_EVENTS=%s", s->events);
		env[n++] = evenv;
	}
	while (extra && *extra && n < 15)
		env[n++] = *extra++;
	env[n] = NULL;
	test_child_start(&s->child, argv, env, preload);
	test_child_expect(&s->child, "READY ", line, sizeof(line), IT_TIMEOUT_MS);
	s->port = (unsigned)strtoul(line + 6, NULL, 10);
	ck_assert_uint_gt(s->port, 0);
	/* The shim opened the log in its constructor, before READY. */
	if (s->events[0])
		unlink(s->events);
}

static void
it_server_stop(struct it_server *s)
{
	int st = test_child_finish(&s->child, IT_TIMEOUT_MS);

	if (s->events_fd > 2)
		close(s->events_fd);
	s->events_fd = -1;
	if (s->events[0])
		unlink(s->events);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "server exit status %#x",
		      st);
}

/* ---- HTTP over plain sockets ---- */

/* Whether a socket listens on 127.0.0.1:port, from /proc/net/tcp.  Used
 * instead of a probing connection, which the server handles at a time of
 * its own choosing: a late one is an operation on another connection in
 * the middle of the test's first request. */
static __attribute__((unused)) bool
it_port_listening(unsigned port)
{
	char line[512], want[32];
	bool found = false;
	FILE *f = fopen("/proc/net/tcp", "re");

	ck_assert_ptr_nonnull(f);
	snprintf(want, sizeof(want), "0100007F:%04X 00000000:0000 0A", port);
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, want) != NULL;
	fclose(f);
	return found;
}

static int
it_connect(unsigned port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

/* A connection whose receive buffer is small, so that the server cannot
 * write much of a response ahead of what the test reads. */
static __attribute__((unused)) int
it_connect_small(unsigned port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), sz = 4096;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz)), 0);
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

static void
it_send(int fd, const char *data, size_t len)
{
	while (len) {
		ssize_t r = write(fd, data, len);

		if (r < 0 && errno == EINTR)
			continue;
		ck_assert_int_gt(r, 0);
		data += r;
		len -= (size_t)r;
	}
}

static void
it_send_str(int fd, const char *s)
{
	it_send(fd, s, strlen(s));
}

/* Append what one read returns to *buf; false at EOF. */
static bool
it_read_some(int fd, char **buf, size_t *len, size_t *cap)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	ssize_t r;

	if (*cap - *len < 4096) {
		*cap = *cap * 2 + 8192;
		*buf = realloc(*buf, *cap);
		ck_assert_ptr_nonnull(*buf);
	}
	ck_assert_msg(poll(&pfd, 1, IT_TIMEOUT_MS) == 1, "no answer from the server");
	do
		r = read(fd, *buf + *len, *cap - *len - 1);
	while (r < 0 && errno == EINTR);
	ck_assert_int_ge(r, 0);
	*len += (size_t)r;
	(*buf)[*len] = '\0';
	return r > 0;
}

/* Everything until the server closes; malloc'd, NUL-terminated. */
static char *
it_read_all(int fd, size_t *len_out)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;

	while (it_read_some(fd, &buf, &len, &cap))
		;
	if (len_out)
		*len_out = len;
	return buf;
}

/* One response with a Content-Length body (keep-alive), read from src
 * with some() (it_read_some()'s contract: a TLS client has its own);
 * malloc'd. */
static char *
it_read_response_from(bool (*some)(void *src, char **buf, size_t *len, size_t *cap),
		      void *src)
{
	char *buf = NULL, *end, *cl;
	size_t len = 0, cap = 0, want;

	for (;;) {
		end = buf ? strstr(buf, "\r\n\r\n") : NULL;
		if (end)
			break;
		ck_assert_msg(some(src, &buf, &len, &cap), "connection closed early");
	}
	cl = strcasestr(buf, "\r\nContent-Length:");
	ck_assert_ptr_nonnull(cl);
	want = (size_t)(end + 4 - buf) + strtoul(cl + 17, NULL, 10);
	while (len < want)
		ck_assert_msg(some(src, &buf, &len, &cap), "connection closed early");
	ck_assert_uint_eq(len, want);
	return buf;
}

static bool
it_read_some_fd(void *fd, char **buf, size_t *len, size_t *cap)
{
	return it_read_some(*(int *)fd, buf, len, cap);
}

/* One response with a Content-Length body (keep-alive); malloc'd. */
static char *
it_read_response(int fd)
{
	return it_read_response_from(it_read_some_fd, &fd);
}

/* Send req on a new connection and read until the server closes it. */
static char *
it_exchange(unsigned port, const char *req, size_t *len)
{
	int fd = it_connect(port);
	char *resp;

	it_send_str(fd, req);
	resp = it_read_all(fd, len);
	close(fd);
	return resp;
}

/* A live child process of pid other than skip (a server's worker, its
 * CGI script), 0 if none or unknown (/proc/PID/task/PID/children lists
 * a thread's children, the ones the server has not reaped yet too: an
 * earlier child may still be exiting). */
static __attribute__((unused)) pid_t
it_child(pid_t pid, pid_t skip)
{
	char path[96], buf[256], *p = buf, *end;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	if (test_read_small(path, buf, sizeof(buf)) < 0)
		return 0;
	for (;;) {
		long c = strtol(p, &end, 10);

		if (end == p)
			return 0;
		if (c > 0 && c != skip && test_proc_state((pid_t)c) != 'Z')
			return (pid_t)c;
		p = end;
	}
}

/* ---- ctxdump ---- */

struct it_thread_ctx {
	bool has_ctx;
	char trace[33];
	char span[17];
	unsigned flags;
	char method[32];
	char path[256];
	char parent[17];
	char extra[256]; /* http.request.header.x-request-id */
};

static char *
it_ctxdump(pid_t pid)
{
	char path[4096], arg[32], *out, *err;
	/* A loaded CI machine (sanitizer and valgrind runs beside this one)
	 * can leave a blocked thread unscheduled for longer than ctxdump's
	 * default 500 ms; the tests check what is read, not how fast. */
	char *argv[] = {path, "-j", "--stop-timeout", "10000", arg, NULL};
	int st;

	snprintf(path, sizeof(path), "%s", test_ctxdump_path());
	snprintf(arg, sizeof(arg), "%d", (int)pid);
	st = test_run_capture(argv, NULL, false, &out, &err, IT_TIMEOUT_MS);
	/* 1: a thread vanished meanwhile (connection threads come and go). */
	ck_assert_msg(WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 1),
		      "ctxdump status %#x: %s", st, err);
	free(err);
	return out;
}

/* Copy the JSON string value after key (searched in [p, end)). */
static bool
it_json_str(const char *p, const char *end, const char *key, char *out, size_t cap)
{
	const char *k = strstr(p, key), *v, *q;

	if (!k || k >= end)
		return false;
	v = k + strlen(key);
	while (*v == ' ' || *v == ':')
		v++;
	if (*v != '"')
		return false;
	v++;
	q = strchr(v, '"');
	if (!q || q > end || (size_t)(q - v) >= cap)
		return false;
	memcpy(out, v, (size_t)(q - v));
	out[q - v] = '\0';
	return true;
}

/* The value of the attribute named key in a context object [p, end). */
static bool
it_json_attr(const char *p, const char *end, const char *key, char *out, size_t cap)
{
	char pat[160];
	const char *k;

	snprintf(pat, sizeof(pat), "\"key\": \"%s\"", key);
	k = strstr(p, pat);
	if (!k || k >= end)
		return false;
	return it_json_str(k, end, "\"value\"", out, cap);
}

/* Find thread tid in ctxdump's JSON; false if it is not listed. */
static bool
it_dump_thread(const char *json, long tid, struct it_thread_ctx *t)
{
	char pat[48];
	const char *p, *end, *ctx;

	memset(t, 0, sizeof(*t));
	snprintf(pat, sizeof(pat), "\"tid\": %ld,", tid);
	p = strstr(json, pat);
	if (!p)
		return false;
	end = strstr(p + 1, "\"tid\": ");
	if (!end)
		end = p + strlen(p);
	ctx = strstr(p, "\"context\": ");
	ck_assert_ptr_nonnull(ctx);
	if (ctx > end || strncmp(ctx + 11, "null", 4) == 0)
		return true;
	t->has_ctx =
		it_json_str(ctx, end, "\"trace_id\"", t->trace, sizeof(t->trace)) &&
		it_json_str(ctx, end, "\"span_id\"", t->span, sizeof(t->span));
	p = strstr(ctx, "\"flags\": ");
	if (p && p < end)
		t->flags = (unsigned)strtoul(p + 9, NULL, 10);
	(void)it_json_attr(ctx, end, "http.request.method", t->method,
			   sizeof(t->method));
	(void)it_json_attr(ctx, end, "url.path", t->path, sizeof(t->path));
	(void)it_json_attr(ctx, end, "ctxshim.parent_span_id", t->parent,
			   sizeof(t->parent));
	(void)it_json_attr(ctx, end, "http.request.header.x-request-id", t->extra,
			   sizeof(t->extra));
	return true;
}

/* Thread tid (of process tid, e.g. a single-threaded server's worker)
 * shows a GET of path in trace, a child of parent with a span-id of its
 * own, which goes to *span (17 bytes) if span is not NULL. */
static __attribute__((unused)) void
it_assert_get(
	long tid, const char *trace, const char *parent, const char *path, char *span)
{
	char *json = it_ctxdump((pid_t)tid);
	struct it_thread_ctx t;

	ck_assert_msg(it_dump_thread(json, tid, &t), "thread %ld not listed:\n%s", tid,
		      json);
	ck_assert_msg(t.has_ctx, "thread %ld has no context (%s):\n%s", tid, trace,
		      json);
	ck_assert_str_eq(t.trace, trace);
	ck_assert_str_eq(t.parent, parent);
	ck_assert_str_ne(t.span, parent);
	ck_assert_str_ne(t.span, "0000000000000000");
	ck_assert_str_eq(t.method, "GET");
	ck_assert_str_eq(t.path, path);
	free(json);
	if (span)
		memcpy(span, t.span, 17);
}

/* How many threads publish trace (32 hex digits). */
static unsigned
it_dump_count_trace(const char *json, const char *trace)
{
	char pat[64];
	const char *p = json;
	unsigned n = 0;

	snprintf(pat, sizeof(pat), "\"trace_id\": \"%s\"", trace);
	while ((p = strstr(p, pat))) {
		n++;
		p++;
	}
	return n;
}

/* ---- the event log ---- */

static char *
it_events(const struct it_server *s)
{
	char *argv[] = {"/bin/cat", (char *)s->events, NULL}, *out;
	size_t len = 0, cap = 0;
	ssize_t r;

	if (s->events_fd <= 2) {
		ck_assert_int_eq(
			test_run_capture(argv, NULL, false, &out, NULL, IT_TIMEOUT_MS),
			0);
		return out;
	}
	out = NULL;
	do {
		if (cap - len < 4096) {
			cap = cap * 2 + 8192;
			out = realloc(out, cap);
			ck_assert_ptr_nonnull(out);
		}
		r = pread(s->events_fd, out + len, cap - len - 1, (off_t)len);
		ck_assert_int_ge(r, 0);
		len += (size_t)r;
	} while (r > 0);
	out[len] = '\0';
	return out;
}

/* The whole file at dir/name, malloc'd and NUL-terminated (an event log
 * of the server's child programs, say); fails the test if it is not
 * there. */
static __attribute__((unused)) char *
it_read_file(const char *dir, const char *name)
{
	char path[512], *buf = NULL;
	size_t len = 0, cap = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "re");
	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	do {
		if (cap - len < 4096) {
			cap = cap * 2 + 8192;
			buf = realloc(buf, cap);
			ck_assert_ptr_nonnull(buf);
		}
		len += fread(buf + len, 1, cap - len - 1, f);
	} while (!feof(f) && !ferror(f));
	ck_assert_msg(!ferror(f), "%s: read error", path);
	fclose(f);
	buf[len] = '\0';
	return buf;
}

/* Distinct span-ids in the lines about trace (the same request must never
 * get two); copies the first into span (may be NULL). */
static unsigned
it_events_spans(const char *log, const char *trace, char span[17])
{
	char spans[16][17], pat[64];
	const char *p = log;
	unsigned n = 0, i;

	snprintf(pat, sizeof(pat), " trace=%s span=", trace);
	while ((p = strstr(p, pat))) {
		const char *sp = p + strlen(pat);

		for (i = 0; i < n; i++)
			if (strncmp(spans[i], sp, 16) == 0)
				break;
		if (i == n && n < 16) {
			memcpy(spans[n], sp, 16);
			spans[n++][16] = '\0';
		}
		p = sp;
	}
	if (span && n)
		memcpy(span, spans[0], 17);
	return n;
}

/* Lines about trace with the given reason. */
static unsigned
it_events_count(const char *log, const char *trace, const char *reason)
{
	char pat[64];
	const char *p = log;
	unsigned n = 0;

	snprintf(pat, sizeof(pat), " trace=%s span=", trace);
	while ((p = strstr(p, pat))) {
		const char *eol = strchr(p, '\n'), *r = strstr(p, " reason=");

		if (r && (!eol || r < eol) &&
		    strncmp(r + 8, reason, strlen(reason)) == 0 &&
		    (r[8 + strlen(reason)] == '\n' || r[8 + strlen(reason)] == '\0'))
			n++;
		p++;
	}
	return n;
}

/* The last event line of thread tid, or NULL; points into log.  *n (if
 * not NULL): how many events of tid the log has. */
static const char *
it_events_last_n(const char *log, long tid, size_t *n)
{
	char pat[32];
	const char *p = log, *last = NULL;
	size_t k = 0;

	snprintf(pat, sizeof(pat), " tid=%ld ", tid);
	while ((p = strstr(p, pat))) {
		last = p;
		k++;
		p++;
	}
	if (n)
		*n = k;
	return last;
}

static const char *
it_events_last(const char *log, long tid)
{
	return it_events_last_n(log, tid, NULL);
}

/* Poll the event log until thread tid's last event is a detach (of trace,
 * and for reason, when not NULL). */
static __attribute__((unused)) void
it_wait_detached(const struct it_server *s,
		 long tid,
		 const char *trace,
		 const char *reason)
{
	long deadline = test_now_ms() + IT_TIMEOUT_MS;
	char what[96], why[64];

	snprintf(what, sizeof(what), " detach trace=%s ", trace ? trace : "");
	snprintf(why, sizeof(why), " reason=%s\n", reason ? reason : "");
	for (;;) {
		char *log = it_events(s);
		const char *last = it_events_last(log, tid);
		const char *eol = last ? strchr(last, '\n') : NULL;
		const char *det = last ? strstr(last, trace ? what : " detach ") : NULL;

		if (det && eol && det < eol &&
		    (!reason ||
		     strncmp(eol + 1 - strlen(why), why, strlen(why)) == 0)) {
			free(log);
			return;
		}
		ck_assert_msg(test_now_ms() < deadline,
			      "thread %ld never detached %s (%s):\n%.3000s", tid,
			      trace ? trace : "", reason ? reason : "any reason", log);
		free(log);
		usleep(5000);
	}
}

/* Whether the event at ev (a line of the log) is an attach for a callback
 * a library runs after the response can reach the client: libmicrohttpd's
 * completion callback and evhttp's chunk-written and completion ones,
 * which show their request while they run. */
static bool
it_event_late_attach(const char *ev)
{
	static const char *const late[] = {" reason=mhd-completed\n",
					   " reason=evhttp-completed\n",
					   " reason=evhttp-chunk\n"};
	const char *eol = ev ? strchr(ev, '\n') : NULL;
	const char *att = ev ? strstr(ev, " attach ") : NULL;
	size_t i;

	if (!att || !eol || att > eol)
		return false;
	for (i = 0; i < sizeof(late) / sizeof(late[0]); i++) {
		size_t n = strlen(late[i]);

		if ((size_t)(eol + 1 - ev) >= n &&
		    strncmp(eol + 1 - n, late[i], n) == 0)
			return true;
	}
	return false;
}

/* The thread's context is gone: its last event is a detach, and no thread
 * of the process publishes trace any more.  The response may reach the
 * test before the server's completion callback of the request has
 * returned: while the thread's last event is the attach of such a
 * callback, the check waits (IT_TIMEOUT_MS at most); any other context
 * left behind fails at once. */
static void
it_assert_gone(const struct it_server *s, long tid, const char *trace)
{
	long deadline = test_now_ms() + IT_TIMEOUT_MS;

	for (;;) {
		char *log = it_events(s), *json, *after;
		size_t n, n2;
		const char *last = it_events_last_n(log, tid, &n);
		const char *eol = last ? strchr(last, '\n') : NULL;
		const char *det = last ? strstr(last, " detach ") : NULL;
		bool gone, moved;

		if (it_event_late_attach(last) && test_now_ms() < deadline) {
			free(log);
			usleep(5000);
			continue;
		}
		ck_assert_msg(det && (!eol || det < eol),
			      "thread %ld did not end with a detach:\n%s", tid, log);
		free(log);
		json = it_ctxdump(s->child.pid);
		gone = it_dump_count_trace(json, trace) == 0;
		/* a late callback that ran while ctxdump looked: the thread
		 * has events after the last one seen */
		after = gone ? NULL : it_events(s);
		n2 = n;
		if (after)
			(void)it_events_last_n(after, tid, &n2);
		moved = n2 > n;
		free(after);
		if (!gone && moved && test_now_ms() < deadline) {
			free(json);
			continue;
		}
		ck_assert_msg(gone, "trace %s still published after the response:\n%s",
			      trace, json);
		free(json);
		return;
	}
}

/* For servers whose handlers print "IN <tid>", block until the test sends
 * "GO", then print "DONE ..." (mhd-server, evhttp-server).  Sends req on fd
 * (a new connection if fd < 0), waits until its handler blocks; returns
 * the fd and the handler's thread in *tid. */
static inline int
it_send_blocking(struct it_server *s, int fd, const char *req, long *tid)
{
	char line[512];

	if (fd < 0)
		fd = it_connect(s->port);
	it_send_str(fd, req);
	test_child_expect(&s->child, "IN ", line, sizeof(line), IT_TIMEOUT_MS);
	*tid = strtol(line + 3, NULL, 10);
	ck_assert_int_gt(*tid, 0);
	return fd;
}

/* Lets the blocked handler answer, reads until the server closes fd, and
 * waits for the server's "DONE" line. */
static inline char *
it_release(struct it_server *s, int fd)
{
	char line[512], *resp;

	test_child_send(&s->child, "GO\n");
	resp = it_read_all(fd, NULL);
	close(fd);
	test_child_expect(&s->child, "DONE ", line, sizeof(line), IT_TIMEOUT_MS);
	return resp;
}

/* resp is "HTTP/1.1 200 OK" with exactly this body.  Not inlined: gcc 12
 * then mistakes resp for it_read_all()'s local pointer (-Wdangling-pointer). */
static __attribute__((noinline, unused)) void
it_assert_ok_body(const char *resp, const char *body)
{
	const char *b = strstr(resp, "\r\n\r\n");

	ck_assert_msg(strncmp(resp, "HTTP/1.1 200 OK\r\n", 17) == 0, "response: %s",
		      resp);
	ck_assert_msg(b && strcmp(b + 4, body) == 0, "response: %s", resp);
}

/* resp (malloc'd, freed here) is the test servers' answer to path:
 * "HTTP/1.1 200 OK" with the body "path=<path>\n" (http1-reader.h). */
static __attribute__((unused)) void
it_assert_path_body(char *resp, const char *path)
{
	char want[600];

	snprintf(want, sizeof(want), "path=%s\n", path);
	it_assert_ok_body(resp, want);
	free(resp);
}

/* ---- http-sink: a helper that prints the requests it gets ---- */

#define IT_SINK_HDR_MAX 32

struct it_sink_req {
	char hdr[IT_SINK_HDR_MAX][1024];
	int n_hdr;
};

/* Start http-sink as child sink; returns its port. */
static inline unsigned
it_sink_start(struct test_child *sink)
{
	char path[4096], line[256];
	char *argv[] = {path, NULL};
	unsigned port;

	snprintf(path, sizeof(path), "%s/http-sink", test_env_path("HELPER_DIR"));
	test_child_start(sink, argv, NULL, false);
	test_child_expect(sink, "READY ", line, sizeof(line), IT_TIMEOUT_MS);
	port = (unsigned)strtoul(line + 6, NULL, 10);
	ck_assert_uint_gt(port, 0);
	return port;
}

/* End the sink (its stdin closed): it must exit 0. */
static inline void
it_sink_finish(struct test_child *sink)
{
	int st = test_child_finish(sink, IT_TIMEOUT_MS);

	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "http-sink status %#x",
		      st);
}

/* The next request the sink received: its header lines. */
static inline void
it_sink_read(struct test_child *sink, struct it_sink_req *r)
{
	char line[2048];

	memset(r, 0, sizeof(*r));
	test_child_expect(sink, "REQ ", line, sizeof(line), IT_TIMEOUT_MS);
	for (;;) {
		test_child_readline(sink, line, sizeof(line), IT_TIMEOUT_MS);
		if (strcmp(line, "END") == 0)
			return;
		if (strncmp(line, "H ", 2) == 0) {
			ck_assert_int_lt(r->n_hdr, IT_SINK_HDR_MAX);
			snprintf(r->hdr[r->n_hdr++], sizeof(r->hdr[0]), "%.1023s",
				 line + 2);
		}
	}
}

/* The value of the only field called name (any case); NULL if none. */
static inline const char *
it_sink_field(const struct it_sink_req *r, const char *name)
{
	size_t len = strlen(name);
	const char *v = NULL;
	int i, n = 0;

	for (i = 0; i < r->n_hdr; i++)
		if (strncasecmp(r->hdr[i], name, len) == 0 && r->hdr[i][len] == ':') {
			v = r->hdr[i] + len + 1;
			while (*v == ' ')
				v++;
			n++;
		}
	ck_assert_msg(n <= 1, "%d %s fields", n, name);
	return v;
}
