/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "proffile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void
put_le(uint8_t *p, uint64_t v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t
get_le(const uint8_t *p, size_t n)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

int
pfile_w_open(struct pfile_w *w, FILE *f)
{
	uint8_t h[PFILE_HEADER_SIZE];

	memset(w, 0, sizeof(*w));
	w->f = f;
	memcpy(h, PFILE_MAGIC, 8);
	put_le(h + 8, PFILE_VERSION, 2);
	put_le(h + 10, PFILE_HEADER_SIZE, 2);
	put_le(h + 12, 0, 4);
	/* bytes: what the stream took (not what failed) */
	w->bytes = fwrite(h, 1, sizeof(h), f);
	if (w->bytes != sizeof(h))
		w->err = -(errno ? errno : EIO);
	return w->err;
}

void
pfile_w_close(struct pfile_w *w)
{
	free(w->buf);
	w->buf = NULL;
	w->len = w->cap = 0;
}

static bool
grow(struct pfile_w *w, size_t more)
{
	size_t cap;
	uint8_t *nb;

	if (w->err)
		return false;
	if (w->len + more <= w->cap)
		return true;
	if (w->len + more > PFILE_PAYLOAD_MAX + 4u) {
		w->err = -E2BIG;
		return false;
	}
	cap = w->cap ? w->cap : 4096;
	while (cap < w->len + more)
		cap *= 2;
	nb = realloc(w->buf, cap);
	if (!nb) {
		w->err = -ENOMEM;
		return false;
	}
	w->buf = nb;
	w->cap = cap;
	return true;
}

void
pfile_w_begin(struct pfile_w *w, unsigned type)
{
	w->type = type;
	w->len = 0;
	/* room for the prefix, filled in by pfile_w_end() */
	if (grow(w, 4))
		w->len = 4;
}

void
pfile_w_u(struct pfile_w *w, uint64_t v)
{
	if (!grow(w, 10))
		return;
	do {
		uint8_t b = v & 0x7f;

		v >>= 7;
		w->buf[w->len++] = (uint8_t)(b | (v ? 0x80 : 0));
	} while (v);
}

void
pfile_w_raw(struct pfile_w *w, const void *p, size_t n)
{
	if (!n || !grow(w, n))
		return;
	memcpy(w->buf + w->len, p, n);
	w->len += n;
}

void
pfile_w_bytes(struct pfile_w *w, const void *p, size_t n)
{
	pfile_w_u(w, n);
	pfile_w_raw(w, p, n);
}

int
pfile_w_end(struct pfile_w *w)
{
	size_t payload, put;

	if (w->err)
		return w->err;
	payload = w->len - 4;
	if (payload > PFILE_PAYLOAD_MAX)
		return w->err = -E2BIG;
	put_le(w->buf, (uint64_t)w->type | (uint64_t)payload << 8, 4);
	put = fwrite(w->buf, 1, w->len, w->f);
	if (put != w->len)
		w->err = -(errno ? errno : EIO);
	w->bytes += put;
	w->len = 0;
	return w->err;
}

uint64_t
pfile_r_u(struct pfile_r *r)
{
	uint64_t v = 0;
	unsigned shift = 0;

	while (!r->bad) {
		uint8_t b;

		if (r->p >= r->end || shift > 63) {
			r->bad = true;
			break;
		}
		b = *r->p++;
		/* The 10th byte holds bit 63 only: more is not a u64. */
		if (shift == 63 && b > 1) {
			r->bad = true;
			break;
		}
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
		shift += 7;
	}
	return 0;
}

uint32_t
pfile_r_u32(struct pfile_r *r)
{
	uint64_t v = pfile_r_u(r);

	if (v > UINT32_MAX) {
		r->bad = true;
		return 0;
	}
	return (uint32_t)v;
}

bool
pfile_r_raw(struct pfile_r *r, void *out, size_t n)
{
	if (r->bad || (size_t)(r->end - r->p) < n) {
		r->bad = true;
		memset(out, 0, n);
		return false;
	}
	memcpy(out, r->p, n);
	r->p += n;
	return true;
}

bool
pfile_r_bytes(struct pfile_r *r, const uint8_t **p, size_t *n)
{
	uint64_t l = pfile_r_u(r);

	if (r->bad || l > (uint64_t)(r->end - r->p)) {
		r->bad = true;
		*p = NULL;
		*n = 0;
		return false;
	}
	*p = r->p;
	*n = (size_t)l;
	r->p += l;
	return true;
}

/* pfile_next(): the first size of its buffer, and how much it is read
 * ahead of what came. */
#define PFILE_READ_STEP (64u << 10)

/* Why fewer bytes came than asked for: the end of the file (a short
 * file, -EBADMSG) or a failed read (its errno), which must not pass for
 * the end: `report /tmp` is "Is a directory", and an I/O error in the
 * middle of a file is not a recording cut short. */
static int
read_error(FILE *f)
{
	if (ferror(f))
		return -(errno ? errno : EIO);
	return -EBADMSG;
}

int
pfile_read_header(FILE *f)
{
	uint8_t h[PFILE_HEADER_SIZE];
	size_t hs, n;

	n = fread(h, 1, 8, f);
	/* no byte at all: most often a recorder that failed before its
	 * header (record -o - | report -), worth telling from a file of
	 * something else */
	if (n == 0 && !ferror(f))
		return -ENODATA;
	if (n != 8)
		return read_error(f);
	if (memcmp(h, PFILE_MAGIC, 8) != 0)
		return -EBADMSG;
	if (fread(h + 8, 1, 8, f) != 8)
		return read_error(f);
	/* versions count from 1: a 0 is no recorder's, not a newer one's */
	if (get_le(h + 8, 2) == 0)
		return -EBADMSG;
	if (get_le(h + 8, 2) != PFILE_VERSION)
		return -EPROTONOSUPPORT;
	hs = (size_t)get_le(h + 10, 2);
	if (hs < PFILE_HEADER_SIZE)
		return -EBADMSG;
	/* a longer header of a later minor revision: skip the rest */
	for (n = PFILE_HEADER_SIZE; n < hs; n++)
		if (fgetc(f) == EOF)
			return read_error(f);
	return (int)hs;
}

int
pfile_next(FILE *f, unsigned *type, uint8_t **buf, size_t *cap, size_t *len)
{
	uint8_t pre[4];
	size_t n, got;
	uint32_t v;
	bool magic;

	got = fread(pre, 1, 4, f);
	if (got < 4 && ferror(f))
		return read_error(f);
	if (got == 0)
		return 0;
	if (got < 4)
		return -EBADMSG;
	v = (uint32_t)get_le(pre, 4);
	*type = v & 0xff;
	n = v >> 8;
	/* The header of another recording where a record starts: files
	 * joined (cat a.prof b.prof).  Taken for a record, its magic is a
	 * record of 5 MiB that skips into the middle of the second
	 * recording, whose records would then pass for the first one's. */
	magic = memcmp(pre, PFILE_MAGIC, 4) == 0;
	/* The buffer grows with what was read, not with what the length
	 * says: a damaged length (up to 16 MiB) at the end of a file costs
	 * what the file holds, and a report under a memory limit reads
	 * what is whole before it. */
	got = 0;
	do {
		size_t step;

		if (*cap < n + 1 && got + 1 >= *cap) {
			size_t nc = *cap < PFILE_READ_STEP ? PFILE_READ_STEP : *cap * 2;
			uint8_t *nb;

			nc = nc < n + 1 ? nc : n + 1;
			nb = realloc(*buf, nc);
			if (!nb)
				return -ENOMEM;
			*buf = nb;
			*cap = nc;
		}
		step = *cap - 1 - got < n - got ? *cap - 1 - got : n - got;
		if (step) {
			size_t r = fread(*buf + got, 1, step, f);

			if (magic && got == 0 && r >= 4 &&
			    memcmp(*buf, &PFILE_MAGIC[4], 4) == 0)
				return PFILE_NEXT_HEADER;
			if (r != step)
				return read_error(f);
		}
		got += step;
	} while (got < n); /* once at least: a buffer for an empty record */
	*len = n;
	return 1;
}
