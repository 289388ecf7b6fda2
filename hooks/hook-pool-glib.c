/* SPDX-License-Identifier: Apache-2.0 */
/* GLib's GThreadPool: the context of the thread that calls
 * g_thread_pool_push() is published while the pool's function runs that
 * item, on whichever pool thread takes it; the pool thread shows nothing
 * before and after.  An item pushed without a context runs without one.
 *
 * A pool runs one function for every item, and GLib gives it only the
 * item and the pool's user_data.  So g_thread_pool_new() and
 * g_thread_pool_new_full() create the pool with our function and remember
 * the application's in a struct glib_pool (keyed by the GThreadPool
 * address); g_thread_pool_push() pushes a struct glib_item carrying the
 * application's item and the captured context instead.  GLib is built
 * with -Bsymbolic-functions (checked with readelf on Debian 12's
 * libglib-2.0.so.0: g_thread_pool_new calls g_thread_pool_new_full
 * directly), so both constructors are hooked.  Everything GLib does with
 * queued items on the application's behalf is hooked too, so the
 * application never sees our wrappers:
 *
 * - g_thread_pool_set_sort_function(): the comparator gets the
 *   application's items;
 * - g_thread_pool_move_to_front(data): finds our wrapper of data;
 * - items still queued when the pool is freed with immediate=TRUE go to
 *   our item_free_func (we always create the pool with one, through
 *   g_thread_pool_new_full() when the library has it), which calls the
 *   application's, if any;
 * - g_thread_pool_free(): the pool stays ours while GLib frees it (an
 *   item may still push into it) and when GLib refuses to; a push GLib
 *   refuses (the pool is being freed) frees its wrapper.
 *
 * The application's user_data stays the pool's user_data (it is a public
 * member of GThreadPool); its func member shows our function.
 *
 * Pools created before our constructor ran, or by GLib itself through a
 * direct call, are not ours: pushes to them pass straight through.  The
 * threads GLib starts while we create or push (the pool-spawner thread,
 * exclusive workers) do not inherit the caller's context.
 *
 * Memory: a push in a pool of ours must push a wrapper (the pool's
 * function cannot tell our wrappers from the application's pointers), so
 * when malloc fails we abort with a message, as GLib itself does when its
 * allocator fails a moment later.
 *
 * We declare the few GLib types we use instead of including <glib.h>: the
 * shim must build and load without GLib.  struct _GThreadPool's three
 * public members have been GLib 2.x ABI since 2.0. */
#include "config.h"

#include "hooks.h"

#include "hook-pthread.h"
#include "hook-scope.h"
#include "log.h"
#include "sys.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

typedef int gboolean_t;
typedef void (*gfunc_fn)(void *data, void *user_data);
typedef void (*gdestroy_fn)(void *data);
typedef int (*gcompare_data_fn)(const void *a, const void *b, void *user_data);

struct _GError;
/* <glib/gthreadpool.h> */
struct _GThreadPool {
	gfunc_fn func;
	void *user_data;
	gboolean_t exclusive;
};

typedef struct _GThreadPool *(*g_thread_pool_new_fn)(
	gfunc_fn, void *, int, gboolean_t, struct _GError **);
typedef struct _GThreadPool *(*g_thread_pool_new_full_fn)(
	gfunc_fn, void *, gdestroy_fn, int, gboolean_t, struct _GError **);
typedef gboolean_t (*g_thread_pool_push_fn)(struct _GThreadPool *,
					    void *,
					    struct _GError **);
typedef void (*g_thread_pool_free_fn)(struct _GThreadPool *, gboolean_t, gboolean_t);
typedef void (*g_thread_pool_set_sort_function_fn)(struct _GThreadPool *,
						   gcompare_data_fn,
						   void *);
typedef gboolean_t (*g_thread_pool_move_to_front_fn)(struct _GThreadPool *, void *);
typedef gboolean_t (*g_thread_pool_set_max_threads_fn)(struct _GThreadPool *,
						       int,
						       struct _GError **);
typedef int (*g_thread_pool_get_max_threads_fn)(struct _GThreadPool *);
typedef unsigned (*g_thread_pool_unprocessed_fn)(struct _GThreadPool *);
typedef void (*g_error_free_fn)(struct _GError *);

HOOK_EXPORT struct _GThreadPool *g_thread_pool_new(gfunc_fn func,
						   void *user_data,
						   int max_threads,
						   gboolean_t exclusive,
						   struct _GError **error);
HOOK_EXPORT struct _GThreadPool *g_thread_pool_new_full(gfunc_fn func,
							void *user_data,
							gdestroy_fn item_free_func,
							int max_threads,
							gboolean_t exclusive,
							struct _GError **error);
HOOK_EXPORT gboolean_t g_thread_pool_push(struct _GThreadPool *pool,
					  void *data,
					  struct _GError **error);
HOOK_EXPORT void
g_thread_pool_free(struct _GThreadPool *pool, gboolean_t immediate, gboolean_t wait_);
HOOK_EXPORT void g_thread_pool_set_sort_function(struct _GThreadPool *pool,
						 gcompare_data_fn func,
						 void *user_data);
HOOK_EXPORT gboolean_t g_thread_pool_move_to_front(struct _GThreadPool *pool,
						   void *data);
HOOK_EXPORT gboolean_t g_thread_pool_set_max_threads(struct _GThreadPool *pool,
						     int max_threads,
						     struct _GError **error);

/* Set once the real functions are found; until then every call retries. */
static int glib_bound;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static g_thread_pool_new_fn real_new_fn;
static g_thread_pool_new_full_fn real_new_full_fn;
static g_thread_pool_push_fn real_push_fn;
static g_thread_pool_free_fn real_free_fn;
static g_thread_pool_set_sort_function_fn real_set_sort_function_fn;
static g_thread_pool_move_to_front_fn real_move_to_front_fn;
static g_thread_pool_set_max_threads_fn real_set_max_threads_fn;
/* Not hooked: what g_thread_pool_free() and g_thread_pool_push() need to
 * tell what GLib did. */
static g_thread_pool_get_max_threads_fn real_get_max_threads_fn;
static g_thread_pool_unprocessed_fn real_unprocessed_fn;
static g_error_free_fn real_error_free_fn;

struct glib_sort {
	gcompare_data_fn func;
	void *user_data;
};

struct glib_item;

/* One pool created through our hooks. */
struct glib_pool {
	struct glib_pool *next;    /* in the registry bucket */
	struct _GThreadPool *pool; /* NULL once g_thread_pool_free() returned */
	gfunc_fn func;
	gdestroy_fn item_free;
	struct glib_sort *sort;
	struct glib_item *queued; /* pushed, not yet taken by a pool thread */
	unsigned refs;            /* 1 for the pool itself + 1 per live item */
};

/* One pushed item. */
struct glib_item {
	struct glib_item *prev, *next; /* in pool->queued while queued */
	bool queued;
	struct glib_pool *pool;
	void *data;
	struct hook_scope scope;
};

#define GLIB_BUCKETS 64

/* Guards the registry, every pool's queued list and reference count.
 * Order: this lock, then GLib's queue lock (move_to_front); GLib never
 * calls us while holding a queue lock except for the comparator, which
 * does not take it. */
static pthread_mutex_t glib_lock = PTHREAD_MUTEX_INITIALIZER;
static struct glib_pool *registry[GLIB_BUCKETS];

/* Held across GLib's swap of a pool's comparator and ours of p->sort, so
 * that the comparator we free is never the one GLib keeps: two calls at
 * once could swap in one order in GLib and in the other in p->sort.  Not
 * glib_lock: the application's comparator runs under it (GLib sorts with
 * the new one) and may push; recursive, as it may also set another pool's
 * comparator.  Order: this lock, then glib_lock. */
static pthread_mutex_t glib_sort_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

static void
hook_pool_glib_prefork(void)
{
	pthread_mutex_lock(&glib_sort_lock);
	pthread_mutex_lock(&glib_lock);
}

static void
hook_pool_glib_postfork(void)
{
	pthread_mutex_unlock(&glib_lock);
	pthread_mutex_unlock(&glib_sort_lock);
}

static void
hook_pool_glib_atfork(void)
{
	(void)pthread_atfork(hook_pool_glib_prefork, hook_pool_glib_postfork,
			     hook_pool_glib_postfork);
}

/* GLib loaded RTLD_LOCAL as a plugin's dependency is invisible to
 * RTLD_NEXT, yet the plugin's calls reach our exported names: then we find
 * it by soname (ctxshim_bind_loaded()).  If it is not loaded at all,
 * nothing is stored and the next call tries again. */
static const char *const glib_sonames[] = {"libglib-2.0.so.0", NULL};

/* A caller with its own GLib (bind.h) is passed to it. */
static const char *const glib_names[] = {"g_thread_pool_push",
					 "g_thread_pool_new",
					 "g_thread_pool_new_full",
					 "g_thread_pool_free",
					 "g_thread_pool_set_sort_function",
					 "g_thread_pool_move_to_front",
					 "g_thread_pool_set_max_threads"};
static const void *const glib_selves[] = {(const void *)g_thread_pool_push,
					  (const void *)g_thread_pool_new,
					  (const void *)g_thread_pool_new_full,
					  (const void *)g_thread_pool_free,
					  (const void *)g_thread_pool_set_sort_function,
					  (const void *)g_thread_pool_move_to_front,
					  (const void *)g_thread_pool_set_max_threads};
static struct ctxshim_callers glib_callers = {
	.names = glib_names, .n = 7, .selves = glib_selves};

static void *
hook_pool_glib_find(const char *name, const void *self)
{
	return ctxshim_bind_loaded(glib_sonames, name, NULL, self);
}

static void
hook_pool_glib_bind_slow(void)
{
	static int logged;
	int saved_errno = errno;
	void *nw, *full, *push, *fr, *sort, *mtf, *max;

	push = hook_pool_glib_find("g_thread_pool_push",
				   (const void *)g_thread_pool_push);
	nw = push ? hook_pool_glib_find("g_thread_pool_new",
					(const void *)g_thread_pool_new)
		  : NULL;
	fr = nw ? hook_pool_glib_find("g_thread_pool_free",
				      (const void *)g_thread_pool_free)
		: NULL;
	if (!fr) {
		if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
			ctxshim_log("glib: g_thread_pool_* not found (yet)");
		errno = saved_errno;
		return;
	}
	/* GLib >= 2.70 */
	full = hook_pool_glib_find("g_thread_pool_new_full",
				   (const void *)g_thread_pool_new_full);
	/* GLib >= 2.10 */
	sort = hook_pool_glib_find("g_thread_pool_set_sort_function",
				   (const void *)g_thread_pool_set_sort_function);
	/* GLib >= 2.46 */
	mtf = hook_pool_glib_find("g_thread_pool_move_to_front",
				  (const void *)g_thread_pool_move_to_front);
	/* every GLib 2 */
	max = hook_pool_glib_find("g_thread_pool_set_max_threads",
				  (const void *)g_thread_pool_set_max_threads);
	__atomic_store_n(&real_get_max_threads_fn,
			 (g_thread_pool_get_max_threads_fn)hook_pool_glib_find(
				 "g_thread_pool_get_max_threads", NULL),
			 __ATOMIC_RELAXED);
	__atomic_store_n(&real_unprocessed_fn,
			 (g_thread_pool_unprocessed_fn)hook_pool_glib_find(
				 "g_thread_pool_unprocessed", NULL),
			 __ATOMIC_RELAXED);
	__atomic_store_n(&real_error_free_fn,
			 (g_error_free_fn)hook_pool_glib_find("g_error_free", NULL),
			 __ATOMIC_RELAXED);
	/* Threads racing here store the same values. */
	__atomic_store_n(&real_new_fn, (g_thread_pool_new_fn)nw, __ATOMIC_RELAXED);
	__atomic_store_n(&real_new_full_fn, (g_thread_pool_new_full_fn)full,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&real_push_fn, (g_thread_pool_push_fn)push, __ATOMIC_RELAXED);
	__atomic_store_n(&real_free_fn, (g_thread_pool_free_fn)fr, __ATOMIC_RELAXED);
	__atomic_store_n(&real_set_sort_function_fn,
			 (g_thread_pool_set_sort_function_fn)sort, __ATOMIC_RELAXED);
	__atomic_store_n(&real_move_to_front_fn, (g_thread_pool_move_to_front_fn)mtf,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&real_set_max_threads_fn,
			 (g_thread_pool_set_max_threads_fn)max, __ATOMIC_RELAXED);
	pthread_once(&atfork_once, hook_pool_glib_atfork);
	ctxshim_callers_bound(&glib_callers, push);
	__atomic_store_n(&glib_bound, 1, __ATOMIC_RELEASE);
	errno = saved_errno;
}

static inline void
hook_pool_glib_bind(void)
{
	if (!__atomic_load_n(&glib_bound, __ATOMIC_ACQUIRE))
		hook_pool_glib_bind_slow();
}

/* Bind now when GLib is loaded at start-up, so that a program linked with
 * it makes no dl*() call on its own threads later (preload/bind.c). */
__attribute__((constructor(104))) static void
hook_pool_glib_ctor(void)
{
	int saved_errno = errno;

	if (ctxshim_lib_loaded(glib_sonames))
		hook_pool_glib_bind();
	errno = saved_errno;
}

/* The real functions.  Each is present whenever the application could call
 * our hook of it (GLib is loaded); the NULL checks only cover someone
 * calling the names blindly. */
static inline struct _GThreadPool *
real_g_thread_pool_new(gfunc_fn func,
		       void *user_data,
		       int max_threads,
		       gboolean_t exclusive,
		       struct _GError **error)
{
	hook_pool_glib_bind();
	return real_new_fn ? real_new_fn(func, user_data, max_threads, exclusive, error)
			   : NULL;
}

static inline struct _GThreadPool *
real_g_thread_pool_new_full(gfunc_fn func,
			    void *user_data,
			    gdestroy_fn item_free_func,
			    int max_threads,
			    gboolean_t exclusive,
			    struct _GError **error)
{
	hook_pool_glib_bind();
	return real_new_full_fn ? real_new_full_fn(func, user_data, item_free_func,
						   max_threads, exclusive, error)
				: NULL;
}

static inline gboolean_t
real_g_thread_pool_push(struct _GThreadPool *pool, void *data, struct _GError **error)
{
	hook_pool_glib_bind();
	return real_push_fn ? real_push_fn(pool, data, error) : 0;
}

static inline void
real_g_thread_pool_free(struct _GThreadPool *pool,
			gboolean_t immediate,
			gboolean_t wait_)
{
	hook_pool_glib_bind();
	if (real_free_fn)
		real_free_fn(pool, immediate, wait_);
}

static inline void
real_g_thread_pool_set_sort_function(struct _GThreadPool *pool,
				     gcompare_data_fn func,
				     void *user_data)
{
	hook_pool_glib_bind();
	if (real_set_sort_function_fn)
		real_set_sort_function_fn(pool, func, user_data);
}

static inline gboolean_t
real_g_thread_pool_move_to_front(struct _GThreadPool *pool, void *data)
{
	hook_pool_glib_bind();
	return real_move_to_front_fn ? real_move_to_front_fn(pool, data) : 0;
}

static inline gboolean_t
real_g_thread_pool_set_max_threads(struct _GThreadPool *pool,
				   int max_threads,
				   struct _GError **error)
{
	hook_pool_glib_bind();
	return real_set_max_threads_fn
		       ? real_set_max_threads_fn(pool, max_threads, error)
		       : 0;
}

static void __attribute__((noreturn)) hook_pool_glib_oom(void)
{
	static const char msg[] = "ctxshim: g_thread_pool_push(): out of memory\n";

	(void)!sys_write(2, msg, sizeof(msg) - 1);
	abort();
}

static unsigned
hook_pool_glib_bucket(const struct _GThreadPool *pool)
{
	uint64_t h = (uint64_t)(uintptr_t)pool * 0x9e3779b97f4a7c15ull;

	return (unsigned)(h >> 58) % GLIB_BUCKETS;
}

/* Under glib_lock.  New pools go first in their bucket: while a freed
 * pool is still registered, a new one GLib created at its address is the
 * one found. */
static struct glib_pool *
hook_pool_glib_lookup(const struct _GThreadPool *pool)
{
	struct glib_pool *p;

	for (p = registry[hook_pool_glib_bucket(pool)]; p; p = p->next)
		if (p->pool == pool)
			return p;
	return NULL;
}

/* Under glib_lock.  By identity, not by address: see lookup(). */
static void
hook_pool_glib_unregister(struct glib_pool *p)
{
	struct glib_pool **pp;

	for (pp = &registry[hook_pool_glib_bucket(p->pool)]; *pp; pp = &(*pp)->next) {
		if (*pp != p)
			continue;
		*pp = p->next;
		p->next = NULL;
		p->pool = NULL;
		return;
	}
}

static void
hook_pool_glib_unlink(struct glib_item *it)
{
	if (!it->queued)
		return;
	if (it->prev)
		it->prev->next = it->next;
	else
		it->pool->queued = it->next;
	if (it->next)
		it->next->prev = it->prev;
	it->prev = it->next = NULL;
	it->queued = false;
}

/* Drop one reference; returns what the caller frees outside the lock. */
static struct glib_pool *
hook_pool_glib_unref(struct glib_pool *p)
{
	return --p->refs == 0 ? p : NULL;
}

static void
hook_pool_glib_destroy(struct glib_pool *p)
{
	if (!p)
		return;
	free(p->sort);
	free(p);
}

/* The pool's function for pools of ours, on a pool thread. */
static void
hook_pool_glib_run(void *item, void *user_data)
{
	struct glib_item *it = item;
	struct glib_pool *p = it->pool, *dead;
	int saved_errno;

	pthread_mutex_lock(&glib_lock);
	hook_pool_glib_unlink(it);
	pthread_mutex_unlock(&glib_lock);

	hook_scope_publish(&it->scope, "glib-pool-item");
	p->func(it->data, user_data);
	hook_scope_clear("glib-pool-item-done");

	saved_errno = errno;
	pthread_mutex_lock(&glib_lock);
	dead = hook_pool_glib_unref(p);
	pthread_mutex_unlock(&glib_lock);
	free(it);
	hook_pool_glib_destroy(dead);
	errno = saved_errno;
}

/* The queue's item_free_func: items left when a pool is freed with
 * immediate=TRUE. */
static void
hook_pool_glib_item_free(void *item)
{
	struct glib_item *it = item;
	struct glib_pool *p, *dead;

	/* GLib's wake-up marker is GUINT_TO_POINTER(1); it removes it before
	 * freeing the queue, but a stray one must not be taken for ours. */
	if ((uintptr_t)item < 4096)
		return;
	p = it->pool;
	pthread_mutex_lock(&glib_lock);
	hook_pool_glib_unlink(it);
	pthread_mutex_unlock(&glib_lock);
	if (p->item_free)
		p->item_free(it->data);
	pthread_mutex_lock(&glib_lock);
	dead = hook_pool_glib_unref(p);
	pthread_mutex_unlock(&glib_lock);
	free(it);
	hook_pool_glib_destroy(dead);
}

static int
hook_pool_glib_compare(const void *a, const void *b, void *user_data)
{
	const struct glib_item *ia = a, *ib = b;
	const struct glib_sort *s = user_data;

	return s->func(ia->data, ib->data, s->user_data);
}

static struct _GThreadPool *
hook_pool_glib_new(gfunc_fn func,
		   void *user_data,
		   gdestroy_fn item_free_func,
		   int max_threads,
		   gboolean_t exclusive,
		   struct _GError **error,
		   bool full)
{
	struct _GThreadPool *pool;
	struct glib_pool *p;
	int saved_errno;

	hook_pool_glib_bind();
	if (!ctxshim_active() || !func || (full && !real_new_full_fn))
		goto pass;
	saved_errno = errno;
	p = calloc(1, sizeof(*p));
	errno = saved_errno;
	if (!p)
		goto pass; /* an ordinary pool: its pushes pass through */
	p->func = func;
	p->item_free = item_free_func;
	p->refs = 1;

	/* The threads GLib starts here work for the pool, not for the
	 * request that happens to create it. */
	hook_pthread_inherit_pause();
	if (real_new_full_fn)
		pool = real_g_thread_pool_new_full(hook_pool_glib_run, user_data,
						   hook_pool_glib_item_free,
						   max_threads, exclusive, error);
	else
		pool = real_g_thread_pool_new(hook_pool_glib_run, user_data,
					      max_threads, exclusive, error);
	hook_pthread_inherit_resume();
	saved_errno = errno;
	if (!pool) {
		free(p);
	} else {
		unsigned b = hook_pool_glib_bucket(pool);

		p->pool = pool;
		pthread_mutex_lock(&glib_lock);
		p->next = registry[b];
		registry[b] = p;
		pthread_mutex_unlock(&glib_lock);
	}
	errno = saved_errno;
	return pool;
pass:
	if (full)
		return real_g_thread_pool_new_full(func, user_data, item_free_func,
						   max_threads, exclusive, error);
	return real_g_thread_pool_new(func, user_data, max_threads, exclusive, error);
}

static gboolean_t
hook_pool_glib_push(struct _GThreadPool *pool, void *data, struct _GError **error)
{
	struct _GError *local = NULL, **errp = error;
	struct glib_item *it;
	struct glib_pool *p, *dead = NULL;
	int saved_errno;
	gboolean_t r;

	/* NULL is no task: GLib refuses it (a critical warning, and the
	 * pool's function never sees it); wrapped, it would run. */
	if (!ctxshim_active() || !pool || !data)
		return real_g_thread_pool_push(pool, data, error);
	saved_errno = errno;
	it = malloc(sizeof(*it));
	errno = saved_errno;

	pthread_mutex_lock(&glib_lock);
	p = hook_pool_glib_lookup(pool);
	if (p && !it) {
		pthread_mutex_unlock(&glib_lock);
		hook_pool_glib_oom();
	}
	if (p) {
		it->pool = p;
		it->data = data;
		it->prev = NULL;
		it->next = p->queued;
		if (p->queued)
			p->queued->prev = it;
		p->queued = it;
		it->queued = true;
		p->refs++;
	}
	pthread_mutex_unlock(&glib_lock);
	if (!p) {
		free(it);
		errno = saved_errno;
		return real_g_thread_pool_push(pool, data, error);
	}
	hook_scope_capture(&it->scope);
	/* GLib queues the item even when it fails to start a thread for it
	 * (FALSE with an error); without an error, FALSE is a refusal (the
	 * pool is being freed, a critical warning) and the wrapper is ours
	 * to free.  A caller's error already set (GLib warns) or no
	 * g_error_free() leaves it undecided: kept, at worst a leak. */
	if (!error && __atomic_load_n(&real_error_free_fn, __ATOMIC_RELAXED))
		errp = &local;
	/* Older GLib starts pool threads right here. */
	hook_pthread_inherit_pause();
	r = real_g_thread_pool_push(pool, it, errp);
	hook_pthread_inherit_resume();
	if (!r && errp && !*errp) {
		saved_errno = errno;
		pthread_mutex_lock(&glib_lock);
		hook_pool_glib_unlink(it);
		dead = hook_pool_glib_unref(p);
		pthread_mutex_unlock(&glib_lock);
		free(it);
		hook_pool_glib_destroy(dead);
		errno = saved_errno;
	}
	if (local) {
		saved_errno = errno;
		real_error_free_fn(local);
		errno = saved_errno;
	}
	return r;
}

static void
hook_pool_glib_free(struct _GThreadPool *pool, gboolean_t immediate, gboolean_t wait_)
{
	struct glib_pool *p = NULL, *dead = NULL;
	g_thread_pool_get_max_threads_fn get_max;
	g_thread_pool_unprocessed_fn unprocessed;
	int saved_errno = errno;

	if (ctxshim_active() && pool) {
		pthread_mutex_lock(&glib_lock);
		p = hook_pool_glib_lookup(pool);
		pthread_mutex_unlock(&glib_lock);
	}
	/* GLib refuses to free a frozen pool with items left, unless
	 * immediate (a critical warning), and the pool goes on: it stays
	 * ours, or its next pushes would reach hook_pool_glib_run()
	 * unwrapped. */
	get_max = __atomic_load_n(&real_get_max_threads_fn, __ATOMIC_RELAXED);
	unprocessed = __atomic_load_n(&real_unprocessed_fn, __ATOMIC_RELAXED);
	if (p && !immediate &&
	    (!get_max || !unprocessed ||
	     (get_max(pool) == 0 && unprocessed(pool) != 0)))
		p = NULL;
	errno = saved_errno;
	/* Still registered while GLib frees it: an item may push into its
	 * own pool meanwhile, and GLib runs that push if it comes before the
	 * free stops the pool, so it must be wrapped as well. */
	real_g_thread_pool_free(pool, immediate, wait_);
	if (!p)
		return;
	/* Items still queued or running hold their own references: GLib may
	 * run them (immediate=FALSE) or free them through our item_free_func
	 * after this returns. */
	saved_errno = errno;
	pthread_mutex_lock(&glib_lock);
	hook_pool_glib_unregister(p);
	dead = hook_pool_glib_unref(p);
	pthread_mutex_unlock(&glib_lock);
	hook_pool_glib_destroy(dead);
	errno = saved_errno;
}

static void
hook_pool_glib_set_sort_function(struct _GThreadPool *pool,
				 gcompare_data_fn func,
				 void *user_data)
{
	struct glib_sort *s = NULL, *old;
	struct glib_pool *p = NULL;
	int saved_errno = errno;

	if (ctxshim_active() && pool) {
		pthread_mutex_lock(&glib_lock);
		p = hook_pool_glib_lookup(pool);
		pthread_mutex_unlock(&glib_lock);
	}
	if (!p) {
		real_g_thread_pool_set_sort_function(pool, func, user_data);
		return;
	}
	if (func) {
		s = malloc(sizeof(*s));
		if (!s)
			hook_pool_glib_oom();
		s->func = func;
		s->user_data = user_data;
	}
	errno = saved_errno;
	pthread_mutex_lock(&glib_sort_lock);
	real_g_thread_pool_set_sort_function(pool, s ? hook_pool_glib_compare : NULL,
					     s);
	/* GLib swapped comparators under its queue lock: nobody sorts with
	 * the old one any more. */
	saved_errno = errno;
	pthread_mutex_lock(&glib_lock);
	old = p->sort;
	p->sort = s;
	pthread_mutex_unlock(&glib_lock);
	pthread_mutex_unlock(&glib_sort_lock);
	free(old);
	errno = saved_errno;
}

static gboolean_t
hook_pool_glib_move_to_front(struct _GThreadPool *pool, void *data)
{
	struct glib_pool *p = NULL;
	struct glib_item *it = NULL;
	gboolean_t r = 0;

	if (!ctxshim_active() || !pool || !data)
		return real_g_thread_pool_move_to_front(pool, data);
	pthread_mutex_lock(&glib_lock);
	p = hook_pool_glib_lookup(pool);
	if (!p) {
		pthread_mutex_unlock(&glib_lock);
		return real_g_thread_pool_move_to_front(pool, data);
	}
	for (it = p->queued; it; it = it->next)
		if (it->data == data)
			break;
	/* Still under our lock, so a pool thread cannot take and free the
	 * item meanwhile (it unlinks under this lock first).  If the item
	 * was queued twice, either copy serves. */
	if (it)
		r = real_g_thread_pool_move_to_front(pool, it);
	pthread_mutex_unlock(&glib_lock);
	return r;
}

static gboolean_t
hook_pool_glib_set_max_threads(struct _GThreadPool *pool,
			       int max_threads,
			       struct _GError **error)
{
	gboolean_t r;

	hook_pthread_inherit_pause();
	r = real_g_thread_pool_set_max_threads(pool, max_threads, error);
	hook_pthread_inherit_resume();
	return r;
}

/* The caller's own GLib (by glib_names), or NULL: the call is ours.
 * ret: the exported hook's return address. */
static void *const *
glib_own(const void *ret)
{
	void *const *own;

	/* As fcgi_own() (hook-fcgi.c). */
	if (!__atomic_load_n(&glib_bound, __ATOMIC_ACQUIRE) &&
	    ctxshim_callers_cached(&glib_callers, ret, &own))
		return own;
	hook_pool_glib_bind();
	return ctxshim_callers_own(
		&glib_callers, ret,
		(const void *)__atomic_load_n(&real_push_fn, __ATOMIC_RELAXED));
}

HOOK_EXPORT struct _GThreadPool *
g_thread_pool_new(gfunc_fn func,
		  void *user_data,
		  int max_threads,
		  gboolean_t exclusive,
		  struct _GError **error)
{
	CTXSHIM_OWN_RETURN(glib_own, 1, g_thread_pool_new_fn, func, user_data,
			   max_threads, exclusive, error);
	return hook_pool_glib_new(func, user_data, NULL, max_threads, exclusive, error,
				  false);
}

HOOK_EXPORT struct _GThreadPool *
g_thread_pool_new_full(gfunc_fn func,
		       void *user_data,
		       gdestroy_fn item_free_func,
		       int max_threads,
		       gboolean_t exclusive,
		       struct _GError **error)
{
	CTXSHIM_OWN_RETURN(glib_own, 2, g_thread_pool_new_full_fn, func, user_data,
			   item_free_func, max_threads, exclusive, error);
	return hook_pool_glib_new(func, user_data, item_free_func, max_threads,
				  exclusive, error, true);
}

HOOK_EXPORT gboolean_t
g_thread_pool_push(struct _GThreadPool *pool, void *data, struct _GError **error)
{
	CTXSHIM_OWN_RETURN(glib_own, 0, g_thread_pool_push_fn, pool, data, error);
	return hook_pool_glib_push(pool, data, error);
}

HOOK_EXPORT void
g_thread_pool_free(struct _GThreadPool *pool, gboolean_t immediate, gboolean_t wait_)
{
	CTXSHIM_OWN_RETURN_VOID(glib_own, 3, g_thread_pool_free_fn, pool, immediate,
				wait_);
	hook_pool_glib_free(pool, immediate, wait_);
}

HOOK_EXPORT void
g_thread_pool_set_sort_function(struct _GThreadPool *pool,
				gcompare_data_fn func,
				void *user_data)
{
	CTXSHIM_OWN_RETURN_VOID(glib_own, 4, g_thread_pool_set_sort_function_fn, pool,
				func, user_data);
	hook_pool_glib_set_sort_function(pool, func, user_data);
}

HOOK_EXPORT gboolean_t
g_thread_pool_move_to_front(struct _GThreadPool *pool, void *data)
{
	CTXSHIM_OWN_RETURN(glib_own, 5, g_thread_pool_move_to_front_fn, pool, data);
	return hook_pool_glib_move_to_front(pool, data);
}

HOOK_EXPORT gboolean_t
g_thread_pool_set_max_threads(struct _GThreadPool *pool,
			      int max_threads,
			      struct _GError **error)
{
	CTXSHIM_OWN_RETURN(glib_own, 6, g_thread_pool_set_max_threads_fn, pool,
			   max_threads, error);
	return hook_pool_glib_set_max_threads(pool, max_threads, error);
}
