/* SPDX-License-Identifier: Apache-2.0 */
/* An HTTP/2 server on libnghttp2 with no tracing code, for the tests of
 * hooks/hook-nghttp2.c: cleartext HTTP/2 with prior knowledge (h2c) on
 * 127.0.0.1, one thread per connection, many streams per connection.
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
 *                    <seen>" for each frame (stream 0: the connection's)
 *
 * Prints "READY <port>".  Each request is handled inside nghttp2's
 * on_frame_recv callback when its last frame (END_STREAM) arrives: it
 * prints "REQ <tid> <stream> <method> <path> <n> <traceparent> <seen>"
 * (n traceparent fields received, the first one's value or "-"; seen is
 * the trace-id this thread's otel_thread_ctx_v1 record showed during the
 * handler, or "none": it only observes whatever a preloaded library
 * publishes); a path starting with "/block" then prints "BLOCK <tid>
 * <path>" and waits for one line on stdin.  The response body is
 * "path=<path>\n".  Exits when stdin is closed. */
#include "config.h"

#include "thread-record.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "h2-common.h"
#include "serve-common.h"

#define BATCH_MAX 16

static bool opt_header2, opt_submit_data, opt_no_copy, opt_frame_send, opt_two_parts,
	opt_data_first;
static unsigned opt_chunks, opt_batch;

struct stream {
	char method[16];
	char path[512];
	unsigned n_tp;
	char tp[128];
	char body[600];
	char clen[16];
	size_t body_len, off, sent;
	size_t end; /* of the part the current data source hands out */
};

struct conn {
	int fd;
	long tid;
	unsigned n_chunks; /* read callback calls so far */
	unsigned n_pending;
	int32_t pending[BATCH_MAX]; /* --batch: complete, not answered yet */
	unsigned n_due;
	int32_t due[BATCH_MAX]; /* --two-parts: first part sent */
};

/* The trace-id this thread publishes, if a preloaded library does. */
static void
seen_trace(char out[33])
{
	void **slot = dlsym(RTLD_DEFAULT, "otel_thread_ctx_v1");
	const struct otel_thread_ctx_record *r = slot ? *slot : NULL;
	int i;

	if (!r || !r->valid) {
		strcpy(out, "none");
		return;
	}
	for (i = 0; i < 16; i++)
		sprintf(out + 2 * i, "%02x", r->trace_id[i]);
}

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
		seen_trace(seen);
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
	seen_trace(seen);
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

	seen_trace(seen);
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

static int
handle(nghttp2_session *s, int32_t id, struct stream *st, struct conn *c)
{
	char seen[33];
	unsigned i;

	seen_trace(seen);
	serve_say("REQ %ld %d %s %s %u %s %s\n", c->tid, id, st->method, st->path,
		  st->n_tp, st->tp, seen);
	serve_maybe_block(c->tid, st->path);
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

	(void)err;
	(void)ud;
	if (st) {
		nghttp2_session_set_stream_user_data(s, id, NULL);
		free(st);
	}
	return 0;
}

static void *
serve(void *arg)
{
	struct conn c = {.fd = (int)(long)arg, .tid = syscall(SYS_gettid)};
	nghttp2_session_callbacks *cbs;
	nghttp2_settings_entry set = {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100};
	nghttp2_session *s;
	uint8_t buf[16384];

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
	nghttp2_session_server_new(&s, cbs, &c);
	nghttp2_session_callbacks_del(cbs);
	nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, &set, 1);
	serve_say("CONN %ld\n", c.tid);
	while (nghttp2_session_want_read(s) || nghttp2_session_want_write(s)) {
		unsigned chunks = c.n_chunks;
		char before[33], after[33];
		ssize_t n;
		int more;

		seen_trace(before);
		do {
			if (h2_flush(s, c.fd) < 0)
				goto out;
		} while ((more = submit_rest(s, &c)) > 0);
		if (more < 0)
			break;
		if (c.n_chunks != chunks) {
			seen_trace(after);
			serve_say("SENT %ld %s %s\n", c.tid, before, after);
		}
		n = recv(c.fd, buf, sizeof(buf), 0);
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
	close(c.fd);
	serve_say("CLOSED %ld\n", c.tid);
	return NULL;
}

int
main(int argc, char **argv)
{
	int i;

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
		} else {
			fprintf(stderr, "h2-server: unknown option %s\n", argv[i]);
			return 64;
		}
	}
	return serve_forever("h2-server", serve, true);
}
