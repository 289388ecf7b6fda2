/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "hex.h"
#include "http-scan.h"
#include "http-scan-inline.h"

#include <errno.h>
#include <string.h>

/* Cold and out of line: gcc then moves every give-up path out of the hot
 * code (.text.unlikely), so a head's usual path touches fewer
 * instruction-cache lines (nginx: I1 misses per request). */
static __attribute__((noinline, cold)) enum http_scan_status
give_up(struct http_scan *st, enum http_scan_give_up why)
{
	st->phase = PH_DEAD;
	st->sub = (uint8_t)why;
	return HTTP_SCAN_GAVE_UP;
}

/* A call marks the path to it as never taken (gcc's "cold function"
 * prediction; without a profile, neither a cold label nor
 * __builtin_expect does): gcc moves the blocks only reachable that way to
 * the function's .cold part in .text.unlikely, out of the usual head's
 * cache lines (http_scan_feed()).  Empty; the asm keeps gcc from dropping
 * the call as pure. */
static __attribute__((noinline, cold)) void
rare_path(void)
{
	__asm__ volatile("");
}

/* ---- configuration ---- */

static bool
is_tchar(uint8_t c)
{
	if ((unsigned)((c | 0x20) - 'a') < 26u || (unsigned)(c - '0') < 10u)
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static int
add_name(struct http_scan_config *cfg, const char *name, size_t len)
{
	unsigned i = cfg->n_names, k;
	uint8_t low[32];

	if (len == 0 || len > HTTP_SCAN_NAME_MAX)
		return -EINVAL;
	for (k = 0; k < len; k++) {
		uint8_t c = (uint8_t)name[k];

		if (!is_tchar(c))
			return -EINVAL;
		low[k] = (unsigned)(c - 'A') < 26u ? c | 0x20 : c;
	}
	for (k = 0; k < i; k++)
		if (cfg->name_len[k] == len && memcmp(cfg->name[k], low, len) == 0)
			return -EEXIST;
	if (i >= HTTP_SCAN_NAMES)
		return -ENOSPC;

	memset(cfg->name[i], 0, sizeof(cfg->name[i]));
	memset(cfg->fold[i], 0, sizeof(cfg->fold[i]));
	memcpy(cfg->name[i], low, len);
	for (k = 0; k < len; k++)
		if ((unsigned)(low[k] - 'a') < 26u)
			cfg->fold[i][k] = 0x20;
	cfg->name_len[i] = (uint8_t)len;
	cfg->first[low[0]] |= (uint16_t)(1u << i);
	if ((unsigned)(low[0] - 'a') < 26u)
		cfg->first[low[0] & ~0x20] |= (uint16_t)(1u << i);
	if (len > cfg->max_name_len)
		cfg->max_name_len = (uint8_t)len;
	cfg->n_names = (uint8_t)(i + 1);
	return 0;
}

void
http_scan_config_init(struct http_scan_config *cfg)
{
	static const char *const builtin[] = {
		[FLD_TP] = "traceparent",
		[FLD_TS] = "tracestate",
		[FLD_CL] = "content-length",
		[FLD_TE] = "transfer-encoding",
	};
	unsigned i;

	memset(cfg, 0, sizeof(*cfg));
	cfg->max_head_bytes = HTTP_SCAN_DEFAULT_MAX_HEAD;
	cfg->give_up_bytes = HTTP_SCAN_DEFAULT_GIVE_UP;
	for (i = 0; i < FLD_EXTRA; i++)
		add_name(cfg, builtin[i], strlen(builtin[i]));
}

int
http_scan_config_set_limits(struct http_scan_config *cfg,
			    uint32_t max_head_bytes,
			    uint32_t give_up_bytes)
{
	uint32_t m = max_head_bytes ? max_head_bytes : cfg->max_head_bytes;
	uint32_t g = give_up_bytes ? give_up_bytes : cfg->give_up_bytes;

	if (m < 64 || g < m || g > HTTP_SCAN_LIMIT_MAX)
		return -EINVAL;
	cfg->max_head_bytes = m;
	cfg->give_up_bytes = g;
	return 0;
}

int
http_scan_config_add_header(struct http_scan_config *cfg,
			    const char *name,
			    size_t len,
			    unsigned *index_out)
{
	int r = add_name(cfg, name, len);

	if (r < 0)
		return r;
	if (index_out)
		*index_out = cfg->n_names - 1u - FLD_EXTRA;
	return 0;
}

/* ---- state ---- */

void
http_scan_reset(struct http_scan *st)
{
	memset(st, 0, sizeof(*st));
}

void
http_scan_stop(struct http_scan *st)
{
	give_up(st, HTTP_SCAN_GIVE_UP_CALLER);
}

void
http_scan_stop_fastcgi(struct http_scan *st)
{
	give_up(st, HTTP_SCAN_GIVE_UP_FASTCGI);
}

void
http_scan_stop_http2(struct http_scan *st)
{
	give_up(st, HTTP_SCAN_GIVE_UP_HTTP2);
}

enum http_scan_give_up
http_scan_give_up_reason(const struct http_scan *st)
{
	return st->phase == PH_DEAD ? (enum http_scan_give_up)st->sub
				    : HTTP_SCAN_GIVE_UP_NONE;
}

const char *
http_scan_give_up_name(enum http_scan_give_up reason)
{
	switch (reason) {
	case HTTP_SCAN_GIVE_UP_NONE:
		return "none";
	case HTTP_SCAN_GIVE_UP_TLS:
		return "tls";
	case HTTP_SCAN_GIVE_UP_HTTP2:
		return "http2";
	case HTTP_SCAN_GIVE_UP_NOT_HTTP:
		return "not-http";
	case HTTP_SCAN_GIVE_UP_MALFORMED:
		return "malformed";
	case HTTP_SCAN_GIVE_UP_TOO_LONG:
		return "too-long";
	case HTTP_SCAN_GIVE_UP_FRAMING:
		return "framing";
	case HTTP_SCAN_GIVE_UP_CALLER:
		return "caller";
	case HTTP_SCAN_GIVE_UP_FASTCGI:
		return "fastcgi";
	}
	return "unknown";
}

/* ---- captured values ---- */

static void
capture_begin(struct http_scan_capture *cap, const struct http_scan *st)
{
	/* Only the scalars; buffers are valid up to their lengths. */
	memset(cap, 0, offsetof(struct http_scan_capture, method));
	cap->owner = st;
}

/* Start a value at offset `start` of its buffer, after `sep` (a list
 * separator, counted as value bytes so that truncation sees it). */
static void
value_start(struct http_scan_capture *cap,
	    char *buf,
	    size_t bufcap,
	    size_t start,
	    const char *sep,
	    size_t seplen)
{
	size_t k;

	cap->cur_start = (uint16_t)start;
	cap->cur_seen = 0;
	cap->cur_last = 0;
	for (k = 0; k < seplen && start + k < bufcap; k++)
		buf[start + k] = sep[k];
	cap->cur_seen = cap->cur_last = (uint32_t)seplen;
}

/* Append n > 0 value bytes; the logical length (cur_last) ends after the last
 * byte that is not trailing whitespace, wherever the line was split. */
static void
value_append(struct http_scan_capture *cap,
	     char *buf,
	     size_t bufcap,
	     const uint8_t *s,
	     size_t n)
{
	size_t at = (size_t)cap->cur_start + cap->cur_seen;
	size_t j = n;

	if (at < bufcap)
		memcpy(buf + at, s, n < bufcap - at ? n : bufcap - at);
	while (is_trail_ws(s[j - 1]))
		if (--j == 0)
			break;
	if (j > 0)
		cap->cur_last = cap->cur_seen + (uint32_t)j;
	cap->cur_seen += (uint32_t)n;
}

/* ---- the head ---- */

static void
head_begin(struct http_scan *st, struct http_scan_capture *cap)
{
	st->flags = 0;
	st->n = 0;
	st->pos = 0;
	st->field = FLD_NONE;
	st->sub = 0;
	if (cap) {
		capture_begin(cap, st);
		st->flags = HTTP_SCAN_F_CAPTURED;
	}
}

static inline bool
capturing(const struct http_scan *st)
{
	return st->flags & HTTP_SCAN_F_CAPTURED;
}

/* Method bytes, consumed up to (not including) the SP.  Returns false to
 * give up. */
static bool
scan_method(struct http_scan *st,
	    struct http_scan_capture *cap,
	    const uint8_t **pp,
	    const uint8_t *lim)
{
	const uint8_t *p = *pp;
	unsigned pos = st->pos;
	uint64_t n = st->n;
	bool capt = capturing(st);
	bool ok = true;

	while (p < lim) {
		uint8_t c = *p;

		if (c == ' ')
			break;
		/* >=, not ==: st->pos may come from another phase (a header
		 * name's, up to 31) when two threads share the state (an
		 * application reading one socket from both; preload/conn.h),
		 * and method[pos] would then be written past its end for
		 * every method byte that follows. */
		if (!is_method_char(c) || pos >= HTTP_SCAN_METHOD_MAX) {
			ok = false;
			break;
		}
		if (capt)
			cap->method[pos] = (char)c;
		if (pos < 8)
			n |= (uint64_t)c << (8 * pos);
		pos++;
		p++;
	}
	st->pos = (uint8_t)pos;
	st->n = n;
	*pp = p;
	return ok;
}

/* memcpy() of a short captured value: 16-byte moves for 16..64 bytes (the
 * last one overlapping), cheaper than the call for the traceparent of
 * every traced request (B4). */
static inline void
copy_short(char *d, const uint8_t *s, size_t n)
{
#if defined(__SSE2__)
	if (__builtin_expect(n >= 16 && n <= 64, 1)) {
		_mm_storeu_si128((__m128i *)(void *)d, load128(s));
		if (n > 32) {
			_mm_storeu_si128((__m128i *)(void *)(d + 16), load128(s + 16));
			if (n > 48)
				_mm_storeu_si128((__m128i *)(void *)(d + 32),
						 load128(s + 32));
		}
		_mm_storeu_si128((__m128i *)(void *)(d + n - 16), load128(s + n - 16));
		return;
	}
#endif
	memcpy(d, s, n);
}

static void
target_store(struct http_scan_capture *cap, const uint8_t *s, size_t n)
{
	size_t tl = cap->target_len;

	/* tl + n, not n > 256 - tl: a capture two threads fill (a head split
	 * across reads of one socket read from both; preload/conn.h) may
	 * hold any length, the other's or, once freed under this feed, the
	 * pool entry's next owner's, and 256 - tl then wrapped to room
	 * enough (the bytes went up to 64 KiB past the buffer).  The same
	 * test as before on the usual path; the bound only when it fails. */
	if (__builtin_expect(tl + n > HTTP_SCAN_TARGET_MAX, 0)) {
		if (tl > HTTP_SCAN_TARGET_MAX)
			tl = HTTP_SCAN_TARGET_MAX;
		n = HTTP_SCAN_TARGET_MAX - tl;
	}
	memcpy(cap->target + tl, s, n);
	cap->target_len = (uint16_t)(tl + n);
}

/* Target bytes up to the first byte <= 0x20 or lim; st->pos records that
 * the target is not empty. */
static const uint8_t *
scan_target(struct http_scan *st,
	    struct http_scan_capture *cap,
	    const uint8_t *p,
	    const uint8_t *lim)
{
	const uint8_t *e = target_end(p, p, lim);

	if (e == p)
		return p;
	st->pos = 1;
	if (capturing(st))
		target_store(cap, p, (size_t)(e - p));
	return e;
}

/* The whole request line is in [p, lim) and is the plain
 * "METHOD SP target SP HTTP/1.x (CR)LF": take it in one go.  Anything else
 * (split, extra spaces, errors) returns false having changed nothing, and
 * the byte-at-a-time phases decide, so results cannot differ. */
static inline __attribute__((always_inline)) bool
request_line_fast(struct http_scan *st,
		  struct http_scan_capture *cap,
		  const uint8_t **pp,
		  const uint8_t *lim)
{
	const uint8_t *p = *pp, *q, *t, *nl;
	struct rline rl;
	size_t mlen;
	uint64_t v;

	if (!request_line_parse(p, lim, &rl))
		return false;
	q = rl.q;
	t = rl.t;
	nl = rl.nl;
	mlen = rl.mlen;
	v = rl.v;

	if (__builtin_expect(!(v >> 56 & 1), 0))
		st->flags |= HTTP_SCAN_F_HTTP10;
	/* the line is >= mlen + 11 bytes long: 8 bytes can be read */
	st->flags |= (uint16_t)method_connect(load64(p), mlen);
	if (capturing(st)) {
		/* the line is >= mlen + 11 bytes long: 8 bytes can be read */
		if (__builtin_expect(mlen <= 8, 1))
			memcpy(cap->method, p, 8);
		else
			memcpy(cap->method, p, mlen);
		cap->method_len = (uint8_t)mlen;
		/* a new head: target_len is 0 */
		if (__builtin_expect(q - t < 16 && lim - t >= 16, 1)) {
#if defined(__SSE2__)
			_mm_storeu_si128((__m128i *)(void *)cap->target, load128(t));
#else
			memcpy(cap->target, t, 16);
#endif
			cap->target_len = (uint16_t)(q - t);
		} else if (q - t <= 64) {
			copy_short(cap->target, t, (size_t)(q - t));
			cap->target_len = (uint16_t)(q - t);
		} else {
			target_store(cap, t, (size_t)(q - t));
		}
	}
	st->field = FLD_NONE;
	*pp = nl + 1;
	return true;
}

/* The first LF in [p, lim), or NULL.  [lo, lim) is readable (lo <= p).
 * Inline SSE2 instead of a memchr() call per line: header lines are short
 * (20-60 bytes), and the call, its setup and memchr's own entry cost more
 * than the search (B4).  A rest shorter than 16 bytes is read as the last
 * 16 bytes before lim when [lo, lim) has them, never past lim. */
static inline const uint8_t *
find_lf(const uint8_t *lo, const uint8_t *p, const uint8_t *lim)
{
#if defined(__SSE2__)
	const __m128i lf = _mm_set1_epi8('\n');
	unsigned m;

	/* reads of a few bytes: straight to the end */
	if (lim - p < 16)
		goto rest;
	for (; lim - p >= 32; p += 32) {
		m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(load128(p), lf)) |
		    (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(load128(p + 16), lf))
			    << 16;
		if (m)
			return p + __builtin_ctz(m);
	}
	if (lim - p >= 16) {
		m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(load128(p), lf));
		if (m)
			return p + __builtin_ctz(m);
		p += 16;
	}
	if (p == lim)
		return NULL;
rest:
	if (__builtin_expect(lim - lo >= 16, 1)) {
		m = (unsigned)_mm_movemask_epi8(
			    _mm_cmpeq_epi8(load128(lim - 16), lf)) >>
		    (16 - (lim - p));
		return m ? p + __builtin_ctz(m) : NULL;
	}
#else
	(void)lo;
#endif
	return memchr(p, '\n', (size_t)(lim - p));
}

/* Skip to just after the next LF; false (p = lim) if not in [p, lim). */
static inline bool
skip_line(const uint8_t *lo, const uint8_t **pp, const uint8_t *lim)
{
	const uint8_t *nl = find_lf(lo, *pp, lim);

	if (!nl) {
		*pp = lim;
		return false;
	}
	*pp = nl + 1;
	return true;
}

/* The bits of st->match that can name a configured name.  Two threads
 * reading one socket share its state (preload/conn.h), so the candidates
 * found there are taken as anything, as its positions are (scan_method(),
 * PH_VERSION): a bit past the names would index their tables past the
 * end.  Only a name split across reads comes here (PH_NAME). */
#define NAMES_MASK ((1u << HTTP_SCAN_NAMES) - 1)

/* One byte of a name split across reads: the candidates still matching. */
static unsigned
match_narrow(const struct http_scan_config *cfg, unsigned m, unsigned pos, uint8_t c)
{
	unsigned left;

	m &= NAMES_MASK;
	left = m;
	while (left) {
		unsigned i = (unsigned)__builtin_ctz(left);

		left &= left - 1;
		if (pos >= cfg->name_len[i] ||
		    (c | cfg->fold[i][pos]) != cfg->name[i][pos])
			m &= ~(1u << i);
	}
	return m;
}

static unsigned
match_resolve(const struct http_scan_config *cfg, unsigned m, unsigned pos)
{
	m &= NAMES_MASK;
	while (m) {
		unsigned i = (unsigned)__builtin_ctz(m);

		m &= m - 1;
		if (cfg->name_len[i] == pos)
			return i;
	}
	return FLD_NONE;
}

/* The capture's extra[] index of field f, which the callers bound: the
 * state may be shared by two threads reading one socket at once (an
 * application's; preload/conn.h), and f another thread's FLD_NONE (an
 * index of 251, 64 KiB past the capture).  Unsigned: a field below
 * FLD_EXTRA is out of range too. */
static inline unsigned
extra_k(unsigned f)
{
	return f - FLD_EXTRA;
}

/* A line starting with SP/HTAB continues the previous field. */
static void
obs_fold(struct http_scan *st, struct http_scan_capture *cap)
{
	unsigned f = st->field;

	st->flags |= HTTP_SCAN_F_OBS_FOLD;
	switch (f) {
	case FLD_NONE:
		break;
	case FLD_TP:
		st->flags |= HTTP_SCAN_F_TRACEPARENT_BAD;
		break;
	case FLD_TS:
		st->flags |= HTTP_SCAN_F_TRACESTATE_BAD;
		break;
	case FLD_CL:
	case FLD_TE:
		st->flags |= HTTP_SCAN_F_BAD_FRAMING;
		break;
	default:
		if (capturing(st) && extra_k(f) < HTTP_SCAN_EXTRA_MAX)
			cap->extra_bad |= (uint8_t)(1u << extra_k(f));
		break;
	}
}

/* The first value byte (after OWS) of field st->field.  False: ignore the
 * rest of the line. */
static bool
value_begin(struct http_scan *st, struct http_scan_capture *cap)
{
	unsigned f = st->field;

	switch (f) {
	case FLD_CL:
		if (st->flags & HTTP_SCAN_F_CONTENT_LENGTH) {
			st->flags |= HTTP_SCAN_F_BAD_FRAMING;
			return false;
		}
		st->flags |= HTTP_SCAN_F_CONTENT_LENGTH;
		st->n = 0;
		st->sub = CL_NONE;
		return true;
	case FLD_TE:
		st->flags |= HTTP_SCAN_F_TRANSFER_ENCODING;
		st->sub = 0;
		return true;
	default:
		break;
	}
	/* The capture may have been lost since the name matched. */
	if (!capturing(st))
		return false;
	if (f == FLD_TP) {
		if (st->flags & HTTP_SCAN_F_TRACEPARENT) {
			st->flags |= HTTP_SCAN_F_TRACEPARENT_BAD;
			return false;
		}
		st->flags |= HTTP_SCAN_F_TRACEPARENT;
		value_start(cap, cap->traceparent, sizeof(cap->traceparent), 0, "", 0);
	} else if (f == FLD_TS) {
		bool more = st->flags & HTTP_SCAN_F_TRACESTATE;

		st->flags |= HTTP_SCAN_F_TRACESTATE;
		/* Once the list overflowed, lines go to ts_long() (not even
		 * that once the list is known to be dropped). */
		if (cap->ts_checking)
			return !(st->flags & HTTP_SCAN_F_TRACESTATE_BAD);
		value_start(cap, cap->tracestate, sizeof(cap->tracestate),
			    cap->tracestate_len, ",", more ? 1 : 0);
	} else {
		unsigned k = extra_k(f);
		bool more;

		if (k >= HTTP_SCAN_EXTRA_MAX)
			return false;
		more = cap->extra_present & (1u << k);
		cap->extra_present |= (uint8_t)(1u << k);
		value_start(cap, cap->extra[k], sizeof(cap->extra[k]),
			    cap->extra_len[k], ", ", more ? 2 : 0);
	}
	return true;
}

static void
cl_bytes(struct http_scan *st, const uint8_t *s, const uint8_t *t)
{
	uint64_t n = st->n;
	unsigned sub = st->sub;

	if (!cl_digits(s, t, &n, &sub))
		st->flags |= HTTP_SCAN_F_BAD_FRAMING;
	st->n = n;
	st->sub = (uint8_t)sub;
}

static void
te_element_end(struct http_scan *st)
{
	if (st->sub == 0)
		return; /* empty list element */
	if (st->sub == TE_CHUNKED || st->sub == TE_CHUNKED_WS)
		st->flags |= HTTP_SCAN_F_CHUNKED;
	else
		st->flags &= (uint16_t)~HTTP_SCAN_F_CHUNKED;
	st->sub = 0;
}

static void
te_bytes(struct http_scan *st, const uint8_t *s, const uint8_t *t)
{
	static const char chunked[] = "chunked";
	unsigned sub = st->sub;

	for (; s < t; s++) {
		uint8_t c = *s;

		if (c == ',') {
			st->sub = (uint8_t)sub;
			te_element_end(st);
			sub = 0;
		} else if (is_trail_ws(c)) {
			if (sub == TE_CHUNKED)
				sub = TE_CHUNKED_WS;
			else if (sub != 0 && sub != TE_CHUNKED_WS)
				sub = TE_OTHER;
		} else if (sub < TE_CHUNKED && (c | 0x20) == chunked[sub]) {
			sub++;
		} else {
			sub = TE_OTHER;
		}
	}
	st->sub = (uint8_t)sub;
}

/* A tracestate list that does not fit the capture: from its first byte
 * on, the bytes go through a w3c_tracestate_check as well, since W3C
 * discards the whole list for an invalid member or a 33rd member anywhere,
 * including past the bytes we keep.  Set up here, the first time the
 * list overflows: what is stored so far (the earlier lines' values,
 * joined, then this line's bytes) is all of it, nothing having been cut
 * yet, so the check catches up from the buffer.  The buffer then holds
 * the list as W3C's truncation policy cuts it (ts_trunc), rewritten in
 * place from what it held: the cut list is never ahead of the bytes it
 * is made from.  Out of line and cold: lists that fit never come here. */
static __attribute__((noinline, cold)) void
ts_long(struct http_scan *st, struct http_scan_capture *cap, const uint8_t *s, size_t n)
{
	struct w3c_tracestate_check *c = &cap->ts_check;
	struct w3c_tracestate_trunc *t = &cap->ts_trunc;

	if (!cap->ts_checking) {
		/* cur_start read once, and at most at: a capture two threads
		 * fill (a head split across reads of one socket read from
		 * both; preload/conn.h) may have it changed by the other
		 * between the calls, and at - start would wrap. */
		size_t start = cap->cur_start, at = start + cap->cur_seen;

		if (at > sizeof(cap->tracestate))
			at = sizeof(cap->tracestate);
		if (start > at)
			start = at;
		cap->ts_checking = 1;
		memset(c, 0, sizeof(*c));
		w3c_tracestate_trunc_init(t);
		/* the earlier lines, a line boundary, then this line so far
		 * (its ',' separator, when stored, is an empty member) */
		(void)w3c_tracestate_check_feed(c, cap->tracestate, start);
		(void)w3c_tracestate_check_end(c, true);
		(void)w3c_tracestate_check_feed(c, cap->tracestate + start, at - start);
		w3c_tracestate_trunc_feed(t, cap->tracestate, sizeof(cap->tracestate),
					  cap->tracestate, start);
		w3c_tracestate_trunc_end(t, cap->tracestate, sizeof(cap->tracestate));
		w3c_tracestate_trunc_feed(t, cap->tracestate, sizeof(cap->tracestate),
					  cap->tracestate + start, at - start);
	}
	if (st->flags & HTTP_SCAN_F_TRACESTATE_BAD)
		return;
	w3c_tracestate_trunc_feed(t, cap->tracestate, sizeof(cap->tracestate),
				  (const char *)s, n);
	if (w3c_tracestate_check_feed(c, (const char *)s, n) < 0)
		st->flags |= HTTP_SCAN_F_TRACESTATE_BAD;
}

/* value_append() for the tracestate: the same, with the test for a list
 * that no longer fits (or is being checked) folded into its bounds check,
 * so that a usual tracestate costs what it did before the check.  Not
 * inline: value_bytes() then tail-calls it and needs no frame. */
static __attribute__((noinline)) void
ts_append(struct http_scan *st,
	  struct http_scan_capture *cap,
	  const uint8_t *s,
	  size_t n)
{
	size_t at = (size_t)cap->cur_start + cap->cur_seen, j = n;

	if (__builtin_expect(at + n > sizeof(cap->tracestate) || cap->ts_checking, 0)) {
		ts_long(st, cap, s, n);
		return;
	}
	memcpy(cap->tracestate + at, s, n);
	while (is_trail_ws(s[j - 1]))
		if (--j == 0)
			break;
	if (j > 0)
		cap->cur_last = cap->cur_seen + (uint32_t)j;
	cap->cur_seen += (uint32_t)n;
}

static void
value_bytes(struct http_scan *st,
	    struct http_scan_capture *cap,
	    const uint8_t *s,
	    const uint8_t *t)
{
	unsigned f = st->field;

	if (f == FLD_CL) {
		cl_bytes(st, s, t);
		return;
	}
	if (f == FLD_TE) {
		te_bytes(st, s, t);
		return;
	}
	if (!capturing(st) || s == t)
		return;
	if (f == FLD_TP)
		value_append(cap, cap->traceparent, sizeof(cap->traceparent), s,
			     (size_t)(t - s));
	else if (f == FLD_TS)
		ts_append(st, cap, s, (size_t)(t - s));
	else if (extra_k(f) < HTTP_SCAN_EXTRA_MAX)
		value_append(cap, cap->extra[extra_k(f)], sizeof(cap->extra[0]), s,
			     (size_t)(t - s));
}

/* The whole traceparent value [s, t) (its line's LF at t) just after
 * value_begin(): what value_append() and value_end() would do for it in
 * one piece, without their bookkeeping for values split across reads. */
static inline void
tp_value_whole(struct http_scan_capture *cap, const uint8_t *s, const uint8_t *t)
{
	size_t n = (size_t)(t - s), j = n, k;

	k = n < sizeof(cap->traceparent) ? n : sizeof(cap->traceparent);
	copy_short(cap->traceparent, s, k);
	/* the usual end: one CR (CRLF), after a value byte */
	if (__builtin_expect(j >= 2 && s[j - 1] == '\r' && !is_trail_ws(s[j - 2]), 1))
		j--;
	else
		while (j > 0 && is_trail_ws(s[j - 1]))
			j--;
	cap->traceparent_len = (uint8_t)w3c_traceparent_kept_len(
		cap->traceparent, j, sizeof(cap->traceparent));
}

/* The end of a tracestate line that did not fit, or of any line once the
 * list is being checked (ts_long()).  Out of line, as a tail call, so
 * that value_end() needs no stack frame for the call. */
static __attribute__((noinline, cold)) void
ts_long_end(struct http_scan *st, struct http_scan_capture *cap, size_t total)
{
	size_t len;

	if (!cap->ts_checking) {
		cap->tracestate_len = (uint16_t)(total < sizeof(cap->tracestate)
							 ? total
							 : sizeof(cap->tracestate));
		return;
	}
	if (w3c_tracestate_check_end(&cap->ts_check, true) < 0)
		st->flags |= HTTP_SCAN_F_TRACESTATE_BAD;
	/* Dropped whole: keep nothing.  The cut stops at the piece where the
	 * check failed (ts_long()), so what it holds depends on the reads. */
	if (st->flags & HTTP_SCAN_F_TRACESTATE_BAD) {
		cap->tracestate_len = 0;
		cap->tracestate_truncated = false;
		return;
	}
	w3c_tracestate_trunc_end(&cap->ts_trunc, cap->tracestate,
				 sizeof(cap->tracestate));
	/* Bounded: the cut's state is the capture's, which another feed may
	 * have written (ts_long()); the length is what readers copy. */
	len = cap->ts_trunc.len;
	cap->tracestate_len =
		(uint16_t)(len < sizeof(cap->tracestate) ? len
							 : sizeof(cap->tracestate));
	cap->tracestate_truncated = cap->ts_trunc.dropped != 0;
}

static void
value_end(struct http_scan *st, struct http_scan_capture *cap)
{
	unsigned f = st->field;
	size_t total;

	if (f == FLD_CL) {
		if (st->sub == CL_NONE)
			st->flags |= HTTP_SCAN_F_BAD_FRAMING;
		return;
	}
	if (f == FLD_TE) {
		te_element_end(st);
		return;
	}
	if (!capturing(st))
		return;
	total = (size_t)cap->cur_start + cap->cur_last;
	if (f == FLD_TP) {
		/* 64 bytes decide validity exactly (see the header), unless
		 * the cut leaves OWS for the parser to trim. */
		cap->traceparent_len = (uint8_t)w3c_traceparent_kept_len(
			cap->traceparent, total, sizeof(cap->traceparent));
	} else if (f == FLD_TS) {
		if (__builtin_expect(
			    total <= sizeof(cap->tracestate) && !cap->ts_checking, 1)) {
			cap->tracestate_len = (uint16_t)total;
			return;
		}
		ts_long_end(st, cap, total);
	} else {
		unsigned k = extra_k(f);

		if (k >= HTTP_SCAN_EXTRA_MAX)
			return;
		if (total > sizeof(cap->extra[k])) {
			total = sizeof(cap->extra[k]);
			cap->extra_truncated |= (uint8_t)(1u << k);
		}
		cap->extra_len[k] = (uint16_t)total;
	}
}

/* A whole line's value [s, t) of wanted field st->field (lines_fast()),
 * as PH_VOWS and PH_VALUE (or PH_SKIP) take it. */
static __attribute__((noinline)) void
lines_field(struct http_scan *st,
	    struct http_scan_capture *cap,
	    const uint8_t *s,
	    const uint8_t *t)
{
	if (!value_begin(st, cap))
		return;
	if (st->field == FLD_TP) {
		tp_value_whole(cap, s, t);
	} else {
		value_bytes(st, cap, s, t);
		value_end(st, cap);
	}
}

/* The header lines of a head whose request line request_line_fast() took,
 * while each is whole in [*pp, lim): lines we do not want (skipped),
 * wanted ones (taken with what the PH_VOWS and PH_VALUE phases do with a
 * whole line), up to the empty line.  Returns true with *pp after the
 * empty line when the head is complete; false with *pp at the start of a
 * line it left to the phases (a split line or name, a folded line, a bare
 * CR), which then continue from PH_LINE exactly as if they had scanned
 * the lines before.  Straight code without the phase switch, so that a
 * request's usual path is a few dense cache lines (bench/hot-lines.sh). */
static inline bool
lines_fast(struct http_scan *st,
	   const struct http_scan_config *cfg,
	   struct http_scan_capture *cap,
	   const uint8_t *p0,
	   const uint8_t **pp,
	   const uint8_t *lim)
{
	const uint8_t *p = *pp, *q, *nl;
	unsigned want = capturing(st) ? ~0u : FRAMING_MASK;

	while (p < lim) {
		uint8_t c = *p;
		unsigned m = cfg->first[c] & want, f;

		if (!m) {
			if (c <= ' ') {
				/* The table is 0 for CR, LF, SP and HTAB. */
				if (c == '\n') {
					*pp = p + 1;
					return true;
				}
				if (c == '\r' && lim - p >= 2 && p[1] == '\n') {
					*pp = p + 2;
					return true;
				}
				break;
			}
			f = FLD_NONE;
		} else {
			if ((size_t)(lim - p) <= cfg->max_name_len)
				break;
			f = match_fast(cfg, p, m);
		}
		if (f == FLD_NONE) {
			nl = find_lf(p0, p, lim);
			if (!nl)
				break;
			st->field = FLD_NONE;
			p = nl + 1;
			continue;
		}
		q = p + cfg->name_len[f] + 1;
		/* usually one SP, then the value */
		if (lim - q >= 2 && q[0] == ' ' && q[1] > ' ')
			q++;
		else
			while (q < lim && is_ows(*q))
				q++;
#if defined(__SSE2__)
		/* A version-00 traceparent (55 bytes) and CRLF: check that
		 * line end where it should be instead of searching for it. */
		if (f == FLD_TP && lim - q > W3C_TRACEPARENT_LEN + 1 &&
		    load16(q + W3C_TRACEPARENT_LEN) == 0x0a0d && !lf_in_tp(q))
			nl = q + W3C_TRACEPARENT_LEN + 1;
		else
#endif
			nl = q < lim ? find_lf(p0, q, lim) : NULL;
		if (!nl)
			break;
		/* What PH_VOWS, PH_VALUE (or PH_SKIP) do with the whole line;
		 * inline for the usual traceparent and Content-Length */
		st->field = (uint8_t)f;
		if (f == FLD_TP && !(st->flags & HTTP_SCAN_F_TRACEPARENT)) {
			/* value_begin() and value_start(), the whole value */
			st->flags |= HTTP_SCAN_F_TRACEPARENT;
			cap->cur_start = 0;
			cap->cur_seen = cap->cur_last = 0;
			tp_value_whole(cap, q, nl);
		} else if (f == FLD_CL && !(st->flags & HTTP_SCAN_F_CONTENT_LENGTH)) {
			/* value_begin(), value_bytes(), value_end() */
			st->flags |= HTTP_SCAN_F_CONTENT_LENGTH;
			st->n = 0;
			st->sub = CL_NONE;
			cl_bytes(st, q, nl);
			if (st->sub == CL_NONE)
				st->flags |= HTTP_SCAN_F_BAD_FRAMING;
		} else {
			lines_field(st, cap, q, nl);
		}
		p = nl + 1;
	}
	*pp = p;
	return false;
}

/* The empty line ending a head was consumed; `total` is the head length.
 * Decide the body framing. */
static inline enum http_scan_status
head_complete(struct http_scan *st, const struct http_scan_config *cfg, size_t total)
{
	unsigned flags = st->flags;

	/* the usual head: captured, no body, nothing to change */
	if (__builtin_expect(
		    (flags & (HTTP_SCAN_F_CAPTURED | HTTP_SCAN_F_TRANSFER_ENCODING |
			      HTTP_SCAN_F_CONTENT_LENGTH | HTTP_SCAN_F_BAD_FRAMING |
			      HTTP_SCAN_F_CHUNKED)) == HTTP_SCAN_F_CAPTURED &&
			    total <= cfg->max_head_bytes,
		    1)) {
		st->head_bytes = 0;
		st->pos = 0;
		st->phase = PH_REQ;
		return HTTP_SCAN_HEAD;
	}
	if (__builtin_expect(total > cfg->max_head_bytes, 0)) {
		if (flags & HTTP_SCAN_F_CAPTURED)
			flags &= ~(unsigned)HTTP_SCAN_F_CAPTURED;
		flags |= HTTP_SCAN_F_OVERSIZED;
	}
	if (!(flags & HTTP_SCAN_F_CAPTURED))
		flags &= ~(unsigned)HTTP_SCAN_F_CAPTURE_ONLY;

	st->head_bytes = 0;
	st->pos = 0;
	if (__builtin_expect(flags & HTTP_SCAN_F_TRANSFER_ENCODING, 0)) {
		/* RFC 9112 §6.1/§6.3: chunked must be the final coding; TE
		 * in HTTP/1.0 or with Content-Length is faulty framing. */
		if (!(flags & HTTP_SCAN_F_CHUNKED) ||
		    (flags & (HTTP_SCAN_F_CONTENT_LENGTH | HTTP_SCAN_F_HTTP10)))
			flags |= HTTP_SCAN_F_BAD_FRAMING;
	} else {
		flags &= ~(unsigned)HTTP_SCAN_F_CHUNKED;
	}
	st->flags = (uint16_t)flags;

	if (flags & HTTP_SCAN_F_BAD_FRAMING) {
		give_up(st, HTTP_SCAN_GIVE_UP_FRAMING);
	} else if (__builtin_expect(flags & HTTP_SCAN_F_CHUNKED, 0)) {
		st->phase = PH_CH_SIZE;
		st->n = 0;
	} else if ((flags & HTTP_SCAN_F_CONTENT_LENGTH) && st->n) {
		st->phase = PH_BODY;
	} else {
		st->phase = PH_REQ;
	}
	return HTTP_SCAN_HEAD;
}

/* The head phases, within [*pp, lim) (lim enforces give_up_bytes), from
 * phase ph at p (*pp <= p: http_scan_feed() may have taken bytes already;
 * the head's bytes count from *pp). */
static __attribute__((noinline)) enum http_scan_status
scan_phases(struct http_scan *st,
	    const struct http_scan_config *cfg,
	    struct http_scan_capture *cap,
	    const uint8_t **pp,
	    const uint8_t *p,
	    const uint8_t *lim,
	    unsigned ph)
{
	static const char version[] = "HTTP/1.";
	const uint8_t *const p0 = *pp;
	enum http_scan_status r = HTTP_SCAN_MORE;
	/* Header names worth matching: all while capturing, else only the
	 * framing ones.  Set where PH_LINE is entered (not per feed: a feed of
	 * one byte should not pay for it). */
	unsigned want;

	while (p < lim) {
		uint8_t c = *p;

		switch (ph) {
		case PH_REQ:
			if (c == '\r' || c == '\n') {
				p++;
				continue;
			}
			if ((unsigned)(c - 'A') >= 26u) {
				r = give_up(st, c == 0x16 ? HTTP_SCAN_GIVE_UP_TLS
							  : HTTP_SCAN_GIVE_UP_NOT_HTTP);
				goto out;
			}
			head_begin(st, cap);
			ph = request_line_fast(st, cap, &p, lim) ? PH_LINE : PH_METHOD;
			continue;

		case PH_METHOD: {
			unsigned mlen;

			if (!scan_method(st, cap, &p, lim)) {
				r = give_up(st, HTTP_SCAN_GIVE_UP_NOT_HTTP);
				goto out;
			}
			if (p == lim)
				continue;
			/* Read once and bounded: a shared state's st->pos
			 * (scan_method()) may be past the method buffer, and
			 * the length is what its readers copy. */
			mlen = st->pos;
			if (mlen > HTTP_SCAN_METHOD_MAX)
				mlen = HTTP_SCAN_METHOD_MAX;
			/* "PRI" is only ever the HTTP/2 connection preface. */
			if (mlen == 3 && st->n == 0x495250) {
				r = give_up(st, HTTP_SCAN_GIVE_UP_HTTP2);
				goto out;
			}
			if (capturing(st))
				cap->method_len = (uint8_t)mlen;
			st->flags |= (uint16_t)method_connect(st->n, mlen);
			p++;
			st->pos = 0;
			ph = PH_TARGET;
			continue;
		}

		case PH_TARGET:
			if (c == ' ' && !st->pos) {
				p++;
				continue;
			}
			p = scan_target(st, cap, p, lim);
			if (p == lim)
				continue;
			if (*p != ' ' || !st->pos) {
				r = give_up(st, HTTP_SCAN_GIVE_UP_NOT_HTTP);
				goto out;
			}
			p++;
			ph = PH_SP2;
			continue;

		case PH_SP2:
			if (c == ' ') {
				p++;
				continue;
			}
			st->pos = 0;
			ph = PH_VERSION;
			continue;

		case PH_VERSION: {
			/* Read once: the index checked is the index used (a
			 * shared state, as scan_method()). */
			unsigned vpos = st->pos;

			if (vpos < 7) {
				if (c != (uint8_t)version[vpos]) {
					r = give_up(st, HTTP_SCAN_GIVE_UP_NOT_HTTP);
					goto out;
				}
				st->pos = (uint8_t)(vpos + 1);
				p++;
				continue;
			}
			if (c == '0') {
				st->flags |= HTTP_SCAN_F_HTTP10;
			} else if (c != '1') {
				r = give_up(st, HTTP_SCAN_GIVE_UP_NOT_HTTP);
				goto out;
			}
			p++;
			ph = PH_RL_EOL;
			continue;
		}

		case PH_RL_EOL:
		case PH_RL_LF:
			if (c == '\r' && ph == PH_RL_EOL) {
				p++;
				ph = PH_RL_LF;
				continue;
			}
			if (c != '\n') {
				r = give_up(st, HTTP_SCAN_GIVE_UP_NOT_HTTP);
				goto out;
			}
			p++;
			st->n = 0;
			st->field = FLD_NONE;
			ph = PH_LINE;
			continue;

		case PH_LINE: {
			unsigned m, f;

			want = capturing(st) ? ~0u : FRAMING_MASK;
line:
			/* The table is 0 for CR, LF, SP and HTAB. */
			m = cfg->first[c] & want;
			if (!m) {
				if (c > ' ') {
					/* the common case: a header we do not
					 * want; its next line follows directly,
					 * without the dispatch at the loop top */
					st->field = FLD_NONE;
					if (!skip_line(p0, &p, lim)) {
						ph = PH_SKIP;
						continue;
					}
					if (p == lim)
						continue;
					c = *p;
					goto line;
				}
				if (c == '\n') {
					p++;
					r = head_complete(st, cfg,
							  st->head_bytes +
								  (size_t)(p - p0));
					*pp = p;
					return r;
				}
				if (c == '\r') {
					p++;
					ph = PH_END_LF;
					continue;
				}
				if (is_ows(c))
					obs_fold(st, cap);
				else
					st->field = FLD_NONE;
				if (!skip_line(p0, &p, lim))
					ph = PH_SKIP;
				continue;
			}
			if ((size_t)(lim - p) <= cfg->max_name_len) {
				/* The name may be split: byte at a time. */
				st->match = (uint16_t)m;
				st->pos = 0;
				ph = PH_NAME;
				continue;
			}
			f = match_fast(cfg, p, m);
			st->field = (uint8_t)f;
			if (f == FLD_NONE) {
				if (!skip_line(p0, &p, lim)) {
					ph = PH_SKIP;
					continue;
				}
				if (p == lim)
					continue;
				c = *p;
				goto line;
			}
			p += cfg->name_len[f] + 1;
			ph = PH_VOWS;
		}
			/* fallthrough */
		case PH_VOWS:
			while (p < lim && is_ows(*p))
				p++;
			if (p == lim)
				continue;
			if (!value_begin(st, cap)) {
				ph = PH_SKIP;
				continue;
			}
			ph = PH_VALUE;
			if (st->field == FLD_TP) {
				/* The traceparent of every traced request: when
				 * its whole line is here, capture it directly. */
				const uint8_t *nl = find_lf(p0, p, lim);

				if (nl) {
					tp_value_whole(cap, p, nl);
					p = nl + 1;
					ph = PH_LINE;
					if (p == lim)
						continue;
					c = *p;
					/* value_begin() captured it: capturing */
					want = ~0u;
					goto line;
				}
			}
			/* fallthrough */
		case PH_VALUE: {
			const uint8_t *nl = find_lf(p0, p, lim);

			value_bytes(st, cap, p, nl ? nl : lim);
			if (!nl) {
				p = lim;
				continue;
			}
			value_end(st, cap);
			p = nl + 1;
			ph = PH_LINE;
			continue;
		}

		case PH_NAME: {
			unsigned m;

			if (c == ':') {
				p++;
				st->field =
					(uint8_t)match_resolve(cfg, st->match, st->pos);
				ph = st->field == FLD_NONE ? PH_SKIP : PH_VOWS;
				continue;
			}
			if (c == '\n') {
				p++;
				st->field = FLD_NONE;
				ph = PH_LINE;
				continue;
			}
			m = match_narrow(cfg, st->match, st->pos, c);
			st->match = (uint16_t)m;
			st->pos++;
			p++;
			if (!m) {
				st->field = FLD_NONE;
				ph = PH_SKIP;
			}
			continue;
		}

		case PH_SKIP:
			if (skip_line(p0, &p, lim))
				ph = PH_LINE;
			continue;

		case PH_END_LF:
			if (c != '\n') {
				r = give_up(st, HTTP_SCAN_GIVE_UP_MALFORMED);
				goto out;
			}
			p++;
			r = head_complete(st, cfg, st->head_bytes + (size_t)(p - p0));
			*pp = p;
			return r;

		default:
			goto out;
		}
	}
out:
	if (r == HTTP_SCAN_MORE)
		st->phase = (uint8_t)ph;
	st->head_bytes += (uint32_t)(p - p0);
	/* Past the bound: stop capturing (the head is reported oversized). */
	if (st->head_bytes > cfg->max_head_bytes && capturing(st)) {
		st->flags &= (uint16_t)~HTTP_SCAN_F_CAPTURED;
		st->flags |= HTTP_SCAN_F_OVERSIZED;
	}
	*pp = p;
	return r;
}

static inline enum http_scan_status
scan_head(struct http_scan *st,
	  const struct http_scan_config *cfg,
	  struct http_scan_capture *cap,
	  const uint8_t **pp,
	  const uint8_t *lim)
{
	return scan_phases(st, cfg, cap, pp, *pp, lim, st->phase);
}

static void
message_end(struct http_scan *st)
{
	st->phase = PH_REQ;
	st->head_bytes = 0;
}

static void
chunk_next(struct http_scan *st)
{
	st->phase = PH_CH_SIZE;
	st->n = 0;
	st->pos = 0;
	st->head_bytes = 0;
}

int
http_scan_skip(struct http_scan *st, uint64_t len)
{
	if (!len)
		return 0;
	/* Body bytes are only counted: skipping them unseen is what a feed
	 * of them would do (feed_phases()). */
	if ((st->phase == PH_BODY || st->phase == PH_CH_DATA) && len <= st->n) {
		st->n -= len;
		if (!st->n) {
			if (st->phase == PH_BODY)
				message_end(st);
			else
				st->phase = PH_CH_CR;
		}
		return 0;
	}
	if (st->phase != PH_DEAD)
		give_up(st, HTTP_SCAN_GIVE_UP_CALLER);
	return -EPIPE;
}

/* Chunk-size lines and trailers, within [*pp, lim).  Returns to the caller
 * whenever the phase leaves the group or the byte count restarts. */
static __attribute__((noinline)) enum http_scan_status
scan_chunk_lines(struct http_scan *st, const uint8_t **pp, const uint8_t *lim)
{
	const uint8_t *p = *pp, *const p0 = p;
	enum http_scan_status r = HTTP_SCAN_MORE;

	while (p < lim) {
		uint8_t c = *p;
		int v;

		switch (st->phase) {
		case PH_CH_SIZE:
			v = hex_digit_value(c);
			if (v >= 0) {
				if (st->n >> 59) {
					r = give_up(st, HTTP_SCAN_GIVE_UP_MALFORMED);
					goto out;
				}
				st->n = st->n << 4 | (unsigned)v;
				st->pos = 1;
				p++;
				continue;
			}
			if (!st->pos ||
			    !(c == ';' || c == '\r' || c == '\n' || is_ows(c))) {
				r = give_up(st, HTTP_SCAN_GIVE_UP_MALFORMED);
				goto out;
			}
			st->phase = PH_CH_EXT;
			/* fallthrough */
		case PH_CH_EXT:
			if (!skip_line(p0, &p, lim))
				continue;
			if (st->n) {
				st->phase = PH_CH_DATA;
				goto out;
			}
			st->phase = PH_TR_LINE;
			continue;

		case PH_TR_LINE:
			if (c == '\n') {
				p++;
				goto end;
			}
			if (c == '\r') {
				p++;
				st->phase = PH_TR_LF;
				continue;
			}
			st->phase = PH_TR_SKIP;
			/* fallthrough */
		case PH_TR_SKIP:
			if (skip_line(p0, &p, lim))
				st->phase = PH_TR_LINE;
			continue;

		case PH_TR_LF:
			if (c != '\n') {
				r = give_up(st, HTTP_SCAN_GIVE_UP_MALFORMED);
				goto out;
			}
			p++;
			goto end;

		default:
			/* Entered in a phase outside the group, which no feed
			 * leaves: another thread's store (two threads reading
			 * one socket share its state, preload/conn.h), PH_DEAD
			 * among them.  Nothing would be taken, and the caller's
			 * loop would call again for ever (a read that never
			 * returns). */
			if (p == p0)
				r = give_up(st, HTTP_SCAN_GIVE_UP_CALLER);
			goto out;
		}
	}
out:
	st->head_bytes += (uint32_t)(p - p0);
	*pp = p;
	return r;
end:
	message_end(st);
	*pp = p;
	return HTTP_SCAN_MORE;
}

/* http_scan_feed() from p in [buf, buf + len). */
static __attribute__((noinline)) enum http_scan_status
feed_phases(struct http_scan *st,
	    const struct http_scan_config *cfg,
	    struct http_scan_capture *cap,
	    const uint8_t *const b,
	    const uint8_t *p,
	    size_t len,
	    size_t *consumed)
{
	const uint8_t *const e = b + len;

	if (st->phase == PH_DEAD) {
		*consumed = len;
		return HTTP_SCAN_MORE;
	}
	/* A head in progress must keep its capture (or a copy of it). */
	if (http_scan_in_head(st) && capturing(st) && (!cap || cap->owner != st)) {
		st->flags &= (uint16_t)~HTTP_SCAN_F_CAPTURED;
		st->flags |= HTTP_SCAN_F_CAPTURE_LOST;
	}

	while (p < e) {
		enum http_scan_status r;
		const uint8_t *lim;
		uint64_t k;
		uint32_t room;

		switch (st->phase) {
		case PH_BODY:
		case PH_CH_DATA:
			k = (uint64_t)(e - p) < st->n ? (uint64_t)(e - p) : st->n;
			p += k;
			st->n -= k;
			if (!st->n) {
				if (st->phase == PH_BODY)
					message_end(st);
				else
					st->phase = PH_CH_CR;
			}
			continue;
		case PH_CH_CR:
			if (*p == '\r') {
				p++;
				st->phase = PH_CH_LF;
				continue;
			}
			/* fallthrough */
		case PH_CH_LF:
			if (*p != '\n') {
				*consumed = (size_t)(p - b);
				return give_up(st, HTTP_SCAN_GIVE_UP_MALFORMED);
			}
			p++;
			chunk_next(st);
			continue;
		default:
			break;
		}

		/* Heads, chunk-size lines and trailers are bounded. */
		room = st->head_bytes < cfg->give_up_bytes
			       ? cfg->give_up_bytes - st->head_bytes
			       : 0;
		if (!room) {
			*consumed = (size_t)(p - b);
			return give_up(st, HTTP_SCAN_GIVE_UP_TOO_LONG);
		}
		lim = (size_t)(e - p) > room ? p + room : e;
		if (st->phase <= PH_END_LF)
			r = scan_head(st, cfg, cap, &p, lim);
		else
			r = scan_chunk_lines(st, &p, lim);
		if (r != HTTP_SCAN_MORE) {
			*consumed = (size_t)(p - b);
			return r;
		}
	}
	*consumed = len;
	return HTTP_SCAN_MORE;
}

/* The usual call -- a new head, its request line one request_line_fast()
 * takes and its lines ones lines_fast() takes, all in this read -- is
 * done here without the phase switch, so that its path is a few dense
 * cache lines (nginx: the shim's hot lines per request,
 * bench/hot-lines.sh).  Anything else goes on in scan_phases() from where
 * this stopped, exactly as if the phases had done it all (head_begin()
 * only sets fixed values, so the phases starting the head afresh is the
 * same), then in feed_phases(). */
__attribute__((hot, aligned(64))) enum http_scan_status
http_scan_feed(struct http_scan *st,
	       const struct http_scan_config *cfg,
	       struct http_scan_capture *cap,
	       const void *buf,
	       size_t len,
	       size_t *consumed)
{
	const uint8_t *const b = buf, *p = b, *q = b, *lim;
	enum http_scan_status r;
	unsigned ph;

	/* Not PH_DEAD, not in a head (no capture to check): the checks at
	 * the top of feed_phases() have nothing to do. */
	if (__builtin_expect(st->phase != PH_REQ || !len ||
				     (unsigned)(*b - 'A') >= 26u ||
				     st->head_bytes >= cfg->give_up_bytes,
			     0))
		return feed_phases(st, cfg, cap, b, b, len, consumed);
	/* What feed_phases() bounds the head to. */
	lim = len > cfg->give_up_bytes - st->head_bytes
		      ? b + (cfg->give_up_bytes - st->head_bytes)
		      : b + len;
	head_begin(st, cap);
	ph = PH_METHOD;
	if (__builtin_expect(request_line_fast(st, cap, &p, lim), 1)) {
		ph = PH_LINE;
		if (__builtin_expect(lines_fast(st, cfg, cap, b, &p, lim), 1)) {
			r = head_complete(st, cfg, st->head_bytes + (size_t)(p - b));
			*consumed = (size_t)(p - b);
			return r;
		}
	}
	rare_path();
	r = scan_phases(st, cfg, cap, &q, p, lim, ph);
	if (r != HTTP_SCAN_MORE) {
		*consumed = (size_t)(q - b);
		return r;
	}
	return feed_phases(st, cfg, cap, b, q, len, consumed);
}

int
http_scan_whole(struct http_scan *st,
		const struct http_scan_config *cfg,
		const void *buf,
		size_t len,
		struct http_scan_head *h)
{
	return http_scan_whole_inline(st, cfg, buf, len, h, false);
}

/* ---- responses ---- */

/* Line by line, not a state machine like the request scanner's: it runs
 * only on the rare writes that promote a pipelined request, over bytes
 * the caller has whole. */
size_t
http_response_len(const uint8_t *p, size_t n)
{
	static const char cl_name[] = "content-length:",
			  te_name[] = "transfer-encoding:";
	size_t i = 0, line, l, k, cl = SIZE_MAX;
	bool te = false;
	int status;

	if (n < 12 || memcmp(p, "HTTP/1.", 7) != 0 || p[8] != ' ' || p[9] < '1' ||
	    p[9] > '5' || p[10] < '0' || p[10] > '9' || p[11] < '0' || p[11] > '9')
		return 0;
	status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
	for (;;) {
		line = i;
		while (i < n && p[i] != '\n')
			i++;
		if (i >= n)
			return 0;
		l = i++ - line;
		if (l > 0 && p[line + l - 1] == '\r')
			l--;
		if (l == 0)
			break; /* the blank line: end of the head */
		for (k = 0; k < sizeof(cl_name) - 1 && k < l; k++)
			if ((p[line + k] | 0x20) != (uint8_t)cl_name[k])
				break;
		if (k == sizeof(cl_name) - 1) {
			size_t v = 0, d = 0;

			for (k = line + k;
			     k < line + l && (p[k] == ' ' || p[k] == '\t'); k++)
				;
			for (; k < line + l && p[k] >= '0' && p[k] <= '9'; k++, d++) {
				if (v > (SIZE_MAX - 9) / 10)
					return 0;
				v = v * 10 + (size_t)(p[k] - '0');
			}
			for (; k < line + l && (p[k] == ' ' || p[k] == '\t'); k++)
				;
			if (!d || k != line + l || (cl != SIZE_MAX && cl != v))
				return 0;
			cl = v;
		}
		for (k = 0; k < sizeof(te_name) - 1 && k < l; k++)
			if ((p[line + k] | 0x20) != (uint8_t)te_name[k])
				break;
		if (k == sizeof(te_name) - 1)
			te = true;
	}
	if (status < 200 || status == 204 || status == 304)
		return i;
	if (te || cl == SIZE_MAX || cl > SIZE_MAX - i)
		return 0;
	return i + cl;
}

/* Line by line, like http_response_len(): only on the write of a 101. */
size_t
http_response_h2c_head(const uint8_t *p, size_t n)
{
	static const char name[] = "upgrade";
	size_t i = 0, j, l, k;
	bool h2c = false;

	/* The status line, then the field lines, up to the empty line. */
	for (;;) {
		for (j = i; j < n && p[j] != '\n'; j++)
			;
		if (j >= n)
			return 0;
		l = j - i - (j > i && p[j - 1] == '\r');
		if (l == 0)
			return i > 0 && h2c ? j + 1 : 0;
		if (l > sizeof(name) && i > 0) {
			/* Letters without case, the colon as it is (| 0x20
			 * would take 0x1a for it). */
			for (k = 0; k < sizeof(name) - 1; k++)
				if ((p[i + k] | 0x20) != (uint8_t)name[k])
					break;
			if (k == sizeof(name) - 1 && p[i + k] == ':') {
				size_t a = i + k + 1, b = i + l;

				while (a < b && (p[a] == ' ' || p[a] == '\t'))
					a++;
				while (b > a && (p[b - 1] == ' ' || p[b - 1] == '\t'))
					b--;
				h2c = b - a == 3 && (p[a] | 0x20) == 'h' &&
				      p[a + 1] == '2' && (p[a + 2] | 0x20) == 'c';
			}
		}
		i = j + 1;
	}
}
