/* SPDX-License-Identifier: Apache-2.0 */
#include "test-common.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "http-scan.h"
#include "http-scan-snap.h"
#include "w3c.h"

/* Under valgrind (meson test --setup valgrind) fewer split points are
 * tried: the same code paths, in seconds instead of a minute; the full
 * sweep runs everywhere else and test/fuzz/fuzz-http-scan.c splits at
 * random (RUNNING_ON_VALGRIND: test-common.h). */

/* ck_assert() reports every call through a pipe; the harness runs millions
 * of checks, so it only talks to Check when one fails. */
#define REQUIRE(cond_)                                                         \
	do {                                                                   \
		if (!(cond_))                                                  \
			ck_abort_msg("%s:%d: %s", __FILE__, __LINE__, #cond_); \
	} while (0)

/* The scanner is fed the bytes of one connection, split the way reads
 * would split them.  Every case runs whole, split at every point (or a
 * dense sample for big inputs), in fixed chunks of 1..7 bytes and in random
 * chunks, with a dedicated capture, with a per-thread scratch capture copied
 * to a pool slot when a head is left in progress (the shim's pattern), and
 * without a capture.  The recorded events must be identical in every run;
 * then the whole-feed trace is checked against what the case expects. */

#define TP1 "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
#define TP2 "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03"

#define MAX_EV 16

struct ev {
	enum http_scan_status status;
	size_t off; /* absolute stream offset */
	unsigned flags;
	enum http_scan_give_up reason;
	bool captured;
	struct snap snap;
};

struct trace {
	struct ev ev[MAX_EV];
	unsigned n;
	bool gave_up;
	enum http_scan_give_up reason;
	bool in_head;
};

enum capmode { CAP_OWN, CAP_SCRATCH, CAP_NONE };

/* How the stream is cut into reads. */
struct chunker {
	enum { CH_WHOLE, CH_SPLIT, CH_FIXED, CH_RANDOM } kind;
	size_t arg;
	uint64_t rng;
};

static uint64_t
xrand(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static size_t
next_chunk(struct chunker *c, size_t off, size_t len)
{
	size_t left = len - off;

	switch (c->kind) {
	case CH_WHOLE:
		return left;
	case CH_SPLIT:
		return off < c->arg ? c->arg - off : left;
	case CH_FIXED:
		return left < c->arg ? left : c->arg;
	case CH_RANDOM: {
		/* mostly small reads, sometimes big ones */
		uint64_t r = xrand(&c->rng);
		size_t n = (r & 3) ? 1 + (r >> 8) % 9 : 1 + (r >> 8) % 300;

		return left < n ? left : n;
	}
	}
	return left;
}

static void
take_snap(struct snap *s, const struct http_scan_capture *cap)
{
	unsigned k;

	REQUIRE(cap->method_len <= HTTP_SCAN_METHOD_MAX);
	REQUIRE(cap->target_len <= HTTP_SCAN_TARGET_MAX);
	REQUIRE(cap->traceparent_len <= HTTP_SCAN_TRACEPARENT_MAX);
	REQUIRE(cap->tracestate_len <= HTTP_SCAN_TRACESTATE_MAX);
	for (k = 0; k < HTTP_SCAN_EXTRA_MAX; k++)
		REQUIRE(cap->extra_len[k] <= HTTP_SCAN_VALUE_MAX);
	snap_take(s, cap, HTTP_SCAN_EXTRA_MAX);
}

static void
record(struct trace *t,
       enum http_scan_status r,
       size_t off,
       const struct http_scan *st,
       const struct http_scan_capture *cap)
{
	struct ev *e;

	REQUIRE(t->n < MAX_EV);
	e = &t->ev[t->n++];
	memset(e, 0, sizeof(*e));
	e->status = r;
	e->off = off;
	e->reason = http_scan_give_up_reason(st);
	if (r != HTTP_SCAN_HEAD)
		return;
	e->flags = http_scan_flags(st);
	e->captured = e->flags & HTTP_SCAN_F_CAPTURED;
	if (e->captured) {
		REQUIRE(cap);
		take_snap(&e->snap, cap);
	}
}

static struct http_scan_capture *
new_capture(void)
{
	struct http_scan_capture *c = malloc(sizeof(*c));

	/* Left uninitialised on purpose: valgrind then reports any read of
	 * a capture field the scanner did not write first (MALLOC_PERTURB_
	 * fills it with garbage in meson runs). */
	REQUIRE(c);
	return c;
}

static void
run(const struct http_scan_config *cfg,
    const void *data,
    size_t len,
    struct chunker ch,
    enum capmode mode,
    struct trace *t)
{
	const uint8_t *d = data;
	struct http_scan st;
	struct http_scan_capture *own = new_capture(), *scratch = new_capture(),
				 *pool = new_capture();
	bool in_pool = false, dead = false;
	size_t pos = 0;

	memset(t, 0, sizeof(*t));
	/* A zeroed state is a fresh scanner (mmap'd tables rely on it). */
	memset(&st, 0, sizeof(st));
	while (pos < len) {
		size_t n = next_chunk(&ch, pos, len), end = pos + n, off = pos;

		REQUIRE(n > 0);
		while (off < end) {
			struct http_scan_capture *cap;
			enum http_scan_status r;
			size_t used = 12345;

			cap = mode == CAP_OWN    ? own
			      : mode == CAP_NONE ? NULL
			      : in_pool          ? pool
						 : scratch;
			r = feed_exact(&st, cfg, cap, d + off, end - off, &used);
			REQUIRE(used <= end - off);
			if (dead) {
				/* after giving up: everything swallowed, nothing said */
				REQUIRE(r == HTTP_SCAN_MORE);
				REQUIRE(used == end - off);
			}
			if (r == HTTP_SCAN_MORE)
				REQUIRE(used == end - off);
			off += used;
			if (r == HTTP_SCAN_HEAD) {
				record(t, r, off, &st, cap);
				in_pool = false;
			} else if (r == HTTP_SCAN_GAVE_UP) {
				record(t, r, off, &st, cap);
				REQUIRE(http_scan_gave_up(&st));
				dead = true;
				off = end; /* the rest of this read is ignored too */
			}
			if (http_scan_gave_up(&st))
				dead = true;
		}
		if (mode == CAP_SCRATCH && http_scan_in_head(&st) && !in_pool) {
			*pool = *scratch;
			in_pool = true;
		}
		/* another connection uses the thread's scratch capture */
		if (mode == CAP_SCRATCH)
			memset(scratch, 0xa5, sizeof(*scratch));
		pos = end;
	}
	t->gave_up = http_scan_gave_up(&st);
	t->reason = http_scan_give_up_reason(&st);
	t->in_head = http_scan_in_head(&st);
	free(own);
	free(scratch);
	free(pool);
}

static void
dump_trace(const char *label, const struct trace *t)
{
	unsigned i;

	fprintf(stderr, "  %s: %u events, gave_up=%d (%s), in_head=%d\n", label, t->n,
		t->gave_up, http_scan_give_up_name(t->reason), t->in_head);
	for (i = 0; i < t->n; i++)
		fprintf(stderr,
			"    [%u] status=%d off=%zu flags=%#x reason=%s tp=%.*s\n", i,
			t->ev[i].status, t->ev[i].off, t->ev[i].flags,
			http_scan_give_up_name(t->ev[i].reason),
			(int)t->ev[i].snap.tp_len, t->ev[i].snap.tp);
}

/* Same events; `framing_only` compares what a capture-less run can know. */
static bool
trace_eq(const struct trace *a, const struct trace *b, bool framing_only)
{
	const unsigned cap_flags = HTTP_SCAN_F_CAPTURED | HTTP_SCAN_F_CAPTURE_ONLY;
	unsigned i;

	if (a->n != b->n || a->gave_up != b->gave_up || a->reason != b->reason ||
	    a->in_head != b->in_head)
		return false;
	for (i = 0; i < a->n; i++) {
		const struct ev *x = &a->ev[i], *y = &b->ev[i];

		if (x->status != y->status || x->off != y->off ||
		    x->reason != y->reason)
			return false;
		if (framing_only) {
			if ((x->flags & ~cap_flags) != (y->flags & ~cap_flags))
				return false;
			continue;
		}
		if (x->flags != y->flags || x->captured != y->captured)
			return false;
		if (x->captured && !snap_eq(&x->snap, &y->snap))
			return false;
	}
	return true;
}

static void
expect_same(const struct trace *base,
	    const struct trace *t,
	    bool framing_only,
	    const char *name,
	    const char *how,
	    size_t arg)
{
	if (trace_eq(base, t, framing_only))
		return;
	fprintf(stderr, "case %s: %s %zu differs from the whole feed\n", name, how,
		arg);
	dump_trace("whole", base);
	dump_trace(how, t);
	ck_abort_msg("case %s: result depends on the split (%s %zu)", name, how, arg);
}

/* Tests with many long heads sample the split points this sparsely (0:
 * the default above); the 1..7-byte chunks still cut at every byte. */
static size_t sweep_stride;

/* Run every split of `data`; returns the whole-feed trace (malloc'd). */
static struct trace *
check_splits(const struct http_scan_config *cfg,
	     const void *data,
	     size_t len,
	     const char *name,
	     bool thorough)
{
	struct trace *base = malloc(sizeof(*base)), *t = malloc(sizeof(*t));
	struct chunker ch = {.kind = CH_WHOLE};
	size_t i, stride = len <= 2048 ? 1 : 61, ends = 300;
	unsigned k;

	if (RUNNING_ON_VALGRIND) {
		stride = len <= 128 ? 1 : len / 64 > 23 ? len / 64 : 23;
		ends = 32;
	}
	if (sweep_stride) {
		stride = sweep_stride;
		ends = 0;
	}

	REQUIRE(base);
	REQUIRE(t);
	run(cfg, data, len, ch, CAP_OWN, base);

	/* every split point (dense sample plus both ends for big inputs) */
	for (i = 1; i < len; i++) {
		if (stride > 1 && i > ends && len - i > ends && i % stride)
			continue;
		ch = (struct chunker){.kind = CH_SPLIT, .arg = i};
		run(cfg, data, len, ch, CAP_OWN, t);
		expect_same(base, t, false, name, "split at", i);
		if (!thorough)
			continue;
		run(cfg, data, len, ch, CAP_SCRATCH, t);
		expect_same(base, t, false, name, "scratch split at", i);
	}
	for (k = 1; k <= 7; k++) {
		ch = (struct chunker){.kind = CH_FIXED, .arg = k};
		run(cfg, data, len, ch, CAP_OWN, t);
		expect_same(base, t, false, name, "chunks of", k);
		run(cfg, data, len, ch, CAP_SCRATCH, t);
		expect_same(base, t, false, name, "scratch chunks of", k);
		run(cfg, data, len, ch, CAP_NONE, t);
		expect_same(base, t, true, name, "no capture, chunks of", k);
	}
	for (k = 0; k < (thorough && !RUNNING_ON_VALGRIND ? 20u : 4u); k++) {
		ch = (struct chunker){.kind = CH_RANDOM,
				      .rng = 0x9e3779b97f4a7c15ull * (k + 1)};
		run(cfg, data, len, ch, k & 1 ? CAP_SCRATCH : CAP_OWN, t);
		expect_same(base, t, false, name, "random chunks, seed", k);
	}
	ch = (struct chunker){.kind = CH_WHOLE};
	run(cfg, data, len, ch, CAP_NONE, t);
	expect_same(base, t, true, name, "no capture, whole", 0);
	free(t);
	return base;
}

static struct http_scan_config cfg_std;

static void
setup_cfg(void)
{
	http_scan_config_init(&cfg_std);
	ck_assert_int_eq(
		http_scan_config_add_header(&cfg_std, "x-request-id", 12, NULL), 0);
	ck_assert_int_eq(http_scan_config_add_header(&cfg_std, "Trace", 5, NULL), 0);
}

static struct trace *
check_str(const char *s, const char *name)
{
	return check_splits(&cfg_std, s, strlen(s), name, true);
}

#define ck_str_field(ptr_, len_, want_)                                                \
	do {                                                                           \
		const char *w_ = (want_);                                              \
		ck_assert_msg((len_) == strlen(w_) && memcmp((ptr_), w_, (len_)) == 0, \
			      "got '%.*s', want '%s'", (int)(len_), (ptr_), w_);       \
	} while (0)

static void
expect_head(const struct trace *t,
	    unsigned i,
	    size_t off,
	    unsigned flags,
	    const char *method,
	    const char *target,
	    const char *tp)
{
	const struct ev *e;

	ck_assert_uint_lt(i, t->n);
	e = &t->ev[i];
	ck_assert_int_eq(e->status, HTTP_SCAN_HEAD);
	ck_assert_uint_eq(e->off, off);
	ck_assert_msg(e->flags == flags, "head %u flags %#x, want %#x", i, e->flags,
		      flags);
	if (!(flags & HTTP_SCAN_F_CAPTURED))
		return;
	ck_str_field(e->snap.method, e->snap.method_len, method);
	ck_str_field(e->snap.target, e->snap.target_len, target);
	ck_str_field(e->snap.tp, e->snap.tp_len, tp);
}

static void
expect_gave_up(const struct trace *t,
	       unsigned i,
	       size_t off,
	       enum http_scan_give_up why)
{
	ck_assert_uint_lt(i, t->n);
	ck_assert_int_eq(t->ev[i].status, HTTP_SCAN_GAVE_UP);
	ck_assert_uint_eq(t->ev[i].off, off);
	ck_assert_str_eq(http_scan_give_up_name(t->ev[i].reason),
			 http_scan_give_up_name(why));
	ck_assert(t->gave_up);
	ck_assert_int_eq(t->reason, why);
}

#define F_CAP HTTP_SCAN_F_CAPTURED
#define F_TP  HTTP_SCAN_F_TRACEPARENT

/* ---- requests ---- */

static const char get_tp[] = "GET /api/items?id=7&x=y HTTP/1.1\r\n"
			     "Host: example.com:8080\r\n"
			     "User-Agent: curl/7.88.1\r\n"
			     "Accept: */*\r\n"
			     "traceparent: " TP1 "\r\n"
			     "\r\n";

START_TEST(get_with_traceparent)
{
	struct trace *t = check_str(get_tp, "get");

	ck_assert_uint_eq(t->n, 1);
	expect_head(t, 0, strlen(get_tp), F_CAP | F_TP, "GET", "/api/items?id=7&x=y",
		    TP1);
	ck_assert_uint_eq(t->ev[0].snap.ts_len, 0);
	ck_assert_uint_eq(t->ev[0].snap.extra_present, 0);
	ck_assert(!t->gave_up);
	ck_assert(!t->in_head);
	free(t);
}
END_TEST

START_TEST(lf_only_line_endings)
{
	/* decided: a bare LF ends a line, like CRLF (RFC 9112 §2.2) */
	char buf[sizeof(get_tp)];
	size_t i, o = 0;
	struct trace *t;

	for (i = 0; get_tp[i]; i++)
		if (get_tp[i] != '\r')
			buf[o++] = get_tp[i];
	buf[o] = '\0';
	t = check_str(buf, "lf-only");
	ck_assert_uint_eq(t->n, 1);
	expect_head(t, 0, o, F_CAP | F_TP, "GET", "/api/items?id=7&x=y", TP1);
	free(t);

	/* mixed, and empty lines before the request line are skipped */
	{
		static const char mixed[] =
			"\r\n\nGET /m HTTP/1.1\nHost: a\r\ntraceparent: " TP2 "\n\r\n";

		t = check_str(mixed, "mixed");
		ck_assert_uint_eq(t->n, 1);
		expect_head(t, 0, strlen(mixed), F_CAP | F_TP, "GET", "/m", TP2);
	}
	free(t);
}
END_TEST

static size_t
build_post_pipeline(char *buf, size_t cap, size_t *first_end, size_t *body_len)
{
	/* the body looks like a request with a traceparent: it must be skipped */
	const char *body = "GET /fake HTTP/1.1\r\ntraceparent: " TP2 "\r\n\r\nrest";
	int n1, n2;

	*body_len = strlen(body);
	n1 = snprintf(buf, cap,
		      "POST /submit HTTP/1.1\r\nHost: a\r\nContent-Type: text/plain\r\n"
		      "Content-Length: %zu\r\ntraceparent: " TP1 "\r\n\r\n",
		      *body_len);
	*first_end = (size_t)n1;
	n2 = snprintf(buf + n1, cap - (size_t)n1,
		      "%sGET /second HTTP/1.1\r\nHost: a\r\ntraceparent: " TP2
		      "\r\n\r\n",
		      body);
	return (size_t)(n1 + n2);
}

START_TEST(post_content_length_then_pipelined_get)
{
	char buf[1024];
	size_t first, body, len = build_post_pipeline(buf, sizeof(buf), &first, &body);
	struct trace *t = check_str(buf, "post-cl");

	ck_assert_uint_eq(t->n, 2);
	expect_head(t, 0, first, F_CAP | F_TP | HTTP_SCAN_F_CONTENT_LENGTH, "POST",
		    "/submit", TP1);
	expect_head(t, 1, len, F_CAP | F_TP, "GET", "/second", TP2);
	free(t);
}
END_TEST

/* Bytes spliced out of the stream (http_scan_skip()): body and chunk-data
 * bytes are stepped over as a feed of them would be; anything else gives
 * up. */
START_TEST(skip_spliced_bytes)
{
	static struct http_scan_capture cap;
	static const char put[] =
		"PUT /x HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n";
	static const char rest[] = "\r\n0\r\n\r\nGET /y HTTP/1.1\r\n\r\n";
	char buf[1024];
	size_t first, body, len = build_post_pipeline(buf, sizeof(buf), &first, &body);
	size_t n, second = len - first - body;
	struct http_scan st;

	http_scan_reset(&st);
	ck_assert_int_eq(http_scan_feed(&st, &cfg_std, &cap, buf, first, &n),
			 HTTP_SCAN_HEAD);
	ck_assert_uint_eq(n, first);
	ck_assert_int_eq(http_scan_skip(&st, 3), 0);
	ck_assert(!http_scan_at_start(&st));
	ck_assert_int_eq(http_scan_skip(&st, body - 3), 0);
	ck_assert(http_scan_at_start(&st));
	ck_assert_int_eq(
		http_scan_feed(&st, &cfg_std, &cap, buf + first + body, second, &n),
		HTTP_SCAN_HEAD);
	ck_assert_uint_eq(n, second);
	ck_str_field(cap.target, cap.target_len, "/second");
	ck_str_field(cap.traceparent, cap.traceparent_len, TP2);

	/* More than the body: the next head went by unseen. */
	http_scan_reset(&st);
	ck_assert_int_eq(http_scan_feed(&st, &cfg_std, &cap, buf, first, &n),
			 HTTP_SCAN_HEAD);
	ck_assert_int_eq(http_scan_skip(&st, body + 1), -EPIPE);
	ck_assert(http_scan_gave_up(&st));
	ck_assert_int_eq(http_scan_give_up_reason(&st), HTTP_SCAN_GIVE_UP_CALLER);
	ck_assert_int_eq(http_scan_skip(&st, 1), -EPIPE);

	/* Between messages: nothing, or a head unseen. */
	http_scan_reset(&st);
	ck_assert_int_eq(http_scan_skip(&st, 0), 0);
	ck_assert(http_scan_at_start(&st));
	ck_assert_int_eq(http_scan_skip(&st, 1), -EPIPE);
	ck_assert(http_scan_gave_up(&st));

	/* Chunk data, but not its size line. */
	http_scan_reset(&st);
	ck_assert_int_eq(http_scan_feed(&st, &cfg_std, &cap, put, strlen(put), &n),
			 HTTP_SCAN_HEAD);
	ck_assert_int_eq(http_scan_feed(&st, &cfg_std, &cap, "5\r\n", 3, &n),
			 HTTP_SCAN_MORE);
	ck_assert_int_eq(http_scan_skip(&st, 5), 0);
	ck_assert_int_eq(http_scan_feed(&st, &cfg_std, &cap, rest, strlen(rest), &n),
			 HTTP_SCAN_HEAD);
	ck_assert_uint_eq(n, strlen(rest));
	ck_str_field(cap.target, cap.target_len, "/y");
	ck_assert_int_eq(http_scan_skip(&st, 1), -EPIPE);
}
END_TEST

static const char chunked_req[] = "POST /upload HTTP/1.1\r\n"
				  "Host: a\r\n"
				  "Transfer-Encoding: gzip, Chunked \r\n"
				  "traceparent: " TP1 "\r\n"
				  "\r\n";
static const char chunked_body[] =
	"5;name=value\r\n"
	"hello\r\n"
	"1A ; ext=\"quo;ted\"\r\n"
	"GET / HTTP/1.1\r\n\r\n0\r\n\r\n\r\n" /* 26 bytes of data that look like framing */
	"\r\n"
	"00000003\n" /* leading zeros, bare LF */
	"abc\n"
	"0;last=1\r\n"
	"X-Trailer: yes\r\n"
	"Checksum: 0\r\n"
	"\r\n";
static const char after_chunked[] =
	"GET /after-chunked HTTP/1.1\r\ntraceparent: " TP2 "\r\n\r\n";

START_TEST(chunked_with_extensions_and_trailers)
{
	char buf[1024];
	size_t n1 = strlen(chunked_req), n2 = strlen(chunked_body);
	struct trace *t;

	snprintf(buf, sizeof(buf), "%s%s%s", chunked_req, chunked_body, after_chunked);
	t = check_str(buf, "chunked");
	ck_assert_uint_eq(t->n, 2);
	expect_head(t, 0, n1,
		    F_CAP | F_TP | HTTP_SCAN_F_CHUNKED | HTTP_SCAN_F_TRANSFER_ENCODING,
		    "POST", "/upload", TP1);
	expect_head(t, 1, strlen(buf), F_CAP | F_TP, "GET", "/after-chunked", TP2);
	ck_assert_uint_eq(n2, strlen(chunked_body));
	free(t);

	/* a chunked request with no trailers, then a keep-alive request */
	snprintf(buf, sizeof(buf),
		 "PUT /x HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n"
		 "3\r\nabc\r\n0\r\n\r\nGET /y HTTP/1.1\r\n\r\n");
	t = check_str(buf, "chunked-plain");
	ck_assert_uint_eq(t->n, 2);
	ck_assert(t->ev[0].flags & HTTP_SCAN_F_CHUNKED);
	expect_head(t, 1, strlen(buf), F_CAP, "GET", "/y", "");
	free(t);
}
END_TEST

START_TEST(keep_alive_second_traceparent)
{
	static const char a[] =
		"GET /one HTTP/1.1\r\nHost: h\r\ntraceparent: " TP1 "\r\n\r\n";
	static const char b[] =
		"GET /two HTTP/1.1\r\nHost: h\r\ntraceparent: " TP2 "\r\n\r\n";
	static const char c[] = "GET /three HTTP/1.1\r\nHost: h\r\n\r\n";
	char buf[512];
	struct trace *t;

	snprintf(buf, sizeof(buf), "%s%s%s", a, b, c);
	t = check_str(buf, "keep-alive");
	ck_assert_uint_eq(t->n, 3);
	expect_head(t, 0, strlen(a), F_CAP | F_TP, "GET", "/one", TP1);
	expect_head(t, 1, strlen(a) + strlen(b), F_CAP | F_TP, "GET", "/two", TP2);
	/* no traceparent: nothing left over from the previous request */
	expect_head(t, 2, strlen(buf), F_CAP, "GET", "/three", "");
	free(t);
}
END_TEST

START_TEST(big_header_ignored)
{
	static const char head[] =
		"GET /big HTTP/1.1\r\ntraceparent: " TP1 "\r\nX-Big: ";
	static const char tail[] =
		"\r\n\r\nGET /after HTTP/1.1\r\ntraceparent: " TP2 "\r\n\r\n";
	size_t big = 64 * 1024, n1 = strlen(head), n2 = strlen(tail);
	char *buf = malloc(n1 + big + n2 + 1);
	struct trace *t;

	ck_assert_ptr_nonnull(buf);
	memcpy(buf, head, n1);
	memset(buf + n1, 'a', big);
	memcpy(buf + n1 + big, tail, n2 + 1);
	t = check_splits(&cfg_std, buf, n1 + big + n2, "64k", false);
	ck_assert_uint_eq(t->n, 2);
	/* ignored, but its end was found */
	expect_head(t, 0, n1 + big + 4, HTTP_SCAN_F_OVERSIZED, NULL, NULL, NULL);
	expect_head(t, 1, n1 + big + n2, F_CAP | F_TP, "GET", "/after", TP2);
	free(t);
	free(buf);
}
END_TEST

START_TEST(two_traceparents_invalid)
{
	struct trace *t =
		check_str("GET / HTTP/1.1\r\ntraceparent: " TP1 "\r\nHost: x\r\n"
			  "TraceParent: " TP2 "\r\n\r\n",
			  "dup-tp");

	ck_assert_uint_eq(t->n, 1);
	ck_assert_uint_eq(t->ev[0].flags, F_CAP | F_TP | HTTP_SCAN_F_TRACEPARENT_BAD);
	free(t);
}
END_TEST

START_TEST(tracestate_three_lines)
{
	struct trace *t = check_str("GET / HTTP/1.1\r\ntraceparent: " TP1 "\r\n"
				    "tracestate: a=1 \r\n"
				    "Host: x\r\n"
				    "TraceState:b=2,  c=3\t\r\n"
				    "tracestate:   vendor@sys=x y\r\n\r\n",
				    "ts3");

	ck_assert_uint_eq(t->n, 1);
	ck_assert_uint_eq(t->ev[0].flags, F_CAP | F_TP | HTTP_SCAN_F_TRACESTATE);
	ck_str_field(t->ev[0].snap.ts, t->ev[0].snap.ts_len,
		     "a=1,b=2,  c=3,vendor@sys=x y");
	ck_assert(!t->ev[0].snap.ts_truncated);
	free(t);
}
END_TEST

START_TEST(tracestate_truncated_at_member)
{
	/* 3 lines of 5 members of 38 bytes: 584 bytes joined */
	static const char v[] = "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv";
	const size_t mlen = 4 + strlen(v),
		     fit = (HTTP_SCAN_TRACESTATE_MAX + 1) / (mlen + 1);
	char buf[2048], line[256], key[8];
	size_t o, m, l;
	struct trace *t;

	o = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\n");
	for (l = 0; l < 3; l++) {
		size_t lo = 0;

		for (m = 0; m < 5; m++)
			lo += (size_t)snprintf(line + lo, sizeof(line) - lo,
					       "%sk%zu%zu=%s", m ? "," : "", l, m, v);
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "tracestate: %s\r\n",
				      line);
	}
	o += (size_t)snprintf(buf + o, sizeof(buf) - o, "\r\n");
	t = check_str(buf, "ts-long");
	ck_assert_uint_eq(t->n, 1);
	ck_assert(t->ev[0].snap.ts_truncated);
	/* as many whole members as fit in 512 bytes, the last one complete */
	ck_assert_uint_eq(fit, 13);
	ck_assert_uint_eq(t->ev[0].snap.ts_len, fit * (mlen + 1) - 1);
	snprintf(key, sizeof(key), "k%zu%zu=", (fit - 1) / 5, (fit - 1) % 5);
	ck_assert_int_eq(memcmp(t->ev[0].snap.ts + t->ev[0].snap.ts_len - mlen, key, 4),
			 0);
	ck_assert_int_eq(memcmp(t->ev[0].snap.ts + t->ev[0].snap.ts_len - strlen(v), v,
				strlen(v)),
			 0);
	free(t);
}
END_TEST

/* Lists longer than the 512 bytes the capture keeps: W3C discards a list
 * with an invalid member or more than 32 members whole, so the scanner
 * checks the bytes it no longer stores (HTTP_SCAN_F_TRACESTATE_BAD), across
 * lines and reads.  What a request gets (preload/request-ctx.c) is: no
 * tracestate if the flag is set or the stored list does not parse, else
 * the stored list; that must be "none" exactly when the whole list is
 * invalid. */

struct long_ts_case {
	const char *name;
	const char *lines[4]; /* "{a-b}": members a..b; anything else literal */
	bool valid;
	bool truncated;
};

static const struct long_ts_case long_ts_cases[] = {
	{"33 members (692 B)", {"{1-33}"}, false, true},
	{"32 valid + INVALID=1 (681 B)", {"{1-32},INVALID=1"}, false, true},
	{"33 members in 3 lines", {"{1-11}", "{12-22}", "{23-33}"}, false, true},
	{"33rd member in a later line", {"{1-32}", "x=1"}, false, true},
	{"bad member in a line past the cut", {"{1-25}", "Bad=1"}, false, true},
	{"bad member past byte 512, same line",
	 {"{1-25},bad member=1,{26-27}"},
	 false,
	 true},
	{"tab inside a value past byte 512", {"{1-25},t=a\tb"}, false, true},
	{"key without '=' at the end", {"{1-25},k"}, false, true},
	{"empty value past the cut", {"{1-24}", "a=1,e=,b=2"}, false, true},
	{"257-byte value past the cut",
	 {"{1-20}", "v="
		    "{v257}"},
	 false,
	 true},
	{"bad member in the stored part", {"{1-3},Bad=1,{4-30}"}, false, true},
	{"30 members (629 B)", {"{1-30}"}, true, true},
	{"32 members in 4 lines",
	 {"{1-8}", "{9-16}", "{17-24}", "{25-32}"},
	 true,
	 true},
	{"32 members, empty ones and OWS past the cut",
	 {"{1-25}", " , ,{26-30} ,\t", ",, {31-32}  "},
	 true,
	 true},
	{"256-byte value past the cut",
	 {"{1-20}", "v="
		    "{v256}"},
	 true,
	 true},
	{"overflow by trailing OWS only, then a member",
	 {"{1-24}                              ", "b=2"},
	 true,
	 false},
	{"overflow by trailing OWS only, then a 33rd member",
	 {"{1-24}                              ", "b=2", "x=1,{27-33}"},
	 false,
	 true},
};

/* Expand a case's line: "{a-b}" members, "{vN}" a value of N 'v's. */
static size_t
long_ts_line(const char *t, char *out, size_t cap)
{
	size_t len = 0;

	while (*t) {
		unsigned a, b, n;
		int used = 0;

		if (sscanf(t, "{%u-%u}%n", &a, &b, &used) == 2 && used > 0) {
			len += test_ts_members(out + len, cap - len, a, b);
			t += used;
		} else if (sscanf(t, "{v%u}%n", &n, &used) == 1 && used > 0) {
			ck_assert_uint_lt(len + n, cap);
			memset(out + len, 'v', n);
			len += n;
			t += used;
		} else {
			ck_assert_uint_lt(len + 1, cap);
			out[len++] = *t++;
		}
	}
	out[len] = '\0';
	return len;
}

START_TEST(tracestate_long_lists_checked)
{
	const struct long_ts_case *c = &long_ts_cases[_i];
	static const char *const eols[] = {"\r\n", "\n"};
	char lines[4][1024], head[8192];
	const char *lp[4];
	size_t lens[4], n = 0, total = 0;
	struct w3c_tracestate ts;

	while (n < 4 && c->lines[n]) {
		lens[n] = long_ts_line(c->lines[n], lines[n], sizeof(lines[n]));
		/* the list as the scanner sees it: OWS ends a line */
		while (lens[n] &&
		       (lines[n][lens[n] - 1] == ' ' || lines[n][lens[n] - 1] == '\t'))
			lens[n]--;
		lp[n] = lines[n];
		total += lens[n] + (n > 0);
		n++;
	}
	/* 17 cases of heads of ~1 KiB, twice: a sample of the split points
	 * (every byte is still a read boundary in the 1-byte chunks) */
	sweep_stride = 11;
	/* every case is about lists longer than what the capture keeps */
	ck_assert_uint_gt(total + 40, HTTP_SCAN_TRACESTATE_MAX);
	ck_assert_msg((w3c_tracestate_parse(lp, lens, n, &ts) == 0) == c->valid,
		      "case '%s': the whole list's verdict", c->name);

	for (size_t e = 0; e < 2; e++) {
		const char *eol = eols[e];
		size_t o = 0, stored_len;
		const char *stored;
		struct trace *t;
		bool dropped;

		o += (size_t)snprintf(head + o, sizeof(head) - o,
				      "GET / HTTP/1.1%straceparent: %s%s", eol, TP1,
				      eol);
		for (size_t l = 0; l < n; l++)
			o += (size_t)snprintf(
				head + o, sizeof(head) - o, "tracestate: %s%sHost: x%s",
				long_ts_line(c->lines[l], lines[l], sizeof(lines[l]))
					? lines[l]
					: "",
				eol, eol);
		o += (size_t)snprintf(head + o, sizeof(head) - o, "%s", eol);
		ck_assert_uint_lt(o, sizeof(head) - 1);
		t = check_str(head, c->name);
		ck_assert_uint_eq(t->n, 1);
		ck_assert(t->ev[0].flags & HTTP_SCAN_F_TRACESTATE);
		stored = t->ev[0].snap.ts;
		stored_len = t->ev[0].snap.ts_len;
		ck_assert_uint_le(stored_len, HTTP_SCAN_TRACESTATE_MAX);
		dropped = (t->ev[0].flags & HTTP_SCAN_F_TRACESTATE_BAD) ||
			  w3c_tracestate_parse(&stored, &stored_len, 1, &ts) != 0;
		ck_assert_msg(dropped == !c->valid,
			      "case '%s' (%s): tracestate %s, flags %#x, stored '%.*s'",
			      c->name, e ? "LF" : "CRLF", dropped ? "dropped" : "kept",
			      t->ev[0].flags, (int)stored_len, stored);
		/* a valid list keeps the cut at whole members */
		if (c->valid)
			ck_assert(t->ev[0].snap.ts_truncated == c->truncated);
		/* past the stored bytes, only the flag can tell */
		if (!c->valid && strcmp(c->name, "bad member in the stored part") != 0)
			ck_assert_msg(t->ev[0].flags & HTTP_SCAN_F_TRACESTATE_BAD,
				      "case '%s': no TRACESTATE_BAD", c->name);
		/* the traceparent is unaffected */
		ck_assert(!(t->ev[0].flags & HTTP_SCAN_F_TRACEPARENT_BAD));
		ck_str_field(t->ev[0].snap.tp, t->ev[0].snap.tp_len, TP1);
		free(t);
	}
	sweep_stride = 0;
}
END_TEST

/* The stored list ends exactly at byte 512 (bare LF: nothing after it on
 * its line), so the separator of the next line is the first byte not
 * stored; a 33rd member there must still count. */
START_TEST(tracestate_cut_at_512)
{
	char list[1024], head[2048];
	size_t len = test_ts_members(list, sizeof(list), 1, 24), pad;
	struct trace *t;

	/* 24 members are 503 bytes: ",z=123456" makes 512 */
	ck_assert_uint_eq(len, 503);
	pad = (size_t)snprintf(list + len, sizeof(list) - len, ",z=123456");
	ck_assert_uint_eq(len + pad, HTTP_SCAN_TRACESTATE_MAX);
	snprintf(head, sizeof(head),
		 "GET / HTTP/1.1\ntracestate: %s\ntracestate: a=1\n\n", list);
	t = check_str(head, "ts-512-valid");
	ck_assert_uint_eq(t->ev[0].flags, F_CAP | HTTP_SCAN_F_TRACESTATE);
	ck_assert_uint_eq(t->ev[0].snap.ts_len, HTTP_SCAN_TRACESTATE_MAX);
	ck_assert(t->ev[0].snap.ts_truncated);
	free(t);

	snprintf(head, sizeof(head),
		 "GET / HTTP/1.1\ntracestate: %s\ntracestate: a=1,%s\n\n", list,
		 "b=2,c=3,d=4,e=5,f=6,g=7,h=8");
	/* 25 + 8 = 33 members */
	t = check_str(head, "ts-512-33");
	ck_assert_uint_eq(t->ev[0].flags,
			  F_CAP | HTTP_SCAN_F_TRACESTATE | HTTP_SCAN_F_TRACESTATE_BAD);
	free(t);

	snprintf(head, sizeof(head),
		 "GET / HTTP/1.1\ntracestate: %s\ntracestate: Z=1\n\n", list);
	t = check_str(head, "ts-512-bad");
	ck_assert_uint_eq(t->ev[0].flags,
			  F_CAP | HTTP_SCAN_F_TRACESTATE | HTTP_SCAN_F_TRACESTATE_BAD);
	free(t);
}
END_TEST

/* Past 512 bytes the list is cut as W3C's truncation policy says: OWS
 * does not count towards the 512 characters (a list of 499 sent with ", "
 * is kept whole, normalised: old, cut to its first 474), and an entry over
 * 128 characters goes first (old: kept, and the small entries after it
 * dropped). */
START_TEST(tracestate_w3c_truncation)
{
	char list[2048], want[1024], head[4096];
	struct trace *t;
	size_t w = test_ts_members(want, sizeof(want), 1, 24);

	/* 24 members of 20 characters: 503, and 526 bytes with ", " */
	ck_assert_uint_eq(w, 503);
	ck_assert_uint_gt(test_ts_spaced(list, sizeof(list), want),
			  HTTP_SCAN_TRACESTATE_MAX);
	snprintf(head, sizeof(head), "GET / HTTP/1.1\r\ntracestate: %s\r\n\r\n", list);
	t = check_str(head, "ts-ows");
	ck_assert_uint_eq(t->ev[0].flags, F_CAP | HTTP_SCAN_F_TRACESTATE);
	ck_str_field(t->ev[0].snap.ts, t->ev[0].snap.ts_len, want);
	ck_assert(!t->ev[0].snap.ts_truncated);
	free(t);

	/* a 205-character entry, then 16 of 20: the long one is dropped */
	test_ts_members(want, sizeof(want), 1, 16);
	snprintf(head, sizeof(head),
		 "GET / HTTP/1.1\r\ntracestate: big=%0201d,%s\r\n\r\n", 0, want);
	t = check_str(head, "ts-long-entry");
	ck_assert_uint_eq(t->ev[0].flags, F_CAP | HTTP_SCAN_F_TRACESTATE);
	ck_str_field(t->ev[0].snap.ts, t->ev[0].snap.ts_len, want);
	ck_assert(t->ev[0].snap.ts_truncated);
	free(t);
}
END_TEST

START_TEST(odd_case_names_and_extras)
{
	struct trace *t = check_str("DELETE /r/1 HTTP/1.1\r\n"
				    "TrAcEpArEnT:" TP1 "\r\n"
				    "X-REQUEST-ID:  abc-123 \r\n"
				    "x-request-id: def\r\n"
				    "trace: t1\r\n"
				    "TRACE : not-a-match\r\n"
				    "x-request-idx: nope\r\n"
				    "CONTENT-length: 3\r\n\r\nxyz"
				    "GET /n HTTP/1.1\r\n\r\n",
				    "odd-case");

	ck_assert_uint_eq(t->n, 2);
	ck_assert_uint_eq(t->ev[0].flags, F_CAP | F_TP | HTTP_SCAN_F_CONTENT_LENGTH);
	ck_str_field(t->ev[0].snap.method, t->ev[0].snap.method_len, "DELETE");
	ck_str_field(t->ev[0].snap.tp, t->ev[0].snap.tp_len, TP1);
	ck_assert_uint_eq(t->ev[0].snap.extra_present, 3);
	ck_str_field(t->ev[0].snap.extra[0], t->ev[0].snap.extra_len[0],
		     "abc-123, def");
	ck_str_field(t->ev[0].snap.extra[1], t->ev[0].snap.extra_len[1], "t1");
	expect_head(t, 1,
		    strlen("DELETE /r/1 HTTP/1.1\r\nTrAcEpArEnT:" TP1
			   "\r\nX-REQUEST-ID:  abc-123 \r\nx-request-id: def\r\n"
			   "trace: t1\r\nTRACE : not-a-match\r\nx-request-idx: nope\r\n"
			   "CONTENT-length: 3\r\n\r\nxyzGET /n HTTP/1.1\r\n\r\n"),
		    F_CAP, "GET", "/n", "");
	free(t);
}
END_TEST

START_TEST(obs_fold)
{
	struct trace *t;

	/* a folded unrelated header: noted, traceparent still fine */
	t = check_str("GET / HTTP/1.1\r\nX-Long: a\r\n  b\r\n\tc\r\ntraceparent: " TP1
		      "\r\n\r\n",
		      "fold-other");
	ck_assert_uint_eq(t->ev[0].flags, F_CAP | F_TP | HTTP_SCAN_F_OBS_FOLD);
	ck_str_field(t->ev[0].snap.tp, t->ev[0].snap.tp_len, TP1);
	free(t);

	/* folded traceparent: invalid */
	t = check_str("GET / HTTP/1.1\r\ntraceparent: " TP1 "\r\n -01\r\n\r\n",
		      "fold-tp");
	ck_assert_uint_eq(t->ev[0].flags, F_CAP | F_TP | HTTP_SCAN_F_OBS_FOLD |
						  HTTP_SCAN_F_TRACEPARENT_BAD);
	free(t);

	/* folded tracestate and extra */
	t = check_str(
		"GET / HTTP/1.1\r\ntracestate: a=1\r\n ,b=2\r\nx-request-id: q\r\n"
		"\t r\r\n\r\n",
		"fold-ts");
	ck_assert_uint_eq(t->ev[0].flags, F_CAP | HTTP_SCAN_F_TRACESTATE |
						  HTTP_SCAN_F_TRACESTATE_BAD |
						  HTTP_SCAN_F_OBS_FOLD);
	ck_assert_uint_eq(t->ev[0].snap.extra_bad, 1);
	free(t);

	/* whitespace right after the request line: skipped */
	t = check_str("GET / HTTP/1.1\r\n x: y\r\ntraceparent: " TP1 "\r\n\r\n",
		      "fold-first");
	ck_assert_uint_eq(t->ev[0].flags, F_CAP | F_TP | HTTP_SCAN_F_OBS_FOLD);
	free(t);

	/* folded Content-Length: framing unknown, give up after the head */
	t = check_str("POST / HTTP/1.1\r\nContent-Length: 5\r\n 5\r\n\r\n12345GET / "
		      "HTTP/1.1\r\n\r\n",
		      "fold-cl");
	ck_assert_uint_eq(t->n, 1);
	ck_assert(t->ev[0].flags & HTTP_SCAN_F_BAD_FRAMING);
	ck_assert(t->gave_up);
	ck_assert_int_eq(t->reason, HTTP_SCAN_GIVE_UP_FRAMING);
	free(t);
}
END_TEST

START_TEST(http10)
{
	struct trace *t =
		check_str("GET /old HTTP/1.0\r\ntraceparent:   " TP1 "   \r\n\r\n"
			  "POST /old2 HTTP/1.0\r\nContent-Length: 2\r\n\r\nhi",
			  "http10");

	ck_assert_uint_eq(t->n, 2);
	expect_head(t, 0, 19 + 13 + 2 + 55 + 5 + 2, F_CAP | F_TP | HTTP_SCAN_F_HTTP10,
		    "GET", "/old", TP1);
	ck_assert_uint_eq(t->ev[1].flags,
			  F_CAP | HTTP_SCAN_F_HTTP10 | HTTP_SCAN_F_CONTENT_LENGTH);
	ck_assert(!t->gave_up);
	ck_assert(!t->in_head);
	free(t);
}
END_TEST

START_TEST(traceparent_values)
{
	struct trace *t;

	/* longer than 64: the first 64 bytes are kept (validity is decided
	 * by them exactly) */
	t = check_str("GET / HTTP/1.1\r\ntraceparent: " TP1
		      "-and-a-lot-more-than-sixty-four-bytes\r\n\r\n",
		      "tp-long");
	ck_str_field(t->ev[0].snap.tp, t->ev[0].snap.tp_len, TP1 "-and-a-lo");
	free(t);

	/* empty value; NUL and spaces inside are kept */
	t = check_str("GET / HTTP/1.1\r\ntraceparent:\r\n\r\n", "tp-empty");
	ck_assert_uint_eq(t->ev[0].flags, F_CAP | F_TP);
	ck_assert_uint_eq(t->ev[0].snap.tp_len, 0);
	free(t);

	t = check_splits(&cfg_std, "GET / HTTP/1.1\r\ntraceparent: a\0b c \r\n\r\n", 39,
			 "tp-nul", true);
	ck_assert_uint_eq(t->ev[0].snap.tp_len, 5);
	ck_assert_int_eq(memcmp(t->ev[0].snap.tp, "a\0b c", 5), 0);
	free(t);

	/* control bytes where a name has '-': case folding must not map
	 * them (CR | 0x20 == '-') */
	{
		static const char nm[] = "GET / HTTP/1.1\r\nContent\rLength: 5\r\n"
					 "x\rrequest-id: n\r\nX-Request\rId: n\r\n"
					 "Transfer\rencoding: chunked\r\n\r\nGET";

		t = check_splits(&cfg_std, nm, sizeof(nm) - 1, "near-miss", true);
	}
	ck_assert_uint_eq(t->n, 1);
	ck_assert_uint_eq(t->ev[0].flags, F_CAP);
	ck_assert_uint_eq(t->ev[0].snap.extra_present, 0);
	ck_assert(t->in_head);
	free(t);

	/* a name that only starts like one of ours */
	t = check_str("GET / HTTP/1.1\r\ntraceparentx: " TP1 "\r\ntrace-parent: " TP1
		      "\r\ntraceparen: x\r\n\r\n",
		      "tp-lookalike");
	ck_assert_uint_eq(t->ev[0].flags, F_CAP);
	free(t);
}
END_TEST

START_TEST(long_target)
{
	char buf[1024];
	struct trace *t;
	size_t n;

	n = (size_t)snprintf(buf, sizeof(buf), "GET /%0300d?q=1  HTTP/1.1\r\n\r\n", 7);
	t = check_str(buf, "long-target");
	ck_assert_uint_eq(t->n, 1);
	ck_assert_uint_eq(t->ev[0].off, n);
	ck_assert_uint_eq(t->ev[0].snap.target_len, HTTP_SCAN_TARGET_MAX);
	ck_assert_int_eq(memcmp(t->ev[0].snap.target, buf + 4, HTTP_SCAN_TARGET_MAX),
			 0);
	free(t);

	/* exactly HTTP_SCAN_TARGET_MAX bytes: whole */
	n = (size_t)snprintf(buf, sizeof(buf), "GET /%0255d HTTP/1.1\r\n\r\n", 7);
	t = check_str(buf, "target-max");
	ck_assert_uint_eq(t->n, 1);
	ck_assert_uint_eq(t->ev[0].off, n);
	ck_assert_uint_eq(t->ev[0].snap.target_len, HTTP_SCAN_TARGET_MAX);
	ck_assert_int_eq(memcmp(t->ev[0].snap.target, buf + 4, HTTP_SCAN_TARGET_MAX),
			 0);
	free(t);

	/* other target forms; extra spaces between the parts */
	{
		static const char o[] = "OPTIONS * HTTP/1.1\r\n\r\n";
		static const char g[] = "GET  http://h:1/p?x#y HTTP/1.1\r\n\r\n";
		static const char c[] = "CONNECT h:443 HTTP/1.1\r\n\r\n";

		snprintf(buf, sizeof(buf), "%s%s%s", o, g, c);
		t = check_str(buf, "target-forms");
		ck_assert_uint_eq(t->n, 3);
		expect_head(t, 0, strlen(o), F_CAP, "OPTIONS", "*", "");
		expect_head(t, 1, strlen(o) + strlen(g), F_CAP, "GET",
			    "http://h:1/p?x#y", "");
		expect_head(t, 2, strlen(buf), F_CAP | HTTP_SCAN_F_CONNECT, "CONNECT",
			    "h:443", "");
	}
	free(t);

	/* only the method CONNECT itself marks a tunnel to come; the flag is
	 * the head's, not the connection's */
	{
		static const char x[] = "CONNECTX h:443 HTTP/1.1\r\n\r\n";
		static const char c[] = "CONNECT h:443 HTTP/1.1\r\n"
					"traceparent: " TP1 "\r\n\r\n";
		static const char g[] = "GET / HTTP/1.1\r\n\r\n";

		snprintf(buf, sizeof(buf), "%s%s%s", x, c, g);
		t = check_str(buf, "connect-flag");
		ck_assert_uint_eq(t->n, 3);
		expect_head(t, 0, strlen(x), F_CAP, "CONNECTX", "h:443", "");
		expect_head(t, 1, strlen(x) + strlen(c),
			    F_CAP | F_TP | HTTP_SCAN_F_CONNECT, "CONNECT", "h:443",
			    TP1);
		expect_head(t, 2, strlen(buf), F_CAP, "GET", "/", "");
	}
	free(t);
}
END_TEST

/* Targets of every length around the whole-head pass's copies (one
 * 16-byte move below 16 bytes when 16 can be read before the end of the
 * read, 16-byte moves up to 64, memcpy() beyond), in heads where the rest
 * of the read is long, and in heads so short that the 16 bytes after the
 * target's start run past the read (the copy must then not read them:
 * feed_exact() gives the scanner a buffer of exactly the read's size). */
START_TEST(target_lengths)
{
	char tg[128], buf[512];
	struct trace *t;
	size_t L, k;
	int v;

	for (L = 1; L <= 80; L++) {
		tg[0] = '/';
		for (k = 1; k < L; k++)
			tg[k] = (char)('a' + k % 26);
		tg[L] = '\0';
		for (v = 0; v < 3; v++) {
			/* 0: short LF-only head, 1: CRLF with Host, 2: a long head */
			if (v == 0)
				snprintf(buf, sizeof(buf), "GET %s HTTP/1.1\n\n", tg);
			else if (v == 1)
				snprintf(buf, sizeof(buf),
					 "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", tg);
			else
				snprintf(buf, sizeof(buf),
					 "PUT %s HTTP/1.0\r\nHost: 127.0.0.1:8080\r\n"
					 "traceparent: " TP1 "\r\n\r\n",
					 tg);
			t = check_splits(&cfg_std, buf, strlen(buf), "target-len",
					 false);
			ck_assert_uint_eq(t->n, 1);
			expect_head(t, 0, strlen(buf),
				    v == 2 ? F_CAP | F_TP | HTTP_SCAN_F_HTTP10 : F_CAP,
				    v == 2 ? "PUT" : "GET", tg, v == 2 ? TP1 : "");
			free(t);
		}
	}
}
END_TEST

/* Trailing whitespace of a traceparent value taken whole: the usual end
 * (one CR after a value byte) has a shortcut that must agree with the
 * general trim of SP, HTAB and CR, for every value length around the
 * 16-byte moves of its copy. */
START_TEST(traceparent_value_ends)
{
	static const char *const ends[] = {"\r\n",   "\n",       " \r\n",   "\t\r\n",
					   "\r\r\n", " \t \r\n", "\r \r\n", "\t\n"};
	char val[80], buf[256];
	struct trace *t;
	size_t L, k, e;

	for (L = 0; L <= 70; L++) {
		for (k = 0; k < L; k++)
			val[k] = (char)('0' + k % 10);
		/* a space inside, kept */
		if (L > 2)
			val[L / 2] = ' ';
		val[L] = '\0';
		for (e = 0; e < sizeof(ends) / sizeof(ends[0]); e++) {
			snprintf(buf, sizeof(buf),
				 "GET /small.html HTTP/1.1\r\n"
				 "traceparent: %s%s\r\n",
				 val, ends[e]);
			t = check_splits(&cfg_std, buf, strlen(buf), "tp-ends", false);
			ck_assert_uint_eq(t->n, 1);
			ck_assert_uint_eq(t->ev[0].flags, F_CAP | F_TP);
			ck_assert_uint_eq(t->ev[0].snap.tp_len,
					  L < HTTP_SCAN_TRACEPARENT_MAX
						  ? L
						  : HTTP_SCAN_TRACEPARENT_MAX);
			ck_assert_int_eq(
				memcmp(t->ev[0].snap.tp, val, t->ev[0].snap.tp_len), 0);
			free(t);
		}
	}
	/* 55 bytes then CRLF (a version-00 value's line, checked where its
	 * end should be), with an LF inside: the line ends at that LF */
	for (k = 0; k < 55; k++) {
		for (L = 0; L < 55; L++)
			val[L] = (char)('0' + L % 10);
		val[k] = '\n';
		val[55] = '\0';
		snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\ntraceparent: %s\r\n\r\n",
			 val);
		t = check_splits(&cfg_std, buf, strlen(buf), "tp-lf-inside", false);
		ck_assert_uint_eq(t->n, 1);
		ck_assert_uint_eq(t->ev[0].flags, F_CAP | F_TP);
		ck_assert_uint_eq(t->ev[0].snap.tp_len, k);
		free(t);
	}
	/* A valid value, OWS from its 56th character, then more: invalid
	 * (version 00 is 55 characters; a later one needs '-' there).  Cut
	 * to 64 bytes, the parser would trim that OWS and take the value:
	 * such a cut is kept as length 0, an invalid value. */
	for (L = 57; L <= 76; L++) {
		for (e = 0; e < 2; e++) {
			memcpy(val, TP1, 55);
			memset(val + 55, e ? '\t' : ' ', L - 56);
			val[L - 1] = 'x';
			val[L] = '\0';
			snprintf(buf, sizeof(buf),
				 "GET / HTTP/1.1\r\ntraceparent: %s\r\n\r\n", val);
			t = check_splits(&cfg_std, buf, strlen(buf), "tp-ows-cut",
					 false);
			ck_assert_uint_eq(t->n, 1);
			ck_assert_uint_eq(t->ev[0].snap.tp_len,
					  L <= HTTP_SCAN_TRACEPARENT_MAX ? L : 0);
			free(t);
		}
	}
	/* a value of one CR only: trimmed to empty */
	t = check_str("GET / HTTP/1.1\r\ntraceparent: \r\r\n\r\n", "tp-cr");
	ck_assert_uint_eq(t->ev[0].flags, F_CAP | F_TP);
	ck_assert_uint_eq(t->ev[0].snap.tp_len, 0);
	free(t);
}
END_TEST

/* ---- framing errors ---- */

START_TEST(bad_framing)
{
	static const char *const cases[] = {
		"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: "
		"chunked\r\n\r\n",
		"POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n",
		"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
		"POST / HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n",
		"POST / HTTP/1.1\r\nContent-Length:\r\n\r\n",
		"POST / HTTP/1.1\r\nContent-Length: 3\r\ncontent-length: 3\r\n\r\n",
		"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
		"gzip\r\n\r\n",
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked;x=1\r\n\r\n",
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunkedx\r\n\r\n",
		"POST / HTTP/1.1\r\nTransfer-Encoding: \r\n\r\n",
		"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
	};
	unsigned i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[256], name[32];
		struct trace *t;

		snprintf(buf, sizeof(buf), "%s0\r\n\r\nGET / HTTP/1.1\r\n\r\n",
			 cases[i]);
		snprintf(name, sizeof(name), "bad-framing-%u", i);
		t = check_str(buf, name);
		ck_assert_msg(t->n == 1, "%s: %u events", name, t->n);
		ck_assert_msg(t->ev[0].flags & HTTP_SCAN_F_BAD_FRAMING, "%s", name);
		ck_assert_uint_eq(t->ev[0].off, strlen(cases[i]));
		ck_assert_int_eq(t->ev[0].reason, HTTP_SCAN_GIVE_UP_FRAMING);
		ck_assert(t->gave_up);
		free(t);
	}

	/* Accepted variants: TE list ending in chunked, OWS, CL 0. */
	{
		struct trace *t = check_str("POST / HTTP/1.1\r\nTransfer-Encoding: "
					    "gzip,,\r\nTransfer-Encoding: "
					    ", chunked ,\r\n\r\n0\r\n\r\nPOST / "
					    "HTTP/1.1\r\nContent-Length:  0 \r\n\r\n"
					    "GET / HTTP/1.1\r\n\r\n",
					    "te-list");
		ck_assert_uint_eq(t->n, 3);
		ck_assert(t->ev[0].flags & HTTP_SCAN_F_CHUNKED);
		ck_assert(!t->gave_up);
		free(t);
	}
}
END_TEST

START_TEST(bad_chunks)
{
	static const struct {
		const char *body;
		size_t off; /* of the offending byte in body */
	} cases[] = {
		{"zz\r\n", 0},
		{"\r\n", 0},
		{"5x\r\nhello\r\n", 1},
		{"5\r\nhelloX\r\n", 8},
		{"5\r\nhello\rX", 9},
		{"0\r\nTrailer: x\r\n\rX", 16},
		{"fffffffffffffffff\r\n", 15}, /* would pass 2^63 */
	};
	static const char head[] =
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
	unsigned i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[256], name[32];
		struct trace *t;

		snprintf(buf, sizeof(buf), "%s%s", head, cases[i].body);
		snprintf(name, sizeof(name), "bad-chunk-%u", i);
		t = check_str(buf, name);
		ck_assert_msg(t->n == 2, "%s: %u events", name, t->n);
		expect_gave_up(t, 1, strlen(head) + cases[i].off,
			       HTTP_SCAN_GIVE_UP_MALFORMED);
		free(t);
	}
}
END_TEST

/* ---- not HTTP ---- */

static struct trace *
check_bytes(const void *d, size_t n, const char *name)
{
	return check_splits(&cfg_std, d, n, name, true);
}

START_TEST(tls_client_hello)
{
	static const uint8_t hello[] = {
		0x16, 0x03, 0x01, 0x00, 0x2f, 0x01, 0x00, 0x00, 0x2b, 0x03,
		0x03, 0x47, 0x45, 0x54, 0x20, 0x2f, 0x20, 0x48, 0x54, 0x54,
		0x50, 0x2f, 0x31, 0x2e, 0x31, 0x0d, 0x0a, 0x0d, 0x0a, 0x00,
		0x00, 0x02, 0x13, 0x01, 0x01, 0x00, 0x00, 0x00,
	};
	struct trace *t = check_bytes(hello, sizeof(hello), "tls");

	ck_assert_uint_eq(t->n, 1);
	expect_gave_up(t, 0, 0, HTTP_SCAN_GIVE_UP_TLS);
	free(t);
}
END_TEST

START_TEST(http2_preface)
{
	static const char pre[] =
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x12\x04\x00";
	struct trace *t = check_bytes(pre, sizeof(pre) - 1, "h2");

	ck_assert_uint_eq(t->n, 1);
	expect_gave_up(t, 0, 3, HTTP_SCAN_GIVE_UP_HTTP2);
	free(t);

	/* h2c upgrade: the head is reported, then the preface gives up */
	{
		static const char up[] =
			"GET / HTTP/1.1\r\nConnection: Upgrade, HTTP2-Settings\r\n"
			"Upgrade: h2c\r\n\r\n";
		char buf[256];

		snprintf(buf, sizeof(buf), "%sPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", up);
		t = check_str(buf, "h2c");
		ck_assert_uint_eq(t->n, 2);
		expect_head(t, 0, strlen(up), F_CAP, "GET", "/", "");
		expect_gave_up(t, 1, strlen(up) + 3, HTTP_SCAN_GIVE_UP_HTTP2);
	}
	free(t);

	/* "HTTP/2.0" with another method */
	t = check_str("GET / HTTP/2.0\r\n\r\n", "v2");
	expect_gave_up(t, 0, 11, HTTP_SCAN_GIVE_UP_NOT_HTTP);
	free(t);
}
END_TEST

/* Streams that are not HTTP/1.x, or not well-formed: the first event
 * gives up, at off, for why. */
struct gives_up_case {
	const char *name;
	const char *s;
	size_t len; /* 0: strlen(s) */
	size_t off;
	enum http_scan_give_up why;
};

static void
check_gives_up(const struct gives_up_case *c)
{
	struct trace *t = check_bytes(c->s, c->len ? c->len : strlen(c->s), c->name);

	expect_gave_up(t, 0, c->off, c->why);
	free(t);
}

static const struct gives_up_case text_cases[] = {
	{"resp", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n", 0, 0,
	 HTTP_SCAN_GIVE_UP_NOT_HTTP},
	{"resp-inline", "PING\r\n", 0, 4, HTTP_SCAN_GIVE_UP_NOT_HTTP},
	{"resp-inline-set", "SET key value\r\n", 0, 8, HTTP_SCAN_GIVE_UP_NOT_HTTP},
	{"smtp", "EHLO mail.example.com\r\nMAIL FROM:<a@b>\r\n", 0, 21,
	 HTTP_SCAN_GIVE_UP_NOT_HTTP},
	{"lowercase-method", "get / HTTP/1.1\r\n\r\n", 0, 0,
	 HTTP_SCAN_GIVE_UP_NOT_HTTP},
	{"method-too-long", "ABCDEFGHIJKLMNOPQRSTUVWXYZ / HTTP/1.1\r\n\r\n", 0,
	 HTTP_SCAN_METHOD_MAX, HTTP_SCAN_GIVE_UP_NOT_HTTP},
	{"http09", "GET /\r\n\r\n", 0, 5, HTTP_SCAN_GIVE_UP_NOT_HTTP},
	{"trailing-space", "GET / HTTP/1.1 \r\n\r\n", 0, 14,
	 HTTP_SCAN_GIVE_UP_NOT_HTTP},
	{"bare-cr", "GET / HTTP/1.1\rX\n\r\n", 0, 15, HTTP_SCAN_GIVE_UP_NOT_HTTP},
	{"bare-cr-end", "GET / HTTP/1.1\r\nA: b\r\n\rX", 0, 23,
	 HTTP_SCAN_GIVE_UP_MALFORMED},
};

START_TEST(resp_and_text_protocols)
{
	check_gives_up(&text_cases[_i]);
}
END_TEST

START_TEST(websocket_after_upgrade)
{
	struct trace *t;

	/* WebSocket frames after an upgraded head */
	t = check_bytes(
		"GET /ws HTTP/1.1\r\nUpgrade: websocket\r\n\r\n\x81\x85\x37\xfa", 44,
		"websocket");
	ck_assert_uint_eq(t->n, 2);
	expect_gave_up(t, 1, 40, HTTP_SCAN_GIVE_UP_NOT_HTTP);
	free(t);
}
END_TEST

static const struct gives_up_case nul_cases[] = {
	{"nul-first", "\0GET / HTTP/1.1\r\n\r\n", 19, 0, HTTP_SCAN_GIVE_UP_NOT_HTTP},
	{"nul-target", "GET /a\0b HTTP/1.1\r\n\r\n", 21, 6, HTTP_SCAN_GIVE_UP_NOT_HTTP},
	{"nul-method", "GE\0T / HTTP/1.1\r\n\r\n", 19, 2, HTTP_SCAN_GIVE_UP_NOT_HTTP},
	{"all-nul", "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16, 0,
	 HTTP_SCAN_GIVE_UP_NOT_HTTP},
};

START_TEST(nul_bytes)
{
	check_gives_up(&nul_cases[_i]);
}
END_TEST

START_TEST(nul_in_header)
{
	struct trace *t;

	/* in a header line it is just a byte of an uninteresting header */
	t = check_bytes("GET / HTTP/1.1\r\nX\0: \0\r\n\0\0: x\r\n\r\n", 32,
			"nul-header");
	ck_assert_uint_eq(t->n, 1);
	ck_assert_int_eq(t->ev[0].status, HTTP_SCAN_HEAD);
	ck_assert_uint_eq(t->ev[0].off, 32);
	free(t);
}
END_TEST

START_TEST(very_long_request_line)
{
	size_t n = 300 * 1024;
	char *buf = malloc(n);
	struct trace *t;

	ck_assert_ptr_nonnull(buf);
	memcpy(buf, "GET /", 5);
	memset(buf + 5, 'a', n - 5);
	t = check_splits(&cfg_std, buf, n, "long-line", false);
	ck_assert_uint_eq(t->n, 1);
	expect_gave_up(t, 0, HTTP_SCAN_DEFAULT_GIVE_UP, HTTP_SCAN_GIVE_UP_TOO_LONG);
	free(t);

	/* 20 KiB: over max_head_bytes, under give_up_bytes: ignored, and
	 * the next request is still found */
	n = (size_t)snprintf(buf, 300 * 1024,
			     "GET /%020000d HTTP/1.1\r\n\r\nGET /n HTTP/1.1\r\n\r\n",
			     0);
	t = check_splits(&cfg_std, buf, n, "20k-line", false);
	ck_assert_uint_eq(t->n, 2);
	expect_head(t, 0, 5 + 20000 + 13, HTTP_SCAN_F_OVERSIZED, NULL, NULL, NULL);
	expect_head(t, 1, n, F_CAP, "GET", "/n", "");
	free(t);
	free(buf);
}
END_TEST

START_TEST(random_bytes)
{
	uint64_t s = 0x1234567890abcdefull;
	uint8_t buf[1500];
	unsigned it, i;

	for (it = 0; it < (RUNNING_ON_VALGRIND ? 8u : 40u); it++) {
		struct trace *t;
		char name[32];

		for (i = 0; i < sizeof(buf); i++)
			buf[i] = (uint8_t)xrand(&s);
		/* half of them start like a request */
		if (it & 1)
			memcpy(buf, "POST /r HTTP/1.1\r\n", 18);
		snprintf(name, sizeof(name), "random-%u", it);
		t = check_splits(&cfg_std, buf, 200 + it * 31, name, false);
		free(t);
	}
}
END_TEST

/* Mutations of valid pipelines: whatever the bytes, the split must not
 * matter.  This reaches the odd corners (split names, CR in values, chunk
 * lines cut anywhere) far more often than hand-written cases. */
START_TEST(mutated_requests)
{
	static const uint8_t interesting[] = {'\r', '\n', ' ', '\t', ':',  ',',
					      ';',  '0',  'a', 'F',  '\0', 0x16,
					      0x80, 'T',  'c', '-'};
	char base[2048];
	size_t first, body, blen;
	uint64_t s = 42;
	unsigned it;

	blen = build_post_pipeline(base, sizeof(base), &first, &body);
	blen += (size_t)snprintf(base + blen, sizeof(base) - blen, "%s%s%s",
				 chunked_req, chunked_body,
				 "GET /z HTTP/1.1\r\ntracestate: a=1\r\n"
				 "x-request-id: r\r\ntrace: q\r\n\r\n");
	for (it = 0; it < (RUNNING_ON_VALGRIND ? 40u : 400u); it++) {
		uint8_t buf[2100];
		size_t len = blen, m, nm = 1 + xrand(&s) % 4;
		struct trace *t;
		char name[32];

		memcpy(buf, base, blen);
		for (m = 0; m < nm; m++) {
			uint64_t r = xrand(&s);
			size_t at = (r >> 8) % len;
			uint8_t c =
				(r >> 40) & 1
					? interesting[(r >> 32) % sizeof(interesting)]
					: (uint8_t)(r >> 48);

			switch (r % 3) {
			case 0:
				buf[at] = c;
				break;
			case 1:
				if (len < sizeof(buf)) {
					memmove(buf + at + 1, buf + at, len - at);
					buf[at] = c;
					len++;
				}
				break;
			default:
				memmove(buf + at, buf + at + 1, len - at - 1);
				len--;
				break;
			}
		}
		snprintf(name, sizeof(name), "mutation-%u", it);
		t = check_splits(&cfg_std, buf, len, name, false);
		free(t);
	}
}
END_TEST

/* ---- responses ---- */

static size_t
resp_len(const char *s)
{
	return http_response_len((const uint8_t *)s, strlen(s));
}

/* http_response_h2c_head() of s, from a buffer of exactly its bytes (a
 * read past the end shows under the sanitizers). */
static size_t
h2c_head(const char *s)
{
	size_t n = strlen(s), r;
	uint8_t *p = malloc(n ? n : 1);

	ck_assert_ptr_nonnull(p);
	memcpy(p, s, n);
	r = http_response_h2c_head(p, n);
	free(p);
	return r;
}

/* The 101 head that makes the socket level follow a connection as HTTP/2
 * (preload/conn.c, "Upgrade: h2c"): its length, only with h2c alone as
 * the new protocol and the head whole. */
START_TEST(h2c_switch_heads)
{
	static const char lt[] = "HTTP/1.1 101 Switching Protocols\r\n"
				 "Connection: Upgrade\r\nUpgrade: h2c\r\n\r\n";
	char buf[256];
	size_t k;

	/* lighttpd's, and what follows it (frames) is not counted */
	ck_assert_uint_eq(h2c_head(lt), sizeof(lt) - 1);
	snprintf(buf, sizeof(buf), "%s%s", lt, "\0\0\0\4");
	ck_assert_uint_eq(h2c_head(buf), sizeof(lt) - 1);
	/* case, blanks around the token, no blank, bare LF, field order */
	ck_assert_uint_eq(h2c_head("HTTP/1.1 101 x\r\nUPGRADE: H2C\r\n\r\n"), 32);
	ck_assert_uint_eq(h2c_head("HTTP/1.1 101 x\r\nupgrade:\t h2C \t\r\n\r\n"), 35);
	ck_assert_uint_eq(h2c_head("HTTP/1.1 101 x\r\nUpgrade:h2c\r\n\r\n"), 31);
	ck_assert_uint_eq(h2c_head("HTTP/1.1 101 x\nUpgrade: h2c\nConnection: "
				   "Upgrade\n\n"),
			  49);
	ck_assert_uint_eq(h2c_head("HTTP/1.1 101 x\r\nUpgrade: h2c\n\r\n"), 31);
	/* another protocol, h2c among several, a longer or shorter token */
	ck_assert_uint_eq(h2c_head("HTTP/1.1 101 x\r\nUpgrade: websocket\r\n\r\n"), 0);
	ck_assert_uint_eq(h2c_head("HTTP/1.1 101 x\r\nUpgrade: h2c, foo\r\n\r\n"), 0);
	ck_assert_uint_eq(h2c_head("HTTP/1.1 101 x\r\nUpgrade: foo, h2c\r\n\r\n"), 0);
	ck_assert_uint_eq(h2c_head("HTTP/1.1 101 x\r\nUpgrade: h2c2\r\n\r\n"), 0);
	ck_assert_uint_eq(h2c_head("HTTP/1.1 101 x\r\nUpgrade: h2\r\n\r\n"), 0);
	ck_assert_uint_eq(h2c_head("HTTP/1.1 101 x\r\nUpgrade: h 2c\r\n\r\n"), 0);
	ck_assert_uint_eq(h2c_head("HTTP/1.1 101 x\r\nUpgrade:\r\n\r\n"), 0);
	/* the last Upgrade field counts */
	ck_assert_uint_eq(h2c_head("HTTP/1.1 101 x\r\nUpgrade: h2c\r\n"
				   "Upgrade: websocket\r\n\r\n"),
			  0);
	/* not the Upgrade field: another name, a name that only starts so,
	 * a control byte that | 0x20 would take for the colon, the
	 * token in the status line or in another field's value */
	ck_assert_uint_eq(h2c_head("HTTP/1.1 101 x\r\nUpgraded: h2c\r\n\r\n"), 0);
	ck_assert_uint_eq(h2c_head("HTTP/1.1 101 x\r\nX-Upgrade: h2c\r\n\r\n"), 0);
	ck_assert_uint_eq(h2c_head("HTTP/1.1 101 x\r\nUpgrade\x1a h2c\r\n\r\n"), 0);
	ck_assert_uint_eq(h2c_head("Upgrade: h2c\r\n\r\n"), 0);
	ck_assert_uint_eq(h2c_head("HTTP/1.1 101 x\r\nConnection: Upgrade: h2c\r\n"
				   "\r\n"),
			  0);
	ck_assert_uint_eq(h2c_head("HTTP/1.1 101 x\r\nUpgrade : h2c\r\n\r\n"), 0);
	/* no head: empty, an empty status line */
	ck_assert_uint_eq(h2c_head(""), 0);
	ck_assert_uint_eq(h2c_head("\r\nUpgrade: h2c\r\n\r\n"), 0);
	/* cut anywhere before its last byte (a 101 split across writes, a
	 * head longer than what was written): 0 */
	for (k = 0; k < sizeof(lt) - 1; k++) {
		memcpy(buf, lt, k);
		buf[k] = '\0';
		ck_assert_msg(h2c_head(buf) == 0, "cut at %zu", k);
	}
	ck_assert_uint_eq(http_response_h2c_head((const uint8_t *)lt, sizeof(lt) - 1),
			  sizeof(lt) - 1);
}
END_TEST

/* The scanner given up for HTTP/2 by its caller (an "Upgrade: h2c" the
 * socket level follows): reason http2 -- which the socket level tells
 * from a stop of its own (caller), hooks/hook-socket.c,
 * sk_write_continues() -- final, not in a head, not at the start. */
START_TEST(stop_http2)
{
	static const char head[] = "GET / HTTP/1.1\r\nUpgrade: h2c\r\n\r\n";
	static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	struct http_scan st;
	size_t used = 0;

	http_scan_reset(&st);
	ck_assert_int_eq(
		http_scan_feed(&st, &cfg_std, NULL, head, sizeof(head) - 1, &used),
		HTTP_SCAN_HEAD);
	ck_assert(http_scan_at_start(&st));
	http_scan_stop_http2(&st);
	ck_assert(http_scan_gave_up(&st));
	ck_assert(!http_scan_at_start(&st));
	ck_assert(!http_scan_in_head(&st));
	ck_assert_int_eq(http_scan_give_up_reason(&st), HTTP_SCAN_GIVE_UP_HTTP2);
	ck_assert_str_eq(http_scan_give_up_name(http_scan_give_up_reason(&st)),
			 "http2");
	/* The client's preface and anything after: consumed, nothing more. */
	ck_assert_int_eq(http_scan_feed(&st, &cfg_std, NULL, preface,
					sizeof(preface) - 1, &used),
			 HTTP_SCAN_MORE);
	ck_assert_uint_eq(used, sizeof(preface) - 1);
	ck_assert_int_eq(
		http_scan_feed(&st, &cfg_std, NULL, head, sizeof(head) - 1, &used),
		HTTP_SCAN_MORE);
	ck_assert_int_eq(http_scan_give_up_reason(&st), HTTP_SCAN_GIVE_UP_HTTP2);
	/* The same reason as the scanner's own give-up on the preface. */
	http_scan_reset(&st);
	ck_assert_int_eq(http_scan_feed(&st, &cfg_std, NULL, preface,
					sizeof(preface) - 1, &used),
			 HTTP_SCAN_GAVE_UP);
	ck_assert_int_eq(http_scan_give_up_reason(&st), HTTP_SCAN_GIVE_UP_HTTP2);
	/* Mid-head too; reset revives. */
	http_scan_reset(&st);
	ck_assert_int_eq(http_scan_feed(&st, &cfg_std, NULL, head, 10, &used),
			 HTTP_SCAN_MORE);
	ck_assert(http_scan_in_head(&st));
	http_scan_stop_http2(&st);
	ck_assert(!http_scan_in_head(&st));
	ck_assert_int_eq(http_scan_give_up_reason(&st), HTTP_SCAN_GIVE_UP_HTTP2);
	http_scan_reset(&st);
	ck_assert(!http_scan_gave_up(&st));
	ck_assert_int_eq(
		http_scan_feed(&st, &cfg_std, NULL, head, sizeof(head) - 1, &used),
		HTTP_SCAN_HEAD);
}
END_TEST

START_TEST(response_lengths)
{
	static const char h200[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n";

	/* a body by Content-Length; what follows is not counted */
	ck_assert_uint_eq(
		resp_len("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1"),
		sizeof(h200) - 1 + 3);
	/* the body need not be there: the length goes past n */
	ck_assert_uint_eq(resp_len(h200), sizeof(h200) - 1 + 3);
	ck_assert_uint_eq(resp_len("HTTP/1.0 200 OK\ncontent-length:\t3 \n\nabc"), 39);
	/* no body */
	ck_assert_uint_eq(resp_len("HTTP/1.1 204 No Content\r\n\r\nX"), 27);
	ck_assert_uint_eq(
		resp_len("HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n"), 48);
	ck_assert_uint_eq(resp_len("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK"), 25);
	/* cannot be told */
	ck_assert_uint_eq(resp_len("HTTP/1.1 200 OK\r\n\r\nbody until the close"), 0);
	ck_assert_uint_eq(resp_len("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
				   "Content-Length: 3\r\n\r\nabc"),
			  0);
	ck_assert_uint_eq(resp_len("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
				   "Content-Length: 4\r\n\r\nabcd"),
			  0);
	ck_assert_uint_eq(resp_len("HTTP/1.1 200 OK\r\nContent-Length: 3x\r\n\r\nabc"),
			  0);
	ck_assert_uint_eq(resp_len("HTTP/1.1 200 OK\r\nContent-Length: "
				   "99999999999999999999999\r\n\r\n"),
			  0);
	ck_assert_uint_eq(resp_len("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"), 0);
	ck_assert_uint_eq(resp_len("HTTP/1.1 2x0 OK\r\nContent-Length: 3\r\n\r\n"), 0);
	ck_assert_uint_eq(resp_len("HTTP/2 200\r\ncontent-length: 3\r\n\r\nabc"), 0);
	ck_assert_uint_eq(resp_len("GET / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"),
			  0);
	ck_assert_uint_eq(resp_len("HTTP/1.1 20"), 0);
	ck_assert_uint_eq(http_response_len(NULL, 0), 0);
}
END_TEST

/* ---- limits, captures, config ---- */

START_TEST(limits_exact)
{
	struct http_scan_config cfg;
	char buf[2048];
	struct trace *t;
	size_t n;

	http_scan_config_init(&cfg);
	ck_assert_int_eq(http_scan_config_set_limits(&cfg, 256, 1024), 0);

	/* exactly max_head_bytes: captured; one more: ignored */
	n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nX: %0*d\r\n\r\n",
			     256 - 16 - 3 - 4, 0);
	ck_assert_uint_eq(n, 256);
	t = check_splits(&cfg, buf, n, "max-exact", true);
	ck_assert_uint_eq(t->ev[0].flags, F_CAP);
	free(t);
	n = (size_t)snprintf(buf, sizeof(buf), "\nGET / HTTP/1.1\r\nX: %0*d\r\n\r\n",
			     256 - 16 - 3 - 4, 0);
	t = check_splits(&cfg, buf, n, "max-plus-one", true);
	ck_assert_uint_eq(t->ev[0].flags, HTTP_SCAN_F_OVERSIZED);
	free(t);

	/* exactly give_up_bytes: still a head; one more: gave up there */
	n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nX: %0*d\r\n\r\n",
			     1024 - 16 - 3 - 4, 0);
	t = check_splits(&cfg, buf, n, "give-up-exact", true);
	ck_assert_uint_eq(t->n, 1);
	ck_assert_int_eq(t->ev[0].status, HTTP_SCAN_HEAD);
	free(t);
	n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nX: %0*d\r\n\r\n",
			     1025 - 16 - 3 - 4, 0);
	t = check_splits(&cfg, buf, n, "give-up-plus-one", true);
	expect_gave_up(t, 0, 1024, HTTP_SCAN_GIVE_UP_TOO_LONG);
	free(t);

	/* chunk extensions and trailers are bounded too */
	n = (size_t)snprintf(
		buf, sizeof(buf),
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;%01100d\r\n",
		0);
	t = check_splits(&cfg, buf, n, "long-chunk-ext", true);
	expect_gave_up(t, 1, 47 + 1024, HTTP_SCAN_GIVE_UP_TOO_LONG);
	free(t);
	n = (size_t)snprintf(buf, sizeof(buf),
			     "POST / HTTP/1.1\r\nTransfer-Encoding: "
			     "chunked\r\n\r\n0\r\nT: %01100d\r\n",
			     0);
	t = check_splits(&cfg, buf, n, "long-trailer", true);
	expect_gave_up(t, 1, 47 + 1024, HTTP_SCAN_GIVE_UP_TOO_LONG);
	free(t);

	/* endless empty lines between requests */
	memset(buf, '\n', 1100);
	t = check_splits(&cfg, buf, 1100, "empty-lines", true);
	expect_gave_up(t, 0, 1024, HTTP_SCAN_GIVE_UP_TOO_LONG);
	free(t);

	ck_assert_int_eq(http_scan_config_set_limits(&cfg, 63, 0), -EINVAL);
	ck_assert_int_eq(http_scan_config_set_limits(&cfg, 2048, 1024), -EINVAL);
	ck_assert_int_eq(http_scan_config_set_limits(&cfg, 0, HTTP_SCAN_LIMIT_MAX + 1),
			 -EINVAL);
	ck_assert_int_eq(http_scan_config_set_limits(&cfg, 0, 4096), 0);
	ck_assert_uint_eq(cfg.max_head_bytes, 256);
	ck_assert_uint_eq(cfg.give_up_bytes, 4096);
	/* the edges: the smallest head limit, and both limits equal */
	ck_assert_int_eq(http_scan_config_set_limits(&cfg, 64, 64), 0);
	ck_assert_uint_eq(cfg.max_head_bytes, 64);
	ck_assert_uint_eq(cfg.give_up_bytes, 64);
}
END_TEST

START_TEST(capture_lost_and_none)
{
	static const char req[] = "GET /p HTTP/1.1\r\ntraceparent: " TP1 "\r\n\r\n";
	struct http_scan_capture *a = new_capture(), *b = new_capture();
	struct http_scan st = {0};
	size_t used, half = 30;

	/* pool slots start zero-filled (the documented requirement) */
	memset(b, 0, sizeof(*b));
	/* a different capture mid-head (not a copy): reported lost */
	ck_assert_int_eq(http_scan_feed(&st, &cfg_std, a, req, half, &used),
			 HTTP_SCAN_MORE);
	ck_assert(http_scan_in_head(&st));
	ck_assert_int_eq(
		http_scan_feed(&st, &cfg_std, b, req + half, strlen(req) - half, &used),
		HTTP_SCAN_HEAD);
	ck_assert_uint_eq(http_scan_flags(&st), HTTP_SCAN_F_CAPTURE_LOST);
	ck_assert(!http_scan_in_head(&st));

	/* NULL mid-head: same */
	http_scan_reset(&st);
	ck_assert_int_eq(http_scan_feed(&st, &cfg_std, a, req, half, &used),
			 HTTP_SCAN_MORE);
	ck_assert_int_eq(http_scan_feed(&st, &cfg_std, NULL, req + half,
					strlen(req) - half, &used),
			 HTTP_SCAN_HEAD);
	ck_assert_uint_eq(http_scan_flags(&st), HTTP_SCAN_F_CAPTURE_LOST);

	/* a copy is fine */
	http_scan_reset(&st);
	ck_assert_int_eq(http_scan_feed(&st, &cfg_std, a, req, half, &used),
			 HTTP_SCAN_MORE);
	*b = *a;
	memset(a, 0, sizeof(*a));
	ck_assert_int_eq(
		http_scan_feed(&st, &cfg_std, b, req + half, strlen(req) - half, &used),
		HTTP_SCAN_HEAD);
	ck_assert_uint_eq(http_scan_flags(&st), F_CAP | F_TP);
	ck_str_field(b->traceparent, b->traceparent_len, TP1);

	/* a capture appearing mid-head is not used */
	http_scan_reset(&st);
	ck_assert_int_eq(http_scan_feed(&st, &cfg_std, NULL, req, half, &used),
			 HTTP_SCAN_MORE);
	ck_assert_int_eq(
		http_scan_feed(&st, &cfg_std, a, req + half, strlen(req) - half, &used),
		HTTP_SCAN_HEAD);
	ck_assert_uint_eq(http_scan_flags(&st), 0);
	free(a);
	free(b);
}
END_TEST

START_TEST(give_up_is_final)
{
	struct http_scan st;
	size_t used = 0;

	http_scan_reset(&st);
	ck_assert(!http_scan_gave_up(&st));
	ck_assert_int_eq(http_scan_give_up_reason(&st), HTTP_SCAN_GIVE_UP_NONE);
	ck_assert_int_eq(http_scan_feed(&st, &cfg_std, NULL, "\x16\x03\x01", 3, &used),
			 HTTP_SCAN_GAVE_UP);
	ck_assert_uint_eq(used, 0);
	ck_assert(http_scan_gave_up(&st));
	ck_assert_int_eq(http_scan_feed(&st, &cfg_std, NULL, "GET / HTTP/1.1\r\n\r\n",
					18, &used),
			 HTTP_SCAN_MORE);
	ck_assert_uint_eq(used, 18);
	ck_assert_str_eq(http_scan_give_up_name(http_scan_give_up_reason(&st)), "tls");

	/* reset revives; stop gives up with reason "caller" */
	http_scan_reset(&st);
	ck_assert_int_eq(http_scan_feed(&st, &cfg_std, NULL, "GET / HTTP/1.1\r\n\r\n",
					18, &used),
			 HTTP_SCAN_HEAD);
	http_scan_stop(&st);
	ck_assert(http_scan_gave_up(&st));
	ck_assert_int_eq(http_scan_give_up_reason(&st), HTTP_SCAN_GIVE_UP_CALLER);
	ck_assert_int_eq(http_scan_feed(&st, &cfg_std, NULL, "GET", 3, &used),
			 HTTP_SCAN_MORE);
	ck_assert_uint_eq(used, 3);

	/* zero-length feed */
	http_scan_reset(&st);
	ck_assert_int_eq(http_scan_feed(&st, &cfg_std, NULL, NULL, 0, &used),
			 HTTP_SCAN_MORE);
	ck_assert_uint_eq(used, 0);
	ck_assert_uint_le(sizeof(struct http_scan), 32);
}
END_TEST

START_TEST(config_names)
{
	struct http_scan_config cfg;
	unsigned idx = 99, i;
	char name[40];

	http_scan_config_init(&cfg);
	ck_assert_int_eq(http_scan_config_add_header(&cfg, "X-Request-ID", 12, &idx),
			 0);
	ck_assert_uint_eq(idx, 0);
	ck_assert_int_eq(http_scan_config_add_header(&cfg, "x-request-id", 12, &idx),
			 -EEXIST);
	ck_assert_int_eq(http_scan_config_add_header(&cfg, "TraceParent", 11, &idx),
			 -EEXIST);
	ck_assert_int_eq(http_scan_config_add_header(&cfg, "content-length", 14, &idx),
			 -EEXIST);
	ck_assert_int_eq(http_scan_config_add_header(&cfg, "", 0, &idx), -EINVAL);
	ck_assert_int_eq(http_scan_config_add_header(&cfg, "a b", 3, &idx), -EINVAL);
	ck_assert_int_eq(http_scan_config_add_header(&cfg, "a:b", 3, &idx), -EINVAL);
	ck_assert_int_eq(http_scan_config_add_header(&cfg, "a\0b", 3, &idx), -EINVAL);
	memset(name, 'n', sizeof(name));
	ck_assert_int_eq(
		http_scan_config_add_header(&cfg, name, HTTP_SCAN_NAME_MAX + 1, &idx),
		-EINVAL);
	ck_assert_int_eq(
		http_scan_config_add_header(&cfg, name, HTTP_SCAN_NAME_MAX, &idx), 0);
	ck_assert_uint_eq(idx, 1);
	for (i = 2; i < HTTP_SCAN_EXTRA_MAX; i++) {
		snprintf(name, sizeof(name), "x-h%u", i);
		ck_assert_int_eq(
			http_scan_config_add_header(&cfg, name, strlen(name), &idx), 0);
		ck_assert_uint_eq(idx, i);
	}
	ck_assert_int_eq(http_scan_config_add_header(&cfg, "x-more", 6, &idx), -ENOSPC);
	ck_assert_uint_eq(idx, HTTP_SCAN_EXTRA_MAX - 1);
}
END_TEST

/* Heads whose lines end at every offset around the 16- and 32-byte blocks
 * of the line-end and target searches, each placed so that its last byte
 * is the last readable byte before an inaccessible page: one read must
 * find the head with its values and must not fault; a sample is also fed
 * at every split. */
START_TEST(block_edges_at_end_of_page)
{
	long pg = sysconf(_SC_PAGESIZE);
	uint8_t *m = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char head[512];
	unsigned pad, tlen;

	ck_assert_ptr_ne(m, MAP_FAILED);
	ck_assert_int_eq(mprotect(m + pg, (size_t)pg, PROT_NONE), 0);
	for (tlen = 1; tlen <= 40; tlen += 3)
		for (pad = 0; pad <= 70; pad++) {
			struct http_scan st;
			struct http_scan_capture *cap = new_capture();
			size_t len, used;
			int k, r;
			uint8_t *p;

			k = snprintf(head, sizeof(head),
				     "GET /%.*s HTTP/1.1\r\nX-Pad: %.*s\r\n"
				     "traceparent: " TP1 "\r\nA: %.*s\r\n\r\n",
				     (int)tlen,
				     "abcdefghijklmnopqrstuvwxyz0123456789abcdefgh",
				     (int)pad,
				     "ppppppppppppppppppppppppppppppppppppppppppppppppp"
				     "pppppppp"
				     "ppppppppppppppppppppppp",
				     (int)(pad % 17), "aaaaaaaaaaaaaaaaaaaa");
			REQUIRE(k > 0 && (size_t)k < sizeof(head));
			len = (size_t)k;
			p = m + pg - len;
			memcpy(p, head, len);
			memset(&st, 0, sizeof(st));
			r = http_scan_feed(&st, &cfg_std, cap, p, len, &used);
			if (r != HTTP_SCAN_HEAD || used != len ||
			    !(st.flags & HTTP_SCAN_F_TRACEPARENT) ||
			    cap->target_len != tlen + 1 ||
			    cap->traceparent_len != strlen(TP1) ||
			    memcmp(cap->traceparent, TP1, strlen(TP1)) != 0)
				ck_abort_msg("target %u pad %u: r %d used %zu/%zu",
					     tlen, pad, r, used, len);
			/* and split anywhere (heap copies of exact size) */
			if (pad % 7 == 0 && tlen % 2)
				free(check_splits(&cfg_std, head, len, "block edges",
						  false));
			free(cap);
		}
	munmap(m, (size_t)pg * 2);
}
END_TEST

START_TEST(eight_extras)
{
	struct http_scan_config cfg;
	char req[2048], want[64];
	size_t o;
	unsigned i;
	struct trace *t;

	http_scan_config_init(&cfg);
	for (i = 0; i < HTTP_SCAN_EXTRA_MAX; i++) {
		char name[32];

		/* names sharing prefixes with each other and the built-ins */
		snprintf(name, sizeof(name), i & 1 ? "t-%u" : "trace%u", i);
		ck_assert_int_eq(
			http_scan_config_add_header(&cfg, name, strlen(name), NULL), 0);
	}
	o = (size_t)snprintf(req, sizeof(req), "GET / HTTP/1.1\r\n");
	for (i = HTTP_SCAN_EXTRA_MAX; i-- > 0;)
		o += (size_t)snprintf(req + o, sizeof(req) - o,
				      i & 1 ? "T-%u: v%u\r\n" : "TRACE%u:v%u\r\n", i,
				      i);
	o += (size_t)snprintf(req + o, sizeof(req) - o, "x-big: %0300d\r\n\r\n", 0);
	t = check_splits(&cfg, req, o, "eight-extras", true);
	ck_assert_uint_eq(t->ev[0].snap.extra_present, 0xff);
	for (i = 0; i < HTTP_SCAN_EXTRA_MAX; i++) {
		snprintf(want, sizeof(want), "v%u", i);
		ck_str_field(t->ev[0].snap.extra[i], t->ev[0].snap.extra_len[i], want);
	}
	free(t);

	/* values cut at 256 bytes */
	o = (size_t)snprintf(req, sizeof(req),
			     "GET / HTTP/1.1\r\ntrace0: %0300d\r\n\r\n", 0);
	t = check_splits(&cfg, req, o, "extra-long", true);
	ck_assert_uint_eq(t->ev[0].snap.extra_truncated, 1);
	ck_assert_uint_eq(t->ev[0].snap.extra_len[0], HTTP_SCAN_VALUE_MAX);
	free(t);
}
END_TEST

/* Two threads reading one connection share its state (preload/conn.h): a
 * feed may find in the method phase the position another thread left in
 * a header name (up to 31), past the method buffer.  The scanner stopped
 * a method only at position HTTP_SCAN_METHOD_MAX exactly, so from 21 on
 * it wrote every following method byte past the buffer (64 KiB of them:
 * past the capture), and the length it reported for the method was the
 * position itself (what a reader copies from the 20-byte buffer). */
START_TEST(shared_state_method_pos)
{
	static struct {
		struct http_scan_capture cap;
		uint8_t guard[1 << 17];
	} g;
	static uint8_t a[1 << 16];
	static const char rest[] = " / HTTP/1.1\r\n\r\n";
	struct http_scan st;
	size_t used, k;
	unsigned pos;

	memset(a, 'A', sizeof(a));
	for (pos = HTTP_SCAN_METHOD_MAX; pos < 32; pos++) {
		memset(&g, 0, sizeof(g));
		http_scan_reset(&st);
		ck_assert_int_eq(http_scan_feed(&st, &cfg_std, &g.cap, "GE", 2, &used),
				 HTTP_SCAN_MORE);
		/* what no single feed leaves: another thread's store */
		st.pos = (uint8_t)pos;
		(void)http_scan_feed(&st, &cfg_std, &g.cap, a, sizeof(a), &used);
		for (k = 0; k < sizeof(g.guard); k++)
			REQUIRE(g.guard[k] == 0);

		memset(&g.cap, 0, sizeof(g.cap));
		http_scan_reset(&st);
		ck_assert_int_eq(http_scan_feed(&st, &cfg_std, &g.cap, "GE", 2, &used),
				 HTTP_SCAN_MORE);
		st.pos = (uint8_t)pos;
		(void)http_scan_feed(&st, &cfg_std, &g.cap, rest, sizeof(rest) - 1,
				     &used);
		ck_assert_uint_le(g.cap.method_len, HTTP_SCAN_METHOD_MAX);
	}
}
END_TEST

/* The same sharing can leave a phase no feed leaves (a torn store, or
 * PH_DEAD set by the other thread in the middle of this feed): the feed
 * must end.  Before, the chunk-line scanner took no byte in such a phase
 * and its caller called it again for ever (a reader of the h1-readers
 * helper spun inside read(), seen under ASan). */
START_TEST(shared_state_bad_phase)
{
	static const char bytes[] = "x\r\nt";
	struct http_scan_capture cap;
	struct http_scan st;
	size_t used;
	unsigned ph;

	for (ph = 64; ph < HTTP_SCAN_PH_DEAD; ph++) {
		memset(&cap, 0, sizeof(cap));
		http_scan_reset(&st);
		st.phase = (uint8_t)ph;
		ck_assert_int_eq(http_scan_feed(&st, &cfg_std, &cap, bytes,
						sizeof(bytes) - 1, &used),
				 HTTP_SCAN_GAVE_UP);
		ck_assert(http_scan_gave_up(&st));
	}
}
END_TEST

/* A head split in its target keeps its capture in a pool entry that two
 * threads reading one socket share, and that one of them may free (the
 * other's feed still writing to it) and the pool hand to another
 * connection's scanner: the target length found there may be anything.
 * The target was stored at that length without a bound, room being
 * computed as 256 minus it (wrapping to "room enough"): the next target
 * bytes went up to 64 KiB past the target buffer. */
START_TEST(shared_state_target_len)
{
	static struct {
		struct http_scan_capture cap;
		uint8_t guard[1 << 17];
	} g;
	static const char rest[] = "cd HTTP/1.1\r\n\r\n";
	struct http_scan st;
	size_t used, k;
	unsigned tl;

	for (tl = HTTP_SCAN_TARGET_MAX - 1; tl <= 0xffff; tl += 0x1fff) {
		memset(&g, 0, sizeof(g));
		http_scan_reset(&st);
		ck_assert_int_eq(
			http_scan_feed(&st, &cfg_std, &g.cap, "GET /ab", 7, &used),
			HTTP_SCAN_MORE);
		/* what no single feed leaves: another owner's bytes */
		g.cap.target_len = (uint16_t)tl;
		(void)http_scan_feed(&st, &cfg_std, &g.cap, rest, sizeof(rest) - 1,
				     &used);
		for (k = 0; k < sizeof(g.guard); k++)
			REQUIRE(g.guard[k] == 0);
		ck_assert_uint_le(g.cap.target_len, HTTP_SCAN_TARGET_MAX);
	}
}
END_TEST

/* The candidates of a header name split across reads (st->match) hold
 * bits of configured names only, unless another thread stored them (two
 * threads reading one socket share its state, preload/conn.h) or the
 * store was torn: a bit past the names indexed the name tables past
 * their ends (name_len[12..15] of 12; UBSan, halt_on_error, stops at it).
 * A name split after its first byte: narrowed by the next ("tx-a"), and
 * ended by a colon ("t"). */
START_TEST(shared_state_name_match)
{
	static const char *const rest[] = {"x-a: 1\r\n\r\n", ": 1\r\n\r\n"};
	struct http_scan_capture cap;
	struct http_scan st;
	size_t used;
	unsigned i;

	for (i = 0; i < 2; i++) {
		memset(&cap, 0, sizeof(cap));
		http_scan_reset(&st);
		ck_assert_int_eq(http_scan_feed(&st, &cfg_std, &cap,
						"GET / HTTP/1.1\r\nt", 17, &used),
				 HTTP_SCAN_MORE);
		ck_assert_uint_eq(used, 17);
		/* what no single feed leaves: every candidate bit */
		st.match = 0xffff;
		ck_assert_int_eq(http_scan_feed(&st, &cfg_std, &cap, rest[i],
						strlen(rest[i]), &used),
				 HTTP_SCAN_HEAD);
	}
}
END_TEST

/* A tracestate list longer than the capture keeps is cut as it comes
 * (w3c_tracestate_trunc, in the capture): its entries' offsets and the
 * list's length, in a capture two threads fill or the pool entry's next
 * owner writes to under the feed (shared_state_target_len), may be
 * anything.  Dropping a long entry moved the bytes from the entry's end
 * to the list's end: with the end past the list's, 2^64 bytes less a few
 * (a SIGSEGV), and a list length past the buffer went out as the
 * capture's tracestate length. */
START_TEST(shared_state_tracestate_cut)
{
	static struct http_scan_capture cap;
	static const char rest[] = ",b=1\r\n\r\n";
	static const uint16_t lens[] = {510, 0xffff};
	char head[1024];
	struct http_scan st;
	size_t used, o, i, c;

	for (c = 0; c < sizeof(lens) / sizeof(lens[0]); c++) {
		o = (size_t)snprintf(head, sizeof(head),
				     "GET / HTTP/1.1\r\ntracestate: ");
		for (i = 0; i < 12; i++)
			o += (size_t)snprintf(head + o, sizeof(head) - o,
					      "k%02zu=%040d,", i, 0);
		o += (size_t)snprintf(head + o, sizeof(head) - o, "z=1");
		memset(&cap, 0, sizeof(cap));
		http_scan_reset(&st);
		ck_assert_int_eq(http_scan_feed(&st, &cfg_std, &cap, head, o, &used),
				 HTTP_SCAN_MORE);
		ck_assert(cap.ts_checking);
		/* what no single feed leaves: a long entry whose end is past
		 * the list's, the member "z=1" in progress (TT_MEMBER, 1) */
		cap.ts_trunc.len = lens[c];
		cap.ts_trunc.n = 1;
		cap.ts_trunc.start[0] = 400;
		cap.ts_trunc.size[0] = 200;
		cap.ts_trunc.state = 1;
		ck_assert_int_eq(http_scan_feed(&st, &cfg_std, &cap, rest,
						sizeof(rest) - 1, &used),
				 HTTP_SCAN_HEAD);
		ck_assert_uint_le(cap.tracestate_len, HTTP_SCAN_TRACESTATE_MAX);
	}
}
END_TEST

TEST_SUITE(http_scan_suite)
{
	Suite *s = suite_create("http-scan");
	TCase *tc;

	tc = tcase_create("requests");
	tcase_add_checked_fixture(tc, setup_cfg, NULL);
	tcase_add_test(tc, get_with_traceparent);
	tcase_add_test(tc, block_edges_at_end_of_page);
	tcase_add_test(tc, lf_only_line_endings);
	tcase_add_test(tc, post_content_length_then_pipelined_get);
	tcase_add_test(tc, skip_spliced_bytes);
	tcase_add_test(tc, chunked_with_extensions_and_trailers);
	tcase_add_test(tc, keep_alive_second_traceparent);
	tcase_add_test(tc, big_header_ignored);
	tcase_add_test(tc, two_traceparents_invalid);
	tcase_add_test(tc, tracestate_three_lines);
	tcase_add_test(tc, tracestate_truncated_at_member);
	tcase_add_loop_test(tc, tracestate_long_lists_checked, 0,
			    (int)(sizeof(long_ts_cases) / sizeof(long_ts_cases[0])));
	tcase_add_test(tc, tracestate_cut_at_512);
	tcase_add_test(tc, tracestate_w3c_truncation);
	tcase_add_test(tc, odd_case_names_and_extras);
	tcase_add_test(tc, obs_fold);
	tcase_add_test(tc, http10);
	tcase_add_test(tc, traceparent_values);
	tcase_add_test(tc, long_target);
	tcase_add_test(tc, target_lengths);
	tcase_add_test(tc, traceparent_value_ends);
	tcase_add_test(tc, bad_framing);
	tcase_add_test(tc, bad_chunks);
	suite_add_tcase(s, tc);

	tc = tcase_create("not-http");
	tcase_add_checked_fixture(tc, setup_cfg, NULL);
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, tls_client_hello);
	tcase_add_test(tc, http2_preface);
	tcase_add_loop_test(tc, resp_and_text_protocols, 0,
			    (int)(sizeof(text_cases) / sizeof(text_cases[0])));
	tcase_add_test(tc, websocket_after_upgrade);
	tcase_add_loop_test(tc, nul_bytes, 0,
			    (int)(sizeof(nul_cases) / sizeof(nul_cases[0])));
	tcase_add_test(tc, nul_in_header);
	tcase_add_test(tc, very_long_request_line);
	tcase_add_test(tc, random_bytes);
	tcase_add_test(tc, mutated_requests);
	suite_add_tcase(s, tc);

	tc = tcase_create("api");
	tcase_add_checked_fixture(tc, setup_cfg, NULL);
	tcase_add_test(tc, response_lengths);
	tcase_add_test(tc, h2c_switch_heads);
	tcase_add_test(tc, stop_http2);
	tcase_add_test(tc, limits_exact);
	tcase_add_test(tc, capture_lost_and_none);
	tcase_add_test(tc, give_up_is_final);
	tcase_add_test(tc, config_names);
	tcase_add_test(tc, eight_extras);
	tcase_add_test(tc, shared_state_method_pos);
	tcase_add_test(tc, shared_state_bad_phase);
	tcase_add_test(tc, shared_state_target_len);
	tcase_add_test(tc, shared_state_name_match);
	tcase_add_test(tc, shared_state_tracestate_cut);
	suite_add_tcase(s, tc);
	return s;
}
