/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Per-thread state and the attach/update/detach API the hooks use.
 *
 * Publication strategy (OTEP-4947 "pointer swap"): each thread owns two
 * context buffers in its own TLS block, each embedding a record (struct
 * ctxshim_ctx below).  An update writes the buffer that is not published,
 * sets valid = 1, and then stores its record's address into
 * otel_thread_ctx_v1; a detach stores NULL.  A reader that stops the
 * thread at any instruction therefore sees either the old complete record,
 * the new complete record, or NULL -- never a half-written one.  The buffers
 * live exactly as long as the thread (they are in its static TLS block), so
 * the published pointer can never refer to unmapped memory. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rng.h"
#include "shim.h"
#include "thread-record.h"

#include <signal.h>
#include <stdatomic.h>

#define CTXSHIM_TRACESTATE_MAX 512

/* The fields from trace_id to attrs are laid out exactly as an OTEP-4947
 * record (thread-record.h), so that a context in the thread's own buffers
 * is published in place, by pointing otel_thread_ctx_v1 at its trace_id:
 * no copy into a separate record (B4).  Everything before attrs is the
 * fixed-size part, copied whole with offsetof(struct ctxshim_ctx, attrs);
 * tracestate comes last. */
struct ctxshim_ctx {
	uint8_t parent_id[8]; /* incoming parent span, if has_parent */
	uint8_t has_parent;
	uint8_t spare;
	uint16_t tracestate_len;
	/* Meaningful only in a copy a hook saved to restore later on the same
	 * thread (hook-scope.h, hook-http.h, hook-curl.c): the connection
	 * (fd + 1, 0: none) and its generation whose context this was for the
	 * socket level, so that restoring it hands it back (hook-socket.c,
	 * hook_socket_ctx_stamp() and hook_socket_ctx_restored()).  Anywhere
	 * else (fresh contexts zero it, copies carry it) it is never read. */
	int32_t sock_fdp1;
	uint32_t sock_gen;
	/* ---- from here, an otel_thread_ctx_record ---- */
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t valid;      /* the record's valid byte: set by publication */
	uint8_t flags;      /* W3C trace-flags (the record's trace_flags) */
	uint16_t attrs_len; /* encoded OTEP-4947 attrs-data (attrs_data_size) */
	uint8_t attrs[TREC_ATTRS_MAX];
	char tracestate[CTXSHIM_TRACESTATE_MAX];
};
#define CTXSHIM_CTX_REC_OFFSET offsetof(struct ctxshim_ctx, trace_id)
_Static_assert(offsetof(struct ctxshim_ctx, span_id) - CTXSHIM_CTX_REC_OFFSET ==
			       offsetof(struct otel_thread_ctx_record, span_id) &&
		       offsetof(struct ctxshim_ctx, valid) - CTXSHIM_CTX_REC_OFFSET ==
			       offsetof(struct otel_thread_ctx_record, valid) &&
		       offsetof(struct ctxshim_ctx, flags) - CTXSHIM_CTX_REC_OFFSET ==
			       offsetof(struct otel_thread_ctx_record, trace_flags) &&
		       offsetof(struct ctxshim_ctx, attrs_len) -
				       CTXSHIM_CTX_REC_OFFSET ==
			       offsetof(struct otel_thread_ctx_record,
					attrs_data_size) &&
		       offsetof(struct ctxshim_ctx, attrs) - CTXSHIM_CTX_REC_OFFSET ==
			       TREC_HEADER_SIZE,
	       "struct ctxshim_ctx embeds an otel_thread_ctx_record");

/* Copy only what is used: a struct ctxshim_ctx is 1.2 KiB, mostly empty
 * attribute and tracestate space.  Lengths out of range count as 0. */
static inline void
ctxshim_ctx_copy(struct ctxshim_ctx *dst, const struct ctxshim_ctx *src)
{
	size_t attrs_len = src->attrs_len <= sizeof(src->attrs) ? src->attrs_len : 0;
	size_t ts_len = src->tracestate_len <= sizeof(src->tracestate)
				? src->tracestate_len
				: 0;

	memcpy(dst, src, offsetof(struct ctxshim_ctx, attrs));
	memcpy(dst->attrs, src->attrs, attrs_len);
	memcpy(dst->tracestate, src->tracestate, ts_len);
	dst->attrs_len = (uint16_t)attrs_len;
	dst->tracestate_len = (uint16_t)ts_len;
}

/* Publish c as the calling thread's context.  Async-signal-safe; a call from
 * a signal handler that interrupted another update on the same thread is
 * dropped (the interrupted update wins). */
void ctxshim_attach(const struct ctxshim_ctx *c);
/* Build the calling thread's next context in place, then publish it
 * without copying (the socket level's per-request path, B4).  begin()
 * returns the thread's buffer that is not published (NULL when the shim is
 * off or an update is in progress on this thread, e.g. we are in a signal
 * handler that interrupted one) and holds the thread's update lock until
 * publish() or cancel(): an attach from a signal handler meanwhile is
 * dropped, exactly as if it had interrupted ctxshim_attach().  Nothing is
 * visible until publish(); cancel() leaves the thread as it was.
 * Out of line on purpose: bench/run.sh's B4c counts these two calls. */
struct ctxshim_ctx *ctxshim_build_begin(void);
void ctxshim_build_publish(struct ctxshim_ctx *c);
void ctxshim_build_cancel(void);
/* Clear the calling thread's context. */
void ctxshim_detach(void);
/* ctxshim_attach() for the socket level (hooks/hook-socket.c): the
 * published context is then marked as its own (sk_owned). */
void ctxshim_attach_sock(const struct ctxshim_ctx *c);
/* ctxshim_detach_span() for the socket level: when the context published
 * is still its own (sk_owned), clear it without comparing span-ids. */
static inline bool ctxshim_detach_sock(const uint8_t span_id[8]);
/* ctxshim_detach() if the calling thread's current context has this
 * span-id (it is still the one the caller published); true if it did.
 * One call where ctxshim_current() and ctxshim_detach() would be two. */
static inline bool ctxshim_detach_span(const uint8_t span_id[8]);
/* The calling thread's current context, or NULL. */
static inline const struct ctxshim_ctx *ctxshim_current(void);

/* Random ids from the calling thread's generator (seeded, with no system
 * call, from a key the constructor draws with getrandom(); re-seeded in a
 * forked child, from a key its fork handler draws). */
void ctxshim_new_trace_id(uint8_t id[16]);
void ctxshim_new_span_id(uint8_t id[8]);
void ctxshim_random_uuid(char out[37]);

/* Called by the constructor and the fork handler. */
void ctxshim_thread_init(void);
void ctxshim_thread_after_fork_child(void);

struct w3c_traceparent;

/* Start c as a new span: with tp, a child of tp (same trace-id and flags,
 * a new span-id, tp's parent-id kept as parent_id); without, a new trace
 * (random ids, the Level-2 random flag set).  Attributes and tracestate
 * are left empty for the caller. */
void ctxshim_ctx_begin(struct ctxshim_ctx *c, const struct w3c_traceparent *tp);

/* Validate and store tracestate header lines (combined in order) into c,
 * truncated to CTXSHIM_TRACESTATE_MAX by dropping whole entries.  An
 * invalid list leaves c without a tracestate and returns -EINVAL. */
int ctxshim_ctx_set_tracestate(struct ctxshim_ctx *c,
			       const char *const *lines,
			       const size_t *lens,
			       size_t n_lines);

/* Append the ctxshim.parent_span_id attribute (16 hex digits) when c has
 * an incoming parent: the OTEP record has no parent field, and people
 * reading a dump want to know which upstream span called. */
void ctxshim_ctx_add_parent_attr(struct ctxshim_ctx *c, struct trec_attr_writer *w);

/* ---- the calling thread's state, inline ----
 *
 * In the header so that the per-request calls of the hooks (the
 * check-and-clear when a connection goes idle, the current context on
 * every response write) inline: as calls they were ~40 instructions of
 * every nginx request (B1i).  Only thread-ctx.c and these functions touch
 * the fields.
 *
 * Every field is written only by its own thread (and by signal handlers on
 * that thread), which is what the OTEP's concurrency model assumes: readers
 * look only while the thread is stopped, so compiler fences suffice.
 *
 * ctx[] are the "pointer swap" buffers: each embeds a complete record
 * (above), the one at cur_off is the one published while has_cur, and an update
 * writes the other one, then swaps.  The same buffer serves as the record
 * and as ctxshim_current(), so a context is written once. */
struct ctxshim_conn;

/* struct ctxshim_sk_thread's mark after a switch: a state no draw is
 * expected to reach one draw after (the odd gamma is random). */
#define CTXSHIM_SK_MARK_MIXED UINT64_C(1)

/* A request the socket level follows, which a thread was started while
 * its creator showed it (hooks/hook-socket.c, "inherited requests"): its
 * connection's descriptor + 1 (or id + 1 of one without a descriptor; 0:
 * none) and that slot's generation, as a saved context names it
 * (sock_fdp1, sock_gen), and the span-id the new thread shows for it. */
struct ctxshim_sk_inherit {
	uint64_t span;
	uint32_t gen;
	int fdp1;
};

/* What the socket level (hooks/hook-socket.c, its sk_self) published on
 * this thread from a connection.  Only that file touches it; it lives in
 * the thread's state below so that its hooks reach it and the thread's
 * context from one TLS address (B1i). */
struct ctxshim_sk_thread {
	uint64_t span; /* span-id we published (its 8 bytes) */
	/* fd's slot while fdp1 != 0 (hook-socket.c, sk_nil_conn if
	 * unknown): the response write checks it without looking fd up.
	 * Slots never move or go away (conn.h), so it stays readable. */
	struct ctxshim_conn *c;
	uint32_t gen; /* that slot's generation then */
	/* see hook-socket.c, sk_up_mark_stale() */
	uint32_t up_stale;
	/* span_rng.state when the thread last finished with a request
	 * (hook-socket.c, "Handlers run after the next wait"): one draw
	 * since then is one request head read since then.
	 * CTXSHIM_SK_MARK_MIXED: the thread showed another request's
	 * context since (a switch), so that no count is one. */
	uint64_t mark;
	/* span of the request a read took up again (hook-socket.c,
	 * sk_follow(): after a wait or a switch), so that an HTTP/2
	 * connection's next request is not taken for one read on top of it
	 * (sk_h2_feed()) */
	uint64_t rd_span;
	/* fd + 1 of the connection this thread last read since its last
	 * coroutine switch, 0: none; what a coroutine that suspends now
	 * waits for (hooks/hook-scope.h, hook_socket_rd_take()) */
	int rdp1;
	/* the request the thread was started with, if the socket level
	 * follows it (hook-socket.c, "inherited requests") */
	struct ctxshim_sk_inherit inh;
	/* Last, right before struct ctxshim_thread's has_cur (see
	 * ctxshim_sk_gate_get()). */
	union {
		struct {
			int fdp1; /* fd + 1 whose context we published, 0: none */
			volatile sig_atomic_t busy;
		};
		/* Both at once: fd + 1 and not busy is one compare (the
		 * response write, hook-socket.c). */
		uint64_t fdp1_busy;
	};
};
_Static_assert(sizeof(sig_atomic_t) == 4 && sizeof(int) == 4,
	       "fdp1_busy covers fdp1 and busy");

/* The stack pointer where it is inlined: the caller's frame, for the
 * holds that a jump out of a signal handler may end (hook-longjmp.c).
 * Not a local's address, which may be elsewhere (ASan's fake stack for
 * detect_stack_use_after_return).  0 elsewhere than x86-64, where no
 * hold is ever released. */
static inline __attribute__((always_inline)) uintptr_t
ctxshim_stack_pointer(void)
{
	uintptr_t sp = 0;

#if defined(__x86_64__)
	__asm__("mov %%rsp, %0" : "=r"(sp));
#endif
	return sp;
}

/* Who holds a busy flag, for a jump out of a signal handler that
 * interrupted the holder (hooks/hook-longjmp.c): a handler that never
 * returns leaves the flag set, and the thread would never publish again.
 * sk.busy (hooks/hook-socket.c) holds this token rather than 1: the low 32
 * bits of the holder's stack pointer minus 1, never 0 since the stack
 * pointer is 8-aligned, and written in the flag's one store, so that no
 * moment has the flag set without its holder known (B4b: one instruction
 * more than a constant).  The hooks take it where their frame encloses
 * the whole hold: every frame of the holder is at or below it.  Any
 * nonzero value means busy to the tests of the flag. */
static inline __attribute__((always_inline)) uint64_t
ctxshim_busy_token(void)
{
#if defined(__x86_64__)
	uint64_t v;

	/* a 32-bit destination: the upper half is zeroed (no zero
	 * extension to add for ctxshim_sk_idle_fast()) */
	__asm__("lea -1(%%rsp), %k0" : "=r"(v));
	return v;
#else
	return 1; /* no holder known: never released by a jump */
#endif
}

struct ctxshim_thread {
	struct ctxshim_ctx ctx[2];
	/* While busy is CTXSHIM_BUSY_KNOWN: the stack pointer of the frame
	 * that holds it (ctxshim_thread_hold(): ctxshim_attach(),
	 * ctxshim_detach(), ctxshim_detach_span(), which may hold it
	 * outside the socket level's hold).  busy 1 is a hold inside the
	 * socket level's (sk.busy): ctxshim_build_begin() and the idle
	 * wait's, on the usual path, where this costs nothing. */
	uintptr_t owner_sp;
	struct ctx_rng rng;           /* trace-ids, UUIDs */
	struct ctx_splitmix span_rng; /* span-ids (cheaper, rng.h) */
	void **slot;                  /* &otel_thread_ctx_v1, once known */
	unsigned rng_gen; /* ctxshim_fork_gen at seeding (of rng and span_rng);
				  0 = never seeded */
	/* Where in ctx[] the buffer last published starts, in bytes: 0 or
	 * CTXSHIM_CTX_SIZE.  An offset rather than an index: the other
	 * buffer is at cur_off ^ CTXSHIM_CTX_SIZE, an xor and an add where an
	 * index took five instructions (B4c). */
	size_t cur_off;
	struct ctxshim_sk_thread sk;
	/* has_cur, sk_owned, busy and sk_pending: right after sk.busy, so that the
	 * socket level's idle wait tests the four bytes and sk.busy at once
	 * (ctxshim_sk_gate_get()). */
	bool has_cur;
	/* The context published now is the socket level's own: published by
	 * ctxshim_build_publish() or ctxshim_attach_sock(), and nothing was
	 * published or cleared since (every other store into the slot clears
	 * this, under busy).  Lets hooks/hook-socket.c know that the
	 * thread still publishes what it published without comparing
	 * span-ids (its response write and idle wait, B1i); when false it
	 * compares them as before. */
	uint8_t sk_owned;
	volatile uint8_t busy;
	/* The socket level's context was published by
	 * ctxshim_build_publish() (a request head just read) and this thread
	 * has not written its response since (hooks/hook-socket.c clears
	 * it there): a hint only, which keeps such a context out of the
	 * idle wait's one test (ctxshim_sk_gate_get()); hook-socket.c
	 * checks the connection before it relies on it. */
	uint8_t sk_pending;
};
_Static_assert(offsetof(struct ctxshim_thread, has_cur) ==
			       offsetof(struct ctxshim_thread, sk) +
				       offsetof(struct ctxshim_sk_thread, busy) + 4 &&
		       offsetof(struct ctxshim_thread, sk_owned) ==
			       offsetof(struct ctxshim_thread, has_cur) + 1 &&
		       offsetof(struct ctxshim_thread, busy) ==
			       offsetof(struct ctxshim_thread, has_cur) + 2 &&
		       offsetof(struct ctxshim_thread, sk_pending) ==
			       offsetof(struct ctxshim_thread, has_cur) + 3,
	       "sk.busy, has_cur, sk_owned, busy and sk_pending are 8 bytes in a row");
#define CTXSHIM_CTX_SIZE sizeof(struct ctxshim_ctx)

/* has_cur, sk_owned, busy and sk_pending of t in one store (little-endian):
 * has_cur, sk_owned, not busy, sk_pending. */
#define CTXSHIM_FLAGS_PENDING 0x01000101u
static inline void
ctxshim_thread_flags_set(struct ctxshim_thread *t, uint32_t v)
{
	memcpy(&t->has_cur, &v, sizeof(v));
}

/* The buffer at byte offset off (a cur_off value) of t->ctx. */
static inline struct ctxshim_ctx *
ctxshim_thread_ctx_at(struct ctxshim_thread *t, size_t off)
{
	return (struct ctxshim_ctx *)(void *)((char *)t->ctx + off);
}

/* Defined in thread-ctx.c (initial-exec, see there). */
extern __thread struct ctxshim_thread ctxshim_self
	__attribute__((aligned(64), tls_model("initial-exec"), visibility("hidden")));

/* The thread's first store into otel_thread_ctx_v1 (thread-ctx.c): keeps
 * the slot's address in t->slot and registers the thread's exit handler,
 * so that a thread with a slot always has one (nothing else checks). */
void **ctxshim_thread_first_slot(struct ctxshim_thread *t);

/* &ctxshim_self, computed once per call: gcc recomputes a TLS address after
 * each memcpy or fence rather than keep it in a register (with the TLSDESC
 * model that was five calls per ctxshim_attach(), B4); the empty asm
 * makes the address an opaque value that it has to keep. */
static inline struct ctxshim_thread *
ctxshim_thread_self(void)
{
	struct ctxshim_thread *t = &ctxshim_self;

	__asm__("" : "+r"(t));
	return t;
}

/* Take t's busy flag (not held: the caller tested it) with its holder
 * known: owner_sp (above) is the stack pointer of the caller's frame,
 * which encloses the hold, and busy is 2 rather than 1, which says so
 * (a hold inside the socket level's sets 1: hook-longjmp.c).  owner_sp is
 * stored before busy, and a signal handler's hold in between puts it
 * back, so it is right whenever busy is 2.  *prev: owner_sp before, for
 * ctxshim_thread_unhold(). */
#define CTXSHIM_BUSY_KNOWN 2
static inline __attribute__((always_inline)) void
ctxshim_thread_hold(struct ctxshim_thread *t, uintptr_t *prev)
{
	uintptr_t sp = ctxshim_stack_pointer();

	*prev = t->owner_sp;
	t->owner_sp = sp;
	atomic_signal_fence(memory_order_seq_cst);
	t->busy = sp ? CTXSHIM_BUSY_KNOWN : 1;
	atomic_signal_fence(memory_order_seq_cst);
}

static inline __attribute__((always_inline)) void
ctxshim_thread_unhold(struct ctxshim_thread *t, uintptr_t prev)
{
	atomic_signal_fence(memory_order_seq_cst);
	t->busy = 0;
	atomic_signal_fence(memory_order_seq_cst);
	t->owner_sp = prev;
}

/* Store p into otel_thread_ctx_v1 through the slot's address kept in t:
 * the variable must stay a TLSDESC access (the OTEP's model, through the
 * hidden alias ctxshim_own_slot: test/symbol-tls.sh), which is a call
 * each time; its address is fixed for the thread's life (and in a forked
 * child), so one call per thread is enough. */
static inline void
ctxshim_publish_ptr_t(struct ctxshim_thread *t, void *p)
{
	void **slot = t->slot;

	if (__builtin_expect(!slot, 0))
		slot = ctxshim_thread_first_slot(t);
	atomic_signal_fence(memory_order_seq_cst);
	*(void *volatile *)slot = p;
	t->sk_owned = 0;
	t->sk_pending = 0;
	atomic_signal_fence(memory_order_seq_cst);
}

/* Publish d, the buffer at offset next of t->ctx (complete, lengths in
 * range): the record becomes valid, then the pointer swap makes it
 * visible. */
static inline void
ctxshim_publish_ctx(struct ctxshim_thread *t, struct ctxshim_ctx *d, size_t next)
{
	d->valid = 1;
	t->cur_off = next;
	t->has_cur = true;
	ctxshim_publish_ptr_t(t, d->trace_id);
}

static inline bool
ctxshim_detach_span(const uint8_t span_id[8])
{
	struct ctxshim_thread *t = ctxshim_thread_self();
	uintptr_t prev;

	/* Nothing is published while the shim is not active (has_cur is
	 * never set then), and a thread that has a current context and is
	 * not busy has its slot's address (every publication makes sure of
	 * it before has_cur can be seen true from outside an update): no
	 * test of the mode or of the slot here (the idle check of every
	 * nginx request, B1i). */
	if (!t->has_cur ||
	    memcmp(ctxshim_thread_ctx_at(t, t->cur_off)->span_id, span_id, 8) != 0 ||
	    t->busy)
		return false;
	/* Not the usual path (ctxshim_detach_sock() is): it may run
	 * outside a socket-level hold (hook-fcgi.c), so its hold is known. */
	ctxshim_thread_hold(t, &prev);
	*(void *volatile *)t->slot = NULL;
	atomic_signal_fence(memory_order_seq_cst);
	t->has_cur = false;
	t->sk_owned = 0;
	t->sk_pending = 0;
	ctxshim_thread_unhold(t, prev);
	return true;
}

static inline bool
ctxshim_detach_sock(const uint8_t span_id[8])
{
	/* Fields at their TLS offsets (initial-exec: one instruction each,
	 * and the same base as the socket level's state). */
	if (__builtin_expect(!ctxshim_self.sk_owned || ctxshim_self.busy, 0))
		return ctxshim_detach_span(span_id);
	/* sk_owned: a context is published (so the slot is known), and it
	 * is the one whose span-id the socket level kept. */
	ctxshim_self.busy = 1;
	atomic_signal_fence(memory_order_seq_cst);
	*(void *volatile *)ctxshim_self.slot = NULL;
	atomic_signal_fence(memory_order_seq_cst);
	ctxshim_self.has_cur = false;
	ctxshim_self.sk_owned = 0;
	atomic_signal_fence(memory_order_seq_cst);
	ctxshim_self.busy = 0;
	return true;
}

/* The eight bytes from sk.busy to sk_pending (struct ctxshim_thread): sk.busy
 * (4 bytes), has_cur, sk_owned, busy, sk_pending, little-endian. */
#define CTXSHIM_SK_GATE_OWNED ((uint64_t)0x0101 << 32)
/* ... published by ctxshim_build_publish() and not answered since
 * (sk_pending) */
#define CTXSHIM_SK_GATE_PENDING (CTXSHIM_SK_GATE_OWNED | (uint64_t)1 << 56)
/* ... with both busy flags held: or sk.busy's token (ctxshim_busy_token()) */
#define CTXSHIM_SK_GATE_HELD ((uint64_t)0x010101 << 32)
#define CTXSHIM_SK_GATE \
	((char *)&ctxshim_self.sk + offsetof(struct ctxshim_sk_thread, busy))

static inline uint64_t
ctxshim_sk_gate_get(void)
{
	uint64_t v;

	memcpy(&v, CTXSHIM_SK_GATE, sizeof(v));
	return v;
}

static inline void
ctxshim_sk_gate_set(uint64_t v)
{
	memcpy(CTXSHIM_SK_GATE, &v, sizeof(v));
}

/* The socket level's idle wait (hooks/hook-socket.c, sk_idle_quiet()),
 * its usual case in one test: the thread publishes the socket level's own
 * context (sk_owned, so has_cur), and neither the socket level nor a
 * context update is in progress on it (sk.busy, busy).  Then the context
 * is cleared and sk.fdp1 forgotten with both busy flags held, as
 * ctxshim_detach_sock() in sk_drop_quiet() does; the last store releases
 * both flags and clears has_cur and sk_owned at once.  False, having done
 * nothing, in any other case. */
static inline bool
ctxshim_sk_idle_fast(void)
{
	if (__builtin_expect(ctxshim_sk_gate_get() != CTXSHIM_SK_GATE_OWNED, 0))
		return false;
	ctxshim_sk_gate_set(CTXSHIM_SK_GATE_HELD | ctxshim_busy_token());
	atomic_signal_fence(memory_order_seq_cst);
	*(void *volatile *)ctxshim_self.slot = NULL;
	atomic_signal_fence(memory_order_seq_cst);
	ctxshim_self.sk.fdp1 = 0;
	atomic_signal_fence(memory_order_seq_cst);
	ctxshim_sk_gate_set(0);
	return true;
}

static inline const struct ctxshim_ctx *
ctxshim_current(void)
{
	struct ctxshim_thread *t = ctxshim_thread_self();

	return t->has_cur ? ctxshim_thread_ctx_at(t, t->cur_off) : NULL;
}

/* A jump (longjmp() and its kin, hooks/hook-longjmp.c) to a frame whose
 * stack pointer is to: release what busy holds the jump ends, whose
 * holders' frames are below to on the calling thread's own stack, and
 * leave the thread publishing nothing (a hold may have ended half-way
 * through a publication) -- unless only the socket level's hold ended,
 * outside an update, and what is published is not its own.  sk_dead: the
 * socket level's hold (sk.busy) was one of them, and so is then a hold of
 * busy inside it (busy 1).  Only plain memory; async-signal-safe. */
void ctxshim_thread_unwound(uintptr_t to, bool sk_dead);
/* Does a jump from here to a frame whose stack pointer is to end the
 * frame at sp (sp < to)?  Yes when sp and to are on the calling thread's
 * own stack (the main thread's, or the mapping that holds a thread's
 * thread pointer), to is not on the signal stack the caller runs on, and
 * the caller runs below sp on that same stack (or on a signal stack, with
 * sp less than 1 MiB below to).  False when it cannot tell (no /proc).
 * Raw system calls only; async-signal-safe. */
bool ctxshim_stack_between(uintptr_t sp, uintptr_t to);
