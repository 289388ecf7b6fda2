/* SPDX-License-Identifier: Apache-2.0 */
/* W3C Trace Context conformance, Level 1 and Level 2, of a service with no
 * tracing code (test/helpers/w3c-service.c: libmicrohttpd in, libcurl out)
 * run under libctxshim.so.  Written from the spec text (Trace Context
 * Level 2, "Trace Context HTTP Headers Format" and "Processing Model"):
 * the test POSTs [{"url": <callback>, "arguments": []}, ...] to the
 * service with the trace headers of each case, over plain sockets so that
 * the bytes are exactly the case's, and http-sink (the callback server)
 * reports the header lines each callback carried.
 *
 * Terms used below: "continue" = same trace-id, a new parent-id, the
 * flags kept (unknown bits zero), tracestate forwarded; "restart" = a new
 * trace-id and parent-id, tracestate dropped. */
#include "test-common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define TIMEOUT   30000
#define MAX_HDR   32
#define MAX_CB    4
#define TRACE     "0af7651916cd43dd8448eb211c80319c"
#define PARENT    "b7ad6b7169203331"
#define TP(flags) "00-" TRACE "-" PARENT "-" flags

static struct test_child sink, service;
static unsigned sink_port, service_port;

struct req {
	char hdr[MAX_HDR][2048];
	int n_hdr;
};

static unsigned
start(struct test_child *c,
      const char *name,
      const char *opt,
      char *const env[],
      bool preload)
{
	char path[4096], line[256];
	char *argv[] = {path, (char *)opt, NULL};

	snprintf(path, sizeof(path), "%s/%s", test_env_path("HELPER_DIR"), name);
	test_child_start(c, argv, env, preload);
	test_child_expect(c, "READY ", line, sizeof(line), TIMEOUT);
	return (unsigned)strtoul(line + 6, NULL, 10);
}

static void
stop(struct test_child *c)
{
	int st = test_child_finish(c, TIMEOUT);

	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "helper status %#x", st);
}

/* The service under the shim (mode: NULL or a w3c-service option). */
static void
up(const char *mode, char *const env[])
{
	sink_port = start(&sink, "http-sink", NULL, NULL, false);
	service_port = start(&service, "w3c-service", mode, env, true);
}

static void
down(void)
{
	stop(&service);
	stop(&sink);
}

static void
sink_read(struct req *r)
{
	char line[4096];

	memset(r, 0, sizeof(*r));
	test_child_expect(&sink, "REQ ", line, sizeof(line), TIMEOUT);
	for (;;) {
		test_child_readline(&sink, line, sizeof(line), TIMEOUT);
		if (strcmp(line, "END") == 0)
			return;
		if (strncmp(line, "H ", 2) == 0) {
			ck_assert_int_lt(r->n_hdr, MAX_HDR);
			snprintf(r->hdr[r->n_hdr++], sizeof(r->hdr[0]), "%.2047s",
				 line + 2);
		}
	}
}

/* POST the case's header lines (each ending in CRLF) to the service with n
 * callbacks; the callbacks it made, in order, go to cb[]. */
static void
call(const char *headers, int n, struct req *cb)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	char body[1024], head[65536], resp[4096];
	size_t blen = 0, len = 0, off = 0;
	int fd, i;

	blen += (size_t)snprintf(body, sizeof(body), "[");
	for (i = 0; i < n; i++)
		blen += (size_t)snprintf(body + blen, sizeof(body) - blen,
					 "%s{\"url\": \"http://127.0.0.1:%u/cb/%d\", "
					 "\"arguments\": []}",
					 i ? ", " : "", sink_port, i);
	blen += (size_t)snprintf(body + blen, sizeof(body) - blen, "]");
	len = (size_t)snprintf(head, sizeof(head),
			       "POST /test HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n"
			       "Content-Type: application/json\r\n%s"
			       "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
			       service_port, headers, blen, body);
	ck_assert_uint_lt(len, sizeof(head));

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	sin.sin_port = htons((uint16_t)service_port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	while (off < len) {
		ssize_t w = write(fd, head + off, len - off);

		ck_assert_int_gt(w, 0);
		off += (size_t)w;
	}
	off = 0;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t r;

		ck_assert_msg(poll(&p, 1, TIMEOUT) == 1, "no answer from w3c-service");
		r = read(fd, resp + off, sizeof(resp) - 1 - off);
		if (r < 0 && errno == EINTR)
			continue;
		ck_assert_int_ge(r, 0);
		if (r == 0 || off + (size_t)r == sizeof(resp) - 1)
			break;
		off += (size_t)r;
	}
	resp[off] = '\0';
	close(fd);
	ck_assert_msg(strncmp(resp, "HTTP/1.1 200", 12) == 0,
		      "service answered: %.200s", resp);
	for (i = 0; i < n; i++)
		sink_read(&cb[i]);
}

/* Fields named name (any case); the value of the last one. */
static int
count(const struct req *r, const char *name, const char **value)
{
	size_t len = strlen(name);
	int i, n = 0;

	if (value)
		*value = NULL;
	for (i = 0; i < r->n_hdr; i++) {
		if (strncasecmp(r->hdr[i], name, len) == 0 && r->hdr[i][len] == ':') {
			const char *v = r->hdr[i] + len + 1;

			while (*v == ' ' || *v == '\t')
				v++;
			if (value)
				*value = v;
			n++;
		}
	}
	return n;
}

static bool
is_lchex(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

struct tp {
	char trace[33], parent[17];
	unsigned flags;
};

/* Exactly one traceparent, a valid version-00 value (what a participant
 * sends: lowercase, 55 characters, no zero ids, no unknown flag bits). */
static void
traceparent(const struct req *r, struct tp *t)
{
	const char *v;

	ck_assert_int_eq(count(r, "traceparent", &v), 1);
	ck_assert_msg(strlen(v) == 55 && strncmp(v, "00-", 3) == 0 && v[35] == '-' &&
			      v[52] == '-' && is_lchex(v + 3, 32) &&
			      is_lchex(v + 36, 16) && is_lchex(v + 53, 2),
		      "not a valid traceparent: '%s'", v);
	memcpy(t->trace, v + 3, 32);
	t->trace[32] = '\0';
	memcpy(t->parent, v + 36, 16);
	t->parent[16] = '\0';
	t->flags = (unsigned)strtoul(v + 53, NULL, 16);
	ck_assert_str_ne(t->trace, "00000000000000000000000000000000");
	ck_assert_str_ne(t->parent, "0000000000000000");
	ck_assert_msg((t->flags & ~3u) == 0, "unknown flag bits sent: %02x", t->flags);
}

static void
expect_continue(const struct req *r, unsigned flags)
{
	struct tp t;

	traceparent(r, &t);
	ck_assert_str_eq(t.trace, TRACE);
	ck_assert_str_ne(t.parent, PARENT);
	ck_assert_uint_eq(t.flags, flags);
}

static void
expect_restart(const struct req *r)
{
	struct tp t;

	traceparent(r, &t);
	ck_assert_str_ne(t.trace, TRACE);
	ck_assert_str_ne(t.parent, PARENT);
	/* Our trace-ids are random: the Level 2 random flag says so. */
	ck_assert_uint_eq(t.flags & 2u, 2u);
	ck_assert_int_eq(count(r, "tracestate", NULL), 0);
}

/* ---- traceparent ------------------------------------------------------------ */

/* Values every participant must reject: the trace restarts and the
 * tracestate sent with it is dropped. */
static const char *const invalid_tp[] = {
	"ff-" TRACE "-" PARENT "-01",  /* version ff is invalid */
	"00-" TRACE "-" PARENT "-01-", /* v00 is exactly 55 chars */
	"00-" TRACE "-" PARENT "-01.", /* length 56 */
	"00-" TRACE "-" PARENT "-01-what-the-future-will-be-like",
	"00-" TRACE "-" PARENT "-0",                         /* length 54 */
	"00-0af7651916cd43dd8448eb211c80319-" PARENT "-01",  /* short trace-id */
	"00-" TRACE "-b7ad6b716920333-01",                   /* short parent-id */
	"00-0AF7651916CD43DD8448EB211C80319C-" PARENT "-01", /* uppercase */
	"00-" TRACE "-B7AD6B7169203331-01",
	"00-" TRACE "-" PARENT "-0A",
	"0A-" TRACE "-" PARENT "-01",
	"00-00000000000000000000000000000000-" PARENT "-01", /* zero trace-id */
	"00-" TRACE "-0000000000000000-01",                  /* zero parent-id */
	"00-0af7651916cd43dd8448eb211c80319g-" PARENT "-01", /* illegal chars */
	"00-" TRACE "-b7ad6b716920333.-01",
	"00-" TRACE "-" PARENT "-0g",
	"00-" TRACE "-" PARENT "-.1",
	"00-" TRACE "-" PARENT "- 1",
	"00_" TRACE "-" PARENT "-01", /* wrong separators */
	"00-" TRACE "_" PARENT "-01",
	"00-" TRACE "-" PARENT "_01",
	"0-" TRACE "-" PARENT "-01", /* version not 2 hex digits */
	"000-" TRACE "-" PARENT "-01",
	".0-" TRACE "-" PARENT "-01",
	"cc-" TRACE "-" PARENT "-01.what-the-future", /* future: '-' after flags */
	"cc-" TRACE "-" PARENT "-0",                  /* future: shorter than 55 */
	"cc-" TRACE "-" PARENT,
	TRACE "-" PARENT "-01", /* no version */
	"00-" TRACE "-" PARENT, /* no flags */
	"",
};

START_TEST(test_invalid_traceparent)
{
	char headers[512];
	struct req cb[1];

	snprintf(headers, sizeof(headers), "traceparent: %s\r\ntracestate: foo=1\r\n",
		 invalid_tp[_i]);
	up(NULL, NULL);
	call(headers, 1, cb);
	expect_restart(&cb[0]);
	down();
}
END_TEST

/* Valid values: the trace continues, the flags as received minus unknown
 * bits (version 00 keeps its 8 bits on input; we send only the ones we
 * know), a higher version downgraded to 00. */
static const struct {
	const char *value;
	unsigned flags;
} valid_tp[] = {
	{TP("00"), 0x00},
	{TP("01"), 0x01},
	{TP("02"), 0x02}, /* Level 2 random flag, kept */
	{TP("03"), 0x03},
	{TP("09"), 0x01},
	{TP("ff"), 0x03},
	{"cc-" TRACE "-" PARENT "-01", 0x01},
	{"cc-" TRACE "-" PARENT "-01-what-the-future-will-be-like", 0x01},
	{"cc-" TRACE "-" PARENT "-03-", 0x03},
	{"01-" TRACE "-" PARENT "-02", 0x02},
};

START_TEST(test_valid_traceparent)
{
	char headers[512];
	const char *v;
	struct req cb[1];

	snprintf(headers, sizeof(headers), "traceparent: %s\r\ntracestate: foo=1\r\n",
		 valid_tp[_i].value);
	up(NULL, NULL);
	call(headers, 1, cb);
	expect_continue(&cb[0], valid_tp[_i].flags);
	ck_assert_int_eq(count(&cb[0], "tracestate", &v), 1);
	ck_assert_str_eq(v, "foo=1");
	down();
}
END_TEST

/* Header names are case-insensitive; other names are other headers. */
START_TEST(test_header_name)
{
	static const struct {
		const char *name;
		bool valid;
	} names[] = {
		{"traceparent", true},    {"TraceParent", true},
		{"TRACEPARENT", true},    {"tRaCePaReNt", true},
		{"trace-parent", false},  {"trace.parent", false},
		{"traceparent-x", false},
	};
	char headers[512];
	struct req cb[1];

	snprintf(headers, sizeof(headers), "%s: %s\r\nTraceState: foo=1\r\n",
		 names[_i].name, TP("01"));
	up(NULL, NULL);
	call(headers, 1, cb);
	if (names[_i].valid) {
		expect_continue(&cb[0], 0x01);
		ck_assert_int_eq(count(&cb[0], "tracestate", NULL), 1);
	} else {
		expect_restart(&cb[0]);
	}
	down();
}
END_TEST

/* Optional whitespace around the value (RFC 9110 OWS: SP and HTAB). */
START_TEST(test_ows)
{
	static const char *const ows[][2] = {
		{" ", " "},
		{"\t", "\t"},
		{"", ""},
		{"  \t ", " \t "},
	};
	char headers[512];
	struct req cb[1];

	snprintf(headers, sizeof(headers), "traceparent:%s%s%s\r\n", ows[_i][0],
		 TP("01"), ows[_i][1]);
	up(NULL, NULL);
	call(headers, 1, cb);
	expect_continue(&cb[0], 0x01);
	down();
}
END_TEST

/* Two traceparent fields are not a list: invalid, restart. */
START_TEST(test_duplicated_traceparent)
{
	static const char *const second[] = {
		TP("01"),
		"00-" TRACE "-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	};
	char headers[512];
	struct req cb[1];

	snprintf(headers, sizeof(headers),
		 "traceparent: %s\r\ntraceparent: %s\r\n"
		 "tracestate: foo=1\r\n",
		 TP("01"), second[_i]);
	up(NULL, NULL);
	call(headers, 1, cb);
	expect_restart(&cb[0]);
	down();
}
END_TEST

/* No traceparent: a new trace (tracestate alone is discarded), the same
 * new trace for every callback of the request, another for the next
 * request. */
START_TEST(test_missing_traceparent)
{
	struct req cb[3], cb2[1];
	struct tp t[3], t2;
	int i;

	up(NULL, NULL);
	call("tracestate: foo=1\r\n", 3, cb);
	for (i = 0; i < 3; i++) {
		expect_restart(&cb[i]);
		traceparent(&cb[i], &t[i]);
		ck_assert_str_eq(t[i].trace, t[0].trace);
	}
	ck_assert_str_ne(t[0].parent, t[1].parent);
	ck_assert_str_ne(t[1].parent, t[2].parent);
	ck_assert_str_ne(t[0].parent, t[2].parent);
	call("", 1, cb2);
	expect_restart(&cb2[0]);
	traceparent(&cb2[0], &t2);
	ck_assert_str_ne(t2.trace, t[0].trace);
	down();
}
END_TEST

/* Several callbacks while handling one request: each its own parent-id
 * (a span per outgoing call), all in the incoming trace; the same whether
 * the service makes the calls one by one, through the multi interface, on
 * one reused handle, or handles connections on their own threads. */
START_TEST(test_several_callbacks)
{
	static const char *const modes[] = {NULL, "--multi", "--reuse", "--threads"};
	struct req cb[MAX_CB];
	struct tp t[MAX_CB];
	const char *v;
	int i, k;

	up(modes[_i], NULL);
	call("traceparent: " TP("02") "\r\ntracestate: foo=1,bar=2\r\n", MAX_CB, cb);
	for (i = 0; i < MAX_CB; i++) {
		expect_continue(&cb[i], 0x02);
		traceparent(&cb[i], &t[i]);
		for (k = 0; k < i; k++)
			ck_assert_str_ne(t[i].parent, t[k].parent);
		ck_assert_int_eq(count(&cb[i], "tracestate", &v), 1);
		ck_assert_str_eq(v, "foo=1,bar=2");
		/* the service's own header is still there, once */
		ck_assert_int_eq(count(&cb[i], "Content-Type", &v), 1);
		ck_assert_str_eq(v, "application/json");
	}
	down();
}
END_TEST

/* ---- tracestate ------------------------------------------------------------- */

/* "k<first>=v<first>,..." (n members) into s (no heap: a failed check
 * must not leak under CK_FORK=no). */
static char *
members(char *s, int first, int n)
{
	int i;

	s[0] = '\0';
	for (i = 0; i < n; i++)
		sprintf(s + strlen(s), "%sk%d=v%d", i ? "," : "", first + i, first + i);
	return s;
}

/* One incoming request with a valid traceparent and these tracestate
 * lines; expect: the tracestate value sent, or NULL for none. */
static void
tracestate_case(const char *const *lines, int n, const char *expect)
{
	static char headers[65536];
	const char *v;
	struct req cb[1];
	int i;

	strcpy(headers, "traceparent: " TP("01") "\r\n");
	for (i = 0; i < n; i++) {
		ck_assert_uint_lt(strlen(headers) + strlen(lines[i]) + 16, 65536);
		strcat(headers, "tracestate: ");
		strcat(headers, lines[i]);
		strcat(headers, "\r\n");
	}
	up(NULL, NULL);
	call(headers, 1, cb);
	/* A bad tracestate never invalidates the traceparent. */
	expect_continue(&cb[0], 0x01);
	if (expect) {
		ck_assert_int_eq(count(&cb[0], "tracestate", &v), 1);
		ck_assert_str_eq(v, expect);
	} else {
		ck_assert_int_eq(count(&cb[0], "tracestate", NULL), 0);
	}
	down();
}

/* Several lines are one list, combined in the order received. */
START_TEST(test_tracestate_combined)
{
	const char *a[] = {"foo=1", "bar=2"};
	const char *b[] = {"bar=2", "foo=1"};
	const char *c[] = {"foo=1,bar=2", "baz=3", "qux=4,quux=5"};

	if (_i == 0)
		tracestate_case(a, 2, "foo=1,bar=2");
	else if (_i == 1)
		tracestate_case(b, 2, "bar=2,foo=1");
	else
		tracestate_case(c, 3, "foo=1,bar=2,baz=3,qux=4,quux=5");
}
END_TEST

/* OWS around members, empty members, an empty header. */
START_TEST(test_tracestate_whitespace)
{
	static const struct {
		const char *line;
		const char *expect;
	} cases[] = {
		{"foo=1 , bar=2", "foo=1,bar=2"}, {"foo=1\t,\tbar=2", "foo=1,bar=2"},
		{"foo=1,,bar=2", "foo=1,bar=2"},  {"foo=1, ,bar=2,", "foo=1,bar=2"},
		{"foo=bar baz", "foo=bar baz"}, /* spaces inside a value */
		{"foo=bar ", "foo=bar"},        /* trailing OWS is not the value */
	};
	const char *l[] = {cases[_i].line};

	tracestate_case(l, 1, cases[_i].expect);
}
END_TEST

START_TEST(test_tracestate_empty)
{
	char *headers = "traceparent: " TP("01") "\r\ntracestate:\r\n";
	const char *v;
	struct req cb[1];

	up(NULL, NULL);
	call(headers, 1, cb);
	expect_continue(&cb[0], 0x01);
	/* Empty tracestate must be accepted; sending none is the same list. */
	if (count(&cb[0], "tracestate", &v) == 1)
		ck_assert_str_eq(v, "");
	else
		ck_assert_int_eq(count(&cb[0], "tracestate", NULL), 0);
	down();
}
END_TEST

/* At most 32 members, counted over all lines. */
START_TEST(test_tracestate_limits)
{
	static char m32[512], m33[512], h1[512], h2[512], h3[512];
	const char *l32[] = {members(m32, 0, 32)}, *l33[] = {members(m33, 0, 33)};
	const char *split32[] = {members(h1, 0, 16), members(h2, 16, 16)};
	const char *split33[] = {h1, members(h3, 16, 17)};

	switch (_i) {
	case 0:
		tracestate_case(l32, 1, m32);
		break;
	case 1:
		tracestate_case(l33, 1, NULL);
		break;
	case 2:
		tracestate_case(split32, 2, m32);
		break;
	default:
		tracestate_case(split33, 2, NULL);
		break;
	}
}
END_TEST

/* More header lines than the library hooks keep (HOOK_HTTP_TS_LINES_MAX,
 * 64): with a member on each, more than 32 members, so the list goes and
 * the trace continues; lines of empty members count for nothing, however
 * many (W3C allows them), so the members around them are kept. */
START_TEST(test_tracestate_many_lines)
{
	static char m[70][16];
	const char *l[70];
	int i;

	for (i = 0; i < 70; i++) {
		if (_i == 0 || i == 0 || i == 69)
			members(m[i], i, 1);
		else
			strcpy(m[i], i % 2 ? "," : " , ");
		l[i] = m[i];
	}
	tracestate_case(l, 70, _i == 0 ? NULL : "k0=v0,k69=v69");
}
END_TEST

/* Any member against the grammar discards the whole list (and only the
 * list: the trace continues). */
START_TEST(test_tracestate_invalid)
{
	static const char *const cases[] = {
		"foo=bar=baz", "foo=,bar=3", "@foo=1,bar=2", "FOO=1",
		"foo=1,bar",   "foo",        "=1",           "foo=1,=2",
		"fo o=1",      "foo=\x7f",   "foo=a,b=\x01", "foo=1;bar=2",
	};
	const char *l[] = {cases[_i]};

	tracestate_case(l, 1, NULL);
}
END_TEST

/* Level 2 keys: a digit may start a key, '@' may appear anywhere after
 * the first character, up to 256 characters; values up to 256. */
START_TEST(test_tracestate_keys)
{
	char key256[300], key257[300], val256[300], val257[300], line[700];
	const char *l[] = {line};

	memset(key256, 'k', 256);
	key256[256] = '\0';
	memset(key257, 'k', 257);
	key257[257] = '\0';
	memset(val256, 'v', 256);
	val256[256] = '\0';
	memset(val257, 'v', 257);
	val257[257] = '\0';
	switch (_i) {
	case 0:
		snprintf(line, sizeof(line), "1foo=bar,foo@bar=1,t@s=2,a-b_c*d/e=3");
		tracestate_case(l, 1, line);
		break;
	case 1:
		snprintf(line, sizeof(line), "%s=1", key256);
		tracestate_case(l, 1, line);
		break;
	case 2:
		snprintf(line, sizeof(line), "%s=1", key257);
		tracestate_case(l, 1, NULL);
		break;
	case 3:
		snprintf(line, sizeof(line), "foo=%s", val256);
		tracestate_case(l, 1, line);
		break;
	default:
		snprintf(line, sizeof(line), "foo=%s", val257);
		tracestate_case(l, 1, NULL);
		break;
	}
}
END_TEST

/* Longer than the 512 characters we must propagate: whole entries go,
 * those over 128 characters first, then from the right. */
START_TEST(test_tracestate_long)
{
	char e[12][160], in[4096] = "", expect[4096] = "";
	const char *l[] = {in};
	int i, n = _i == 0 ? 5 : 12, keep = _i == 0 ? 3 : 10;

	for (i = 0; i < n; i++) {
		int len = _i == 0 ? 150 : 50; /* entry length, "kNN=" included */

		snprintf(e[i], sizeof(e[i]), "k%02d=", i);
		memset(e[i] + 4, 'a' + i, (size_t)len - 4);
		e[i][len] = '\0';
		if (i)
			strcat(in, ",");
		strcat(in, e[i]);
		if (i < keep) {
			if (i)
				strcat(expect, ",");
			strcat(expect, e[i]);
		}
	}
	ck_assert_uint_gt(strlen(in), 512);
	ck_assert_uint_le(strlen(expect), 512);
	tracestate_case(l, 1, expect);
}
END_TEST

START_TEST(test_tracestate_512)
{
	char in[600];
	const char *l[] = {in};

	/* exactly 512 characters (values of at most 256): forwarded whole */
	memset(in, 'v', sizeof(in));
	memcpy(in, "a=", 2); /* [0, 202) */
	in[202] = ',';
	memcpy(in + 203, "b=", 2); /* [203, 405) */
	in[405] = ',';
	memcpy(in + 406, "c=", 2); /* [406, 512) */
	in[512] = '\0';
	ck_assert_uint_eq(strlen(in), 512);
	tracestate_case(l, 1, in);
}
END_TEST

/* ---- configuration ------------------------------------------------------------ */

START_TEST(test_propagate_off)
{
	char *env[] = {"CTXSHIM_PROPAGATE=0", NULL};
	struct req cb[2];

	up(NULL, env);
	call("traceparent: " TP("01") "\r\ntracestate: foo=1\r\n", 2, cb);
	ck_assert_int_eq(count(&cb[0], "traceparent", NULL), 0);
	ck_assert_int_eq(count(&cb[1], "tracestate", NULL), 0);
	down();
}
END_TEST

/* An invisible hop: the incoming parent-id goes on unchanged (allowed:
 * a participant MAY forward traceparent as received), and tracestate
 * with it. */
START_TEST(test_propagate_transparent)
{
	char *env[] = {"CTXSHIM_PROPAGATE=transparent", NULL};
	const char *v;
	struct req cb[2];
	struct tp t;
	int i;

	up(NULL, env);
	call("traceparent: " TP("03") "\r\ntracestate: foo=1\r\n", 2, cb);
	for (i = 0; i < 2; i++) {
		traceparent(&cb[i], &t);
		ck_assert_str_eq(t.trace, TRACE);
		ck_assert_str_eq(t.parent, PARENT);
		ck_assert_uint_eq(t.flags, 3);
		ck_assert_int_eq(count(&cb[i], "tracestate", &v), 1);
		ck_assert_str_eq(v, "foo=1");
	}
	down();
}
END_TEST

TEST_SUITE(integration_w3c_suite)
{
	Suite *s = suite_create("W3C Trace Context conformance (w3c-service)");
	TCase *tc;
	char path[4096];

	snprintf(path, sizeof(path), "%s/w3c-service", test_env_path("HELPER_DIR"));
	if (access(path, X_OK) != 0)
		test_skip(
			"w3c-service was not built (libmicrohttpd or libcurl missing)");

	tc = tcase_create("traceparent");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_invalid_traceparent, 0,
			    (int)(sizeof(invalid_tp) / sizeof(invalid_tp[0])));
	tcase_add_loop_test(tc, test_valid_traceparent, 0,
			    (int)(sizeof(valid_tp) / sizeof(valid_tp[0])));
	tcase_add_loop_test(tc, test_header_name, 0, 7);
	tcase_add_loop_test(tc, test_ows, 0, 4);
	tcase_add_loop_test(tc, test_duplicated_traceparent, 0, 3);
	tcase_add_test(tc, test_missing_traceparent);
	tcase_add_loop_test(tc, test_several_callbacks, 0, 4);
	suite_add_tcase(s, tc);

	tc = tcase_create("tracestate");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_tracestate_combined, 0, 3);
	tcase_add_loop_test(tc, test_tracestate_whitespace, 0, 6);
	tcase_add_test(tc, test_tracestate_empty);
	tcase_add_loop_test(tc, test_tracestate_limits, 0, 4);
	tcase_add_loop_test(tc, test_tracestate_many_lines, 0, 2);
	tcase_add_loop_test(tc, test_tracestate_invalid, 0, 12);
	tcase_add_loop_test(tc, test_tracestate_keys, 0, 5);
	tcase_add_loop_test(tc, test_tracestate_long, 0, 2);
	tcase_add_test(tc, test_tracestate_512);
	suite_add_tcase(s, tc);

	tc = tcase_create("configuration");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_propagate_off);
	tcase_add_test(tc, test_propagate_transparent);
	suite_add_tcase(s, tc);
	return s;
}
