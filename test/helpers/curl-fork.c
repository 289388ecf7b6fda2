/* SPDX-License-Identifier: Apache-2.0 */
/* curl-fork: fork() around libcurl calls, where a signal handler meets
 * hooks/hook-curl.c's fork handlers, which take its table's lock for the
 * fork.  No tracing code: what it prints is the same with and without the
 * shim when those handlers leave the lock as they found it
 * (test-preload-host.c).
 *
 *   curl-fork jump
 *
 * A signal arrives while fork() runs its fork handlers (raised by one of
 * the program's own, registered before hook-curl.c's, whose prepare
 * handler thus ran first), and its handler siglongjmp()s out of the
 * fork(), as a timeout's would.  Then another thread's
 * curl_easy_setopt(), and one in the child of a fork() that returns.
 * Prints "jump-lock-free <0|1>" (that setopt returned within 5 s: the
 * fork's lock used to stay held, and every later hooked call of the
 * process waited for good) and "jump-child-free <0|1>".
 *
 *   curl-fork handler
 *
 * A signal handler that forks, run while the thread holds hook-curl.c's
 * lock: the executable's calloc() (which hook-curl.c takes a new handle's
 * entry from, under its lock) raises it when called from libctxshim.so
 * during a curl_easy_setopt(CURLOPT_URL) of a new handle (with random
 * signals and any allocator, a handler lands there now and then; this
 * lands there every time).  The child goes on with that setopt, then
 * both processes call curl_easy_setopt() from another thread.  Prints
 * "handler-lock-free <0|1>" (the fork's prepare handler used to wait for
 * the lock its own thread held: the handler never returned) and
 * "handler-child-free <0|1>"; without the shim nothing forks and both
 * say 1.
 *
 *   curl-fork storm
 *
 * The same with random signals: another thread sends one every few
 * microseconds for a second (on a loaded machine up to 10 s, until 20
 * forks) while the main thread calls curl_easy_setopt(); the handler
 * forks.  Most that land in the lock land
 * right after the atomic instruction that takes it (a flag of "mine" set
 * after it is not enough).  Prints "storm-forks <0|1>" (at least 20: a
 * sanitizer build forks slowly) and "storm-free <0|1>", as "handler"
 * does. */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "signal-storm.h"

static atomic_int armed;
static sigjmp_buf env;
static pid_t parent;

static void *
setopt_thread(void *arg)
{
	/* a hooked option that allocates nothing in libcurl */
	(void)curl_easy_setopt((CURL *)arg, CURLOPT_PREREQDATA, NULL);
	return arg;
}

/* Another thread's curl_easy_setopt() on h returns within 5 s: nothing
 * left hook-curl.c's table lock held. */
static bool
lock_free(CURL *h)
{
	struct timespec limit;
	pthread_t th;
	void *ret;

	clock_gettime(CLOCK_REALTIME, &limit);
	limit.tv_sec += 5;
	return pthread_create(&th, NULL, setopt_thread, h) == 0 &&
	       pthread_timedjoin_np(th, &ret, &limit) == 0;
}

/* In a child: exits with whether lock_free(h); in the parent, whether
 * the child said so. */
static bool
child_said(pid_t pid, CURL *h)
{
	int st;

	if (pid == 0)
		_exit(lock_free(h) ? 0 : 1);
	return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	       WEXITSTATUS(st) == 0;
}

/* ---- jump ---------------------------------------------------------------- */

static void
on_jump(int sig)
{
	(void)sig;
	siglongjmp(env, 1);
}

static void
raise_prepare(void)
{
	if (atomic_exchange(&armed, 0))
		raise(SIGUSR1);
}

static int
mode_jump(void)
{
	struct sigaction sa = {.sa_handler = on_jump};
	CURL *h;

	/* Ours first: hook-curl.c registers its handlers when the process
	 * first calls libcurl through it, and prepare handlers run last
	 * registered first. */
	if (pthread_atfork(raise_prepare, NULL, NULL) != 0 ||
	    curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
		return 2;
	h = curl_easy_init();
	if (!h)
		return 2;
	(void)curl_easy_setopt(h, CURLOPT_PREREQDATA, NULL);
	(void)sigaction(SIGUSR1, &sa, NULL);
	/* A second fork() with the lock left held by the first used to wait
	 * for good: end then, as no run without the shim does. */
	alarm(20);
	if (sigsetjmp(env, 1) == 0) {
		atomic_store(&armed, 1);
		if (fork() == 0)
			_exit(0);
		printf("fork returned\n");
		return 1;
	}
	printf("jump-lock-free %d\n", lock_free(h));
	(void)fflush(stdout);
	printf("jump-child-free %d\n", child_said(fork(), h));
	alarm(0);
	curl_easy_cleanup(h);
	return 0;
}

/* ---- handler ------------------------------------------------------------- */

void *calloc(size_t n, size_t size);

static void *(*next_calloc)(size_t, size_t);

/* Called from libctxshim.so (dladdr() allocates nothing). */
static bool
from_shim(const void *ret)
{
	Dl_info info;

	return dladdr(ret, &info) && info.dli_fname &&
	       strstr(info.dli_fname, "libctxshim");
}

void *
calloc(size_t n, size_t size)
{
	if (atomic_load(&armed) && from_shim(__builtin_return_address(0)) &&
	    atomic_exchange(&armed, 0))
		raise(SIGUSR1);
	if (!next_calloc)
		next_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
	return next_calloc(n, size);
}

static void
on_fork(int sig)
{
	int e = errno;

	(void)sig;
	/* the child goes on with the interrupted setopt */
	(void)fork();
	errno = e;
}

static int
mode_handler(void)
{
	struct sigaction sa = {.sa_handler = on_fork};
	CURL *h, *other;
	bool free_ok;
	int st;

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
		return 2;
	other = curl_easy_init();
	h = curl_easy_init();
	if (!other || !h)
		return 2;
	(void)curl_easy_setopt(other, CURLOPT_PREREQDATA, NULL);
	(void)sigaction(SIGUSR1, &sa, NULL);
	parent = getpid();
	/* The handler used never to return: end then, as no run without the
	 * shim does. */
	alarm(10);
	atomic_store(&armed, 1);
	(void)curl_easy_setopt(h, CURLOPT_URL, "http://127.0.0.1:1/");
	atomic_store(&armed, 0);
	alarm(0);
	free_ok = lock_free(other);
	if (getpid() != parent)
		_exit(free_ok ? 0 : 1);
	printf("handler-lock-free %d\n", free_ok);
	/* the child, if the handler ran */
	st = 0;
	if (wait(&st) > 0)
		printf("handler-child-free %d\n",
		       WIFEXITED(st) && WEXITSTATUS(st) == 0);
	else
		printf("handler-child-free 1\n");
	curl_easy_cleanup(h);
	curl_easy_cleanup(other);
	return 0;
}

/* ---- storm --------------------------------------------------------------- */

static pthread_t storm_main;
static atomic_int storm_stop, storm_forks;

static void
on_storm(int sig)
{
	int e = errno;
	pid_t pid;

	(void)sig;
	if (atomic_load(&storm_stop))
		return;
	pid = fork();
	if (pid == 0)
		_exit(0);
	if (pid > 0 && waitpid(pid, NULL, 0) == pid)
		atomic_fetch_add(&storm_forks, 1);
	errno = e;
}

/* Sends the signals, then tries the lock, prints, and ends the process
 * (the main thread may be stuck in its handler). */
static void *
storm_kick(void *arg)
{
	signal_storm(storm_main, SIGUSR1, &storm_forks, 20, 1000);
	atomic_store(&storm_stop, 1);
	fprintf(stderr, "forks %d\n", atomic_load(&storm_forks));
	printf("storm-forks %d\nstorm-free %d\n", atomic_load(&storm_forks) >= 20,
	       lock_free(arg));
	(void)fflush(stdout);
	_exit(0);
}

static int
mode_storm(void)
{
	struct sigaction sa = {.sa_handler = on_storm, .sa_flags = SA_RESTART};
	CURL *h, *other;
	pthread_t kick;

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
		return 2;
	h = curl_easy_init();
	other = curl_easy_init();
	if (!h || !other)
		return 2;
	(void)curl_easy_setopt(h, CURLOPT_PREREQDATA, NULL);
	(void)curl_easy_setopt(other, CURLOPT_PREREQDATA, NULL);
	(void)sigaction(SIGUSR1, &sa, NULL);
	storm_main = pthread_self();
	if (pthread_create(&kick, NULL, storm_kick, other) != 0)
		return 2;
	while (!atomic_load(&storm_stop))
		(void)curl_easy_setopt(h, CURLOPT_PREREQDATA, NULL);
	for (;;)
		pause(); /* storm_kick() ends the process */
}

int
main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (strcmp(mode, "jump") == 0)
		return mode_jump();
	if (strcmp(mode, "handler") == 0)
		return mode_handler();
	if (strcmp(mode, "storm") == 0)
		return mode_storm();
	fprintf(stderr, "usage: curl-fork jump|handler|storm\n");
	return 64;
}
