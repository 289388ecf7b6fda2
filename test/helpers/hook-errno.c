/* SPDX-License-Identifier: Apache-2.0 */
/* Return values and errno of the hooks other than the socket ones
 * (socket-errno.c has those): hook-pthread.c, hook-fork.c, hook-exec.c,
 * hook-ucontext.c, and the thread pools of hook-pool-uv.c and
 * hook-pool-glib.c (loaded with dlopen() when installed; their hooks bind
 * at run time).  Success and failure paths; one line per call,
 * "<what> ret=<r> errno=<name>", where errno must be the sentinel set
 * before a call that succeeds.  The test runs this with and without the
 * shim and compares; the program also checks the expected values itself
 * (exit 1 on a mismatch).  No tracing code. */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <threads.h>
#include <ucontext.h>
#include <unistd.h>

#define SENTINEL 4242

pid_t _Fork(void);

static int failures;

static void
check(const char *what, long r, long exp_ret, int exp_errno)
{
	int e = errno;
	const char *name = e == SENTINEL ? "unchanged" : strerrorname_np(e);

	printf("%s ret=%ld errno=%s\n", what, r, name ? name : "?");
	/* exp_errno -1: whatever libc leaves (compared with and without the
	 * shim by the test) */
	if (r != exp_ret || (exp_errno != -1 && e != exp_errno)) {
		printf("MISMATCH %s: want ret=%ld errno=%d, got ret=%ld errno=%d\n",
		       what, exp_ret, exp_errno, r, e);
		failures++;
	}
}

#define CALL(what, expr, exp_ret, exp_errno)         \
	do {                                         \
		long r_;                             \
		errno = SENTINEL;                    \
		r_ = (long)(expr);                   \
		check(what, r_, exp_ret, exp_errno); \
	} while (0)

static void *
thread_fn(void *arg)
{
	return arg;
}

static int
thrd_fn(void *arg)
{
	return (int)(long)arg;
}

static void
threads(void)
{
	pthread_attr_t attr;
	pthread_t t;
	thrd_t tt;
	void *ret;
	int res;

	CALL("pthread_create", pthread_create(&t, NULL, thread_fn, (void *)7), 0,
	     SENTINEL);
	CALL("pthread_join", pthread_join(t, &ret), 0, SENTINEL);
	CALL("pthread_create-result", (long)ret, 7, SENTINEL);
	/* a stack no machine has: the error is the return value */
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, (size_t)1 << 46);
	{
		long r;

		errno = SENTINEL;
		r = pthread_create(&t, &attr, thread_fn, NULL);
		if (r == 0)
			pthread_join(t, NULL);
		/* glibc's failed mmap() leaves ENOMEM in errno too */
		check("pthread_create-huge-stack", r == EAGAIN || r == ENOMEM ? -1 : r,
		      -1, -1);
	}
	pthread_attr_destroy(&attr);
	CALL("thrd_create", thrd_create(&tt, thrd_fn, (void *)5), thrd_success,
	     SENTINEL);
	CALL("thrd_join", thrd_join(tt, &res), thrd_success, SENTINEL);
	CALL("thrd_create-result", res, 5, SENTINEL);
}

static void
forks(void)
{
	pid_t pid;
	int st;

	errno = SENTINEL;
	pid = _Fork();
	if (pid == 0)
		_exit(errno == SENTINEL ? 0 : 1);
	check("_Fork-parent", pid > 0 ? 0 : pid, 0, SENTINEL);
	CALL("_Fork-child", waitpid(pid, &st, 0) == pid && st == 0, 1, SENTINEL);
	errno = SENTINEL;
	pid = fork();
	if (pid == 0)
		_exit(errno == SENTINEL ? 0 : 1);
	check("fork-parent", pid > 0 ? 0 : pid, 0, SENTINEL);
	CALL("fork-child", waitpid(pid, &st, 0) == pid && st == 0, 1, SENTINEL);
}

/* An exec that fails returns -1 with errno; one that succeeds is checked
 * in a child (exit status of /bin/sh -c 'exit 3'). */
static void
execs(void)
{
	char *const argv[] = {"nonexistent-ctxshim-cmd", NULL};
	char *const envp[] = {"A=1", NULL};
	char *const sh[] = {"/bin/sh", "-c", "exit 3", NULL};
	pid_t pid;
	int st;

	CALL("execve-enoent", execve("/nonexistent/x", argv, envp), -1, ENOENT);
	CALL("execv-eacces", execv("/", argv), -1, EACCES);
	CALL("execvp-enoent", execvp("nonexistent-ctxshim-cmd", argv), -1, ENOENT);
	CALL("execvpe-enoent", execvpe("nonexistent-ctxshim-cmd", argv, envp), -1,
	     ENOENT);
	CALL("execl-enoent", execl("/nonexistent/x", "x", (char *)NULL), -1, ENOENT);
	CALL("execle-enoent", execle("/nonexistent/x", "x", (char *)NULL, envp), -1,
	     ENOENT);
	CALL("execlp-enoent", execlp("nonexistent-ctxshim-cmd", "x", (char *)NULL), -1,
	     ENOENT);
	CALL("fexecve-einval", fexecve(-1, argv, envp), -1, EINVAL);
	CALL("execveat-enoent", execveat(AT_FDCWD, "/nonexistent/x", argv, envp, 0), -1,
	     ENOENT);
	CALL("execveat-einval", execveat(AT_FDCWD, "/bin/sh", sh, envp, 0x7fff0000), -1,
	     EINVAL);
	pid = fork();
	if (pid == 0) {
		execv(sh[0], sh);
		_exit(127);
	}
	CALL("execv-success", waitpid(pid, &st, 0) == pid ? WEXITSTATUS(st) : -1, 3,
	     SENTINEL);
	/* posix_spawn reports an error by its result; errno is what glibc
	 * leaves (compared with a run without the shim). */
	CALL("posix_spawn-enoent",
	     posix_spawn(&pid, "/nonexistent/x", NULL, NULL, argv, envp), ENOENT, -1);
	CALL("posix_spawnp-enoent",
	     posix_spawnp(&pid, "nonexistent-ctxshim-cmd", NULL, NULL, argv, envp),
	     ENOENT, -1);
	CALL("posix_spawn-success", posix_spawn(&pid, sh[0], NULL, NULL, sh, envp), 0,
	     -1);
	CALL("posix_spawn-status", waitpid(pid, &st, 0) == pid ? WEXITSTATUS(st) : -1,
	     3, SENTINEL);
	CALL("posix_spawnp-success", posix_spawnp(&pid, "sh", NULL, NULL, sh, NULL), 0,
	     -1);
	CALL("posix_spawnp-status", waitpid(pid, &st, 0) == pid ? WEXITSTATUS(st) : -1,
	     3, SENTINEL);
}

/* An environment the kernel cannot read is the caller's bug, reported as
 * EFAULT: the hooks that build a new one (case 2 of the test) must not
 * fault on it first. */
static void
bad_envs(void)
{
	char *const sh[] = {"/bin/sh", "-c", "exit 3", NULL};
	char *const bad_entry[] = {"A=1", (char *)16, NULL};
	/* volatile: gcc would see through it and warn */
	char *const *volatile bad_array = (char *const *)16;
	pid_t pid;

#ifdef __SANITIZE_ADDRESS__
	/* ASan's own exec interceptors read the environment first */
	(void)bad_entry, (void)bad_array, (void)pid;
	return;
#endif
	CALL("execve-bad-entry", execve(sh[0], sh, bad_entry), -1, EFAULT);
	CALL("execve-bad-array", execve(sh[0], sh, bad_array), -1, EFAULT);
	CALL("posix_spawn-bad-entry",
	     posix_spawn(&pid, sh[0], NULL, NULL, sh, bad_entry), EFAULT, -1);
	/* an unaligned array whose second word straddles into an unmapped
	 * page */
	char *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	char *const a = "A=1";
	char **straddle = (char **)(void *)(m + 4096 - 12);

	if (m == MAP_FAILED || munmap(m + 4096, 4096) != 0)
		abort();
	memcpy(straddle, &a, sizeof(a));
	memset(m + 4092, 0, 4);
	CALL("execve-straddling-array", execve(sh[0], sh, straddle), -1, EFAULT);
	(void)munmap(m, 4096);
}

static long
vm_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char l[256];
	long v = 0;

	while (f && fgets(l, sizeof(l), f))
		if (strncmp(l, "VmSize:", 7) == 0)
			v = atol(l + 7);
	if (f)
		fclose(f);
	return v;
}

#define ARGS10(p) p "0", p "1", p "2", p "3", p "4", p "5", p "6", p "7", p "8", p "9"
#define ARGS100(p)                                                                 \
	ARGS10(p "0"), ARGS10(p "1"), ARGS10(p "2"), ARGS10(p "3"), ARGS10(p "4"), \
		ARGS10(p "5"), ARGS10(p "6"), ARGS10(p "7"), ARGS10(p "8"),        \
		ARGS10(p "9")

/* A vfork() child shares its parent's memory: what its exec maps for a
 * long execl() argument list or a large environment (case 2) must not
 * stay behind in the parent once per exec. */
static __attribute__((noinline)) void
vfork_exec(char *const *env)
{
	pid_t pid = vfork();
	int st;

	if (pid == 0) {
		char *const argv[] = {"true", NULL};

		if (env)
			execve("/bin/true", argv, env);
		else
			execl("/bin/true", "true", ARGS100("a"), ARGS100("b"),
			      ARGS100("c"), (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		(void)waitpid(pid, &st, 0);
}

static void
vfork_execs(void)
{
	static char *env[700];
	static char vars[700][8];
	long before, grew;
	int i;

	for (i = 0; environ[i] && i < 100; i++)
		env[i] = environ[i];
	for (; i < 699; i++) {
		snprintf(vars[i], sizeof(vars[i]), "V%d=x", i);
		env[i] = vars[i];
	}
	env[i] = NULL;
	before = vm_kb();
	for (i = 0; i < 40; i++) {
		vfork_exec(NULL);
		vfork_exec(env);
	}
	/* 80 mappings left would be 160 kB or more */
	grew = vm_kb() - before;
	CALL("vfork-exec-mappings-kept", grew > 100 ? grew : 0, 0, -1);
}

/* An exec in a signal handler (a crash handler's reporter) that
 * interrupts the thread's own exec hook while that builds a large
 * environment (case 2) must leave the interrupted one's buffer alone (it
 * once unmapped it).  A timer fires while the outer execs run; both fail
 * with ENOENT. */
#define SIG_EXEC_VARS 60000
static char *sig_exec_env[SIG_EXEC_VARS + 1];
static char *const sig_exec_argv[] = {"x", NULL};
static volatile sig_atomic_t sig_exec_wrong;

static void
sig_exec_handler(int sig)
{
	int e = errno;

	(void)sig;
	if (execve("/nonexistent/handler", sig_exec_argv, sig_exec_env) != -1 ||
	    errno != ENOENT)
		sig_exec_wrong = 1;
	errno = e;
}

static void
exec_in_handler(void)
{
	static char vars[SIG_EXEC_VARS][12];
	struct itimerval off = {{0, 0}, {0, 0}};
	struct sigaction sa = {.sa_handler = sig_exec_handler}, old;
	int i, wrong = 0;

	for (i = 0; i < SIG_EXEC_VARS; i++) {
		snprintf(vars[i], sizeof(vars[i]), "V%05d=1", i);
		sig_exec_env[i] = vars[i];
	}
	sigaction(SIGALRM, &sa, &old);
	/* one signal per exec, at a different point of it each time (a
	 * periodic one could keep the handler's own exec from ever ending) */
	for (i = 0; i < 100; i++) {
		struct itimerval once = {{0, 0}, {0, 1 + (i * 37) % 2000}};

		setitimer(ITIMER_REAL, &once, NULL);
		wrong += execve("/nonexistent/outer", sig_exec_argv, sig_exec_env) !=
				 -1 ||
			 errno != ENOENT;
	}
	setitimer(ITIMER_REAL, &off, NULL);
	sigaction(SIGALRM, &old, NULL);
	CALL("exec-in-signal-handler-wrong", wrong + sig_exec_wrong, 0, -1);
}

/* A crash handler on a small alternate signal stack that executes a
 * reporter (in a child here): the hooks must need no more stack than
 * exec itself when they hand on a context (case 2). */
static void
handler_exec(int sig)
{
	char *const sh[] = {"/bin/sh", "-c", "exit 3", NULL};

	(void)sig;
	execv(sh[0], sh);
	_exit(99);
}

static void
small_stack_exec(void)
{
	size_t size = 6656, page = 4096;
	int st = 0;
	pid_t pid;

#ifdef __SANITIZE_ADDRESS__
	/* the sanitized shim's frames are larger by design */
	return;
#endif
	pid = fork();

	if (pid == 0) {
		char *m = mmap(NULL, size + page, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		stack_t ss = {.ss_sp = m + page, .ss_size = size};
		struct sigaction sa = {.sa_handler = handler_exec,
				       .sa_flags = SA_ONSTACK};

		/* a guard page below the stack */
		if (m == MAP_FAILED || mprotect(m, page, PROT_NONE) != 0 ||
		    sigaltstack(&ss, NULL) != 0 || sigaction(SIGUSR1, &sa, NULL) != 0)
			_exit(98);
		raise(SIGUSR1);
		_exit(97);
	}
	CALL("exec-on-small-signal-stack",
	     waitpid(pid, &st, 0) == pid && WIFEXITED(st) ? WEXITSTATUS(st) : -1, 3,
	     -1);
}

static ucontext_t uc_main, uc_co;
static int co_runs;

static void
co_fn(void)
{
	co_runs++;
}

/* makecontext() passes on every argument, however many (glibc takes any
 * argc): 70 here, their sum checked in the coroutine. */
#define P10(x)                                                                       \
	long x##0, long x##1, long x##2, long x##3, long x##4, long x##5, long x##6, \
		long x##7, long x##8, long x##9
#define S10(x) (x##0 + x##1 + x##2 + x##3 + x##4 + x##5 + x##6 + x##7 + x##8 + x##9)
static long co_sum;

static void
co_fn70(P10(a), P10(b), P10(c), P10(d), P10(e), P10(f), P10(g))
{
	co_sum = S10(a) + S10(b) + S10(c) + S10(d) + S10(e) + S10(f) + S10(g) +
		 g9 * 1000;
}

static void
contexts(void)
{
	static char stack[64 * 1024];

	CALL("getcontext", getcontext(&uc_co), 0, SENTINEL);
	uc_co.uc_stack.ss_sp = stack;
	uc_co.uc_stack.ss_size = sizeof(stack);
	uc_co.uc_link = &uc_main;
	errno = SENTINEL;
	makecontext(&uc_co, co_fn, 0);
	check("makecontext", 0, 0, SENTINEL);
	CALL("swapcontext", swapcontext(&uc_main, &uc_co), 0, SENTINEL);
	CALL("swapcontext-ran", co_runs, 1, SENTINEL);

	CALL("getcontext-70", getcontext(&uc_co), 0, SENTINEL);
	uc_co.uc_stack.ss_sp = stack;
	uc_co.uc_stack.ss_size = sizeof(stack);
	uc_co.uc_link = &uc_main;
	errno = SENTINEL;
	makecontext(&uc_co, (void (*)(void))co_fn70, 70, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
		    11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27,
		    28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44,
		    45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61,
		    62, 63, 64, 65, 66, 67, 68, 69, 70);
	check("makecontext-70", 0, 0, SENTINEL);
	CALL("swapcontext-70", swapcontext(&uc_main, &uc_co), 0, SENTINEL);
	/* 1 + ... + 70, and the 70th once more, times 1000 */
	CALL("makecontext-70-args", co_sum, 2485 + 70000, SENTINEL);
}

/* ---- thread pools, when the libraries are installed ----
 * The hooked names are looked up in the global scope, where a preloaded
 * shim comes first (dlsym() on the library's handle would bypass it). */

struct uv_work_s {
	char opaque[256];
};

static void
uv_work(struct uv_work_s *req)
{
	(void)req;
}

static void
uv_pools(void)
{
	void *h = dlopen("libuv.so.1", RTLD_NOW | RTLD_GLOBAL);
	void *(*loop_new)(void);
	int (*loop_init)(void *);
	int (*queue)(void *, struct uv_work_s *, void (*)(struct uv_work_s *),
		     void (*)(struct uv_work_s *, int));
	int (*run)(void *, int);
	int (*loop_close)(void *);
	size_t (*loop_size)(void);
	static struct uv_work_s req;
	void *loop;

	if (!h) {
		printf("libuv: not installed\n");
		return;
	}
	loop_size = (size_t(*)(void))dlsym(h, "uv_loop_size");
	loop_init = (int (*)(void *))dlsym(h, "uv_loop_init");
	queue = (int (*)(void *, struct uv_work_s *, void (*)(struct uv_work_s *),
			 void (*)(struct uv_work_s *, int)))dlsym(RTLD_DEFAULT,
								  "uv_queue_work");
	run = (int (*)(void *, int))dlsym(h, "uv_run");
	loop_close = (int (*)(void *))dlsym(h, "uv_loop_close");
	(void)loop_new;
	loop = calloc(1, loop_size());
	if (!loop || loop_init(loop) != 0)
		exit(2);
	/* no work callback: UV_EINVAL, as libuv returns it */
	CALL("uv_queue_work-einval", queue(loop, &req, NULL, NULL), -EINVAL, SENTINEL);
	CALL("uv_queue_work", queue(loop, &req, uv_work, NULL), 0, SENTINEL);
	CALL("uv_run", run(loop, 0), 0, SENTINEL);
	CALL("uv_loop_close", loop_close(loop), 0, SENTINEL);
	free(loop);
}

static void
glib_fn(void *data, void *user)
{
	(void)data;
	(void)user;
}

static void
glib_pools(void)
{
	void *h = dlopen("libglib-2.0.so.0", RTLD_NOW | RTLD_GLOBAL);
	void *(*pool_new)(void (*)(void *, void *), void *, int, int, void **);
	int (*push)(void *, void *, void **);
	int (*set_max)(void *, int, void **);
	void (*pool_free)(void *, int, int);
	void *pool, *err = NULL;

	if (!h) {
		printf("glib: not installed\n");
		return;
	}
	pool_new = (void *(*)(void (*)(void *, void *), void *, int, int,
			      void **))dlsym(RTLD_DEFAULT, "g_thread_pool_new");
	push = (int (*)(void *, void *, void **))dlsym(RTLD_DEFAULT,
						       "g_thread_pool_push");
	set_max = (int (*)(void *, int, void **))dlsym(RTLD_DEFAULT,
						       "g_thread_pool_set_max_threads");
	pool_free =
		(void (*)(void *, int, int))dlsym(RTLD_DEFAULT, "g_thread_pool_free");
	errno = SENTINEL;
	pool = pool_new(glib_fn, NULL, 2, 0, &err);
	check("g_thread_pool_new", pool != NULL && err == NULL, 1, SENTINEL);
	CALL("g_thread_pool_push", push(pool, (void *)1, &err), 1, SENTINEL);
	CALL("g_thread_pool_set_max_threads", set_max(pool, 3, &err), 1, SENTINEL);
	/* void, and what GLib leaves in errno while it waits for its threads
	 * depends on timing, shim or not: only that it returns */
	pool_free(pool, 0, 1);
	printf("g_thread_pool_free returned\n");
}

int
main(void)
{
	/* what the constructors left: 0 without the shim (C11 7.5p3) */
	int start_errno = errno;

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("main-start errno=%d\n", start_errno);
	threads();
	forks();
	execs();
	bad_envs();
	vfork_execs();
	small_stack_exec();
	exec_in_handler();
	contexts();
	uv_pools();
	glib_pools();
	printf("failures=%d\n", failures);
	return failures ? 1 : 0;
}
