/* SPDX-License-Identifier: Apache-2.0 */
/* libuv's thread pool: uv_queue_work(loop, req, work_cb, after_work_cb).
 *
 * The context of the thread that submits a request is captured at
 * submission and published on the pool thread while work_cb runs, then on
 * the loop thread while after_work_cb runs (the loop thread's own context
 * comes back afterwards).  A request submitted without a context runs
 * without one, whatever the pool thread showed before.  After work_cb the
 * pool thread is idle and shows nothing.
 *
 * libuv hands work_cb and after_work_cb only the uv_work_t, whose fields
 * belong to the application (req->data) or to libuv, so the captured
 * context and the application's callbacks live in a wrapper allocated at
 * submission and found again by the uv_work_t address in a hash table.  Submission and completion are not read paths: the table is
 * guarded by a mutex.  uv_cancel() of a queued request makes libuv call
 * after_work_cb with UV_ECANCELED (work_cb never runs), which frees the
 * wrapper like any completion.
 *
 * Not contexts: uv_async_send() wakeups (an async handle coalesces any
 * number of sends into one callback, so there is no one sender whose
 * context it could carry), and libuv's internal use of the same pool
 * (uv_fs_*, uv_getaddrinfo, uv_random: uv__work_submit is not exported).
 * Those run with whatever the thread shows.
 *
 * We declare the few libuv types we pass along instead of including
 * <uv.h>: the shim must build and load without libuv, and we never look
 * inside a uv_work_t or uv_loop_t.  The uv_queue_work() signature has been
 * stable since libuv 0.10.  The library is bound in our constructor when
 * it is loaded then, else at the first call that finds it (if the
 * application calls uv_queue_work, libuv is loaded, maybe RTLD_LOCAL). */
#include "config.h"

#include "hooks.h"

#include "hook-pthread.h"
#include "hook-scope.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

/* uthash's default on a failed allocation is exit(): never in a host
 * process.  Non-fatal mode leaves the element out (hh.tbl == NULL). */
#define HASH_NONFATAL_OOM 1
#include <uthash.h>

struct uv_loop_s;
struct uv_work_s;
typedef void (*uv_work_cb_fn)(struct uv_work_s *req);
typedef void (*uv_after_work_cb_fn)(struct uv_work_s *req, int status);
typedef int (*uv_queue_work_fn)(struct uv_loop_s *loop,
				struct uv_work_s *req,
				uv_work_cb_fn work_cb,
				uv_after_work_cb_fn after_work_cb);

HOOK_EXPORT int uv_queue_work(struct uv_loop_s *loop,
			      struct uv_work_s *req,
			      uv_work_cb_fn work_cb,
			      uv_after_work_cb_fn after_work_cb);

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
/* NULL until found; until then every call retries. */
static uv_queue_work_fn real_uv_queue_work_fn;

/* One submitted request. */
struct uv_item {
	UT_hash_handle hh;
	struct uv_work_s *req;
	uv_work_cb_fn work_cb;
	uv_after_work_cb_fn after_cb;
	struct hook_scope scope;
};

/* Submitted requests by uv_work_t address, in shards so that the pool
 * threads and the loop thread seldom wait for each other; uthash grows a
 * shard's buckets with the number in flight. */
#define UV_SHARDS 32

static struct uv_shard {
	pthread_mutex_t lock;
	struct uv_item *table;
} __attribute__((aligned(64))) shards[UV_SHARDS] = {
	[0 ... UV_SHARDS - 1] = {.lock = PTHREAD_MUTEX_INITIALIZER},
};

/* A fork while another thread holds a lock must not leave it locked in
 * the child. */
static void
hook_pool_uv_prefork(void)
{
	unsigned i;

	for (i = 0; i < UV_SHARDS; i++)
		pthread_mutex_lock(&shards[i].lock);
}

static void
hook_pool_uv_postfork(void)
{
	unsigned i;

	for (i = UV_SHARDS; i-- > 0;)
		pthread_mutex_unlock(&shards[i].lock);
}

static void
hook_pool_uv_atfork(void)
{
	(void)pthread_atfork(hook_pool_uv_prefork, hook_pool_uv_postfork,
			     hook_pool_uv_postfork);
}

/* libuv's code, [lo, hi), once bound or found (0, 0 before): a thread
 * whose start routine is in it is one of libuv's own, a worker of its
 * pool, which the first request to use the pool starts -- uv_queue_work(),
 * but just as well uv_fs_*(), uv_getaddrinfo() or uv_random(), which no
 * hook sees.
 * (uv_thread_create() hands pthread_create() the application's own
 * function, so the application's threads still inherit.) */
static uintptr_t uv_text_lo, uv_text_hi;

/* A libuv loaded RTLD_LOCAL as a plugin's dependency is invisible to
 * RTLD_NEXT, yet the plugin's calls reach our exported name: then we find
 * it by soname (ctxshim_bind_loaded()).  If it is not loaded at all,
 * nothing is stored and the next call tries again. */
static const char *const uv_sonames[] = {"libuv.so.1", NULL};

/* A libuv that a dlopen() brought in after start-up is bound by its first
 * uv_queue_work(), but the first request to use its pool, which starts
 * the workers, may be a uv_fs_*() that no hook sees: look for it by
 * soname whenever objects were loaded since the last look (so a process
 * without libuv looks once per dlopen(), not once per thread), and keep
 * its code's range.  With dl_iterate_phdr() only: a dlopen(RTLD_NOLOAD)
 * here waited for the loader's lock in every pthread_create() after a
 * dlopen(), held by a library constructor that may be waiting for this
 * very thread (host-safe dlopen-ctor). */
static bool
hook_pool_uv_late(void)
{
	static unsigned long long seen;
	unsigned long long adds = ctxshim_dl_adds();
	uintptr_t lo, hi;

	if (__atomic_exchange_n(&seen, adds, __ATOMIC_RELAXED) == adds ||
	    !ctxshim_lib_text_range(uv_sonames, &lo, &hi))
		return false;
	__atomic_store_n(&uv_text_hi, hi, __ATOMIC_RELAXED);
	__atomic_store_n(&uv_text_lo, lo, __ATOMIC_RELEASE);
	return true;
}

bool
hook_pool_uv_thread(const void *start)
{
	uintptr_t lo = __atomic_load_n(&uv_text_lo, __ATOMIC_ACQUIRE);

	if (!lo && hook_pool_uv_late())
		lo = __atomic_load_n(&uv_text_lo, __ATOMIC_ACQUIRE);
	return lo && (uintptr_t)start >= lo &&
	       (uintptr_t)start < __atomic_load_n(&uv_text_hi, __ATOMIC_RELAXED);
}

/* A caller with its own libuv (bind.h) is passed to it. */
static const char *const uv_names[] = {"uv_queue_work"};
static const void *const uv_selves[] = {(const void *)uv_queue_work};
static struct ctxshim_callers uv_callers = {
	.names = uv_names, .n = 1, .selves = uv_selves};

static uv_queue_work_fn
hook_pool_uv_bind(void)
{
	uv_queue_work_fn fn = __atomic_load_n(&real_uv_queue_work_fn, __ATOMIC_ACQUIRE);
	int saved_errno;

	if (fn)
		return fn;
	saved_errno = errno;
	fn = (uv_queue_work_fn)ctxshim_bind_loaded(uv_sonames, "uv_queue_work", NULL,
						   (const void *)uv_queue_work);
	if (fn) {
		uintptr_t lo, hi;

		if (ctxshim_text_range((const void *)fn, &lo, &hi)) {
			__atomic_store_n(&uv_text_hi, hi, __ATOMIC_RELAXED);
			__atomic_store_n(&uv_text_lo, lo, __ATOMIC_RELEASE);
		}
		pthread_once(&atfork_once, hook_pool_uv_atfork);
		ctxshim_callers_bound(&uv_callers, (const void *)fn);
		__atomic_store_n(&real_uv_queue_work_fn, fn, __ATOMIC_RELEASE);
	}
	errno = saved_errno;
	return fn;
}

/* Bind now when libuv is loaded at start-up, so that a program linked
 * with it makes no dl*() call on its own threads later (preload/bind.c). */
__attribute__((constructor(104))) static void
hook_pool_uv_ctor(void)
{
	int saved_errno = errno;

	if (ctxshim_lib_loaded(uv_sonames))
		(void)hook_pool_uv_bind();
	errno = saved_errno;
}

static inline int
real_uv_queue_work(struct uv_loop_s *loop,
		   struct uv_work_s *req,
		   uv_work_cb_fn work_cb,
		   uv_after_work_cb_fn after_work_cb)
{
	uv_queue_work_fn fn = hook_pool_uv_bind();

	/* Only reachable without libuv if something calls the name blindly. */
	if (!fn)
		return -ENOSYS;
	return fn(loop, req, work_cb, after_work_cb);
}

static struct uv_shard *
hook_pool_uv_shard(const struct uv_work_s *req)
{
	uint64_t h = (uint64_t)(uintptr_t)req * 0x9e3779b97f4a7c15ull;

	return &shards[(h >> 32) % UV_SHARDS];
}

/* False if the table could not grow (out of memory). */
static bool
hook_pool_uv_insert(struct uv_item *it)
{
	struct uv_shard *sh = hook_pool_uv_shard(it->req);
	bool added;

	pthread_mutex_lock(&sh->lock);
	HASH_ADD_PTR(sh->table, req, it);
	added = it->hh.tbl != NULL;
	pthread_mutex_unlock(&sh->lock);
	return added;
}

/* The wrapper of req, unlinked from the table if take. */
static struct uv_item *
hook_pool_uv_find(struct uv_work_s *req, bool take)
{
	struct uv_shard *sh = hook_pool_uv_shard(req);
	struct uv_item *it;

	pthread_mutex_lock(&sh->lock);
	HASH_FIND_PTR(sh->table, &req, it);
	if (it && take)
		HASH_DEL(sh->table, it);
	pthread_mutex_unlock(&sh->lock);
	return it;
}

static void
hook_pool_uv_remove(struct uv_item *it)
{
	struct uv_shard *sh = hook_pool_uv_shard(it->req);

	pthread_mutex_lock(&sh->lock);
	HASH_DEL(sh->table, it);
	pthread_mutex_unlock(&sh->lock);
}

/* On the pool thread.  The wrapper stays valid until after_work_cb, which
 * libuv runs only once this has returned. */
static void
hook_pool_uv_work(struct uv_work_s *req)
{
	struct uv_item *it = hook_pool_uv_find(req, false);

	if (!it)
		return; /* cannot happen: only wrapped requests get here */
	hook_scope_publish(&it->scope, "uv-work");
	it->work_cb(req);
	hook_scope_clear("uv-work-done");
}

/* On the loop thread; also for a cancelled request. */
static void
hook_pool_uv_after_work(struct uv_work_s *req, int status)
{
	struct uv_item *it = hook_pool_uv_find(req, true);
	uv_after_work_cb_fn after;
	struct hook_scope prev;
	int saved_errno;

	if (!it)
		return; /* cannot happen: only wrapped requests get here */
	after = it->after_cb;
	hook_scope_capture(&prev);
	hook_scope_publish(&it->scope, "uv-after-work");
	/* Freed before the callback, which may submit req again. */
	saved_errno = errno;
	free(it);
	errno = saved_errno;
	if (after)
		after(req, status);
	hook_scope_restore(&prev, "uv-after-work-done");
}

static int
hook_pool_uv_queue_work(struct uv_loop_s *loop,
			struct uv_work_s *req,
			uv_work_cb_fn work_cb,
			uv_after_work_cb_fn after_work_cb)
{
	struct uv_item *it;
	int saved_errno, r;

	if (!ctxshim_active() || !work_cb || !req)
		return real_uv_queue_work(loop, req, work_cb, after_work_cb);
	saved_errno = errno;
	it = malloc(sizeof(*it));
	errno = saved_errno;
	/* Without memory the request runs unwrapped: it keeps whatever the
	 * pool thread shows, and the application is none the wiser. */
	if (!it)
		return real_uv_queue_work(loop, req, work_cb, after_work_cb);
	it->req = req;
	it->work_cb = work_cb;
	it->after_cb = after_work_cb;
	hook_scope_capture(&it->scope);
	/* Before submitting: a pool thread may pick the request up at once. */
	if (!hook_pool_uv_insert(it)) {
		free(it);
		errno = saved_errno;
		return real_uv_queue_work(loop, req, work_cb, after_work_cb);
	}
	/* The first submission starts libuv's pool threads on this thread. */
	hook_pthread_inherit_pause();
	r = real_uv_queue_work(loop, req, hook_pool_uv_work, hook_pool_uv_after_work);
	hook_pthread_inherit_resume();
	if (r != 0) {
		saved_errno = errno;
		hook_pool_uv_remove(it);
		free(it);
		errno = saved_errno;
	}
	return r;
}

/* The caller's own libuv, or NULL: the call is ours.  ret: the exported
 * hook's return address. */
static void *const *
uv_own(const void *ret)
{
	void *const *own;

	/* As fcgi_own() (hook-fcgi.c). */
	if (!__atomic_load_n(&real_uv_queue_work_fn, __ATOMIC_ACQUIRE) &&
	    ctxshim_callers_cached(&uv_callers, ret, &own))
		return own;
	return ctxshim_callers_own(&uv_callers, ret, (const void *)hook_pool_uv_bind());
}

HOOK_EXPORT int
uv_queue_work(struct uv_loop_s *loop,
	      struct uv_work_s *req,
	      uv_work_cb_fn work_cb,
	      uv_after_work_cb_fn after_work_cb)
{
	CTXSHIM_OWN_RETURN(uv_own, 0, uv_queue_work_fn, loop, req, work_cb,
			   after_work_cb);
	return hook_pool_uv_queue_work(loop, req, work_cb, after_work_cb);
}
