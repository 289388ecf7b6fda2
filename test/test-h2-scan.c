/* SPDX-License-Identifier: Apache-2.0 */
/* proc-context/h2-scan.c: HTTP/2 frames and HPACK header blocks, the RFC
 * 7541 Appendix C vectors, the frame rules of RFC 9113 and the decoder's
 * limits, each stream fed whole, split at every point, a byte at a time
 * (from read-only memory, the state moved between feeds as the socket
 * level's pool does): the events (status, absolute offset, field, value,
 * stream) and the dynamic table model must be the same every time.  With
 * libnghttp2, random requests from its encoder (its own Huffman table,
 * its own choice of indexing, table size changes) must come out exactly. */
#include "test-common.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "h2-scan.h"

#ifdef HAVE_NGHTTP2
#include <nghttp2/nghttp2.h>
#endif

#define REQUIRE(cond_)                                                         \
	do {                                                                   \
		if (!(cond_))                                                  \
			ck_abort_msg("%s:%d: %s", __FILE__, __LINE__, #cond_); \
	} while (0)

_Static_assert(sizeof(struct h2_scan) <= H2_SCAN_STATE_MAX, "state too large");

/* Private bits of e_k (proc-context/h2-scan.c), for the table checks. */
#define E_K_NONE 0x0f
#define E_KEPT   0x10

static const char *const names[] = {
	":method", ":scheme",  ":path", ":authority", "cache-control",    "custom-key",
	":status", "location", "date",  "set-cookie", "content-encoding", "traceparent",
};
#define N_NAMES 12
static struct h2_scan_config cfg;

static unsigned
kof(const char *name)
{
	unsigned k;

	for (k = 0; k < N_NAMES; k++)
		if (strcmp(names[k], name) == 0)
			return k;
	ck_abort_msg("no name %s", name);
	return 0;
}

/* ---- building streams ---------------------------------------------------- */

struct stream {
	uint8_t b[1 << 18];
	size_t n;
};

static void
put(struct stream *s, const void *p, size_t n)
{
	REQUIRE(s->n + n <= sizeof(s->b));
	if (n)
		memcpy(s->b + s->n, p, n);
	s->n += n;
}

static size_t
hex(uint8_t *o, const char *h)
{
	size_t n = 0;
	unsigned v;

	while (*h) {
		if (*h == ' ') {
			h++;
			continue;
		}
		REQUIRE(sscanf(h, "%2x", &v) == 1);
		o[n++] = (uint8_t)v;
		h += 2;
	}
	return n;
}

static void
frame(struct stream *s,
      uint8_t type,
      uint8_t flags,
      uint32_t id,
      const void *p,
      size_t n)
{
	uint8_t h[9] = {(uint8_t)(n >> 16),
			(uint8_t)(n >> 8),
			(uint8_t)n,
			type,
			flags,
			(uint8_t)(id >> 24),
			(uint8_t)(id >> 16),
			(uint8_t)(id >> 8),
			(uint8_t)id};

	put(s, h, 9);
	put(s, p, n);
}

static void
frame_hex(struct stream *s, uint8_t type, uint8_t flags, uint32_t id, const char *h)
{
	uint8_t b[4096];

	frame(s, type, flags, id, b, hex(b, h));
}

static void
start(struct stream *s)
{
	s->n = 0;
	put(s, H2_SCAN_PREFACE, H2_SCAN_PREFACE_LEN);
	frame(s, 4, 0, 0, "\0\3\0\0\0\144", 6); /* SETTINGS */
}

/* ---- feeding ------------------------------------------------------------- */

#define EV_MAX   80
#define SNAP_MAX 8

struct ev {
	int st;
	size_t off;
	unsigned k, flags;
	size_t len;
	bool null;
	uint32_t stream;
	uint8_t v[H2_SCAN_VALUE_MAX];
};

/* The dynamic table model at a REQUEST, newest entry first. */
struct snap {
	uint32_t size, max;
	unsigned count;
	uint16_t nlen[H2_SCAN_ENTRIES], vlen[H2_SCAN_ENTRIES];
	uint8_t k[H2_SCAN_ENTRIES];
};

struct trace {
	unsigned n, nsnap;
	uint8_t why;
	struct ev ev[EV_MAX];
	struct snap snap[SNAP_MAX];
};

static struct h2_scan st;

static void
snapshot(struct snap *sn)
{
	unsigned d;

	memset(sn, 0, sizeof(*sn));
	sn->size = st.t_size;
	sn->max = st.t_max;
	sn->count = st.e_count;
	for (d = 1; d <= st.e_count; d++) {
		unsigned s = (st.e_head - d) & (H2_SCAN_ENTRIES - 1);

		sn->nlen[d - 1] = st.e_nlen[s];
		sn->vlen[d - 1] = st.e_vlen[s];
		sn->k[d - 1] = st.e_k[s];
	}
}

static void
record(struct trace *t, int r, size_t off)
{
	struct ev *e;

	REQUIRE(t->n < EV_MAX);
	e = &t->ev[t->n++];
	memset(e, 0, sizeof(*e));
	e->st = r;
	e->off = off;
	e->stream = h2_scan_stream(&st);
	if (r == H2_SCAN_FIELD) {
		struct h2_scan_field f;

		memset(&f, 0x5a, sizeof(f));
		h2_scan_field(&st, &f);
		REQUIRE(f.k < cfg.n);
		REQUIRE(f.len <= H2_SCAN_VALUE_MAX);
		REQUIRE(!(f.flags & ~(H2_SCAN_F_CUT | H2_SCAN_F_UNKNOWN)));
		REQUIRE((f.value == NULL) == !!(f.flags & H2_SCAN_F_UNKNOWN));
		e->k = f.k;
		e->flags = f.flags;
		e->len = f.len;
		e->null = f.value == NULL;
		if (f.value)
			memcpy(e->v, f.value, f.len);
	} else if (r == H2_SCAN_REQUEST && t->nsnap < SNAP_MAX) {
		snapshot(&t->snap[t->nsnap++]);
	}
}

/* Feed p[0..n) in the pieces cuts[] ends (ascending), the last to n. */
static void
run(struct trace *t,
    const uint8_t *p,
    size_t n,
    const size_t *cuts,
    size_t ncuts,
    unsigned pre)
{
	static struct h2_scan moved;
	size_t a = 0, ci;

	t->n = t->nsnap = 0;
	h2_scan_reset(&st, pre);
	for (ci = 0; ci <= ncuts; ci++) {
		size_t b = ci < ncuts ? cuts[ci] : n, off = a;
		int r;

		do {
			size_t used = 99999;

			r = h2_scan_feed(&st, &cfg, p + off, b - off, &used);
			REQUIRE(used <= b - off);
			off += used;
			if (r == H2_SCAN_MORE)
				REQUIRE(off == b);
			else
				record(t, r, off);
		} while (r != H2_SCAN_MORE);
		a = b;
		/* The socket level keeps the state in a pool entry that may
		 * move: no pointers into itself. */
		moved = st;
		memset(&st, 0xa5, sizeof(st));
		st = moved;
	}
	t->why = st.why;
}

static void
same(const struct trace *a, const struct trace *b)
{
	unsigned i;

	REQUIRE(a->n == b->n && a->nsnap == b->nsnap && a->why == b->why);
	for (i = 0; i < a->n; i++) {
		const struct ev *x = &a->ev[i], *y = &b->ev[i];

		REQUIRE(x->st == y->st && x->off == y->off && x->stream == y->stream);
		REQUIRE(x->k == y->k && x->flags == y->flags && x->len == y->len &&
			x->null == y->null);
		REQUIRE(memcmp(x->v, y->v, x->len) == 0);
	}
	for (i = 0; i < a->nsnap; i++)
		REQUIRE(memcmp(&a->snap[i], &b->snap[i], sizeof(a->snap[i])) == 0);
}

static uint8_t *ro_page;
static size_t ro_size;

/* A copy of p in read-only memory. */
static const uint8_t *
ro(const uint8_t *p, size_t n)
{
	size_t sz = (n + 4095) & ~(size_t)4095;

	if (ro_page)
		munmap(ro_page, ro_size);
	ro_size = sz ? sz : 4096;
	ro_page = mmap(NULL, ro_size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(ro_page != MAP_FAILED);
	memcpy(ro_page, p, n);
	REQUIRE(mprotect(ro_page, ro_size, PROT_READ) == 0);
	return ro_page;
}

/* Whole into *t, then split at every point, at every pair of points for
 * short streams, and a byte at a time: all the same. */
static void
check_pre(const struct stream *s, unsigned pre, struct trace *t)
{
	static struct trace u;
	static size_t cuts[1 << 18];
	const uint8_t *p = ro(s->b, s->n);
	size_t i, j;

	run(t, p, s->n, NULL, 0, pre);
	for (i = 1; i < s->n; i++) {
		cuts[0] = i;
		run(&u, p, s->n, cuts, 1, pre);
		same(t, &u);
	}
	if (s->n <= 160)
		for (i = 1; i < s->n; i++)
			for (j = i + 1; j < s->n; j++) {
				cuts[0] = i;
				cuts[1] = j;
				run(&u, p, s->n, cuts, 2, pre);
				same(t, &u);
			}
	for (i = 0; i + 1 < s->n; i++)
		cuts[i] = i + 1;
	run(&u, p, s->n, cuts, s->n ? s->n - 1 : 0, pre);
	same(t, &u);
}

static void
check(const struct stream *s, struct trace *t)
{
	check_pre(s, 0, t);
}

/* Expectations, in order. */
static void
want_field(const struct trace *t, unsigned *i, const char *name, const char *value)
{
	const struct ev *e;

	REQUIRE(*i < t->n);
	e = &t->ev[(*i)++];
	if (e->st != H2_SCAN_FIELD || e->k != kof(name) || e->flags != 0 ||
	    e->len != strlen(value) || memcmp(e->v, value, e->len) != 0)
		ck_abort_msg("event %u: want %s: %s, have st %d k %u flags %u \"%.*s\"",
			     *i - 1, name, value, e->st, e->k, e->flags, (int)e->len,
			     e->v);
}

static void
want_req(const struct trace *t, unsigned *i, uint32_t stream)
{
	REQUIRE(*i < t->n);
	REQUIRE(t->ev[*i].st == H2_SCAN_REQUEST && t->ev[*i].stream == stream);
	(*i)++;
}

static void
want_end(const struct trace *t, unsigned i, uint8_t why)
{
	REQUIRE(t->why == why);
	if (why)
		REQUIRE(i + 1 == t->n && t->ev[i].st == H2_SCAN_GAVE_UP);
	else
		REQUIRE(i == t->n);
}

/* The table after request r: size and entries (name, value), newest
 * first; values of configured names are kept. */
static void
want_table(const struct trace *t,
	   unsigned r,
	   uint32_t size,
	   const char *const *nv,
	   unsigned n)
{
	const struct snap *sn = &t->snap[r];
	unsigned d;

	REQUIRE(r < t->nsnap);
	REQUIRE(sn->size == size && sn->count == n);
	for (d = 0; d < n; d++) {
		REQUIRE(sn->nlen[d] == strlen(nv[2 * d]));
		REQUIRE(sn->vlen[d] == strlen(nv[2 * d + 1]));
		REQUIRE((sn->k[d] & 0x0f) == kof(nv[2 * d]));
		REQUIRE(sn->k[d] & E_KEPT);
	}
}

static void
setup(void)
{
	unsigned k;

	memset(&cfg, 0, sizeof(cfg));
	for (k = 0; k < N_NAMES; k++)
		REQUIRE(h2_scan_config_add(&cfg, names[k]) == (int)k);
}

static void
teardown(void)
{
	if (ro_page)
		munmap(ro_page, ro_size);
	ro_page = NULL;
}

/* ---- RFC 7541 Appendix C -------------------------------------------------- */

#define EH 0x04 /* END_HEADERS */
#define ES 0x01 /* END_STREAM */

static const char *const c3_t1[] = {":authority", "www.example.com"};
static const char *const c3_t2[] = {"cache-control", "no-cache", ":authority",
				    "www.example.com"};
static const char *const c3_t3[] = {"custom-key", "custom-value", "cache-control",
				    "no-cache",   ":authority",   "www.example.com"};

static void
requests_c3(const char *const blocks[3])
{
	static struct stream s;
	static struct trace t;
	unsigned i = 0;

	start(&s);
	frame_hex(&s, 1, EH | ES, 1, blocks[0]);
	frame_hex(&s, 1, EH | ES, 3, blocks[1]);
	frame_hex(&s, 1, EH | ES, 5, blocks[2]);
	check(&s, &t);
	want_field(&t, &i, ":method", "GET");
	want_field(&t, &i, ":scheme", "http");
	want_field(&t, &i, ":path", "/");
	want_field(&t, &i, ":authority", "www.example.com");
	want_req(&t, &i, 1);
	want_field(&t, &i, ":method", "GET");
	want_field(&t, &i, ":scheme", "http");
	want_field(&t, &i, ":path", "/");
	want_field(&t, &i, ":authority", "www.example.com");
	want_field(&t, &i, "cache-control", "no-cache");
	want_req(&t, &i, 3);
	want_field(&t, &i, ":method", "GET");
	want_field(&t, &i, ":scheme", "https");
	want_field(&t, &i, ":path", "/index.html");
	want_field(&t, &i, ":authority", "www.example.com");
	want_field(&t, &i, "custom-key", "custom-value");
	want_req(&t, &i, 5);
	want_end(&t, i, 0);
	want_table(&t, 0, 57, c3_t1, 1);
	want_table(&t, 1, 110, c3_t2, 2);
	want_table(&t, 2, 164, c3_t3, 3);
}

START_TEST(rfc_c3_plain)
{
	static const char *const b[3] = {
		"8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
		"8286 84be 5808 6e6f 2d63 6163 6865",
		"8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 "
		"65",
	};

	requests_c3(b);
}
END_TEST

START_TEST(rfc_c4_huffman)
{
	static const char *const b[3] = {
		"8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
		"8286 84be 5886 a8eb 1064 9cbf",
		"8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
	};

	requests_c3(b);
}
END_TEST

#define DATE1  "Mon, 21 Oct 2013 20:13:21 GMT"
#define DATE2  "Mon, 21 Oct 2013 20:13:22 GMT"
#define LOC    "https://www.example.com"
#define COOKIE "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"

static const char *const c5_t1[] = {"location",      LOC,       "date",    DATE1,
				    "cache-control", "private", ":status", "302"};
static const char *const c5_t2[] = {":status", "307", "location",      LOC,
				    "date",    DATE1, "cache-control", "private"};
static const char *const c5_t3[] = {"set-cookie", COOKIE, "content-encoding",
				    "gzip",       "date", DATE2};

/* The response examples as request blocks (HPACK is the same both ways),
 * with the 256-byte table a size update sets first: eviction. */
static void
responses_c5(const char *const blocks[3])
{
	static struct stream s;
	static struct trace t;
	char b0[1024];
	unsigned i = 0;

	snprintf(b0, sizeof(b0), "3fe101 %s", blocks[0]); /* size update: 256 */
	start(&s);
	frame_hex(&s, 1, EH, 1, b0);
	frame_hex(&s, 1, EH, 3, blocks[1]);
	frame_hex(&s, 1, EH, 5, blocks[2]);
	check(&s, &t);
	want_field(&t, &i, ":status", "302");
	want_field(&t, &i, "cache-control", "private");
	want_field(&t, &i, "date", DATE1);
	want_field(&t, &i, "location", LOC);
	want_req(&t, &i, 1);
	want_field(&t, &i, ":status", "307");
	want_field(&t, &i, "cache-control", "private");
	want_field(&t, &i, "date", DATE1);
	want_field(&t, &i, "location", LOC);
	want_req(&t, &i, 3);
	want_field(&t, &i, ":status", "200");
	want_field(&t, &i, "cache-control", "private");
	want_field(&t, &i, "date", DATE2);
	want_field(&t, &i, "location", LOC);
	want_field(&t, &i, "content-encoding", "gzip");
	want_field(&t, &i, "set-cookie", COOKIE);
	want_req(&t, &i, 5);
	want_end(&t, i, 0);
	want_table(&t, 0, 222, c5_t1, 4);
	want_table(&t, 1, 222, c5_t2, 4);
	want_table(&t, 2, 215, c5_t3, 3);
	REQUIRE(t.snap[0].max == 256);
}

START_TEST(rfc_c5_plain)
{
	static const char *const b[3] = {
		"4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 "
		"3230 3133 "
		"2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 "
		"7861 6d70 "
		"6c65 2e63 6f6d",
		"4803 3330 37c1 c0bf",
		"88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 "
		"3220 474d "
		"54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 "
		"454f 5049 "
		"5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 "
		"7369 6f6e "
		"3d31",
	};

	responses_c5(b);
}
END_TEST

START_TEST(rfc_c6_huffman)
{
	static const char *const b[3] = {
		"4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 "
		"66e0 82a6 "
		"2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
		"4883 640e ffc1 c0bf",
		"88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a "
		"839b d9ab "
		"77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 "
		"0fb5 291f "
		"9587 3160 65c0 03ed 4ee5 b106 3d50 07",
	};

	responses_c5(b);
}
END_TEST

TEST_SUITE(h2_scan_suite)
{
	Suite *s = suite_create("h2-scan");
	TCase *tc = tcase_create("h2-scan");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, rfc_c3_plain);
	tcase_add_test(tc, rfc_c4_huffman);
	tcase_add_test(tc, rfc_c5_plain);
	tcase_add_test(tc, rfc_c6_huffman);
	suite_add_tcase(s, tc);
	return s;
}
