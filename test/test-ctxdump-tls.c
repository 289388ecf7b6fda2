/* SPDX-License-Identifier: Apache-2.0 */
/* ctxdump against the test writers (test/helpers/writer-*.c), one per TLS
 * access model of otel_thread_ctx_v1: TLSDESC and legacy general-dynamic
 * shared objects, initial-exec and local-exec executables, and dlopen()ed
 * libraries in static and dynamic TLS.  Every thread's record in ctxdump's
 * JSON must be exactly what the writer says it published, gdb must find the
 * same variable address and pointer in every thread, and --stacks must show
 * the function the threads block in.  A thread whose DTV still holds the
 * block of a module whose id a later dlopen() reused shows no context.
 * Afterwards the writer must still run and exit normally. */
#include "test-ctxdump-writer.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "thread-record.h"

/* ---- a minimal JSON reader (enough for ctxdump's output) -------------- */

enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jval {
	enum jtype type;
	bool b;
	double num;
	long long inum;
	char *str; /* J_STR (may contain NUL: see len) */
	size_t len;
	struct jval *items; /* J_ARR values, J_OBJ values */
	char **keys;        /* J_OBJ */
	size_t n;
};

struct jparser {
	const char *p;
	const char *end;
};

static void
jskip(struct jparser *j)
{
	while (j->p < j->end && isspace((unsigned char)*j->p))
		j->p++;
}

static uint32_t
jhex4(struct jparser *j)
{
	uint32_t v = 0;
	int i;

	ck_assert_msg(j->end - j->p >= 4, "JSON: short \\u escape");
	for (i = 0; i < 4; i++) {
		char c = *j->p++;

		ck_assert_msg(isxdigit((unsigned char)c), "JSON: bad \\u escape");
		v = v * 16 +
		    (uint32_t)(isdigit((unsigned char)c)
				       ? c - '0'
				       : (tolower((unsigned char)c) - 'a' + 10));
	}
	return v;
}

static char *
jstring(struct jparser *j, size_t *len)
{
	/* the unescaped text is never longer than the escaped one */
	char *out = malloc((size_t)(j->end - j->p) + 1);
	size_t n = 0;

	ck_assert_ptr_nonnull(out);
	ck_assert_msg(j->p < j->end && *j->p == '"', "JSON: string expected");
	j->p++;
	for (;;) {
		unsigned char c;

		ck_assert_msg(j->p < j->end, "JSON: unterminated string");
		c = (unsigned char)*j->p++;
		if (c == '"')
			break;
		ck_assert_msg(c >= 0x20, "JSON: raw control byte 0x%02x in a string",
			      c);
		if (c != '\\') {
			out[n++] = (char)c;
			continue;
		}
		ck_assert_msg(j->p < j->end, "JSON: bad escape");
		c = (unsigned char)*j->p++;
		switch (c) {
		case 'u': {
			uint32_t cp = jhex4(j);

			if (cp >= 0xd800 && cp < 0xdc00 && j->end - j->p >= 6 &&
			    j->p[0] == '\\' && j->p[1] == 'u') {
				uint32_t lo;

				j->p += 2;
				lo = jhex4(j);
				ck_assert_msg(lo >= 0xdc00 && lo < 0xe000,
					      "JSON: bad surrogate");
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			}
			cw_put_utf8((uint8_t *)out, &n, cp);
			break;
		}
		default: {
			int e = cw_json_unescape(c);

			ck_assert_msg(e >= 0, "JSON: unknown escape \\%c", c);
			out[n++] = (char)e;
			break;
		}
		}
	}
	out[n] = '\0';
	*len = n;
	return out;
}

static void jparse_value(struct jparser *j, struct jval *v);

static void
jparse_container(struct jparser *j, struct jval *v, bool obj)
{
	size_t cap = 0;

	v->type = obj ? J_OBJ : J_ARR;
	j->p++;
	jskip(j);
	if (j->p < j->end && *j->p == (obj ? '}' : ']')) {
		j->p++;
		return;
	}
	for (;;) {
		if (v->n == cap) {
			cap = cap ? 2 * cap : 8;
			v->items = realloc(v->items, cap * sizeof(*v->items));
			v->keys = realloc(v->keys, cap * sizeof(*v->keys));
			ck_assert_ptr_nonnull(v->items);
			ck_assert_ptr_nonnull(v->keys);
		}
		v->keys[v->n] = NULL;
		jskip(j);
		if (obj) {
			size_t klen;

			v->keys[v->n] = jstring(j, &klen);
			jskip(j);
			ck_assert_msg(j->p < j->end && *j->p == ':',
				      "JSON: ':' expected");
			j->p++;
		}
		jparse_value(j, &v->items[v->n]);
		v->n++;
		jskip(j);
		ck_assert_msg(j->p < j->end, "JSON: unterminated container");
		if (*j->p == ',') {
			j->p++;
			continue;
		}
		ck_assert_msg(*j->p == (obj ? '}' : ']'),
			      "JSON: ',' or end expected at '%.20s'", j->p);
		j->p++;
		return;
	}
}

static void
jparse_value(struct jparser *j, struct jval *v)
{
	memset(v, 0, sizeof(*v));
	jskip(j);
	ck_assert_msg(j->p < j->end, "JSON: value expected");
	if (*j->p == '{' || *j->p == '[') {
		jparse_container(j, v, *j->p == '{');
	} else if (*j->p == '"') {
		v->type = J_STR;
		v->str = jstring(j, &v->len);
	} else if (j->end - j->p >= 4 && memcmp(j->p, "null", 4) == 0) {
		v->type = J_NULL;
		j->p += 4;
	} else if (j->end - j->p >= 4 && memcmp(j->p, "true", 4) == 0) {
		v->type = J_BOOL;
		v->b = true;
		j->p += 4;
	} else if (j->end - j->p >= 5 && memcmp(j->p, "false", 5) == 0) {
		v->type = J_BOOL;
		j->p += 5;
	} else {
		char *e;

		v->type = J_NUM;
		errno = 0;
		v->inum = strtoll(j->p, &e, 10);
		v->num = strtod(j->p, &e);
		ck_assert_msg(e > j->p, "JSON: unexpected '%.20s'", j->p);
		j->p = e;
	}
}

static struct jval *
jparse(const char *text)
{
	struct jparser j = {.p = text, .end = text + strlen(text)};
	struct jval *v = calloc(1, sizeof(*v));

	ck_assert_ptr_nonnull(v);
	jparse_value(&j, v);
	jskip(&j);
	ck_assert_msg(j.p == j.end, "JSON: trailing text '%.20s'", j.p);
	return v;
}

static void
jfree_inner(struct jval *v)
{
	size_t i;

	for (i = 0; i < v->n; i++) {
		jfree_inner(&v->items[i]);
		free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->str);
}

static void
jfree(struct jval *v)
{
	if (!v)
		return;
	jfree_inner(v);
	free(v);
}

/* Member of an object, NULL if absent. */
static const struct jval *
jget(const struct jval *o, const char *key)
{
	size_t i;

	ck_assert_msg(o && o->type == J_OBJ, "JSON: object expected for '%s'", key);
	for (i = 0; i < o->n; i++)
		if (strcmp(o->keys[i], key) == 0)
			return &o->items[i];
	return NULL;
}

static const struct jval *
jmust(const struct jval *o, const char *key, enum jtype type)
{
	const struct jval *v = jget(o, key);

	ck_assert_msg(v, "JSON: member '%s' missing", key);
	ck_assert_msg(v->type == type, "JSON: member '%s' has type %d, expected %d",
		      key, v->type, type);
	return v;
}

/* An address string "0x..." */
static uint64_t
jaddr(const struct jval *v, const char *what)
{
	char *e;
	uint64_t a;

	ck_assert_msg(v && v->type == J_STR, "%s: address string expected", what);
	ck_assert_msg(strncmp(v->str, "0x", 2) == 0, "%s: '%s' is not 0x...", what,
		      v->str);
	errno = 0;
	a = strtoull(v->str + 2, &e, 16);
	ck_assert_msg(errno == 0 && *e == '\0' && e > v->str + 2,
		      "%s: bad address '%s'", what, v->str);
	return a;
}

/* ---- writers ----------------------------------------------------------- */

struct writer_case {
	const char *name;
	const char *exe;
	const char *lib_arg; /* library for writer-dlopen, in HELPER_DIR */
	const char *env;     /* extra environment entry or NULL */
	const char *model;   /* ctxdump's symbol.model */
	const char *module;  /* basename of the defining object */
};

static const struct writer_case cases[] = {
	{"tlsdesc", "writer-tlsdesc", NULL, NULL, "tlsdesc-static",
	 "libwtls-tlsdesc.so"},
	{"gd", "writer-gd", NULL, NULL, "general-dynamic", "libwtls-gd.so"},
	{"ie", "writer-ie", NULL, NULL, "initial-exec", "libwtls-def.so"},
	{"le", "writer-le", NULL, NULL, "local-exec", "writer-le"},
	{"dlopen-tlsdesc", "writer-dlopen", "libwtls-tlsdesc.so", NULL,
	 "tlsdesc-static", "libwtls-tlsdesc.so"},
	{"dlopen-tlsdesc-dynamic", "writer-dlopen", "libwtls-tlsdesc.so",
	 "GLIBC_TUNABLES=glibc.rtld.optional_static_tls=0", "tlsdesc-dynamic",
	 "libwtls-tlsdesc.so"},
	{"dlopen-gd", "writer-dlopen", "libwtls-gd.so", NULL, "general-dynamic",
	 "libwtls-gd.so"},
	/* a non-PIE executable (ET_EXEC, load bias 0) */
	{"le-nopie", "writer-le-nopie", NULL, NULL, "local-exec", "writer-le-nopie"},
	/* the variable exported as an alias of a hidden one, at offset 0x28
	 * of its module's block: no relocation names it (symbol-less TLSDESC
	 * / DTPMOD64 with an addend) */
	{"alias-tlsdesc", "writer-alias-tlsdesc", NULL, NULL, "tlsdesc-static",
	 "libwtls-alias-tlsdesc.so"},
	{"alias-gd", "writer-alias-gd", NULL, NULL, "general-dynamic",
	 "libwtls-alias-gd.so"},
	/* initial-exec code in the library: symbol-less TPOFF64 words */
	{"alias-ie", "writer-alias-ie", NULL, NULL, "initial-exec",
	 "libwtls-alias-ie.so"},
	/* local-dynamic code: one descriptor for the module's base */
	{"alias-ld", "writer-alias-ld", NULL, NULL, "tlsdesc-static",
	 "libwtls-alias-ld.so"},
	{"dlopen-alias-tlsdesc-dynamic", "writer-dlopen", "libwtls-alias-tlsdesc.so",
	 "GLIBC_TUNABLES=glibc.rtld.optional_static_tls=0", "tlsdesc-dynamic",
	 "libwtls-alias-tlsdesc.so"},
	{"dlopen-alias-ld-dynamic", "writer-dlopen", "libwtls-alias-ld.so",
	 "GLIBC_TUNABLES=glibc.rtld.optional_static_tls=0", "tlsdesc-dynamic",
	 "libwtls-alias-ld.so"},
	{"dlopen-alias-gd", "writer-dlopen", "libwtls-alias-gd.so", NULL,
	 "general-dynamic", "libwtls-alias-gd.so"},
};
#define N_CASES ((int)(sizeof(cases) / sizeof(cases[0])))

struct writer {
	struct test_child child;
	const struct writer_case *wc;
	pid_t pid;
	struct expect_thread t[MAX_THREADS];
	int n;
};

static void
writer_start(struct writer *w, const struct writer_case *wc)
{
	char exe[PATH_MAX], lib[PATH_MAX], preload[PATH_MAX + 16];
	char *argv[3] = {NULL, NULL, NULL};
	char *env[3] = {(char *)wc->env, NULL, NULL};

	memset(w, 0, sizeof(*w));
	w->wc = wc;
	argv[0] = (char *)prof_helper(wc->exe, exe, sizeof(exe));
	if (wc->lib_arg)
		argv[1] = (char *)prof_helper(wc->lib_arg, lib, sizeof(lib));
	/* MAP_BELOW is for the helper that reads it (map_below_cases) */
	if (wc->env && strncmp(wc->env, "MAP_BELOW=", 10) == 0) {
		snprintf(preload, sizeof(preload), "LD_PRELOAD=%s",
			 test_helper_path("libmap-below.so"));
		env[1] = preload;
	}
	test_child_start(&w->child, argv, wc->env ? env : NULL, false);
	cw_read_threads(&w->child, w->t, &w->n, &w->pid);
}

/* Every thread of the writer must be running (not stopped or traced)
 * after a reader is done, and the writer must exit 0 on EOF. */
static void
writer_finish(struct writer *w)
{
	int i, status;

	for (i = 0; i < w->n; i++) {
		char path[64], buf[512], *p;
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)w->pid,
			 (int)w->t[i].tid);
		f = fopen(path, "re");
		ck_assert_msg(f, "%s: thread %d vanished", w->wc->name,
			      (int)w->t[i].tid);
		p = fgets(buf, sizeof(buf), f);
		fclose(f);
		ck_assert_ptr_nonnull(p);
		p = strrchr(buf, ')');
		ck_assert_ptr_nonnull(p);
		ck_assert_msg(p[2] != 't' && p[2] != 'T',
			      "%s: thread %d left in state %c", w->wc->name,
			      (int)w->t[i].tid, p[2]);
	}
	status = test_child_finish(&w->child, TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "%s: writer did not exit normally (status 0x%x)", w->wc->name,
		      status);
}

static const struct expect_thread *
writer_thread(const struct writer *w, pid_t tid)
{
	int i;

	for (i = 0; i < w->n; i++)
		if (w->t[i].tid == tid)
			return &w->t[i];
	return NULL;
}

/* Runs ctxdump with extra options; returns the parsed JSON. */
static struct jval *
run_ctxdump(const struct writer *w, const char *opt)
{
	char pid[16], *out = NULL, *err = NULL, *argv[6];
	const char *args[4] = {"--json", opt, NULL, NULL};
	struct jval *j;
	int status;

	snprintf(pid, sizeof(pid), "%d", (int)w->pid);
	args[opt ? 2 : 1] = pid;
	test_ctxdump_argv(argv, 6, args);
	status = test_run_capture(argv, NULL, false, &out, &err, TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "%s: ctxdump exited with status 0x%x: %s", w->wc->name, status,
		      err);
	j = jparse(out);
	free(out);
	free(err);
	return j;
}

static const struct jval *
json_thread(const struct jval *root, pid_t tid)
{
	const struct jval *threads = jmust(root, "threads", J_ARR);
	size_t i;

	for (i = 0; i < threads->n; i++)
		if (jmust(&threads->items[i], "tid", J_NUM)->inum == tid)
			return &threads->items[i];
	return NULL;
}

static bool
ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && strcmp(s + a - b, suffix) == 0 &&
	       (a == b || s[a - b - 1] == '/');
}

/* The decoded attributes must be exactly what the writer encoded: decoded
 * here with the formats library (no key map: every index is "#N"). */
static void
check_attrs(const char *who, const struct expect_thread *t, const struct jval *ctx)
{
	const struct jval *attrs = jmust(ctx, "attrs", J_ARR);
	struct trec_attrs_decoded *dec = calloc(1, sizeof(*dec));
	unsigned i;

	ck_assert_ptr_nonnull(dec);
	ck_assert_int_eq(trec_attrs_decode(t->attrs, t->attrs_len, 0, dec), 0);
	ck_assert_msg(attrs->n == dec->n, "%s: %zu attributes, expected %u", who,
		      attrs->n, dec->n);
	for (i = 0; i < dec->n; i++) {
		const struct jval *a = &attrs->items[i];
		const struct jval *val = jmust(a, "value", J_STR);
		char key[8];

		snprintf(key, sizeof(key), "#%u", dec->attr[i].key);
		ck_assert_int_eq(jmust(a, "index", J_NUM)->inum, dec->attr[i].key);
		ck_assert_str_eq(jmust(a, "key", J_STR)->str, key);
		ck_assert_msg(val->len == dec->attr[i].len &&
				      memcmp(val->str, dec->attr[i].val, val->len) == 0,
			      "%s: attribute %s differs: '%s' (%zu bytes, expected %u)",
			      who, key, val->str, val->len, dec->attr[i].len);
	}
	free(dec);
}

static void
check_thread(const struct writer *w,
	     const struct expect_thread *t,
	     const struct jval *jt)
{
	const struct jval *ctx = jget(jt, "context");
	char who[64];

	snprintf(who, sizeof(who), "%s tid %d (%s)", w->wc->name, (int)t->tid, t->kind);
	ck_assert_msg(!jget(jt, "error"), "%s: ctxdump error '%s'", who,
		      jget(jt, "error")->type == J_STR ? jget(jt, "error")->str : "?");
	ck_assert_msg(ctx, "%s: no context member", who);
	if (t->ptr == 0) {
		ck_assert_msg(ctx->type == J_NULL, "%s: context should be null", who);
		return;
	}
	ck_assert_msg(ctx->type == J_OBJ, "%s: context missing", who);
	ck_assert_msg(jaddr(jget(ctx, "record_addr"), who) == t->ptr,
		      "%s: record_addr differs from the writer's pointer", who);
	ck_assert_int_eq(jmust(ctx, "valid", J_NUM)->inum, t->valid);
	if (t->valid != TREC_VALID) {
		ck_assert_msg(jmust(ctx, "trace_id", J_NULL) &&
				      jmust(ctx, "span_id", J_NULL) &&
				      jmust(ctx, "flags", J_NULL),
			      "%s", who);
		ck_assert_uint_eq(jmust(ctx, "attrs", J_ARR)->n, 0);
		ck_assert_int_eq(jmust(ctx, "attrs_data_size", J_NUM)->inum, 0);
		return;
	}
	ck_assert_str_eq(jmust(ctx, "trace_id", J_STR)->str, t->trace_id);
	ck_assert_str_eq(jmust(ctx, "span_id", J_STR)->str, t->span_id);
	ck_assert_int_eq(jmust(ctx, "flags", J_NUM)->inum, t->flags);
	ck_assert_int_eq(jmust(ctx, "attrs_data_size", J_NUM)->inum,
			 (long long)t->attrs_len);
	ck_assert_msg(!jmust(ctx, "attrs_truncated", J_BOOL)->b, "%s: attrs truncated",
		      who);
	check_attrs(who, t, ctx);
}

/* ---- tests -------------------------------------------------------------- */

/* ctxdump's JSON for writer wc must be what the writer published. */
static void
json_matches(const struct writer_case *wc)
{
	const struct jval *sym, *threads;
	struct writer w;
	struct jval *root;
	int i, kinds = 0;

	writer_start(&w, wc);
	root = run_ctxdump(&w, NULL);
	ck_assert_int_eq(jmust(root, "pid", J_NUM)->inum, w.pid);
	sym = jmust(root, "symbol", J_OBJ);
	ck_assert_str_eq(jmust(sym, "name", J_STR)->str, OTEL_THREAD_CTX_SYMBOL);
	ck_assert_msg(strcmp(jmust(sym, "model", J_STR)->str, wc->model) == 0,
		      "%s: model %s, expected %s", wc->name, jget(sym, "model")->str,
		      wc->model);
	ck_assert_msg(ends_with(jmust(sym, "module", J_STR)->str, wc->module),
		      "%s: module %s, expected .../%s", wc->name,
		      jget(sym, "module")->str, wc->module);
	threads = jmust(root, "threads", J_ARR);
	ck_assert_msg((int)threads->n == w.n, "%s: %zu threads, writer has %d",
		      wc->name, threads->n, w.n);
	for (i = 0; i < w.n; i++) {
		const struct jval *jt = json_thread(root, w.t[i].tid);

		ck_assert_msg(jt, "%s: thread %d missing", wc->name, (int)w.t[i].tid);
		check_thread(&w, &w.t[i], jt);
		if (strcmp(w.t[i].kind, "full") == 0) {
			ck_assert_uint_eq(TREC_HEADER_SIZE + w.t[i].attrs_len,
					  TREC_MAX_SIZE);
			kinds++;
		}
	}
	ck_assert_int_eq(kinds, 1);
	jfree(root);
	writer_finish(&w);
}

START_TEST(test_json_matches_writer)
{
	json_matches(&cases[_i]);
}
END_TEST

/* The program maps the file of the object that defines the variable, or
 * relocates against it, itself, read-only and below the loader's mapping
 * (libbacktrace, in-process symbolizers and crash reporters read their
 * own debug information so): that lower offset-0 mapping is not the one
 * the load bias comes from (old: it was, and no thread could be read,
 * "the loader has not filled in the TLS slot"). */
static const struct writer_case map_below_cases[] = {
	{"below-tlsdesc", "writer-tlsdesc", NULL, "MAP_BELOW=libwtls-tlsdesc.so",
	 "tlsdesc-static", "libwtls-tlsdesc.so"},
	{"below-gd", "writer-gd", NULL, "MAP_BELOW=libwtls-gd.so", "general-dynamic",
	 "libwtls-gd.so"},
	/* the executable, whose GOT holds the TP offset */
	{"below-ie", "writer-ie", NULL, "MAP_BELOW=writer-ie", "initial-exec",
	 "libwtls-def.so"},
	{"below-le", "writer-le", NULL, "MAP_BELOW=writer-le", "local-exec",
	 "writer-le"},
	{"below-le-nopie", "writer-le-nopie", NULL, "MAP_BELOW=writer-le-nopie",
	 "local-exec", "writer-le-nopie"},
	/* libc, whose frames (read, start_thread) are on every stack */
	{"below-libc", "writer-tlsdesc", NULL, "MAP_BELOW=libc.so.6", "tlsdesc-static",
	 "libwtls-tlsdesc.so"},
};

START_TEST(test_own_mapping_below_loader)
{
	json_matches(&map_below_cases[_i]);
}
END_TEST

/* General-dynamic and initial-exec relocations both against the variable
 * (lld keeps both), the library dlopen()ed after the threads started,
 * which publish through initial-exec code: their DTVs never learn of the
 * module, so the general-dynamic slot tells no thread's place, while the
 * initial-exec word tells every thread's (old: general dynamic, and
 * every one of those threads "no context"). */
START_TEST(test_mixed_gd_ie_reads_ie)
{
	static const struct writer_case wc = {"dlopen-mixed",     "writer-dlopen",
					      "libwtls-mixed.so", NULL,
					      "initial-exec",     "libwtls-mixed.so"};
	char lib[PATH_MAX];

	if (access(prof_helper(wc.lib_arg, lib, sizeof(lib)), R_OK) != 0)
		return; /* not built: no lld */
	json_matches(&wc);
}
END_TEST

/* A module id reused after dlclose() (test/helpers/writer-redlopen.c): the
 * "stale" thread's DTV still holds the first library's block under the
 * id the second one got, with the old generation.  glibc would give that
 * thread a new block on its next access; until then it has none for the
 * loaded library: ctxdump must say so (slot_addr and context null), not
 * show the old record (old: general dynamic showed it, as if current).
 * TLSDESC with dynamic TLS was already checked against the descriptor's
 * generation. */
static const struct writer_case redlopen_cases[] = {
	{"redlopen-gd", "writer-redlopen", "libwtls-gd.so", NULL, "general-dynamic",
	 "libwtls-gd.so"},
	{"redlopen-tlsdesc-dynamic", "writer-redlopen", "libwtls-tlsdesc.so",
	 "GLIBC_TUNABLES=glibc.rtld.optional_static_tls=0", "tlsdesc-dynamic",
	 "libwtls-tlsdesc.so"},
};

START_TEST(test_reused_modid_stale_dtv)
{
	const struct writer_case *wc = &redlopen_cases[_i];
	char exe[PATH_MAX], lib[PATH_MAX], line[512];
	char *argv[3] = {NULL, NULL, NULL}, *env[2] = {(char *)wc->env, NULL};
	unsigned m1 = 0, m2 = 0;
	int i, stale = 0;
	struct writer w;
	struct jval *root;

	memset(&w, 0, sizeof(w));
	w.wc = wc;
	argv[0] = (char *)prof_helper(wc->exe, exe, sizeof(exe));
	argv[1] = (char *)prof_helper(wc->lib_arg, lib, sizeof(lib));
	test_child_start(&w.child, argv, wc->env ? env : NULL, false);
	for (;;) {
		struct expect_thread *t;
		char ptr[32], trace[40];
		int tid, pid;

		test_child_readline(&w.child, line, sizeof(line), TIMEOUT_MS);
		if (sscanf(line, "MODID %u %u", &m1, &m2) == 2)
			continue;
		if (sscanf(line, "READY %d", &pid) == 1) {
			w.pid = pid;
			break;
		}
		ck_assert_int_lt(w.n, MAX_THREADS);
		t = &w.t[w.n++];
		ck_assert_int_eq(sscanf(line, "THREAD %d %15s %31s %39s", &tid, t->kind,
					ptr, trace),
				 4);
		t->tid = tid;
		t->ptr = strtoull(ptr, NULL, 16);
		ck_assert_uint_eq(strlen(trace), 32);
		memcpy(t->trace_id, trace, 33);
	}
	ck_assert_int_eq(w.pid, w.child.pid);
	ck_assert_int_eq(w.n, 3);
	/* what makes the old block stale: the same id, a newer module */
	ck_assert_msg(m1 == m2 && m1 > 0, "%s: module ids %u and %u: not reused",
		      wc->name, m1, m2);

	root = run_ctxdump(&w, NULL);
	ck_assert_str_eq(jmust(jmust(root, "symbol", J_OBJ), "model", J_STR)->str,
			 wc->model);
	for (i = 0; i < w.n; i++) {
		const struct expect_thread *t = &w.t[i];
		const struct jval *jt = json_thread(root, t->tid), *ctx;

		ck_assert_msg(jt, "%s: thread %d missing", wc->name, (int)t->tid);
		ck_assert_msg(!jget(jt, "error"), "%s: thread %d: error '%s'", wc->name,
			      (int)t->tid,
			      jget(jt, "error") ? jget(jt, "error")->str : "");
		ctx = jget(jt, "context");
		ck_assert_ptr_nonnull(ctx);
		if (strcmp(t->kind, "stale") == 0) {
			stale++;
			ck_assert_msg(ctx->type == J_NULL &&
					      jget(jt, "slot_addr")->type == J_NULL,
				      "%s: thread %d shows the unloaded library's "
				      "record (trace %s) as its context",
				      wc->name, (int)t->tid,
				      ctx->type == J_OBJ && jget(ctx, "trace_id") &&
						      jget(ctx, "trace_id")->type ==
							      J_STR
					      ? jget(ctx, "trace_id")->str
					      : "-");
			continue;
		}
		ck_assert_msg(ctx->type == J_OBJ, "%s: thread %d (%s): no context",
			      wc->name, (int)t->tid, t->kind);
		ck_assert_msg(jaddr(jget(ctx, "record_addr"), wc->name) == t->ptr,
			      "%s: record_addr differs from the writer's pointer",
			      wc->name);
		ck_assert_str_eq(jmust(ctx, "trace_id", J_STR)->str, t->trace_id);
	}
	ck_assert_int_eq(stale, 1);
	jfree(root);
	writer_finish(&w);
}
END_TEST

/* gdb -batch -p PID: per thread, &otel_thread_ctx_v1 and its value through
 * libthread_db, i.e. glibc's own view of the TLS block. */
struct gdb_view {
	pid_t tid;
	bool ok;
	uint64_t slot, value;
};

static int
run_gdb(const struct writer *w, struct gdb_view *v, int max)
{
	char pid[16], *out = NULL, *err = NULL, *line, *save = NULL;
	char *argv[] = {
		"/usr/bin/gdb",
		"-nx",
		"-batch",
		"-p",
		pid,
		"-ex",
		"thread apply all -c printf \"SLOT %p %p\\n\", (void "
		"*)&otel_thread_ctx_v1, "
		"*(void **)&otel_thread_ctx_v1",
		NULL,
	};
	int status, n = 0;

	snprintf(pid, sizeof(pid), "%d", (int)w->pid);
	status = test_run_capture(argv, NULL, false, &out, &err, 120000);
	ck_assert_msg(WIFEXITED(status), "gdb did not exit: %s", err);
	for (line = strtok_r(out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		const char *lwp = strstr(line, "(LWP ");
		unsigned long long a, b;

		if (strncmp(line, "Thread ", 7) == 0 && lwp) {
			ck_assert_int_lt(n, max);
			memset(&v[n], 0, sizeof(v[n]));
			v[n++].tid = (pid_t)atoi(lwp + 5);
		} else if (n > 0 && sscanf(line, "SLOT %llx %llx", &a, &b) == 2) {
			v[n - 1].ok = true;
			v[n - 1].slot = a;
			v[n - 1].value = b;
		} else if (n > 0 && strcmp(line, "SLOT 0x0 (nil)") == 0) {
			v[n - 1].ok = true;
		} else if (n > 0 && sscanf(line, "SLOT %llx (nil)", &a) == 1) {
			v[n - 1].ok = true;
			v[n - 1].slot = a;
		}
	}
	free(out);
	free(err);
	return n;
}

START_TEST(test_gdb_agrees)
{
	const struct writer_case *wc = &cases[_i];
	struct gdb_view g[MAX_THREADS];
	struct writer w;
	struct jval *root;
	int n, i, seen = 0;

	writer_start(&w, wc);
	root = run_ctxdump(&w, NULL);
	n = run_gdb(&w, g, MAX_THREADS);
	ck_assert_msg(n == w.n, "%s: gdb listed %d threads, writer has %d", wc->name, n,
		      w.n);
	for (i = 0; i < n; i++) {
		const struct jval *jt = json_thread(root, g[i].tid);
		const struct expect_thread *t = writer_thread(&w, g[i].tid);
		const struct jval *slot, *ctx;
		uint64_t value = 0;

		ck_assert_msg(jt && t, "%s: gdb thread %d unknown", wc->name,
			      (int)g[i].tid);
		slot = jget(jt, "slot_addr");
		ctx = jget(jt, "context");
		ck_assert_ptr_nonnull(slot);
		ck_assert_ptr_nonnull(ctx);
		if (ctx->type == J_OBJ)
			value = jaddr(jget(ctx, "record_addr"), "record_addr");
		if (!g[i].ok) {
			/* gdb: "has not yet allocated storage for thread-local
			 * variables" (dynamic TLS the thread never touched) */
			ck_assert_msg(slot->type == J_NULL && ctx->type == J_NULL,
				      "%s tid %d: gdb found no TLS block, ctxdump did",
				      wc->name, (int)g[i].tid);
			ck_assert_uint_eq(t->ptr, 0);
			continue;
		}
		seen++;
		ck_assert_msg(slot->type == J_STR, "%s tid %d: ctxdump found no slot",
			      wc->name, (int)g[i].tid);
		ck_assert_msg(jaddr(slot, "slot_addr") == g[i].slot,
			      "%s tid %d: slot %s, gdb says 0x%" PRIx64, wc->name,
			      (int)g[i].tid, slot->str, g[i].slot);
		ck_assert_msg(value == g[i].value,
			      "%s tid %d: pointer 0x%" PRIx64 ", gdb says 0x%" PRIx64,
			      wc->name, (int)g[i].tid, value, g[i].value);
		ck_assert_uint_eq(value, t->ptr);
	}
	/* every worker published something, so gdb saw their TLS blocks */
	ck_assert_int_ge(seen, w.n - 1);
	jfree(root);
	writer_finish(&w);
}
END_TEST

static bool
frames_have(const struct jval *frames, const char *symbol, const char *module)
{
	size_t i;

	for (i = 0; i < frames->n; i++) {
		const struct jval *s = jget(&frames->items[i], "symbol");
		const struct jval *m = jget(&frames->items[i], "module");

		if (s && s->type == J_STR && strcmp(s->str, symbol) == 0 && m &&
		    m->type == J_STR && ends_with(m->str, module))
			return true;
	}
	return false;
}

/* "sym (module) <- sym (module) ..." for failure messages. */
static const char *
frames_str(const struct jval *frames)
{
	static char buf[4096];
	size_t i, len = 0;

	buf[0] = '\0';
	for (i = 0; i < frames->n && len < sizeof(buf) - 1; i++) {
		const struct jval *s = jget(&frames->items[i], "symbol");
		const struct jval *m = jget(&frames->items[i], "module");
		const char *mod = m && m->type == J_STR ? strrchr(m->str, '/') : NULL;
		int r;

		r = snprintf(buf + len, sizeof(buf) - len, "%s%s (%s)", i ? " <- " : "",
			     s && s->type == J_STR ? s->str : "?", mod ? mod + 1 : "?");
		if (r < 0)
			break;
		len += (size_t)r;
	}
	return buf;
}

/* --stacks names the functions each thread of writer wc blocks in. */
static void
stacks_show(const struct writer_case *wc)
{
	struct writer w;
	struct jval *root;
	int i, k;

	writer_start(&w, wc);
	root = run_ctxdump(&w, "--stacks");
	for (i = 0; i < w.n; i++) {
		const struct jval *jt = json_thread(root, w.t[i].tid);
		const struct jval *frames;

		ck_assert_ptr_nonnull(jt);
		check_thread(&w, &w.t[i], jt);
		frames = jmust(jt, "frames", J_ARR);
		ck_assert_msg(frames->n >= 2, "%s tid %d: %zu frames", wc->name,
			      (int)w.t[i].tid, frames->n);
		/* compiled code has unwind information throughout */
		for (k = 0; k < (int)frames->n; k++)
			ck_assert_msg(!jmust(&frames->items[k], "guessed", J_BOOL)->b,
				      "%s tid %d: frame %d guessed: %s", wc->name,
				      (int)w.t[i].tid, k, frames_str(frames));
		for (k = 0; cw_want_frames(w.t[i].kind)[k]; k++)
			ck_assert_msg(frames_have(frames,
						  cw_want_frames(w.t[i].kind)[k],
						  wc->exe),
				      "%s tid %d (%s): no frame %s in %s: %s", wc->name,
				      (int)w.t[i].tid, w.t[i].kind,
				      cw_want_frames(w.t[i].kind)[k], wc->exe,
				      frames_str(frames));
		/* down to the thread's start: the copy of a stack stops
		 * below the static TLS blocks, never inside the stack */
		if (w.t[i].tid != w.pid)
			ck_assert_msg(frames_have(frames, "start_thread", "libc.so.6"),
				      "%s tid %d: not down to start_thread: %s",
				      wc->name, (int)w.t[i].tid, frames_str(frames));
	}
	jfree(root);
	writer_finish(&w);
}

START_TEST(test_stacks_show_blocking_function)
{
	stacks_show(&cases[_i]);
}
END_TEST

/* The program's own mapping of the executable or of libc below the
 * loader's is a module of its own (unwind.c keys modules by their
 * offset-0 mappings), so the frames in the loader's mapping are named
 * with the loader's load bias, not that mapping's. */
START_TEST(test_stacks_own_mapping_below_loader)
{
	stacks_show(&map_below_cases[_i]);
}
END_TEST

TEST_SUITE(ctxdump_tls_suite)
{
	Suite *s = suite_create("ctxdump: TLS access models");
	TCase *tc;

	cw_require_ctxdump();

	tc = tcase_create("json");
	tcase_add_loop_test(tc, test_json_matches_writer, 0, N_CASES);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);

	tc = tcase_create("map-below");
	tcase_add_loop_test(
		tc, test_own_mapping_below_loader, 0,
		(int)(sizeof(map_below_cases) / sizeof(map_below_cases[0])));
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("mixed");
	tcase_add_test(tc, test_mixed_gd_ie_reads_ie);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("reused-modid");
	tcase_add_loop_test(tc, test_reused_modid_stale_dtv, 0,
			    (int)(sizeof(redlopen_cases) / sizeof(redlopen_cases[0])));
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("stacks");
	tcase_add_loop_test(tc, test_stacks_show_blocking_function, 0, N_CASES);
	tcase_add_loop_test(
		tc, test_stacks_own_mapping_below_loader, 0,
		(int)(sizeof(map_below_cases) / sizeof(map_below_cases[0])));
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);

	if (access("/usr/bin/gdb", X_OK) == 0) {
		tc = tcase_create("gdb");
		tcase_add_loop_test(tc, test_gdb_agrees, 0, N_CASES);
		tcase_set_timeout(tc, 300);
		suite_add_tcase(s, tc);
	} else {
		fprintf(stderr,
			"ctxdump-tls: /usr/bin/gdb missing (Debian package gdb), "
			"not comparing with gdb\n");
	}
	return s;
}
