/* SPDX-License-Identifier: Apache-2.0 */
#include "test-common.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "thread-record.h"

/* A whole record as a reader sees it: header + attrs in one buffer. */
union record_buf {
	struct otel_thread_ctx_record rec;
	uint8_t bytes[TREC_MAX_SIZE];
};

START_TEST(layout_offsets)
{
	/* Checked at run time too, so a header edit that slips past the
	 * static asserts (e.g. under C99) still fails a test. */
	ck_assert_uint_eq(offsetof(struct otel_thread_ctx_record, trace_id), 0);
	ck_assert_uint_eq(offsetof(struct otel_thread_ctx_record, span_id), 16);
	ck_assert_uint_eq(offsetof(struct otel_thread_ctx_record, valid), 24);
	ck_assert_uint_eq(offsetof(struct otel_thread_ctx_record, trace_flags), 25);
	ck_assert_uint_eq(offsetof(struct otel_thread_ctx_record, attrs_data_size), 26);
	ck_assert_uint_eq(offsetof(struct otel_thread_ctx_record, attrs_data), 28);
	ck_assert_uint_eq(sizeof(struct otel_thread_ctx_record), TREC_HEADER_SIZE);
	ck_assert_uint_eq(_Alignof(struct otel_thread_ctx_record), 2);
	ck_assert_uint_eq(TREC_HEADER_SIZE + TREC_ATTRS_MAX, TREC_MAX_SIZE);
	ck_assert_str_eq(OTEL_THREAD_CTX_SYMBOL, "otel_thread_ctx_v1");
}
END_TEST

/* Build a record through the encoder; returns its total size. */
static size_t
build_record(union record_buf *b,
	     const uint8_t tid[16],
	     const uint8_t sid[8],
	     uint8_t flags,
	     const char *const *vals,
	     size_t n)
{
	struct trec_attr_writer w;
	size_t i;

	memset(b, 0xee, sizeof(*b));
	memcpy(b->rec.trace_id, tid, 16);
	memcpy(b->rec.span_id, sid, 8);
	b->rec.valid = TREC_VALID;
	b->rec.trace_flags = flags;
	trec_attrs_init(&w, b->rec.attrs_data, TREC_ATTRS_MAX);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(
			trec_attrs_add(&w, (uint8_t)i, vals[i], strlen(vals[i])), 0);
	ck_assert_uint_eq(w.dropped, 0);
	b->rec.attrs_data_size = (uint16_t)w.len;
	return TREC_HEADER_SIZE + w.len;
}

START_TEST(vector_full_dump)
{
	/* otep-formats.md §5.2, byte for byte. */
	static const uint8_t expect[] = {
		0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98,
		0x76, 0x54, 0x32, 0x10, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
		0x01, 0x01, 0x1f, 0x00, 0x00, 0x03, 0x47, 0x45, 0x54, 0x01, 0x09, 0x2f,
		0x61, 0x70, 0x69, 0x2f, 0x74, 0x65, 0x73, 0x74, 0x02, 0x0d, 0x73, 0x69,
		0x6d, 0x70, 0x6c, 0x65, 0x2d, 0x77, 0x72, 0x69, 0x74, 0x65, 0x72,
	};
	static const uint8_t tid[16] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
					0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10};
	static const uint8_t sid[8] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
	static const char *const vals[] = {"GET", "/api/test", "simple-writer"};
	union record_buf b;
	struct trec_attrs_decoded d;
	size_t n;

	ck_assert_uint_eq(sizeof(expect), 59);
	n = build_record(&b, tid, sid, 0x01, vals, 3);
	ck_assert_uint_eq(n, sizeof(expect));
	ck_assert_mem_eq(b.bytes, expect, sizeof(expect));
	ck_assert_uint_eq(b.rec.attrs_data_size, 31);

	/* And back. */
	ck_assert_int_eq(trec_attrs_decode(expect + 28, 31, 3, &d), 0);
	ck_assert_uint_eq(d.n, 3);
	ck_assert(!d.truncated);
	ck_assert_uint_eq(d.n_unknown, 0);
	ck_assert_uint_eq(d.attr[1].key, 1);
	ck_assert_uint_eq(d.attr[1].len, 9);
	ck_assert_mem_eq(d.attr[1].val, "/api/test", 9);
	ck_assert_mem_eq(d.attr[2].val, "simple-writer", 13);
}
END_TEST

START_TEST(vector_demo_reader)
{
	/* §5.1 ctx-sharing-demo test_parse_valid_record: a 64-byte buffer. */
	/* A record starts on at least a 2-byte boundary (OTEP). */
	_Alignas(8) uint8_t buf[64];
	const struct otel_thread_ctx_record *rec = (const void *)buf;
	static const uint8_t attrs[] = {0x00, 0x03, 'f', 'o', 'o',
					0x01, 0x03, 'b', 'a', 'r'};
	struct trec_attrs_decoded d;
	const struct trec_attr *a;

	memset(buf, 0, sizeof(buf));
	memset(buf, 0x01, 16);
	memset(buf + 16, 0x02, 8);
	buf[24] = 1;
	buf[26] = 0x0a;
	memcpy(buf + 28, attrs, sizeof(attrs));

	ck_assert_uint_eq(rec->valid, TREC_VALID);
	ck_assert_uint_eq(rec->attrs_data_size, 10);
	ck_assert_uint_eq(rec->trace_id[15], 0x01);
	ck_assert_uint_eq(rec->span_id[0], 0x02);
	ck_assert_int_eq(
		trec_attrs_decode(rec->attrs_data, rec->attrs_data_size, 2, &d), 0);
	ck_assert_uint_eq(d.n, 2);
	a = trec_attrs_find(&d, 0);
	ck_assert_ptr_nonnull(a);
	ck_assert_uint_eq(a->len, 3);
	ck_assert_mem_eq(a->val, "foo", 3);
	a = trec_attrs_find(&d, 1);
	ck_assert_ptr_nonnull(a);
	ck_assert_mem_eq(a->val, "bar", 3);
	ck_assert_ptr_null(trec_attrs_find(&d, 2));
}
END_TEST

START_TEST(vector_libdatadog_basic)
{
	/* §5.1 libdatadog attribute_encoding_basic: root-span key 0 is
	 * implicit there; here it is written explicitly. */
	static const uint8_t expect[] = {
		0x00, 0x10, '0',  '0', '0', '0', '0', '0',  '0',  '0', '0',
		'0',  '0',  '0',  '0', '0', '0', '0', 0x01, 0x03, 'G', 'E',
		'T',  0x02, 0x07, '/', 'a', 'p', 'i', '/',  'v',  '1',
	};
	struct trec_attr_writer w;
	uint8_t buf[TREC_ATTRS_MAX];

	trec_attrs_init(&w, buf, sizeof(buf));
	ck_assert_int_eq(trec_attrs_add(&w, 0, "0000000000000000", 16), 0);
	ck_assert_int_eq(trec_attrs_add(&w, 1, "GET", 3), 0);
	ck_assert_int_eq(trec_attrs_add(&w, 2, "/api/v1", 7), 0);
	ck_assert_uint_eq(w.len, 32);
	ck_assert_mem_eq(buf, expect, sizeof(expect));
}
END_TEST

START_TEST(limit_value_cap_ascii)
{
	char val[400];
	uint8_t buf[TREC_ATTRS_MAX];
	struct trec_attr_writer w;
	size_t i;

	for (i = 0; i < sizeof(val); i++)
		val[i] = (char)('a' + i % 26);
	trec_attrs_init(&w, buf, sizeof(buf));
	ck_assert_int_eq(trec_attrs_add(&w, 5, val, 255), 0);
	ck_assert_uint_eq(w.capped, 0);
	ck_assert_int_eq(trec_attrs_add(&w, 6, val, 256), 0);
	ck_assert_uint_eq(w.capped, 1);
	ck_assert_uint_eq(w.len, 2 * (2 + 255));
	ck_assert_uint_eq(buf[257], 6);
	ck_assert_uint_eq(buf[258], 255);
	ck_assert_mem_eq(buf + 259, val, 255);
}
END_TEST

/* A value of `prefix` ASCII bytes followed by copies of the UTF-8 character
 * ch, longer than 255 bytes; returns the length the encoder keeps. */
static size_t
encode_utf8_capped(size_t prefix, const char *ch, uint8_t *buf, size_t cap)
{
	char val[600];
	size_t n = 0, clen = strlen(ch);
	struct trec_attr_writer w;

	memset(val, 'x', prefix);
	n = prefix;
	while (n + clen <= sizeof(val)) {
		memcpy(val + n, ch, clen);
		n += clen;
	}
	trec_attrs_init(&w, buf, cap);
	ck_assert_int_eq(trec_attrs_add(&w, 1, val, n), 0);
	ck_assert_uint_eq(w.capped, 1);
	ck_assert_uint_eq(buf[1] + 2u, w.len);
	ck_assert(trec_utf8_valid(buf + 2, buf[1]));
	ck_assert_mem_eq(buf + 2, val, buf[1]);
	return buf[1];
}

START_TEST(limit_value_cap_utf8)
{
	uint8_t buf[TREC_ATTRS_MAX];

	/* "é" is 2 bytes: 1 + 127*2 = 255 ends on a boundary... */
	ck_assert_uint_eq(encode_utf8_capped(1, "\xc3\xa9", buf, sizeof(buf)), 255);
	/* ...and with no prefix byte 255 would split the 128th "é". */
	ck_assert_uint_eq(encode_utf8_capped(0, "\xc3\xa9", buf, sizeof(buf)), 254);
	/* "€" is 3 bytes: 85*3 = 255 fits exactly; shifted by 1 or 2 it backs
	 * off to the previous character. */
	ck_assert_uint_eq(encode_utf8_capped(0, "\xe2\x82\xac", buf, sizeof(buf)), 255);
	ck_assert_uint_eq(encode_utf8_capped(1, "\xe2\x82\xac", buf, sizeof(buf)), 253);
	ck_assert_uint_eq(encode_utf8_capped(2, "\xe2\x82\xac", buf, sizeof(buf)), 254);
	/* U+1F600 is 4 bytes: cut after 252 plus 0..3 prefix bytes. */
	ck_assert_uint_eq(encode_utf8_capped(0, "\xf0\x9f\x98\x80", buf, sizeof(buf)),
			  252);
	ck_assert_uint_eq(encode_utf8_capped(1, "\xf0\x9f\x98\x80", buf, sizeof(buf)),
			  253);
	ck_assert_uint_eq(encode_utf8_capped(2, "\xf0\x9f\x98\x80", buf, sizeof(buf)),
			  254);
	ck_assert_uint_eq(encode_utf8_capped(3, "\xf0\x9f\x98\x80", buf, sizeof(buf)),
			  255);
}
END_TEST

START_TEST(limit_value_cap_not_utf8)
{
	/* 300 continuation bytes have no character boundary: the encoder
	 * still caps at 255 rather than looping or writing nothing. */
	uint8_t val[300], buf[TREC_ATTRS_MAX];
	struct trec_attr_writer w;

	memset(val, 0x80, sizeof(val));
	trec_attrs_init(&w, buf, sizeof(buf));
	ck_assert_int_eq(trec_attrs_add(&w, 0, val, sizeof(val)), 0);
	ck_assert_uint_eq(buf[1], 255);
}
END_TEST

START_TEST(limit_record_640)
{
	/* Fill to exactly 612 bytes: two 255-byte values (514) + one of 96
	 * (98) = 612.  Any further entry, even an empty one, is dropped. */
	char val[255];
	union record_buf b;
	struct trec_attr_writer w;

	memset(val, 'v', sizeof(val));
	trec_attrs_init(&w, b.rec.attrs_data, 10000); /* clamped to 612 */
	ck_assert_uint_eq(w.cap, TREC_ATTRS_MAX);
	ck_assert_int_eq(trec_attrs_add(&w, 0, val, 255), 0);
	ck_assert_int_eq(trec_attrs_add(&w, 1, val, 255), 0);
	ck_assert_int_eq(trec_attrs_add(&w, 2, val, 97), -ENOSPC);
	ck_assert_int_eq(trec_attrs_add(&w, 2, val, 96), 0);
	ck_assert_uint_eq(w.len, TREC_ATTRS_MAX);
	ck_assert_uint_eq(TREC_HEADER_SIZE + w.len, TREC_MAX_SIZE);
	ck_assert_int_eq(trec_attrs_add(&w, 3, "", 0), -ENOSPC);
	ck_assert_int_eq(trec_attrs_add(&w, 3, NULL, 0), -ENOSPC);
	ck_assert_uint_eq(w.dropped, 3);
	ck_assert_uint_eq(w.len, TREC_ATTRS_MAX);
}
END_TEST

START_TEST(limit_libdatadog_overflow)
{
	/* §5.1 attribute_truncation_on_overflow: root-span id (18 bytes) +
	 * 255 + 255 + 100.  The third value would end at 634 > 612 and is
	 * dropped whole: 532 bytes remain, and nothing of the 100-byte value
	 * is in the buffer. */
	char v255[255], v100[100];
	uint8_t buf[TREC_ATTRS_MAX + 64];
	struct trec_attr_writer w;
	struct trec_attrs_decoded d;

	memset(v255, 'a', sizeof(v255));
	memset(v100, 'z', sizeof(v100));
	memset(buf, 0, sizeof(buf));
	trec_attrs_init(&w, buf, sizeof(buf));
	ck_assert_int_eq(trec_attrs_add(&w, 0, "0123456789abcdef", 16), 0);
	ck_assert_int_eq(trec_attrs_add(&w, 1, v255, 255), 0);
	ck_assert_int_eq(trec_attrs_add(&w, 2, v255, 255), 0);
	ck_assert_int_eq(trec_attrs_add(&w, 3, v100, 100), -ENOSPC);
	ck_assert_uint_eq(w.len, 532);
	ck_assert_uint_eq(w.dropped, 1);
	ck_assert_uint_eq(buf[532], 0);
	ck_assert_ptr_null(memchr(buf, 'z', sizeof(buf)));

	/* Drop-not-truncate is per entry: a later entry that fits is kept. */
	ck_assert_int_eq(trec_attrs_add(&w, 4, "GET", 3), 0);
	ck_assert_uint_eq(w.len, 537);

	ck_assert_int_eq(trec_attrs_decode(buf, w.len, 5, &d), 0);
	ck_assert_uint_eq(d.n, 4);
	ck_assert(!d.truncated);
	ck_assert_uint_eq(d.attr[3].key, 4);
	ck_assert_ptr_null(trec_attrs_find(&d, 3));
}
END_TEST

START_TEST(limit_small_buffer)
{
	/* A caller buffer below 612 is honoured exactly. */
	uint8_t buf[16];
	struct trec_attr_writer w;

	memset(buf, 0, sizeof(buf));
	trec_attrs_init(&w, buf, 10);
	ck_assert_int_eq(trec_attrs_add(&w, 0, "12345678", 8), 0);
	ck_assert_int_eq(trec_attrs_add(&w, 1, "x", 1), -ENOSPC);
	ck_assert_int_eq(trec_attrs_add(&w, 1, "", 0), -ENOSPC);
	ck_assert_uint_eq(w.len, 10);
	ck_assert_uint_eq(buf[10], 0);
}
END_TEST

START_TEST(encoder_bad_args)
{
	uint8_t buf[8];
	struct trec_attr_writer w;

	trec_attrs_init(&w, buf, sizeof(buf));
	ck_assert_int_eq(trec_attrs_add(NULL, 0, "a", 1), -EINVAL);
	ck_assert_int_eq(trec_attrs_add(&w, 0, NULL, 1), -EINVAL);
	ck_assert_uint_eq(w.len, 0);
	ck_assert_uint_eq(w.dropped, 0);
	ck_assert_int_eq(trec_attrs_add(&w, 0, NULL, 0), 0);
	ck_assert_uint_eq(w.len, 2);
	ck_assert_uint_eq(buf[1], 0);
}
END_TEST

START_TEST(decode_empty)
{
	struct trec_attrs_decoded d;

	ck_assert_int_eq(trec_attrs_decode(NULL, 0, 4, &d), 0);
	ck_assert_uint_eq(d.n, 0);
	ck_assert(!d.truncated);
	ck_assert_int_eq(trec_attrs_decode(NULL, 1, 4, &d), -EINVAL);
	ck_assert_int_eq(trec_attrs_decode((const uint8_t *)"", 0, 4, NULL), -EINVAL);
}
END_TEST

START_TEST(decode_truncated)
{
	/* Three entries; every cut inside an entry stops there with
	 * truncated set and keeps the complete entries before it. */
	static const uint8_t data[] = {0x00, 0x02, 'a', 'b', 0x01, 0x00,
				       0x02, 0x03, 'x', 'y', 'z'};
	/* complete entries before each cut length */
	static const unsigned complete[] = {0, 0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 3};
	struct trec_attrs_decoded d;
	size_t cut;

	for (cut = 0; cut <= sizeof(data); cut++) {
		bool boundary = cut == 0 || cut == 4 || cut == 6 || cut == sizeof(data);

		ck_assert_int_eq(trec_attrs_decode(data, cut, 3, &d), 0);
		ck_assert_msg(d.n == complete[cut], "cut %zu: n=%u", cut, d.n);
		ck_assert_msg(d.truncated == !boundary, "cut %zu", cut);
	}

	/* The length byte claims more than is there. */
	{
		static const uint8_t bad[] = {0x00, 0x01, 'a', 0x01, 0xff, 'b'};

		ck_assert_int_eq(trec_attrs_decode(bad, sizeof(bad), 2, &d), 0);
		ck_assert_uint_eq(d.n, 1);
		ck_assert(d.truncated);
	}
}
END_TEST

START_TEST(decode_zero_length)
{
	static const uint8_t data[] = {0x00, 0x00, 0x01, 0x00, 0x02,
				       0x01, 'q',  0x03, 0x00};
	struct trec_attrs_decoded d;

	ck_assert_int_eq(trec_attrs_decode(data, sizeof(data), 4, &d), 0);
	ck_assert_uint_eq(d.n, 4);
	ck_assert(!d.truncated);
	ck_assert_uint_eq(d.attr[0].len, 0);
	ck_assert_uint_eq(d.attr[1].key, 1);
	ck_assert_uint_eq(d.attr[1].len, 0);
	ck_assert_uint_eq(d.attr[2].len, 1);
	ck_assert_uint_eq(d.attr[3].key, 3);
	ck_assert_uint_eq(d.attr[3].len, 0);
}
END_TEST

START_TEST(decode_duplicates)
{
	/* key 1 three times: the last ("c") wins, position of the first is
	 * kept; a duplicate may also clear a value (len 0). */
	static const uint8_t data[] = {0x01, 0x01, 'a',  0x02, 0x01, 'x',  0x01,
				       0x01, 'b',  0x01, 0x01, 'c',  0x02, 0x00};
	struct trec_attrs_decoded d;
	const struct trec_attr *a;

	ck_assert_int_eq(trec_attrs_decode(data, sizeof(data), 3, &d), 0);
	ck_assert_uint_eq(d.n, 2);
	ck_assert_uint_eq(d.n_duplicates, 3);
	ck_assert_uint_eq(d.attr[0].key, 1);
	ck_assert_uint_eq(d.attr[0].len, 1);
	ck_assert_uint_eq(d.attr[0].val[0], 'c');
	a = trec_attrs_find(&d, 2);
	ck_assert_ptr_nonnull(a);
	ck_assert_uint_eq(a->len, 0);
}
END_TEST

START_TEST(decode_unknown_keys)
{
	/* With a key map of 2 entries, keys 2 and 200 are unknown: kept,
	 * counted once each even when repeated. */
	static const uint8_t data[] = {0x00, 0x01, 'a',  0x02, 0x01, 'b',  0xc8, 0x01,
				       'c',  0x02, 0x01, 'd',  0x01, 0x01, 'e'};
	struct trec_attrs_decoded d;

	ck_assert_int_eq(trec_attrs_decode(data, sizeof(data), 2, &d), 0);
	ck_assert_uint_eq(d.n, 4);
	ck_assert_uint_eq(d.n_unknown, 2);
	ck_assert_uint_eq(d.n_duplicates, 1);
	ck_assert_ptr_nonnull(trec_attrs_find(&d, 200));
	ck_assert_uint_eq(trec_attrs_find(&d, 2)->val[0], 'd');

	ck_assert_int_eq(trec_attrs_decode(data, sizeof(data), 0, &d), 0);
	ck_assert_uint_eq(d.n_unknown, 4);
	ck_assert_int_eq(trec_attrs_decode(data, sizeof(data), 256, &d), 0);
	ck_assert_uint_eq(d.n_unknown, 0);
}
END_TEST

START_TEST(decode_all_256_keys)
{
	/* Every key 0..255 once, then every key again: the output table of
	 * 256 must hold them all without overflow. */
	uint8_t data[1024];
	struct trec_attrs_decoded d;
	size_t n = 0;
	unsigned k, round;

	for (round = 0; round < 2; round++)
		for (k = 0; k < 256; k++) {
			data[n++] = (uint8_t)k;
			data[n++] = 0;
		}
	ck_assert_int_eq(trec_attrs_decode(data, n, 256, &d), 0);
	ck_assert_uint_eq(d.n, 256);
	ck_assert_uint_eq(d.n_duplicates, 256);
	for (k = 0; k < 256; k++)
		ck_assert_uint_eq(d.attr[k].key, k);
}
END_TEST

START_TEST(decode_random_garbage)
{
	/* Random bytes never make the decoder read past size: every value
	 * pointer stays inside the buffer. */
	uint8_t data[TREC_ATTRS_MAX];
	struct trec_attrs_decoded d;
	unsigned seed = 12345, iter, i;

	for (iter = 0; iter < 2000; iter++) {
		size_t size = (size_t)(rand_r(&seed) % (int)sizeof(data));

		for (i = 0; i < size; i++)
			data[i] = (uint8_t)rand_r(&seed);
		ck_assert_int_eq(trec_attrs_decode(data, size, 8, &d), 0);
		for (i = 0; i < d.n; i++) {
			ck_assert(d.attr[i].val >= data + 2);
			ck_assert(d.attr[i].val + d.attr[i].len <= data + size);
		}
	}
}
END_TEST

START_TEST(utf8_validator)
{
	ck_assert(trec_utf8_valid((const uint8_t *)"", 0));
	ck_assert(trec_utf8_valid((const uint8_t *)"plain", 5));
	ck_assert(trec_utf8_valid(
		(const uint8_t *)"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9));
	ck_assert(
		trec_utf8_valid((const uint8_t *)"\xf4\x8f\xbf\xbf", 4)); /* U+10FFFF */
	ck_assert(!trec_utf8_valid((const uint8_t *)"\x80", 1));
	ck_assert(!trec_utf8_valid((const uint8_t *)"\xc3", 1));         /* cut */
	ck_assert(!trec_utf8_valid((const uint8_t *)"\xc0\xaf", 2));     /* overlong */
	ck_assert(!trec_utf8_valid((const uint8_t *)"\xe0\x80\xaf", 3)); /* overlong */
	ck_assert(!trec_utf8_valid((const uint8_t *)"\xed\xa0\x80", 3)); /* surrogate */
	ck_assert(!trec_utf8_valid((const uint8_t *)"\xf4\x90\x80\x80",
				   4)); /* > U+10FFFF */
	ck_assert(!trec_utf8_valid((const uint8_t *)"\xf0\x9f\x98", 3)); /* cut */
	ck_assert(!trec_utf8_valid((const uint8_t *)"\xe2\x28\xa1", 3)); /* bad cont. */
	ck_assert(!trec_utf8_valid((const uint8_t *)"\xff", 1));
	/* cut by len, with the rest of the character right after it */
	ck_assert(!trec_utf8_valid((const uint8_t *)"\xc3\xa9", 1));
	ck_assert(!trec_utf8_valid((const uint8_t *)"\xe2\x82\xac", 2));
	ck_assert(!trec_utf8_valid((const uint8_t *)"\xf0\x9f\x98\x80", 3));
}
END_TEST

TEST_SUITE(record_suite)
{
	Suite *s = suite_create("Thread record (OTEP-4947)");
	TCase *tc;

	tc = tcase_create("Layout");
	tcase_add_test(tc, layout_offsets);
	suite_add_tcase(s, tc);

	tc = tcase_create("Test vectors");
	tcase_add_test(tc, vector_full_dump);
	tcase_add_test(tc, vector_demo_reader);
	tcase_add_test(tc, vector_libdatadog_basic);
	suite_add_tcase(s, tc);

	tc = tcase_create("Encoder limits");
	tcase_add_test(tc, limit_value_cap_ascii);
	tcase_add_test(tc, limit_value_cap_utf8);
	tcase_add_test(tc, limit_value_cap_not_utf8);
	tcase_add_test(tc, limit_record_640);
	tcase_add_test(tc, limit_libdatadog_overflow);
	tcase_add_test(tc, limit_small_buffer);
	tcase_add_test(tc, encoder_bad_args);
	suite_add_tcase(s, tc);

	tc = tcase_create("Decoder");
	tcase_add_test(tc, decode_empty);
	tcase_add_test(tc, decode_truncated);
	tcase_add_test(tc, decode_zero_length);
	tcase_add_test(tc, decode_duplicates);
	tcase_add_test(tc, decode_unknown_keys);
	tcase_add_test(tc, decode_all_256_keys);
	tcase_add_test(tc, decode_random_garbage);
	tcase_add_test(tc, utf8_validator);
	suite_add_tcase(s, tc);

	return s;
}
