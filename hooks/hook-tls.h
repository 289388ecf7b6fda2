/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the socket level (hooks/hook-socket.c) offers the TLS hooks
 * (hook-openssl.c, hook-gnutls.c): the plaintext of a server connection
 * goes through the same head scanner, per-connection slot and per-thread
 * bookkeeping as the bytes of a plain one, so the thread's record follows
 * TLS connections by the same rules (attach at a head, switch on I/O of
 * another connection, clear at waits, close and once answered).
 *
 * Every function here keeps errno, and passes through when the thread is
 * already inside the socket level (a signal handler that interrupted it).
 * None allocates, locks or logs: they run inside SSL_read() and friends. */

#include <stdbool.h>
#include <stddef.h>

struct ctxshim_conn;

/* A TLS session's connection as the socket level tracks it. */
struct hook_tls_conn {
	struct ctxshim_conn *c;
	int id;       /* the fd, or a virtual id (conn.h) for fd-less ones */
	bool claimed; /* a library hook handles its requests: answers only */
};

/* The connection of a TLS session.  fd >= 0 is its socket: tracked when it
 * was accept()ed (and taken from the socket level if it still scanned it,
 * with key as its session: preload/conn.c, "Sessions").
 * fd < 0 (a custom transport): the session pointer key names it; it is
 * tracked when server (a server-side session), in a slot found or, with
 * create, claimed for it.  False when the session is not ours to follow
 * (client side, not accepted through us, table full). */
bool hook_socket_tls_find(
	int fd, const void *key, bool server, bool create, struct hook_tls_conn *t);

/* Around a call that reads plaintext: _begin before it (the thread now
 * works on this connection), _end after it with the bytes it returned
 * (n > 0).  A peek calls only _begin. */
void hook_socket_tls_read_begin(const struct hook_tls_conn *t);
void hook_socket_tls_read_end(const struct hook_tls_conn *t, const void *buf, size_t n);

/* Around a call that writes plaintext; _end with the n > 0 bytes it wrote
 * (from buf; NULL: bytes written that are not at hand). */
void hook_socket_tls_write_begin(const struct hook_tls_conn *t);
void
hook_socket_tls_write_end(const struct hook_tls_conn *t, const void *buf, size_t n);
/* The same when only the first head_len bytes of the n written are at
 * hand (head; a send resumed without its data, hook-gnutls.c). */
void hook_socket_tls_write_end_head(const struct hook_tls_conn *t,
				    const void *head,
				    size_t head_len,
				    size_t n);

/* The session is freed (its last SSL_free, gnutls_deinit): the thread stops
 * publishing its connection's context, and a virtual slot (fd < 0, key)
 * is released.  An fd that was given to another session since key's (key's
 * fd closed, its number accepted again, key freed later) is left alone.
 * reason goes to the event log. */
void hook_socket_tls_end(int fd, const void *key, const char *reason);
