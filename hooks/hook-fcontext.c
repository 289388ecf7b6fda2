/* SPDX-License-Identifier: Apache-2.0 */
/* Boost.Context coroutines (libboost_context.so's jump_fcontext(),
 * ontop_fcontext(), make_fcontext()): the switch functions under
 * Boost.Context's callcc/fiber, Boost.Asio's stackful coroutines
 * (spawn), Boost.Fiber and folly fibers.  Their C++ is header-only, so
 * the switches are calls from the application (or a plugin) through its
 * PLT to these extern "C" names, which we interpose.
 *
 * A coroutine resumed shows the context it had when it switched away, as
 * hook-ucontext.c does for swapcontext().  Every suspension is a call of
 * jump_fcontext() or ontop_fcontext() that returns when the coroutine
 * is resumed, whoever resumes it and on whichever thread: so the hook
 * saves the thread's context before the real switch and puts it back
 * after it returns.  Where the saved context lives:
 *
 * - not in the hook's frame on the suspended stack: a struct hook_scope
 *   is about 1.2 KB (a context with its attributes and tracestate), and
 *   would sit in every suspended coroutine's deepest frame, on stacks
 *   that can be a few KB (folly's 16 KB default; Boost's minimum is
 *   MINSIGSTKSZ);
 * - not keyed by the fcontext_t: the suspended side's fcontext_t is made
 *   inside the real switch and known only to the side resumed;
 * - but in hook-ucontext.c's table (hooks.h, hook_ucontext_key_save()),
 *   keyed by an address in the hook's frame: unique while the coroutine
 *   is suspended in it, a few bytes of stack, and the same try-locks,
 *   eviction, fork and signal-jump handling as ucontexts.  The table
 *   holds 4096 contexts for ucontexts and fcontexts together.  Each
 *   resumption frees its slot, so only suspended coroutines hold one,
 *   and only those with a context (hook_fcontext_suspend()).
 *
 * The context comes back as hook_scope_restore() brings one back: a
 * request the socket level published comes back under its management,
 * and one answered while the coroutine was suspended does not come back
 * (the thread then shows none).  A coroutine whose slot was evicted (more
 * than the table holds suspended at once, least recently switched first)
 * resumes with none rather than with its resumer's: that would be another
 * coroutine's request.
 *
 * Except when a reactor read the coroutine's request for it: Boost.Asio's
 * async reads first try the read in the coroutine, which suspends when
 * there is nothing yet; the io_context's reactor, on the thread's own
 * stack, later reads the request's head (the socket level publishes it on
 * the thread) and resumes the coroutine, whose saved context is none.  So
 * the hook also notes the connection the suspending side last read
 * (hooks/hook-scope.h, hook_socket_rd_take()), and a coroutine that comes
 * back without a context -- none saved, its request answered, or evicted --
 * shows that connection's request if it is live, as that read would have
 * (without the hook, it showed the reactor's context, which is right only
 * when the reactor read no other head since).
 *
 * The reactor's side, in turn, read that request for the coroutine, not
 * for itself: a coroutine resumed that shows the request of the
 * connection it waits for (published for it so, or its own saved one,
 * whose body the reactor read) hands it over (fc_handed), and the side
 * that resumed it comes back without it.  Else an io_context run by
 * several threads showed it on an idle thread for as long as the
 * coroutine waited on a timer: their next wait is a condition variable's,
 * not the reactor's, which clears it.
 *
 * Nothing is published before the real switch, since the context of the
 * side resumed is in its own frame: so
 * - a coroutine made by make_fcontext() starts with the context of the
 *   one that first jumps to it (the thread's, unchanged).  Boost's own
 *   callcc(), fiber and spawn make it and jump to it at once, in the
 *   maker's frame, and their entry functions suspend in jump_fcontext()
 *   at once: so a Boost coroutine starts with its maker's context, as a
 *   ucontext coroutine does with makecontext()'s;
 * - ontop_fcontext(to, vp, fn) suspends its caller like jump_fcontext()
 *   (Boost.Fiber switches with it: resume_with()), and fn, which runs on
 *   top of the coroutine resumed, before its switch returns, runs with
 *   the caller's context; the coroutine's own comes back when fn returns.
 *   Boost ends a suspended coroutine by throwing forced_unwind out of such
 *   an fn: the exception unwinds through our frame (the shim's code has
 *   unwind tables), which then never puts anything back; and a finished
 *   one leaves through an ontop_fcontext() that never returns.  Either's
 *   slot, if it had a context, stays until a later save reclaims it (the
 *   table evicts the least recently used).
 *
 * make_fcontext() itself is passed through; its hook maps the table (not
 * a switch: pthread_once, mmap), as the constructor does when
 * libboost_context is loaded at start-up.  Switches while the shim is
 * inactive pass through untouched; one whose context finds no table (a
 * switch before any make_fcontext() we saw) or no slot resumes with
 * none, as an evicted one does.
 *
 * The switch hooks are async-signal-safe (no allocation, try-locks only)
 * and keep errno: the thread's errno is what the side resumed sees, as
 * without the shim. */
#include "config.h"

#include "hooks.h"

#include "hook-scope.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* boost/context/detail/fcontext.hpp, declared here so that the shim
 * neither needs Boost's headers nor links the library. */
typedef void *fcontext_t;
struct fc_transfer {
	fcontext_t fctx;
	void *data;
};

typedef struct fc_transfer (*jump_fcontext_fn)(fcontext_t, void *);
typedef struct fc_transfer (*ontop_fn)(struct fc_transfer);
typedef struct fc_transfer (*ontop_fcontext_fn)(fcontext_t, void *, ontop_fn);
typedef fcontext_t (*make_fcontext_fn)(void *, size_t, void (*)(struct fc_transfer));

HOOK_EXPORT struct fc_transfer jump_fcontext(fcontext_t to, void *vp);
HOOK_EXPORT struct fc_transfer ontop_fcontext(fcontext_t to, void *vp, ontop_fn fn);
HOOK_EXPORT fcontext_t make_fcontext(void *sp,
				     size_t size,
				     void (*fn)(struct fc_transfer));

/* Debian 12's, and the next releases' (the soname names the version). */
static const char *const fc_sonames[] = {"libboost_context.so.1.74.0",
					 "libboost_context.so.1.81.0",
					 "libboost_context.so.1.83.0", NULL};

static const char *const fc_names[] = {"jump_fcontext", "ontop_fcontext",
				       "make_fcontext"};
static const void *const fc_selves[] = {(const void *)jump_fcontext,
					(const void *)ontop_fcontext,
					(const void *)make_fcontext};
static struct ctxshim_callers fc_callers = {
	.names = fc_names, .n = 3, .selves = fc_selves};

/* Set once the real functions are found; until then every call retries
 * (a plugin may load the library RTLD_LOCAL later). */
static int fc_bound;
static jump_fcontext_fn real_jump_fn;
static ontop_fcontext_fn real_ontop_fn;
static make_fcontext_fn real_make_fn;

static void
hook_fcontext_bind_slow(void)
{
	int saved_errno = errno;
	void *j, *o, *m;

	j = ctxshim_bind_loaded(fc_sonames, "jump_fcontext", NULL,
				(const void *)jump_fcontext);
	o = j ? ctxshim_bind_loaded(fc_sonames, "ontop_fcontext", NULL,
				    (const void *)ontop_fcontext)
	      : NULL;
	m = o ? ctxshim_bind_loaded(fc_sonames, "make_fcontext", NULL,
				    (const void *)make_fcontext)
	      : NULL;
	if (m) {
		/* Threads racing here store the same values. */
		__atomic_store_n(&real_jump_fn, (jump_fcontext_fn)j, __ATOMIC_RELAXED);
		__atomic_store_n(&real_ontop_fn, (ontop_fcontext_fn)o,
				 __ATOMIC_RELAXED);
		__atomic_store_n(&real_make_fn, (make_fcontext_fn)m, __ATOMIC_RELAXED);
		ctxshim_callers_bound(&fc_callers, j);
		__atomic_store_n(&fc_bound, 1, __ATOMIC_RELEASE);
	}
	errno = saved_errno;
}

static inline void
hook_fcontext_bind(void)
{
	if (!__atomic_load_n(&fc_bound, __ATOMIC_ACQUIRE))
		hook_fcontext_bind_slow();
}

/* Bind and map the table now when the library is loaded at start-up: a
 * program linked with it makes no dl*() call on its own threads later
 * (preload/bind.c), and its switches are followed from the first, even
 * one made by a make_fcontext() call we did not see (the library's
 * own). */
__attribute__((constructor(104))) static void
hook_fcontext_ctor(void)
{
	int saved_errno = errno;

	if (ctxshim_lib_loaded(fc_sonames)) {
		hook_fcontext_bind();
		if (ctxshim_active())
			(void)hook_ucontext_keys_ready();
	}
	errno = saved_errno;
}

/* The caller's own copy of the library (fn[] by fc_names), or NULL: the
 * call is ours.  ret: the exported hook's return address. */
static inline void *const *
fc_own(const void *ret)
{
	void *const *own;

	if (!__atomic_load_n(&fc_bound, __ATOMIC_ACQUIRE) &&
	    ctxshim_callers_cached(&fc_callers, ret, &own))
		return own;
	hook_fcontext_bind();
	return ctxshim_callers_own(
		&fc_callers, ret,
		(const void *)__atomic_load_n(&real_jump_fn, __ATOMIC_RELAXED));
}

/* Not found: nobody but a caller of a copy we passed on can have bound to
 * our names, and a switch cannot fail; end the process with
 * ctxshim_bind()'s message, as a required symbol missing does. */
static void *
hook_fcontext_missing(const char *name, const void *self)
{
	return ctxshim_bind(name, NULL, self, true);
}

static inline jump_fcontext_fn
real_jump_fcontext(void)
{
	hook_fcontext_bind();
	if (!real_jump_fn)
		return (jump_fcontext_fn)hook_fcontext_missing(
			"jump_fcontext", (const void *)jump_fcontext);
	return real_jump_fn;
}

static inline ontop_fcontext_fn
real_ontop_fcontext(void)
{
	hook_fcontext_bind();
	if (!real_ontop_fn)
		return (ontop_fcontext_fn)hook_fcontext_missing(
			"ontop_fcontext", (const void *)ontop_fcontext);
	return real_ontop_fn;
}

static inline make_fcontext_fn
real_make_fcontext(void)
{
	hook_fcontext_bind();
	if (!real_make_fn)
		return (make_fcontext_fn)hook_fcontext_missing(
			"make_fcontext", (const void *)make_fcontext);
	return real_make_fn;
}

/* The key of the side that switched last on this thread, for the side
 * it resumed; the key of a side whose request the coroutine it resumed
 * took (hook_fcontext_resumed()), and that request's span-id. */
static __thread const void *fc_switcher __attribute__((tls_model("initial-exec")));
static __thread const void *fc_handed __attribute__((tls_model("initial-exec")));
static __thread uint8_t fc_handed_span[8] __attribute__((tls_model("initial-exec")));

/* What a suspended coroutine has to put back when it is resumed. */
enum fc_saved {
	FC_UNTRACKED, /* nothing: the shim is inactive, pass through */
	FC_NONE,      /* no context */
	FC_SAVED,     /* its context, in the table under the key */
};

/* Before the real switch: the thread's context saved under key (an
 * address in the switching hook's frame).  A thread without one (most
 * switches of a program nobody traces) needs no slot: the hook's own
 * frame, which the switch keeps, says so.  Neither does one whose context
 * finds no slot: it resumes with none, as an evicted one does. */
static inline __attribute__((always_inline)) enum fc_saved
hook_fcontext_suspend(const void *key, struct hook_socket_rd *rd)
{
	int saved_errno = errno;
	enum fc_saved s = FC_UNTRACKED;

	if (ctxshim_active()) {
		hook_socket_rd_take(rd);
		s = ctxshim_current() && hook_ucontext_key_save(key) ? FC_SAVED
								     : FC_NONE;
		fc_switcher = key;
	}
	errno = saved_errno;
	return s;
}

/* Back from the real switch: resumed, perhaps on another thread, perhaps
 * much later.  A function of its own, never inlined, for the reason
 * hook-ucontext.c gives at hook_ucontext_swap_return(): thread-local
 * addresses and errno's must be computed after the switch. */
__attribute__((noinline, noipa)) static void
hook_fcontext_resumed(const void *key,
		      enum fc_saved s,
		      const struct hook_socket_rd *rd,
		      const char *reason)
{
	int saved_errno = errno;
	const void *resumer = fc_switcher;

	fc_switcher = NULL;
	/* Back without a context (none saved, its request answered since,
	 * or evicted): the request its connection got meanwhile, which a
	 * reactor read for it, else none rather than the resumer's context,
	 * which may be another coroutine's request. */
	if ((s != FC_SAVED || !hook_ucontext_key_take(key, reason) ||
	     !ctxshim_current()) &&
	    !hook_socket_rd_resume(rd, reason))
		hook_scope_clear(reason);
	/* Only the very request handed over leaves its resumer: a side that
	 * had one of its own keeps it. */
	if (__builtin_expect(fc_handed == key, 0)) {
		const struct ctxshim_ctx *cur = ctxshim_current();

		fc_handed = NULL;
		if (cur && memcmp(cur->span_id, fc_handed_span, 8) == 0)
			hook_scope_clear(reason);
	}
	if (resumer && hook_socket_rd_shown(rd)) {
		fc_handed = resumer;
		memcpy(fc_handed_span, ctxshim_current()->span_id, 8);
	}
	errno = saved_errno;
}

static struct fc_transfer
hook_fcontext_jump(fcontext_t to, void *vp)
{
	jump_fcontext_fn real = real_jump_fcontext();
	struct fc_transfer r;
	char key; /* its address: this frame's, live while suspended */
	struct hook_socket_rd rd;
	enum fc_saved s = hook_fcontext_suspend(&key, &rd);

	if (s == FC_UNTRACKED)
		return real(to, vp);
	r = real(to, vp);
	hook_fcontext_resumed(&key, s, &rd, "jump_fcontext-return");
	return r;
}

static struct fc_transfer
hook_fcontext_ontop(fcontext_t to, void *vp, ontop_fn fn)
{
	ontop_fcontext_fn real = real_ontop_fcontext();
	struct fc_transfer r;
	char key;
	struct hook_socket_rd rd;
	enum fc_saved s = hook_fcontext_suspend(&key, &rd);

	if (s == FC_UNTRACKED)
		return real(to, vp, fn);
	r = real(to, vp, fn);
	hook_fcontext_resumed(&key, s, &rd, "ontop_fcontext-return");
	return r;
}

static fcontext_t
hook_fcontext_make(void *sp, size_t size, void (*fn)(struct fc_transfer))
{
	make_fcontext_fn real = real_make_fcontext();

	if (ctxshim_active()) {
		int saved_errno = errno;

		(void)hook_ucontext_keys_ready();
		errno = saved_errno;
	}
	return real(sp, size, fn);
}

HOOK_EXPORT struct fc_transfer
jump_fcontext(fcontext_t to, void *vp)
{
	CTXSHIM_OWN_RETURN(fc_own, 0, jump_fcontext_fn, to, vp);
	return hook_fcontext_jump(to, vp);
}

HOOK_EXPORT struct fc_transfer
ontop_fcontext(fcontext_t to, void *vp, ontop_fn fn)
{
	CTXSHIM_OWN_RETURN(fc_own, 1, ontop_fcontext_fn, to, vp, fn);
	return hook_fcontext_ontop(to, vp, fn);
}

HOOK_EXPORT fcontext_t
make_fcontext(void *sp, size_t size, void (*fn)(struct fc_transfer))
{
	CTXSHIM_OWN_RETURN(fc_own, 2, make_fcontext_fn, sp, size, fn);
	return hook_fcontext_make(sp, size, fn);
}
