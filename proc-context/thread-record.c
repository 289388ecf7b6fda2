/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "thread-record.h"

/* The header's own assertions need C11 or C++11; the library is always
 * built as C11, so check the ABI here unconditionally. */
_Static_assert(offsetof(struct otel_thread_ctx_record, trace_id) == 0, "trace_id");
_Static_assert(offsetof(struct otel_thread_ctx_record, span_id) == 16, "span_id");
_Static_assert(offsetof(struct otel_thread_ctx_record, valid) == 24, "valid");
_Static_assert(offsetof(struct otel_thread_ctx_record, trace_flags) == 25,
	       "trace_flags");
_Static_assert(offsetof(struct otel_thread_ctx_record, attrs_data_size) == 26,
	       "attrs_data_size");
_Static_assert(offsetof(struct otel_thread_ctx_record, attrs_data) == 28, "attrs_data");
_Static_assert(sizeof(struct otel_thread_ctx_record) == TREC_HEADER_SIZE,
	       "header size");
_Static_assert(_Alignof(struct otel_thread_ctx_record) == 2, "2-byte alignment");
_Static_assert(TREC_HEADER_SIZE + TREC_ATTRS_MAX == TREC_MAX_SIZE, "640-byte record");
_Static_assert(TREC_ATTRS_MAX <= UINT16_MAX, "attrs_data_size is a uint16");

static inline bool
trec_is_continuation(uint8_t c)
{
	return (c & 0xc0) == 0x80;
}

/* Length to keep of a value longer than TREC_VALUE_MAX: 255 bytes, moved
 * back to the start of the character that straddles the cut.  A UTF-8
 * character has at most 3 continuation bytes; if there are more, the input
 * is not UTF-8 and a plain byte cut is as good as anything. */
static size_t
trec_cap_utf8(const uint8_t *val)
{
	size_t n = TREC_VALUE_MAX;
	unsigned back;

	for (back = 0; back < 3 && trec_is_continuation(val[n]); back++)
		n--;
	if (trec_is_continuation(val[n]))
		return TREC_VALUE_MAX;
	return n;
}

void
trec_attrs_init(struct trec_attr_writer *w, uint8_t *buf, size_t cap)
{
	w->buf = buf;
	w->cap = cap < TREC_ATTRS_MAX ? cap : TREC_ATTRS_MAX;
	w->len = 0;
	w->dropped = 0;
	w->capped = 0;
}

int
trec_attrs_add(struct trec_attr_writer *w, uint8_t key, const void *val, size_t len)
{
	const uint8_t *v = val;
	size_t n = len, pos, cap;
	uint8_t *dst;

	if (!w || (!val && len > 0))
		return -EINVAL;
	/* Fast path: a value that needs no capping (the UTF-8 boundary walk
	 * only runs for values over 255 bytes).  The writer's fields are read
	 * once into locals: stores through the uint8_t buffer may alias
	 * anything, and reloading them after each store cost a third of this
	 * function on the request path (B4). */
	pos = w->len;
	cap = w->cap;
	if (__builtin_expect(n > TREC_VALUE_MAX, 0))
		n = trec_cap_utf8(v);
	/* Drop, never cut to fit: a reader must not see half a value that
	 * looks complete. */
	if (pos > cap || cap - pos < TREC_ENTRY_OVERHEAD + n) {
		w->dropped++;
		return -ENOSPC;
	}
	dst = w->buf + pos;
	dst[0] = key;
	dst[1] = (uint8_t)n;
	if (n > 0)
		memcpy(dst + TREC_ENTRY_OVERHEAD, v, n);
	w->len = pos + TREC_ENTRY_OVERHEAD + n;
	if (__builtin_expect(n != len, 0))
		w->capped++;
	return 0;
}

int
trec_attrs_decode(const uint8_t *data,
		  size_t size,
		  unsigned n_known_keys,
		  struct trec_attrs_decoded *out)
{
	/* slot[key] = 1 + position in out->attr, 0 = not seen yet. */
	uint16_t slot[256];
	size_t pos = 0;

	if (!out || (!data && size > 0))
		return -EINVAL;

	memset(slot, 0, sizeof(slot));
	out->n = 0;
	out->truncated = false;
	out->n_unknown = 0;
	out->n_duplicates = 0;

	while (pos < size) {
		struct trec_attr a;

		/* The OTEP: stop if the rest cannot hold a complete entry. */
		if (size - pos < TREC_ENTRY_OVERHEAD ||
		    size - pos - TREC_ENTRY_OVERHEAD < data[pos + 1]) {
			out->truncated = true;
			break;
		}
		a.key = data[pos];
		a.len = data[pos + 1];
		a.val = data + pos + TREC_ENTRY_OVERHEAD;
		pos += TREC_ENTRY_OVERHEAD + a.len;

		if (slot[a.key]) {
			/* The OTEP: the last occurrence of a key wins. */
			out->attr[slot[a.key] - 1] = a;
			out->n_duplicates++;
			continue;
		}
		out->attr[out->n] = a;
		slot[a.key] = (uint16_t)(++out->n);
		if (a.key >= n_known_keys)
			out->n_unknown++;
	}
	return 0;
}

const struct trec_attr *
trec_attrs_find(const struct trec_attrs_decoded *d, uint8_t key)
{
	unsigned i;

	for (i = 0; d && i < d->n; i++)
		if (d->attr[i].key == key)
			return &d->attr[i];
	return NULL;
}

bool
trec_utf8_valid(const uint8_t *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		uint8_t c = s[i];
		uint8_t lo = 0x80, hi = 0xbf;
		size_t need, k;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			need = 1;
		} else if (c >= 0xe0 && c <= 0xef) {
			need = 2;
			/* No overlong forms (E0 80..9F), no surrogates (ED A0..BF). */
			if (c == 0xe0)
				lo = 0xa0;
			else if (c == 0xed)
				hi = 0x9f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			need = 3;
			/* No overlong forms (F0 80..8F), nothing above U+10FFFF. */
			if (c == 0xf0)
				lo = 0x90;
			else if (c == 0xf4)
				hi = 0x8f;
		} else {
			return false;
		}
		if (len - i - 1 < need)
			return false;
		if (s[i + 1] < lo || s[i + 1] > hi)
			return false;
		for (k = 2; k <= need; k++)
			if (!trec_is_continuation(s[i + k]))
				return false;
		i += need + 1;
	}
	return true;
}
