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
	       offsetof(struct ctxshim_ctx, attrs_len) - CTXSHIM_CTX_REC_OFFSET ==
		       offsetof(struct otel_thread_ctx_record, attrs_data_size) &&
	       offsetof(struct ctxshim_ctx, attrs) - CTXSHIM_CTX_REC_OFFSET ==
		       TREC_HEADER_SIZE,
	       "struct ctxshim_ctx embeds an otel_thread_ctx_record");

/* Copy only what is used: a struct ctxshim_ctx is 1.2 KiB, mostly empty
 * attribute and tracestate space.  Lengths out of range count as 0. */
static inline void
ctxshim_ctx_copy(struct ctxshim_ctx *dst, const struct ctxshim_ctx *src)
{
	size_t attrs_len = src->attrs_len <= sizeof(src->attrs) ? src->attrs_len : 0;
	size_t ts_len =
		src->tracestate_len <= sizeof(src->tracestate) ? src->tracestate_len : 0;

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
/* ctxshim_detach() if the calling thread's current context has this
 * span-id (it is still the one the caller published); true if it did.
 * One call where ctxshim_current() and ctxshim_detach() would be two. */
static inline bool ctxshim_detach_span(const uint8_t span_id[8]);
/* The calling thread's current context, or NULL. */
static inline const struct ctxshim_ctx *ctxshim_current(void);

/* Random ids from the calling thread's generator (seeded from getrandom,
 * re-seeded in a forked child). */
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
int ctxshim_ctx_set_tracestate(struct ctxshim_ctx *c, const char *const *lines,
			       const size_t *lens, size_t n_lines);

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
struct ctxshim_thread {
	struct ctxshim_ctx ctx[2];
	struct ctx_rng rng;           /* trace-ids, UUIDs */
	struct ctx_splitmix span_rng; /* span-ids (cheaper, rng.h) */
	void **slot;           /* &otel_thread_ctx_v1, once known */
	unsigned rng_gen;      /* ctxshim_fork_gen at seeding (of rng and span_rng);
				  0 = never seeded */
	/* Where in ctx[] the buffer last published starts, in bytes: 0 or
	 * CTXSHIM_CTX_SIZE.  An offset rather than an index: the other
	 * buffer is at cur_off ^ CTXSHIM_CTX_SIZE, an xor and an add where an
	 * index took five instructions (B4c). */
	size_t cur_off;
	bool has_cur;
	volatile sig_atomic_t busy;
};
#define CTXSHIM_CTX_SIZE sizeof(struct ctxshim_ctx)

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

/* Store p into otel_thread_ctx_v1 through the slot's address kept in t:
 * otel_thread_ctx_v1 must stay a TLSDESC access (the OTEP's model,
 * test/symbol-tls.sh), which is a call each time; its address is fixed
 * for the thread's life (and in a forked child), so one call per thread
 * is enough. */
static inline void
ctxshim_publish_ptr_t(struct ctxshim_thread *t, void *p)
{
	void **slot = t->slot;

	if (__builtin_expect(!slot, 0))
		slot = ctxshim_thread_first_slot(t);
	atomic_signal_fence(memory_order_seq_cst);
	*(void *volatile *)slot = p;
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
	struct ctxshim_thread *t;

	if (!ctxshim_active())
		return false;
	t = ctxshim_thread_self();
	if (!t->has_cur ||
	    memcmp(ctxshim_thread_ctx_at(t, t->cur_off)->span_id, span_id, 8) != 0 ||
	    t->busy)
		return false;
	t->busy = 1;
	ctxshim_publish_ptr_t(t, NULL);
	t->has_cur = false;
	atomic_signal_fence(memory_order_seq_cst);
	t->busy = 0;
	return true;
}

static inline const struct ctxshim_ctx *
ctxshim_current(void)
{
	struct ctxshim_thread *t = ctxshim_thread_self();

	return t->has_cur ? ctxshim_thread_ctx_at(t, t->cur_off) : NULL;
}
