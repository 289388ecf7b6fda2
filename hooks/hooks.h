/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Rules for every hook in hooks/ (see CODING_STYLE.md, "Hooks"):
 *
 * 1. Three layers: the exported libc-named function is a one-liner that
 *    calls hook_<lib>_<fn>(); that does the logic and calls real_<fn>(), a
 *    static inline that binds lazily (pthread_once) and calls the pointer.
 *    Hooks of libraries a plugin may load RTLD_LOCAL (GLib, libuv,
 *    libmicrohttpd, libevent, OpenSSL) bind through ctxshim_bind_loaded()
 *    instead, in a constructor when the library is there at start-up, and
 *    retry at each call until it binds.
 * 2. Return exactly what the real call returned and leave errno as the real
 *    call left it: save errno after the real call, restore it before
 *    returning -- or, on a per-request path, call nothing that can set it
 *    (pure code, plain memory; the rare calls that can keep errno
 *    themselves, see hook-socket.c, sk_in_begin()).
 * 3. Nothing on a read path allocates, locks, logs or calls dlsym.
 * 4. Never call a hooked function from inside the shim except through
 *    real_*() or the raw syscalls in preload/sys.h.
 * 5. Pass straight through when ctxshim_active() is false or the call has
 *    nothing to do with us (the first lines of every hook).
 * 6. Async-signal-safe: a hook may run inside the application's signal
 *    handler; per-thread state is guarded by the busy flag in thread-ctx.c.
 *    A flag or guard held across anything a handler can interrupt records
 *    its holder's frame, so that a longjmp() out of the handler that ends
 *    the frame releases it (hook-longjmp.c).
 * 7. Every new exported name goes into preload/ctxshim.sym too (the
 *    symbols-leak test checks it). */

#include "bind.h"
#include "shim.h"
#include "thread-ctx.h"

#define HOOK_EXPORT CTXSHIM_EXPORT

/* In a forked child (the _Fork() hook; fork() runs hook-socket.c's own
 * atfork handler): the socket level notes the new pid, by which it tells
 * a vfork() child that shares our memory from us (hook-socket.c). */
void hook_socket_after_fork_child(void);

/* Before the thread blocks on a condition variable (hook-pthread.c), when
 * it publishes a connection's context (ctxshim_self.sk.fdp1 != 0): a
 * worker that answered its request and went back to its pool no longer
 * shows it (hook-socket.c), wherever its connection is now (a copy that
 * carries it on).  Keeps errno. */
void hook_socket_thread_wait(void);

/* A thread started while its creator shows a request the socket level
 * follows (hook-pthread.c, hook-socket.c "inherited requests"): take()
 * on the creator fills *in for the copy of cur (the creator's current
 * context) it hands over (in->fdp1 0: nothing to follow); adopt() on the
 * new thread, after it published that copy; inherited_wait() at each of
 * the thread's waits (ctxshim_self.sk.inh.fdp1 != 0), before and after
 * it, clears the inherited context (when shown) once that request is
 * answered, and returns whether the thread shows it still unanswered
 * (then the wait looks again after it).  The thread follows the request
 * for good (a context of it shown again later is cleared too).  Keep
 * errno. */
void hook_socket_inherit_take(struct ctxshim_sk_inherit *in,
			      const struct ctxshim_ctx *cur);
void hook_socket_inherit_adopt(const struct ctxshim_sk_inherit *in);
bool hook_socket_inherited_wait(void);

/* A library hook took over, with the same ids, the request the socket
 * level published on this thread for connection fd (hook-fcgi.c: libfcgi
 * read the records the socket level followed as FastCGI): the context is
 * the hook's to clear when its request ends, not the socket level's at
 * fd's close (hook-socket.c).  Keeps errno. */
void hook_socket_disown(int fd);

/* The process makes an nghttp2 server session (hook-nghttp2.c): its
 * frames are that hook's, which follows each stream, so the socket level
 * follows no connection as HTTP/2 from now on, and drops what the thread
 * shows of one it followed (preload/conn.c, "HTTP/2").  When that is the
 * current request of such a connection (the server read its first frames
 * before it made the session), returns true with its context in *adopt
 * and its stream id in *stream: the session's stream keeps it, one
 * request, one span.  Keeps errno. */
bool hook_socket_h2_library(struct ctxshim_ctx *adopt, int32_t *stream);

/* A longjmp() out of a signal handler to a frame whose stack pointer is
 * to (hook-longjmp.c): release what the socket level, the thread's
 * state and OpenSSL's hooks hold in frames the jump ends (hook-socket.c,
 * thread-ctx.h: ctxshim_thread_unwound()). */
void hook_socket_unwound(uintptr_t to);
void hook_openssl_unwound(uintptr_t to);
/* The same for curl_easy_perform's hook (hook-curl.c), which holds no
 * busy flag but has state to put back: first, so that a hold the others
 * find ended wins (the thread then publishes nothing). */
void hook_curl_unwound(uintptr_t to);
/* ... and for the ucontext table's slot locks (hook-ucontext.c). */
void hook_ucontext_unwound(uintptr_t to);
/* ... and for libfcgi's finish and accept flags (hook-fcgi.c). */
void hook_fcgi_unwound(uintptr_t to);

/* hook-ucontext.c's table of saved contexts, for another coroutine
 * switcher (hook-fcontext.c) under keys of its own.  keys_ready() maps
 * the table if need be (pthread_once, mmap: never on a switch), true if
 * it is there.  key_save(): key's context := the calling thread's (a
 * slot claimed, the least recently used evicted from a full window);
 * key_take(): the thread's context := key's (hook_scope_restore(): a
 * request answered meanwhile shows none), and key's slot is free again.
 * Both false when key is untracked (no table, evicted, or its slot busy
 * for a moment).  Async-signal-safe; the caller keeps errno. */
bool hook_ucontext_keys_ready(void);
bool hook_ucontext_key_save(const void *key);
bool hook_ucontext_key_take(const void *key, const char *reason);

#define HOOK_SAVE_ERRNO(expr)             \
	do {                              \
		int saved_errno_ = errno; \
		expr;                     \
		errno = saved_errno_;     \
	} while (0)
