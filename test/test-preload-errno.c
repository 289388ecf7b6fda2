/* SPDX-License-Identifier: Apache-2.0 */
/* Every hook returns what the real call returned and leaves errno as it
 * left it, on success and failure paths (CODING_STYLE.md, hook rule 2):
 * test/helpers/hook-errno.c for the thread, fork, exec, ucontext and
 * thread-pool hooks, with and without a context to pass on (and with the
 * exec hooks' own environment), compared line
 * by line with a run without the shim.  The socket hooks are covered by
 * socket-errno.c (test-preload-socket.c). */
#include "test-common.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

START_TEST(hooks_keep_results_and_errno)
{
	char path[4096], *argv[] = {path, NULL}, *out0, *out1, *err0, *err1;
	char *with_ctx[] = {"TRACEPARENT=00-4bf92f3577b34da6a3ce929d0e0e4736-"
			    "00f067aa0ba902b7-01",
			    /* case 2: the exec hooks build an environment */
			    "CTXSHIM_EXEC_TRACEPARENT=1",
#ifndef __SANITIZE_ADDRESS__
			    /* (a program started with the sanitized shim alone
			     * in LD_PRELOAD exits: ASan must come first) */
			    "CTXSHIM_FOLLOW_EXEC=1",
#endif
			    NULL};
	int st0, st1;

	snprintf(path, sizeof(path), "%s/hook-errno", test_env_path("HELPER_DIR"));
	st0 = test_run_capture(argv, NULL, false, &out0, &err0, 30000);
	ck_assert_msg(WIFEXITED(st0) && WEXITSTATUS(st0) == 0,
		      "without the shim:\n%s%s", out0, err0);
	if (_i == 1)
		with_ctx[1] = NULL;
	st1 = test_run_capture(argv, _i ? with_ctx : NULL, true, &out1, &err1, 30000);
	ck_assert_msg(WIFEXITED(st1) && WEXITSTATUS(st1) == 0, "with the shim:\n%s%s",
		      out1, err1);
	ck_assert_msg(strcmp(out0, out1) == 0,
		      "output differs:\n--- without\n%s\n--- with\n%s", out0, out1);
	ck_assert_ptr_nonnull(strstr(out1, "fork-child ret=1 errno=unchanged"));
	ck_assert_ptr_nonnull(strstr(out1, "execve-enoent ret=-1 errno=ENOENT"));
	free(out0);
	free(out1);
	free(err0);
	free(err1);
}
END_TEST

TEST_SUITE(preload_errno_suite)
{
	Suite *s = suite_create("preload-errno");
	TCase *tc = tcase_create("errno");

	/* 0: no context (the hooks' pass-through paths), 1: TRACEPARENT,
	 * 2: TRACEPARENT, handed on by exec and followed */
	tcase_add_loop_test(tc, hooks_keep_results_and_errno, 0, 3);
	suite_add_tcase(s, tc);
	return s;
}
