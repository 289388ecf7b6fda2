/* SPDX-License-Identifier: Apache-2.0 */
/* Edge cases of the fused whole-head path (http_scan_whole(),
 * ctxshim_request_ctx_whole()) that test-http-whole.c does not reach:
 * heads whose last byte is the last byte before an unmapped page (and whose
 * first byte follows one), request-model settings other than the default
 * (query kept, known-method list, sampling, no new traces), configured
 * header attributes mapped out of order, limits at their exact values
 * (max_head_bytes, the 256-byte target, the 512-byte tracestate), and the
 * scanner states a whole head may or may not start from.  Each head is
 * compared with the general path (http_scan_feed() with a capture,
 * ctxshim_request_ctx_capture()): the same state after, flags and context
 * bytes, or the state left untouched. */
#include "test-common.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "http-scan.h"
#include "request-ctx.c"
#include "test-request-stubs.h"

static struct http_scan_config cfg_std, cfg_x, cfg_small;
static int extra_index[CTXSHIM_MAX_HEADER_ATTRS];
static unsigned n_taken, n_left;

/* Three pages: PROT_NONE, data, PROT_NONE. */
static uint8_t *guard_map;
static long page;

static void
setup(void)
{
	unsigned i;

	http_scan_config_init(&cfg_std);
	http_scan_config_init(&cfg_x);
	http_scan_config_init(&cfg_small);
	ck_assert_int_eq(http_scan_config_set_limits(&cfg_small, 64, 128), 0);
	ck_assert_int_eq(http_scan_config_add_header(&cfg_x, "x-request-id", 12, NULL),
			 0);
	ck_assert_int_eq(http_scan_config_add_header(&cfg_x, "User-Agent", 10, NULL),
			 0);
	ck_assert_int_eq(http_scan_config_add_header(&cfg_x, "Trace", 5, NULL), 0);
	/* the longest name the scanner takes: max_name_len 31 */
	ck_assert_int_eq(http_scan_config_add_header(
				 &cfg_x, "x-a-very-long-header-name-31-by", 31, NULL),
			 0);
	memset(&ctxshim_cfg, 0, sizeof(ctxshim_cfg));
	ctxshim_cfg.new_traces = true;
	for (i = 0; i < CTXSHIM_MAX_HEADER_ATTRS; i++)
		extra_index[i] = -1;
	ck_assert_int_eq(ctxshim_request_known_methods(NULL), 0);
	page = sysconf(_SC_PAGESIZE);
	guard_map = mmap(NULL, (size_t)page * 3, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(guard_map, MAP_FAILED);
	ck_assert_int_eq(mprotect(guard_map, (size_t)page, PROT_NONE), 0);
	ck_assert_int_eq(mprotect(guard_map + 2 * page, (size_t)page, PROT_NONE), 0);
}

static void
teardown(void)
{
	munmap(guard_map, (size_t)page * 3);
	(void)ctxshim_request_known_methods(NULL);
}

static unsigned
n_extra_of(const struct http_scan_config *cfg)
{
	return cfg == &cfg_x ? 4 : 0;
}

/* Compare the fused path with the general one for the read buf[0, n) from
 * state *st0 (buf may sit against a guard page). */
static bool
diff_at(const struct http_scan_config *cfg,
	const struct http_scan *st0,
	const uint8_t *buf,
	size_t n,
	const char *what)
{
	static struct http_scan_capture cap;
	struct http_scan sg = *st0, sf = *st0;
	struct http_scan_head h;
	struct ctxshim_ctx cg, cf;
	enum http_scan_status r;
	size_t used = 0;
	int rc;

	memset(&cf, 0x5a, sizeof(cf));
	rc = ctx_whole(&cf, &sf, cfg, buf, n, extra_index);
	if (rc != 0) {
		ck_assert_msg(rc == -EAGAIN, "%s: rc %d", what, rc);
		ck_assert_msg(memcmp(&sf, st0, sizeof(sf)) == 0,
			      "%s: state changed by a head left to the feed", what);
		/* request-ctx.h: "c untouched" */
		{
			struct ctxshim_ctx pat;

			memset(&pat, 0x5a, sizeof(pat));
			ck_assert_msg(memcmp(&pat, &cf, sizeof(cf)) == 0,
				      "%s: context written for a head left to the feed",
				      what);
		}
		/* http_scan_whole() agrees */
		ck_assert_int_eq(http_scan_whole(&sf, cfg, buf, n, &h), -EAGAIN);
		n_left++;
		return false;
	}
	n_taken++;
	memset(&cap, 0, sizeof(cap));
	r = http_scan_feed(&sg, cfg, &cap, buf, n, &used);
	ck_assert_msg(r == HTTP_SCAN_HEAD && used == n,
		      "%s: taken whole, but the feed says status %d after %zu of %zu",
		      what, (int)r, used, n);
	ck_assert_msg(memcmp(&sg, &sf, sizeof(sg)) == 0, "%s: state after differs",
		      what);
	/* http_scan_whole() takes it too, with the capture's values (the
	 * context cannot tell a 55-byte traceparent from its 54-byte trim) */
	{
		struct http_scan sw = *st0;
		unsigned k;

		ck_assert_int_eq(http_scan_whole(&sw, cfg, buf, n, &h), 0);
		ck_assert_msg(memcmp(&sw, &sf, sizeof(sw)) == 0, "%s: whole state",
			      what);
		ck_assert_msg(!h.traceparent == !(http_scan_flags(&sg) &
						  HTTP_SCAN_F_TRACEPARENT) &&
				      h.traceparent_len == cap.traceparent_len &&
				      (!h.traceparent ||
				       memcmp(h.traceparent, cap.traceparent,
					      cap.traceparent_len) == 0),
			      "%s: traceparent %u/%u bytes", what, h.traceparent_len,
			      cap.traceparent_len);
		ck_assert_uint_eq(h.extra_present, cap.extra_present);
		for (k = 0; k < HTTP_SCAN_EXTRA_MAX; k++)
			ck_assert_msg(!(h.extra_present >> k & 1) ||
					      (h.extra_len[k] == cap.extra_len[k] &&
					       memcmp(h.extra[k], cap.extra[k],
						      cap.extra_len[k]) == 0),
				      "%s: extra %u", what, k);
	}
	memset(&cg, 0x5a, sizeof(cg));
	ctxshim_request_ctx_capture(&cg, &cap, http_scan_flags(&sg), extra_index);
	ck_assert_msg(cg.attrs_len == cf.attrs_len &&
			      memcmp(cg.attrs, cf.attrs, cg.attrs_len) == 0,
		      "%s: attributes differ (%u/%u bytes)", what, cg.attrs_len,
		      cf.attrs_len);
	ck_assert_msg(memcmp(&cg, &cf, offsetof(struct ctxshim_ctx, attrs)) == 0,
		      "%s: ids/flags differ", what);
	ck_assert_msg(cg.tracestate_len == cf.tracestate_len &&
			      memcmp(cg.tracestate, cf.tracestate, cg.tracestate_len) ==
				      0,
		      "%s: tracestate differs (%u/%u)", what, cg.tracestate_len,
		      cf.tracestate_len);
	return true;
}

/* s against the end of the data page, then against its start. */
static void
diff_guarded(const struct http_scan_config *cfg,
	     const void *s,
	     size_t n,
	     const char *what)
{
	struct http_scan st;
	uint8_t *end = guard_map + 2 * page, *start = guard_map + page;

	ck_assert_uint_le(n, (size_t)page);
	memset(&st, 0, sizeof(st));
	memcpy(end - n, s, n);
	diff_at(cfg, &st, end - n, n, what);
	memcpy(start, s, n);
	diff_at(cfg, &st, start, n, what);
}

static void
diff_s(const struct http_scan_config *cfg, const char *s, const char *what)
{
	diff_guarded(cfg, s, strlen(s), what);
}

static void
expect_taken_n(const struct http_scan_config *cfg, const char *s, size_t n)
{
	unsigned before = n_taken;

	diff_guarded(cfg, s, n, s);
	ck_assert_msg(n_taken == before + 2, "not taken whole: '%s'", s);
}

static void
expect_left_n(const struct http_scan_config *cfg, const char *s, size_t n)
{
	unsigned before = n_left;

	diff_guarded(cfg, s, n, s);
	ck_assert_msg(n_left == before + 2, "taken whole: '%s'", s);
}

static void
expect_taken(const struct http_scan_config *cfg, const char *s)
{
	expect_taken_n(cfg, s, strlen(s));
}

static void
expect_left(const struct http_scan_config *cfg, const char *s)
{
	expect_left_n(cfg, s, strlen(s));
}

/* Literals with NUL bytes inside. */
#define TAKEN_LIT(cfg, lit) expect_taken_n(cfg, lit, sizeof(lit) - 1)
#define LEFT_LIT(cfg, lit)  expect_left_n(cfg, lit, sizeof(lit) - 1)

static uint64_t
rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ---- tests ---- */

/* Every head length 16..400 and every line layout near the page end: the
 * 16-byte loads must stay inside [buf, buf + len). */
START_TEST(guard_pages)
{
	static const char *const lines[] = {
		"Host: h",
		"traceparent: " TP_V00,
		"tracestate: a=1",
		"A: b",
		"x-request-id: 1",
		"User-Agent: u",
		"Trace: t",
		"content-length: 0",
		"x-a-very-long-header-name-31-by: v",
		"t: x",
		"tr",
		"x",
		"x-a-very-long-header-name-31-b: v",
	};
	uint64_t s = 7;
	char buf[1024];
	unsigned it;

	for (it = 0; it < 20000; it++) {
		size_t n = 0, k, nl = rnd(&s) % 5, tl = 1 + rnd(&s) % 40;
		const struct http_scan_config *cfg = rnd(&s) & 1 ? &cfg_x : &cfg_std;
		bool lf = rnd(&s) & 1;

		ctxshim_cfg.n_header_attrs = n_extra_of(cfg);
		for (k = 0; k < 4; k++)
			extra_index[k] = cfg == &cfg_x ? (int)k : -1;
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "GET /");
		for (k = 1; k < tl; k++)
			buf[n++] = 'a';
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, " HTTP/1.1%s",
				      lf ? "\n" : "\r\n");
		for (k = 0; k < nl; k++)
			n += (size_t)snprintf(
				buf + n, sizeof(buf) - n, "%s%s",
				lines[rnd(&s) % (sizeof(lines) / sizeof(lines[0]))],
				lf ? "\n" : "\r\n");
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s",
				      lf ? "\n" : "\r\n");
		diff_guarded(cfg, buf, n, "guarded");
		/* and each shorter prefix ending in LF */
		for (k = n - 1; k > 0; k--)
			if (buf[k - 1] == '\n') {
				diff_guarded(cfg, buf, k, "guarded prefix");
				break;
			}
	}
	ck_assert_uint_gt(n_taken, 10000);
}
END_TEST

/* The shapes the line loop must stop on or step over without a test of the
 * read's end, each near the end of the data page and its start: mixed LF
 * and CRLF line ends (the empty line CRLF, LF, or CRLF after an LF-only
 * line), traceparent lines whose 55 value bytes hold a CR, bytes >= 0x80 or
 * are one short or long, short 't'/'T' lines within the longest name of
 * the end (a 31-byte configured name starting with 't' and a 1-byte one),
 * obs-fold lines, and random bytes (NUL, CR, LF, SP, HTAB, ':', >= 0x80)
 * written over any of them. */
START_TEST(guard_shapes)
{
	static const char *const lines[] = {
		"traceparent: " TP_V00,
		"traceparent:" TP_V00,
		"TraceParent: \t" TP_V00 " ",
		"traceparent: " TP_V00 "x",
		"traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
		"traceparent: 00-4bf92f3577b34da6\ra3ce929d0e0e4736-00f067aa0ba902b7-0",
		"traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0\r",
		"traceparent: 00-4bf92f3577b34da6\x80\xff\xce"
		"929d0e0e4736-00f067aa0ba902b7-01",
		"traceparent:",
		"traceparent: ",
		"traceparent",
		"traceparen",
		"TRACEPAR",
		"traceparX",
		"tracepar:",
		"tracestate: a=1",
		"Tracestate:b=2 ",
		"tracestat",
		"T:",
		"t",
		"T",
		"t:",
		"t: v",
		"tr",
		"content-length: 0",
		"Content-Length: 7 ",
		"trace-id-header-of-31-bytes-abc: v",
		"TRACE-ID-HEADER-OF-31-BYTES-ABC:",
		"trace-id-header-of-31-bytes-ab: v",
		"trace-id-header-of-31-bytes-abcd: v",
		"x-request-id: 1",
		"A: \x80\xff",
		"A: b\rc",
		" folded",
		"\tfolded",
		"\x80x: y",
		"h",
	};
	static const char junk[] = "\r\n \t:\x80\xffTt-";
	static struct http_scan_config cfg_t;
	const struct http_scan_config *cfgs[] = {&cfg_std, &cfg_x, &cfg_t};
	const unsigned n_extra[] = {0, 4, 3};
	uint64_t s = 11;
	char buf[1024];
	unsigned it;

	http_scan_config_init(&cfg_t);
	ck_assert_int_eq(http_scan_config_add_header(
				 &cfg_t, "trace-id-header-of-31-bytes-abc", 31, NULL),
			 0);
	ck_assert_int_eq(http_scan_config_add_header(&cfg_t, "t", 1, NULL), 0);
	ck_assert_int_eq(http_scan_config_add_header(&cfg_t, "x-request-id", 12, NULL),
			 0);
	/* the 16-byte heads */
	expect_taken(&cfg_std, "GET / HTTP/1.1\n\n");
	expect_taken(&cfg_t, "GET / HTTP/1.0\n\n");
	expect_left(&cfg_std, "GET / HTTP/1.1\r\n");
	for (it = 0; it < 30000; it++) {
		size_t n = 0, k, nl = rnd(&s) % 6, tl = 1 + rnd(&s) % 40;
		unsigned ci = (unsigned)(rnd(&s) % 3), mut = (unsigned)(rnd(&s) % 4);
		const struct http_scan_config *cfg = cfgs[ci];
		size_t rl_end;

		ctxshim_cfg.n_header_attrs = n_extra[ci];
		for (k = 0; k < CTXSHIM_MAX_HEADER_ATTRS; k++)
			extra_index[k] = k < n_extra[ci] ? (int)k : -1;
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "GET /");
		for (k = 1; k < tl; k++)
			buf[n++] = 'a';
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, " HTTP/1.%c%s",
				      rnd(&s) & 1 ? '1' : '0',
				      rnd(&s) & 1 ? "\n" : "\r\n");
		rl_end = n;
		for (k = 0; k < nl; k++)
			n += (size_t)snprintf(
				buf + n, sizeof(buf) - n, "%s%s",
				lines[rnd(&s) % (sizeof(lines) / sizeof(lines[0]))],
				rnd(&s) & 1 ? "\n" : "\r\n");
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s",
				      rnd(&s) & 1 ? "\n" : "\r\n");
		/* a few bytes of a header line or the end written over */
		while (mut-- > 1 && n > rl_end) {
			k = rl_end + rnd(&s) % (n - rl_end);
			buf[k] =
				rnd(&s) & 3 ? junk[rnd(&s) % (sizeof(junk) - 1)] : '\0';
		}
		diff_guarded(cfg, buf, n, "shapes");
		/* each shorter prefix ending in LF, and one ending anywhere */
		for (k = n - 1; k > 0; k--)
			if (buf[k - 1] == '\n')
				diff_guarded(cfg, buf, k, "shapes prefix");
		k = 16 + rnd(&s) % (n - 15);
		diff_guarded(cfg, buf, k, "shapes cut");
	}
	ck_assert_uint_gt(n_taken, 10000);
}
END_TEST

/* The request model's other settings. */
START_TEST(model_settings)
{
	static const char *const heads[] = {
		"GET /small.html HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /small.html?q=1 HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /0123456789abcde HTTP/1.1\r\n\r\n",
		"GET /01234567?abcde HTTP/1.1\r\n\r\n",
		"FOO /x HTTP/1.1\r\ntraceparent: " TP_V00 "\r\n\r\n",
		"PROPFIND /dav HTTP/1.1\r\ntraceparent: " TP_V00 "\r\ntracestate: "
		"a=1\r\n\r\n",
		"ABCDEFGHIJKLMNOPQRST /x HTTP/1.1\r\n\r\n",
		"GET http://h:80/abs/path?x HTTP/1.1\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\n\r\n",
		"GET /caf\xc3\xa9?x HTTP/1.1\r\n\r\n",
		"GET /\xff\xfe HTTP/1.1\r\n\r\n",
		"POST /p HTTP/1.1\r\ntraceparent: 00-00000000000000000000000000000000-"
		"00f067aa0ba902b7-01\r\n\r\n",
	};
	unsigned i, mode;

	for (mode = 0; mode < 16; mode++) {
		ctxshim_cfg.url_query = mode & 1;
		ctxshim_cfg.new_traces = !(mode & 2);
		ctxshim_cfg.sample_new = mode & 4;
		ck_assert_int_eq(ctxshim_request_known_methods(
					 mode & 8 ? "GET, FOO,PROPFIND" : NULL),
				 0);
		for (i = 0; i < sizeof(heads) / sizeof(heads[0]); i++)
			expect_taken(&cfg_std, heads[i]);
	}
}
END_TEST

/* Configured attributes mapped to scanner indexes out of order, some not
 * looked for, with values around 255/256 bytes. */
START_TEST(attrs_mapping)
{
	static const int maps[][CTXSHIM_MAX_HEADER_ATTRS] = {
		{3, 2, 1, 0, -1, -1, -1, -1},
		{-1, 0, -1, 2, -1, -1, -1, -1},
		{1, 1, 3, -1, -1, -1, -1, -1},
	};
	char val[300], buf[1024];
	unsigned m, l;

	memset(val, 'v', sizeof(val));
	val[100] = '\xc3';
	val[101] = '\xa9';
	for (m = 0; m < 3; m++) {
		memcpy(extra_index, maps[m], sizeof(extra_index));
		ctxshim_cfg.n_header_attrs = 4;
		for (l = 0; l < 290; l += (l < 250 ? 37 : 1)) {
			snprintf(buf, sizeof(buf),
				 "GET /a HTTP/1.1\r\nUser-Agent: %.*s\r\n"
				 "x-a-very-long-header-name-31-by:  %.*s \r\n"
				 "X-Request-Id: id\r\n\r\n",
				 (int)l, val, (int)(l / 2), val);
			/* the last header line is shorter than the longest
			 * name: left to the feed (the same as its own fast
			 * lines), so only differential here */
			diff_s(&cfg_x, buf, "attrs mapping");
			snprintf(buf, sizeof(buf),
				 "GET /a HTTP/1.1\r\nUser-Agent: %.*s\r\n"
				 "x-a-very-long-header-name-31-by:  %.*s \r\n"
				 "X-Request-Id: id\r\nHost: "
				 "a-long-enough-host-name.example\r\n\r\n",
				 (int)l, val, (int)(l / 2), val);
			expect_taken(&cfg_x, buf);
		}
	}
}
END_TEST

/* A head of exactly max_head_bytes is taken, one byte more is not (and the
 * feed marks it oversized). */
START_TEST(max_head_exact)
{
	char buf[256];
	size_t n;

	for (n = 40; n <= 70; n++) {
		size_t pad = n - strlen("GET / HTTP/1.1\r\nA: \r\n\r\n");

		snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nA: %.*s\r\n\r\n",
			 (int)pad,
			 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
			 "xx");
		ck_assert_uint_eq(strlen(buf), n);
		if (n <= 64)
			expect_taken(&cfg_small, buf);
		else
			expect_left(&cfg_small, buf);
	}
}
END_TEST

/* Target 255..258 bytes, tracestate values 510..514 bytes (with CR). */
START_TEST(limits_exact)
{
	char val[600], buf[1200];
	size_t l;

	memset(val, 'a', sizeof(val));
	for (l = 250; l < 262; l++) {
		snprintf(buf, sizeof(buf), "GET /%.*s HTTP/1.1\r\n\r\n", (int)l, val);
		expect_taken(&cfg_std, buf);
	}
	for (l = 505; l < 516; l++) {
		snprintf(buf, sizeof(buf),
			 "GET / HTTP/1.1\r\ntraceparent: " TP_V00
			 "\r\ntracestate: a=%.*s\r\n\r\n",
			 (int)l - 2, val);
		diff_s(&cfg_std, buf, "tracestate limit");
		snprintf(buf, sizeof(buf),
			 "GET / HTTP/1.1\r\ntraceparent: " TP_V00
			 "\r\ntracestate: a=%.*s\n\n",
			 (int)l - 2, val);
		diff_s(&cfg_std, buf, "tracestate limit LF");
	}
}
END_TEST

/* Scanner states a whole head must not start from (and one it may). */
START_TEST(start_states)
{
	static const char *const before[] = {
		"\r\n", /* an empty line before a request line */
		"\n",   /* bare LF */
		"GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\n",   /* in a body */
		"GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab", /* in a body */
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET / HTT",                                     /* in a head */
		"\x16\x03\x01",                                  /* TLS: gave up */
		"GET / HTTP/1.1\r\nContent-Length: 2\r\n\r\nab", /* body done */
		"GET / HTTP/1.1\r\nA: b\r\n\r\n",                /* plain */
	};
	static const char head[] =
		"GET /next HTTP/1.1\r\ntraceparent: " TP_V00 "\r\n\r\n";
	static struct http_scan_capture cap;
	unsigned i;

	for (i = 0; i < sizeof(before) / sizeof(before[0]); i++) {
		struct http_scan st;
		size_t used = 0, off = 0, n = strlen(before[i]);
		uint8_t *b = guard_map + 2 * page - (sizeof(head) - 1);

		memset(&st, 0, sizeof(st));
		memset(&cap, 0, sizeof(cap));
		while (off < n) {
			enum http_scan_status r = http_scan_feed(
				&st, &cfg_std, &cap, before[i] + off, n - off, &used);

			off += used;
			if (r == HTTP_SCAN_GAVE_UP)
				break;
		}
		memcpy(b, head, sizeof(head) - 1);
		diff_at(&cfg_std, &st, b, sizeof(head) - 1, before[i]);
	}
}
END_TEST

/* Heads the feed reports differently from a plain one (a pipelined head, a
 * body, a bare CR, NUL bytes, odd methods and targets). */
START_TEST(odd_heads)
{
	expect_left(&cfg_std, "GET / HTTP/1.1\r\n\r\nGET /2 HTTP/1.1\r\n\r\n");
	expect_left(&cfg_std, "POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nab\n");
	expect_left(&cfg_std, "GET / HTTP/1.1\r\nA: b\r\n\r\r\n");
	expect_left(&cfg_std, "GET / HTTP/1.1\r\n\rA: b\r\n\r\n");
	LEFT_LIT(&cfg_std, "GET / HTTP/1.1\r\n\x00"
			   "A: b\r\n\r\n");
	expect_left(&cfg_std, "GET / HTTP/1.1\r\nContent-Length: 1\r\n"
			      "Transfer-Encoding: chunked\r\n\r\n");
	expect_left(&cfg_std, "GET / HTTP/1.1\r\ntransfer-encoding: gzip\r\n\r\n");
	expect_left(&cfg_std, "GET / HTTP/1.1\r\ntraceparent: " TP_V00 "\r\n"
			      " folded\r\n\r\n");
	TAKEN_LIT(&cfg_std, "GET / HTTP/1.1\r\nA: \x00\x01\x02\r\n\r\n");
	TAKEN_LIT(&cfg_std, "GET / HTTP/1.1\r\ntraceparent: " TP_V00 "\x00\r\n\r\n");
	TAKEN_LIT(&cfg_std, "GET / HTTP/1.1\r\ntraceparent: \x00" TP_V00 "\r\n\r\n");
	TAKEN_LIT(&cfg_std, "GET / HTTP/1.1\r\ntracestate: a=\x00\r\n\r\n");
	expect_taken(&cfg_std, "GET / HTTP/1.1\r\ntraceparent :" TP_V00 "\r\n\r\n");
	expect_taken(&cfg_std, "GET / HTTP/1.1\r\ntracestate : a=1\r\n\r\n");
	expect_taken(&cfg_std, "GET / HTTP/1.1\r\ncontent-length : 5\r\n\r\n");
	expect_taken(&cfg_std, "POST / HTTP/1.1\r\nContent-Length: 0005\r\n\r\n");
	expect_taken(&cfg_std,
		     "POST / HTTP/1.1\r\nContent-Length: 72057594037927935\r\n\r\n");
	expect_taken(&cfg_std, "GET / HTTP/1.1\r\nA: b\r\r\n\r\n");
	expect_taken(&cfg_std, "GET / HTTP/1.0\r\ntraceparent:\t" TP_V00 "\t\r\n\n");
	expect_taken(&cfg_std, "A / HTTP/1.1\r\n\r\n");
	expect_taken(&cfg_std, "A-_ /x HTTP/1.1\r\n\r\n");
	expect_left(&cfg_std, "A1 /x HTTP/1.1\r\n\r\n");
	expect_left(&cfg_std, "GET\t/x HTTP/1.1\r\n\r\n");
	expect_left(&cfg_std, "GET /x\tHTTP/1.1\r\n\r\n");
	expect_left(&cfg_std, "GET /x HTTP/1.1\r\r\n\r\n");
	expect_left(&cfg_std, "GET /x HTTP/1.1\r\n");
	expect_left(&cfg_std, "GET /x HTTP/1.1\n");
}
END_TEST

TEST_SUITE(http_whole_edge_suite)
{
	Suite *s = suite_create("http-whole-edge");
	TCase *tc = tcase_create("edge");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, guard_pages);
	tcase_add_test(tc, guard_shapes);
	tcase_add_test(tc, model_settings);
	tcase_add_test(tc, attrs_mapping);
	tcase_add_test(tc, max_head_exact);
	tcase_add_test(tc, limits_exact);
	tcase_add_test(tc, start_states);
	tcase_add_test(tc, odd_heads);
	suite_add_tcase(s, tc);
	return s;
}
