/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The usual read of ctxshim_conn_feed() (preload/conn.c), inline: one
 * read that holds exactly one whole request head, on a connection whose
 * previous request was answered (or that has none) and with no head in
 * progress, is scanned in place and built straight into the thread's
 * publication buffer, then copied to the slot's compact copy.  Inline in
 * the socket level's read hooks (hooks/hook-socket.c, sk_in_buf()) and in
 * ctxshim_conn_feed(): as a function of its own it cost a call, six saved
 * registers and the tests its caller had made already (~20 instructions
 * and two code lines of every nginx request, B1).  Only conn.c and the
 * socket level's read hooks include this. */

#include "conn.h"
#include "request-ctx.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* The scanner's configuration and the header-attribute index of the socket
 * level (set once by conn.c's constructor, read-only afterwards). */
extern struct http_scan_config ctxshim_conn_scan_cfg
	__attribute__((visibility("hidden")));
extern int ctxshim_conn_extra_index[CTXSHIM_MAX_HEADER_ATTRS]
	__attribute__((visibility("hidden")));

/* Copy s into c's compact form, whatever its size (conn.c, conn_compact:
 * attributes whole or not at all, tracestate cut after a whole member). */
void ctxshim_conn_compact(struct ctxshim_conn_ctx *d, const struct ctxshim_ctx *s)
	__attribute__((visibility("hidden")));

/* The flags of a new current request when they change (conn.c,
 * conn_head_flags()): rare, so out of line. */
void ctxshim_conn_head_flags_set(struct ctxshim_conn *c, uint8_t set)
	__attribute__((visibility("hidden"), cold));

/* ctxshim_conn_feed() past its usual read (the scanner's feed loop, with a
 * pool entry as the capture of each head); same contract. */
int ctxshim_conn_feed_loop(struct ctxshim_conn *c,
			   const void *buf,
			   size_t len,
			   struct ctxshim_ctx **full)
	__attribute__((visibility("hidden")));

/* The writer side of the seqlock on c->ctx (conn.c, conn_seq_begin(),
 * has the argument). */
static inline void
ctxshim_conn_seq_begin(struct ctxshim_conn *c)
{
	uint32_t s = atomic_load_explicit(&c->seq, memory_order_relaxed);

	atomic_store_explicit(&c->seq, s | 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
}

static inline void
ctxshim_conn_seq_end(struct ctxshim_conn *c)
{
	uint32_t s = atomic_load_explicit(&c->seq, memory_order_relaxed);

	atomic_store_explicit(&c->seq, (s | 1) + 1, memory_order_release);
}

/* ctxshim_conn_compact() inline for the usual context: attributes that fit
 * in 64 bytes and no tracestate (B4).  The compact form's fields up to
 * data are the record's (conn.h), so ids, flags, the attributes' length
 * and the attributes are one copy of 96 bytes from the record's start,
 * whatever the attributes' length (both buffers are longer, and the bytes
 * past attrs_len are never read from d): the record's valid byte lands in
 * has_parent, set after, and the high byte of its attrs_data_size (0 for
 * 64 bytes or fewer) in tracestate_len, which is 0 here. */
#define CTXSHIM_CONN_FAST_COPY 96
#define CTXSHIM_CONN_REC_OFF(f) \
	(offsetof(struct ctxshim_ctx, f) - offsetof(struct ctxshim_ctx, trace_id))
_Static_assert(offsetof(struct ctxshim_conn_ctx, trace_id) == 0 &&
		       offsetof(struct ctxshim_conn_ctx, span_id) ==
			       CTXSHIM_CONN_REC_OFF(span_id) &&
		       offsetof(struct ctxshim_conn_ctx, has_parent) ==
			       CTXSHIM_CONN_REC_OFF(valid) &&
		       offsetof(struct ctxshim_conn_ctx, flags) ==
			       CTXSHIM_CONN_REC_OFF(flags) &&
		       offsetof(struct ctxshim_conn_ctx, attrs_len) ==
			       CTXSHIM_CONN_REC_OFF(attrs_len) &&
		       offsetof(struct ctxshim_conn_ctx, tracestate_len) ==
			       CTXSHIM_CONN_REC_OFF(attrs_len) + 1 &&
		       offsetof(struct ctxshim_conn_ctx, data) ==
			       CTXSHIM_CONN_REC_OFF(attrs) &&
		       __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "the compact form starts as a record does");
_Static_assert(offsetof(struct ctxshim_conn_ctx, data) + 64 <= CTXSHIM_CONN_FAST_COPY &&
		       offsetof(struct ctxshim_conn_ctx, parent_id) >=
			       CTXSHIM_CONN_FAST_COPY &&
		       CTXSHIM_CONN_REC_OFF(tracestate) >= CTXSHIM_CONN_FAST_COPY,
	       "the 96-byte copy holds 64 bytes of attributes and stays in both");
static inline __attribute__((always_inline)) void
ctxshim_conn_compact_fast(struct ctxshim_conn_ctx *d, const struct ctxshim_ctx *s)
{
	if (__builtin_expect(s->attrs_len > 64 || s->tracestate_len, 0)) {
		ctxshim_conn_compact(d, s);
		return;
	}
#if defined(__SSE2__)
	{
		/* From the structs' addresses: the copy spans several fields. */
		const __m128i *a =
			(const __m128i *)(const void *)((const unsigned char *)s +
							offsetof(struct ctxshim_ctx,
								 trace_id));
		__m128i *o = (__m128i *)(void *)d;

		_mm_storeu_si128(o, _mm_loadu_si128(a));
		_mm_storeu_si128(o + 1, _mm_loadu_si128(a + 1));
		_mm_storeu_si128(o + 2, _mm_loadu_si128(a + 2));
		_mm_storeu_si128(o + 3, _mm_loadu_si128(a + 3));
		_mm_storeu_si128(o + 4, _mm_loadu_si128(a + 4));
		_mm_storeu_si128(o + 5, _mm_loadu_si128(a + 5));
	}
#else
	memcpy(d, (const unsigned char *)s + offsetof(struct ctxshim_ctx, trace_id),
	       CTXSHIM_CONN_FAST_COPY);
#endif
	d->has_parent = s->has_parent;
	memcpy(d->parent_id, s->parent_id, sizeof(d->parent_id));
}

/* The build both entry points below make once their tests passed: the
 * head scanned into the thread's publication buffer and copied into c as
 * its current request.  set_flags: make the flags those of a current
 * request with a context, unless they are already (a caller that knows
 * they are passes false). */
static inline __attribute__((always_inline)) struct ctxshim_ctx *
conn_whole_build(struct ctxshim_conn *c, const void *buf, size_t len, bool set_flags)
{
	struct ctxshim_ctx *b = ctxshim_build_begin();

	if (__builtin_expect(b == NULL, 0))
		return NULL;
	if (__builtin_expect(ctxshim_request_ctx_whole(b, &c->scan,
						       &ctxshim_conn_scan_cfg, buf, len,
						       ctxshim_conn_extra_index) != 0,
			     0)) {
		ctxshim_build_cancel();
		return NULL;
	}
	/* seq is read again at the end, not kept in a register: a writing
	 * thread promoting a pipelined request runs a section too, and an
	 * application racing two threads on one socket must not make seq go
	 * back to a value a reader already saw (2 instructions).  The section
	 * makes seq/2 the new request's tag, which answered (the writers'
	 * byte) does not hold: the request becomes unanswered without this
	 * thread storing there. */
	ctxshim_conn_seq_begin(c);
	ctxshim_conn_compact_fast(&c->ctx, b);
	/* The flags of the new current request: the next request of a
	 * keep-alive connection leaves them as they are (REQ and HAS_CTX set,
	 * PROMOTED clear), so nothing is written (conn.c, conn_head_flags()).
	 * Read here rather than kept from the caller's tests (a register less
	 * through the calls): the bits tested have no other writer while the
	 * previous request is answered and this thread reads (conn.h, flags),
	 * and the update is a compare-and-swap on what they are then. */
	if (set_flags &&
	    __builtin_expect((atomic_load_explicit(&c->flags, memory_order_relaxed) &
			      (CONN_F_REQ | CONN_F_HAS_CTX | CONN_F_PROMOTED)) !=
				     (CONN_F_REQ | CONN_F_HAS_CTX),
			     0))
		ctxshim_conn_head_flags_set(c, CONN_F_REQ | CONN_F_HAS_CTX);
	ctxshim_conn_seq_end(c);
	return b;
}

/* The usual read: len bytes at buf, read from c by the calling thread,
 * which holds the socket level's busy flag (conn.h, ctxshim_conn_feed()).
 * If they are one whole head (nothing before or after it), the
 * connection idle (ctxshim_conn_idle()) and no head in progress: scanned
 * in place and built into the thread's publication buffer
 * (ctxshim_build_begin()), which is returned -- the head is then c's
 * current request, its context in the buffer whole and in c->ctx as far
 * as it fits, and the caller must ctxshim_build_publish() or
 * ctxshim_build_cancel() it.  NULL, with nothing changed, for anything
 * else: feed the bytes with ctxshim_conn_feed_loop().  The scanner has
 * not given up after a head taken here. */
static inline __attribute__((always_inline)) struct ctxshim_ctx *
ctxshim_conn_feed_whole(struct ctxshim_conn *c, const void *buf, size_t len)
{
	/* The cheap tests of http_scan_whole() first: a head in progress or a
	 * body, the read not ending in LF, are not worth a begin()/cancel(). */
	if (__builtin_expect(c->cap || !http_scan_whole_ready(&c->scan, buf, len) ||
				     !ctxshim_conn_idle(c),
			     0))
		return NULL;
	return conn_whole_build(c, buf, len, true);
}

/* ctxshim_conn_feed_whole() for a caller that found c waiting for the next
 * request of a keep-alive connection (ctxshim_conn_kept_alive()) before
 * the read, as the socket level's read hooks do (B1): then c is still
 * idle, and its flags stay as they are.  Only the thread reading c makes
 * a request current on it, a write only answers, a pipelined request is
 * promoted only while the current one is not answered, and a library
 * hook's claim sets CLAIMED alone (conn.h, flags, seq and answered). */
static inline __attribute__((always_inline)) struct ctxshim_ctx *
ctxshim_conn_feed_whole_kept(struct ctxshim_conn *c, const void *buf, size_t len)
{
	/* No test of c->cap: a pool entry is held as the capture of a head in
	 * progress only (conn.c, ctxshim_conn_feed_loop(), conn_move(),
	 * conn_dup_head()), and a scanner in a head is not at a message
	 * start, which http_scan_whole_ready() tests (B1: 2 instructions). */
	if (__builtin_expect(!http_scan_whole_ready(&c->scan, buf, len), 0))
		return NULL;
	return conn_whole_build(c, buf, len, false);
}
