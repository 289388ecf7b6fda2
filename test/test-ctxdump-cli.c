/* SPDX-License-Identifier: Apache-2.0 */
/* ctxdump as a command: options and exit codes, the error cases of the
 * issue (no such process, no symbol, vanished thread, a target that is
 * already traced), threads that come and go during the dump, signals to
 * ctxdump in the middle of a dump.  After every dump the target must be
 * running, and it must exit normally at the end. */
#include "test-prof.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* 30 s; more where the stop timeout is longer (a sanitizer, valgrind) */
#define RUN_TIMEOUT_MS test_ctxdump_run_ms()

/* Run ctxdump with up to 14 arguments (NULL-terminated; as
 * test_ctxdump_argv() puts them); returns the exit status, fails the
 * test if it did not exit normally. */
static int
run_ctxdump(char **out, char **err, const char *a1, ...)
{
	va_list ap;
	int st;

	va_start(ap, a1);
	st = test_ctxdump_vrun(out, err, RUN_TIMEOUT_MS, a1, ap);
	va_end(ap);
	ck_assert_msg(WIFEXITED(st), "ctxdump did not exit normally (status 0x%x)", st);
	return WEXITSTATUS(st);
}

/* Every thread of pid is out of ptrace-stop and job-stop (within a short
 * grace period for the scheduler). */
static void
assert_running(pid_t pid)
{
	long deadline = test_now_ms() + 1000;
	char path[64], bad[300] = "";

	for (;;) {
		struct dirent *de;
		DIR *d;

		snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
		d = opendir(path);
		ck_assert_ptr_nonnull(d);
		bad[0] = '\0';
		while ((de = readdir(d)) != NULL) {
			char stat_path[384], buf[512], *p;
			FILE *f;

			if (de->d_name[0] == '.')
				continue;
			snprintf(stat_path, sizeof(stat_path), "%s/%s/stat", path,
				 de->d_name);
			f = fopen(stat_path, "re");
			if (!f)
				continue; /* exited meanwhile */
			if (fgets(buf, sizeof(buf), f)) {
				p = strrchr(buf, ')');
				if (p && (p[2] == 't' || p[2] == 'T'))
					snprintf(bad, sizeof(bad),
						 "tid %s is in state %c", de->d_name,
						 p[2]);
			}
			fclose(f);
		}
		closedir(d);
		if (!bad[0])
			break;
		ck_assert_msg(test_now_ms() < deadline, "target %d left stopped: %s",
			      (int)pid, bad);
		usleep(2000);
	}
	ck_assert_int_ne(test_proc_state(pid), 't');
	ck_assert_int_ne(test_proc_state(pid), 'T');
}

struct churn {
	struct test_child c;
	pid_t pid, gone, odd, vfork, spin;
	pid_t tid[32];
	unsigned n;
};

/* opt: NULL, "--churn", "--odd", "--vfork" or "--spin" (see
 * test/helpers/churn.c) */
static void
churn_start(struct churn *h, const char *opt, unsigned n)
{
	char count[16], line[1024], *p, *end;
	char *argv[4];
	int k = 0;

	snprintf(count, sizeof(count), "%u", n);
	argv[k++] = (char *)test_helper_path("churn");
	if (opt)
		argv[k++] = (char *)opt;
	argv[k++] = count;
	argv[k] = NULL;
	memset(h, 0, sizeof(*h));
	test_child_start(&h->c, argv, NULL, false);
	for (;;) {
		test_child_readline(&h->c, line, sizeof(line), 10000);
		if (strncmp(line, "ODD ", 4) == 0)
			h->odd = (pid_t)atoi(line + 4);
		else if (strncmp(line, "VFORK ", 6) == 0)
			h->vfork = (pid_t)atoi(line + 6);
		else if (strncmp(line, "SPIN ", 5) == 0)
			h->spin = (pid_t)atoi(line + 5);
		else if (strncmp(line, "READY ", 6) == 0)
			break;
	}
	p = line + 6;
	h->pid = (pid_t)strtol(p, &end, 10);
	ck_assert_int_eq(h->pid, h->c.pid);
	h->gone = (pid_t)strtol(end, &end, 10);
	while (*end && h->n < 32) {
		p = end;
		h->tid[h->n] = (pid_t)strtol(p, &end, 10);
		if (end == p)
			break;
		h->n++;
	}
	ck_assert_uint_eq(h->n, n);
}

static void
churn_finish(struct churn *h)
{
	int st;

	assert_running(h->pid);
	st = test_child_finish(&h->c, 10000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "target did not exit normally (status 0x%x)", st);
}

static void
assert_try_help(const char *err)
{
	const char *tail = "Try 'ctxdump --help' for more information.\n";
	size_t l = strlen(err), t = strlen(tail);

	ck_assert_msg(l >= t && strcmp(err + l - t, tail) == 0,
		      "stderr does not end with the --help hint: '%s'", err);
	ck_assert_msg(strncmp(err, "ctxdump: ", 9) == 0, "no program prefix: '%s'",
		      err);
}

static void
hex_of(char *out, unsigned byte, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", byte & 0xff);
}

/* What churn publishes for worker i. */
static void
assert_worker_json(const char *json, const struct churn *h, unsigned i)
{
	char *t = test_json_thread(json, h->tid[i]);
	char want[128], hex[64];

	ck_assert_msg(t, "thread %d missing in the JSON", (int)h->tid[i]);
	hex_of(hex, i + 1, 16);
	snprintf(want, sizeof(want), "\"trace_id\": \"%s\"", hex);
	ck_assert_msg(strstr(t, want), "thread %d: no %s in %s", (int)h->tid[i], want,
		      t);
	hex_of(hex, 0xa0 + i, 8);
	snprintf(want, sizeof(want), "\"span_id\": \"%s\"", hex);
	ck_assert_msg(strstr(t, want), "thread %d: no %s", (int)h->tid[i], want);
	snprintf(want, sizeof(want), "\"value\": \"worker-%u\"", i);
	ck_assert_msg(strstr(t, want), "thread %d: no %s", (int)h->tid[i], want);
	ck_assert_ptr_nonnull(strstr(t, "\"valid\": 1,"));
	ck_assert_ptr_nonnull(strstr(t, "\"flags\": 1,"));
	ck_assert_ptr_nonnull(strstr(t, "\"key\": \"#0\""));
	ck_assert_ptr_nonnull(strstr(t, "\"comm\": \"churn\""));
	free(t);
}

/* Output is valid UTF-8 without control bytes other than newlines, and
 * (as_json) parses as JSON.  Checked with python3, which meson needs
 * anyway; skipped where it is missing. */
static void
assert_clean_output(const char *out, bool as_json)
{
	static const char script[] =
		"import json, sys\n"
		"s = open(sys.argv[1], 'rb').read().decode('utf-8')\n"
		"bad = [hex(ord(c)) for c in s if c != '\\n' and "
		"(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f)]\n"
		"assert not bad, bad\n"
		"if sys.argv[2] == 'json':\n"
		"    json.loads(s)\n";
	char tmpl[] = "/tmp/ctxdump-out-XXXXXX", *err = NULL;
	char *argv[] = {"/usr/bin/python3",        "-c", (char *)script, tmpl,
			as_json ? "json" : "text", NULL};
	int fd, st;

	if (access(argv[0], X_OK) != 0)
		return;
	fd = test_mkstemp(tmpl);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, out, strlen(out)), (ssize_t)strlen(out));
	close(fd);
	st = test_run_capture(argv, NULL, false, NULL, &err, 30000);
	unlink(tmpl);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "output not clean: %s",
		      err);
	free(err);
}

START_TEST(escaping)
{
	struct churn h;
	char *out, *err, arg[16], want[256];

	churn_start(&h, "--odd", 1);
	snprintf(arg, sizeof(arg), "%d", (int)h.pid);

	ck_assert_int_eq(run_ctxdump(&out, &err, arg, NULL), 0);
	snprintf(want, sizeof(want), "Thread %d \"o\\x0a\\x1b\\xff\\\"\\\\d\" (",
		 (int)h.odd);
	ck_assert_msg(strstr(out, want), "no '%s' in %s", want, out);
	ck_assert_ptr_nonnull(strstr(out,
				     "    trace_id=eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee "
				     "span_id=dddddddddddddddd flags=03\n"
				     "    #0=x\\x01y\n"
				     "    #1=\\xc3(\n"
				     "    #2=\xe2\x82\xac\n"
				     "    #200=z\n"));
	assert_clean_output(out, false);
	free(out);
	free(err);

	ck_assert_int_eq(run_ctxdump(&out, &err, "--json", arg, NULL), 0);
	ck_assert_msg(strstr(out, "\"comm\": \"o\\n\\u001b\\ufffd\\\"\\\\d\""), "%s",
		      out);
	ck_assert_ptr_nonnull(strstr(out, "\"value\": \"x\\u0001y\""));
	ck_assert_ptr_nonnull(strstr(out, "\"value\": \"\\ufffd(\""));
	ck_assert_ptr_nonnull(strstr(out, "\"value\": \"\xe2\x82\xac\""));
	ck_assert_ptr_nonnull(strstr(out, "\"key\": \"#200\""));
	ck_assert_ptr_nonnull(strstr(out, "\"flags\": 3,"));
	assert_clean_output(out, true);
	free(out);
	free(err);
	churn_finish(&h);
}
END_TEST

START_TEST(usage_errors)
{
	static const char *const cases[][4] = {
		{NULL},
		{"--bogus", "1", NULL},
		{"abc", NULL},
		{"0", NULL},
		{"1", "2", NULL},
		{"-n", "-1", "1", NULL},
		{"-n", "x", "1", NULL},
		{"-t", "x", "1", NULL},
		{"--stack-size", "9M", "1", NULL},
		{"--stack-size", "12Q", "1", NULL},
		{"--stack-size", "0", "1", NULL},
		{"--stack-size", "4095", "1", NULL},
		{"--stack-size", "4096iB", "1", NULL},
		/* ctxdump.1: at most 60000, and a wait of 0 is none */
		{"--stop-timeout", "0", "1", NULL},
		{"--stop-timeout", "60001", "1", NULL},
		{"-t", NULL},
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *out, *err;
		int r = run_ctxdump(&out, &err, cases[i][0], cases[i][1], cases[i][2],
				    NULL);

		ck_assert_msg(r == 64, "case %zu: exit %d, stderr '%s'", i, r, err);
		ck_assert_str_eq(out, "");
		assert_try_help(err);
		free(out);
		free(err);
	}
	/* A long option is named as written, not by its short letter. */
	{
		char *out, *err;
		int r = run_ctxdump(&out, &err, "1", "--max-frames", NULL, NULL);

		ck_assert_int_eq(r, 64);
		ck_assert_msg(strstr(err, "option '--max-frames' requires an argument"),
			      "%s", err);
		free(out);
		free(err);
		/* a range is named (old: only "invalid frame count") */
		r = run_ctxdump(&out, &err, "record", "-n", "2000", "1", NULL);
		ck_assert_int_eq(r, 64);
		ck_assert_msg(strstr(err, "invalid frame count: '2000' (0 to 1024)"),
			      "%s", err);
		free(out);
		free(err);
		r = run_ctxdump(&out, &err, "1", "-n", NULL, NULL);
		ck_assert_int_eq(r, 64);
		ck_assert_msg(strstr(err, "option requires an argument -- 'n'"), "%s",
			      err);
		free(out);
		free(err);
	}
	/* A long option given an argument it does not take, and an
	 * abbreviation of several, are named as getopt names them (old:
	 * "invalid option -- 'j'", a raw byte for an option without a
	 * letter, and "unrecognized option '--st'"). */
	{
		static const char *const named[][4] = {
			{"--json=1", "1", NULL,
			 "option '--json' doesn't allow an argument"},
			{"--no-dem=yes", "1", NULL,
			 "option '--no-demangle' doesn't allow an argument"},
			{"--st", "1", NULL,
			 "option '--st' is ambiguous; possibilities: '--stacks' "
			 "'--stack-size' '--stop-timeout'"},
			{"record", "--quiet=1", "1",
			 "option '--quiet' doesn't allow an argument"},
			{"report", "--folded=1", "f",
			 "option '--folded' doesn't allow an argument"},
			/* a short option after a valid long one is still one */
			{"--pid=1", "-xj", NULL, "invalid option -- 'x'"},
		};

		for (i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
			char *out, *err;
			int r = run_ctxdump(&out, &err, named[i][0], named[i][1],
					    named[i][2], NULL);

			ck_assert_msg(r == 64, "case %zu: exit %d, stderr '%s'", i, r,
				      err);
			ck_assert_msg(strstr(err, named[i][3]), "case %zu: '%s'", i,
				      err);
			ck_assert_msg(strstr(err, "--help' for more information.\n"),
				      "case %zu: no --help hint: '%s'", i, err);
			free(out);
			free(err);
		}
	}
}
END_TEST

/* The state letter of /proc/PID/stat, '?' if it cannot be read. */
static char
proc_state(pid_t pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return '?';
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return '?';
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

/* A child that exited and is not reaped yet is still listed in /proc:
 * the message says why it cannot be read (old: "process N exited" of a
 * pid that ps still shows). */
START_TEST(zombie_target)
{
	char arg[16], *out, *err;
	long deadline;
	pid_t pid;
	int r, st;

	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(0);
	deadline = test_now_ms() + RUN_TIMEOUT_MS;
	while (proc_state(pid) != 'Z') {
		ck_assert_msg(test_now_ms() < deadline,
			      "child %d never became a zombie", (int)pid);
		usleep(1000);
	}
	snprintf(arg, sizeof(arg), "%d", (int)pid);
	r = run_ctxdump(&out, &err, arg, NULL);
	ck_assert_msg(r == 2, "exit %d: %s", r, err);
	ck_assert_msg(strstr(err, "exited (zombie, not reaped yet)"), "%s", err);
	free(out);
	free(err);
	r = run_ctxdump(&out, &err, "record", "-o", "/dev/null", arg, NULL);
	ck_assert_msg(r == 2, "exit %d: %s", r, err);
	ck_assert_msg(strstr(err, "exited (zombie, not reaped yet)"), "%s", err);
	free(out);
	free(err);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
}
END_TEST

START_TEST(help_version)
{
	char *out, *err, want[128];

	/* util-linux's help starts with an empty line (lsns --help) */
	ck_assert_int_eq(run_ctxdump(&out, &err, "--help", NULL), 0);
	ck_assert_msg(strncmp(out, "\nUsage:\n ctxdump [options] <pid>\n", 33) == 0,
		      "%s", out);
	ck_assert_ptr_nonnull(strstr(out, "\n\n -h, --help"));
	ck_assert_ptr_nonnull(strstr(out, " -t, --tid <tid>"));
	ck_assert_ptr_nonnull(strstr(out, " -j, --json"));
	ck_assert_ptr_nonnull(strstr(out, "For more details see ctxdump(1).\n"));
	/* the exit statuses as ctxdump(1) has them: a thread that ended
	 * during the dump does not make the output partial */
	ck_assert_msg(strstr(out,
			     " 1   partial: some threads could not be stopped or "
			     "read (threads\n       that ended during the dump are "
			     "not a reason)\n") &&
			      !strstr(out, "vanished"),
		      "%s", out);
	ck_assert_str_eq(err, "");
	free(out);
	free(err);

	ck_assert_int_eq(run_ctxdump(&out, &err, "-h", "123", NULL), 0);
	ck_assert_ptr_nonnull(strstr(out, "Usage:"));
	free(out);
	free(err);

	/* the subcommands' help as the main one: an empty line first, one
	 * before --help, and the exit status (old: only the main one's) */
	for (size_t i = 0; i < 2; i++) {
		static const char *const cmd[] = {"record", "report"};
		static const char *const start[] = {
			"\nUsage:\n ctxdump record [options] <pid>\n",
			"\nUsage:\n ctxdump report [options] <file>\n"};

		ck_assert_int_eq(run_ctxdump(&out, &err, cmd[i], "--help", NULL), 0);
		ck_assert_msg(strncmp(out, start[i], strlen(start[i])) == 0, "%s", out);
		ck_assert_msg(strstr(out, "\n\n -h, --help"), "%s", out);
		ck_assert_msg(
			strstr(out, "\n\nExit status:\n 0   ") &&
				strstr(out, "\n 1   partial: ") &&
				strstr(out, "\n 2   fatal: ") &&
				strstr(out, "\n 64  usage error\n\nFor more details"),
			"%s", out);
		/* record takes a process without a layout (exit 0, stacks
		 * without trace context; no_map_files), so that is no fatal
		 * error of it (old: "no known layout") */
		ck_assert_msg(i != 0 || !strstr(out, "layout,"), "%s", out);
		ck_assert_str_eq(err, "");
		free(out);
		free(err);
	}

	ck_assert_int_eq(run_ctxdump(&out, &err, "--version", NULL), 0);
	snprintf(want, sizeof(want), "ctxdump from ctxshim %s\n", CTXSHIM_VERSION);
	ck_assert_str_eq(out, want);
	ck_assert_str_eq(err, "");
	free(out);
	free(err);

	/* help that cannot be written is an error (old: exit 0) */
	for (size_t i = 0; i < 4; i++) {
		static const char *const opts[] = {"--help", "--version",
						   "record --help", "report -V"};
		char *sh[] = {"/bin/sh",
			      "-c",
			      "exec \"$0\" $1 >/dev/full",
			      (char *)test_ctxdump_path(),
			      (char *)opts[i],
			      NULL};
		int st = test_run_capture(sh, NULL, false, &out, &err, RUN_TIMEOUT_MS);

		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "%s: status 0x%x",
			      opts[i], st);
		ck_assert_msg(strstr(err, "write error on standard output: No space "
					  "left on device"),
			      "%s: %s", opts[i], err);
		free(out);
		free(err);
	}
}
END_TEST

START_TEST(no_such_process)
{
	char *out, *err, arg[16];
	pid_t pid = fork();
	int st;

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(0);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	snprintf(arg, sizeof(arg), "%d", (int)pid);
	ck_assert_int_eq(run_ctxdump(&out, &err, arg, NULL), 2);
	ck_assert_msg(strstr(err, "does not exist"), "%s", err);
	ck_assert_str_eq(out, "");
	free(out);
	free(err);
	/* the edges ctxdump.1 gives are taken: the process is looked at */
	ck_assert_int_eq(run_ctxdump(&out, &err, "--stack-size=4K",
				     "--stop-timeout=60000", arg, NULL),
			 2);
	ck_assert_msg(strstr(err, "does not exist"), "%s", err);
	free(out);
	free(err);
}
END_TEST

/* A kernel thread of the machine (PF_KTHREAD in /proc/PID/stat), or 0 if
 * this pid namespace shows none. */
static pid_t
find_kthread(void)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t found = 0;

	ck_assert_ptr_nonnull(d);
	while (!found && (de = readdir(d)) != NULL) {
		char path[300], buf[1024], *p;
		unsigned long long flags = 0;
		FILE *f;
		int i;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
		fclose(f);
		/* field 9 (flags) is the 7th after the name */
		for (i = 0; p && i < 7; i++)
			if ((p = strchr(p + 1, ' ')) != NULL && i == 6)
				flags = strtoull(p + 1, NULL, 10);
		if (flags & 0x00200000ull)
			found = (pid_t)atoi(de->d_name);
	}
	closedir(d);
	return found;
}

/* A kernel thread maps nothing, as a process that has exited: the
 * message must say what it is, not that it exited. */
START_TEST(kernel_thread)
{
	char *out, *err, arg[16];
	pid_t pid = find_kthread();

	if (!pid) {
		fprintf(stderr, "ctxdump-cli: no kernel thread visible, not tested\n");
		return;
	}
	snprintf(arg, sizeof(arg), "%d", (int)pid);
	ck_assert_int_eq(run_ctxdump(&out, &err, arg, NULL), 2);
	ck_assert_msg(strstr(err, "is a kernel thread") && !strstr(err, "exited"), "%s",
		      err);
	free(out);
	free(err);
	ck_assert_int_eq(
		run_ctxdump(&out, &err, "record", "-o", "/dev/null", arg, NULL), 2);
	ck_assert_msg(strstr(err, "is a kernel thread") && !strstr(err, "exited"), "%s",
		      err);
	free(out);
	free(err);
}
END_TEST

/* ctxdump (--json if json) of writer-pctx started with mode (NULL: none),
 * whose exit status is 2 (no otel_thread_ctx_v1); its output, to be freed,
 * and its standard error in *err if err is not NULL (else freed). */
static char *
pctx_dump(const char *mode, bool json, char **err)
{
	char *argv[] = {(char *)test_helper_path("writer-pctx"),
			"distro",
			"1.0",
			"svc",
			(char *)mode,
			NULL};
	struct test_child c;
	char line[128], arg[16], *out, *e;

	test_child_start(&c, argv, NULL, false);
	test_child_expect(&c, "READY ", line, sizeof(line), RUN_TIMEOUT_MS);
	snprintf(arg, sizeof(arg), "%d", (int)c.pid);
	if (json)
		ck_assert_int_eq(run_ctxdump(&out, &e, "--json", arg, NULL), 2);
	else
		ck_assert_int_eq(run_ctxdump(&out, &e, arg, NULL), 2);
	if (err)
		*err = e;
	else
		free(e);
	ck_assert_int_eq(test_child_finish(&c, RUN_TIMEOUT_MS), 0);
	return out;
}

/* A process context with a key map but no threadlocal.schema_version
 * (helpers/writer-pctx.c) and no otel_thread_ctx_v1: exit 2, the process
 * context still printed, and its key map shown as what it is; a resource
 * key given twice is one JSON member; doubles at JSON's edge; keys at the
 * edge of the threadlocal. namespace. */
START_TEST(key_map_without_schema)
{
	char *out = pctx_dump(NULL, false, NULL);

	ck_assert_msg(strstr(out, "\nSchema: none (no threadlocal.schema_version), "
				  "key map: http.request.method, url.path\n"),
		      "%s", out);
	ck_assert_msg(!strstr(out, "no threadlocal.* keys"), "%s", out);
	free(out);

	/* test.dup, given twice: one JSON member, the last value */
	out = pctx_dump(NULL, true, NULL);
	ck_assert_msg(strstr(out, "\"test.dup\": \"new\"") &&
			      !strstr(out, "\"test.dup\": \"old\""),
		      "%s", out);
	free(out);

	/* two keys that are one name once their bytes that are not UTF-8
	 * are written as U+FFFD: one member too */
	out = pctx_dump("--bad-keys", true, NULL);
	ck_assert_msg(strstr(out, "\"test.bad\\ufffd\": \"new\"") &&
			      !strstr(out, "\"test.bad\\ufffd\": \"old\""),
		      "%s", out);
	free(out);

	/* the largest double is a JSON number, infinity is null; of the
	 * extra attributes, those in the threadlocal. namespace are left
	 * out, "threadlocal." too, and "threadlocalx" is not in it */
	out = pctx_dump("--edges", true, NULL);
	ck_assert_msg(strstr(out, "\"test.max\": 1.7976931348623157e+308") &&
			      strstr(out, "\"test.huge\": null") &&
			      strstr(out, "\"threadlocalx\": \"out\"") &&
			      !strstr(out, "\"threadlocal.\""),
		      "%s", out);
	free(out);
}
END_TEST

/* A process context published as the sig-profiling reference writer does
 * it: a 32-byte mapping that holds the header only, the payload on the
 * writer's heap (helpers/writer-pctx.c --heap).  OTEP-4719 lets the payload
 * be anywhere in the writer's memory, not only after the header. */
START_TEST(payload_outside_mapping)
{
	char *err, *out = pctx_dump("--heap", false, &err);

	ck_assert_msg(strstr(out, "\nService: svc (instance "
				  "0f0e0d0c-0b0a-4908-8706-050403020100)\n"),
		      "%s", out);
	ck_assert_msg(strstr(out, "key map: http.request.method, url.path\n"), "%s",
		      out);
	ck_assert_msg(!strstr(err, "process context"), "%s", err);
	free(out);
	free(err);
}
END_TEST

/* The writer's library was replaced on disk after it was loaded (a
 * package upgrade) and ctxdump cannot open the mapped inode (no
 * CAP_SYS_ADMIN / CAP_CHECKPOINT_RESTORE for /proc/PID/map_files): the
 * message must say so, not that no writer is loaded. */
START_TEST(writer_library_replaced)
{
	char dir[] = "/tmp/ctxdump-replaced-XXXXXX", lib[128], tmp[160], arg[16];
	char *argv[] = {(char *)test_helper_path("writer-dlopen"), lib, NULL};
	static char line[8192]; /* THREAD lines with the attributes' hex */
	char *src, *out, *err;
	const char *dump[] = {arg, NULL}, *json[] = {"--json", arg, NULL},
		   *rec[] = {"record", "-o", "/dev/null", "-d", "0.1", arg, NULL};
	struct test_child c;
	size_t len;
	FILE *f;
	int st;

	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	snprintf(lib, sizeof(lib), "%s/libwriter.so", dir);
	snprintf(tmp, sizeof(tmp), "%s/new.so", dir);
	f = fopen(test_helper_path("libwtls-tlsdesc.so"), "re");
	ck_assert_ptr_nonnull(f);
	src = malloc(1 << 22);
	ck_assert_ptr_nonnull(src);
	len = fread(src, 1, 1 << 22, f);
	fclose(f);
	f = fopen(lib, "we");
	ck_assert_uint_eq(fwrite(src, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
	test_child_start(&c, argv, NULL, false);
	test_child_expect(&c, "READY ", line, sizeof(line), RUN_TIMEOUT_MS);
	/* an upgrade: a new file renamed over the loaded one */
	f = fopen(tmp, "we");
	ck_assert_uint_eq(fwrite(src, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(rename(tmp, lib), 0);
	free(src);

	snprintf(arg, sizeof(arg), "%d", (int)c.pid);
	st = test_run_ctxdump_no_map_files(&out, &err, dump, RUN_TIMEOUT_MS);
	if (st == 0 && geteuid() != 0) {
		/* map_files could be opened after all (CAP_CHECKPOINT_RESTORE) */
		free(out);
		free(err);
		test_child_finish(&c, RUN_TIMEOUT_MS);
		return;
	}
	ck_assert_msg(st == 2, "exit %d: %s", st, err);
	ck_assert_msg(strstr(err, "could not be opened, the first ") &&
			      strstr(err,
				     "/libwriter.so (deleted): the file at its path "
				     "is not the one mapped (replaced since it was "
				     "loaded)") &&
			      strstr(err, "/map_files/, which needs CAP_SYS_ADMIN") &&
			      !strstr(err, "is an OTEP-4947 writer such as"),
		      "%s", err);
	/* Not "not found in any loaded object" (old): the one it is in was
	 * not read.  The others were: "not found" in those. */
	ck_assert_msg(strstr(out, "\nSymbol: otel_thread_ctx_v1 not found in the ") &&
			      strstr(out, " objects that could be opened (1 of its ") &&
			      strstr(out, " objects could not be opened, the first ") &&
			      strstr(out, "/libwriter.so (deleted): the file at its "
					  "path is not the one mapped (replaced since "
					  "it was loaded))\n") &&
			      !strstr(out, "not found in any"),
		      "%s", out);
	free(out);
	free(err);
	ck_assert_int_eq(
		test_run_ctxdump_no_map_files(&out, &err, json, RUN_TIMEOUT_MS), 2);
	ck_assert_msg(strstr(out, "  \"symbol\": null,\n"
				  "  \"symbol_error\": \"1 of its ") &&
			      strstr(out, "/libwriter.so (deleted): the file at its "
					  "path is not the one mapped (replaced since "
					  "it was loaded)\",\n"),
		      "%s", out);
	free(out);
	free(err);
	/* ctxdump record: not "defines none of" (old) either */
	st = test_run_ctxdump_no_map_files(&out, &err, rec, RUN_TIMEOUT_MS);
	ck_assert_msg(prof_record_exit_ok(st, err), "exit %d: %s", st, err);
	ck_assert_msg(strstr(err,
			     " that ctxdump could open defines otel_thread_ctx_v1, "
			     "elastic_apm_profiling_correlation_tls_v1, "
			     "custom_labels_current_set; 1 of its ") &&
			      strstr(err, "/libwriter.so (deleted): the file at its "
					  "path is not the one mapped (replaced since "
					  "it was loaded); recording stacks without "
					  "trace context\n") &&
			      !strstr(err, "defines none of"),
		      "%s", err);
	free(out);
	free(err);
	ck_assert_int_eq(test_child_finish(&c, RUN_TIMEOUT_MS), 0);
	unlink(lib);
	rmdir(dir);
}
END_TEST

START_TEST(not_a_process)
{
	struct churn h;
	char *out, *err, arg[16];

	churn_start(&h, NULL, 2);
	/* a thread id is not a process id; the message names the process
	 * and the command that shows the thread (old: "use -t TID with its
	 * process id", without it) */
	snprintf(arg, sizeof(arg), "%d", (int)h.tid[0]);
	ck_assert_int_eq(run_ctxdump(&out, &err, arg, NULL), 2);
	{
		char want[160];

		snprintf(want, sizeof(want),
			 "ctxdump: %d is a thread of process %d, not a process; use "
			 "ctxdump -t %d %d\n",
			 (int)h.tid[0], (int)h.pid, (int)h.tid[0], (int)h.pid);
		ck_assert_str_eq(err, want);
	}
	free(out);
	free(err);
	/* nor for a recording (old: recorded, labelled with the tid) */
	ck_assert_int_eq(run_ctxdump(&out, &err, "record", "-d", "0.1", "-o",
				     "/dev/null", arg, NULL),
			 2);
	ck_assert_msg(strstr(err, "is a thread of process ") &&
			      strstr(err, ", not a process; record process "),
		      "%s", err);
	free(out);
	free(err);
	churn_finish(&h);
}
END_TEST

START_TEST(no_symbol)
{
	char *argv[] = {(char *)test_helper_path("threads"), "--wait", "2", NULL};
	struct test_child c;
	char line[512], arg[16], *out, *err;
	int st;

	test_child_start(&c, argv, NULL, false);
	test_child_expect(&c, "READY ", line, sizeof(line), 10000);
	snprintf(arg, sizeof(arg), "%d", (int)c.pid);

	ck_assert_int_eq(run_ctxdump(&out, &err, arg, NULL), 2);
	ck_assert_msg(strstr(err, "no loaded object of process") &&
			      strstr(err, "defines otel_thread_ctx_v1"),
		      "%s", err);
	ck_assert_msg(strstr(out, "Symbol: otel_thread_ctx_v1 not found"), "%s", out);
	ck_assert_ptr_nonnull(strstr(out, "Process context: none"));
	free(out);
	free(err);

	ck_assert_int_eq(run_ctxdump(&out, &err, "--json", arg, NULL), 2);
	ck_assert_msg(strstr(out, "\"symbol\": null,"), "%s", out);
	ck_assert_ptr_nonnull(strstr(out, "\"process_context\": null,"));
	ck_assert_ptr_nonnull(strstr(out, "\"threads\": []"));
	ck_assert_ptr_nonnull(strstr(out, "\"stopped_ns\": 0,"));
	free(out);
	free(err);

	assert_running(c.pid);
	st = test_child_finish(&c, 10000);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}
END_TEST

/* A command line longer than the 64 KiB ctxdump keeps is shown cut, and
 * says so: "(command line truncated: ...)" in text, cmdline_truncated in
 * JSON (old: cut without a word, as if it were the whole).  One of
 * exactly 64 KiB (its NUL terminator the 65537th byte of
 * /proc/PID/cmdline) is whole (old: the terminator counted, it was said
 * to be cut).  A cut that would split a UTF-8 character (_i 2: "é" at
 * bytes 65535-65536) is made before it (old: its first byte was shown,
 * "\xc3" in text, U+FFFD in JSON). */
START_TEST(long_command_line)
{
	/* the bytes of /proc/PID/cmdline, NULs included */
	static const size_t total[] = {70000, 65537, 70000};
	static char big[70000];
	char *argv[] = {(char *)test_helper_path("churn"), "1", big, NULL};
	char *out, *err, arg[16], line[1024];
	size_t fixed = strlen(argv[0]) + 1 + 2 + 1; /* "1" and three NULs */
	bool cut = total[_i] > 65537;
	struct churn h;

	memset(big, 'x', total[_i] - fixed);
	big[total[_i] - fixed] = '\0';
	if (_i == 2) {
		/* big starts at byte fixed - 1 of the command line */
		big[65535 - (fixed - 1)] = (char)0xc3;
		big[65536 - (fixed - 1)] = (char)0xa9;
	}
	memset(&h, 0, sizeof(h));
	test_child_start(&h.c, argv, NULL, false);
	do
		test_child_readline(&h.c, line, sizeof(line), 10000);
	while (strncmp(line, "READY ", 6) != 0);
	h.pid = (pid_t)atoi(line + 6);
	snprintf(arg, sizeof(arg), "%d", (int)h.pid);

	ck_assert_int_eq(run_ctxdump(&out, &err, arg, NULL), 0);
	ck_assert_msg(!strstr(out, _i == 2 ? "xxx (command line truncated: shown the "
					     "first 65535 bytes)\n"
					   : "xxx (command line truncated: shown the "
					     "first 65536 bytes)\n") == !cut,
		      "%.200s", strstr(out, "xxx (") ? strstr(out, "xxx (") - 20 : out);
	free(out);
	free(err);
	ck_assert_int_eq(run_ctxdump(&out, &err, "--json", arg, NULL), 0);
	ck_assert_msg(strstr(out, cut ? "xxx\"\n  ],\n  \"cmdline_truncated\": true,"
				      : "xxx\"\n  ],\n  \"cmdline_truncated\": false,"),
		      "%.200s", strstr(out, "],") ? strstr(out, "],") - 40 : out);
	free(out);
	free(err);
	churn_finish(&h);
}
END_TEST

/* A process that wrote a shorter title over its argv (nginx's
 * ngx_setproctitle()) pads the rest with NULs, which /proc/PID/cmdline
 * gives as empty arguments: they are left out, in text and in JSON, as
 * ps(1) leaves them out (old: the title and a space for each, and as
 * many "" in the JSON array).  Padding past the 64 KiB kept (_i 1) is
 * no cut command line (old: "(command line truncated: ...)"). */
START_TEST(padded_command_line)
{
	static const size_t len[] = {200, 70000};
	static char pad[70000];
	char *argv[] = {(char *)test_helper_path("proctitle"), pad, NULL};
	char *out, *err, arg[16], line[256];
	struct test_child c;

	/* an argv area longer than the title: the kernel then gives all
	 * of it, title and padding */
	memset(pad, 'x', len[_i] - 1);
	pad[len[_i] - 1] = '\0';
	test_child_start(&c, argv, NULL, false);
	test_child_expect(&c, "PARENT ", line, sizeof(line), 10000);
	snprintf(arg, sizeof(arg), "%d", (int)c.pid);

	ck_assert_int_eq(run_ctxdump(&out, &err, arg, NULL), 2);
	ck_assert_msg(strstr(out, " master process, a title over argv and environ\n"),
		      "%.200s", out);
	free(out);
	free(err);
	ck_assert_int_eq(run_ctxdump(&out, &err, "--json", arg, NULL), 2);
	ck_assert_msg(strstr(out, "argv and environ\"\n  ],\n  \"cmdline_truncated\": "
				  "false,"),
		      "%.300s", out);
	free(out);
	free(err);
	ck_assert_int_eq(test_child_finish(&c, 10000), 0);
}
END_TEST

START_TEST(records_text_and_json)
{
	struct churn h;
	char *out, *err, arg[16], want[128], *t;
	unsigned i;

	churn_start(&h, NULL, 3);
	snprintf(arg, sizeof(arg), "%d", (int)h.pid);

	ck_assert_int_eq(run_ctxdump(&out, &err, "--json", arg, NULL), 0);
	ck_assert_str_eq(err, "");
	for (i = 0; i < h.n; i++)
		assert_worker_json(out, &h, i);
	/* the main thread has no record; the helper thread that exited is
	 * not listed */
	t = test_json_thread(out, h.pid);
	ck_assert_ptr_nonnull(t);
	ck_assert_msg(strstr(t, "\"context\": null"), "%s", t);
	free(t);
	ck_assert_ptr_null(test_json_thread(out, h.gone));
	ck_assert_ptr_nonnull(strstr(out, "\"model\": \"local-exec\""));
	ck_assert_ptr_nonnull(strstr(out, "\"name\": \"otel_thread_ctx_v1\""));
	ck_assert_msg(!strstr(out, "\"stopped_ns\": 0,"), "nothing was stopped?");
	assert_clean_output(out, true);
	free(out);
	free(err);
	assert_running(h.pid);

	ck_assert_int_eq(run_ctxdump(&out, &err, "-v", arg, NULL), 0);
	/* the local-exec offset is one from the thread pointer (old:
	 * "TLS: thread pointer -N", as if it were the pointer) */
	ck_assert_msg(strstr(out, "(local-exec)") &&
			      strstr(out, "\nTLS: at thread pointer -") &&
			      strstr(out, "Stopped: 4 threads for"),
		      "%s", out);
	snprintf(want, sizeof(want), "Thread %d \"churn\" (", (int)h.tid[1]);
	ck_assert_ptr_nonnull(strstr(out, want));
	ck_assert_ptr_nonnull(strstr(out,
				     "    trace_id=02020202020202020202020202020202 "
				     "span_id=a1a1a1a1a1a1a1a1 flags=01\n"
				     "    #0=worker-1\n"));
	ck_assert_ptr_nonnull(strstr(out, "    (no context)\n"));
	free(out);
	free(err);

	/* -q leaves out the main thread, which has no context */
	ck_assert_int_eq(run_ctxdump(&out, &err, "-q", "-j", arg, NULL), 0);
	ck_assert_ptr_null(test_json_thread(out, h.pid));
	ck_assert_ptr_nonnull(t = test_json_thread(out, h.tid[2]));
	free(t);
	free(out);
	free(err);

	/* a dump that cannot be written says where it went (old: "write
	 * error: No space left on device") and fails */
	for (i = 0; i < 2; i++) {
		char *sh[] = {"/bin/sh",
			      "-c",
			      "exec \"$0\" $1 \"$2\" >/dev/full",
			      (char *)test_ctxdump_path(),
			      i ? "--json" : "-v",
			      arg,
			      NULL};
		int st = test_run_capture(sh, NULL, false, &out, &err, RUN_TIMEOUT_MS);

		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "status 0x%x", st);
		ck_assert_msg(strstr(err, "ctxdump: write error on standard output: "
					  "No space left on device\n"),
			      "%s", err);
		free(out);
		free(err);
		assert_running(h.pid);
	}
	churn_finish(&h);
}
END_TEST

/* The process given with -p/--pid, as gdb, strace and perf take it (old:
 * "invalid option -- 'p'", exit 64), to the dump and to record; with the
 * operand as well, a usage error. */
START_TEST(pid_option)
{
	struct churn h;
	char *out, *err, arg[16], eq[32];
	int r;

	churn_start(&h, NULL, 1);
	snprintf(arg, sizeof(arg), "%d", (int)h.pid);
	snprintf(eq, sizeof(eq), "--pid=%d", (int)h.pid);

	ck_assert_int_eq(run_ctxdump(&out, &err, "-j", "-p", arg, NULL), 0);
	assert_worker_json(out, &h, 0);
	free(out);
	free(err);
	ck_assert_int_eq(run_ctxdump(&out, &err, eq, "-q", NULL), 0);
	ck_assert_msg(strstr(out, "span_id=a0a0a0a0a0a0a0a0"), "%s", out);
	free(out);
	free(err);
	/* not -q: a round a loaded machine made it skip is said (exit 1) */
	r = run_ctxdump(&out, &err, "record", "-d", "0.05", "-o", "-", "-p", arg, NULL);
	ck_assert_msg(prof_record_exit_ok(r, err), "exit %d: %s", r, err);
	ck_assert_msg(strncmp(out, "CTXDPROF", 8) == 0, "no recording: %s", err);
	free(out);
	free(err);
	assert_running(h.pid);

	ck_assert_int_eq(run_ctxdump(&out, &err, "-p", arg, arg, NULL), 64);
	ck_assert_msg(strstr(err, "unexpected argument"), "%s", err);
	assert_try_help(err);
	free(out);
	free(err);
	/* -q bundled after -p is its argument: say which process id was
	 * taken (old: only that the operand is unexpected) */
	ck_assert_int_eq(run_ctxdump(&out, &err, "-pq", arg, NULL), 64);
	ck_assert_msg(strstr(err, "(the process id is given with --pid: 'q')"), "%s",
		      err);
	free(out);
	free(err);
	/* ctxdump $(pidof nginx), a master and its workers (old: only
	 * "unexpected argument") */
	ck_assert_int_eq(run_ctxdump(&out, &err, arg, arg, NULL), 64);
	ck_assert_msg(strstr(err, "unexpected argument: '"), "%s", err);
	ck_assert_msg(strstr(err, "' (one process id only)"), "%s", err);
	free(out);
	free(err);
	ck_assert_int_eq(run_ctxdump(&out, &err, "-p", NULL), 64);
	free(out);
	free(err);
	churn_finish(&h);
}
END_TEST

START_TEST(one_thread)
{
	struct churn h;
	char *out, *err, arg[16], tid[16], *t, line[128];

	churn_start(&h, NULL, 3);
	snprintf(arg, sizeof(arg), "%d", (int)h.pid);

	snprintf(tid, sizeof(tid), "%d", (int)h.tid[1]);
	ck_assert_int_eq(run_ctxdump(&out, &err, "-j", "-t", tid, arg, NULL), 0);
	assert_worker_json(out, &h, 1);
	ck_assert_ptr_null(t = test_json_thread(out, h.tid[0]));
	ck_assert_ptr_null(t = test_json_thread(out, h.pid));
	free(out);
	free(err);
	assert_running(h.pid);

	/* -v: the one thread stopped, in the singular */
	ck_assert_int_eq(run_ctxdump(&out, &err, "-v", "-t", tid, arg, NULL), 0);
	ck_assert_msg(strstr(out, "\nStopped: 1 thread for "), "%s", out);
	free(out);
	free(err);
	assert_running(h.pid);

	/* a thread that has exited */
	snprintf(tid, sizeof(tid), "%d", (int)h.gone);
	ck_assert_int_eq(run_ctxdump(&out, &err, "--tid", tid, arg, NULL), 2);
	ck_assert_msg(strstr(err, "does not exist"), "%s", err);
	free(out);
	free(err);

	/* a thread of another process (this test) */
	snprintf(tid, sizeof(tid), "%d", (int)getpid());
	ck_assert_int_eq(run_ctxdump(&out, &err, "-t", tid, arg, NULL), 2);
	snprintf(line, sizeof(line), "thread %d belongs to process %d, not %d",
		 (int)getpid(), (int)getpid(), (int)h.pid);
	ck_assert_msg(strstr(err, line), "%s", err);
	free(out);
	free(err);
	churn_finish(&h);
}
END_TEST

/* Unusual stacks (test/helpers/deep-stack.c):
 *  - --stack-size up to 8M copies a 6 MiB stack whole (old: cut at 4088
 *    KiB, the limit of one process_vm_readv() that this path does not
 *    have);
 *  - -n 0 stops at 4096 frames saying that this is its most (old: "use
 *    -n 0 for all");
 *  - a coroutine stack in .data deeper than the copy says where it ends
 *    (old: its saved return addresses read as 0, so it looked complete);
 *  - the program mapping its libc file once more leaves libc's frames
 *    named and unwound (old: one module for both, with the bias of the
 *    lower mapping: "?? (libc.so.6+...)", and the stack ended there);
 *  - a SIGSEGV handler that interrupted a call through a null pointer
 *    shows the calls that led there (old: the stack ended at the signal
 *    frame, as if complete);
 *  - code that no symbol covers, in the section after a function without
 *    a size, is not named after that function (old: "sizeless+0x17", as
 *    a frame in the PLT was named "_init+0x80");
 *  - a C++ function is shown demangled (old: "_ZN4demo9Scheduler4waitEi"),
 *    also one with many back-references, and as it is with --no-demangle;
 *    a name whose demangled form would be a gigabyte is shown as it is
 *    (old: seconds and gigabytes spent on it);
 *  - the frames found past a function without unwind information are
 *    marked as guessed (old: shown as any other), and those before it
 *    are not;
 *  - a frame chain that leads back to a frame already shown ends as a
 *    loop (old: the two frames over and over up to 4096, "more frames"),
 *    also a cycle of three frames, where no frame repeats the one before;
 *  - a function name of 256 bytes is shown cut to 255, the most a frame
 *    keeps (STACK_SYMBOL_MAX with its terminator);
 *  - a function whose symbol is versioned is shown without the version;
 *  - unwind information whose DWARF expression jumps back to itself ends
 *    the stack (old: ctxdump hung in libunwind, for ever). */
#define X8  "xxxxxxxx"
#define X64 X8 X8 X8 X8 X8 X8 X8 X8

START_TEST(stacks_unusual)
{
	static const struct {
		const char *depth, *pad, *mode, *stack_size;
		unsigned n_deep; /* deep() frames shown; 0: over 4000 */
		const char *want, *unwanted;
	} cases[] = {
		{"3000", "2000", "", "8M", 3001, " start_thread+", "(stack ends:"},
		{"5000", "0", "", "1M", 0,
		 "(more frames: shown the first 4096, the most ctxdump shows)\n",
		 "use -n 0"},
		{"400", "256", "data", "64K", 0, "(stack ends: ", NULL},
		{"50", "0", "maplibc", "64K", 51, " start_thread+", "?? (libc"},
		{"20", "0", "nullcall", "64K", 21, " start_thread+", "(stack ends:"},
		{"3", "0", "nosym", "64K", 0, " ?? (", " sizeless+"},
		{"3", "0", "mangled", "64K", 4, " demo::Scheduler::wait(int)+0x",
		 "_ZN4demo"},
		{"3", "0", "nocfi", "64K", 4, " nocfi_call+0x", NULL},
		{"3", "0", "cycle", "64K", 0, "(stack ends: unwinding loop)\n",
		 "(more frames"},
		{"3", "0", "cycle3", "64K", 0, "(stack ends: unwinding loop)\n",
		 "(more frames"},
		{"3", "0", "longname", "64K", 4,
		 " longname" X64 X64 X64 X8 X8 X8 X8 X8 X8 "xxxxxxx+0x", NULL},
		{"3", "0", "symver", "64K", 4, " versioned_wait+0x", "@VERS_1"},
		{"3", "0", "cfaloop", "64K", 0,
		 "(stack ends: unwind information loops or is too long)\n", NULL},
	};
	unsigned c;

	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		char *argv[] = {(char *)test_helper_path("deep-stack"),
				(char *)cases[c].depth, (char *)cases[c].pad,
				(char *)cases[c].mode, NULL};
		char line[64], pid[16], tid[16], *out, *err, *p;
		struct test_child ch;
		unsigned n = 0;
		int a, b;

		if (!*cases[c].mode)
			argv[3] = NULL;
		test_child_start(&ch, argv, NULL, false);
		test_child_expect(&ch, "READY ", line, sizeof(line), RUN_TIMEOUT_MS);
		ck_assert_int_eq(sscanf(line, "READY %d %d", &a, &b), 2);
		snprintf(pid, sizeof(pid), "%d", a);
		snprintf(tid, sizeof(tid), "%d", b);
		ck_assert_int_eq(run_ctxdump(&out, &err, "--stacks", "-n", "0",
					     "--stack-size", cases[c].stack_size, "-t",
					     tid, pid, NULL),
				 0);
		for (p = out; (p = strstr(p, " deep+")); p++)
			n++;
		if (cases[c].n_deep)
			ck_assert_msg(n == cases[c].n_deep, "case %u: %u deep() frames",
				      c, n);
		else if (c == 1)
			ck_assert_msg(n > 4000, "case %u: %u deep() frames", c, n);
		ck_assert_msg(strstr(out, cases[c].want), "case %u: no '%s' in %.200s",
			      c, cases[c].want,
			      strrchr(out, '#') ? strrchr(out, '#') : out);
		ck_assert_msg(!cases[c].unwanted || !strstr(out, cases[c].unwanted),
			      "case %u: '%s' in %.200s", c, cases[c].unwanted,
			      strstr(out, cases[c].unwanted));
		if (strcmp(cases[c].mode, "nocfi") == 0) {
			static const struct {
				const char *fn;
				bool guessed;
			} marks[] = {{" bottom_wait+", false},
				     {" nocfi_call+", false},
				     {" deep+", true},
				     {" run+", true},
				     {" start_thread+", true}};

			unsigned k;

			for (k = 0; k < sizeof(marks) / sizeof(marks[0]); k++) {
				const char *l = strstr(out, marks[k].fn);
				size_t len;
				bool g;

				ck_assert_msg(l, "no%s in %s", marks[k].fn, out);
				len = strcspn(l, "\n");
				g = len >= 9 &&
				    memcmp(l + len - 9, "[guessed]", 9) == 0;
				ck_assert_msg(g == marks[k].guessed, "%.*s", (int)len,
					      l);
			}
		}
		/* many references demangled; one that would take a gigabyte
		 * shown as it is */
		if (strcmp(cases[c].mode, "mangled") == 0)
			ck_assert_msg(
				strstr(out, " demo::Many::set(demo::A&, demo::A&, ") &&
					strstr(out, " _Z1f1A1BIS_S_ES0_IS1_S1_E"),
				"%s", out);
		free(out);
		free(err);
		if (strcmp(cases[c].mode, "mangled") == 0) {
			ck_assert_int_eq(run_ctxdump(&out, &err, "--stacks",
						     "--no-demangle", "-t", tid, pid,
						     NULL),
					 0);
			ck_assert_msg(strstr(out, " _ZN4demo9Scheduler4waitEi+0x") &&
					      !strstr(out, "demo::"),
				      "%s", out);
			free(out);
			free(err);
		}
		ck_assert_int_eq(test_child_finish(&ch, RUN_TIMEOUT_MS), 0);
	}
}
END_TEST

/* ctxdump started with SIGALRM blocked (a mask its parent left it, which
 * execve keeps) still gives up on a name whose demangled form would be a
 * gigabyte, and shows it as it is.  Old: the demangling child inherited
 * the mask, its 200 ms timer never fired, and it ran for about 10 s and
 * took gigabytes, then the name was shown demangled. */
START_TEST(stacks_demangle_bound_with_sigalrm_blocked)
{
	char *argv[] = {(char *)test_helper_path("deep-stack"), "3", "0", "mangled",
			NULL};
	char line[64], pid[16], tid[16], *out, *err;
	struct test_child ch;
	sigset_t alrm, old;
	int a, b, r;

	test_child_start(&ch, argv, NULL, false);
	test_child_expect(&ch, "READY ", line, sizeof(line), RUN_TIMEOUT_MS);
	ck_assert_int_eq(sscanf(line, "READY %d %d", &a, &b), 2);
	snprintf(pid, sizeof(pid), "%d", a);
	snprintf(tid, sizeof(tid), "%d", b);
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	ck_assert_int_eq(sigprocmask(SIG_BLOCK, &alrm, &old), 0);
	r = run_ctxdump(&out, &err, "--stacks", "-t", tid, pid, NULL);
	ck_assert_int_eq(sigprocmask(SIG_SETMASK, &old, NULL), 0);
	ck_assert_int_eq(r, 0);
	ck_assert_msg(strstr(out, " _Z1f1A1BIS_S_ES0_IS1_S1_E") &&
			      !strstr(out, " f(A, B<A, A>"),
		      "%s", out);
	free(out);
	free(err);
	ck_assert_int_eq(test_child_finish(&ch, RUN_TIMEOUT_MS), 0);
}
END_TEST

/* Seize every thread of pid (tid 0) or only thread tid and hold them
 * (running) until *release is closed: another tracer such as gdb or
 * strace, or one that traces a single thread. */
static pid_t
start_tracer(pid_t pid, pid_t tid, int *release_fd)
{
	int ready[2], release[2];
	pid_t tracer;
	char c;

	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_eq(pipe(release), 0);
	tracer = fork();
	ck_assert_int_ge(tracer, 0);
	if (tracer == 0) {
		char path[64];
		struct dirent *de;
		DIR *d;

		close(ready[0]);
		close(release[1]);
		snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
		d = opendir(path);
		if (!d)
			_exit(1);
		while ((de = readdir(d)) != NULL) {
			pid_t t = (pid_t)atoi(de->d_name);

			if (de->d_name[0] != '.' && (!tid || t == tid) &&
			    ptrace(PTRACE_SEIZE, t, NULL, NULL) < 0)
				_exit(1);
		}
		closedir(d);
		if (write(ready[1], "x", 1) != 1)
			_exit(1);
		(void)read(release[0], &c, 1);
		_exit(0); /* the kernel detaches our tracees */
	}
	close(ready[1]);
	close(release[0]);
	ck_assert_int_eq(read(ready[0], &c, 1), 1);
	close(ready[0]);
	*release_fd = release[1];
	return tracer;
}

/* The permission hint is the TracerPid one, and the only one. */
static void
assert_only_tracer_hint(const char *err)
{
	ck_assert_ptr_null(strstr(err, "ptrace_scope"));
	ck_assert_ptr_null(strstr(err, "different user"));
}

/* Let start_tracer()'s tracer go; it must end well. */
static void
tracer_finish(pid_t tracer, int release)
{
	int st;

	close(release);
	ck_assert_int_eq(waitpid(tracer, &st, 0), tracer);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* ctxdump words... with its own process id as the last argument (a
 * dump or a recording of itself); returns its exit status, *err its
 * standard error (malloc'd). */
static int
run_on_itself(char **err, const char *const *words)
{
	char errf[64], pid[16], *argv[12];
	const char *w[8];
	int n = 0, st;
	pid_t c;

	prof_tmpfile(errf, sizeof(errf), "itself-err");
	c = fork();
	ck_assert_int_ge(c, 0);
	if (c == 0) {
		int fd = open(errf, O_WRONLY | O_TRUNC | O_CLOEXEC);
		int nul = open("/dev/null", O_RDWR | O_CLOEXEC);

		snprintf(pid, sizeof(pid), "%d", (int)getpid());
		for (; *words && n < 6; words++)
			w[n++] = *words;
		w[n++] = pid;
		w[n] = NULL;
		test_ctxdump_argv(argv, 12, w);
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(fd, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	ck_assert_int_eq(waitpid(c, &st, 0), c);
	*err = prof_slurp(errf);
	unlink(errf);
	ck_assert_msg(WIFEXITED(st), "status 0x%x: %s", st, *err);
	return WEXITSTATUS(st);
}

/* ctxdump refuses to stop or record its own process (it would wait for
 * itself): said, exit 2. */
START_TEST(dump_itself)
{
	char *err;
	int r;

	r = run_on_itself(&err, (const char *const[]){NULL});
	ck_assert_msg(r == 2, "exit %d: %s", r, err);
	ck_assert_str_eq(err, "ctxdump: ctxdump cannot dump itself\n");
	free(err);
	r = run_on_itself(&err,
			  (const char *const[]){"record", "-o", "/dev/null", NULL});
	ck_assert_msg(r == 2, "record: exit %d: %s", r, err);
	ck_assert_str_eq(err, "ctxdump record: ctxdump cannot record itself\n");
	free(err);
}
END_TEST

START_TEST(already_traced)
{
	struct churn h;
	char *out, *err, arg[16], want[128];
	int release;
	pid_t tracer;

	churn_start(&h, NULL, 2);
	snprintf(arg, sizeof(arg), "%d", (int)h.pid);
	tracer = start_tracer(h.pid, 0, &release);

	ck_assert_int_eq(run_ctxdump(&out, &err, arg, NULL), 2);
	ck_assert_msg(strstr(err, "ptrace(PTRACE_SEIZE, ") &&
			      strstr(err, "Operation not permitted"),
		      "%s", err);
	snprintf(want, sizeof(want), "is already being traced by pid %d", (int)tracer);
	ck_assert_msg(strstr(err, want), "no TracerPid hint: %s", err);
	assert_only_tracer_hint(err);
	free(out);
	free(err);
	assert_running(h.pid);

	tracer_finish(tracer, release);
	/* and now it works */
	ck_assert_int_eq(run_ctxdump(&out, &err, "-j", arg, NULL), 0);
	assert_worker_json(out, &h, 0);
	free(out);
	free(err);
	churn_finish(&h);
}
END_TEST

/* Only one thread is traced by another process: that thread is not read
 * (partial), the others are, and the hint names the thread and its
 * tracer as when the whole process is traced. */
START_TEST(one_thread_traced)
{
	struct churn h;
	char *out, *err, arg[16], path[64], comm[64], want[256];
	int release, r;
	pid_t tracer;
	ssize_t n;

	churn_start(&h, NULL, 2);
	snprintf(arg, sizeof(arg), "%d", (int)h.pid);
	tracer = start_tracer(h.pid, h.tid[1], &release);
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)tracer);
	n = test_read_small(path, comm, sizeof(comm));
	ck_assert_int_gt(n, 1);
	comm[n - 1] = '\0'; /* the newline */

	r = run_ctxdump(&out, &err, "-j", arg, NULL);
	ck_assert_msg(r == 1, "exit %d: %s", r, err);
	snprintf(want, sizeof(want), "ctxdump: tid %d: cannot attach: %s",
		 (int)h.tid[1], strerror(EPERM));
	ck_assert_msg(strstr(err, want), "no '%s' in '%s'", want, err);
	snprintf(want, sizeof(want),
		 "ctxdump: thread %d of process %d is already being traced by pid %d "
		 "(%s); only one tracer at a time is possible\n",
		 (int)h.tid[1], (int)h.pid, (int)tracer, comm);
	ck_assert_msg(strstr(err, want), "no TracerPid hint '%s' in '%s'", want, err);
	assert_only_tracer_hint(err);
	ck_assert_ptr_null(strstr(err, "ctxdump: process "));
	/* the other threads are read */
	assert_worker_json(out, &h, 0);
	free(out);
	free(err);
	assert_running(h.pid);

	tracer_finish(tracer, release);
	churn_finish(&h);
}
END_TEST

/* Each tid named on stderr only once; returns how many lines. */
static unsigned
assert_warnings_once(const char *err)
{
	const char *p = err;
	pid_t seen[4096];
	unsigned n = 0, i;

	while ((p = strstr(p, "ctxdump: tid ")) != NULL) {
		pid_t tid = (pid_t)atoi(p + 13);

		for (i = 0; i < n; i++)
			ck_assert_msg(seen[i] != tid, "tid %d reported twice: %s",
				      (int)tid, err);
		if (n < 4096)
			seen[n++] = tid;
		p += 13;
	}
	return n;
}

START_TEST(churn_during_dump)
{
	struct churn h;
	unsigned run, i;
	char arg[16];

	churn_start(&h, "--churn", 4);
	snprintf(arg, sizeof(arg), "%d", (int)h.pid);
	for (run = 0; run < 25; run++) {
		char *out, *err;
		int r = run_ctxdump(&out, &err, "-j", arg, NULL);
		const char *ex = strstr(out, "\"exited_threads\": ");

		/* a thread that ends during the dump is left out: no error */
		ck_assert_msg(r == 0, "exit %d: %s", r, err);
		ck_assert_uint_eq(assert_warnings_once(err), 0);
		ck_assert_ptr_nonnull(ex);
		ck_assert_int_ge(atoi(ex + 18), 0);
		for (i = 0; i < h.n; i++)
			assert_worker_json(out, &h, i);
		free(out);
		free(err);
		assert_running(h.pid);
	}
	churn_finish(&h);
}
END_TEST

/* ctxdump interrupted at a random point (often inside the stop window):
 * SIGINT/SIGTERM make it detach and die from the signal, SIGKILL leaves
 * the detaching to the kernel (PTRACE_SEIZE, no SIGSTOP). */
START_TEST(signals_to_ctxdump)
{
	static const int sigs[] = {SIGTERM, SIGINT, SIGKILL, SIGHUP};
	struct churn h;
	unsigned run;
	char arg[16];

	churn_start(&h, "--churn", 24);
	snprintf(arg, sizeof(arg), "%d", (int)h.pid);
	for (run = 0; run < 24; run++) {
		char *argv[] = {(char *)test_ctxdump_path(), "-j", arg, NULL};
		int sig = sigs[run % 4], st;
		sigset_t block, old;
		pid_t pid;

		/* The forked child must not run the test runner's signal
		 * handlers if the signal lands before execv(). */
		sigemptyset(&block);
		sigaddset(&block, sig);
		sigprocmask(SIG_BLOCK, &block, &old);
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			int null = open("/dev/null", O_WRONLY);

			signal(sig, SIG_DFL);
			sigprocmask(SIG_SETMASK, &old, NULL);
			dup2(null, 1);
			dup2(null, 2);
			execv(argv[0], argv);
			_exit(127);
		}
		sigprocmask(SIG_SETMASK, &old, NULL);
		usleep(150 * run);
		kill(pid, sig);
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		if (WIFSIGNALED(st))
			ck_assert_int_eq(WTERMSIG(st), sig);
		else
			ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) <= 1,
				      "status 0x%x", st);
		assert_running(h.pid);
	}
	churn_finish(&h);
}
END_TEST

static bool
all_tasks_stopped(pid_t pid)
{
	char path[64];
	struct dirent *e;
	bool all = true;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return false;
	while (all && (e = readdir(d)))
		if (e->d_name[0] != '.' &&
		    test_proc_state((pid_t)atoi(e->d_name)) != 'T')
			all = false;
	closedir(d);
	return all;
}

/* A job-stopped target is read (its threads report group-stops) and left
 * stopped, as it was. */
START_TEST(job_stopped_target)
{
	struct churn h;
	char *out, *err, arg[16];

	churn_start(&h, NULL, 2);
	snprintf(arg, sizeof(arg), "%d", (int)h.pid);
	ck_assert_int_eq(kill(h.pid, SIGSTOP), 0);
	/* Every thread, not only the leader, must be in the group-stop before
	 * ctxdump looks (a loaded machine delivers the stop late). */
	for (int i = 0; i < 2500 && !all_tasks_stopped(h.pid); i++)
		usleep(2000);
	ck_assert(all_tasks_stopped(h.pid));

	ck_assert_int_eq(run_ctxdump(&out, &err, "-j", arg, NULL), 0);
	assert_worker_json(out, &h, 0);
	assert_worker_json(out, &h, 1);
	free(out);
	free(err);
	/* A detach from a group-stop wakes the thread to stop again on its
	 * own (the kernel sets its stop pending and kicks it): it shows 'R'
	 * until it runs, which on a loaded machine may be a while.  One
	 * ctxdump had resumed stays 'R' or 'S'. */
	for (int i = 0; i < 2500 && !all_tasks_stopped(h.pid); i++)
		usleep(2000);
	ck_assert_int_eq(test_proc_state(h.pid), 'T');
	ck_assert(all_tasks_stopped(h.pid));
	ck_assert_int_eq(kill(h.pid, SIGCONT), 0);
	churn_finish(&h);
}
END_TEST

static long
elapsed_ms(long since)
{
	return test_now_ms() - since;
}

/* The child that thread tid of pid (its vforker) is waiting for, 0 if
 * none now: its only one, unreaped ones aside. */
static pid_t
vfork_child(pid_t pid, pid_t tid)
{
	char path[96], buf[256], *p = buf, *end;
	long c;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)tid);
	if (test_read_small(path, buf, sizeof(buf)) < 0)
		return 0;
	for (; (c = strtol(p, &end, 10)) > 0 && end != p; p = end)
		if (test_proc_state((pid_t)c) != 'Z')
			return (pid_t)c;
	return 0;
}

/* Until h's vforker thread has just started a new child: the thread then
 * cannot stop for the child's whole 1.5 s. */
static void
wait_fresh_vfork(const struct churn *h)
{
	long deadline = test_now_ms() + 10000;
	pid_t first = vfork_child(h->pid, h->vfork), now;

	do {
		ck_assert_msg(test_now_ms() < deadline, "no new vfork child");
		usleep(1000);
		now = vfork_child(h->pid, h->vfork);
	} while (!now || now == first);
}

/* A thread blocked in vfork() cannot enter ptrace-stop: ctxdump gives it
 * up after its deadline, reads the others, and says so (exit 1). */
START_TEST(stuck_thread)
{
	struct churn h;
	char *out, *err, arg[16], want[128], *t;
	long t0;

	churn_start(&h, "--vfork", 2);
	ck_assert_int_gt(h.vfork, 0);
	snprintf(arg, sizeof(arg), "%d", (int)h.pid);
	/* READY comes before the thread's first vfork(), and a loaded
	 * machine may run ctxdump in between (old: exit 0 now and then) */
	wait_fresh_vfork(&h);
	t0 = test_now_ms();
	/* shorter than the vfork child's 1.5 s sleep, so that the thread
	 * cannot stop in time even on a slow machine */
	ck_assert_int_eq(run_ctxdump(&out, &err, "--stop-timeout=300", "-j", arg, NULL),
			 1);
	ck_assert_int_lt(elapsed_ms(t0), 5000 * (long)test_time_scale());
	snprintf(want, sizeof(want), "ctxdump: tid %d: did not stop within ",
		 (int)h.vfork);
	ck_assert_msg(strstr(err, want), "%s", err);
	ck_assert_uint_eq(assert_warnings_once(err), 1);
	t = test_json_thread(out, h.vfork);
	ck_assert_ptr_nonnull(t);
	ck_assert_msg(strstr(t, "\"error\": \"did not stop within ") &&
			      strstr(t, "\"context\": null"),
		      "%s", t);
	free(t);
	assert_worker_json(out, &h, 0);
	assert_worker_json(out, &h, 1);
	free(out);
	free(err);
	assert_running(h.pid);
	churn_finish(&h);
}
END_TEST

/* The same thread dumped alone (--tid): nothing stopped, yet the
 * process lives.  ctxdump says that (exit 2), not that the process or
 * thread exited (old: stop_all()'s "nothing stopped" read as "gone"). */
START_TEST(stuck_thread_alone)
{
	struct churn h;
	char *out, *err, arg[16], tid[16], want[128];

	churn_start(&h, "--vfork", 2);
	ck_assert_int_gt(h.vfork, 0);
	snprintf(arg, sizeof(arg), "%d", (int)h.pid);
	snprintf(tid, sizeof(tid), "%d", (int)h.vfork);
	wait_fresh_vfork(&h);
	ck_assert_int_eq(
		run_ctxdump(&out, &err, "--stop-timeout=300", "-t", tid, arg, NULL), 2);
	snprintf(want, sizeof(want), "ctxdump: thread %d did not stop within 300 ms\n",
		 (int)h.vfork);
	ck_assert_msg(strstr(err, want) && strstr(err, "--stop-timeout") &&
			      !strstr(err, "exited"),
		      "%s", err);
	ck_assert_str_eq(out, "");
	free(out);
	free(err);
	assert_running(h.pid);
	churn_finish(&h);
}
END_TEST

/* The same for a whole process: its one thread inside vfork() until the
 * test lets the child go.  "no thread of process N stopped" with the
 * hint about state D, exit 2, not "exited" (the message was never
 * exercised: every stuck target had a thread that could stop). */
START_TEST(stuck_process)
{
	char *out, *err, arg[16], want[128];
	int go[2], st;
	pid_t pid;

	ck_assert_int_eq(pipe2(go, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char lib[PATH_MAX], c;

		close(go[1]);
		/* an OTEP-4947 writer, so that ctxdump goes on to the stop */
		if (!dlopen(prof_helper("libwtls-gd.so", lib, sizeof(lib)), RTLD_NOW))
			_exit(3);
		/* the parent waits in vfork() (state D) for this read */
		if (vfork() == 0) {
			while (read(go[0], &c, 1) > 0)
				;
			_exit(0);
		}
		_exit(0);
	}
	close(go[0]);
	prof_wait_task_state(pid, pid, 'D', test_now_ms() + RUN_TIMEOUT_MS);
	snprintf(arg, sizeof(arg), "%d", (int)pid);
	ck_assert_int_eq(run_ctxdump(&out, &err, "--stop-timeout=300", arg, NULL), 2);
	snprintf(want, sizeof(want),
		 "ctxdump: no thread of process %d stopped within 300 ms\n", (int)pid);
	ck_assert_msg(strstr(err, want) && strstr(err, "(state D, e.g. in vfork())") &&
			      !strstr(err, "exited"),
		      "%s", err);
	ck_assert_str_eq(out, "");
	free(out);
	free(err);
	assert_running(pid);
	close(go[1]);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}
END_TEST

/* A thread that spins on a CPU where it waits for its turn (up to 100 ms,
 * prof_hog()), dumped alone with a stop timeout of 1 ms: while nothing
 * is held, ctxdump waits on for a thread that is runnable (old: "thread
 * N did not stop within 1 ms", exit 2, unless the interrupt met it on
 * its CPU).  Three dumps. */
START_TEST(cpu_starved_thread)
{
	char *out, *err, arg[16], tid[16];
	struct churn h;
	pid_t hog;
	int i, cpu = prof_last_cpu(), nice, st;

	churn_start(&h, "--spin", 1);
	ck_assert_int_gt(h.spin, 0);
	snprintf(arg, sizeof(arg), "%d", (int)h.pid);
	snprintf(tid, sizeof(tid), "%d", (int)h.spin);
	hog = prof_hog(cpu, &nice);
	prof_starve_thread(h.spin, cpu, nice);
	for (i = 0; i < 3; i++) {
		int r = run_ctxdump(&out, &err, "--stop-timeout=1", "-j", "-t", tid,
				    arg, NULL);
		char *t = test_json_thread(out, h.spin);

		ck_assert_msg(r == 0 && t, "dump %d: exit %d: %s%s", i, r, out, err);
		free(t);
		free(out);
		free(err);
	}
	kill(hog, SIGKILL);
	ck_assert_int_eq(waitpid(hog, &st, 0), hog);
	churn_finish(&h);
}
END_TEST

/* The same thread, SCHED_IDLE next to a busy loop at nice 0 as well as
 * the hog: its waits for a CPU often outlast ctxdump's (20 ms here).  A
 * dump that gives up says how long it waited, and why (old: "thread N
 * did not stop within 1 ms", the stop timeout).  Up to ten dumps, until one
 * gives up; only with the privilege for SCHED_FIFO and nice 0 (root) is
 * one sure to: without, a dump that stops the thread is all it shows. */
START_TEST(cpu_starved_past_wait)
{
	char *out, *err, arg[16], tid[16], want[128];
	struct sched_param idle = {.sched_priority = 0};
	struct churn h;
	pid_t hog, busy;
	int i, cpu = prof_last_cpu(), nice, st, r = 0;

	churn_start(&h, "--spin", 1);
	ck_assert_int_gt(h.spin, 0);
	snprintf(arg, sizeof(arg), "%d", (int)h.pid);
	snprintf(tid, sizeof(tid), "%d", (int)h.spin);
	hog = prof_hog(cpu, &nice);
	busy = prof_spinner(cpu, 0);
	prof_starve_thread(h.spin, cpu, 0);
	ck_assert_int_eq(sched_setscheduler(h.spin, SCHED_IDLE, &idle), 0);
	snprintf(want, sizeof(want), "ctxdump: thread %d did not stop within ",
		 (int)h.spin);
	/* 2 s is not sure to run out on an idle machine (ctxdump.c,
	 * cpu_wait_ms()), nor is 200 ms: the hog lets the others run 1 ms
	 * in 100 */
	ck_assert_int_eq(setenv("CTXDUMP_TEST_CPU_WAIT_MS", "20", 1), 0);
	for (i = 0; i < 10 && r != 2; i++) {
		const char *p;
		unsigned ms = 0;

		r = run_ctxdump(&out, &err, "--stop-timeout=1", "-t", tid, arg, NULL);
		p = strstr(err, want);
		ck_assert_msg(r == 0 || (r == 2 && p), "dump %d: exit %d: %s", i, r,
			      err);
		/* "... within 20 ms (runnable: waiting for a CPU)" */
		if (r == 2)
			ck_assert_msg(sscanf(p + strlen(want), "%u", &ms) == 1 &&
					      ms >= 20 &&
					      strstr(p, " ms (runnable: waiting for a "
							"CPU)\n"),
				      "%s", err);
		free(out);
		free(err);
	}
	unsetenv("CTXDUMP_TEST_CPU_WAIT_MS");
	ck_assert_msg(r == 2 || nice != 0, "%d dumps, none gave up", i);
	kill(hog, SIGKILL);
	kill(busy, SIGKILL);
	ck_assert_int_eq(waitpid(hog, &st, 0), hog);
	ck_assert_int_eq(waitpid(busy, &st, 0), busy);
	churn_finish(&h);
}
END_TEST

/* A signal while ctxdump waits for the stuck thread: it must not sit out
 * the deadline with the other threads stopped. */
START_TEST(signal_while_holding)
{
	static const int sigs[] = {SIGTERM, SIGINT, SIGKILL};
	struct churn h;
	char arg[16];
	unsigned k;

	/* The deadline stays below the vfork child's 1.5 s (the thread stops
	 * after that), each ctxdump starting with a fresh child (started
	 * late in a child's life, it ended before the signal, and ctxdump
	 * with it, on a loaded machine); the signal comes well inside it,
	 * later on a slow build, and sitting the rest of it out takes twice
	 * the bound. */
	const long deadline = 1400, delay = test_time_scale() > 1 ? 300 : 150;
	const long bound = (deadline - delay) / 2;

	churn_start(&h, "--vfork", 3);
	snprintf(arg, sizeof(arg), "%d", (int)h.pid);
	for (k = 0; k < 3; k++) {
		char *argv[] = {(char *)test_ctxdump_path(), "--stop-timeout=1400", arg,
				NULL};
		sigset_t block, old;
		long t0;
		pid_t pid;
		int st;

		wait_fresh_vfork(&h);
		sigemptyset(&block);
		sigaddset(&block, sigs[k]);
		sigprocmask(SIG_BLOCK, &block, &old);
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			int null = open("/dev/null", O_WRONLY);

			signal(sigs[k], SIG_DFL);
			sigprocmask(SIG_SETMASK, &old, NULL);
			dup2(null, 1);
			dup2(null, 2);
			execv(argv[0], argv);
			_exit(127);
		}
		sigprocmask(SIG_SETMASK, &old, NULL);
		usleep((useconds_t)delay * 1000);
		t0 = test_now_ms();
		kill(pid, sigs[k]);
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == sigs[k], "status 0x%x",
			      st);
		ck_assert_msg(elapsed_ms(t0) < bound, "ctxdump took %ld ms to go",
			      elapsed_ms(t0));
		assert_running(h.pid);
	}
	churn_finish(&h);
}
END_TEST

/* Permission problems get one diagnosed hint.  Only testable as root:
 * ctxdump runs as nobody against a root-owned target. */
START_TEST(different_user)
{
	struct churn h;
	char arg[16], want[64], err[4096] = "";
	size_t len = 0;
	int errp[2], st;
	pid_t pid;

	if (getuid() != 0)
		return;
	churn_start(&h, NULL, 1);
	snprintf(arg, sizeof(arg), "%d", (int)h.pid);
	/* _i == 1: a recording, which fails on the maps before any stop
	 * (old: no hint) */
	ck_assert_int_eq(pipe2(errp, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char *one[] = {(char *)test_ctxdump_path(), arg, NULL};
		char *rec[] = {(char *)test_ctxdump_path(),
			       "record",
			       "-d",
			       "0.1",
			       "-o",
			       "/dev/null",
			       arg,
			       NULL};
		char **argv = _i ? rec : one;
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(errp[1], 2);
		if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
			_exit(99);
		execv(argv[0], argv);
		_exit(127);
	}
	close(errp[1]);
	for (;;) {
		ssize_t r = read(errp[0], err + len, sizeof(err) - 1 - len);

		if (r <= 0)
			break;
		len += (size_t)r;
	}
	err[len] = '\0';
	close(errp[0]);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st));
	/* root can always become nobody; the build tree may not let nobody
	 * in (a home directory of mode 0700) */
	ck_assert_int_ne(WEXITSTATUS(st), 99);
	if (WEXITSTATUS(st) == 127) {
		printf("different_user: uid 65534 cannot execute %s: not run\n",
		       test_ctxdump_path());
		churn_finish(&h);
		return;
	}
	snprintf(want, sizeof(want), "cannot read /proc/%s/maps: Permission denied",
		 arg);
	ck_assert_msg(WEXITSTATUS(st) == 2, "exit %d: %s", WEXITSTATUS(st), err);
	ck_assert_msg(strstr(err, want) &&
			      strstr(err, "may be owned by a different user (uid 0)"),
		      "%s", err);
	ck_assert_ptr_null(strstr(err, "already being traced"));
	assert_running(h.pid);
	churn_finish(&h);
}
END_TEST

/* Runs ctxdump with args (up to 6 arguments before the pid, NULL-ended;
 * NULL: none) as root without CAP_SYS_PTRACE on another user's sleep, under the
 * shim with preload (once its process context is published); stdout in
 * out, stderr in err.  Returns the exit status, or 99 when there is no
 * capability bounding set to drop from (or not root: nothing run). */
static int
run_without_ptrace_cap(bool preload,
		       const char *const *args,
		       char *out,
		       size_t out_len,
		       char *err,
		       size_t err_len)
{
	char arg[16], comm[32] = "", path[64], line[512];
	int outp[2], errp[2], st, i;
	pid_t target, pid;

	out[0] = err[0] = '\0';
	if (getuid() != 0)
		return 99;
	target = fork();
	ck_assert_int_ge(target, 0);
	if (target == 0) {
		if (preload &&
		    setenv("LD_PRELOAD", test_env_path("CTXSHIM_LIB"), 1) < 0)
			_exit(99);
		if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
			_exit(99);
		/* exec'd, so dumpable again after the change of uid */
		execlp("sleep", "sleep", "60", (char *)NULL);
		_exit(127);
	}
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)target);
	for (i = 0; i < 5000 && strcmp(comm, "sleep\n") != 0; i++) {
		FILE *f = fopen(path, "r");

		if (f) {
			if (!fgets(comm, sizeof(comm), f))
				comm[0] = '\0';
			fclose(f);
		}
		usleep(1000);
	}
	ck_assert_str_eq(comm, "sleep\n");
	/* the shim's constructor runs after the exec that set the name */
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)target);
	for (i = 0; preload; i++) {
		FILE *f = fopen(path, "re");
		bool found = false;

		while (f && !found && fgets(line, sizeof(line), f))
			found = strstr(line, "OTEL_CTX") != NULL;
		if (f)
			fclose(f);
		if (found)
			break;
		ck_assert_msg(i < 5000, "no OTEL_CTX mapping in sleep");
		usleep(1000);
	}
	snprintf(arg, sizeof(arg), "%d", (int)target);
	ck_assert_int_eq(pipe2(outp, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(errp, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char *argv[9] = {(char *)test_ctxdump_path()};
		int n = 1;

		while (args && *args && n < 7)
			argv[n++] = (char *)*args++;
		argv[n] = arg;

		dup2(outp[1], 1);
		dup2(errp[1], 2);
		/* root's exec gets the bounding set: no CAP_SYS_PTRACE */
		if (prctl(PR_CAPBSET_DROP, CAP_SYS_PTRACE, 0, 0, 0) < 0)
			_exit(99);
		execv(argv[0], argv);
		_exit(127);
	}
	close(outp[1]);
	close(errp[1]);
	/* a few KiB each: stdout to its end first cannot block ctxdump */
	for (size_t len = 0;;) {
		ssize_t r = read(outp[0], out + len, out_len - 1 - len);

		if (r <= 0)
			break;
		len += (size_t)r;
		out[len] = '\0';
	}
	for (size_t len = 0;;) {
		ssize_t r = read(errp[0], err + len, err_len - 1 - len);

		if (r <= 0)
			break;
		len += (size_t)r;
		err[len] = '\0';
	}
	close(outp[0]);
	close(errp[0]);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	kill(target, SIGKILL);
	waitpid(target, NULL, 0);
	ck_assert(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* Root without CAP_SYS_PTRACE on another user's process (a container's
 * root, the owner under Yama alike): /proc/PID/maps reads, but the
 * objects, opened through /proc/PID/root, are denied before any attach.
 * The hint of a failed attach says why (old: only "could not be opened
 * ... Permission denied", with "Process context: none"). */
START_TEST(no_cap_sys_ptrace)
{
	char out[8192], err[4096];
	int st =
		run_without_ptrace_cap(false, NULL, out, sizeof(out), err, sizeof(err));

	if (st == 99)
		return; /* no capability bounding set to drop from */
	ck_assert_msg(st == 2, "exit %d: %s", st, err);
	ck_assert_msg(strstr(err, "may be owned by a different user (uid 65534)"), "%s",
		      err);
	/* the hint names the missing capability: ctxdump is root already
	 * (old: "run ctxdump as that user or as root") */
	ck_assert_msg(strstr(err, "runs as root but without CAP_SYS_PTRACE") &&
			      !strstr(err, "or as root"),
		      "%s", err);
	/* no shim: no process context, rightly none */
	ck_assert_msg(strstr(out, "\nProcess context: none\n"), "%s", out);
}
END_TEST

/* There no object could be opened, so the symbol was looked for in
 * none: said so in text, JSON and on stderr (old: "Symbol:
 * otel_thread_ctx_v1 not found in any loaded object", "symbol": null
 * alone, and "none of the objects ... that ctxdump could open defines
 * otel_thread_ctx_v1; 17 of 17 could not be opened"). */
START_TEST(no_cap_sys_ptrace_symbol)
{
	static const char *const json[] = {"--json", NULL};
	static const char first[] =
		"ctxdump: cannot look for otel_thread_ctx_v1 in process ";
	char out[8192], err[4096];
	int st = run_without_ptrace_cap(true, NULL, out, sizeof(out), err, sizeof(err));

	if (st == 99)
		return;
	ck_assert_msg(st == 2, "exit %d: %s", st, err);
	ck_assert_msg(strstr(out, "\nSymbol: otel_thread_ctx_v1 not looked up (none "
				  "of its ") &&
			      strstr(out, " objects could be opened, the first ") &&
			      strstr(out, ": Permission denied)\n"),
		      "%s", out);
	ck_assert_msg(!strstr(out, "not found"), "%s", out);
	ck_assert_msg(
		strncmp(err, first, strlen(first)) == 0 &&
			strstr(err, "may be owned by a different user (uid 65534)"),
		"%s", err);
	ck_assert_msg(!strstr(err, "that ctxdump could open defines"), "%s", err);

	st = run_without_ptrace_cap(true, json, out, sizeof(out), err, sizeof(err));
	ck_assert_msg(st == 2, "exit %d: %s", st, err);
	ck_assert_msg(strstr(out, "  \"symbol\": null,\n"
				  "  \"symbol_error\": \"none of its ") &&
			      strstr(out, ": Permission denied\",\n  \"layouts\": []"),
		      "%s", out);
}
END_TEST

/* The same under the shim: the process has a process context (its
 * OTEL_CTX mapping is in maps), but its memory cannot be read.  "not
 * read", with why, in text and JSON (old: "Process context: none" and
 * "process_context": null alone, which say it has none). */
START_TEST(no_cap_sys_ptrace_pctx)
{
	static const char *const json[] = {"--json", NULL};
	char out[8192], err[4096];
	int st = run_without_ptrace_cap(true, NULL, out, sizeof(out), err, sizeof(err));

	if (st == 99)
		return;
	ck_assert_msg(st == 2, "exit %d: %s", st, err);
	ck_assert_msg(strstr(out,
			     "\nProcess context: (not read: cannot read the header "
			     "at 0x") &&
			      strstr(out, ": Operation not permitted)\n"),
		      "%s", out);
	ck_assert_msg(!strstr(out, "Process context: none"), "%s", out);
	/* said once, with the attach hint, not as a warning of its own */
	ck_assert_msg(strstr(err, "may be owned by a different user (uid 65534)"), "%s",
		      err);
	ck_assert_msg(!strstr(err, "process context"), "%s", err);

	st = run_without_ptrace_cap(true, json, out, sizeof(out), err, sizeof(err));
	ck_assert_msg(st == 2, "exit %d: %s", st, err);
	ck_assert_msg(strstr(out,
			     "  \"process_context\": null,\n"
			     "  \"process_context_error\": \"cannot read the header at "
			     "0x"),
		      "%s", out);
}
END_TEST

/* ctxdump record there: it could not look for the layouts, so it says
 * that first, with the hint, not that the process defines none of them
 * (old: "process N defines none of otel_thread_ctx_v1, ...", then the
 * hint after the failed attach); the hint is given once. */
START_TEST(no_cap_sys_ptrace_record)
{
	static const char *const rec[] = {"record", "-o", "/dev/null", "-d", "1", NULL};
	static const char first[] =
		"ctxdump record: cannot look for otel_thread_ctx_v1, "
		"elastic_apm_profiling_correlation_tls_v1, "
		"custom_labels_current_set in process ";
	const char *hint = "may be owned by a different user (uid 65534)";
	char out[8192], err[4096], *second, *at;
	int st = run_without_ptrace_cap(true, rec, out, sizeof(out), err, sizeof(err));

	if (st == 99)
		return;
	ck_assert_msg(st == 2, "exit %d: %s", st, err);
	ck_assert_msg(strncmp(err, first, strlen(first)) == 0, "%s", err);
	second = strchr(err, '\n');
	ck_assert_msg(second && strstr(err, ": Permission denied; recording stacks "
					    "without trace context\n") < second,
		      "%s", err);
	/* the hint on the next line, and once */
	second++;
	at = strstr(second, hint);
	ck_assert_msg(at && at < strchr(second, '\n') && !strstr(at + 1, hint), "%s",
		      err);
	ck_assert_msg(!strstr(err, "defines none"), "%s", err);
	ck_assert_msg(strstr(err, "cannot stop process "), "%s", err);
}
END_TEST

TEST_SUITE(ctxdump_cli_suite)
{
	Suite *s = suite_create("ctxdump-cli");
	TCase *tc = tcase_create("cli");
	TCase *tp = tcase_create("process");

	tcase_add_test(tc, usage_errors);
	tcase_add_test(tc, zombie_target);
	tcase_add_test(tc, help_version);
	tcase_add_test(tc, no_such_process);
	tcase_add_test(tc, no_cap_sys_ptrace);
	tcase_add_test(tc, no_cap_sys_ptrace_pctx);
	tcase_add_test(tc, no_cap_sys_ptrace_symbol);
	tcase_add_test(tc, no_cap_sys_ptrace_record);
	tcase_add_test(tc, kernel_thread);
	suite_add_tcase(s, tc);

	tcase_set_timeout(tp, 120);
	tcase_add_test(tp, not_a_process);
	tcase_add_test(tp, no_symbol);
	tcase_add_test(tp, key_map_without_schema);
	tcase_add_test(tp, payload_outside_mapping);
	tcase_add_test(tp, writer_library_replaced);
	tcase_add_test(tp, records_text_and_json);
	tcase_add_loop_test(tp, long_command_line, 0, 3);
	tcase_add_loop_test(tp, padded_command_line, 0, 2);
	tcase_add_test(tp, escaping);
	tcase_add_test(tp, one_thread);
	tcase_add_test(tp, pid_option);
	tcase_add_test(tp, stacks_unusual);
	tcase_add_test(tp, stacks_demangle_bound_with_sigalrm_blocked);
	tcase_add_test(tp, dump_itself);
	tcase_add_test(tp, already_traced);
	tcase_add_test(tp, one_thread_traced);
	tcase_add_loop_test(tp, different_user, 0, 2);
	tcase_add_test(tp, churn_during_dump);
	tcase_add_test(tp, signals_to_ctxdump);
	tcase_add_test(tp, job_stopped_target);
	tcase_add_test(tp, stuck_thread);
	tcase_add_test(tp, stuck_thread_alone);
	tcase_add_test(tp, stuck_process);
	tcase_add_test(tp, cpu_starved_thread);
	tcase_add_test(tp, cpu_starved_past_wait);
	tcase_add_test(tp, signal_while_holding);
	suite_add_tcase(s, tp);
	return s;
}
