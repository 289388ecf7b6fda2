/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "protobuf.h"

void
pb_writer_init(struct pb_writer *w, uint8_t *buf, size_t cap)
{
	w->buf = buf;
	w->cap = buf ? cap : 0;
	w->len = 0;
	w->overflow = false;
}

int
pb_writer_finish(const struct pb_writer *w, size_t *len_out)
{
	if (w->overflow)
		return -ENOSPC;
	if (len_out)
		*len_out = w->len;
	return 0;
}

void
pb_put_raw(struct pb_writer *w, const void *data, size_t len)
{
	/* Once something did not fit, store nothing more: the output would
	 * have a hole.  Keep counting so the caller learns the size needed. */
	if (!w->overflow && (w->len > w->cap || w->cap - w->len < len))
		w->overflow = true;
	if (!w->overflow && len > 0)
		memcpy(w->buf + w->len, data, len);
	w->len += len;
}

size_t
pb_varint_size(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

void
pb_put_varint(struct pb_writer *w, uint64_t v)
{
	uint8_t tmp[PB_VARINT_MAX_BYTES];
	size_t n = 0;

	while (v >= 0x80) {
		tmp[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	tmp[n++] = (uint8_t)v;
	pb_put_raw(w, tmp, n);
}

size_t
pb_tag_size(uint32_t field)
{
	return pb_varint_size((uint64_t)field << 3);
}

void
pb_put_tag(struct pb_writer *w, uint32_t field, enum pb_wire_type wt)
{
	pb_put_varint(w, ((uint64_t)field << 3) | (uint64_t)wt);
}

size_t
pb_len_field_size(uint32_t field, size_t len)
{
	return pb_tag_size(field) + pb_varint_size(len) + len;
}

void
pb_put_len_header(struct pb_writer *w, uint32_t field, size_t len)
{
	pb_put_tag(w, field, PB_WT_LEN);
	pb_put_varint(w, len);
}

void
pb_put_bytes(struct pb_writer *w, uint32_t field, const void *data, size_t len)
{
	pb_put_len_header(w, field, len);
	pb_put_raw(w, data, len);
}

void
pb_put_uint64(struct pb_writer *w, uint32_t field, uint64_t v)
{
	pb_put_tag(w, field, PB_WT_VARINT);
	pb_put_varint(w, v);
}

void
pb_put_int64(struct pb_writer *w, uint32_t field, int64_t v)
{
	pb_put_uint64(w, field, (uint64_t)v);
}

void
pb_put_bool(struct pb_writer *w, uint32_t field, bool v)
{
	pb_put_uint64(w, field, v ? 1 : 0);
}

static void
pb_put_le(struct pb_writer *w, uint64_t v, size_t n)
{
	uint8_t tmp[8];
	size_t i;

	for (i = 0; i < n; i++)
		tmp[i] = (uint8_t)(v >> (8 * i));
	pb_put_raw(w, tmp, n);
}

void
pb_put_fixed64(struct pb_writer *w, uint32_t field, uint64_t v)
{
	pb_put_tag(w, field, PB_WT_I64);
	pb_put_le(w, v, 8);
}

void
pb_put_fixed32(struct pb_writer *w, uint32_t field, uint32_t v)
{
	pb_put_tag(w, field, PB_WT_I32);
	pb_put_le(w, v, 4);
}

void
pb_put_double(struct pb_writer *w, uint32_t field, double v)
{
	uint64_t bits;

	_Static_assert(sizeof(double) == sizeof(uint64_t), "IEEE-754 binary64");
	memcpy(&bits, &v, sizeof(bits));
	pb_put_fixed64(w, field, bits);
}

double
pb_double_from_bits(uint64_t bits)
{
	double d;

	memcpy(&d, &bits, sizeof(d));
	return d;
}

void
pb_reader_init(struct pb_reader *r, const uint8_t *buf, size_t len)
{
	r->p = buf;
	r->end = buf ? buf + len : buf;
}

void
pb_reader_init_field(struct pb_reader *r, const struct pb_field *f)
{
	pb_reader_init(r, f->data, f->len);
}

bool
pb_reader_eof(const struct pb_reader *r)
{
	return r->p >= r->end;
}

size_t
pb_reader_left(const struct pb_reader *r)
{
	return r->p < r->end ? (size_t)(r->end - r->p) : 0;
}

/* Decode a varint at p without moving the reader; returns its byte count
 * or a negative errno. */
static int
pb_peek_varint(const uint8_t *p, size_t avail, uint64_t *v)
{
	uint64_t x = 0;
	size_t i;

	for (i = 0; i < PB_VARINT_MAX_BYTES; i++) {
		uint8_t b;

		if (i >= avail)
			return -EBADMSG;
		b = p[i];
		/* The 10th byte holds bit 63 only; anything more is not a
		 * 64-bit value. */
		if (i == PB_VARINT_MAX_BYTES - 1 && b > 1)
			return -EBADMSG;
		x |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			*v = x;
			return (int)i + 1;
		}
	}
	return -EBADMSG;
}

int
pb_get_varint(struct pb_reader *r, uint64_t *v)
{
	uint64_t x;
	int n = pb_peek_varint(r->p, pb_reader_left(r), &x);

	if (n < 0)
		return n;
	r->p += n;
	*v = x;
	return 0;
}

static uint64_t
pb_get_le(const uint8_t *p, size_t n)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Levels of groups, one in another, that are stepped over; deeper nesting
 * is refused.  Only an unknown field can be a group in what we read. */
#define PB_GROUP_DEPTH_MAX 16

/* The field at p: its tag and, for wire types 0/1/2/5, its value (of a
 * group, the tag alone); *used = the bytes it takes.  Returns 0 or a
 * negative errno. */
static int
pb_field_at(const uint8_t *p, size_t avail, struct pb_field *f, size_t *used)
{
	const uint8_t *start = p;
	size_t left;
	uint64_t tag, v = 0;
	const uint8_t *data = NULL;
	size_t len = 0;
	int n;

	n = pb_peek_varint(p, avail, &tag);
	if (n < 0)
		return n;
	p += n;
	left = avail - (size_t)n;
	if ((tag >> 3) == 0 || (tag >> 3) > PB_FIELD_MAX)
		return -EBADMSG;

	switch (tag & 7) {
	case PB_WT_VARINT:
		n = pb_peek_varint(p, left, &v);
		if (n < 0)
			return n;
		p += n;
		break;
	case PB_WT_I64:
		if (left < 8)
			return -EBADMSG;
		v = pb_get_le(p, 8);
		p += 8;
		break;
	case PB_WT_I32:
		if (left < 4)
			return -EBADMSG;
		v = pb_get_le(p, 4);
		p += 4;
		break;
	case PB_WT_LEN:
		n = pb_peek_varint(p, left, &v);
		if (n < 0)
			return n;
		p += n;
		left -= (size_t)n;
		/* Compare in 64 bits: a huge length must not wrap a size_t. */
		if (v > (uint64_t)left)
			return -EBADMSG;
		data = p;
		len = (size_t)v;
		p += len;
		v = 0;
		break;
	case PB_WT_SGROUP:
	case PB_WT_EGROUP:
		break;
	default:
		return -EBADMSG;
	}

	f->number = (uint32_t)(tag >> 3);
	f->wt = (enum pb_wire_type)(tag & 7);
	f->u64 = v;
	f->data = data;
	f->len = len;
	*used = (size_t)(p - start);
	return 0;
}

int
pb_next_field(struct pb_reader *r, struct pb_field *f)
{
	const uint8_t *p = r->p;
	size_t avail = pb_reader_left(r), pos, n;
	uint32_t open[PB_GROUP_DEPTH_MAX];
	unsigned depth = 0;
	struct pb_field g;
	int ret;

	ret = pb_field_at(p, avail, &g, &pos);
	if (ret < 0)
		return ret;
	if (g.wt == PB_WT_EGROUP)
		return -EBADMSG;
	if (g.wt == PB_WT_SGROUP) {
		/* Groups are deprecated, but a writer may still send one as
		 * a field we do not know, and protobuf parsers step over it:
		 * up to the end tag of the same number, nested ones included.
		 * Its data is what lies between the two tags. */
		g.data = p + pos;
		open[depth++] = g.number;
		while (depth > 0) {
			struct pb_field in;

			ret = pb_field_at(p + pos, avail - pos, &in, &n);
			if (ret < 0)
				return ret;
			if (in.wt == PB_WT_SGROUP) {
				if (depth == PB_GROUP_DEPTH_MAX)
					return -EBADMSG;
				open[depth++] = in.number;
			} else if (in.wt == PB_WT_EGROUP) {
				if (in.number != open[depth - 1])
					return -EBADMSG;
				depth--;
				if (depth == 0)
					g.len = (size_t)(p + pos - g.data);
			}
			pos += n;
		}
	}
	*f = g;
	r->p = p + pos;
	return 0;
}
