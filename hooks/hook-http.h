/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Shared by the library-level server hooks (hook-mhd.c, hook-evhttp.c):
 * turning a library's parsed request into the shim's context model
 * (preload/request-ctx.h), agreeing with the socket level (preload/conn.h)
 * on one span per request, and publishing the context around the
 * application's callback.  Static inline: each hook file gets its own copy
 * and the shim exports nothing more. */

#include "cfg.h"
#include "conn.h"
#include "events.h"
#include "hook-scope.h"
#include "request-ctx.h"
#include "thread-ctx.h"
#include "w3c.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

/* Tracestate header lines kept per request; more lines than the W3C
 * allows members can only be an invalid list. */
#define HOOK_HTTP_TS_LINES_MAX 64
/* Like the socket scanner: configured header values are joined with ", "
 * and cut at 256 bytes. */
#define HOOK_HTTP_EXTRA_MAX 256

/* The request's header fields as a struct ctxshim_request.  Values point
 * into the library's storage, which outlives the callback. */
struct hook_http_headers {
	struct ctxshim_request r;
	const char *ts[HOOK_HTTP_TS_LINES_MAX];
	size_t ts_len[HOOK_HTTP_TS_LINES_MAX];
	bool ts_overflow;
	char extra[CTXSHIM_MAX_HEADER_ATTRS][HOOK_HTTP_EXTRA_MAX];
};

static inline void
hook_http_headers_init(struct hook_http_headers *h)
{
	memset(&h->r, 0, sizeof(h->r));
	h->ts_overflow = false;
	h->r.tracestate = h->ts;
	h->r.tracestate_lens = h->ts_len;
}

static inline bool
hook_http_name_is(const char *key, size_t key_len, const char *name, size_t name_len)
{
	return key_len == name_len && strncasecmp(key, name, name_len) == 0;
}

/* One header field, in the order received. */
static inline void
hook_http_header(struct hook_http_headers *h,
		 const char *key,
		 size_t key_len,
		 const char *value,
		 size_t value_len)
{
	struct ctxshim_request *r = &h->r;
	unsigned i;

	if (!key || !value)
		return;
	if (hook_http_name_is(key, key_len, "traceparent", 11)) {
		/* W3C: more than one traceparent field is invalid. */
		if (r->traceparent)
			r->traceparent_repeated = true;
		r->traceparent = value;
		r->traceparent_len = value_len;
		return;
	}
	if (hook_http_name_is(key, key_len, "tracestate", 10)) {
		/* Empty members take no slot, or enough of them would drop a
		 * valid list the socket scanner keeps. */
		if (w3c_tracestate_line_empty(value, value_len))
			return;
		/* Each further line holds a member: over 32 members, or an
		 * invalid one, the list is dropped anyway. */
		if (r->n_tracestate == HOOK_HTTP_TS_LINES_MAX) {
			h->ts_overflow = true;
			return;
		}
		h->ts[r->n_tracestate] = value;
		h->ts_len[r->n_tracestate] = value_len;
		r->n_tracestate++;
		return;
	}
	for (i = 0; i < ctxshim_cfg.n_header_attrs; i++) {
		const char *name = ctxshim_cfg.header_attrs[i];
		size_t have, n;

		if (!hook_http_name_is(key, key_len, name, strlen(name)))
			continue;
		/* Repeated lines are one list (RFC 9110 §5.3), joined as the
		 * socket scanner joins them: ", " after every earlier line,
		 * an empty one too, and as much of it as fits. */
		have = 0;
		if (r->extra[i]) {
			have = r->extra_len[i];
			n = HOOK_HTTP_EXTRA_MAX - have < 2 ? HOOK_HTTP_EXTRA_MAX - have
							   : 2;
			memcpy(h->extra[i] + have, ", ", n);
			have += n;
		}
		n = value_len;
		if (n > HOOK_HTTP_EXTRA_MAX - have)
			n = HOOK_HTTP_EXTRA_MAX - have;
		memcpy(h->extra[i] + have, value, n);
		r->extra[i] = h->extra[i];
		r->extra_len[i] = have + n;
	}
}

/* The context for the collected headers plus method and target. */
static inline void
hook_http_build_ctx(struct hook_http_headers *h,
		    const char *method,
		    const char *target,
		    struct ctxshim_ctx *c)
{
	if (h->ts_overflow)
		h->r.n_tracestate = 0;
	if (method) {
		h->r.method = method;
		h->r.method_len = strlen(method);
	}
	if (target) {
		h->r.target = target;
		h->r.target_len = strlen(target);
	}
	ctxshim_request_ctx(c, &h->r);
}

/* The socket level's context is for the request it parsed on the fd; with
 * pipelining that may be another one than the library is handling.  Both
 * saw the same traceparent (or none) if it is ours. */
static inline bool
hook_http_same_request(const struct ctxshim_ctx *sock, const struct ctxshim_ctx *mine)
{
	if (!mine->has_parent)
		return !sock->has_parent;
	return sock->has_parent && memcmp(sock->trace_id, mine->trace_id, 16) == 0 &&
	       memcmp(sock->parent_id, mine->parent_id, 8) == 0;
}

/* When the socket level already gave this request its span, take its ids
 * (one request, one span-id), and take the fd over: from now on the
 * library hook alone decides when its requests are published.  Attributes
 * and tracestate stay ours: the socket level keeps a compact copy (its
 * per-connection slot cuts long tracestate lists short), while the library
 * has the whole parsed head. */
static inline void
hook_http_adopt_socket_ctx(int fd, struct ctxshim_ctx *c)
{
	struct ctxshim_ctx s;

	if (fd < 0)
		return;
	if (ctxshim_conn_request_ctx(fd, &s) && hook_http_same_request(&s, c)) {
		memcpy(c->trace_id, s.trace_id, sizeof(c->trace_id));
		memcpy(c->span_id, s.span_id, sizeof(c->span_id));
		memcpy(c->parent_id, s.parent_id, sizeof(c->parent_id));
		c->flags = s.flags;
		c->has_parent = s.has_parent;
	}
	ctxshim_conn_claim(fd);
}

/* What the thread published before the callback (hook_scope_capture():
 * stamped for the socket level). */
struct hook_http_saved {
	struct hook_scope prev;
};

static inline void
hook_http_enter(int fd,
		const struct ctxshim_ctx *c,
		struct hook_http_saved *sv,
		const char *reason)
{
	const struct ctxshim_ctx *cur;

	hook_scope_capture(&sv->prev);
	cur = sv->prev.has ? &sv->prev.ctx : NULL;
	ctxshim_attach(c);
	if (!cur || !hook_scope_same_span(cur, c))
		CTXSHIM_EVENT(cur ? CTXSHIM_EV_SWITCH : CTXSHIM_EV_ATTACH, fd, c,
			      reason);
}

/* Restore what the thread published before (an enclosing context, or
 * nothing), whatever the callback did meanwhile -- hook_scope_restore()'s
 * rule.  If that was this request's own context (the socket level
 * attached it when it read the head, before the fd was claimed), nobody
 * else would clear it: the callback is done, and so is the thread's work
 * on the request for now.  Nor does a request the socket level published
 * come back once it was answered, replaced or closed meanwhile
 * (hook_socket_ctx_answered()): a loop thread that read another
 * connection's head, then ran a callback that answered that request (a
 * long poll: one request's handler answers a waiting one), showed it
 * again until its next wait.  The nghttp2 hook's stream callbacks too,
 * for what they restore of an HTTP/1 connection (an HTTP/2 one's stamp
 * has no sequence to check).  Nor does what the socket level published
 * for fd itself, whatever its span: the hook claimed fd, and the two
 * layers can read one head differently (a folded or NUL-cut traceparent
 * the library takes and the scanner rejects), so that this request's
 * socket-level context has other ids than the callback's and stayed
 * shown after it, until the thread's next wait. */
static inline void
hook_http_leave(int fd,
		const struct ctxshim_ctx *c,
		const struct hook_http_saved *sv,
		const char *restore_reason,
		const char *detach_reason)
{
	const struct hook_scope *p = &sv->prev;
	const struct ctxshim_ctx *cur = ctxshim_current();

	if (p->has && !hook_scope_same_span(&p->ctx, c) &&
	    (fd < 0 || p->ctx.sock_fdp1 != fd + 1) &&
	    !hook_socket_ctx_answered(&p->ctx, p->sock_seq)) {
		if (!cur || !hook_scope_same_span(cur, &p->ctx))
			CTXSHIM_EVENT(CTXSHIM_EV_SWITCH, fd, &p->ctx, restore_reason);
		ctxshim_attach(&p->ctx);
		hook_socket_ctx_restored(&p->ctx);
	} else {
		ctxshim_detach();
		if (cur)
			CTXSHIM_EVENT(CTXSHIM_EV_DETACH, fd, NULL, detach_reason);
	}
}
