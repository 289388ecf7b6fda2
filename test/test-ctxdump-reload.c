/* SPDX-License-Identifier: Apache-2.0 */
/* `ctxdump record` while the writer library is dlclose()d and dlopen()ed
 * again (test/helpers/writer-reload.c): the library comes back at another
 * TLS place (another static TLS offset, or another module id), because a
 * library with TLS of its own took the old one.  The recording must show
 * the records the threads publish through the reloaded library, not stale
 * ones read at the old place (old: it kept the place it resolved first
 * and showed no context from then on).  A writer library first
 * dlopen()ed while the recorder runs is found within a second (old: never,
 * the layouts were looked for only at the start).  A dynamic-TLS writer
 * library reloaded at the same address under the same module id
 * (test/helpers/writer-redlopen.c "wait"), whose slot words the reload
 * leaves as they were: a thread that has not reached the library's TLS
 * since must show no context, not the record in its stale DTV slot.  A
 * writer library replaced by another one (another module, another TLS
 * model) must show in the report's Layout lines, each layout once, in
 * the order they were used (old: the first layout only, as the file
 * kept describing it).  And plain dumps of a process that loads and
 * unloads a writer library in a loop, or whose slot stays unusable
 * (test/helpers/dlopen-loop.c), and --stacks of one that swaps two
 * libraries at one address (test/helpers/dl-swap.c). */
#include "test-ctxdump-writer.h"

#include <inttypes.h>
#include <stdint.h>

#define N_WORKERS 2

struct reload_case {
	const char *name;
	const char *lib;
	bool late; /* loaded only once recording runs, not reloaded */
	/* loaded instead of lib after the dlclose() ("switch"), and the TLS
	 * model its Layout line must name */
	const char *lib2, *model2;
};

static const struct reload_case cases[] = {
	{"tlsdesc", "libwtls-tlsdesc.so", false, NULL, NULL},
	{"gd", "libwtls-gd.so", false, NULL, NULL},
	{"late-tlsdesc", "libwtls-tlsdesc.so", true, NULL, NULL},
	{"switch-tlsdesc-gd", "libwtls-tlsdesc.so", false, "libwtls-gd.so",
	 "general-dynamic"},
};
#define N_CASES ((int)(sizeof(cases) / sizeof(cases[0])))

/* The trace ids a phase's THREAD lines name, N_WORKERS of them. */
static void
read_phase(struct test_child *c, int phase, char trace[N_WORKERS][33])
{
	char line[512];
	int w;

	for (w = 0; w < N_WORKERS; w++) {
		int tid, p;
		char ptr[32];

		test_child_readline(c, line, sizeof(line), TIMEOUT_MS);
		ck_assert_msg(sscanf(line, "THREAD %d %d %31s %32s", &tid, &p, ptr,
				     trace[w]) == 4 &&
				      p == phase,
			      "writer-reload: unexpected line '%s'", line);
		ck_assert_uint_eq(strlen(trace[w]), 32);
	}
}

static void
sleep_ms(unsigned ms)
{
	usleep(ms * 1000u * test_time_scale());
}

/* The summary's "Layout: otel_thread_ctx_v1 in <path> (<model>...)" line
 * of the library named lib (and of model, unless NULL): where it starts
 * in out, or NULL. */
static const char *
layout_line(const char *out, const char *lib, const char *model)
{
	static const char pre[] = "Layout: " OTEL_THREAD_CTX_SYMBOL " in ";
	char want[128];
	const char *l;

	snprintf(want, sizeof(want), "/%s (%s", lib, model ? model : "");
	for (l = out; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		const char *e = strchr(l, '\n'), *m;

		if (strncmp(l, pre, sizeof(pre) - 1) != 0)
			continue;
		m = strstr(l, want);
		if (m && (!e || m < e))
			return l;
	}
	return NULL;
}

/* Every Layout line of out differs from the others. */
static void
assert_layouts_once(const char *name, const char *out)
{
	const char *a, *b;

	for (a = strstr(out, "\nLayout: "); a; a = strstr(a + 1, "\nLayout: ")) {
		size_t n = strcspn(a + 1, "\n") + 1;

		for (b = strstr(a + 1, "\nLayout: "); b;
		     b = strstr(b + 1, "\nLayout: "))
			ck_assert_msg(strncmp(a, b, n + 1) != 0,
				      "%s: Layout line printed twice:\n%s", name, out);
	}
}

START_TEST(test_record_follows_reload)
{
	const struct reload_case *rc = &cases[_i];
	char exe[PATH_MAX], lib[PATH_MAX], pad[PATH_MAX], line[512];
	char file[64], errf[64], pid[16], *out = NULL, *err = NULL, want[96];
	/* "late" has no phase-1 THREAD lines: tr1 stays empty */
	char tr1[N_WORKERS][33] = {{0}}, tr2[N_WORKERS][33];
	char lib2[PATH_MAX], *argv[6] = {NULL};
	const char *args[] = {"-F", "100", "-o", file, pid, NULL};
	const char *l1, *l2;
	struct test_child c;
	int moved, st, w;
	pid_t rec;

	argv[0] = (char *)prof_helper("writer-reload", exe, sizeof(exe));
	argv[1] = (char *)prof_helper(rc->lib, lib, sizeof(lib));
	argv[2] = (char *)prof_helper("libreload-pad.so", pad, sizeof(pad));
	if (rc->late) {
		argv[3] = "late";
	} else if (rc->lib2) {
		argv[3] = "switch";
		argv[4] = (char *)prof_helper(rc->lib2, lib2, sizeof(lib2));
	}
	test_child_start(&c, argv, NULL, false);
	if (!rc->late)
		read_phase(&c, 1, tr1);
	test_child_expect(&c, "READY ", line, sizeof(line), TIMEOUT_MS);

	prof_tmpfile(file, sizeof(file), "reload-prof");
	prof_tmpfile(errf, sizeof(errf), "reload-err");
	snprintf(pid, sizeof(pid), "%d", (int)c.pid);
	rec = prof_record_start(errf, args);
	prof_wait_file(file, 256, TIMEOUT_MS, rec, errf);
	sleep_ms(200);

	test_child_send(&c, "reload\n");
	test_child_expect(&c, "MOVED ", line, sizeof(line), TIMEOUT_MS);
	ck_assert_int_eq(sscanf(line, "MOVED %d", &moved), 1);
	/* else the old place would still be right and nothing tested (another
	 * library is another layout whatever its place) */
	ck_assert_msg(moved || rc->lib2,
		      "%s: the library came back at the same TLS place: %s", rc->name,
		      line);
	read_phase(&c, 2, tr2);
	test_child_expect(&c, "RELOADED", line, sizeof(line), TIMEOUT_MS);
	/* Rounds after the reload.  Any case can need a rediscovery: a round
	 * that falls between dlclose() and dlopen() finds no writer, and a
	 * process without one is looked at again once a second. */
	sleep_ms(1600);
	kill(rec, SIGINT);
	st = prof_record_wait(rec, TIMEOUT_MS);
	err = prof_slurp(errf);
	ck_assert_msg(prof_record_status_ok(st, err), "record status 0x%x: %s", st,
		      err);
	free(err);
	prof_assert_running(c.pid);
	st = test_child_finish(&c, TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "writer-reload status 0x%x", st);

	st = prof_run(&out, &err, "report", "--folded", file, NULL);
	ck_assert_msg(st == 0, "report exit %d: %s", st, err);
	for (w = 0; w < N_WORKERS; w++) {
		snprintf(want, sizeof(want), "trace %s", tr1[w]);
		ck_assert_msg(rc->late || strstr(out, want),
			      "%s: phase-1 %s missing:\n%s", rc->name, want, out);
		snprintf(want, sizeof(want), "trace %s", tr2[w]);
		ck_assert_msg(strstr(out, want),
			      "%s: %s, published through the reloaded library, "
			      "missing:\n%s",
			      rc->name, want, out);
	}
	free(out);
	free(err);

	/* the layouts the samples were read through, each once, in order */
	st = prof_run(&out, &err, "report", file, NULL);
	ck_assert_msg(st == 0, "report exit %d: %s", st, err);
	l1 = layout_line(out, rc->lib, NULL);
	ck_assert_msg(l1, "%s: no Layout line of %s:\n%s", rc->name, rc->lib, out);
	if (rc->lib2) {
		l2 = layout_line(out, rc->lib2, rc->model2);
		ck_assert_msg(l2 && l2 > l1,
			      "%s: no Layout line of %s (%s) after the one of %s:\n%s",
			      rc->name, rc->lib2, rc->model2, rc->lib, out);
	}
	assert_layouts_once(rc->name, out);
	free(out);
	free(err);
	unlink(file);
	unlink(errf);
}
END_TEST

/* Dynamic TLS only: a static TLS place is never reused by the same
 * library (glibc keeps a closed module's static TLS), and nothing per
 * thread can go stale there. */
struct same_place_case {
	const char *name;
	const char *lib;
	const char *env;
};

static const struct same_place_case same_place_cases[] = {
	{"gd", "libwtls-gd.so", NULL},
	{"tlsdesc-dynamic", "libwtls-tlsdesc.so",
	 "GLIBC_TUNABLES=glibc.rtld.optional_static_tls=0"},
};
#define N_SAME_PLACE ((int)(sizeof(same_place_cases) / sizeof(same_place_cases[0])))

/* The trace id on a "THREAD <tid> <kind> <ptr> <trace>" line of kind. */
static void
redlopen_thread(struct test_child *c, const char *kind, char trace[33])
{
	char line[512], k[16], ptr[32];
	int tid;

	test_child_readline(c, line, sizeof(line), TIMEOUT_MS);
	ck_assert_msg(
		sscanf(line, "THREAD %d %15s %31s %32s", &tid, k, ptr, trace) == 4 &&
			strcmp(k, kind) == 0,
		"writer-redlopen: '%s' where a %s THREAD line was due", line, kind);
	ck_assert_uint_eq(strlen(trace), 32);
}

/* The recorder resolves the library, is suspended while the library is
 * dlclose()d and dlopen()ed again at the same address with the same
 * module id (the GD pair or the TLSDESC descriptor reads as before), and
 * resumes.  The "stale" thread published through the first load and never
 * touches TLS again: its DTV keeps the first load's generation and block,
 * whose pointer now leads to a record the writer rewrote with another
 * trace id while the library was gone.  That trace must not be in the
 * recording (old: every round after the reload showed it), the fresh
 * thread's and the main thread's must. */
START_TEST(test_record_same_place_reload)
{
	const struct same_place_case *sc = &same_place_cases[_i];
	char exe[PATH_MAX], lib[PATH_MAX], line[512], file[64], errf[64], pid[16];
	char *argv[4], *env[2] = {(char *)sc->env, NULL}, *out = NULL, *err = NULL;
	char stale1[33], stale2[33], fresh[33], main_tr[33], want[64];
	const char *args[] = {"-F", "100", "-o", file, pid, NULL};
	unsigned long long b1 = 0, b2 = 0;
	unsigned m1 = 0, m2 = 0;
	struct test_child c;
	int st;
	pid_t rec;

	argv[0] = (char *)prof_helper("writer-redlopen", exe, sizeof(exe));
	argv[1] = (char *)prof_helper(sc->lib, lib, sizeof(lib));
	argv[2] = "wait";
	argv[3] = NULL;
	test_child_start(&c, argv, sc->env ? env : NULL, false);
	redlopen_thread(&c, "stale", stale1);
	test_child_expect(&c, "LOADED ", line, sizeof(line), TIMEOUT_MS);

	prof_tmpfile(file, sizeof(file), "sameplace-prof");
	prof_tmpfile(errf, sizeof(errf), "sameplace-err");
	snprintf(pid, sizeof(pid), "%d", (int)c.pid);
	rec = prof_record_start(errf, args);
	prof_wait_file(file, 256, TIMEOUT_MS, rec, errf);
	sleep_ms(200);

	/* no round between the unload and the new load: nothing unmapped
	 * for the recorder to notice */
	prof_record_suspend(rec, errf);
	test_child_send(&c, "reload\n");
	test_child_expect(&c, "MODID ", line, sizeof(line), TIMEOUT_MS);
	ck_assert_int_eq(sscanf(line, "MODID %u %u %llx %llx", &m1, &m2, &b1, &b2), 4);
	/* else the slot words change and nothing is tested here */
	ck_assert_msg(m1 == m2 && b1 == b2,
		      "%s: not reloaded in the same place (module ids, load "
		      "addresses): %s",
		      sc->name, line);
	redlopen_thread(&c, "stale", stale2);
	redlopen_thread(&c, "fresh", fresh);
	redlopen_thread(&c, "main", main_tr);
	test_child_expect(&c, "READY ", line, sizeof(line), TIMEOUT_MS);
	ck_assert_str_ne(stale1, stale2);
	ck_assert_int_eq(kill(rec, SIGCONT), 0);
	/* some 30 rounds at 100 Hz */
	sleep_ms(300);
	kill(rec, SIGINT);
	st = prof_record_wait(rec, TIMEOUT_MS);
	err = prof_slurp(errf);
	ck_assert_msg(prof_record_status_ok(st, err), "record status 0x%x: %s", st,
		      err);
	free(err);
	prof_assert_running(c.pid);
	st = test_child_finish(&c, TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "writer-redlopen status 0x%x", st);

	st = prof_run(&out, &err, "report", "--folded", file, NULL);
	ck_assert_msg(st == 0, "report exit %d: %s", st, err);
	snprintf(want, sizeof(want), "trace %s", stale1);
	ck_assert_msg(strstr(out, want), "%s: the first load's %s missing:\n%s",
		      sc->name, want, out);
	snprintf(want, sizeof(want), "trace %s", stale2);
	ck_assert_msg(!strstr(out, want),
		      "%s: %s, reached through the stale thread's DTV slot of the "
		      "unloaded library, recorded:\n%s",
		      sc->name, want, out);
	snprintf(want, sizeof(want), "trace %s", fresh);
	ck_assert_msg(strstr(out, want), "%s: fresh %s missing:\n%s", sc->name, want,
		      out);
	snprintf(want, sizeof(want), "trace %s", main_tr);
	ck_assert_msg(strstr(out, want), "%s: main %s missing:\n%s", sc->name, want,
		      out);
	free(out);
	free(err);
	unlink(file);
	unlink(errf);
}
END_TEST

/* ctxdump (a dump, not record) of a process that dlopen()s and
 * dlclose()s a writer library in a loop (test/helpers/dlopen-loop.c): the
 * library is looked up while the process runs and its slot read once the
 * threads are stopped, by when the library may be unloaded (old: "cannot
 * read the TLS slot ...: Bad address; no thread can be read") or mapped
 * again by a dlopen() that has not relocated it yet (old: "the loader has
 * not filled in the TLS slot ..."), each in some 9 % of dumps.
 * Of DLOPEN_LOOP_DUMPS dumps none may fail so: ctxdump looks again.  "No
 * loaded object defines" is a true answer for a look-up made while the
 * library was unloaded; at least half must read the process.  Only one
 * copy of the library is loaded at any time, so no "2 objects define".
 * Old: 10 to 18 % of dumps failed (54 of 300 with tlsdesc, 48 of 300
 * with gd), so 140 dumps all passed with probability at most 0.9^140 =
 * 4e-7; with two tries 1.2 % still failed (5 of 400), with eight none
 * should (about 1e-8 a dump). */
#define DLOPEN_LOOP_DUMPS 140

static const char *const dlopen_loop_libs[] = {"libwtls-tlsdesc.so", "libwtls-gd.so"};

START_TEST(test_dump_dlopen_loop)
{
	char exe[PATH_MAX], lib[PATH_MAX], line[512], pid[16];
	char *argv[] = {(char *)prof_helper("dlopen-loop", exe, sizeof(exe)),
			(char *)prof_helper(dlopen_loop_libs[_i], lib, sizeof(lib)),
			"200", NULL};
	unsigned i, ok = 0, none = 0;
	struct test_child c;
	long t0;
	int st;

	test_child_start(&c, argv, NULL, false);
	test_child_expect(&c, "READY ", line, sizeof(line), TIMEOUT_MS);
	snprintf(pid, sizeof(pid), "%d", (int)c.pid);
	t0 = test_now_ms();
	for (i = 0; i < DLOPEN_LOOP_DUMPS; i++) {
		char *out = NULL, *err = NULL;

		st = prof_run(&out, &err, pid, NULL);
		ck_assert_msg(!strstr(err, "TLS slot"), "%s: dump %u: exit %d: %s",
			      dlopen_loop_libs[_i], i, st, err);
		ck_assert_msg(!strstr(err, "objects define"), "%s: dump %u: %s",
			      dlopen_loop_libs[_i], i, err);
		if (st == 2 && strstr(err, "no loaded object of process ")) {
			none++;
		} else {
			ck_assert_msg(st == 0 && !*err, "%s: dump %u: exit %d: %s",
				      dlopen_loop_libs[_i], i, st, err);
			ck_assert_msg(strstr(out, dlopen_loop_libs[_i]),
				      "%s: dump %u:\n%s", dlopen_loop_libs[_i], i, out);
			ok++;
		}
		free(out);
		free(err);
	}
	fprintf(stderr,
		"%s: %u of %u dumps read the process, %u found no writer, "
		"%ld ms\n",
		dlopen_loop_libs[_i], ok, DLOPEN_LOOP_DUMPS, none, test_now_ms() - t0);
	ck_assert_uint_ge(ok, DLOPEN_LOOP_DUMPS / 2);
	prof_assert_running(c.pid);
	st = test_child_finish(&c, TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "dlopen-loop status 0x%x",
		      st);
}
END_TEST

/* --stacks while the target swaps two libraries of one size at one
 * address, every SWAP_MS: the thread that runs each was started by
 * spin_main_a() or spin_main_b(), so its library frame must be
 * swap_spin_a or swap_spin_b to match (or no name).  Old: the module list
 * was read after the threads were let go, and in some 40 % of the dumps
 * a library swapped meanwhile named the other's frame.  Then (case 0): it
 * was read before the stop and compared after it, and the other library
 * was still named in some 0.3 % of the dumps on a loaded machine: one
 * library read before the stop, the other one swapped in and stopped,
 * the first one back before the comparison, which found nothing changed.
 * Case 1 makes that the usual case, with CTXDUMP_TEST_SYNC_PAUSE_MS
 * between each read of the list and the stop: 38 of 100 dumps named the
 * other library until the list was compared while the threads were
 * stopped (stack_unwind_stopped()). */
#define SWAP_DUMPS 60
#define SWAP_MS    "10"

static const char *const swap_pause[] = {NULL, "15"};

/* For each thread of a --stacks dump: 1 when its library frame matches
 * the library it was started in, -1 when it names the other, 0 when it
 * shows neither; the sum of the -1s in *bad. */
static unsigned
swap_matches(const char *out, unsigned *bad)
{
	const char *t = out;
	unsigned ok = 0;

	while ((t = strstr(t, "\nThread ")) != NULL) {
		const char *e = strstr(t + 1, "\nThread ");
		size_t n = e ? (size_t)(e - t) : strlen(t);
		char *blk = strndup(t, n);

		ck_assert_ptr_nonnull(blk);
		for (int k = 0; k < 2; k++) {
			const char *own = k ? "swap_spin_b+" : "swap_spin_a+";
			const char *other = k ? "swap_spin_a+" : "swap_spin_b+";

			if (!strstr(blk, k ? " spin_main_b+" : " spin_main_a+"))
				continue;
			ok += strstr(blk, own) != NULL;
			*bad += strstr(blk, other) != NULL;
		}
		free(blk);
		t += n;
	}
	return ok;
}

START_TEST(test_dump_stacks_library_swapped)
{
	char exe[PATH_MAX], line[512], pid[16];
	char *argv[] = {(char *)prof_helper("dl-swap", exe, sizeof(exe)),
			(char *)test_env_path("HELPER_DIR"), NULL};
	unsigned i, ok = 0;
	struct test_child c;

	test_child_start(&c, argv, NULL, true);
	test_child_expect(&c, "READY ", line, sizeof(line), TIMEOUT_MS);
	snprintf(pid, sizeof(pid), "%d", (int)c.pid);
	test_child_send(&c, "loop " SWAP_MS "\n");
	test_child_expect(&c, "LOOPING", line, sizeof(line), TIMEOUT_MS);
	if (swap_pause[_i])
		ck_assert_int_eq(
			setenv("CTXDUMP_TEST_SYNC_PAUSE_MS", swap_pause[_i], 1), 0);
	for (i = 0; i < SWAP_DUMPS; i++) {
		char *out = NULL, *err = NULL;
		unsigned b = 0;
		int st = prof_run(&out, &err, "--stacks", pid, NULL);

		ck_assert_msg(st == 0 || st == 1, "dump %u: exit %d: %s", i, st, err);
		ok += swap_matches(out, &b);
		ck_assert_msg(!b, "dump %u: a frame named after the other library:\n%s",
			      i, out);
		free(out);
		free(err);
	}
	unsetenv("CTXDUMP_TEST_SYNC_PAUSE_MS");
	fprintf(stderr,
		"dl-swap: %u of %u dumps named the spinning library (pause %s)\n", ok,
		SWAP_DUMPS, swap_pause[_i] ? swap_pause[_i] : "none");
	/* else the dumps hardly met a library to name */
	ck_assert_uint_ge(ok, SWAP_DUMPS / 4);
	prof_assert_running(c.pid);
	test_child_send(&c, "stop\n");
	ck_assert_int_eq(test_child_finish(&c, TIMEOUT_MS), 0);
}
END_TEST

/* A slot that stays unusable is not a loop's window: after the tries,
 * the message of old, with how many there were, and quickly (each try is
 * a look-up and a short stop, with 1 to 7 ms between them). */
struct broken_slot_case {
	const char *mode;
	int status;
	/* stderr: pre, the library's path, post */
	const char *pre, *post;
};

static const struct broken_slot_case broken_slot_cases[] = {
	{"zero", 1,
	 "ctxdump: the loader has not filled in the TLS slot of " OTEL_THREAD_CTX_SYMBOL
	 " in ",
	 " (8 tries); no thread can be read\n"},
	{"none", 1,
	 "ctxdump: cannot read the TLS slot of " OTEL_THREAD_CTX_SYMBOL " in ",
	 ": Bad address (8 tries); no thread can be read\n"},
};

START_TEST(test_dump_broken_slot)
{
	const struct broken_slot_case *bc = &broken_slot_cases[_i];
	char exe[PATH_MAX], lib[PATH_MAX], line[512], pid[16], want[PATH_MAX + 200];
	char *argv[] = {(char *)prof_helper("dlopen-loop", exe, sizeof(exe)),
			(char *)prof_helper("libwtls-slot.so", lib, sizeof(lib)),
			(char *)bc->mode, NULL};
	char *out = NULL, *err = NULL, real[PATH_MAX], *pw, *nl = NULL;
	struct test_child c;
	long t0, ms;
	int st;

#if !defined(__x86_64__)
	/* libwtls-slot.so finds its descriptor with x86_64 assembly */
	fprintf(stderr, "test_dump_broken_slot: x86_64 only, not run\n");
	return;
#endif
	ck_assert_ptr_nonnull(realpath(lib, real));
	test_child_start(&c, argv, NULL, false);
	test_child_expect(&c, "READY ", line, sizeof(line), TIMEOUT_MS);
	snprintf(pid, sizeof(pid), "%d", (int)c.pid);
	t0 = test_now_ms();
	st = prof_run(&out, &err, pid, NULL);
	ms = test_now_ms() - t0;
	snprintf(want, sizeof(want), "%s%s%s", bc->pre, real, bc->post);
	/* the warning about its process context once, however many tries
	 * (old: once a try), then what failed */
	pw = strstr(err, "ctxdump: cannot read the process context: ");
	ck_assert_msg(st == bc->status && pw == err && (nl = strchr(pw, '\n')) &&
			      strstr(pw, "has version 99") && strcmp(nl + 1, want) == 0,
		      "%s: exit %d, stderr:\n%s\nwanted: the process context's "
		      "warning, then:\n%s",
		      bc->mode, st, err, want);
	ck_assert_msg(strstr(out, "(not read: the TLS slot of " OTEL_THREAD_CTX_SYMBOL
				  " is not resolved)"),
		      "%s:\n%s", bc->mode, out);
	ck_assert_msg(ms < 2000 * (long)test_time_scale(), "%s: took %ld ms", bc->mode,
		      ms);
	free(out);
	free(err);
	prof_assert_running(c.pid);
	st = test_child_finish(&c, TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "dlopen-loop status 0x%x",
		      st);
}
END_TEST

TEST_SUITE(ctxdump_reload_suite)
{
	Suite *s = suite_create("ctxdump record: writer library reloaded");
	TCase *tc;

	cw_require_ctxdump();

	tc = tcase_create("record");
	tcase_add_loop_test(tc, test_record_follows_reload, 0, N_CASES);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);

	tc = tcase_create("same-place");
	tcase_add_loop_test(tc, test_record_same_place_reload, 0, N_SAME_PLACE);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);

	tc = tcase_create("dump-loop");
	tcase_add_loop_test(
		tc, test_dump_dlopen_loop, 0,
		(int)(sizeof(dlopen_loop_libs) / sizeof(dlopen_loop_libs[0])));
	tcase_add_loop_test(tc, test_dump_stacks_library_swapped, 0,
			    (int)(sizeof(swap_pause) / sizeof(swap_pause[0])));
	tcase_add_loop_test(
		tc, test_dump_broken_slot, 0,
		(int)(sizeof(broken_slot_cases) / sizeof(broken_slot_cases[0])));
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return s;
}
