/* SPDX-License-Identifier: Apache-2.0 */
/* An HTTP/2 server on libnghttp2 with no tracing code, for the tests of
 * hooks/hook-nghttp2.c: cleartext HTTP/2 with prior knowledge (h2c) on
 * 127.0.0.1, one thread per connection, many streams per connection.
 *
 *   h2-server [--header2]
 *     --header2   register on_header_callback2 instead of on_header_callback
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

static bool opt_header2;

struct stream {
	char method[16];
	char path[512];
	unsigned n_tp;
	char tp[128];
	char body[600];
	size_t body_len, off;
};

struct conn {
	int fd;
	long tid;
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
	size_t n = st->body_len - st->off;

	(void)s;
	(void)id;
	(void)ud;
	if (n > len)
		n = len;
	memcpy(buf, st->body + st->off, n);
	st->off += n;
	if (st->off == st->body_len)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

static int
handle(nghttp2_session *s, int32_t id, struct stream *st, long tid)
{
	char seen[33], clen[16];
	nghttp2_data_provider prd;
	nghttp2_nv hdrs[2] = {
		{(uint8_t *)":status", (uint8_t *)"200", 7, 3, NGHTTP2_NV_FLAG_NONE},
		{(uint8_t *)"content-length", (uint8_t *)clen, 14, 0,
		 NGHTTP2_NV_FLAG_NONE},
	};

	seen_trace(seen);
	serve_say("REQ %ld %d %s %s %u %s %s\n", tid, id, st->method, st->path,
		  st->n_tp, st->tp, seen);
	serve_maybe_block(tid, st->path);
	st->body_len =
		(size_t)snprintf(st->body, sizeof(st->body), "path=%s\n", st->path);
	hdrs[1].valuelen = (size_t)snprintf(clen, sizeof(clen), "%zu", st->body_len);
	prd.source.ptr = st;
	prd.read_callback = read_body;
	return nghttp2_submit_response(s, id, hdrs, 2, &prd);
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
	if (handle(s, f->hd.stream_id, st, c->tid) != 0)
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
	nghttp2_session_server_new(&s, cbs, &c);
	nghttp2_session_callbacks_del(cbs);
	nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, &set, 1);
	serve_say("CONN %ld\n", c.tid);
	while (nghttp2_session_want_read(s) || nghttp2_session_want_write(s)) {
		ssize_t n;

		if (h2_flush(s, c.fd) < 0)
			break;
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
		} else {
			fprintf(stderr, "h2-server: unknown option %s\n", argv[i]);
			return 64;
		}
	}
	return serve_forever("h2-server", serve, true);
}
