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
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "h2-huff.h"
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

#define EV_MAX   520
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
/* run() starts the scanner as the socket level does after a 101 to
 * "Upgrade: h2c" (h2_scan_upgraded()). */
static bool run_upgraded;

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

/* run() feeds with h2_scan_feed_cb() (run_cb), its reports recorded by
 * run_report() at their offsets from the feed's start (run_base); every
 * third one it stops the feed (run_taken: the report it returns is not
 * recorded again). */
static bool run_cb, run_taken;
static size_t run_base;
static unsigned run_reports;

static bool
run_report(void *arg, const struct h2_scan *s, enum h2_scan_status r, size_t at)
{
	REQUIRE(s == &st && (r == H2_SCAN_FIELD || r == H2_SCAN_REQUEST));
	record(arg, r, run_base + at);
	run_taken = ++run_reports % 3 == 0;
	return !run_taken;
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
	if (run_upgraded)
		h2_scan_upgraded(&st);
	for (ci = 0; ci <= ncuts; ci++) {
		size_t b = ci < ncuts ? cuts[ci] : n, off = a;
		int r;

		do {
			size_t used = 99999;

			run_taken = false;
			run_base = off;
			if (run_cb)
				r = h2_scan_feed_cb(&st, &cfg, p + off, b - off, &used,
						    run_report, t);
			else
				r = h2_scan_feed(&st, &cfg, p + off, b - off, &used);
			REQUIRE(used <= b - off);
			off += used;
			if (r == H2_SCAN_MORE)
				REQUIRE(off == b);
			else if (!run_taken)
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
	/* The reports taken as they come: the same, whole, split at every
	 * point (short streams) and a byte at a time. */
	run_cb = true;
	run(&u, p, s->n, NULL, 0, pre);
	same(t, &u);
	for (i = 1; i < s->n && s->n <= 8192; i++) {
		cuts[0] = i;
		run(&u, p, s->n, cuts, 1, pre);
		same(t, &u);
	}
	for (i = 0; i + 1 < s->n; i++)
		cuts[i] = i + 1;
	run(&u, p, s->n, cuts, s->n ? s->n - 1 : 0, pre);
	same(t, &u);
	run_cb = false;
	if (s->n > 8192) {
		/* Too long for every split: random pieces, small and large. */
		unsigned seed = 7, r;

		for (r = 0; r < 200; r++) {
			size_t nc = 0, at = 0;

			for (;;) {
				at += 1 + (size_t)rand_r(&seed) % (r % 2 ? 64 : 20000);
				if (at >= s->n)
					break;
				cuts[nc++] = at;
			}
			run(&u, p, s->n, cuts, nc, pre);
			same(t, &u);
		}
		for (i = 0; i + 1 < s->n; i++)
			cuts[i] = i + 1;
		run(&u, p, s->n, cuts, s->n - 1, pre);
		same(t, &u);
		return;
	}
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

	run_upgraded = false;
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

/* A state fed by two threads at once, or overwritten (proc-context/h2-scan.h,
 * "Shared state"): whatever its fields hold, a feed stays within the
 * state, the configuration and the scanner's tables, and ends; the state
 * and the configuration lie flush against an inaccessible page, and the
 * sanitizer build checks the array indexes.  Each field reported is read
 * whole. */
START_TEST(hostile_state)
{
	static const char *const b[3] = {
		"8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
		"8286 84be 5886 a8eb 1064 9cbf",
		"8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
	};
	static struct stream s;
	static uint8_t zero[1000];
	void *smap, *cmap;
	size_t slen, clen;
	struct h2_scan *g = test_guarded_tail(sizeof(*g), &smap, &slen);
	struct h2_scan_config *c = test_guarded_tail(sizeof(*c), &cmap, &clen);
	unsigned seed = 11, round, sum = 0;
	uint32_t id = 1;

	*c = cfg;
	start(&s);
	while (s.n < 60000) {
		frame_hex(&s, 1, EH, id, b[id / 2 % 3]);
		frame(&s, 0, 0, id, zero, sizeof(zero));
		id += 2;
	}
	for (round = 0; round < 20000; round++) {
		uint8_t *p = (uint8_t *)g;
		size_t i, off = 0, used;

		for (i = 0; i < offsetof(struct h2_scan, name); i++)
			p[i] = (uint8_t)rand_r(&seed);
		/* fields in and just past their ranges, often */
		if (rand_r(&seed) % 2) {
			g->phase = (uint8_t)(rand_r(&seed) % 10);
			g->hp = (uint8_t)(rand_r(&seed) % 5);
			g->pre = (uint8_t)(rand_r(&seed) % 30);
			g->hdr_pos = (uint8_t)(rand_r(&seed) % 12);
			g->h_bits = (uint8_t)(rand_r(&seed) % 70);
			g->int_shift = (uint8_t)(rand_r(&seed) % 40);
			g->e_count = (uint8_t)(rand_r(&seed) % 140);
			g->rep_static = (uint8_t)(rand_r(&seed) % 70);
			g->a_used = (uint16_t)(rand_r(&seed) % (H2_SCAN_ARENA + 64));
			g->dec_len = (uint32_t)(rand_r(&seed) % 2048);
			g->str_left = (uint32_t)(rand_r(&seed) % 4096);
			g->left = (uint32_t)(rand_r(&seed) % 4096);
		}
		while (off < s.n) {
			size_t chunk = 1 + (size_t)(rand_r(&seed) % 30000);
			enum h2_scan_status r;

			if (chunk > s.n - off)
				chunk = s.n - off;
			used = 99999;
			r = h2_scan_feed(g, c, s.b + off, chunk, &used);
			REQUIRE(used <= chunk);
			off += used ? used : chunk;
			if (r == H2_SCAN_FIELD) {
				struct h2_scan_field f;

				h2_scan_field(g, &f);
				REQUIRE(f.len <= H2_SCAN_VALUE_MAX);
				REQUIRE(f.value || !f.len);
				for (i = 0; i < f.len; i++)
					sum += f.value[i];
			}
		}
	}
	(void)sum;
	munmap(smap, slen);
	munmap(cmap, clen);
}
END_TEST

/* The same with the decoded length of a Huffman string in progress near
 * 2^32, which no string reaches (its encoded length is below 2^28 + 127)
 * but a state fed by two threads at once can hold (one's str_left taken
 * from below the other's).  A name, a configured value (stored) and
 * another value (only counted) go on from there with 40 bytes at once
 * (refills of 8 in one load) or in pieces of 3 (a byte at a time):
 * nothing may be written outside the state.  The room left for a
 * refill's codes was computed as dec_len + 13, which wrapped, and the
 * codes went 4 GiB past the state (SIGSEGV). */
START_TEST(hostile_state_long_string)
{
	/* A literal field without indexing up to its Huffman string's
	 * length (set below): the name's, the value of custom-key
	 * (configured, stored), of x-a (only counted). */
	static const char *const head[] = {
		"00 80",
		"00 0a 63 75 73 74 6f 6d 2d 6b 65 79 80",
		"00 03 78 2d 61 80",
	};
	static struct stream s;
	static const uint32_t lens[] = {0xffffffffu, 0xfffffffeu, 0xfffffff8u,
					0xfffffff4u, 0xfffffff3u, 0xffffffe0u,
					0xfffffc00u, 0x80000000u};
	void *smap;
	size_t slen;
	struct h2_scan *g = test_guarded_tail(sizeof(*g), &smap, &slen);
	unsigned h, j, cut;
	uint8_t blk[64];

	for (h = 0; h < 3; h++)
		for (cut = 0; cut < 2; cut++)
			for (j = 0; j < sizeof(lens) / sizeof(lens[0]); j++) {
				size_t n = hex(blk, head[h]), before, used, off;
				/* 40 bytes of 'a' (00011), so that they hold
				 * whole codes: 64 symbols */
				uint8_t a[40];
				unsigned i;

				for (i = 0; i < 40; i += 5)
					memcpy(a + i, "\x18\xc6\x31\x8c\x63", 5);
				if (h == 0)
					blk[1] = (uint8_t)(0x80 | 40);
				else
					blk[n - 1] = (uint8_t)(0x80 | 40);
				memcpy(blk + n, a, 40);
				n += 40;
				if (h == 0) {
					memcpy(blk + n, "\x01\x76", 2);
					n += 2;
				}
				start(&s);
				frame(&s, 1, EH, 1, blk, n);
				h2_scan_reset(g, 0);
				/* up to the string's first byte */
				before = s.n - n + (h == 0 ? 2 : hex(blk, head[h]));
				REQUIRE(h2_scan_feed(g, &cfg, s.b, before, &used) ==
					H2_SCAN_MORE);
				REQUIRE(used == before);
				g->dec_len = lens[j];
				/* the rest in pieces of 3, or at once */
				for (off = before; off < s.n; off += used) {
					size_t k = cut ? 3 : s.n - off;
					enum h2_scan_status r;

					if (k > s.n - off)
						k = s.n - off;
					r = h2_scan_feed(g, &cfg, s.b + off, k, &used);
					REQUIRE(used <= k);
					if (r == H2_SCAN_FIELD) {
						struct h2_scan_field f;

						h2_scan_field(g, &f);
						REQUIRE(f.len <= H2_SCAN_VALUE_MAX);
					}
					if (r == H2_SCAN_GAVE_UP)
						break;
				}
			}
	munmap(smap, slen);
}
END_TEST

/* h2_scan_feed_cb() with a report callback that always goes on, run
 * against a state that another thread (here the callback) puts back at
 * each report, so that the feed would report again at the same offset
 * without end: the feed must end, handing a third report there to the
 * caller instead (sink_took()).  Once with the end of a block (put back
 * to before its REQUEST), once with a field (a value string of 0 bytes
 * left, whose end reports without a byte consumed). */
static struct h2_scan rearm_snap;
static unsigned rearm_calls;

static bool
rearm_report(void *arg, const struct h2_scan *s, enum h2_scan_status r, size_t at)
{
	REQUIRE(s == &st && r == *(enum h2_scan_status *)arg && at == 0);
	/* bounded here, so that a feed without the bound fails the test
	 * instead of hanging it */
	if (++rearm_calls >= 100)
		return false;
	memcpy(&st, &rearm_snap, sizeof(st));
	return true;
}

START_TEST(feed_cb_rearmed_state)
{
	static struct stream s;
	enum h2_scan_status want;
	size_t off, used;
	int r;

	start(&s);
	frame_hex(&s, 1, EH, 1, "82 82"); /* :method GET, twice */
	frame_hex(&s, 1, EH, 3, "82");
	h2_scan_reset(&st, 0);
	r = h2_scan_feed(&st, &cfg, s.b, s.n, &used);
	REQUIRE(r == H2_SCAN_FIELD);
	off = used;

	/* Between the two fields: the value of a field of a configured name
	 * with 0 bytes left (HP_STR, K_NOINC; private values). */
	st.hp = 3;
	st.kind = 2;
	st.str_left = 0;
	st.str_value = 1;
	st.str_huff = 0;
	st.dec_len = 0;
	st.f_k = (uint8_t)kof(":method");
	memcpy(&rearm_snap, &st, sizeof(st));
	want = H2_SCAN_FIELD;
	rearm_calls = 0;
	r = h2_scan_feed_cb(&st, &cfg, s.b + off, s.n - off, &used, rearm_report,
			    &want);
	ck_assert_int_eq(r, H2_SCAN_FIELD);
	ck_assert_uint_eq(used, 0);
	ck_assert_uint_eq(rearm_calls, 2);

	/* After the block's last field: its end not reported yet. */
	h2_scan_reset(&st, 0);
	r = h2_scan_feed(&st, &cfg, s.b, s.n, &used);
	off = used;
	REQUIRE(r == H2_SCAN_FIELD);
	r = h2_scan_feed(&st, &cfg, s.b + off, s.n - off, &used);
	REQUIRE(r == H2_SCAN_FIELD);
	off += used;
	memcpy(&rearm_snap, &st, sizeof(st));
	want = H2_SCAN_REQUEST;
	rearm_calls = 0;
	r = h2_scan_feed_cb(&st, &cfg, s.b + off, s.n - off, &used, rearm_report,
			    &want);
	ck_assert_int_eq(r, H2_SCAN_REQUEST);
	ck_assert_uint_eq(used, 0);
	ck_assert_uint_eq(rearm_calls, 2);
	ck_assert_uint_eq(h2_scan_stream(&st), 1);
}
END_TEST

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

/* ---- hand-made header blocks ---------------------------------------------- */

struct blk {
	uint8_t b[1 << 17];
	size_t n;
};

/* §5.1: an integer with an n-bit prefix after the flag bits. */
static void
b_int(struct blk *k, uint8_t flags, unsigned prefix, uint32_t v)
{
	uint32_t max = (1u << prefix) - 1;

	REQUIRE(k->n + 6 <= sizeof(k->b));
	if (v < max) {
		k->b[k->n++] = (uint8_t)(flags | v);
		return;
	}
	k->b[k->n++] = (uint8_t)(flags | max);
	v -= max;
	while (v >= 128) {
		k->b[k->n++] = (uint8_t)(0x80 | (v & 0x7f));
		v >>= 7;
	}
	k->b[k->n++] = (uint8_t)v;
}

static void
b_strn(struct blk *k, const void *p, size_t n)
{
	b_int(k, 0, 7, (uint32_t)n);
	REQUIRE(k->n + n <= sizeof(k->b));
	memcpy(k->b + k->n, p, n);
	k->n += n;
}

static void
b_raw(struct blk *k, const char *h)
{
	k->n += hex(k->b + k->n, h);
}

static void
b_idx(struct blk *k, uint32_t idx)
{
	b_int(k, 0x80, 7, idx);
}

static void
b_size(struct blk *k, uint32_t v)
{
	b_int(k, 0x20, 5, v);
}

/* A literal field: incremental indexing (inc 1), without indexing (0)
 * or never indexed (2); name by index, or literal with name_idx 0. */
static void
b_litn(struct blk *k,
       int inc,
       uint32_t name_idx,
       const char *name,
       const void *v,
       size_t vn)
{
	if (inc == 1)
		b_int(k, 0x40, 6, name_idx);
	else
		b_int(k, inc == 2 ? 0x10 : 0x00, 4, name_idx);
	if (!name_idx)
		b_strn(k, name, strlen(name));
	b_strn(k, v, vn);
}

static void
b_lit(struct blk *k, int inc, uint32_t name_idx, const char *name, const char *v)
{
	b_litn(k, inc, name_idx, name, v, strlen(v));
}

static void
headers(struct stream *s, uint8_t flags, uint32_t id, struct blk *k)
{
	frame(s, 1, flags, id, k->b, k->n);
	k->n = 0;
}

/* One request on stream id: ":method: GET" (static 2). */
static void
get(struct stream *s, uint32_t id)
{
	frame(s, 1, EH | ES, id, "\x82", 1);
}

static void
want_get(const struct trace *t, unsigned *i, uint32_t id)
{
	want_field(t, i, ":method", "GET");
	want_req(t, i, id);
}

/* ---- preface ---------------------------------------------------------------- */

START_TEST(preface)
{
	static struct stream s;
	static struct trace t;
	unsigned pre, i;

	/* Every count of bytes seen before (the HTTP/1 scanner's "PRI "). */
	for (pre = 0; pre <= H2_SCAN_PREFACE_LEN; pre++) {
		s.n = 0;
		put(&s, H2_SCAN_PREFACE + pre, H2_SCAN_PREFACE_LEN - pre);
		frame(&s, 4, 0, 0, NULL, 0);
		get(&s, 1);
		check_pre(&s, pre, &t);
		i = 0;
		want_get(&t, &i, 1);
		want_end(&t, i, 0);
	}
	/* A wrong byte anywhere: given up on that byte. */
	for (pre = 0; pre < H2_SCAN_PREFACE_LEN; pre++) {
		start(&s);
		get(&s, 1);
		s.b[pre] ^= 0x20;
		check(&s, &t);
		REQUIRE(t.n == 1 && t.ev[0].st == H2_SCAN_GAVE_UP &&
			t.ev[0].off == pre + 1);
		REQUIRE(t.why == H2_SCAN_WHY_PREFACE);
	}
	s.n = 0;
	put(&s, "GET / HTTP/1.1\r\n\r\n", 18);
	check(&s, &t);
	REQUIRE(t.why == H2_SCAN_WHY_PREFACE && t.n == 1 && t.ev[0].off == 1);
	/* More than the preface's length: nonsense from the caller. */
	h2_scan_reset(&st, H2_SCAN_PREFACE_LEN + 1);
	REQUIRE(h2_scan_gave_up(&st) && st.why == H2_SCAN_WHY_PREFACE);
	h2_scan_reset(&st, 4);
	REQUIRE(!h2_scan_gave_up(&st));
}
END_TEST

/* After a 101 to "Upgrade: h2c" (RFC 7540 §3.2) stream 1 is the upgrade
 * request, open without a HEADERS frame: a block the client sends on it
 * (trailers of a request with a body) is no new request, the first new
 * one is stream 3, and the preface still comes first, with empty HPACK
 * tables.  Without h2_scan_upgraded() the block on stream 1 would be a
 * new request (the socket level would make it the current one). */
START_TEST(upgraded)
{
	static struct stream s;
	static struct trace t;
	unsigned i;

	run_upgraded = true;
	start(&s);
	frame(&s, 1, EH | ES, 1, "\x82", 1);
	get(&s, 3);
	check(&s, &t);
	i = 0;
	want_get(&t, &i, 3);
	want_end(&t, i, 0);
	REQUIRE(h2_scan_stream(&st) == 3);

	/* The preface is not optional. */
	s.n = 0;
	frame(&s, 4, 0, 0, NULL, 0);
	get(&s, 3);
	check(&s, &t);
	REQUIRE(t.why == H2_SCAN_WHY_PREFACE);

	/* Idempotent, and a scanner further on keeps its streams. */
	h2_scan_reset(&st, 0);
	h2_scan_upgraded(&st);
	h2_scan_upgraded(&st);
	REQUIRE(st.max_id == 1);
	st.max_id = 7;
	h2_scan_upgraded(&st);
	REQUIRE(st.max_id == 7);
	/* Without it, stream 1's block is a request. */
	run_upgraded = false;
	start(&s);
	frame(&s, 1, EH | ES, 1, "\x82", 1);
	check(&s, &t);
	i = 0;
	want_get(&t, &i, 1);
	want_end(&t, i, 0);
}
END_TEST

/* ---- HEADERS flags, CONTINUATION ---------------------------------------- */

START_TEST(padded_priority)
{
	static struct stream s;
	static struct trace t;
	uint8_t p[64];
	unsigned i = 0;

	start(&s);
	/* PADDED: pad length 7, block, 7 bytes of padding */
	memcpy(p, "\x07\x82\x84\0\0\0\0\0\0\0", 10);
	frame(&s, 1, EH | 0x08, 1, p, 10);
	/* PRIORITY: exclusive dependency on 0, weight 255 */
	memcpy(p, "\x80\0\0\0\xff\x83\x86", 7);
	frame(&s, 1, EH | 0x20, 3, p, 7);
	/* both, and padding that fills the rest exactly */
	memcpy(p, "\x03\0\0\0\x01\x10\x87\x85\1\2\3", 11);
	frame(&s, 1, EH | 0x28, 5, p, 11);
	/* padded, an empty block: a request without fields */
	frame(&s, 1, EH | 0x08, 7, "\x02\0\0", 3);
	/* padded, no padding */
	frame(&s, 1, EH | 0x08, 9, "\x00\x82", 2);
	check(&s, &t);
	want_field(&t, &i, ":method", "GET");
	want_field(&t, &i, ":path", "/");
	want_req(&t, &i, 1);
	want_field(&t, &i, ":method", "POST");
	want_field(&t, &i, ":scheme", "http");
	want_req(&t, &i, 3);
	want_field(&t, &i, ":scheme", "https");
	want_field(&t, &i, ":path", "/index.html");
	want_req(&t, &i, 5);
	want_req(&t, &i, 7);
	want_get(&t, &i, 9);
	want_end(&t, i, 0);

	/* Padding longer than the frame: given up. */
	start(&s);
	frame(&s, 1, EH | 0x08, 1, "\x03\x82\0", 3);
	check(&s, &t);
	want_end(&t, 0, H2_SCAN_WHY_FRAME);
	start(&s);
	frame(&s, 1, EH | 0x28, 1, "\x01\0\0\0\0\x10", 6); /* 1 + 5 + pad 1 > 6 */
	check(&s, &t);
	want_end(&t, 0, H2_SCAN_WHY_FRAME);
	/* Too short for its priority fields, for its pad length. */
	start(&s);
	frame(&s, 1, EH | 0x20, 1, "\0\0\0", 3);
	check(&s, &t);
	want_end(&t, 0, H2_SCAN_WHY_FRAME);
	start(&s);
	frame(&s, 1, EH | 0x08, 1, NULL, 0);
	check(&s, &t);
	want_end(&t, 0, H2_SCAN_WHY_FRAME);
}
END_TEST

/* C.4.3's block (Huffman strings, dynamic references) split into HEADERS
 * and CONTINUATION frames at every point, and into three frames. */
START_TEST(continuation)
{
	static struct stream s;
	static struct trace t;
	uint8_t b3[64];
	size_t n3 =
		hex(b3, "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf");
	size_t a, c;

	for (a = 0; a <= n3; a++)
		for (c = a; c <= n3; c += (a % 4 == 0 ? 1 : n3 + 1)) {
			unsigned i = 0;

			start(&s);
			frame_hex(&s, 1, EH, 1,
				  "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff");
			frame_hex(&s, 1, EH, 3, "8286 84be 5886 a8eb 1064 9cbf");
			frame(&s, 1, 0, 5, b3, a);
			if (c < n3 && c > a) {
				frame(&s, 9, 0, 5, b3 + a, c - a);
				frame(&s, 9, EH, 5, b3 + c, n3 - c);
			} else {
				frame(&s, 9, EH, 5, b3 + a, n3 - a);
			}
			get(&s, 7);
			check(&s, &t);
			i = 11;
			want_field(&t, &i, ":method", "GET");
			want_field(&t, &i, ":scheme", "https");
			want_field(&t, &i, ":path", "/index.html");
			want_field(&t, &i, ":authority", "www.example.com");
			want_field(&t, &i, "custom-key", "custom-value");
			want_req(&t, &i, 5);
			want_get(&t, &i, 7);
			want_end(&t, i, 0);
			want_table(&t, 2, 164, c3_t3, 3);
		}
}
END_TEST

START_TEST(continuation_rules)
{
	static struct stream s;
	static struct trace t;
	unsigned i;

	/* CONTINUATION without a block, after a complete one */
	start(&s);
	frame(&s, 9, EH, 1, "\x82", 1);
	check(&s, &t);
	want_end(&t, 0, H2_SCAN_WHY_FRAME);
	start(&s);
	get(&s, 1);
	frame(&s, 9, EH, 1, "\x82", 1);
	check(&s, &t);
	i = 0;
	want_get(&t, &i, 1);
	want_end(&t, i, H2_SCAN_WHY_FRAME);
	/* Inside a block: a PING, DATA, HEADERS, an unknown type, a
	 * CONTINUATION of another stream.  The fields before are reported. */
	{
		static const uint8_t types[] = {6, 0, 1, 0xfa, 9};
		unsigned j;

		for (j = 0; j < sizeof(types); j++) {
			start(&s);
			frame(&s, 1, 0, 1, "\x82", 1);
			frame(&s, types[j], 0, types[j] == 9 ? 3 : 1,
			      "\x84\0\0\0\0\0\0\0", 8);
			frame(&s, 9, EH, 1, "\x84", 1);
			check(&s, &t);
			i = 0;
			want_field(&t, &i, ":method", "GET");
			want_end(&t, i, H2_SCAN_WHY_FRAME);
			REQUIRE(t.ev[1].off == H2_SCAN_PREFACE_LEN + 15 + 10 + 9);
		}
	}
	/* PUSH_PROMISE is the server's */
	start(&s);
	frame(&s, 5, EH, 1, "\0\0\0\2\x82", 5);
	check(&s, &t);
	want_end(&t, 0, H2_SCAN_WHY_FRAME);
}
END_TEST

/* ---- streams ------------------------------------------------------------- */

/* h2_scan_watch(): the client's RST_STREAM of the watched stream, fed
 * split at every point, sets the flag once its frame header is in; one
 * of another stream (or of stream 0) does not, nor one after a new
 * watch, and taking the flag clears it. */
START_TEST(watch_reset)
{
	static struct stream s;
	size_t cut, used, end;

	start(&s);
	frame(&s, 3, 0, 3, "\0\0\0\x08", 4);
	frame(&s, 3, 0, 0, "\0\0\0\x08", 4);
	frame(&s, 6, 0, 0, "12345678", 8); /* PING */
	end = s.n;
	frame(&s, 3, 0, 0x80000001u, "\0\0\0\x08", 4); /* reserved bit */
	for (cut = 0; cut <= s.n; cut++) {
		h2_scan_reset(&st, 0);
		h2_scan_watch(&st, 1);
		REQUIRE(h2_scan_feed(&st, &cfg, s.b, cut, &used) == H2_SCAN_MORE);
		REQUIRE(used == cut);
		REQUIRE(h2_scan_watch_reset(&st) == (cut >= end + 9));
		REQUIRE(!h2_scan_watch_reset(&st));
		REQUIRE(h2_scan_feed(&st, &cfg, s.b + cut, s.n - cut, &used) ==
			H2_SCAN_MORE);
		REQUIRE(h2_scan_watch_reset(&st) == (cut < end + 9));
		REQUIRE(!h2_scan_gave_up(&st));
	}
	h2_scan_reset(&st, 0);
	h2_scan_watch(&st, 1);
	REQUIRE(h2_scan_feed(&st, &cfg, s.b, s.n, &used) == H2_SCAN_MORE);
	h2_scan_watch(&st, 3);
	REQUIRE(!h2_scan_watch_reset(&st));
}
END_TEST

START_TEST(trailers_and_ids)
{
	static struct stream s;
	static struct trace t;
	static struct blk k;
	unsigned i = 0;

	start(&s);
	b_idx(&k, 3);
	b_lit(&k, 1, 0, "traceparent", "00-1-2-01");
	headers(&s, EH, 1, &k);
	frame(&s, 0, 0, 1, "body", 4);
	/* Trailers: not a request, but the table follows them. */
	b_lit(&k, 1, 0, "custom-key", "in-trailer");
	b_lit(&k, 1, 0, "x-other", "zzz");
	headers(&s, EH | ES, 1, &k);
	b_idx(&k, 2);
	b_idx(&k, 63);
	b_idx(&k, 64);
	headers(&s, EH | ES, 3, &k);
	/* Stream 9, then 5 (below it: not new), then 11. */
	get(&s, 9);
	get(&s, 5);
	get(&s, 11);
	check(&s, &t);
	want_field(&t, &i, ":method", "POST");
	want_field(&t, &i, "traceparent", "00-1-2-01");
	want_req(&t, &i, 1);
	want_field(&t, &i, ":method", "GET");
	want_field(&t, &i, "custom-key", "in-trailer");
	want_field(&t, &i, "traceparent", "00-1-2-01");
	want_req(&t, &i, 3);
	want_get(&t, &i, 9);
	want_get(&t, &i, 11);
	want_end(&t, i, 0);
	REQUIRE(t.snap[1].count == 3 && t.snap[1].k[0] == E_K_NONE);

	/* A client never opens an even stream, nor stream 0. */
	start(&s);
	get(&s, 1);
	get(&s, 2);
	check(&s, &t);
	i = 0;
	want_get(&t, &i, 1);
	want_end(&t, i, H2_SCAN_WHY_FRAME);
	start(&s);
	get(&s, 0);
	check(&s, &t);
	want_end(&t, 0, H2_SCAN_WHY_FRAME);
	/* The high bit of the stream id is reserved: ignored. */
	start(&s);
	get(&s, 0x80000003u);
	check(&s, &t);
	i = 0;
	want_get(&t, &i, 3);
	want_end(&t, i, 0);
}
END_TEST

START_TEST(other_frames)
{
	static struct stream s;
	static struct trace t;
	static uint8_t data[70000];
	unsigned i = 0, j;

	/* DATA that looks like frames of its own */
	for (j = 0; j + 10 <= sizeof(data); j += 10)
		memcpy(data + j, "\0\0\1\1\4\0\0\0\3\x83", 10);
	start(&s);
	get(&s, 1);
	frame(&s, 0, 0x08, 1, data, sizeof(data)); /* padded DATA: all skipped */
	frame(&s, 8, 0, 0, "\0\1\0\0", 4);         /* WINDOW_UPDATE */
	frame(&s, 4, 1, 0, NULL, 0);               /* SETTINGS ack */
	frame(&s, 6, 0, 0, "12345678", 8);         /* PING */
	frame(&s, 2, 0, 3, "\0\0\0\1\x10", 5);     /* PRIORITY of an idle stream */
	frame(&s, 3, 0, 1, "\0\0\0\x08", 4);       /* RST_STREAM */
	frame(&s, 0xfa, 0xff, 7, data, 300);       /* unknown types */
	frame(&s, 0x10, 0, 0, NULL, 0);
	frame(&s, 7, 0, 0, "\0\0\0\0\0\0\0\0", 8); /* GOAWAY */
	get(&s, 3);
	check(&s, &t);
	want_get(&t, &i, 1);
	want_get(&t, &i, 3);
	want_end(&t, i, 0);
	/* The largest frame length: only counted down. */
	start(&s);
	put(&s, "\xff\xff\xff\0\0\0\0\0\1", 9);
	check(&s, &t);
	want_end(&t, 0, 0);
	REQUIRE(st.phase != 0 &&
		st.left == 0xffffff - (s.n - H2_SCAN_PREFACE_LEN - 15 - 9));
}
END_TEST

/* ---- values ----------------------------------------------------------- */

START_TEST(repeats_and_kinds)
{
	static struct stream s;
	static struct trace t;
	static struct blk k;
	unsigned i = 0;

	start(&s);
	b_lit(&k, 0, 4, NULL, "/a");           /* without indexing */
	b_lit(&k, 2, 4, NULL, "/b");           /* never indexed */
	b_lit(&k, 0, 0, ":path", "/c");        /* literal name */
	b_lit(&k, 2, 0, "x-secret", "s");      /* not configured */
	b_lit(&k, 0, 0, "Custom-Key", "case"); /* names are compared exactly */
	b_lit(&k, 0, 0, "custom-keyx", "longer");
	b_lit(&k, 0, 0, "", "empty name");
	b_lit(&k, 1, 0, "custom-key", "");
	headers(&s, EH, 1, &k);
	b_idx(&k, 62);
	b_idx(&k, 62);
	headers(&s, EH, 3, &k);
	/* Nothing else was added: 63 is beyond the table. */
	b_idx(&k, 63);
	headers(&s, EH, 5, &k);
	check(&s, &t);
	want_field(&t, &i, ":path", "/a");
	want_field(&t, &i, ":path", "/b");
	want_field(&t, &i, ":path", "/c");
	want_field(&t, &i, "custom-key", "");
	want_req(&t, &i, 1);
	want_field(&t, &i, "custom-key", "");
	want_field(&t, &i, "custom-key", "");
	want_req(&t, &i, 3);
	want_end(&t, i, H2_SCAN_WHY_HPACK);
	REQUIRE(t.snap[0].count == 1 && t.snap[0].size == 42);
}
END_TEST

START_TEST(cut_and_unknown)
{
	static struct stream s;
	static struct trace t;
	static struct blk k;
	static uint8_t v[3000];
	unsigned i = 0, j, r;

	for (j = 0; j < sizeof(v); j++)
		v[j] = (uint8_t)(j * 7 + j / 256);
	/* A value longer than H2_SCAN_VALUE_MAX: its first bytes, cut, both
	 * when decoded and from the table. */
	start(&s);
	b_size(&k, 65536);
	b_litn(&k, 1, 0, "traceparent", v, 2000);
	headers(&s, EH, 1, &k);
	b_idx(&k, 62);
	headers(&s, EH, 3, &k);
	/* The arena (1568 bytes) has 544 left after the first 1024: a value
	 * of 500 bytes is kept, one of 1000 is not, and a reference to it is
	 * reported as unknown. */
	b_litn(&k, 1, 20, NULL, v, 1000);       /* not configured: not kept */
	b_litn(&k, 1, 0, "custom-key", v, 500); /* kept */
	b_litn(&k, 1, 0, "custom-key", v + 1, 1000);
	headers(&s, EH, 5, &k);
	b_idx(&k, 62);
	b_idx(&k, 63);
	b_idx(&k, 65);
	headers(&s, EH, 7, &k);
	check(&s, &t);
	REQUIRE(t.n == 11);
	for (j = 0; j < 2; j++) {
		const struct ev *e = &t.ev[i];

		REQUIRE(e->st == H2_SCAN_FIELD && e->k == kof("traceparent"));
		REQUIRE(e->flags == H2_SCAN_F_CUT && e->len == H2_SCAN_VALUE_MAX);
		REQUIRE(memcmp(e->v, v, H2_SCAN_VALUE_MAX) == 0);
		i++;
		want_req(&t, &i, j ? 3 : 1);
	}
	REQUIRE(t.ev[4].len == 500 && t.ev[5].len == 1000 && t.ev[5].flags == 0);
	REQUIRE(memcmp(t.ev[5].v, v + 1, 1000) == 0);
	i = 7;
	REQUIRE(t.ev[i].flags == H2_SCAN_F_UNKNOWN && t.ev[i].null && t.ev[i].len == 0);
	REQUIRE(t.ev[i + 1].flags == 0 && t.ev[i + 1].len == 500);
	REQUIRE(memcmp(t.ev[i + 1].v, v, 500) == 0);
	REQUIRE(t.ev[i + 2].flags == H2_SCAN_F_CUT && t.ev[i + 2].len == 1024);
	i += 3;
	want_req(&t, &i, 7);

	/* A value of exactly H2_SCAN_VALUE_MAX is whole, from the table too. */
	start(&s);
	b_litn(&k, 1, 0, "traceparent", v, H2_SCAN_VALUE_MAX);
	headers(&s, EH, 1, &k);
	b_idx(&k, 62);
	headers(&s, EH, 3, &k);
	check(&s, &t);
	for (i = 0, j = 0; j < 2; j++) {
		REQUIRE(t.ev[i].flags == 0 && t.ev[i].len == H2_SCAN_VALUE_MAX);
		REQUIRE(memcmp(t.ev[i].v, v, H2_SCAN_VALUE_MAX) == 0);
		i++;
		want_req(&t, &i, j ? 3 : 1);
	}

	/* Values that wrap around the arena's end: a 1600-byte table holds
	 * two 700-byte values, each new one evicts the oldest. */
	start(&s);
	b_size(&k, 1600);
	headers(&s, EH, 1, &k);
	for (r = 0; r < 12; r++) {
		b_litn(&k, 1, 0, "custom-key", v + r, 700);
		if (r)
			b_idx(&k, 63);
		headers(&s, EH, 3 + 2 * r, &k);
	}
	check(&s, &t);
	REQUIRE(t.n == 1 + 12 * 3 - 1);
	for (r = 0, i = 1; r < 12; r++) {
		REQUIRE(t.ev[i].len == 700 && memcmp(t.ev[i].v, v + r, 700) == 0);
		i++;
		if (r) {
			REQUIRE(t.ev[i].flags == 0 && t.ev[i].len == 700);
			REQUIRE(memcmp(t.ev[i].v, v + r - 1, 700) == 0);
			i++;
		}
		want_req(&t, &i, 3 + 2 * r);
	}
}
END_TEST

/* ---- HPACK limits ----------------------------------------------------- */

START_TEST(size_updates)
{
	static struct stream s;
	static struct trace t;
	static struct blk k;
	unsigned i = 0;

	/* Two updates at the start: 0 empties the table. */
	start(&s);
	b_lit(&k, 1, 0, "custom-key", "one");
	headers(&s, EH, 1, &k);
	b_size(&k, 0);
	b_size(&k, 4096);
	b_lit(&k, 1, 0, "custom-key", "two");
	b_idx(&k, 62);
	headers(&s, EH, 3, &k);
	/* An update in a later block, an entry larger than the table. */
	b_size(&k, 100);
	b_lit(&k, 1, 0, "custom-key",
	      "three, a value longer than the table can hold. ......"
	      "............................");
	b_idx(&k, 2);
	headers(&s, EH, 5, &k);
	b_size(&k, 65536); /* the limit itself */
	b_idx(&k, 62);
	headers(&s, EH, 7, &k);
	check(&s, &t);
	want_field(&t, &i, "custom-key", "one");
	want_req(&t, &i, 1);
	want_field(&t, &i, "custom-key", "two");
	want_field(&t, &i, "custom-key", "two");
	want_req(&t, &i, 3);
	REQUIRE(t.snap[1].count == 1 && t.snap[1].size == 45 && t.snap[1].max == 4096);
	i++;
	want_field(&t, &i, ":method", "GET");
	want_req(&t, &i, 5);
	REQUIRE(t.snap[2].count == 0 && t.snap[2].size == 0 && t.snap[2].max == 100);
	want_end(&t, i, H2_SCAN_WHY_HPACK); /* 62: the table is empty */

	/* Above the limit; after a field. */
	start(&s);
	b_size(&k, 65537);
	headers(&s, EH, 1, &k);
	check(&s, &t);
	want_end(&t, 0, H2_SCAN_WHY_HPACK);
	start(&s);
	b_idx(&k, 2);
	b_size(&k, 0);
	headers(&s, EH, 1, &k);
	check(&s, &t);
	i = 0;
	want_field(&t, &i, ":method", "GET");
	want_end(&t, i, H2_SCAN_WHY_HPACK);
}
END_TEST

/* Blocks the decoder rejects: each after a good request. */
START_TEST(hpack_errors)
{
	static const char *const bad[] = {
		"80",                   /* index 0 */
		"be",                   /* index 62, the table empty */
		"7e 01 61",             /* literal name index 62 */
		"ff 80 80 80 80 01",    /* integer of five continuation bytes */
		"04 84 ff ff ff ff",    /* Huffman: EOS */
		"04 82 1f ff",          /* padding of 11 bits */
		"04 82 f8 ff",          /* ... of 8 bits */
		"04 81 18",             /* padding not all ones */
		"00 01 61 81 1c",       /* the same in a value */
		"40 03 61",             /* the block ends in a string */
		"40",                   /* ... after a representation's first byte */
		"0f",                   /* ... in an integer */
		"40 7f 80 80 80 01 61", /* a string longer than the block */
	};
	static struct stream s;
	static struct trace t;
	static struct blk k;
	unsigned j, i;

	for (j = 0; j < sizeof(bad) / sizeof(bad[0]); j++) {
		start(&s);
		get(&s, 1);
		b_raw(&k, bad[j]);
		headers(&s, EH, 3, &k);
		get(&s, 5);
		check(&s, &t);
		i = 0;
		want_get(&t, &i, 1);
		if (t.why != H2_SCAN_WHY_HPACK)
			ck_abort_msg("block %s: why %u", bad[j], t.why);
		want_end(&t, i, H2_SCAN_WHY_HPACK);
	}
	/* The good ones next to them: an integer of four continuation bytes
	 * (a table size of 31, not minimally encoded), padding of 3, 3 and 0
	 * bits, a long string (2-byte length), index 61 (not configured). */
	start(&s);
	b_raw(&k, "3f 80 80 80 00");
	b_raw(&k, "04 81 1f  04 81 4f  04 81 f8  04 82 64 1f");
	b_raw(&k, "04 7f 01");
	for (j = 0; j < 128; j++)
		k.b[k.n++] = 'x';
	b_raw(&k, "bd");
	headers(&s, EH, 1, &k);
	check(&s, &t);
	i = 0;
	want_field(&t, &i, ":path", "a");
	want_field(&t, &i, ":path", "t");
	want_field(&t, &i, ":path", "&");
	want_field(&t, &i, ":path", "30");
	REQUIRE(t.ev[4].len == 128 && t.ev[4].v[127] == 'x');
	i++;
	want_req(&t, &i, 1);
	want_end(&t, i, 0);
}
END_TEST

/* EOS in a Huffman string long enough to be decoded 8 bytes at a time
 * (proc-context/h2-scan.c, string_bytes()): the feed gives up at the byte
 * that holds EOS's last bit, whole and split alike (check()), wherever
 * that is in the bytes at hand. */
START_TEST(huffman_eos_long)
{
	static const struct {
		const char *blk;
		unsigned eos_end; /* bytes of the block up to EOS's last bit */
	} v[] = {
		/* EOS first: bits 0-29 */
		{"04 8c ff ff ff ff ff ff ff ff ff ff ff ff", 2 + 4},
		/* 8 'a' (40 bits), EOS at bits 40-69 */
		{"04 8c 18 c6 31 8c 63 ff ff ff ff ff ff ff", 2 + 9},
		/* in a value, after 16 'a' (80 bits), EOS at bits 80-109 */
		{"00 01 61 94 18 c6 31 8c 63 18 c6 31 8c 63 ff ff ff ff ff ff ff ff "
		 "ff ff",
		 4 + 14},
	};
	static struct stream s;
	static struct trace t;
	static struct blk k;
	unsigned j, i;

	for (j = 0; j < sizeof(v) / sizeof(v[0]); j++) {
		start(&s);
		b_raw(&k, v[j].blk);
		headers(&s, EH, 1, &k);
		check(&s, &t);
		i = 0;
		want_end(&t, i, H2_SCAN_WHY_HPACK);
		if (t.ev[0].off !=
		    s.n - (size_t)(strlen(v[j].blk) + 1) / 3 + v[j].eos_end)
			ck_abort_msg("block %u: gave up at %zu", j, t.ev[0].off);
	}
}
END_TEST

START_TEST(table_entries)
{
	static struct stream s;
	static struct trace t;
	static struct blk k;
	unsigned j, i = 0;

	/* 128 entries of 32 bytes fill 4096 bytes; more evict the oldest, a
	 * larger one two of them. */
	start(&s);
	for (j = 0; j < 200; j++)
		b_lit(&k, 1, 0, "", "");
	b_lit(&k, 1, 0, "custom-key", "x");
	b_idx(&k, 62);
	b_idx(&k, 62 + 126); /* the oldest */
	headers(&s, EH, 1, &k);
	check(&s, &t);
	want_field(&t, &i, "custom-key", "x");
	want_field(&t, &i, "custom-key", "x");
	want_req(&t, &i, 1);
	want_end(&t, i, 0);
	REQUIRE(t.snap[0].count == 127 && t.snap[0].size == 126 * 32 + 43);

	/* With a larger table the model's 128 entries are the limit. */
	start(&s);
	b_size(&k, 8192);
	for (j = 0; j < 129; j++)
		b_lit(&k, 1, 0, "", "");
	headers(&s, EH, 1, &k);
	check(&s, &t);
	want_end(&t, 0, H2_SCAN_WHY_TABLE);
}
END_TEST

/* Runs of one-byte indexed fields are consumed by a mask of the indexes
 * that end them (indexed_run(): e_named for the dynamic entries, shifted
 * by each insert, cut at e_count): a configured name is reported at every
 * index its entry moves to, across the mask's two words (indexes 63 and
 * 64) and at 126 (past the 64 entries e_named covers), in no block not to
 * report, and an index past the table gives up though its bit was set
 * before an eviction or an emptied table. */
START_TEST(indexed_run_mask)
{
	static struct stream s;
	static struct trace t;
	static struct blk k;
	static char big[4097];
	unsigned j, i = 0;

	start(&s);
	b_lit(&k, 1, 0, "custom-key", "a"); /* 64 below */
	b_lit(&k, 1, 0, "x-other", "b");    /* 63 */
	b_lit(&k, 1, 0, "custom-key", "c"); /* 62 */
	headers(&s, EH, 1, &k);
	b_raw(&k, "bf c0 be bf 86 c0"); /* 63 64 62 63, :scheme http, 64 */
	headers(&s, EH, 3, &k);
	b_raw(&k, "be bf c0"); /* trailers of stream 3: nothing reported */
	headers(&s, EH | ES, 3, &k);
	/* A literal with incremental indexing of a configured name in the
	 * middle of runs moves them all by one. */
	b_raw(&k, "be");
	b_lit(&k, 1, 0, "x-new", "n");
	b_raw(&k, "bf c0 c1");
	headers(&s, EH, 5, &k);
	check(&s, &t);
	want_field(&t, &i, "custom-key", "a");
	want_field(&t, &i, "custom-key", "c");
	want_req(&t, &i, 1);
	want_field(&t, &i, "custom-key", "a");
	want_field(&t, &i, "custom-key", "c");
	want_field(&t, &i, ":scheme", "http");
	want_field(&t, &i, "custom-key", "a");
	want_req(&t, &i, 3);
	want_field(&t, &i, "custom-key", "c");
	want_field(&t, &i, "custom-key", "c");
	want_field(&t, &i, "custom-key", "a");
	want_req(&t, &i, 5);
	want_end(&t, i, 0);
	REQUIRE(t.snap[2].count == 4);

	/* Index 126: the 65th entry, configured or not. */
	start(&s);
	b_lit(&k, 1, 0, "custom-key", "old");
	for (j = 0; j < 64; j++)
		b_lit(&k, 1, 0, "", "");
	b_raw(&k, "fe fd be"); /* 126 125 62 */
	headers(&s, EH, 1, &k);
	b_lit(&k, 1, 0, "", "");
	b_raw(&k, "fe"); /* now an unnamed entry */
	headers(&s, EH, 3, &k);
	check(&s, &t);
	i = 0;
	want_field(&t, &i, "custom-key", "old");
	want_field(&t, &i, "custom-key", "old");
	want_req(&t, &i, 1);
	want_req(&t, &i, 3);
	want_end(&t, i, 0);

	/* Evicted: the table of 3 entries of 43 bytes down to 2 (size 90),
	 * then index 64 gives up. */
	start(&s);
	for (j = 0; j < 3; j++)
		b_lit(&k, 1, 0, "custom-key", "x");
	headers(&s, EH, 1, &k);
	b_size(&k, 90);
	b_raw(&k, "be bf");
	headers(&s, EH, 3, &k);
	b_raw(&k, "be c0");
	headers(&s, EH, 5, &k);
	check(&s, &t);
	i = 0;
	for (j = 0; j < 3; j++)
		want_field(&t, &i, "custom-key", "x");
	want_req(&t, &i, 1);
	want_field(&t, &i, "custom-key", "x");
	want_field(&t, &i, "custom-key", "x");
	want_req(&t, &i, 3);
	want_field(&t, &i, "custom-key", "x");
	want_end(&t, i, H2_SCAN_WHY_HPACK);

	/* Emptied by an entry larger than the table: no index is valid, a
	 * new entry is at 62, unnamed. */
	start(&s);
	b_lit(&k, 1, 0, "custom-key", "x");
	headers(&s, EH, 1, &k);
	memset(big, 'v', sizeof(big));
	b_litn(&k, 1, 0, "x-big", big, sizeof(big));
	b_lit(&k, 1, 0, "", "");
	b_raw(&k, "be 86");
	headers(&s, EH, 3, &k);
	b_raw(&k, "86 bf");
	headers(&s, EH, 5, &k);
	check(&s, &t);
	i = 0;
	want_field(&t, &i, "custom-key", "x");
	want_req(&t, &i, 1);
	want_field(&t, &i, ":scheme", "http");
	want_req(&t, &i, 3);
	want_field(&t, &i, ":scheme", "http");
	want_end(&t, i, H2_SCAN_WHY_HPACK);
}
END_TEST

START_TEST(config_and_stop)
{
	struct h2_scan_config c;
	char n33[34];
	unsigned j;
	size_t used;

	memset(&c, 0, sizeof(c));
	memset(n33, 'a', 33);
	n33[33] = '\0';
	REQUIRE(h2_scan_config_add(&c, NULL) == -EINVAL);
	REQUIRE(h2_scan_config_add(&c, "") == -EINVAL);
	REQUIRE(h2_scan_config_add(&c, n33) == -EINVAL);
	REQUIRE(h2_scan_config_add(&c, n33 + 1) == 0);
	REQUIRE(h2_scan_config_add(&c, "User-Agent") == -EINVAL);
	REQUIRE(h2_scan_config_add(&c, "a b") == -EINVAL);
	REQUIRE(h2_scan_config_add(&c, "a:b") == -EINVAL);
	REQUIRE(h2_scan_config_add(&c, "x\x7f") == -EINVAL);
	REQUIRE(h2_scan_config_add(&c, "user-agent") == 1);
	REQUIRE(h2_scan_config_add(&c, "user-agent") == -EEXIST);
	REQUIRE(c.static_k[58] == 2 && c.static_k[57] == 0);
	for (j = 2; j < H2_SCAN_KEEP_MAX; j++) {
		char nm[8];

		snprintf(nm, sizeof(nm), "n%u", j);
		REQUIRE(h2_scan_config_add(&c, nm) == (int)j);
	}
	REQUIRE(h2_scan_config_add(&c, "one-more") == -ENOSPC);

	h2_scan_reset(&st, 0);
	REQUIRE(h2_scan_feed(&st, &cfg, "PRI * HTTP", 10, &used) == H2_SCAN_MORE &&
		used == 10);
	h2_scan_stop(&st);
	REQUIRE(h2_scan_gave_up(&st) && st.why == H2_SCAN_WHY_CALLER);
	REQUIRE(h2_scan_feed(&st, &cfg, "garbage", 7, &used) == H2_SCAN_MORE &&
		used == 7);
	REQUIRE(h2_scan_feed(&st, &cfg, NULL, 0, &used) == H2_SCAN_MORE && used == 0);
	h2_scan_stop(&st);
	REQUIRE(st.why == H2_SCAN_WHY_CALLER);
}
END_TEST

#ifdef HAVE_NGHTTP2
/* ---- the Huffman pair table (proc-context/h2-huff.h) ------------------- */

/* RFC 7541 Appendix B: the code length of each symbol (its "len"
 * column), 0..255 and EOS.  The code is canonical: codes of one length
 * are consecutive in symbol order, each length's first follows the
 * previous length's last; huff_rfc_codes() derives them, and a sample
 * of the RFC's own codes checks that. */
/* clang-format off */
static const uint8_t huff_rfc_len[257] = {
	13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
	28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
	6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
	5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
	13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
	7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
	15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,
	6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
	20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
	24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
	22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
	21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
	26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
	19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
	20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
	26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
	30,
};
/* clang-format on */

static void
huff_rfc_codes(uint32_t code[257])
{
	uint32_t c = 0;
	unsigned l, sym, prev = 5;

	for (l = 5; l <= 30; l++)
		for (sym = 0; sym < 257; sym++) {
			if (huff_rfc_len[sym] != l)
				continue;
			c <<= l - prev;
			prev = l;
			code[sym] = c++;
		}
}

/* The first code at the top of the nb-bit value v: its symbol and length,
 * or -1 if none of at most nb bits is there (or it is EOS). */
static int
huff_rfc_first(const uint32_t code[257], uint32_t v, unsigned nb, unsigned *len)
{
	unsigned sym;

	for (sym = 0; sym < 256; sym++) {
		unsigned l = huff_rfc_len[sym];

		if (l <= nb && v >> (nb - l) == code[sym]) {
			*len = l;
			return (int)sym;
		}
	}
	return -1;
}

/* h2_huff_pair[] entry by entry from the RFC's lengths: the first code of
 * the 12 bits and, if it ends within them, the next; with H2_HUFF_REGEN
 * set, the table derived is written to that file (to paste into
 * h2-huff.h). */
START_TEST(huffman_pair_table)
{
	static struct h2_huff_pair want[1u << H2_HUFF_PAIR_BITS];
	const unsigned nb = H2_HUFF_PAIR_BITS;
	uint32_t code[257];
	const char *regen = getenv("H2_HUFF_REGEN");
	unsigned v, bad = 0, pairs = 0;

	huff_rfc_codes(code);
	/* a sample of the RFC's table: ' ', '!', '0', 'A', 'a', 'z', '{',
	 * '~', 0, 1, 10, 13, 22, 255 and EOS */
	REQUIRE(code[' '] == 0x14 && code['!'] == 0x3f8 && code['0'] == 0x0);
	REQUIRE(code['A'] == 0x21 && code['a'] == 0x3 && code['z'] == 0x7b);
	REQUIRE(code['{'] == 0x7ffe && code['~'] == 0x1ffd);
	REQUIRE(code[0] == 0x1ff8 && code[1] == 0x7fffd8);
	REQUIRE(code[10] == 0x3ffffffc && code[13] == 0x3ffffffd);
	REQUIRE(code[22] == 0x3ffffffe && code[255] == 0x3ffffee);
	REQUIRE(code[256] == 0x3fffffff && huff_rfc_len[256] == 30);
	for (v = 0; v < (1u << nb); v++) {
		unsigned l1, l2;
		int s1 = huff_rfc_first(code, v, nb, &l1), s2;
		struct h2_huff_pair e = {{0, 0}, H2_HUFF_LONG, 0};
		const struct h2_huff_pair *have = &h2_huff_pair[v];

		if (s1 >= 0) {
			s2 = huff_rfc_first(code, v & ((1u << (nb - l1)) - 1), nb - l1,
					    &l2);
			e.sym[0] = (uint8_t)s1;
			e.bits = (uint8_t)l1;
			e.n = 1;
			if (s2 >= 0) {
				e.sym[1] = (uint8_t)s2;
				e.bits = (uint8_t)(l1 + l2);
				e.n = 2;
			}
		}
		want[v] = e;
		pairs += e.n == 2;
		if ((have->sym[0] != e.sym[0] || have->sym[1] != e.sym[1] ||
		     have->bits != e.bits || have->n != e.n) &&
		    bad++ < 10)
			fprintf(stderr,
				"h2_huff_pair[0x%03x] = {{%u, %u}, %u, %u}, "
				"want {{%u, %u}, %u, %u}\n",
				v, have->sym[0], have->sym[1], have->bits, have->n,
				e.sym[0], e.sym[1], e.bits, e.n);
	}
	if (regen) {
		FILE *f = fopen(regen, "w");

		REQUIRE(f);
		for (v = 0; v < (1u << nb); v++)
			fprintf(f, "%s{{%u, %u}, %u, %u},%s", v % 4 ? " " : "\t",
				want[v].sym[0], want[v].sym[1], want[v].bits, want[v].n,
				v % 4 == 3 || v + 1 == (1u << nb) ? "\n" : "");
		REQUIRE(fclose(f) == 0);
	}
	REQUIRE(bad == 0);
	/* 4 prefixes of codes longer than 12 bits; two codes in most */
	REQUIRE(pairs == 2756);
	REQUIRE(h2_huff_pair[0xffc].bits == H2_HUFF_LONG &&
		h2_huff_pair[0xfff].bits == H2_HUFF_LONG);
	REQUIRE(h2_huff_pair[0xffb].bits == 12 && h2_huff_pair[0xffb].sym[0] == '>');
}
END_TEST

/* ---- against libnghttp2's encoder -------------------------------------- */

#define NV_MAX   40
#define POOL_MAX 48

struct nvbuf {
	char name[48];
	uint8_t value[1600];
	size_t nlen, vlen;
};

static size_t
rand_value(unsigned *seed, uint8_t *v)
{
	static const char text[] = "abcdefghijklmnopqrstuvwxyz0123456789-_./;=, ABCXYZ";
	unsigned r = (unsigned)rand_r(seed) % 100;
	size_t n = r < 70   ? (size_t)rand_r(seed) % 60
		   : r < 95 ? (size_t)rand_r(seed) % 300
			    : 900 + (size_t)rand_r(seed) % 700;
	unsigned kind = (unsigned)rand_r(seed) % 10, i;

	for (i = 0; i < n; i++) {
		if (kind == 0) /* any byte: Huffman's long codes, or raw */
			v[i] = (uint8_t)rand_r(seed);
		else if (kind == 1 && rand_r(seed) % 8 == 0)
			v[i] = (uint8_t)(128 + rand_r(seed) % 128);
		else
			v[i] = (uint8_t)
				text[(unsigned)rand_r(seed) % (sizeof(text) - 1)];
	}
	return n;
}

static void
rand_name(unsigned *seed, struct nvbuf *b)
{
	static const char *const pool[] = {
		":method",     ":scheme",       ":path",
		":authority",  "cache-control", "custom-key",
		"traceparent", "date",          "user-agent",
		"accept",      "x-request-id",  "cookie",
		"x",           "traceparentx",  "accept-encoding",
	};
	unsigned r = (unsigned)rand_r(seed) % 20, i;

	if (r < 15) {
		b->nlen = strlen(pool[r]);
		memcpy(b->name, pool[r], b->nlen);
		return;
	}
	b->nlen = (size_t)rand_r(seed) % 40; /* an empty name too */
	for (i = 0; i < b->nlen; i++)
		b->name[i] = (char)('a' + rand_r(seed) % 26);
}

static int
name_k(const char *name, size_t n)
{
	unsigned k;

	for (k = 0; k < N_NAMES; k++)
		if (strlen(names[k]) == n && memcmp(names[k], name, n) == 0)
			return (int)k;
	return -1;
}

/* The model against the encoder's table: sizes, entries, kept values. */
static void
same_table(nghttp2_hd_deflater *def)
{
	size_t n = nghttp2_hd_deflate_get_num_table_entries(def) - 61, d;

	REQUIRE(st.t_size == nghttp2_hd_deflate_get_dynamic_table_size(def));
	REQUIRE(st.t_max == nghttp2_hd_deflate_get_max_dynamic_table_size(def));
	REQUIRE(st.e_count == n);
	for (d = 1; d <= n; d++) {
		const nghttp2_nv *nv = nghttp2_hd_deflate_get_table_entry(def, 61 + d);
		unsigned s = (st.e_head - d) & (H2_SCAN_ENTRIES - 1), i;
		int k = name_k((const char *)nv->name, nv->namelen);

		REQUIRE(st.e_nlen[s] == nv->namelen && st.e_vlen[s] == nv->valuelen);
		REQUIRE((st.e_k[s] & 0x0f) == (k < 0 ? E_K_NONE : (unsigned)k));
		if (!(st.e_k[s] & E_KEPT))
			continue;
		for (i = 0; i < nv->valuelen && i < H2_SCAN_VALUE_MAX; i++)
			REQUIRE(st.arena[(st.e_off[s] + i) % H2_SCAN_ARENA] ==
				nv->value[i]);
	}
}

START_TEST(nghttp2_encoder)
{
	static struct nvbuf nvb[NV_MAX], pool[POOL_MAX];
	static struct stream s;
	static struct trace t;
	static uint8_t blk[1 << 16];
	static size_t cuts[1 << 16];
	static const size_t caps[] = {4096, 256, 1024, 16384, 65536};
	static const size_t sizes[] = {0, 100, 512, 4096, 8192, 65536};
	unsigned seed = 1, conn, fields = 0, unknown = 0, cut = 0, reqs = 0,
		 table_full = 0;

	for (conn = 0; conn < 150; conn++) {
		nghttp2_hd_deflater *def;
		unsigned npool = 0, req;
		uint32_t id = 1;

		REQUIRE(nghttp2_hd_deflate_new(&def, caps[conn % 5]) == 0);
		h2_scan_reset(&st, 0);
		s.n = 0;
		start(&s);
		for (req = 0; req < 30 && !h2_scan_gave_up(&st); req++) {
			static nghttp2_nv nva[NV_MAX];
			unsigned n = 1 + (unsigned)rand_r(&seed) % (NV_MAX - 1), i,
				 e = 0;
			bool trailer = req && rand_r(&seed) % 8 == 0;
			uint32_t sid = trailer ? id - 2 : id;
			ssize_t bl;
			size_t off, nc = 0, a = 0;
			int r;

			if (rand_r(&seed) % 6 == 0)
				REQUIRE(nghttp2_hd_deflate_change_table_size(
						def,
						sizes[(unsigned)rand_r(&seed) % 6]) ==
					0);
			for (i = 0; i < n; i++) {
				if (npool && rand_r(&seed) % 2) {
					nvb[i] = pool[(unsigned)rand_r(&seed) % npool];
				} else {
					rand_name(&seed, &nvb[i]);
					nvb[i].vlen = rand_value(&seed, nvb[i].value);
					if (npool < POOL_MAX)
						pool[npool++] = nvb[i];
					else
						pool[(unsigned)rand_r(&seed) %
						     POOL_MAX] = nvb[i];
				}
				nva[i].name = (uint8_t *)nvb[i].name;
				nva[i].namelen = nvb[i].nlen;
				nva[i].value = nvb[i].value;
				nva[i].valuelen = nvb[i].vlen;
				nva[i].flags = rand_r(&seed) % 10 == 0
						       ? NGHTTP2_NV_FLAG_NO_INDEX
						       : NGHTTP2_NV_FLAG_NONE;
			}
			REQUIRE(nghttp2_hd_deflate_bound(def, nva, n) <= sizeof(blk));
			bl = nghttp2_hd_deflate_hd(def, blk, sizeof(blk), nva, n);
			REQUIRE(bl >= 0);
			/* HEADERS (padded, priority at random), CONTINUATIONs;
			 * after the preface for the first */
			if (req)
				s.n = 0;
			off = 0;
			{
				size_t done = 0;
				bool first = true;

				do {
					size_t fl =
						1 + (size_t)rand_r(&seed) %
							    (rand_r(&seed) % 2 ? 16
									       : 20000);
					uint8_t flags = 0, f[16400];
					size_t pn = 0, pad = 0;

					if (fl > (size_t)bl - done)
						fl = (size_t)bl - done;
					if (done + fl == (size_t)bl)
						flags |= EH;
					if (first && rand_r(&seed) % 3 == 0) {
						flags |= 0x08;
						pad = (size_t)rand_r(&seed) % 20;
						f[pn++] = (uint8_t)pad;
					}
					if (first && rand_r(&seed) % 3 == 0) {
						flags |= 0x20;
						memcpy(f + pn, "\0\0\0\0\x10", 5);
						pn += 5;
					}
					if (fl > 16000)
						fl = 16000, flags &= (uint8_t)~EH;
					memcpy(f + pn, blk + done, fl);
					pn += fl;
					memset(f + pn, 0, pad);
					pn += pad;
					frame(&s, first ? 1 : 9, flags, sid, f, pn);
					done += fl;
					first = false;
				} while (done < (size_t)bl);
			}
			if (rand_r(&seed) % 3 == 0)
				frame(&s, 0, 0, sid, blk, (size_t)rand_r(&seed) % 3000);
			if (rand_r(&seed) % 5 == 0)
				frame(&s, 6, 0, 0, "pingping", 8);
			/* fed in random pieces */
			for (;;) {
				a += 1 + (size_t)rand_r(&seed) %
						 (rand_r(&seed) % 2 ? 7 : 3000);
				if (off + a >= s.n)
					break;
				cuts[nc++] = off + a;
			}
			t.n = t.nsnap = 0;
			a = off;
			for (i = 0; i <= nc; i++) {
				size_t b = i < nc ? cuts[i] : s.n;

				do {
					size_t used;

					r = h2_scan_feed(&st, &cfg, s.b + a, b - a,
							 &used);
					a += used;
					if (r != H2_SCAN_MORE)
						record(&t, r, a);
				} while (r != H2_SCAN_MORE);
			}
			if (st.why == H2_SCAN_WHY_TABLE) {
				/* Only a table larger than 4096 bytes can have
				 * more than 128 entries (of 32 bytes at least);
				 * they may be evicted again later in the block. */
				REQUIRE(nghttp2_hd_deflate_get_max_dynamic_table_size(
						def) > 32 * H2_SCAN_ENTRIES);
				table_full++;
				break;
			}
			if (st.why)
				ck_abort_msg("conn %u req %u why %u", conn, req,
					     st.why);
			same_table(def);
			if (trailer) {
				REQUIRE(t.n == 0);
				continue;
			}
			for (i = 0; i < n; i++) {
				int k = name_k(nvb[i].name, nvb[i].nlen);
				const struct ev *ev;

				if (k < 0)
					continue;
				REQUIRE(e < t.n);
				ev = &t.ev[e++];
				REQUIRE(ev->st == H2_SCAN_FIELD &&
					ev->k == (unsigned)k);
				REQUIRE(ev->stream == sid);
				fields++;
				if (ev->flags & H2_SCAN_F_UNKNOWN) {
					unknown++;
					continue;
				}
				if (nvb[i].vlen > H2_SCAN_VALUE_MAX) {
					REQUIRE(ev->flags == H2_SCAN_F_CUT);
					REQUIRE(ev->len == H2_SCAN_VALUE_MAX);
					cut++;
				} else {
					REQUIRE(ev->flags == 0 &&
						ev->len == nvb[i].vlen);
				}
				REQUIRE(memcmp(ev->v, nvb[i].value, ev->len) == 0);
			}
			REQUIRE(e + 1 == t.n && t.ev[e].st == H2_SCAN_REQUEST);
			REQUIRE(t.ev[e].stream == sid);
			reqs++;
			id += 2;
		}
		nghttp2_hd_deflate_del(def);
	}
	fprintf(stderr,
		"nghttp2_encoder: %u requests, %u fields: %u unknown (arena full), %u "
		"cut; "
		"%u connections over %u entries\n",
		reqs, fields, unknown, cut, table_full, H2_SCAN_ENTRIES);
	REQUIRE(reqs > 2000 && fields > 10000 && cut > 10);
	/* Values are rarely not kept: the arena holds the usual ones. */
	REQUIRE(unknown * 20 < fields);
}
END_TEST
/* Every byte value through the Huffman decoder: a value mostly of short
 * codes, so that the encoder chooses Huffman coding, around each byte. */
/* A piece of bytes flush against an inaccessible page: after it (at_end)
 * or before it, so that a read past either end of what a feed is given
 * faults, even within the piece's page. */
struct edge {
	uint8_t *page;
	void *map;
};

static void
edge_init(struct edge *e)
{
	uint8_t *m = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	REQUIRE(m != MAP_FAILED);
	REQUIRE(mprotect(m, 4096, PROT_NONE) == 0);
	REQUIRE(mprotect(m + 2 * 4096, 4096, PROT_NONE) == 0);
	e->map = m;
	e->page = m + 4096;
}

static const uint8_t *
edge_put(struct edge *e, bool at_end, const uint8_t *p, size_t n)
{
	uint8_t *d = at_end ? e->page + 4096 - n : e->page;

	REQUIRE(n <= 4096);
	memcpy(d, p, n);
	return d;
}

/* What the scanner made of one block: gave up, or the value of the
 * field (custom-key) and its flags. */
struct hres {
	bool gave_up;
	unsigned fields, reqs, flags;
	size_t len;
	uint8_t v[H2_SCAN_VALUE_MAX];
};

/* The block of one HEADERS frame (stream 1, END_HEADERS) fed after the
 * preface and the frame header in two pieces split at cut (0: whole),
 * each flush against an inaccessible page (after it or before it). */
static void
hres_scan(const uint8_t *blk, size_t n, size_t cut, bool at_end, struct hres *r)
{
	static struct edge e[2];
	uint8_t h[9] = {
		(uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n, 1, EH, 0, 0, 0, 1};
	size_t piece[3][2] = {{0, 0}, {0, cut ? cut : n}, {cut ? cut : n, n}}, i;

	if (!e[0].page) {
		edge_init(&e[0]);
		edge_init(&e[1]);
	}
	memset(r, 0, sizeof(*r));
	h2_scan_reset(&st, H2_SCAN_PREFACE_LEN);
	for (i = 0; i < 3 && !r->gave_up; i++) {
		size_t a = piece[i][0], b = piece[i][1], off = 0, used;
		const uint8_t *p;
		enum h2_scan_status x;

		if (i == 0)
			p = h, b = 9;
		else
			p = edge_put(&e[i - 1], at_end, blk + a, b - a);
		do {
			x = h2_scan_feed(&st, &cfg, p + off, b - a - off, &used);
			REQUIRE(used <= b - a - off);
			off += used;
			if (x == H2_SCAN_GAVE_UP) {
				r->gave_up = true;
			} else if (x == H2_SCAN_REQUEST) {
				r->reqs++;
			} else if (x == H2_SCAN_FIELD) {
				struct h2_scan_field f;

				h2_scan_field(&st, &f);
				r->fields++;
				r->flags = f.flags;
				r->len = f.len;
				memcpy(r->v, f.value, f.len);
			}
		} while (x != H2_SCAN_MORE && x != H2_SCAN_GAVE_UP);
	}
}

/* nghttp2's inflater on the same block: an error, or custom-key's value
 * (its first H2_SCAN_VALUE_MAX bytes, H2_SCAN_F_CUT past them). */
static void
hres_ref(const uint8_t *blk, size_t n, struct hres *r)
{
	nghttp2_hd_inflater *inf;
	size_t off = 0;

	memset(r, 0, sizeof(*r));
	REQUIRE(nghttp2_hd_inflate_new(&inf) == 0);
	for (;;) {
		nghttp2_nv nv;
		int fl = 0;
		ssize_t k =
			nghttp2_hd_inflate_hd2(inf, &nv, &fl, blk + off, n - off, 1);

		if (k < 0) {
			r->gave_up = true;
			break;
		}
		off += (size_t)k;
		if ((fl & NGHTTP2_HD_INFLATE_EMIT) && nv.namelen == 10 &&
		    memcmp(nv.name, "custom-key", 10) == 0) {
			r->fields++;
			r->len = nv.valuelen < H2_SCAN_VALUE_MAX ? nv.valuelen
								 : H2_SCAN_VALUE_MAX;
			r->flags = nv.valuelen > H2_SCAN_VALUE_MAX ? H2_SCAN_F_CUT : 0;
			memcpy(r->v, nv.value, r->len);
		}
		if (fl & NGHTTP2_HD_INFLATE_FINAL) {
			r->reqs = 1;
			break;
		}
		REQUIRE(k > 0 || (fl & NGHTTP2_HD_INFLATE_EMIT));
	}
	nghttp2_hd_inflate_del(inf);
}

/* bits of a Huffman string under construction */
struct hbits {
	uint8_t b[1200];
	size_t n;
};

static void
hbits_put(struct hbits *w, uint32_t v, unsigned n)
{
	while (n--) {
		if (v >> n & 1)
			w->b[w->n >> 3] |= (uint8_t)(0x80u >> (w->n & 7));
		w->n++;
	}
}

/* One Huffman string h[0..hn) as a name literal (then a raw value), as
 * custom-key's value (stored, cut past H2_SCAN_VALUE_MAX), or as the
 * value of a name not configured (only counted): the scanner and
 * nghttp2's inflater must agree on it (taken or refused, and its bytes),
 * fed whole and split at every point (strings up to 48 bytes; else at 8
 * points) with both pieces flush against inaccessible pages. */
static void
huff_vs_inflate(const uint8_t *h, size_t hn, unsigned as)
{
	static const char *const nm[] = {"custom-key", "x-other"};
	static struct blk k;
	static struct hres a, b;
	size_t cut;
	bool at_end;

	k.n = 0;
	k.b[k.n++] = 0x00;
	if (as > 0) {
		b_int(&k, 0, 7, (uint32_t)strlen(nm[as - 1]));
		memcpy(k.b + k.n, nm[as - 1], strlen(nm[as - 1]));
		k.n += strlen(nm[as - 1]);
	}
	b_int(&k, 0x80, 7, (uint32_t)hn);
	memcpy(k.b + k.n, h, hn);
	k.n += hn;
	if (as == 0)
		b_raw(&k, "01 76");
	hres_ref(k.b, k.n, &b);
	for (cut = 0; cut < k.n; cut += hn <= 48 ? 1 : 1 + k.n / 8)
		for (at_end = false;; at_end = true) {
			hres_scan(k.b, k.n, cut, at_end, &a);
			if (a.gave_up != b.gave_up ||
			    (!b.gave_up &&
			     (a.reqs != 1 || a.fields != b.fields || a.len != b.len ||
			      a.flags != b.flags || memcmp(a.v, b.v, a.len) != 0))) {
				size_t i;

				for (i = 0; i < hn; i++)
					fprintf(stderr, "%02x", h[i]);
				ck_abort_msg("as %u, cut %zu: scanner %s, nghttp2 %s",
					     as, cut, a.gave_up ? "refused" : "took",
					     b.gave_up ? "refused" : "took");
			}
			if (at_end)
				break;
		}
}

START_TEST(huffman_nghttp2_inflate)
{
	static uint8_t h[1200];
	static struct hbits w;
	uint32_t code[257];
	unsigned seed = 172, i, as, v;

	huff_rfc_codes(code);
	/* every string of one and two bytes */
	for (v = 0; v < 256 + 65536; v++)
		for (as = 0; as < 3; as++) {
			if (v < 256) {
				h[0] = (uint8_t)v;
				huff_vs_inflate(h, 1, as);
			} else {
				h[0] = (uint8_t)((v - 256) >> 8);
				h[1] = (uint8_t)(v - 256);
				huff_vs_inflate(h, 2, as);
			}
		}
	/* codes of every length, then padding right or wrong: zeros, a
	 * zero bit, a byte of ones more, EOS (alone or padded), a bit
	 * flipped anywhere; long strings (past the value's room) now and
	 * then */
	for (i = 0; i < 6000; i++) {
		unsigned max = i % 10 == 0 ? 1100 : 40, kind = i % 7, sym;
		size_t nsym = (size_t)rand_r(&seed) % (max * 8 / 5 + 1), k;

		memset(&w, 0, sizeof(w));
		for (k = 0; k < nsym && w.n + 30 < max * 8; k++) {
			sym = (unsigned)rand_r(&seed) % 256;
			if (rand_r(&seed) % 4)
				sym = "0123456789abcdef-/.=&%_ABCXYZ<>{}~^"
					[rand_r(&seed) % 36];
			hbits_put(&w, code[sym], huff_rfc_len[sym]);
		}
		if (kind == 0)
			hbits_put(&w, code[256], 30);
		if (kind == 1)
			w.n = (w.n + 7) & ~(size_t)7; /* zeros */
		if (kind == 2 && (w.n & 7))
			hbits_put(&w, 0xfe, 8 - (unsigned)(w.n & 7));
		while (w.n & 7)
			hbits_put(&w, 1, 1);
		if (kind == 3)
			hbits_put(&w, 0xff, 8);
		if (kind == 4 && w.n)
			w.b[(size_t)rand_r(&seed) % (w.n / 8)] ^=
				(uint8_t)(1u << rand_r(&seed) % 8);
		if (kind == 5)
			for (k = 0; k < 1 + (size_t)rand_r(&seed) % 40; k++)
				w.b[w.n / 8 + k] = (uint8_t)rand_r(&seed), w.n += 8;
		if (w.n == 0)
			continue;
		memcpy(h, w.b, w.n / 8);
		huff_vs_inflate(h, w.n / 8, (unsigned)rand_r(&seed) % 3);
	}
}
END_TEST

START_TEST(nghttp2_every_byte)
{
	static struct stream s;
	static struct trace t;
	static uint8_t blk[4096];
	nghttp2_hd_deflater *def;
	uint8_t v[64];
	unsigned b, i = 0;

	REQUIRE(nghttp2_hd_deflate_new(&def, 4096) == 0);
	start(&s);
	for (b = 0; b < 256; b++) {
		nghttp2_nv nv = {(uint8_t *)":path", v, 5, 41,
				 NGHTTP2_NV_FLAG_NO_INDEX};
		ssize_t n;

		memset(v, 'e', 41);
		v[20] = (uint8_t)b;
		n = nghttp2_hd_deflate_hd(def, blk, sizeof(blk), &nv, 1);
		/* never indexed, name 4, a Huffman coded value */
		REQUIRE(n > 2 && n < 41 && blk[0] == 0x14 && (blk[1] & 0x80));
		frame(&s, 1, EH, 1 + 2 * b, blk, (size_t)n);
	}
	nghttp2_hd_deflate_del(def);
	check(&s, &t);
	REQUIRE(t.n == 512 && t.why == 0);
	for (b = 0; b < 256; b++) {
		memset(v, 'e', 41);
		v[20] = (uint8_t)b;
		REQUIRE(t.ev[i].st == H2_SCAN_FIELD && t.ev[i].len == 41);
		REQUIRE(memcmp(t.ev[i].v, v, 41) == 0);
		i++;
		want_req(&t, &i, 1 + 2 * b);
	}
}
END_TEST
#endif

/* ---- the server's frames (h2_out_*) --------------------------------------- */

/* A frame header of the server's: len, type, flags, stream (its reserved
 * bit set when r). */
static size_t
out_frame(uint8_t *b, size_t len, uint8_t type, uint32_t sid, bool r, uint8_t fill)
{
	b[0] = (uint8_t)(len >> 16);
	b[1] = (uint8_t)(len >> 8);
	b[2] = (uint8_t)len;
	b[3] = type;
	b[4] = 0x04;
	b[5] = (uint8_t)((sid >> 24) | (r ? 0x80 : 0));
	b[6] = (uint8_t)(sid >> 16);
	b[7] = (uint8_t)(sid >> 8);
	b[8] = (uint8_t)sid;
	/* A payload that looks like frame headers of the stream looked for:
	 * only the lengths may tell where frames begin. */
	memset(b + 9, fill, len);
	return 9 + len;
}

/* nginx's usual output on a connection: its SETTINGS, WINDOW_UPDATE and
 * SETTINGS ACK, a WINDOW_UPDATE of stream 3 (a request body), then
 * stream 1's response (HEADERS, a DATA frame over 256 bytes), an
 * RST_STREAM of stream 5 and stream 3's HEADERS (the reserved bit set).
 * *end_k: the offset just past the header of the first frame that answers
 * stream k (1, 3, 5; 0: any). */
static size_t
out_stream(uint8_t *b, size_t end_k[6])
{
	size_t n = 0;

	n += out_frame(b + n, 18, 0x4, 0, false, 0x01);
	n += out_frame(b + n, 4, 0x8, 0, false, 0x03);
	n += out_frame(b + n, 0, 0x4, 0, false, 0);
	n += out_frame(b + n, 4, 0x8, 3, false, 0x01);
	end_k[1] = end_k[0] = n + 9;
	n += out_frame(b + n, 40, 0x1, 1, false, 0x03);
	n += out_frame(b + n, 300, 0x0, 1, false, 0x01);
	end_k[5] = n + 9;
	n += out_frame(b + n, 4, 0x3, 5, false, 0x00);
	end_k[3] = n + 9;
	n += out_frame(b + n, 12, 0x1, 3, true, 0x01);
	return n;
}

/* Fed whole, in two pieces split at every point, and a byte at a time:
 * the first feed that reports stream k is the one holding the last byte
 * of its answering frame's header, never one before. */
START_TEST(out_frames)
{
	static uint8_t b[1024];
	size_t end_k[6], n = out_stream(b, end_k), cut, i;
	static const uint32_t ks[] = {0, 1, 3, 5};
	unsigned j;

	for (j = 0; j < 4; j++) {
		size_t e = end_k[ks[j]];
		struct h2_out o;

		h2_out_reset(&o);
		REQUIRE(h2_out_feed(&o, b, n, ks[j]) == 1);
		REQUIRE(o.pos == 0 && o.left == 0);
		h2_out_reset(&o);
		REQUIRE(h2_out_feed(&o, b, e - 1, ks[j]) == 0);
		REQUIRE(h2_out_feed(&o, b + e - 1, n - (e - 1), ks[j]) == 1);
		for (cut = 0; cut <= n; cut++) {
			int a, z;

			h2_out_reset(&o);
			a = h2_out_feed(&o, b, cut, ks[j]);
			z = h2_out_feed(&o, b + cut, n - cut, ks[j]);
			REQUIRE(a == (cut >= e));
			REQUIRE(z == (cut < e) || (ks[j] == 0 && cut < end_k[3]));
			REQUIRE(o.pos == 0 && o.left == 0);
		}
		h2_out_reset(&o);
		for (i = 0; i < n; i++) {
			int r = h2_out_feed(&o, b + i, 1, ks[j]);

			if (ks[j] != 0 || i + 1 == e)
				REQUIRE(r == (i + 1 == e));
		}
	}
	/* Stream 7 is answered nowhere. */
	{
		struct h2_out o;

		h2_out_reset(&o);
		REQUIRE(h2_out_feed(&o, b, n, 7) == 0);
	}
}
END_TEST

/* Bytes of unknown content (sendfile): counted through a payload, lost
 * for good once they cross a frame header. */
START_TEST(out_skip)
{
	static uint8_t b[1024];
	size_t end_k[6], n = out_stream(b, end_k);
	size_t data = end_k[1] + 40 + 9; /* stream 1's DATA payload */
	struct h2_out o;

	h2_out_reset(&o);
	REQUIRE(h2_out_feed(&o, b, data, 3) == 0);
	REQUIRE(h2_out_skip(&o, 0) == 0);
	REQUIRE(h2_out_skip(&o, 100) == 0);
	REQUIRE(h2_out_skip(&o, 200) == 0);
	REQUIRE(h2_out_feed(&o, b + data + 300, n - data - 300, 3) == 1);

	/* Past the payload: lost, and so every feed after it. */
	h2_out_reset(&o);
	REQUIRE(h2_out_feed(&o, b, data, 3) == 0);
	REQUIRE(h2_out_skip(&o, 301) == -1);
	REQUIRE(h2_out_feed(&o, b, n, 3) == -1);
	REQUIRE(h2_out_skip(&o, 1) == -1);

	/* Inside a frame header: lost. */
	h2_out_reset(&o);
	REQUIRE(h2_out_feed(&o, b, 4, 3) == 0);
	REQUIRE(h2_out_skip(&o, 1) == -1);
	/* At a frame's start (no payload left): lost. */
	h2_out_reset(&o);
	REQUIRE(h2_out_skip(&o, 1) == -1);
}
END_TEST

/* An empty write (an empty iovec of writev(), whose base may be NULL)
 * moves nothing and answers nothing; a lost walk answers it, as it
 * answers every write (preload/conn.c walks every iovec). */
START_TEST(out_empty)
{
	static uint8_t b[1024];
	size_t end_k[6], n = out_stream(b, end_k);
	struct h2_out o, before;

	h2_out_reset(&o);
	REQUIRE(h2_out_feed(&o, b, 4, 1) == 0);
	before = o;
	REQUIRE(h2_out_feed(&o, NULL, 0, 1) == 0);
	REQUIRE(memcmp(&o, &before, sizeof(o)) == 0);
	REQUIRE(h2_out_feed(&o, b + 4, n - 4, 1) == 1);

	REQUIRE(h2_out_skip(&o, 1) == -1);
	REQUIRE(h2_out_feed(&o, NULL, 0, 1) == -1);
}
END_TEST

/* RFC 9113 §4.1 for a frame header of the server's, read whole
 * (h2_out_header(), the write hooks' inline walk in preload/conn.c and
 * h2_out_feed()'s usual case, at an odd address too) and byte by byte:
 * the reserved bit and the flags are ignored, stream 0 (the connection's)
 * answers no request, not even with the reserved bit set or when any
 * stream is looked for (0), only HEADERS and RST_STREAM answer, and the
 * length is all 24 bits. */
START_TEST(out_header_rules)
{
	static const struct {
		uint8_t type;
		uint32_t sid; /* as on the wire: bit 31 is the reserved bit */
		uint32_t stream;
		int hit;
	} t[] = {
		{0x1, 0, 0, 0},
		{0x3, 0, 0, 0},
		{0x1, 0x80000000u, 0, 0},
		{0x3, 0x80000000u, 0, 0},
		{0x1, 1, 0, 1},
		{0x1, 0x80000001u, 1, 1},
		{0x3, 0x80000005u, 0, 1},
		{0x3, 0x7fffffffu, 0x7fffffffu, 1},
		{0x1, 0xffffffffu, 0x7fffffffu, 1},
		{0x1, 3, 1, 0},
		{0x1, 0x80000003u, 1, 0},
		{0x0, 1, 1, 0},  /* DATA */
		{0x5, 1, 1, 0},  /* PUSH_PROMISE */
		{0x9, 1, 1, 0},  /* CONTINUATION */
		{0x4, 0, 0, 0},  /* SETTINGS */
		{0x81, 1, 1, 0}, /* unknown, HEADERS' low bits */
	};
	static const uint32_t lens[] = {0, 1, 0x4000, 0xfffefd, 0xffffff};
	uint8_t b[1 + 9];
	unsigned i, l, off, j;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		for (l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
			for (off = 0; off < 2; off++) {
				uint8_t *h = b + off;
				struct h2_out o;

				h[0] = (uint8_t)(lens[l] >> 16);
				h[1] = (uint8_t)(lens[l] >> 8);
				h[2] = (uint8_t)lens[l];
				h[3] = t[i].type;
				h[4] = 0xff;
				h[5] = (uint8_t)(t[i].sid >> 24);
				h[6] = (uint8_t)(t[i].sid >> 16);
				h[7] = (uint8_t)(t[i].sid >> 8);
				h[8] = (uint8_t)t[i].sid;

				h2_out_reset(&o);
				REQUIRE(h2_out_header(&o, h, t[i].stream) == t[i].hit);
				REQUIRE(o.left == lens[l]);

				h2_out_reset(&o);
				REQUIRE(h2_out_feed(&o, h, 9, t[i].stream) == t[i].hit);
				REQUIRE(o.left == lens[l] && o.pos == 0);

				h2_out_reset(&o);
				for (j = 0; j < 9; j++)
					REQUIRE(h2_out_feed(&o, h + j, 1,
							    t[i].stream) ==
						(j == 8 ? t[i].hit : 0));
				REQUIRE(o.left == lens[l] && o.pos == 0);
			}
		}
	}
}
END_TEST

/* Whatever the state holds, a feed ends, reads only its bytes, and a
 * header is always 9 bytes from a reset pos. */
START_TEST(out_hostile)
{
	static uint8_t b[512];
	unsigned seed = 164, t;

	for (t = 0; t < 2000; t++) {
		struct h2_out o;
		size_t i, n = (size_t)(rand_r(&seed) % sizeof(b));

		for (i = 0; i < n; i++)
			b[i] = (uint8_t)rand_r(&seed);
		o.left = (uint32_t)rand_r(&seed);
		o.len = (uint32_t)rand_r(&seed);
		o.sid = (uint32_t)rand_r(&seed);
		o.pos = (uint8_t)rand_r(&seed);
		o.type = (uint8_t)rand_r(&seed);
		o.lost = (uint8_t)(rand_r(&seed) % 4 == 0);
		o.pad_ = 0;
		(void)h2_out_feed(&o, b, n, (uint32_t)rand_r(&seed) & 7);
		(void)h2_out_skip(&o, (size_t)(rand_r(&seed) % 64));
	}
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
	tcase_add_test(tc, preface);
	tcase_add_test(tc, upgraded);
	tcase_add_test(tc, padded_priority);
	tcase_add_test(tc, continuation);
	tcase_add_test(tc, continuation_rules);
	tcase_add_test(tc, trailers_and_ids);
	tcase_add_test(tc, watch_reset);
	tcase_add_test(tc, other_frames);
	tcase_add_test(tc, repeats_and_kinds);
	tcase_add_test(tc, cut_and_unknown);
	tcase_add_test(tc, size_updates);
	tcase_add_test(tc, hpack_errors);
	tcase_add_test(tc, huffman_eos_long);
	tcase_add_test(tc, huffman_pair_table);
	tcase_add_test(tc, table_entries);
	tcase_add_test(tc, indexed_run_mask);
	tcase_add_test(tc, config_and_stop);
	tcase_add_test(tc, hostile_state);
	tcase_add_test(tc, hostile_state_long_string);
	tcase_add_test(tc, feed_cb_rearmed_state);
	tcase_add_test(tc, out_frames);
	tcase_add_test(tc, out_skip);
	tcase_add_test(tc, out_empty);
	tcase_add_test(tc, out_header_rules);
	tcase_add_test(tc, out_hostile);
#ifdef HAVE_NGHTTP2
	tcase_add_test(tc, nghttp2_encoder);
	tcase_add_test(tc, nghttp2_every_byte);
	tcase_add_test(tc, huffman_nghttp2_inflate);
#endif
	suite_add_tcase(s, tc);
	return s;
}
