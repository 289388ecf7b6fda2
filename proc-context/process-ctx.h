/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* OTEP-4719 process context: the 32-byte OTEL_CTX header, the protobuf
 * payload (opentelemetry.proto.processcontext.v1development.ProcessContext)
 * and the /proc/PID/maps names under which the mapping is found.
 * Pure code: no I/O, no allocation; decoded strings point into the input. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PCTX_SIGNATURE     "OTEL_CTX"
#define PCTX_SIGNATURE_LEN 8 /* compared as 8 bytes, no NUL */
#define PCTX_VERSION       2
#define PCTX_PAYLOAD_MAX   (1 << 20) /* readers refuse larger payloads */
#define PCTX_MAX_ATTRS     128
#define PCTX_MAX_KEYS      256 /* thread-record keys are a uint8 index */

#define PCTX_SCHEMA_VERSION        "tlsdesc_v1_dev"
#define PCTX_KEY_SCHEMA_VERSION    "threadlocal.schema_version"
#define PCTX_KEY_ATTRIBUTE_KEY_MAP "threadlocal.attribute_key_map"

/* Host byte order, LP64.  The natural layout has no padding. */
struct otel_process_ctx_header {
	char signature[8];
	uint32_t version;
	uint32_t payload_size;
	/* CLOCK_BOOTTIME ns of the last publication; 0 = being written. */
	uint64_t monotonic_published_at_ns;
	/* Payload address in the publisher's address space. */
	uint64_t payload;
};

_Static_assert(offsetof(struct otel_process_ctx_header, signature) == 0, "signature");
_Static_assert(offsetof(struct otel_process_ctx_header, version) == 8, "version");
_Static_assert(offsetof(struct otel_process_ctx_header, payload_size) == 12, "size");
_Static_assert(offsetof(struct otel_process_ctx_header, monotonic_published_at_ns) ==
		       16,
	       "timestamp");
_Static_assert(offsetof(struct otel_process_ctx_header, payload) == 24, "payload");
_Static_assert(sizeof(struct otel_process_ctx_header) == 32, "32-byte header");
_Static_assert(_Alignof(struct otel_process_ctx_header) == 8, "8-byte alignment");

/* ---- maps discovery ---- */

enum pctx_map_kind {
	PCTX_MAP_NONE,
	PCTX_MAP_ANON_SHMEM, /* "[anon_shmem:OTEL_CTX]": memfd, named by prctl */
	PCTX_MAP_ANON,       /* "[anon:OTEL_CTX]": anonymous fallback, named */
	PCTX_MAP_MEMFD,      /* "/memfd:OTEL_CTX": memfd, naming failed */
};

/* Classify a maps pathname (not NUL-terminated, len bytes).  Each name may
 * carry a " (deleted)" suffix; anything else, including names that merely
 * start with one of them ("/memfd:OTEL_CTX_BACKUP"), is PCTX_MAP_NONE. */
enum pctx_map_kind pctx_map_name_kind(const char *path, size_t len);

/* ---- value kinds (AnyValue), for the encoder and the decoder ---- */

enum pctx_value_type {
	PCTX_V_NONE,   /* KeyValue without a value, or an empty AnyValue */
	PCTX_V_STRING, /* str */
	PCTX_V_BOOL,   /* b */
	PCTX_V_INT,    /* i */
	PCTX_V_DOUBLE, /* d */
	PCTX_V_BYTES,  /* str */
	PCTX_V_ARRAY,  /* str = encoded ArrayValue, see pctx_iter_* */
	PCTX_V_KVLIST, /* str = encoded KeyValueList, see pctx_iter_* */
	PCTX_V_OTHER,  /* a value kind this decoder does not know (i = raw varint
			* for string_value_strindex) */
};

/* ---- encoder ---- */

/* A resource entry with a string value. */
struct pctx_kv {
	const char *key;
	const char *value;
};

/* A resource entry of a given kind, for pctx_encode_typed(): type
 * PCTX_V_STRING (str) or PCTX_V_INT (i, AnyValue.int_value), as the
 * semantic conventions type them (process.pid is an int).  A separate
 * struct rather than more members of pctx_kv: its users initialise it
 * positionally, and -Wextra warns about every missing member. */
struct pctx_kv_typed {
	const char *key;
	enum pctx_value_type type;
	const char *str;
	int64_t i;
};

/* Encode ProcessContext{resource = Resource{attributes = resource[]},
 * attributes = [threadlocal.schema_version, threadlocal.attribute_key_map]}.
 * All values are AnyValue.string_value (see pctx_encode_typed() for
 * others), the key map an array_value of strings.  n_resource == 0 omits the resource; schema_version == NULL omits
 * the threadlocal.* attributes (key_map is then ignored).
 * Returns 0, -ENOSPC if cap is too small, -EINVAL for NULL strings, an
 * empty key-map entry, or more than PCTX_MAX_KEYS keys. */
int pctx_encode(uint8_t *out,
		size_t cap,
		size_t *len_out,
		const struct pctx_kv *resource,
		size_t n_resource,
		const char *schema_version,
		const char *const *key_map,
		size_t n_keys);

/* Exact size pctx_encode() needs for the same arguments, or a negative
 * errno for invalid arguments. */
long pctx_encoded_size(const struct pctx_kv *resource,
		       size_t n_resource,
		       const char *schema_version,
		       const char *const *key_map,
		       size_t n_keys);

/* pctx_encode() and pctx_encoded_size() for typed resource entries: the
 * same payload, each value encoded as its type says.  -EINVAL also for a
 * type other than PCTX_V_STRING and PCTX_V_INT. */
int pctx_encode_typed(uint8_t *out,
		      size_t cap,
		      size_t *len_out,
		      const struct pctx_kv_typed *resource,
		      size_t n_resource,
		      const char *schema_version,
		      const char *const *key_map,
		      size_t n_keys);
long pctx_encoded_size_typed(const struct pctx_kv_typed *resource,
			     size_t n_resource,
			     const char *schema_version,
			     const char *const *key_map,
			     size_t n_keys);

/* ---- decoder ---- */

struct pctx_str {
	const uint8_t *ptr;
	size_t len;
};

struct pctx_attr {
	struct pctx_str key;
	enum pctx_value_type type;
	struct pctx_str str;
	int64_t i;
	double d;
	bool b;
};

struct pctx_decoded {
	struct pctx_attr resource[PCTX_MAX_ATTRS];
	unsigned n_resource, n_resource_dropped;
	struct pctx_attr attrs[PCTX_MAX_ATTRS];
	unsigned n_attrs, n_attrs_dropped;
	/* From attributes: threadlocal.schema_version (string) and
	 * threadlocal.attribute_key_map (array; a non-string element keeps its
	 * index with an empty name).  has_threadlocal = the schema was found. */
	struct pctx_str schema_version;
	struct pctx_str key_map[PCTX_MAX_KEYS];
	unsigned n_keys, n_keys_dropped;
	bool has_threadlocal;
};

/* Decode a ProcessContext payload.  Fields may come in any order; unknown
 * fields of every wire type (groups included) are skipped; every nested
 * message, including the contents of array and kvlist values, must be
 * well-formed.  Attributes past PCTX_MAX_ATTRS (keys past PCTX_MAX_KEYS) are
 * counted as dropped.  Returns 0, -EINVAL for NULL arguments or len >
 * PCTX_PAYLOAD_MAX, -EBADMSG for malformed or truncated input.  *out is only
 * written on success. */
int pctx_decode(const uint8_t *buf, size_t len, struct pctx_decoded *out);

/* The last resource (attribute) entry with this key, or NULL. */
const struct pctx_attr *pctx_find_resource(const struct pctx_decoded *d,
					   const char *key);
const struct pctx_attr *pctx_find_attr(const struct pctx_decoded *d, const char *key);

bool pctx_str_eq(struct pctx_str s, const char *cstr);

/* Walk the elements of a PCTX_V_ARRAY value (each an AnyValue, key empty)
 * or the entries of a PCTX_V_KVLIST value.  pctx_iter_next() returns 0 with
 * the next element, -ENOENT at the end, -EBADMSG on malformed input. */
struct pctx_iter {
	const uint8_t *p;
	const uint8_t *end;
	bool kvlist;
};

int pctx_iter_init(struct pctx_iter *it, const struct pctx_attr *a);
int pctx_iter_next(struct pctx_iter *it, struct pctx_attr *out);
