/* SPDX-License-Identifier: Apache-2.0 */
/* Real programs under the shim, under valgrind memcheck: the servers of
 * the socket and library hooks (tpc-server, epoll-server, mhd-server,
 * evhttp-server) driven with traced, pipelined, split, large and non-HTTP
 * requests, a threaded program with a context to pass on, libevent's
 * deferred callbacks, pushes into a GLib pool being freed, GLib pools
 * freed newest first, and the connection and fork stress of
 * test/helpers/stress.c.  Any memcheck error, or a definite leak, fails
 * (exit status 3), with valgrind's log.
 * Skipped without valgrind and in sanitizer builds (valgrind cannot run
 * the ASan runtime that is preloaded there). */
/* test-integration.h is static functions: not all are used here */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test-integration.h"

#include <stdarg.h>

#define VG_TIMEOUT_MS 120000
#define TP            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static char vg_log[64];

/* argv for valgrind running helper name with up to 3 arguments. */
static void
vg_argv(char **argv, char *path, size_t n, const char *name, ...)
{
	static char logopt[96];
	va_list ap;
	const char *a;
	int k = 0;

	snprintf(vg_log, sizeof(vg_log), "/tmp/ctxshim-vg-XXXXXX");
	close(test_mkstemp(vg_log));
	snprintf(logopt, sizeof(logopt), "--log-file=%s", vg_log);
	snprintf(path, n, "%s/%s", test_env_path("HELPER_DIR"), name);
	argv[k++] = "/usr/bin/valgrind";
	argv[k++] = "--quiet";
	argv[k++] = "--error-exitcode=3";
	argv[k++] = "--leak-check=full";
	argv[k++] = "--show-leak-kinds=definite";
	argv[k++] = "--errors-for-leak-kinds=definite";
	argv[k++] = logopt;
	argv[k++] = path;
	va_start(ap, name);
	while ((a = va_arg(ap, const char *)) != NULL && k < 14)
		argv[k++] = (char *)a;
	va_end(ap);
	argv[k] = NULL;
}

static void
vg_check(int st, const char *what)
{
	char *log = NULL;
	size_t len = 0;
	int fd = open(vg_log, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		log = it_read_all(fd, &len);
		close(fd);
	}
	unlink(vg_log);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "%s under valgrind: status %#x\n%s", what, st, log ? log : "");
	free(log);
}

/* A server under valgrind and the shim; it_server_stop() would not show
 * the log, so stop it here. */
static void
vg_server_stop(struct it_server *s, const char *what)
{
	int st = test_child_finish(&s->child, VG_TIMEOUT_MS);

	if (s->events_fd > 2)
		close(s->events_fd);
	vg_check(st, what);
}

/* Read n complete responses (Content-Length bodies), pipelined or not;
 * returns them concatenated (malloc'd). */
static char *
read_responses(int fd, unsigned n)
{
	char *buf = NULL;
	size_t len = 0, cap = 0, off = 0;

	while (n > 0) {
		char *end = buf ? strstr(buf + off, "\r\n\r\n") : NULL, *cl;
		size_t want;

		if (!end) {
			ck_assert_msg(it_read_some(fd, &buf, &len, &cap),
				      "connection closed early");
			continue;
		}
		cl = strcasestr(buf + off, "\r\nContent-Length:");
		ck_assert_msg(cl && cl < end, "no Content-Length: %s", buf + off);
		want = (size_t)(end + 4 - buf) + strtoul(cl + 17, NULL, 10);
		while (len < want)
			ck_assert_msg(it_read_some(fd, &buf, &len, &cap),
				      "connection closed early");
		off = want;
		n--;
	}
	ck_assert_uint_eq(len, off);
	return buf;
}

/* The requests every server gets: traced, pipelined, split into 3-byte
 * writes, a large body (big: bytes), then bytes that are no HTTP on their
 * own connection (no answer expected: the server may wait or close). */
static void
drive(unsigned port, size_t big_len)
{
	static const char pipelined[] = "GET /a HTTP/1.1\r\nHost: x\r\ntraceparent: " TP
					"\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n";
	char *big, head[256], *r;
	int fd;

	fd = it_connect(port);
	it_send_str(fd, pipelined);
	r = read_responses(fd, 2);
	ck_assert_msg(strstr(r, " 200 "), "%s", r);
	free(r);
	for (const char *p = pipelined; *p; p += 3) {
		size_t n = strnlen(p, 3);

		it_send(fd, p, n);
		if (n < 3)
			break;
	}
	free(read_responses(fd, 2));
	if (big_len) {
		big = malloc(big_len);
		ck_assert_ptr_nonnull(big);
		memset(big, 'b', big_len);
		snprintf(head, sizeof(head),
			 "POST /big HTTP/1.1\r\nHost: x\r\ntraceparent: " TP
			 "\r\nContent-Length: %zu\r\n\r\n",
			 big_len);
		it_send_str(fd, head);
		it_send(fd, big, big_len);
		free(read_responses(fd, 1));
		free(big);
	}
	close(fd);
	fd = it_connect(port);
	it_send(fd, "\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00", 10);
	usleep(100000);
	close(fd);
}

static void
server_case(const char *name, const char *arg, size_t big_len)
{
	char path[4096], *argv[16];
	char *env[] = {"CTXSHIM_HEADER_ATTRS=host", NULL};
	struct it_server s;

	vg_argv(argv, path, sizeof(path), name, arg, NULL);
	it_server_start(&s, argv, true, env);
	drive(s.port, big_len);
	vg_server_stop(&s, name);
}

START_TEST(tpc_server)
{
	server_case("tpc-server", NULL, 256 * 1024);
}
END_TEST

START_TEST(epoll_server)
{
	server_case("epoll-server", NULL, 0);
}
END_TEST

START_TEST(mhd_server)
{
	server_case("mhd-server", _i ? "epoll" : "thread", 256 * 1024);
}
END_TEST

START_TEST(evhttp_server)
{
	server_case("evhttp-server", NULL, 256 * 1024);
}
END_TEST

START_TEST(threads_with_context)
{
	char path[4096], *argv[16], line[512];
	char *env[] = {"TRACEPARENT=" TP, NULL};
	struct test_child c;

	vg_argv(argv, path, sizeof(path), "threads", "--wait", "8", NULL);
	test_child_start(&c, argv, env, true);
	test_child_expect(&c, "READY ", line, sizeof(line), VG_TIMEOUT_MS);
	vg_check(test_child_finish(&c, VG_TIMEOUT_MS), "threads --wait 8");
}
END_TEST

/* Deferred callbacks of a thread with a context (event_base_once(),
 * hooks/hook-evhttp.c), one of them pending when its base is freed:
 * libevent frees it without a call, and the shim its wrapper. */
START_TEST(evbase_once_pending)
{
	char path[4096], *argv[16], *out, *err;
	char *env[] = {"TRACEPARENT=" TP, NULL};
	int st;

	vg_argv(argv, path, sizeof(path), "evbase-once", "api", NULL);
	st = test_run_capture(argv, env, true, &out, &err, VG_TIMEOUT_MS);
	ck_assert_msg(strstr(out, "\npending r=0\n"), "%s\n%s", out, err);
	vg_check(st, "evbase-once api");
	free(out);
	free(err);
}
END_TEST

/* GLib's thread pool (hooks/hook-pool-glib.c): pushes into a pool that
 * is being freed, some of which GLib refuses; the shim's wrapper of a
 * refused push is freed, and none reaches the pool's function unwrapped. */
START_TEST(glib_pool_push_during_free)
{
	char path[4096], *argv[16], *out, *err;
	char *env[] = {"TRACEPARENT=" TP, NULL};
	int st;

	vg_argv(argv, path, sizeof(path), "pool-glib", "freerace", "20", NULL);
	if (access(path, X_OK) != 0)
		return; /* built without libglib2.0-dev */
	st = test_run_capture(argv, env, true, &out, &err, VG_TIMEOUT_MS);
	ck_assert_msg(strstr(out, "freerace ok\n"), "%s\n%s", out, err);
	vg_check(st, "pool-glib freerace");
	free(out);
	free(err);
}
END_TEST

/* Pools freed newest first: a freed pool must leave the shim's registry,
 * where the lookup of an older pool sharing its bucket would read it. */
START_TEST(glib_pools_freed)
{
	char path[4096], *argv[16], *out, *err;
	int st;

	vg_argv(argv, path, sizeof(path), "pool-glib", "freemany", NULL);
	if (access(path, X_OK) != 0)
		return; /* built without libglib2.0-dev */
	st = test_run_capture(argv, NULL, true, &out, &err, VG_TIMEOUT_MS);
	ck_assert_msg(strstr(out, "freemany ok\n"), "%s\n%s", out, err);
	vg_check(st, "pool-glib freemany");
	free(out);
	free(err);
}
END_TEST

/* libuv's pool (hooks/hook-pool-uv.c): the shim's wrapper of each request
 * is freed, whether it ran, was cancelled, had no after_work_cb or was
 * submitted again from its after_work_cb. */
START_TEST(uv_pool_api)
{
	char path[4096], *argv[16], *out, *err;
	char *env[] = {"TRACEPARENT=" TP, NULL};
	int st;

	vg_argv(argv, path, sizeof(path), "pool-uv", "api", NULL);
	if (access(path, X_OK) != 0)
		return; /* built without libuv1-dev */
	st = test_run_capture(argv, env, true, &out, &err, VG_TIMEOUT_MS);
	ck_assert_msg(strstr(out, "\nclose 0\n"), "%s\n%s", out, err);
	vg_check(st, "pool-uv api");
	free(out);
	free(err);
}
END_TEST

START_TEST(stress_under_valgrind)
{
	static const char *const modes[][2] = {{"conns", "2000"},
					       {"forks", "48"},
					       {"sigread", "2000"},
					       {"closerace", "20"}};
	char path[4096], *argv[16], *out, *err;
	int st;

	vg_argv(argv, path, sizeof(path), "stress", modes[_i][0], modes[_i][1], NULL);
	st = test_run_capture(argv, NULL, true, &out, &err, VG_TIMEOUT_MS);
	ck_assert_msg(strstr(out, "RESULT "), "%s\n%s", out, err);
	vg_check(st, modes[_i][0]);
	free(out);
	free(err);
}
END_TEST

TEST_SUITE(preload_valgrind_suite)
{
	Suite *s = suite_create("preload-valgrind");
	TCase *tc = tcase_create("memcheck");
	const char *lib = test_env_path("CTXSHIM_LIB");

	if (access("/usr/bin/valgrind", X_OK) != 0)
		test_skip("valgrind is not installed");
	if (strchr(lib, ' '))
		test_skip("sanitizer build: valgrind cannot run the ASan runtime");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, tpc_server);
	tcase_add_test(tc, epoll_server);
	tcase_add_loop_test(tc, mhd_server, 0, 2);
	tcase_add_test(tc, evhttp_server);
	tcase_add_test(tc, threads_with_context);
	tcase_add_test(tc, evbase_once_pending);
	tcase_add_test(tc, glib_pool_push_during_free);
	tcase_add_test(tc, glib_pools_freed);
	tcase_add_test(tc, uv_pool_api);
	tcase_add_loop_test(tc, stress_under_valgrind, 0, 4);
	suite_add_tcase(s, tc);
	return s;
}
