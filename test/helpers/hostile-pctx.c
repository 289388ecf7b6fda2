/* SPDX-License-Identifier: Apache-2.0 */
/* Publishes a broken or hostile OTEP-4719 process context, for ctxdump's
 * hostile target tests.  The executable also defines and exports
 * otel_thread_ctx_v1 (local-exec) with a valid record on the main thread
 * (attributes with key indexes 0, 1 and 255), so the dump itself works.
 *
 *   hostile-pctx MODE
 *
 *   torn          the header's timestamp stays 0 (a writer that died
 *                 mid-update)
 *   oversized     payload_size 2 MiB, above the readers' 1 MiB cap
 *   size-max      payload_size 0xffffffff
 *   unmapped      the payload pointer points into an unmapped page
 *   malformed     a payload that is no valid protobuf
 *   bad-version   version 3
 *   deep          arrays nested 200 deep
 *   strings       a valid payload whose service name, instance id and
 *                 key-map names carry ANSI escapes, newlines and invalid
 *                 UTF-8, with 300 keys (more than a record can index)
 *   churn         a thread republishes all the time, with the payload
 *                 changing size and place (the seqlock is exercised)
 *   exec          the mapping is executable (readers must ignore it)
 *   signature     a mapping named OTEL_CTX whose header says OTEL_CTY
 *   schema        a valid payload naming the thread-context schema
 *                 "tls_v9" (a record layout no reader knows yet)
 *   empty-key     a valid payload whose key map names index 0 "" (the
 *                 record's GET has no name to be published under)
 *
 * Prints "READY <pid>" and blocks until stdin is closed (exit 0). */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "process-ctx.h"
#include "protobuf.h"
#include "thread-record.h"

__attribute__((visibility("default"))) __thread void *otel_thread_ctx_v1;

#define MAP_SIZE (1u << 20)

static struct otel_process_ctx_header *hdr;
static uint8_t *area; /* payload space inside the mapping */
static atomic_bool stopping;

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
map_ctx(int prot)
{
	int fd = memfd_create("OTEL_CTX", MFD_CLOEXEC);
	void *p;

	if (fd < 0 || ftruncate(fd, MAP_SIZE) < 0) {
		perror("memfd");
		exit(1);
	}
	p = mmap(NULL, MAP_SIZE, prot, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	close(fd);
	hdr = p;
	area = (uint8_t *)p + 4096;
}

static void
publish(const void *payload, size_t len, uint32_t version, bool finish)
{
	if (payload && len && payload != area)
		memcpy(area, payload, len);
	hdr->monotonic_published_at_ns = 0;
	atomic_thread_fence(memory_order_seq_cst);
	memcpy(hdr->signature, PCTX_SIGNATURE, PCTX_SIGNATURE_LEN);
	hdr->version = version;
	hdr->payload_size = (uint32_t)len;
	hdr->payload = (uint64_t)(uintptr_t)area;
	atomic_thread_fence(memory_order_seq_cst);
	if (finish)
		hdr->monotonic_published_at_ns = now_ns();
}

/* ArrayValue nested depth times: AnyValue{array_value{values: ...}}. */
static size_t
deep(uint8_t *out, size_t cap, unsigned depth)
{
	/* built from the inside out: each level wraps the previous one in
	 * AnyValue.array_value (field 5) and ArrayValue.values (field 1) */
	size_t len = 2, i;
	uint8_t *p = out + cap - 2;

	p[0] = 0x08; /* AnyValue.bool_value */
	p[1] = 1;
	for (i = 0; i < depth && len + 4 <= cap / 2; i++) {
		/* values: 0x0a len; array_value: 0x2a len (len < 128 needs one
		 * byte; use two-byte varints to keep it simple) */
		p -= 3;
		p[0] = 0x0a;
		p[1] = (uint8_t)(0x80 | (len & 0x7f));
		p[2] = (uint8_t)(len >> 7);
		len += 3;
		p -= 3;
		p[0] = 0x2a;
		p[1] = (uint8_t)(0x80 | (len & 0x7f));
		p[2] = (uint8_t)(len >> 7);
		len += 3;
	}
	/* KeyValue{key "d", value} in ProcessContext.attributes (field 2) */
	{
		uint8_t head[16];
		size_t kv = 3 + 3 + len, h = 0;

		head[h++] = 0x12;
		head[h++] = (uint8_t)(0x80 | (kv & 0x7f));
		head[h++] = (uint8_t)(kv >> 7);
		head[h++] = 0x0a;
		head[h++] = 1;
		head[h++] = 'd';
		head[h++] = 0x12;
		head[h++] = (uint8_t)(0x80 | (len & 0x7f));
		head[h++] = (uint8_t)(len >> 7);
		memmove(out + h, p, len);
		memcpy(out, head, h);
		return h + len;
	}
}

/* A payload of res, the schema and the key map names[0..n), which is
 * appended by hand: pctx_encode() refuses more than 256 keys and empty
 * names (a later key map replaces the earlier one). */
static size_t
with_key_map(uint8_t *out,
	     size_t cap,
	     const struct pctx_kv *res,
	     size_t n_res,
	     const char *const *names,
	     size_t n)
{
	static const char km[] = PCTX_KEY_ATTRIBUTE_KEY_MAP;
	size_t arr = 0, av, kv, len = 0, i;
	struct pb_writer w;

	for (i = 0; i < n; i++)
		arr += pb_len_field_size(1, pb_len_field_size(1, strlen(names[i])));
	if (pctx_encode(out, cap, &len, res, n_res, PCTX_SCHEMA_VERSION, NULL, 0) < 0) {
		fprintf(stderr, "hostile-pctx: encode failed\n");
		exit(1);
	}
	av = pb_len_field_size(5, arr);
	kv = pb_len_field_size(1, sizeof(km) - 1) + pb_len_field_size(2, av);
	pb_writer_init(&w, out + len, cap - len);
	pb_put_len_header(&w, 2, kv);
	pb_put_bytes(&w, 1, km, sizeof(km) - 1);
	pb_put_len_header(&w, 2, av);
	pb_put_len_header(&w, 5, arr);
	for (i = 0; i < n; i++) {
		size_t nl = strlen(names[i]);

		pb_put_len_header(&w, 1, pb_len_field_size(1, nl));
		pb_put_bytes(&w, 1, names[i], nl);
	}
	if (pb_writer_finish(&w, &i) < 0) {
		fprintf(stderr, "hostile-pctx: key map too large\n");
		exit(1);
	}
	return len + i;
}

/* 300 keys, more than a record can index. */
static size_t
hostile_strings(uint8_t *out, size_t cap)
{
	static const struct pctx_kv res[] = {
		{"service.name", "\x1b[2Jevil\nservice\r"},
		{"service.instance.id", "\xff\xfe\xc3(\x9b"
					"31m"},
		{"\x1b]0;title\x07key", "value\x1b[0m"},
	};
	static char names[300][24];
	static const char *ptrs[300];
	size_t i;

	for (i = 0; i < 300; i++) {
		snprintf(names[i], sizeof(names[i]), "k%zu\x1b[%zum\n\xc0", i, i % 8);
		ptrs[i] = names[i];
	}
	return with_key_map(out, cap, res, 3, ptrs, 300);
}

static void *
churner(void *arg)
{
	static const struct pctx_kv res[] = {{"service.name", "churn"}};
	static uint8_t buf[2][8192];
	static const char *const keys[] = {"http.request.method", "url.path"};
	uint64_t n = 0;

	(void)arg;
	while (!atomic_load(&stopping)) {
		uint8_t *b = buf[n & 1];
		size_t len = 0, extra = (n * 37) % 4000;

		if (pctx_encode(b, sizeof(buf[0]), &len, res, 1, PCTX_SCHEMA_VERSION,
				keys, 2) < 0)
			abort();
		/* unknown trailing fields change the size (field 15, LEN) */
		b[len++] = 0x7a;
		b[len++] = (uint8_t)(0x80 | (extra & 0x7f));
		b[len++] = (uint8_t)(extra >> 7);
		memset(b + len, (int)n, extra);
		len += extra;
		/* a new place each time: the old one is overwritten while a
		 * reader may be copying it */
		area = (uint8_t *)hdr + 4096 + (n % 16) * 8192;
		publish(b, len, PCTX_VERSION, true);
		n++;
	}
	return NULL;
}

int
main(int argc, char **argv)
{
	static _Alignas(8) uint8_t rec[TREC_MAX_SIZE];
	static uint8_t payload[65536];
	struct otel_thread_ctx_record h;
	const char *mode = argc > 1 ? argv[1] : "";
	pthread_t th;
	bool churn = false;
	char line[64];
	size_t len;

	setvbuf(stdout, NULL, _IOLBF, 0);
	memset(&h, 0, sizeof(h));
	memset(h.trace_id, 0x33, sizeof(h.trace_id));
	memset(h.span_id, 0x44, sizeof(h.span_id));
	h.valid = 1;
	h.trace_flags = 1;
	memcpy(rec + TREC_HEADER_SIZE, "\x00\x03GET\x01\x02/x\xff\x03max", 14);
	h.attrs_data_size = 14;
	memcpy(rec, &h, sizeof(h));
	*(void *volatile *)&otel_thread_ctx_v1 = rec;

	map_ctx(strcmp(mode, "exec") == 0 ? PROT_READ | PROT_EXEC | PROT_WRITE
					  : PROT_READ | PROT_WRITE);
	if (strcmp(mode, "torn") == 0) {
		len = hostile_strings(payload, sizeof(payload));
		publish(payload, len, PCTX_VERSION, false);
	} else if (strcmp(mode, "unwritten") == 0) {
		/* mapped, the header not filled in yet */
	} else if (strcmp(mode, "oversized") == 0) {
		publish(NULL, 2u << 20, PCTX_VERSION, true);
	} else if (strcmp(mode, "size-max") == 0) {
		publish(NULL, UINT32_MAX, PCTX_VERSION, true);
	} else if (strcmp(mode, "unmapped") == 0) {
		void *gone =
			mmap(NULL, 8192, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		munmap(gone, 8192);
		publish(NULL, 100, PCTX_VERSION, false);
		hdr->payload = (uint64_t)(uintptr_t)gone;
		hdr->monotonic_published_at_ns = now_ns();
	} else if (strcmp(mode, "malformed") == 0) {
		/* resource (field 1) claiming 200 bytes, then a group */
		static const uint8_t bad[] = {0x0a, 0xc8, 0x01, 0x0a,
					      0x03, 'a',  0x0b, 0x0c};

		publish(bad, sizeof(bad), PCTX_VERSION, true);
	} else if (strcmp(mode, "bad-version") == 0) {
		len = hostile_strings(payload, sizeof(payload));
		publish(payload, len, 3, true);
	} else if (strcmp(mode, "deep") == 0) {
		len = deep(payload, sizeof(payload), 200);
		publish(payload, len, PCTX_VERSION, true);
	} else if (strcmp(mode, "strings") == 0 || strcmp(mode, "exec") == 0) {
		len = hostile_strings(payload, sizeof(payload));
		publish(payload, len, PCTX_VERSION, true);
	} else if (strcmp(mode, "signature") == 0) {
		len = hostile_strings(payload, sizeof(payload));
		publish(payload, len, PCTX_VERSION, true);
		hdr->signature[7] = 'Y';
	} else if (strcmp(mode, "schema") == 0) {
		static const struct pctx_kv res[] = {{"service.name", "future"}};
		static const char *const km[] = {"k0", "k1"};

		if (pctx_encode(payload, sizeof(payload), &len, res, 1, "tls_v9", km,
				2) < 0)
			return 1;
		publish(payload, len, PCTX_VERSION, true);
	} else if (strcmp(mode, "empty-key") == 0) {
		static const struct pctx_kv res[] = {{"service.name", "empty-key"}};
		static const char *const km[] = {"", "url.path"};

		len = with_key_map(payload, sizeof(payload), res, 1, km, 2);
		publish(payload, len, PCTX_VERSION, true);
	} else if (strcmp(mode, "churn") == 0) {
		churn = true;
		if (pthread_create(&th, NULL, churner, NULL) != 0)
			return 1;
	} else {
		fprintf(stderr, "hostile-pctx: unknown mode '%s'\n", mode);
		return 64;
	}
	printf("READY %d\n", (int)getpid());
	while (fgets(line, sizeof(line), stdin))
		;
	atomic_store(&stopping, true);
	if (churn)
		pthread_join(th, NULL);
	*(void *volatile *)&otel_thread_ctx_v1 = NULL;
	return 0;
}
