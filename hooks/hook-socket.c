/* SPDX-License-Identifier: Apache-2.0 */
/* Socket level: the context of the HTTP/1.x request a thread works on, for
 * any server, learnt from the bytes it reads.
 *
 * accept()/accept4() mark server-side connections (preload/conn.c keeps one
 * slot per fd), and so does start-up for connections the process inherits
 * (inetd, tcpserver, socket activation: conn.c, "inherited connections").
 * Every call through which request bytes arrive feeds
 * exactly the bytes it returned to that connection's head scanner; every
 * call that writes marks the request answered; close/fclose/dup2/dup3/
 * close_range/closefrom forget the fd (not a close_range() that unshares
 * the table of one thread among several: sk_threads_share_table()), and
 * dup/dup2/dup3/fcntl(F_DUPFD,
 * F_DUPFD_CLOEXEC) make the copy another descriptor of the same connection
 * (conn.c, "Copies": I/O through any of them is the connection's; see
 * sk_follow_link()).  The thread's published record follows the work:
 *
 *  - it becomes the connection's request context when a request head
 *    completes (event "attach", reason "request");
 *  - reading from or writing to another tracked connection switches to
 *    that connection's context ("switch", reason "read"/"write"), or clears
 *    ours if that connection has no live request ("detach", "other-conn");
 *  - a read of a connection whose request was answered clears it: the
 *    thread is waiting for the next request ("detach", "response-sent");
 *    thread-per-connection servers thus keep the context from the head
 *    until the response is written and they read again;
 *  - entering epoll_wait/epoll_pwait/epoll_pwait2/poll/ppoll clears it, and
 *    so does a select/pselect that returns a client connection: an event
 *    loop is idle there ("detach", reason = the call; see "poll() and
 *    select()" below for which sets count) -- except a zero timeout right
 *    after the loop read a single request (see "Handlers run after the
 *    next wait");
 *  - closing the connection clears it ("detach", "close"), not closing
 *    one of its descriptors while a copy carries it on and its request
 *    is not answered (sk_gone());
 *  - reading from an upstream -- a socket the process connect()ed while
 *    the thread published a connection's request -- switches to that
 *    request's context while it is not answered ("switch"/"attach",
 *    reason "upstream"): a proxy's reading and parsing of its backend's
 *    response (see "Upstreams" below).
 *
 * Only contexts this file published are ever cleared: a context inherited
 * through pthread_create() or TRACEPARENT, or attached by a library hook,
 * is left alone (we remember the fd, generation and span-id we published
 * and compare the span-id with the thread's current context).  A library
 * hook that saves our context and restores it after a callback hands it
 * back to us (hook_socket_ctx_stamp()/_restored(), "save and restore"
 * below).
 *
 * "Answered" is turn-taking (OBI's response_sent idea): the first write
 * on the connection after a head, except an interim "HTTP/1.x 1xx" status
 * line (100 Continue: the body is still to come).  Pipelined requests read
 * before the current one is answered wait in a queue; the server is taken
 * to work on the next one once it has written the last byte of the
 * previous response when its first write tells its length (a
 * Content-Length, or no body: conn.c, "Response length"), else once it
 * has written the first bytes of it (event "switch", reason
 * "pipelined"), and that one counts as answered only by a write starting
 * with a status line, so a response written as head and body does not
 * skip a request.
 *
 * TLS.  A connection whose first byte is a TLS handshake record (the
 * scanner gives up there), or whose fd is handed to a TLS library
 * (SSL_set_fd, or the first SSL_read/gnutls_record_recv on it), becomes a
 * TLS connection (ctxshim_conn_tls()): from then on its socket I/O passes
 * straight through here, as for an untracked fd, and the TLS hooks
 * (hook-openssl.c, hook-gnutls.c) call the hook_socket_tls_*() functions
 * below with the plaintext instead, which apply exactly the rules above
 * to it.  Sessions without an fd (custom transports) get a slot of their
 * own (conn.h, "Connections without an fd").  TLS libraries we do not
 * hook (NSS, static BoringSSL) leave the connection unseen.
 *
 * Not seen (documented limits): bytes read through stdio (fgets on an
 * fdopen'ed socket: glibc reads internally), syscall(), io_uring and
 * preadv2() (which reads a socket at offset -1) -- bytes a read took past
 * the scanner put it out of step with the stream, so the connection's
 * later requests may get no context; splice() out of a socket is
 * followed only through the body the scanner is in (sk_splice()), a head
 * spliced out gives the connection up; responses sent only with
 * vmsplice(); upstream (connect()ed) sockets only when connected while
 * the thread published a request ("Upstreams"), and not their copies.
 * Copies of a connection (dup, dup2, dup3, fcntl F_DUPFD*, inherited
 * fds 1 and 2) are one connection only while the hooks see them made
 * and closed: a ring broken by a close they do not see leaves the other
 * copies doing nothing; at most
 * CTXSHIM_CONN_RING_MAX (16) descriptors of a connection are one (further
 * copies are followed as connections of their own, as before); and copies
 * used by two threads at once, one closing while another reads or writes,
 * may lose a request's context, or with pipelined requests queued give
 * it another connection's, like a close() racing I/O on one descriptor
 * (conn.c, "Copies").  fcntl() is seen under its names
 * fcntl and fcntl64 (what <fcntl.h> calls under _FILE_OFFSET_BITS=64), not as
 * __fcntl.  A close the hooks do not see (syscall(), freopen() of a
 * stream on a connection, a close inside another library's own code
 * that bypasses the PLT) leaves the slot tracked: until accept() returns
 * that number again, whatever else gets it (a pipe, a file, a client
 * socket) is read as that connection, and HTTP-looking bytes on it may
 * publish a context; an unanswered request of it stays shown through
 * the waits that keep one (a pool wait, a zero timeout) -- also when the
 * descriptor closed unseen is the copy that carried the connection on
 * after a close of the original that was seen (sk_gone()).  Only a
 * system call (fcntl(F_GETFD) at the wait) could tell, and not when the
 * number names another file already.  A vfork() child that
 * closes a tracked fd with close() or fclose() before exec makes its
 * parent forget that connection (shared memory; its dup/dup2/dup3/fcntl
 * copies and close_range/closefrom leave the parent's table alone:
 * sk_vfork_child()).  Bytes read by a signal handler that interrupted our
 * own processing on the same thread are not scanned.  A signal handler
 * that does I/O on another connection while the interrupted code works on
 * a request is I/O of the thread like any other: it switches the thread
 * to that connection (or clears it), and the interrupted request's
 * context comes back only at the code's next I/O on its connection (no
 * hook sees the handler return).
 *
 * Cost: for an fd that is not a tracked server connection, read/write and
 * friends add a bound check and one byte load before a tail call to libc;
 * the waits, and connect() by a thread that publishes nothing, add one
 * TLS load.  The tracked path runs out of line.  Nothing
 * here allocates, locks or logs; per-thread state is guarded by a busy flag
 * so a hook running in a signal handler that interrupted another one passes
 * straight through.  A handler that never returns but longjmp()s out of
 * the frame that holds the flag releases it (hook-longjmp.c). */
#include "config.h"

/* We define the libc names themselves: no fortify inlines, and no LFS
 * renaming (sendfile and sendfile64 are separate symbols to interpose). */
#undef _FORTIFY_SOURCE
#undef _FILE_OFFSET_BITS

#include "hooks.h"
#include "log.h"

#include "conn.h"
#include "conn-whole.h"
#include "events.h"
#include "hook-scope.h"
#include "hook-tls.h"
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

/* Defined in the same library (preload/events.c): read PC-relative, not
 * through the GOT, by every ctxshim_events_on() here (the idle wait of
 * every request, B1i). */
extern int ctxshim_events_fd __attribute__((visibility("hidden")));

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1U << 1)
#endif

/* The fortified entry points (declared by glibc only under fortify). */
ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd,
		       void *buf,
		       size_t len,
		       size_t buflen,
		       int flags,
		       struct sockaddr *addr,
		       socklen_t *addrlen);
int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds,
		nfds_t nfds,
		const struct timespec *timeout,
		const sigset_t *ss,
		size_t fdslen);

/* ---- real functions ---- */

/* fcntl() and fcntl64() (glibc >= 2.28; the name <fcntl.h> redirects
 * fcntl to under _FILE_OFFSET_BITS=64) with their one optional argument
 * as glibc's own fcntl64() reads it (sysdeps/unix/sysv/linux/fcntl64.c:
 * va_arg (ap, void *) for every command): an int, a pointer (struct
 * flock, flock64, f_owner_ex, a u64 hint) or nothing all travel in one
 * register-sized slot, passed on as it came. */
typedef int sk_fcntl_fn(int fd, int cmd, ...);

struct sk_real_fns {
	__typeof__(read) *read;
	__typeof__(recv) *recv;
	__typeof__(recvfrom) *recvfrom;
	__typeof__(recvmsg) *recvmsg;
	__typeof__(readv) *readv;
	__typeof__(recvmmsg) *recvmmsg;
	__typeof__(__read_chk) *read_chk;
	__typeof__(__recv_chk) *recv_chk;
	__typeof__(__recvfrom_chk) *recvfrom_chk;
	__typeof__(accept) *accept;
	__typeof__(accept4) *accept4;
	__typeof__(connect) *connect;
	__typeof__(close) *close;
	__typeof__(dup) *dup;
	__typeof__(dup2) *dup2;
	__typeof__(dup3) *dup3;
	__typeof__(fclose) *fclose;
	sk_fcntl_fn *fcntl;
	sk_fcntl_fn *fcntl64;
	__typeof__(close_range) *close_range;
	__typeof__(closefrom) *closefrom;
	__typeof__(write) *write;
	__typeof__(send) *send;
	__typeof__(sendto) *sendto;
	__typeof__(sendmsg) *sendmsg;
	__typeof__(writev) *writev;
	__typeof__(sendmmsg) *sendmmsg;
	__typeof__(pwritev2) *pwritev2;
	__typeof__(pwritev64v2) *pwritev64v2;
	__typeof__(sendfile) *sendfile;
	__typeof__(sendfile64) *sendfile64;
	__typeof__(splice) *splice;
	__typeof__(epoll_wait) *epoll_wait;
	__typeof__(epoll_pwait) *epoll_pwait;
	__typeof__(epoll_pwait2) *epoll_pwait2;
	__typeof__(poll) *poll;
	__typeof__(ppoll) *ppoll;
	__typeof__(select) *select;
	__typeof__(pselect) *pselect;
	__typeof__(__poll_chk) *poll_chk;
	__typeof__(__ppoll_chk) *ppoll_chk;
};

/* Starts out pointing at the real_*_boot() functions below, which bind
 * and then call through, so the hot paths are a single indirect jump. */
static struct sk_real_fns sk_real;

static pthread_once_t sk_bind_once = PTHREAD_ONCE_INIT;
static __thread bool sk_binding __attribute__((tls_model("initial-exec")));

#define SK_BIND(field, sym, required)                                             \
	do {                                                                      \
		void *p_ = ctxshim_bind(#sym, NULL, (const void *)sym, required); \
		if (p_)                                                           \
			sk_real.field = (__typeof__(sk_real.field))p_;            \
	} while (0)

static void
hook_socket_bind_once(void)
{
	/* A hook called from inside dlsym (an allocator that reads a file
	 * while dlerror() allocates) must not wait for this once.  fclose
	 * first: such an allocator may well close that file, and only a
	 * bound pointer can do that for it (real_fclose_boot()). */
	sk_binding = true;
	SK_BIND(fclose, fclose, true);
	SK_BIND(fcntl, fcntl, true);
	SK_BIND(fcntl64, fcntl64, false);
	SK_BIND(read, read, true);
	SK_BIND(recv, recv, true);
	SK_BIND(recvfrom, recvfrom, true);
	SK_BIND(recvmsg, recvmsg, true);
	SK_BIND(readv, readv, true);
	SK_BIND(recvmmsg, recvmmsg, false);
	SK_BIND(read_chk, __read_chk, false);
	SK_BIND(recv_chk, __recv_chk, false);
	SK_BIND(recvfrom_chk, __recvfrom_chk, false);
	SK_BIND(accept, accept, true);
	SK_BIND(accept4, accept4, true);
	SK_BIND(connect, connect, true);
	SK_BIND(close, close, true);
	SK_BIND(dup, dup, true);
	SK_BIND(dup2, dup2, true);
	SK_BIND(dup3, dup3, true);
	SK_BIND(close_range, close_range, false);
	SK_BIND(closefrom, closefrom, false);
	SK_BIND(write, write, true);
	SK_BIND(send, send, true);
	SK_BIND(sendto, sendto, true);
	SK_BIND(sendmsg, sendmsg, true);
	SK_BIND(writev, writev, true);
	SK_BIND(sendmmsg, sendmmsg, false);
	SK_BIND(pwritev2, pwritev2, false);
	SK_BIND(pwritev64v2, pwritev64v2, false);
	SK_BIND(sendfile, sendfile, true);
	SK_BIND(sendfile64, sendfile64, false);
	SK_BIND(splice, splice, false);
	SK_BIND(epoll_wait, epoll_wait, true);
	SK_BIND(epoll_pwait, epoll_pwait, true);
	SK_BIND(epoll_pwait2, epoll_pwait2, false);
	SK_BIND(poll, poll, true);
	SK_BIND(ppoll, ppoll, true);
	SK_BIND(select, select, true);
	SK_BIND(pselect, pselect, true);
	SK_BIND(poll_chk, __poll_chk, false);
	SK_BIND(ppoll_chk, __ppoll_chk, false);
	sk_binding = false;
}

/* False only for a call made while this thread is binding: the caller
 * then uses the raw system call. */
static bool
hook_socket_bind(void)
{
	if (sk_binding)
		return false;
	pthread_once(&sk_bind_once, hook_socket_bind_once);
	return true;
}

/* This process's pid, kept for sk_vfork_child(): set at load and in
 * every forked child (fork()'s atfork handler, the _Fork() hook). */
static pid_t sk_pid;

void
hook_socket_after_fork_child(void)
{
	sk_pid = (pid_t)syscall(SYS_getpid);
}

/* Bind at load time, so that hooks never bind from a signal handler
 * unless another library's constructor runs them before ours. */
__attribute__((constructor(103))) static void
hook_socket_ctor(void)
{
	hook_socket_after_fork_child();
	(void)pthread_atfork(NULL, NULL, hook_socket_after_fork_child);
	(void)hook_socket_bind();
}

/* Are we a vfork() child (or another clone(CLONE_VM) child that runs no
 * fork handler)?  It runs in its parent's memory until it execs, with a
 * file table of its own: the connection table it sees is the parent's,
 * so what the child does to its descriptors must not change it.  The
 * CGI pattern -- vfork(), dup2() the connection onto 0 and 1,
 * closefrom(3) or close_range(), exec -- made the parent's stdin and
 * stdout look like copies of the connection (its log lines were then
 * taken for responses, and reads of stdin published the request) and
 * made it forget every connection it had.  One getpid() system call,
 * only in the fd-management hooks that change the table in bulk or by
 * copy (dup, dup2, dup3, fcntl F_DUPFD*, close_range, closefrom), and only
 * when a number they touch is the table's (a sandboxed program may not be
 * allowed getpid()), never on a read or write path; close() and fclose()
 * do without (the comment at the top says what that leaves).  A child of a raw clone() without
 * CLONE_VM, which runs no fork handler either, is taken for one too: its
 * copies and range closes go unseen there, like a close the hooks do not
 * see (see the top). */
static bool
sk_vfork_child(void)
{
	return sk_pid && (pid_t)syscall(SYS_getpid) != sk_pid;
}

/* real_<fn>() calls the bound pointer; until binding, that is
 * real_<fn>_boot(), which binds (pthread_once) and calls through, or makes
 * the system call itself while this thread is binding or if an optional
 * symbol is missing. */
#define SK_REAL(name, field, ret, params, args, fallback)                      \
	static __attribute__((noinline, cold)) ret real_##name##_boot params   \
	{                                                                      \
		if (hook_socket_bind() && sk_real.field != real_##name##_boot) \
			return sk_real.field args;                             \
		return (ret)(fallback);                                        \
	}                                                                      \
	static inline ret real_##name params                                   \
	{                                                                      \
		return sk_real.field args;                                     \
	}

#define SK_SIGSET_SIZE (_NSIG / 8)

/* One line per function: name, pointer, return type, parameters, arguments,
 * system-call fallback. */
/* clang-format off */
SK_REAL(read, read, ssize_t, (int fd, void *b, size_t n), (fd, b, n),
	syscall(SYS_read, fd, b, n))
SK_REAL(recv, recv, ssize_t, (int fd, void *b, size_t n, int fl), (fd, b, n, fl),
	syscall(SYS_recvfrom, fd, b, n, fl, NULL, NULL))
SK_REAL(recvfrom, recvfrom, ssize_t,
	(int fd, void *b, size_t n, int fl, struct sockaddr *a, socklen_t *al),
	(fd, b, n, fl, a, al), syscall(SYS_recvfrom, fd, b, n, fl, a, al))
SK_REAL(recvmsg, recvmsg, ssize_t, (int fd, struct msghdr *m, int fl), (fd, m, fl),
	syscall(SYS_recvmsg, fd, m, fl))
SK_REAL(readv, readv, ssize_t, (int fd, const struct iovec *v, int n), (fd, v, n),
	syscall(SYS_readv, fd, v, n))
SK_REAL(recvmmsg, recvmmsg, int,
	(int fd, struct mmsghdr *v, unsigned n, int fl, struct timespec *t),
	(fd, v, n, fl, t), syscall(SYS_recvmmsg, fd, v, n, fl, t))
SK_REAL(read_chk, read_chk, ssize_t, (int fd, void *b, size_t n, size_t bl),
	(fd, b, n, bl), (n > bl ? (abort(), 0) : syscall(SYS_read, fd, b, n)))
SK_REAL(recv_chk, recv_chk, ssize_t, (int fd, void *b, size_t n, size_t bl, int fl),
	(fd, b, n, bl, fl),
	(n > bl ? (abort(), 0) : syscall(SYS_recvfrom, fd, b, n, fl, NULL, NULL)))
SK_REAL(recvfrom_chk, recvfrom_chk, ssize_t,
	(int fd, void *b, size_t n, size_t bl, int fl, struct sockaddr *a, socklen_t *al),
	(fd, b, n, bl, fl, a, al),
	(n > bl ? (abort(), 0) : syscall(SYS_recvfrom, fd, b, n, fl, a, al)))
SK_REAL(accept, accept, int, (int fd, struct sockaddr *a, socklen_t *al), (fd, a, al),
	syscall(SYS_accept, fd, a, al))
SK_REAL(accept4, accept4, int, (int fd, struct sockaddr *a, socklen_t *al, int fl),
	(fd, a, al, fl), syscall(SYS_accept4, fd, a, al, fl))
SK_REAL(connect, connect, int, (int fd, const struct sockaddr *a, socklen_t al),
	(fd, a, al), syscall(SYS_connect, fd, a, al))
SK_REAL(close, close, int, (int fd), (fd), syscall(SYS_close, fd))
SK_REAL(dup, dup, int, (int o), (o), syscall(SYS_dup, o))
SK_REAL(dup2, dup2, int, (int o, int n), (o, n), syscall(SYS_dup2, o, n))
SK_REAL(dup3, dup3, int, (int o, int n, int fl), (o, n, fl), syscall(SYS_dup3, o, n, fl))
SK_REAL(close_range, close_range, int, (unsigned lo, unsigned hi, int fl), (lo, hi, fl),
	syscall(SYS_close_range, lo, hi, fl))
SK_REAL(write, write, ssize_t, (int fd, const void *b, size_t n), (fd, b, n),
	syscall(SYS_write, fd, b, n))
SK_REAL(send, send, ssize_t, (int fd, const void *b, size_t n, int fl), (fd, b, n, fl),
	syscall(SYS_sendto, fd, b, n, fl, NULL, 0))
SK_REAL(sendto, sendto, ssize_t,
	(int fd, const void *b, size_t n, int fl, const struct sockaddr *a, socklen_t al),
	(fd, b, n, fl, a, al), syscall(SYS_sendto, fd, b, n, fl, a, al))
SK_REAL(sendmsg, sendmsg, ssize_t, (int fd, const struct msghdr *m, int fl), (fd, m, fl),
	syscall(SYS_sendmsg, fd, m, fl))
SK_REAL(writev, writev, ssize_t, (int fd, const struct iovec *v, int n), (fd, v, n),
	syscall(SYS_writev, fd, v, n))
SK_REAL(sendmmsg, sendmmsg, int, (int fd, struct mmsghdr *v, unsigned n, int fl),
	(fd, v, n, fl), syscall(SYS_sendmmsg, fd, v, n, fl))
SK_REAL(pwritev2, pwritev2, ssize_t,
	(int fd, const struct iovec *v, int n, off_t off, int fl), (fd, v, n, off, fl),
	syscall(SYS_pwritev2, fd, v, n, (long)off, (long)((uint64_t)off >> 32), fl))
SK_REAL(pwritev64v2, pwritev64v2, ssize_t,
	(int fd, const struct iovec *v, int n, off64_t off, int fl), (fd, v, n, off, fl),
	syscall(SYS_pwritev2, fd, v, n, (long)off, (long)((uint64_t)off >> 32), fl))
SK_REAL(sendfile, sendfile, ssize_t, (int o, int i, off_t *off, size_t n), (o, i, off, n),
	syscall(SYS_sendfile, o, i, off, n))
SK_REAL(sendfile64, sendfile64, ssize_t, (int o, int i, off64_t *off, size_t n),
	(o, i, off, n), syscall(SYS_sendfile, o, i, off, n))
SK_REAL(splice, splice, ssize_t,
	(int i, __off64_t *oi, int o, __off64_t *oo, size_t n, unsigned fl),
	(i, oi, o, oo, n, fl), syscall(SYS_splice, i, oi, o, oo, n, fl))
SK_REAL(epoll_wait, epoll_wait, int, (int ep, struct epoll_event *ev, int n, int to),
	(ep, ev, n, to), syscall(SYS_epoll_wait, ep, ev, n, to))
SK_REAL(epoll_pwait, epoll_pwait, int,
	(int ep, struct epoll_event *ev, int n, int to, const sigset_t *ss),
	(ep, ev, n, to, ss), syscall(SYS_epoll_pwait, ep, ev, n, to, ss, SK_SIGSET_SIZE))
SK_REAL(epoll_pwait2, epoll_pwait2, int,
	(int ep, struct epoll_event *ev, int n, const struct timespec *to,
	 const sigset_t *ss),
	(ep, ev, n, to, ss), syscall(SYS_epoll_pwait2, ep, ev, n, to, ss, SK_SIGSET_SIZE))
SK_REAL(poll, poll, int, (struct pollfd *f, nfds_t n, int to), (f, n, to),
	syscall(SYS_poll, f, n, to))
SK_REAL(select, select, int, (int n, fd_set *r, fd_set *w, fd_set *x, struct timeval *t),
	(n, r, w, x, t), syscall(SYS_select, n, r, w, x, t))
SK_REAL(poll_chk, poll_chk, int, (struct pollfd *f, nfds_t n, int to, size_t fl),
	(f, n, to, fl), (n > fl / sizeof(*f) ? (abort(), 0) : syscall(SYS_poll, f, n, to)))

/* The kernel writes the remaining time back; libc's callers expect their
 * timeout untouched. */
static long
sk_sys_ppoll(struct pollfd *f, nfds_t n, const struct timespec *to, const sigset_t *ss)
{
	struct timespec t, *tp = NULL;

	if (to) {
		t = *to;
		tp = &t;
	}
	return syscall(SYS_ppoll, f, n, tp, ss, SK_SIGSET_SIZE);
}

static long
sk_sys_pselect(int n, fd_set *r, fd_set *w, fd_set *x, const struct timespec *to,
	       const sigset_t *ss)
{
	struct timespec t, *tp = NULL;
	struct {
		const sigset_t *ss;
		size_t len;
	} data = {ss, SK_SIGSET_SIZE};

	if (to) {
		t = *to;
		tp = &t;
	}
	return syscall(SYS_pselect6, n, r, w, x, tp, &data);
}

static long
sk_sys_closefrom(int lo)
{
	return syscall(SYS_close_range, (unsigned)lo, ~0u, 0);
}

SK_REAL(ppoll, ppoll, int,
	(struct pollfd *f, nfds_t n, const struct timespec *to, const sigset_t *ss),
	(f, n, to, ss), sk_sys_ppoll(f, n, to, ss))
SK_REAL(ppoll_chk, ppoll_chk, int,
	(struct pollfd *f, nfds_t n, const struct timespec *to, const sigset_t *ss,
	 size_t fl),
	(f, n, to, ss, fl),
	(n > fl / sizeof(*f) ? (abort(), 0) : sk_sys_ppoll(f, n, to, ss)))
SK_REAL(pselect, pselect, int,
	(int n, fd_set *r, fd_set *w, fd_set *x, const struct timespec *to,
	 const sigset_t *ss),
	(n, r, w, x, to, ss), sk_sys_pselect(n, r, w, x, to, ss))

/* While this thread binds: the system call, as glibc makes it on 64-bit
 * targets (sysdeps/unix/sysv/linux/fcntl64.c: every command as it is,
 * struct flock being flock64 there, except F_GETOWN, answered through
 * F_GETOWN_EX so that a process group's negative id comes back). */
static long
sk_sys_fcntl(int fd, int cmd, void *arg)
{
	if (cmd == F_GETOWN) {
		struct f_owner_ex ex;

		if (syscall(SYS_fcntl, fd, F_GETOWN_EX, &ex) < 0)
			return -1;
		return ex.type == F_OWNER_PGRP ? -ex.pid : ex.pid;
	}
	return syscall(SYS_fcntl, fd, cmd, arg);
}

static __attribute__((noinline, cold)) int
real_fcntl_boot(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (hook_socket_bind() && sk_real.fcntl != real_fcntl_boot)
		return sk_real.fcntl(fd, cmd, arg);
	return (int)sk_sys_fcntl(fd, cmd, arg);
}

static __attribute__((noinline, cold)) int
real_fcntl64_boot(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (hook_socket_bind() && sk_real.fcntl64 != real_fcntl64_boot)
		return sk_real.fcntl64(fd, cmd, arg);
	/* fcntl64 is missing before glibc 2.28: fcntl is that call there. */
	return real_fcntl_boot(fd, cmd, arg);
}

/* fclose has no system call to fall back on.  It is bound first, so a
 * call from inside a later lookup of this thread's binding finds it; one
 * from inside its own lookup (dlsym calling an allocator that closes a
 * FILE) looks it up by itself, outside the once it is running in. */
static __attribute__((noinline, cold)) int
real_fclose_boot(FILE *fp)
{
	int (*fn)(FILE *);

	if (hook_socket_bind() && sk_real.fclose != real_fclose_boot)
		return sk_real.fclose(fp);
	fn = sk_real.fclose;
	if (fn == real_fclose_boot)
		fn = (int (*)(FILE *))ctxshim_bind("fclose", NULL, (const void *)fclose,
						   true);
	return fn(fp);
}

static __attribute__((noinline, cold)) void
real_closefrom_boot(int lo)
{
	if (hook_socket_bind() && sk_real.closefrom != real_closefrom_boot)
		sk_real.closefrom(lo);
	else
		(void)sk_sys_closefrom(lo);
}

/* clang-format on */

static inline void
real_closefrom(int lo)
{
	sk_real.closefrom(lo);
}

static inline int
real_fclose(FILE *fp)
{
	return sk_real.fclose(fp);
}

static struct sk_real_fns sk_real = {
	.read = real_read_boot,
	.recv = real_recv_boot,
	.recvfrom = real_recvfrom_boot,
	.recvmsg = real_recvmsg_boot,
	.readv = real_readv_boot,
	.recvmmsg = real_recvmmsg_boot,
	.read_chk = real_read_chk_boot,
	.recv_chk = real_recv_chk_boot,
	.recvfrom_chk = real_recvfrom_chk_boot,
	.accept = real_accept_boot,
	.accept4 = real_accept4_boot,
	.connect = real_connect_boot,
	.close = real_close_boot,
	.dup = real_dup_boot,
	.dup2 = real_dup2_boot,
	.dup3 = real_dup3_boot,
	.fclose = real_fclose_boot,
	.fcntl = real_fcntl_boot,
	.fcntl64 = real_fcntl64_boot,
	.close_range = real_close_range_boot,
	.closefrom = real_closefrom_boot,
	.write = real_write_boot,
	.send = real_send_boot,
	.sendto = real_sendto_boot,
	.sendmsg = real_sendmsg_boot,
	.writev = real_writev_boot,
	.sendmmsg = real_sendmmsg_boot,
	.pwritev2 = real_pwritev2_boot,
	.pwritev64v2 = real_pwritev64v2_boot,
	.sendfile = real_sendfile_boot,
	.sendfile64 = real_sendfile64_boot,
	.splice = real_splice_boot,
	.epoll_wait = real_epoll_wait_boot,
	.epoll_pwait = real_epoll_pwait_boot,
	.epoll_pwait2 = real_epoll_pwait2_boot,
	.poll = real_poll_boot,
	.ppoll = real_ppoll_boot,
	.select = real_select_boot,
	.pselect = real_pselect_boot,
	.poll_chk = real_poll_chk_boot,
	.ppoll_chk = real_ppoll_chk_boot,
};

/* ---- per-thread state ---- */

/* What this thread published from a connection (thread-ctx.h, struct
 * ctxshim_sk_thread): in the thread's state, initial-exec, read with one
 * instruction by the wait hooks, and with the thread's context from one
 * TLS address. */
#define sk_self (ctxshim_self.sk)

/* sk_self.c where fd's slot is not known (a handed-back context of a
 * connection without an fd slot): never tracked, so no write takes the
 * fast path through it (flags 0). */
static struct ctxshim_conn sk_nil_conn;

/* Held: the holder's token (thread-ctx.h, ctxshim_busy_token()), taken
 * in the hook's own frame, which encloses the hold (every call of
 * sk_busy(true) is inlined into a hook or into a function that releases
 * the flag before it returns). */
static inline __attribute__((always_inline)) void
sk_busy(bool on)
{
	atomic_signal_fence(memory_order_seq_cst);
	sk_self.busy = on ? (sig_atomic_t)ctxshim_busy_token() : 0;
	atomic_signal_fence(memory_order_seq_cst);
}

/* A jump to a frame whose stack pointer is to (hook-longjmp.c): if it ends
 * the frame that holds sk.busy, release it and forget what we published
 * (the hold may have ended half-way through remembering it), then let the
 * thread's state do the same.  The token is the holder's stack pointer's
 * low 32 bits minus 1; to is above it by less than 2 GiB when the jump
 * ends it (one stack). */
void
hook_socket_unwound(uintptr_t to)
{
	uint32_t tok = (uint32_t)sk_self.busy;
	bool dead = false;

	if (tok) {
		uint32_t d = (uint32_t)to - (tok + 1);

		dead = d != 0 && d < (1u << 31) && ctxshim_stack_between(to - d, to);
	}
	if (dead) {
		sk_self.fdp1 = 0;
		atomic_signal_fence(memory_order_seq_cst);
		sk_self.busy = 0;
	}
	/* Also when the jump keeps our holder: a hold of the thread's state
	 * by a signal handler that interrupted it may end. */
	ctxshim_thread_unwound(to, dead);
}

static inline uint64_t
sk_span(const struct ctxshim_ctx *c)
{
	uint64_t v;

	memcpy(&v, c->span_id, sizeof(v));
	return v;
}

/* The fd whose context this thread still publishes, or -1. */
static int
sk_owned_fd(void)
{
	const struct ctxshim_ctx *cur;

	if (!sk_self.fdp1)
		return -1;
	cur = ctxshim_current();
	if (!cur || sk_span(cur) != sk_self.span) {
		/* Someone else (a library hook, a thread start) has replaced or
		 * cleared it since: not ours to manage any more. */
		sk_self.fdp1 = 0;
		return -1;
	}
	return sk_self.fdp1 - 1;
}

static void
sk_drop(int fd, const char *reason)
{
	if (ctxshim_events_on()) {
		const struct ctxshim_ctx *cur = ctxshim_current();

		ctxshim_event(CTXSHIM_EV_DETACH, fd, cur, reason);
	}
	ctxshim_detach();
	sk_self.fdp1 = 0;
}

/* sk_drop() of what we published (sk_self.fdp1 != 0) if it is still
 * current, without the event log (which needs to know whose context it
 * was: sk_owned_fd()).  One call that checks and clears, for the
 * keep-alive read after a response (B4). */
static inline void
sk_drop_quiet(void)
{
	(void)ctxshim_detach_sock((const uint8_t *)&sk_self.span);
	sk_self.fdp1 = 0;
}

/* ctx (not NULL) was just published for connection fd: remember it.
 * Four stores and a test: inline everywhere (gcc made it a call in the
 * read hooks once sk_in_cap() was inlined there: 14 instructions of every
 * HTTP/2 request, bench/h2-insns.sh). */
static inline __attribute__((always_inline)) void
sk_attached(int fd,
	    struct ctxshim_conn *c,
	    const struct ctxshim_ctx *ctx,
	    enum ctxshim_ev ev,
	    const char *reason)
{
	sk_self.fdp1 = fd + 1;
	sk_self.gen = atomic_load_explicit(&c->gen, memory_order_relaxed);
	sk_self.span = sk_span(ctx);
	sk_self.c = c;
	CTXSHIM_EVENT(ev, fd, ctx, reason);
}

static void
sk_attach(int fd,
	  struct ctxshim_conn *c,
	  const struct ctxshim_ctx *ctx,
	  enum ctxshim_ev ev,
	  const char *reason)
{
	ctxshim_attach_sock(ctx);
	/* A switch (back to a request, to an upstream's, a pipelined one):
	 * until the thread is done with a request, a head it reads now is
	 * not the round's only one ("Handlers run after the next wait"). */
	sk_self.mark = CTXSHIM_SK_MARK_MIXED;
	sk_attached(fd, c, ctx, ev, reason);
}

static void
sk_publish(int fd, struct ctxshim_conn *c, enum ctxshim_ev ev, const char *reason)
{
	struct ctxshim_ctx ctx;

	if (!ctxshim_conn_expand(c, &ctx)) {
		if (sk_owned_fd() >= 0)
			sk_drop(fd, "changed");
		return;
	}
	sk_attach(fd, c, &ctx, ev, reason);
}

/* Does slot c (NULL: none) still hold the connection its descriptor
 * named under generation gen? */
static inline bool
sk_req_here(const struct ctxshim_conn *c, uint32_t gen)
{
	return c && atomic_load_explicit(&c->gen, memory_order_relaxed) == gen &&
	       (atomic_load_explicit(&c->flags, memory_order_relaxed) &
		(CONN_F_TRACKED | CONN_F_LINK)) == CONN_F_TRACKED;
}

/* The slot that holds the connection (id, gen) named (preload/conn.h,
 * ctxshim_conn_holder(): a copy's leader, or the copy that carried the
 * connection on after id was closed), its id in *hid, if that
 * connection's current request is the one of span-id span, with a
 * context, and not answered; else NULL.  The request is told by its
 * span-id, not by seq: seq is the slot's, and moves on when a pipelined
 * request becomes current (the thread may still show the one before) or
 * the state moves to a copy and back.  The span-id is read as a reader of
 * the seqlock does (conn.h, seq). */
static struct ctxshim_conn *
sk_req_live(int id, uint32_t gen, uint64_t span, int *hid)
{
	/* The usual case first, inline (a switch back nearly always finds
	 * it): the connection is still on the descriptor named -- its slot,
	 * of that generation, not a copy: what ctxshim_conn_holder() takes
	 * first. */
	struct ctxshim_conn *c = ctxshim_conn_get(id);
	uint64_t cur;
	uint32_t s;

	if (sk_req_here(c, gen))
		*hid = id;
	else
		c = ctxshim_conn_holder(id, gen, hid);
	if (!c || !ctxshim_conn_live(c))
		return NULL;
	s = atomic_load_explicit(&c->seq, memory_order_acquire);
	memcpy(&cur, c->ctx.span_id, sizeof(cur));
	atomic_thread_fence(memory_order_acquire);
	if ((s & 1) || atomic_load_explicit(&c->seq, memory_order_relaxed) != s ||
	    cur != span)
		return NULL;
	return c;
}

/* What this thread publishes, the request of (id, gen), is still live
 * (sk_req_live()): follow it where its connection is now. */
static bool
sk_req_follow(int id, uint32_t gen)
{
	struct ctxshim_conn *c = sk_req_live(id, gen, sk_self.span, &id);

	if (!c)
		return false;
	sk_self.fdp1 = id + 1;
	sk_self.gen = atomic_load_explicit(&c->gen, memory_order_relaxed);
	sk_self.c = c;
	return true;
}

static void sk_follow_link(int fd, struct ctxshim_conn *c, bool is_write);

/* ---- upstreams ----
 *
 * Upstreams.  A reverse proxy on an event loop (nginx's proxy_pass,
 * HAProxy) reads a request's head on the client connection, sends the
 * request on to a backend over a socket it connect()ed, goes back to its
 * wait, and later reads and parses the backend's response from that
 * socket before it writes anything to the client: without more, that
 * work runs with no context.  So a socket the process connect()s while
 * the thread publishes a server connection's request (sk_up_assoc())
 * becomes an upstream (conn.h, "Upstreams"; CONN_HOT_UP), and its word
 * names that request; a write on it under another request's context
 * names that one instead (a kept-alive upstream reused for the next
 * request), while a write with none changes nothing (the write of a
 * non-blocking connect's request after the wait that cleared the
 * context).  A read (or splice) from the upstream then switches the
 * thread to the request it names ("switch"/"attach", reason "upstream")
 * if that request is still the connection's current one, with a context
 * and not answered (sk_up_live()); otherwise nothing changes: a response
 * the proxy streams keeps the context its writes to the client gave the
 * thread, and a request answered, replaced or closed is not brought
 * back.  From there the usual rules apply: the next wait clears it, the
 * response's writes on the client connection keep it.  An upstream's
 * bytes are never scanned (its scanner is stopped: a backend's response
 * is no request), nor is it a connection for poll/select (a wait on it
 * is part of the request).  Its close, dup2/dup3 over it, close_range or
 * closefrom forget it with its word (ctxshim_conn_forget()), and a
 * connection accept()ed on its number later starts afresh; (fd, seq)
 * also names a single request for good (conn.h).  Sockets connected
 * while the thread publishes nothing -- every client program's, and the
 * connection pools a server opens at start-up -- stay plain fds: one TLS
 * load after the real connect(). */

/* The word an upstream gets from this thread's publication: the fd and
 * seq of the server connection whose current request the thread
 * publishes (its span-id is the one the thread published), or 0. */
static uint64_t
sk_up_assoc(void)
{
	struct ctxshim_conn *c = sk_self.c;
	int fd = sk_owned_fd();
	uint32_t s1, s2;
	uint64_t span;
	uint8_t f;

	if (fd < 0 || (unsigned)fd >= ctxshim_conn_tab.max_fds || !c ||
	    c == &sk_nil_conn || ctxshim_conn_get(fd) != c ||
	    sk_self.gen != atomic_load_explicit(&c->gen, memory_order_relaxed))
		return 0;
	f = atomic_load_explicit(&c->flags, memory_order_relaxed);
	if ((f & (CONN_F_TRACKED | CONN_F_REQ | CONN_F_HAS_CTX | CONN_F_LINK |
		  CONN_F_CLAIMED)) != (CONN_F_TRACKED | CONN_F_REQ | CONN_F_HAS_CTX))
		return 0;
	/* The request whose span-id we published, read as a reader of the
	 * seqlock does (conn.h, seq). */
	s1 = atomic_load_explicit(&c->seq, memory_order_acquire);
	if (s1 & 1)
		return 0;
	memcpy(&span, c->ctx.span_id, sizeof(span));
	atomic_thread_fence(memory_order_acquire);
	s2 = atomic_load_explicit(&c->seq, memory_order_relaxed);
	if (s1 != s2 || span != sk_self.span)
		return 0;
	return ctxshim_conn_up_make(fd, s1);
}

/* Is seq c's seq, c a tracked connection (not a copy, not claimed) whose
 * current request has a context and is not answered? */
static bool
sk_up_live(const struct ctxshim_conn *c, uint32_t seq)
{
	uint8_t f = atomic_load_explicit(&c->flags, memory_order_relaxed);

	return (f & (CONN_F_TRACKED | CONN_F_REQ | CONN_F_HAS_CTX | CONN_F_LINK |
		     CONN_F_CLAIMED)) ==
		       (CONN_F_TRACKED | CONN_F_REQ | CONN_F_HAS_CTX) &&
	       atomic_load_explicit(&c->seq, memory_order_acquire) == seq &&
	       !ctxshim_conn_answered(c);
}

/* The thread wrote on, or closed, an upstream of another live request
 * than the one it publishes: in an event loop's batch its context is the
 * last request it read, not necessarily the one it works for now (a body
 * written on, or a failed backend closed, for a request read earlier).
 * Until it publishes again, a connect() of its names no request (the
 * next backend tried for that other request).  Kept as the low bits of
 * the span-id published at the time, so that a new publication ends it
 * without a store on the hot path. */
static inline void
sk_up_mark_stale(void)
{
	sk_self.up_stale = (uint32_t)sk_self.span | 1;
}

static inline bool
sk_up_is_stale(void)
{
	return sk_self.up_stale == ((uint32_t)sk_self.span | 1);
}

/* The server connection upstream word v (without CTXSHIM_CONN_UP_FRESH)
 * names, if its request is still live: its slot, *cfd and *seq; else
 * NULL. */
static struct ctxshim_conn *
sk_up_named(uint64_t v, int *cfd, uint32_t *seq)
{
	unsigned cfdp1 = (unsigned)(v & ((1u << CTXSHIM_CONN_UP_FD_BITS) - 1));
	struct ctxshim_conn *c;

	if (!cfdp1 || cfdp1 > ctxshim_conn_tab.max_fds)
		return NULL;
	*cfd = (int)cfdp1 - 1;
	*seq = (uint32_t)(v >> CTXSHIM_CONN_UP_FD_BITS);
	c = ctxshim_conn_get(*cfd);
	return c && sk_up_live(c, *seq) ? c : NULL;
}

/* Does upstream word v name a request that is still live? */
static bool
sk_up_word_live(uint64_t v)
{
	uint32_t seq;
	int cfd;

	return sk_up_named(v & ~CTXSHIM_CONN_UP_FRESH, &cfd, &seq) != NULL;
}

/* I/O on upstream fd (busy held, errno kept by the caller): a write names
 * the request the thread publishes, if any; a read switches to the one
 * named, if it is still live. */
static __attribute__((noinline, cold)) void
sk_up_follow(int fd, bool is_write)
{
	uint64_t v;
	uint32_t seq;
	struct ctxshim_conn *c;
	struct ctxshim_ctx ctx;
	int own, cfd;

	if (is_write) {
		uint64_t old = ctxshim_conn_up_load(fd);

		v = sk_up_assoc();
		if (v) {
			/* Another request still live on it: two requests share
			 * the upstream (pipelined, multiplexed), or the thread's
			 * context is not the request it writes for: its answers
			 * can no longer be told apart, so it names none. */
			if ((old & ~CTXSHIM_CONN_UP_FRESH) &&
			    (old & ~CTXSHIM_CONN_UP_FRESH) != v &&
			    sk_up_word_live(old)) {
				sk_up_mark_stale();
				v = 0;
			}
		} else if (old & CTXSHIM_CONN_UP_FRESH) {
			/* The first write after a non-blocking connect, after
			 * the wait that cleared the context: still the request
			 * it was connected for, once. */
			v = old & ~CTXSHIM_CONN_UP_FRESH;
		}
		/* Otherwise a write by a thread that publishes no request of
		 * ours (a pool's other user, a background thread, a library
		 * hook's or an inherited context): the upstream is not the
		 * named request's any more. */
		ctxshim_conn_up_store(fd, v);
		return;
	}
	/* A context we did not publish (a library hook's, one inherited
	 * through pthread_create()) is never replaced (see the top). */
	own = sk_owned_fd();
	if (own < 0 && ctxshim_current())
		return;
	v = ctxshim_conn_up_load(fd) & ~CTXSHIM_CONN_UP_FRESH;
	c = sk_up_named(v, &cfd, &seq);
	if (!c)
		return;
	if (own == cfd &&
	    sk_self.gen == atomic_load_explicit(&c->gen, memory_order_relaxed))
		return; /* that request is what the thread publishes */
	/* Expanded, then checked again: a context of the request named, or
	 * none (a new request may have become current meanwhile).  Last, the
	 * socket itself: a close the hooks did not see may have given its
	 * number to another file (one fstat(), per switch only). */
	if (!ctxshim_conn_expand(c, &ctx) || !sk_up_live(c, seq))
		return;
	if (!ctxshim_conn_up_same(fd)) {
		(void)ctxshim_conn_forget(fd);
		return;
	}
	sk_attach(cfd, c, &ctx, own >= 0 ? CTXSHIM_EV_SWITCH : CTXSHIM_EV_ATTACH,
		  "upstream");
}

/* Upstream fd is closed by this thread (busy held): if it served another
 * live request than the one the thread publishes, the thread's context is
 * stale for the connect() that may follow (sk_up_mark_stale()). */
static void
sk_up_closed(int fd)
{
	uint64_t v = ctxshim_conn_up_load(fd) & ~CTXSHIM_CONN_UP_FRESH;

	if (v && sk_self.fdp1 && v != sk_up_assoc() && sk_up_word_live(v))
		sk_up_mark_stale();
}

/* After a connect() of fd that returned 0, or failed with EINPROGRESS or
 * EINTR (the connection goes on), by a thread that publishes something
 * (sk_self.fdp1 != 0). */
static __attribute__((noinline, cold)) void
sk_connected(int fd, bool unspec)
{
	int saved_errno = errno;
	uint8_t hot;
	uint64_t v;

	/* A vfork() child's socket is no upstream of its parent's (its fd
	 * table is its own, the connection table is the parent's). */
	if (!ctxshim_conn_tab.max_fds || sk_self.busy || sk_vfork_child()) {
		errno = saved_errno;
		return;
	}
	sk_busy(true);
	hot = ctxshim_conn_hot(fd);
	/* Only a plain fd (or an upstream connected again): a tracked number
	 * is a connection whose close we did not see (see the top), left as
	 * it is. */
	if (hot == CONN_HOT_NONE || hot == CONN_HOT_UP) {
		v = unspec || sk_up_is_stale() ? 0 : sk_up_assoc();
		if (v)
			(void)ctxshim_conn_upstream(fd, v | CTXSHIM_CONN_UP_FRESH);
		else if (hot == CONN_HOT_UP) /* connected again, for no request */
			(void)ctxshim_conn_forget(fd);
	}
	sk_busy(false);
	errno = saved_errno;
}

/* Does a write on c continue the response of its current request?  Yes
 * while that request is not answered, and after its first write as long
 * as no byte of another message came in since.  Not once a new head has
 * begun (a server that rejects it before it completes: nginx's 400 for a
 * header line over its buffers) or the scanner gave up on bytes read
 * after it (a request line or head it does not take, which the server
 * may still serve): the write answers that message, and the answered
 * request's context must not come back with it.  A scanner stopped by the
 * shim itself leaves it as it was, and so does HTTP/2 on a connection
 * followed as such (its current request is a stream's: preload/conn.c,
 * "HTTP/2"), or on fd while an nghttp2 server session holds it for the
 * connection it was upgraded from, until its first frame: the session
 * takes stream 1 from the upgrade request, whose response a server may
 * send after the client's preface and before more of it
 * (hooks/hook-nghttp2.c, nh_upgraded()).  Not the preface after any other
 * "Upgrade: h2c" head that is not followed as HTTP/2 (preload/conn.c,
 * "Upgrade: h2c"), in a process with a session or not: its streams are
 * not that request's, and nothing tells whose they are. */
static bool
sk_write_continues(int fd, const struct ctxshim_conn *c)
{
	enum http_scan_give_up why;

	if (http_scan_at_start(&c->scan) || !ctxshim_conn_answered(c))
		return true;
	if (http_scan_in_head(&c->scan))
		return false;
	if (!http_scan_gave_up(&c->scan))
		return true;
	why = http_scan_give_up_reason(&c->scan);
	if (why == HTTP_SCAN_GIVE_UP_HTTP2)
		return ctxshim_conn_h2(c) ||
		       ctxshim_conn_h2_candidate(
			       fd, atomic_load_explicit(&c->gen, memory_order_relaxed));
	return why != HTTP_SCAN_GIVE_UP_NOT_HTTP &&
	       why != HTTP_SCAN_GIVE_UP_MALFORMED && why != HTTP_SCAN_GIVE_UP_TOO_LONG;
}

/* Before I/O on tracked fd: the thread is now working on this connection. */
static void
sk_follow(int fd, struct ctxshim_conn *c, bool is_write)
{
	uint8_t f = atomic_load_explicit(&c->flags, memory_order_relaxed);
	int own;
	bool same, live;

	/* Writing continues a response even after its first write (unless
	 * another message came in since: sk_write_continues()); reading
	 * after the response means waiting for the next request. */
	if (is_write)
		live = (f & (CONN_F_REQ | CONN_F_HAS_CTX)) ==
			       (CONN_F_REQ | CONN_F_HAS_CTX) &&
		       sk_write_continues(fd, c);
	else
		live = ctxshim_conn_live(c);
	if (!live) {
		if (!sk_self.fdp1)
			return; /* we publish nothing: nothing to clear */
		if (!ctxshim_events_on()) {
			sk_drop_quiet();
			return;
		}
		own = sk_owned_fd();
		same = own == fd &&
		       sk_self.gen ==
			       atomic_load_explicit(&c->gen, memory_order_relaxed);
		if (own >= 0)
			sk_drop(own, same ? "response-sent" : "other-conn");
		return;
	}
	own = sk_owned_fd();
	same = own == fd &&
	       sk_self.gen == atomic_load_explicit(&c->gen, memory_order_relaxed);
	if (!same) {
		/* A copy of a connection always looks live (conn.h,
		 * CONN_F_LINK), so its I/O comes this way. */
		if (__builtin_expect(f & CONN_F_LINK, 0)) {
			sk_follow_link(fd, c, is_write);
			return;
		}
		sk_publish(fd, c, own >= 0 ? CTXSHIM_EV_SWITCH : CTXSHIM_EV_ATTACH,
			   is_write ? "write" : "read");
		/* Taken up again by a read: the thread had let it go (a
		 * wait, another connection), so its handler is not what runs
		 * on what this read brings (sk_h2_feed()). */
		if (!is_write)
			sk_self.rd_span = sk_self.span;
	}
}

/* I/O on a copy of a connection (fd, slot c: preload/conn.c, "Copies") is
 * I/O on the connection, whose state the ring's leader holds.  A write
 * is followed as a write on the leader (the thread keeps, or gets back,
 * the leader's request context while it writes the response through the
 * copy); sk_out() then marks the leader's request answered
 * (sk_out_next()).  A read makes the copy the leader -- the connection's
 * state moves to the descriptor its bytes are read through, so that the
 * scanner sees them in order with no look-up on the read path -- and is
 * then followed as any read of a connection.  A copy without a leader (a
 * ring broken by a close the hooks did not see, or its leader went TLS)
 * does nothing. */
static __attribute__((noinline, cold)) void
sk_follow_link(int fd, struct ctxshim_conn *c, bool is_write)
{
	struct ctxshim_conn *l;
	int lfd;
	uint32_t lgen;

	/* Not a copy: an upstream, which looks like one to every path
	 * before this. */
	if (!(atomic_load_explicit(&c->flags, memory_order_relaxed) & CONN_F_TRACKED)) {
		sk_up_follow(fd, is_write);
		return;
	}
	lfd = ctxshim_conn_leader(fd, &l);
	if (lfd < 0)
		return;
	if (is_write) {
		sk_follow(lfd, l, true);
		return;
	}
	lgen = atomic_load_explicit(&l->gen, memory_order_relaxed);
	if (!ctxshim_conn_lead(fd))
		return;
	/* What this thread published under the leader's fd is the copy's
	 * now (the same request). */
	if (sk_self.fdp1 == lfd + 1 && sk_self.gen == lgen) {
		sk_self.fdp1 = fd + 1;
		sk_self.gen = atomic_load_explicit(&c->gen, memory_order_relaxed);
		sk_self.c = c;
	}
	sk_follow(fd, c, false);
}

static inline bool sk_publishes_slot(const struct ctxshim_conn *c);

/* A read of connection fd (before the real call, so also one that finds
 * nothing to read): the connection a coroutine that suspends next waits
 * for (hook_socket_rd_take()).  One store (B1). */
static inline __attribute__((always_inline)) void
sk_reading(int fd)
{
	sk_self.rdp1 = fd + 1;
}

/* A write of the response of the request this thread publishes: the
 * thread is done with it, and the next head it reads is one request
 * since ("Handlers run after the next wait", at the waits).  Plain
 * stores of hints (B1i: three instructions per response write). */
static inline __attribute__((always_inline)) void
sk_answering(void)
{
	ctxshim_self.sk_pending = 0;
	sk_self.mark = ctxshim_self.span_rng.state;
}

/* Does this thread publish the context of c's current request (fd's),
 * which a write continues (sk_follow() would do nothing)? */
static inline bool
sk_publishes(int fd, const struct ctxshim_conn *c)
{
	return sk_self.fdp1 == fd + 1 && sk_publishes_slot(c);
}

/* sk_publishes() past its fd test. */
static inline bool
sk_publishes_slot(const struct ctxshim_conn *c)
{
	uint8_t f = atomic_load_explicit(&c->flags, memory_order_relaxed);
	const struct ctxshim_ctx *cur;

	if ((f & (CONN_F_REQ | CONN_F_HAS_CTX)) != (CONN_F_REQ | CONN_F_HAS_CTX) ||
	    sk_self.gen != atomic_load_explicit(&c->gen, memory_order_relaxed))
		return false;
	/* Still the context we published (thread-ctx.h, sk_owned): then its
	 * span-id is the one we kept.  Read at its TLS offset, as sk_self. */
	if (__builtin_expect(ctxshim_self.sk_owned, 1))
		return true;
	cur = ctxshim_current();
	return cur && sk_span(cur) == sk_self.span;
}

/* Entry of a hook on tracked connection fd (slot c, NULL if gone).
 * Returns the slot to finish with, or NULL (nested in a signal handler,
 * or the slot vanished). */
static inline __attribute__((always_inline)) struct ctxshim_conn *
sk_enter_slot(int fd, struct ctxshim_conn *c, bool is_write)
{
	int saved_errno;

	if (!is_write)
		sk_reading(fd);
	/* The usual calls change nothing: the response's writes on the
	 * connection whose context this thread publishes, and the read of
	 * an event loop's next request after it went idle.  Those checks
	 * only read, so they need neither the busy flag nor errno saved
	 * (B1i: ~60 instructions of every write). */
	if (is_write) {
		if (sk_self.busy || !c)
			return NULL;
		if (sk_publishes(fd, c)) {
			sk_answering();
			return c;
		}
	} else if (!c) {
		return NULL;
	} else if (ctxshim_conn_live(c)) {
		if (sk_self.busy)
			return NULL;
	} else {
		/* The read of an event loop's next request: its wait cleared
		 * what the thread published, so fdp1 and busy are both 0, one
		 * compare (B1). */
		if (__builtin_expect(sk_self.fdp1_busy == 0, 1))
			return c;
		if (sk_self.busy)
			return NULL;
		if (!sk_self.fdp1)
			return c;
		if (!ctxshim_events_on()) {
			/* sk_follow()'s usual read, inline: waiting for the
			 * next request on a connection (B4).  The check-and-
			 * clear is plain memory: errno stays as it is. */
			sk_busy(true);
			sk_drop_quiet();
			sk_busy(false);
			return c;
		}
	}
	saved_errno = errno;
	sk_busy(true);
	sk_follow(fd, c, is_write);
	sk_busy(false);
	errno = saved_errno;
	return c;
}

/* Inline in each hook: the call and its register saves were ~20
 * instructions of every tracked read (B4). */
static inline __attribute__((always_inline)) struct ctxshim_conn *
sk_enter(int fd, bool is_write)
{
	/* The read hooks run only for an fd whose hot byte said
	 * CONN_HOT_SCAN or CONN_HOT_UP, which bounded it (B1: 2
	 * instructions). */
	return sk_enter_slot(fd,
			     is_write ? ctxshim_conn_get(fd) : ctxshim_conn_get_hot(fd),
			     is_write);
}

struct sk_in {
	int fd;
	int became;   /* CONN_FEED_* */
	bool gave_up; /* the scanner gave up during this read */
	/* HTTP/2: new requests so far in this read (ctxshim_conn_h2_feed()),
	 * with SK_H2_UNSET before its first feed. */
	unsigned n_h2;
	struct ctxshim_conn *c;
	/* With CONN_FEED_FULL: the thread's publication buffer holding the
	 * new request's context (conn.h), published by sk_request(). */
	struct ctxshim_ctx *full;
};

/* After a new request became current on c. */
static void
sk_request(struct sk_in *in)
{
	bool live = ctxshim_conn_live(in->c);

	if (in->full && (!live || in->became != CONN_FEED_FULL)) {
		/* Not the context to publish (a write on another thread
		 * answered it already): release the thread's buffer before
		 * anything else here attaches or detaches. */
		ctxshim_build_cancel();
		in->full = NULL;
	}
	if (!live) {
		int own = sk_owned_fd();

		/* A request we could not capture (oversized head, pool
		 * exhausted), several HTTP/2 requests at once, or an HTTP/2
		 * connection no longer followed: whatever we published is not
		 * its context.  It drew no span-id, so the heads are not
		 * counted from here: its handler may run after the next
		 * zero-timeout wait, and a head read after it must not be kept
		 * for that ("Handlers run after the next wait"). */
		const char *why = "request-no-ctx";

		sk_self.mark = CTXSHIM_SK_MARK_MIXED;
		if (in->became == CONN_FEED_SEVERAL)
			why = "h2-several";
		else if (in->became == CONN_FEED_H2_STOP)
			why = "h2-stop";
		if (own >= 0)
			sk_drop(own, why);
	} else if (in->became == CONN_FEED_FULL) {
		/* Built a moment ago where it is published: no copy. */
		ctxshim_build_publish(in->full);
		sk_attached(in->fd, in->c, in->full, CTXSHIM_EV_ATTACH, "request");
		in->full = NULL;
	} else {
		sk_publish(in->fd, in->c, CTXSHIM_EV_ATTACH, "request");
	}
}

static bool sk_fcgi_begin(int fd, struct ctxshim_conn *c, const void *buf, size_t len);
static bool sk_h2_begin(int fd, struct ctxshim_conn *c, const void *buf, size_t len);
static int sk_h2_feed(int fd,
		      struct ctxshim_conn *c,
		      const void *buf,
		      size_t len,
		      struct ctxshim_ctx **full,
		      unsigned *n_new);

/* n_new of struct sk_in before the read's first HTTP/2 feed. */
#define SK_H2_UNSET (~0u)

/* The bytes the HTTP scanner gave up on, or all of a connection followed
 * as FastCGI or HTTP/2 (sk_fcgi_begin(), sk_h2_begin()): to that
 * protocol's feed.  Off the HTTP path: only such reads come here. */
static __attribute__((noinline, cold)) int
sk_in_framed(struct sk_in *in, const void *buf, size_t len)
{
	if (ctxshim_conn_fcgi(in->c))
		return ctxshim_conn_fcgi_feed(in->c, buf, len, &in->full);
	return sk_h2_feed(in->fd, in->c, buf, len, &in->full, &in->n_h2);
}

static inline void
sk_in_bytes(struct sk_in *in, const void *buf, size_t len)
{
	int r;

	if (!len)
		return;
	if (!http_scan_gave_up(&in->c->scan)) {
		r = ctxshim_conn_feed(in->c, buf, len, &in->full);
		if (__builtin_expect(http_scan_gave_up(&in->c->scan), 0) &&
		    (sk_fcgi_begin(in->fd, in->c, buf, len) ||
		     sk_h2_begin(in->fd, in->c, buf, len))) {
			int f = sk_in_framed(in, buf, len);

			if (f != CONN_FEED_NONE)
				r = f;
		} else if (http_scan_gave_up(&in->c->scan)) {
			in->gave_up = true;
		}
	} else if (__builtin_expect(ctxshim_conn_framed(in->c), 0)) {
		/* FastCGI or HTTP/2 (sk_fcgi_begin(), sk_h2_begin()) */
		r = sk_in_framed(in, buf, len);
	} else {
		return;
	}
	if (r != CONN_FEED_NONE)
		in->became = r;
}

static void
sk_in_iov(struct sk_in *in, const struct iovec *iov, size_t iovcnt, size_t total)
{
	size_t i;

	for (i = 0; i < iovcnt && total; i++) {
		size_t len = iov[i].iov_len < total ? iov[i].iov_len : total;

		sk_in_bytes(in, iov[i].iov_base, len);
		total -= len;
	}
}

/* Hooks call sk_in_begin() after the real call returned r > 0 bytes (and
 * only when they will feed them), feed, then sk_in_end().  Neither saves
 * errno (~9 instructions of every request, B1i): nothing on the way sets
 * it -- the scanner and the request model are pure code, the connection
 * table and the thread's records are plain memory, and the few calls
 * that could (the first id draw's getrandom(), the thread's first
 * publication, the event log) keep errno themselves.  Inline: it returns
 * with the flag held, which its token says the hook's frame holds
 * (sk_busy()). */
static inline __attribute__((always_inline)) bool
sk_in_begin(struct sk_in *in, int fd, struct ctxshim_conn *c)
{
	if (!c || sk_self.busy)
		return false;
	sk_busy(true);
	in->fd = fd;
	in->c = c;
	in->became = CONN_FEED_NONE;
	in->gave_up = false;
	in->n_h2 = SK_H2_UNSET;
	in->full = NULL;
	return true;
}

/* The scanner gave up on a plain connection: if that was at a TLS
 * handshake record, hand the connection to the TLS hooks (see "TLS"
 * above), so that its ciphertext costs nothing more here.  If the
 * request model stopped it because a pipelined head found no room in
 * the queue (preload/conn.c, "Bound"), log it (reason "pipeline-full",
 * no context: the thread's is left as it was), as for "pool-full": the
 * connection is not followed from here on, which the user could not
 * tell from a client the shim does not understand. */
static __attribute__((noinline, cold)) void
sk_gave_up(struct sk_in *in)
{
	enum http_scan_give_up why = http_scan_give_up_reason(&in->c->scan);

	/* The caller's stop with CONN_F_OVERFLOW: only the queue's stop sets
	 * that flag on an HTTP/1 connection (an HTTP/2 one's stops clear
	 * it, a FastCGI one's never set it).  Only logged: the rest is as
	 * for any other give-up (an inherited connection is let go). */
	if (why == HTTP_SCAN_GIVE_UP_CALLER &&
	    (atomic_load_explicit(&in->c->flags, memory_order_relaxed) &
	     CONN_F_OVERFLOW))
		CTXSHIM_EVENT(CTXSHIM_EV_DETACH, in->fd, NULL, "pipeline-full");

	/* A client-side socket on stdin (preload/conn.c, "inherited
	 * connections"): no longer followed at all. */
	if (why != HTTP_SCAN_GIVE_UP_TLS && in->fd < CTXSHIM_CONN_VIRT_BASE &&
	    ctxshim_conn_inherited_give_up(in->fd, in->c))
		return;
	if (why != HTTP_SCAN_GIVE_UP_TLS ||
	    (atomic_load_explicit(&in->c->flags, memory_order_relaxed) & CONN_F_TLS) ||
	    in->fd >= CTXSHIM_CONN_VIRT_BASE)
		return;
	(void)ctxshim_conn_tls(in->fd);
}

/* Inline in each read hook, like sk_enter(): out of line it cost ~9
 * instructions a request (B4). */
static inline __attribute__((always_inline)) void
sk_in_end(struct sk_in *in)
{
	if (in->became == CONN_FEED_FULL && ctxshim_conn_live(in->c)) {
		/* The usual new request, built where it is published: inline
		 * here, no copy (B4).  sk_request() handles the rest. */
		ctxshim_build_publish(in->full);
		sk_attached(in->fd, in->c, in->full, CTXSHIM_EV_ATTACH, "request");
	} else if (in->became != CONN_FEED_NONE) {
		sk_request(in);
	}
	if (__builtin_expect(in->gave_up, 0))
		sk_gave_up(in);
	sk_busy(false);
}

/* MSG_PEEK: the bytes will be read again.  MSG_OOB (TCP's urgent byte,
 * taken out of the stream unless SO_OOBINLINE, where MSG_OOB fails) and
 * MSG_ERRQUEUE (a message of the socket's error queue): not stream bytes,
 * feeding them would shift the head/body boundary.  MSG_TRUNC on a stream
 * socket: they were discarded unseen, so the scanner cannot follow any
 * more. */
static __attribute__((noinline, cold)) void
sk_in_flags_other(struct ctxshim_conn *c, int flags)
{
	if (flags & (MSG_PEEK | MSG_OOB | MSG_ERRQUEUE))
		return;
	if (c && !sk_self.busy)
		ctxshim_conn_lost(c);
}

/* The usual flags (none of those) in one test (B1). */
#define SK_IN_FLAGS_OTHER (MSG_PEEK | MSG_OOB | MSG_ERRQUEUE | MSG_TRUNC)
static inline bool
sk_in_flags_feed(struct ctxshim_conn *c, int flags)
{
	if (__builtin_expect(!(flags & SK_IN_FLAGS_OTHER), 1))
		return true;
	sk_in_flags_other(c, flags);
	return false;
}

/* What ctxshim_conn_fcgi_start() or ctxshim_conn_h2_start() returned for
 * connection fd: is it followed now?  One not followed for want of a pool
 * entry is logged (reason "pool-full", no context: the thread's is left
 * as it was), so that a server with more idle HTTP/2 or FastCGI
 * connections than the pool takes can be told from one the shim does
 * not understand. */
static __attribute__((cold)) bool
sk_framed_started(int fd, int r)
{
	if (r == CONN_START_POOL_FULL)
		CTXSHIM_EVENT(CTXSHIM_EV_DETACH, fd, NULL, "pool-full");
	return r == CONN_START_OK;
}

/* The scanner of c gave up in this read of buf[0, len): if that was at
 * the connection's first byte (no request seen, no head byte counted),
 * on the start of a FastCGI stream -- version 1, FCGI_BEGIN_REQUEST --
 * follow it as FastCGI from now on (preload/conn.c, "FastCGI"): php-fpm
 * reads its records from the socket itself.  Off the HTTP path: only a
 * read that made the scanner give up comes here. */
static __attribute__((noinline, cold)) bool
sk_fcgi_begin(int fd, struct ctxshim_conn *c, const void *buf, size_t len)
{
	const uint8_t *b = buf;
	uint8_t f = atomic_load_explicit(&c->flags, memory_order_relaxed);

	if (http_scan_give_up_reason(&c->scan) != HTTP_SCAN_GIVE_UP_NOT_HTTP ||
	    c->scan.head_bytes != 0 ||
	    (f & (CONN_F_REQ | CONN_F_CLAIMED | CONN_F_TLS | CONN_F_LINK)) ||
	    fd >= CTXSHIM_CONN_VIRT_BASE || len == 0 || b[0] != 1 ||
	    (len > 1 && b[1] != 1))
		return false;
	return sk_framed_started(fd, ctxshim_conn_fcgi_start(c));
}

/* The scanner of c gave up in this read of buf[0, len): if that was on
 * the HTTP/2 connection preface at the connection's first request (no
 * request seen, and the preface's "PRI" its first bytes), follow it as
 * HTTP/2 from now on (preload/conn.c, "HTTP/2"): a server with HTTP/2
 * code of its own, in clear or over TLS (its plaintext, from the TLS
 * hooks: the usual case), not one a library hook handles.  The scanner
 * gives up at the byte after "PRI" (this read's), so the bytes of the
 * preface read before this one are the place of buf[0] in "PRI ". */
static __attribute__((noinline, cold)) bool
sk_h2_begin(int fd, struct ctxshim_conn *c, const void *buf, size_t len)
{
	static const char pri[] = "PRI ";
	const uint8_t *b = buf;
	uint8_t f = atomic_load_explicit(&c->flags, memory_order_relaxed);
	unsigned seen;

	(void)fd;
	if (http_scan_give_up_reason(&c->scan) != HTTP_SCAN_GIVE_UP_HTTP2 ||
	    c->scan.head_bytes != 3 ||
	    (f & (CONN_F_REQ | CONN_F_CLAIMED | CONN_F_LINK)) || len == 0)
		return false;
	for (seen = 0; seen < 4 && b[0] != (uint8_t)pri[seen]; seen++)
		;
	if (seen == 4)
		return false;
	return sk_framed_started(fd, ctxshim_conn_h2_start(c, seen));
}

/* ctxshim_conn_h2_feed() for a read of c through fd; *n_new starts, at
 * the read's first feed, at 1 when the thread still shows c's current
 * request, unanswered: it read on without a wait or a write, and its
 * server handles what it read together (conn.c, "HTTP/2").  Not when
 * this read took that request up again (sk_follow(), rd_span): the
 * thread let it go since (a wait, another connection's I/O), its handler
 * waits for something else (an upstream's answer), and a request this
 * read brings is the one whose handler runs now. */
static inline int
sk_h2_feed(int fd,
	   struct ctxshim_conn *c,
	   const void *buf,
	   size_t len,
	   struct ctxshim_ctx **full,
	   unsigned *n_new)
{
	uint32_t gen = atomic_load_explicit(&c->gen, memory_order_relaxed);

	if (*n_new == SK_H2_UNSET)
		*n_new = sk_owned_fd() == fd && sk_self.gen == gen &&
			 ctxshim_conn_live(c) && sk_self.rd_span != sk_self.span;
	return ctxshim_conn_h2_feed(c, buf, len, full, n_new);
}

/* The end of a read past its usual one (sk_in_rest(), sk_in_cap()): the
 * request it made current (became, full, n_h2 as in struct sk_in)
 * published, busy released.  The struct is made only for the calls that
 * take one: sk_in_cap()'s is then not cleared and written on every read,
 * nor read back after the feed (bench/h2-insns.sh). */
static inline __attribute__((always_inline)) void
sk_in_rest_end(int fd,
	       struct ctxshim_conn *c,
	       int became,
	       struct ctxshim_ctx *full,
	       unsigned n_h2)
{
	if (became == CONN_FEED_FULL && ctxshim_conn_live(c)) {
		ctxshim_build_publish(full);
		sk_attached(fd, c, full, CTXSHIM_EV_ATTACH, "request");
	} else if (became != CONN_FEED_NONE) {
		struct sk_in in = {
			.fd = fd, .became = became, .n_h2 = n_h2, .c = c, .full = full};

		sk_request(&in);
	}
	if (__builtin_expect(http_scan_gave_up(&c->scan), 0) &&
	    !ctxshim_conn_framed(c)) {
		struct sk_in in = {.fd = fd, .c = c, .n_h2 = n_h2};

		sk_gave_up(&in);
	}
	sk_busy(false);
}

/* sk_in_buf() past its usual read, busy held (released here): full is the
 * thread's buffer with the head that ctxshim_conn_feed_whole() took
 * (then no longer live: a write on another thread answered it already),
 * or NULL, and then the bytes are fed: to the feed loop if that usual
 * read was tried (tried), else to ctxshim_conn_feed(), which tries it. */
static __attribute__((noinline)) void
sk_in_rest(int fd,
	   struct ctxshim_conn *c,
	   const void *buf,
	   size_t len,
	   struct ctxshim_ctx *full,
	   bool tried)
{
	struct sk_in in = {.fd = fd, .c = c, .full = full, .n_h2 = SK_H2_UNSET};

	/* A scanner that gave up before this read feeds nothing, unless it
	 * gave the connection over to FastCGI or HTTP/2. */
	if (!full && http_scan_gave_up(&c->scan)) {
		if (__builtin_expect(!ctxshim_conn_framed(c), 1)) {
			sk_busy(false);
			return;
		}
		in.became = sk_in_framed(&in, buf, len);
	} else if (full) {
		in.became = CONN_FEED_FULL;
	} else {
		if (tried)
			in.became = ctxshim_conn_feed_loop(c, buf, len, &in.full);
		else
			in.became = ctxshim_conn_feed(c, buf, len, &in.full);
		if (__builtin_expect(http_scan_gave_up(&c->scan), 0) &&
		    (sk_fcgi_begin(fd, c, buf, len) || sk_h2_begin(fd, c, buf, len))) {
			int f = sk_in_framed(&in, buf, len);

			if (f != CONN_FEED_NONE)
				in.became = f;
		}
	}
	sk_in_rest_end(fd, c, in.became, in.full, in.n_h2);
}

/* sk_in_buf() of a connection that holds a pool entry (c->cap), busy held
 * (released here), where the usual read does not apply: one followed as
 * HTTP/2 (every read of nginx's HTTP/2 connections) feeds its scanner
 * here, as sk_in_rest() would through sk_in_framed() and its tests of the
 * other kinds; any other goes on to sk_in_rest().  Inline in the read
 * hooks (sk_recv_any(), sk_read_any()), which have saved the registers it
 * needs already: out of line it saved five of its own (bench/h2-insns.sh:
 * 22 instructions of every HTTP/2 request with sk_attached()). */
static inline __attribute__((always_inline)) void
sk_in_cap(int fd, struct ctxshim_conn *c, const void *buf, size_t len)
{
	struct ctxshim_ctx *full = NULL;
	unsigned n_h2 = SK_H2_UNSET;
	int became;

	if (!ctxshim_conn_h2(c)) {
		sk_in_rest(fd, c, buf, len, NULL, true);
		return;
	}
	became = sk_h2_feed(fd, c, buf, len, &full, &n_h2);
	sk_in_rest_end(fd, c, became, full, n_h2);
}

/* After the usual read's build (conn-whole.h; the thread busy): the new
 * request, built where it is published (B4), if it is still live: the
 * flags it made current cannot have changed meanwhile (no other writer of
 * REQ and HAS_CTX while a head is read on the connection: conn.h), but
 * another thread may have written a response already (a 408 on idle
 * timeout) and so answered it.  The scanner did not give up on a head
 * taken whole.  Anything else: sk_in_rest(). */
static inline __attribute__((always_inline)) void
sk_in_whole_end(int fd,
		struct ctxshim_conn *c,
		const void *buf,
		size_t r,
		struct ctxshim_ctx *full)
{
	if (__builtin_expect(full != NULL, 1) &&
	    __builtin_expect(!ctxshim_conn_answered(c), 1)) {
		ctxshim_build_publish(full);
		sk_attached(fd, c, full, CTXSHIM_EV_ATTACH, "request");
		sk_busy(false);
		return;
	}
	sk_in_rest(fd, c, buf, r, full, true);
}

/* sk_in_begin(), sk_in_bytes() and sk_in_end() for one buffer, with the
 * state in registers (struct sk_in only on the rare paths): a scanner that
 * gave up before this read feeds nothing, so it is not even marked busy;
 * one that gives up in it has given up after.  c is sk_enter()'s: not
 * NULL means the thread was not busy then, and the real call between
 * cannot leave it busy.  whole: the usual read (conn-whole.h) inline, in
 * the hooks that nginx-like servers call for every request (B1); the
 * others call ctxshim_conn_feed(), which has it out of line. */
static inline __attribute__((always_inline)) void
sk_in_buf(int fd,
	  struct ctxshim_conn *c,
	  const void *buf,
	  ssize_t r,
	  int flags,
	  bool whole)
{
	if (r <= 0 || !sk_in_flags_feed(c, flags) || !c)
		return;
	if (!whole) {
		if (http_scan_gave_up(&c->scan) && !ctxshim_conn_framed(c))
			return;
		sk_busy(true);
		sk_in_rest(fd, c, buf, (size_t)r, NULL, false);
		return;
	}
	/* A scanner that gave up is not at a message start: the usual read
	 * tests that, and sk_in_rest() the rest.  Nor is a connection that
	 * holds a pool entry (a head in progress, FastCGI, HTTP/2), which
	 * ctxshim_conn_feed_whole() tests first: tested here, so that an
	 * HTTP/2 connection's read goes straight to its feed (sk_in_cap()). */
	sk_busy(true);
	if (__builtin_expect(c->cap != 0, 0)) {
		sk_in_cap(fd, c, buf, (size_t)r);
		return;
	}
	sk_in_whole_end(fd, c, buf, (size_t)r,
			ctxshim_conn_feed_whole(c, buf, (size_t)r));
}

/* A response write made c's next pipelined request current: the server
 * now works on it.  Or fd is a copy of a connection (c->flags has
 * CONN_F_LINK, ctxshim_conn_responded() leaves it to us): the write
 * answers the request of the ring's leader (sk_follow_link()), whose
 * next pipelined request may become current then. */
static __attribute__((noinline, cold)) void
sk_out_next(int fd,
	    struct ctxshim_conn *c,
	    const void *head,
	    size_t head_len,
	    size_t written)
{
	int saved_errno = errno;

	if (atomic_load_explicit(&c->flags, memory_order_relaxed) & CONN_F_LINK) {
		uint32_t gen;

		fd = fd < CTXSHIM_CONN_VIRT_BASE ? ctxshim_conn_leader(fd, &c) : -1;
		if (fd < 0) {
			errno = saved_errno;
			return;
		}
		/* The leader's fd may be closed by another thread meanwhile
		 * (conn.c, "Copies"), its number even accepted again: publish
		 * nothing from a slot that is not this connection's any more. */
		gen = atomic_load_explicit(&c->gen, memory_order_relaxed);
		if (!ctxshim_conn_responded(c, head, head_len, written) ||
		    atomic_load_explicit(&c->gen, memory_order_relaxed) != gen ||
		    (atomic_load_explicit(&c->flags, memory_order_relaxed) &
		     CONN_F_LINK)) {
			errno = saved_errno;
			return;
		}
	}
	/* A read through a copy may have moved the state away from c
	 * meanwhile (conn.c, "Copies"): a copy's context is never published. */
	if (ctxshim_conn_live(c) &&
	    !(atomic_load_explicit(&c->flags, memory_order_relaxed) & CONN_F_LINK))
		sk_publish(fd, c,
			   sk_owned_fd() >= 0 ? CTXSHIM_EV_SWITCH : CTXSHIM_EV_ATTACH,
			   "pipelined");
	else if (sk_owned_fd() >= 0)
		sk_drop(fd, "pipelined-no-ctx");
	errno = saved_errno;
}

/* A write whose first response made c's next pipelined request current
 * (sk_out_next()) may carry the responses of the requests queued after
 * it as well: a server that batches its output answers pipelined
 * requests with one call.  Taken for one response, it left the request
 * promoted by it unanswered, and every later request of the connection
 * was queued behind it and handled under the previous one's context.  So
 * the responses that follow in the bytes written (the first r of head,
 * len of them known) answer and promote in turn, as long as each one's
 * end can be told (http_response_len()) and the next starts with a status line;
 * at most as many as can be queued, and one of the rare writes that
 * promote (nothing on the usual path). */
static __attribute__((noinline, cold)) void
sk_out_more(int fd, struct ctxshim_conn *c, const void *head, size_t len, ssize_t r)
{
	const uint8_t *h = head;
	size_t lim = (size_t)r < len ? (size_t)r : len, off = 0, k;
	int n, kind;

	if (!h)
		return;
	for (n = 0; n < 32; n++) {
		k = http_response_len(h + off, lim - off);
		if (!k || k >= lim - off)
			return;
		off += k;
		kind = ctxshim_conn_status_kind(h + off, lim - off);
		if (kind == 0)
			return;
		if (kind == 1)
			continue; /* an interim response of the request now current */
		if (!ctxshim_conn_responded(c, h + off, lim - off, (size_t)r - off))
			return;
		sk_out_next(fd, c, h + off, lim - off, (size_t)r - off);
	}
}

/* sk_out() of a write that returned r > 0 on slot c, by a caller that saw
 * this thread not busy before its real call (a signal handler that ran
 * during the call left it as it was). */
static inline __attribute__((always_inline)) void
sk_out_unbusy(int fd,
	      struct ctxshim_conn *c,
	      const void *head,
	      size_t head_len,
	      ssize_t r,
	      const struct iovec *iov,
	      size_t iovcnt)
{
	sk_busy(true);
	/* ctxshim_conn_responded(), the iovecs passed on past its usual case
	 * (an HTTP/2 connection walks all the bytes written). */
	if (!ctxshim_conn_responded_usual(c, head, head_len) &&
	    ctxshim_conn_responded_iov(c, head, head_len, (size_t)r, iov, iovcnt)) {
		sk_out_next(fd, c, head, head_len, (size_t)r);
		sk_out_more(fd, c, head, head_len, r);
	}
	sk_busy(false);
}

static inline __attribute__((always_inline)) void
sk_out_c(int fd,
	 struct ctxshim_conn *c,
	 const void *head,
	 size_t head_len,
	 ssize_t r,
	 const struct iovec *iov,
	 size_t iovcnt)
{
	if (sk_self.busy)
		return;
	sk_out_unbusy(fd, c, head, head_len, r, iov, iovcnt);
}

/* The bytes ctxshim_conn_status_kind() looks at: "HTTP/1.x NNN". */
#define SK_HEAD_MIN 12

/* A write of r bytes that starts with an interim response (100 Continue,
 * 103 Early Hints: ctxshim_conn_interim()), len bytes of it at h: where
 * the bytes after its interim responses start, if the write goes on past
 * them -- a server that buffers its output writes "HTTP/1.1 100
 * Continue\r\n\r\n" and the final response in one call, and that call
 * answers the request: taken for the interim response alone, it left the
 * request unanswered, the connection's next request was queued behind it
 * as if pipelined, and the thread showed the previous request's context
 * while it handled each later one.  0 when the write ends within them (a
 * plain interim response); len when they end exactly at len and the write
 * goes on (the next iovec).  Only bytes the kernel has read (the first r)
 * are looked at. */
static __attribute__((noinline, cold)) size_t
sk_interim_end(const uint8_t *h, size_t len, size_t r)
{
	size_t lim = len < r ? len : r, off = 0, i;

	while (lim - off >= SK_HEAD_MIN && ctxshim_conn_interim(h + off, lim - off)) {
		/* The blank line that ends this interim head (LF LF or LF CR
		 * LF, as the scanner takes line ends). */
		for (i = off; i + 1 < lim; i++)
			if (h[i] == '\n' &&
			    (h[i + 1] == '\n' ||
			     (h[i + 1] == '\r' && i + 2 < lim && h[i + 2] == '\n')))
				break;
		if (i + 1 >= lim)
			break; /* not within the bytes written: interim */
		i += h[i + 1] == '\n' ? 2 : 3;
		if (i >= r)
			break; /* the write ends with it: interim */
		off = i;
		if (off == lim)
			break; /* more in the next iovec */
	}
	return off;
}

/* A write of r bytes on c that starts with a 101 (Switching Protocols):
 * one that switches to HTTP/2 ("Upgrade: h2c") makes c followed as
 * HTTP/2 from there (preload/conn.c, "Upgrade: h2c"), and its request
 * stays unanswered until stream 1's HEADERS; any other is a response as
 * before (it answers the request). */
static __attribute__((noinline, cold)) void
sk_out_switched(int fd,
		struct ctxshim_conn *c,
		const void *head,
		size_t head_len,
		ssize_t r,
		const struct iovec *iov,
		size_t iovcnt)
{
	int k, saved_errno;

	if (sk_self.busy)
		return;
	sk_busy(true);
	k = ctxshim_conn_h2_upgrade(c, head, head_len, (size_t)r, iov, iovcnt);
	sk_busy(false);
	if (k == CONN_START_POOL_FULL) {
		/* The event log's write may set errno. */
		saved_errno = errno;
		(void)sk_framed_started(fd, k);
		errno = saved_errno;
	}
	if (k != CONN_START_OK)
		sk_out_unbusy(fd, c, head, head_len, r, iov, iovcnt);
}

/* After a write of r bytes on tracked fd; head/head_len: its first bytes.
 * Inline in each write hook, like sk_out_enter(): the response's write is
 * once per request (B1i).  ctxshim_conn_responded() leaves errno alone
 * (no system call); sk_out_next() keeps it.  A write that starts with an
 * interim response is judged by what follows it (sk_interim_end()). */
static inline __attribute__((always_inline)) void
sk_out_v(int fd,
	 struct ctxshim_conn *c,
	 const void *head,
	 size_t head_len,
	 ssize_t r,
	 const struct iovec *iov,
	 size_t iovcnt)
{
	if (!c || r <= 0)
		return;
	/* Only the bytes written are looked at: a short write of a buffer
	 * that runs past its mapping may have stopped at the fault (and the
	 * rest is no part of the stream).  head_len is the buffer's; the
	 * fast paths never get here with r < head_len on their usual case
	 * (r >= SK_HEAD_MIN, and they look at no more than that). */
	if (head_len > (size_t)r)
		head_len = (size_t)r;
	/* On a connection followed as HTTP/2 the bytes are frames: a write
	 * of a DATA payload (its 9-byte header written before) may start
	 * with "HTTP/1.1 100 ..." and is no interim response; stepped over
	 * as one, its bytes were lost to the frame walk, which went on out
	 * of step (the next response's HEADERS taken for payload). */
	if (__builtin_expect(ctxshim_conn_informational(head, head_len), 0) &&
	    !ctxshim_conn_h2(c)) {
		size_t k;

		if (!ctxshim_conn_interim(head, head_len)) {
			sk_out_switched(fd, c, head, head_len, r, iov, iovcnt);
			return;
		}
		k = sk_interim_end(head, head_len, (size_t)r);

		head = (const uint8_t *)head + k;
		head_len -= k;
		r -= (ssize_t)k;
		iov = NULL; /* an HTTP/1 response: the iovecs are not needed */
	}
	sk_out_c(fd, c, head, head_len, r, iov, iovcnt);
}

/* sk_out_v() of a write from one buffer (or none: sendfile, splice). */
static inline __attribute__((always_inline)) void
sk_out(int fd, struct ctxshim_conn *c, const void *head, size_t head_len, ssize_t r)
{
	sk_out_v(fd, c, head, head_len, r, NULL, 0);
}

/* The usual write of a response: on the connection whose context this
 * thread publishes (sk_publishes()), checked through the slot the thread
 * kept when it published (c = sk_self.c), without a table look-up, and
 * not busy (fdp1 and busy in one compare).  Then nothing is to be
 * followed, and after the real call the hook marks c's request answered
 * (sk_out_unbusy()); false: the hook takes its general path
 * (sk_out_enter(), sk_out()), which decides from the start.  Only reads,
 * so it needs no errno saved; on a claimed connection the general path
 * would only note the answer too. */
static inline __attribute__((always_inline)) bool
sk_out_fast(int fd, const struct ctxshim_conn *c)
{
	return sk_self.fdp1_busy == (uint32_t)(fd + 1) && sk_publishes_slot(c);
}

static inline __attribute__((always_inline)) struct ctxshim_conn *
sk_out_enter(int fd, uint8_t hot)
{
	/* Claimed connections: the library hook follows the work; we only
	 * note answers. */
	if (hot == CONN_HOT_CLAIMED)
		return sk_self.busy ? NULL : ctxshim_conn_get(fd);
	return sk_enter(fd, true);
}

/* sk_out_h2()'s test: a write to walk straight (apart from the busy
 * flag). */
static inline __attribute__((always_inline)) bool
sk_out_h2_is(const struct ctxshim_conn *c, const struct iovec *iov, size_t n)
{
	return n > 0 && iov[0].iov_len > 0 &&
	       *(const uint8_t *)iov[0].iov_base != 'H' && ctxshim_conn_h2(c) &&
	       !(atomic_load_explicit(&c->flags, memory_order_relaxed) & CONN_F_LINK);
}

/* sk_out_h2()'s general path: the walk lost (busy not held). */
static inline __attribute__((always_inline)) void
sk_out_h2_lost(
	int fd, struct ctxshim_conn *c, const struct iovec *iov, size_t n, ssize_t r)
{
	size_t max = (size_t)r < SK_HEAD_MIN ? (size_t)r : SK_HEAD_MIN;

	sk_out_c(fd, c, iov[0].iov_base, iov[0].iov_len < max ? iov[0].iov_len : max, r,
		 iov, n);
}

/* A write of r > 0 bytes (iov, n) that sk_out_iov_gather() gathers, on a
 * connection followed as HTTP/2 (every write of nginx's comes there, a
 * 9-byte frame header first), needs no head gathered when the write's
 * first byte is not 'H': neither an informational status line
 * (sk_out_v()) nor an interim response (ctxshim_conn_responded_usual())
 * starts there, and the write is walked through its iovecs
 * (conn_h2_written()), not through the head.  Then it is walked here,
 * straight (ctxshim_conn_h2_written()), and true is returned; if the
 * reader stopped following it meanwhile, it takes the general path
 * (sk_out_c()), where conn_responded() takes the head: one whose status
 * kind is 0, with no queue of heads to step into. */
static inline __attribute__((always_inline)) bool
sk_out_h2(int fd, struct ctxshim_conn *c, const struct iovec *iov, size_t n, ssize_t r)
{
	bool walked;

	if (!sk_out_h2_is(c, iov, n))
		return false;
	if (sk_self.busy)
		return true;
	sk_busy(true);
	walked = ctxshim_conn_h2_written(c, iov, n, (size_t)r);
	sk_busy(false);
	if (!walked)
		sk_out_h2_lost(fd, c, iov, n, r);
	return true;
}

/* sk_out() after a writev/sendmsg that wrote r > 0 bytes whose first iovec
 * is shorter than SK_HEAD_MIN: the first bytes are gathered across iovecs,
 * so that "HTTP/1.1 " + "100 Continue" is seen as the interim status it
 * is.  Only bytes the kernel has read (the first r) are looked at. */
static __attribute__((noinline, cold)) void
sk_out_iov_gather(
	int fd, struct ctxshim_conn *c, const struct iovec *iov, size_t n, ssize_t r)
{
	uint8_t tmp[SK_HEAD_MIN];
	size_t i, got = 0, max = (size_t)r < SK_HEAD_MIN ? (size_t)r : SK_HEAD_MIN;

	if (sk_out_h2(fd, c, iov, n, r))
		return;
	/* An iovec at a time, in two overlapping fixed-size copies (inline,
	 * no call). */
	for (i = 0; i < n && got < max; i++) {
		const uint8_t *b = iov[i].iov_base;
		size_t k = iov[i].iov_len < max - got ? iov[i].iov_len : max - got;

		if (k >= 8) {
			memcpy(tmp + got, b, 8);
			memcpy(tmp + got + k - 8, b + k - 8, 8);
		} else if (k >= 4) {
			memcpy(tmp + got, b, 4);
			memcpy(tmp + got + k - 4, b + k - 4, 4);
		} else if (k) {
			tmp[got] = b[0];
			tmp[got + k / 2] = b[k / 2];
			tmp[got + k - 1] = b[k - 1];
		}
		got += k;
	}
	sk_out_v(fd, c, got ? tmp : NULL, got, r, iov, n);
}

/* sk_out_iov() of a write whose first iovec (of at least SK_HEAD_MIN
 * bytes) starts with an interim response: an iovec that holds exactly
 * interim responses, with more written after it, is stepped over (the
 * final response is in the next ones: "HTTP/1.1 100 Continue\r\n\r\n" |
 * "HTTP/1.1 200 OK..."). */
static __attribute__((noinline, cold)) void
sk_out_iov_interim(
	int fd, struct ctxshim_conn *c, const struct iovec *iov, size_t n, ssize_t r)
{
	/* frames, not an interim response (sk_out_v()): every iovec walked */
	if (ctxshim_conn_h2(c)) {
		sk_out_v(fd, c, iov[0].iov_base, iov[0].iov_len, r, iov, n);
		return;
	}
	while (n > 1 && iov[0].iov_len >= SK_HEAD_MIN && (size_t)r > iov[0].iov_len &&
	       ctxshim_conn_interim(iov[0].iov_base, iov[0].iov_len) &&
	       sk_interim_end(iov[0].iov_base, iov[0].iov_len, (size_t)r) ==
		       iov[0].iov_len) {
		r -= (ssize_t)iov[0].iov_len;
		iov++;
		n--;
		while (n > 1 && iov[0].iov_len == 0) {
			iov++;
			n--;
		}
	}
	if (n > 0 && iov[0].iov_len >= SK_HEAD_MIN)
		sk_out(fd, c, iov[0].iov_base, iov[0].iov_len, r);
	else
		sk_out_iov_gather(fd, c, iov, n, r);
}

/* sk_out() after a writev/sendmsg of n iovecs that returned r.  The usual
 * response head is one iovec of at least SK_HEAD_MIN bytes: inline. */
static inline __attribute__((always_inline)) void
sk_out_iov(int fd, struct ctxshim_conn *c, const struct iovec *iov, size_t n, ssize_t r)
{
	if (!c || r <= 0)
		return;
	/* The interim test reads the first SK_HEAD_MIN bytes of iov[0]: all
	 * written only if r >= SK_HEAD_MIN too (which also means n > 0); a
	 * write cut shorter gathers what it wrote. */
	if (__builtin_expect((size_t)r >= SK_HEAD_MIN && iov[0].iov_len >= SK_HEAD_MIN,
			     1)) {
		if (__builtin_expect(
			    ctxshim_conn_interim(iov[0].iov_base, iov[0].iov_len), 0))
			sk_out_iov_interim(fd, c, iov, n, r);
		else
			sk_out_v(fd, c, iov[0].iov_base, iov[0].iov_len, r, iov, n);
	} else {
		sk_out_iov_gather(fd, c, iov, n, r);
	}
}

/* fd stops naming its connection.  The request this thread publishes
 * from it is dropped, unless the connection goes on through a copy
 * (dup() and the rest, preload/conn.c "Copies": the socket is not closed
 * yet) and the request is not answered: the thread then goes on showing
 * it from the copy, which may well answer it (a server that hands a copy
 * to stdio or to a child, closes the original and answers through the
 * copy). */
static void
sk_gone(int fd, const char *reason)
{
	int saved_errno = errno;
	struct ctxshim_conn *c;
	uint32_t gen;
	bool own, on;

	if (ctxshim_conn_hot(fd) == CONN_HOT_SHIM) {
		ctxshim_conn_release_shim_fd(fd);
		return;
	}
	/* Forgotten before the real close, so that an accept() in another
	 * thread that gets the same number finds a fresh slot. */
	if (sk_self.busy) {
		(void)ctxshim_conn_forget(fd);
		errno = saved_errno;
		return;
	}
	c = ctxshim_conn_get(fd);
	sk_busy(true);
	gen = c ? atomic_load_explicit(&c->gen, memory_order_relaxed) : 0;
	own = c && sk_owned_fd() == fd && sk_self.gen == gen;
	if (!own && ctxshim_conn_hot(fd) == CONN_HOT_UP)
		sk_up_closed(fd);
	/* Followed only when a copy carries the connection on: the usual
	 * close, of its last descriptor, has nowhere to follow it to, and
	 * the look (ctxshim_conn_holder()) cost it 60 instructions. */
	on = ctxshim_conn_forget(fd);
	if (own && !(on && sk_req_follow(fd, gen)))
		sk_drop(fd, reason);
	sk_busy(false);
	errno = saved_errno;
}

/* The first fd from fd to hi with a connection slot in use (its hot byte
 * set), or -1.  Chunks never mapped hold no connection: skipped whole. */
static long
sk_range_next(unsigned fd, unsigned hi)
{
	unsigned max = __atomic_load_n(&ctxshim_conn_tab.max_fds, __ATOMIC_ACQUIRE);

	if (!max)
		return -1;
	if (hi >= max)
		hi = max - 1;
	while (fd <= hi) {
		if (!atomic_load_explicit(
			    &ctxshim_conn_tab.chunks[fd >> CTXSHIM_CONN_CHUNK_SHIFT],
			    memory_order_acquire)) {
			fd = (fd | (CTXSHIM_CONN_CHUNK - 1)) + 1;
			continue;
		}
		if (ctxshim_conn_hot((int)fd))
			return fd;
		fd++;
	}
	return -1;
}

/* Is one of the shim's own fds in [lo, hi]?  They sit in a chunk never
 * mapped for connections (sk_range_next() skips it). */
static bool
sk_range_shim(unsigned lo, unsigned hi)
{
	int ev = ctxshim_events_fd, log = ctxshim_log_fd;

	return (ev >= 0 && (unsigned)ev >= lo && (unsigned)ev <= hi) ||
	       (log >= 0 && (unsigned)log >= lo && (unsigned)log <= hi);
}

static void
sk_gone_range(unsigned lo, unsigned hi, const char *reason)
{
	int ev = ctxshim_events_fd;
	long fd;

	if (ev >= 0 && (unsigned)ev >= lo && (unsigned)ev <= hi)
		ctxshim_conn_release_shim_fd(ev);
	ev = ctxshim_log_fd;
	if (ev >= 0 && (unsigned)ev >= lo && (unsigned)ev <= hi)
		ctxshim_conn_release_shim_fd(ev);
	for (fd = sk_range_next(lo, hi); fd >= 0;
	     fd = sk_range_next((unsigned)fd + 1, hi))
		sk_gone((int)fd, reason);
}

/* sk_idle() with the event log on: it needs to know whose context it
 * was. */
static __attribute__((noinline, cold)) void
sk_idle_logged(const char *reason)
{
	int saved_errno = errno, own;

	sk_busy(true);
	own = sk_owned_fd();
	if (own >= 0)
		sk_drop(own, reason);
	sk_busy(false);
	errno = saved_errno;
}

/* Entry of the waits: an event loop is idle.  Inline: it runs once per
 * request of an event-loop server (B1i); without the event log it is one
 * check-and-clear of what we published, touching no errno. */
static inline __attribute__((always_inline)) void
sk_idle_quiet(void)
{
	/* The usual case: the context is still the one we published. */
	if (__builtin_expect(ctxshim_sk_idle_fast(), 1))
		return;
	if (sk_self.busy)
		return;
	sk_busy(true);
	sk_drop_quiet();
	sk_busy(false);
}

static inline __attribute__((always_inline)) void
sk_idle(const char *reason)
{
	if (ctxshim_events_on()) {
		if (!sk_self.busy)
			sk_idle_logged(reason);
		return;
	}
	sk_idle_quiet();
}

/* poll() and select() are also what a request handler calls while it
 * waits on something else (libcurl, a database client): that wait is part
 * of the request, so only a wait that includes a tracked server connection
 * -- an event loop, or a thread-per-connection server waiting for the next
 * request -- makes the thread idle.  epoll fds hide their sets; epoll is
 * what event loops use, so the epoll waits always count.
 *
 * The application's pollfd array and fd_sets are read only once the kernel
 * has read (and written) them in a call that succeeded: a bad pointer or
 * an nfds larger than the array must give the application -1/EFAULT, as
 * without the shim, never a SIGSEGV in a hook.  poll/ppoll therefore look
 * first with a zero timeout (same fds, same signal mask): an error (EFAULT,
 * EINVAL, a signal) or ready fds are what the real call gives at once
 * anyway, so that is returned as it is (after the check, for ready fds);
 * 0 means the array is valid: the thread may go idle, then it waits for
 * real (one more system call, only while a connection's context is
 * published).  select/pselect cannot look twice (the call overwrites their
 * sets, and checking what it returned would leave an idle select loop, or
 * a server waiting for the next keep-alive request, showing its last
 * request for as long as it blocks), so they read the sets before the
 * call, and only the words the kernel reads too (bits below n, at most
 * FD_SETSIZE), after a probe of each page those words are on: a set that
 * cannot be read (an application bug the kernel reports as EFAULT) is
 * left to the real call.  The probe is sys_readable8() (preload/sys.h):
 * rt_sigprocmask() with an invalid `how', which copies the 8 bytes at its
 * set pointer before it looks at `how' (kernel/signal.c).  Every program
 * makes that call (glibc does, around fork, in pthread_create...), so
 * seccomp filters allow it, unlike process_vm_readv(), which
 * systemd's @system-service leaves out.  One or two more system calls per
 * set, only while the thread publishes a connection's context.  At most
 * SK_POLL_SCAN_MAX pollfds are looked at. */
#define SK_POLL_SCAN_MAX 1024

static bool
sk_pollfds_tracked(const struct pollfd *f, nfds_t n)
{
	nfds_t i;

	if (n > SK_POLL_SCAN_MAX)
		n = SK_POLL_SCAN_MAX;
	for (i = 0; i < n; i++)
		if (f[i].fd >= 0 &&
		    (ctxshim_conn_hot(f[i].fd) & (CONN_HOT_SCAN | CONN_HOT_TLS)))
			return true;
	return false;
}

/* Can the words of set s that hold fds 0..n-1 (n <= FD_SETSIZE) be read?
 * They are at most 128 bytes: on one page, or on two.  Changes errno. */
static bool
sk_fdset_readable(const fd_set *s, int n)
{
	uintptr_t first = (uintptr_t)s, last = first + ((size_t)n + 63) / 64 * 8 - 8;

	if (!s)
		return true;
	return sys_readable8(first) && ((first ^ last) < 4096 || sys_readable8(last));
}

static bool
sk_fdset_tracked(int n, const fd_set *r, const fd_set *w, const fd_set *x)
{
	int fd;

	if (n > FD_SETSIZE)
		n = FD_SETSIZE;
	if (!sk_fdset_readable(r, n) || !sk_fdset_readable(w, n) ||
	    !sk_fdset_readable(x, n))
		return false;
	for (fd = 0; fd < n; fd++)
		if ((ctxshim_conn_hot(fd) & (CONN_HOT_SCAN | CONN_HOT_TLS)) &&
		    ((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) ||
		     (x && FD_ISSET(fd, x))))
			return true;
	return false;
}

/* Before a select/pselect (see above). */
static void
sk_fdset_idle(
	int n, const fd_set *rd, const fd_set *w, const fd_set *x, const char *reason)
{
	int saved_errno;

	if (n <= 0)
		return;
	saved_errno = errno;
	if (sk_fdset_tracked(n, rd, w, x))
		sk_idle(reason);
	errno = saved_errno;
}

/* ---- a worker back in its pool ---- */

/* The thread blocks on a condition variable (hook-pthread.c) while it
 * publishes a connection's context.  Worker pools that hand connections
 * between threads -- Apache httpd's event MPM gives a connection back to
 * its listener thread after each response and waits for the next job --
 * do no read, poll or close of the connection on the worker's thread once
 * it has answered, so nothing else would clear what it published: it
 * would show the request it finished until it takes another.  Only a wait
 * after the response counts (the request answered, or the connection
 * closed or reused since): a handler that waits for another thread's
 * result before it answers keeps its context, and one that waits between
 * the writes of a response it streams loses it for the wait only (its
 * next write attaches it again).  Short timed waits, a lock handed between
 * threads such as CPython's GIL, do not come here (hook-pthread.c,
 * hook_pthread_wait_short()).  A context handed back by a library hook
 * (sk_nil_conn: no connection known) is left alone. */
void
hook_socket_thread_wait(void)
{
	struct ctxshim_conn *c = sk_self.c;
	bool live;

	if (sk_self.busy || !c || c == &sk_nil_conn)
		return;
	/* The usual case: the slot's request, not answered.  Not a copy's
	 * slot, which is never answered (its leader's request is). */
	if (sk_self.gen == atomic_load_explicit(&c->gen, memory_order_relaxed) &&
	    !(atomic_load_explicit(&c->flags, memory_order_relaxed) & CONN_F_LINK) &&
	    !ctxshim_conn_idle(c))
		return;
	/* Else where its connection is now, as a switch back looks
	 * (sk_req_live()): another thread closed the descriptor while a copy
	 * carries the connection on, or read through a copy, which took the
	 * connection's state (old: cleared while the request went on, or
	 * kept at every wait after its response). */
	sk_busy(true);
	live = sk_self.fdp1 && sk_req_follow(sk_self.fdp1 - 1, sk_self.gen);
	sk_busy(false);
	if (!live)
		sk_idle("pool-wait");
}

/* ---- inherited requests ----
 *
 * A thread started while its creator shows a request starts with a copy
 * of it (hook-pthread.c) and used to keep it until it published something
 * else or ended.  A pool that a request starts on its first job (Python's
 * ThreadPoolExecutor) kept that request for good: its worker showed it
 * while it ran every later request's job, and a profiler charged them all
 * to it.  When the socket level follows the request the creator shows, the
 * new thread also gets the connection's descriptor and generation, and
 * each of its waits -- before and after, short ones too: a pool worker
 * whose next job was already queued does not block, but it waits for a
 * lock sooner or later (CPython's GIL) -- looks whether that request is
 * still the connection's unanswered one, where the connection is now and
 * by its span-id, as a saved context is judged (sk_req_live(): the
 * descriptor closed while a copy carries the connection on, a read
 * through a copy that took the connection's state; the thread then
 * follows it there).  Once it is not (a response was written, the
 * connection has a newer request, or was closed), the thread clears the
 * inherited context: it ran that request's job, and what it does now is
 * not known.  While the request is not answered the thread keeps it,
 * through any wait (a job of that request waiting for something).  Only
 * that request's context is cleared (the span-id the thread started
 * with): at a wait while the thread shows something else (a client span,
 * a pool item, a request it reads itself) nothing is cleared, but the
 * thread goes on following the request, since a hook that saved its
 * context shows it again afterwards (hook-scope.h, hook-http.h: libcurl's
 * client span, a coroutine switched back to).  The thread once forgot it
 * at such a wait -- a pycurl callback waiting for the GIL under the
 * client span -- and kept the restored context for good.  "Answered"
 * never turns back (a request's span-id is its own, and a connection's
 * current request is only ever replaced by a newer one), so a context of
 * that request shown again after it was cleared is cleared at the next
 * wait too.  Slots never go away (conn.h), so the loads are safe whatever
 * happened to the connection; no lock, no allocation. */

void
hook_socket_inherit_take(struct ctxshim_sk_inherit *in, const struct ctxshim_ctx *cur)
{
	uint64_t span = sk_span(cur);

	memset(in, 0, sizeof(*in));
	if (sk_self.busy)
		return;
	if (sk_self.fdp1 && sk_self.span == span && sk_self.c &&
	    sk_self.c != &sk_nil_conn) {
		in->fdp1 = sk_self.fdp1;
		in->gen = sk_self.gen;
		in->span = span;
	} else if (sk_self.inh.fdp1 && sk_self.inh.span == span) {
		/* a thread started by a thread that inherited it */
		*in = sk_self.inh;
	}
}

void
hook_socket_inherit_adopt(const struct ctxshim_sk_inherit *in)
{
	const struct ctxshim_ctx *cur = ctxshim_current();

	/* Only if the copy was published (an attach from a signal handler
	 * that interrupted another update is dropped). */
	if (in->fdp1 && cur && sk_span(cur) == in->span)
		sk_self.inh = *in;
}

bool
hook_socket_inherited_wait(void)
{
	const struct ctxshim_ctx *cur;
	struct ctxshim_conn *c;
	int saved_errno, id;

	if (!sk_self.inh.fdp1 || sk_self.busy)
		return false;
	cur = ctxshim_current();
	if (!cur || sk_span(cur) != sk_self.inh.span)
		return false;
	/* Judged, and followed, as a saved context is (sk_req_live()). */
	sk_busy(true);
	c = sk_req_live(sk_self.inh.fdp1 - 1, sk_self.inh.gen, sk_self.inh.span, &id);
	if (c) {
		sk_self.inh.fdp1 = id + 1;
		sk_self.inh.gen = atomic_load_explicit(&c->gen, memory_order_relaxed);
	}
	sk_busy(false);
	if (c)
		return true;
	saved_errno = errno;
	CTXSHIM_EVENT(CTXSHIM_EV_DETACH, -1, cur, "inherited-answered");
	(void)ctxshim_detach_span((const uint8_t *)&sk_self.inh.span);
	errno = saved_errno;
	return false;
}

/* ---- bytes in ---- */

/* sk_in_idle_read()'s tests of the connection (the recv hook makes them
 * apart from the thread's: hook_socket_recv()). */
static inline __attribute__((always_inline)) bool
sk_in_idle_conn(const struct ctxshim_conn *c, int flags)
{
	return __builtin_expect(c != NULL && !(flags & SK_IN_FLAGS_OTHER) &&
					ctxshim_conn_kept_alive(c),
				1);
}

/* The read of an event loop's next request (B1): a read that feeds (no
 * flag of SK_IN_FLAGS_OTHER) on c (fd's slot, NULL if none), a keep-alive
 * connection waiting for it (ctxshim_conn_kept_alive()), by a thread that
 * publishes nothing from a connection (its wait cleared it) and is not
 * busy: sk_enter() would change nothing, and a whole head read now
 * becomes c's current request without another look at the connection
 * (conn-whole.h, ctxshim_conn_feed_whole_kept()).  Then the hook runs the
 * read and sk_in_idle(); anything else (a connection's first request
 * too) takes the hook's general path. */
static inline __attribute__((always_inline)) bool
sk_in_idle_read(const struct ctxshim_conn *c, int flags)
{
	return sk_in_idle_conn(c, flags) && __builtin_expect(sk_self.fdp1_busy == 0, 1);
}

/* After sk_in_idle_read() and a read of r > 0 bytes into buf. */
static inline __attribute__((always_inline)) void
sk_in_idle(int fd, struct ctxshim_conn *c, const void *buf, size_t r)
{
	/* c opaque from here: else gcc keeps the addresses of c's fields
	 * that sk_in_idle_read() tested before the read (answered, seq) in
	 * registers and stack slots through the calls below, rather than
	 * address them from c (B1: ~8 instructions). */
	__asm__("" : "+r"(c));
	sk_busy(true);
	sk_in_whole_end(fd, c, buf, r, ctxshim_conn_feed_whole_kept(c, buf, r));
}

/* sk_read() past sk_in_idle_read(); c: fd's slot or NULL. */
static __attribute__((noinline)) ssize_t
sk_read_any(int fd, void *buf, size_t n, struct ctxshim_conn *c)
{
	ssize_t r;

	c = sk_enter_slot(fd, c, false);
	if (__builtin_expect(!c, 0))
		return real_read(fd, buf, n);
	r = real_read(fd, buf, n);
	sk_in_buf(fd, c, buf, r, 0, true);
	return r;
}

static CTXSHIM_HOT __attribute__((noinline)) ssize_t
sk_read(int fd, void *buf, size_t n)
{
	/* The hook runs only for an fd whose hot byte said CONN_HOT_SCAN or
	 * CONN_HOT_UP, which bounded it (B1: 2 instructions). */
	struct ctxshim_conn *c = ctxshim_conn_get_hot(fd);
	ssize_t r;

	if (!sk_in_idle_read(c, 0))
		return sk_read_any(fd, buf, n, c);
	sk_reading(fd);
	r = real_read(fd, buf, n);
	if (r > 0)
		sk_in_idle(fd, c, buf, (size_t)r);
	return r;
}

static inline ssize_t
hook_socket_read(int fd, void *buf, size_t n)
{
	if (__builtin_expect(!ctxshim_conn_hot_scan(fd), 1))
		return real_read(fd, buf, n);
	return sk_read(fd, buf, n);
}

static __attribute__((noinline)) ssize_t
sk_read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	struct ctxshim_conn *c = sk_enter(fd, false);
	ssize_t r = real_read_chk(fd, buf, n, buflen);

	sk_in_buf(fd, c, buf, r, 0, false);
	return r;
}

static inline ssize_t
hook_socket_read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (__builtin_expect(!(ctxshim_conn_hot(fd) & CONN_HOT_IN), 1))
		return real_read_chk(fd, buf, n, buflen);
	return sk_read_chk(fd, buf, n, buflen);
}

/* sk_recv() with flags of SK_IN_FLAGS_OTHER: the bytes are not fed
 * (sk_in_flags_feed()). */
static __attribute__((noinline, cold)) ssize_t
sk_recv_other(int fd, void *buf, size_t n, int flags, struct ctxshim_conn *c)
{
	ssize_t r = real_recv(fd, buf, n, flags);

	if (r > 0)
		sk_in_flags_other(c, flags);
	return r;
}

/* recv() past sk_in_idle_read(); c: fd's slot or NULL. */
static __attribute__((noinline)) ssize_t
sk_recv_any(int fd, void *buf, size_t n, int flags, struct ctxshim_conn *c)
{
	ssize_t r;

	c = sk_enter_slot(fd, c, false);
	/* Nested in a signal handler (or no slot): nothing to feed, not even
	 * MSG_TRUNC's loss to note (sk_in_flags_other()). */
	if (__builtin_expect(!c, 0))
		return real_recv(fd, buf, n, flags);
	if (__builtin_expect(flags & SK_IN_FLAGS_OTHER, 0))
		return sk_recv_other(fd, buf, n, flags, c);
	r = real_recv(fd, buf, n, flags);
	sk_in_buf(fd, c, buf, r, 0, true);
	return r;
}

/* sk_recv() past hook_socket_recv()'s test of the connection: the rest of
 * sk_in_idle_read() (c is fd's slot, kept alive). */
static CTXSHIM_HOT_FIRST __attribute__((noinline)) ssize_t
sk_recv(int fd, void *buf, size_t n, int flags, struct ctxshim_conn *c)
{
	/* As sk_read(). */
	ssize_t r;

	if (__builtin_expect(sk_self.fdp1_busy != 0, 0))
		return sk_recv_any(fd, buf, n, flags, c);
	sk_reading(fd);
	r = real_recv(fd, buf, n, flags);
	if (r > 0)
		sk_in_idle(fd, c, buf, (size_t)r);
	return r;
}

static inline ssize_t
hook_socket_recv(int fd, void *buf, size_t n, int flags)
{
	struct ctxshim_conn *c;

	if (__builtin_expect(!ctxshim_conn_hot_scan(fd), 1))
		return real_recv(fd, buf, n, flags);
	/* sk_in_idle_read()'s tests of the connection here, in the exported
	 * hook, which saves no register: a read that fails them (each of an
	 * HTTP/2 connection's) goes on with no register saved and restored
	 * on the way, and the one that passes them (B1) still takes a single
	 * jump into the hook's code. */
	c = ctxshim_conn_get_hot(fd);
	if (!sk_in_idle_conn(c, flags))
		return sk_recv_any(fd, buf, n, flags, c);
	return sk_recv(fd, buf, n, flags, c);
}

static __attribute__((noinline)) ssize_t
sk_recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	struct ctxshim_conn *c = sk_enter(fd, false);
	ssize_t r = real_recv_chk(fd, buf, n, buflen, flags);

	sk_in_buf(fd, c, buf, r, flags, false);
	return r;
}

static inline ssize_t
hook_socket_recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	if (__builtin_expect(!(ctxshim_conn_hot(fd) & CONN_HOT_IN), 1))
		return real_recv_chk(fd, buf, n, buflen, flags);
	return sk_recv_chk(fd, buf, n, buflen, flags);
}

static __attribute__((noinline)) ssize_t
sk_recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *a, socklen_t *al)
{
	struct ctxshim_conn *c = sk_enter(fd, false);
	ssize_t r = real_recvfrom(fd, buf, n, flags, a, al);

	sk_in_buf(fd, c, buf, r, flags, false);
	return r;
}

static inline ssize_t
hook_socket_recvfrom(
	int fd, void *buf, size_t n, int flags, struct sockaddr *a, socklen_t *al)
{
	if (__builtin_expect(!(ctxshim_conn_hot(fd) & CONN_HOT_IN), 1))
		return real_recvfrom(fd, buf, n, flags, a, al);
	return sk_recvfrom(fd, buf, n, flags, a, al);
}

static __attribute__((noinline)) ssize_t
sk_recvfrom_chk(int fd,
		void *buf,
		size_t n,
		size_t buflen,
		int flags,
		struct sockaddr *a,
		socklen_t *al)
{
	struct ctxshim_conn *c = sk_enter(fd, false);
	ssize_t r = real_recvfrom_chk(fd, buf, n, buflen, flags, a, al);

	sk_in_buf(fd, c, buf, r, flags, false);
	return r;
}

static inline ssize_t
hook_socket_recvfrom_chk(int fd,
			 void *buf,
			 size_t n,
			 size_t buflen,
			 int flags,
			 struct sockaddr *a,
			 socklen_t *al)
{
	if (__builtin_expect(!(ctxshim_conn_hot(fd) & CONN_HOT_IN), 1))
		return real_recvfrom_chk(fd, buf, n, buflen, flags, a, al);
	return sk_recvfrom_chk(fd, buf, n, buflen, flags, a, al);
}

static __attribute__((noinline)) ssize_t
sk_readv(int fd, const struct iovec *iov, int iovcnt)
{
	struct ctxshim_conn *c = sk_enter(fd, false);
	ssize_t r = real_readv(fd, iov, iovcnt);
	struct sk_in in;

	if (r > 0 && iovcnt > 0 && sk_in_begin(&in, fd, c)) {
		sk_in_iov(&in, iov, (size_t)iovcnt, (size_t)r);
		sk_in_end(&in);
	}
	return r;
}

static inline ssize_t
hook_socket_readv(int fd, const struct iovec *iov, int iovcnt)
{
	if (__builtin_expect(!(ctxshim_conn_hot(fd) & CONN_HOT_IN), 1))
		return real_readv(fd, iov, iovcnt);
	return sk_readv(fd, iov, iovcnt);
}

static __attribute__((noinline)) ssize_t
sk_recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct ctxshim_conn *c = sk_enter(fd, false);
	ssize_t r = real_recvmsg(fd, msg, flags);
	struct sk_in in;

	if (r > 0 && msg && sk_in_flags_feed(c, flags) && sk_in_begin(&in, fd, c)) {
		sk_in_iov(&in, msg->msg_iov, msg->msg_iovlen, (size_t)r);
		sk_in_end(&in);
	}
	return r;
}

static inline ssize_t
hook_socket_recvmsg(int fd, struct msghdr *msg, int flags)
{
	if (__builtin_expect(!(ctxshim_conn_hot(fd) & CONN_HOT_IN), 1))
		return real_recvmsg(fd, msg, flags);
	return sk_recvmsg(fd, msg, flags);
}

static __attribute__((noinline)) int
sk_recvmmsg(int fd, struct mmsghdr *vec, unsigned n, int flags, struct timespec *t)
{
	struct ctxshim_conn *c = sk_enter(fd, false);
	int r = real_recvmmsg(fd, vec, n, flags, t);
	struct sk_in in;
	int i;

	if (r > 0 && vec && sk_in_flags_feed(c, flags) && sk_in_begin(&in, fd, c)) {
		for (i = 0; i < r; i++)
			sk_in_iov(&in, vec[i].msg_hdr.msg_iov,
				  vec[i].msg_hdr.msg_iovlen, vec[i].msg_len);
		sk_in_end(&in);
	}
	return r;
}

static inline int
hook_socket_recvmmsg(
	int fd, struct mmsghdr *vec, unsigned n, int flags, struct timespec *t)
{
	if (__builtin_expect(!(ctxshim_conn_hot(fd) & CONN_HOT_IN), 1))
		return real_recvmmsg(fd, vec, n, flags, t);
	return sk_recvmmsg(fd, vec, n, flags, t);
}

/* ---- server-side connections ---- */

static void
sk_accepted(int fd)
{
	int saved_errno = errno;

	ctxshim_conn_accepted(fd);
	errno = saved_errno;
}

static inline int
hook_socket_accept(int fd, struct sockaddr *a, socklen_t *al)
{
	int r = real_accept(fd, a, al);

	if (r >= 0 && ctxshim_conn_tab.max_fds)
		sk_accepted(r);
	return r;
}

static inline int
hook_socket_accept4(int fd, struct sockaddr *a, socklen_t *al, int flags)
{
	int r = real_accept4(fd, a, al, flags);

	if (r >= 0 && ctxshim_conn_tab.max_fds)
		sk_accepted(r);
	return r;
}

/* ---- upstreams: connect() ---- */

static inline int
hook_socket_connect(int fd, const struct sockaddr *a, socklen_t al)
{
	int r = real_connect(fd, a, al);

	/* A thread that publishes nothing: one TLS load (client programs). */
	if (__builtin_expect(sk_self.fdp1 != 0 || ctxshim_conn_hot(fd) == CONN_HOT_UP,
			     0) &&
	    (r == 0 || errno == EINPROGRESS || errno == EINTR))
		sk_connected(fd, a && al >= sizeof(sa_family_t) &&
					 a->sa_family == AF_UNSPEC);
	return r;
}

/* ---- fd reuse ---- */

static __attribute__((noinline)) int
sk_close(int fd)
{
	sk_gone(fd, "close");
	return real_close(fd);
}

static inline int
hook_socket_close(int fd)
{
	if (__builtin_expect(ctxshim_conn_hot_any(fd), 0))
		return sk_close(fd);
	return real_close(fd);
}

static void
sk_duped(int oldfd, int newfd, const char *reason)
{
	int saved_errno;

	/* Neither is ours (a shell's or a CGI server's redirections): nothing
	 * to do, and no getpid() for sk_vfork_child(). */
	if (!ctxshim_conn_hot(oldfd) && !ctxshim_conn_hot(newfd))
		return;
	saved_errno = errno;
	if (sk_vfork_child()) {
		errno = saved_errno;
		return;
	}
	if (ctxshim_conn_hot(newfd))
		sk_gone(newfd, reason);
	if (ctxshim_conn_hot(oldfd))
		ctxshim_conn_dup(oldfd, newfd);
	errno = saved_errno;
}

static inline int
hook_socket_dup2(int oldfd, int newfd)
{
	int r;

	if (__builtin_expect(ctxshim_conn_hot(newfd) == CONN_HOT_SHIM, 0) &&
	    oldfd != newfd)
		ctxshim_conn_release_shim_fd(newfd);
	r = real_dup2(oldfd, newfd);

	/* Done after the call: dup2 replaces newfd atomically, so no other
	 * thread can get its number in between. */
	if (r == newfd && oldfd != newfd && ctxshim_conn_tab.max_fds)
		sk_duped(oldfd, newfd, "dup2");
	return r;
}

static inline int
hook_socket_dup3(int oldfd, int newfd, int flags)
{
	int r;

	if (__builtin_expect(ctxshim_conn_hot(newfd) == CONN_HOT_SHIM, 0) &&
	    oldfd != newfd)
		ctxshim_conn_release_shim_fd(newfd);
	r = real_dup3(oldfd, newfd, flags);

	if (r == newfd && oldfd != newfd && ctxshim_conn_tab.max_fds)
		sk_duped(oldfd, newfd, "dup3");
	return r;
}

/* dup() and fcntl(F_DUPFD[_CLOEXEC]) return a number that was free: it
 * gets a copy of oldfd's slot, as with dup2 (a slot still tracked there
 * belongs to a close the hooks did not see, and goes).  Only when one of
 * the two numbers is tracked: every other copy costs two failed tests. */
static __attribute__((noinline)) void
sk_dup_new(int oldfd, int r, const char *reason)
{
	if (ctxshim_conn_hot(oldfd) != CONN_HOT_NONE ||
	    ctxshim_conn_hot(r) != CONN_HOT_NONE)
		sk_duped(oldfd, r, reason);
}

static inline int
hook_socket_dup(int oldfd)
{
	int r = real_dup(oldfd);

	if (r >= 0 && ctxshim_conn_tab.max_fds)
		sk_dup_new(oldfd, r, "dup");
	return r;
}

/* Every command goes to the real function with its argument as it came
 * (sk_fcntl_fn); only a successful F_DUPFD/F_DUPFD_CLOEXEC is looked at
 * after it.  The real function is the one the caller named: fcntl and
 * fcntl64 differ on 32-bit targets (struct flock). */
static inline int
hook_socket_fcntl(sk_fcntl_fn *real, int fd, int cmd, void *arg)
{
	int r = real(fd, cmd, arg);

	if ((cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && r >= 0 &&
	    ctxshim_conn_tab.max_fds)
		sk_dup_new(fd, r, "fcntl");
	return r;
}

/* What glibc's fileno() returns (libio/fileno.c), read without calling it:
 * fileno() sets errno for a stream without a file (fmemopen,
 * open_memstream, fopencookie), and such a stream's _fileno may never
 * have been written (_IO_old_init() leaves it), so it is read only when
 * the stream is a file buffer (_IO_IS_FILEBUF, libio.h: unchanged since
 * libio began; fopencookie's streams have it, with _fileno -2). */
#define SK_IO_IS_FILEBUF 0x2000

static inline int
sk_file_fd(const FILE *fp)
{
	return (fp->_flags & SK_IO_IS_FILEBUF) ? fp->_fileno : -1;
}

/* glibc's fclose() flushes and closes the fd inside libc (no call we
 * see): a connection fdopen()ed by a legacy daemon, closed that way, must
 * be forgotten like one close() closes -- before the real call, as
 * there.  The fd is taken where fclose() takes it: a stream that is no
 * file (fd -1 or -2) fails the bound check, and so does every stream
 * before the table is set up or with the shim off (max_fds 0); the table
 * is never unmapped, so a call at exit after the destructors finds it as
 * it was.  fclose(NULL) crashes in libc, as without us.  A plain file
 * costs a test of fp, two loads, the bound check and the hot byte before
 * the tail call (14 instructions; the slot work is out of line, so the
 * fast path saves no register). */
static __attribute__((noinline)) int
sk_fclose(FILE *fp, int fd)
{
	sk_gone(fd, "fclose");
	return real_fclose(fp);
}

static inline int
hook_socket_fclose(FILE *fp)
{
	if (__builtin_expect(fp != NULL, 1)) {
		int fd = sk_file_fd(fp);

		if (__builtin_expect(ctxshim_conn_hot(fd) != CONN_HOT_NONE, 0))
			return sk_fclose(fp, fd);
	}
	return real_fclose(fp);
}

/* Does this process have more than one thread (field 20 of
 * /proc/self/stat, after the parenthesised name, which may hold spaces and
 * parentheses)?  Threads share one descriptor table, so a
 * close_range(CLOSE_RANGE_UNSHARE) in one of them closes its own copy and
 * leaves the connections open for the others.  False when /proc cannot be
 * read: then the range is forgotten, as without the flag. */
static bool
sk_threads_share_table(void)
{
	char st[512], *p;
	unsigned long n = 0;
	int field = 2;

	if (sys_read_file("/proc/self/stat", st, sizeof(st)) <= 0 ||
	    !(p = strrchr(st, ')')))
		return false;
	while (*p && field < 20)
		if (*p++ == ' ')
			field++;
	while (*p >= '0' && *p <= '9' && n < 2)
		n = n * 10 + (unsigned long)(*p++ - '0');
	return field == 20 && n > 1;
}

/* sk_gone_range() unless we are a vfork() child (see sk_vfork_child()) or
 * the call unshares a table other threads go on using. */
static __attribute__((noinline)) void
sk_gone_range_own(unsigned lo, unsigned hi, bool unshare, const char *reason)
{
	int saved_errno;
	bool keep;

	/* Nothing of ours in the range (a child closing what it inherited
	 * before exec, a daemon at start): no system call of ours either. */
	if (!sk_range_shim(lo, hi) && sk_range_next(lo, hi) < 0)
		return;
	saved_errno = errno;
	keep = sk_vfork_child() || (unshare && sk_threads_share_table());
	errno = saved_errno;
	if (!keep)
		sk_gone_range(lo, hi, reason);
}

/* Only a call that closes something forgets: flags the kernel rejects
 * (EINVAL) close nothing, and CLOSE_RANGE_CLOEXEC only marks. */
static inline int
hook_socket_close_range(unsigned lo, unsigned hi, int flags)
{
	if (!(flags & ~(int)(CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC)) &&
	    !(flags & CLOSE_RANGE_CLOEXEC) && lo <= hi && ctxshim_conn_tab.max_fds)
		sk_gone_range_own(lo, hi, flags & CLOSE_RANGE_UNSHARE, "close_range");
	return real_close_range(lo, hi, flags);
}

/* glibc's closefrom() takes a negative lo as 0 (misc/closefrom.c: MAX (0,
 * lowfd)) and closes everything. */
static inline void
hook_socket_closefrom(int lo)
{
	if (ctxshim_conn_tab.max_fds)
		sk_gone_range_own(lo < 0 ? 0u : (unsigned)lo, ~0u, false, "closefrom");
	real_closefrom(lo);
}

/* ---- bytes out ---- */

static __attribute__((noinline)) ssize_t
sk_write_any(int fd, const void *buf, size_t n)
{
	/* The hot byte read again (the exported hook only tested it): a
	 * change in between is one that came before that test. */
	uint8_t hot = ctxshim_conn_hot(fd);
	struct ctxshim_conn *c;
	ssize_t r;

	if (!(hot & CONN_HOT_OUT))
		return real_write(fd, buf, n);
	c = sk_out_enter(fd, hot);
	r = real_write(fd, buf, n);

	sk_out(fd, c, buf, n, r);
	return r;
}

/* The rest of sk_out_unbusy() past its usual case, busy held; returns r
 * (a tail call of the write hooks' fast paths). */
static __attribute__((noinline, cold)) ssize_t
sk_out_slow_v(int fd,
	      struct ctxshim_conn *c,
	      const void *head,
	      size_t len,
	      ssize_t r,
	      const struct iovec *iov,
	      size_t iovcnt)
{
	/* The bytes written only (sk_out_v()): len is the buffer's */
	if (len > (size_t)r)
		len = (size_t)r;
	if (ctxshim_conn_responded_iov(c, head, len, (size_t)r, iov, iovcnt)) {
		sk_out_next(fd, c, head, len, (size_t)r);
		sk_out_more(fd, c, head, len, r);
	}
	sk_busy(false);
	return r;
}

static __attribute__((noinline, cold)) ssize_t
sk_out_slow(int fd, struct ctxshim_conn *c, const void *head, size_t len, ssize_t r)
{
	return sk_out_slow_v(fd, c, head, len, r, NULL, 0);
}

/* A response write that starts with an interim response: sk_out(), which
 * looks past it (sk_interim_end()); returns r.  Also one that wrote fewer
 * bytes than a status line (0 < r < SK_HEAD_MIN): sk_out() looks at
 * those only, where the fast path's status-line test would read
 * SK_HEAD_MIN bytes of the buffer, written or not (a buffer may run past
 * its mapping); testing r against SK_HEAD_MIN where r <= 0 was tested
 * costs the usual write nothing (B1i). */
static __attribute__((noinline, cold)) ssize_t
sk_out_interim_slow(
	int fd, struct ctxshim_conn *c, const void *head, size_t len, ssize_t r)
{
	sk_out(fd, c, head, len, r);
	return r;
}

/* Return r after the response write's real call on slot c (sk_out_fast()
 * held before it): sk_out_unbusy() with its rare cases a tail call, and
 * fd read from the caller's stack only there (see sk_writev()). */
#define SK_OUT_FAST_RETURN(keep_fd, c, head, len, r)                                  \
	do {                                                                          \
		if (__builtin_expect((r) < SK_HEAD_MIN, 0))                           \
			return (r) <= 0 ? (r)                                         \
					: sk_out_interim_slow((keep_fd), (c), (head), \
							      (len), (r));            \
		if (__builtin_expect(ctxshim_conn_informational((head), (len)), 0))   \
			return sk_out_interim_slow((keep_fd), (c), (head), (len),     \
						   (r));                              \
		sk_busy(true);                                                        \
		/* head known not interim: none given (B1i) */                        \
		if (__builtin_expect(!ctxshim_conn_responded_usual((c), NULL, 0), 0)) \
			return sk_out_slow((keep_fd), (c), (head), (len), (r));       \
		sk_answering();                                                       \
		sk_busy(false);                                                       \
		return (r);                                                           \
	} while (0)

/* The response's write (sk_out_fast()), else sk_write_any(). */
static CTXSHIM_HOT __attribute__((noinline)) ssize_t
sk_write(int fd, const void *buf, size_t n)
{
	struct ctxshim_conn *c = sk_self.c;
	volatile int keep_fd = fd;
	ssize_t r;

	if (__builtin_expect(!sk_out_fast(fd, c), 0))
		return sk_write_any(fd, buf, n);
	r = real_write(fd, buf, n);
	SK_OUT_FAST_RETURN(keep_fd, c, buf, n, r);
}

static inline ssize_t
hook_socket_write(int fd, const void *buf, size_t n)
{
	/* The byte tested where it is: sk_write() does not need it. */
	if (__builtin_expect(!ctxshim_conn_hot_out(fd), 1))
		return real_write(fd, buf, n);
	return sk_write(fd, buf, n);
}

static __attribute__((noinline)) ssize_t
sk_send_any(int fd, const void *buf, size_t n, int flags)
{
	/* The hot byte read again (the exported hook only tested it): a
	 * change in between is one that came before that test. */
	uint8_t hot = ctxshim_conn_hot(fd);
	struct ctxshim_conn *c;
	ssize_t r;

	if (!(hot & CONN_HOT_OUT))
		return real_send(fd, buf, n, flags);
	c = sk_out_enter(fd, hot);
	r = real_send(fd, buf, n, flags);

	sk_out(fd, c, buf, n, r);
	return r;
}

/* The response's send (sk_out_fast()), else sk_send_any(). */
static CTXSHIM_HOT __attribute__((noinline)) ssize_t
sk_send(int fd, const void *buf, size_t n, int flags)
{
	struct ctxshim_conn *c = sk_self.c;
	volatile int keep_fd = fd;
	ssize_t r;

	if (__builtin_expect(!sk_out_fast(fd, c), 0))
		return sk_send_any(fd, buf, n, flags);
	r = real_send(fd, buf, n, flags);
	SK_OUT_FAST_RETURN(keep_fd, c, buf, n, r);
}

static inline ssize_t
hook_socket_send(int fd, const void *buf, size_t n, int flags)
{
	/* The byte tested where it is: sk_send() does not need it. */
	if (__builtin_expect(!ctxshim_conn_hot_out(fd), 1))
		return real_send(fd, buf, n, flags);
	return sk_send(fd, buf, n, flags);
}

static __attribute__((noinline)) ssize_t
sk_sendto_any(int fd,
	      const void *buf,
	      size_t n,
	      int flags,
	      const struct sockaddr *a,
	      socklen_t al,
	      uint8_t hot)
{
	struct ctxshim_conn *c = sk_out_enter(fd, hot);
	ssize_t r = real_sendto(fd, buf, n, flags, a, al);

	sk_out(fd, c, buf, n, r);
	return r;
}

/* The response's sendto (sk_out_fast()), else sk_sendto_any(). */
static CTXSHIM_HOT __attribute__((noinline)) ssize_t
sk_sendto(int fd,
	  const void *buf,
	  size_t n,
	  int flags,
	  const struct sockaddr *a,
	  socklen_t al,
	  uint8_t hot)
{
	struct ctxshim_conn *c = sk_self.c;
	volatile int keep_fd = fd;
	ssize_t r;

	if (__builtin_expect(!sk_out_fast(fd, c), 0))
		return sk_sendto_any(fd, buf, n, flags, a, al, hot);
	r = real_sendto(fd, buf, n, flags, a, al);
	SK_OUT_FAST_RETURN(keep_fd, c, buf, n, r);
}

static inline ssize_t
hook_socket_sendto(int fd,
		   const void *buf,
		   size_t n,
		   int flags,
		   const struct sockaddr *a,
		   socklen_t al)
{
	uint8_t hot = ctxshim_conn_hot(fd);

	if (__builtin_expect(!(hot & CONN_HOT_OUT), 1))
		return real_sendto(fd, buf, n, flags, a, al);
	return sk_sendto(fd, buf, n, flags, a, al, hot);
}

static __attribute__((noinline)) ssize_t
sk_sendmsg_any(int fd, const struct msghdr *msg, int flags, uint8_t hot)
{
	struct ctxshim_conn *c = sk_out_enter(fd, hot);
	ssize_t r = real_sendmsg(fd, msg, flags);

	/* msg is read only once the kernel has (r > 0). */
	if (r > 0 && msg)
		sk_out_iov(fd, c, msg->msg_iov, msg->msg_iovlen, r);
	return r;
}

/* sk_sendmsg()'s first iovec shorter than a status line, or an interim
 * one (r > 0: the kernel read msg, so it is there). */
static __attribute__((noinline, cold)) ssize_t
sk_sendmsg_gather(int fd, struct ctxshim_conn *c, const struct msghdr *msg, ssize_t r)
{
	sk_out_iov(fd, c, msg->msg_iov, msg->msg_iovlen, r);
	return r;
}

/* The rest of sk_sendmsg()'s response write past its usual case, busy
 * held: with all the iovecs (an HTTP/2 connection's write is walked
 * whole: preload/conn.c, "HTTP/2 answers"). */
static __attribute__((noinline, cold)) ssize_t
sk_sendmsg_out_slow(int fd, struct ctxshim_conn *c, const struct msghdr *msg, ssize_t r)
{
	const struct iovec *iov = msg->msg_iov;

	return sk_out_slow_v(fd, c, iov[0].iov_base, iov[0].iov_len, r, iov,
			     msg->msg_iovlen);
}

/* The response's sendmsg (sk_out_fast()), else sk_sendmsg_any(). */
static CTXSHIM_HOT __attribute__((noinline)) ssize_t
sk_sendmsg(int fd, const struct msghdr *msg, int flags, uint8_t hot)
{
	struct ctxshim_conn *c = sk_self.c;
	volatile int keep_fd = fd;
	const struct iovec *iov;
	ssize_t r;

	if (__builtin_expect(!sk_out_fast(fd, c), 0))
		return sk_sendmsg_any(fd, msg, flags, hot);
	r = real_sendmsg(fd, msg, flags);
	/* r > 0: the kernel read msg and at least one iovec.  Fewer bytes
	 * than a status line: gathered from those (sk_out_interim_slow()
	 * says why). */
	if (__builtin_expect(r < SK_HEAD_MIN, 0))
		return r <= 0 ? r : sk_sendmsg_gather(keep_fd, c, msg, r);
	iov = msg->msg_iov;
	if (__builtin_expect(iov[0].iov_len < SK_HEAD_MIN, 0) ||
	    __builtin_expect(
		    ctxshim_conn_informational(iov[0].iov_base, iov[0].iov_len), 0))
		return sk_sendmsg_gather(keep_fd, c, msg, r);
	/* SK_OUT_FAST_RETURN(), the interim response tested above. */
	sk_busy(true);
	/* head known not interim: none given (B1i) */
	if (__builtin_expect(!ctxshim_conn_responded_usual(c, NULL, 0), 0))
		return sk_sendmsg_out_slow(keep_fd, c, msg, r);
	sk_answering();
	sk_busy(false);
	return r;
}

static inline ssize_t
hook_socket_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	uint8_t hot = ctxshim_conn_hot(fd);

	if (__builtin_expect(!(hot & CONN_HOT_OUT), 1))
		return real_sendmsg(fd, msg, flags);
	return sk_sendmsg(fd, msg, flags, hot);
}

static __attribute__((noinline)) ssize_t
sk_writev_any(int fd, const struct iovec *iov, int iovcnt)
{
	/* The hot byte read again (the exported hook only tested it): a
	 * change in between is one that came before that test. */
	uint8_t hot = ctxshim_conn_hot(fd);
	struct ctxshim_conn *c;
	ssize_t r;

	if (!(hot & CONN_HOT_OUT))
		return real_writev(fd, iov, iovcnt);
	c = sk_out_enter(fd, hot);
	r = real_writev(fd, iov, iovcnt);

	if (iovcnt > 0)
		sk_out_iov(fd, c, iov, (size_t)iovcnt, r);
	return r;
}

/* sk_writev_gather()'s general path, as the other write hooks': a head
 * gathered (sk_out_iov_gather()). */
static __attribute__((noinline, cold)) ssize_t
sk_writev_iov(int fd, struct ctxshim_conn *c, const struct iovec *iov, int n, ssize_t r)
{
	sk_out_iov(fd, c, iov, (size_t)n, r);
	return r;
}

static __attribute__((noinline, cold)) ssize_t
sk_writev_h2_lost(
	int fd, struct ctxshim_conn *c, const struct iovec *iov, int n, ssize_t r)
{
	sk_out_h2_lost(fd, c, iov, (size_t)n, r);
	return r;
}

/* sk_writev()'s rare ends, returning r: a first iovec shorter than a
 * status line or an interim one, and a response write that is not the
 * usual one (busy held: the rest of sk_out_unbusy()). */
static __attribute__((noinline, cold)) ssize_t
sk_writev_gather(
	struct ctxshim_conn *c, const struct iovec *iov, size_t n, ssize_t r, int fd)
{
	/* The arguments needed after the walk only when it is lost: kept on
	 * the stack rather than in six registers saved on every write, and
	 * the other paths are tail calls (B1i); in the order of
	 * ctxshim_conn_h2_written()'s, so that they stay where they came. */
	volatile int keep_fd = fd;
	volatile size_t keep_n = n;
	struct ctxshim_conn *volatile keep_c = c;
	const struct iovec *volatile keep_iov = iov;
	volatile ssize_t keep_r = r;
	bool walked;

	/* An HTTP/2 connection's write (nginx's: a 9-byte frame header
	 * first) straight to its walk (sk_out_h2()), not through
	 * sk_out_iov_gather(). */
	if (!sk_out_h2_is(c, iov, n))
		return sk_writev_iov(fd, c, iov, (int)n, r);
	if (__builtin_expect(sk_self.busy != 0, 0))
		return r;
	sk_busy(true);
	walked = ctxshim_conn_h2_written(c, iov, n, (size_t)r);
	sk_busy(false);
	if (__builtin_expect(!walked, 0))
		return sk_writev_h2_lost(keep_fd, keep_c, keep_iov, (int)keep_n,
					 keep_r);
	return keep_r;
}

static __attribute__((noinline, cold)) ssize_t
sk_writev_out_slow(
	int fd, struct ctxshim_conn *c, const struct iovec *iov, int n, ssize_t r)
{
	return sk_out_slow_v(fd, c, iov[0].iov_base, iov[0].iov_len, r, iov, (size_t)n);
}

/* The response's write (sk_out_fast()), else sk_writev_any(). */
static CTXSHIM_HOT_FIRST __attribute__((noinline)) ssize_t
sk_writev(int fd, const struct iovec *iov, int iovcnt)
{
	struct ctxshim_conn *c = sk_self.c;
	/* Needed after the call only on the rare paths: kept on the stack
	 * rather than in registers saved for the whole function (B1i). */
	volatile int keep_fd = fd, keep_n = iovcnt;
	const void *head;
	size_t len;
	ssize_t r;

	if (__builtin_expect(!sk_out_fast(fd, c), 0))
		return sk_writev_any(fd, iov, iovcnt);
	r = real_writev(fd, iov, iovcnt);
	/* r > 0 also means iovcnt > 0 (no iovec, no byte written).  Fewer
	 * bytes than a status line: gathered from those (sk_out_interim_slow()
	 * says why). */
	if (__builtin_expect(r < SK_HEAD_MIN, 0))
		return r <= 0 ? r
			      : sk_writev_gather(c, iov, (size_t)keep_n, r, keep_fd);
	head = iov[0].iov_base;
	len = iov[0].iov_len;
	if (__builtin_expect(len < SK_HEAD_MIN, 0) ||
	    __builtin_expect(ctxshim_conn_informational(head, len), 0))
		return sk_writev_gather(c, iov, (size_t)keep_n, r, keep_fd);
	/* sk_out_unbusy(), its usual case here; the others are tail calls,
	 * so that nothing after the real call needs a saved register. */
	sk_busy(true);
	/* head known not interim: none given (B1i) */
	if (__builtin_expect(!ctxshim_conn_responded_usual(c, NULL, 0), 0))
		return sk_writev_out_slow(keep_fd, c, iov, keep_n, r);
	sk_answering();
	sk_busy(false);
	return r;
}

static inline ssize_t
hook_socket_writev(int fd, const struct iovec *iov, int iovcnt)
{
	/* The byte tested where it is: sk_writev() does not need it. */
	if (__builtin_expect(!ctxshim_conn_hot_out(fd), 1))
		return real_writev(fd, iov, iovcnt);
	return sk_writev(fd, iov, iovcnt);
}

/* sendmmsg(), and pwritev2() at offset -1 (the file position: on a socket
 * a writev() with flags), write a response as sendmsg() and writev() do;
 * unseen, they left its request unanswered, so that the connection's next
 * request was taken as pipelined behind it and the thread went on showing
 * the first request's context for it (and for every later one).  Not a
 * hot path: the general hooks' entry and exit.  On a stream socket
 * sendmmsg() is a sendmsg() per message, in order (the kernel's
 * __sys_sendmmsg()), so each message the kernel took is followed as the
 * sendmsg() it is, by sk_out_iov() with the bytes it took (msg_len: the
 * last one may be short, and the ones from r on were not sent): a head in
 * one message and its body in the next is one response, as over two
 * writes ("Response length", preload/conn.c), two responses in two
 * messages answer two requests, and an HTTP/2 connection's frame walk
 * (conn_h2_written()) sees every byte written.  Only the first message
 * with bytes was followed before: the frames of the others never reached
 * the walk, which missed the HEADERS they carried (the request stayed
 * unanswered, and the next one's read showed nothing: h2-several) or fell
 * out of step with the byte stream (a payload cut between messages), and
 * a second response in a second message answered nothing.  The messages
 * are read only once the kernel has (i < r). */
static __attribute__((noinline)) int
sk_sendmmsg(int fd, struct mmsghdr *vec, unsigned n, int flags, uint8_t hot)
{
	struct ctxshim_conn *c = sk_out_enter(fd, hot);
	int r = real_sendmmsg(fd, vec, n, flags), i;

	for (i = 0; c && i < r; i++)
		if (vec[i].msg_len > 0)
			sk_out_iov(fd, c, vec[i].msg_hdr.msg_iov,
				   vec[i].msg_hdr.msg_iovlen, (ssize_t)vec[i].msg_len);
	return r;
}

static inline int
hook_socket_sendmmsg(int fd, struct mmsghdr *vec, unsigned n, int flags)
{
	uint8_t hot = ctxshim_conn_hot(fd);

	if (__builtin_expect(!(hot & CONN_HOT_OUT), 1))
		return real_sendmmsg(fd, vec, n, flags);
	return sk_sendmmsg(fd, vec, n, flags, hot);
}

#define SK_PWRITEV2(name, off_type)                                               \
	static __attribute__((noinline))                                          \
	ssize_t sk_##name(int fd, const struct iovec *iov, int n, off_type off,   \
			  int fl, uint8_t hot)                                    \
	{                                                                         \
		struct ctxshim_conn *c = sk_out_enter(fd, hot);                   \
		ssize_t r = real_##name(fd, iov, n, off, fl);                     \
                                                                                  \
		if (n > 0)                                                        \
			sk_out_iov(fd, c, iov, (size_t)n, r);                     \
		return r;                                                         \
	}                                                                         \
                                                                                  \
	static inline ssize_t hook_socket_##name(int fd, const struct iovec *iov, \
						 int n, off_type off, int fl)     \
	{                                                                         \
		uint8_t hot = ctxshim_conn_hot(fd);                               \
                                                                                  \
		if (__builtin_expect(!(hot & CONN_HOT_OUT), 1))                   \
			return real_##name(fd, iov, n, off, fl);                  \
		return sk_##name(fd, iov, n, off, fl, hot);                       \
	}

SK_PWRITEV2(pwritev2, off_t)
SK_PWRITEV2(pwritev64v2, off64_t)

/* sendfile and sendfile64 (two symbols to interpose, one call): the
 * general path, then the response body sent from a file (nginx with
 * "sendfile on", after its header's writev) on the connection this thread
 * publishes (sk_out_fast()).  No head: nothing to tell an interim
 * response by. */
#define SK_SENDFILE(name, off_type)                                                    \
	static __attribute__((noinline))                                               \
	ssize_t sk_##name##_any(int out, int in, off_type *off, size_t n, uint8_t hot) \
	{                                                                              \
		struct ctxshim_conn *c = sk_out_enter(out, hot);                       \
		ssize_t r = real_##name(out, in, off, n);                              \
                                                                                       \
		sk_out(out, c, NULL, 0, r);                                            \
		return r;                                                              \
	}                                                                              \
                                                                                       \
	static CTXSHIM_HOT __attribute__((noinline))                                   \
	ssize_t sk_##name(int out, int in, off_type *off, size_t n, uint8_t hot)       \
	{                                                                              \
		struct ctxshim_conn *c = sk_self.c;                                    \
		volatile int keep_fd = out;                                            \
		ssize_t r;                                                             \
                                                                                       \
		if (__builtin_expect(!sk_out_fast(out, c), 0))                         \
			return sk_##name##_any(out, in, off, n, hot);                  \
		r = real_##name(out, in, off, n);                                      \
		SK_OUT_FAST_RETURN(keep_fd, c, NULL, 0, r);                            \
	}                                                                              \
                                                                                       \
	static inline ssize_t hook_socket_##name(int out, int in, off_type *off,       \
						 size_t n)                             \
	{                                                                              \
		uint8_t hot = ctxshim_conn_hot(out);                                   \
                                                                                       \
		if (__builtin_expect(!(hot & CONN_HOT_OUT), 1))                        \
			return real_##name(out, in, off, n);                           \
		return sk_##name(out, in, off, n, hot);                                \
	}

SK_SENDFILE(sendfile, off_t)
SK_SENDFILE(sendfile64, off64_t)

/* splice(): one end is a pipe, the other may be a connection.  Out of a
 * connection (HAProxy's splice-request and splice-response move bodies
 * socket -> pipe -> socket whenever they can), the bytes never reach a
 * buffer the scanner could see: they are the body the scanner is in, and
 * it steps over them (http_scan_skip()) -- without that it would take the
 * connection's next requests for body bytes, or worse, read a head from
 * the middle of one.  Anything else spliced out (a head, a chunk-size
 * line) loses the stream: the connection gets no more contexts, as with
 * MSG_TRUNC.  Into a connection: a write of the response, as sendfile()
 * (no head to tell an interim response by).  Not a hot path: the
 * general hooks' entry and exit, nothing inline. */
static __attribute__((noinline)) ssize_t
sk_splice(int in,
	  __off64_t *oi,
	  int out,
	  __off64_t *oo,
	  size_t n,
	  unsigned fl,
	  uint8_t hot_in,
	  uint8_t hot_out)
{
	struct ctxshim_conn *ci = NULL, *co = NULL;
	ssize_t r;

	if (hot_in & CONN_HOT_IN)
		ci = sk_enter(in, false);
	else if (hot_out & CONN_HOT_OUT)
		co = sk_out_enter(out, hot_out);
	r = real_splice(in, oi, out, oo, n, fl);
	/* sk_enter() gave ci only to a thread that was not busy, and the
	 * real call cannot have left it busy.  Pure code and plain memory
	 * from here (ctxshim_conn_lost() as for MSG_TRUNC): errno stays. */
	if (ci && r > 0 && !http_scan_gave_up(&ci->scan)) {
		sk_busy(true);
		if (http_scan_skip(&ci->scan, (uint64_t)r) < 0)
			ctxshim_conn_lost(ci);
		sk_busy(false);
	} else if (ci && r > 0 && ctxshim_conn_framed(ci)) {
		/* FastCGI records or HTTP/2 frames spliced out unseen: out
		 * of step. */
		sk_busy(true);
		ctxshim_conn_lost(ci);
		sk_busy(false);
	}
	sk_out(out, co, NULL, 0, r);
	return r;
}

static inline ssize_t
hook_socket_splice(int in, __off64_t *oi, int out, __off64_t *oo, size_t n, unsigned fl)
{
	uint8_t hot_in = ctxshim_conn_hot(in), hot_out = ctxshim_conn_hot(out);

	if (__builtin_expect(!(hot_in & CONN_HOT_IN) && !(hot_out & CONN_HOT_OUT), 1))
		return real_splice(in, oi, out, oo, n, fl);
	return sk_splice(in, oi, out, oo, n, fl, hot_in, hot_out);
}

/* ---- waits ---- */

/* Handlers run after the next wait.  Python's asyncio reads a request in
 * the loop's read callback, queues its handler (call_soon) and runs it
 * after its next epoll_wait, which it calls with timeout 0 because
 * callbacks are ready; a handler that blocks the loop (time.sleep, a
 * synchronous database call) would show nothing if that wait cleared the
 * context.  So a wait with timeout 0 keeps it (sk_wait_keeps()) when the
 * thread publishes exactly what it published for a request head it read,
 * that request is its connection's current one, not answered, and it is
 * the only head the thread read since it last finished with a request
 * (sk.mark: a write of the response on the thread, or a wait that
 * cleared) and it switched to no other request's context since (an
 * upstream's answer read before the head, whose continuation may run
 * first): the loop round read no other connection's request whose
 * handler could run first.  Heads are counted by the span-ids the thread
 * drew (span_rng is a counter plus a mix: one draw since the mark is
 * state == mark + gamma), so that neither the head's read (B4b) nor the
 * idle wait's one test (B1i) pays for the count; sk_pending keeps such a
 * context out of that test.  Anything else clears as before: a wait with
 * a timeout, a second head (the loop round read two connections and we
 * cannot tell whose handler runs), a switch to another connection's
 * context, the response.  nginx, libevent, HAProxy and libuv call their
 * handlers in the read's callback and answer there (then the wait clears
 * as before) or wait with a timeout; a zero-timeout wait of theirs (nginx
 * with posted events) keeps a request they read and have not answered
 * until the I/O of another connection or the next wait with a timeout.
 * The connection may have no fd: a TLS session over memory BIOs, as
 * asyncio's TLS transport has, is followed under a virtual id
 * (hook-openssl.c), hence ctxshim_conn_by_id(). */
static bool
sk_wait_keeps(void)
{
	struct ctxshim_conn *c = sk_self.c;
	uint64_t s = ctxshim_self.span_rng.state;
	int fd = sk_self.fdp1 - 1;

	if (ctxshim_sk_gate_get() != CTXSHIM_SK_GATE_PENDING ||
	    s != sk_self.mark + ctxshim_self.span_rng.gamma ||
	    sk_self.span != ctx_mix64(s) || fd < 0 || !c || c == &sk_nil_conn ||
	    ctxshim_conn_by_id(fd) != c)
		return false;
	return sk_publishes(fd, c) && !ctxshim_conn_idle(c);
}

/* The waits' slow path (the thread publishes something from a
 * connection, and not just an answered request: see the epoll hooks):
 * keep it through a zero timeout (above), or clear it and count heads
 * from here.  zero: the wait does not block. */
static void
sk_wait_idle(bool zero, const char *reason)
{
	if (sk_self.busy || (zero && sk_wait_keeps()))
		return;
	sk_idle(reason);
	if (!sk_self.busy) {
		ctxshim_self.sk_pending = 0;
		sk_self.mark = ctxshim_self.span_rng.state;
	}
}

/* The waits: one TLS load when this thread published nothing from a
 * connection; otherwise clear it (epoll: inline, ctxshim_sk_idle_fast(),
 * when it is an answered request's or a switch's: sk_pending is 0), or
 * keep or clear it here (sk_wait_idle()), then wait. */
static __attribute__((noinline, cold)) int
sk_epoll_wait_slow(int ep, struct epoll_event *ev, int n, int to)
{
	sk_wait_idle(to == 0, "epoll_wait");
	return real_epoll_wait(ep, ev, n, to);
}

/* Inline in the exported function: one TLS address for both tests, no
 * jump to a function of its own (B1i).  Every other case (the event log,
 * a request not answered) is a tail call of its own: a call here made the
 * function keep ep in a saved register. */
static inline __attribute__((always_inline)) int
hook_socket_epoll_wait(int ep, struct epoll_event *ev, int n, int to)
{
	/* The thread publishes the socket level's own context (so sk.fdp1 is
	 * set) and nothing is in progress: the usual wait of an event loop
	 * after a request, one test (ctxshim_sk_idle_fast()). */
	if (__builtin_expect(ctxshim_sk_gate_get() == CTXSHIM_SK_GATE_OWNED, 1) &&
	    !ctxshim_events_on()) {
		(void)ctxshim_sk_idle_fast();
		return real_epoll_wait(ep, ev, n, to);
	}
	if (__builtin_expect(sk_self.fdp1 != 0, 0))
		return sk_epoll_wait_slow(ep, ev, n, to);
	return real_epoll_wait(ep, ev, n, to);
}

static __attribute__((noinline, cold)) int
sk_epoll_pwait_slow(int ep, struct epoll_event *ev, int n, int to, const sigset_t *ss)
{
	sk_wait_idle(to == 0, "epoll_pwait");
	return real_epoll_pwait(ep, ev, n, to, ss);
}

static inline __attribute__((always_inline)) int
hook_socket_epoll_pwait(
	int ep, struct epoll_event *ev, int n, int to, const sigset_t *ss)
{
	/* As hook_socket_epoll_wait(). */
	if (__builtin_expect(ctxshim_sk_gate_get() == CTXSHIM_SK_GATE_OWNED, 1) &&
	    !ctxshim_events_on()) {
		(void)ctxshim_sk_idle_fast();
		return real_epoll_pwait(ep, ev, n, to, ss);
	}
	if (__builtin_expect(sk_self.fdp1 != 0, 0))
		return sk_epoll_pwait_slow(ep, ev, n, to, ss);
	return real_epoll_pwait(ep, ev, n, to, ss);
}

static __attribute__((noinline)) int
sk_epoll_pwait2(int ep,
		struct epoll_event *ev,
		int n,
		const struct timespec *to,
		const sigset_t *ss)
{
	sk_wait_idle(false, "epoll_pwait2");
	return real_epoll_pwait2(ep, ev, n, to, ss);
}

static inline int
hook_socket_epoll_pwait2(int ep,
			 struct epoll_event *ev,
			 int n,
			 const struct timespec *to,
			 const sigset_t *ss)
{
	if (__builtin_expect(sk_self.fdp1 != 0, 0))
		return sk_epoll_pwait2(ep, ev, n, to, ss);
	return real_epoll_pwait2(ep, ev, n, to, ss);
}

static __attribute__((noinline)) int
sk_poll(struct pollfd *f, nfds_t n, int to)
{
	int r;

	if (!f || !n)
		return real_poll(f, n, to);
	r = real_poll(f, n, 0);
	if (r < 0)
		return r; /* an error: what the call gives at once */
	if (sk_pollfds_tracked(f, n))
		sk_wait_idle(to == 0, "poll");
	return r > 0 || to == 0 ? r : real_poll(f, n, to);
}

static inline int
hook_socket_poll(struct pollfd *f, nfds_t n, int to)
{
	if (__builtin_expect(sk_self.fdp1 != 0, 0))
		return sk_poll(f, n, to);
	return real_poll(f, n, to);
}

static __attribute__((noinline)) int
sk_poll_chk(struct pollfd *f, nfds_t n, int to, size_t fl)
{
	int r;

	if (!f || !n)
		return real_poll_chk(f, n, to, fl);
	r = real_poll_chk(f, n, 0, fl);
	if (r < 0)
		return r;
	if (sk_pollfds_tracked(f, n))
		sk_wait_idle(to == 0, "poll");
	return r > 0 || to == 0 ? r : real_poll_chk(f, n, to, fl);
}

static inline int
hook_socket_poll_chk(struct pollfd *f, nfds_t n, int to, size_t fl)
{
	if (__builtin_expect(sk_self.fdp1 != 0, 0))
		return sk_poll_chk(f, n, to, fl);
	return real_poll_chk(f, n, to, fl);
}

static const struct timespec sk_zero_ts;

/* Would the kernel reject timeout to (fs/select.c, ppoll:
 * poll_select_set_timeout(), timespec64_valid())?  Then ppoll() fails
 * with EINVAL whatever the fds, and the probe, which waits with our own
 * zero timeout, must not answer for it: with fds ready it returned their
 * count where the application gets -1/EINVAL.  glibc's ppoll() copies
 * *to before its system call (sysdeps/unix/sysv/linux/ppoll.c), so
 * reading it here faults only where the real call would. */
static inline bool
sk_ppoll_to_invalid(const struct timespec *to)
{
	return to && (to->tv_sec < 0 || (unsigned long)to->tv_nsec >= 1000000000ul);
}

/* Otherwise *to is the application's, unchecked: the probe uses our own
 * zero timeout and the real wait always follows a probe that returned 0. */
static __attribute__((noinline)) int
sk_ppoll(struct pollfd *f, nfds_t n, const struct timespec *to, const sigset_t *ss)
{
	int r;

	if (!f || !n || sk_ppoll_to_invalid(to))
		return real_ppoll(f, n, to, ss);
	r = real_ppoll(f, n, &sk_zero_ts, ss);
	if (r < 0)
		return r;
	if (sk_pollfds_tracked(f, n))
		sk_wait_idle(to && !to->tv_sec && !to->tv_nsec, "ppoll");
	return r > 0 ? r : real_ppoll(f, n, to, ss);
}

static inline int
hook_socket_ppoll(struct pollfd *f,
		  nfds_t n,
		  const struct timespec *to,
		  const sigset_t *ss)
{
	if (__builtin_expect(sk_self.fdp1 != 0, 0))
		return sk_ppoll(f, n, to, ss);
	return real_ppoll(f, n, to, ss);
}

static __attribute__((noinline)) int
sk_ppoll_chk(struct pollfd *f,
	     nfds_t n,
	     const struct timespec *to,
	     const sigset_t *ss,
	     size_t fl)
{
	int r;

	if (!f || !n || sk_ppoll_to_invalid(to))
		return real_ppoll_chk(f, n, to, ss, fl);
	r = real_ppoll_chk(f, n, &sk_zero_ts, ss, fl);
	if (r < 0)
		return r;
	if (sk_pollfds_tracked(f, n))
		sk_wait_idle(to && !to->tv_sec && !to->tv_nsec, "ppoll");
	return r > 0 ? r : real_ppoll_chk(f, n, to, ss, fl);
}

static inline int
hook_socket_ppoll_chk(struct pollfd *f,
		      nfds_t n,
		      const struct timespec *to,
		      const sigset_t *ss,
		      size_t fl)
{
	if (__builtin_expect(sk_self.fdp1 != 0, 0))
		return sk_ppoll_chk(f, n, to, ss, fl);
	return real_ppoll_chk(f, n, to, ss, fl);
}

static __attribute__((noinline)) int
sk_select(int n, fd_set *r, fd_set *w, fd_set *x, struct timeval *t)
{
	sk_fdset_idle(n, r, w, x, "select");
	return real_select(n, r, w, x, t);
}

static inline int
hook_socket_select(int n, fd_set *r, fd_set *w, fd_set *x, struct timeval *t)
{
	if (__builtin_expect(sk_self.fdp1 != 0, 0))
		return sk_select(n, r, w, x, t);
	return real_select(n, r, w, x, t);
}

static __attribute__((noinline)) int
sk_pselect(int n,
	   fd_set *r,
	   fd_set *w,
	   fd_set *x,
	   const struct timespec *t,
	   const sigset_t *ss)
{
	sk_fdset_idle(n, r, w, x, "pselect");
	return real_pselect(n, r, w, x, t, ss);
}

static inline int
hook_socket_pselect(int n,
		    fd_set *r,
		    fd_set *w,
		    fd_set *x,
		    const struct timespec *t,
		    const sigset_t *ss)
{
	if (__builtin_expect(sk_self.fdp1 != 0, 0))
		return sk_pselect(n, r, w, x, t, ss);
	return real_pselect(n, r, w, x, t, ss);
}

/* ---- save and restore by library hooks (hook-scope.h) ----
 *
 * A library hook that runs the application's callback under another
 * context saves the thread's context and restores it afterwards (libuv's
 * after-work callbacks, libcurl's client span, libmicrohttpd, libevent,
 * nghttp2).  Meanwhile the socket level may have moved on (the callback
 * wrote its own request's response, so the socket level followed that
 * connection) and forgotten the context it published before: restored, it
 * would stay published on an idle event loop for good.  So the save stamps
 * the copy with the connection whose context it is (if the socket level
 * publishes it now), and the restore hands it back: the socket level then
 * follows it as if it had never been replaced (cleared by the next wait,
 * the close, the next request).  Neither is on the socket level's own
 * request path.
 *
 * Handing it back is not enough when the request was answered while the
 * copy waited: a coroutine scheduler that reads a head (its thread shows
 * that request) and switches to the request's coroutine, which answers
 * it and switches back, showed the answered request again until its next
 * wait.  So the stamp also tells whether the request was live (its
 * connection's current request, not answered yet), and a copy of a live
 * request that has been answered since -- or replaced by a newer one, or
 * whose connection was closed -- is not shown again
 * (hook_socket_ctx_answered()).  The request is looked for where its
 * connection is now (sk_req_live()): through a copy whose ring holds the
 * state (a read through a dup() moves it there), and through the copy
 * that carries the connection on when the descriptor stamped was closed.
 *
 * A copy of a request that was not live when it was taken comes back as
 * before: answered already (the thread's work after its response: a
 * coroutine that answered its request and yields before it logs or
 * cleans up is still that request's when it resumes, and the next wait
 * clears it), also when its response made a pipelined request current
 * (the thread still showing the one before; judged by the later
 * request's state, it came back or not depending on whether that one
 * was answered meanwhile).  So does a copy of a framed connection's
 * (HTTP/2, FastCGI) request, whose current request moves with every
 * stream or request while the others may still be open. */

bool
hook_socket_ctx_stamp_conn(struct ctxshim_ctx *saved)
{
	saved->sock_fdp1 = 0;
	saved->sock_gen = 0;
	if (sk_self.busy || !sk_self.fdp1 || sk_span(saved) != sk_self.span)
		return false;
	saved->sock_fdp1 = sk_self.fdp1;
	saved->sock_gen = sk_self.gen;
	return true;
}

uint32_t
hook_socket_ctx_stamp(struct ctxshim_ctx *saved)
{
	struct ctxshim_conn *c;
	int id;

	if (!hook_socket_ctx_stamp_conn(saved) || !sk_self.c ||
	    sk_self.c == &sk_nil_conn)
		return HOOK_SOCKET_SEQ_NONE;
	c = sk_req_live(sk_self.fdp1 - 1, sk_self.gen, sk_self.span, &id);
	if (!c || ctxshim_conn_framed(c))
		return HOOK_SOCKET_SEQ_NONE;
	/* Even: sk_req_live() saw it so (a rewrite since makes it odd,
	 * of HOOK_SOCKET_SEQ_NONE's kind: nothing to check). */
	return atomic_load_explicit(&c->seq, memory_order_relaxed);
}

bool
hook_socket_ctx_answered(const struct ctxshim_ctx *c, uint32_t seq)
{
	int id;

	if ((seq & 1) || !c->sock_fdp1)
		return false;
	/* Slots never go away (conn.h): the loads are safe whatever
	 * happened to the connection. */
	return !sk_req_live(c->sock_fdp1 - 1, c->sock_gen, sk_span(c), &id);
}

void
hook_socket_ctx_restored(const struct ctxshim_ctx *c)
{
	const struct ctxshim_ctx *cur;
	struct ctxshim_conn *sc;

	if (!c->sock_fdp1 || sk_self.busy)
		return;
	cur = ctxshim_current();
	/* Only if the restore took (not dropped in a signal handler that
	 * interrupted an update). */
	if (!cur || sk_span(cur) != sk_span(c))
		return;
	sk_busy(true);
	sk_self.span = sk_span(c);
	sc = ctxshim_conn_get(c->sock_fdp1 - 1);
	/* As stamped where its connection still is (the usual case, no look
	 * further), else followed where it is now if it is live (its close,
	 * a write through the descriptor that holds it), else as stamped. */
	if (sk_req_here(sc, c->sock_gen) ||
	    !sk_req_follow(c->sock_fdp1 - 1, c->sock_gen)) {
		sk_self.fdp1 = c->sock_fdp1;
		sk_self.gen = c->sock_gen;
		sk_self.c = sc ? sc : &sk_nil_conn;
	}
	sk_busy(false);
}

void
hook_socket_owner_save(struct hook_socket_owner *o)
{
	o->fdp1 = sk_self.busy ? -1 : sk_self.fdp1;
	o->gen = sk_self.gen;
	o->span = sk_self.span;
	o->c = sk_self.c;
}

void
hook_socket_owner_put(const struct hook_socket_owner *o)
{
	if (o->fdp1 < 0 || sk_self.busy)
		return;
	sk_busy(true);
	sk_self.fdp1 = o->fdp1;
	sk_self.gen = o->gen;
	sk_self.span = o->span;
	sk_self.c = o->c;
	sk_busy(false);
}

/* Coroutines resumed by an event loop's reactor (hook-scope.h, "What a
 * coroutine waits for").  note(): the connection the side that suspends
 * now last read since it was resumed, which is forgotten, so that the
 * side resumed starts with none; by its generation, so that a descriptor
 * closed and reused meanwhile is not taken for it.  publish(): publish
 * that connection's current request, as a read of it does, if it is
 * live (not answered) and the connection is where it was.  Not a framed
 * connection's (HTTP/2, FastCGI), whose current request moves with every
 * stream while the others may still be open; nor a copy's.  By id, not
 * fd: a TLS session without an fd (Boost.Asio's ssl::stream, over a BIO
 * pair) is read through SSL_read() under a virtual id (conn.h), and a
 * coroutine waits for it, not for the socket under it, whose ciphertext
 * the socket level does not follow. */
void
hook_socket_rd_note(struct hook_socket_rd *rd, int fdp1)
{
	struct ctxshim_conn *c = ctxshim_conn_by_id(fdp1 - 1);

	sk_self.rdp1 = 0;
	rd->fdp1 = fdp1;
	rd->gen = 0;
	if (c)
		rd->gen = atomic_load_explicit(&c->gen, memory_order_relaxed);
	else
		rd->fdp1 = 0;
}

bool
hook_socket_rd_publish(const struct hook_socket_rd *rd, const char *reason)
{
	int fd = rd->fdp1 - 1;
	struct ctxshim_conn *c;

	if (sk_self.busy)
		return false;
	c = ctxshim_conn_by_id(fd);
	if (!sk_req_here(c, rd->gen) || !ctxshim_conn_live(c) || ctxshim_conn_framed(c))
		return false;
	sk_busy(true);
	sk_publish(fd, c, ctxshim_current() ? CTXSHIM_EV_SWITCH : CTXSHIM_EV_ATTACH,
		   reason);
	sk_busy(false);
	return sk_self.fdp1 == rd->fdp1;
}

void
hook_socket_disown(int fd)
{
	if (fd < 0 || sk_self.busy || sk_self.fdp1 != fd + 1)
		return;
	sk_busy(true);
	sk_self.fdp1 = 0;
	sk_busy(false);
}

/* ---- nghttp2 ---- */

__attribute__((cold)) bool
hook_socket_h2_library(struct ctxshim_ctx *adopt, int32_t *stream)
{
	struct ctxshim_conn *c = NULL;
	const struct ctxshim_ctx *cur;
	int saved_errno, own;
	bool live = false;
	uint32_t id;

	if (sk_self.busy) {
		(void)ctxshim_conn_h2_library(NULL);
		return false;
	}
	saved_errno = errno;
	sk_busy(true);
	own = sk_owned_fd();
	if (own >= 0 && sk_self.c &&
	    sk_self.gen ==
		    atomic_load_explicit(&sk_self.c->gen, memory_order_relaxed) &&
	    ctxshim_conn_h2(sk_self.c)) {
		c = sk_self.c;
		live = ctxshim_conn_live(c);
	}
	if (c && ctxshim_conn_h2_upgraded(c)) {
		/* Upgraded from HTTP/1.1 before the session was made: back
		 * to what it was, the upgrade request left on the thread for
		 * nghttp2_session_upgrade2() (hooks/hook-nghttp2.c,
		 * nh_upgraded()). */
		(void)ctxshim_conn_h2_library(c);
		sk_busy(false);
		errno = saved_errno;
		return false;
	}
	/* The thread shows c's current request (sk_owned_fd()): the
	 * session's stream of that id takes its context over. */
	id = ctxshim_conn_h2_library(c);
	cur = ctxshim_current();
	live = live && id && id <= INT32_MAX && cur;
	if (live) {
		ctxshim_ctx_copy(adopt, cur);
		adopt->sock_fdp1 = 0;
		adopt->sock_gen = 0;
		*stream = (int32_t)id;
	}
	if (c)
		sk_drop(own, "h2-library");
	sk_busy(false);
	errno = saved_errno;
	return live;
}

/* ---- TLS (hook-tls.h) ---- */

/* fd becomes TLS for session key (conn.c, "Sessions"), once per
 * connection: out of line, so that the usual call of
 * hook_socket_tls_find() (fd TLS already) keeps its registers and its
 * instructions.  Keeps errno. */
static __attribute__((noinline, cold)) struct ctxshim_conn *
sk_tls_take(int fd, const void *key)
{
	int saved_errno = errno;
	struct ctxshim_conn *c = ctxshim_conn_tls_session(fd, key);

	errno = saved_errno;
	return c;
}

bool
hook_socket_tls_find(
	int fd, const void *key, bool server, bool create, struct hook_tls_conn *t)
{
	uint8_t hot;

	if (sk_self.busy)
		return false;
	if (fd >= 0) {
		hot = ctxshim_conn_hot(fd);
		if (__builtin_expect(hot == CONN_HOT_NONE || hot == CONN_HOT_SHIM, 1) ||
		    hot == CONN_HOT_UP)
			return false;
		if (hot == CONN_HOT_TLS || hot == CONN_HOT_TLS_CLAIMED) {
			t->c = ctxshim_conn_get(fd);
		} else {
			/* Handed to the TLS library before the socket level
			 * read its first byte (or over a plain start). */
			t->c = sk_tls_take(fd, key);
			hot = ctxshim_conn_hot(fd);
		}
		if (!t->c)
			return false;
		t->id = fd;
		t->claimed = hot == CONN_HOT_TLS_CLAIMED;
		return true;
	}
	if (!server || !key)
		return false;
	t->c = ctxshim_conn_virt(key, create, &t->id);
	/* Library hooks claim fds; a session without one is never claimed. */
	t->claimed = false;
	return t->c != NULL;
}

void
hook_socket_tls_read_begin(const struct hook_tls_conn *t)
{
	if (!t->claimed)
		(void)sk_enter_slot(t->id, t->c, false);
}

void
hook_socket_tls_read_end(const struct hook_tls_conn *t, const void *buf, size_t n)
{
	struct sk_in in;

	if (t->claimed || n == 0 || !sk_in_begin(&in, t->id, t->c))
		return;
	sk_in_bytes(&in, buf, n);
	sk_in_end(&in);
}

void
hook_socket_tls_write_begin(const struct hook_tls_conn *t)
{
	if (!t->claimed)
		(void)sk_enter_slot(t->id, t->c, true);
}

void
hook_socket_tls_write_end(const struct hook_tls_conn *t, const void *buf, size_t n)
{
	if (n > 0)
		sk_out(t->id, t->c, buf, buf ? n : 0, (ssize_t)n);
}

void
hook_socket_tls_write_end_head(const struct hook_tls_conn *t,
			       const void *head,
			       size_t head_len,
			       size_t n)
{
	if (n == 0)
		return;
	if (!head || head_len > n)
		head_len = head ? n : 0;
	/* Only the first head_len of the n bytes are at hand: an interim
	 * response that does not end within them, in a write that goes on
	 * past them, may be followed by the final response ("103 Early
	 * Hints" with its Link lines and the response, in one write), which
	 * those bytes cannot tell.  sk_out() would take the write for the
	 * interim response alone and leave the request unanswered: it is
	 * judged as a write of unknown bytes instead, as without them.  Not
	 * on a connection followed as HTTP/2 (h2 over TLS): its bytes are
	 * frames, a DATA payload may start like an interim response, and the
	 * frame walk needs what bytes it has (sk_out_v() says why). */
	if (head_len < n && ctxshim_conn_interim(head, head_len) &&
	    !ctxshim_conn_h2(t->c)) {
		size_t k = sk_interim_end(head, head_len, n);

		if (ctxshim_conn_interim((const uint8_t *)head + k, head_len - k))
			head_len = 0;
	}
	sk_out(t->id, t->c, head_len ? head : NULL, head_len, (ssize_t)n);
}

void
hook_socket_tls_end(int fd, const void *key, const char *reason)
{
	struct ctxshim_conn *c;
	int saved_errno, id = fd;
	bool ends;
	uint8_t hot;

	if (sk_self.busy)
		return;
	saved_errno = errno;
	sk_busy(true);
	if (fd >= 0) {
		hot = ctxshim_conn_hot(fd);
		c = hot == CONN_HOT_TLS || hot == CONN_HOT_TLS_CLAIMED
			    ? ctxshim_conn_get(fd)
			    : NULL;
	} else {
		c = ctxshim_conn_virt(key, false, &id);
	}
	/* The fd slot itself lives on until close(): the application may
	 * still shut the socket down, or free the session after closing
	 * the fd.  Then its number may already name a new connection: the
	 * generation tells it apart from a context published before the
	 * close, and the slot's session from one published since, under the
	 * new generation (conn.c, "Sessions"). */
	ends = c && (fd < 0 || ctxshim_conn_tls_end(fd, key));
	if (ends && sk_owned_fd() == id &&
	    sk_self.gen == atomic_load_explicit(&c->gen, memory_order_relaxed))
		sk_drop(id, reason);
	if (fd < 0 && c)
		ctxshim_conn_virt_forget(key);
	sk_busy(false);
	errno = saved_errno;
}

/* ---- exported names ---- */

HOOK_EXPORT __attribute__((hot)) ssize_t
read(int fd, void *buf, size_t n)
{
	return hook_socket_read(fd, buf, n);
}

HOOK_EXPORT ssize_t
__read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	return hook_socket_read_chk(fd, buf, n, buflen);
}

HOOK_EXPORT __attribute__((hot, no_reorder)) ssize_t
recv(int fd, void *buf, size_t n, int flags)
{
	return hook_socket_recv(fd, buf, n, flags);
}

HOOK_EXPORT ssize_t
__recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	return hook_socket_recv_chk(fd, buf, n, buflen, flags);
}

HOOK_EXPORT ssize_t
recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *a, socklen_t *al)
{
	return hook_socket_recvfrom(fd, buf, n, flags, a, al);
}

HOOK_EXPORT ssize_t
__recvfrom_chk(int fd,
	       void *buf,
	       size_t n,
	       size_t buflen,
	       int flags,
	       struct sockaddr *a,
	       socklen_t *al)
{
	return hook_socket_recvfrom_chk(fd, buf, n, buflen, flags, a, al);
}

HOOK_EXPORT ssize_t
readv(int fd, const struct iovec *iov, int iovcnt)
{
	return hook_socket_readv(fd, iov, iovcnt);
}

HOOK_EXPORT ssize_t
recvmsg(int fd, struct msghdr *msg, int flags)
{
	return hook_socket_recvmsg(fd, msg, flags);
}

HOOK_EXPORT int
recvmmsg(int fd, struct mmsghdr *vec, unsigned int n, int flags, struct timespec *t)
{
	return hook_socket_recvmmsg(fd, vec, n, flags, t);
}

HOOK_EXPORT int
accept(int fd, struct sockaddr *a, socklen_t *al)
{
	return hook_socket_accept(fd, a, al);
}

HOOK_EXPORT int
accept4(int fd, struct sockaddr *a, socklen_t *al, int flags)
{
	return hook_socket_accept4(fd, a, al, flags);
}

HOOK_EXPORT int
connect(int fd, const struct sockaddr *a, socklen_t al)
{
	return hook_socket_connect(fd, a, al);
}

/* Aligned (CTXSHIM_HOT): the check of every close() of a file, eight
 * instructions, in one code line (bench/hot-lines.sh). */
HOOK_EXPORT CTXSHIM_HOT_FIRST int
close(int fd)
{
	return hook_socket_close(fd);
}

HOOK_EXPORT int
dup(int oldfd)
{
	return hook_socket_dup(oldfd);
}

HOOK_EXPORT int
fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return hook_socket_fcntl(sk_real.fcntl, fd, cmd, arg);
}

HOOK_EXPORT int
fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return hook_socket_fcntl(sk_real.fcntl64, fd, cmd, arg);
}

HOOK_EXPORT int
fclose(FILE *fp)
{
	return hook_socket_fclose(fp);
}

HOOK_EXPORT int
dup2(int oldfd, int newfd)
{
	return hook_socket_dup2(oldfd, newfd);
}

HOOK_EXPORT int
dup3(int oldfd, int newfd, int flags)
{
	return hook_socket_dup3(oldfd, newfd, flags);
}

HOOK_EXPORT int
close_range(unsigned int lo, unsigned int hi, int flags)
{
	return hook_socket_close_range(lo, hi, flags);
}

HOOK_EXPORT void
closefrom(int lo)
{
	hook_socket_closefrom(lo);
}

HOOK_EXPORT __attribute__((hot)) ssize_t
write(int fd, const void *buf, size_t n)
{
	return hook_socket_write(fd, buf, n);
}

HOOK_EXPORT __attribute__((hot)) ssize_t
send(int fd, const void *buf, size_t n, int flags)
{
	return hook_socket_send(fd, buf, n, flags);
}

HOOK_EXPORT ssize_t
sendto(int fd,
       const void *buf,
       size_t n,
       int flags,
       const struct sockaddr *a,
       socklen_t al)
{
	return hook_socket_sendto(fd, buf, n, flags, a, al);
}

HOOK_EXPORT ssize_t
sendmsg(int fd, const struct msghdr *msg, int flags)
{
	return hook_socket_sendmsg(fd, msg, flags);
}

HOOK_EXPORT __attribute__((hot, no_reorder)) ssize_t
writev(int fd, const struct iovec *iov, int iovcnt)
{
	return hook_socket_writev(fd, iov, iovcnt);
}

HOOK_EXPORT int
sendmmsg(int fd, struct mmsghdr *vec, unsigned int n, int flags)
{
	return hook_socket_sendmmsg(fd, vec, n, flags);
}

HOOK_EXPORT ssize_t
pwritev2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	return hook_socket_pwritev2(fd, iov, n, off, flags);
}

HOOK_EXPORT ssize_t
pwritev64v2(int fd, const struct iovec *iov, int n, off64_t off, int flags)
{
	return hook_socket_pwritev64v2(fd, iov, n, off, flags);
}

HOOK_EXPORT __attribute__((hot)) ssize_t
sendfile(int out, int in, off_t *off, size_t n)
{
	return hook_socket_sendfile(out, in, off, n);
}

HOOK_EXPORT __attribute__((hot)) ssize_t
sendfile64(int out, int in, off64_t *off, size_t n)
{
	return hook_socket_sendfile64(out, in, off, n);
}

HOOK_EXPORT ssize_t
splice(int in, __off64_t *oi, int out, __off64_t *oo, size_t n, unsigned int fl)
{
	return hook_socket_splice(in, oi, out, oo, n, fl);
}

HOOK_EXPORT __attribute__((hot, no_reorder)) int
epoll_wait(int ep, struct epoll_event *ev, int n, int to)
{
	return hook_socket_epoll_wait(ep, ev, n, to);
}

HOOK_EXPORT __attribute__((hot)) int
epoll_pwait(int ep, struct epoll_event *ev, int n, int to, const sigset_t *ss)
{
	return hook_socket_epoll_pwait(ep, ev, n, to, ss);
}

HOOK_EXPORT int
epoll_pwait2(int ep,
	     struct epoll_event *ev,
	     int n,
	     const struct timespec *to,
	     const sigset_t *ss)
{
	return hook_socket_epoll_pwait2(ep, ev, n, to, ss);
}

HOOK_EXPORT int
poll(struct pollfd *f, nfds_t n, int to)
{
	return hook_socket_poll(f, n, to);
}

HOOK_EXPORT int
__poll_chk(struct pollfd *f, nfds_t n, int to, size_t fl)
{
	return hook_socket_poll_chk(f, n, to, fl);
}

HOOK_EXPORT int
ppoll(struct pollfd *f, nfds_t n, const struct timespec *to, const sigset_t *ss)
{
	return hook_socket_ppoll(f, n, to, ss);
}

HOOK_EXPORT int
__ppoll_chk(struct pollfd *f,
	    nfds_t n,
	    const struct timespec *to,
	    const sigset_t *ss,
	    size_t fl)
{
	return hook_socket_ppoll_chk(f, n, to, ss, fl);
}

HOOK_EXPORT int
select(int n, fd_set *r, fd_set *w, fd_set *x, struct timeval *t)
{
	return hook_socket_select(n, r, w, x, t);
}

HOOK_EXPORT int
pselect(int n,
	fd_set *r,
	fd_set *w,
	fd_set *x,
	const struct timespec *t,
	const sigset_t *ss)
{
	return hook_socket_pselect(n, r, w, x, t, ss);
}
