/* SPDX-License-Identifier: Apache-2.0 */
/* stop_all() (tools/ctxdump/stop.c) against a target forked here, in cases
 * that ctxdump itself meets only in a race it cannot be made to lose. */
#include "test-common.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stop.h"

#define TIMEOUT_MS 10000

static const char cat_path[] = "/bin/cat";
static int exec_ctl, exec_ack;

/* The target's second thread: sends its id, and on a byte from exec_ctl
 * runs cat, which reads the standard input until EOF. */
static void *
exec_thread(void *arg)
{
	pid_t tid = (pid_t)syscall(SYS_gettid);
	char c;

	(void)arg;
	if (write(exec_ack, &tid, sizeof(tid)) != sizeof(tid) ||
	    read(exec_ctl, &c, 1) != 1)
		_exit(1);
	execl(cat_path, "cat", (char *)NULL);
	_exit(1);
}

/* Whether /proc/PID/comm reads name. */
static bool
comm_is(pid_t pid, const char *name)
{
	char path[64], buf[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	n = test_read_small(path, buf, sizeof(buf));
	return n > 0 && (size_t)n == strlen(name) + 1 &&
	       !memcmp(buf, name, (size_t)n - 1);
}

/* "TracerPid:" of pid, or -1. */
static long
tracer_of(pid_t pid)
{
	char path[64], buf[4096], *p;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (test_read_small(path, buf, sizeof(buf)) <= 0)
		return -1;
	p = strstr(buf, "\nTracerPid:");
	return p ? strtol(p + strlen("\nTracerPid:"), NULL, 10) : -1;
}

/* Until thread tid of pid is in ptrace-stop. */
static void
wait_traced(pid_t pid, pid_t tid, long deadline)
{
	while (test_task_state(pid, tid) != 't') {
		ck_assert_msg(test_now_ms() < deadline, "no stop of thread %d",
			      (int)tid);
		usleep(1000);
	}
}

/* stop_all() of pid with late as the list a recorder keeps, naming tid
 * only, not looked at since: it must hold thread want stopped and take
 * tid off the list. */
static void
stop_with_late(
	struct stop_set *ss, struct stop_late *late, pid_t pid, pid_t tid, pid_t want)
{
	const struct stop_thread *t;
	int r;

	late->pid = pid;
	late->tid = malloc(sizeof(*late->tid));
	late->ended = malloc(sizeof(*late->ended));
	ck_assert(late->tid && late->ended);
	late->tid[0] = tid;
	late->ended[0] = false;
	late->n = late->cap = late->busy = 1;

	stop_init(ss, pid);
	r = stop_all(ss, 0, 500, 500, late);
	ck_assert_msg(r == 0, "stop_all(): %s (thread %d)", strerror(-r),
		      (int)ss->fail_tid);
	t = stop_find(ss, want);
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(t->status, STOP_STOPPED);
	ck_assert_uint_eq(late->n, 0);
	ck_assert(test_task_state(pid, want) == 't');
}

/* Lets go what stop_with_late() held: nothing is late after. */
static void
release_with_late(struct stop_set *ss, struct stop_late *late)
{
	stop_release(ss);
	ck_assert_int_eq(stop_late_add(late, ss), 0);
	ck_assert_uint_eq(late->n, 0);
	stop_late_free(late);
	stop_free(ss);
}

/* A late thread (seized by an earlier stop, its stop still to come) that
 * ran execve() since it was last looked at goes on with the process id,
 * where a seize fails with EPERM (it is ours already).  stop_all() looks
 * for it among the late threads again and takes it over: stopped and
 * read in this stop, whose first seize failed with EPERM before (and
 * ctxdump record skipped the round).  Case 0: its interrupt did not
 * outlive the exec (seized here without one), and it runs on in the new
 * program; case 1: its stop came, and nothing let it go yet. */
START_TEST(late_thread_after_exec)
{
	int ctl[2], ack[2], in[2], st;
	struct stop_late late = {0};
	struct stop_set ss;
	pid_t pid, tid;
	long deadline;

	if (access(cat_path, X_OK) != 0)
		test_skip("no %s", cat_path);
	ck_assert_int_eq(pipe2(ctl, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(ack, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe(in), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		pthread_t th;

		if (dup2(in[0], STDIN_FILENO) < 0)
			_exit(1);
		close(in[0]);
		close(in[1]);
		exec_ctl = ctl[0];
		exec_ack = ack[1];
		if (pthread_create(&th, NULL, exec_thread, NULL) != 0)
			_exit(1);
		for (;;)
			pause();
	}
	close(ctl[0]);
	close(ack[1]);
	close(in[0]);
	ck_assert_int_eq(read(ack[0], &tid, sizeof(tid)), sizeof(tid));

	/* seized, as a late thread is; then it runs execve() */
	ck_assert_int_eq(ptrace(PTRACE_SEIZE, tid, NULL, NULL), 0);
	ck_assert_int_eq(write(ctl[1], "x", 1), 1);
	deadline = test_now_ms() + TIMEOUT_MS;
	while (!comm_is(pid, "cat") || stop_count_threads(pid) != 1) {
		ck_assert_msg(test_now_ms() < deadline, "no exec of thread %d",
			      (int)tid);
		usleep(1000);
	}
	ck_assert_int_eq(tracer_of(pid), getpid());
	if (_i == 1) {
		ck_assert_int_eq(ptrace(PTRACE_INTERRUPT, pid, NULL, NULL), 0);
		wait_traced(pid, pid, deadline);
	}

	stop_with_late(&ss, &late, pid, tid, pid);
	release_with_late(&ss, &late);

	/* let go: running, not traced */
	ck_assert_int_eq(tracer_of(pid), 0);
	ck_assert(test_task_state(pid, pid) != 't');
	close(in[1]);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
	close(ctl[1]);
	close(ack[0]);
}
END_TEST

/* A late thread that stop_all() takes over is held already: an EPERM on a
 * thread listed before it is not the first seize failing.  The race it
 * stands for: a late thread listed (and taken) that runs execve() before
 * the process id, listed first, is seized -- the id is then ours, and
 * the late list no longer names it.  Here the process id is seized
 * beforehand, outside the late list, and the late thread is another one
 * with its interrupt pending: the stop must hold that thread, not fail
 * with EPERM (old: it did, since nothing had been seized when the first
 * seize failed). */
START_TEST(eperm_before_taken_thread)
{
	int ack[2], st;
	struct stop_late late = {0};
	struct stop_set ss;
	pid_t pid, tid;

	ck_assert_int_eq(pipe2(ack, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		pthread_t th;
		int never[2];

		if (pipe(never) != 0)
			_exit(1);
		exec_ctl = never[0];
		exec_ack = ack[1];
		if (pthread_create(&th, NULL, exec_thread, NULL) != 0)
			_exit(1);
		for (;;)
			pause();
	}
	close(ack[1]);
	ck_assert_int_eq(read(ack[0], &tid, sizeof(tid)), sizeof(tid));

	ck_assert_int_eq(ptrace(PTRACE_SEIZE, pid, NULL, NULL), 0);
	ck_assert_int_eq(ptrace(PTRACE_SEIZE, tid, NULL, NULL), 0);
	ck_assert_int_eq(ptrace(PTRACE_INTERRUPT, tid, NULL, NULL), 0);
	wait_traced(pid, tid, test_now_ms() + TIMEOUT_MS);

	stop_with_late(&ss, &late, pid, tid, tid);
	release_with_late(&ss, &late);
	ck_assert(test_task_state(pid, tid) != 't');

	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	close(ack[0]);
}
END_TEST

/* A child that has exited and is left a zombie (not reaped: WNOWAIT). */
static pid_t
zombie_child(void)
{
	siginfo_t si;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(0);
	memset(&si, 0, sizeof(si));
	ck_assert_int_eq(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
	return pid;
}

/* stop_maps_error(): -ESRCH, on which the caller reads through another
 * thread, only for a thread that is exiting or gone; a live one's error
 * is its own (old: elf-tls.c said -ESRCH for any empty maps). */
START_TEST(maps_error_by_thread_state)
{
	pid_t pid, self = (pid_t)syscall(SYS_gettid);

	ck_assert_int_eq(stop_maps_error(self, -ENODATA), -ENODATA);
	ck_assert_int_eq(stop_maps_error(self, -EACCES), -EACCES);

	pid = zombie_child();
	ck_assert_int_eq(stop_maps_error(pid, -ENODATA), -ESRCH);
	ck_assert_int_eq(stop_maps_error(pid, -EACCES), -ESRCH);
	/* reaped: gone */
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
	ck_assert_int_eq(stop_maps_error(pid, -ENODATA), -ESRCH);
}
END_TEST

/* A process of zombies only (exited, not reaped yet) has nothing to
 * stop and nothing to read, and is no error: stop_all() says 0 with its
 * thread a zombie, not -ESRCH (gone) as for a process that vanished. */
START_TEST(zombie_only_process)
{
	const struct stop_thread *t;
	struct stop_set ss;
	pid_t pid = zombie_child();

	stop_init(&ss, pid);
	ck_assert_int_eq(stop_all(&ss, 0, TIMEOUT_MS, 0, NULL), 0);
	t = stop_find(&ss, pid);
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(t->status, STOP_ZOMBIE);
	stop_release(&ss);
	stop_free(&ss);
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
}
END_TEST

static void *
pause_thread(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

/* A process whose group leader called pthread_exit() lives on: it is not
 * dying for a signal other than SIGKILL pending in it (old, with the
 * wrong bit of SigPnd/ShdPnd: SIGUSR1 read as the SIGKILL of an
 * exit_group()). */
START_TEST(zombie_leader_not_dying)
{
	long deadline = test_now_ms() + TIMEOUT_MS;
	int st;
	pid_t pid;

	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		sigset_t usr1;
		pthread_t th;

		sigemptyset(&usr1);
		sigaddset(&usr1, SIGUSR1);
		/* blocked in every thread: it stays pending */
		if (pthread_sigmask(SIG_BLOCK, &usr1, NULL) != 0 ||
		    pthread_create(&th, NULL, pause_thread, NULL) != 0)
			_exit(1);
		pthread_exit(NULL);
	}
	while (test_task_state(pid, pid) != 'Z') {
		ck_assert_msg(test_now_ms() < deadline, "leader %d not a zombie",
			      (int)pid);
		usleep(1000);
	}
	ck_assert_int_eq(kill(pid, SIGUSR1), 0);
	ck_assert(!stop_process_dying(pid));

	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
}
END_TEST

TEST_SUITE(ctxdump_stop_suite)
{
	Suite *s = suite_create("ctxdump-stop");
	TCase *tc = tcase_create("stop");

	if (access("/proc/self/task", R_OK) != 0)
		test_skip("no /proc");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, late_thread_after_exec, 0, 2);
	tcase_add_test(tc, eperm_before_taken_thread);
	tcase_add_test(tc, maps_error_by_thread_state);
	tcase_add_test(tc, zombie_only_process);
	tcase_add_test(tc, zombie_leader_not_dying);
	suite_add_tcase(s, tc);
	return s;
}
