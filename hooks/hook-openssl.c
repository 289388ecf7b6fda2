/* SPDX-License-Identifier: Apache-2.0 */
/* OpenSSL 3 (libssl.so.3): the plaintext of TLS server connections goes
 * to the socket level's request-head scanner (hook-tls.h), so a TLS
 * request gets its context exactly as a plain one does, and the thread's
 * record follows TLS connections by the same rules.
 *
 * Hooks: SSL_read, SSL_read_ex (bytes in), SSL_peek, SSL_peek_ex and
 * SSL_do_handshake (the thread works on the connection, but no request
 * bytes arrive: it only follows, as a socket read of a peek would),
 * SSL_write, SSL_write_ex (the request is answered), SSL_free (the session
 * ends), SSL_set_fd (the fd carries TLS from now on: the socket level
 * stops scanning it before the handshake).  The handshake matters for
 * event loops: the socket level no longer follows a TLS fd's ciphertext
 * reads, so without it a loop handshaking a new connection would still
 * show the request it worked on before.  libssl calls SSL_read_ex,
 * SSL_write_ex, SSL_do_handshake (from SSL_accept) and SSL_free through
 * its PLT (also from the SSL BIO, BIO_f_ssl): those are the
 * application's calls too, and SSL_read does not call SSL_read_ex, so
 * nothing is seen twice.
 *
 * Connection of a session: SSL_get_fd(), on every call.  It is a few
 * loads in libssl (the read BIO's descriptor), and always right, whereas
 * a cache would go stale when the application swaps BIOs or reuses an fd
 * number.  A session with no fd (the application's own BIO, as h2o has)
 * is followed when SSL_is_server() says it is a server session, in a
 * small table of slots keyed by the SSL pointer (conn.h).  Client
 * sessions (libcurl, an nginx upstream) have connect()ed fds, which the
 * socket level does not track: they pass straight through.
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
 * cannot outlive it.  Not found at all (cannot happen while something
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
#include <stddef.h>

#include <openssl/ssl.h>

#define OSSL_NODE   "OPENSSL_3.0.0"
#define OSSL_SONAME "libssl.so.3"

typedef int (*ossl_io_fn)(SSL *, void *, int);
typedef int (*ossl_io_ex_fn)(SSL *, void *, size_t, size_t *);
typedef int (*ossl_wr_fn)(SSL *, const void *, int);
typedef int (*ossl_wr_ex_fn)(SSL *, const void *, size_t, size_t *);
typedef void (*ossl_free_fn)(SSL *);
typedef int (*ossl_set_fd_fn)(SSL *, int);
typedef int (*ossl_get_fd_fn)(const SSL *);
typedef int (*ossl_handshake_fn)(SSL *);

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
	OSSL_HOOKED, /* the ones above are ours; the ones below only called */
	OSSL_GET_FD = OSSL_HOOKED,
	OSSL_IS_SERVER,
	OSSL_N,
};

static const char *const ossl_name[OSSL_N] = {
	"SSL_read",         "SSL_read_ex",  "SSL_peek",      "SSL_peek_ex",
	"SSL_write",        "SSL_write_ex", "SSL_free",      "SSL_set_fd",
	"SSL_do_handshake", "SSL_get_fd",   "SSL_is_server",
};

static void *ossl_fn[OSSL_N];
static const void *ossl_self[OSSL_HOOKED];
static pthread_once_t ossl_once = PTHREAD_ONCE_INIT;

static void
hook_openssl_bind_once(void)
{
	int saved_errno = errno;
	static const char *const sonames[] = {OSSL_SONAME, NULL};
	int i;

	for (i = 0; i < OSSL_N; i++) {
		const void *self = i < OSSL_HOOKED ? ossl_self[i] : NULL;

		ossl_fn[i] =
			ctxshim_bind_loaded(sonames, ossl_name[i], OSSL_NODE, self);
	}
	for (i = 0; i < OSSL_N; i++)
		if (!ossl_fn[i]) {
			ctxshim_log("openssl: %s@%s not found", ossl_name[i],
				    OSSL_NODE);
			break;
		}
	errno = saved_errno;
}

static inline void
hook_openssl_bind(void)
{
	pthread_once(&ossl_once, hook_openssl_bind_once);
}

/* After the socket level's constructor (103): bind now when libssl is
 * already there, so that a linked program never binds on a read path. */
__attribute__((constructor(104))) static void
hook_openssl_ctor(void)
{
	static const char *const sonames[] = {OSSL_SONAME, NULL};
	int saved_errno = errno;

	if (ctxshim_lib_loaded(sonames))
		hook_openssl_bind();
	errno = saved_errno;
}

/* The failure a broken session gives, with errno telling why: -1 for the
 * int-returning calls, 0 for the _ex ones and SSL_set_fd. */
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

/* Only called from inside a hook, after binding. */
static inline int
real_SSL_get_fd(const SSL *s)
{
	if (!ossl_fn[OSSL_GET_FD])
		return -1;
	return ((ossl_get_fd_fn)ossl_fn[OSSL_GET_FD])(s);
}

static inline bool
real_SSL_is_server(const SSL *s)
{
	if (!ossl_fn[OSSL_IS_SERVER])
		return false;
	return ((ossl_get_fd_fn)ossl_fn[OSSL_IS_SERVER])(s) == 1;
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
	fd = real_SSL_get_fd(s);
	ok = hook_socket_tls_find(fd, s, fd < 0 && real_SSL_is_server(s), create, t);
	errno = saved_errno;
	return ok;
}

static int
hook_openssl_read(SSL *s, void *buf, int num)
{
	struct hook_tls_conn t;
	int r;

	if (!ctxshim_active() || !ossl_conn(s, true, &t))
		return real_SSL_read(s, buf, num);
	hook_socket_tls_read_begin(&t);
	r = real_SSL_read(s, buf, num);
	if (r > 0)
		hook_socket_tls_read_end(&t, buf, (size_t)r);
	return r;
}

static int
hook_openssl_read_ex(SSL *s, void *buf, size_t num, size_t *n)
{
	struct hook_tls_conn t;
	int r;

	if (!ctxshim_active() || !ossl_conn(s, true, &t))
		return real_SSL_read_ex(s, buf, num, n);
	hook_socket_tls_read_begin(&t);
	r = real_SSL_read_ex(s, buf, num, n);
	if (r == 1 && n && *n > 0 && *n <= num)
		hook_socket_tls_read_end(&t, buf, *n);
	return r;
}

static int
hook_openssl_peek(SSL *s, void *buf, int num)
{
	struct hook_tls_conn t;

	if (ctxshim_active() && ossl_conn(s, false, &t))
		hook_socket_tls_read_begin(&t);
	return real_SSL_peek(s, buf, num);
}

static int
hook_openssl_peek_ex(SSL *s, void *buf, size_t num, size_t *n)
{
	struct hook_tls_conn t;

	if (ctxshim_active() && ossl_conn(s, false, &t))
		hook_socket_tls_read_begin(&t);
	return real_SSL_peek_ex(s, buf, num, n);
}

static int
hook_openssl_do_handshake(SSL *s)
{
	struct hook_tls_conn t;

	if (ctxshim_active() && ossl_conn(s, false, &t))
		hook_socket_tls_read_begin(&t);
	return real_SSL_do_handshake(s);
}

static int
hook_openssl_write(SSL *s, const void *buf, int num)
{
	struct hook_tls_conn t;
	int r;

	if (!ctxshim_active() || !ossl_conn(s, false, &t))
		return real_SSL_write(s, buf, num);
	hook_socket_tls_write_begin(&t);
	r = real_SSL_write(s, buf, num);
	if (r > 0)
		hook_socket_tls_write_end(&t, buf, (size_t)r);
	return r;
}

static int
hook_openssl_write_ex(SSL *s, const void *buf, size_t num, size_t *n)
{
	struct hook_tls_conn t;
	int r;

	if (!ctxshim_active() || !ossl_conn(s, false, &t))
		return real_SSL_write_ex(s, buf, num, n);
	hook_socket_tls_write_begin(&t);
	r = real_SSL_write_ex(s, buf, num, n);
	if (r == 1 && n && *n > 0 && *n <= num)
		hook_socket_tls_write_end(&t, buf, *n);
	return r;
}

static void
hook_openssl_free(SSL *s)
{
	if (s && ctxshim_active() &&
	    __atomic_load_n(&ctxshim_conn_tab.max_fds, __ATOMIC_ACQUIRE)) {
		int saved_errno = errno, fd;

		hook_openssl_bind();
		fd = real_SSL_get_fd(s);
		hook_socket_tls_end(fd, s, "ssl-free");
		errno = saved_errno;
	}
	real_SSL_free(s);
}

static int
hook_openssl_set_fd(SSL *s, int fd)
{
	struct hook_tls_conn t;
	int r = real_SSL_set_fd(s, fd);

	/* From now on the fd's bytes are TLS records: the socket level
	 * hands the connection over before the handshake reads it. */
	if (r == 1 && fd >= 0 && ctxshim_active())
		(void)hook_socket_tls_find(fd, s, false, false, &t);
	return r;
}

/* ---- exported names (version OPENSSL_3.0.0) -------------------------------- */

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

HOOK_EXPORT int
ctxshim_SSL_read_ossl3(SSL *s, void *buf, int num)
{
	return hook_openssl_read(s, buf, num);
}

HOOK_EXPORT int
ctxshim_SSL_read_ex_ossl3(SSL *s, void *buf, size_t num, size_t *n)
{
	return hook_openssl_read_ex(s, buf, num, n);
}

HOOK_EXPORT int
ctxshim_SSL_peek_ossl3(SSL *s, void *buf, int num)
{
	return hook_openssl_peek(s, buf, num);
}

HOOK_EXPORT int
ctxshim_SSL_peek_ex_ossl3(SSL *s, void *buf, size_t num, size_t *n)
{
	return hook_openssl_peek_ex(s, buf, num, n);
}

HOOK_EXPORT int
ctxshim_SSL_write_ossl3(SSL *s, const void *buf, int num)
{
	return hook_openssl_write(s, buf, num);
}

HOOK_EXPORT int
ctxshim_SSL_write_ex_ossl3(SSL *s, const void *buf, size_t num, size_t *n)
{
	return hook_openssl_write_ex(s, buf, num, n);
}

HOOK_EXPORT void
ctxshim_SSL_free_ossl3(SSL *s)
{
	hook_openssl_free(s);
}

HOOK_EXPORT int
ctxshim_SSL_set_fd_ossl3(SSL *s, int fd)
{
	return hook_openssl_set_fd(s, fd);
}

HOOK_EXPORT int
ctxshim_SSL_do_handshake_ossl3(SSL *s)
{
	return hook_openssl_do_handshake(s);
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
};
