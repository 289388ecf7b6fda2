/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "w3c.h"

/* Offsets inside a traceparent value: vv-<32>-<16>-ff */
#define TP_TRACE_OFF  3
#define TP_PARENT_OFF 36
#define TP_FLAGS_OFF  53

static inline uint16_t
load16(const char *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static const char hex_digits[] = "0123456789abcdef";

/* Digit value + 1 for HEXDIGLC, 0 for everything else (the spec forbids
 * uppercase, so 'A' is as bad as 'g'). */
static const uint8_t hex_tab[256] = {
	['0'] = 1,  ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,
	['6'] = 7,  ['7'] = 8,  ['8'] = 9,  ['9'] = 10, ['a'] = 11, ['b'] = 12,
	['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
};

static bool
is_ows(char c)
{
	return c == ' ' || c == '\t';
}

/* Inline: its out-parameters would otherwise live on the stack, on the
 * path of every traceparent (B4). */
static inline __attribute__((always_inline)) void
trim_ows(const char **s, size_t *len)
{
	const char *p = *s;
	size_t n = *len;

	while (n > 0 && is_ows(p[0])) {
		p++;
		n--;
	}
	while (n > 0 && is_ows(p[n - 1]))
		n--;
	*s = p;
	*len = n;
}

#if defined(__SSE2__)
/* Eight bytes to sixteen lowercase hex digits with SSE2 (part of the
 * x86_64 baseline): the shim encodes the incoming parent-id of every
 * traced request (the ctxshim.parent_span_id attribute), and the loop
 * below costs ~6 instructions a byte (B4).  The nibbles are interleaved
 * high-first and mapped to ASCII with one compare: '0' + n, plus
 * 'a' - '0' - 10 for n > 9. */
static inline void
hex_encode8_sse2(char out[16], const uint8_t in[8])
{
	const __m128i lo4 = _mm_set1_epi8(0x0f);
	__m128i v = _mm_loadl_epi64((const __m128i *)(const void *)in);
	__m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), lo4);
	__m128i nib = _mm_unpacklo_epi8(hi, _mm_and_si128(v, lo4));
	__m128i alpha = _mm_and_si128(_mm_cmpgt_epi8(nib, _mm_set1_epi8(9)),
				      _mm_set1_epi8('a' - '0' - 10));

	nib = _mm_add_epi8(_mm_add_epi8(nib, _mm_set1_epi8('0')), alpha);
	_mm_storeu_si128((__m128i *)(void *)out, nib);
}
#endif

void
w3c_hex_encode(char *out, const uint8_t *in, size_t n)
{
	size_t i = 0;

#if defined(__SSE2__)
	for (; i + 8 <= n; i += 8)
		hex_encode8_sse2(out + 2 * i, in + i);
#endif
	for (; i < n; i++) {
		out[2 * i] = hex_digits[in[i] >> 4];
		out[2 * i + 1] = hex_digits[in[i] & 0x0f];
	}
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* Eight HEXDIGLC characters to four bytes with word arithmetic (SWAR): the
 * socket level decodes every incoming traceparent, and a loop with a table
 * load per digit cost ~20 instructions a character (B4).  Byte-wise range
 * tests add (0x80 - k) to each byte, which cannot carry into the next byte
 * once bytes with the high bit set are rejected.  Returns false on any
 * character outside [0-9a-f]. */
static inline bool
hex8(const char *in, uint8_t out[4])
{
	const uint64_t hi = 0x8080808080808080ull, ones = 0x0101010101010101ull;
	uint64_t x, ge30, ge3a, ge61, ge67, digit, alpha, nib, y;
	uint32_t v;

	memcpy(&x, in, 8);
	ge30 = (x + 0x50 * ones) & hi;
	ge3a = (x + 0x46 * ones) & hi;
	ge61 = (x + 0x1f * ones) & hi;
	ge67 = (x + 0x19 * ones) & hi;
	digit = ge30 & ~ge3a;
	alpha = ge61 & ~ge67;
	if ((x & hi) || (digit | alpha) != hi)
		return false;
	nib = (x & 0x0f * ones) + (alpha >> 7) * 9;
	y = ((nib << 4) | (nib >> 8)) & 0x00ff00ff00ff00ffull;
	y = (y | (y >> 8)) & 0x0000ffff0000ffffull;
	v = (uint32_t)(y | (y >> 16));
	memcpy(out, &v, 4);
	return true;
}
#endif

#if defined(__SSE2__)
/* Sixteen HEXDIGLC characters to eight bytes with SSE2: twice the width of
 * hex8() for about half its instructions per block, so a traceparent's
 * trace-id and parent-id take three blocks (B4).  Range tests are unsigned:
 * c - lo (wrapping) is at most hi - lo exactly when c is in [lo, hi], and
 * t <= k exactly when the saturating t - k is 0.  Returns false on any
 * character outside [0-9a-f]. */
static inline bool
hex16_sse2(const char *in, uint8_t out[8])
{
	const __m128i zero = _mm_setzero_si128();
	__m128i x = _mm_loadu_si128((const __m128i *)(const void *)in);
	__m128i digit = _mm_cmpeq_epi8(
		_mm_subs_epu8(_mm_sub_epi8(x, _mm_set1_epi8('0')), _mm_set1_epi8(9)),
		zero);
	__m128i alpha = _mm_cmpeq_epi8(
		_mm_subs_epu8(_mm_sub_epi8(x, _mm_set1_epi8('a')), _mm_set1_epi8(5)),
		zero);
	__m128i nib, pair;

	if (_mm_movemask_epi8(_mm_or_si128(digit, alpha)) != 0xffff)
		return false;
	nib = _mm_add_epi8(_mm_and_si128(x, _mm_set1_epi8(0x0f)),
			   _mm_and_si128(alpha, _mm_set1_epi8(9)));
	/* Each 16-bit lane holds a digit pair, the first (high) nibble in its
	 * low byte: (first << 4) | second, then narrow the lanes to bytes. */
	pair = _mm_and_si128(
		_mm_or_si128(_mm_slli_epi16(nib, 4), _mm_srli_epi16(nib, 8)),
		_mm_set1_epi16(0x00ff));
	_mm_storel_epi64((__m128i *)(void *)out, _mm_packus_epi16(pair, pair));
	return true;
}
#endif

/* Decodes 2 * n hex digits into out, which may be written even when the
 * input turns out to be invalid.  Returns false then. */
static inline __attribute__((always_inline)) bool
hex_decode_raw(uint8_t *out, const char *in, size_t n)
{
	unsigned bad = 0;
	size_t i = 0;

#if defined(__SSE2__)
	/* Unrolled: ids are one or two blocks, and the loop's bookkeeping
	 * costs as much as the SSE2 work. */
#pragma GCC unroll 2
	for (; i + 8 <= n; i += 8)
		if (!hex16_sse2(in + 2 * i, out + i))
			return false;
#endif
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	for (; i + 4 <= n; i += 4)
		if (!hex8(in + 2 * i, out + i))
			return false;
#endif
	for (; i < n; i++) {
		unsigned h = hex_tab[(unsigned char)in[2 * i]] - 1u;
		unsigned l = hex_tab[(unsigned char)in[2 * i + 1]] - 1u;

		bad |= h | l;
		out[i] = (uint8_t)(h << 4 | (l & 0x0f));
	}
	return !(bad & ~0x0fu);
}

int
w3c_hex_decode(uint8_t *out, const char *in, size_t n_bytes)
{
	uint8_t tmp[16];
	size_t i;

	/* out stays untouched unless the whole input is valid: ids (at most
	 * 16 bytes) go through tmp, anything longer is validated first. */
	if (n_bytes <= sizeof(tmp)) {
		if (!hex_decode_raw(tmp, in, n_bytes))
			return -EINVAL;
		for (i = 0; i < n_bytes; i++)
			out[i] = tmp[i];
		return 0;
	}
	for (i = 0; i < n_bytes; i += sizeof(tmp)) {
		size_t n = n_bytes - i < sizeof(tmp) ? n_bytes - i : sizeof(tmp);

		if (!hex_decode_raw(tmp, in + 2 * i, n))
			return -EINVAL;
	}
	(void)hex_decode_raw(out, in, n_bytes);
	return 0;
}

bool
w3c_id_is_zero(const uint8_t *id, size_t n)
{
	uint64_t acc = 0, w;
	size_t i = 0;

	/* Word loads: ids are 8 or 16 bytes, checked on every request. */
	for (; i + 8 <= n; i += 8) {
		memcpy(&w, id + i, 8);
		acc |= w;
	}
	for (; i < n; i++)
		acc |= id[i];
	return acc == 0;
}

/* One hex digit pair (the version and the flags of a traceparent), with a
 * single validity test instead of hex_decode_raw()'s generic loop. */
static inline bool
hex_pair(const char *in, uint8_t *out)
{
	unsigned h = hex_tab[(unsigned char)in[0]], l = hex_tab[(unsigned char)in[1]];

	*out = (uint8_t)((h - 1) << 4 | ((l - 1) & 0x0f));
	return h != 0 && l != 0;
}

/* The v00 fast path needs SSE2 and a 64-bit register for the parent-id. */
#if defined(__SSE2__) && defined(__x86_64__)
#define TP_FAST_V00 1
#endif

#if defined(TP_FAST_V00)
/* Sixteen characters: returns their digit values (garbage where a character
 * is not HEXDIGLC) and in *key a byte <= 9 exactly where it is HEXDIGLC
 * (the caller tests the maximum of all blocks once).  With t = c - '0'
 * (wrapping) and a = u + 4 saturating, u = c - 'a' (wrapping): a digit has
 * t <= 9, a letter a in 4..9, anything else both >= 10 (the saturation
 * keeps u = 0xfc..0xff, "]^_`", from wrapping to 0..3), so key = min(t, a).
 * The digit value is min(t, a + 6): for a digit a is >= 0xd3 (a + 6 does
 * not wrap), for a letter t is >= 0x31.  Eight operations a block where
 * two separate range tests took ten (B4). */
static inline __m128i
tp_nibbles(__m128i x, __m128i *key)
{
	__m128i t = _mm_sub_epi8(x, _mm_set1_epi8('0'));
	__m128i a = _mm_adds_epu8(_mm_sub_epi8(t, _mm_set1_epi8('a' - '0')),
				  _mm_set1_epi8(4));

	*key = _mm_min_epu8(t, a);
	return _mm_min_epu8(t, _mm_add_epi8(a, _mm_set1_epi8(6)));
}

/* Digit pairs to bytes: a 16-bit lane holds f + 256 * s (f, the first
 * digit, is the high nibble); times 0x1001 its high byte is 16 * f + s
 * (the f * 4096 term lands there, s * 2^20 falls off).  One multiply and
 * one shift instead of two shifts, an OR and a mask (no pmaddubsw in
 * SSE2).  The result is in each lane's low byte, ready for packus. */
static inline __m128i
tp_pairs(__m128i n, __m128i k1001)
{
	return _mm_srli_epi16(_mm_mullo_epi16(n, k1001), 8);
}

static inline __m128i
tp_load(const char *p)
{
	return _mm_loadu_si128((const __m128i *)(const void *)p);
}

/* The two flag digits: entry [0][c] is the digit value of c shifted to
 * the high nibble, [1][c] the value; 0x100 for anything not HEXDIGLC.  OR
 * the two and the byte is done, with one compare for validity: half the
 * instructions of hex_pair() on the path of every traced request (B4). */
#define TP_HEXV(c)                                   \
	((c) >= '0' && (c) <= '9'   ? (c) - '0'      \
	 : (c) >= 'a' && (c) <= 'f' ? (c) - 'a' + 10 \
				    : -1)
#define TP_FLAG(c, sh) (TP_HEXV(c) < 0 ? 0x100 : (TP_HEXV(c) & 0x0f) << (sh))
#define TP_FLAG4(c, sh) \
	TP_FLAG(c, sh), TP_FLAG((c) + 1, sh), TP_FLAG((c) + 2, sh), TP_FLAG((c) + 3, sh)
#define TP_FLAG16(c, sh)                                               \
	TP_FLAG4(c, sh), TP_FLAG4((c) + 4, sh), TP_FLAG4((c) + 8, sh), \
		TP_FLAG4((c) + 12, sh)
#define TP_FLAG64(c, sh)                                                    \
	TP_FLAG16(c, sh), TP_FLAG16((c) + 16, sh), TP_FLAG16((c) + 32, sh), \
		TP_FLAG16((c) + 48, sh)
#define TP_FLAG256(sh) \
	TP_FLAG64(0, sh), TP_FLAG64(64, sh), TP_FLAG64(128, sh), TP_FLAG64(192, sh)
static const uint16_t tp_flag_tab[2][256] = {{TP_FLAG256(4)}, {TP_FLAG256(0)}};

/* A value of exactly 55 characters starting "00-" (what every traced
 * request carries): the whole parse in three 16-byte blocks, about half
 * the instructions of the generic path below (B4).  The blocks start at
 * the ids (3, 19, 36) so that digit pairs sit in 16-bit lanes; the
 * dashes and the flags are tested as scalars.  Only bytes 0..54 are read.
 * Same results as the generic path for these inputs: nothing to trim
 * (byte 0 is '0', byte 54 must be a digit), version 00, and every other
 * rule is checked here. */
static inline __attribute__((always_inline)) int
tp_parse_v00_sse2(const char *s, struct w3c_traceparent *out)
{
	__m128i key1, key2, key3, n1, n2, n3, trace, parent;
	__m128i k1001 = _mm_set1_epi16(0x1001);
	unsigned flags;
	uint64_t pid;

	/* Hide the multiplier: gcc would turn the multiply into a shift and
	 * an add, one more instruction per block. */
	__asm__("" : "+x"(k1001));
	if (s[TP_PARENT_OFF - 1] != '-' || s[TP_FLAGS_OFF - 1] != '-')
		return -EINVAL;
	n1 = tp_nibbles(tp_load(s + TP_TRACE_OFF), &key1);
	n2 = tp_nibbles(tp_load(s + TP_TRACE_OFF + 16), &key2);
	n3 = tp_nibbles(tp_load(s + TP_PARENT_OFF), &key3);
	/* every key <= 9: their maximum + 0x76 (saturating) has no byte with
	 * its high bit set, which movemask reads without a compare */
	key1 = _mm_adds_epu8(_mm_max_epu8(key1, _mm_max_epu8(key2, key3)),
			     _mm_set1_epi8(0x80 - 10));
	flags = tp_flag_tab[0][(unsigned char)s[TP_FLAGS_OFF]] |
		tp_flag_tab[1][(unsigned char)s[TP_FLAGS_OFF + 1]];
	if (_mm_movemask_epi8(key1) != 0 || flags > 0xff)
		return -EINVAL;
	trace = _mm_packus_epi16(tp_pairs(n1, k1001), tp_pairs(n2, k1001));
	parent = tp_pairs(n3, k1001);
	pid = (uint64_t)_mm_cvtsi128_si64(_mm_packus_epi16(parent, parent));
	if (_mm_movemask_epi8(_mm_cmpeq_epi8(trace, _mm_setzero_si128())) == 0xffff ||
	    pid == 0)
		return -EINVAL;
	out->version = 0;
	_mm_storeu_si128((__m128i *)(void *)out->trace_id, trace);
	memcpy(out->parent_id, &pid, sizeof(pid));
	out->flags = (uint8_t)flags;
	return 0;
}
#endif

/* Every other form (and every form without SSE2): out of line, so that
 * its register needs do not cost the fast path above a prologue. */
static __attribute__((noinline)) int
tp_parse_generic(const char *s, size_t len, struct w3c_traceparent *out)
{
	struct w3c_traceparent tp;

	trim_ows(&s, &len);
	if (len < W3C_TRACEPARENT_LEN)
		return -EINVAL;
	/* tp is ours until the end, so decode straight into it. */
	if (!hex_pair(s, &tp.version) || s[2] != '-')
		return -EINVAL;
	if (tp.version == 0xff)
		return -EINVAL;
	/* v00 has exactly four fields; a later version may append fields, each
	 * introduced by '-', which we must not try to interpret. */
	if (tp.version == 0x00 && len != W3C_TRACEPARENT_LEN)
		return -EINVAL;
	if (len > W3C_TRACEPARENT_LEN && s[W3C_TRACEPARENT_LEN] != '-')
		return -EINVAL;
	if (s[TP_PARENT_OFF - 1] != '-' || s[TP_FLAGS_OFF - 1] != '-')
		return -EINVAL;
	if (!hex_decode_raw(tp.trace_id, s + TP_TRACE_OFF, W3C_TRACE_ID_SIZE) ||
	    !hex_decode_raw(tp.parent_id, s + TP_PARENT_OFF, W3C_PARENT_ID_SIZE) ||
	    !hex_pair(s + TP_FLAGS_OFF, &tp.flags))
		return -EINVAL;
	if (w3c_id_is_zero(tp.trace_id, W3C_TRACE_ID_SIZE) ||
	    w3c_id_is_zero(tp.parent_id, W3C_PARENT_ID_SIZE))
		return -EINVAL;
	/* flag bits defined after our Level may mean anything in a future
	 * version; for v00 they are reserved and we keep what we got (the
	 * formatter clears them on the way out) */
	if (tp.version != 0x00)
		tp.flags &= W3C_FLAGS_KNOWN;
	*out = tp;
	return 0;
}

int
w3c_traceparent_parse(const char *s, size_t len, struct w3c_traceparent *out)
{
	if (!s || !out)
		return -EINVAL;
#if defined(TP_FAST_V00)
	/* "00-" as one 16-bit and one 8-bit compare */
	if (len == W3C_TRACEPARENT_LEN && load16(s) == ('0' | '0' << 8) && s[2] == '-')
		return tp_parse_v00_sse2(s, out);
#endif
	return tp_parse_generic(s, len, out);
}

size_t
w3c_traceparent_format(char out[W3C_TRACEPARENT_LEN + 1],
		       const uint8_t trace_id[W3C_TRACE_ID_SIZE],
		       const uint8_t span_id[W3C_PARENT_ID_SIZE],
		       uint8_t flags)
{
	uint8_t f = flags & W3C_FLAGS_KNOWN;

	out[0] = '0';
	out[1] = '0';
	out[2] = '-';
	w3c_hex_encode(out + TP_TRACE_OFF, trace_id, W3C_TRACE_ID_SIZE);
	out[TP_PARENT_OFF - 1] = '-';
	w3c_hex_encode(out + TP_PARENT_OFF, span_id, W3C_PARENT_ID_SIZE);
	out[TP_FLAGS_OFF - 1] = '-';
	w3c_hex_encode(out + TP_FLAGS_OFF, &f, 1);
	out[W3C_TRACEPARENT_LEN] = '\0';
	return W3C_TRACEPARENT_LEN;
}

static bool
is_lcalpha_digit(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool
w3c_tracestate_key_valid(const char *key, size_t len)
{
	if (!key || len == 0 || len > W3C_TRACESTATE_KEY_MAX)
		return false;
	if (!is_lcalpha_digit(key[0]))
		return false;
	for (size_t i = 1; i < len; i++) {
		char c = key[i];

		if (!is_lcalpha_digit(c) && c != '_' && c != '-' && c != '*' &&
		    c != '/' && c != '@')
			return false;
	}
	return true;
}

bool
w3c_tracestate_value_valid(const char *value, size_t len)
{
	if (!value || len == 0 || len > W3C_TRACESTATE_VALUE_MAX)
		return false;
	if (value[len - 1] == ' ')
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)value[i];

		if (c < 0x20 || c > 0x7e || c == ',' || c == '=')
			return false;
	}
	return true;
}

/* One list member as it appears between commas, OWS included. */
static int
ts_add_member(struct w3c_tracestate *ts, const char *m, size_t len)
{
	const char *eq;
	size_t klen;

	trim_ows(&m, &len);
	if (len == 0)
		return 0; /* empty members are allowed and skipped */
	eq = memchr(m, '=', len);
	if (!eq)
		return -EINVAL;
	klen = (size_t)(eq - m);
	if (!w3c_tracestate_key_valid(m, klen) ||
	    !w3c_tracestate_value_valid(eq + 1, len - klen - 1))
		return -EINVAL;
	if (ts->n == W3C_TRACESTATE_MAX_MEMBERS)
		return -EINVAL;
	ts->member[ts->n].key = m;
	ts->member[ts->n].key_len = (uint16_t)klen;
	ts->member[ts->n].value = eq + 1;
	ts->member[ts->n].value_len = (uint16_t)(len - klen - 1);
	ts->n++;
	return 0;
}

int
w3c_tracestate_parse(const char *const *lines,
		     const size_t *lens,
		     size_t n_lines,
		     struct w3c_tracestate *out)
{
	struct w3c_tracestate ts;

	if (!out || (n_lines > 0 && (!lines || !lens)))
		return -EINVAL;
	ts.n = 0;
	/* Joining the lines with ',' puts a list boundary between them, so a
	 * member never spans two lines and each line can be split on its own. */
	for (size_t l = 0; l < n_lines; l++) {
		const char *p = lines[l];
		size_t len = lens[l], i = 0;

		if (len > 0 && !p)
			return -EINVAL;
		for (;;) {
			size_t start = i;
			int r;

			while (i < len && p[i] != ',')
				i++;
			r = ts_add_member(&ts, p + start, i - start);
			if (r < 0)
				return r;
			if (i >= len)
				break;
			i++;
		}
	}
	*out = ts;
	return 0;
}

/* w3c_tracestate_check states: between members (OWS, empty members), in a
 * key, in a value, and the verdict "invalid" (sticky). */
enum {
	TSC_START = 0,
	TSC_KEY,
	TSC_VALUE,
	TSC_BAD = 0xff,
};
#define TSC_PEND_TAB 1 /* a HTAB in the OWS after the value so far */
#define TSC_PEND_CR  2 /* a CR there (or, between members, at all) */

/* Character classes of the tracestate grammar, one table lookup a byte. */
#define TSC_KEYSTART     1 /* lcalpha / DIGIT */
#define TSC_KEYCHAR      2 /* and "_" / "-" / "*" / "/" / "@" */
#define TSC_NBLK         4 /* nblk-chr: %x21-2B / %x2D-3C / %x3E-7E */
#define TSC_N            TSC_NBLK
#define TSC_K            (TSC_KEYCHAR | TSC_NBLK)
#define TSC_S            (TSC_KEYSTART | TSC_KEYCHAR | TSC_NBLK)
#define TSC_R(lo, hi, v) [(lo)...(hi)] = (v)
static const uint8_t tsc_class[256] = {
	TSC_R('!', ')', TSC_N), ['*'] = TSC_K,          ['+'] = TSC_N,
	['-'] = TSC_K,          ['.'] = TSC_N,          ['/'] = TSC_K,
	TSC_R('0', '9', TSC_S), TSC_R(':', '<', TSC_N), TSC_R('>', '?', TSC_N),
	['@'] = TSC_K,          TSC_R('A', '^', TSC_N), ['_'] = TSC_K,
	['`'] = TSC_N,          TSC_R('a', 'z', TSC_S), TSC_R('{', '~', TSC_N),
};
#undef TSC_R
#undef TSC_N
#undef TSC_K
#undef TSC_S

#if defined(__SSE2__)
/* Bit k set iff byte k of the 16 at p is not a key character
 * (tsc_not_key16()), not a nblk-chr (tsc_not_nblk16()): the runs of keys
 * and values 16 bytes a step (a table lookup a byte cost ~6 instructions
 * a byte). */
static inline unsigned
tsc_not_key16(const uint8_t *p)
{
	__m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
	/* c - lo <= hi - lo (unsigned, wrapping) iff lo <= c <= hi */
	__m128i az = _mm_cmpeq_epi8(
		_mm_subs_epu8(_mm_sub_epi8(x, _mm_set1_epi8('a')), _mm_set1_epi8(25)),
		_mm_setzero_si128());
	__m128i dg = _mm_cmpeq_epi8(
		_mm_subs_epu8(_mm_sub_epi8(x, _mm_set1_epi8('0')), _mm_set1_epi8(9)),
		_mm_setzero_si128());
	__m128i sp = _mm_or_si128(
		_mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('_')),
			     _mm_cmpeq_epi8(x, _mm_set1_epi8('-'))),
		_mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('*')),
					  _mm_cmpeq_epi8(x, _mm_set1_epi8('/'))),
			     _mm_cmpeq_epi8(x, _mm_set1_epi8('@'))));

	return (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(az, dg), sp)) ^
	       0xffffu;
}

static inline unsigned
tsc_not_nblk16(const uint8_t *p)
{
	__m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
	/* signed: 0x21..0x7f are > 0x20, 0x80..0xff are negative */
	__m128i ok = _mm_cmpgt_epi8(x, _mm_set1_epi8(0x20));
	__m128i no = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8(',')),
					       _mm_cmpeq_epi8(x, _mm_set1_epi8('='))),
				  _mm_cmpeq_epi8(x, _mm_set1_epi8(0x7f)));

	return (unsigned)_mm_movemask_epi8(_mm_andnot_si128(no, ok)) ^ 0xffffu;
}
#endif

/* The end of the run of characters of class cls (TSC_KEYCHAR or TSC_NBLK)
 * in [p, e); [lo, e) is readable (lo <= p): a rest shorter than 16 bytes
 * is read as the last 16 before e when there are that many, never past
 * e (http-scan.c, find_lf(), does the same). */
static inline const uint8_t *
tsc_run(const uint8_t *lo, const uint8_t *p, const uint8_t *e, unsigned cls)
{
#if defined(__SSE2__)
	unsigned m;

	for (; e - p >= 16; p += 16) {
		m = cls == TSC_NBLK ? tsc_not_nblk16(p) : tsc_not_key16(p);
		if (m)
			return p + __builtin_ctz(m);
	}
	if (p < e && e - lo >= 16) {
		m = (cls == TSC_NBLK ? tsc_not_nblk16(e - 16)
				     : tsc_not_key16(e - 16)) >>
		    (16 - (e - p));
		return m ? p + __builtin_ctz(m) : e;
	}
#else
	(void)lo;
#endif
	while (p < e && (tsc_class[*p] & cls))
		p++;
	return p;
}

/* The same rules as ts_add_member() on the joined lines, a run of key or
 * value characters at a time: members are trimmed of OWS (SP, HTAB) only,
 * so a CR or a HTAB inside a value, or a CR before a ',' is invalid; a
 * value keeps its leading spaces and must have 1..256 characters once its
 * trailing OWS is gone.  Only lists longer than a caller keeps come here,
 * but those in full: runs are found 16 bytes a step (about 10
 * instructions a byte with a table lookup a byte, 3-4 now). */
int
w3c_tracestate_check_feed(struct w3c_tracestate_check *c, const char *s, size_t len)
{
	const uint8_t *const lo = (const uint8_t *)s, *p = lo, *e = p + len, *q;
	unsigned state = c->state, pend = c->pend, n = c->n;
	size_t klen = c->len, ows = c->ows;

	if (state == TSC_BAD)
		return -EINVAL;
	if (len > 0 && !s)
		goto bad;
	while (p < e) {
		uint8_t ch;

		switch (state) {
		case TSC_START:
			ch = *p++;
			if (ch == ' ' || ch == '\t')
				continue;
			if (ch == '\r') {
				pend = TSC_PEND_CR;
				continue;
			}
			/* a CR is not OWS: it is part of this member */
			if (pend)
				goto bad;
			if (ch == ',')
				continue; /* an empty member */
			if (!(tsc_class[ch] & TSC_KEYSTART))
				goto bad;
			state = TSC_KEY;
			klen = 1;
			continue;
		case TSC_KEY:
			q = tsc_run(lo, p, e, TSC_KEYCHAR);
			klen += (size_t)(q - p);
			if (klen > W3C_TRACESTATE_KEY_MAX)
				goto bad;
			p = q;
			if (p == e)
				continue;
			if (*p++ != '=' || ++n > W3C_TRACESTATE_MAX_MEMBERS)
				goto bad;
			state = TSC_VALUE;
			klen = 0;
			ows = 0;
			pend = 0;
			continue;
		default: /* TSC_VALUE; klen counts the value */
			q = tsc_run(lo, p, e, TSC_NBLK);
			if (q > p) {
				/* OWS before them was part of the value */
				if (pend)
					goto bad;
				klen += ows + (size_t)(q - p);
				ows = 0;
				if (klen > W3C_TRACESTATE_VALUE_MAX)
					goto bad;
				p = q;
				if (p == e)
					continue;
			}
			ch = *p++;
			if (ch == ' ' || ch == '\t' || ch == '\r') {
				if (ows <= W3C_TRACESTATE_VALUE_MAX)
					ows++;
				if (ch != ' ')
					pend |= ch == '\t' ? TSC_PEND_TAB : TSC_PEND_CR;
				continue;
			}
			/* what is left: ',', '=', controls, DEL, non-ASCII */
			if (ch != ',' || klen == 0 || (pend & TSC_PEND_CR))
				goto bad;
			state = TSC_START;
			pend = 0;
			continue;
		}
	}
	c->state = (uint8_t)state;
	c->pend = (uint8_t)pend;
	c->n = (uint8_t)n;
	c->len = (uint16_t)klen;
	c->ows = (uint16_t)ows;
	return 0;
bad:
	c->state = TSC_BAD;
	return -EINVAL;
}

int
w3c_tracestate_check_end(struct w3c_tracestate_check *c, bool trim_cr)
{
	unsigned cr = trim_cr ? 0 : TSC_PEND_CR;

	switch (c->state) {
	case TSC_START:
		if (c->pend & cr)
			break;
		c->pend = 0;
		return 0;
	case TSC_VALUE:
		if (c->len == 0 || (c->pend & cr))
			break;
		c->state = TSC_START;
		c->pend = 0;
		c->len = 0;
		c->ows = 0;
		return 0;
	default: /* a key without '=', or already invalid */
		break;
	}
	c->state = TSC_BAD;
	return -EINVAL;
}

/* w3c_tracestate_trunc states */
enum {
	TT_BETWEEN = 0,
	TT_MEMBER,
	TT_FULL,    /* an entry was dropped from the right: nothing more is
		     * kept, later entries are only counted (between them) */
	TT_FULL_IN, /* ... inside one */
};

static inline bool
tt_ows(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* The member in progress has ended: keep it if it fits, else apply the
 * truncation policy to the entries kept and it (the right-most of all so
 * far).  Dropping an entry over 128 characters now is what the policy
 * does on the whole list too: entries further right only add to the
 * length, and the long ones among them go first -- so once a long entry
 * is dropped, so is every later long one.  Once an entry of at most 128
 * characters finds no room with no long one left to drop, every later
 * entry would be dropped before it: stop keeping. */
static void
tt_commit(struct w3c_tracestate_trunc *t, char *out, size_t cap)
{
	size_t m = t->mlast;

	if (m == 0)
		return; /* an empty member */
	if (m > W3C_TRACESTATE_LONG_ENTRY && t->long_cut) {
		if (t->dropped < UINT8_MAX)
			t->dropped++;
		return;
	}
	for (;;) {
		/* Each read once: the checks below are on what is used. */
		size_t len = t->len, s, e, gone;
		unsigned n = t->n, i, victim;
		size_t need = len + (n ? 1u : 0u) + m;

		if (m <= W3C_TRACESTATE_MEMBER_MAX && need <= cap &&
		    n < W3C_TRACESTATE_MAX_MEMBERS) {
			if (n)
				out[len++] = ',';
			memcpy(out + len, t->member, m);
			t->start[n] = (uint16_t)len;
			t->size[n] = (uint16_t)m;
			t->n = (uint8_t)(n + 1);
			t->len = (uint16_t)(len + m);
			return;
		}
		/* (a member too long or a 33rd one: the list is invalid
		 * anyway, the check says so) */
		if (m > W3C_TRACESTATE_LONG_ENTRY || n >= W3C_TRACESTATE_MAX_MEMBERS) {
			t->long_cut = 1;
			break;
		}
		victim = n;
		for (i = n; i-- > 0;) {
			if (t->size[i] > W3C_TRACESTATE_LONG_ENTRY) {
				victim = i;
				break;
			}
		}
		if (victim == n) {
			t->state = TT_FULL;
			break;
		}
		/* the entry and one comma next to it */
		s = t->start[victim];
		e = s + t->size[victim];
		if (victim + 1u < n)
			e++;
		else if (victim > 0)
			s--;
		/* Never so after the feeds of one list: a state two feeds
		 * wrote at once (the HTTP scanner's capture of a head two
		 * threads read, http-scan.c, ts_long()), or one overwritten.
		 * The bytes would be moved from past the list (2^64 of them
		 * for an entry ending past it): keep no more instead. */
		if (s > e || e > len || len > cap) {
			t->state = TT_FULL;
			break;
		}
		gone = e - s;
		memmove(out + s, out + e, len - e);
		t->len = (uint16_t)(len - gone);
		for (i = victim + 1; i < n; i++) {
			t->start[i - 1] = (uint16_t)(t->start[i] - gone);
			t->size[i - 1] = t->size[i];
		}
		t->n = (uint8_t)(n - 1);
		t->long_cut = 1;
		if (t->dropped < UINT8_MAX)
			t->dropped++;
	}
	if (t->dropped < UINT8_MAX)
		t->dropped++;
}

void
w3c_tracestate_trunc_feed(
	struct w3c_tracestate_trunc *t, char *out, size_t cap, const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		char c = s[i];

		if (t->state >= TT_FULL) {
			/* every later entry is dropped: count them */
			if (c == ',') {
				t->state = TT_FULL;
			} else if (t->state == TT_FULL && !tt_ows(c)) {
				t->state = TT_FULL_IN;
				if (t->dropped < UINT8_MAX)
					t->dropped++;
			}
			continue;
		}
		if (c == ',') {
			if (t->state == TT_MEMBER)
				tt_commit(t, out, cap);
			if (t->state != TT_FULL)
				t->state = TT_BETWEEN;
			continue;
		}
		if (t->state == TT_BETWEEN) {
			if (tt_ows(c))
				continue;
			t->state = TT_MEMBER;
			t->mlen = 0;
			t->mlast = 0;
		}
		if (t->mlen < sizeof(t->member))
			t->member[t->mlen] = c;
		if (t->mlen <= sizeof(t->member))
			t->mlen++;
		if (!tt_ows(c))
			t->mlast = t->mlen;
	}
}

void
w3c_tracestate_trunc_end(struct w3c_tracestate_trunc *t, char *out, size_t cap)
{
	if (t->state == TT_MEMBER)
		tt_commit(t, out, cap);
	if (t->state < TT_FULL)
		t->state = TT_BETWEEN;
	else
		t->state = TT_FULL;
}

/* The truncation policy on entry lengths; returns the mask of entries kept
 * and the resulting list length. */
static uint32_t
ts_fit(const size_t *elen,
       unsigned n,
       size_t max_len,
       size_t *total_out,
       unsigned *n_dropped)
{
	uint32_t keep = n >= 32 ? UINT32_MAX : ((uint32_t)1 << n) - 1;
	unsigned kept = n;
	size_t total = 0;

	for (unsigned i = 0; i < n; i++)
		total += elen[i];
	if (n > 0)
		total += n - 1;
	while (kept > 0 && total > max_len) {
		unsigned victim = n;

		/* entries over 128 characters go first, right-most first */
		for (unsigned i = n; i-- > 0;) {
			if ((keep & (uint32_t)1 << i) &&
			    elen[i] > W3C_TRACESTATE_LONG_ENTRY) {
				victim = i;
				break;
			}
		}
		if (victim == n) {
			for (unsigned i = n; i-- > 0;) {
				if (keep & (uint32_t)1 << i) {
					victim = i;
					break;
				}
			}
		}
		keep &= ~((uint32_t)1 << victim);
		kept--;
		total -= elen[victim];
		if (kept > 0)
			total--; /* and the comma that separated it */
	}
	*total_out = total;
	*n_dropped = n - kept;
	return keep;
}

int
w3c_tracestate_format(char *out,
		      size_t cap,
		      size_t *len_out,
		      const struct w3c_tracestate *ts,
		      size_t max_len,
		      unsigned *n_dropped)
{
	size_t elen[W3C_TRACESTATE_MAX_MEMBERS] = {0}, total, pos = 0;
	unsigned dropped;
	uint32_t keep;
	bool first = true;

	if (!ts || !len_out || ts->n > W3C_TRACESTATE_MAX_MEMBERS || (cap > 0 && !out))
		return -EINVAL;
	for (unsigned i = 0; i < ts->n; i++)
		elen[i] = (size_t)ts->member[i].key_len + 1 + ts->member[i].value_len;
	keep = ts_fit(elen, ts->n, max_len, &total, &dropped);
	if (total > cap)
		return -ENOSPC;
	for (unsigned i = 0; i < ts->n; i++) {
		const struct w3c_tracestate_member *m = &ts->member[i];

		if (!(keep & (uint32_t)1 << i))
			continue;
		if (!first)
			out[pos++] = ',';
		first = false;
		memcpy(out + pos, m->key, m->key_len);
		pos += m->key_len;
		out[pos++] = '=';
		memcpy(out + pos, m->value, m->value_len);
		pos += m->value_len;
	}
	if (pos < cap)
		out[pos] = '\0';
	*len_out = pos;
	if (n_dropped)
		*n_dropped = dropped;
	return 0;
}

int
w3c_tracestate_combine(char *out,
		       size_t cap,
		       size_t *len_out,
		       const char *const *lines,
		       const size_t *lens,
		       size_t n_lines)
{
	struct w3c_tracestate ts;
	int r;

	r = w3c_tracestate_parse(lines, lens, n_lines, &ts);
	if (r < 0)
		return r;
	return w3c_tracestate_format(out, cap, len_out, &ts, SIZE_MAX, NULL);
}

int
w3c_tracestate_truncate(
	char *buf, size_t len, size_t max_len, size_t *len_out, unsigned *n_dropped)
{
	size_t start[W3C_TRACESTATE_MAX_MEMBERS],
		elen[W3C_TRACESTATE_MAX_MEMBERS] = {0};
	size_t total, pos = 0, i = 0;
	unsigned n = 0, dropped;
	uint32_t keep;

	if (!len_out || (len > 0 && !buf))
		return -EINVAL;
	while (len > 0) {
		size_t s = i;

		while (i < len && buf[i] != ',')
			i++;
		if (i == s || n == W3C_TRACESTATE_MAX_MEMBERS)
			return -EINVAL;
		start[n] = s;
		elen[n++] = i - s;
		if (i >= len)
			break;
		i++;
		if (i == len)
			return -EINVAL; /* trailing comma: an empty entry */
	}
	keep = ts_fit(elen, n, max_len, &total, &dropped);
	/* compacting left to right never overwrites an entry not yet moved */
	for (unsigned k = 0; k < n; k++) {
		if (!(keep & (uint32_t)1 << k))
			continue;
		if (pos > 0)
			buf[pos++] = ',';
		memmove(buf + pos, buf + start[k], elen[k]);
		pos += elen[k];
	}
	*len_out = pos;
	if (n_dropped)
		*n_dropped = dropped;
	return 0;
}
