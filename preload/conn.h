/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The per-connection table of the socket level (hooks/hook-socket.c), and
 * the two calls the library hooks (hook-mhd.c, hook-evhttp.c) use.
 *
 * One 256-byte slot per server-side connection, indexed by fd: the HTTP
 * head scanner's state, a few flags, and a compact copy of the context of
 * the connection's current request.  Slots live in chunks of
 * CTXSHIM_CONN_CHUNK fds, mmap'd the first time accept() returns an fd in
 * the chunk (never on a read path); the chunk pointer array is sized from
 * the RLIMIT_NOFILE hard limit (capped at CTXSHIM_CONN_MAX_FDS) when the
 * shim starts, next to a "hot" map of one byte per fd.  A read of an fd
 * that is not a tracked server connection is one bound check and one byte
 * load in the hot map.
 *
 * Captured header values of a head in progress do not live in the slot:
 * they go to a small process-wide pool of http_scan_capture buffers (see
 * conn.c for the trade-off), which also holds the contexts of pipelined
 * requests that arrived before the current one was answered.
 *
 * fd reuse: every accept(), close() or dup2() over the fd bumps the slot's
 * generation, so a thread that published a context from (fd, gen) can tell
 * that the fd now means another connection.
 *
 * Copies (dup, dup2, dup3, F_DUPFD; fds 1 and 2 inherited as copies of
 * fd 0): the descriptors of one connection form a ring through a link word
 * per fd (fd + 1 and generation of the next one), kept after the chunk's
 * slots; one of them holds the connection's state, the others are
 * CONN_F_LINK slots (conn.c, "Copies").  Connections inherited at start-up
 * (inetd, socket activation) are followed as if accepted (conn.c,
 * "inherited connections").
 *
 * TLS sessions: a TLS connection's fd also has a session word (after the
 * link words), the session (SSL *, gnutls_session_t) its TLS is for, so
 * that the end of an older session that still names the fd number does
 * not end the connection now on it (conn.c, "Sessions"). */

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include "http-scan.h"
#include "thread-ctx.h"

/* ---- for the library hooks ---- */

/* True, and *out filled, when fd is a server connection whose current
 * request head has been seen by the socket level and not answered yet: a
 * library hook attaches this context (same trace-id and span-id) instead of
 * minting a second span for the same request.  False otherwise (not a
 * tracked connection, no complete head, the head was too large or not
 * captured, or a response was already written on it). */
bool ctxshim_conn_request_ctx(int fd, struct ctxshim_ctx *out);

/* A library hook handles the requests on fd from now on: the socket level
 * stops scanning it and never attaches, switches or detaches a context for
 * it again (until the fd is closed and reused).  It still notes response
 * writes, so ctxshim_conn_request_ctx() keeps returning the request seen
 * before the claim until it is answered, and false afterwards (later
 * requests on the fd are not scanned).  Idempotent; any fd. */
void ctxshim_conn_claim(int fd);

/* True when fd is still the connection of generation gen (a context's
 * sock_gen) and its scanner gave up on an HTTP/2 preface ("PRI *
 * HTTP/2.0"): the connection has turned to HTTP/2, e.g. after an
 * "Upgrade: h2c" head.  Lock-free, no allocation; false for any other
 * fd. */
bool ctxshim_conn_h2_preface(int fd, uint32_t gen);

/* Upgrade candidates: fd of generation gen is the connection an nghttp2
 * server session took for the one it was upgraded from ("Upgrade: h2c",
 * hooks/hook-nghttp2.c, nh_upgraded()), until the session's first frame
 * settles it.  Meanwhile the connection's writes after the client's
 * preface still carry stream 1, the upgrade request
 * (hooks/hook-socket.c, sk_write_continues()).  _add() returns the
 * candidate's slot + 1 for _remove(), or 0 with every slot taken (the
 * connection is then no candidate: those writes show nothing), of
 * CTXSHIM_CONN_H2_CAND_N.  The candidate is the connection, whichever of
 * its copies it is read and written through, and goes on to a copy when
 * fd is closed (conn.c, "Upgrade candidates"): _get() fills the
 * descriptor and generation slot names now, false if it names none.
 * Lock-free, no allocation. */
#define CTXSHIM_CONN_H2_CAND_N 64
unsigned ctxshim_conn_h2_candidate_add(int fd, uint32_t gen);
void ctxshim_conn_h2_candidate_remove(unsigned slot);
bool ctxshim_conn_h2_candidate_get(unsigned slot, int *fd, uint32_t *gen);

/* ---- for hooks/hook-socket.c ---- */

#define CTXSHIM_CONN_SLOT_SIZE   256
#define CTXSHIM_CONN_CHUNK_SHIFT 8
#define CTXSHIM_CONN_CHUNK       (1u << CTXSHIM_CONN_CHUNK_SHIFT) /* fds per chunk */
#define CTXSHIM_CONN_MAX_FDS     (1u << 20)

enum {
	CONN_F_TRACKED = 0x01,  /* a server-side (accepted) connection */
	CONN_F_CLAIMED = 0x02,  /* a library hook handles it */
	CONN_F_REQ = 0x04,      /* a request is current (head seen) */
	CONN_F_HAS_CTX = 0x08,  /* ctx holds the current request's context */
	CONN_F_OVERFLOW = 0x10, /* a pipelined head did not fit the queue: the
				  * scanner stopped, and requests past the
				  * queue run without a context (conn.c,
				  * "Bound") */
	CONN_F_PROMOTED = 0x20, /* it was pipelined behind the previous one */
	CONN_F_TLS = 0x40,      /* TLS: the scanner gets plaintext from the TLS
				  * hooks, never the socket's bytes */
	CONN_F_LINK = 0x80,     /* a copy of a connection (dup, dup2, dup3,
				  * F_DUPFD, an inherited fd 1 or 2): its state
				  * is held by another descriptor of its ring
				  * (conn.c, "Copies"); its scanner is stopped
				  * and it always has REQ and HAS_CTX, never
				  * answered, so that its I/O misses every fast
				  * path and reaches the branches that take it
				  * as the connection's */
};

/* Compact copy of a request context: ids as in struct ctxshim_ctx, then
 * data[] = attrs_len bytes of encoded attributes followed by
 * tracestate_len bytes of tracestate.  Attributes are added in order
 * (method, path, parent, configured headers) and an entry that does not
 * fit is dropped whole, the later ones still added if they fit; tracestate
 * gets what is left, cut back to whole members.  A request's first
 * publication on the thread that read its head uses the full context, not
 * this copy; the copy serves switch-backs, pipelined requests and library
 * hooks. */
/* 178, not 182: four bytes of the 256 went to the FIFO (its tail index,
 * and its push and pop counts). */
#define CTXSHIM_CONN_DATA_MAX 178
/* The fields up to data are in the order of an OTEP-4947 record (as in
 * struct ctxshim_ctx from trace_id on), with has_parent where the record's
 * valid byte is and tracestate_len where the high byte of its 16-bit
 * attrs_data_size is: the usual context is copied in from a record with a
 * few 16-byte moves (conn-whole.h, ctxshim_conn_compact_fast()). */
struct ctxshim_conn_ctx {
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t has_parent;
	uint8_t flags;
	uint8_t attrs_len;
	uint8_t tracestate_len;
	uint8_t data[CTXSHIM_CONN_DATA_MAX];
	uint8_t parent_id[8];
};

/* Who writes what (conn.c, "Concurrency", has the whole argument).  The
 * per-request path uses no lock-prefixed instruction: each field that
 * changes per request has one writer at a time, so plain (relaxed) stores
 * do, where an atomic read-modify-write would cost ~20 cycles each.
 *
 *  - scan, cap: the thread reading the connection (the scanner already
 *    requires one reader of a socket at a time).  cap, once held across
 *    reads (a split head, an HTTP/2 scanner), is set and let
 *    go with compare-and-swaps or an exchange, so that two readers at
 *    once, or a close during a read, neither lose an entry nor free one
 *    twice (conn.c, "Two readers").
 *  - pending, tail: the FIFO of pipelined requests, a single-producer /
 *    single-consumer queue that stays correct when the reading and the
 *    writing thread are two threads at once (conn.c, "Pipelining FIFO"):
 *    tail is the reading thread's (it appends; of two threads reading at
 *    once, the one that holds the producer token, tail's bit 15); pending
 *    (the head) is the writing thread's while it is non-zero (it pops),
 *    and is handed to the reading thread, through one compare-and-swap on
 *    the last entry's next, when a pop empties the queue.  A pop claims
 *    its entry with a compare-and-swap on pending, and whatever takes the
 *    queue away (the state moving to another descriptor of the
 *    connection, a release) takes pending and tail with an exchange, so
 *    each entry is freed or handed on by one side only (conn.c,
 *    "Copies").  Both are atomic for that; the reader's own accesses are
 *    relaxed loads and stores (plain moves), but for the compare-and-swap
 *    that takes the token, once per queued request.
 *  - qpush, qpop: how many requests the reading thread queued (with the
 *    token), and how many of them the writing thread popped (each
 *    counter has that one writer; qpush - qpop, mod 256, is the queue's
 *    length, which conn.c bounds: "Bound").
 *  - seq: odd while ctx (and the current request) is being changed.
 *    Single writer: the reading thread when a new head becomes current,
 *    or, with pipelining, the writing thread when it moves on to the next
 *    queued request (or, past the queue of a connection that overflowed,
 *    to a request without a context: the reader's scanner is stopped
 *    then); the two exclude each other (one needs the current
 *    request answered, the other needs it unanswered), and fd life-cycle
 *    events (accept, close, dup2, TLS start) do not overlap I/O on the
 *    same connection.  If an application breaks this (reads one socket
 *    from two threads at once), the scanner state races and a context may
 *    come out mixed from two requests, but nothing becomes memory-unsafe:
 *    each read scans into its own pool entry (only a split head's entry
 *    could be shared, and the scanner bounds every write into a
 *    capture), every length is bounded where the compact
 *    context is expanded, pool indexes are bounded where followed, and
 *    seq ends even again after the last writer (see conn_seq_end()).
 *  - answered: the writing thread.  The current request is answered when
 *    answered == (uint8_t)(seq >> 1): a response write stores the value it
 *    sees; a new current request (seq += 2) makes it unequal without the
 *    reading thread touching this byte.  The distance seq/2 - answered
 *    (mod 256) stays at most 3 (conn.c, conn_set_answered()), so the 8
 *    bits never wrap into a false match.
 *  - flags: rarely changed; a library hook may set CONN_F_CLAIMED from any
 *    thread, so changes use compare-and-swap.  A new request on a
 *    keep-alive connection usually leaves them as they are, and then
 *    nothing is written. */
struct ctxshim_conn {
	struct http_scan scan;    /* 24 bytes, all-zero = fresh */
	_Atomic uint32_t gen;     /* connection identity, see above */
	_Atomic uint32_t seq;     /* odd while ctx is being rewritten */
	uint16_t cap;             /* pool entry + 1 holding the head in progress */
	_Atomic uint16_t pending; /* pool entry + 1: first pipelined context */
	_Atomic uint8_t flags;    /* CONN_F_* */
	_Atomic uint8_t answered; /* see above */
	_Atomic uint16_t tail;    /* pool entry + 1: last one queued, or a stub;
				   * bit 15: an append in progress (conn.c) */
	uint8_t qpush;            /* requests queued (the reader's) */
	_Atomic uint8_t qpop;     /* of those, popped (the writer's) */
	struct ctxshim_conn_ctx ctx;
};
_Static_assert(sizeof(struct ctxshim_conn) == CTXSHIM_CONN_SLOT_SIZE,
	       "B8: at most 256 bytes of state per tracked connection");

/* Values of the hot map.  The TLS values have neither the SCAN nor the
 * CLAIMED bit: the socket hooks pass their I/O straight through (it is
 * ciphertext) and only close/dup2 still look at them. */
enum {
	CONN_HOT_NONE = 0,         /* not a tracked connection */
	CONN_HOT_SCAN = 1,         /* tracked: reads are scanned, I/O switches */
	CONN_HOT_CLAIMED = 2,      /* claimed: only writes are noted (answered) */
	CONN_HOT_SHIM = 4,         /* the shim's own event log: stop using it
				    * before the application closes or reuses
				    * it */
	CONN_HOT_TLS = 8,          /* tracked, TLS: the TLS hooks scan and switch */
	CONN_HOT_TLS_CLAIMED = 16, /* TLS and claimed: the TLS hooks only note
				    * answers */
	CONN_HOT_UP = 32,          /* an upstream: a socket the process
				    * connect()ed while it worked on a request
				    * (ctxshim_conn_upstream()); never
				    * scanned, its reads switch to the request
				    * it carries */
};

struct ctxshim_conn_table {
	unsigned max_fds; /* 0 until set up (and when the shim is off) */
	uint8_t *hot;     /* max_fds bytes, CONN_HOT_* */
	struct ctxshim_conn *_Atomic *chunks; /* max_fds / CHUNK pointers */
};
extern struct ctxshim_conn_table ctxshim_conn_tab __attribute__((visibility("hidden")));

/* The fast-path test: CONN_HOT_* of fd.  A bound check and one byte load,
 * so that I/O on pipes, files and client sockets stays within a few
 * instructions of the real call (B3). */
static inline uint8_t
ctxshim_conn_hot(int fd)
{
	if ((unsigned)fd >=
	    __atomic_load_n(&ctxshim_conn_tab.max_fds, __ATOMIC_ACQUIRE))
		return CONN_HOT_NONE;
	return __atomic_load_n(&ctxshim_conn_tab.hot[fd], __ATOMIC_RELAXED);
}

/* ctxshim_conn_hot(fd) != CONN_HOT_NONE, for close(): the byte is
 * compared where it is (one instruction less than loading it first, which
 * a relaxed atomic load forces).  fd is the caller's own open descriptor,
 * so no accept() can be writing its byte meanwhile: only a close or dup2
 * of that same descriptor by another thread at once, which races in the
 * kernel too. */
static inline bool
ctxshim_conn_hot_any(int fd)
{
	if ((unsigned)fd >=
	    __atomic_load_n(&ctxshim_conn_tab.max_fds, __ATOMIC_ACQUIRE))
		return false;
	return ctxshim_conn_tab.hot[(unsigned)fd] != CONN_HOT_NONE;
}

/* The hot-map values whose writes the write hooks look at (a claimed
 * connection's only to note its answer), and whose reads the read hooks
 * look at. */
#define CONN_HOT_OUT (CONN_HOT_SCAN | CONN_HOT_CLAIMED | CONN_HOT_UP)
#define CONN_HOT_IN  (CONN_HOT_SCAN | CONN_HOT_UP)

/* ctxshim_conn_hot(fd) & CONN_HOT_OUT, for the write hooks: tested where
 * it is, as in ctxshim_conn_hot_any(); their general path reads the byte
 * again. */
static inline bool
ctxshim_conn_hot_out(int fd)
{
	if ((unsigned)fd >=
	    __atomic_load_n(&ctxshim_conn_tab.max_fds, __ATOMIC_ACQUIRE))
		return false;
	return ctxshim_conn_tab.hot[(unsigned)fd] & CONN_HOT_OUT;
}

/* ctxshim_conn_hot(fd) & CONN_HOT_IN, for the read hooks: tested where it
 * is, as in ctxshim_conn_hot_any() (B3: a read of a pipe or a file is one
 * instruction shorter; a test of two bits costs what a compare did). */
static inline bool
ctxshim_conn_hot_scan(int fd)
{
	if ((unsigned)fd >=
	    __atomic_load_n(&ctxshim_conn_tab.max_fds, __ATOMIC_ACQUIRE))
		return false;
	return ctxshim_conn_tab.hot[(unsigned)fd] & CONN_HOT_IN;
}

/* The chunk holding fd's slot, or NULL if it was never mapped. */
static inline struct ctxshim_conn *
ctxshim_conn_chunk(int fd)
{
	if ((unsigned)fd >= ctxshim_conn_tab.max_fds)
		return NULL;
	return atomic_load_explicit(
		&ctxshim_conn_tab.chunks[(unsigned)fd >> CTXSHIM_CONN_CHUNK_SHIFT],
		memory_order_acquire);
}

/* The slot of fd if its chunk exists, else NULL. */
static inline struct ctxshim_conn *
ctxshim_conn_get(int fd)
{
	struct ctxshim_conn *chunk = ctxshim_conn_chunk(fd);

	return chunk ? &chunk[(unsigned)fd & (CTXSHIM_CONN_CHUNK - 1)] : NULL;
}

/* ctxshim_conn_get() of an fd below ctxshim_conn_tab.max_fds: one whose
 * hot byte the caller has read (ctxshim_conn_hot() bounds it, and
 * max_fds never changes once set), as the socket level's read hooks do
 * before anything else. */
static inline struct ctxshim_conn *
ctxshim_conn_get_hot(int fd)
{
	struct ctxshim_conn *chunk = atomic_load_explicit(
		&ctxshim_conn_tab.chunks[(unsigned)fd >> CTXSHIM_CONN_CHUNK_SHIFT],
		memory_order_acquire);

	return chunk ? &chunk[(unsigned)fd & (CTXSHIM_CONN_CHUNK - 1)] : NULL;
}

/* Set up the table (conn.c's constructor, when the shim is active). */
void ctxshim_conn_init(void);

/* fd was returned by accept()/accept4(): start tracking it afresh
 * (allocates its chunk if needed; silently untracked when that fails). */
void ctxshim_conn_accepted(int fd);

/* fd stopped meaning its connection (close, dup2/dup3 over it,
 * close_range): forget it and release what it held.  True if a copy of
 * it carries the connection on (conn.c, "Forwards": then
 * ctxshim_conn_holder() finds it from fd), false if this was its last
 * descriptor the hooks know of. */
bool ctxshim_conn_forget(int fd);

/* fd (CONN_HOT_SHIM) is about to be closed or replaced by the application:
 * the shim stops using it. */
void ctxshim_conn_release_shim_fd(int fd);

/* newfd became a duplicate of oldfd (dup, dup2, dup3, F_DUPFD): newfd
 * names the same connection.  A plain connection's copy joins oldfd's ring
 * of copies as a CONN_F_LINK slot (conn.c, "Copies"); a TLS or claimed
 * one's, or one beyond CTXSHIM_CONN_RING_MAX descriptors, gets a copy of
 * the slot with its own generation (a head in progress is not captured on
 * the copy). */
void ctxshim_conn_dup(int oldfd, int newfd);

/* For a CONN_F_LINK slot (fd's): the descriptor of its ring that holds the
 * connection's state (a plain connection, neither TLS nor claimed), its
 * slot in *out; -1 if there is none (the ring was broken by a close the
 * hooks did not see, or its holder went TLS).  At most CONN_RING_MAX hops,
 * which reach every member: a ring has at most CONN_RING_MAX descriptors
 * (more copies get slots of their own, as a TLS connection's do): no lock,
 * no allocation. */
#define CTXSHIM_CONN_RING_MAX 16
int ctxshim_conn_leader(int fd, struct ctxshim_conn **out);

/* The slot that holds, now, the state of the connection that id (an fd,
 * or a connection without one: ctxshim_conn_by_id()) named under
 * generation gen, and its id in *hid: id's own slot while it has gen;
 * the ring's leader if that is a copy; and if id was closed while a copy
 * carried the connection on, the slot of that copy, found through a word
 * the close left (conn.c, "Forwards").  NULL if none (the connection was
 * closed, the number reused and closed again since, ...).  It may be
 * another connection's after 2^21 generations of a number: the caller
 * checks that its current request is the one it looks for (its
 * span-id).  No lock, no allocation, at most CTXSHIM_CONN_RING_MAX + 1
 * forwards followed. */
struct ctxshim_conn *ctxshim_conn_holder(int id, uint32_t gen, int *hid);

/* Bytes are read through fd, a CONN_F_LINK copy: it becomes its ring's
 * leader, the connection's state moved to it from the old leader, which
 * becomes a copy (generations unchanged).  False if fd has no leader. */
bool ctxshim_conn_lead(int fd);

/* Upstreams (hooks/hook-socket.c, "Upstreams").  A socket the process
 * connect()s while a thread publishes a request's context gets
 * CONN_HOT_UP and a slot that looks like a copy without a leader
 * (CONN_F_LINK | CONN_F_REQ | CONN_F_HAS_CTX, not CONN_F_TRACKED, its
 * scanner stopped): its I/O misses every fast path and reaches
 * sk_follow_link(), and nothing else takes it for a connection (no
 * scan, no answer, no copy, no claim, no TLS).  An upstream word per fd
 * (after the session words) names the request it carries: the server
 * connection's fd + 1 in the low CTXSHIM_CONN_UP_FD_BITS bits, and
 * above them that connection's seq when the request was current.  seq
 * only grows on a slot (every new request, promotion, reset and copy
 * moves it on: conn.c), so (fd, seq) names one request of one
 * connection until seq wraps (2^31 changes of that slot), and a word
 * that names an older one simply no longer matches.  One 64-bit word: no torn read pairs one request's fd
 * with another's seq.  0: none. */
#define CTXSHIM_CONN_UP_FD_BITS 21
/* Set at connect(), cleared by the first write: that write may come with
 * no context (a non-blocking connect's, after the wait). */
#define CTXSHIM_CONN_UP_FRESH (1ull << 63)
_Static_assert(CTXSHIM_CONN_MAX_FDS < (1u << CTXSHIM_CONN_UP_FD_BITS),
	       "an upstream word holds fd + 1 of every table fd");

static inline uint64_t
ctxshim_conn_up_make(int fd, uint32_t seq)
{
	return ((uint64_t)seq << CTXSHIM_CONN_UP_FD_BITS) |
	       (uint64_t)(unsigned)(fd + 1);
}

/* fd (a socket that connect() just gave a connection or a connection in
 * progress, and whose hot byte is CONN_HOT_NONE or CONN_HOT_UP) becomes
 * an upstream carrying v (ctxshim_conn_up_make()).  Maps its chunk if
 * needed (connect() is no read or write path); false, and fd left as it
 * was, when that fails. */
bool ctxshim_conn_upstream(int fd, uint64_t v);

/* Is upstream fd still the socket it became an upstream as (the same
 * inode: no close the hooks missed gave its number to another file)?
 * One fstat(); changes errno. */
bool ctxshim_conn_up_same(int fd);

/* fd (CONN_HOT_UP) now carries v; and the word it carries. */
void ctxshim_conn_up_store(int fd, uint64_t v);
uint64_t ctxshim_conn_up_load(int fd);

/* Start-up (conn.c's constructor, CTXSHIM_INHERITED): follow the connected
 * server-side stream sockets the process inherited (inetd, tcpserver,
 * systemd socket activation) as if accept() had returned them. */
void ctxshim_conn_inherit(void);

/* The scanner of fd (slot c, no request seen on it yet) gave up on bytes
 * that are no request head: if fd is the stdin connection found at
 * start-up (maybe a client-side socket: ssh ProxyCommand, a socat child),
 * stop following it and its copies.  True if it did. */
bool ctxshim_conn_inherited_give_up(int fd, const struct ctxshim_conn *c);

/* fd carries TLS (its first byte was a handshake record, or a TLS library
 * was given it): from now on the socket level passes its ciphertext
 * through, and the TLS hooks feed its plaintext to a fresh scanner
 * (hooks/hook-socket.c, "TLS").  Returns the slot, or NULL when fd is not
 * a tracked server connection.  Idempotent.  Its session is not known
 * (the socket level saw a handshake record). */
struct ctxshim_conn *ctxshim_conn_tls(int fd);

/* ctxshim_conn_tls(fd) by a TLS hook for session key (SSL *,
 * gnutls_session_t; not NULL): key is fd's session from now on, also when
 * fd carried TLS already (SSL_set_fd of a second session).  Not a read
 * path: called when the fd becomes TLS, once per connection. */
struct ctxshim_conn *ctxshim_conn_tls_session(int fd, const void *key);

/* Session key, which names fd (a TLS one), ends: does that end the
 * connection on fd?  True when key is its session (fd then has no known
 * session any more: one that takes it over without SSL_set_fd() is not
 * known either) or its session is not known; false when fd has been given
 * to another session since key was (key's fd was closed and its number
 * reused, and key is freed after that: conn.c, "Sessions").  Not a read
 * path. */
bool ctxshim_conn_tls_end(int fd, const void *key);

/* Connections without an fd: TLS sessions over a custom transport (an
 * OpenSSL BIO of the application's own, memory BIOs, a BIO pair).  A
 * fixed table of CTXSHIM_CONN_VIRT_N slots in .bss, hashed by the session
 * pointer, for up to half as many sessions at once (conn.c, "connections
 * without an fd"; ctxshim(7), LIMITS); ids start at
 * CTXSHIM_CONN_VIRT_BASE, which no kernel fd reaches (fs.nr_open is below
 * 2^30), so they never meet the fd table, and a session keeps its id
 * until it is forgotten.  Entries are claimed with one atomic operation
 * (no allocation, no lock); when all the slots a session's pointer may
 * take are in use, that session is not tracked.  A power of two. */
#define CTXSHIM_CONN_VIRT_N    8192
#define CTXSHIM_CONN_VIRT_BASE (1 << 30)

/* The slot of key (created when create and there is room); its id in *id.
 * NULL if key has none. */
struct ctxshim_conn *ctxshim_conn_virt(const void *key, bool create, int *id);
/* key's session ended: release its slot. */
void ctxshim_conn_virt_forget(const void *key);

/* The slot of connection id as the socket level numbers them (a
 * context's sock_fdp1 - 1): an fd's (ctxshim_conn_get()) or, from
 * CTXSHIM_CONN_VIRT_BASE on, a connection's without an fd.  NULL if it
 * has none.  Neither kind of slot ever goes away. */
struct ctxshim_conn *ctxshim_conn_by_id(int id);

/* Feed the bytes a read returned (by the thread that read them; never
 * re-entered on one thread: the hooks' busy flag keeps a signal handler
 * that interrupted a feed out).  Returns CONN_FEED_NONE, or
 * CONN_FEED_NEW if a new request became current (its context, if any, is
 * then in c->ctx), or CONN_FEED_FULL if moreover *full is set: the
 * calling thread's publication buffer, from ctxshim_build_begin(), holds
 * that context whole (even when c->ctx had to leave parts of it out).
 * The caller then must ctxshim_build_publish(*full)
 * or ctxshim_build_cancel().  Set *full = NULL before the first feed. */
enum { CONN_FEED_NONE = 0, CONN_FEED_NEW = 1, CONN_FEED_FULL = 2 };
int ctxshim_conn_feed(struct ctxshim_conn *c,
		      const void *buf,
		      size_t len,
		      struct ctxshim_ctx **full);

/* The scanner cannot follow the stream any more (MSG_TRUNC discarded
 * bytes): stop scanning c. */
void ctxshim_conn_lost(struct ctxshim_conn *c);

/* What ctxshim_conn_fcgi_start() and ctxshim_conn_h2_start() return. */
enum {
	CONN_START_NO = 0, /* not followed so, nothing changed */
	CONN_START_OK,     /* followed from now on */
	/* Not followed, nothing changed: the pool's entries that
	 * connections may hold for their life are all taken (conn.c,
	 * CONN_POOL_LONG_FIRST, "Zones"; event reason "pool-full"). */
	CONN_START_POOL_FULL,
};

/* FastCGI (conn.c, "FastCGI").  c's HTTP scanner gave up on its first
 * bytes, which look like a FastCGI record: follow c as FastCGI from now on
 * (a pool entry holds its records' scanner until c ends).  CONN_START_NO
 * when c holds an entry, CONN_START_POOL_FULL when none is free. */
int ctxshim_conn_fcgi_start(struct ctxshim_conn *c);

/* Is c followed as FastCGI (ctxshim_conn_fcgi_start(), and its records
 * have not put it out of step since)? */
static inline bool
ctxshim_conn_fcgi(const struct ctxshim_conn *c)
{
	/* http_scan_give_up_reason(), inline (http-scan.h: sub is the
	 * reason once dead) */
	return c->scan.phase == HTTP_SCAN_PH_DEAD &&
	       c->scan.sub == HTTP_SCAN_GIVE_UP_FASTCGI;
}

/* ctxshim_conn_feed() for a FastCGI connection: the same results (a
 * request becomes current when its parameters end). */
int ctxshim_conn_fcgi_feed(struct ctxshim_conn *c,
			   const void *buf,
			   size_t len,
			   struct ctxshim_ctx **full);

/* HTTP/2 (conn.c, "HTTP/2").  c's HTTP scanner gave up on the client's
 * connection preface (reason "http2") at its first request: follow c's
 * frames from now on (a pool entry holds their scanner until c ends).
 * preface_seen: bytes of the preface read before the bytes fed next.
 * CONN_START_NO when c holds an entry or the process made an nghttp2
 * server session, CONN_START_POOL_FULL when no entry is free. */
int ctxshim_conn_h2_start(struct ctxshim_conn *c, unsigned preface_seen);

/* Is c followed as HTTP/2 (ctxshim_conn_h2_start(), and not stopped
 * since)? */
static inline bool
ctxshim_conn_h2(const struct ctxshim_conn *c)
{
	return c->scan.phase == HTTP_SCAN_PH_DEAD &&
	       c->scan.sub == HTTP_SCAN_GIVE_UP_HTTP2 && c->cap != 0;
}

/* Is c followed as FastCGI or HTTP/2: a scanner of its own in c->cap
 * takes the bytes the HTTP scanner gave up on? */
static inline bool
ctxshim_conn_framed(const struct ctxshim_conn *c)
{
	return c->scan.phase == HTTP_SCAN_PH_DEAD &&
	       (c->scan.sub == HTTP_SCAN_GIVE_UP_FASTCGI ||
		(c->scan.sub == HTTP_SCAN_GIVE_UP_HTTP2 && c->cap != 0));
}

/* More results of the feeds of an HTTP/2 connection: the read ended the
 * header blocks of two or more new requests (or one, while the thread
 * still showed the connection's previous request, unanswered): c's
 * current request has no context; c is followed no more (its scanner gave
 * up, or an nghttp2 server session exists), nor has its current request a
 * context. */
enum { CONN_FEED_SEVERAL = 3, CONN_FEED_H2_STOP = 4 };

/* ctxshim_conn_feed() for an HTTP/2 connection: the same results, and
 * those above.  *n_new: new requests of this read so far (0 before its
 * first buffer, 1 when the thread shows the connection's previous request
 * unanswered), updated. */
int ctxshim_conn_h2_feed(struct ctxshim_conn *c,
			 const void *buf,
			 size_t len,
			 struct ctxshim_ctx **full,
			 unsigned *n_new);

/* The process made an nghttp2 server session (hooks/hook-nghttp2.c): no
 * connection is followed as HTTP/2 here from now on (conn.c, "HTTP/2"),
 * c (if not NULL) stopped now, its current request left without a
 * context.  Returns the stream id of c's current request (0: none, or c
 * not followed as HTTP/2). */
uint32_t ctxshim_conn_h2_library(struct ctxshim_conn *c);

/* Was c, followed as HTTP/2, upgraded from HTTP/1.1
 * (ctxshim_conn_h2_upgrade())? */
bool ctxshim_conn_h2_upgraded(const struct ctxshim_conn *c);

/* Is fd of generation gen, or another descriptor of its connection (a
 * copy linked to it), an upgrade candidate
 * (ctxshim_conn_h2_candidate_add())? */
bool ctxshim_conn_h2_candidate(int fd, uint32_t gen);

/* A write of written bytes on c starts with "HTTP/1.x 101" (head, head_len
 * of its first bytes; iov, iovcnt: all of them, or NULL): if its head
 * names "Upgrade: h2c" and c may be followed so, c is followed as HTTP/2
 * from its next byte on (conn.c, "Upgrade: h2c"), its current request
 * stream 1 (not answered by the 101), and the frames after the 101 in
 * this write are walked.  CONN_START_OK then; CONN_START_NO or
 * CONN_START_POOL_FULL: nothing changed, the write is an HTTP/1 one. */
int ctxshim_conn_h2_upgrade(struct ctxshim_conn *c,
			    const void *head,
			    size_t head_len,
			    size_t written,
			    const struct iovec *iov,
			    size_t iovcnt);

/* 0: not a status line (or unknown), 1: interim (1xx but not 101), 2: a
 * final status line "HTTP/1.x NNN". */
static inline int
ctxshim_conn_status_kind(const void *head, size_t len)
{
	static const char pfx[] = "HTTP/1.";
	const uint8_t *h = head;
	size_t m = len < 7 ? len : 7;

	if (!h || len == 0)
		return 0;
	if (len >= 7) {
		/* Two overlapping 4-byte loads instead of a libc memcmp() call
		 * (~18 instructions on every response write). */
		uint32_t a, b, pa, pb;

		memcpy(&a, h, 4);
		memcpy(&b, h + 3, 4);
		memcpy(&pa, pfx, 4);
		memcpy(&pb, pfx + 3, 4);
		if (a != pa || b != pb)
			return 0;
	} else if (memcmp(h, pfx, m) != 0) {
		return 0;
	}
	if (len >= 12 && h[8] == ' ' && h[9] == '1' && !(h[10] == '0' && h[11] == '1'))
		return 1;
	return 2;
}

/* ctxshim_conn_status_kind(head, len) == 1, the usual answer first: a
 * response's status code starts with a digit other than '1' at h[9], so
 * one byte decides "not interim" (a full check on every response write
 * was ~12 instructions, B1i). */
static inline bool
ctxshim_conn_interim(const void *head, size_t len)
{
	if (len < 12 || ((const uint8_t *)head)[9] != '1')
		return false;
	return ctxshim_conn_status_kind(head, len) == 1;
}

/* ctxshim_conn_interim(), or a 101 (Switching Protocols): the status
 * lines the write hooks take off their usual path (one byte decides for
 * any other response, as there). */
static inline bool
ctxshim_conn_informational(const void *head, size_t len)
{
	if (len < 12 || ((const uint8_t *)head)[9] != '1')
		return false;
	return ctxshim_conn_status_kind(head, len) != 0;
}

/* ctxshim_conn_responded() past its usual case (conn.c). */
bool ctxshim_conn_responded_slow(struct ctxshim_conn *c,
				 const void *head,
				 size_t head_len,
				 size_t written);

/* ctxshim_conn_responded_slow() of a write of iovecs (iov, iovcnt; NULL:
 * the bytes are head's): an HTTP/2 connection's write is walked frame
 * by frame (conn.c, "HTTP/2 answers"), all of its bytes. */
bool ctxshim_conn_responded_iov(struct ctxshim_conn *c,
				const void *head,
				size_t head_len,
				size_t written,
				const struct iovec *iov,
				size_t iovcnt);

/* The write hooks' direct path for a write of iovecs on a connection
 * followed as HTTP/2 (ctxshim_conn_h2(), not a copy): its frames walked
 * (conn.c, "HTTP/2 answers"), as ctxshim_conn_responded_iov() walks them
 * past ctxshim_conn_responded_usual().  false: c is not (any more) such
 * a connection, nothing was done. */
bool ctxshim_conn_h2_written(struct ctxshim_conn *c,
			     const struct iovec *iov,
			     size_t iovcnt,
			     size_t written);

_Static_assert(offsetof(struct ctxshim_conn, flags) ==
			       offsetof(struct ctxshim_conn, pending) + 2 &&
		       offsetof(struct ctxshim_conn, answered) ==
			       offsetof(struct ctxshim_conn, flags) + 1,
	       "pending, flags and answered are one 32-bit word");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "little-endian word");
/* In that word: pending, and the flags that take the slow path ... */
#define CTXSHIM_CONN_W_MASK                                                   \
	(0xffffu | (uint32_t)(CONN_F_REQ | CONN_F_CLAIMED | CONN_F_PROMOTED | \
			      CONN_F_OVERFLOW | CONN_F_LINK)                  \
			   << 16)
/* ... the usual response: a request current, none of those, no queue. */
#define CTXSHIM_CONN_W_USUAL ((uint32_t)CONN_F_REQ << 16)

/* The usual cases of ctxshim_conn_responded(), inline: true if it decided
 * (and did what it does then: at most mark the request answered; it never
 * makes a pipelined request current), false if the caller must call
 * ctxshim_conn_responded_slow(). */
static inline __attribute__((always_inline)) bool
ctxshim_conn_responded_usual(struct ctxshim_conn *c, const void *head, size_t head_len)
{
	uint8_t tag =
		(uint8_t)(atomic_load_explicit(&c->seq, memory_order_relaxed) >> 1);
	uint32_t w;
	uint8_t f;

	/* pending, flags and answered in one load (x86: a plain move, as the
	 * relaxed loads of each are), little-endian: bits 0-15 pending, 16-23
	 * flags, 24-31 answered.  The usual case -- a request current, not
	 * claimed, promoted, overflowed or a copy, nothing queued -- is one
	 * mask and compare instead of a test per field (B1i). */
	memcpy(&w, (const unsigned char *)c + offsetof(struct ctxshim_conn, pending),
	       sizeof(w));
	if ((w & CTXSHIM_CONN_W_MASK) == CTXSHIM_CONN_W_USUAL) {
		/* Single writer of answered: a plain store (see conn.c). */
		if ((uint8_t)(w >> 24) != tag &&
		    !ctxshim_conn_interim(head, head_len)) {
			/* The answer to a CONNECT: the slow path looks at it
			 * (conn.c, "Tunnels"); the write hooks' fast paths
			 * pass no head. */
			if (__builtin_expect(
				    http_scan_flags(&c->scan) & HTTP_SCAN_F_CONNECT, 0))
				return false;
			atomic_store_explicit(&c->answered, tag, memory_order_relaxed);
		}
		return true;
	}
	f = (uint8_t)(w >> 16);
	/* A connection followed as HTTP/2 (CONN_F_OVERFLOW without a queue:
	 * conn.c, "HTTP/2 answers") has every write walked, answered or not:
	 * off the usual case, so an HTTP/1 write pays nothing for it. */
	if (f & CONN_F_OVERFLOW)
		return false;
	return !(f & CONN_F_REQ) || (uint8_t)(w >> 24) == tag;
}

/* A write of written > 0 bytes happened on c; head is its first bytes
 * (head_len of them, NULL if unknown, e.g. sendfile).  Marks the current
 * request answered; when a pipelined request was waiting, makes it
 * current -- once the current request's response is written whole, when
 * its length is known (conn.c, "Response length") -- and returns true.  On a
 * claimed connection it only marks the request answered (so that
 * ctxshim_conn_request_ctx() stops returning it).  On a CONN_F_LINK copy
 * it does nothing but return true: the caller answers the leader's
 * request (it knows the fd).  Inline for the usual
 * write: a later write of an answered request, or the first one of a
 * keep-alive request with nothing queued behind it (once per request,
 * B1i); anything else is ctxshim_conn_responded_slow(), which decides
 * the same way from the start. */
static inline __attribute__((always_inline)) bool
ctxshim_conn_responded(struct ctxshim_conn *c,
		       const void *head,
		       size_t head_len,
		       size_t written)
{
	if (ctxshim_conn_responded_usual(c, head, head_len))
		return false;
	return ctxshim_conn_responded_slow(c, head, head_len, written);
}

/* Has a response been written for c's current request (see answered)? */
static inline bool
ctxshim_conn_answered(const struct ctxshim_conn *c)
{
	return atomic_load_explicit(&c->answered, memory_order_relaxed) ==
	       (uint8_t)(atomic_load_explicit(&c->seq, memory_order_relaxed) >> 1);
}

/* Is c idle: its current request answered, or none (a fresh connection,
 * or one whose request was never seen)?  Then a new head read on it
 * becomes its current request at once, not queued behind it. */
static inline bool
ctxshim_conn_idle(const struct ctxshim_conn *c)
{
	return !(atomic_load_explicit(&c->flags, memory_order_relaxed) & CONN_F_REQ) ||
	       ctxshim_conn_answered(c);
}

/* Is c a keep-alive connection waiting for its next request: tracked, its
 * current request (with a context) answered, and nothing else set --
 * neither claimed, TLS, a copy, promoted nor overflowed?  Then it is idle,
 * and a new head leaves its flags as they are. */
static inline bool
ctxshim_conn_kept_alive(const struct ctxshim_conn *c)
{
	return atomic_load_explicit(&c->flags, memory_order_relaxed) ==
		       (CONN_F_TRACKED | CONN_F_REQ | CONN_F_HAS_CTX) &&
	       ctxshim_conn_answered(c);
}

/* Does c's current request have a context the thread should publish? */
static inline bool
ctxshim_conn_live(const struct ctxshim_conn *c)
{
	uint8_t f = atomic_load_explicit(&c->flags, memory_order_relaxed);

	return (f & (CONN_F_REQ | CONN_F_HAS_CTX)) == (CONN_F_REQ | CONN_F_HAS_CTX) &&
	       !ctxshim_conn_answered(c);
}

/* Expand c's compact context into out.  Returns false if it changed under
 * us (a concurrent rewrite by another thread) or has none. */
bool ctxshim_conn_expand(const struct ctxshim_conn *c, struct ctxshim_ctx *out);
