/* SPDX-License-Identifier: Apache-2.0 */
/* pthread_create: a new thread starts with a copy of its creator's context.
 *
 * The copy is taken at creation time, so a creator that moves on to another
 * request does not change what its worker publishes.  The worker owns its
 * own record (in its own TLS), keeps the context until it changes it, and
 * clears it on return, pthread_exit() or cancellation (the exit path is the
 * pthread key destructor in preload/thread-ctx.c). */
#include "config.h"

#include "hooks.h"

#include "events.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef int (*pthread_create_fn)(pthread_t *, const pthread_attr_t *,
				 void *(*)(void *), void *);

static pthread_once_t bind_once = PTHREAD_ONCE_INIT;
static pthread_create_fn real_pthread_create_fn;

HOOK_EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
			       void *(*start)(void *), void *arg);

static void
hook_pthread_bind_once(void)
{
	real_pthread_create_fn = (pthread_create_fn)ctxshim_bind(
		"pthread_create", NULL, (const void *)pthread_create, true);
}

static inline int
real_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
		    void *(*start)(void *), void *arg)
{
	pthread_once(&bind_once, hook_pthread_bind_once);
	return real_pthread_create_fn(thread, attr, start, arg);
}

struct start_wrap {
	void *(*start)(void *);
	void *arg;
	struct ctxshim_ctx ctx;
};

static void *
hook_pthread_start(void *p)
{
	struct start_wrap *w = p;
	void *(*start)(void *) = w->start;
	void *arg = w->arg;

	ctxshim_attach(&w->ctx);
	CTXSHIM_EVENT(CTXSHIM_EV_ATTACH, -1, &w->ctx, "thread-start");
	free(w);
	return start(arg);
}

static int
hook_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
		    void *(*start)(void *), void *arg)
{
	const struct ctxshim_ctx *cur = ctxshim_active() ? ctxshim_current() : NULL;
	struct start_wrap *w;
	int saved_errno = errno, r;

	if (!cur)
		return real_pthread_create(thread, attr, start, arg);
	/* Thread creation allocates anyway; if we cannot, the thread simply
	 * starts without a context. */
	w = malloc(sizeof(*w));
	errno = saved_errno;
	if (!w)
		return real_pthread_create(thread, attr, start, arg);
	w->start = start;
	w->arg = arg;
	memcpy(&w->ctx, cur, sizeof(w->ctx));
	r = real_pthread_create(thread, attr, hook_pthread_start, w);
	if (r != 0) {
		saved_errno = errno;
		free(w);
		errno = saved_errno;
	}
	return r;
}

HOOK_EXPORT int
pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
	       void *arg)
{
	return hook_pthread_create(thread, attr, start, arg);
}
