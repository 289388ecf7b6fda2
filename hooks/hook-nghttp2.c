/* SPDX-License-Identifier: Apache-2.0 */
/* nghttp2 (libnghttp2.so.14): HTTP/2 requests get their context per
 * stream on the server side, and outgoing requests carry the thread's
 * context on the client side.  Below TLS and at socket level HTTP/2 is
 * opaque (HPACK needs every header block of the connection decoded in
 * order); the library hands the decoded fields to callbacks, and builds
 * outgoing ones from an array we can extend.
 *
 * Server side.  The application registers its callbacks on an opaque
 * nghttp2_session_callbacks object, which nghttp2_session_server_new*()
 * copies into the session.  The setters we care about (begin headers,
 * header, header2, frame receive, data chunk receive, stream close,
 * before frame send, frame send, frame not send, send data) are hooked
 * only to remember, per callbacks object, what the application set
 * (they pass it on unchanged).  At nghttp2_session_server_new/2/3 we
 * create the session's state, put our trampolines into the callbacks
 * object, let nghttp2 copy it, and put the application's functions back:
 * the object holds the application's functions at every other time, so a
 * client session or an untracked one made from it never meets a
 * trampoline.  Only objects that nghttp2_session_callbacks_new() made
 * through us while the shim was active are swapped: their functions were
 * all NULL then and every setter since went through us, so we know
 * everything the application set on them.  An object a library's
 * constructor began before ours ran is never swapped (swapping it would
 * put NULL in place of the functions it was given before).  One mutex
 * guards the table of objects, the swap and the setters, but is never
 * held while nghttp2 runs the constructor: that calls the application's
 * allocator (nghttp2_session_server_new3() with an nghttp2_mem), which may
 * take a lock of its own that another thread holds while it calls a hook
 * here (nghttp2_session_del() of another connection), or call such a hook
 * itself (free an idle session to make room); under our mutex both
 * deadlocked.  Server sessions made from a shared object at the same time
 * share the swap: the first puts the trampolines in, the last one out
 * takes them out, and a setter meanwhile is recorded and takes effect
 * then.  Putting the application's functions back early is harmless (a
 * session that copies them is simply not followed), never the other way
 * round: a session that copied trampolines without finding its state
 * would call nothing.  Documented limit: a client session made from the
 * very same object on another thread during that swap would copy our
 * trampolines, which find no state for it and call nothing (that of
 * send_data_callback fails the send): nghttp2 clients and servers do
 * not share callbacks objects across threads in practice; libcurl makes
 * its own per connection.
 *
 * The trampolines find the session's state in a lock-free open-addressing
 * table (inserted and removed under the mutex, at session creation and
 * nghttp2_session_del), call the application's function if it set one
 * (on_header_callback2 stands in for either header callback) and return
 * what it returned.  Per stream, from its request HEADERS frame:
 *  - on_begin_headers starts collecting the request's fields (hook-h2.h);
 *  - on_header(2) collects them;
 *  - the first on_frame_recv of the HEADERS frame (the whole header
 *    block, CONTINUATIONs included) builds the context with the request
 *    model of request-ctx.h (trace continued from traceparent, or a new
 *    one; method, path, tracestate, configured headers);
 *  - from then on the stream's context is published while the
 *    application's callbacks for that stream run -- on_frame_recv,
 *    on_data_chunk_recv and on_stream_close while receiving; the read
 *    callback of its data source (below), before_frame_send,
 *    on_frame_send, on_frame_not_send and send_data_callback (frames of
 *    that stream) while sending -- and whatever the thread showed before
 *    is restored afterwards (events "h2-stream", "h2-restore" /
 *    "h2-return"): many streams share one thread, so the context switches
 *    with every callback;
 *  - on_stream_close frees the stream's state.
 * The four send-side callbacks get a trampoline only when the
 * application set them: nghttp2 skips a missing one itself (and fails a
 * NGHTTP2_DATA_FLAG_NO_COPY send without send_data_callback), and
 * frames sent go through them one by one.  Frames of stream 0 (SETTINGS,
 * PING, GOAWAY, ...) run under whatever the thread shows.  A connection
 * upgraded from HTTP/1.1 has no HEADERS frame for stream 1: it gets the
 * context the socket level published for the upgrade request
 * (nghttp2_session_upgrade/upgrade2, "upgrade from HTTP/1.1" below).
 *
 * Response bodies.  A server makes the body in the read callback of the
 * data provider it passes to nghttp2_submit_response() or
 * nghttp2_submit_data() (in nghttp2 1.52 the only other function taking
 * one is nghttp2_submit_request(), which a server session refuses), and
 * nghttp2 calls it from nghttp2_session_send()/mem_send(), streams in
 * turn, long after the request's callbacks returned.  For a stream we
 * follow, both hooks hand nghttp2 a copy of the provider (nghttp2 copies
 * it, so ours lives on the stack) with the application's source (its
 * pointer or fd) and nh_read() in place of its read callback, which the
 * stream's state keeps.  nh_read() is given the session and the stream id,
 * finds the state and publishes around the application's callback.
 * Both are hooked: nghttp2 1.52 submits a response's body after its
 * HEADERS with nghttp2_submit_data() through its PLT (the provider then
 * already holds nh_read(), passed on as it is), later versions
 * internally.  Streams not followed (over the bound, pushed streams,
 * client sessions, libcurl's) keep their provider untouched.
 *
 * Bounds: HOOK_NH_STREAMS_MAX streams with state per session (more are
 * not followed), HOOK_NH_SESSIONS sessions per process (more are made
 * untracked), HOOK_NH_CBS_MAX callbacks objects remembered.  Per stream:
 * about 3.3 KiB while the header block arrives, then about 700 bytes for
 * its context (the tracestate at its used size).  Allocation happens at
 * session and stream start (as nghttp2 allocates its own stream), never
 * in the data path.
 *
 * Client side.  nghttp2_submit_request and nghttp2_submit_headers (a new
 * stream, header block with ":method" other than CONNECT) get
 * "traceparent" (and "tracestate" when the context has one) appended to a
 * copy of the application's nva array, as hooks/hook-curl.c does for
 * libcurl: a child span-id of the thread's context (or the incoming
 * parent-id with CTXSHIM_PROPAGATE=transparent; nothing with
 * CTXSHIM_PROPAGATE=0 or without a context).  nghttp2 copies the array,
 * so ours lives on the stack.  A header block with a traceparent or a
 * tracestate field of the application's is left alone: it owns
 * propagation for that request.  libcurl's own HTTP/2 goes through
 * nghttp2: its requests are libcurl's business (hook-curl.c injects
 * there, or the application disabled the header, or it is an internal
 * transfer such as DNS over HTTPS), so calls from libcurl's code pass
 * straight through (checked by the caller's object with dladdr(), only
 * when we would inject).
 *
 * nghttp2 exports its names unversioned (Base): plain unversioned hooks,
 * bound at the first call with RTLD_NEXT, or through the soname with
 * RTLD_NOLOAD for a library loaded RTLD_LOCAL (as hook-openssl.c). */
#include "config.h"

#include "hooks.h"

#include "cfg.h"
#include "events.h"
#include "hook-h2.h"
#include "hook-http.h"
#include "log.h"
#include "w3c.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nghttp2/nghttp2.h>

/* uthash's default on a failed allocation is exit(): never in a host
 * process.  Non-fatal mode leaves the element out (hh.tbl == NULL). */
#define HASH_NONFATAL_OOM 1
#include <uthash.h>

#define NH_SONAME "libnghttp2.so.14"

#define HOOK_NH_STREAMS_MAX 256
#define HOOK_NH_SESSIONS    4096 /* power of two */
#define HOOK_NH_PROBES      64
#define HOOK_NH_CBS_MAX     1024
/* nva arrays up to this many entries are extended on the stack. */
#define HOOK_NH_NVA_STACK 64

enum nh_fn {
	NH_SET_BEGIN_HEADERS,
	NH_SET_HEADER,
	NH_SET_HEADER2,
	NH_SET_FRAME_RECV,
	NH_SET_DATA_CHUNK_RECV,
	NH_SET_STREAM_CLOSE,
	NH_SET_BEFORE_FRAME_SEND,
	NH_SET_FRAME_SEND,
	NH_SET_FRAME_NOT_SEND,
	NH_SET_SEND_DATA,
	NH_CALLBACKS_NEW,
	NH_CALLBACKS_DEL,
	NH_SERVER_NEW,
	NH_SERVER_NEW2,
	NH_SERVER_NEW3,
	NH_SESSION_DEL,
	NH_SUBMIT_REQUEST,
	NH_SUBMIT_HEADERS,
	NH_SUBMIT_RESPONSE,
	NH_SUBMIT_DATA,
	NH_UPGRADE,
	NH_UPGRADE2,
	NH_HOOKED, /* the ones above are ours; the ones below only called */
	NH_RCBUF_GET_BUF = NH_HOOKED,
	NH_N,
};

static const char *const nh_name[NH_N] = {
	"nghttp2_session_callbacks_set_on_begin_headers_callback",
	"nghttp2_session_callbacks_set_on_header_callback",
	"nghttp2_session_callbacks_set_on_header_callback2",
	"nghttp2_session_callbacks_set_on_frame_recv_callback",
	"nghttp2_session_callbacks_set_on_data_chunk_recv_callback",
	"nghttp2_session_callbacks_set_on_stream_close_callback",
	"nghttp2_session_callbacks_set_before_frame_send_callback",
	"nghttp2_session_callbacks_set_on_frame_send_callback",
	"nghttp2_session_callbacks_set_on_frame_not_send_callback",
	"nghttp2_session_callbacks_set_send_data_callback",
	"nghttp2_session_callbacks_new",
	"nghttp2_session_callbacks_del",
	"nghttp2_session_server_new",
	"nghttp2_session_server_new2",
	"nghttp2_session_server_new3",
	"nghttp2_session_del",
	"nghttp2_submit_request",
	"nghttp2_submit_headers",
	"nghttp2_submit_response",
	"nghttp2_submit_data",
	"nghttp2_session_upgrade",
	"nghttp2_session_upgrade2",
	"nghttp2_rcbuf_get_buf",
};

typedef int (*nh_callbacks_new_fn)(nghttp2_session_callbacks **);
typedef void (*nh_callbacks_del_fn)(nghttp2_session_callbacks *);
typedef int (*nh_server_new3_fn)(nghttp2_session **,
				 const nghttp2_session_callbacks *,
				 void *,
				 const nghttp2_option *,
				 nghttp2_mem *);
typedef void (*nh_session_del_fn)(nghttp2_session *);
typedef int32_t (*nh_submit_request_fn)(nghttp2_session *,
					const nghttp2_priority_spec *,
					const nghttp2_nv *,
					size_t,
					const nghttp2_data_provider *,
					void *);
typedef int32_t (*nh_submit_headers_fn)(nghttp2_session *,
					uint8_t,
					int32_t,
					const nghttp2_priority_spec *,
					const nghttp2_nv *,
					size_t,
					void *);
typedef int (*nh_submit_response_fn)(nghttp2_session *,
				     int32_t,
				     const nghttp2_nv *,
				     size_t,
				     const nghttp2_data_provider *);
typedef int (*nh_submit_data_fn)(nghttp2_session *,
				 uint8_t,
				 int32_t,
				 const nghttp2_data_provider *);
typedef int (*nh_upgrade_fn)(nghttp2_session *, const uint8_t *, size_t, void *);
typedef int (*nh_upgrade2_fn)(nghttp2_session *, const uint8_t *, size_t, int, void *);
typedef nghttp2_vec (*nh_rcbuf_get_buf_fn)(nghttp2_rcbuf *);

static void *nh_fn[NH_N];
static const void *nh_self[NH_HOOKED];
static struct ctxshim_callers nh_callers = {
	.names = nh_name, .n = NH_HOOKED, .selves = nh_self};
static pthread_once_t nh_once = PTHREAD_ONCE_INIT;

/* What the application set on one callbacks object (or for one session). */
struct nh_app {
	nghttp2_on_begin_headers_callback begin_headers;
	nghttp2_on_header_callback header;
	nghttp2_on_header_callback2 header2;
	nghttp2_on_frame_recv_callback frame_recv;
	nghttp2_on_data_chunk_recv_callback data_chunk_recv;
	nghttp2_on_stream_close_callback stream_close;
	nghttp2_before_frame_send_callback before_frame_send;
	nghttp2_on_frame_send_callback frame_send;
	nghttp2_on_frame_not_send_callback frame_not_send;
	nghttp2_send_data_callback send_data;
};

struct nh_cbs {
	const nghttp2_session_callbacks *cbs; /* key */
	struct nh_app app;
	/* Server constructors on the object (hook_nghttp2_server_new3()):
	 * those between the swap and their end, and those making an
	 * untracked session again (the object must keep the application's
	 * functions meanwhile).  While either is not 0, the entry is neither
	 * evicted nor freed (deleted: nghttp2_session_callbacks_del() came
	 * meanwhile, the last one frees it). */
	unsigned users, retrying;
	bool installed; /* the object holds our trampolines, for inst */
	bool deleted;
	struct nh_app inst; /* the application's functions when installed */
	UT_hash_handle hh;
};

struct nh_stream {
	int32_t id;              /* key */
	struct hook_h2_req *req; /* while the header block arrives */
	struct ctxshim_ctx *ctx; /* once built: used size only */
	/* The application's read callback of the stream's data source
	 * while nghttp2 may still call nh_read in its place. */
	nghttp2_data_source_read_callback app_read;
	/* Stream 1 of an upgraded session whose connection was confirmed
	 * (nh_upgrade_confirm()): ctx is the request the socket level
	 * published for it, which nh_stream_done() may take off the thread. */
	bool upgraded;
	/* ctx is the request the socket level followed on the connection
	 * before the session was made (nh_stream_adopt()): its header block
	 * is not collected again. */
	bool adopted;
	UT_hash_handle hh;
};

struct nh_session {
	nghttp2_session *session;
	struct nh_app app;
	/* Used only by the thread that drives the session (nghttp2
	 * sessions are not thread-safe): no lock. */
	struct nh_stream *streams;
	unsigned n_streams;
	/* After nghttp2_session_upgrade2(): the connection the socket level
	 * showed then (fd + 1, its generation), until the first received
	 * frame confirms or rejects it (nh_upgrade_confirm()); 0 otherwise. */
	int upgrade_fdp1;
	uint32_t upgrade_gen;
	/* Its upgrade candidate slot + 1 while upgrade_fdp1 is set
	 * (ctxshim_conn_h2_candidate_add()), 0 without one. */
	unsigned upgrade_slot;
};

struct nh_slot {
	_Atomic uintptr_t key; /* 0 empty, 1 deleted, else the session */
	struct nh_session *_Atomic st;
};

#define NH_DELETED ((uintptr_t)1)

static pthread_mutex_t nh_lock = PTHREAD_MUTEX_INITIALIZER;
/* Objects made by nghttp2_session_callbacks_new() while active, and what
 * the application set on them since. */
static struct nh_cbs *nh_cbs_table; /* under nh_lock */
static struct nh_slot nh_sessions[HOOK_NH_SESSIONS];

/* ---- binding ---------------------------------------------------------------- */

static void
nh_atfork_prepare(void)
{
	pthread_mutex_lock(&nh_lock);
}

static void
nh_atfork_release(void)
{
	pthread_mutex_unlock(&nh_lock);
}

static void nh_set_all(nghttp2_session_callbacks *cbs, const struct nh_app *a);

/* In the child: the constructors other threads were running do not go on
 * there, so their objects get the application's functions back (a
 * deleted entry, out of the table, is left to leak). */
static void
nh_atfork_child(void)
{
	struct nh_cbs *e, *tmp;

	HASH_ITER (hh, nh_cbs_table, e, tmp) {
		if (!e->users && !e->retrying)
			continue;
		e->users = 0;
		e->retrying = 0;
		if (e->installed) {
			nh_set_all((nghttp2_session_callbacks *)e->cbs, &e->app);
			e->installed = false;
		}
	}
	pthread_mutex_unlock(&nh_lock);
}

static void
hook_nghttp2_bind_once(void)
{
	static const char *const sonames[] = {NH_SONAME, NULL};
	int saved_errno = errno;
	int i;

	/* A child forked while another thread held the lock would never get
	 * it; hold it across fork() instead. */
	(void)pthread_atfork(nh_atfork_prepare, nh_atfork_release, nh_atfork_child);
	for (i = 0; i < NH_N; i++) {
		const void *self = i < NH_HOOKED ? nh_self[i] : (const void *)nh_self;
		void *p = ctxshim_bind_loaded(sonames, nh_name[i], NULL, self);

		nh_fn[i] = p;
		if (!p)
			ctxshim_log("nghttp2: %s not found", nh_name[i]);
	}
	ctxshim_callers_bound(&nh_callers, nh_fn[0]);
	errno = saved_errno;
}

static inline void
hook_nghttp2_bind(void)
{
	pthread_once(&nh_once, hook_nghttp2_bind_once);
}

#define NH_REAL(idx, type) ((type)(hook_nghttp2_bind(), nh_fn[idx]))

static inline void
real_set(enum nh_fn idx, nghttp2_session_callbacks *cbs, void (*fn)(void))
{
	/* Every setter has the shape void (callbacks *, function pointer);
	 * the pointer types differ only in the callback's signature. */
	void (*set)(nghttp2_session_callbacks *, void (*)(void)) =
		NH_REAL(idx, void (*)(nghttp2_session_callbacks *, void (*)(void)));

	if (set)
		set(cbs, fn);
}

static inline int
real_server_new3(nghttp2_session **s,
		 const nghttp2_session_callbacks *cbs,
		 void *user_data,
		 const nghttp2_option *opt,
		 nghttp2_mem *mem)
{
	nh_server_new3_fn f = NH_REAL(NH_SERVER_NEW3, nh_server_new3_fn);

	return f ? f(s, cbs, user_data, opt, mem) : NGHTTP2_ERR_NOMEM;
}

static inline nghttp2_vec
real_rcbuf_get_buf(nghttp2_rcbuf *b)
{
	nh_rcbuf_get_buf_fn f = (nh_rcbuf_get_buf_fn)nh_fn[NH_RCBUF_GET_BUF];
	nghttp2_vec none = {NULL, 0};

	return f && b ? f(b) : none;
}

/* ---- the session table ------------------------------------------------------- */

static inline unsigned
nh_hash(const nghttp2_session *s)
{
	uintptr_t k = (uintptr_t)s;

	k ^= k >> 17;
	k *= (uintptr_t)0x9e3779b97f4a7c15ull;
	return (unsigned)(k >> 40) & (HOOK_NH_SESSIONS - 1);
}

/* Lock-free: a session's slot cannot go away while one of its callbacks
 * runs (only nghttp2_session_del removes it), and removal leaves a
 * "deleted" mark, never an empty slot, so no probe chain breaks. */
static struct nh_session *
nh_find(const nghttp2_session *s)
{
	unsigned h = nh_hash(s), i;

	for (i = 0; i < HOOK_NH_PROBES; i++) {
		struct nh_slot *e = &nh_sessions[(h + i) & (HOOK_NH_SESSIONS - 1)];
		uintptr_t k = atomic_load_explicit(&e->key, memory_order_acquire);

		if (k == (uintptr_t)s)
			return atomic_load_explicit(&e->st, memory_order_relaxed);
		if (k == 0)
			return NULL;
	}
	return NULL;
}

/* Caller holds nh_lock. */
static bool
nh_insert_locked(struct nh_session *st)
{
	unsigned h = nh_hash(st->session), i;

	for (i = 0; i < HOOK_NH_PROBES; i++) {
		struct nh_slot *e = &nh_sessions[(h + i) & (HOOK_NH_SESSIONS - 1)];
		uintptr_t k = atomic_load_explicit(&e->key, memory_order_relaxed);

		if (k == 0 || k == NH_DELETED) {
			atomic_store_explicit(&e->st, st, memory_order_relaxed);
			atomic_store_explicit(&e->key, (uintptr_t)st->session,
					      memory_order_release);
			return true;
		}
	}
	return false;
}

/* Caller holds nh_lock. */
static struct nh_session *
nh_remove_locked(const nghttp2_session *s)
{
	unsigned h = nh_hash(s), i;

	for (i = 0; i < HOOK_NH_PROBES; i++) {
		struct nh_slot *e = &nh_sessions[(h + i) & (HOOK_NH_SESSIONS - 1)];
		uintptr_t k = atomic_load_explicit(&e->key, memory_order_relaxed);

		if (k == (uintptr_t)s) {
			struct nh_session *st =
				atomic_load_explicit(&e->st, memory_order_relaxed);

			atomic_store_explicit(&e->key, NH_DELETED,
					      memory_order_release);
			return st;
		}
		if (k == 0)
			break;
	}
	return NULL;
}

static void
nh_session_free(struct nh_session *st)
{
	struct nh_stream *s, *tmp;

	if (!st)
		return;
	ctxshim_conn_h2_candidate_remove(st->upgrade_slot);
	HASH_ITER (hh, st->streams, s, tmp) {
		HASH_DEL(st->streams, s);
		free(s->req);
		free(s->ctx);
		free(s);
	}
	free(st);
}

/* ---- callbacks objects ------------------------------------------------------- */

/* cbs was just made by nghttp2_session_callbacks_new(), all its functions
 * NULL: from now on its setters are recorded.  An entry left at that
 * address (an object freed without nghttp2_session_callbacks_del()) starts
 * over.  Without room or memory the object gets no entry: server sessions
 * made from it are simply not followed.  Caller holds nh_lock. */
static void
nh_cbs_add_locked(const nghttp2_session_callbacks *cbs)
{
	static bool logged;
	struct nh_cbs *e;

	HASH_FIND_PTR(nh_cbs_table, &cbs, e);
	if (e) {
		memset(&e->app, 0, sizeof(e->app));
		return;
	}
	if (HASH_COUNT(nh_cbs_table) >= HOOK_NH_CBS_MAX) {
		/* Objects the application never deleted: forget the oldest
		 * one no constructor is using, whose sessions are not followed
		 * from now on.  All in use: this one gets no entry. */
		for (e = nh_cbs_table; e && (e->users || e->retrying); e = e->hh.next)
			;
		if (!e)
			goto none;
		HASH_DEL(nh_cbs_table, e);
		free(e);
	}
	e = calloc(1, sizeof(*e));
	if (e) {
		e->cbs = cbs;
		HASH_ADD_PTR(nh_cbs_table, cbs, e);
		if (e->hh.tbl)
			return;
		free(e);
	}
none:
	if (!logged)
		ctxshim_log("nghttp2: out of memory, an HTTP/2 session not followed");
	logged = true;
}

/* A setter: remember the application's function (on an object we know
 * from its creation), then set it -- when the object holds our
 * trampolines, once they are taken out (the header callback, which they
 * never replace, at once). */
#define NH_SETTER(field, idx, type)                                                   \
	static void hook_nghttp2_set_##field(nghttp2_session_callbacks *cbs, type fn) \
	{                                                                             \
		int saved_errno = errno;                                              \
		struct nh_cbs *e = NULL;                                              \
                                                                                      \
		pthread_mutex_lock(&nh_lock);                                         \
		if (cbs && ctxshim_active())                                          \
			HASH_FIND_PTR(nh_cbs_table, &cbs, e);                         \
		if (e)                                                                \
			e->app.field = fn;                                            \
		errno = saved_errno;                                                  \
		if (!e || !e->installed || idx == NH_SET_HEADER)                      \
			real_set(idx, cbs, (void (*)(void))fn);                       \
		pthread_mutex_unlock(&nh_lock);                                       \
	}

NH_SETTER(begin_headers, NH_SET_BEGIN_HEADERS, nghttp2_on_begin_headers_callback)
NH_SETTER(header, NH_SET_HEADER, nghttp2_on_header_callback)
NH_SETTER(header2, NH_SET_HEADER2, nghttp2_on_header_callback2)
NH_SETTER(frame_recv, NH_SET_FRAME_RECV, nghttp2_on_frame_recv_callback)
NH_SETTER(data_chunk_recv, NH_SET_DATA_CHUNK_RECV, nghttp2_on_data_chunk_recv_callback)
NH_SETTER(stream_close, NH_SET_STREAM_CLOSE, nghttp2_on_stream_close_callback)
NH_SETTER(before_frame_send,
	  NH_SET_BEFORE_FRAME_SEND,
	  nghttp2_before_frame_send_callback)
NH_SETTER(frame_send, NH_SET_FRAME_SEND, nghttp2_on_frame_send_callback)
NH_SETTER(frame_not_send, NH_SET_FRAME_NOT_SEND, nghttp2_on_frame_not_send_callback)
NH_SETTER(send_data, NH_SET_SEND_DATA, nghttp2_send_data_callback)

static int
hook_nghttp2_callbacks_new(nghttp2_session_callbacks **cbs_ptr)
{
	nh_callbacks_new_fn f = NH_REAL(NH_CALLBACKS_NEW, nh_callbacks_new_fn);
	int saved_errno, r;

	if (!f)
		return NGHTTP2_ERR_NOMEM;
	r = f(cbs_ptr);
	if (r != 0 || !ctxshim_active() || !cbs_ptr || !*cbs_ptr)
		return r;
	saved_errno = errno;
	pthread_mutex_lock(&nh_lock);
	nh_cbs_add_locked(*cbs_ptr);
	pthread_mutex_unlock(&nh_lock);
	errno = saved_errno;
	return r;
}

static void
hook_nghttp2_callbacks_del(nghttp2_session_callbacks *cbs)
{
	nh_callbacks_del_fn del = NH_REAL(NH_CALLBACKS_DEL, nh_callbacks_del_fn);
	int saved_errno = errno;
	struct nh_cbs *e;

	pthread_mutex_lock(&nh_lock);
	HASH_FIND_PTR(nh_cbs_table, &cbs, e);
	if (e) {
		HASH_DEL(nh_cbs_table, e);
		/* A constructor still uses it (the application frees an
		 * object nghttp2 is copying): the last one frees it. */
		if (e->users || e->retrying) {
			e->deleted = true;
			e = NULL;
		}
	}
	pthread_mutex_unlock(&nh_lock);
	free(e);
	errno = saved_errno;
	if (del)
		del(cbs);
}

/* ---- streams ------------------------------------------------------------------ */

static struct nh_stream *
nh_stream_find(struct nh_session *st, int32_t id)
{
	struct nh_stream *s;

	HASH_FIND_INT(st->streams, &id, s);
	return s;
}

static void
nh_stream_free(struct nh_session *st, struct nh_stream *s)
{
	HASH_DEL(st->streams, s);
	st->n_streams--;
	free(s->req);
	free(s->ctx);
	free(s);
}

/* A request header block begins on stream id. */
static void
nh_stream_begin(struct nh_session *st, int32_t id)
{
	struct nh_stream *s = nh_stream_find(st, id);

	if (s && s->adopted && !s->req) {
		/* Its context is the socket level's (one span): kept. */
		s->adopted = false;
		return;
	}
	if (s) /* a stream id is never reused: stale state */
		nh_stream_free(st, s);
	if (st->n_streams >= HOOK_NH_STREAMS_MAX)
		return;
	s = calloc(1, sizeof(*s));
	if (!s)
		return;
	s->req = malloc(sizeof(*s->req));
	if (!s->req) {
		free(s);
		return;
	}
	hook_h2_req_init(s->req);
	s->id = id;
	HASH_ADD_INT(st->streams, id, s);
	if (!s->hh.tbl) {
		free(s->req);
		free(s);
		return;
	}
	st->n_streams++;
}

static struct ctxshim_ctx *nh_ctx_dup(const struct ctxshim_ctx *c);

/* A server that read the connection's first frames before it made the
 * session (looking for the preface, say) had them followed by the socket
 * level, whose context for the request of stream id the thread showed
 * (hook_socket_h2_library()): the stream gets that context, the same
 * span-id, and builds none of its own when its HEADERS frame reaches the
 * session (as stream 1 of an upgrade gets the head's, nh_upgraded()). */
static __attribute__((cold)) void
nh_stream_adopt(struct nh_session *st, int32_t id, const struct ctxshim_ctx *c)
{
	struct nh_stream *s = calloc(1, sizeof(*s));

	if (!s)
		return;
	s->ctx = nh_ctx_dup(c);
	if (!s->ctx) {
		free(s);
		return;
	}
	s->id = id;
	s->adopted = true;
	HASH_ADD_INT(st->streams, id, s);
	if (!s->hh.tbl) {
		free(s->ctx);
		free(s);
		return;
	}
	st->n_streams++;
}

/* A stream's copy of c: everything up to the tracestate's used bytes
 * (malloc'd, NULL without memory). */
static struct ctxshim_ctx *
nh_ctx_dup(const struct ctxshim_ctx *c)
{
	struct ctxshim_ctx *d;
	size_t attrs, size;

	attrs = c->attrs_len <= sizeof(c->attrs) ? c->attrs_len : 0;
	size = offsetof(struct ctxshim_ctx, attrs) + sizeof(c->attrs) +
	       (c->tracestate_len <= sizeof(c->tracestate) ? c->tracestate_len : 0);
	d = malloc(size);
	if (!d)
		return NULL;
	memcpy(d, c, offsetof(struct ctxshim_ctx, attrs) + attrs);
	d->attrs_len = (uint16_t)attrs;
	memcpy(d->tracestate, c->tracestate,
	       size - offsetof(struct ctxshim_ctx, tracestate));
	return d;
}

/* The header block of s is complete: its context. */
static void
nh_stream_ctx(struct nh_stream *s)
{
	struct hook_h2_view v;
	struct ctxshim_ctx c;

	hook_h2_req_view(s->req, &v);
	ctxshim_request_ctx(&c, &v.r);
	free(s->req);
	s->req = NULL;
	s->ctx = nh_ctx_dup(&c);
}

/* ---- trampolines ------------------------------------------------------------ */

/* The stream's context published around the application's callback. */
struct nh_scope {
	bool on;
	struct hook_http_saved sv;
	struct ctxshim_ctx ctx;
};

static void
nh_enter(struct nh_scope *sc, const struct nh_stream *s)
{
	int saved_errno;

	sc->on = s && s->ctx && ctxshim_active();
	if (!sc->on)
		return;
	saved_errno = errno;
	ctxshim_ctx_copy(&sc->ctx, s->ctx);
	hook_http_enter(-1, &sc->ctx, &sc->sv, "h2-stream");
	errno = saved_errno;
}

static void
nh_leave(struct nh_scope *sc)
{
	int saved_errno;

	if (!sc->on)
		return;
	saved_errno = errno;
	hook_http_leave(-1, &sc->ctx, &sc->sv, "h2-restore", "h2-return");
	errno = saved_errno;
}

static void nh_upgrade_confirm_slow(struct nh_session *st);

/* On the receive side: settles an upgrade left pending (one compare
 * otherwise). */
static inline void
nh_upgrade_confirm(struct nh_session *st)
{
	if (__builtin_expect(st->upgrade_fdp1 != 0, 0)) {
		int saved_errno = errno;

		nh_upgrade_confirm_slow(st);
		errno = saved_errno;
	}
}

static int
nh_on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
	struct nh_session *st = nh_find(session);

	if (!st)
		return 0;
	nh_upgrade_confirm(st);
	if (frame->hd.type == NGHTTP2_HEADERS &&
	    frame->headers.cat == NGHTTP2_HCAT_REQUEST && ctxshim_active()) {
		int saved_errno = errno;

		nh_stream_begin(st, frame->hd.stream_id);
		errno = saved_errno;
	}
	return st->app.begin_headers ? st->app.begin_headers(session, frame, ud) : 0;
}

static int
nh_on_header2(nghttp2_session *session,
	      const nghttp2_frame *frame,
	      nghttp2_rcbuf *name,
	      nghttp2_rcbuf *value,
	      uint8_t flags,
	      void *ud)
{
	struct nh_session *st = nh_find(session);
	nghttp2_vec n, v;

	if (!st)
		return 0;
	if (frame->hd.type == NGHTTP2_HEADERS &&
	    frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
		struct nh_stream *s = nh_stream_find(st, frame->hd.stream_id);

		if (s && s->req) {
			n = real_rcbuf_get_buf(name);
			v = real_rcbuf_get_buf(value);
			hook_h2_req_header(s->req,
					   (const char(*)[CTXSHIM_HEADER_NAME_MAX])
						   ctxshim_cfg.header_attrs,
					   ctxshim_cfg.n_header_attrs, n.base, n.len,
					   v.base, v.len);
		}
	}
	if (st->app.header2)
		return st->app.header2(session, frame, name, value, flags, ud);
	if (st->app.header) {
		n = real_rcbuf_get_buf(name);
		v = real_rcbuf_get_buf(value);
		return st->app.header(session, frame, n.base, n.len, v.base, v.len,
				      flags, ud);
	}
	return 0;
}

static int
nh_on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
	struct nh_session *st = nh_find(session);
	struct nh_stream *s = NULL;
	struct nh_scope sc;
	int r;

	if (!st)
		return 0;
	nh_upgrade_confirm(st);
	if (frame->hd.stream_id > 0)
		s = nh_stream_find(st, frame->hd.stream_id);
	if (s && s->req && frame->hd.type == NGHTTP2_HEADERS) {
		int saved_errno = errno;

		nh_stream_ctx(s);
		errno = saved_errno;
	}
	if (!st->app.frame_recv)
		return 0;
	nh_enter(&sc, s);
	r = st->app.frame_recv(session, frame, ud);
	nh_leave(&sc);
	return r;
}

static int
nh_on_data_chunk_recv(nghttp2_session *session,
		      uint8_t flags,
		      int32_t stream_id,
		      const uint8_t *data,
		      size_t len,
		      void *ud)
{
	struct nh_session *st = nh_find(session);
	struct nh_scope sc;
	int r;

	if (!st)
		return 0;
	nh_upgrade_confirm(st);
	if (!st->app.data_chunk_recv)
		return 0;
	nh_enter(&sc, nh_stream_find(st, stream_id));
	r = st->app.data_chunk_recv(session, flags, stream_id, data, len, ud);
	nh_leave(&sc);
	return r;
}

/* Stream s is closed.  Only an upgraded request (stream 1, below) can
 * still be on the thread outside its callbacks: the socket level published
 * it, and the server handled it after nghttp2_session_upgrade2() returned.
 * Its work is over now (without a callback of the application's for the
 * stream, no nh_leave() has taken it off yet).  Only once its connection
 * is confirmed: before, the context may be another connection's, which
 * the socket level still follows. */
static void
nh_stream_done(const struct nh_stream *s)
{
	const struct ctxshim_ctx *cur;

	if (!s->upgraded || !s->ctx || !(cur = ctxshim_current()) ||
	    !hook_scope_same_span(cur, s->ctx))
		return;
	ctxshim_detach();
	CTXSHIM_EVENT(CTXSHIM_EV_DETACH, -1, NULL, "h2-close");
}

static int
nh_on_stream_close(nghttp2_session *session,
		   int32_t stream_id,
		   uint32_t error_code,
		   void *ud)
{
	struct nh_session *st = nh_find(session);
	struct nh_stream *s;
	struct nh_scope sc;
	int r = 0;

	if (!st)
		return 0;
	s = nh_stream_find(st, stream_id);
	if (st->app.stream_close) {
		nh_enter(&sc, s);
		r = st->app.stream_close(session, stream_id, error_code, ud);
		nh_leave(&sc);
	}
	/* The application may not look the stream up afterwards either. */
	s = nh_stream_find(st, stream_id);
	if (s) {
		int saved_errno = errno;

		nh_stream_done(s);
		nh_stream_free(st, s);
		errno = saved_errno;
	}
	return r;
}

/* Sending.  nghttp2 calls these from nghttp2_session_send() and
 * nghttp2_session_mem_send(), where the thread shows what it showed
 * before the call; the response body is made here, frame by frame,
 * streams interleaved. */

static struct nh_stream *
nh_frame_stream(struct nh_session *st, const nghttp2_frame *frame)
{
	return frame->hd.stream_id > 0 ? nh_stream_find(st, frame->hd.stream_id) : NULL;
}

static int
nh_before_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
	struct nh_session *st = nh_find(session);
	struct nh_scope sc;
	int r;

	if (!st || !st->app.before_frame_send)
		return 0;
	nh_enter(&sc, nh_frame_stream(st, frame));
	r = st->app.before_frame_send(session, frame, ud);
	nh_leave(&sc);
	return r;
}

static int
nh_on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
	struct nh_session *st = nh_find(session);
	struct nh_scope sc;
	int r;

	if (!st || !st->app.frame_send)
		return 0;
	nh_enter(&sc, nh_frame_stream(st, frame));
	r = st->app.frame_send(session, frame, ud);
	nh_leave(&sc);
	return r;
}

static int
nh_on_frame_not_send(nghttp2_session *session,
		     const nghttp2_frame *frame,
		     int lib_error_code,
		     void *ud)
{
	struct nh_session *st = nh_find(session);
	struct nh_scope sc;
	int r;

	if (!st || !st->app.frame_not_send)
		return 0;
	nh_enter(&sc, nh_frame_stream(st, frame));
	r = st->app.frame_not_send(session, frame, lib_error_code, ud);
	nh_leave(&sc);
	return r;
}

/* NGHTTP2_DATA_FLAG_NO_COPY: the application writes the DATA frame (its
 * payload read from a file, say) itself. */
static int
nh_send_data(nghttp2_session *session,
	     nghttp2_frame *frame,
	     const uint8_t *framehd,
	     size_t length,
	     nghttp2_data_source *source,
	     void *ud)
{
	struct nh_session *st = nh_find(session);
	struct nh_scope sc;
	int r;

	/* Never without a function of the application's (not installed). */
	if (!st || !st->app.send_data)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	nh_enter(&sc, nh_frame_stream(st, frame));
	r = st->app.send_data(session, frame, framehd, length, source, ud);
	nh_leave(&sc);
	return r;
}

/* Stands in for the read callback of a tracked stream's data source
 * (nghttp2_submit_response/_data below): nghttp2 passes the stream id
 * and its own copy of the source, which holds the application's
 * pointer or fd unchanged. */
static ssize_t
nh_read(nghttp2_session *session,
	int32_t stream_id,
	uint8_t *buf,
	size_t length,
	uint32_t *data_flags,
	nghttp2_data_source *source,
	void *ud)
{
	struct nh_session *st = nh_find(session);
	struct nh_stream *s = st ? nh_stream_find(st, stream_id) : NULL;
	nghttp2_data_source_read_callback app = s ? s->app_read : NULL;
	struct nh_scope sc;
	ssize_t r;

	/* Cannot happen: the state lives until on_stream_close, and nghttp2
	 * reads no data of a closed stream.  Reset the stream rather than
	 * the session if it ever did. */
	if (!app)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	nh_enter(&sc, s);
	r = app(session, stream_id, buf, length, data_flags, source, ud);
	nh_leave(&sc);
	/* The source is done (EOF, or an error that resets the stream or
	 * ends the session): nghttp2 never calls it again, and the stream
	 * may take a new one (more data after NGHTTP2_DATA_FLAG_NO_END_STREAM).
	 * Deferred or paused, it stays.  Looked up again: nothing the
	 * callback may call closes a stream, but that costs nothing. */
	if (r >= 0 ? (*data_flags & NGHTTP2_DATA_FLAG_EOF) != 0
		   : r != NGHTTP2_ERR_DEFERRED && r != NGHTTP2_ERR_PAUSE) {
		s = nh_stream_find(st, stream_id);
		if (s && s->app_read == app)
			s->app_read = NULL;
	}
	return r;
}

/* ---- sessions ------------------------------------------------------------------ */

static void
nh_set_all(nghttp2_session_callbacks *cbs, const struct nh_app *a)
{
	real_set(NH_SET_BEGIN_HEADERS, cbs, (void (*)(void))a->begin_headers);
	real_set(NH_SET_HEADER2, cbs, (void (*)(void))a->header2);
	real_set(NH_SET_FRAME_RECV, cbs, (void (*)(void))a->frame_recv);
	real_set(NH_SET_DATA_CHUNK_RECV, cbs, (void (*)(void))a->data_chunk_recv);
	real_set(NH_SET_STREAM_CLOSE, cbs, (void (*)(void))a->stream_close);
	real_set(NH_SET_BEFORE_FRAME_SEND, cbs, (void (*)(void))a->before_frame_send);
	real_set(NH_SET_FRAME_SEND, cbs, (void (*)(void))a->frame_send);
	real_set(NH_SET_FRAME_NOT_SEND, cbs, (void (*)(void))a->frame_not_send);
	real_set(NH_SET_SEND_DATA, cbs, (void (*)(void))a->send_data);
}

/* e's last constructor is done: the object gets the application's
 * functions back; an entry deleted meanwhile is returned, to be freed
 * after the lock.  Caller holds nh_lock. */
static struct nh_cbs *
nh_cbs_idle_locked(struct nh_cbs *e, nghttp2_session_callbacks *cbs)
{
	if (e->users || e->retrying)
		return NULL;
	if (e->deleted)
		return e;
	if (e->installed) {
		nh_set_all(cbs, &e->app);
		e->installed = false;
	}
	return NULL;
}

/* Our mutex is never held while the real constructor runs (it calls the
 * application's allocator): see the top of this file. */
static int
hook_nghttp2_server_new3(nghttp2_session **session_ptr,
			 const nghttp2_session_callbacks *callbacks,
			 void *user_data,
			 const nghttp2_option *option,
			 nghttp2_mem *mem)
{
	struct nh_app ours = {
		.begin_headers = nh_on_begin_headers,
		.header2 = nh_on_header2,
		.frame_recv = nh_on_frame_recv,
		.data_chunk_recv = nh_on_data_chunk_recv,
		.stream_close = nh_on_stream_close,
	};
	/* The setters take a non-const object; nghttp2_session_callbacks_new
	 * made it writable, and the application's functions go back. */
	nghttp2_session_callbacks *cbs = (nghttp2_session_callbacks *)callbacks;
	struct nh_session *st;
	struct nh_cbs *e, *gone;
	struct ctxshim_ctx adopt;
	int32_t adopt_id = 0;
	bool adopted;
	int saved_errno = errno, r;

	if (!ctxshim_active() || !callbacks || !session_ptr)
		return real_server_new3(session_ptr, callbacks, user_data, option, mem);
	/* Its frames are ours (or nobody's): never the socket level's too. */
	adopted = hook_socket_h2_library(&adopt, &adopt_id);
	hook_nghttp2_bind();
	st = calloc(1, sizeof(*st));
	errno = saved_errno;
	if (!st)
		return real_server_new3(session_ptr, callbacks, user_data, option, mem);
	if (adopted)
		nh_stream_adopt(st, adopt_id, &adopt);
	pthread_mutex_lock(&nh_lock);
	/* Only an object made and set up through us: we know all that the
	 * application set on it.  Not while a session from it is made again
	 * untracked, which must not copy trampolines. */
	HASH_FIND_PTR(nh_cbs_table, &callbacks, e);
	if (!e || e->retrying) {
		pthread_mutex_unlock(&nh_lock);
		nh_session_free(st);
		errno = saved_errno;
		return real_server_new3(session_ptr, callbacks, user_data, option, mem);
	}
	if (!e->installed) {
		e->inst = e->app;
		/* The send side only where the application set a function:
		 * nghttp2 skips a missing one (or fails the send, for
		 * send_data) itself. */
		if (e->inst.before_frame_send)
			ours.before_frame_send = nh_before_frame_send;
		if (e->inst.frame_send)
			ours.frame_send = nh_on_frame_send;
		if (e->inst.frame_not_send)
			ours.frame_not_send = nh_on_frame_not_send;
		if (e->inst.send_data)
			ours.send_data = nh_send_data;
		nh_set_all(cbs, &ours);
		e->installed = true;
	}
	/* What the installed trampolines were set up for, also when another
	 * constructor installed them. */
	st->app = e->inst;
	e->users++;
	pthread_mutex_unlock(&nh_lock);
	errno = saved_errno;
	r = real_server_new3(session_ptr, callbacks, user_data, option, mem);
	saved_errno = errno;
	pthread_mutex_lock(&nh_lock);
	/* (0 only in a child forked by the allocator: nh_atfork_child()) */
	if (e->users)
		e->users--;
	if (r == 0) {
		st->session = *session_ptr;
		if (nh_insert_locked(st)) {
			st = NULL;
		} else {
			/* No room: the session must not keep our trampolines,
			 * which would find no state.  Start again, untracked,
			 * from the application's functions (out early for
			 * any other constructor: harmless), which the object
			 * keeps until then. */
			nh_session_del_fn del =
				NH_REAL(NH_SESSION_DEL, nh_session_del_fn);

			e->retrying++;
			if (e->installed && !e->deleted) {
				nh_set_all(cbs, &e->app);
				e->installed = false;
			}
			pthread_mutex_unlock(&nh_lock);
			ctxshim_log("nghttp2: session table full, not following a "
				    "session");
			if (del)
				del(*session_ptr);
			errno = saved_errno;
			r = real_server_new3(session_ptr, callbacks, user_data, option,
					     mem);
			saved_errno = errno;
			pthread_mutex_lock(&nh_lock);
			if (e->retrying)
				e->retrying--;
		}
	}
	gone = nh_cbs_idle_locked(e, cbs);
	pthread_mutex_unlock(&nh_lock);
	free(gone);
	nh_session_free(st);
	errno = saved_errno;
	return r;
}

static void
hook_nghttp2_session_del(nghttp2_session *session)
{
	nh_session_del_fn del = NH_REAL(NH_SESSION_DEL, nh_session_del_fn);
	struct nh_session *st = NULL;
	int saved_errno = errno;

	/* Out of the table before nghttp2 frees the session (it calls none
	 * of its callbacks while it does): once freed, its address may be
	 * a new session's -- another thread's, or one the application's
	 * nghttp2_mem free function makes -- whose callbacks and data
	 * sources must find their own state, never this one's (which would
	 * take the new session's streams along when freed here, and
	 * nh_read would then reset them). */
	if (session) {
		pthread_mutex_lock(&nh_lock);
		st = nh_remove_locked(session);
		pthread_mutex_unlock(&nh_lock);
	}
	errno = saved_errno;
	if (del)
		del(session);
	saved_errno = errno;
	nh_session_free(st);
	errno = saved_errno;
}

/* ---- response bodies ------------------------------------------------------------ */

/* The state of stream_id if the reads of data_prd are to run under its
 * context: a stream of a tracked server session (client sessions,
 * libcurl's included, are never in the table) whose request we follow,
 * and a read callback of the application's.  nh_read itself comes back
 * here: after sending a response's HEADERS nghttp2 submits its body
 * with nghttp2_submit_data() through its own PLT, from its copy of the
 * provider we gave nghttp2_submit_response().
 *
 * One source of ours per stream at a time, so that nh_read can never
 * call one source's function with another's data: nghttp2 keeps at most
 * one DATA source per stream (NGHTTP2_ERR_DATA_EXIST), but a response's
 * provider waits in its HEADERS until they are sent, and a
 * nghttp2_submit_data() in between takes the stream first.  While ours
 * may still be called (s->app_read set: submitted, not yet at EOF), a
 * further provider passes unchanged (correct, only without the
 * stream's context); the usual sequences (one body, or more data after
 * NGHTTP2_DATA_FLAG_NO_END_STREAM once the first is done) are all
 * covered. */
static struct nh_stream *
nh_body_stream(nghttp2_session *session,
	       int32_t stream_id,
	       const nghttp2_data_provider *prd)
{
	struct nh_session *st;
	struct nh_stream *s;

	if (!prd || !prd->read_callback || prd->read_callback == nh_read ||
	    stream_id <= 0 || !ctxshim_active())
		return NULL;
	st = nh_find(session);
	s = st ? nh_stream_find(st, stream_id) : NULL;
	return s && !s->app_read ? s : NULL;
}

/* ours: prd with nh_read in place of the application's read callback,
 * which s keeps.  nghttp2 copies the provider, so ours may live on the
 * caller's stack. */
static void
nh_body_begin(struct nh_stream *s,
	      const nghttp2_data_provider *prd,
	      nghttp2_data_provider *ours)
{
	s->app_read = prd->read_callback;
	ours->source = prd->source;
	ours->read_callback = nh_read;
}

static int
hook_nghttp2_submit_response(nghttp2_session *session,
			     int32_t stream_id,
			     const nghttp2_nv *nva,
			     size_t nvlen,
			     const nghttp2_data_provider *data_prd)
{
	nh_submit_response_fn f = NH_REAL(NH_SUBMIT_RESPONSE, nh_submit_response_fn);
	struct nh_stream *s = nh_body_stream(session, stream_id, data_prd);
	nghttp2_data_provider ours;
	int r;

	if (!f)
		return NGHTTP2_ERR_NOMEM;
	if (!s)
		return f(session, stream_id, nva, nvlen, data_prd);
	nh_body_begin(s, data_prd, &ours);
	/* Submitting calls no callback: s is still there afterwards. */
	r = f(session, stream_id, nva, nvlen, &ours);
	if (r != 0)
		s->app_read = NULL;
	return r;
}

static int
hook_nghttp2_submit_data(nghttp2_session *session,
			 uint8_t flags,
			 int32_t stream_id,
			 const nghttp2_data_provider *data_prd)
{
	nh_submit_data_fn f = NH_REAL(NH_SUBMIT_DATA, nh_submit_data_fn);
	struct nh_stream *s = nh_body_stream(session, stream_id, data_prd);
	nghttp2_data_provider ours;
	int r;

	if (!f)
		return NGHTTP2_ERR_NOMEM;
	if (!s)
		return f(session, flags, stream_id, data_prd);
	nh_body_begin(s, data_prd, &ours);
	r = f(session, flags, stream_id, &ours);
	if (r != 0)
		s->app_read = NULL;
	return r;
}

/* ---- upgrade from HTTP/1.1 ------------------------------------------------------- */

/* No candidate pending for st any more: the connection's writes after
 * the preface are no longer taken for stream 1's (hook-socket.c,
 * sk_write_continues()). */
static void
nh_upgrade_settled(struct nh_session *st)
{
	st->upgrade_fdp1 = 0;
	ctxshim_conn_h2_candidate_remove(st->upgrade_slot);
	st->upgrade_slot = 0;
}

/* Every upgrade candidate slot taken (more sessions than preload/conn.c
 * keeps waiting for their first frame at once: a server that leaks its
 * sessions, or a flood of upgrades whose clients send no preface): this
 * upgrade's writes after the client's preface show nothing, where the
 * others' show their upgrade request.  Said once: which one is which
 * depends only on the order the upgrades came in. */
static __attribute__((noinline, cold)) void
nh_upgrade_full_log(void)
{
	static _Atomic bool said;

	if (!atomic_exchange_explicit(&said, true, memory_order_relaxed))
		ctxshim_log("nghttp2: too many h2c upgrades pending at once; the "
			    "writes of a connection's stream 1 after the client's "
			    "preface show no context");
}

/* A server upgraded from HTTP/1.1 ("Upgrade: h2c", RFC 7540 section 3.2;
 * what `curl --http2 http://...` asks for) reads the request's head
 * itself and hands nghttp2 only its HTTP2-Settings: stream 1, that
 * request, has no HEADERS frame to build a context from.  The socket level
 * parsed the head and published its context on the thread that read it,
 * and the server usually upgrades right after (with its 101 written before
 * or after the call): when the thread still shows the socket level's
 * context then, that is stream 1's candidate.  Only a candidate: an event
 * loop may have read another connection's HTTP/1.1 request in between,
 * and the thread then shows that one.  So the candidate stays pending
 * (the connection and its generation in the session) until the session
 * receives its first frame: the client sends the HTTP/2 preface right
 * before it, on the upgraded connection, and the socket level's scanner
 * gives up on that preface (HTTP_SCAN_GIVE_UP_HTTP2).  If the candidate's
 * scanner did, it is the upgraded connection: stream 1 keeps the
 * context (the span the socket level gave the request: one request, one
 * span-id), and the connection is claimed (hook-http.h): from now on its
 * bytes are frames of many streams, which only this file can tell
 * apart.  If not, stream 1 is not followed and nothing is claimed: the
 * other connection stays the socket level's.  Until the confirmation,
 * writes on the connection are the socket level's as for any HTTP/1.1
 * one (the 101, frames sent before the first read), and stream 1's
 * callbacks show the candidate.  So are its writes after the client's
 * preface, which carry stream 1's response when the server sends it
 * before the session has a frame (it read the preface alone): while the
 * connection is the session's candidate (ctxshim_conn_h2_candidate_add()),
 * they continue the upgrade request (hook-socket.c,
 * sk_write_continues()).  No other connection's: one whose scanner gave
 * up on a preface after an "Upgrade: h2c" head and that no session holds
 * (preload/conn.c, "Upgrade: h2c") shows nothing on its writes from
 * there, whichever stream they carry.  The thread keeps showing the
 * request after the call, where the server handles it, until a callback
 * of stream 1 returns (nh_leave() then restores what it showed before,
 * which was the request itself: nothing) or the stream closes once
 * confirmed (nh_stream_done()).  When the thread shows no context of the
 * socket level's at the upgrade (a connection the socket level does not
 * follow), stream 1 is not followed. */
static void
nh_upgraded(nghttp2_session *session)
{
	struct nh_session *st = nh_find(session);
	const struct ctxshim_ctx *cur;
	struct nh_stream *s;
	struct ctxshim_ctx c;

	if (!st)
		return;
	nh_upgrade_settled(st);
	s = nh_stream_find(st, 1);
	if (s) /* stream 1 is new: stale state */
		nh_stream_free(st, s);
	if (!ctxshim_active() || !(cur = ctxshim_current()))
		return;
	ctxshim_ctx_copy(&c, cur);
	if (!hook_socket_ctx_stamp_conn(&c))
		return;
	st->upgrade_fdp1 = c.sock_fdp1;
	st->upgrade_gen = c.sock_gen;
	st->upgrade_slot = ctxshim_conn_h2_candidate_add(c.sock_fdp1 - 1, c.sock_gen);
	if (!st->upgrade_slot)
		nh_upgrade_full_log();
	c.sock_fdp1 = 0;
	c.sock_gen = 0;
	if (st->n_streams >= HOOK_NH_STREAMS_MAX)
		return;
	s = calloc(1, sizeof(*s));
	if (!s)
		return;
	s->id = 1;
	s->ctx = nh_ctx_dup(&c);
	if (!s->ctx) {
		free(s);
		return;
	}
	HASH_ADD_INT(st->streams, id, s);
	if (!s->hh.tbl) {
		free(s->ctx);
		free(s);
		return;
	}
	st->n_streams++;
}

/* The session's first received frame: the pending candidate of
 * nh_upgraded() is the upgraded connection only if its scanner gave up on
 * the preface read before the frame. */
static void
nh_upgrade_confirm_slow(struct nh_session *st)
{
	int fd = st->upgrade_fdp1 - 1;
	uint32_t gen = st->upgrade_gen;
	struct nh_stream *s = nh_stream_find(st, 1);

	/* The candidate as it is now: the fd it was taken on may have been
	 * closed since, the connection carried on by a copy of it
	 * (preload/conn.c, "Upgrade candidates"). */
	(void)ctxshim_conn_h2_candidate_get(st->upgrade_slot, &fd, &gen);
	nh_upgrade_settled(st);
	if (ctxshim_conn_h2_preface(fd, gen)) {
		if (s)
			s->upgraded = true;
		ctxshim_conn_claim(fd);
		return;
	}
	if (s && !s->req) /* not a stream 1 of HEADERS: the candidate's */
		nh_stream_free(st, s);
}

static int
hook_nghttp2_upgrade(nghttp2_session *session,
		     const uint8_t *settings_payload,
		     size_t settings_payloadlen,
		     void *stream_user_data)
{
	nh_upgrade_fn f = NH_REAL(NH_UPGRADE, nh_upgrade_fn);
	int saved_errno, r;

	if (!f)
		return NGHTTP2_ERR_NOMEM;
	r = f(session, settings_payload, settings_payloadlen, stream_user_data);
	if (r != 0)
		return r;
	saved_errno = errno;
	nh_upgraded(session);
	errno = saved_errno;
	return r;
}

static int
hook_nghttp2_upgrade2(nghttp2_session *session,
		      const uint8_t *settings_payload,
		      size_t settings_payloadlen,
		      int head_request,
		      void *stream_user_data)
{
	nh_upgrade2_fn f = NH_REAL(NH_UPGRADE2, nh_upgrade2_fn);
	int saved_errno, r;

	if (!f)
		return NGHTTP2_ERR_NOMEM;
	r = f(session, settings_payload, settings_payloadlen, head_request,
	      stream_user_data);
	if (r != 0)
		return r;
	saved_errno = errno;
	nh_upgraded(session);
	errno = saved_errno;
	return r;
}

/* ---- client side ------------------------------------------------------------------ */

static bool
nh_nv_is(const nghttp2_nv *nv, const char *name, size_t len)
{
	return nv->namelen == len && nv->name &&
	       strncasecmp((const char *)nv->name, name, len) == 0;
}

/* A request header block without trace context of the application's?
 * One that has a traceparent or a tracestate field is the application's to
 * propagate (as in hook-curl.c): our traceparent next to its tracestate
 * would file its vendors' state under our trace. */
static bool
nh_wants_tp(const nghttp2_nv *nva, size_t nvlen)
{
	bool method = false;
	size_t i;

	if (!nva)
		return false;
	for (i = 0; i < nvlen; i++) {
		const nghttp2_nv *nv = &nva[i];

		if (nh_nv_is(nv, ":method", 7)) {
			/* A tunnel carries someone else's protocol. */
			if (nv->valuelen == 7 && nv->value &&
			    memcmp(nv->value, "CONNECT", 7) == 0)
				return false;
			method = true;
		} else if (nh_nv_is(nv, "traceparent", 11) ||
			   nh_nv_is(nv, "tracestate", 10)) {
			return false;
		}
	}
	return method;
}

/* Called from libcurl's code (its HTTP/2 layer)? */
static bool
nh_from_curl(const void *ra)
{
	Dl_info info;
	const char *base;

	if (!dladdr(ra, &info) || !info.dli_fname)
		return false;
	base = strrchr(info.dli_fname, '/');
	base = base ? base + 1 : info.dli_fname;
	return strncmp(base, "libcurl", 7) == 0;
}

/* The fields to add for the thread's context, as hook-curl.c decides. */
struct nh_inject {
	char tp[W3C_TRACEPARENT_LEN + 1];
	nghttp2_nv nv[2];
	size_t n;
};

static bool
nh_plan(struct nh_inject *in, const nghttp2_nv *nva, size_t nvlen, const void *ra)
{
	const struct ctxshim_ctx *cur;
	uint8_t span[8];
	const uint8_t *parent;

	if (!ctxshim_active() || ctxshim_cfg.propagate == CTXSHIM_PROPAGATE_OFF)
		return false;
	cur = ctxshim_current();
	if (!cur || w3c_id_is_zero(cur->trace_id, sizeof(cur->trace_id)) ||
	    !nh_wants_tp(nva, nvlen) || nh_from_curl(ra))
		return false;
	if (ctxshim_cfg.propagate == CTXSHIM_PROPAGATE_TRANSPARENT) {
		parent = cur->has_parent ? cur->parent_id : cur->span_id;
	} else {
		ctxshim_new_span_id(span);
		parent = span;
	}
	(void)w3c_traceparent_format(in->tp, cur->trace_id, parent, cur->flags);
	in->n = 0;
	in->nv[in->n++] = (nghttp2_nv){(uint8_t *)"traceparent", (uint8_t *)in->tp, 11,
				       W3C_TRACEPARENT_LEN, NGHTTP2_NV_FLAG_NONE};
	if (cur->tracestate_len > 0 && cur->tracestate_len <= CTXSHIM_TRACESTATE_MAX)
		in->nv[in->n++] = (nghttp2_nv){
			(uint8_t *)"tracestate", (uint8_t *)cur->tracestate, 10,
			cur->tracestate_len, NGHTTP2_NV_FLAG_NONE};
	return true;
}

/* nva followed by in's fields: in buf if it fits, else malloc'd (*heap). */
static nghttp2_nv *
nh_extend(const nghttp2_nv *nva,
	  size_t nvlen,
	  const struct nh_inject *in,
	  nghttp2_nv *buf,
	  nghttp2_nv **heap)
{
	nghttp2_nv *out = buf;

	*heap = NULL;
	if (nvlen + in->n > HOOK_NH_NVA_STACK) {
		if (nvlen > SIZE_MAX / sizeof(*out) - in->n)
			return NULL;
		out = *heap = malloc((nvlen + in->n) * sizeof(*out));
		if (!out)
			return NULL;
	}
	memcpy(out, nva, nvlen * sizeof(*out));
	memcpy(out + nvlen, in->nv, in->n * sizeof(*out));
	return out;
}

static int32_t
hook_nghttp2_submit_request(nghttp2_session *session,
			    const nghttp2_priority_spec *pri_spec,
			    const nghttp2_nv *nva,
			    size_t nvlen,
			    const nghttp2_data_provider *data_prd,
			    void *stream_user_data,
			    const void *ra)
{
	nh_submit_request_fn f = NH_REAL(NH_SUBMIT_REQUEST, nh_submit_request_fn);
	nghttp2_nv buf[HOOK_NH_NVA_STACK], *ext, *heap;
	struct nh_inject in;
	int saved_errno = errno;
	int32_t r;

	if (!f)
		return NGHTTP2_ERR_NOMEM;
	if (!nh_plan(&in, nva, nvlen, ra) ||
	    !(ext = nh_extend(nva, nvlen, &in, buf, &heap))) {
		errno = saved_errno;
		return f(session, pri_spec, nva, nvlen, data_prd, stream_user_data);
	}
	errno = saved_errno;
	r = f(session, pri_spec, ext, nvlen + in.n, data_prd, stream_user_data);
	saved_errno = errno;
	free(heap);
	errno = saved_errno;
	return r;
}

static int32_t
hook_nghttp2_submit_headers(nghttp2_session *session,
			    uint8_t flags,
			    int32_t stream_id,
			    const nghttp2_priority_spec *pri_spec,
			    const nghttp2_nv *nva,
			    size_t nvlen,
			    void *stream_user_data,
			    const void *ra)
{
	nh_submit_headers_fn f = NH_REAL(NH_SUBMIT_HEADERS, nh_submit_headers_fn);
	nghttp2_nv buf[HOOK_NH_NVA_STACK], *ext, *heap;
	struct nh_inject in;
	int saved_errno = errno;
	int32_t r;

	if (!f)
		return NGHTTP2_ERR_NOMEM;
	/* stream_id -1 opens a new stream (a request); anything else is a
	 * response, trailers or a push's headers. */
	if (stream_id != -1 || !nh_plan(&in, nva, nvlen, ra) ||
	    !(ext = nh_extend(nva, nvlen, &in, buf, &heap))) {
		errno = saved_errno;
		return f(session, flags, stream_id, pri_spec, nva, nvlen,
			 stream_user_data);
	}
	errno = saved_errno;
	r = f(session, flags, stream_id, pri_spec, ext, nvlen + in.n, stream_user_data);
	saved_errno = errno;
	free(heap);
	errno = saved_errno;
	return r;
}

/* ---- exported names -------------------------------------------------------------- */

/* The caller's own libnghttp2 (its definitions by nh_name; a library
 * that carries a copy, bind.h), or NULL: the call is ours.  ret: the
 * exported hook's return address. */
static inline void *const *
nh_own(const void *ret)
{
	hook_nghttp2_bind();
	return ctxshim_callers_own(&nh_callers, ret, nh_fn[0]);
}

HOOK_EXPORT void
nghttp2_session_callbacks_set_on_begin_headers_callback(
	nghttp2_session_callbacks *cbs, nghttp2_on_begin_headers_callback fn)
{
	CTXSHIM_OWN_RETURN_VOID(nh_own, NH_SET_BEGIN_HEADERS,
				void (*)(nghttp2_session_callbacks *,
					 nghttp2_on_begin_headers_callback),
				cbs, fn);
	hook_nghttp2_set_begin_headers(cbs, fn);
}

HOOK_EXPORT void
nghttp2_session_callbacks_set_on_header_callback(nghttp2_session_callbacks *cbs,
						 nghttp2_on_header_callback fn)
{
	CTXSHIM_OWN_RETURN_VOID(
		nh_own, NH_SET_HEADER,
		void (*)(nghttp2_session_callbacks *, nghttp2_on_header_callback), cbs,
		fn);
	hook_nghttp2_set_header(cbs, fn);
}

HOOK_EXPORT void
nghttp2_session_callbacks_set_on_header_callback2(nghttp2_session_callbacks *cbs,
						  nghttp2_on_header_callback2 fn)
{
	CTXSHIM_OWN_RETURN_VOID(
		nh_own, NH_SET_HEADER2,
		void (*)(nghttp2_session_callbacks *, nghttp2_on_header_callback2), cbs,
		fn);
	hook_nghttp2_set_header2(cbs, fn);
}

HOOK_EXPORT void
nghttp2_session_callbacks_set_on_frame_recv_callback(nghttp2_session_callbacks *cbs,
						     nghttp2_on_frame_recv_callback fn)
{
	CTXSHIM_OWN_RETURN_VOID(
		nh_own, NH_SET_FRAME_RECV,
		void (*)(nghttp2_session_callbacks *, nghttp2_on_frame_recv_callback),
		cbs, fn);
	hook_nghttp2_set_frame_recv(cbs, fn);
}

HOOK_EXPORT void
nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
	nghttp2_session_callbacks *cbs, nghttp2_on_data_chunk_recv_callback fn)
{
	CTXSHIM_OWN_RETURN_VOID(nh_own, NH_SET_DATA_CHUNK_RECV,
				void (*)(nghttp2_session_callbacks *,
					 nghttp2_on_data_chunk_recv_callback),
				cbs, fn);
	hook_nghttp2_set_data_chunk_recv(cbs, fn);
}

HOOK_EXPORT void
nghttp2_session_callbacks_set_on_stream_close_callback(
	nghttp2_session_callbacks *cbs, nghttp2_on_stream_close_callback fn)
{
	CTXSHIM_OWN_RETURN_VOID(
		nh_own, NH_SET_STREAM_CLOSE,
		void (*)(nghttp2_session_callbacks *, nghttp2_on_stream_close_callback),
		cbs, fn);
	hook_nghttp2_set_stream_close(cbs, fn);
}

HOOK_EXPORT void
nghttp2_session_callbacks_set_before_frame_send_callback(
	nghttp2_session_callbacks *cbs, nghttp2_before_frame_send_callback fn)
{
	CTXSHIM_OWN_RETURN_VOID(nh_own, NH_SET_BEFORE_FRAME_SEND,
				void (*)(nghttp2_session_callbacks *,
					 nghttp2_before_frame_send_callback),
				cbs, fn);
	hook_nghttp2_set_before_frame_send(cbs, fn);
}

HOOK_EXPORT void
nghttp2_session_callbacks_set_on_frame_send_callback(nghttp2_session_callbacks *cbs,
						     nghttp2_on_frame_send_callback fn)
{
	CTXSHIM_OWN_RETURN_VOID(
		nh_own, NH_SET_FRAME_SEND,
		void (*)(nghttp2_session_callbacks *, nghttp2_on_frame_send_callback),
		cbs, fn);
	hook_nghttp2_set_frame_send(cbs, fn);
}

HOOK_EXPORT void
nghttp2_session_callbacks_set_on_frame_not_send_callback(
	nghttp2_session_callbacks *cbs, nghttp2_on_frame_not_send_callback fn)
{
	CTXSHIM_OWN_RETURN_VOID(nh_own, NH_SET_FRAME_NOT_SEND,
				void (*)(nghttp2_session_callbacks *,
					 nghttp2_on_frame_not_send_callback),
				cbs, fn);
	hook_nghttp2_set_frame_not_send(cbs, fn);
}

HOOK_EXPORT void
nghttp2_session_callbacks_set_send_data_callback(nghttp2_session_callbacks *cbs,
						 nghttp2_send_data_callback fn)
{
	CTXSHIM_OWN_RETURN_VOID(
		nh_own, NH_SET_SEND_DATA,
		void (*)(nghttp2_session_callbacks *, nghttp2_send_data_callback), cbs,
		fn);
	hook_nghttp2_set_send_data(cbs, fn);
}

HOOK_EXPORT int
nghttp2_session_callbacks_new(nghttp2_session_callbacks **cbs_ptr)
{
	CTXSHIM_OWN_RETURN(nh_own, NH_CALLBACKS_NEW, nh_callbacks_new_fn, cbs_ptr);
	return hook_nghttp2_callbacks_new(cbs_ptr);
}

HOOK_EXPORT void
nghttp2_session_callbacks_del(nghttp2_session_callbacks *cbs)
{
	CTXSHIM_OWN_RETURN_VOID(nh_own, NH_CALLBACKS_DEL, nh_callbacks_del_fn, cbs);
	hook_nghttp2_callbacks_del(cbs);
}

/* new and new2 are new3 with defaults (nghttp2_session.c); calling the
 * real new3 from all three (not the real new/new2, which would call our
 * new3 again through nghttp2's PLT) wraps a session exactly once. */
HOOK_EXPORT int
nghttp2_session_server_new(nghttp2_session **session_ptr,
			   const nghttp2_session_callbacks *callbacks,
			   void *user_data)
{
	CTXSHIM_OWN_RETURN(
		nh_own, NH_SERVER_NEW,
		int (*)(nghttp2_session **, const nghttp2_session_callbacks *, void *),
		session_ptr, callbacks, user_data);
	return hook_nghttp2_server_new3(session_ptr, callbacks, user_data, NULL, NULL);
}

HOOK_EXPORT int
nghttp2_session_server_new2(nghttp2_session **session_ptr,
			    const nghttp2_session_callbacks *callbacks,
			    void *user_data,
			    const nghttp2_option *option)
{
	CTXSHIM_OWN_RETURN(nh_own, NH_SERVER_NEW2,
			   int (*)(nghttp2_session **,
				   const nghttp2_session_callbacks *, void *,
				   const nghttp2_option *),
			   session_ptr, callbacks, user_data, option);
	return hook_nghttp2_server_new3(session_ptr, callbacks, user_data, option,
					NULL);
}

HOOK_EXPORT int
nghttp2_session_server_new3(nghttp2_session **session_ptr,
			    const nghttp2_session_callbacks *callbacks,
			    void *user_data,
			    const nghttp2_option *option,
			    nghttp2_mem *mem)
{
	CTXSHIM_OWN_RETURN(nh_own, NH_SERVER_NEW3, nh_server_new3_fn, session_ptr,
			   callbacks, user_data, option, mem);
	return hook_nghttp2_server_new3(session_ptr, callbacks, user_data, option, mem);
}

HOOK_EXPORT void
nghttp2_session_del(nghttp2_session *session)
{
	CTXSHIM_OWN_RETURN_VOID(nh_own, NH_SESSION_DEL, nh_session_del_fn, session);
	hook_nghttp2_session_del(session);
}

HOOK_EXPORT int32_t
nghttp2_submit_request(nghttp2_session *session,
		       const nghttp2_priority_spec *pri_spec,
		       const nghttp2_nv *nva,
		       size_t nvlen,
		       const nghttp2_data_provider *data_prd,
		       void *stream_user_data)
{
	CTXSHIM_OWN_RETURN(nh_own, NH_SUBMIT_REQUEST, nh_submit_request_fn, session,
			   pri_spec, nva, nvlen, data_prd, stream_user_data);
	return hook_nghttp2_submit_request(session, pri_spec, nva, nvlen, data_prd,
					   stream_user_data,
					   __builtin_return_address(0));
}

HOOK_EXPORT int32_t
nghttp2_submit_headers(nghttp2_session *session,
		       uint8_t flags,
		       int32_t stream_id,
		       const nghttp2_priority_spec *pri_spec,
		       const nghttp2_nv *nva,
		       size_t nvlen,
		       void *stream_user_data)
{
	CTXSHIM_OWN_RETURN(nh_own, NH_SUBMIT_HEADERS, nh_submit_headers_fn, session,
			   flags, stream_id, pri_spec, nva, nvlen, stream_user_data);
	return hook_nghttp2_submit_headers(session, flags, stream_id, pri_spec, nva,
					   nvlen, stream_user_data,
					   __builtin_return_address(0));
}

HOOK_EXPORT int
nghttp2_submit_response(nghttp2_session *session,
			int32_t stream_id,
			const nghttp2_nv *nva,
			size_t nvlen,
			const nghttp2_data_provider *data_prd)
{
	CTXSHIM_OWN_RETURN(nh_own, NH_SUBMIT_RESPONSE, nh_submit_response_fn, session,
			   stream_id, nva, nvlen, data_prd);
	return hook_nghttp2_submit_response(session, stream_id, nva, nvlen, data_prd);
}

HOOK_EXPORT int
nghttp2_submit_data(nghttp2_session *session,
		    uint8_t flags,
		    int32_t stream_id,
		    const nghttp2_data_provider *data_prd)
{
	CTXSHIM_OWN_RETURN(nh_own, NH_SUBMIT_DATA, nh_submit_data_fn, session, flags,
			   stream_id, data_prd);
	return hook_nghttp2_submit_data(session, flags, stream_id, data_prd);
}

/* Both: nghttp2 1.52 implements each on an internal function, neither
 * calls the other. */
HOOK_EXPORT int
nghttp2_session_upgrade(nghttp2_session *session,
			const uint8_t *settings_payload,
			size_t settings_payloadlen,
			void *stream_user_data)
{
	CTXSHIM_OWN_RETURN(nh_own, NH_UPGRADE, nh_upgrade_fn, session, settings_payload,
			   settings_payloadlen, stream_user_data);
	return hook_nghttp2_upgrade(session, settings_payload, settings_payloadlen,
				    stream_user_data);
}

HOOK_EXPORT int
nghttp2_session_upgrade2(nghttp2_session *session,
			 const uint8_t *settings_payload,
			 size_t settings_payloadlen,
			 int head_request,
			 void *stream_user_data)
{
	CTXSHIM_OWN_RETURN(nh_own, NH_UPGRADE2, nh_upgrade2_fn, session,
			   settings_payload, settings_payloadlen, head_request,
			   stream_user_data);
	return hook_nghttp2_upgrade2(session, settings_payload, settings_payloadlen,
				     head_request, stream_user_data);
}

/* Our own definitions, so that a binding can never come back to them. */
static const void *nh_self[NH_HOOKED] = {
	[NH_SET_BEGIN_HEADERS] =
		(const void *)nghttp2_session_callbacks_set_on_begin_headers_callback,
	[NH_SET_HEADER] =
		(const void *)nghttp2_session_callbacks_set_on_header_callback,
	[NH_SET_HEADER2] =
		(const void *)nghttp2_session_callbacks_set_on_header_callback2,
	[NH_SET_FRAME_RECV] =
		(const void *)nghttp2_session_callbacks_set_on_frame_recv_callback,
	[NH_SET_DATA_CHUNK_RECV] =
		(const void *)nghttp2_session_callbacks_set_on_data_chunk_recv_callback,
	[NH_SET_STREAM_CLOSE] =
		(const void *)nghttp2_session_callbacks_set_on_stream_close_callback,
	[NH_SET_BEFORE_FRAME_SEND] =
		(const void *)nghttp2_session_callbacks_set_before_frame_send_callback,
	[NH_SET_FRAME_SEND] =
		(const void *)nghttp2_session_callbacks_set_on_frame_send_callback,
	[NH_SET_FRAME_NOT_SEND] =
		(const void *)nghttp2_session_callbacks_set_on_frame_not_send_callback,
	[NH_SET_SEND_DATA] =
		(const void *)nghttp2_session_callbacks_set_send_data_callback,
	[NH_CALLBACKS_NEW] = (const void *)nghttp2_session_callbacks_new,
	[NH_CALLBACKS_DEL] = (const void *)nghttp2_session_callbacks_del,
	[NH_SERVER_NEW] = (const void *)nghttp2_session_server_new,
	[NH_SERVER_NEW2] = (const void *)nghttp2_session_server_new2,
	[NH_SERVER_NEW3] = (const void *)nghttp2_session_server_new3,
	[NH_SESSION_DEL] = (const void *)nghttp2_session_del,
	[NH_SUBMIT_REQUEST] = (const void *)nghttp2_submit_request,
	[NH_SUBMIT_HEADERS] = (const void *)nghttp2_submit_headers,
	[NH_SUBMIT_RESPONSE] = (const void *)nghttp2_submit_response,
	[NH_SUBMIT_DATA] = (const void *)nghttp2_submit_data,
	[NH_UPGRADE] = (const void *)nghttp2_session_upgrade,
	[NH_UPGRADE2] = (const void *)nghttp2_session_upgrade2,
};
