/* SPDX-License-Identifier: Apache-2.0 */
/* pctxr_read_maps(): ctxdump's process-context reader, on our own process
 * (the kernel allows a process to read itself), given maps read before
 * the process context's mapping was replaced by another (a writer that
 * publishes again by mapping a new OTEL_CTX region and unmapping the old
 * one) or dropped: the stale maps name an address where nothing is mapped
 * any more, and the reader must find the mapping again, or none.  Also
 * the legal choices of other writers: where the payload lives, how the
 * memfd is mapped, in which order the header's fields are stored. */
#include "test-common.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pctx-read.h"
#include "process-ctx.h"
#include "remote.h"

#define PAGE 4096u

/* A process context for service name `service` in a memfd mapping of
 * its own (as the OTEP's writers make it), payload after the header. */
static uint8_t *
publish(const char *service, uint64_t ts, size_t *payload_len)
{
	static const char *const km[] = {"k0"};
	struct pctx_kv res[] = {{"service.name", service}};
	struct otel_process_ctx_header *h;
	uint8_t *p;
	int fd;

	fd = memfd_create("OTEL_CTX", MFD_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, PAGE), 0);
	p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
	close(fd);
	ck_assert_int_eq(pctx_encode(p + sizeof(*h), PAGE - sizeof(*h), payload_len,
				     res, 1, PCTX_SCHEMA_VERSION, km, 1),
			 0);
	h = (struct otel_process_ctx_header *)p;
	memcpy(h->signature, PCTX_SIGNATURE, PCTX_SIGNATURE_LEN);
	h->version = PCTX_VERSION;
	h->payload_size = (uint32_t)*payload_len;
	h->payload = (uint64_t)(uintptr_t)(p + sizeof(*h));
	h->monotonic_published_at_ns = ts;
	return p;
}

static char *
read_maps(size_t *len)
{
	char *buf;

	ck_assert_int_eq(remote_read_file("/proc/self/maps", 64u << 20, &buf, len), 0);
	return buf;
}

/* The context published again in a new mapping (the old one unmapped)
 * after the maps were read: read from the new one. */
START_TEST(mapping_replaced)
{
	struct pctxr_snapshot snap = {0};
	size_t len_a, len_b, maps_len;
	uint8_t *a = publish("first", 100, &len_a), *b;
	char *maps = read_maps(&maps_len);
	int r;

	/* mapped before the old one goes, so never at its address */
	b = publish("second", 200, &len_b);
	ck_assert_int_eq(munmap(a, PAGE), 0);
	r = pctxr_read_maps(getpid(), maps, maps_len, &snap);
	ck_assert_msg(r == 0, "pctxr_read_maps: %s", strerror(-r));
	ck_assert_uint_eq(snap.map_addr, (uint64_t)(uintptr_t)b);
	ck_assert_uint_eq(snap.published_at_ns, 200);
	ck_assert_uint_eq(snap.payload_len, len_b);
	ck_assert_mem_eq(snap.payload, b + sizeof(struct otel_process_ctx_header),
			 len_b);
	pctxr_free(&snap);
	free(maps);
	ck_assert_int_eq(munmap(b, PAGE), 0);
}
END_TEST

/* The context dropped after the maps were read: there is none. */
START_TEST(mapping_dropped)
{
	struct pctxr_snapshot snap = {0};
	size_t len, maps_len;
	uint8_t *a = publish("first", 100, &len);
	char *maps = read_maps(&maps_len);
	int r;

	ck_assert_int_eq(munmap(a, PAGE), 0);
	r = pctxr_read_maps(getpid(), maps, maps_len, &snap);
	ck_assert_msg(r == -ENOENT, "pctxr_read_maps: %d (%s)", r, strerror(-r));
	free(maps);
}
END_TEST

/* A header caught while its writer fills it in: the signature stored, the
 * version not yet, the timestamp 0 (stored last, after a fence).  The
 * OTEP's 0 means "being written": read again, not refused for its
 * version. */
START_TEST(header_half_written)
{
	struct pctxr_snapshot snap = {0};
	size_t len, maps_len;
	uint8_t *a = publish("first", 0, &len);
	struct otel_process_ctx_header *h = (struct otel_process_ctx_header *)a;
	char *maps;
	int r;

	h->version = 0;
	h->payload_size = 0;
	maps = read_maps(&maps_len);
	r = pctxr_read_maps(getpid(), maps, maps_len, &snap);
	ck_assert_msg(r == -EAGAIN, "pctxr_read_maps: %d (%s)", r, strerror(-r));

	/* published meanwhile: read as it is now */
	h->version = PCTX_VERSION;
	h->payload_size = (uint32_t)len;
	h->monotonic_published_at_ns = 300;
	r = pctxr_read_maps(getpid(), maps, maps_len, &snap);
	ck_assert_msg(r == 0, "pctxr_read_maps: %s", strerror(-r));
	ck_assert_uint_eq(snap.published_at_ns, 300);
	ck_assert_uint_eq(snap.payload_len, len);
	pctxr_free(&snap);
	free(maps);
	ck_assert_int_eq(munmap(a, PAGE), 0);
}
END_TEST

/* Legal choices of other writers: sig-profiling and libdatadog map the
 * 32-byte header alone and keep the payload in an allocation elsewhere;
 * ctx-sharing-demo maps its memfd MAP_SHARED (rw-s in the maps). */
START_TEST(other_writer_layouts)
{
	static const char *const km[] = {"k0"};
	struct pctx_kv res[] = {{"service.name", "heap"}};
	struct pctxr_snapshot snap = {0};
	struct otel_process_ctx_header *h;
	size_t len, maps_len;
	uint8_t *payload = malloc(256);
	char *maps;
	int fd, r, shared;

	ck_assert_ptr_nonnull(payload);
	ck_assert_int_eq(
		pctx_encode(payload, 256, &len, res, 1, PCTX_SCHEMA_VERSION, km, 1), 0);
	for (shared = 0; shared < 2; shared++) {
		fd = memfd_create("OTEL_CTX", MFD_CLOEXEC);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(ftruncate(fd, sizeof(*h)), 0);
		h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE,
			 shared ? MAP_SHARED : MAP_PRIVATE, fd, 0);
		ck_assert_ptr_ne(h, MAP_FAILED);
		close(fd);
		memcpy(h->signature, PCTX_SIGNATURE, PCTX_SIGNATURE_LEN);
		h->version = PCTX_VERSION;
		h->payload_size = (uint32_t)len;
		h->payload = (uint64_t)(uintptr_t)payload;
		h->monotonic_published_at_ns = 42;
		maps = read_maps(&maps_len);
		r = pctxr_read_maps(getpid(), maps, maps_len, &snap);
		ck_assert_msg(r == 0, "shared %d: pctxr_read_maps: %s", shared,
			      strerror(-r));
		ck_assert_uint_eq(snap.map_addr, (uint64_t)(uintptr_t)h);
		ck_assert_uint_eq(snap.payload_len, len);
		ck_assert_mem_eq(snap.payload, payload, len);
		pctxr_free(&snap);
		free(maps);
		ck_assert_int_eq(munmap(h, sizeof(*h)), 0);
	}
	free(payload);
}
END_TEST

/* The OTEP orders only the timestamp (stored last, after a fence) among the
 * header's stores: a writer may store the version before the signature.
 * Caught in between, the header is one being written: read again, not
 * refused as a mapping without the signature. */
START_TEST(header_version_before_signature)
{
	struct pctxr_snapshot snap = {0};
	size_t len, maps_len;
	uint8_t *a = publish("first", 0, &len);
	struct otel_process_ctx_header *h = (struct otel_process_ctx_header *)a;
	char *maps;
	int r;

	memset(h->signature, 0, sizeof(h->signature));
	maps = read_maps(&maps_len);
	r = pctxr_read_maps(getpid(), maps, maps_len, &snap);
	ck_assert_msg(r == -EAGAIN, "pctxr_read_maps: %d (%s)", r, strerror(-r));

	memcpy(h->signature, PCTX_SIGNATURE, PCTX_SIGNATURE_LEN);
	h->monotonic_published_at_ns = 300;
	r = pctxr_read_maps(getpid(), maps, maps_len, &snap);
	ck_assert_msg(r == 0, "pctxr_read_maps: %s", strerror(-r));
	ck_assert_uint_eq(snap.payload_len, len);
	pctxr_free(&snap);
	free(maps);
	ck_assert_int_eq(munmap(a, PAGE), 0);
}
END_TEST

/* A payload of exactly the most ctxdump reads (PCTXR_PAYLOAD_CAP) is read
 * whole; one byte more is refused as too big, never read in part. */
START_TEST(payload_at_cap)
{
	struct pctxr_snapshot snap = {0};
	struct otel_process_ctx_header *h;
	size_t len, maps_len;
	uint8_t *a = publish("cap", 7, &len);
	uint8_t *payload = malloc(PCTXR_PAYLOAD_CAP + 1);
	char *maps;
	int r;

	ck_assert_ptr_nonnull(payload);
	memset(payload, 'p', PCTXR_PAYLOAD_CAP + 1);
	h = (struct otel_process_ctx_header *)a;
	h->payload = (uint64_t)(uintptr_t)payload;
	h->payload_size = PCTXR_PAYLOAD_CAP;
	maps = read_maps(&maps_len);
	r = pctxr_read_maps(getpid(), maps, maps_len, &snap);
	ck_assert_msg(r == 0, "pctxr_read_maps: %s", strerror(-r));
	ck_assert_uint_eq(snap.payload_len, PCTXR_PAYLOAD_CAP);
	ck_assert_mem_eq(snap.payload, payload, PCTXR_PAYLOAD_CAP);
	pctxr_free(&snap);

	h->payload_size = PCTXR_PAYLOAD_CAP + 1;
	r = pctxr_read_maps(getpid(), maps, maps_len, &snap);
	ck_assert_msg(r == -E2BIG, "pctxr_read_maps: %d (%s)", r, strerror(-r));
	ck_assert_ptr_null(snap.payload);
	free(maps);
	free(payload);
	ck_assert_int_eq(munmap(a, PAGE), 0);
}
END_TEST

/* Two mappings named OTEL_CTX (a process that breaks OTEP-4719's one
 * context rule: two SDKs, or an older writer's leftover), the lower one
 * not established (another signature, then another version): the reader
 * goes on to the one above it rather than giving up (old: -EBADMSG from
 * the first).  With the lower one alone, it still says -EBADMSG. */
static int
cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (void *const *)a,
		  y = (uintptr_t) * (void *const *)b;

	return x < y ? -1 : x > y;
}

/* A process with many OTEL_CTX mappings whose headers are not established
 * (a hostile one can map thousands): the reader passes over 8 of them, not
 * more, for the one above (pctx-read.c, PCTXR_SKIPS). */
START_TEST(many_mappings_not_established)
{
	struct pctxr_snapshot snap = {0};
	uint8_t *m[10];
	size_t len, maps_len;
	char *maps;
	unsigned i;
	int r;

	for (i = 0; i < 10; i++)
		m[i] = publish("svc", 100 + i, &len);
	qsort(m, 10, sizeof(m[0]), cmp_ptr);
	for (i = 0; i < 9; i++)
		memcpy(m[i], "OTEL_CTY", PCTX_SIGNATURE_LEN);
	maps = read_maps(&maps_len);
	r = pctxr_read_maps(getpid(), maps, maps_len, &snap);
	ck_assert_msg(r == -EBADMSG, "nine not established: %d (%s)", r, strerror(-r));
	ck_assert_uint_eq(snap.map_addr, (uint64_t)(uintptr_t)m[8]);
	pctxr_free(&snap);
	/* eight passed over: the ninth is read */
	memcpy(m[8], PCTX_SIGNATURE, PCTX_SIGNATURE_LEN);
	r = pctxr_read_maps(getpid(), maps, maps_len, &snap);
	ck_assert_msg(r == 0, "eight not established: %d (%s)", r, strerror(-r));
	ck_assert_uint_eq(snap.map_addr, (uint64_t)(uintptr_t)m[8]);
	pctxr_free(&snap);
	free(maps);
	for (i = 0; i < 10; i++)
		ck_assert_int_eq(munmap(m[i], PAGE), 0);
}
END_TEST

START_TEST(several_mappings_first_not_established)
{
	struct pctxr_snapshot snap = {0};
	size_t len_a, len_b, maps_len;
	uint8_t *a = publish("one", 100, &len_a), *b = publish("two", 200, &len_b);
	uint8_t *lo = a < b ? a : b, *hi = a < b ? b : a;
	struct otel_process_ctx_header *h = (struct otel_process_ctx_header *)lo;
	char *maps = read_maps(&maps_len);
	unsigned round;
	int r;

	for (round = 0; round < 2; round++) {
		if (round == 0)
			memcpy(h->signature, "OTEL_CTY", PCTX_SIGNATURE_LEN);
		else
			h->version = PCTX_VERSION + 1;
		r = pctxr_read_maps(getpid(), maps, maps_len, &snap);
		ck_assert_msg(r == 0, "round %u: pctxr_read_maps: %d (%s)", round, r,
			      strerror(-r));
		ck_assert_uint_eq(snap.map_addr, (uint64_t)(uintptr_t)hi);
		ck_assert_uint_eq(snap.published_at_ns, hi == a ? 100 : 200);
		ck_assert_uint_eq(snap.payload_len, hi == a ? len_a : len_b);
		pctxr_free(&snap);
		memcpy(h->signature, PCTX_SIGNATURE, PCTX_SIGNATURE_LEN);
	}
	free(maps);

	ck_assert_int_eq(munmap(hi, PAGE), 0);
	maps = read_maps(&maps_len);
	r = pctxr_read_maps(getpid(), maps, maps_len, &snap);
	ck_assert_msg(r == -EBADMSG, "pctxr_read_maps: %d (%s)", r, strerror(-r));
	ck_assert_uint_eq(snap.map_addr, (uint64_t)(uintptr_t)lo);
	free(maps);
	ck_assert_int_eq(munmap(lo, PAGE), 0);
}
END_TEST

TEST_SUITE(pctxread_suite)
{
	Suite *s = suite_create("ctxdump-pctxread");
	TCase *tc = tcase_create("replaced");

	tcase_add_test(tc, mapping_replaced);
	tcase_add_test(tc, mapping_dropped);
	tcase_add_test(tc, header_half_written);
	tcase_add_test(tc, other_writer_layouts);
	tcase_add_test(tc, header_version_before_signature);
	tcase_add_test(tc, payload_at_cap);
	tcase_add_test(tc, several_mappings_first_not_established);
	tcase_add_test(tc, many_mappings_not_established);
	suite_add_tcase(s, tc);
	return s;
}
