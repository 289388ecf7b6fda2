/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP request-head scanner fed one stream in different read splits.
 * Input: a limits byte, a configuration of extra header names, a read
 * plan (chunk sizes), then the stream.  The stream is fed whole with a
 * dedicated capture, in the planned chunks through a per-thread scratch
 * capture copied to a pool slot (the documented use), in the planned
 * chunks without a capture, and byte by byte.  The events (status, absolute
 * offset, flags, captured values) must be the same, as http-scan.h
 * promises; the framing-only run must agree on everything but capture
 * flags.  Twice more (planned chunks, then whole) each read is first
 * offered to http_scan_whole(), as the socket level does: what it takes
 * must be what a feed of the same read does (state, flags, values), what
 * it leaves it must leave untouched, and the events must not change.  In
 * the run without a capture each read is also offered to
 * http_scan_skip() (bytes spliced out of the socket): stepping over them
 * must leave the state a feed of them leaves. */
#include "fuzz.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http-scan.h"
#include "../http-scan-snap.h"

#define MAX_EV       512
#define MAX_PLAN     32
#define BYTEWISE_MAX 4096

struct ev {
	enum http_scan_status status;
	size_t off;
	unsigned flags;
	enum http_scan_give_up reason;
	bool captured;
	struct snap snap;
};

struct trace {
	unsigned n; /* events seen */
	struct ev ev[MAX_EV];
	bool gave_up, in_head;
	enum http_scan_give_up reason;
};

/* CAP_WHOLE: CAP_SCRATCH, each read first offered to http_scan_whole() as
 * ctxshim_conn_feed() does (checked against a feed of the same read). */
enum capmode { CAP_OWN, CAP_SCRATCH, CAP_NONE, CAP_WHOLE };

struct plan {
	size_t n;
	uint8_t size[MAX_PLAN]; /* chunk sizes - 1, cycled; n == 0: bytewise */
};

static void
take_snap(struct snap *s, const struct http_scan_capture *cap, unsigned n_extra)
{
	unsigned k, i;

	FUZZ_CHECK(cap->method_len <= HTTP_SCAN_METHOD_MAX);
	FUZZ_CHECK(cap->target_len <= HTTP_SCAN_TARGET_MAX);
	FUZZ_CHECK(cap->traceparent_len <= HTTP_SCAN_TRACEPARENT_MAX);
	FUZZ_CHECK(cap->tracestate_len <= HTTP_SCAN_TRACESTATE_MAX);
	/* the request line's grammar */
	FUZZ_CHECK(cap->method_len >= 1);
	FUZZ_CHECK(cap->method[0] >= 'A' && cap->method[0] <= 'Z');
	for (i = 0; i < cap->method_len; i++)
		FUZZ_CHECK((cap->method[i] >= 'A' && cap->method[i] <= 'Z') ||
			   cap->method[i] == '_' || cap->method[i] == '-');
	FUZZ_CHECK(cap->target_len >= 1);
	for (i = 0; i < cap->target_len; i++)
		FUZZ_CHECK((uint8_t)cap->target[i] > 0x20);
	/* a tracestate cut back to whole members ends before a ',' */
	FUZZ_CHECK(!cap->tracestate_truncated ||
		   cap->tracestate_len <= HTTP_SCAN_TRACESTATE_MAX);
	FUZZ_CHECK((cap->extra_present >> n_extra) == 0);

	for (k = 0; k < n_extra; k++)
		FUZZ_CHECK(cap->extra_len[k] <= HTTP_SCAN_VALUE_MAX);
	snap_take(s, cap, n_extra);
}

static void
record(struct trace *t,
       enum http_scan_status r,
       size_t off,
       const struct http_scan *st,
       const struct http_scan_capture *cap,
       enum capmode mode,
       unsigned n_extra)
{
	struct ev *e;
	unsigned i = t->n++;

	if (i > 0 && i <= MAX_EV)
		FUZZ_CHECK(off > t->ev[i - 1].off || r == HTTP_SCAN_GAVE_UP);
	if (i >= MAX_EV)
		return;
	e = &t->ev[i];
	e->status = r;
	e->off = off;
	e->reason = http_scan_give_up_reason(st);
	e->flags = 0;
	e->captured = false;
	FUZZ_CHECK(http_scan_give_up_name(e->reason) != NULL);
	if (r != HTTP_SCAN_HEAD)
		return;
	e->flags = http_scan_flags(st);
	e->captured = e->flags & HTTP_SCAN_F_CAPTURED;
	if (mode != CAP_NONE) {
		/* with a capture kept as documented, every head is captured
		 * unless it is too big */
		FUZZ_CHECK(!(e->flags & HTTP_SCAN_F_CAPTURE_LOST));
		FUZZ_CHECK(e->captured != !!(e->flags & HTTP_SCAN_F_OVERSIZED));
	} else {
		FUZZ_CHECK(!e->captured);
		FUZZ_CHECK(!(e->flags & HTTP_SCAN_F_CAPTURE_ONLY));
	}
	if (e->captured)
		take_snap(&e->snap, cap, n_extra);
}

static size_t
next_chunk(const struct plan *pl, size_t *k, size_t left)
{
	size_t n = pl->n ? (size_t)pl->size[(*k)++ % pl->n] + 1 : 1;

	return n < left ? n : left;
}

static struct http_scan_capture own, scratch, pool, check;

/* The read d[0, n) from state *st: if http_scan_whole() takes it, it must
 * leave st as a feed of the same read with a capture does, report the
 * same flags and values (recorded from the feed's capture), and consume
 * it all; if not, st must be unchanged. */
static bool
try_whole(const struct http_scan_config *cfg,
	  unsigned n_extra,
	  struct http_scan *st,
	  const uint8_t *d,
	  size_t n,
	  size_t off,
	  struct trace *t)
{
	uint8_t *copy = malloc(n ? n : 1);
	struct http_scan before = *st, chk = *st;
	struct http_scan_head h;
	struct snap a, b;
	size_t used = 0;
	int rc;

	if (!copy)
		abort();
	memcpy(copy, d, n);
	rc = http_scan_whole(st, cfg, copy, n, &h);
	if (rc != 0) {
		FUZZ_CHECK(rc == -EAGAIN);
		FUZZ_CHECK(memcmp(&before, st, sizeof(before)) == 0);
		free(copy);
		return false;
	}
	memset(&check, 0, sizeof(check));
	FUZZ_CHECK(http_scan_feed(&chk, cfg, &check, copy, n, &used) == HTTP_SCAN_HEAD);
	FUZZ_CHECK(used == n);
	FUZZ_CHECK(memcmp(&chk, st, sizeof(chk)) == 0);
	FUZZ_CHECK(h.flags == http_scan_flags(&chk));
	FUZZ_CHECK(h.method == (const char *)copy);
	FUZZ_CHECK(h.target >= (const char *)copy &&
		   h.target + h.target_len <= (const char *)copy + n);
	snap_take(&a, &check, n_extra);
	snap_take_head(&b, &h, n_extra);
	snap_norm(&a);
	snap_norm(&b);
	FUZZ_CHECK(snap_eq(&a, &b));
	record(t, HTTP_SCAN_HEAD, off + n, st, &check, CAP_WHOLE, n_extra);
	free(copy);
	return true;
}

/* http_scan_skip() of the read d[0, n) from state st, on a copy: if it
 * steps over the bytes, the state must be what a feed of them leaves
 * (they were all body or chunk data: no head, nothing captured); if it
 * refuses, the copy must have given up.  st itself is left alone: the
 * run goes on feeding, so its events stay comparable. */
static void
check_skip(const struct http_scan_config *cfg,
	   const struct http_scan *st,
	   const uint8_t *d,
	   size_t n)
{
	struct http_scan skipped = *st, fed = *st;
	size_t used = 0;

	if (http_scan_skip(&skipped, n) != 0) {
		FUZZ_CHECK(http_scan_gave_up(&skipped));
		return;
	}
	FUZZ_CHECK(!http_scan_gave_up(st));
	FUZZ_CHECK(feed_exact(&fed, cfg, NULL, d, n, &used) == HTTP_SCAN_MORE);
	FUZZ_CHECK(used == n);
	FUZZ_CHECK(memcmp(&skipped, &fed, sizeof(fed)) == 0);
}

static void
run(const struct http_scan_config *cfg,
    unsigned n_extra,
    const uint8_t *d,
    size_t len,
    const struct plan *pl,
    enum capmode mode,
    struct trace *t)
{
	struct http_scan st;
	bool in_pool = false, dead = false;
	size_t pos = 0, k = 0;

	t->n = 0;
	/* captures start zero-filled; the scanner must not rely on more */
	memset(&own, 0, sizeof(own));
	memset(&scratch, 0, sizeof(scratch));
	memset(&pool, 0, sizeof(pool));
	memset(&st, 0, sizeof(st));
	while (pos < len) {
		size_t n = pl ? next_chunk(pl, &k, len - pos) : len - pos;
		size_t end = pos + n, off = pos;

		if (mode == CAP_NONE && n)
			check_skip(cfg, &st, d + pos, n);
		if (mode == CAP_WHOLE &&
		    try_whole(cfg, n_extra, &st, d + pos, n, pos, t)) {
			pos = end;
			continue;
		}
		while (off < end) {
			struct http_scan_capture *cap;
			enum http_scan_status r;
			size_t used = (size_t)-1;

			cap = mode == CAP_OWN    ? &own
			      : mode == CAP_NONE ? NULL
			      : in_pool          ? &pool
						 : &scratch;
			r = feed_exact(&st, cfg, cap, d + off, end - off, &used);
			FUZZ_CHECK(used <= end - off);
			FUZZ_CHECK(r == HTTP_SCAN_MORE || r == HTTP_SCAN_HEAD ||
				   r == HTTP_SCAN_GAVE_UP);
			if (dead)
				FUZZ_CHECK(r == HTTP_SCAN_MORE && used == end - off);
			if (r == HTTP_SCAN_MORE)
				FUZZ_CHECK(used == end - off);
			if (r == HTTP_SCAN_HEAD)
				FUZZ_CHECK(used > 0);
			off += used;
			if (r == HTTP_SCAN_HEAD) {
				record(t, r, off, &st, cap, mode, n_extra);
				in_pool = false;
			} else if (r == HTTP_SCAN_GAVE_UP) {
				record(t, r, off, &st, cap, mode, n_extra);
				FUZZ_CHECK(http_scan_gave_up(&st));
				dead = true;
				off = end;
			}
			if (http_scan_gave_up(&st))
				dead = true;
		}
		if ((mode == CAP_SCRATCH || mode == CAP_WHOLE) &&
		    http_scan_in_head(&st) && !in_pool) {
			pool = scratch;
			in_pool = true;
		}
		/* another connection of the thread reuses the scratch capture */
		if (mode == CAP_SCRATCH || mode == CAP_WHOLE)
			memset(&scratch, 0xa5, sizeof(scratch));
		pos = end;
	}
	t->gave_up = http_scan_gave_up(&st);
	t->reason = http_scan_give_up_reason(&st);
	t->in_head = http_scan_in_head(&st);
	FUZZ_CHECK(!(t->gave_up && t->in_head));
}

static void
same(const struct trace *a, const struct trace *b, bool framing_only)
{
	const unsigned cap_flags = HTTP_SCAN_F_CAPTURED | HTTP_SCAN_F_CAPTURE_ONLY;
	unsigned i;

	FUZZ_CHECK(a->n == b->n);
	FUZZ_CHECK(a->gave_up == b->gave_up);
	FUZZ_CHECK(a->reason == b->reason);
	FUZZ_CHECK(a->in_head == b->in_head);
	for (i = 0; i < a->n && i < MAX_EV; i++) {
		const struct ev *x = &a->ev[i], *y = &b->ev[i];

		FUZZ_CHECK(x->status == y->status);
		FUZZ_CHECK(x->off == y->off);
		FUZZ_CHECK(x->reason == y->reason);
		if (framing_only) {
			FUZZ_CHECK((x->flags & ~cap_flags) == (y->flags & ~cap_flags));
			continue;
		}
		FUZZ_CHECK(x->flags == y->flags);
		FUZZ_CHECK(x->captured == y->captured);
		if (x->captured)
			FUZZ_CHECK(snap_eq(&x->snap, &y->snap));
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct trace whole, planned, bare, bytewise, fused;
	struct fuzz_in in = {data, size};
	struct http_scan_config cfg;
	unsigned lim = fuzz_byte(&in), n_extra = 0, n, i;
	struct plan pl;

	/* the response framing of the socket level's batched writes: within
	 * the bytes (ASan), and a length past them only for a body */
	(void)http_response_len(data, size);
	http_scan_config_init(&cfg);
	if (lim) {
		/* small limits reach the oversized and give-up paths */
		uint32_t max_head = 64u << (lim & 15);
		uint32_t give_up = max_head << ((lim >> 4) & 3);

		FUZZ_CHECK(http_scan_config_set_limits(&cfg, max_head, give_up) == 0);
	}
	n = fuzz_byte(&in) % (HTTP_SCAN_EXTRA_MAX + 2);
	for (i = 0; i < n; i++) {
		size_t l = fuzz_byte(&in) % 40;
		unsigned idx = 99;
		int r;

		if (l > in.left)
			l = in.left;
		r = http_scan_config_add_header(&cfg, (const char *)in.p, l, &idx);
		if (r == 0) {
			FUZZ_CHECK(idx == n_extra);
			n_extra++;
		}
		in.p += l;
		in.left -= l;
	}
	pl.n = fuzz_byte(&in) % (MAX_PLAN + 1);
	for (i = 0; i < pl.n; i++)
		pl.size[i] = (uint8_t)fuzz_byte(&in);

	run(&cfg, n_extra, in.p, in.left, NULL, CAP_OWN, &whole);
	run(&cfg, n_extra, in.p, in.left, &pl, CAP_SCRATCH, &planned);
	same(&whole, &planned, false);
	run(&cfg, n_extra, in.p, in.left, &pl, CAP_WHOLE, &fused);
	same(&whole, &fused, false);
	run(&cfg, n_extra, in.p, in.left, NULL, CAP_WHOLE, &fused);
	same(&whole, &fused, false);
	run(&cfg, n_extra, in.p, in.left, &pl, CAP_NONE, &bare);
	same(&whole, &bare, true);
	if (in.left <= BYTEWISE_MAX) {
		struct plan one = {.n = 0};

		run(&cfg, n_extra, in.p, in.left, &one, CAP_OWN, &bytewise);
		same(&whole, &bytewise, false);
	}
	return 0;
}
