/* SPDX-License-Identifier: Apache-2.0 */
/* The host process never sees a difference (CODING_STYLE.md, "Hooks"), in
 * the corners where it once did: each helper run here must print the same
 * and end the same with the shim as without it.
 *
 * - curl-oom: malloc fails during one curl_easy_setopt() (hook-curl.c's
 *   handle table; uthash used to exit(-1)).
 * - curl-stale: a curl_easy_duphandle() copy made at the address of a
 *   handle freed without the shim seeing it (hook-curl.c kept the freed
 *   handle's entry and walked its freed header list).
 * - curl-jump: a SIGALRM handler siglongjmp()s out of curl_easy_perform()
 *   (hook-curl.c kept the abandoned transfer's client span published; and
 *   counted a handle whose callback had set its own traceparent list
 *   before the jump as abandoned for good, so that every later hooked
 *   call took curl_lock).
 * - curl-jump lock, alloc, fault: the same out of curl_easy_setopt(), at
 *   random points (hook-curl.c's table lock stayed locked after a jump out
 *   of it, and every later hooked call of the process waited); and the
 *   thread's signal mask around the application's allocation callbacks
 *   and after a fault handler's jump (see curl_jump_cases).
 * - curl-fork jump, handler: a signal handler's jump out of a fork(), and
 *   a handler that forks while hook-curl.c holds its table lock (its fork
 *   handlers left the lock held, or waited for it for good: see
 *   curl_fork_cases).
 * - fcgi-jump: the same out of libfcgi's FCGX_Finish_r(), then FCGX_Free()
 *   (hook-fcgi.c left the dropped request published until the next accept).
 * - curl-lists freed: a handle's header list freed after its HTTP
 *   transfer, the handle then used for a file:// one (hook-curl.c walked
 *   the freed list, which libcurl no longer reads).
 * - curl-lists oom: a header list set while malloc and calloc fail, then
 *   sent with a context (hook-curl.c sent its own list instead, without
 *   the application's Authorization).
 * - host-safe clone-exec: exec from a child on a 2 KiB clone() stack
 *   (hook-exec.c's pass-through used to need 4 KiB of stack itself).
 * - host-safe sigpipe: CTXSHIM_LOG/CTXSHIM_EVENTS on a stderr whose
 *   reader has gone (log.c, events.c used to raise SIGPIPE in the app).
 * - sh with 0, 1 or 2 closed and CTXSHIM_LOG, CTXSHIM_EVENTS files: no
 *   descriptor of ours in the closed slot (events.c kept the event log
 *   on 2).
 * - sh with CTXSHIM_LOG or CTXSHIM_EVENTS on a FIFO without a reader
 *   (log.c and events.c waited in open() for one, before main()).
 * - host-safe uc-migrate: a coroutine suspended on one thread resumed on
 *   another (hook-ucontext.c used to read the first thread's TLS).
 * - host-safe uc-small-stack: setcontext() from a coroutine's 1 KiB stack
 *   (hook-ucontext.c used to copy the thread's context onto it first).
 * - host-safe uc-dlerror: a failed dlopen(), then the process's first
 *   getcontext() or makecontext(), then dlerror() (hook-ucontext.c bound
 *   libc's functions with dlsym() at the first call, which discarded the
 *   message).
 * - host-safe seccomp-strict: a thread that enters seccomp's strict mode
 *   before its first request (preload/thread-ctx.c seeded the thread's
 *   id generator with getrandom() there, and the kernel killed the
 *   thread).
 * - host-safe seccomp-fds: dup2, dup3, close_range and closefrom of
 *   descriptors that hold no connection, under a seccomp filter that
 *   forbids getpid() and openat() (hook-socket.c made a getpid() in each,
 *   and read /proc/self/stat for close_range's unshare).
 * - host-safe dlopen-ctor: a thread with a context starts a thread while
 *   a dlopen()ed library's constructor waits for it (hook-pool-uv.c
 *   looked for libuv with dlopen(RTLD_NOLOAD) there, which waited for the
 *   loader's lock the constructor held: a deadlock).
 * - host-safe dlopen-shim: a program that dlopen()s libctxshim.so itself,
 *   with the static TLS room it takes (bind.c's RTLD_NEXT found the
 *   shim's own hooks, and its constructor ended the process; then the
 *   optional ones were left unbound, and a siglongjmp() through the
 *   shim's handle aborted).
 * - h2-early: an nghttp2 server session from a callbacks object that a
 *   library's constructor began before the shim's constructor ran
 *   (hook-nghttp2.c used to swap it knowing only the later setters, and
 *   the application's on_frame_recv was never called).
 * - tls-ownbio: TLS sessions on a descriptor BIO of the application's own
 *   method (hook-openssl.c's ossl_fd() called its ctrl for BIO_C_GET_FD). */
#include "test-common.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void
helper_path(char *buf, size_t n, const char *name)
{
	snprintf(buf, n, "%s/%s", test_env_path("HELPER_DIR"), name);
	if (access(buf, X_OK) != 0)
		test_skip("%s not built", buf);
}

/* Runs argv with and without the shim; both must end the same way and
 * print the same.  Returns the output (malloc'd). */
static char *
run_both(char *const argv[], char *const env[])
{
	char *out0, *out1, *err0, *err1;
	int st0, st1;

	st0 = test_run_capture(argv, env, false, &out0, &err0, 60000);
	st1 = test_run_capture(argv, env, true, &out1, &err1, 60000);
	ck_assert_msg(st0 == st1,
		      "%s: wait status %#x without the shim, %#x with it:\n%s%s",
		      argv[0], st0, st1, out1, err1);
	ck_assert_msg(strcmp(out0, out1) == 0,
		      "output differs:\n--- without\n%s--- with\n%s%s", out0, out1,
		      err1);
	free(out0);
	free(err0);
	free(err1);
	return out1;
}

/* ---- curl --------------------------------------------------------------- */

START_TEST(curl_setopt_out_of_memory)
{
	char path[4096], *argv[] = {path, NULL}, *out;

	snprintf(path, sizeof(path), "%s/curl-oom", test_env_path("HELPER_DIR"));
	if (access(path, X_OK) != 0) {
		fprintf(stderr, "no libcurl: %s not built, not tested\n", path);
		return;
	}
	out = run_both(argv, NULL);
	ck_assert_ptr_nonnull(strstr(out, "DONE"));
	free(out);
}
END_TEST

START_TEST(curl_duphandle_at_a_stale_address)
{
	char path[4096], *argv[] = {path, "http://127.0.0.1:1/", NULL}, *out;

	snprintf(path, sizeof(path), "%s/curl-stale", test_env_path("HELPER_DIR"));
	if (access(path, X_OK) != 0) {
		fprintf(stderr, "no libcurl: %s not built, not tested\n", path);
		return;
	}
	/* Port 1 on loopback: connection refused, both ways. */
	out = run_both(argv, NULL);
	ck_assert_str_eq(out, "perform 7\n");
	free(out);
}
END_TEST

/* The modes of curl-jump, each of which prints the same with and without
 * the shim when hook-curl.c cleans up after a signal handler's jump:
 * - (none): a SIGALRM handler that siglongjmp()s out of a
 *   curl_easy_perform() that waits for an answer (hook-curl.c used to keep
 *   the abandoned transfer's client span published and take a new handle
 *   at its address for that transfer's, hook_curl_unwound()).  With a
 *   context (TRACEPARENT), so that the shim has something to show and
 *   send.
 * - lock: after a timeout's jump out of a curl_easy_perform(), a SIGUSR1
 *   handler that siglongjmp()s out of curl_easy_setopt(), about 10,000
 *   times in a second at random points, then another thread's
 *   curl_easy_setopt() (hook-curl.c's table lock used to stay locked
 *   after a jump out of the few instructions that hold it, and every later
 *   hooked call of the process waited for good: once a jump has ended a
 *   perform, its signals are blocked there).
 * - alloc: once a jump has ended a perform, the perform of a CURLU handle
 *   with the application's allocation callbacks (hook-curl.c used to read
 *   the scheme, which libcurl allocates, with the thread's signals
 *   blocked: the callbacks saw our mask, and a change of theirs was
 *   undone).
 * - fault: once a jump has ended a perform, a SIGSEGV handler that
 *   longjmp()s out of curl_easy_setopt() (hook-curl.c lets faults through
 *   its block: their jump used to leave the thread's other signals blocked
 *   for good). */
static const struct {
	const char *mode; /* NULL: none */
	bool traced;
	const char *want;
} curl_jump_cases[] = {
	{NULL, true,
	 "shown-kept 1\nreperform 2\ndup-sent X-App: 1\nmulti-like-easy 1\n"
	 "abandoned-left 0\n"},
	{"lock", false, "lock-jumps 1\nlock-free 1\n"},
	{"alloc", false, "alloc-saw-ours 0\nalloc-change-kept 1\n"},
	{"fault", false, "fault-jumps 1\nfault-mask-kept 1\n"},
};

START_TEST(curl_jumps)
{
	char path[4096], *argv[] = {path, (char *)curl_jump_cases[_i].mode, NULL}, *out;
	char *env[] = {
		"TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		NULL};

	snprintf(path, sizeof(path), "%s/curl-jump", test_env_path("HELPER_DIR"));
	if (access(path, X_OK) != 0) {
		fprintf(stderr, "no libcurl: %s not built, not tested\n", path);
		return;
	}
	out = run_both(argv, curl_jump_cases[_i].traced ? env : NULL);
	ck_assert_msg(strcmp(out, curl_jump_cases[_i].want) == 0, "curl-jump %s:\n%s",
		      curl_jump_cases[_i].mode ? curl_jump_cases[_i].mode : "", out);
	free(out);
}
END_TEST

/* The modes of curl-fork, each of which prints the same with and without
 * the shim when hook-curl.c's fork handlers leave its table lock as they
 * found it:
 * - jump: a signal handler siglongjmp()s out of a fork() after
 *   hook-curl.c's prepare handler took the lock (it used to stay held:
 *   every later hooked call of the process, and the next fork(), waited
 *   for good);
 * - handler: a signal handler forks while its thread holds the lock (the
 *   prepare handler used to wait for it: the handler never returned);
 * - storm: the same, from random signals (which land right after the
 *   lock's atomic instruction more often than anywhere else). */
static const struct {
	const char *mode;
	const char *want;
} curl_fork_cases[] = {
	{"jump", "jump-lock-free 1\njump-child-free 1\n"},
	{"handler", "handler-lock-free 1\nhandler-child-free 1\n"},
	{"storm", "storm-forks 1\nstorm-free 1\n"},
};

START_TEST(curl_forks)
{
	char path[4096], *argv[] = {path, (char *)curl_fork_cases[_i].mode, NULL}, *out;

	snprintf(path, sizeof(path), "%s/curl-fork", test_env_path("HELPER_DIR"));
	if (access(path, X_OK) != 0) {
		fprintf(stderr, "no libcurl: %s not built, not tested\n", path);
		return;
	}
	out = run_both(argv, NULL);
	ck_assert_msg(strcmp(out, curl_fork_cases[_i].want) == 0, "curl-fork %s:\n%s",
		      curl_fork_cases[_i].mode, out);
	free(out);
}
END_TEST

/* A SIGALRM handler that siglongjmp()s out of libfcgi's FCGX_Finish_r()
 * (a request timeout), then FCGX_Free() of the dropped request
 * (hook-fcgi.c kept "finishing" set, took the free for part of the
 * finish, and left the dropped request published). */
START_TEST(fcgi_jump_out_of_finish)
{
	char path[4096], *argv[] = {path, NULL}, *out;

	helper_path(path, sizeof(path), "fcgi-jump");
	out = run_both(argv, NULL);
	ck_assert_str_eq(out, "free-ends 1\nnext-ends 1\n");
	free(out);
}
END_TEST

/* The curl-lists runs have a context (TRACEPARENT), so that the shim has a
 * traceparent to add to their requests. */
static char *curl_lists_env[] = {
	"TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", NULL};

START_TEST(curl_list_freed_before_a_file_transfer)
{
	char path[4096], file[] = "/tmp/ctxshim-test-XXXXXX";
	char *argv[] = {path, "freed", file, NULL}, *out;
	int fd;

	snprintf(path, sizeof(path), "%s/curl-lists", test_env_path("HELPER_DIR"));
	if (access(path, X_OK) != 0) {
		fprintf(stderr, "no libcurl: %s not built, not tested\n", path);
		return;
	}
	/* What the file:// transfer reads. */
	fd = test_mkstemp(file);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "hello\n", 6), 6);
	close(fd);
	out = run_both(argv, curl_lists_env);
	ck_assert_str_eq(out, "http 0\nfile 0 hello\n");
	free(out);
}
END_TEST

START_TEST(curl_list_set_out_of_memory_is_sent)
{
	char path[4096], *argv[] = {path, "oom", NULL}, *out;

	snprintf(path, sizeof(path), "%s/curl-lists", test_env_path("HELPER_DIR"));
	if (access(path, X_OK) != 0) {
		fprintf(stderr, "no libcurl: %s not built, not tested\n", path);
		return;
	}
	/* The same request both ways: the application's lines, and no
	 * traceparent, which would have replaced them. */
	out = run_both(argv, curl_lists_env);
	ck_assert_msg(strstr(out, "perform 0\n") &&
			      strstr(out, "\n  Authorization: Bearer secret\n"),
		      "%s", out);
	free(out);
}
END_TEST

/* ---- exec on a small stack ---------------------------------------------- */

static const char *const exec_fns[] = {
	"execve", "execv",  "execvp",  "execvpe",  "execl",
	"execle", "execlp", "fexecve", "execveat",
};

START_TEST(exec_on_small_clone_stack)
{
	char path[4096],
		*argv[] = {path, "clone-exec", (char *)exec_fns[_i], "2048", NULL};
	char want[128], *out;

	helper_path(path, sizeof(path), "host-safe");
	out = run_both(argv, NULL);
	/* Without the shim 2 KiB of stack are enough for all of them. */
	snprintf(want, sizeof(want), "%s stack 2048: child exit 0\n", exec_fns[_i]);
	ck_assert_str_eq(out, want);
	free(out);
}
END_TEST

/* A signal handler's exec inside the thread's own, both failing, after a
 * vfork() child's exec left its environment's mapping behind: the outer
 * exec unmapped the leftover but left it noted while it mapped its own,
 * and the handler's exec unmapped it again -- the outer one's new mapping,
 * at the same address (hooks/hook-exec.c, hook_exec_map()). */
START_TEST(exec_in_a_handler_inside_an_exec)
{
	char path[4096], *argv[] = {path, NULL}, *out;
	char *const env[] = {"CTXSHIM_FOLLOW_EXEC=1", NULL};

	helper_path(path, sizeof(path), "exec-nest");
	out = run_both(argv, env);
	ck_assert_str_eq(out, "vfork child: status 0\n"
			      "exec: No such file or directory\n"
			      "nested exec: No such file or directory\n"
			      "unmapped twice: 0\n"
			      "still mapped: 0\n");
	free(out);
}
END_TEST

static const char *const execl_fns[] = {"execl", "execle", "execlp"};

/* glibc's execl family takes any number of arguments on the stack (a VLA):
 * under the shim, 1001 of them in a vfork child leave the parent's
 * mappings as they were (the hook used to map the vector, and the child's
 * exec left the mapping in the parent). */
START_TEST(execl_many_arguments_under_vfork)
{
	char path[4096], *argv[] = {path, "vfork-execl", (char *)execl_fns[_i], NULL};
	char want[128], *out;

	helper_path(path, sizeof(path), "host-safe");
	out = run_both(argv, NULL);
	snprintf(want, sizeof(want),
		 "%s 1001 arguments under vfork: child exit 0, maps unchanged\n",
		 execl_fns[_i]);
	ck_assert_str_eq(out, want);
	free(out);
}
END_TEST

/* A list with INT_MAX arguments and no end: glibc's execl family stops
 * counting there and fails with E2BIG; under the shim too (the hook used to
 * count on, into unreadable memory: SIGSEGV). */
START_TEST(execl_int_max_arguments)
{
	char path[4096], *argv[] = {path, "execl-int-max", (char *)execl_fns[_i], NULL};
	char *out;

	helper_path(path, sizeof(path), "host-safe");
#ifdef __x86_64__
	char want[128], *err;
	int st;

	/* Only under the shim: glibc's own answer is the one spelled out
	 * here, and each run counts 2^31 words (about 8 s of CPU), which
	 * run_both() would double for nothing. */
	st = test_run_capture(argv, NULL, true, &out, &err, 60000);
	snprintf(want, sizeof(want), "%s with INT_MAX arguments: -1 %s\n",
		 execl_fns[_i], strerror(E2BIG));
	ck_assert_msg(st == 0, "wait status %#x:\n%s%s", st, out, err);
	ck_assert_str_eq(out, want);
	free(err);
#else
	out = run_both(argv, NULL);
#endif
	free(out);
}
END_TEST

/* ---- SIGPIPE from the shim's own lines ------------------------------------ */

/* Runs argv with stdin /dev/null, stdout captured and stderr a pipe (or a
 * socket) whose reading end is closed; returns the wait status. */
static int
run_dead_stderr(
	char *const argv[], const char *env, bool preload, bool sock, char **out)
{
	char tmpl[] = "/tmp/ctxshim-test-XXXXXX";
	int fo = test_mkstemp(tmpl), dead[2], st;
	pid_t pid;

	ck_assert_int_ge(fo, 0);
	unlink(tmpl);
	if (sock)
		ck_assert_int_eq(
			socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, dead), 0);
	else
		ck_assert_int_eq(pipe2(dead, O_CLOEXEC), 0);
	close(dead[0]); /* the reader is gone */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY);

		dup2(devnull, 0);
		dup2(fo, 1);
		dup2(dead[1], 2);
		/* A test runner may have SIGPIPE ignored: the default is what
		 * kills a daemon. */
		signal(SIGPIPE, SIG_DFL);
		unsetenv("LD_PRELOAD");
		if (preload) {
			setenv("LD_PRELOAD", test_env_path("CTXSHIM_LIB"), 1);
			putenv((char *)env);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	close(dead[1]);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	lseek(fo, 0, SEEK_SET);
	*out = calloc(1, 4096);
	ck_assert_ptr_nonnull(*out);
	ck_assert_int_ge(read(fo, *out, 4095), 0);
	close(fo);
	return st;
}

static const struct {
	const char *env;
	const char *mode;
	bool sock;
} sigpipe_cases[] = {
	/* the log's first line is written by the constructor */
	{"CTXSHIM_LOG=stderr", "serve", false},
	{"CTXSHIM_LOG=stderr", "serve", true},
	{"CTXSHIM_EVENTS=stderr", "serve", false},
	{"CTXSHIM_EVENTS=stderr", "serve", true},
	/* the application's own SIGPIPE stays pending and is delivered */
	{"CTXSHIM_EVENTS=stderr", "pending", false},
	/* nothing of ours stays pending or reaches a handler */
	{"CTXSHIM_EVENTS=stderr", "blocked", false},
	{"CTXSHIM_EVENTS=stderr", "handler", false},
	{"CTXSHIM_EVENTS=stderr", "handler", true},
};

START_TEST(no_sigpipe_from_log_lines)
{
	char path[4096],
		*argv[] = {path, "sigpipe", (char *)sigpipe_cases[_i].mode, NULL};
	char *out0, *out1;
	int st0, st1;

	helper_path(path, sizeof(path), "host-safe");
	st0 = run_dead_stderr(argv, sigpipe_cases[_i].env, false,
			      sigpipe_cases[_i].sock, &out0);
	st1 = run_dead_stderr(argv, sigpipe_cases[_i].env, true, sigpipe_cases[_i].sock,
			      &out1);
	ck_assert_msg(WIFEXITED(st0) && WEXITSTATUS(st0) == 0,
		      "without the shim: %#x\n%s", st0, out0);
	ck_assert_msg(st0 == st1, "%s, mode %s, %s: wait status %#x with the shim:\n%s",
		      sigpipe_cases[_i].env, sigpipe_cases[_i].mode,
		      sigpipe_cases[_i].sock ? "socket" : "pipe", st1, out1);
	ck_assert_msg(strcmp(out0, out1) == 0,
		      "output differs:\n--- without\n%s--- with\n%s", out0, out1);
	if (strcmp(sigpipe_cases[_i].mode, "pending") == 0)
		ck_assert_ptr_nonnull(strstr(out1, "SIGPIPE taken by sigwait: 1"));
	free(out0);
	free(out1);
}
END_TEST

/* ---- SIGXFSZ from the shim's own lines ------------------------------------ */

/* A log or event log file already at the size limit (ulimit -f) that the
 * application runs under: the kernel answers a write past it with SIGXFSZ,
 * whose default action ends the process (log.c).  Only the line is lost. */
START_TEST(no_sigxfsz_from_log_lines)
{
	static const char *const vars[] = {"CTXSHIM_LOG", "CTXSHIM_EVENTS"};
	char path[4096], *argv[] = {path, "sigpipe", "serve", NULL}, *out;
	char tmpl[] = "/tmp/ctxshim-test-XXXXXX", var[4200], fill[4096];
	char *env[] = {var, NULL};
	struct rlimit saved, low;
	struct stat st;
	int fd = test_mkstemp(tmpl);

	ck_assert_int_ge(fd, 0);
	memset(fill, 'x', sizeof(fill));
	ck_assert_int_eq(write(fd, fill, sizeof(fill)), (ssize_t)sizeof(fill));
	close(fd);
	snprintf(var, sizeof(var), "%s=%s", vars[_i], tmpl);
	helper_path(path, sizeof(path), "host-safe");
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &saved), 0);
	low = saved;
	low.rlim_cur = sizeof(fill);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &low), 0);
	out = run_both(argv, env);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &saved), 0);
	ck_assert_ptr_nonnull(strstr(out, "served\n"));
	ck_assert_int_eq(stat(tmpl, &st), 0);
	ck_assert_int_eq(st.st_size, (off_t)sizeof(fill));
	unlink(tmpl);
	free(out);
}
END_TEST

/* ---- log descriptors with a standard descriptor closed ------------------- */

/* Runs /bin/sh with descriptor closed_fd closed, CTXSHIM_LOG and
 * CTXSHIM_EVENTS set to files in dir (with the shim), and has it say which
 * of 0, 1 and 2 are open on descriptor 3; returns that (malloc'd). */
static char *
std_fds_seen(int closed_fd, const char *dir, bool preload)
{
	static const char script[] = "for f in 0 1 2; do if [ -e /proc/self/fd/$f ]; "
				     "then echo $f open; else echo $f closed; fi; "
				     "done >&3";
	char tmpl[] = "/tmp/ctxshim-test-XXXXXX", log[4200], ev[4200], *out;
	int fo = test_mkstemp(tmpl), st;
	pid_t pid;

	ck_assert_int_ge(fo, 0);
	unlink(tmpl);
	snprintf(log, sizeof(log), "CTXSHIM_LOG=%s/log", dir);
	snprintf(ev, sizeof(ev), "CTXSHIM_EVENTS=%s/events", dir);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(fo, 3);
		close(closed_fd);
		unsetenv("LD_PRELOAD");
		if (preload) {
			setenv("LD_PRELOAD", test_env_path("CTXSHIM_LIB"), 1);
			putenv(log);
			putenv(ev);
		}
		execl("/bin/sh", "sh", "-c", script, (char *)NULL);
		_exit(127);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sh: wait status %#x", st);
	lseek(fo, 0, SEEK_SET);
	out = calloc(1, 4096);
	ck_assert_ptr_nonnull(out);
	ck_assert_int_ge(read(fo, out, 4095), 0);
	close(fo);
	return out;
}

/* A daemon started with 2>&- (or 0<&-, 1>&-): the descriptors the shim
 * opens for its log and event log at start take the closed number
 * first, and must not stay there, where the program's next open(), or
 * its writes to that standard descriptor, would find our file (events.c
 * kept the event log on 2). */
START_TEST(log_files_with_a_standard_descriptor_closed)
{
	char dir[] = "/tmp/ctxshim-test-XXXXXX";
	char *out0, *out1;

	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	out0 = std_fds_seen(_i, dir, false);
	out1 = std_fds_seen(_i, dir, true);
	ck_assert_msg(strcmp(out0, out1) == 0,
		      "descriptor %d closed at start:\n--- without the shim\n%s--- "
		      "with it\n%s",
		      _i, out0, out1);
	free(out0);
	free(out1);
}
END_TEST

/* ---- log on a FIFO without a reader ---------------------------------------- */

/* CTXSHIM_LOG or CTXSHIM_EVENTS naming a FIFO whose reader is not there
 * (not started yet, or gone): opening it for writing waits for a reader,
 * and log.c and events.c did that in the constructor, before main(), so
 * the program never started.  Only the log is lost. */
START_TEST(log_on_a_fifo_without_a_reader)
{
	static const char *const vars[] = {"CTXSHIM_LOG", "CTXSHIM_EVENTS"};
	char dir[] = "/tmp/ctxshim-test-XXXXXX", fifo[4096], var[4200];
	char *env[] = {var, NULL}, *argv[] = {"/bin/sh", "-c", "echo started", NULL};
	char *out, *err;
	int st;

	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	snprintf(var, sizeof(var), "%s=%s", vars[_i], fifo);
	st = test_run_capture(argv, env, true, &out, &err, 20000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: wait status %#x\n%s",
		      var, st, err);
	ck_assert_str_eq(out, "started\n");
	unlink(fifo);
	free(out);
	free(err);
}
END_TEST

/* ---- ucontext ----------------------------------------------------------- */

START_TEST(coroutine_resumed_on_another_thread)
{
	char path[4096], *argv[] = {path, "uc-migrate", NULL}, *out;

	helper_path(path, sizeof(path), "host-safe");
	out = run_both(argv, NULL);
	ck_assert_str_eq(out, "thread A ends\n"
			      "coro1 resumed on thread B\n"
			      "thread B back on its own stack\n"
			      "done\n");
	free(out);
}
END_TEST

START_TEST(setcontext_on_a_small_coroutine_stack)
{
	char path[4096], *argv[] = {path, "uc-small-stack", "1024", NULL}, *out;
	char *env[] = {
		"TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		NULL};

	helper_path(path, sizeof(path), "host-safe");
	if (strchr(test_env_path("CTXSHIM_LIB"), ' ')) {
		/* A sanitizer runtime preloaded too: its memcpy() interceptor
		 * alone needs more than the coroutine has. */
		fprintf(stderr, "sanitizer build: small coroutine stack not tested\n");
		return;
	}
	out = run_both(argv, env);
	ck_assert_str_eq(out, "coroutine on a 1024-byte stack: back in main\n");
	free(out);
}
END_TEST

static const char *const uc_first_call[] = {"getcontext", "makecontext"};

START_TEST(dlerror_kept_across_a_first_ucontext_call)
{
	char path[4096], want[64], *out;
	char *argv[] = {path, "uc-dlerror", (char *)uc_first_call[_i], NULL};

	helper_path(path, sizeof(path), "host-safe");
	out = run_both(argv, NULL);
	snprintf(want, sizeof(want), "%s: dlerror kept\n", uc_first_call[_i]);
	ck_assert_str_eq(out, want);
	free(out);
}
END_TEST

/* ---- seccomp ------------------------------------------------------------ */

START_TEST(request_in_a_seccomp_strict_thread)
{
	char path[4096], *argv[] = {path, "seccomp-strict", NULL}, *out;

	helper_path(path, sizeof(path), "host-safe");
	out = run_both(argv, NULL);
	ck_assert_str_eq(out, "sandboxed thread: step 3\n"
			      "client got 27 bytes: HTTP/1.1 204 No Content\n");
	free(out);
}
END_TEST

START_TEST(fd_moves_under_a_seccomp_filter)
{
	char path[4096], *argv[] = {path, "seccomp-fds", NULL}, *out;

	helper_path(path, sizeof(path), "host-safe");
	out = run_both(argv, NULL);
	ck_assert_str_eq(out, "dup2: 100\n"
			      "dup3: 101\n"
			      "close_range: 0\n"
			      "dup2: 100\n"
			      "close_range unshare: 0\n"
			      "dup2: 300\n"
			      "closefrom: fd 300 closed\n");
	free(out);
}
END_TEST

/* ---- threads ------------------------------------------------------------ */

START_TEST(thread_started_during_a_dlopen)
{
	char path[4096], lib[4096], *argv[] = {path, "dlopen-ctor", lib, NULL}, *out;
	/* the main thread has a context, and so has the thread it starts */
	char *env[] = {"TRACEPARENT=00-4bf92f3577b34da6a3ce929d0e0e4736-"
		       "00f067aa0ba902b7-01",
		       NULL};

	helper_path(path, sizeof(path), "host-safe");
	snprintf(lib, sizeof(lib), "%s/libctor-wait.so", test_env_path("HELPER_DIR"));
	out = run_both(argv, env);
	ck_assert_str_eq(out, "worker: pthread_create 0\n"
			      "dlopen: ok\n");
	free(out);
}
END_TEST

START_TEST(shim_dlopened_by_the_program)
{
	char path[4096], lib[4096], *argv[] = {path, "dlopen-shim", lib, NULL}, *out;
	char *env[] = {"GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384", NULL};

	helper_path(path, sizeof(path), "host-safe");
	snprintf(lib, sizeof(lib), "%s", test_shim_path());
	out = run_both(argv, env);
	ck_assert_str_eq(out, "dlopen: ok\n"
			      "pthread_create: 0\n"
			      "siglongjmp: ok\n");
	free(out);
}
END_TEST

/* ---- nghttp2 ------------------------------------------------------------ */

START_TEST(h2_callbacks_set_before_the_shim)
{
	char path[4096], *argv[] = {path, NULL}, *out;

	snprintf(path, sizeof(path), "%s/h2-early", test_env_path("HELPER_DIR"));
	if (access(path, X_OK) != 0) {
		fprintf(stderr, "no libnghttp2: %s not built, not tested\n", path);
		return;
	}
	out = run_both(argv, NULL);
	ck_assert_str_eq(out, "frame_recv 2 stream_close 1\n");
	free(out);
}
END_TEST

static const char *const h2_alloc_mode[] = {"abba", "self"};

/* helpers/h2-alloc.c: the application's nghttp2_mem allocator, called by
 * nghttp2_session_server_new3(), takes a lock another thread holds while
 * it deletes a session, or deletes one itself: no deadlock under the
 * shim (its lock is not held while nghttp2 calls the allocator). */
START_TEST(h2_allocator_takes_locks)
{
	char path[4096], *argv[] = {path, (char *)h2_alloc_mode[_i], NULL}, *out;

	snprintf(path, sizeof(path), "%s/h2-alloc", test_env_path("HELPER_DIR"));
	if (access(path, X_OK) != 0) {
		fprintf(stderr, "no libnghttp2: %s not built, not tested\n", path);
		return;
	}
	out = run_both(argv, NULL);
	ck_assert_msg(strstr(out, "returned 0") && strstr(out, "DONE\n"), "%s", out);
	free(out);
}
END_TEST

static const char *const curl_push_mode[] = {"keep", "reuse", "deny"};

/* helpers/curl-push.c: an HTTP/2 push makes libcurl copy the parent handle
 * itself, with the application's header list.  Later handles without a
 * list of their own still get a traceparent, and the pushed handle, used
 * for a transfer of its own, still sends the list it was copied with
 * (X-App: parent), as it does without the shim. */
START_TEST(curl_server_push)
{
	char path[4096], *argv[] = {path, (char *)curl_push_mode[_i], NULL};
	char *out[2], *err;
	int st, i;

	snprintf(path, sizeof(path), "%s/curl-push", test_env_path("HELPER_DIR"));
	if (access(path, X_OK) != 0) {
		fprintf(stderr, "no libcurl or libnghttp2: %s not built, not tested\n",
			path);
		return;
	}
	for (i = 0; i < 2; i++) {
		st = test_run_capture(argv, i ? curl_lists_env : NULL, i == 1, &out[i],
				      &err, 60000);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
				      strstr(out[i], "DONE\n"),
			      "curl-push %s%s: %#x\n%s%s", curl_push_mode[_i],
			      i ? " (shim)" : "", st, out[i], err);
		free(err);
	}
	ck_assert_msg(strstr(out[0], strcmp(curl_push_mode[_i], "deny") ? "PUSHED 1\n"
									: "PUSHED 0\n"),
		      "%s", out[0]);
	ck_assert_msg(
		strstr(out[1], "REQ /before-push x-app=- tp=1\n") &&
			strstr(out[1], "REQ /page x-app=parent tp=1\n") &&
			strstr(out[1], "REQ /after-push-no-list x-app=- tp=1\n") &&
			strstr(out[1], "REQ /after-push-own-list x-app=own tp=1\n"),
		"--- without\n%s--- with\n%s", out[0], out[1]);
	if (strcmp(curl_push_mode[_i], "reuse") == 0)
		ck_assert_msg(
			strstr(out[0],
			       "REQ /reuse-pushed-handle x-app=parent tp=0\n") &&
				strstr(out[1],
				       "REQ /reuse-pushed-handle x-app=parent tp=1\n"),
			"the pushed handle's own list:\n--- without\n%s--- with\n%s",
			out[0], out[1]);
	free(out[0]);
	free(out[1]);
}
END_TEST

/* ---- OpenSSL ------------------------------------------------------------ */

START_TEST(tls_own_descriptor_bio)
{
	char path[4096], *argv[] = {path, NULL}, *out;

	snprintf(path, sizeof(path), "%s/tls-ownbio", test_env_path("HELPER_DIR"));
	if (access(path, X_OK) != 0) {
		fprintf(stderr, "no libssl: %s not built, not tested\n", path);
		return;
	}
	out = run_both(argv, NULL);
	/* libssl itself never asks this BIO for its fd. */
	ck_assert_msg(strstr(out, " get_fd=0\nclient ctrl=") &&
			      strstr(out, " get_fd=0\nDONE\n"),
		      "%s", out);
	free(out);
}
END_TEST

TEST_SUITE(preload_host_suite)
{
	Suite *s = suite_create("preload-host");
	TCase *tc = tcase_create("host");

	tcase_add_test(tc, curl_setopt_out_of_memory);
	tcase_add_test(tc, curl_duphandle_at_a_stale_address);
	tcase_add_loop_test(tc, curl_jumps, 0,
			    sizeof(curl_jump_cases) / sizeof(curl_jump_cases[0]));
	tcase_add_loop_test(tc, curl_forks, 0,
			    sizeof(curl_fork_cases) / sizeof(curl_fork_cases[0]));
	tcase_add_test(tc, fcgi_jump_out_of_finish);
	tcase_add_test(tc, curl_list_freed_before_a_file_transfer);
	tcase_add_test(tc, curl_list_set_out_of_memory_is_sent);
	tcase_add_loop_test(tc, exec_on_small_clone_stack, 0,
			    (int)(sizeof(exec_fns) / sizeof(exec_fns[0])));
	tcase_add_test(tc, exec_in_a_handler_inside_an_exec);
	tcase_add_loop_test(tc, execl_many_arguments_under_vfork, 0,
			    (int)(sizeof(execl_fns) / sizeof(execl_fns[0])));
	tcase_add_loop_test(tc, execl_int_max_arguments, 0,
			    (int)(sizeof(execl_fns) / sizeof(execl_fns[0])));
	tcase_add_loop_test(tc, no_sigpipe_from_log_lines, 0,
			    (int)(sizeof(sigpipe_cases) / sizeof(sigpipe_cases[0])));
	tcase_add_loop_test(tc, no_sigxfsz_from_log_lines, 0, 2);
	tcase_add_loop_test(tc, log_files_with_a_standard_descriptor_closed, 0, 3);
	tcase_add_loop_test(tc, log_on_a_fifo_without_a_reader, 0, 2);
	tcase_add_test(tc, coroutine_resumed_on_another_thread);
	tcase_add_test(tc, setcontext_on_a_small_coroutine_stack);
	tcase_add_loop_test(tc, dlerror_kept_across_a_first_ucontext_call, 0, 2);
	tcase_add_test(tc, request_in_a_seccomp_strict_thread);
	tcase_add_test(tc, fd_moves_under_a_seccomp_filter);
	tcase_add_test(tc, thread_started_during_a_dlopen);
	tcase_add_test(tc, shim_dlopened_by_the_program);
	tcase_add_test(tc, h2_callbacks_set_before_the_shim);
	tcase_add_loop_test(tc, h2_allocator_takes_locks, 0,
			    (int)(sizeof(h2_alloc_mode) / sizeof(h2_alloc_mode[0])));
	tcase_add_loop_test(tc, curl_server_push, 0,
			    (int)(sizeof(curl_push_mode) / sizeof(curl_push_mode[0])));
	tcase_add_test(tc, tls_own_descriptor_bio);
	suite_add_tcase(s, tc);
	return s;
}
