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
 * (one request, one span-id), else one from evhttp's parsed headers. */
#include "config.h"

#include "hooks.h"

#include "hook-http.h"
#include "log.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

typedef void (*evh_cb_fn)(struct evhttp_request *, void *);
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

static pthread_mutex_t evh_lock = PTHREAD_MUTEX_INITIALIZER;
static struct evh_wrap *evh_wraps;   /* under evh_lock */
static struct evh_vhost *evh_vhosts; /* under evh_lock */

HOOK_EXPORT int
evhttp_set_cb(struct evhttp *http, const char *path, evh_cb_fn cb, void *cb_arg);
HOOK_EXPORT int evhttp_del_cb(struct evhttp *http, const char *path);
HOOK_EXPORT void evhttp_set_gencb(struct evhttp *http, evh_cb_fn cb, void *arg);
HOOK_EXPORT void evhttp_free(struct evhttp *http);
HOOK_EXPORT int
evhttp_add_virtual_host(struct evhttp *http, const char *pattern, struct evhttp *vhost);
HOOK_EXPORT int evhttp_remove_virtual_host(struct evhttp *http, struct evhttp *vhost);

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
static const char *const evh_names[] = {
	"evhttp_set_cb", "evhttp_del_cb",           "evhttp_set_gencb",
	"evhttp_free",   "evhttp_add_virtual_host", "evhttp_remove_virtual_host"};
static const void *const evh_selves[] = {(const void *)evhttp_set_cb,
					 (const void *)evhttp_del_cb,
					 (const void *)evhttp_set_gencb,
					 (const void *)evhttp_free,
					 (const void *)evhttp_add_virtual_host,
					 (const void *)evhttp_remove_virtual_host};
static struct ctxshim_callers evh_callers = {
	.names = evh_names, .n = 6, .selves = evh_selves};

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
	void *set_cb, *del_cb, *gencb, *fr, *add_vh, *rm_vh;
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

static void
hook_evhttp_callback(struct evhttp_request *req, void *p)
{
	const struct evh_wrap *w = p;
	/* The callback may delete itself (and so free w). */
	evh_cb_fn cb = w->cb;
	void *arg = w->arg;
	struct hook_http_saved sv;
	struct ctxshim_ctx c;
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
	errno = saved_errno;

	cb(req, arg);

	saved_errno = errno;
	hook_http_leave(fd, &c, &sv, "evhttp-restore", "evhttp-return");
	errno = saved_errno;
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
