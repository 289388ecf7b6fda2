/* SPDX-License-Identifier: Apache-2.0 */
/* longjmp(), _longjmp(), siglongjmp() and __longjmp_chk() (what longjmp()
 * becomes under _FORTIFY_SOURCE): a jump out of a signal handler that
 * interrupted one of our hooks.
 *
 * The hooks guard their per-thread state with busy flags, so that a hook
 * running in a signal handler that interrupted another one on the same
 * thread passes straight through (thread-ctx.h, hook-socket.c), and
 * OpenSSL's hooks hold the session of a followed call across the real
 * call (hook-openssl.c).  A handler that never returns -- the request
 * timeout of legacy servers, alarm() and a handler that siglongjmp()s
 * back to the request loop -- used to leave them set for good: the
 * thread never published a context again (test/helpers/stress.c, mode
 * sigjmp: after 2 to 39 jumps with a 13-100 us timer), or its session's
 * later reads went unseen.
 *
 * Each hold knows the stack pointer of the frame that took it
 * (ctxshim_busy_token(), ctxshim_thread_hold(), OSSL_HOLD()).  A jump ends
 * every frame below its target's stack pointer, on the target's stack: a
 * hold whose frame is below it, on the same stack, is released here
 * before the real jump, and the thread then publishes nothing (the hold
 * may have stopped half-way through a publication; the request it was for
 * was given up).  A jump that keeps the holder's frame (a handler's own
 * setjmp()/longjmp(), below the interrupted hook) changes nothing: that
 * hook still finds its flag when the handler returns to it.  "The same
 * stack" is the thread's own (ctxshim_stack_between()): a holder or a
 * target elsewhere (a coroutine's stack, a jump within a signal stack)
 * is never released, as before.
 *
 * The same frame test serves three hooks whose state is not a busy flag.
 * curl_easy_perform's (hook-curl.c) records its stack pointer per thread:
 * a jump that ends it publishes again what the thread showed before the
 * call (the abandoned transfer's client span used to stay, and every
 * later transfer took it for the thread's own context), and the handle's
 * header list is given back at its next hooked call (the handler may
 * have interrupted curl or a holder of the hook's lock).  A ucontext
 * switch's slot lock (hook-ucontext.c) holds its holder's stack pointer,
 * and the thread remembers the slot it locked last: a jump that ends the
 * holder releases it (the slot used to stay locked, and every later
 * switch to that ucontext kept whatever context it found).  libfcgi's
 * finish and accept flags (hook-fcgi.c) are the hook's stack pointer
 * (the application's FCGX_Free() of the request it gave up used to be
 * taken for part of the finish, and left the request published).
 *
 * The target's stack pointer is in the jmp_buf, mangled with glibc's
 * pointer guard (x86-64: xor with the thread's guard, then a left
 * rotation by 17 bits; sysdeps/unix/sysv/linux/x86_64/sysdep.h,
 * PTR_MANGLE); the constructor checks the decoding against a _setjmp() of
 * its own, and without a match (or on another architecture) the hooks
 * only pass through.
 *
 * Not seen: jumps that do not go through these names (__builtin_longjmp,
 * an unwinder's throw out of a handler, setcontext() to a context that
 * never comes back): their holds stay set, as before.  Nor what the
 * library hooks that publish a request around the application's callback
 * (hook-http.h: hook-mhd.c, hook-evhttp.c, hook-nghttp2.c; hook-scope.h:
 * hook-pool-uv.c, hook-evhttp.c's event_base_once()) would restore after
 * it: a jump out of the callback leaves the request it abandoned
 * published until the thread publishes something else or the socket
 * level sees its connection close (libevent
 * refuses to run an event loop a jump left, and libmicrohttpd calls the
 * handler of an unanswered request again, which publishes it again).  A
 * ucontext slot locked by a switch that a signal handler's own switch
 * interrupted stays locked.  hook-curl.c's table mutex is held with the
 * thread's signals blocked once a jump has ended a curl hook in the
 * process; the first such jump could still leave it locked. */
#include "config.h"

/* The names themselves: no fortify redirection of longjmp. */
#undef _FORTIFY_SOURCE

#include "hooks.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>

typedef void (*jump_fn)(struct __jmp_buf_tag *env, int val);

HOOK_EXPORT void __longjmp_chk(struct __jmp_buf_tag env[1], int val)
	__attribute__((noreturn));

enum { J_LONGJMP, J__LONGJMP, J_SIGLONGJMP, J_LONGJMP_CHK, J_N };

static pthread_once_t bind_once = PTHREAD_ONCE_INIT;
static jump_fn real_fn[J_N];
/* The jmp_buf's stack pointer decodes as expected (constructor). */
static bool jump_sp_ok;

#if defined(__x86_64__)
#define JB_RSP 6 /* glibc's x86-64 jmp_buf: rbx rbp r12 r13 r14 r15 rsp pc */

static uintptr_t
jump_sp(const struct __jmp_buf_tag *env)
{
	uintptr_t v = (uintptr_t)env->__jmpbuf[JB_RSP], guard;

	/* tcbhead_t.pointer_guard */
	__asm__("mov %%fs:0x30, %0" : "=r"(guard));
	return ((v >> 17) | (v << 47)) ^ guard;
}

/* The stack pointer a _setjmp() here saves is this frame's: noinline, so
 * that it is a frame of its own. */
static __attribute__((noinline)) void
jump_sp_check(void)
{
	jmp_buf b;
	uintptr_t sp;

	__asm__ volatile("mov %%rsp, %0" : "=r"(sp));
	if (_setjmp(b) == 0) {
		uintptr_t got = jump_sp(b);

		jump_sp_ok = got >= sp && got - sp < 256;
	}
}
#else
static uintptr_t
jump_sp(const struct __jmp_buf_tag *env)
{
	(void)env;
	return 0;
}

static void
jump_sp_check(void)
{
}
#endif

static void
hook_longjmp_bind_once(void)
{
	real_fn[J_LONGJMP] =
		(jump_fn)ctxshim_bind("longjmp", NULL, (const void *)longjmp, false);
	real_fn[J__LONGJMP] =
		(jump_fn)ctxshim_bind("_longjmp", NULL, (const void *)_longjmp, false);
	real_fn[J_SIGLONGJMP] = (jump_fn)ctxshim_bind("siglongjmp", NULL,
						      (const void *)siglongjmp, false);
	real_fn[J_LONGJMP_CHK] = (jump_fn)ctxshim_bind(
		"__longjmp_chk", NULL, (const void *)__longjmp_chk, false);
}

/* A jump usually leaves a signal handler, where binding (dlsym) is not
 * allowed: bind at load time. */
__attribute__((constructor)) static void
hook_longjmp_init(void)
{
	pthread_once(&bind_once, hook_longjmp_bind_once);
	jump_sp_check();
}

static inline __attribute__((noreturn)) void
real_jump(int which, struct __jmp_buf_tag *env, int val)
{
	jump_fn fn = real_fn[which];

	if (__builtin_expect(!fn, 0)) {
		/* a jump before our constructor ran */
		pthread_once(&bind_once, hook_longjmp_bind_once);
		fn = real_fn[which];
		if (!fn)
			abort(); /* no libc jump to make */
	}
	fn(env, val);
	__builtin_unreachable();
}

static __attribute__((noreturn)) void
hook_longjmp_jump(int which, struct __jmp_buf_tag *env, int val)
{
	if (jump_sp_ok && ctxshim_active()) {
		uintptr_t to = jump_sp(env);

		hook_curl_unwound(to);
		hook_ucontext_unwound(to);
		hook_fcgi_unwound(to);
		hook_socket_unwound(to);
		hook_openssl_unwound(to);
	}
	real_jump(which, env, val);
}

HOOK_EXPORT void
longjmp(struct __jmp_buf_tag env[1], int val)
{
	hook_longjmp_jump(J_LONGJMP, env, val);
}

HOOK_EXPORT void
_longjmp(struct __jmp_buf_tag env[1], int val)
{
	hook_longjmp_jump(J__LONGJMP, env, val);
}

HOOK_EXPORT void
siglongjmp(struct __jmp_buf_tag env[1], int val)
{
	hook_longjmp_jump(J_SIGLONGJMP, env, val);
}

HOOK_EXPORT void
__longjmp_chk(struct __jmp_buf_tag env[1], int val)
{
	hook_longjmp_jump(J_LONGJMP_CHK, env, val);
}
