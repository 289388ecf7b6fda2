/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "process-ctx.h"
#include "protobuf.h"

/* Field numbers (opentelemetry-proto processcontext/v1development,
 * common/v1, resource/v1). */
enum {
	PCTX_F_PC_RESOURCE = 1,    /* ProcessContext.resource */
	PCTX_F_PC_ATTRIBUTES = 2,  /* ProcessContext.attributes (extra_attributes) */
	PCTX_F_RES_ATTRIBUTES = 1, /* Resource.attributes */
	PCTX_F_KV_KEY = 1,
	PCTX_F_KV_VALUE = 2,
	PCTX_F_AV_STRING = 1,
	PCTX_F_AV_BOOL = 2,
	PCTX_F_AV_INT = 3,
	PCTX_F_AV_DOUBLE = 4,
	PCTX_F_AV_ARRAY = 5,
	PCTX_F_AV_KVLIST = 6,
	PCTX_F_AV_BYTES = 7,
	PCTX_F_AV_STRINDEX = 8,
	PCTX_F_ARRAY_VALUES = 1, /* ArrayValue.values and KeyValueList.values */
};

/* Nesting depth of array/kvlist values a payload may use (the key map is
 * depth 1).  The limit only bounds the recursion on hostile input. */
#define PCTX_MAX_DEPTH 16

#define PCTX_DELETED_SUFFIX " (deleted)"

/* ---- maps discovery ---- */

enum pctx_map_kind
pctx_map_name_kind(const char *path, size_t len)
{
	static const struct {
		const char *name;
		size_t len;
		enum pctx_map_kind kind;
	} names[] = {
		{"[anon_shmem:OTEL_CTX]", sizeof("[anon_shmem:OTEL_CTX]") - 1,
		 PCTX_MAP_ANON_SHMEM},
		{"[anon:OTEL_CTX]", sizeof("[anon:OTEL_CTX]") - 1, PCTX_MAP_ANON},
		{"/memfd:OTEL_CTX", sizeof("/memfd:OTEL_CTX") - 1, PCTX_MAP_MEMFD},
	};
	const size_t sfx = sizeof(PCTX_DELETED_SUFFIX) - 1;
	size_t i;

	if (!path)
		return PCTX_MAP_NONE;
	/* Exact names only: a prefix match would accept another product's
	 * "/memfd:OTEL_CTX_BACKUP" as ours. */
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (len < names[i].len ||
		    memcmp(path, names[i].name, names[i].len) != 0)
			continue;
		if (len == names[i].len)
			return names[i].kind;
		if (len == names[i].len + sfx &&
		    memcmp(path + names[i].len, PCTX_DELETED_SUFFIX, sfx) == 0)
			return names[i].kind;
	}
	return PCTX_MAP_NONE;
}

/* ---- encoder ---- */

/* Size of an AnyValue{string_value} holding n bytes. */
static size_t
pctx_av_string_size(size_t n)
{
	return pb_len_field_size(PCTX_F_AV_STRING, n);
}

/* Size of a KeyValue with a key of klen bytes and an AnyValue of av bytes. */
static size_t
pctx_kv_size(size_t klen, size_t av)
{
	return pb_len_field_size(PCTX_F_KV_KEY, klen) +
	       pb_len_field_size(PCTX_F_KV_VALUE, av);
}

static void
pctx_put_kv_string(struct pb_writer *w,
		   uint32_t field,
		   const char *key,
		   const char *val)
{
	size_t klen = strlen(key), vlen = strlen(val);
	size_t av = pctx_av_string_size(vlen);

	pb_put_len_header(w, field, pctx_kv_size(klen, av));
	pb_put_bytes(w, PCTX_F_KV_KEY, key, klen);
	pb_put_len_header(w, PCTX_F_KV_VALUE, av);
	pb_put_bytes(w, PCTX_F_AV_STRING, val, vlen);
}

static void
pctx_put_key_map(struct pb_writer *w, const char *const *key_map, size_t n_keys)
{
	size_t klen = strlen(PCTX_KEY_ATTRIBUTE_KEY_MAP), arr = 0, av, i;

	for (i = 0; i < n_keys; i++)
		arr += pb_len_field_size(PCTX_F_ARRAY_VALUES,
					 pctx_av_string_size(strlen(key_map[i])));
	av = pb_len_field_size(PCTX_F_AV_ARRAY, arr);

	pb_put_len_header(w, PCTX_F_PC_ATTRIBUTES, pctx_kv_size(klen, av));
	pb_put_bytes(w, PCTX_F_KV_KEY, PCTX_KEY_ATTRIBUTE_KEY_MAP, klen);
	pb_put_len_header(w, PCTX_F_KV_VALUE, av);
	pb_put_len_header(w, PCTX_F_AV_ARRAY, arr);
	for (i = 0; i < n_keys; i++) {
		size_t n = strlen(key_map[i]);

		pb_put_len_header(w, PCTX_F_ARRAY_VALUES, pctx_av_string_size(n));
		pb_put_bytes(w, PCTX_F_AV_STRING, key_map[i], n);
	}
}

/* The resource of either input kind, read one entry at a time. */
struct pctx_res_in {
	const struct pctx_kv *kv;
	const struct pctx_kv_typed *typed;
	size_t n;
};

static struct pctx_kv_typed
pctx_res_entry(const struct pctx_res_in *in, size_t i)
{
	struct pctx_kv_typed e = {0};

	if (in->typed)
		return in->typed[i];
	e.key = in->kv[i].key;
	e.type = PCTX_V_STRING;
	e.str = in->kv[i].value;
	return e;
}

/* Size of the AnyValue of e (valid). */
static size_t
pctx_av_size(const struct pctx_kv_typed *e)
{
	if (e->type == PCTX_V_INT) /* int64: two's complement, as uint64 */
		return pb_tag_size(PCTX_F_AV_INT) + pb_varint_size((uint64_t)e->i);
	return pctx_av_string_size(strlen(e->str));
}

static void
pctx_put_resource_kv(struct pb_writer *w, const struct pctx_kv_typed *e)
{
	size_t klen = strlen(e->key), av = pctx_av_size(e);

	if (e->type != PCTX_V_INT) {
		pctx_put_kv_string(w, PCTX_F_RES_ATTRIBUTES, e->key, e->str);
		return;
	}
	pb_put_len_header(w, PCTX_F_RES_ATTRIBUTES, pctx_kv_size(klen, av));
	pb_put_bytes(w, PCTX_F_KV_KEY, e->key, klen);
	pb_put_len_header(w, PCTX_F_KV_VALUE, av);
	pb_put_int64(w, PCTX_F_AV_INT, e->i);
}

static int
pctx_write(struct pb_writer *w,
	   const struct pctx_res_in *in,
	   const char *schema_version,
	   const char *const *key_map,
	   size_t n_keys)
{
	size_t res = 0, i;

	if (in->n > 0 && !in->kv && !in->typed)
		return -EINVAL;
	for (i = 0; i < in->n; i++) {
		struct pctx_kv_typed e = pctx_res_entry(in, i);

		if (!e.key || (e.type != PCTX_V_STRING && e.type != PCTX_V_INT) ||
		    (e.type == PCTX_V_STRING && !e.str))
			return -EINVAL;
	}
	if (schema_version) {
		if (n_keys > PCTX_MAX_KEYS || (n_keys > 0 && !key_map))
			return -EINVAL;
		/* Readers (the eBPF profiler) reject empty key names. */
		for (i = 0; i < n_keys; i++)
			if (!key_map[i] || !key_map[i][0])
				return -EINVAL;
	}

	/* Same field order as the sig-profiling reference writer, so the
	 * bytes match its published payloads. */
	if (in->n > 0) {
		for (i = 0; i < in->n; i++) {
			struct pctx_kv_typed e = pctx_res_entry(in, i);
			size_t kv = pctx_kv_size(strlen(e.key), pctx_av_size(&e));

			res += pb_len_field_size(PCTX_F_RES_ATTRIBUTES, kv);
		}
		pb_put_len_header(w, PCTX_F_PC_RESOURCE, res);
		for (i = 0; i < in->n; i++) {
			struct pctx_kv_typed e = pctx_res_entry(in, i);

			pctx_put_resource_kv(w, &e);
		}
	}
	if (schema_version) {
		pctx_put_kv_string(w, PCTX_F_PC_ATTRIBUTES, PCTX_KEY_SCHEMA_VERSION,
				   schema_version);
		pctx_put_key_map(w, key_map, n_keys);
	}
	return 0;
}

static int
pctx_encode_in(uint8_t *out,
	       size_t cap,
	       size_t *len_out,
	       const struct pctx_res_in *in,
	       const char *schema_version,
	       const char *const *key_map,
	       size_t n_keys)
{
	struct pb_writer w;
	int r;

	if (!len_out || (!out && cap > 0))
		return -EINVAL;
	pb_writer_init(&w, out, cap);
	r = pctx_write(&w, in, schema_version, key_map, n_keys);
	if (r < 0)
		return r;
	return pb_writer_finish(&w, len_out);
}

static long
pctx_encoded_size_in(const struct pctx_res_in *in,
		     const char *schema_version,
		     const char *const *key_map,
		     size_t n_keys)
{
	struct pb_writer w;
	int r;

	/* A writer without a buffer stores nothing but counts every byte. */
	pb_writer_init(&w, NULL, 0);
	r = pctx_write(&w, in, schema_version, key_map, n_keys);
	if (r < 0)
		return r;
	return (long)w.len;
}

int
pctx_encode(uint8_t *out,
	    size_t cap,
	    size_t *len_out,
	    const struct pctx_kv *resource,
	    size_t n_resource,
	    const char *schema_version,
	    const char *const *key_map,
	    size_t n_keys)
{
	const struct pctx_res_in in = {resource, NULL, n_resource};

	return pctx_encode_in(out, cap, len_out, &in, schema_version, key_map, n_keys);
}

long
pctx_encoded_size(const struct pctx_kv *resource,
		  size_t n_resource,
		  const char *schema_version,
		  const char *const *key_map,
		  size_t n_keys)
{
	const struct pctx_res_in in = {resource, NULL, n_resource};

	return pctx_encoded_size_in(&in, schema_version, key_map, n_keys);
}

int
pctx_encode_typed(uint8_t *out,
		  size_t cap,
		  size_t *len_out,
		  const struct pctx_kv_typed *resource,
		  size_t n_resource,
		  const char *schema_version,
		  const char *const *key_map,
		  size_t n_keys)
{
	const struct pctx_res_in in = {NULL, resource, n_resource};

	return pctx_encode_in(out, cap, len_out, &in, schema_version, key_map, n_keys);
}

long
pctx_encoded_size_typed(const struct pctx_kv_typed *resource,
			size_t n_resource,
			const char *schema_version,
			const char *const *key_map,
			size_t n_keys)
{
	const struct pctx_res_in in = {NULL, resource, n_resource};

	return pctx_encoded_size_in(&in, schema_version, key_map, n_keys);
}

/* ---- decoder ---- */

static int
pctx_parse_value(const uint8_t *p, size_t len, struct pctx_attr *a, unsigned depth);
static int
pctx_parse_kv(const uint8_t *p, size_t len, struct pctx_attr *a, unsigned depth);

static void
pctx_attr_clear_value(struct pctx_attr *a)
{
	a->type = PCTX_V_NONE;
	a->str.ptr = NULL;
	a->str.len = 0;
	a->i = 0;
	a->d = 0.0;
	a->b = false;
}

/* Check that an ArrayValue (elements are AnyValue) or a KeyValueList
 * (entries are KeyValue) is well-formed, nested values included. */
static int
pctx_check_list(const uint8_t *p, size_t len, bool kvlist, unsigned depth)
{
	struct pb_reader r;
	struct pb_field f;
	struct pctx_attr tmp;
	int ret;

	if (depth > PCTX_MAX_DEPTH)
		return -EBADMSG;
	pb_reader_init(&r, p, len);
	while (!pb_reader_eof(&r)) {
		ret = pb_next_field(&r, &f);
		if (ret < 0)
			return ret;
		if (f.number != PCTX_F_ARRAY_VALUES || f.wt != PB_WT_LEN)
			continue;
		if (kvlist)
			ret = pctx_parse_kv(f.data, f.len, &tmp, depth);
		else
			ret = pctx_parse_value(f.data, f.len, &tmp, depth);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* AnyValue.  It is a oneof: the last value field on the wire wins.  A known
 * field number with an unexpected wire type is skipped like an unknown
 * field. */
static int
pctx_parse_value(const uint8_t *p, size_t len, struct pctx_attr *a, unsigned depth)
{
	struct pb_reader r;
	struct pb_field f;
	int ret;

	pctx_attr_clear_value(a);
	pb_reader_init(&r, p, len);
	while (!pb_reader_eof(&r)) {
		ret = pb_next_field(&r, &f);
		if (ret < 0)
			return ret;
		switch (f.wt) {
		case PB_WT_LEN:
			if (f.number == PCTX_F_AV_ARRAY ||
			    f.number == PCTX_F_AV_KVLIST) {
				ret = pctx_check_list(f.data, f.len,
						      f.number == PCTX_F_AV_KVLIST,
						      depth + 1);
				if (ret < 0)
					return ret;
			} else if (f.number != PCTX_F_AV_STRING &&
				   f.number != PCTX_F_AV_BYTES) {
				continue;
			}
			pctx_attr_clear_value(a);
			a->str.ptr = f.data;
			a->str.len = f.len;
			a->type = f.number == PCTX_F_AV_STRING  ? PCTX_V_STRING
				  : f.number == PCTX_F_AV_BYTES ? PCTX_V_BYTES
				  : f.number == PCTX_F_AV_ARRAY ? PCTX_V_ARRAY
								: PCTX_V_KVLIST;
			break;
		case PB_WT_VARINT:
			if (f.number == PCTX_F_AV_BOOL) {
				pctx_attr_clear_value(a);
				a->type = PCTX_V_BOOL;
				a->b = f.u64 != 0;
			} else if (f.number == PCTX_F_AV_INT ||
				   f.number == PCTX_F_AV_STRINDEX) {
				pctx_attr_clear_value(a);
				a->type = f.number == PCTX_F_AV_INT ? PCTX_V_INT
								    : PCTX_V_OTHER;
				/* int64 is two's complement on the wire. */
				a->i = (int64_t)f.u64;
			}
			break;
		case PB_WT_I64:
			if (f.number == PCTX_F_AV_DOUBLE) {
				pctx_attr_clear_value(a);
				a->type = PCTX_V_DOUBLE;
				a->d = pb_double_from_bits(f.u64);
			}
			break;
		default:
			break;
		}
	}
	return 0;
}

/* KeyValue{key = 1, value = 2}; key_strindex (3) and unknown fields are
 * skipped.  Without a value field the type stays PCTX_V_NONE. */
static int
pctx_parse_kv(const uint8_t *p, size_t len, struct pctx_attr *a, unsigned depth)
{
	struct pb_reader r;
	struct pb_field f;
	int ret;

	a->key.ptr = NULL;
	a->key.len = 0;
	pctx_attr_clear_value(a);
	pb_reader_init(&r, p, len);
	while (!pb_reader_eof(&r)) {
		ret = pb_next_field(&r, &f);
		if (ret < 0)
			return ret;
		if (f.wt != PB_WT_LEN)
			continue;
		if (f.number == PCTX_F_KV_KEY) {
			a->key.ptr = f.data;
			a->key.len = f.len;
		} else if (f.number == PCTX_F_KV_VALUE) {
			ret = pctx_parse_value(f.data, f.len, a, depth);
			if (ret < 0)
				return ret;
		}
	}
	return 0;
}

static void
pctx_store(struct pctx_attr *arr,
	   unsigned *n,
	   unsigned *dropped,
	   const struct pctx_attr *a)
{
	if (*n < PCTX_MAX_ATTRS)
		arr[(*n)++] = *a;
	else
		(*dropped)++;
}

static int
pctx_parse_resource(const uint8_t *p, size_t len, struct pctx_decoded *out)
{
	struct pb_reader r;
	struct pb_field f;
	struct pctx_attr a;
	int ret;

	/* dropped_attributes_count (2) and entity_refs (3) are skipped. */
	pb_reader_init(&r, p, len);
	while (!pb_reader_eof(&r)) {
		ret = pb_next_field(&r, &f);
		if (ret < 0)
			return ret;
		if (f.number != PCTX_F_RES_ATTRIBUTES || f.wt != PB_WT_LEN)
			continue;
		ret = pctx_parse_kv(f.data, f.len, &a, 0);
		if (ret < 0)
			return ret;
		if (out)
			pctx_store(out->resource, &out->n_resource,
				   &out->n_resource_dropped, &a);
	}
	return 0;
}

static void
pctx_take_key_map(const struct pctx_attr *a, struct pctx_decoded *out)
{
	struct pctx_iter it;
	struct pctx_attr v;

	/* A repeated key map replaces the earlier one (last wins). */
	out->n_keys = 0;
	out->n_keys_dropped = 0;
	if (pctx_iter_init(&it, a) < 0)
		return;
	/* The list was validated while parsing, so this cannot fail midway. */
	while (pctx_iter_next(&it, &v) == 0) {
		if (out->n_keys >= PCTX_MAX_KEYS) {
			out->n_keys_dropped++;
			continue;
		}
		/* Keep the position even for a non-string element: the index
		 * is what thread records refer to. */
		if (v.type == PCTX_V_STRING)
			out->key_map[out->n_keys] = v.str;
		else
			out->key_map[out->n_keys] = (struct pctx_str){NULL, 0};
		out->n_keys++;
	}
}

static void
pctx_take_attr(const struct pctx_attr *a, struct pctx_decoded *out)
{
	pctx_store(out->attrs, &out->n_attrs, &out->n_attrs_dropped, a);
	if (a->type == PCTX_V_STRING && a->key.len == strlen(PCTX_KEY_SCHEMA_VERSION) &&
	    memcmp(a->key.ptr, PCTX_KEY_SCHEMA_VERSION, a->key.len) == 0) {
		out->schema_version = a->str;
		out->has_threadlocal = true;
	} else if (a->type == PCTX_V_ARRAY &&
		   a->key.len == strlen(PCTX_KEY_ATTRIBUTE_KEY_MAP) &&
		   memcmp(a->key.ptr, PCTX_KEY_ATTRIBUTE_KEY_MAP, a->key.len) == 0) {
		pctx_take_key_map(a, out);
	}
}

/* One pass over the payload; with out == NULL it only validates. */
static int
pctx_parse(const uint8_t *buf, size_t len, struct pctx_decoded *out)
{
	struct pb_reader r;
	struct pb_field f;
	struct pctx_attr a;
	int ret;

	pb_reader_init(&r, buf, len);
	while (!pb_reader_eof(&r)) {
		ret = pb_next_field(&r, &f);
		if (ret < 0)
			return ret;
		if (f.wt != PB_WT_LEN)
			continue;
		if (f.number == PCTX_F_PC_RESOURCE) {
			/* Repeated occurrences of a message field merge, so
			 * their attributes add up. */
			ret = pctx_parse_resource(f.data, f.len, out);
			if (ret < 0)
				return ret;
		} else if (f.number == PCTX_F_PC_ATTRIBUTES) {
			ret = pctx_parse_kv(f.data, f.len, &a, 0);
			if (ret < 0)
				return ret;
			if (out)
				pctx_take_attr(&a, out);
		}
	}
	return 0;
}

int
pctx_decode(const uint8_t *buf, size_t len, struct pctx_decoded *out)
{
	int ret;

	if (!out || (!buf && len > 0) || len > PCTX_PAYLOAD_MAX)
		return -EINVAL;
	/* Validate first so that *out is only written for a good payload;
	 * there is no room for a second copy of it on a signal stack. */
	ret = pctx_parse(buf, len, NULL);
	if (ret < 0)
		return ret;
	memset(out, 0, sizeof(*out));
	return pctx_parse(buf, len, out);
}

bool
pctx_str_eq(struct pctx_str s, const char *cstr)
{
	size_t n = strlen(cstr);

	return s.len == n && (n == 0 || memcmp(s.ptr, cstr, n) == 0);
}

static const struct pctx_attr *
pctx_find(const struct pctx_attr *arr, unsigned n, const char *key)
{
	/* Search backwards: for duplicate keys the last one wins. */
	while (n-- > 0)
		if (pctx_str_eq(arr[n].key, key))
			return &arr[n];
	return NULL;
}

const struct pctx_attr *
pctx_find_resource(const struct pctx_decoded *d, const char *key)
{
	if (!d || !key)
		return NULL;
	return pctx_find(d->resource, d->n_resource, key);
}

const struct pctx_attr *
pctx_find_attr(const struct pctx_decoded *d, const char *key)
{
	if (!d || !key)
		return NULL;
	return pctx_find(d->attrs, d->n_attrs, key);
}

int
pctx_iter_init(struct pctx_iter *it, const struct pctx_attr *a)
{
	if (!it || !a || (a->type != PCTX_V_ARRAY && a->type != PCTX_V_KVLIST))
		return -EINVAL;
	it->p = a->str.ptr;
	it->end = a->str.ptr ? a->str.ptr + a->str.len : a->str.ptr;
	it->kvlist = a->type == PCTX_V_KVLIST;
	return 0;
}

int
pctx_iter_next(struct pctx_iter *it, struct pctx_attr *out)
{
	struct pb_reader r;
	struct pb_field f;
	struct pctx_attr tmp;
	int ret;

	r.p = it->p;
	r.end = it->end;
	while (!pb_reader_eof(&r)) {
		ret = pb_next_field(&r, &f);
		if (ret < 0)
			return ret;
		if (f.number != PCTX_F_ARRAY_VALUES || f.wt != PB_WT_LEN)
			continue;
		if (it->kvlist) {
			ret = pctx_parse_kv(f.data, f.len, &tmp, 0);
		} else {
			tmp.key.ptr = NULL;
			tmp.key.len = 0;
			ret = pctx_parse_value(f.data, f.len, &tmp, 0);
		}
		if (ret < 0)
			return ret;
		it->p = r.p;
		*out = tmp;
		return 0;
	}
	it->p = r.p;
	return -ENOENT;
}
