/* SPDX-License-Identifier: Apache-2.0 */
/* libmicrohttpd: the request's context is published while the
 * application's access handler runs.
 *
 * MHD_start_daemon() and MHD_start_daemon_va() get our handler and a small
 * wrapper {handler, cls} in place of the application's; MHD_stop_daemon()
 * frees it.  The variadic MHD_start_daemon() calls MHD_start_daemon_va()
 * through the PLT (checked with readelf on the Debian 12 build), but our
 * MHD_start_daemon() forwards to the real _va itself, so a daemon is
 * wrapped once.
 *
 * MHD calls the handler several times for one request (headers, each
 * upload chunk, the final call), so the context is kept per connection in
 * a table keyed by the MHD_Connection pointer from the first call of a
 * request until the application queues the response.  We cannot learn the
 * end of a request from MHD_OPTION_NOTIFY_COMPLETED: that option travels
 * inside the application's va_list, which we cannot extend, and rewriting
 * every option into an MHD_OPTION_ARRAY would need a per-option type table
 * for each MHD version.  MHD_queue_response() is called through the PLT by
 * MHD's own auth-failure helpers too, so hooking it sees every response.
 *
 * The socket level parses the same bytes; when it already built the
 * context of the request on the connection's fd we publish that one, so a
 * request never gets two span-ids, and we claim the fd so the socket level
 * leaves the attach/detach timing of its requests to us.  HTTPS
 * (MHD_USE_TLS) is the same: Debian's libmicrohttpd sets the accepted fd
 * as the GnuTLS transport (gnutls_transport_set_int2), so hook-gnutls.c
 * feeds the plaintext to the socket level (test-integration-tls.c,
 * test_mhd_https).
 *
 * url.path is the url MHD hands the handler, percent-decoded ("/caf%C3%A9"
 * becomes "/café"), even when the socket level's context is adopted: only
 * its ids are taken.  The socket level publishes the target as sent, but
 * it has it for the first request of a connection only, since it stops
 * scanning a claimed fd, so taking its path would make url.path depend on
 * a request's place on the connection.  MHD decodes the target in place
 * before the handler runs; the raw one reaches only
 * MHD_OPTION_URI_LOG_CALLBACK, a daemon option, which would need the
 * option rewriting ruled out above. */
#include "config.h"

#include "hooks.h"

#include "hook-http.h"
#include "log.h"

#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

/* uthash's default on a failed allocation is exit(): never in a host
 * process.  Non-fatal mode leaves the element out (hh.tbl == NULL). */
#define HASH_NONFATAL_OOM 1
#include <uthash.h>

/* Requests whose end we never saw (the client went away before a response
 * was queued) stay in the table until their MHD_Connection address is
 * reused or the daemon stops; this bounds them. */
#define MHD_REQS_MAX 4096

typedef struct MHD_Daemon *(*mhd_start_daemon_va_fn)(unsigned int,
						     uint16_t,
						     MHD_AcceptPolicyCallback,
						     void *,
						     MHD_AccessHandlerCallback,
						     void *,
						     va_list);
typedef void (*mhd_stop_daemon_fn)(struct MHD_Daemon *);
typedef enum MHD_Result (*mhd_queue_response_fn)(struct MHD_Connection *,
						 unsigned int,
						 struct MHD_Response *);
typedef const union MHD_ConnectionInfo *(*mhd_get_connection_info_fn)(
	struct MHD_Connection *, enum MHD_ConnectionInfoType, ...);
typedef int (*mhd_get_connection_values_n_fn)(struct MHD_Connection *,
					      enum MHD_ValueKind,
					      MHD_KeyValueIteratorN,
					      void *);
typedef int (*mhd_get_connection_values_fn)(struct MHD_Connection *,
					    enum MHD_ValueKind,
					    MHD_KeyValueIterator,
					    void *);

/* Set once the real functions are found; until then every call retries. */
static int mhd_bound;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static mhd_start_daemon_va_fn real_start_daemon_va_fn;
static mhd_stop_daemon_fn real_stop_daemon_fn;
static mhd_queue_response_fn real_queue_response_fn;
static mhd_get_connection_info_fn real_get_connection_info_fn;
static mhd_get_connection_values_n_fn real_get_connection_values_n_fn;
static mhd_get_connection_values_fn real_get_connection_values_fn;

/* The application's handler for one daemon. */
struct mhd_wrap {
	MHD_AccessHandlerCallback dh;
	void *dh_cls;
	struct MHD_Daemon *daemon; /* NULL until MHD_start_daemon_va returned */
	struct mhd_wrap *next;
};

/* The context of the request in progress on one connection. */
struct mhd_req {
	struct MHD_Connection *conn; /* key */
	const struct mhd_wrap *w;
	int fd;
	/* A new connection at a reused MHD_Connection address (after a
	 * request that never got a response) comes from another client
	 * port; compared when the family is known. */
	socklen_t addr_len;
	struct sockaddr_in6 addr;
	/* *req_cls after the last handler call: MHD resets it to NULL for
	 * the next request, so NULL after non-NULL means a new request. */
	void *app_cls;
	struct ctxshim_ctx ctx;
	UT_hash_handle hh;
};

static pthread_mutex_t mhd_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mhd_wrap *mhd_wraps; /* under mhd_lock */
static struct mhd_req *mhd_reqs;   /* under mhd_lock */

HOOK_EXPORT struct MHD_Daemon *MHD_start_daemon_va(unsigned int flags,
						   uint16_t port,
						   MHD_AcceptPolicyCallback apc,
						   void *apc_cls,
						   MHD_AccessHandlerCallback dh,
						   void *dh_cls,
						   va_list ap);
HOOK_EXPORT struct MHD_Daemon *MHD_start_daemon(unsigned int flags,
						uint16_t port,
						MHD_AcceptPolicyCallback apc,
						void *apc_cls,
						MHD_AccessHandlerCallback dh,
						void *dh_cls,
						...);
HOOK_EXPORT void MHD_stop_daemon(struct MHD_Daemon *daemon);
HOOK_EXPORT enum MHD_Result MHD_queue_response(struct MHD_Connection *connection,
					       unsigned int status_code,
					       struct MHD_Response *response);

static enum MHD_Result hook_mhd_handler(void *cls,
					struct MHD_Connection *conn,
					const char *url,
					const char *method,
					const char *version,
					const char *upload_data,
					size_t *upload_data_size,
					void **req_cls);

/* A child forked while another thread held the lock would never get it;
 * hold it across fork() instead. */
static void
mhd_atfork_prepare(void)
{
	pthread_mutex_lock(&mhd_lock);
}

static void
mhd_atfork_release(void)
{
	pthread_mutex_unlock(&mhd_lock);
}

static void
mhd_atfork_register(void)
{
	(void)pthread_atfork(mhd_atfork_prepare, mhd_atfork_release,
			     mhd_atfork_release);
}

/* libmicrohttpd is optional: an application that does not link it never
 * calls these hooks.  Functions we only call (not hook) are found the same
 * way, so the shim itself never depends on the library.  A libmicrohttpd
 * loaded RTLD_LOCAL as a plugin's dependency is invisible to RTLD_NEXT, yet
 * the plugin's calls reach our exported names: then we find it by soname
 * (ctxshim_bind_loaded()).  If it is not loaded at all, nothing is stored
 * and the next call tries again. */
static const char *const mhd_sonames[] = {"libmicrohttpd.so.12", NULL};

static void *
mhd_find(const char *name, const void *self)
{
	return ctxshim_bind_loaded(mhd_sonames, name, NULL, self);
}

static void
hook_mhd_bind_slow(void)
{
	static int logged;
	int saved_errno = errno;
	void *start, *stop, *queue, *info, *vals_n, *vals;

	start = mhd_find("MHD_start_daemon_va", (const void *)MHD_start_daemon_va);
	stop = start ? mhd_find("MHD_stop_daemon", (const void *)MHD_stop_daemon)
		     : NULL;
	queue = stop ? mhd_find("MHD_queue_response", (const void *)MHD_queue_response)
		     : NULL;
	if (!queue) {
		if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
			ctxshim_log(
				"libmicrohttpd: MHD_start_daemon_va not found (yet)");
		errno = saved_errno;
		return;
	}
	/* Not hooked: our handler stands in for "self" so that a binding can
	 * never come back to the shim. */
	info = mhd_find("MHD_get_connection_info", (const void *)hook_mhd_handler);
	vals_n =
		mhd_find("MHD_get_connection_values_n", (const void *)hook_mhd_handler);
	vals = mhd_find("MHD_get_connection_values", (const void *)hook_mhd_handler);
	/* Threads racing here store the same values. */
	__atomic_store_n(&real_start_daemon_va_fn, (mhd_start_daemon_va_fn)start,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&real_stop_daemon_fn, (mhd_stop_daemon_fn)stop,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&real_queue_response_fn, (mhd_queue_response_fn)queue,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&real_get_connection_info_fn, (mhd_get_connection_info_fn)info,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&real_get_connection_values_n_fn,
			 (mhd_get_connection_values_n_fn)vals_n, __ATOMIC_RELAXED);
	__atomic_store_n(&real_get_connection_values_fn,
			 (mhd_get_connection_values_fn)vals, __ATOMIC_RELAXED);
	pthread_once(&atfork_once, mhd_atfork_register);
	__atomic_store_n(&mhd_bound, 1, __ATOMIC_RELEASE);
	errno = saved_errno;
}

static inline void
hook_mhd_bind(void)
{
	if (!__atomic_load_n(&mhd_bound, __ATOMIC_ACQUIRE))
		hook_mhd_bind_slow();
}

/* Bind now when the library is loaded at start-up, so that a program
 * linked with it makes no dl*() call on its own threads later
 * (preload/bind.c). */
__attribute__((constructor(104))) static void
hook_mhd_ctor(void)
{
	int saved_errno = errno;

	if (ctxshim_lib_loaded(mhd_sonames))
		hook_mhd_bind();
	errno = saved_errno;
}

static inline struct MHD_Daemon *
real_MHD_start_daemon_va(unsigned int flags,
			 uint16_t port,
			 MHD_AcceptPolicyCallback apc,
			 void *apc_cls,
			 MHD_AccessHandlerCallback dh,
			 void *dh_cls,
			 va_list ap)
{
	hook_mhd_bind();
	if (!real_start_daemon_va_fn) {
		errno = ENOSYS;
		return NULL;
	}
	return real_start_daemon_va_fn(flags, port, apc, apc_cls, dh, dh_cls, ap);
}

static inline void
real_MHD_stop_daemon(struct MHD_Daemon *daemon)
{
	hook_mhd_bind();
	if (real_stop_daemon_fn)
		real_stop_daemon_fn(daemon);
}

static inline enum MHD_Result
real_MHD_queue_response(struct MHD_Connection *connection,
			unsigned int status_code,
			struct MHD_Response *response)
{
	hook_mhd_bind();
	if (!real_queue_response_fn)
		return MHD_NO;
	return real_queue_response_fn(connection, status_code, response);
}

/* ---- the request's context ---------------------------------------------- */

static enum MHD_Result
mhd_header_n(void *cls,
	     enum MHD_ValueKind kind,
	     const char *key,
	     size_t key_size,
	     const char *value,
	     size_t value_size)
{
	(void)kind;
	hook_http_header(cls, key, key_size, value, value_size);
	return MHD_YES;
}

static enum MHD_Result
mhd_header_z(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind;
	hook_http_header(cls, key, key ? strlen(key) : 0, value,
			 value ? strlen(value) : 0);
	return MHD_YES;
}

/* The context from MHD's view of the request: its parsed headers, and the
 * method and (decoded, query-less) path it hands the handler. */
static void
mhd_build_ctx(struct MHD_Connection *conn,
	      const char *url,
	      const char *method,
	      struct ctxshim_ctx *c)
{
	struct hook_http_headers h;

	hook_http_headers_init(&h);
	if (real_get_connection_values_n_fn)
		(void)real_get_connection_values_n_fn(conn, MHD_HEADER_KIND,
						      mhd_header_n, &h);
	else if (real_get_connection_values_fn)
		(void)real_get_connection_values_fn(conn, MHD_HEADER_KIND, mhd_header_z,
						    &h);
	hook_http_build_ctx(&h, method, url, c);
}

static int
mhd_conn_fd(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci;

	if (!real_get_connection_info_fn)
		return -1;
	ci = real_get_connection_info_fn(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	return ci ? ci->connect_fd : -1;
}

static socklen_t
mhd_client_addr(struct MHD_Connection *conn, struct sockaddr_in6 *out)
{
	const union MHD_ConnectionInfo *ci;
	const struct sockaddr *sa;
	socklen_t len;

	memset(out, 0, sizeof(*out));
	if (!real_get_connection_info_fn)
		return 0;
	ci = real_get_connection_info_fn(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	sa = ci ? ci->client_addr : NULL;
	if (!sa)
		return 0;
	if (sa->sa_family == AF_INET)
		len = sizeof(struct sockaddr_in);
	else if (sa->sa_family == AF_INET6)
		len = sizeof(struct sockaddr_in6);
	else
		return 0;
	memcpy(out, sa, len);
	return len;
}

static bool
mhd_req_current(const struct mhd_req *q,
		const struct mhd_wrap *w,
		int fd,
		const struct sockaddr_in6 *addr,
		socklen_t addr_len,
		void *app_cls)
{
	if (q->w != w || q->fd != fd || q->addr_len != addr_len ||
	    memcmp(&q->addr, addr, addr_len) != 0)
		return false;
	return !(q->app_cls && !app_cls);
}

static void
mhd_req_free_locked(struct mhd_req *q)
{
	HASH_DEL(mhd_reqs, q);
	free(q);
}

/* The context for this handler call: the one its request started with,
 * or, on the request's first call, the socket level's or a new one. */
static void
mhd_request_ctx(const struct mhd_wrap *w,
		struct MHD_Connection *conn,
		int fd,
		const char *url,
		const char *method,
		void *app_cls,
		struct ctxshim_ctx *c)
{
	struct sockaddr_in6 addr;
	socklen_t addr_len = mhd_client_addr(conn, &addr);
	struct mhd_req *q, *old;

	pthread_mutex_lock(&mhd_lock);
	HASH_FIND_PTR(mhd_reqs, &conn, q);
	if (q && mhd_req_current(q, w, fd, &addr, addr_len, app_cls)) {
		ctxshim_ctx_copy(c, &q->ctx);
		pthread_mutex_unlock(&mhd_lock);
		return;
	}
	if (q)
		mhd_req_free_locked(q);
	pthread_mutex_unlock(&mhd_lock);

	/* First call of a request. */
	mhd_build_ctx(conn, url, method, c);
	hook_http_adopt_socket_ctx(fd, c);

	q = malloc(sizeof(*q));
	if (!q)
		return; /* this call gets the context; the next builds again */
	q->conn = conn;
	q->w = w;
	q->fd = fd;
	q->addr_len = addr_len;
	memcpy(&q->addr, &addr, sizeof(addr));
	q->app_cls = app_cls;
	ctxshim_ctx_copy(&q->ctx, c);
	pthread_mutex_lock(&mhd_lock);
	HASH_FIND_PTR(mhd_reqs, &conn, old);
	if (old)
		mhd_req_free_locked(old);
	if (HASH_COUNT(mhd_reqs) >= MHD_REQS_MAX)
		mhd_req_free_locked(mhd_reqs); /* the oldest (insertion order) */
	HASH_ADD_PTR(mhd_reqs, conn, q);
	if (!q->hh.tbl)
		old = q; /* not added: out of memory */
	else
		old = NULL;
	pthread_mutex_unlock(&mhd_lock);
	free(old);
}

/* After a handler call: remember what the application left in *req_cls,
 * or forget the request if the handler refused it (MHD closes then). */
static void
mhd_request_after(struct MHD_Connection *conn, void *app_cls, bool end)
{
	struct mhd_req *q;

	pthread_mutex_lock(&mhd_lock);
	HASH_FIND_PTR(mhd_reqs, &conn, q);
	if (q) {
		if (end)
			mhd_req_free_locked(q);
		else
			q->app_cls = app_cls;
	}
	pthread_mutex_unlock(&mhd_lock);
}

static enum MHD_Result
hook_mhd_handler(void *cls,
		 struct MHD_Connection *conn,
		 const char *url,
		 const char *method,
		 const char *version,
		 const char *upload_data,
		 size_t *upload_data_size,
		 void **req_cls)
{
	const struct mhd_wrap *w = cls;
	struct hook_http_saved sv;
	struct ctxshim_ctx c;
	enum MHD_Result r;
	int saved_errno, fd;

	if (!ctxshim_active())
		return w->dh(w->dh_cls, conn, url, method, version, upload_data,
			     upload_data_size, req_cls);

	saved_errno = errno;
	fd = mhd_conn_fd(conn);
	mhd_request_ctx(w, conn, fd, url, method, req_cls ? *req_cls : NULL, &c);
	hook_http_enter(fd, &c, &sv, "mhd-handler");
	errno = saved_errno;

	r = w->dh(w->dh_cls, conn, url, method, version, upload_data, upload_data_size,
		  req_cls);

	saved_errno = errno;
	mhd_request_after(conn, req_cls ? *req_cls : NULL, r != MHD_YES);
	hook_http_leave(fd, &c, &sv, "mhd-restore", "mhd-return");
	errno = saved_errno;
	return r;
}

/* ---- daemons ------------------------------------------------------------ */

static struct MHD_Daemon *
hook_mhd_start_daemon_va(unsigned int flags,
			 uint16_t port,
			 MHD_AcceptPolicyCallback apc,
			 void *apc_cls,
			 MHD_AccessHandlerCallback dh,
			 void *dh_cls,
			 va_list ap)
{
	struct MHD_Daemon *d;
	struct mhd_wrap *w;
	int saved_errno = errno;

	if (!ctxshim_active() || !dh || dh == hook_mhd_handler)
		return real_MHD_start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls,
						ap);
	/* Starting a daemon allocates plenty; without memory for the
	 * wrapper the daemon simply runs unwrapped. */
	w = calloc(1, sizeof(*w));
	errno = saved_errno;
	if (!w)
		return real_MHD_start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls,
						ap);
	w->dh = dh;
	w->dh_cls = dh_cls;
	d = real_MHD_start_daemon_va(flags, port, apc, apc_cls, hook_mhd_handler, w,
				     ap);
	saved_errno = errno;
	if (!d) {
		free(w);
	} else {
		pthread_mutex_lock(&mhd_lock);
		w->daemon = d;
		w->next = mhd_wraps;
		mhd_wraps = w;
		pthread_mutex_unlock(&mhd_lock);
	}
	errno = saved_errno;
	return d;
}

static void
hook_mhd_stop_daemon(struct MHD_Daemon *daemon)
{
	struct mhd_wrap **pp, *w = NULL;
	struct mhd_req *q, *tmp;
	int saved_errno;

	if (!daemon) {
		real_MHD_stop_daemon(daemon);
		return;
	}
	/* Unlinked before the real call: once it returns, another thread may
	 * start a daemon at the same address, whose wrapper we must not take.
	 * The daemon's threads still hold w (their handler's cls) until they
	 * are joined inside the real call; only then is it freed. */
	saved_errno = errno;
	pthread_mutex_lock(&mhd_lock);
	for (pp = &mhd_wraps; *pp; pp = &(*pp)->next) {
		if ((*pp)->daemon == daemon) {
			w = *pp;
			*pp = w->next;
			break;
		}
	}
	pthread_mutex_unlock(&mhd_lock);
	errno = saved_errno;
	real_MHD_stop_daemon(daemon);
	if (!w)
		return;
	saved_errno = errno;
	pthread_mutex_lock(&mhd_lock);
	HASH_ITER (hh, mhd_reqs, q, tmp)
		if (q->w == w)
			mhd_req_free_locked(q);
	pthread_mutex_unlock(&mhd_lock);
	free(w);
	errno = saved_errno;
}

static enum MHD_Result
hook_mhd_queue_response(struct MHD_Connection *connection,
			unsigned int status_code,
			struct MHD_Response *response)
{
	enum MHD_Result r = real_MHD_queue_response(connection, status_code, response);
	int saved_errno;

	if (r != MHD_YES || !ctxshim_active())
		return r;
	/* The request has its response: the next handler call on this
	 * connection belongs to the next request. */
	saved_errno = errno;
	mhd_request_after(connection, NULL, true);
	errno = saved_errno;
	return r;
}

HOOK_EXPORT struct MHD_Daemon *
MHD_start_daemon_va(unsigned int flags,
		    uint16_t port,
		    MHD_AcceptPolicyCallback apc,
		    void *apc_cls,
		    MHD_AccessHandlerCallback dh,
		    void *dh_cls,
		    va_list ap)
{
	return hook_mhd_start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls, ap);
}

HOOK_EXPORT struct MHD_Daemon *
MHD_start_daemon(unsigned int flags,
		 uint16_t port,
		 MHD_AcceptPolicyCallback apc,
		 void *apc_cls,
		 MHD_AccessHandlerCallback dh,
		 void *dh_cls,
		 ...)
{
	struct MHD_Daemon *d;
	va_list ap;

	va_start(ap, dh_cls);
	d = hook_mhd_start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls, ap);
	va_end(ap);
	return d;
}

HOOK_EXPORT void
MHD_stop_daemon(struct MHD_Daemon *daemon)
{
	hook_mhd_stop_daemon(daemon);
}

HOOK_EXPORT enum MHD_Result
MHD_queue_response(struct MHD_Connection *connection,
		   unsigned int status_code,
		   struct MHD_Response *response)
{
	return hook_mhd_queue_response(connection, status_code, response);
}
