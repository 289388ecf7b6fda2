/* SPDX-License-Identifier: Apache-2.0 */
/* What a ctxdump stop does to threads blocked in system calls
 * (helpers/eintr.c; the facts of doc/ctxdump.1, NOTES).  Stopping a
 * thread with PTRACE_INTERRUPT and letting it go makes the kernel leave
 * the call it sleeps in.  Calls it can restart are restarted unseen, with
 * what is left of their timeout (read, recv, accept, futex waits, poll,
 * select, nanosleep, clock_nanosleep, pause); the others return EINTR,
 * as after SIGSTOP and SIGCONT (signal(7)): epoll_wait and sigwaitinfo /
 * sigtimedwait.  One dump is one stop: exactly one EINTR each.  A
 * recording stops the process every round: one EINTR per round.
 *
 * The runners are all asleep inside their calls before ctxdump runs
 * (/proc/TID/stat and /proc/TID/syscall), so the outcome does not depend
 * on timing.  If a kernel changes this, the man page must change too. */
#include "test-prof.h"

#include <poll.h>
#include <time.h>

#define TIMEOUT_MS 30000
#define MAX_CALLS  32

static const char *const eintr_calls[] = {"epoll_wait", "epoll_wait-timeout",
					  "sigwaitinfo", "sigtimedwait", NULL};

struct runner {
	pid_t tid;
	char name[40];
	unsigned returns, eintr;
	int other;
};

struct target {
	struct test_child c;
	pid_t pid;
	struct runner r[MAX_CALLS];
	unsigned n;
};

static bool
is_eintr_call(const char *name)
{
	const char *const *p;

	for (p = eintr_calls; *p; p++)
		if (strcmp(*p, name) == 0)
			return true;
	return false;
}

/* Thread tid sleeps inside a system call: state S and a syscall number
 * in /proc/TID/syscall ("running" while in user space). */
static bool
asleep_in_call(pid_t pid, pid_t tid)
{
	char path[80], buf[256];
	bool ok = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	f = fopen(path, "re");
	if (f) {
		char *p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;

		ok = p && p[2] == 'S';
		fclose(f);
	}
	if (!ok)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
	f = fopen(path, "re");
	if (!f)
		return false;
	ok = fgets(buf, sizeof(buf), f) && buf[0] >= '0' && buf[0] <= '9';
	fclose(f);
	return ok;
}

static void
target_start(struct target *t)
{
	char path[PATH_MAX], line[256];
	char *argv[] = {path, NULL};
	unsigned i, tries, n;

	memset(t, 0, sizeof(*t));
	prof_helper("eintr", path, sizeof(path));
	test_child_start(&t->c, argv, NULL, false);
	test_child_expect(&t->c, "READY ", line, sizeof(line), TIMEOUT_MS);
	ck_assert_int_eq(sscanf(line, "READY %d %u", &t->pid, &n), 2);
	ck_assert_int_eq(t->pid, t->c.pid);
	ck_assert_uint_le(n, MAX_CALLS);
	for (t->n = 0; t->n < n; t->n++) {
		int tid;

		test_child_expect(&t->c, "CALL ", line, sizeof(line), TIMEOUT_MS);
		ck_assert_int_eq(sscanf(line, "CALL %d %39s", &tid, t->r[t->n].name),
				 2);
		t->r[t->n].tid = tid;
	}
	for (i = 0; i < t->n; i++) {
		for (tries = 0; tries < 10000 && !asleep_in_call(t->pid, t->r[i].tid);
		     tries++)
			usleep(1000);
		ck_assert_msg(asleep_in_call(t->pid, t->r[i].tid), "%s never blocked",
			      t->r[i].name);
	}
}

/* Ask for the counters until they have settled (the EINTR returns happen
 * after the detach, in the target's time). */
static void
report(struct target *t, bool (*settled)(const struct target *))
{
	char line[256];
	unsigned tries;

	for (tries = 0; tries < 200; tries++) {
		unsigned k = 0;

		test_child_send(&t->c, "REPORT\n");
		for (;;) {
			char name[40];
			unsigned ret, ei;
			int other, i;

			test_child_readline(&t->c, line, sizeof(line), TIMEOUT_MS);
			if (strcmp(line, "END") == 0)
				break;
			ck_assert_int_eq(sscanf(line, "RESULT %39s %u %u %d", name,
						&ret, &ei, &other),
					 4);
			for (i = 0; i < (int)t->n; i++) {
				if (strcmp(t->r[i].name, name) != 0)
					continue;
				t->r[i].returns = ret;
				t->r[i].eintr = ei;
				t->r[i].other = other;
				k++;
			}
		}
		ck_assert_uint_eq(k, t->n);
		if (settled(t))
			return;
		usleep(10000);
	}
}

static bool
one_each(const struct target *t)
{
	unsigned i;

	for (i = 0; i < t->n; i++)
		if (is_eintr_call(t->r[i].name) && t->r[i].eintr < 1)
			return false;
	return true;
}

static bool
two_each(const struct target *t)
{
	unsigned i;

	for (i = 0; i < t->n; i++)
		if (is_eintr_call(t->r[i].name) && t->r[i].eintr < 2)
			return false;
	return true;
}

START_TEST(one_dump_one_eintr)
{
	struct target t;
	char arg[16], *out, *err;
	unsigned i;
	int r;

	target_start(&t);
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);
	r = prof_run(&out, &err, _i ? "-s" : "-j", arg, NULL);
	ck_assert_msg(r == 0, "exit %d: %s", r, err);
	free(out);
	free(err);
	report(&t, one_each);
	/* and nothing more comes: a moment for a late second return */
	usleep(50000);
	report(&t, one_each);
	for (i = 0; i < t.n; i++) {
		const struct runner *x = &t.r[i];

		ck_assert_msg(x->other == 0, "%s: errno %d", x->name, x->other);
		if (is_eintr_call(x->name))
			ck_assert_msg(x->returns == 1 && x->eintr == 1,
				      "%s: %u returns, %u EINTR", x->name, x->returns,
				      x->eintr);
		else
			ck_assert_msg(x->returns == 0,
				      "%s returned %u times (%u EINTR)", x->name,
				      x->returns, x->eintr);
	}
	prof_child_finish(&t.c, TIMEOUT_MS);
}
END_TEST

/* A recording stops the process every round: the same calls return EINTR
 * once per round, the others never.  It records until two rounds reached
 * each thread, however many ticks a loaded machine made it miss or rounds
 * it made it skip (exit 1, prof_record_stop()); a thread that did not
 * stop in one round stops in the next, one EINTR for the two. */
START_TEST(record_eintr_per_round)
{
	char arg[16], file[PATH_MAX], errf[PATH_MAX];
	const char *args[] = {"-F", "20", "-o", file, arg, NULL};
	struct target t;
	long deadline;
	unsigned i;
	pid_t rec;

	target_start(&t);
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);
	prof_tmpfile(file, sizeof(file), "eintr-prof");
	prof_tmpfile(errf, sizeof(errf), "eintr-err");
	rec = prof_record_start(errf, args);
	deadline = test_now_ms() + TIMEOUT_MS;
	do {
		ck_assert_msg(test_now_ms() < deadline, "no two EINTR for each call");
		report(&t, two_each);
	} while (!two_each(&t));
	prof_record_stop(rec, errf, TIMEOUT_MS);
	/* the last round's returns come after the recorder let go: a moment
	 * for them, as in one_dump_one_eintr */
	usleep(50000);
	report(&t, two_each);
	for (i = 0; i < t.n; i++) {
		const struct runner *x = &t.r[i];

		if (is_eintr_call(x->name))
			ck_assert_msg(x->eintr >= 2 && x->eintr == x->returns,
				      "%s: %u returns, %u EINTR", x->name, x->returns,
				      x->eintr);
		else
			ck_assert_msg(x->returns == 0, "%s returned %u times", x->name,
				      x->returns);
	}
	unlink(file);
	unlink(errf);
	prof_child_finish(&t.c, TIMEOUT_MS);
}
END_TEST

TEST_SUITE(ctxdump_eintr_suite)
{
	Suite *s = suite_create("ctxdump-eintr");
	TCase *tc = tcase_create("eintr");

	if (access("/proc/self/syscall", R_OK) != 0)
		test_skip("no /proc/PID/syscall");
	tcase_add_loop_test(tc, one_dump_one_eintr, 0, 2);
	tcase_add_test(tc, record_eintr_per_round);
	suite_add_tcase(s, tc);
	return s;
}
