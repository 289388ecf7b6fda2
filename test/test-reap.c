/* SPDX-License-Identifier: Apache-2.0 */
#include "test-common.h"

/* What a failed test started does not outlive it as a zombie, nor run on
 * adopted by init (test-main.c's reaper): "fails" starts a child in its
 * process group and one in a session of its own, then fails a check (an
 * exit test: it passes when it ends with a failed check's status 1);
 * "gone" then finds the first reaped and the second adopted by the reaper,
 * and sees that one reaped once killed. */

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Shared with the forked tests: [0] in the group, [1] in its own session. */
static pid_t *kids;

START_TEST(test_fails)
{
	pid_t in_group, in_session;
	int p[2];
	char c;

	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	in_group = fork();
	if (in_group == 0) {
		pause();
		_exit(0);
	}
	in_session = fork();
	if (in_session == 0) {
		(void)setsid();
		(void)!write(p[1], "s", 1);
		pause();
		_exit(0);
	}
	ck_assert_int_eq(read(p[0], &c, 1), 1);
	kids[0] = in_group;
	kids[1] = in_session;
	ck_abort_msg("fails on purpose, with its children running");
}
END_TEST

/* Wait until pid is gone from /proc: reaped, not a zombie. */
static void
assert_reaped(pid_t pid, const char *what)
{
	long deadline = test_now_ms() + 10000L * test_time_scale();

	while (test_proc_state(pid) != '?') {
		ck_assert_msg(test_now_ms() < deadline,
			      "%s (pid %d) was not reaped: %c", what, (int)pid,
			      test_proc_state(pid));
		usleep(2000);
	}
}

START_TEST(test_gone)
{
	/* this test's parent is the runner, the runner's the reaper */
	pid_t reaper = test_proc_ppid(getppid());

	ck_assert_int_gt(kids[0], 0);
	ck_assert_int_gt(kids[1], 0);
	assert_reaped(kids[0], "the child in the failed test's group");
	ck_assert_int_eq(test_proc_ppid(kids[1]), reaper);
	ck_assert_int_eq(kill(kids[1], SIGKILL), 0);
	assert_reaped(kids[1], "the child in a session of its own");
}
END_TEST

TEST_SUITE(reap_suite)
{
	Suite *s = suite_create("unit-reap");
	TCase *tc = tcase_create("reap");
	const char *fork_env = getenv("CK_FORK");

	/* without fork mode a failed check ends no process */
	if (fork_env && strcmp(fork_env, "no") == 0)
		test_skip("Check's fork mode is off (CK_FORK=no)");
	kids = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
		    0);
	if (kids == MAP_FAILED)
		test_skip("no shared memory");
	tcase_add_exit_test(tc, test_fails, 1);
	tcase_add_test(tc, test_gone);
	suite_add_tcase(s, tc);
	return s;
}
