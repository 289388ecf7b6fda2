/* SPDX-License-Identifier: Apache-2.0 */
#include "test-common.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rng.h"
#include "w3c.h"
#include "w3c-ref.h"

/* W3C Trace Context cases written from the spec text (Level 1 and Level 2,
 * "Trace Context HTTP Request Headers Format" and the processing model).
 * Every table row has a label that appears in its failure message.
 *
 * Inputs are templates so that long keys, values and lists stay readable:
 *   {kN}  a key of N characters ('k' followed by [a-z0-9])
 *   {vN}  a value of N characters ('v' followed by digits)
 *   {mN}  N members "m0=0,m1=1,..."
 *   {pN}  N members of exactly 16 characters "p00=vvvvvvvvvvvv,..."
 *   {0}   a NUL byte */

#define TID      "4bf92f3577b34da6a3ce929d0e0e4736"
#define PID      "00f067aa0ba902b7"
#define ZTID     "00000000000000000000000000000000"
#define ZPID     "0000000000000000"
#define TP(v, f) v "-" TID "-" PID "-" f

static size_t
expand(const char *t, char *out, size_t cap)
{
	static const char keychars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	size_t o = 0;

#define PUT(c_)                            \
	do {                               \
		ck_assert_uint_lt(o, cap); \
		out[o++] = (char)(c_);     \
	} while (0)

	while (*t) {
		char kind;
		unsigned long n;
		char *end;

		kind = t[0] == '{' ? t[1] : '\0';
		if (kind == '0' && t[2] == '}') {
			PUT('\0');
			t += 3;
			continue;
		}
		/* anything else, "{|}" in a value for one, is literal */
		if (!strchr("kvmp", kind) || kind == '\0' || t[2] < '0' || t[2] > '9') {
			PUT(*t++);
			continue;
		}
		n = strtoul(t + 2, &end, 10);
		ck_assert_msg(*end == '}', "bad template near %s", t);
		t = end + 1;
		for (unsigned long i = 0; i < n; i++) {
			switch (kind) {
			case 'k':
				PUT(i == 0 ? 'k'
					   : keychars[i % (sizeof(keychars) - 1)]);
				break;
			case 'v':
				PUT(i == 0 ? 'v' : '0' + i % 10);
				break;
			case 'm':
			case 'p': {
				char m[32];
				int l = kind == 'm'
						? snprintf(m, sizeof(m), "m%lu=%lu", i,
							   i)
						: snprintf(m, sizeof(m),
							   "p%02lu=vvvvvvvvvvvv", i);

				if (i > 0)
					PUT(',');
				for (int j = 0; j < l; j++)
					PUT(m[j]);
				break;
			}
			default:
				ck_abort_msg("bad template kind %c", kind);
			}
		}
	}
	ck_assert_uint_lt(o, cap);
	out[o] = '\0';
	return o;
#undef PUT
}

/* The expanded template in a heap block of exactly its length, no NUL, so
 * that ASan and valgrind catch a parser reading past len. */
static char *
expand_exact(const char *t, size_t *len)
{
	static char tmp[20000];
	char *p;

	*len = expand(t, tmp, sizeof(tmp));
	p = malloc(*len ? *len : 1);
	ck_assert_ptr_nonnull(p);
	memcpy(p, tmp, *len);
	return p;
}

/* ------------------------------------------------------------------ */
/* traceparent parsing */

struct tp_case {
	const char *label;
	const char *in;
	int rc;
	uint8_t version;
	const char *trace;
	const char *parent;
	uint8_t flags;
};

#define TP_OK(l_, in_, v_, f_)               \
	{                                    \
		l_, in_, 0, v_, TID, PID, f_ \
	}
#define TP_OK_IDS(l_, in_, tr_, pa_)             \
	{                                        \
		l_, in_, 0, 0x00, tr_, pa_, 0x01 \
	}
#define TP_BAD(l_, in_)                            \
	{                                          \
		l_, in_, -EINVAL, 0, NULL, NULL, 0 \
	}

static const struct tp_case tp_cases[] = {
	/* version 00: exactly 55 characters */
	TP_OK("v00 sampled", TP("00", "01"), 0x00, 0x01),
	TP_OK("v00 not sampled", TP("00", "00"), 0x00, 0x00),
	TP_OK("v00 random flag kept", TP("00", "02"), 0x00, 0x02),
	TP_OK("v00 sampled+random", TP("00", "03"), 0x00, 0x03),
	TP_OK("v00 reserved bits kept as received", TP("00", "09"), 0x00, 0x09),
	TP_OK("v00 flags ff kept as received", TP("00", "ff"), 0x00, 0xff),
	TP_OK_IDS("v00 max ids",
		  "00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-01",
		  "ffffffffffffffffffffffffffffffff",
		  "ffffffffffffffff"),
	TP_OK_IDS("v00 ids with one non-zero bit",
		  "00-00000000000000000000000000000001-0000000000000001-01",
		  "00000000000000000000000000000001",
		  "0000000000000001"),
	TP_OK_IDS("v00 trace-id non-zero only in its high byte",
		  "00-80000000000000000000000000000000-8000000000000000-01",
		  "80000000000000000000000000000000",
		  "8000000000000000"),
	/* optional whitespace around the value */
	TP_OK("leading space", " " TP("00", "01"), 0x00, 0x01),
	TP_OK("trailing space", TP("00", "01") " ", 0x00, 0x01),
	TP_OK("leading tab", "\t" TP("00", "01"), 0x00, 0x01),
	TP_OK("trailing tab", TP("00", "01") "\t", 0x00, 0x01),
	TP_OK("mixed OWS both sides", " \t  " TP("00", "01") "\t \t", 0x00, 0x01),
	/* future versions: first 55 characters, then end or '-' */
	TP_OK("vcc exactly 55", TP("cc", "01"), 0xcc, 0x01),
	TP_OK("vcc with future fields",
	      TP("cc", "01") "-what-the-future-will-be-like",
	      0xcc,
	      0x01),
	TP_OK("vcc with a lone trailing dash", TP("cc", "01") "-", 0xcc, 0x01),
	TP_OK("vcc unknown flag bits zeroed (ff)", TP("cc", "ff"), 0xcc, 0x03),
	TP_OK("vcc unknown flag bits zeroed (09)", TP("cc", "09"), 0xcc, 0x01),
	TP_OK("vcc random flag kept", TP("cc", "02"), 0xcc, 0x02),
	TP_OK("v01 with future fields", TP("01", "01") "-abc", 0x01, 0x01),
	TP_OK("vfe is a valid version", TP("fe", "00"), 0xfe, 0x00),
	TP_OK("vcc future fields then OWS", TP("cc", "01") "-abc \t", 0xcc, 0x01),
	TP_OK("vcc trailing OWS only", TP("cc", "01") " ", 0xcc, 0x01),
	/* lengths */
	TP_BAD("empty", ""),
	TP_BAD("OWS only", " \t "),
	TP_BAD("v00 54 chars", "00-" TID "-" PID "-0"),
	TP_BAD("v00 56 chars ('.')", TP("00", "01") "."),
	TP_BAD("v00 56 chars ('-')", TP("00", "01") "-"),
	TP_BAD("v00 with future fields",
	       TP("00", "01") "-what-the-future-will-be-like"),
	TP_BAD("v00 54 chars plus trailing space", "00-" TID "-" PID "-0 "),
	TP_BAD("vcc 54 chars", "cc-" TID "-" PID "-0"),
	TP_BAD("vcc 56th char '.'", TP("cc", "01") ".anything"),
	TP_BAD("vcc 56th char hex", TP("cc", "01") "1"),
	TP_BAD("vcc 56th char space then data", TP("cc", "01") " -abc"),
	TP_BAD("two values combined", TP("00", "01") "," TP("00", "01")),
	/* version field */
	TP_BAD("vff invalid", TP("ff", "01")),
	TP_BAD("vff with future fields", TP("ff", "01") "-abc"),
	TP_BAD("version uppercase CC", TP("CC", "01")),
	TP_BAD("version uppercase 0A", TP("0A", "01")),
	TP_BAD("version one char", "0-" TID "-" PID "-01"),
	TP_BAD("version three chars", "000-" TID "-" PID "-01"),
	TP_BAD("version .0", TP(".0", "01")),
	TP_BAD("version g0", TP("g0", "01")),
	/* hex digits */
	TP_BAD("trace-id all uppercase",
	       "00-4BF92F3577B34DA6A3CE929D0E0E4736-" PID "-01"),
	TP_BAD("trace-id one uppercase",
	       "00-4Bf92f3577b34da6a3ce929d0e0e4736-" PID "-01"),
	TP_BAD("parent-id uppercase", "00-" TID "-00F067AA0BA902B7-01"),
	TP_BAD("flags uppercase", TP("00", "0A")),
	TP_BAD("trace-id non-hex g", "00-4bf92f3577b34da6a3ce929d0e0e473g-" PID "-01"),
	TP_BAD("parent-id non-hex z", "00-" TID "-00f067aa0ba902bz-01"),
	TP_BAD("flags non-hex", TP("00", "0x")),
	TP_BAD("trace-id with '+'", "00-+bf92f3577b34da6a3ce929d0e0e4736-" PID "-01"),
	TP_BAD("space inside", "00- bf92f3577b34da6a3ce929d0e0e4736-" PID "-01"),
	TP_BAD("non-ASCII byte",
	       "00-4bf92f3577b34da6a3ce929d0e0e47\xc3\xa9-" PID "-01"),
	TP_BAD("NUL inside parent-id", "00-" TID "-00f067aa{0}ba902b7-01"),
	/* zero ids */
	TP_BAD("zero trace-id", "00-" ZTID "-" PID "-01"),
	TP_BAD("zero parent-id", "00-" TID "-" ZPID "-01"),
	TP_BAD("both ids zero", "00-" ZTID "-" ZPID "-00"),
	TP_BAD("vcc zero trace-id", "cc-" ZTID "-" PID "-01"),
	TP_BAD("vcc zero parent-id", "cc-" TID "-" ZPID "-01-abc"),
	TP_BAD("vcc uppercase parent-id", "cc-" TID "-00F067AA0BA902B7-01"),
	/* separators */
	TP_BAD("'_' after version", "00_" TID "-" PID "-01"),
	TP_BAD("'_' after trace-id", "00-" TID "_" PID "-01"),
	TP_BAD("'_' after parent-id", "00-" TID "-" PID "_01"),
	TP_BAD("vcc '.' after parent-id", "cc-" TID "-" PID ".01"),
	TP_BAD("31-char trace-id, 17-char parent-id",
	       "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01"),
	/* only SP and HTAB are OWS */
	TP_BAD("trailing CR", TP("00", "01") "\r"),
	TP_BAD("leading LF", "\n" TP("00", "01")),
	TP_BAD("leading VT", "\v" TP("00", "01")),
};

START_TEST(test_traceparent_parse_table)
{
	for (size_t i = 0; i < sizeof(tp_cases) / sizeof(tp_cases[0]); i++) {
		const struct tp_case *c = &tp_cases[i];
		size_t len;
		char *in = expand_exact(c->in, &len);
		struct w3c_traceparent tp, before;
		int rc;

		memset(&tp, 0xa5, sizeof(tp));
		before = tp;
		rc = w3c_traceparent_parse(in, len, &tp);
		free(in);
		ck_assert_msg(rc == c->rc, "row '%s': rc %d, want %d", c->label, rc,
			      c->rc);
		if (rc < 0) {
			ck_assert_msg(memcmp(&tp, &before, sizeof(tp)) == 0,
				      "row '%s': out written on error", c->label);
			continue;
		}
		{
			char tr[33], pa[17];

			w3c_hex_encode(tr, tp.trace_id, 16);
			w3c_hex_encode(pa, tp.parent_id, 8);
			tr[32] = pa[16] = '\0';
			ck_assert_msg(tp.version == c->version,
				      "row '%s': version %02x, want %02x", c->label,
				      tp.version, c->version);
			ck_assert_msg(strcmp(tr, c->trace) == 0,
				      "row '%s': trace-id %s", c->label, tr);
			ck_assert_msg(strcmp(pa, c->parent) == 0,
				      "row '%s': parent-id %s", c->label, pa);
			ck_assert_msg(tp.flags == c->flags,
				      "row '%s': flags %02x, want %02x", c->label,
				      tp.flags, c->flags);
		}
	}
}
END_TEST

START_TEST(test_traceparent_parse_args)
{
	struct w3c_traceparent tp;

	ck_assert_int_eq(w3c_traceparent_parse(NULL, 55, &tp), -EINVAL);
	ck_assert_int_eq(w3c_traceparent_parse(TP("00", "01"), 55, NULL), -EINVAL);
	/* the length is what counts, not a NUL: a prefix is too short */
	ck_assert_int_eq(w3c_traceparent_parse(TP("00", "01"), 54, &tp), -EINVAL);
	/* and bytes after len are never read: parse a v00 out of a longer buffer */
	ck_assert_int_eq(w3c_traceparent_parse(TP("00", "01") "XYZ", 55, &tp), 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* traceparent formatting */

struct tpf_case {
	const char *label;
	const char *trace;
	const char *span;
	uint8_t flags;
	const char *want;
};

static const struct tpf_case tpf_cases[] = {
	{"sampled", TID, PID, 0x01, TP("00", "01")},
	{"not sampled", TID, PID, 0x00, TP("00", "00")},
	{"random kept", TID, PID, 0x02, TP("00", "02")},
	{"sampled+random", TID, PID, 0x03, TP("00", "03")},
	{"unknown bits masked (ff)", TID, PID, 0xff, TP("00", "03")},
	{"unknown bits masked (04)", TID, PID, 0x04, TP("00", "00")},
	{"unknown bits masked (81)", TID, PID, 0x81, TP("00", "01")},
	{"max ids", "ffffffffffffffffffffffffffffffff", "ffffffffffffffff", 0x01,
	 "00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-01"},
	{"low ids", "00000000000000000000000000000001", "0000000000000001", 0x00,
	 "00-00000000000000000000000000000001-0000000000000001-00"},
};

START_TEST(test_traceparent_format_table)
{
	for (size_t i = 0; i < sizeof(tpf_cases) / sizeof(tpf_cases[0]); i++) {
		const struct tpf_case *c = &tpf_cases[i];
		uint8_t tr[16], sp[8];
		char out[W3C_TRACEPARENT_LEN + 2];
		struct w3c_traceparent tp;

		memset(out, 'X', sizeof(out));
		ck_assert_int_eq(w3c_hex_decode(tr, c->trace, 16), 0);
		ck_assert_int_eq(w3c_hex_decode(sp, c->span, 8), 0);
		ck_assert_msg(w3c_traceparent_format(out, tr, sp, c->flags) == 55,
			      "row '%s': length", c->label);
		ck_assert_msg(strcmp(out, c->want) == 0, "row '%s': got %s", c->label,
			      out);
		ck_assert_msg(out[56] == 'X', "row '%s': wrote past the NUL", c->label);
		/* what we send must be what we accept */
		ck_assert_msg(w3c_traceparent_parse(out, 55, &tp) == 0,
			      "row '%s': reparse", c->label);
		ck_assert_msg(tp.flags == (c->flags & W3C_FLAGS_KNOWN), "row '%s'",
			      c->label);
	}
}
END_TEST

START_TEST(test_traceparent_roundtrip_random)
{
	uint8_t seed[32] = {7, 1, 2};
	struct ctx_rng r;

	ctx_rng_seed(&r, seed);
	for (int i = 0; i < 2000; i++) {
		uint8_t tr[16], sp[8], fl = (uint8_t)ctx_rng_next(&r);
		char out[56];
		struct w3c_traceparent tp;

		ctx_rng_trace_id(&r, tr);
		ctx_rng_span_id(&r, sp);
		w3c_traceparent_format(out, tr, sp, fl);
		ck_assert_int_eq(w3c_traceparent_parse(out, strlen(out), &tp), 0);
		ck_assert_int_eq(tp.version, 0);
		ck_assert_mem_eq(tp.trace_id, tr, 16);
		ck_assert_mem_eq(tp.parent_id, sp, 8);
		ck_assert_int_eq(tp.flags, fl & W3C_FLAGS_KNOWN);
	}
}
END_TEST

/* ------------------------------------------------------------------ */
/* tracestate: several lines combined, validated and normalised */

struct ts_case {
	const char *label;
	const char *lines[4]; /* NULL-terminated */
	int rc;
	const char *want; /* normalised list when rc == 0 */
};

#define TS_OK(l_, want_, ...)               \
	{                                   \
		l_, {__VA_ARGS__}, 0, want_ \
	}
#define TS_BAD(l_, ...)                          \
	{                                        \
		l_, {__VA_ARGS__}, -EINVAL, NULL \
	}

static const struct ts_case ts_cases[] = {
	TS_OK("single member", "foo=bar", "foo=bar"),
	TS_OK("two members", "foo=bar,baz=qux", "foo=bar,baz=qux"),
	TS_OK("spec example",
	      "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
	      "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"),
	TS_OK("empty header", "", ""),
	TS_OK("OWS-only header", "", " \t "),
	TS_OK("no header lines", ""),
	TS_OK("empty members skipped", "foo=1,bar=2", ",,foo=1,, \t ,bar=2,"),
	TS_OK("OWS around commas", "foo=1,bar=2,baz=3", "foo=1 , bar=2\t,\tbaz=3"),
	TS_OK("leading OWS of the line", "foo=1", "  \tfoo=1"),
	TS_OK("value trailing space is OWS", "foo=bar", "foo=bar "),
	TS_OK("value trailing tab is OWS", "foo=bar,x=1", "foo=bar\t \t,x=1"),
	TS_OK("value leading spaces kept (L2)", "foo=  bar", "foo=  bar"),
	TS_OK("value inner spaces", "foo=a b  c", "foo=a b  c"),
	TS_OK("value all allowed punctuation",
	      "foo=!\"#$%&'()*+-./:;<>?@[\\]^_`{|}~",
	      "foo=!\"#$%&'()*+-./:;<>?@[\\]^_`{|}~"),
	TS_OK("two lines in order", "foo=1,bar=2", "foo=1", "bar=2"),
	TS_OK("three lines in order", "c=3,a=1,b=2,z=26", "c=3", "a=1,b=2", "z=26"),
	TS_OK("empty line between", "a=1,b=2", "a=1", "", "b=2"),
	TS_OK("lines with trailing commas and OWS", "a=1,b=2", "a=1 ,", " ,b=2 "),
	TS_OK("duplicate keys kept", "a=1,a=2", "a=1,a=2"),
	TS_OK("32 members", "{m32}", "{m32}"),
	TS_OK("32 members over two lines", "{m16},{m16}", "{m16}", "{m16}"),
	TS_OK("32 members and empty ones", "{m32}", ",,{m32},, ,"),
	TS_OK("256-char key", "{k256}=1", "{k256}=1"),
	TS_OK("256-char value", "a={v256}", "a={v256}"),
	TS_OK("256-char value then OWS", "a={v256}", "a={v256}  \t"),
	TS_OK("key starting with a digit (L2)", "1foo=bar", "1foo=bar"),
	TS_OK("digit-only key (L2)", "123=x", "123=x"),
	TS_OK("multi-tenant key (L1)", "tenant@system=1", "tenant@system=1"),
	TS_OK("multi-tenant key, tenant starts with a digit",
	      "9tenant@sys=1",
	      "9tenant@sys=1"),
	TS_OK("'@' at the end of a key (L2)", "foo@=1", "foo@=1"),
	TS_OK("several '@' (L2)", "a@b@c=1", "a@b@c=1"),
	TS_OK("all key characters", "fo@o_-*/9=1", "fo@o_-*/9=1"),
	TS_BAD("33 members", "{m33}"),
	TS_BAD("33 members over two lines", "{m16}", "{m17}"),
	TS_BAD("33rd member in a later line", "{m32}", "x=1"),
	TS_BAD("257-char key", "{k257}=1"),
	TS_BAD("257-char value", "a={v257}"),
	TS_BAD("foo=bar=baz", "foo=bar=baz"),
	TS_BAD("foo=,bar=3", "foo=,bar=3"),
	TS_BAD("@foo=1,bar=2", "@foo=1,bar=2"),
	TS_BAD("member without '='", "foo"),
	TS_BAD("empty key", "=bar"),
	TS_BAD("value only spaces", "foo=   "),
	TS_BAD("uppercase key", "Foo=1"),
	TS_BAD("space inside key", "foo bar=1"),
	TS_BAD("space before '='", "foo =1"),
	TS_BAD("'.' in key", "foo.bar=1"),
	TS_BAD("key starting with '_'", "_foo=1"),
	TS_BAD("key starting with '*'", "*foo=1"),
	TS_BAD("control char in value",
	       "foo=a\x01"
	       "b"),
	TS_BAD("tab inside value", "foo=a\tb"),
	TS_BAD("tab leading the value", "foo=\tb"),
	TS_BAD("DEL in value", "foo=a\x7f"),
	TS_BAD("non-ASCII value", "foo=\xc3\xa9"),
	TS_BAD("CR at end of line", "foo=1\r"),
	TS_BAD("NUL in value", "foo=a{0}b"),
	TS_BAD("invalid member in a later line", "foo=1", "Bar=2"),
	TS_BAD("invalid member among valid ones", "a=1,b=2,c=,d=4"),
	TS_BAD("'=' only", "="),
};

/* the lines of a ts_case as exact-size heap copies */
static size_t
ts_lines(const struct ts_case *c, char **bufs, const char **lines, size_t *lens)
{
	size_t n = 0;

	while (n < 4 && c->lines[n]) {
		bufs[n] = expand_exact(c->lines[n], &lens[n]);
		lines[n] = bufs[n];
		n++;
	}
	return n;
}

START_TEST(test_tracestate_combine_table)
{
	static char out[20000], want[20000];

	for (size_t i = 0; i < sizeof(ts_cases) / sizeof(ts_cases[0]); i++) {
		const struct ts_case *c = &ts_cases[i];
		char *bufs[4] = {NULL};
		const char *lines[4];
		size_t lens[4], n = ts_lines(c, bufs, lines, lens), len = 777, wlen;
		struct w3c_tracestate ts;
		int rc;

		memset(out, 'X', sizeof(out));
		rc = w3c_tracestate_combine(out, sizeof(out), &len, lines, lens, n);
		ck_assert_msg(rc == c->rc, "row '%s': rc %d, want %d", c->label, rc,
			      c->rc);
		ck_assert_msg(w3c_tracestate_parse(lines, lens, n, &ts) == c->rc,
			      "row '%s': parse rc", c->label);
		if (rc < 0) {
			ck_assert_msg(len == 777, "row '%s': len_out written on error",
				      c->label);
		} else {
			wlen = expand(c->want, want, sizeof(want));
			ck_assert_msg(len == wlen && memcmp(out, want, len) == 0,
				      "row '%s': got '%.*s' (%zu), want '%s'", c->label,
				      (int)(len > 200 ? 200 : len), out, len, want);
			ck_assert_msg(out[len] == '\0', "row '%s': no NUL", c->label);
			/* the normalised list is itself a valid tracestate */
			{
				const char *l1[1] = {out};
				size_t n1[1] = {len};
				char again[20000];
				size_t alen;

				ck_assert_msg(
					w3c_tracestate_combine(again, sizeof(again),
							       &alen, l1, n1, 1) == 0 &&
						alen == len &&
						memcmp(again, out, len) == 0,
					"row '%s': not idempotent", c->label);
			}
		}
		for (size_t k = 0; k < n; k++)
			free(bufs[k]);
	}
}
END_TEST

/* ------------------------------------------------------------------ */
/* key and value grammar on their own */

struct kv_case {
	const char *label;
	char what; /* 'k' key, 'v' value */
	const char *in;
	bool valid;
};

static const struct kv_case kv_cases[] = {
	{"key one letter", 'k', "a", true},
	{"key one digit (L2)", 'k', "0", true},
	{"key 256", 'k', "{k256}", true},
	{"key 257", 'k', "{k257}", false},
	{"key empty", 'k', "", false},
	{"key L1 multi-tenant, 241+1+14", 'k', "{k241}@{k14}", true},
	{"key '@' first", 'k', "@a", false},
	{"key '@' second", 'k', "a@", true},
	{"key '-' first", 'k', "-a", false},
	{"key '/' first", 'k', "/a", false},
	{"key uppercase", 'k', "aB", false},
	{"key with '='", 'k', "a=b", false},
	{"key with ','", 'k', "a,b", false},
	{"key with NUL", 'k', "a{0}b", false},
	{"value one char", 'v', "x", true},
	{"value 256", 'v', "{v256}", true},
	{"value 257", 'v', "{v257}", false},
	{"value empty", 'v', "", false},
	{"value leading space", 'v', " x", true},
	{"value trailing space", 'v', "x ", false},
	{"value single space", 'v', " ", false},
	{"value with '='", 'v', "a=b", false},
	{"value with ','", 'v', "a,b", false},
	{"value tilde (0x7e)", 'v', "~", true},
	{"value DEL (0x7f)", 'v', "\x7f", false},
	{"value 0x1f", 'v', "a\x1f", false},
	{"value high byte", 'v', "a\x80", false},
};

START_TEST(test_tracestate_key_value_table)
{
	for (size_t i = 0; i < sizeof(kv_cases) / sizeof(kv_cases[0]); i++) {
		const struct kv_case *c = &kv_cases[i];
		size_t len;
		char *in = expand_exact(c->in, &len);
		bool v = c->what == 'k' ? w3c_tracestate_key_valid(in, len)
					: w3c_tracestate_value_valid(in, len);

		free(in);
		ck_assert_msg(v == c->valid, "row '%s': got %d", c->label, v);
	}
}
END_TEST

/* ------------------------------------------------------------------ */
/* truncation: drop whole entries, >128 chars first, then from the right */

struct trunc_case {
	const char *label;
	const char *in;
	size_t max_len;
	const char *want;
	unsigned n_dropped;
};

/* a 129-character entry (key 'L', value 127) and a 128-character one */
#define LONG129  "l={v127}"
#define EXACT128 "e={v126}"

static const struct trunc_case trunc_cases[] = {
	{"fits", "a=1,b=2", 7, "a=1,b=2", 0},
	{"no limit", "a=1,b=2", SIZE_MAX, "a=1,b=2", 0},
	{"one over: right-most goes", "a=1,b=2", 6, "a=1", 1},
	{"drop from the right", "a=1,b=2,c=3", 5, "a=1", 2},
	{"long entry first", "a=1," LONG129 ",c=3", 130, "a=1,c=3", 1},
	{"long entry first even when left-most", LONG129 ",a=1,b=2", 129, "a=1,b=2", 1},
	{"128 chars is not long", EXACT128 ",a=1", 128, EXACT128, 1},
	{"129 chars is long", LONG129 ",a=1", 129, "a=1", 1},
	{"only as many long entries as needed", LONG129 ",a=1," LONG129, 133,
	 LONG129 ",a=1", 1},
	{"all long, then from the right", "a=1," LONG129 ",b=2," LONG129 ",c=3", 5,
	 "a=1", 4},
	{"limit 0 drops everything", "a=1,b=2", 0, "", 2},
	{"empty list", "", 0, "", 0},
	{"32 x 16 chars into 512", "{p32}", W3C_TRACESTATE_MAX_LEN, "{p30}", 2},
	{"30 x 16 chars fit 512", "{p30}", W3C_TRACESTATE_MAX_LEN, "{p30}", 0},
	{"maximal member dropped for 512", "{p10},{k256}={v256},{p10}",
	 W3C_TRACESTATE_MAX_LEN, "{p10},{p10}", 1},
	{"single maximal member cannot fit", "{k256}={v256}", W3C_TRACESTATE_MAX_LEN,
	 "", 1},
};

START_TEST(test_tracestate_truncate_table)
{
	static char want[20000];

	for (size_t i = 0; i < sizeof(trunc_cases) / sizeof(trunc_cases[0]); i++) {
		const struct trunc_case *c = &trunc_cases[i];
		size_t len, wlen = expand(c->want, want, sizeof(want)), olen;
		char *in = expand_exact(c->in, &len);
		char *out =
			malloc(wlen ? wlen : 1); /* exactly the result, no NUL room */
		const char *lines[1] = {in};
		struct w3c_tracestate ts;
		unsigned dropped = 999;

		ck_assert_ptr_nonnull(out);
		/* path 1: parse + format with a limit */
		ck_assert_msg(w3c_tracestate_parse(lines, &len, 1, &ts) == 0,
			      "row '%s': parse", c->label);
		ck_assert_msg(w3c_tracestate_format(out, wlen, &olen, &ts, c->max_len,
						    &dropped) == 0,
			      "row '%s': format", c->label);
		ck_assert_msg(olen == wlen && memcmp(out, want, wlen) == 0,
			      "row '%s': format gave '%.*s'", c->label, (int)olen, out);
		ck_assert_msg(dropped == c->n_dropped, "row '%s': format dropped %u",
			      c->label, dropped);
		ck_assert_msg(olen <= c->max_len, "row '%s': over the limit", c->label);
		/* path 2: in place on the normalised text */
		dropped = 999;
		ck_assert_msg(w3c_tracestate_truncate(in, len, c->max_len, &olen,
						      &dropped) == 0,
			      "row '%s': truncate", c->label);
		ck_assert_msg(olen == wlen && memcmp(in, want, wlen) == 0,
			      "row '%s': truncate gave '%.*s'", c->label, (int)olen,
			      in);
		ck_assert_msg(dropped == c->n_dropped, "row '%s': truncate dropped %u",
			      c->label, dropped);
		free(in);
		free(out);
	}
}
END_TEST

struct trunc_bad_case {
	const char *label;
	const char *in;
};

static const struct trunc_bad_case trunc_bad_cases[] = {
	{"leading comma", ",a=1"},    {"trailing comma", "a=1,"},
	{"double comma", "a=1,,b=2"}, {"lone comma", ","},
	{"33 entries", "{m33}"},
};

START_TEST(test_tracestate_truncate_bad_table)
{
	for (size_t i = 0; i < sizeof(trunc_bad_cases) / sizeof(trunc_bad_cases[0]);
	     i++) {
		const struct trunc_bad_case *c = &trunc_bad_cases[i];
		size_t len, olen = 777;
		char *in = expand_exact(c->in, &len);
		int rc = w3c_tracestate_truncate(in, len, 1000, &olen, NULL);

		free(in);
		ck_assert_msg(rc == -EINVAL, "row '%s': accepted", c->label);
		ck_assert_msg(olen == 777, "row '%s': len_out written", c->label);
	}
}
END_TEST

START_TEST(test_tracestate_format_space)
{
	const char *lines[2] = {"foo=1", "bar=22"};
	size_t lens[2] = {5, 6}, len = 777;
	char out[16];

	/* "foo=1,bar=22" is 12 characters */
	memset(out, 'X', sizeof(out));
	ck_assert_int_eq(w3c_tracestate_combine(out, 11, &len, lines, lens, 2),
			 -ENOSPC);
	ck_assert_uint_eq(len, 777);
	ck_assert_int_eq(w3c_tracestate_combine(out, 12, &len, lines, lens, 2), 0);
	ck_assert_uint_eq(len, 12);
	ck_assert_int_eq(out[12], 'X'); /* no room for the NUL: none written */
	ck_assert_int_eq(w3c_tracestate_combine(out, 13, &len, lines, lens, 2), 0);
	ck_assert_int_eq(out[12], '\0');
	/* an empty list needs no buffer at all */
	lens[0] = 0;
	ck_assert_int_eq(w3c_tracestate_combine(NULL, 0, &len, lines, lens, 1), 0);
	ck_assert_uint_eq(len, 0);
	/* bad arguments */
	ck_assert_int_eq(w3c_tracestate_combine(out, 16, &len, NULL, lens, 1), -EINVAL);
	ck_assert_int_eq(w3c_tracestate_combine(out, 16, &len, NULL, NULL, 0), 0);
	ck_assert_uint_eq(len, 0);
}
END_TEST

START_TEST(test_tracestate_parse_pointers)
{
	const char *line = " a=1 ,\tbb= x y\t";
	struct w3c_tracestate ts;
	size_t len = strlen(line);

	ck_assert_int_eq(w3c_tracestate_parse(&line, &len, 1, &ts), 0);
	ck_assert_uint_eq(ts.n, 2);
	/* members point into the caller's line, OWS excluded */
	ck_assert_ptr_eq(ts.member[0].key, line + 1);
	ck_assert_uint_eq(ts.member[0].key_len, 1);
	ck_assert_ptr_eq(ts.member[0].value, line + 3);
	ck_assert_uint_eq(ts.member[0].value_len, 1);
	ck_assert_ptr_eq(ts.member[1].key, line + 7);
	ck_assert_uint_eq(ts.member[1].key_len, 2);
	ck_assert_int_eq(memcmp(ts.member[1].value, " x y", 4), 0);
	ck_assert_uint_eq(ts.member[1].value_len, 4);
}
END_TEST

/* ------------------------------------------------------------------ */
/* w3c_tracestate_check: the verdict of w3c_tracestate_parse() on the joined
 * lines, fed in any pieces, without keeping the bytes */

/* Feed the lines, each cut into pieces of `step` bytes (0: whole). */
static int
check_lines(const char *const *lines,
	    const size_t *lens,
	    size_t n,
	    size_t step,
	    bool trim_cr)
{
	struct w3c_tracestate_check c;
	int rc = 0;

	memset(&c, 0, sizeof(c));
	for (size_t l = 0; l < n; l++) {
		for (size_t o = 0; o < lens[l] || o == 0;) {
			size_t k = step && lens[l] - o > step ? step : lens[l] - o;

			if (w3c_tracestate_check_feed(&c, lines[l] + o, k) < 0)
				rc = -EINVAL;
			o += k;
			if (k == 0)
				break;
		}
		if (w3c_tracestate_check_end(&c, trim_cr) < 0)
			rc = -EINVAL;
		/* once invalid, it stays so (no ck_assert: called millions of
		 * times, and Check reports every call through a pipe) */
		if (rc < 0 && w3c_tracestate_check_feed(&c, "a=1", 3) != -EINVAL)
			ck_abort_msg("invalid checker accepted more bytes");
	}
	return rc;
}

/* w3c_tracestate_trunc on the lines, each cut into pieces of `step` bytes
 * (0: whole); in_place: the first line's first bytes are fed from out, as
 * the scanner feeds what it has stored.  Its list must be what
 * w3c_tracestate_format() makes of the parsed list ts, cut to 512;
 * returns the entries it dropped. */
static unsigned
trunc_lines(const char *const *lines,
	    const size_t *lens,
	    size_t n,
	    size_t step,
	    bool in_place,
	    const struct w3c_tracestate *ts,
	    unsigned it)
{
	struct w3c_tracestate_trunc t;
	char out[W3C_TRACESTATE_MAX_LEN], want[W3C_TRACESTATE_MAX_LEN + 1];
	size_t want_len, stored = 0;
	unsigned dropped;

	w3c_tracestate_trunc_init(&t);
	if (in_place) {
		stored = lens[0] < sizeof(out) ? lens[0] : sizeof(out);
		memcpy(out, lines[0], stored);
	}
	for (size_t l = 0; l < n; l++) {
		for (size_t o = 0; o < lens[l];) {
			size_t k = step && lens[l] - o > step ? step : lens[l] - o;
			const char *from = lines[l] + o;

			if (l == 0 && o < stored) {
				if (k > stored - o)
					k = stored - o;
				from = out + o;
			}
			w3c_tracestate_trunc_feed(&t, out, sizeof(out), from, k);
			o += k;
		}
		w3c_tracestate_trunc_end(&t, out, sizeof(out));
	}
	if (w3c_tracestate_format(want, sizeof(want), &want_len, ts,
				  W3C_TRACESTATE_MAX_LEN, &dropped) != 0)
		ck_abort_msg("iteration %u: format failed", it);
	if (t.len != want_len || memcmp(out, want, want_len) != 0 ||
	    t.dropped != dropped)
		ck_abort_msg("iteration %u, pieces of %zu%s: '%.*s' (%u dropped), "
			     "want '%s' (%u dropped)",
			     it, step, in_place ? ", in place" : "", (int)t.len, out,
			     t.dropped, want, dropped);
	return t.dropped;
}

/* Lists that fill the 512 characters long before they end (30 entries of
 * 24, in one line or three): every entry past the cut is counted as
 * dropped, as w3c_tracestate_format() counts it (old: only the first). */
START_TEST(test_tracestate_trunc_full)
{
	static char buf[3][1024];
	const char *lines[3] = {buf[0], buf[1], buf[2]};
	size_t lens[3] = {0, 0, 0};
	struct w3c_tracestate ts;
	unsigned i, nl;

	for (nl = 1; nl <= 3; nl += 2) {
		memset(lens, 0, sizeof(lens));
		for (i = 0; i < 30; i++) {
			size_t l = nl == 1 ? 0 : i / 10;

			lens[l] += (size_t)snprintf(
				buf[l] + lens[l], sizeof(buf[l]) - lens[l],
				"%sk%02u=%020u", lens[l] ? ", " : "", i, i);
		}
		ck_assert_int_eq(w3c_tracestate_parse(lines, lens, nl, &ts), 0);
		for (size_t step = 0; step < 8; step += 7) {
			ck_assert_uint_eq(
				trunc_lines(lines, lens, nl, step, false, &ts, nl), 10);
			ck_assert_uint_eq(
				trunc_lines(lines, lens, nl, step, true, &ts, nl), 10);
		}
	}
}
END_TEST

/* The streaming cut at its edges, entry lengths chosen so that each
 * comparison meets its bound: a list of exactly 512 characters is kept
 * whole, and an entry of exactly 128 characters is not "over 128" once a
 * long one was dropped (the random lists above rarely land on either). */
START_TEST(test_tracestate_trunc_edges)
{
	static const struct {
		const char *label;
		size_t n, elen[6];
		unsigned dropped;
	} cases[] = {
		{"exactly 512", 4, {128, 128, 128, 125}, 0},
		{"128 after a long cut", 5, {250, 128, 128, 100, 128}, 1},
		{"512 after a long cut", 5, {250, 128, 128, 125, 128}, 1},
	};
	static char buf[1024];

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const char *lines[1] = {buf};
		size_t len = 0;
		struct w3c_tracestate ts;

		/* entry e: "k<letter>=vvv...", elen[e] characters in all */
		for (size_t e = 0; e < cases[c].n; e++) {
			size_t vlen = cases[c].elen[e] - 3;

			if (e > 0)
				buf[len++] = ',';
			buf[len++] = 'k';
			buf[len++] = (char)('a' + e);
			buf[len++] = '=';
			memset(buf + len, 'v', vlen);
			len += vlen;
		}
		ck_assert_msg(w3c_tracestate_parse(lines, &len, 1, &ts) == 0, "%s",
			      cases[c].label);
		for (size_t step = 0; step < 8; step += 7) {
			ck_assert_msg(trunc_lines(lines, &len, 1, step, false, &ts,
						  (unsigned)c) == cases[c].dropped,
				      "%s", cases[c].label);
			ck_assert_msg(trunc_lines(lines, &len, 1, step, true, &ts,
						  (unsigned)c) == cases[c].dropped,
				      "%s", cases[c].label);
		}
	}
}
END_TEST

START_TEST(test_tracestate_check_table)
{
	static const size_t steps[] = {0, 1, 2, 3, 7, 64};

	for (size_t i = 0; i < sizeof(ts_cases) / sizeof(ts_cases[0]); i++) {
		const struct ts_case *c = &ts_cases[i];
		char *bufs[4] = {NULL};
		const char *lines[4];
		size_t lens[4], n = ts_lines(c, bufs, lines, lens);

		for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++)
			ck_assert_msg(check_lines(lines, lens, n, steps[s], false) ==
					      c->rc,
				      "row '%s', pieces of %zu: verdict differs",
				      c->label, steps[s]);
		for (size_t k = 0; k < n; k++)
			free(bufs[k]);
	}
}
END_TEST

/* 33 short members (692 bytes), and 32 valid ones then "INVALID=1": both
 * invalid as a whole, the reason being past byte 512; 32 of them valid. */
START_TEST(test_tracestate_check_long_lists)
{
	char list[1024], bad[1024];
	const char *l1[1] = {list}, *l2[1] = {bad};
	size_t len = 0, n1[1], n2[1];
	struct w3c_tracestate ts;

	for (int i = 1; i <= 33; i++) {
		if (i == 33) {
			memcpy(bad, list, len);
			memcpy(bad + len, ",INVALID=1", 10);
			n2[0] = len + 10;
		}
		len += (size_t)snprintf(list + len, sizeof(list) - len,
					"%skey%02d=value-value-%02d", i > 1 ? "," : "",
					i, i);
	}
	n1[0] = len;
	ck_assert_uint_eq(n1[0], 692);
	ck_assert_uint_eq(n2[0], 681);
	for (size_t step = 0; step < 9; step++) {
		ck_assert_int_eq(check_lines(l1, n1, 1, step, true), -EINVAL);
		ck_assert_int_eq(check_lines(l2, n2, 1, step, true), -EINVAL);
		ck_assert_int_eq(check_lines(l1, n1, 1, step, false), -EINVAL);
	}
	ck_assert_int_eq(w3c_tracestate_parse(l1, n1, 1, &ts), -EINVAL);
	/* the first 32 members alone: valid */
	n2[0] -= 10;
	ck_assert_int_eq(check_lines(l2, n2, 1, 5, true), 0);
	ck_assert_int_eq(w3c_tracestate_parse(l2, n2, 1, &ts), 0);
	ck_assert_uint_eq(ts.n, 32);
}
END_TEST

/* trim_cr: a CR among a line's trailing whitespace is not part of it (the
 * HTTP/1.x scanner trims it); anywhere else it is an invalid character. */
START_TEST(test_tracestate_check_cr)
{
	static const struct {
		const char *line;
		int with_trim, without;
	} cases[] = {
		{"a=1\r", 0, -EINVAL},
		{"a=1 \t\r \r", 0, -EINVAL},
		{"a=1,\r", 0, -EINVAL},
		{"\r", 0, -EINVAL},
		{"a=1\r,b=2", -EINVAL, -EINVAL},
		{"a=1\rb", -EINVAL, -EINVAL},
		{"a=1,\r,b=2", -EINVAL, -EINVAL},
		{"a=1, \r b=2", -EINVAL, -EINVAL},
		{"a\r", -EINVAL, -EINVAL},
		{"a=\r", -EINVAL, -EINVAL},
		{"a=1\t", 0, 0},
		{"a=1\tx", -EINVAL, -EINVAL},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *l[1] = {cases[i].line};
		size_t n[1] = {strlen(cases[i].line)};

		for (size_t step = 0; step < 4; step++) {
			ck_assert_msg(check_lines(l, n, 1, step, true) ==
					      cases[i].with_trim,
				      "case %zu with trim_cr", i);
			ck_assert_msg(check_lines(l, n, 1, step, false) ==
					      cases[i].without,
				      "case %zu without", i);
		}
	}
}
END_TEST

/* Random lists from fragments near every rule (keys and values at their
 * length limits, OWS, CR, bad characters, 30-34 members, empty members),
 * as 1-3 lines cut into random pieces: the same verdict as
 * w3c_tracestate_parse(), and with trim_cr as parsing the lines with
 * their trailing SP / HTAB / CR removed; a valid one is truncated as
 * w3c_tracestate_format() truncates it. */
START_TEST(test_tracestate_check_random)
{
	/* mostly pieces of valid lists, a few of each way to break one */
	static const char *const frag[] = {
		"a=1",       ",b=2",  ",c= x",     ", d=y ",    ",{m30}",
		",{m31}",    ",{m2}", ",{k256}=1", ",e={v256}", ",f={v256}  \t",
		",",         " ",     "\t",        ",g=a b",    ",9@x=~",
		"a=1",       ",b=2",  ",c= x",     ",{p16}",    ",h=1",
		"\r",        "=",     "x",         "Z=1",       ",{k257}=1",
		",i={v257}", "{0}",   "\x7f",      "\x01",      ",_a=1",
		"=v",        ",k",    ", =1",      ",j= ",
	};
#define N_FRAG (sizeof(frag) / sizeof(frag[0]))
	static char buf[3][8192], fx[N_FRAG][1024];
	const unsigned iters = RUNNING_ON_VALGRIND ? 2000 : 20000;
	uint64_t x = 0x9e3779b97f4a7c15ull;
	size_t fl[N_FRAG];
	unsigned n_valid = 0, n_valid_trim = 0, n_cut = 0;

	/* expanded once: expand() asserts on every byte */
	for (size_t f = 0; f < N_FRAG; f++)
		fl[f] = expand(frag[f], fx[f], sizeof(fx[f]));
	for (unsigned it = 0; it < iters; it++) {
		const char *lines[3];
		size_t lens[3], tl[3], nl, l;
		struct w3c_tracestate ts;
		int want, want_trim;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		nl = 1 + x % 3;
		for (l = 0; l < nl; l++) {
			unsigned nf = 1 + (unsigned)((x >> (8 + 4 * l)) % 6);

			lens[l] = 0;
			for (unsigned f = 0; f < nf; f++) {
				size_t k, j;

				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				j = x % N_FRAG;
				k = fl[j];
				if (lens[l] + k > sizeof(buf[l]))
					break;
				memcpy(buf[l] + lens[l], fx[j], k);
				lens[l] += k;
			}
			lines[l] = buf[l];
			tl[l] = lens[l];
			while (tl[l] > 0 &&
			       (buf[l][tl[l] - 1] == ' ' || buf[l][tl[l] - 1] == '\t' ||
				buf[l][tl[l] - 1] == '\r'))
				tl[l]--;
		}
		want_trim = w3c_tracestate_parse(lines, tl, nl, &ts);
		want = w3c_tracestate_parse(lines, lens, nl, &ts);
		n_valid += want == 0;
		n_valid_trim += want_trim == 0;
		for (size_t step = 0; step < 4; step++) {
			size_t st = step == 3 ? 1 + (size_t)(x >> 40) % 40 : step;

			if (check_lines(lines, lens, nl, st, false) != want)
				ck_abort_msg("iteration %u, pieces of %zu", it, st);
			if (check_lines(lines, lens, nl, st, true) != want_trim)
				ck_abort_msg("iteration %u, pieces of %zu, trim_cr", it,
					     st);
			/* a valid list is cut as the W3C truncation policy
			 * cuts it, however it arrives */
			if (want == 0) {
				n_cut += trunc_lines(lines, lens, nl, st, false, &ts,
						     it) != 0;
				(void)trunc_lines(lines, lens, nl, st, true, &ts, it);
			}
		}
	}
	/* both verdicts are common, so both sides were compared */
	ck_assert_uint_gt(n_valid, iters / 20);
	ck_assert_uint_lt(n_valid, iters - iters / 20);
	ck_assert_uint_gt(n_valid_trim, n_valid);
	ck_assert_uint_gt(n_cut, iters / 50);
#undef N_FRAG
}
END_TEST

/* ------------------------------------------------------------------ */
/* hex helpers */

struct hex_case {
	const char *label;
	const char *hex;
	int rc;
	uint8_t bytes[4];
};

static const struct hex_case hex_cases[] = {
	{"zeros", "00000000", 0, {0, 0, 0, 0}},
	{"mixed", "00ff7fa5", 0, {0x00, 0xff, 0x7f, 0xa5}},
	{"digits", "01234567", 0, {0x01, 0x23, 0x45, 0x67}},
	{"letters", "89abcdef", 0, {0x89, 0xab, 0xcd, 0xef}},
	{"uppercase rejected", "89ABCDEF", -EINVAL, {0}},
	{"one uppercase at the end", "89abcdeF", -EINVAL, {0}},
	{"g rejected", "0000000g", -EINVAL, {0}},
	{"space rejected", "0000 000", -EINVAL, {0}},
	{"0x prefix rejected", "0x000000", -EINVAL, {0}},
};

START_TEST(test_hex_table)
{
	for (size_t i = 0; i < sizeof(hex_cases) / sizeof(hex_cases[0]); i++) {
		const struct hex_case *c = &hex_cases[i];
		uint8_t b[4] = {0xee, 0xee, 0xee, 0xee};
		char enc[9] = {0};
		int rc = w3c_hex_decode(b, c->hex, 4);

		ck_assert_msg(rc == c->rc, "row '%s': rc %d", c->label, rc);
		if (rc < 0) {
			ck_assert_msg(b[0] == 0xee && b[3] == 0xee,
				      "row '%s': out written", c->label);
			continue;
		}
		ck_assert_msg(memcmp(b, c->bytes, 4) == 0, "row '%s': bytes", c->label);
		w3c_hex_encode(enc, b, 4);
		ck_assert_msg(strcmp(enc, c->hex) == 0, "row '%s': encoded %s",
			      c->label, enc);
	}
}
END_TEST

START_TEST(test_id_is_zero)
{
	uint8_t id[16] = {0};

	ck_assert(w3c_id_is_zero(id, 16));
	ck_assert(w3c_id_is_zero(id, 0));
	for (int i = 0; i < 16; i++) {
		id[i] = 0x80;
		ck_assert_msg(!w3c_id_is_zero(id, 16), "byte %d", i);
		id[i] = 0;
	}
}
END_TEST

/* Every byte value at every hex position of a traceparent: valid exactly
 * for [0-9a-f], and the decoded nibble is right (the decoder works on
 * eight digits at a time, so a wrong lane or carry would show here). */
START_TEST(test_traceparent_every_byte_everywhere)
{
	static const char base[] =
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
	static const int hex_pos[] = {
		0,  1,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18,
		19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 36, 37,
		38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 53, 54};
	char buf[W3C_TRACEPARENT_LEN];
	size_t k;
	int c;

	for (k = 0; k < sizeof(hex_pos) / sizeof(hex_pos[0]); k++) {
		int pos = hex_pos[k];

		for (c = 0; c < 256; c++) {
			struct w3c_traceparent tp;
			bool want = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
			int r;

			memcpy(buf, base, sizeof(buf));
			buf[pos] = (char)c;
			/* version ff is invalid on its own, not for its digits */
			if (pos <= 1 && c == 'f' && buf[1 - pos] == 'f')
				want = false;
			/* a non-zero version must allow the 55-character form */
			r = w3c_traceparent_parse(buf, sizeof(buf), &tp);
			ck_assert_msg((r == 0) == want, "byte 0x%02x at %d: %d", c, pos,
				      r);
			if (r == 0 && pos >= 3 && pos <= 34) {
				int i = (pos - 3) / 2,
				    v = c <= '9' ? c - '0' : c - 'a' + 10;
				uint8_t b = tp.trace_id[i];

				ck_assert_int_eq((pos - 3) % 2 ? (b & 0x0f) : (b >> 4),
						 v);
			}
		}
	}
}
END_TEST

/* Parse and compare with the oracle: the same result, the same fields, and
 * out untouched on error. */
static void
check_against_ref(const char *s, size_t len, const char *what)
{
	struct w3c_traceparent got, want, poison;
	int rg, rw;

	memset(&poison, 0xa5, sizeof(poison));
	got = want = poison;
	rg = w3c_traceparent_parse(s, len, &got);
	rw = ref_traceparent_parse(s, len, &want);
	/* ck_assert() reports every call through a pipe: only on failure */
	if (rg != rw)
		ck_abort_msg("%s: rc %d, oracle %d (len %zu: %.*s)", what, rg, rw, len,
			     (int)len, s);
	if (memcmp(&got, &want, sizeof(got)) != 0)
		ck_abort_msg("%s: fields differ (%.*s)", what, (int)len, s);
}

/* Every byte value at every position of the v00 form, the dashes and the
 * version included (the fast path tests those as scalars), and at the
 * positions a higher version adds. */
START_TEST(test_traceparent_every_byte_vs_ref)
{
	static const char v00[] = TP("00", "01");
	static const char v01[] = TP("01", "01") "-x";
	char buf[64];
	char what[64];

	for (size_t pos = 0; pos < sizeof(v00) - 1; pos++)
		for (int c = 0; c < 256; c++) {
			memcpy(buf, v00, sizeof(v00) - 1);
			buf[pos] = (char)c;
			snprintf(what, sizeof(what), "v00 byte 0x%02x at %zu", c, pos);
			check_against_ref(buf, sizeof(v00) - 1, what);
		}
	for (size_t pos = 0; pos < sizeof(v01) - 1; pos++)
		for (int c = 0; c < 256; c += 3) {
			memcpy(buf, v01, sizeof(v01) - 1);
			buf[pos] = (char)c;
			snprintf(what, sizeof(what), "v01 byte 0x%02x at %zu", c, pos);
			check_against_ref(buf, sizeof(v01) - 1, what);
		}
}
END_TEST

/* Random values near the valid forms: mutated bytes (mostly the ones that
 * matter: digits, letters around the hex range, '-', OWS, zeros), lengths
 * around 55, OWS on either side. */
START_TEST(test_traceparent_random_vs_ref)
{
	static const char alphabet[] = "0123456789abcdefABCDEFgG-  \t:/`@\x80\xff";
	static const char *const bases[] = {
		TP("00", "01"),
		TP("00", "00"),
		"00-" ZTID "-" PID "-01",
		"00-" TID "-" ZPID "-01",
		"00-00000000000000000000000000000001-0000000000000001-ff",
		TP("01", "ff") "-abc",
		TP("fe", "03"),
		TP("ff", "01"),
	};
	uint8_t seed[32] = {0x5c, 0xa9};
	struct ctx_rng r;
	char buf[80];
	int iters = RUNNING_ON_VALGRIND ? 20000 : 300000;

	ctx_rng_seed(&r, seed);
	for (int i = 0; i < iters; i++) {
		uint64_t x = ctx_rng_next(&r);
		const char *b = bases[x % (sizeof(bases) / sizeof(bases[0]))];
		size_t len = strlen(b), off = 0;
		int n_mut = (int)(x >> 8 & 3);

		x >>= 10;
		if ((x & 7) == 0) /* leading OWS */
			buf[off++] = (x & 8) ? ' ' : '\t';
		x >>= 4;
		memcpy(buf + off, b, len);
		len += off;
		switch (x & 7) {
		case 0:
			buf[len++] = ' ';
			break;
		case 1:
			buf[len++] = '-';
			break;
		case 2:
			len--;
			break;
		case 3:
			buf[len++] = (char)(x >> 3);
			break;
		default:
			break;
		}
		x = ctx_rng_next(&r);
		for (int k = 0; k < n_mut && len > 0; k++) {
			size_t pos = (size_t)(x % len);

			x /= len;
			buf[pos] =
				(x & 1) ? (char)(x >> 1)
					: alphabet[(x >> 1) % (sizeof(alphabet) - 1)];
			x >>= 9;
		}
		check_against_ref(buf, len, "random");
	}
}
END_TEST

/* The value ends at the end of readable memory: nothing past len may be
 * read (a 16-byte load running over would fault here), for every length
 * around 55 and for the valid form and a few invalid ones. */
START_TEST(test_traceparent_end_of_page)
{
	static const char *const vals[] = {
		TP("00", "01"),     TP("00", "0g"),     TP("01", "01") "-",
		TP("00", "01") " ", " " TP("00", "01"),
	};
	long pg = sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(m, MAP_FAILED);
	ck_assert_int_eq(mprotect(m + pg, (size_t)pg, PROT_NONE), 0);
	for (size_t v = 0; v < sizeof(vals) / sizeof(vals[0]); v++) {
		size_t full = strlen(vals[v]);

		for (size_t len = 0; len <= full; len++) {
			char *s = m + pg - len;

			memcpy(s, vals[v], len);
			check_against_ref(s, len, "end of page");
		}
	}
	munmap(m, (size_t)pg * 2);
}
END_TEST

TEST_SUITE(w3c_suite)
{
	Suite *s = suite_create("w3c");
	TCase *tc = tcase_create("traceparent");

	tcase_add_test(tc, test_traceparent_parse_table);
	tcase_add_test(tc, test_traceparent_every_byte_everywhere);
	tcase_add_test(tc, test_traceparent_every_byte_vs_ref);
	tcase_add_test(tc, test_traceparent_random_vs_ref);
	tcase_add_test(tc, test_traceparent_end_of_page);
	tcase_add_test(tc, test_traceparent_parse_args);
	tcase_add_test(tc, test_traceparent_format_table);
	tcase_add_test(tc, test_traceparent_roundtrip_random);
	suite_add_tcase(s, tc);

	tc = tcase_create("tracestate");
	tcase_add_test(tc, test_tracestate_combine_table);
	tcase_add_test(tc, test_tracestate_key_value_table);
	tcase_add_test(tc, test_tracestate_truncate_table);
	tcase_add_test(tc, test_tracestate_truncate_bad_table);
	tcase_add_test(tc, test_tracestate_format_space);
	tcase_add_test(tc, test_tracestate_parse_pointers);
	tcase_add_test(tc, test_tracestate_check_table);
	tcase_add_test(tc, test_tracestate_check_long_lists);
	tcase_add_test(tc, test_tracestate_check_cr);
	tcase_add_test(tc, test_tracestate_check_random);
	tcase_add_test(tc, test_tracestate_trunc_full);
	tcase_add_test(tc, test_tracestate_trunc_edges);
	suite_add_tcase(s, tc);

	tc = tcase_create("hex");
	tcase_add_test(tc, test_hex_table);
	tcase_add_test(tc, test_id_is_zero);
	suite_add_tcase(s, tc);
	return s;
}
