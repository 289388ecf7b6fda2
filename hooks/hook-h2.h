/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The header fields of one HTTP/2 request stream, collected as they are
 * decoded (hooks/hook-nghttp2.c), into the request model of
 * preload/request-ctx.h.  Pure code: no allocation, no I/O, no globals;
 * every length is bounded, so it can be fed hostile fields directly (a
 * fuzz target: hook_h2_req_init(), then any number of
 * hook_h2_req_header() calls with arbitrary bytes, then
 * hook_h2_req_view()).
 *
 * The same decisions as the HTTP/1.x scanner (proc-context/http-scan.h),
 * so a request gets the same context over either protocol:
 *  - names match ASCII case-insensitively (HTTP/2 requires lower case;
 *    nghttp2 rejects the rest before we see it);
 *  - ":method" (<= 20 bytes kept, the scanner's longest; a longer one is
 *    marked cut: "_OTHER" without an original) and ":path" (the
 *    request-target, <= 256 bytes kept) are taken from their first field;
 *  - traceparent: the first field's value, up to 64 bytes (enough to
 *    decide validity exactly: a version-00 value longer than 55 is
 *    invalid, and a later version only looks at byte 56); a second field
 *    makes it invalid (W3C);
 *  - tracestate: all fields joined in order with ',' (RFC 9110 §5.3, HTTP/2
 *    may also split one list into several fields); beyond 512 bytes the
 *    list is kept normalised and cut to 512 characters by W3C's truncation
 *    policy (w3c_tracestate_trunc: entries over 128 characters first,
 *    right-most first, then from the right),
 *    and the whole list is still checked (w3c_tracestate_check_*()): an
 *    invalid member or more than 32 members anywhere drops it all (W3C),
 *    as the stored prefix alone could look valid;
 *  - configured extra headers (CTXSHIM_HEADER_ATTRS): fields joined with
 *    ", ", cut at 256 bytes. */

#include "cfg.h"
#include "request-ctx.h"
#include "w3c.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define HOOK_H2_METHOD_MAX 20
#define HOOK_H2_PATH_MAX   256
#define HOOK_H2_TP_MAX     64
#define HOOK_H2_TS_MAX     512
#define HOOK_H2_EXTRA_MAX  256
#define HOOK_H2_MIN(a, b)  ((size_t)(a) < (size_t)(b) ? (size_t)(a) : (size_t)(b))

struct hook_h2_req {
	uint16_t path_len;
	uint16_t ts_len;
	uint16_t extra_len[CTXSHIM_MAX_HEADER_ATTRS];
	uint8_t method_len;
	uint8_t tp_len;
	uint8_t n_tp;       /* traceparent fields seen (saturates at 255) */
	uint8_t extra_seen; /* bit i: extra header i was seen */
	/* Flags in bytes, not bools: the socket level keeps the request in
	 * a pool entry that two readers of one socket share, or that is
	 * reused under a feed (preload/conn.c, "Two readers"), so any byte
	 * may be found here, and a bool other than 0 or 1 is undefined.
	 * For the same reason every length is bounded where it is used. */
	uint8_t has_method, has_path, has_ts;
	uint8_t method_cut;  /* :method longer than HOOK_H2_METHOD_MAX */
	uint8_t ts_checking; /* the list overflowed: ts_check follows it */
	uint8_t ts_bad;      /* invalid past what is stored: drop it all */
	struct w3c_tracestate_check ts_check;
	char method[HOOK_H2_METHOD_MAX];
	char path[HOOK_H2_PATH_MAX];
	char tp[HOOK_H2_TP_MAX];
	char ts[HOOK_H2_TS_MAX];
	char extra[CTXSHIM_MAX_HEADER_ATTRS][HOOK_H2_EXTRA_MAX];
	/* ts once the list overflowed (set up then: not cleared by
	 * hook_h2_req_init()) */
	struct w3c_tracestate_trunc ts_trunc;
};

/* The request as struct ctxshim_request; points into the hook_h2_req. */
struct hook_h2_view {
	struct ctxshim_request r;
	const char *ts_line;
	size_t ts_len;
};

static inline void
hook_h2_req_init(struct hook_h2_req *q)
{
	/* The value buffers need no clearing: only [0, len) is ever read. */
	memset(q, 0, offsetof(struct hook_h2_req, method));
}

/* Inlined: with a constant want, its length and bytes are constants. */
static inline __attribute__((always_inline)) bool
hook_h2_name_is(const uint8_t *name, size_t len, const char *want)
{
	size_t i, n = strlen(want);

	if (len != n)
		return false;
	/* Names come in lower case (RFC 9113 §8.2.1; the socket level's
	 * scanner matches only those): compared as they are first, the
	 * case folded only from the first difference on. */
	for (i = 0; i < n && name[i] == (uint8_t)want[i]; i++)
		;
	for (; i < n; i++) {
		uint8_t c = name[i], w = (uint8_t)want[i];

		if (c >= 'A' && c <= 'Z')
			c = (uint8_t)(c + ('a' - 'A'));
		if (w >= 'A' && w <= 'Z')
			w = (uint8_t)(w + ('a' - 'A'));
		if (c != w)
			return false;
	}
	return true;
}

/* Append one tracestate field to the joined list.  A list that fits is
 * validated later, as a whole (ctxshim_request_ctx()); one that does not
 * is checked field by field from the first overflow on, the stored fields
 * first, and from then on ts holds it as W3C's truncation policy cuts it
 * (rewritten in place from the fields stored so far). */
static inline void
hook_h2_req_ts(struct hook_h2_req *q, const uint8_t *v, size_t len)
{
	size_t have = q->ts_len, sep = have ? 1 : 0;

	q->has_ts = true;
	if (q->ts_bad)
		return;
	if (!q->ts_checking) {
		if (have + sep + len <= HOOK_H2_TS_MAX) {
			if (sep)
				q->ts[have] = ',';
			memcpy(q->ts + have + sep, v, len);
			q->ts_len = (uint16_t)(have + sep + len);
			return;
		}
		q->ts_checking = true;
		if (have > HOOK_H2_TS_MAX)
			have = HOOK_H2_TS_MAX;
		(void)w3c_tracestate_check_feed(&q->ts_check, q->ts, have);
		(void)w3c_tracestate_check_end(&q->ts_check, false);
		w3c_tracestate_trunc_init(&q->ts_trunc);
		w3c_tracestate_trunc_feed(&q->ts_trunc, q->ts, HOOK_H2_TS_MAX, q->ts,
					  have);
		w3c_tracestate_trunc_end(&q->ts_trunc, q->ts, HOOK_H2_TS_MAX);
	}
	/* HTTP/2 field values have no line ending: a CR is just invalid. */
	if (w3c_tracestate_check_feed(&q->ts_check, (const char *)v, len) < 0 ||
	    w3c_tracestate_check_end(&q->ts_check, false) < 0) {
		q->ts_bad = true;
		return;
	}
	w3c_tracestate_trunc_feed(&q->ts_trunc, q->ts, HOOK_H2_TS_MAX, (const char *)v,
				  len);
	w3c_tracestate_trunc_end(&q->ts_trunc, q->ts, HOOK_H2_TS_MAX);
	q->ts_len = q->ts_trunc.len;
}

/* What a field's name makes of it (hook_h2_field_kind()): kind, and for
 * HOOK_H2_F_EXTRA the configured extra headers it is (bit i: names[i]).
 * Worked out once per name where the names are known in advance (the
 * socket level's scanner reports the index of a configured name:
 * preload/conn.c), per field otherwise (hook_h2_req_header()). */
enum {
	HOOK_H2_F_NONE = 0,
	HOOK_H2_F_METHOD,
	HOOK_H2_F_PATH,
	HOOK_H2_F_TP,
	HOOK_H2_F_TS,
	HOOK_H2_F_EXTRA,
};
struct hook_h2_kind {
	uint8_t kind;
	uint8_t extra;
};

/* names: the configured extra header names, n_names of them. */
static inline __attribute__((always_inline)) struct hook_h2_kind
hook_h2_field_kind(const char (*names)[CTXSHIM_HEADER_NAME_MAX],
		   unsigned n_names,
		   const uint8_t *name,
		   size_t name_len)
{
	struct hook_h2_kind k = {HOOK_H2_F_NONE, 0};
	unsigned i;

	if (name_len && name[0] == ':') {
		if (hook_h2_name_is(name, name_len, ":method"))
			k.kind = HOOK_H2_F_METHOD;
		else if (hook_h2_name_is(name, name_len, ":path"))
			k.kind = HOOK_H2_F_PATH;
		return k;
	}
	if (hook_h2_name_is(name, name_len, "traceparent")) {
		k.kind = HOOK_H2_F_TP;
		return k;
	}
	if (hook_h2_name_is(name, name_len, "tracestate")) {
		k.kind = HOOK_H2_F_TS;
		return k;
	}
	for (i = 0; i < n_names && i < CTXSHIM_MAX_HEADER_ATTRS; i++)
		if (hook_h2_name_is(name, name_len, names[i]))
			k.extra |= (uint8_t)(1u << i);
	if (k.extra)
		k.kind = HOOK_H2_F_EXTRA;
	return k;
}

/* One decoded header field of the request's header block, in order, by
 * what its name makes of it (any k: one out of range does nothing). */
static inline void
hook_h2_req_field(struct hook_h2_req *q,
		  struct hook_h2_kind k,
		  const uint8_t *value,
		  size_t value_len)
{
	unsigned i;

	if (!value && value_len)
		return;
	if (!value)
		value = (const uint8_t *)"";
	switch (k.kind) {
	case HOOK_H2_F_METHOD:
		if (q->has_method)
			return;
		q->has_method = true;
		q->method_cut = value_len > HOOK_H2_METHOD_MAX;
		q->method_len =
			(uint8_t)(value_len < HOOK_H2_METHOD_MAX ? value_len
								 : HOOK_H2_METHOD_MAX);
		memcpy(q->method, value, q->method_len);
		return;
	case HOOK_H2_F_PATH:
		if (q->has_path)
			return;
		q->has_path = true;
		q->path_len =
			(uint16_t)(value_len < HOOK_H2_PATH_MAX ? value_len
								: HOOK_H2_PATH_MAX);
		memcpy(q->path, value, q->path_len);
		return;
	case HOOK_H2_F_TP:
		if (q->n_tp < UINT8_MAX)
			q->n_tp++;
		if (q->n_tp == 1) {
			size_t n;

			/* w3c_traceparent_kept_len() wants the value without
			 * its OWS, as the HTTP/1 scanner gives it: nghttp2
			 * passes it on when its RFC 9113 whitespace check is
			 * off (or predates it). */
			while (value_len && (value[0] == ' ' || value[0] == '\t')) {
				value++;
				value_len--;
			}
			while (value_len && (value[value_len - 1] == ' ' ||
					     value[value_len - 1] == '\t'))
				value_len--;
			n = value_len < HOOK_H2_TP_MAX ? value_len : HOOK_H2_TP_MAX;
			/* A traceparent (55 bytes) in two fixed-size copies
			 * that overlap, not a copy of n bytes (rep movsb). */
			if (n >= HOOK_H2_TP_MAX / 2) {
				memcpy(q->tp, value, HOOK_H2_TP_MAX / 2);
				memcpy(q->tp + n - HOOK_H2_TP_MAX / 2,
				       value + n - HOOK_H2_TP_MAX / 2,
				       HOOK_H2_TP_MAX / 2);
			} else {
				memcpy(q->tp, value, n);
			}
			q->tp_len = (uint8_t)w3c_traceparent_kept_len(
				(const char *)value, value_len, HOOK_H2_TP_MAX);
		}
		return;
	case HOOK_H2_F_TS:
		hook_h2_req_ts(q, value, value_len);
		return;
	case HOOK_H2_F_EXTRA:
		break;
	default:
		return;
	}
	for (i = 0; i < CTXSHIM_MAX_HEADER_ATTRS; i++) {
		size_t have, n;

		if (!(k.extra & (1u << i)))
			continue;
		have = (q->extra_seen & (1u << i)) ? q->extra_len[i] : 0;
		if (have > HOOK_H2_EXTRA_MAX)
			have = HOOK_H2_EXTRA_MAX;
		if (have && have + 2 <= HOOK_H2_EXTRA_MAX) {
			memcpy(q->extra[i] + have, ", ", 2);
			have += 2;
		}
		n = value_len < HOOK_H2_EXTRA_MAX - have ? value_len
							 : HOOK_H2_EXTRA_MAX - have;
		memcpy(q->extra[i] + have, value, n);
		q->extra_len[i] = (uint16_t)(have + n);
		q->extra_seen |= (uint8_t)(1u << i);
	}
}

/* One decoded header field of the request's header block, in order.
 * names: the configured extra header names (lower case), n of them. */
static inline void
hook_h2_req_header(struct hook_h2_req *q,
		   const char (*names)[CTXSHIM_HEADER_NAME_MAX],
		   unsigned n_names,
		   const uint8_t *name,
		   size_t name_len,
		   const uint8_t *value,
		   size_t value_len)
{
	if (!name)
		return;
	hook_h2_req_field(q, hook_h2_field_kind(names, n_names, name, name_len), value,
			  value_len);
}

/* The collected request, for ctxshim_request_ctx(). */
static inline void
hook_h2_req_view(const struct hook_h2_req *q, struct hook_h2_view *v)
{
	unsigned i, m;

	/* Every field set, not the whole cleared first: a memset of the
	 * 216 bytes is a rep stos, which costs more than the stores (the
	 * two arrays' memsets are a few vector stores each). */
	memset(v->r.extra, 0, sizeof(v->r.extra));
	memset(v->r.extra_len, 0, sizeof(v->r.extra_len));
	/* Lengths bounded by their arrays (a shared request, above). */
	v->r.method = q->has_method ? q->method : NULL;
	v->r.method_len =
		q->has_method ? HOOK_H2_MIN(q->method_len, HOOK_H2_METHOD_MAX) : 0;
	v->r.method_cut = q->has_method && q->method_cut;
	v->r.target = q->has_path ? q->path : NULL;
	v->r.target_len = q->has_path ? HOOK_H2_MIN(q->path_len, HOOK_H2_PATH_MAX) : 0;
	v->r.traceparent = q->n_tp ? q->tp : NULL;
	v->r.traceparent_len = q->n_tp ? HOOK_H2_MIN(q->tp_len, HOOK_H2_TP_MAX) : 0;
	v->r.traceparent_repeated = q->n_tp > 1;
	/* An invalid list is dropped whole; the traceparent stays (W3C). */
	if (q->has_ts && !q->ts_bad) {
		v->ts_line = q->ts;
		v->ts_len = HOOK_H2_MIN(q->ts_len, HOOK_H2_TS_MAX);
		v->r.tracestate = &v->ts_line;
		v->r.tracestate_lens = &v->ts_len;
		v->r.n_tracestate = 1;
	} else {
		v->r.tracestate = NULL;
		v->r.tracestate_lens = NULL;
		v->r.n_tracestate = 0;
	}
	/* The extra headers seen, bit by bit (none: no loop). */
	for (m = q->extra_seen; m; m &= m - 1) {
		i = (unsigned)__builtin_ctz(m);
		if (i >= CTXSHIM_MAX_HEADER_ATTRS)
			break;
		v->r.extra[i] = q->extra[i];
		v->r.extra_len[i] = HOOK_H2_MIN(q->extra_len[i], HOOK_H2_EXTRA_MAX);
	}
}
