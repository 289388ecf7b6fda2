/* SPDX-License-Identifier: Apache-2.0 */
/* proc-context/fcgi-scan.c: FastCGI records and FCGI_PARAMS pairs, fed
 * whole, split at every point (and at every pair of points for the short
 * streams), a byte at a time and in random chunks, from read-only memory:
 * the events (status, absolute offset, kept values) must be the same
 * every time. */
#include "test-common.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fcgi-scan.h"

#define REQUIRE(cond_)                                                         \
	do {                                                                   \
		if (!(cond_))                                                  \
			ck_abort_msg("%s:%d: %s", __FILE__, __LINE__, #cond_); \
	} while (0)

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

/* ---- building streams ---------------------------------------------------- */

struct stream {
	uint8_t b[1 << 17];
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

static void
rec_pad(struct stream *s,
	uint8_t type,
	uint16_t id,
	const void *c,
	size_t n,
	uint8_t pad)
{
	uint8_t h[8] = {1,
			type,
			(uint8_t)(id >> 8),
			(uint8_t)id,
			(uint8_t)(n >> 8),
			(uint8_t)n,
			pad,
			0};
	static const uint8_t zeros[256];

	REQUIRE(n <= 0xffff);
	put(s, h, 8);
	put(s, c, n);
	put(s, zeros, pad);
}

static void
rec(struct stream *s, uint8_t type, uint16_t id, const void *c, size_t n)
{
	rec_pad(s, type, id, c, n, (uint8_t)((8 - n % 8) % 8));
}

/* FCGI_BEGIN_REQUEST, FCGI_RESPONDER, FCGI_KEEP_CONN (the connection may
 * carry more requests). */
static void
begin(struct stream *s, uint16_t id)
{
	static const uint8_t body[8] = {0, 1, 1, 0, 0, 0, 0, 0};

	rec(s, FCGI_SCAN_BEGIN_REQUEST, id, body, 8);
}

/* The same without FCGI_KEEP_CONN: the connection's last request. */
static void
begin_last(struct stream *s, uint16_t id)
{
	static const uint8_t body[8] = {0, 1, 0, 0, 0, 0, 0, 0};

	rec(s, FCGI_SCAN_BEGIN_REQUEST, id, body, 8);
}

/* One name-value pair (§3.4), lengths in 4 bytes when long4 or >= 128. */
static size_t
nv(uint8_t *out, const char *name, size_t nl, const char *val, size_t vl, bool long4)
{
	size_t o = 0, l[2] = {nl, vl};
	int i;

	for (i = 0; i < 2; i++) {
		if (l[i] < 128 && !long4) {
			out[o++] = (uint8_t)l[i];
		} else {
			out[o++] = (uint8_t)(0x80 | (l[i] >> 24));
			out[o++] = (uint8_t)(l[i] >> 16);
			out[o++] = (uint8_t)(l[i] >> 8);
			out[o++] = (uint8_t)l[i];
		}
	}
	memcpy(out + o, name, nl);
	o += nl;
	memcpy(out + o, val, vl);
	return o + vl;
}

static size_t
nvs(uint8_t *out, const char *name, const char *val)
{
	return nv(out, name, strlen(name), val, strlen(val), false);
}

/* ---- the scanner under test ---------------------------------------------- */

static struct fcgi_scan_config cfg;
static const char *const kept[] = {
	"REQUEST_METHOD",
	"REQUEST_URI",
	"HTTP_TRACEPARENT",
	"HTTP_TRACESTATE",
	"SCRIPT_NAME",
	"QUERY_STRING",
	"HTTP_X_LONG_NAME_PADDED_TO_THIRTY_ONE",
};
static const size_t kept_max[] = {20, 256, 64, 512, 256, 256, 256};
#define N_KEPT (sizeof(kept) / sizeof(kept[0]))

static void
setup(void)
{
	unsigned k;

	memset(&cfg, 0, sizeof(cfg));
	for (k = 0; k < N_KEPT; k++)
		REQUIRE(fcgi_scan_config_add(&cfg, kept[k], kept_max[k]) == (int)k);
}

static void
teardown(void)
{
}

#define MAX_EV 8
struct ev {
	enum fcgi_scan_status st;
	size_t off;
	bool present[N_KEPT];
	char val[N_KEPT][600];
};
struct trace {
	struct ev ev[MAX_EV];
	unsigned n;
};

static void
trace_add(struct trace *t,
	  const struct fcgi_scan *st,
	  enum fcgi_scan_status r,
	  size_t off)
{
	struct ev *e;
	unsigned k;

	REQUIRE(t->n < MAX_EV);
	e = &t->ev[t->n++];
	memset(e, 0, sizeof(*e));
	e->st = r;
	e->off = off;
	if (r != FCGI_SCAN_PARAMS_END)
		return;
	for (k = 0; k < N_KEPT; k++) {
		size_t l = 0;
		const char *v = fcgi_scan_value(st, k, &l);

		if (!v)
			continue;
		REQUIRE(l < sizeof(e->val[k]) && strlen(v) == l);
		e->present[k] = true;
		memcpy(e->val[k], v, l);
		REQUIRE(fcgi_scan_get(st, &cfg, kept[k]) == v);
	}
}

/* Feed p[0, n) in the pieces cuts[] (ascending offsets) gives. */
static void
feed_cuts(const uint8_t *p, size_t n, const size_t *cuts, size_t ncuts, struct trace *t)
{
	struct fcgi_scan st;
	size_t at = 0, i;

	memset(&st, 0xa5, sizeof(st)); /* reset must not depend on zeroed memory */
	fcgi_scan_reset(&st);
	memset(t, 0, sizeof(*t));
	for (i = 0; i <= ncuts; i++) {
		size_t end = i < ncuts ? cuts[i] : n, off = at;

		while (off < end) {
			size_t used = 99999;
			enum fcgi_scan_status r =
				fcgi_scan_feed(&st, &cfg, p + off, end - off, &used);

			REQUIRE(used <= end - off);
			off += used;
			if (r != FCGI_SCAN_MORE)
				trace_add(t, &st, r, off);
			else
				REQUIRE(off == end);
		}
		at = end;
	}
}

static void
trace_same(const struct trace *a, const struct trace *b)
{
	unsigned i, k;

	REQUIRE(a->n == b->n);
	for (i = 0; i < a->n; i++) {
		REQUIRE(a->ev[i].st == b->ev[i].st);
		REQUIRE(a->ev[i].off == b->ev[i].off);
		for (k = 0; k < N_KEPT; k++) {
			REQUIRE(a->ev[i].present[k] == b->ev[i].present[k]);
			REQUIRE(strcmp(a->ev[i].val[k], b->ev[i].val[k]) == 0);
		}
	}
}

/* The stream in a read-only mapping (the scanner never writes to what it
 * reads), fed every way; returns the whole-feed trace. */
static void
feed_all(const struct stream *s, struct trace *whole)
{
	size_t map = ((s->n + 4095) / 4096 + 1) * 4096, i, j;
	uint8_t *m = mmap(NULL, map, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *p;
	struct trace t;
	unsigned seed = 1;

	REQUIRE(m != MAP_FAILED);
	/* Flush against the end of the mapping's first part, a guard page
	 * after it: no read past the end. */
	p = m + (map - 4096) - s->n;
	memcpy(p, s->b, s->n);
	REQUIRE(mprotect(m, map - 4096, PROT_READ) == 0);
	REQUIRE(mprotect(m + map - 4096, 4096, PROT_NONE) == 0);

	feed_cuts(p, s->n, NULL, 0, whole);
	for (i = 1; i < s->n; i++) {
		feed_cuts(p, s->n, &i, 1, &t);
		trace_same(whole, &t);
	}
	if (s->n <= 400) {
		for (i = 1; i < s->n; i++)
			for (j = i + 1; j < s->n; j++) {
				size_t c[2] = {i, j};

				feed_cuts(p, s->n, c, 2, &t);
				trace_same(whole, &t);
			}
	}
	{
		/* a byte at a time */
		static size_t cuts[1 << 17];

		for (i = 1; i < s->n; i++)
			cuts[i - 1] = i;
		feed_cuts(p, s->n, cuts, s->n ? s->n - 1 : 0, &t);
		trace_same(whole, &t);
		for (j = 0; j < 50; j++) {
			size_t nc = 0, at = 0;

			for (;;) {
				at += 1 + (size_t)(rand_r(&seed) % 23);
				if (at >= s->n)
					break;
				cuts[nc++] = at;
			}
			feed_cuts(p, s->n, cuts, nc, &t);
			trace_same(whole, &t);
		}
	}
	munmap(m, map);
}

/* ---- cases --------------------------------------------------------------- */

START_TEST(basic)
{
	static struct stream s;
	uint8_t pb[1024];
	size_t n = 0;
	struct trace t;

	s.n = 0;
	begin(&s, 1);
	n += nvs(pb + n, "SCRIPT_FILENAME", "/srv/www/index.php");
	n += nvs(pb + n, "REQUEST_METHOD", "POST");
	n += nvs(pb + n, "REQUEST_URI", "/shop/cart?id=7");
	n += nvs(pb + n, "REQUEST_URIX", "no");
	n += nvs(pb + n, "HTTP_TRACEPARENT", TP);
	n += nvs(pb + n, "HTTP_TRACESTATE", "a=1,b=2");
	n += nvs(pb + n, "HTTP_X_LONG_NAME_PADDED_TO_THIRTY_ONE", "");
	rec(&s, FCGI_SCAN_PARAMS, 1, pb, n);
	rec(&s, FCGI_SCAN_PARAMS, 1, NULL, 0);
	rec(&s, 5, 1, "body=1", 6);
	rec(&s, 5, 1, NULL, 0);
	feed_all(&s, &t);
	REQUIRE(t.n == 1);
	REQUIRE(t.ev[0].st == FCGI_SCAN_PARAMS_END);
	/* right after the empty PARAMS record's header */
	REQUIRE(t.ev[0].off == 16 + 8 + n + (8 - n % 8) % 8 + 8);
	REQUIRE(strcmp(t.ev[0].val[0], "POST") == 0);
	REQUIRE(strcmp(t.ev[0].val[1], "/shop/cart?id=7") == 0);
	REQUIRE(strcmp(t.ev[0].val[2], TP) == 0);
	REQUIRE(strcmp(t.ev[0].val[3], "a=1,b=2") == 0);
	REQUIRE(!t.ev[0].present[4] && !t.ev[0].present[5]);
	REQUIRE(t.ev[0].present[6] && t.ev[0].val[6][0] == '\0');
}
END_TEST

/* Pairs that span records, 4-byte lengths for short values, odd padding,
 * a record with padding and no content, and management records
 * (id 0) and STDIN between them. */
START_TEST(spanning)
{
	static struct stream s;
	static const uint8_t gv[] = {0x0e, 0,   'F', 'C', 'G', 'I', '_', 'M',
				     'A',  'X', '_', 'C', 'O', 'N', 'N', 'S'};
	uint8_t pb[2048];
	size_t n = 0, cut;
	struct trace t;

	s.n = 0;
	rec(&s, 9, 0, gv, sizeof(gv)); /* FCGI_GET_VALUES: not a request's */
	begin(&s, 7);
	n += nv(pb + n, "REQUEST_METHOD", 14, "GET", 3, true);
	n += nvs(pb + n, "QUERY_STRING", "a=b");
	n += nv(pb + n, "REQUEST_URI", 11, "/x", 2, true);
	n += nvs(pb + n, "SCRIPT_NAME", "/s.php");
	cut = 9; /* in REQUEST_METHOD's name */
	rec_pad(&s, FCGI_SCAN_PARAMS, 7, pb, cut, 3);
	rec_pad(&s, 8, 7, NULL, 0, 5); /* FCGI_DATA, padding only */
	rec_pad(&s, 5, 7, "zz", 2, 0); /* STDIN early: stepped over */
	rec_pad(&s, FCGI_SCAN_PARAMS, 7, pb + cut, 30 - cut, 0);
	rec_pad(&s, FCGI_SCAN_PARAMS, 7, pb + 30, n - 30, 1);
	rec_pad(&s, FCGI_SCAN_PARAMS, 7, NULL, 0, 0);
	feed_all(&s, &t);
	REQUIRE(t.n == 1);
	REQUIRE(t.ev[0].off == s.n);
	REQUIRE(strcmp(t.ev[0].val[0], "GET") == 0);
	REQUIRE(strcmp(t.ev[0].val[1], "/x") == 0);
	REQUIRE(strcmp(t.ev[0].val[4], "/s.php") == 0);
	REQUIRE(strcmp(t.ev[0].val[5], "a=b") == 0);
}
END_TEST

/* Values beyond their limit, with a NUL, and past the arena are dropped
 * whole; the others are kept.  Of a name repeated the last value wins (as
 * php-fpm's $_SERVER has it), also when it is dropped: then the name is
 * absent. */
START_TEST(bounds)
{
	static struct stream s;
	static uint8_t pb[60000];
	static char big[40001];
	size_t n = 0, i;
	struct trace t;

	s.n = 0;
	begin(&s, 1);
	memset(big, 'a', sizeof(big) - 1);
	big[0] = '/';
	n += nv(pb + n, "REQUEST_METHOD", 14, big, 21, false); /* over 20 */
	n += nv(pb + n, "REQUEST_URI", 11, "/a\0b", 4, false); /* NUL */
	n += nvs(pb + n, "HTTP_TRACEPARENT", "first");
	n += nvs(pb + n, "HTTP_TRACEPARENT", TP);
	n += nvs(pb + n, "REQUEST_URI", "/kept-then-replaced");
	n += nv(pb + n, "REQUEST_URI", 11, big, 257, false);     /* over 256 */
	n += nv(pb + n, "HTTP_TRACESTATE", 15, big, 512, false); /* at the limit */
	/* a name longer than any kept, and a value of 40000 bytes */
	n += nv(pb + n, big, 300, big, 40000, false);
	n += nv(pb + n, "SCRIPT_NAME", 11, big, 256, false);
	n += nv(pb + n, "QUERY_STRING", 12, big, 256, false);
	for (i = 0; i < 6; i++) {
		size_t part = (n + 5) / 6, at = i * part;

		if (at < n)
			rec(&s, FCGI_SCAN_PARAMS, 1, pb + at,
			    at + part > n ? n - at : part);
	}
	rec(&s, FCGI_SCAN_PARAMS, 1, NULL, 0);
	feed_all(&s, &t);
	REQUIRE(t.n == 1);
	REQUIRE(!t.ev[0].present[0]);
	REQUIRE(!t.ev[0].present[1]);
	REQUIRE(strcmp(t.ev[0].val[2], TP) == 0);
	REQUIRE(strlen(t.ev[0].val[3]) == 512);
	REQUIRE(strlen(t.ev[0].val[4]) == 256);
	REQUIRE(strlen(t.ev[0].val[5]) == 256);
}
END_TEST

/* Names configured to be cut (REQUEST_URI, as the socket level has it):
 * of a longer value the first bytes up to the limit are kept, split
 * anywhere, and only those take room in the arena; one with a NUL is
 * still dropped, and a name not cut is dropped as before. */
START_TEST(cut_values)
{
	static struct stream s;
	static uint8_t pb[8192];
	static char big[1000];
	size_t n = 0;
	struct trace t;
	unsigned i;

	REQUIRE(fcgi_scan_config_cut(&cfg, 1) == 0);
	REQUIRE(fcgi_scan_config_cut(&cfg, 5) == 0);
	REQUIRE(fcgi_scan_config_cut(&cfg, N_KEPT) == -EINVAL);
	for (i = 0; i < sizeof(big); i++)
		big[i] = (char)('a' + i % 26);
	big[0] = '/';
	s.n = 0;
	begin(&s, 1);
	n += nv(pb + n, "REQUEST_URI", 11, big, 900, false);
	n += nv(pb + n, "SCRIPT_NAME", 11, big, 257, false); /* not cut */
	/* 257 + 11 * 257 + 257 bytes of the 3456: all fit if each cut value
	 * takes 257, not 901 */
	for (i = 0; i < 11; i++)
		n += nv(pb + n, "HTTP_X_LONG_NAME_PADDED_TO_THIRTY_ONE", 37, big, 256,
			false);
	n += nv(pb + n, "QUERY_STRING", 12, big, 900, false);
	rec(&s, FCGI_SCAN_PARAMS, 1, pb, n / 3);
	rec(&s, FCGI_SCAN_PARAMS, 1, pb + n / 3, n - n / 3);
	rec(&s, FCGI_SCAN_PARAMS, 1, NULL, 0);
	feed_all(&s, &t);
	REQUIRE(t.n == 1);
	REQUIRE(strlen(t.ev[0].val[1]) == 256);
	REQUIRE(memcmp(t.ev[0].val[1], big, 256) == 0);
	REQUIRE(!t.ev[0].present[4]);
	REQUIRE(strlen(t.ev[0].val[5]) == 256);
	REQUIRE(strlen(t.ev[0].val[6]) == 256);

	/* a NUL past the limit: dropped all the same */
	s.n = 0;
	begin(&s, 1);
	big[280] = '\0';
	n = nv(pb, "REQUEST_URI", 11, big, 300, false);
	big[280] = 'x';
	rec(&s, FCGI_SCAN_PARAMS, 1, pb, n);
	rec(&s, FCGI_SCAN_PARAMS, 1, NULL, 0);
	feed_all(&s, &t);
	REQUIRE(t.n == 1);
	REQUIRE(!t.ev[0].present[1]);
}
END_TEST

START_TEST(arena_full)
{
	static struct stream s;
	static uint8_t pb[16384];
	static char big[600];
	/* 500-byte values (501 with the NUL): the arena holds fit of them,
	 * the next is dropped whole */
	const unsigned fit = FCGI_SCAN_ARENA / 501, names = fit + 1;
	struct fcgi_scan_config c2;
	struct fcgi_scan st;
	size_t n = 0, used, l;
	const char *v;
	char nm[FCGI_SCAN_KEEP_MAX][16];
	unsigned i;

	REQUIRE(names < FCGI_SCAN_KEEP_MAX - 1);
	memset(&c2, 0, sizeof(c2));
	for (i = 0; i < names; i++) {
		snprintf(nm[i], sizeof(nm[i]), "HTTP_%c", 'A' + i);
		REQUIRE(fcgi_scan_config_add(&c2, nm[i], 600) == (int)i);
	}
	REQUIRE(fcgi_scan_config_add(&c2, "HTTP_A", 10) == -EEXIST);
	REQUIRE(fcgi_scan_config_add(&c2, "", 10) == -EINVAL);
	REQUIRE(fcgi_scan_config_add(&c2, "X", 0) == -EINVAL);
	REQUIRE(fcgi_scan_config_add(&c2, "X", FCGI_SCAN_ARENA) == -EINVAL);
	/* names of FCGI_SCAN_NAME_MAX + 1 bytes and of FCGI_SCAN_NAME_MAX */
	REQUIRE(fcgi_scan_config_add(&c2, "HTTP_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
				     5) == -EINVAL);
	{
		struct fcgi_scan_config c3;

		memset(&c3, 0, sizeof(c3));
		REQUIRE(fcgi_scan_config_add(&c3,
					     "HTTP_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
					     5) == 0);
	}
	memset(big, 'v', sizeof(big));
	s.n = 0;
	begin(&s, 1);
	for (i = 0; i < names; i++)
		n += nv(pb + n, nm[i], 6, big, 500, false);
	/* a short one still fits after the one dropped */
	n += nv(pb + n, "HTTP_Z", 6, "z", 1, false);
	REQUIRE(fcgi_scan_config_add(&c2, "HTTP_Z", 5) == (int)names);
	rec(&s, FCGI_SCAN_PARAMS, 1, pb, n);
	rec(&s, FCGI_SCAN_PARAMS, 1, NULL, 0);
	fcgi_scan_reset(&st);
	REQUIRE(fcgi_scan_feed(&st, &c2, s.b, s.n, &used) == FCGI_SCAN_PARAMS_END);
	REQUIRE(used == s.n);
	for (i = 0; i < fit; i++) {
		v = fcgi_scan_value(&st, i, &l);
		REQUIRE(v && l == 500 && v[500] == '\0');
	}
	REQUIRE(fcgi_scan_value(&st, fit, &l) == NULL);
	REQUIRE(strcmp(fcgi_scan_get(&st, &c2, "HTTP_Z"), "z") == 0);
	REQUIRE(fcgi_scan_value(&st, 99, &l) == NULL);
	REQUIRE(fcgi_scan_get(&st, &c2, "HTTP_Y") == NULL);
	for (i = names + 1; i < FCGI_SCAN_KEEP_MAX; i++) {
		char x[16];

		snprintf(x, sizeof(x), "N%u", i);
		REQUIRE(fcgi_scan_config_add(&c2, x, 5) == (int)i);
	}
	REQUIRE(fcgi_scan_config_add(&c2, "ONE_TOO_MANY", 5) == -ENOSPC);
}
END_TEST

/* Two requests on a kept connection, each with its own values; a second
 * request id multiplexed into the first one's parameters is not
 * followed, nor are the records of ids not followed. */
START_TEST(keep_and_multiplex)
{
	static struct stream s;
	uint8_t pb[512];
	size_t n;
	struct trace t;

	s.n = 0;
	begin(&s, 1);
	n = nvs(pb, "REQUEST_URI", "/one");
	rec(&s, FCGI_SCAN_PARAMS, 1, pb, n);
	begin(&s, 2); /* multiplexed: ignored */
	n = nvs(pb, "REQUEST_URI", "/two");
	n += nvs(pb + n, "REQUEST_METHOD", "PUT");
	rec(&s, FCGI_SCAN_PARAMS, 2, pb, n);
	rec(&s, FCGI_SCAN_PARAMS, 2, NULL, 0);
	n = nvs(pb, "HTTP_TRACEPARENT", TP);
	rec(&s, FCGI_SCAN_PARAMS, 1, pb, n);
	rec(&s, FCGI_SCAN_PARAMS, 1, NULL, 0);
	rec(&s, 5, 1, NULL, 0);
	/* more PARAMS of a request whose parameters ended: ignored */
	n = nvs(pb, "REQUEST_METHOD", "LATE");
	rec(&s, FCGI_SCAN_PARAMS, 1, pb, n);
	rec(&s, FCGI_SCAN_PARAMS, 1, NULL, 0);
	/* the next request on the connection, the same id */
	begin(&s, 1);
	n = nvs(pb, "REQUEST_URI", "/three");
	rec(&s, FCGI_SCAN_PARAMS, 1, pb, n);
	rec(&s, FCGI_SCAN_PARAMS, 1, NULL, 0);
	feed_all(&s, &t);
	REQUIRE(t.n == 2);
	REQUIRE(strcmp(t.ev[0].val[1], "/one") == 0);
	REQUIRE(strcmp(t.ev[0].val[2], TP) == 0);
	REQUIRE(!t.ev[0].present[0]);
	REQUIRE(strcmp(t.ev[1].val[1], "/three") == 0);
	REQUIRE(!t.ev[1].present[0] && !t.ev[1].present[2]);
}
END_TEST

/* After the parameters of a request without FCGI_KEEP_CONN the server
 * closes the connection once it answered: a request sent after it is
 * never run (php-fpm reads it while it drains the connection before its
 * close), so the scanner gives up at its FCGI_BEGIN_REQUEST.  A second
 * FCGI_BEGIN_REQUEST of the id while its parameters come takes its flags
 * from the second. */
START_TEST(last_request)
{
	static struct stream s;
	uint8_t pb[512];
	size_t n, at;
	struct trace t;

	s.n = 0;
	begin(&s, 1);
	begin_last(&s, 1); /* the id again: its flags now */
	n = nvs(pb, "REQUEST_URI", "/last");
	rec(&s, FCGI_SCAN_PARAMS, 1, pb, n);
	rec(&s, FCGI_SCAN_PARAMS, 1, NULL, 0);
	rec(&s, 5, 1, NULL, 0);
	rec(&s, FCGI_SCAN_BEGIN_REQUEST, 0, "\0\1\1\0\0\0\0\0", 8); /* id 0 */
	at = s.n + 8;
	begin(&s, 1);
	n = nvs(pb, "REQUEST_URI", "/never-run");
	rec(&s, FCGI_SCAN_PARAMS, 1, pb, n);
	rec(&s, FCGI_SCAN_PARAMS, 1, NULL, 0);
	feed_all(&s, &t);
	REQUIRE(t.n == 2);
	REQUIRE(t.ev[0].st == FCGI_SCAN_PARAMS_END);
	REQUIRE(strcmp(t.ev[0].val[1], "/last") == 0);
	REQUIRE(t.ev[1].st == FCGI_SCAN_GAVE_UP);
	REQUIRE(t.ev[1].off == at);

	/* With FCGI_KEEP_CONN the same stream has two requests. */
	s.n = 0;
	begin_last(&s, 1);
	begin(&s, 1);
	n = nvs(pb, "REQUEST_URI", "/kept");
	rec(&s, FCGI_SCAN_PARAMS, 1, pb, n);
	rec(&s, FCGI_SCAN_PARAMS, 1, NULL, 0);
	begin(&s, 1);
	n = nvs(pb, "REQUEST_URI", "/next");
	rec(&s, FCGI_SCAN_PARAMS, 1, pb, n);
	rec(&s, FCGI_SCAN_PARAMS, 1, NULL, 0);
	feed_all(&s, &t);
	REQUIRE(t.n == 2);
	REQUIRE(strcmp(t.ev[0].val[1], "/kept") == 0);
	REQUIRE(strcmp(t.ev[1].val[1], "/next") == 0);
}
END_TEST

/* A pair whose 4-byte lengths claim 2 GiB: counted down across records
 * (never an index), and the empty record still ends the stream. */
START_TEST(huge_lengths)
{
	static struct stream s;
	uint8_t pb[64];
	size_t n;
	struct trace t;

	s.n = 0;
	begin(&s, 1);
	n = nvs(pb, "REQUEST_URI", "/ok");
	pb[n++] = 0xff;
	pb[n++] = 0xff;
	pb[n++] = 0xff;
	pb[n++] = 0xff;
	pb[n++] = 0x8f;
	pb[n++] = 0xff;
	pb[n++] = 0xff;
	pb[n++] = 0xff;
	pb[n++] = 'R';
	rec(&s, FCGI_SCAN_PARAMS, 1, pb, n);
	rec(&s, FCGI_SCAN_PARAMS, 1, NULL, 0);
	feed_all(&s, &t);
	REQUIRE(t.n == 1);
	REQUIRE(strcmp(t.ev[0].val[1], "/ok") == 0);
}
END_TEST

/* Not FastCGI, or out of step: give up once, at the header, then consume
 * everything and report nothing. */
START_TEST(garbage)
{
	static const struct {
		const char *what;
		uint8_t b[16];
		size_t n;
	} cases[] = {
		{"HTTP", "GET / HTTP/1.1\r\n", 16},
		{"version 2", {2, 1, 0, 1, 0, 8, 0, 0}, 8},
		{"type 0", {1, 0, 0, 1, 0, 0, 0, 0}, 8},
		{"type 12", {1, 12, 0, 1, 0, 0, 0, 0}, 8},
		{"begin of 7", {1, 1, 0, 1, 0, 7, 0, 0}, 8},
		{"begin of 9", {1, 1, 0, 1, 0, 9, 0, 0}, 8},
		{"TLS", {0x16, 3, 1, 2, 0, 1, 0, 0}, 8},
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		static struct stream s;
		struct trace t;

		s.n = 0;
		put(&s, cases[i].b, cases[i].n);
		put(&s, "\1\1\0\1\0\10\0\0\0\1\0\0\0\0\0\0", 16);
		feed_all(&s, &t);
		ck_assert_msg(t.n == 1 && t.ev[0].st == FCGI_SCAN_GAVE_UP &&
				      t.ev[0].off == 8,
			      "%s", cases[i].what);
	}
	/* The highest type, FCGI_UNKNOWN_TYPE (11), is FastCGI: stepped over. */
	{
		static struct stream s;
		static const uint8_t unknown[8] = {99};
		struct trace t;

		s.n = 0;
		rec(&s, 11, 0, unknown, 8);
		begin(&s, 1);
		rec(&s, FCGI_SCAN_PARAMS, 1, NULL, 0);
		feed_all(&s, &t);
		REQUIRE(t.n == 1 && t.ev[0].st == FCGI_SCAN_PARAMS_END);
	}
	{
		struct fcgi_scan st;
		size_t used;

		fcgi_scan_reset(&st);
		fcgi_scan_stop(&st);
		REQUIRE(fcgi_scan_gave_up(&st));
		REQUIRE(fcgi_scan_feed(&st, &cfg, "\1\1\0\1\0\10\0\0", 8, &used) ==
			FCGI_SCAN_MORE);
		REQUIRE(used == 8);
	}
}
END_TEST

/* A state no single stream leads to: what two threads feeding one
 * connection's scanner at once leave (a server that reads one socket from
 * two threads; the socket level keeps one state per connection, and an
 * entry that one of them gave back may even be reused by another
 * connection meanwhile).  The scanner then stays within its state and its
 * configuration whatever the fields say: both are placed flush against an
 * inaccessible page, and the sanitizer build checks the array indexes. */
START_TEST(hostile_state)
{
	static struct stream s;
	static uint8_t pb[2048];
	void *smap, *cmap;
	size_t slen, clen, n = 0;
	struct fcgi_scan *st = test_guarded_tail(sizeof(*st), &smap, &slen);
	struct fcgi_scan_config *c = test_guarded_tail(sizeof(*c), &cmap, &clen);
	unsigned seed = 7, round;

	*c = cfg;
	s.n = 0;
	begin(&s, 1);
	n += nvs(pb + n, "REQUEST_METHOD", "GET");
	n += nvs(pb + n, "REQUEST_URI", "/a/b?c=d");
	n += nvs(pb + n, "HTTP_TRACEPARENT", TP);
	n += nvs(pb + n, "SCRIPT_NAME", "/index.php");
	rec(&s, FCGI_SCAN_PARAMS, 1, pb, n);
	rec(&s, FCGI_SCAN_PARAMS, 1, NULL, 0);
	while (s.n < 60000)
		rec(&s, 5, 1, NULL, 0);

	for (round = 0; round < 20000; round++) {
		uint8_t *b = (uint8_t *)st;
		size_t i, off = 0, used;

		for (i = 0; i < sizeof(*st) - FCGI_SCAN_ARENA; i++)
			b[i] = (uint8_t)rand_r(&seed);
		/* fields in and just past their ranges, often */
		if (rand_r(&seed) % 2) {
			st->phase = (uint8_t)(rand_r(&seed) % 4);
			st->ours = (uint8_t)(rand_r(&seed) % 3);
			st->nv_phase = (uint8_t)(rand_r(&seed) % 4);
			st->hdr_pos = (uint8_t)(rand_r(&seed) % 24);
			st->lbuf_pos = (uint8_t)(rand_r(&seed) % 8);
			st->keep = (int8_t)(rand_r(&seed) % 40 - 1);
			st->arena_used =
				(uint16_t)(rand_r(&seed) % (FCGI_SCAN_ARENA + 64));
			if (rand_r(&seed) % 2) {
				st->nv_pos = (uint32_t)(rand_r(&seed) % 64);
				st->nv_len = (uint32_t)(rand_r(&seed) % 4096);
				st->nlen = (uint32_t)(rand_r(&seed) % 64);
				st->left = (uint32_t)(rand_r(&seed) % 4096);
			}
		}
		while (off < s.n) {
			size_t chunk = 1 + (size_t)(rand_r(&seed) % 30000);

			if (chunk > s.n - off)
				chunk = s.n - off;
			used = 99999;
			(void)fcgi_scan_feed(st, c, s.b + off, chunk, &used);
			REQUIRE(used <= chunk);
			off += used ? used : chunk;
			for (i = 0; i < FCGI_SCAN_KEEP_MAX; i++)
				(void)fcgi_scan_value(st, (unsigned)i, NULL);
		}
	}
	munmap(smap, slen);
	munmap(cmap, clen);
}
END_TEST

/* A kept value whose NUL another feed of a shared state wrote over (two
 * threads reading one socket: the other's arena_used behind, its value's
 * bytes copied over this one's end).  The builder reads the values as C
 * strings (preload/request-cgi.c): one used to run on past the arena,
 * into what the pool entry held before fcgi_scan_reset() (which leaves
 * the arena as it was) and past the state.  The state sits flush
 * against an inaccessible page. */
START_TEST(value_string_ends)
{
	static struct stream s;
	static uint8_t pb[512];
	void *smap;
	size_t slen, n = 0, used, off, len = 0;
	struct fcgi_scan *st = test_guarded_tail(sizeof(*st), &smap, &slen);
	const char *v;

	/* the pool entry's earlier bytes (a head's capture, say) */
	memset(st, 'x', sizeof(*st));
	fcgi_scan_reset(st);
	s.n = 0;
	begin(&s, 1);
	n += nvs(pb + n, "HTTP_TRACEPARENT", TP);
	rec(&s, FCGI_SCAN_PARAMS, 1, pb, n);
	rec(&s, FCGI_SCAN_PARAMS, 1, NULL, 0);
	REQUIRE(fcgi_scan_feed(st, &cfg, s.b, s.n, &used) == FCGI_SCAN_PARAMS_END);
	v = fcgi_scan_value(st, 2, &len);
	REQUIRE(v && len == strlen(TP));
	/* another feed's value bytes from there on, as far as a feed writes
	 * (fcgi-scan.c, NV_VALUE: short of the arena's last byte) */
	off = (size_t)(v - st->arena);
	memset(st->arena + off, 'y', FCGI_SCAN_ARENA - 1 - off);
	v = fcgi_scan_get(st, &cfg, "HTTP_TRACEPARENT");
	REQUIRE(v && strlen(v) < FCGI_SCAN_ARENA - off);
	munmap(smap, slen);
}
END_TEST

/* Random record streams (valid headers, random contents and types) and
 * random bytes: no crash, no read outside the input, and every split
 * gives the same events. */
START_TEST(random_streams)
{
	unsigned seed = 42, round;

	for (round = 0; round < 40; round++) {
		static struct stream s;
		struct trace t;
		int r;

		s.n = 0;
		for (r = 0; r < 6; r++) {
			uint8_t c[200];
			size_t n = (size_t)(rand_r(&seed) % 40), i;
			uint8_t type = (uint8_t)(1 + rand_r(&seed) % 11);

			for (i = 0; i < n; i++)
				c[i] = (uint8_t)(rand_r(&seed) % 4 == 0
							 ? rand_r(&seed)
							 : "RQEUSTI_"[rand_r(&seed) %
								      8]);
			if (r == 0 || type == 1) {
				begin(&s, 1);
				continue;
			}
			if (rand_r(&seed) % 3 == 0)
				n = 0;
			rec_pad(&s, type % 2 ? FCGI_SCAN_PARAMS : type, 1, c, n,
				(uint8_t)(rand_r(&seed) % 9));
		}
		if (round % 5 == 4)
			s.b[rand_r(&seed) % s.n] ^= (uint8_t)(1 + rand_r(&seed) % 255);
		feed_all(&s, &t);
	}
}
END_TEST

TEST_SUITE(fcgi_scan_suite)
{
	Suite *s = suite_create("fcgi-scan");
	TCase *tc = tcase_create("fcgi-scan");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, basic);
	tcase_add_test(tc, spanning);
	tcase_add_test(tc, bounds);
	tcase_add_test(tc, cut_values);
	tcase_add_test(tc, arena_full);
	tcase_add_test(tc, keep_and_multiplex);
	tcase_add_test(tc, last_request);
	tcase_add_test(tc, huge_lengths);
	tcase_add_test(tc, garbage);
	tcase_add_test(tc, random_streams);
	tcase_add_test(tc, hostile_state);
	tcase_add_test(tc, value_string_ends);
	suite_add_tcase(s, tc);
	return s;
}
