/* SPDX-License-Identifier: Apache-2.0 */
/* Thread pools of real libraries (hooks/hook-pool-uv.c, hook-pool-glib.c):
 * each work item runs under the context of the thread that submitted it,
 * observed from inside (the helpers print what each item reads from its
 * own otel_thread_ctx_v1) and in the event log.  Two submitters share one
 * pool: the main thread, which continues TRACEPARENT, and a thread started
 * before the shim's constructor, which has no context; the first four
 * items wait for each other, so several are in flight at once.  And
 * libevent's deferred callbacks (event_base_once(), hook-evhttp.c), which
 * carry the context of the thread that scheduled them the same way. */
#include "test-common.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TRACE_ID  "4bf92f3577b34da6a3ce929d0e0e4736"
#define PARENT_ID "00f067aa0ba902b7"
#define NONE      "trace=- span=-"

static char preload[4200], events[4200];

static char *
run(const char *prog,
    const char *a1,
    const char *a2,
    bool shim,
    const char *events_path)
{
	char *argv[] = {(char *)test_helper_path(prog), (char *)a1, (char *)a2, NULL};
	char *env[5], *out, *err;
	size_t k = 0;
	int st;

	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s",
		 test_env_path("CTXSHIM_LIB"));
	if (shim)
		env[k++] = preload;
	env[k++] = "TRACEPARENT=00-" TRACE_ID "-" PARENT_ID "-01";
	if (events_path) {
		snprintf(events, sizeof(events), "CTXSHIM_EVENTS=%s", events_path);
		env[k++] = events;
	}
	env[k] = NULL;
	st = test_run_capture(argv, env, false, &out, &err, 60000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s %s: status %#x: %s%s",
		      prog, a1, st, out, err);
	ck_assert_msg(strcmp(err, "") == 0, "%s %s: stderr: %s", prog, a1, err);
	free(err);
	return out;
}

static char *
line_of(const char *out, const char *prefix)
{
	size_t pl = strlen(prefix);
	const char *p = out;

	while (p && *p) {
		const char *nl = strchr(p, '\n');

		if (strncmp(p, prefix, pl) == 0)
			return strndup(p, nl ? (size_t)(nl - p) : strlen(p));
		p = nl ? nl + 1 : NULL;
	}
	return NULL;
}

static const char *
ctx_part(const char *line)
{
	const char *t = strstr(line, "trace=");

	ck_assert_msg(t, "%s", line);
	return t;
}

/* The value of " key=" in line, copied into buf. */
static const char *
field(const char *line, const char *key, char *buf, size_t n)
{
	char k[32];
	const char *p;

	snprintf(k, sizeof(k), " %s=", key);
	p = strstr(line, k);
	ck_assert_msg(p, "no %s in %s", key, line);
	p += strlen(k);
	snprintf(buf, n, "%.*s", (int)strcspn(p, " "), p);
	return buf;
}

static void
main_ctx(const char *out, char *ctx, size_t n, char *tid, size_t tn)
{
	char *l = line_of(out, "MAIN ");

	ck_assert_msg(l, "no MAIN line: %s", out);
	ck_assert_msg(strncmp(ctx_part(l), "trace=" TRACE_ID " span=", 38) == 0, "%s",
		      l);
	snprintf(ctx, n, "%s", ctx_part(l));
	field(l, "tid", tid, tn);
	free(l);
}

static char *
slurp(const char *path)
{
	char *buf = calloc(1, 1 << 20);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t r;

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_ge(fd, 0);
	r = read(fd, buf, (1 << 20) - 1);
	ck_assert_int_ge(r, 0);
	close(fd);
	return buf;
}

/* Event lines with this reason; each must carry trace (if not NULL). */
static unsigned
count_events(const char *log, const char *reason, const char *trace)
{
	char want[64];
	const char *p = log;
	unsigned n = 0;

	snprintf(want, sizeof(want), " reason=%s\n", reason);
	while ((p = strstr(p, want))) {
		const char *bol = p;

		while (bol > log && bol[-1] != '\n')
			bol--;
		if (trace)
			ck_assert_msg(strstr(bol, trace) && strstr(bol, trace) < p,
				      "%.*s", (int)(p - bol), bol);
		n++;
		p += strlen(want);
	}
	return n;
}

static void
tmp_path(char *path, size_t n)
{
	int fd;

	snprintf(path, n, "/tmp/ctxshim-pools-XXXXXX");
	fd = test_mkstemp(path);
	ck_assert_int_ge(fd, 0);
	close(fd);
}

START_TEST(glib_items_carry_submitter_context)
{
	char ctx[128], mtid[32], tid[32], one_tid[32] = "", ev[64];
	char *out, *line, *save = NULL, *log;
	unsigned one = 0, four = 0;

	tmp_path(ev, sizeof(ev));
	out = run("pool-glib", "ctx", "3", true, ev);
	main_ctx(out, ctx, sizeof(ctx), mtid, sizeof(mtid));
	for (line = strtok_r(out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		bool from_main;

		if (strncmp(line, "ITEM ", 5) != 0)
			continue;
		from_main = strncmp(line, "ITEM main-", 10) == 0;
		ck_assert_msg(from_main || strncmp(line, "ITEM early-", 11) == 0, "%s",
			      line);
		ck_assert_str_eq(ctx_part(line), from_main ? ctx : NONE);
		field(line, "tid", tid, sizeof(tid));
		ck_assert_str_ne(tid, mtid);
		if (strstr(line, " pool=one ")) {
			/* one pool thread ran both submitters' items in turn */
			if (!one++)
				snprintf(one_tid, sizeof(one_tid), "%s", tid);
			ck_assert_str_eq(tid, one_tid);
		} else {
			four++;
		}
	}
	ck_assert_uint_eq(one, 6);
	ck_assert_uint_eq(four, 6);
	free(out);

	/* The event log shows each item of main's published on its pool
	 * thread and cleared after it. */
	log = slurp(ev);
	unlink(ev);
	ck_assert_uint_eq(count_events(log, "glib-pool-item", "trace=" TRACE_ID), 6);
	ck_assert_uint_eq(count_events(log, "glib-pool-item-done", "trace=-"), 6);
	free(log);
}
END_TEST

START_TEST(glib_gtask_pool)
{
	char ctx[128], mtid[32], tid[32];
	char *out, *l;

	/* GIO creates and feeds its own GTask pool (with a sort function and
	 * move_to_front) through the hooked API. */
	out = run("pool-glib", "gtask", NULL, true, NULL);
	main_ctx(out, ctx, sizeof(ctx), mtid, sizeof(mtid));
	l = line_of(out, "TASK main ");
	ck_assert_msg(l, "%s", out);
	ck_assert_str_eq(ctx_part(l), ctx);
	ck_assert_str_ne(field(l, "tid", tid, sizeof(tid)), mtid);
	free(l);
	l = line_of(out, "TASK early ");
	ck_assert_msg(l, "%s", out);
	ck_assert_str_eq(ctx_part(l), NONE);
	free(l);
	l = line_of(out, "TASK main-again ");
	ck_assert_msg(l, "%s", out);
	ck_assert_str_eq(ctx_part(l), ctx);
	free(l);
	free(out);
}
END_TEST

static void
assert_api_unchanged(const char *prog)
{
	char *with = run(prog, "api", NULL, true, NULL);
	char *without = run(prog, "api", NULL, false, NULL);

	ck_assert_msg(strcmp(with, without) == 0,
		      "%s api differs:\n--- without\n%s--- with\n%s", prog, without,
		      with);
	free(with);
	free(without);
}

START_TEST(glib_api_unchanged)
{
	assert_api_unchanged("pool-glib");
}
END_TEST

/* Threads that set one pool's sort function at once: GLib keeps the
 * comparator of the last call, and that one must still be alive. */
START_TEST(glib_sort_function_race)
{
	char *out = run("pool-glib", "sortrace", NULL, true, NULL);

	ck_assert_str_eq(out, "sortrace ok\n");
	free(out);
}
END_TEST

/* An item pushes into its own pool while main frees it: each push GLib
 * accepts must reach the pool's function as the shim's wrapper, never as
 * the application's pointer, and a refused one must not be run. */
START_TEST(glib_push_during_free)
{
	char *out = run("pool-glib", "freerace", "300", true, NULL);

	ck_assert_str_eq(out, "freerace ok\n");
	free(out);
}
END_TEST

START_TEST(uv_work_and_after_carry_submitter_context)
{
	char ctx[128], mtid[32], tid[32], etid[32] = "", ev[64];
	char *out, *line, *save = NULL, *log, *l;
	unsigned work = 0, after = 0;

	tmp_path(ev, sizeof(ev));
	out = run("pool-uv", "ctx", "4", true, ev);
	main_ctx(out, ctx, sizeof(ctx), mtid, sizeof(mtid));
	l = line_of(out, "LOOPSTART early ");
	ck_assert_msg(l, "%s", out);
	field(l, "tid", etid, sizeof(etid));
	ck_assert_str_eq(ctx_part(l), NONE);
	free(l);
	for (line = strtok_r(out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		bool from_main;

		if (strncmp(line, "WORK ", 5) == 0) {
			from_main = strncmp(line, "WORK main-", 10) == 0;
			ck_assert_str_eq(ctx_part(line), from_main ? ctx : NONE);
			field(line, "tid", tid, sizeof(tid));
			ck_assert_str_ne(tid, mtid);
			ck_assert_str_ne(tid, etid);
			work++;
		} else if (strncmp(line, "AFTER ", 6) == 0) {
			/* on the submitting loop's thread, with the request's
			 * context */
			from_main = strncmp(line, "AFTER main-", 11) == 0;
			ck_assert_msg(strstr(line, " status=0 "), "%s", line);
			ck_assert_str_eq(ctx_part(line), from_main ? ctx : NONE);
			ck_assert_str_eq(field(line, "tid", tid, sizeof(tid)),
					 from_main ? mtid : etid);
			after++;
		} else if (strncmp(line, "LOOP ", 5) == 0) {
			/* each loop thread has its own context back */
			ck_assert_str_eq(ctx_part(line),
					 strncmp(line, "LOOP main ", 10) == 0 ? ctx
									      : NONE);
		}
	}
	ck_assert_uint_eq(work, 8);
	ck_assert_uint_eq(after, 8);
	free(out);

	log = slurp(ev);
	unlink(ev);
	ck_assert_uint_eq(count_events(log, "uv-work", "trace=" TRACE_ID), 4);
	ck_assert_uint_eq(count_events(log, "uv-work-done", "trace=-"), 4);
	free(log);
}
END_TEST

/* A request submitted to main's loop by a thread without a context:
 * after_work_cb runs on main with the request's context (none), and main
 * shows its own again once the callback returned. */
START_TEST(uv_after_work_on_another_thread_loop)
{
	char ctx[128], mtid[32], tid[32];
	char *out, *l;

	out = run("pool-uv", "cross", NULL, true, NULL);
	main_ctx(out, ctx, sizeof(ctx), mtid, sizeof(mtid));
	l = line_of(out, "WORK early-on-main ");
	ck_assert_msg(l, "%s", out);
	ck_assert_str_eq(ctx_part(l), NONE);
	free(l);
	l = line_of(out, "AFTER early-on-main ");
	ck_assert_msg(l, "%s", out);
	ck_assert_str_eq(field(l, "tid", tid, sizeof(tid)), mtid);
	ck_assert_str_eq(ctx_part(l), NONE);
	free(l);
	l = line_of(out, "LOOP main ");
	ck_assert_msg(l, "%s", out);
	ck_assert_str_eq(ctx_part(l), ctx);
	free(l);
	free(out);
}
END_TEST

/* libuv's pool workers are started by the first request that uses the
 * pool, here a file-system request from the main thread: they must not
 * inherit its context (they would show it, stale, while idle).  A thread
 * the application starts with uv_thread_create() still does. */
START_TEST(uv_pool_started_by_fs_does_not_inherit)
{
	char ctx[128], mtid[32], ev[64];
	char *out, *l, *log;

	tmp_path(ev, sizeof(ev));
	out = run("pool-uv", "fsfirst", NULL, true, ev);
	main_ctx(out, ctx, sizeof(ctx), mtid, sizeof(mtid));
	l = line_of(out, "THREAD ");
	ck_assert_msg(l, "%s", out);
	ck_assert_str_eq(ctx_part(l), ctx);
	free(l);
	free(out);

	log = slurp(ev);
	unlink(ev);
#ifndef __SANITIZE_ADDRESS__
	/* the application's thread only, not the pool's four (ASan's
	 * pthread_create hands the shim a start routine of its own, which
	 * hides libuv's) */
	ck_assert_msg(count_events(log, "thread-start", "trace=" TRACE_ID) == 1, "%s",
		      log);
#endif
	free(log);
}
END_TEST

/* The same with libuv dlopen()ed after start-up, which nothing bound
 * before its pool started. */
START_TEST(uv_late_pool_does_not_inherit)
{
	char ev[64];
	char *out, *log;

	tmp_path(ev, sizeof(ev));
	out = run("uv-late", NULL, NULL, true, ev);
	ck_assert_msg(strstr(out, "MAIN trace=" TRACE_ID " ") &&
			      strstr(out, "\nSTAT done\n"),
		      "%s", out);
	free(out);

	log = slurp(ev);
	unlink(ev);
#ifndef __SANITIZE_ADDRESS__
	/* as above: ASan's pthread_create hides libuv's start routine */
	ck_assert_msg(count_events(log, "thread-start", NULL) == 0, "%s", log);
#endif
	free(log);
}
END_TEST

START_TEST(uv_api_unchanged)
{
	assert_api_unchanged("pool-uv");
}
END_TEST

/* event_base_once() (hooks/hook-evhttp.c): a callback scheduled by a
 * thread with a context runs with it, then the loop thread shows what it
 * showed before; one scheduled without a context runs as it is, with the
 * loop thread's own (none on the early thread, main's on main). */
START_TEST(evbase_once_carries_scheduler_context)
{
	char ctx[128], mtid[32], etid[32], tid[32], ev[64];
	char *out, *l, *log;
	static const char *const lines[][2] = {
		{"ONCE with ", "main"},         {"ONCE without ", NULL},
		{"AFTER early ", NULL},         {"ONCE early-on-main ", "main"},
		{"ONCE main-on-main ", "main"}, {"AFTER main ", "main"},
	};
	size_t i;

	tmp_path(ev, sizeof(ev));
	out = run("evbase-once", "ctx", NULL, true, ev);
	main_ctx(out, ctx, sizeof(ctx), mtid, sizeof(mtid));
	l = line_of(out, "ONCE without ");
	ck_assert_msg(l, "%s", out);
	field(l, "tid", etid, sizeof(etid));
	free(l);
	ck_assert_str_ne(etid, mtid);
	for (i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		l = line_of(out, lines[i][0]);
		ck_assert_msg(l, "no %s line: %s", lines[i][0], out);
		field(l, "tid", tid, sizeof(tid));
		/* the early thread ran the first loop, main the second */
		ck_assert_str_eq(tid, i < 3 ? etid : mtid);
		ck_assert_msg(strcmp(ctx_part(l), lines[i][1] ? ctx : NONE) == 0,
			      "%s (want %s)", l, lines[i][1] ? ctx : NONE);
		free(l);
	}
	free(out);

	/* Published for the one callback on the early thread, and taken
	 * back after it; on main, the same span shows no change. */
	log = slurp(ev);
	unlink(ev);
	ck_assert_msg(count_events(log, "event-once", "trace=" TRACE_ID) == 1, "%s",
		      log);
	ck_assert_msg(count_events(log, "event-once-return", "trace=-") == 1, "%s",
		      log);
	free(log);
}
END_TEST

START_TEST(evbase_once_api_unchanged)
{
	assert_api_unchanged("evbase-once");
}
END_TEST

TEST_SUITE(preload_pools_suite)
{
	Suite *s = suite_create("preload-pools");
	TCase *tc;

	if (access(test_helper_path("pool-uv"), X_OK) != 0 ||
	    access(test_helper_path("pool-glib"), X_OK) != 0 ||
	    access(test_helper_path("evbase-once"), X_OK) != 0)
		test_skip("pool-uv, pool-glib and evbase-once are not built (install "
			  "libuv1-dev, libglib2.0-dev and libevent-dev)");
	tc = tcase_create("glib");
	tcase_add_test(tc, glib_items_carry_submitter_context);
	tcase_add_test(tc, glib_gtask_pool);
	tcase_add_test(tc, glib_api_unchanged);
	tcase_add_test(tc, glib_sort_function_race);
	tcase_add_test(tc, glib_push_during_free);
	suite_add_tcase(s, tc);
	tc = tcase_create("libuv");
	tcase_add_test(tc, uv_work_and_after_carry_submitter_context);
	tcase_add_test(tc, uv_after_work_on_another_thread_loop);
	tcase_add_test(tc, uv_pool_started_by_fs_does_not_inherit);
	tcase_add_test(tc, uv_late_pool_does_not_inherit);
	tcase_add_test(tc, uv_api_unchanged);
	suite_add_tcase(s, tc);
	tc = tcase_create("libevent");
	tcase_add_test(tc, evbase_once_carries_scheduler_context);
	tcase_add_test(tc, evbase_once_api_unchanged);
	suite_add_tcase(s, tc);
	return s;
}
