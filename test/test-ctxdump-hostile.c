/* SPDX-License-Identifier: Apache-2.0 */
/* ctxdump against targets that publish garbage (test/helpers/hostile-*.c):
 * records behind unmapped, inaccessible, non-canonical and wrapping
 * pointers,
 * attrs_data_size 65535, truncated entries, invalid UTF-8, ANSI escapes
 * and newlines in values, key indexes beyond the key map, a writer that
 * rewrites its records while they are read; broken, torn, oversized and
 * hostile process contexts; a symbol of the wrong type or size; records
 * of up to 65000 bytes whose repeated key is last set at their end; object
 * file names made of control bytes; a record in a userfaultfd range the
 * target never serves, whose read blocks while the threads are stopped
 * (ctxdump gives up after 30 s); a library the target truncates while
 * ctxdump reads it.  ctxdump must never crash or hang,
 * must print no raw control byte (stdout and stderr), must exit with the
 * status doc/ctxdump.1 documents and give a reason, and must leave the
 * target running. */
#include "test-prof.h"

#include <dirent.h>
#include <elf.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "thread-record.h"

#define RUN_TIMEOUT_MS test_ctxdump_run_ms()

/* ctxdump [args...] PID (up to 4 args; as test_ctxdump_argv() puts
 * them): exit status; it must exit by itself in time. */
static int
run_ctxdump(char **out, char **err, pid_t pid, const char *a1, ...)
{
	const char *args[6];
	char *argv[8], arg[16];
	va_list ap;
	int n = 0, st;

	va_start(ap, a1);
	for (const char *a = a1; a; a = va_arg(ap, const char *)) {
		ck_assert_int_lt(n, 4);
		args[n++] = a;
	}
	va_end(ap);
	snprintf(arg, sizeof(arg), "%d", (int)pid);
	args[n++] = arg;
	args[n] = NULL;
	test_ctxdump_argv(argv, 8, args);
	st = test_run_capture(argv, NULL, false, out, err, RUN_TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st), "ctxdump did not exit normally (status 0x%x)", st);
	return WEXITSTATUS(st);
}

/* No raw control byte but newlines, no C1 control, valid UTF-8. */
/* The UTF-8 length of a raw format character at s that makes a terminal
 * show text in another order or hides it (CVE-2021-42574): ALM, ZWSP..RLM,
 * LS..RLO, WJ, LRI..PDI, BOM; else 0.  s is valid UTF-8. */
static size_t
format_char_len(const unsigned char *s)
{
	if (s[0] == 0xd8 && s[1] == 0x9c)
		return 2;
	if (s[0] == 0xe2 && s[1] == 0x80 &&
	    ((s[2] >= 0x8b && s[2] <= 0x8f) || (s[2] >= 0xa8 && s[2] <= 0xae)))
		return 3;
	if (s[0] == 0xe2 && s[1] == 0x81 &&
	    (s[2] == 0xa0 || (s[2] >= 0xa6 && s[2] <= 0xa9)))
		return 3;
	if (s[0] == 0xef && s[1] == 0xbb && s[2] == 0xbf)
		return 3;
	return 0;
}

static void
assert_no_controls(const char *what, const char *s)
{
	size_t n = strlen(s), i;

	ck_assert_msg(trec_utf8_valid((const uint8_t *)s, n), "%s: invalid UTF-8",
		      what);
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		ck_assert_msg(c == '\n' || (c >= 0x20 && c != 0x7f),
			      "%s: raw control byte 0x%02x at %zu: %.*s", what, c, i,
			      (int)(n - i < 60 ? n - i : 60), s + i);
		ck_assert_msg(!(c == 0xc2 && (unsigned char)s[i + 1] >= 0x80 &&
				(unsigned char)s[i + 1] <= 0x9f),
			      "%s: raw C1 control at %zu", what, i);
		ck_assert_msg(!format_char_len((const unsigned char *)s + i),
			      "%s: raw format character at %zu: %.*s", what, i,
			      (int)(n - i < 60 ? n - i : 60), s + i);
	}
}

/* Every stderr line is a ctxdump message. */
static void
assert_messages(const char *err)
{
	const char *p = err;

	while (*p) {
		ck_assert_msg(strncmp(p, "ctxdump: ", 9) == 0, "stray stderr line: %s",
			      p);
		p = strchr(p, '\n');
		ck_assert_ptr_nonnull(p);
		p++;
	}
}

/* The output parses as JSON (python3, which meson needs anyway). */
static void
assert_json(const char *out)
{
	static const char script[] = "import json, sys\n"
				     "json.load(open(sys.argv[1], encoding='utf-8'))\n";
	char tmpl[] = "/tmp/ctxdump-hostile-XXXXXX", *err = NULL;
	char *argv[] = {"/usr/bin/python3", "-c", (char *)script, tmpl, NULL};
	int fd, st;

	if (access(argv[0], X_OK) != 0)
		return;
	fd = test_mkstemp(tmpl);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, out, strlen(out)), (ssize_t)strlen(out));
	close(fd);
	st = test_run_capture(argv, NULL, false, NULL, &err, 30000);
	unlink(tmpl);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "invalid JSON: %s", err);
	free(err);
}

/* Every thread of pid is out of ptrace-stop and job-stop. */
static void
assert_running(pid_t pid)
{
	char path[64];
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	for (int tries = 0;; tries++) {
		bool stopped = false;

		d = opendir(path);
		ck_assert_ptr_nonnull(d);
		while ((de = readdir(d)) != NULL) {
			char st;

			if (de->d_name[0] == '.')
				continue;
			st = test_proc_state((pid_t)atoi(de->d_name));
			stopped |= st == 't' || st == 'T';
		}
		closedir(d);
		if (!stopped)
			return;
		ck_assert_msg(tries < 500, "target %d left stopped", (int)pid);
		usleep(2000);
	}
}

struct target {
	struct test_child c;
	pid_t pid;
	char cases[16][64];
	pid_t tids[16];
	unsigned n;
};

/* Start argv with env added to the environment (NULL: none), with
 * LD_PRELOAD=$CTXSHIM_LIB if preload, and wait for its READY line. */
static void
target_start_env(struct target *t, char *const argv[], char *const env[], bool preload)
{
	char line[2048]; /* threads --wait N: "READY" and N + 1 ids */

	memset(t, 0, sizeof(*t));
	test_child_start(&t->c, argv, env, preload);
	for (;;) {
		test_child_readline(&t->c, line, sizeof(line), 10000);
		if (strncmp(line, "CASE ", 5) == 0 && t->n < 16) {
			char *sp = strrchr(line, ' ');

			*sp = '\0';
			snprintf(t->cases[t->n], sizeof(t->cases[0]), "%.63s",
				 line + 5);
			t->tids[t->n++] = (pid_t)atoi(sp + 1);
		} else if (strncmp(line, "READY ", 6) == 0) {
			t->pid = (pid_t)atoi(line + 6);
			break;
		}
	}
	ck_assert_int_eq(t->pid, t->c.pid);
}

static void
target_start_as(struct target *t, char *const argv[], bool preload)
{
	target_start_env(t, argv, NULL, preload);
}

static void
target_start(struct target *t, char *const argv[])
{
	target_start_as(t, argv, false);
}

static void
target_finish(struct target *t)
{
	int st;

	assert_running(t->pid);
	st = test_child_finish(&t->c, 10000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "target status 0x%x", st);
}

static pid_t
case_tid(const struct target *t, const char *name)
{
	for (unsigned i = 0; i < t->n; i++)
		if (strcmp(t->cases[i], name) == 0)
			return t->tids[i];
	ck_abort_msg("no case %s", name);
	return 0;
}

/* The text block of thread tid, up to the next "Thread " line. */
static char *
text_thread(const char *out, pid_t tid)
{
	char key[32];
	const char *s, *e;

	snprintf(key, sizeof(key), "Thread %d \"", (int)tid);
	s = strstr(out, key);
	ck_assert_msg(s, "thread %d missing: %s", (int)tid, out);
	e = strstr(s + 1, "\nThread ");
	return strndup(s, e ? (size_t)(e - s) : strlen(s));
}

/* The output goes to stderr, not into the message: Check refuses a
 * message of more than a few KiB ("Message string too long") and then
 * reports that instead of the missing text. */
static void
expect_in(const char *hay, const char *needle)
{
	if (strstr(hay, needle))
		return;
	fprintf(stderr, "ctxdump's output:\n%s\n", hay);
	ck_abort_msg("no '%s' in ctxdump's output (on stderr)", needle);
}

/* ---- garbage records ---- */

START_TEST(garbage_records)
{
	char *argv[] = {(char *)test_helper_path("hostile-records"),
			"--tag=\x1b]0;pwned\x07\n\x9b\xe2\x81\xa7", NULL};
	struct target t;
	unsigned run;

	target_start(&t, argv);
	ck_assert_uint_eq(t.n, 15);
	for (run = 0; run < 12; run++) {
		char *out, *err, *blk;
		bool json = run & 1;
		int r = json ? run_ctxdump(&out, &err, t.pid, "-j", NULL)
			     : run_ctxdump(&out, &err, t.pid, NULL);
		const char *p;
		unsigned n_bad = 0;

		/* unreadable records: partial, one reason per thread */
		ck_assert_msg(r == 1, "exit %d: %s", r, err);
		assert_no_controls("stdout", out);
		assert_no_controls("stderr", err);
		assert_messages(err);
		for (p = err; (p = strstr(p, "ctxdump: tid ")) != NULL; p++) {
			pid_t tid = (pid_t)atoi(p + 13);

			ck_assert_msg(tid == case_tid(&t, "unmapped") ||
					      tid == case_tid(&t, "guard") ||
					      tid == case_tid(&t, "noncanon") ||
					      tid == case_tid(&t, "minus1") ||
					      tid == case_tid(&t, "flip"),
				      "unexpected: %s", err);
			expect_in(p, "cannot read the record at 0x");
			n_bad += tid != case_tid(&t, "flip");
		}
		ck_assert_uint_eq(n_bad, 4);
		if (json) {
			assert_json(out);
			expect_in(out, "\"--tag=\\u001b]0;pwned\\u0007\\n\\ufffd"
				       "\\u2067\"");
			/* each range's last character escaped, the next
			 * one not; outside the BMP as a surrogate pair */
			expect_in(out, "\"value\": \"rlo\\u202ecba lri\\u2066 "
				       "zw\\u200b\\ufeff kept \xd7\xa9\xd7\x9c "
				       "us\\u001f apc\\u009f nbsp\xc2\xa0 ns\\u206f "
				       "sup\xe2\x81\xb0 tag\\udb40\\udc7f "
				       "vs\xf3\xa0\x82\x80 max\xf4\x8f\xbf\xbf\"");
			expect_in(out,
				  "\"value\": \"\\u001b[2J\\u001b[31mred\\u001b[0m\"");
			expect_in(out, "\"value\": \"line1\\r\\nline2\\nline3\"");
			expect_in(out, "\"value\": \"nul\\u0000after\"");
			expect_in(out, "\"comm\": \"x\\u001b[31m\\n\\ufffd\\\"y\"");
			expect_in(out, "\"attrs_data_size\": 65535,\n"
				       "        \"attrs_truncated\": true");
			/* an entry that runs past attrs_data_size */
			expect_in(out, "\"attrs_data_size\": 10,\n"
				       "        \"attrs_truncated\": true");
			/* a record being written: none of it is shown */
			expect_in(out, "\"valid\": 0,\n        \"trace_id\": null");
			ck_assert_msg(!strstr(out, "stale"), "%s", out);
			free(out);
			free(err);
			continue;
		}
		expect_in(out, "--tag=\\x1b]0;pwned\\x07\\x0a\\x9b\\xe2\\x81\\xa7\n");
		blk = text_thread(out, case_tid(&t, "edge-65535"));
		expect_in(blk, "    #1=abcde\n    (attributes truncated: "
			       "attrs_data_size=65535)");
		free(blk);
		blk = text_thread(out, case_tid(&t, "huge-65535"));
		expect_in(blk, "(attributes truncated: attrs_data_size=65535)");
		free(blk);
		blk = text_thread(out, case_tid(&t, "truncated"));
		expect_in(blk,
			  "    #0=abc\n    (attributes truncated: attrs_data_size=10)");
		free(blk);
		blk = text_thread(out, case_tid(&t, "utf8"));
		expect_in(blk, "#0=\\x80x\n    #1=\\xc0\\xaf\n    #2=\\xed\\xa0\\x80\n"
			       "    #3=\\xf4\\x90\\x80\\x80\n    #4=ok\\xe2\\x82\n"
			       "    #5=\\xed\\xbf\\xbf\n    #6=\\xe0\\x9f\\xbf\n"
			       "    #7=\\xf0\\x8f\\xbf\\xbf");
		free(blk);
		blk = text_thread(out, case_tid(&t, "ansi"));
		expect_in(blk, "#0=\\x1b[2J\\x1b[31mred\\x1b[0m\n");
		expect_in(blk, "#1=line1\\x0d\\x0aline2\\x0aline3\n");
		expect_in(blk, "#3=c1\\x9b31m and \\xc2\\x9b31m\n");
		expect_in(blk, "#5=quote\"back\\\\slash\n");
		expect_in(blk, "#7=rlo\\xe2\\x80\\xaecba lri\\xe2\\x81\\xa6 "
			       "zw\\xe2\\x80\\x8b\\xef\\xbb\\xbf kept \xd7\xa9\xd7\x9c "
			       "us\\x1f apc\\xc2\\x9f nbsp\xc2\xa0 ns\\xe2\\x81\\xaf "
			       "sup\xe2\x81\xb0 tag\\xf3\\xa0\\x81\\xbf "
			       "vs\xf3\xa0\x82\x80 max\xf4\x8f\xbf\xbf");
		free(blk);
		blk = text_thread(out, case_tid(&t, "keys"));
		expect_in(blk, "#2=two-again\n    #200=two-hundred\n    #255=max\n    "
			       "#0=zero");
		free(blk);
		blk = text_thread(out, case_tid(&t, "valid7"));
		expect_in(blk, "not valid: valid=7)");
		free(blk);
		blk = text_thread(out, case_tid(&t, "valid0"));
		expect_in(blk, "not valid: valid=0)");
		ck_assert_msg(!strstr(blk, "stale"), "%s", blk);
		free(blk);
		blk = text_thread(out, case_tid(&t, "comm"));
		expect_in(blk, "\"x\\x1b[31m\\x0a\\xff\\\"y\"");
		free(blk);
		blk = text_thread(out, case_tid(&t, "misaligned"));
		expect_in(blk, "    #0=odd");
		free(blk);
		blk = text_thread(out, case_tid(&t, "minus1"));
		expect_in(blk,
			  "(not read: cannot read the record at 0xffffffffffffffff");
		free(blk);
		free(out);
		free(err);
		assert_running(t.pid);
	}
	target_finish(&t);
}
END_TEST

/* ---- broken process contexts ---- */

struct pctx_case {
	const char *mode;
	int status;         /* -1: 0 or 1 */
	const char *reason; /* in stderr (NULL: stderr empty) */
	const char *out;    /* in stdout */
	const char *detail; /* in stderr too, after reason (NULL: none) */
};

/* A context that is there (an OTEL_CTX mapping) but cannot be read is
 * "not read", with why, not "none" (old: "Process context: none"); none of
 * it is shown. */
#define PCTX_NOT_READ "Process context: (not read: "

static const struct pctx_case pctx_cases[] = {
	/* the reason says what was wrong, where, with the values read */
	{"torn", 1, "cannot read the process context: the header at 0x", PCTX_NOT_READ,
	 "still said \"being updated\" "
	 "(monotonic_published_at_ns 0) after 8 reads; ignoring it"},
	{"unwritten", 1, "cannot read the process context: the header at 0x",
	 PCTX_NOT_READ,
	 " was still empty (not written yet) after 8 reads; ignoring it"},
	{"oversized", 1, "cannot read the process context: the header at 0x",
	 PCTX_NOT_READ,
	 " has payload_size 2097152, more than the 1048576 bytes ctxdump reads"},
	{"size-max", 1, "cannot read the process context: the header at 0x",
	 PCTX_NOT_READ,
	 " has payload_size 4294967295, more than the 1048576 bytes ctxdump reads"},
	{"unmapped", 1, "cannot read the process context: its payload (100 bytes at 0x",
	 PCTX_NOT_READ, ") is not readable: Bad address (8 attempts)"},
	{"malformed", 1, "cannot read the process context: its payload (8 bytes at 0x",
	 PCTX_NOT_READ, ") is not a valid ProcessContext protobuf"},
	{"bad-version", 1, "cannot read the process context: the header at 0x",
	 PCTX_NOT_READ, " has version 3 (ctxdump reads version 2)"},
	{"deep", 1, "cannot read the process context: its payload (", PCTX_NOT_READ,
	 ") is not a valid ProcessContext protobuf"},
	{"exec", 0, NULL, "Process context: none\n", NULL},
	{"signature", 1, "cannot read the process context: the mapping at 0x",
	 PCTX_NOT_READ, " does not start with the signature OTEL_CTX"},
	/* exit 0: everything was read, but the warning says what it means */
	{"schema", 0, "process ", "Schema: tls_v9, key map: k0, k1\n",
	 " names the thread-context schema \"tls_v9\" (threadlocal.schema_version), "
	 "which ctxdump does not know"},
	{"strings", 0, NULL,
	 "Service: \\x1b[2Jevil\\x0aservice\\x0d (instance "
	 "\\xff\\xfe\\xc3(\\x9b31m)\n",
	 NULL},
	{"churn", -1, NULL, "    trace_id=33333333333333333333333333333333", NULL},
};

START_TEST(broken_process_context)
{
	const struct pctx_case *pc = &pctx_cases[_i];
	char *argv[] = {(char *)test_helper_path("hostile-pctx"), (char *)pc->mode,
			NULL};
	struct target t;
	unsigned run, runs = strcmp(pc->mode, "churn") == 0 ? 10 : 2;

	target_start(&t, argv);
	for (run = 0; run < runs; run++) {
		bool json = run & 1;
		char *out, *err;
		int r = json ? run_ctxdump(&out, &err, t.pid, "-j", NULL)
			     : run_ctxdump(&out, &err, t.pid, NULL);

		assert_no_controls("stdout", out);
		assert_no_controls("stderr", err);
		assert_messages(err);
		if (pc->status >= 0)
			ck_assert_msg(r == pc->status, "%s: exit %d: %s", pc->mode, r,
				      err);
		else
			ck_assert_msg(r == 0 || r == 1, "%s: exit %d: %s", pc->mode, r,
				      err);
		if (pc->reason)
			expect_in(err, pc->reason);
		if (pc->detail)
			expect_in(err, pc->detail);
		else if (r == 0)
			ck_assert_msg(!*err, "%s: %s", pc->mode, err);
		else
			expect_in(err, "cannot read the process context: ");
		if (json) {
			assert_json(out);
			expect_in(out,
				  "\"trace_id\": \"33333333333333333333333333333333\"");
			/* null as before, and why in a key of its own */
			if (strcmp(pc->out, PCTX_NOT_READ) == 0)
				expect_in(out, "  \"process_context\": null,\n"
					       "  \"process_context_error\": \"");
			else if (pc->status == 0)
				ck_assert_msg(!strstr(out, "process_context_error"),
					      "%s: %s", pc->mode, out);
		} else {
			expect_in(out, pc->out);
			expect_in(out, "    trace_id=33333333333333333333333333333333");
			if (strcmp(pc->out, PCTX_NOT_READ) == 0)
				ck_assert_msg(!strstr(out, "\nService: "), "%s: %s",
					      pc->mode, out);
		}
		if (strcmp(pc->mode, "strings") == 0 && !json) {
			/* 300 keys: the first 256 are kept, index 255 is named */
			expect_in(out, ", k255\\x1b[7m\\x0a\\xc0\n");
			expect_in(out, "    k1\\x1b[1m\\x0a\\xc0=/x\n");
			expect_in(out, "    k255\\x1b[7m\\x0a\\xc0=max\n");
		}
		free(out);
		free(err);
	}
	target_finish(&t);
}
END_TEST

/* A key map that names an index "" (hostile-pctx empty-key, index 0 of the
 * record's GET): the dump shows it as "#0", as an index the map lacks, and
 * so must a recording, whose report then leaves it out of an OTLP span
 * (an attribute key must not be empty) and counts it as dropped, as it
 * does index 255 (no such key).  Old: the recorder took "" as the key
 * name, and the context span carried {"key":"","value":...}. */
START_TEST(empty_key_name)
{
	char *targv[] = {(char *)test_helper_path("hostile-pctx"), "empty-key", NULL};
	char dir[] = "/tmp/ctxdump-hostile-XXXXXX", prof[64], errf[64], pid[16];
	const char *rargs[] = {"-o", prof, pid, NULL};
	const char *pargs[] = {"report", "--spans", "--context-spans", prof, NULL};
	char *argv[16], *out, *err;
	struct target t;
	int r, st;

	target_start(&t, targv);
	r = run_ctxdump(&out, &err, t.pid, NULL);
	ck_assert_msg(r == 0, "exit %d: %s", r, err);
	expect_in(out, "key map: , url.path\n");
	expect_in(out, "    #0=GET\n    url.path=/x\n    #255=max\n");
	free(out);
	free(err);

	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	snprintf(pid, sizeof(pid), "%d", (int)t.pid);
	snprintf(prof, sizeof(prof), "%s/out.prof", dir);
	snprintf(errf, sizeof(errf), "%s/rec.err", dir);
	r = open(errf, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ck_assert_int_ge(r, 0);
	close(r);
	/* Until rounds are recorded: a round in which the target got no CPU
	 * in time is skipped (exit 1), and a recording of -d0.2 could hold
	 * none (old: "record 0x100" now and then on a loaded machine). */
	prof_record_rounds(prof, errf, rargs, 30000);
	ck_assert_int_eq(unlink(errf), 0);
	target_finish(&t);

	test_ctxdump_argv(argv, 16, pargs);
	st = test_run_capture(argv, NULL, false, &out, &err, RUN_TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "report 0x%x: %s", st,
		      err);
	expect_in(out, "{\"key\":\"url.path\",\"value\":{\"stringValue\":\"/x\"}}");
	ck_assert_msg(!strstr(out, "\"key\":\"\""), "an empty key: %s", out);
	expect_in(out, "\"droppedAttributesCount\":2");
	free(out);
	free(err);
	ck_assert_int_eq(unlink(prof), 0);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST
/* ---- the symbol ---- */

START_TEST(wrong_symbol)
{
	static const char *const kinds[] = {"object", "size", "array", "func"};
	/* what it is, not "no loaded object defines" (old) */
	static const char *const as[] = {
		" as a global (not thread-local) object of 8 bytes, not as the "
		"8-byte thread-local pointer",
		" as a thread-local of 4 bytes,", " as a thread-local of 64 bytes,",
		" as a function,"};
	/* and so on stdout and in JSON, where it was "not found in any
	 * loaded object" and "symbol": null alone (old) */
	static const char *const line[] = {
		"(as a global (not thread-local) object of 8 bytes, STT_OBJECT)",
		"(as a thread-local of 4 bytes, STT_TLS)",
		"(as a thread-local of 64 bytes, STT_TLS)",
		"(as a function, STT_FUNC)"};
	char name[32], want[PATH_MAX + 256], *out, *err;
	struct target t;

	snprintf(name, sizeof(name), "hostile-sym-%s", kinds[_i]);
	{
		char *argv[] = {(char *)test_helper_path(name), NULL};

		target_start(&t, argv);
	}
	ck_assert_int_eq(run_ctxdump(&out, &err, t.pid, NULL), 2);
	expect_in(err, "defines otel_thread_ctx_v1");
	expect_in(err, as[_i]);
	snprintf(want, sizeof(want),
		 "\nSymbol: otel_thread_ctx_v1 defined in %s but not as the 8-byte "
		 "thread-local pointer %s\n",
		 test_helper_path(name), line[_i]);
	expect_in(out, want);
	ck_assert_msg(!strstr(out, "not found"), "%s", out);
	assert_messages(err);
	free(out);
	free(err);
	ck_assert_int_eq(run_ctxdump(&out, &err, t.pid, "-j", NULL), 2);
	assert_json(out);
	expect_in(out, "\"symbol\": null");
	snprintf(want, sizeof(want),
		 "\"symbol_error\": \"defined in %s but not as the 8-byte "
		 "thread-local pointer %s\"",
		 test_helper_path(name), line[_i]);
	expect_in(out, want);
	free(out);
	free(err);
	target_finish(&t);
}
END_TEST

/* The wrongly-typed otel_thread_ctx_v1 next to another layout
 * (libwelastic.so preloaded): the symbol line still names it, but the
 * other layout is read, with no warning and exit status 0 -- not the 2
 * of a process with nothing to read, which README.md said for any wrong
 * definition. */
START_TEST(wrong_symbol_other_layout)
{
	char name[] = "hostile-sym-func", lib[PATH_MAX], env0[PATH_MAX + 16];
	char want[PATH_MAX + 256], *out, *err;
	char *argv[] = {NULL, NULL}, *env[] = {env0, NULL};
	struct target t;

	snprintf(lib, sizeof(lib), "%s", test_helper_path("libwelastic.so"));
	snprintf(env0, sizeof(env0), "LD_PRELOAD=%s", lib);
	argv[0] = (char *)test_helper_path(name);
	target_start_env(&t, argv, env, false);
	ck_assert_int_eq(run_ctxdump(&out, &err, t.pid, NULL), 0);
	snprintf(want, sizeof(want),
		 "\nSymbol: otel_thread_ctx_v1 defined in %s but not as the 8-byte "
		 "thread-local pointer (as a function, STT_FUNC)\n",
		 test_helper_path(name));
	expect_in(out, want);
	snprintf(want, sizeof(want),
		 "\nSymbol: elastic_apm_profiling_correlation_tls_v1 in %s ", lib);
	expect_in(out, want);
	ck_assert_msg(!strstr(err, "cannot read it"), "%s", err);
	assert_messages(err);
	free(out);
	free(err);
	ck_assert_int_eq(run_ctxdump(&out, &err, t.pid, "-j", NULL), 0);
	assert_json(out);
	expect_in(out, "\"symbol\": null");
	expect_in(out, "\"symbol_error\": \"defined in ");
	free(out);
	free(err);
	target_finish(&t);
}
END_TEST

/* The same programs under the shim: the shim's definition is the one
 * valid one, and the shim is passive (test-preload-process-ctx.c), so
 * there is no context, whatever the program holds in its own variable.
 * The shim's accesses used to go through the exported name and bind to
 * the program's definition: the object and the function killed the
 * program before it started, and ctxdump read the shim's variable where
 * the program's was (for the 4-byte one, an address made of the record's
 * low half and the thread descriptor's: "cannot read the record", exit 1;
 * for the array, its first element: the program's record, shown as the
 * thread's context).  ctxdump names the wrong definition in one line on
 * stderr and in "symbol_note", with the exit status of the dump: it is
 * why the slot shown holds no context (old: nothing said, stderr empty,
 * no "symbol_note"). */
START_TEST(wrong_symbol_under_shim)
{
	static const char *const kinds[] = {"object", "size", "array", "func"};
	static const char *const as[] = {
		"a global (not thread-local) object of 8 bytes (STT_OBJECT)",
		"a thread-local of 4 bytes (STT_TLS)",
		"a thread-local of 64 bytes (STT_TLS)", "a function (STT_FUNC)"};
	static const char *const json_as[] = {
		"(as a global (not thread-local) object of 8 bytes, STT_OBJECT)",
		"(as a thread-local of 4 bytes, STT_TLS)",
		"(as a thread-local of 64 bytes, STT_TLS)",
		"(as a function, STT_FUNC)"};
	char name[32], want[2 * PATH_MAX + 256], note[2 * PATH_MAX + 256], *out, *err;
	struct target t;

	snprintf(name, sizeof(name), "hostile-sym-%s", kinds[_i]);
	{
		char *argv[] = {(char *)test_helper_path(name), NULL};

		target_start_as(&t, argv, true);
	}
	snprintf(note, sizeof(note),
		 "ctxdump: %s also defines otel_thread_ctx_v1, as %s; showing the "
		 "8-byte thread-local pointer in %s\n",
		 test_helper_path(name), as[_i], test_shim_path());
	ck_assert_int_eq(run_ctxdump(&out, &err, t.pid, NULL), 0);
	snprintf(want, sizeof(want),
		 "\nSymbol: otel_thread_ctx_v1 in %s (tlsdesc-static)\n",
		 test_shim_path());
	expect_in(out, want);
	expect_in(out, "\n    (no context)\n");
	ck_assert_msg(!strstr(out, "trace_id="), "%s", out);
	ck_assert_msg(!strstr(out, "also defin"), "%s", out);
	/* that line alone, once */
	ck_assert_str_eq(err, note);
	free(out);
	free(err);
	ck_assert_int_eq(run_ctxdump(&out, &err, t.pid, "-j", NULL), 0);
	assert_json(out);
	snprintf(want, sizeof(want), "\"module\": \"%s\",", test_shim_path());
	expect_in(out, want);
	snprintf(want, sizeof(want),
		 "\"symbol_note\": \"also defined in %s but not as the 8-byte "
		 "thread-local pointer %s\"",
		 test_helper_path(name), json_as[_i]);
	expect_in(out, want);
	ck_assert_msg(!strstr(out, "symbol_error"), "%s", out);
	ck_assert_str_eq(err, note);
	free(out);
	free(err);
	target_finish(&t);
}
END_TEST

/* The program's path is the target's too: a copy of the function one
 * named with an escape sequence is named escaped, on stderr and in JSON. */
START_TEST(wrong_symbol_under_shim_named)
{
	char dir[] = "/tmp/ctxdump-hostile-XXXXXX", path[PATH_MAX],
	     want[PATH_MAX + 256];
	char *out, *err, *cp_err = NULL;
	struct target t;
	int st;

	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/evil\x1b[7mprog", dir);
	{
		char *cp[] = {"/bin/cp", (char *)test_helper_path("hostile-sym-func"),
			      path, NULL};

		st = test_run_capture(cp, NULL, false, NULL, &cp_err, 30000);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "cp: %s", cp_err);
		free(cp_err);
	}
	{
		char *argv[] = {path, NULL};

		target_start_as(&t, argv, true);
	}
	ck_assert_int_eq(run_ctxdump(&out, &err, t.pid, NULL), 0);
	assert_no_controls("stdout", out);
	assert_no_controls("stderr", err);
	assert_messages(err);
	snprintf(want, sizeof(want),
		 "ctxdump: %s/evil\\x1b[7mprog also defines otel_thread_ctx_v1, as a "
		 "function (STT_FUNC); showing the 8-byte thread-local pointer in %s\n",
		 dir, test_shim_path());
	ck_assert_str_eq(err, want);
	free(out);
	free(err);
	ck_assert_int_eq(run_ctxdump(&out, &err, t.pid, "-j", NULL), 0);
	assert_no_controls("stdout", out);
	assert_json(out);
	snprintf(want, sizeof(want),
		 "\"symbol_note\": \"also defined in %s/evil\\u001b[7mprog but not as "
		 "the 8-byte thread-local pointer (as a function, STT_FUNC)\"",
		 dir);
	expect_in(out, want);
	free(out);
	free(err);
	target_finish(&t);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* A library that exports the name as a function, preloaded before the
 * shim (a lookup by name finds it first) or after it (the shim's
 * RTLD_NEXT lookup does): the shim is passive either way, and ctxdump
 * names the library beside the shim's valid variable (old: nothing said,
 * stderr empty, no "symbol_note"). */
START_TEST(wrong_symbol_library_beside_shim)
{
	char lib[PATH_MAX], env0[2 * PATH_MAX + 16], want[2 * PATH_MAX + 256];
	char *argv[] = {NULL, "--wait", "1", NULL}, *env[] = {env0, NULL};
	char *out, *err;
	struct target t;

	snprintf(lib, sizeof(lib), "%s", test_helper_path("libsym-func.so"));
	if (_i == 0)
		snprintf(env0, sizeof(env0), "LD_PRELOAD=%s %s", lib, test_shim_path());
	else
		snprintf(env0, sizeof(env0), "LD_PRELOAD=%s %s", test_shim_path(), lib);
	argv[0] = (char *)test_helper_path("threads");
	target_start_env(&t, argv, env, false);
	ck_assert_int_eq(run_ctxdump(&out, &err, t.pid, NULL), 0);
	snprintf(want, sizeof(want),
		 "\nSymbol: otel_thread_ctx_v1 in %s (tlsdesc-static)\n",
		 test_shim_path());
	expect_in(out, want);
	ck_assert_msg(!strstr(out, "trace_id="), "%s", out);
	snprintf(want, sizeof(want),
		 "ctxdump: %s also defines otel_thread_ctx_v1, as a function "
		 "(STT_FUNC); showing the 8-byte thread-local pointer in %s\n",
		 lib, test_shim_path());
	ck_assert_str_eq(err, want);
	free(out);
	free(err);
	ck_assert_int_eq(run_ctxdump(&out, &err, t.pid, "-j", NULL), 0);
	assert_json(out);
	snprintf(want, sizeof(want),
		 "\"symbol_note\": \"also defined in %s but not as the 8-byte "
		 "thread-local pointer (as a function, STT_FUNC)\"",
		 lib);
	expect_in(out, want);
	free(out);
	free(err);
	target_finish(&t);
}
END_TEST

/* A thread of a raw clone() with a thread pointer of 0 has no TLS: said
 * for that thread (old: "cannot read the thread's DTV: Invalid argument",
 * for a local-exec variable that needs no DTV; and "[elastic] (not read:
 * Invalid argument)" for its other layout), the others read. */
START_TEST(thread_without_tls)
{
	char *argv[] = {(char *)test_helper_path("hostile-clone"), NULL};
	char *out, *err, want[160];
	struct target t;

	target_start(&t, argv);
	ck_assert_int_eq(run_ctxdump(&out, &err, t.pid, NULL), 1);
	snprintf(want, sizeof(want), "tid %d: the thread has no thread pointer",
		 (int)case_tid(&t, "bare"));
	expect_in(err, want);
	ck_assert_msg(!strstr(err, "DTV"), "%s", err);
	/* nor an error for its other layout (the helper's Elastic buffer) */
	ck_assert_msg(!strstr(out, "Invalid argument"), "%s", out);
	expect_in(out, "trace_id=33333333333333333333333333333333");
	assert_messages(err);
	free(out);
	free(err);
	target_finish(&t);
}
END_TEST

/* How often needle occurs in hay. */
static unsigned
count_in(const char *hay, const char *needle)
{
	unsigned n = 0;

	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

/* Two raw clone() threads without CLONE_SETTLS run on the main thread's
 * thread pointer: the main thread's contexts (the OTEP record and the
 * Elastic buffer) are its own, the other threads have none (old: all
 * three showed the main thread's, exit status 0).  Glibc's thread
 * descriptor at the thread pointer names the owner, also for --tid,
 * where there is no other thread to compare with. */
START_TEST(thread_on_shared_thread_pointer)
{
	char *argv[] = {(char *)test_helper_path("hostile-clone"), "shared", NULL};
	char *out, *err, *blk, want[200], tid_arg[16];
	struct target t;
	pid_t sh[2];

	target_start(&t, argv);
	sh[0] = case_tid(&t, "shared1");
	sh[1] = case_tid(&t, "shared2");
	ck_assert_int_eq(run_ctxdump(&out, &err, t.pid, NULL), 1);
	assert_messages(err);
	for (int i = 0; i < 2; i++) {
		snprintf(want, sizeof(want),
			 "ctxdump: tid %d: shares the thread pointer of thread %d, "
			 "whose TLS it is: no TLS of its own",
			 (int)sh[i], (int)t.pid);
		expect_in(err, want);
		blk = text_thread(out, sh[i]);
		ck_assert_msg(!strstr(blk, "trace_id="), "%s", out);
		expect_in(blk, "(not read: shares the thread pointer of thread ");
		free(blk);
	}
	blk = text_thread(out, t.pid);
	expect_in(blk, "trace_id=33333333333333333333333333333333");
	expect_in(blk, "[elastic] trace_id=44444444444444444444444444444444");
	free(blk);
	ck_assert_uint_eq(count_in(out, "trace_id="), 2);
	free(out);
	free(err);

	ck_assert_int_eq(run_ctxdump(&out, &err, t.pid, "-j", NULL), 1);
	assert_json(out);
	snprintf(want, sizeof(want), "\"thread_pointer_owner\": %d", (int)t.pid);
	ck_assert_uint_eq(count_in(out, want), 2);
	ck_assert_uint_eq(count_in(out, "\"thread_pointer_owner\""), 2);
	ck_assert_uint_eq(count_in(out, "\"trace_id\""), 2);
	free(out);
	free(err);

	snprintf(tid_arg, sizeof(tid_arg), "%d", (int)sh[0]);
	ck_assert_int_eq(run_ctxdump(&out, &err, t.pid, "-t", tid_arg, NULL), 1);
	snprintf(want, sizeof(want),
		 "tid %d: glibc's thread descriptor at its thread pointer is "
		 "thread %d's",
		 (int)sh[0], (int)t.pid);
	expect_in(err, want);
	ck_assert_msg(!strstr(out, "trace_id="), "%s", out);
	free(out);
	free(err);
	/* the owner alone: its contexts, nothing said */
	snprintf(tid_arg, sizeof(tid_arg), "%d", (int)t.pid);
	ck_assert_int_eq(run_ctxdump(&out, &err, t.pid, "-t", tid_arg, NULL), 0);
	expect_in(out, "trace_id=33333333333333333333333333333333");
	ck_assert_str_eq(err, "");
	free(out);
	free(err);
	target_finish(&t);
}
END_TEST

/* The same with one raw clone() thread: two threads on one thread
 * pointer are the fewest that share it. */
START_TEST(thread_pair_on_shared_thread_pointer)
{
	char *argv[] = {(char *)test_helper_path("hostile-clone"), "pair", NULL};
	char *out, *err, *blk, want[200];
	struct target t;
	pid_t sh;

	target_start(&t, argv);
	sh = case_tid(&t, "pair");
	ck_assert_int_eq(run_ctxdump(&out, &err, t.pid, NULL), 1);
	assert_messages(err);
	snprintf(want, sizeof(want),
		 "ctxdump: tid %d: shares the thread pointer of thread %d, "
		 "whose TLS it is: no TLS of its own",
		 (int)sh, (int)t.pid);
	expect_in(err, want);
	blk = text_thread(out, sh);
	ck_assert_msg(!strstr(blk, "trace_id="), "%s", out);
	free(blk);
	blk = text_thread(out, t.pid);
	expect_in(blk, "trace_id=33333333333333333333333333333333");
	free(blk);
	ck_assert_uint_eq(count_in(out, "trace_id="), 2);
	free(out);
	free(err);
	target_finish(&t);
}
END_TEST

/* The same in a PID namespace of its own, as in a container dumped from
 * the host: glibc's descriptor holds the tid of that namespace (1 for the
 * main thread), not the one ctxdump sees, so the namespace's is compared
 * (old: whose TLS it is "cannot be told", the main thread's context lost
 * too; and with -t on a sharer, the main thread's record shown as the
 * sharer's own, exit 0).  Skipped where unshare(1) may not make one. */
START_TEST(shared_thread_pointer_in_pid_namespace)
{
	char *argv[] = {"/usr/bin/unshare", "--pid", "--fork", NULL, "shared", NULL};
	char path[64], line[256], tid_arg[16], *out, *err, *blk;
	pid_t pid = 0, tids[3];
	struct test_child c;
	unsigned n = 0;
	DIR *dir;
	struct dirent *e;
	FILE *f;

	if (system("unshare --pid --fork true 2>/dev/null") != 0) {
		fprintf(stderr, "shared_thread_pointer_in_pid_namespace: skipped "
				"(unshare --pid is not allowed here)\n");
		return;
	}
	argv[3] = (char *)test_helper_path("hostile-clone");
	test_child_start(&c, argv, NULL, false);
	test_child_expect(&c, "READY ", line, sizeof(line), 10000);
	/* the helper is unshare's child, pid 1 of its namespace */
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)c.pid,
		 (int)c.pid);
	f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%d", &pid), 1);
	fclose(f);
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	ck_assert_ptr_nonnull(dir);
	while ((e = readdir(dir)))
		if (atoi(e->d_name) > 0 && n < 3)
			tids[n++] = (pid_t)atoi(e->d_name);
	closedir(dir);
	ck_assert_uint_eq(n, 3);

	ck_assert_int_eq(run_ctxdump(&out, &err, pid, NULL), 1);
	blk = text_thread(out, pid);
	expect_in(blk, "trace_id=33333333333333333333333333333333");
	free(blk);
	ck_assert_uint_eq(count_in(out, "trace_id="), 2);
	ck_assert_uint_eq(count_in(err, "shares the thread pointer of thread "), 2);
	free(out);
	free(err);
	for (unsigned i = 0; i < n; i++) {
		if (tids[i] == pid)
			continue;
		snprintf(tid_arg, sizeof(tid_arg), "%d", (int)tids[i]);
		ck_assert_int_eq(run_ctxdump(&out, &err, pid, "-t", tid_arg, NULL), 1);
		expect_in(err, "glibc's thread descriptor at its thread pointer is "
			       "thread ");
		ck_assert_msg(!strstr(out, "trace_id="), "%s", out);
		free(out);
		free(err);
	}
	ck_assert_int_eq(test_child_finish(&c, 10000), 0);
}
END_TEST

/* Three raw clone() threads on one thread pointer into a copy of the
 * main thread's TLS: glibc's descriptor there names the main thread,
 * which is not one of them, so whose TLS it is cannot be told and none
 * shows the copied contexts (old: all showed the main thread's). */
START_TEST(threads_on_copied_thread_pointer)
{
	char *argv[] = {(char *)test_helper_path("hostile-clone"), "copied", NULL};
	char *out, *err, want[200];
	struct target t;
	pid_t c[3];

	target_start(&t, argv);
	c[0] = case_tid(&t, "copy1");
	c[1] = case_tid(&t, "copy2");
	c[2] = case_tid(&t, "copy3");
	ck_assert_int_eq(run_ctxdump(&out, &err, t.pid, NULL), 1);
	assert_messages(err);
	for (int i = 0; i < 3; i++) {
		snprintf(want, sizeof(want),
			 "tid %d: shares its thread pointer with thread %d and 1 "
			 "more, and whose TLS it is cannot be told",
			 (int)c[i], (int)c[i ? 0 : 1]);
		expect_in(err, want);
	}
	expect_in(out, "trace_id=33333333333333333333333333333333");
	expect_in(out, "[elastic] trace_id=44444444444444444444444444444444");
	ck_assert_uint_eq(count_in(out, "trace_id="), 2);
	free(out);
	free(err);
	ck_assert_int_eq(run_ctxdump(&out, &err, t.pid, "-j", NULL), 1);
	assert_json(out);
	ck_assert_uint_eq(count_in(out, "\"thread_pointer_owner\": null"), 3);
	ck_assert_uint_eq(count_in(out, "\"trace_id\""), 2);
	free(out);
	free(err);
	target_finish(&t);
}
END_TEST

/* Object file names are the target's too: two libraries named with
 * control bytes both define the symbol, and ctxdump warns which one it
 * shows. */
START_TEST(control_bytes_in_object_names)
{
	char dir[] = "/tmp/ctxdump-hostile-XXXXXX", *out, *err;
	struct target t;

	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	{
		char *argv[] = {(char *)test_helper_path("hostile-dlopen"), dir,
				(char *)test_helper_path("libwtls-tlsdesc.so"), NULL};

		target_start(&t, argv);
	}
	ck_assert_int_eq(run_ctxdump(&out, &err, t.pid, NULL), 0);
	assert_no_controls("stdout", out);
	assert_no_controls("stderr", err);
	assert_messages(err);
	expect_in(err, "2 objects define otel_thread_ctx_v1; showing the one in ");
	expect_in(err, "/libevil\\x1b");
	expect_in(out, "/libevil\\x1b");
	free(out);
	free(err);
	ck_assert_int_eq(run_ctxdump(&out, &err, t.pid, "-j", NULL), 0);
	assert_no_controls("stdout", out);
	assert_no_controls("stderr", err);
	assert_json(out);
	expect_in(out, "/libevil\\u001b");
	free(out);
	free(err);
	target_finish(&t);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* Of two definitions, the one first in the loader's load order is shown
 * (the one it binds the symbol to), not the first in /proc/PID/maps: a
 * library loaded later is mapped lower.  Only the first copy publishes
 * (old: the second copy was shown, with no context on any thread). */
START_TEST(two_definitions_load_order)
{
	char dir[] = "/tmp/ctxdump-hostile-XXXXXX", *out, *err;
	struct target t;

	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	{
		char *argv[] = {(char *)test_helper_path("hostile-dlopen"), dir,
				(char *)test_helper_path("libwtls-tlsdesc.so"), "first",
				NULL};

		target_start(&t, argv);
	}
	ck_assert_int_eq(run_ctxdump(&out, &err, t.pid, NULL), 0);
	expect_in(err, "2 objects define otel_thread_ctx_v1; showing the one in ");
	expect_in(err, "/libevil\\x1b[7mone");
	expect_in(out, "trace_id=66666666666666666666666666666666");
	free(out);
	free(err);
	target_finish(&t);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* ---- more objects than descriptors ---- */

/* test_run_capture() itself: what it runs has descriptors 0, 1 and 2
 * only.  It left its capture files, /dev/null and one more open in the
 * child, 4 descriptors that ctxdump's RLIMIT_NOFILE tests counted against
 * the limit (old: "0 1 2 3 4 5 6 7"; a shell closed them
 * first for the lowest limit). */
START_TEST(capture_leaks_no_descriptor)
{
	char *argv[] = {"/bin/sh", "-c", "cd /proc/self/fd && echo *", NULL};
	char *out;
	int st;

	st = test_run_capture(argv, NULL, false, &out, NULL, RUN_TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
	/* the glob's own directory is the lowest free one: 3 */
	ck_assert_str_eq(out, "0 1 2 3\n");
	free(out);
}
END_TEST

/* In argv (12 entries at least): ctxdump args... (up to 5; as
 * test_ctxdump_argv() puts them) run by a shell with RLIMIT_NOFILE at
 * nofile, and held descriptors (3, 4, ...) open on /dev/null as it
 * starts.  bash: sh redirects 0-9 only. */
static void
nofile_argv(char **argv, int nofile, int held, const char *const *args)
{
	static char script[160];
	char *dump[8];
	int n = test_ctxdump_argv(dump, 8, args), i;

	snprintf(script, sizeof(script),
		 "ulimit -n %d && for ((i = 3; i < %d; i++)); do "
		 "eval \"exec $i</dev/null\"; done && exec \"$0\" \"$@\"",
		 nofile, 3 + held);
	argv[0] = "/bin/bash";
	argv[1] = "-c";
	argv[2] = script;
	for (i = 0; i <= n; i++)
		argv[3 + i] = dump[i];
}

/* ctxdump args... under RLIMIT_NOFILE nofile with held descriptors open
 * (nofile_argv()), which must exit with status want (-1: a recording, run
 * without -q, that may have skipped rounds: prof_record_status_ok()); its
 * output in *out and *err. */
static void
run_nofile(
	int nofile, int held, const char *const *args, int want, char **out, char **err)
{
	char *argv[12];
	int st;

	nofile_argv(argv, nofile, held, args);
	st = test_run_capture(argv, NULL, false, out, err, RUN_TIMEOUT_MS);
	if (want < 0)
		ck_assert_msg(prof_record_status_ok(st, *err), "record status 0x%x: %s",
			      st, *err);
	else
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == want,
			      "status 0x%x (want exit %d): %s", st, want, *err);
}

/* many-objects with n copies of liblate-a.so in dir (made here): with
 * fn, a thread blocked in each copy's; each copy pad_mb MiB longer. */
static void
many_objects_start(
	struct target *t, char *dir, const char *n, const char *fn, const char *pad_mb)
{
	char *targv[] = {(char *)test_helper_path("many-objects"),
			 dir,
			 (char *)test_helper_path("liblate-a.so"),
			 (char *)n,
			 (char *)fn,
			 (char *)pad_mb,
			 NULL};

	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	target_start_as(t, targv, true);
}

/* The target maps 40 objects besides the shim, which is mapped above
 * them, so that ctxdump opens it last, and ctxdump may have 16
 * descriptors open: it kept one open for each object it had read, and
 * then had none left for the objects after the first dozen or to stop the
 * threads (old: exit 2, "cannot stop process ...: Too many open files";
 * with ulimit -n 64 and 150 objects, "95 of 154 could not be opened"). */
START_TEST(more_objects_than_descriptors)
{
	char dir[] = "/tmp/ctxdump-hostile-XXXXXX", *out, *err, pid[16];
	const char *args[] = {"-j", pid, NULL};
	struct target t;

	many_objects_start(&t, dir, "40", NULL, NULL);
	snprintf(pid, sizeof(pid), "%d", (int)t.pid);
	run_nofile(16, 0, args, 0, &out, &err);
	expect_in(out, "\"name\": \"otel_thread_ctx_v1\"");
	free(out);
	free(err);
	target_finish(&t);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* The same with a thread blocked in each of the 40 copies, unwound under
 * ulimit -n 24: the unwinder kept the descriptor of every module a stack
 * went through, with no limit, and the modules it could no longer open
 * had their frames unnamed and their stacks cut or wrong (old: 7 of the
 * 40 threads showed late_a).  _i 1: under ulimit -n 14, 7 of them taken
 * by descriptors ctxdump is started with: 7 left, what a dump with
 * --stacks needs, so none to keep open (old: the objects' cache kept 1,
 * counted against 8 reserved, and the stop found none left: "cannot
 * stop process: Too many open files"). */
START_TEST(stacks_through_more_modules_than_descriptors)
{
	char dir[] = "/tmp/ctxdump-hostile-XXXXXX", *out, *err, pid[16];
	const char *args[] = {"--stacks", "-j", pid, NULL};
	struct target t;

	many_objects_start(&t, dir, "40", "late_a", NULL);
	snprintf(pid, sizeof(pid), "%d", (int)t.pid);
	run_nofile(_i ? 14 : 24, _i ? 7 : 0, args, 0, &out, &err);
	ck_assert_msg(count_in(out, "\"symbol\": \"late_a\"") == 40,
		      "%u threads in late_a: %s",
		      count_in(out, "\"symbol\": \"late_a\""), err);
	/* and each one's frames on to the thread's start (with 7 left, as
	 * at the lowest limit, libc's may go unnamed: its debug file is
	 * looked up with no descriptor to spare) */
	if (_i == 0) {
		ck_assert_uint_eq(count_in(out, "\"symbol\": \"blocked_main\""), 40);
		ck_assert_uint_eq(count_in(out, "\"symbol\": \"start_thread\""), 40);
	}
	free(out);
	free(err);
	target_finish(&t);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* 40 copies 32 MiB longer, a thread blocked in each, unwound under
 * ulimit -n 9, 8 and 7 (_i): the copies past the descriptor budget and
 * the 32 MiB read whole are opened again when asked for, and the last one
 * opened stayed open after the symbol was found, through the stop, which
 * then had no descriptor left to list the threads ("cannot stop process:
 * Too many open files", old; reading them whole left it one).  Under 8
 * and 7 the two objects kept open (a quarter of the limit) took them
 * (old: the same exit 2). */
START_TEST(stacks_beyond_descriptors_at_lowest_limit)
{
	char dir[] = "/tmp/ctxdump-hostile-XXXXXX", *out, *err, pid[16];
	const char *args[] = {"--stacks", "-j", pid, NULL};
	struct target t;

	many_objects_start(&t, dir, "40", "late_a", "32");
	snprintf(pid, sizeof(pid), "%d", (int)t.pid);
	run_nofile(9 - _i, 0, args, 0, &out, &err);
	expect_in(out, "\"name\": \"otel_thread_ctx_v1\"");
	ck_assert_uint_eq(count_in(out, "\"symbol\": \"late_a\""), 40);
	free(out);
	free(err);
	target_finish(&t);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* Below what a dump needs (5 descriptors, 7 with --stacks; _i: without,
 * with): a clear failure that names the limit and what is needed (old:
 * "cannot stop process: Too many open files" and no more). */
START_TEST(descriptors_below_the_least)
{
	char dir[] = "/tmp/ctxdump-hostile-XXXXXX", *out, *err, pid[16];
	const char *args[] = {"-j", pid, NULL},
		   *sargs[] = {"--stacks", "-j", pid, NULL};
	struct target t;

	many_objects_start(&t, dir, "3", "late_a", NULL);
	snprintf(pid, sizeof(pid), "%d", (int)t.pid);
	run_nofile(_i ? 6 : 4, 0, _i ? sargs : args, 2, &out, &err);
	expect_in(err, _i ? "no more than 6 files may be open at once (ulimit -n), "
			    "and a dump needs 7 with --stacks\n"
			  : "no more than 4 files may be open at once (ulimit -n), "
			    "and a dump needs 5\n");
	assert_messages(err);
	free(out);
	free(err);
	/* and with that many, it works */
	run_nofile(_i ? 7 : 5, 0, _i ? sargs : args, 0, &out, &err);
	expect_in(out, "\"name\": \"otel_thread_ctx_v1\"");
	if (_i)
		ck_assert_uint_eq(count_in(out, "\"symbol\": \"late_a\""), 3);
	free(out);
	free(err);
	target_finish(&t);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* The least a dump needs, one of them taken by a descriptor ctxdump is
 * started with: the hint counts it (old: "no more than 5 files may be
 * open at once (ulimit -n), and a dump needs 5", which said 5 was
 * enough).  _i 1: the same under ulimit -n 1024, with 1020 open (old:
 * none counted above a limit of 256, and the hint said nothing of
 * them). */
START_TEST(descriptors_open_at_start)
{
	char dir[] = "/tmp/ctxdump-hostile-XXXXXX", *out, *err, pid[16];
	const char *args[] = {"-j", pid, NULL};
	struct target t;

	many_objects_start(&t, dir, "3", "late_a", NULL);
	snprintf(pid, sizeof(pid), "%d", (int)t.pid);
	if (_i)
		run_nofile(1024, 1020, args, 2, &out, &err);
	else
		run_nofile(5, 1, args, 2, &out, &err);
	expect_in(err, _i ? "ctxdump: no more than 1024 files may be open at once "
			    "(ulimit -n), 1020 of them open already when ctxdump "
			    "started, and a dump needs 5\n"
			  : "ctxdump: no more than 5 files may be open at once (ulimit "
			    "-n), 1 of them open already when ctxdump started, and a "
			    "dump needs 5\n");
	assert_messages(err);
	free(out);
	free(err);
	target_finish(&t);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* As many descriptors as a dump needs (5, 7 with --stacks; _i & 1), with
 * 100 threads: enough for their names to be read on a second thread
 * (ctxdump.c PREFETCH_MIN), which kept a descriptor through the ELF
 * lookups and needed one more in a file table of its own (old: "none of
 * its 4 objects could be opened ... Too many open files" without
 * --stacks; with it, every name empty).  _i & 2: one more, taken by a
 * descriptor ctxdump is started with (old: the names thread started as
 * if it were free, and the same "none of its 4 objects" without
 * --stacks).  _i & 4: 1019 more, under ulimit -n 1024 or 1026 (old: not
 * counted above a limit of 256, and the same failure). */
START_TEST(descriptors_at_the_least_with_many_threads)
{
	char *argv[] = {NULL, "--wait", "100", NULL}, *out, *err, pid[16];
	const char *args[] = {"-j", pid, NULL},
		   *sargs[] = {"--stacks", "-j", pid, NULL};
	int held = _i & 4 ? 1019 : _i & 2 ? 1 : 0;
	struct target t;

	argv[0] = (char *)test_helper_path("threads");
	target_start_as(&t, argv, true);
	snprintf(pid, sizeof(pid), "%d", (int)t.pid);
	run_nofile((_i & 1 ? 7 : 5) + held, held, _i & 1 ? sargs : args, 0, &out, &err);
	expect_in(out, "\"name\": \"otel_thread_ctx_v1\"");
	ck_assert_uint_eq(count_in(out, "\"tid\": "), 101);
	ck_assert_uint_eq(count_in(out, "\"comm\": \"threads\""), 101);
	free(out);
	free(err);
	target_finish(&t);
}
END_TEST

/* The names of 100 threads read on a second thread, whose file table (a
 * copy of ctxdump's as it started) is full: libnames-emfile.so fails its
 * openat() of every name with EMFILE.  _i 0: the main thread reads them
 * instead (old: exit 0 with names missing, and without
 * STOP_STATE_AT_STOP those threads taken as gone); 1: it cannot either,
 * and the dump fails saying why (old: exit 0, names missing). */
START_TEST(names_thread_out_of_descriptors)
{
	char *argv[] = {NULL, "--wait", "100", NULL}, *out, *err, *dump[8];
	char pid[16], pre[PATH_MAX + 16],
		*env[] = {pre, _i ? "NAMES_EMFILE=all" : NULL, NULL};
	const char *args[] = {"-j", pid, NULL};
	struct target t;
	int st;

	argv[0] = (char *)test_helper_path("threads");
	target_start_as(&t, argv, true);
	snprintf(pid, sizeof(pid), "%d", (int)t.pid);
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s",
		 test_helper_path("libnames-emfile.so"));
	(void)test_ctxdump_argv(dump, 8, args);
	st = test_run_capture(dump, env, false, &out, &err, RUN_TIMEOUT_MS);
	if (_i == 0) {
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x: %s",
			      st, err);
		ck_assert_uint_eq(count_in(out, "\"tid\": "), 101);
		ck_assert_uint_eq(count_in(out, "\"comm\": \"threads\""), 101);
	} else {
		char stop[96];

		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "status 0x%x: %s",
			      st, err);
		/* Where the names thread reads on during the stop; else (one
		 * CPU: no names thread; no STOP_STATE_AT_STOP) stop_all()
		 * finishes the names before it, and fails (old: this test
		 * failed there) */
		snprintf(stop, sizeof(stop),
			 "ctxdump: cannot stop process %s: Too many open files\n", pid);
		ck_assert_msg(strstr(err, "ctxdump: cannot collect the threads: Too "
					  "many open files\n") ||
				      strstr(err, stop),
			      "%s", err);
		expect_in(
			err,
			"files may be open at once (ulimit -n), and a dump needs 5\n");
		assert_messages(err);
	}
	free(out);
	free(err);
	target_finish(&t);
}
END_TEST

/* The same for record (_i: to a file, to standard output): it unwinds
 * stacks, and the file it writes takes one more descriptor.  Old: under
 * ulimit -n 7 to a file, "no more than 7 files may be open at once
 * (ulimit -n), and a dump needs 7 with --stacks", which said 7 were
 * enough, and record has no --stacks. */
START_TEST(descriptors_below_the_least_to_record)
{
	char dir[] = "/tmp/ctxdump-hostile-XXXXXX", *out, *err, pid[16];
	char prof[64], oarg[80];
	const char *args[] = {"record", "-d0.2", oarg, pid, NULL};
	struct target t;
	struct stat pst;
	int least = _i ? 7 : 8;

	many_objects_start(&t, dir, "3", "late_a", NULL);
	snprintf(pid, sizeof(pid), "%d", (int)t.pid);
	snprintf(prof, sizeof(prof), "%s/out.prof", dir);
	snprintf(oarg, sizeof(oarg), "-o%s", _i ? "-" : prof);
	run_nofile(least - 1, 0, args, 2, &out, &err);
	expect_in(err, _i ? "no more than 6 files may be open at once (ulimit -n), "
			    "and a recording to standard output needs 7\n"
			  : "no more than 7 files may be open at once (ulimit -n), "
			    "and a recording to a file needs 8\n");
	expect_in(err, "ctxdump record: cannot stop process ");
	free(out);
	free(err);
	(void)unlink(prof);
	/* and with that many, it works (a round the target got no CPU for
	 * is skipped, exit 1: no fault of the limit) */
	run_nofile(least, 0, args, -1, &out, &err);
	if (_i) {
		ck_assert_uint_gt(strlen(out), 0);
	} else {
		ck_assert_int_eq(stat(prof, &pst), 0);
		ck_assert_int_gt(pst.st_size, 0);
		ck_assert_int_eq(unlink(prof), 0);
	}
	free(out);
	free(err);
	target_finish(&t);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* A copy of liblate-a.so at to whose .dynsym and .symtab section headers
 * say each is size bytes at the end of the file, past its bytes now:
 * many-objects' padding (a hole) makes them part of the file.  The loader
 * never looks at section headers. */
static void
write_huge_dynsym_copy(const char *to, uint64_t size, char *build_id, size_t cap)
{
	static char buf[1 << 20];
	Elf64_Ehdr *eh = (Elf64_Ehdr *)buf;
	int in = open(test_helper_path("liblate-a.so"), O_RDONLY | O_CLOEXEC), out;
	ssize_t n;
	bool found = false;

	ck_assert_int_ge(in, 0);
	n = read(in, buf, sizeof(buf));
	close(in);
	ck_assert_int_gt(n, (ssize_t)sizeof(*eh));
	ck_assert_uint_le(eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr),
			  (uint64_t)n);
	for (unsigned i = 0; i < eh->e_shnum; i++) {
		Elf64_Shdr *sh = (Elf64_Shdr *)(buf + eh->e_shoff) + i;

		if (sh->sh_type == SHT_NOTE && build_id &&
		    sh->sh_offset + sh->sh_size <= (uint64_t)n &&
		    sh->sh_size >= sizeof(Elf64_Nhdr) + 4) {
			/* its NT_GNU_BUILD_ID, in hex, if this is that note */
			const Elf64_Nhdr *nh =
				(const Elf64_Nhdr *)(buf + sh->sh_offset);
			const unsigned char *id = (const unsigned char *)(nh + 1) + 4;

			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
			    sh->sh_size >= sizeof(*nh) + 4 + nh->n_descsz &&
			    2 * nh->n_descsz < cap)
				for (unsigned k = 0; k < nh->n_descsz; k++)
					snprintf(build_id + 2 * k, 3, "%02x", id[k]);
		}
		if (sh->sh_type != SHT_DYNSYM && sh->sh_type != SHT_SYMTAB)
			continue;
		sh->sh_offset = ((uint64_t)n + 4095) & ~(uint64_t)4095;
		sh->sh_size = size;
		found = true;
	}
	ck_assert(found);
	out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	ck_assert_int_ge(out, 0);
	ck_assert_int_eq(write(out, buf, (size_t)n), n);
	close(out);
}

/* Runs argv (ctxdump) as a child of our own, output to /dev/null, and
 * returns its peak resident memory in KiB (wait4()); it must exit 0. */
static long
run_peak_kib(char *const argv[])
{
	struct rusage ru;
	pid_t child;
	int st;

	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
		    dup2(null, 2) < 0)
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	while (wait4(child, &st, 0, &ru) < 0)
		ck_assert_int_eq(errno, EINTR);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
	return ru.ru_maxrss;
}

/* A library whose .dynsym and .symtab are 768 MiB of a hole each (24-byte
 * symbols, all zeros): ctxdump asked libelf for the section, which read
 * all of it into memory, and kept it for the next lookup (old: 790 MB of
 * RSS; a larger one may exhaust memory, and each object of hundreds may
 * have one); with a thread blocked in it (_i 1, --stacks), the unwinder
 * read its .symtab the same way (old: 1.5 GB).  Such sections are not
 * read. */
START_TEST(huge_section_in_a_hole)
{
	char dir[] = "/tmp/ctxdump-hostile-XXXXXX", lib[64], *out, *err, pid[16];
	const char *args[] = {"-j", pid, NULL},
		   *sargs[] = {"--stacks", "-j", pid, NULL};
	char *targv[] = {(char *)test_helper_path("many-objects"),
			 dir,
			 lib,
			 "1",
			 _i ? "late_a" : "-",
			 "1024",
			 NULL};
	char *dump[8];
	long peak;
	struct target t;
	int st;

	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	snprintf(lib, sizeof(lib), "%s/huge-dynsym.so", dir);
	write_huge_dynsym_copy(lib, (uint64_t)24 << 25, NULL, 0);
	target_start_as(&t, targv, true);
	snprintf(pid, sizeof(pid), "%d", (int)t.pid);
	test_ctxdump_argv(dump, 8, _i ? sargs : args);
	st = test_run_capture(dump, NULL, false, &out, &err, RUN_TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x: %s", st,
		      err);
	expect_in(out, "\"name\": \"otel_thread_ctx_v1\"");
	if (_i) /* unwound through it, though unnamed */
		expect_in(out, "huge-dynsym.so");
	free(out);
	free(err);
	/* again, to see its memory */
	peak = run_peak_kib(dump);
	ck_assert_msg(peak < 256 * 1024, "ctxdump held %ld KiB", peak);
	target_finish(&t);
	ck_assert_int_eq(unlink(lib), 0);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* The separate debug file of a library without symbols (the copy above,
 * whose .symtab is not read) is looked for in the target's root, which a
 * container owns: a FIFO there, at the library's build ID, made the
 * unwinder wait for ever in open(), the target's threads stopped (old).
 * Root only (a tmpfs mounted over /usr/lib/debug/.build-id, in a mount
 * namespace of this test's own). */
START_TEST(debug_file_made_a_fifo)
{
	char dir[] = "/tmp/ctxdump-hostile-XXXXXX", lib[64], *out, *err, pid[16];
	char id[2 * 64 + 1] = "", path[256];
	const char *args[] = {"--stacks", "-j", pid, NULL};
	const char *debug = "/usr/lib/debug/.build-id";
	char *targv[] = {(char *)test_helper_path("many-objects"),
			 dir,
			 lib,
			 "1",
			 "late_a",
			 "1024",
			 NULL};
	char *dump[8];
	struct target t;
	int st;

	if (geteuid() != 0 || access(debug, F_OK) != 0) {
		fprintf(stderr, "debug_file_made_a_fifo: not root or no %s, not run\n",
			debug);
		return;
	}
	ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	ck_assert_int_eq(mount("none", debug, "tmpfs", 0, "size=1m"), 0);
	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	snprintf(lib, sizeof(lib), "%s/huge-dynsym.so", dir);
	write_huge_dynsym_copy(lib, (uint64_t)24 << 25, id, sizeof(id));
	ck_assert_uint_gt(strlen(id), 2);
	snprintf(path, sizeof(path), "%s/%.2s", debug, id);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/%.2s/%s.debug", debug, id, id + 2);
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	target_start_as(&t, targv, true);
	snprintf(pid, sizeof(pid), "%d", (int)t.pid);
	test_ctxdump_argv(dump, 8, args);
	st = test_run_capture(dump, NULL, false, &out, &err, RUN_TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x: %s", st,
		      err);
	expect_in(out, "huge-dynsym.so");
	free(out);
	free(err);
	assert_running(t.pid);
	target_finish(&t);
	ck_assert_int_eq(unlink(lib), 0);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* liblate-a.so's bytes into to (made, or truncated: the same inode). */
static void
copy_late_a(const char *to)
{
	char *cp[] = {"/bin/cp", (char *)test_helper_path("liblate-a.so"), (char *)to,
		      NULL};

	ck_assert_int_eq(test_run_capture(cp, NULL, false, NULL, NULL, RUN_TIMEOUT_MS),
			 0);
}

/* A container whose separate debug file (at the build ID of a library
 * without symbols, as in debug_file_made_a_fifo) is an absolute symlink
 * to a file of its own: ctxdump opened /proc/PID/root/usr/lib/debug/...,
 * and the kernel resolved the symlink against ctxdump's root, where it
 * leads elsewhere (here nowhere; it may be any file of the host): the
 * frames in the library were left unnamed (old).  Resolved inside the
 * container's root, as the container sees it.  The container is a chroot
 * into a bind of / (root only, in a mount namespace of this test's own)
 * with a tmpfs of its own over /usr/lib/debug/.build-id, and another one
 * over ours. */
START_TEST(debug_file_through_absolute_symlink)
{
	char dir[] = "/tmp/ctxdump-hostile-XXXXXX", lib[64], *out, *err, pid[16];
	/* not test_mkdtemp(): the cleanup must never walk into a bind of
	 * / (CK_FORK=no keeps the mounts in the test program) */
	char root[] = "/tmp/ctxdump-hostile-root-XXXXXX";
	char id[2 * 64 + 1] = "", path[768], inner[256], real[256];
	const char *args[] = {"--stacks", "-j", pid, NULL};
	const char *debug = "/usr/lib/debug/.build-id";
	char *targv[] = {"/usr/sbin/chroot",
			 root,
			 (char *)test_helper_path("many-objects"),
			 dir,
			 lib,
			 "1",
			 "late_a",
			 "1024",
			 NULL};
	char *dump[8];
	struct target t;
	int st;

	if (geteuid() != 0 || access(debug, F_OK) != 0 || access(targv[0], X_OK) != 0 ||
	    (getenv("CK_FORK") && strcmp(getenv("CK_FORK"), "no") == 0)) {
		fprintf(stderr,
			"debug_file_through_absolute_symlink: not root, no "
			"%s or chroot, or CK_FORK=no, not run\n",
			debug);
		return;
	}
	ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	/* ours: empty */
	ck_assert_int_eq(mount("none", debug, "tmpfs", 0, "size=1m"), 0);
	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	snprintf(lib, sizeof(lib), "%s/huge-dynsym.so", dir);
	write_huge_dynsym_copy(lib, (uint64_t)24 << 25, id, sizeof(id));
	ck_assert_uint_gt(strlen(id), 2);
	ck_assert_ptr_nonnull(mkdtemp(root));
	ck_assert_int_eq(mount("/", root, NULL, MS_BIND | MS_REC, NULL), 0);
	/* the container's: the library's symbols (liblate-a.so has the same
	 * build ID), and the link to them at the build ID */
	snprintf(inner, sizeof(inner), "%s%s", root, debug);
	ck_assert_int_eq(mount("none", inner, "tmpfs", 0, "size=8m"), 0);
	snprintf(real, sizeof(real), "%s/real.debug", debug);
	snprintf(path, sizeof(path), "%s/real.debug", inner);
	copy_late_a(path);
	snprintf(path, sizeof(path), "%s/%.2s", inner, id);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/%.2s/%s.debug", inner, id, id + 2);
	ck_assert_int_eq(symlink(real, path), 0);
	target_start_as(&t, targv, true);
	snprintf(pid, sizeof(pid), "%d", (int)t.pid);
	test_ctxdump_argv(dump, 8, args);
	st = test_run_capture(dump, NULL, false, &out, &err, RUN_TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x: %s", st,
		      err);
	expect_in(out, "\"symbol\": \"late_a\"");
	free(out);
	free(err);
	target_finish(&t);
	ck_assert_int_eq(umount2(root, MNT_DETACH), 0);
	ck_assert_int_eq(rmdir(root), 0);
	ck_assert_int_eq(unlink(lib), 0);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* The target mounts another tmpfs over the directory of a library it
 * loaded from a tmpfs, with a file at the library's name that has the
 * library's inode number (a tmpfs numbers its inodes from 2): with no
 * /proc/PID/map_files, ctxdump opened that file by the path, compared
 * only the inode number, and took it for the library (old: "0
 * unreadable").  Another device: not the mapped file.  Root only (the
 * mounts, in a mount namespace of this test's own). */
START_TEST(library_path_over_same_inode_elsewhere)
{
	char dir[] = "/tmp/ctxdump-hostile-XXXXXX", *out, *err, pid[16];
	char path[64], other[64];
	const char *args[] = {"-v", pid, NULL};
	struct target t;
	struct stat lib, st;
	int rc;

	if (geteuid() != 0) {
		fprintf(stderr,
			"library_path_over_same_inode_elsewhere: not root, not run\n");
		return;
	}
	ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	ck_assert_int_eq(mount("none", dir, "tmpfs", 0, "size=8m"), 0);
	/* the copy made by the target on the first tmpfs */
	{
		char *targv[] = {(char *)test_helper_path("many-objects"), dir,
				 (char *)test_helper_path("liblate-a.so"), "1", NULL};

		target_start_as(&t, targv, true);
	}
	snprintf(pid, sizeof(pid), "%d", (int)t.pid);
	snprintf(path, sizeof(path), "%s/libmany-0.so", dir);
	ck_assert_int_eq(stat(path, &lib), 0);
	ck_assert_int_eq(mount("none", dir, "tmpfs", 0, "size=8m"), 0);
	for (int i = 0;; i++) {
		int fd;

		ck_assert_int_lt(i, 1000);
		snprintf(other, sizeof(other), "%s/f%d", dir, i);
		fd = open(other, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(fstat(fd, &st), 0);
		close(fd);
		if (st.st_ino == lib.st_ino)
			break;
		ck_assert_int_eq(unlink(other), 0);
	}
	/* the same bytes: it is an ELF object, that one just is not the
	 * mapped one */
	copy_late_a(other);
	ck_assert_int_eq(stat(other, &st), 0);
	ck_assert_uint_eq(st.st_ino, lib.st_ino);
	ck_assert_int_eq(rename(other, path), 0);
	ck_assert_uint_ne(st.st_dev, lib.st_dev);
	rc = test_run_ctxdump_no_map_files(&out, &err, args, RUN_TIMEOUT_MS);
	ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
	expect_in(out, "examined, 1 unreadable, 1 defining the symbol\n");
	free(out);
	free(err);
	ck_assert_int_eq(umount(dir), 0);
	target_finish(&t);
	ck_assert_int_eq(umount(dir), 0);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* The target deletes one of its libraries and puts a FIFO at its path,
 * which ctxdump opens (the path in maps, " (deleted)" cut off) where it
 * cannot open /proc/PID/map_files: an open() of a FIFO for reading waits
 * for a writer, and ctxdump waited for ever (old).  The FIFO is not the
 * mapped file: left out, and the symbol found in the shim. */
START_TEST(library_path_made_a_fifo)
{
	char dir[] = "/tmp/ctxdump-hostile-XXXXXX", *out, *err, pid[16], path[64];
	const char *args[] = {"-j", pid, NULL};
	struct target t;
	int st;

	many_objects_start(&t, dir, "3", NULL, NULL);
	snprintf(pid, sizeof(pid), "%d", (int)t.pid);
	snprintf(path, sizeof(path), "%s/libmany-1.so", dir);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	st = test_run_ctxdump_no_map_files(&out, &err, args, RUN_TIMEOUT_MS);
	ck_assert_msg(st == 0, "exit %d: %s", st, err);
	expect_in(out, "\"name\": \"otel_thread_ctx_v1\"");
	free(out);
	free(err);
	target_finish(&t);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* The same for the unwinder, whose modules are no deleted files: in a
 * mount namespace of its own (as in a container) the target mounts a
 * FIFO over one of its libraries, a thread blocked in it; maps still
 * names the library, and /proc/PID/root leads to the FIFO.  ctxdump
 * opened it, the target's threads stopped, and waited for ever (old).
 * Root only (the mount). */
START_TEST(module_path_mounted_over_by_fifo)
{
	char dir[] = "/tmp/ctxdump-hostile-XXXXXX", *out, *err, pid[16], path[64];
	char fifo[80];
	const char *args[] = {"--stacks", "-j", pid, NULL};
	struct target t;
	int st;

	if (geteuid() != 0) {
		fprintf(stderr,
			"module_path_mounted_over_by_fifo: not root, not run\n");
		return;
	}
	/* this test's process and its children only: gone with them */
	ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	many_objects_start(&t, dir, "2", "late_a", NULL);
	snprintf(pid, sizeof(pid), "%d", (int)t.pid);
	snprintf(path, sizeof(path), "%s/libmany-1.so", dir);
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	ck_assert_int_eq(mount(fifo, path, NULL, MS_BIND, NULL), 0);
	st = test_run_ctxdump_no_map_files(&out, &err, args, RUN_TIMEOUT_MS);
	ck_assert_msg(st == 0, "exit %d: %s", st, err);
	expect_in(out, "\"name\": \"otel_thread_ctx_v1\"");
	/* the other copy's thread, unwound as ever */
	expect_in(out, "\"symbol\": \"late_a\"");
	free(out);
	free(err);
	assert_running(t.pid);
	ck_assert_int_eq(umount(path), 0);
	ck_assert_int_eq(unlink(fifo), 0);
	target_finish(&t);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* 40 copies each 32 MiB longer than the library (a hole after its last
 * section, which no mapping covers) under ulimit -n 16: those past the
 * descriptors ctxdump keeps open were read whole (libelf's ELF_C_FDREAD),
 * so ctxdump's memory grew by the size of their files (old: more than
 * 1.1 GiB for 36 of them).  It needs a few MiB; 256 MiB leaves room for
 * the sanitizers. */
START_TEST(large_objects_beyond_descriptors)
{
	char dir[] = "/tmp/ctxdump-hostile-XXXXXX", *out, *err, pid[16];
	const char *args[] = {"-j", pid, NULL};
	char *argv[12];
	long peak;
	struct target t;

	many_objects_start(&t, dir, "40", "-", "32");
	snprintf(pid, sizeof(pid), "%d", (int)t.pid);
	run_nofile(16, 0, args, 0, &out, &err);
	expect_in(out, "\"name\": \"otel_thread_ctx_v1\"");
	free(out);
	free(err);
	/* again, to see its memory (the shell execs ctxdump: one process) */
	nofile_argv(argv, 16, 0, args);
	peak = run_peak_kib(argv);
	ck_assert_msg(peak < 256 * 1024, "ctxdump held %ld KiB", peak);
	target_finish(&t);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* 40 copies 32 MiB longer under ulimit -n 16, none of which names any
 * of the symbols ctxdump looks for: those past the descriptors kept open
 * and the 32 MiB read whole were opened and parsed again for each lookup
 * (otel_thread_ctx_v1 in .dynsym and the check for another definition,
 * Elastic's and custom-labels' in .dynsym, .symtab and the check for a
 * misdefinition: old, 320 opens of the copies; 2300 opens and 3 times
 * the time for 300 copies of 50 MiB under ulimit -n 64).  Each is opened once now; the
 * opens are counted with inotify (IN_OPEN: not the O_PATH lookups).
 * _i: a dump, a recording, which looks up glibc's names
 * (etls_glibc_tid_off()) before the layouts': Elastic's and
 * custom-labels' were not said before the first pass, which each copy
 * was opened again for (old: 80 opens). */
START_TEST(objects_beyond_descriptors_opened_once)
{
	char dir[] = "/tmp/ctxdump-hostile-XXXXXX", *out, *err, pid[16];
	const char *dargs[] = {"-j", pid, NULL},
		   *rargs[] = {"record", "-d0.1", "-o-", pid, NULL};
	const char *const *args = _i ? rargs : dargs;
	union {
		struct inotify_event ev;
		char b[64 * 1024];
	} buf;
	unsigned opens = 0;
	struct target t;
	ssize_t n;
	int in;

	many_objects_start(&t, dir, "40", "-", "32");
	snprintf(pid, sizeof(pid), "%d", (int)t.pid);
	in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	ck_assert_int_ge(in, 0);
	ck_assert_int_ge(inotify_add_watch(in, dir, IN_OPEN), 0);
	run_nofile(16, 0, args, _i ? -1 : 0, &out, &err);
	if (!_i)
		expect_in(out, "\"name\": \"otel_thread_ctx_v1\"");
	while ((n = read(in, buf.b, sizeof(buf.b))) > 0)
		for (char *e = buf.b; e < buf.b + n;) {
			const struct inotify_event *ev =
				(const struct inotify_event *)e;

			ck_assert_uint_eq(ev->mask & IN_Q_OVERFLOW, 0);
			if (ev->len && strncmp(ev->name, "libmany-", 8) == 0)
				opens++;
			e += sizeof(*ev) + ev->len;
		}
	close(in);
	ck_assert_msg(opens >= 1 && opens <= 40, "%u opens of the 40 copies", opens);
	free(out);
	free(err);
	target_finish(&t);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* ---- a file truncated under ctxdump ---- */

/* hostile-truncate with its library copy in dir (made here). */
static void
truncate_start(struct target *t, char *dir)
{
	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	{
		char *argv[] = {(char *)test_helper_path("hostile-truncate"), dir,
				(char *)test_helper_path("libtrunc-wait.so"), NULL};

		target_start(t, argv);
	}
}

/* A dump reads the objects of the target while it truncates and writes
 * back a library of its own over and over: a read of a mapping of the
 * file past its end raises SIGBUS, which killed ctxdump in some of the
 * dumps (old: libelf's ELF_C_READ_MMAP).  Each must end with an exit
 * status of its own and say why in ctxdump's words. */
START_TEST(library_truncated_while_dumped)
{
	char dir[] = "/tmp/ctxdump-hostile-XXXXXX", line[64], *out, *err;
	struct target t;
	int i, code;

	truncate_start(&t, dir);
	test_child_send(&t.c, "loop\n");
	test_child_expect(&t.c, "LOOPING", line, sizeof(line), 10000);
	for (i = 0; i < 40; i++) {
		code = run_ctxdump(&out, &err, t.pid, i % 2 ? "--stacks" : "-j", NULL);
		ck_assert_msg(code <= 2, "exit %d: %s", code, err);
		assert_no_controls("stderr", err);
		assert_messages(err);
		free(out);
		free(err);
	}
	test_child_send(&t.c, "r\n");
	test_child_expect(&t.c, "LOOPED ", line, sizeof(line), 10000);
	test_child_expect(&t.c, "RESTORED", line, sizeof(line), 10000);
	/* whole again: unwound and named as ever.  Not read (exit 1): the
	 * truncation took the target's relocated copies of the library's
	 * pages too, and its TLS slot reads as never filled in now. */
	code = run_ctxdump(&out, &err, t.pid, "--stacks", NULL);
	ck_assert_msg(code <= 1, "exit %d: %s", code, err);
	expect_in(out, "trunc_wait+0x");
	free(out);
	free(err);
	target_finish(&t);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* Whether file (a recording: binary) holds the bytes s. */
static bool
file_has(const char *file, const char *s)
{
	static char buf[1 << 20];
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	return n > 0 && memmem(buf, (size_t)n, s, strlen(s));
}

/* The library truncated to nothing while recorded, after the recorder
 * read it to unwind and name the thread blocked in it: every later round
 * read it again from a mapping past the file's end, and the first one
 * killed ctxdump with SIGBUS and lost the recording (old).  The
 * recording goes on to its end, its frames named as before. */
START_TEST(library_truncated_while_recorded)
{
	char dir[] = "/tmp/ctxdump-hostile-XXXXXX", file[64], errf[64], arg[16];
	const char *args[] = {"-F", "100", "-d", "60", "-o", file, arg, NULL};
	char line[64], *err;
	struct target t;
	struct stat st;
	long deadline;
	pid_t rec;
	int ws;

	truncate_start(&t, dir);
	snprintf(file, sizeof(file), "%s/rec", dir);
	snprintf(errf, sizeof(errf), "%s/rec.err", dir);
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);
	ws = open(errf, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ck_assert_int_ge(ws, 0);
	close(ws);
	rec = prof_record_start(errf, args);
	/* a round wrote the frame it named from the library */
	deadline = test_now_ms() + 30000;
	while (!file_has(file, "trunc_wait")) {
		ck_assert_msg(waitpid(rec, &ws, WNOHANG) == 0, "record ended: 0x%x",
			      ws);
		ck_assert_msg(test_now_ms() < deadline, "no frame in trunc_wait");
		usleep(10000);
	}
	test_child_send(&t.c, "t\n");
	test_child_expect(&t.c, "TRUNCATED", line, sizeof(line), 10000);
	/* rounds after it, which unwind the thread in the library again */
	ck_assert_int_eq(stat(file, &st), 0);
	prof_wait_file(file, st.st_size + 8192, 30000, rec, errf);
	kill(rec, SIGINT);
	ws = prof_record_wait(rec, 30000);
	err = prof_slurp(errf);
	ck_assert_msg(prof_record_status_ok(ws, err), "record status 0x%x: %s", ws,
		      err);
	free(err);
	unlink(file);
	unlink(errf);
	target_finish(&t);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* ---- a read that does not return ---- */

/* process_vm_readv() of a record in a userfaultfd range waits for the
 * target to serve the fault, which it cannot do while its threads are
 * stopped, and no signal but SIGKILL ends the wait.  ctxdump gives up 30
 * s after it stopped them: exit 2 with the reason, and the target runs
 * again.  Takes those 30 s; not run where userfaultfd is unavailable. */
START_TEST(read_blocked_by_userfaultfd)
{
	char *argv[] = {(char *)test_helper_path("hostile-uffd"), NULL};
	char line[256], arg[16], *out, *err;
	char *cmd[] = {(char *)test_ctxdump_path(), (char *)test_stop_timeout_arg(),
		       arg, NULL};
	struct target t;
	int st;

	if (access(argv[0], X_OK) != 0) {
		fprintf(stderr,
			"read_blocked_by_userfaultfd: %s is not built, not run\n",
			argv[0]);
		return;
	}
	memset(&t, 0, sizeof(t));
	test_child_start(&t.c, argv, NULL, false);
	test_child_readline(&t.c, line, sizeof(line), 10000);
	if (strncmp(line, "UNAVAILABLE ", 12) == 0) {
		fprintf(stderr, "read_blocked_by_userfaultfd: %s, not run\n",
			line + 12);
		st = test_child_finish(&t.c, 10000);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
		return;
	}
	ck_assert_msg(strncmp(line, "READY ", 6) == 0, "%s", line);
	t.pid = (pid_t)atoi(line + 6);
	ck_assert_int_eq(t.pid, t.c.pid);
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);

	/* generous: the 30 s and the time to start and stop */
	st = test_run_capture(cmd, NULL, false, &out, &err, 75000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "status 0x%x: %s", st,
		      err);
	assert_no_controls("stderr", err);
	assert_messages(err);
	snprintf(line, sizeof(line),
		 "ctxdump: reading the memory of process %d has been blocked for 30 s "
		 "while its threads are stopped",
		 (int)t.pid);
	expect_in(err, line);
	expect_in(err, "; giving up so that they run again\n");
	free(out);
	free(err);
	target_finish(&t);
}
END_TEST

/* ---- records larger than the recommended maximum ---- */

/* OTEP-4947: of a key index that repeats, the last occurrence wins,
 * however far into attrs-data it is (attrs-data-size is a u16, so all of
 * it can be copied).  helpers/keymap-grow publishes records of about
 * 5000 and 65000 bytes in which index 0 ("k0") comes first as "first",
 * then as filler values, and last as "last". */
START_TEST(large_record_last_wins)
{
	static const char *const cmds[] = {"big 5000\n", "big 65000\n"};
	char *argv[] = {(char *)test_helper_path("keymap-grow"), NULL};
	struct test_child c;
	char line[64];
	unsigned i;
	int st;

	test_child_start(&c, argv, NULL, false);
	test_child_expect(&c, "READY ", line, sizeof(line), 10000);
	for (i = 0; i < 2; i++) {
		char *out, *err, *blk;
		unsigned size;
		int r;

		test_child_send(&c, cmds[i]);
		test_child_expect(&c, "BIG ", line, sizeof(line), 10000);
		size = (unsigned)atoi(line + 4);
		ck_assert_uint_gt(size, 4096);
		r = run_ctxdump(&out, &err, c.pid, NULL);
		ck_assert_msg(r == 0, "exit %d: %s", r, err);
		blk = text_thread(out, c.pid);
		expect_in(blk, "    k0=last\n");
		ck_assert_msg(!strstr(blk, "truncated"), "%s", blk);
		free(blk);
		free(out);
		free(err);
		r = run_ctxdump(&out, &err, c.pid, "-j", NULL);
		ck_assert_msg(r == 0, "exit %d: %s", r, err);
		expect_in(out, "\"attrs_truncated\": false");
		expect_in(out, "\"value\": \"last\"");
		free(out);
		free(err);
	}
	assert_running(c.pid);
	st = test_child_finish(&c, 10000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "target status 0x%x", st);
}
END_TEST

TEST_SUITE(ctxdump_hostile_suite)
{
	Suite *s = suite_create("ctxdump-hostile");
	TCase *tc = tcase_create("hostile");

	if (access(test_ctxdump_path(), X_OK) != 0)
		test_skip("ctxdump is not built");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, garbage_records);
	tcase_add_test(tc, thread_without_tls);
	tcase_add_test(tc, thread_on_shared_thread_pointer);
	tcase_add_test(tc, thread_pair_on_shared_thread_pointer);
	tcase_add_test(tc, shared_thread_pointer_in_pid_namespace);
	tcase_add_test(tc, threads_on_copied_thread_pointer);
	tcase_add_test(tc, two_definitions_load_order);
	tcase_add_test(tc, empty_key_name);
	tcase_add_loop_test(tc, broken_process_context, 0,
			    sizeof(pctx_cases) / sizeof(pctx_cases[0]));
	tcase_add_loop_test(tc, wrong_symbol, 0, 4);
	tcase_add_test(tc, wrong_symbol_other_layout);
	tcase_add_loop_test(tc, wrong_symbol_under_shim, 0, 4);
	tcase_add_test(tc, wrong_symbol_under_shim_named);
	tcase_add_loop_test(tc, wrong_symbol_library_beside_shim, 0, 2);
	tcase_add_test(tc, control_bytes_in_object_names);
	tcase_add_test(tc, read_blocked_by_userfaultfd);
	tcase_add_test(tc, capture_leaks_no_descriptor);
	tcase_add_test(tc, more_objects_than_descriptors);
	tcase_add_loop_test(tc, stacks_through_more_modules_than_descriptors, 0, 2);
	tcase_add_test(tc, large_objects_beyond_descriptors);
	tcase_add_loop_test(tc, objects_beyond_descriptors_opened_once, 0, 2);
	tcase_add_loop_test(tc, stacks_beyond_descriptors_at_lowest_limit, 0, 3);
	tcase_add_loop_test(tc, descriptors_below_the_least, 0, 2);
	tcase_add_loop_test(tc, descriptors_open_at_start, 0, 2);
	tcase_add_loop_test(tc, descriptors_at_the_least_with_many_threads, 0, 6);
	tcase_add_loop_test(tc, names_thread_out_of_descriptors, 0, 2);
	tcase_add_loop_test(tc, descriptors_below_the_least_to_record, 0, 2);
	tcase_add_loop_test(tc, huge_section_in_a_hole, 0, 2);
	tcase_add_test(tc, debug_file_made_a_fifo);
	tcase_add_test(tc, debug_file_through_absolute_symlink);
	tcase_add_test(tc, library_path_made_a_fifo);
	tcase_add_test(tc, library_path_over_same_inode_elsewhere);
	tcase_add_test(tc, module_path_mounted_over_by_fifo);
	tcase_add_test(tc, library_truncated_while_dumped);
	tcase_add_test(tc, library_truncated_while_recorded);
	suite_add_tcase(s, tc);
	/* its own case, to be run alone (CK_RUN_CASE=large) */
	tc = tcase_create("large");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, large_record_last_wins);
	suite_add_tcase(s, tc);
	return s;
}
