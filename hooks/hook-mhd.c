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
 * request until the application queues the response.  MHD_queue_response()
 * is called through the PLT by MHD's own auth-failure helpers too, so
 * hooking it sees every response.
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
 * url.path is the request-target as sent ("/caf%C3%A9", the query cut as
 * the socket level cuts it, request-ctx.c), like every other server's.
 * MHD decodes the target in place before the handler runs ("/café"); the
 * raw one reaches only MHD_OPTION_URI_LOG_CALLBACK, a daemon option that
 * travels in the application's va_list.  So MHD_start_daemon_va() walks
 * that list with a table of the options of the libmicrohttpd versions we
 * read (mhd_opt_args[], from 0.9.75's daemon.c:parse_options_va), and
 * starts the daemon with the same options in an MHD_OPTION_ARRAY plus our
 * URI log callback (chained to the application's own, if any), which
 * stores the target for the handler's first call (mhd_req.target).  The
 * socket level's target would not do: it stops scanning a claimed fd, so
 * it has the first request of a connection only.
 * An option we do not know, another library version, or no memory for
 * the copy: the daemon starts exactly as the application asked, and
 * url.path is MHD's decoded url (mhd_url_target()).  mhd_opts_walk()
 * says why the array is the same daemon, mhd_notify_completed() why the
 * application's completion callback is called exactly as without us (and
 * with the request's context, when the request got a response).
 *
 * A body MHD reads from the application's content reader
 * (MHD_create_response_from_callback()) is written after the handler
 * returned, on whatever thread writes the connection: the reader and its
 * free callback are wrapped (struct mhd_body), the queue hook notes whose
 * body it is, and MHD_destroy_response() tells when a connection drops
 * it. */
#include "config.h"

#include "hooks.h"

#include "hook-http.h"
#include "http-scan.h"
#include "log.h"

#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
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
typedef struct MHD_Response *(*mhd_create_response_from_callback_fn)(
	uint64_t,
	size_t,
	MHD_ContentReaderCallback,
	void *,
	MHD_ContentReaderFreeCallback);
typedef void (*mhd_destroy_response_fn)(struct MHD_Response *);
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
typedef const char *(*mhd_get_version_fn)(void);
typedef enum MHD_Result (*mhd_is_feature_supported_fn)(enum MHD_FEATURE);
/* MHD_OPTION_URI_LOG_CALLBACK's function (microhttpd.h names no type). */
typedef void *(*mhd_uri_log_fn)(void *cls, const char *uri, struct MHD_Connection *);

/* Set once the real functions are found; until then every call retries. */
static int mhd_bound;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static mhd_start_daemon_va_fn real_start_daemon_va_fn;
static mhd_stop_daemon_fn real_stop_daemon_fn;
static mhd_queue_response_fn real_queue_response_fn;
static mhd_create_response_from_callback_fn real_create_response_from_callback_fn;
static mhd_destroy_response_fn real_destroy_response_fn;
/* libmicrohttpd's code, to tell its own calls of the functions it exports
 * (through its PLT) from the application's; 0, 0 when unknown. */
static uintptr_t mhd_text_lo, mhd_text_hi;
static mhd_get_connection_info_fn real_get_connection_info_fn;
static mhd_get_connection_values_n_fn real_get_connection_values_n_fn;
static mhd_get_connection_values_fn real_get_connection_values_fn;
static mhd_get_version_fn real_get_version_fn;
static mhd_is_feature_supported_fn real_is_feature_supported_fn;

/* The application's callbacks for one daemon. */
struct mhd_wrap {
	MHD_AccessHandlerCallback dh;
	void *dh_cls;
	/* The application's URI log callback when ours stands in for it
	 * (the options were rewritten), or NULL. */
	mhd_uri_log_fn ul;
	void *ul_cls;
	/* The application's completion callback when ours stands in for it
	 * (mhd_notify_completed()); NULL otherwise. */
	MHD_RequestCompletedCallback nc;
	void *nc_cls;
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
	/* false: only the URI log callback has seen the request so far
	 * (target is set, the other fields are not). */
	bool has_ctx;
	/* The response is queued: kept (has_ctx) only for the application's
	 * completion callback, when ours stands in for it. */
	bool answered;
	/* The request-target as sent, cut where the socket level cuts it;
	 * target_len 0: none. */
	uint16_t target_len;
	char target[HTTP_SCAN_TARGET_MAX];
	struct ctxshim_ctx ctx;
	UT_hash_handle hh;
};

/* A response made from the application's content reader
 * (MHD_create_response_from_callback()): MHD calls our reader and free
 * callback with this as their closure, and ours call the application's
 * with its own.  The reader has no connection argument, so the queue hook
 * notes whose body the response is. */
struct mhd_body {
	struct MHD_Response *resp; /* key; NULL: not in mhd_bodies */
	MHD_ContentReaderCallback crc;
	void *crc_cls;
	MHD_ContentReaderFreeCallback crfc;
	/* Connections that were given the response and have not dropped it
	 * yet (under mhd_lock). */
	unsigned users;
	/* Atomic: ctx and fd are those of the one request the response is
	 * the body of, written only while no connection held it. */
	bool shown;
	int fd;
	struct ctxshim_ctx ctx;
	UT_hash_handle hh;
};

static pthread_mutex_t mhd_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mhd_wrap *mhd_wraps;  /* under mhd_lock */
static struct mhd_req *mhd_reqs;    /* under mhd_lock */
static struct mhd_body *mhd_bodies; /* under mhd_lock */
/* HASH_COUNT(mhd_bodies), read without the lock: MHD destroys every
 * response through our hook, and a server that makes none from a content
 * reader takes no lock there. */
static unsigned mhd_nbodies;

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
HOOK_EXPORT struct MHD_Response *
MHD_create_response_from_callback(uint64_t size,
				  size_t block_size,
				  MHD_ContentReaderCallback crc,
				  void *crc_cls,
				  MHD_ContentReaderFreeCallback crfc);
HOOK_EXPORT void MHD_destroy_response(struct MHD_Response *response);

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

/* A caller with its own libmicrohttpd (bind.h) is passed to it. */
static const char *const mhd_names[] = {
	"MHD_start_daemon_va", "MHD_stop_daemon", "MHD_queue_response",
	"MHD_create_response_from_callback", "MHD_destroy_response"};
static const void *const mhd_selves[] = {
	(const void *)MHD_start_daemon_va, (const void *)MHD_stop_daemon,
	(const void *)MHD_queue_response,
	(const void *)MHD_create_response_from_callback,
	(const void *)MHD_destroy_response};
static struct ctxshim_callers mhd_callers = {
	.names = mhd_names, .n = 5, .selves = mhd_selves};

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
	void *start, *stop, *queue, *create, *destroy, *info, *vals_n, *vals, *ver,
		*feat;
	uintptr_t lo = 0, hi = 0;

	start = mhd_find("MHD_start_daemon_va", (const void *)MHD_start_daemon_va);
	stop = start ? mhd_find("MHD_stop_daemon", (const void *)MHD_stop_daemon)
		     : NULL;
	queue = stop ? mhd_find("MHD_queue_response", (const void *)MHD_queue_response)
		     : NULL;
	create = queue ? mhd_find("MHD_create_response_from_callback",
				  (const void *)MHD_create_response_from_callback)
		       : NULL;
	destroy = create ? mhd_find("MHD_destroy_response",
				    (const void *)MHD_destroy_response)
			 : NULL;
	if (!destroy) {
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
	ver = mhd_find("MHD_get_version", (const void *)hook_mhd_handler);
	feat = mhd_find("MHD_is_feature_supported", (const void *)hook_mhd_handler);
	if (!ctxshim_text_range(start, &lo, &hi))
		lo = hi = 0;
	/* Threads racing here store the same values. */
	__atomic_store_n(&real_start_daemon_va_fn, (mhd_start_daemon_va_fn)start,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&real_stop_daemon_fn, (mhd_stop_daemon_fn)stop,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&real_queue_response_fn, (mhd_queue_response_fn)queue,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&real_create_response_from_callback_fn,
			 (mhd_create_response_from_callback_fn)create,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&real_destroy_response_fn, (mhd_destroy_response_fn)destroy,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&mhd_text_lo, lo, __ATOMIC_RELAXED);
	__atomic_store_n(&mhd_text_hi, hi, __ATOMIC_RELEASE);
	__atomic_store_n(&real_get_connection_info_fn, (mhd_get_connection_info_fn)info,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&real_get_connection_values_n_fn,
			 (mhd_get_connection_values_n_fn)vals_n, __ATOMIC_RELAXED);
	__atomic_store_n(&real_get_connection_values_fn,
			 (mhd_get_connection_values_fn)vals, __ATOMIC_RELAXED);
	__atomic_store_n(&real_get_version_fn, (mhd_get_version_fn)ver,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&real_is_feature_supported_fn,
			 (mhd_is_feature_supported_fn)feat, __ATOMIC_RELAXED);
	pthread_once(&atfork_once, mhd_atfork_register);
	ctxshim_callers_bound(&mhd_callers, start);
	__atomic_store_n(&mhd_bound, 1, __ATOMIC_RELEASE);
	errno = saved_errno;
}

static inline void
hook_mhd_bind(void)
{
	if (!__atomic_load_n(&mhd_bound, __ATOMIC_ACQUIRE))
		hook_mhd_bind_slow();
}

/* The caller's own libmicrohttpd (by mhd_names), or NULL: the call is
 * ours.  ret: the exported hook's return address. */
static void *const *
mhd_own(const void *ret)
{
	void *const *own;

	/* As fcgi_own() (hook-fcgi.c). */
	if (!__atomic_load_n(&mhd_bound, __ATOMIC_ACQUIRE) &&
	    ctxshim_callers_cached(&mhd_callers, ret, &own))
		return own;
	hook_mhd_bind();
	return ctxshim_callers_own(&mhd_callers, ret,
				   (const void *)__atomic_load_n(
					   &real_start_daemon_va_fn, __ATOMIC_RELAXED));
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

static inline struct MHD_Response *
real_MHD_create_response_from_callback(uint64_t size,
				       size_t block_size,
				       MHD_ContentReaderCallback crc,
				       void *crc_cls,
				       MHD_ContentReaderFreeCallback crfc)
{
	hook_mhd_bind();
	if (!real_create_response_from_callback_fn) {
		errno = ENOSYS;
		return NULL;
	}
	return real_create_response_from_callback_fn(size, block_size, crc, crc_cls,
						     crfc);
}

static inline void
real_MHD_destroy_response(struct MHD_Response *response)
{
	hook_mhd_bind();
	if (real_destroy_response_fn)
		real_destroy_response_fn(response);
}

/* Whether ret, a hook's return address, is in libmicrohttpd itself (false
 * when its code was not found). */
static bool
mhd_from_library(const void *ret)
{
	uintptr_t a = (uintptr_t)ret;
	uintptr_t hi = __atomic_load_n(&mhd_text_hi, __ATOMIC_ACQUIRE);

	return a < hi && a >= __atomic_load_n(&mhd_text_lo, __ATOMIC_RELAXED);
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

/* The context from MHD's view of the request: its parsed headers, the
 * method, and the target (as sent, or mhd_url_target()). */
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

/* MHD's decoded url as a target whose path is that url.  MHD cut the
 * query off before it decoded, so a '?' or '#' left in the url was sent
 * escaped: it is escaped again, or url_path() (request-ctx.c) would cut
 * the path there ("/a%3Fb" decodes to "/a?b", published as "/a").  Kept
 * to the length of a stored target, never cut inside an escape.  A %00
 * has already ended MHD's C string: the path ends where it was. */
static void
mhd_url_target(const char *url, char out[HTTP_SCAN_TARGET_MAX + 1])
{
	size_t n = 0;

	for (; *url; url++) {
		const char *esc = *url == '?' ? "%3F" : *url == '#' ? "%23" : NULL;

		if (n + (esc ? 3 : 1) > HTTP_SCAN_TARGET_MAX)
			break;
		if (esc) {
			memcpy(out + n, esc, 3);
			n += 3;
		} else {
			out[n++] = *url;
		}
	}
	out[n] = '\0';
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

/* Put q in the table in place of what it holds for q->conn.  false: out
 * of memory, q was not added (the caller frees it). */
static bool
mhd_req_add_locked(struct mhd_req *q)
{
	struct mhd_req *old;

	HASH_FIND_PTR(mhd_reqs, &q->conn, old);
	if (old)
		mhd_req_free_locked(old);
	if (HASH_COUNT(mhd_reqs) >= MHD_REQS_MAX)
		mhd_req_free_locked(mhd_reqs); /* the oldest (insertion order) */
	HASH_ADD_PTR(mhd_reqs, conn, q);
	return q->hh.tbl != NULL;
}

static void
mhd_req_fill(struct mhd_req *q,
	     const struct mhd_wrap *w,
	     int fd,
	     const struct sockaddr_in6 *addr,
	     socklen_t addr_len,
	     void *app_cls,
	     const struct ctxshim_ctx *c)
{
	q->w = w;
	q->fd = fd;
	q->addr_len = addr_len;
	memcpy(&q->addr, addr, sizeof(*addr));
	q->app_cls = app_cls;
	q->has_ctx = true;
	q->answered = false;
	ctxshim_ctx_copy(&q->ctx, c);
}

/* The URI log callback's part: keep the target as sent (uri may be NULL:
 * a request line without one) for the handler's first call.  An entry
 * left for the connection is reused; else one is allocated, as the
 * handler did before (one per request, freed at the response).  Without
 * memory the handler publishes MHD's decoded url. */
static void
mhd_request_target(const struct mhd_wrap *w,
		   struct MHD_Connection *conn,
		   const char *uri)
{
	size_t n = uri ? strnlen(uri, HTTP_SCAN_TARGET_MAX) : 0;
	struct mhd_req *q;

	pthread_mutex_lock(&mhd_lock);
	HASH_FIND_PTR(mhd_reqs, &conn, q);
	if (q) {
		q->w = w;
		q->has_ctx = false;
		q->answered = false;
		q->target_len = (uint16_t)n;
		if (n)
			memcpy(q->target, uri, n);
		pthread_mutex_unlock(&mhd_lock);
		return;
	}
	pthread_mutex_unlock(&mhd_lock);

	q = malloc(sizeof(*q));
	if (!q)
		return;
	q->conn = conn;
	q->w = w;
	q->has_ctx = false;
	q->answered = false;
	q->target_len = (uint16_t)n;
	if (n)
		memcpy(q->target, uri, n);
	pthread_mutex_lock(&mhd_lock);
	if (mhd_req_add_locked(q))
		q = NULL;
	pthread_mutex_unlock(&mhd_lock);
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
	char target[HTTP_SCAN_TARGET_MAX + 1];
	struct sockaddr_in6 addr;
	socklen_t addr_len = mhd_client_addr(conn, &addr);
	struct mhd_req *q;
	bool raw = false;

	pthread_mutex_lock(&mhd_lock);
	HASH_FIND_PTR(mhd_reqs, &conn, q);
	if (q && q->has_ctx && !q->answered &&
	    mhd_req_current(q, w, fd, &addr, addr_len, app_cls)) {
		ctxshim_ctx_copy(c, &q->ctx);
		pthread_mutex_unlock(&mhd_lock);
		return;
	}
	if (q && !q->has_ctx && q->w == w) {
		/* MHD calls the URI log callback for every request, before
		 * the request's first handler call
		 * (connection.c:parse_initial_message_line()), so a target
		 * stored for this daemon is this request's. */
		memcpy(target, q->target, q->target_len);
		target[q->target_len] = '\0';
		raw = true;
	} else if (q) {
		mhd_req_free_locked(q);
	}
	pthread_mutex_unlock(&mhd_lock);

	/* First call of a request.  The socket level's context, if adopted,
	 * gives its ids only: the path is ours either way. */
	if (!raw && url)
		mhd_url_target(url, target);
	mhd_build_ctx(conn, raw || url ? target : NULL, method, c);
	hook_http_adopt_socket_ctx(fd, c);

	pthread_mutex_lock(&mhd_lock);
	HASH_FIND_PTR(mhd_reqs, &conn, q);
	if (q && !q->has_ctx && q->w == w) {
		mhd_req_fill(q, w, fd, &addr, addr_len, app_cls, c);
		pthread_mutex_unlock(&mhd_lock);
		return;
	}
	pthread_mutex_unlock(&mhd_lock);

	q = malloc(sizeof(*q));
	if (!q)
		return; /* this call gets the context; the next builds again */
	q->conn = conn;
	q->target_len = 0;
	mhd_req_fill(q, w, fd, &addr, addr_len, app_cls, c);
	pthread_mutex_lock(&mhd_lock);
	if (mhd_req_add_locked(q))
		q = NULL;
	pthread_mutex_unlock(&mhd_lock);
	free(q);
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

/* What our URI log callback leaves in *req_cls, when the application's
 * completion callback is ours to filter (mhd_notify_completed()): "the
 * handler has not been called for this request yet".  No application
 * stores the address of our static. */
static char mhd_unseen;
#define MHD_UNSEEN ((void *)&mhd_unseen)

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

	/* Without our URI log callback the application's handler would find
	 * NULL here on a request's first call (connection.c:connection_reset()
	 * and the calloc() of a new connection). */
	if (req_cls && *req_cls == MHD_UNSEEN)
		*req_cls = NULL;
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

/* ---- response bodies from the application's content reader ------------- */

/* MHD calls the reader on whatever thread writes the connection (its own
 * in thread-per-connection mode, the polling thread, or the application's
 * in MHD_run()), after the access handler has returned: the work done
 * there (a database cursor read, a file sent as it is read) is the
 * request's, and is published as such, like the handler's.  Without a
 * request to show (the response is the body of two connections' requests
 * at once, or its request had no context) the call passes through. */
static ssize_t
mhd_body_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct mhd_body *b = cls;
	struct hook_http_saved sv;
	int saved_errno;
	ssize_t r;

	if (!ctxshim_active() || !__atomic_load_n(&b->shown, __ATOMIC_ACQUIRE))
		return b->crc(b->crc_cls, pos, buf, max);
	saved_errno = errno;
	hook_http_enter(b->fd, &b->ctx, &sv, "mhd-body");
	errno = saved_errno;

	r = b->crc(b->crc_cls, pos, buf, max);

	saved_errno = errno;
	hook_http_leave(b->fd, &b->ctx, &sv, "mhd-restore", "mhd-body-return");
	errno = saved_errno;
	return r;
}

/* MHD calls it once, when the last reference to the response goes
 * (MHD_destroy_response()); never for a response it failed to create. */
static void
mhd_body_free(void *cls)
{
	struct mhd_body *b = cls;
	int saved_errno = errno;

	if (b->resp) {
		pthread_mutex_lock(&mhd_lock);
		HASH_DEL(mhd_bodies, b);
		__atomic_store_n(&mhd_nbodies, HASH_COUNT(mhd_bodies),
				 __ATOMIC_RELEASE);
		pthread_mutex_unlock(&mhd_lock);
	}
	errno = saved_errno;
	if (b->crfc)
		b->crfc(b->crc_cls);
	saved_errno = errno;
	free(b);
	errno = saved_errno;
}

/* The application's request on conn has its response resp: forget the
 * request (or keep it for the completion callback, mhd_notify_completed()),
 * and if resp is one of our bodies, make it the body of that request.  A
 * response may be queued on several connections (MHD counts references);
 * while another connection still holds it, we cannot tell which
 * connection a read is for, so it shows no request until every connection
 * has dropped it (hook_mhd_destroy_response()). */
static void
mhd_request_answered(struct MHD_Connection *conn, struct MHD_Response *resp)
{
	struct mhd_req *q;
	struct mhd_body *b;

	pthread_mutex_lock(&mhd_lock);
	HASH_FIND_PTR(mhd_reqs, &conn, q);
	HASH_FIND_PTR(mhd_bodies, &resp, b);
	if (b) {
		/* No reader runs while no connection holds the response, so
		 * ctx is not read while written. */
		if (b->users++ == 0 && q && q->has_ctx) {
			b->fd = q->fd;
			ctxshim_ctx_copy(&b->ctx, &q->ctx);
			__atomic_store_n(&b->shown, true, __ATOMIC_RELEASE);
		} else {
			__atomic_store_n(&b->shown, false, __ATOMIC_RELEASE);
		}
	}
	if (q && q->has_ctx && q->w->nc)
		q->answered = true;
	else if (q)
		mhd_req_free_locked(q);
	pthread_mutex_unlock(&mhd_lock);
}

/* ---- the raw target: our URI log callback ----------------------------- */

/* MHD calls it on the connection's thread when it has split the request
 * line, before it cuts the query off and percent-decodes the target in
 * place (connection.c:parse_initial_message_line()), and stores what it
 * returns as the request's *req_cls.  The application's own callback, if it
 * set one, is called with the same arguments and its value is returned:
 * the daemon has a URI log callback either way, so MHD behaves as it did.
 * Without one, we return what *req_cls held before (NULL: the connection
 * is calloc()ed, connection_reset() clears it between requests), or the
 * MHD_UNSEEN mark if we stand in for the completion callback. */
static void *
mhd_uri_log(void *cls, const char *uri, struct MHD_Connection *conn)
{
	const struct mhd_wrap *w = cls;
	int saved_errno = errno;

	/* Before the application's callback, which gets a const string but
	 * may write to it. */
	if (ctxshim_active())
		mhd_request_target(w, conn, uri);
	errno = saved_errno;
	if (w->ul)
		return w->ul(w->ul_cls, uri, conn);
	return w->nc ? MHD_UNSEEN : NULL;
}

/* Stands in for the application's MHD_OPTION_NOTIFY_COMPLETED when the
 * application has no URI log callback of its own.  MHD 0.9.75 calls the
 * completion callback only for a request it made "client aware"
 * (connection->client_aware), and sets that right before every handler
 * call (connection.c:call_connection_handler(), process_request_body())
 * and right before the URI log callback (parse_initial_message_line()).
 * It reads the flag only next to that call (connection.c:
 * MHD_connection_close_(), connection_reset(); daemon.c:
 * thread_main_handle_connection(), resume_suspended_connections(), the
 * last two after an upgrade) and clears it right after each of them.  So
 * with our URI log callback MHD also calls the completion callback for a
 * request whose handler never ran: one MHD rejects itself after the
 * request line (a bad or too large header; no Host in strict mode), whose
 * client goes away or times out mid-headers, or whose daemon stops then.
 * Such a request still has our MHD_UNSEEN mark in *req_cls, since the
 * handler's first call replaces it and the application cannot store it;
 * that call was never made without us, and is dropped (the mark is
 * cleared, as MHD clears *req_cls afterwards anyway).  A request whose
 * handler ran has the application's value there and goes through.  Per
 * request: on keep-alive connection_reset() calls this, clears the flag
 * and *req_cls, and the next request's URI log callback marks it again.
 * So the request's table entry, kept from its response on
 * (mhd_request_answered()), is taken here, and the application's
 * callback runs with the request's context as the handler did. */
static void
mhd_notify_completed(void *cls,
		     struct MHD_Connection *conn,
		     void **req_cls,
		     enum MHD_RequestTerminationCode toe)
{
	const struct mhd_wrap *w = cls;
	struct hook_http_saved sv;
	struct ctxshim_ctx c;
	struct mhd_req *q;
	int saved_errno, fd = -1;
	bool shown = false;

	if ((!req_cls || *req_cls != MHD_UNSEEN) && !ctxshim_active()) {
		w->nc(w->nc_cls, conn, req_cls, toe);
		return;
	}
	if (!req_cls || *req_cls != MHD_UNSEEN) {
		/* A request that got its response runs its completion with
		 * its context, as its handler did; this ends the request. */
		saved_errno = errno;
		pthread_mutex_lock(&mhd_lock);
		HASH_FIND_PTR(mhd_reqs, &conn, q);
		if (q && q->answered && q->w == w) {
			fd = q->fd;
			ctxshim_ctx_copy(&c, &q->ctx);
			mhd_req_free_locked(q);
			shown = true;
		}
		pthread_mutex_unlock(&mhd_lock);
		if (shown)
			hook_http_enter(fd, &c, &sv, "mhd-completed");
		errno = saved_errno;
		w->nc(w->nc_cls, conn, req_cls, toe);
		if (shown) {
			saved_errno = errno;
			hook_http_leave(fd, &c, &sv, "mhd-restore",
					"mhd-completed-return");
			errno = saved_errno;
		}
		return;
	}
	*req_cls = NULL;
	/* The request's stored target will not be used. */
	saved_errno = errno;
	pthread_mutex_lock(&mhd_lock);
	HASH_FIND_PTR(mhd_reqs, &conn, q);
	if (q && !q->has_ctx && q->w == w)
		mhd_req_free_locked(q);
	pthread_mutex_unlock(&mhd_lock);
	errno = saved_errno;
}

/* ---- rewriting the daemon's options ----------------------------------- */

/* How parse_options_va() (daemon.c, libmicrohttpd 0.9.75) reads each
 * option's arguments from the va_list, and so how its MHD_OPTION_ARRAY
 * branch maps them onto struct MHD_OptionItem: integers into value (cast
 * back to the option's type there), one pointer into ptr_value, two
 * pointers as value (the function) and ptr_value (its closure), size_t
 * plus pointer as value and ptr_value.  That branch lists every option of
 * the va_list switch, so each one here means the same in an array.  An
 * option not listed (0) stops the rewrite. */
enum mhd_arg {
	MHD_ARG_NONE = 0,
	MHD_ARG_SIZE,     /* size_t */
	MHD_ARG_UINT,     /* unsigned int */
	MHD_ARG_INT,      /* int, an enum or MHD_socket */
	MHD_ARG_PTR,      /* one pointer (data or function) */
	MHD_ARG_FN_PTR,   /* a function and its closure */
	MHD_ARG_SIZE_PTR, /* size_t and a pointer */
	MHD_ARG_ARRAY,    /* struct MHD_OptionItem * */
};

static const uint8_t mhd_opt_args[] = {
	[MHD_OPTION_CONNECTION_MEMORY_LIMIT] = MHD_ARG_SIZE,
	[MHD_OPTION_CONNECTION_LIMIT] = MHD_ARG_UINT,
	[MHD_OPTION_CONNECTION_TIMEOUT] = MHD_ARG_UINT,
	[MHD_OPTION_NOTIFY_COMPLETED] = MHD_ARG_FN_PTR,
	[MHD_OPTION_PER_IP_CONNECTION_LIMIT] = MHD_ARG_UINT,
	[MHD_OPTION_SOCK_ADDR] = MHD_ARG_PTR,
	[MHD_OPTION_URI_LOG_CALLBACK] = MHD_ARG_FN_PTR,
	[MHD_OPTION_HTTPS_MEM_KEY] = MHD_ARG_PTR,
	[MHD_OPTION_HTTPS_MEM_CERT] = MHD_ARG_PTR,
	[MHD_OPTION_HTTPS_CRED_TYPE] = MHD_ARG_INT,
	[MHD_OPTION_HTTPS_PRIORITIES] = MHD_ARG_PTR,
	[MHD_OPTION_LISTEN_SOCKET] = MHD_ARG_INT,
	[MHD_OPTION_EXTERNAL_LOGGER] = MHD_ARG_FN_PTR,
	[MHD_OPTION_THREAD_POOL_SIZE] = MHD_ARG_UINT,
	[MHD_OPTION_ARRAY] = MHD_ARG_ARRAY,
	[MHD_OPTION_UNESCAPE_CALLBACK] = MHD_ARG_FN_PTR,
	[MHD_OPTION_DIGEST_AUTH_RANDOM] = MHD_ARG_SIZE_PTR,
	[MHD_OPTION_NONCE_NC_SIZE] = MHD_ARG_UINT,
	[MHD_OPTION_THREAD_STACK_SIZE] = MHD_ARG_SIZE,
	[MHD_OPTION_HTTPS_MEM_TRUST] = MHD_ARG_PTR,
	[MHD_OPTION_CONNECTION_MEMORY_INCREMENT] = MHD_ARG_SIZE,
	[MHD_OPTION_HTTPS_CERT_CALLBACK] = MHD_ARG_PTR,
	[MHD_OPTION_TCP_FASTOPEN_QUEUE_SIZE] = MHD_ARG_UINT,
	[MHD_OPTION_HTTPS_MEM_DHPARAMS] = MHD_ARG_PTR,
	[MHD_OPTION_LISTENING_ADDRESS_REUSE] = MHD_ARG_UINT,
	[MHD_OPTION_HTTPS_KEY_PASSWORD] = MHD_ARG_PTR,
	[MHD_OPTION_NOTIFY_CONNECTION] = MHD_ARG_FN_PTR,
	[MHD_OPTION_LISTEN_BACKLOG_SIZE] = MHD_ARG_UINT,
	[MHD_OPTION_STRICT_FOR_CLIENT] = MHD_ARG_INT,
	[MHD_OPTION_GNUTLS_PSK_CRED_HANDLER] = MHD_ARG_FN_PTR,
	[MHD_OPTION_HTTPS_CERT_CALLBACK2] = MHD_ARG_PTR,
	[MHD_OPTION_SERVER_INSANITY] = MHD_ARG_UINT,
	[MHD_OPTION_SIGPIPE_HANDLED_BY_APP] = MHD_ARG_INT,
	[MHD_OPTION_TLS_NO_ALPN] = MHD_ARG_INT,
};

/* The versions whose daemon.c the table and mhd_notify_completed() were
 * checked against; any other keeps its options as they are. */
static const char *const mhd_rewrite_versions[] = {"0.9.75", NULL};

/* More is no configuration anyone writes: a list that long is taken for
 * one that was never terminated, and left to MHD. */
#define MHD_OPTS_MAX   256
#define MHD_OPTS_DEPTH 8

struct mhd_opts {
	struct MHD_OptionItem v[MHD_OPTS_MAX + 2]; /* + ours + END */
	unsigned n;
	/* The option that stopped the walk (-1: a bad array). */
	int bad;
};

static enum mhd_arg
mhd_opt_arg(int opt)
{
	if (opt <= 0 || (size_t)opt >= sizeof(mhd_opt_args))
		return MHD_ARG_NONE;
	return (enum mhd_arg)mhd_opt_args[opt];
}

static bool
mhd_opts_add(struct mhd_opts *o, int opt, intptr_t value, void *ptr_value)
{
	if (o->n == MHD_OPTS_MAX) {
		o->bad = -1;
		return false;
	}
	o->v[o->n].option = (enum MHD_OPTION)opt;
	o->v[o->n].value = value;
	o->v[o->n].ptr_value = ptr_value;
	o->n++;
	return true;
}

/* An array the application passes: its items as they are (MHD's array
 * branch casts them the same way from our array), nested arrays
 * flattened.  parse_options_va() does not count MHD_OPTION_ARRAY in
 * daemon->num_opts (its one use: whether MHD_OPTION_EXTERNAL_LOGGER came
 * first), so flattening leaves the count of every option as it was. */
static bool
mhd_opts_flatten(struct mhd_opts *o, const struct MHD_OptionItem *a, unsigned depth)
{
	unsigned i;

	if (!a || depth == MHD_OPTS_DEPTH) {
		o->bad = -1;
		return false;
	}
	for (i = 0; a[i].option != MHD_OPTION_END; i++) {
		int opt = (int)a[i].option;

		if (mhd_opt_arg(opt) == MHD_ARG_NONE) {
			o->bad = opt;
			return false;
		}
		if (mhd_opt_arg(opt) == MHD_ARG_ARRAY) {
			if (!mhd_opts_flatten(o, a[i].ptr_value, depth + 1))
				return false;
		} else if (!mhd_opts_add(o, opt, a[i].value, a[i].ptr_value)) {
			return false;
		}
	}
	return true;
}

/* The application's va_list as an array: every argument read with the type
 * parse_options_va() reads it with, in the same order, so MHD sees the
 * same options in the same order (the same results, failures and log
 * lines).  The caller walks a copy and keeps ap for MHD. */
static bool
mhd_opts_walk(struct mhd_opts *o, va_list ap)
{
	int opt;

	while ((opt = va_arg(ap, int)) != MHD_OPTION_END) {
		intptr_t value = 0;
		void *ptr = NULL;

		switch (mhd_opt_arg(opt)) {
		case MHD_ARG_SIZE:
			value = (intptr_t)va_arg(ap, size_t);
			break;
		case MHD_ARG_UINT:
			value = (intptr_t)va_arg(ap, unsigned int);
			break;
		case MHD_ARG_INT:
			value = (intptr_t)va_arg(ap, int);
			break;
		case MHD_ARG_PTR:
			ptr = va_arg(ap, void *);
			break;
		case MHD_ARG_FN_PTR:
			value = (intptr_t)va_arg(ap, void (*)(void));
			ptr = va_arg(ap, void *);
			break;
		case MHD_ARG_SIZE_PTR:
			value = (intptr_t)va_arg(ap, size_t);
			ptr = va_arg(ap, void *);
			break;
		case MHD_ARG_ARRAY:
			ptr = va_arg(ap, struct MHD_OptionItem *);
			if (!mhd_opts_flatten(o, ptr, 1))
				return false;
			continue;
		default:
			o->bad = opt;
			return false;
		}
		if (!mhd_opts_add(o, opt, value, ptr))
			return false;
	}
	return true;
}

/* Put our URI log callback (and completion callback, see
 * mhd_notify_completed()) into o and w.  MHD keeps the last value of an
 * option, so the application's callbacks are its last ones; each of its
 * URI log and non-NULL completion items is replaced in place, so that
 * daemon->num_opts counts as before, and ours is appended only if it set
 * no URI log callback.  A completion callback is never added where the
 * application set none: MHD gives a thread-per-connection daemon with one
 * an ITC (daemon.c:MHD_start_daemon_va()). */
static void
mhd_opts_hook(struct mhd_opts *o, struct mhd_wrap *w)
{
	bool has_ul = false;
	unsigned i;

	for (i = 0; i < o->n; i++) {
		if (o->v[i].option == MHD_OPTION_URI_LOG_CALLBACK) {
			has_ul = true;
			w->ul = (mhd_uri_log_fn)o->v[i].value;
			w->ul_cls = o->v[i].ptr_value;
		} else if (o->v[i].option == MHD_OPTION_NOTIFY_COMPLETED) {
			w->nc = (MHD_RequestCompletedCallback)o->v[i].value;
			w->nc_cls = o->v[i].ptr_value;
		}
	}
	/* With a URI log callback of the application's own, MHD already
	 * makes every request client-aware at the request line. */
	if (w->ul)
		w->nc = NULL;
	for (i = 0; i < o->n; i++) {
		if (o->v[i].option == MHD_OPTION_URI_LOG_CALLBACK) {
			o->v[i].value = (intptr_t)mhd_uri_log;
			o->v[i].ptr_value = w;
		} else if (o->v[i].option == MHD_OPTION_NOTIFY_COMPLETED && w->nc &&
			   o->v[i].value) {
			o->v[i].value = (intptr_t)mhd_notify_completed;
			o->v[i].ptr_value = w;
		}
	}
	if (!has_ul) {
		o->v[o->n].option = MHD_OPTION_URI_LOG_CALLBACK;
		o->v[o->n].value = (intptr_t)mhd_uri_log;
		o->v[o->n].ptr_value = w;
		o->n++;
	}
	o->v[o->n].option = MHD_OPTION_END;
	o->v[o->n].value = 0;
	o->v[o->n].ptr_value = NULL;
}

/* Whether this library is one whose option parsing we read; logs once
 * why not. */
static bool
mhd_version_known(void)
{
	static int logged;
	const char *v = real_get_version_fn ? real_get_version_fn() : NULL;
	unsigned i;

	for (i = 0; v && mhd_rewrite_versions[i]; i++)
		if (strcmp(v, mhd_rewrite_versions[i]) == 0)
			return true;
	if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
		ctxshim_log("libmicrohttpd %s: options not rewritten, url.path is "
			    "the decoded url",
			    v ? v : "(unknown version)");
	return false;
}

/* Fill o from the application's options, or false: start the daemon as
 * the application asked (logged once per cause). */
static bool
mhd_opts_build(struct mhd_opts *o, va_list ap)
{
	static int logged_opt, logged_tls;
	unsigned i;
	va_list aq;
	bool ok;

	o->n = 0;
	o->bad = 0;
	va_copy(aq, ap);
	ok = mhd_opts_walk(o, aq);
	va_end(aq);
	if (!ok) {
		if (__atomic_exchange_n(&logged_opt, 1, __ATOMIC_RELAXED))
			return false;
		if (o->bad < 0)
			ctxshim_log("libmicrohttpd: more than %d daemon options, or "
				    "option arrays nested more than %d deep: not "
				    "rewritten, url.path is the decoded url",
				    MHD_OPTS_MAX, MHD_OPTS_DEPTH);
		else
			ctxshim_log("libmicrohttpd: daemon option %d not rewritten, "
				    "url.path is the decoded url",
				    o->bad);
		return false;
	}
	/* An array item the library was built without (no HTTPS) fails
	 * silently where the va_list logs why; such a build is not
	 * rewritten. */
	for (i = 0; i < o->n; i++) {
		if (o->v[i].option != MHD_OPTION_HTTPS_CRED_TYPE)
			continue;
		if (real_is_feature_supported_fn &&
		    real_is_feature_supported_fn(MHD_FEATURE_TLS) == MHD_YES)
			break;
		if (!__atomic_exchange_n(&logged_tls, 1, __ATOMIC_RELAXED))
			ctxshim_log("libmicrohttpd without TLS: options not "
				    "rewritten, url.path is the decoded url");
		return false;
	}
	return true;
}

/* A va_list holding just our array, for MHD_start_daemon_va(). */
static struct MHD_Daemon *
mhd_start_array(unsigned int flags,
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
	d = real_MHD_start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls, ap);
	va_end(ap);
	return d;
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
	struct mhd_opts *o = NULL;
	struct mhd_wrap *w;
	int saved_errno = errno;

	if (!ctxshim_active() || !dh || dh == hook_mhd_handler)
		return real_MHD_start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls,
						ap);
	/* Starting a daemon allocates plenty; without memory for the
	 * wrapper the daemon simply runs unwrapped. */
	w = calloc(1, sizeof(*w));
	if (!w) {
		errno = saved_errno;
		return real_MHD_start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls,
						ap);
	}
	w->dh = dh;
	w->dh_cls = dh_cls;
	hook_mhd_bind();
	if (mhd_version_known()) {
		o = malloc(sizeof(*o));
		if (o && !mhd_opts_build(o, ap)) {
			free(o);
			o = NULL;
		}
	}
	if (o)
		mhd_opts_hook(o, w);
	errno = saved_errno;
	if (o)
		d = mhd_start_array(flags, port, apc, apc_cls, hook_mhd_handler, w,
				    MHD_OPTION_ARRAY, o->v, MHD_OPTION_END);
	else
		d = real_MHD_start_daemon_va(flags, port, apc, apc_cls,
					     hook_mhd_handler, w, ap);
	saved_errno = errno;
	/* MHD copied every option's value; the pointers in it are the
	 * application's. */
	free(o);
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
	mhd_request_answered(connection, response);
	errno = saved_errno;
	return r;
}

/* ret: the caller.  MHD's own fd and pipe responses call this too, and
 * then replace the closure in the response they got (response.c:
 * MHD_create_response_from_fd_at_offset64(), 0.9.75): those are never
 * wrapped, nor is any call when MHD's code was not found. */
static struct MHD_Response *
hook_mhd_create_response_from_callback(uint64_t size,
				       size_t block_size,
				       MHD_ContentReaderCallback crc,
				       void *crc_cls,
				       MHD_ContentReaderFreeCallback crfc,
				       const void *ret)
{
	struct MHD_Response *r;
	struct mhd_body *b;
	int saved_errno = errno;

	if (!ctxshim_active() || !crc)
		return real_MHD_create_response_from_callback(size, block_size, crc,
							      crc_cls, crfc);
	hook_mhd_bind();
	if (!__atomic_load_n(&mhd_text_hi, __ATOMIC_ACQUIRE) || mhd_from_library(ret))
		return real_MHD_create_response_from_callback(size, block_size, crc,
							      crc_cls, crfc);
	/* MHD allocates the response here as well; without memory for the
	 * wrapper the body is read without a context. */
	b = calloc(1, sizeof(*b));
	if (!b) {
		errno = saved_errno;
		return real_MHD_create_response_from_callback(size, block_size, crc,
							      crc_cls, crfc);
	}
	b->crc = crc;
	b->crc_cls = crc_cls;
	b->crfc = crfc;
	b->fd = -1;
	errno = saved_errno;
	r = real_MHD_create_response_from_callback(size, block_size, mhd_body_read, b,
						   mhd_body_free);
	saved_errno = errno;
	if (!r) {
		free(b);
	} else {
		b->resp = r;
		pthread_mutex_lock(&mhd_lock);
		HASH_ADD_PTR(mhd_bodies, resp, b);
		if (!b->hh.tbl)
			b->resp = NULL; /* not added: never shown */
		__atomic_store_n(&mhd_nbodies, HASH_COUNT(mhd_bodies),
				 __ATOMIC_RELEASE);
		pthread_mutex_unlock(&mhd_lock);
	}
	errno = saved_errno;
	return r;
}

/* MHD drops a connection's reference to its response through here (through
 * its PLT: connection.c, daemon.c), the application its own. */
static void
hook_mhd_destroy_response(struct MHD_Response *response, const void *ret)
{
	struct mhd_body *b;
	int saved_errno;

	if (response && __atomic_load_n(&mhd_nbodies, __ATOMIC_ACQUIRE) &&
	    mhd_from_library(ret)) {
		saved_errno = errno;
		pthread_mutex_lock(&mhd_lock);
		HASH_FIND_PTR(mhd_bodies, &response, b);
		if (b && b->users)
			b->users--;
		pthread_mutex_unlock(&mhd_lock);
		errno = saved_errno;
	}
	real_MHD_destroy_response(response);
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
	CTXSHIM_OWN_RETURN(mhd_own, 0, mhd_start_daemon_va_fn, flags, port, apc,
			   apc_cls, dh, dh_cls, ap);
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
	void *const *own = mhd_own(__builtin_return_address(0));
	struct MHD_Daemon *d;
	va_list ap;

	va_start(ap, dh_cls);
	if (own)
		d = ((mhd_start_daemon_va_fn)own[0])(flags, port, apc, apc_cls, dh,
						     dh_cls, ap);
	else
		d = hook_mhd_start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls, ap);
	va_end(ap);
	return d;
}

HOOK_EXPORT void
MHD_stop_daemon(struct MHD_Daemon *daemon)
{
	CTXSHIM_OWN_RETURN_VOID(mhd_own, 1, mhd_stop_daemon_fn, daemon);
	hook_mhd_stop_daemon(daemon);
}

HOOK_EXPORT enum MHD_Result
MHD_queue_response(struct MHD_Connection *connection,
		   unsigned int status_code,
		   struct MHD_Response *response)
{
	CTXSHIM_OWN_RETURN(mhd_own, 2, mhd_queue_response_fn, connection, status_code,
			   response);
	return hook_mhd_queue_response(connection, status_code, response);
}

HOOK_EXPORT struct MHD_Response *
MHD_create_response_from_callback(uint64_t size,
				  size_t block_size,
				  MHD_ContentReaderCallback crc,
				  void *crc_cls,
				  MHD_ContentReaderFreeCallback crfc)
{
	CTXSHIM_OWN_RETURN(mhd_own, 3, mhd_create_response_from_callback_fn, size,
			   block_size, crc, crc_cls, crfc);
	return hook_mhd_create_response_from_callback(
		size, block_size, crc, crc_cls, crfc, __builtin_return_address(0));
}

HOOK_EXPORT void
MHD_destroy_response(struct MHD_Response *response)
{
	CTXSHIM_OWN_RETURN_VOID(mhd_own, 4, mhd_destroy_response_fn, response);
	hook_mhd_destroy_response(response, __builtin_return_address(0));
}
