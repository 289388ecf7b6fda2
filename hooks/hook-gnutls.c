/* SPDX-License-Identifier: Apache-2.0 */
/* GnuTLS (libgnutls.so.30): the plaintext of TLS server connections goes
 * to the socket level's request-head scanner (hook-tls.h), as for OpenSSL
 * in hook-openssl.c, which explains the model.
 *
 * Hooks: gnutls_record_recv, gnutls_record_recv_seq,
 * gnutls_record_recv_packet (bytes in; a packet's are read with
 * gnutls_packet_get, which leaves it as it is) and
 * gnutls_record_recv_early_data (a TLS 1.3 server's 0-RTT data: a
 * resumed client's first request may come that way, before any
 * gnutls_record_recv), gnutls_handshake (the thread works on the
 * connection: it only follows, see hook-openssl.c),
 * gnutls_record_send, gnutls_record_send2 and gnutls_record_send_range
 * (the request is answered), gnutls_deinit (the session ends).  All go
 * through the same logic as gnutls_record_recv and gnutls_record_send.
 * libgnutls calls gnutls_record_send itself through its PLT
 * (gnutls_record_uncork sends the corked data with it): a call from
 * libgnutls's own text passes straight through, since the application's
 * corked send was already seen.  And gnutls_record_send is
 * gnutls_record_send2(s, data, n, 0, 0), also through the PLT (GnuTLS
 * 3.7.9: a tail jump, so the return address is no help): a send2 inside
 * a send we passed on is that send's (gt_sending).  gnutls_handshake is
 * called through the PLT as well: the record layer of gnutls_record_recv
 * finishes a handshake in progress with it (GnuTLS 3.7.9: three calls in
 * lib/record.c, check_session_status(), as after a server's early
 * start).  That call reaches the handshake hook inside a followed read of
 * the same session; the hook only follows, and the thread already works
 * on that connection, so nothing changes.  The other calls are not made
 * from inside libgnutls through its PLT (GnuTLS 3.7.9: no relocation
 * names them), so no bytes are seen twice.
 * gnutls_record_send_file (GnuTLS 3.7.4) is not hooked: without kTLS it
 * sends the file through gnutls_record_send, whose calls from it are
 * followed (gt_file_lo); with kTLS the record layer is the kernel's,
 * which the shim does not see (ctxshim(7), LIMITS).
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
typedef ssize_t (*gt_recv_seq_fn)(gnutls_session_t, void *, size_t, unsigned char *);
typedef ssize_t (*gt_recv_packet_fn)(gnutls_session_t, gnutls_packet_t *);
typedef ssize_t (*gt_send_range_fn)(gnutls_session_t,
				    const void *,
				    size_t,
				    const gnutls_range_st *);
typedef ssize_t (*gt_send2_fn)(
	gnutls_session_t, const void *, size_t, size_t, unsigned);
typedef void (*gt_packet_get_fn)(gnutls_packet_t, gnutls_datum_t *, unsigned char *);
typedef void (*gt_deinit_fn)(gnutls_session_t);
typedef int (*gt_handshake_fn)(gnutls_session_t);
typedef gnutls_transport_ptr_t (*gt_get_ptr_fn)(gnutls_session_t);

enum gt_fn {
	GT_RECV,
	GT_SEND,
	GT_DEINIT,
	GT_HANDSHAKE,
	GT_RECV_SEQ,
	GT_RECV_PACKET,
	GT_SEND_RANGE,
	GT_SEND2,
	GT_RECV_EARLY,
	GT_HOOKED, /* the ones above are ours; the ones below only called */
	GT_GET_PTR = GT_HOOKED,
	GT_PACKET_GET,
	GT_N,
};

static const char *const gt_name[GT_N] = {
	"gnutls_record_recv",
	"gnutls_record_send",
	"gnutls_deinit",
	"gnutls_handshake",
	"gnutls_record_recv_seq",
	"gnutls_record_recv_packet",
	"gnutls_record_send_range",
	"gnutls_record_send2",
	"gnutls_record_recv_early_data",
	"gnutls_transport_get_ptr",
	"gnutls_packet_get",
};

/* Each name's version node: GT_NODE but for the later gnutls_record_send2
 * and gnutls_record_recv_early_data (a library without them still serves
 * the other hooks). */
#define GT_NODE_SEND2      "GNUTLS_3_6_3"
#define GT_NODE_RECV_EARLY "GNUTLS_3_6_5"
static const char *const gt_node[GT_N] = {
	[GT_SEND2] = GT_NODE_SEND2, [GT_RECV_EARLY] = GT_NODE_RECV_EARLY};

static void *gt_fn[GT_N];
static const void *gt_self[GT_HOOKED];
static struct ctxshim_callers gt_callers = {.names = gt_name,
					    .n = GT_HOOKED,
					    .version = GT_NODE,
					    .versions = gt_node,
					    .selves = gt_self};
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
		const char *node = gt_node[i] ? gt_node[i] : GT_NODE;
		void *p = ctxshim_bind_loaded(sonames, gt_name[i], node, self);

		gt_fn[i] = p;
		if (!p)
			ctxshim_log("gnutls: %s@%s not found", gt_name[i], node);
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

/* The session whose gnutls_record_send() this thread passed on, and the
 * gnutls_record_send2 of the same copy of libgnutls: that send calls it
 * through libgnutls's PLT, which reaches our gnutls_record_send2 with a
 * return address of libgnutls's or ours, not the caller's.  That call is
 * the send itself, already followed or passed through: it goes on to
 * send2, untouched, and takes the marker (a jump out of the send leaves
 * none).  Saved and restored around each send, so a signal handler's
 * send in between leaves it as it was. */
struct gt_sending {
	gnutls_session_t s; /* only compared, never dereferenced */
	void *send2;
};

static __thread struct gt_sending gt_sending __attribute__((tls_model("initial-exec")));

/* send(s, buf, n) of a copy of libgnutls whose send2 is send2. */
static ssize_t
gt_send_through(void *send, void *send2, gnutls_session_t s, const void *buf, size_t n)
{
	struct gt_sending saved = gt_sending;
	ssize_t r;

	gt_sending.s = NULL; /* a signal handler's send2 meanwhile is its own */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	gt_sending.send2 = send2;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	gt_sending.s = s;
	r = ((gt_send_fn)send)(s, buf, n);
	gt_sending.s = NULL;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	gt_sending.send2 = saved.send2;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	gt_sending.s = saved.s;
	return r;
}

static inline ssize_t
real_gnutls_record_send(gnutls_session_t s, const void *buf, size_t n)
{
	hook_gnutls_bind();
	if (!gt_fn[GT_SEND])
		return GNUTLS_E_INTERNAL_ERROR;
	return gt_send_through(gt_fn[GT_SEND], gt_fn[GT_SEND2], s, buf, n);
}

static inline ssize_t
real_gnutls_record_recv_early_data(gnutls_session_t s, void *buf, size_t n)
{
	hook_gnutls_bind();
	if (!gt_fn[GT_RECV_EARLY])
		return GNUTLS_E_INTERNAL_ERROR;
	return ((gt_recv_fn)gt_fn[GT_RECV_EARLY])(s, buf, n);
}

static inline ssize_t
real_gnutls_record_recv_seq(gnutls_session_t s, void *buf, size_t n, unsigned char *seq)
{
	hook_gnutls_bind();
	if (!gt_fn[GT_RECV_SEQ])
		return GNUTLS_E_INTERNAL_ERROR;
	return ((gt_recv_seq_fn)gt_fn[GT_RECV_SEQ])(s, buf, n, seq);
}

static inline ssize_t
real_gnutls_record_recv_packet(gnutls_session_t s, gnutls_packet_t *packet)
{
	hook_gnutls_bind();
	if (!gt_fn[GT_RECV_PACKET])
		return GNUTLS_E_INTERNAL_ERROR;
	return ((gt_recv_packet_fn)gt_fn[GT_RECV_PACKET])(s, packet);
}

static inline ssize_t
real_gnutls_record_send_range(gnutls_session_t s,
			      const void *buf,
			      size_t n,
			      const gnutls_range_st *range)
{
	hook_gnutls_bind();
	if (!gt_fn[GT_SEND_RANGE])
		return GNUTLS_E_INTERNAL_ERROR;
	return ((gt_send_range_fn)gt_fn[GT_SEND_RANGE])(s, buf, n, range);
}

static inline ssize_t
real_gnutls_record_send2(
	gnutls_session_t s, const void *buf, size_t n, size_t pad, unsigned flags)
{
	hook_gnutls_bind();
	if (!gt_fn[GT_SEND2])
		return GNUTLS_E_INTERNAL_ERROR;
	return ((gt_send2_fn)gt_fn[GT_SEND2])(s, buf, n, pad, flags);
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

/* After a followed read that returned the n > 0 bytes at buf.  The thread
 * takes the connection up again first: with a record timeout
 * (gnutls_record_set_timeout()) libgnutls waits for the record in poll()
 * inside the read (gnutls_system_recv_timeout()), and the socket level
 * takes that wait for the thread letting the connection go, as it does an
 * application's own (hook-socket.c, the waits).  A request whose body was
 * read so showed no context until its response was written.  A plain
 * read after its poll() is followed the same way. */
static void
gt_read_end(const struct hook_tls_conn *t, const void *buf, size_t n)
{
	hook_socket_tls_read_begin(t);
	hook_socket_tls_read_end(t, buf, n);
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
		gt_read_end(&t, buf, (size_t)r);
	return r;
}

/* A server's 0-RTT data (TLS 1.3 early data): the first bytes of the
 * connection's plaintext, as gnutls_record_recv's. */
static ssize_t
hook_gnutls_record_recv_early_data(gnutls_session_t s, void *buf, size_t n)
{
	struct hook_tls_conn t;
	ssize_t r;

	if (!ctxshim_active() || !gt_conn(s, &t))
		return real_gnutls_record_recv_early_data(s, buf, n);
	hook_socket_tls_read_begin(&t);
	r = real_gnutls_record_recv_early_data(s, buf, n);
	if (r > 0 && (size_t)r <= n)
		gt_read_end(&t, buf, (size_t)r);
	return r;
}

/* gnutls_record_recv with the record's sequence number: the same. */
static ssize_t
hook_gnutls_record_recv_seq(gnutls_session_t s, void *buf, size_t n, unsigned char *seq)
{
	struct hook_tls_conn t;
	ssize_t r;

	if (!ctxshim_active() || !gt_conn(s, &t))
		return real_gnutls_record_recv_seq(s, buf, n, seq);
	hook_socket_tls_read_begin(&t);
	r = real_gnutls_record_recv_seq(s, buf, n, seq);
	if (r > 0 && (size_t)r <= n)
		gt_read_end(&t, buf, (size_t)r);
	return r;
}

/* The r bytes of a packet gnutls_record_recv_packet() returned, seen
 * through gnutls_packet_get(): a pointer into the packet and its size,
 * nothing allocated or changed.  The packet stays the application's
 * (gnutls_packet_deinit is its call). */
static void
gt_packet_read(const struct hook_tls_conn *t, gnutls_packet_t p, size_t r)
{
	gnutls_datum_t d = {NULL, 0};
	int saved_errno = errno;

	if (!gt_fn[GT_PACKET_GET])
		return;
	((gt_packet_get_fn)gt_fn[GT_PACKET_GET])(p, &d, NULL);
	errno = saved_errno;
	if (d.data && r <= d.size)
		gt_read_end(t, d.data, r);
}

static ssize_t
hook_gnutls_record_recv_packet(gnutls_session_t s, gnutls_packet_t *packet)
{
	struct hook_tls_conn t;
	ssize_t r;

	if (!ctxshim_active() || !gt_conn(s, &t))
		return real_gnutls_record_recv_packet(s, packet);
	hook_socket_tls_read_begin(&t);
	r = real_gnutls_record_recv_packet(s, packet);
	/* > 0: the size of the data of *packet (NULL at the end of the
	 * stream, 0) */
	if (r > 0 && packet && *packet)
		gt_packet_read(&t, *packet, (size_t)r);
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

/* Before a send of s by a caller whose return address is ra: false if it
 * is not followed, else t is its connection, told of the write. */
static bool
gt_send_begin(gnutls_session_t s, const void *ra, struct hook_tls_conn *t)
{
	/* Bound first: the text range of libgnutls is known from then on. */
	hook_gnutls_bind();
	if (!ctxshim_active() ||
	    ((uintptr_t)ra >= gt_text_lo && (uintptr_t)ra < gt_text_hi &&
	     !((uintptr_t)ra >= gt_file_lo && (uintptr_t)ra < gt_file_hi)) ||
	    !gt_conn(s, t))
		return false;
	hook_socket_tls_write_begin(t);
	return true;
}

/* After a followed send of (buf, n) that returned r.  The same for
 * gnutls_record_send2 and gnutls_record_send_range, which are
 * gnutls_record_send with padding and return what it does. */
static void
gt_send_end(gnutls_session_t s,
	    const struct hook_tls_conn *t,
	    const void *buf,
	    size_t n,
	    ssize_t r)
{
	/* (NULL, 0) resumes a send that returned GNUTLS_E_AGAIN or
	 * GNUTLS_E_INTERRUPTED: r is the size of that earlier data, whose
	 * first bytes gt_hold() kept (gt_held). */
	if (r > 0 && (size_t)r <= n)
		hook_socket_tls_write_end(t, buf, (size_t)r);
	else if (r > 0 && !buf && !n)
		gt_resumed(s, t, (size_t)r);
	else if ((r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED) && buf && n)
		gt_hold(s, buf, n);
}

static ssize_t
hook_gnutls_record_send(gnutls_session_t s, const void *buf, size_t n, const void *ra)
{
	struct hook_tls_conn t;
	ssize_t r;

	if (!gt_send_begin(s, ra, &t))
		return real_gnutls_record_send(s, buf, n);
	r = real_gnutls_record_send(s, buf, n);
	gt_send_end(s, &t, buf, n, r);
	return r;
}

static ssize_t
hook_gnutls_record_send2(gnutls_session_t s,
			 const void *buf,
			 size_t n,
			 size_t pad,
			 unsigned flags,
			 const void *ra)
{
	struct hook_tls_conn t;
	ssize_t r;

	if (!gt_send_begin(s, ra, &t))
		return real_gnutls_record_send2(s, buf, n, pad, flags);
	r = real_gnutls_record_send2(s, buf, n, pad, flags);
	gt_send_end(s, &t, buf, n, r);
	return r;
}

static ssize_t
hook_gnutls_record_send_range(gnutls_session_t s,
			      const void *buf,
			      size_t n,
			      const gnutls_range_st *range,
			      const void *ra)
{
	struct hook_tls_conn t;
	ssize_t r;

	if (!gt_send_begin(s, ra, &t))
		return real_gnutls_record_send_range(s, buf, n, range);
	r = real_gnutls_record_send_range(s, buf, n, range);
	gt_send_end(s, &t, buf, n, r);
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
#define GT_SYMVER_SEND2                                       \
	__asm__(".symver ctxshim_gnutls_record_send2_gt363, " \
		"gnutls_record_send2@" GT_NODE_SEND2 ", remove")
#define GT_SYMVER_RECV_EARLY                                            \
	__asm__(".symver ctxshim_gnutls_record_recv_early_data_gt365, " \
		"gnutls_record_recv_early_data@" GT_NODE_RECV_EARLY ", remove")

HOOK_EXPORT ssize_t ctxshim_gnutls_record_recv_gt34(gnutls_session_t s,
						    void *buf,
						    size_t n);
HOOK_EXPORT ssize_t ctxshim_gnutls_record_send_gt34(gnutls_session_t s,
						    const void *buf,
						    size_t n);
HOOK_EXPORT void ctxshim_gnutls_deinit_gt34(gnutls_session_t s);
HOOK_EXPORT int ctxshim_gnutls_handshake_gt34(gnutls_session_t s);
HOOK_EXPORT ssize_t ctxshim_gnutls_record_recv_seq_gt34(gnutls_session_t s,
							void *buf,
							size_t n,
							unsigned char *seq);
HOOK_EXPORT ssize_t ctxshim_gnutls_record_recv_packet_gt34(gnutls_session_t s,
							   gnutls_packet_t *packet);
HOOK_EXPORT ssize_t ctxshim_gnutls_record_send_range_gt34(gnutls_session_t s,
							  const void *buf,
							  size_t n,
							  const gnutls_range_st *range);
HOOK_EXPORT ssize_t ctxshim_gnutls_record_send2_gt363(
	gnutls_session_t s, const void *buf, size_t n, size_t pad, unsigned flags);
HOOK_EXPORT ssize_t ctxshim_gnutls_record_recv_early_data_gt365(gnutls_session_t s,
								void *buf,
								size_t n);

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
	void *const *own = gt_own(__builtin_return_address(0));

	/* CTXSHIM_OWN_RETURN, with the copy's send2 for its send's call
	 * (gt_sending) */
	if (own && own[GT_SEND])
		return gt_send_through(own[GT_SEND], own[GT_SEND2], s, buf, n);
	return hook_gnutls_record_send(s, buf, n, __builtin_return_address(0));
}

HOOK_EXPORT ssize_t
ctxshim_gnutls_record_send2_gt363(
	gnutls_session_t s, const void *buf, size_t n, size_t pad, unsigned flags)
{
	/* Before the caller is looked up: inside a send we passed on, the
	 * return address is libgnutls's or ours (gt_sending). */
	if (s && gt_sending.s == s) {
		void *send2 = gt_sending.send2;

		/* Taken: the send makes this one call.  Left set, a longjmp
		 * out of the send (out of its push function) left it behind,
		 * and the application's next send2 of s went unseen. */
		gt_sending.s = NULL;
		return send2 ? ((gt_send2_fn)send2)(s, buf, n, pad, flags)
			     : GNUTLS_E_INTERNAL_ERROR;
	}
	CTXSHIM_OWN_RETURN(gt_own, GT_SEND2, gt_send2_fn, s, buf, n, pad, flags);
	return hook_gnutls_record_send2(s, buf, n, pad, flags,
					__builtin_return_address(0));
}

HOOK_EXPORT ssize_t
ctxshim_gnutls_record_send_range_gt34(gnutls_session_t s,
				      const void *buf,
				      size_t n,
				      const gnutls_range_st *range)
{
	CTXSHIM_OWN_RETURN(gt_own, GT_SEND_RANGE, gt_send_range_fn, s, buf, n, range);
	return hook_gnutls_record_send_range(s, buf, n, range,
					     __builtin_return_address(0));
}

HOOK_EXPORT ssize_t
ctxshim_gnutls_record_recv_seq_gt34(gnutls_session_t s,
				    void *buf,
				    size_t n,
				    unsigned char *seq)
{
	CTXSHIM_OWN_RETURN(gt_own, GT_RECV_SEQ, gt_recv_seq_fn, s, buf, n, seq);
	return hook_gnutls_record_recv_seq(s, buf, n, seq);
}

HOOK_EXPORT ssize_t
ctxshim_gnutls_record_recv_packet_gt34(gnutls_session_t s, gnutls_packet_t *packet)
{
	CTXSHIM_OWN_RETURN(gt_own, GT_RECV_PACKET, gt_recv_packet_fn, s, packet);
	return hook_gnutls_record_recv_packet(s, packet);
}

HOOK_EXPORT ssize_t
ctxshim_gnutls_record_recv_early_data_gt365(gnutls_session_t s, void *buf, size_t n)
{
	CTXSHIM_OWN_RETURN(gt_own, GT_RECV_EARLY, gt_recv_fn, s, buf, n);
	return hook_gnutls_record_recv_early_data(s, buf, n);
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
GT_SYMVER(gnutls_record_recv_seq);
GT_SYMVER(gnutls_record_recv_packet);
GT_SYMVER(gnutls_record_send_range);
GT_SYMVER_SEND2;
GT_SYMVER_RECV_EARLY;

/* Our own copies, so that a binding can never come back to them. */
static const void *gt_self[GT_HOOKED] = {
	[GT_RECV] = (const void *)ctxshim_gnutls_record_recv_gt34,
	[GT_SEND] = (const void *)ctxshim_gnutls_record_send_gt34,
	[GT_DEINIT] = (const void *)ctxshim_gnutls_deinit_gt34,
	[GT_HANDSHAKE] = (const void *)ctxshim_gnutls_handshake_gt34,
	[GT_RECV_SEQ] = (const void *)ctxshim_gnutls_record_recv_seq_gt34,
	[GT_RECV_PACKET] = (const void *)ctxshim_gnutls_record_recv_packet_gt34,
	[GT_SEND_RANGE] = (const void *)ctxshim_gnutls_record_send_range_gt34,
	[GT_SEND2] = (const void *)ctxshim_gnutls_record_send2_gt363,
	[GT_RECV_EARLY] = (const void *)ctxshim_gnutls_record_recv_early_data_gt365,
};
