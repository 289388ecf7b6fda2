/* SPDX-License-Identifier: Apache-2.0 */
/* The socket level's pool of capture buffers and its per-connection FIFO
 * of pipelined requests (preload/conn.c), through test/helpers/pipeline.c
 * run under the shim: split heads of two connections interleaved on one
 * thread, more split heads at once than the pool holds, and a connection
 * read on one thread and answered on another while the client pipelines,
 * after which no pool entry may be missing (the FIFO used to lose some
 * there for good, until heads split across reads got no context at all). */
#include "test-common.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* Run "pipeline <mode> [n]" under the shim; it checks the contexts itself
 * and prints one RESULT line. */
static void
run_pipeline(const char *mode, const char *n)
{
	char path[4096], *out = NULL, *err = NULL, want[64], *line;
	char *argv[] = {path, (char *)mode, (char *)n, NULL};
	unsigned ok, none, wrong;
	int st, fails;

	snprintf(path, sizeof(path), "%s/pipeline", test_env_path("HELPER_DIR"));
	st = test_run_capture(argv, NULL, true, &out, &err, 100000);
	snprintf(want, sizeof(want), "RESULT %s ", mode);
	line = strstr(out, want);
	ck_assert_msg(line, "%s: no result (status %#x):\n%s\n%s", mode, st, out, err);
	ck_assert_int_eq(sscanf(line + strlen(want), "ok=%u none=%u wrong=%u fails=%d",
				&ok, &none, &wrong, &fails),
			 4);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && fails == 0 && wrong == 0,
		      "%s: status %#x, %s%s", mode, st, line, err);
	ck_assert_uint_gt(ok, 0);
	free(out);
	free(err);
}

START_TEST(split_heads_interleaved)
{
	run_pipeline("interleaved", NULL);
}
END_TEST

START_TEST(pool_exhausted)
{
	run_pipeline("exhausted", NULL);
}
END_TEST

/* Before the fix, a run lost 20-30 entries on an idle machine with two
 * CPUs and 0-20 (5 runs in 6 lost some) with other jobs on it; three runs
 * make a miss unlikely.  Each run is about 2 s. */
START_TEST(reader_writer_threads_no_leak)
{
	run_pipeline("two-threads", "200000");
}
END_TEST

TEST_SUITE(pipeline_suite)
{
	Suite *s = suite_create("preload-pipeline");
	TCase *tc = tcase_create("pool");

	tcase_set_timeout(tc, 110);
	tcase_add_test(tc, split_heads_interleaved);
	tcase_add_test(tc, pool_exhausted);
	tcase_add_loop_test(tc, reader_writer_threads_no_leak, 0, 3);
	suite_add_tcase(s, tc);
	return s;
}
