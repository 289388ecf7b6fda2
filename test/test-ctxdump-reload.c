/* SPDX-License-Identifier: Apache-2.0 */
/* `ctxdump record` while the writer library is dlclose()d and dlopen()ed
 * again (test/helpers/writer-reload.c): the library comes back at another
 * TLS place (another static TLS offset, or another module id), because a
 * library with TLS of its own took the old one.  The recording must show
 * the records the threads publish through the reloaded library, not stale
 * ones read at the old place (old: it kept the place it resolved first
 * and showed no context from then on).  A writer library first
 * dlopen()ed while the recorder runs is found within a second (old: never,
 * the layouts were looked for only at the start). */
#include "test-ctxdump-writer.h"

#include <inttypes.h>
#include <stdint.h>

#define N_WORKERS 2

struct reload_case {
	const char *name;
	const char *lib;
	bool late; /* loaded only once recording runs, not reloaded */
};

static const struct reload_case cases[] = {
	{"tlsdesc", "libwtls-tlsdesc.so", false},
	{"gd", "libwtls-gd.so", false},
	{"late-tlsdesc", "libwtls-tlsdesc.so", true},
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

START_TEST(test_record_follows_reload)
{
	const struct reload_case *rc = &cases[_i];
	char exe[PATH_MAX], lib[PATH_MAX], pad[PATH_MAX], line[512];
	char file[64], errf[64], pid[16], *out = NULL, *err = NULL, want[96];
	/* "late" has no phase-1 THREAD lines: tr1 stays empty */
	char tr1[N_WORKERS][33] = {{0}}, tr2[N_WORKERS][33];
	char *argv[5];
	const char *args[] = {"-q", "-F", "100", "-o", file, pid, NULL};
	struct test_child c;
	int moved, st, w;
	pid_t rec;

	argv[0] = (char *)prof_helper("writer-reload", exe, sizeof(exe));
	argv[1] = (char *)prof_helper(rc->lib, lib, sizeof(lib));
	argv[2] = (char *)prof_helper("libreload-pad.so", pad, sizeof(pad));
	argv[3] = rc->late ? "late" : NULL;
	argv[4] = NULL;
	test_child_start(&c, argv, NULL, false);
	if (!rc->late)
		read_phase(&c, 1, tr1);
	test_child_expect(&c, "READY ", line, sizeof(line), TIMEOUT_MS);

	prof_tmpfile(file, sizeof(file), "reload-prof");
	prof_tmpfile(errf, sizeof(errf), "reload-err");
	snprintf(pid, sizeof(pid), "%d", (int)c.pid);
	rec = prof_record_start(errf, args);
	prof_wait_file(file, 256, TIMEOUT_MS);
	sleep_ms(200);

	test_child_send(&c, "reload\n");
	test_child_expect(&c, "MOVED ", line, sizeof(line), TIMEOUT_MS);
	ck_assert_int_eq(sscanf(line, "MOVED %d", &moved), 1);
	/* else the old place would still be right and nothing tested */
	ck_assert_msg(moved, "%s: the library came back at the same TLS place: %s",
		      rc->name, line);
	read_phase(&c, 2, tr2);
	test_child_expect(&c, "RELOADED", line, sizeof(line), TIMEOUT_MS);
	/* rounds after the reload: at 100 Hz some 30; a process without a
	 * writer is looked at again once a second */
	sleep_ms(rc->late ? 1300 : 300);
	kill(rec, SIGINT);
	st = prof_record_wait(rec, TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "record status 0x%x: %s",
		      st, (err = prof_slurp(errf)));
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
	unlink(file);
	unlink(errf);
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
	return s;
}
