/* SPDX-License-Identifier: Apache-2.0 */
/* ctxdump against statically linked OTEP-4947 writers
 * (test/helpers/writer-le.c linked -static and -static-pie, the variable
 * not exported): no object has otel_thread_ctx_v1 in .dynsym (a static
 * non-PIE executable has no .dynsym at all), only the executable's
 * .symtab, and the TLS block was placed by libc.a's __libc_setup_tls, not
 * by ld.so (and, as the same lookup, a dynamically linked PIE that does
 * not export its variable either).  Every thread's record, in text and JSON and through
 * `ctxdump record`, must be what the writer says it published.  A
 * stripped static writer keeps ctxdump's "no loaded object" error (exit
 * 2), with a hint on how to make the writer readable; one run from a
 * memfd maps no file at all, and is read through /proc/PID/exe. */
#include "test-ctxdump-writer.h"

#include <elf.h>
#include <inttypes.h>
#include <signal.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "thread-record.h"

struct writer {
	struct test_child child;
	const char *exe;
	pid_t pid;
	struct expect_thread t[MAX_THREADS];
	int n;
};

/* The last two are dynamically linked (ld.so placed their block), the
 * last with the variable a file-scope static (STB_LOCAL). */
static const char *const static_writers[] = {
	"writer-le-static",
	"writer-le-static-pie",
	"writer-le-symtab",
	"writer-local",
};
#define N_WRITERS ((int)(sizeof(static_writers) / sizeof(static_writers[0])))

/* The helper exe, started by the helper launcher (NULL: none) with exe's
 * path as its argument. */
static void
writer_start_via(struct writer *w, const char *launcher, const char *exe)
{
	char path[PATH_MAX], lpath[PATH_MAX];
	char *argv[3] = {NULL, NULL, NULL};
	int k = 0;

	memset(w, 0, sizeof(*w));
	w->exe = exe;
	if (launcher)
		argv[k++] = (char *)prof_helper(launcher, lpath, sizeof(lpath));
	argv[k] = (char *)prof_helper(exe, path, sizeof(path));
	test_child_start(&w->child, argv, NULL, false);
	cw_read_threads(&w->child, w->t, &w->n, &w->pid);
}

static void
writer_start(struct writer *w, const char *exe)
{
	writer_start_via(w, NULL, exe);
}

static void
writer_finish(struct writer *w)
{
	int status = test_child_finish(&w->child, TIMEOUT_MS);

	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "%s: writer did not exit normally (status 0x%x)", w->exe, status);
}

/* Runs ctxdump with up to two arguments before the pid (as
 * test_ctxdump_argv() puts them); returns its exit status, stdout in *out
 * and stderr in *err (malloc'd). */
static int
run_ctxdump(
	const struct writer *w, const char *a1, const char *a2, char **out, char **err)
{
	const char *args[4] = {NULL};
	char pid[16], *argv[6];
	int status, k = 0;

	snprintf(pid, sizeof(pid), "%d", (int)w->pid);
	if (a1)
		args[k++] = a1;
	if (a2)
		args[k++] = a2;
	args[k] = pid;
	test_ctxdump_argv(argv, 6, args);
	status = test_run_capture(argv, NULL, false, out, err, TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(status), "%s: ctxdump died (status 0x%x)", w->exe,
		      status);
	return WEXITSTATUS(status);
}

/* ---- just enough JSON for ctxdump's output ------------------------------ */

/* The value of "key" in text (whitespace-tolerant), or NULL. */
static const char *
jfind(const char *text, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\"", key);
	p = strstr(text, pat);
	if (!p)
		return NULL;
	p += strlen(pat);
	while (*p == ' ' || *p == '\n' || *p == '\t')
		p++;
	ck_assert_msg(*p == ':', "JSON: no ':' after %s", pat);
	p++;
	while (*p == ' ' || *p == '\n' || *p == '\t')
		p++;
	return p;
}

/* The JSON string at p, unescaped into out (cap bytes); returns the end. */
static const char *
jstring(const char *p, uint8_t *out, size_t cap, size_t *len)
{
	size_t n = 0;

	ck_assert_msg(*p == '"', "JSON: string expected at '%.20s'", p);
	p++;
	for (;;) {
		unsigned char c = (unsigned char)*p++;
		uint32_t cp;

		ck_assert_msg(c != '\0', "JSON: unterminated string");
		ck_assert_uint_le(n + 4, cap);
		if (c == '"')
			break;
		if (c != '\\') {
			out[n++] = c;
			continue;
		}
		c = (unsigned char)*p++;
		switch (c) {
		case 'u':
			ck_assert_int_eq(sscanf(p, "%4x", &cp), 1);
			p += 4;
			if (cp >= 0xd800 && cp < 0xdc00 && p[0] == '\\' &&
			    p[1] == 'u') {
				uint32_t lo;

				ck_assert_int_eq(sscanf(p + 2, "%4x", &lo), 1);
				p += 6;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			}
			cw_put_utf8(out, &n, cp);
			break;
		default: { /* other characters stand for themselves */
			int e = cw_json_unescape(c);

			out[n++] = e < 0 ? c : (uint8_t)e;
			break;
		}
		}
	}
	*len = n;
	return p;
}

/* ---- checks ------------------------------------------------------------- */

/* The attributes in ctxdump's JSON context ctx must be exactly what the
 * writer encoded, decoded here with the formats library (no key map). */
static void
check_attrs(const char *who, const struct expect_thread *t, const char *ctx)
{
	struct trec_attrs_decoded *dec = calloc(1, sizeof(*dec));
	const char *p = jfind(ctx, "attrs");
	uint8_t val[4 * TREC_VALUE_MAX + 8];
	unsigned i;

	ck_assert_ptr_nonnull(dec);
	ck_assert_msg(p && *p == '[', "%s: no attrs array", who);
	ck_assert_int_eq(trec_attrs_decode(t->attrs, t->attrs_len, 0, dec), 0);
	for (i = 0; i < dec->n; i++) {
		const char *v;
		size_t len;
		long idx;

		p = jfind(p, "index");
		ck_assert_msg(p, "%s: attribute %u missing", who, i);
		idx = strtol(p, NULL, 10);
		ck_assert_int_eq(idx, dec->attr[i].key);
		v = jfind(p, "value");
		ck_assert_ptr_nonnull(v);
		p = jstring(v, val, sizeof(val), &len);
		ck_assert_msg(len == dec->attr[i].len &&
				      memcmp(val, dec->attr[i].val, len) == 0,
			      "%s: attribute #%u differs (%zu bytes, expected %u)", who,
			      dec->attr[i].key, len, dec->attr[i].len);
	}
	/* no further attribute in this context */
	ck_assert_msg(!jfind(p, "index"), "%s: more attributes than %u", who, dec->n);
	free(dec);
}

static void
check_json_thread(const struct writer *w,
		  const struct expect_thread *t,
		  const char *json)
{
	char *jt = test_json_thread(json, t->tid), who[96], want[96];
	const char *ctx, *p;
	uint8_t s[64];
	size_t len;

	snprintf(who, sizeof(who), "%s tid %d (%s)", w->exe, (int)t->tid, t->kind);
	ck_assert_msg(jt, "%s: thread missing from the JSON", who);
	ck_assert_msg(!jfind(jt, "error"), "%s: ctxdump error: %s", who, jt);
	ctx = jfind(jt, "context");
	ck_assert_msg(ctx, "%s: no context member", who);
	if (t->ptr == 0) {
		ck_assert_msg(strncmp(ctx, "null", 4) == 0, "%s: context not null",
			      who);
		free(jt);
		return;
	}
	/* the pointer read from the thread's slot: the slot is right */
	p = jfind(ctx, "record_addr");
	ck_assert_ptr_nonnull(p);
	jstring(p, s, sizeof(s), &len);
	s[len] = '\0';
	snprintf(want, sizeof(want), "0x%" PRIx64, t->ptr);
	ck_assert_msg(strcmp((char *)s, want) == 0, "%s: record_addr %s, expected %s",
		      who, s, want);
	ck_assert_int_eq(strtol(jfind(ctx, "valid"), NULL, 10), t->valid);
	if (t->valid != TREC_VALID) {
		ck_assert_msg(strncmp(jfind(ctx, "trace_id"), "null", 4) == 0, "%s",
			      who);
		free(jt);
		return;
	}
	jstring(jfind(ctx, "trace_id"), s, sizeof(s), &len);
	ck_assert_msg(len == 32 && memcmp(s, t->trace_id, 32) == 0, "%s: trace_id",
		      who);
	jstring(jfind(ctx, "span_id"), s, sizeof(s), &len);
	ck_assert_msg(len == 16 && memcmp(s, t->span_id, 16) == 0, "%s: span_id", who);
	ck_assert_int_eq(strtol(jfind(ctx, "flags"), NULL, 10), t->flags);
	ck_assert_int_eq(strtol(jfind(ctx, "attrs_data_size"), NULL, 10),
			 (long)t->attrs_len);
	ck_assert_msg(strncmp(jfind(ctx, "attrs_truncated"), "false", 5) == 0, "%s",
		      who);
	check_attrs(who, t, ctx);
	free(jt);
}

START_TEST(test_json_matches_writer)
{
	struct writer w;
	char *out, *err, *sym;
	const char *p;
	int i, valid = 0;

	writer_start(&w, static_writers[_i]);
	ck_assert_int_eq(run_ctxdump(&w, "--json", NULL, &out, &err), 0);
	p = jfind(out, "symbol");
	ck_assert_msg(p && *p == '{', "%s: no symbol: %s", w.exe, err);
	sym = strndup(p, (size_t)(strchr(p, '}') - p));
	ck_assert_ptr_nonnull(sym);
	ck_assert_msg(strncmp(jfind(sym, "model"), "\"local-exec\"", 12) == 0, "%s: %s",
		      w.exe, sym);
	ck_assert_msg(strncmp(jfind(sym, "symbol_table"), "\".symtab\"", 9) == 0,
		      "%s: %s", w.exe, sym);
	free(sym);
	for (i = 0; i < w.n; i++) {
		check_json_thread(&w, &w.t[i], out);
		valid += w.t[i].has_record && w.t[i].valid == TREC_VALID;
	}
	ck_assert_int_ge(valid, 3);
	ck_assert_int_ge(w.n, 4);
	free(out);
	free(err);
	writer_finish(&w);
}
END_TEST

START_TEST(test_text_matches_writer)
{
	struct writer w;
	char *out, *err, want[PATH_MAX + 96], exe[PATH_MAX];
	int i;

	writer_start(&w, static_writers[_i]);
	ck_assert_int_eq(run_ctxdump(&w, "-v", NULL, &out, &err), 0);
	snprintf(want, sizeof(want),
		 "Symbol: " OTEL_THREAD_CTX_SYMBOL " in %s (local-exec, .symtab)\n",
		 prof_helper(w.exe, exe, sizeof(exe)));
	ck_assert_msg(strstr(out, want), "%s: '%s' not in:\n%s", w.exe, want, out);
	ck_assert_msg(!strstr(out, "statically linked executable") ==
			      !strstr(w.exe, "-static"),
		      "%s: %s", w.exe, out);
	for (i = 0; i < w.n; i++) {
		const struct expect_thread *t = &w.t[i];
		char *th;

		snprintf(want, sizeof(want), "Thread %d ", (int)t->tid);
		th = strstr(out, want);
		ck_assert_msg(th, "%s: thread %d missing:\n%s", w.exe, (int)t->tid,
			      out);
		if (!t->has_record || t->valid != TREC_VALID)
			continue;
		snprintf(want, sizeof(want), "trace_id=%s span_id=%s flags=%02x",
			 t->trace_id, t->span_id, t->flags);
		/* the thread's own lines, before the next thread's */
		ck_assert_msg(strstr(th, want) &&
				      (!strstr(th + 1, "\nThread ") ||
				       strstr(th, want) < strstr(th + 1, "\nThread ")),
			      "%s: '%s' not under thread %d", w.exe, want, (int)t->tid);
	}
	free(out);
	free(err);
	writer_finish(&w);
}
END_TEST

/* Record w at 50 Hz into file until rounds are on disk, however many a
 * loaded machine made the recorder skip (prof_record_rounds()). */
static void
record_rounds(const struct writer *w, const char *file)
{
	char pid[16], errf[PATH_MAX];
	const char *args[] = {"-F", "50", "-o", file, pid, NULL};

	snprintf(pid, sizeof(pid), "%d", (int)w->pid);
	prof_tmpfile(errf, sizeof(errf), "static-rec-err");
	prof_record_rounds(file, errf, args, TIMEOUT_MS);
	unlink(errf);
}

/* ctxdump record resolves the symbol through the same lookup: every valid
 * record's trace is a root of the folded stacks, no other trace is. */
START_TEST(test_record_matches_writer)
{
	char file[] = "/tmp/ctxdump-static-XXXXXX";
	char *argv[5] = {(char *)test_ctxdump_path(), "report", "--folded", file, NULL};
	char *out, *err, want[64];
	struct writer w;
	int fd, i, st;

	fd = test_mkstemp(file);
	ck_assert_int_ge(fd, 0);
	close(fd);
	writer_start(&w, static_writers[_i]);
	record_rounds(&w, file);
	writer_finish(&w);
	st = test_run_capture(argv, NULL, false, &out, &err, TIMEOUT_MS);
	unlink(file);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "report status 0x%x: %s",
		      st, err);
	for (i = 0; i < w.n; i++) {
		const struct expect_thread *t = &w.t[i];
		bool shown;

		if (!t->has_record)
			continue;
		snprintf(want, sizeof(want), "trace %s", t->trace_id);
		shown = strstr(out, want) != NULL;
		ck_assert_msg(shown == (t->valid == TREC_VALID),
			      "%s: trace of thread %d (%s, valid %u) %s:\n%s", w.exe,
			      (int)t->tid, t->kind, t->valid,
			      shown ? "shown" : "missing", out);
	}
	free(out);
	free(err);
}
END_TEST

/* ---- stacks ---------------------------------------------------------- */

/* The text of thread tid's section of ctxdump's text output (malloc'd). */
static char *
thread_section(const char *who, const char *out, pid_t tid)
{
	char want[32];
	const char *th, *end;

	snprintf(want, sizeof(want), "Thread %d ", (int)tid);
	th = strstr(out, want);
	ck_assert_msg(th, "%s: thread %d missing:\n%s", who, (int)tid, out);
	end = strstr(th + 1, "\nThread ");
	return strndup(th, end ? (size_t)(end - th) : strlen(th));
}

/* A statically linked executable has no .eh_frame_hdr (gcc links -static
 * without --eh-frame-hdr), only .eh_frame: every thread's stack must still
 * reach the writer's functions, frame by frame, down to the outermost
 * (old: frame #0 only, then a bogus frame and "stack ends: unwinding
 * needed memory outside the snapshot"). */
START_TEST(test_stacks_reach_callers)
{
	struct writer w;
	char *out, *err, want[96];
	int i, k;

	writer_start(&w, static_writers[_i]);
	ck_assert_int_eq(run_ctxdump(&w, "--stacks", NULL, &out, &err), 0);
	for (i = 0; i < w.n; i++) {
		const char *const *names = cw_want_frames(w.t[i].kind);
		char *th = thread_section(w.exe, out, w.t[i].tid);
		const char *prev = th;

		for (k = 0; names[k]; k++) {
			const char *at;

			/* "#N  0x... name+0x..." in caller order */
			snprintf(want, sizeof(want), " %s+0x", names[k]);
			at = strstr(prev, want);
			ck_assert_msg(at, "%s thread %d (%s): no frame %s:\n%s", w.exe,
				      (int)w.t[i].tid, w.t[i].kind, names[k], th);
			prev = at + 1;
		}
		ck_assert_msg(!strstr(th, "(stack ends:"),
			      "%s thread %d (%s): stack cut short:\n%s", w.exe,
			      (int)w.t[i].tid, w.t[i].kind, th);
		free(th);
	}
	free(out);
	free(err);
	writer_finish(&w);
}
END_TEST

/* The same through `ctxdump record`: no stack of the recording is
 * [truncated], and each valid record's trace sits on the stack of the
 * thread that published it, with the writer's functions. */
START_TEST(test_record_stacks_reach_callers)
{
	char file[] = "/tmp/ctxdump-static-XXXXXX";
	char *argv[5] = {(char *)test_ctxdump_path(), "report", "--folded", file, NULL};
	char want[96], *out, *err;
	struct writer w;
	int fd, i, k, st;

	fd = test_mkstemp(file);
	ck_assert_int_ge(fd, 0);
	close(fd);
	writer_start(&w, static_writers[_i]);
	record_rounds(&w, file);
	writer_finish(&w);
	st = test_run_capture(argv, NULL, false, &out, &err, TIMEOUT_MS);
	unlink(file);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "report status 0x%x: %s",
		      st, err);
	ck_assert_msg(!strstr(out, "[truncated]"), "%s: stacks cut short:\n%s", w.exe,
		      out);
	ck_assert_msg(strstr(out, ";main;writer_main;"),
		      "%s: no main thread stack:\n%s", w.exe, out);
	for (i = 0; i < w.n; i++) {
		const struct expect_thread *t = &w.t[i];
		const char *const *names = cw_want_frames(t->kind);
		const char *line, *eol;
		char *l;

		if (!t->has_record || t->valid != TREC_VALID)
			continue;
		snprintf(want, sizeof(want), "trace %s;", t->trace_id);
		line = strstr(out, want);
		ck_assert_msg(line, "%s: %s missing:\n%s", w.exe, want, out);
		eol = strchr(line, '\n');
		l = strndup(line, eol ? (size_t)(eol - line) : strlen(line));
		/* folded stacks are outermost first */
		for (k = 0; names[k]; k++) {
			snprintf(want, sizeof(want), ";%s;", names[k]);
			ck_assert_msg(strstr(l, want), "%s thread %d (%s): no %s in %s",
				      w.exe, (int)t->tid, t->kind, names[k], l);
		}
		free(l);
	}
	free(out);
	free(err);
}
END_TEST

/* Stripped: no symbol anywhere.  The old error and exit status stay, with
 * a hint on how to make the writer readable. */
START_TEST(test_stripped_static_error)
{
	struct writer w;
	char *out, *err;

	writer_start(&w, "writer-le-static-stripped");
	ck_assert_int_eq(run_ctxdump(&w, NULL, NULL, &out, &err), 2);
	ck_assert_msg(strstr(err, "no loaded object of process") &&
			      strstr(err, "defines " OTEL_THREAD_CTX_SYMBOL),
		      "%s", err);
	ck_assert_msg(
		strstr(err, "statically linked: no dynamic loader runs in it, "
			    "so LD_PRELOAD cannot load libctxshim.so") &&
			strstr(err, "also stripped (no .symtab)") &&
			strstr(err, "--export-dynamic-symbol=" OTEL_THREAD_CTX_SYMBOL),
		"%s", err);
	free(out);
	free(err);
	ck_assert_int_eq(run_ctxdump(&w, "--json", NULL, &out, &err), 2);
	ck_assert_msg(strstr(out, "\"symbol\": null"), "%s", out);
	free(out);
	free(err);
	writer_finish(&w);
}
END_TEST

/* A static writer run from a memfd (fexecve()) maps no file, only
 * "/memfd:writer-le-static (deleted)": ctxdump reads the executable
 * through /proc/PID/exe and finds every thread's record, its stacks and,
 * through `ctxdump record`, their traces (old: "process N maps no ELF
 * object from a file: ctxdump cannot look for otel_thread_ctx_v1 in it",
 * exit 2).  Once as root can (map_files), once without the capabilities
 * map_files needs, as another user would. */
START_TEST(test_memfd_program_read)
{
	char pid[16], *out, *err;
	const char *json[] = {"--json", pid, NULL},
		   *text[] = {"-v", "--stacks", pid, NULL},
		   *rec[] = {"record", "-d", "0.1", "-o", "/dev/null", pid, NULL};
	struct writer w;
	int i, r;

	writer_start_via(&w, "memfd-exec", "writer-le-static");
	snprintf(pid, sizeof(pid), "%d", (int)w.pid);
	if (_i == 0)
		r = run_ctxdump(&w, "--json", NULL, &out, &err);
	else
		r = test_run_ctxdump_no_map_files(&out, &err, json, TIMEOUT_MS);
	ck_assert_msg(r == 0, "exit %d: %s", r, err);
	for (i = 0; i < w.n; i++)
		check_json_thread(&w, &w.t[i], out);
	free(out);
	free(err);

	if (_i == 0)
		r = run_ctxdump(&w, "-v", "--stacks", &out, &err);
	else
		r = test_run_ctxdump_no_map_files(&out, &err, text, TIMEOUT_MS);
	ck_assert_msg(r == 0, "exit %d: %s", r, err);
	ck_assert_msg(strstr(out,
			     "Symbol: " OTEL_THREAD_CTX_SYMBOL
			     " in /memfd:writer-le-static (local-exec, .symtab)\n") &&
			      strstr(out, " writer_main+0x"),
		      "%s", out);
	free(out);
	free(err);

	if (_i == 0)
		r = prof_run(&out, &err, "record", "-d", "0.1", "-o", "/dev/null", pid,
			     NULL);
	else
		r = test_run_ctxdump_no_map_files(&out, &err, rec, TIMEOUT_MS);
	ck_assert_msg(prof_record_exit_ok(r, err), "exit %d: %s", r, err);
	ck_assert_msg(!strstr(err, "without trace context"), "%s", err);
	free(out);
	free(err);
	writer_finish(&w);
}
END_TEST

/* The dynamic loader to start a program through ("ld.so PROG"), or NULL
 * if none is at a known path. */
static const char *
explicit_loader(void)
{
	static const char *const loaders[] = {"/lib64/ld-linux-x86-64.so.2",
					      "/lib/ld-linux-aarch64.so.1"};
	size_t i;

	for (i = 0; i < sizeof(loaders) / sizeof(loaders[0]); i++)
		if (access(loaders[i], X_OK) == 0)
			return loaders[i];
	return NULL;
}

/* Two file-scope statics of the name: neither is taken for the writer's
 * (and no hint about stripping: the executable has its .symtab). */
/* A dynamically linked program started through the explicit loader
 * ("ld.so PROG": /proc/PID/exe is ld.so, which has no PT_INTERP) has a
 * loader running, and LD_PRELOAD works there: no "statically linked"
 * hint. */
START_TEST(test_explicit_loader_not_static)
{
	const char *ldso = explicit_loader();
	char pid_s[16], *out, *err;
	char *argv[3] = {(char *)test_ctxdump_path(), pid_s, NULL};
	pid_t pid;
	int status;

	if (!ldso)
		return; /* no known loader path here */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		execl(ldso, ldso, "/bin/sleep", "30", (char *)NULL);
		_exit(127);
	}
	usleep(300000); /* sleep's libraries mapped */
	snprintf(pid_s, sizeof(pid_s), "%d", (int)pid);
	status = test_run_capture(argv, NULL, false, &out, &err, TIMEOUT_MS);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 2, "%s", err);
	ck_assert_msg(strstr(err, "defines " OTEL_THREAD_CTX_SYMBOL), "%s", err);
	ck_assert_msg(!strstr(err, "statically linked"), "%s", err);
	free(out);
	free(err);
}
END_TEST

/* A PIE writer that defines and exports the variable, accessed
 * local-exec, started through the explicit loader: /proc/PID/exe is
 * ld.so, so only the object (ET_DYN with DF_1_PIE) tells that it is the
 * main program, whose block ld.so places first, where its local-exec
 * code looks (old: "no TLS relocation of a loaded object reaches
 * otel_thread_ctx_v1", every thread unresolved). */
START_TEST(test_explicit_loader_pie_read)
{
	const char *ldso = explicit_loader();
	char exe[PATH_MAX], *out, *err, *sym;
	char *argv[3] = {NULL, NULL, NULL};
	struct writer w;
	const char *p;
	int i;

	if (!ldso)
		return; /* no known loader path here */
	memset(&w, 0, sizeof(w));
	w.exe = "writer-le";
	argv[0] = (char *)ldso;
	argv[1] = (char *)prof_helper(w.exe, exe, sizeof(exe));
	test_child_start(&w.child, argv, NULL, false);
	cw_read_threads(&w.child, w.t, &w.n, &w.pid);
	ck_assert_int_eq(run_ctxdump(&w, "--json", NULL, &out, &err), 0);
	p = jfind(out, "symbol");
	ck_assert_msg(p && *p == '{', "no symbol: %s", err);
	sym = strndup(p, (size_t)(strchr(p, '}') - p));
	ck_assert_ptr_nonnull(sym);
	ck_assert_msg(strncmp(jfind(sym, "model"), "\"local-exec\"", 12) == 0, "%s",
		      sym);
	free(sym);
	for (i = 0; i < w.n; i++)
		check_json_thread(&w, &w.t[i], out);
	free(out);
	free(err);
	writer_finish(&w);
}
END_TEST

START_TEST(test_ambiguous_locals_ignored)
{
	struct writer w;
	char *out, *err;

	writer_start(&w, "writer-local-twin");
	ck_assert_int_eq(run_ctxdump(&w, NULL, NULL, &out, &err), 2);
	ck_assert_msg(strstr(err, "no loaded object of process") &&
			      !strstr(err, "stripped"),
		      "%s", err);
	free(out);
	free(err);
	writer_finish(&w);
}
END_TEST

/* ctxdump serves the search tables it builds from .eh_frame to libunwind
 * at addresses above the user half.  A frame whose CFA the target puts
 * there (rbp, a CFA expression) must not read those tables as the target's
 * memory: the stack ends there, as at any other address the snapshot does
 * not hold (the second address, outside the window, shows what that is). */
START_TEST(test_stacks_table_window_not_target_memory)
{
	static const char *const cfa[] = {"0x8000000000000000", "0x9000000000000000"};
	char path[PATH_MAX], line[256], pid[16], *out, *err;
	char *argv[3] = {NULL, (char *)cfa[_i], NULL};
	char *dargv[5] = {(char *)test_ctxdump_path(), (char *)test_stop_timeout_arg(),
			  "--stacks", pid, NULL};
	struct test_child c;
	int st, p = 0;

	argv[0] = (char *)prof_helper("stack-window", path, sizeof(path));
	test_child_start(&c, argv, NULL, false);
	test_child_expect(&c, "READY ", line, sizeof(line), TIMEOUT_MS);
	ck_assert_int_eq(sscanf(line, "READY %d", &p), 1);
	snprintf(pid, sizeof(pid), "%d", p);
	/* READY can arrive while its write(2) still returns: dump once the
	 * thread waits in stack_window_read()'s read(2). */
	test_wait_syscall(p, p, SYS_read, TIMEOUT_MS);
	st = test_run_capture(dargv, NULL, false, &out, &err, TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x: %s", st,
		      err);
	ck_assert_msg(strstr(out, "#0  ") && strstr(out, " stack_window_read+"),
		      "rbp %s: no frame #0 in the helper:\n%s", cfa[_i], out);
	ck_assert_msg(!strstr(out, "#1  "),
		      "rbp %s: a caller read from ctxdump's own memory:\n%s", cfa[_i],
		      out);
	ck_assert_msg(strstr(out, "(stack ends: unwinding needed memory outside the "
				  "snapshot)"),
		      "rbp %s:\n%s", cfa[_i], out);
	free(out);
	free(err);
	/* --json says so too (old: only the text did) */
	{
		char *jargv[] = {dargv[0], "--json", "--stacks", pid, NULL};

		st = test_run_capture(jargv, NULL, false, &out, &err, TIMEOUT_MS);
	}
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x: %s", st,
		      err);
	ck_assert_msg(strstr(out, "\"stack_end\": \"unwinding needed memory outside "
				  "the snapshot\""),
		      "rbp %s:\n%s", cfa[_i], out);
	free(out);
	free(err);
	st = test_child_finish(&c, TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "helper status 0x%x", st);
}
END_TEST

/* A 32-bit x86 program (ia32 compat mode): one PT_LOAD of the file,
 * whose code writes one byte (the file's first, mapped at ELF32_BASE) to
 * its standard output (eax 4, int $0x80) once it runs, and then loops on
 * pause(2) (eax 29). */
#define ELF32_BASE 0x08048000u
struct elf32_prog {
	Elf32_Ehdr eh;
	Elf32_Phdr ph;
	uint8_t code[31];
};
static const struct elf32_prog elf32_pause = {
	.eh = {.e_ident = {ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3, ELFCLASS32, ELFDATA2LSB,
			   EV_CURRENT},
	       .e_type = ET_EXEC,
	       .e_machine = EM_386,
	       .e_version = EV_CURRENT,
	       .e_entry = ELF32_BASE + offsetof(struct elf32_prog, code),
	       .e_phoff = sizeof(Elf32_Ehdr),
	       .e_ehsize = sizeof(Elf32_Ehdr),
	       .e_phentsize = sizeof(Elf32_Phdr),
	       .e_phnum = 1},
	.ph = {.p_type = PT_LOAD,
	       .p_vaddr = ELF32_BASE,
	       .p_paddr = ELF32_BASE,
	       .p_filesz = sizeof(struct elf32_prog),
	       .p_memsz = sizeof(struct elf32_prog),
	       .p_flags = PF_R | PF_X,
	       .p_align = 0x1000},
	/* mov $4, %eax (write); mov $1, %ebx; mov $ELF32_BASE, %ecx;
	 * mov $1, %edx; int $0x80; then mov $29, %eax (pause);
	 * int $0x80; jmp back to that mov */
	.code = {0xb8, 4,    0,    0,    0,    0xbb, 1,    0,    0,   0,    0xb9,
		 0x00, 0x80, 0x04, 0x08, 0xba, 1,    0,    0,    0,   0xcd, 0x80,
		 0xb8, 29,   0,    0,    0,    0xcd, 0x80, 0xeb, 0xf7},
};

/* Start elf32_pause from a file at path (a mkstemp() template), into
 * *pid; false (and nothing left behind) on a kernel that runs no 32-bit
 * programs.  elf32_stop() ends it. */
static bool
elf32_start(char *path, pid_t *pid)
{
	pid_t parent = getpid();
	int fd, status, p[2];
	ssize_t n;
	char b;

	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, &elf32_pause, sizeof(elf32_pause)),
			 (ssize_t)sizeof(elf32_pause));
	ck_assert_int_eq(fchmod(fd, 0755), 0);
	close(fd);
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	*pid = fork();
	ck_assert_int_ge(*pid, 0);
	if (*pid == 0) {
		char *cargv[] = {path, NULL}, *cenv[] = {NULL};

		/* It ends with this test if the test ends first (a failed
		 * assertion, a timeout): the signal is kept across the
		 * exec. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent ||
		    dup2(p[1], 1) != 1)
			_exit(127);
		execve(path, cargv, cenv);
		/* a kernel without ia32 emulation: not a failure here */
		_exit(errno == ENOEXEC ? 126 : 127);
	}
	close(p[1]);
	/* Its byte says it runs, its mapping in place (not polled: /proc/
	 * PID/exe names the file before the exec maps it); end of file
	 * says it exited first. */
	do
		n = read(p[0], &b, 1);
	while (n < 0 && errno == EINTR);
	close(p[0]);
	if (n != 1) {
		kill(*pid, SIGKILL);
		ck_assert_int_eq(waitpid(*pid, &status, 0), *pid);
		unlink(path);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 126) {
			fprintf(stderr, "elf32: not run: this kernel runs no "
					"32-bit programs\n");
			return false;
		}
		ck_abort_msg("%s did not start: status 0x%x", path, status);
	}
	return true;
}

static void
elf32_stop(const char *path, pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	unlink(path);
}

/* ctxdump cannot read a 32-bit process (none of its objects is an ELF
 * file it reads): the "no loaded object" error says why, not only "is a
 * writer loaded?" (old: that question alone), and so do the Symbol line
 * and JSON's symbol_error (old: "not found in any loaded object", which
 * says that every object was looked at, and no symbol_error). */
START_TEST(test_elf32_program_named)
{
	char path[] = "/tmp/ctxdump-elf32-XXXXXX", arg[16], *out, *err, *jout, *jerr;
	int st, jst;
	pid_t pid;

	if (!elf32_start(path, &pid))
		return;
	snprintf(arg, sizeof(arg), "%d", (int)pid);
	st = prof_run(&out, &err, arg, NULL);
	jst = prof_run(&jout, &jerr, "--json", arg, NULL);
	elf32_stop(path, pid);
	ck_assert_msg(st == 2, "status %d: %s", st, err);
	ck_assert_msg(strstr(err, "no loaded object of process") &&
			      strstr(err, "its executable is a 32-bit program: "
					  "ctxdump reads 64-bit processes only"),
		      "%s", err);
	ck_assert_msg(strstr(out,
			     "\nSymbol: otel_thread_ctx_v1 not looked up (a 32-bit "
			     "process: ctxdump reads 64-bit processes only)\n"),
		      "%s", out);
	ck_assert_msg(jst == 2, "status %d: %s", jst, jerr);
	ck_assert_msg(strstr(jout, "\"symbol\": null,\n  \"symbol_error\": \"a 32-bit "
				   "process: ctxdump reads 64-bit processes only\","),
		      "%s", jout);
	free(out);
	free(err);
	free(jout);
	free(jerr);
}
END_TEST

/* Nor can it record one: it refuses before it writes anything (old:
 * exit 0, a recording of "[truncated];s32+0x0" stacks, frames misread
 * as 64-bit ones). */
START_TEST(test_elf32_program_not_recorded)
{
	char path[] = "/tmp/ctxdump-elf32-XXXXXX", file[64], arg[16], want[160];
	char *out, *err;
	bool written;
	int st;
	pid_t pid;

	if (!elf32_start(path, &pid))
		return;
	snprintf(arg, sizeof(arg), "%d", (int)pid);
	snprintf(file, sizeof(file), "%s.rec", path);
	st = prof_run(&out, &err, "record", "-d", "0.1", "-o", file, arg, NULL);
	elf32_stop(path, pid);
	written = access(file, F_OK) == 0;
	unlink(file);
	ck_assert_msg(st == 2, "status %d: %s", st, err);
	snprintf(want, sizeof(want),
		 "ctxdump record: cannot record process %d: its executable is a "
		 "32-bit program: ctxdump reads 64-bit processes only\n",
		 (int)pid);
	ck_assert_str_eq(err, want);
	ck_assert_msg(!written, "%s was written", file);
	free(out);
	free(err);
}
END_TEST

/* Nor a process that starts one while recorded: the recording ends at
 * the exec, with what was recorded before it (exit 1, not all that was
 * asked for), and the report says why it ended (old: recorded on to the
 * end, exit 0, "[truncated];..." stacks of frames misread as 64-bit
 * ones).  sh, a 64-bit program, execs elf32_pause once a round is on
 * disk; a recorder that goes on for its -d 30 fails the test there. */
START_TEST(test_elf32_exec_ends_recording)
{
	char path[] = "/tmp/ctxdump-elf32-XXXXXX", file[64], errf[64], pid[16];
	char line[64], *out, *err;
	char *argv[] = {"/bin/sh", "-c", "echo READY; read x; exec \"$0\"", path, NULL};
	const char *args[] = {"-F", "50", "-d", "30", "-o", file, pid, NULL};
	struct test_child c;
	pid_t ep, rec;
	int st;

	/* the file, and whether this kernel runs it */
	if (!elf32_start(path, &ep))
		return;
	kill(ep, SIGKILL);
	waitpid(ep, NULL, 0);
	snprintf(file, sizeof(file), "%s.rec", path);
	prof_tmpfile(errf, sizeof(errf), "elf32-err");
	test_child_start(&c, argv, NULL, false);
	test_child_expect(&c, "READY", line, sizeof(line), TIMEOUT_MS);
	snprintf(pid, sizeof(pid), "%d", (int)c.pid);
	rec = prof_record_start(errf, args);
	/* the file appears with the first round recorded */
	prof_wait_file(file, 1, TIMEOUT_MS, rec, errf);
	test_child_send(&c, "exec\n");
	st = prof_record_wait(rec, 20000);
	err = prof_slurp(errf);
	kill(c.pid, SIGKILL);
	(void)test_child_finish(&c, TIMEOUT_MS);
	unlink(path);
	unlink(errf);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status 0x%x: %s", st,
		      err);
	snprintf(line, sizeof(line), "process %s ran execve() of a 32-bit program",
		 pid);
	ck_assert_msg(strstr(err, line) &&
			      strstr(err, ": ctxdump reads 64-bit processes only; the "
					  "recording ends there\n"),
		      "%s", err);
	free(err);
	ck_assert_int_eq(prof_run(&out, &err, "report", file, NULL), 0);
	/* (a loaded machine may add "(some ticks missed: ...)") */
	ck_assert_msg(strstr(out, "\nEnded: the process ran a 32-bit program"), "%s",
		      out);
	free(out);
	free(err);
	ck_assert_int_eq(prof_run(&out, &err, "report", "--folded", file, NULL), 0);
	unlink(file);
	ck_assert_msg(strstr(out, "[no trace]") && !strstr(out, "[truncated]"), "%s",
		      out);
	free(out);
	free(err);
}
END_TEST

TEST_SUITE(ctxdump_static_suite)
{
	Suite *s = suite_create("ctxdump: statically linked writers");
	char path[PATH_MAX];
	TCase *tc;
	int i;

	cw_require_ctxdump();
	/* test/helpers/meson.build builds them only where libc.a links */
	for (i = 0; i < N_WRITERS; i++)
		if (access(prof_helper(static_writers[i], path, sizeof(path)), X_OK))
			test_skip("%s is not built: this system cannot link "
				  "statically (no libc.a: Debian package libc6-dev)",
				  path);
	if (access(prof_helper("writer-le-static-stripped", path, sizeof(path)), X_OK))
		test_skip("%s is not built", path);

	tc = tcase_create("json");
	tcase_add_loop_test(tc, test_json_matches_writer, 0, N_WRITERS);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("text");
	tcase_add_loop_test(tc, test_text_matches_writer, 0, N_WRITERS);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("record");
	tcase_add_loop_test(tc, test_record_matches_writer, 0, N_WRITERS);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("stacks");
	tcase_add_loop_test(tc, test_stacks_reach_callers, 0, N_WRITERS);
	tcase_add_loop_test(tc, test_record_stacks_reach_callers, 0, N_WRITERS);
	if (!access(prof_helper("stack-window", path, sizeof(path)), X_OK))
		tcase_add_loop_test(tc, test_stacks_table_window_not_target_memory, 0,
				    2);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("stripped");
	tcase_add_test(tc, test_stripped_static_error);
	tcase_add_test(tc, test_ambiguous_locals_ignored);
	tcase_add_test(tc, test_explicit_loader_not_static);
	tcase_add_test(tc, test_explicit_loader_pie_read);
	tcase_add_test(tc, test_elf32_program_named);
	tcase_add_test(tc, test_elf32_program_not_recorded);
	tcase_add_test(tc, test_elf32_exec_ends_recording);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("memfd");
	tcase_add_loop_test(tc, test_memfd_program_read, 0, 2);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return s;
}
