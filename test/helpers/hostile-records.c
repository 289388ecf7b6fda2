/* SPDX-License-Identifier: Apache-2.0 */
/* An OTEP-4947 "writer" that publishes garbage, for ctxdump's hostile
 * target tests: the executable defines and exports otel_thread_ctx_v1
 * (local-exec) and starts one thread per case below, each publishing
 * its hostile record; then prints "CASE <name> <tid>" for every case and
 * "READY <pid>", and blocks until stdin is closed (exit 0).
 *
 *   unmapped     pointer 0x1040, below mmap_min_addr (never mapped)
 *   guard        pointer into a reserved PROT_NONE page
 *   noncanon     non-canonical pointer 0xffff800000000000
 *   minus1       pointer (void *)-1: a read wraps the address space
 *   misaligned   a valid record at an odd address
 *   edge-65535   attrs_data_size 65535, the record ends 100 bytes before
 *                an inaccessible page
 *   huge-65535   attrs_data_size 65535 inside a 1 MiB mapping full of
 *                entries
 *   truncated    attrs_data_size 10 and an entry claiming 200 bytes
 *   utf8         invalid UTF-8: stray continuation, overlong, surrogate,
 *                above U+10FFFF, cut sequence, the last surrogate and
 *                the largest overlong forms
 *   ansi         ANSI escape sequences, CR/LF, BEL, C1 CSI (raw and as
 *                UTF-8), NUL, backslash and quote, bidirectional and
 *                zero-width format characters (Trojan Source) in values
 *   keys         key indexes 2, 200 and 255 (beyond any key map),
 *                duplicates
 *   valid7       valid = 7 (must be ignored)
 *   valid0       valid = 0 (being written), with an entry (must be ignored)
 *   comm         thread name with ESC, newline and an invalid byte
 *   flip         keeps switching between a good record, an unmapped
 *                pointer and records whose bytes it rewrites while they
 *                are published (a writer that breaks the protocol)
 *
 * Control bytes in argv (the test passes some) end up in the cmdline that
 * ctxdump prints.  No shim, no tracing library. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "thread-record.h"

__attribute__((visibility("default"))) __thread void *otel_thread_ctx_v1;

#define N_CASES 15
#define REC_MAX 1024

struct hcase {
	const char *name;
	void *ptr;
	pid_t tid;
};

static struct hcase cases[N_CASES];
static _Alignas(8) uint8_t recs[N_CASES][REC_MAX + 8];
static pthread_barrier_t ready;
static atomic_bool stopping;

static void
publish(void *p)
{
	atomic_signal_fence(memory_order_seq_cst);
	*(void *volatile *)&otel_thread_ctx_v1 = p;
	atomic_signal_fence(memory_order_seq_cst);
}

/* A valid record header with the given attrs bytes at rec. */
static uint8_t *
make_rec(uint8_t *rec, const void *attrs, size_t len, uint16_t size_field)
{
	struct otel_thread_ctx_record h;

	memset(&h, 0, sizeof(h));
	memset(h.trace_id, 0x11, sizeof(h.trace_id));
	memset(h.span_id, 0x22, sizeof(h.span_id));
	h.valid = 1;
	h.trace_flags = 1;
	h.attrs_data_size = size_field;
	memcpy(rec, &h, sizeof(h));
	if (len)
		memcpy(rec + TREC_HEADER_SIZE, attrs, len);
	return rec;
}

/* Packed entries from (key, string) pairs; returns the length. */
static size_t
entries(uint8_t *out,
	size_t cap,
	const uint8_t *keys,
	const char *const *vals,
	const size_t *lens,
	size_t n)
{
	size_t pos = 0, i;

	for (i = 0; i < n && pos + 2 + lens[i] <= cap; i++) {
		out[pos] = keys[i];
		out[pos + 1] = (uint8_t)lens[i];
		memcpy(out + pos + 2, vals[i], lens[i]);
		pos += 2 + lens[i];
	}
	return pos;
}

static void *
page_map(size_t len, int prot)
{
	void *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
		       0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return p;
}

static void
add_case(int *k, const char *name, void *ptr)
{
	cases[*k].name = name;
	cases[*k].ptr = ptr;
	(*k)++;
}

static void
setup_cases(void)
{
	/* then the edges: the last surrogate, the largest overlong forms of
	 * three and four bytes */
	static const char *const utf8[] = {
		"\x80x",      "\xc0\xaf",     "\xed\xa0\x80", "\xf4\x90\x80\x80",
		"ok\xe2\x82", "\xed\xbf\xbf", "\xe0\x9f\xbf", "\xf0\x8f\xbf\xbf"};
#define S(x) x, sizeof(x) - 1
	static const struct {
		const char *s;
		size_t len;
	} ansi[] = {
		{S("\x1b[2J\x1b[31mred\x1b[0m")},
		{S("line1\r\nline2\nline3")},
		{S("bell\x07\x08\x7f")},
		{S("c1\x9b"
		   "31m and \xc2\x9b"
		   "31m")},
		{S("nul\0after")},
		{S("quote\"back\\slash")},
		{S("\x1b]0;title\x07")},
		/* RLO, LRI, ZWSP and BOM; Hebrew letters are text; then
		 * each escaped range's last character beside the first one
		 * after it that is shown: U+001F, U+009F/U+00A0,
		 * U+206F/U+2070, the last tag U+E007F/U+E0080, and U+10FFFF */
		{S("rlo\xe2\x80\xae"
		   "cba lri\xe2\x81\xa6 zw\xe2\x80\x8b\xef\xbb\xbf kept "
		   "\xd7\xa9\xd7\x9c us\x1f apc\xc2\x9f nbsp\xc2\xa0 "
		   "ns\xe2\x81\xaf sup\xe2\x81\xb0 tag\xf3\xa0\x81\xbf "
		   "vs\xf3\xa0\x82\x80 max\xf4\x8f\xbf\xbf")},
	};
#undef S
	const char *ansi_s[8];
	size_t ansi_len[8];
	static const uint8_t keys5[] = {0, 1, 2, 3, 4, 5, 6, 7};
	static const uint8_t kkeys[] = {2, 200, 255, 2, 0};
	static const char *const kvals[] = {"two", "two-hundred", "max", "two-again",
					    "zero"};
	size_t lens[8], n, i;
	uint8_t buf[REC_MAX];
	uint8_t *p;
	int k = 0;

	/* below mmap_min_addr: never mapped, whatever the allocator does */
	add_case(&k, "unmapped", (void *)(uintptr_t)0x1040);
	/* a page that stays reserved and inaccessible */
	p = page_map(4096, PROT_NONE);
	add_case(&k, "guard", p + 64);
	add_case(&k, "noncanon", (void *)0xffff800000000000ull);
	add_case(&k, "minus1", (void *)UINTPTR_MAX);

	/* misaligned: a good record at an odd address */
	{
		static const char *const v[] = {"odd"};
		size_t l[] = {3};

		n = entries(buf, sizeof(buf), keys5, v, l, 1);
		add_case(&k, "misaligned", make_rec(recs[k] + 1, buf, n, (uint16_t)n));
	}

	/* edge-65535: record ends 100 bytes before a PROT_NONE page */
	p = page_map(2 * 4096, PROT_READ | PROT_WRITE);
	mprotect(p + 4096, 4096, PROT_NONE);
	for (i = 0; i < 72; i += 7)
		memcpy(buf + i,
		       "\x01\x05"
		       "abcde",
		       7);
	add_case(&k, "edge-65535", make_rec(p + 4096 - 100, buf, 72, 65535));

	/* huge-65535: 1 MiB of entries */
	p = page_map(1 << 20, PROT_READ | PROT_WRITE);
	for (i = TREC_HEADER_SIZE; i + 202 <= (1 << 20); i += 202) {
		p[i] = (uint8_t)(i % 7);
		p[i + 1] = 200;
		memset(p + i + 2, 'h', 200);
	}
	add_case(&k, "huge-65535", make_rec(p, NULL, 0, 65535));

	/* truncated */
	buf[0] = 0;
	buf[1] = 3;
	memcpy(buf + 2, "abc", 3);
	buf[5] = 1;
	buf[6] = 200;
	memcpy(buf + 7, "xyz", 3);
	add_case(&k, "truncated", make_rec(recs[k], buf, 10, 10));

	for (i = 0; i < 8; i++)
		lens[i] = strlen(utf8[i]);
	n = entries(buf, sizeof(buf), keys5, utf8, lens, 8);
	add_case(&k, "utf8", make_rec(recs[k], buf, n, (uint16_t)n));

	for (i = 0; i < 8; i++) {
		ansi_s[i] = ansi[i].s;
		ansi_len[i] = ansi[i].len;
	}
	n = entries(buf, sizeof(buf), keys5, ansi_s, ansi_len, 8);
	add_case(&k, "ansi", make_rec(recs[k], buf, n, (uint16_t)n));

	for (i = 0; i < 5; i++)
		lens[i] = strlen(kvals[i]);
	n = entries(buf, sizeof(buf), kkeys, kvals, lens, 5);
	add_case(&k, "keys", make_rec(recs[k], buf, n, (uint16_t)n));

	p = make_rec(recs[k], NULL, 0, 0);
	p[24] = 7; /* valid */
	add_case(&k, "valid7", p);

	{
		static const char *const v[] = {"stale"};
		size_t l[] = {5};

		n = entries(buf, sizeof(buf), keys5, v, l, 1);
		p = make_rec(recs[k], buf, n, (uint16_t)n);
		p[24] = 0; /* valid */
		add_case(&k, "valid0", p);
	}

	{
		static const char *const v[] = {"named"};
		size_t l[] = {5};

		n = entries(buf, sizeof(buf), keys5, v, l, 1);
		add_case(&k, "comm", make_rec(recs[k], buf, n, (uint16_t)n));
	}
	add_case(&k, "flip", NULL);
	if (k != N_CASES)
		abort();
}

static uint64_t
xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void
flip_loop(void)
{
	static _Alignas(8) uint8_t a[REC_MAX], b[REC_MAX];
	uint8_t attrs[64];
	uint64_t s = 0x9e3779b97f4a7c15ull;
	void *gone = page_map(4096, PROT_READ);

	memset(attrs, 0, sizeof(attrs));
	attrs[1] = 5;
	memcpy(attrs + 2, "flip!", 5);
	make_rec(a, attrs, 7, 7);
	munmap(gone, 4096);
	while (!atomic_load(&stopping)) {
		uint64_t r = xorshift(&s);
		size_t i;

		switch (r % 4) {
		case 0:
			publish(a);
			break;
		case 1:
			publish(gone);
			break;
		default:
			/* rewritten while published: torn on purpose */
			publish(b);
			for (i = 0; i < sizeof(b); i += 8) {
				uint64_t v = xorshift(&s);

				memcpy(b + i, &v, 8);
			}
			b[24] = 1;
			break;
		}
	}
}

static void *
worker(void *arg)
{
	struct hcase *c = arg;
	char name[16];

	c->tid = (pid_t)syscall(SYS_gettid);
	if (strcmp(c->name, "comm") == 0)
		memcpy(name, "x\x1b[31m\n\xff\"y", 11);
	else
		snprintf(name, sizeof(name), "h-%s", c->name);
	prctl(PR_SET_NAME, name);
	publish(c->ptr);
	pthread_barrier_wait(&ready);
	if (strcmp(c->name, "flip") == 0)
		flip_loop();
	else
		while (!atomic_load(&stopping))
			pause();
	publish(NULL);
	return NULL;
}

int
main(void)
{
	pthread_t th[N_CASES];
	char line[64];
	int i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	setup_cases();
	pthread_barrier_init(&ready, NULL, N_CASES + 1);
	for (i = 0; i < N_CASES; i++)
		if (pthread_create(&th[i], NULL, worker, &cases[i]) != 0)
			return 1;
	pthread_barrier_wait(&ready);
	for (i = 0; i < N_CASES; i++)
		printf("CASE %s %d\n", cases[i].name, (int)cases[i].tid);
	printf("READY %d\n", (int)getpid());
	while (fgets(line, sizeof(line), stdin))
		;
	/* pause()d threads: exit without joining them */
	atomic_store(&stopping, true);
	fflush(stdout);
	_exit(0);
}
