/* SPDX-License-Identifier: Apache-2.0 */
/* The protobuf reader and the OTEP-4719 ProcessContext decoder over
 * arbitrary bytes (what ctxdump copies out of a target's OTEL_CTX
 * mapping), plus an encode/decode round trip of strings taken from the
 * input.  Oracles: the reader never points outside the input and leaves
 * itself unchanged on error; the decoder writes nothing on error, keeps its
 * counts within bounds, and what it accepted can be walked again without
 * error; encoded strings decode to themselves. */
#include "fuzz.h"

#include <errno.h>
#include <string.h>

#include "process-ctx.h"
#include "protobuf.h"

#define IN_RANGE(ptr, len, base, size)                                         \
	((len) == 0 || ((const uint8_t *)(ptr) >= (base) &&                    \
			(size_t)((const uint8_t *)(ptr) - (base)) <= (size) && \
			(len) <= (size) - (size_t)((const uint8_t *)(ptr) - (base))))

static void
walk_fields(const uint8_t *data, size_t size, unsigned depth)
{
	struct pb_reader r, saved;
	struct pb_field f;
	unsigned n = 0;

	pb_reader_init(&r, data, size);
	while (!pb_reader_eof(&r)) {
		int ret;

		saved = r;
		ret = pb_next_field(&r, &f);
		if (ret < 0) {
			FUZZ_CHECK(ret == -EBADMSG);
			FUZZ_CHECK(r.p == saved.p && r.end == saved.end);
			return;
		}
		FUZZ_CHECK(r.p > saved.p && r.p <= r.end);
		FUZZ_CHECK(f.number >= 1 && f.number <= PB_FIELD_MAX);
		/* a group: its content, between its tags */
		if (f.wt == PB_WT_SGROUP)
			FUZZ_CHECK(IN_RANGE(f.data, f.len, data, size) &&
				   f.data > saved.p && f.data + f.len < r.p);
		FUZZ_CHECK(f.wt != PB_WT_EGROUP);
		if (f.wt == PB_WT_LEN) {
			FUZZ_CHECK(IN_RANGE(f.data, f.len, data, size));
			/* try every LEN field as a nested message, not too deep */
			if (depth < 4 && n++ < 64)
				walk_fields(f.data, f.len, depth + 1);
		}
	}
	FUZZ_CHECK(pb_reader_left(&r) == 0);
}

static void
check_attr(const struct pctx_attr *a, const uint8_t *data, size_t size, unsigned depth)
{
	struct pctx_iter it;
	struct pctx_attr v;
	unsigned n = 0;
	int r;

	FUZZ_CHECK(IN_RANGE(a->key.ptr, a->key.len, data, size));
	FUZZ_CHECK(a->type >= PCTX_V_NONE && a->type <= PCTX_V_OTHER);
	if (a->type == PCTX_V_STRING || a->type == PCTX_V_BYTES ||
	    a->type == PCTX_V_ARRAY || a->type == PCTX_V_KVLIST)
		FUZZ_CHECK(IN_RANGE(a->str.ptr, a->str.len, data, size));
	if (a->type != PCTX_V_ARRAY && a->type != PCTX_V_KVLIST) {
		FUZZ_CHECK(pctx_iter_init(&it, a) == -EINVAL);
		return;
	}
	FUZZ_CHECK(pctx_iter_init(&it, a) == 0);
	/* validated by the decoder: walking it cannot fail */
	while ((r = pctx_iter_next(&it, &v)) == 0) {
		FUZZ_CHECK(++n <= size);
		if (depth < 20)
			check_attr(&v, data, size, depth + 1);
	}
	FUZZ_CHECK(r == -ENOENT);
}

/* Strings from the input (NUL-separated): resource k=v pairs, then the key
 * map; encode, decode, compare. */
static void
round_trip(const uint8_t *data, size_t size)
{
	static char text[4096 + 1];
	static uint8_t buf[16384];
	static struct pctx_decoded d;
	const char *str[128];
	struct pctx_kv kv[32];
	const char *keys[64];
	size_t n_str = 0, n_kv, n_keys = 0, len = 0, i, pos = 0;
	long want;
	int r;

	if (size > sizeof(text) - 1)
		size = sizeof(text) - 1;
	memcpy(text, data, size);
	text[size] = '\0';
	while (pos <= size && n_str < 128) {
		str[n_str++] = text + pos;
		pos += strlen(text + pos) + 1;
	}
	n_kv = n_str / 2 > 32 ? 32 : n_str / 2;
	for (i = 0; i < n_kv; i++)
		kv[i] = (struct pctx_kv){str[2 * i], str[2 * i + 1]};
	for (i = 2 * n_kv; i < n_str && n_keys < 64; i++)
		if (str[i][0])
			keys[n_keys++] = str[i];

	want = pctx_encoded_size(kv, n_kv, PCTX_SCHEMA_VERSION, keys, n_keys);
	FUZZ_CHECK(want > 0 && (size_t)want <= sizeof(buf));
	if (want > 1)
		FUZZ_CHECK(pctx_encode(buf, (size_t)want - 1, &len, kv, n_kv,
				       PCTX_SCHEMA_VERSION, keys, n_keys) == -ENOSPC);
	r = pctx_encode(buf, sizeof(buf), &len, kv, n_kv, PCTX_SCHEMA_VERSION, keys,
			n_keys);
	FUZZ_CHECK(r == 0 && len == (size_t)want);
	FUZZ_CHECK(pctx_decode(buf, len, &d) == 0);
	FUZZ_CHECK(d.n_resource == n_kv && d.n_resource_dropped == 0);
	for (i = 0; i < n_kv; i++) {
		FUZZ_CHECK(pctx_str_eq(d.resource[i].key, kv[i].key));
		FUZZ_CHECK(d.resource[i].type == PCTX_V_STRING);
		FUZZ_CHECK(pctx_str_eq(d.resource[i].str, kv[i].value));
	}
	FUZZ_CHECK(d.has_threadlocal);
	FUZZ_CHECK(pctx_str_eq(d.schema_version, PCTX_SCHEMA_VERSION));
	FUZZ_CHECK(d.n_keys == n_keys);
	for (i = 0; i < n_keys; i++)
		FUZZ_CHECK(pctx_str_eq(d.key_map[i], keys[i]));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct pctx_decoded d, poison;
	unsigned i;
	uint64_t v;
	int r;

	walk_fields(data, size, 0);
	{
		struct pb_reader rd;

		pb_reader_init(&rd, data, size);
		if (pb_get_varint(&rd, &v) == 0) {
			size_t used = (size_t)(rd.p - data);

			/* non-minimal encodings are accepted */
			FUZZ_CHECK(used >= 1 && used <= PB_VARINT_MAX_BYTES);
			FUZZ_CHECK(used >= pb_varint_size(v));
		}
	}

	memset(&poison, 0xa5, sizeof(poison));
	d = poison;
	r = pctx_decode(data, size, &d);
	if (r < 0) {
		FUZZ_CHECK(r == -EBADMSG || r == -EINVAL);
		FUZZ_CHECK(memcmp(&d, &poison, sizeof(d)) == 0);
	} else {
		FUZZ_CHECK(r == 0);
		FUZZ_CHECK(d.n_resource <= PCTX_MAX_ATTRS);
		FUZZ_CHECK(d.n_attrs <= PCTX_MAX_ATTRS);
		FUZZ_CHECK(d.n_keys <= PCTX_MAX_KEYS);
		for (i = 0; i < d.n_resource; i++)
			check_attr(&d.resource[i], data, size, 0);
		for (i = 0; i < d.n_attrs; i++)
			check_attr(&d.attrs[i], data, size, 0);
		for (i = 0; i < d.n_keys; i++)
			FUZZ_CHECK(IN_RANGE(d.key_map[i].ptr, d.key_map[i].len, data,
					    size));
		if (d.has_threadlocal)
			FUZZ_CHECK(IN_RANGE(d.schema_version.ptr, d.schema_version.len,
					    data, size));
		(void)pctx_find_resource(&d, "service.name");
		(void)pctx_find_attr(&d, PCTX_KEY_SCHEMA_VERSION);
	}
	round_trip(data, size);
	return 0;
}
