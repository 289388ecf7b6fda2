/* SPDX-License-Identifier: Apache-2.0 */
/* An OTEP-4947 writer whose attribute key map grows while it runs
 * (append-only, as the OTEP allows), for the readers' refresh of the
 * process context.  Exports otel_thread_ctx_v1 (local-exec).
 *
 * Publishes the key map ["k0"] and, on the main thread, a record with
 * index 0 ("zero"); prints "READY <pid>".  On each line "grow" on stdin:
 * republishes the process context with the update protocol of OTEP-4719
 * and the map with one key more (["k0", "k1"], then up to k7), then (only
 * then) publishes a new record that uses every index of it ("zero",
 * "one", "two", ...), and prints "GROWN".  On "big N": publishes a record
 * of about N bytes of attrs-data (N up to 65000) in which index 0 comes
 * first as "first", then as filler values, and last as "last" (the one a
 * reader must show: the last occurrence wins), and prints "BIG <size>"
 * with its attrs-data-size.  On "name N": sets its name to N (as
 * --name) and prints "NAMED".  Exits when stdin is closed.
 *
 *   keymap-grow --late   publishes neither the process context nor a
 *                        record at first (the OTEL_CTX mapping does not
 *                        exist yet); on the line "publish", the process
 *                        context (its mapping first), still no record, and
 *                        prints "PUBLISHED"
 *   keymap-grow --name N first sets its name to N (PR_SET_NAME: any bytes
 *                        but NUL, up to 15)
 *
 * Any other argument is ignored (a long command line). */
#include "config.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "process-ctx.h"
#include "thread-record.h"

__attribute__((visibility("default"))) __thread void *otel_thread_ctx_v1;

#define MAP_SIZE 65536u
#define KEYS_MAX 8
#define BIG_MAX  65000u

static struct otel_process_ctx_header *hdr;
static uint64_t last_ns;

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Encode into a fresh place of the mapping and publish (the update
 * protocol: timestamp 0, fence, pointer and size, fence, new timestamp). */
static void
publish(unsigned n_keys, unsigned n)
{
	static const char *const km[KEYS_MAX] = {"k0", "k1", "k2", "k3",
						 "k4", "k5", "k6", "k7"};
	static const struct pctx_kv res[] = {{"service.name", "keymap-grow"}};
	uint8_t *at = (uint8_t *)hdr + 4096 + (n % 8) * 4096;
	uint64_t ts;
	size_t len;

	if (pctx_encode(at, 4096, &len, res, 1, PCTX_SCHEMA_VERSION, km, n_keys) < 0) {
		fprintf(stderr, "keymap-grow: encode failed\n");
		exit(1);
	}
	hdr->monotonic_published_at_ns = 0;
	atomic_thread_fence(memory_order_seq_cst);
	memcpy(hdr->signature, PCTX_SIGNATURE, PCTX_SIGNATURE_LEN);
	hdr->version = PCTX_VERSION;
	hdr->payload = (uint64_t)(uintptr_t)at;
	hdr->payload_size = (uint32_t)len;
	atomic_thread_fence(memory_order_seq_cst);
	ts = now_ns();
	if (ts <= last_ns)
		ts = last_ns + 1;
	hdr->monotonic_published_at_ns = last_ns = ts;
}

static void *
record(void *buf, unsigned n_attrs)
{
	static const char *const vals[KEYS_MAX] = {"zero", "one",  "two", "three",
						   "four", "five", "six", "seven"};
	struct otel_thread_ctx_record *r = buf;
	struct trec_attr_writer w;
	unsigned i;

	memset(buf, 0, TREC_MAX_SIZE);
	memset(r->trace_id, 0x5a, sizeof(r->trace_id));
	memset(r->span_id, 0xa5, sizeof(r->span_id));
	r->trace_flags = 1;
	r->valid = TREC_VALID;
	trec_attrs_init(&w, r->attrs_data, TREC_ATTRS_MAX);
	for (i = 0; i < n_attrs && i < KEYS_MAX; i++)
		(void)trec_attrs_add(&w, (uint8_t)i, vals[i], strlen(vals[i]));
	r->attrs_data_size = (uint16_t)w.len;
	return buf;
}

/* One entry of index 0 at a + *pos. */
static void
entry0(uint8_t *a, size_t *pos, const char *val, size_t len)
{
	a[*pos] = 0;
	a[*pos + 1] = (uint8_t)len;
	memcpy(a + *pos + 2, val, len);
	*pos += 2 + len;
}

/* A record larger than the recommended 640 bytes (written by hand: the
 * shared encoder keeps to that maximum), index 0 repeated to the end. */
static void *
big_record(void *buf, size_t want)
{
	struct otel_thread_ctx_record *r = buf;
	uint8_t *a = (uint8_t *)buf + TREC_HEADER_SIZE;
	char filler[TREC_VALUE_MAX];
	size_t pos = 0;

	memset(buf, 0, TREC_HEADER_SIZE);
	memset(r->trace_id, 0x5a, sizeof(r->trace_id));
	memset(r->span_id, 0xa5, sizeof(r->span_id));
	r->trace_flags = 1;
	r->valid = TREC_VALID;
	memset(filler, 'f', sizeof(filler));
	entry0(a, &pos, "first", 5);
	/* leave room for "last" (6 bytes) and never a filler under 2 */
	while (pos + 6 + 2 + TREC_VALUE_MAX <= want)
		entry0(a, &pos, filler, TREC_VALUE_MAX);
	if (pos + 6 + 2 < want)
		entry0(a, &pos, filler, want - pos - 6 - 2);
	entry0(a, &pos, "last", 4);
	r->attrs_data_size = (uint16_t)pos;
	return buf;
}

/* The process context's mapping. */
static int
map_ctx(void)
{
	int fd = memfd_create("OTEL_CTX", MFD_CLOEXEC);

	if (fd < 0 || ftruncate(fd, MAP_SIZE) < 0)
		return -1;
	hdr = mmap(NULL, MAP_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	close(fd);
	return hdr == MAP_FAILED ? -1 : 0;
}

int
main(int argc, char **argv)
{
	static _Alignas(8) uint8_t rec[2][TREC_HEADER_SIZE + BIG_MAX + 16];
	char line[64];
	unsigned n = 0, keys = 1, cur = 0;
	unsigned long big;
	bool late = false;
	int a;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (a = 1; a < argc; a++) {
		if (strcmp(argv[a], "--late") == 0)
			late = true;
		else if (strcmp(argv[a], "--name") == 0 && a + 1 < argc)
			(void)prctl(PR_SET_NAME, argv[++a], 0, 0, 0);
	}
	if (!late) {
		if (map_ctx() < 0)
			return 1;
		publish(1, n++);
		atomic_signal_fence(memory_order_seq_cst);
		*(void *volatile *)&otel_thread_ctx_v1 = record(rec[0], 1);
		atomic_signal_fence(memory_order_seq_cst);
	}
	printf("READY %d\n", (int)getpid());
	while (fgets(line, sizeof(line), stdin)) {
		struct otel_thread_ctx_record *r;

		if (late && strcmp(line, "publish\n") == 0) {
			if (map_ctx() < 0)
				return 1;
			publish(1, n++);
			late = false;
			printf("PUBLISHED\n");
			continue;
		}

		if (strncmp(line, "name ", 5) == 0) {
			line[strcspn(line, "\n")] = '\0';
			(void)prctl(PR_SET_NAME, line + 5, 0, 0, 0);
			printf("NAMED\n");
			continue;
		}
		if (sscanf(line, "big %lu", &big) == 1 && big <= BIG_MAX) {
			/* never rewrite the published record */
			r = big_record(rec[cur ^= 1], big);
			atomic_signal_fence(memory_order_seq_cst);
			*(void *volatile *)&otel_thread_ctx_v1 = r;
			atomic_signal_fence(memory_order_seq_cst);
			printf("BIG %u\n", (unsigned)r->attrs_data_size);
			continue;
		}
		if (strcmp(line, "grow\n") != 0 || !hdr)
			continue;
		if (keys < KEYS_MAX)
			keys++;
		publish(keys, n++);
		atomic_signal_fence(memory_order_seq_cst);
		*(void *volatile *)&otel_thread_ctx_v1 = record(rec[cur ^= 1], keys);
		atomic_signal_fence(memory_order_seq_cst);
		printf("GROWN\n");
	}
	*(void *volatile *)&otel_thread_ctx_v1 = NULL;
	return 0;
}
