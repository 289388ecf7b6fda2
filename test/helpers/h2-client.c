/* SPDX-License-Identifier: Apache-2.0 */
/* An HTTP/2 client on libnghttp2 with no tracing code, for the tests of
 * hooks/hook-nghttp2.c: cleartext HTTP/2 with prior knowledge to
 * 127.0.0.1:PORT, all requests as concurrent streams of one connection.
 *
 *   h2-client [-s] PORT REQUEST...
 *     REQUEST  [+]PATH[@TRACEPARENT][^TRACESTATE]
 *              "+": a POST whose body is sent only after the header blocks
 *              of all requests; "@": send this traceparent field; "^":
 *              send this tracestate field
 *     -s       open the streams with nghttp2_submit_headers (and send
 *              no bodies) instead of nghttp2_submit_request
 *
 * Prints "RESP <path> <status> <body>" for each response (body without
 * its newline) and "DONE <failures>". */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "h2-common.h"

#define MAX_REQ 32

struct req {
	char path[256];
	char tp[128];
	const char *ts;
	bool post, released;
	int32_t id;
	char status[8];
	char body[600];
	size_t body_len;
	bool done;
};

static struct req reqs[MAX_REQ];
static int n_reqs, n_done;

static struct req *
find(int32_t id)
{
	int i;

	for (i = 0; i < n_reqs; i++)
		if (reqs[i].id == id)
			return &reqs[i];
	return NULL;
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
	struct req *r = find(f->hd.stream_id);

	(void)s;
	(void)flags;
	(void)ud;
	if (r && nlen == 7 && memcmp(name, ":status", 7) == 0 &&
	    vlen < sizeof(r->status)) {
		memcpy(r->status, value, vlen);
		r->status[vlen] = '\0';
	}
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
	struct req *r = find(id);

	(void)s;
	(void)flags;
	(void)ud;
	if (r && len < sizeof(r->body) - r->body_len) {
		memcpy(r->body + r->body_len, data, len);
		r->body_len += len;
	}
	return 0;
}

static int
on_stream_close(nghttp2_session *s, int32_t id, uint32_t err, void *ud)
{
	struct req *r = find(id);

	(void)s;
	(void)err;
	(void)ud;
	if (r && !r->done) {
		if (r->body_len && r->body[r->body_len - 1] == '\n')
			r->body_len--;
		printf("RESP %s %s %.*s\n", r->path, r->status[0] ? r->status : "-",
		       (int)r->body_len, r->body);
		fflush(stdout);
		r->done = true;
		n_done++;
	}
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
	struct req *r = src->ptr;

	(void)s;
	(void)id;
	(void)ud;
	if (!r->released)
		return NGHTTP2_ERR_DEFERRED;
	if (len < 5)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	memcpy(buf, "hello", 5);
	*flags |= NGHTTP2_DATA_FLAG_EOF;
	return 5;
}

int
main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	nghttp2_session_callbacks *cbs;
	nghttp2_session *s;
	uint8_t buf[16384];
	bool use_headers = false;
	int fd, i, one = 1, argi = 1;

	if (argi < argc && strcmp(argv[argi], "-s") == 0) {
		use_headers = true;
		argi++;
	}
	if (argc - argi < 2 || argc - argi - 1 > MAX_REQ) {
		fprintf(stderr, "usage: h2-client [-s] PORT REQUEST...\n");
		return 64;
	}
	a.sin_port = htons((uint16_t)atoi(argv[argi]));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("h2-client: connect");
		return 1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	nghttp2_session_callbacks_new(&cbs);
	nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs,
								  on_data_chunk_recv);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
	nghttp2_session_client_new(&s, cbs, NULL);
	nghttp2_session_callbacks_del(cbs);
	nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, NULL, 0);

	for (i = argi + 1; i < argc; i++) {
		struct req *r = &reqs[n_reqs++];
		const char *p = argv[i], *caret = strchr(p, '^'), *at;
		nghttp2_nv nva[6];
		size_t n = 0, plen, end;
		nghttp2_data_provider prd = {.source.ptr = r,
					     .read_callback = read_body};

		r->post = *p == '+';
		if (r->post)
			p++;
		/* The tracestate may hold '@' (tenant@vendor keys). */
		end = caret ? (size_t)(caret - p) : strlen(p);
		r->ts = caret ? caret + 1 : NULL;
		at = memchr(p, '@', end);
		plen = at ? (size_t)(at - p) : end;
		if (plen >= sizeof(r->path) || end - plen >= sizeof(r->tp))
			return 64;
		memcpy(r->path, p, plen);
		if (at)
			memcpy(r->tp, at + 1, end - plen - 1);
#define NV(k, v, vl)                                                             \
	nva[n++] = (nghttp2_nv){(uint8_t *)(k), (uint8_t *)(v), strlen(k), (vl), \
				NGHTTP2_NV_FLAG_NONE}
		NV(":method", r->post ? "POST" : "GET", r->post ? 4 : 3);
		NV(":scheme", "http", 4);
		NV(":authority", "127.0.0.1", 9);
		NV(":path", r->path, plen);
		if (at)
			NV("traceparent", r->tp, strlen(r->tp));
		if (r->ts)
			NV("tracestate", r->ts, strlen(r->ts));
#undef NV
		if (use_headers)
			r->id = nghttp2_submit_headers(s, NGHTTP2_FLAG_END_STREAM, -1,
						       NULL, nva, n, NULL);
		else
			r->id = nghttp2_submit_request(s, NULL, nva, n,
						       r->post ? &prd : NULL, NULL);
		if (r->id < 0) {
			fprintf(stderr, "h2-client: submit: %s\n",
				nghttp2_strerror(r->id));
			return 1;
		}
	}
	/* All header blocks go out before any deferred body. */
	if (h2_flush(s, fd) < 0)
		return 1;
	for (i = 0; i < n_reqs; i++)
		if (reqs[i].post) {
			reqs[i].released = true;
			nghttp2_session_resume_data(s, reqs[i].id);
		}
	while (n_done < n_reqs) {
		ssize_t n;

		if (h2_flush(s, fd) < 0)
			break;
		n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || nghttp2_session_mem_recv(s, buf, (size_t)n) < 0)
			break;
	}
	nghttp2_session_del(s);
	close(fd);
	printf("DONE %d\n", n_reqs - n_done);
	return n_done == n_reqs ? 0 : 1;
}
