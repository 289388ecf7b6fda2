/* SPDX-License-Identifier: Apache-2.0 */
#include "test-common.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "process-ctx.h"
#include "protobuf.h"

/* ---- Reference vectors (otep-formats.md §5.3, §5.4) ---- */

/* §5.4 hex dumps, transcribed byte for byte. */
/* clang-format off */
static const uint8_t tail_otep_125[125] = {
	0x12, 0x2e, 0x0a, 0x1a, 0x74, 0x68, 0x72, 0x65, 0x61, 0x64, 0x6c, 0x6f,
	0x63, 0x61, 0x6c, 0x2e, 0x73, 0x63, 0x68, 0x65, 0x6d, 0x61, 0x5f, 0x76,
	0x65, 0x72, 0x73, 0x69, 0x6f, 0x6e, 0x12, 0x10, 0x0a, 0x0e, 0x74, 0x6c,
	0x73, 0x64, 0x65, 0x73, 0x63, 0x5f, 0x76, 0x31, 0x5f, 0x64, 0x65, 0x76,
	0x12, 0x4b, 0x0a, 0x1d, 0x74, 0x68, 0x72, 0x65, 0x61, 0x64, 0x6c, 0x6f,
	0x63, 0x61, 0x6c, 0x2e, 0x61, 0x74, 0x74, 0x72, 0x69, 0x62, 0x75, 0x74,
	0x65, 0x5f, 0x6b, 0x65, 0x79, 0x5f, 0x6d, 0x61, 0x70, 0x12, 0x2a, 0x2a,
	0x28, 0x0a, 0x0c, 0x0a, 0x0a, 0x68, 0x74, 0x74, 0x70, 0x5f, 0x72, 0x6f,
	0x75, 0x74, 0x65, 0x0a, 0x0d, 0x0a, 0x0b, 0x68, 0x74, 0x74, 0x70, 0x5f,
	0x6d, 0x65, 0x74, 0x68, 0x6f, 0x64, 0x0a, 0x09, 0x0a, 0x07, 0x75, 0x73,
	0x65, 0x72, 0x5f, 0x69, 0x64,
};
static const uint8_t minimal_140[140] = {
	0x0a, 0x18, 0x0a, 0x16, 0x0a, 0x0c, 0x73, 0x65, 0x72, 0x76, 0x69, 0x63,
	0x65, 0x2e, 0x6e, 0x61, 0x6d, 0x65, 0x12, 0x06, 0x0a, 0x04, 0x64, 0x65,
	0x6d, 0x6f, 0x12, 0x2e, 0x0a, 0x1a, 0x74, 0x68, 0x72, 0x65, 0x61, 0x64,
	0x6c, 0x6f, 0x63, 0x61, 0x6c, 0x2e, 0x73, 0x63, 0x68, 0x65, 0x6d, 0x61,
	0x5f, 0x76, 0x65, 0x72, 0x73, 0x69, 0x6f, 0x6e, 0x12, 0x10, 0x0a, 0x0e,
	0x74, 0x6c, 0x73, 0x64, 0x65, 0x73, 0x63, 0x5f, 0x76, 0x31, 0x5f, 0x64,
	0x65, 0x76, 0x12, 0x40, 0x0a, 0x1d, 0x74, 0x68, 0x72, 0x65, 0x61, 0x64,
	0x6c, 0x6f, 0x63, 0x61, 0x6c, 0x2e, 0x61, 0x74, 0x74, 0x72, 0x69, 0x62,
	0x75, 0x74, 0x65, 0x5f, 0x6b, 0x65, 0x79, 0x5f, 0x6d, 0x61, 0x70, 0x12,
	0x1f, 0x2a, 0x1d, 0x0a, 0x0c, 0x0a, 0x0a, 0x68, 0x74, 0x74, 0x70, 0x2e,
	0x72, 0x6f, 0x75, 0x74, 0x65, 0x0a, 0x0d, 0x0a, 0x0b, 0x68, 0x74, 0x74,
	0x70, 0x2e, 0x6d, 0x65, 0x74, 0x68, 0x6f, 0x64,
};

/* §5.4 third-party literal vector (dd-trace-rb), 115 bytes, written from its
 * textual description: strings inline, lengths as given there. */
static const char tail_ddrb_115[] =
	"\x12\x2e"
	"\x0a\x1a" "threadlocal.schema_version"
	"\x12\x10\x0a\x0e" "tlsdesc_v1_dev"
	"\x12\x41"
	"\x0a\x1d" "threadlocal.attribute_key_map"
	"\x12\x20\x2a\x1e\x0a\x1c\x0a\x1a" "datadog.local_root_span_id";

/* §5.3/§5.4 sig-profiling example payload, 339 bytes.  The document gives
 * its length and first 16 bytes; the rest was worked out by hand from the
 * field numbers in §2.7 (attribute order as in the reference writer: the
 * seven standard attributes, then resource.key1/key2).  Each KeyValue is
 * 0a <len> 0a <klen> key 12 <vlen+2> 0a <vlen> value. */
static const char sigprof_339[] =
	"\x0a\xd0\x02" /* ProcessContext.resource, 336 bytes */
	"\x0a\x25" "\x0a\x1b" "deployment.environment.name" "\x12\x06\x0a\x04" "prod"
	"\x0a\x3d" "\x0a\x13" "service.instance.id"
	"\x12\x26\x0a\x24" "123d8444-2c7e-46e3-89f6-6217880f7123"
	"\x0a\x1c" "\x0a\x0c" "service.name" "\x12\x0c\x0a\x0a" "my-service"
	"\x0a\x1a" "\x0a\x0f" "service.version" "\x12\x07\x0a\x05" "4.5.6"
	"\x0a\x1d" "\x0a\x16" "telemetry.sdk.language" "\x12\x03\x0a\x01" "c"
	"\x0a\x20" "\x0a\x15" "telemetry.sdk.version" "\x12\x07\x0a\x05" "1.2.3"
	"\x0a\x25" "\x0a\x12" "telemetry.sdk.name" "\x12\x0f\x0a\x0d" "example_ctx.c"
	"\x0a\x22" "\x0a\x0d" "resource.key1" "\x12\x11\x0a\x0f" "resource.value1"
	"\x0a\x22" "\x0a\x0d" "resource.key2" "\x12\x11\x0a\x0f" "resource.value2";

/* The prefix printed in the sig-profiling README dump. */
static const uint8_t sigprof_prefix[16] = {
	0x0a, 0xd0, 0x02, 0x0a, 0x25, 0x0a, 0x1b, 0x64,
	0x65, 0x70, 0x6c, 0x6f, 0x79, 0x6d, 0x65, 0x6e,
};

/* clang-format on */

static const struct pctx_kv sigprof_resource[] = {
	{"deployment.environment.name", "prod"},
	{"service.instance.id", "123d8444-2c7e-46e3-89f6-6217880f7123"},
	{"service.name", "my-service"},
	{"service.version", "4.5.6"},
	{"telemetry.sdk.language", "c"},
	{"telemetry.sdk.version", "1.2.3"},
	{"telemetry.sdk.name", "example_ctx.c"},
	{"resource.key1", "resource.value1"},
	{"resource.key2", "resource.value2"},
};
#define N_SIGPROF (sizeof(sigprof_resource) / sizeof(sigprof_resource[0]))

static const char *const otep_keys[] = {"http_route", "http_method", "user_id"};
static const char *const ddrb_keys[] = {"datadog.local_root_span_id"};
static const char *const minimal_keys[] = {"http.route", "http.method"};
static const struct pctx_kv minimal_resource[] = {{"service.name", "demo"}};

/* Large enough for every payload in this file; static so valgrind and ASan
 * see exact bounds through the length arguments only. */
static uint8_t outbuf[8192];
static struct pctx_decoded dec;

/* Encode, check against expect, and check that every smaller capacity is
 * refused without writing past it. */
static void
check_encoding(const struct pctx_kv *res,
	       size_t n_res,
	       const char *schema,
	       const char *const *keys,
	       size_t n_keys,
	       const void *expect,
	       size_t expect_len)
{
	size_t len = 0, cap;

	ck_assert_int_eq(pctx_encode(outbuf, sizeof(outbuf), &len, res, n_res, schema,
				     keys, n_keys),
			 0);
	ck_assert_uint_eq(len, expect_len);
	ck_assert_mem_eq(outbuf, expect, expect_len);
	ck_assert_int_eq(pctx_encoded_size(res, n_res, schema, keys, n_keys),
			 (long)expect_len);

	for (cap = 0; cap < expect_len; cap++) {
		size_t l2 = 12345;

		memset(outbuf, 0xa5, expect_len + 1);
		ck_assert_int_eq(
			pctx_encode(outbuf, cap, &l2, res, n_res, schema, keys, n_keys),
			-ENOSPC);
		ck_assert_uint_eq(l2, 12345);
		ck_assert_uint_eq(outbuf[cap], 0xa5);
	}
}

START_TEST(header_layout)
{
	/* §5.3: the header of a real sig-profiling mapping. */
	static const uint8_t dump[32] = {
		0x4f, 0x54, 0x45, 0x4c, 0x5f, 0x43, 0x54, 0x58, 0x02, 0x00, 0x00,
		0x00, 0x53, 0x01, 0x00, 0x00, 0x4c, 0x27, 0x98, 0xd5, 0xcc, 0xaa,
		0x91, 0x18, 0xa0, 0xb2, 0x28, 0x1e, 0xee, 0x5c, 0x00, 0x00,
	};
	struct otel_process_ctx_header h;

	ck_assert_uint_eq(sizeof(h), 32);
	ck_assert_uint_eq(offsetof(struct otel_process_ctx_header, version), 8);
	ck_assert_uint_eq(offsetof(struct otel_process_ctx_header, payload_size), 12);
	ck_assert_uint_eq(
		offsetof(struct otel_process_ctx_header, monotonic_published_at_ns),
		16);
	ck_assert_uint_eq(offsetof(struct otel_process_ctx_header, payload), 24);
	memcpy(&h, dump, sizeof(h));
	ck_assert_mem_eq(h.signature, PCTX_SIGNATURE, PCTX_SIGNATURE_LEN);
	ck_assert_uint_eq(h.version, PCTX_VERSION);
	ck_assert_uint_eq(h.payload_size, 339);
	ck_assert(h.monotonic_published_at_ns == 1770383925266884428ull);
	ck_assert(h.payload == 0x00005cee1e28b2a0ull);
	ck_assert_uint_eq(sizeof(sigprof_339) - 1, h.payload_size);
}
END_TEST

START_TEST(encode_sigprof_339)
{
	size_t len = 0;

	ck_assert_uint_eq(sizeof(sigprof_339) - 1, 339);
	ck_assert_mem_eq(sigprof_339, sigprof_prefix, sizeof(sigprof_prefix));
	ck_assert_int_eq(pctx_encode(outbuf, sizeof(outbuf), &len, sigprof_resource,
				     N_SIGPROF, NULL, NULL, 0),
			 0);
	ck_assert_uint_eq(len, 339);
	ck_assert_mem_eq(outbuf, sigprof_prefix, sizeof(sigprof_prefix));
	check_encoding(sigprof_resource, N_SIGPROF, NULL, NULL, 0, sigprof_339, 339);
}
END_TEST

START_TEST(encode_ddrb_tail_115)
{
	ck_assert_uint_eq(sizeof(tail_ddrb_115) - 1, 115);
	check_encoding(NULL, 0, PCTX_SCHEMA_VERSION, ddrb_keys, 1, tail_ddrb_115, 115);
}
END_TEST

START_TEST(encode_otep_tail_125)
{
	check_encoding(NULL, 0, "tlsdesc_v1_dev", otep_keys, 3, tail_otep_125,
		       sizeof(tail_otep_125));
}
END_TEST

START_TEST(encode_minimal_140)
{
	check_encoding(minimal_resource, 1, PCTX_SCHEMA_VERSION, minimal_keys, 2,
		       minimal_140, sizeof(minimal_140));
	/* The key map ignores key_map when there is no schema. */
	check_encoding(minimal_resource, 1, NULL, minimal_keys, 2, minimal_140, 26);
}
END_TEST

START_TEST(encode_empty_and_multibyte)
{
	static char big[300];
	const struct pctx_kv res[] = {{"k", big}, {"", ""}};
	size_t len = 1;

	/* Nothing at all: an empty (valid) ProcessContext. */
	ck_assert_int_eq(pctx_encode(outbuf, 0, &len, NULL, 0, NULL, NULL, 0), 0);
	ck_assert_uint_eq(len, 0);

	/* Schema with an empty key map still names the map (an empty array). */
	ck_assert_int_eq(
		pctx_encode(outbuf, sizeof(outbuf), &len, NULL, 0, "s", NULL, 0), 0);
	ck_assert_uint_eq(len, 2 + 2 + 26 + 2 + 3 + 2 + 2 + 29 + 2 + 2);
	ck_assert_mem_eq(outbuf + len - 4, "\x12\x02\x2a\x00", 4);

	/* A 299-byte value needs 2-byte lengths on every level. */
	memset(big, 'b', sizeof(big) - 1);
	ck_assert_int_eq(
		pctx_encode(outbuf, sizeof(outbuf), &len, res, 2, NULL, NULL, 0), 0);
	/* resource{ kv{ key, value{ string } } }: AnyValue 3 + 299 = 302;
	 * kv = 3 + 3 + 302 = 308, entry 311; the empty kv is 2 + 4 = 6, entry
	 * 8; resource 319 = bf 02; payload 322. */
	ck_assert_uint_eq(len, 322);
	ck_assert_mem_eq(outbuf,
			 "\x0a\xbf\x02\x0a\xb4\x02\x0a\x01k\x12\xae\x02\x0a\xab\x02",
			 15);
	ck_assert_int_eq(pctx_decode(outbuf, len, &dec), 0);
	ck_assert_uint_eq(dec.n_resource, 2);
	ck_assert_uint_eq(dec.resource[0].str.len, 299);
	ck_assert(pctx_str_eq(dec.resource[1].key, ""));
	ck_assert_int_eq(dec.resource[1].type, PCTX_V_STRING);
	ck_assert_uint_eq(dec.resource[1].str.len, 0);
}
END_TEST

START_TEST(encode_bad_args)
{
	const struct pctx_kv nullkey[] = {{NULL, "v"}};
	const struct pctx_kv nullval[] = {{"k", NULL}};
	const char *const empty_key[] = {"a", ""};
	const char *const null_key[] = {"a", NULL};
	static const char *many[PCTX_MAX_KEYS + 1];
	size_t len = 77, i;

	for (i = 0; i <= PCTX_MAX_KEYS; i++)
		many[i] = "k";
	ck_assert_int_eq(
		pctx_encode(outbuf, sizeof(outbuf), NULL, NULL, 0, NULL, NULL, 0),
		-EINVAL);
	ck_assert_int_eq(pctx_encode(NULL, 10, &len, NULL, 0, NULL, NULL, 0), -EINVAL);
	ck_assert_int_eq(
		pctx_encode(outbuf, sizeof(outbuf), &len, NULL, 1, NULL, NULL, 0),
		-EINVAL);
	ck_assert_int_eq(
		pctx_encode(outbuf, sizeof(outbuf), &len, nullkey, 1, NULL, NULL, 0),
		-EINVAL);
	ck_assert_int_eq(
		pctx_encode(outbuf, sizeof(outbuf), &len, nullval, 1, NULL, NULL, 0),
		-EINVAL);
	ck_assert_int_eq(
		pctx_encode(outbuf, sizeof(outbuf), &len, NULL, 0, "s", empty_key, 2),
		-EINVAL);
	ck_assert_int_eq(
		pctx_encode(outbuf, sizeof(outbuf), &len, NULL, 0, "s", null_key, 2),
		-EINVAL);
	ck_assert_int_eq(
		pctx_encode(outbuf, sizeof(outbuf), &len, NULL, 0, "s", NULL, 1),
		-EINVAL);
	ck_assert_int_eq(pctx_encode(outbuf, sizeof(outbuf), &len, NULL, 0, "s", many,
				     PCTX_MAX_KEYS + 1),
			 -EINVAL);
	ck_assert_int_eq(pctx_encoded_size(nullkey, 1, NULL, NULL, 0), -EINVAL);
	ck_assert_uint_eq(len, 77);

	/* 256 keys is the most a uint8 index can address, and is fine. */
	ck_assert_int_eq(pctx_encode(outbuf, sizeof(outbuf), &len, NULL, 0, "s", many,
				     PCTX_MAX_KEYS),
			 0);
	ck_assert_int_eq(pctx_decode(outbuf, len, &dec), 0);
	ck_assert_uint_eq(dec.n_keys, PCTX_MAX_KEYS);
	ck_assert_uint_eq(dec.n_keys_dropped, 0);
}
END_TEST

/* ---- Typed resource values (AnyValue.int_value) ---- */

/* Worked out by hand from §2.7: AnyValue.int_value is tag 0x18 and a
 * varint, int64 as two's complement (10 bytes when negative); a oneof
 * member is written even when it is 0.
 *   process.pid = 12345 (varint b9 60): KeyValue 0a 0b "process.pid"
 *     12 03 18 b9 60 = 18 bytes, entry 20;
 *   service.name = "demo": KeyValue 22 bytes, entry 24;
 *   n = -1: AnyValue 18 ff*9 01 = 11 bytes, KeyValue 3 + 2 + 11 = 16, entry 18;
 *   z = 0: AnyValue 18 00, KeyValue 7, entry 9;
 * Resource 20 + 24 + 18 + 9 = 71 (0x47), payload 73. */
/* clang-format off */
static const char typed_73[] =
	"\x0a\x47"
	"\x0a\x12" "\x0a\x0b" "process.pid" "\x12\x03" "\x18\xb9\x60"
	"\x0a\x16" "\x0a\x0c" "service.name" "\x12\x06\x0a\x04" "demo"
	"\x0a\x10" "\x0a\x01" "n" "\x12\x0b" "\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"
	"\x0a\x07" "\x0a\x01" "z" "\x12\x02" "\x18\x00";
/* clang-format on */

static const struct pctx_kv_typed typed_resource[] = {
	{.key = "process.pid", .type = PCTX_V_INT, .i = 12345},
	{.key = "service.name", .type = PCTX_V_STRING, .str = "demo"},
	{.key = "n", .type = PCTX_V_INT, .i = -1},
	{.key = "z", .type = PCTX_V_INT, .i = 0},
};

START_TEST(encode_typed_int)
{
	static const int64_t want_i[] = {12345, 0, -1, 0};
	size_t len = 0, cap, i;

	ck_assert_uint_eq(sizeof(typed_73) - 1, 73);
	ck_assert_int_eq(pctx_encode_typed(outbuf, sizeof(outbuf), &len, typed_resource,
					   4, NULL, NULL, 0),
			 0);
	ck_assert_uint_eq(len, 73);
	ck_assert_mem_eq(outbuf, typed_73, 73);
	ck_assert_int_eq(pctx_encoded_size_typed(typed_resource, 4, NULL, NULL, 0), 73);
	for (cap = 0; cap < 73; cap++) {
		size_t l2 = 12345;

		memset(outbuf, 0xa5, 74);
		ck_assert_int_eq(pctx_encode_typed(outbuf, cap, &l2, typed_resource, 4,
						   NULL, NULL, 0),
				 -ENOSPC);
		ck_assert_uint_eq(l2, 12345);
		ck_assert_uint_eq(outbuf[cap], 0xa5);
	}

	/* The decoder reads them back as ints. */
	ck_assert_int_eq(pctx_decode((const uint8_t *)typed_73, 73, &dec), 0);
	ck_assert_uint_eq(dec.n_resource, 4);
	for (i = 0; i < 4; i++) {
		ck_assert(pctx_str_eq(dec.resource[i].key, typed_resource[i].key));
		ck_assert_int_eq(dec.resource[i].type, typed_resource[i].type);
		ck_assert(dec.resource[i].i == want_i[i]);
	}
	ck_assert(pctx_str_eq(dec.resource[1].str, "demo"));

	/* With the threadlocal.* tail: the same tail as pctx_encode() writes. */
	ck_assert_int_eq(pctx_encode_typed(outbuf, sizeof(outbuf), &len, typed_resource,
					   1, PCTX_SCHEMA_VERSION, minimal_keys, 2),
			 0);
	ck_assert_uint_eq(len, 2 + 20 + (140 - 26));
	ck_assert_mem_eq(outbuf, "\x0a\x14", 2);
	ck_assert_mem_eq(outbuf + 2, typed_73 + 2, 20);
	ck_assert_mem_eq(outbuf + 22, minimal_140 + 26, 140 - 26);
}
END_TEST

/* String-only typed entries give exactly pctx_encode()'s bytes. */
START_TEST(encode_typed_strings_match)
{
	static struct pctx_kv_typed res[N_SIGPROF];
	size_t len = 0, i;

	for (i = 0; i < N_SIGPROF; i++) {
		res[i].key = sigprof_resource[i].key;
		res[i].type = PCTX_V_STRING;
		res[i].str = sigprof_resource[i].value;
	}
	ck_assert_int_eq(pctx_encode_typed(outbuf, sizeof(outbuf), &len, res, N_SIGPROF,
					   NULL, NULL, 0),
			 0);
	ck_assert_uint_eq(len, 339);
	ck_assert_mem_eq(outbuf, sigprof_339, 339);
	ck_assert_int_eq(pctx_encoded_size_typed(res, N_SIGPROF, NULL, NULL, 0), 339);
}
END_TEST

/* Every varint length round-trips: sizes agree with the bytes, and the
 * decoder gets the same int64 back (negative values as two's complement). */
START_TEST(encode_typed_int_round_trip)
{
	static const int64_t vals[] = {0,         1,
				       127,       128,
				       16383,     16384,
				       4194304,   2147483647,
				       INT64_MAX, -1,
				       -128,      INT64_MIN,
				       1LL << 35, (1LL << 62) + 5};
	struct pctx_kv_typed e[2] = {
		{.key = "process.pid", .type = PCTX_V_INT},
		{.key = "s", .type = PCTX_V_STRING, .str = "x"},
	};
	size_t i;

	for (i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		size_t len = 0;
		const struct pctx_attr *a;

		e[0].i = vals[i];
		ck_assert_int_eq(pctx_encode_typed(outbuf, sizeof(outbuf), &len, e, 2,
						   PCTX_SCHEMA_VERSION, minimal_keys,
						   2),
				 0);
		ck_assert_int_eq(pctx_encoded_size_typed(e, 2, PCTX_SCHEMA_VERSION,
							 minimal_keys, 2),
				 (long)len);
		ck_assert_int_eq(pctx_decode(outbuf, len, &dec), 0);
		a = pctx_find_resource(&dec, "process.pid");
		ck_assert_ptr_nonnull(a);
		ck_assert_int_eq(a->type, PCTX_V_INT);
		ck_assert_msg(a->i == vals[i], "%lld", (long long)vals[i]);
		ck_assert(pctx_str_eq(pctx_find_resource(&dec, "s")->str, "x"));
		ck_assert_uint_eq(dec.n_keys, 2);
	}
}
END_TEST

START_TEST(encode_typed_bad_args)
{
	static const struct pctx_kv_typed nullkey[] = {{.type = PCTX_V_INT, .i = 1}};
	static const struct pctx_kv_typed nullstr[] = {
		{.key = "k", .type = PCTX_V_STRING}};
	static const struct pctx_kv_typed boolean[] = {
		{.key = "k", .type = PCTX_V_BOOL}};
	static const struct pctx_kv_typed none[] = {{.key = "k", .type = PCTX_V_NONE}};
	static const struct pctx_kv_typed int_no_str[] = {
		{.key = "k", .type = PCTX_V_INT}};
	size_t len = 77;

	ck_assert_int_eq(
		pctx_encode_typed(outbuf, sizeof(outbuf), &len, NULL, 1, NULL, NULL, 0),
		-EINVAL);
	ck_assert_int_eq(pctx_encode_typed(outbuf, sizeof(outbuf), &len, nullkey, 1,
					   NULL, NULL, 0),
			 -EINVAL);
	ck_assert_int_eq(pctx_encode_typed(outbuf, sizeof(outbuf), &len, nullstr, 1,
					   NULL, NULL, 0),
			 -EINVAL);
	ck_assert_int_eq(pctx_encode_typed(outbuf, sizeof(outbuf), &len, boolean, 1,
					   NULL, NULL, 0),
			 -EINVAL);
	ck_assert_int_eq(pctx_encoded_size_typed(none, 1, NULL, NULL, 0), -EINVAL);
	ck_assert_uint_eq(len, 77);
	/* An int needs no string. */
	ck_assert_int_eq(pctx_encode_typed(outbuf, sizeof(outbuf), &len, int_no_str, 1,
					   NULL, NULL, 0),
			 0);
	ck_assert_uint_eq(len, 2 + 2 + 3 + 4);
	ck_assert_mem_eq(outbuf, "\x0a\x09\x0a\x07\x0a\x01k\x12\x02\x18\x00", 11);
}
END_TEST

/* ---- Decoder ---- */

static void
assert_str(struct pctx_str s, const char *expect)
{
	ck_assert_msg(pctx_str_eq(s, expect), "expected \"%s\", got \"%.*s\"", expect,
		      (int)s.len, s.ptr ? (const char *)s.ptr : "");
}

START_TEST(decode_vectors)
{
	const struct pctx_attr *a;
	size_t i;

	ck_assert_int_eq(pctx_decode((const uint8_t *)sigprof_339, 339, &dec), 0);
	ck_assert_uint_eq(dec.n_resource, N_SIGPROF);
	for (i = 0; i < N_SIGPROF; i++) {
		assert_str(dec.resource[i].key, sigprof_resource[i].key);
		ck_assert_int_eq(dec.resource[i].type, PCTX_V_STRING);
		assert_str(dec.resource[i].str, sigprof_resource[i].value);
	}
	ck_assert_uint_eq(dec.n_attrs, 0);
	ck_assert(!dec.has_threadlocal);
	a = pctx_find_resource(&dec, "service.name");
	ck_assert_ptr_nonnull(a);
	assert_str(a->str, "my-service");
	ck_assert_ptr_null(pctx_find_resource(&dec, "service.nam"));
	ck_assert_ptr_null(pctx_find_resource(&dec, "host.name"));

	ck_assert_int_eq(pctx_decode(minimal_140, sizeof(minimal_140), &dec), 0);
	ck_assert_uint_eq(dec.n_resource, 1);
	assert_str(pctx_find_resource(&dec, "service.name")->str, "demo");
	ck_assert(dec.has_threadlocal);
	assert_str(dec.schema_version, "tlsdesc_v1_dev");
	ck_assert_uint_eq(dec.n_keys, 2);
	assert_str(dec.key_map[0], "http.route");
	assert_str(dec.key_map[1], "http.method");
	ck_assert_uint_eq(dec.n_attrs, 2);
	ck_assert_int_eq(pctx_find_attr(&dec, PCTX_KEY_ATTRIBUTE_KEY_MAP)->type,
			 PCTX_V_ARRAY);

	ck_assert_int_eq(pctx_decode((const uint8_t *)tail_ddrb_115, 115, &dec), 0);
	ck_assert_uint_eq(dec.n_resource, 0);
	ck_assert_uint_eq(dec.n_keys, 1);
	assert_str(dec.key_map[0], "datadog.local_root_span_id");

	ck_assert_int_eq(pctx_decode(tail_otep_125, sizeof(tail_otep_125), &dec), 0);
	ck_assert_uint_eq(dec.n_keys, 3);
	for (i = 0; i < 3; i++)
		assert_str(dec.key_map[i], otep_keys[i]);
}
END_TEST

/* Decode every prefix of a payload.  Only cuts at top-level field
 * boundaries are valid protobuf (a shorter ProcessContext); every other cut
 * must be rejected and must leave the output untouched. */
static void
check_truncation(const uint8_t *buf,
		 size_t len,
		 const size_t *bounds,
		 size_t n_bounds,
		 const unsigned *n_items)
{
	static struct pctx_decoded sentinel;
	size_t cut, i;

	for (cut = 0; cut <= len; cut++) {
		int r;

		memset(&dec, 0x5a, sizeof(dec));
		r = pctx_decode(buf, cut, &dec);
		for (i = 0; i < n_bounds; i++)
			if (bounds[i] == cut)
				break;
		if (i < n_bounds) {
			ck_assert_msg(r == 0, "cut %zu: %d", cut, r);
			ck_assert_uint_eq(dec.n_resource + dec.n_attrs, n_items[i]);
		} else {
			ck_assert_msg(r == -EBADMSG, "cut %zu of %zu: %d", cut, len, r);
			memset(&sentinel, 0x5a, sizeof(sentinel));
			ck_assert(memcmp(&dec, &sentinel, sizeof(dec)) == 0);
		}
	}
}

START_TEST(decode_truncated_every_cut)
{
	static const size_t b140[] = {0, 26, 74, 140};
	static const unsigned n140[] = {0, 1, 2, 3};
	static const size_t b339[] = {0, 339};
	static const unsigned n339[] = {0, 9};
	static const size_t b125[] = {0, 48, 125};
	static const unsigned n125[] = {0, 1, 2};

	check_truncation(minimal_140, sizeof(minimal_140), b140, 4, n140);
	check_truncation((const uint8_t *)sigprof_339, 339, b339, 2, n339);
	check_truncation(tail_otep_125, sizeof(tail_otep_125), b125, 3, n125);
}
END_TEST

START_TEST(decode_bad_args)
{
	ck_assert_int_eq(pctx_decode(NULL, 0, &dec), 0);
	ck_assert_uint_eq(dec.n_resource + dec.n_attrs + dec.n_keys, 0);
	ck_assert_int_eq(pctx_decode(NULL, 1, &dec), -EINVAL);
	ck_assert_int_eq(pctx_decode(minimal_140, sizeof(minimal_140), NULL), -EINVAL);
	ck_assert_int_eq(pctx_decode(outbuf, (size_t)PCTX_PAYLOAD_MAX + 1, &dec),
			 -EINVAL);
	ck_assert_ptr_null(pctx_find_resource(NULL, "a"));
	ck_assert_ptr_null(pctx_find_attr(&dec, NULL));
}
END_TEST

/* A scratch message: encode into b, then nest with msg_put(). */
struct msg {
	uint8_t b[2048];
	struct pb_writer w;
};

static void
msg_init(struct msg *m)
{
	pb_writer_init(&m->w, m->b, sizeof(m->b));
}

static void
msg_put(struct msg *m, uint32_t field, const struct msg *sub)
{
	ck_assert(!sub->w.overflow);
	pb_put_bytes(&m->w, field, sub->b, sub->w.len);
}

static void
put_unknowns(struct msg *m, uint32_t base)
{
	pb_put_uint64(&m->w, base, 1ull << 40);
	pb_put_fixed64(&m->w, base + 1, 0x1122334455667788ull);
	pb_put_bytes(&m->w, base + 2, "\x0a\x02zz", 4);
	pb_put_fixed32(&m->w, base + 3, 0xfeedface);
}

START_TEST(decode_any_order_and_unknown_fields)
{
	/* A payload as a foreign writer might produce it: attributes before
	 * the resource, value before key, Resource.dropped_attributes_count
	 * and entity_refs, KeyValue.key_strindex, and unknown fields of all
	 * four wire types on every level. */
	struct msg top, res, kv, av, arr, el;
	const struct pctx_attr *a;

	msg_init(&top);
	put_unknowns(&top, 100);

	/* attributes: threadlocal.schema_version, value first */
	msg_init(&av);
	put_unknowns(&av, 50);
	pb_put_bytes(&av.w, 1, "tlsdesc_v1_dev", 14);
	msg_init(&kv);
	msg_put(&kv, 2, &av);
	put_unknowns(&kv, 20);
	pb_put_uint64(&kv.w, 3, 7); /* key_strindex */
	pb_put_bytes(&kv.w, 1, PCTX_KEY_SCHEMA_VERSION,
		     strlen(PCTX_KEY_SCHEMA_VERSION));
	msg_put(&top, 2, &kv);

	/* key map with unknown fields between the elements */
	msg_init(&arr);
	put_unknowns(&arr, 30);
	msg_init(&el);
	pb_put_bytes(&el.w, 1, "a.b", 3);
	msg_put(&arr, 1, &el);
	put_unknowns(&arr, 40);
	msg_init(&el);
	put_unknowns(&el, 60);
	pb_put_bytes(&el.w, 1, "c.d", 3);
	msg_put(&arr, 1, &el);
	msg_init(&av);
	msg_put(&av, 5, &arr);
	msg_init(&kv);
	pb_put_bytes(&kv.w, 1, PCTX_KEY_ATTRIBUTE_KEY_MAP,
		     strlen(PCTX_KEY_ATTRIBUTE_KEY_MAP));
	msg_put(&kv, 2, &av);
	msg_put(&top, 2, &kv);

	/* resource with extra fields */
	msg_init(&res);
	pb_put_uint64(&res.w, 2, 3);             /* dropped_attributes_count */
	pb_put_bytes(&res.w, 3, "\x0a\x01x", 3); /* entity_refs */
	put_unknowns(&res, 70);
	msg_init(&av);
	pb_put_bytes(&av.w, 1, "svc", 3);
	msg_init(&kv);
	msg_put(&kv, 2, &av);
	pb_put_bytes(&kv.w, 1, "service.name", 12);
	msg_put(&res, 1, &kv);
	msg_put(&top, 1, &res);
	put_unknowns(&top, 200);

	ck_assert_int_eq(pctx_decode(top.b, top.w.len, &dec), 0);
	ck_assert_uint_eq(dec.n_resource, 1);
	a = pctx_find_resource(&dec, "service.name");
	ck_assert_ptr_nonnull(a);
	ck_assert_int_eq(a->type, PCTX_V_STRING);
	assert_str(a->str, "svc");
	ck_assert(dec.has_threadlocal);
	assert_str(dec.schema_version, "tlsdesc_v1_dev");
	ck_assert_uint_eq(dec.n_keys, 2);
	assert_str(dec.key_map[0], "a.b");
	assert_str(dec.key_map[1], "c.d");
}
END_TEST

/* An unknown field that is a group (wire types 3/4) holding a varint, a
 * LEN field and a nested group. */
static void
put_group(struct msg *m, uint32_t field)
{
	pb_put_tag(&m->w, field, PB_WT_SGROUP);
	pb_put_uint64(&m->w, 1, 300);
	pb_put_bytes(&m->w, 2, "\x0a\x01x", 3);
	pb_put_tag(&m->w, field + 1, PB_WT_SGROUP);
	pb_put_tag(&m->w, field + 1, PB_WT_EGROUP);
	pb_put_tag(&m->w, field, PB_WT_EGROUP);
}

START_TEST(decode_unknown_groups)
{
	/* Groups are valid wire format for unknown fields, and the protobuf
	 * libraries of other readers (the eBPF profiler's Go, prost) step
	 * over them: a payload with one must not be refused as a whole. */
	struct msg top, res, kv, av, arr, el;

	msg_init(&top);
	put_group(&top, 100);

	msg_init(&av);
	put_group(&av, 50);
	pb_put_bytes(&av.w, 1, "svc", 3);
	msg_init(&kv);
	pb_put_bytes(&kv.w, 1, "service.name", 12);
	put_group(&kv, 20);
	msg_put(&kv, 2, &av);
	msg_init(&res);
	put_group(&res, 70);
	msg_put(&res, 1, &kv);
	msg_put(&top, 1, &res);

	msg_init(&el);
	pb_put_bytes(&el.w, 1, "a.b", 3);
	put_group(&el, 60);
	msg_init(&arr);
	put_group(&arr, 30);
	msg_put(&arr, 1, &el);
	msg_init(&av);
	msg_put(&av, 5, &arr);
	msg_init(&kv);
	pb_put_bytes(&kv.w, 1, PCTX_KEY_ATTRIBUTE_KEY_MAP,
		     strlen(PCTX_KEY_ATTRIBUTE_KEY_MAP));
	msg_put(&kv, 2, &av);
	msg_put(&top, 2, &kv);
	put_group(&top, 200);

	ck_assert_int_eq(pctx_decode(top.b, top.w.len, &dec), 0);
	ck_assert_uint_eq(dec.n_resource, 1);
	assert_str(dec.resource[0].key, "service.name");
	ck_assert_int_eq(dec.resource[0].type, PCTX_V_STRING);
	assert_str(dec.resource[0].str, "svc");
	ck_assert_uint_eq(dec.n_keys, 1);
	assert_str(dec.key_map[0], "a.b");
}
END_TEST

START_TEST(decode_value_types)
{
	struct msg top, kv, av, arr, el, kvl;
	struct pctx_iter it;
	struct pctx_attr v;
	const struct pctx_attr *a;
	unsigned n;

	msg_init(&top);
#define ADD_ATTR(key_, fill_)                               \
	do {                                                \
		msg_init(&av);                              \
		fill_;                                      \
		msg_init(&kv);                              \
		pb_put_bytes(&kv.w, 1, key_, strlen(key_)); \
		msg_put(&kv, 2, &av);                       \
		msg_put(&top, 2, &kv);                      \
	} while (0)

	ADD_ATTR("int.small", pb_put_int64(&av.w, 3, 300));
	ADD_ATTR("int.neg", pb_put_int64(&av.w, 3, -1));
	ADD_ATTR("int.min", pb_put_int64(&av.w, 3, INT64_MIN));
	ADD_ATTR("bool.t", pb_put_bool(&av.w, 2, true));
	ADD_ATTR("bool.f", pb_put_bool(&av.w, 2, false));
	ADD_ATTR("double", pb_put_double(&av.w, 4, 3.25));
	ADD_ATTR("bytes", pb_put_bytes(&av.w, 7, "\x00\x01\x02", 3));
	ADD_ATTR("strindex", pb_put_uint64(&av.w, 8, 5));
	ADD_ATTR("empty", (void)0);
	/* oneof: the last value on the wire wins */
	ADD_ATTR("last.wins",
		 (pb_put_bytes(&av.w, 1, "first", 5), pb_put_int64(&av.w, 3, 9)));
	/* array of mixed elements */
	msg_init(&arr);
	msg_init(&el);
	pb_put_bytes(&el.w, 1, "s", 1);
	msg_put(&arr, 1, &el);
	msg_init(&el);
	pb_put_int64(&el.w, 3, -7);
	msg_put(&arr, 1, &el);
	msg_init(&el);
	msg_put(&arr, 1, &el); /* empty AnyValue */
	ADD_ATTR("array", msg_put(&av, 5, &arr));
	/* kvlist {x: true} */
	msg_init(&kvl);
	msg_init(&el);
	pb_put_bool(&el.w, 2, true);
	msg_init(&kv);
	pb_put_bytes(&kv.w, 1, "x", 1);
	msg_put(&kv, 2, &el);
	msg_put(&kvl, 1, &kv);
	ADD_ATTR("kvlist", msg_put(&av, 6, &kvl));
#undef ADD_ATTR
	/* a KeyValue without a value */
	msg_init(&kv);
	pb_put_bytes(&kv.w, 1, "novalue", 7);
	msg_put(&top, 2, &kv);

	ck_assert_int_eq(pctx_decode(top.b, top.w.len, &dec), 0);
	ck_assert_uint_eq(dec.n_attrs, 13);
	ck_assert(!dec.has_threadlocal);

	a = pctx_find_attr(&dec, "int.small");
	ck_assert_int_eq(a->type, PCTX_V_INT);
	ck_assert_int_eq(a->i, 300);
	a = pctx_find_attr(&dec, "int.neg");
	ck_assert_int_eq(a->type, PCTX_V_INT);
	ck_assert_int_eq(a->i, -1);
	ck_assert(pctx_find_attr(&dec, "int.min")->i == INT64_MIN);
	a = pctx_find_attr(&dec, "bool.t");
	ck_assert_int_eq(a->type, PCTX_V_BOOL);
	ck_assert(a->b);
	ck_assert(!pctx_find_attr(&dec, "bool.f")->b);
	a = pctx_find_attr(&dec, "double");
	ck_assert_int_eq(a->type, PCTX_V_DOUBLE);
	ck_assert(a->d == 3.25);
	a = pctx_find_attr(&dec, "bytes");
	ck_assert_int_eq(a->type, PCTX_V_BYTES);
	ck_assert_uint_eq(a->str.len, 3);
	ck_assert_mem_eq(a->str.ptr, "\x00\x01\x02", 3);
	a = pctx_find_attr(&dec, "strindex");
	ck_assert_int_eq(a->type, PCTX_V_OTHER);
	ck_assert_int_eq(a->i, 5);
	ck_assert_int_eq(pctx_find_attr(&dec, "empty")->type, PCTX_V_NONE);
	ck_assert_int_eq(pctx_find_attr(&dec, "novalue")->type, PCTX_V_NONE);
	a = pctx_find_attr(&dec, "last.wins");
	ck_assert_int_eq(a->type, PCTX_V_INT);
	ck_assert_int_eq(a->i, 9);
	ck_assert_ptr_null(a->str.ptr);

	a = pctx_find_attr(&dec, "array");
	ck_assert_int_eq(a->type, PCTX_V_ARRAY);
	ck_assert_int_eq(pctx_iter_init(&it, a), 0);
	ck_assert_int_eq(pctx_iter_next(&it, &v), 0);
	ck_assert_int_eq(v.type, PCTX_V_STRING);
	assert_str(v.str, "s");
	ck_assert_uint_eq(v.key.len, 0);
	ck_assert_int_eq(pctx_iter_next(&it, &v), 0);
	ck_assert_int_eq(v.type, PCTX_V_INT);
	ck_assert_int_eq(v.i, -7);
	ck_assert_int_eq(pctx_iter_next(&it, &v), 0);
	ck_assert_int_eq(v.type, PCTX_V_NONE);
	ck_assert_int_eq(pctx_iter_next(&it, &v), -ENOENT);
	ck_assert_int_eq(pctx_iter_next(&it, &v), -ENOENT);

	a = pctx_find_attr(&dec, "kvlist");
	ck_assert_int_eq(a->type, PCTX_V_KVLIST);
	ck_assert_int_eq(pctx_iter_init(&it, a), 0);
	for (n = 0; pctx_iter_next(&it, &v) == 0; n++) {
		assert_str(v.key, "x");
		ck_assert_int_eq(v.type, PCTX_V_BOOL);
		ck_assert(v.b);
	}
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(pctx_iter_init(&it, pctx_find_attr(&dec, "bytes")), -EINVAL);
}
END_TEST

START_TEST(decode_nested_malformed)
{
	/* Errors deep inside are errors of the whole payload: a group not
	 * ended in an array element, a LEN overrun in a kvlist entry, a
	 * truncated varint in a resource AnyValue. */
	struct msg top, kv, av, arr;

	msg_init(&arr);
	pb_put_bytes(&arr.w, 1, "\x0b", 1); /* element = start group */
	msg_init(&av);
	msg_put(&av, 5, &arr);
	msg_init(&kv);
	pb_put_bytes(&kv.w, 1, "k", 1);
	msg_put(&kv, 2, &av);
	msg_init(&top);
	msg_put(&top, 2, &kv);
	ck_assert_int_eq(pctx_decode(top.b, top.w.len, &dec), -EBADMSG);

	msg_init(&arr);
	pb_put_bytes(&arr.w, 1, "\x0a\x09k", 3); /* kvlist entry key overruns */
	msg_init(&av);
	msg_put(&av, 6, &arr);
	msg_init(&kv);
	msg_put(&kv, 2, &av);
	msg_init(&top);
	msg_put(&top, 2, &kv);
	ck_assert_int_eq(pctx_decode(top.b, top.w.len, &dec), -EBADMSG);

	msg_init(&av);
	pb_put_raw(&av.w, "\x18\xff", 2); /* int_value, varint cut */
	msg_init(&kv);
	msg_put(&kv, 2, &av);
	msg_init(&arr);
	msg_put(&arr, 1, &kv);
	msg_init(&top);
	msg_put(&top, 1, &arr);
	ck_assert_int_eq(pctx_decode(top.b, top.w.len, &dec), -EBADMSG);

	/* A top-level group not ended, an end without a start. */
	ck_assert_int_eq(pctx_decode((const uint8_t *)"\x0b", 1, &dec), -EBADMSG);
	ck_assert_int_eq(pctx_decode((const uint8_t *)"\x0c", 1, &dec), -EBADMSG);
}
END_TEST

/* One attribute whose value is an array nested depth times. */
static size_t
nested_arrays(unsigned depth, uint8_t *out, size_t cap)
{
	static struct msg m[2];
	struct msg arr, kv;
	struct pb_writer w;
	unsigned i;

	msg_init(&m[0]);
	pb_put_bytes(&m[0].w, 1, "leaf", 4); /* AnyValue{string} */
	for (i = 0; i < depth; i++) {
		struct msg *src = &m[i % 2], *dst = &m[(i + 1) % 2];

		msg_init(&arr);
		msg_put(&arr, 1, src);
		msg_init(dst);
		msg_put(dst, 5, &arr);
	}
	msg_init(&kv);
	pb_put_bytes(&kv.w, 1, "k", 1);
	msg_put(&kv, 2, &m[depth % 2]);
	pb_writer_init(&w, out, cap);
	pb_put_bytes(&w, 2, kv.b, kv.w.len);
	ck_assert(!w.overflow);
	return w.len;
}

START_TEST(decode_depth_limit)
{
	size_t len;

	/* Deep nesting from a hostile process is bounded, not a stack
	 * overflow; a moderate depth is accepted. */
	len = nested_arrays(16, outbuf, sizeof(outbuf));
	ck_assert_int_eq(pctx_decode(outbuf, len, &dec), 0);
	ck_assert_int_eq(dec.attrs[0].type, PCTX_V_ARRAY);
	len = nested_arrays(17, outbuf, sizeof(outbuf));
	ck_assert_int_eq(pctx_decode(outbuf, len, &dec), -EBADMSG);
	len = nested_arrays(200, outbuf, sizeof(outbuf));
	ck_assert_int_eq(pctx_decode(outbuf, len, &dec), -EBADMSG);
}
END_TEST

START_TEST(decode_limits)
{
	static struct pctx_kv res[PCTX_MAX_ATTRS + 5];
	static char keys[PCTX_MAX_ATTRS + 5][16];
	struct msg arr, el, av, kv, top;
	size_t len, i;

	for (i = 0; i < PCTX_MAX_ATTRS + 5; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%zu", i);
		res[i].key = keys[i];
		res[i].value = "v";
	}
	/* a duplicate key: the later entry is found */
	res[PCTX_MAX_ATTRS - 1].key = "k3";
	res[PCTX_MAX_ATTRS - 1].value = "later";
	ck_assert_int_eq(pctx_encode(outbuf, sizeof(outbuf), &len, res,
				     PCTX_MAX_ATTRS + 5, NULL, NULL, 0),
			 0);
	ck_assert_int_eq(pctx_decode(outbuf, len, &dec), 0);
	ck_assert_uint_eq(dec.n_resource, PCTX_MAX_ATTRS);
	ck_assert_uint_eq(dec.n_resource_dropped, 5);
	assert_str(pctx_find_resource(&dec, "k3")->str, "later");

	/* A foreign key map longer than 256, with a non-string element
	 * that keeps its index. */
	msg_init(&arr);
	for (i = 0; i < PCTX_MAX_KEYS + 3; i++) {
		msg_init(&el);
		if (i == 1)
			pb_put_int64(&el.w, 3, 1);
		else
			pb_put_bytes(&el.w, 1, "k", 1);
		msg_put(&arr, 1, &el);
	}
	msg_init(&av);
	msg_put(&av, 5, &arr);
	msg_init(&kv);
	pb_put_bytes(&kv.w, 1, PCTX_KEY_ATTRIBUTE_KEY_MAP,
		     strlen(PCTX_KEY_ATTRIBUTE_KEY_MAP));
	msg_put(&kv, 2, &av);
	msg_init(&top);
	msg_put(&top, 2, &kv);
	ck_assert_int_eq(pctx_decode(top.b, top.w.len, &dec), 0);
	ck_assert_uint_eq(dec.n_keys, PCTX_MAX_KEYS);
	ck_assert_uint_eq(dec.n_keys_dropped, 3);
	ck_assert_ptr_null(dec.key_map[1].ptr);
	ck_assert_uint_eq(dec.key_map[1].len, 0);
	assert_str(dec.key_map[2], "k");
	/* No schema string: the key map alone does not make it threadlocal. */
	ck_assert(!dec.has_threadlocal);
}
END_TEST

START_TEST(decode_fuzz)
{
	/* Random byte flips and cuts of the reference payloads: the decoder
	 * returns 0 or an error, and every string it returns lies inside the
	 * input (ASan/valgrind check the reads). */
	static uint8_t buf[400];
	unsigned seed = 4711, iter, i;

	for (iter = 0; iter < 20000; iter++) {
		const uint8_t *src =
			(iter & 1) ? minimal_140 : (const uint8_t *)sigprof_339;
		size_t len = (iter & 1) ? sizeof(minimal_140) : 339;
		unsigned flips = 1 + (unsigned)rand_r(&seed) % 4;
		int r;

		memcpy(buf, src, len);
		for (i = 0; i < flips; i++)
			buf[(unsigned)rand_r(&seed) % len] = (uint8_t)rand_r(&seed);
		if (rand_r(&seed) % 4 == 0)
			len = (size_t)rand_r(&seed) % len;
		r = pctx_decode(buf, len, &dec);
		ck_assert(r == 0 || r == -EBADMSG);
		if (r < 0)
			continue;
		for (i = 0; i < dec.n_resource; i++) {
			const struct pctx_attr *a = &dec.resource[i];

			ck_assert(a->key.len == 0 ||
				  (a->key.ptr >= buf &&
				   a->key.ptr + a->key.len <= buf + len));
			ck_assert(a->str.len == 0 ||
				  (a->str.ptr >= buf &&
				   a->str.ptr + a->str.len <= buf + len));
		}
	}
}
END_TEST

/* ---- maps names ---- */

START_TEST(map_names)
{
	static const struct {
		const char *path;
		enum pctx_map_kind kind;
	} cases[] = {
		{"[anon_shmem:OTEL_CTX]", PCTX_MAP_ANON_SHMEM},
		{"[anon_shmem:OTEL_CTX] (deleted)", PCTX_MAP_ANON_SHMEM},
		{"[anon:OTEL_CTX]", PCTX_MAP_ANON},
		{"[anon:OTEL_CTX] (deleted)", PCTX_MAP_ANON},
		{"/memfd:OTEL_CTX", PCTX_MAP_MEMFD},
		{"/memfd:OTEL_CTX (deleted)", PCTX_MAP_MEMFD},
		/* look-alikes */
		{"/memfd:OTEL_CTX_BACKUP", PCTX_MAP_NONE},
		{"/memfd:OTEL_CTX_BACKUP (deleted)", PCTX_MAP_NONE},
		{"[anon:OTEL_CTX2]", PCTX_MAP_NONE},
		{"[anon_shmem:OTEL_CTX2]", PCTX_MAP_NONE},
		{"OTEL_CTX", PCTX_MAP_NONE},
		{"/tmp/OTEL_CTX", PCTX_MAP_NONE},
		{"/memfd:OTEL_CTX2", PCTX_MAP_NONE},
		{"/memfd:otel_ctx", PCTX_MAP_NONE},
		{"/memfd:OTEL_CTX(deleted)", PCTX_MAP_NONE},
		{"/memfd:OTEL_CTX (deleted) (deleted)", PCTX_MAP_NONE},
		{"/memfd:OTEL_CTX (deleted)x", PCTX_MAP_NONE},
		{"/memfd:OTEL_CTX ", PCTX_MAP_NONE},
		{"/memfd:OTEL_CT", PCTX_MAP_NONE},
		{" /memfd:OTEL_CTX", PCTX_MAP_NONE},
		{"[anon:OTEL_CTX", PCTX_MAP_NONE},
		{"[anon_shmem:OTEL_CTX", PCTX_MAP_NONE},
		{"[anon:OTEL_CTX]]", PCTX_MAP_NONE},
		{"[heap]", PCTX_MAP_NONE},
		{"", PCTX_MAP_NONE},
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ck_assert_msg(
			pctx_map_name_kind(cases[i].path, strlen(cases[i].path)) ==
				cases[i].kind,
			"\"%s\"", cases[i].path);
	ck_assert_int_eq(pctx_map_name_kind(NULL, 0), PCTX_MAP_NONE);
	/* The length bounds the name, not a NUL. */
	ck_assert_int_eq(pctx_map_name_kind("/memfd:OTEL_CTX_BACKUP", 15),
			 PCTX_MAP_MEMFD);
	ck_assert_int_eq(pctx_map_name_kind("[anon:OTEL_CTX]", 14), PCTX_MAP_NONE);
}
END_TEST

TEST_SUITE(process_ctx_suite)
{
	Suite *s = suite_create("Process context (OTEP-4719)");
	TCase *tc;

	tc = tcase_create("Header");
	tcase_add_test(tc, header_layout);
	suite_add_tcase(s, tc);

	tc = tcase_create("Encoder vectors");
	tcase_add_test(tc, encode_sigprof_339);
	tcase_add_test(tc, encode_ddrb_tail_115);
	tcase_add_test(tc, encode_otep_tail_125);
	tcase_add_test(tc, encode_minimal_140);
	tcase_add_test(tc, encode_empty_and_multibyte);
	tcase_add_test(tc, encode_bad_args);
	tcase_add_test(tc, encode_typed_int);
	tcase_add_test(tc, encode_typed_int_round_trip);
	tcase_add_test(tc, encode_typed_strings_match);
	tcase_add_test(tc, encode_typed_bad_args);
	suite_add_tcase(s, tc);

	tc = tcase_create("Decoder");
	tcase_add_test(tc, decode_vectors);
	tcase_add_test(tc, decode_truncated_every_cut);
	tcase_add_test(tc, decode_bad_args);
	tcase_add_test(tc, decode_any_order_and_unknown_fields);
	tcase_add_test(tc, decode_unknown_groups);
	tcase_add_test(tc, decode_value_types);
	tcase_add_test(tc, decode_nested_malformed);
	tcase_add_test(tc, decode_depth_limit);
	tcase_add_test(tc, decode_limits);
	tcase_add_test(tc, decode_fuzz);
	suite_add_tcase(s, tc);

	tc = tcase_create("Mapping names");
	tcase_add_test(tc, map_names);
	suite_add_tcase(s, tc);

	return s;
}
