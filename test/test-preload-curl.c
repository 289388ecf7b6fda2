/* SPDX-License-Identifier: Apache-2.0 */
/* hooks/hook-curl.c under LD_PRELOAD: curl-client (no tracing code, one
 * build per Debian libcurl flavour) sends requests to http-sink, which
 * reports the header lines it received.  The client's main thread gets its
 * context from TRACEPARENT (the shim's environment carrier), which stands
 * in for a server context here. */
#include "test-common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define T_TRACE  "0af7651916cd43dd8448eb211c80319c"
#define T_PARENT "b7ad6b7169203331"
#define T_TP     "TRACEPARENT=00-" T_TRACE "-" T_PARENT "-03"
#define T_TS     "TRACESTATE=congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
#define TIMEOUT  30000
#define MAX_HDR  48

static const char *const flavours[] = {"openssl", "gnutls", "nss"};
static const char *const flavour_lib[] = {"OpenSSL/", "GnuTLS/", "NSS/"};

static struct test_child sink;
static unsigned sink_port;

struct req {
	char target[256];
	char hdr[MAX_HDR][1024];
	int n_hdr;
};

static void
sink_start(void)
{
	char path[4096], line[256];
	char *argv[] = {path, NULL};

	snprintf(path, sizeof(path), "%s/http-sink", test_env_path("HELPER_DIR"));
	test_child_start(&sink, argv, NULL, false);
	test_child_expect(&sink, "READY ", line, sizeof(line), TIMEOUT);
	sink_port = (unsigned)strtoul(line + 6, NULL, 10);
	ck_assert_uint_gt(sink_port, 0);
}

static void
sink_stop(void)
{
	int st = test_child_finish(&sink, TIMEOUT);

	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "http-sink status %#x",
		      st);
}

/* The next request the sink received. */
static void
sink_read(struct req *r)
{
	char line[2048];

	memset(r, 0, sizeof(*r));
	test_child_expect(&sink, "REQ ", line, sizeof(line), TIMEOUT);
	snprintf(r->target, sizeof(r->target), "%.255s", line + 4);
	for (;;) {
		test_child_readline(&sink, line, sizeof(line), TIMEOUT);
		if (strcmp(line, "END") == 0)
			return;
		if (strncmp(line, "H ", 2) == 0) {
			ck_assert_int_lt(r->n_hdr, MAX_HDR);
			snprintf(r->hdr[r->n_hdr++], sizeof(r->hdr[0]), "%.1023s",
				 line + 2);
		}
	}
}

/* Fields named name (any case) and the value of the last one. */
static int
req_count(const struct req *r, const char *name, const char **value)
{
	size_t len = strlen(name);
	int i, n = 0;

	if (value)
		*value = NULL;
	for (i = 0; i < r->n_hdr; i++) {
		if (strncasecmp(r->hdr[i], name, len) == 0 && r->hdr[i][len] == ':') {
			const char *v = r->hdr[i] + len + 1;

			while (*v == ' ')
				v++;
			if (value)
				*value = v;
			n++;
		}
	}
	return n;
}

/* The single traceparent of r, split. */
static void
req_traceparent(const struct req *r, char trace[33], char parent[17], char flags[3])
{
	const char *v;

	ck_assert_int_eq(req_count(r, "traceparent", &v), 1);
	ck_assert_msg(strlen(v) == 55 && strncmp(v, "00-", 3) == 0, "traceparent %s",
		      v);
	memcpy(trace, v + 3, 32);
	trace[32] = '\0';
	memcpy(parent, v + 36, 16);
	parent[16] = '\0';
	memcpy(flags, v + 53, 2);
	flags[2] = '\0';
}

struct run {
	char *out, *err;
	int status;
};

/* curl-client-<flavour> [args] URL under the shim with env. */
static void
client(struct run *r, const char *flavour, const char *const *args, char *const env[])
{
	char path[4096], url[128];
	char *argv[96];
	int n = 0;

	snprintf(path, sizeof(path), "%s/curl-client-%s", test_env_path("HELPER_DIR"),
		 flavour);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/t", sink_port);
	argv[n++] = path;
	while (args && *args && n < 94)
		argv[n++] = (char *)*args++;
	argv[n++] = url;
	argv[n] = NULL;
	r->status = test_run_capture(argv, env, true, &r->out, &r->err, TIMEOUT);
	ck_assert_msg(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0,
		      "curl-client status %#x\nstdout:\n%s\nstderr:\n%s", r->status,
		      r->out, r->err);
}

static void
run_free(struct run *r)
{
	free(r->out);
	free(r->err);
}

/* The sink started, curl-client (openssl) args under env, as r: the first
 * request it sent, into q. */
static void
one_request(struct run *r, struct req *q, const char *const *args, char *const env[])
{
	sink_start();
	client(r, "openssl", args, env);
	sink_read(q);
}

/* The end of a test: r freed, the sink stopped (it must exit 0). */
static void
client_done(struct run *r)
{
	run_free(r);
	sink_stop();
}

/* The n-th (from 0) output line starting with prefix, or NULL. */
static const char *
out_line(const struct run *r, const char *prefix, int n, char *buf, size_t cap)
{
	const char *p = r->out;
	size_t len = strlen(prefix);

	while (p && *p) {
		const char *eol = strchr(p, '\n');
		size_t l = eol ? (size_t)(eol - p) : strlen(p);

		if (l >= len && strncmp(p, prefix, len) == 0 && n-- == 0) {
			ck_assert_uint_lt(l, cap);
			memcpy(buf, p, l);
			buf[l] = '\0';
			return buf + len;
		}
		p = eol ? eol + 1 : NULL;
	}
	return NULL;
}

/* "BEFORE t s" etc.: the span of the n-th such line ("none" allowed). */
static void
out_record(const struct run *r, const char *what, int n, char trace[33], char span[17])
{
	char buf[256], prefix[32];
	const char *v;

	snprintf(prefix, sizeof(prefix), "%s ", what);
	v = out_line(r, prefix, n, buf, sizeof(buf));
	ck_assert_msg(v, "no line %d '%s' in:\n%s", n, prefix, r->out);
	if (strcmp(v, "none") == 0) {
		strcpy(trace, "none");
		strcpy(span, "none");
		return;
	}
	ck_assert_msg(strlen(v) == 49, "bad record line: %s", v);
	memcpy(trace, v, 32);
	trace[32] = '\0';
	memcpy(span, v + 33, 16);
	span[16] = '\0';
}

static bool
flavour_built(int i)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/curl-client-%s", test_env_path("HELPER_DIR"),
		 flavours[i]);
	return access(path, X_OK) == 0;
}

/* ---- tests ----------------------------------------------------------------- */

/* Each flavour: its own libcurl did the transfer (the shim forwarded to
 * the right version), a child span of the thread's context was sent and
 * published while the call blocked, the tracestate went on unchanged. */
START_TEST(test_flavour_inject)
{
	const char *args[] = {"-H", "X-App: 1", NULL};
	char *env[] = {T_TP, T_TS, NULL};
	char trace[33], parent[17], flags[3], bt[33], bs[17], dt[33], ds[17], at[33],
		as[17];
	char buf[512];
	const char *v;
	struct run r;
	struct req q;

	if (!flavour_built(_i))
		return;
	sink_start();
	client(&r, flavours[_i], args, env);
	v = out_line(&r, "VERSION ", 0, buf, sizeof(buf));
	ck_assert_msg(v && strstr(v, flavour_lib[_i]), "not the %s flavour: %s",
		      flavours[_i], v ? v : r.out);
	sink_read(&q);
	req_traceparent(&q, trace, parent, flags);
	ck_assert_str_eq(trace, T_TRACE);
	ck_assert_str_eq(flags, "03");
	ck_assert_str_ne(parent, T_PARENT);
	ck_assert_int_eq(req_count(&q, "tracestate", &v), 1);
	ck_assert_str_eq(v, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
	ck_assert_int_eq(req_count(&q, "X-App", &v), 1);
	ck_assert_str_eq(v, "1");
	out_record(&r, "BEFORE", 0, bt, bs);
	out_record(&r, "DURING", 0, dt, ds);
	out_record(&r, "AFTER", 0, at, as);
	ck_assert_str_eq(bt, T_TRACE);
	ck_assert_str_eq(dt, T_TRACE);
	ck_assert_str_eq(ds, parent); /* the record names the client span */
	ck_assert_str_ne(ds, bs);
	ck_assert_str_eq(at, bt); /* then the server context again */
	ck_assert_str_eq(as, bs);
	ck_assert_ptr_nonnull(out_line(&r, "LIST 1 X-App: 1", 0, buf, sizeof(buf)));
	client_done(&r);
}
END_TEST

/* Without the shim the same program sends no trace context at all: the
 * headers above come from the shim, not from libcurl or the helper. */
START_TEST(test_without_shim)
{
	char path[4096], url[128];
	char *argv[] = {path, "-H", "X-App: 1", url, NULL};
	char *env[] = {T_TP, T_TS, NULL};
	char *out, *err;
	struct req q;

	sink_start();
	snprintf(path, sizeof(path), "%s/curl-client-openssl",
		 test_env_path("HELPER_DIR"));
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/t", sink_port);
	ck_assert_int_eq(test_run_capture(argv, env, false, &out, &err, TIMEOUT), 0);
	sink_read(&q);
	ck_assert_int_eq(req_count(&q, "traceparent", NULL), 0);
	ck_assert_int_eq(req_count(&q, "tracestate", NULL), 0);
	ck_assert_int_eq(req_count(&q, "X-App", NULL), 1);
	free(out);
	free(err);
	sink_stop();
}
END_TEST

/* Transfers one after the other on one handle: each its own span, and
 * never a second traceparent line (our copy never leaks into the app's
 * list, which libcurl would reuse). */
static void
assert_distinct_children(struct req *q, int n, char parents[][17])
{
	char trace[33], flags[3];
	int i, k;

	for (i = 0; i < n; i++) {
		req_traceparent(&q[i], trace, parents[i], flags);
		ck_assert_str_eq(trace, T_TRACE);
		ck_assert_str_eq(flags, "03");
		ck_assert_str_ne(parents[i], T_PARENT);
		ck_assert_int_le(req_count(&q[i], "tracestate", NULL), 1);
		for (k = 0; k < i; k++)
			ck_assert_str_ne(parents[i], parents[k]);
	}
}

/* The sink started, curl-client (openssl) args under the context of T_TP
 * and T_TS, as r: its n requests (at most 6), each with one "X-App" line
 * if x_app, are distinct children of that context (parents). */
static void
children_sent(
	struct run *r, const char *const *args, int n, bool x_app, char parents[][17])
{
	char *env[] = {T_TP, T_TS, NULL};
	struct req q[6];
	int i;

	ck_assert_int_le(n, 6);
	sink_start();
	client(r, "openssl", args, env);
	for (i = 0; i < n; i++) {
		sink_read(&q[i]);
		if (x_app)
			ck_assert_int_eq(req_count(&q[i], "X-App", NULL), 1);
	}
	assert_distinct_children(q, n, parents);
}

START_TEST(test_repeat_same_handle)
{
	const char *args[] = {"-n", "3", "-H", "X-App: 1", NULL};
	char parents[3][17], t[33], s[17];
	struct run r;
	int i;

	children_sent(&r, args, 3, true, parents);
	for (i = 0; i < 3; i++) {
		out_record(&r, "DURING", i, t, s);
		ck_assert_str_eq(s, parents[i]);
	}
	client_done(&r);
}
END_TEST

/* The multi interface: the context is taken at curl_multi_add_handle, each
 * handle its own span; the thread's record is left alone (one thread
 * drives many transfers).  Variants end the transfers differently:
 * remove + cleanup, curl_multi_cleanup first (then the handles are plain
 * easy handles again), curl_easy_cleanup while still added. */
static void
multi_case(const char *variant)
{
	const char *args[] = {"-m", "3", "-H", "X-App: 1", variant, NULL};
	char parents[6][17], bt[33], bs[17], dt[33], ds[17];
	struct run r;
	int i, n = strcmp(variant, "-C") == 0 ? 6 : 3;

	children_sent(&r, args, n, false, parents);
	out_record(&r, "BEFORE", 0, bt, bs);
	for (i = 0; i < 3; i++) {
		out_record(&r, "DURING", i, dt, ds);
		ck_assert_str_eq(ds, bs);
	}
	run_free(&r);
	sink_stop();
}

START_TEST(test_multi)
{
	static const char *const variants[] = {"-n1", "-C", "-X"};

	multi_case(variants[_i]);
}
END_TEST

/* A new CURLOPT_HTTPHEADER while our copy is in use (from the header
 * callback of a running transfer): no crash, no leak (valgrind test). */
START_TEST(test_setopt_during_transfer)
{
	const char *args[] = {"-S", "-m", "2", "-H", "X-App: 1", NULL};
	const char *args_easy[] = {"-S", "-n", "2", "-H", "X-App: 1", NULL};
	char *env[] = {T_TP, NULL};
	char parents[4][17];
	struct req q[4];
	struct run r;
	int i;

	sink_start();
	client(&r, "openssl", args, env);
	run_free(&r);
	client(&r, "openssl", args_easy, env);
	run_free(&r);
	for (i = 0; i < 4; i++)
		sink_read(&q[i]);
	for (i = 0; i < 4; i++) {
		char t[33], f[3];

		req_traceparent(&q[i], t, parents[i], f);
		ck_assert_str_eq(t, T_TRACE);
	}
	sink_stop();
}
END_TEST

/* Lines the application appends to its own list after
 * curl_multi_add_handle, before the requests go out, are sent: libcurl
 * reads the list then, and the shim gives it the application's live list
 * behind its own lines, not a copy taken when the handle was added. */
START_TEST(test_multi_late_append)
{
	const char *args[] = {"-m",        "2",  "-H",         "X-App: 1", "-L",
			      "X-Late: 2", "-L", "X-Later: 3", NULL};
	char *env[] = {T_TP, T_TS, NULL};
	char parents[2][17], buf[256];
	const char *v;
	struct req q[2];
	struct run r;
	int i;

	sink_start();
	client(&r, "openssl", args, env);
	for (i = 0; i < 2; i++) {
		sink_read(&q[i]);
		ck_assert_int_eq(req_count(&q[i], "X-App", &v), 1);
		ck_assert_str_eq(v, "1");
		ck_assert_int_eq(req_count(&q[i], "X-Late", &v), 1);
		ck_assert_str_eq(v, "2");
		ck_assert_int_eq(req_count(&q[i], "X-Later", &v), 1);
		ck_assert_str_eq(v, "3");
		ck_assert_int_eq(req_count(&q[i], "tracestate", &v), 1);
		ck_assert_str_eq(v, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
	}
	assert_distinct_children(q, 2, parents);
	/* The application's list has its own three nodes, nothing of ours. */
	ck_assert_ptr_nonnull(out_line(&r, "LIST 3 X-App: 1", 0, buf, sizeof(buf)));
	client_done(&r);
}
END_TEST

/* A new CURLOPT_HTTPHEADER after curl_multi_add_handle (the old list freed
 * at once) is judged as on the first start: with a traceparent (any case,
 * or the empty line that disables it) or a tracestate of the
 * application's, the application's list goes out exactly as set and
 * nothing of ours; without, our lines go with the new list. */
#define APP_TP "00-11111111111111111111111111111111-2222222222222222-01"

START_TEST(test_multi_replace)
{
	static const struct {
		const char *lines[2];
		const char *tp; /* the traceparent sent: NULL none, "" ours */
		const char *ts; /* the tracestate sent, NULL none */
	} cases[] = {
		{{"traceparent: " APP_TP, "tracestate: app=1"}, APP_TP, "app=1"},
		{{"TraceParent: " APP_TP, NULL}, APP_TP, NULL},
		{{"traceparent:", NULL}, NULL, NULL},
		{{"X-New: 1", "tracestate: app=1"}, NULL, "app=1"},
		{{"X-New: 1", NULL}, "", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"},
	};
	const char *args[12] = {"-m", "2", "-H", "X-App: 1", "-N", cases[_i].lines[0]};
	char *env[] = {T_TP, T_TS, NULL};
	char parents[2][17];
	const char *v;
	struct req q[2];
	struct run r;
	int i;

	if (cases[_i].lines[1]) {
		args[6] = "-N";
		args[7] = cases[_i].lines[1];
	}
	sink_start();
	client(&r, "openssl", args, env);
	for (i = 0; i < 2; i++) {
		sink_read(&q[i]);
		ck_assert_int_eq(req_count(&q[i], "X-App", NULL), 0);
		if (!cases[_i].tp) {
			ck_assert_int_eq(req_count(&q[i], "traceparent", NULL), 0);
		} else if (cases[_i].tp[0]) {
			ck_assert_int_eq(req_count(&q[i], "traceparent", &v), 1);
			ck_assert_str_eq(v, cases[_i].tp);
		}
		if (!cases[_i].ts) {
			ck_assert_int_eq(req_count(&q[i], "tracestate", NULL), 0);
		} else {
			ck_assert_int_eq(req_count(&q[i], "tracestate", &v), 1);
			ck_assert_str_eq(v, cases[_i].ts);
		}
	}
	if (cases[_i].tp && !cases[_i].tp[0]) {
		assert_distinct_children(q, 2, parents);
		for (i = 0; i < 2; i++)
			ck_assert_int_eq(req_count(&q[i], "X-New", NULL), 1);
	}
	client_done(&r);
}
END_TEST

/* Header lines received exactly as line. */
static int
req_lines(const struct req *r, const char *line)
{
	int i, n = 0;

	for (i = 0; i < r->n_hdr; i++)
		n += strcmp(r->hdr[i], line) == 0;
	return n;
}

/* Lines of the client's output that are exactly line. */
static int
out_count(const struct run *r, const char *line)
{
	char buf[256];
	int n = 0;

	while (out_line(r, line, n, buf, sizeof(buf)))
		n++;
	return n;
}

/* Trace context the application gives its live list after the transfer
 * started, and lines that are not trace context (hook-curl.c, "Lines
 * added after the start"). */
struct late_case {
	const char *flavour;
	const char *args[14];
	int reqs;
	unsigned ours;       /* bit i: request i carries our lines */
	const char *app_tp;  /* the others carry this line, once, and no other
			       traceparent; NULL: no traceparent at all */
	const char *app_ts;  /* the same for tracestate */
	const char *last[3]; /* lines the last request carries once each */
	int prereq;          /* "PREREQ ok": the application's callback ran */
	bool during_own;     /* the second blocking call shows the thread's
				own context, not a client span */
};

static void
late_check(const struct late_case *c)
{
	char *env[] = {T_TP, T_TS, NULL};
	char bt[33], bs[17], dt[33], ds[17];
	char parents[MAX_HDR][17], buf[256];
	const char *v;
	struct req q;
	struct run r;
	int i, k, n_ours = 0;

	if (strcmp(c->flavour, "openssl") != 0 &&
	    !flavour_built(strcmp(c->flavour, "gnutls") == 0 ? 1 : 2))
		return;
	sink_start();
	client(&r, c->flavour, c->args, env);
	for (i = 0; i < c->reqs; i++) {
		sink_read(&q);
		ck_assert_int_eq(req_lines(&q, "X-App: 1"), 1);
		if (c->ours & (1u << i)) {
			char t[33], f[3];

			req_traceparent(&q, t, parents[n_ours], f);
			ck_assert_str_eq(t, T_TRACE);
			ck_assert_str_eq(f, "03");
			ck_assert_str_ne(parents[n_ours], T_PARENT);
			for (k = 0; k < n_ours; k++)
				ck_assert_str_ne(parents[k], parents[n_ours]);
			n_ours++;
			ck_assert_int_eq(req_count(&q, "tracestate", &v), 1);
			ck_assert_str_eq(v, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
		} else {
			/* Exactly the application's lines, nothing of ours. */
			ck_assert_int_eq(req_count(&q, "traceparent", NULL),
					 (c->app_tp ? 1 : 0));
			if (c->app_tp)
				ck_assert_int_eq(req_lines(&q, c->app_tp), 1);
			ck_assert_int_eq(req_count(&q, "tracestate", NULL),
					 (c->app_ts ? 1 : 0));
			if (c->app_ts)
				ck_assert_int_eq(req_lines(&q, c->app_ts), 1);
		}
		for (k = 0; i == c->reqs - 1 && k < 3 && c->last[k]; k++)
			ck_assert_msg(req_lines(&q, c->last[k]) == 1,
				      "no '%s' in request %d", c->last[k], i);
	}
	ck_assert_int_eq(out_count(&r, "PREREQ ok"), c->prereq);
	if (c->during_own) {
		out_record(&r, "BEFORE", 0, bt, bs);
		out_record(&r, "DURING", 1, dt, ds);
		ck_assert_str_eq(dt, bt);
		ck_assert_str_eq(ds, bs);
	}
	/* The application's list is its own: its head is still its own. */
	ck_assert_ptr_nonnull(out_line(&r, "LIST ", 0, buf, sizeof(buf)));
	ck_assert_msg(strstr(buf, " X-App: 1"), "%s", buf);
	run_free(&r);
	sink_stop();
}

/* The application gives its live list a traceparent or tracestate (any
 * case, or the empty line that disables it) after the shim installed its
 * lines: curl_slist_append after curl_multi_add_handle, between two
 * curl_easy_perform calls on one handle, or from its own
 * CURLOPT_PREREQFUNCTION right before the request is built.  Those
 * requests carry exactly the application's lines, once, and nothing of
 * ours (ctxshim(7): "its headers are sent exactly as set"); a blocking call
 * then shows the thread's own context, as when the line was there from
 * the start. */
START_TEST(test_late_app_context)
{
	static const struct late_case cases[] = {
		{.flavour = "openssl",
		 .args = {"-m", "1", "-H", "X-App: 1", "-L", "traceparent: " APP_TP},
		 .reqs = 1,
		 .app_tp = "traceparent: " APP_TP},
		{.flavour = "gnutls",
		 .args = {"-m", "1", "-H", "X-App: 1", "-L", "traceparent: " APP_TP},
		 .reqs = 1,
		 .app_tp = "traceparent: " APP_TP},
		{.flavour = "nss",
		 .args = {"-m", "1", "-H", "X-App: 1", "-L", "traceparent: " APP_TP},
		 .reqs = 1,
		 .app_tp = "traceparent: " APP_TP},
		{.flavour = "openssl",
		 .args = {"-m", "2", "-H", "X-App: 1", "-L", "TraceParent: " APP_TP},
		 .reqs = 2,
		 .app_tp = "TraceParent: " APP_TP},
		{.flavour = "openssl",
		 .args = {"-m", "1", "-H", "X-App: 1", "-L", "tracestate: app=1"},
		 .reqs = 1,
		 .app_ts = "tracestate: app=1"},
		{.flavour = "openssl",
		 .args = {"-m", "1", "-H", "X-App: 1", "-L", "traceparent:"},
		 .reqs = 1},
		{.flavour = "openssl",
		 .args = {"-m", "2", "-H", "X-App: 1", "-Q", "traceparent: " APP_TP},
		 .reqs = 2,
		 .app_tp = "traceparent: " APP_TP,
		 .prereq = 2},
		/* A copy made then has the application's list and callback. */
		{.flavour = "openssl",
		 .args = {"-m", "1", "-D", "-q", "-H", "X-App: 1", "-L",
			  "traceparent: " APP_TP},
		 .reqs = 2,
		 .app_tp = "traceparent: " APP_TP,
		 .prereq = 2},
		/* A reused handle: ours the first time, the application's the
		 * second. */
		{.flavour = "openssl",
		 .args = {"-n", "2", "-H", "X-App: 1", "-A", "traceparent: " APP_TP},
		 .reqs = 2,
		 .ours = 1,
		 .app_tp = "traceparent: " APP_TP,
		 .during_own = true},
		{.flavour = "openssl",
		 .args = {"-n", "2", "-H", "X-App: 1", "-Q", "traceparent: " APP_TP},
		 .reqs = 2,
		 .ours = 1,
		 .app_tp = "traceparent: " APP_TP,
		 .prereq = 2,
		 .during_own = true},
		{.flavour = "gnutls",
		 .args = {"-n", "2", "-H", "X-App: 1", "-Q", "traceparent: " APP_TP},
		 .reqs = 2,
		 .ours = 1,
		 .app_tp = "traceparent: " APP_TP,
		 .prereq = 2,
		 .during_own = true},
		{.flavour = "nss",
		 .args = {"-n", "2", "-H", "X-App: 1", "-Q", "tracestate: app=1"},
		 .reqs = 2,
		 .ours = 1,
		 .app_ts = "tracestate: app=1",
		 .prereq = 2,
		 .during_own = true},
	};

	late_check(&cases[_i]);
}
END_TEST
#define LATE_APP_CASES 12

/* The same moments with lines that are not trace context: ours still go
 * out, with every line of the application's, whose own pre-request
 * callback still runs with its own pointer, in a duplicated handle too. */
START_TEST(test_late_own_context)
{
	static const struct late_case cases[] = {
		{.flavour = "openssl",
		 .args = {"-m", "2", "-q", "-H", "X-App: 1", "-L", "X-Late: 2", "-Q",
			  "X-Pre: 3"},
		 .reqs = 2,
		 .ours = 3,
		 .last = {"X-Late: 2", "X-Pre: 3"},
		 .prereq = 2},
		{.flavour = "gnutls",
		 .args = {"-m", "1", "-H", "X-App: 1", "-Q", "X-Pre: 3"},
		 .reqs = 1,
		 .ours = 1,
		 .last = {"X-Pre: 3"},
		 .prereq = 1},
		{.flavour = "nss",
		 .args = {"-m", "1", "-H", "X-App: 1", "-Q", "X-Pre: 3"},
		 .reqs = 1,
		 .ours = 1,
		 .last = {"X-Pre: 3"},
		 .prereq = 1},
		{.flavour = "openssl",
		 .args = {"-n", "2", "-H", "X-App: 1", "-A", "X-Between: 1", "-Q",
			  "X-Pre: 3"},
		 .reqs = 2,
		 .ours = 3,
		 .last = {"X-Between: 1", "X-Pre: 3"},
		 .prereq = 2},
		/* Copies made after a transfer, and while one runs. */
		{.flavour = "openssl",
		 .args = {"-m", "2", "-D", "-q", "-H", "X-App: 1"},
		 .reqs = 3,
		 .ours = 7,
		 .prereq = 3},
		{.flavour = "openssl",
		 .args = {"-D", "-q", "-H", "X-App: 1"},
		 .reqs = 3,
		 .ours = 7,
		 .prereq = 3},
	};

	late_check(&cases[_i]);
}
END_TEST
#define LATE_OWN_CASES 6

/* curl_easy_duphandle: the copy has the application's list, not our
 * merged one (which is freed when the original's transfer ends); it keeps
 * working after the original is gone. */
START_TEST(test_duphandle)
{
	const char *args[] = {"-D", "-H", "X-App: 1", NULL};
	char parents[3][17];
	struct run r;

	children_sent(&r, args, 3, true, parents);
	client_done(&r);
}
END_TEST

/* curl_easy_reset forgets the application's list with everything else. */
START_TEST(test_reset)
{
	const char *args[] = {"-R", "-H", "X-App: 1", NULL};
	char *env[] = {T_TP, NULL};
	char t[33], p[17], f[3];
	struct req q;
	struct run r;

	one_request(&r, &q, args, env);
	ck_assert_int_eq(req_count(&q, "X-App", NULL), 0);
	req_traceparent(&q, t, p, f);
	ck_assert_str_eq(t, T_TRACE);
	client_done(&r);
}
END_TEST

/* A handle and its header list set up by a library's constructor, before
 * the shim's constructor ran (helpers/curl-early-lib.c): the shim never
 * saw that list, and its own would have replaced it (hook-curl.c,
 * curl_headers_lost).  That request carries the application's lines and no
 * traceparent; a handle whose list main() sets still gets one. */
START_TEST(test_list_set_before_the_shim)
{
	char path[4096], url[128], *argv[] = {path, url, NULL};
	char *env[] = {T_TP, NULL};
	char t[33], p[17], f[3];
	const char *v;
	struct req q;
	struct run r;

	snprintf(path, sizeof(path), "%s/curl-early", test_env_path("HELPER_DIR"));
	if (access(path, X_OK) != 0) {
		fprintf(stderr, "%s not built, not tested\n", path);
		return;
	}
	sink_start();
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/t", sink_port);
	r.status = test_run_capture(argv, env, true, &r.out, &r.err, TIMEOUT);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0,
		      "curl-early status %#x\nstdout:\n%s\nstderr:\n%s", r.status,
		      r.out, r.err);
	ck_assert_str_eq(r.out, "early 0\nmain 0\n");
	sink_read(&q);
	ck_assert_int_eq(req_count(&q, "Authorization", &v), 1);
	ck_assert_str_eq(v, "Bearer early");
	ck_assert_int_eq(req_count(&q, "X-Early", &v), 1);
	ck_assert_str_eq(v, "1");
	ck_assert_int_eq(req_count(&q, "traceparent", NULL), 0);
	sink_read(&q);
	ck_assert_int_eq(req_count(&q, "X-App", &v), 1);
	ck_assert_str_eq(v, "main");
	ck_assert_int_eq(req_count(&q, "Authorization", NULL), 0);
	req_traceparent(&q, t, p, f);
	ck_assert_str_eq(t, T_TRACE);
	ck_assert_str_ne(p, T_PARENT);
	client_done(&r);
}
END_TEST

/* The URL given as a CURLU handle: the scheme is asked from it. */
START_TEST(test_curlu)
{
	const char *args[] = {"-u", NULL};
	char *env[] = {T_TP, NULL};
	char t[33], p[17], f[3];
	struct req q;
	struct run r;

	one_request(&r, &q, args, env);
	req_traceparent(&q, t, p, f);
	ck_assert_str_eq(t, T_TRACE);
	client_done(&r);
}
END_TEST

/* URLs without a scheme, taken as libcurl 7.88 takes them: with
 * CURLOPT_DEFAULT_PROTOCOL, that protocol, else a guess from the host
 * name after any "user@" ("ftp." is FTP).  libcurl resolves any
 * *.localhost name to the loopback address itself. */

/* "ftp.localhost" with a default of http is an HTTP request: it carries a
 * child of the context (the hook took it for FTP and sent nothing). */
START_TEST(test_default_protocol_http)
{
	char path[4096], url[128], *argv[] = {path, "-p", "http", url, NULL};
	char *env[] = {T_TP, NULL};
	char t[33], p[17], f[3];
	struct req q;
	struct run r;

	sink_start();
	snprintf(path, sizeof(path), "%s/curl-client-openssl",
		 test_env_path("HELPER_DIR"));
	snprintf(url, sizeof(url), "ftp.localhost:%u/t", sink_port);
	r.status = test_run_capture(argv, env, true, &r.out, &r.err, TIMEOUT);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0,
		      "curl-client status %#x\nstdout:\n%s\nstderr:\n%s", r.status,
		      r.out, r.err);
	sink_read(&q);
	req_traceparent(&q, t, p, f);
	ck_assert_str_eq(t, T_TRACE);
	ck_assert_str_ne(p, T_PARENT);
	client_done(&r);
}
END_TEST

/* "u@ftp.localhost" without a default is FTP: nothing of ours is made for
 * it, no lines and no client span (the hook took it for HTTP). */
START_TEST(test_guessed_ftp_after_user)
{
	char path[4096], url[128], *argv[] = {path, url, NULL};
	char *env[] = {T_TP, "CTXSHIM_EVENTS=stderr", NULL};
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	struct run r;
	int fd;

	/* A port bound but not listening: the connection is refused. */
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	snprintf(path, sizeof(path), "%s/curl-client-openssl",
		 test_env_path("HELPER_DIR"));
	snprintf(url, sizeof(url), "u@ftp.localhost:%u/t", ntohs(a.sin_port));
	r.status = test_run_capture(argv, env, true, &r.out, &r.err, TIMEOUT);
	close(fd);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 1 &&
			      strstr(r.out, "ERROR Couldn't connect"),
		      "curl-client status %#x\nstdout:\n%s", r.status, r.out);
	ck_assert_msg(strstr(r.err, "reason=env-traceparent"), "no events:\n%s", r.err);
	ck_assert_msg(!strstr(r.err, "reason=curl-client"), "%s", r.err);
	run_free(&r);
}
END_TEST

/* A request libcurl signs (CURLOPT_AWS_SIGV4, or CURLOPT_HTTPAUTH alone)
 * gets no lines of ours: libcurl signs every line of the list, ours too,
 * and a proxy or sidecar that rewrites traceparent on its way (as a
 * tracing one does) would then break the signature of a request that
 * works without the shim.  The same through the multi interface. */
START_TEST(test_aws_sigv4)
{
	const char *sign = _i == 2 ? "-w" : "-W";
	const char *args[] = {sign, "-H", "X-App: 1", _i == 1 ? "-m" : NULL, "1", NULL};
	char *env[] = {T_TP, T_TS, NULL};
	const char *v;
	struct req q;
	struct run r;

	one_request(&r, &q, args, env);
	ck_assert_int_eq(req_count(&q, "Authorization", &v), 1);
	ck_assert_msg(strstr(v, "SignedHeaders=host;x-amz-date;x-app,"), "%s", v);
	ck_assert_int_eq(req_count(&q, "traceparent", NULL), 0);
	ck_assert_int_eq(req_count(&q, "tracestate", NULL), 0);
	ck_assert_int_eq(req_count(&q, "X-App", NULL), 1);
	client_done(&r);
}
END_TEST

/* A worker thread inherits the context (hook-pthread.c) and its call is a
 * child of it. */
START_TEST(test_thread)
{
	const char *args[] = {"-T", NULL};
	char *env[] = {T_TP, NULL};
	char t[33], p[17], f[3], dt[33], ds[17];
	struct req q;
	struct run r;

	one_request(&r, &q, args, env);
	req_traceparent(&q, t, p, f);
	ck_assert_str_eq(t, T_TRACE);
	out_record(&r, "DURING", 0, dt, ds);
	ck_assert_str_eq(ds, p);
	client_done(&r);
}
END_TEST

/* No context on the thread: nothing is sent (see hook-curl.c, "No
 * context, no header"). */
START_TEST(test_no_context)
{
	const char *args[] = {"-H", "X-App: 1", NULL};
	char t[33], s[17];
	struct req q;
	struct run r;

	one_request(&r, &q, args, NULL);
	ck_assert_int_eq(req_count(&q, "traceparent", NULL), 0);
	ck_assert_int_eq(req_count(&q, "tracestate", NULL), 0);
	out_record(&r, "DURING", 0, t, s);
	ck_assert_str_eq(t, "none");
	client_done(&r);
}
END_TEST

/* A relay (curl-client -r): the thread reads a request (the socket level
 * shows it), and the transfer's write callback streams the body to that
 * request's client, which answers it.  The transfer carries a child of
 * the request; after it the thread shows nothing (old: the answered
 * request again, until its next wait). */
START_TEST(test_relay_answered_in_transfer)
{
	const char *args[] = {"-r", NULL};
	char t[33], s[17], parent[17], flags[3];
	struct req q;
	struct run r;

	one_request(&r, &q, args, NULL);
	req_traceparent(&q, t, parent, flags);
	ck_assert_str_eq(t, "5eed0000000000000000000000000517");
	out_record(&r, "BEFORE", 0, t, s);
	ck_assert_str_eq(t, "5eed0000000000000000000000000517");
	out_record(&r, "AFTER", 0, t, s);
	ck_assert_str_eq(t, "none");
	client_done(&r);
}
END_TEST

/* The application's own traceparent (any case) is sent untouched, with no
 * tracestate of ours next to it; the thread's context stays. */
START_TEST(test_app_traceparent_kept)
{
	static const char *const lines[] = {
		"traceparent: 00-11111111111111111111111111111111-2222222222222222-01",
		"TraceParent: 00-11111111111111111111111111111111-2222222222222222-01",
	};
	const char *args[] = {"-H", lines[_i], NULL};
	char *env[] = {T_TP, T_TS, NULL};
	char bt[33], bs[17], dt[33], ds[17];
	const char *v;
	struct req q;
	struct run r;

	one_request(&r, &q, args, env);
	ck_assert_int_eq(req_count(&q, "traceparent", &v), 1);
	ck_assert_str_eq(v, "00-11111111111111111111111111111111-2222222222222222-01");
	ck_assert_int_eq(req_count(&q, "tracestate", NULL), 0);
	out_record(&r, "BEFORE", 0, bt, bs);
	out_record(&r, "DURING", 0, dt, ds);
	ck_assert_str_eq(dt, bt);
	ck_assert_str_eq(ds, bs);
	client_done(&r);
}
END_TEST

/* "traceparent:" with no value removes the header in libcurl: the
 * application said "none", and we add none. */
START_TEST(test_app_traceparent_disabled)
{
	const char *args[] = {"-H", "traceparent:", NULL};
	char *env[] = {T_TP, NULL};
	struct req q;
	struct run r;

	one_request(&r, &q, args, env);
	ck_assert_int_eq(req_count(&q, "traceparent", NULL), 0);
	client_done(&r);
}
END_TEST

/* "traceparent;" sends the header empty (libcurl's form for that): the
 * application's line still, so we add none (a mutation audit: only the
 * "traceparent:" form was checked). */
START_TEST(test_app_traceparent_empty)
{
	const char *args[] = {"-H", "traceparent;", NULL};
	char *env[] = {T_TP, NULL};
	const char *v;
	struct req q;
	struct run r;

	one_request(&r, &q, args, env);
	ck_assert_int_eq(req_count(&q, "traceparent", &v), 1);
	ck_assert_str_eq(v, "");
	client_done(&r);
}
END_TEST

/* A thread without context adopts the application's traceparent for the
 * call: a hand-propagating program becomes visible. */
START_TEST(test_app_traceparent_adopted)
{
	const char *args[] = {
		"-H",
		"traceparent: 00-11111111111111111111111111111111-2222222222222222-01",
		"-H", "tracestate: k=v", NULL};
	char bt[33], bs[17], dt[33], ds[17], at[33], as[17];
	const char *v;
	struct req q;
	struct run r;

	one_request(&r, &q, args, NULL);
	ck_assert_int_eq(req_count(&q, "traceparent", &v), 1);
	ck_assert_str_eq(v, "00-11111111111111111111111111111111-2222222222222222-01");
	ck_assert_int_eq(req_count(&q, "tracestate", &v), 1);
	ck_assert_str_eq(v, "k=v");
	out_record(&r, "BEFORE", 0, bt, bs);
	out_record(&r, "DURING", 0, dt, ds);
	out_record(&r, "AFTER", 0, at, as);
	ck_assert_str_eq(bt, "none");
	ck_assert_str_eq(dt, "11111111111111111111111111111111");
	ck_assert_str_eq(ds, "2222222222222222");
	ck_assert_str_eq(at, "none");
	client_done(&r);
}
END_TEST

/* The adopted context keeps the application's tracestate, which a program
 * executed during the call gets (CTXSHIM_EXEC_TRACEPARENT=1).  Lines of
 * only empty members (W3C: allowed, not counted) took one of the 32 slots
 * each: 31 of them after k0=v left k1=v none, and the valid list of two
 * was dropped.  On the wire the lines are the application's, as set. */
START_TEST(test_app_tracestate_empty_members)
{
	enum { EMPTY = 33 };
	const char *args[2 * EMPTY + 8];
	char *env[] = {"CTXSHIM_EXEC_TRACEPARENT=1", NULL};
	char buf[256], dt[33], ds[17];
	const char *v;
	struct req q;
	struct run r;
	int i, n = 0;

	args[n++] = "-E";
	args[n++] = "-H";
	args[n++] =
		"traceparent: 00-11111111111111111111111111111111-2222222222222222-01";
	args[n++] = "-H";
	args[n++] = "tracestate: k0=v";
	for (i = 0; i < EMPTY; i++) {
		args[n++] = "-H";
		args[n++] = i % 2 ? "tracestate: ," : "tracestate: \t, ,";
	}
	args[n++] = "-H";
	args[n++] = "tracestate: k1=v";
	args[n] = NULL;
	one_request(&r, &q, args, env);
	ck_assert_int_eq(req_count(&q, "traceparent", NULL), 1);
	ck_assert_int_eq(req_count(&q, "tracestate", &v), EMPTY + 2);
	ck_assert_str_eq(v, "k1=v");
	out_record(&r, "DURING", 0, dt, ds);
	ck_assert_str_eq(dt, "11111111111111111111111111111111");
	v = out_line(&r, "EXECTS ", 0, buf, sizeof(buf));
	ck_assert_msg(v, "no EXECTS line in:\n%s", r.out);
	ck_assert_str_eq(v, "k0=v,k1=v");
	client_done(&r);
}
END_TEST

/* Two traceparent lines of the application: both go out as they are,
 * and neither is adopted (which one the server takes is its business;
 * the thread shows no context rather than a guess). */
START_TEST(test_app_traceparent_twice)
{
	const char *args[] = {
		"-H",
		"traceparent: 00-11111111111111111111111111111111-2222222222222222-01",
		"-H",
		"traceparent: 00-33333333333333333333333333333333-4444444444444444-01",
		NULL};
	char dt[33], ds[17];
	struct req q;
	struct run r;

	one_request(&r, &q, args, NULL);
	ck_assert_int_eq(req_count(&q, "traceparent", NULL), 2);
	out_record(&r, "DURING", 0, dt, ds);
	ck_assert_str_eq(dt, "none");
	client_done(&r);
}
END_TEST

/* An application that sets a tracestate (any case, even the empty line
 * that tells libcurl to send none) owns propagation for that request: no
 * traceparent of ours next to it (the receiver would file its state under
 * our trace), no tracestate of ours either; the same through the multi
 * interface. */
START_TEST(test_app_tracestate)
{
	static const char *const lines[] = {"tracestate: mine=1", "TraceState: mine=1",
					    "tracestate:", "tracestate: mine=1"};
	const char *args[] = {"-H", lines[_i], _i == 3 ? "-m" : NULL, "1", NULL};
	char *env[] = {T_TP, T_TS, NULL};
	const char *v;
	struct req q;
	struct run r;

	one_request(&r, &q, args, env);
	ck_assert_int_eq(req_count(&q, "traceparent", NULL), 0);
	if (_i == 2) {
		ck_assert_int_eq(req_count(&q, "tracestate", NULL), 0);
	} else {
		ck_assert_int_eq(req_count(&q, "tracestate", &v), 1);
		ck_assert_str_eq(v, "mine=1");
	}
	client_done(&r);
}
END_TEST

/* CTXSHIM_PROPAGATE=0 sends nothing; =transparent (any case, as the
 * boolean words) forwards the incoming parent-id (here TRACEPARENT's) and
 * publishes no client span. */
START_TEST(test_propagate_off)
{
	char *env[] = {T_TP, T_TS, "CTXSHIM_PROPAGATE=0", NULL};
	struct req q;
	struct run r;

	one_request(&r, &q, NULL, env);
	ck_assert_int_eq(req_count(&q, "traceparent", NULL), 0);
	ck_assert_int_eq(req_count(&q, "tracestate", NULL), 0);
	client_done(&r);
}
END_TEST

START_TEST(test_propagate_transparent)
{
	const char *args[] = {"-n", "2", NULL};
	char *env[] = {T_TP, T_TS, "CTXSHIM_PROPAGATE=Transparent", NULL};
	char t[33], p[17], f[3], bt[33], bs[17], dt[33], ds[17];
	const char *v;
	struct req q;
	struct run r;
	int i;

	sink_start();
	client(&r, "openssl", args, env);
	for (i = 0; i < 2; i++) {
		sink_read(&q);
		req_traceparent(&q, t, p, f);
		ck_assert_str_eq(t, T_TRACE);
		ck_assert_str_eq(p, T_PARENT);
		ck_assert_str_eq(f, "03");
		ck_assert_int_eq(req_count(&q, "tracestate", &v), 1);
		ck_assert_str_eq(v, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
	}
	out_record(&r, "BEFORE", 0, bt, bs);
	out_record(&r, "DURING", 0, dt, ds);
	ck_assert_str_eq(ds, bs);
	client_done(&r);
}
END_TEST

/* Two flavours in one process: the program's and a plugin's (dlopen'd
 * RTLD_LOCAL, so RTLD_NEXT cannot see its libcurl, or RTLD_GLOBAL).  Each
 * call reaches its own libcurl (a mix-up would crash: handles of one
 * flavour are not the other's) and both carry the context. */
START_TEST(test_two_flavours)
{
	static const char *const plugin[] = {"gnutls", "nss", "gnutls", "nss"};
	char plug[4096], buf[512], t[33], p[17], f[3];
	const char *args[] = {"-P", plug, _i >= 2 ? "-G" : "-n1", NULL};
	char *env[] = {T_TP, NULL};
	const char *v;
	struct req q;
	struct run r;
	int i;

	if (!flavour_built(_i % 2 + 1))
		return;
	snprintf(plug, sizeof(plug), "%s/libcurl-plugin-%s.so",
		 test_env_path("HELPER_DIR"), plugin[_i]);
	sink_start();
	client(&r, "openssl", args, env);
	v = out_line(&r, "PLUGIN VERSION ", 0, buf, sizeof(buf));
	ck_assert_msg(v && strstr(v, flavour_lib[_i % 2 + 1]), "plugin flavour: %s",
		      r.out);
	for (i = 0; i < 2; i++) {
		sink_read(&q);
		req_traceparent(&q, t, p, f);
		ck_assert_str_eq(t, T_TRACE);
	}
	ck_assert_int_eq(req_count(&q, "X-Plugin", NULL), 1);
	client_done(&r);
}
END_TEST

/* No leak and no invalid access in any of the paths that build, swap and
 * free our lists (valgrind on the client). */
START_TEST(test_valgrind)
{
	static const struct {
		int reqs;
		const char *args[8];
		bool none; /* no traceparent sent */
	} cases[] = {
		{2, {"-n", "2", "-H", "X-App: 1", NULL}, false},
		{3, {"-m", "3", "-H", "X-App: 1", NULL}, false},
		{4, {"-m", "2", "-C", "-H", "X-App: 1", NULL}, false},
		{2, {"-m", "2", "-X", NULL}, false},
		{3, {"-D", "-H", "X-App: 1", NULL}, false},
		{1, {"-R", "-H", "X-App: 1", NULL}, false},
		{2, {"-S", "-m", "2", "-H", "X-App: 1", NULL}, false},
		{2, {"-S", "-n", "2", NULL}, false},
		{1, {"-u", NULL}, false},
		{1, {"-T", NULL}, false},
		{2, {"-m", "2", "-H", "X-App: 1", "-L", "X-Late: 2", NULL}, false},
		{2, {"-m", "2", "-H", "X-App: 1", "-N", "X-New: 1", NULL}, false},
		{2, {"-m", "2", "-H", "X-App: 1", "-N", "traceparent:", NULL}, true},
		{2, {"-m", "2", "-N", "tracestate: a=1", NULL}, true},
		{1, {"-H", "tracestate: a=1", NULL}, true},
		{2, {"-m", "2", "-H", "X-App: 1", "-L", "tracestate: a=1", NULL}, true},
		{2, {"-m", "2", "-q", "-H", "X-App: 1", "-Q", "X-Pre: 1", NULL}, false},
		{3, {"-m", "2", "-D", "-q", "-H", "X-App: 1", NULL}, false},
	};
	char path[4096], url[128], *argv[16], *out, *err;
	char *env[] = {T_TP, T_TS, NULL};
	struct req q;
	int n = 0, i, st;

#ifdef __SANITIZE_ADDRESS__
	/* The helpers carry the ASan runtime, which valgrind cannot run;
	 * LeakSanitizer checks them in the other tests instead. */
	return;
#endif
	if (access("/usr/bin/valgrind", X_OK) != 0)
		return;
	sink_start();
	snprintf(path, sizeof(path), "%s/curl-client-openssl",
		 test_env_path("HELPER_DIR"));
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/t", sink_port);
	argv[n++] = "/usr/bin/valgrind";
	argv[n++] = "-q";
	argv[n++] = "--error-exitcode=9";
	argv[n++] = "--leak-check=full";
	argv[n++] = "--errors-for-leak-kinds=definite";
	argv[n++] = path;
	for (i = 0; cases[_i].args[i]; i++)
		argv[n++] = (char *)cases[_i].args[i];
	argv[n++] = url;
	argv[n] = NULL;
	st = test_run_capture(argv, env, true, &out, &err, 120000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "valgrind status %#x:\n%s\n%s", st, out, err);
	for (i = 0; i < cases[_i].reqs; i++) {
		char t[33], p[17], f[3];

		sink_read(&q);
		if (cases[_i].none) {
			ck_assert_int_eq(req_count(&q, "traceparent", NULL), 0);
			continue;
		}
		req_traceparent(&q, t, p, f);
		ck_assert_str_eq(t, T_TRACE);
	}
	free(out);
	free(err);
	sink_stop();
}
END_TEST

TEST_SUITE(preload_curl_suite)
{
	Suite *s = suite_create("libcurl hooks (hook-curl.c)");
	TCase *tc;
	char path[4096];

	snprintf(path, sizeof(path), "%s/http-sink", test_env_path("HELPER_DIR"));
	if (access(path, X_OK) != 0 || !flavour_built(0))
		test_skip("the libcurl helpers were not built");
	tc = tcase_create("flavours");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_flavour_inject, 0, 3);
	tcase_add_test(tc, test_without_shim);
	tcase_add_loop_test(tc, test_two_flavours, 0, 4);
	suite_add_tcase(s, tc);

	tc = tcase_create("header lists");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_repeat_same_handle);
	tcase_add_loop_test(tc, test_multi, 0, 3);
	tcase_add_test(tc, test_setopt_during_transfer);
	tcase_add_test(tc, test_multi_late_append);
	tcase_add_loop_test(tc, test_multi_replace, 0, 5);
	tcase_add_loop_test(tc, test_late_app_context, 0, LATE_APP_CASES);
	tcase_add_loop_test(tc, test_late_own_context, 0, LATE_OWN_CASES);
	tcase_add_test(tc, test_duphandle);
	tcase_add_test(tc, test_reset);
	tcase_add_test(tc, test_list_set_before_the_shim);
	tcase_add_test(tc, test_curlu);
	tcase_add_test(tc, test_default_protocol_http);
	tcase_add_test(tc, test_guessed_ftp_after_user);
	tcase_add_test(tc, test_thread);
	suite_add_tcase(s, tc);

	tc = tcase_create("policy");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_no_context);
	tcase_add_test(tc, test_relay_answered_in_transfer);
	tcase_add_loop_test(tc, test_app_traceparent_kept, 0, 2);
	tcase_add_test(tc, test_app_traceparent_disabled);
	tcase_add_test(tc, test_app_traceparent_empty);
	tcase_add_loop_test(tc, test_aws_sigv4, 0, 3);
	tcase_add_test(tc, test_app_traceparent_adopted);
	tcase_add_test(tc, test_app_traceparent_twice);
	tcase_add_test(tc, test_app_tracestate_empty_members);
	tcase_add_loop_test(tc, test_app_tracestate, 0, 4);
	tcase_add_test(tc, test_propagate_off);
	tcase_add_test(tc, test_propagate_transparent);
	suite_add_tcase(s, tc);

	tc = tcase_create("valgrind");
	tcase_set_timeout(tc, 180);
	tcase_add_loop_test(tc, test_valgrind, 0, 18);
	suite_add_tcase(s, tc);
	return s;
}
