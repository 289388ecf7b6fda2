/* SPDX-License-Identifier: Apache-2.0 */
/* uc-jump: a scheduler that switches to a coroutine and back in a loop,
 * and a SIGALRM timer whose handler siglongjmp()s back to the loop (a
 * request timeout), landing anywhere in the scheduler's switches,
 * hooks/hook-ucontext.c's included.  Started with TRACEPARENT, the
 * scheduler (main) has a context; the coroutine is made on the "early"
 * thread (early-thread.h), which has none, so it runs with none.  The
 * coroutine runs with SIGALRM blocked (its uc_sigmask): every jump leaves
 * the scheduler's own frames, on main's stack.  No tracing code but the
 * read of the thread's record (ctxobs.h).
 *
 *   uc-jump JUMPS
 *
 * After JUMPS jumps (or 20 s), the timer stops, the coroutine is made
 * again (on the early thread, with none), and another thread, started
 * with main's context before the jumps, makes 100 round trips with the
 * same two ucontexts, which must all show the right context on both
 * sides: prints "after jumps=<all|some> coroutine-wrong=<n>
 * scheduler-wrong=<n>" and exits 0 when both are 0, 1 otherwise
 * (hook-ucontext.c used to leave a slot's try-lock held by a switch the
 * jump ended, and every later switch through that slot kept the context
 * it found).  Not main itself: a jump that ends an update of the thread's
 * record leaves it publishing nothing (hook-longjmp.c), and main has no
 * request to publish afterwards. */
#include "config.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>

#include "ctxobs.h"
#include "early-thread.h"

static ucontext_t home, co;
static char co_stack[256 * 1024];
static sigjmp_buf loop_env;
static volatile unsigned long jumps;
/* The checking thread's otel_thread_ctx_v1 (dlsym() once, before) and
 * the span-id of the context it started with. */
static void *const *chk_slot;
static unsigned char chk_span[8];
static bool chk_has;
static unsigned long co_wrong, chk_wrong;
static volatile bool counting;
static pthread_mutex_t go_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t go_cond = PTHREAD_COND_INITIALIZER;
static bool go;

static void
on_alarm(int sig)
{
	(void)sig;
	jumps++;
	siglongjmp(loop_env, 1);
}

/* What the checking thread shows: 0 none, 1 its own context, 2 other. */
static int
shown(void)
{
	const struct otel_thread_ctx_record *r =
		chk_slot ? (const struct otel_thread_ctx_record *)*chk_slot : NULL;

	if (!r)
		return 0;
	return memcmp(r->span_id, chk_span, 8) == 0 ? 1 : 2;
}

static void
co_body(void)
{
	for (;;) {
		/* none, and none without the shim too */
		if (counting && shown() != 0)
			co_wrong++;
		swapcontext(&co, &home);
	}
}

static void
block_alarm(void)
{
	sigset_t alrm;

	/* The timer's signal is the process's: for main's loop only. */
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	(void)pthread_sigmask(SIG_BLOCK, &alrm, NULL);
}

static void
make_co(void *unused)
{
	(void)unused;
	block_alarm();
	if (getcontext(&co) != 0)
		abort();
	co.uc_stack.ss_sp = co_stack;
	co.uc_stack.ss_size = sizeof(co_stack);
	co.uc_link = NULL;
	sigaddset(&co.uc_sigmask, SIGALRM);
	makecontext(&co, co_body, 0);
}

/* One switch to the coroutine and back. */
static void
round_trip(void)
{
	if (swapcontext(&home, &co) != 0)
		abort();
	if (counting && shown() != (chk_has ? 1 : 0))
		chk_wrong++;
}

/* Started with main's context; checks once main is done jumping. */
static void *
checker(void *unused)
{
	const struct otel_thread_ctx_record *r;
	int i;

	(void)unused;
	block_alarm();
	chk_slot = dlsym(RTLD_DEFAULT, OTEL_THREAD_CTX_SYMBOL);
	r = chk_slot ? *chk_slot : NULL;
	chk_has = r != NULL;
	if (r)
		memcpy(chk_span, r->span_id, 8);
	pthread_mutex_lock(&go_lock);
	while (!go)
		pthread_cond_wait(&go_cond, &go_lock);
	pthread_mutex_unlock(&go_lock);
	counting = true;
	for (i = 0; i < 100; i++)
		round_trip();
	counting = false;
	return NULL;
}

int
main(int argc, char **argv)
{
	struct sigaction sa = {.sa_handler = on_alarm};
	struct itimerval t = {.it_interval = {.tv_usec = 53},
			      .it_value = {.tv_usec = 53}};
	struct itimerval off = {{0, 0}, {0, 0}};
	unsigned long want = argc > 1 ? strtoul(argv[1], NULL, 10) : 2000;
	time_t end = time(NULL) + 20;
	pthread_t th;

	sigemptyset(&sa.sa_mask);
	block_alarm(); /* the checker starts with it blocked */
	if (pthread_create(&th, NULL, checker, NULL) != 0)
		return 2;
	(void)pthread_sigmask(SIG_SETMASK, &sa.sa_mask, NULL);
	on_early(make_co, NULL);
	if (sigaction(SIGALRM, &sa, NULL) != 0)
		return 2;
	(void)sigsetjmp(loop_env, 1);
	if (jumps == 0)
		(void)setitimer(ITIMER_REAL, &t, NULL);
	while (jumps < want && time(NULL) < end)
		round_trip();
	(void)setitimer(ITIMER_REAL, &off, NULL);
	block_alarm(); /* one may still be pending */

	on_early(make_co, NULL);
	pthread_mutex_lock(&go_lock);
	go = true;
	pthread_cond_signal(&go_cond);
	pthread_mutex_unlock(&go_lock);
	pthread_join(th, NULL);
	printf("after jumps=%s coroutine-wrong=%lu scheduler-wrong=%lu\n",
	       jumps >= want ? "all" : "some", co_wrong, chk_wrong);
	if ((co_wrong || chk_wrong) && getenv("UCJ_PAUSE"))
		pause();
	return co_wrong || chk_wrong;
}
