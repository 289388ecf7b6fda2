/* SPDX-License-Identifier: Apache-2.0 */
/* Context follows the work (hooks/hook-pthread.c, hook-ucontext.c,
 * hook-fork.c, hook-exec.c), observed from inside the helper: each thread
 * or coroutine of test/helpers/ctxflow prints what it reads from its own
 * otel_thread_ctx_v1.  Its main thread continues the trace of TRACEPARENT;
 * its "early" thread, and the thread libflowctor.so starts from its
 * constructor, predate the shim's constructor and have none. */
#include "test-common.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test-integration.h"
#ifdef HAVE_OPENSSL
#include "tls-client.h"
#else
/* asio-spawn, whose "tls" mode needs OpenSSL, is not built either. */
struct tc {
	int fd;
	void *ssl;
};
#endif
#pragma GCC diagnostic pop

#define TRACE_ID  "4bf92f3577b34da6a3ce929d0e0e4736"
#define PARENT_ID "00f067aa0ba902b7"
#define NONE      "trace=- span=-"

static char preload[4200];

static const char *
ctxflow(void)
{
	static char path[4096];

	snprintf(path, sizeof(path), "%s/ctxflow", test_env_path("HELPER_DIR"));
	return path;
}

/* Nothing on stderr but ASan's warnings that it does not follow coroutine
 * stacks (sanitizer builds). */
static bool
stderr_clean(const char *err)
{
	static const char *const asan_notes[] = {
		"WARNING: ASan ", "False positive error reports may follow",
		"For details see https://github.com/google/sanitizers/issues/189"};

	while (*err) {
		const char *nl = strchr(err, '\n');
		size_t len = nl ? (size_t)(nl - err) : strlen(err), i;
		bool ok = false;

		for (i = 0; i < sizeof(asan_notes) / sizeof(asan_notes[0]); i++)
			ok = ok ||
			     memmem(err, len, asan_notes[i], strlen(asan_notes[i]));
		if (!ok)
			return false;
		err += len + (nl != NULL);
	}
	return true;
}

/* Run ctxflow with args under the shim (TRACEPARENT set unless
 * no_traceparent) plus extra environment; returns stdout. */
static char *
run_flow(char *const args[],
	 const char *extra1,
	 const char *extra2,
	 bool shim,
	 bool no_traceparent,
	 int *status)
{
	char *argv[8], *env[6], *out, *err;
	size_t n = 0, k = 0;

	argv[n++] = (char *)ctxflow();
	while (*args && n < 7)
		argv[n++] = *args++;
	argv[n] = NULL;
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s",
		 test_env_path("CTXSHIM_LIB"));
	if (shim)
		env[k++] = preload;
	if (!no_traceparent)
		env[k++] = "TRACEPARENT=00-" TRACE_ID "-" PARENT_ID "-01";
	if (extra1)
		env[k++] = (char *)extra1;
	if (extra2)
		env[k++] = (char *)extra2;
	env[k] = NULL;
	*status = test_run_capture(argv, env, false, &out, &err, 60000);
	ck_assert_msg(stderr_clean(err) || !shim, "stderr: %s", err);
	free(err);
	return out;
}

/* The first line starting with prefix, as a new string, or NULL. */
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

static void
assert_line(const char *out, const char *want)
{
	char *l = line_of(out, want);

	ck_assert_msg(l && strcmp(l, want) == 0, "no line '%s' in:\n%s", want, out);
	free(l);
}

/* "trace=… span=…" at the end of the MAIN line: the main thread's context
 * (a child span of TRACEPARENT). */
static void
main_ctx(const char *out, char *ctx, size_t n)
{
	char *l = line_of(out, "MAIN ");
	const char *t;

	ck_assert_msg(l, "no MAIN line: %s", out);
	t = strstr(l, "trace=");
	ck_assert_ptr_nonnull(t);
	ck_assert_msg(strncmp(t, "trace=" TRACE_ID " span=", 38) == 0, "%s", l);
	ck_assert_ptr_null(strstr(t, PARENT_ID));
	snprintf(ctx, n, "%s", t);
	free(l);
}

START_TEST(exit_paths_clear_records)
{
	char *args[] = {"exits", NULL}, ctx[128], want[256];
	static const char *const names[] = {"return", "pthread_exit", "cancel",
					    "cancel-async", "thrd_exit"};
	char *out;
	unsigned i;
	int st;

	out = run_flow(args, NULL, NULL, true, false, &st);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, out);
	main_ctx(out, ctx, sizeof(ctx));
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		/* the creator's context from the first instruction ... */
		snprintf(want, sizeof(want), "START %s %s", names[i], ctx);
		assert_line(out, want);
		/* ... and none once the thread is on its way out, whichever way
		 * it ends */
		snprintf(want, sizeof(want), "EXIT %s " NONE, names[i]);
		assert_line(out, want);
	}
	assert_line(out, "JOINED cancel canceled=1");
	assert_line(out, "JOINED cancel-async canceled=1");
	assert_line(out, "JOINED thrd_exit res=7");
	/* a thread without a context starts threads without one */
	assert_line(out, "START early-child " NONE);
	/* a library's constructor thread, started before the shim's
	 * constructor, takes a context later (a coroutine made on main), hands
	 * it to its own thread, and clears it when it ends */
	assert_line(out, "START lib-thread " NONE);
	snprintf(want, sizeof(want), "START lib-thread-in-coroutine %s", ctx);
	assert_line(out, want);
	snprintf(want, sizeof(want), "START lib-child %s", ctx);
	assert_line(out, want);
	assert_line(out, "EXIT lib-child " NONE);
	assert_line(out, "EXIT lib-thread-in-coroutine " NONE);
	snprintf(want, sizeof(want), "DONE %s", ctx);
	assert_line(out, want);
	free(out);
}
END_TEST

START_TEST(no_context_no_inheritance)
{
	char *args[] = {"exits", NULL};
	char *out, *with, *p;
	int st;

	/* Without TRACEPARENT nothing has a context, and the program behaves
	 * exactly as without the shim. */
	with = run_flow(args, NULL, NULL, true, true, &st);
	ck_assert_int_eq(st, 0);
	for (p = with; (p = strstr(p, "trace=")); p++)
		ck_assert_msg(strncmp(p, NONE, strlen(NONE)) == 0, "%s", with);
	out = run_flow(args, NULL, NULL, false, true, &st);
	ck_assert_int_eq(st, 0);
	ck_assert_str_eq(out, with);
	free(out);
	free(with);
}
END_TEST

static void
check_spawn(const char *follow)
{
	char *args[] = {"spawn", NULL};
	char *out;
	int st;

	out = run_flow(args, follow, NULL, true, false, &st);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, out);
	/* each child ran, and main's record is the same one with the same
	 * context afterwards */
	assert_line(out, "SPAWN vfork status=0 same=1");
	assert_line(out, "SPAWN posix_spawn status=0 same=1");
	assert_line(out, "SPAWN system status=768 same=1");
	assert_line(out, "SPAWN popen status=0 same=1");
	free(out);
}

START_TEST(vfork_posix_spawn_keep_parent_state)
{
	check_spawn(NULL);
	/* the exec hooks run inside the vfork child here */
	check_spawn("CTXSHIM_FOLLOW_EXEC=1");
}
END_TEST

static const char *const exec_fns[] = {
	"execve", "execv",   "execvp",   "execvpe",     "execl",       "execle",
	"execlp", "fexecve", "execveat", "posix_spawn", "posix_spawnp"};

START_TEST(exec_follow)
{
	const char *fn = exec_fns[_i];
	char *args[] = {"exec", (char *)fn, NULL, NULL}, want[8192], lib[4096];
	char *out;
	int st;

	ck_assert_ptr_nonnull(realpath(test_shim_path(), lib));

	/* Default: a program that clears its environment drops the shim. */
	args[2] = "clear";
	out = run_flow(args, NULL, NULL, true, false, &st);
	ck_assert_msg(st == 0, "%s: status %#x", fn, st);
	assert_line(out, "PROBE shim=0 preload=- follow=- ctxflow=1 " NONE);
	free(out);

	/* CTXSHIM_FOLLOW_EXEC=1 puts it back, and itself too. */
	out = run_flow(args, "CTXSHIM_FOLLOW_EXEC=1", NULL, true, false, &st);
	ck_assert_msg(st == 0, "%s: status %#x", fn, st);
	snprintf(want, sizeof(want), "PROBE shim=1 preload=%s follow=1 ctxflow=1 " NONE,
		 lib);
	assert_line(out, want);
	free(out);

	/* ... after another preloaded library the program asked for. */
	args[2] = "other";
	out = run_flow(args, "CTXSHIM_FOLLOW_EXEC=1", NULL, true, false, &st);
	ck_assert_msg(st == 0, "%s: status %#x", fn, st);
	snprintf(want, sizeof(want),
		 "PROBE shim=1 preload=/lib/x86_64-linux-gnu/libm.so.6:%s follow=1 "
		 "ctxflow=1 " NONE,
		 lib);
	assert_line(out, want);
	free(out);

	/* An environment that keeps LD_PRELOAD keeps the shim (and
	 * TRACEPARENT: the new program continues the trace); with the option
	 * on, LD_PRELOAD is left as it was. */
	args[2] = "keep";
	out = run_flow(args, NULL, NULL, true, false, &st);
	ck_assert_msg(st == 0, "%s: status %#x", fn, st);
	snprintf(want, sizeof(want),
		 "PROBE shim=1 preload=%s follow=- ctxflow=- trace=" TRACE_ID,
		 test_env_path("CTXSHIM_LIB"));
	ck_assert_msg(strstr(out, want), "want '%s' in %s", want, out);
	free(out);
	out = run_flow(args, "CTXSHIM_FOLLOW_EXEC=1", NULL, true, false, &st);
	ck_assert_msg(st == 0, "%s: status %#x", fn, st);
	snprintf(want, sizeof(want),
		 "PROBE shim=1 preload=%s follow=1 ctxflow=- trace=" TRACE_ID,
		 test_env_path("CTXSHIM_LIB"));
	ck_assert_msg(strstr(out, want), "want '%s' in %s", want, out);
	free(out);
}
END_TEST

/* The shim loaded under another name (a symlink, as a distribution's
 * versioned soname link would be): CTXSHIM_FOLLOW_EXEC puts back that name,
 * and finds it listed, rather than the file it resolves to (which once
 * went into LD_PRELOAD as a second copy of the shim). */
START_TEST(exec_follow_alias)
{
	char dir[] = "/tmp/ctxshim-alias-XXXXXX", lib[4096], alias[4200], want[8400];
	char env_preload[4300], *args[] = {"exec", "execve", "keep", NULL}, *out;
	int st;

#ifdef __SANITIZE_ADDRESS__
	/* LD_PRELOAD must start with ASan's runtime there */
	return;
#endif
	ck_assert_ptr_nonnull(realpath(test_shim_path(), lib));
	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	snprintf(alias, sizeof(alias), "%s/libctxshim-alias.so", dir);
	ck_assert_int_eq(symlink(lib, alias), 0);
	snprintf(env_preload, sizeof(env_preload), "LD_PRELOAD=%s", alias);
	snprintf(want, sizeof(want),
		 "PROBE shim=1 preload=%s follow=1 ctxflow=- trace=" TRACE_ID, alias);
	out = run_flow(args, env_preload, "CTXSHIM_FOLLOW_EXEC=1", false, false, &st);
	ck_assert_msg(st == 0 && strstr(out, want), "want '%s' in %s", want, out);
	free(out);
	args[2] = "clear";
	snprintf(want, sizeof(want), "PROBE shim=1 preload=%s follow=1 ctxflow=1 " NONE,
		 alias);
	out = run_flow(args, env_preload, "CTXSHIM_FOLLOW_EXEC=1", false, false, &st);
	ck_assert_msg(st == 0, "status %#x", st);
	assert_line(out, want);
	free(out);
}
END_TEST

/* The shim preloaded by a relative path, and the program changes directory
 * before it execs, as a daemon does: that entry names nothing there, so
 * CTXSHIM_FOLLOW_EXEC adds the shim's absolute path after it (it used to
 * take the entry, by its name, for the shim and leave LD_PRELOAD as it was:
 * the new program ran without the shim). */
START_TEST(exec_follow_relative)
{
	char lib[4096], dir[4096], cwd[4096], env_preload[4300], want[8400];
	char *args[] = {"exec", "execve", "chdir", NULL}, *out, *base;
	int st;

#ifdef __SANITIZE_ADDRESS__
	/* LD_PRELOAD must start with ASan's runtime there */
	return;
#endif
	ck_assert_ptr_nonnull(realpath(test_shim_path(), lib));
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	snprintf(dir, sizeof(dir), "%s", lib);
	base = strrchr(dir, '/');
	*base++ = '\0';
	ck_assert_int_eq(chdir(dir), 0);
	snprintf(env_preload, sizeof(env_preload), "LD_PRELOAD=./%s", base);
	out = run_flow(args, env_preload, "CTXSHIM_FOLLOW_EXEC=1", false, false, &st);
	ck_assert_int_eq(chdir(cwd), 0);
	snprintf(want, sizeof(want),
		 "PROBE shim=1 preload=./%s:%s follow=1 ctxflow=- trace=" TRACE_ID,
		 base, lib);
	ck_assert_msg(st == 0 && strstr(out, want), "want '%s' in %s", want, out);
	free(out);
}
END_TEST

/* The TRACEPARENT an exec from the EXEC line's context hands on
 * (CTXSHIM_EXEC_TRACEPARENT=1): its trace, its span as the parent. */
static void
exec_tp(const char *out, char *tp, size_t n)
{
	char *l = line_of(out, "EXEC trace=" TRACE_ID " span=");

	ck_assert_msg(l && strlen(l) == 11 + 32 + 6 + 16, "no EXEC context: %s", out);
	snprintf(tp, n, "00-" TRACE_ID "-%s-01", l + 11 + 32 + 6);
	free(l);
}

/* The exec'd program's TRACEPARENT, TRACESTATE, how many of each, and
 * whether CTXSHIM_TRACEPARENT_PID names it (own: the shim set them). */
static void
assert_probe_env(
	const char *out, const char *tp, const char *ts, const char *counts, bool own)
{
	char want[512];

	snprintf(want, sizeof(want), "PROBEENV tp=%s ts=%s n=%s pid=%s", tp, ts, counts,
		 own ? "own" : "-");
	assert_line(out, want);
}

#define EXEC_TS "TRACESTATE=congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"

START_TEST(exec_traceparent)
{
	const char *fn = exec_fns[_i];
	char *args[] = {"exec", (char *)fn, NULL, NULL}, tp[128];
	char *out;
	int st;

	/* Default: the environment is passed as it is (with the TRACEPARENT
	 * the process was started with) or as the program built it. */
	args[2] = "keep";
	out = run_flow(args, EXEC_TS, NULL, true, false, &st);
	ck_assert_msg(st == 0, "%s: status %#x", fn, st);
	assert_probe_env(out, "00-" TRACE_ID "-" PARENT_ID "-01",
			 EXEC_TS + sizeof("TRACESTATE=") - 1, "1,1", false);
	free(out);
	args[2] = "clear";
	out = run_flow(args, NULL, NULL, true, false, &st);
	assert_probe_env(out, "-", "-", "0,0", false);
	free(out);

	/* On: the thread's context replaces the one the environment had ... */
	args[2] = "keep";
	out = run_flow(args, "CTXSHIM_EXEC_TRACEPARENT=1", EXEC_TS, true, false, &st);
	ck_assert_msg(st == 0, "%s: status %#x", fn, st);
	exec_tp(out, tp, sizeof(tp));
	assert_probe_env(out, tp, EXEC_TS + sizeof("TRACESTATE=") - 1, "1,1", true);
	/* ... and the new program under the shim continues it in a span of
	 * its own */
	ck_assert_msg(
		strstr(out, "ctxflow=- trace=" TRACE_ID " span=") &&
			!strstr(out, "ctxflow=- trace=" TRACE_ID " span=" PARENT_ID),
		"%s", out);
	free(out);
	/* ... is added to an environment built without it, and a tracestate
	 * that the context does not have (invalid, so ignored) is dropped */
	args[2] = "clear";
	out = run_flow(args, "CTXSHIM_EXEC_TRACEPARENT=1", NULL, true, false, &st);
	ck_assert_msg(st == 0, "%s: status %#x", fn, st);
	exec_tp(out, tp, sizeof(tp));
	assert_probe_env(out, tp, "-", "1,0", true);
	free(out);
	args[2] = "keep";
	out = run_flow(args, "CTXSHIM_EXEC_TRACEPARENT=1", "TRACESTATE=Bad Key=1", true,
		       false, &st);
	exec_tp(out, tp, sizeof(tp));
	assert_probe_env(out, tp, "-", "1,0", true);
	free(out);
	/* ... names the incoming parent with CTXSHIM_PROPAGATE=transparent */
	args[2] = "clear";
	out = run_flow(args, "CTXSHIM_EXEC_TRACEPARENT=1",
		       "CTXSHIM_PROPAGATE=transparent", true, false, &st);
	assert_probe_env(out, "00-" TRACE_ID "-" PARENT_ID "-01", "-", "1,0", true);
	free(out);
	/* ... goes with CTXSHIM_FOLLOW_EXEC=1 */
	out = run_flow(args, "CTXSHIM_EXEC_TRACEPARENT=1", "CTXSHIM_FOLLOW_EXEC=1",
		       true, false, &st);
	ck_assert_msg(st == 0, "%s: status %#x", fn, st);
	exec_tp(out, tp, sizeof(tp));
	assert_probe_env(out, tp, "-", "1,0", true);
	ck_assert_msg(strstr(out, "follow=1 ctxflow=1 trace=" TRACE_ID " span="), "%s",
		      out);
	free(out);
	/* A thread without a context changes nothing (TRACEPARENT is not
	 * valid here, so main has none). */
	args[2] = "keep";
	out = run_flow(args, "CTXSHIM_EXEC_TRACEPARENT=1", "TRACEPARENT=00-bad", true,
		       true, &st);
	ck_assert_msg(st == 0, "%s: status %#x", fn, st);
	assert_line(out, "EXEC " NONE);
	assert_probe_env(out, "00-bad", "-", "1,0", false);
	free(out);
}
END_TEST

/* An exec in a fork() child, and in a vfork() child (which shares the
 * parent's memory: the hook only reads the thread's context there). */
START_TEST(exec_traceparent_in_child)
{
	static const char *const kinds[][2] = {{"execve", "fork"},
					       {"execv", "fork"},
					       {"execve", "vfork"},
					       {"execv", "vfork"}};
	char *args[] = {"exec", (char *)kinds[_i][0], (char *)kinds[_i][1], NULL};
	char tp[128], *out;
	int st;

	out = run_flow(args, "CTXSHIM_EXEC_TRACEPARENT=1", EXEC_TS, true, false, &st);
	ck_assert_msg(st == 0, "%s %s: status %#x: %s", kinds[_i][0], kinds[_i][1], st,
		      out);
	exec_tp(out, tp, sizeof(tp));
	assert_probe_env(out, tp, EXEC_TS + sizeof("TRACESTATE=") - 1, "1,1", true);
	free(out);
}
END_TEST

START_TEST(exec_failure_leaves_environ)
{
	char *args[] = {"execfail", NULL};
	char *with, *without;
	int st;

	with = run_flow(args, "CTXSHIM_FOLLOW_EXEC=1", NULL, true, false, &st);
	ck_assert_int_eq(st, 0);
	assert_line(with, "EXECFAIL errno=No such file or directory,No such file or "
			  "directory,No such file or directory,Invalid argument "
			  "environ_same=1 count_same=1 clean_same=1");
	without = run_flow(args, NULL, NULL, false, false, &st);
	ck_assert_int_eq(st, 0);
	ck_assert_str_eq(with, without);
	free(with);
	free(without);
}
END_TEST

/* The context part ("trace=… span=…") of a line. */
static const char *
ctx_part(const char *line)
{
	const char *t = strstr(line, "trace=");

	ck_assert_msg(t, "%s", line);
	return t;
}

START_TEST(ucontext_coroutines)
{
	char *args[] = {"ucontext", NULL}, ctx[128], main_tid[32];
	char *out, *line, *save = NULL, *m;
	unsigned steps = 0, scheds = 0;
	int st;

	out = run_flow(args, NULL, NULL, true, false, &st);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, out);
	main_ctx(out, ctx, sizeof(ctx));
	m = line_of(out, "MAIN ");
	snprintf(main_tid, sizeof(main_tid), "%.*s", (int)strcspn(m + 5, " "), m + 5);
	free(m);
	for (line = strtok_r(out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		const char *c;

		if (strncmp(line, "STEP ", 5) == 0) {
			/* a coroutine carries the context it was made with,
			 * whichever thread resumes it */
			c = ctx_part(line);
			if (strncmp(line, "STEP main-", 10) == 0)
				ck_assert_msg(strcmp(c, ctx) == 0, "%s", line);
			else
				ck_assert_msg(strcmp(c, NONE) == 0, "%s", line);
			steps++;
		} else if (strncmp(line, "SCHED ", 6) == 0) {
			/* back in the scheduler, its thread's own context,
			 * also after a coroutine returned through uc_link */
			c = ctx_part(line);
			if (strncmp(line, "SCHED 0 ", 8) == 0) {
				ck_assert_msg(strcmp(c, ctx) == 0, "%s", line);
				ck_assert_msg(strstr(line, main_tid), "%s", line);
			} else {
				ck_assert_msg(strcmp(c, NONE) == 0, "%s", line);
				ck_assert_msg(!strstr(line, main_tid), "%s", line);
			}
			scheds++;
		} else if (strncmp(line, "DONE ", 5) == 0) {
			ck_assert_str_eq(ctx_part(line), ctx);
		}
	}
	/* 2 schedulers x 4 coroutines x (3 steps + end) */
	ck_assert_uint_eq(steps, 32);
	ck_assert_uint_eq(scheds, 32);
	free(out);
}
END_TEST

/* Coroutine A, made on main, returns to B through uc_link (libc's
 * internal switch, which no hook sees); B was made on a thread without a
 * context and has not run yet: it runs without one, as it would started
 * by swapcontext() (old: it ran with A's, main's, context). */
START_TEST(ucontext_started_through_uc_link)
{
	char *args[] = {"ucontext-link", NULL}, *out, *a, *b, *m;
	int st;

	out = run_flow(args, NULL, NULL, true, false, &st);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, out);
	a = line_of(out, "LINK A ");
	b = line_of(out, "LINK B ");
	m = line_of(out, "LINK main ");
	ck_assert_msg(a && b && m, "%s", out);
	ck_assert_msg(strncmp(ctx_part(a), "trace=" TRACE_ID " ", 39) == 0, "%s", out);
	ck_assert_msg(strcmp(ctx_part(b), NONE) == 0, "%s", out);
	ck_assert_str_eq(ctx_part(m), ctx_part(a));
	free(a);
	free(b);
	free(m);
	free(out);
}
END_TEST

/* Two coroutines made through one temporary ucontext, copied into each
 * coroutine's own (a spawn helper's local): each starts with the context
 * of the thread that made it, main's and none, whoever runs it and
 * whatever the temporary was made with since (old: both started with
 * the early thread's none, the temporary's last). */
START_TEST(ucontext_made_through_a_copy)
{
	char *args[] = {"ucontext-copy", NULL}, *out, *a, *b, *m;
	int st;

	out = run_flow(args, NULL, NULL, true, false, &st);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, out);
	a = line_of(out, "COPY main-made ");
	b = line_of(out, "COPY early-made ");
	m = line_of(out, "COPY main ");
	ck_assert_msg(a && b && m, "%s", out);
	ck_assert_msg(strncmp(ctx_part(a), "trace=" TRACE_ID " ", 39) == 0, "%s", out);
	ck_assert_msg(strcmp(ctx_part(b), NONE) == 0, "%s", out);
	ck_assert_msg(strncmp(ctx_part(m), "trace=" TRACE_ID " ", 39) == 0, "%s", out);
	free(a);
	free(b);
	free(m);
	free(out);
}
END_TEST

/* A swapcontext() to main's ucontext from a coroutine without a context,
 * when the shim's table has no free slot left where main's is: saving
 * the new ucontext it leaves evicts another one than main's, the one
 * switched to, and main goes on with its own context (old: with the
 * coroutine's none). */
START_TEST(ucontext_switch_keeps_its_target)
{
	char *args[] = {"ucontext-evict", NULL}, *out, *m, *was;
	int st;

	out = run_flow(args, NULL, NULL, true, false, &st);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, out);
	m = line_of(out, "EVICT main ");
	was = line_of(out, "EVICT was ");
	ck_assert_msg(m && was, "%s", out);
	ck_assert_msg(strncmp(ctx_part(m), "trace=" TRACE_ID " ", 39) == 0, "%s", out);
	ck_assert_str_eq(ctx_part(m), was + strlen("EVICT was "));
	free(m);
	free(was);
	free(out);
}
END_TEST

/* setcontext() to a ucontext that is gone (unreadable: EFAULT) returns,
 * and the thread goes on where it was: with its own context, not the one
 * the gone ucontext was made with (old: main showed none after it, and
 * the early thread main's). */
START_TEST(setcontext_failure_keeps_context)
{
	char *args[] = {"setcontext-fail", NULL}, *out, *m, *e;
	int st;

	out = run_flow(args, NULL, NULL, true, false, &st);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, out);
	m = line_of(out, "SETFAIL main ");
	e = line_of(out, "SETFAIL early ");
	ck_assert_msg(m && e, "%s", out);
	ck_assert_msg(strstr(m, " r=-1 errno=Bad address trace=" TRACE_ID " "), "%s",
		      out);
	ck_assert_msg(strstr(e, " r=-1 errno=Bad address " NONE), "%s", out);
	free(m);
	free(e);
	free(out);
}
END_TEST

START_TEST(ucontext_table_overflow)
{
	char *args[] = {"ucontext-many", "10000", NULL};
	char *out;
	int st;

	/* More ucontexts than the shim's table has slots: each recent one
	 * still carries its own context. */
	out = run_flow(args, NULL, NULL, true, false, &st);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, out);
	assert_line(out, "MANY n=10000 mismatches=0 main_same=1");
	free(out);
}
END_TEST

/* A pool of coroutines made before any runs, as many as fit the shim's
 * table (4096 slots) with room to spare: each starts with the context it
 * was made with (old: makecontext took a slot for the ucontext and one
 * for its stack, and past about 2000 coroutines some started with the
 * scheduler's).  Then (_i 2) the same pool's coroutines all start and wait
 * (yield) at once before each is resumed: each starts and resumes with its
 * own context (old: the stack's slot was kept after the start, two slots
 * a waiting coroutine, and past about 2000 some started or resumed with
 * the scheduler's).  Then (_i 3) a pool that fills most of the table,
 * each ucontext set up by getcontext() before its makecontext(): each
 * starts with its own context (old: getcontext() took a slot for the
 * ucontext until its makecontext(), evicting a made coroutine's when the
 * window was full: 77 of 1800 started with the scheduler's).  3000, not
 * more: with 3600 made, the window of the scheduler's first save was full
 * in about one address layout in eight, and it evicted a coroutine not
 * yet started (a documented limit, ctxshim(7) "Coroutines"; ASLR made it
 * fail one run in twenty). */
START_TEST(ucontext_pool)
{
	static const char *const env[] = {NULL, "POOL_COPY=1", "POOL_YIELD=1", NULL};
	static const char *const n[] = {"2500", "2500", "2500", "3000"};
	char *args[] = {"ucontext-pool", (char *)n[_i], NULL}, want[64];
	char *out;
	int st;

	out = run_flow(args, env[_i], NULL, true, false, &st);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, out);
	snprintf(want, sizeof(want), "POOL n=%s mismatches=0 main_same=1", n[_i]);
	assert_line(out, want);
	free(out);
}
END_TEST

/* A SIGALRM handler that siglongjmp()s out of a scheduler's ucontext
 * switches, wherever it lands (test/helpers/uc-jump.c): afterwards the
 * same two ucontexts still switch with their own contexts (old: a jump
 * out of a switch that held a slot of the shim's table left it locked,
 * and every later switch through it kept the context it found; 300
 * jumps were enough, every run).  Run with and without the shim. */
START_TEST(ucontext_jump_out_of_switches)
{
	char path[4096], *argv[] = {path, "1000", NULL}, *out;
	char *env[] = {"TRACEPARENT=00-" TRACE_ID "-" PARENT_ID "-01", NULL};
	int st;

	if (strchr(test_env_path("CTXSHIM_LIB"), ' ')) {
		/* ASan's own swapcontext() interceptor hangs after such a jump,
		 * with or without the shim. */
		fprintf(stderr, "sanitizer build: jumps out of switches not tested\n");
		return;
	}
	snprintf(path, sizeof(path), "%s/uc-jump", test_env_path("HELPER_DIR"));
	st = test_run_capture(argv, env, _i, &out, NULL, 60000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, out);
	ck_assert_str_eq(out, "after jumps=all coroutine-wrong=0 scheduler-wrong=0\n");
	free(out);
}
END_TEST

/* Runs test/helpers/<helper> with mode as its argument (NULL: none),
 * under the shim if shim, and returns its output; NULL, with a note,
 * when it is not built (libboost-context-dev, a C++ compiler). */
static char *
run_fctx(const char *helper, const char *mode, bool shim)
{
	char path[4096], *argv[] = {path, (char *)mode, NULL}, *out;
	char *env[] = {NULL};
	int st;

	snprintf(path, sizeof(path), "%s/%s", test_env_path("HELPER_DIR"), helper);
	if (access(path, X_OK) != 0) {
		fprintf(stderr, "%s is not built (libboost-context-dev, C++)\n", path);
		return NULL;
	}
	st = test_run_capture(argv, env, shim, &out, NULL, 60000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, out);
	return out;
}

/* Without the shim every line of out shows none. */
static void
assert_all_none(const char *out)
{
	const char *l, *nl;

	ck_assert_msg(*out, "no output");
	for (l = out; *l; l = nl + 1) {
		nl = strchr(l, '\n');
		ck_assert_msg(nl && nl - l > 5 && memcmp(nl - 5, " none", 5) == 0, "%s",
			      out);
	}
}

/* run_fctx(), then its output: want under the shim, every line none
 * without it. */
static void
check_fctx(const char *helper, const char *mode, const char *want, bool shim)
{
	char *out = run_fctx(helper, mode, shim);

	if (!out)
		return;
	if (!shim)
		assert_all_none(out);
	else
		ck_assert_str_eq(out, want);
	free(out);
}

/* The traces of fctx-sched's and fiber-sched's requests. */
#define TR_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define TR_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define TR_C "cccccccccccccccccccccccccccccccc"
#define TR_D "dddddddddddddddddddddddddddddddd"
#define TR_E "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
#define TR_F "ffffffffffffffffffffffffffffffff"

/* Boost.Context coroutines on one thread (test/helpers/fctx-sched.c,
 * hooks/hook-fcontext.c): A and B each read their own traced request,
 * then switch back to the scheduler (A with jump_fcontext(), B with
 * ontop_fcontext()); resumed later, each shows its own request (old: A
 * worked with B's, which B's read published last; B, resumed from an
 * ontop_fcontext() not followed, with the scheduler's none), the
 * scheduler its own none, and C, made by main and first jumped to by A,
 * starts with A's.  Without the shim every line shows none. */
START_TEST(fcontext_coroutines)
{
	static const char want[] = "A-read " TR_A "\n"
				   "C-start " TR_A "\n"
				   "B-read " TR_B "\n"
				   "A-work " TR_A "\n"
				   "B-work " TR_B "\n"
				   "MAIN-end none\n";
	check_fctx("fctx-sched", NULL, want, _i);
}
END_TEST

/* Boost.Context fibers through Boost's C++ header API
 * (test/helpers/fiber-sched.cpp), whose inlined switches call
 * jump_fcontext()/ontop_fcontext() through the program's PLT: A, B and D
 * each read their own traced request and switch back; A and B, resumed,
 * work with their own (without the hook: with D's, which D's read
 * published last).  D, destroyed while suspended, is unwound by
 * forced_unwind thrown through the shim's switch frame: its destructors
 * run with main's none (the function Boost runs on top of D runs with its
 * caller's context), and main goes on with its own none.  The entry D
 * leaves does no harm: E and F, then, each work with their own. */
START_TEST(fcontext_fibers)
{
	static const char want[] = "A-read " TR_A "\n"
				   "B-read " TR_B "\n"
				   "D-read " TR_D "\n"
				   "A-work " TR_A "\n"
				   "B-work " TR_B "\n"
				   "D-unwound none\n"
				   "MAIN-destroyed none\n"
				   "E-read " TR_E "\n"
				   "F-read " TR_F "\n"
				   "F-work " TR_F "\n"
				   "E-work " TR_E "\n"
				   "MAIN-end none\n";
	check_fctx("fiber-sched", NULL, want, _i);
}
END_TEST

/* A Boost.Context coroutine suspended on one thread and resumed on
 * another (test/helpers/fctx-sched.c "migrate"): A reads its request on
 * main (T1, no context) and switches back; T1 shows none again, as it did
 * before.  T2, with a request of its own (c), resumes A: A works with its
 * own request on T2 (hook_fcontext_resumed() computes the thread-local
 * addresses after the switch), and T2 shows its own again when A switches
 * back; T1, after T2 ended, still shows none. */
START_TEST(fcontext_migrate)
{
	static const char want[] = "A-read " TR_A "\n"
				   "T1-back none\n"
				   "T2-read " TR_C "\n"
				   "A-work " TR_A "\n"
				   "T2-back " TR_C "\n"
				   "T1-end none\n";
	check_fctx("fctx-sched", "migrate", want, _i);
}
END_TEST

/* A coroutine whose request was answered while it was suspended
 * (fctx-sched.c "answered"): A reads its request and switches back; main
 * writes the response on A's connection (main then shows that request, as
 * a thread that writes on a connection does until its next read) and
 * resumes A, which shows none (hook_scope_restore()): the request is
 * done. */
START_TEST(fcontext_answered)
{
	static const char want[] = "A-read " TR_A "\n"
				   "MAIN-answered " TR_A "\n"
				   "A-resumed none\n"
				   "MAIN-end " TR_A "\n";
	check_fctx("fctx-sched", "answered", want, _i);
}
END_TEST

/* Coroutines resumed by a reactor that read their requests for them, as
 * Boost.Asio's io_context does (fctx-sched.c "reactor"): A, B and C each
 * found nothing to read and switched back without a context; C's
 * connection was closed and D's took its descriptor.  Main reads B's, A's
 * and D's heads, then resumes B, A and C: B and A each show their own
 * connection's request (old: none; not the reactor's D, which its last
 * read published), C none (its descriptor holds another connection now),
 * and main still shows D, its last read. */
START_TEST(fcontext_reactor)
{
	static const char want[] = "B-work " TR_B "\n"
				   "A-work " TR_A "\n"
				   "C-work none\n"
				   "MAIN-end " TR_D "\n";
	check_fctx("fctx-sched", "reactor", want, _i);
}
END_TEST

/* A coroutine whose reads the scheduler does (fctx-sched.c "handover", as
 * Boost.Asio's io_context does for asio::spawn): A finds nothing on its
 * connection and switches back; main reads the request's head and
 * resumes A, which works with that request; when A switches back (a
 * timer), main, idle, shows none: the request it read is A's (old: main
 * showed it until its next wait, which on an io_context run by several
 * threads is a condition variable, so an idle thread showed it for as
 * long as A slept).  Likewise for the body main reads for A, which
 * already had the request. */
START_TEST(fcontext_handover)
{
	static const char want[] = "A-wait none\n"
				   "MAIN-read " TR_A "\n"
				   "A-work " TR_A "\n"
				   "MAIN-idle none\n"
				   "A-timer " TR_A "\n"
				   "MAIN-body " TR_A "\n"
				   "A-body " TR_A "\n"
				   "MAIN-end none\n";
	check_fctx("fctx-sched", "handover", want, _i);
}
END_TEST

/* asio-spawn's connections: ASIO_CONNS opened together, one more later. */
#define ASIO_CONNS 3

static const char *const asio_modes[] = {"plain", "timer", "tls", "threads"};

/* Wait until every thread of pid is blocked in epoll_wait or futex (an
 * io_context's idle threads: the reactor's, the condition variable's),
 * twice in a row with no voluntary switch in between: then all of them
 * were blocked at once (one look could see a thread blocked on a mutex
 * whose holder runs on), and with nothing queued and nothing to read
 * none runs again. */
static void
asio_idle(pid_t pid)
{
	long deadline = test_now_ms() + IT_TIMEOUT_MS;
	char prev[1024] = "", cur[1024], path[96], buf[2048], *v;

	for (;;) {
		size_t len = 0;
		bool idle = true;
		struct dirent *e;
		DIR *d;

		snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
		d = opendir(path);
		ck_assert_ptr_nonnull(d);
		while (idle && (e = readdir(d))) {
			long nr = -1, tid = strtol(e->d_name, NULL, 10);

			if (tid <= 0)
				continue;
			snprintf(path, sizeof(path), "/proc/%d/task/%ld/syscall",
				 (int)pid, tid);
			/* "running" while on a CPU, the number while blocked */
			if (test_read_small(path, buf, sizeof(buf)) > 0 &&
			    buf[0] >= '0' && buf[0] <= '9')
				nr = strtol(buf, NULL, 10);
			snprintf(path, sizeof(path), "/proc/%d/task/%ld/status",
				 (int)pid, tid);
			v = test_read_small(path, buf, sizeof(buf)) > 0
				    ? strstr(buf, "\nvoluntary_ctxt_switches:")
				    : NULL;
			idle = (nr == SYS_epoll_wait || nr == SYS_futex) && v;
			if (idle)
				len += (size_t)snprintf(cur + len, sizeof(cur) - len,
							"%ld:%ld ", tid,
							strtol(v + 25, NULL, 10));
			ck_assert_uint_lt(len, sizeof(cur));
		}
		closedir(d);
		if (idle && strcmp(cur, prev) == 0)
			return;
		snprintf(prev, sizeof(prev), "%s", idle ? cur : "");
		ck_assert_msg(test_now_ms() < deadline, "the threads of %d never idle",
			      (int)pid);
		usleep(2000);
	}
}

/* Once asio-spawn printed n more "READING" lines and its threads wait,
 * each of those coroutines tried its own read, found nothing and
 * suspended: the reactor reads the heads sent now. */
static void
asio_reading(struct it_server *s, int n)
{
	char line[64];

	while (n--)
		test_child_expect(&s->child, "READING", line, sizeof(line),
				  IT_TIMEOUT_MS);
	asio_idle(s->child.pid);
}

/* A connection to asio-spawn, over TLS in its "tls" mode. */
static void
asio_connect(struct tc *c, unsigned port, bool tls)
{
	c->ssl = NULL;
#ifdef HAVE_OPENSSL
	if (tls) {
		tc_connect(c, port);
		return;
	}
#endif
	ck_assert(!tls);
	c->fd = it_connect(port);
}

static void
asio_close(struct tc *c)
{
#ifdef HAVE_OPENSSL
	SSL_free(c->ssl);
#endif
	close(c->fd);
}

/* trace-id digit repeated (33 bytes with the NUL). */
static void
asio_trace(char *trace, char digit)
{
	memset(trace, digit, 32);
	trace[32] = '\0';
}

/* A keep-alive GET of path on c whose trace-id is digit repeated. */
static void
asio_send(struct tc *c, const char *path, char digit)
{
	char trace[33], req[256];

	asio_trace(trace, digit);
	snprintf(req, sizeof(req),
		 "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
		 "traceparent: 00-%s-00f067aa0ba902b7-01\r\n\r\n",
		 path, trace);
#ifdef HAVE_OPENSSL
	if (c->ssl) {
		tc_send(c, req, strlen(req), 0);
		return;
	}
#endif
	it_send_str(c->fd, req);
}

/* The response on c says the handler saw trace digit… (none without
 * the shim). */
static void
asio_expect(struct tc *c, char digit, bool shim)
{
	char want[34] = "none\n", *resp;

#ifdef HAVE_OPENSSL
	resp = c->ssl ? tc_read_response(c) : it_read_response(c->fd);
#else
	resp = it_read_response(c->fd);
#endif
	if (shim) {
		asio_trace(want, digit);
		want[32] = '\n';
		want[33] = '\0';
	}
	it_assert_ok_body(resp, want);
	free(resp);
}

/* A Boost.Asio server of stackful coroutines (test/helpers/asio-spawn.cpp:
 * asio::spawn, one coroutine per connection): each coroutine's read of a
 * head first tries the socket itself and finds nothing, suspends, and the
 * reactor, on the thread's stack, reads the head (the socket level
 * publishes it) and resumes the coroutine, whose handler must show that
 * request (old, hooks/hook-fcontext.c: the none it had when it switched
 * away).  ASIO_CONNS connections get their requests together, so that the
 * reactor may read several heads in one round; then a second request on
 * each, with a new trace, and the first on a connection opened after them
 * (its coroutine made by the acceptor while the thread had shown other
 * requests).  Modes (_i >> 1):
 * - "timer": each handler also waits on a timer between the head and the
 *   answer, resumed by the timer while other connections are read
 *   (without a hook of the switches at all, each handler showed the head
 *   read before its own, the first none);
 * - "tls": asio::ssl::stream, a TLS session over a BIO pair with no fd:
 *   the coroutine waits for its virtual connection id, not for the socket
 *   (old, hook_socket_rd_note() looking the id up as an fd: each second
 *   request answered none);
 * - "threads": "timer" with io.run() on 4 threads; then each connection
 *   asks for /sleep, whose handler waits on a timer of an hour: meanwhile
 *   no thread, all idle, shows any of those requests (old: the one whose
 *   reactor read a request and resumed its coroutine went on showing it
 *   while waiting on the io_context's condition variable).
 * Without the shim (_i & 1 == 0) every answer is none. */
START_TEST(asio_spawn_server)
{
	bool shim = _i & 1;
	const char *mode = asio_modes[_i >> 1];
	bool tls = strcmp(mode, "tls") == 0, threads = strcmp(mode, "threads") == 0;
	char path[4096], *argv[] = {path, (char *)mode, NULL}, trace[33], line[64];
	struct it_server s;
	struct tc c[ASIO_CONNS + 1];
	int i;

	snprintf(path, sizeof(path), "%s/asio-spawn", test_env_path("HELPER_DIR"));
	if (access(path, X_OK) != 0) {
		fprintf(stderr,
			"%s is not built (libboost-coroutine-dev, libssl-dev, C++)\n",
			path);
		return;
	}
	if (threads && strchr(test_env_path("CTXSHIM_LIB"), ' ')) {
		/* There the helper, with or without the shim, crashes in
		 * Asio's code when a coroutine ends on one of its other
		 * threads (ASan warns that it cannot follow the stack
		 * switches). */
		fprintf(stderr, "sanitizer build: asio-spawn threads not tested\n");
		return;
	}
	it_server_start(&s, argv, shim, NULL);
	for (i = 0; i < ASIO_CONNS; i++)
		asio_connect(&c[i], s.port, tls);
	asio_reading(&s, ASIO_CONNS);
	for (i = 0; i < ASIO_CONNS; i++)
		asio_send(&c[i], "/", (char)('1' + i));
	for (i = 0; i < ASIO_CONNS; i++)
		asio_expect(&c[i], (char)('1' + i), shim);
	asio_connect(&c[ASIO_CONNS], s.port, tls);
	asio_reading(&s, ASIO_CONNS + 1);
	for (i = 0; i <= ASIO_CONNS; i++)
		asio_send(&c[i], "/", (char)('a' + i));
	for (i = 0; i <= ASIO_CONNS; i++)
		asio_expect(&c[i], (char)('a' + i), shim);
	if (threads) {
		char *json;

		asio_reading(&s, ASIO_CONNS + 1);
		for (i = 0; i <= ASIO_CONNS; i++)
			asio_send(&c[i], "/sleep", (char)('5' + i));
		for (i = 0; i <= ASIO_CONNS; i++)
			test_child_expect(&s.child, "SLEEPING", line, sizeof(line),
					  IT_TIMEOUT_MS);
		asio_idle(s.child.pid);
		json = shim ? it_ctxdump(s.child.pid) : NULL;
		for (i = 0; json && i <= ASIO_CONNS; i++) {
			asio_trace(trace, (char)('5' + i));
			ck_assert_msg(it_dump_count_trace(json, trace) == 0,
				      "an idle thread shows %s:\n%s", trace, json);
		}
		free(json);
	}
	for (i = 0; i <= ASIO_CONNS; i++)
		asio_close(&c[i]);
	it_server_stop(&s);
}
END_TEST

TEST_SUITE(preload_flow_suite)
{
	Suite *s = suite_create("preload-flow");
	TCase *tc;

	if (access(ctxflow(), X_OK) != 0)
		test_skip("%s is not built", ctxflow());
	tc = tcase_create("threads");
	tcase_add_test(tc, exit_paths_clear_records);
	tcase_add_test(tc, no_context_no_inheritance);
	suite_add_tcase(s, tc);
	tc = tcase_create("processes");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, vfork_posix_spawn_keep_parent_state);
	tcase_add_loop_test(tc, exec_follow, 0, sizeof(exec_fns) / sizeof(exec_fns[0]));
	tcase_add_test(tc, exec_follow_alias);
	tcase_add_test(tc, exec_follow_relative);
	tcase_add_loop_test(tc, exec_traceparent, 0,
			    sizeof(exec_fns) / sizeof(exec_fns[0]));
	tcase_add_loop_test(tc, exec_traceparent_in_child, 0, 4);
	tcase_add_test(tc, exec_failure_leaves_environ);
	suite_add_tcase(s, tc);
	tc = tcase_create("coroutines");
	tcase_add_test(tc, ucontext_coroutines);
	tcase_add_test(tc, ucontext_table_overflow);
	tcase_add_loop_test(tc, ucontext_pool, 0, 4);
	tcase_add_test(tc, ucontext_started_through_uc_link);
	tcase_add_test(tc, setcontext_failure_keeps_context);
	tcase_add_test(tc, ucontext_made_through_a_copy);
	tcase_add_test(tc, ucontext_switch_keeps_its_target);
	tcase_add_loop_test(tc, ucontext_jump_out_of_switches, 0, 2);
	tcase_add_loop_test(tc, fcontext_coroutines, 0, 2);
	tcase_add_loop_test(tc, fcontext_fibers, 0, 2);
	tcase_add_loop_test(tc, asio_spawn_server, 0,
			    2 * sizeof(asio_modes) / sizeof(asio_modes[0]));
	tcase_add_loop_test(tc, fcontext_migrate, 0, 2);
	tcase_add_loop_test(tc, fcontext_answered, 0, 2);
	tcase_add_loop_test(tc, fcontext_reactor, 0, 2);
	tcase_add_loop_test(tc, fcontext_handover, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}
