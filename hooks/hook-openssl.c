/* SPDX-License-Identifier: Apache-2.0 */
/* OpenSSL 3 (libssl.so.3, libcrypto.so.3 for the SSL BIO): the plaintext
 * of TLS server connections goes
 * to the socket level's request-head scanner (hook-tls.h), so a TLS
 * request gets its context exactly as a plain one does, and the thread's
 * record follows TLS connections by the same rules.
 *
 * Hooks: SSL_read, SSL_read_ex (bytes in), SSL_peek, SSL_peek_ex and
 * SSL_do_handshake (the thread works on the connection, but no request
 * bytes arrive: it only follows, as a socket read of a peek would),
 * SSL_write, SSL_write_ex (the request is answered), SSL_free (the session
 * ends with its last reference, see "References"), SSL_clear (the session
 * object is reset for another connection, see "Reuse"), SSL_up_ref and
 * SSL_dup (a reference more), SSL_set_fd (the fd carries TLS from now on: the
 * socket level stops scanning it before the handshake); and libcrypto's
 * BIO_read, BIO_read_ex, BIO_write, BIO_write_ex, for the SSL BIO (see
 * "The SSL BIO").  The handshake
 * matters for event loops: the socket level no longer follows a TLS fd's
 * ciphertext reads, so without it a loop handshaking a new connection
 * would still show the request it worked on before.  libssl calls
 * SSL_do_handshake (from SSL_accept, and from the SSL BIO's
 * BIO_do_handshake()), SSL_free and SSL_clear through its PLT (also from
 * the SSL BIO: BIO_free() of one that owns its session), SSL_read_ex and
 * SSL_write_ex only from SSL_read_early_data and SSL_write_early_data:
 * those are the application's calls too, and SSL_read does not call
 * SSL_read_ex, so nothing is seen twice.  That is also how a TLS 1.3
 * server's 0-RTT data is followed: a request read with
 * SSL_read_early_data (nginx's ssl_early_data: one byte during the
 * handshake, the rest after) gets its context, and its answer written
 * with SSL_write_early_data answers it (test-integration-tls.c,
 * test_nginx_early_data).
 *
 * The SSL BIO.  An application may use a session only through an SSL BIO
 * (BIO_f_ssl(), BIO_new_ssl()), often under a buffer BIO: `openssl
 * s_server -WWW` reads requests with BIO_gets() and writes responses with
 * BIO_puts() and BIO_flush().  OpenSSL 3.0's SSL BIO reads and writes
 * with libssl's internal functions, not through the exported SSL_read_ex
 * and SSL_write_ex, so the hooks above never saw its bytes: a server that
 * read through one got no context, and one that answered through one
 * left its request unanswered, and the next request on the connection
 * showed its context.  Every BIO call reaches an SSL BIO's data through
 * libcrypto's BIO_read, BIO_read_ex, BIO_write or BIO_write_ex, called
 * through a PLT: the application's own calls, a buffer BIO's reads and
 * its flush (BIO_gets(), BIO_puts() and BIO_flush() of the buffer BIO),
 * the SSL BIO's BIO_puts() (BIO_write(), from libssl); the SSL BIO has no
 * BIO_gets().  So those four are hooked, at libcrypto's version node, and
 * on an SSL BIO do around the real call what the SSL_read and SSL_write
 * hooks do, for the session BIO_get_ssl() names (ossl_bio_conn(), then
 * ossl_conn()).  Any other BIO (libssl's own reads and writes of the
 * ciphertext, memory and file BIOs) costs one call of BIO_method_type()
 * and passes straight through.  Only libssl's own SSL BIO is followed:
 * its method's name (BIO_method_name(), compared as a pointer) must be
 * that of BIO_f_ssl(), so that a BIO of an application's method that
 * took the SSL BIO's type never gets a BIO_get_ssl() it did not make.
 * Not followed: an SSL BIO with a callback of the application's
 * (BIO_get_ssl() is a BIO_ctrl() the callback would see); one met before
 * libssl.so.3 is bound (its first SSL_new() binds it, through
 * SSL_clear()).
 *
 * Nothing is seen twice: while a followed call (SSL_read, SSL_write and
 * their _ex, or one of the four on an SSL BIO) is in the real call,
 * ossl_in_io (reads) or ossl_in_wr (writes) holds its session (only
 * compared, never dereferenced).  The SSL_* hooks pass through a call of
 * that direction for that session, which can only carry that call's
 * bytes: an SSL BIO that does call SSL_read_ex or SSL_write_ex through
 * the PLT (another OpenSSL's, or an application's BIO of that type).  A
 * direction each: a session written from inside its own read (a writer
 * coroutine answering while the reader is parked in SSL_read()) is
 * followed.  The BIO hooks pass through every call made while either is
 * set: the same session's, or a BIO under a followed session (libssl's
 * reads and writes of its records, which need not even have their type
 * asked; an SSL BIO that carries them, TLS in TLS).  The session, not a flag, for the
 * SSL_* hooks: a coroutine switched away inside a followed call (a
 * library that switches inside read()) does not keep the other
 * coroutines' SSL_read calls from being followed; their calls through an
 * SSL BIO are not followed meanwhile.  A signal handler that interrupted
 * a followed call is followed as the coroutines are.  One that leaves the
 * call with longjmp() or siglongjmp() (an alarm() timeout around a
 * blocking SSL_read) ends the hold with the hook's frame: the longjmp()
 * hooks release it (hook_openssl_unwound()), and the session's next calls
 * are followed.  Left any other way (an exception, a setcontext() of no
 * return), or from a frame not on the thread's own stack, the session and
 * the thread's SSL BIOs stay unfollowed until the thread's next followed
 * SSL_* call of another session.
 *
 * References.  An SSL object is reference counted: after SSL_up_ref(s)
 * (or an SSL_dup(s) that returns s itself, as it does once the handshake
 * has begun), SSL_free(s) only drops a reference, and the session goes on
 * (a server over memory BIOs whose transport layer holds a reference of
 * its own, a session handed to another component).  Ending the tracking
 * there would drop the context of the request in progress and start the
 * next read on a fresh scanner.  So the hooks count the references taken
 * past the first, in ossl_refs[] (below), and an SSL_free that finds one
 * consumes it and leaves the session alone; the free of the last
 * reference ends the tracking, before the real free (after it, the
 * pointer may already name a new session).  The count is kept for every
 * session that may be followed, whether or not it is followed yet: a
 * session over memory BIOs is taken up at its first read, often after
 * the application took its extra reference.  Sessions that never will be
 * (a connect()ed fd) pass straight through.
 *
 * Reuse.  SSL_clear(3) resets a session object for another connection:
 * a server over memory BIOs (keyed by the SSL pointer, below) reuses the
 * same SSL * for its next client.  The connection the shim followed for it
 * ends there, as at its last SSL_free, before the real call: otherwise the
 * new connection would inherit the old one's scanner state (the rest of a
 * head cut short, a request never answered) and its context.  libssl
 * calls SSL_clear itself, through its PLT: from SSL_new (a fresh object)
 * and at the start of every first handshake (statem.c, state_machine()),
 * also one that SSL_read() runs, after its hook claimed the slot of a
 * session without an fd.  Both times the session is SSL_in_before(): it
 * has read no plaintext since it was made or cleared, so there is nothing
 * to end, and ending it would release a slot that the read in progress
 * still feeds, or forget the fd's session word ("Sessions" in
 * preload/conn.c).  So a session in that state passes straight through.
 * Not seen: a session reused without SSL_clear (SSL_set_accept_state()
 * again, not a documented way), or one put back into that state before
 * its SSL_clear; its next connection starts on the old slot.
 *
 * Connection of a session: its fd as SSL_get_fd() gives it, on every
 * call, read the way SSL_get_fd() does it but without calling a BIO
 * callback of the application's (ossl_fd()).  It is a few loads in libssl
 * and libcrypto (the read BIO's descriptor), and always right, whereas a
 * cache would go stale when the application swaps BIOs or reuses an fd
 * number.  A session freed after its fd number was reused does not end
 * the new connection: the socket level knows which session an fd is for
 * (preload/conn.c, "Sessions").  A session with no fd (the application's
 * own BIO, as h2o has) is followed when SSL_is_server() says it is a
 * server session, in a small table of slots keyed by the SSL pointer
 * (conn.h).  Client sessions (libcurl, an nginx upstream) have
 * connect()ed fds, which the socket level does not track as connections:
 * they pass straight through (an upstream's ciphertext reads still switch
 * the thread to its request there: hook-socket.c, "Upstreams").
 *
 * Versions.  libssl.so.3 exports these names at version OPENSSL_3.0.0 and
 * every program or library built against it references them so.  Our
 * definitions carry exactly that version (".symver ..., name@NODE,
 * remove", the node is in preload/ctxshim.sym) and forward with dlvsym()
 * to it, as hooks/hook-curl.c does for its flavours: an SSL pointer only
 * ever reaches the libssl that made it.  An unversioned definition would
 * also catch OpenSSL 1.1 (OPENSSL_1_1_0), LibreSSL or a self-built
 * unversioned libssl in the same process and forward their SSL objects to
 * libssl.so.3.  Those references now go straight to their own library:
 * their sessions are simply not seen.
 *
 * Binding.  The shim never links libssl.  When the process already has it
 * (linked), the constructor binds; otherwise the first hooked call does
 * (a library that needs libssl was dlopen()ed since).  RTLD_NEXT does not
 * see a libssl loaded RTLD_LOCAL as a plugin's dependency; then we open it
 * by soname with RTLD_NOLOAD, which also pins it, so that our pointers
 * cannot outlive it.  A caller whose own scope has another libssl than
 * that one (a Python wheel's libssl under another soname, beside the
 * system's that Python's ssl module loaded) would have called its own
 * copy without the shim: its calls go there, untouched (bind.h,
 * ctxshim_callers_own()), never an SSL pointer into another library.
 * Not found at all (cannot happen while something
 * calls these names): the hooks fail the call as libssl would on a
 * broken session and log once.  A program that dlsym()s SSL_read out of
 * its own dlopen() handle is not seen: its lookups never reach the
 * preloaded library. */
#include "config.h"

#include "hooks.h"

#include "conn.h"
#include "hook-tls.h"
#include "log.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <openssl/ssl.h>

#define OSSL_NODE          "OPENSSL_3.0.0"
#define OSSL_SONAME        "libssl.so.3"
#define OSSL_CRYPTO_SONAME "libcrypto.so.3"

typedef int (*ossl_io_fn)(SSL *, void *, int);
typedef int (*ossl_io_ex_fn)(SSL *, void *, size_t, size_t *);
typedef int (*ossl_wr_fn)(SSL *, const void *, int);
typedef int (*ossl_wr_ex_fn)(SSL *, const void *, size_t, size_t *);
typedef void (*ossl_free_fn)(SSL *);
typedef int (*ossl_clear_fn)(SSL *);
typedef int (*ossl_set_fd_fn)(SSL *, int);
typedef int (*ossl_get_fd_fn)(const SSL *);
typedef int (*ossl_handshake_fn)(SSL *);
typedef int (*ossl_up_ref_fn)(SSL *);
typedef SSL *(*ossl_dup_fn)(SSL *);
typedef BIO *(*ossl_get_rbio_fn)(const SSL *);
/* libcrypto's (BIO_get_callback is deprecated in OpenSSL 3: only its
 * pointer is compared here, never called) */
typedef BIO *(*ossl_find_type_fn)(BIO *, int);
typedef void *(*ossl_get_cb_fn)(const BIO *);
typedef int (*ossl_method_type_fn)(const BIO *);
typedef const char *(*ossl_method_name_fn)(const BIO *);
typedef long (*ossl_ctrl_fn)(BIO *, int, long, void *);
typedef const BIO_METHOD *(*ossl_method_fn)(void);
typedef ossl_ctrl_fn (*ossl_meth_get_ctrl_fn)(const BIO_METHOD *);
/* libcrypto's, hooked ("The SSL BIO") */
typedef int (*ossl_bio_io_fn)(BIO *, void *, int);
typedef int (*ossl_bio_io_ex_fn)(BIO *, void *, size_t, size_t *);
typedef int (*ossl_bio_wr_fn)(BIO *, const void *, int);
typedef int (*ossl_bio_wr_ex_fn)(BIO *, const void *, size_t, size_t *);

enum ossl_fn {
	OSSL_READ,
	OSSL_READ_EX,
	OSSL_PEEK,
	OSSL_PEEK_EX,
	OSSL_WRITE,
	OSSL_WRITE_EX,
	OSSL_FREE,
	OSSL_SET_FD,
	OSSL_DO_HANDSHAKE,
	OSSL_UP_REF,
	OSSL_DUP,
	OSSL_CLEAR,
	OSSL_HOOKED, /* the ones above are ours; the ones below only called */
	OSSL_GET_FD = OSSL_HOOKED,
	OSSL_IS_SERVER,
	OSSL_GET_RBIO,
	OSSL_IN_BEFORE,
	OSSL_N,
};

static const char *const ossl_name[OSSL_N] = {
	"SSL_read",         "SSL_read_ex",   "SSL_peek",     "SSL_peek_ex",
	"SSL_write",        "SSL_write_ex",  "SSL_free",     "SSL_set_fd",
	"SSL_do_handshake", "SSL_up_ref",    "SSL_dup",      "SSL_clear",
	"SSL_get_fd",       "SSL_is_server", "SSL_get_rbio", "SSL_in_before",
};

/* What ossl_fd() calls in libcrypto (see "Connection of a session"). */
enum ossl_bio_fn {
	OSSL_BIO_FIND_TYPE,
	OSSL_BIO_GET_CALLBACK_EX,
	OSSL_BIO_METHOD_TYPE,
	OSSL_BIO_CTRL,
	OSSL_BIO_METH_GET_CTRL,
	OSSL_BIO_S_SOCKET,
	OSSL_BIO_S_FD,
	OSSL_BIO_METHOD_NAME,
	OSSL_BIO_NEEDED, /* the ones above; the one below may be missing */
	OSSL_BIO_GET_CALLBACK = OSSL_BIO_NEEDED,
	OSSL_BIO_N,
};

static const char *const ossl_bio_name[OSSL_BIO_N] = {
	"BIO_find_type", "BIO_get_callback_ex", "BIO_method_type",
	"BIO_ctrl",      "BIO_meth_get_ctrl",   "BIO_s_socket",
	"BIO_s_fd",      "BIO_method_name",     "BIO_get_callback",
};

static void *ossl_fn[OSSL_N];
static const void *ossl_self[OSSL_HOOKED];
static struct ctxshim_callers ossl_callers = {.names = ossl_name,
					      .n = OSSL_HOOKED,
					      .version = OSSL_NODE,
					      .selves = ossl_self};
static pthread_once_t ossl_once = PTHREAD_ONCE_INIT;
static void *ossl_bio_fn[OSSL_BIO_N];
/* The whole of ossl_bio_fn[] up to OSSL_BIO_NEEDED and SSL_get_rbio bound:
 * ossl_fd() reads the fd itself; else it calls SSL_get_fd(). */
static bool ossl_bio_ok;
/* The ctrl functions of the socket and fd BIOs (BIO_s_socket(), BIO_s_fd()). */
static ossl_ctrl_fn ossl_sock_ctrl, ossl_fdbio_ctrl;
/* libssl's own SSL BIO: the name of its method (BIO_f_ssl()), as
 * libcrypto's BIO_method_name() answers it (pointer, not string): a BIO of
 * an application's method that took BIO_TYPE_SSL must not get a
 * BIO_get_ssl() it never made. */
typedef const char *(*ossl_method_name_fn)(const BIO *);
/* How struct bio_method_st starts (OpenSSL 1.0's public layout; the
 * struct is opaque since 1.1.0, its first two fields unchanged). */
struct ossl_bio_method_head {
	int type;
	const char *name;
};
static ossl_method_name_fn ossl_method_name;
static const char *ossl_ssl_bio_name;
/* Set (release) once hook_openssl_bind_once() found libssl: the BIO hooks
 * read ossl_fn[] and ossl_bio_fn[] only then ("The SSL BIO"). */
static int ossl_bound;

/* libcrypto's hooked names ("The SSL BIO"), bound on their own, retried at
 * each call until they are: libcrypto is often loaded without libssl. */
enum ossl_cr_fn {
	OSSL_CR_READ,
	OSSL_CR_READ_EX,
	OSSL_CR_WRITE,
	OSSL_CR_WRITE_EX,
	OSSL_CR_HOOKED, /* the ones above are ours; the one below only called */
	OSSL_CR_METHOD_TYPE = OSSL_CR_HOOKED,
	OSSL_CR_N,
};

static const char *const ossl_cr_name[OSSL_CR_N] = {
	"BIO_read", "BIO_read_ex", "BIO_write", "BIO_write_ex", "BIO_method_type",
};

static void *ossl_cr_fn[OSSL_CR_N];
static const void *ossl_cr_self[OSSL_CR_HOOKED];
static struct ctxshim_callers ossl_cr_callers = {.names = ossl_cr_name,
						 .n = OSSL_CR_HOOKED,
						 .version = OSSL_NODE,
						 .selves = ossl_cr_self};
/* Set (release) once ossl_cr_fn[] is complete. */
static int ossl_cr_bound;

/* The session of the followed plaintext call this thread is in (SSL_read,
 * SSL_write and their _ex, BIO_read, BIO_write and their _ex on an SSL
 * BIO), NULL: none; only compared, never dereferenced.  The hooks it
 * reaches pass through, so that no byte is seen twice ("The SSL BIO").
 * volatile: a signal handler on the thread reads it. */
static __thread SSL *volatile ossl_in_io __attribute__((tls_model("initial-exec")));
/* ... and of the followed write call (SSL_write and its _ex, BIO_write and
 * its _ex on an SSL BIO): a direction each, so that the application's
 * write of a session is followed while a read of the same session is in
 * progress on the thread (a coroutine parked in it, switched away inside
 * read()), and the other way round.  The BIO hooks pass through while
 * either is set. */
static __thread SSL *volatile ossl_in_wr __attribute__((tls_model("initial-exec")));
/* The stack pointer of the hook's frame that set each, for a longjmp()
 * out of a signal handler that interrupted the real call (an alarm()
 * timeout around a blocking SSL_read: hook_openssl_unwound()).  Stored
 * before the session and put back after it: right whenever it is set,
 * also after a signal handler's followed call ran in between. */
static __thread uintptr_t ossl_in_io_sp __attribute__((tls_model("initial-exec")));
static __thread uintptr_t ossl_in_wr_sp __attribute__((tls_model("initial-exec")));

/* In each hook (its frame encloses the real call), around the real call. */
#define OSSL_HOLD(var, s)                          \
	uintptr_t var##_prev = var##_sp;           \
	var##_sp = ctxshim_stack_pointer();        \
	atomic_signal_fence(memory_order_seq_cst); \
	var = (s)
#define OSSL_UNHOLD(var)                                   \
	do {                                               \
		var = NULL;                                \
		atomic_signal_fence(memory_order_seq_cst); \
		var##_sp = var##_prev;                     \
	} while (0)

/* hooks.h: a jump to a frame at to ends a followed call's real call
 * when the hook's frame that holds it is below to on the thread's
 * stack.  Its bytes are given up with it, and so would every later
 * call of that session be (the guards pass them through), or of every
 * SSL BIO of the thread. */
void
hook_openssl_unwound(uintptr_t to)
{
	uintptr_t sp = ossl_in_io_sp;

	if (ossl_in_io && sp && sp < to && ctxshim_stack_between(sp, to)) {
		ossl_in_io = NULL;
		ossl_in_io_sp = 0;
	}
	sp = ossl_in_wr_sp;
	if (ossl_in_wr && sp && sp < to && ctxshim_stack_between(sp, to)) {
		ossl_in_wr = NULL;
		ossl_in_wr_sp = 0;
	}
}

static void
hook_openssl_bind_once(void)
{
	int saved_errno = errno;
	static const char *const sonames[] = {OSSL_SONAME, NULL};
	static const char *const crypto[] = {OSSL_CRYPTO_SONAME, NULL};
	int i;

	for (i = 0; i < OSSL_N; i++) {
		const void *self = i < OSSL_HOOKED ? ossl_self[i] : NULL;

		ossl_fn[i] =
			ctxshim_bind_loaded(sonames, ossl_name[i], OSSL_NODE, self);
	}
	ctxshim_callers_bound(&ossl_callers, ossl_fn[OSSL_READ]);
	for (i = 0; i < OSSL_N; i++)
		if (!ossl_fn[i]) {
			ctxshim_log("openssl: %s@%s not found", ossl_name[i],
				    OSSL_NODE);
			break;
		}
	ossl_bio_ok = ossl_fn[OSSL_GET_RBIO] != NULL;
	for (i = 0; i < OSSL_BIO_N; i++) {
		ossl_bio_fn[i] =
			ctxshim_bind_loaded(crypto, ossl_bio_name[i], OSSL_NODE, NULL);
		if (!ossl_bio_fn[i] && i < OSSL_BIO_NEEDED)
			ossl_bio_ok = false;
	}
	if (ossl_bio_ok) {
		/* Static method tables: no allocation, no initialisation. */
		ossl_meth_get_ctrl_fn get =
			(ossl_meth_get_ctrl_fn)ossl_bio_fn[OSSL_BIO_METH_GET_CTRL];

		ossl_sock_ctrl =
			get(((ossl_method_fn)ossl_bio_fn[OSSL_BIO_S_SOCKET])());
		ossl_fdbio_ctrl = get(((ossl_method_fn)ossl_bio_fn[OSSL_BIO_S_FD])());
	} else {
		ctxshim_log("openssl: libcrypto's BIO calls not found: the fd of a "
			    "session is read with SSL_get_fd()");
	}
	{
		ossl_method_fn f_ssl = (ossl_method_fn)ctxshim_bind_loaded(
			sonames, "BIO_f_ssl", OSSL_NODE, NULL);

		ossl_method_name = (ossl_method_name_fn)ctxshim_bind_loaded(
			crypto, "BIO_method_name", OSSL_NODE, NULL);
		if (f_ssl && ossl_method_name)
			ossl_ssl_bio_name =
				((const struct ossl_bio_method_head *)f_ssl())->name;
	}
	if (ossl_fn[OSSL_READ])
		__atomic_store_n(&ossl_bound, 1, __ATOMIC_RELEASE);
	errno = saved_errno;
}

static inline void
hook_openssl_bind(void)
{
	pthread_once(&ossl_once, hook_openssl_bind_once);
}

/* libcrypto's hooked names, all or nothing; not found (not loaded yet, or
 * only a caller's own copy is): the next call tries again. */
static void
hook_openssl_crypto_bind_slow(void)
{
	static const char *const crypto[] = {OSSL_CRYPTO_SONAME, NULL};
	static int logged;
	int saved_errno = errno, i;
	void *fn[OSSL_CR_N];

	for (i = 0; i < OSSL_CR_N; i++) {
		const void *self = i < OSSL_CR_HOOKED ? ossl_cr_self[i] : NULL;

		fn[i] = ctxshim_bind_loaded(crypto, ossl_cr_name[i], OSSL_NODE, self);
		if (!fn[i]) {
			if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
				ctxshim_log("openssl: %s@%s not found (yet)",
					    ossl_cr_name[i], OSSL_NODE);
			errno = saved_errno;
			return;
		}
	}
	/* Threads racing here store the same values. */
	for (i = 0; i < OSSL_CR_N; i++)
		__atomic_store_n(&ossl_cr_fn[i], fn[i], __ATOMIC_RELAXED);
	ctxshim_callers_bound(&ossl_cr_callers, fn[OSSL_CR_READ]);
	__atomic_store_n(&ossl_cr_bound, 1, __ATOMIC_RELEASE);
	errno = saved_errno;
}

static inline void
hook_openssl_crypto_bind(void)
{
	if (!__atomic_load_n(&ossl_cr_bound, __ATOMIC_ACQUIRE))
		hook_openssl_crypto_bind_slow();
}

/* After the socket level's constructor (103): bind now when libssl (or
 * libcrypto) is already there, so that a linked program never binds on a
 * read path. */
__attribute__((constructor(104))) static void
hook_openssl_ctor(void)
{
	static const char *const sonames[] = {OSSL_SONAME, NULL};
	static const char *const crypto[] = {OSSL_CRYPTO_SONAME, NULL};
	int saved_errno = errno;

	if (ctxshim_lib_loaded(sonames))
		hook_openssl_bind();
	if (ctxshim_lib_loaded(crypto))
		hook_openssl_crypto_bind();
	errno = saved_errno;
}

/* The failure a broken session gives, with errno telling why: -1 for the
 * int-returning calls, 0 for the _ex ones, SSL_set_fd, SSL_up_ref and
 * SSL_clear (NULL for SSL_dup). */
static int
ossl_missing(void)
{
	errno = ENOSYS;
	return -1;
}

static int
ossl_missing_ex(void)
{
	errno = ENOSYS;
	return 0;
}

static inline int
real_SSL_read(SSL *s, void *buf, int num)
{
	hook_openssl_bind();
	if (!ossl_fn[OSSL_READ])
		return ossl_missing();
	return ((ossl_io_fn)ossl_fn[OSSL_READ])(s, buf, num);
}

static inline int
real_SSL_read_ex(SSL *s, void *buf, size_t num, size_t *n)
{
	hook_openssl_bind();
	if (!ossl_fn[OSSL_READ_EX])
		return ossl_missing_ex();
	return ((ossl_io_ex_fn)ossl_fn[OSSL_READ_EX])(s, buf, num, n);
}

static inline int
real_SSL_peek(SSL *s, void *buf, int num)
{
	hook_openssl_bind();
	if (!ossl_fn[OSSL_PEEK])
		return ossl_missing();
	return ((ossl_io_fn)ossl_fn[OSSL_PEEK])(s, buf, num);
}

static inline int
real_SSL_peek_ex(SSL *s, void *buf, size_t num, size_t *n)
{
	hook_openssl_bind();
	if (!ossl_fn[OSSL_PEEK_EX])
		return ossl_missing_ex();
	return ((ossl_io_ex_fn)ossl_fn[OSSL_PEEK_EX])(s, buf, num, n);
}

static inline int
real_SSL_write(SSL *s, const void *buf, int num)
{
	hook_openssl_bind();
	if (!ossl_fn[OSSL_WRITE])
		return ossl_missing();
	return ((ossl_wr_fn)ossl_fn[OSSL_WRITE])(s, buf, num);
}

static inline int
real_SSL_write_ex(SSL *s, const void *buf, size_t num, size_t *n)
{
	hook_openssl_bind();
	if (!ossl_fn[OSSL_WRITE_EX])
		return ossl_missing_ex();
	return ((ossl_wr_ex_fn)ossl_fn[OSSL_WRITE_EX])(s, buf, num, n);
}

static inline void
real_SSL_free(SSL *s)
{
	hook_openssl_bind();
	if (ossl_fn[OSSL_FREE])
		((ossl_free_fn)ossl_fn[OSSL_FREE])(s);
}

static inline int
real_SSL_set_fd(SSL *s, int fd)
{
	hook_openssl_bind();
	if (!ossl_fn[OSSL_SET_FD])
		return ossl_missing_ex();
	return ((ossl_set_fd_fn)ossl_fn[OSSL_SET_FD])(s, fd);
}

static inline int
real_SSL_do_handshake(SSL *s)
{
	hook_openssl_bind();
	if (!ossl_fn[OSSL_DO_HANDSHAKE])
		return ossl_missing();
	return ((ossl_handshake_fn)ossl_fn[OSSL_DO_HANDSHAKE])(s);
}

static inline int
real_SSL_up_ref(SSL *s)
{
	hook_openssl_bind();
	if (!ossl_fn[OSSL_UP_REF])
		return ossl_missing_ex();
	return ((ossl_up_ref_fn)ossl_fn[OSSL_UP_REF])(s);
}

static inline SSL *
real_SSL_dup(SSL *s)
{
	hook_openssl_bind();
	if (!ossl_fn[OSSL_DUP]) {
		errno = ENOSYS;
		return NULL;
	}
	return ((ossl_dup_fn)ossl_fn[OSSL_DUP])(s);
}

static inline int
real_SSL_clear(SSL *s)
{
	hook_openssl_bind();
	if (!ossl_fn[OSSL_CLEAR])
		return ossl_missing_ex();
	return ((ossl_clear_fn)ossl_fn[OSSL_CLEAR])(s);
}

/* libcrypto not found (cannot happen while something calls these names):
 * the calls fail as ossl_missing() and ossl_missing_ex() say. */
static inline int
real_BIO_read(BIO *b, void *buf, int len)
{
	ossl_bio_io_fn f;

	hook_openssl_crypto_bind();
	f = (ossl_bio_io_fn)__atomic_load_n(&ossl_cr_fn[OSSL_CR_READ],
					    __ATOMIC_RELAXED);
	if (!f)
		return ossl_missing();
	return f(b, buf, len);
}

static inline int
real_BIO_read_ex(BIO *b, void *buf, size_t len, size_t *n)
{
	ossl_bio_io_ex_fn f;

	hook_openssl_crypto_bind();
	f = (ossl_bio_io_ex_fn)__atomic_load_n(&ossl_cr_fn[OSSL_CR_READ_EX],
					       __ATOMIC_RELAXED);
	if (!f)
		return ossl_missing_ex();
	return f(b, buf, len, n);
}

static inline int
real_BIO_write(BIO *b, const void *buf, int len)
{
	ossl_bio_wr_fn f;

	hook_openssl_crypto_bind();
	f = (ossl_bio_wr_fn)__atomic_load_n(&ossl_cr_fn[OSSL_CR_WRITE],
					    __ATOMIC_RELAXED);
	if (!f)
		return ossl_missing();
	return f(b, buf, len);
}

static inline int
real_BIO_write_ex(BIO *b, const void *buf, size_t len, size_t *n)
{
	ossl_bio_wr_ex_fn f;

	hook_openssl_crypto_bind();
	f = (ossl_bio_wr_ex_fn)__atomic_load_n(&ossl_cr_fn[OSSL_CR_WRITE_EX],
					       __ATOMIC_RELAXED);
	if (!f)
		return ossl_missing_ex();
	return f(b, buf, len, n);
}

/* Only called from inside a hook, after binding: whether s is as SSL_new
 * or SSL_clear left it (unknown: no). */
static inline bool
real_SSL_in_before(const SSL *s)
{
	if (!ossl_fn[OSSL_IN_BEFORE])
		return false;
	return ((ossl_get_fd_fn)ossl_fn[OSSL_IN_BEFORE])(s) != 0;
}

/* Only called from inside a hook, after binding. */
static inline int
real_SSL_get_fd(const SSL *s)
{
	if (!ossl_fn[OSSL_GET_FD])
		return -1;
	return ((ossl_get_fd_fn)ossl_fn[OSSL_GET_FD])(s);
}

/* SSL_get_fd()'s answer, -1 if s has no fd, or OSSL_FD_HIDDEN: its fd
 * cannot be read without a BIO callback of the application's seeing it.
 * Only called from inside a hook, after binding.
 *
 * SSL_get_fd() is SSL_get_rfd(): the first BIO of type
 * BIO_TYPE_DESCRIPTOR in the read BIO's chain (BIO_find_type(), which
 * only follows pointers), asked with BIO_get_fd(), i.e. BIO_ctrl(...,
 * BIO_C_GET_FD), which calls that BIO's callbacks before and after (and
 * lets them change the answer).  An application that set one
 * (BIO_set_callback_ex(), to count or log its BIO calls) saw two calls
 * it never made on every SSL_read and SSL_write -- client sessions too,
 * which the shim does not even follow.  So the same steps here, and a
 * descriptor BIO with a callback is asked through its method's own ctrl
 * function, which is what BIO_ctrl() calls between the callbacks: for
 * the socket and fd BIOs (what SSL_set_fd(), BIO_new_socket() and
 * BIO_new_fd() make) that is their ctrl in libcrypto, which answers
 * BIO_C_GET_FD from the BIO's generic fields (init, num); a BIO of an
 * application's method that took their type (h2o's) has no fd there and
 * counts as one without an fd; other descriptor BIOs with a callback
 * (connect, accept, datagram) are not followed at all, and one that gets
 * a callback after it was followed is not ended by its SSL_free (its
 * context goes at the fd's close or the thread's next connection, as for
 * any unfollowed end).  Without a callback,
 * BIO_ctrl() as SSL_get_fd() calls it.  No read BIO: -1, without
 * BIO_find_type(NULL), which would put an error on the application's
 * error queue. */
#define OSSL_FD_HIDDEN (-2)

static int
ossl_fd(const SSL *s)
{
	BIO *b, *d;
	ossl_ctrl_fn ctrl;
	const char *name;
	int fd = -1, d_type;

	if (!ossl_bio_ok)
		return real_SSL_get_fd(s);
	b = ((ossl_get_rbio_fn)ossl_fn[OSSL_GET_RBIO])(s);
	if (!b)
		return -1;
	d = ((ossl_find_type_fn)ossl_bio_fn[OSSL_BIO_FIND_TYPE])(b,
								 BIO_TYPE_DESCRIPTOR);
	if (!d)
		return -1;
	/* The socket and fd BIOs: their ctrl in libcrypto, directly (see
	 * above).  libcrypto's other descriptor BIOs: BIO_ctrl() when no callback
	 * would see it.  A descriptor BIO of the application's own type
	 * (BIO_meth_new(BIO_get_new_index() | BIO_TYPE_DESCRIPTOR ...)): its
	 * ctrl is the application's code, which must not get calls it never
	 * made either. */
	d_type = ((ossl_method_type_fn)ossl_bio_fn[OSSL_BIO_METHOD_TYPE])(d);
	switch (d_type) {
	case BIO_TYPE_SOCKET:
	case BIO_TYPE_FD:
		/* An application's method that took their type (h2o's
		 * BIO_meth_new(BIO_TYPE_FD, "h2o_socket") over its own buffers)
		 * has no fd in the generic fields: libcrypto's ctrl would
		 * answer 0, stdin's, and the session would never be followed.
		 * Its own ctrl is not ours to call: no fd known, as
		 * SSL_get_fd() tells h2o's, so a server session is followed
		 * by its pointer.  The name tells libcrypto's own methods. */
		name = ((ossl_method_name_fn)ossl_bio_fn[OSSL_BIO_METHOD_NAME])(d);
		if (!name || strcmp(name, d_type == BIO_TYPE_FD ? "file descriptor"
								: "socket") != 0)
			return -1;
		ctrl = d_type == BIO_TYPE_FD ? ossl_fdbio_ctrl : ossl_sock_ctrl;
		break;
	case BIO_TYPE_CONNECT:
	case BIO_TYPE_ACCEPT:
	case BIO_TYPE_DGRAM:
		if (!((ossl_get_cb_fn)ossl_bio_fn[OSSL_BIO_GET_CALLBACK_EX])(d) &&
		    (!ossl_bio_fn[OSSL_BIO_GET_CALLBACK] ||
		     !((ossl_get_cb_fn)ossl_bio_fn[OSSL_BIO_GET_CALLBACK])(d)))
			ctrl = (ossl_ctrl_fn)ossl_bio_fn[OSSL_BIO_CTRL];
		else
			ctrl = NULL;
		break;
	default:
		ctrl = NULL;
		break;
	}
	if (!ctrl)
		return OSSL_FD_HIDDEN;
	(void)ctrl(d, BIO_C_GET_FD, 0, &fd);
	return fd;
}

static inline bool
real_SSL_is_server(const SSL *s)
{
	if (!ossl_fn[OSSL_IS_SERVER])
		return false;
	return ((ossl_get_fd_fn)ossl_fn[OSSL_IS_SERVER])(s) == 1;
}

/* ---- references ----------------------------------------------------------- */

/* The references of followed sessions past the first: one 64-bit word per
 * session that has any, (pointer << 16) | count, count >= 1, 0 = free.
 * One word, so that every change is one compare-and-swap: SSL_up_ref and
 * SSL_free may run on different threads (a session handed over), and a
 * hook may run in a signal handler, so no lock.  A fixed table in .bss:
 * nothing is allocated.  A session's word is in a window of
 * OSSL_REFS_PROBE words from its hash; a lookup always scans the whole
 * window (never stops at a free word), so that freeing a word needs no
 * tombstone.  Two threads up-referencing one session at once may both
 * add a word for it: the count is then the sum, and a free takes from
 * either.
 *
 * When a reference cannot be counted (its window is full, a pointer past
 * 2^48, a count at 0xffff), that session's tracking ends at an earlier
 * free than its last: its context and scanner state are lost, never kept
 * past the session.  So does a session whose only known reference one
 * thread frees while another takes a new one (the count rises only after
 * the real SSL_up_ref returned), which an application that knows what it
 * shares does not do.  The other way round, a word outliving its session,
 * needs a free that does not reach SSL_free, which libssl does not do (its
 * own frees of an SSL, e.g. BIO_free() of an SSL BIO, go through the PLT
 * to the exported name). */
#define OSSL_REFS_N     256 /* words: 2 KiB */
#define OSSL_REFS_PROBE 8
#define OSSL_REFS_MAX   0xffffu

static _Atomic uint64_t ossl_refs[OSSL_REFS_N];
/* Set at the first counted reference: until then SSL_free does not look. */
static _Atomic bool ossl_refs_used;

static inline unsigned
ossl_refs_hash(uint64_t key)
{
	/* Fibonacci hashing of the pointer without its alignment bits. */
	return (unsigned)(((key >> 4) * 0x9e3779b97f4a7c15ull) >> 56) % OSSL_REFS_N;
}

/* Count one more reference of s.  False if it does not fit. */
static bool
ossl_refs_add(const SSL *s)
{
	uint64_t key = (uint64_t)(uintptr_t)s, w;
	unsigned h = ossl_refs_hash(key), i;

	if (!key || key >> 48)
		return false;
	atomic_store_explicit(&ossl_refs_used, true, memory_order_relaxed);
	for (i = 0; i < OSSL_REFS_PROBE; i++) {
		_Atomic uint64_t *p = &ossl_refs[(h + i) % OSSL_REFS_N];

		w = atomic_load_explicit(p, memory_order_relaxed);
		while (w >> 16 == key) {
			if ((w & OSSL_REFS_MAX) == OSSL_REFS_MAX)
				return false;
			if (atomic_compare_exchange_weak_explicit(p, &w, w + 1,
								  memory_order_acq_rel,
								  memory_order_relaxed))
				return true;
		}
	}
	for (i = 0; i < OSSL_REFS_PROBE; i++) {
		_Atomic uint64_t *p = &ossl_refs[(h + i) % OSSL_REFS_N];

		w = 0;
		if (atomic_compare_exchange_strong_explicit(p, &w, key << 16 | 1,
							    memory_order_acq_rel,
							    memory_order_relaxed))
			return true;
	}
	return false;
}

/* Take one counted reference of s away.  False if s has none left: the
 * reference being freed is its last (or the only one we know of). */
static bool
ossl_refs_take(const SSL *s)
{
	uint64_t key = (uint64_t)(uintptr_t)s, w;
	unsigned h, i;

	if (!atomic_load_explicit(&ossl_refs_used, memory_order_relaxed) || !key ||
	    key >> 48)
		return false;
	h = ossl_refs_hash(key);
	for (i = 0; i < OSSL_REFS_PROBE; i++) {
		_Atomic uint64_t *p = &ossl_refs[(h + i) % OSSL_REFS_N];

		w = atomic_load_explicit(p, memory_order_relaxed);
		while (w >> 16 == key) {
			uint64_t nw = (w & OSSL_REFS_MAX) == 1 ? 0 : w - 1;

			if (atomic_compare_exchange_weak_explicit(p, &w, nw,
								  memory_order_acq_rel,
								  memory_order_relaxed))
				return true;
		}
	}
	return false;
}

/* ---- hooks ---------------------------------------------------------------- */

/* The connection of s, if we follow it.  create: a read may claim a slot
 * for a session without an fd. */
static bool
ossl_conn(SSL *s, bool create, struct hook_tls_conn *t)
{
	int saved_errno, fd;
	bool ok;

	/* Socket level off (or not set up yet): nothing to feed. */
	if (!s || !__atomic_load_n(&ctxshim_conn_tab.max_fds, __ATOMIC_ACQUIRE))
		return false;
	hook_openssl_bind();
	saved_errno = errno;
	fd = ossl_fd(s);
	ok = fd != OSSL_FD_HIDDEN &&
	     hook_socket_tls_find(fd, s, fd < 0 && real_SSL_is_server(s), create, t);
	errno = saved_errno;
	return ok;
}

static int
hook_openssl_read(SSL *s, void *buf, int num)
{
	struct hook_tls_conn t;
	int r;

	if (!ctxshim_active() || ossl_in_io == s || !ossl_conn(s, true, &t))
		return real_SSL_read(s, buf, num);
	hook_socket_tls_read_begin(&t);
	OSSL_HOLD(ossl_in_io, s);
	r = real_SSL_read(s, buf, num);
	OSSL_UNHOLD(ossl_in_io);
	if (r > 0)
		hook_socket_tls_read_end(&t, buf, (size_t)r);
	return r;
}

static int
hook_openssl_read_ex(SSL *s, void *buf, size_t num, size_t *n)
{
	struct hook_tls_conn t;
	int r;

	if (!ctxshim_active() || ossl_in_io == s || !ossl_conn(s, true, &t))
		return real_SSL_read_ex(s, buf, num, n);
	hook_socket_tls_read_begin(&t);
	OSSL_HOLD(ossl_in_io, s);
	r = real_SSL_read_ex(s, buf, num, n);
	OSSL_UNHOLD(ossl_in_io);
	if (r == 1 && n && *n > 0 && *n <= num)
		hook_socket_tls_read_end(&t, buf, *n);
	return r;
}

static int
hook_openssl_peek(SSL *s, void *buf, int num)
{
	struct hook_tls_conn t;

	if (ctxshim_active() && ossl_in_io != s && ossl_conn(s, false, &t))
		hook_socket_tls_read_begin(&t);
	return real_SSL_peek(s, buf, num);
}

static int
hook_openssl_peek_ex(SSL *s, void *buf, size_t num, size_t *n)
{
	struct hook_tls_conn t;

	if (ctxshim_active() && ossl_in_io != s && ossl_conn(s, false, &t))
		hook_socket_tls_read_begin(&t);
	return real_SSL_peek_ex(s, buf, num, n);
}

static int
hook_openssl_do_handshake(SSL *s)
{
	struct hook_tls_conn t;

	if (ctxshim_active() && ossl_in_io != s && ossl_conn(s, false, &t))
		hook_socket_tls_read_begin(&t);
	return real_SSL_do_handshake(s);
}

static int
hook_openssl_write(SSL *s, const void *buf, int num)
{
	struct hook_tls_conn t;
	int r;

	if (!ctxshim_active() || ossl_in_wr == s || !ossl_conn(s, false, &t))
		return real_SSL_write(s, buf, num);
	hook_socket_tls_write_begin(&t);
	OSSL_HOLD(ossl_in_wr, s);
	r = real_SSL_write(s, buf, num);
	OSSL_UNHOLD(ossl_in_wr);
	if (r > 0)
		hook_socket_tls_write_end(&t, buf, (size_t)r);
	return r;
}

static int
hook_openssl_write_ex(SSL *s, const void *buf, size_t num, size_t *n)
{
	struct hook_tls_conn t;
	int r;

	if (!ctxshim_active() || ossl_in_wr == s || !ossl_conn(s, false, &t))
		return real_SSL_write_ex(s, buf, num, n);
	hook_socket_tls_write_begin(&t);
	OSSL_HOLD(ossl_in_wr, s);
	r = real_SSL_write_ex(s, buf, num, n);
	OSSL_UNHOLD(ossl_in_wr);
	if (r == 1 && n && *n > 0 && *n <= num)
		hook_socket_tls_write_end(&t, buf, *n);
	return r;
}

/* ossl_bio_conn() for an SSL BIO b. */
static bool
ossl_bio_conn_ssl(BIO *b, bool create, struct hook_tls_conn *t, SSL **sp)
{
	ossl_get_cb_fn cb_ex, cb;
	ossl_ctrl_fn ctrl;
	int saved_errno;
	SSL *s = NULL;

	if (!__atomic_load_n(&ossl_bound, __ATOMIC_ACQUIRE) || !ossl_ssl_bio_name ||
	    ossl_method_name(b) != ossl_ssl_bio_name)
		return false;
	/* BIO_get_ssl(), unless a callback of the application's would see
	 * it (as in ossl_fd()). */
	ctrl = (ossl_ctrl_fn)ossl_bio_fn[OSSL_BIO_CTRL];
	cb_ex = (ossl_get_cb_fn)ossl_bio_fn[OSSL_BIO_GET_CALLBACK_EX];
	cb = (ossl_get_cb_fn)ossl_bio_fn[OSSL_BIO_GET_CALLBACK];
	if (!ctrl || !cb_ex || cb_ex(b) || (cb && cb(b)))
		return false;
	saved_errno = errno;
	(void)ctrl(b, BIO_C_GET_SSL, 0, &s);
	errno = saved_errno;
	if (!s)
		return false;
	*sp = s;
	return ossl_conn(s, create, t);
}

/* The connection of b's session (*sp) if b is an SSL BIO whose session we
 * follow ("The SSL BIO").  Any other BIO: its type, one call. */
static inline bool
ossl_bio_conn(BIO *b, bool create, struct hook_tls_conn *t, SSL **sp)
{
	ossl_method_type_fn type;

	/* Inside a followed call: of b's session itself (its bytes are that
	 * call's), or b carries the records of the session of one (TLS in
	 * TLS).  Not even the type asked: libssl's reads and writes of a
	 * followed session's ciphertext. */
	if (!b || ossl_in_io || ossl_in_wr || !ctxshim_active())
		return false;
	type = (ossl_method_type_fn)__atomic_load_n(&ossl_cr_fn[OSSL_CR_METHOD_TYPE],
						    __ATOMIC_RELAXED);
	if (!type || type(b) != BIO_TYPE_SSL)
		return false;
	return ossl_bio_conn_ssl(b, create, t, sp);
}

static int
hook_openssl_bio_read(BIO *b, void *buf, int len)
{
	struct hook_tls_conn t;
	SSL *s;
	int r;

	if (!ossl_bio_conn(b, true, &t, &s))
		return real_BIO_read(b, buf, len);
	hook_socket_tls_read_begin(&t);
	OSSL_HOLD(ossl_in_io, s);
	r = real_BIO_read(b, buf, len);
	OSSL_UNHOLD(ossl_in_io);
	if (r > 0 && r <= len)
		hook_socket_tls_read_end(&t, buf, (size_t)r);
	return r;
}

static int
hook_openssl_bio_read_ex(BIO *b, void *buf, size_t len, size_t *n)
{
	struct hook_tls_conn t;
	SSL *s;
	int r;

	if (!ossl_bio_conn(b, true, &t, &s))
		return real_BIO_read_ex(b, buf, len, n);
	hook_socket_tls_read_begin(&t);
	OSSL_HOLD(ossl_in_io, s);
	r = real_BIO_read_ex(b, buf, len, n);
	OSSL_UNHOLD(ossl_in_io);
	if (r == 1 && n && *n > 0 && *n <= len)
		hook_socket_tls_read_end(&t, buf, *n);
	return r;
}

static int
hook_openssl_bio_write(BIO *b, const void *buf, int len)
{
	struct hook_tls_conn t;
	SSL *s;
	int r;

	if (!ossl_bio_conn(b, false, &t, &s))
		return real_BIO_write(b, buf, len);
	hook_socket_tls_write_begin(&t);
	OSSL_HOLD(ossl_in_wr, s);
	r = real_BIO_write(b, buf, len);
	OSSL_UNHOLD(ossl_in_wr);
	if (r > 0 && r <= len)
		hook_socket_tls_write_end(&t, buf, (size_t)r);
	return r;
}

static int
hook_openssl_bio_write_ex(BIO *b, const void *buf, size_t len, size_t *n)
{
	struct hook_tls_conn t;
	SSL *s;
	int r;

	if (!ossl_bio_conn(b, false, &t, &s))
		return real_BIO_write_ex(b, buf, len, n);
	hook_socket_tls_write_begin(&t);
	OSSL_HOLD(ossl_in_wr, s);
	r = real_BIO_write_ex(b, buf, len, n);
	OSSL_UNHOLD(ossl_in_wr);
	if (r == 1 && n && *n > 0 && *n <= len)
		hook_socket_tls_write_end(&t, buf, *n);
	return r;
}

/* s took a reference more (SSL_up_ref, SSL_dup): count it, unless s is
 * a session we will never follow (see "References"). */
static void
ossl_ref_taken(SSL *s)
{
	static int logged;
	int saved_errno, fd;
	uint8_t hot;

	if (!s || !ctxshim_active() ||
	    !__atomic_load_n(&ctxshim_conn_tab.max_fds, __ATOMIC_ACQUIRE))
		return;
	saved_errno = errno;
	fd = ossl_fd(s);
	hot = fd >= 0 ? ctxshim_conn_hot(fd) : CONN_HOT_NONE;
	/* A session without an fd may still be followed (by its pointer, at
	 * its first read); one on an fd only if the socket level tracks the
	 * fd (accept()ed: not an upstream, a client's); one whose fd is
	 * hidden (ossl_fd()) is counted too, as it may show it later. */
	if ((fd < 0 ||
	     (hot != CONN_HOT_NONE && hot != CONN_HOT_SHIM && hot != CONN_HOT_UP)) &&
	    !ossl_refs_add(s) && !__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
		ctxshim_log("openssl: a reference of a session not counted (no "
			    "room): it may stop being followed before its last "
			    "SSL_free");
	errno = saved_errno;
}

static int
hook_openssl_up_ref(SSL *s)
{
	int r = real_SSL_up_ref(s);

	if (r == 1)
		ossl_ref_taken(s);
	return r;
}

static SSL *
hook_openssl_dup(SSL *s)
{
	SSL *r = real_SSL_dup(s);

	/* Once its handshake has begun, SSL_dup() returns the session itself
	 * with a reference more, instead of a copy. */
	if (r && r == s)
		ossl_ref_taken(s);
	return r;
}

static void
hook_openssl_free(SSL *s)
{
	/* Not the last reference: the session goes on, and so does its
	 * tracking.  Taken before the real free: after it, the pointer may
	 * already name a new session, whose count this would take. */
	if (s && ossl_refs_take(s)) {
		real_SSL_free(s);
		return;
	}
	/* The last one: unlink first (after the real free the pointer may
	 * name another session already). */
	if (s && ctxshim_active() &&
	    __atomic_load_n(&ctxshim_conn_tab.max_fds, __ATOMIC_ACQUIRE)) {
		int saved_errno = errno, fd;

		hook_openssl_bind();
		fd = ossl_fd(s);
		if (fd != OSSL_FD_HIDDEN)
			hook_socket_tls_end(fd, s, "ssl-free");
		errno = saved_errno;
	}
	real_SSL_free(s);
}

/* s is reset for another connection ("Reuse"): the one followed for it
 * ends, before the real call, unless s is fresh (libssl's own calls). */
static int
hook_openssl_clear(SSL *s)
{
	if (s && ctxshim_active() &&
	    __atomic_load_n(&ctxshim_conn_tab.max_fds, __ATOMIC_ACQUIRE)) {
		int saved_errno = errno, fd;

		hook_openssl_bind();
		fd = ossl_fd(s);
		if (fd != OSSL_FD_HIDDEN && !real_SSL_in_before(s))
			hook_socket_tls_end(fd, s, "ssl-clear");
		errno = saved_errno;
	}
	return real_SSL_clear(s);
}

static int
hook_openssl_set_fd(SSL *s, int fd)
{
	struct hook_tls_conn t;
	int r = real_SSL_set_fd(s, fd);

	/* From now on the fd's bytes are TLS records: the socket level
	 * hands the connection over before the handshake reads it, and s is
	 * its session, also if it was TLS already (preload/conn.c,
	 * "Sessions"). */
	if (r == 1 && fd >= 0 && ctxshim_active() &&
	    hook_socket_tls_find(fd, s, false, false, &t))
		(void)ctxshim_conn_tls_session(fd, s);
	return r;
}

/* ---- exported names (version OPENSSL_3.0.0) -------------------------------- */

/* The caller's own libssl (its definitions by ossl_name), or NULL: the
 * call is ours.  ret: the exported hook's return address. */
static inline void *const *
ossl_own(const void *ret)
{
	hook_openssl_bind();
	return ctxshim_callers_own(&ossl_callers, ret, ossl_fn[OSSL_READ]);
}

#define OSSL_OWN(i, type, ...) CTXSHIM_OWN_RETURN(ossl_own, i, type, __VA_ARGS__)

/* The same for libcrypto's names (ossl_cr_name): unbound (perhaps only
 * copies of libcrypto are loaded), a known caller does not search for
 * the library again (as fcgi_own(), hook-fcgi.c). */
static inline void *const *
ossl_cr_own(const void *ret)
{
	void *const *own;

	if (!__atomic_load_n(&ossl_cr_bound, __ATOMIC_ACQUIRE) &&
	    ctxshim_callers_cached(&ossl_cr_callers, ret, &own))
		return own;
	hook_openssl_crypto_bind();
	return ctxshim_callers_own(
		&ossl_cr_callers, ret,
		__atomic_load_n(&ossl_cr_fn[OSSL_CR_READ], __ATOMIC_RELAXED));
}

#define OSSL_CR_OWN(i, type, ...) CTXSHIM_OWN_RETURN(ossl_cr_own, i, type, __VA_ARGS__)

#define OSSL_SYMVER(fn) \
	__asm__(".symver ctxshim_" #fn "_ossl3, " #fn "@" OSSL_NODE ", remove")

HOOK_EXPORT int ctxshim_SSL_read_ossl3(SSL *s, void *buf, int num);
HOOK_EXPORT int ctxshim_SSL_read_ex_ossl3(SSL *s, void *buf, size_t num, size_t *n);
HOOK_EXPORT int ctxshim_SSL_peek_ossl3(SSL *s, void *buf, int num);
HOOK_EXPORT int ctxshim_SSL_peek_ex_ossl3(SSL *s, void *buf, size_t num, size_t *n);
HOOK_EXPORT int ctxshim_SSL_write_ossl3(SSL *s, const void *buf, int num);
HOOK_EXPORT int
ctxshim_SSL_write_ex_ossl3(SSL *s, const void *buf, size_t num, size_t *n);
HOOK_EXPORT void ctxshim_SSL_free_ossl3(SSL *s);
HOOK_EXPORT int ctxshim_SSL_set_fd_ossl3(SSL *s, int fd);
HOOK_EXPORT int ctxshim_SSL_do_handshake_ossl3(SSL *s);
HOOK_EXPORT int ctxshim_SSL_up_ref_ossl3(SSL *s);
HOOK_EXPORT SSL *ctxshim_SSL_dup_ossl3(SSL *s);
HOOK_EXPORT int ctxshim_SSL_clear_ossl3(SSL *s);
HOOK_EXPORT int ctxshim_BIO_read_ossl3(BIO *b, void *buf, int len);
HOOK_EXPORT int ctxshim_BIO_read_ex_ossl3(BIO *b, void *buf, size_t len, size_t *n);
HOOK_EXPORT int ctxshim_BIO_write_ossl3(BIO *b, const void *buf, int len);
HOOK_EXPORT int
ctxshim_BIO_write_ex_ossl3(BIO *b, const void *buf, size_t len, size_t *n);

HOOK_EXPORT int
ctxshim_SSL_read_ossl3(SSL *s, void *buf, int num)
{
	OSSL_OWN(OSSL_READ, ossl_io_fn, s, buf, num);
	return hook_openssl_read(s, buf, num);
}

HOOK_EXPORT int
ctxshim_SSL_read_ex_ossl3(SSL *s, void *buf, size_t num, size_t *n)
{
	OSSL_OWN(OSSL_READ_EX, ossl_io_ex_fn, s, buf, num, n);
	return hook_openssl_read_ex(s, buf, num, n);
}

HOOK_EXPORT int
ctxshim_SSL_peek_ossl3(SSL *s, void *buf, int num)
{
	OSSL_OWN(OSSL_PEEK, ossl_io_fn, s, buf, num);
	return hook_openssl_peek(s, buf, num);
}

HOOK_EXPORT int
ctxshim_SSL_peek_ex_ossl3(SSL *s, void *buf, size_t num, size_t *n)
{
	OSSL_OWN(OSSL_PEEK_EX, ossl_io_ex_fn, s, buf, num, n);
	return hook_openssl_peek_ex(s, buf, num, n);
}

HOOK_EXPORT int
ctxshim_SSL_write_ossl3(SSL *s, const void *buf, int num)
{
	OSSL_OWN(OSSL_WRITE, ossl_wr_fn, s, buf, num);
	return hook_openssl_write(s, buf, num);
}

HOOK_EXPORT int
ctxshim_SSL_write_ex_ossl3(SSL *s, const void *buf, size_t num, size_t *n)
{
	OSSL_OWN(OSSL_WRITE_EX, ossl_wr_ex_fn, s, buf, num, n);
	return hook_openssl_write_ex(s, buf, num, n);
}

HOOK_EXPORT void
ctxshim_SSL_free_ossl3(SSL *s)
{
	CTXSHIM_OWN_RETURN_VOID(ossl_own, OSSL_FREE, ossl_free_fn, s);
	hook_openssl_free(s);
}

HOOK_EXPORT int
ctxshim_SSL_set_fd_ossl3(SSL *s, int fd)
{
	OSSL_OWN(OSSL_SET_FD, ossl_set_fd_fn, s, fd);
	return hook_openssl_set_fd(s, fd);
}

HOOK_EXPORT int
ctxshim_SSL_do_handshake_ossl3(SSL *s)
{
	OSSL_OWN(OSSL_DO_HANDSHAKE, ossl_handshake_fn, s);
	return hook_openssl_do_handshake(s);
}

HOOK_EXPORT int
ctxshim_SSL_up_ref_ossl3(SSL *s)
{
	OSSL_OWN(OSSL_UP_REF, ossl_up_ref_fn, s);
	return hook_openssl_up_ref(s);
}

HOOK_EXPORT SSL *
ctxshim_SSL_dup_ossl3(SSL *s)
{
	OSSL_OWN(OSSL_DUP, ossl_dup_fn, s);
	return hook_openssl_dup(s);
}

HOOK_EXPORT int
ctxshim_SSL_clear_ossl3(SSL *s)
{
	OSSL_OWN(OSSL_CLEAR, ossl_clear_fn, s);
	return hook_openssl_clear(s);
}

HOOK_EXPORT int
ctxshim_BIO_read_ossl3(BIO *b, void *buf, int len)
{
	OSSL_CR_OWN(OSSL_CR_READ, ossl_bio_io_fn, b, buf, len);
	return hook_openssl_bio_read(b, buf, len);
}

HOOK_EXPORT int
ctxshim_BIO_read_ex_ossl3(BIO *b, void *buf, size_t len, size_t *n)
{
	OSSL_CR_OWN(OSSL_CR_READ_EX, ossl_bio_io_ex_fn, b, buf, len, n);
	return hook_openssl_bio_read_ex(b, buf, len, n);
}

HOOK_EXPORT int
ctxshim_BIO_write_ossl3(BIO *b, const void *buf, int len)
{
	OSSL_CR_OWN(OSSL_CR_WRITE, ossl_bio_wr_fn, b, buf, len);
	return hook_openssl_bio_write(b, buf, len);
}

HOOK_EXPORT int
ctxshim_BIO_write_ex_ossl3(BIO *b, const void *buf, size_t len, size_t *n)
{
	OSSL_CR_OWN(OSSL_CR_WRITE_EX, ossl_bio_wr_ex_fn, b, buf, len, n);
	return hook_openssl_bio_write_ex(b, buf, len, n);
}

OSSL_SYMVER(SSL_read);
OSSL_SYMVER(SSL_read_ex);
OSSL_SYMVER(SSL_peek);
OSSL_SYMVER(SSL_peek_ex);
OSSL_SYMVER(SSL_write);
OSSL_SYMVER(SSL_write_ex);
OSSL_SYMVER(SSL_free);
OSSL_SYMVER(SSL_set_fd);
OSSL_SYMVER(SSL_do_handshake);
OSSL_SYMVER(SSL_up_ref);
OSSL_SYMVER(SSL_dup);
OSSL_SYMVER(SSL_clear);
OSSL_SYMVER(BIO_read);
OSSL_SYMVER(BIO_read_ex);
OSSL_SYMVER(BIO_write);
OSSL_SYMVER(BIO_write_ex);

/* Our own copies, so that a binding can never come back to them. */
static const void *ossl_self[OSSL_HOOKED] = {
	[OSSL_READ] = (const void *)ctxshim_SSL_read_ossl3,
	[OSSL_READ_EX] = (const void *)ctxshim_SSL_read_ex_ossl3,
	[OSSL_PEEK] = (const void *)ctxshim_SSL_peek_ossl3,
	[OSSL_PEEK_EX] = (const void *)ctxshim_SSL_peek_ex_ossl3,
	[OSSL_WRITE] = (const void *)ctxshim_SSL_write_ossl3,
	[OSSL_WRITE_EX] = (const void *)ctxshim_SSL_write_ex_ossl3,
	[OSSL_FREE] = (const void *)ctxshim_SSL_free_ossl3,
	[OSSL_SET_FD] = (const void *)ctxshim_SSL_set_fd_ossl3,
	[OSSL_DO_HANDSHAKE] = (const void *)ctxshim_SSL_do_handshake_ossl3,
	[OSSL_UP_REF] = (const void *)ctxshim_SSL_up_ref_ossl3,
	[OSSL_DUP] = (const void *)ctxshim_SSL_dup_ossl3,
	[OSSL_CLEAR] = (const void *)ctxshim_SSL_clear_ossl3,
};
static const void *ossl_cr_self[OSSL_CR_HOOKED] = {
	[OSSL_CR_READ] = (const void *)ctxshim_BIO_read_ossl3,
	[OSSL_CR_READ_EX] = (const void *)ctxshim_BIO_read_ex_ossl3,
	[OSSL_CR_WRITE] = (const void *)ctxshim_BIO_write_ossl3,
	[OSSL_CR_WRITE_EX] = (const void *)ctxshim_BIO_write_ex_ossl3,
};
