/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The HTTP head scanner's private parts (http-scan.c) that its fused
 * users compile into themselves: the request line parse, the name match,
 * the SSE2 searches and http_scan_whole_inline(), the body of
 * http_scan_whole().  Pure code, like the scanner: no I/O, no state.
 * Include only from http-scan.c and from the socket level's fused path
 * (preload/request-ctx.c), which inlines it to keep the head's values in
 * registers (B1). */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "http-scan.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Phases.  PH_REQ must be 0 so that zeroed memory is a fresh scanner; the
 * head phases are contiguous for http_scan_in_head(). */
enum {
	PH_REQ = 0, /* between messages: empty lines, then a method */
	PH_METHOD,
	PH_TARGET,
	PH_SP2, /* spaces before the version */
	PH_VERSION,
	PH_RL_EOL, /* after the version digit */
	PH_RL_LF,  /* after its CR */
	PH_LINE,   /* start of a header line */
	PH_NAME,   /* header name split across reads */
	PH_SKIP,   /* rest of an uninteresting line */
	PH_VOWS,   /* OWS before a wanted value */
	PH_VALUE,
	PH_END_LF, /* CR of the empty line ending the head */
	PH_BODY,   /* Content-Length body */
	PH_CH_SIZE,
	PH_CH_EXT, /* rest of the chunk-size line */
	PH_CH_DATA,
	PH_CH_CR, /* CRLF after chunk data */
	PH_CH_LF,
	PH_TR_LINE, /* start of a trailer line */
	PH_TR_SKIP,
	PH_TR_LF,
	PH_DEAD = HTTP_SCAN_PH_DEAD,
};
_Static_assert(PH_METHOD == HTTP_SCAN_PH_HEAD_FIRST, "head phases");
_Static_assert(PH_REQ == 0, "http_scan_at_start()");
_Static_assert(PH_END_LF == HTTP_SCAN_PH_HEAD_LAST, "head phases");

/* Header ids: index into the config's name table. */
enum {
	FLD_TP = 0,
	FLD_TS,
	FLD_CL,
	FLD_TE,
	FLD_EXTRA,
	FLD_NONE = 0xff,
};
#define FRAMING_MASK ((1u << FLD_CL) | (1u << FLD_TE))

/* Transfer-Encoding element states (st->sub): 0 empty so far, 1..7 a prefix
 * of "chunked", 8 "chunked" then OWS, 9 anything else. */
#define TE_CHUNKED    7
#define TE_CHUNKED_WS 8
#define TE_OTHER      9

/* Content-Length states (st->sub). */
#define CL_NONE     0
#define CL_DIGITS   1
#define CL_TRAILING 2

static inline bool
is_ows(uint8_t c)
{
	return c == ' ' || c == '\t';
}

/* Trimmed from the end of values: the CR of CRLF is part of the line. */
static inline bool
is_trail_ws(uint8_t c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

static inline uint64_t
load64(const void *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline uint16_t
load16(const void *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline uint32_t
load32(const void *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* The index of m's lowest set bit (m != 0), as an offset: gcc 12 sign-
 * extends __builtin_ctz()'s int on every use as one (a cltq per header
 * line).  A 32-bit tzcnt clears the upper half of its 64-bit register,
 * and is bsf on a CPU without BMI1: the same for m != 0. */
static inline size_t
lowest_bit(unsigned m)
{
#if defined(__x86_64__) && defined(__GNUC__)
	uint64_t r;

	__asm__("tzcnt %k1, %k0" : "=r"(r) : "r"(m) : "cc");
	return (size_t)r;
#else
	return (unsigned)__builtin_ctz(m);
#endif
}

#if defined(__SSE2__)
static inline __m128i
load128(const uint8_t *p)
{
	return _mm_loadu_si128((const __m128i *)(const void *)p);
}
#endif

/* Non-zero iff some byte of w is < 0x21 (SP, controls).  Exact as a yes/no
 * answer for thresholds <= 0x80, which is all the target scan needs. */
static inline uint64_t
has_ctl_or_sp(uint64_t w)
{
	return (w - 0x2121212121212121ull) & ~w & 0x8080808080808080ull;
}

static inline bool
name_eq(const uint8_t *p, const uint8_t *name, const uint8_t *fold, unsigned len)
{
	unsigned k;

	if (__builtin_expect(len >= 8, 1)) {
		for (k = 0; k + 8 < len; k += 8)
			if ((load64(p + k) | load64(fold + k)) != load64(name + k))
				return false;
		k = len - 8;
		return (load64(p + k) | load64(fold + k)) == load64(name + k);
	}
	if (len >= 4) {
		k = len - 4;
		return (load32(p) | load32(fold)) == load32(name) &&
		       (load32(p + k) | load32(fold + k)) == load32(name + k);
	}
	for (k = 0; k < len; k++)
		if ((p[k] | fold[k]) != name[k])
			return false;
	return true;
}

static inline bool
is_method_char(uint8_t c)
{
	return (unsigned)(c - 'A') < 26u || c == '-' || c == '_';
}

#if defined(__SSE2__)

/* Bit k set iff byte k of the 16 at p is <= 0x20 (SP, controls). */
static inline unsigned
ctl_or_sp_mask16(const uint8_t *p)
{
	__m128i x = load128(p);

	/* unsigned x <= 0x20 iff min(x, 0x20) == x: the mask without the
	 * inversion a max() test needs */
	return (unsigned)_mm_movemask_epi8(
		_mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(0x20)), x));
}
#endif

/* End of the target bytes (> 0x20) in [p, lim), 16 (SSE2) or 8 at a time.
 * [lo, lim) is readable (lo <= p): a short rest is then read as the last
 * 16 bytes before lim, never past it. */
static inline const uint8_t *
target_end(const uint8_t *lo, const uint8_t *p, const uint8_t *lim)
{
#if defined(__SSE2__)
	unsigned m;

	for (; lim - p >= 16; p += 16) {
		m = ctl_or_sp_mask16(p);
		if (m)
			return p + lowest_bit(m);
	}
	if (p < lim && lim - lo >= 16) {
		m = ctl_or_sp_mask16(lim - 16) >> (16 - (lim - p));
		return m ? p + lowest_bit(m) : lim;
	}
#else
	(void)lo;
#endif
	while (lim - p >= 8 && !has_ctl_or_sp(load64(p)))
		p += 8;
	while (p<lim && * p> ' ')
		p++;
	return p;
}

struct rline {
	const uint8_t *t;  /* the target */
	const uint8_t *q;  /* its end: the SP before the version */
	const uint8_t *nl; /* the line's LF */
	size_t mlen;       /* method bytes, from p */
	uint64_t v;        /* "HTTP/1.x" */
};

/* HTTP_SCAN_F_CONNECT for a method of mlen bytes whose first bytes are
 * the little-endian w (st->n while the method is read): the scanner
 * stays out of the answer, so the caller decides (http-scan.h). */
static inline unsigned
method_connect(uint64_t w, size_t mlen)
{
	return mlen == 7 && (w & 0x00ffffffffffffffull) == 0x005443454e4e4f43ull
		       ? HTTP_SCAN_F_CONNECT
		       : 0;
}

/* The parts of a plain request line whole in [p, lim) (the method's first
 * byte, at p, is A-Z): request_line_fast() and http_scan_whole() take the
 * same lines. */
static inline __attribute__((always_inline)) bool
request_line_parse(const uint8_t *p, const uint8_t *lim, struct rline *rl)
{
	const uint8_t *q, *t;
	uint64_t v;

	if (lim - p >= 4 && load32(p) == 0x20544547u) { /* "GET " */
		q = p + 3;
	} else {
		for (q = p; q < lim && is_method_char(*q); q++)
			;
		if (q == lim || *q != ' ' || q - p > HTTP_SCAN_METHOD_MAX ||
		    (q - p == 3 && p[0] == 'P' && p[1] == 'R' && p[2] == 'I'))
			return false;
	}
	rl->mlen = (size_t)(q - p);
	t = q + 1;
	q = target_end(p, t, lim);
	/* SP, "HTTP/1.x" and at least the LF must follow */
	if (q == t || lim - q < 10 || *q != ' ')
		return false;
	v = load64(q + 1);
	/* "HTTP/1.0" / "HTTP/1.1" as little-endian words */
	if ((v & ~0x0100000000000000ull) != 0x302e312f50545448ull)
		return false;
	if (lim - q >= 11 && load16(q + 9) == 0x0a0d) {
		rl->nl = q + 10;
	} else {
		rl->nl = q + 9;
		if (*rl->nl != '\n')
			return false;
	}
	rl->t = t;
	rl->q = q;
	rl->v = v;
	return true;
}

#if defined(__SSE2__)
/* Whether the 55 bytes at p (a version-00 traceparent's length) hold an
 * LF; p[0, 55) is readable. */
static inline bool
lf_in_tp(const uint8_t *p)
{
	const __m128i lf = _mm_set1_epi8('\n');
	__m128i x = _mm_or_si128(_mm_cmpeq_epi8(load128(p), lf),
				 _mm_cmpeq_epi8(load128(p + 16), lf));

	x = _mm_or_si128(x, _mm_cmpeq_epi8(load128(p + 32), lf));
	x = _mm_or_si128(x, _mm_cmpeq_epi8(load128(p + W3C_TRACEPARENT_LEN - 16), lf));
	return _mm_movemask_epi8(x) != 0;
}
#endif

/* The header id of the line at p among the candidates m (not 0), or
 * FLD_NONE; p[0, avail) is readable.  A candidate is compared only if its
 * name and ':' fit in those bytes (a longer name cannot be the line's:
 * the line ends before them), so a short line near the end of a read
 * needs no bound of the longest name. */
static inline unsigned
match_bounded(const struct http_scan_config *cfg,
	      const uint8_t *p,
	      unsigned m,
	      size_t avail)
{
	do {
		unsigned i = (unsigned)__builtin_ctz(m);
		unsigned len = cfg->name_len[i];

		m &= m - 1;
		if (len < avail && p[len] == ':' &&
		    name_eq(p, cfg->name[i], cfg->fold[i], len))
			return i;
	} while (m);
	return FLD_NONE;
}

/* Whole name available (every candidate's name and ':' readable at p):
 * the header id, or FLD_NONE. */
static inline unsigned
match_fast(const struct http_scan_config *cfg, const uint8_t *p, unsigned m)
{
	return match_bounded(cfg, p, m, SIZE_MAX);
}

/* What the feed's byte-at-a-time name phase (PH_NAME) leaves in
 * st->match for the whole header line at p, which starts with a byte of
 * candidates m: the candidates its name bytes narrow to, up to its ':' or
 * LF, 0 once none is left.  Out of the way: only for a line near the end
 * of a read. */
static __attribute__((noinline, cold, unused)) unsigned
near_match(const struct http_scan_config *cfg, const uint8_t *p, unsigned m)
{
	unsigned pos, left, i;

	for (pos = 0; m && p[pos] != ':' && p[pos] != '\n'; pos++)
		for (left = m; left; left &= left - 1) {
			i = (unsigned)__builtin_ctz(left);
			if (pos >= cfg->name_len[i] ||
			    (p[pos] | cfg->fold[i][pos]) != cfg->name[i][pos])
				m &= ~(1u << i);
		}
	return m;
}

#if defined(__SSE2__)
/* Whether every one of the 55 bytes at p (a version-00 traceparent's
 * length) is above SP (so none is an LF, and nothing is trimmed); p[0, 55)
 * is readable.  Conservative: a byte >= 0x80 anywhere may make it say no
 * (the caller then takes the line the general way, same result).  The
 * bytes' minimum, one signed compare: fewer instructions than an LF
 * compare per block. */
static inline bool
tp_plain(const uint8_t *p)
{
	__m128i m = _mm_min_epu8(
		_mm_min_epu8(load128(p), load128(p + 16)),
		_mm_min_epu8(load128(p + 32), load128(p + W3C_TRACEPARENT_LEN - 16)));

	return _mm_movemask_epi8(_mm_cmpgt_epi8(m, _mm_set1_epi8(' '))) == 0xffff;
}
#endif

/* Content-Length value bytes [s, t), continuing *n and *sub (CL_*):
 * digits, then trailing whitespace.  False at the first byte that makes
 * the framing bad (a list, a sign, junk, a length far beyond any body we
 * could skip); *n and *sub hold what came before it. */
static inline bool
cl_digits(const uint8_t *s, const uint8_t *t, uint64_t *np, unsigned *subp)
{
	uint64_t n = *np;
	unsigned sub = *subp;
	bool ok = true;

	for (; s < t; s++) {
		uint8_t c = *s;

		if ((unsigned)(c - '0') < 10u && sub != CL_TRAILING) {
			/* Far beyond any body we could skip. */
			if (n >> 56) {
				ok = false;
				break;
			}
			n = n * 10 + (c - '0');
			sub = CL_DIGITS;
		} else if (is_trail_ws(c)) {
			if (sub == CL_DIGITS)
				sub = CL_TRAILING;
		} else {
			/* Lists ("5, 5"), signs, junk: servers reject or differ. */
			ok = false;
			break;
		}
	}
	*np = n;
	*subp = sub;
	return ok;
}

/* ---- a whole head in one read, in place ---- */

#if defined(__SSE2__)
/* The first LF at or after p, where [p, e) is known to hold one and the
 * read is at least 16 bytes long: 32 or 16 bytes a step, the last step
 * re-reading the final 16 bytes before e, never past it. */
static inline const uint8_t *
lf_next(const uint8_t *p, const uint8_t *e)
{
	const __m128i lf = _mm_set1_epi8('\n');
	unsigned m;

	/* most header lines end within 32 bytes: one step */
	for (; e - p >= 32; p += 32) {
		m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(load128(p), lf)) |
		    (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(load128(p + 16), lf))
			    << 16;
		if (m)
			return p + lowest_bit(m);
	}
	for (; e - p >= 16; p += 16) {
		m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(load128(p), lf));
		if (m)
			return p + lowest_bit(m);
	}
	m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(load128(e - 16), lf)) >>
	    (16 - (e - p));
	return p + lowest_bit(m);
}
#endif

/* What the usual feed does for such a head -- http_scan_feed() (the
 * head_begin() values), request_line_fast(), lines_fast() with its
 * lines_field() calls for the wanted fields, head_complete()'s usual case
 * -- with the values left in place: the same request line parse, name
 * match and trimming rules.  Everything it does not take (see the header)
 * is left to the feed before st is written.  The values go to *h as they
 * are found (fewer registers live across the lines). */
static inline __attribute__((always_inline)) int
http_scan_whole_inline(struct http_scan *st,
		       const struct http_scan_config *cfg,
		       const void *buf,
		       size_t len,
		       struct http_scan_head *h,
		       bool ready)
{
#if defined(__SSE2__)
	const uint8_t *const b = buf, *const e = b + len, *p, *q, *v, *nl;
	unsigned field = FLD_NONE, seen = 0, flags;
	struct rline rl;
	size_t tl;

	/* ready: the caller made http_scan_whole_ready()'s tests; their
	 * length bound serves the request line's "GET " test too */
	if (ready && len < 16)
		__builtin_unreachable();
	if ((!ready && (!http_scan_at_start(st) || len < 16)) ||
	    len > cfg->max_head_bytes ||
	    /* A-Z first (request_line_parse()); "GET " is, and is the test
	     * it makes first (one load for both) */
	    (load32(b) != 0x20544547u && (unsigned)(b[0] - 'A') >= 26u) ||
	    (!ready && b[len - 1] != '\n') ||
	    /* the read ends with the empty line (CRLF CRLF, else LF LF or
	     * LF CRLF): a line loop that meets it first needs no test of
	     * the read's end */
	    (load32(e - 4) != 0x0a0d0a0du &&
	     !(e[-2] == '\n' || (e[-2] == '\r' && e[-3] == '\n'))) ||
	    !request_line_parse(b, e, &rl))
		return -EAGAIN;
	h->method = (const char *)b;
	h->method_len = (uint8_t)rl.mlen;
	h->target = (const char *)rl.t;
	tl = (size_t)(rl.q - rl.t);
	h->target_len =
		(uint16_t)(tl < HTTP_SCAN_TARGET_MAX ? tl : HTTP_SCAN_TARGET_MAX);
	/* the fields' flags are added as they are found (none to test at
	 * the end) */
	_Static_assert(HTTP_SCAN_F_HTTP10 == 1 << 3, "the version digit's bit 56");
	flags = (HTTP_SCAN_F_CAPTURED | HTTP_SCAN_F_HTTP10) ^
		(unsigned)(rl.v >> (56 - 3) & HTTP_SCAN_F_HTTP10);
	flags |= method_connect(load64(b), rl.mlen);
	h->traceparent = NULL;
	h->traceparent_len = 0;
	h->tracestate = NULL;
	h->tracestate_len = 0;
	h->content_length = 0;
	h->cl_state = CL_NONE;
	/* *h in memory from here on: what the caller needs of it after the
	 * lines is not kept in registers through them (an inlining caller's
	 * allocator otherwise spills the loop's own values, e included) */
	__asm__("" : "+m"(*h));
	/* Every line below ends with an LF before e, and the loop meets the
	 * read's final empty line before e (the request line ends before
	 * it: its LF follows "HTTP/1.x"). */
	for (p = rl.nl + 1;;) {
		unsigned c = *p, f, want = cfg->first[c];

		if (!want) {
			/* The table is 0 for CR, LF, SP and HTAB. */
			if (__builtin_expect(c <= ' ', 0)) {
				/* the empty line, the read's last bytes (its
				 * LF is b[len - 1]) */
				if (c == '\r' ? e - p == 2 : c == '\n' && e - p == 1)
					goto done;
				return -EAGAIN;
			}
			field = FLD_NONE;
			p = lf_next(p, e) + 1;
			continue;
		}
		if (__builtin_expect((size_t)(e - p) <= cfg->max_name_len, 0)) {
			/* Within the longest name of the read's end, the feed
			 * takes the line a byte at a time and leaves its
			 * candidates in st->match (kept in flags' high bits,
			 * bit 31 for "set", until the end); the names that fit
			 * are compared here all the same (match_bounded()). */
			flags = (flags & 0xffffu) | near_match(cfg, p, want) << 16 |
				1u << 31;
			if (e - p <= 12)
				goto other;
		}
		/* "traceparent:" in any case is what match_fast() finds first
		 * (FLD_TP is bit 0): the usual traced request's line, whole,
		 * without the loop over the candidates or the tests of the
		 * other fields */
		if (__builtin_expect((load64(p) | 0x2020202020202020ull) ==
						     0x7261706563617274ull &&
					     (load32(p + 8) | 0x00202020u) ==
						     0x3a746e65u,
				     1)) {
			q = p + sizeof("traceparent:") - 1;
			/* usually one SP, then the value */
			if (q[0] == ' ' && q[1] > ' ')
				q++;
			else
				while (is_ows(*q))
					q++;
			/* a second one: invalid (the feed's flags say so) */
			if (h->traceparent)
				return -EAGAIN;
			h->traceparent = (const char *)q;
			flags |= HTTP_SCAN_F_TRACEPARENT;
			field = FLD_TP;
			/* a version-00 value and CRLF: its line end where it
			 * should be, no byte <= SP before it (no LF, nothing
			 * to trim) */
			if (e - q > W3C_TRACEPARENT_LEN + 1 &&
			    load16(q + W3C_TRACEPARENT_LEN) == 0x0a0d && tp_plain(q)) {
				h->traceparent_len = W3C_TRACEPARENT_LEN;
				p = q + W3C_TRACEPARENT_LEN + 2;
				continue;
			}
			nl = lf_next(q, e);
			v = nl;
			while (v > q && is_trail_ws(v[-1]))
				v--;
			tl = (size_t)(v - q);
			h->traceparent_len = (uint8_t)w3c_traceparent_kept_len(
				(const char *)q, tl, HTTP_SCAN_TRACEPARENT_MAX);
			p = nl + 1;
			continue;
		}
other:
		/* Not traceparent (e - p <= 12 leaves no room for its line);
		 * each candidate's name and ':' must fit before e: a line
		 * near the end of the read that cannot hold one is skipped
		 * like any other.  Without FLD_TP the candidates are not 0:
		 * tracestate and transfer-encoding start with its 't'. */
		f = match_bounded(cfg, p, want & ~(1u << FLD_TP), (size_t)(e - p));
		if (f == FLD_NONE) {
			field = FLD_NONE;
			p = lf_next(p, e) + 1;
			continue;
		}
		q = p + cfg->name_len[f] + 1;
		field = f;
		if (q[0] == ' ' && q[1] > ' ')
			q++;
		else
			while (is_ows(*q))
				q++;
		if (f == FLD_TS) {
			if (h->tracestate)
				return -EAGAIN;
		} else if (f == FLD_TE || (seen & (1u << f))) {
			/* chunked bodies, repeated fields: the feed */
			return -EAGAIN;
		} else {
			seen |= 1u << f;
		}
		nl = lf_next(q, e);
		if (f == FLD_CL) {
			/* what the feed does with the line (lines_fast()):
			 * digits, trailing whitespace, its CR included (in *h:
			 * fewer registers live across the lines) */
			uint64_t n = 0;
			unsigned sub = CL_NONE;

			if (!cl_digits(q, nl, &n, &sub) || sub == CL_NONE)
				return -EAGAIN;
			h->content_length = n;
			h->cl_state = (uint8_t)sub;
			flags |= HTTP_SCAN_F_CONTENT_LENGTH;
			p = nl + 1;
			continue;
		}
		v = nl;
		while (v > q && is_trail_ws(v[-1]))
			v--;
		tl = (size_t)(v - q);
		if (f == FLD_TS) {
			if (nl - q > HTTP_SCAN_TRACESTATE_MAX)
				return -EAGAIN;
			h->tracestate = (const char *)q;
			h->tracestate_len = (uint16_t)tl;
			flags |= HTTP_SCAN_F_TRACESTATE;
		} else {
			h->extra[f - FLD_EXTRA] = (const char *)q;
			h->extra_len[f - FLD_EXTRA] =
				(uint16_t)(tl < HTTP_SCAN_VALUE_MAX
						   ? tl
						   : HTTP_SCAN_VALUE_MAX);
		}
		p = nl + 1;
	}
done:
	h->flags = (uint16_t)flags;
	h->extra_present = (uint8_t)(seen >> FLD_EXTRA);
	/* head_begin(), the lines' fields, head_complete(): a
	 * Content-Length body (not in this read) comes next */
	st->n = h->content_length;
	st->flags = (uint16_t)flags;
	st->pos = 0;
	st->field = (uint8_t)field;
	st->sub = h->cl_state;
	if (__builtin_expect(flags >> 16 != 0, 0))
		st->match = (uint16_t)(flags >> 16 & 0x7fffu);
	if (__builtin_expect(h->content_length != 0, 0))
		st->phase = PH_BODY;
	return 0;
#else
	(void)st;
	(void)cfg;
	(void)buf;
	(void)len;
	(void)h;
	return -EAGAIN;
#endif
}
