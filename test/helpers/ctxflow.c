/* SPDX-License-Identifier: Apache-2.0 */
/* A program with no tracing code whose work moves between threads,
 * coroutines and processes, for the "context follows the work" tests
 * (test/test-preload-flow.c, test/test-ctxdump-flow.c).  Started with
 * TRACEPARENT, its main thread has a context (the shim's environment
 * carrier); the "early" thread, started from .preinit_array before any
 * constructor (the shim's included), has none.  Each place the work runs
 * prints what it sees of its own thread's context (ctxobs.h).
 *
 *   ctxflow worker     main starts a worker that blocks: READY <pid> <main>
 *                      <worker>; "release" on stdin ends the worker
 *                      (JOINED), then wait for stdin EOF
 *   ctxflow exits      threads ending by return, pthread_exit, cancellation
 *                      and thrd_exit, and a thread started by a library's
 *                      constructor (libflowctor.so) before the shim's:
 *                      START/EXIT lines (EXIT is printed by a
 *                      thread-specific-data destructor that runs after the
 *                      shim's)
 *   ctxflow churn N    N threads created (half by a thread with a context,
 *                      half by one without) and ended in batches; READY
 *                      first, RESULT with the mismatches and RSS last
 *   ctxflow fork KIND  KIND = main (fork on main), early (fork on the early
 *                      thread), _Fork (on main); FORKING <pid>, then a
 *                      "fork" line on stdin; CHILD/PARENT lines, both
 *                      wait for stdin EOF
 *   ctxflow spawn      vfork+exec, posix_spawn, system, popen on main; each
 *                      must leave main's context as it was
 *   ctxflow exec HOW ENV   EXEC <main's context>, then exec "ctxflow probe"
 *                      with execve, execv, …, or run it with posix_spawn
 *                      or posix_spawnp and wait; ENV = keep (environment as
 *                      is), clear (only CTXFLOW=1), other (CTXFLOW=1 and
 *                      LD_PRELOAD=libm), fork or vfork (environment as is,
 *                      the exec in a fork() or vfork() child, waited for),
 *                      chdir (environment as is, after chdir("/"), as a
 *                      daemon's)
 *   ctxflow execfail   an exec that fails must leave environ and errno alone
 *   ctxflow probe      PROBE shim=<0|1> preload=<LD_PRELOAD> …, then
 *                      PROBEENV tp=<TRACEPARENT> ts=<TRACESTATE> n=<how
 *                      many of each the environment has> pid=<own|other|->
 *                      (CTXSHIM_TRACEPARENT_PID or _PPID: this
 *                      process's or not)
 *   ctxflow ucontext   coroutines made on main and on the early thread,
 *                      interleaved by schedulers on both threads
 *   ctxflow ucontext-many N   N coroutines, more than the shim's table holds
 *   ctxflow ucontext-link   LINK <who> <ctx> from coroutine A (made on
 *                      main), from B (made on the early thread), which A's
 *                      return starts through uc_link (libc's internal
 *                      switch), and from main once B returned
 *   ctxflow ucontext-pool N   POOL n= mismatches= main_same=: N
 *                      coroutines, each on its own stack, all made before
 *                      the first runs (getcontext, or with POOL_COPY set
 *                      a copy of one), every other one on the early thread;
 *                      with POOL_YIELD set, each started one yields back
 *                      (all N wait at once) and is resumed to its end
 *   ctxflow ucontext-copy   COPY <who> <ctx> from two coroutines made
 *                      through one temporary ucontext (makecontext, then
 *                      copied to the coroutine's own), first on main,
 *                      then on the early thread; both run on main
 *   ctxflow ucontext-evict   EVICT main <ctx>: main resumed by a
 *                      coroutine (made on the early thread) after the
 *                      shim's table window of main's ucontext filled up,
 *                      through a swapcontext() whose saved ucontext is new
 *   ctxflow setcontext-fail   SETFAIL <thread> r=<r> errno=<e> <ctx>: a
 *                      setcontext() to an unreadable ucontext that the shim
 *                      tracked (made on the other thread) fails, on main
 *                      and on the early thread; then each one's context
 */
#include "config.h"

#include "ctxobs.h"
#include "early-thread.h"
#include "flowctor.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <threads.h>
#include <ucontext.h>
#include <unistd.h>

#define CTX_TEXT 80

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static void __attribute__((format(printf, 1, 2))) out(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&out_lock);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
	pthread_mutex_unlock(&out_lock);
}

static pid_t
gettid_(void)
{
	return (pid_t)syscall(SYS_gettid);
}

static void
ctx_text(char *buf)
{
	ctxobs_format(buf, CTX_TEXT);
}

static void
wait_stdin_eof(void)
{
	char buf[64];

	while (read(0, buf, sizeof(buf)) > 0)
		;
}

static void
die(const char *what)
{
	fprintf(stderr, "ctxflow: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* ---- worker ---- */

static int release_pipe[2];

static void *
worker_main(void *arg)
{
	pid_t *tid = arg;
	char c[CTX_TEXT], b;

	*tid = gettid_();
	ctx_text(c);
	out("WORKER tid=%d %s\n", (int)*tid, c);
	(void)!read(release_pipe[0], &b, 1);
	return NULL;
}

static int
cmd_worker(void)
{
	pthread_t t;
	pid_t wtid = 0;
	char c[CTX_TEXT], line[64];

	if (pipe(release_pipe) < 0)
		die("pipe");
	ctx_text(c);
	out("MAIN tid=%d %s\n", (int)gettid_(), c);
	if (pthread_create(&t, NULL, worker_main, &wtid) != 0)
		die("pthread_create");
	while (!__atomic_load_n(&wtid, __ATOMIC_ACQUIRE))
		usleep(1000);
	/* Let it reach its read(). */
	usleep(10000);
	out("READY %d %d %d\n", (int)getpid(), (int)gettid_(), (int)wtid);
	if (!fgets(line, sizeof(line), stdin) || strncmp(line, "release", 7) != 0)
		return 1;
	(void)!write(release_pipe[1], "x", 1);
	pthread_join(t, NULL);
	ctx_text(c);
	out("JOINED %s\n", c);
	wait_stdin_eof();
	return 0;
}

/* ---- exits ---- */

static pthread_key_t exit_key;

/* Created after the shim's key, so it runs after the shim's destructor:
 * what a reader would find while the thread finishes exiting. */
static void
exit_dtor(void *name)
{
	char c[CTX_TEXT];

	ctx_text(c);
	out("EXIT %s %s\n", (const char *)name, c);
}

static void
mark_start(const char *name)
{
	char c[CTX_TEXT];

	(void)pthread_setspecific(exit_key, name);
	ctx_text(c);
	out("START %s %s\n", name, c);
}

static void *
t_return(void *arg)
{
	mark_start(arg);
	return NULL;
}

static void *
t_exit(void *arg)
{
	mark_start(arg);
	pthread_exit(NULL);
}

static int cancel_pipe[2];
static pthread_barrier_t cancel_ready;

static void *
t_cancel(void *arg)
{
	char b;

	mark_start(arg);
	pthread_barrier_wait(&cancel_ready);
	/* A cancellation point that never returns on its own. */
	for (;;)
		(void)!read(cancel_pipe[0], &b, 1);
	return NULL;
}

static void *
t_cancel_async(void *arg)
{
	volatile unsigned long spin = 0;

	mark_start(arg);
	(void)pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
	pthread_barrier_wait(&cancel_ready);
	for (;;)
		spin++;
	return NULL;
}

static int
t_c11(void *arg)
{
	mark_start(arg);
	thrd_exit(7);
}

static void
exits_from_early(void *unused)
{
	pthread_t t;

	(void)unused;
	if (pthread_create(&t, NULL, t_return, "early-child") != 0)
		die("pthread_create");
	pthread_join(t, NULL);
}

/* The library's constructor thread (flowctor.h) predates the shim's
 * constructor.  It enters a coroutine made on main, so it publishes main's
 * context from then on; the thread it starts there inherits that; and it
 * ends (pthread_exit() on the coroutine's stack) while publishing it. */
static ucontext_t lib_home, lib_co;
static char lib_stack[64 * 1024];

static void
lib_coroutine(void)
{
	pthread_t t;

	mark_start("lib-thread-in-coroutine");
	pthread_create(&t, NULL, t_return, "lib-child");
	pthread_join(t, NULL);
	pthread_exit(NULL);
}

static void
lib_job(void *unused)
{
	(void)unused;
	mark_start("lib-thread");
	swapcontext(&lib_home, &lib_co);
}

static int
cmd_exits(void)
{
	pthread_t t;
	thrd_t c11;
	void *ret;
	int res;
	char c[CTX_TEXT];

	if (pthread_key_create(&exit_key, exit_dtor) != 0 || pipe(cancel_pipe) < 0)
		die("setup");
	ctx_text(c);
	out("MAIN %s\n", c);

	pthread_create(&t, NULL, t_return, "return");
	pthread_join(t, &ret);
	pthread_create(&t, NULL, t_exit, "pthread_exit");
	pthread_join(t, &ret);

	pthread_barrier_init(&cancel_ready, NULL, 2);
	pthread_create(&t, NULL, t_cancel, "cancel");
	pthread_barrier_wait(&cancel_ready);
	pthread_cancel(t);
	pthread_join(t, &ret);
	out("JOINED cancel canceled=%d\n", ret == PTHREAD_CANCELED);

	pthread_create(&t, NULL, t_cancel_async, "cancel-async");
	pthread_barrier_wait(&cancel_ready);
	pthread_cancel(t);
	pthread_join(t, &ret);
	out("JOINED cancel-async canceled=%d\n", ret == PTHREAD_CANCELED);

	if (thrd_create(&c11, t_c11, "thrd_exit") != thrd_success)
		die("thrd_create");
	thrd_join(c11, &res);
	out("JOINED thrd_exit res=%d\n", res);

	on_early(exits_from_early, NULL);

	if (getcontext(&lib_co) < 0)
		die("getcontext");
	lib_co.uc_stack.ss_sp = lib_stack;
	lib_co.uc_stack.ss_size = sizeof(lib_stack);
	lib_co.uc_link = NULL;
	makecontext(&lib_co, lib_coroutine, 0);
	flowctor_post(lib_job, NULL);
	flowctor_join();

	ctx_text(c);
	out("DONE %s\n", c);
	return 0;
}

/* ---- churn ---- */

#define CHURN_BATCH 16

static char main_ctx[CTX_TEXT];
static const char none_ctx[] = "trace=- span=-";
static atomic_ulong churn_created, churn_mismatch;

static void *
churn_thread(void *arg)
{
	const char *want = arg;
	char c[CTX_TEXT];
	unsigned long n = atomic_fetch_add(&churn_created, 1);

	(void)pthread_setname_np(pthread_self(), want == main_ctx ? "w-ctx" : "w-none");
	ctx_text(c);
	if (strcmp(c, want) != 0) {
		atomic_fetch_add(&churn_mismatch, 1);
		out("MISMATCH %s want %s\n", c, want);
	}
	if (n % 3 == 1)
		pthread_exit(NULL);
	return NULL;
}

struct churn_job {
	unsigned long n;
	const char *want;
};

static void
churn_run(void *arg)
{
	struct churn_job *j = arg;
	pthread_t t[CHURN_BATCH];
	unsigned long done = 0;
	unsigned i, k;

	while (done < j->n) {
		k = 0;
		for (i = 0; i < CHURN_BATCH && done < j->n; i++, done++)
			if (pthread_create(&t[k], NULL, churn_thread,
					   (void *)j->want) == 0)
				k++;
		for (i = 0; i < k; i++)
			pthread_join(t[i], NULL);
	}
}

static void *
churn_creator(void *arg)
{
	(void)pthread_setname_np(pthread_self(), "c-ctx");
	churn_run(arg);
	return NULL;
}

static long
rss_kb(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
		rss = -1;
	fclose(f);
	return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static void
name_early(void *unused)
{
	(void)unused;
	(void)pthread_setname_np(pthread_self(), "c-none");
}

static int
cmd_churn(unsigned long n)
{
	struct churn_job a = {n / 2, main_ctx}, b = {n - n / 2, none_ctx};
	struct churn_job wa = {200, main_ctx}, wb = {200, none_ctx};
	pthread_t creator;
	long rss0, rss1;

	ctx_text(main_ctx);
	on_early(name_early, NULL);
	out("READY %d %s\n", (int)getpid(), main_ctx);
	/* Warm up: glibc caches thread stacks, the allocator its arenas. */
	churn_run(&wa);
	on_early(churn_run, &wb);
	rss0 = rss_kb();
	if (pthread_create(&creator, NULL, churn_creator, &a) != 0)
		die("pthread_create");
	on_early(churn_run, &b);
	pthread_join(creator, NULL);
	rss1 = rss_kb();
	out("RESULT created=%lu mismatches=%lu rss_start_kb=%ld rss_end_kb=%ld\n",
	    atomic_load(&churn_created), atomic_load(&churn_mismatch), rss0, rss1);
	wait_stdin_eof();
	return 0;
}

/* ---- fork ---- */

static pid_t fork_child;

static pid_t
do_fork(const char *kind)
{
	if (strcmp(kind, "_Fork") == 0)
		return _Fork();
	return fork();
}

static void
fork_here(void *kind)
{
	char c[CTX_TEXT];

	fflush(stdout);
	fork_child = do_fork(kind);
	if (fork_child < 0)
		die("fork");
	if (fork_child == 0) {
		ctx_text(c);
		/* _Fork's child may not use stdio locks: plain write. */
		char line[256];
		int len = snprintf(line, sizeof(line), "CHILD %s %d %s\n", (char *)kind,
				   (int)getpid(), c);

		(void)!write(1, line, (size_t)len);
		wait_stdin_eof();
		_exit(0);
	}
}

static void *
fork_sibling(void *unused)
{
	(void)unused;
	pause();
	return NULL;
}

static int
cmd_fork(const char *kind)
{
	pthread_t sib;
	char c[CTX_TEXT], line[64];
	int status;

	/* Another thread with a context, which must not exist in the child. */
	if (pthread_create(&sib, NULL, fork_sibling, NULL) != 0)
		die("pthread_create");
	/* The test reads the parent as it was before the fork first. */
	out("FORKING %d\n", (int)getpid());
	if (!fgets(line, sizeof(line), stdin) || strncmp(line, "fork", 4) != 0)
		return 1;
	if (strcmp(kind, "early") == 0)
		on_early(fork_here, (void *)kind);
	else
		fork_here((void *)kind);
	ctx_text(c);
	out("PARENT %d %s\n", (int)getpid(), c);
	wait_stdin_eof();
	if (waitpid(fork_child, &status, 0) < 0)
		die("waitpid");
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* ---- spawn ---- */

extern char **environ;

static void
check_same(const char *what, int status, const char *before, const void *rec_before)
{
	char c[CTX_TEXT];

	ctx_text(c);
	out("SPAWN %s status=%d same=%d\n", what, status,
	    strcmp(c, before) == 0 && (const void *)ctxobs_record() == rec_before);
}

/* Apart, so that nothing of the caller's frame lives across vfork(). */
static __attribute__((noinline)) int
vfork_true(char **argv)
{
	int status = -1;
	pid_t pid = vfork();

	if (pid == 0) {
		execve("/bin/true", argv, environ);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, &status, 0);
	return status;
}

static int
cmd_spawn(void)
{
	char before[CTX_TEXT], buf[64];
	const void *rec = ctxobs_record();
	char *argv[] = {"/bin/true", NULL};
	pid_t pid;
	int status = -1;
	FILE *p;

	ctx_text(before);
	status = vfork_true(argv);
	check_same("vfork", status, before, rec);

	status = -1;
	if (posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ) == 0)
		waitpid(pid, &status, 0);
	check_same("posix_spawn", status, before, rec);

	status = system("exit 3");
	check_same("system", status, before, rec);

	p = popen("echo popen-ok", "r");
	buf[0] = '\0';
	if (p) {
		if (!fgets(buf, sizeof(buf), p))
			buf[0] = '\0';
		status = pclose(p);
	}
	check_same("popen", strcmp(buf, "popen-ok\n") == 0 ? status : -1, before, rec);
	return 0;
}

/* ---- exec ---- */

static int
cmd_probe(void)
{
	const char *pre = getenv("LD_PRELOAD");
	const char *fol = getenv("CTXSHIM_FOLLOW_EXEC");
	char c[CTX_TEXT];

	const char *tp = getenv("TRACEPARENT"), *ts = getenv("TRACESTATE"), *mark,
		   *pmark;
	int ntp = 0, nts = 0;

	ctx_text(c);
	out("PROBE shim=%d preload=%s follow=%s ctxflow=%s %s\n",
	    dlsym(RTLD_DEFAULT, OTEL_THREAD_CTX_SYMBOL) != NULL, pre ? pre : "-",
	    fol ? fol : "-", getenv("CTXFLOW") ? getenv("CTXFLOW") : "-", c);
	for (char **e = environ; *e; e++) {
		ntp += strncmp(*e, "TRACEPARENT=", 12) == 0;
		nts += strncmp(*e, "TRACESTATE=", 11) == 0;
	}
	/* whose TRACEPARENT: this process's (own: as exec'd, or as a
	 * spawned child of its parent) or another's */
	mark = getenv("CTXSHIM_TRACEPARENT_PID");
	pmark = getenv("CTXSHIM_TRACEPARENT_PPID");
	out("PROBEENV tp=%s ts=%s n=%d,%d pid=%s\n", tp ? tp : "-", ts ? ts : "-", ntp,
	    nts,
	    !mark && !pmark ? "-"
	    : (mark && atol(mark) == (long)getpid()) ||
			    (pmark && atol(pmark) == (long)getppid())
		    ? "own"
		    : "other");
	return 0;
}

/* ENV fork or vfork: how's exec (execve or execv) of "ctxflow probe" in a
 * child, with environ; the child's exit status is ours. */
static int
exec_in_child(const char *self, const char *how, bool use_vfork)
{
	char *argv[] = {(char *)self, "probe", NULL};
	bool v = strcmp(how, "execv") == 0;
	pid_t pid;
	int st;

	if (!v && strcmp(how, "execve") != 0) {
		fprintf(stderr, "ctxflow: %s in a child: execve or execv\n", how);
		return 2;
	}
	pid = use_vfork ? vfork() : fork();
	if (pid == 0) {
		if (v)
			execv(self, argv);
		else
			execve(self, argv, environ);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		die("fork");
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

/* ENV: keep (environ as it is), clear (only CTXFLOW=1), other (CTXFLOW=1
 * and an LD_PRELOAD of another library). */
static int
cmd_exec(const char *self, const char *how, const char *env)
{
	static const char other_lib[] = "/lib/x86_64-linux-gnu/libm.so.6";
	char *argv[] = {(char *)self, "probe", NULL};
	char *clean[4] = {"CTXFLOW=1"}, asan[1024];
	const char *asan_opts = getenv("ASAN_OPTIONS");
	bool keep = strcmp(env, "keep") == 0 || strcmp(env, "chdir") == 0;
	char *const *envp = keep ? environ : clean;
	char c[CTX_TEXT];
	size_t k = 1;

	ctx_text(c);
	out("EXEC %s\n", c);
	fflush(stdout);
	if (strcmp(env, "fork") == 0 || strcmp(env, "vfork") == 0)
		return exec_in_child(self, how, env[0] == 'v');

	if (strcmp(env, "other") == 0)
		clean[k++] = "LD_PRELOAD=/lib/x86_64-linux-gnu/libm.so.6";
	/* Sanitizer builds only: the preloaded shim needs this option. */
	if (asan_opts) {
		snprintf(asan, sizeof(asan), "ASAN_OPTIONS=%s", asan_opts);
		clean[k++] = asan;
		asan_opts = strdup(asan_opts);
	}
	if (!keep && (strcmp(how, "execv") == 0 || strcmp(how, "execvp") == 0 ||
		      strcmp(how, "execl") == 0 || strcmp(how, "execlp") == 0)) {
		/* These use environ: clear it the way a daemon would. */
		if (clearenv() != 0 || setenv("CTXFLOW", "1", 1) != 0 ||
		    (strcmp(env, "other") == 0 &&
		     setenv("LD_PRELOAD", other_lib, 1) != 0) ||
		    (asan_opts && setenv("ASAN_OPTIONS", asan_opts, 1) != 0))
			die("clearenv");
	}
	fflush(stdout);
	if (strcmp(env, "chdir") == 0 && chdir("/") != 0)
		die("chdir");
	if (strcmp(how, "execve") == 0) {
		execve(self, argv, envp);
	} else if (strcmp(how, "execv") == 0) {
		execv(self, argv);
	} else if (strcmp(how, "execvp") == 0) {
		execvp(self, argv);
	} else if (strcmp(how, "execvpe") == 0) {
		execvpe(self, argv, envp);
	} else if (strcmp(how, "execl") == 0) {
		execl(self, self, "probe", (char *)NULL);
	} else if (strcmp(how, "execle") == 0) {
		execle(self, self, "probe", (char *)NULL, envp);
	} else if (strcmp(how, "execlp") == 0) {
		execlp(self, self, "probe", (char *)NULL);
	} else if (strcmp(how, "fexecve") == 0) {
		int fd = open(self, O_RDONLY | O_CLOEXEC);

		if (fd >= 0)
			fexecve(fd, argv, envp);
	} else if (strcmp(how, "execveat") == 0) {
		execveat(AT_FDCWD, self, argv, envp, 0);
	} else if (strcmp(how, "posix_spawn") == 0 ||
		   strcmp(how, "posix_spawnp") == 0) {
		int r, st;
		pid_t pid;

		r = how[11] ? posix_spawnp(&pid, self, NULL, NULL, argv, envp)
			    : posix_spawn(&pid, self, NULL, NULL, argv, envp);
		if (r != 0) {
			errno = r;
			die(how);
		}
		if (waitpid(pid, &st, 0) != pid)
			die("waitpid");
		return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
	} else {
		fprintf(stderr, "ctxflow: unknown exec function %s\n", how);
		return 2;
	}
	die(how);
	return 1;
}

static int
cmd_execfail(void)
{
	char *argv[] = {"/nonexistent/ctxflow", NULL};
	char *clean[] = {"A=1", NULL};
	char **env_before = environ;
	size_t n_before = 0, n_after = 0;
	int e1, e2, e3, e4, fd;

	while (environ[n_before])
		n_before++;
	errno = 0;
	execve(argv[0], argv, clean);
	e1 = errno;
	errno = 0;
	execl(argv[0], argv[0], (char *)NULL);
	e2 = errno;
	errno = 0;
	execvp("ctxflow-nonexistent-program", argv);
	e3 = errno;
	/* glibc's fexecve() refuses a NULL environment (EINVAL) where
	 * execve() takes it for an empty one; were it run, this program
	 * would start again with an unknown command */
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die("open /proc/self/exe");
	argv[0] = "ctxflow-fexecve-ran";
	errno = 0;
	fexecve(fd, argv, NULL);
	e4 = errno;
	close(fd);
	while (environ[n_after])
		n_after++;
	out("EXECFAIL errno=%s,%s,%s,%s environ_same=%d count_same=%d "
	    "clean_same=%d\n",
	    strerror(e1), strerror(e2), strerror(e3), strerror(e4),
	    environ == env_before, n_before == n_after,
	    strcmp(clean[0], "A=1") == 0 && !clean[1]);
	return 0;
}

/* ---- ucontext ---- */

#define CO_STACK (64 * 1024)
#define CO_STEPS 3

struct coro {
	ucontext_t uc;
	const char *name;
	char stack[CO_STACK];
};

static struct coro coros[4];
static ucontext_t sched_uc[2];
static ucontext_t *cur_sched;

static void
coro_body(int idx)
{
	struct coro *co = &coros[idx];
	char c[CTX_TEXT];
	int i;

	for (i = 0; i < CO_STEPS; i++) {
		ctx_text(c);
		out("STEP %s %d tid=%d %s\n", co->name, i, (int)gettid_(), c);
		swapcontext(&co->uc, cur_sched);
	}
	ctx_text(c);
	out("STEP %s end tid=%d %s\n", co->name, (int)gettid_(), c);
	/* Coroutines 0 and 2 return to uc_link (libc's internal switch);
	 * 1 and 3 leave with setcontext(). */
	if (idx % 2)
		setcontext(cur_sched);
}

/* glibc's makecontext reads uc_link when it is called: the coroutine
 * returns to the scheduler it is made for. */
static void
make_coro(int idx, const char *name, long sched)
{
	struct coro *co = &coros[idx];

	co->name = name;
	if (getcontext(&co->uc) < 0)
		die("getcontext");
	co->uc.uc_stack.ss_sp = co->stack;
	co->uc.uc_stack.ss_size = sizeof(co->stack);
	co->uc.uc_link = &sched_uc[sched];
	makecontext(&co->uc, (void (*)(void))coro_body, 1, idx);
}

static void
make_early_coros(void *sched)
{
	make_coro(2, "early-a", (long)sched);
	make_coro(3, "early-b", (long)sched);
}

/* Run every coroutine CO_STEPS + 1 times, interleaved, on this thread. */
static void
schedule(void *which)
{
	ucontext_t *s = &sched_uc[(long)which];
	static const int order[] = {0, 2, 1, 3};
	char c[CTX_TEXT];
	int round, i;

	cur_sched = s;
	for (round = 0; round <= CO_STEPS; round++) {
		for (i = 0; i < 4; i++) {
			struct coro *co = &coros[order[i]];

			swapcontext(s, &co->uc);
			ctx_text(c);
			out("SCHED %ld after %s tid=%d %s\n", (long)which, co->name,
			    (int)gettid_(), c);
		}
	}
}

static int
cmd_ucontext(void)
{
	char c[CTX_TEXT];

	ctx_text(c);
	out("MAIN tid=%d %s\n", (int)gettid_(), c);
	/* Made on main (with a context) and on the early thread (without). */
	make_coro(0, "main-a", 0);
	make_coro(1, "main-b", 0);
	on_early(make_early_coros, (void *)0);
	/* First the main thread schedules them all, ... */
	schedule((void *)0);
	/* ... then the early thread does, with fresh coroutines. */
	make_coro(0, "main-a", 1);
	make_coro(1, "main-b", 1);
	on_early(make_early_coros, (void *)1);
	on_early(schedule, (void *)1);
	ctx_text(c);
	out("DONE tid=%d %s\n", (int)gettid_(), c);
	return 0;
}

/* Many coroutines, each made and run to completion once: more distinct
 * ucontexts than the shim's table has slots. */
static ucontext_t many_sched;
static char many_stack[CO_STACK];
static unsigned long many_bad;
static const char *many_want;

static void
many_body(void)
{
	char c[CTX_TEXT];

	ctx_text(c);
	if (strcmp(c, many_want) != 0)
		many_bad++;
}

static void
many_make(void *uc)
{
	makecontext(uc, many_body, 0);
}

static int
cmd_ucontext_many(unsigned long n)
{
	ucontext_t *ucs = calloc(n, sizeof(*ucs));
	char c[CTX_TEXT];
	unsigned long i;

	if (!ucs)
		die("calloc");
	ctx_text(main_ctx);
	for (i = 0; i < n; i++) {
		if (getcontext(&ucs[i]) < 0)
			die("getcontext");
		ucs[i].uc_stack.ss_sp = many_stack;
		ucs[i].uc_stack.ss_size = sizeof(many_stack);
		ucs[i].uc_link = &many_sched;
		/* Every other one is made where there is no context. */
		if (i % 2) {
			on_early(many_make, &ucs[i]);
			many_want = none_ctx;
		} else {
			many_make(&ucs[i]);
			many_want = main_ctx;
		}
		if (swapcontext(&many_sched, &ucs[i]) < 0)
			die("swapcontext");
	}
	ctx_text(c);
	out("MANY n=%lu mismatches=%lu main_same=%d\n", n, many_bad,
	    strcmp(c, main_ctx) == 0);
	free(ucs);
	return 0;
}

/* N coroutines, each on a stack of its own, all made before the first
 * runs (every other one where there is no context), as a pool a server
 * fills at start: each must start with the context it was made with. */
static ucontext_t pool_sched, *pool_self;
static unsigned long pool_bad;
static const char *pool_want;
static bool pool_yield;

static void
pool_body(void)
{
	ucontext_t *self = pool_self;
	char c[CTX_TEXT];

	ctx_text(c);
	if (strcmp(c, pool_want) != 0)
		pool_bad++;
	if (!pool_yield)
		return;
	/* Wait for work, as a worker of a pool does, and check again when
	 * resumed. */
	if (swapcontext(self, &pool_sched) < 0)
		die("swapcontext");
	ctx_text(c);
	if (strcmp(c, pool_want) != 0)
		pool_bad++;
}

static void
pool_make(void *uc)
{
	makecontext(uc, pool_body, 0);
}

static int
cmd_ucontext_pool(unsigned long n)
{
	enum { POOL_STACK = 16 * 1024 };
	ucontext_t *ucs = calloc(n, sizeof(*ucs));
	char *stacks = mmap(NULL, n * POOL_STACK, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	char c[CTX_TEXT];
	volatile unsigned long i; /* getcontext() in the loop */

	if (!ucs || stacks == MAP_FAILED)
		die("alloc");
	ctx_text(main_ctx);
	if (getcontext(&ucs[0]) < 0)
		die("getcontext");
	for (i = 0; i < n; i++) {
		if (i && getenv("POOL_COPY"))
			memcpy(&ucs[i], &ucs[0], sizeof(ucs[0]));
		else if (i && getcontext(&ucs[i]) < 0)
			die("getcontext");
		ucs[i].uc_stack.ss_sp = stacks + i * POOL_STACK;
		ucs[i].uc_stack.ss_size = POOL_STACK;
		ucs[i].uc_link = &pool_sched;
		if (i % 2)
			on_early(pool_make, &ucs[i]);
		else
			pool_make(&ucs[i]);
	}
	pool_yield = getenv("POOL_YIELD") != NULL;
	for (i = 0; i < n; i++) {
		pool_want = i % 2 ? none_ctx : main_ctx;
		pool_self = &ucs[i];
		if (swapcontext(&pool_sched, &ucs[i]) < 0)
			die("swapcontext");
	}
	/* With POOL_YIELD, every coroutine started and is waiting: resume
	 * each to its end. */
	for (i = 0; pool_yield && i < n; i++) {
		pool_want = i % 2 ? none_ctx : main_ctx;
		if (swapcontext(&pool_sched, &ucs[i]) < 0)
			die("swapcontext");
	}
	ctx_text(c);
	out("POOL n=%lu mismatches=%lu main_same=%d\n", n, pool_bad,
	    strcmp(c, main_ctx) == 0);
	free(ucs);
	return 0;
}

/* A coroutine that the one before it starts through uc_link: no hook sees
 * that switch, so the shim's start of a coroutine must publish its
 * context (old: B ran with A's). */
static ucontext_t link_home;
static struct coro link_co[2];

static void
link_body(int idx)
{
	char c[CTX_TEXT];

	ctx_text(c);
	out("LINK %s tid=%d %s\n", idx ? "B" : "A", (int)gettid_(), c);
}

static void
link_make(void *arg)
{
	long idx = (long)arg;
	struct coro *co = &link_co[idx];

	if (getcontext(&co->uc) < 0)
		die("getcontext");
	co->uc.uc_stack.ss_sp = co->stack;
	co->uc.uc_stack.ss_size = sizeof(co->stack);
	co->uc.uc_link = idx ? &link_home : &link_co[1].uc;
	makecontext(&co->uc, (void (*)(void))link_body, 1, (int)idx);
}

static int
cmd_ucontext_link(void)
{
	char c[CTX_TEXT];

	link_make((void *)0);
	on_early(link_make, (void *)1);
	if (swapcontext(&link_home, &link_co[0].uc) < 0)
		die("swapcontext");
	ctx_text(c);
	out("LINK main tid=%d %s\n", (int)gettid_(), c);
	return 0;
}

/* Coroutines made through a temporary, as a spawn helper that builds the
 * ucontext in a local and copies it into the coroutine's object: each
 * must start with the context it was made with (old: with whatever the
 * temporary was made with last, the early thread's none for both). */
static ucontext_t copy_tmp, copy_home;
static struct coro copy_co[2];

static void
copy_body(int idx)
{
	char c[CTX_TEXT];

	ctx_text(c);
	out("COPY %s tid=%d %s\n", idx ? "early-made" : "main-made", (int)gettid_(), c);
}

static void
copy_make(void *arg)
{
	long idx = (long)arg;

	if (getcontext(&copy_tmp) < 0)
		die("getcontext");
	copy_tmp.uc_stack.ss_sp = copy_co[idx].stack;
	copy_tmp.uc_stack.ss_size = sizeof(copy_co[idx].stack);
	copy_tmp.uc_link = &copy_home;
	makecontext(&copy_tmp, (void (*)(void))copy_body, 1, (int)idx);
	memcpy(&copy_co[idx].uc, &copy_tmp, sizeof(copy_tmp));
}

static int
cmd_ucontext_copy(void)
{
	char c[CTX_TEXT];
	int i;

	copy_make((void *)0);
	on_early(copy_make, (void *)1);
	for (i = 0; i < 2; i++)
		if (swapcontext(&copy_home, &copy_co[i].uc) < 0)
			die("swapcontext");
	ctx_text(c);
	out("COPY main tid=%d %s\n", (int)gettid_(), c);
	return 0;
}

/* The shim's table of ucontexts (hooks/hook-ucontext.c): 4096 slots, a
 * ucontext probes 16 from the hash of its address.  Here: main's
 * ucontext (home) and 16 more whose probes start at the same slot, all
 * distinct 1 KiB cells of one mapping (pages only touched when used). */
#define EV_SLOTS 4096u
#define EV_CELL  1024u
#define EV_CELLS (96u * 1024u)

static unsigned
ev_hash(const void *p)
{
	return (unsigned)(((uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull) >> 52) &
	       (EV_SLOTS - 1);
}

static ucontext_t *ev_home, *ev_fill[15], *ev_new;
static struct coro ev_co;

/* On main, with the early thread's context (none): the window of home's
 * slot fills with 15 newer ucontexts; then a switch to home saves into
 * a new one.  Evicting the least recently used of the window for it
 * evicted home itself, the ucontext switched to: main went on with the
 * coroutine's context. */
static void
ev_body(void)
{
	int i;

	for (i = 0; i < 15; i++)
		if (getcontext(ev_fill[i]) < 0)
			die("getcontext");
	if (swapcontext(ev_new, ev_home) < 0)
		die("swapcontext");
	die("resumed");
}

static void
ev_make(void *arg)
{
	(void)arg;
	if (getcontext(&ev_co.uc) < 0)
		die("getcontext");
	ev_co.uc.uc_stack.ss_sp = ev_co.stack;
	ev_co.uc.uc_stack.ss_size = sizeof(ev_co.stack);
	ev_co.uc.uc_link = NULL;
	makecontext(&ev_co.uc, ev_body, 0);
}

static int
cmd_ucontext_evict(void)
{
	static uint8_t count[EV_SLOTS];
	char *m = mmap(NULL, (size_t)EV_CELLS * EV_CELL, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	char c[CTX_TEXT];
	unsigned i, h = EV_SLOTS, n = 0;

	if (m == MAP_FAILED)
		die("mmap");
	for (i = 0; i < EV_CELLS && h == EV_SLOTS; i++)
		if (++count[ev_hash(m + (size_t)i * EV_CELL)] == 17)
			h = ev_hash(m + (size_t)i * EV_CELL);
	if (h == EV_SLOTS)
		die("no 17 cells of one hash");
	for (i = 0; n < 17; i++) {
		ucontext_t *u = (ucontext_t *)(m + (size_t)i * EV_CELL);

		if (ev_hash(u) != h)
			continue;
		if (n == 0)
			ev_home = u;
		else if (n < 16)
			ev_fill[n - 1] = u;
		else
			ev_new = u;
		n++;
	}
	on_early(ev_make, NULL);
	ctx_text(main_ctx);
	if (swapcontext(ev_home, &ev_co.uc) < 0)
		die("swapcontext");
	ctx_text(c);
	out("EVICT main tid=%d %s\n", (int)gettid_(), c);
	out("EVICT was %s\n", main_ctx);
	return 0;
}

/* A tracked ucontext (made with the thread's context, then made
 * unreadable) for setcontext() to fail on: the caller stays where it was,
 * and so must its context (old: the gone one's was published).  Made
 * PROT_NONE, not unmapped: an mmap() of the other thread (ASan's
 * allocator does them) could take the unmapped range, and setcontext()
 * then loaded zeroed registers and faulted, where the test wants EFAULT. */
static ucontext_t *fail_uc[2];

static void
fail_make(void *arg)
{
	long i = (long)arg;
	ucontext_t *uc = mmap(NULL, sizeof(*uc), PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	/* getcontext()'s: a made one is tracked under its stack only */
	if (uc == MAP_FAILED || getcontext(uc) < 0)
		die("mmap/getcontext");
	if (mprotect(uc, sizeof(*uc), PROT_NONE) < 0)
		die("mprotect");
	fail_uc[i] = uc;
}

static void
fail_try(void *arg)
{
	long i = (long)arg;
	char c[CTX_TEXT];
	int r, e;

	errno = 0;
	r = setcontext(fail_uc[i]);
	e = errno;
	ctx_text(c);
	out("SETFAIL %s r=%d errno=%s %s\n", i ? "early" : "main", r, strerror(e), c);
}

static int
cmd_setcontext_fail(void)
{
	/* each thread's ucontext made on the other: another context */
	on_early(fail_make, (void *)0);
	fail_make((void *)1);
	fail_try((void *)0);
	on_early(fail_try, (void *)1);
	return 0;
}

int
main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : "";

	if (strcmp(cmd, "worker") == 0)
		return cmd_worker();
	if (strcmp(cmd, "exits") == 0)
		return cmd_exits();
	if (strcmp(cmd, "churn") == 0 && argc > 2)
		return cmd_churn(strtoul(argv[2], NULL, 10));
	if (strcmp(cmd, "fork") == 0 && argc > 2)
		return cmd_fork(argv[2]);
	if (strcmp(cmd, "spawn") == 0)
		return cmd_spawn();
	if (strcmp(cmd, "exec") == 0 && argc > 3)
		return cmd_exec(argv[0], argv[2], argv[3]);
	if (strcmp(cmd, "execfail") == 0)
		return cmd_execfail();
	if (strcmp(cmd, "probe") == 0)
		return cmd_probe();
	if (strcmp(cmd, "ucontext") == 0)
		return cmd_ucontext();
	if (strcmp(cmd, "ucontext-pool") == 0 && argc > 2)
		return cmd_ucontext_pool(strtoul(argv[2], NULL, 10));
	if (strcmp(cmd, "ucontext-link") == 0)
		return cmd_ucontext_link();
	if (strcmp(cmd, "ucontext-copy") == 0)
		return cmd_ucontext_copy();
	if (strcmp(cmd, "ucontext-evict") == 0)
		return cmd_ucontext_evict();
	if (strcmp(cmd, "setcontext-fail") == 0)
		return cmd_setcontext_fail();
	if (strcmp(cmd, "ucontext-many") == 0 && argc > 2)
		return cmd_ucontext_many(strtoul(argv[2], NULL, 10));
	fprintf(stderr,
		"usage: ctxflow worker|exits|churn N|fork KIND|spawn|exec HOW ENV|"
		"execfail|probe|ucontext|ucontext-many N|ucontext-pool N|ucontext-link|"
		"ucontext-copy|ucontext-evict|setcontext-fail\n");
	return 2;
}
