/* SPDX-License-Identifier: Apache-2.0 */
/* The socket level's fused path for a whole request head in one read
 * (http_scan_whole(), ctxshim_request_ctx_whole()) against the general path
 * (http_scan_feed() with a capture, ctxshim_request_ctx_capture()): for
 * every head the fused path takes, the scanner's status, consumed bytes,
 * state after, flags, values and the resulting context bytes must be the
 * same; for every head it leaves, the scanner state must be untouched.
 * And a stream fed in reads split at every offset must give the same
 * events whether or not each read first tries the fused path (as
 * ctxshim_conn_feed() does).  preload/request-ctx.c is compiled in, with
 * fixed ids and a tracestate stub that keeps what it is given. */
#include "test-common.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http-scan-snap.h"
#include "http-scan.h"
#include "request-ctx.c"
#include "test-request-stubs.h"

/* cfg_x: three configured names, one starting like traceparent. */
static struct http_scan_config cfg_std, cfg_x;
static const int extra_index[CTXSHIM_MAX_HEADER_ATTRS] = {0, 1, 2, -1, -1, -1, -1, -1};
static unsigned n_taken, n_left;

static void
setup(void)
{
	http_scan_config_init(&cfg_std);
	http_scan_config_init(&cfg_x);
	ck_assert_int_eq(http_scan_config_add_header(&cfg_x, "x-request-id", 12, NULL),
			 0);
	ck_assert_int_eq(http_scan_config_add_header(&cfg_x, "User-Agent", 10, NULL),
			 0);
	ck_assert_int_eq(http_scan_config_add_header(&cfg_x, "Trace", 5, NULL), 0);
	memset(&ctxshim_cfg, 0, sizeof(ctxshim_cfg));
	ctxshim_cfg.new_traces = true;
}

static unsigned
n_extra_of(const struct http_scan_config *cfg)
{
	return cfg == &cfg_x ? 3 : 0;
}

static void
use_cfg(const struct http_scan_config *cfg)
{
	ctxshim_cfg.n_header_attrs = n_extra_of(cfg);
}

/* One read of exactly d[0, n) (a heap block of that size: ASan and
 * valgrind see any byte read outside it), from scanner state *st0. */
static void
diff_one(const struct http_scan_config *cfg,
	 const struct http_scan *st0,
	 const void *d,
	 size_t n,
	 const char *what)
{
	static struct http_scan_capture cap;
	uint8_t *buf = malloc(n ? n : 1);
	struct http_scan sg = *st0, sf = *st0;
	struct http_scan_head h;
	struct snap a, b;
	struct ctxshim_ctx cg, cf;
	enum http_scan_status r;
	size_t used = 0;
	int rc;

	ck_assert_ptr_nonnull(buf);
	memcpy(buf, d, n);
	use_cfg(cfg);
	memset(&h, 0x5a, sizeof(h));
	rc = http_scan_whole(&sf, cfg, buf, n, &h);
	if (rc != 0) {
		ck_assert_msg(rc == -EAGAIN, "%s: rc %d", what, rc);
		ck_assert_msg(memcmp(&sf, st0, sizeof(sf)) == 0,
			      "%s: state changed by a head left to the feed", what);
		memset(&cf, 0x5a, sizeof(cf));
		ck_assert_int_eq(ctx_whole(&cf, &sf, cfg, buf, n, extra_index),
				 -EAGAIN);
		ck_assert_msg(memcmp(&sf, st0, sizeof(sf)) == 0,
			      "%s: state changed by the fused path", what);
		n_left++;
		free(buf);
		return;
	}
	n_taken++;
	memset(&cap, 0, sizeof(cap));
	r = http_scan_feed(&sg, cfg, &cap, buf, n, &used);
	ck_assert_msg(r == HTTP_SCAN_HEAD && used == n,
		      "%s: taken whole, but the feed says status %d after %zu of %zu",
		      what, (int)r, used, n);
	ck_assert_msg(h.flags == http_scan_flags(&sg), "%s: flags %#x, feed %#x", what,
		      h.flags, http_scan_flags(&sg));
	ck_assert_msg(
		memcmp(&sg, &sf, sizeof(sg)) == 0,
		"%s: scanner state after differs (phase %u/%u field %u/%u sub %u/%u "
		"pos %u/%u n %llu/%llu)",
		what, sg.phase, sf.phase, sg.field, sf.field, sg.sub, sf.sub, sg.pos,
		sf.pos, (unsigned long long)sg.n, (unsigned long long)sf.n);
	snap_take(&a, &cap, n_extra_of(cfg));
	snap_take_head(&b, &h, n_extra_of(cfg));
	snap_norm(&a);
	snap_norm(&b);
	ck_assert_msg(snap_eq(&a, &b),
		      "%s: values differ: method '%.*s'/'%.*s' target '%.*s'/'%.*s' "
		      "tp '%.*s'/'%.*s' ts '%.*s'/'%.*s' extras %#x/%#x",
		      what, (int)a.method_len, a.method, (int)b.method_len, b.method,
		      (int)a.target_len, a.target, (int)b.target_len, b.target,
		      (int)a.tp_len, a.tp, (int)b.tp_len, b.tp, (int)a.ts_len, a.ts,
		      (int)b.ts_len, b.ts, a.extra_present, b.extra_present);
	/* the published context, byte for byte */
	memset(&cg, 0, sizeof(cg));
	memset(&cf, 0, sizeof(cf));
	ctxshim_request_ctx_capture(&cg, &cap, http_scan_flags(&sg), extra_index);
	sf = *st0;
	ck_assert_int_eq(ctx_whole(&cf, &sf, cfg, buf, n, extra_index), 0);
	ck_assert_msg(memcmp(&sg, &sf, sizeof(sg)) == 0, "%s: fused state differs",
		      what);
	ck_assert_msg(memcmp(&cg, &cf, sizeof(cg)) == 0,
		      "%s: contexts differ (attrs %u/%u, tracestate %u/%u)", what,
		      cg.attrs_len, cf.attrs_len, cg.tracestate_len, cf.tracestate_len);
	free(buf);
}

static void
diff_str(const struct http_scan_config *cfg, const char *s, const char *what)
{
	struct http_scan st;

	memset(&st, 0, sizeof(st));
	diff_one(cfg, &st, s, strlen(s), what);
}

/* Taken by the fused path (and then equal to the feed's result). */
static void
expect_taken(const struct http_scan_config *cfg, const char *s)
{
	unsigned before = n_taken;

	diff_str(cfg, s, s);
	ck_assert_msg(n_taken == before + 1, "not taken whole: '%s'", s);
}

static void
expect_left(const struct http_scan_config *cfg, const char *s)
{
	unsigned before = n_left;

	diff_str(cfg, s, s);
	ck_assert_msg(n_left == before + 1, "taken whole: '%s'", s);
}

/* ---- heads built from parts ---- */

static const char *const req_lines[] = {
	"GET / HTTP/1.1",
	"GET /small.html HTTP/1.1",
	"GET /small.html HTTP/1.0",
	"POST /api/v1/items?x=1&y=2 HTTP/1.1",
	"HEAD /a#frag HTTP/1.1",
	"PATCH /p HTTP/1.1",
	"DELETE /0123456789abcde HTTP/1.1", /* 16-byte target */
	"OPTIONS * HTTP/1.1",
	"M-_X /x HTTP/1.1",
	"ABCDEFGHIJKLMNOPQRST /x HTTP/1.1",  /* 20-byte method */
	"ABCDEFGHIJKLMNOPQRSTU /x HTTP/1.1", /* 21: not HTTP */
	"PRI * HTTP/2.0",
	"GET  /two-spaces HTTP/1.1",
	"GET /x  HTTP/1.1",
	"GET /x HTTP/1.2",
	"GET /x http/1.1",
	"GET /x HTTP/1.1 ",
	"GET http://example.com/p/q?r HTTP/1.1",
	"GET /caf\xc3\xa9 HTTP/1.1",
	"GET /\x7f HTTP/1.1",
	"get /lower HTTP/1.1",
	"G /x HTTP/1.0",
};

static const char *const hdr_lines[] = {
	"Host: example.com",
	"Host: 127.0.0.1:18380",
	"traceparent: " TP_V00,
	"TraceParent: " TP_V00,
	"TRACEPARENT:" TP_V00,
	"traceparent:   " TP_V00 "  ",
	"traceparent: \t" TP_V00 "\t",
	"traceparent: " TP_V00 "-extra",
	"traceparent: "
	"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-ever-"
	"comes-next-in-a-longer-value",
	"traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0 ",
	"traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0\x01",
	"traceparent:",
	"traceparent: ",
	"traceparent : " TP_V00,
	"traceparentx: y",
	"tracestate: a=1,b=2",
	"Tracestate:  congo=t61rcWkgMzE ",
	"tracestate:",
	"tracestate-x: y",
	"trace: configured",
	"TRACE:x",
	"x-request-id: abc-123",
	"X-Request-Id:  spaced  ",
	"user-agent: curl/8.0",
	"User-Agent: Mozilla/5.0 (X11; Linux x86_64) \xc3\xa9",
	"content-length: 0",
	"Content-Length: 3",
	"Content-Length:  17  ",
	"Content-Length: 1,1",
	"Content-Length: +1",
	"Content-Length: 72057594037927936",
	"transfer-encoding: chunked",
	"Accept: */*",
	"t",
	"tr: x",
	":weird",
	" folded continuation",
	"\tfolded",
	"\x01ctl: x",
	"\xc3\xa9: x",
	"trac: prefix",
	"Connection: keep-alive",
};

struct rng {
	uint64_t s;
};

static uint64_t
rnd(struct rng *r)
{
	r->s += 0x9e3779b97f4a7c15ull;
	uint64_t z = r->s;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#define HEAD_MAX 8192

/* A head: a request line, up to 6 header lines, the empty line, each line
 * ending in CRLF or LF, then maybe bytes that do not belong to it. */
static size_t
make_head(struct rng *r, char *out, size_t cap)
{
	size_t n = 0, k, nh = rnd(r) % 7, i;
	unsigned ends = (unsigned)rnd(r);

#define PUT(s_, l_)                         \
	do {                                \
		size_t l__ = (l_);          \
		if (n + l__ > cap)          \
			return n;           \
		memcpy(out + n, (s_), l__); \
		n += l__;                   \
	} while (0)
#define EOL()                                  \
	do {                                   \
		if ((ends & 1) || !(ends & 6)) \
			PUT("\r\n", 2);        \
		else                           \
			PUT("\n", 1);          \
		ends >>= 1;                    \
	} while (0)

	k = rnd(r) % (sizeof(req_lines) / sizeof(req_lines[0]));
	PUT(req_lines[k], strlen(req_lines[k]));
	EOL();
	for (i = 0; i < nh; i++) {
		k = rnd(r) % (sizeof(hdr_lines) / sizeof(hdr_lines[0]));
		PUT(hdr_lines[k], strlen(hdr_lines[k]));
		EOL();
	}
	switch (rnd(r) % 16) {
	case 0:
		PUT("\n", 1);
		break;
	case 1:
		PUT("\r", 1); /* a bare CR: malformed */
		break;
	case 2:
		PUT("\r\nGET /next HTTP/1.1\r\n\r\n", 23); /* pipelined */
		break;
	case 3:
		PUT("\r\nabc", 5); /* a body, or junk */
		break;
	case 4:
		break; /* no empty line: split */
	default:
		PUT("\r\n", 2);
		break;
	}
	return n;
#undef EOL
#undef PUT
}

/* A few random bytes changed: controls, separators, high bytes. */
static void
mutate(struct rng *r, char *s, size_t n)
{
	static const char pick[] = "\r\n \t:\x01\x7f\x80\xff,;=-_aZ0";
	unsigned k = (unsigned)(rnd(r) % 3);

	while (n && k--)
		s[rnd(r) % n] = pick[rnd(r) % (sizeof(pick) - 1)];
}

/* ---- tests ---- */

START_TEST(usual_heads_taken)
{
	expect_taken(&cfg_std, "GET /small.html HTTP/1.1\r\nHost: 127.0.0.1:18380\r\n"
			       "traceparent: " TP_V00 "\r\n\r\n");
	expect_taken(&cfg_std, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
	expect_taken(&cfg_std, "GET / HTTP/1.0\n\n");
	expect_taken(&cfg_std,
		     "POST /a?b HTTP/1.1\nHost: x\ntraceparent:" TP_V00 "\n\n");
	expect_taken(&cfg_std, "GET /x HTTP/1.1\r\ntracestate: a=1,b=2\r\n"
			       "TRACEPARENT: " TP_V00 "  \r\n\r\n");
	expect_taken(&cfg_x, "GET /x HTTP/1.1\r\nX-Request-Id: abc\r\nUser-Agent: u\r\n"
			     "trace: t\r\ntraceparent: " TP_V00 "\r\n\r\n");
	expect_taken(&cfg_std, "QUERY /x HTTP/1.1\r\nHost: x\r\n\r\n");
	/* a body that comes in the next read: the scanner is left in it */
	expect_taken(&cfg_std, "POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
	expect_taken(&cfg_std, "POST /p HTTP/1.1\r\nContent-Length: 12 \r\n"
			       "traceparent: " TP_V00 "\r\n\r\n");
	expect_taken(&cfg_std, "PUT /p HTTP/1.0\ncontent-length:7\n\n");
	/* the tunnel's method has its flag on both paths */
	expect_taken(&cfg_std, "CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n");
	{
		static const char c[] = "CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n";
		struct http_scan st = {0};
		struct http_scan_head h;

		use_cfg(&cfg_std);
		ck_assert_int_eq(http_scan_whole(&st, &cfg_std, c, strlen(c), &h), 0);
		ck_assert_uint_eq(h.flags & HTTP_SCAN_F_CONNECT, HTTP_SCAN_F_CONNECT);
	}
}
END_TEST

START_TEST(other_heads_left)
{
	/* a body, bodies' framing, pipelining, split, folding, repeats */
	expect_left(&cfg_std, "POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
	expect_left(
		&cfg_std,
		"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n");
	expect_left(&cfg_std, "POST / HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\n");
	expect_left(&cfg_std, "POST / HTTP/1.1\r\nContent-Length:\r\n\r\n");
	expect_left(&cfg_std,
		    "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n");
	expect_left(&cfg_std, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
	expect_left(&cfg_std, "GET / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n");
	expect_left(&cfg_std, "GET / HTTP/1.1\r\nHost: x\r\n");
	expect_left(&cfg_std, "GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n");
	expect_left(&cfg_std, "GET / HTTP/1.1\r\ntraceparent: " TP_V00
			      "\r\ntraceparent: " TP_V00 "\r\n\r\n");
	expect_left(&cfg_std,
		    "GET / HTTP/1.1\r\ntracestate: a=1\r\ntracestate: b=2\r\n\r\n");
	expect_left(&cfg_std, "\r\nGET / HTTP/1.1\r\n\r\n");
	expect_left(&cfg_std, "GET / HTTP/1.1\r\n\r\r\n");
	expect_left(&cfg_std, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
	expect_left(&cfg_std, "GET  / HTTP/1.1\r\n\r\n");
}
END_TEST

/* A last header line that starts near the end of the read (within the
 * longest wanted name, 17 bytes by default) with a letter of a wanted
 * name: each candidate is checked against its own length, so the fused
 * path takes these too (it left them to the feed before), with the
 * feed's result, its name-match state (st->match) included. */
START_TEST(near_end_lines_taken)
{
	static const char *const last[] = {
		"Cookie: a=1",
		"TE: trailers",
		"t: x",
		"T:",
		"tr: 1",
		"Content-Type: x",
		"content-length: 5",
		"tracestate: a",
		"traceparent: x",
		"traceparent:",
		"Trace: y",
		"trace: ",
		"User-Agent: u",
		"x-request-id: 7",
		"X: 1",
	};
	const struct http_scan_config *cfgs[] = {&cfg_std, &cfg_x};
	char buf[256];
	size_t i, c, e;

	for (c = 0; c < 2; c++)
		for (i = 0; i < sizeof(last) / sizeof(last[0]); i++)
			for (e = 0; e < 2; e++) {
				const char *eol = e ? "\n" : "\r\n";

				snprintf(buf, sizeof(buf),
					 "GET /small.html HTTP/1.1%sHost: x%s"
					 "traceparent: " TP_V00 "%s%s%s%s",
					 eol, eol, eol, last[i], eol, eol);
				/* a repeated traceparent is the feed's */
				if (strncmp(last[i], "traceparent", 11) == 0) {
					snprintf(buf, sizeof(buf),
						 "GET / HTTP/1.1%sHost: x%s%s%s%s", eol,
						 eol, last[i], eol, eol);
				}
				expect_taken(cfgs[c], buf);
				/* the same line right after the request line */
				snprintf(buf, sizeof(buf), "GET / HTTP/1.1%s%s%s%s",
					 eol, last[i], eol, eol);
				expect_taken(cfgs[c], buf);
			}
	/* two such lines: the state the last one leaves */
	expect_taken(&cfg_x, "GET /abcdefgh HTTP/1.1\r\nt: 1\r\nTrace: 2\r\n\r\n");
	expect_taken(&cfg_std,
		     "GET /abcdefgh HTTP/1.1\nTE: x\ntracestate: y\nC: 1\n\n");
}
END_TEST

/* A 55-byte traceparent value followed by CRLF is taken without a search
 * for its LF only if none of its bytes is <= SP (tp_plain()): a control,
 * SP, HTAB, CR, LF or a high byte at any position must give the feed's
 * result all the same. */
START_TEST(tp_value_bytes)
{
	static const unsigned char odd[] = {' ',  '\t', '\r', '\n', 0x01, 0x1f,
					    0x21, 0x7f, 0x80, 0xa0, 0xff};
	char buf[256], what[64];
	size_t pos, k;

	for (pos = 0; pos < W3C_TRACEPARENT_LEN; pos++)
		for (k = 0; k < sizeof(odd); k++) {
			char v[W3C_TRACEPARENT_LEN + 1] = TP_V00;

			v[pos] = (char)odd[k];
			snprintf(buf, sizeof(buf),
				 "GET / HTTP/1.1\r\ntraceparent: %s\r\nHost: x\r\n\r\n",
				 v);
			snprintf(what, sizeof(what), "tp byte 0x%02x at %zu", odd[k],
				 pos);
			diff_str(&cfg_std, buf, what);
			/* the same as the last line, LF endings */
			snprintf(buf, sizeof(buf),
				 "GET / HTTP/1.1\nHost: x\ntraceparent:%s\n\n", v);
			diff_str(&cfg_x, buf, what);
		}
	/* OWS from the 56th character, then more: the cut at 64 bytes must
	 * not leave the parser a value to trim into a valid one */
	for (pos = 57; pos <= 76; pos++) {
		char v[80] = TP_V00;

		memset(v + W3C_TRACEPARENT_LEN, ' ', pos - 56);
		v[pos - 1] = 'x';
		v[pos] = '\0';
		snprintf(buf, sizeof(buf),
			 "GET / HTTP/1.1\r\ntraceparent: %s\r\nHost: x\r\n\r\n", v);
		expect_taken(&cfg_std, buf);
	}
	ck_assert_uint_gt(n_taken, 1000);
}
END_TEST

/* Each request line with each header line, both line endings. */
START_TEST(pairs)
{
	const struct http_scan_config *cfgs[] = {&cfg_std, &cfg_x};
	char buf[1024], what[64];
	size_t i, j, c, e;

	for (c = 0; c < 2; c++)
		for (i = 0; i < sizeof(req_lines) / sizeof(req_lines[0]); i++)
			for (j = 0; j < sizeof(hdr_lines) / sizeof(hdr_lines[0]); j++)
				for (e = 0; e < 2; e++) {
					const char *eol = e ? "\n" : "\r\n";
					int n = snprintf(buf, sizeof(buf), "%s%s%s%s%s",
							 req_lines[i], eol,
							 hdr_lines[j], eol, eol);

					ck_assert_int_gt(n, 0);
					snprintf(what, sizeof(what),
						 "pair %zu/%zu/%zu/%zu", c, i, j, e);
					diff_str(cfgs[c], buf, what);
				}
	ck_assert_uint_gt(n_taken, 500);
}
END_TEST

/* Targets and values around every length limit and SSE2 step. */
START_TEST(lengths)
{
	static char buf[HEAD_MAX], val[1200];
	char what[64];
	size_t l;
	int n;

	memset(val, 'a', sizeof(val));
	for (l = 1; l < 600; l++) {
		/* target of l bytes, a query from its middle */
		val[0] = '/';
		val[l / 2] = l % 3 ? '?' : 'a';
		n = snprintf(buf, sizeof(buf), "GET %.*s HTTP/1.1\r\nHost: h\r\n\r\n",
			     (int)l, val);
		snprintf(what, sizeof(what), "target %zu", l);
		diff_str(&cfg_std, buf, what);
		val[l / 2] = 'a';
		val[0] = 'a';
		/* traceparent, tracestate and configured values of l bytes */
		n = snprintf(buf, sizeof(buf),
			     "GET / HTTP/1.1\r\ntraceparent: %.*s\r\n\r\n", (int)l,
			     val);
		diff_str(&cfg_std, buf, "traceparent length");
		n = snprintf(buf, sizeof(buf),
			     "GET / HTTP/1.1\r\ntracestate: %.*s \r\n\r\n", (int)l,
			     val);
		diff_str(&cfg_std, buf, "tracestate length");
		n = snprintf(buf, sizeof(buf),
			     "GET / HTTP/1.1\r\nUser-Agent: %.*s\r\n\n", (int)l, val);
		diff_str(&cfg_x, buf, "extra length");
		/* a whole head of about l bytes, short lines (every LF offset) */
		n = snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nA: %.*s\r\n\r\n",
			     (int)(l % 80), val);
		diff_str(&cfg_std, buf, "head length");
		ck_assert_int_gt(n, 0);
	}
	ck_assert_uint_gt(n_taken, 2000);
}
END_TEST

/* Random heads from the parts, some mutated, from several scanner states. */
START_TEST(random_heads)
{
	static const char *const before[] = {
		"",
		"GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", /* sub, field left */
		"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nab",
		"POST / HTTP/1.1\r\nTransfer-Encoding: "
		"chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"GET / HTTP/1.1\r\nx-request-id: 1\r\n\r\n",
		"\r\n",               /* empty lines before a head: head_bytes */
		"GET / HTTP/1.1\r\n", /* in a head */
		"\x16\x03\x01",       /* gave up */
	};
	const struct http_scan_config *cfgs[] = {&cfg_std, &cfg_x};
	static struct http_scan_capture cap;
	struct rng r = {0x1234567u + (uint64_t)_i};
	static char buf[HEAD_MAX];
	unsigned it, iters = 20000;

	for (it = 0; it < iters; it++) {
		const struct http_scan_config *cfg = cfgs[it & 1];
		const char *pre =
			before[rnd(&r) % (sizeof(before) / sizeof(before[0]))];
		struct http_scan st;
		size_t n = make_head(&r, buf, sizeof(buf)), used, off = 0;
		char what[48];

		if (rnd(&r) % 4 == 0)
			mutate(&r, buf, n);
		memset(&st, 0, sizeof(st));
		/* the state another message leaves */
		while (off < strlen(pre)) {
			memset(&cap, 0, sizeof(cap));
			used = 0;
			if (http_scan_feed(&st, cfg, &cap, pre + off, strlen(pre) - off,
					   &used) == HTTP_SCAN_GAVE_UP)
				break;
			off += used;
		}
		snprintf(what, sizeof(what), "random %u (seed %d)", it, _i);
		diff_one(cfg, &st, buf, n, what);
	}
	ck_assert_uint_gt(n_taken, iters / 10);
	ck_assert_uint_gt(n_left, iters / 10);
}
END_TEST

/* ---- a stream in reads ---- */

struct ev {
	size_t off;
	unsigned status, flags;
	struct snap snap;
};

struct evs {
	unsigned n;
	struct ev ev[16];
	struct http_scan end;
};

static void
ev_add(struct evs *t, size_t off, unsigned status, unsigned flags, const struct snap *s)
{
	struct ev *e;

	ck_assert_uint_lt(t->n, 16);
	e = &t->ev[t->n++];
	e->off = off;
	e->status = status;
	e->flags = flags;
	memset(&e->snap, 0, sizeof(e->snap));
	if (s && (flags & HTTP_SCAN_F_CAPTURED)) {
		e->snap = *s;
		snap_norm(&e->snap);
	}
}

/* Feed d[0, n) in two reads split at k; fused: each read first tries the
 * fused path, as ctxshim_conn_feed() does. */
static void
drive(const struct http_scan_config *cfg,
      const uint8_t *d,
      size_t n,
      size_t k,
      bool fused,
      struct evs *t)
{
	static struct http_scan_capture cap;
	struct http_scan st;
	size_t cut[3] = {0, k, n}, i;
	bool in_head = false;

	memset(&st, 0, sizeof(st));
	memset(t, 0, sizeof(*t));
	for (i = 0; i < 2; i++) {
		size_t off = cut[i], end = cut[i + 1];
		uint8_t *buf;

		if (off == end)
			continue;
		buf = malloc(end - off);
		ck_assert_ptr_nonnull(buf);
		memcpy(buf, d + off, end - off);
		if (fused) {
			struct http_scan_head h;
			struct snap s;

			if (http_scan_whole(&st, cfg, buf, end - off, &h) == 0) {
				snap_take_head(&s, &h, n_extra_of(cfg));
				ev_add(t, end, HTTP_SCAN_HEAD, h.flags, &s);
				free(buf);
				continue;
			}
		}
		while (off < end) {
			enum http_scan_status r;
			size_t used = 0;
			struct snap s;

			if (!in_head)
				memset(&cap, 0, sizeof(cap));
			r = http_scan_feed(&st, cfg, &cap, buf + (off - cut[i]),
					   end - off, &used);
			off += used;
			in_head = http_scan_in_head(&st);
			if (r == HTTP_SCAN_HEAD) {
				snap_take(&s, &cap, n_extra_of(cfg));
				ev_add(t, off, r, http_scan_flags(&st), &s);
			} else if (r == HTTP_SCAN_GAVE_UP) {
				ev_add(t, off, r, 0, NULL);
				break;
			}
		}
		free(buf);
	}
	t->end = st;
}

static void
same_events(const struct evs *a, const struct evs *b, const char *what, size_t k)
{
	unsigned i;

	ck_assert_msg(a->n == b->n, "%s split at %zu: %u events, fused %u", what, k,
		      a->n, b->n);
	for (i = 0; i < a->n; i++) {
		ck_assert_msg(a->ev[i].off == b->ev[i].off &&
				      a->ev[i].status == b->ev[i].status &&
				      a->ev[i].flags == b->ev[i].flags,
			      "%s split at %zu: event %u differs", what, k, i);
		ck_assert_msg(snap_eq(&a->ev[i].snap, &b->ev[i].snap),
			      "%s split at %zu: event %u values differ", what, k, i);
	}
	ck_assert_msg(memcmp(&a->end, &b->end, sizeof(a->end)) == 0,
		      "%s split at %zu: final states differ", what, k);
}

static void
splits(const struct http_scan_config *cfg, const char *s, const char *what)
{
	size_t n = strlen(s), k;
	struct evs a, b;

	for (k = 0; k <= n; k++) {
		drive(cfg, (const uint8_t *)s, n, k, false, &a);
		drive(cfg, (const uint8_t *)s, n, k, true, &b);
		same_events(&a, &b, what, k);
	}
}

START_TEST(split_every_offset)
{
	splits(&cfg_std,
	       "GET /small.html HTTP/1.1\r\nHost: 127.0.0.1:18380\r\n"
	       "traceparent: " TP_V00 "\r\n\r\n",
	       "nginx head");
	splits(&cfg_std,
	       "GET /a HTTP/1.1\r\ntracestate: a=1\r\n\r\nGET /b HTTP/1.1\r\n"
	       "traceparent: " TP_V00 "\r\n\r\n",
	       "two heads");
	splits(&cfg_std,
	       "POST /a HTTP/1.1\r\nContent-Length: 5\r\n\r\nGET /GET / "
	       "HTTP/1.1\r\n\r\n",
	       "body like a head");
	splits(&cfg_x,
	       "GET /x HTTP/1.0\nUser-Agent: u\nx-request-id: 1\n\nGET /y HTTP/1.1\r\n"
	       "Trace: t\r\n\r\n",
	       "configured names");
	splits(&cfg_std, "\r\n\r\nGET / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n",
	       "empty lines first");
	splits(&cfg_std,
	       "POST / HTTP/1.1\r\nTransfer-Encoding: "
	       "chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n"
	       "GET /c HTTP/1.1\r\ntraceparent: " TP_V00 "\r\n\r\n",
	       "after a chunked body");
}
END_TEST

/* Random streams of two heads, every split. */
START_TEST(split_random)
{
	const struct http_scan_config *cfgs[] = {&cfg_std, &cfg_x};
	struct rng r = {0xabcdefu};
	static char buf[2 * HEAD_MAX + 1];
	unsigned it;

	for (it = 0; it < 300; it++) {
		size_t n = make_head(&r, buf, HEAD_MAX);

		n += make_head(&r, buf + n, HEAD_MAX);
		if (rnd(&r) % 4 == 0)
			mutate(&r, buf, n);
		buf[n] = 0;
		if (strlen(buf) != n)
			continue; /* a NUL from a part: splits() takes strings */
		splits(cfgs[it & 1], buf, "random stream");
	}
}
END_TEST

/* url.path as published, against a reference written out here: the
 * target up to its first '?' or '#', left out unless it is well-formed
 * UTF-8; every length around the 8..16-byte shortcut, both entry points. */
static bool
ref_utf8(const uint8_t *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned c = s[i], k, j;

		if (c < 0x80) {
			i++;
			continue;
		}
		k = c >= 0xc2 && c <= 0xdf   ? 1
		    : c >= 0xe0 && c <= 0xef ? 2
		    : c >= 0xf0 && c <= 0xf4 ? 3
					     : 0;
		if (!k || i + k >= n)
			return false;
		for (j = 1; j <= k; j++)
			if ((s[i + j] & 0xc0) != 0x80)
				return false;
		if ((c == 0xe0 && s[i + 1] < 0xa0) || (c == 0xed && s[i + 1] > 0x9f) ||
		    (c == 0xf0 && s[i + 1] < 0x90) || (c == 0xf4 && s[i + 1] > 0x8f))
			return false;
		i += k + 1;
	}
	return true;
}

static void
check_path(const char *t, size_t n)
{
	struct ctxshim_request r;
	struct ctxshim_ctx c;
	struct trec_attrs_decoded d;
	const struct trec_attr *a;
	size_t want = n, k;

	for (k = 0; k < n; k++)
		if (t[k] == '?' || t[k] == '#') {
			want = k;
			break;
		}
	memset(&r, 0, sizeof(r));
	r.method = "GET";
	r.method_len = 3;
	r.target = t;
	r.target_len = n;
	memset(&c, 0, sizeof(c));
	ctxshim_request_ctx(&c, &r);
	ck_assert_int_eq(trec_attrs_decode(c.attrs, c.attrs_len, 255, &d), 0);
	a = trec_attrs_find(&d, CTXSHIM_KEY_PATH);
	if (want == 0 || !ref_utf8((const uint8_t *)t, want)) {
		ck_assert_msg(a == NULL, "path of '%.*s' published", (int)n, t);
		return;
	}
	ck_assert_msg(a && a->len == want && memcmp(a->val, t, want) == 0,
		      "path of '%.*s': got '%.*s'", (int)n, t, a ? (int)a->len : 0,
		      a ? (const char *)a->val : "");
}

START_TEST(path_attribute)
{
	static const char *const pick[] = {"a",    "?", "#", "\xc3\xa9",
					   "\xff", "/", "%", "\xe2\x82\xac"};
	struct rng r = {0x5151u};
	char t[40];
	unsigned it;

	for (it = 0; it < 20000; it++) {
		size_t n = 1, target = 1 + rnd(&r) % 24;

		t[0] = '/';
		while (n < target) {
			const char *p = rnd(&r) % 4 ? "a" : pick[rnd(&r) % 8];
			size_t l = strlen(p);

			if (n + l > target)
				break;
			memcpy(t + n, p, l);
			n += l;
		}
		check_path(t, n);
	}
	check_path("/small.html", 11);
	check_path("/0123456789abcde", 16);
	check_path("/0123456789abcd?", 16);
	check_path("/0123456#", 9);
}
END_TEST

TEST_SUITE(http_whole_suite)
{
	Suite *s = suite_create("http-whole");
	TCase *tc = tcase_create("differential");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, usual_heads_taken);
	tcase_add_test(tc, other_heads_left);
	tcase_add_test(tc, near_end_lines_taken);
	tcase_add_test(tc, tp_value_bytes);
	tcase_add_test(tc, pairs);
	tcase_add_test(tc, lengths);
	tcase_add_loop_test(tc, random_heads, 0, 3);
	tcase_add_test(tc, split_every_offset);
	tcase_add_test(tc, split_random);
	tcase_add_test(tc, path_attribute);
	suite_add_tcase(s, tc);
	return s;
}
