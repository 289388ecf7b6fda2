/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "thread-ctx.h"

#include "events.h"
#include "cfg.h"
#include "log.h"
#include "maps.h"
#include "rng.h"
#include "shim.h"
#include "sys.h"
#include "w3c.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

/* struct ctxshim_thread and the reasons for its layout: thread-ctx.h.
 * Initial-exec: one %fs-relative address instead of a TLSDESC call per
 * access (~20 instructions per request, B4).  The shim only works
 * preloaded (interposition), so its TLS is in the static block anyway;
 * hook-socket.c's per-thread state is initial-exec too.  (A dlopen() of
 * the shim fails for want of static TLS room, unless the host raised
 * glibc.rtld.optional_static_tls: then preload/bind.c binds through
 * libc's handle.) */
__thread struct ctxshim_thread ctxshim_self
	__attribute__((aligned(64), tls_model("initial-exec")));

/* Bumped in every forked child, so each thread re-seeds lazily (from a
 * key the child draws anew: thread_key_draw()) and a child never repeats
 * the ids its parent draws. */
static unsigned ctxshim_fork_gen = 1;

static pthread_key_t exit_key;
static bool exit_key_ok;

static inline void
publish_ptr(void *p)
{
	atomic_signal_fence(memory_order_seq_cst);
	*(void *volatile *)&ctxshim_own_slot = p;
	atomic_signal_fence(memory_order_seq_cst);
}

/* Runs from the thread's pthread key destructors, before glibc frees or
 * recycles the TLS block: the thread stops publishing before its records
 * disappear, and a cached stack reused by a new thread starts clean. */
static void
thread_exit(void *arg)
{
	(void)arg;
	if (ctxshim_mode != CTXSHIM_ACTIVE)
		return;
	if (ctxshim_self.has_cur)
		CTXSHIM_EVENT(CTXSHIM_EV_DETACH, -1, NULL, "thread-exit");
	publish_ptr(NULL);
	ctxshim_self.has_cur = false;
	ctxshim_self.sk_owned = 0;
	ctxshim_self.sk_pending = 0;
}

/* Keeps errno: it runs inside read hooks that do not save it
 * (hook-socket.c, sk_in_begin()).  Out of line: once per thread, and
 * inlined it made every publication save four registers (B4c).  Once the
 * slot is known the exit handler is registered: every publication checks
 * the slot anyway, and no longer a flag of its own as well (B4c).  This
 * can be a thread's first publication from a signal handler:
 * pthread_setspecific() allocates only for keys from 32 on (glibc's second
 * level), and the constructor creates ours before the application's own
 * (key 0 in nginx, curl and python3). */
__attribute__((noinline, cold)) void **
ctxshim_thread_first_slot(struct ctxshim_thread *t)
{
	int saved_errno = errno;

	t->slot = &ctxshim_own_slot;
	if (exit_key_ok)
		(void)pthread_setspecific(exit_key, (void *)1);
	errno = saved_errno;
	return t->slot;
}

/* ctxshim_attach() and ctxshim_attach_sock(): sk_owned says whose the
 * context is (thread-ctx.h). */
static inline __attribute__((always_inline)) void
thread_attach(const struct ctxshim_ctx *c, uint8_t sk_owned)
{
	struct ctxshim_thread *t;
	uint16_t attrs_len, ts_len;
	size_t next;
	struct ctxshim_ctx *d;
	uintptr_t prev;

	if (!ctxshim_active())
		return;
	t = ctxshim_thread_self();
	if (t->busy)
		return;
	ctxshim_thread_hold(t, &prev);

	attrs_len = c->attrs_len <= TREC_ATTRS_MAX ? c->attrs_len : 0;
	ts_len = c->tracestate_len <= CTXSHIM_TRACESTATE_MAX ? c->tracestate_len : 0;
	next = t->cur_off ^ CTXSHIM_CTX_SIZE;
	d = ctxshim_thread_ctx_at(t, next);
	if (d != c) {
		/* Copy only what is used: the arrays are mostly empty.  c may
		 * be the published buffer (attach(ctxshim_current())): it is
		 * the other one, so they never overlap. */
		memcpy(d, c, offsetof(struct ctxshim_ctx, attrs));
		memcpy(d->attrs, c->attrs, attrs_len);
		if (ts_len) /* usually none: skip the copy's set-up */
			memcpy(d->tracestate, c->tracestate, ts_len);
	}
	d->attrs_len = attrs_len;
	d->tracestate_len = ts_len;
	ctxshim_publish_ctx(t, d, next);
	t->sk_owned = sk_owned;
	ctxshim_thread_unhold(t, prev);
}

void
ctxshim_attach(const struct ctxshim_ctx *c)
{
	thread_attach(c, 0);
}

void
ctxshim_attach_sock(const struct ctxshim_ctx *c)
{
	thread_attach(c, 1);
}

CTXSHIM_HOT struct ctxshim_ctx *
ctxshim_build_begin(void)
{
	struct ctxshim_thread *t;

	if (!ctxshim_active())
		return NULL;
	t = ctxshim_thread_self();
	if (__builtin_expect(t->busy, 0))
		return NULL;
	t->busy = 1;
	atomic_signal_fence(memory_order_seq_cst);
	return ctxshim_thread_ctx_at(t, t->cur_off ^ CTXSHIM_CTX_SIZE);
}

/* The thread's first publication: the rest of ctxshim_build_publish(),
 * apart so that the common path saves no registers for the call. */
static __attribute__((noinline, cold)) void
build_publish_first(struct ctxshim_thread *t, struct ctxshim_ctx *c)
{
	ctxshim_publish_ptr_t(t, c->trace_id);
	t->sk_owned = 1;
	t->sk_pending = 1;
	atomic_signal_fence(memory_order_seq_cst);
	t->busy = 0;
}

CTXSHIM_HOT void
ctxshim_build_publish(struct ctxshim_ctx *c)
{
	struct ctxshim_thread *t = ctxshim_thread_self();
	size_t next = t->cur_off ^ CTXSHIM_CTX_SIZE;

	/* Only the buffer begin() handed out is published. */
	if (c == ctxshim_thread_ctx_at(t, next)) {
		if (c->attrs_len > TREC_ATTRS_MAX)
			c->attrs_len = 0;
		if (c->tracestate_len > CTXSHIM_TRACESTATE_MAX)
			c->tracestate_len = 0;
		/* ctxshim_publish_ctx(), with the slot's first use apart */
		c->valid = 1;
		t->cur_off = next;
		if (__builtin_expect(!t->slot, 0)) {
			t->has_cur = true;
			build_publish_first(t, c);
			return;
		}
		/* ctxshim_publish_ptr_t(), then has_cur, sk_owned (the socket
		 * level's own context: it is this function's only user,
		 * hooks/hook-socket.c), busy = 0 and sk_pending (a request
		 * just read, not answered) in one store: the four bytes are
		 * in a row (thread-ctx.h), and a signal handler sees busy
		 * until all of it is done (B4c). */
		atomic_signal_fence(memory_order_seq_cst);
		*(void *volatile *)t->slot = c->trace_id;
		atomic_signal_fence(memory_order_seq_cst);
		ctxshim_thread_flags_set(t, CTXSHIM_FLAGS_PENDING);
		return;
	}
	atomic_signal_fence(memory_order_seq_cst);
	t->busy = 0;
}

void
ctxshim_build_cancel(void)
{
	struct ctxshim_thread *t = ctxshim_thread_self();

	atomic_signal_fence(memory_order_seq_cst);
	t->busy = 0;
}

void
ctxshim_detach(void)
{
	struct ctxshim_thread *t;
	uintptr_t prev;

	if (!ctxshim_active())
		return;
	t = ctxshim_thread_self();
	if (t->busy)
		return;
	ctxshim_thread_hold(t, &prev);
	ctxshim_publish_ptr_t(t, NULL);
	t->has_cur = false;
	ctxshim_thread_unhold(t, prev);
}

/* See thread-ctx.h.  The busy flags' holders: sk.busy's is told by the
 * caller (sk_dead); busy 1 is a hold inside that one; busy
 * CTXSHIM_BUSY_KNOWN is owner_sp's frame. */
void
ctxshim_thread_unwound(uintptr_t to, bool sk_dead)
{
	struct ctxshim_thread *t = ctxshim_thread_self();
	uint8_t busy = t->busy;

	if (busy == CTXSHIM_BUSY_KNOWN) {
		uintptr_t sp = t->owner_sp;

		if (!(sp && sp < to && ctxshim_stack_between(sp, to)))
			return; /* held by a frame the jump keeps */
	} else if (!sk_dead) {
		return; /* nothing, or a hold inside the socket level's that stays */
	} else if (!busy && !t->sk_owned) {
		/* Only the socket level's hold ended, outside any update: what
		 * is published is whole, and not the socket level's (whose
		 * bookkeeping of it the caller dropped), so it stays. */
		return;
	}
	/* Whatever the hold was doing (a publication half-way, the pointer
	 * swapped and the buffers not, or the other way round): publish
	 * nothing.  The request it was for was given up by the jump. */
	if (t->slot)
		*(void *volatile *)t->slot = NULL;
	atomic_signal_fence(memory_order_seq_cst);
	t->has_cur = false;
	t->sk_owned = 0;
	t->sk_pending = 0;
	t->owner_sp = 0;
	atomic_signal_fence(memory_order_seq_cst);
	t->busy = 0;
}

/* The mapping that holds sp (stack_mapping()). */
struct stack_find {
	uintptr_t sp, lo, hi;
	bool found, main_stack;
};

static bool
stack_find_line(const struct maps_entry *e, void *arg)
{
	struct stack_find *f = arg;

	if (e->start > f->sp)
		return true; /* sorted: none holds it */
	if (f->sp >= e->end)
		return false;
	f->lo = e->start;
	f->hi = e->end;
	f->main_stack = e->path_len == 7 && memcmp(e->path, "[stack]", 7) == 0;
	f->found = true;
	return true;
}

/* [*lo, *hi), the mapping that holds sp, and whether it is the main
 * thread's stack; false if none does or the maps cannot be read.  A small
 * buffer: this may run on a small signal stack. */
static bool
stack_mapping(uintptr_t sp, uintptr_t *lo, uintptr_t *hi, bool *main_stack)
{
	struct stack_find f = {.sp = sp};
	char buf[256];

	(void)sys_maps_scan(buf, sizeof(buf), stack_find_line, &f);
	*lo = f.lo;
	*hi = f.hi;
	*main_stack = f.main_stack;
	return f.found;
}

bool
ctxshim_stack_between(uintptr_t sp, uintptr_t to)
{
#if defined(__x86_64__)
	uintptr_t lo, hi, tp, cur;
	bool main_stack, on_alt;
	stack_t ss;
	int saved_errno = errno;
	bool ok = false;

	cur = ctxshim_stack_pointer();
	on_alt = syscall(SYS_sigaltstack, NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK);
	/* A jump to a frame on the signal stack it runs on: the holder may
	 * be further up that stack, or on the thread's, below or above; we
	 * cannot tell, so nothing is released. */
	if (on_alt && to - (uintptr_t)ss.ss_sp < ss.ss_size)
		goto out;
	/* Off a signal stack, the code that jumps runs on the holder's stack,
	 * below the holder (a handler that interrupted it, or what that
	 * handler called); code on another stack (a coroutine's) is not
	 * inside the hold, whatever the numbers say.  On one, sp may be a
	 * guess (hook_socket_unwound(): 32 bits of it): only within 1 MiB
	 * below to, where a request loop's frames put it. */
	if (on_alt ? to - sp >= (1u << 20) : cur >= sp)
		goto out;
	/* The thread pointer: glibc's thread descriptor, at the top of the
	 * mapping of a thread's stack (below it: the stack). */
	__asm__("mov %%fs:0, %0" : "=r"(tp));
	if (!stack_mapping(sp, &lo, &hi, &main_stack) || to >= hi ||
	    (!on_alt && cur < lo))
		goto out;
	ok = main_stack || (lo <= tp && tp < hi && to < tp);
out:
	errno = saved_errno;
	return ok;
#else
	(void)sp;
	(void)to;
	return false;
#endif
}

/* The process's seed, drawn with getrandom() by the constructor and again
 * by the fork handler (thread_key_draw()); each thread's
 * generators are seeded from it with no system call (thread_rng_seed()).
 * A thread that sandboxes itself after it started -- seccomp's strict
 * mode, or a filter that kills on what its own code never calls, as
 * privilege-separated workers do -- draws ids on its first request: a
 * getrandom() there killed it.  thread_key_gen is ctxshim_fork_gen when
 * the key was drawn (0: never); thread_seeded counts the threads seeded
 * from it. */
#define THREAD_SEED_WORDS ((CTX_RNG_SEED_SIZE + CTX_SPLITMIX_SEED_SIZE) / 8)
static uint64_t thread_key[THREAD_SEED_WORDS];
static unsigned thread_key_gen;
static uint64_t thread_seeded;

/* Keeps errno: the first id draw runs inside read hooks that do not save
 * it (hook-socket.c, sk_in_begin()). */
static __attribute__((noinline, cold)) void
thread_key_draw(void)
{
	uint64_t key[THREAD_SEED_WORDS];
	size_t got = 0, i;
	int saved_errno = errno;

	/* getrandom() is async-signal-safe; if the pool is not ready
	 * (very early boot) fall back to mixing what we have, since
	 * ids only need to be unique, not secret. */
	while (got < sizeof(key)) {
		ssize_t r = getrandom((uint8_t *)key + got, sizeof(key) - got,
				      GRND_NONBLOCK);

		if (r <= 0)
			break;
		got += (size_t)r;
	}
	if (got < sizeof(key)) {
		uint64_t mix[THREAD_SEED_WORDS] = {(uint64_t)(uintptr_t)thread_key,
						   (uint64_t)getpid(),
						   (uint64_t)__builtin_ia32_rdtsc(),
						   (uint64_t)ctxshim_fork_gen,
						   (uint64_t)(uintptr_t)key ^
							   (uint64_t)getpid() << 32,
						   (uint64_t)__builtin_ia32_rdtsc()};

		_Static_assert(sizeof(mix) == sizeof(key), "one word per 8 seed bytes");
		memcpy(key, mix, sizeof(key));
	}
	/* Word by word: two threads that seed at once (threads started
	 * before the constructor) may both draw; any mix of two keys is as
	 * good. */
	for (i = 0; i < THREAD_SEED_WORDS; i++)
		__atomic_store_n(&thread_key[i], key[i], __ATOMIC_RELAXED);
	__atomic_store_n(&thread_key_gen, ctxshim_fork_gen, __ATOMIC_RELEASE);
	errno = saved_errno;
}

/* Out of line: it runs once per thread (and after fork), and keeping it
 * apart lets thread_rng() inline into the per-request id draws.  The seed
 * is the process's key xor the next of a sequence of distinct words
 * (ctx_mix64() is one-to-one): no two threads of a process get the same
 * seed, hence the same generators (ctx_rng_seed() is one-to-one too),
 * and two processes' keys are independent. */
static __attribute__((noinline, cold)) void
thread_rng_seed(struct ctxshim_thread *t)
{
	uint8_t seed[CTX_RNG_SEED_SIZE + CTX_SPLITMIX_SEED_SIZE];
	uint64_t n;
	size_t i;

	if (__atomic_load_n(&thread_key_gen, __ATOMIC_ACQUIRE) != ctxshim_fork_gen)
		thread_key_draw();
	n = __atomic_fetch_add(&thread_seeded, 1, __ATOMIC_RELAXED);
	for (i = 0; i < THREAD_SEED_WORDS; i++) {
		uint64_t w = __atomic_load_n(&thread_key[i], __ATOMIC_RELAXED) ^
			     ctx_mix64(n * THREAD_SEED_WORDS + i + 1);

		memcpy(seed + 8 * i, &w, 8);
	}
	/* Separate bytes for the two generators: the span-ids' stream owes
	 * nothing to the trace-ids'. */
	ctx_rng_seed(&t->rng, seed);
	ctx_splitmix_seed(&t->span_rng, seed + CTX_RNG_SEED_SIZE);
	/* The thread's first request counts from here (hook-socket.c,
	 * "Handlers run after the next wait"), unless it switched to
	 * another request's context before its first draw. */
	if (t->sk.mark != CTXSHIM_SK_MARK_MIXED)
		t->sk.mark = t->span_rng.state;
	t->rng_gen = ctxshim_fork_gen;
}

static inline struct ctx_rng *
thread_rng(void)
{
	struct ctxshim_thread *t = ctxshim_thread_self();

	if (__builtin_expect(t->rng_gen != ctxshim_fork_gen, 0))
		thread_rng_seed(t);
	return &t->rng;
}

CTXSHIM_HOT void
ctxshim_new_trace_id(uint8_t id[16])
{
	ctx_rng_trace_id(thread_rng(), id);
}

/* The first draw of a thread (or of a forked child's thread): seed, then
 * draw; and the draw that steps over the state 0.  Apart, so that the
 * common path below saves no registers for a call. */
static __attribute__((noinline, cold)) void
span_id_slow(uint8_t id[8], struct ctxshim_thread *t)
{
	if (t->rng_gen != ctxshim_fork_gen)
		thread_rng_seed(t);
	ctx_splitmix_span_id(&t->span_rng, id);
}

/* SplitMix64 rather than xoshiro256** (rng.h): ~10 instructions fewer per
 * traced request (B4c).  The common case of ctx_splitmix_span_id(), with
 * the state 0 (the all-zero id) left to span_id_slow(), which steps over
 * it exactly as ctx_splitmix_next_nonzero() does: written out here
 * because as a conditional move it cost three instructions per id. */
CTXSHIM_HOT void
ctxshim_new_span_id(uint8_t id[8])
{
	struct ctxshim_thread *t = ctxshim_thread_self();
	uint64_t s;

	if (__builtin_expect(t->rng_gen != ctxshim_fork_gen, 0)) {
		span_id_slow(id, t);
		return;
	}
	s = t->span_rng.state + t->span_rng.gamma;
	if (__builtin_expect(s == 0, 0)) {
		span_id_slow(id, t);
		return;
	}
	t->span_rng.state = s;
	ctx_store_le64(id, ctx_mix64(s));
}

void
ctxshim_random_uuid(char out[37])
{
	ctx_rng_uuid4(thread_rng(), out);
}

void
ctxshim_ctx_begin(struct ctxshim_ctx *c, const struct w3c_traceparent *tp)
{
	memset(c, 0, offsetof(struct ctxshim_ctx, attrs));
	if (tp) {
		memcpy(c->trace_id, tp->trace_id, sizeof(c->trace_id));
		memcpy(c->parent_id, tp->parent_id, sizeof(c->parent_id));
		c->has_parent = 1;
		/* W3C: unknown flag bits are not propagated. */
		c->flags = tp->flags & W3C_FLAGS_KNOWN;
	} else {
		ctxshim_new_trace_id(c->trace_id);
		c->flags = W3C_FLAG_RANDOM;
	}
	ctxshim_new_span_id(c->span_id);
}

void
ctxshim_ctx_add_parent_attr(struct ctxshim_ctx *c, struct trec_attr_writer *w)
{
	char hex[16];

	if (!c->has_parent)
		return;
	/* Every traced request adds this entry: encode the digits straight
	 * into the writer when the entry fits (no copy, no call), and leave
	 * the rare entry that does not to trec_attrs_add(), which counts it
	 * as dropped. */
	if (w->len <= w->cap && w->cap - w->len >= TREC_ENTRY_OVERHEAD + sizeof(hex)) {
		uint8_t *d = w->buf + w->len;

		d[0] = CTXSHIM_KEY_PARENT;
		d[1] = (uint8_t)sizeof(hex);
		w3c_hex_encode((char *)d + TREC_ENTRY_OVERHEAD, c->parent_id,
			       sizeof(c->parent_id));
		w->len += TREC_ENTRY_OVERHEAD + sizeof(hex);
		return;
	}
	w3c_hex_encode(hex, c->parent_id, sizeof(c->parent_id));
	(void)trec_attrs_add(w, CTXSHIM_KEY_PARENT, hex, sizeof(hex));
}

int
ctxshim_ctx_set_tracestate(struct ctxshim_ctx *c,
			   const char *const *lines,
			   const size_t *lens,
			   size_t n_lines)
{
	struct w3c_tracestate ts;
	size_t len = 0;
	int r;

	c->tracestate_len = 0;
	r = w3c_tracestate_parse(lines, lens, n_lines, &ts);
	if (r == 0)
		r = w3c_tracestate_format(c->tracestate, sizeof(c->tracestate), &len,
					  &ts, W3C_TRACESTATE_MAX_LEN, NULL);
	if (r == 0)
		c->tracestate_len = (uint16_t)len;
	return r;
}

void
ctxshim_thread_init(void)
{
	thread_key_draw();
	exit_key_ok = pthread_key_create(&exit_key, thread_exit) == 0;
	if (!exit_key_ok)
		ctxshim_log("pthread_key_create failed; records of exiting threads are "
			    "cleared only when their TLS is reused");
}

void
ctxshim_thread_after_fork_child(void)
{
	/* Only the forking thread exists in the child; its context carries on
	 * (it continues that work).  New ids must come from a new seed. */
	ctxshim_fork_gen++;
	if (ctxshim_fork_gen == 0)
		ctxshim_fork_gen = 1;
	/* Now, while the child can still make the call (thread_rng_seed()). */
	thread_key_draw();
}
