/* SPDX-License-Identifier: Apache-2.0 */
/* libfcgi (FastCGI): the thread that accepted a request publishes it until
 * the request ends.
 *
 * A libfcgi application is a loop around an accept call: FCGX_Accept_r()
 * (one FCGX_Request per thread), FCGX_Accept() or fcgi_stdio.h's
 * FCGI_Accept(), which sets environ.  Each returns with the request's
 * parameters read: CGI meta-variables (REQUEST_METHOD, REQUEST_URI,
 * HTTP_TRACEPARENT, HTTP_<NAME>, ...) in the request's envp array.  So a
 * request is published from the same model as a CGI program's environment
 * (preload/request-cgi.c): a child span of HTTP_TRACEPARENT, or a new
 * trace without a valid one.  The connection's bytes are FastCGI records,
 * which the socket level follows too (preload/conn.c, "FastCGI": servers
 * without libfcgi, php-fpm); libfcgi's accept read the request's records,
 * so the socket level has published it already, from the same
 * parameters: we take its ids (one request, one span) and claim the fd,
 * as the other library hooks do (hook-http.h,
 * hook_http_adopt_socket_ctx()), so that the socket level leaves its
 * later requests to us.
 *
 * The request ends at FCGX_Finish_r() (FCGX_Finish(), FCGI_Finish()), at
 * FCGX_Free(), or when the thread calls accept again, before the real
 * call blocks: a thread waiting for its next request publishes nothing.
 *
 * Which calls to hook: in Debian 12's libfcgi.so.0 (2.4.2), FCGI_Accept()
 * calls FCGX_Accept(), which calls FCGX_Accept_r() on the library's own
 * request, and FCGI_Finish() calls FCGX_Finish(), which calls
 * FCGX_Finish_r(); FCGX_Accept_r() calls FCGX_Finish_r() for the previous
 * request and FCGX_Finish_r() calls FCGX_Free() -- all through the PLT
 * (readelf -r: R_X86_64_JUMP_SLOT relocations for each; objdump -d: the
 * calls go to the @plt entries).  So FCGX_Accept_r(), FCGX_Finish_r() and
 * FCGX_Free() see every entry point, with the FCGX_Request at hand (its
 * ipcFd is the connection), and the others are not hooked: a hook of
 * FCGX_Accept() as well would publish each request twice.  FCGI_Accept()
 * of a program run as plain CGI (not a FastCGI socket on fd 0) calls no
 * FCGX_ function: that request is the CGI carrier's (shim.c).
 *
 * FCGX_Accept_r() first finishes the request it is given, which flushes
 * its response: the canonical FCGI_Accept() loop sends each response
 * there.  So when the thread calls accept with the request it publishes,
 * that nested FCGX_Finish_r() ends it, after the flush, and clears the
 * thread before the accept blocks.
 *
 * A copy of libfcgi's code inside another object (CPAN's FCGI.so builds
 * fcgiapp.c in) calls these names through its PLT too, and reaches us:
 * such a caller is passed to its own copy untouched (bind.h,
 * ctxshim_callers_own()).
 *
 * Limitation: a request handed to another thread (accepted on one,
 * answered on another) is published on the accepting thread only, until
 * it calls accept again. */
#include "config.h"

#include "hooks.h"

#include "cfg.h"
#include "conn.h"
#include "events.h"
#include "hook-http.h"
#include "log.h"
#include "request-ctx.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* The head of fcgiapp.h's FCGX_Request (2.4.x), up to the fields we read:
 * declared here so that the shim neither needs the library's headers nor
 * links it.  The application owns the struct; we only read it. */
struct fcgx_request {
	int requestId;
	int role;
	void *in;
	void *out;
	void *err;
	char **envp;
	void *paramsPtr;
	int ipcFd; /* < 0: no connection */
};

typedef int (*fcgx_accept_r_fn)(struct fcgx_request *);
typedef void (*fcgx_finish_r_fn)(struct fcgx_request *);
typedef void (*fcgx_free_fn)(struct fcgx_request *, int);

/* Set once the real functions are found; until then every call retries. */
static int fcgi_bound;
static fcgx_accept_r_fn real_accept_r_fn;
static fcgx_finish_r_fn real_finish_r_fn;
static fcgx_free_fn real_free_fn;

/* The request this thread publishes (NULL: none) and the span-id it
 * published for it, so that its end clears that context and nothing
 * else: the application may have published another one meanwhile (a
 * request of another library, a thread pool's job). */
static __thread const struct fcgx_request *fcgi_req;
static __thread uint8_t fcgi_span[8];
/* Inside FCGX_Finish_r(), whose FCGX_Free() is not the request's end yet:
 * the flush before it is part of the request.  Nonzero: the hook's stack
 * pointer (fcgi_sp()), so that a jump out of a signal handler that ends
 * the hook (a request timeout while the flush blocks) clears it
 * (hook_fcgi_unwound()); it used to stay set until the thread's next
 * accept, and the application's FCGX_Free() of the request it gave up
 * left that request published meanwhile. */
static __thread uintptr_t fcgi_finishing;
/* Inside FCGX_Accept_r() of the published request, until its nested
 * FCGX_Finish_r() ended it; nonzero as fcgi_finishing. */
static __thread uintptr_t fcgi_accepting;

/* The hook's stack pointer; 1 elsewhere than x86-64 (set, never cleared
 * by a jump). */
static inline __attribute__((always_inline)) uintptr_t
fcgi_sp(void)
{
	uintptr_t sp = ctxshim_stack_pointer();

	return sp ? sp : 1;
}

/* hooks.h: a jump to a frame at to ends the hooks below it on the
 * thread's stack; what they set is cleared as their return would have.
 * The request stays published, as any whose finish never came: the
 * application may still be busy with it (the timeout's own handling),
 * and its FCGX_Free() or the thread's next accept ends it. */
void
hook_fcgi_unwound(uintptr_t to)
{
	uintptr_t sp = fcgi_finishing;

	if (sp > 1 && sp < to && ctxshim_stack_between(sp, to))
		fcgi_finishing = 0;
	sp = fcgi_accepting;
	if (sp > 1 && sp < to && ctxshim_stack_between(sp, to))
		fcgi_accepting = 0;
}

HOOK_EXPORT int FCGX_Accept_r(struct fcgx_request *req);
HOOK_EXPORT void FCGX_Finish_r(struct fcgx_request *req);
HOOK_EXPORT void FCGX_Free(struct fcgx_request *req, int close);

/* libfcgi is optional: an application that does not link it never calls
 * these hooks.  A libfcgi loaded RTLD_LOCAL (a plugin's dependency) is
 * invisible to RTLD_NEXT, yet its calls reach our exported names: then we
 * find it by soname.  If it is not loaded at all, nothing is stored and
 * the next call tries again (and passes through meanwhile). */
static const char *const fcgi_sonames[] = {"libfcgi.so.0", NULL};

static const char *const fcgi_names[] = {"FCGX_Accept_r", "FCGX_Finish_r", "FCGX_Free"};
static const void *const fcgi_selves[] = {(const void *)FCGX_Accept_r,
					  (const void *)FCGX_Finish_r,
					  (const void *)FCGX_Free};
static struct ctxshim_callers fcgi_callers = {
	.names = fcgi_names, .n = 3, .selves = fcgi_selves};

static void
hook_fcgi_bind_slow(void)
{
	static int logged;
	int saved_errno = errno;
	void *acc, *fin, *fr;

	acc = ctxshim_bind_loaded(fcgi_sonames, "FCGX_Accept_r", NULL,
				  (const void *)FCGX_Accept_r);
	fin = acc ? ctxshim_bind_loaded(fcgi_sonames, "FCGX_Finish_r", NULL,
					(const void *)FCGX_Finish_r)
		  : NULL;
	fr = fin ? ctxshim_bind_loaded(fcgi_sonames, "FCGX_Free", NULL,
				       (const void *)FCGX_Free)
		 : NULL;
	if (!fr) {
		if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
			ctxshim_log("libfcgi: FCGX_Accept_r not found (yet)");
		errno = saved_errno;
		return;
	}
	/* Threads racing here store the same values. */
	__atomic_store_n(&real_accept_r_fn, (fcgx_accept_r_fn)acc, __ATOMIC_RELAXED);
	__atomic_store_n(&real_finish_r_fn, (fcgx_finish_r_fn)fin, __ATOMIC_RELAXED);
	__atomic_store_n(&real_free_fn, (fcgx_free_fn)fr, __ATOMIC_RELAXED);
	ctxshim_callers_bound(&fcgi_callers, acc);
	__atomic_store_n(&fcgi_bound, 1, __ATOMIC_RELEASE);
	errno = saved_errno;
}

static inline void
hook_fcgi_bind(void)
{
	if (!__atomic_load_n(&fcgi_bound, __ATOMIC_ACQUIRE))
		hook_fcgi_bind_slow();
}

/* Bind now when the library is loaded at start-up, so that a program
 * linked with it makes no dl*() call on its own threads later
 * (preload/bind.c). */
__attribute__((constructor(104))) static void
hook_fcgi_ctor(void)
{
	int saved_errno = errno;

	if (ctxshim_lib_loaded(fcgi_sonames))
		hook_fcgi_bind();
	errno = saved_errno;
}

/* The caller's own copy of libfcgi (fn[] by fcgi_names), or NULL: the
 * call is ours.  ret: the exported hook's return address. */
static inline void *const *
fcgi_own(const void *ret)
{
	void *const *own;

	/* Unbound (perhaps only copies of libfcgi are loaded): a known
	 * caller does not search for the library again. */
	if (!__atomic_load_n(&fcgi_bound, __ATOMIC_ACQUIRE) &&
	    ctxshim_callers_cached(&fcgi_callers, ret, &own))
		return own;
	hook_fcgi_bind();
	return ctxshim_callers_own(
		&fcgi_callers, ret,
		(const void *)__atomic_load_n(&real_accept_r_fn, __ATOMIC_RELAXED));
}

/* libfcgi not loaded (no caller of ours then but a stray one): a failed
 * accept, as libfcgi reports one. */
static inline int
real_FCGX_Accept_r(struct fcgx_request *req)
{
	hook_fcgi_bind();
	if (!real_accept_r_fn) {
		errno = ENOSYS;
		return -1;
	}
	return real_accept_r_fn(req);
}

static inline void
real_FCGX_Finish_r(struct fcgx_request *req)
{
	hook_fcgi_bind();
	if (real_finish_r_fn)
		real_finish_r_fn(req);
}

static inline void
real_FCGX_Free(struct fcgx_request *req, int close)
{
	hook_fcgi_bind();
	if (real_free_fn)
		real_free_fn(req, close);
}

/* ---- the request's context ---------------------------------------------- */

/* The thread no longer works on its request: clear the context it
 * published for it, if that is still what it publishes.  Keeps errno
 * (plain memory, ctxshim_detach_span(), the event log's write). */
static void
fcgi_end(int fd, const char *reason)
{
	fcgi_req = NULL;
	if (ctxshim_detach_span(fcgi_span))
		HOOK_SAVE_ERRNO(CTXSHIM_EVENT(CTXSHIM_EV_DETACH, fd, NULL, reason));
}

/* Before the accept blocks: the thread waits for a request, whatever it
 * published before (its previous request, or a context it inherited or
 * took from TRACEPARENT: a FastCGI server's thread works for its
 * requests).  Restoring an earlier context would show an idle thread as
 * busy. */
static void
fcgi_wait(void)
{
	fcgi_req = NULL;
	if (ctxshim_current()) {
		ctxshim_detach();
		HOOK_SAVE_ERRNO(
			CTXSHIM_EVENT(CTXSHIM_EV_DETACH, -1, NULL, "fcgi-accept"));
	}
}

/* The request req that accept just returned becomes the thread's
 * context.  No allocation: the context is built on the stack from the
 * library's envp, then copied into the thread's record. */
static void
fcgi_publish(const struct fcgx_request *req)
{
	struct ctxshim_ctx c;
	int fd = req->ipcFd;

	ctxshim_request_ctx_cgi(&c, ctxshim_cgi_envp_lookup, req->envp);
	/* The socket level's span if it saw this request, and the fd is ours
	 * from now on: it neither follows nor times its requests. */
	hook_http_adopt_socket_ctx(fd, &c);
	hook_socket_disown(fd);
	ctxshim_attach(&c);
	memcpy(fcgi_span, c.span_id, sizeof(fcgi_span));
	fcgi_req = req;
	CTXSHIM_EVENT(CTXSHIM_EV_ATTACH, fd, &c, "fcgi-request");
}

static int
hook_fcgi_accept_r(struct fcgx_request *req)
{
	int r, saved_errno;

	if (!ctxshim_active() || !req)
		return real_FCGX_Accept_r(req);
	if (req == fcgi_req)
		fcgi_accepting = fcgi_sp(); /* its nested finish clears it */
	else
		fcgi_wait();
	r = real_FCGX_Accept_r(req);
	if (fcgi_accepting) {
		/* No nested finish came (a libfcgi that calls its own
		 * functions directly): late, but the thread waits no more
		 * with its last request. */
		fcgi_accepting = 0;
		if (fcgi_req == req)
			fcgi_end(req->ipcFd, "fcgi-finish");
		fcgi_wait();
	}
	/* fcgiapp.h: 0 for a request, -1 (or a negative errno) else. */
	if (r != 0 || !req->envp)
		return r;
	saved_errno = errno;
	fcgi_publish(req);
	errno = saved_errno;
	return r;
}

/* Finish flushes the response and frees the request (through
 * FCGX_Free(), hooked too): the context covers the flush, so it goes
 * after the real call. */
static void
hook_fcgi_finish_r(struct fcgx_request *req)
{
	int fd = req ? req->ipcFd : -1;

	fcgi_finishing = fcgi_sp();
	real_FCGX_Finish_r(req);
	fcgi_finishing = 0;
	if (ctxshim_active() && req && req == fcgi_req)
		fcgi_end(fd, "fcgi-finish");
	if (fcgi_accepting) {
		/* The finish of accept's own request: the accept blocks next. */
		fcgi_accepting = 0;
		fcgi_wait();
	}
}

/* An application may free a request without finishing it (to drop it,
 * or in a forked child). */
static void
hook_fcgi_free(struct fcgx_request *req, int close)
{
	int fd = req ? req->ipcFd : -1;

	real_FCGX_Free(req, close);
	if (ctxshim_active() && req && req == fcgi_req && !fcgi_finishing)
		fcgi_end(fd, "fcgi-free");
}

HOOK_EXPORT int
FCGX_Accept_r(struct fcgx_request *req)
{
	CTXSHIM_OWN_RETURN(fcgi_own, 0, fcgx_accept_r_fn, req);
	return hook_fcgi_accept_r(req);
}

HOOK_EXPORT void
FCGX_Finish_r(struct fcgx_request *req)
{
	CTXSHIM_OWN_RETURN_VOID(fcgi_own, 1, fcgx_finish_r_fn, req);
	hook_fcgi_finish_r(req);
}

HOOK_EXPORT void
FCGX_Free(struct fcgx_request *req, int close)
{
	CTXSHIM_OWN_RETURN_VOID(fcgi_own, 2, fcgx_free_fn, req, close);
	hook_fcgi_free(req, close);
}
