/* SPDX-License-Identifier: Apache-2.0 */
/* An HTTP/2 server on libnghttp2 with no tracing code, for the tests of
 * hooks/hook-nghttp2.c: cleartext HTTP/2 (h2c) on 127.0.0.1, with prior
 * knowledge or upgraded from HTTP/1.1 (--upgrade), one thread per
 * connection, many streams per connection.
 *
 *   h2-server [--header2] [--chunks N] [--batch N] [--submit-data|--no-copy]
 *             [--frame-send] [--two-parts] [--data-first]
 *     --header2      register on_header_callback2 instead of on_header_callback
 *     --chunks N     the data source read callback hands out each body in N
 *                    pieces (one DATA frame each) and prints
 *                    "CHUNK <tid> <stream> <bytes> <seen>" for each; after
 *                    every send that produced one, "SENT <tid> <before>
 *                    <after>" (the trace-id the thread showed before and
 *                    after nghttp2_session_mem_send)
 *     --batch N      answer a connection's requests only once N of them are
 *                    complete, all at once (their bodies go out interleaved)
 *     --submit-data  respond with nghttp2_submit_headers() and
 *                    nghttp2_submit_data() instead of nghttp2_submit_response()
 *     --no-copy      the read callback sets NGHTTP2_DATA_FLAG_NO_COPY and a
 *                    send_data_callback writes each DATA frame, printing
 *                    "SENDDATA <tid> <stream> <bytes> <seen>"
 *     --two-parts    each body comes from two data sources: the first half
 *                    from the response's, which ends with
 *                    NGHTTP2_DATA_FLAG_NO_END_STREAM, the rest from one
 *                    submitted with nghttp2_submit_data() (another read
 *                    callback) once the first is done
 *     --data-first   submit the body with nghttp2_submit_data() before the
 *                    response's HEADERS, which get a data source of their
 *                    own that nghttp2 never reads (the stream has one
 *                    already; it would print "WRONG <stream>")
 *     --frame-send   register before_frame_send and on_frame_send callbacks
 *                    that print "BEFORESEND|FRAMESEND <tid> <stream> <type>
 *                    <seen>" for each frame (stream 0: the connection's), and
 *                    have on_stream_close print "CLOSE <tid> <stream> <seen>"
 *     --upgrade      each connection starts in HTTP/1.1 and is upgraded to
 *                    HTTP/2 (RFC 7540 section 3.2, "Upgrade: h2c", as
 *                    `curl --http2 http://...` does): the head is read with
 *                    recv(), answered with "101 Switching Protocols", then
 *                    nghttp2_session_upgrade2() makes it stream 1 from its
 *                    HTTP2-Settings, which is handled (REQ line) and answered
 *                    like any other stream; a head without "Upgrade: h2c"
 *                    gets a 400 and the connection is closed
 *     --upgrade-first  the same, nghttp2_session_upgrade2() called before the
 *                    101 is written (both orders are in use: Apache httpd
 *                    writes the 101 first, nghttpx queues it after)
 *     --upgrade-old  --upgrade with the deprecated nghttp2_session_upgrade()
 *     --upgrade-late  --upgrade with the session made only after the 101 is
 *                    written (a server that chooses HTTP/2 once it switched:
 *                    the socket level followed the connection as HTTP/2 from
 *                    the 101 until the session is made)
 *     --preface-alone  --upgrade, and the client's preface read alone
 *                    (exactly its 24 bytes) and handed to
 *                    nghttp2_session_mem_recv() (no frame yet) before
 *                    anything is sent: stream 1's response goes out after
 *                    the preface was read, before the session received a
 *                    frame (hooks/hook-nghttp2.c, nh_upgrade_confirm())
 *     --dup          with --upgrade: the connection is read, after its
 *                    upgrade head, through a dup() of its fd made when it
 *                    was accepted, and written through the fd itself (a
 *                    copy read: the socket level's state moves to it,
 *                    preload/conn.c, "Copies")
 *     --dup-close    with --upgrade: once upgraded, the connection goes on
 *                    through a dup() of its fd, the fd itself closed
 *     --read-first   with prior knowledge: each connection's first bytes are
 *                    read with recv() before nghttp2_session_server_new()
 *                    makes its session (as a server that looks for the
 *                    preface before it chooses HTTP/2), then handed to
 *                    nghttp2_session_mem_recv()
 *
 *   h2-server --reuse-in-del
 *     no network: session A is deleted, and while nghttp2_session_del(A)
 *     frees A's memory (the free function of A's nghttp2_mem), session B
 *     is made in that very memory (same address) and gets a request (from
 *     an in-memory client, traceparent TPA) that it answers with a data
 *     source; once A's deletion returned, B's response is sent.  Prints
 *     "REUSE <same> <status> <error> <seen> <body>": 1 if B had A's address,
 *     the response's :status, the stream's close code at the client, the
 *     trace-id B's read callback ran under, and the body received ("-"
 *     for none).  A multi-threaded server meets the same order of events
 *     when another thread's new session gets a deleted one's address.
 *
 * Prints "READY <port>".  Each request is handled inside nghttp2's
 * on_frame_recv callback when its last frame (END_STREAM) arrives: it
 * prints "REQ <tid> <stream> <method> <path> <n> <traceparent> <seen>
 * <tracestate>" (n traceparent fields received, the first one's value or
 * "-"; seen is the trace-id this thread's otel_thread_ctx_v1 record showed
 * during the handler, or "none": it only observes whatever a preloaded
 * library publishes; the first tracestate field received, or "-"); a path
 * starting with "/block" then prints "BLOCK <tid> <path>" and waits for
 * one line on stdin; a path starting with "/relay" then submits a request
 * of its own (no trace fields) on an nghttp2 client session that is never
 * connected and prints "RELAY <tid> <stream> <tracestate>", the
 * tracestate field its HEADERS frame carried, or "-" (the handler's
 * tracestate, which the thread record does not show, seen as it
 * propagates).  The response body is "path=<path>\n".  Exits when stdin
 * is closed. */
#include "config.h"

#include "ctxobs.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "h2-common.h"
#include "serve-common.h"

#define BATCH_MAX 16
/* --reuse-in-del: the request's traceparent. */
#define TPA_REUSE "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
/* A tracestate field kept: more than the 512 bytes W3C allows. */
#define TS_CAP 600

static bool opt_header2, opt_submit_data, opt_no_copy, opt_frame_send, opt_two_parts,
	opt_data_first, opt_upgrade, opt_upgrade_first, opt_upgrade_old,
	opt_upgrade_late, opt_read_first, opt_preface_alone, opt_dup, opt_dup_close;
static unsigned opt_chunks, opt_batch;

struct stream {
	char method[16];
	char path[512];
	unsigned n_tp;
	char tp[128];
	char ts[TS_CAP];
	char body[600];
	char clen[16];
	size_t body_len, off, sent;
	size_t end; /* of the part the current data source hands out */
};

struct conn {
	int fd;
	int rfd; /* what reads go through after the upgrade head (--dup) */
	long tid;
	unsigned n_chunks; /* read callback calls so far */
	unsigned n_pending;
	int32_t pending[BATCH_MAX]; /* --batch: complete, not answered yet */
	unsigned n_due;
	int32_t due[BATCH_MAX]; /* --two-parts: first part sent */
};

static void
copy(char *dst, size_t cap, const uint8_t *v, size_t len)
{
	if (len >= cap)
		len = cap - 1;
	memcpy(dst, v, len);
	dst[len] = '\0';
}

static int
on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	struct stream *st;

	(void)ud;
	if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	st = calloc(1, sizeof(*st));
	if (!st)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	strcpy(st->tp, "-");
	nghttp2_session_set_stream_user_data(s, f->hd.stream_id, st);
	return 0;
}

static void
header(nghttp2_session *s,
       const nghttp2_frame *f,
       const uint8_t *name,
       size_t nlen,
       const uint8_t *value,
       size_t vlen)
{
	struct stream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);

	if (!st || f->hd.type != NGHTTP2_HEADERS)
		return;
	if (nlen == 7 && memcmp(name, ":method", 7) == 0)
		copy(st->method, sizeof(st->method), value, vlen);
	else if (nlen == 5 && memcmp(name, ":path", 5) == 0)
		copy(st->path, sizeof(st->path), value, vlen);
	else if (nlen == 11 && memcmp(name, "traceparent", 11) == 0 && st->n_tp++ == 0)
		copy(st->tp, sizeof(st->tp), value, vlen);
	else if (nlen == 10 && memcmp(name, "tracestate", 10) == 0 && !st->ts[0])
		copy(st->ts, sizeof(st->ts), value, vlen);
}

static int
on_header(nghttp2_session *s,
	  const nghttp2_frame *f,
	  const uint8_t *name,
	  size_t nlen,
	  const uint8_t *value,
	  size_t vlen,
	  uint8_t flags,
	  void *ud)
{
	(void)flags;
	(void)ud;
	header(s, f, name, nlen, value, vlen);
	return 0;
}

static int
on_header2(nghttp2_session *s,
	   const nghttp2_frame *f,
	   nghttp2_rcbuf *name,
	   nghttp2_rcbuf *value,
	   uint8_t flags,
	   void *ud)
{
	nghttp2_vec n = nghttp2_rcbuf_get_buf(name), v = nghttp2_rcbuf_get_buf(value);

	(void)flags;
	(void)ud;
	header(s, f, n.base, n.len, v.base, v.len);
	return 0;
}

static ssize_t
read_body(nghttp2_session *s,
	  int32_t id,
	  uint8_t *buf,
	  size_t len,
	  uint32_t *flags,
	  nghttp2_data_source *src,
	  void *ud)
{
	struct stream *st = src->ptr;
	struct conn *c = ud;
	size_t n = st->end - st->off;
	char seen[33];

	(void)s;
	if (opt_chunks) {
		size_t piece = (st->body_len + opt_chunks - 1) / opt_chunks;

		if (n > piece)
			n = piece;
	}
	if (n > len)
		n = len;
	if (opt_chunks) {
		(void)ctxobs_trace(seen);
		serve_say("CHUNK %ld %d %zu %s\n", c->tid, id, n, seen);
		c->n_chunks++;
	}
	if (opt_no_copy)
		*flags |= NGHTTP2_DATA_FLAG_NO_COPY;
	else
		memcpy(buf, st->body + st->off, n);
	st->off += n;
	if (st->off == st->end) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
		if (st->end < st->body_len) {
			if (c->n_due >= BATCH_MAX)
				return NGHTTP2_ERR_CALLBACK_FAILURE;
			*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
			c->due[c->n_due++] = id;
		}
	}
	return (ssize_t)n;
}

/* --two-parts: the second data source (a function of its own). */
static ssize_t
read_rest(nghttp2_session *s,
	  int32_t id,
	  uint8_t *buf,
	  size_t len,
	  uint32_t *flags,
	  nghttp2_data_source *src,
	  void *ud)
{
	return read_body(s, id, buf, len, flags, src, ud);
}

/* --data-first: the source nghttp2 must never read. */
static ssize_t
read_wrong(nghttp2_session *s,
	   int32_t id,
	   uint8_t *buf,
	   size_t len,
	   uint32_t *flags,
	   nghttp2_data_source *src,
	   void *ud)
{
	(void)s;
	(void)buf;
	(void)len;
	(void)flags;
	(void)src;
	(void)ud;
	serve_say("WRONG %d\n", id);
	return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
}

/* --two-parts: the rest of each body whose first part went out.  1 if
 * something was submitted, 0 if nothing was due, -1 on error. */
static int
submit_rest(nghttp2_session *s, struct conn *c)
{
	unsigned i, n = c->n_due;

	for (i = 0; i < n; i++) {
		struct stream *st = nghttp2_session_get_stream_user_data(s, c->due[i]);
		nghttp2_data_provider prd = {.source.ptr = st,
					     .read_callback = read_rest};

		if (!st)
			continue;
		st->end = st->body_len;
		if (nghttp2_submit_data(s, NGHTTP2_FLAG_END_STREAM, c->due[i], &prd) !=
		    0)
			return -1;
	}
	c->n_due = 0;
	return n > 0;
}

/* --no-copy: the DATA frame nghttp2 framed, written by the application. */
static int
send_data(nghttp2_session *s,
	  nghttp2_frame *f,
	  const uint8_t *framehd,
	  size_t length,
	  nghttp2_data_source *src,
	  void *ud)
{
	struct stream *st = src->ptr;
	struct conn *c = ud;
	char seen[33];

	(void)s;
	(void)ctxobs_trace(seen);
	serve_say("SENDDATA %ld %d %zu %s\n", c->tid, f->hd.stream_id, length, seen);
	/* No padding callback is set: DATA frames carry no padding. */
	if (f->data.padlen > 0 || length > st->body_len - st->sent ||
	    h2_send_all(c->fd, framehd, 9) < 0 ||
	    h2_send_all(c->fd, (const uint8_t *)st->body + st->sent, length) < 0)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	st->sent += length;
	return 0;
}

static void
say_frame(const char *what, const nghttp2_frame *f, void *ud)
{
	struct conn *c = ud;
	char seen[33];

	(void)ctxobs_trace(seen);
	serve_say("%s %ld %d %u %s\n", what, c->tid, f->hd.stream_id, f->hd.type, seen);
}

static int
before_frame_send(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	(void)s;
	say_frame("BEFORESEND", f, ud);
	return 0;
}

static int
on_frame_send(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	(void)s;
	say_frame("FRAMESEND", f, ud);
	return 0;
}

static int
respond(nghttp2_session *s, int32_t id)
{
	struct stream *st = nghttp2_session_get_stream_user_data(s, id);
	nghttp2_data_provider prd;
	nghttp2_nv hdrs[2] = {
		{(uint8_t *)":status", (uint8_t *)"200", 7, 3, NGHTTP2_NV_FLAG_NONE},
		{(uint8_t *)"content-length", NULL, 14, 0, NGHTTP2_NV_FLAG_NONE},
	};
	int r;

	if (!st)
		return -1;
	st->end = opt_two_parts ? st->body_len / 2 : st->body_len;
	hdrs[1].value = (uint8_t *)st->clen;
	hdrs[1].valuelen = strlen(st->clen);
	prd.source.ptr = st;
	prd.read_callback = read_body;
	if (opt_data_first) {
		nghttp2_data_provider wrong = {.source.ptr = st,
					       .read_callback = read_wrong};

		r = nghttp2_submit_data(s, NGHTTP2_FLAG_END_STREAM, id, &prd);
		if (r == 0)
			r = nghttp2_submit_response(s, id, hdrs, 2, &wrong);
		return r;
	}
	if (!opt_submit_data)
		return nghttp2_submit_response(s, id, hdrs, 2, &prd);
	r = nghttp2_submit_headers(s, NGHTTP2_FLAG_NONE, id, NULL, hdrs, 2, NULL);
	if (r == 0)
		r = nghttp2_submit_data(s, NGHTTP2_FLAG_END_STREAM, id, &prd);
	return r;
}

/* "/relay": the tracestate field of a HEADERS frame sent, into ud. */
static int
relay_sent(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	size_t i;

	(void)s;
	if (f->hd.type != NGHTTP2_HEADERS)
		return 0;
	for (i = 0; i < f->headers.nvlen; i++)
		if (f->headers.nva[i].namelen == 10 &&
		    memcmp(f->headers.nva[i].name, "tracestate", 10) == 0)
			copy(ud, TS_CAP, f->headers.nva[i].value,
			     f->headers.nva[i].valuelen);
	return 0;
}

/* "/relay": what a request submitted now would carry as its tracestate
 * (the frames go to memory only: the handler's context is all that
 * matters). */
static void
relay(long tid, int32_t id)
{
	const nghttp2_nv nva[] = {
		{(uint8_t *)":method", (uint8_t *)"GET", 7, 3, NGHTTP2_NV_FLAG_NONE},
		{(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, NGHTTP2_NV_FLAG_NONE},
		{(uint8_t *)":authority", (uint8_t *)"127.0.0.1", 10, 9,
		 NGHTTP2_NV_FLAG_NONE},
		{(uint8_t *)":path", (uint8_t *)"/up", 5, 3, NGHTTP2_NV_FLAG_NONE},
	};
	char ts[TS_CAP] = "-";
	nghttp2_session_callbacks *cbs;
	nghttp2_session *cs;
	const uint8_t *data;

	nghttp2_session_callbacks_new(&cbs);
	nghttp2_session_callbacks_set_on_frame_send_callback(cbs, relay_sent);
	nghttp2_session_client_new(&cs, cbs, ts);
	nghttp2_session_callbacks_del(cbs);
	if (nghttp2_submit_request(cs, NULL, nva, 4, NULL, NULL) < 0)
		strcpy(ts, "submit-failed");
	while (nghttp2_session_mem_send(cs, &data) > 0)
		;
	nghttp2_session_del(cs);
	serve_say("RELAY %ld %d %s\n", tid, id, ts);
}

static int
handle(nghttp2_session *s, int32_t id, struct stream *st, struct conn *c)
{
	char seen[33];
	unsigned i;

	(void)ctxobs_trace(seen);
	serve_say("REQ %ld %d %s %s %u %s %s %s\n", c->tid, id, st->method, st->path,
		  st->n_tp, st->tp, seen, st->ts[0] ? st->ts : "-");
	serve_maybe_block(c->tid, st->path);
	if (strncmp(st->path, "/relay", 6) == 0)
		relay(c->tid, id);
	st->body_len =
		(size_t)snprintf(st->body, sizeof(st->body), "path=%s\n", st->path);
	if (st->body_len >= sizeof(st->body))
		st->body_len = sizeof(st->body) - 1;
	snprintf(st->clen, sizeof(st->clen), "%zu", st->body_len);
	if (!opt_batch)
		return respond(s, id);
	if (c->n_pending >= BATCH_MAX)
		return -1;
	c->pending[c->n_pending++] = id;
	if (c->n_pending < opt_batch)
		return 0;
	for (i = 0; i < c->n_pending; i++)
		if (respond(s, c->pending[i]) != 0)
			return -1;
	c->n_pending = 0;
	return 0;
}

static int
on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	struct conn *c = ud;
	struct stream *st;

	if ((f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) ||
	    !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
		return 0;
	st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
	if (!st)
		return 0;
	if (handle(s, f->hd.stream_id, st, c) != 0)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	return 0;
}

static int
on_data_chunk_recv(nghttp2_session *s,
		   uint8_t flags,
		   int32_t id,
		   const uint8_t *data,
		   size_t len,
		   void *ud)
{
	(void)s;
	(void)flags;
	(void)id;
	(void)data;
	(void)len;
	(void)ud;
	return 0;
}

static int
on_stream_close(nghttp2_session *s, int32_t id, uint32_t err, void *ud)
{
	struct stream *st = nghttp2_session_get_stream_user_data(s, id);
	struct conn *c = ud;

	(void)err;
	if (opt_frame_send) {
		char seen[33];

		(void)ctxobs_trace(seen);
		serve_say("CLOSE %ld %d %s\n", c->tid, id, seen);
	}
	if (st) {
		nghttp2_session_set_stream_user_data(s, id, NULL);
		free(st);
	}
	return 0;
}

/* ---- --upgrade ---- */

/* base64url (RFC 4648 section 5, no padding) of HTTP2-Settings into out;
 * its length, or -1. */
static ssize_t
b64url_decode(const char *in, size_t len, uint8_t *out, size_t cap)
{
	static const char abc[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	uint32_t acc = 0;
	size_t n = 0, i;
	int bits = 0;

	for (i = 0; i < len && in[i] != '='; i++) {
		const char *p = in[i] ? strchr(abc, in[i]) : NULL;

		if (!p)
			return -1;
		acc = acc << 6 | (uint32_t)(p - abc);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (n == cap)
				return -1;
			out[n++] = (uint8_t)(acc >> bits);
		}
	}
	return (ssize_t)n;
}

/* The value of header name (lower case) in head, or NULL; *len its
 * length without surrounding blanks. */
static const char *
head_field(const char *head, const char *name, size_t *len)
{
	size_t nl = strlen(name);
	const char *p = strstr(head, "\r\n");

	while (p && p[2] != '\r') {
		const char *line = p + 2, *end = strstr(line, "\r\n");

		if (!end)
			break;
		if ((size_t)(end - line) > nl && line[nl] == ':' &&
		    strncasecmp(line, name, nl) == 0) {
			const char *v = line + nl + 1;

			while (v < end && (*v == ' ' || *v == '\t'))
				v++;
			*len = (size_t)(end - v);
			while (*len && (v[*len - 1] == ' ' || v[*len - 1] == '\t'))
				(*len)--;
			return v;
		}
		p = end;
	}
	return NULL;
}

static nghttp2_session *new_session(struct conn *c);

/* Reads the HTTP/1.1 head that asks for the upgrade into buf (cap bytes,
 * NUL-terminated), answers it with 101 and upgrades session *s (made
 * here, after the 101, when NULL), its request becoming stream 1 (around
 * the 101 as --upgrade-first says).
 * Returns the stream's state, *rest and *n_rest the bytes read after the
 * head, or NULL (the head is not an h2c upgrade: 400 sent). */
static struct stream *
upgrade(nghttp2_session **sp,
	struct conn *c,
	char *buf,
	size_t cap,
	size_t *n_rest,
	const char **rest)
{
	static const char ok[] = "HTTP/1.1 101 Switching Protocols\r\n"
				 "Connection: Upgrade\r\nUpgrade: h2c\r\n\r\n";
	static const char bad[] = "HTTP/1.1 400 Bad Request\r\n"
				  "Content-Length: 0\r\nConnection: close\r\n\r\n";
	uint8_t settings[256];
	size_t have = 0, len;
	struct stream *st;
	const char *v, *end = NULL;
	ssize_t n;
	int i;

	while (!end) {
		if (have + 1 >= cap)
			return NULL;
		n = recv(c->fd, buf + have, cap - 1 - have, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return NULL;
		have += (size_t)n;
		buf[have] = '\0';
		end = strstr(buf, "\r\n\r\n");
	}
	*rest = end + 4;
	*n_rest = have - (size_t)(*rest - buf);
	st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	strcpy(st->tp, "-");
	if (sscanf(buf, "%15s %511s HTTP/1.1", st->method, st->path) != 2 ||
	    !(v = head_field(buf, "upgrade", &len)) || len != 3 ||
	    strncasecmp(v, "h2c", 3) != 0 ||
	    !(v = head_field(buf, "http2-settings", &len)) ||
	    (n = b64url_decode(v, len, settings, sizeof(settings))) < 0) {
		(void)h2_send_all(c->fd, (const uint8_t *)bad, sizeof(bad) - 1);
		free(st);
		return NULL;
	}
	if ((v = head_field(buf, "traceparent", &len))) {
		st->n_tp = 1;
		copy(st->tp, sizeof(st->tp), (const uint8_t *)v, len);
	}
	for (i = 0; i < 2; i++) {
		nghttp2_session *s;
		int r;

		if (i == (opt_upgrade_first ? 1 : 0)) {
			if (h2_send_all(c->fd, (const uint8_t *)ok, sizeof(ok) - 1) < 0)
				break;
			continue;
		}
		if (!*sp)
			*sp = new_session(c);
		s = *sp;
		if (opt_upgrade_old)
			r = nghttp2_session_upgrade(s, settings, (size_t)n, NULL);
		else
			r = nghttp2_session_upgrade2(s, settings, (size_t)n,
						     strcmp(st->method, "HEAD") == 0,
						     NULL);
		/* A server session ignores the upgrade's user data. */
		if (r != 0 || nghttp2_session_set_stream_user_data(s, 1, st) != 0)
			break;
	}
	if (i < 2) {
		free(st);
		return NULL;
	}
	return st;
}

static nghttp2_session *
new_session(struct conn *c)
{
	nghttp2_session_callbacks *cbs;
	nghttp2_session *s;

	nghttp2_session_callbacks_new(&cbs);
	nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
	if (opt_header2)
		nghttp2_session_callbacks_set_on_header_callback2(cbs, on_header2);
	else
		nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs,
								  on_data_chunk_recv);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
	if (opt_no_copy)
		nghttp2_session_callbacks_set_send_data_callback(cbs, send_data);
	if (opt_frame_send) {
		nghttp2_session_callbacks_set_before_frame_send_callback(
			cbs, before_frame_send);
		nghttp2_session_callbacks_set_on_frame_send_callback(cbs,
								     on_frame_send);
	}
	nghttp2_session_server_new(&s, cbs, c);
	nghttp2_session_callbacks_del(cbs);
	return s;
}

/* --preface-alone: the rest of the client's 24-byte preface (n of its
 * bytes came with the head), read alone and handed to the session; 0 or
 * -1. */
static int
preface_alone(nghttp2_session *s, struct conn *c, size_t n)
{
	uint8_t buf[24];
	ssize_t r;

	while (n < sizeof(buf)) {
		r = recv(c->rfd, buf, sizeof(buf) - n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || nghttp2_session_mem_recv(s, buf, (size_t)r) != r)
			return -1;
		n += (size_t)r;
	}
	return 0;
}

static void *
serve(void *arg)
{
	struct conn c = {.fd = (int)(long)arg, .rfd = -1, .tid = syscall(SYS_gettid)};
	nghttp2_settings_entry set = {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100};
	nghttp2_session *s = NULL;
	uint8_t buf[16384];
	ssize_t first = 0;

	c.rfd = opt_dup ? dup(c.fd) : c.fd;
	if (c.rfd < 0) {
		close(c.fd);
		return NULL;
	}
	if (opt_read_first) {
		do
			first = recv(c.fd, buf, sizeof(buf), 0);
		while (first < 0 && errno == EINTR);
		if (first <= 0) {
			close(c.fd);
			return NULL;
		}
	}
	if (!opt_upgrade_late)
		s = new_session(&c);
	serve_say("CONN %ld\n", c.tid);
	if (opt_upgrade) {
		const char *rest;
		size_t n_rest;
		struct stream *st =
			upgrade(&s, &c, (char *)buf, sizeof(buf), &n_rest, &rest);

		/* Stream 1 is the head's request, handled as soon as the
		 * session has it; what came after the head is HTTP/2. */
		if (!s) {
			if (c.rfd != c.fd)
				close(c.rfd);
			close(c.fd);
			serve_say("CLOSED %ld\n", c.tid);
			return NULL;
		}
		if (!st ||
		    nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, &set, 1) != 0 ||
		    handle(s, 1, st, &c) != 0 ||
		    (n_rest && nghttp2_session_mem_recv(s, (const uint8_t *)rest,
							n_rest) != (ssize_t)n_rest))
			goto out;
		if (opt_dup_close) {
			int d = dup(c.fd);

			if (d < 0)
				goto out;
			close(c.fd);
			c.fd = c.rfd = d;
		}
		if (opt_preface_alone && preface_alone(s, &c, n_rest) != 0)
			goto out;
	} else {
		nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, &set, 1);
		if (first > 0 &&
		    nghttp2_session_mem_recv(s, buf, (size_t)first) != first)
			goto out;
	}
	while (nghttp2_session_want_read(s) || nghttp2_session_want_write(s)) {
		unsigned chunks = c.n_chunks;
		char before[33], after[33];
		ssize_t n;
		int more;

		(void)ctxobs_trace(before);
		do {
			if (h2_flush(s, c.fd) < 0)
				goto out;
		} while ((more = submit_rest(s, &c)) > 0);
		if (more < 0)
			break;
		if (c.n_chunks != chunks) {
			(void)ctxobs_trace(after);
			serve_say("SENT %ld %s %s\n", c.tid, before, after);
		}
		n = recv(c.rfd, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		n = nghttp2_session_mem_recv(s, buf, (size_t)n);
		if (n < 0) {
			fprintf(stderr, "h2-server: %s\n", nghttp2_strerror((int)n));
			break;
		}
	}
out:
	(void)h2_flush(s, c.fd);
	nghttp2_session_del(s);
	if (c.rfd != c.fd)
		close(c.rfd);
	close(c.fd);
	serve_say("CLOSED %ld\n", c.tid);
	return NULL;
}

/* ---- --reuse-in-del ---- */

static struct {
	void *a; /* session A's memory (its first allocation) */
	size_t a_size;
	void *keep;  /* A's memory, handed to B */
	bool b_same; /* B was made in it */
	nghttp2_session *b, *client;
	nghttp2_session_callbacks *b_cbs;
	char seen[33];
	char status[8];
	char body[64];
	size_t body_len;
	int error; /* the stream's close code at the client, -1 open */
	nghttp2_mem *mem;
} ru = {.error = -1};

static void *
ru_malloc(size_t size, void *ud)
{
	(void)ud;
	return malloc(size);
}

static void *
ru_calloc(size_t n, size_t size, void *ud)
{
	void *p;

	(void)ud;
	if (ru.keep && !ru.b_same && n * size == ru.a_size) {
		/* B's session, in A's memory. */
		ru.b_same = true;
		return memset(ru.keep, 0, ru.a_size);
	}
	p = calloc(n, size);
	if (p && !ru.a && !ru.b) {
		/* nghttp2_session_new allocates the session first. */
		ru.a = p;
		ru.a_size = n * size;
	}
	return p;
}

static void *
ru_realloc(void *p, size_t size, void *ud)
{
	(void)ud;
	return realloc(p, size);
}

static int ru_pump(nghttp2_session *from, nghttp2_session *to);

static void
ru_free(void *p, void *ud)
{
	(void)ud;
	if (!p || p != ru.a) {
		free(p);
		return;
	}
	/* The last thing nghttp2_session_del(A) does: B takes the memory,
	 * and the request arrives, before A's deletion returns. */
	ru.a = NULL;
	ru.keep = p;
	if (nghttp2_session_server_new3(&ru.b, ru.b_cbs, NULL, NULL, ru.mem) != 0 ||
	    nghttp2_submit_settings(ru.b, NGHTTP2_FLAG_NONE, NULL, 0) != 0)
		exit(1);
	(void)ru_pump(ru.client, ru.b);
}

static ssize_t
ru_read(nghttp2_session *s,
	int32_t id,
	uint8_t *buf,
	size_t len,
	uint32_t *flags,
	nghttp2_data_source *src,
	void *ud)
{
	(void)s;
	(void)id;
	(void)src;
	(void)ud;
	(void)ctxobs_trace(ru.seen);
	if (len < 2)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	memcpy(buf, "ok", 2);
	*flags |= NGHTTP2_DATA_FLAG_EOF;
	return 2;
}

static int
ru_server_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	nghttp2_nv hdr = {(uint8_t *)":status", (uint8_t *)"200", 7, 3,
			  NGHTTP2_NV_FLAG_NONE};
	nghttp2_data_provider prd = {.source.ptr = NULL, .read_callback = ru_read};

	(void)ud;
	if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST ||
	    !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
		return 0;
	return nghttp2_submit_response(s, f->hd.stream_id, &hdr, 1, &prd) == 0
		       ? 0
		       : NGHTTP2_ERR_CALLBACK_FAILURE;
}

static int
ru_client_header(nghttp2_session *s,
		 const nghttp2_frame *f,
		 const uint8_t *name,
		 size_t nlen,
		 const uint8_t *value,
		 size_t vlen,
		 uint8_t flags,
		 void *ud)
{
	(void)s;
	(void)f;
	(void)flags;
	(void)ud;
	if (nlen == 7 && memcmp(name, ":status", 7) == 0)
		copy(ru.status, sizeof(ru.status), value, vlen);
	return 0;
}

static int
ru_client_data(nghttp2_session *s,
	       uint8_t flags,
	       int32_t id,
	       const uint8_t *data,
	       size_t len,
	       void *ud)
{
	(void)s;
	(void)flags;
	(void)id;
	(void)ud;
	if (len > sizeof(ru.body) - 1 - ru.body_len)
		len = sizeof(ru.body) - 1 - ru.body_len;
	memcpy(ru.body + ru.body_len, data, len);
	ru.body_len += len;
	return 0;
}

static int
ru_client_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
	(void)s;
	(void)id;
	(void)ud;
	ru.error = (int)code;
	return 0;
}

/* Moves what from has queued into to: 1 if something, 0 if nothing, -1
 * on a session error. */
static int
ru_pump(nghttp2_session *from, nghttp2_session *to)
{
	const uint8_t *d;
	ssize_t n;
	int moved = 0;

	while ((n = nghttp2_session_mem_send(from, &d)) > 0) {
		if (nghttp2_session_mem_recv(to, d, (size_t)n) != n)
			return -1;
		moved = 1;
	}
	return n < 0 ? -1 : moved;
}

static int
reuse_in_del(void)
{
	nghttp2_mem mem = {NULL, ru_malloc, ru_free, ru_calloc, ru_realloc};
	nghttp2_session_callbacks *ccbs;
	nghttp2_session *a;
	nghttp2_nv req[] = {
		{(uint8_t *)":method", (uint8_t *)"GET", 7, 3, NGHTTP2_NV_FLAG_NONE},
		{(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, NGHTTP2_NV_FLAG_NONE},
		{(uint8_t *)":authority", (uint8_t *)"x", 10, 1, NGHTTP2_NV_FLAG_NONE},
		{(uint8_t *)":path", (uint8_t *)"/r", 5, 2, NGHTTP2_NV_FLAG_NONE},
		{(uint8_t *)"traceparent", (uint8_t *)TPA_REUSE, 11,
		 sizeof(TPA_REUSE) - 1, NGHTTP2_NV_FLAG_NONE},
	};
	int i, a_moved, b_moved;

	ru.mem = &mem;
	if (nghttp2_session_callbacks_new(&ru.b_cbs) != 0 ||
	    nghttp2_session_callbacks_new(&ccbs) != 0)
		return 1;
	nghttp2_session_callbacks_set_on_frame_recv_callback(ru.b_cbs,
							     ru_server_frame_recv);
	nghttp2_session_callbacks_set_on_header_callback(ccbs, ru_client_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(ccbs, ru_client_data);
	nghttp2_session_callbacks_set_on_stream_close_callback(ccbs, ru_client_close);
	if (nghttp2_session_client_new(&ru.client, ccbs, NULL) != 0 ||
	    nghttp2_submit_settings(ru.client, NGHTTP2_FLAG_NONE, NULL, 0) != 0 ||
	    nghttp2_submit_request(ru.client, NULL, req, 5, NULL, NULL) < 0)
		return 1;
	/* A: a server session of the same kind, never used. */
	if (nghttp2_session_server_new3(&a, ru.b_cbs, NULL, NULL, &mem) != 0 ||
	    (void *)a != ru.a)
		return 1;
	nghttp2_session_del(a);
	if (!ru.b)
		return 1;
	for (i = 0; i < 100 && ru.error < 0; i++) {
		b_moved = ru_pump(ru.b, ru.client);
		a_moved = ru_pump(ru.client, ru.b);
		if (a_moved < 0 || b_moved < 0 || (!a_moved && !b_moved))
			break;
	}
	printf("REUSE %d %s %d %s %s\n", ru.b_same && (void *)ru.b == ru.keep,
	       ru.status[0] ? ru.status : "-", ru.error, ru.seen[0] ? ru.seen : "-",
	       ru.body_len ? ru.body : "-");
	nghttp2_session_del(ru.b);
	nghttp2_session_del(ru.client);
	nghttp2_session_callbacks_del(ru.b_cbs);
	nghttp2_session_callbacks_del(ccbs);
	return 0;
}

int
main(int argc, char **argv)
{
	int i;

	if (argc == 2 && strcmp(argv[1], "--reuse-in-del") == 0)
		return reuse_in_del();
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--header2") == 0) {
			opt_header2 = true;
		} else if (strcmp(argv[i], "--chunks") == 0 && i + 1 < argc) {
			opt_chunks = (unsigned)strtoul(argv[++i], NULL, 10);
		} else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) {
			opt_batch = (unsigned)strtoul(argv[++i], NULL, 10);
			if (opt_batch > BATCH_MAX)
				return 64;
		} else if (strcmp(argv[i], "--submit-data") == 0) {
			opt_submit_data = true;
		} else if (strcmp(argv[i], "--no-copy") == 0) {
			opt_no_copy = true;
		} else if (strcmp(argv[i], "--data-first") == 0) {
			opt_data_first = true;
		} else if (strcmp(argv[i], "--two-parts") == 0) {
			opt_two_parts = true;
		} else if (strcmp(argv[i], "--frame-send") == 0) {
			opt_frame_send = true;
		} else if (strcmp(argv[i], "--upgrade") == 0) {
			opt_upgrade = true;
		} else if (strcmp(argv[i], "--upgrade-first") == 0) {
			opt_upgrade = opt_upgrade_first = true;
		} else if (strcmp(argv[i], "--upgrade-late") == 0) {
			opt_upgrade = opt_upgrade_late = true;
		} else if (strcmp(argv[i], "--upgrade-old") == 0) {
			opt_upgrade = opt_upgrade_old = true;
		} else if (strcmp(argv[i], "--preface-alone") == 0) {
			opt_upgrade = opt_preface_alone = true;
		} else if (strcmp(argv[i], "--dup") == 0) {
			opt_dup = true;
		} else if (strcmp(argv[i], "--dup-close") == 0) {
			opt_dup_close = true;
		} else if (strcmp(argv[i], "--read-first") == 0) {
			opt_read_first = true;
		} else {
			fprintf(stderr, "h2-server: unknown option %s\n", argv[i]);
			return 64;
		}
	}
	return serve_forever("h2-server", serve, true);
}
