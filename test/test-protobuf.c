/* SPDX-License-Identifier: Apache-2.0 */
#include "test-common.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "protobuf.h"

static size_t
enc_varint(uint64_t v, uint8_t *out, size_t cap)
{
	struct pb_writer w;
	size_t len = 0;

	pb_writer_init(&w, out, cap);
	pb_put_varint(&w, v);
	ck_assert_int_eq(pb_writer_finish(&w, &len), 0);
	ck_assert_uint_eq(len, pb_varint_size(v));
	return len;
}

/* clang-format off */
static const struct {
	uint64_t v;
	size_t n;
	uint8_t bytes[10];
} varints[] = {
	{0, 1, {0x00}},
	{1, 1, {0x01}},
	{127, 1, {0x7f}},
	{128, 2, {0x80, 0x01}},
	{150, 2, {0x96, 0x01}}, /* the protobuf documentation's example */
	{300, 2, {0xac, 0x02}},
	{336, 2, {0xd0, 0x02}}, /* sig-profiling resource length */
	{16383, 2, {0xff, 0x7f}},
	{16384, 3, {0x80, 0x80, 0x01}},
	{UINT32_MAX, 5, {0xff, 0xff, 0xff, 0xff, 0x0f}},
	{1ull << 63, 10, {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}},
	{UINT64_MAX, 10, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
};
/* clang-format on */

START_TEST(varint_encode)
{
	size_t i;

	for (i = 0; i < sizeof(varints) / sizeof(varints[0]); i++) {
		uint8_t out[16];
		size_t n = enc_varint(varints[i].v, out, sizeof(out));

		ck_assert_msg(n == varints[i].n, "%zu: len %zu", i, n);
		ck_assert_mem_eq(out, varints[i].bytes, n);
	}
}
END_TEST

START_TEST(varint_decode)
{
	size_t i;

	for (i = 0; i < sizeof(varints) / sizeof(varints[0]); i++) {
		struct pb_reader r;
		uint64_t v = 42;

		pb_reader_init(&r, varints[i].bytes, varints[i].n);
		ck_assert_int_eq(pb_get_varint(&r, &v), 0);
		ck_assert_msg(v == varints[i].v, "%zu", i);
		ck_assert(pb_reader_eof(&r));

		/* Every shorter prefix is truncated. */
		for (size_t cut = 0; cut < varints[i].n; cut++) {
			pb_reader_init(&r, varints[i].bytes, cut);
			ck_assert_int_eq(pb_get_varint(&r, &v), -EBADMSG);
			ck_assert(r.p == varints[i].bytes);
		}
	}
}
END_TEST

START_TEST(varint_non_minimal)
{
	/* Padded encodings are legal protobuf: 0x80 0x00 is 0, and a
	 * 10-byte encoding of 1 is accepted. */
	static const uint8_t zero2[] = {0x80, 0x00};
	static const uint8_t one10[] = {0x81, 0x80, 0x80, 0x80, 0x80,
					0x80, 0x80, 0x80, 0x80, 0x00};
	struct pb_reader r;
	uint64_t v;

	pb_reader_init(&r, zero2, sizeof(zero2));
	ck_assert_int_eq(pb_get_varint(&r, &v), 0);
	ck_assert_uint_eq(v, 0);
	pb_reader_init(&r, one10, sizeof(one10));
	ck_assert_int_eq(pb_get_varint(&r, &v), 0);
	ck_assert_uint_eq(v, 1);
}
END_TEST

START_TEST(varint_too_long)
{
	/* 11 bytes, and 10 bytes whose last carries more than bit 63. */
	static const uint8_t eleven[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
					 0x80, 0x80, 0x80, 0x80, 0x01};
	static const uint8_t over[] = {0xff, 0xff, 0xff, 0xff, 0xff,
				       0xff, 0xff, 0xff, 0xff, 0x02};
	struct pb_reader r;
	uint64_t v = 7;

	pb_reader_init(&r, eleven, sizeof(eleven));
	ck_assert_int_eq(pb_get_varint(&r, &v), -EBADMSG);
	pb_reader_init(&r, over, sizeof(over));
	ck_assert_int_eq(pb_get_varint(&r, &v), -EBADMSG);
	ck_assert_uint_eq(v, 7);
	ck_assert(r.p == over);
}
END_TEST

START_TEST(tags)
{
	uint8_t out[16];
	struct pb_writer w;
	size_t len;

	pb_writer_init(&w, out, sizeof(out));
	pb_put_tag(&w, 1, PB_WT_LEN);               /* 0a */
	pb_put_tag(&w, 2, PB_WT_LEN);               /* 12 */
	pb_put_tag(&w, 4, PB_WT_I64);               /* 21 */
	pb_put_tag(&w, 5, PB_WT_LEN);               /* 2a */
	pb_put_tag(&w, 8, PB_WT_VARINT);            /* 40 */
	pb_put_tag(&w, 15, PB_WT_I32);              /* 7d */
	pb_put_tag(&w, 16, PB_WT_VARINT);           /* 80 01 */
	pb_put_tag(&w, PB_FIELD_MAX, PB_WT_VARINT); /* f8 ff ff ff 0f */
	ck_assert_int_eq(pb_writer_finish(&w, &len), 0);
	ck_assert_uint_eq(len, 13);
	ck_assert_mem_eq(out, "\x0a\x12\x21\x2a\x40\x7d\x80\x01\xf8\xff\xff\xff\x0f",
			 13);
	ck_assert_uint_eq(pb_tag_size(15), 1);
	ck_assert_uint_eq(pb_tag_size(16), 2);
	ck_assert_uint_eq(pb_tag_size(PB_FIELD_MAX), 5);
	ck_assert_uint_eq(pb_len_field_size(1, 127), 1 + 1 + 127);
	ck_assert_uint_eq(pb_len_field_size(1, 128), 1 + 2 + 128);
}
END_TEST

START_TEST(writer_fields)
{
	uint8_t out[64];
	struct pb_writer w;
	size_t len;
	/* clang-format off */
	static const uint8_t expect[] = {
		0x0a, 0x03, 'a', 'b', 'c',                          /* 1: "abc" */
		0x10, 0x01,                                          /* 2: true */
		0x18, 0x96, 0x01,                                    /* 3: 150 */
		/* 3: -1, ten bytes */
		0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
		0x21, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf8, 0x3f, /* 4: 1.5 */
		0x2d, 0x78, 0x56, 0x34, 0x12,                        /* 5: fixed32 */
		0x32, 0x00,                                          /* 6: empty */
	};
	/* clang-format on */

	pb_writer_init(&w, out, sizeof(out));
	pb_put_bytes(&w, 1, "abc", 3);
	pb_put_bool(&w, 2, true);
	pb_put_int64(&w, 3, 150);
	pb_put_int64(&w, 3, -1);
	pb_put_double(&w, 4, 1.5);
	pb_put_fixed32(&w, 5, 0x12345678);
	pb_put_len_header(&w, 6, 0);
	ck_assert_int_eq(pb_writer_finish(&w, &len), 0);
	ck_assert_uint_eq(len, sizeof(expect));
	ck_assert_mem_eq(out, expect, sizeof(expect));
}
END_TEST

START_TEST(writer_overflow)
{
	/* Every capacity below the needed size overflows without touching
	 * the byte after cap, and len still reports the full size. */
	uint8_t out[32];
	size_t cap, len = 99;

	for (cap = 0; cap < 21; cap++) {
		struct pb_writer w;

		memset(out, 0xaa, sizeof(out));
		pb_writer_init(&w, out, cap);
		pb_put_bytes(&w, 1, "0123456789", 10); /* 12 bytes */
		pb_put_uint64(&w, 2, 1u << 20);        /* 1 + 3 */
		pb_put_fixed32(&w, 3, 7);              /* 1 + 4 -> 21 */
		ck_assert_uint_eq(w.len, 21);
		ck_assert(w.overflow);
		ck_assert_int_eq(pb_writer_finish(&w, &len), -ENOSPC);
		ck_assert_uint_eq(len, 99);
		for (size_t i = cap; i < sizeof(out); i++)
			ck_assert_uint_eq(out[i], 0xaa);
	}
	/* The exact size fits: its last byte is the one at cap - 1. */
	{
		struct pb_writer w;

		memset(out, 0xaa, sizeof(out));
		pb_writer_init(&w, out, 21);
		pb_put_bytes(&w, 1, "0123456789", 10);
		pb_put_uint64(&w, 2, 1u << 20);
		pb_put_fixed32(&w, 3, 7);
		ck_assert(!w.overflow);
		ck_assert_int_eq(pb_writer_finish(&w, &len), 0);
		ck_assert_uint_eq(len, 21);
		ck_assert_uint_eq(out[17], 7);
		ck_assert_uint_eq(out[21], 0xaa);
	}
	/* Measuring run: no buffer at all. */
	{
		struct pb_writer w;

		pb_writer_init(&w, NULL, 100);
		pb_put_bytes(&w, 1, "xyz", 3);
		ck_assert_uint_eq(w.len, 5);
		ck_assert(w.overflow);
	}
}
END_TEST

/* Parse all fields of buf into fs[]; returns the count or a negative errno. */
static int
read_fields(const uint8_t *buf, size_t len, struct pb_field *fs, int max)
{
	struct pb_reader r;
	int n = 0, ret;

	pb_reader_init(&r, buf, len);
	while (!pb_reader_eof(&r)) {
		ck_assert_int_lt(n, max);
		ret = pb_next_field(&r, &fs[n]);
		if (ret < 0)
			return ret;
		n++;
	}
	return n;
}

START_TEST(reader_roundtrip)
{
	uint8_t buf[128];
	struct pb_writer w;
	struct pb_field f[16];
	size_t len;

	pb_writer_init(&w, buf, sizeof(buf));
	pb_put_bytes(&w, 1, "hello", 5);
	pb_put_int64(&w, 3, INT64_MIN);
	pb_put_int64(&w, 3, -2);
	pb_put_uint64(&w, 1000, UINT64_MAX);
	pb_put_double(&w, 4, -0.25);
	pb_put_fixed64(&w, 9, 0x0102030405060708ull);
	pb_put_fixed32(&w, 10, 0xdeadbeef);
	pb_put_bool(&w, 2, false);
	pb_put_len_header(&w, PB_FIELD_MAX, 0);
	ck_assert_int_eq(pb_writer_finish(&w, &len), 0);

	ck_assert_int_eq(read_fields(buf, len, f, 16), 9);
	ck_assert_uint_eq(f[0].number, 1);
	ck_assert_int_eq(f[0].wt, PB_WT_LEN);
	ck_assert_uint_eq(f[0].len, 5);
	ck_assert_mem_eq(f[0].data, "hello", 5);
	ck_assert_int_eq(f[1].wt, PB_WT_VARINT);
	ck_assert(f[1].u64 == (uint64_t)INT64_MIN);
	ck_assert_int_eq((int64_t)f[2].u64, -2);
	ck_assert_uint_eq(f[3].number, 1000);
	ck_assert(f[3].u64 == UINT64_MAX);
	ck_assert_int_eq(f[4].wt, PB_WT_I64);
	ck_assert(pb_double_from_bits(f[4].u64) == -0.25);
	ck_assert(f[5].u64 == 0x0102030405060708ull);
	ck_assert_int_eq(f[6].wt, PB_WT_I32);
	ck_assert_uint_eq(f[6].u64, 0xdeadbeef);
	ck_assert_uint_eq(f[7].u64, 0);
	ck_assert_uint_eq(f[8].number, PB_FIELD_MAX);
	ck_assert_uint_eq(f[8].len, 0);
}
END_TEST

START_TEST(reader_negative_int64_10_bytes)
{
	/* int64 -1 is ten bytes on the wire: tag 0x18 + ff*9 01. */
	static const uint8_t m[] = {0x18, 0xff, 0xff, 0xff, 0xff, 0xff,
				    0xff, 0xff, 0xff, 0xff, 0x01};
	struct pb_field f;
	struct pb_reader r;

	pb_reader_init(&r, m, sizeof(m));
	ck_assert_int_eq(pb_next_field(&r, &f), 0);
	ck_assert_int_eq((int64_t)f.u64, -1);
	ck_assert(pb_reader_eof(&r));
}
END_TEST

START_TEST(reader_truncated_every_cut)
{
	/* A message of one field of each wire type; any cut that is not a
	 * field boundary must be rejected, never read past the end. */
	uint8_t buf[128];
	size_t bounds[8], nb = 0, len, cut;
	struct pb_writer w;
	struct pb_field f[8];

	pb_writer_init(&w, buf, sizeof(buf));
	bounds[nb++] = w.len;
	pb_put_uint64(&w, 1, 300);
	bounds[nb++] = w.len;
	pb_put_fixed64(&w, 2, 5);
	bounds[nb++] = w.len;
	pb_put_bytes(&w, 300, "a string long enough", 20);
	bounds[nb++] = w.len;
	pb_put_fixed32(&w, 4, 9);
	bounds[nb++] = w.len;
	pb_put_int64(&w, 5, -5);
	bounds[nb++] = w.len;
	ck_assert_int_eq(pb_writer_finish(&w, &len), 0);

	for (cut = 0; cut <= len; cut++) {
		int n = read_fields(buf, cut, f, 8);
		bool boundary = false;
		size_t i;

		for (i = 0; i < nb; i++)
			if (bounds[i] == cut) {
				boundary = true;
				ck_assert_int_eq(n, (int)i);
			}
		if (!boundary)
			ck_assert_msg(n == -EBADMSG, "cut %zu: %d", cut, n);
	}
}
END_TEST

START_TEST(reader_malformed)
{
	struct pb_reader r;
	struct pb_field f = {.number = 77};
	static const struct {
		const char *what;
		uint8_t b[12];
		size_t n;
		int err;
	} cases[] = {
		{"field 0", {0x00, 0x01}, 2, -EBADMSG},
		{"field 0 LEN", {0x02, 0x00}, 2, -EBADMSG},
		{"end group without start", {0x0c}, 1, -EBADMSG},
		{"group not ended", {0x0b, 0x08, 0x01}, 3, -EBADMSG},
		{"group ended by another", {0x0b, 0x14}, 2, -EBADMSG},
		{"group with a bad field", {0x0b, 0x0a, 0x05, 0x0c}, 4, -EBADMSG},
		{"wire type 6", {0x0e, 0x00}, 2, -EBADMSG},
		{"wire type 7", {0x0f, 0x00}, 2, -EBADMSG},
		{"LEN past end", {0x0a, 0x05, 'a', 'b', 'c', 'd'}, 6, -EBADMSG},
		{"LEN huge",
		 {0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 'x'},
		 11,
		 -EBADMSG},
		{"LEN 2^63",
		 {0x0a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01},
		 11,
		 -EBADMSG},
		{"I64 short", {0x09, 1, 2, 3, 4, 5, 6, 7}, 8, -EBADMSG},
		{"I32 short", {0x0d, 1, 2, 3}, 4, -EBADMSG},
		{"varint value cut", {0x08, 0x80}, 2, -EBADMSG},
		{"tag cut", {0x80}, 1, -EBADMSG},
		{"field > 2^29-1", {0xf8, 0xff, 0xff, 0xff, 0x1f, 0x00}, 6, -EBADMSG},
		{"field 2^29", {0x80, 0x80, 0x80, 0x80, 0x10, 0x00}, 6, -EBADMSG},
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pb_reader_init(&r, cases[i].b, cases[i].n);
		ck_assert_msg(pb_next_field(&r, &f) == cases[i].err, "%s",
			      cases[i].what);
		/* Nothing consumed, nothing filled in. */
		ck_assert(r.p == cases[i].b);
		ck_assert_uint_eq(f.number, 77);
	}
}
END_TEST

START_TEST(reader_skips_every_wire_type)
{
	/* Unknown fields of types 0/1/2/5 are stepped over exactly: the
	 * known field after each is found intact. */
	/* clang-format off */
	static const uint8_t m[] = {
		0xa8, 0x1f, 0x80, 0x80, 0x04,             /* 501 VARINT 65536 */
		0xb1, 0x1f, 1, 2, 3, 4, 5, 6, 7, 8,       /* 502 I64 */
		0xba, 0x1f, 0x03, 0x0a, 0x01, 'z',        /* 503 LEN, a message */
		0xc5, 0x1f, 9, 9, 9, 9,                   /* 504 I32 */
		0x0a, 0x02, 'o', 'k',                     /* 1 "ok" */
	};
	/* clang-format on */
	struct pb_field f[8];

	ck_assert_int_eq(read_fields(m, sizeof(m), f, 8), 5);
	ck_assert_uint_eq(f[0].number, 501);
	ck_assert_uint_eq(f[0].u64, 65536);
	ck_assert_uint_eq(f[1].number, 502);
	ck_assert(f[1].u64 == 0x0807060504030201ull);
	ck_assert_uint_eq(f[2].number, 503);
	ck_assert_uint_eq(f[2].len, 3);
	ck_assert_uint_eq(f[3].number, 504);
	ck_assert_uint_eq(f[4].number, 1);
	ck_assert_mem_eq(f[4].data, "ok", 2);
}
END_TEST

START_TEST(reader_skips_groups)
{
	/* Groups (wire types 3/4) are deprecated but still valid wire
	 * format: an unknown field may be one, and the protobuf libraries
	 * of other readers (Go's protowire, prost, C++) step over it, nested
	 * groups and all.  The field's data is the group's content. */
	/* clang-format off */
	static const uint8_t m[] = {
		0xab, 0x1f,                               /* 501 start group */
		0x08, 0x01,                               /*   1 VARINT 1 */
		0x0a, 0x02, 0x0c, 0x0c,                   /*   1 LEN (end tags) */
		0x13,                                     /*   2 start group */
		0x1b, 0x1c,                               /*     3 empty group */
		0x14,                                     /*   2 end group */
		0xac, 0x1f,                               /* 501 end group */
		0x0b, 0x0c,                               /* 1 empty group */
		0x0a, 0x02, 'o', 'k',                     /* 1 "ok" */
	};
	/* clang-format on */
	uint8_t deep[2 * 17];
	struct pb_field f[4];
	size_t i;

	ck_assert_int_eq(read_fields(m, sizeof(m), f, 4), 3);
	ck_assert_uint_eq(f[0].number, 501);
	ck_assert_int_eq(f[0].wt, PB_WT_SGROUP);
	ck_assert_ptr_eq(f[0].data, m + 2);
	ck_assert_uint_eq(f[0].len, 10);
	ck_assert_uint_eq(f[1].number, 1);
	ck_assert_int_eq(f[1].wt, PB_WT_SGROUP);
	ck_assert_uint_eq(f[1].len, 0);
	ck_assert_uint_eq(f[2].number, 1);
	ck_assert_int_eq(f[2].wt, PB_WT_LEN);
	ck_assert_mem_eq(f[2].data, "ok", 2);

	/* Nesting is bounded: 16 levels are stepped over, 17 are not. */
	for (i = 0; i < 17; i++) {
		deep[i] = 0x0b;
		deep[sizeof(deep) - 1 - i] = 0x0c;
	}
	ck_assert_int_eq(read_fields(deep + 1, sizeof(deep) - 2, f, 4), 1);
	ck_assert_int_eq(read_fields(deep, sizeof(deep), f, 4), -EBADMSG);
}
END_TEST

START_TEST(reader_nested)
{
	/* A LEN field opened as a sub-reader stays within its bounds even
	 * if the bytes after it would continue a field. */
	static const uint8_t m[] = {0x0a, 0x02, 0x08, 0x96, 0x01};
	struct pb_reader r, sub;
	struct pb_field f, g;

	pb_reader_init(&r, m, sizeof(m));
	ck_assert_int_eq(pb_next_field(&r, &f), 0);
	ck_assert_uint_eq(f.len, 2);
	pb_reader_init_field(&sub, &f);
	ck_assert_uint_eq(pb_reader_left(&sub), 2);
	ck_assert_int_eq(pb_next_field(&sub, &g), -EBADMSG);
	/* The outer reader then meets 0x01 = field 0. */
	ck_assert_int_eq(pb_next_field(&r, &f), -EBADMSG);
}
END_TEST

TEST_SUITE(protobuf_suite)
{
	Suite *s = suite_create("Protobuf wire format");
	TCase *tc;

	tc = tcase_create("Varints and tags");
	tcase_add_test(tc, varint_encode);
	tcase_add_test(tc, varint_decode);
	tcase_add_test(tc, varint_non_minimal);
	tcase_add_test(tc, varint_too_long);
	tcase_add_test(tc, tags);
	suite_add_tcase(s, tc);

	tc = tcase_create("Writer");
	tcase_add_test(tc, writer_fields);
	tcase_add_test(tc, writer_overflow);
	suite_add_tcase(s, tc);

	tc = tcase_create("Reader");
	tcase_add_test(tc, reader_roundtrip);
	tcase_add_test(tc, reader_negative_int64_10_bytes);
	tcase_add_test(tc, reader_truncated_every_cut);
	tcase_add_test(tc, reader_malformed);
	tcase_add_test(tc, reader_skips_every_wire_type);
	tcase_add_test(tc, reader_skips_groups);
	tcase_add_test(tc, reader_nested);
	suite_add_tcase(s, tc);

	return s;
}
