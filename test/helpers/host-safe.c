/* SPDX-License-Identifier: Apache-2.0 */
/* host-safe: things an unmodified program does that the shim must not
 * change (test-preload-host.c runs each with and without the shim and
 * compares the output and the exit status).  No tracing code.
 *
 *   host-safe clone-exec FN SIZE
 *       A posix_spawn-like launcher: clone(CLONE_VM | CLONE_VFORK) with a
 *       SIZE-byte stack of its own (a guard page below it), and the child
 *       only calls FN (execve, execv, execvp, execvpe, execl, execle,
 *       execlp, fexecve or execveat) on /bin/true.  Prints how the child
 *       ended (hooks/hook-exec.c).
 *   host-safe vfork-execl FN
 *       A vfork() child calls FN (execl, execle or execlp) on /bin/true
 *       with 1001 arguments, as glibc's own execl() takes on the stack.
 *       Prints how the child ended and whether the parent's
 *       /proc/self/maps is the same after as before (hooks/hook-exec.c
 *       used to map the argument vector, which the child's exec left in
 *       the parent).
 *   host-safe execl-int-max FN
 *       Calls FN (execl, execle or execlp) with INT_MAX non-NULL arguments
 *       and no terminating NULL: a stack whose words above the call are
 *       one 2 MiB page of 0x01 bytes mapped 8192 times (16 GiB), then an
 *       unreadable page.  glibc stops counting at INT_MAX and fails with
 *       E2BIG; prints the result and errno (hooks/hook-exec.c used to
 *       count on into the unreadable page).  x86_64 only.
 *   host-safe sigpipe MODE
 *       Serves two HTTP requests with a traceparent over a loopback
 *       connection (each read makes the shim publish a context, and write a
 *       line to CTXSHIM_EVENTS).  MODE: "serve" (SIGPIPE as inherited),
 *       "pending" (SIGPIPE blocked and raised before: it must stay pending
 *       and be delivered), "blocked" (SIGPIPE blocked: nothing may be
 *       pending after), "handler" (a SIGPIPE handler: never called).  The
 *       test gives it a stderr whose reader has gone (preload/log.c).
 *   host-safe uc-migrate
 *       A coroutine that suspends itself (swapcontext) on thread A is
 *       resumed on thread B after A has ended and A's stack, which holds
 *       A's thread-locals, is inaccessible (hooks/hook-ucontext.c).
 *   host-safe uc-small-stack SIZE
 *       A coroutine on a SIZE-byte stack (a guard page below it) that
 *       only setcontext()s back to main, which needs next to no stack
 *       (hooks/hook-ucontext.c used to take 1.2 KiB of it).
 *   host-safe uc-dlerror FN
 *       A dlopen() that fails, then the process's first FN (getcontext
 *       or makecontext) before dlerror().  Prints whether dlerror() still
 *       has the message (hooks/hook-ucontext.c bound the real functions
 *       with dlsym() at the first call, which discarded it).
 *   host-safe seccomp-strict
 *       A thread started with no context puts itself in seccomp's strict
 *       mode (read, write, exit and sigreturn only: anything else kills
 *       it), then reads a traced request head from a connection the main
 *       thread accepted and writes a response.  Prints what the thread
 *       got done (preload/thread-ctx.c used to seed the thread's id
 *       generator with getrandom() at its first request, which killed
 *       it).
 *   host-safe seccomp-fds
 *       With a connection open, installs a seccomp filter that kills the
 *       process on getpid() and openat(), then moves and closes pipes and
 *       ranges of descriptors that hold no connection with dup2, dup3,
 *       close_range (also CLOSE_RANGE_UNSHARE, with a second thread) and
 *       closefrom.  Prints what it did (hooks/hook-socket.c made a
 *       getpid() in each of those calls, and close_range's unshare read
 *       /proc/self/stat, whatever the descriptors)
 *   host-safe dlopen-ctor LIB
 *       dlopen()s LIB (libctor-wait.so), whose constructor waits for a
 *       thread started before to start and join a thread of its own.
 *       Prints what got done; a SIGALRM after 30 s ends a deadlock
 *       (hooks/hook-pool-uv.c looked for libuv with dlopen(RTLD_NOLOAD)
 *       in a pthread_create() by a thread with a context, after each
 *       dlopen(), and waited for the loader's lock that the constructor
 *       held).
 *   host-safe dlopen-shim LIB
 *       dlopen()s LIB (libctxshim.so itself, with static TLS room to
 *       spare: GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384),
 *       then starts and joins a thread and makes a siglongjmp()
 *       through the shim's handle.  Prints what got done
 *       (preload/bind.c ended the process in the shim's constructor:
 *       RTLD_NEXT found its own hook; then bound none for an optional
 *       name, and the jump aborted). */
#include "config.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "listen-loopback.h"

/* ---- clone-exec ---------------------------------------------------------- */

enum {
	X_EXECVE,
	X_EXECV,
	X_EXECVP,
	X_EXECVPE,
	X_EXECL,
	X_EXECLE,
	X_EXECLP,
	X_FEXECVE,
	X_EXECVEAT,
	X_N
};
static const char *const exec_names[X_N] = {
	"execve", "execv",  "execvp",  "execvpe",  "execl",
	"execle", "execlp", "fexecve", "execveat",
};
static int exec_which, exec_fd = -1;
static char *const true_argv[] = {"/bin/true", NULL};

/* Called through pointers the loader fills in at start-up: a first call
 * through the PLT would run the lazy-binding resolver on the small stack,
 * which alone needs more than the calls themselves. */
static int (*volatile p_execve)(const char *, char *const[], char *const[]) = execve;
static int (*volatile p_execv)(const char *, char *const[]) = execv;
static int (*volatile p_execvp)(const char *, char *const[]) = execvp;
static int (*volatile p_execvpe)(const char *, char *const[], char *const[]) = execvpe;
static int (*volatile p_execl)(const char *, const char *, ...) = execl;
static int (*volatile p_execle)(const char *, const char *, ...) = execle;
static int (*volatile p_execlp)(const char *, const char *, ...) = execlp;
static int (*volatile p_fexecve)(int, char *const[], char *const[]) = fexecve;
static int (*volatile p_execveat)(
	int, const char *, char *const[], char *const[], int) = execveat;
static void (*volatile p_exit)(int) = _exit;

static int
clone_child(void *arg)
{
	(void)arg;
	switch (exec_which) {
	case X_EXECVE:
		p_execve("/bin/true", true_argv, environ);
		break;
	case X_EXECV:
		p_execv("/bin/true", true_argv);
		break;
	case X_EXECVP:
		p_execvp("/bin/true", true_argv);
		break;
	case X_EXECVPE:
		p_execvpe("/bin/true", true_argv, environ);
		break;
	case X_EXECL:
		p_execl("/bin/true", "/bin/true", (char *)NULL);
		break;
	case X_EXECLE:
		p_execle("/bin/true", "/bin/true", (char *)NULL, environ);
		break;
	case X_EXECLP:
		p_execlp("/bin/true", "/bin/true", (char *)NULL);
		break;
	case X_FEXECVE:
		p_fexecve(exec_fd, true_argv, environ);
		break;
	case X_EXECVEAT:
		p_execveat(exec_fd, "", true_argv, environ, AT_EMPTY_PATH);
		break;
	}
	p_exit(127);
	return 127;
}

static int
clone_exec(const char *fn, size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, size + page, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int st;
	pid_t p;

	for (exec_which = 0; exec_which < X_N; exec_which++)
		if (strcmp(fn, exec_names[exec_which]) == 0)
			break;
	if (exec_which == X_N)
		return 64;
	if (m == MAP_FAILED || mprotect(m, page, PROT_NONE) != 0)
		return 2;
	exec_fd = open("/bin/true", O_RDONLY | O_CLOEXEC);
	if (exec_fd < 0)
		return 2;
	p = clone(clone_child, m + page + size, CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
	if (p < 0 || waitpid(p, &st, 0) != p)
		return 2;
	if (WIFSIGNALED(st))
		printf("%s stack %zu: child killed by signal %d\n", fn, size,
		       WTERMSIG(st));
	else
		printf("%s stack %zu: child exit %d\n", fn, size, WEXITSTATUS(st));
	return 0;
}

/* ---- vfork-execl -------------------------------------------------------- */

#define ARG1    "x",
#define ARG10   ARG1 ARG1 ARG1 ARG1 ARG1 ARG1 ARG1 ARG1 ARG1 ARG1
#define ARG100  ARG10 ARG10 ARG10 ARG10 ARG10 ARG10 ARG10 ARG10 ARG10 ARG10
#define ARG1000 ARG100 ARG100 ARG100 ARG100 ARG100 ARG100 ARG100 ARG100 ARG100 ARG100

/* Reads /proc/self/maps into buf (static: nothing is allocated between
 * the two reads); its length, or -1. */
static ssize_t
read_maps(char *buf, size_t cap)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	size_t n = 0;
	ssize_t r;

	if (fd < 0)
		return -1;
	while (n < cap && (r = read(fd, buf + n, cap - n)) > 0)
		n += (size_t)r;
	close(fd);
	return n < cap ? (ssize_t)n : -1;
}

static int
vfork_execl(const char *fn)
{
	static char before[1 << 20], after[1 << 20];
	ssize_t nb, na;
	int st;
	pid_t p;

	for (exec_which = X_EXECL; exec_which <= X_EXECLP; exec_which++)
		if (strcmp(fn, exec_names[exec_which]) == 0)
			break;
	if (exec_which > X_EXECLP)
		return 64;
	nb = read_maps(before, sizeof(before));
	p = vfork();
	if (p == 0) {
		if (exec_which == X_EXECL)
			p_execl("/bin/true", "/bin/true", ARG1000(char *) NULL);
		else if (exec_which == X_EXECLE)
			p_execle("/bin/true", "/bin/true", ARG1000(char *) NULL,
				 environ);
		else
			p_execlp("/bin/true", "/bin/true", ARG1000(char *) NULL);
		p_exit(127);
	}
	if (p < 0 || waitpid(p, &st, 0) != p)
		return 2;
	na = read_maps(after, sizeof(after));
	if (nb < 0 || na < 0)
		return 2;
	printf("%s 1001 arguments under vfork: child %s %d, maps %s\n", fn,
	       WIFSIGNALED(st) ? "killed by signal" : "exit",
	       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
	       na == nb && memcmp(before, after, (size_t)nb) == 0 ? "unchanged"
								  : "changed");
	if (na != nb || memcmp(before, after, (size_t)nb) != 0)
		fprintf(stderr, "--- before\n%.*s--- after\n%.*s", (int)nb, before,
			(int)na, after);
	return 0;
}

/* ---- execl-int-max ------------------------------------------------------- */

#ifdef __x86_64__
/* Calls fn(path, arg, arg, arg, arg, arg, ...) with the stack pointer at
 * sp: the variadic arguments after the four in registers are the words
 * from sp up. */
int execl_on_stack(void *sp, void *fn, const char *path, const char *arg);
__asm__(".text\n"
	".type execl_on_stack, @function\n"
	"execl_on_stack:\n"
	"	push %rbx\n"
	"	mov %rsp, %rbx\n"
	"	mov %rdi, %rsp\n"
	"	mov %rsi, %r11\n"
	"	mov %rdx, %rdi\n"
	"	mov %rcx, %rsi\n"
	"	mov %rcx, %rdx\n"
	"	mov %rcx, %r8\n"
	"	mov %rcx, %r9\n"
	"	xor %eax, %eax\n"
	"	call *%r11\n"
	"	mov %rbx, %rsp\n"
	"	pop %rbx\n"
	"	ret\n"
	".size execl_on_stack, . - execl_on_stack\n");

static int
execl_int_max(const char *fn)
{
	const size_t below = 1 << 20, piece = 2 << 20;
	const size_t words = (size_t)INT_MAX + 1, pattern = words * sizeof(void *);
	char *r, *p;
	size_t off;
	int fd, ret;

	for (exec_which = X_EXECL; exec_which <= X_EXECLP; exec_which++)
		if (strcmp(fn, exec_names[exec_which]) == 0)
			break;
	if (exec_which > X_EXECLP)
		return 64;
	/* Shared mappings of one page of a memfd: 16 GiB of address space,
	 * 2 MiB of memory. */
	fd = memfd_create("ones", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)piece) != 0)
		return 2;
	p = mmap(NULL, piece, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return 2;
	memset(p, 1, piece);
	munmap(p, piece);
	/* [stack for the calls][the pattern][PROT_NONE] */
	r = mmap(NULL, below + pattern + 4096, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED ||
	    mmap(r, below, PROT_READ | PROT_WRITE,
		 MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED)
		return 2;
	for (off = 0; off < pattern; off += piece)
		if (mmap(r + below + off, piece, PROT_READ, MAP_FIXED | MAP_SHARED, fd,
			 0) == MAP_FAILED)
			return 2;
	errno = 0;
	ret = execl_on_stack(r + below,
			     exec_which == X_EXECL    ? (void *)p_execl
			     : exec_which == X_EXECLE ? (void *)p_execle
						      : (void *)p_execlp,
			     "/nonexistent/x", "x");
	printf("%s with INT_MAX arguments: %d %s\n", fn, ret, strerror(errno));
	return 0;
}
#else
static int
execl_int_max(const char *fn)
{
	printf("%s with INT_MAX arguments: not on this architecture\n", fn);
	return 0;
}
#endif

/* ---- sigpipe ------------------------------------------------------------- */

static volatile sig_atomic_t caught;

static void
on_sigpipe(int sig)
{
	(void)sig;
	caught++;
}

/* A connected pair over loopback: *srv is the accepted end. */
static int
tcp_pair(int *srv, int *cli)
{
	struct sockaddr_in a;
	int l = listen_loopback(1, SOCK_CLOEXEC, &a);

	if (l < 0)
		return -1;
	*cli = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*cli < 0 || connect(*cli, (struct sockaddr *)&a, sizeof(a)) != 0)
		return -1;
	*srv = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	close(l);
	return *srv < 0 ? -1 : 0;
}

static int
serve_two(void)
{
	static const char req[] =
		"GET /a HTTP/1.1\r\nHost: x\r\ntraceparent: "
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\n\r\n";
	char buf[512];
	int srv, cli, i;

	if (tcp_pair(&srv, &cli) != 0)
		return -1;
	for (i = 0; i < 2; i++) {
		size_t got = 0;

		if (write(cli, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1)
			return -1;
		while (got < sizeof(req) - 1) {
			ssize_t r = read(srv, buf, sizeof(buf));

			if (r <= 0)
				return -1;
			got += (size_t)r;
		}
	}
	close(cli);
	close(srv);
	return 0;
}

static bool
sigpipe_pending(void)
{
	sigset_t s;

	return sigpending(&s) == 0 && sigismember(&s, SIGPIPE);
}

static int
sigpipe_mode(const char *mode)
{
	sigset_t pipe_set;
	int sig;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	if (strcmp(mode, "handler") == 0) {
		struct sigaction sa = {.sa_handler = on_sigpipe};

		sigemptyset(&sa.sa_mask);
		sigaction(SIGPIPE, &sa, NULL);
	} else if (strcmp(mode, "pending") == 0 || strcmp(mode, "blocked") == 0) {
		pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
		if (strcmp(mode, "pending") == 0)
			raise(SIGPIPE);
	} else if (strcmp(mode, "serve") != 0) {
		return 64;
	}
	if (serve_two() != 0) {
		printf("serve failed: %s\n", strerror(errno));
		return 1;
	}
	printf("served\n");
	printf("SIGPIPE pending: %s\n", sigpipe_pending() ? "yes" : "no");
	printf("SIGPIPE handler calls: %d\n", (int)caught);
	if (strcmp(mode, "pending") == 0 && sigpipe_pending()) {
		sigwait(&pipe_set, &sig);
		printf("SIGPIPE taken by sigwait: %d\n", sig == SIGPIPE);
		printf("SIGPIPE pending: %s\n", sigpipe_pending() ? "yes" : "no");
	}
	return 0;
}

/* ---- uc-migrate ---------------------------------------------------------- */

#define UC_STACK (256u * 1024u)

static ucontext_t a_orig, b_main, c1, c2, c1_saved;
static pthread_t thread_b; /* set by B itself */

/* Runs on A, then (resumed) on B.  No arrays on these frames: in an ASan
 * build they would live on a per-thread fake stack. */
static void
coro1(void)
{
	/* The shim's swapcontext frame is on this coroutine's stack. */
	swapcontext(&c1_saved, &c2);
	printf("coro1 resumed on thread %s\n",
	       pthread_equal(pthread_self(), thread_b) ? "B" : "A");
	setcontext(&b_main);
}

/* Runs on A: lets A return from its thread function and end. */
static void
coro2(void)
{
	setcontext(&a_orig);
}

static void *
thread_a(void *arg)
{
	(void)arg;
	swapcontext(&a_orig, &c1);
	printf("thread A ends\n");
	return NULL;
}

static void *
thread_b_fn(void *arg)
{
	(void)arg;
	thread_b = pthread_self();
	swapcontext(&b_main, &c1_saved);
	printf("thread B back on its own stack\n");
	return NULL;
}

static int
make_coro(ucontext_t *uc, void (*fn)(void))
{
	void *stack = mmap(NULL, UC_STACK, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (stack == MAP_FAILED || getcontext(uc) != 0)
		return -1;
	uc->uc_stack.ss_sp = stack;
	uc->uc_stack.ss_size = UC_STACK;
	uc->uc_link = NULL;
	makecontext(uc, fn, 0);
	return 0;
}

static int
uc_migrate(void)
{
	size_t a_size = 1u << 20;
	void *a_stack = mmap(NULL, a_size, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	pthread_attr_t attr;
	pthread_t a, b;

	if (a_stack == MAP_FAILED || make_coro(&c1, coro1) != 0 ||
	    make_coro(&c2, coro2) != 0)
		return 2;
	/* A's stack is ours: glibc puts A's TLS block at its top and leaves
	 * the memory to us after the join. */
	pthread_attr_init(&attr);
	pthread_attr_setstack(&attr, a_stack, a_size);
	if (pthread_create(&a, &attr, thread_a, NULL) != 0 ||
	    pthread_join(a, NULL) != 0)
		return 2;
	pthread_attr_destroy(&attr);
	/* As if A's TLS had been freed (and kept out of reuse). */
	if (mprotect(a_stack, a_size, PROT_NONE) != 0)
		return 2;
	fflush(stdout);
	if (pthread_create(&b, NULL, thread_b_fn, NULL) != 0 ||
	    pthread_join(b, NULL) != 0)
		return 2;
	printf("done\n");
	return 0;
}

/* ---- uc-small-stack ------------------------------------------------------ */

static ucontext_t small_main, small_coro;

static void
small_coro_fn(void)
{
	setcontext(&small_main);
}

static int
uc_small_stack(size_t size)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t len = (size_t)page + ((size + (size_t)page - 1) & ~((size_t)page - 1));
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	volatile bool back = false;

	if (m == MAP_FAILED || mprotect(m, (size_t)page, PROT_NONE) != 0 ||
	    getcontext(&small_coro) != 0)
		return 2;
	/* The stack's lowest byte right above the guard page. */
	small_coro.uc_stack.ss_sp = m + page;
	small_coro.uc_stack.ss_size = size;
	small_coro.uc_link = NULL;
	makecontext(&small_coro, small_coro_fn, 0);
	if (getcontext(&small_main) != 0)
		return 2;
	if (!back) {
		back = true;
		setcontext(&small_coro);
		return 3;
	}
	printf("coroutine on a %zu-byte stack: back in main\n", size);
	return 0;
}

/* ---- uc-dlerror --------------------------------------------------------- */

static int
uc_dlerror(const char *fn)
{
	static char stack[16384];
	ucontext_t uc;

	if (dlopen("libhost-safe-none.so", RTLD_NOW))
		return 2;
	if (strcmp(fn, "getcontext") == 0) {
		if (getcontext(&uc) != 0)
			return 2;
	} else if (strcmp(fn, "makecontext") == 0) {
		/* Made, never run: no getcontext() first. */
		memset(&uc, 0, sizeof(uc));
		uc.uc_stack.ss_sp = stack;
		uc.uc_stack.ss_size = sizeof(stack);
		makecontext(&uc, (void (*)(void))abort, 0);
	} else {
		return 64;
	}
	printf("%s: dlerror %s\n", fn, dlerror() ? "kept" : "lost");
	return 0;
}

/* ---- seccomp-strict ------------------------------------------------------ */

static const char strict_req[] =
	"GET /sandboxed HTTP/1.1\r\nHost: x\r\ntraceparent: "
	"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	"\r\n\r\n";
static const char strict_resp[] = "HTTP/1.1 204 No Content\r\n\r\n";
static int strict_srv;
/* What the sandboxed thread got done: 0 nothing, 1 in strict mode, 2 the
 * head read, 3 the response written.  Plain stores: the thread can make
 * no other call. */
static volatile int strict_step;

static void *
strict_thread(void *arg)
{
	char buf[512];
	size_t got = 0;

	(void)arg;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT) != 0)
		return NULL;
	strict_step = 1;
	while (got < sizeof(strict_req) - 1) {
		ssize_t r = read(strict_srv, buf, sizeof(buf));

		if (r <= 0)
			break;
		got += (size_t)r;
	}
	if (got == sizeof(strict_req) - 1) {
		strict_step = 2;
		if (write(strict_srv, strict_resp, sizeof(strict_resp) - 1) ==
		    (ssize_t)sizeof(strict_resp) - 1)
			strict_step = 3;
	}
	/* exit(2), the only way out strict mode leaves: pthread_exit()
	 * would unwind through calls it forbids.  The kernel still clears the
	 * thread's tid for pthread_join(). */
	syscall(SYS_exit, 0);
	return NULL;
}

static int
seccomp_strict(void)
{
	char buf[128];
	pthread_t th;
	ssize_t n;
	int cli;

	if (tcp_pair(&strict_srv, &cli) != 0) {
		printf("no connection: %s\n", strerror(errno));
		return 1;
	}
	if (write(cli, strict_req, sizeof(strict_req) - 1) !=
		    (ssize_t)sizeof(strict_req) - 1 ||
	    pthread_create(&th, NULL, strict_thread, NULL) != 0 ||
	    pthread_join(th, NULL) != 0) {
		printf("set-up failed: %s\n", strerror(errno));
		return 1;
	}
	printf("sandboxed thread: step %d\n", strict_step);
	(void)shutdown(strict_srv, SHUT_WR);
	n = read(cli, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	printf("client got %zd bytes: %s\n", n, n > 0 ? strtok(buf, "\r") : "");
	return 0;
}

/* ---- seccomp-fds --------------------------------------------------------- */

static void *
fds_idle(void *arg)
{
	int *p = arg;
	char c;

	/* a second thread, so that close_range()'s unshare has a table
	 * shared with another thread to unshare */
	(void)read(p[0], &c, 1);
	return NULL;
}

static int
seccomp_fds(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getpid, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
	int srv, cli, p[2], q[2];
	pthread_t th;

	if (tcp_pair(&srv, &cli) != 0 || pipe(p) != 0 || pipe(q) != 0 ||
	    pthread_create(&th, NULL, fds_idle, q) != 0) {
		printf("set-up failed: %s\n", strerror(errno));
		return 1;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
		printf("no seccomp filter: %s\n", strerror(errno));
		return 1;
	}
	printf("dup2: %d\n", dup2(p[0], 100));
	printf("dup3: %d\n", dup3(p[1], 101, O_CLOEXEC));
	printf("close_range: %d\n", close_range(100, 101, 0));
	printf("dup2: %d\n", dup2(p[0], 100));
	printf("close_range unshare: %d\n", close_range(100, 200, CLOSE_RANGE_UNSHARE));
	printf("dup2: %d\n", dup2(p[1], 300));
	closefrom(300);
	printf("closefrom: fd 300 %s\n", fcntl(300, F_GETFD) < 0 ? "closed" : "open");
	(void)write(q[1], "x", 1);
	pthread_join(th, NULL);
	return 0;
}

/* ---- dlopen-ctor ---------------------------------------------------------- */

static int ctor_go[2], ctor_done[2];

static void *
ctor_leaf(void *arg)
{
	return arg;
}

/* Started before the dlopen(): waits for the constructor's request, then
 * starts a thread, which is what the constructor waits for. */
static void *
ctor_worker(void *arg)
{
	pthread_t th;
	char c;
	int r;

	(void)arg;
	if (read(ctor_go[0], &c, 1) != 1)
		return NULL;
	r = pthread_create(&th, NULL, ctor_leaf, NULL);
	if (r == 0)
		pthread_join(th, NULL);
	printf("worker: pthread_create %d\n", r);
	(void)!write(ctor_done[1], "d", 1);
	return NULL;
}

static int
dlopen_ctor(const char *lib)
{
	char fds[32];
	pthread_t th;
	void *h;

	alarm(30);
	if (pipe(ctor_go) != 0 || pipe(ctor_done) != 0) {
		printf("set-up failed: %s\n", strerror(errno));
		return 1;
	}
	snprintf(fds, sizeof(fds), "%d %d", ctor_go[1], ctor_done[0]);
	setenv("HOST_SAFE_CTOR_FDS", fds, 1);
	if (pthread_create(&th, NULL, ctor_worker, NULL) != 0) {
		printf("set-up failed: %s\n", strerror(errno));
		return 1;
	}
	h = dlopen(lib, RTLD_NOW);
	printf("dlopen: %s\n", h ? "ok" : dlerror());
	pthread_join(th, NULL);
	return 0;
}

/* ---- dlopen-shim ---------------------------------------------------------- */

static int
dlopen_shim(const char *lib)
{
	void *h = dlopen(lib, RTLD_NOW);
	pthread_t th;
	int r;

	printf("dlopen: %s\n", h ? "ok" : dlerror());
	r = pthread_create(&th, NULL, ctor_leaf, NULL);
	if (r == 0)
		pthread_join(th, NULL);
	printf("pthread_create: %d\n", r);
	/* A hook called through the handle (a host that takes every name it
	 * looks for from each library it loads) passes through to libc:
	 * siglongjmp is bound as optional, and its hook aborted without it. */
	if (h) {
		void (*jump)(sigjmp_buf, int) =
			(void (*)(sigjmp_buf, int))dlsym(h, "siglongjmp");
		static sigjmp_buf env;

		if (jump && sigsetjmp(env, 0) == 0)
			jump(env, 1);
		printf("siglongjmp: %s\n", jump ? "ok" : "not found");
	}
	return 0;
}

int
main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && strcmp(argv[1], "clone-exec") == 0)
		return clone_exec(argv[2], strtoul(argv[3], NULL, 0));
	if (argc == 3 && strcmp(argv[1], "vfork-execl") == 0)
		return vfork_execl(argv[2]);
	if (argc == 3 && strcmp(argv[1], "execl-int-max") == 0)
		return execl_int_max(argv[2]);
	if (argc == 3 && strcmp(argv[1], "sigpipe") == 0)
		return sigpipe_mode(argv[2]);
	if (argc == 2 && strcmp(argv[1], "uc-migrate") == 0)
		return uc_migrate();
	if (argc == 3 && strcmp(argv[1], "uc-small-stack") == 0)
		return uc_small_stack(strtoul(argv[2], NULL, 0));
	if (argc == 3 && strcmp(argv[1], "uc-dlerror") == 0)
		return uc_dlerror(argv[2]);
	if (argc == 2 && strcmp(argv[1], "seccomp-strict") == 0)
		return seccomp_strict();
	if (argc == 2 && strcmp(argv[1], "seccomp-fds") == 0)
		return seccomp_fds();
	if (argc == 3 && strcmp(argv[1], "dlopen-ctor") == 0)
		return dlopen_ctor(argv[2]);
	if (argc == 3 && strcmp(argv[1], "dlopen-shim") == 0)
		return dlopen_shim(argv[2]);
	fprintf(stderr, "usage: host-safe clone-exec FN SIZE | vfork-execl FN | "
			"execl-int-max FN | "
			"sigpipe MODE | "
			"uc-migrate | uc-small-stack SIZE | uc-dlerror FN | "
			"seccomp-strict | "
			"seccomp-fds | dlopen-ctor LIB | dlopen-shim LIB\n");
	return 64;
}
