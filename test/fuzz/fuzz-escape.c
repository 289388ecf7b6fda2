/* SPDX-License-Identifier: Apache-2.0 */
/* ctxdump's escaping of target-controlled strings (tools/ctxdump/output.c):
 * the text escaper and the JSON string writer over arbitrary bytes.
 * Oracles: the output is valid UTF-8 without a raw control byte (C0, DEL,
 * C1), a raw bidirectional or invisible format character (Trojan Source)
 * or an unescaped quote, and unescaping it gives the input back (text)
 * or the input with every byte that does not start a well-formed UTF-8
 * character replaced by U+FFFD (JSON).  The two UTF-8 validators of the
 * project (output_utf8_next and trec_utf8_valid) must agree. */
#include "fuzz.h"

#include <string.h>

#include "output.h"
#include "thread-record.h"

static char *mem;
static size_t mem_len;

static FILE *
mem_open(void)
{
	FILE *f = open_memstream(&mem, &mem_len);

	FUZZ_CHECK(f);
	return f;
}

static size_t
lead_len(uint8_t c)
{
	return c < 0x80             ? 1
	       : (c & 0xe0) == 0xc0 ? 2
	       : (c & 0xf0) == 0xe0 ? 3
	       : (c & 0xf8) == 0xf0 ? 4
				    : 1;
}

/* Length of the well-formed character at s[0..n), 0 if there is none,
 * by trec_utf8_valid(). */
static size_t
char_len(const uint8_t *s, size_t n)
{
	size_t l = lead_len(s[0]);

	return l <= n && trec_utf8_valid(s, l) ? l : 0;
}

static uint32_t
char_cp(const uint8_t *s, size_t l)
{
	static const uint8_t mask[5] = {0, 0x7f, 0x1f, 0x0f, 0x07};
	uint32_t c = s[0] & mask[l];
	size_t i;

	for (i = 1; i < l; i++)
		c = c << 6 | (s[i] & 0x3f);
	return c;
}

/* The characters that must never be shown as is: controls, and the
 * format characters that reorder or hide text on a terminal, listed one
 * by one (CVE-2021-42574; Unicode's Bidi_Control and zero-width ones),
 * and the tag characters. */
static bool
is_hidden(uint32_t cp)
{
	static const uint32_t format[] = {
		0x061c,                                 /* ALM */
		0x200b, 0x200c, 0x200d,                 /* ZWSP ZWNJ ZWJ */
		0x200e, 0x200f,                         /* LRM RLM */
		0x2028, 0x2029,                         /* LS PS */
		0x202a, 0x202b, 0x202c, 0x202d, 0x202e, /* LRE RLE PDF LRO RLO */
		0x2060,                                 /* WJ */
		0x2066, 0x2067, 0x2068, 0x2069,         /* LRI RLI FSI PDI */
		0xfeff,                                 /* BOM, ZWNBSP */
	};

	if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
		return true;
	if (cp >= 0xe0000 && cp <= 0xe007f) /* tags */
		return true;
	for (size_t i = 0; i < sizeof(format) / sizeof(format[0]); i++)
		if (cp == format[i])
			return true;
	return false;
}

/* Output is UTF-8 with no raw controls or format characters. */
static void
check_clean(const uint8_t *o, size_t n)
{
	size_t i = 0;

	FUZZ_CHECK(trec_utf8_valid(o, n));
	while (i < n) {
		size_t l = char_len(o + i, n - i);

		FUZZ_CHECK(l > 0);
		FUZZ_CHECK(!is_hidden(char_cp(o + i, l)));
		i += l;
	}
}

static int
hexval(uint8_t c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
				      : -1;
}

static void
check_text(const uint8_t *s, size_t n, bool quote)
{
	uint8_t *back;
	size_t i, k = 0;
	FILE *f = mem_open();

	output_text_escape(f, s, n, quote);
	FUZZ_CHECK(fclose(f) == 0);
	check_clean((const uint8_t *)mem, mem_len);
	back = malloc(mem_len + 1);
	FUZZ_CHECK(back);
	for (i = 0; i < mem_len; i++) {
		uint8_t c = (uint8_t)mem[i];

		if (quote)
			FUZZ_CHECK(c != '"');
		if (c != '\\') {
			back[k++] = c;
			continue;
		}
		FUZZ_CHECK(i + 1 < mem_len);
		c = (uint8_t)mem[++i];
		if (c == '\\' || (quote && c == '"')) {
			back[k++] = c;
			continue;
		}
		FUZZ_CHECK(c == 'x' && i + 2 < mem_len);
		FUZZ_CHECK(hexval((uint8_t)mem[i + 1]) >= 0 &&
			   hexval((uint8_t)mem[i + 2]) >= 0);
		back[k++] = (uint8_t)(hexval((uint8_t)mem[i + 1]) << 4 |
				      hexval((uint8_t)mem[i + 2]));
		i += 2;
	}
	FUZZ_CHECK(k == n && memcmp(back, s, n) == 0);
	free(back);
	free(mem);
	mem = NULL;
}

static size_t
put_utf8(uint8_t *o, uint32_t cp)
{
	if (cp < 0x80) {
		o[0] = (uint8_t)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (uint8_t)(0xc0 | cp >> 6);
		o[1] = (uint8_t)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (uint8_t)(0xe0 | cp >> 12);
		o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (uint8_t)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (uint8_t)(0xf0 | cp >> 18);
	o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (uint8_t)(0x80 | (cp & 0x3f));
	return 4;
}

static void
check_json(const uint8_t *s, size_t n)
{
	uint8_t *want, *got;
	size_t i, k = 0, g = 0;
	FILE *f = mem_open();

	output_json_string(f, s, n);
	FUZZ_CHECK(fclose(f) == 0);
	check_clean((const uint8_t *)mem, mem_len);
	FUZZ_CHECK(mem_len >= 2 && mem[0] == '"' && mem[mem_len - 1] == '"');

	/* what the reader should get: the input, U+FFFD per bad byte */
	want = malloc(3 * n + 1);
	got = malloc(3 * n + 1);
	FUZZ_CHECK(want && got);
	for (i = 0; i < n;) {
		size_t l = char_len(s + i, n - i);
		uint32_t cp;
		size_t l2 = output_utf8_next(s + i, n - i, &cp);

		/* the two validators agree */
		FUZZ_CHECK(l == l2);
		if (l) {
			FUZZ_CHECK(cp == char_cp(s + i, l));
			memcpy(want + k, s + i, l);
			k += l;
			i += l;
		} else {
			k += put_utf8(want + k, 0xfffd);
			i++;
		}
	}
	/* a minimal JSON string decoder */
	for (i = 1; i < mem_len - 1; i++) {
		uint8_t c = (uint8_t)mem[i];
		uint32_t cp;

		FUZZ_CHECK(c != '"');
		if (c != '\\') {
			got[g++] = c;
			continue;
		}
		FUZZ_CHECK(i + 1 < mem_len - 1);
		c = (uint8_t)mem[++i];
		switch (c) {
		case '"':
		case '\\':
		case '/':
			got[g++] = c;
			break;
		case 'n':
			got[g++] = '\n';
			break;
		case 'r':
			got[g++] = '\r';
			break;
		case 't':
			got[g++] = '\t';
			break;
		case 'b':
			got[g++] = '\b';
			break;
		case 'f':
			got[g++] = '\f';
			break;
		case 'u':
			FUZZ_CHECK(i + 4 < mem_len - 1);
			cp = 0;
			for (int d = 1; d <= 4; d++) {
				int h = hexval((uint8_t)mem[i + d]);

				FUZZ_CHECK(h >= 0);
				cp = cp << 4 | (uint32_t)h;
			}
			i += 4;
			/* a surrogate only as a pair, high then low */
			if (cp >= 0xd800 && cp <= 0xdbff) {
				uint32_t lo = 0;

				FUZZ_CHECK(i + 6 < mem_len - 1 && mem[i + 1] == '\\' &&
					   mem[i + 2] == 'u');
				for (int d = 3; d <= 6; d++) {
					int h = hexval((uint8_t)mem[i + d]);

					FUZZ_CHECK(h >= 0);
					lo = lo << 4 | (uint32_t)h;
				}
				FUZZ_CHECK(lo >= 0xdc00 && lo <= 0xdfff);
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				i += 6;
			}
			FUZZ_CHECK(cp < 0xd800 || cp > 0xdfff);
			g += put_utf8(got + g, cp);
			break;
		default:
			FUZZ_CHECK(!"bad JSON escape");
		}
		FUZZ_CHECK(g <= 3 * n);
	}
	FUZZ_CHECK(g == k && memcmp(got, want, k) == 0);
	free(want);
	free(got);
	free(mem);
	mem = NULL;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_text(data, size, false);
	check_text(data, size, true);
	check_json(data, size);
	return 0;
}
