/* SPDX-License-Identifier: Apache-2.0 */
/* ctxdump report on crafted recordings (doc/ctxdump.1 FILE FORMAT,
 * written here independently of the recorder): a recording is hostile
 * input, so a file of a few bytes per sample must cost the reader memory
 * and time bounded by what one sample can hold, and no string of it may
 * reach a terminal raw.
 *
 *  - --spans: a run whose every sample opens a new 1024-frame path keeps
 *    only that path (old: every node of the run, 1.4 GB here); spans past
 *    --max-spans are left out with a warning and exit status 1; parents
 *    and --collapse still come out right with the streaming call tree;
 *    a sample without its whole stack ([no stack], or truncated) ends a
 *    run's call tree (old: thread-start frames became spans, wrong
 *    parents)
 *  - --context-spans: 150000 context spans are found by sorting, not by
 *    a scan of the spans made so far per context (old: quadratic, minutes);
 *    their attributes leave out an index the key map lacks ("#7") and
 *    keys already in the span (old: "#7", duplicate keys)
 *  - --folded: 3000 distinct stacks of 1024 frames of 256-byte names are
 *    printed without holding all lines (old: 790 MB); the reader takes
 *    what the recorder writes (1024 frames, 256-byte strings, cut
 *    visibly) and no more
 *  - the summary and --folded escape what came from the target; the
 *    summary counts a trace for each request it has samples of (old: for
 *    the request of its first sample only), and groups by request the
 *    samples of a context without a trace id too (CTXSHIM_NEW_TRACES=0;
 *    old: left out)
 *  - report -V; `report DIR` names the error; a failed read in the middle
 *    of the file is fatal, not the end of the file
 *
 * Memory is bounded with RLIMIT_AS and the quadratic case with
 * RLIMIT_CPU, both far above what the report needs (not in a sanitizer
 * build: ASan reserves terabytes of address space). */
#include "test-prof.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/resource.h>

#include "process-ctx.h"

/* the trace id of rec_ctx(r, id, 0x4b, ...) */
#define TRACE_HEX "4b4b4b4b4b4b4b4b4b4b4b4b4b4b4b4b"

/* ---- a recording writer ---- */

struct rec {
	uint8_t *p;
	size_t len, cap;
	uint8_t pay[1 << 16]; /* the record being built */
	size_t plen;
};

static void
put(struct rec *r, const void *b, size_t n)
{
	if (r->len + n > r->cap) {
		r->cap = (r->len + n) * 2 + 4096;
		r->p = realloc(r->p, r->cap);
		ck_assert_ptr_nonnull(r->p);
	}
	memcpy(r->p + r->len, b, n);
	r->len += n;
}

static void
pay_raw(struct rec *r, const void *b, size_t n)
{
	ck_assert_uint_le(r->plen + n, sizeof(r->pay));
	memcpy(r->pay + r->plen, b, n);
	r->plen += n;
}

static void
pay_u(struct rec *r, uint64_t v)
{
	do {
		uint8_t b = v & 0x7f;

		v >>= 7;
		b |= v ? 0x80 : 0;
		pay_raw(r, &b, 1);
	} while (v);
}

static void
pay_bytes(struct rec *r, const void *b, size_t n)
{
	pay_u(r, n);
	pay_raw(r, b, n);
}

static void
pay_str(struct rec *r, const char *s)
{
	pay_bytes(r, s, strlen(s));
}

/* Append the payload built so far as a record of this type. */
static void
rec_end(struct rec *r, unsigned type)
{
	uint32_t pre = (uint32_t)type | (uint32_t)r->plen << 8;
	uint8_t le[4] = {(uint8_t)pre, (uint8_t)(pre >> 8), (uint8_t)(pre >> 16),
			 (uint8_t)(pre >> 24)};

	put(r, le, 4);
	put(r, r->pay, r->plen);
	r->plen = 0;
}

static void
rec_start_pid(struct rec *r, const char *comm, uint64_t pid)
{
	static const uint8_t hdr[16] = {'C', 'T', 'X', 'D', 'P', 'R', 'O', 'F',
					1,   0,   16,  0,   0,   0,   0,   0};

	memset(r, 0, offsetof(struct rec, pay));
	r->plen = 0;
	put(r, hdr, sizeof(hdr));
	pay_u(r, pid);
	pay_u(r, 1700000000000000000ull); /* start, realtime */
	pay_u(r, 1);                      /* start, monotonic */
	pay_u(r, 100);                    /* rate */
	pay_u(r, 128);                    /* max frames */
	pay_u(r, 65536);                  /* stack size */
	pay_str(r, comm);
	pay_bytes(r, "./srv", 6);
	pay_str(r, "test");
	rec_end(r, 1);
}

static void
rec_start(struct rec *r, const char *comm)
{
	rec_start_pid(r, comm, 4242);
}

static void
rec_string(struct rec *r, uint32_t id, const char *s, size_t n)
{
	pay_u(r, id);
	pay_bytes(r, s, n);
	rec_end(r, 6);
}

static void
rec_frame(struct rec *r, uint32_t id, uint32_t sym)
{
	pay_u(r, id);
	pay_u(r, 0x1000u * id);
	pay_u(r, sym);
	pay_u(r, 0);
	pay_u(r, 0);
	pay_u(r, 0);
	rec_end(r, 7);
}

/* Strings id to id + 3: "http.request.method", "GET", "http.route", "/x"
 * (a context with kv {id, id + 1, id + 2, id + 3} is request "GET /x"). */
static void
rec_get_x(struct rec *r, uint32_t id)
{
	rec_string(r, id, "http.request.method", 19);
	rec_string(r, id + 1, "GET", 3);
	rec_string(r, id + 2, "http.route", 10);
	rec_string(r, id + 3, "/x", 2);
}

/* Function i + 1 named names[i], and frame i + 1 in it, for each name. */
static void
rec_functions(struct rec *r, const char *const *names, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		rec_string(r, i + 1, names[i], strlen(names[i]));
		rec_frame(r, i + 1, i + 1);
	}
}

/* Frame ids innermost first; flags: PFILE_STACK_TRUNCATED (1) for a
 * stack whose unwinding stopped before the outermost frame,
 * PFILE_STACK_GUESSED (2) for one guessed from frame f[guessed] on. */
static void
rec_stack_guessed(struct rec *r,
		  uint32_t id,
		  unsigned flags,
		  const uint32_t *f,
		  size_t n,
		  uint32_t guessed)
{
	size_t i;

	pay_u(r, id);
	pay_u(r, flags);
	pay_u(r, n);
	for (i = 0; i < n; i++)
		pay_u(r, f[i]);
	if (flags & 2)
		pay_u(r, guessed);
	rec_end(r, 8);
}

static void
rec_stack_flags(struct rec *r, uint32_t id, unsigned flags, const uint32_t *f, size_t n)
{
	rec_stack_guessed(r, id, flags, f, n, 0);
}

/* Frame ids innermost first. */
static void
rec_stack(struct rec *r, uint32_t id, const uint32_t *f, size_t n)
{
	rec_stack_flags(r, id, 0, f, n);
}

/* A context with these flags (1: valid, 2: with a trace), trace id bytes
 * tr and span id; kv: key and value string ids. */
static void
rec_ctx_flags(struct rec *r,
	      uint32_t id,
	      unsigned flags,
	      uint8_t tr,
	      uint64_t span,
	      const uint32_t *kv,
	      size_t n_attrs)
{
	uint8_t trace[16], sp[8];
	size_t i;

	memset(trace, tr, sizeof(trace));
	for (i = 0; i < 8; i++)
		sp[i] = (uint8_t)(span >> (56 - 8 * i));
	pay_u(r, id);
	pay_u(r, 0); /* OTEP-4947 */
	pay_u(r, flags);
	pay_raw(r, trace, 16);
	pay_raw(r, sp, 8);
	pay_u(r, 1);
	pay_u(r, n_attrs);
	for (i = 0; i < 2 * n_attrs; i++)
		pay_u(r, kv[i]);
	rec_end(r, 9);
}

/* A context with trace and span id; kv: key and value string ids. */
static void
rec_ctx(struct rec *r,
	uint32_t id,
	uint8_t tr,
	uint64_t span,
	const uint32_t *kv,
	size_t n_attrs)
{
	rec_ctx_flags(r, id, 3, tr, span, kv, n_attrs);
}

static void
rec_round(struct rec *r, uint64_t t)
{
	pay_u(r, t);
	pay_u(r, 1000);
	pay_u(r, 1);
	rec_end(r, 10);
}

static void
rec_sample(struct rec *r, uint32_t tid, uint32_t stack, uint32_t ctx)
{
	pay_u(r, tid);
	pay_u(r, 'R');
	pay_u(r, stack);
	pay_u(r, ctx ? 1 : 0);
	if (ctx)
		pay_u(r, ctx);
	rec_end(r, 11);
}

static void
rec_thread(struct rec *r, uint32_t tid, const char *name)
{
	pay_u(r, tid);
	pay_str(r, name);
	rec_end(r, 5);
}

static void
rec_exec(struct rec *r, uint64_t t, const char *comm)
{
	pay_u(r, t);
	pay_str(r, comm);
	pay_bytes(r, "", 0);
	rec_end(r, 13);
}

static void
rec_resource(struct rec *r, const char *key, const char *value)
{
	pay_str(r, key);
	pay_str(r, value);
	rec_end(r, 4);
}

/* A PCTX record: the process context's payload of pl bytes. */
static void
rec_pctx(struct rec *r, const void *pc, size_t pl)
{
	pay_u(r, 1); /* published_at_ns */
	pay_bytes(r, pc, pl);
	rec_end(r, 2);
}

/* Thread 7 in function "work", in one traced context, for three rounds. */
static void
rec_work_samples(struct rec *r)
{
	static const uint32_t st1[] = {1};

	rec_string(r, 1, "work", 4);
	rec_frame(r, 1, 1);
	rec_stack(r, 1, st1, 1);
	rec_ctx(r, 1, 0x4b, 0x00f067aa0ba902b7ull, NULL, 0);
	for (int k = 0; k < 3; k++) {
		rec_round(r, 10000000ull * k);
		rec_sample(r, 7, 1, 1);
	}
}

static void
rec_finish(struct rec *r, char *path, size_t n, const char *tag)
{
	FILE *f;

	pay_u(r, 1000000000);
	for (int i = 0; i < 6; i++)
		pay_u(r, 0);
	rec_end(r, 12);
	prof_tmpfile(path, n, tag);
	f = fopen(path, "we");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(r->p, 1, r->len, f), r->len);
	ck_assert_int_eq(fclose(f), 0);
	free(r->p);
	r->p = NULL;
}

/* A recording of a process comm with this pid, started (malloc'd). */
static struct rec *
rec_new_pid(const char *comm, uint64_t pid)
{
	struct rec *r = malloc(sizeof(*r));

	ck_assert_ptr_nonnull(r);
	rec_start_pid(r, comm, pid);
	return r;
}

static struct rec *
rec_new(const char *comm)
{
	return rec_new_pid(comm, 4242);
}

/* rec_finish() r into a new file at path, and free r. */
static void
rec_save(struct rec *r, char *path, size_t n, const char *tag)
{
	rec_finish(r, path, n, tag);
	free(r);
}

/* ---- running report ---- */

static bool
sanitized(void)
{
	return getenv("ASAN_OPTIONS") || getenv("UBSAN_OPTIONS");
}

/* ctxdump report ARGS with standard input in_fd (-1: /dev/null),
 * standard output to out_path (NULL: /dev/null), at most as_mb MiB of
 * address space and cpu_s seconds of CPU (0: no limit); returns the
 * exit status, -SIG if killed; *err (malloc'd) has standard error. */
static int
run_report(const char *const *args,
	   int in_fd,
	   const char *out_path,
	   unsigned as_mb,
	   unsigned cpu_s,
	   char **err)
{
	char *argv[24] = {(char *)test_ctxdump_path(), "report"}, errf[64];
	int n = 2, st;
	pid_t pid;

	while (*args && n < 23)
		argv[n++] = (char *)*args++;
	argv[n] = NULL;
	prof_tmpfile(errf, sizeof(errf), "report-err");
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int in = in_fd >= 0 ? in_fd : open("/dev/null", O_RDONLY);
		int out = open(out_path ? out_path : "/dev/null",
			       O_WRONLY | O_TRUNC | O_CREAT, 0600);
		int e = open(errf, O_WRONLY | O_TRUNC);

		if (as_mb && !sanitized()) {
			struct rlimit rl = {(rlim_t)as_mb << 20, (rlim_t)as_mb << 20};

			setrlimit(RLIMIT_AS, &rl);
		}
		if (cpu_s) {
			struct rlimit rl = {cpu_s, cpu_s + 1};

			setrlimit(RLIMIT_CPU, &rl);
		}
		dup2(in, 0);
		dup2(out, 1);
		dup2(e, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	*err = prof_slurp(errf);
	unlink(errf);
	if (WIFSIGNALED(st))
		return -WTERMSIG(st);
	return WEXITSTATUS(st);
}

/* run_report(args) with standard output to out and no limits: it must
 * exit with status want, else "what exit N: its standard error". */
static void
report_to(const char *const *args, const char *out, int want, const char *what)
{
	char *err;
	int st = run_report(args, -1, out, 0, 0, &err);

	ck_assert_msg(st == want, "%s exit %d: %s", what, st, err);
	free(err);
}

/* The standard output (malloc'd) of report_to(args, ..., want, what). */
static char *
report_stdout(const char *const *args, int want, const char *what)
{
	char out[64], *o;

	prof_tmpfile(out, sizeof(out), "report-out");
	report_to(args, out, want, what);
	o = prof_slurp(out);
	unlink(out);
	return o;
}

/* The first line (malloc'd) that the python script prints about the
 * standard output of report_to(args, ..., 0, "report"). */
static char *
report_py(const char *script, const char *const *args)
{
	char out[64], *err, *res;
	int st;

	prof_tmpfile(out, sizeof(out), "report-py-out");
	report_to(args, out, 0, "report");
	st = prof_py(script, out, &res, &err);
	ck_assert_msg(st == 0, "python: %s", err);
	free(err);
	unlink(out);
	res[strcspn(res, "\n")] = '\0';
	return res;
}

/* Occurrences of needle in the file at path (read in pieces). */
static size_t
count_in_file(const char *path, const char *needle)
{
	size_t nl = strlen(needle), count = 0, have = 0;
	char buf[1 << 16];
	FILE *f = fopen(path, "re");

	ck_assert_ptr_nonnull(f);
	for (;;) {
		size_t got = fread(buf + have, 1, sizeof(buf) - 1 - have, f), i;
		char *p;

		have += got;
		buf[have] = '\0';
		for (p = buf; (p = strstr(p, needle)) != NULL; p += nl)
			count++;
		if (!got)
			break;
		/* keep a tail that may start a match */
		i = have >= nl - 1 ? have - (nl - 1) : 0;
		memmove(buf, buf + i, have - i);
		have -= i;
		/* the kept tail holds no whole match (it is shorter) */
	}
	fclose(f);
	return count;
}

/* ---- --spans ---- */

/* Two 1024-frame stacks that differ in their outermost frame, sampled in
 * turn by one thread in one context span: every sample leaves the path
 * of the one before at its root. */
static void
make_alternating(char *path, size_t n, uint32_t samples, bool pairs)
{
	static uint32_t a[1024], b[1024];
	struct rec *r = rec_new("srv");
	uint32_t i;

	rec_string(r, 1, "outerA", 6);
	rec_string(r, 2, "outerB", 6);
	rec_string(r, 3, "work", 4);
	for (i = 1; i <= 3; i++)
		rec_frame(r, i, i);
	for (i = 0; i < 1023; i++)
		a[i] = b[i] = 3;
	a[1023] = 1;
	b[1023] = 2;
	rec_stack(r, 1, a, 1024);
	rec_stack(r, 2, b, 1024);
	rec_ctx(r, 1, 0x4b, 0x00f067aa0ba902b7ull, NULL, 0);
	rec_round(r, 0);
	for (i = 0; i < samples; i++)
		rec_sample(r, 7, 1 + ((pairs ? i >> 1 : i) & 1), 1);
	rec_save(r, path, n, "alt");
}

START_TEST(report_spans_memory_bounded)
{
	const char *args[] = {"--spans", NULL, NULL};
	char file[64], *err;
	int st;

	/* 30000 samples of 1024 new nodes each: the old reader kept 30M
	 * nodes (1.4 GB); none of them is a span (one sample each) */
	make_alternating(file, sizeof(file), 30000, false);
	args[1] = file;
	st = run_report(args, -1, NULL, 512, 0, &err);
	ck_assert_msg(st == 0, "report --spans exit %d: %s", st, err);
	free(err);
	unlink(file);
}
END_TEST

START_TEST(report_spans_budget)
{
	const char *args[] = {"--spans", "--max-spans", "1000", NULL, NULL};
	char file[64], out[64], *err;
	int st;

	/* pairs of samples: 1024 spans of 2 samples per pair, 3M in all */
	make_alternating(file, sizeof(file), 6000, true);
	prof_tmpfile(out, sizeof(out), "spans-out");
	args[3] = file;
	st = run_report(args, -1, out, 512, 0, &err);
	ck_assert_msg(st == 1, "report exit %d: %s", st, err);
	ck_assert_msg(strstr(err, "more than 1000 spans: 3071000 left out"),
		      "warning: %s", err);
	ck_assert_uint_eq(count_in_file(out, "\"spanId\""), 1000);
	ck_assert_uint_eq(count_in_file(out, "\"resourceSpans\""), 1);
	free(err);
	/* with --min-samples 3 none of them is a span */
	args[1] = "--min-samples";
	args[2] = "3";
	st = run_report(args, -1, out, 512, 0, &err);
	ck_assert_msg(st == 0, "report exit %d: %s", st, err);
	ck_assert_uint_eq(count_in_file(out, "\"spanId\""), 0);
	free(err);
	unlink(out);
	unlink(file);
}
END_TEST

/* Spans of a small recording, checked in python: per span name, its
 * parent's name ("ctx" for the context's span, "-" for none) and sample
 * count, one "name parent count" line each, sorted. */
static const char spans_tree_py[] =
	"import json, sys\n"
	"d = json.load(open(sys.argv[1]))\n"
	"sp = d['resourceSpans'][0]['scopeSpans'][0]['spans']\n"
	"ids = {s['spanId']: s['name'] for s in sp}\n"
	"out = []\n"
	"for s in sp:\n"
	"    a = {x['key']: x['value'] for x in s['attributes']}\n"
	"    p = s.get('parentSpanId')\n"
	"    pn = '-' if p is None else ids.get(p, 'ctx' if p == '00f067aa0ba902b7' "
	"else '?' + p)\n"
	"    out.append('%s %s %s %s' % (s['name'], pn, "
	"a['ctxdump.samples']['intValue'],\n"
	"               a.get('ctxdump.frames', {}).get('stringValue', '')))\n"
	"print('|'.join(sorted(out)))\n";

/* spans_tree_py's line for report --spans [opt] file. */
static char *
spans_tree(const char *file, const char *opt)
{
	const char *args[] = {"--spans", opt ? opt : file, opt ? file : NULL, NULL};

	return report_py(spans_tree_py, args);
}

/* spans_tree() with the options opts (NULL-terminated, at most 8). */
static char *
spans_tree_opts(const char *file, const char *const *opts)
{
	const char *args[12] = {"--spans"};
	size_t n = 1;

	while (*opts && n < 10)
		args[n++] = *opts++;
	args[n++] = file;
	args[n] = NULL;
	return report_py(spans_tree_py, args);
}

/* The filters select samples for --spans as they do for the summary and
 * --folded, also when the contexts of one span differ in their
 * attributes: thread 7 serves one request (one trace and span id) whose
 * route is known from its third sample on.  Old: a run was kept or left
 * out by its first sample, so --path "GET /x" (3 samples in the summary)
 * gave no span, and --attr http.request.method=GET --path "GET /x" none
 * either. */
START_TEST(report_spans_filter_per_sample)
{
	static const char *const names[] = {"start", "loop", "handle", "work", "wait"};
	static const uint32_t s_req[] = {4, 3, 2, 1}, s_idle[] = {5, 2, 1};
	/* strings 6..9 */
	static const uint32_t kv1[] = {6, 7}, kv2[] = {6, 7, 8, 9};
	static const uint32_t seq[] = {1, 1, 2, 2, 2};
	const char *path[] = {"--path", "GET /x", NULL};
	const char *route[] = {"--attr", "http.route", NULL};
	struct rec *r = rec_new("srv");
	char file[64], *t;
	uint32_t i;

	rec_functions(r, names, 5);
	rec_get_x(r, 6);
	rec_stack(r, 1, s_req, 4);
	rec_stack(r, 2, s_idle, 3);
	rec_ctx(r, 1, 0x4b, 0x00f067aa0ba902b7ull, kv1, 1);
	rec_ctx(r, 2, 0x4b, 0x00f067aa0ba902b7ull, kv2, 2);
	for (i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
		rec_round(r, 10000000ull * i);
		rec_sample(r, 7, 1, seq[i]);
		rec_sample(r, 8, 2, 0);
	}
	rec_save(r, file, sizeof(file), "filter");
	t = spans_tree(file, NULL);
	ck_assert_str_eq(t, "handle ctx 5 handle|work handle 5 work");
	free(t);
	t = spans_tree_opts(file, path);
	ck_assert_str_eq(t, "handle ctx 3 handle|work handle 3 work");
	free(t);
	t = spans_tree_opts(file, route);
	ck_assert_str_eq(t, "handle ctx 3 handle|work handle 3 work");
	free(t);
	unlink(file);
}
END_TEST

/* A thread's recording (into file): the outermost first, main (also
 * idle: plumbing), handle, then work/db below it; c -> d -> e always
 * whole; one sample idle. */
static void
tree_recording(char *file, size_t n, const char *tag)
{
	static const char *const names[] = {"main", "loop", "handle", "work",
					    "db",   "c",    "d",      "e"};
	static const uint32_t s_idle[] = {2, 1}, s_work[] = {4, 3, 1},
			      s_db[] = {5, 3, 1}, s_cde[] = {8, 7, 6, 3, 1};
	static const struct {
		uint32_t stack, ctx;
	} seq[] = {{1, 0}, {2, 1}, {2, 1}, {2, 1}, {3, 1},
		   {3, 1}, {4, 1}, {4, 1}, {2, 1}};
	struct rec *r = rec_new("srv");
	uint32_t i;

	rec_functions(r, names, 8);
	rec_stack(r, 1, s_idle, 2);
	rec_stack(r, 2, s_work, 3);
	rec_stack(r, 3, s_db, 3);
	rec_stack(r, 4, s_cde, 5);
	rec_ctx(r, 1, 0x4b, 0x00f067aa0ba902b7ull, NULL, 0);
	for (i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
		rec_round(r, 10000000ull * i);
		rec_sample(r, 7, seq[i].stack, seq[i].ctx);
	}
	rec_save(r, file, n, tag);
}

START_TEST(report_spans_tree)
{
	char file[64], *t;

	tree_recording(file, sizeof(file), "tree");
	t = spans_tree(file, NULL);
	/* main is plumbing (idle too); the last work has one sample */
	ck_assert_str_eq(t, "c handle 2 c|d c 2 d|db handle 2 db|e d 2 e|"
			    "handle ctx 8 handle|work handle 3 work");
	free(t);
	t = spans_tree(file, "--collapse");
	ck_assert_str_eq(t, "c handle 2 c;d;e|db handle 2 db|handle ctx 8 handle|"
			    "work handle 3 work");
	free(t);
	unlink(file);
}
END_TEST

/* --max-spans leaves out the deepest spans, so that every span printed
 * has its parent printed too (or the context's span): the recording of
 * report_spans_tree, whose spans are handle (depth 1), work, db, c
 * (depth 2), d and e; children close, and are made, before their
 * parents.  Old: the first spans made were kept, work and db, children
 * of handle, which was left out (parentSpanId of a span not in the
 * output); with --context-spans the context span was left out too. */
START_TEST(report_spans_budget_keeps_parents)
{
	static const struct {
		const char *opt, *max, *tree, *warning;
	} cases[] = {
		{"--collapse", "1", "handle ctx 8 handle",
		 "more than 1 span: 3 left out"},
		{"--collapse", "2", "handle ctx 8 handle|work handle 3 work",
		 "more than 2 spans: 2 left out"},
		{"--collapse", "3",
		 "db handle 2 db|handle ctx 8 handle|work handle 3 work",
		 "more than 3 spans: 1 left out"},
		{"--min-samples=2", "2", "handle ctx 8 handle|work handle 3 work",
		 "more than 2 spans: 4 left out"},
		{"--context-spans", "2",
		 "[context span] - 8 |handle [context span] 8 handle",
		 "more than 2 spans: 5 left out"},
	};
	const char *args[] = {"--spans", NULL, "--max-spans", NULL, NULL, NULL};
	char file[64], out[64], *err, *t;
	size_t i;
	int st;

	tree_recording(file, sizeof(file), "budget-parents");
	prof_tmpfile(out, sizeof(out), "budget-parents-out");
	args[4] = file;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		args[1] = cases[i].opt;
		args[3] = cases[i].max;
		st = run_report(args, -1, out, 0, 0, &err);
		ck_assert_msg(st == 1, "case %zu: report exit %d: %s", i, st, err);
		ck_assert_msg(strstr(err, cases[i].warning), "case %zu: %s", i, err);
		free(err);
		st = prof_py(spans_tree_py, out, &t, &err);
		ck_assert_msg(st == 0, "python: %s", err);
		free(err);
		t[strcspn(t, "\n")] = '\0';
		ck_assert_msg(strcmp(t, cases[i].tree) == 0, "case %zu: %s", i, t);
		free(t);
	}
	unlink(out);
	unlink(file);
}
END_TEST

/* A request without a trace id (CTXSHIM_NEW_TRACES=0: zero ids, but its
 * method and route) runs the same handler as a traced one; its stacks are
 * no idle thread's: thread 7 serves a traced GET /x in handle;compute,
 * thread 8 an untraced one in the same frames, thread 9 waits in
 * start;loop;epoll_wait (the plumbing is start;loop).  Old: thread 8's
 * stacks were taken for idle ones, handle and compute for plumbing, and
 * the traced request had no span at all. */
START_TEST(report_spans_untraced_request_not_idle)
{
	static const char *const names[] = {"start", "loop",  "handle",    "compute",
					    "leafA", "leafB", "epoll_wait"};
	static const uint32_t s_a[] = {5, 4, 3, 2, 1}, s_b[] = {6, 4, 3, 2, 1},
			      s_idle[] = {7, 2, 1};
	/* strings 8..11 */
	static const uint32_t kv[] = {8, 9, 10, 11};
	struct rec *r = rec_new("srv");
	char file[64], *t;
	uint32_t i;

	rec_functions(r, names, 7);
	rec_get_x(r, 8);
	rec_stack(r, 1, s_a, 5);
	rec_stack(r, 2, s_b, 5);
	rec_stack(r, 3, s_idle, 3);
	rec_ctx(r, 1, 0x4b, 0x00f067aa0ba902b7ull, kv, 2);
	rec_ctx_flags(r, 2, 1, 0, 0, kv, 2);
	for (i = 0; i < 4; i++) {
		rec_round(r, 10000000ull * i);
		rec_sample(r, 7, i % 2 ? 1 : 2, 1);
		rec_sample(r, 8, 2, 2);
		rec_sample(r, 9, 3, 0);
	}
	rec_save(r, file, sizeof(file), "untraced-busy");
	t = spans_tree(file, NULL);
	ck_assert_str_eq(t, "compute handle 4 compute|handle ctx 4 handle");
	free(t);
	unlink(file);
}
END_TEST

/* A sample without its whole stack (unwinding failed: [no stack]; or it
 * stopped short of the outermost frame: PFILE_STACK_TRUNCATED; or its
 * outer frames were guessed past code without unwind information:
 * PFILE_STACK_GUESSED) cannot be placed in a run's call tree: the tree
 * ends there and the samples after it make another.  Thread 7 runs clone3;start_thread;worker;handle;
 * small;spin in a context, thread 8 idles in clone3;start_thread;worker;
 * idle (those three frames are plumbing).  Old: a sample without a
 * stack, or a truncated one (big;spin, taken for outermost frames), ended
 * every open node and cut the plumbing to nothing: clone3, start_thread
 * and worker became spans (clone3 a child of the context span, handle
 * one of worker), and big a child of the context span; and guessed frames
 * (big;clone3 outside small;spin) were taken as known: big became a
 * span, and small and spin spans of it. */
START_TEST(report_spans_stackless_sample)
{
	static const char *const names[] = {"clone3", "start_thread", "worker", "idle",
					    "handle", "small",        "big",    "spin"};
	/* innermost first: idle; handle/small; big/spin cut below handle;
	 * small/spin with big and clone3 guessed outside it */
	static const uint32_t s_idle[] = {4, 3, 2, 1}, s_small[] = {8, 6, 5, 3, 2, 1},
			      s_big[] = {8, 7}, s_guess[] = {8, 6, 7, 1};
	/* per case, the stack of thread 7 in each round: 0 none, 3 cut,
	 * 4 guessed */
	static const struct {
		const char *what;
		uint32_t seq[9];
		size_t n;
		const char *want;
	} cases[] = {
		{"no stack in the middle",
		 {2, 2, 2, 0, 2, 2, 2},
		 7,
		 "handle ctx 3 handle|handle ctx 3 handle|small handle 3 small|"
		 "small handle 3 small|spin small 3 spin|spin small 3 spin"},
		{"truncated stacks in the middle",
		 {2, 2, 2, 3, 3, 3, 2, 2, 2},
		 9,
		 "handle ctx 3 handle|handle ctx 3 handle|small handle 3 small|"
		 "small handle 3 small|spin small 3 spin|spin small 3 spin"},
		{"guessed stacks in the middle",
		 {2, 2, 2, 4, 4, 4, 2, 2, 2},
		 9,
		 "handle ctx 3 handle|handle ctx 3 handle|small handle 3 small|"
		 "small handle 3 small|spin small 3 spin|spin small 3 spin"},
		{"no stack first",
		 {0, 2, 2, 2},
		 4,
		 "handle ctx 3 handle|small handle 3 small|spin small 3 spin"},
	};
	unsigned c;

	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct rec *r = rec_new("srv");
		char file[64], *t;
		uint32_t i;

		rec_functions(r, names, 8);
		rec_stack(r, 1, s_idle, 4);
		rec_stack(r, 2, s_small, 6);
		rec_stack_flags(r, 3, 1, s_big, 2);
		rec_stack_guessed(r, 4, 2, s_guess, 4, 2);
		rec_ctx(r, 1, 0x4b, 0x00f067aa0ba902b7ull, NULL, 0);
		for (i = 0; i < cases[c].n; i++) {
			rec_round(r, 10000000ull * i);
			rec_sample(r, 7, cases[c].seq[i], 1);
			rec_sample(r, 8, 1, 0);
		}
		rec_save(r, file, sizeof(file), "stackless");
		t = spans_tree(file, NULL);
		ck_assert_msg(strcmp(t, cases[c].want) == 0, "%s: spans %s, want %s",
			      cases[c].what, t, cases[c].want);
		free(t);
		unlink(file);
	}
}
END_TEST

/* A recording whose only idle thread shares no frame with the busy one
 * (the main thread waits in main(); the worker threads are all in
 * requests): the worker's thread start is plumbing as when no thread is
 * idle (old: clone3, start_thread and worker each a span of the context,
 * one inside the other). */
START_TEST(report_spans_idle_elsewhere)
{
	static const char *const names[] = {"clone3", "start_thread", "worker",
					    "handle", "small",        "big",
					    "_start", "main",         "wait"};
	/* innermost first */
	static const uint32_t s_small[] = {5, 4, 3, 2, 1}, s_big[] = {6, 4, 3, 2, 1},
			      s_main[] = {9, 8, 7};
	struct rec *r = rec_new("srv");
	char file[64], *t;
	uint32_t i;

	rec_functions(r, names, 9);
	rec_stack(r, 1, s_small, 5);
	rec_stack(r, 2, s_big, 5);
	rec_stack(r, 3, s_main, 3);
	rec_ctx(r, 1, 0x4b, 0x00f067aa0ba902b7ull, NULL, 0);
	for (i = 0; i < 6; i++) {
		rec_round(r, 10000000ull * i);
		rec_sample(r, 7, i < 3 ? 1 : 2, 1);
		rec_sample(r, 8, 3, 0);
	}
	rec_save(r, file, sizeof(file), "elsewhere");
	t = spans_tree(file, NULL);
	ck_assert_str_eq(t,
			 "big handle 3 big|handle ctx 6 handle|small handle 3 small");
	free(t);
	unlink(file);
}
END_TEST

/* ---- --context-spans ---- */

START_TEST(report_context_spans_linear)
{
	const char *args[] = {"--spans", "--context-spans", NULL, NULL};
	enum { N = 150000 };
	struct rec *r = rec_new("srv");
	char file[64], out[64], *err;
	uint32_t i;
	int st;

	rec_round(r, 0);
	/* N context spans, one sample each, and every one of them twice
	 * more under a second context id (attributes changed) */
	rec_string(r, 1, "http.route", 10);
	rec_string(r, 2, "/x", 2);
	for (i = 1; i <= N; i++) {
		static const uint32_t kv[] = {1, 2};

		rec_ctx(r, 2 * i - 1, 0x4b, i, NULL, 0);
		rec_ctx(r, 2 * i, 0x4b, i, kv, 1);
		rec_sample(r, 7, 0, 2 * i - 1);
		rec_sample(r, 8, 0, 2 * i);
	}
	rec_save(r, file, sizeof(file), "ctxspans");
	prof_tmpfile(out, sizeof(out), "ctxspans-out");
	args[2] = file;
	/* linear: well under a second; the old scan took minutes */
	st = run_report(args, -1, out, 0, 20 * test_time_scale(), &err);
	ck_assert_msg(st == 0, "report exit %d: %s", st, err);
	ck_assert_uint_eq(count_in_file(out, "\"kind\":2"), N);
	ck_assert_uint_eq(count_in_file(out,
					"\"ctxdump.samples\",\"value\":{\"intValue\":"
					"\"2\"}"),
			  N);
	free(err);
	unlink(out);
	unlink(file);
}
END_TEST

/* --context-spans: OTEP-4947 has readers ignore an attribute whose index
 * the key map lacks (the recorder names it "#7", as the dump does), and
 * OTLP keys are unique within a span: two keys of more than 256 bytes
 * that the reader cuts to the same 253 + "...", and a key ctxdump sets
 * itself (thread.id), would repeat one.  Old: "#7" was exported as a key,
 * the cut key twice and thread.id twice; now they are left out and
 * counted in droppedAttributesCount.  A key map that really has a key
 * "#9" keeps it. */
static const char ctx_attrs_py[] =
	"import json, sys\n"
	"d = json.load(open(sys.argv[1]))\n"
	"sp = d['resourceSpans'][0]['scopeSpans'][0]['spans']\n"
	"out = []\n"
	"for s in [x for x in sp if x['kind'] == 2]:\n"
	"    keys = [a['key'] for a in s['attributes']]\n"
	"    v = {a['key']: list(a['value'].values())[0] for a in s['attributes']}\n"
	"    cut = [k for k in keys if k.endswith('...')]\n"
	"    out.append('unique=%s #7=%s #9=%s cut=%d:%s tid=%s route=%s dropped=%s' % "
	"(\n"
	"        len(keys) == len(set(keys)), '#7' in v, v.get('#9'),\n"
	"        len(cut), v.get(cut[0]) if cut else '', v.get('thread.id'),\n"
	"        v.get('http.route'), s.get('droppedAttributesCount', 0)))\n"
	"print('|'.join(out))\n";

START_TEST(report_context_span_attr_keys)
{
	static const char *const key_map[] = {"http.route", "#9"};
	const char *args[] = {"--spans", "--context-spans", NULL, NULL};
	struct rec *r = rec_new("srv");
	char file[64], *res, long_a[300], long_b[300];
	uint8_t pc[512];
	size_t pl = 0;
	/* route, #7 (index 7: no such key), two long keys, thread.id, #9 */
	static const uint32_t kv[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};

	ck_assert_int_eq(
		pctx_encode(pc, sizeof(pc), &pl, NULL, 0, "tlsdesc_v1_dev", key_map, 2),
		0);
	memset(long_a, 'k', sizeof(long_a));
	memcpy(long_b, long_a, sizeof(long_b));
	long_a[sizeof(long_a) - 1] = 'A';
	long_b[sizeof(long_b) - 1] = 'B';
	rec_pctx(r, pc, pl);
	rec_string(r, 1, "http.route", 10);
	rec_string(r, 2, "/x", 2);
	rec_string(r, 3, "#7", 2);
	rec_string(r, 4, "seven", 5);
	rec_string(r, 5, long_a, sizeof(long_a));
	rec_string(r, 6, "first", 5);
	rec_string(r, 7, long_b, sizeof(long_b));
	rec_string(r, 8, "second", 6);
	rec_string(r, 9, "thread.id", 9);
	rec_string(r, 10, "1", 1);
	rec_string(r, 11, "#9", 2);
	rec_string(r, 12, "nine", 4);
	rec_ctx(r, 1, 0x4b, 0x00f067aa0ba902b7ull, kv, 6);
	rec_round(r, 0);
	rec_sample(r, 7, 0, 1);
	rec_round(r, 10000000);
	rec_sample(r, 7, 0, 1);
	rec_save(r, file, sizeof(file), "ctxattrs");
	args[2] = file;
	res = report_py(ctx_attrs_py, args);
	ck_assert_str_eq(res, "unique=True #7=False #9=nine cut=1:first tid=7 "
			      "route=/x dropped=3");
	free(res);
	unlink(file);
}
END_TEST

/* A context span's attributes grow while it runs (a route is set once it
 * is known): the span is named after its last sample and has its
 * attributes (old: after its first, "GET" without the route). */
START_TEST(report_context_span_last_attrs)
{
	const char *args[] = {"--spans", "--context-spans", NULL, NULL};
	static const uint32_t kv_m[] = {1, 2}, kv_mr[] = {1, 2, 3, 4}, st1[] = {1};
	struct rec *r = rec_new("srv");
	char file[64], *o;

	rec_get_x(r, 1);
	rec_string(r, 5, "work", 4);
	rec_frame(r, 1, 5);
	rec_stack(r, 1, st1, 1);
	/* one span (same ids), its route known from the second context on */
	rec_ctx(r, 1, 0x4b, 0x00f067aa0ba902b7ull, kv_m, 1);
	rec_ctx(r, 2, 0x4b, 0x00f067aa0ba902b7ull, kv_mr, 2);
	rec_round(r, 0);
	rec_sample(r, 7, 1, 1);
	rec_round(r, 10000000);
	rec_sample(r, 7, 1, 2);
	rec_round(r, 20000000);
	rec_sample(r, 7, 1, 2);
	rec_save(r, file, sizeof(file), "ctxlast");
	args[2] = file;
	o = report_stdout(args, 0, "report");
	ck_assert_msg(strstr(o, "\"name\":\"GET /x\",\"kind\":2,"), "%s", o);
	ck_assert_msg(strstr(o, "{\"key\":\"http.route\",\"value\":{\"stringValue\":"
				"\"/x\"}}"),
		      "%s", o);
	ck_assert_msg(strstr(o, "{\"key\":\"ctxdump.samples\",\"value\":{\"intValue\":"
				"\"3\"}}"),
		      "%s", o);
	free(o);
	unlink(file);
}
END_TEST

/* A tid's name is its program's: after an exec the thread at the pid
 * (and any reused tid) has another name, which the spans of the program
 * before must not take. */
static const char thread_names_py[] =
	"import json, sys\n"
	"d = json.load(open(sys.argv[1]))\n"
	"out = []\n"
	"for rs in d['resourceSpans']:\n"
	"    for s in rs['scopeSpans'][0]['spans']:\n"
	"        v = {a['key']: list(a['value'].values())[0] for a in "
	"s['attributes']}\n"
	"        out.append('%s:%s:%s' % (s['traceId'][:2], s['kind'],\n"
	"                                 v.get('thread.name')))\n"
	"print(' '.join(sorted(out)))\n";

START_TEST(report_thread_name_per_image)
{
	const char *args[] = {"--spans", "--context-spans", NULL, NULL};
	struct rec *r = rec_new("srv");
	char file[64], *res;

	rec_thread(r, 7, "before");
	rec_ctx(r, 1, 0x4b, 1, NULL, 0);
	rec_round(r, 0);
	rec_sample(r, 7, 0, 1);
	rec_round(r, 10000000);
	rec_sample(r, 7, 0, 1);
	rec_exec(r, 15000000, "srv2");
	rec_thread(r, 7, "after");
	rec_ctx(r, 2, 0x4c, 2, NULL, 0);
	rec_round(r, 20000000);
	rec_sample(r, 7, 0, 2);
	rec_round(r, 30000000);
	rec_sample(r, 7, 0, 2);
	rec_save(r, file, sizeof(file), "tnames");
	args[2] = file;
	res = report_py(thread_names_py, args);
	ck_assert_str_eq(res, "4b:2:before 4c:2:after");
	free(res);
	unlink(file);
}
END_TEST

/* ---- --folded and the reader's limits ---- */

START_TEST(report_folded_memory_bounded)
{
	const char *args[] = {"--folded", NULL, NULL};
	static uint32_t f[1024];
	struct rec *r = rec_new("srv");
	char file[64], name[256], *err;
	uint32_t i, b;
	int st;

	memset(name, 'A', sizeof(name));
	rec_string(r, 1, name, sizeof(name));
	memset(name, 'B', sizeof(name));
	rec_string(r, 2, name, sizeof(name));
	rec_frame(r, 1, 1);
	rec_frame(r, 2, 2);
	rec_round(r, 0);
	/* 3000 distinct stacks, lines of 263 KB: 790 MB in all */
	for (i = 1; i <= 3000; i++) {
		for (b = 0; b < 1024; b++)
			f[b] = b < 12 ? 1 + ((i >> b) & 1) : 1;
		rec_stack(r, i, f, 1024);
		rec_sample(r, 7, i, 0);
	}
	rec_save(r, file, sizeof(file), "folded");
	args[1] = file;
	st = run_report(args, -1, NULL, 512, 0, &err);
	ck_assert_msg(st == 0, "report --folded exit %d: %s", st, err);
	free(err);
	unlink(file);
}
END_TEST

/* An EXEC record and a PCTX record after it are a few bytes, a program
 * image with a decoded process context 20 KiB: past 1024 images the
 * execs are only counted, and said so (100000 pairs: 2 GB before). */
START_TEST(report_exec_images_bounded)
{
	const char *args[] = {NULL, NULL};
	struct rec *r = rec_new("srv");
	char file[64], *err;
	uint32_t i;
	int st;

	rec_round(r, 0);
	for (i = 0; i < 100000; i++) {
		rec_exec(r, 1000 + i, "x");
		rec_pctx(r, "", 0);
	}
	rec_sample(r, 7, 0, 0);
	rec_save(r, file, sizeof(file), "exec-images");
	args[0] = file;
	st = run_report(args, -1, NULL, 256, 0, &err);
	ck_assert_msg(st == 0, "report exit %d: %s", st, err);
	ck_assert_msg(strstr(err, "98977 execs past the first 1023 are not told apart"),
		      "%s", err);
	free(err);
	unlink(file);
}
END_TEST

/* EXEC records are a few bytes each: a report must not do work per image
 * and per span (old: one scan of every span per image, 100000 spans and
 * 100000 EXEC records took 11 s), nor walk an image's resources per
 * sample (old: 40000 RESOURCE records and 40000 samples took 8.5 s). */
START_TEST(report_exec_records_linear)
{
	const char *sargs[] = {"--spans", "--context-spans", NULL, NULL};
	const char *fargs[] = {"--folded", NULL, NULL};
	enum { N = 100000 };
	struct rec *r = rec_new("srv");
	char file[64], out[64], name[32], *err;
	uint32_t i;
	int st;

	rec_round(r, 0);
	for (i = 1; i <= N; i++) {
		rec_ctx(r, i, 0x4b, i, NULL, 0);
		rec_sample(r, 7, 0, i);
	}
	for (i = 0; i < N; i++)
		rec_exec(r, 1000 + i, "");
	rec_finish(r, file, sizeof(file), "exec-spans");
	prof_tmpfile(out, sizeof(out), "exec-spans-out");
	sargs[2] = file;
	st = run_report(sargs, -1, out, 0, 3 * test_time_scale(), &err);
	ck_assert_msg(st == 0, "report --spans exit %d: %s", st, err);
	ck_assert_uint_eq(count_in_file(out, "\"kind\":2"), N);
	free(err);
	unlink(out);
	unlink(file);

	rec_start(r, "srv");
	rec_round(r, 0);
	for (i = 0; i < N / 2; i++) {
		snprintf(name, sizeof(name), "k%u", (unsigned)i);
		rec_resource(r, name, "v");
	}
	for (i = 0; i < N / 2; i++)
		rec_sample(r, 7, 0, 0);
	rec_save(r, file, sizeof(file), "exec-folded");
	fargs[1] = file;
	st = run_report(fargs, -1, NULL, 0, 3 * test_time_scale(), &err);
	ck_assert_msg(st == 0, "report --folded exit %d: %s", st, err);
	free(err);
	unlink(file);
}
END_TEST

START_TEST(report_reader_limits)
{
	const char *args[] = {"--folded", NULL, NULL};
	static uint32_t f[1025];
	static const uint8_t zero[16];
	struct rec *r = rec_new("srv");
	char file[64], out[64], big[1000], *err, *o, *line;
	uint32_t i;
	int st;

	memset(big, 'x', sizeof(big));
	/* U+1F600 across the cut (253) before its last byte: the most a
	 * cut backs off */
	memcpy(big + 250, "\xf0\x9f\x98\x80", 4);
	rec_string(r, 1, big, sizeof(big));
	rec_string(r, 2, "leaf", 4);
	rec_frame(r, 1, 1);
	rec_frame(r, 2, 2);
	for (i = 0; i < 1025; i++)
		f[i] = 1;
	f[0] = 2;
	rec_stack(r, 1, f + 1, 1024); /* 1024 frames: taken */
	rec_stack(r, 2, f, 1025);     /* 1025: malformed */
	/* a context of layout 256: malformed, not taken as 0 (OTEP-4947) */
	pay_u(r, 1);
	pay_u(r, 256);
	pay_u(r, 1);
	pay_raw(r, zero, 16);
	pay_raw(r, zero, 8);
	pay_u(r, 1);
	pay_u(r, 0);
	rec_end(r, 9);
	rec_round(r, 0);
	rec_sample(r, 7, 1, 0);
	rec_sample(r, 7, 2, 0); /* of stack 2, not defined: malformed */
	/* a round whose time has bits past 64: malformed, not cut to 64 */
	pay_raw(r, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 10);
	pay_u(r, 1000);
	pay_u(r, 1);
	rec_end(r, 10);
	rec_save(r, file, sizeof(file), "limits");
	prof_tmpfile(out, sizeof(out), "limits-out");
	args[1] = file;
	st = run_report(args, -1, out, 0, 0, &err);
	ck_assert_msg(st == 1, "report exit %d: %s", st, err);
	ck_assert_msg(strstr(err, "4 malformed records (the first at offset "), "%s",
		      err);
	free(err);
	o = prof_slurp(out);
	/* stack 1: 1024 names cut before the U+1F600, marked: 250 x and "..."
	 * (stack 2 was skipped: its sample has none) */
#define PFX "unknown_service:srv;[no trace];"
	ck_assert_msg(strncmp(o, PFX "[no stack] 1\n", strlen(PFX) + 13) == 0, "%.60s",
		      o);
	line = o + strlen(PFX) + 13;
	memset(big, 'x', 250);
	memcpy(big + 250, "...;", 5);
	ck_assert_msg(strncmp(line, PFX, strlen(PFX)) == 0 &&
			      strncmp(line + strlen(PFX), big, 254) == 0,
		      "%.300s", line);
	/* 1024 names of 253 bytes, ';' between them */
	ck_assert_uint_eq(strlen(line), strlen(PFX) + 1024 * 254 - 1 + strlen(" 1\n"));
#undef PFX
	free(o);
	unlink(out);
	unlink(file);
}
END_TEST

/* A thread's name (THREAD record) is cut as a string record is: every
 * span of the thread has it (thread.name), and a file of one 1 MB name
 * and 20000 samples of 10 bytes in two alternating contexts made 20 GB
 * of --spans --context-spans --min-samples 1 (old). */
START_TEST(report_thread_name_cut)
{
	const char *args[] = {"--spans", "--min-samples", "1", NULL, NULL};
	static char name[1000];
	struct rec *r = rec_new("srv");
	char file[64], *o, *p;
	size_t run = 0, longest = 0;

	memset(name, 'T', sizeof(name));
	pay_u(r, 7);
	pay_bytes(r, name, sizeof(name));
	rec_end(r, 5);
	rec_work_samples(r);
	rec_save(r, file, sizeof(file), "thread-name");
	args[3] = file;
	o = report_stdout(args, 0, "report --spans");
	for (p = o; *p; p++) {
		run = *p == 'T' ? run + 1 : 0;
		if (run > longest)
			longest = run;
	}
	/* 253 bytes and "...": 256, as a string record's */
	ck_assert_msg(longest == 253 && strstr(o, "TTT...\""), "longest %zu", longest);
	free(o);
	unlink(file);
}
END_TEST

/* A report that cannot be written says where it went (old: "write
 * error: No space left on device", as the dump said) and fails, in each
 * mode. */
START_TEST(report_write_error)
{
	static const char *const modes[] = {NULL, "--folded", "--spans"};
	const char *args[] = {NULL, NULL, NULL};
	struct rec *r = rec_new("srv");
	char file[64], *err;
	size_t i;
	int st;

	rec_work_samples(r);
	rec_save(r, file, sizeof(file), "write-error");
	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		args[0] = modes[i] ? modes[i] : file;
		args[1] = modes[i] ? file : NULL;
		st = run_report(args, -1, "/dev/full", 0, 0, &err);
		ck_assert_msg(st == 2, "%s: exit %d: %s", args[0], st, err);
		ck_assert_msg(strstr(err, "ctxdump report: write error on standard "
					  "output: No space left on device\n"),
			      "%s: %s", args[0], err);
		free(err);
	}
	unlink(file);
}
END_TEST

/* A frame's name that cannot be copied (out of memory) fails the load
 * as every other allocation of it does (old: strlen(NULL) hashing it, a
 * crash).  Only strdup() fails (helpers/fail-strdup.c): a memory limit
 * would make whichever allocation comes first fail. */
START_TEST(report_frame_name_no_memory)
{
	const char *args[] = {NULL, NULL};
	struct rec *r = rec_new("srv");
	char file[64], lib[PATH_MAX], *err;
	int st;

	rec_work_samples(r);
	rec_save(r, file, sizeof(file), "frame-nomem");
	args[0] = file;
	prof_helper("libfail-strdup.so", lib, sizeof(lib));
	ck_assert_int_eq(setenv("LD_PRELOAD", lib, 1), 0);
	st = run_report(args, -1, NULL, 0, 0, &err);
	ck_assert_int_eq(unsetenv("LD_PRELOAD"), 0);
	ck_assert_msg(st == 2 && strstr(err, "Cannot allocate memory"), "exit %d: %s",
		      st, err);
	free(err);
	unlink(file);
}
END_TEST

/* More distinct function names than the name table first holds (it
 * grows at 128): 200 names, each spelt by two strings of the file, one
 * read before the table grows and one after.  Every sample's outer frame
 * is fn000, through either string: one function, the trunk of all the
 * samples of the request (100%), not two of 50% each. */
START_TEST(report_many_function_names)
{
	enum { N = 200 };
	static const uint32_t kv[] = {2 * N + 1, 2 * N + 2};
	static const uint32_t fa[] = {150, 1}, fb[] = {160, N + 1};
	const char *args[] = {NULL, NULL};
	struct rec *r = rec_new("srv");
	char file[64], name[16], *o;
	uint32_t i;

	for (i = 0; i < 2 * N; i++) {
		snprintf(name, sizeof(name), "fn%03u", (unsigned)(i % N));
		rec_string(r, i + 1, name, strlen(name));
		rec_frame(r, i + 1, i + 1);
	}
	rec_string(r, 2 * N + 1, "http.route", 10);
	rec_string(r, 2 * N + 2, "/r", 2);
	rec_stack(r, 1, fa, 2);
	rec_stack(r, 2, fb, 2);
	rec_ctx(r, 1, 0x4b, 3, kv, 1);
	for (i = 0; i < 8; i++) {
		rec_round(r, 10000000ull * i);
		rec_sample(r, 7, 1 + i % 2, 1);
	}
	rec_save(r, file, sizeof(file), "many-fns");
	args[0] = file;
	o = report_stdout(args, 0, "report");
	ck_assert_msg(strstr(o, "/r: 8 samples in 1 trace\n   100.0%    0.0%  fn000\n"),
		      "%s", o);
	free(o);
	unlink(file);
}
END_TEST

/* The summary's trace line says which thread by its name too, as the
 * spans' thread.name does, escaped (old: its id only). */
START_TEST(report_summary_thread_name)
{
	const char *args[] = {NULL, NULL};
	struct rec *r = rec_new("srv");
	char file[64], *o;

	rec_thread(r, 7, "wkr\x1b-1");
	rec_work_samples(r);
	rec_save(r, file, sizeof(file), "summary-thread");
	args[0] = file;
	o = report_stdout(args, 0, "report");
	ck_assert_msg(strstr(o, "\ntrace " TRACE_HEX
				"  [unknown request]  0.020 s  3 samples  thread 7 "
				"(wkr\\x1b-1)\n"),
		      "%s", o);
	free(o);
	unlink(file);
}
END_TEST

/* A LAYOUT record of otel_thread_ctx_v1. */
static void
rec_layout(struct rec *r, const char *module, size_t n, const char *model)
{
	pay_u(r, 0); /* OTEP-4947 */
	pay_u(r, 1); /* readable */
	pay_str(r, "otel_thread_ctx_v1");
	pay_bytes(r, module, n);
	pay_str(r, model);
	pay_u(r, 0); /* custom-labels ABI version */
	rec_end(r, 3);
}

/* A recorder writes a LAYOUT record again when a rediscovery finds
 * another layout (record.c write_layouts()): the summary lists each
 * layout once, in the order they came (old: one line per record, an
 * A B A B recording twice each), and only so many of them (a file of
 * distinct layouts costs a comparison with each kept one per record),
 * with their module paths cut at PATH_MAX. */
START_TEST(report_layouts_once)
{
	const char *args[] = {NULL, NULL};
	struct rec *r = rec_new("srv");
	char file[64], mod[64], big[5000], *o;
	const char *a, *b;
	size_t i;

	rec_layout(r, "/x/liba.so", 10, "tlsdesc-static");
	rec_round(r, 0);
	rec_layout(r, "/x/libb.so", 10, "general-dynamic");
	rec_round(r, 10000000);
	rec_layout(r, "/x/liba.so", 10, "tlsdesc-static");
	rec_layout(r, "/x/libb.so", 10, "general-dynamic");
	memset(big, 'y', sizeof(big));
	big[0] = '/';
	rec_layout(r, big, sizeof(big), "general-dynamic");
	/* 2 + 1 above, 61 more kept, 39 past PFILE_LAYOUT_MAX (64) */
	for (i = 0; i < 100; i++) {
		snprintf(mod, sizeof(mod), "/x/lib%zu.so", i);
		rec_layout(r, mod, strlen(mod), "tlsdesc-static");
	}
	rec_layout(r, "/x/libb.so", 10, "general-dynamic");
	rec_save(r, file, sizeof(file), "layouts");
	args[0] = file;
	o = report_stdout(args, 0, "report");
	a = strstr(o, "\nLayout: otel_thread_ctx_v1 in /x/liba.so (tlsdesc-static)\n");
	b = strstr(o, "\nLayout: otel_thread_ctx_v1 in /x/libb.so (general-dynamic)\n");
	/* (the output has a path of 4 KiB: only its start in messages) */
	ck_assert_msg(a && b && a < b, "%.1500s", o);
	ck_assert_msg(!strstr(strchr(a + 1, '\n'), "in /x/liba.so ") &&
			      !strstr(strchr(b + 1, '\n'), "in /x/libb.so "),
		      "a layout listed twice:\n%.1500s", o);
	/* PATH_MAX bytes of the path: 4093 of them and "..." */
	memset(big, 'y', 4093);
	big[0] = '/';
	memcpy(big + 4093, "... (general-dynamic)\n", 23);
	ck_assert_msg(strstr(o, big), "%.1500s", o);
	ck_assert_msg(strstr(o, "in /x/lib60.so (") && !strstr(o, "in /x/lib61.so ("),
		      "%.1500s", o);
	ck_assert_msg(strstr(o, "\nLayout: 39 more layout records not listed\n"),
		      "%.1500s", o);
	free(o);
	unlink(file);
}
END_TEST

/* A layout kind is checked before it is narrowed, as a context's is:
 * 2^32 is a kind this reader does not know (skipped, as a later
 * recorder's), not 0.  Old: "Layout: otel_thread_ctx_v1 in /x/liba.so". */
START_TEST(report_layout_kind_wide)
{
	const char *args[] = {NULL, NULL};
	struct rec *r = rec_new("srv");
	char file[64], *o;

	pay_u(r, 1ull << 32);
	pay_u(r, 1);
	pay_str(r, "otel_thread_ctx_v1");
	pay_str(r, "/x/liba.so");
	pay_str(r, "tlsdesc-static");
	pay_u(r, 0);
	rec_end(r, 3);
	rec_save(r, file, sizeof(file), "layout-kind");
	args[0] = file;
	o = report_stdout(args, 0, "report");
	ck_assert_msg(strstr(o, "\nLayout: none (no trace context)\n"), "%s", o);
	free(o);
	unlink(file);
}
END_TEST

/* ---- escaping ---- */

/* ..., and RLO and ZWSP (Trojan Source: text shown in another order) */
#define EVIL                                                      \
	"\x1b[2J\x1b]0;pwned\x07\rFAKE\nline\xff\xc0\x80\xc2\x9b" \
	"31m\xe2\x80\xae"                                         \
	"ab\xe2\x80\x8b"

/* No raw control byte (but the line ends), no C1 control, only UTF-8. */
static void
assert_clean(const char *o, size_t n, const char *what)
{
	size_t i = 0;

	while (i < n) {
		unsigned char c = (unsigned char)o[i];

		ck_assert_msg(c != 0x1b && c != '\r' && c != 0x07 && c != 0x7f &&
				      (c >= 0x20 || c == '\n'),
			      "%s: control byte 0x%02x at %zu: %.80s", what, c, i,
			      o + (i > 40 ? i - 40 : 0));
		if (c < 0x80) {
			i++;
			continue;
		}
		/* two-byte sequences only here: no C1 (c2 80..9f) */
		ck_assert_msg(c >= 0xc3 && c <= 0xdf && i + 1 < n &&
				      ((unsigned char)o[i + 1] & 0xc0) == 0x80,
			      "%s: not UTF-8 or C1 at %zu: %.80s", what, i,
			      o + (i > 40 ? i - 40 : 0));
		i += 2;
	}
}

START_TEST(report_escapes_target_strings)
{
	const char *sum[] = {NULL, NULL}, *fold[] = {"--folded", NULL, NULL};
	static const uint32_t kv[] = {1, 2}, st1[] = {1};
	struct rec *r = rec_new("srv" EVIL);
	char file[64], *o;

	/* a layout whose module and model came from the target */
	pay_u(r, 0);
	pay_u(r, 1);
	pay_str(r, "otel_thread_ctx_v1");
	pay_str(r, "/lib/" EVIL "x.so");
	pay_str(r, "tls" EVIL);
	pay_u(r, 0);
	rec_end(r, 3);
	/* the service: a resource attribute */
	pay_str(r, "service.name");
	pay_str(r, "svc" EVIL);
	rec_end(r, 4);
	rec_string(r, 1, "http.route", 10);
	rec_string(r, 2, "/api" EVIL, strlen("/api" EVIL));
	rec_string(r, 3, "evil_fn" EVIL, strlen("evil_fn" EVIL));
	rec_frame(r, 1, 3);
	rec_stack(r, 1, st1, 1);
	rec_ctx(r, 1, 0x4b, 0x00f067aa0ba902b7ull, kv, 1);
	rec_thread(r, 7, "thr" EVIL);
	for (int i = 0; i < 3; i++) {
		rec_round(r, 10000000ull * i);
		rec_sample(r, 7, 1, 1);
	}
	rec_save(r, file, sizeof(file), "escape");
	sum[0] = file;
	o = report_stdout(sum, 0, "report");
	assert_clean(o, strlen(o), "summary");
	/* each of them, escaped */
	ck_assert_msg(strstr(o, "(srv\\x1b[2J"), "%s", o);
	ck_assert_msg(strstr(o, "Service: svc\\x1b[2J"), "%s", o);
	ck_assert_msg(strstr(o, "in /lib/\\x1b[2J"), "%s", o);
	ck_assert_msg(strstr(o, "(tls\\x1b[2J"), "%s", o);
	ck_assert_msg(strstr(o,
			     "\n/api\\x1b[2J\\x1b]0;pwned\\x07\\x0dFAKE\\x0aline\\xff"
			     "\\xc0\\x80\\xc2\\x9b31m\\xe2\\x80\\xaeab\\xe2\\x80\\x8b"
			     ": 3 samples"),
		      "%s", o);
	ck_assert_msg(strstr(o, TRACE_HEX "  /api\\x1b[2J"), "%s", o);
	ck_assert_msg(strstr(o, "%  evil_fn\\x1b[2J"), "%s", o);
	free(o);
	fold[1] = file;
	o = report_stdout(fold, 0, "report --folded");
	assert_clean(o, strlen(o), "folded");
	/* one line: ';' of the escape became ':', the rest '?' */
	ck_assert_str_eq(o, "svc?[2J?]0:pwned??FAKE?line????31m?ab?;"
			    "/api?[2J?]0:pwned??FAKE?line????31m?ab?;trace " TRACE_HEX
			    ";evil_fn?[2J?]0:pwned??FAKE?line????31m?ab? 3\n");
	free(o);
	unlink(file);
}
END_TEST

/* ---- the summary ---- */

/* The line of o that starts with prefix, without its newline ("" if
 * none), in buf of n bytes. */
static const char *
line_of(const char *o, const char *prefix, char *buf, size_t n)
{
	size_t l = strlen(prefix);
	const char *p = o;

	buf[0] = '\0';
	while (p && strncmp(p, prefix, l) != 0)
		p = (p = strchr(p, '\n')) ? p + 1 : NULL;
	if (p)
		snprintf(buf, n, "%.*s", (int)strcspn(p, "\n"), p);
	return buf;
}

/* "N samples in M traces" per request counts each trace with samples of
 * the request, once: trace 4b called the service twice (/cpu, then
 * /sleep) and counts for both requests, trace 4c for /sleep and /db (old:
 * a trace counted only for the request of its first sample: "/db: 2
 * samples in 0 traces", "/sleep: 4 samples in 1 trace"). */
START_TEST(report_summary_traces_per_request)
{
	const char *args[] = {NULL, NULL};
	static const uint32_t kv_cpu[] = {1, 2}, kv_sleep[] = {1, 3}, kv_db[] = {1, 4},
			      st1[] = {1};
	/* thread, context: trace 4b /cpu, 4b /sleep, 4c /sleep, 4c /db */
	static const uint32_t seq[][2] = {{7, 1}, {7, 1}, {7, 1}, {7, 2}, {7, 2},
					  {8, 3}, {8, 3}, {8, 4}, {8, 4}, {7, 1}};
	struct rec *r = rec_new("srv");
	char file[64], line[256], *o;
	size_t i;

	rec_string(r, 1, "http.route", 10);
	rec_string(r, 2, "/cpu", 4);
	rec_string(r, 3, "/sleep", 6);
	rec_string(r, 4, "/db", 3);
	rec_string(r, 5, "work", 4);
	rec_frame(r, 1, 5);
	rec_stack(r, 1, st1, 1);
	rec_ctx(r, 1, 0x4b, 1, kv_cpu, 1);
	rec_ctx(r, 2, 0x4b, 2, kv_sleep, 1);
	rec_ctx(r, 3, 0x4c, 3, kv_sleep, 1);
	rec_ctx(r, 4, 0x4c, 4, kv_db, 1);
	for (i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
		rec_round(r, 10000000ull * i);
		rec_sample(r, seq[i][0], 1, seq[i][1]);
	}
	rec_save(r, file, sizeof(file), "per-request");
	args[0] = file;
	o = report_stdout(args, 0, "report");
	ck_assert_str_eq(line_of(o, "10 of ", line, sizeof(line)),
			 "10 of 10 samples selected, 10 with a trace context");
	ck_assert_str_eq(line_of(o, "/cpu: ", line, sizeof(line)),
			 "/cpu: 4 samples in 1 trace");
	ck_assert_str_eq(line_of(o, "/db: ", line, sizeof(line)),
			 "/db: 2 samples in 1 trace");
	ck_assert_str_eq(line_of(o, "/sleep: ", line, sizeof(line)),
			 "/sleep: 4 samples in 2 traces");
	free(o);
	unlink(file);
}
END_TEST

/* With CTXSHIM_NEW_TRACES=0 a request without a traceparent has its
 * attributes published with zero ids (a context that is valid, with no
 * trace): its samples still make up its request in the summary, next to
 * those of a request that brought a trace along; samples with no request
 * attributes and no trace (an idle thread) make up none (old: only the
 * samples with a trace were grouped, "/cpu" was missing and "/sleep" had
 * 2 samples). */
START_TEST(report_summary_requests_without_trace)
{
	const char *args[] = {NULL, NULL};
	static const uint32_t kv_cpu[] = {1, 2}, kv_sleep[] = {1, 3}, st1[] = {1};
	/* thread, context: /cpu and /sleep untraced, /sleep in trace 4b,
	 * none */
	static const uint32_t seq[][2] = {{7, 1}, {7, 1}, {7, 1}, {8, 2}, {8, 2},
					  {8, 3}, {8, 3}, {9, 0}, {9, 0}, {9, 0}};
	struct rec *r = rec_new("srv");
	char file[64], line[256], *o;
	size_t i;

	rec_string(r, 1, "http.route", 10);
	rec_string(r, 2, "/cpu", 4);
	rec_string(r, 3, "/sleep", 6);
	rec_string(r, 4, "work", 4);
	rec_frame(r, 1, 4);
	rec_stack(r, 1, st1, 1);
	rec_ctx_flags(r, 1, 1, 0, 0, kv_cpu, 1);
	rec_ctx_flags(r, 2, 1, 0, 0, kv_sleep, 1);
	rec_ctx(r, 3, 0x4b, 3, kv_sleep, 1);
	for (i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
		rec_round(r, 10000000ull * i);
		rec_sample(r, seq[i][0], 1, seq[i][1]);
	}
	rec_save(r, file, sizeof(file), "untraced");
	args[0] = file;
	o = report_stdout(args, 0, "report");
	ck_assert_str_eq(line_of(o, "10 of ", line, sizeof(line)),
			 "10 of 10 samples selected, 2 with a trace context");
	ck_assert_msg(strstr(o, "\nTop functions per request "), "%s", o);
	ck_assert_str_eq(line_of(o, "/cpu: ", line, sizeof(line)),
			 "/cpu: 3 samples in 0 traces");
	ck_assert_str_eq(line_of(o, "/sleep: ", line, sizeof(line)),
			 "/sleep: 4 samples in 1 trace");
	ck_assert_msg(!strstr(o, "[unknown request]"), "%s", o);
	ck_assert_msg(strstr(o, "\ntrace " TRACE_HEX "  /sleep  "), "%s", o);
	free(o);
	unlink(file);
}
END_TEST

/* A request name is its method, a space and its path, each of up to the
 * 256 bytes a string of a recording has: 514 bytes with the NUL.  Two
 * requests whose 256-byte paths differ only in their last character (a
 * two-byte one) are two requests, and --path takes the whole name.  Old:
 * names were cut to 511 bytes, the two were one request of 6 samples
 * ("... /aaa...a: 6 samples"), and --path matched nothing. */
START_TEST(report_summary_long_request_name)
{
	const char *args[] = {NULL, NULL, NULL, NULL};
	static const uint32_t kv1[] = {1, 2, 3, 4}, kv2[] = {1, 2, 3, 5}, st1[] = {1};
	struct rec *r = rec_new("srv");
	char file[64], method[257], p1[257], p2[257], name[600], *o;
	char line[700], want[700];

	/* 256 bytes each: the paths end in U+00E9 and U+00E8 */
	memset(method, 'M', 256);
	method[256] = '\0';
	p1[0] = '/';
	memset(p1 + 1, 'a', 253);
	memcpy(p1 + 254, "\xc3\xa9", 3);
	memcpy(p2, p1, 254);
	memcpy(p2 + 254, "\xc3\xa8", 3);
	rec_string(r, 1, "http.request.method", 19);
	rec_string(r, 2, method, 256);
	rec_string(r, 3, "http.route", 10);
	rec_string(r, 4, p1, 256);
	rec_string(r, 5, p2, 256);
	rec_string(r, 6, "work", 4);
	rec_frame(r, 1, 6);
	rec_stack(r, 1, st1, 1);
	rec_ctx(r, 1, 0x4b, 1, kv1, 2);
	rec_ctx(r, 2, 0x4c, 2, kv2, 2);
	for (int i = 0; i < 6; i++) {
		rec_round(r, 10000000ull * i);
		rec_sample(r, 7, 1, 1 + (i & 1));
	}
	rec_save(r, file, sizeof(file), "long-name");
	args[0] = file;
	o = report_stdout(args, 0, "report");
	for (int k = 0; k < 2; k++) {
		snprintf(name, sizeof(name), "%s %s: ", method, k ? p2 : p1);
		snprintf(want, sizeof(want), "%s3 samples in 1 trace", name);
		ck_assert_str_eq(line_of(o, name, line, sizeof(line)), want);
	}
	free(o);
	/* --path "METHOD path": the whole name */
	snprintf(name, sizeof(name), "%s %s", method, p2);
	args[0] = "--path";
	args[1] = name;
	args[2] = file;
	o = report_stdout(args, 0, "report");
	ck_assert_str_eq(line_of(o, "3 of ", line, sizeof(line)),
			 "3 of 6 samples selected, 3 with a trace context");
	free(o);
	unlink(file);
}
END_TEST

/* The summary shows the deepest frame every sample of a group shares also
 * when its function recurs above it: main;run;run, then one of four
 * leaves.  Old: run was left out as a frame above the deepest one, and
 * the list had the leaves only (run, at 100%, missing). */
START_TEST(report_summary_recursive_trunk)
{
	static const char *const names[] = {"main", "run", "a", "b", "c", "d"};
	static const uint32_t kv[] = {7, 8};
	const char *args[] = {NULL, NULL};
	struct rec *r = rec_new("srv");
	char file[64], line[256], *o;
	uint32_t i;

	rec_functions(r, names, 6);
	rec_string(r, 7, "http.route", 10);
	rec_string(r, 8, "/r", 2);
	for (i = 0; i < 4; i++) {
		const uint32_t f[] = {3 + i, 2, 2, 1};

		rec_stack(r, 1 + i, f, 4);
	}
	rec_ctx(r, 1, 0x4b, 3, kv, 1);
	for (i = 0; i < 8; i++) {
		rec_round(r, 10000000ull * i);
		rec_sample(r, 7, 1 + i % 4, 1);
	}
	rec_save(r, file, sizeof(file), "recursive");
	args[0] = file;
	o = report_stdout(args, 0, "report");
	ck_assert_str_eq(line_of(o, "/r: ", line, sizeof(line)),
			 "/r: 8 samples in 1 trace");
	ck_assert_msg(strstr(o, "/r: 8 samples in 1 trace\n   100.0%    0.0%  run\n"),
		      "%s", o);
	ck_assert_msg(!strstr(o, "  main\n"), "%s", o);
	free(o);
	unlink(file);
}
END_TEST

/* Round times are CLOCK_MONOTONIC: one that goes back is malformed (a
 * damaged file).  Old: a span ended before it started (endTimeUnixNano <
 * startTimeUnixNano) and the summary's largest gap between rounds wrapped
 * to 18446744073 s. */
START_TEST(report_round_time_going_back)
{
	static const char *const names[] = {"start", "handle", "wait"};
	static const uint32_t s_req[] = {2, 1}, s_idle[] = {3, 1};
	static const uint64_t ts[] = {30000000, 40000000, 10000000, 20000000};
	const char *spans[] = {"--spans", NULL, NULL}, *summary[] = {NULL, NULL};
	static const char py[] = "import json, sys\n"
				 "d = json.load(open(sys.argv[1]))\n"
				 "for rs in d['resourceSpans']:\n"
				 "  for s in rs['scopeSpans'][0]['spans']:\n"
				 "    assert int(s['endTimeUnixNano']) >= "
				 "int(s['startTimeUnixNano']), s\n"
				 "print('ok')\n";
	struct rec *r = rec_new("srv");
	char file[64], out[64], line[256], *err, *o;
	uint32_t i;
	int st;

	rec_functions(r, names, 3);
	rec_stack(r, 1, s_req, 2);
	rec_stack(r, 2, s_idle, 2);
	rec_ctx(r, 1, 0x4b, 0x00f067aa0ba902b7ull, NULL, 0);
	for (i = 0; i < 4; i++) {
		rec_round(r, ts[i]);
		rec_sample(r, 7, 1, 1);
		rec_sample(r, 8, 2, 0);
	}
	rec_save(r, file, sizeof(file), "round-back");
	prof_tmpfile(out, sizeof(out), "round-back-out");
	spans[1] = summary[0] = file;
	st = run_report(spans, -1, out, 0, 0, &err);
	ck_assert_msg(st == 1, "report exit %d: %s", st, err);
	ck_assert_msg(strstr(err, "malformed"), "%s", err);
	free(err);
	st = prof_py(py, out, &o, &err);
	ck_assert_msg(st == 0, "python: %s", err);
	free(err);
	free(o);
	o = report_stdout(summary, 1, "report");
	ck_assert_str_eq(
		line_of(o, "Sampling: ", line, sizeof(line)),
		"Sampling: interval 10.0 ms, largest gap between rounds 10.0 ms");
	free(o);
	unlink(out);
	unlink(file);
}
END_TEST

/* Copy the file at path to the end of out; returns its size. */
static size_t
append_file(FILE *out, const char *path)
{
	char buf[65536];
	size_t n, total = 0;
	FILE *in = fopen(path, "re");

	ck_assert_ptr_nonnull(in);
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0) {
		ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
		total += n;
	}
	ck_assert_int_eq(ferror(in), 0);
	fclose(in);
	return total;
}

/* Two recordings in one file (cat a.prof b.prof): the report is of the
 * first, and says where the second starts.  Old: the second's header,
 * taken for a record of 5 MiB (its magic as the length), skipped into
 * the second recording, whose samples were then counted as the first's
 * (9 samples in 9 rounds here), with only a warning of a malformed or
 * cut record elsewhere. */
START_TEST(report_joined_recordings)
{
	static const uint8_t zeros[4096];
	const char *summary[] = {NULL, NULL};
	struct rec *a = rec_new("first"), *b = rec_new_pid("secondary", 5353);
	char fa[64], fb[64], joined[64], want[96], *err, *o;
	size_t la, k;
	uint32_t pre = 200u | (6u << 20) << 8;
	uint8_t le[4] = {(uint8_t)pre, (uint8_t)(pre >> 8), (uint8_t)(pre >> 16),
			 (uint8_t)(pre >> 24)};
	FILE *f;
	int st;

	rec_work_samples(a);
	rec_save(a, fa, sizeof(fa), "joined-a");
	/* a record of a later type, of 6 MiB of zeros (empty records, read
	 * from wherever: the old skip ended in them, 4-byte aligned with
	 * the record after them for a comm of 9 bytes), then samples of
	 * thread 9 */
	put(b, le, 4);
	for (k = 0; k < (6u << 20) / sizeof(zeros); k++)
		put(b, zeros, sizeof(zeros));
	rec_work_samples(b);
	for (k = 0; k < 3; k++) {
		rec_round(b, 40000000ull + 10000000ull * k);
		rec_sample(b, 9, 1, 1);
	}
	rec_save(b, fb, sizeof(fb), "joined-b");
	prof_tmpfile(joined, sizeof(joined), "joined");
	f = fopen(joined, "we");
	ck_assert_ptr_nonnull(f);
	la = append_file(f, fa);
	(void)append_file(f, fb);
	ck_assert_int_eq(fclose(f), 0);

	summary[0] = joined;
	st = run_report(summary, -1, NULL, 0, 0, &err);
	ck_assert_msg(st == 1, "report exit %d: %s", st, err);
	snprintf(want, sizeof(want), "another recording starts at offset %zu", la);
	ck_assert_msg(strstr(err, want), "%s", err);
	ck_assert_msg(!strstr(err, "malformed") && !strstr(err, "inside a record"),
		      "%s", err);
	free(err);
	o = report_stdout(summary, 1, "report");
	ck_assert_msg(strstr(o, "Recording of process 4242 (first)") &&
			      strstr(o, " 3 rounds, 3 samples of "),
		      "%s", o);
	free(o);
	unlink(fa);
	unlink(fb);
	unlink(joined);
}
END_TEST

/* A round time that the start's wall-clock time plus it would wrap (a
 * hostile file) is malformed, and taken as the last time that does not
 * wrap.  Old: a span's end wrapped to 1970, before its start
 * (startTimeUnixNano 18446744073704551615, endTimeUnixNano 24999999
 * here), and no record was counted as malformed (exit 0). */
START_TEST(report_round_time_wraps)
{
	static const char *const names[] = {"start", "handle"};
	static const uint32_t s_req[] = {2, 1};
	const char *spans[] = {"--spans", NULL, NULL};
	static const char py[] = "import json, sys\n"
				 "d = json.load(open(sys.argv[1]))\n"
				 "n = 0\n"
				 "for rs in d['resourceSpans']:\n"
				 "  for s in rs['scopeSpans'][0]['spans']:\n"
				 "    a, b = int(s['startTimeUnixNano']), "
				 "int(s['endTimeUnixNano'])\n"
				 "    assert 1700000000000000000 <= a <= b < 2**64, s\n"
				 "    n += 1\n"
				 "print(n)\n";
	/* the last ns that does not wrap is 5 ms after the first round */
	const uint64_t t0 = UINT64_MAX - 1700000000000000000ull - 5000000;
	struct rec *r = rec_new("srv");
	char file[64], out[64], *err, *o;
	uint32_t i;
	int st;

	rec_functions(r, names, 2);
	rec_stack(r, 1, s_req, 2);
	rec_ctx(r, 1, 0x4b, 0x00f067aa0ba902b7ull, NULL, 0);
	for (i = 0; i < 4; i++) {
		rec_round(r, t0 + 10000000ull * i);
		rec_sample(r, 7, 1, 1);
	}
	rec_save(r, file, sizeof(file), "round-wrap");
	prof_tmpfile(out, sizeof(out), "round-wrap-out");
	spans[1] = file;
	st = run_report(spans, -1, out, 0, 0, &err);
	ck_assert_msg(st == 1, "report exit %d: %s", st, err);
	ck_assert_msg(strstr(err, "3 malformed records"), "%s", err);
	free(err);
	st = prof_py(py, out, &o, &err);
	ck_assert_msg(st == 0, "python: %s", err);
	ck_assert_str_eq(o, "1\n");
	free(err);
	free(o);
	unlink(out);
	unlink(file);
}
END_TEST

/* The stop windows of a hostile file can be as large as a varint holds:
 * their average is taken without a sum that wraps.  Old: two windows of
 * 2^63 ns summed to 0, "Stopped: 0.0 us per round on average,
 * 9223372036854776.0 us at most". */
START_TEST(report_stop_window_sum_wraps)
{
	static const char *const names[] = {"start", "handle"};
	static const uint32_t s_req[] = {2, 1};
	const char *summary[] = {NULL, NULL};
	struct rec *r = rec_new("srv");
	char file[64], line[256], *o;
	uint32_t i;

	rec_functions(r, names, 2);
	rec_stack(r, 1, s_req, 2);
	for (i = 0; i < 2; i++) {
		pay_u(r, 10000000ull * i);
		pay_u(r, 1ull << 63); /* the stop window */
		pay_u(r, 1);
		rec_end(r, 10);
		rec_sample(r, 7, 1, 0);
	}
	rec_save(r, file, sizeof(file), "window-wrap");
	summary[0] = file;
	o = report_stdout(summary, 0, "report");
	ck_assert_str_eq(line_of(o, "Stopped: ", line, sizeof(line)),
			 "Stopped: 9223372036854776.0 us per round on average, "
			 "9223372036854776.0 us at most");
	free(o);
	unlink(file);
}
END_TEST

/* A file from elsewhere is looked at by offset: the warnings about a
 * malformed record and about a record the file ends inside say where it
 * starts.  Old: "3 malformed records skipped", "ends inside a record
 * (recording cut short)", and nothing of where, in a file of thousands
 * of records; a length damaged into 16 MiB read as a recording cut
 * short. */
START_TEST(report_errors_name_offset)
{
	static const uint32_t st1[] = {1}, f1025[1025] = {1};
	const char *args[] = {NULL, NULL};
	struct rec *r = rec_new("srv");
	char file[64], want[160], *err;
	size_t bad, cut;
	FILE *f;
	int st;

	rec_string(r, 1, "work", 4);
	rec_frame(r, 1, 1);
	bad = r->len;
	rec_stack(r, 1, f1025, 1025); /* 1025 frames: malformed */
	rec_stack(r, 1, st1, 1);
	rec_round(r, 0);
	rec_sample(r, 7, 1, 0);
	rec_stack(r, 2, f1025, 1025);
	rec_save(r, file, sizeof(file), "offsets");
	args[0] = file;
	st = run_report(args, -1, NULL, 0, 0, &err);
	ck_assert_msg(st == 1, "report exit %d: %s", st, err);
	snprintf(want, sizeof(want),
		 "%s: 2 malformed records (the first at offset %zu)", file, bad);
	ck_assert_msg(strstr(err, want), "want '%s': %s", want, err);
	free(err);

	/* a record whose length runs past the end of the file: 5 bytes of
	 * the 2^24 - 1 its prefix claims */
	f = fopen(file, "ae");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	cut = (size_t)ftell(f);
	ck_assert_uint_eq(fwrite("\x0b\xff\xff\xff\x01", 1, 5, f), 5);
	ck_assert_int_eq(fclose(f), 0);
	st = run_report(args, -1, NULL, 0, 0, &err);
	ck_assert_msg(st == 1, "report exit %d: %s", st, err);
	snprintf(want, sizeof(want), "%s ends inside a record at offset %zu (", file,
		 cut);
	ck_assert_msg(strstr(err, want), "want '%s': %s", want, err);
	free(err);
	/* the buffer grows with what is read, not with what the length
	 * says: under 12 MB of address space (the report needs 4) it is
	 * the same partial report (old: 16 MiB asked for at once, "Cannot
	 * allocate memory", exit 2) */
	st = run_report(args, -1, NULL, 12, 0, &err);
	ck_assert_msg(st == 1 && strstr(err, want), "report exit %d: %s", st, err);
	free(err);
	unlink(file);
}
END_TEST

/* Start `ctxdump report --folded -` reading the pipe in, its standard
 * output to out and its standard error to err (-1: /dev/null), with
 * SIGINT and SIGQUIT at their defaults (as in a shell's foreground
 * pipeline). */
static pid_t
report_from_pipe(int in, const char *out, int err)
{
	char *argv[] = {(char *)test_ctxdump_path(), "report", "--folded", "-", NULL};
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int o = open(out, O_WRONLY | O_TRUNC | O_CLOEXEC);
		int e = err >= 0 ? err : open("/dev/null", O_WRONLY | O_CLOEXEC);

		signal(SIGINT, SIG_DFL);
		signal(SIGQUIT, SIG_DFL);
		dup2(in, 0);
		dup2(o, 1);
		dup2(e, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* Until the report has read everything written to the pipe (whose read
 * end rd the test keeps too): it is then inside its read of the file. */
static void
wait_pipe_drained(int rd)
{
	long deadline = test_now_ms() + 30000;
	int n;

	for (;;) {
		ck_assert_int_eq(ioctl(rd, FIONREAD, &n), 0);
		if (n == 0)
			return;
		ck_assert_msg(test_now_ms() < deadline, "the report does not read");
		usleep(1000);
	}
}

/* Whether signal sig is pending for pid (sent, not yet delivered; a
 * zombie that it killed still shows it pending). */
static bool
signal_pending(pid_t pid, int sig)
{
	char path[64], buf[4096], *p;
	unsigned long long m = 1ull << (sig - 1);

	if (test_task_state(pid, pid) == 'Z')
		return false;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	ck_assert_int_gt(test_read_small(path, buf, sizeof(buf)), 0);
	p = strstr(buf, "\nSigPnd:");
	ck_assert_ptr_nonnull(p);
	if (strtoull(p + 8, NULL, 16) & m)
		return true;
	p = strstr(buf, "\nShdPnd:");
	ck_assert_ptr_nonnull(p);
	return (strtoull(p + 8, NULL, 16) & m) != 0;
}

/* Feed the recording r (whose first half bytes are written first) to
 * `ctxdump report --folded -` through a pipe, output to out, sending it
 * n signals sig once it has read the first half, each once the one
 * before was delivered; returns its wait status. */
static int
report_pipe_signalled(const struct rec *r, size_t half, const char *out, int sig, int n)
{
	pid_t pid;
	int p[2], st;

	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	pid = report_from_pipe(p[0], out, -1);
	ck_assert_int_eq(write(p[1], r->p, half), (ssize_t)half);
	wait_pipe_drained(p[0]);
	for (int i = 0; i < n; i++) {
		ck_assert_int_eq(kill(pid, sig), 0);
		while (signal_pending(pid, sig))
			usleep(1000);
	}
	/* the rest: the pipe (whose read end the test holds) takes it
	 * whether the report is still there to read it or not */
	ck_assert_int_eq(write(p[1], r->p + half, r->len - half),
			 (ssize_t)(r->len - half));
	close(p[1]);
	close(p[0]);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return st;
}

/* `ctxdump record -o - PID | ctxdump report -` ends with Ctrl-C, which
 * the terminal sends to both: the recorder then ends the recording and
 * writes the rest of it, which the report reads to its end and reports.
 * Old: the report died of that SIGINT and printed nothing.  A second
 * Ctrl-C (or Ctrl-\) ends the report, as it ends the recorder. */
START_TEST(report_pipe_survives_first_interrupt)
{
	static const int sigs[] = {SIGINT, SIGQUIT};
	struct rec *r = rec_new("srv");
	char out[64], *o;
	size_t half;
	int st;

	rec_work_samples(r);
	half = r->len;
	pay_u(r, 1000000000); /* END, as rec_finish() has it */
	for (int i = 0; i < 6; i++)
		pay_u(r, 0);
	rec_end(r, 12);
	prof_tmpfile(out, sizeof(out), "pipe-out");
	for (size_t k = 0; k < 2; k++) {
		st = report_pipe_signalled(r, half, out, sigs[k], 1);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			      "report status 0x%x after %s", st, strsignal(sigs[k]));
		o = prof_slurp(out);
		ck_assert_str_eq(
			o, "unknown_service:srv;[unknown request];trace " TRACE_HEX
			   ";work 3\n");
		free(o);
		st = report_pipe_signalled(r, half, out, sigs[k], 2);
		ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == sigs[k],
			      "report status 0x%x after two of %s", st,
			      strsignal(sigs[k]));
	}
	free(r->p);
	free(r);
	unlink(out);
}
END_TEST

/* The first Ctrl-C that the report lets pass says so on a terminal: a
 * report reading a FIFO whose writer stays open and idle (or `cat file -
 * | ctxdump report -` of a writer that ignores it) went on waiting with
 * nothing on the screen, as if it hung.  Old: silent until a second one. */
START_TEST(report_pipe_interrupt_says_so)
{
	struct rec *r = rec_new("srv");
	char out[64], got[512], *o;
	size_t half, n = 0;
	long deadline;
	pid_t pid;
	int p[2], ptm, tty, st;

	rec_work_samples(r);
	half = r->len;
	pay_u(r, 1000000000); /* END, as rec_finish() has it */
	for (int i = 0; i < 6; i++)
		pay_u(r, 0);
	rec_end(r, 12);
	prof_tmpfile(out, sizeof(out), "pipe-tty-out");
	ptm = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	ck_assert_int_ne(ptm, -1);
	ck_assert_int_eq(grantpt(ptm), 0);
	ck_assert_int_eq(unlockpt(ptm), 0);
	tty = open(ptsname(ptm), O_RDWR | O_NOCTTY | O_CLOEXEC);
	ck_assert_int_ne(tty, -1);
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	pid = report_from_pipe(p[0], out, tty);
	ck_assert_int_eq(write(p[1], r->p, half), (ssize_t)half);
	wait_pipe_drained(p[0]);
	ck_assert_int_eq(kill(pid, SIGINT), 0);
	/* the line, as the terminal shows it */
	deadline = test_now_ms() + 30000;
	while (!memchr(got, '\n', n)) {
		struct pollfd pf = {.fd = ptm, .events = POLLIN};
		ssize_t k;

		ck_assert_msg(test_now_ms() < deadline,
			      "nothing on the terminal: '%.*s'", (int)n, got);
		if (poll(&pf, 1, 100) <= 0)
			continue;
		k = read(ptm, got + n, sizeof(got) - 1 - n);
		ck_assert_int_gt(k, 0);
		n += (size_t)k;
	}
	got[n] = '\0';
	ck_assert_str_eq(got, "ctxdump report: interrupt: reading the recording to its "
			      "end first; interrupt again to quit\r\n");
	/* and the report of all of it, as without a terminal */
	ck_assert_int_eq(write(p[1], r->p + half, r->len - half),
			 (ssize_t)(r->len - half));
	close(p[1]);
	close(p[0]);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "report status 0x%x", st);
	o = prof_slurp(out);
	ck_assert_str_eq(o, "unknown_service:srv;[unknown request];trace " TRACE_HEX
			    ";work 3\n");
	free(o);
	close(tty);
	close(ptm);
	free(r->p);
	free(r);
	unlink(out);
}
END_TEST

/* Ids are defined before they are used (doc/ctxdump.1, FILE FORMAT): a
 * record that names one not defined yet is damaged (one flipped bit of a
 * varint makes a string id of 2745), and is counted as malformed, the id
 * taken as none.  Old: taken as none in silence, exit 0, and a frame of
 * an undefined symbol named after its module.  So is a sample before the
 * first round, which has no round to belong to (old: skipped in
 * silence). */
START_TEST(report_undefined_ids_malformed)
{
	static const uint32_t st1[] = {1}, st2[] = {2}, st3[] = {3}, st9[] = {9};
	static const uint32_t kv_bad[] = {1, 99};
	const char *args[] = {"--folded", NULL, NULL}, *summary[] = {NULL, NULL};
	struct rec *r = rec_new("srv");
	char file[64], *o, *err;
	int st;

	rec_string(r, 1, "work", 4);
	rec_frame(r, 1, 1);
	/* frame 2: symbol string 7 and module string 8, not defined */
	pay_u(r, 2);
	pay_u(r, 0x2000);
	pay_u(r, 7);
	pay_u(r, 8);
	pay_u(r, 0x10);
	pay_u(r, 0);
	rec_end(r, 7);
	rec_stack(r, 1, st1, 1);
	rec_stack(r, 2, st2, 1);
	rec_stack(r, 3, st9, 1); /* frame 9: not defined */
	rec_stack(r, 4, st3, 1); /* frame 3: one past the last defined */
	rec_ctx(r, 1, 0x4b, 0x00f067aa0ba902b7ull, NULL, 0);
	rec_ctx(r, 2, 0x5c, 0x00f067aa0ba902b7ull, kv_bad, 1);
	rec_sample(r, 7, 1, 1); /* before any round: malformed, skipped */
	rec_round(r, 0);
	rec_sample(r, 7, 1, 1);
	rec_sample(r, 8, 2, 0);
	rec_sample(r, 9, 3, 0);
	rec_sample(r, 10, 1, 2);
	rec_sample(r, 11, 5, 0); /* stack 5: not defined */
	rec_sample(r, 12, 1, 3); /* context 3: not defined */
	rec_sample(r, 13, 4, 0);
	rec_save(r, file, sizeof(file), "undefined");
	args[1] = summary[0] = file;
	/* frame 2, stacks 3 and 4, context 2 and three samples */
	st = run_report(summary, -1, NULL, 0, 0, &err);
	ck_assert_msg(st == 1 && strstr(err, ": 7 malformed records (the first at "),
		      "exit %d: %s", st, err);
	free(err);
	o = report_stdout(args, 1, "report --folded");
	ck_assert_str_eq(o, "unknown_service:srv;[no trace];0x2000 1\n"
			    "unknown_service:srv;[no trace];[no stack] 3\n"
			    "unknown_service:srv;[no trace];work 1\n"
			    "unknown_service:srv;[unknown request];trace " TRACE_HEX
			    ";work 1\n"
			    "unknown_service:srv;[unknown request];trace "
			    "5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c;work 1\n");
	free(o);
	unlink(file);
}
END_TEST

/* The reader's limits themselves are taken, one past them is malformed
 * (FILE FORMAT): a stack's first guessed frame is an index into it, a
 * context holds at most 256 attributes, ids count from 1 (0 is none)
 * up to UINT32_MAX, and the 10th byte of a varint holds bit 63. */
START_TEST(report_reader_edges)
{
	static const uint32_t f1[] = {1};
	static uint32_t kv[2 * 257];
	const char *args[] = {"--folded", NULL, NULL}, *summary[] = {NULL, NULL};
	struct rec *r = rec_new("srv");
	char file[64], *o, *err;
	size_t i;
	int st;

	for (i = 0; i < 2 * 257; i++)
		kv[i] = 1;
	rec_string(r, 1, "work", 4);
	rec_frame(r, 1, 1);
	rec_stack_guessed(r, 1, 2, f1, 1, 0); /* guessed from frame 0: taken */
	rec_stack_guessed(r, 2, 2, f1, 1, 1); /* from frame 1 of 1: malformed */
	rec_stack(r, 0, f1, 1);               /* id 0: malformed */
	rec_ctx(r, 1, 0x4b, 0x00f067aa0ba902b7ull, kv, 256); /* taken */
	rec_ctx(r, 2, 0x5c, 0x00f067aa0ba902b7ull, kv, 257); /* malformed */
	rec_round(r, 0);
	rec_sample(r, 7, 1, 1);
	rec_sample(r, 8, 2, 0);
	rec_sample(r, 9, 0, 0);
	/* a state of bit 63 only: 10 bytes, the last one 1 */
	pay_u(r, 10);
	pay_u(r, 1ull << 63);
	pay_u(r, 1);
	pay_u(r, 0);
	rec_end(r, 11);
	/* one past: a 10th byte of 2 (bit 64): malformed */
	pay_u(r, 11);
	pay_raw(r, "\x80\x80\x80\x80\x80\x80\x80\x80\x80\x02", 10);
	pay_u(r, 1);
	pay_u(r, 0);
	rec_end(r, 11);
	/* the largest id (a thread id here) is taken */
	rec_sample(r, UINT32_MAX, 1, 0);
	rec_save(r, file, sizeof(file), "edges");
	args[1] = summary[0] = file;
	st = run_report(summary, -1, NULL, 0, 0, &err);
	ck_assert_msg(st == 1 && strstr(err, ": 4 malformed records (the first at "),
		      "exit %d: %s", st, err);
	free(err);
	o = report_stdout(args, 1, "report --folded");
	ck_assert_str_eq(o, "unknown_service:srv;[no trace];[no stack] 2\n"
			    "unknown_service:srv;[no trace];work [guessed] 2\n"
			    "unknown_service:srv;[unknown request];trace " TRACE_HEX
			    ";work [guessed] 1\n");
	free(o);
	unlink(file);
}
END_TEST

/* A context whose flags say it has a trace (Elastic's trace-present byte)
 * but whose trace id is all zero has no trace: OTLP takes an all-zero
 * traceId for invalid.  Old: --spans printed spans of trace
 * 00000000000000000000000000000000 and --folded "trace 000...". */
START_TEST(report_zero_trace_id_is_no_trace)
{
	static const char *const names[] = {"start", "handle", "wait"};
	static const uint32_t s_req[] = {2, 1}, s_idle[] = {3, 1};
	const char *spans[] = {"--spans", NULL, NULL},
		   *folded[] = {"--folded", NULL, NULL};
	struct rec *r = rec_new("srv");
	char file[64], *o;
	uint32_t i;

	rec_functions(r, names, 3);
	rec_stack(r, 1, s_req, 2);
	rec_stack(r, 2, s_idle, 2);
	rec_ctx(r, 1, 0, 0x00f067aa0ba902b7ull, NULL, 0);
	for (i = 0; i < 4; i++) {
		rec_round(r, 10000000ull * i);
		rec_sample(r, 7, 1, 1);
		rec_sample(r, 8, 2, 0);
	}
	rec_save(r, file, sizeof(file), "zero-trace");
	spans[1] = folded[1] = file;
	o = report_stdout(spans, 0, "report");
	ck_assert_msg(!strstr(o, "\"traceId\":\"00000000000000000000000000000000\""),
		      "%s", o);
	free(o);
	o = report_stdout(folded, 0, "report");
	ck_assert_str_eq(o, "unknown_service:srv;[no trace];start;handle 4\n"
			    "unknown_service:srv;[no trace];start;wait 4\n");
	free(o);
	unlink(file);
}
END_TEST

/* --attr key=value: "one of the sample's contexts has attribute key with
 * this value" (ctxdump(1)).  Each sample has an OTEP-4947 context with
 * tenant=a and a custom-labels one with tenant=b.  Old: only the first
 * attribute of that name was compared, so --attr tenant=b matched
 * nothing. */
START_TEST(report_attr_filter_every_context)
{
	static const uint32_t st1[] = {1}, kv_a[] = {2, 3};
	const char *args[] = {"--folded", "--attr", NULL, NULL, NULL};
	static const char *const want[][2] = {{"tenant=a", " 3\n"},
					      {"tenant=b", " 3\n"},
					      {"tenant", " 3\n"},
					      {"tenant=c", NULL}};
	struct rec *r = rec_new("srv");
	char file[64], *o;
	size_t i;

	rec_string(r, 1, "work", 4);
	rec_string(r, 2, "tenant", 6);
	rec_string(r, 3, "a", 1);
	rec_string(r, 4, "b", 1);
	rec_frame(r, 1, 1);
	rec_stack(r, 1, st1, 1);
	rec_ctx(r, 1, 0x4b, 3, kv_a, 1);
	/* context 2: custom-labels (layout 2), valid, no trace, tenant=b */
	pay_u(r, 2);
	pay_u(r, 2);
	pay_u(r, 1);
	for (i = 0; i < 24; i++)
		pay_u(r, 0);
	pay_u(r, 0);
	pay_u(r, 1);
	pay_u(r, 2);
	pay_u(r, 4);
	rec_end(r, 9);
	for (i = 0; i < 3; i++) {
		rec_round(r, 10000000ull * i);
		pay_u(r, 7);
		pay_u(r, 'R');
		pay_u(r, 1);
		pay_u(r, 2);
		pay_u(r, 1);
		pay_u(r, 2);
		rec_end(r, 11);
	}
	rec_save(r, file, sizeof(file), "attr2");
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		char filter[16];

		snprintf(filter, sizeof(filter), "%s", want[i][0]);
		args[2] = filter;
		args[3] = file;
		o = report_stdout(args, 0, "report");
		if (want[i][1])
			ck_assert_msg(strstr(o, want[i][1]), "--attr %s: '%s'",
				      want[i][0], o);
		else
			ck_assert_msg(!o[0], "--attr %s: '%s'", want[i][0], o);
		free(o);
	}
	unlink(file);
}
END_TEST

/* ---- the service ---- */

/* The service every output names: service.name as the process has it (the
 * shim's default "unknown_service:<executable>" too: never prefixed
 * again), else the semantic conventions' default made from
 * process.executable.name, else from the command name, else
 * "unknown_service" (old: the command name only, "unknown_service:ctxdump"
 * without one). */
START_TEST(report_service_name)
{
	static const struct pctx_kv shim[] = {
		{"service.name", "unknown_service:srv-exe"},
		{"process.executable.name", "srv-exe"},
	};
	static const struct pctx_kv exe_only[] = {
		{"process.executable.name", "srv-exe"}};
	static const struct pctx_kv named[] = {{"service.name", "checkout"}};
	/* longer than a string of the file, an "\xc3\xa9" across the cut:
	 * cut before it, with the mark (it was cut silently, inside it) */
	static char long_name[280], long_want[280];
	static const struct pctx_kv named_long[] = {{"service.name", long_name}};
	static const struct {
		const char *comm;
		const struct pctx_kv *res;
		size_t n_res;
		const char *want;
	} cases[] = {
		{"srv", shim, 2, "unknown_service:srv-exe"},
		{"srv", exe_only, 1, "unknown_service:srv-exe"},
		{"srv", named, 1, "checkout"},
		{"srv", NULL, 0, "unknown_service:srv"},
		{"", NULL, 0, "unknown_service"},
		{"srv", named_long, 1, long_want},
	};
	unsigned i;

	memset(long_name, 'a', 254);
	memcpy(long_name + 254, "\303\251bbbbbbbbbb", 13);
	memset(long_want, 'a', 253);
	memcpy(long_want + 253, "...", 4);

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *sum[] = {NULL, NULL}, *fold[] = {"--folded", NULL, NULL},
			   *spans[] = {"--spans", NULL, NULL};
		struct rec *r = rec_new(cases[i].comm);
		char file[64], out[64], want[640], what[48], *o;
		uint8_t pc[512];
		size_t pl = 0;

		if (cases[i].res) {
			ck_assert_int_eq(pctx_encode(pc, sizeof(pc), &pl, cases[i].res,
						     cases[i].n_res, NULL, NULL, 0),
					 0);
			rec_pctx(r, pc, pl);
		}
		rec_work_samples(r);
		rec_save(r, file, sizeof(file), "service");
		prof_tmpfile(out, sizeof(out), "service-out");
		sum[0] = fold[1] = spans[1] = file;

		snprintf(what, sizeof(what), "case %u: report", i);
		o = report_stdout(sum, 0, what);
		snprintf(want, sizeof(want), "\nService: %s\n", cases[i].want);
		ck_assert_msg(strstr(o, want), "case %u: want '%s' in %s", i, want + 1,
			      o);
		/* the length is to the end record, not the last round (20 ms) */
		ck_assert_msg(strstr(o, " Hz, 1.000 s, 3 rounds, 3 samples of "),
			      "case %u: %s", i, o);
		free(o);

		snprintf(what, sizeof(what), "case %u: report --folded", i);
		o = report_stdout(fold, 0, what);
		snprintf(want, sizeof(want),
			 "%s;[unknown request];trace " TRACE_HEX ";work 3\n",
			 cases[i].want);
		ck_assert_msg(strcmp(o, want) == 0, "case %u: %s", i, o);
		free(o);

		snprintf(what, sizeof(what), "case %u: report --spans", i);
		report_to(spans, out, 0, what);
		/* OTLP's resource carries the whole name */
		snprintf(
			want, sizeof(want),
			"{\"key\":\"service.name\",\"value\":{\"stringValue\":\"%s\"}}",
			cases[i].res == named_long ? long_name : cases[i].want);
		ck_assert_msg(count_in_file(out, want) == 1, "case %u: no %s", i, want);
		ck_assert_uint_eq(count_in_file(out, "\"service.name\""), 1);
		ck_assert_uint_eq(count_in_file(out, "unknown_service:unknown_service"),
				  0);
		unlink(out);
		unlink(file);
	}
}
END_TEST

/* The process id the outputs give: the INFO record's, or the process
 * context's process.pid, each only when it is a pid (1 ... INT_MAX).  A
 * crafted file's other values are left out of --spans (the other's
 * stands in) and shown as "?" in the summary (old: 2^63 and more showed
 * as a negative process.pid, others as made-up numbers). */
START_TEST(report_process_pid_bounded)
{
	static const struct {
		uint64_t info;   /* INFO's pid */
		bool has_pctx;   /* a process context with process.pid ... */
		int64_t pctx;    /* ... of this value */
		const char *sum; /* in the summary */
		const char *pid; /* process.pid in --spans, NULL: none */
	} cases[] = {
		{4242, false, 0, "process 4242 (", "4242"},
		{0, false, 0, "process ? (", NULL},
		{(uint64_t)INT_MAX + 1, false, 0, "process ? (", NULL},
		{UINT64_C(1) << 63, false, 0, "process ? (", NULL},
		{UINT64_MAX, false, 0, "process ? (", NULL},
		{4242, true, 77, "process 4242 (", "77"},
		{4242, true, -5, "process 4242 (", "4242"},
		{4242, true, INT64_MIN, "process 4242 (", "4242"},
		{4242, true, (int64_t)INT_MAX + 1, "process 4242 (", "4242"},
		{UINT64_MAX, true, -1, "process ? (", NULL},
	};
	unsigned i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *sum[] = {NULL, NULL}, *spans[] = {"--spans", NULL, NULL};
		struct pctx_kv_typed res[] = {
			{"service.name", PCTX_V_STRING, "srv", 0},
			{"process.pid", PCTX_V_INT, NULL, cases[i].pctx},
		};
		struct rec *r = rec_new_pid("srv", cases[i].info);
		char file[64], out[64], want[128], what[48], *o;
		uint8_t pc[512];
		size_t pl = 0;

		if (cases[i].has_pctx) {
			ck_assert_int_eq(pctx_encode_typed(pc, sizeof(pc), &pl, res, 2,
							   NULL, NULL, 0),
					 0);
			rec_pctx(r, pc, pl);
		}
		rec_work_samples(r);
		rec_save(r, file, sizeof(file), "pid");
		prof_tmpfile(out, sizeof(out), "pid-out");
		sum[0] = spans[1] = file;

		snprintf(what, sizeof(what), "case %u: report", i);
		o = report_stdout(sum, 0, what);
		snprintf(want, sizeof(want), "Recording of %s", cases[i].sum);
		ck_assert_msg(strncmp(o, want, strlen(want)) == 0, "case %u: %s", i, o);
		free(o);

		snprintf(what, sizeof(what), "case %u: report --spans", i);
		report_to(spans, out, 0, what);
		ck_assert_msg(count_in_file(out, "\"process.pid\"") ==
				      (cases[i].pid ? 1 : 0),
			      "case %u: %zu process.pid", i,
			      count_in_file(out, "\"process.pid\""));
		if (cases[i].pid) {
			snprintf(want, sizeof(want),
				 "{\"key\":\"process.pid\",\"value\":{\"intValue\":"
				 "\"%s\"}}",
				 cases[i].pid);
			ck_assert_msg(count_in_file(out, want) == 1, "case %u: no %s",
				      i, want);
		}
		unlink(out);
		unlink(file);
	}
}
END_TEST

/* ---- command line and read errors ---- */

/* The header's version: a later one is a newer recorder's, and version 0,
 * which no recorder wrote, is no recording.  Old: version 0 was "recorded
 * by a newer ctxdump". */
START_TEST(report_header_version)
{
	static const struct {
		uint8_t version, size, len; /* len: bytes of the file */
		const char *want;
	} cases[] = {
		{2, 16, 16, ": recorded by a newer ctxdump (unsupported version)\n"},
		{0, 16, 16, ": not a ctxdump recording\n"},
		/* a header shorter than version 1's */
		{1, 15, 16, ": not a ctxdump recording\n"},
		/* files that end inside the header: after the magic, and
		 * inside the rest of a longer one (of a later revision) */
		{1, 16, 8, ": not a ctxdump recording\n"},
		{1, 24, 16, ": not a ctxdump recording\n"},
	};
	uint8_t hdr[16] = {'C', 'T', 'X', 'D', 'P', 'R', 'O', 'F', 0, 0, 16, 0};
	const char *args[] = {NULL, NULL};
	char file[64], *err;
	size_t i;
	FILE *f;
	int st;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		hdr[8] = cases[i].version;
		hdr[10] = cases[i].size;
		prof_tmpfile(file, sizeof(file), "version");
		f = fopen(file, "we");
		ck_assert_ptr_nonnull(f);
		ck_assert_uint_eq(fwrite(hdr, 1, cases[i].len, f), cases[i].len);
		ck_assert_int_eq(fclose(f), 0);
		args[0] = file;
		st = run_report(args, -1, NULL, 0, 0, &err);
		ck_assert_msg(st == 2, "version %u size %u: exit %d: %s",
			      cases[i].version, cases[i].size, st, err);
		ck_assert_msg(strstr(err, cases[i].want), "version %u: %s",
			      cases[i].version, err);
		free(err);
		unlink(file);
	}
}
END_TEST

START_TEST(report_version_and_read_errors)
{
	const char *v[] = {"-V", NULL}, *vl[] = {"--version", NULL},
		   *dir[] = {"/", NULL}, *in[] = {"-", NULL}, *named[] = {NULL, NULL};
	char file[64], *out, *err, *want;
	static const uint32_t st1[] = {1};
	struct rec *r = rec_new("srv");
	int st, p[2], fl, fd;

	/* the version line of ctxdump -V */
	st = prof_run(&want, &err, "-V", NULL);
	ck_assert_int_eq(st, 0);
	free(err);
	prof_tmpfile(file, sizeof(file), "version");
	st = run_report(v, -1, file, 0, 0, &err);
	ck_assert_msg(st == 0, "report -V exit %d: %s", st, err);
	free(err);
	out = prof_slurp(file);
	ck_assert_str_eq(out, want);
	free(out);
	st = run_report(vl, -1, file, 0, 0, &err);
	ck_assert_int_eq(st, 0);
	free(err);
	out = prof_slurp(file);
	ck_assert_str_eq(out, want);
	free(out);
	free(want);
	unlink(file);

	/* a directory: the error, not "not a recording" */
	st = run_report(dir, -1, NULL, 0, 0, &err);
	ck_assert_int_eq(st, 2);
	ck_assert_msg(strstr(err, "cannot read /: Is a directory"), "%s", err);
	free(err);

	/* an empty file (a recorder that failed before its header) is said
	 * to be one, with the status of a file that is not a recording (old:
	 * only "not a ctxdump recording"); a byte makes it no longer empty */
	prof_tmpfile(file, sizeof(file), "empty");
	named[0] = file;
	st = run_report(named, -1, NULL, 0, 0, &err);
	ck_assert_int_eq(st, 2);
	ck_assert_msg(strstr(err, ": empty file, not a ctxdump recording\n"), "%s",
		      err);
	free(err);
	st = run_report(in, -1, NULL, 0, 0, &err);
	ck_assert_int_eq(st, 2);
	ck_assert_str_eq(err,
			 "ctxdump report: standard input: empty file, not a ctxdump "
			 "recording\n");
	free(err);
	fd = open(file, O_WRONLY | O_APPEND | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "C", 1), 1);
	close(fd);
	st = run_report(named, -1, NULL, 0, 0, &err);
	ck_assert_int_eq(st, 2);
	ck_assert_msg(strstr(err, ": not a ctxdump recording\n"), "%s", err);
	free(err);
	unlink(file);

	/* a read that fails after whole records (standard input that would
	 * block): fatal, not the end of a complete recording */
	rec_string(r, 1, "fn", 2);
	rec_frame(r, 1, 1);
	rec_stack(r, 1, st1, 1);
	rec_round(r, 0);
	rec_sample(r, 7, 1, 0);
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	ck_assert_int_eq(write(p[1], r->p, r->len), (ssize_t)r->len);
	free(r->p);
	free(r);
	fl = fcntl(p[0], F_GETFL);
	ck_assert_int_eq(fcntl(p[0], F_SETFL, fl | O_NONBLOCK), 0);
	st = run_report(in, p[0], NULL, 0, 0, &err);
	close(p[0]);
	close(p[1]);
	ck_assert_msg(st == 2, "exit %d: %s", st, err);
	ck_assert_msg(strstr(err, "cannot read standard input: Resource "
				  "temporarily unavailable"),
		      "%s", err);
	free(err);
}
END_TEST

TEST_SUITE(ctxdump_report_suite)
{
	Suite *s;
	TCase *tc;

	if (!prof_python())
		test_skip("python3 not found in PATH (OTLP/JSON checks)");
	s = suite_create("ctxdump-report");
	tc = tcase_create("report");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, report_spans_memory_bounded);
	tcase_add_test(tc, report_spans_budget);
	tcase_add_test(tc, report_spans_tree);
	tcase_add_test(tc, report_spans_budget_keeps_parents);
	tcase_add_test(tc, report_spans_untraced_request_not_idle);
	tcase_add_test(tc, report_spans_filter_per_sample);
	tcase_add_test(tc, report_spans_stackless_sample);
	tcase_add_test(tc, report_spans_idle_elsewhere);
	tcase_add_test(tc, report_context_spans_linear);
	tcase_add_test(tc, report_context_span_attr_keys);
	tcase_add_test(tc, report_context_span_last_attrs);
	tcase_add_test(tc, report_folded_memory_bounded);
	tcase_add_test(tc, report_reader_limits);
	tcase_add_test(tc, report_exec_records_linear);
	tcase_add_test(tc, report_exec_images_bounded);
	tcase_add_test(tc, report_thread_name_per_image);
	tcase_add_test(tc, report_layouts_once);
	tcase_add_test(tc, report_layout_kind_wide);
	tcase_add_test(tc, report_escapes_target_strings);
	tcase_add_test(tc, report_summary_traces_per_request);
	tcase_add_test(tc, report_summary_requests_without_trace);
	tcase_add_test(tc, report_summary_long_request_name);
	tcase_add_test(tc, report_summary_recursive_trunk);
	tcase_add_test(tc, report_round_time_going_back);
	tcase_add_test(tc, report_joined_recordings);
	tcase_add_test(tc, report_round_time_wraps);
	tcase_add_test(tc, report_stop_window_sum_wraps);
	tcase_add_test(tc, report_errors_name_offset);
	tcase_add_test(tc, report_undefined_ids_malformed);
	tcase_add_test(tc, report_reader_edges);
	tcase_add_test(tc, report_pipe_survives_first_interrupt);
	tcase_add_test(tc, report_pipe_interrupt_says_so);
	tcase_add_test(tc, report_thread_name_cut);
	tcase_add_test(tc, report_write_error);
	tcase_add_test(tc, report_frame_name_no_memory);
	tcase_add_test(tc, report_many_function_names);
	tcase_add_test(tc, report_summary_thread_name);
	tcase_add_test(tc, report_zero_trace_id_is_no_trace);
	tcase_add_test(tc, report_attr_filter_every_context);
	tcase_add_test(tc, report_service_name);
	tcase_add_test(tc, report_process_pid_bounded);
	tcase_add_test(tc, report_version_and_read_errors);
	tcase_add_test(tc, report_header_version);
	suite_add_tcase(s, tc);
	return s;
}
