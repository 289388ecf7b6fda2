/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Helpers of the `ctxdump record` / `report` tests (test-ctxdump-record.c,
 * test-ctxdump-layouts.c): paths, running ctxdump and python3 (JSON
 * checks), and the check that no thread of a target was left stopped. */

#include "test-common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static __attribute__((unused)) const char *
prof_helper(const char *name, char *buf, size_t n)
{
	snprintf(buf, n, "%s/%s", test_env_path("HELPER_DIR"), name);
	return buf;
}

/* python3 from PATH (meson itself runs on it), or NULL. */
static __attribute__((unused)) const char *
prof_python(void)
{
	static char path[PATH_MAX];
	const char *p = getenv("PATH");

	while (p && *p) {
		const char *e = strchr(p, ':');
		size_t l = e ? (size_t)(e - p) : strlen(p);

		snprintf(path, sizeof(path), "%.*s/python3", (int)l, p);
		if (l && access(path, X_OK) == 0)
			return path;
		p = e ? e + 1 : NULL;
	}
	return NULL;
}

/* A fresh temporary file name (the file exists, empty). */
static __attribute__((unused)) void
prof_tmpfile(char *buf, size_t n, const char *tag)
{
	int fd;

	snprintf(buf, n, "/tmp/ctxdump-%s-XXXXXX", tag);
	fd = test_mkstemp(buf);
	ck_assert_int_ge(fd, 0);
	close(fd);
}

/* Run ctxdump with up to 14 arguments (NULL-terminated; as
 * test_ctxdump_argv() puts them); returns the exit status (-1 if it did
 * not exit normally); out and err are malloc'd. */
static __attribute__((unused)) int
prof_run(char **out, char **err, const char *a0, ...)
{
	va_list ap;
	int st;

	va_start(ap, a0);
	st = test_ctxdump_vrun(out, err, 120000, a0, ap);
	va_end(ap);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* python3 -c script arg; returns the exit status, out/err malloc'd. */
static __attribute__((unused)) int
prof_py(const char *script, const char *arg, char **out, char **err)
{
	char *argv[] = {(char *)prof_python(), "-c", (char *)script, (char *)arg, NULL};
	int st;

	ck_assert_ptr_nonnull(argv[0]);
	st = test_run_capture(argv, NULL, false, out, err, 60000);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* No thread of pid may be in ptrace-stop (t) or job-stopped (T). */
static __attribute__((unused)) void
prof_assert_running(pid_t pid)
{
	char path[64];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	ck_assert_msg(d, "process %d is gone", (int)pid);
	while ((de = readdir(d)) != NULL) {
		char sp[320], buf[512], *p;
		ssize_t r;
		int fd;

		if (de->d_name[0] == '.')
			continue;
		snprintf(sp, sizeof(sp), "/proc/%d/task/%s/stat", (int)pid, de->d_name);
		fd = open(sp, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue; /* exited meanwhile */
		r = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (r <= 0)
			continue;
		buf[r] = '\0';
		p = strrchr(buf, ')');
		ck_assert_ptr_nonnull(p);
		ck_assert_msg(p[2] != 't' && p[2] != 'T',
			      "thread %s of %d left in state %c", de->d_name, (int)pid,
			      p[2]);
		n++;
	}
	closedir(d);
	ck_assert_int_gt(n, 0);
}

/* A ctxdump target must outlive every dump, with no thread left stopped,
 * and then end by itself with status 0. */
static __attribute__((unused)) void
prof_child_finish(struct test_child *c, int timeout_ms)
{
	int st;

	prof_assert_running(c->pid);
	st = test_child_finish(c, timeout_ms);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "target did not exit normally (status 0x%x)", st);
}

/* prof_spawn()'s out_fd for a ctxdump with standard output closed. */
#define PROF_STDOUT_CLOSED (-2)

/* Start ctxdump with args (NULL-terminated) after the words of pre
 * (NULL-terminated, may be empty), up to 17 in all, as
 * test_ctxdump_argv() puts them; standard output to out_fd (-1: to
 * errfile too; PROF_STDOUT_CLOSED: closed), standard error to errfile;
 * returns once the child runs ctxdump. */
static __attribute__((unused)) pid_t
prof_spawn(const char *const *pre,
	   const char *const *args,
	   int out_fd,
	   const char *errfile)
{
	const char *words[18];
	char *argv[20];
	sigset_t all, old;
	pid_t pid;
	int n = 0;

	for (; *pre; pre++, n++) {
		ck_assert_int_lt(n, 17);
		words[n] = *pre;
	}
	for (; *args; args++, n++) {
		ck_assert_int_lt(n, 17);
		words[n] = *args;
	}
	words[n] = NULL;
	test_ctxdump_argv(argv, 20, words);
	/* Check's handlers for SIGINT and SIGTERM kill the whole test
	 * process group: a signal sent to the child before it runs ctxdump
	 * must meet the default action instead. */
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	pid = fork();
	if (pid == 0) {
		int fd = open(errfile, O_WRONLY | O_TRUNC | O_CLOEXEC);
		int nul = open("/dev/null", O_RDONLY);

		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		signal(SIGQUIT, SIG_DFL);
		signal(SIGALRM, SIG_DFL);
		signal(SIGPIPE, SIG_DFL);
		sigprocmask(SIG_SETMASK, &old, NULL);

		dup2(nul, 0);
		if (out_fd == PROF_STDOUT_CLOSED)
			close(1);
		else
			dup2(out_fd >= 0 ? out_fd : fd, 1);
		dup2(fd, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	ck_assert_int_ge(pid, 0);
	/* return once it runs ctxdump: a signal sent before the exec would
	 * meet a copy of this program (under valgrind, its emulation) */
	for (int i = 0; i < 20000; i++) {
		char path[64], comm[32] = "";
		ssize_t r;
		int fd;

		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			break; /* gone already */
		r = read(fd, comm, sizeof(comm) - 1);
		close(fd);
		if (r > 0 && strncmp(comm, "ctxdump", 7) == 0)
			break;
		usleep(500);
	}
	return pid;
}

/* Start `ctxdump record` with stdout and stderr to errfile. */
static __attribute__((unused)) pid_t
prof_record_start(const char *errfile, const char *const *args)
{
	return prof_spawn((const char *const[]){"record", NULL}, args, -1, errfile);
}

/* The TracerPid of thread tid of pid, -1 once it cannot be read. */
static __attribute__((unused)) pid_t
prof_tracer_of(pid_t pid, pid_t tid)
{
	char path[64], buf[4096], *p;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	if (test_read_small(path, buf, sizeof(buf)) < 0)
		return -1;
	p = strstr(buf, "\nTracerPid:");
	return p ? (pid_t)atoi(p + 11) : -1;
}

/* Wait until thread tid of pid is in state c (t: ptrace-stop, D: in
 * vfork()), until the deadline (test_now_ms()). */
static __attribute__((unused)) void
prof_wait_task_state(pid_t pid, pid_t tid, char c, long deadline)
{
	while (test_task_state(pid, tid) != c) {
		ck_assert_msg(test_now_ms() < deadline, "thread %d never in state %c",
			      (int)tid, c);
		usleep(1000);
	}
}

/* Wait (at most timeout_ms) for a recorder; returns its wait status. */
static __attribute__((unused)) int
prof_record_wait(pid_t pid, int timeout_ms)
{
	int st, waited = 0;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return st;
		ck_assert_int_eq(r, 0);
		if (waited > timeout_ms) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			ck_abort_msg("ctxdump record did not end within %d ms",
				     timeout_ms);
		}
		usleep(5000);
		waited += 5;
	}
}

/* A recorder's exit code (as prof_run() returns it) and its summary err
 * (run without -q): a whole recording, or one with a gap only where no
 * thread stopped in time (exit 1, "rounds skipped"), which a loaded
 * machine makes (ctxdump(1), EXIT STATUS), but no round failed. */
static __attribute__((unused)) bool
prof_record_exit_ok(int code, const char *err)
{
	/* "1 round skipped (...", "2 rounds skipped (..." */
	if (strstr(err, " failed ("))
		return false;
	return code == 0 || (code == 1 && strstr(err, " skipped (no thread stopped"));
}

/* The same for a recorder's wait status st. */
static __attribute__((unused)) bool
prof_record_status_ok(int st, const char *err)
{
	return WIFEXITED(st) && prof_record_exit_ok(WEXITSTATUS(st), err);
}

/* The count before what in a recorder's summary's "; N what" parts (err,
 * its standard error), or 0: "round" the rounds skipped (named before
 * failed ones), "time" the stops that timed out. */
static __attribute__((unused)) unsigned long
prof_summary_count(const char *err, const char *what)
{
	const char *p = strstr(err, "ctxdump record: threads stopped ");

	if (!p)
		p = strstr(err, "ctxdump record: no round completed");
	for (; p && (p = strstr(p, "; ")); p += 2) {
		unsigned long n;
		int len = 0;

		if (sscanf(p, "; %lu %n", &n, &len) == 1 && len > 0 &&
		    strncmp(p + len, what, strlen(what)) == 0)
			return n;
	}
	return 0;
}

/* Wait until a recording (recorder rec, its stderr in errfile) has its
 * first rounds on disk.  A recorder that ended first, or one that wrote
 * too little in time, fails the test with what it said. */
static __attribute__((unused)) void
prof_wait_file(
	const char *path, off_t min, int timeout_ms, pid_t rec, const char *errfile)
{
	struct stat st;
	int waited = 0, wst;

	while (stat(path, &st) != 0 || st.st_size < min) {
		pid_t r = waitpid(rec, &wst, WNOHANG);
		char said[1024] = "";
		int fd;

		if (r != rec && waited < timeout_ms) {
			usleep(5000);
			waited += 5;
			continue;
		}
		fd = open(errfile, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			ssize_t n = read(fd, said, sizeof(said) - 1);

			said[n > 0 ? n : 0] = '\0';
			close(fd);
		}
		if (r == rec)
			ck_abort_msg("ctxdump record ended (status %#x) before %s held "
				     "%lld bytes: %s",
				     wst, path, (long long)min, said);
		ck_abort_msg("%s stayed below %lld bytes (%lld) for %d ms: %s", path,
			     (long long)min,
			     (long long)(stat(path, &st) == 0 ? st.st_size : -1),
			     timeout_ms, said);
	}
}

/* Returns once the recording in path (by rec, its standard error in
 * errfile) has grown three times past its size now: a round whose threads
 * stopped after this call is on disk (each round is flushed whole; one
 * large round may take two writes).  It counts recorded rounds only: a
 * skipped round flushes nothing. */
static __attribute__((unused)) void
prof_wait_rounds(const char *path, int timeout_ms, pid_t rec, const char *errfile)
{
	struct stat st;
	int i;

	for (i = 0; i < 3; i++) {
		ck_assert_msg(stat(path, &st) == 0, "%s: %s", path, strerror(errno));
		prof_wait_file(path, st.st_size + 1, timeout_ms, rec, errfile);
	}
}

static __attribute__((unused)) char *
prof_slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	char *b;
	long n;

	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	b = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(b);
	ck_assert_int_eq(fread(b, 1, (size_t)n, f), n);
	b[n] = '\0';
	fclose(f);
	return b;
}

/* The next record of a recording (the file format of ctxdump(1): a
 * 16-byte header, then records of a u32 type | length << 8 and the
 * payload) at *p, before end: its type, payload and length; *p moves past
 * it.  False at the end, or where the file is cut short. */
static __attribute__((unused)) bool
prof_next_record(const unsigned char **p,
		 const unsigned char *end,
		 unsigned *type,
		 const unsigned char **payload,
		 size_t *len)
{
	const unsigned char *q = *p;
	uint32_t pre;

	if (end - q < 4)
		return false;
	pre = q[0] | q[1] << 8 | q[2] << 16 | (uint32_t)q[3] << 24;
	if ((size_t)(end - q - 4) < pre >> 8)
		return false; /* cut short */
	*type = pre & 0xff;
	*payload = q + 4;
	*len = pre >> 8;
	*p = q + 4 + *len;
	return true;
}

/* The varint (unsigned LEB128) at *q, before end; *q moves past it. */
static __attribute__((unused)) uint64_t
prof_varint(const unsigned char **q, const unsigned char *end)
{
	uint64_t v = 0;
	unsigned shift;

	for (shift = 0; *q < end && shift < 64; shift += 7) {
		v |= (uint64_t)(**q & 0x7f) << shift;
		if (*(*q)++ < 0x80)
			break;
	}
	return v;
}

/* How many of the intervals between the rounds of the recording in path
 * (and from its start to its first round) last min_ns or more.  Rounds
 * skipped before a round recorded lie in such an interval if their stops
 * waited min_ns: 500 ms (record.c CPU_WAIT_MS) for a thread that waited
 * for a CPU, as on a loaded machine, else 50 ms (STOP_TIMEOUT_MS) at
 * least.  A ROUND (type 10) begins with its time since the start, a
 * varint. */
static __attribute__((unused)) unsigned
prof_round_gaps(const char *path, uint64_t min_ns)
{
	unsigned char *b = (unsigned char *)prof_slurp(path);
	const unsigned char *p, *q, *end;
	uint64_t last = 0;
	unsigned gaps = 0, type;
	struct stat st;
	size_t len;

	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_ge(st.st_size, 16);
	end = b + st.st_size;
	for (p = b + 16; prof_next_record(&p, end, &type, &q, &len);) {
		uint64_t t;

		if (type != 10)
			continue;
		t = prof_varint(&q, p);
		gaps += t - last >= min_ns;
		last = t;
	}
	free(b);
	return gaps;
}

/* Record with args (-d for its end) to completion, its stderr in errf;
 * fails the test unless prof_record_status_ok().  Returns what it said
 * (malloc'd), its wait status in *st. */
static __attribute__((unused)) char *
prof_record_said(const char *errf, const char *const *args, int *st)
{
	char *err;

	*st = prof_record_wait(prof_record_start(errf, args), 30000);
	err = prof_slurp(errf);
	ck_assert_msg(prof_record_status_ok(*st, err), "status 0x%x: %s", *st, err);
	return err;
}

static __attribute__((unused)) void
prof_record_run(const char *errf, const char *const *args)
{
	int st;

	free(prof_record_said(errf, args, &st));
}

/* Ctrl-Z to a recorder (its standard error in errfile): returns once it
 * is suspended (then SIGCONT it).  One that ended instead fails the test
 * with what it said. */
static __attribute__((unused)) void
prof_record_suspend(pid_t pid, const char *errfile)
{
	int st;

	ck_assert_int_eq(kill(pid, SIGTSTP), 0);
	ck_assert_int_eq(waitpid(pid, &st, WUNTRACED), pid);
	if (!WIFSTOPPED(st) || WSTOPSIG(st) != SIGTSTP) {
		char said[2048] = "";
		int fd = open(errfile, O_RDONLY | O_CLOEXEC);

		if (fd >= 0) {
			ssize_t n = read(fd, said, sizeof(said) - 1);

			said[n > 0 ? n : 0] = '\0';
			close(fd);
		}
		ck_abort_msg("ctxdump record %s (status %#x) instead of stopping on "
			     "SIGTSTP: %s",
			     WIFEXITED(st) ? "exited" : "was killed", st, said);
	}
}

/* Ends the recording by pid with SIGINT: it must exit 0, or 1 for rounds
 * skipped on a loaded machine (prof_record_status_ok()). */
static __attribute__((unused)) void
prof_record_stop(pid_t pid, const char *errf, int timeout_ms)
{
	char *err;
	int st;

	ck_assert_int_eq(kill(pid, SIGINT), 0);
	st = prof_record_wait(pid, timeout_ms);
	err = prof_slurp(errf);
	ck_assert_msg(prof_record_status_ok(st, err), "status 0x%x: %s", st, err);
	free(err);
}

/* Record with args (no -d) until rounds are on disk in file, then end it
 * with SIGINT (prof_record_stop()): a recording with samples, however
 * many rounds a loaded machine made the recorder skip (a short -d could
 * end before any round was recorded). */
static __attribute__((unused)) void
prof_record_rounds(const char *file,
		   const char *errf,
		   const char *const *args,
		   int timeout_ms)
{
	pid_t rec = prof_record_start(errf, args);

	/* the first round recorded (the file replaced by the recording) */
	prof_wait_file(file, 64, timeout_ms, rec, errf);
	prof_wait_rounds(file, timeout_ms, rec, errf);
	prof_record_stop(rec, errf, timeout_ms);
}

/* prof_record_stop(), then its files are removed. */
static __attribute__((unused)) void
prof_record_end(pid_t pid, const char *file, const char *errf, int timeout_ms)
{
	prof_record_stop(pid, errf, timeout_ms);
	unlink(file);
	unlink(errf);
}

/* Threads that wait for a CPU longer than a round's stop limit: pinned
 * to one CPU next to a busy loop there (the hog, another process) that
 * runs SCHED_FIFO, 100 ms at a time with a pause of 1 ms: a thread that
 * spins there waits for the pause, up to 100 ms, whatever else the
 * machine runs (other tasks move to other CPUs).  Without the privilege
 * for SCHED_FIFO the hog spins at nice 0 and the threads get nice 15,
 * which the scheduler weighs 28 times less: waits of some 50-500 ms on
 * an idle machine, more on a loaded one.  The spinners end with the test
 * (PR_SET_PDEATHSIG) if it ends first. */

/* The last CPU the test may use. */
static __attribute__((unused)) int
prof_last_cpu(void)
{
	cpu_set_t cpus;
	int cpu;

	ck_assert_int_eq(sched_getaffinity(0, sizeof(cpus), &cpus), 0);
	for (cpu = CPU_SETSIZE - 1; cpu > 0 && !CPU_ISSET(cpu, &cpus); cpu--)
		;
	return cpu;
}

/* Fork a process that spins on cpu at niceness nice, once it said so on
 * a pipe; with hog, the hog (*rt: it runs SCHED_FIFO). */
static __attribute__((unused)) pid_t
prof_spinner_(int cpu, int nice, bool hog, bool *rt)
{
	pid_t parent = getpid(), pid;
	int p[2];
	char c;

	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		cpu_set_t one;
		volatile unsigned long n = 0;
		struct sched_param fifo = {.sched_priority = 1};
		bool fifo_ok = false;

		if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
			_exit(1);
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		if (hog)
			fifo_ok = sched_setscheduler(0, SCHED_FIFO, &fifo) == 0;
		/* the hog's nice 0 needs root when the test runs niced; else
		 * the hog keeps the test's niceness */
		if (sched_setaffinity(0, sizeof(one), &one) != 0 ||
		    (setpriority(PRIO_PROCESS, 0, nice) != 0 && nice > 0) ||
		    write(p[1], fifo_ok ? "f" : "r", 1) != 1)
			_exit(1);
		for (;;) {
			struct timespec t0, t, pause = {0, 1000000};
			long ns;

			clock_gettime(CLOCK_MONOTONIC, &t0);
			do {
				n++;
				clock_gettime(CLOCK_MONOTONIC, &t);
				ns = (t.tv_sec - t0.tv_sec) * 1000000000L + t.tv_nsec -
				     t0.tv_nsec;
			} while (hog && ns < 100000000L);
			if (hog)
				nanosleep(&pause, NULL);
		}
	}
	close(p[1]);
	ck_assert_msg(read(p[0], &c, 1) == 1, "spinner %d did not start", (int)pid);
	close(p[0]);
	if (rt)
		*rt = c == 'f';
	return pid;
}

static __attribute__((unused)) pid_t
prof_spinner(int cpu, int nice)
{
	return prof_spinner_(cpu, nice, false, NULL);
}

/* The hog on cpu; returns the niceness for the threads it is to starve. */
static __attribute__((unused)) pid_t
prof_hog(int cpu, int *nice)
{
	bool rt = false;
	pid_t pid = prof_spinner_(cpu, 0, true, &rt);

	*nice = rt ? 0 : 15;
	return pid;
}

/* Thread tid (of another process) to cpu, at niceness nice. */
static __attribute__((unused)) void
prof_starve_thread(pid_t tid, int cpu, int nice)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	ck_assert_int_eq(sched_setaffinity(tid, sizeof(one), &one), 0);
	ck_assert_int_eq(setpriority(PRIO_PROCESS, (id_t)tid, nice), 0);
}

/* A target whose only thread spins, and its hog. */
struct prof_starved {
	pid_t target, hog;
};

static __attribute__((unused)) void
prof_starved_start(struct prof_starved *s)
{
	int cpu = prof_last_cpu(), nice;

	s->hog = prof_hog(cpu, &nice);
	s->target = prof_spinner(cpu, nice);
}

/* No thread of the target left stopped; both killed and collected. */
static __attribute__((unused)) void
prof_starved_end(struct prof_starved *s)
{
	prof_assert_running(s->target);
	kill(s->target, SIGKILL);
	kill(s->hog, SIGKILL);
	ck_assert_int_eq(waitpid(s->target, NULL, 0), s->target);
	ck_assert_int_eq(waitpid(s->hog, NULL, 0), s->hog);
}
