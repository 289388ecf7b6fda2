/* SPDX-License-Identifier: Apache-2.0 */
/* ucontext coroutines: each ucontext_t carries its own context, and
 * switching to a ucontext publishes its context on the thread.
 *
 * - makecontext(ucp) tags ucp with the calling thread's context (or with
 *   "none"): a coroutine created while a request is handled belongs to
 *   that request, whoever schedules it later.  The coroutine starts in
 *   hook_ucontext_start(), which publishes that context and goes on to
 *   the application's function: libc starts a coroutine through uc_link
 *   where no hook sees it (gregs REG_RIP, REG_R12 and REG_R13 of ucp hold
 *   the shim's values, which no program has reason to read).  The start
 *   finds its context under its stack (the top of uc_stack, made odd so
 *   that no ucontext_t address can be the same), which makecontext
 *   tags, not ucp: a ucontext copied after makecontext (a spawn helper
 *   that makes it in a local and copies it into the coroutine's object)
 *   starts with what its own makecontext gave it, whereas ucp's tag is
 *   the local's, which the next coroutine made through the same local
 *   replaces.  One slot a coroutine, as many as the table holds: ucp's
 *   own (getcontext's) is let go, and a switch to ucp keeps the thread's
 *   context until the start, a few instructions on; the start lets the
 *   stack's go (the coroutine has its ucontext's once it yields), so a
 *   coroutine started again from the same made ucontext, without another
 *   makecontext, keeps the thread's context.  One stack holds one
 *   coroutine yet to start: another makecontext on it writes over the
 *   first's start frame.
 * - getcontext(ucp) snapshots the thread's context into ucp.
 * - swapcontext(oucp, ucp) saves the thread's context into oucp, then
 *   publishes ucp's (an untracked ucp leaves the thread's context as it
 *   is).  When the saved oucp is resumed, its context is published again:
 *   by the switch that resumes it, or, when libc resumes it internally (a
 *   makecontext function returning to uc_link: __start_context calls the
 *   internal __setcontext, which no hook sees), by our swapcontext frame
 *   on its way back to the caller.
 * - setcontext(ucp) publishes ucp's context and switches.
 * - A context comes back as a library hook's saved one does
 *   (hook_scope_capture(), hook_scope_restore()): one the socket level
 *   published is its to clear again (at the next wait, ...), and one
 *   whose request was answered while the ucontext waited is not shown
 *   again: the switch clears the thread's context instead.  A scheduler
 *   that reads a request's head (its thread shows that request) and
 *   switches to the request's coroutine, which answers it and switches
 *   back, showed the answered request until its next wait.  The request
 *   is looked up by its connection's slot, not by the thread: so also for
 *   a coroutine resumed on another thread.
 *
 * Per-ucontext state lives in one table keyed by the ucontext_t address,
 * mapped once, at the first getcontext() or makecontext() (never on a
 * switch): 4096 slots, found by hashing with a bounded probe window.  There
 * is no "ucontext freed" event, so a slot is reclaimed when its address is
 * tagged again, or evicted (least recently switched first) when a new
 * ucontext needs room in a full window; never the one a switch goes to,
 * for the ucontext it leaves (the one resumed next is often the least
 * recently switched: a round-robin scheduler's).  getcontext() evicts
 * none: its ucontext is most often made into a coroutine next.
 *
 * Switches must stay cheap and async-signal-safe (setcontext() out of a
 * signal handler is legal): no allocation, no locks that wait.  Each slot
 * has a try-lock; a switch that finds its slot busy (another thread
 * evicting it, or a handler interrupting us on the same slot) leaves the
 * context alone rather than wait.
 *
 * Limits (also in ctxshim(7), LIMITS):
 * - a ucontext evicted from a full table, or never seen by getcontext,
 *   makecontext or swapcontext (or by a getcontext that found its window
 *   full), is untracked: switching to it keeps the thread's current
 *   context;
 * - getcontext()'s second return (through setcontext() of a ucontext made
 *   by getcontext) is not seen: the context switched to is what setcontext
 *   published, which is the ucontext's snapshot, so this only matters for
 *   libc's internal uc_link switch to such a ucontext;
 * - a signal handler that jumps out of a switch (a request timeout,
 *   hook-longjmp.c) releases the slot the switch held, when both are on
 *   the thread's own stack; a ucontext whose context the switch was
 *   writing then has none until it is saved again; a slot held on a
 *   coroutine's stack, or by a switch that the handler's own switch
 *   interrupted, stays locked;
 * - switchers that do not use these functions (hand-written assembly in
 *   libco, libaco, State Threads) and setjmp/longjmp tricks are
 *   invisible; Boost.Context's are followed by hook-fcontext.c, through
 *   this table (hook_ucontext_key_save()). */
#include "config.h"

#include "hooks.h"

#include "hook-scope.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <ucontext.h>

#define UC_SLOTS  4096u /* power of two */
#define UC_WINDOW 16u

typedef int (*getcontext_fn)(ucontext_t *);
typedef int (*setcontext_fn)(const ucontext_t *);
typedef int (*swapcontext_fn)(ucontext_t *, const ucontext_t *);
typedef void (*makecontext_fn)(ucontext_t *, void (*)(void), int, ...);

HOOK_EXPORT int getcontext(ucontext_t *ucp);
HOOK_EXPORT int setcontext(const ucontext_t *ucp);
HOOK_EXPORT int swapcontext(ucontext_t *oucp, const ucontext_t *ucp);
HOOK_EXPORT void makecontext(ucontext_t *ucp, void (*func)(void), int argc, ...);

static pthread_once_t bind_once = PTHREAD_ONCE_INIT;
static getcontext_fn real_getcontext_fn;
static setcontext_fn real_setcontext_fn;
static swapcontext_fn real_swapcontext_fn;
static makecontext_fn real_makecontext_fn;

/* Searched on every switch: kept apart from the bulky contexts so that a
 * probe window is a few cache lines.  32 bytes: a slot's index is a
 * shift away from its head's address (24 took a multiplication on every
 * switch). */
struct uc_head {
	_Atomic uintptr_t key; /* ucontext_t address, 0 = free */
	/* Try-lock for body: 0, or the holder's token (uc_token()). */
	_Atomic uintptr_t busy;
	atomic_uint stamp; /* uc_epoch when last used */
} __attribute__((aligned(32)));

struct uc_table {
	struct uc_head head[UC_SLOTS];
	struct hook_scope body[UC_SLOTS];
};

static pthread_once_t table_once = PTHREAD_ONCE_INIT;
static struct uc_table *_Atomic table;
static atomic_uint uc_epoch;

/* The ucontext the last hooked switch on this thread went to: lets the
 * swapcontext frame that resumes tell a hooked switch back (which already
 * published) from libc's internal uc_link switch (which did not). */
static __thread const ucontext_t *switched_to;

/* The slot this thread locked last, or tried to: the one a jump out of a
 * signal handler that interrupted a switch may leave locked
 * (hook_ucontext_unwound()).  A switch holds one slot at a time; a
 * handler's own switch while it interrupts one replaces it, and the
 * interrupted hold is then not found.  Initial-exec, like ctxshim_self:
 * one store a lock. */
static __thread struct uc_head *uc_last __attribute__((tls_model("initial-exec")));

static void
hook_ucontext_afterfork_child(void)
{
	struct uc_table *t = atomic_load(&table);
	unsigned i;

	/* Only this thread survives: try-locks held by the others never get
	 * released. */
	if (t)
		for (i = 0; i < UC_SLOTS; i++)
			atomic_store_explicit(&t->head[i].busy, 0,
					      memory_order_relaxed);
}

static void
hook_ucontext_bind_once(void)
{
	real_getcontext_fn = (getcontext_fn)ctxshim_bind(
		"getcontext", NULL, (const void *)getcontext, true);
	real_setcontext_fn = (setcontext_fn)ctxshim_bind(
		"setcontext", NULL, (const void *)setcontext, true);
	real_swapcontext_fn = (swapcontext_fn)ctxshim_bind(
		"swapcontext", NULL, (const void *)swapcontext, true);
	real_makecontext_fn = (makecontext_fn)ctxshim_bind(
		"makecontext", NULL, (const void *)makecontext, true);
}

static inline void
hook_ucontext_bind(void)
{
	pthread_once(&bind_once, hook_ucontext_bind_once);
}

/* At load time, not at the first call: a dlsym() on an application
 * thread discards the dlerror() message it has not read yet
 * (preload/bind.c), and a setcontext() out of a signal handler may be the
 * process's first, where dlsym() is not allowed.  The calls' own binding
 * stays for one made before this constructor ran. */
__attribute__((constructor(103))) static void
hook_ucontext_init(void)
{
	hook_ucontext_bind();
}

static void
hook_ucontext_table_once(void)
{
	void *p = mmap(NULL, sizeof(struct uc_table), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return; /* ucontexts stay untracked */
	atomic_store(&table, (struct uc_table *)p);
	(void)pthread_atfork(NULL, NULL, hook_ucontext_afterfork_child);
}

/* Outside switches only. */
static struct uc_table *
hook_ucontext_table_create(void)
{
	int saved_errno = errno;

	pthread_once(&table_once, hook_ucontext_table_once);
	errno = saved_errno;
	return atomic_load(&table);
}

static unsigned
hook_ucontext_hash(uintptr_t key)
{
	return (unsigned)(((uint64_t)key * 0x9e3779b97f4a7c15ull) >> 52) &
	       (UC_SLOTS - 1);
}

/* A slot's holder, for a jump out of a signal handler that interrupted it
 * (hook-longjmp.c, hook_ucontext_unwound()): the stack pointer of the
 * frame that takes the slot, below a caller that releases it before it
 * returns (never 0: 8-aligned; plus 1 when the holder writes the slot's
 * body).  All 64 bits, where the socket level keeps 32: uc_last may be a
 * slot another thread holds, and no other thread's frame can be on this
 * one's stack.  Elsewhere than x86-64: 1, a holder never released. */
static inline __attribute__((always_inline)) uintptr_t
uc_token(bool writes)
{
	uintptr_t sp = ctxshim_stack_pointer();

	return (sp ? sp : 1) | writes;
}

/* Called from hook_ucontext_lock_slot(): its frame is below the caller's,
 * which holds the slot until it returns (a jump that ends one ends both);
 * only a creating caller (hook_ucontext_save()) writes the body. */
static inline __attribute__((always_inline)) bool
hook_ucontext_trylock(struct uc_head *h, bool writes)
{
	uintptr_t expect = 0, token = uc_token(writes);

	/* Before the lock: a jump right after it must find it (the token
	 * tells whether it is ours). */
	uc_last = h;
	atomic_signal_fence(memory_order_seq_cst);
	return atomic_compare_exchange_strong_explicit(
		&h->busy, &expect, token, memory_order_acquire, memory_order_relaxed);
}

static void
hook_ucontext_unlock(struct uc_head *h)
{
	atomic_store_explicit(&h->busy, 0, memory_order_release);
}

/* hooks.h: a jump to a frame at to ends the hold of this thread's frame
 * below it on the thread's stack, which would otherwise keep the slot
 * locked for good (every later switch to its ucontext kept the context
 * it found).  The slot is uc_last's, if its token says the hold is this
 * thread's and in the part of the stack the jump ends.  A holder that
 * wrote the body may have stopped half-way: the ucontext's context is then
 * none (as the thread's, ctxshim_thread_unwound()), until it is saved
 * again. */
void
hook_ucontext_unwound(uintptr_t to)
{
	struct uc_head *h = uc_last;
	struct uc_table *t = atomic_load_explicit(&table, memory_order_acquire);
	uintptr_t b;

	if (!h || !t)
		return;
	/* Not locked, or by no frame known: nothing to look up.  Whether
	 * the frame is this thread's, ended by the jump, is
	 * ctxshim_stack_between()'s (which also knows signal stacks). */
	b = atomic_load_explicit(&h->busy, memory_order_relaxed);
	if (!(b > 1 && b < to && ctxshim_stack_between(b & ~(uintptr_t)1, to)))
		return;
	if (b & 1)
		t->body[h - t->head].has = false;
	hook_ucontext_unlock(h);
}

/* The locked slot of key, claiming one if create, a free one or, if
 * evict, the window's least recently used but keep's; NULL if untracked
 * or busy.  The caller unlocks. */
static struct uc_head *
hook_ucontext_lock_slot(
	struct uc_table *t, const void *ucp, bool create, bool evict, const void *keep)
{
	uintptr_t key = (uintptr_t)ucp;
	unsigned base = hook_ucontext_hash(key), i, oldest = UC_SLOTS;
	unsigned now = atomic_load_explicit(&uc_epoch, memory_order_relaxed);
	unsigned oldest_age = 0;
	struct uc_head *h;

	for (i = 0; i < UC_WINDOW; i++) {
		h = &t->head[(base + i) & (UC_SLOTS - 1)];
		if (atomic_load_explicit(&h->key, memory_order_acquire) != key)
			continue;
		if (!hook_ucontext_trylock(h, create))
			return NULL;
		/* Evicted between the check and the lock? */
		if (atomic_load_explicit(&h->key, memory_order_relaxed) == key)
			goto found;
		hook_ucontext_unlock(h);
		return NULL;
	}
	if (!create)
		return NULL;
	for (i = 0; i < UC_WINDOW; i++) {
		unsigned idx = (base + i) & (UC_SLOTS - 1);
		uintptr_t k;

		h = &t->head[idx];
		k = atomic_load_explicit(&h->key, memory_order_relaxed);
		if (k == 0) {
			if (!hook_ucontext_trylock(h, create))
				continue;
			if (atomic_compare_exchange_strong(&h->key, &k, key))
				goto claimed;
			hook_ucontext_unlock(h);
			continue;
		}
		if (k == (uintptr_t)keep)
			continue;
		if (now - atomic_load_explicit(&h->stamp, memory_order_relaxed) >=
		    oldest_age) {
			oldest_age = now - atomic_load_explicit(&h->stamp,
								memory_order_relaxed);
			oldest = idx;
		}
	}
	if (oldest == UC_SLOTS || !evict)
		return NULL;
	h = &t->head[oldest];
	if (!hook_ucontext_trylock(h, create))
		return NULL;
	atomic_store_explicit(&h->key, key, memory_order_release);
claimed:
	atomic_fetch_add_explicit(&uc_epoch, 1, memory_order_relaxed);
	t->body[h - t->head].has = false;
found:
	atomic_store_explicit(&h->stamp,
			      atomic_load_explicit(&uc_epoch, memory_order_relaxed),
			      memory_order_relaxed);
	return h;
}

/* ucp's context := the calling thread's, in a slot claimed if need be (a
 * free one, or if evict another, not keep's).  False: ucp untracked. */
static bool
hook_ucontext_save(struct uc_table *t, const void *ucp, bool evict, const void *keep)
{
	struct uc_head *h = hook_ucontext_lock_slot(t, ucp, true, evict, keep);

	if (!h)
		return false;
	hook_scope_capture(&t->body[h - t->head]);
	hook_ucontext_unlock(h);
	return true;
}

/* ucp untracked: its slot, if any, is free again. */
static void
hook_ucontext_forget(struct uc_table *t, const void *ucp)
{
	struct uc_head *h = hook_ucontext_lock_slot(t, ucp, false, false, NULL);

	if (!h)
		return;
	atomic_store_explicit(&h->key, 0, memory_order_release);
	hook_ucontext_unlock(h);
}

/* The calling thread's context := ucp's, if ucp is tracked. */
static void
hook_ucontext_publish(struct uc_table *t, const void *ucp, const char *reason)
{
	struct uc_head *h = hook_ucontext_lock_slot(t, ucp, false, false, NULL);

	if (!h)
		return;
	hook_scope_restore(&t->body[h - t->head], reason);
	hook_ucontext_unlock(h);
}

/* hooks.h: the table for other switchers (hook-fcontext.c), under keys
 * of their own: addresses no ucontext_t occupies while the key is live
 * (a hook's frame), or odd ones. */
bool
hook_ucontext_keys_ready(void)
{
	return hook_ucontext_table_create() != NULL;
}

bool
hook_ucontext_key_save(const void *key)
{
	struct uc_table *t = atomic_load_explicit(&table, memory_order_acquire);

	return t && hook_ucontext_save(t, key, true, NULL);
}

bool
hook_ucontext_key_take(const void *key, const char *reason)
{
	struct uc_table *t = atomic_load_explicit(&table, memory_order_acquire);
	struct uc_head *h;

	if (!t || !(h = hook_ucontext_lock_slot(t, key, false, false, NULL)))
		return false;
	hook_scope_restore(&t->body[h - t->head], reason);
	atomic_store_explicit(&h->key, 0, memory_order_release);
	hook_ucontext_unlock(h);
	return true;
}

/* Called by the getcontext stub before it jumps to the real getcontext;
 * returns the real function. */
__attribute__((used)) static void *
hook_ucontext_getcontext_prep(ucontext_t *ucp)
{
	int saved_errno = errno;
	struct uc_table *t;

	hook_ucontext_bind();
	/* Into a free slot only: most ucontexts set up by getcontext()
	 * are made into coroutines next, whose makecontext() lets the slot
	 * go; taken from a full window, it was a made coroutine's, which
	 * then started with the scheduler's context. */
	if (ctxshim_active() && ucp && (t = hook_ucontext_table_create()))
		hook_ucontext_save(t, ucp, false, NULL);
	errno = saved_errno;
	return (void *)real_getcontext_fn;
}

/* getcontext() returns twice when the ucontext is resumed, so it must
 * return from the application's frame, not from ours: the stub does our
 * part first and then jumps to the real function with the caller's return
 * address and registers untouched.  (%rdi is saved around the call; the
 * push keeps the stack 16-byte aligned for it.) */
__attribute__((naked)) HOOK_EXPORT int
getcontext(ucontext_t *ucp)
{
	__asm__ volatile("endbr64\n\t"
			 "push %%rdi\n\t"
			 "call %P0\n\t"
			 "pop %%rdi\n\t"
			 "jmp *%%rax\n\t"
			 :
			 : "i"(hook_ucontext_getcontext_prep));
}

static int
hook_ucontext_setcontext(const ucontext_t *ucp)
{
	struct uc_table *t = atomic_load_explicit(&table, memory_order_acquire);
	const struct ctxshim_ctx *prev;
	struct hook_socket_owner own;
	int r, saved_errno;

	hook_ucontext_bind();
	if (!ctxshim_active() || !t || !ucp)
		return real_setcontext_fn(ucp);
	/* What the thread shows now, to put back should the switch fail
	 * (EFAULT: ucp cannot be read, the application resumes a freed
	 * ucontext).  No copy: the publication below writes the thread's
	 * other buffer or only clears the pointer, so this one stays
	 * intact until the next.  And what the socket level followed, which
	 * the publication hands ucp's request (hook_scope_restore()): the
	 * thread's own request, put back, is the socket level's to clear
	 * again at the next wait. */
	prev = ctxshim_current();
	hook_socket_owner_save(&own);
	hook_ucontext_publish(t, ucp, "setcontext");
	switched_to = ucp;
	r = real_setcontext_fn(ucp);
	/* Only on failure: we are still where we were. */
	saved_errno = errno;
	switched_to = NULL;
	if (ctxshim_current() != prev) {
		if (prev)
			ctxshim_attach(prev);
		else
			ctxshim_detach();
	}
	hook_socket_owner_put(&own);
	errno = saved_errno;
	return r;
}

/* Back in oucp after swapcontext(), perhaps on another thread, perhaps
 * much later; or the switch failed and we never left.  A function of its
 * own, never inlined: within one function gcc treats the address of a
 * thread-local (and __errno_location(), declared const) as fixed and would
 * reuse what it computed before the switch, i.e. read the variable of the
 * thread that made the call, which may have ended and freed its TLS.  Here
 * both are computed after the switch, on the thread we run on now (noipa:
 * no interprocedural pass may fold this into the caller either). */
__attribute__((noinline, noipa)) static void
hook_ucontext_swap_return(struct uc_table *t, ucontext_t *oucp)
{
	int saved_errno = errno;

	if (switched_to != oucp)
		hook_ucontext_publish(t, oucp, "swapcontext-return");
	switched_to = NULL;
	errno = saved_errno;
}

static int
hook_ucontext_swapcontext(ucontext_t *oucp, const ucontext_t *ucp)
{
	struct uc_table *t = atomic_load_explicit(&table, memory_order_acquire);
	int r;

	hook_ucontext_bind();
	if (!ctxshim_active() || !t || !oucp || !ucp)
		return real_swapcontext_fn(oucp, ucp);
	/* ucp's slot stays: the publication below needs it. */
	hook_ucontext_save(t, oucp, true, ucp);
	hook_ucontext_publish(t, ucp, "swapcontext");
	switched_to = ucp;
	r = real_swapcontext_fn(oucp, ucp);
	/* No thread-local access from here on but in the function below. */
	hook_ucontext_swap_return(t, oucp);
	return r;
}

/* The integer argument registers and %rax (%al: the vector-register
 * count of a variadic call), around a call from the assembly stubs
 * below; seven pushes keep the stack 16-byte aligned for it. */
#define UC_SAVE_ARGS                                                            \
	"push %%rdi\n\tpush %%rsi\n\tpush %%rdx\n\tpush %%rcx\n\tpush %%r8\n\t" \
	"push %%r9\n\tpush %%rax\n\t"
#define UC_RESTORE_ARGS                                                   \
	"pop %%rax\n\tpop %%r9\n\tpop %%r8\n\tpop %%rcx\n\tpop %%rdx\n\t" \
	"pop %%rsi\n\tpop %%rdi\n\t"

/* First thing in a coroutine made by makecontext(), whoever starts it:
 * a hooked switch has published its context already, but libc's internal
 * uc_link switch (__start_context of a coroutine that returned) starting
 * this one has not, and it would run with the context of the coroutine
 * that returned.  %r12 is its start key (set by the prep below). */
__attribute__((used)) static void
hook_ucontext_start_prep(const void *key)
{
	int saved_errno = errno;

	/* Started: the key's slot has done its work (a coroutine that
	 * yields is found under its own ucontext then), and kept it would
	 * be a second slot a coroutine, which a pool of more than about
	 * 2000 waiting at once filled the table with. */
	if (ctxshim_active())
		(void)hook_ucontext_key_take(key, "makecontext-start");
	errno = saved_errno;
}

/* The function the coroutine starts in instead of the application's
 * (in %r13), with the application's argument registers untouched. */
__attribute__((naked, used)) static void
hook_ucontext_start(void)
{
	__asm__ volatile("endbr64\n\t" UC_SAVE_ARGS "mov %%r12, %%rdi\n\t"
			 "call %P0\n\t" UC_RESTORE_ARGS "jmp *%%r13\n\t"
			 :
			 : "i"(hook_ucontext_start_prep));
}

struct uc_make {
	void *real; /* %rax: the real makecontext */
	void *func; /* %rdx: the function to pass it */
};

/* The key a coroutine made on ucp starts with (see the top): its stack's
 * top, odd; ucp itself if it has no stack (makecontext would fail).  The
 * sum is unsigned (no undefined behaviour) and may wrap: glibc's
 * makecontext (sysdeps/unix/sysv/linux/x86_64/makecontext.c) computes the
 * top the same way and runs the coroutine there when the wrapped address
 * is writable, so the key is that coroutine's like any other's.  Odd, it
 * is never 0 (a free slot) nor a ucontext_t's address. */
static const void *
hook_ucontext_start_key(const ucontext_t *ucp)
{
	if (!ucp->uc_stack.ss_sp)
		return ucp;
	return (const void *)(((uintptr_t)ucp->uc_stack.ss_sp + ucp->uc_stack.ss_size) |
			      1);
}

/* Called by the makecontext stub before it jumps to the real makecontext;
 * returns the real function and the start function to give it.  Tagging
 * ucp first is the same as after: the tag lives in our table, not in the
 * ucontext_t.  A tracked coroutine starts in hook_ucontext_start(), with
 * its start key in %r12 and func in %r13 (registers makecontext leaves as
 * they are, and setcontext/swapcontext load, from a copy too). */
__attribute__((used)) static struct uc_make
hook_ucontext_makecontext_prep(ucontext_t *ucp, void (*func)(void))
{
	int saved_errno = errno;
	struct uc_make r;
	struct uc_table *t;

	hook_ucontext_bind();
	r.real = (void *)real_makecontext_fn;
	r.func = (void *)func;
	if (ctxshim_active() && ucp && func && (t = hook_ucontext_table_create())) {
		const void *key = hook_ucontext_start_key(ucp);

		/* One slot per coroutine, as many as the table holds: its
		 * start publishes the key's; ucp's own (getcontext's, an
		 * earlier coroutine's) is let go, so a switch to ucp keeps
		 * the thread's context until that start, a few
		 * instructions on.  Tagging both took two slots a
		 * coroutine: a pool of more than about 2000 made before
		 * they ran had coroutines start with the scheduler's. */
		if (key != ucp)
			hook_ucontext_forget(t, ucp);
		hook_ucontext_save(t, key, true, NULL);
		ucp->uc_mcontext.gregs[REG_R12] = (greg_t)(uintptr_t)key;
		ucp->uc_mcontext.gregs[REG_R13] = (greg_t)(uintptr_t)func;
		r.func = (void *)hook_ucontext_start;
	}
	errno = saved_errno;
	return r;
}

HOOK_EXPORT int
setcontext(const ucontext_t *ucp)
{
	return hook_ucontext_setcontext(ucp);
}

HOOK_EXPORT int
swapcontext(ucontext_t *oucp, const ucontext_t *ucp)
{
	return hook_ucontext_swapcontext(oucp, ucp);
}

/* makecontext() takes any number of arguments (argc of them, as 64-bit
 * slots in registers and on the stack), which a C function cannot pass
 * on: like getcontext() above, the stub does our part first and then
 * jumps to the real function with the caller's argument registers (%al,
 * the vector-register count of a variadic call, too) and stack untouched. */
__attribute__((naked)) HOOK_EXPORT void
makecontext(ucontext_t *ucp, void (*func)(void), int argc, ...)
{
	__asm__ volatile("endbr64\n\t" UC_SAVE_ARGS "call %P0\n\t"
			 "mov %%rax, %%r11\n\t"
			 "mov %%rdx, %%r10\n\t" UC_RESTORE_ARGS "mov %%r10, %%rsi\n\t"
			 "jmp *%%r11\n\t"
			 :
			 : "i"(hook_ucontext_makecontext_prep));
}
