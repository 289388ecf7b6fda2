/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Protobuf wire format, the small part ctxshim needs: a writer that encodes
 * into a caller buffer (no allocation; lengths of nested messages are
 * computed by the caller first) and a bounds-checked reader for untrusted
 * input read out of another process.
 *
 * Wire format: tag = (field << 3) | wire type, as a varint.  Varints carry
 * 7 bits per byte, least significant group first, MSB = more bytes follow;
 * a 64-bit value takes at most 10 bytes.  LEN fields are a varint length
 * followed by that many bytes. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum pb_wire_type {
	PB_WT_VARINT = 0,
	PB_WT_I64 = 1,
	PB_WT_LEN = 2,
	PB_WT_SGROUP = 3, /* deprecated groups: stepped over by the reader */
	PB_WT_EGROUP = 4,
	PB_WT_I32 = 5,
};

#define PB_VARINT_MAX_BYTES 10
#define PB_FIELD_MAX        ((1u << 29) - 1)

/* ---- Writer ---- */

/* On overflow nothing more is stored, but len keeps counting, so a run with
 * cap 0 measures the encoded size. */
struct pb_writer {
	uint8_t *buf;
	size_t cap;
	size_t len;
	bool overflow;
};

void pb_writer_init(struct pb_writer *w, uint8_t *buf, size_t cap);
/* 0 and the encoded length, or -ENOSPC if anything did not fit. */
int pb_writer_finish(const struct pb_writer *w, size_t *len_out);

void pb_put_raw(struct pb_writer *w, const void *data, size_t len);
void pb_put_varint(struct pb_writer *w, uint64_t v);
void pb_put_tag(struct pb_writer *w, uint32_t field, enum pb_wire_type wt);
/* Tag and length of a LEN field whose len payload bytes the caller writes
 * next (a nested message of known size). */
void pb_put_len_header(struct pb_writer *w, uint32_t field, size_t len);
/* A complete LEN field: string, bytes or a pre-encoded message. */
void pb_put_bytes(struct pb_writer *w, uint32_t field, const void *data, size_t len);
/* VARINT field; int64 is two's complement, so negative values take 10 bytes. */
void pb_put_uint64(struct pb_writer *w, uint32_t field, uint64_t v);
void pb_put_int64(struct pb_writer *w, uint32_t field, int64_t v);
void pb_put_bool(struct pb_writer *w, uint32_t field, bool v);
void pb_put_fixed64(struct pb_writer *w, uint32_t field, uint64_t v);
void pb_put_fixed32(struct pb_writer *w, uint32_t field, uint32_t v);
void pb_put_double(struct pb_writer *w, uint32_t field, double v);

/* Encoded sizes, for computing nested message lengths up front. */
size_t pb_varint_size(uint64_t v);
size_t pb_tag_size(uint32_t field);
/* Tag + length varint + len bytes. */
size_t pb_len_field_size(uint32_t field, size_t len);

/* ---- Reader ---- */

struct pb_reader {
	const uint8_t *p;
	const uint8_t *end;
};

/* One field.  VARINT, I64 and I32 values are in u64 (I64/I32 decoded from
 * little-endian); a LEN field's bytes (a group's content) are
 * data[0..len), inside the input. */
struct pb_field {
	uint32_t number;
	enum pb_wire_type wt;
	uint64_t u64;
	const uint8_t *data;
	size_t len;
};

void pb_reader_init(struct pb_reader *r, const uint8_t *buf, size_t len);
/* A reader over the bytes of a LEN field (a nested message). */
void pb_reader_init_field(struct pb_reader *r, const struct pb_field *f);
bool pb_reader_eof(const struct pb_reader *r);
/* Unread bytes. */
size_t pb_reader_left(const struct pb_reader *r);

/* -EBADMSG if truncated, longer than 10 bytes, or above 64 bits. */
int pb_get_varint(struct pb_reader *r, uint64_t *v);
/* Read the next field and step over its value.  A group (wire type 3) is
 * stepped over up to its end tag, nested groups included; f->data and
 * f->len are then its content.  -EBADMSG for truncated or malformed input
 * (bad wire type, field 0, a length past the end, an end tag without its
 * start, groups nested too deep).  On error the reader and f are left
 * unchanged. */
int pb_next_field(struct pb_reader *r, struct pb_field *f);

double pb_double_from_bits(uint64_t bits);
