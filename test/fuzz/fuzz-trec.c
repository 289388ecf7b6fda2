/* SPDX-License-Identifier: Apache-2.0 */
/* The OTEP-4947 attribute decoder over arbitrary attrs_data (what ctxdump
 * copies out of a target thread), against a naive reference decoder; and
 * the encoder: entries built from the input decode back to what was added
 * (values capped on a UTF-8 boundary, entries that do not fit dropped
 * whole). */
#include "fuzz.h"

#include <errno.h>
#include <string.h>

#include "thread-record.h"

/* The OTEP's rules written as plainly as possible. */
static void
reference_decode(const uint8_t *data,
		 size_t size,
		 unsigned n_known,
		 struct trec_attrs_decoded *out)
{
	size_t pos = 0;
	unsigned i;

	memset(out, 0, sizeof(*out));
	while (pos < size) {
		uint8_t key, len;
		bool dup = false;

		if (pos + 2 > size || pos + 2 + data[pos + 1] > size) {
			out->truncated = true;
			break;
		}
		key = data[pos];
		len = data[pos + 1];
		for (i = 0; i < out->n; i++) {
			if (out->attr[i].key == key) {
				out->attr[i].len = len;
				out->attr[i].val = data + pos + 2;
				out->n_duplicates++;
				dup = true;
			}
		}
		if (!dup) {
			out->attr[out->n].key = key;
			out->attr[out->n].len = len;
			out->attr[out->n].val = data + pos + 2;
			out->n++;
			if (key >= n_known)
				out->n_unknown++;
		}
		pos += 2 + (size_t)len;
	}
}

static void
check_decode(const uint8_t *data, size_t size, unsigned n_known)
{
	static struct trec_attrs_decoded got, want;
	unsigned i;

	FUZZ_CHECK(trec_attrs_decode(data, size, n_known, &got) == 0);
	reference_decode(data, size, n_known, &want);
	FUZZ_CHECK(got.n == want.n);
	FUZZ_CHECK(got.truncated == want.truncated);
	FUZZ_CHECK(got.n_unknown == want.n_unknown);
	FUZZ_CHECK(got.n_duplicates == want.n_duplicates);
	for (i = 0; i < got.n; i++) {
		FUZZ_CHECK(got.attr[i].key == want.attr[i].key);
		FUZZ_CHECK(got.attr[i].len == want.attr[i].len);
		FUZZ_CHECK(got.attr[i].val == want.attr[i].val);
		FUZZ_CHECK(trec_attrs_find(&got, got.attr[i].key) == &got.attr[i]);
	}
}

/* Input after the first bytes: values separated by 0xff (0xff never occurs
 * in UTF-8), each added with the next key. */
static void
check_encode(const uint8_t *data, size_t size, size_t cap)
{
	static uint8_t buf[TREC_ATTRS_MAX + 64];
	static struct trec_attrs_decoded dec;
	struct {
		const uint8_t *val;
		size_t len;
		bool added;
	} in[256];
	struct trec_attr_writer w;
	size_t pos = 0, n_in = 0, i, k;
	unsigned dropped = 0, capped = 0;

	memset(buf, 0xee, sizeof(buf));
	trec_attrs_init(&w, buf, cap);
	FUZZ_CHECK(w.cap <= TREC_ATTRS_MAX && w.cap <= cap);
	while (pos <= size && n_in < 256) {
		const uint8_t *sep = memchr(data + pos, 0xff, size - pos);
		size_t len = sep ? (size_t)(sep - (data + pos)) : size - pos;
		size_t before = w.len;
		int r;

		in[n_in].val = data + pos;
		in[n_in].len = len;
		r = trec_attrs_add(&w, (uint8_t)n_in, data + pos, len);
		FUZZ_CHECK(r == 0 || r == -ENOSPC);
		in[n_in].added = r == 0;
		if (r == 0) {
			capped += len > TREC_VALUE_MAX;
			FUZZ_CHECK(w.len > before);
		} else {
			dropped++;
			FUZZ_CHECK(w.len == before);
		}
		n_in++;
		pos += len + 1;
	}
	FUZZ_CHECK(w.len <= w.cap);
	FUZZ_CHECK(w.dropped == dropped && w.capped == capped);
	/* nothing written past the writer's capacity */
	for (i = w.cap; i < sizeof(buf); i++)
		FUZZ_CHECK(buf[i] == 0xee);

	FUZZ_CHECK(trec_attrs_decode(buf, w.len, 256, &dec) == 0);
	FUZZ_CHECK(!dec.truncated && dec.n_duplicates == 0);
	for (i = k = 0; i < n_in; i++) {
		const struct trec_attr *a;

		if (!in[i].added) {
			FUZZ_CHECK(trec_attrs_find(&dec, (uint8_t)i) == NULL);
			continue;
		}
		a = &dec.attr[k++];
		FUZZ_CHECK(a->key == (uint8_t)i);
		FUZZ_CHECK(a->len <= TREC_VALUE_MAX);
		FUZZ_CHECK(memcmp(a->val, in[i].val, a->len) == 0);
		if (in[i].len <= TREC_VALUE_MAX) {
			FUZZ_CHECK(a->len == in[i].len);
			continue;
		}
		/* capped: at most 3 bytes before 255, on a character boundary
		 * when the value is UTF-8 */
		FUZZ_CHECK(a->len >= TREC_VALUE_MAX - 3);
		if (trec_utf8_valid(in[i].val, in[i].len))
			FUZZ_CHECK(trec_utf8_valid(a->val, a->len));
	}
	FUZZ_CHECK(k == dec.n);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = {data, size};
	unsigned n_known = fuzz_byte(&in);
	size_t cap = (size_t)fuzz_byte(&in) * 3;

	/* exactly as ctxdump would decode a copied attrs_data */
	check_decode(in.p, in.left, n_known);
	check_decode(data, size, 256);
	check_encode(in.p, in.left, cap);
	(void)trec_utf8_valid(data, size);
	return 0;
}
