/* SPDX-License-Identifier: Apache-2.0 */
/* The fast paths of the request path (issue 8, B4) against simple
 * reference code, on random and exhaustive inputs: SSE2/SWAR hex decoding
 * and encoding and the traceparent parser (proc-context/w3c.c), the
 * attribute encoder (proc-context/thread-record.c), the id stores of the
 * generator (proc-context/rng.c), and the url.path scan and parent-id
 * attribute of the request model (preload/request-ctx.c, thread-ctx.c,
 * linked into this program).  The references are written the slow,
 * obvious way from the documented behaviour, so a fast path that drifts
 * from it fails here with the input that shows it. */
#include "test-common.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cfg.h"
#include "hook-h2.h"
#include "http-scan.h"
#include "request-ctx.h"
#include "rng.h"
#include "shim.h"
#include "thread-ctx.h"
#include "thread-record.h"
#include "w3c.h"

__thread void *otel_thread_ctx_v1;
/* the name the shim's code writes through (shim.h) */
extern __thread void *ctxshim_own_slot __attribute__((alias("otel_thread_ctx_v1")));
enum ctxshim_mode ctxshim_mode = CTXSHIM_ACTIVE;

/* A small deterministic generator for the test inputs (not the one under
 * test), so that a failure can be reproduced. */
static uint64_t fp_state;

static void
fp_seed(uint64_t s)
{
	fp_state = s * 0x9e3779b97f4a7c15ull + 1;
}

static uint64_t
fp_next(void)
{
	uint64_t z = (fp_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static unsigned
fp_below(unsigned n)
{
	return (unsigned)(fp_next() % n);
}

static void
fp_bytes(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)fp_next();
}

/* A byte that is often a valid lowercase hex digit and otherwise one of
 * the characters nearest to the ranges' edges, or anything. */
static char
fp_hexish(void)
{
	static const char edge[] = "/:;@`gAFG-. \t\x7f";

	switch (fp_below(8)) {
	case 0:
		return edge[fp_below(sizeof(edge) - 1)];
	case 1:
		return (char)fp_next();
	default:
		return "0123456789abcdef"[fp_below(16)];
	}
}

static void
hex_str(char *out, const uint8_t *in, size_t n)
{
	for (size_t i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", in[i]);
}

/* ---- references ---- */

static int
ref_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static void
ref_hex_encode(char *out, const uint8_t *in, size_t n)
{
	static const char d[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[in[i] >> 4];
		out[2 * i + 1] = d[in[i] & 15];
	}
}

static bool
ref_hex_decode(uint8_t *out, const char *in, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int h = ref_hexval(in[2 * i]), l = ref_hexval(in[2 * i + 1]);

		if (h < 0 || l < 0)
			return false;
		out[i] = (uint8_t)(h << 4 | l);
	}
	return true;
}

static bool
ref_is_zero(const uint8_t *id, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (id[i])
			return false;
	return true;
}

/* w3c.h, w3c_traceparent_parse(), rule by rule. */
static int
ref_traceparent(const char *s, size_t len, struct w3c_traceparent *out)
{
	struct w3c_traceparent tp;

	while (len > 0 && (s[0] == ' ' || s[0] == '\t')) {
		s++;
		len--;
	}
	while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	if (len < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-')
		return -EINVAL;
	if (!ref_hex_decode(&tp.version, s, 1) || tp.version == 0xff)
		return -EINVAL;
	if (tp.version == 0 && len != 55)
		return -EINVAL;
	if (len > 55 && s[55] != '-')
		return -EINVAL;
	if (!ref_hex_decode(tp.trace_id, s + 3, 16) ||
	    !ref_hex_decode(tp.parent_id, s + 36, 8) ||
	    !ref_hex_decode(&tp.flags, s + 53, 1))
		return -EINVAL;
	if (ref_is_zero(tp.trace_id, 16) || ref_is_zero(tp.parent_id, 8))
		return -EINVAL;
	if (tp.version != 0)
		tp.flags &= W3C_FLAGS_KNOWN;
	*out = tp;
	return 0;
}

/* thread-record.h, trec_attrs_add(): cap at 255 bytes moved back to the
 * start of the straddling UTF-8 character (at most 3 continuation bytes,
 * else a plain cut); drop whole entries that do not fit. */
static int
ref_attrs_add(struct trec_attr_writer *w, uint8_t key, const uint8_t *v, size_t len)
{
	size_t n = len;

	if (n > 255) {
		size_t back = 0;

		n = 255;
		while (back < 3 && (v[n] & 0xc0) == 0x80) {
			n--;
			back++;
		}
		if ((v[n] & 0xc0) == 0x80)
			n = 255;
	}
	if (w->len > w->cap || w->cap - w->len < 2 + n) {
		w->dropped++;
		return -ENOSPC;
	}
	w->buf[w->len] = key;
	w->buf[w->len + 1] = (uint8_t)n;
	for (size_t i = 0; i < n; i++)
		w->buf[w->len + 2 + i] = v[i];
	w->len += 2 + n;
	if (n != len)
		w->capped++;
	return 0;
}

/* RFC 3629 by decoding: a lead byte gives the length, the code point must
 * need that length (no overlong form), not be a surrogate, and be at most
 * U+10FFFF. */
static bool
ref_utf8_valid(const uint8_t *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint32_t cp, min;
		size_t k, len;

		if (s[i] < 0x80) {
			i++;
			continue;
		}
		if ((s[i] & 0xe0) == 0xc0) {
			len = 2, cp = s[i] & 0x1f, min = 0x80;
		} else if ((s[i] & 0xf0) == 0xe0) {
			len = 3, cp = s[i] & 0x0f, min = 0x800;
		} else if ((s[i] & 0xf8) == 0xf0) {
			len = 4, cp = s[i] & 0x07, min = 0x10000;
		} else {
			return false;
		}
		if (n - i < len)
			return false;
		for (k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += len;
	}
	return true;
}

/* request-ctx.h: a value from the request is published as
 * trec_attrs_add() would, if the bytes published (after the cap) are
 * well-formed UTF-8, else left out whole. */
static size_t
ref_text_cap(const uint8_t *v, size_t len)
{
	size_t n = len;

	if (n > 255) {
		size_t back = 0;

		n = 255;
		while (back < 3 && (v[n] & 0xc0) == 0x80) {
			n--;
			back++;
		}
		if ((v[n] & 0xc0) == 0x80)
			n = 255;
	}
	return n;
}

static void
ref_text_add(struct trec_attr_writer *w, uint8_t key, const uint8_t *v, size_t len)
{
	size_t n = ref_text_cap(v, len);

	if (ref_utf8_valid(v, n))
		(void)ref_attrs_add(w, key, v, n);
}

/* request-ctx.c, path_cap(): a cut url.path ends before the first '%' of
 * its last two bytes. */
static void
ref_path_add(struct trec_attr_writer *w, const uint8_t *v, size_t len)
{
	size_t n = ref_text_cap(v, len);

	if (n < len) {
		if (v[n - 2] == '%')
			n -= 2;
		else if (v[n - 1] == '%')
			n--;
	}
	ref_text_add(w, CTXSHIM_KEY_PATH, v, n);
}

static const char *const ref_known_methods[] = {
	"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
};

/* request-ctx.h: a known method (case-sensitive) as itself; anything else
 * as "_OTHER", then the method as http.request.method_original (key 3 +
 * configured headers) by the rule of every value. */
static void
ref_method_add(struct trec_attr_writer *w, const char *m, size_t n, unsigned n_hdr)
{
	for (size_t i = 0; i < sizeof(ref_known_methods) / sizeof(ref_known_methods[0]);
	     i++)
		if (strlen(ref_known_methods[i]) == n &&
		    memcmp(ref_known_methods[i], m, n) == 0) {
			(void)ref_attrs_add(w, CTXSHIM_KEY_METHOD, (const uint8_t *)m,
					    n);
			return;
		}
	(void)ref_attrs_add(w, CTXSHIM_KEY_METHOD, (const uint8_t *)"_OTHER", 6);
	ref_text_add(w, (uint8_t)(CTXSHIM_KEY_FIRST_HEADER + n_hdr), (const uint8_t *)m,
		     n);
}

/* request-ctx.h, ctxshim_url_path() with keep_query false, for an
 * origin-form target: up to the first '?' or '#'. */
static size_t
ref_path_len(const char *t, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (t[i] == '?' || t[i] == '#')
			break;
	return i;
}

/* ---- hex ---- */

START_TEST(test_hex_encode_random)
{
	uint8_t in[64 + 8];
	char out[160], want[160];

	fp_seed(1);
	for (unsigned round = 0; round < 2000; round++) {
		size_t n = fp_below(41), ioff = fp_below(8), ooff = fp_below(8);

		fp_bytes(in, sizeof(in));
		memset(out, 'X', sizeof(out));
		memset(want, 'X', sizeof(want));
		w3c_hex_encode(out + ooff, in + ioff, n);
		ref_hex_encode(want + ooff, in + ioff, n);
		/* also nothing written past the 2n digits */
		ck_assert_msg(memcmp(out, want, sizeof(out)) == 0,
			      "round %u: n=%zu in+%zu out+%zu", round, n, ioff, ooff);
	}
}
END_TEST

START_TEST(test_hex_encode_every_byte)
{
	uint8_t in[256];
	char out[512], want[512];

	for (unsigned i = 0; i < 256; i++)
		in[i] = (uint8_t)i;
	w3c_hex_encode(out, in, 256);
	ref_hex_encode(want, in, 256);
	ck_assert_int_eq(memcmp(out, want, sizeof(out)), 0);
}
END_TEST

START_TEST(test_hex_decode_random)
{
	char in[96];
	uint8_t out[48], want[48];

	fp_seed(2);
	for (unsigned round = 0; round < 20000; round++) {
		size_t n = fp_below(41);
		bool ok;
		int rc;

		for (size_t i = 0; i < 2 * n; i++)
			in[i] = round % 4 ? "0123456789abcdef"[fp_below(16)]
					  : fp_hexish();
		/* mostly valid strings with one bad character somewhere */
		if (round % 4 == 1 && n > 0)
			in[fp_below((unsigned)(2 * n))] = fp_hexish();
		memset(out, 0x5a, sizeof(out));
		ok = ref_hex_decode(want, in, n);
		rc = w3c_hex_decode(out, in, n);
		ck_assert_msg(rc == (ok ? 0 : -EINVAL), "round %u: n=%zu '%.*s' rc=%d",
			      round, n, (int)(2 * n), in, rc);
		if (ok)
			ck_assert_msg(memcmp(out, want, n) == 0, "round %u: '%.*s'",
				      round, (int)(2 * n), in);
		for (size_t i = ok ? n : 0; i < sizeof(out); i++)
			ck_assert_msg(out[i] == 0x5a, "round %u: byte %zu written",
				      round, i);
	}
}
END_TEST

/* Every byte value at every position of blocks that take each path (16
 * digits: SSE2, 8: SWAR, 2: scalar, and mixes). */
START_TEST(test_hex_decode_every_byte_everywhere)
{
	static const size_t sizes[] = {1, 4, 8, 12, 16, 20};
	char in[40];
	uint8_t out[20], want[20];

	fp_seed(3);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k];

		for (size_t pos = 0; pos < 2 * n; pos++)
			for (unsigned b = 0; b < 256; b++) {
				bool ok;

				for (size_t i = 0; i < 2 * n; i++)
					in[i] = "0123456789abcdef"[fp_below(16)];
				in[pos] = (char)b;
				ok = ref_hex_decode(want, in, n);
				ck_assert_int_eq(w3c_hex_decode(out, in, n),
						 ok ? 0 : -EINVAL);
				if (ok)
					ck_assert_int_eq(memcmp(out, want, n), 0);
			}
	}
}
END_TEST

START_TEST(test_id_is_zero_every_position)
{
	uint8_t id[24];

	for (size_t n = 0; n <= sizeof(id); n++) {
		memset(id, 0, sizeof(id));
		ck_assert(w3c_id_is_zero(id, n));
		for (size_t i = 0; i < n; i++) {
			id[i] = (uint8_t)(1u << (i % 8));
			ck_assert_msg(!w3c_id_is_zero(id, n), "n=%zu i=%zu", n, i);
			id[i] = 0;
		}
		/* bytes past n do not count */
		if (n < sizeof(id)) {
			id[n] = 1;
			ck_assert(w3c_id_is_zero(id, n));
		}
	}
}
END_TEST

/* ---- traceparent ---- */

static size_t
random_traceparent(char *s, size_t cap)
{
	size_t len = 0;
	uint8_t b[26];

	fp_bytes(b, sizeof(b));
	/* lead/trail OWS sometimes, a later version sometimes, and then a
	 * few mutations */
	if (fp_below(8) == 0)
		s[len++] = fp_below(2) ? ' ' : '\t';
	if (fp_below(4) == 0)
		b[0] = (uint8_t)fp_below(3) == 0 ? 0xff : b[0];
	else
		b[0] = 0;
	if (fp_below(6) == 0)
		memset(b + 1, 0, fp_below(2) ? 16 : 0);
	if (fp_below(6) == 0)
		memset(b + 17, 0, 8);
	hex_str(s + len, b, 1);
	s[len + 2] = '-';
	hex_str(s + len + 3, b + 1, 16);
	s[len + 35] = '-';
	hex_str(s + len + 36, b + 17, 8);
	s[len + 52] = '-';
	hex_str(s + len + 53, b + 25, 1);
	len += 55;
	if (fp_below(6) == 0) {
		s[len++] = fp_below(2) ? '-' : 'x';
		while (fp_below(3) && len < cap - 2)
			s[len++] = fp_hexish();
	}
	if (fp_below(8) == 0)
		s[len++] = fp_below(2) ? ' ' : '\t';
	for (unsigned m = fp_below(3); m > 0; m--)
		s[fp_below((unsigned)len)] = fp_hexish();
	if (fp_below(10) == 0)
		len -= fp_below((unsigned)len);
	return len;
}

START_TEST(test_traceparent_random)
{
	char s[96];

	fp_seed(4);
	for (unsigned round = 0; round < 50000; round++) {
		size_t len = random_traceparent(s, sizeof(s));
		struct w3c_traceparent got, want;
		int rg, rw;

		memset(&got, 0xa5, sizeof(got));
		memset(&want, 0xa5, sizeof(want));
		rw = ref_traceparent(s, len, &want);
		rg = w3c_traceparent_parse(s, len, &got);
		ck_assert_msg(rg == rw, "round %u: '%.*s' got %d want %d", round,
			      (int)len, s, rg, rw);
		/* filled only on success, exactly like the reference */
		ck_assert_msg(memcmp(&got, &want, sizeof(got)) == 0, "round %u: '%.*s'",
			      round, (int)len, s);
	}
}
END_TEST

/* Every byte value at every position of a valid v00 traceparent. */
START_TEST(test_traceparent_every_byte_everywhere)
{
	static const char tp[] =
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
	char s[56];

	for (size_t pos = 0; pos < 55; pos++)
		for (unsigned b = 0; b < 256; b++) {
			struct w3c_traceparent got, want;

			memcpy(s, tp, sizeof(tp));
			s[pos] = (char)b;
			memset(&got, 0, sizeof(got));
			memset(&want, 0, sizeof(want));
			ck_assert_msg(w3c_traceparent_parse(s, 55, &got) ==
					      ref_traceparent(s, 55, &want),
				      "pos %zu byte %u", pos, b);
			ck_assert_int_eq(memcmp(&got, &want, sizeof(got)), 0);
		}
}
END_TEST

/* ---- attributes ---- */

START_TEST(test_attrs_add_random)
{
	static uint8_t val[400];
	uint8_t got_buf[TREC_ATTRS_MAX + 16], want_buf[TREC_ATTRS_MAX + 16];

	fp_seed(5);
	for (unsigned round = 0; round < 3000; round++) {
		struct trec_attr_writer got, want;
		size_t cap =
			fp_below(8) ? fp_below(TREC_ATTRS_MAX + 1) : TREC_ATTRS_MAX + 8;

		memset(got_buf, 0xee, sizeof(got_buf));
		memset(want_buf, 0xee, sizeof(want_buf));
		trec_attrs_init(&got, got_buf, cap);
		trec_attrs_init(&want, want_buf, cap);
		ck_assert_uint_eq(got.cap, cap < TREC_ATTRS_MAX ? cap : TREC_ATTRS_MAX);
		want.cap = got.cap;
		for (unsigned k = 0; k < 12; k++) {
			size_t len;
			uint8_t key = (uint8_t)fp_next();
			int rg, rw;

			switch (fp_below(4)) {
			case 0: /* long: capping, on UTF-8 sequences */
				len = 240 + fp_below(160);
				for (size_t i = 0; i < len;) {
					unsigned cl =
						fp_below(5); /* 0: ASCII, 4: stray */

					val[i++] = cl == 0 ? 'a'
						   : cl == 4
							   ? 0x80
							   : (uint8_t)(0xc0 | cl << 4);
					for (unsigned c = 0; c < cl && c < 3 && i < len;
					     c++)
						val[i++] = 0x80 | (uint8_t)fp_below(64);
				}
				break;
			case 1:
				len = fp_below(4);
				fp_bytes(val, len);
				break;
			default:
				len = fp_below(64);
				fp_bytes(val, len);
				break;
			}
			rg = trec_attrs_add(&got, key, val, len);
			rw = ref_attrs_add(&want, key, val, len);
			ck_assert_msg(rg == rw, "round %u add %u: len %zu: %d vs %d",
				      round, k, len, rg, rw);
			ck_assert_uint_eq(got.len, want.len);
			ck_assert_uint_eq(got.dropped, want.dropped);
			ck_assert_uint_eq(got.capped, want.capped);
		}
		ck_assert_msg(memcmp(got_buf, want_buf, sizeof(got_buf)) == 0,
			      "round %u", round);
	}
}
END_TEST

START_TEST(test_attrs_add_args)
{
	struct trec_attr_writer w;
	uint8_t buf[8];

	trec_attrs_init(&w, buf, sizeof(buf));
	ck_assert_int_eq(trec_attrs_add(NULL, 0, "x", 1), -EINVAL);
	ck_assert_int_eq(trec_attrs_add(&w, 0, NULL, 1), -EINVAL);
	ck_assert_int_eq(trec_attrs_add(&w, 0, NULL, 0), 0);
	ck_assert_uint_eq(w.len, 2);
	ck_assert_int_eq(trec_attrs_add(&w, 1, "abcdef", 6), -ENOSPC);
	ck_assert_uint_eq(w.dropped, 1);
	ck_assert_int_eq(trec_attrs_add(&w, 1, "abcd", 4), 0);
	ck_assert_uint_eq(w.len, 8);
	ck_assert_int_eq(memcmp(buf, "\0\0\1\4abcd", 8), 0);
}
END_TEST

/* ---- ids ---- */

START_TEST(test_rng_ids_little_endian)
{
	struct ctx_rng a, b;
	uint8_t seed[CTX_RNG_SEED_SIZE], id[16], want[16];

	fp_seed(6);
	for (unsigned round = 0; round < 200; round++) {
		fp_bytes(seed, sizeof(seed));
		ctx_rng_seed(&a, seed);
		b = a;
		/* a span-id is the next output, stored little-endian (the
		 * generator's outputs are never 0 here: 2^-64) */
		ctx_rng_span_id(&a, id);
		{
			uint64_t x = ctx_rng_next(&b);

			for (unsigned k = 0; k < 8; k++)
				want[k] = (uint8_t)(x >> (8 * k));
		}
		ck_assert_int_eq(memcmp(id, want, 8), 0);
		ctx_rng_trace_id(&a, id);
		for (unsigned h = 0; h < 2; h++) {
			uint64_t x = ctx_rng_next(&b);

			for (unsigned k = 0; k < 8; k++)
				want[8 * h + k] = (uint8_t)(x >> (8 * k));
		}
		ck_assert_int_eq(memcmp(id, want, 16), 0);
		ck_assert_uint_eq(a.s[0], b.s[0]);
		ck_assert_uint_eq(a.s[3], b.s[3]);
	}
}
END_TEST

/* The seed is read as four little-endian words: seeds that differ in one
 * byte give different states, and the same seed the same state. */
START_TEST(test_rng_seed_bytes)
{
	uint8_t seed[CTX_RNG_SEED_SIZE] = {0};
	struct ctx_rng base, r;

	ctx_rng_seed(&base, seed);
	for (unsigned i = 0; i < sizeof(seed); i++) {
		seed[i] = 1;
		ctx_rng_seed(&r, seed);
		ck_assert_msg(memcmp(&r, &base, sizeof(r)) != 0, "byte %u ignored", i);
		seed[i] = 0;
	}
	ctx_rng_seed(&r, seed);
	ck_assert_int_eq(memcmp(&r, &base, sizeof(r)), 0);
}
END_TEST

/* ---- request model ---- */

static void
random_target(char *t, size_t len)
{
	static const char chars[] = "/abc?#=&%:.";

	for (size_t i = 0; i < len; i++)
		t[i] = fp_below(4) ? chars[fp_below(3)]
				   : chars[fp_below(sizeof(chars) - 1)];
	if (len)
		t[0] = '/';
}

START_TEST(test_url_path_random)
{
	/* In the middle of a larger buffer full of '?', so that a read
	 * outside the target would show as a wrong answer (and under ASan or
	 * valgrind as an error with a buffer of its own, below). */
	char buf[256];

	fp_seed(7);
	for (unsigned round = 0; round < 20000; round++) {
		size_t len = fp_below(80), off = fp_below(32), got_len = 999;
		const char *t = buf + 64 + off, *p;

		memset(buf, '?', sizeof(buf));
		random_target(buf + 64 + off, len);
		/* the query mark sparse in some targets, absent in others */
		if (round % 3 == 0)
			for (size_t i = 0; i < len; i++)
				if (t[i] == '?' || t[i] == '#')
					buf[64 + off + i] = 'q';
		if (round % 3 == 1 && len > 1)
			buf[64 + off + 1 + fp_below((unsigned)len - 1)] =
				fp_below(2) ? '?' : '#';
		p = ctxshim_url_path(t, len, false, &got_len);
		ck_assert_ptr_eq(p, t);
		ck_assert_msg(got_len == ref_path_len(t, len),
			      "round %u: '%.*s' -> %zu", round, (int)len, t, got_len);
		p = ctxshim_url_path(t, len, true, &got_len);
		ck_assert_ptr_eq(p, t);
		ck_assert_uint_eq(got_len, len);
	}
}
END_TEST

/* Exactly-sized heap copies: a read past the end is an error under
 * ASan/valgrind even when it would not change the answer. */
START_TEST(test_url_path_exact_buffers)
{
	fp_seed(8);
	for (size_t len = 1; len <= 70; len++)
		for (unsigned rep = 0; rep < 20; rep++) {
			char *t = malloc(len);
			size_t got_len;

			ck_assert_ptr_nonnull(t);
			random_target(t, len);
			if (rep < 10)
				for (size_t i = 0; i < len; i++)
					if (t[i] == '?' || t[i] == '#')
						t[i] = 'x';
			(void)ctxshim_url_path(t, len, false, &got_len);
			ck_assert_uint_eq(got_len, ref_path_len(t, len));
			free(t);
		}
}
END_TEST

START_TEST(test_url_path_absolute_form)
{
	static const struct {
		const char *target, *path;
	} cases[] = {
		{"http://example.com/a/b?q=1", "/a/b"},
		{"http://example.com?q=1", ""},
		{"http://example.com", ""},
		{"https://h:8080/x#frag", "/x"},
		{"*", "*"},
		{"/p?x#y", "/p"},
		{"/p#y?x", "/p"},
		{"", ""},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n;
		const char *p = ctxshim_url_path(cases[i].target,
						 strlen(cases[i].target), false, &n);

		ck_assert_msg(n == strlen(cases[i].path) &&
				      memcmp(p, cases[i].path, n) == 0,
			      "%s -> '%.*s'", cases[i].target, (int)n, p);
	}
}
END_TEST

/* The whole request model for a traced request: ids, flags and the three
 * attributes, decoded back. */
START_TEST(test_request_ctx_attrs)
{
	static const char tpv[] =
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03";
	struct ctxshim_request r;
	struct ctxshim_ctx c;
	struct trec_attrs_decoded d;
	const struct trec_attr *a;
	uint8_t parent[8];

	memset(&r, 0, sizeof(r));
	r.method = "GET";
	r.method_len = 3;
	r.target = "/api/v1/orders/12345/items?page=2&limit=50";
	r.target_len = strlen(r.target);
	r.traceparent = tpv;
	r.traceparent_len = 55;
	ctxshim_cfg.new_traces = true;
	ctxshim_request_ctx(&c, &r);
	ck_assert_int_eq(w3c_hex_decode(parent, "00f067aa0ba902b7", 8), 0);
	ck_assert_int_eq(memcmp(c.parent_id, parent, 8), 0);
	ck_assert_uint_eq(c.has_parent, 1);
	ck_assert_uint_eq(c.flags, 0x03);
	ck_assert(!w3c_id_is_zero(c.span_id, 8));
	ck_assert_int_eq(trec_attrs_decode(c.attrs, c.attrs_len, 3, &d), 0);
	ck_assert_uint_eq(d.n, 3);
	a = trec_attrs_find(&d, CTXSHIM_KEY_METHOD);
	ck_assert(a && a->len == 3 && memcmp(a->val, "GET", 3) == 0);
	a = trec_attrs_find(&d, CTXSHIM_KEY_PATH);
	ck_assert(a && a->len == 26 &&
		  memcmp(a->val, "/api/v1/orders/12345/items", 26) == 0);
	a = trec_attrs_find(&d, CTXSHIM_KEY_PARENT);
	ck_assert(a && a->len == 16 && memcmp(a->val, "00f067aa0ba902b7", 16) == 0);
}
END_TEST

/* The parent-id entry, written in place or through trec_attrs_add(), on
 * writers filled to every level around "just fits". */
START_TEST(test_parent_attr_random)
{
	fp_seed(9);
	for (unsigned round = 0; round < 2000; round++) {
		struct ctxshim_ctx c;
		struct trec_attr_writer w, want;
		uint8_t buf[64], want_buf[64];
		char hex[16];
		size_t cap = fp_below(sizeof(buf) + 1),
		       fill = fp_below(sizeof(buf) + 1);

		memset(&c, 0, sizeof(c));
		fp_bytes(c.parent_id, 8);
		c.has_parent = (uint8_t)(round % 5 != 0);
		memset(buf, 0xee, sizeof(buf));
		trec_attrs_init(&w, buf, cap);
		w.len = fill <= cap ? fill : cap; /* as if entries were there */
		memcpy(want_buf, buf, sizeof(buf));
		want = w;
		want.buf = want_buf;
		ctxshim_ctx_add_parent_attr(&c, &w);
		if (c.has_parent) {
			ref_hex_encode(hex, c.parent_id, 8);
			(void)ref_attrs_add(&want, CTXSHIM_KEY_PARENT,
					    (const uint8_t *)hex, 16);
		}
		ck_assert_uint_eq(w.len, want.len);
		ck_assert_uint_eq(w.dropped, want.dropped);
		ck_assert_uint_eq(w.capped, want.capped);
		ck_assert_msg(memcmp(buf, want_buf, sizeof(buf)) == 0,
			      "round %u: cap %zu fill %zu", round, cap, fill);
	}
}
END_TEST

/* ctxshim_request_ctx()'s attributes against the reference encoder, with
 * every configured header, long values (capping) and enough of them that
 * some entries are dropped. */
START_TEST(test_request_ctx_random)
{
	static char vals[CTXSHIM_MAX_HEADER_ATTRS][300];
	static const char tpv[] =
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
	char method[300], target[300];

	fp_seed(10);
	ctxshim_cfg.new_traces = true;
	ctxshim_cfg.url_query = false;
	ctxshim_cfg.n_header_attrs = CTXSHIM_MAX_HEADER_ATTRS;
	for (unsigned round = 0; round < 3000; round++) {
		struct ctxshim_request r;
		struct ctxshim_ctx c;
		struct trec_attr_writer want;
		uint8_t want_buf[TREC_ATTRS_MAX];
		size_t big = round % 3 == 0 ? 300 : 40;

		memset(&r, 0, sizeof(r));
		r.method_len = fp_below(round % 7 == 0 ? 300 : 8);
		r.method = fp_below(10) ? method : NULL;
		for (size_t i = 0; i < r.method_len; i++)
			method[i] = (char)('A' + fp_below(26));
		if (round % 3 == 1) {
			/* A known method, or one a byte away from it. */
			const char *k = ref_known_methods[fp_below(9)];

			r.method_len = strlen(k);
			memcpy(method, k, r.method_len);
			if (fp_below(2))
				method[fp_below((unsigned)r.method_len)] ^=
					(char)(1u << fp_below(8));
		}
		r.target_len = fp_below((unsigned)big);
		r.target = fp_below(10) ? target : NULL;
		random_target(target, r.target_len);
		/* Some bytes >= 0x80: UTF-8 characters, or not. */
		for (unsigned j = fp_below(4) ? 0 : fp_below(4); j; j--)
			if (r.target_len > 1)
				target[1 + fp_below((unsigned)r.target_len - 1)] =
					(char)(0x80 | fp_below(0x80));
		if (fp_below(3)) {
			r.traceparent = tpv;
			r.traceparent_len = 55;
		}
		for (unsigned i = 0; i < CTXSHIM_MAX_HEADER_ATTRS; i++) {
			r.extra_len[i] = fp_below((unsigned)big);
			r.extra[i] = fp_below(3) ? vals[i] : NULL;
			/* UTF-8 two-byte characters, so that capping moves back
			 * (an odd length ends in half of one: left out) */
			for (size_t k = 0; k < r.extra_len[i]; k++)
				vals[i][k] = (char)(k % 2 ? 0xa9 : 0xc3);
			if (fp_below(4) == 0)
				for (size_t k = 0; k < r.extra_len[i]; k++)
					vals[i][k] = (char)('a' + fp_below(26));
		}
		ctxshim_request_ctx(&c, &r);

		trec_attrs_init(&want, want_buf, sizeof(want_buf));
		if (r.method && r.method_len)
			ref_method_add(&want, method, r.method_len,
				       CTXSHIM_MAX_HEADER_ATTRS);
		if (r.target && r.target_len)
			ref_path_add(&want, (const uint8_t *)target,
				     ref_path_len(target, r.target_len));
		if (r.traceparent)
			(void)ref_attrs_add(&want, CTXSHIM_KEY_PARENT,
					    (const uint8_t *)"00f067aa0ba902b7", 16);
		for (unsigned i = 0; i < CTXSHIM_MAX_HEADER_ATTRS; i++)
			if (r.extra[i])
				ref_text_add(&want,
					     (uint8_t)(CTXSHIM_KEY_FIRST_HEADER + i),
					     (const uint8_t *)vals[i], r.extra_len[i]);
		ck_assert_msg(c.attrs_len == want.len, "round %u: %u vs %zu", round,
			      c.attrs_len, want.len);
		ck_assert_msg(memcmp(c.attrs, want_buf, want.len) == 0, "round %u",
			      round);
		ck_assert_uint_eq(c.has_parent, r.traceparent != NULL);
	}
	ctxshim_cfg.n_header_attrs = 0;
}
END_TEST

/* ---- attribute values: UTF-8 and methods ---- */

/* One request through ctxshim_request_ctx() (capture: through
 * ctxshim_request_ctx_capture(), the socket level's entry, with the
 * method in the scanner's 20-byte array followed by garbage), decoded.
 * d points into one of two contexts used in turn: the results of the
 * last two calls stay valid. */
static void
attr_run(const char *method,
	 size_t mlen,
	 const char *target,
	 size_t tlen,
	 const char *extra0,
	 size_t e0len,
	 bool capture,
	 struct trec_attrs_decoded *d)
{
	static struct ctxshim_ctx ctxs[2];
	static unsigned turn;
	struct ctxshim_ctx *cp = &ctxs[turn++ & 1];

	ctxshim_cfg.new_traces = true;
	if (capture) {
		static struct http_scan_capture cap;
		int idx[CTXSHIM_MAX_HEADER_ATTRS] = {0, 1, 2, 3, 4, 5, 6, 7};

		memset(&cap, 0xa5, sizeof(cap));
		memcpy(cap.method, "GETPOSTGETHEADPUTXYZ", sizeof(cap.method));
		ck_assert_uint_le(mlen, sizeof(cap.method));
		ck_assert_uint_le(tlen, sizeof(cap.target));
		ck_assert_uint_le(e0len, sizeof(cap.extra[0]));
		memcpy(cap.method, method, mlen);
		cap.method_len = (uint8_t)mlen;
		memcpy(cap.target, target, tlen);
		cap.target_len = (uint16_t)tlen;
		cap.extra_present = 0;
		cap.extra_bad = 0;
		if (extra0) {
			memcpy(cap.extra[0], extra0, e0len);
			cap.extra_len[0] = (uint16_t)e0len;
			cap.extra_present = 1;
		}
		ctxshim_request_ctx_capture(cp, &cap, HTTP_SCAN_F_CAPTURED, idx);
	} else {
		struct ctxshim_request r;

		memset(&r, 0, sizeof(r));
		r.method = method;
		r.method_len = mlen;
		r.target = target;
		r.target_len = tlen;
		r.extra[0] = extra0;
		r.extra_len[0] = e0len;
		ctxshim_request_ctx(cp, &r);
	}
	ck_assert_int_eq(trec_attrs_decode(cp->attrs, cp->attrs_len, 255, d), 0);
	ck_assert(!d->truncated);
}

static bool
attr_is(const struct trec_attrs_decoded *d, uint8_t key, const char *want, size_t n)
{
	const struct trec_attr *a = trec_attrs_find(d, key);

	return a && a->len == n && memcmp(a->val, want, n) == 0;
}

/* Every known method as itself, and nothing else: no
 * http.request.method_original. */
START_TEST(test_method_known)
{
	ctxshim_cfg.n_header_attrs = 0;
	for (size_t i = 0; i < sizeof(ref_known_methods) / sizeof(ref_known_methods[0]);
	     i++) {
		const char *m = ref_known_methods[i];
		struct trec_attrs_decoded d;

		for (int capture = 0; capture < 2; capture++) {
			attr_run(m, strlen(m), "/x", 2, NULL, 0, capture, &d);
			ck_assert_msg(attr_is(&d, CTXSHIM_KEY_METHOD, m, strlen(m)),
				      "%s (capture %d)", m, capture);
			ck_assert_msg(d.n == 2, "%s: %u attributes", m, d.n);
		}
	}
}
END_TEST

/* Anything else (case-sensitive) is "_OTHER", the method itself in
 * http.request.method_original, the key after the configured headers. */
START_TEST(test_method_other)
{
	static const char *const cases[] = {
		"get",
		"Get",
		"gET",
		"GETS",
		"GE",
		"G",
		"E",
		"PUTS",
		"POS",
		"HEADS",
		"DELET",
		"DELETEX",
		"CONNECTX",
		"OPTION",
		"OPTIONSS",
		"TRACE_",
		"PATCHES",
		"PROPFIND",
		"QUERY",
		"M-SEARCH",
		"_OTHER",
		"ABCDEFGHIJKLMNOPQRST", /* 20 bytes: the scanner's longest */
	};
	unsigned n_hdr = (unsigned)_i;

	ctxshim_cfg.n_header_attrs = n_hdr;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *m = cases[i];
		struct trec_attrs_decoded d;

		for (int capture = 0; capture < 2; capture++) {
			attr_run(m, strlen(m), "/x", 2, NULL, 0, capture, &d);
			ck_assert_msg(attr_is(&d, CTXSHIM_KEY_METHOD, "_OTHER", 6),
				      "%s (capture %d)", m, capture);
			ck_assert_msg(
				attr_is(&d, (uint8_t)(CTXSHIM_KEY_FIRST_HEADER + n_hdr),
					m, strlen(m)),
				"%s: original (capture %d)", m, capture);
			ck_assert(attr_is(&d, CTXSHIM_KEY_PATH, "/x", 2));
		}
	}
	ctxshim_cfg.n_header_attrs = 0;
}
END_TEST

/* Methods only the library hooks can pass (any bytes, any length): an
 * original that is not UTF-8 is left out, a long one capped. */
START_TEST(test_method_other_odd)
{
	char big[300];
	struct trec_attrs_decoded d;

	ctxshim_cfg.n_header_attrs = 0;
	attr_run("G\xff"
		 "ET",
		 4, "/x", 2, NULL, 0, false, &d);
	ck_assert(attr_is(&d, CTXSHIM_KEY_METHOD, "_OTHER", 6));
	ck_assert_ptr_null(trec_attrs_find(&d, CTXSHIM_KEY_FIRST_HEADER));
	attr_run("\xc3\x89T\xc3\x89", 5, "/x", 2, NULL, 0, false, &d);
	ck_assert(attr_is(&d, CTXSHIM_KEY_FIRST_HEADER, "\xc3\x89T\xc3\x89", 5));
	memset(big, 'A', sizeof(big));
	memcpy(big, "GET", 3);
	attr_run(big, sizeof(big), "/x", 2, NULL, 0, false, &d);
	ck_assert(attr_is(&d, CTXSHIM_KEY_METHOD, "_OTHER", 6));
	ck_assert(attr_is(&d, CTXSHIM_KEY_FIRST_HEADER, big, 255));
	ck_assert(attr_is(&d, CTXSHIM_KEY_PATH, "/x", 2));
	/* A known method's prefix in the scanner's array: only method_len
	 * counts. */
	attr_run("GET", 2, "/x", 2, NULL, 0, true, &d);
	ck_assert(attr_is(&d, CTXSHIM_KEY_METHOD, "_OTHER", 6));
	ck_assert(attr_is(&d, CTXSHIM_KEY_FIRST_HEADER, "GE", 2));
}
END_TEST

/* url.path: published when well-formed UTF-8, else left out whole; the
 * other attributes stay. */
START_TEST(test_path_utf8)
{
	static const struct {
		const char *target, *path; /* path NULL: left out */
	} cases[] = {
		{"/caf\xc3\xa9", "/caf\xc3\xa9"},
		{"/\xe2\x82\xac/\xf0\x9f\x98\x80", "/\xe2\x82\xac/\xf0\x9f\x98\x80"},
		{"/\xf4\x8f\xbf\xbf", "/\xf4\x8f\xbf\xbf"}, /* U+10FFFF */
		{"/\xef\xbf\xbd", "/\xef\xbf\xbd"},         /* U+FFFD */
		{"/\xff", NULL},
		{"/a\x80"
		 "b",
		 NULL},                              /* lone continuation */
		{"/caf\xe9", NULL},                  /* Latin-1 */
		{"/\xc0\xaf", NULL},                 /* overlong '/' */
		{"/\xc1\xbf", NULL},                 /* overlong */
		{"/\xe0\x80\xaf", NULL},             /* overlong '/' */
		{"/\xe0\x9f\xbf", NULL},             /* overlong */
		{"/\xf0\x80\x80\xaf", NULL},         /* overlong '/' */
		{"/\xf0\x8f\xbf\xbf", NULL},         /* overlong */
		{"/\xed\xa0\x80", NULL},             /* U+D800 */
		{"/\xed\xbf\xbf", NULL},             /* U+DFFF */
		{"/\xed\xa0\xbd\xed\xb8\x80", NULL}, /* CESU-8 pair */
		{"/\xf4\x90\x80\x80", NULL},         /* U+110000 */
		{"/\xf5\x80\x80\x80", NULL},
		{"/\xf8\x88\x80\x80\x80", NULL}, /* 5-byte form */
		{"/x\xe2\x82", NULL},            /* cut short */
		{"/x\xe2\x82/", NULL},
		{"/0123456789abcdef0123456789\xff", NULL}, /* 28 bytes: SSE2 */
		{"/0123456789abcdef0123456789abcdef0123456789\xc3", NULL}, /* 44 */
		{"/ok?q=\xff", "/ok"}, /* query not published */
		{"/ok#\xff", "/ok"},
	};

	ctxshim_cfg.n_header_attrs = 0;
	ctxshim_cfg.url_query = false;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (int capture = 0; capture < 2; capture++) {
			struct trec_attrs_decoded d;
			const char *t = cases[i].target, *p = cases[i].path;

			attr_run("GET", 3, t, strlen(t), NULL, 0, capture, &d);
			ck_assert(attr_is(&d, CTXSHIM_KEY_METHOD, "GET", 3));
			if (p)
				ck_assert_msg(
					attr_is(&d, CTXSHIM_KEY_PATH, p, strlen(p)),
					"case %zu (capture %d)", i, capture);
			else
				ck_assert_msg(!trec_attrs_find(&d, CTXSHIM_KEY_PATH),
					      "case %zu published (capture %d)", i,
					      capture);
		}
	}
	/* With the query kept, its bytes are published and checked too. */
	ctxshim_cfg.url_query = true;
	{
		struct trec_attrs_decoded d;

		attr_run("GET", 3, "/ok?q=\xff", 7, NULL, 0, false, &d);
		ck_assert(!trec_attrs_find(&d, CTXSHIM_KEY_PATH));
		attr_run("GET", 3, "/ok?q=\xc3\xa9", 8, NULL, 0, true, &d);
		ck_assert(attr_is(&d, CTXSHIM_KEY_PATH, "/ok?q=\xc3\xa9", 8));
	}
	ctxshim_cfg.url_query = false;
}
END_TEST

/* Header values: obs-text (RFC 9110 allows bytes 0x80-0xff in field
 * values; Latin-1 in practice) is left out, UTF-8 kept; and every length
 * and position of a bad byte, through each size class of the copy. */
START_TEST(test_header_utf8)
{
	char v[300];
	struct trec_attrs_decoded d;

	ctxshim_cfg.n_header_attrs = 1;
	attr_run("GET", 3, "/x", 2, "M\xfcller", 7, false, &d);
	ck_assert(!trec_attrs_find(&d, CTXSHIM_KEY_FIRST_HEADER));
	ck_assert(attr_is(&d, CTXSHIM_KEY_PATH, "/x", 2));
	attr_run("GET", 3, "/x", 2, "M\xc3\xbcller", 8, true, &d);
	ck_assert(attr_is(&d, CTXSHIM_KEY_FIRST_HEADER, "M\xc3\xbcller", 8));

	for (size_t n = 1; n <= sizeof(v); n++) {
		for (int capture = 0; capture < 2; capture++) {
			if (capture && n > 256)
				break;
			memset(v, 'a', n);
			attr_run("GET", 3, "/x", 2, v, n, capture, &d);
			ck_assert_msg(attr_is(&d, CTXSHIM_KEY_FIRST_HEADER, v,
					      n > 255 ? 255 : n),
				      "ASCII %zu", n);
			for (size_t pos = 0; pos < n && pos < 255; pos++) {
				v[pos] = (char)0x80;
				attr_run("GET", 3, "/x", 2, v, n, capture, &d);
				ck_assert_msg(
					!trec_attrs_find(&d, CTXSHIM_KEY_FIRST_HEADER),
					"length %zu, 0x80 at %zu published", n, pos);
				v[pos] = 'a';
			}
		}
	}
	ctxshim_cfg.n_header_attrs = 0;
}
END_TEST

/* Over 255 bytes a value is cut before the character that straddles byte
 * 255, and the bytes published are what is checked. */
START_TEST(test_value_cut_at_bound)
{
	char v[300];
	struct trec_attrs_decoded d;

	ctxshim_cfg.n_header_attrs = 1;
	for (int capture = 0; capture < 2; capture++) {
		/* U+20AC at 253..255: cut to 253. */
		memset(v, 'a', sizeof(v));
		memcpy(v + 253, "\xe2\x82\xac", 3);
		attr_run("GET", 3, "/x", 2, v, 256, capture, &d);
		ck_assert(attr_is(&d, CTXSHIM_KEY_FIRST_HEADER, v, 253));
		/* U+1F600 at 252..255: cut to 252. */
		memcpy(v + 252, "\xf0\x9f\x98\x80", 4);
		attr_run("GET", 3, "/x", 2, v, 256, capture, &d);
		ck_assert(attr_is(&d, CTXSHIM_KEY_FIRST_HEADER, v, 252));
		/* U+00E9 at 254..255, ending at byte 256: cut to 254. */
		memset(v, 'a', sizeof(v));
		memcpy(v + 254, "\xc3\xa9", 2);
		attr_run("GET", 3, "/x", 2, v, 256, capture, &d);
		ck_assert(attr_is(&d, CTXSHIM_KEY_FIRST_HEADER, v, 254));
		/* A bad byte past the cut is never published: the rest is. */
		memset(v, 'a', sizeof(v));
		v[255] = (char)0xff;
		attr_run("GET", 3, "/x", 2, v, 256, capture, &d);
		ck_assert(attr_is(&d, CTXSHIM_KEY_FIRST_HEADER, v, 255));
		/* The same path through url.path, the socket level's 256-byte
		 * target cut mid-character. */
		memset(v, 'a', sizeof(v));
		v[0] = '/';
		memcpy(v + 254, "\xe2\x82", 2);
		attr_run("GET", 3, v, 256, NULL, 0, capture, &d);
		ck_assert(attr_is(&d, CTXSHIM_KEY_PATH, v, 254));
		/* Bytes that are not UTF-8 before the cut: left out. */
		v[100] = (char)0xc0;
		attr_run("GET", 3, v, 256, NULL, 0, capture, &d);
		ck_assert(!trec_attrs_find(&d, CTXSHIM_KEY_PATH));
	}
	ctxshim_cfg.n_header_attrs = 0;
}
END_TEST

/* A url.path cut inside a percent-escape ends before it: "%3F" at 252
 * (whole before the cut), 253 and 254 (straddling it), 255 (after it).
 * A header value keeps the plain cut. */
START_TEST(test_path_cut_escape)
{
	static const size_t want[] = {255, 253, 254, 255};
	char v[300];
	struct trec_attrs_decoded d;

	ctxshim_cfg.n_header_attrs = 1;
	for (size_t at = 252; at <= 255; at++) {
		for (int capture = 0; capture < 2; capture++) {
			/* the socket level's 256-byte target; else past it */
			size_t n = capture ? 256 : sizeof(v);

			memset(v, 'a', sizeof(v));
			v[0] = '/';
			memcpy(v + at, "%3F", at + 3 <= n ? 3 : n - at);
			attr_run("GET", 3, v, n, v, n, capture, &d);
			ck_assert_msg(attr_is(&d, CTXSHIM_KEY_PATH, v, want[at - 252]),
				      "%%3F at %zu (capture %d)", at, capture);
			ck_assert_msg(attr_is(&d, CTXSHIM_KEY_FIRST_HEADER, v, 255),
				      "header, %%3F at %zu (capture %d)", at, capture);
		}
	}
	/* "%%" at the end: neither is kept; so is the query when kept. */
	memset(v, 'a', sizeof(v));
	v[0] = '/';
	memcpy(v + 253, "%%41", 4);
	attr_run("GET", 3, v, sizeof(v), NULL, 0, false, &d);
	ck_assert(attr_is(&d, CTXSHIM_KEY_PATH, v, 253));
	ctxshim_cfg.url_query = true;
	v[10] = '?';
	attr_run("GET", 3, v, 256, NULL, 0, true, &d);
	ck_assert(attr_is(&d, CTXSHIM_KEY_PATH, v, 253));
	ctxshim_cfg.url_query = false;
	ctxshim_cfg.n_header_attrs = 0;
}
END_TEST

/* A capture whose lengths are past its arrays (two threads reading one
 * socket share it: preload/conn.c, "Two readers"), at the end of a mapping
 * followed by an inaccessible page: the values are read no further than
 * their arrays (on the old code, url_path() ran 64 KiB past the target). */
START_TEST(test_capture_lengths_untrusted)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t need = (sizeof(struct http_scan_capture) + (size_t)page - 1) /
		      (size_t)page * (size_t)page;
	int idx[CTXSHIM_MAX_HEADER_ATTRS] = {0, 1, 2, 3, 4, 5, 6, 7};
	struct http_scan_capture *cap;
	struct trec_attrs_decoded d;
	struct ctxshim_ctx c;
	uint8_t *map;

	map = mmap(NULL, need + (size_t)page, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert(map != MAP_FAILED);
	ck_assert_int_eq(mprotect(map + need, (size_t)page, PROT_NONE), 0);
	cap = (struct http_scan_capture *)(map + need - sizeof(*cap));
	memset(cap, 'a', sizeof(*cap));
	cap->target[0] = '/';
	memcpy(cap->method, "GET", 3);
	cap->method_len = UINT8_MAX;
	cap->target_len = UINT16_MAX;
	cap->traceparent_len = UINT8_MAX;
	cap->tracestate_len = UINT16_MAX;
	cap->extra_present = 1;
	cap->extra_bad = 0;
	for (unsigned k = 0; k < HTTP_SCAN_EXTRA_MAX; k++)
		cap->extra_len[k] = UINT16_MAX;
	ctxshim_cfg.n_header_attrs = 1;
	ctxshim_cfg.new_traces = true;
	ctxshim_request_ctx_capture(&c, cap,
				    HTTP_SCAN_F_CAPTURED | HTTP_SCAN_F_TRACEPARENT |
					    HTTP_SCAN_F_TRACESTATE,
				    idx);
	ctxshim_cfg.n_header_attrs = 0;
	ck_assert_int_eq(trec_attrs_decode(c.attrs, c.attrs_len, 255, &d), 0);
	ck_assert(trec_attrs_find(&d, CTXSHIM_KEY_PATH));
	ck_assert_uint_le(c.tracestate_len, sizeof(cap->tracestate));
	munmap(map, need + (size_t)page);
}
END_TEST

/* The capture entry (socket level) and the request entry (library hooks,
 * HTTP/2) publish the same attributes for the same request. */
START_TEST(test_capture_matches_request)
{
	static const char chars[] = "GETPOSHADLCNIRUg/\xc3\xa9\xff\x80?a";

	fp_seed(11);
	ctxshim_cfg.n_header_attrs = 1;
	for (unsigned round = 0; round < 20000; round++) {
		char m[20], t[64], e[40];
		size_t ml = 1 + fp_below(sizeof(m)), tl = 1 + fp_below(sizeof(t)),
		       el = fp_below(sizeof(e));
		struct trec_attrs_decoded a, b;

		if (fp_below(2)) {
			const char *k = ref_known_methods[fp_below(9)];

			ml = strlen(k);
			memcpy(m, k, ml);
		} else {
			for (size_t i = 0; i < ml; i++)
				m[i] = chars[fp_below(sizeof(chars) - 1)];
		}
		for (size_t i = 0; i < tl; i++)
			t[i] = chars[fp_below(sizeof(chars) - 1)];
		for (size_t i = 0; i < el; i++)
			e[i] = chars[fp_below(sizeof(chars) - 1)];
		attr_run(m, ml, t, tl, e, el, false, &a);
		attr_run(m, ml, t, tl, e, el, true, &b);
		ck_assert_uint_eq(a.n, b.n);
		for (unsigned i = 0; i < a.n; i++) {
			ck_assert_uint_eq(a.attr[i].key, b.attr[i].key);
			ck_assert_uint_eq(a.attr[i].len, b.attr[i].len);
			ck_assert_mem_eq(a.attr[i].val, b.attr[i].val, a.attr[i].len);
			ck_assert(ref_utf8_valid(a.attr[i].val, a.attr[i].len));
		}
	}
	ctxshim_cfg.n_header_attrs = 0;
}
END_TEST

/* HTTP/2 (hooks/hook-h2.h keeps 20 bytes of :method): a longer method is
 * "_OTHER" without an original, never a cut one; 20 bytes is published
 * whole; :path follows the UTF-8 rule like every value. */
START_TEST(test_h2_method_and_path)
{
	static const struct {
		const char *method, *path, *want_method, *want_original, *want_path;
	} cases[] = {
		{"GET", "/a", "GET", NULL, "/a"},
		{"ABCDEFGHIJKLMNOPQRST", "/a", "_OTHER", "ABCDEFGHIJKLMNOPQRST", "/a"},
		{"ABCDEFGHIJKLMNOPQRSTU", "/a", "_OTHER", NULL, "/a"},
		{"GETGETGETGETGETGETGETGET", "/a", "_OTHER", NULL, "/a"},
		{"get", "/caf\xc3\xa9", "_OTHER", "get", "/caf\xc3\xa9"},
		{"POST", "/caf\xe9", "POST", NULL, NULL},
	};
	static struct hook_h2_req q;
	struct hook_h2_view v;
	struct ctxshim_ctx c;
	struct trec_attrs_decoded d;

	ctxshim_cfg.n_header_attrs = 0;
	ctxshim_cfg.url_query = false;
	ctxshim_cfg.new_traces = true;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		hook_h2_req_init(&q);
		hook_h2_req_header(&q, NULL, 0, (const uint8_t *)":method", 7,
				   (const uint8_t *)cases[i].method,
				   strlen(cases[i].method));
		hook_h2_req_header(&q, NULL, 0, (const uint8_t *)":path", 5,
				   (const uint8_t *)cases[i].path,
				   strlen(cases[i].path));
		hook_h2_req_view(&q, &v);
		ctxshim_request_ctx(&c, &v.r);
		ck_assert_int_eq(trec_attrs_decode(c.attrs, c.attrs_len, 255, &d), 0);
		ck_assert_msg(attr_is(&d, CTXSHIM_KEY_METHOD, cases[i].want_method,
				      strlen(cases[i].want_method)),
			      "case %zu: method", i);
		if (cases[i].want_original)
			ck_assert_msg(attr_is(&d, CTXSHIM_KEY_FIRST_HEADER,
					      cases[i].want_original,
					      strlen(cases[i].want_original)),
				      "case %zu: original", i);
		else
			ck_assert_msg(!trec_attrs_find(&d, CTXSHIM_KEY_FIRST_HEADER),
				      "case %zu: original published", i);
		if (cases[i].want_path)
			ck_assert_msg(attr_is(&d, CTXSHIM_KEY_PATH, cases[i].want_path,
					      strlen(cases[i].want_path)),
				      "case %zu: path", i);
		else
			ck_assert_msg(!trec_attrs_find(&d, CTXSHIM_KEY_PATH),
				      "case %zu: path published", i);
	}
}
END_TEST

/* OTEL_INSTRUMENTATION_HTTP_KNOWN_METHODS replaces the list whole (the
 * semantic conventions); unset or empty is the default; a list the shim
 * cannot hold is refused and changes nothing. */
START_TEST(test_known_methods_override)
{
	static const struct {
		const char *m;
		bool known;
	} cases[] = {
		{"GET", true},      {"PROPFIND", true}, {"QUERY", true},
		{"M-SEARCH", true}, {"POST", false},    {"HEAD", false},
		{"get", false},     {"QUER", false},
	};
	char big[400];
	struct trec_attrs_decoded d;

	ctxshim_cfg.n_header_attrs = 0;
	ck_assert_int_eq(
		ctxshim_request_known_methods(" GET, PROPFIND,,QUERY ,M-SEARCH"), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *m = cases[i].m;

		for (int capture = 0; capture < 2; capture++) {
			attr_run(m, strlen(m), "/x", 2, NULL, 0, capture, &d);
			if (cases[i].known) {
				ck_assert_msg(
					attr_is(&d, CTXSHIM_KEY_METHOD, m, strlen(m)),
					"%s (capture %d)", m, capture);
				ck_assert(
					!trec_attrs_find(&d, CTXSHIM_KEY_FIRST_HEADER));
			} else {
				ck_assert_msg(
					attr_is(&d, CTXSHIM_KEY_METHOD, "_OTHER", 6),
					"%s (capture %d)", m, capture);
				ck_assert(attr_is(&d, CTXSHIM_KEY_FIRST_HEADER, m,
						  strlen(m)));
			}
		}
	}
	/* Refused: an entry over 20 bytes, more than 32 entries. */
	ck_assert_int_eq(ctxshim_request_known_methods("GET,ABCDEFGHIJKLMNOPQRSTU"),
			 -EINVAL);
	big[0] = '\0';
	for (int i = 0; i < 33; i++)
		strcat(big, "GET,");
	ck_assert_int_eq(ctxshim_request_known_methods(big), -EINVAL);
	attr_run("QUERY", 5, "/x", 2, NULL, 0, true, &d);
	ck_assert(attr_is(&d, CTXSHIM_KEY_METHOD, "QUERY", 5));
	/* 32 entries and a blank one after them (a list written "A, B, "):
	 * the blank entry holds no method and takes no room. */
	big[0] = '\0';
	for (int i = 0; i < 32; i++)
		strcat(big, "QUERY, ");
	ck_assert_int_eq(ctxshim_request_known_methods(big), 0);
	attr_run("QUERY", 5, "/x", 2, NULL, 0, true, &d);
	ck_assert(attr_is(&d, CTXSHIM_KEY_METHOD, "QUERY", 5));
	/* Back to the default. */
	ck_assert_int_eq(ctxshim_request_known_methods(""), 0);
	for (int capture = 0; capture < 2; capture++) {
		attr_run("QUERY", 5, "/x", 2, NULL, 0, capture, &d);
		ck_assert(attr_is(&d, CTXSHIM_KEY_METHOD, "_OTHER", 6));
		attr_run("POST", 4, "/x", 2, NULL, 0, capture, &d);
		ck_assert(attr_is(&d, CTXSHIM_KEY_METHOD, "POST", 4));
	}
	/* Blanks and commas only name no method: the default, as when
	 * empty (it made every method _OTHER). */
	ck_assert_int_eq(ctxshim_request_known_methods("QUERY"), 0);
	ck_assert_int_eq(ctxshim_request_known_methods(" , ,"), 0);
	attr_run("POST", 4, "/x", 2, NULL, 0, true, &d);
	ck_assert(attr_is(&d, CTXSHIM_KEY_METHOD, "POST", 4));
	attr_run("QUERY", 5, "/x", 2, NULL, 0, true, &d);
	ck_assert(attr_is(&d, CTXSHIM_KEY_METHOD, "_OTHER", 6));
	ck_assert_int_eq(ctxshim_request_known_methods(NULL), 0);
}
END_TEST

TEST_SUITE(fastpath_suite)
{
	Suite *s = suite_create("Request-path fast paths");
	TCase *tc = tcase_create("hex");

	tcase_add_test(tc, test_hex_encode_random);
	tcase_add_test(tc, test_hex_encode_every_byte);
	tcase_add_test(tc, test_hex_decode_random);
	tcase_add_test(tc, test_hex_decode_every_byte_everywhere);
	tcase_add_test(tc, test_id_is_zero_every_position);
	suite_add_tcase(s, tc);

	tc = tcase_create("traceparent");
	tcase_add_test(tc, test_traceparent_random);
	tcase_add_test(tc, test_traceparent_every_byte_everywhere);
	suite_add_tcase(s, tc);

	tc = tcase_create("attributes");
	tcase_add_test(tc, test_attrs_add_random);
	tcase_add_test(tc, test_attrs_add_args);
	suite_add_tcase(s, tc);

	tc = tcase_create("ids");
	tcase_add_test(tc, test_rng_ids_little_endian);
	tcase_add_test(tc, test_rng_seed_bytes);
	suite_add_tcase(s, tc);

	tc = tcase_create("request model");
	tcase_add_test(tc, test_url_path_random);
	tcase_add_test(tc, test_url_path_exact_buffers);
	tcase_add_test(tc, test_url_path_absolute_form);
	tcase_add_test(tc, test_request_ctx_attrs);
	tcase_add_test(tc, test_parent_attr_random);
	tcase_add_test(tc, test_request_ctx_random);
	suite_add_tcase(s, tc);

	tc = tcase_create("attribute values");
	tcase_add_test(tc, test_method_known);
	tcase_add_loop_test(tc, test_method_other, 0, 3);
	tcase_add_test(tc, test_method_other_odd);
	tcase_add_test(tc, test_path_utf8);
	tcase_add_test(tc, test_header_utf8);
	tcase_add_test(tc, test_value_cut_at_bound);
	tcase_add_test(tc, test_path_cut_escape);
	tcase_add_test(tc, test_capture_matches_request);
	tcase_add_test(tc, test_capture_lengths_untrusted);
	tcase_add_test(tc, test_h2_method_and_path);
	tcase_add_test(tc, test_known_methods_override);
	suite_add_tcase(s, tc);
	return s;
}
