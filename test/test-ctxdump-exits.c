/* SPDX-License-Identifier: Apache-2.0 */
/* Threads that end while ctxdump holds their process (helpers/exits.c):
 *  - threads created and ended back to back all through the dump: every
 *    dump exits 0 without a word about them (a thread that ended is left
 *    out and only counted, "exited_threads"), the long-lived workers are
 *    read right, and some dumps did meet such exits;
 *  - the process killed (SIGKILL) while ctxdump holds its threads stopped
 *    and waits for one that cannot stop: ctxdump goes at once ("exited
 *    during the dump", exit 2) instead of waiting out its deadline, and
 *    the target's parent can collect it;
 *  - the process killed while ctxdump unwinds the stacks, after the stop:
 *    one line says so, not one per thread;
 *  - Ctrl-Z to `ctxdump record` while the vfork()ing thread is seized
 *    with its stop pending: it suspends only once that one is let go;
 *  - the same for `ctxdump record`, which outlives its stops: rounds
 *    among exiting threads never fail, and a target killed mid-round
 *    ends the recording cleanly ("process exited"), exit 0;
 *  - but a process with a zombie leader (pthread_exit()) lives on: the
 *    rounds that could stop none of its threads count as gaps (exit 1),
 *    also when it is killed afterwards;
 *  - ctxdump unwinds after it lets the threads go, through one of them:
 *    when that one ends first, the stacks are still read and named;
 *  - a process whose last thread is kept in its exit is said to have
 *    exited at once, not after a wait for that thread to go;
 *  - a thread runs execve() while ctxdump holds others (helpers/exec-race.c):
 *    the dump says so and shows the new program, and record goes on with
 *    it.
 * No dump may hang, and no thread may be left stopped. */
#include "test-prof.h"

#include <sys/ptrace.h>
#include <time.h>

#define TIMEOUT_MS 30000

struct target {
	struct test_child c;
	pid_t pid, vfork;
	pid_t tid[8];
	unsigned n;
};

static void
target_start(struct target *t, const char *const *opts, unsigned n)
{
	char path[PATH_MAX], count[16], line[512], *p, *end;
	char *argv[12];
	int k = 0;

	memset(t, 0, sizeof(*t));
	argv[k++] = (char *)prof_helper("exits", path, sizeof(path));
	while (opts && *opts && k < 10)
		argv[k++] = (char *)*opts++;
	snprintf(count, sizeof(count), "%u", n);
	argv[k++] = count;
	argv[k] = NULL;
	test_child_start(&t->c, argv, NULL, false);
	for (;;) {
		test_child_readline(&t->c, line, sizeof(line), TIMEOUT_MS);
		if (strncmp(line, "VFORK ", 6) == 0)
			t->vfork = (pid_t)atoi(line + 6);
		else if (strncmp(line, "READY ", 6) == 0)
			break;
	}
	t->pid = (pid_t)strtol(line + 6, &end, 10);
	ck_assert_int_eq(t->pid, t->c.pid);
	while (*end && t->n < 8) {
		p = end;
		t->tid[t->n] = (pid_t)strtol(p, &end, 10);
		if (end == p)
			break;
		t->n++;
	}
	ck_assert_uint_eq(t->n, n);
}

/* SIGKILL to the child, collected (test_child_finish() would wait
 * again); returns its wait status. */
static int
child_kill(struct test_child *c)
{
	int st;

	ck_assert_int_eq(kill(c->pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(c->pid, &st, 0), c->pid);
	close(c->in_fd);
	close(c->out_fd);
	return st;
}

static int
target_kill(struct target *t)
{
	return child_kill(&t->c);
}

/* Worker i's record in a JSON dump: its thread, with its trace id. */
static void
assert_worker(const char *json, const struct target *t, unsigned i)
{
	char key[64], trace[40];
	const char *s, *e;
	unsigned k;

	snprintf(key, sizeof(key), "\"tid\": %d,", (int)t->tid[i]);
	s = strstr(json, key);
	ck_assert_msg(s, "worker %d missing: %s", (int)t->tid[i], json);
	e = strstr(s + 1, "\"tid\": ");
	for (k = 0; k < 16; k++)
		snprintf(trace + 2 * k, 3, "%02x", (unsigned)(uint8_t)(i + 1));
	s = strstr(s, trace);
	ck_assert_msg(s && (!e || s < e), "worker %d: no trace id %s", (int)t->tid[i],
		      trace);
}

static int
exited_threads(const char *json)
{
	const char *p = strstr(json, "\"exited_threads\": ");

	ck_assert_msg(p, "no exited_threads: %s", json);
	return atoi(p + 18);
}

/* Until at least 3 dumps met threads that ended meanwhile (at least 10
 * dumps, at most 300): each exits 0, says nothing on stderr, and shows the
 * workers. */
START_TEST(exits_during_dump)
{
	static const char *const opts[] = {"--burst", "2", NULL};
	char arg[16];
	unsigned run, met = 0;
	struct target t;

	target_start(&t, opts, 4);
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);
	for (run = 0; run < 300 && (run < 10 || met < 3); run++) {
		char *out, *err;
		int r = prof_run(&out, &err, run % 3 == 2 ? "-js" : "-j", arg, NULL);
		unsigned i;

		ck_assert_msg(r == 0, "run %u: exit %d: %s", run, r, err);
		ck_assert_msg(!strstr(err, "ctxdump: "), "run %u: %s", run, err);
		for (i = 0; i < t.n; i++)
			assert_worker(out, &t, i);
		met += exited_threads(out) > 0;
		free(out);
		free(err);
		prof_assert_running(t.pid);
	}
	ck_assert_msg(met >= 3, "only %u of %u dumps met an exiting thread", met, run);
	prof_child_finish(&t.c, TIMEOUT_MS);
}
END_TEST

/* ctxdump started with argv, its output to the files outf and errf. */
static pid_t
dump_start(char *const argv[], const char *outf, const char *errf)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fo = open(outf, O_WRONLY | O_TRUNC);
		int fe = open(errf, O_WRONLY | O_TRUNC);

		dup2(fo, 1);
		dup2(fe, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* SIGKILL to the target while ctxdump holds its workers stopped and waits
 * for the vfork()ing thread: every thread ends, stopped or not. */
START_TEST(killed_while_held)
{
	static const char *const opts[] = {"--vfork", NULL};
	const unsigned deadline = 4000 * test_time_scale();
	char arg[16], timeout[48], outf[PATH_MAX], errf[PATH_MAX], *out, *err;
	struct target t;
	long t0, took;
	pid_t pid;
	int st;

	target_start(&t, opts, 3);
	ck_assert_int_gt(t.vfork, 0);
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);
	snprintf(timeout, sizeof(timeout), "--stop-timeout=%u", deadline);
	prof_tmpfile(outf, sizeof(outf), "exits-out");
	prof_tmpfile(errf, sizeof(errf), "exits-err");
	/* inside vfork() (its child sleeps 2 s): it cannot stop */
	prof_wait_task_state(t.pid, t.vfork, 'D', test_now_ms() + TIMEOUT_MS);
	pid = dump_start(
		(char *[]){(char *)test_ctxdump_path(), timeout, "-s", "-j", arg, NULL},
		outf, errf);
	t0 = test_now_ms();
	/* held: the workers are stopped, the vfork()ing thread cannot be */
	prof_wait_task_state(t.pid, t.tid[0], 't', t0 + deadline / 2);
	prof_wait_task_state(t.pid, t.tid[2], 't', t0 + deadline / 2);
	t0 = test_now_ms();
	st = target_kill(&t);
	ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	st = prof_record_wait(pid, TIMEOUT_MS);
	took = test_now_ms() - t0;
	out = prof_slurp(outf);
	err = prof_slurp(errf);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "status 0x%x: %s", st,
		      err);
	ck_assert_msg(strstr(err, "exited during the dump") && !strstr(err, "tid "),
		      "%s", err);
	/* not the rest of its deadline */
	ck_assert_msg(took < (long)deadline / 2, "ctxdump took %ld ms", took);
	free(out);
	free(err);
	unlink(outf);
	unlink(errf);
}
END_TEST

/* SIGKILL to the target as soon as ctxdump --stacks has let its threads go
 * (its leader's TracerPid back to 0), while it unwinds their stacks
 * through the target's files: one line says that the process exited
 * before the stacks could be unwound, and the records read in the stop
 * are shown (exit 1).  It used to be one "cannot unwind the stack: No
 * such process" per thread.  Until a dump met that (at most 20; one that
 * finished its stacks first exits 0).  CTXDUMP_TEST_SYNC_PAUSE_MS holds
 * ctxdump between the release and the unwinding: without it, the kill
 * fell in that window by luck, and under load (the ASan build beside
 * other tests) no dump of 20 met it. */
START_TEST(killed_before_stacks)
{
	char arg[16], outf[PATH_MAX], errf[PATH_MAX], *out, *err;
	unsigned run, i, met = 0;

	prof_tmpfile(outf, sizeof(outf), "exits-out");
	prof_tmpfile(errf, sizeof(errf), "exits-err");
	ck_assert_int_eq(setenv("CTXDUMP_TEST_SYNC_PAUSE_MS", "300", 1), 0);
	for (run = 0; run < 20 && !met; run++) {
		long deadline = test_now_ms() + TIMEOUT_MS;
		bool seized = false;
		struct target t;
		pid_t pid, w;
		int st;

		target_start(&t, NULL, 8);
		snprintf(arg, sizeof(arg), "%d", (int)t.pid);
		pid = dump_start((char *[]){(char *)test_ctxdump_path(),
					    (char *)test_stop_timeout_arg(), "-s", "-j",
					    arg, NULL},
				 outf, errf);
		while ((w = waitpid(pid, &st, WNOHANG)) == 0) {
			int tp = prof_tracer_of(t.pid, t.pid);

			ck_assert_msg(test_now_ms() < deadline, "ctxdump hangs");
			if (tp > 0)
				seized = true;
			else if (seized)
				break;
		}
		(void)target_kill(&t);
		if (w != pid)
			st = prof_record_wait(pid, TIMEOUT_MS);
		out = prof_slurp(outf);
		err = prof_slurp(errf);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) <= 2, "status 0x%x: %s",
			      st, err);
		ck_assert_msg(!strstr(err, "tid "), "%s", err);
		if (WEXITSTATUS(st) == 1) {
			ck_assert_msg(strstr(err, "exited before ") &&
					      strstr(err, "of its stacks could be "
							  "unwound"),
				      "%s", err);
			for (i = 0; i < t.n; i++)
				assert_worker(out, &t, i);
			met++;
		}
		free(out);
		free(err);
	}
	unsetenv("CTXDUMP_TEST_SYNC_PAUSE_MS");
	ck_assert_msg(met, "no dump of %u met the exit", run);
	unlink(outf);
	unlink(errf);
}
END_TEST

/* Ctrl-Z to a recorder while a thread it could not stop (in vfork()) is
 * still attached with its stop pending: the recorder suspends only once
 * that thread was let go too, never with a thread of the target stopped.
 * At 2 rounds a second the recorder sleeps when the vfork() ends, so its
 * SIGCHLD handler lets the thread go, and the next round finds it in the
 * next vfork(): the held Ctrl-Z must still come through in between. */
START_TEST(record_suspended_late)
{
	static const char *const opts[] = {"--vfork", NULL};
	static const char *const freq[] = {"200", "2"};
	char arg[16], file[PATH_MAX], errf[PATH_MAX];
	const char *args[] = {"-F", freq[_i], "-d", "60", "-o", file, arg, NULL};
	struct target t;
	unsigned i;
	pid_t pid;

	target_start(&t, opts, 3);
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);
	prof_tmpfile(file, sizeof(file), "exits-tstp");
	prof_tmpfile(errf, sizeof(errf), "exits-tstp-err");
	pid = prof_record_start(errf, args);
	prof_wait_file(file, 1, TIMEOUT_MS, pid, errf);
	for (i = 0; i < 2; i++) {
		/* the vfork()ing thread: seized, its stop pending */
		prof_wait_task_state(t.pid, t.vfork, 'D', test_now_ms() + TIMEOUT_MS);
		usleep(100000);
		prof_record_suspend(pid, errf);
		/* past the end of the vfork() it was in (its child sleeps
		 * 2 s): a thread still seized would be stopped by now */
		usleep(2500000);
		prof_assert_running(t.pid);
		ck_assert_int_eq(kill(pid, SIGCONT), 0);
	}
	prof_record_end(pid, file, errf, TIMEOUT_MS);
	prof_child_finish(&t.c, TIMEOUT_MS);
}
END_TEST

/* SIGKILL to the target while recorder rec records it into file: the
 * recording ends by itself ("process exited") with exit status want,
 * saying want_err if not NULL; the files are removed.  A want of 0 is
 * also met by 1 for rounds a loaded machine made it skip before the kill
 * (no thread got a CPU to stop in 500 ms): each is in a gap of 500 ms
 * before a round recorded after it (prof_round_gaps(); a round that
 * waits 50 ms for the thread in vfork() is no such gap), where a round
 * that met the kill has no round after it. */
static void
kill_while_recorded(struct target *t,
		    pid_t rec,
		    const char *file,
		    const char *errf,
		    int want,
		    const char *want_err)
{
	char *out, *err;
	int st, r;

	(void)target_kill(t);
	st = prof_record_wait(rec, TIMEOUT_MS);
	err = prof_slurp(errf);
	if (want == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 1 &&
	    prof_record_status_ok(st, err)) {
		unsigned long skipped = prof_summary_count(err, "round");
		unsigned gaps = prof_round_gaps(file, 500000000u);

		ck_assert_msg(
			skipped <= gaps,
			"%lu rounds skipped, %u gaps of 500 ms in the recording: %s",
			skipped, gaps, err);
	} else {
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == want,
			      "status 0x%x: %s", st, err);
	}
	ck_assert_msg(!want_err || strstr(err, want_err), "%s", err);
	free(err);
	r = prof_run(&out, &err, "report", file, NULL);
	ck_assert_msg(r == 0, "report: exit %d: %s", r, err);
	ck_assert_msg(strstr(out, "Ended: process exited"), "%s", out);
	free(out);
	free(err);
	unlink(file);
	unlink(errf);
}

/* ctxdump record among exiting threads: no round fails, the target runs
 * on; then the target killed mid-recording ends it cleanly. */
START_TEST(record_with_exits)
{
	static const char *const opts[] = {"--burst", "2", "--vfork", NULL};
	char arg[16], file[PATH_MAX], errf[PATH_MAX], *out, *err;
	const char *args[] = {"-F", "200", "-d", "1", "-o", file, arg, NULL};
	struct target t;
	pid_t pid;
	int st, r;

	target_start(&t, opts, 3);
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);
	prof_tmpfile(file, sizeof(file), "exits-prof");
	prof_tmpfile(errf, sizeof(errf), "exits-rerr");
	pid = prof_record_start(errf, args);
	st = prof_record_wait(pid, TIMEOUT_MS);
	err = prof_slurp(errf);
	/* failed rounds fail it; skipped ones (a loaded machine) do not */
	ck_assert_msg(prof_record_status_ok(st, err), "status 0x%x: %s", st, err);
	free(err);
	prof_assert_running(t.pid);
	r = prof_run(&out, &err, "report", file, NULL);
	ck_assert_msg(r == 0, "report: exit %d: %s", r, err);
	ck_assert_msg(strstr(out, "Ended: duration reached"), "%s", out);
	free(out);
	free(err);

	/* killed mid-recording: the recording ends, complete */
	args[3] = "30";
	ck_assert_int_eq(truncate(file, 0), 0); /* prof_wait_file() below */
	pid = prof_record_start(errf, args);
	prof_wait_file(file, 4096, TIMEOUT_MS, pid, errf);
	kill_while_recorded(&t, pid, file, errf, 0, NULL);
}
END_TEST

/* A process whose leader called pthread_exit() and whose one other thread
 * spends 2 s in vfork() and 2 s out of it, in turn: a zombie leader, as
 * in a process that is exiting, yet it lives on, and the rounds in which
 * nothing could be stopped are gaps in the recording (exit 1), also when
 * the process is killed afterwards.  (Rounds that only meet the kill or
 * an exit are not gaps: record_with_exits.) */
START_TEST(record_zombie_leader_gaps)
{
	static const char *const opts[] = {"--vfork", "--vfork-gap", "2000",
					   "--leader-exit", NULL};
	char arg[16], file[PATH_MAX], errf[PATH_MAX];
	const char *args[] = {"-F", "100", "-d", "60", "-o", file, arg, NULL};
	struct target t;
	pid_t pid;

	target_start(&t, opts, 0);
	ck_assert_int_gt(t.vfork, 0);
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);
	prof_tmpfile(file, sizeof(file), "exits-zprof");
	prof_tmpfile(errf, sizeof(errf), "exits-zerr");
	prof_wait_task_state(t.pid, t.pid, 'Z', test_now_ms() + TIMEOUT_MS);
	/* rounds that stop it between two vfork()s, then some that cannot
	 * (and the kill) */
	prof_wait_task_state(t.pid, t.vfork, 'S', test_now_ms() + TIMEOUT_MS);
	pid = prof_record_start(errf, args);
	prof_wait_task_state(t.pid, t.vfork, 'D', test_now_ms() + TIMEOUT_MS);
	usleep(500000);
	kill_while_recorded(&t, pid, file, errf, 1, " skipped (no thread stopped");
}
END_TEST

/* Whether every line of a dump's standard error is about a thread that
 * did not stop in time. */
static bool
only_not_stopped(const char *err)
{
	const char *l = err, *nl;

	for (; *l; l = nl + 1) {
		nl = strchr(l, '\n');
		if (!nl)
			nl = l + strlen(l) - 1;
		if (nl > l && !memmem(l, (size_t)(nl - l), "did not stop within", 19))
			return false;
	}
	return true;
}

/* A zombie leader and threads that each live 30 ms (relays): the thread
 * ctxdump reads the module list and the modules through (no longer the
 * leader) often ends between the detach and the unwinding.  Before
 * ctxdump took another thread then, a few percent of the samples of a
 * recording had no stack, or the whole recording named relay_wait
 * "exits+0x0" (a module that could not be opened, the frame kept so),
 * and half of the one-shot dumps said "cannot unwind the stack" (or,
 * read through a thread that ended before the stop, "cannot read the
 * TLS slot"). */
START_TEST(stacks_through_ending_threads)
{
	static const char *const opts[] = {"--relay", "4", "--leader-exit", NULL};
	char arg[16], file[PATH_MAX], errf[PATH_MAX], *out, *err, *line;
	const char *args[] = {"-F", "50", "-d", "2", "-o", file, arg, NULL};
	char *dump_argv[] = {(char *)test_ctxdump_path(),
			     (char *)test_stop_timeout_arg(), "--stacks", arg, NULL};
	struct target t;
	unsigned waits = 0, i;
	pid_t pid;
	int st, r;

	target_start(&t, opts, 0);
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);
	prof_tmpfile(file, sizeof(file), "exits-relay");
	prof_tmpfile(errf, sizeof(errf), "exits-relay-err");
	prof_wait_task_state(t.pid, t.pid, 'Z', test_now_ms() + TIMEOUT_MS);
	pid = prof_record_start(errf, args);
	st = prof_record_wait(pid, TIMEOUT_MS);
	err = prof_slurp(errf);
	/* 1: a round that met no thread it could stop (all between two
	 * relays), a gap of the zombie leader's process */
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) <= 1, "status 0x%x: %s", st,
		      err);
	free(err);
	r = prof_run(&out, &err, "report", "--folded", file, NULL);
	ck_assert_msg(r == 0, "report: exit %d: %s", r, err);
	for (line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		ck_assert_msg(!strstr(line, "[no stack]") && !strstr(line, "+0x0"),
			      "%s", line);
		waits += strstr(line, ";relay_wait;") != NULL;
	}
	ck_assert_uint_gt(waits, 0);
	free(out);
	free(err);
	unlink(file);
	unlink(errf);

	/* one-shot dumps: every thread's stack, named */
	for (i = 0, waits = 0; i < 10; i++) {
		st = test_run_capture(dump_argv, NULL, false, &out, &err, TIMEOUT_MS);
		ck_assert_msg(WIFEXITED(st), "status 0x%x: %s", st, err);
		/* 2: three tries in a row met the thread read through
		 * ending before the stop (rare); 1: a thread that got no
		 * CPU to stop within the stop timeout (a loaded machine) */
		ck_assert_msg(WEXITSTATUS(st) == 0 ||
				      (WEXITSTATUS(st) == 2 &&
				       strstr(err, "exited before its objects")) ||
				      (WEXITSTATUS(st) == 1 && only_not_stopped(err)),
			      "exit %d: %s%s", WEXITSTATUS(st), out, err);
		ck_assert_msg(!strstr(out, "+0x0"), "%s", out);
		waits += strstr(out, "relay_wait") != NULL;
		free(out);
		free(err);
	}
	ck_assert_uint_gt(waits, 0);
	(void)target_kill(&t);
}
END_TEST

/* The same with threads that live 2 ms (helpers/relay under the shim),
 * dumped without and with stacks: the objects are opened one by one, the
 * process context read and the stacks unwound through a thread that often
 * ends before the next.  Before ctxdump went on through another thread in
 * each of those steps, a third of the dumps said "cannot read the process
 * context: ... No such process", or gave up after three starts ("exited
 * before its objects could be opened"), or could not unwind a stack. */
START_TEST(dump_through_short_lived_threads)
{
	char path[PATH_MAX], arg[16], line[128], *out, *err;
	char *argv[] = {(char *)prof_helper("relay", path, sizeof(path)), "8", "2",
			NULL};
	char *dump_argv[] = {(char *)test_ctxdump_path(),
			     (char *)test_stop_timeout_arg(), arg, NULL, NULL};
	struct test_child c;
	pid_t pid;
	unsigned i;
	int st;

	test_child_start(&c, argv, NULL, true);
	test_child_expect(&c, "READY ", line, sizeof(line), TIMEOUT_MS);
	pid = (pid_t)atoi(line + 6);
	ck_assert_int_eq(pid, c.pid);
	prof_wait_task_state(pid, pid, 'Z', test_now_ms() + TIMEOUT_MS);
	snprintf(arg, sizeof(arg), "%d", (int)pid);
	for (i = 0; i < 40; i++) {
		/* every fourth with --stacks */
		dump_argv[2] = i % 4 == 3 ? "--stacks" : arg;
		dump_argv[3] = i % 4 == 3 ? arg : NULL;
		st = test_run_capture(dump_argv, NULL, false, &out, &err, TIMEOUT_MS);
		ck_assert_msg(WIFEXITED(st), "status 0x%x: %s", st, err);
		/* 1: a thread that got no CPU to stop within the stop
		 * timeout (a loaded machine).  The messages show the start
		 * of err and out only: Check ends the test run on a message
		 * over its limit. */
		ck_assert_msg(WEXITSTATUS(st) == 0 ||
				      (WEXITSTATUS(st) == 1 && only_not_stopped(err)),
			      "dump %u: exit %d: %.1500s%.1000s", i, WEXITSTATUS(st),
			      err, out);
		ck_assert_msg(strstr(out, "\nService: "), "dump %u: %.1500s%.1000s", i,
			      err, out);
		ck_assert_msg(strstr(out, "libctxshim.so"), "dump %u: %.1500s%.1000s",
			      i, err, out);
		free(out);
		free(err);
	}
	(void)child_kill(&c);
}
END_TEST

/* A zombie leader and one thread that has exited but is kept listed as a
 * zombie by its tracer (this test, which does not wait for it): as a
 * process whose last thread is stuck in its exit.  Every look for a live
 * thread to read through (before the dump, and for "has it exited"
 * after) waited for that thread to go, a second each, as for threads
 * that end under the listing: with CTXDUMP_TEST_LIVE_WAIT_MS making that
 * wait ten minutes, the dump never ended.  It says at once that the
 * process exited. */
START_TEST(dump_last_thread_held_in_exit)
{
	char path[PATH_MAX], arg[16], line[128], *end, *out, *err;
	char *argv[] = {(char *)prof_helper("exit-held", path, sizeof(path)), NULL};
	char *dump_argv[] = {(char *)test_ctxdump_path(),
			     (char *)test_stop_timeout_arg(), NULL, NULL, NULL};
	struct test_child c;
	unsigned i;
	pid_t pid, tid;
	int st;

	test_child_start(&c, argv, NULL, false);
	test_child_expect(&c, "READY ", line, sizeof(line), TIMEOUT_MS);
	pid = (pid_t)strtol(line + 6, &end, 10);
	tid = (pid_t)strtol(end, NULL, 10);
	ck_assert_int_eq(pid, c.pid);
	ck_assert_int_gt(tid, pid);
	prof_wait_task_state(pid, pid, 'Z', test_now_ms() + TIMEOUT_MS);
	ck_assert_msg(ptrace(PTRACE_SEIZE, tid, NULL, NULL) == 0, "seize: %s",
		      strerror(errno));
	ck_assert_int_eq(write(c.in_fd, "\n", 1), 1);
	prof_wait_task_state(pid, tid, 'Z', test_now_ms() + TIMEOUT_MS);
	ck_assert_int_eq(setenv("CTXDUMP_TEST_LIVE_WAIT_MS", "600000", 1), 0);
	snprintf(arg, sizeof(arg), "%d", (int)pid);
	for (i = 0; i < 2; i++) {
		dump_argv[2] = i ? "--stacks" : arg;
		dump_argv[3] = i ? arg : NULL;
		st = test_run_capture(dump_argv, NULL, false, &out, &err, TIMEOUT_MS);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "status 0x%x: %s",
			      st, err);
		ck_assert_msg(strstr(err, "exited"), "%s", err);
		free(out);
		free(err);
	}
	unsetenv("CTXDUMP_TEST_LIVE_WAIT_MS");
	/* let it go: then the process ends */
	ck_assert_int_eq(waitpid(tid, &st, __WALL), tid);
	st = test_child_finish(&c, TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
}
END_TEST

/* helpers/exec-race with N sleeping threads, its pid in *pid. */
static void
exec_race_start(struct test_child *c, pid_t *pid, unsigned n)
{
	char path[PATH_MAX], count[16], line[128];
	char *argv[] = {(char *)prof_helper("exec-race", path, sizeof(path)), count,
			NULL};

	snprintf(count, sizeof(count), "%u", n);
	test_child_start(c, argv, NULL, false);
	test_child_expect(c, "READY ", line, sizeof(line), TIMEOUT_MS);
	*pid = (pid_t)atoi(line + 6);
	ck_assert_int_eq(*pid, c->pid);
}

/* The target has run its exec (if execed: a dump stopped its watcher
 * before it saw the worker seized, and once let go it sees it no more)
 * and runs the new program, with no thread left stopped; then it ends by
 * itself. */
static void
exec_race_finish(struct test_child *c, pid_t pid, bool execed)
{
	char line[128];

	if (execed) {
		test_child_expect(c, "EXECED ", line, sizeof(line), TIMEOUT_MS);
		ck_assert_int_eq(atoi(line + 7), pid);
	}
	prof_assert_running(pid);
	prof_child_finish(c, TIMEOUT_MS);
}

/* A process that runs execve() from one thread while ctxdump holds
 * others: the exec waits for ctxdump to collect the held threads' exits,
 * and holds the lock that ctxdump's next PTRACE_SEIZE waits for -- a
 * hang until SIGKILL, before ctxdump collected those exits itself.  The
 * dump now notices that what it read is not of one program, says so, and
 * dumps the new program (fill(1, "after") on its one thread), exit 0 (or
 * 1 if that thread could not be read yet: still in its loader, which a
 * loaded machine makes likelier; or its thread with no context yet, its
 * main() not reached: seen under ASan).
 * A dump that stopped the exec'ing thread before it saw the others
 * seized is a normal one, and the target then execs no more; at least
 * one of the tries must meet the exec inside the dump (up to 12: under
 * a sanitizer on a loaded machine 6 once met none). */
START_TEST(dump_at_exec)
{
	unsigned tries, met = 0;

	for (tries = 0; tries < 12 && met < 2; tries++) {
		struct test_child c;
		char arg[16], *out, *err;
		char *argv[] = {(char *)test_ctxdump_path(),
				(char *)test_stop_timeout_arg(), arg, NULL};
		bool exec;
		pid_t pid;
		int st;

		exec_race_start(&c, &pid, 300);
		snprintf(arg, sizeof(arg), "%d", (int)pid);
		st = test_run_capture(argv, NULL, false, &out, &err, 20000);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) <= 1,
			      "ctxdump hung or failed: status 0x%x: %s", st, err);
		exec = strstr(err, "ran execve() during the dump; dumping the new "
				   "program") != NULL;
		ck_assert_msg(!strstr(out, "worker-0") || !exec, "%s", out);
		if (exec && WEXITSTATUS(st) == 1) {
			/* the new program still in its loader: its thread
			 * could not be read (a loaded machine) */
			ck_assert_msg(strstr(out, "Process ") &&
					      strstr(err, "skipping"),
				      "%s%s", out, err);
			met++;
		} else if (exec) {
			/* the new program, with its record; or, under a
			 * sanitizer's slower start, before main() published it
			 * (its command line only, no context yet) */
			ck_assert_msg(
				(strstr(out,
					"trace_id=02020202020202020202020202020202") &&
				 strstr(out, "#0=after-1")) ||
					(strstr(out, " after\n") &&
					 strstr(out, "(no context)") &&
					 !strstr(out, "trace_id=")),
				"not the new program:\n%s", out);
			met++;
		} else {
			ck_assert_int_eq(WEXITSTATUS(st), 0);
			ck_assert_msg(strstr(out, "#0=worker-0"), "%s%s", out, err);
		}
		free(out);
		free(err);
		exec_race_finish(&c, pid, exec);
	}
	ck_assert_msg(met > 0, "no dump of %u met the exec", tries);
}
END_TEST

/* The same for `ctxdump record`: it records the exec and goes on with the
 * new program, whose thread (fill(1, "after"): trace id 02...02, blocked
 * in wait_stdin_eof()) has samples.  Once the recording thread held a
 * thread of the new program that never stopped, and every later round
 * was skipped.  Exit 0, or 1 for a few rounds in which a thread did not
 * stop in time (the new program's only thread got no CPU for 50 ms when
 * the machine is loaded), never for a failed round. */
START_TEST(record_at_exec)
{
	static const char after[] = "trace 02020202020202020202020202020202;";
	char arg[16], file[PATH_MAX], errf[PATH_MAX], *out, *err, *p, *nl;
	const char *args[] = {"-F", "500", "-d", "1", "-o", file, arg, NULL};
	struct test_child c;
	pid_t pid, rec;
	int st, r, n = 0;

	exec_race_start(&c, &pid, 300);
	snprintf(arg, sizeof(arg), "%d", (int)pid);
	prof_tmpfile(file, sizeof(file), "exec-prof");
	prof_tmpfile(errf, sizeof(errf), "exec-rerr");
	rec = prof_record_start(errf, args);
	st = prof_record_wait(rec, 20000);
	err = prof_slurp(errf);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) <= 1 &&
			      !strstr(err, " failed ("),
		      "status 0x%x: %s", st, err);
	ck_assert_msg(strstr(err, "ran execve() 1 time ("), "%s", err);
	free(err);
	exec_race_finish(&c, pid, true);
	r = prof_run(&out, &err, "report", file, NULL);
	ck_assert_msg(r == 0, "report: exit %d: %s", r, err);
	ck_assert_msg(strstr(out, "Exec at "), "%s", out);
	free(out);
	free(err);
	r = prof_run(&out, &err, "report", "--folded", file, NULL);
	ck_assert_msg(r == 0, "report --folded: exit %d: %s", r, err);
	for (p = out; *p; p = nl + 1) {
		char *sp;

		nl = strchr(p, '\n');
		if (!nl)
			break;
		*nl = '\0';
		sp = strrchr(p, ' ');
		if (sp && strstr(p, after) && strstr(p, ";wait_stdin_eof;"))
			n += atoi(sp + 1);
	}
	ck_assert_msg(n >= 10, "%d samples of the new program", n);
	free(out);
	free(err);
	unlink(file);
	unlink(errf);
}
END_TEST

TEST_SUITE(ctxdump_exits_suite)
{
	Suite *s = suite_create("ctxdump-exits");
	TCase *tc = tcase_create("exits");

	if (access("/proc/self/task", R_OK) != 0)
		test_skip("no /proc");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, exits_during_dump);
	tcase_add_test(tc, killed_while_held);
	tcase_add_test(tc, killed_before_stacks);
	tcase_add_loop_test(tc, record_suspended_late, 0, 2);
	tcase_add_test(tc, record_with_exits);
	tcase_add_test(tc, record_zombie_leader_gaps);
	tcase_add_test(tc, stacks_through_ending_threads);
	tcase_add_test(tc, dump_through_short_lived_threads);
	tcase_add_test(tc, dump_last_thread_held_in_exit);
	tcase_add_test(tc, dump_at_exec);
	tcase_add_test(tc, record_at_exec);
	suite_add_tcase(s, tc);
	return s;
}
