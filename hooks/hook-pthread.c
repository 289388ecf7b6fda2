/* SPDX-License-Identifier: Apache-2.0 */
/* pthread_create (and C11 thrd_create): a new thread starts with a copy of
 * its creator's context.
 *
 * The copy is taken at creation time, so a creator that moves on to another
 * request does not change what its worker publishes.  The worker owns its
 * own record (in its own TLS), keeps the context until it changes it, and
 * clears it on return, pthread_exit() or cancellation (the exit path is the
 * pthread key destructor in preload/thread-ctx.c, which glibc's
 * start_thread runs on all three).  A thread created with no current
 * context starts with none.
 *
 * Threads that outlive a request keep the context they were given: a
 * worker started while a request was handled still shows that request
 * after the request is answered, until something on that thread attaches
 * another context (a request it reads itself, a pool item) or the thread
 * ends.  That is what happened as far as the process can tell; only the
 * application knows when such a worker's work for the request is over.
 *
 * Symbol versions: glibc 2.36 exports pthread_create@@GLIBC_2.34 and the
 * compat pthread_create@GLIBC_2.2.5 at the same address (likewise
 * thrd_create@@GLIBC_2.34 and @GLIBC_2.28), so one unversioned definition
 * intercepts references to either, and the default version found with
 * RTLD_NEXT is the right target for both.
 *
 * Threads created before our constructor ran (by another library's
 * constructor, or a .preinit_array function) pass straight through: no
 * context exists yet to copy.  If such a thread attaches a context later,
 * thread-ctx.c registers its exit handler then.
 *
 * Not covered: threads created without pthread_create (raw clone(2)), and
 * glibc-internal ones (timer and AIO helpers use the internal
 * __pthread_create_2_1).  They start without a context.
 *
 * The waits of worker pools -- pthread_cond_wait, pthread_cond_timedwait,
 * pthread_cond_clockwait, C11's cnd_wait and cnd_timedwait (glibc's call
 * its internal pthread functions, not through the PLT), sem_wait,
 * sem_timedwait, sem_clockwait: a worker that waits for its next job
 * after answering the request it read is back in its pool, and stops
 * showing that request (hook-socket.c, hook_socket_thread_wait()).  A
 * thread that publishes nothing from a connection passes straight through
 * (one test of its state).  glibc has two implementations of the first
 * two:
 * @@GLIBC_2.3.2, which every program linked since glibc 2.3.2 references,
 * and the old @GLIBC_2.2.5 ones, for another pthread_cond_t layout.  Ours
 * are defined at version GLIBC_2.3.2 only (".symver ..., name@NODE,
 * remove", and that node in preload/ctxshim.sym), so that an old binary's
 * references still reach glibc's old functions, and forward to the
 * GLIBC_2.3.2 ones, or to an interposer after us that defines them
 * without a version (ctxshim_bind()).  Each of the others has one
 * implementation under both its versions (GLIBC_2.30 or 2.28 or 2.2.5,
 * and GLIBC_2.34), so one unversioned definition serves them. */
#include "config.h"

#include "hooks.h"

#include "events.h"
#include "hook-pthread.h"
#include "hook-scope.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

typedef int (*pthread_create_fn)(pthread_t *,
				 const pthread_attr_t *,
				 void *(*)(void *),
				 void *);
typedef int (*thrd_create_fn)(thrd_t *, thrd_start_t, void *);

#define PT_COND_NODE "GLIBC_2.3.2"

/* The waits (see the top): X(id, name, version, exported name, parameters,
 * arguments, deadline or NULL, its clock or -1).  Exported under another name, bound to name@version by
 * .symver below, when a version is given. */
#define PT_WAITS(X)                                                                    \
	X(cond_wait, "pthread_cond_wait", PT_COND_NODE, ctxshim_pthread_cond_wait_232, \
	  (pthread_cond_t * cv, pthread_mutex_t * m), (cv, m), NULL, -1)               \
	X(cond_timedwait, "pthread_cond_timedwait", PT_COND_NODE,                      \
	  ctxshim_pthread_cond_timedwait_232,                                          \
	  (pthread_cond_t * cv, pthread_mutex_t * m, const struct timespec *t),        \
	  (cv, m, t), t, -1)                                                           \
	X(cond_clockwait, "pthread_cond_clockwait", NULL, pthread_cond_clockwait,      \
	  (pthread_cond_t * cv, pthread_mutex_t * m, clockid_t c,                      \
	   const struct timespec *t),                                                  \
	  (cv, m, c, t), t, c)                                                         \
	X(cnd_wait, "cnd_wait", NULL, cnd_wait, (cnd_t * cv, mtx_t * m), (cv, m),      \
	  NULL, -1)                                                                    \
	X(cnd_timedwait, "cnd_timedwait", NULL, cnd_timedwait,                         \
	  (cnd_t * cv, mtx_t * m, const struct timespec *t), (cv, m, t), t,            \
	  CLOCK_REALTIME)                                                              \
	X(sem_wait, "sem_wait", NULL, sem_wait, (sem_t * sem), (sem), NULL, -1)        \
	X(sem_timedwait, "sem_timedwait", NULL, sem_timedwait,                         \
	  (sem_t * sem, const struct timespec *t), (sem, t), t, CLOCK_REALTIME)        \
	X(sem_clockwait, "sem_clockwait", NULL, sem_clockwait,                         \
	  (sem_t * sem, clockid_t c, const struct timespec *t), (sem, c, t), t, c)

#define PT_WAIT_DECL(id, name, ver, exp, params, args, t, clk) \
	static int(*real_##id) params;                         \
	HOOK_EXPORT int exp params;
PT_WAITS(PT_WAIT_DECL)

static pthread_once_t bind_once = PTHREAD_ONCE_INIT;
static pthread_create_fn real_pthread_create_fn;
static thrd_create_fn real_thrd_create_fn;
static pthread_once_t wait_bind_once = PTHREAD_ONCE_INIT;

/* > 0 while a pool hook submits work on this thread (hook-pthread.h). */
static __thread unsigned inherit_paused;

HOOK_EXPORT int pthread_create(pthread_t *thread,
			       const pthread_attr_t *attr,
			       void *(*start)(void *),
			       void *arg);
HOOK_EXPORT int thrd_create(thrd_t *thr, thrd_start_t start, void *arg);

static void
hook_pthread_bind_once(void)
{
	real_pthread_create_fn = (pthread_create_fn)ctxshim_bind(
		"pthread_create", NULL, (const void *)pthread_create, true);
	real_thrd_create_fn = (thrd_create_fn)ctxshim_bind(
		"thrd_create", NULL, (const void *)thrd_create, false);
}

static inline int
real_pthread_create(pthread_t *thread,
		    const pthread_attr_t *attr,
		    void *(*start)(void *),
		    void *arg)
{
	pthread_once(&bind_once, hook_pthread_bind_once);
	return real_pthread_create_fn(thread, attr, start, arg);
}

static void
hook_pthread_wait_bind_once(void)
{
#define PT_WAIT_BIND(id, name, ver, exp, params, args, t, clk)                        \
	real_##id = (__typeof__(real_##id))ctxshim_bind(name, ver, (const void *)exp, \
							true);
	PT_WAITS(PT_WAIT_BIND)
}

static inline void
hook_pthread_wait_bind(void)
{
	pthread_once(&wait_bind_once, hook_pthread_wait_bind_once);
}

/* Bound at load: binding takes the loader's lock, and a first wait is
 * made with the application's mutex held, which a thread running a
 * dlopen()ed library's constructor (under that lock) may be waiting for.
 * A wait in another library's constructor, before ours, binds then. */
__attribute__((constructor(103))) static void
hook_pthread_ctor(void)
{
	hook_pthread_wait_bind();
}

static inline int
real_thrd_create(thrd_t *thr, thrd_start_t start, void *arg)
{
	pthread_once(&bind_once, hook_pthread_bind_once);
	if (!real_thrd_create_fn)
		return thrd_error;
	return real_thrd_create_fn(thr, start, arg);
}

void
hook_pthread_inherit_pause(void)
{
	inherit_paused++;
}

void
hook_pthread_inherit_resume(void)
{
	if (inherit_paused)
		inherit_paused--;
}

struct start_wrap {
	union {
		void *(*posix)(void *);
		thrd_start_t c11;
	} start;
	void *arg;
	struct start_wrap *next; /* on spent_wraps */
	struct ctxshim_sk_inherit inh;
	struct ctxshim_ctx ctx;
};

/* Copies their new threads have published, pushed there by those threads
 * and taken all at once by the next hook_pthread_wrap(): only the
 * creators, which malloc() them, free them.  A free() on the new thread
 * was its first call into malloc: glibc then gave it a tcache and an
 * arena of its own -- threads that allocate nothing (sleepers, pool
 * workers that only wait) each held ~600 bytes more, and a process soon
 * had 8 arenas per core (64 MiB of address space each) instead of one,
 * a difference the application sees (malloc_info(), test-preload-core).
 * Holds at most the copies of the threads started since the last
 * creation.  A push and an exchange of the whole list: no ABA, no lock. */
static struct start_wrap *spent_wraps;

static void
hook_pthread_spent(struct start_wrap *w)
{
	struct start_wrap *head = __atomic_load_n(&spent_wraps, __ATOMIC_RELAXED);

	do
		w->next = head;
	while (!__atomic_compare_exchange_n(&spent_wraps, &head, w, true,
					    __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

/* One copy for the next thread: a spent one if there is any (the others
 * are freed), else a new one. */
static struct start_wrap *
hook_pthread_wrap_get(void)
{
	struct start_wrap *w =
		__atomic_exchange_n(&spent_wraps, NULL, __ATOMIC_ACQUIRE);
	struct start_wrap *s, *next;

	if (!w)
		return malloc(sizeof(*w));
	for (s = w->next; s; s = next) {
		next = s->next;
		free(s);
	}
	return w;
}

/* The creator's context to hand over, in a copy the new thread gives back
 * (spent_wraps); NULL when there is nothing to hand over (or no memory:
 * the thread then simply starts without a context). */
static struct start_wrap *
hook_pthread_wrap(const void *start)
{
	const struct ctxshim_ctx *cur;
	struct start_wrap *w;
	int saved_errno;

	if (!ctxshim_active() || inherit_paused)
		return NULL;
	cur = ctxshim_current();
	if (!cur)
		return NULL;
	/* libuv's pool workers are pool infrastructure (hook-pthread.h),
	 * whichever call started them.  (Told by their start routine: an
	 * interposer before us that wraps it, as ASan's pthread_create
	 * does, hides it.) */
	if (start && hook_pool_uv_thread(start))
		return NULL;
	/* Thread creation allocates anyway (stack, descriptor). */
	saved_errno = errno;
	w = hook_pthread_wrap_get();
	errno = saved_errno;
	if (w) {
		ctxshim_ctx_copy(&w->ctx, cur);
		hook_socket_inherit_take(&w->inh, cur);
	}
	return w;
}

static void
hook_pthread_unwrap_failed(struct start_wrap *w)
{
	int saved_errno = errno;

	free(w);
	errno = saved_errno;
}

/* First thing on the new thread, before any application code: publish the
 * copy.  Nothing after the application's start routine may matter, since
 * pthread_exit() and cancellation never come back here. */
static void
hook_pthread_adopt(struct start_wrap *w)
{
	ctxshim_attach(&w->ctx);
	CTXSHIM_EVENT(CTXSHIM_EV_ATTACH, -1, &w->ctx, "thread-start");
	hook_socket_inherit_adopt(&w->inh);
}

static void *
hook_pthread_start(void *p)
{
	struct start_wrap *w = p;
	void *(*start)(void *) = w->start.posix;
	void *arg = w->arg;

	hook_pthread_adopt(w);
	hook_pthread_spent(w);
	return start(arg);
}

/* glibc's thrd_create runs the start routine as int (*)(void *) (its
 * start_thread knows a C11 thread by the attribute it passes). */
static int
hook_pthread_thrd_start(void *p)
{
	struct start_wrap *w = p;
	thrd_start_t start = w->start.c11;
	void *arg = w->arg;

	hook_pthread_adopt(w);
	hook_pthread_spent(w);
	return start(arg);
}

static int
hook_pthread_create(pthread_t *thread,
		    const pthread_attr_t *attr,
		    void *(*start)(void *),
		    void *arg)
{
	struct start_wrap *w = hook_pthread_wrap((const void *)start);
	int r;

	if (!w)
		return real_pthread_create(thread, attr, start, arg);
	w->start.posix = start;
	w->arg = arg;
	r = real_pthread_create(thread, attr, hook_pthread_start, w);
	if (r != 0)
		hook_pthread_unwrap_failed(w);
	return r;
}

static int
hook_pthread_thrd_create(thrd_t *thr, thrd_start_t start, void *arg)
{
	struct start_wrap *w = hook_pthread_wrap(NULL);
	int r;

	if (!w)
		return real_thrd_create(thr, start, arg);
	w->start.c11 = start;
	w->arg = arg;
	r = real_thrd_create(thr, hook_pthread_thrd_start, w);
	if (r != thrd_success)
		hook_pthread_unwrap_failed(w);
	return r;
}

HOOK_EXPORT int
pthread_create(pthread_t *thread,
	       const pthread_attr_t *attr,
	       void *(*start)(void *),
	       void *arg)
{
	return hook_pthread_create(thread, attr, start, arg);
}

HOOK_EXPORT int
thrd_create(thrd_t *thr, thrd_start_t start, void *arg)
{
	return hook_pthread_thrd_create(thr, start, arg);
}

/* ---- waits: a worker back in its pool ---- */

/* A timed wait whose deadline is this close (or past) is a lock handed
 * between threads, not a worker idle until its next job: CPython's GIL is
 * a condition variable waited on 5 ms at a time (sys.getswitchinterval()),
 * by every thread of a threading server that wants to run again after a
 * write -- its request is far from over.  Pools wait for a job untimed, or
 * for much longer. */
#define PT_SHORT_WAIT_NS 100000000LL

/* Does deadline t (on clock clk; -1: unknown, as for a condition variable
 * whose clock is its attribute's) end within PT_SHORT_WAIT_NS?  An
 * unknown clock is taken as either one: a CLOCK_REALTIME deadline is
 * decades away on CLOCK_MONOTONIC, and a CLOCK_MONOTONIC one decades past
 * on CLOCK_REALTIME, so only the right one can be close.  Keeps errno. */
static __attribute__((noinline, cold)) bool
hook_pthread_wait_short(const struct timespec *t, clockid_t clk)
{
	static const clockid_t either[] = {CLOCK_REALTIME, CLOCK_MONOTONIC};
	int saved_errno = errno;
	bool is_short = false;
	struct timespec now;
	unsigned i;

	for (i = 0; i < 2 && !is_short; i++) {
		clockid_t c = clk >= 0 ? clk : either[i];
		long long left;

		if (clock_gettime(c, &now) != 0)
			break;
		left = ((long long)t->tv_sec - now.tv_sec) * 1000000000LL +
		       ((long long)t->tv_nsec - now.tv_nsec);
		is_short = left >= -1000000000LL && left <= PT_SHORT_WAIT_NS;
		if (clk >= 0)
			break;
	}
	errno = saved_errno;
	return is_short;
}

/* Before a wait (t: its deadline, NULL if none; clk: its clock, or -1):
 * two loads of the thread's state when it publishes nothing from a
 * connection and inherited no request.  True when the thread still shows
 * an inherited request unanswered, to look at again after the wait. */
static inline bool
hook_pthread_wait_enter(const struct timespec *t, clockid_t clk)
{
	if (__builtin_expect(ctxshim_self.sk.fdp1 != 0, 0) && ctxshim_active() &&
	    !(t && hook_pthread_wait_short(t, clk)))
		hook_socket_thread_wait();
	if (__builtin_expect(ctxshim_self.sk.inh.fdp1 != 0, 0)) {
		const struct ctxshim_ctx *cur = ctxshim_current();

		/* Only while it shows that request's context: a thread follows
		 * its inherited request for good (hook-socket.c), and one that
		 * cleared it, or shows something else, waits at its usual cost
		 * but for these loads. */
		if (cur && memcmp(cur->span_id, &ctxshim_self.sk.inh.span,
				  sizeof(cur->span_id)) == 0)
			return hook_socket_inherited_wait();
	}
	return false;
}

/* A wait: the check, the real call, and for an inherited request the
 * check again (hook-socket.c, "inherited requests"); the result and errno
 * are the application's. */
#define PT_WAIT_HOOK(id, name, ver, exp, params, args, t, clk) \
	static int hook_pthread_##id params                    \
	{                                                      \
		bool again;                                    \
		int r;                                         \
                                                               \
		hook_pthread_wait_bind();                      \
		again = hook_pthread_wait_enter(t, clk);       \
		r = real_##id args;                            \
		if (__builtin_expect(again, 0))                \
			(void)hook_socket_inherited_wait();    \
		return r;                                      \
	}                                                      \
	HOOK_EXPORT int exp params                             \
	{                                                      \
		return hook_pthread_##id args;                 \
	}
PT_WAITS(PT_WAIT_HOOK)

__asm__(".symver ctxshim_pthread_cond_wait_232, pthread_cond_wait@" PT_COND_NODE
	", remove");
__asm__(".symver ctxshim_pthread_cond_timedwait_232, "
	"pthread_cond_timedwait@" PT_COND_NODE ", remove");
