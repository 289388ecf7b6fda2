/* SPDX-License-Identifier: Apache-2.0 */
/* GnuTLS (libgnutls.so.30): the plaintext of TLS server connections goes
 * to the socket level's request-head scanner (hook-tls.h), as for OpenSSL
 * in hook-openssl.c, which explains the model.
 *
 * Hooks: gnutls_record_recv (bytes in), gnutls_handshake (the thread works
 * on the connection: it only follows, see hook-openssl.c),
 * gnutls_record_send (the request is answered), gnutls_deinit (the
 * session ends).  libgnutls calls
 * gnutls_record_send itself through its PLT (gnutls_record_uncork sends
 * the corked data with it): a call from libgnutls's own text passes
 * straight through, since the application's corked send was already seen.
 *
 * Connection of a session: its transport.  gnutls_transport_set_int()
 * stores the fd as the transport pointer; a custom transport stores a
 * pointer of the application's.  A value below the connection table's
 * size is taken as an fd (no object lives in the first megabyte of the
 * address space), and only accept()ed fds are tracked.  Sessions over a
 * custom transport are not followed: unlike OpenSSL, GnuTLS has no call
 * that tells a server session from a client one.
 *
 * Versions and binding as in hook-openssl.c: the names are exported at
 * GnuTLS's version node GNUTLS_3_4 and forwarded with dlvsym() there;
 * bound by the constructor if libgnutls is loaded, else at the first
 * call, with an RTLD_NOLOAD fallback for a library loaded RTLD_LOCAL, and
 * a caller with its own copy of libgnutls passed to that copy. */
#include "config.h"

#include "hooks.h"

#include "conn.h"
#include "hook-tls.h"
#include "log.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>

#include <gnutls/gnutls.h>

#define GT_NODE   "GNUTLS_3_4"
#define GT_SONAME "libgnutls.so.30"

typedef ssize_t (*gt_recv_fn)(gnutls_session_t, void *, size_t);
typedef ssize_t (*gt_send_fn)(gnutls_session_t, const void *, size_t);
typedef void (*gt_deinit_fn)(gnutls_session_t);
typedef int (*gt_handshake_fn)(gnutls_session_t);
typedef gnutls_transport_ptr_t (*gt_get_ptr_fn)(gnutls_session_t);

enum gt_fn {
	GT_RECV,
	GT_SEND,
	GT_DEINIT,
	GT_HANDSHAKE,
	GT_HOOKED, /* the ones above are ours; the ones below only called */
	GT_GET_PTR = GT_HOOKED,
	GT_N,
};

static const char *const gt_name[GT_N] = {
	"gnutls_record_recv", "gnutls_record_send",       "gnutls_deinit",
	"gnutls_handshake",   "gnutls_transport_get_ptr",
};

static void *gt_fn[GT_N];
static const void *gt_self[GT_HOOKED];
static struct ctxshim_callers gt_callers = {
	.names = gt_name, .n = GT_HOOKED, .version = GT_NODE, .selves = gt_self};
static pthread_once_t gt_once = PTHREAD_ONCE_INIT;
/* libgnutls's executable segment: calls from there are its own. */
static uintptr_t gt_text_lo, gt_text_hi;
/* ... except those of gnutls_record_send_file() (GnuTLS 3.7.4), whose
 * fallback without kTLS sends the application's file through
 * gnutls_record_send(): the application's response, seen nowhere else. */
static uintptr_t gt_file_lo, gt_file_hi;

static void
hook_gnutls_bind_once(void)
{
	static const char *const sonames[] = {GT_SONAME, NULL};
	int saved_errno = errno;
	int i;

	for (i = 0; i < GT_N; i++) {
		const void *self = i < GT_HOOKED ? gt_self[i] : NULL;
		void *p = ctxshim_bind_loaded(sonames, gt_name[i], GT_NODE, self);

		gt_fn[i] = p;
		if (!p)
			ctxshim_log("gnutls: %s@%s not found", gt_name[i], GT_NODE);
	}
	(void)ctxshim_text_range(gt_fn[GT_RECV], &gt_text_lo, &gt_text_hi);
	{
		void *f = ctxshim_bind_loaded(sonames, "gnutls_record_send_file",
					      "GNUTLS_3_7_4", NULL);
		const ElfW(Sym) *sym = NULL;
		Dl_info info;

		if (f && dladdr1(f, &info, (void **)&sym, RTLD_DL_SYMENT) && sym) {
			gt_file_lo = (uintptr_t)f;
			gt_file_hi = (uintptr_t)f + sym->st_size;
		}
	}
	ctxshim_callers_bound(&gt_callers, gt_fn[GT_RECV]);
	errno = saved_errno;
}

static inline void
hook_gnutls_bind(void)
{
	pthread_once(&gt_once, hook_gnutls_bind_once);
}

__attribute__((constructor(104))) static void
hook_gnutls_ctor(void)
{
	static const char *const sonames[] = {GT_SONAME, NULL};
	int saved_errno = errno;

	if (ctxshim_lib_loaded(sonames))
		hook_gnutls_bind();
	errno = saved_errno;
}

static inline ssize_t
real_gnutls_record_recv(gnutls_session_t s, void *buf, size_t n)
{
	hook_gnutls_bind();
	if (!gt_fn[GT_RECV])
		return GNUTLS_E_INTERNAL_ERROR;
	return ((gt_recv_fn)gt_fn[GT_RECV])(s, buf, n);
}

static inline ssize_t
real_gnutls_record_send(gnutls_session_t s, const void *buf, size_t n)
{
	hook_gnutls_bind();
	if (!gt_fn[GT_SEND])
		return GNUTLS_E_INTERNAL_ERROR;
	return ((gt_send_fn)gt_fn[GT_SEND])(s, buf, n);
}

static inline void
real_gnutls_deinit(gnutls_session_t s)
{
	hook_gnutls_bind();
	if (gt_fn[GT_DEINIT])
		((gt_deinit_fn)gt_fn[GT_DEINIT])(s);
}

static inline int
real_gnutls_handshake(gnutls_session_t s)
{
	hook_gnutls_bind();
	if (!gt_fn[GT_HANDSHAKE])
		return GNUTLS_E_INTERNAL_ERROR;
	return ((gt_handshake_fn)gt_fn[GT_HANDSHAKE])(s);
}

/* ---- hooks ---------------------------------------------------------------- */

/* The fd behind s's transport, or -1. */
static int
gt_fd(gnutls_session_t s)
{
	unsigned max = __atomic_load_n(&ctxshim_conn_tab.max_fds, __ATOMIC_ACQUIRE);
	uintptr_t p;

	if (!s || !max || !gt_fn[GT_GET_PTR])
		return -1;
	p = (uintptr_t)((gt_get_ptr_fn)gt_fn[GT_GET_PTR])(s);
	return p < max ? (int)p : -1;
}

static bool
gt_conn(gnutls_session_t s, struct hook_tls_conn *t)
{
	int saved_errno = errno, fd;
	bool ok;

	hook_gnutls_bind();
	fd = gt_fd(s);
	ok = fd >= 0 && hook_socket_tls_find(fd, s, false, false, t);
	errno = saved_errno;
	return ok;
}

static ssize_t
hook_gnutls_record_recv(gnutls_session_t s, void *buf, size_t n)
{
	struct hook_tls_conn t;
	ssize_t r;

	if (!ctxshim_active() || !gt_conn(s, &t))
		return real_gnutls_record_recv(s, buf, n);
	hook_socket_tls_read_begin(&t);
	r = real_gnutls_record_recv(s, buf, n);
	if (r > 0 && (size_t)r <= n)
		hook_socket_tls_read_end(&t, buf, (size_t)r);
	return r;
}

/* A send resumed without its data.  gnutls_record_send(3): a send that
 * returned GNUTLS_E_AGAIN or GNUTLS_E_INTERRUPTED is resumed by calling
 * it again with the same data or with (NULL, 0); libgnutls keeps the
 * record it made.  The resumed call's result is the size of that data,
 * whose bytes the hook no longer has: taken for a response of unknown
 * bytes, an interim "HTTP/1.1 100 Continue" answered its request, and
 * the body's read dropped the request's context.  So the first bytes of
 * the thread's last followed send that was interrupted so are kept here,
 * with its session, and a (NULL, 0) call of that session is judged by
 * them (an interim response, perhaps followed by the final one); one of
 * another session (an event loop that interrupted two sends before it
 * resumed the first) by none, as before.  Only the interrupted sends and
 * their resumption do anything here; a send that goes through does not. */
#define GT_HELD_MAX 64

struct gt_held {
	gnutls_session_t s; /* only compared, never dereferenced */
	size_t n;           /* the interrupted call's: a resumption returns no more */
	size_t len;
	unsigned char head[GT_HELD_MAX];
};

static __thread struct gt_held gt_held __attribute__((tls_model("initial-exec")));

static __attribute__((noinline, cold)) void
gt_hold(gnutls_session_t s, const void *buf, size_t n)
{
	gt_held.s = NULL; /* a signal handler's send meanwhile finds none */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	gt_held.n = n;
	gt_held.len = n < GT_HELD_MAX ? n : GT_HELD_MAX;
	__builtin_memcpy(gt_held.head, buf, gt_held.len);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	gt_held.s = s;
}

static __attribute__((noinline, cold)) void
gt_resumed(gnutls_session_t s, const struct hook_tls_conn *t, size_t r)
{
	/* A slot left by a send resumed with its data, or by a session
	 * since freed whose address a new one has, can name s too: a
	 * resumption returns at most what the interrupted call was given.
	 * The head is copied before the slot is let go: a signal handler's
	 * interrupted send may fill it again while it is being judged. */
	if (gt_held.s == s && r <= gt_held.n) {
		unsigned char head[GT_HELD_MAX];
		size_t len = gt_held.len;

		__builtin_memcpy(head, gt_held.head, len);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		gt_held.s = NULL;
		hook_socket_tls_write_end_head(t, head, len, r);
	} else {
		hook_socket_tls_write_end(t, NULL, r);
	}
}

static ssize_t
hook_gnutls_record_send(gnutls_session_t s, const void *buf, size_t n, const void *ra)
{
	struct hook_tls_conn t;
	ssize_t r;

	/* Bound first: the text range of libgnutls is known from then on. */
	hook_gnutls_bind();
	if (!ctxshim_active() ||
	    ((uintptr_t)ra >= gt_text_lo && (uintptr_t)ra < gt_text_hi &&
	     !((uintptr_t)ra >= gt_file_lo && (uintptr_t)ra < gt_file_hi)) ||
	    !gt_conn(s, &t))
		return real_gnutls_record_send(s, buf, n);
	hook_socket_tls_write_begin(&t);
	r = real_gnutls_record_send(s, buf, n);
	/* (NULL, 0) resumes a send that returned GNUTLS_E_AGAIN or
	 * GNUTLS_E_INTERRUPTED: r is the size of that earlier data, whose
	 * first bytes gt_hold() kept (gt_held). */
	if (r > 0 && (size_t)r <= n)
		hook_socket_tls_write_end(&t, buf, (size_t)r);
	else if (r > 0 && !buf && !n)
		gt_resumed(s, &t, (size_t)r);
	else if ((r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED) && buf && n)
		gt_hold(s, buf, n);
	return r;
}

static int
hook_gnutls_handshake(gnutls_session_t s)
{
	struct hook_tls_conn t;

	if (ctxshim_active() && gt_conn(s, &t))
		hook_socket_tls_read_begin(&t);
	return real_gnutls_handshake(s);
}

static void
hook_gnutls_deinit(gnutls_session_t s)
{
	if (s && ctxshim_active()) {
		int saved_errno = errno, fd;

		hook_gnutls_bind();
		fd = gt_fd(s);
		/* A connection accepted on s's fd number after s's fd was
		 * closed is another session's: left alone (preload/conn.c,
		 * "Sessions"). */
		if (fd >= 0)
			hook_socket_tls_end(fd, s, "gnutls-deinit");
		errno = saved_errno;
	}
	/* the next session malloc gives s's address holds nothing of it */
	if (s && gt_held.s == s)
		gt_held.s = NULL;
	real_gnutls_deinit(s);
}

/* ---- exported names (version GNUTLS_3_4) ------------------------------------ */

#define GT_SYMVER(fn) \
	__asm__(".symver ctxshim_" #fn "_gt34, " #fn "@" GT_NODE ", remove")

HOOK_EXPORT ssize_t ctxshim_gnutls_record_recv_gt34(gnutls_session_t s,
						    void *buf,
						    size_t n);
HOOK_EXPORT ssize_t ctxshim_gnutls_record_send_gt34(gnutls_session_t s,
						    const void *buf,
						    size_t n);
HOOK_EXPORT void ctxshim_gnutls_deinit_gt34(gnutls_session_t s);
HOOK_EXPORT int ctxshim_gnutls_handshake_gt34(gnutls_session_t s);

/* The caller's own libgnutls (its definitions by gt_name), or NULL: the
 * call is ours.  ret: the exported hook's return address. */
static inline void *const *
gt_own(const void *ret)
{
	hook_gnutls_bind();
	return ctxshim_callers_own(&gt_callers, ret, gt_fn[GT_RECV]);
}

HOOK_EXPORT ssize_t
ctxshim_gnutls_record_recv_gt34(gnutls_session_t s, void *buf, size_t n)
{
	CTXSHIM_OWN_RETURN(gt_own, GT_RECV, gt_recv_fn, s, buf, n);
	return hook_gnutls_record_recv(s, buf, n);
}

HOOK_EXPORT ssize_t
ctxshim_gnutls_record_send_gt34(gnutls_session_t s, const void *buf, size_t n)
{
	CTXSHIM_OWN_RETURN(gt_own, GT_SEND, gt_send_fn, s, buf, n);
	return hook_gnutls_record_send(s, buf, n, __builtin_return_address(0));
}

HOOK_EXPORT void
ctxshim_gnutls_deinit_gt34(gnutls_session_t s)
{
	CTXSHIM_OWN_RETURN_VOID(gt_own, GT_DEINIT, gt_deinit_fn, s);
	hook_gnutls_deinit(s);
}

HOOK_EXPORT int
ctxshim_gnutls_handshake_gt34(gnutls_session_t s)
{
	CTXSHIM_OWN_RETURN(gt_own, GT_HANDSHAKE, gt_handshake_fn, s);
	return hook_gnutls_handshake(s);
}

GT_SYMVER(gnutls_record_recv);
GT_SYMVER(gnutls_record_send);
GT_SYMVER(gnutls_deinit);
GT_SYMVER(gnutls_handshake);

/* Our own copies, so that a binding can never come back to them. */
static const void *gt_self[GT_HOOKED] = {
	[GT_RECV] = (const void *)ctxshim_gnutls_record_recv_gt34,
	[GT_SEND] = (const void *)ctxshim_gnutls_record_send_gt34,
	[GT_DEINIT] = (const void *)ctxshim_gnutls_deinit_gt34,
	[GT_HANDSHAKE] = (const void *)ctxshim_gnutls_handshake_gt34,
};
