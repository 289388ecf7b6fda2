/* SPDX-License-Identifier: Apache-2.0 */
/* libevent evhttp: the request's context is published while the
 * application's request callback runs.
 *
 * evhttp_set_cb() and evhttp_set_gencb() register our callback with a
 * small wrapper {callback, arg} in place of the application's.  Wrappers
 * are freed when the callback goes away: evhttp_del_cb(), a new generic
 * callback, or evhttp_free().  evhttp_free() frees the server's virtual
 * hosts with a direct internal call (no PLT relocation for it in the
 * Debian 12 build), so we follow evhttp_add_virtual_host() and
 * evhttp_remove_virtual_host() to free their wrappers as well.  libevent
 * calls evhttp_set_cb()/evhttp_del_cb() through the PLT for evrpc, so RPC
 * handlers are covered too.
 *
 * evhttp calls a callback once per request, with the whole head (and by
 * default the body) read, so the context is built per call: the socket
 * level's context for the request on the connection's fd when it has one
 * (one request, one span-id), else one from evhttp's parsed headers.
 *
 * Work evhttp hands back later for the same request runs with its context
 * too: the callback of evhttp_send_reply_chunk_with_cb(), which evhttp
 * runs on the loop thread once the chunk is written and which typically
 * writes the next one (a streamed reply), and the completion callback of
 * evhttp_request_set_on_complete_cb().  From the first such call made
 * while the request's callback (or one of ours for it) runs, the hook
 * keeps the request's context in a struct evh_req, passed as the
 * argument of our callbacks, and frees it when libevent frees the request
 * (evhttp_request_free(), called through libevent's PLT: see
 * hook_evhttp_request_free()).
 *
 * A callback the application defers with event_base_once() (a zero timer
 * from a request callback that answers later, as an asynchronous backend
 * does) runs with the context of the thread that scheduled it, when that
 * thread had one: the hook captures it (hook_scope_capture(), as the
 * thread-pool hooks do at submission) into a wrapper that libevent keeps
 * as the once event's argument, in its private struct event_once, where
 * the application never sees it.  The wrapper publishes it around the
 * callback, restores what the thread showed before (hook_scope_restore(),
 * as hook-pool-uv.c's after-work callback does on a loop thread) and frees
 * itself.  Scheduled without a context, the callback is passed on as it
 * is and runs with whatever the loop thread shows.  libevent frees a once
 * event still pending when its base is freed, without calling it
 * (event.c: event_base_free_(), 2.1.12): the hook keeps the wrappers in a
 * list and frees the base's after event_base_free() and
 * event_base_free_nofinalize(). */
#include "config.h"

#include "hooks.h"

#include "hook-http.h"
#include "log.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

/* uthash's default on a failed allocation is exit(): never in a host
 * process.  Non-fatal mode leaves the element out (hh.tbl == NULL). */
#define HASH_NONFATAL_OOM 1
#include <uthash.h>

typedef void (*evh_cb_fn)(struct evhttp_request *, void *);
typedef void (*evh_conn_cb_fn)(struct evhttp_connection *, void *);
typedef void (*evh_chunk_fn)(struct evhttp_request *,
			     struct evbuffer *,
			     evh_conn_cb_fn,
			     void *);
typedef void (*evh_on_complete_fn)(struct evhttp_request *, evh_cb_fn, void *);
typedef void (*evh_req_free_fn)(struct evhttp_request *);
typedef int (*evh_req_code_fn)(const struct evhttp_request *);
typedef size_t (*evh_buf_len_fn)(const struct evbuffer *);
typedef int (*evh_set_cb_fn)(struct evhttp *, const char *, evh_cb_fn, void *);
typedef int (*evh_del_cb_fn)(struct evhttp *, const char *);
typedef void (*evh_set_gencb_fn)(struct evhttp *, evh_cb_fn, void *);
typedef void (*evh_free_fn)(struct evhttp *);
typedef int (*evh_add_vhost_fn)(struct evhttp *, const char *, struct evhttp *);
typedef int (*evh_remove_vhost_fn)(struct evhttp *, struct evhttp *);
typedef struct evhttp_connection *(*evh_req_conn_fn)(struct evhttp_request *);
typedef struct bufferevent *(*evh_conn_bev_fn)(struct evhttp_connection *);
typedef evutil_socket_t (*evh_bev_fd_fn)(struct bufferevent *);
typedef struct evkeyvalq *(*evh_req_headers_fn)(struct evhttp_request *);
typedef enum evhttp_cmd_type (*evh_req_command_fn)(const struct evhttp_request *);
typedef const char *(*evh_req_uri_fn)(const struct evhttp_request *);
typedef ev_uint32_t (*evh_version_fn)(void);

/* Set once the real functions are found; until then every call retries. */
static int evh_bound;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static evh_set_cb_fn real_set_cb_fn;
static evh_del_cb_fn real_del_cb_fn;
static evh_set_gencb_fn real_set_gencb_fn;
static evh_free_fn real_free_fn;
static evh_add_vhost_fn real_add_vhost_fn;
static evh_remove_vhost_fn real_remove_vhost_fn;
static evh_req_conn_fn real_req_conn_fn;
static evh_conn_bev_fn real_conn_bev_fn;
static evh_bev_fd_fn real_bev_fd_fn;
static evh_req_headers_fn real_req_headers_fn;
static evh_req_command_fn real_req_command_fn;
static evh_req_uri_fn real_req_uri_fn;
static evh_chunk_fn real_chunk_fn;
static evh_on_complete_fn real_on_complete_fn;
static evh_req_free_fn real_req_free_fn;
static evh_req_code_fn real_req_code_fn;
static evh_buf_len_fn real_buf_len_fn;
/* Set at binding: libevent 2.2 or later (evh_method_name()). */
static bool evh_webdav;

/* One registered callback of the application. */
struct evh_wrap {
	evh_cb_fn cb;
	void *arg;
	struct evhttp *http;
	char *path; /* NULL: the generic callback */
	struct evh_wrap *next;
};

/* A virtual host and the server it belongs to. */
struct evh_vhost {
	struct evhttp *vhost;
	struct evhttp *parent;
	struct evh_vhost *next;
};

/* A request whose later callbacks ours stand in for: its context as its
 * request callback showed it, and the application's callbacks.  At most
 * one per request.  A request's callbacks run on its connection's loop
 * thread, one at a time, which is also where the application calls evhttp
 * for it (evhttp itself takes no lock there): the fields are written and
 * read there only; evh_lock guards the table. */
struct evh_req {
	struct evhttp_request *req; /* key */
	int fd;
	evh_conn_cb_fn chunk_cb;
	void *chunk_arg;
	evh_cb_fn done_cb;
	void *done_arg;
	struct ctxshim_ctx ctx;
	UT_hash_handle hh;
};

static pthread_mutex_t evh_lock = PTHREAD_MUTEX_INITIALIZER;
static struct evh_wrap *evh_wraps;   /* under evh_lock */
static struct evh_vhost *evh_vhosts; /* under evh_lock */
static struct evh_req *evh_reqs;     /* under evh_lock */
/* HASH_COUNT(evh_reqs), read without the lock: the free of a request of
 * an application that never streams takes no lock. */
static unsigned evh_nreqs;

/* The request whose callback, or one of ours for it, runs on this thread
 * (NULL: none), and the span-id it published for it: a call of the
 * application made there is for that request while the thread still
 * shows that span.  A jump out of the callback leaves them set; the span
 * check keeps a later call elsewhere from taking what the thread shows
 * then for the request's context. */
static __thread struct evhttp_request *evh_cur
	__attribute__((tls_model("initial-exec")));
static __thread uint8_t evh_cur_span[8] __attribute__((tls_model("initial-exec")));

HOOK_EXPORT int
evhttp_set_cb(struct evhttp *http, const char *path, evh_cb_fn cb, void *cb_arg);
HOOK_EXPORT int evhttp_del_cb(struct evhttp *http, const char *path);
HOOK_EXPORT void evhttp_set_gencb(struct evhttp *http, evh_cb_fn cb, void *arg);
HOOK_EXPORT void evhttp_free(struct evhttp *http);
HOOK_EXPORT int
evhttp_add_virtual_host(struct evhttp *http, const char *pattern, struct evhttp *vhost);
HOOK_EXPORT int evhttp_remove_virtual_host(struct evhttp *http, struct evhttp *vhost);
HOOK_EXPORT void evhttp_send_reply_chunk_with_cb(struct evhttp_request *req,
						 struct evbuffer *databuf,
						 evh_conn_cb_fn cb,
						 void *arg);
HOOK_EXPORT void
evhttp_request_set_on_complete_cb(struct evhttp_request *req, evh_cb_fn cb, void *arg);
HOOK_EXPORT void evhttp_request_free(struct evhttp_request *req);

static void hook_evhttp_callback(struct evhttp_request *req, void *p);

/* evhttp is in libevent-2.1.so.7 and in libevent_extra-2.1.so.7 (Debian
 * 12, nm -D), in libevent 2.2 in libevent-2.2.so.1 and
 * libevent_extra-2.2.so.1 (the names its libtool and CMake builds give);
 * a handle of libevent_extra also finds libevent_core's
 * bufferevent_getfd() through its dependencies. */
static const char *const evh_sonames[] = {
	"libevent-2.1.so.7", "libevent_extra-2.1.so.7", "libevent-2.2.so.1",
	"libevent_extra-2.2.so.1", NULL};

/* A caller with its own libevent (bind.h) is passed to it. */
static const char *const evh_names[] = {"evhttp_set_cb",
					"evhttp_del_cb",
					"evhttp_set_gencb",
					"evhttp_free",
					"evhttp_add_virtual_host",
					"evhttp_remove_virtual_host",
					"evhttp_send_reply_chunk_with_cb",
					"evhttp_request_free",
					"evhttp_request_set_on_complete_cb"};
static const void *const evh_selves[] = {
	(const void *)evhttp_set_cb,
	(const void *)evhttp_del_cb,
	(const void *)evhttp_set_gencb,
	(const void *)evhttp_free,
	(const void *)evhttp_add_virtual_host,
	(const void *)evhttp_remove_virtual_host,
	(const void *)evhttp_send_reply_chunk_with_cb,
	(const void *)evhttp_request_free,
	(const void *)evhttp_request_set_on_complete_cb};
static struct ctxshim_callers evh_callers = {
	.names = evh_names, .n = 9, .selves = evh_selves};

static void *
evh_find(const char *name, const void *self)
{
	return ctxshim_bind_loaded(evh_sonames, name, NULL, self);
}

static void *
evh_bind_opt(const char *name)
{
	/* Not hooked: our callback stands in for "self" so that a binding
	 * can never come back to the shim. */
	return evh_find(name, (const void *)hook_evhttp_callback);
}

/* A child forked while another thread held the lock would never get it;
 * hold it across fork() instead. */
static void
evh_atfork_prepare(void)
{
	pthread_mutex_lock(&evh_lock);
}

static void
evh_atfork_release(void)
{
	pthread_mutex_unlock(&evh_lock);
}

static void
evh_atfork_register(void)
{
	(void)pthread_atfork(evh_atfork_prepare, evh_atfork_release,
			     evh_atfork_release);
}

/* libevent is optional: an application that does not link it never calls
 * these hooks.  Functions we only call are found the same way, so the
 * shim itself never depends on the library.  A libevent loaded RTLD_LOCAL
 * as a plugin's dependency is invisible to RTLD_NEXT, yet the plugin's
 * calls reach our exported names: then we find it by soname
 * (ctxshim_bind_loaded()).  If it is not loaded at all, nothing is stored
 * and the next call tries again. */
static void
hook_evhttp_bind_slow(void)
{
	static int logged;
	int saved_errno = errno;
	void *set_cb, *del_cb, *gencb, *fr, *add_vh, *rm_vh, *chunk, *req_free,
		*on_complete;
	evh_version_fn ver;

	set_cb = evh_find("evhttp_set_cb", (const void *)evhttp_set_cb);
	gencb = set_cb ? evh_find("evhttp_set_gencb", (const void *)evhttp_set_gencb)
		       : NULL;
	fr = gencb ? evh_find("evhttp_free", (const void *)evhttp_free) : NULL;
	if (!fr) {
		if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
			ctxshim_log(
				"libevent: evhttp_set_cb/evhttp_set_gencb not found "
				"(yet)");
		errno = saved_errno;
		return;
	}
	del_cb = evh_find("evhttp_del_cb", (const void *)evhttp_del_cb);
	add_vh = evh_find("evhttp_add_virtual_host",
			  (const void *)evhttp_add_virtual_host);
	rm_vh = evh_find("evhttp_remove_virtual_host",
			 (const void *)evhttp_remove_virtual_host);
	chunk = evh_find("evhttp_send_reply_chunk_with_cb",
			 (const void *)evhttp_send_reply_chunk_with_cb);
	req_free = evh_find("evhttp_request_free", (const void *)evhttp_request_free);
	on_complete = evh_find("evhttp_request_set_on_complete_cb",
			       (const void *)evhttp_request_set_on_complete_cb);
	/* Threads racing here store the same values. */
	__atomic_store_n(&real_req_conn_fn,
			 (evh_req_conn_fn)evh_bind_opt("evhttp_request_get_connection"),
			 __ATOMIC_RELAXED);
	__atomic_store_n(
		&real_conn_bev_fn,
		(evh_conn_bev_fn)evh_bind_opt("evhttp_connection_get_bufferevent"),
		__ATOMIC_RELAXED);
	__atomic_store_n(&real_bev_fd_fn,
			 (evh_bev_fd_fn)evh_bind_opt("bufferevent_getfd"),
			 __ATOMIC_RELAXED);
	__atomic_store_n(
		&real_req_headers_fn,
		(evh_req_headers_fn)evh_bind_opt("evhttp_request_get_input_headers"),
		__ATOMIC_RELAXED);
	__atomic_store_n(&real_req_command_fn,
			 (evh_req_command_fn)evh_bind_opt("evhttp_request_get_command"),
			 __ATOMIC_RELAXED);
	__atomic_store_n(&real_req_uri_fn,
			 (evh_req_uri_fn)evh_bind_opt("evhttp_request_get_uri"),
			 __ATOMIC_RELAXED);
	__atomic_store_n(
		&real_req_code_fn,
		(evh_req_code_fn)evh_bind_opt("evhttp_request_get_response_code"),
		__ATOMIC_RELAXED);
	__atomic_store_n(&real_buf_len_fn,
			 (evh_buf_len_fn)evh_bind_opt("evbuffer_get_length"),
			 __ATOMIC_RELAXED);
	ver = (evh_version_fn)evh_bind_opt("event_get_version_number");
	__atomic_store_n(&evh_webdav, ver && ver() >= 0x02020000, __ATOMIC_RELAXED);
	__atomic_store_n(&real_set_cb_fn, (evh_set_cb_fn)set_cb, __ATOMIC_RELAXED);
	__atomic_store_n(&real_del_cb_fn, (evh_del_cb_fn)del_cb, __ATOMIC_RELAXED);
	__atomic_store_n(&real_set_gencb_fn, (evh_set_gencb_fn)gencb, __ATOMIC_RELAXED);
	__atomic_store_n(&real_free_fn, (evh_free_fn)fr, __ATOMIC_RELAXED);
	__atomic_store_n(&real_add_vhost_fn, (evh_add_vhost_fn)add_vh,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&real_remove_vhost_fn, (evh_remove_vhost_fn)rm_vh,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&real_chunk_fn, (evh_chunk_fn)chunk, __ATOMIC_RELAXED);
	__atomic_store_n(&real_req_free_fn, (evh_req_free_fn)req_free,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&real_on_complete_fn, (evh_on_complete_fn)on_complete,
			 __ATOMIC_RELAXED);
	pthread_once(&atfork_once, evh_atfork_register);
	ctxshim_callers_bound(&evh_callers, set_cb);
	__atomic_store_n(&evh_bound, 1, __ATOMIC_RELEASE);
	errno = saved_errno;
}

static inline void
hook_evhttp_bind(void)
{
	if (!__atomic_load_n(&evh_bound, __ATOMIC_ACQUIRE))
		hook_evhttp_bind_slow();
}

/* Bind now when the library is loaded at start-up, so that a program
 * linked with it makes no dl*() call on its own threads later
 * (preload/bind.c). */
__attribute__((constructor(104))) static void
hook_evhttp_ctor(void)
{
	int saved_errno = errno;

	if (ctxshim_lib_loaded(evh_sonames))
		hook_evhttp_bind();
	errno = saved_errno;
}

static inline int
real_evhttp_set_cb(struct evhttp *http, const char *path, evh_cb_fn cb, void *cb_arg)
{
	hook_evhttp_bind();
	return real_set_cb_fn ? real_set_cb_fn(http, path, cb, cb_arg) : -2;
}

static inline int
real_evhttp_del_cb(struct evhttp *http, const char *path)
{
	hook_evhttp_bind();
	return real_del_cb_fn ? real_del_cb_fn(http, path) : -1;
}

static inline void
real_evhttp_set_gencb(struct evhttp *http, evh_cb_fn cb, void *arg)
{
	hook_evhttp_bind();
	if (real_set_gencb_fn)
		real_set_gencb_fn(http, cb, arg);
}

static inline void
real_evhttp_free(struct evhttp *http)
{
	hook_evhttp_bind();
	if (real_free_fn)
		real_free_fn(http);
}

static inline int
real_evhttp_add_virtual_host(struct evhttp *http,
			     const char *pattern,
			     struct evhttp *vhost)
{
	hook_evhttp_bind();
	return real_add_vhost_fn ? real_add_vhost_fn(http, pattern, vhost) : -1;
}

static inline int
real_evhttp_remove_virtual_host(struct evhttp *http, struct evhttp *vhost)
{
	hook_evhttp_bind();
	return real_remove_vhost_fn ? real_remove_vhost_fn(http, vhost) : -1;
}

static inline void
real_evhttp_send_reply_chunk_with_cb(struct evhttp_request *req,
				     struct evbuffer *databuf,
				     evh_conn_cb_fn cb,
				     void *arg)
{
	hook_evhttp_bind();
	if (real_chunk_fn)
		real_chunk_fn(req, databuf, cb, arg);
}

static inline void
real_evhttp_request_set_on_complete_cb(struct evhttp_request *req,
				       evh_cb_fn cb,
				       void *arg)
{
	hook_evhttp_bind();
	if (real_on_complete_fn)
		real_on_complete_fn(req, cb, arg);
}

static inline void
real_evhttp_request_free(struct evhttp_request *req)
{
	hook_evhttp_bind();
	if (real_req_free_fn)
		real_req_free_fn(req);
}

/* ---- the request's context ---------------------------------------------- */

static int
evh_request_fd(struct evhttp_request *req)
{
	struct evhttp_connection *evcon;
	struct bufferevent *bev;

	if (!real_req_conn_fn || !real_conn_bev_fn || !real_bev_fd_fn)
		return -1;
	evcon = real_req_conn_fn(req);
	bev = evcon ? real_conn_bev_fn(evcon) : NULL;
	return bev ? (int)real_bev_fd_fn(bev) : -1;
}

/* libevent 2.2 gives the WebDAV methods the bits after PATCH (its
 * include/event2/http.h: EVHTTP_REQ_PROPFIND = 1 << 9 up to
 * EVHTTP_REQ_MOVE = 1 << 15), which the 2.1 header we build with does not
 * name.  In 2.1, 1 << 15 is a method it does not know
 * (http-internal.h: EVHTTP_REQ_UNKNOWN_), passed to the callback when
 * the application allows that bit: so these are names from 2.2 on only. */
static const char *const evh_webdav_methods[] = {
	"PROPFIND", "PROPPATCH", "MKCOL", "LOCK", "UNLOCK", "COPY", "MOVE"};

/* The method of a type, or NULL: one evhttp does not know, or one the
 * application added (2.2's evhttp_set_ext_method_cmp()), whose name it
 * does not give. */
static const char *
evh_method_name(enum evhttp_cmd_type cmd)
{
	unsigned v = (unsigned)cmd;

	if (evh_webdav && v >= 1u << 9 && v <= 1u << 15 && (v & (v - 1)) == 0)
		return evh_webdav_methods[__builtin_ctz(v) - 9];
	switch (cmd) {
	case EVHTTP_REQ_GET:
		return "GET";
	case EVHTTP_REQ_POST:
		return "POST";
	case EVHTTP_REQ_HEAD:
		return "HEAD";
	case EVHTTP_REQ_PUT:
		return "PUT";
	case EVHTTP_REQ_DELETE:
		return "DELETE";
	case EVHTTP_REQ_OPTIONS:
		return "OPTIONS";
	case EVHTTP_REQ_TRACE:
		return "TRACE";
	case EVHTTP_REQ_CONNECT:
		return "CONNECT";
	case EVHTTP_REQ_PATCH:
		return "PATCH";
	}
	return NULL;
}

/* The context from evhttp's view of the request: its parsed header list
 * (a TAILQ in arrival order, duplicates kept), the command and the
 * request-target as received. */
static void
evh_build_ctx(struct evhttp_request *req, struct ctxshim_ctx *c)
{
	struct hook_http_headers h;
	const struct evkeyvalq *hdrs;
	const struct evkeyval *kv;
	const char *method = NULL, *uri = NULL;

	hook_http_headers_init(&h);
	hdrs = real_req_headers_fn ? real_req_headers_fn(req) : NULL;
	for (kv = hdrs ? hdrs->tqh_first : NULL; kv; kv = kv->next.tqe_next)
		if (kv->key && kv->value)
			hook_http_header(&h, kv->key, strlen(kv->key), kv->value,
					 strlen(kv->value));
	if (real_req_command_fn) {
		method = evh_method_name(real_req_command_fn(req));
		/* None of the nine the semantic conventions know, but which
		 * one is lost: "_OTHER" without the original, as for a method
		 * too long to keep (request-ctx.h). */
		if (!method) {
			method = "_OTHER";
			h.r.method_cut = true;
		}
	}
	if (real_req_uri_fn)
		uri = real_req_uri_fn(req);
	hook_http_build_ctx(&h, method, uri, c);
}

/* Make req the request whose callback runs on this thread, showing c;
 * what was before goes to *prev_req and prev_span, for evh_cur_pop(). */
static inline void
evh_cur_push(struct evhttp_request *req,
	     const struct ctxshim_ctx *c,
	     struct evhttp_request **prev_req,
	     uint8_t prev_span[8])
{
	*prev_req = evh_cur;
	memcpy(prev_span, evh_cur_span, 8);
	evh_cur = req;
	memcpy(evh_cur_span, c->span_id, 8);
}

static inline void
evh_cur_pop(struct evhttp_request *prev_req, const uint8_t prev_span[8])
{
	evh_cur = prev_req;
	memcpy(evh_cur_span, prev_span, 8);
}

static void
hook_evhttp_callback(struct evhttp_request *req, void *p)
{
	const struct evh_wrap *w = p;
	/* The callback may delete itself (and so free w). */
	evh_cb_fn cb = w->cb;
	void *arg = w->arg;
	struct hook_http_saved sv;
	struct ctxshim_ctx c;
	struct evhttp_request *prev_req;
	uint8_t prev_span[8];
	int saved_errno, fd;

	if (!ctxshim_active() || !req) {
		cb(req, arg);
		return;
	}
	saved_errno = errno;
	fd = evh_request_fd(req);
	evh_build_ctx(req, &c);
	hook_http_adopt_socket_ctx(fd, &c);
	hook_http_enter(fd, &c, &sv, "evhttp-callback");
	evh_cur_push(req, &c, &prev_req, prev_span);
	errno = saved_errno;

	cb(req, arg);

	saved_errno = errno;
	evh_cur_pop(prev_req, prev_span);
	hook_http_leave(fd, &c, &sv, "evhttp-restore", "evhttp-return");
	errno = saved_errno;
}

/* ---- the request's later callbacks -------------------------------------- */

/* The entry of req, made at the first call for it while its callback, or
 * one of ours for it, runs on this thread: the context is the one the
 * thread shows for the request there.  NULL: none (a first call from
 * elsewhere, such as a timer of the application's; no memory; or no
 * evhttp_request_free() to free it with): the application's callback is
 * passed on as it is. */
static struct evh_req *
evh_req_get(struct evhttp_request *req)
{
	const struct ctxshim_ctx *cur;
	struct evh_req *q;
	bool here;

	pthread_mutex_lock(&evh_lock);
	HASH_FIND_PTR(evh_reqs, &req, q);
	pthread_mutex_unlock(&evh_lock);
	cur = ctxshim_current();
	here = req == evh_cur && cur && memcmp(cur->span_id, evh_cur_span, 8) == 0;
	if (q) {
		/* An entry of another span inside this request's callback was
		 * left by an earlier request at the same address whose free
		 * we did not see (a libevent that frees without its PLT):
		 * this request's context replaces it.  Only this thread uses
		 * the entry of a request it runs. */
		if (here && memcmp(q->ctx.span_id, cur->span_id, 8) != 0) {
			q->fd = evh_request_fd(req);
			ctxshim_ctx_copy(&q->ctx, cur);
		}
		return q;
	}
	if (!here || !__atomic_load_n(&real_req_free_fn, __ATOMIC_RELAXED))
		return NULL;
	q = malloc(sizeof(*q));
	if (!q)
		return NULL;
	q->req = req;
	q->fd = evh_request_fd(req);
	q->chunk_cb = NULL;
	q->done_cb = NULL;
	ctxshim_ctx_copy(&q->ctx, cur);
	pthread_mutex_lock(&evh_lock);
	HASH_ADD_PTR(evh_reqs, req, q);
	__atomic_store_n(&evh_nreqs, HASH_COUNT(evh_reqs), __ATOMIC_RELEASE);
	pthread_mutex_unlock(&evh_lock);
	if (!q->hh.tbl) {
		free(q);
		return NULL;
	}
	return q;
}

/* What one of our callbacks for a request's later work saves around the
 * application's. */
struct evh_later {
	struct hook_http_saved sv;
	struct ctxshim_ctx c;
	struct evhttp_request *prev_req;
	uint8_t prev_span[8];
	int fd;
	bool entered;
};

/* Show the request of q, from a copy: the application's callback may end
 * the request, and q with it (evhttp_send_reply_end() of a reply written
 * at once frees it).  When the thread shows the request already (called
 * from inside another callback of it: evhttp_send_reply_end() of a reply
 * written at once completes the request there), it is left as it is:
 * hook_http_leave() would take it away from the rest of the outer
 * callback. */
static void
evh_later_enter(const struct evh_req *q, struct evh_later *l, const char *reason)
{
	const struct ctxshim_ctx *cur = ctxshim_current();

	l->fd = q->fd;
	ctxshim_ctx_copy(&l->c, &q->ctx);
	l->entered = !cur || !hook_scope_same_span(cur, &l->c);
	if (l->entered)
		hook_http_enter(l->fd, &l->c, &l->sv, reason);
	evh_cur_push(q->req, &l->c, &l->prev_req, l->prev_span);
}

static void
evh_later_leave(const struct evh_later *l, const char *reason)
{
	evh_cur_pop(l->prev_req, l->prev_span);
	if (l->entered)
		hook_http_leave(l->fd, &l->c, &l->sv, "evhttp-restore", reason);
}

/* evhttp calls it on the loop thread from its bufferevent's write
 * callback once the connection's output is written out (http.c:
 * evhttp_write_cb(), libevent 2.1.12): the application's callback
 * typically writes the request's next chunk, or ends the reply. */
static void
evh_chunk_written(struct evhttp_connection *evcon, void *p)
{
	const struct evh_req *q = p;
	evh_conn_cb_fn cb = q->chunk_cb;
	void *arg = q->chunk_arg;
	struct evh_later l;
	int saved_errno;

	if (!ctxshim_active()) {
		cb(evcon, arg);
		return;
	}
	saved_errno = errno;
	evh_later_enter(q, &l, "evhttp-chunk");
	errno = saved_errno;

	cb(evcon, arg);

	saved_errno = errno;
	evh_later_leave(&l, "evhttp-chunk-return");
	errno = saved_errno;
}

/* libevent 2.1.12's evhttp_send_reply_chunk_with_cb() returns without
 * writing, and without taking the callback, for a request without a
 * connection (the client went away), an empty buffer, or a reply without
 * a body (evhttp_response_needs_body(): HEAD; 1xx, 204, 304).  The
 * callback registered before then stays the connection's, and so must its
 * closure: such a call is passed on as it is. */
static bool
evh_chunk_taken(struct evhttp_request *req, struct evbuffer *databuf)
{
	int code;

	if (!real_req_conn_fn || !real_buf_len_fn || !real_req_command_fn ||
	    !real_req_code_fn || !databuf)
		return false;
	if (!real_req_conn_fn(req) || real_buf_len_fn(databuf) == 0 ||
	    real_req_command_fn(req) == EVHTTP_REQ_HEAD)
		return false;
	code = real_req_code_fn(req);
	return code != 204 && code != 304 && (code < 100 || code >= 200);
}

/* evhttp keeps one chunk callback per connection, which each write
 * replaces (http.c: evhttp_write_buffer()), so the request's entry holds
 * the latest one.  evhttp_send_reply_chunk() calls this through
 * libevent's PLT with no callback. */
static void
hook_evhttp_send_reply_chunk_with_cb(struct evhttp_request *req,
				     struct evbuffer *databuf,
				     evh_conn_cb_fn cb,
				     void *arg)
{
	struct evh_req *q = NULL;
	int saved_errno;

	if (!ctxshim_active() || !req || !cb || cb == evh_chunk_written) {
		real_evhttp_send_reply_chunk_with_cb(req, databuf, cb, arg);
		return;
	}
	saved_errno = errno;
	hook_evhttp_bind();
	if (evh_chunk_taken(req, databuf))
		q = evh_req_get(req);
	if (q) {
		q->chunk_cb = cb;
		q->chunk_arg = arg;
	}
	errno = saved_errno;
	if (q)
		real_evhttp_send_reply_chunk_with_cb(req, databuf, evh_chunk_written,
						     q);
	else
		real_evhttp_send_reply_chunk_with_cb(req, databuf, cb, arg);
}

/* evhttp calls it when the reply is written (http.c: evhttp_send_done()),
 * right before it frees the request; not for a request whose client went
 * away. */
static void
evh_completed(struct evhttp_request *req, void *p)
{
	const struct evh_req *q = p;
	evh_cb_fn cb = q->done_cb;
	void *arg = q->done_arg;
	struct evh_later l;
	int saved_errno;

	if (!ctxshim_active()) {
		cb(req, arg);
		return;
	}
	saved_errno = errno;
	evh_later_enter(q, &l, "evhttp-completed");
	errno = saved_errno;

	cb(req, arg);

	saved_errno = errno;
	evh_later_leave(&l, "evhttp-completed-return");
	errno = saved_errno;
}

static void
hook_evhttp_request_set_on_complete_cb(struct evhttp_request *req,
				       evh_cb_fn cb,
				       void *arg)
{
	struct evh_req *q = NULL;
	int saved_errno;

	if (!ctxshim_active() || !req || !cb || cb == evh_completed) {
		real_evhttp_request_set_on_complete_cb(req, cb, arg);
		return;
	}
	saved_errno = errno;
	hook_evhttp_bind();
	q = evh_req_get(req);
	if (q) {
		q->done_cb = cb;
		q->done_arg = arg;
	}
	errno = saved_errno;
	if (q)
		real_evhttp_request_set_on_complete_cb(req, evh_completed, q);
	else
		real_evhttp_request_set_on_complete_cb(req, cb, arg);
}

/* libevent frees each request through its PLT (http.c's
 * evhttp_request_free() calls, evhttp_request_free_auto(): no direct call
 * in the Debian 12 build, objdump -d), the application those it owns.
 * The request's entry goes with it: a new request at its address must not
 * find it.  Unlinked before the real call, freed after (as in
 * hook_evhttp_free()).  None of our callbacks can run for it later: a
 * pending chunk callback is its connection's, which evhttp frees when the
 * client went away (evhttp_connection_fail_() detaches the request, and
 * the application frees it with evhttp_send_reply_end()), and replaces
 * with its own when the reply ends (evhttp_send_reply_end(),
 * evhttp_send()). */
static void
hook_evhttp_request_free(struct evhttp_request *req)
{
	struct evh_req *q = NULL;
	int saved_errno;

	if (req && __atomic_load_n(&evh_nreqs, __ATOMIC_ACQUIRE)) {
		saved_errno = errno;
		pthread_mutex_lock(&evh_lock);
		HASH_FIND_PTR(evh_reqs, &req, q);
		if (q) {
			HASH_DEL(evh_reqs, q);
			__atomic_store_n(&evh_nreqs, HASH_COUNT(evh_reqs),
					 __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&evh_lock);
		errno = saved_errno;
	}
	real_evhttp_request_free(req);
	if (q) {
		saved_errno = errno;
		free(q);
		errno = saved_errno;
	}
}

/* ---- registration ------------------------------------------------------- */

static struct evh_wrap *
evh_wrap_new(evh_cb_fn cb, void *arg, struct evhttp *http, const char *path)
{
	int saved_errno = errno;
	struct evh_wrap *w = calloc(1, sizeof(*w));

	if (w && path) {
		w->path = strdup(path);
		if (!w->path) {
			free(w);
			w = NULL;
		}
	}
	errno = saved_errno;
	if (!w)
		return NULL;
	w->cb = cb;
	w->arg = arg;
	w->http = http;
	return w;
}

static void
evh_wrap_free(struct evh_wrap *w)
{
	int saved_errno = errno;

	if (w) {
		free(w->path);
		free(w);
	}
	errno = saved_errno;
}

static void
evh_wrap_add(struct evh_wrap *w)
{
	pthread_mutex_lock(&evh_lock);
	w->next = evh_wraps;
	evh_wraps = w;
	pthread_mutex_unlock(&evh_lock);
}

/* Unlink the wrapper registered for (http, path), path NULL meaning the
 * generic callback, except keep. */
static struct evh_wrap *
evh_wrap_take(struct evhttp *http, const char *path, const struct evh_wrap *keep)
{
	struct evh_wrap **pp, *w = NULL;

	pthread_mutex_lock(&evh_lock);
	for (pp = &evh_wraps; *pp; pp = &(*pp)->next) {
		struct evh_wrap *x = *pp;

		if (x == keep || x->http != http)
			continue;
		if (path ? (x->path && strcmp(x->path, path) == 0) : !x->path) {
			w = x;
			*pp = x->next;
			break;
		}
	}
	pthread_mutex_unlock(&evh_lock);
	return w;
}

static int
hook_evhttp_set_cb(struct evhttp *http, const char *path, evh_cb_fn cb, void *cb_arg)
{
	struct evh_wrap *w;
	int r;

	if (!ctxshim_active() || !cb || cb == hook_evhttp_callback || !path)
		return real_evhttp_set_cb(http, path, cb, cb_arg);
	/* Without memory for the wrapper, the callback runs unwrapped. */
	w = evh_wrap_new(cb, cb_arg, http, path);
	if (!w)
		return real_evhttp_set_cb(http, path, cb, cb_arg);
	r = real_evhttp_set_cb(http, path, hook_evhttp_callback, w);
	if (r != 0)
		evh_wrap_free(w); /* the path had a callback already, or no memory */
	else
		evh_wrap_add(w);
	return r;
}

static int
hook_evhttp_del_cb(struct evhttp *http, const char *path)
{
	int r = real_evhttp_del_cb(http, path);

	if (r == 0 && path)
		evh_wrap_free(evh_wrap_take(http, path, NULL));
	return r;
}

static void
hook_evhttp_set_gencb(struct evhttp *http, evh_cb_fn cb, void *arg)
{
	struct evh_wrap *w = NULL;

	if (ctxshim_active() && cb && cb != hook_evhttp_callback)
		w = evh_wrap_new(cb, arg, http, NULL);
	if (w) {
		real_evhttp_set_gencb(http, hook_evhttp_callback, w);
		evh_wrap_add(w);
	} else {
		real_evhttp_set_gencb(http, cb, arg);
	}
	/* The previous generic callback is gone. */
	evh_wrap_free(evh_wrap_take(http, NULL, w));
}

static bool
evh_in(struct evhttp *const *set, size_t n, const struct evhttp *http)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (set[i] == http)
			return true;
	return false;
}

/* Forget http, its virtual hosts (recursively) and their wrappers: they
 * are about to be freed by evhttp_free(http).  The pointers are only
 * compared.  Returns the wrappers, unlinked, for the caller to free after
 * the real call: until then the server may still hold them. */
static struct evh_wrap *
evh_forget(struct evhttp *http)
{
	struct evhttp *stack[64];
	struct evh_wrap **pp, *dead = NULL;
	struct evh_vhost **vp;
	size_t n = 0;
	bool grew;

	stack[n++] = http;
	pthread_mutex_lock(&evh_lock);
	/* Collect the vhost tree; nesting deeper than 64 is left to leak. */
	do {
		grew = false;
		for (vp = &evh_vhosts; *vp;) {
			struct evh_vhost *v = *vp;

			if (evh_in(stack, n, v->parent)) {
				if (n < sizeof(stack) / sizeof(stack[0]) &&
				    !evh_in(stack, n, v->vhost)) {
					stack[n++] = v->vhost;
					grew = true;
				}
				*vp = v->next;
				free(v);
				continue;
			}
			vp = &v->next;
		}
	} while (grew);
	/* http itself may be a vhost that its parent no longer holds. */
	for (vp = &evh_vhosts; *vp;) {
		struct evh_vhost *v = *vp;

		if (v->vhost == http) {
			*vp = v->next;
			free(v);
			continue;
		}
		vp = &v->next;
	}
	for (pp = &evh_wraps; *pp;) {
		struct evh_wrap *w = *pp;

		if (evh_in(stack, n, w->http)) {
			*pp = w->next;
			w->next = dead;
			dead = w;
			continue;
		}
		pp = &w->next;
	}
	pthread_mutex_unlock(&evh_lock);
	return dead;
}

static void
hook_evhttp_free(struct evhttp *http)
{
	struct evh_wrap *dead = NULL;
	int saved_errno;

	/* Unlinked before the real call: once it returns, another thread may
	 * create a server at the same address, whose wrappers we must not
	 * take. */
	if (http) {
		saved_errno = errno;
		dead = evh_forget(http);
		errno = saved_errno;
	}
	real_evhttp_free(http);
	saved_errno = errno;
	while (dead) {
		struct evh_wrap *w = dead;

		dead = w->next;
		evh_wrap_free(w);
	}
	errno = saved_errno;
}

static int
hook_evhttp_add_virtual_host(struct evhttp *http,
			     const char *pattern,
			     struct evhttp *vhost)
{
	int r = real_evhttp_add_virtual_host(http, pattern, vhost);
	struct evh_vhost *v;
	int saved_errno;

	if (r != 0 || !ctxshim_active())
		return r;
	saved_errno = errno;
	v = malloc(sizeof(*v));
	if (v) {
		v->vhost = vhost;
		v->parent = http;
		pthread_mutex_lock(&evh_lock);
		v->next = evh_vhosts;
		evh_vhosts = v;
		pthread_mutex_unlock(&evh_lock);
	}
	errno = saved_errno;
	return r;
}

static int
hook_evhttp_remove_virtual_host(struct evhttp *http, struct evhttp *vhost)
{
	int r = real_evhttp_remove_virtual_host(http, vhost);
	struct evh_vhost **vp, *v = NULL;
	int saved_errno;

	if (r != 0)
		return r;
	saved_errno = errno;
	pthread_mutex_lock(&evh_lock);
	for (vp = &evh_vhosts; *vp; vp = &(*vp)->next) {
		if ((*vp)->vhost == vhost && (*vp)->parent == http) {
			v = *vp;
			*vp = v->next;
			break;
		}
	}
	pthread_mutex_unlock(&evh_lock);
	free(v);
	errno = saved_errno;
	return r;
}

/* ---- event_base_once() ------------------------------------------------ */

typedef int (*evo_once_fn)(struct event_base *,
			   evutil_socket_t,
			   short,
			   event_callback_fn,
			   void *,
			   const struct timeval *);
typedef void (*evo_base_free_fn)(struct event_base *);

HOOK_EXPORT int event_base_once(struct event_base *base,
				evutil_socket_t fd,
				short events,
				event_callback_fn cb,
				void *arg,
				const struct timeval *tv);
HOOK_EXPORT void event_base_free(struct event_base *base);
HOOK_EXPORT void event_base_free_nofinalize(struct event_base *base);

/* NULL until found; until then every call retries. */
static evo_once_fn real_once_fn;
static evo_base_free_fn real_base_free_fn, real_base_free_nofin_fn;
/* The code of the libevent that defines it, [lo, hi), once bound: its own
 * once events (event_base_loopexit()'s) run no code of the application's,
 * and are passed on as they are. */
static uintptr_t evo_text_lo, evo_text_hi;

/* event_base_once() is libevent_core's: an application without evhttp may
 * link libevent_core alone. */
static const char *const evo_sonames[] = {"libevent_core-2.1.so.7", "libevent-2.1.so.7",
					  "libevent_core-2.2.so.1", "libevent-2.2.so.1",
					  NULL};

/* A caller with its own libevent (bind.h) is passed to it. */
static const char *const evo_names[] = {"event_base_once", "event_base_free",
					"event_base_free_nofinalize"};
static const void *const evo_selves[] = {(const void *)event_base_once,
					 (const void *)event_base_free,
					 (const void *)event_base_free_nofinalize};
static struct ctxshim_callers evo_callers = {
	.names = evo_names, .n = 3, .selves = evo_selves};

/* One deferred callback of the application and the context it was
 * scheduled with; in evo_pending until it runs or its base is freed. */
struct evo_wrap {
	event_callback_fn cb;
	void *arg;
	struct event_base *base;
	struct evo_wrap *prev, *next;
	bool forgotten; /* by evo_forget(): its caller frees it */
	/* The request whose callback scheduled it (evh_cur, NULL: none): the
	 * callback answers it as if called from there (evh_req_get()).  Its
	 * entry, made at scheduling, tells at the run whether it is still
	 * that request (evo_unlink()). */
	struct evhttp_request *req;
	struct hook_scope scope;
};

static struct evo_wrap *evo_pending; /* under evh_lock */
/* How many are pending, read without the lock: a base freed while none
 * is pending takes no lock. */
static unsigned evo_npending;

static evo_once_fn
evo_bind(void)
{
	evo_once_fn fn = __atomic_load_n(&real_once_fn, __ATOMIC_ACQUIRE);
	int saved_errno;

	if (fn)
		return fn;
	saved_errno = errno;
	fn = (evo_once_fn)ctxshim_bind_loaded(evo_sonames, "event_base_once", NULL,
					      (const void *)event_base_once);
	if (fn) {
		uintptr_t lo, hi;

		if (ctxshim_text_range((const void *)fn, &lo, &hi)) {
			__atomic_store_n(&evo_text_hi, hi, __ATOMIC_RELAXED);
			__atomic_store_n(&evo_text_lo, lo, __ATOMIC_RELAXED);
		}
		__atomic_store_n(&real_base_free_fn,
				 (evo_base_free_fn)ctxshim_bind_loaded(
					 evo_sonames, "event_base_free", NULL,
					 (const void *)event_base_free),
				 __ATOMIC_RELAXED);
		/* (not in libevent 2.0) */
		__atomic_store_n(&real_base_free_nofin_fn,
				 (evo_base_free_fn)ctxshim_bind_loaded(
					 evo_sonames, "event_base_free_nofinalize",
					 NULL,
					 (const void *)event_base_free_nofinalize),
				 __ATOMIC_RELAXED);
		pthread_once(&atfork_once, evh_atfork_register);
		ctxshim_callers_bound(&evo_callers, (const void *)fn);
		__atomic_store_n(&real_once_fn, fn, __ATOMIC_RELEASE);
	}
	errno = saved_errno;
	return fn;
}

/* As hook_evhttp_ctor(). */
__attribute__((constructor(104))) static void
evo_ctor(void)
{
	int saved_errno = errno;

	if (ctxshim_lib_loaded(evo_sonames))
		(void)evo_bind();
	errno = saved_errno;
}

static inline int
real_event_base_once(struct event_base *base,
		     evutil_socket_t fd,
		     short events,
		     event_callback_fn cb,
		     void *arg,
		     const struct timeval *tv)
{
	evo_once_fn fn = evo_bind();

	/* Only reachable without libevent if something calls the name
	 * blindly; libevent's own "invalid arguments" result. */
	if (!fn)
		return -1;
	return fn(base, fd, events, cb, arg, tv);
}

static inline void
real_event_base_free(struct event_base *base)
{
	(void)evo_bind();
	if (real_base_free_fn)
		real_base_free_fn(base);
}

static inline void
real_event_base_free_nofinalize(struct event_base *base)
{
	(void)evo_bind();
	if (real_base_free_nofin_fn)
		real_base_free_nofin_fn(base);
}

static void
evo_link(struct evo_wrap *w)
{
	pthread_mutex_lock(&evh_lock);
	w->prev = NULL;
	w->next = evo_pending;
	if (evo_pending)
		evo_pending->prev = w;
	evo_pending = w;
	__atomic_store_n(&evo_npending, evo_npending + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&evh_lock);
}

/* Under evh_lock. */
static void
evo_unlink_locked(struct evo_wrap *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		evo_pending = w->next;
	if (w->next)
		w->next->prev = w->prev;
	__atomic_store_n(&evo_npending, evo_npending - 1, __ATOMIC_RELEASE);
}

/* Unlink w, unless a free of its base took it (then false: not the
 * caller's to free).  With req, also whether *req still has the entry that
 * the request callback showing span made for it (else *req becomes NULL):
 * the request freed since took its entry along, and a new request at its
 * address has none, or one of its own span.  One critical section for
 * both, as a timer's run needs both. */
static bool
evo_unlink(struct evo_wrap *w, struct evhttp_request **req, const uint8_t span[8])
{
	struct evh_req *q;
	bool mine;

	pthread_mutex_lock(&evh_lock);
	mine = !w->forgotten;
	if (mine)
		evo_unlink_locked(w);
	if (req && *req) {
		HASH_FIND_PTR(evh_reqs, req, q);
		if (!q || memcmp(q->ctx.span_id, span, 8) != 0)
			*req = NULL;
	}
	pthread_mutex_unlock(&evh_lock);
	return mine;
}

/* libevent runs it once, on the loop thread, and never again: the wrapper
 * is freed before the callback, which may free the base. */
static void
evo_run(evutil_socket_t fd, short what, void *p)
{
	struct evo_wrap *w = p;
	event_callback_fn cb = w->cb;
	void *arg = w->arg;
	struct hook_scope prev;
	struct evhttp_request *req = w->req, *prev_req;
	uint8_t prev_span[8];
	int saved_errno = errno;
	bool active = ctxshim_active();
	/* Not ours only if the base's free runs it (libevent 2.1.12 never
	 * does).  A chunk or completion callback the timer sets for the
	 * request that scheduled it runs with that request's context, as when
	 * set from the request's callback; evh_req_get() checks the span as
	 * there.  A request answered and freed before the timer ran is not
	 * taken for a later one that evhttp allocated at its address. */
	bool mine = evo_unlink(w, active ? &req : NULL, w->scope.ctx.span_id);

	if (!active) {
		if (mine)
			free(w);
		errno = saved_errno;
		cb(fd, what, arg);
		return;
	}
	hook_scope_capture(&prev);
	hook_scope_publish(&w->scope, "event-once");
	evh_cur_push(req, &w->scope.ctx, &prev_req, prev_span);
	if (mine)
		free(w);
	errno = saved_errno;

	cb(fd, what, arg);

	saved_errno = errno;
	evh_cur_pop(prev_req, prev_span);
	hook_scope_restore(&prev, "event-once-return");
	errno = saved_errno;
}

static int
hook_evhttp_base_once(struct event_base *base,
		      evutil_socket_t fd,
		      short events,
		      event_callback_fn cb,
		      void *arg,
		      const struct timeval *tv)
{
	struct evo_wrap *w;
	int saved_errno, r;

	if (!ctxshim_active() || !cb || !ctxshim_current())
		return real_event_base_once(base, fd, events, cb, arg, tv);
	saved_errno = errno;
	if (!evo_bind() ||
	    ((uintptr_t)cb >= __atomic_load_n(&evo_text_lo, __ATOMIC_RELAXED) &&
	     (uintptr_t)cb < __atomic_load_n(&evo_text_hi, __ATOMIC_RELAXED))) {
		errno = saved_errno;
		return real_event_base_once(base, fd, events, cb, arg, tv);
	}
	w = malloc(sizeof(*w));
	/* Without memory the callback runs unwrapped, as before. */
	if (!w) {
		errno = saved_errno;
		return real_event_base_once(base, fd, events, cb, arg, tv);
	}
	w->cb = cb;
	w->arg = arg;
	w->base = base;
	w->forgotten = false;
	hook_scope_capture(&w->scope);
	/* Only while the thread still shows the request's span: a jump out
	 * of its callback leaves evh_cur set.  Its entry (evh_req_get(): made
	 * now, freed with the request) lets evo_run() tell it from a later
	 * request at the same address. */
	w->req = NULL;
	if (evh_cur && memcmp(w->scope.ctx.span_id, evh_cur_span, 8) == 0 &&
	    evh_req_get(evh_cur))
		w->req = evh_cur;
	/* Before the call: a loop on another thread may run it at once. */
	evo_link(w);
	errno = saved_errno;
	r = real_event_base_once(base, fd, events, evo_run, w, tv);
	/* Refused (EV_SIGNAL, EV_PERSIST, no memory): libevent keeps
	 * nothing. */
	if (r != 0) {
		saved_errno = errno;
		(void)evo_unlink(w, NULL, NULL);
		free(w);
		errno = saved_errno;
	}
	return r;
}

/* Unlink the wrappers of base's pending once events, for the caller to
 * free after the real call (as hook_evhttp_free() does).  base NULL is
 * libevent's current_base (event_init()): its wrappers are left, lost. */
static struct evo_wrap *
evo_forget(struct event_base *base)
{
	struct evo_wrap *w, *next, *dead = NULL;
	int saved_errno = errno;

	if (!base || !__atomic_load_n(&evo_npending, __ATOMIC_ACQUIRE))
		return NULL;
	pthread_mutex_lock(&evh_lock);
	for (w = evo_pending; w; w = next) {
		next = w->next;
		if (w->base != base)
			continue;
		evo_unlink_locked(w);
		w->forgotten = true;
		w->next = dead;
		dead = w;
	}
	pthread_mutex_unlock(&evh_lock);
	errno = saved_errno;
	return dead;
}

static void
evo_free_list(struct evo_wrap *dead)
{
	int saved_errno = errno;

	while (dead) {
		struct evo_wrap *w = dead;

		dead = w->next;
		free(w);
	}
	errno = saved_errno;
}

static void
hook_evhttp_base_free(struct event_base *base)
{
	struct evo_wrap *dead = evo_forget(base);

	real_event_base_free(base);
	evo_free_list(dead);
}

static void
hook_evhttp_base_free_nofinalize(struct event_base *base)
{
	struct evo_wrap *dead = evo_forget(base);

	real_event_base_free_nofinalize(base);
	evo_free_list(dead);
}

/* The caller's own libevent (by evh_names), or NULL: the call is ours.
 * ret: the exported hook's return address. */
static void *const *
evh_own(const void *ret)
{
	void *const *own;

	/* As fcgi_own() (hook-fcgi.c). */
	if (!__atomic_load_n(&evh_bound, __ATOMIC_ACQUIRE) &&
	    ctxshim_callers_cached(&evh_callers, ret, &own))
		return own;
	hook_evhttp_bind();
	return ctxshim_callers_own(
		&evh_callers, ret,
		(const void *)__atomic_load_n(&real_set_cb_fn, __ATOMIC_RELAXED));
}

HOOK_EXPORT int
evhttp_set_cb(struct evhttp *http, const char *path, evh_cb_fn cb, void *cb_arg)
{
	CTXSHIM_OWN_RETURN(evh_own, 0, evh_set_cb_fn, http, path, cb, cb_arg);
	return hook_evhttp_set_cb(http, path, cb, cb_arg);
}

HOOK_EXPORT int
evhttp_del_cb(struct evhttp *http, const char *path)
{
	CTXSHIM_OWN_RETURN(evh_own, 1, evh_del_cb_fn, http, path);
	return hook_evhttp_del_cb(http, path);
}

HOOK_EXPORT void
evhttp_set_gencb(struct evhttp *http, evh_cb_fn cb, void *arg)
{
	CTXSHIM_OWN_RETURN_VOID(evh_own, 2, evh_set_gencb_fn, http, cb, arg);
	hook_evhttp_set_gencb(http, cb, arg);
}

HOOK_EXPORT void
evhttp_free(struct evhttp *http)
{
	CTXSHIM_OWN_RETURN_VOID(evh_own, 3, evh_free_fn, http);
	hook_evhttp_free(http);
}

HOOK_EXPORT int
evhttp_add_virtual_host(struct evhttp *http, const char *pattern, struct evhttp *vhost)
{
	CTXSHIM_OWN_RETURN(evh_own, 4, evh_add_vhost_fn, http, pattern, vhost);
	return hook_evhttp_add_virtual_host(http, pattern, vhost);
}

HOOK_EXPORT int
evhttp_remove_virtual_host(struct evhttp *http, struct evhttp *vhost)
{
	CTXSHIM_OWN_RETURN(evh_own, 5, evh_remove_vhost_fn, http, vhost);
	return hook_evhttp_remove_virtual_host(http, vhost);
}

HOOK_EXPORT void
evhttp_send_reply_chunk_with_cb(struct evhttp_request *req,
				struct evbuffer *databuf,
				evh_conn_cb_fn cb,
				void *arg)
{
	CTXSHIM_OWN_RETURN_VOID(evh_own, 6, evh_chunk_fn, req, databuf, cb, arg);
	hook_evhttp_send_reply_chunk_with_cb(req, databuf, cb, arg);
}

HOOK_EXPORT void
evhttp_request_free(struct evhttp_request *req)
{
	CTXSHIM_OWN_RETURN_VOID(evh_own, 7, evh_req_free_fn, req);
	hook_evhttp_request_free(req);
}

HOOK_EXPORT void
evhttp_request_set_on_complete_cb(struct evhttp_request *req, evh_cb_fn cb, void *arg)
{
	CTXSHIM_OWN_RETURN_VOID(evh_own, 8, evh_on_complete_fn, req, cb, arg);
	hook_evhttp_request_set_on_complete_cb(req, cb, arg);
}

/* The caller's own libevent (by evo_names), or NULL: the call is ours. */
static void *const *
evo_own(const void *ret)
{
	void *const *own;

	/* As fcgi_own() (hook-fcgi.c). */
	if (!__atomic_load_n(&real_once_fn, __ATOMIC_ACQUIRE) &&
	    ctxshim_callers_cached(&evo_callers, ret, &own))
		return own;
	return ctxshim_callers_own(&evo_callers, ret, (const void *)evo_bind());
}

HOOK_EXPORT int
event_base_once(struct event_base *base,
		evutil_socket_t fd,
		short events,
		event_callback_fn cb,
		void *arg,
		const struct timeval *tv)
{
	CTXSHIM_OWN_RETURN(evo_own, 0, evo_once_fn, base, fd, events, cb, arg, tv);
	return hook_evhttp_base_once(base, fd, events, cb, arg, tv);
}

HOOK_EXPORT void
event_base_free(struct event_base *base)
{
	CTXSHIM_OWN_RETURN_VOID(evo_own, 1, evo_base_free_fn, base);
	hook_evhttp_base_free(base);
}

HOOK_EXPORT void
event_base_free_nofinalize(struct event_base *base)
{
	CTXSHIM_OWN_RETURN_VOID(evo_own, 2, evo_base_free_fn, base);
	hook_evhttp_base_free_nofinalize(base);
}
