/* SPDX-License-Identifier: Apache-2.0 */
/* The attribute values a real server's request publishes (request-ctx.h):
 * a method the semantic conventions do not know as "_OTHER" with
 * http.request.method_original, and values that are not UTF-8 (a raw byte
 * in the path, obs-text in a header) left out -- at the socket level
 * (helpers/tpc-server.c) and in the libmicrohttpd hooks
 * (helpers/mhd-server.c), read back with ctxdump -j while the request
 * blocks, the key resolved through the published key map. */
#include "test-common.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test-integration-block.h"
#pragma GCC diagnostic pop

#define HDR_TP "traceparent: " TP "\r\n"

enum server { TPC, MHD };

/* More environment entries for the server (NULL-terminated). */
static char *extra_env[3];

static void
start(struct it_server *s, enum server which)
{
	static char path[4096];
	char *argv[] = {path, which == MHD ? "thread" : NULL, NULL};
	char *env[] = {"CTXSHIM_HEADER_ATTRS=x-request-id", extra_env[0], extra_env[1],
		       NULL};

	snprintf(path, sizeof(path), "%s/%s", test_env_path("HELPER_DIR"),
		 which == MHD ? "mhd-server" : "tpc-server");
	it_server_start(s, argv, true, env);
}

/* Sends req and waits until its handler blocks; returns the fd and the
 * handler's thread in *tid. */
static int
send_blocking(struct it_server *s, enum server which, const char *req, long *tid)
{
	char line[1200];
	int fd;

	if (which == MHD)
		return it_send_blocking(s, -1, req, tid);
	fd = it_connect(s->port);
	it_send_str(fd, req);
	test_child_expect(&s->child, "BLOCK ", line, sizeof(line), IT_TIMEOUT_MS);
	*tid = strtol(line + 6, NULL, 10);
	ck_assert_int_gt(*tid, 0);
	return fd;
}

static void
finish(struct it_server *s, enum server which, int fd)
{
	if (which == MHD) {
		free(it_release(s, fd));
	} else {
		test_child_send(&s->child, "go\n");
		free(it_read_response(fd));
		close(fd);
	}
	it_server_stop(s);
}

/* ctxdump -j of pid.  Not inlined: gcc 12 then mistakes the result for
 * it_ctxdump()'s local buffer (-Wdangling-pointer). */
static __attribute__((noinline)) char *
dump(pid_t pid)
{
	return it_ctxdump(pid);
}

/* The blocked thread's context as ctxdump shows it: an attribute of that
 * name, or none (want NULL); the traceparent continued. */
struct want {
	const char *method, *original, *path, *request_id;
};

static void
check(struct it_server *s, long tid, const struct want *w)
{
	static const struct {
		const char *key;
		size_t off;
	} keys[] = {
		{"http.request.method", offsetof(struct want, method)},
		{"http.request.method_original", offsetof(struct want, original)},
		{"url.path", offsetof(struct want, path)},
		{"http.request.header.x-request-id", offsetof(struct want, request_id)},
	};
	char *json = dump(s->child.pid), pat[48], val[512];
	const char *p, *end, *ctx, *km;
	struct it_thread_ctx t;

	ck_assert_msg(it_dump_thread(json, tid, &t) && t.has_ctx,
		      "thread %ld has no context:\n%s", tid, json);
	ck_assert_str_eq(t.trace, TP_TRACE);
	ck_assert_str_eq(t.parent, TP_PARENT);
	snprintf(pat, sizeof(pat), "\"tid\": %ld,", tid);
	p = strstr(json, pat);
	end = strstr(p + 1, "\"tid\": ");
	if (!end)
		end = p + strlen(p);
	ctx = strstr(p, "\"context\": ");
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *v = *(const char *const *)((const char *)w + keys[i].off);
		bool has = it_json_attr(ctx, end, keys[i].key, val, sizeof(val));

		if (v)
			ck_assert_msg(has && strcmp(val, v) == 0,
				      "%s: want \"%s\", got %s\"%s\":\n%s", keys[i].key,
				      v, has ? "" : "none ", has ? val : "", json);
		else
			ck_assert_msg(!has, "%s published (\"%s\"), want none:\n%s",
				      keys[i].key, val, json);
	}
	/* The key map lists method_original last, after the configured
	 * header: the indices before it are unchanged. */
	km = strstr(json, "\"key_map\": [");
	ck_assert_msg(km, "no key map:\n%s", json);
	ck_assert_msg(strstr(km, "\"http.request.header.x-request-id\",\n") &&
			      strstr(km, "\"http.request.header.x-request-id\",\n") <
				      strstr(km, "\"http.request.method_original\"\n"),
		      "key map:\n%.400s", km);
	free(json);
}

static void
run(enum server which, const char *req, const struct want *w)
{
	struct it_server s;
	long tid;
	int fd;

	start(&s, which);
	fd = send_blocking(&s, which, req, &tid);
	check(&s, tid, w);
	finish(&s, which, fd);
}

START_TEST(test_known_method)
{
	static const struct want w = {"PUT", NULL, "/block/k", "id-1"};

	run((enum server)_i,
	    "PUT /block/k?x=1 HTTP/1.1\r\nHost: t\r\n" HDR_TP
	    "X-Request-Id: id-1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
	    &w);
}
END_TEST

START_TEST(test_unknown_method)
{
	static const struct want w = {"_OTHER", "PROPFIND", "/block/dav", "id-2"};

	run((enum server)_i,
	    "PROPFIND /block/dav HTTP/1.1\r\nHost: t\r\n" HDR_TP
	    "X-Request-Id: id-2\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
	    &w);
}
END_TEST

/* 20 bytes: the longest method the socket level's scanner takes. */
START_TEST(test_unknown_method_20)
{
	static const struct want w = {"_OTHER", "ABCDEFGHIJKLMNOPQRST", "/block/m",
				      NULL};

	run((enum server)_i,
	    "ABCDEFGHIJKLMNOPQRST /block/m HTTP/1.1\r\nHost: t\r\n" HDR_TP
	    "Content-Length: 0\r\nConnection: close\r\n\r\n",
	    &w);
}
END_TEST

/* obs-text (Latin-1 "e acute") in the configured header: left out, the
 * rest stays. */
START_TEST(test_header_obs_text)
{
	static const struct want w = {"GET", NULL, "/block/h", NULL};

	run((enum server)_i,
	    "GET /block/h HTTP/1.1\r\nHost: t\r\n" HDR_TP
	    "X-Request-Id: caf\xe9\r\nConnection: close\r\n\r\n",
	    &w);
}
END_TEST

START_TEST(test_header_utf8)
{
	static const struct want w = {"GET", NULL, "/block/h", "caf\xc3\xa9"};

	run((enum server)_i,
	    "GET /block/h HTTP/1.1\r\nHost: t\r\n" HDR_TP
	    "X-Request-Id: caf\xc3\xa9\r\nConnection: close\r\n\r\n",
	    &w);
}
END_TEST

/* A raw byte that is not UTF-8 in the request-target (RFC 9112 wants it
 * percent-encoded; it arrives anyway): no url.path. */
START_TEST(test_path_not_utf8)
{
	static const struct want w = {"GET", NULL, NULL, "id-3"};

	run((enum server)_i,
	    "GET /block/caf\xe9 HTTP/1.1\r\nHost: t\r\n" HDR_TP
	    "X-Request-Id: id-3\r\nConnection: close\r\n\r\n",
	    &w);
}
END_TEST

/* OTEL_INSTRUMENTATION_HTTP_KNOWN_METHODS replaces the list: a method of
 * it is published as itself, one of the default list that it lacks is
 * "_OTHER". */
START_TEST(test_known_methods_env)
{
	static const struct want dav = {"PROPFIND", NULL, "/block/dav", "id-5"};
	static const struct want put = {"_OTHER", "PUT", "/block/k", "id-6"};

	extra_env[0] = "OTEL_INSTRUMENTATION_HTTP_KNOWN_METHODS=GET, PROPFIND";
	run((enum server)_i,
	    "PROPFIND /block/dav HTTP/1.1\r\nHost: t\r\n" HDR_TP
	    "X-Request-Id: id-5\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
	    &dav);
	run((enum server)_i,
	    "PUT /block/k HTTP/1.1\r\nHost: t\r\n" HDR_TP
	    "X-Request-Id: id-6\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
	    &put);
	extra_env[0] = NULL;
}
END_TEST

/* A list the shim cannot hold (an entry over 20 bytes) is logged and
 * ignored whole: the default list stays, none of the list's methods is
 * taken, and the methods are not all "_OTHER". */
START_TEST(test_known_methods_refused)
{
	static const struct want put = {"PUT", NULL, "/block/k", "id-8"};
	static const struct want dav = {"_OTHER", "PROPFIND", "/block/dav", "id-9"};
	char logpath[] = "/tmp/ctxshim-log-XXXXXX", logenv[64], log[4096];
	int fd = test_mkstemp(logpath);

	ck_assert_int_ge(fd, 0);
	close(fd);
	snprintf(logenv, sizeof(logenv), "CTXSHIM_LOG=%s", logpath);
	extra_env[0] = "OTEL_INSTRUMENTATION_HTTP_KNOWN_METHODS=GET, PROPFIND, "
		       "ABCDEFGHIJKLMNOPQRSTU";
	extra_env[1] = logenv;
	run((enum server)_i,
	    "PUT /block/k HTTP/1.1\r\nHost: t\r\n" HDR_TP
	    "X-Request-Id: id-8\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
	    &put);
	run((enum server)_i,
	    "PROPFIND /block/dav HTTP/1.1\r\nHost: t\r\n" HDR_TP
	    "X-Request-Id: id-9\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
	    &dav);
	extra_env[0] = extra_env[1] = NULL;
	ck_assert_int_gt(test_read_small(logpath, log, sizeof(log)), 0);
	unlink(logpath);
	ck_assert_msg(strstr(log, "OTEL_INSTRUMENTATION_HTTP_KNOWN_METHODS: more than "
				  "32 methods or one over 20 bytes, ignoring it\n"),
		      "log: %s", log);
}
END_TEST

START_TEST(test_path_utf8)
{
	static const struct want w = {"GET", NULL, "/block/caf\xc3\xa9", "id-4"};

	run((enum server)_i,
	    "GET /block/caf\xc3\xa9?q=\xff HTTP/1.1\r\nHost: t\r\n" HDR_TP
	    "X-Request-Id: id-4\r\nConnection: close\r\n\r\n",
	    &w);
}
END_TEST

/* Percent-encoding stays as sent, an encoded "/" too: libmicrohttpd
 * decodes the url it hands its handler ("/block/café/x"), url.path is the
 * target like the socket level's. */
START_TEST(test_path_percent)
{
	static const struct want w = {"GET", NULL, "/block/caf%C3%A9%2Fx", "id-7"};

	run((enum server)_i,
	    "GET /block/caf%C3%A9%2Fx?q=%C3%A9 HTTP/1.1\r\nHost: t\r\n" HDR_TP
	    "X-Request-Id: id-7\r\nConnection: close\r\n\r\n",
	    &w);
}
END_TEST

TEST_SUITE(preload_attrs_suite)
{
	Suite *s = suite_create("Published attribute values");
	TCase *tc = tcase_create("socket and libmicrohttpd");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_known_method, TPC, MHD + 1);
	tcase_add_loop_test(tc, test_unknown_method, TPC, MHD + 1);
	tcase_add_loop_test(tc, test_unknown_method_20, TPC, MHD + 1);
	tcase_add_loop_test(tc, test_header_obs_text, TPC, MHD + 1);
	tcase_add_loop_test(tc, test_header_utf8, TPC, MHD + 1);
	tcase_add_loop_test(tc, test_path_not_utf8, TPC, MHD + 1);
	tcase_add_loop_test(tc, test_path_utf8, TPC, MHD + 1);
	tcase_add_loop_test(tc, test_path_percent, TPC, MHD + 1);
	tcase_add_loop_test(tc, test_known_methods_env, TPC, MHD + 1);
	tcase_add_loop_test(tc, test_known_methods_refused, TPC, MHD + 1);
	suite_add_tcase(s, tc);
	return s;
}
