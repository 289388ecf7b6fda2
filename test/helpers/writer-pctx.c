/* SPDX-License-Identifier: Apache-2.0 */
/* Publishes a hand-made OTEP-4719 process context and nothing else: a test
 * writer for readers that must tell who published a context (ctxshim
 * status).  The payload is encoded here by hand, independently of
 * proc-context/, so a reader bug and an encoder bug cannot cancel out.
 *
 *   writer-pctx DISTRO VERSION SERVICE
 *               [--unfinished | --bad-keys | --heap | --group | --open-group |
 *                --field-zero | --long-varint | --edges]
 *
 * Resource: telemetry.distro.name=DISTRO, telemetry.distro.version=VERSION,
 * service.name=SERVICE, service.instance.id, an int, a bool, test.dup
 * twice (first "old", then "new": keys MUST be unique, but a reader
 * meets writers that repeat one), a dropped_attributes_count; extra
 * attributes: threadlocal.attribute_key_map
 * (an array); plus a top-level field number the reader does not know.
 * --unfinished leaves the timestamp 0 (a writer that never completes).
 * --bad-keys adds test.bad\xff="old" and test.bad\xfe="new": keys that are
 * not UTF-8, and differ only there.
 * --group adds unknown fields that are groups (wire types 3/4, deprecated
 * but still met): one with a group nested in it, first in the Resource,
 * and one at the end of the payload; a reader steps over them.
 * --open-group ends the payload inside a group that has no end tag.
 * --field-zero ends the payload with a varint field of number 0, and
 * --long-varint with one whose value takes 10 bytes and more than 64 bits:
 * both malformed (a protobuf field number is at least 1).
 * --edges adds resource doubles test.max=DBL_MAX and test.huge=+infinity
 * (JSON has the first, and no infinity), and extra attributes
 * "threadlocal." and "threadlocalx" (the first in the threadlocal.
 * namespace, the second not).
 * --heap maps only the 32-byte header and puts the payload in a malloc()ed
 * buffer, as the sig-profiling reference writer and libdatadog do (the
 * OTEP lets the payload be anywhere); without it the payload follows the
 * header in the mapping, as ctxshim does.
 * Prints "READY <pid>" when published and waits until stdin is closed.
 */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct wbuf {
	uint8_t data[4096];
	size_t len;
};

static void
put_byte(struct wbuf *b, uint8_t v)
{
	if (b->len >= sizeof(b->data)) {
		fprintf(stderr, "writer-pctx: payload too large\n");
		exit(2);
	}
	b->data[b->len++] = v;
}

static void
put_varint(struct wbuf *b, uint64_t v)
{
	while (v >= 0x80) {
		put_byte(b, (uint8_t)(v | 0x80));
		v >>= 7;
	}
	put_byte(b, (uint8_t)v);
}

static void
put_bytes(struct wbuf *b, unsigned field, const void *p, size_t n)
{
	put_varint(b, (uint64_t)field << 3 | 2);
	put_varint(b, n);
	for (size_t i = 0; i < n; i++)
		put_byte(b, ((const uint8_t *)p)[i]);
}

static void
put_string(struct wbuf *b, unsigned field, const char *s)
{
	put_bytes(b, field, s, strlen(s));
}

/* Unknown group 9 { varint, group 10 { string, fixed32 }, fixed64 }; with
 * open, group 9 has no end tag. */
static void
put_group(struct wbuf *b, bool open)
{
	put_varint(b, 9 << 3 | 3);
	put_varint(b, 1 << 3 | 0);
	put_varint(b, 300);
	put_varint(b, 10 << 3 | 3);
	put_string(b, 2, "in a group");
	put_varint(b, 3 << 3 | 5);
	for (int i = 0; i < 4; i++)
		put_byte(b, 0xee);
	put_varint(b, 10 << 3 | 4);
	put_varint(b, 4 << 3 | 1);
	for (int i = 0; i < 8; i++)
		put_byte(b, 0xdd);
	if (!open)
		put_varint(b, 9 << 3 | 4);
}

/* KeyValue{key, value: AnyValue{string_value}} as field FIELD of B. */
static void
put_kv_string(struct wbuf *b, unsigned field, const char *key, const char *value)
{
	struct wbuf any = {.len = 0}, kv = {.len = 0};

	put_string(&any, 1, value);
	put_string(&kv, 1, key);
	put_bytes(&kv, 2, any.data, any.len);
	put_bytes(b, field, kv.data, kv.len);
}

/* KeyValue{key, value: AnyValue{int_value | bool_value}} (varint field). */
static void
put_kv_varint(
	struct wbuf *b, unsigned field, const char *key, unsigned any_field, uint64_t v)
{
	struct wbuf any = {.len = 0}, kv = {.len = 0};

	put_varint(&any, (uint64_t)any_field << 3 | 0);
	put_varint(&any, v);
	put_string(&kv, 1, key);
	put_bytes(&kv, 2, any.data, any.len);
	put_bytes(b, field, kv.data, kv.len);
}

/* KeyValue{key, value: AnyValue{double_value}} (fixed64 field 4). */
static void
put_kv_double(struct wbuf *b, unsigned field, const char *key, uint64_t bits)
{
	struct wbuf any = {.len = 0}, kv = {.len = 0};

	put_varint(&any, 4 << 3 | 1);
	for (int i = 0; i < 8; i++)
		put_byte(&any, (uint8_t)(bits >> 8 * i));
	put_string(&kv, 1, key);
	put_bytes(&kv, 2, any.data, any.len);
	put_bytes(b, field, kv.data, kv.len);
}

static void
put_kv_array(struct wbuf *b,
	     unsigned field,
	     const char *key,
	     const char *const *items,
	     size_t n)
{
	struct wbuf arr = {.len = 0}, any = {.len = 0}, kv = {.len = 0};

	for (size_t i = 0; i < n; i++) {
		struct wbuf item = {.len = 0};

		put_string(&item, 1, items[i]);
		put_bytes(&arr, 1, item.data, item.len);
	}
	put_bytes(&any, 5, arr.data, arr.len);
	put_string(&kv, 1, key);
	put_bytes(&kv, 2, any.data, any.len);
	put_bytes(b, field, kv.data, kv.len);
}

int
main(int argc, char **argv)
{
	static const char *const keys[] = {"http.request.method", "url.path"};
	struct wbuf res = {.len = 0}, pc = {.len = 0};
	bool unfinished = argc > 4 && strcmp(argv[4], "--unfinished") == 0;
	bool bad_keys = argc > 4 && strcmp(argv[4], "--bad-keys") == 0;
	bool heap = argc > 4 && strcmp(argv[4], "--heap") == 0;
	bool group = argc > 4 && strcmp(argv[4], "--group") == 0;
	bool open_group = argc > 4 && strcmp(argv[4], "--open-group") == 0;
	bool field_zero = argc > 4 && strcmp(argv[4], "--field-zero") == 0;
	bool long_varint = argc > 4 && strcmp(argv[4], "--long-varint") == 0;
	bool edges = argc > 4 && strcmp(argv[4], "--edges") == 0;
	size_t map_len = heap ? 32 : 4096;
	uint8_t *payload;
	struct timespec ts;
	uint64_t now, ptr;
	uint32_t u32;
	uint8_t *map;
	char buf[64];
	int fd;

	if (argc < 4) {
		fprintf(stderr, "usage: writer-pctx DISTRO VERSION SERVICE "
				"[--unfinished | --bad-keys | --heap | --group | "
				"--open-group | --field-zero | --long-varint | "
				"--edges]\n");
		return 2;
	}
	if (group)
		put_group(&res, false);
	put_kv_string(&res, 1, "service.name", argv[3]);
	put_kv_string(&res, 1, "service.instance.id",
		      "0f0e0d0c-0b0a-4908-8706-050403020100");
	put_kv_varint(&res, 1, "process.pid", 3, (uint64_t)getpid());
	put_kv_varint(&res, 1, "test.flag", 2, 1);
	put_kv_string(&res, 1, "test.dup", "old");
	put_kv_string(&res, 1, "telemetry.distro.name", argv[1]);
	put_kv_string(&res, 1, "telemetry.distro.version", argv[2]);
	put_kv_string(&res, 1, "test.dup", "new");
	if (bad_keys) {
		put_kv_string(&res, 1, "test.bad\xff", "old");
		put_kv_string(&res, 1, "test.bad\xfe", "new");
	}
	if (edges) {
		/* IEEE 754 bits, as the wire has them */
		put_kv_double(&res, 1, "test.max", 0x7fefffffffffffffu);
		put_kv_double(&res, 1, "test.huge", 0x7ff0000000000000u);
	}
	put_varint(&res, 2 << 3 | 0); /* dropped_attributes_count */
	put_varint(&res, 0);
	put_bytes(&pc, 1, res.data, res.len);
	put_kv_array(&pc, 2, "threadlocal.attribute_key_map", keys, 2);
	if (edges) {
		put_kv_string(&pc, 2, "threadlocal.", "in");
		put_kv_string(&pc, 2, "threadlocalx", "out");
	}
	put_varint(&pc, 15 << 3 | 1); /* unknown fixed64 field */
	for (int i = 0; i < 8; i++)
		put_byte(&pc, 0xff);
	if (group || open_group)
		put_group(&pc, open_group);
	if (field_zero) {
		put_varint(&pc, 0 << 3 | 0);
		put_varint(&pc, 1);
	}
	if (long_varint) {
		put_varint(&pc, 14 << 3 | 0);
		for (int i = 0; i < 9; i++)
			put_byte(&pc, 0xff);
		put_byte(&pc, 0x02);
	}

	fd = memfd_create("OTEL_CTX", MFD_CLOEXEC);
	if (fd < 0) {
		perror("writer-pctx: memfd_create");
		return 2;
	}
	if (ftruncate(fd, (off_t)map_len) < 0) {
		perror("writer-pctx: ftruncate");
		return 2;
	}
	map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED || 32 + pc.len > 4096) {
		perror("writer-pctx: mmap");
		return 2;
	}
	payload = heap ? malloc(pc.len) : map + 32;
	if (!payload) {
		perror("writer-pctx: malloc");
		return 2;
	}
	/* Header fields, payload (after the header or on the heap), timestamp
	 * last. */
	memcpy(payload, pc.data, pc.len);
	memcpy(map, "OTEL_CTX", 8);
	u32 = 2;
	memcpy(map + 8, &u32, 4);
	u32 = (uint32_t)pc.len;
	memcpy(map + 12, &u32, 4);
	ptr = (uint64_t)(uintptr_t)payload;
	memcpy(map + 24, &ptr, 8);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	clock_gettime(CLOCK_BOOTTIME, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	if (!unfinished)
		__atomic_store_n((uint64_t *)(void *)(map + 16), now, __ATOMIC_RELEASE);

	printf("READY %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(buf, sizeof(buf), stdin))
		;
	return 0;
}
