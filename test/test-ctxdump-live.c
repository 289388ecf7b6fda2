/* SPDX-License-Identifier: Apache-2.0 */
/* ctxdump against a live process and a live output (helpers/exits.c,
 * helpers/late-dlopen.c):
 *  - output nobody reads (a pipe to a pager that waits, a slow ssh):
 *    a thread that did not stop in time (blocked in vfork()) is still
 *    seized with its stop pending after the round, or after the one-shot
 *    dump's stop; it is let go as soon as it stops, even while ctxdump is
 *    blocked writing (`record -o -` and `ctxdump -s -j`);
 *  - SIGINT to `record -o -` blocked on such a pipe: once the reader
 *    reads again the recording ends complete (exit 0, or 1 for rounds a
 *    loaded machine made it skip: prof_record_status_ok()); on a pipe nobody
 *    ever reads it still ends (exit 2, "incomplete"); on a closed pipe
 *    the summary counts only what was written (0 bytes);
 *  - a first SIGINT taken inside a stop window (one that waits for the
 *    vfork()ing thread) counts as one: the second SIGINT while the output
 *    waits for its reader gives up at once, not after the 3 s grace;
 *  - `record -o FILE` that fails (the target is traced already) leaves an
 *    earlier FILE as it was and no temporary file, says who traces the
 *    target; one that works replaces FILE, keeping its mode and a symbolic
 *    link to it;
 *  - `record -o FILE` writes FILE in place when a new file would lose its
 *    other hard links or (as root) its owner, and when FILE cannot be
 *    replaced (bind-mounted: rename() fails with EBUSY): the recording is
 *    complete there, exit 0 (or 1 as above), no temporary file is left;
 *  - a library dlopen()ed while recording, shortly after another one:
 *    its frames get their symbols once ctxdump reads the module list again;
 *  - `record -V` prints the version line of `ctxdump -V`.
 * No thread may be left stopped. */
#include "test-prof.h"

#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/ptrace.h>

#define TIMEOUT_MS 30000

struct target {
	struct test_child c;
	pid_t pid, vfork;
};

/* helpers/exits with n workers (and a vfork()ing thread with vfork). */
static void
target_start(struct target *t, unsigned n, bool vfork)
{
	char path[PATH_MAX], count[16], line[512];
	char *argv[] = {(char *)prof_helper("exits", path, sizeof(path)),
			vfork ? "--vfork" : count, vfork ? count : NULL, NULL};

	memset(t, 0, sizeof(*t));
	snprintf(count, sizeof(count), "%u", n);
	test_child_start(&t->c, argv, NULL, false);
	for (;;) {
		test_child_readline(&t->c, line, sizeof(line), TIMEOUT_MS);
		if (strncmp(line, "VFORK ", 6) == 0)
			t->vfork = (pid_t)atoi(line + 6);
		else if (strncmp(line, "READY ", 6) == 0)
			break;
	}
	t->pid = (pid_t)atoi(line + 6);
	ck_assert_int_eq(t->pid, t->c.pid);
	ck_assert(!vfork || t->vfork > 0);
}

/* A pipe of one page (F_SETPIPE_SZ rounds up to it): a few rounds fill it. */
static void
small_pipe(int p[2])
{
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	ck_assert_int_ge(fcntl(p[1], F_SETPIPE_SZ, 4096), 4096);
}

/* Until what ctxdump wrote into the pipe of rfd stops growing for 300 ms:
 * it is blocked on its output.  Returns the bytes in the pipe. */
static int
wait_blocked(int rfd)
{
	long deadline = test_now_ms() + TIMEOUT_MS, since = test_now_ms();
	int last = -1, n = 0;

	for (;;) {
		ck_assert_int_eq(ioctl(rfd, FIONREAD, &n), 0);
		if (n != last) {
			last = n;
			since = test_now_ms();
		} else if (n > 0 && test_now_ms() - since >= 300) {
			return n;
		}
		ck_assert_msg(test_now_ms() < deadline,
			      "output never blocked (%d bytes)", n);
		usleep(5000);
	}
}

/* Read rfd to its end into file (if not NULL) while ctxdump pid runs;
 * returns its wait status. */
static int
drain(int rfd, pid_t pid, const char *file)
{
	FILE *f = file ? fopen(file, "we") : NULL;
	char buf[65536];
	ssize_t r;
	int st;

	ck_assert(!file || f);
	while ((r = read(rfd, buf, sizeof(buf))) > 0)
		if (f)
			ck_assert_int_eq(fwrite(buf, 1, (size_t)r, f), r);
	if (f)
		fclose(f);
	st = prof_record_wait(pid, TIMEOUT_MS);
	return st;
}

/* The vfork()ing thread is seized with its stop pending (it missed a
 * round's deadline) when `record -o -` blocks on a pipe nobody reads;
 * its vfork() ends (the child sleeps 2 s): it must run on. */
START_TEST(blocked_record_lets_late_go)
{
	char arg[16], errf[PATH_MAX], *err;
	/* not -q: what a loaded machine makes it skip is said (exit 1) */
	const char *args[] = {"record", "-F", "500", "-o", "-", arg, NULL};
	struct target t;
	pid_t pid;
	int p[2], st;

	target_start(&t, 3, true);
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);
	prof_tmpfile(errf, sizeof(errf), "live-blk-err");
	small_pipe(p);
	pid = prof_spawn((const char *const[]){NULL}, args, p[1], errf);
	close(p[1]);
	wait_blocked(p[0]);
	/* in vfork(), so seized late by a round if it ever met one */
	prof_wait_task_state(t.pid, t.vfork, 'D', test_now_ms() + TIMEOUT_MS);
	/* past the end of that vfork(): a thread still held is stopped */
	usleep(2500000);
	prof_assert_running(t.pid);
	ck_assert_int_eq(kill(pid, SIGINT), 0);
	st = drain(p[0], pid, NULL);
	close(p[0]);
	err = prof_slurp(errf);
	ck_assert_msg(prof_record_status_ok(st, err), "status 0x%x: %s", st, err);
	free(err);
	prof_child_finish(&t.c, TIMEOUT_MS);
	unlink(errf);
}
END_TEST

/* The same for the one-shot dump: the vfork()ing thread misses the stop
 * and the output (stacks, JSON, more than the pipe holds) blocks. */
START_TEST(blocked_dump_lets_late_go)
{
	char arg[16], errf[PATH_MAX], *err;
	const char *args[] = {"-s", "-j", "--stop-timeout", "100", arg, NULL};
	struct target t;
	pid_t pid;
	int p[2], st;

	target_start(&t, 8, true);
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);
	prof_tmpfile(errf, sizeof(errf), "live-dump-err");
	small_pipe(p);
	prof_wait_task_state(t.pid, t.vfork, 'D', test_now_ms() + TIMEOUT_MS);
	pid = prof_spawn((const char *const[]){NULL}, args, p[1], errf);
	close(p[1]);
	ck_assert_int_eq(wait_blocked(p[0]), 4096);
	usleep(2500000);
	prof_assert_running(t.pid);
	st = drain(p[0], pid, NULL);
	close(p[0]);
	err = prof_slurp(errf);
	/* 1: the vfork()ing thread did not stop in time */
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) <= 1, "status 0x%x: %s", st,
		      err);
	free(err);
	prof_child_finish(&t.c, TIMEOUT_MS);
	unlink(errf);
}
END_TEST

/* SIGINT while `record -o -` waits for its reader: it ends cleanly once
 * the reader reads; with a reader that never reads it still ends. */
START_TEST(sigint_blocked_output)
{
	char arg[16], errf[PATH_MAX], file[PATH_MAX], *out, *err;
	const char *args[] = {"record", "-F", "500", "-o", "-", arg, NULL};
	struct target t;
	pid_t pid;
	int p[2], st;

	target_start(&t, 3, false);
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);
	prof_tmpfile(errf, sizeof(errf), "live-int-err");
	prof_tmpfile(file, sizeof(file), "live-int-prof");

	/* the reader comes back */
	small_pipe(p);
	pid = prof_spawn((const char *const[]){NULL}, args, p[1], errf);
	close(p[1]);
	wait_blocked(p[0]);
	ck_assert_int_eq(kill(pid, SIGINT), 0);
	usleep(100000);
	st = drain(p[0], pid, file);
	close(p[0]);
	err = prof_slurp(errf);
	ck_assert_msg(prof_record_status_ok(st, err), "status 0x%x: %s", st, err);
	free(err);
	prof_assert_running(t.pid);
	st = prof_run(&out, &err, "report", file, NULL);
	ck_assert_msg(st == 0, "report exit %d: %s", st, err);
	ck_assert_msg(strstr(out, "Ended: interrupted"), "%s", out);
	free(out);
	free(err);

	/* it never does: the recording ends all the same, incomplete */
	small_pipe(p);
	pid = prof_spawn((const char *const[]){NULL}, args, p[1], errf);
	close(p[1]);
	wait_blocked(p[0]);
	ck_assert_int_eq(kill(pid, SIGINT), 0);
	st = prof_record_wait(pid, TIMEOUT_MS);
	close(p[0]);
	err = prof_slurp(errf);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "status 0x%x: %s", st,
		      err);
	ck_assert_msg(strstr(err, "incomplete"), "%s", err);
	free(err);

	/* a reader that is gone: nothing was written, and the summary says so */
	small_pipe(p);
	close(p[0]);
	pid = prof_spawn((const char *const[]){NULL}, args, p[1], errf);
	close(p[1]);
	st = prof_record_wait(pid, TIMEOUT_MS);
	err = prof_slurp(errf);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "status 0x%x: %s", st,
		      err);
	ck_assert_msg(strstr(err, "Broken pipe"), "%s", err);
	ck_assert_msg(strstr(err, "not all of it written to standard output (0 bytes)"),
		      "%s", err);
	free(err);
	prof_child_finish(&t.c, TIMEOUT_MS);
	unlink(errf);
	unlink(file);
}
END_TEST

/* SIGINT inside a stop window is taken by the window's wait, not by the
 * handler: it must count all the same, so that a second SIGINT while the
 * rest of the recording waits for its reader ends the recording at once.
 * The window is one that waits for the vfork()ing thread (50 ms): the
 * main thread is in ptrace-stop meanwhile.  Then the pipe is filled (by
 * us: ctxdump writes nothing inside a window) and SIGINT sent; once the
 * window is over, SIGINT again.  The reader comes back only after 2.5 s,
 * before the 3 s grace is over: a recorder that took the second SIGINT
 * for the first would finish the recording then (exit 0). */
START_TEST(second_sigint_in_window)
{
	char arg[16], errf[PATH_MAX], buf[4096], *err;
	const char *args[] = {"record", "-q", "-F", "500", "-o", "-", arg, NULL};
	struct target t;
	long deadline;
	pid_t pid, r;
	int p[2], wfd, st, size, n, held = 0;

	target_start(&t, 2, true);
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);
	prof_tmpfile(errf, sizeof(errf), "live-int2-err");
	small_pipe(p);
	size = fcntl(p[1], F_GETPIPE_SZ);
	ck_assert_int_ge(size, 4096);
	wfd = fcntl(p[1], F_DUPFD_CLOEXEC, 0);
	ck_assert_int_ge(wfd, 0);
	ck_assert_int_eq(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
	pid = prof_spawn((const char *const[]){NULL}, args, p[1], errf);
	close(p[1]);
	deadline = test_now_ms() + TIMEOUT_MS;
	/* read what comes until a window waits for the vfork()ing thread
	 * (seen twice, 1 ms apart: not one of the short ones) */
	for (;;) {
		while (read(p[0], buf, sizeof(buf)) > 0)
			;
		if (test_task_state(t.pid, t.vfork) == 'D' &&
		    test_task_state(t.pid, t.pid) == 't')
			held++;
		else
			held = 0;
		if (held == 2)
			break;
		ck_assert_msg(test_now_ms() < deadline, "no stop window met");
		usleep(1000);
	}
	while (read(p[0], buf, sizeof(buf)) > 0)
		;
	ck_assert_int_eq(ioctl(p[0], FIONREAD, &n), 0);
	memset(buf, 0, sizeof(buf));
	for (n = size - n; n > 0; n -= (int)r) {
		r = write(wfd, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf));
		ck_assert_int_gt(r, 0);
	}
	close(wfd);
	ck_assert_int_eq(kill(pid, SIGINT), 0);
	/* the window ends (the signal was taken), then the second one */
	while (test_task_state(t.pid, t.pid) == 't') {
		ck_assert_msg(test_now_ms() < deadline, "window never ended");
		usleep(200);
	}
	ck_assert_int_eq(kill(pid, SIGINT), 0);
	deadline = test_now_ms() + 2500;
	while ((r = waitpid(pid, &st, WNOHANG)) == 0 && test_now_ms() < deadline)
		usleep(5000);
	ck_assert_int_ge(r, 0);
	if (r == 0) {
		ck_assert_int_eq(fcntl(p[0], F_SETFL, 0), 0);
		st = drain(p[0], pid, NULL);
	}
	close(p[0]);
	err = prof_slurp(errf);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "status 0x%x: %s", st,
		      err);
	ck_assert_msg(strstr(err, "incomplete"), "%s", err);
	free(err);
	prof_child_finish(&t.c, TIMEOUT_MS);
	unlink(errf);
}
END_TEST

/* Entries of dir whose name starts with prefix. */
static unsigned
count_prefixed(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	unsigned n = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)) != NULL)
		n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return n;
}

/* path holds a recording and no temporary file of prefix is left in
 * /tmp; with report, `ctxdump report` reads it to its end. */
static void
assert_recorded(const char *path, const char *prefix, bool report)
{
	char *body = prof_slurp(path), *out, *err;
	int r;

	ck_assert_int_eq(memcmp(body, "CTXDPROF", 8), 0);
	free(body);
	ck_assert_uint_eq(count_prefixed("/tmp", prefix), 0);
	if (!report)
		return;
	r = prof_run(&out, &err, "report", path, NULL);
	ck_assert_msg(r == 0, "report exit %d: %s", r, err);
	ck_assert_msg(strstr(out, "Ended: duration reached"), "%s", out);
	free(out);
	free(err);
}

/* The test traces t's main thread itself (the first one ctxdump seizes):
 * ctxdump's PTRACE_SEIZE fails with EPERM. */
static void
trace_target(const struct target *t)
{
	ck_assert_int_eq(ptrace(PTRACE_SEIZE, t->pid, NULL, NULL), 0);
}

/* ... and lets it go again: a seized thread is detached from a stop. */
static void
untrace_target(const struct target *t)
{
	int ws;

	ck_assert_int_eq(ptrace(PTRACE_INTERRUPT, t->pid, NULL, NULL), 0);
	ck_assert_int_eq(waitpid(t->pid, &ws, __WALL), t->pid);
	ck_assert(WIFSTOPPED(ws));
	ck_assert_int_eq(ptrace(PTRACE_DETACH, t->pid, NULL, NULL), 0);
}

/* EPERM: record's hint names the tracer, as the dump's does. */
START_TEST(eperm_names_tracer)
{
	char arg[16], want[64], *out, *err;
	struct target t;
	int r;

	target_start(&t, 1, false);
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);
	trace_target(&t);
	snprintf(want, sizeof(want), "already being traced by pid %d", (int)getpid());
	r = prof_run(&out, &err, "record", "-q", "-o", "/dev/null", arg, NULL);
	ck_assert_msg(r == 2, "exit %d: %s", r, err);
	ck_assert_msg(strstr(err, "cannot stop process"), "%s", err);
	ck_assert_msg(strstr(err, want), "%s", err);
	free(out);
	free(err);
	r = prof_run(&out, &err, arg, NULL);
	ck_assert_msg(r == 2, "exit %d: %s", r, err);
	ck_assert_msg(strstr(err, want), "%s", err);
	free(out);
	free(err);
	untrace_target(&t);
	prof_child_finish(&t.c, TIMEOUT_MS);
}
END_TEST

/* A record that cannot attach leaves the earlier recording alone; one
 * that works replaces it. */
START_TEST(failed_record_keeps_file)
{
	static const char old[] = "an earlier recording\n";
	char arg[16], file[PATH_MAX], link[PATH_MAX], prefix[PATH_MAX];
	char *out, *err, *body;
	struct target t;
	struct stat st;
	int fd, r;

	target_start(&t, 1, false);
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);
	prof_tmpfile(file, sizeof(file), "live-keep");
	fd = open(file, O_WRONLY | O_TRUNC | O_CLOEXEC);
	ck_assert_int_eq(write(fd, old, sizeof(old) - 1), (ssize_t)sizeof(old) - 1);
	close(fd);
	ck_assert_int_eq(chmod(file, 0640), 0);
	snprintf(prefix, sizeof(prefix), ".%s.", strrchr(file, '/') + 1);

	/* nothing can be recorded */
	trace_target(&t);
	r = prof_run(&out, &err, "record", "-q", "-o", file, arg, NULL);
	ck_assert_msg(r == 2, "exit %d: %s", r, err);
	free(out);
	free(err);
	body = prof_slurp(file);
	ck_assert_str_eq(body, old);
	free(body);
	ck_assert_int_eq(stat(file, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0640);
	ck_assert_uint_eq(count_prefixed("/tmp", prefix), 0);
	/* the summary says so (old: "not all of it written to FILE") */
	r = prof_run(&out, &err, "record", "-o", file, arg, NULL);
	ck_assert_msg(r == 2, "exit %d: %s", r, err);
	ck_assert_msg(strstr(err, "nothing recorded: ") &&
			      strstr(err, " left unchanged") &&
			      !strstr(err, "written to"),
		      "%s", err);
	free(out);
	free(err);
	body = prof_slurp(file);
	ck_assert_str_eq(body, old);
	free(body);
	unlink(file);
	r = prof_run(&out, &err, "record", "-o", file, arg, NULL);
	ck_assert_msg(r == 2, "exit %d: %s", r, err);
	ck_assert_msg(strstr(err, "nothing recorded: ") && strstr(err, " not created"),
		      "%s", err);
	free(out);
	free(err);
	ck_assert_int_eq(access(file, F_OK), -1);
	ck_assert_uint_eq(count_prefixed("/tmp", prefix), 0);
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	ck_assert_int_eq(write(fd, old, sizeof(old) - 1), (ssize_t)sizeof(old) - 1);
	close(fd);
	ck_assert_int_eq(chmod(file, 0640), 0);
	untrace_target(&t);

	/* through a symbolic link: the link stays, the file is replaced */
	prof_tmpfile(link, sizeof(link), "live-link");
	unlink(link);
	ck_assert_int_eq(symlink(file, link), 0);
	r = prof_run(&out, &err, "record", "-d", "0.2", "-o", link, arg, NULL);
	ck_assert_msg(prof_record_exit_ok(r, err), "exit %d: %s", r, err);
	free(out);
	free(err);
	ck_assert_int_eq(lstat(link, &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	ck_assert_int_eq(stat(file, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0640);
	assert_recorded(link, prefix, true);
	prof_child_finish(&t.c, TIMEOUT_MS);
	unlink(link);
	unlink(file);
}
END_TEST

/* FILE with another hard link, and (as root) FILE owned by another
 * user: written in place, the same inode, its owner kept. */
START_TEST(record_keeps_inode)
{
	char arg[16], file[PATH_MAX], hard[PATH_MAX], prefix[PATH_MAX];
	char *out, *err;
	struct stat st0, st;
	struct target t;
	int r;

	target_start(&t, 1, false);
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);
	prof_tmpfile(file, sizeof(file), "live-inode");
	prof_tmpfile(hard, sizeof(hard), "live-inode-link");
	snprintf(prefix, sizeof(prefix), ".%s.", strrchr(file, '/') + 1);
	ck_assert_int_eq(unlink(hard), 0);
	ck_assert_int_eq(link(file, hard), 0);
	ck_assert_int_eq(stat(file, &st0), 0);
	r = prof_run(&out, &err, "record", "-d", "0.2", "-o", file, arg, NULL);
	ck_assert_msg(prof_record_exit_ok(r, err), "exit %d: %s", r, err);
	free(out);
	free(err);
	ck_assert_int_eq(stat(file, &st), 0);
	ck_assert_uint_eq(st.st_ino, st0.st_ino);
	ck_assert_uint_eq(st.st_nlink, 2);
	assert_recorded(hard, prefix, false);
	unlink(hard);

	if (geteuid() == 0) {
		/* root recording into a user's file: it stays the user's */
		ck_assert_int_eq(chown(file, 65534, 65534), 0);
		ck_assert_int_eq(truncate(file, 0), 0);
		ck_assert_int_eq(stat(file, &st0), 0);
		r = prof_run(&out, &err, "record", "-d", "0.2", "-o", file, arg, NULL);
		ck_assert_msg(prof_record_exit_ok(r, err), "exit %d: %s", r, err);
		free(out);
		free(err);
		ck_assert_int_eq(stat(file, &st), 0);
		ck_assert_uint_eq(st.st_ino, st0.st_ino);
		ck_assert_uint_eq(st.st_uid, 65534);
		ck_assert_uint_eq(st.st_gid, 65534);
		assert_recorded(file, prefix, false);
	}
	prof_child_finish(&t.c, TIMEOUT_MS);
	unlink(file);
}
END_TEST

/* FILE is a bind mount (as in a container): rename() over it fails with
 * EBUSY, so the recording goes into FILE in place; it ends complete with
 * exit 0 (or 1 for a skipped round: prof_record_status_ok()) and no
 * temporary file.  Needs a mount namespace of its own (root). */
START_TEST(record_bind_mounted_file)
{
	static const char old[] = "an earlier recording\n";
	char arg[16], file[PATH_MAX], src[PATH_MAX], errf[PATH_MAX], prefix[PATH_MAX];
	char *err, *body;
	struct target t;
	pid_t pid;
	int st;

	if (geteuid() != 0) {
		fprintf(stderr, "record_bind_mounted_file: not root, not run\n");
		return;
	}
	target_start(&t, 1, false);
	snprintf(arg, sizeof(arg), "%d", (int)t.pid);
	prof_tmpfile(file, sizeof(file), "live-bind");
	prof_tmpfile(src, sizeof(src), "live-bind-src");
	prof_tmpfile(errf, sizeof(errf), "live-bind-err");
	snprintf(prefix, sizeof(prefix), ".%s.", strrchr(file, '/') + 1);
	{
		FILE *f = fopen(file, "we");

		ck_assert_ptr_nonnull(f);
		fputs(old, f);
		fclose(f);
	}
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char *argv[] = {(char *)test_ctxdump_path(),
				"record",
				"-d",
				"0.3",
				"-o",
				file,
				arg,
				NULL};
		int fd = open(errf, O_WRONLY | O_TRUNC | O_CLOEXEC);

		if (fd < 0 || unshare(CLONE_NEWNS) != 0 ||
		    mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
		    mount(src, file, NULL, MS_BIND, NULL) != 0)
			_exit(125);
		dup2(fd, 1);
		dup2(fd, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	st = prof_record_wait(pid, TIMEOUT_MS);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 125) {
		fprintf(stderr,
			"record_bind_mounted_file: no mount namespace, not run\n");
	} else {
		err = prof_slurp(errf);
		ck_assert_msg(prof_record_status_ok(st, err), "status 0x%x: %s", st,
			      err);
		free(err);
		/* what FILE showed inside the namespace */
		body = prof_slurp(file);
		ck_assert_str_eq(body, old);
		free(body);
		assert_recorded(src, prefix, true);
	}
	prof_child_finish(&t.c, TIMEOUT_MS);
	unlink(file);
	unlink(src);
	unlink(errf);
}
END_TEST

/* Two libraries dlopen()ed 300 ms apart while recording: the first one's
 * unknown addresses make ctxdump read the module list again, the second
 * one comes before it may read it once more.  Both get their symbols. */
START_TEST(late_library_frames)
{
	char path[PATH_MAX], arg[16], file[PATH_MAX], errf[PATH_MAX], line[256];
	char *argv[] = {(char *)prof_helper("late-dlopen", path, sizeof(path)),
			(char *)test_env_path("HELPER_DIR"), NULL};
	/* not -q: what a loaded machine makes it skip is said (exit 1) */
	const char *args[] = {"-F", "100", "-d", "3", "-o", file, arg, NULL};
	struct test_child c;
	char *out, *err;
	pid_t pid;
	int st;

	test_child_start(&c, argv, NULL, false);
	test_child_expect(&c, "READY ", line, sizeof(line), TIMEOUT_MS);
	snprintf(arg, sizeof(arg), "%d", atoi(line + 6));
	prof_tmpfile(file, sizeof(file), "live-dl");
	prof_tmpfile(errf, sizeof(errf), "live-dl-err");
	unlink(file);
	pid = prof_record_start(errf, args);
	prof_wait_file(file, 64, TIMEOUT_MS, pid, errf);
	test_child_send(&c, "load\n");
	test_child_expect(&c, "LOADED", line, sizeof(line), TIMEOUT_MS);
	st = prof_record_wait(pid, TIMEOUT_MS);
	err = prof_slurp(errf);
	ck_assert_msg(prof_record_status_ok(st, err), "status 0x%x: %s", st, err);
	free(err);
	st = prof_run(&out, &err, "report", "--folded", file, NULL);
	ck_assert_msg(st == 0, "report exit %d: %s", st, err);
	ck_assert_msg(strstr(out, ";late_a;"), "%s", out);
	ck_assert_msg(strstr(out, ";late_b;"), "%s", out);
	free(out);
	free(err);
	prof_child_finish(&c, TIMEOUT_MS);
	unlink(file);
	unlink(errf);
}
END_TEST

START_TEST(record_version)
{
	char *out, *err, *vout, *verr;

	ck_assert_int_eq(prof_run(&vout, &verr, "-V", NULL), 0);
	ck_assert_ptr_nonnull(strstr(vout, "ctxdump from ctxshim "));
	ck_assert_int_eq(prof_run(&out, &err, "record", "-V", NULL), 0);
	ck_assert_str_eq(out, vout);
	free(out);
	free(err);
	ck_assert_int_eq(prof_run(&out, &err, "record", "--version", NULL), 0);
	ck_assert_str_eq(out, vout);
	free(out);
	free(err);
	free(vout);
	free(verr);
}
END_TEST

TEST_SUITE(ctxdump_live_suite)
{
	Suite *s = suite_create("ctxdump-live");
	TCase *tc = tcase_create("live");

	if (access("/proc/self/task", R_OK) != 0)
		test_skip("no /proc");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, blocked_record_lets_late_go);
	tcase_add_test(tc, blocked_dump_lets_late_go);
	tcase_add_test(tc, sigint_blocked_output);
	tcase_add_test(tc, second_sigint_in_window);
	tcase_add_test(tc, eperm_names_tracer);
	tcase_add_test(tc, failed_record_keeps_file);
	tcase_add_test(tc, record_keeps_inode);
	tcase_add_test(tc, record_bind_mounted_file);
	tcase_add_test(tc, late_library_frames);
	tcase_add_test(tc, record_version);
	suite_add_tcase(s, tc);
	return s;
}
