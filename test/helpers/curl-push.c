/* SPDX-License-Identifier: Apache-2.0 */
/* curl-push: HTTP/2 server push to a libcurl client (CURLMOPT_PUSHFUNCTION),
 * for hooks/hook-curl.c: libcurl makes the pushed handle itself
 * (curl_easy_duphandle() through its PLT), a copy of the parent with the
 * application's CURLOPT_HTTPHEADER list.  No tracing code.
 *
 *   curl-push keep|reuse|deny
 *
 * A server thread (nghttp2, h2c with prior knowledge on 127.0.0.1) answers
 * every request; for "/page" it first promises "/pushed" and then resets
 * that stream (libcurl 7.88.1 crashes on a pushed stream's response
 * HEADERS, with or without the shim).  The client (the main thread):
 * /before-push, then /page with X-App: parent on a multi handle whose
 * push callback accepts the push ("deny": refuses it), then
 * /after-push-no-list and /after-push-own-list (X-App: own) on new handles;
 * "reuse": the pushed handle is kept and used for /reuse-pushed-handle.
 * The URLs name push.test on port 80 and CURLOPT_CONNECT_TO leads them to
 * the server's port: libcurl 7.88.1 refuses a push whose :authority has a
 * port.  The server prints, per request:
 *
 *   REQ <path> x-app=<value|-> tp=<0|1>
 *
 * (tp: a traceparent field arrived), and the client "PUSHED <n>", "DONE".
 * Exits 1 on a failure. */
#include "config.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "h2-common.h"
#include "listen-loopback.h"

/* ---- server ---- */

struct req {
	int32_t id;
	bool used, tp;
	char path[256], app[64], auth[128];
};

static struct req reqs[16];
static int srv_fd, listen_fd;

static void __attribute__((noreturn)) fail(const char *what)
{
	printf("FAILED %s\n", what);
	fflush(stdout);
	exit(1);
}

static struct req *
req_of(int32_t id, bool create)
{
	int i;

	for (i = 0; i < 16; i++)
		if (reqs[i].used && reqs[i].id == id)
			return &reqs[i];
	if (!create)
		return NULL;
	for (i = 0; i < 16; i++)
		if (!reqs[i].used) {
			memset(&reqs[i], 0, sizeof(reqs[i]));
			reqs[i].used = true;
			reqs[i].id = id;
			strcpy(reqs[i].app, "-");
			return &reqs[i];
		}
	return NULL;
}

static int
srv_begin(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	(void)s, (void)ud;
	if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST)
		(void)req_of(f->hd.stream_id, true);
	return 0;
}

static void
copy(char *dst, size_t cap, const uint8_t *v, size_t vl)
{
	snprintf(dst, cap, "%.*s", (int)vl, (const char *)v);
}

static int
srv_header(nghttp2_session *s,
	   const nghttp2_frame *f,
	   const uint8_t *n,
	   size_t nl,
	   const uint8_t *v,
	   size_t vl,
	   uint8_t flags,
	   void *ud)
{
	struct req *r = req_of(f->hd.stream_id, false);

	(void)s, (void)flags, (void)ud;
	if (!r)
		return 0;
	if (nl == 5 && !memcmp(n, ":path", 5))
		copy(r->path, sizeof(r->path), v, vl);
	else if (nl == 10 && !memcmp(n, ":authority", 10))
		copy(r->auth, sizeof(r->auth), v, vl);
	else if (nl == 5 && !memcmp(n, "x-app", 5))
		copy(r->app, sizeof(r->app), v, vl);
	else if (nl == 11 && !memcmp(n, "traceparent", 11))
		r->tp = true;
	return 0;
}

static ssize_t
srv_body(nghttp2_session *s,
	 int32_t id,
	 uint8_t *buf,
	 size_t len,
	 uint32_t *flags,
	 nghttp2_data_source *src,
	 void *ud)
{
	(void)s, (void)id, (void)ud, (void)src;
	if (len < 5)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	memcpy(buf, "body\n", 5);
	*flags |= NGHTTP2_DATA_FLAG_EOF;
	return 5;
}

static int
srv_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	static const nghttp2_nv status[] = {
		{(uint8_t *)":status", (uint8_t *)"200", 7, 3, 0}};
	nghttp2_data_provider body = {.read_callback = srv_body};
	struct req *r;

	(void)ud;
	if (f->hd.type != NGHTTP2_HEADERS || !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
		return 0;
	r = req_of(f->hd.stream_id, false);
	if (!r)
		return 0;
	printf("REQ %s x-app=%s tp=%d\n", r->path, r->app, r->tp);
	fflush(stdout);
	if (!strcmp(r->path, "/page")) {
		nghttp2_nv p[] = {
			{(uint8_t *)":method", (uint8_t *)"GET", 7, 3, 0},
			{(uint8_t *)":path", (uint8_t *)"/pushed", 5, 7, 0},
			{(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
			{(uint8_t *)":authority", (uint8_t *)r->auth, 10,
			 strlen(r->auth), 0},
		};
		int32_t pid =
			nghttp2_submit_push_promise(s, 0, f->hd.stream_id, p, 4, NULL);

		if (pid <= 0)
			fail("nghttp2_submit_push_promise");
		(void)nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, pid,
						NGHTTP2_CANCEL);
	}
	(void)nghttp2_submit_response(s, f->hd.stream_id, status, 1, &body);
	r->used = false;
	return 0;
}

static void *
server(void *arg)
{
	nghttp2_session_callbacks *cb;

	(void)arg;
	if (nghttp2_session_callbacks_new(&cb) != 0)
		fail("nghttp2_session_callbacks_new");
	nghttp2_session_callbacks_set_on_begin_headers_callback(cb, srv_begin);
	nghttp2_session_callbacks_set_on_header_callback(cb, srv_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, srv_frame_recv);
	for (;;) {
		nghttp2_settings_entry se[] = {
			{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100}};
		nghttp2_session *s;
		uint8_t buf[16384];
		ssize_t n;

		srv_fd = accept(listen_fd, NULL, NULL);
		if (srv_fd < 0)
			return NULL;
		memset(reqs, 0, sizeof(reqs));
		if (nghttp2_session_server_new(&s, cb, NULL) != 0)
			fail("nghttp2_session_server_new");
		(void)nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, se, 1);
		(void)h2_flush(s, srv_fd);
		while ((n = recv(srv_fd, buf, sizeof(buf), 0)) > 0)
			if (nghttp2_session_mem_recv(s, buf, (size_t)n) < 0 ||
			    h2_flush(s, srv_fd) < 0)
				break;
		nghttp2_session_del(s);
		close(srv_fd);
	}
}

/* ---- client ---- */

static struct curl_slist *connect_to;
static bool deny;
static int pushes;

static size_t
sink(char *p, size_t size, size_t n, void *ud)
{
	(void)p, (void)ud;
	return size * n;
}

static int
on_push(CURL *parent, CURL *easy, size_t n, struct curl_pushheaders *h, void *ud)
{
	(void)parent, (void)n, (void)h, (void)ud;
	if (deny)
		return CURL_PUSH_DENY;
	curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, sink);
	pushes++;
	return CURL_PUSH_OK;
}

static CURL *
handle(const char *path, struct curl_slist *list)
{
	char url[256];
	CURL *c = curl_easy_init();

	if (!c)
		fail("curl_easy_init");
	snprintf(url, sizeof(url), "http://push.test%s", path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTP_VERSION,
			 (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
	curl_easy_setopt(c, CURLOPT_CONNECT_TO, connect_to);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
	if (list)
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
	return c;
}

static void
get(const char *path, struct curl_slist *list)
{
	CURL *c = handle(path, list);

	if (curl_easy_perform(c) != CURLE_OK)
		fail(path);
	curl_easy_cleanup(c);
}

int
main(int argc, char **argv)
{
	struct sockaddr_in a;
	struct curl_slist *parent = curl_slist_append(NULL, "X-App: parent");
	struct curl_slist *own = curl_slist_append(NULL, "X-App: own");
	bool reuse = argc > 1 && !strcmp(argv[1], "reuse");
	CURL *page, *kept = NULL;
	char to[64];
	int running = 1, q;
	pthread_t t;
	CURLMsg *msg;
	CURLM *m;

	deny = argc > 1 && !strcmp(argv[1], "deny");
	listen_fd = listen_loopback(4, SOCK_CLOEXEC, &a);
	if (listen_fd < 0)
		fail("listen");
	snprintf(to, sizeof(to), "push.test:80:127.0.0.1:%u", ntohs(a.sin_port));
	connect_to = curl_slist_append(NULL, to);
	if (!parent || !own || !connect_to || pthread_create(&t, NULL, server, NULL))
		fail("setup");
	curl_global_init(CURL_GLOBAL_DEFAULT);
	get("/before-push", NULL);

	m = curl_multi_init();
	curl_multi_setopt(m, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
	curl_multi_setopt(m, CURLMOPT_PUSHFUNCTION, on_push);
	page = handle("/page", parent);
	curl_multi_add_handle(m, page);
	while (running) {
		if (curl_multi_perform(m, &running) != CURLM_OK)
			fail("curl_multi_perform");
		while ((msg = curl_multi_info_read(m, &q))) {
			CURL *e = msg->easy_handle;

			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_multi_remove_handle(m, e);
			if (e != page && reuse)
				kept = e;
			else if (e != page)
				curl_easy_cleanup(e);
		}
		if (running)
			curl_multi_poll(m, NULL, 0, 1000, NULL);
	}
	curl_easy_cleanup(page);
	curl_multi_cleanup(m);
	printf("PUSHED %d\n", pushes);
	get("/after-push-no-list", NULL);
	get("/after-push-own-list", own);
	if (kept) {
		/* A handle like any other now: a transfer of its own, with the
		 * list it was copied with. */
		curl_easy_setopt(kept, CURLOPT_URL,
				 "http://push.test/reuse-pushed-handle");
		if (curl_easy_perform(kept) != CURLE_OK)
			fail("reuse");
		curl_easy_cleanup(kept);
	}
	curl_global_cleanup();
	curl_slist_free_all(parent);
	curl_slist_free_all(own);
	curl_slist_free_all(connect_to);
	printf("DONE\n");
	fflush(stdout);
	/* The server thread blocks in accept(): exit without joining it. */
	_exit(0);
}
