/* SPDX-License-Identifier: Apache-2.0 */
/* Loading libctxshim.so must change nothing a program prints or returns. */
#include "test-common.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void
assert_same_with_and_without(char *const argv[], char *const env[])
{
	char *out0, *err0, *out1, *err1;
	int st0, st1;

	st0 = test_run_capture(argv, env, false, &out0, &err0, 30000);
	st1 = test_run_capture(argv, env, true, &out1, &err1, 30000);
	ck_assert_msg(st0 == st1, "%s: status %#x without the shim, %#x with it",
		      argv[0], st0, st1);
	ck_assert_msg(strcmp(out0, out1) == 0,
		      "%s: stdout differs:\n--- without\n%s\n--- with\n%s", argv[0],
		      out0, out1);
	ck_assert_msg(strcmp(err0, err1) == 0,
		      "%s: stderr differs:\n--- without\n%s\n--- with\n%s", argv[0],
		      err0, err1);
	free(out0);
	free(err0);
	free(out1);
	free(err1);
}

START_TEST(test_ls_unchanged)
{
	char *argv[] = {"/bin/ls", "-la", "--time-style=+", "/usr/include/linux", NULL};

	assert_same_with_and_without(argv, NULL);
}
END_TEST

START_TEST(test_ls_error_unchanged)
{
	char *argv[] = {"/bin/ls", "/nonexistent-ctxshim-path", NULL};

	assert_same_with_and_without(argv, NULL);
}
END_TEST

START_TEST(test_bash_unchanged)
{
	char *argv[] = {"/bin/bash", "-c",
			"echo out; echo err >&2; for i in 1 2 3; do (echo sub $i) & "
			"wait $!; done; "
			"read -r x </etc/hostname; echo ${#x}; exit 7",
			NULL};

	assert_same_with_and_without(argv, NULL);
}
END_TEST

START_TEST(test_python_unchanged)
{
	char *argv[] = {"/usr/bin/python3", "-c",
			"import threading,sys\n"
			"r=[]\n"
			"ts=[threading.Thread(target=lambda i=i: r.append(i*i)) for i "
			"in range(8)]\n"
			"[t.start() for t in ts]; [t.join() for t in ts]\n"
			"print(sorted(r)); sys.stderr.write('e\\n'); sys.exit(3)",
			NULL};

	if (access(argv[0], X_OK) != 0)
		return;
	assert_same_with_and_without(argv, NULL);
}
END_TEST

START_TEST(test_threads_unchanged)
{
	char path[4096];
	char *argv[] = {path, "16", NULL};

	snprintf(path, sizeof(path), "%s/threads", test_env_path("HELPER_DIR"));
	assert_same_with_and_without(argv, NULL);
}
END_TEST

START_TEST(test_threads_with_traceparent_unchanged)
{
	char path[4096];
	char *argv[] = {path, "16", NULL};
	char *env[] = {
		"TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"TRACESTATE=congo=t61rcWkgMzE", NULL};

	snprintf(path, sizeof(path), "%s/threads", test_env_path("HELPER_DIR"));
	assert_same_with_and_without(argv, env);
}
END_TEST

/* Another interposer of the names glibc versions and the shim hooks at
 * that version (pthread_cond_wait@GLIBC_2.3.2, posix_spawn@GLIBC_2.15),
 * defined without a version as ThreadSanitizer's runtime defines them,
 * after the shim in LD_PRELOAD (_i 0) or before it (_i 1): it must see
 * every call it sees alone, and the program print the same.  The shim
 * forwarded with dlvsym(), which finds glibc's exact version only, so
 * the interposer after it saw none. */
START_TEST(test_versioned_interposer_sees_calls)
{
	static const char *const names[] = {"pthread_cond_wait",
					    "pthread_cond_timedwait", "posix_spawn",
					    "posix_spawnp"};
	char path[4096], lib[4200], alone[4300], stacked[8600], want[128];
	char *argv[] = {path, NULL};
	char *env_alone[] = {alone, NULL}, *env_stacked[] = {stacked, NULL};
	char *out0, *err0, *out1, *err1;
	int st0, st1;

	snprintf(path, sizeof(path), "%s", test_helper_path("versioned-calls"));
	snprintf(lib, sizeof(lib), "%s",
		 test_helper_path("libversioned-interposer.so"));
	snprintf(alone, sizeof(alone), "LD_PRELOAD=%s", lib);
	if (_i == 0)
		snprintf(stacked, sizeof(stacked), "LD_PRELOAD=%s %s",
			 test_env_path("CTXSHIM_LIB"), lib);
	else
		snprintf(stacked, sizeof(stacked), "LD_PRELOAD=%s %s", lib,
			 test_env_path("CTXSHIM_LIB"));
	st0 = test_run_capture(argv, env_alone, false, &out0, &err0, 30000);
	st1 = test_run_capture(argv, env_stacked, false, &out1, &err1, 30000);
	ck_assert_msg(st0 == 0 && st1 == 0, "status %#x alone, %#x with the shim: %s%s",
		      st0, st1, err0, err1);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(want, sizeof(want), "interposer saw %s 1\n", names[i]);
		ck_assert_msg(strstr(out0, want), "alone, not \"%s\":\n%s", want, out0);
	}
	ck_assert_msg(strcmp(out0, out1) == 0, "--- alone\n%s--- %s\n%s", out0, stacked,
		      out1);
	free(out0);
	free(err0);
	free(out1);
	free(err1);
}
END_TEST

/* Runs argv with CTXSHIM_LOG naming a new file, and extra (when not NULL)
 * in its environment; it must exit 0.  Returns the file's text (malloc'd);
 * *out and *err get the program's output. */
static char *
run_logged(char **argv, char *extra, char **out, char **err)
{
	char logpath[] = "/tmp/ctxshim-log-XXXXXX", logenv[4200];
	char *env[] = {logenv, extra, NULL};
	char *log = calloc(1, 65536);
	int fd = test_mkstemp(logpath);

	ck_assert_ptr_nonnull(log);
	ck_assert_int_ge(fd, 0);
	close(fd);
	snprintf(logenv, sizeof(logenv), "CTXSHIM_LOG=%s", logpath);
	ck_assert_int_eq(test_run_capture(argv, env, true, out, err, 30000), 0);
	(void)test_read_small(logpath, log, 65536);
	unlink(logpath);
	return log;
}

/* How many times needle occurs in hay. */
static int
count_of(const char *hay, const char *needle)
{
	int n = 0;

	for (; (hay = strstr(hay, needle)); hay++)
		n++;
	return n;
}

START_TEST(test_log_goes_to_file_not_stdout)
{
	char path[4096];
	char *argv[] = {path, "2", NULL};
	char *out, *err, *log;

	snprintf(path, sizeof(path), "%s/threads", test_env_path("HELPER_DIR"));
	log = run_logged(argv, NULL, &out, &err);
	ck_assert_ptr_null(strstr(out, "ctxshim"));
	ck_assert_str_eq(err, "");
	ck_assert_msg(strstr(log, "active (ctxshim " CTXSHIM_VERSION ")"), "log: %s",
		      log);
	ck_assert_msg(strstr(log, "process context published"), "log: %s", log);
	/* a memfd is found by its name whether the mapping is named or not */
	ck_assert_msg(!strstr(log, "not discoverable"), "log: %s", log);
	free(log);
	free(out);
	free(err);
}
END_TEST

/* Every process of a program's tree appends to the one log file: a shell
 * and the two programs it starts log three "active" lines, none written
 * over another's. */
START_TEST(test_log_file_appended_by_each_process)
{
	char *argv[] = {"/bin/sh", "-c", "/bin/true; /bin/true", NULL};
	char *out, *err, *log;

	log = run_logged(argv, NULL, &out, &err);
	ck_assert_msg(count_of(log, "active (ctxshim ") == 3, "log: %s", log);
	free(log);
	free(out);
	free(err);
}
END_TEST

START_TEST(test_log_stderr)
{
	char path[4096];
	char *argv[] = {path, "1", NULL};
	char *env[] = {"CTXSHIM_LOG=stderr", "CTXSHIM_DISABLE=1", NULL};
	char *out, *err;

	snprintf(path, sizeof(path), "%s/threads", test_env_path("HELPER_DIR"));
	ck_assert_int_eq(test_run_capture(argv, env, true, &out, &err, 30000), 0);
	ck_assert_msg(strstr(err, "disabled by CTXSHIM_DISABLE"), "stderr: %s", err);
	ck_assert_ptr_null(strstr(out, "ctxshim"));
	free(out);
	free(err);
}
END_TEST

/* CTXSHIM_LOG and CTXSHIM_EVENTS take "stderr" in any case and the boolean
 * words: a true one is stderr, a false one is off.  They were file paths
 * relative to each process's working directory: CTXSHIM_LOG=1 logged
 * nothing where the user looked and left a file named "1" there. */
START_TEST(test_log_boolean_words)
{
	static const struct {
		const char *log, *events;
		bool on;
	} c[] = {
		{"1", "yes", true},
		{"STDERR", "On", true},
		{"off", "0", false},
	};
	char dir[] = "/tmp/ctxshim-logword-XXXXXX", cwd[4096], path[4096];
	char logenv[64], evenv[64], name[4200];
	char *argv[] = {path, "1", NULL};
	char *env[] = {
		logenv, evenv,
		"TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		NULL};
	char *out, *err;

	snprintf(path, sizeof(path), "%s/threads", test_env_path("HELPER_DIR"));
	snprintf(logenv, sizeof(logenv), "CTXSHIM_LOG=%s", c[_i].log);
	snprintf(evenv, sizeof(evenv), "CTXSHIM_EVENTS=%s", c[_i].events);
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	ck_assert_int_eq(chdir(dir), 0);
	ck_assert_int_eq(test_run_capture(argv, env, true, &out, &err, 30000), 0);
	ck_assert_int_eq(chdir(cwd), 0);
	if (c[_i].on) {
		ck_assert_msg(strstr(err, "active (ctxshim "), "stderr: %s", err);
		ck_assert_msg(strstr(err, " attach trace="), "stderr: %s", err);
	} else {
		ck_assert_str_eq(err, "");
	}
	snprintf(name, sizeof(name), "%s/%s", dir, c[_i].log);
	ck_assert_msg(access(name, F_OK) != 0, "%s was created", name);
	snprintf(name, sizeof(name), "%s/%s", dir, c[_i].events);
	ck_assert_msg(access(name, F_OK) != 0, "%s was created", name);
	ck_assert_int_eq(rmdir(dir), 0);
	free(out);
	free(err);
}
END_TEST

/* CTXSHIM_EVENTS=stderr writes the lines to a copy of standard error,
 * which stays the program's: an event log to a file closes what it
 * opened, never descriptor 2. */
START_TEST(test_events_stderr_kept)
{
	char *argv[] = {"/bin/sh", "-c", "echo app-line >&2", NULL};
	char *env[] = {"CTXSHIM_EVENTS=stderr", NULL};
	char *out, *err;

	ck_assert_int_eq(test_run_capture(argv, env, true, &out, &err, 30000), 0);
	ck_assert_msg(strstr(err, "app-line\n"), "stderr: %s", err);
	free(out);
	free(err);
}
END_TEST

/* A setting that is not understood is logged with what would be right
 * (old: "CTXSHIM_PROPAGATE=... is not a boolean", though transparent is
 * valid; "OTEL_RESOURCE_ATTRIBUTES is malformed" without saying where). */
START_TEST(test_log_says_what_is_wrong)
{
	char path[4096];
	char *argv[] = {path, "1", NULL};
	char *env[] = {"CTXSHIM_LOG=stderr", "CTXSHIM_PROPAGATE=transparant",
		       "OTEL_RESOURCE_ATTRIBUTES=a=1, ,b", NULL};
	char *out, *err;

	snprintf(path, sizeof(path), "%s/threads", test_env_path("HELPER_DIR"));
	ck_assert_int_eq(test_run_capture(argv, env, true, &out, &err, 30000), 0);
	ck_assert_msg(strstr(err, "CTXSHIM_PROPAGATE=transparant is not 1, 0 or "
				  "transparent, using 1"),
		      "stderr: %s", err);
	ck_assert_msg(strstr(err, "OTEL_RESOURCE_ATTRIBUTES is malformed: entry 3 "
				  "has no '='"),
		      "stderr: %s", err);
	free(out);
	free(err);
}
END_TEST

/* CTXSHIM_EVENTS=stderr in a program started with standard error closed
 * (a daemon, "2>&-"): the log said "no descriptor free", which sends the
 * reader to the descriptor limit instead. */
START_TEST(test_log_events_stderr_closed)
{
	char *argv[] = {"/bin/sh", "-c", "exec 2>&- /bin/true", NULL};
	char *out, *err, *log;

	log = run_logged(argv, "CTXSHIM_EVENTS=stderr", &out, &err);
	ck_assert_msg(strstr(log, "cannot keep the event log stderr: standard error "
				  "is not open"),
		      "log: %s", log);
	ck_assert_msg(!strstr(log, "no descriptor free"), "log: %s", log);
	free(log);
	free(out);
	free(err);
}
END_TEST

/* A boolean setting that is not a boolean keeps its default: a typo in
 * CTXSHIM_EXEC_TRACEPARENT must not start rewriting the TRACEPARENT that
 * the program's children get. */
START_TEST(test_non_boolean_keeps_default)
{
	char *argv[] = {"/bin/sh", "-c", "exec env", NULL};
	char *out, *err, *log;

	setenv("TRACEPARENT", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	       1);
	log = run_logged(argv, "CTXSHIM_EXEC_TRACEPARENT=maybe", &out, &err);
	unsetenv("TRACEPARENT");
	ck_assert_msg(strstr(log, "CTXSHIM_EXEC_TRACEPARENT=maybe is not a boolean, "
				  "using 0"),
		      "log: %s", log);
	ck_assert_msg(strstr(out, "TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-"
				  "b7ad6b7169203331-01\n"),
		      "env: %s", out);
	ck_assert_msg(!strstr(out, "CTXSHIM_TRACEPARENT_PID="), "env: %s", out);
	free(log);
	free(out);
	free(err);
}
END_TEST

/* A log line longer than the shim's buffer (a setting's value is logged
 * as given) is cut, still one line: nothing past the buffer is written
 * or sent. */
START_TEST(test_long_log_line_is_cut)
{
	static char value[3000], env[3100];
	char path[4096];
	char *argv[] = {path, "1", NULL};
	char *out, *err, *log, *line, *end;

	memset(value, 'v', sizeof(value) - 1);
	snprintf(env, sizeof(env), "CTXSHIM_URL_QUERY=%s", value);
	snprintf(path, sizeof(path), "%s/threads", test_env_path("HELPER_DIR"));
	log = run_logged(argv, env, &out, &err);
	line = strstr(log, "CTXSHIM_URL_QUERY=vvv");
	ck_assert_msg(line, "log: %.200s", log);
	while (line > log && line[-1] != '\n')
		line--;
	end = strchr(line, '\n');
	ck_assert_ptr_nonnull(end);
	/* 1023 bytes with the newline (the buffer, less its NUL), the rest
	 * of it the setting's value */
	ck_assert_int_eq(end - line, 1022);
	ck_assert_int_eq(strspn(strstr(line, "=") + 1, "v"),
			 (size_t)(end - strstr(line, "=") - 1));
	ck_assert_msg(strncmp(end + 1, "ctxshim[", 8) == 0, "next: %.80s", end + 1);
	free(log);
	free(out);
	free(err);
}
END_TEST

/* An event log that cannot be opened is said so, and the program runs as
 * without it (a failed descriptor taken on to "cannot keep" would blame
 * standard error). */
START_TEST(test_event_log_not_opened)
{
	char path[4096];
	char *argv[] = {path, "1", NULL};
	char *out, *err, *log;

	/* not sh: dash leaves by _exit(), which a coverage build does not count */
	snprintf(path, sizeof(path), "%s/threads", test_env_path("HELPER_DIR"));
	log = run_logged(argv, "CTXSHIM_EVENTS=/nonexistent/ctxshim-dir/events", &out,
			 &err);
	ck_assert_msg(strstr(log, "cannot open the event log /nonexistent/ctxshim-dir/"
				  "events: No such file or directory\n"),
		      "log: %s", log);
	ck_assert_msg(!strstr(log, "cannot keep the event log"), "log: %s", log);
	ck_assert_msg(strstr(out, "\ndone\n"), "stdout: %s", out);
	ck_assert_str_eq(err, "");
	free(log);
	free(out);
	free(err);
}
END_TEST

/* The descriptor ls(1) lists as the link to path, in out. */
static int
fd_of(const char *out, const char *path)
{
	char want[4300];
	const char *p, *line;

	snprintf(want, sizeof(want), " -> %s\n", path);
	p = strstr(out, want);
	ck_assert_msg(p, "ls: %s", out);
	line = p;
	while (line > out && line[-1] != '\n')
		line--;
	/* "lrwx------ 1 root root 64 Dec  5 21:00 192 -> /tmp/..." */
	while (p > line && p[-1] != ' ')
		p--;
	return atoi(p);
}

/* Under a descriptor limit at or below the log's usual place (700; the
 * event log's is 701) and with stdin closed at start: the log file took
 * descriptor 0, which the program's next open() gets and takes for its
 * stdin, and CTXSHIM_LOG=stderr logged nothing.  Now both sit near the top
 * of the limit, also at a limit of exactly 700. */
START_TEST(test_log_fd_under_a_low_limit)
{
	static const int limits[] = {256, 700};
	char logpath[] = "/tmp/ctxshim-log-XXXXXX", logenv[4200];
	char evpath[] = "/tmp/ctxshim-ev-XXXXXX", evenv[4200], script[128];
	char *argv[] = {"/bin/sh", "-c", script, NULL};
	char *env[] = {logenv, evenv, NULL};
	char *err_env[] = {"CTXSHIM_LOG=stderr", NULL};
	char *out, *err;
	int fd, n, lim = limits[_i];

	snprintf(script, sizeof(script),
		 "ulimit -n %d; exec 0<&-; exec ls -l /proc/self/fd", lim);
	fd = test_mkstemp(logpath);
	ck_assert_int_ge(fd, 0);
	close(fd);
	fd = test_mkstemp(evpath);
	ck_assert_int_ge(fd, 0);
	close(fd);
	snprintf(logenv, sizeof(logenv), "CTXSHIM_LOG=%s", logpath);
	snprintf(evenv, sizeof(evenv), "CTXSHIM_EVENTS=%s", evpath);
	ck_assert_int_eq(test_run_capture(argv, env, true, &out, &err, 30000), 0);
	unlink(logpath);
	unlink(evpath);
	n = fd_of(out, logpath);
	ck_assert_msg(n >= lim - 64 && n < lim, "log on descriptor %d: %s", n, out);
	n = fd_of(out, evpath);
	ck_assert_msg(n >= lim - 64 && n < lim, "event log on descriptor %d: %s", n,
		      out);
	free(out);
	free(err);

	ck_assert_int_eq(test_run_capture(argv, err_env, true, &out, &err, 30000), 0);
	ck_assert_msg(count_of(err, "active (ctxshim ") == 2,
		      "sh and ls log, stderr: %s", err);
	free(out);
	free(err);
}
END_TEST

TEST_SUITE(preload_core_suite)
{
	Suite *s = suite_create("Preloaded into unmodified programs");
	TCase *tc = tcase_create("unchanged output");

	tcase_add_test(tc, test_ls_unchanged);
	tcase_add_test(tc, test_ls_error_unchanged);
	tcase_add_test(tc, test_bash_unchanged);
	tcase_add_test(tc, test_python_unchanged);
	tcase_add_test(tc, test_threads_unchanged);
	tcase_add_test(tc, test_threads_with_traceparent_unchanged);
	tcase_add_loop_test(tc, test_versioned_interposer_sees_calls, 0, 2);
	suite_add_tcase(s, tc);
	tc = tcase_create("logging");
	tcase_add_test(tc, test_log_goes_to_file_not_stdout);
	tcase_add_test(tc, test_log_file_appended_by_each_process);
	tcase_add_test(tc, test_log_stderr);
	tcase_add_test(tc, test_events_stderr_kept);
	tcase_add_loop_test(tc, test_log_boolean_words, 0, 3);
	tcase_add_test(tc, test_log_says_what_is_wrong);
	tcase_add_test(tc, test_log_events_stderr_closed);
	tcase_add_test(tc, test_non_boolean_keeps_default);
	tcase_add_test(tc, test_long_log_line_is_cut);
	tcase_add_test(tc, test_event_log_not_opened);
	tcase_add_loop_test(tc, test_log_fd_under_a_low_limit, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}
