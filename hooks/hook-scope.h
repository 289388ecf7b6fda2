/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Carrying a context from the thread that hands work over to the thread
 * that runs it: thread pools (hook-pool-*.c) and coroutines
 * (hook-ucontext.c).  A struct hook_scope is "a context, or explicitly
 * none": work submitted by a thread without a context runs without one,
 * rather than with whatever the pool thread showed before.
 *
 * Static inline so that each hook file gets its own copy and the shim
 * exports nothing more. */

#include "events.h"
#include "thread-ctx.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct hook_scope {
	bool has;
	/* hook_socket_ctx_stamp()'s, for hook_socket_ctx_answered() */
	uint32_t sock_seq;
	struct ctxshim_ctx ctx;
};

/* hooks/hook-socket.c.  stamp(): saved is a copy of the calling thread's
 * current context, taken to be restored later: note in it whether the
 * socket level publishes it (for which connection), and return that
 * request's sequence on its connection if it is live -- the connection's
 * current request, not answered yet -- else HOOK_SOCKET_SEQ_NONE (not
 * checked later).  answered(): the live request of c (stamped; seq: what
 * the stamp returned) was answered since, replaced by a newer one, or its
 * connection closed (its last descriptor: one closed while a copy carries
 * the connection on is no end): c must not be shown again.  restored():
 * c (stamped) was just published again on this thread: if it was the
 * socket level's, it is again (the next wait clears it, ...), from the
 * descriptor that holds its connection now.  Without the pair, a context
 * restored after the socket level moved on stayed published on an idle
 * event-loop thread.  stamp_conn(): stamp()'s note alone, without the
 * look at the request (for a caller that wants only the connection);
 * true if the socket level publishes saved. */
#define HOOK_SOCKET_SEQ_NONE 1u /* odd: no request's at rest */
uint32_t hook_socket_ctx_stamp(struct ctxshim_ctx *saved);
bool hook_socket_ctx_stamp_conn(struct ctxshim_ctx *saved);
bool hook_socket_ctx_answered(const struct ctxshim_ctx *c, uint32_t seq);
void hook_socket_ctx_restored(const struct ctxshim_ctx *c);

/* hooks/hook-socket.c.  What the socket level follows on the calling
 * thread (the connection whose context it published), saved before a
 * switch that may not happen, and put back when it did not: restored()
 * of the context switched to changed it (setcontext() that fails).  A
 * few words, not a copy of the context: setcontext() runs on coroutine
 * stacks of a few hundred bytes. */
struct hook_socket_owner {
	int fdp1; /* -1: nothing to put back (saved inside a hook) */
	uint32_t gen;
	uint64_t span;
	void *c;
};
void hook_socket_owner_save(struct hook_socket_owner *o);
void hook_socket_owner_put(const struct hook_socket_owner *o);

/* hooks/hook-socket.c.  What a coroutine waits for.  A reactor (Boost.Asio's
 * io_context) reads a request's head for a coroutine that suspended in
 * its own read of that connection (nothing there yet), then resumes it:
 * the coroutine, which suspended without a context, is that request's.
 * take(), at a suspension: the connection the side suspending last read
 * (none since it was resumed: fdp1 0).  resume(), when it comes back
 * with no context of its own: publish that connection's request if it is
 * live; false if not. */
struct hook_socket_rd {
	int fdp1;
	uint32_t gen;
};
void hook_socket_rd_note(struct hook_socket_rd *rd, int fdp1);
bool hook_socket_rd_publish(const struct hook_socket_rd *rd, const char *reason);

/* The tests inline: most switches follow no read of a connection (a
 * call each was a fifth of a switch without a context). */
static inline void
hook_socket_rd_take(struct hook_socket_rd *rd)
{
	int fdp1 = ctxshim_self.sk.rdp1;

	rd->fdp1 = 0;
	if (fdp1)
		hook_socket_rd_note(rd, fdp1);
}

static inline bool
hook_socket_rd_resume(const struct hook_socket_rd *rd, const char *reason)
{
	return rd->fdp1 && hook_socket_rd_publish(rd, reason);
}

/* Does the calling thread show the socket level's request of the
 * connection rd waits for (published by a read of it, or restored)? */
static inline bool
hook_socket_rd_shown(const struct hook_socket_rd *rd)
{
	return rd->fdp1 && ctxshim_self.sk.fdp1 == rd->fdp1 &&
	       ctxshim_self.sk.gen == rd->gen && ctxshim_current();
}

/* What the calling thread publishes now. */
static inline void
hook_scope_capture(struct hook_scope *s)
{
	const struct ctxshim_ctx *cur = ctxshim_current();

	s->has = cur != NULL;
	s->sock_seq = HOOK_SOCKET_SEQ_NONE;
	if (cur) {
		ctxshim_ctx_copy(&s->ctx, cur);
		s->sock_seq = hook_socket_ctx_stamp(&s->ctx);
	}
}

static inline bool
hook_scope_same_span(const struct ctxshim_ctx *a, const struct ctxshim_ctx *b)
{
	return memcmp(a->trace_id, b->trace_id, 16) == 0 &&
	       memcmp(a->span_id, b->span_id, 8) == 0;
}

/* Make s the calling thread's context (or none), with one event line when
 * that changes what the thread shows. */
static inline void
hook_scope_publish(const struct hook_scope *s, const char *reason)
{
	const struct ctxshim_ctx *cur = ctxshim_current();

	if (s->has) {
		bool same = cur && hook_scope_same_span(cur, &s->ctx);

		ctxshim_attach(&s->ctx);
		if (!same)
			CTXSHIM_EVENT(cur ? CTXSHIM_EV_SWITCH : CTXSHIM_EV_ATTACH, -1,
				      &s->ctx, reason);
	} else if (cur) {
		ctxshim_detach();
		CTXSHIM_EVENT(CTXSHIM_EV_DETACH, -1, NULL, reason);
	}
}

/* Clear the calling thread's context (a pool thread going idle). */
static inline void
hook_scope_clear(const char *reason)
{
	if (!ctxshim_current())
		return;
	ctxshim_detach();
	CTXSHIM_EVENT(CTXSHIM_EV_DETACH, -1, NULL, reason);
}

/* hook_scope_publish() of what was captured earlier (s is a context from
 * before a callback, or a coroutine's from before it switched away): what
 * the socket level published comes back under its management, and a
 * request answered meanwhile does not come back at all. */
static inline void
hook_scope_restore(const struct hook_scope *s, const char *reason)
{
	if (s->has && hook_socket_ctx_answered(&s->ctx, s->sock_seq)) {
		hook_scope_clear(reason);
		return;
	}
	hook_scope_publish(s, reason);
	if (s->has)
		hook_socket_ctx_restored(&s->ctx);
}
