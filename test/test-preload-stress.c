/* SPDX-License-Identifier: Apache-2.0 */
/* Load and races under the shim (test/helpers/stress.c): 100 000
 * connections with fd numbers reused all the time, fork/exec storms,
 * signal handlers that read sockets, close() racing reads on other
 * threads.  No crash, no deadlock (every run has a deadline), no lost or
 * corrupted data, the right context for every request, memory that does
 * not grow with the load, records a sampling profiler reads whole.
 * 10 000 threads created and exiting under ctxdump are in
 * test-ctxdump-flow.c. */
#include "test-common.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

struct result {
	unsigned long n, bad, ctx_bad;
	long ms, rss0, rss1;
};

static void
run_stress(const char *mode, const char *n, bool preload, struct result *r)
{
	char path[4096], *out = NULL, *err = NULL, want[32], *line;
	char *argv[] = {path, (char *)mode, (char *)n, NULL};
	int st;

	snprintf(path, sizeof(path), "%s/stress", test_env_path("HELPER_DIR"));
	st = test_run_capture(argv, NULL, preload, &out, &err, 150000);
	snprintf(want, sizeof(want), "RESULT %s ", mode);
	line = strstr(out, want);
	ck_assert_msg(line, "%s %s: no result (status %#x):\n%s\n%s", mode, n, st, out,
		      err);
	ck_assert_int_eq(
		sscanf(line + strlen(want),
		       "n=%lu bad=%lu ctx_bad=%lu ms=%ld rss0_kb=%ld rss1_kb=%ld",
		       &r->n, &r->bad, &r->ctx_bad, &r->ms, &r->rss0, &r->rss1),
		6);
	fprintf(stderr, "stress %s %s%s: %s", mode, n, preload ? " (shim)" : "", line);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && r->bad == 0,
		      "%s %s: status %#x:\n%s", mode, n, st, err);
	ck_assert_uint_eq(r->n, strtoul(n, NULL, 10));
	free(out);
	free(err);
}

/* Memory does not grow with the load once warm (not under ASan, whose
 * quarantine keeps what is freed). */
static void
assert_bounded(const struct result *r, const char *what)
{
#ifndef __SANITIZE_ADDRESS__
	ck_assert_msg(r->rss0 > 0 && r->rss1 - r->rss0 < 4096,
		      "%s: RSS grew from %ld to %ld kB", what, r->rss0, r->rss1);
#else
	(void)r;
	(void)what;
#endif
}

START_TEST(hundred_thousand_connections)
{
	struct result r;

	run_stress("conns", "100000", true, &r);
	assert_bounded(&r, "100000 connections");
}
END_TEST

START_TEST(fork_exec_storm)
{
	struct result r;

	run_stress("forks", "1200", true, &r);
	assert_bounded(&r, "fork storm");
}
END_TEST

/* A handler's reads of other connections are I/O of this thread: the
 * shim switches the thread to their context until the main code reads its
 * own connection again (hook-socket.c).  What must hold: every byte
 * arrives where it was sent, nothing hangs, and the main thread's context
 * is right for most requests (a handler that does I/O is rare).  The
 * handler answers what it reads, as a server would: thousands of requests
 * never answered would wait as pipelined ones and take the shim's whole
 * capture pool, which is another test (stress.c, sig_serve()). */
START_TEST(signal_handlers_read_sockets)
{
	struct result r, plain;

	run_stress("sigread", "20000", false, &plain);
	run_stress("sigread", "20000", true, &r);
	assert_bounded(&r, "sigread");
	/* A handler that runs between the main thread's read of a head and
	 * its check of the context switches the thread to the handler's
	 * connection (documented).  The helper blocks the timer from just
	 * after each read to the end of its check, which leaves the read
	 * hook's own return as the window: 0.15-0.25 % of the requests in
	 * the plain and the ASan build alike (it was 1.7 % and up to 6.9 %
	 * when the check was inside the window). */
	ck_assert_msg(r.ctx_bad < r.n / 50, "%lu of %lu requests with a wrong context",
		      r.ctx_bad, r.n);
}
END_TEST

START_TEST(close_races_reads)
{
	struct result r;

	run_stress("closerace", "400", true, &r);
	assert_bounded(&r, "closerace");
}
END_TEST

/* A sampling profiler's view: a timer signal on the serving thread reads
 * its record at random points, the shim's publications included; a record
 * marked valid is always one request's whole context (stress.c). */
START_TEST(sampled_records_are_whole)
{
	struct result r;

	run_stress("sample", "20000", true, &r);
	assert_bounded(&r, "sample");
}
END_TEST

/* A legacy server's request timeout: a 13 us timer whose handler
 * siglongjmp()s out of the read of a request, wherever it lands,
 * including the shim's own processing of the bytes read (stress.c, mode
 * sigjmp).  Every request read whole afterwards shows its trace; before
 * the longjmp() hooks (hooks/hook-longjmp.c), the thread stopped
 * publishing for good after 2 to 39 such jumps. */
START_TEST(request_timeouts_jump_out)
{
	struct result r;

	run_stress("sigjmp", "2000", true, &r);
	ck_assert_uint_eq(r.ctx_bad, 0);
}
END_TEST

TEST_SUITE(preload_stress_suite)
{
	Suite *s = suite_create("preload-stress");
	TCase *tc = tcase_create("stress");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, hundred_thousand_connections);
	tcase_add_test(tc, fork_exec_storm);
	tcase_add_test(tc, signal_handlers_read_sockets);
	tcase_add_test(tc, close_races_reads);
	tcase_add_test(tc, sampled_records_are_whole);
	tcase_add_test(tc, request_timeouts_jump_out);
	suite_add_tcase(s, tc);
	return s;
}
