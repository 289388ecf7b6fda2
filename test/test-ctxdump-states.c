/* SPDX-License-Identifier: Apache-2.0 */
/* Thread states and names in a dump, and a process whose main thread has
 * ended (helpers/states.c, under the shim with a TRACEPARENT):
 *  - the state is where the stop found each thread: S for threads blocked
 *    in read(), R for a thread looping in user space, T for a job-stopped
 *    process; names are read raw from /proc/PID/task/TID/comm (one with
 *    ") R (" in it as well), also with enough threads (124) for the names
 *    to be read on a second thread;
 *  - a thread-group leader that called pthread_exit() while three (and 80
 *    more) threads sleep: its maps and memory are gone from /proc/PID, yet the other
 *    threads are read through themselves (text, JSON, -t, --stacks), and
 *    the leader is listed as a zombie (Z) without a context; `ctxdump
 *    record` of that process samples the threads with their trace id,
 *    also after the thread it reads through ("first") has exited;
 *  - Ctrl-Z (SIGTSTP) to `ctxdump record` suspends it only after it has
 *    let every thread go.
 * No thread may be left stopped. */
#include "test-prof.h"

#include <time.h>

#define TIMEOUT_MS 30000
#define TRACE_ID   "4bf92f3577b34da6a3ce929d0e0e4736"

static char *const shim_env[] = {
	"TRACEPARENT=00-" TRACE_ID "-00f067aa0ba902b7-01",
	"OTEL_SERVICE_NAME=states",
	NULL,
};

struct target {
	struct test_child c;
	pid_t pid;
	pid_t tid[4]; /* reader, sleep-1, sleep-2, spinner */
	unsigned n;
};

/* Start helpers/states with up to 4 options (NULL-terminated). */
static void
target_start(struct target *t, const char *const *opts)
{
	char path[PATH_MAX], line[512], *p, *end;
	char *argv[6] = {(char *)prof_helper("states", path, sizeof(path))};
	int k = 1;

	while (opts && *opts && k < 5)
		argv[k++] = (char *)*opts++;
	argv[k] = NULL;
	memset(&t->c, 0, sizeof(t->c));
	t->n = 0;
	test_child_start(&t->c, argv, shim_env, true);
	test_child_expect(&t->c, "READY ", line, sizeof(line), TIMEOUT_MS);
	t->pid = (pid_t)strtol(line + 6, &end, 10);
	ck_assert_int_eq(t->pid, t->c.pid);
	while (*end && t->n < 4) {
		p = end;
		t->tid[t->n] = (pid_t)strtol(p, &end, 10);
		if (end == p)
			break;
		t->n++;
	}
	ck_assert_uint_ge(t->n, 3);
}

static void
wait_task_state(pid_t pid, pid_t tid, char c)
{
	long deadline = test_now_ms() + TIMEOUT_MS;

	while (test_task_state(pid, tid) != c) {
		ck_assert_msg(test_now_ms() < deadline,
			      "thread %d never in state %c (%c)", (int)tid, c,
			      test_task_state(pid, tid));
		usleep(2000);
	}
}

/* Wait until every thread of pid but skip sleeps (S) or, the leader
 * only, is a zombie (Z). */
static void
wait_all_blocked(pid_t pid, pid_t skip)
{
	long deadline = test_now_ms() + TIMEOUT_MS;
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	for (;;) {
		struct dirent *de;
		bool all = true;
		DIR *d = opendir(path);

		ck_assert_ptr_nonnull(d);
		while ((de = readdir(d)) != NULL) {
			pid_t tid = (pid_t)atoi(de->d_name);
			char c;

			if (tid <= 0 || tid == skip)
				continue;
			c = test_task_state(pid, tid);
			if (c != 'S' && !(tid == pid && c == 'Z'))
				all = false;
		}
		closedir(d);
		if (all)
			return;
		ck_assert_msg(test_now_ms() < deadline,
			      "threads of %d never all blocked", (int)pid);
		usleep(2000);
	}
}

static unsigned
count_str(const char *s, const char *what)
{
	unsigned n = 0;

	while ((s = strstr(s, what)) != NULL) {
		n++;
		s++;
	}
	return n;
}

static void
assert_thread(const char *json, pid_t tid, const char *comm, char state, bool record)
{
	char *t = test_json_thread(json, tid), want[96];

	ck_assert_msg(t, "thread %d missing: %s", (int)tid, json);
	snprintf(want, sizeof(want), "\"comm\": \"%s\",", comm);
	ck_assert_msg(strstr(t, want), "thread %d: no %s in %s", (int)tid, want, t);
	snprintf(want, sizeof(want), "\"state\": \"%c\",", state);
	ck_assert_msg(strstr(t, want), "thread %d: no %s in %s", (int)tid, want, t);
	if (record) {
		ck_assert_msg(strstr(t, "\"valid\": 1,") &&
				      strstr(t, "\"trace_id\": \"" TRACE_ID "\""),
			      "thread %d: no valid record: %s", (int)tid, t);
	} else {
		ck_assert_msg(strstr(t, "\"context\": null"), "thread %d: %s", (int)tid,
			      t);
	}
	free(t);
}

/* Blocked threads are S, a thread in user space R: from the stop, not
 * from /proc before it. */
START_TEST(states_from_the_stop)
{
	struct target t;
	char *out, *err, arg[16], line[128];
	unsigned i;

	target_start(&t, (const char *const[]){"--spin", NULL});
	ck_assert_uint_eq(t.n, 4);
	for (i = 0; i < 3; i++)
		wait_task_state(t.pid, t.tid[i], 'S');
	wait_task_state(t.pid, t.pid, 'S');
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);

	ck_assert_int_eq(prof_run(&out, &err, "--json", arg, NULL), 0);
	assert_thread(out, t.pid, "states", 'S', true);
	assert_thread(out, t.tid[0], "reader", 'S', true);
	assert_thread(out, t.tid[1], "sleep-1", 'S', true);
	assert_thread(out, t.tid[2], "sleep-2", 'S', true);
	assert_thread(out, t.tid[3], "spin) R (x", 'R', true);
	free(out);
	free(err);

	ck_assert_int_eq(prof_run(&out, &err, arg, NULL), 0);
	snprintf(line, sizeof(line), "Thread %d \"spin) R (x\" (running)\n",
		 (int)t.tid[3]);
	ck_assert_msg(strstr(out, line), "no '%s' in %s", line, out);
	snprintf(line, sizeof(line), "Thread %d \"sleep-1\" (sleeping)\n",
		 (int)t.tid[1]);
	ck_assert_msg(strstr(out, line), "no '%s' in %s", line, out);
	free(out);
	free(err);

	/* the same with the registers of --stacks, and for one thread */
	ck_assert_int_eq(prof_run(&out, &err, "--stacks", "--json", arg, NULL), 0);
	assert_thread(out, t.tid[3], "spin) R (x", 'R', true);
	assert_thread(out, t.tid[2], "sleep-2", 'S', true);
	free(out);
	free(err);
	snprintf(line, sizeof(line), "%d", (int)t.tid[3]);
	ck_assert_int_eq(prof_run(&out, &err, "--json", "-t", line, arg, NULL), 0);
	assert_thread(out, t.tid[3], "spin) R (x", 'R', true);
	ck_assert_ptr_null(test_json_thread(out, t.tid[1]));
	free(out);
	free(err);
	prof_child_finish(&t.c, TIMEOUT_MS);
}
END_TEST

/* A thread in nanosleep() is S too: the stop finds it with the restart
 * code of a sleep (ERESTART_RESTARTBLOCK, 516), the last of the kernel's
 * restart codes. */
START_TEST(states_nanosleep)
{
	struct target t;
	char *out, *err, arg[16];

	target_start(&t, (const char *const[]){"--nap", NULL});
	wait_task_state(t.pid, t.pid, 'S');
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);
	ck_assert_int_eq(prof_run(&out, &err, "--json", arg, NULL), 0);
	assert_thread(out, t.pid, "states", 'S', true);
	assert_thread(out, t.tid[1], "sleep-1", 'S', true);
	free(out);
	free(err);
	prof_child_finish(&t.c, TIMEOUT_MS);
}
END_TEST

/* Enough threads for their names to be read on a second thread before
 * the stop: every one named and in its state. */
START_TEST(states_many_threads)
{
	struct target t;
	char *out, *err, arg[16];

	target_start(&t, (const char *const[]){"--spin", "--extra", "120", NULL});
	ck_assert_uint_eq(t.n, 4);
	wait_all_blocked(t.pid, t.tid[3]);
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);
	ck_assert_int_eq(prof_run(&out, &err, "--json", arg, NULL), 0);
	ck_assert_uint_eq(count_str(out, "\"comm\": \"extra\",\n"), 120);
	ck_assert_uint_eq(count_str(out, "\"state\": \"S\",\n"), 124);
	ck_assert_uint_eq(count_str(out, "\"valid\": 1,\n"), 125);
	assert_thread(out, t.pid, "states", 'S', true);
	assert_thread(out, t.tid[1], "sleep-1", 'S', true);
	assert_thread(out, t.tid[3], "spin) R (x", 'R', true);
	free(out);
	free(err);
	prof_child_finish(&t.c, TIMEOUT_MS);
}
END_TEST

/* A job-stopped process: every thread T, and it stays stopped. */
START_TEST(states_job_stopped)
{
	struct target t;
	char *out, *err, arg[16];
	unsigned i;

	target_start(&t, NULL);
	ck_assert_int_eq(kill(t.pid, SIGSTOP), 0);
	for (i = 0; i < t.n; i++)
		wait_task_state(t.pid, t.tid[i], 'T');
	wait_task_state(t.pid, t.pid, 'T');
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);
	ck_assert_int_eq(prof_run(&out, &err, "--json", arg, NULL), 0);
	assert_thread(out, t.pid, "states", 'T', true);
	for (i = 0; i < t.n; i++)
		assert_thread(out, t.tid[i],
			      i ? (i == 1 ? "sleep-1" : "sleep-2") : "reader", 'T',
			      true);
	free(out);
	free(err);
	/* a detached thread re-enters the group-stop: briefly R first */
	wait_task_state(t.pid, t.pid, 'T');
	for (i = 0; i < t.n; i++)
		wait_task_state(t.pid, t.tid[i], 'T');
	ck_assert_int_eq(kill(t.pid, SIGCONT), 0);
	prof_child_finish(&t.c, TIMEOUT_MS);
}
END_TEST

/* Ctrl-Z (SIGTSTP) to a recorder that spends most of its time with the
 * target stopped: it suspends only once every thread was let go, and
 * carries on after SIGCONT. */
START_TEST(record_suspended)
{
	char arg[16], file[PATH_MAX], errf[PATH_MAX];
	const char *args[] = {"-F", "500", "-d", "60", "-o", file, arg, NULL};
	struct target t;
	unsigned i;
	pid_t pid;

	target_start(&t, (const char *const[]){"--extra", "300", NULL});
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);
	prof_tmpfile(file, sizeof(file), "states-tstp");
	prof_tmpfile(errf, sizeof(errf), "states-tstp-err");
	pid = prof_record_start(errf, args);
	prof_wait_file(file, 1, TIMEOUT_MS, pid, errf);
	for (i = 0; i < 20; i++) {
		prof_record_suspend(pid, errf);
		prof_assert_running(t.pid);
		ck_assert_int_eq(kill(pid, SIGCONT), 0);
		usleep(20000 + 7000 * i);
	}
	prof_record_end(pid, file, errf, TIMEOUT_MS);
	prof_assert_running(t.pid);
	prof_child_finish(&t.c, TIMEOUT_MS);
}
END_TEST

/* The main thread has ended (pthread_exit): /proc/PID/maps is empty and
 * process_vm_readv(PID) fails, but the threads still run and are read. */
START_TEST(zombie_leader)
{
	static const char *const names[] = {"reader", "sleep-1", "sleep-2"};
	struct target t;
	char *out, *err, arg[16], tid[16], line[128];
	unsigned i;

	target_start(&t, (const char *const[]){"--leader-exit", "--extra", "80", NULL});
	wait_task_state(t.pid, t.pid, 'Z');
	wait_all_blocked(t.pid, 0);
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);

	ck_assert_msg(prof_run(&out, &err, "--json", arg, NULL) == 0, "%s", err);
	for (i = 0; i < 3; i++)
		assert_thread(out, t.tid[i], names[i], 'S', true);
	assert_thread(out, t.pid, "states", 'Z', false);
	ck_assert_msg(strstr(out, "\"service.name\""), "no process context: %s", out);
	free(out);
	free(err);

	ck_assert_msg(prof_run(&out, &err, arg, NULL) == 0, "%s", err);
	snprintf(line, sizeof(line),
		 "Thread %d \"sleep-2\" (sleeping)\n    trace_id=" TRACE_ID,
		 (int)t.tid[2]);
	ck_assert_msg(strstr(out, line), "no '%s' in %s", line, out);
	snprintf(line, sizeof(line), "Thread %d \"states\" (zombie)\n", (int)t.pid);
	ck_assert_msg(strstr(out, line), "no '%s' in %s", line, out);
	free(out);
	free(err);

	snprintf(tid, sizeof(tid), "%d", (int)t.tid[1]);
	ck_assert_msg(
		prof_run(&out, &err, "--stacks", "--json", "-t", tid, arg, NULL) == 0,
		"%s", err);
	assert_thread(out, t.tid[1], "sleep-1", 'S', true);
	ck_assert_msg(strstr(out, "\"frames\": [\n"), "no frames: %s", out);
	free(out);
	free(err);
	prof_child_finish(&t.c, TIMEOUT_MS);
}
END_TEST

/* `ctxdump record` of a process whose main thread has ended reads the
 * layouts, stacks and records through a live thread as the dump does. */
/* `ctxdump report` of a recording: at least 2 rounds, and every sample
 * but may_lack has the record (a thread that did not stop in time under
 * load is not sampled in that round, so there may be fewer than threads x
 * rounds). */
static void
assert_report_all_traced(const char *file, unsigned may_lack)
{
	unsigned rounds, selected, all, traced;
	char *out, *err;
	const char *p;
	int st;

	st = prof_run(&out, &err, "report", file, NULL);
	ck_assert_msg(st == 0, "report exit %d: %s", st, err);
	p = strstr(out, " s, ");
	ck_assert_msg(p && sscanf(p, " s, %u rounds", &rounds) == 1, "%s", out);
	ck_assert_uint_ge(rounds, 2);
	p = strstr(out, "\n\n");
	ck_assert_msg(p && sscanf(p, "\n\n%u of %u samples selected, %u with",
				  &selected, &all, &traced) == 3,
		      "%s", out);
	ck_assert_msg(traced <= all && all - traced <= may_lack,
		      "%u of %u samples without a context: %s", all - traced, all, out);
	ck_assert_uint_ge(traced, rounds);
	free(out);
	free(err);
}

START_TEST(zombie_leader_record)
{
	char file[64], errf[64], arg[16], *out, *err;
	const char *args[] = {"-F", "50", "-o", file, arg, NULL};
	struct target t;
	int st;

	target_start(&t, (const char *const[]){"--leader-exit", NULL});
	wait_task_state(t.pid, t.pid, 'Z');
	wait_all_blocked(t.pid, 0);
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);
	prof_tmpfile(file, sizeof(file), "zombie-rec");
	prof_tmpfile(errf, sizeof(errf), "zombie-err");

	/* until rounds are on disk, not for a fixed time: under load the
	 * first round alone (libunwind's first unwind) has taken longer than
	 * 0.4 s, and a round no thread stopped in time for is skipped */
	prof_record_rounds(file, errf, args, TIMEOUT_MS);
	assert_report_all_traced(file, 0);
	/* the workers' stacks under the trace id */
	st = prof_run(&out, &err, "report", "--folded", file, NULL);
	ck_assert_msg(st == 0, "report exit %d: %s", st, err);
	ck_assert_msg(strstr(out, ";trace " TRACE_ID ";") && strstr(out, ";reader;") &&
			      strstr(out, ";sleeper;") && !strstr(out, "[no trace]"),
		      "no samples of the threads with the trace id: %s", out);
	free(out);
	free(err);
	unlink(file);
	unlink(errf);
	prof_child_finish(&t.c, TIMEOUT_MS);
}
END_TEST

/* Threads of pid listed in /proc (-1 if it cannot be read). */
static int
count_tasks(pid_t pid)
{
	char path[64];
	struct dirent *de;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((de = readdir(d)) != NULL)
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* The thread a recording of an exited leader reads through (the first
 * listed: "first") exits while it records: the next rounds read through
 * another one, with stacks and contexts as before. */
START_TEST(zombie_leader_record_reader_exits)
{
	char file[64], errf[64], arg[16], *out, *err;
	const char *args[] = {"-F", "50", "-o", file, arg, NULL};
	struct target t;
	long deadline;
	pid_t rec;
	int st;

	target_start(&t, (const char *const[]){"--leader-exit", "--first", NULL});
	wait_task_state(t.pid, t.pid, 'Z');
	wait_all_blocked(t.pid, 0);
	ck_assert_int_eq(count_tasks(t.pid), 5);
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);
	prof_tmpfile(file, sizeof(file), "zombie-rec2");
	prof_tmpfile(errf, sizeof(errf), "zombie-err2");

	rec = prof_record_start(errf, args);
	/* the first round is on disk: then "first" returns */
	prof_wait_file(file, 1, TIMEOUT_MS, rec, errf);
	ck_assert_int_eq(write(t.c.in_fd, "q", 1), 1);
	deadline = test_now_ms() + TIMEOUT_MS;
	while (count_tasks(t.pid) != 4) {
		ck_assert_msg(test_now_ms() < deadline,
			      "thread \"first\" did not exit");
		usleep(2000);
	}
	/* rounds read through another thread on disk, however many a
	 * loaded machine made it skip (exit 1, prof_record_stop()) */
	prof_wait_rounds(file, TIMEOUT_MS, rec, errf);
	prof_record_stop(rec, errf, TIMEOUT_MS);

	/* "first" clears its record on its way out (the shim's key
	 * destructor), before it is gone: a round may catch it in between,
	 * without a context, once or twice.  A reader that lost the
	 * contexts with its first thread would lose every later sample's. */
	assert_report_all_traced(file, 2);
	st = prof_run(&out, &err, "report", "--folded", file, NULL);
	ck_assert_msg(st == 0, "report exit %d: %s", st, err);
	ck_assert_msg(strstr(out, ";sleeper;") && !strstr(out, "[no stack]"),
		      "samples without a stack: %s", out);
	free(out);
	free(err);
	unlink(file);
	unlink(errf);
	prof_child_finish(&t.c, TIMEOUT_MS);
}
END_TEST

TEST_SUITE(ctxdump_states_suite)
{
	Suite *s = suite_create("ctxdump-states");
	TCase *tc = tcase_create("states");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, states_from_the_stop);
	tcase_add_test(tc, states_nanosleep);
	tcase_add_test(tc, states_many_threads);
	tcase_add_test(tc, states_job_stopped);
	tcase_add_test(tc, record_suspended);
	tcase_add_test(tc, zombie_leader);
	tcase_add_test(tc, zombie_leader_record);
	tcase_add_test(tc, zombie_leader_record_reader_exits);
	suite_add_tcase(s, tc);
	return s;
}
