/* SPDX-License-Identifier: Apache-2.0 */
/* ctxdump reads the three thread-context layouts (issue 10): OTEP-4947
 * otel_thread_ctx_v1, Elastic's elastic_apm_profiling_correlation_tls_v1
 * and Polar Signals' custom_labels_current_set, from test writers
 * (helpers/writer-layouts.c) that publish known contexts in each: every
 * thread's contexts in ctxdump's JSON must be exactly what the writer
 * says, including the edge cases (Elastic valid = 0 and trace-present =
 * 0, custom-labels NULL keys, repeated keys, an empty set, more labels
 * and longer values than ctxdump copies).  writer-layouts-le has no OTEP
 * variable and defines the custom-labels one in the executable
 * (local-exec).  Contexts behind unreadable pointers are reported on
 * stderr with exit status 1, and labels with unreadable keys are left
 * out.  `ctxdump record` labels its samples with the same contexts, and
 * `report` names the layouts. */
#include "test-prof.h"

#include <stdint.h>
#include <sys/mount.h>
#include <sys/stat.h>

#define TIMEOUT_MS  30000
#define MAX_THREADS 16

/* ctxdump --json, one line per thread:
 *   T <tid> <otel> <elastic> <labels>
 * (a context not read: "error:<reason>", '_' for spaces) and the symbol
 * and layouts. */
static const char json_summary_py[] =
	"import json,sys\n"
	"d=json.load(open(sys.argv[1]))\n"
	"s=d['symbol']\n"
	"print('SYMBOL', (s['module'].rsplit('/',1)[-1]+':'+s['model']) if s else "
	"'-')\n"
	"for l in d['layouts']:\n"
	"  print('LAYOUT', l['name'], l['module'].rsplit('/',1)[-1], l['model'],\n"
	"        'readable' if l['readable'] else 'unreadable')\n"
	"n=lambda v: 'null' if v is None else v\n"
	"for t in d['threads']:\n"
	"  c=t['context']\n"
	"  otel=c['trace_id']+'-'+c['span_id'] if c and c['valid']==1 else '-'\n"
	"  el='-'; cl='-'\n"
	"  for o in t.get('other_contexts',[]):\n"
	"    e=o.get('error','').replace(' ','_')\n"
	"    if e and o['layout']=='elastic_apm_profiling_correlation_tls_v1':\n"
	"      el='error:'+e\n"
	"    elif e and o['layout']=='custom_labels_current_set':\n"
	"      cl='error:'+e\n"
	"    elif o['layout']=='elastic_apm_profiling_correlation_tls_v1':\n"
	"      f='null' if o['flags'] is None else '%02x'%o['flags']\n"
	"      el='%d-%s-%s-%s-%s'%(o['valid'],n(o['trace_id']),n(o['span_id']),\n"
	"                           n(o['transaction_id']),f)\n"
	"    elif o['layout']=='custom_labels_current_set':\n"
	"      cl='%d-%s-%s-%s-%s'%(o['count'],'T' if o['truncated'] else 'F',\n"
	"          n(o['trace_id']),n(o['span_id']),\n"
	"          ','.join(x['key']+'='+x['value'] for x in o['labels']))\n"
	"    else:\n"
	"      sys.exit('unknown layout '+o['layout'])\n"
	"  print('T', t['tid'], otel, el, cl)\n";

struct wthread {
	pid_t tid;
	char name[32];
	char otel[64];
	char elastic[128];
	char labels[128];
};

struct lwriter {
	struct test_child c;
	pid_t pid;
	struct wthread t[MAX_THREADS];
	int n;
};

/* opt: NULL, "--unreadable" or "--bad-keys" (helpers/writer-layouts.c) */
static void
writer_start(struct lwriter *w, const char *exe, const char *opt)
{
	char path[PATH_MAX], line[1024];
	char *argv[] = {path, (char *)opt, NULL};

	memset(w, 0, sizeof(*w));
	/* a path: a copy of a helper (else one in the helper directory) */
	if (exe[0] == '/')
		snprintf(path, sizeof(path), "%s", exe);
	else
		prof_helper(exe, path, sizeof(path));
	test_child_start(&w->c, argv, NULL, false);
	for (;;) {
		test_child_readline(&w->c, line, sizeof(line), TIMEOUT_MS);
		if (strncmp(line, "THREAD ", 7) == 0) {
			struct wthread *t = &w->t[w->n++];
			int tid;

			ck_assert_int_le(w->n, MAX_THREADS);
			ck_assert_int_eq(
				sscanf(line,
				       "THREAD %d %31s otel=%63s elastic=%127s "
				       "labels=%127s",
				       &tid, t->name, t->otel, t->elastic, t->labels),
				5);
			t->tid = tid;
		} else if (strncmp(line, "READY ", 6) == 0) {
			int pid;

			ck_assert_int_eq(sscanf(line, "READY %d", &pid), 1);
			w->pid = pid;
			ck_assert_int_eq(w->pid, w->c.pid);
			return;
		}
	}
}

static void
writer_finish(struct lwriter *w)
{
	int st;

	prof_assert_running(w->pid);
	st = test_child_finish(&w->c, TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer status 0x%x", st);
}

/* What ctxdump must show for the Elastic buffer the writer describes as
 * "<valid>-<present>-<trace>-<span>-<txn>-<flags>". */
static void
expect_elastic(const char *w, char *out, size_t n)
{
	unsigned valid, present;
	char trace[33], span[17], txn[17], flags[3];

	if (strcmp(w, "-") == 0) {
		snprintf(out, n, "-");
		return;
	}
	if (strncmp(w, "unreadable-", 11) == 0) {
		snprintf(out, n, "error:Bad_address");
		return;
	}
	ck_assert_int_eq(sscanf(w, "%u-%u-%32[0-9a-f]-%16[0-9a-f]-%16[0-9a-f]-%2s",
				&valid, &present, trace, span, txn, flags),
			 6);
	if (valid && present)
		snprintf(out, n, "%u-%s-%s-%s-%s", valid, trace, span, txn, flags);
	else
		snprintf(out, n, "%u-null-null-null-null", valid);
}

/* ... and for the labelset described as "<count>[-<trace>-<span>]". */
static void
expect_labels(const char *w, char *out, size_t n)
{
	char trace[33], span[17];
	unsigned count;
	int k;

	if (strcmp(w, "-") == 0) {
		snprintf(out, n, "-");
		return;
	}
	if (strncmp(w, "unreadable-", 11) == 0) {
		snprintf(out, n, "error:Bad_address");
		return;
	}
	if (sscanf(w, "bad-keys-%u", &count) == 1) {
		/* the two labels whose keys cannot be read are left out, as
		 * NULL keys are; the set is flagged truncated */
		snprintf(out, n, "%u-T-null-null-user=alice", count);
		return;
	}
	k = sscanf(w, "%u-%32[0-9a-f]-%16[0-9a-f]", &count, trace, span);
	ck_assert_int_ge(k, 1);
	if (k == 3) {
		/* NULL key skipped, the first "http.method" wins */
		snprintf(out, n,
			 "%u-F-%s-%s-http.method=GET,trace_id=%s,span_id=%s,"
			 "url.path=/labels/\"q\"",
			 count, trace, span, trace, span);
	} else if (count == 0) {
		snprintf(out, n, "0-F-null-null-");
	} else {
		/* 40 labels: the first 16, the first value cut at 255 bytes */
		size_t l = 0;
		unsigned i;

		ck_assert_uint_eq(count, 40);
		l += (size_t)snprintf(out + l, n - l, "40-T-null-null-k00=");
		for (i = 0; i < 255 && l + 1 < n; i++)
			out[l++] = 'x';
		for (i = 1; i < 16; i++)
			l += (size_t)snprintf(out + l, n - l, ",k%02u=k%02u", i, i);
		ck_assert_uint_lt(l, n);
	}
}

static const struct wthread *
find_thread(const struct lwriter *w, pid_t tid)
{
	int i;

	for (i = 0; i < w->n; i++)
		if (w->t[i].tid == tid)
			return &w->t[i];
	return NULL;
}

/* The stderr line of a context the writer describes as
 * "unreadable-<hex address>", appended to err; false if it is another. */
static bool
expect_unreadable(const char *w, pid_t tid, const char *symbol, char *err, size_t n)
{
	size_t l = strlen(err);

	if (strncmp(w, "unreadable-", 11) != 0)
		return false;
	snprintf(err + l, n - l,
		 "ctxdump: tid %d: cannot read the %s context at 0x%s: "
		 "Bad address\n",
		 (int)tid, symbol, w + 11);
	return true;
}

/* ctxdump --json against the writer's THREAD lines: a thread whose
 * context cannot be read is said once on stderr and makes the exit
 * status 1 (partial), the others are read as ever. */
static void
check_dump(const struct lwriter *w,
	   const char *symbol,
	   const char *cl_module,
	   const char *cl_model)
{
	char pid[16], tmp[64], *out = NULL, *err = NULL, *line, *save = NULL;
	static char want_err[4096];
	int r, i, seen = 0, layouts = 0, unreadable = 0;
	const char *p;
	FILE *f;

	want_err[0] = '\0';
	for (i = 0; i < w->n; i++) {
		unreadable +=
			expect_unreadable(w->t[i].elastic, w->t[i].tid,
					  "elastic_apm_profiling_correlation_tls_v1",
					  want_err, sizeof(want_err));
		unreadable += expect_unreadable(w->t[i].labels, w->t[i].tid,
						"custom_labels_current_set", want_err,
						sizeof(want_err));
	}
	snprintf(pid, sizeof(pid), "%d", (int)w->pid);
	r = prof_run(&out, &err, "--json", pid, NULL);
	ck_assert_msg(r == (unreadable ? 1 : 0), "ctxdump exit %d: %s", r, err);
	/* one line each, in any order (the threads are sorted by tid) */
	for (p = want_err; *p; p = strchr(p, '\n') + 1) {
		char one[512];

		snprintf(one, sizeof(one), "%.*s", (int)(strchr(p, '\n') + 1 - p), p);
		ck_assert_msg(strstr(err, one), "stderr has no '%s': '%s'", one, err);
	}
	ck_assert_msg(strlen(err) == strlen(want_err), "stderr '%s', expected '%s'",
		      err, want_err);
	prof_tmpfile(tmp, sizeof(tmp), "layouts-json");
	f = fopen(tmp, "we");
	ck_assert_ptr_nonnull(f);
	fputs(out, f);
	fclose(f);
	free(out);
	free(err);
	r = prof_py(json_summary_py, tmp, &out, &err);
	unlink(tmp);
	ck_assert_msg(r == 0, "python: %s", err);
	for (line = strtok_r(out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		static char el[512], cl[4096], exp_el[128], exp_cl[4096];
		char otel[64], name[128], mod[256], model[64], rd[16];
		const struct wthread *t;
		int tid;

		if (strncmp(line, "SYMBOL ", 7) == 0) {
			ck_assert_str_eq(line + 7, symbol);
			continue;
		}
		if (sscanf(line, "LAYOUT %127s %255s %63s %15s", name, mod, model,
			   rd) == 4) {
			ck_assert_str_eq(rd, "readable");
			if (strcmp(name, "custom_labels_current_set") == 0) {
				ck_assert_str_eq(mod, cl_module);
				ck_assert_str_eq(model, cl_model);
			} else {
				ck_assert_str_eq(
					name,
					"elastic_apm_profiling_correlation_tls_v1");
				ck_assert_str_eq(mod, "libwelastic.so");
				ck_assert_str_eq(model, "tlsdesc-static");
			}
			layouts++;
			continue;
		}
		ck_assert_int_eq(
			sscanf(line, "T %d %63s %511s %4095[^\n]", &tid, otel, el, cl),
			4);
		t = find_thread(w, tid);
		if (!t) {
			/* the main thread publishes nothing */
			ck_assert_int_eq(tid, w->pid);
			ck_assert_str_eq(otel, "-");
			ck_assert_str_eq(el, "-");
			ck_assert_str_eq(cl, "-");
			continue;
		}
		seen++;
		ck_assert_msg(strcmp(otel, t->otel) == 0, "%s: otel %s, expected %s",
			      t->name, otel, t->otel);
		expect_elastic(t->elastic, exp_el, sizeof(exp_el));
		ck_assert_msg(strcmp(el, exp_el) == 0, "%s: elastic %s, expected %s",
			      t->name, el, exp_el);
		expect_labels(t->labels, exp_cl, sizeof(exp_cl));
		ck_assert_msg(strcmp(cl, exp_cl) == 0, "%s: labels %s, expected %s",
			      t->name, cl, exp_cl);
	}
	ck_assert_int_eq(seen, w->n);
	ck_assert_int_eq(layouts, 2);
	free(out);
	free(err);
}

START_TEST(dump_three_layouts)
{
	struct lwriter w;

	writer_start(&w, "writer-layouts", NULL);
	check_dump(&w, "libwtls-tlsdesc.so:tlsdesc-static", "libcustomlabels-test.so",
		   "tlsdesc-static");
	writer_finish(&w);
}
END_TEST

/* Copies file from to to, with mode. */
static void
copy_file(const char *from, const char *to, mode_t mode)
{
	char buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC), out;
	ssize_t r;

	ck_assert_msg(in >= 0, "%s: %s", from, strerror(errno));
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	ck_assert_msg(out >= 0, "%s: %s", to, strerror(errno));
	while ((r = read(in, buf, sizeof(buf))) > 0)
		ck_assert_int_eq(write(out, buf, (size_t)r), r);
	ck_assert_int_eq(r, 0);
	close(in);
	ck_assert_int_eq(close(out), 0);
}

/* writer-layouts-le and libwelastic.so copied into dir (exe and lib, of
 * n bytes, get their paths), and the copy started: its RUNPATH is $ORIGIN,
 * so it loads the library next to it, without the LD_LIBRARY_PATH that
 * meson sets, which comes before RUNPATH. */
static void
writer_start_copy(struct lwriter *w, const char *dir, char *exe, char *lib, size_t n)
{
	char from[PATH_MAX], *ldpath;

	snprintf(exe, n, "%s/writer-layouts-le", dir);
	snprintf(lib, n, "%s/libwelastic.so", dir);
	copy_file(prof_helper("writer-layouts-le", from, sizeof(from)), exe, 0755);
	copy_file(prof_helper("libwelastic.so", from, sizeof(from)), lib, 0755);
	ldpath = getenv("LD_LIBRARY_PATH");
	ldpath = ldpath ? strdup(ldpath) : NULL;
	ck_assert_int_eq(unsetenv("LD_LIBRARY_PATH"), 0);
	writer_start(w, exe, NULL);
	if (ldpath)
		ck_assert_int_eq(setenv("LD_LIBRARY_PATH", ldpath, 1), 0);
	free(ldpath);
}

/* writer-layouts-le with its libwelastic.so replaced on disk since it
 * was loaded: only custom-labels is read, and otel_thread_ctx_v1 was
 * looked for in every object but that one, where it could be.  Said so
 * (stderr, the Symbol line, "symbol_error"), with exit status 1 as for a
 * process context that could not be read (old: "not found in any loaded
 * object", "symbol": null alone, exit 0).  The path is the target's,
 * here with an ESC in it: escaped. */
START_TEST(dump_without_otep_unopenable)
{
	char dir[] = "/tmp/ctxshim-layouts-XXXXXX", sub[64], exe[96], lib[96], tmp[96],
	     pid[16], *out = NULL, *err = NULL;
	static const char stale[] =
		"/a\\x1bb/libwelastic.so (deleted): the file at its path is not the "
		"one mapped (replaced since it was loaded)";
	const char *dump[] = {pid, NULL}, *json[] = {"--json", pid, NULL},
		   *rec[] = {"record", "-o", "/dev/null", "-d", "0.1", pid, NULL};
	struct lwriter w;
	int r;

	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	snprintf(sub, sizeof(sub), "%s/a\033b", dir);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	snprintf(tmp, sizeof(tmp), "%s/new.so", sub);
	writer_start_copy(&w, sub, exe, lib, sizeof(exe));
	/* an upgrade: a new file renamed over the loaded one */
	copy_file(lib, tmp, 0755);
	ck_assert_int_eq(rename(tmp, lib), 0);

	snprintf(pid, sizeof(pid), "%d", (int)w.pid);
	r = test_run_ctxdump_no_map_files(&out, &err, dump, TIMEOUT_MS);
	if (r == 0 && geteuid() != 0) {
		/* map_files could be opened after all (CAP_CHECKPOINT_RESTORE) */
		free(out);
		free(err);
		goto done;
	}
	ck_assert_msg(r == 1, "exit %d: %s", r, err);
	ck_assert_msg(strstr(err, "ctxdump: cannot tell whether process ") &&
			      strstr(err, " defines otel_thread_ctx_v1: 1 of its ") &&
			      strstr(err, stale) &&
			      strstr(err, "; showing the other layouts\n"),
		      "%s", err);
	ck_assert_msg(strstr(out, "\nSymbol: otel_thread_ctx_v1 not found in the ") &&
			      strstr(out, " objects that could be opened (1 of its ") &&
			      strstr(out, stale) &&
			      !strstr(out, "not found in any loaded object"),
		      "%s", out);
	ck_assert_ptr_nonnull(strstr(out, "\nSymbol: custom_labels_current_set in "));
	ck_assert_ptr_nonnull(strstr(out, "    [custom-labels] http.method=GET\n"));
	free(out);
	free(err);

	r = test_run_ctxdump_no_map_files(&out, &err, json, TIMEOUT_MS);
	ck_assert_msg(r == 1, "exit %d: %s", r, err);
	ck_assert_msg(strstr(out, "  \"symbol\": null,\n"
				  "  \"symbol_error\": \"1 of its ") &&
			      strstr(out,
				     "/a\\u001bb/libwelastic.so (deleted): the file "
				     "at its path is not the one mapped (replaced "
				     "since it was loaded)\",\n"),
		      "%s", out);
	free(out);
	free(err);

	/* ctxdump record: the other layouts are recorded, and it says why
	 * otel_thread_ctx_v1 may not be (old: nothing) */
	r = test_run_ctxdump_no_map_files(&out, &err, rec, TIMEOUT_MS);
	ck_assert_msg(prof_record_exit_ok(r, err), "exit %d: %s", r, err);
	ck_assert_msg(
		strstr(err, "ctxdump record: cannot tell whether process ") &&
			strstr(err, stale) &&
			strstr(err, "; recording stacks with the other layouts\n"),
		"%s", err);
	free(out);
	free(err);
done:
	writer_finish(&w);
	unlink(exe);
	unlink(lib);
	rmdir(sub);
	rmdir(dir);
}
END_TEST

/* The custom-labels ABI version is looked up in the object that defines
 * the labels, the mapped one: here the executable, over whose path an
 * upgrade renamed another object, one that defines the version variable
 * elsewhere (libcustomlabels-test.so).  Old: the lookup opened the path
 * again and took that object's address for the executable's, so the
 * version read was not 1 and no labels were shown ("ABI version N: not
 * read").  Now the mapped file (map_files, root), or, where only the
 * path can be opened, nothing: a replaced file is not parsed, and the
 * labels are read as version 1 as for a writer without the variable. */
START_TEST(dump_labels_of_replaced_executable)
{
	char dir[] = "/tmp/ctxshim-layouts-XXXXXX", exe[64], lib[64], tmp[64],
	     from[PATH_MAX], pid[16], *out = NULL, *err = NULL;
	struct lwriter w;
	int r;

	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	snprintf(tmp, sizeof(tmp), "%s/new", dir);
	writer_start_copy(&w, dir, exe, lib, sizeof(exe));
	copy_file(prof_helper("libcustomlabels-test.so", from, sizeof(from)), tmp,
		  0755);
	ck_assert_int_eq(rename(tmp, exe), 0);

	snprintf(pid, sizeof(pid), "%d", (int)w.pid);
	r = prof_run(&out, &err, pid, NULL);
	ck_assert_msg(r == 0, "exit %d: %s", r, err);
	ck_assert_msg(strstr(out, "\nSymbol: custom_labels_current_set in ") &&
			      !strstr(out, ": not read)"),
		      "%s", out);
	ck_assert_msg(strstr(out, "    [custom-labels] http.method=GET\n"), "%s", out);
	free(out);
	free(err);
	writer_finish(&w);
	unlink(exe);
	unlink(lib);
	rmdir(dir);
}
END_TEST

/* An Elastic and a custom-labels pointer into a PROT_NONE page: each
 * thread's context is said not read on stderr, with the address, and
 * the exit status is 1 (partial), as for an unreadable OTEP record. */
START_TEST(dump_unreadable_contexts)
{
	char pid[16], *out = NULL, *err = NULL;
	struct lwriter w;
	int r;

	writer_start(&w, "writer-layouts", "--unreadable");
	ck_assert_int_eq(w.n, 3);
	check_dump(&w, "libwtls-tlsdesc.so:tlsdesc-static", "libcustomlabels-test.so",
		   "tlsdesc-static");
	/* text: the same status and reasons */
	snprintf(pid, sizeof(pid), "%d", (int)w.pid);
	r = prof_run(&out, &err, pid, NULL);
	ck_assert_msg(r == 1, "exit %d: %s", r, err);
	ck_assert_ptr_nonnull(strstr(out, "    [elastic] (not read: Bad address)\n"));
	ck_assert_ptr_nonnull(
		strstr(out, "    [custom-labels] (not read: Bad address)\n"));
	ck_assert_ptr_nonnull(strstr(err, ": cannot read the "
					  "elastic_apm_profiling_correlation_tls_v1 "
					  "context at 0x"));
	ck_assert_ptr_nonnull(strstr(err, ": cannot read the custom_labels_current_set "
					  "context at 0x"));
	free(out);
	free(err);
	writer_finish(&w);
}
END_TEST

/* Labels whose key pointers cannot be read are no labels: not shown with
 * an empty key (which the writer never wrote), and the second one not
 * hidden behind the first as a repeated key. */
START_TEST(dump_unreadable_label_keys)
{
	char pid[16], want[128], *out = NULL, *err = NULL, *blk, *end;
	struct lwriter w;
	int r;

	writer_start(&w, "writer-layouts", "--bad-keys");
	ck_assert_int_eq(w.n, 2);
	check_dump(&w, "libwtls-tlsdesc.so:tlsdesc-static", "libcustomlabels-test.so",
		   "tlsdesc-static");
	snprintf(pid, sizeof(pid), "%d", (int)w.pid);
	r = prof_run(&out, &err, pid, NULL);
	ck_assert_msg(r == 0, "exit %d: %s", r, err);
	ck_assert_str_eq(err, "");
	ck_assert_str_eq(w.t[1].name, "cl-bad-keys");
	snprintf(want, sizeof(want), "Thread %d \"", (int)w.t[1].tid);
	blk = strstr(out, want);
	ck_assert_msg(blk, "no '%s' in %s", want, out);
	end = strstr(blk + 1, "\nThread ");
	if (end)
		end[1] = '\0';
	ck_assert_msg(strstr(blk, "    [custom-labels] user=alice\n"
				  "    [custom-labels] (labels truncated: count=3)\n"),
		      "%s", blk);
	ck_assert_msg(!strstr(blk, "=v1") && !strstr(blk, "=v2"), "%s", blk);
	free(out);
	free(err);
	writer_finish(&w);
}
END_TEST

/* The custom-labels ABI version is read from the library by its path
 * under /proc/PID/root, which the target's mount namespace decides: a
 * FIFO mounted over the library (as a container can) made that open()
 * wait for a writer for ever (old: ctxdump hung).  Now the file must be
 * a regular one; the labels are shown as before otherwise, the ABI
 * unchecked.  Root only (the mount). */
START_TEST(dump_labels_library_mounted_over_by_fifo)
{
	char dir[] = "/tmp/ctxshim-layouts-XXXXXX", fifo[64], lib[PATH_MAX], pid[16],
	     *out = NULL, *err = NULL;
	struct lwriter w;
	int r;

	if (geteuid() != 0) {
		fprintf(stderr, "dump_labels_library_mounted_over_by_fifo: not root, "
				"not run\n");
		return;
	}
	/* this test's process and its children only: gone with them */
	ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	writer_start(&w, "writer-layouts", NULL);
	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	prof_helper("libcustomlabels-test.so", lib, sizeof(lib));
	ck_assert_int_eq(mount(fifo, lib, NULL, MS_BIND, NULL), 0);
	snprintf(pid, sizeof(pid), "%d", (int)w.pid);
	r = prof_run(&out, &err, pid, NULL);
	ck_assert_int_eq(umount(lib), 0);
	ck_assert_msg(r == 0 || r == 1, "exit %d: %s", r, err);
	ck_assert_msg(strstr(out, "\nSymbol: otel_thread_ctx_v1 in "), "%s", out);
	ck_assert_msg(strstr(out, "\nSymbol: custom_labels_current_set in "), "%s",
		      out);
	free(out);
	free(err);
	writer_finish(&w);
	ck_assert_int_eq(unlink(fifo), 0);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

START_TEST(dump_without_otep)
{
	char pid[16], *out = NULL, *err = NULL;
	struct lwriter w;
	int r;

	writer_start(&w, "writer-layouts-le", NULL);
	check_dump(&w, "-", "writer-layouts-le", "local-exec");
	/* text: which layout each context came from */
	snprintf(pid, sizeof(pid), "%d", (int)w.pid);
	r = prof_run(&out, &err, "-q", pid, NULL);
	ck_assert_msg(r == 0, "exit %d: %s", r, err);
	ck_assert_ptr_nonnull(strstr(out, "Symbol: otel_thread_ctx_v1 not found"));
	ck_assert_ptr_nonnull(strstr(out, "Symbol: custom_labels_current_set in "));
	ck_assert_ptr_nonnull(strstr(out, "    [elastic] trace_id="));
	ck_assert_ptr_nonnull(strstr(out, "    [elastic] (no trace)\n"));
	ck_assert_ptr_nonnull(strstr(out, "    [custom-labels] http.method=GET\n"));
	ck_assert_ptr_nonnull(strstr(out, "    [custom-labels] (no labels)\n"));
	ck_assert_ptr_nonnull(
		strstr(out, "    [custom-labels] (labels truncated: count=40)"));
	/* -q: threads with no valid context in any layout are left out */
	ck_assert_ptr_null(strstr(out, "(no context)"));
	free(out);
	free(err);
	writer_finish(&w);
}
END_TEST

/* The trace a sample of thread t is filed under: OTEP first, then
 * Elastic (valid, trace present), then the custom-labels trace_id. */
static bool
primary_trace(const struct wthread *t, char out[33])
{
	unsigned v, p;

	if (strcmp(t->otel, "-") != 0) {
		memcpy(out, t->otel, 32);
		out[32] = '\0';
		return true;
	}
	if (sscanf(t->elastic, "%u-%u-%32[0-9a-f]", &v, &p, out) == 3 && v && p)
		return true;
	{
		unsigned count;
		char span[17];

		if (sscanf(t->labels, "%u-%32[0-9a-f]-%16[0-9a-f]", &count, out,
			   span) == 3)
			return true;
	}
	return false;
}

static void
check_record(const char *exe, const char *const *layouts)
{
	char file[64], errf[64], pid[16], *out = NULL, *err = NULL;
	const char *args[] = {"-F", "50", "-o", file, pid, NULL};
	struct lwriter w;
	int st, i, traced = 0;

	writer_start(&w, exe, NULL);
	prof_tmpfile(file, sizeof(file), "layouts-prof");
	prof_tmpfile(errf, sizeof(errf), "layouts-err");
	snprintf(pid, sizeof(pid), "%d", (int)w.pid);
	/* until rounds are on disk: a short -d may end before any round a
	 * loaded machine did not make it skip */
	prof_record_rounds(file, errf, args, 60000);
	prof_assert_running(w.pid);

	st = prof_run(&out, &err, "report", file, NULL);
	ck_assert_msg(st == 0, "report exit %d: %s", st, err);
	for (i = 0; layouts[i]; i++) {
		char want[128];

		snprintf(want, sizeof(want), "Layout: %s in ", layouts[i]);
		ck_assert_msg(strstr(out, want), "%s missing: %s", want, out);
	}
	free(out);
	free(err);

	/* every thread's samples under its own trace, as the root frames */
	st = prof_run(&out, &err, "report", "--folded", "--traced", file, NULL);
	ck_assert_msg(st == 0, "report exit %d: %s", st, err);
	for (i = 0; i < w.n; i++) {
		char trace[33], want[64];

		if (!primary_trace(&w.t[i], trace))
			continue;
		traced++;
		snprintf(want, sizeof(want), ";trace %s;", trace);
		ck_assert_msg(strstr(out, want), "%s: %s missing:\n%s", w.t[i].name,
			      want, out);
	}
	ck_assert_int_ge(traced, 3);
	ck_assert_ptr_null(strstr(out, "[no trace]"));
	free(out);
	free(err);
	unlink(file);
	unlink(errf);
	writer_finish(&w);
}

START_TEST(record_three_layouts)
{
	static const char *const all[] = {"otel_thread_ctx_v1",
					  "elastic_apm_profiling_correlation_tls_v1",
					  "custom_labels_current_set", NULL};
	static const char *const two[] = {"elastic_apm_profiling_correlation_tls_v1",
					  "custom_labels_current_set", NULL};

	check_record("writer-layouts", all);
	check_record("writer-layouts-le", two);
}
END_TEST

/* A damaged recording (flipped bytes, cut anywhere) is read as far as it
 * makes sense: report never crashes, and says so in its exit status. */
START_TEST(report_survives_damage)
{
	char file[64], bad[64], errf[64], pid[16], *out = NULL, *err = NULL;
	const char *args[] = {"-F", "100", "-d", "0.2", "-o", file, pid, NULL};
	static const char *const modes[] = {"--folded", "--spans", "--traced"};
	uint64_t x = 0x9e3779b97f4a7c15ull;
	struct lwriter w;
	uint8_t *orig, *buf;
	size_t len;
	unsigned i;
	FILE *f;
	int st;

	writer_start(&w, "writer-layouts", NULL);
	prof_tmpfile(file, sizeof(file), "damage-prof");
	prof_tmpfile(bad, sizeof(bad), "damage-bad");
	prof_tmpfile(errf, sizeof(errf), "damage-err");
	snprintf(pid, sizeof(pid), "%d", (int)w.pid);
	st = prof_record_wait(prof_record_start(errf, args), 60000);
	err = prof_slurp(errf);
	ck_assert_msg(prof_record_status_ok(st, err), "record status 0x%x: %s", st,
		      err);
	free(err);
	writer_finish(&w);
	orig = (uint8_t *)prof_slurp(file);
	f = fopen(file, "re");
	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	len = (size_t)ftell(f);
	fclose(f);
	ck_assert_uint_gt(len, 200);
	buf = malloc(len);
	ck_assert_ptr_nonnull(buf);
	for (i = 0; i < 120; i++) {
		size_t n = len, k;

		memcpy(buf, orig, len);
		/* xorshift: the same damage on every run */
		for (k = 0; k < 1 + i % 4; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			if (i % 5 == 4)
				n = 16 + (size_t)(x % (len - 16));
			else
				buf[16 + x % (len - 16)] ^=
					(uint8_t)(1u << (x >> 60) % 8);
		}
		f = fopen(bad, "we");
		ck_assert_ptr_nonnull(f);
		fwrite(buf, 1, n, f);
		fclose(f);
		if (i % 4 == 3)
			st = prof_run(&out, &err, "report", bad, NULL);
		else
			st = prof_run(&out, &err, "report", modes[i % 4], bad, NULL);
		ck_assert_msg(st >= 0 && st <= 2, "damage %u: exit %d: %s", i, st, err);
		ck_assert_msg(!strstr(err, "Sanitizer") &&
				      !strstr(err, "runtime error"),
			      "damage %u: %s", i, err);
		free(out);
		free(err);
	}
	free(buf);
	free(orig);
	unlink(file);
	unlink(bad);
	unlink(errf);
}
END_TEST

TEST_SUITE(ctxdump_layouts_suite)
{
	Suite *s;
	TCase *tc;

	if (!prof_python())
		test_skip("python3 not found in PATH (JSON checks)");
	s = suite_create("ctxdump-layouts");
	tc = tcase_create("layouts");
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, dump_three_layouts);
	tcase_add_test(tc, dump_without_otep);
	tcase_add_test(tc, dump_without_otep_unopenable);
	tcase_add_test(tc, dump_labels_of_replaced_executable);
	tcase_add_test(tc, dump_labels_library_mounted_over_by_fifo);
	tcase_add_test(tc, dump_unreadable_contexts);
	tcase_add_test(tc, dump_unreadable_label_keys);
	tcase_add_test(tc, record_three_layouts);
	tcase_add_test(tc, report_survives_damage);
	suite_add_tcase(s, tc);
	return s;
}
