/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "request-ctx.h"

#include "http-scan.h"
#include "http-scan-inline.h"
#include "w3c.h"

#include <errno.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* The first '?' or '#' in p[0..n), or NULL: where the path of a
 * request-target ends.  One pass instead of a memchr() for each byte (two
 * libc calls per request, B4): with SSE2, 16 bytes per step, the last
 * step re-reading the final 16 bytes so that nothing outside p[0..n) is
 * ever read (the bytes read twice held neither, so its first match is the
 * first overall).  Targets of 4 to 15 bytes ("/small.html") take one step
 * too: the first and the last 8 (or 4) bytes, overlapping, in the two
 * halves of a register -- a match in the first half is the first overall
 * -- where the byte loop cost ~100 instructions (B1i).  Shorter ones go
 * byte by byte. */
static inline __attribute__((always_inline)) const char *
url_path_end(const char *p, size_t n)
{
	size_t i = 0;

#if defined(__SSE2__)
	const __m128i qm = _mm_set1_epi8('?'), hash = _mm_set1_epi8('#');

	if (n >= 16) {
		for (;;) {
			__m128i x =
				_mm_loadu_si128((const __m128i *)(const void *)(p + i));
			unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(
				_mm_cmpeq_epi8(x, qm), _mm_cmpeq_epi8(x, hash)));

			if (m)
				return p + i + (unsigned)__builtin_ctz(m);
			if (i + 16 == n)
				return NULL;
			i = n - i - 16 >= 16 ? i + 16 : n - 16;
		}
	}
	if (n >= 4) {
		size_t k;
		__m128i x;
		unsigned m;

		if (n >= 8) {
			k = n - 8;
			x = _mm_unpacklo_epi64(
				_mm_loadl_epi64((const __m128i *)(const void *)p),
				_mm_loadl_epi64(
					(const __m128i *)(const void *)(p + k)));
		} else {
			uint32_t a, b;

			k = n - 4;
			memcpy(&a, p, 4);
			memcpy(&b, p + k, 4);
			x = _mm_unpacklo_epi64(_mm_cvtsi32_si128((int)a),
					       _mm_cvtsi32_si128((int)b));
		}
		m = (unsigned)_mm_movemask_epi8(
			_mm_or_si128(_mm_cmpeq_epi8(x, qm), _mm_cmpeq_epi8(x, hash)));
		if (m & 0xff)
			return p + (unsigned)__builtin_ctz(m);
		if (m)
			return p + k + ((unsigned)__builtin_ctz(m) - 8);
		return NULL;
	}
#endif
	for (; i < n; i++)
		if (p[i] == '?' || p[i] == '#')
			return p + i;
	return NULL;
}

/* Where the path of an absolute-form target (proxies: scheme "://"
 * authority path) starts; target itself if it is not one.  Out of line so
 * that the usual origin-form target ("/...") does not pay for its memchr()
 * calls' register saves. */
static __attribute__((noinline, cold)) const char *
url_absolute_path(const char *target, size_t len)
{
	const char *end = target + len, *s = memchr(target, ':', len);

	if (s && end - s > 3 && s[1] == '/' && s[2] == '/') {
		const char *slash = memchr(s + 3, '/', (size_t)(end - s - 3));
		const char *qm = memchr(s + 3, '?', (size_t)(end - s - 3));

		if (slash && (!qm || slash < qm))
			return slash;
		if (qm)
			return qm; /* no path: "" then the query */
		return end;
	}
	return target;
}

static inline __attribute__((always_inline)) const char *
url_path(const char *target, size_t len, bool keep_query, size_t *path_len)
{
	const char *p = target, *end = target + len, *q;

	if (len > 0 && target[0] != '/')
		p = url_absolute_path(target, len);
	if (!keep_query) {
		/* The path ends at the query or at a fragment (which clients
		 * should not send), whichever comes first. */
		q = url_path_end(p, (size_t)(end - p));
		if (q)
			end = q;
	}
	*path_len = (size_t)(end - p);
	return p;
}

const char *
ctxshim_url_path(const char *target, size_t len, bool keep_query, size_t *path_len)
{
	return url_path(target, len, keep_query, path_len);
}

/* The request's attributes are encoded into c->attrs with the length in a
 * local (a trec_attr_writer whose address is passed to a function lives
 * in memory, which made every inline entry reload and store it, B4).
 * Anything but the usual entry goes through trec_attrs_add(), which keeps
 * the rules for capping and dropping in one place. */
static __attribute__((noinline, cold)) size_t
attr_add_slow(uint8_t *buf, size_t len, uint8_t key, const void *v, size_t n)
{
	struct trec_attr_writer w;

	trec_attrs_init(&w, buf, TREC_ATTRS_MAX);
	w.len = len;
	(void)trec_attrs_add(&w, key, v, n);
	return w.len;
}

/* copy_short() (request-ctx.h) that also returns the high bits (>= 0x80)
 * of the bytes it copied, 0 for ASCII, from the registers the copy loads
 * anyway: an OR of the loads (a movemask with SSE2), tested once by the
 * caller.  Values over 64 bytes are not copied and count as not ASCII: the
 * caller takes its slow path for them.  Targets of 17 to 32 bytes ("/api/v1/...")
 * take two overlapping loads instead of the loop, which pays for the
 * check (B4). */
static inline __attribute__((always_inline)) uint64_t
copy_ascii(uint8_t *d, const uint8_t *s, size_t n)
{
	if (n > 64)
		return 1;
	if (n >= 16) {
#if defined(__SSE2__)
		__m128i x = _mm_loadu_si128((const void *)s),
			y = _mm_loadu_si128((const void *)(s + n - 16));

		_mm_storeu_si128((__m128i *)(void *)d, x);
		if (n > 32) {
			size_t i;

			for (i = 16; i + 16 < n; i += 16) {
				__m128i z = _mm_loadu_si128((const void *)(s + i));

				_mm_storeu_si128((__m128i *)(void *)(d + i), z);
				x = _mm_or_si128(x, z);
			}
		}
		_mm_storeu_si128((__m128i *)(void *)(d + n - 16), y);
		return (unsigned)_mm_movemask_epi8(_mm_or_si128(x, y));
#else
		size_t i;
		uint8_t hi = 0;

		memcpy(d, s, n);
		for (i = 0; i < n; i++)
			hi |= s[i];
		return hi & 0x80;
#endif
	}
	if (n >= 8) {
		uint64_t a, b;

		memcpy(&a, s, 8);
		memcpy(&b, s + n - 8, 8);
		memcpy(d, &a, 8);
		memcpy(d + n - 8, &b, 8);
		return (a | b) & 0x8080808080808080ull;
	}
	if (n >= 4) {
		uint32_t a, b;

		memcpy(&a, s, 4);
		memcpy(&b, s + n - 4, 4);
		memcpy(d, &a, 4);
		memcpy(d + n - 4, &b, 4);
		return (a | b) & 0x80808080u;
	}
	if (n) {
		uint8_t a = s[0], b = s[n / 2], c = s[n - 1];

		d[0] = a;
		d[n / 2] = b;
		d[n - 1] = c;
		return (a | b | c) & 0x80;
	}
	return 0;
}

/* The bytes of a value longer than TREC_VALUE_MAX that are published:
 * 255, moved back to the start of the character that straddles the cut,
 * the rule of trec_attrs_add() (thread-record.c). */
static size_t
text_cap(const uint8_t *v, size_t n)
{
	size_t k = TREC_VALUE_MAX;
	unsigned back;

	if (n <= TREC_VALUE_MAX)
		return n;
	for (back = 0; back < 3 && (v[k] & 0xc0) == 0x80; back++)
		k--;
	return (v[k] & 0xc0) == 0x80 ? TREC_VALUE_MAX : k;
}

/* k, the length text_cap() kept of a url.path it cut, moved back before
 * a '%' in the last two bytes: "/a%3F" cut to "/a%3" or "/a%" is no valid
 * percent-encoding, and a reader may decode it as some other path.  Only
 * url.path: a header value's '%' means nothing in particular.  A '%' at
 * k - 2 goes first, so that "%%" leaves neither; an earlier '%' left
 * incomplete by the move was no valid escape in the request either. */
static size_t
path_cap(const uint8_t *v, size_t k)
{
	if (v[k - 2] == '%')
		return k - 2;
	if (v[k - 1] == '%')
		return k - 1;
	return k;
}

/* attr_text() for everything but a short ASCII value that fits: a value
 * with a byte >= 0x80, a long one, one that may not fit.  What would be
 * published must be well-formed UTF-8, or the value is left out whole
 * (request-ctx.h says why). */
static __attribute__((noinline, cold)) size_t
attr_text_slow(uint8_t *buf, size_t len, uint8_t key, const void *v, size_t n)
{
	size_t k = text_cap(v, n);

	if (k < n && key == CTXSHIM_KEY_PATH)
		k = path_cap(v, k);
	if (!trec_utf8_valid(v, k))
		return len;
	return attr_add_slow(buf, len, key, v, k);
}

/* trec_attrs_add() inline for the usual value from the request (path,
 * header values): at most 255 bytes of ASCII that fit whole.  The rest
 * goes to attr_text_slow().  A
 * value that turns out not to be ASCII has been copied already, but len
 * does not cover it, so nothing sees those bytes. */
static inline __attribute__((always_inline)) size_t
attr_text(uint8_t *buf, size_t len, uint8_t key, const void *v, size_t n)
{
	if (n <= TREC_VALUE_MAX && len <= TREC_ATTRS_MAX &&
	    TREC_ATTRS_MAX - len >= TREC_ENTRY_OVERHEAD + n) {
		uint8_t *d = buf + len;

		d[0] = key;
		d[1] = (uint8_t)n;
		if (__builtin_expect(copy_ascii(d + TREC_ENTRY_OVERHEAD, v, n) == 0, 1))
			return len + TREC_ENTRY_OVERHEAD + n;
	}
	return attr_text_slow(buf, len, key, v, n);
}

/* The methods the semantic conventions know: RFC 9110's and PATCH (RFC
 * 5789); QUERY is not on their list.  Case-sensitive ("get" is not GET).
 * Looked up by the method's length and first three bytes, t32 = n | m0 <<
 * 8 | m1 << 16 | m2 << 24 (a method of 1 or 2 bytes brings whatever
 * follows it, and matches nothing), through a multiplicative hash that
 * puts the nine in nine of 16 slots.  A slot holds the entry as it is
 * written after its key byte, [n][method], and the mask of its 1 + n
 * bytes; empty slots want n == 0, which never comes here (n is 1..255:
 * the byte above the method is n itself).  The unit tests look every
 * method up (a collision would override a slot). */
#define METHOD_SLOT(t32) (((uint32_t)(t32)*0x9e3779b1u) >> 28)
#define METHOD_KNOWN(n, a, b, c, d, e, f, g)                                    \
	[METHOD_SLOT((uint32_t)(n) | (uint32_t)(a) << 8 | (uint32_t)(b) << 16 | \
		     (uint32_t)(c) << 24)] = {                                  \
		(uint64_t)(n) | (uint64_t)(a) << 8 | (uint64_t)(b) << 16 |      \
			(uint64_t)(c) << 24 | (uint64_t)(d) << 32 |             \
			(uint64_t)(e) << 40 | (uint64_t)(f) << 48 |             \
			(uint64_t)(g) << 56,                                    \
		~0ull >> (8 * (7 - (n))),                                       \
	}

struct method_slot {
	uint64_t word;
	uint64_t mask;
};

/* The empty slots first, then the methods over them (which is why
 * -Woverride-init is off here). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
/* clang-format off */
#define METHOD_SLOTS_DEFAULT                                          \
	{                                                             \
		[0 ... 15] = {0, 0xff},                               \
		METHOD_KNOWN(3, 'G', 'E', 'T', 0, 0, 0, 0),           \
		METHOD_KNOWN(4, 'H', 'E', 'A', 'D', 0, 0, 0),         \
		METHOD_KNOWN(4, 'P', 'O', 'S', 'T', 0, 0, 0),         \
		METHOD_KNOWN(3, 'P', 'U', 'T', 0, 0, 0, 0),           \
		METHOD_KNOWN(6, 'D', 'E', 'L', 'E', 'T', 'E', 0),     \
		METHOD_KNOWN(7, 'C', 'O', 'N', 'N', 'E', 'C', 'T'),   \
		METHOD_KNOWN(7, 'O', 'P', 'T', 'I', 'O', 'N', 'S'),   \
		METHOD_KNOWN(5, 'T', 'R', 'A', 'C', 'E', 0, 0),       \
		METHOD_KNOWN(5, 'P', 'A', 'T', 'C', 'H', 0, 0),       \
	}
/* clang-format on */
/* Writable for ctxshim_request_known_methods() (below); the default kept
 * to go back to. */
static struct method_slot method_slots[16] = METHOD_SLOTS_DEFAULT;
static const struct method_slot method_slots_default[16] = METHOD_SLOTS_DEFAULT;
#pragma GCC diagnostic pop

/* OTEL_INSTRUMENTATION_HTTP_KNOWN_METHODS, when set: the semantic
 * conventions' full override of the list above, comma-separated and
 * case-sensitive.  Set once before any request (the constructor), then
 * read-only.  The slots are emptied then, so that every method takes
 * attr_method_other(), which looks it up here: the usual request pays
 * nothing for the option. */
#define KNOWN_OVERRIDE_MAX 32
static struct {
	unsigned n;
	uint8_t len[KNOWN_OVERRIDE_MAX];
	char name[KNOWN_OVERRIDE_MAX][HTTP_SCAN_METHOD_MAX];
} known_override;

static bool
known_override_has(const char *m, size_t n)
{
	unsigned i;

	for (i = 0; i < known_override.n; i++)
		if (known_override.len[i] == n &&
		    memcmp(known_override.name[i], m, n) == 0)
			return true;
	return false;
}

int
ctxshim_request_known_methods(const char *list)
{
	static char name[KNOWN_OVERRIDE_MAX][HTTP_SCAN_METHOD_MAX];
	static uint8_t lens[KNOWN_OVERRIDE_MAX];
	unsigned i, n = 0;
	const char *p = list;

	if (!list || !*list)
		goto unset;
	while (*p) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);

		/* A method is a token (RFC 9110): no blanks inside; blanks
		 * around an entry are trimmed, empty entries skipped. */
		while (len && (*p == ' ' || *p == '\t'))
			p++, len--;
		while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
			len--;
		if (len > HTTP_SCAN_METHOD_MAX || (len && n == KNOWN_OVERRIDE_MAX))
			return -EINVAL;
		if (len) {
			memcpy(name[n], p, len);
			lens[n++] = (uint8_t)len;
		}
		if (!e)
			break;
		p = e + 1;
	}
	/* A list of blanks and commas names no method: taken as empty, so
	 * as unset, as OpenTelemetry's Java agent does, rather than as a
	 * list that makes every method _OTHER. */
	if (!n)
		goto unset;
	/* Parsed whole: only now does it replace what was in force. */
	memcpy(known_override.name, name, sizeof(name));
	memcpy(known_override.len, lens, sizeof(lens));
	known_override.n = n;
	for (i = 0; i < 16; i++) {
		method_slots[i].word = 0;
		method_slots[i].mask = 0xff;
	}
	return 0;
unset:
	/* Unset or empty (OTel: empty is unset): the default. */
	known_override.n = 0;
	memcpy(method_slots, method_slots_default, sizeof(method_slots));
	return 0;
}

/* The method entry for any method the slots do not hold: one of the
 * overriding list as itself, anything else as "_OTHER" and the method as
 * http.request.method_original right after it, with the rules of every
 * other value (UTF-8, capped at 255 bytes).  Always the first entry. */
static __attribute__((noinline, cold)) size_t
attr_method_other(uint8_t *buf, const char *m, size_t n, bool cut)
{
	static const char other[] = "_OTHER";
	size_t len;

	if (!cut && known_override.n && known_override_has(m, n))
		return attr_text_slow(buf, 0, CTXSHIM_KEY_METHOD, m, n);
	len = attr_add_slow(buf, 0, CTXSHIM_KEY_METHOD, other, sizeof(other) - 1);
	if (cut)
		return len;
	return attr_text_slow(buf, len, ctxshim_key_method_original(), m, n);
}

/* The http.request.method entry, the first of the record.  padded: m
 * points into a buffer of at least 8 bytes (the scanner's 20-byte
 * capture), so its first 8 bytes are one load; else they are gathered
 * without reading past m[n).  A known method is written from its slot:
 * the key, then one 8-byte store of [n][method] (the bytes past the
 * entry are overwritten by the next one, or past attrs_len). */
static inline __attribute__((always_inline)) size_t
attr_method(uint8_t *buf, const char *m, size_t n, bool cut, bool padded)
{
	const struct method_slot *e;
	uint64_t w, t;
	size_t len;

	if (__builtin_expect(cut, 0)) {
		goto other;
	} else if (padded && n <= UINT8_MAX) {
		memcpy(&w, m, 8);
	} else if (n <= 8) {
		uint32_t a, b;

		if (n >= 4) {
			memcpy(&a, m, 4);
			memcpy(&b, m + n - 4, 4);
			w = a | (uint64_t)b << (8 * (n - 4));
		} else {
			w = (uint64_t)(uint8_t)m[0] |
			    (uint64_t)(uint8_t)m[n / 2] << (8 * (n / 2)) |
			    (uint64_t)(uint8_t)m[n - 1] << (8 * (n - 1));
		}
	} else {
		goto other;
	}
	t = w << 8 | n;
	e = &method_slots[METHOD_SLOT(t)];
	if (__builtin_expect(((t ^ e->word) & e->mask) != 0, 0))
		goto other;
	buf[0] = CTXSHIM_KEY_METHOD;
	memcpy(buf + 1, &e->word, 8);
	return TREC_ENTRY_OVERHEAD + n;
other:
	/* Two entries at most, the second at most 255 bytes: telling the
	 * compiler so lets it drop the path's "does it fit" test (B4). */
	len = attr_method_other(buf, m, n, cut);
	if (len > 2 * TREC_ENTRY_OVERHEAD + 6 + TREC_VALUE_MAX)
		__builtin_unreachable();
	return len;
}

/* The 16 lowercase hex digits of id at out. */
static inline __attribute__((always_inline)) void
hex_id8(char *out, const uint8_t id[8])
{
#if defined(__SSE2__)
	/* Nibbles high then low per byte; '0'..'9' then 'a'..'f'. */
	__m128i x = _mm_loadl_epi64((const __m128i *)(const void *)id);
	__m128i mask = _mm_set1_epi8(0x0f);
	__m128i hi = _mm_and_si128(_mm_srli_epi16(x, 4), mask);
	__m128i lo = _mm_and_si128(x, mask);
	__m128i nib = _mm_unpacklo_epi8(hi, lo);
	__m128i alpha = _mm_and_si128(_mm_cmpgt_epi8(nib, _mm_set1_epi8(9)),
				      _mm_set1_epi8('a' - '0' - 10));
	__m128i zero = _mm_set1_epi8('0');

	_mm_storeu_si128((__m128i *)(void *)out,
			 _mm_add_epi8(nib, _mm_add_epi8(alpha, zero)));
#else
	w3c_hex_encode(out, id, 8);
#endif
}

/* ctxshim_ctx_add_parent_attr(), inline: every traced request adds this
 * entry, and the call plus w3c_hex_encode() were ~55 instructions per
 * request (B4).  Same rules: the digits straight into place when the
 * entry fits, else trec_attrs_add(), which counts it as dropped.  The two
 * cases apart, so that a caller that knows len needs no flag (B1). */
static inline __attribute__((always_inline)) size_t
attr_put_parent(uint8_t *buf, size_t len, const uint8_t id[8])
{
	char hex[16];

	if (__builtin_expect(len <= TREC_ATTRS_MAX &&
				     TREC_ATTRS_MAX - len >=
					     TREC_ENTRY_OVERHEAD + sizeof(hex),
			     1)) {
		buf[len] = CTXSHIM_KEY_PARENT;
		buf[len + 1] = sizeof(hex);
		hex_id8((char *)buf + len + TREC_ENTRY_OVERHEAD, id);
		return len + TREC_ENTRY_OVERHEAD + sizeof(hex);
	}
	hex_id8(hex, id);
	return attr_add_slow(buf, len, CTXSHIM_KEY_PARENT, hex, sizeof(hex));
}

/* The ids, flags and tracestate of a request with traceparent value
 * tp[0, tp_len) (NULL: none; bad: repeated or folded, invalid) and
 * tracestate lines ts[0, n_ts).  Inline in every entry point, so that
 * nothing of the request is stored and reloaded (B4). */
static inline __attribute__((always_inline)) void
request_ids(struct ctxshim_ctx *c,
	    const char *tp,
	    size_t tp_len,
	    bool bad,
	    const char *const *ts,
	    const size_t *ts_lens,
	    size_t n_ts)
{
	struct w3c_traceparent p;
	bool valid = false;

	if (tp && !bad && w3c_traceparent_parse(tp, tp_len, &p) == 0)
		valid = true;

	/* What ctxshim_ctx_begin() does, inline (one call fewer per
	 * request). */
	memset(c, 0, offsetof(struct ctxshim_ctx, attrs));
	if (valid) {
		memcpy(c->trace_id, p.trace_id, sizeof(c->trace_id));
		memcpy(c->parent_id, p.parent_id, sizeof(c->parent_id));
		c->has_parent = 1;
		/* W3C: unknown flag bits are not propagated. */
		c->flags = p.flags & W3C_FLAGS_KNOWN;
		ctxshim_new_span_id(c->span_id);
		if (__builtin_expect(n_ts != 0, 0))
			(void)ctxshim_ctx_set_tracestate(c, ts, ts_lens, n_ts);
	} else if (ctxshim_cfg.new_traces) {
		ctxshim_new_trace_id(c->trace_id);
		c->flags = W3C_FLAG_RANDOM;
		ctxshim_new_span_id(c->span_id);
		if (ctxshim_cfg.sample_new)
			c->flags |= W3C_FLAG_SAMPLED;
	} else {
		uint8_t unused[8];

		/* Zero ids, but a draw all the same: the socket level counts
		 * the heads a thread read by its span-ids
		 * (hooks/hook-socket.c, "Handlers run after the next wait"),
		 * and a head it did not count would let the next one's
		 * context be kept for this one's handler. */
		ctxshim_new_span_id(unused);
	}
}

/* The attributes every request has (method, path, parent span-id, in this
 * order); returns their length in c->attrs.  The configured headers
 * follow (the callers' loops). */
static inline __attribute__((always_inline)) size_t
request_attrs(struct ctxshim_ctx *c,
	      const char *method,
	      size_t method_len,
	      bool method_cut,
	      bool padded,
	      const char *target,
	      size_t target_len)
{
	const char *path;
	size_t path_len, len = 0;

	_Static_assert(sizeof(c->attrs) == TREC_ATTRS_MAX, "attrs is a whole record's");
	if (method && method_len)
		len = attr_method(c->attrs, method, method_len, method_cut, padded);
#if defined(__SSE2__)
	/* The usual target: "/" and 7 to 15 more bytes, ASCII, no query or
	 * fragment, the query not kept.  One pair of loads serves
	 * url_path_end()'s search, copy_ascii()'s copy and its ASCII test
	 * (B1); anything else, the general path below.  The method entry
	 * leaves room (attr_method()). */
	if (target && target_len >= 8 && target_len <= 16 && target[0] == '/' &&
	    !ctxshim_cfg.url_query) {
		__m128i x = _mm_unpacklo_epi64(
			_mm_loadl_epi64((const __m128i *)(const void *)target),
			_mm_loadl_epi64((const __m128i *)(const void *)(target +
									target_len -
									8)));
		unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(
				     _mm_cmpeq_epi8(x, _mm_set1_epi8('?')),
				     _mm_cmpeq_epi8(x, _mm_set1_epi8('#')))) |
			     (unsigned)_mm_movemask_epi8(x);

		if (__builtin_expect(m == 0, 1)) {
			uint8_t *d = c->attrs + len;

			d[0] = CTXSHIM_KEY_PATH;
			d[1] = (uint8_t)target_len;
			_mm_storel_epi64((__m128i *)(void *)(d + TREC_ENTRY_OVERHEAD),
					 x);
			_mm_storel_epi64((__m128i *)(void *)(d + TREC_ENTRY_OVERHEAD +
							     target_len - 8),
					 _mm_unpackhi_epi64(x, x));
			len += TREC_ENTRY_OVERHEAD + target_len;
			goto parent;
		}
	}
#endif
	if (target && target_len) {
		path = url_path(target, target_len, ctxshim_cfg.url_query, &path_len);
		len = attr_text(c->attrs, len, CTXSHIM_KEY_PATH, path, path_len);
	}
#if defined(__SSE2__)
parent:
#endif
	if (c->has_parent)
		len = attr_put_parent(c->attrs, len, c->parent_id);
	return len;
}

/* Inline in both entry points, so that the capture path's request (a
 * local struct) is never stored and reloaded (B4). */
static inline __attribute__((always_inline)) void
request_ctx(struct ctxshim_ctx *c, const struct ctxshim_request *r, bool padded)
{
	size_t len;
	unsigned i;

	request_ids(c, r->traceparent, r->traceparent_len, r->traceparent_repeated,
		    r->tracestate, r->tracestate_lens, r->n_tracestate);
	len = request_attrs(c, r->method, r->method_len, r->method_cut, padded,
			    r->target, r->target_len);
	for (i = 0; __builtin_expect(i < ctxshim_cfg.n_header_attrs, 0); i++)
		if (r->extra[i])
			len = attr_text(c->attrs, len,
					(uint8_t)(CTXSHIM_KEY_FIRST_HEADER + i),
					r->extra[i], r->extra_len[i]);
	c->attrs_len = (uint16_t)len;
}

void
ctxshim_request_ctx(struct ctxshim_ctx *c, const struct ctxshim_request *r)
{
	request_ctx(c, r, false);
}

/* A capture's length, at most max.  The scanner keeps each within its
 * array, but a head split across reads of one socket that two threads read
 * has its capture written by both, or by the pool entry's next owner once
 * freed under a feed (preload/conn.c, "Two readers"): a length found there
 * may be anything, and the values are read up to it (a target of 64 KiB
 * would be read past the pool).  The result of such a head is meaningless;
 * only the reads must stay in the capture. */
static inline size_t
cap_len(size_t len, size_t max)
{
	return len < max ? len : max;
}

CTXSHIM_HOT void
ctxshim_request_ctx_capture(struct ctxshim_ctx *c,
			    const struct http_scan_capture *cap,
			    unsigned flags,
			    const int extra_index[CTXSHIM_MAX_HEADER_ATTRS])
{
	struct ctxshim_request r;
	const char *ts_line = cap->tracestate;
	size_t ts_len = cap_len(cap->tracestate_len, sizeof(cap->tracestate));
	unsigned i;

	/* Only the fields request_ctx() reads: extra[] beyond
	 * n_header_attrs is never looked at (a memset of the whole 216-byte
	 * struct was ~27 instructions per request). */
	r.traceparent = NULL;
	r.traceparent_len = 0;
	r.tracestate = NULL;
	r.tracestate_lens = NULL;
	r.n_tracestate = 0;
	r.method = cap->method;
	r.method_len = cap_len(cap->method_len, sizeof(cap->method));
	r.method_cut = false; /* the scanner takes no longer method */
	r.target = cap->target;
	r.target_len = cap_len(cap->target_len, sizeof(cap->target));
	if (flags & HTTP_SCAN_F_TRACEPARENT) {
		r.traceparent = cap->traceparent;
		r.traceparent_len =
			cap_len(cap->traceparent_len, sizeof(cap->traceparent));
	}
	r.traceparent_repeated = (flags & HTTP_SCAN_F_TRACEPARENT_BAD) != 0;
	/* A folded tracestate is invalid as a whole, and so is one the
	 * scanner found invalid past the 512 bytes it keeps (W3C: drop it
	 * all, keep the traceparent). */
	if (__builtin_expect(
		    (flags & (HTTP_SCAN_F_TRACESTATE | HTTP_SCAN_F_TRACESTATE_BAD)) ==
			    HTTP_SCAN_F_TRACESTATE,
		    0)) {
		r.tracestate = &ts_line;
		r.tracestate_lens = &ts_len;
		r.n_tracestate = 1;
	}
	for (i = 0; __builtin_expect(i < ctxshim_cfg.n_header_attrs, 0) &&
		    i < CTXSHIM_MAX_HEADER_ATTRS;
	     i++) {
		int k = extra_index[i];

		r.extra[i] = NULL;
		if (k < 0 || !(cap->extra_present & (1u << k)) ||
		    (cap->extra_bad & (1u << k)))
			continue;
		r.extra[i] = cap->extra[k];
		r.extra_len[i] = cap_len(cap->extra_len[k], sizeof(cap->extra[k]));
	}
	/* cap->method is the scanner's 20-byte array (padded). */
	_Static_assert(sizeof(cap->method) >= 8, "attr_method() loads 8 bytes");
	request_ctx(c, &r, true);
}

/* The socket level's usual read, fused: http_scan_whole() inline, its
 * values straight into the request model (what
 * ctxshim_request_ctx_capture() does with a capture's; a whole head has no
 * repeated or folded field), without a call or a copy in between (B1). */
CTXSHIM_HOT int
ctxshim_request_ctx_whole(struct ctxshim_ctx *c,
			  struct http_scan *st,
			  const struct http_scan_config *cfg,
			  const void *buf,
			  size_t len,
			  const int extra_index[CTXSHIM_MAX_HEADER_ATTRS])
{
	struct http_scan_head h;
	size_t alen;
	unsigned i;

	if (http_scan_whole_inline(st, cfg, buf, len, &h, true) != 0)
		return -EAGAIN;
	if (__builtin_expect(h.tracestate != NULL, 0)) {
		const char *ts_line = h.tracestate;
		size_t ts_len = h.tracestate_len;

		request_ids(c, h.traceparent, h.traceparent_len, false, &ts_line,
			    &ts_len, 1);
	} else {
		request_ids(c, h.traceparent, h.traceparent_len, false, NULL, NULL, 0);
	}
	/* The method is the start of the request line, which has at least
	 * " / HTTP/1.x\n" after it: 8 bytes can be loaded (padded).  A whole
	 * head has both (request_attrs() need not test for them). */
	if (!h.method || !h.method_len || !h.target || !h.target_len)
		__builtin_unreachable();
	alen = request_attrs(c, h.method, h.method_len, false, true, h.target,
			     h.target_len);
	for (i = 0; __builtin_expect(i < ctxshim_cfg.n_header_attrs, 0) &&
		    i < CTXSHIM_MAX_HEADER_ATTRS;
	     i++) {
		int k = extra_index[i];

		if (k >= 0 && (h.extra_present & (1u << k)))
			alen = attr_text(c->attrs, alen,
					 (uint8_t)(CTXSHIM_KEY_FIRST_HEADER + i),
					 h.extra[k], h.extra_len[k]);
	}
	c->attrs_len = (uint16_t)alen;
	return 0;
}
