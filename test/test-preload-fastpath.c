/* SPDX-License-Identifier: Apache-2.0 */
/* The socket level's fused path for one whole request head in one read
 * (preload/conn-whole.h, ctxshim_conn_feed_whole()) through test/helpers/fastpath-edge.c
 * run under the shim: a pipelined head in its own read before the first
 * is answered, the capture pool exhausted, a body that looks like a head,
 * readv, and a signal handler reading another connection meanwhile.  With
 * the event log off and on. */
#include "test-common.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static void
run_mode(const char *mode, bool events)
{
	char path[4096], *out = NULL, *err = NULL, want[64], *line;
	char *argv[] = {path, (char *)mode, NULL};
	char *env_on[] = {"CTXSHIM_EVENTS=/dev/null", NULL};
	unsigned ok, none, wrong;
	int st, fails;

	unsetenv("CTXSHIM_EVENTS");
	snprintf(path, sizeof(path), "%s/fastpath-edge", test_env_path("HELPER_DIR"));
	st = test_run_capture(argv, events ? env_on : NULL, true, &out, &err, 100000);
	snprintf(want, sizeof(want), "RESULT %s ", mode);
	line = strstr(out, want);
	ck_assert_msg(line, "%s: no result (status %#x):\n%s\n%s", mode, st, out, err);
	ck_assert_int_eq(sscanf(line + strlen(want), "ok=%u none=%u wrong=%u fails=%d",
				&ok, &none, &wrong, &fails),
			 4);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && fails == 0,
		      "%s: status %#x, %s%s", mode, st, line, err);
	ck_assert_uint_gt(ok, 0);
	free(out);
	free(err);
}

START_TEST(separate_reads_queue)
{
	run_mode("separate", _i & 1);
}
END_TEST

START_TEST(pool_exhausted_whole)
{
	run_mode("exhausted", _i & 1);
}
END_TEST

START_TEST(body_like_head)
{
	run_mode("body", _i & 1);
}
END_TEST

START_TEST(readv_two_heads)
{
	run_mode("readv", _i & 1);
}
END_TEST

START_TEST(signal_reads_other)
{
	run_mode("signal", _i & 1);
}
END_TEST

TEST_SUITE(fastpath_suite)
{
	Suite *s = suite_create("preload-fastpath");
	TCase *tc = tcase_create("whole");

	tcase_set_timeout(tc, 110);
	tcase_add_loop_test(tc, separate_reads_queue, 0, 2);
	tcase_add_loop_test(tc, pool_exhausted_whole, 0, 2);
	tcase_add_loop_test(tc, body_like_head, 0, 2);
	tcase_add_loop_test(tc, readv_two_heads, 0, 2);
	tcase_add_loop_test(tc, signal_reads_other, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}
