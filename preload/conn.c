/* SPDX-License-Identifier: Apache-2.0 */
/* The per-connection table of the socket level (see conn.h).
 *
 * Where captured header values live while a head is in progress
 * (struct http_scan_capture, about 3 KiB) is the main memory decision.
 * Two places were possible:
 *
 *  - a capture in every thread's TLS: no shared state, and a head read
 *    whole would need no atomic operation at all, but every thread of
 *    every process under the shim would carry 3 KiB more of static TLS,
 *    which glibc zero-fills at each thread start: measured, 1000 sleeping
 *    threads under the shim went from +0.9 MiB to +5 MiB of RSS, a cost
 *    thread-per-connection servers would pay for two lock-prefixed
 *    operations per request (about 40 cycles of nginx's ~8 us);
 *  - a process-wide pool (chosen): CONN_POOL_N entries in .bss, claimed
 *    with one atomic bit operation for the duration of a read's scan and
 *    kept by the connection only while its head is split across reads.
 *    Thread-per-connection servers reading one byte at a time and event
 *    loops interleaving heads both work the same way.  When every entry
 *    HTTP/1 may take is in use (more than 896 heads in progress at once,
 *    e.g. slow clients, or 256 while long-lived connections hold the
 *    rest: "Zones" below), a head is still framed but not captured: that
 *    request gets no context, later ones are unaffected (a pipelined head
 *    that finds no entry is another matter: see "Bound" below).
 *
 * The usual read takes no pool entry at all: one that holds exactly one
 * whole head (nothing before or after it) is scanned in place and built
 * straight into the thread's publication buffer
 * (ctxshim_conn_feed_whole(), conn-whole.h), so it gets its context even
 * with the pool exhausted.  The pool serves heads split across reads,
 * several heads in one read, and the pipelined queue.
 *
 * The same pool holds the contexts of pipelined requests whose heads were
 * read before the current one was answered (a FIFO per connection), at
 * most CONN_QUEUE_MAX of them per connection (see "Pipelining FIFO"), so
 * that one connection cannot take the pool from the others.
 *
 * Zones.  Two kinds of holders keep entries past a read: a FastCGI or
 * HTTP/2 connection followed at the socket level holds one for its whole
 * life (its scanner: "FastCGI", "HTTP/2" below), idle or not, and an
 * HTTP/1 head split across reads holds one until it completes, which a
 * slow client (a slowloris flood) stretches to the server's header
 * timeout.  Sharing the pool, either kind took it from the other: 256
 * idle HTTP/2 browser connections (nginx's worker_connections is 768 by
 * default) or php-fpm connections left nothing for split heads and
 * pipelined requests, and a flood of split heads left nothing for a new
 * FastCGI or HTTP/2 connection (then not followed for its life) nor for
 * the header blocks of those followed already (their requests got no
 * context meanwhile).  So each use claims, lowest first, only in a range
 * of whole bitmap words:
 *
 *  - HTTP/1 (a head split across reads, the pipelined queue, a read's
 *    scan of several heads, a dup2() copy's head: conn_pool_claim()):
 *    [0, CONN_POOL_H1_END), 896 entries;
 *  - a FastCGI or HTTP/2 connection's scanner (conn_pool_claim_long()):
 *    [CONN_POOL_LONG_FIRST, CONN_POOL_LONG_END), 704 entries: the next
 *    such connection is not followed at all (event reason "pool-full"),
 *    later ones are when entries are free again;
 *  - an HTTP/2 header block's request, the one transient use that is not
 *    HTTP/1 (conn_pool_claim_block()): [CONN_POOL_LONG_FIRST,
 *    CONN_POOL_N), 768 entries: a flood of HTTP/2 connections whose
 *    blocks arrive split across reads (slow headers: each holds its
 *    scanner's entry and its block's) used to take HTTP/1's first 256
 *    too, as nothing else could.
 *
 * So neither long-lived connections nor header blocks ever take the
 * first 256 entries, split heads never take [896, 960) (up to 64
 * connections still start during a flood), and header blocks have the
 * top 64 to themselves.  The cost: .bss pages are touched only when an
 * entry is used (about 4 KiB per long-lived connection), the HTTP/1
 * keep-alive cycle touches none, and the usual claim is still one
 * compare-and-swap on the first bitmap word (conn_pool_claim()).
 *
 * Concurrency (who writes which field: conn.h, struct ctxshim_conn).  A
 * slot is written by the thread doing that connection's I/O: the reading
 * thread for scan, cap, the FIFO's tail and a new current request; the
 * writing thread for answered, the FIFO's head (see "Pipelining FIFO"),
 * and for the current request only when it moves on to a queued
 * pipelined one.  The keep-alive request/response cycle uses no
 * lock-prefixed instruction when its head comes in one read (else the
 * pool entry's two, each ~20 cycles, and two more on c->cap for a head
 * split across reads: "Two readers" below; the shim's whole budget per
 * nginx request is ~1 % of 8 us): seq and answered are plain stores by
 * their single writer, and flags are left alone when they do not change.  What else uses atomic
 * read-modify-writes, off that cycle: flags changes (a library hook may
 * claim from any thread), gen (fd life cycle).  The compact context is
 * guarded by seq, a seqlock, so a reader on another thread never uses a
 * torn copy.  Nothing here locks, allocates on a read path, or logs
 * outside the constructor: it all runs inside read()/write() hooks,
 * possibly in signal handlers.
 *
 * Pipelining FIFO.  The contexts of queued pipelined requests are pool
 * entries linked through next, from c->pending (head) to c->tail.  The
 * reading thread appends, the writing thread pops, and with a server that
 * reads and writes one connection on two threads these run at the same
 * time.  The earlier list (append = walk from pending to the last entry,
 * pop = pending = e->next, release e) lost links then: the reader could
 * append to the entry the writer was releasing, so entries leaked for good
 * (about 25 per 20 000 racing requests, until the pool was empty) and a
 * request could get another's context.  Now it is a single-producer /
 * single-consumer queue in which each index has one writer at a time:
 *
 *  - tail: the reader's (the writer never reads it), so an append does
 *    not walk the list and never looks at pending.  An application may
 *    read one connection from two threads at once ("Two readers"): then
 *    two appends raced on it (both linking after the same tail, or both
 *    starting a queue), and entries were lost for good, the whole pool in
 *    2000 connections of 16 unanswered heads (test-preload-pipeline.c,
 *    h1-queue).  So the reader that appends holds a producer token, bit
 *    15 of tail (CONN_TAIL_BUSY), set with a compare-and-swap from the
 *    tail it read (conn_fifo_own()) and cleared by the store of the new
 *    tail that ends the append; freeing a stub empties tail with a
 *    compare-and-swap too (conn_fifo_reclaim()).  A reader that finds the
 *    token taken never waits for it (its holder may be preempted, or
 *    interrupted by a signal): its head is one that cannot be queued
 *    ("Bound").  One compare-and-swap more per queued head, none on the
 *    keep-alive cycle.  A close, a move or a reset takes tail with an
 *    exchange, token and all, so it never outlives the fd's connection;
 *    a fork while another thread holds it leaves it taken in the child
 *    until then (that connection's pipelined heads get no context there).
 *  - e->next of the tail entry: 0 while it is last; the reader links a
 *    new entry with a compare-and-swap 0 -> new, the writer closes a
 *    last entry it pops with a compare-and-swap 0 -> CONN_NEXT_CLOSED.
 *    Exactly one of the two succeeds; that decides who goes on.
 *  - pending: the writer's while non-zero.  A pop that finds a successor
 *    stores it and releases the popped entry (safe: it is not the tail any
 *    more, as the reader linked past it).  A pop of the last entry stores
 *    0 first and then closes the entry (each store is the compare-and-swap
 *    that claims the entry: "Copies"): the queue is empty and pending
 *    belongs to the reader, which starts the next queue by storing it.
 *    The closed entry is not released by the writer, because the reader
 *    still names it as tail and would link into whatever reused it (the
 *    ABA that leaked before): it is a stub the reader frees, when it
 *    sees it closed, at its next append or its next new current request
 *    (or conn_release_all() when the fd goes).  So a connection whose
 *    last requests were pipelined holds one entry while idle: at most
 *    one per connection, like a split head in progress.
 *
 * Release/acquire on the links and on pending carry the entry's contents
 * (written by the reader before linking) to the writer, and the writer's
 * pending = 0 (before its closing compare-and-swap) to the reader (after
 * it sees the entry closed), so two stores to pending never race.  No
 * lock, no allocation, bounded work; the compare-and-swaps run only when
 * requests are actually queued: the keep-alive cycle without pipelining
 * touches none of this but one plain load of tail (0) and of pending (0).
 *
 * Bound.  A connection queues at most CONN_QUEUE_MAX requests: a client
 * pipelining without reading responses (a benchmark, a hostile client), or
 * a server reading far ahead, would otherwise take every pool entry, and
 * every other connection of the process would lose its contexts.  The
 * length is qpush - qpop (mod 256): qpush is counted by the reader when it
 * appends, qpop by the writer when it pops, so each counter keeps one
 * writer and the bound costs no atomic read-modify-write; a stale qpop only
 * makes the queue look longer than it is.  16 is the depth pipelining
 * benchmarks use (wrk's pipeline script, TechEmpower), and HTTP clients
 * that pipeline at all keep far fewer requests in flight; 16 full queues
 * still leave the pool to the rest of the process.
 *
 * A pipelined head that cannot be queued (the bound, an empty pool, or
 * the producer token held by another thread reading the connection)
 * stops the scanner on that connection for good (until the fd is closed
 * or reused), as when it loses the stream (MSG_TRUNC).  Dropping just that
 * head is not an option: responses are matched to queued requests by
 * order, so the response before a dropped request would promote the
 * context of the request after it, published while the server works on
 * the dropped one, and so on for every later request.  Stopping keeps the
 * queue a gap-free run of the requests right after the current one, so
 * those are still promoted in order with the right contexts; the request
 * that did not fit and all later ones on the connection get none: once the
 * queue is empty, each response that starts (a status line) makes a
 * request without a context current (CONN_F_OVERFLOW), so that the thread
 * working on the next one does not keep publishing the last queued one.
 * Resuming once the connection is idle would need to know that every
 * dropped request was answered, i.e. to count responses, which the writes
 * do not mark reliably (sendfile, a status line split across writes).
 *
 * A race that remains, documented rather than closed: the writer notes a
 * response after the real write() returned, so a reader on another thread
 * may read the client's next request first and queue it as if pipelined
 * (it is then made current by that response's note, on the writing
 * thread, and the reading thread publishes it late), and a writer that
 * found the queue empty may mark the request answered just after the
 * reader queued one behind it (that one then waits for the next
 * response).  Closing either needs a store-load fence on the keep-alive
 * path (~20 cycles a request, conn.h); the effect is a context published
 * late or on one request the wrong thread, never a leak or a mix of two
 * contexts. */
#include "config.h"

#include "conn.h"

#include "cfg.h"
#include "conn-whole.h"
#include "events.h"
#include "fcgi-scan.h"
#include "h2-scan.h"
#include "hook-h2.h"
#include "log.h"
#include "request-ctx.h"
#include "shim.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* 1024 entries of 3.5 KiB: 3.5 MiB of .bss, whose pages are touched
 * only as entries are used (lowest first: the HTTP/1 keep-alive cycle
 * touches none, B8). */
#define CONN_POOL_N 1024
/* The ranges of entries each use claims in ("Zones" above): HTTP/1 below
 * CONN_POOL_H1_END, a connection's scanner from CONN_POOL_LONG_FIRST to
 * CONN_POOL_LONG_END, an HTTP/2 header block from CONN_POOL_LONG_FIRST to
 * CONN_POOL_N. */
#define CONN_POOL_H1_END     896
#define CONN_POOL_LONG_FIRST 256
#define CONN_POOL_LONG_END   960
_Static_assert(CONN_POOL_H1_END % 64 == 0 && CONN_POOL_LONG_FIRST % 64 == 0 &&
		       CONN_POOL_LONG_END % 64 == 0,
	       "the zones are whole bitmap words");
_Static_assert(64 <= CONN_POOL_LONG_FIRST && CONN_POOL_LONG_FIRST < CONN_POOL_H1_END,
	       "HTTP/1 has words of its own, the inline claim's first among them");
_Static_assert(CONN_POOL_H1_END < CONN_POOL_LONG_END &&
		       CONN_POOL_LONG_END < CONN_POOL_N,
	       "long-lived connections and header blocks have words of their own");
/* Pipelined requests one connection may queue ("Bound" above).  Below 128,
 * so that qpush - qpop (8 bits) never wraps. */
#define CONN_QUEUE_MAX 16
_Static_assert(CONN_QUEUE_MAX < 128, "the queue length fits qpush - qpop");
#define CONN_POOL_WORDS (CONN_POOL_N / 64)

/* An HTTP/2 connection's entry: the client's frames (the reading
 * thread's) and the server's (the writing thread's: "HTTP/2" below). */
struct conn_h2 {
	struct h2_scan scan;
	struct h2_out out;
};

struct conn_pool_entry {
	union {
		struct http_scan_capture cap; /* a head being scanned */
		struct ctxshim_conn_ctx ctx;  /* a pipelined request's context */
		/* A FastCGI connection's records (c->cap, for the
		 * connection's life: "FastCGI" below). */
		struct fcgi_scan fcgi;
		/* An HTTP/2 connection's frames (c->cap, for the connection's
		 * life), and the request whose header block is arriving
		 * ("HTTP/2" below). */
		struct conn_h2 h2;
		struct hook_h2_req h2req;
	} u;
	_Atomic uint16_t next; /* next pipelined entry + 1, or CONN_NEXT_CLOSED */
	bool has_ctx;
	/* In the entry of an HTTP/2 connection's scanner: the block in
	 * progress lost its request (no entry was free), and the entry + 1
	 * that holds its request (0: none).  In the padding before hold,
	 * which holds there the stream id of the connection's current
	 * request ("HTTP/2" below; the entry is never queued). */
	bool h2_lost;
	uint16_t h2_req;
	/* In the entry of an HTTP/2 scanner: the connection was upgraded
	 * from HTTP/1.1 ("Upgrade: h2c" below). */
	bool h2_up;
	/* Bytes of the current request's response still to be written before
	 * this request (the first queued) becomes current; 0: none known.
	 * Zeroed by the reader before it queues the entry, then the writing
	 * thread's ("Response length" at ctxshim_conn_responded_slow()). */
	size_t hold;
};

/* e->next of an entry the writer popped as the last one: no successor will
 * ever be linked; the reader frees it (see "Pipelining FIFO"). */
#define CONN_NEXT_CLOSED 0xffffu
_Static_assert(CONN_POOL_N < CONN_NEXT_CLOSED, "pool indexes + 1 fit below CLOSED");
/* In c->tail: the FIFO's producer token, held by the reader appending
 * ("Pipelining FIFO"); the tail's index + 1 is in the bits below. */
#define CONN_TAIL_BUSY 0x8000u
_Static_assert(CONN_POOL_N < CONN_TAIL_BUSY, "pool indexes + 1 fit below the token");

struct ctxshim_conn_table ctxshim_conn_tab;

static struct conn_pool_entry conn_pool[CONN_POOL_N];
static _Atomic uint64_t conn_pool_used[CONN_POOL_WORDS];

struct http_scan_config ctxshim_conn_scan_cfg;
/* Scanner extra-header index of each CTXSHIM_HEADER_ATTRS entry (-1: the
 * scanner could not take it). */
int ctxshim_conn_extra_index[CTXSHIM_MAX_HEADER_ATTRS];

_Static_assert(sizeof(struct fcgi_scan) <= sizeof(struct http_scan_capture),
	       "a FastCGI connection's state does not grow the pool");
_Static_assert(sizeof(struct conn_h2) <= sizeof(struct http_scan_capture) &&
		       sizeof(struct hook_h2_req) <= sizeof(struct http_scan_capture),
	       "an HTTP/2 connection's state does not grow the pool");

/* The CGI meta-variables ctxshim_request_ctx_cgi() looks up, kept from a
 * FastCGI request's parameters ("FastCGI" below). */
static struct fcgi_scan_config conn_fcgi_cfg;

/* The header fields an HTTP/2 request's context is built from ("HTTP/2"
 * below): the scanner's configuration, CTXSHIM_HEADER_ATTRS in lower
 * case, and what each configured name k makes of its fields
 * (hooks/hook-h2.h; worked out once: not a compare of names per field). */
static struct h2_scan_config conn_h2_cfg;
static char conn_h2_names[CTXSHIM_MAX_HEADER_ATTRS][CTXSHIM_HEADER_NAME_MAX];
static struct hook_h2_kind conn_h2_kind[H2_SCAN_KEEP_MAX];
static int conn_h2_k_tracestate = -1, conn_h2_k_traceparent = -1;
/* The process made an nghttp2 server session (ctxshim_conn_h2_library()). */
static _Atomic bool conn_h2_lib;

static void conn_h2_release(unsigned cap) __attribute__((noinline, cold));
static void conn_cap_free(unsigned cap);

/* ---- pool ---- */

/* Lowest free entry + 1 in bitmap words [w, end), or 0.  Lowest-first
 * keeps the touched pages of the pool (its RSS) to what concurrency
 * needs. */
static unsigned
conn_pool_claim_from(unsigned w, unsigned end)
{
	for (; w < end; w++) {
		uint64_t old =
			atomic_load_explicit(&conn_pool_used[w], memory_order_relaxed);

		while (~old) {
			unsigned bit = (unsigned)__builtin_ctzll(~old);

			if (atomic_compare_exchange_weak_explicit(
				    &conn_pool_used[w], &old, old | (1ull << bit),
				    memory_order_acquire, memory_order_relaxed))
				return w * 64 + bit + 1;
		}
	}
	return 0;
}

/* An entry for an HTTP/2 header block's request: in its zone, the top
 * word being its alone, HTTP/1's first words out of it ("Zones"). */
static __attribute__((noinline)) unsigned
conn_pool_claim_block(void)
{
	return conn_pool_claim_from(CONN_POOL_LONG_FIRST / 64, CONN_POOL_WORDS);
}

/* conn_pool_claim() past its inline try: the rest of HTTP/1's zone. */
static __attribute__((noinline)) unsigned
conn_pool_claim_h1(void)
{
	return conn_pool_claim_from(0, CONN_POOL_H1_END / 64);
}

/* An entry held for a connection's life (FastCGI, HTTP/2): in its zone,
 * so at most CONN_POOL_LONG_END - CONN_POOL_LONG_FIRST such connections
 * are followed at once.  Off the hot path (a connection's first read). */
static __attribute__((noinline, cold)) unsigned
conn_pool_claim_long(void)
{
	return conn_pool_claim_from(CONN_POOL_LONG_FIRST / 64, CONN_POOL_LONG_END / 64);
}

/* An entry for HTTP/1, in its zone: its usual first try inline, the
 * lowest word, one compare-and-swap (the call was a third of it, B4). */
static inline unsigned
conn_pool_claim(void)
{
	uint64_t old = atomic_load_explicit(&conn_pool_used[0], memory_order_relaxed);

	if (__builtin_expect(~old != 0, 1)) {
		unsigned bit = (unsigned)__builtin_ctzll(~old);

		if (atomic_compare_exchange_strong_explicit(
			    &conn_pool_used[0], &old, old | (1ull << bit),
			    memory_order_acquire, memory_order_relaxed))
			return bit + 1;
	}
	return conn_pool_claim_h1();
}

static void
conn_pool_release(unsigned idx)
{
	if (idx == 0 || idx > CONN_POOL_N)
		return;
	idx--;
	atomic_fetch_and_explicit(&conn_pool_used[idx / 64], ~(1ull << (idx % 64)),
				  memory_order_release);
}

/* Is tail (an index + 1 or 0) a stub: popped and closed by the writer,
 * still named by the reader, and so the reader's to free? */
static inline bool
conn_fifo_stub(unsigned t)
{
	return t && t <= CONN_POOL_N &&
	       atomic_load_explicit(&conn_pool[t - 1].next, memory_order_acquire) ==
		       CONN_NEXT_CLOSED;
}

/* The reader, making a new request current: free a stub left by the
 * writer's last pop, so that an idle keep-alive connection that once
 * pipelined holds no pool entry.  The tail is emptied with a
 * compare-and-swap, so that of two threads reading the connection at once
 * one frees the stub, and none while the other appends (its token is in
 * the tail then: conn_fifo_own()). */
static inline void
conn_fifo_reclaim(struct ctxshim_conn *c)
{
	uint16_t t = atomic_load_explicit(&c->tail, memory_order_relaxed);

	if (__builtin_expect(t != 0, 0) && conn_fifo_stub(t) &&
	    atomic_compare_exchange_strong_explicit(
		    &c->tail, &t, 0, memory_order_relaxed, memory_order_relaxed))
		conn_pool_release(t);
}

/* Take c's pending (or tail) word: its value, the word left 0.  An
 * exchange, so that of a pop claiming the head (a compare-and-swap) and
 * a move or release taking the queue exactly one gets it ("Copies");
 * only when there is something to take, so that a connection that never
 * pipelined pays no lock-prefixed instruction on accept or close. */
static inline unsigned
conn_fifo_take(_Atomic uint16_t *w)
{
	if (!atomic_load_explicit(w, memory_order_seq_cst))
		return 0;
	return atomic_exchange_explicit(w, 0, memory_order_acq_rel);
}

/* Free the queued entries from idx on, taken from a pending word (so this
 * thread alone may): each entry with a successor is nobody's tail and is
 * freed; the last one is closed, as a pop of it would, so that the reader
 * whose tail it is links nothing more to it and frees it as a stub (or,
 * if own_tail is that entry, the caller's own tail, it is freed here).
 * A chain whose last entry a tail names elsewhere is thus never freed
 * under that tail: the reader would link into whatever reused it.
 * Returns true if it freed own_tail. */
static bool
conn_fifo_drain(unsigned idx, unsigned own_tail)
{
	unsigned n = 0;

	/* Bounded walk: a corrupted list (an application racing two readers
	 * on one fd) must not loop. */
	while (idx && idx <= CONN_POOL_N && n++ < CONN_POOL_N) {
		uint16_t next = 0;

		if (atomic_compare_exchange_strong_explicit(
			    &conn_pool[idx - 1].next, &next, (uint16_t)CONN_NEXT_CLOSED,
			    memory_order_acq_rel, memory_order_acquire) ||
		    next == CONN_NEXT_CLOSED) {
			if (idx != own_tail)
				return false;
			conn_pool_release(idx);
			return true;
		}
		conn_pool_release(idx);
		idx = next;
	}
	return false;
}

/* Take c's pool entry (c->cap) away from c, to free it: an exchange, so
 * that of two threads letting go of it at once (a close and a read, two
 * reads of one socket that both stop its HTTP/2 scanner) only one frees
 * it; the other's release would free it under its next owner.  Off the
 * keep-alive path (c->cap is 0 there). */
static inline unsigned
conn_cap_take(struct ctxshim_conn *c)
{
	return __atomic_exchange_n(&c->cap, 0, __ATOMIC_SEQ_CST);
}

/* c's entry idx, if it still is (a compare-and-swap): what a feed of an
 * HTTP/2 or FastCGI connection uses to let go of the entry it fed, which
 * another thread may have freed meanwhile (and then c->cap is 0, or
 * another connection's entry if the fd was reused). */
static inline bool
conn_cap_take_own(struct ctxshim_conn *c, unsigned idx)
{
	uint16_t want = (uint16_t)idx;

	return idx && __atomic_compare_exchange_n(&c->cap, &want, 0, false,
						  __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
}

/* Fd life cycle: free everything.  I/O on the connection through another
 * descriptor (a copy) may pop its queue meanwhile: pending and tail are
 * taken with exchanges, and a pop that lost its entry to this leaves it
 * alone (ctxshim_conn_responded_slow()). */
static void
conn_release_all(struct ctxshim_conn *c)
{
	/* (Without the token of a reader appending meanwhile: taking the
	 * word drops it.) */
	unsigned t = conn_fifo_take(&c->tail) & ~CONN_TAIL_BUSY;
	unsigned idx = conn_fifo_take(&c->pending);

	/* (c->cap is 0 but for a head in progress, or a connection followed
	 * as FastCGI or HTTP/2.) */
	if (__builtin_expect(c->cap != 0, 0))
		conn_cap_free(conn_cap_take(c));
	c->qpush = 0;
	atomic_store_explicit(&c->qpop, 0, memory_order_relaxed);
	/* A stub is not on the list from pending (pending is 0 then). */
	if (!conn_fifo_drain(idx, t) && conn_fifo_stub(t))
		conn_pool_release(t);
}

/* ---- table ---- */

/* A chunk is CTXSHIM_CONN_CHUNK slots followed by as many link words
 * ("Copies" below), then as many session words ("Sessions"), then as many
 * upstream words (conn.h, "Upstreams"), then as many forward words
 * ("Forwards").  The link and forward words are touched only when copies
 * are made, the session words only by TLS connections, the upstream
 * words only by proxies: a process that never copies a connection never
 * writes the first and the last, one without TLS never the second, one
 * that connects nowhere while it serves a request never the third, so
 * their pages stay unallocated (B8) -- by pairs: 256 words are 2 KiB, so
 * the link and session words share a page, the upstream and forward
 * words another. */
#define CONN_CHUNK_BYTES \
	(CTXSHIM_CONN_CHUNK * (sizeof(struct ctxshim_conn) + 4 * sizeof(uint64_t)))

/* fd's link word, or NULL if its chunk was never mapped. */
static inline _Atomic uint64_t *
conn_link_word(int fd)
{
	struct ctxshim_conn *chunk = ctxshim_conn_chunk(fd);

	if (!chunk)
		return NULL;
	return (_Atomic uint64_t *)(void *)(chunk + CTXSHIM_CONN_CHUNK) +
	       ((unsigned)fd & (CTXSHIM_CONN_CHUNK - 1));
}

/* fd's session word ("Sessions"), or NULL if its chunk was never mapped. */
static inline _Atomic uint64_t *
conn_session_word(int fd)
{
	_Atomic uint64_t *links = conn_link_word(fd);

	return links ? links + CTXSHIM_CONN_CHUNK : NULL;
}

/* fd's upstream word (conn.h, "Upstreams"), or NULL if its chunk was
 * never mapped. */
static inline _Atomic uint64_t *
conn_up_word(int fd)
{
	_Atomic uint64_t *links = conn_link_word(fd);

	return links ? links + 2 * CTXSHIM_CONN_CHUNK : NULL;
}

/* fd's forward word ("Forwards"), or NULL if its chunk was never
 * mapped. */
static inline _Atomic uint64_t *
conn_fwd_word(int fd)
{
	_Atomic uint64_t *links = conn_link_word(fd);

	return links ? links + 3 * CTXSHIM_CONN_CHUNK : NULL;
}

void
ctxshim_conn_up_store(int fd, uint64_t v)
{
	_Atomic uint64_t *w = conn_up_word(fd);

	/* Only a store that changes it (as conn_link_store()). */
	if (w && atomic_load_explicit(w, memory_order_relaxed) != v)
		atomic_store_explicit(w, v, memory_order_relaxed);
}

uint64_t
ctxshim_conn_up_load(int fd)
{
	_Atomic uint64_t *w = conn_up_word(fd);

	return w ? atomic_load_explicit(w, memory_order_relaxed) : 0;
}

/* fd's TLS session, as a word ("Sessions"). */
static inline void
conn_session_store(int fd, const void *key)
{
	_Atomic uint64_t *w = conn_session_word(fd);
	uint64_t v = (uint64_t)(uintptr_t)key;

	/* Only a store that changes it: a zero word is never written, so a
	 * process without TLS leaves these pages unallocated. */
	if (w && atomic_load_explicit(w, memory_order_relaxed) != v)
		atomic_store_explicit(w, v, memory_order_relaxed);
}

static inline uint64_t
conn_session_load(int fd)
{
	_Atomic uint64_t *w = conn_session_word(fd);

	return w ? atomic_load_explicit(w, memory_order_relaxed) : 0;
}

static inline void
conn_set_hot(int fd, uint8_t v)
{
	__atomic_store_n(&ctxshim_conn_tab.hot[fd], v, __ATOMIC_RELAXED);
}

/* The application closes or replaces fd, which the shim used for its
 * event log (daemons close every descriptor at start): stop logging
 * rather than write into whatever gets that number next. */
void
ctxshim_conn_release_shim_fd(int fd)
{
	if (fd == ctxshim_events_fd)
		ctxshim_events_fd = -1;
	if (fd == ctxshim_log_fd)
		ctxshim_log_fd = -1;
	if ((unsigned)fd < ctxshim_conn_tab.max_fds &&
	    __atomic_load_n(&ctxshim_conn_tab.hot[fd], __ATOMIC_RELAXED) ==
		    CONN_HOT_SHIM)
		conn_set_hot(fd, CONN_HOT_NONE);
}

static void *
conn_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

_Static_assert(CTXSHIM_HEADER_NAME_MAX - 1 == HTTP_SCAN_NAME_MAX,
	       "every configured header name fits the socket level's scanner");

static void
conn_scan_config(void)
{
	unsigned i, k;
	int r;

	http_scan_config_init(&ctxshim_conn_scan_cfg);
	r = http_scan_config_set_limits(
		&ctxshim_conn_scan_cfg, ctxshim_cfg.max_header_bytes,
		ctxshim_cfg.max_header_bytes > HTTP_SCAN_DEFAULT_GIVE_UP
			? ctxshim_cfg.max_header_bytes
			: 0);
	if (r < 0)
		ctxshim_log("CTXSHIM_MAX_HEADER_BYTES=%u rejected by the scanner",
			    ctxshim_cfg.max_header_bytes);
	for (i = 0; i < CTXSHIM_MAX_HEADER_ATTRS; i++) {
		ctxshim_conn_extra_index[i] = -1;
		if (i >= ctxshim_cfg.n_header_attrs)
			continue;
		r = http_scan_config_add_header(
			&ctxshim_conn_scan_cfg, ctxshim_cfg.header_attrs[i],
			strlen(ctxshim_cfg.header_attrs[i]), &k);
		if (r == 0)
			ctxshim_conn_extra_index[i] = (int)k;
		else
			ctxshim_log(
				"CTXSHIM_HEADER_ATTRS: the socket level cannot capture "
				"'%s' (%s)",
				ctxshim_cfg.header_attrs[i],
				r == -EEXIST ? "a header the shim reads itself"
					     : "name too long");
	}
}

/* The limits are the HTTP scanner's for the same values (http-scan.h):
 * longer ones are dropped whole (fcgi-scan.h), as are those past the
 * arena, which holds all of these at their limits but 8 configured
 * headers' last 227 bytes.  But REQUEST_URI is cut, as the HTTP scanner
 * cuts a target: dropped, request-cgi.c would rebuild the path from
 * SCRIPT_NAME, the front controller's (/index.php) for every request with
 * a long query string. */
static void
conn_fcgi_config(void)
{
	static const struct {
		const char *name;
		size_t max;
		bool cut;
	} vars[] = {
		{"REQUEST_METHOD", HTTP_SCAN_METHOD_MAX, false},
		{"REQUEST_URI", HTTP_SCAN_TARGET_MAX, true},
		{"SCRIPT_NAME", HTTP_SCAN_TARGET_MAX, false},
		{"PATH_INFO", HTTP_SCAN_TARGET_MAX, false},
		{"QUERY_STRING", HTTP_SCAN_TARGET_MAX, false},
		{"HTTP_TRACEPARENT", HTTP_SCAN_TRACEPARENT_MAX, false},
		{"HTTP_TRACESTATE", HTTP_SCAN_TRACESTATE_MAX, false},
	};
	unsigned i;

	memset(&conn_fcgi_cfg, 0, sizeof(conn_fcgi_cfg));
	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		int k = fcgi_scan_config_add(&conn_fcgi_cfg, vars[i].name, vars[i].max);

		if (k >= 0 && vars[i].cut)
			(void)fcgi_scan_config_cut(&conn_fcgi_cfg, (unsigned)k);
	}
	for (i = 0; i < ctxshim_cfg.n_header_attrs; i++) {
		char name[CTXSHIM_CGI_VAR_MAX];

		/* -EEXIST (a header of the trace's): kept already. */
		(void)fcgi_scan_config_add(
			&conn_fcgi_cfg,
			ctxshim_cgi_header_var(name, ctxshim_cfg.header_attrs[i]),
			HTTP_SCAN_VALUE_MAX);
	}
}

/* The fields hook_h2_req_header() takes, as nghttp2 hands them to
 * hooks/hook-nghttp2.c: the pseudo-headers first, then the trace's
 * headers and the configured ones (a configured name that is one of these
 * is taken once, as the hook does). */
static __attribute__((cold)) void
conn_h2_config(void)
{
	static const char *const fixed[] = {":method", ":path", "traceparent",
					    "tracestate"};
	unsigned i, j;
	int k;

	memset(&conn_h2_cfg, 0, sizeof(conn_h2_cfg));
	for (i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		k = h2_scan_config_add(&conn_h2_cfg, fixed[i]);
		if (i == 2)
			conn_h2_k_traceparent = k;
		if (i == 3)
			conn_h2_k_tracestate = k;
	}
	for (i = 0; i < ctxshim_cfg.n_header_attrs && i < CTXSHIM_MAX_HEADER_ATTRS;
	     i++) {
		const char *h = ctxshim_cfg.header_attrs[i];

		for (j = 0; h[j] && j + 1 < CTXSHIM_HEADER_NAME_MAX; j++)
			conn_h2_names[i][j] =
				(char)(h[j] >= 'A' && h[j] <= 'Z' ? h[j] + ('a' - 'A')
								  : h[j]);
		conn_h2_names[i][j] = '\0';
		(void)h2_scan_config_add(&conn_h2_cfg, conn_h2_names[i]);
	}
	for (i = 0; i < conn_h2_cfg.n && i < H2_SCAN_KEEP_MAX; i++)
		conn_h2_kind[i] = hook_h2_field_kind(
			(const char(*)[CTXSHIM_HEADER_NAME_MAX])conn_h2_names,
			ctxshim_cfg.n_header_attrs,
			(const uint8_t *)conn_h2_cfg.name[i], conn_h2_cfg.name_len[i]);
}

void
ctxshim_conn_init(void)
{
	struct rlimit rl;
	size_t n = CTXSHIM_CONN_MAX_FDS, nchunks;
	void *hot, *chunks;

	/* The hard limit bounds every fd the process can ever have (only
	 * root can raise it); fds above the cap are simply not tracked. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY &&
	    rl.rlim_max < n)
		n = (size_t)rl.rlim_max;
	n = (n + CTXSHIM_CONN_CHUNK - 1) & ~(size_t)(CTXSHIM_CONN_CHUNK - 1);
	if (n == 0)
		n = CTXSHIM_CONN_CHUNK;
	nchunks = n / CTXSHIM_CONN_CHUNK;

	conn_scan_config();
	conn_fcgi_config();
	conn_h2_config();
	hot = conn_map(n);
	chunks = conn_map(nchunks * sizeof(*ctxshim_conn_tab.chunks));
	if (!hot || !chunks) {
		ctxshim_log("cannot map the connection table: socket level off");
		if (hot)
			(void)munmap(hot, n);
		if (chunks)
			(void)munmap(chunks,
				     nchunks * sizeof(*ctxshim_conn_tab.chunks));
		return;
	}
	ctxshim_conn_tab.hot = hot;
	ctxshim_conn_tab.chunks = chunks;
	if (ctxshim_events_fd >= 0 && (size_t)ctxshim_events_fd < n)
		conn_set_hot(ctxshim_events_fd, CONN_HOT_SHIM);
	if (ctxshim_log_fd >= 0 && (size_t)ctxshim_log_fd < n)
		conn_set_hot(ctxshim_log_fd, CONN_HOT_SHIM);
	__atomic_store_n(&ctxshim_conn_tab.max_fds, (unsigned)n, __ATOMIC_RELEASE);
}

/* After the lead's constructor (priority 101), which sets ctxshim_mode. */
__attribute__((constructor(102))) static void
conn_ctor(void)
{
	if (ctxshim_active()) {
		ctxshim_conn_init();
		if (ctxshim_cfg.inherited)
			ctxshim_conn_inherit();
	}
}

static struct ctxshim_conn *
conn_get_or_map(int fd)
{
	struct ctxshim_conn *chunk, *expect = NULL;
	struct ctxshim_conn *_Atomic *slot;
	const size_t len = CONN_CHUNK_BYTES;

	if ((unsigned)fd >= ctxshim_conn_tab.max_fds)
		return NULL;
	slot = &ctxshim_conn_tab.chunks[(unsigned)fd >> CTXSHIM_CONN_CHUNK_SHIFT];
	chunk = atomic_load_explicit(slot, memory_order_acquire);
	if (!chunk) {
		/* mmap is async-signal-safe and zero-fills: all-zero slots are
		 * untracked, with fresh scanners.  Two accepting threads may
		 * race; the loser unmaps its copy. */
		chunk = conn_map(len);
		if (!chunk)
			return NULL;
		if (!atomic_compare_exchange_strong_explicit(slot, &expect, chunk,
							     memory_order_acq_rel,
							     memory_order_acquire)) {
			(void)munmap(chunk, len);
			chunk = expect;
		}
	}
	return &chunk[(unsigned)fd & (CTXSHIM_CONN_CHUNK - 1)];
}

/* Flags change atomically: a library hook may claim the slot from another
 * thread at any time. */
static inline void
conn_flags_update(struct ctxshim_conn *c, uint8_t clear, uint8_t set)
{
	uint8_t old = atomic_load_explicit(&c->flags, memory_order_relaxed);

	while (!atomic_compare_exchange_weak_explicit(
		&c->flags, &old, (uint8_t)((old & ~clear) | set), memory_order_relaxed,
		memory_order_relaxed))
		;
}

/* The writer side of the seqlock on ctx.  seq has one writer at a time
 * (conn.h), so a load and a store do what two atomic increments did: the
 * relaxed store of an odd value, then a release fence (free on x86: no
 * instruction, only a compiler barrier) before the data stores, then a
 * release store of the next even value.  A reader that saw any of the
 * data stores sees the odd value or later in its second load (fence to
 * fence), so it drops the copy; a reader that saw the even value sees
 * all of the data.
 *
 * If two writers overlap anyway (an application racing on one socket),
 * the copy may be torn -- as with atomic increments, which do not make a
 * seqlock safe for two writers either -- and readers bound every length
 * they use (conn_expand_ctx).  What the form below adds is that seq ends
 * even after the last writer: begin stores seq | 1, end stores
 * (seq | 1) + 1, and the last store to seq is always some writer's end
 * (each writer's end follows its begin), so no slot is left odd, i.e.
 * unreadable, for good. */
static inline void
conn_seq_begin(struct ctxshim_conn *c)
{
	ctxshim_conn_seq_begin(c); /* conn-whole.h, inline there for the reads */
}

static inline void
conn_seq_end(struct ctxshim_conn *c)
{
	ctxshim_conn_seq_end(c);
}

/* Mark c's current request answered or not, after a change of it by this
 * thread (conn_seq_end() done, so seq is this thread's final even value).
 * Stored after the section, never inside it: inside, seq >> 1 is still
 * the old request's tag, so the value for the new one would read as
 * "answered" for a moment.  "Not answered" is tag - 1, which bounds the
 * distance seq/2 - answered (conn.h): it is 1 after this; a new head on a
 * connection without a current request (after a reset) makes it 2, a
 * response write 0, a new head on an answered connection 1, and moving on
 * to a pipelined request 2 or 3 for a moment, then 1 again here.  It only
 * grows through a new head, and a new head needs distance 0 or no current
 * request, so it never comes near the 256 of a wrap.  (An HTTP/2 or
 * FastCGI request replaces an unanswered one instead of queueing:
 * conn_replaced() brings it back to 1.) */
static inline void
conn_set_answered(struct ctxshim_conn *c, bool yes)
{
	uint8_t tag =
		(uint8_t)(atomic_load_explicit(&c->seq, memory_order_relaxed) >> 1);

	atomic_store_explicit(&c->answered, yes ? tag : (uint8_t)(tag - 1),
			      memory_order_relaxed);
}

/* An HTTP/2 or FastCGI request just became c's current one (its section
 * ended) in place of one not answered, whose answered value was was: the
 * distance seq/2 - answered grew by one, which for a head never happens
 * (it queues).  Unbounded, 256 such requests (streams or multiplexed
 * requests opened and never answered: waiting on upstreams, reset by the
 * client) wrap it to 0, and the current one reads as answered: not
 * shown.  Back to 1, as conn_set_answered() does, unless a writer
 * answered meanwhile (then was is stale and the store fails). */
static void
conn_replaced(struct ctxshim_conn *c, uint8_t was)
{
	uint8_t tag =
		(uint8_t)(atomic_load_explicit(&c->seq, memory_order_relaxed) >> 1);

	(void)atomic_compare_exchange_strong_explicit(
		&c->answered, &was, (uint8_t)(tag - 1), memory_order_relaxed,
		memory_order_relaxed);
}

/* Reset a slot to "fresh", with a new generation. */
static void
conn_reset(struct ctxshim_conn *c, uint8_t flags)
{
	/* The new generation before the queue is released: a pop that
	 * hands a queue back to c after the release finds it
	 * (conn_fifo_hand_back(); both sequentially consistent, a
	 * lock-prefixed instruction either way).  Inside the section, so
	 * that nothing expands the old context under the new generation. */
	conn_seq_begin(c);
	atomic_fetch_add_explicit(&c->gen, 1, memory_order_seq_cst);
	conn_release_all(c);
	memset(&c->scan, 0, sizeof(c->scan));
	c->ctx.attrs_len = 0;
	c->ctx.tracestate_len = 0;
	atomic_store_explicit(&c->flags, flags, memory_order_relaxed);
	conn_seq_end(c);
	conn_set_answered(c, false);
}

/* The hot-map value of a tracked slot with flags f. */
static uint8_t
conn_hot_of(uint8_t f)
{
	if (f & CONN_F_TLS)
		return (f & CONN_F_CLAIMED) ? CONN_HOT_TLS_CLAIMED : CONN_HOT_TLS;
	return (f & CONN_F_CLAIMED) ? CONN_HOT_CLAIMED : CONN_HOT_SCAN;
}

/* ---- copies ----
 *
 * Copies.  inetd and socket activation hand a daemon one socket as fd 0
 * and fd 1 (and 2): it reads requests on 0 and writes responses on 1.
 * Separate slots for the copies (what dup() gave before) saw the response
 * on a slot without a request -- to the socket level, I/O on another
 * connection, which made the thread drop the request's context while it
 * wrote the response -- and never saw the request answered, so the next
 * keep-alive request was taken as pipelined and kept the first one's
 * context.  So all descriptors of one connection form a ring: each slot's
 * link word names the next one (fd + 1 and its generation, one 64-bit
 * word, so a racing reader never sees a torn pair), and exactly one of
 * them, the leader, holds the connection's state (scanner, request,
 * context, pipelining FIFO); the others are copies, CONN_F_LINK slots
 * with their scanner stopped.
 *
 * The cost is nowhere on the usual path.  A copy's flags say REQ and
 * HAS_CTX and it is never answered, so its I/O misses every fast path of
 * the hooks (the read of an idle connection, the write of the request the
 * thread publishes) and reaches branches that were slow already: a read
 * or write on a live connection whose context the thread does not
 * publish (hook-socket.c, sk_follow()), and the response note's slow path
 * (ctxshim_conn_responded_slow(), for which CONN_F_LINK joined the flags
 * the inline part tests in one instruction).  There hook-socket.c takes a
 * write through a copy as a write on the leader: the thread keeps (or
 * gets back) the leader's request context and the write answers its
 * request.  A read through a copy makes it the leader
 * (ctxshim_conn_lead()): the state moves to the descriptor the bytes are
 * read through, so its own scanner sees them in order and the read path
 * needs no look-up; a server reads through one descriptor, so this
 * happens once, at its first read.  Links are resolved by walking the
 * ring, at most CTXSHIM_CONN_RING_MAX hops, and a ring holds at most
 * that many descriptors, so every walk reaches every member (further
 * copies get slots of their own: conn_ring_size()); a link whose target's
 * generation moved on (closed, accepted again, dup2()ed over) is dead, so
 * a reused number never inherits a link.
 *
 * Making and breaking rings are fd life-cycle events (dup, dup2, dup3,
 * F_DUPFD, close, close_range, start-up), which like the others do not
 * overlap I/O on the connection; so is a read through a copy that makes
 * it the leader.  A copy joins its original's ring right after it;
 * closing a member takes it out of its ring, and closing the leader first
 * moves its state to the next member, which becomes the leader (the copy
 * carries on: "close A, keep B").  An application that closes one copy,
 * or reads through one for the first time, while another thread does I/O
 * through another may lose that request's context or see it answered
 * late; every index and fd read from a link is bounded, so nothing
 * becomes memory-unsafe.  What moves with the state are pool indexes
 * (the capture, the pipelining FIFO).  Those of the FIFO are the ones
 * another thread uses at the same time in a correct program: with
 * requests queued behind the current one, a response written through a
 * copy pops the leader's queue (ctxshim_conn_responded_slow()) while
 * another thread closes the leader, or reads through another copy, and
 * the move hands the queue on.  When both copied the head index, the
 * writer freed an entry the new leader still named; another connection
 * could take it, and its context then came out as this connection's next
 * one (test: sock-attack copy-race).  So each entry has one owner at a
 * time: a move or a release takes pending and tail with an exchange
 * (conn_fifo_take(), the old slot left empty), and a pop claims its entry
 * with a compare-and-swap of pending from it to its successor before it
 * reads, promotes or frees it.  Of the two, one wins: a move that wins
 * takes the entry along (the pop promotes nothing: that request is
 * promoted by the next response, late by one, on the new leader), a pop
 * that wins has it alone (the move takes the rest of the queue, and the
 * promotion it makes on the old slot is lost with it).  Releasing a
 * queue (conn_fifo_drain()) frees only entries that have a successor;
 * the last one it closes, leaving it to whichever slot's tail names it
 * (the tail moves with an exchange too), so no tail ever names a freed
 * entry.  A pop that took the last entry while the reader linked another
 * puts the rest back in pending only if the slot still holds the state
 * (conn_fifo_hand_back()), else drains it.  What remains is losing
 * contexts: a request promoted on a slot that was just moved away from,
 * a pool entry left allocated when a release runs between a pop's claim
 * of the last entry and its close (at most one per such race), a queue
 * count (qpop) one short on the new leader (it reaches its bound one
 * request early).  And a pop stopped between its claim and its promotion
 * for as long as another thread closes the leader and a new connection is
 * accepted on its number would promote this connection's request in the
 * new connection's slot: the window of a close() racing I/O on the same
 * connection, a few instructions, which nothing here closes.  The
 * writer's thread publishes a promotion made through a copy only if the
 * leader's generation did not move meanwhile (hook-socket.c,
 * sk_out_next()), so a leader closed and its number accepted again does
 * not hand it the new connection's context -- except in the few
 * instructions between that check and the publication, the window a
 * close() of a connection has against I/O on it anyway.  Two
 * threads closing two descriptors of one connection at the same moment
 * can leave the closed number tracked (as a close the hooks did not see);
 * its queue, taken by exchanges, is drained at that number's next accept.
 * A thread that published a request from a descriptor whose state another
 * thread's read then moved away keeps that request's context (the
 * generation stays), and its own reads through that descriptor are then
 * not followed until it publishes something else. */

static inline uint64_t
conn_link_make(int fd, uint32_t gen)
{
	return ((uint64_t)(unsigned)(fd + 1) << 32) | gen;
}

static inline uint64_t
conn_link_load(int fd)
{
	_Atomic uint64_t *w = conn_link_word(fd);

	return w ? atomic_load_explicit(w, memory_order_relaxed) : 0;
}

static inline void
conn_link_store(int fd, uint64_t v)
{
	_Atomic uint64_t *w = conn_link_word(fd);

	/* Only a store that changes it: a zero word is never written, so
	 * its page stays unallocated. */
	if (w && atomic_load_explicit(w, memory_order_relaxed) != v)
		atomic_store_explicit(w, v, memory_order_relaxed);
}

/* The live slot link v names (its fd in *fd), or NULL if v is empty or
 * dead (that fd's generation moved on, or it is not tracked). */
static struct ctxshim_conn *
conn_link_target(uint64_t v, int *fd)
{
	struct ctxshim_conn *t;
	uint32_t hi = (uint32_t)(v >> 32);

	if (hi == 0 || hi > ctxshim_conn_tab.max_fds)
		return NULL;
	*fd = (int)(hi - 1);
	t = ctxshim_conn_get(*fd);
	if (!t || atomic_load_explicit(&t->gen, memory_order_relaxed) != (uint32_t)v ||
	    !(atomic_load_explicit(&t->flags, memory_order_relaxed) & CONN_F_TRACKED))
		return NULL;
	return t;
}

int
ctxshim_conn_leader(int fd, struct ctxshim_conn **out)
{
	int cur = fd, next, hop;

	for (hop = 0; hop < CTXSHIM_CONN_RING_MAX; hop++) {
		struct ctxshim_conn *t = conn_link_target(conn_link_load(cur), &next);
		uint8_t f;

		if (!t || next == fd)
			return -1;
		f = atomic_load_explicit(&t->flags, memory_order_relaxed);
		if (!(f & CONN_F_LINK)) {
			if (f & (CONN_F_TLS | CONN_F_CLAIMED))
				return -1;
			*out = t;
			return next;
		}
		cur = next;
	}
	return -1;
}

/* How many descriptors fd's ring has, fd included (1: in none), counted
 * up to CTXSHIM_CONN_RING_MAX + 1 (a broken ring: the members its links
 * reach from fd).  A ring never grows past CTXSHIM_CONN_RING_MAX
 * (ctxshim_conn_dup()): every walk below reaches each member of a ring
 * from any other within its bound, so no copy is ever too far from its
 * leader -- one that was would do nothing, and a response written
 * through it would leave the request unanswered, the next one taken as
 * pipelined behind it and the connection's contexts a request late from
 * then on. */
static unsigned
conn_ring_size(int fd)
{
	int cur = fd, next;
	unsigned n = 1;

	while (n <= CTXSHIM_CONN_RING_MAX) {
		if (!conn_link_target(conn_link_load(cur), &next) || next == fd)
			return n;
		n++;
		cur = next;
	}
	return n;
}

/* The member of fd's ring whose link names fd, or -1. */
static int
conn_ring_pred(int fd)
{
	int cur = fd, next, hop;

	for (hop = 0; hop < CTXSHIM_CONN_RING_MAX; hop++) {
		if (!conn_link_target(conn_link_load(cur), &next))
			return -1;
		if (next == fd)
			return cur;
		cur = next;
	}
	return -1;
}

/* The leader src (closing) hands the connection's state to dst, a member
 * of its ring, which becomes the leader.  dst keeps its generation: no
 * thread published a context under it (a CONN_F_LINK slot's I/O publishes
 * as the leader), and the other members' links name it with that one. */
static void
conn_move(struct ctxshim_conn *dst, struct ctxshim_conn *src)
{
	bool answered = ctxshim_conn_answered(src), ctx_ok = false;
	unsigned p, t, tries;
	uint8_t f;

	conn_release_all(dst);
	/* The queue is taken, not copied: a response written through another
	 * descriptor may be popping it right now, and exactly one of the two
	 * gets each entry ("Copies"). */
	p = conn_fifo_take(&src->pending);
	t = conn_fifo_take(&src->tail) & ~CONN_TAIL_BUSY;
	conn_seq_begin(dst);
	dst->scan = src->scan;
	/* Taken with an exchange (conn_cap_take()): a read through another
	 * copy feeds src meanwhile, and may let go of the entry (a FastCGI
	 * scanner that gives up, a split head that completes: freed, and
	 * dst would hold a freed entry) or store one (lost when src->cap
	 * was zeroed after the copy). */
	dst->cap = (uint16_t)conn_cap_take(src);
	if (p)
		atomic_store_explicit(&dst->pending, (uint16_t)p, memory_order_release);
	if (t)
		atomic_store_explicit(&dst->tail, (uint16_t)t, memory_order_relaxed);
	dst->qpush = src->qpush;
	atomic_store_explicit(&dst->qpop,
			      atomic_load_explicit(&src->qpop, memory_order_relaxed),
			      memory_order_relaxed);
	/* That pop rewrites src's context (a promotion): read it as a reader
	 * of the seqlock does; a torn one is not kept. */
	for (tries = 0; tries < 4 && !ctx_ok; tries++) {
		uint32_t s1 = atomic_load_explicit(&src->seq, memory_order_acquire);

		if (s1 & 1)
			continue;
		dst->ctx = src->ctx;
		atomic_thread_fence(memory_order_acquire);
		ctx_ok = atomic_load_explicit(&src->seq, memory_order_relaxed) == s1;
	}
	f = (uint8_t)(atomic_load_explicit(&src->flags, memory_order_relaxed) &
		      ~CONN_F_LINK);
	if (!ctx_ok)
		f &= (uint8_t)~CONN_F_HAS_CTX;
	atomic_store_explicit(&dst->flags, f, memory_order_relaxed);
	conn_seq_end(dst);
	conn_set_answered(dst, answered);
	/* A head in progress keeps its capture: the scanner takes it only
	 * if marked as its own (http-scan.h, owner), and its state now
	 * lives in dst.  (The scanner's header has no call for handing a
	 * capture on; this is the one place that needs it.) */
	if (dst->cap && dst->cap <= CONN_POOL_N && http_scan_in_head(&dst->scan) &&
	    conn_pool[dst->cap - 1].u.cap.owner == &src->scan)
		conn_pool[dst->cap - 1].u.cap.owner = &dst->scan;
	/* The pool entries are dst's now (src->cap was taken above): src's
	 * reset must not free them. */
}

/* c becomes a copy (CONN_F_LINK): no state of its own.  Its context is
 * zeroed: never published (conn.h), but all-zero ids could not pass for a
 * request's if it were.  A fresh copy gets a new generation (its fd
 * number may have been a connection before); one the state was just
 * moved away from keeps its own, which the ring's links name. */
static void
conn_to_link(struct ctxshim_conn *c, uint8_t tracked, bool new_gen)
{
	conn_release_all(c);
	conn_seq_begin(c);
	memset(&c->scan, 0, sizeof(c->scan));
	http_scan_stop(&c->scan);
	memset(&c->ctx, 0, offsetof(struct ctxshim_conn_ctx, data));
	memset(c->ctx.parent_id, 0, sizeof(c->ctx.parent_id));
	atomic_store_explicit(&c->flags,
			      tracked | CONN_F_LINK | CONN_F_REQ | CONN_F_HAS_CTX,
			      memory_order_relaxed);
	if (new_gen)
		atomic_fetch_add_explicit(&c->gen, 1, memory_order_relaxed);
	conn_seq_end(c);
	conn_set_answered(c, false);
}

static void
conn_to_copy(struct ctxshim_conn *c, bool new_gen)
{
	conn_to_link(c, CONN_F_TRACKED, new_gen);
}

static void
conn_make_copy(struct ctxshim_conn *c)
{
	conn_to_copy(c, true);
}

bool
ctxshim_conn_lead(int fd)
{
	struct ctxshim_conn *c = ctxshim_conn_get(fd), *l;
	int lfd;

	if (!c ||
	    !(atomic_load_explicit(&c->flags, memory_order_relaxed) & CONN_F_LINK))
		return false;
	lfd = ctxshim_conn_leader(fd, &l);
	if (lfd < 0)
		return false;
	conn_move(c, l);
	conn_to_copy(l, false);
	conn_set_hot(lfd, CONN_HOT_SCAN);
	conn_set_hot(
		fd, conn_hot_of(atomic_load_explicit(&c->flags, memory_order_relaxed)));
	return true;
}

/* ---- forwards ----
 *
 * Forwards.  A thread's context names its request's connection by a
 * descriptor and its generation (the socket level's, and a copy of it
 * saved to be restored later: hooks/hook-scope.h), and closing that
 * descriptor while a copy carries the connection on ("close A, keep B")
 * moves the generation on: the saved context read as closed, and a
 * coroutine switched back to, a callback left or a libuv after-work
 * callback dropped a request still in flight.  So a descriptor that
 * leaves a ring keeps, in a word of its own, where its connection went:
 * the generation it leaves, and the next member's fd and generation,
 * 21 bits of each generation, in one 64-bit word (no torn read).
 * ctxshim_conn_holder() follows it (and the next member's own forward
 * if that one was closed too), so the word lasts until the number
 * leaves another ring, whatever else it is used for meanwhile (an
 * accept() that gets the number writes nothing here).  A truncated
 * generation may name an older one after 2^21 of them; the callers take
 * the slot found for the request's only if its current request has the
 * request's span-id, so a stale word finds nothing. */
#define CONN_FWD_BITS 21
#define CONN_FWD_MASK ((1u << CONN_FWD_BITS) - 1)
_Static_assert(CTXSHIM_CONN_MAX_FDS < (1u << CONN_FWD_BITS),
	       "a forward word holds fd + 1 of every table fd");

static inline uint64_t
conn_fwd_make(uint32_t gen, int nfd, uint32_t ngen)
{
	return (uint64_t)(unsigned)(nfd + 1) |
	       (uint64_t)(gen & CONN_FWD_MASK) << CONN_FWD_BITS |
	       (uint64_t)(ngen & CONN_FWD_MASK) << (2 * CONN_FWD_BITS);
}

static inline void
conn_fwd_store(int fd, uint64_t v)
{
	_Atomic uint64_t *w = conn_fwd_word(fd);

	if (w)
		atomic_store_explicit(w, v, memory_order_relaxed);
}

static inline uint64_t
conn_fwd_load(int fd)
{
	_Atomic uint64_t *w = conn_fwd_word(fd);

	return w ? atomic_load_explicit(w, memory_order_relaxed) : 0;
}

struct ctxshim_conn *
ctxshim_conn_holder(int id, uint32_t gen, int *hid)
{
	uint32_t mask = ~0u, g;
	struct ctxshim_conn *c;
	uint64_t w;
	uint8_t f;
	int hop;

	for (hop = 0; hop <= CTXSHIM_CONN_RING_MAX; hop++) {
		c = ctxshim_conn_by_id(id);
		if (!c)
			return NULL;
		g = atomic_load_explicit(&c->gen, memory_order_relaxed);
		if ((g & mask) == gen) {
			f = atomic_load_explicit(&c->flags, memory_order_relaxed);
			if (!(f & CONN_F_TRACKED))
				return NULL;
			/* A copy: its ring's leader holds the state (a slot
			 * without an fd is never a copy). */
			if ((f & CONN_F_LINK) && (id = ctxshim_conn_leader(id, &c)) < 0)
				return NULL;
			*hid = id;
			return c;
		}
		if (id >= CTXSHIM_CONN_VIRT_BASE)
			return NULL;
		w = conn_fwd_load(id);
		if (!w || ((uint32_t)(w >> CONN_FWD_BITS) & CONN_FWD_MASK) !=
				  (gen & CONN_FWD_MASK))
			return NULL;
		/* ctxshim_conn_by_id() bounds the fd. */
		id = (int)(w & CONN_FWD_MASK) - 1;
		gen = (uint32_t)(w >> (2 * CONN_FWD_BITS)) & CONN_FWD_MASK;
		mask = CONN_FWD_MASK;
	}
	return NULL;
}

static void conn_h2_cand_pass(int fd, uint32_t gen, int nfd, uint32_t ngen);

/* fd (slot c) leaves its ring, if it is in one; a leader first hands its
 * state to the next member, and an upgrade candidate that names fd goes
 * on to it as well ("Upgrade candidates"), and so does a context that
 * names fd ("Forwards"): then true. */
static bool
conn_ring_leave(int fd, struct ctxshim_conn *c)
{
	uint64_t v = conn_link_load(fd);
	struct ctxshim_conn *next;
	uint32_t gen, ngen;
	int nfd, pred;

	if (!v)
		return false;
	next = conn_link_target(v, &nfd);
	if (next && nfd != fd) {
		uint8_t f = atomic_load_explicit(&c->flags, memory_order_relaxed);
		uint8_t nf = atomic_load_explicit(&next->flags, memory_order_relaxed);

		pred = conn_ring_pred(fd);
		if (!(f & CONN_F_LINK) && (nf & CONN_F_LINK)) {
			/* A TLS leader's session goes with its state
			 * ("Sessions"). */
			if (f & CONN_F_TLS)
				conn_session_store(
					nfd,
					(const void *)(uintptr_t)conn_session_load(fd));
			conn_move(next, c);
			conn_set_hot(nfd, conn_hot_of(atomic_load_explicit(
						  &next->flags, memory_order_relaxed)));
		}
		gen = atomic_load_explicit(&c->gen, memory_order_relaxed);
		ngen = atomic_load_explicit(&next->gen, memory_order_relaxed);
		conn_h2_cand_pass(fd, gen, nfd, ngen);
		conn_fwd_store(fd, conn_fwd_make(gen, nfd, ngen));
		/* A ring of two leaves one member: no ring. */
		if (pred >= 0)
			conn_link_store(pred, pred == nfd ? 0 : v);
	}
	conn_link_store(fd, 0);
	return next && nfd != fd;
}

void
ctxshim_conn_accepted(int fd)
{
	struct ctxshim_conn *c = conn_get_or_map(fd);

	if (!c)
		return;
	/* A close the hooks did not see left fd in a ring: the members'
	 * links to it die with the generation, its own goes here. */
	conn_link_store(fd, 0);
	conn_reset(c, CONN_F_TRACKED);
	conn_set_hot(fd, CONN_HOT_SCAN);
}

bool
ctxshim_conn_forget(int fd)
{
	struct ctxshim_conn *c = ctxshim_conn_get(fd);
	bool on;

	if (!c)
		return false;
	if (!atomic_load_explicit(&c->flags, memory_order_relaxed) && !c->cap &&
	    !atomic_load_explicit(&c->pending, memory_order_relaxed) &&
	    !atomic_load_explicit(&c->tail, memory_order_relaxed))
		return false;
	conn_set_hot(fd, CONN_HOT_NONE);
	on = conn_ring_leave(fd, c);
	conn_reset(c, 0);
	/* An upstream's request goes with it: whatever gets the number next
	 * carries none. */
	ctxshim_conn_up_store(fd, 0);
	return on;
}

/* ---- upstreams (conn.h) ---- */

/* The socket's inode, kept in the upstream's slot (whose context area
 * holds nothing else): a close the hooks did not see, and another file
 * on the number, must not read as the upstream (ctxshim_conn_up_same()).
 * Changes errno. */
static void
conn_up_ino_store(struct ctxshim_conn *c, int fd)
{
	uint64_t ino = 0;
	struct stat st;

	if (fstat(fd, &st) == 0)
		ino = (uint64_t)st.st_ino;
	memcpy(c->ctx.data, &ino, sizeof(ino));
}

bool
ctxshim_conn_upstream(int fd, uint64_t v)
{
	struct ctxshim_conn *c = conn_get_or_map(fd);

	if (!c)
		return false;
	/* A copy without a leader (conn_to_copy()), but not tracked: its
	 * link word empty, its scanner stopped, its request never
	 * answered (a write on it goes to sk_out_next(), which finds no
	 * leader and stops). */
	conn_link_store(fd, 0);
	conn_to_link(c, 0, true);
	conn_up_ino_store(c, fd);
	ctxshim_conn_up_store(fd, v);
	conn_set_hot(fd, CONN_HOT_UP);
	return true;
}

bool
ctxshim_conn_up_same(int fd)
{
	struct ctxshim_conn *c = ctxshim_conn_get(fd);
	uint64_t ino, now = 0;
	struct stat st;

	if (!c)
		return false;
	memcpy(&ino, c->ctx.data, sizeof(ino));
	if (fstat(fd, &st) == 0)
		now = (uint64_t)st.st_ino;
	return ino && now == ino;
}

/* The copy n of o is made in the middle of a head that o captures.  The
 * scanner takes the capture passed with the rest of a head for the one
 * it started only if it is marked as its own, and an entry of the pool
 * still carries the mark of the last head scanned into it: with none of
 * its own, the copy would take the next free entry at its next read,
 * and if the last head scanned there was on newfd's number (the same
 * slot, the same mark), the old request's values -- its url.path, its
 * traceparent -- would come out as this one's context.  So n gets an
 * entry of its own holding a copy of o's capture, which is marked as
 * o's: the copy's head is then known to have lost its capture and gets
 * no context (conn.h), and its later heads are followed as usual.  With
 * no entry free, the copy stops scanning instead.  Not a read path:
 * dup2/dup3. */
static void
conn_dup_head(unsigned ocap, struct ctxshim_conn *n)
{
	unsigned idx = conn_pool_claim();

	if (!idx) {
		http_scan_stop(&n->scan);
		return;
	}
	conn_pool[idx - 1].u.cap = conn_pool[ocap - 1].u.cap;
	n->cap = (uint16_t)idx;
}

void
ctxshim_conn_dup(int oldfd, int newfd)
{
	struct ctxshim_conn *o = ctxshim_conn_get(oldfd), *n, *t;
	bool answered;
	unsigned ocap;
	uint32_t ogen, ngen;
	uint64_t v;
	uint8_t f;
	int tfd;

	if (!o || oldfd == newfd)
		return;
	f = atomic_load_explicit(&o->flags, memory_order_relaxed);
	if (!(f & CONN_F_TRACKED))
		return;
	n = conn_get_or_map(newfd);
	if (!n)
		return;
	conn_link_store(newfd, 0);
	/* Into oldfd's ring, right after it ("Copies"), unless the ring is
	 * full (conn_ring_size()): then, like a TLS or claimed connection's,
	 * a copy of the slot of its own. */
	if (!(f & (CONN_F_TLS | CONN_F_CLAIMED)) &&
	    conn_ring_size(oldfd) < CTXSHIM_CONN_RING_MAX) {
		conn_make_copy(n);
		v = conn_link_load(oldfd);
		t = conn_link_target(v, &tfd);
		ogen = atomic_load_explicit(&o->gen, memory_order_relaxed);
		ngen = atomic_load_explicit(&n->gen, memory_order_relaxed);
		if (!t || tfd == newfd)
			v = conn_link_make(oldfd, ogen);
		conn_link_store(newfd, v);
		conn_link_store(oldfd, conn_link_make(newfd, ngen));
		conn_set_hot(newfd, CONN_HOT_SCAN);
		return;
	}
	/* A copy of a copy of a full ring: a copy of the connection's state,
	 * which its leader holds (with none, of the copy: it does nothing). */
	if ((f & CONN_F_LINK) && ctxshim_conn_leader(oldfd, &t) >= 0) {
		o = t;
		f = atomic_load_explicit(&o->flags, memory_order_relaxed);
	}
	answered = ctxshim_conn_answered(o);
	conn_release_all(n);
	conn_seq_begin(n);
	n->scan = o->scan;
	ocap = o->cap;
	/* A framed connection's scanner (HTTP/2, FastCGI) is not copied: it
	 * would hold a second entry of the pool's long-lived ones for the
	 * copy's life, and its header tables would go stale as soon as the
	 * original is read again (wrong field values, not just none).  The
	 * copy's HTTP scanner stays given up: a TLS session moved to the copy
	 * gets no context for its requests from there (ctxshim(7), "Copies
	 * of a connection"). */
	if (ocap && ocap <= CONN_POOL_N && http_scan_in_head(&n->scan))
		conn_dup_head(ocap, n);
	n->ctx = o->ctx;
	/* A TLS connection's session goes with it ("Sessions"): o is
	 * oldfd's own slot then (a leader is never TLS). */
	if (f & CONN_F_TLS)
		conn_session_store(newfd,
				   (const void *)(uintptr_t)conn_session_load(oldfd));
	atomic_store_explicit(&n->flags, f, memory_order_relaxed);
	atomic_fetch_add_explicit(&n->gen, 1, memory_order_relaxed);
	conn_seq_end(n);
	conn_set_answered(n, answered);
	conn_set_hot(newfd, conn_hot_of(f));
}

void
ctxshim_conn_claim(int fd)
{
	struct ctxshim_conn *c = ctxshim_conn_get(fd);
	uint8_t f;

	if (!c)
		return;
	/* Pool entries it holds are released when the fd is closed: the
	 * thread scanning it may be using them right now. */
	f = atomic_load_explicit(&c->flags, memory_order_relaxed);
	if (!(f & CONN_F_TRACKED))
		return;
	/* Library hooks claim on every request: the compare-and-swap only
	 * the first time (the bit is cleared only by conn_reset(), i.e. by
	 * a new connection on the fd). */
	if (!(f & CONN_F_CLAIMED))
		conn_flags_update(c, 0, CONN_F_CLAIMED);
	conn_set_hot(
		fd, conn_hot_of(atomic_load_explicit(&c->flags, memory_order_relaxed)));
}

bool
ctxshim_conn_h2_preface(int fd, uint32_t gen)
{
	struct ctxshim_conn *c = ctxshim_conn_get(fd);

	if (!c || atomic_load_explicit(&c->gen, memory_order_relaxed) != gen)
		return false;
	/* A copy's bytes are scanned in its leader's slot. */
	if ((atomic_load_explicit(&c->flags, memory_order_relaxed) & CONN_F_LINK) &&
	    ctxshim_conn_leader(fd, &c) < 0)
		return false;
	if (!(atomic_load_explicit(&c->flags, memory_order_relaxed) & CONN_F_TRACKED))
		return false;
	return http_scan_gave_up(&c->scan) &&
	       http_scan_give_up_reason(&c->scan) == HTTP_SCAN_GIVE_UP_HTTP2;
}

/* ---- sessions ----
 *
 * Sessions.  A TLS library names a session's connection by its fd number
 * (SSL_get_fd(), gnutls_transport_get_ptr()), and a session may outlive
 * its fd: an application that close()s the fd and frees the session
 * later.  Meanwhile accept() may have returned the same number for a new
 * connection, whose request the thread now publishes, under the slot's
 * new generation -- the one the thread remembers.  The generation cannot
 * tell the old session's end from the new one's, so that end would drop
 * the new connection's context (hook-socket.c, hook_socket_tls_end()).
 * So the slot also knows its session: when a TLS hook makes an fd TLS for
 * a session (ctxshim_conn_tls_session(): the handshake, the first read or
 * write, SSL_set_fd), the session pointer goes into the fd's session
 * word, and a session's end acts on the fd only if it is that session
 * (ctxshim_conn_tls_end(), which then clears the word).  When the socket
 * level made the fd TLS on a handshake record, before any TLS hook saw
 * it, or a session ended and another one took the fd over without
 * SSL_set_fd(), its session is not known (0) until an SSL_set_fd() names
 * it; the end of any session then acts as before, by the generation
 * alone.
 *
 * Room.  The slot has none left (conn.h: 256 bytes, B8b), and nothing in
 * it is free on a TLS connection (the scanner, the FIFO and the context
 * all serve its plaintext).  The word lives next to the link words, one
 * per fd: 8 bytes per TLS connection, in pages that a process without TLS
 * never touches.  It is written only when a connection becomes TLS (never
 * on a read path: the hooks' read and write paths do not look at it), and
 * only if it changes.
 *
 * Concurrency.  One 64-bit word, relaxed atomic loads and stores: a
 * reader sees the old session or the new one, never a mix.  It is
 * written when an fd becomes TLS, by the thread doing its I/O (or giving
 * it to a session), and copied with the connection's state (a dup, a
 * ring's state moving on), both fd life-cycle events that do not overlap
 * I/O on the connection; the end of its session clears it with a
 * compare-and-swap from that session, which leaves a session that was
 * given the fd meanwhile in place.  It is read by a thread ending a
 * session, and only to decide about the context that thread published
 * itself: a read of that thread found the connection TLS, after (in its
 * own order, or through the application's hand-over of the session) the
 * word was written, so it sees that value or a later one, and a later one
 * names another session given the same fd (SSL_set_fd()), whose context
 * the ending session must not drop either, or is 0 once such a session
 * ended.  The word is only meaningful while the slot is TLS (every way
 * into CONN_F_TLS writes it), so a stale value after the fd went plain
 * again is never read. */

bool
ctxshim_conn_tls_end(int fd, const void *key)
{
	_Atomic uint64_t *w = conn_session_word(fd);
	uint64_t v = (uint64_t)(uintptr_t)key;

	/* The word is key's no more: a session that takes the fd over
	 * without naming itself is then not known, rather than taken for
	 * another one (whose end would not end it).  A compare-and-swap, so
	 * that a session given the fd meanwhile keeps it. */
	return !w || atomic_load_explicit(w, memory_order_relaxed) == 0 ||
	       (v && atomic_compare_exchange_strong_explicit(
			     w, &v, 0, memory_order_relaxed, memory_order_relaxed));
}

static struct ctxshim_conn *
conn_tls(int fd, const void *key)
{
	struct ctxshim_conn *c = ctxshim_conn_get(fd);
	uint8_t f;

	if (!c)
		return NULL;
	f = atomic_load_explicit(&c->flags, memory_order_relaxed);
	if (!(f & CONN_F_TRACKED))
		return NULL;
	/* Before the flag, which makes the word meaningful ("Sessions");
	 * on a TLS fd only a session that names itself replaces it. */
	if (!(f & CONN_F_TLS) || key)
		conn_session_store(fd, key);
	if (!(f & CONN_F_TLS)) {
		/* Whatever the scanner made of the ciphertext (it gave up at
		 * the first byte) is forgotten: the plaintext starts afresh.
		 * Called by the thread doing the fd's I/O, like a feed. */
		conn_release_all(c);
		conn_seq_begin(c);
		memset(&c->scan, 0, sizeof(c->scan));
		conn_flags_update(c,
				  CONN_F_REQ | CONN_F_HAS_CTX | CONN_F_PROMOTED |
					  CONN_F_OVERFLOW | CONN_F_LINK,
				  CONN_F_TLS);
		conn_seq_end(c);
		conn_set_answered(c, false);
		f = atomic_load_explicit(&c->flags, memory_order_relaxed);
	}
	conn_set_hot(fd, conn_hot_of(f));
	return c;
}

struct ctxshim_conn *
ctxshim_conn_tls(int fd)
{
	return conn_tls(fd, NULL);
}

struct ctxshim_conn *
ctxshim_conn_tls_session(int fd, const void *key)
{
	return conn_tls(fd, key);
}

/* ---- inherited connections ----
 *
 * A daemon started per connection -- by inetd/xinetd, tcpserver, socat,
 * or systemd socket activation with Accept=yes -- never calls accept():
 * its connection is there when it starts.  The constructor looks at
 *
 *  - fd 0: inetd's convention (and systemd's --inetd, StandardInput=
 *    socket), also tcpserver's and xinetd's;
 *  - fds 1 and 2 only as copies of a connection found elsewhere (the same
 *    socket: st_dev and st_ino of fstat()), never by themselves: a service
 *    started by systemd has its stdout and stderr connected to journald by
 *    AF_UNIX stream sockets, which would look like connections, and a
 *    write to one (a log line) would then count as I/O on another
 *    connection and clear the request's context;
 *  - fds 3 .. 3 + LISTEN_FDS - 1 when LISTEN_PID is our pid (sd_listen_fds
 *    (3), at most CONN_INHERIT_LISTEN_MAX of them): Accept=yes passes the
 *    connection there; Accept=no passes listening sockets, which do not
 *    qualify.
 *
 * A descriptor qualifies when it is a socket (S_ISSOCK), SOCK_STREAM, not
 * listening (SO_ACCEPTCONN 0), connected (getpeername() succeeds), of
 * AF_INET or AF_INET6, or of AF_UNIX with a name of its own (getsockname():
 * the server's end of a connection to a named listener, not a
 * socketpair(), which is how sshd and socat's EXEC connect a child's
 * stdio, nor a client's end).  Nothing tells a TCP server's end of a
 * connection from a client's, so a client-side TCP socket on stdin (an
 * ssh ProxyCommand's, a socat child's) qualifies too; it stays harmless: the
 * bytes it reads are no request head, the scanner gives up on them at once,
 * and then stdin and its copies stop being followed
 * (ctxshim_conn_inherited_give_up()); writes on it publish nothing, as no
 * request was read.  Only system calls here, once, at start-up;
 * CTXSHIM_INHERITED=0 turns it off. */

#define CONN_INHERIT_LISTEN_MAX  64
#define CONN_SD_LISTEN_FDS_START 3

/* fd 0's generation if start-up followed it (0: it did not). */
static uint32_t conn_stdin_gen;

static bool
conn_server_socket(int fd)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof(int), al = sizeof(ss);
	int type = 0, acc = 1, dom = 0;

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) != 0 || type != SOCK_STREAM)
		return false;
	l = sizeof(int);
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l) != 0 || acc != 0)
		return false;
	l = sizeof(int);
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) != 0 ||
	    (dom != AF_INET && dom != AF_INET6 && dom != AF_UNIX))
		return false;
	if (getpeername(fd, (struct sockaddr *)&ss, &al) != 0)
		return false;
	if (dom != AF_UNIX)
		return true;
	/* AF_UNIX: only the server's end of a connection to a named socket
	 * (its own name is the listener's path or abstract name).  The
	 * unnamed ends of socketpair()s -- how sshd, socat's EXEC and many
	 * supervisors connect a child's stdio -- and a client's connect()ed
	 * end (journald's stdout streams) are no server connections. */
	al = sizeof(ss);
	return getsockname(fd, (struct sockaddr *)&ss, &al) == 0 &&
	       al > offsetof(struct sockaddr_un, sun_path);
}

/* LISTEN_FDS when LISTEN_PID names us, else 0 (strict decimal). */
static unsigned
conn_listen_fds(void)
{
	const char *pid = secure_getenv("LISTEN_PID"), *n = secure_getenv("LISTEN_FDS");
	unsigned long p, k;
	char *end;

	if (!pid || !n || !*pid || !*n)
		return 0;
	errno = 0;
	p = strtoul(pid, &end, 10);
	if (errno || *end || p != (unsigned long)getpid())
		return 0;
	k = strtoul(n, &end, 10);
	if (errno || *end)
		return 0;
	if (k > CONN_INHERIT_LISTEN_MAX) {
		ctxshim_log("LISTEN_FDS=%lu: looking at the first %d only", k,
			    CONN_INHERIT_LISTEN_MAX);
		k = CONN_INHERIT_LISTEN_MAX;
	}
	return (unsigned)k;
}

void
ctxshim_conn_inherit(void)
{
	struct {
		int fd;
		dev_t dev;
		ino_t ino;
	} seen[3 + CONN_INHERIT_LISTEN_MAX];
	unsigned n_seen = 0, i, j, n_fds;
	int saved_errno = errno;

	if (!ctxshim_conn_tab.max_fds)
		return;
	n_fds = 3 + conn_listen_fds();
	for (i = 0; i < n_fds; i++) {
		int fd = i < 3 ? (int)i : CONN_SD_LISTEN_FDS_START + (int)(i - 3);
		struct stat st;
		bool copy = false;

		/* The shim's own log on a number: never a connection. */
		if (ctxshim_conn_hot(fd) != CONN_HOT_NONE || fstat(fd, &st) != 0 ||
		    !S_ISSOCK(st.st_mode))
			continue;
		for (j = 0; j < n_seen && !copy; j++)
			if (seen[j].dev == st.st_dev && seen[j].ino == st.st_ino) {
				ctxshim_conn_dup(seen[j].fd, fd);
				copy = true;
			}
		if (copy || fd == 1 || fd == 2 || !conn_server_socket(fd))
			continue;
		ctxshim_conn_accepted(fd);
		if (ctxshim_conn_hot(fd) != CONN_HOT_SCAN)
			continue;
		seen[n_seen].fd = fd;
		seen[n_seen].dev = st.st_dev;
		seen[n_seen].ino = st.st_ino;
		n_seen++;
		if (fd == 0)
			conn_stdin_gen = atomic_load_explicit(&ctxshim_conn_get(0)->gen,
							      memory_order_relaxed);
		ctxshim_log("following the inherited connection on fd %d", fd);
	}
	errno = saved_errno;
}

bool
ctxshim_conn_inherited_give_up(int fd, const struct ctxshim_conn *c)
{
	int members[CTXSHIM_CONN_RING_MAX + 1], cur = fd, next, hop, n = 0;

	struct ctxshim_conn *c0 = ctxshim_conn_get(0);
	bool in_ring = fd == 0;

	if (!conn_stdin_gen || !c0 ||
	    atomic_load_explicit(&c0->gen, memory_order_relaxed) != conn_stdin_gen ||
	    (atomic_load_explicit(&c->flags, memory_order_relaxed) & CONN_F_REQ))
		return false;
	/* fd is stdin or a copy of it (reads through fd 1 made fd 1 the
	 * leader) */
	for (hop = 0; hop < CTXSHIM_CONN_RING_MAX && !in_ring; hop++) {
		if (!conn_link_target(conn_link_load(cur), &next) || next == fd)
			break;
		in_ring = next == 0;
		cur = next;
	}
	if (!in_ring)
		return false;
	conn_stdin_gen = 0;
	cur = fd;
	/* Every member of the ring and fd itself, plain forgets (no state is
	 * handed on): the members first collected, as a reset moves their
	 * generations. */
	for (hop = 0; hop < CTXSHIM_CONN_RING_MAX; hop++) {
		if (!conn_link_target(conn_link_load(cur), &next) || next == fd)
			break;
		members[n++] = next;
		cur = next;
	}
	members[n++] = fd;
	for (hop = 0; hop < n; hop++) {
		conn_set_hot(members[hop], CONN_HOT_NONE);
		conn_link_store(members[hop], 0);
		conn_reset(ctxshim_conn_get(members[hop]), 0);
	}
	return true;
}

/* ---- connections without an fd ----
 *
 * A server may hold thousands of such sessions at once (h2o, a Boost.Asio
 * server with keep-alive clients), and every SSL_read and SSL_write of one
 * looks its slot up: the table is open-addressed by the session pointer,
 * as hooks/hook-ucontext.c's.  A key lives in one of the CONN_VIRT_WINDOW
 * slots from its hash and never moves until it is forgotten, so its slot
 * index, the connection's id, is stable; a lookup stops at its key
 * (usually the first slot it probes) and only a miss reads the whole
 * window, so a forget just zeroes the key: no tombstone.  A session is
 * used by one thread at a time, so its key cannot be added twice
 * concurrently; two sessions that race for one free slot settle it with
 * the claim's compare-and-swap.
 *
 * Twice as many slots as the sessions it is meant for: up to half full,
 * the keys of a server whose sessions come and go stay within a few slots
 * of their hash (a simulation of 4096 live sessions over malloc'd
 * pointers, replaced one at a time, put none more than 47 slots away);
 * fuller, more and more sessions find their window full and are not
 * followed.  The slots are .bss: a page costs memory only once a session
 * hashed to it (2 MiB for all, none in a server whose sessions all have
 * an fd, such as nginx: B8). */

#define CONN_VIRT_SHIFT  13 /* log2(CTXSHIM_CONN_VIRT_N) */
#define CONN_VIRT_WINDOW 64 /* a miss costs what a scan of the old table did */
_Static_assert(CTXSHIM_CONN_VIRT_N == 1u << CONN_VIRT_SHIFT, "a power of two");

static _Atomic uintptr_t conn_virt_key[CTXSHIM_CONN_VIRT_N];
static struct ctxshim_conn conn_virt[CTXSHIM_CONN_VIRT_N];

static inline unsigned
conn_virt_hash(uintptr_t k)
{
	/* Fibonacci hashing of the pointer without its malloc alignment
	 * bits, as hooks/hook-openssl.c's ossl_refs_hash(). */
	return (unsigned)(((uint64_t)(k >> 4) * 0x9e3779b97f4a7c15ull) >>
			  (64 - CONN_VIRT_SHIFT));
}

/* The rest of k's window (h: its hash) past its first slot, then a free
 * slot for k if create.  Out of line: the usual lookup (the key in its
 * first slot, below) then saves no register. */
static __attribute__((noinline)) struct ctxshim_conn *
conn_virt_probe(uintptr_t k, unsigned h, bool create, int *id)
{
	unsigned i, idx;

	for (i = 1; i < CONN_VIRT_WINDOW; i++) {
		idx = (h + i) & (CTXSHIM_CONN_VIRT_N - 1);
		if (atomic_load_explicit(&conn_virt_key[idx], memory_order_acquire) ==
		    k) {
			*id = CTXSHIM_CONN_VIRT_BASE + (int)idx;
			return &conn_virt[idx];
		}
	}
	if (!create)
		return NULL;
	for (i = 0; i < CONN_VIRT_WINDOW; i++) {
		uintptr_t expect = 0;
		_Atomic uintptr_t *w;

		idx = (h + i) & (CTXSHIM_CONN_VIRT_N - 1);
		w = &conn_virt_key[idx];
		/* A plain load first: a full window costs no locked
		 * instruction per slot on each read of a session left
		 * untracked. */
		if (atomic_load_explicit(w, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_strong_explicit(w, &expect, k,
							    memory_order_acq_rel,
							    memory_order_relaxed)) {
			conn_reset(&conn_virt[idx], CONN_F_TRACKED | CONN_F_TLS);
			*id = CTXSHIM_CONN_VIRT_BASE + (int)idx;
			return &conn_virt[idx];
		}
	}
	return NULL;
}

struct ctxshim_conn *
ctxshim_conn_virt(const void *key, bool create, int *id)
{
	uintptr_t k = (uintptr_t)key;
	unsigned h = conn_virt_hash(k);
	bool same;

	if (!k)
		return NULL;
	/* The usual case, and the only one without a call: the key in the
	 * first slot it may take. */
	same = atomic_load_explicit(&conn_virt_key[h], memory_order_acquire) == k;
	if (__builtin_expect(same, 1)) {
		*id = CTXSHIM_CONN_VIRT_BASE + (int)h;
		return &conn_virt[h];
	}
	return conn_virt_probe(k, h, create, id);
}

void
ctxshim_conn_virt_forget(const void *key)
{
	int id;
	struct ctxshim_conn *c = ctxshim_conn_virt(key, false, &id);

	if (!c)
		return;
	conn_reset(c, 0);
	atomic_store_explicit(&conn_virt_key[id - CTXSHIM_CONN_VIRT_BASE], 0,
			      memory_order_release);
}

struct ctxshim_conn *
ctxshim_conn_by_id(int id)
{
	if (id >= CTXSHIM_CONN_VIRT_BASE)
		return (unsigned)(id - CTXSHIM_CONN_VIRT_BASE) < CTXSHIM_CONN_VIRT_N
			       ? &conn_virt[id - CTXSHIM_CONN_VIRT_BASE]
			       : NULL;
	return ctxshim_conn_get(id);
}

/* ---- contexts ---- */

/* Copy s into the compact form.  Attributes first, in order, each whole
 * or not at all: one that does not fit (a long url.path) is left out and
 * the later, shorter ones (ctxshim.parent_span_id, the header attributes)
 * still get their room.  Then as much of tracestate as fits, cut after a
 * whole member.
 *
 * The cut list is what a library call propagates after a switch-back
 * (hook-curl.c sends the current context's tracestate).  With the default
 * CTXSHIM_PROPAGATE that call has a new parent-id, and dropping members
 * from the right is the truncation W3C prescribes.  With
 * CTXSHIM_PROPAGATE=transparent the parent-id goes out unchanged, and W3C
 * wants the list unchanged then too; dropping it all would change it just
 * as much and lose the leftmost members, those of the latest participants,
 * which the cut keeps: so both modes get the cut (ctxshim(7), LIMITS).
 * Out of line (conn-whole.h): the usual context takes
 * ctxshim_conn_compact_fast() there. */
void
ctxshim_conn_compact(struct ctxshim_conn_ctx *d, const struct ctxshim_ctx *s)
{
	size_t i = 0, alen = 0, tlen, room;

	memcpy(d->trace_id, s->trace_id, sizeof(d->trace_id));
	memcpy(d->span_id, s->span_id, sizeof(d->span_id));
	memcpy(d->parent_id, s->parent_id, sizeof(d->parent_id));
	d->flags = s->flags;
	d->has_parent = s->has_parent;

	if (s->attrs_len <= CTXSHIM_CONN_DATA_MAX) {
		alen = s->attrs_len;
		memcpy(d->data, s->attrs, alen);
	} else {
		/* Entries are key, length, value (thread-record.h). */
		while (i + 2 <= s->attrs_len) {
			size_t e = 2 + (size_t)s->attrs[i + 1];

			if (i + e > s->attrs_len)
				break;
			if (e <= CTXSHIM_CONN_DATA_MAX - alen) {
				memcpy(d->data + alen, s->attrs + i, e);
				alen += e;
			}
			i += e;
		}
	}
	d->attrs_len = (uint8_t)alen;

	room = CTXSHIM_CONN_DATA_MAX - alen;
	tlen = s->tracestate_len;
	if (tlen > room) {
		/* Dropping list members from the end is what W3C allows. */
		const char *comma = NULL;
		size_t k;

		for (k = room + 1; k-- > 0;)
			if (k < tlen && s->tracestate[k] == ',') {
				comma = s->tracestate + k;
				break;
			}
		tlen = comma ? (size_t)(comma - s->tracestate) : 0;
	}
	if (tlen)
		memcpy(d->data + alen, s->tracestate, tlen);
	d->tracestate_len = (uint8_t)tlen;
}

static void
conn_expand_ctx(const struct ctxshim_conn_ctx *s, struct ctxshim_ctx *d)
{
	size_t alen = s->attrs_len <= CTXSHIM_CONN_DATA_MAX ? s->attrs_len : 0;
	size_t tlen = s->tracestate_len <= CTXSHIM_CONN_DATA_MAX - alen
			      ? s->tracestate_len
			      : 0;

	memcpy(d->trace_id, s->trace_id, sizeof(d->trace_id));
	memcpy(d->span_id, s->span_id, sizeof(d->span_id));
	memcpy(d->parent_id, s->parent_id, sizeof(d->parent_id));
	d->flags = s->flags;
	d->has_parent = s->has_parent;
	d->attrs_len = (uint16_t)alen;
	d->tracestate_len = (uint16_t)tlen;
	memcpy(d->attrs, s->data, alen);
	memcpy(d->tracestate, s->data + alen, tlen);
}

bool
ctxshim_conn_expand(const struct ctxshim_conn *c, struct ctxshim_ctx *out)
{
	uint32_t s1 = atomic_load_explicit(&c->seq, memory_order_acquire), s2;

	if ((s1 & 1) ||
	    !(atomic_load_explicit(&c->flags, memory_order_relaxed) & CONN_F_HAS_CTX))
		return false;
	conn_expand_ctx(&c->ctx, out);
	atomic_thread_fence(memory_order_acquire);
	s2 = atomic_load_explicit(&c->seq, memory_order_relaxed);
	return s1 == s2;
}

bool
ctxshim_conn_request_ctx(int fd, struct ctxshim_ctx *out)
{
	struct ctxshim_conn *c = ctxshim_conn_get(fd);
	struct ctxshim_ctx tmp;
	unsigned tries;

	if (c &&
	    (atomic_load_explicit(&c->flags, memory_order_relaxed) & CONN_F_LINK) &&
	    ctxshim_conn_leader(fd, &c) < 0)
		return false;
	if (!c ||
	    !(atomic_load_explicit(&c->flags, memory_order_relaxed) & CONN_F_TRACKED) ||
	    !ctxshim_conn_live(c))
		return false;
	/* out is filled only on success. */
	for (tries = 0; tries < 4; tries++)
		if (ctxshim_conn_expand(c, &tmp)) {
			memcpy(out, &tmp, offsetof(struct ctxshim_ctx, attrs));
			memcpy(out->attrs, tmp.attrs, tmp.attrs_len);
			memcpy(out->tracestate, tmp.tracestate, tmp.tracestate_len);
			return true;
		}
	return false;
}

/* The request model of request-ctx.h, from what the scanner captured. */
static inline void
conn_build(struct ctxshim_ctx *full,
	   const struct http_scan_capture *cap,
	   unsigned flags)
{
	ctxshim_request_ctx_capture(full, cap, flags, ctxshim_conn_extra_index);
}

static bool
conn_captured(const struct http_scan_capture *cap, unsigned flags)
{
	return cap && (flags & (HTTP_SCAN_F_CAPTURED | HTTP_SCAN_F_OVERSIZED |
				HTTP_SCAN_F_CAPTURE_LOST)) == HTTP_SCAN_F_CAPTURED;
}

/* The context of a new current head when it cannot be built in the
 * thread's publication buffer: into a scratch context, compacted into the
 * slot.  Out of line so that the usual path does not reserve its 1.2 KiB
 * of stack. */
static __attribute__((noinline)) void
conn_build_scratch(struct ctxshim_conn_ctx *d,
		   const struct http_scan_capture *cap,
		   unsigned flags)
{
	struct ctxshim_ctx tmp;

	conn_build(&tmp, cap, flags);
	ctxshim_conn_compact(d, &tmp);
}

/* Take c's producer token ("Pipelining FIFO"): the tail with
 * CONN_TAIL_BUSY set by one compare-and-swap.  Returns the tail (an index
 * + 1, or 0), or CONN_TAIL_BUSY when another thread reading c holds the
 * token or changed the tail meanwhile: never waits for it, as the holder
 * may be the thread a signal handler interrupted.  Acquire: the previous
 * holder's tail, links and qpush. */
static inline unsigned
conn_fifo_own(struct ctxshim_conn *c)
{
	uint16_t t = atomic_load_explicit(&c->tail, memory_order_relaxed);

	if ((t & CONN_TAIL_BUSY) ||
	    !atomic_compare_exchange_strong_explicit(
		    &c->tail, &t, (uint16_t)(t | CONN_TAIL_BUSY), memory_order_acquire,
		    memory_order_relaxed))
		return CONN_TAIL_BUSY;
	return t;
}

/* The reader, holding c's token (conn_fifo_own() returned t), appends
 * entry idx (filled, next = 0) to c's FIFO and gives the token back with
 * the new tail.  Linking with a release compare-and-swap publishes the
 * entry's contents to the writer, which acquires the link; the
 * compare-and-swap fails only when the writer closed the tail (popped it
 * as the last entry): then the queue is empty, the writer stored
 * pending = 0 before closing (acquired here), and this thread frees the
 * stub and starts a new queue. */
static void
conn_fifo_push(struct ctxshim_conn *c, unsigned t, unsigned idx)
{
	c->qpush++;
	if (t && t <= CONN_POOL_N) {
		uint16_t expect = 0;

		if (atomic_compare_exchange_strong_explicit(
			    &conn_pool[t - 1].next, &expect, (uint16_t)idx,
			    memory_order_release, memory_order_acquire)) {
			atomic_store_explicit(&c->tail, (uint16_t)idx,
					      memory_order_release);
			return;
		}
		conn_pool_release(t);
	}
	atomic_store_explicit(&c->pending, (uint16_t)idx, memory_order_release);
	atomic_store_explicit(&c->tail, (uint16_t)idx, memory_order_release);
}

/* The flags of c (f, seen before its section began) for a new current
 * request: set (CONN_F_REQ, CONN_F_HAS_CTX if it has a context).  The
 * next request of a keep-alive connection leaves the flags as they are
 * (REQ and HAS_CTX set, PROMOTED clear): then no compare-and-swap.
 * Skipping it is safe because the only other writers of flags now are a
 * library hook setting CLAIMED (not a bit changed here, and not
 * overwritten by not writing) and the writing thread promoting a
 * pipelined request, which needs the current one unanswered while this
 * path needs it answered or absent; fd life-cycle changes do not overlap
 * a read.  (ctxshim_conn_feed_whole(), conn-whole.h, makes the same test
 * inline.) */
static inline __attribute__((always_inline)) void
conn_head_flags(struct ctxshim_conn *c, uint8_t f, uint8_t set)
{
	if ((uint8_t)((f & ~(CONN_F_HAS_CTX | CONN_F_PROMOTED)) | set) != f)
		ctxshim_conn_head_flags_set(c, set);
}

/* conn_head_flags() when they change: out of line, so that the usual
 * keep-alive request does not keep the flags' address for a
 * compare-and-swap it does not make. */
__attribute__((noinline, cold)) void
ctxshim_conn_head_flags_set(struct ctxshim_conn *c, uint8_t set)
{
	conn_flags_update(c, CONN_F_HAS_CTX | CONN_F_PROMOTED, set);
	/* A stub exists only after the writer promoted the last queued
	 * request, which set PROMOTED: so the first new head after it comes
	 * this way, and the usual keep-alive request (flags unchanged) does
	 * not even load tail.  Missing one here costs nothing but time: the
	 * next append or close frees the stub. */
	conn_fifo_reclaim(c);
}

/* A head became the current request of c (flags f, seen before).
 * Returns CONN_FEED_NEW, or CONN_FEED_FULL when the thread's publication
 * buffer (ctxshim_build_begin(), returned in *full) holds its whole
 * context, whatever the compact copy had to leave out. */
static inline __attribute__((always_inline)) int
conn_head_new(struct ctxshim_conn *c,
	      uint8_t f,
	      const struct http_scan_capture *cap,
	      unsigned flags,
	      bool captured,
	      struct ctxshim_ctx **full)
{
	bool built = false;

	/* The section makes seq/2 the new request's tag, which answered
	 * (the writers' byte) does not hold: the request becomes
	 * unanswered without this thread storing there. */
	conn_seq_begin(c);
	if (__builtin_expect(captured, 1)) {
		/* Built where it will be published, so that publishing copies
		 * nothing (B4).  A second new head in one read cannot happen
		 * (the first is not answered yet, so later ones queue), but
		 * would take the scratch path. */
		struct ctxshim_ctx *b = *full ? NULL : ctxshim_build_begin();

		if (__builtin_expect(b != NULL, 1)) {
			/* Published from b even when the compact copy is not
			 * whole: the slot's 178 bytes only serve later
			 * switch-backs and library hooks (ctxshim(7), LIMITS),
			 * never the request's first publication. */
			conn_build(b, cap, flags);
			ctxshim_conn_compact_fast(&c->ctx, b);
			*full = b;
			built = true;
		} else {
			conn_build_scratch(&c->ctx, cap, flags);
		}
	}
	conn_head_flags(c, f, (uint8_t)(CONN_F_REQ | (captured ? CONN_F_HAS_CTX : 0)));
	conn_seq_end(c);
	return built ? CONN_FEED_FULL : CONN_FEED_NEW;
}

/* A head completed.  Returns CONN_FEED_NONE if it was queued (or
 * dropped), else what conn_head_new() returns. */
static int
conn_head(struct ctxshim_conn *c,
	  const struct http_scan_capture *cap,
	  unsigned flags,
	  struct ctxshim_ctx **full)
{
	uint8_t f = atomic_load_explicit(&c->flags, memory_order_relaxed);
	bool captured = conn_captured(cap, flags);
	struct conn_pool_entry *e;
	unsigned idx, t;

	if (__builtin_expect(!(f & CONN_F_REQ) || ctxshim_conn_answered(c), 1))
		return conn_head_new(c, f, cap, flags, captured, full);

	/* Pipelined behind a request not answered yet: queue it.  Beyond the
	 * connection's bound, without a pool entry, or while another thread
	 * reading the connection queues one (its token: "Pipelining FIFO"),
	 * stop following the connection ("Bound" above): dropping only this
	 * request would put the responses out of step with the queue. */
	t = conn_fifo_own(c);
	if (t == CONN_TAIL_BUSY)
		goto stop;
	if ((uint8_t)(c->qpush -
		      atomic_load_explicit(&c->qpop, memory_order_relaxed)) >=
		    CONN_QUEUE_MAX ||
	    !(idx = conn_pool_claim())) {
		/* The token back, the tail as it was. */
		atomic_store_explicit(&c->tail, (uint16_t)t, memory_order_release);
		goto stop;
	}
	e = &conn_pool[idx - 1];
	atomic_store_explicit(&e->next, 0, memory_order_relaxed);
	e->has_ctx = captured;
	e->hold = 0;
	if (captured)
		conn_build_scratch(&e->u.ctx, cap, flags);
	conn_fifo_push(c, t, idx);
	return CONN_FEED_NONE;
stop:
	http_scan_stop(&c->scan);
	conn_flags_update(c, 0, CONN_F_OVERFLOW);
	return CONN_FEED_NONE;
}

/* ctxshim_conn_feed() past the usual read: the scanner's feed loop, with
 * a pool entry as the capture of each head (conn-whole.h). */
int
ctxshim_conn_feed_loop(struct ctxshim_conn *c,
		       const void *buf,
		       size_t len,
		       struct ctxshim_ctx **full)
{
	const uint8_t *p = buf;
	size_t off = 0, n;
	int became = CONN_FEED_NONE;

	while (off < len && !http_scan_gave_up(&c->scan)) {
		unsigned held = c->cap, idx = held;
		struct http_scan_capture *cap;
		enum http_scan_status r;

		/* One pool entry per read that scans head bytes; a head split
		 * across reads keeps its entry until it completes. */
		if (!idx)
			idx = conn_pool_claim();
		cap = idx ? &conn_pool[idx - 1].u.cap : NULL;
		n = 0;
		r = http_scan_feed(&c->scan, &ctxshim_conn_scan_cfg, cap, p + off,
				   len - off, &n);
		off += n;
		if (r == HTTP_SCAN_MORE && http_scan_in_head(&c->scan)) {
			uint16_t none = 0;

			/* Head split across reads (all bytes consumed): keep
			 * its capture, stored with a compare-and-swap: a
			 * second thread reading the socket at once (which
			 * conn.h rules out, but an application may do) may
			 * store its own, and the loser's entry is freed, not
			 * lost for good. */
			if (!held && idx &&
			    !__atomic_compare_exchange_n(&c->cap, &none, (uint16_t)idx,
							 false, __ATOMIC_SEQ_CST,
							 __ATOMIC_RELAXED))
				conn_pool_release(idx);
			break;
		}
		if (__builtin_expect(r == HTTP_SCAN_HEAD, 1)) {
			int h = conn_head(c, cap, http_scan_flags(&c->scan), full);

			if (__builtin_expect(h != CONN_FEED_NONE, 1))
				became = h;
		}
		/* The head that held the pool entry is over (done, or it never
		 * completes: the scanner gave up).  An entry of this read's
		 * alone is freed; one c held is taken from it first, so that
		 * of two threads (as above) only one frees it. */
		if (!held)
			conn_pool_release(idx);
		else if (conn_cap_take_own(c, held))
			conn_pool_release(held);
		if (r == HTTP_SCAN_GAVE_UP || (r != HTTP_SCAN_HEAD && n == 0))
			break;
	}
	return became;
}

/* The socket level's read hooks on nginx's path take the usual read
 * inline (conn-whole.h) and call ctxshim_conn_feed_loop() for the rest;
 * this serves the other read calls. */
int
ctxshim_conn_feed(struct ctxshim_conn *c,
		  const void *buf,
		  size_t len,
		  struct ctxshim_ctx **full)
{
	struct ctxshim_ctx *b;

	/* The usual read first; anything else it leaves untouched for the
	 * loop. */
	if (!*full && (b = ctxshim_conn_feed_whole(c, buf, len)) != NULL) {
		*full = b;
		return CONN_FEED_FULL;
	}
	return ctxshim_conn_feed_loop(c, buf, len, full);
}

/* ---- FastCGI ------------------------------------------------------------
 *
 * A FastCGI server that reads its records itself (php-fpm: read() of the
 * accepted socket, no libfcgi for hooks/hook-fcgi.c to see) has its
 * connection's first bytes rejected by the HTTP scanner at once: version
 * 1, FCGI_BEGIN_REQUEST.  hooks/hook-socket.c then asks for the
 * connection to be followed as FastCGI (ctxshim_conn_fcgi_start()), off
 * the HTTP path: the scanner stays given up (reason "fastcgi"), and the
 * records go to a FastCGI scanner (proc-context/fcgi-scan.h) kept in a
 * pool entry (c->cap, which a given-up scanner leaves free) until the
 * connection ends: one in their zone ("Zones" above;
 * with none free the connection is not followed).  A request becomes
 * current when its parameters end, with the context of the CGI model
 * (preload/request-cgi.c), which libfcgi's requests and CGI programs get
 * too; from there it is a request of the socket level like any:
 * answered by the first write (the response's FCGI_STDOUT, or its
 * FCGI_END_REQUEST), cleared by the next read, a wait or the close.  A
 * request whose parameters end while the previous one is not answered (a
 * multiplexing client's; php-fpm and nginx do not multiplex) replaces it:
 * nothing is queued. */

static const char *
conn_fcgi_lookup(const char *name, void *st)
{
	return fcgi_scan_get(st, &conn_fcgi_cfg, name);
}

/* Out of line: the builder's 2 KiB target buffer and a scratch context
 * stay off the callers' frames. */
static __attribute__((noinline)) void
conn_fcgi_scratch(struct ctxshim_conn_ctx *d, struct fcgi_scan *st)
{
	struct ctxshim_ctx tmp;

	ctxshim_request_ctx_cgi(&tmp, conn_fcgi_lookup, st);
	ctxshim_conn_compact(d, &tmp);
}

/* The followed request's parameters ended: it becomes c's current
 * request, as a head does in conn_head_new(). */
static int
conn_fcgi_request(struct ctxshim_conn *c,
		  struct fcgi_scan *st,
		  struct ctxshim_ctx **full)
{
	uint8_t f = atomic_load_explicit(&c->flags, memory_order_relaxed);
	/* The previous request not answered (a multiplexing client's): this
	 * one replaces it (conn_replaced()). */
	uint8_t was = atomic_load_explicit(&c->answered, memory_order_relaxed);
	bool replaces = !ctxshim_conn_answered(c);
	struct ctxshim_ctx *b;

	conn_seq_begin(c);
	b = *full ? NULL : ctxshim_build_begin();
	if (b) {
		ctxshim_request_ctx_cgi(b, conn_fcgi_lookup, st);
		ctxshim_conn_compact_fast(&c->ctx, b);
		*full = b;
	} else {
		conn_fcgi_scratch(&c->ctx, st);
	}
	conn_head_flags(c, f, CONN_F_REQ | CONN_F_HAS_CTX);
	conn_seq_end(c);
	if (replaces)
		conn_replaced(c, was);
	return b ? CONN_FEED_FULL : CONN_FEED_NEW;
}

int
ctxshim_conn_fcgi_start(struct ctxshim_conn *c)
{
	unsigned idx;

	if (__atomic_load_n(&c->cap, __ATOMIC_RELAXED))
		return CONN_START_NO;
	if (!(idx = conn_pool_claim_long()))
		return CONN_START_POOL_FULL;
	fcgi_scan_reset(&conn_pool[idx - 1].u.fcgi);
	/* A compare-and-swap, as ctxshim_conn_h2_start(): two reads of one
	 * socket at once can both find a first record ("Two readers"). */
	if (!__atomic_compare_exchange_n(&c->cap, &(uint16_t){0}, (uint16_t)idx, false,
					 __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
		conn_pool_release(idx);
		return CONN_START_NO;
	}
	http_scan_stop_fastcgi(&c->scan);
	return CONN_START_OK;
}

int
ctxshim_conn_fcgi_feed(struct ctxshim_conn *c,
		       const void *buf,
		       size_t len,
		       struct ctxshim_ctx **full)
{
	/* The generation first: a close on another thread bumps it before
	 * it takes c->cap (conn_reset()), both sequentially consistent. */
	uint32_t gen = atomic_load_explicit(&c->gen, memory_order_seq_cst);
	unsigned idx = __atomic_load_n(&c->cap, __ATOMIC_SEQ_CST);
	const uint8_t *p = buf;
	struct fcgi_scan *st;
	size_t off = 0, n;
	int became = CONN_FEED_NONE;

	if (!idx || idx > CONN_POOL_N)
		return CONN_FEED_NONE;
	st = &conn_pool[idx - 1].u.fcgi;
	while (off < len) {
		enum fcgi_scan_status r =
			fcgi_scan_feed(st, &conn_fcgi_cfg, p + off, len - off, &n);

		off += n;
		/* A feed that outlived its connection (closed on another
		 * thread: "Two readers") stops at its next result: the fd
		 * may be a new connection already, which it must neither
		 * give a request nor stop, and idx another connection's
		 * scanner.  Both tests: a close bumps the generation before
		 * it takes c->cap, so a feed that began in between has the
		 * new generation and the old entry. */
		if (atomic_load_explicit(&c->gen, memory_order_seq_cst) != gen ||
		    __atomic_load_n(&c->cap, __ATOMIC_SEQ_CST) != idx)
			break;
		if (r == FCGI_SCAN_PARAMS_END) {
			became = conn_fcgi_request(c, st, full);
		} else if (r == FCGI_SCAN_GAVE_UP) {
			/* Out of step, or not FastCGI after all: stop
			 * following the connection (reason "caller").  The
			 * entry taken back with a compare-and-swap: another
			 * reader of the socket may give up at once (the entry
			 * freed twice, the second time under its next owner),
			 * or a close have taken it. */
			if (conn_cap_take_own(c, idx)) {
				conn_pool_release(idx);
				http_scan_stop(&c->scan);
			}
			break;
		} else {
			break;
		}
	}
	return became;
}

/* ---- HTTP/2 -------------------------------------------------------------
 *
 * A server with HTTP/2 code of its own (nginx's `listen ... http2`,
 * lighttpd's, h2o's: no nghttp2 for hooks/hook-nghttp2.c to see) reads
 * the client's connection preface, "PRI * HTTP/2.0", where the HTTP
 * scanner expects a request line: it gives up at once (reason "http2"),
 * and hooks/hook-socket.c asks for the connection to be followed as
 * HTTP/2 (ctxshim_conn_h2_start()) when that was its first request, over
 * TLS (the plaintext of the TLS hooks, nginx's usual case with ALPN) or
 * in clear (h2c with prior knowledge).  A connection upgraded from
 * HTTP/1.1 ("Upgrade: h2c") had a request before: it is followed from the
 * server's 101 on ("Upgrade: h2c" at the end of this file), unless the
 * process has an nghttp2 server session (hook-nghttp2.c takes its stream
 * 1 from that head, and the connection stays as it was).  The frames go to
 * an HTTP/2 scanner (proc-context/h2-scan.h) kept in a pool entry (c->cap,
 * which a given-up scanner leaves free, in their zone: "Zones"
 * above) until the connection ends; it
 * decodes every header block (HPACK's dynamic table must stay in step)
 * and reports the configured fields of each block that opens a new
 * client stream.  Those are collected, field by field, into the request
 * model hooks/hook-nghttp2.c uses (hooks/hook-h2.h), so that a request
 * gets the same context whichever of the two follows it; it lives in a
 * second pool entry (its index kept in the scanner's entry, h2_req)
 * from the block's first reported field to its end: one entry per
 * connection, two while a header block arrives split across reads.
 *
 * A read that ends the header block of exactly one new request makes it
 * the connection's current request, with a context built as a head's
 * (a new span-id, a child of its traceparent): from there it is a
 * request of the socket level like a FastCGI one -- answered by a write
 * (the first one that carries its stream's HEADERS or RST_STREAM frame:
 * "HTTP/2 answers" at conn_h2_written()), cleared by the next read that
 * brings none, a wait or the close, upstreams followed; the client's
 * RST_STREAM of its stream ends it, context and all
 * (conn_h2_cancelled()).  One that ends two or more (or a read that brings
 * one while the thread still shows the connection's previous request,
 * unanswered: the server reads on before it handles what it read, as
 * nginx's TLS reads do, record after record, until its buffer is full)
 * is ambiguous: a server runs each request's handler as it parses the
 * frames, and no hook sees which one runs, so the connection gets a
 * current request without a context (CONN_FEED_SEVERAL; event reason
 * "h2-several"): when in doubt, nothing is shown.  A read that took the
 * previous request up again (the thread had let it go: a wait, another
 * connection; hooks/hook-socket.c, sk_h2_feed()) is not on top of it:
 * that request waits for something else, and the one the read brings
 * becomes current as usual.  Server push does not
 * apply (no request comes in for a pushed stream).
 *
 * Stopped for good (CONN_FEED_H2_STOP; "h2-stop"), its current request
 * left without a context and its entries freed, when the scanner gives
 * up (a frame or header block it cannot follow) or the process made an
 * nghttp2 server session: a server that hands its frames to nghttp2
 * (nghttpd, Apache's mod_http2, both with nghttp2_session_mem_recv(),
 * which names no connection) gets its context per stream from that hook,
 * and never a second one from here for the same request.  One that read
 * the connection's first frames before it made the session (looking for
 * the preface) had their request followed here: the thread shows it, and
 * the session's stream of that id (kept in the scanner's entry, hold)
 * takes it over, the same span (hooks/hook-nghttp2.c,
 * nh_stream_adopt()).
 *
 * Field values: one the scanner reports H2_SCAN_F_UNKNOWN (an indexed
 * entry whose value it did not keep) is left out, but for a traceparent,
 * whose request then gets no context (a new trace is not the client's);
 * one H2_SCAN_F_CUT
 * (longer than H2_SCAN_VALUE_MAX) is passed with its first bytes, and
 * hook_h2_req_field() decides as for any long value (a method over 20
 * bytes is "_OTHER" without an original, a path is kept to 256 bytes, a
 * traceparent that long is invalid); but a tracestate field cut or
 * unknown drops the whole list (its members would be wrong or missing:
 * W3C, better none than a wrong one).
 *
 * Two readers.  An application may read one connection from two threads
 * at once (legal, if unusual for HTTP/2), or close it on one while a read
 * on another is still being fed.  Their results are meaningless (each
 * thread has part of the bytes: the scanner gives up, or a request gets
 * no context or a wrong one), but no pool entry may be lost or freed
 * twice, and they used to be: both feeds claimed a request entry for the
 * same block and stored it over the other's, both stops freed the
 * scanner's entry (the second time under its next owner), and a feed that
 * outlived a close claimed a request entry into the freed scanner entry,
 * which its next claim as a scanner zeroed (test-preload-pipeline.c,
 * "readers": in 2000 connections, 0-3 entries lost with two readers,
 * 28-48 with one stopping the scanner during the other's feed, 21-146
 * with a close during a feed).  So each index that two threads may write
 * has its writes decide who owns it, with no lock: c->cap is let go with
 * an exchange (a close, a MSG_TRUNC read: conn_cap_take()) or a
 * compare-and-swap from the feed's own entry (a stop: conn_cap_take_own(),
 * which also keeps a feed that outlived the connection off the
 * connection now on the fd) and set by ctxshim_conn_h2_start() with a
 * compare-and-swap from 0; the request entry is stored with a
 * compare-and-swap from 0 (conn_h2_field()), checked against c->cap after
 * it, and freed with an exchange (conn_h2_release()).  What remains, and
 * cannot be closed without a lock: a feed may still write into entries
 * freed under it until it sees c->cap change (it checks at each step),
 * within their bounds (the scanner bounds its state, hook_h2_req_field()
 * its request), so another connection's scanner or request may come out
 * wrong, never leak: a connection that took such an entry (a FastCGI or
 * HTTP/2 connection started next takes the lowest free one) may get no
 * context, or give up on its own next bytes, as on any it cannot follow,
 * and then let go of the entry it alone holds (a compare-and-swap of its
 * own c->cap; test-preload-pipeline.c, fcgi-close: under ASan+UBSan 2 runs
 * in 400, at the new connection's first record).
 * An HTTP/1 head split across reads is kept the same
 * way (ctxshim_conn_feed_loop(): c->cap stored with a compare-and-swap
 * from 0, taken back with conn_cap_take_own(); two readers lost 4-11
 * entries in 3000 connections), and so is a FastCGI connection's
 * ("FastCGI": ctxshim_conn_fcgi_start() stores c->cap with a
 * compare-and-swap from 0, a scanner that gives up takes it back with
 * conn_cap_take_own(); two readers lost 1-3 entries in 3000 connections,
 * and a feed that outlived a close freed the entry under the new
 * connection that took it: an entry with two owners in 500).  A FastCGI
 * feed also stops at its next result once c's generation or c->cap changed
 * (a close), so that it gives the fd's next connection no request; a close
 * bumps the generation before it takes c->cap, so neither test alone sees
 * every close.  The other stores of c->cap decide the same way: an h2c
 * upgrade's (ctxshim_conn_h2_upgrade(), a compare-and-swap from 0) and a
 * leader's hand-over to a copy (conn_move(), an exchange).  The pipelining
 * FIFO has one producer by design ("Pipelining FIFO"): two readers that
 * both queue pipelined heads take turns through its producer token, and
 * one that finds it taken stops the scanner as for a head past the bound
 * (the connection's later requests get no context; both used to append,
 * and lost 1021-1023 of the pool's 1024 entries in 2000 connections of 16
 * unanswered heads each, test h1-queue).  A signal handler
 * reading the connection in the middle of a read's feed on the same thread
 * is not fed at all (the thread's busy flag, hooks/hook-socket.c), so it
 * never races a feed. */

/* Free the request entry the HTTP/2 scanner's entry cap names, if any
 * (cap: any c->cap; only an HTTP/2 scanner's entry names one).  Taken
 * with an exchange: two threads feeding one connection at once (an
 * application reading one socket from two threads) may both end a block
 * or stop the connection, and the entry must be freed once (a second
 * release frees it under whoever claimed it in between).  The first load
 * is sequentially consistent for conn_h2_field(): a claim it misses
 * sees the connection let go of cap and takes its entry back. */
static __attribute__((noinline, cold)) void
conn_h2_release(unsigned cap)
{
	struct conn_pool_entry *e;

	if (!cap || cap > CONN_POOL_N)
		return;
	e = &conn_pool[cap - 1];
	if (__builtin_expect(__atomic_load_n(&e->h2_req, __ATOMIC_SEQ_CST) == 0 &&
				     !e->h2_lost,
			     1))
		return;
	conn_pool_release(__atomic_exchange_n(&e->h2_req, 0, __ATOMIC_SEQ_CST));
	e->h2_lost = false;
}

/* A scanner's entry just claimed: a request entry it still names was
 * claimed by a feed that outlived the entry's last connection and found
 * its connection on this entry again (conn_h2_field()): it is nobody's,
 * free it (else it is lost for good). */
static inline void
conn_h2_req_stale(struct conn_pool_entry *e)
{
	conn_pool_release(__atomic_exchange_n(&e->h2_req, 0, __ATOMIC_SEQ_CST));
}

/* Free what conn_cap_take() took: the entry, and the request entry an
 * HTTP/2 scanner's names. */
static void
conn_cap_free(unsigned cap)
{
	if (__builtin_expect(cap != 0, 0))
		conn_h2_release(cap);
	conn_pool_release(cap);
}

static int
conn_h2_stop(struct ctxshim_conn *c, unsigned idx, struct ctxshim_ctx **full);

bool
ctxshim_conn_h2_upgraded(const struct ctxshim_conn *c)
{
	/* c->cap loaded once: a stop or a close on another thread may zero
	 * it between two loads (conn_h2_written()). */
	unsigned cap = __atomic_load_n(&c->cap, __ATOMIC_RELAXED);

	return ctxshim_conn_h2(c) && cap && cap <= CONN_POOL_N &&
	       conn_pool[cap - 1].h2_up;
}

/* Upgrade candidates (conn.h).  A table of their own, not a bit of the
 * connection's: its 256 bytes have none to spare (CTXSHIM_CONN_SLOT_SIZE,
 * every flag taken), and a candidate lasts from the upgrade call to the
 * session's first frame, so that few are pending at once.  A slot holds
 * (fd + 1) << 32 | gen, 0 when free; its session's thread takes and
 * gives it back, the writing thread of any connection reads the table (a
 * compare per slot, and none while no slot is taken: the usual case).
 *
 * A candidate is a connection, not a descriptor: the server may read it
 * through a copy (dup() and the rest: "Copies"), which then holds its
 * state, and the writes that ask are its leader's.  Keyed by the
 * descriptor the upgrade request was published under alone, the
 * candidate stopped matching as soon as a read moved the state to
 * another descriptor, and the response of stream 1 written in the
 * window showed no context.  So a key matches fd of generation gen when
 * it names fd or any member of fd's ring: the members keep their
 * generations when the state moves between them, and a ring is walked
 * in at most CTXSHIM_CONN_RING_MAX hops (only for a write that is no
 * candidate's own and while a slot is taken, no allocation, no lock).
 * When the descriptor a key names is closed (or replaced by dup2()), the
 * key goes on to the next member of its ring (conn_h2_cand_pass(), from
 * conn_ring_leave()): the connection carries on there, and the session's
 * first frame confirms it there (ctxshim_conn_h2_candidate_get()).  A
 * candidate not in a ring dies with its descriptor, as before. */
static _Atomic uint64_t conn_h2_cand[CTXSHIM_CONN_H2_CAND_N];
static _Atomic unsigned conn_h2_cand_n; /* slots taken */

static uint64_t
conn_h2_cand_key(int fd, uint32_t gen)
{
	return (uint64_t)(uint32_t)(fd + 1) << 32 | gen;
}

__attribute__((cold)) unsigned
ctxshim_conn_h2_candidate_add(int fd, uint32_t gen)
{
	uint64_t key = conn_h2_cand_key(fd, gen);
	unsigned i;

	if (fd < 0)
		return 0;
	for (i = 0; i < CTXSHIM_CONN_H2_CAND_N; i++) {
		uint64_t none = 0;

		if (atomic_compare_exchange_strong_explicit(&conn_h2_cand[i], &none,
							    key, memory_order_relaxed,
							    memory_order_relaxed)) {
			/* Release: a reader that sees the count sees the
			 * slot. */
			atomic_fetch_add_explicit(&conn_h2_cand_n, 1,
						  memory_order_release);
			return i + 1;
		}
	}
	return 0;
}

__attribute__((cold)) void
ctxshim_conn_h2_candidate_remove(unsigned slot)
{
	if (!slot || slot > CTXSHIM_CONN_H2_CAND_N ||
	    !atomic_exchange_explicit(&conn_h2_cand[slot - 1], 0, memory_order_relaxed))
		return;
	atomic_fetch_sub_explicit(&conn_h2_cand_n, 1, memory_order_relaxed);
}

__attribute__((cold)) bool
ctxshim_conn_h2_candidate_get(unsigned slot, int *fd, uint32_t *gen)
{
	uint64_t key;

	if (!slot || slot > CTXSHIM_CONN_H2_CAND_N)
		return false;
	key = atomic_load_explicit(&conn_h2_cand[slot - 1], memory_order_relaxed);
	if (!key)
		return false;
	*fd = (int)(uint32_t)(key >> 32) - 1;
	*gen = (uint32_t)key;
	return true;
}

/* Is key in the table? */
static bool
conn_h2_cand_has(uint64_t key)
{
	unsigned i;

	for (i = 0; i < CTXSHIM_CONN_H2_CAND_N; i++)
		if (atomic_load_explicit(&conn_h2_cand[i], memory_order_relaxed) == key)
			return true;
	return false;
}

__attribute__((cold)) bool
ctxshim_conn_h2_candidate(int fd, uint32_t gen)
{
	int cur = fd, next, hop;

	/* fd -1 with gen 0 is key 0, which every free slot holds */
	if (fd < 0 || !atomic_load_explicit(&conn_h2_cand_n, memory_order_acquire))
		return false;
	if (conn_h2_cand_has(conn_h2_cand_key(fd, gen)))
		return true;
	/* The other descriptors of its connection (see above); a link that
	 * is dead ends the walk, as in ctxshim_conn_leader(). */
	for (hop = 0; hop < CTXSHIM_CONN_RING_MAX; hop++) {
		struct ctxshim_conn *t = conn_link_target(conn_link_load(cur), &next);

		if (!t || next == fd)
			return false;
		if (conn_h2_cand_has(conn_h2_cand_key(
			    next, atomic_load_explicit(&t->gen, memory_order_relaxed))))
			return true;
		cur = next;
	}
	return false;
}

/* fd of generation gen leaves its ring, whose member nfd (of generation
 * ngen) carries its connection on: a candidate named by fd is nfd's now.
 * A compare-and-swap per slot, so that a session that gives its slot
 * back meanwhile keeps it given back.  Not a read path: close, dup2. */
static void
conn_h2_cand_pass(int fd, uint32_t gen, int nfd, uint32_t ngen)
{
	uint64_t key = conn_h2_cand_key(fd, gen);
	unsigned i;

	if (!atomic_load_explicit(&conn_h2_cand_n, memory_order_acquire))
		return;
	for (i = 0; i < CTXSHIM_CONN_H2_CAND_N; i++) {
		uint64_t k = key;

		(void)atomic_compare_exchange_strong_explicit(
			&conn_h2_cand[i], &k, conn_h2_cand_key(nfd, ngen),
			memory_order_relaxed, memory_order_relaxed);
	}
}

/* An upgraded connection ("Upgrade: h2c" below) in a process that made an
 * nghttp2 server session: as it was before it was followed -- the upgrade
 * request answered by the 101, the scanner given up on the preface
 * (ctxshim_conn_h2_preface() confirms the upgrade to hooks/hook-nghttp2.c,
 * which takes stream 1 from the head), its entries freed.  Except when
 * the frame walk saw the current request answered (stream 1's HEADERS,
 * in the 101's write of a server with HTTP/2 code of its own): that
 * request has ended, and its context goes, as at conn_h2_stop().  Kept,
 * it stayed "continued" where a session takes the connection for its
 * upgrade (a scanner given up on the preface of an upgrade candidate:
 * hooks/hook-socket.c, sk_write_continues()), and every later write on
 * the connection, whichever stream it carried, showed the ended request
 * until the session's first frame.  A session that does take the
 * connection over gets it before stream 1 is answered (that response is
 * nghttp2's), as before. */
static __attribute__((noinline, cold)) void
conn_h2_undo(struct ctxshim_conn *c, unsigned idx)
{
	/* Another thread let go of it first (conn_h2_stop()). */
	if (!conn_cap_take_own(c, idx))
		return;
	if (ctxshim_conn_answered(c)) {
		conn_seq_begin(c);
		conn_flags_update(c, CONN_F_HAS_CTX, 0);
		conn_seq_end(c);
	}
	conn_flags_update(c, CONN_F_OVERFLOW, 0);
	conn_cap_free(idx);
	conn_set_answered(c, true);
}

__attribute__((cold)) uint32_t
ctxshim_conn_h2_library(struct ctxshim_conn *c)
{
	struct ctxshim_ctx *full = NULL;
	uint32_t stream = 0;

	if (!atomic_load_explicit(&conn_h2_lib, memory_order_relaxed))
		atomic_store_explicit(&conn_h2_lib, true, memory_order_relaxed);
	if (c && ctxshim_conn_h2(c)) {
		unsigned idx = __atomic_load_n(&c->cap, __ATOMIC_RELAXED);

		if (!idx || idx > CONN_POOL_N)
			return 0;
		if (conn_pool[idx - 1].h2_up) {
			conn_h2_undo(c, idx);
			return 0;
		}
		stream = (uint32_t)conn_pool[idx - 1].hold;
		(void)conn_h2_stop(c, idx, &full);
	}
	return stream;
}

__attribute__((cold)) int
ctxshim_conn_h2_start(struct ctxshim_conn *c, unsigned preface_seen)
{
	unsigned idx;

	if (c->cap || atomic_load_explicit(&conn_h2_lib, memory_order_relaxed))
		return CONN_START_NO;
	if (!(idx = conn_pool_claim_long()))
		return CONN_START_POOL_FULL;
	h2_scan_reset(&conn_pool[idx - 1].u.h2.scan, preface_seen);
	h2_out_reset(&conn_pool[idx - 1].u.h2.out);
	conn_h2_req_stale(&conn_pool[idx - 1]);
	conn_pool[idx - 1].h2_lost = false;
	conn_pool[idx - 1].h2_up = false;
	conn_pool[idx - 1].hold = 0;
	/* A compare-and-swap: two reads of one socket at once can both
	 * find the preface (the first entry would be lost for good). */
	if (!__atomic_compare_exchange_n(&c->cap, &(uint16_t){0}, (uint16_t)idx, false,
					 __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
		conn_pool_release(idx);
		return CONN_START_NO;
	}
	/* The HTTP scanner stays given up on the preface (reason "http2"):
	 * that and c->cap make the connection one followed as HTTP/2
	 * (ctxshim_conn_h2()).  CONN_F_OVERFLOW (never set otherwise on a
	 * connection without a queue of heads) takes its writes off the
	 * inline path of ctxshim_conn_responded() to the frame walk
	 * (conn_h2_written()), at no cost to an HTTP/1 write. */
	conn_flags_update(c, 0, CONN_F_OVERFLOW);
	return CONN_START_OK;
}

/* The scanner reported a field of the new request's block: into its
 * request (e's request entry, claimed at its first field). */
static void
conn_h2_field(struct ctxshim_conn *c, unsigned own, const struct h2_scan *st)
{
	struct conn_pool_entry *e = &conn_pool[own - 1];
	struct h2_scan_field f;
	struct hook_h2_req *q;
	unsigned k, r;

	if (e->h2_lost)
		return;
	h2_scan_field(st, &f);
	if ((int)f.k == conn_h2_k_traceparent && (f.flags & H2_SCAN_F_UNKNOWN)) {
		/* The client sent a traceparent we cannot read (an entry of
		 * its dynamic table whose value the model did not keep): a
		 * new trace would be one it did not send.  No context, as a
		 * head that lost its capture. */
		e->h2_lost = true;
		return;
	}
	if (!__atomic_load_n(&e->h2_req, __ATOMIC_RELAXED)) {
		unsigned idx = conn_pool_claim_block();
		uint16_t none = 0;

		if (!idx) {
			/* Its request gets no context (as a head's without a
			 * capture). */
			e->h2_lost = true;
			return;
		}
		hook_h2_req_init(&conn_pool[idx - 1].u.h2req);
		/* Stored with a compare-and-swap, then c checked to still
		 * hold e: two threads reading one socket at once both claim
		 * here (the loser frees its entry and uses the winner's), and
		 * a close or a stop on another thread (conn_cap_take(),
		 * conn_h2_release()) may have let go of e meanwhile: either
		 * its release saw this store, or this sees c->cap changed
		 * (both sequentially consistent) and takes the entry back.
		 * Else the entry stayed named by a freed one, lost for good
		 * (conn_h2_req_stale() catches the one case left: the fd
		 * reused, and the entry claimed again for it). */
		if (!__atomic_compare_exchange_n(&e->h2_req, &none, (uint16_t)idx,
						 false, __ATOMIC_SEQ_CST,
						 __ATOMIC_RELAXED)) {
			conn_pool_release(idx);
		} else if (__atomic_load_n(&c->cap, __ATOMIC_SEQ_CST) != own) {
			none = (uint16_t)idx;
			if (__atomic_compare_exchange_n(&e->h2_req, &none, 0, false,
							__ATOMIC_SEQ_CST,
							__ATOMIC_RELAXED))
				conn_pool_release(idx);
			return;
		}
	}
	r = __atomic_load_n(&e->h2_req, __ATOMIC_RELAXED);
	if (!r || r > CONN_POOL_N)
		return;
	q = &conn_pool[r - 1].u.h2req;
	k = f.k;
	if (k >= conn_h2_cfg.n || k >= H2_SCAN_KEEP_MAX)
		return;
	if ((int)k == conn_h2_k_tracestate &&
	    (f.flags & (H2_SCAN_F_CUT | H2_SCAN_F_UNKNOWN))) {
		/* The list is dropped whole (hook_h2_req_view() leaves out a
		 * list marked bad, as one with an invalid member). */
		q->has_ts = true;
		q->ts_bad = true;
		return;
	}
	if ((f.flags & H2_SCAN_F_UNKNOWN) || (!f.value && f.len))
		return;
	hook_h2_req_field(q, conn_h2_kind[k], f.value, f.len);
}

/* The context of request q (NULL: one without a reported field). */
static void
conn_h2_build(struct ctxshim_ctx *b, const struct hook_h2_req *q)
{
	struct hook_h2_req none;
	struct hook_h2_view v;

	if (!q) {
		hook_h2_req_init(&none);
		q = &none;
	}
	hook_h2_req_view(q, &v);
	ctxshim_request_ctx(b, &v.r);
}

/* Out of line: a scratch context stays off the callers' frames. */
static __attribute__((noinline, cold)) void
conn_h2_scratch(struct ctxshim_conn_ctx *d, const struct hook_h2_req *q)
{
	struct ctxshim_ctx tmp;

	conn_h2_build(&tmp, q);
	ctxshim_conn_compact(d, &tmp);
}

/* The block of a new request ended (e: the scanner's entry): with
 * several in one read, none is current ("HTTP/2" above); else it becomes
 * c's current request, as a head does in conn_head_new(), with a context
 * unless its request entry was lost.  Its request entry is freed. */
static int
conn_h2_request(struct ctxshim_conn *c,
		struct conn_pool_entry *e,
		unsigned n_new,
		struct ctxshim_ctx **full)
{
	uint8_t f = atomic_load_explicit(&c->flags, memory_order_relaxed);
	unsigned r = __atomic_load_n(&e->h2_req, __ATOMIC_RELAXED);
	const struct hook_h2_req *q =
		r && r <= CONN_POOL_N ? &conn_pool[r - 1].u.h2req : NULL;
	bool ctx = n_new == 1 && !e->h2_lost;
	struct ctxshim_ctx *b = NULL;
	/* The previous request not answered: this one replaces it
	 * (conn_replaced()). */
	uint8_t was = atomic_load_explicit(&c->answered, memory_order_relaxed);
	bool replaces = !ctxshim_conn_answered(c);

	if (n_new > 1 && *full) {
		/* The request before it in this read was built for
		 * publication: it is not shown either. */
		ctxshim_build_cancel();
		*full = NULL;
	}
	conn_seq_begin(c);
	if (ctx) {
		b = *full ? NULL : ctxshim_build_begin();
		if (b) {
			conn_h2_build(b, q);
			ctxshim_conn_compact_fast(&c->ctx, b);
			*full = b;
		} else {
			conn_h2_scratch(&c->ctx, q);
		}
	}
	conn_head_flags(c, f, (uint8_t)(CONN_F_REQ | (ctx ? CONN_F_HAS_CTX : 0)));
	/* Inside the section: a writer that reads the stream between two
	 * equal even seqs reads the stream of the request of that tag
	 * (conn_h2_written()). */
	__atomic_store_n(&e->hold, ctx ? h2_scan_stream(&e->u.h2.scan) : 0,
			 __ATOMIC_RELAXED);
	conn_seq_end(c);
	h2_scan_watch(&e->u.h2.scan, h2_scan_stream(&e->u.h2.scan));
	if (replaces)
		conn_replaced(c, was);
	/* e's, not c->cap's: another thread may have let go of e, and c->cap
	 * may be the entry of the connection accepted on the fd since. */
	conn_h2_release((unsigned)(e - conn_pool) + 1);
	if (n_new > 1)
		return CONN_FEED_SEVERAL;
	return b ? CONN_FEED_FULL : CONN_FEED_NEW;
}

/* Stop following c as HTTP/2 ("HTTP/2" above). */
static __attribute__((noinline, cold)) int
conn_h2_stop(struct ctxshim_conn *c, unsigned idx, struct ctxshim_ctx **full)
{
	if (*full) {
		ctxshim_build_cancel();
		*full = NULL;
	}
	/* Another thread let go of entry idx first (stopped the connection
	 * too, or closed it): it did the rest, and c may be another
	 * connection by now. */
	if (!conn_cap_take_own(c, idx))
		return CONN_FEED_H2_STOP;
	/* Its writes take the inline path again (the request, without a
	 * context, answered by the first write). */
	conn_seq_begin(c);
	conn_flags_update(c, CONN_F_HAS_CTX | CONN_F_OVERFLOW, 0);
	conn_seq_end(c);
	conn_cap_free(idx);
	http_scan_stop(&c->scan);
	return CONN_FEED_H2_STOP;
}

/* The client reset the stream of c's current request (RFC 9113 §6.4: it
 * cancelled it; the scanner's watch, set by conn_h2_request()): that
 * request has ended without a response, and its context goes, as at
 * conn_h2_undo(): neither the connection's reads nor its writes (PING
 * acknowledgements, other streams' frames) show it any more.  Kept, they
 * all showed the cancelled request until the next one came. */
static __attribute__((noinline, cold)) void
conn_h2_cancelled(struct ctxshim_conn *c)
{
	conn_seq_begin(c);
	conn_flags_update(c, CONN_F_HAS_CTX, 0);
	conn_seq_end(c);
	conn_set_answered(c, true);
}

/* A read's feed of c's scanner (entry idx, e), its reports taken as they
 * come (h2_scan_feed_cb()). */
struct conn_h2_feed {
	struct ctxshim_conn *c;
	struct conn_pool_entry *e;
	unsigned idx;
	bool taken; /* the report the feed returned */
	int became;
	struct ctxshim_ctx **full;
	unsigned *n_new;
};

/* The end of conn_h2_report(). */
static inline __attribute__((always_inline)) bool
conn_h2_report_end(struct conn_h2_feed *f)
{
	/* Another thread let go of e (a close, a stop): no more of it
	 * (this narrows the window in which a feed writes to an entry
	 * freed under it; it cannot close it without a lock). */
	f->taken = __atomic_load_n(&f->c->cap, __ATOMIC_RELAXED) != f->idx;
	return !f->taken;
}

static __attribute__((noinline)) bool
conn_h2_report_field(struct conn_h2_feed *f, const struct h2_scan *st)
{
	conn_h2_field(f->c, f->idx, st);
	return conn_h2_report_end(f);
}

static __attribute__((noinline)) bool
conn_h2_report_request(struct conn_h2_feed *f)
{
	if (*f->n_new < UINT8_MAX)
		(*f->n_new)++;
	f->became = conn_h2_request(f->c, f->e, *f->n_new, f->full);
	return conn_h2_report_end(f);
}

/* Each kind of report in a function of its own, reached by a jump: a
 * field's (three of a later request's four reports) saves only the
 * registers it needs, not those of a request's end. */
static bool
conn_h2_report(void *arg, const struct h2_scan *st, enum h2_scan_status r, size_t at)
{
	(void)at;
	if (r == H2_SCAN_FIELD)
		return conn_h2_report_field(arg, st);
	return conn_h2_report_request(arg);
}

int
ctxshim_conn_h2_feed(struct ctxshim_conn *c,
		     const void *buf,
		     size_t len,
		     struct ctxshim_ctx **full,
		     unsigned *n_new)
{
	unsigned idx = c->cap, idle = 0;
	const uint8_t *p = buf;
	struct conn_h2_feed f = {c, NULL, idx, false, CONN_FEED_NONE, full, n_new};
	struct conn_pool_entry *e;
	size_t off = 0, n;

	if (!idx || idx > CONN_POOL_N)
		return CONN_FEED_NONE;
	e = f.e = &conn_pool[idx - 1];
	if (atomic_load_explicit(&conn_h2_lib, memory_order_relaxed)) {
		if (e->h2_up) {
			if (*full) {
				ctxshim_build_cancel();
				*full = NULL;
			}
			conn_h2_undo(c, idx);
			return CONN_FEED_NONE;
		}
		return conn_h2_stop(c, idx, full);
	}
	/* One feed takes the read's reports (conn_h2_report()).  It returns
	 * one when it was not taken (the scanner reported without moving
	 * on: then it is called again, even with no bytes left, bounded by
	 * idle so that it cannot keep this loop going) or the connection
	 * was let go.  In the loop e and full are f's, which the reports do
	 * not change: the compiler cannot tell, and kept apart they were
	 * stored on the stack on every read as well (B1i). */
	while (idle < 2 * H2_SCAN_KEEP_MAX + 4) {
		enum h2_scan_status r;

		if (__atomic_load_n(&c->cap, __ATOMIC_RELAXED) != idx)
			break;
		n = 0;
		r = h2_scan_feed_cb(&f.e->u.h2.scan, &conn_h2_cfg, p + off, len - off,
				    &n, conn_h2_report, &f);
		off += n;
		idle = n ? 0 : idle + 1;
		if (f.taken)
			break;
		if (r == H2_SCAN_FIELD || r == H2_SCAN_REQUEST) {
			(void)conn_h2_report(&f, &f.e->u.h2.scan, r, off);
		} else if (r == H2_SCAN_GAVE_UP) {
			return conn_h2_stop(f.c, f.idx, f.full);
		} else if (off >= len) {
			break;
		}
	}
	if (__builtin_expect(h2_scan_watch_reset(&f.e->u.h2.scan), 0) &&
	    __atomic_load_n(&c->cap, __ATOMIC_RELAXED) == idx)
		conn_h2_cancelled(c);
	return f.became;
}

void
ctxshim_conn_lost(struct ctxshim_conn *c)
{
	if (ctxshim_conn_h2(c))
		conn_flags_update(c, CONN_F_OVERFLOW, 0);
	http_scan_stop(&c->scan);
	if (c->cap)
		conn_cap_free(conn_cap_take(c));
}

/* The writer popped the last queued entry (pending 0) and the reader had
 * linked next to it meanwhile: the queue goes on from next, back into
 * pending.  Unless c stopped holding the connection's state in between
 * (its queue taken by a move or a release, gen: c's generation when the
 * pop began): then the chain from next belongs to nobody's pending, and
 * it is drained (its last entry closed, left to the tail that names it,
 * wherever that went).  The compare-and-swap here and the generation
 * bump of conn_reset() are both sequentially consistent, so either this
 * sees the new generation or the reset's release sees next in pending
 * and drains it itself: never does a connection accepted on c's fd
 * start with this one's queue.  A state moved by a read through a copy
 * (same connection, same generation) may find the chain in the old
 * slot, now a copy, whose next release drains it. */
static __attribute__((noinline, cold)) void
conn_fifo_hand_back(struct ctxshim_conn *c, unsigned next, uint32_t gen)
{
	uint16_t zero = 0, back;
	uint8_t f;

	if (!next || next > CONN_POOL_N)
		return;
	if (!atomic_compare_exchange_strong_explicit(&c->pending, &zero, (uint16_t)next,
						     memory_order_seq_cst,
						     memory_order_relaxed)) {
		conn_fifo_drain(next, 0);
		return;
	}
	f = atomic_load_explicit(&c->flags, memory_order_relaxed);
	if (atomic_load_explicit(&c->gen, memory_order_seq_cst) == gen &&
	    (f & CONN_F_TRACKED) && !(f & CONN_F_LINK))
		return;
	back = (uint16_t)next;
	if (atomic_compare_exchange_strong_explicit(
		    &c->pending, &back, 0, memory_order_acq_rel, memory_order_relaxed))
		conn_fifo_drain(next, 0);
}

/* Is x the context of a HEAD request (its http.request.method attribute,
 * or, for "_OTHER" when OTEL_INSTRUMENTATION_HTTP_KNOWN_METHODS leaves
 * HEAD out, the http.request.method_original right after it;
 * thread-record.h: entries are key, length, value)?  Its response has a
 * Content-Length but no body. */
static bool
conn_ctx_is_head(const struct ctxshim_conn_ctx *x)
{
	size_t i = 0, n = x->attrs_len < CTXSHIM_CONN_DATA_MAX ? x->attrs_len
							       : CTXSHIM_CONN_DATA_MAX;
	bool other = false;

	while (i + 2 <= n && i + 2 + (size_t)x->data[i + 1] <= n) {
		const uint8_t *v = x->data + i + 2;
		size_t l = x->data[i + 1];

		if (other)
			return x->data[i] == ctxshim_key_method_original() && l == 4 &&
			       memcmp(v, "HEAD", 4) == 0;
		if (x->data[i] == CTXSHIM_KEY_METHOD) {
			if (l == 4 && memcmp(v, "HEAD", 4) == 0)
				return true;
			if (l != 6 || memcmp(v, "_OTHER", 6) != 0)
				return false;
			other = true;
		}
		i += 2 + l;
	}
	return false;
}

/* The rest of conn_responded(): the current request is answered by this
 * write, and a pipelined one, if queued, becomes current (true).  ended:
 * the write ended the current request's response (its held bytes). */
static bool
conn_promote(struct ctxshim_conn *c, uint8_t f, uint8_t tag, int kind, bool ended)
{
	struct conn_pool_entry *e;
	unsigned idx, next;
	uint16_t claim;
	uint32_t gen;

	/* A request made current by the previous response's first write
	 * is answered only by a write that starts a response: the rest of
	 * the previous response (its body) must not count for it. */
	if ((f & CONN_F_PROMOTED) && kind != 2 && !ended)
		return false;
	/* Acquire: the entry's contents, written by the reader before it
	 * stored pending (conn_fifo_push()). */
	idx = atomic_load_explicit(&c->pending, memory_order_acquire);
	if ((!idx || idx > CONN_POOL_N) && (f & CONN_F_OVERFLOW)) {
		/* Past the queue of a connection that overflowed ("Bound"):
		 * the next request is one that was not queued, so it becomes
		 * current without a context (the reader's scanner is stopped,
		 * so this thread is the only one changing the request). */
		conn_seq_begin(c);
		conn_flags_update(c, CONN_F_HAS_CTX, CONN_F_REQ | CONN_F_PROMOTED);
		conn_seq_end(c);
		conn_set_answered(c, false);
		return true;
	}
	if (!idx || idx > CONN_POOL_N) {
		atomic_store_explicit(&c->answered, tag, memory_order_relaxed);
		return false;
	}
	/* Turn-taking for pipelining: once the server starts answering the
	 * current request, it works on the next one.  Claim it first: one
	 * compare-and-swap moves pending past it, and fails if the queue was
	 * taken meanwhile (the state moved to another descriptor of the
	 * connection, or the fd was closed: "Copies"); then the entry is not
	 * this thread's to read, promote or free, and this response promotes
	 * nothing (the next one does, on the descriptor the queue went to). */
	e = &conn_pool[idx - 1];
	gen = atomic_load_explicit(&c->gen, memory_order_relaxed);
	next = atomic_load_explicit(&e->next, memory_order_acquire);
	if (next == CONN_NEXT_CLOSED)
		return false;
	claim = (uint16_t)idx;
	if (!atomic_compare_exchange_strong_explicit(
		    &c->pending, &claim, (uint16_t)(next <= CONN_POOL_N ? next : 0),
		    memory_order_acq_rel, memory_order_relaxed))
		return false;
	/* Flags before the context: if c is moved away from and back to
	 * (a descriptor closed and its number copied again) between the two,
	 * which a signal handler on this thread can do, the move finds this
	 * section open and leaves HAS_CTX clear, and the context stored after
	 * it is this connection's; the other order could set HAS_CTX over
	 * the all-zero context of a fresh copy. */
	conn_seq_begin(c);
	conn_flags_update(c, CONN_F_HAS_CTX,
			  (uint8_t)(CONN_F_REQ | CONN_F_PROMOTED |
				    (e->has_ctx ? CONN_F_HAS_CTX : 0)));
	if (e->has_ctx)
		c->ctx = e->u.ctx;
	conn_seq_end(c);
	/* The promoted request is not answered yet (seq moved on, so
	 * answered already differs; this keeps the distance at 1). */
	conn_set_answered(c, false);
	/* One fewer queued, for the reader's bound (qpop is this thread's). */
	atomic_store_explicit(
		&c->qpop,
		(uint8_t)(atomic_load_explicit(&c->qpop, memory_order_relaxed) + 1),
		memory_order_relaxed);

	/* Pop e ("Pipelining FIFO"), claimed above.  When it was the last
	 * entry, pending went to 0, handed to the reader: close e so that the
	 * reader links no successor to it; e stays allocated as the stub of
	 * whoever holds the tail.  If the reader linked one first, the close
	 * fails and returns it, and this thread puts it back in pending. */
	if (next == 0 || next > CONN_POOL_N) {
		uint16_t expect = 0;

		if (atomic_compare_exchange_strong_explicit(
			    &e->next, &expect, (uint16_t)CONN_NEXT_CLOSED,
			    memory_order_acq_rel, memory_order_acquire) ||
		    expect == CONN_NEXT_CLOSED)
			return true;
		conn_fifo_hand_back(c, expect, gen);
	}
	/* e has a successor, so it is nobody's tail: free it. */
	conn_pool_release(idx);
	return true;
}

/* Tunnels.  A 2xx answer to CONNECT (a forward proxy: Apache httpd's
 * mod_proxy_connect) makes the connection a tunnel: its later bytes are
 * the client's traffic to the origin, which the proxy relays without
 * reading.  TLS makes the scanner give up by itself, but plain HTTP sent
 * through it was taken for the proxy's own requests, each one started
 * on the proxy's thread with a span of its own.  So the scanner stops
 * there, and reads show nothing once the CONNECT was answered (its
 * relaying writes go on showing it, as a response's later writes do).
 * The writing thread changes the reader's scan, as for "Upgrade: h2c"
 * below: the client waits for the answer before it sends into the tunnel;
 * a byte already read (a new head begun) leaves the scanner as it is.  An
 * answer other than 2xx (407 before a retry with credentials) leaves the
 * connection an HTTP/1 one. */
static __attribute__((noinline, cold)) void
conn_tunnel(struct ctxshim_conn *c, const void *head, size_t head_len)
{
	/* Nothing queued: the scanner's last head is the current request. */
	if (ctxshim_conn_status_kind(head, head_len) == 2 && head_len >= 12 &&
	    ((const uint8_t *)head)[9] == '2' &&
	    !atomic_load_explicit(&c->pending, memory_order_relaxed) &&
	    http_scan_at_start(&c->scan) &&
	    (http_scan_flags(&c->scan) & HTTP_SCAN_F_CONNECT))
		http_scan_stop(&c->scan);
}

/* Response length.  A server that writes a response in several calls (its
 * head, then the body, made or streamed meanwhile) is still working on
 * that response's request after the first: the pipelined request queued
 * behind it becomes current once the last byte of the response is
 * written, when the response's length can be told from its first write
 * (http_response_len(): a Content-Length, or no body), not at that first
 * write, which made the thread publish the next request while it still
 * served the previous one.  The bytes still to come are kept in the
 * queue's first entry (hold), counted down by the writes (sendfile's
 * too), and a write that goes past them goes on as a write of its own
 * from there (the next response, in the bytes known).  A response whose
 * length cannot be told (chunked, until the close, a head cut in two
 * writes), one to a HEAD request, or of a request without a context,
 * promotes at its first write, as before. */
static bool
conn_responded(struct ctxshim_conn *c,
	       const uint8_t *head,
	       size_t head_len,
	       size_t written,
	       unsigned depth)
{
	uint8_t f = atomic_load_explicit(&c->flags, memory_order_relaxed);
	uint8_t tag =
		(uint8_t)(atomic_load_explicit(&c->seq, memory_order_relaxed) >> 1);
	int kind;
	struct conn_pool_entry *e;
	unsigned idx;

	/* A copy: the caller answers its leader (conn.h). */
	if (f & CONN_F_LINK)
		return true;
	kind = ctxshim_conn_status_kind(head, head_len);

	/* Marking the request answered is a plain store of the tag seen:
	 * answered has no other writer than the writing thread(s).  If the
	 * reading thread makes a new request current meanwhile (a client
	 * that sent it on seeing the response before this hook ran), the
	 * stored tag is the old one and the new request stays unanswered,
	 * as it should; a writer that saw an odd seq (that section in
	 * progress) stores the old tag too.  Two threads writing responses
	 * to one socket at once may store in either order: both tags are
	 * ones the connection had, so the distance rule (conn.h) holds. */
	if (kind == 1 || !(f & CONN_F_REQ) ||
	    atomic_load_explicit(&c->answered, memory_order_relaxed) == tag)
		return false;
	if (f & CONN_F_CLAIMED) {
		atomic_store_explicit(&c->answered, tag, memory_order_relaxed);
		return false;
	}
	if (__builtin_expect(http_scan_flags(&c->scan) & HTTP_SCAN_F_CONNECT, 0))
		conn_tunnel(c, head, head_len);
	/* Response length (above): the rest of the current response, or
	 * its first write. */
	idx = atomic_load_explicit(&c->pending, memory_order_acquire);
	if (written && idx && idx <= CONN_POOL_N) {
		e = &conn_pool[idx - 1];
		if (e->hold) {
			size_t off = e->hold;

			if (written < off) {
				e->hold = off - written;
				return false;
			}
			e->hold = 0;
			if (!conn_promote(c, f, tag, kind, true))
				return false;
			if (written > off && off < head_len && depth < CONN_QUEUE_MAX)
				(void)conn_responded(c, head + off, head_len - off,
						     written - off, depth + 1);
			return true;
		}
		if (kind == 2 && (f & CONN_F_HAS_CTX) &&
		    atomic_load_explicit(&e->next, memory_order_acquire) !=
			    CONN_NEXT_CLOSED &&
		    !conn_ctx_is_head(&c->ctx)) {
			size_t len = http_response_len(head, head_len);

			if (len > written) {
				e->hold = len - written;
				return false;
			}
		}
	}
	return conn_promote(c, f, tag, kind, false);
}

/* HTTP/2 answers.  A server with HTTP/2 code of its own writes frames of
 * its own on the connection, not only responses: its SETTINGS and
 * WINDOW_UPDATE at the connection's start, SETTINGS and PING
 * acknowledgements, WINDOW_UPDATE for a request body, and nginx writes
 * them right after the read handler ran the request's handler (a proxied
 * request sent to its upstream, nothing answered yet).  Taken as the
 * response, such a write answered the request, and the read of its
 * backend's answer showed nothing ("upstream").  So a write on a
 * connection followed as HTTP/2 answers the current request only when it
 * carries the header of a HEADERS frame (the response's, or an early
 * 1xx's) or RST_STREAM frame of that request's stream (of any stream
 * for a request without a context: no stream kept).  The frames are
 * walked across writes (h2_out_*, proc-context/h2-scan.h, 16 bytes in
 * the scanner's entry): every write's bytes, all its iovecs; bytes whose
 * content is not known (sendfile, splice, a copy's write: the first
 * iovec only) are counted through a payload, and when they cross a frame
 * header the walk is lost for the connection's life: from there every
 * write answers, as before.  A server that writes one connection from
 * two threads at once puts the walk out of step (as the bytes on the
 * wire would be). */

/* What a walk found (hit: 1, the request's frame, or -1, the walk lost:
 * answered, as before), s1: c->seq before it. */
static inline __attribute__((always_inline)) void
conn_h2_answer(struct ctxshim_conn *c, uint32_t s1, int hit)
{
	uint8_t f, tag = (uint8_t)(s1 >> 1);

	if (!hit)
		return;
	atomic_thread_fence(memory_order_acquire);
	f = atomic_load_explicit(&c->flags, memory_order_relaxed);
	if ((s1 & 1) || atomic_load_explicit(&c->seq, memory_order_relaxed) != s1 ||
	    !(f & CONN_F_REQ) ||
	    atomic_load_explicit(&c->answered, memory_order_relaxed) == tag)
		return;
	/* Single writer of answered (conn_responded()). */
	atomic_store_explicit(&c->answered, tag, memory_order_relaxed);
}

/* The walk's state: c->cap loaded once, and checked: the caller's
 * ctxshim_conn_h2() saw it non-zero, but a reading thread may have
 * stopped the connection since (or another closed it), and conn_pool[-1]
 * is the end of conn_pool_used: the frame walk wrote into the pool's
 * bitmap.  An entry freed meanwhile is still walked (bounded, the 16
 * bytes of its h2_out: "Two readers" above).  NULL: none.  *stream: the
 * current request's (0: any). */
static inline __attribute__((always_inline)) struct h2_out *
conn_h2_out(struct ctxshim_conn *c, uint32_t *stream)
{
	unsigned cap = __atomic_load_n(&c->cap, __ATOMIC_RELAXED);
	struct conn_pool_entry *e;

	if (!cap || cap > CONN_POOL_N)
		return NULL;
	e = &conn_pool[cap - 1];
	*stream = (uint32_t)__atomic_load_n(&e->hold, __ATOMIC_RELAXED);
	return &e->u.h2.out;
}

/* The walk of a write's bytes (written of them: the iovecs, else head)
 * from where the caller got to (hit so far), then the answer.  skip: the
 * first bytes are no frames (the 101 of an upgrade, "Upgrade: h2c"
 * below) or walked already; they are within what was written and known.
 * Out of line: the write hooks' direct path (ctxshim_conn_h2_written())
 * comes here only for an iovec that is neither a frame header of its own
 * nor within a payload, conn_h2_written() only for bytes past a first
 * buffer of whole frames, so that they make no call otherwise. */
static __attribute__((noinline, cold)) void
conn_h2_walk(struct ctxshim_conn *c,
	     uint32_t s1,
	     struct h2_out *o,
	     uint32_t stream,
	     int hit,
	     const void *head,
	     size_t head_len,
	     size_t written,
	     const struct iovec *iov,
	     size_t iovcnt,
	     size_t skip)
{
	const uint8_t *b;
	size_t known = 0, i, k, d;
	int r;

	if (iov) {
		for (i = 0; i < iovcnt && known < written; i++) {
			k = iov[i].iov_len < written - known ? iov[i].iov_len
							     : written - known;
			d = skip < k ? skip : k;
			skip -= d;
			/* (an empty iovec's base may be NULL: no NULL + 0,
			 * undefined in C) */
			b = iov[i].iov_base;
			if ((r = h2_out_feed(o, d ? b + d : b, k - d, stream)) != 0)
				hit |= r;
			known += k;
		}
	} else if (head) {
		known = head_len < written ? head_len : written;
		d = skip < known ? skip : known;
		if (known > d)
			hit |= h2_out_feed(o, (const uint8_t *)head + d, known - d,
					   stream);
	}
	if (known < written && (r = h2_out_skip(o, written - known)) != 0)
		hit |= r;
	conn_h2_answer(c, s1, hit);
}

/* The walk for the writes that do not take the write hooks' direct path
 * (ctxshim_conn_h2_written()): a 101's (skip), a write from one buffer
 * (write(), send(), SSL_write()) or whose first iovec is long enough for
 * a status line.  A server that gathers its frames into one buffer (for
 * SSL_write(), which takes one; what libnghttp2's
 * nghttp2_session_mem_send() returns, written whole) writes so every
 * time: one buffer (or iovec) is walked here with no call while it holds
 * whole frame headers and payloads (h2_out_frames()), the rest by the
 * general walk.  Not cold: such a server comes here on every write
 * (bench/README.md, "HTTP/2 at the socket level"). */
static __attribute__((noinline)) void
conn_h2_written(struct ctxshim_conn *c,
		const void *head,
		size_t head_len,
		size_t written,
		const struct iovec *iov,
		size_t iovcnt,
		size_t skip)
{
	uint32_t s1 = atomic_load_explicit(&c->seq, memory_order_acquire), stream = 0;
	struct h2_out *o = conn_h2_out(c, &stream);
	const void *p = iov ? iov->iov_base : head;
	size_t k = iov ? iov->iov_len : head_len;
	int hit = 0;

	if (!o)
		return;
	/* One buffer of whole frames (the usual case) with no call; the
	 * general walk goes on from where it stopped (skip: walked), with
	 * iov as it came: its walk of head feeds no empty rest, which a
	 * lost state answers (an iovec made of head did: a write of a 101
	 * alone answered once another thread lost the state). */
	if (!skip && (iov ? iovcnt == 1 : head != NULL) && !o->lost) {
		k = k < written ? k : written;
		skip = h2_out_frames(o, p, k, stream, &hit);
		if (skip == written) {
			conn_h2_answer(c, s1, hit);
			return;
		}
	}
	conn_h2_walk(c, s1, o, stream, hit, head, head_len, written, iov, iovcnt, skip);
}

bool
ctxshim_conn_responded_slow(struct ctxshim_conn *c,
			    const void *head,
			    size_t head_len,
			    size_t written)
{
	return ctxshim_conn_responded_iov(c, head, head_len, written, NULL, 0);
}

bool
ctxshim_conn_h2_written(struct ctxshim_conn *c,
			const struct iovec *iov,
			size_t iovcnt,
			size_t written)
{
	uint8_t f = atomic_load_explicit(&c->flags, memory_order_relaxed);
	const struct iovec *v = iov, *end = iov ? iov + iovcnt : iov;
	uint32_t s1, stream = 0;
	struct h2_out *o;
	size_t k;
	int hit = 0;

	/* What ctxshim_conn_responded_usual() and ctxshim_conn_responded_iov()
	 * decide for such a write, in one test. */
	if (!ctxshim_conn_h2(c) ||
	    (f & (CONN_F_OVERFLOW | CONN_F_LINK)) != CONN_F_OVERFLOW)
		return false;
	s1 = atomic_load_explicit(&c->seq, memory_order_acquire);
	if (!(o = conn_h2_out(c, &stream)))
		return true;
	/* The usual iovecs (nginx's writev: a frame header, its payload,
	 * ...) without a call: one within a frame's payload, and a frame
	 * header that has an iovec of its own (h2_out_feed()'s usual case);
	 * from any other on, the general walk.  written counts down (few
	 * values live: no register saved). */
	for (; v < end && written; v++) {
		k = v->iov_len < written ? v->iov_len : written;
		if (o->lost)
			break;
		if (k <= o->left)
			o->left -= (uint32_t)k;
		else if (k == 9 && !o->left && !o->pos)
			hit |= h2_out_header(o, v->iov_base, stream);
		else
			break;
		written -= k;
	}
	if (written)
		conn_h2_walk(c, s1, o, stream, hit, NULL, 0, written, v,
			     (size_t)(end - v), 0);
	else
		conn_h2_answer(c, s1, hit);
	return true;
}

bool
ctxshim_conn_responded_iov(struct ctxshim_conn *c,
			   const void *head,
			   size_t head_len,
			   size_t written,
			   const struct iovec *iov,
			   size_t iovcnt)
{
	if (__builtin_expect(ctxshim_conn_h2(c), 0) &&
	    !(atomic_load_explicit(&c->flags, memory_order_relaxed) & CONN_F_LINK)) {
		conn_h2_written(c, head, head_len, written, iov, iovcnt, 0);
		return false;
	}
	return conn_responded(c, head, head_len, written, 0);
}

/* Upgrade: h2c.  A client that asks for HTTP/2 in an HTTP/1.1 request
 * ("Upgrade: h2c", what `curl --http2 http://...` sends; RFC 7540 §3.2)
 * gets "101 Switching Protocols" and, from the server's next byte on,
 * HTTP/2 frames; the request is stream 1 of the new connection, answered
 * by stream 1's HEADERS, and the client sends its preface, then new
 * streams from 3 on.  Left as an HTTP/1.1 connection (the 101 its
 * response, the preface a give-up that keeps it "continued":
 * hooks/hook-socket.c, sk_write_continues()), every later write showed
 * the upgrade request's context, whichever stream it carried: a wrong
 * context.  So the write of a 101 that names h2c (its head whole in the
 * write's first bytes) turns the connection into one followed as HTTP/2
 * here ("HTTP/2" above), when it would be followed so with prior
 * knowledge (no nghttp2 server session in the process): the scanner
 * expects the client's preface, stream 1 open (h2_scan_upgraded()),
 * empty HPACK tables, and the current request -- the upgrade request,
 * with its context -- is stream 1's (hold); the 101 does not answer it.
 * The frame walk of the server's side starts right after the 101's head
 * (lighttpd writes the 101, its SETTINGS and stream 1's response in one
 * writev).  From there the connection is one followed as HTTP/2 like
 * any other.  A 101 written while a head is in progress or queued (the
 * client sends nothing between its upgrade request and the 101, and a
 * request body is read before it), one cut across writes, or with no
 * pool entry free, is not followed so: the writes after the preface then
 * show nothing (sk_write_continues()), rather than the upgrade request --
 * in a process with an nghttp2 server session too (where none is
 * followed so), unless a session took the connection for its upgrade
 * (hooks/hook-nghttp2.c, nh_upgraded()): its stream 1 is that request.
 * The head is told by http_response_h2c_head() (proc-context/http-scan.h,
 * pure, so that unit-http-scan tests it).
 * The writing thread changes scan and cap here, the reading thread's
 * fields, while the client waits for the 101 (nothing to read). */

int
ctxshim_conn_h2_upgrade(struct ctxshim_conn *c,
			const void *head,
			size_t head_len,
			size_t written,
			const struct iovec *iov,
			size_t iovcnt)
{
	uint8_t f = atomic_load_explicit(&c->flags, memory_order_relaxed);
	struct conn_pool_entry *e;
	size_t k;
	unsigned idx;

	if ((f & (CONN_F_TRACKED | CONN_F_REQ | CONN_F_CLAIMED | CONN_F_LINK |
		  CONN_F_TLS | CONN_F_OVERFLOW | CONN_F_PROMOTED)) !=
		    (CONN_F_TRACKED | CONN_F_REQ) ||
	    ctxshim_conn_answered(c) || c->cap != 0 ||
	    atomic_load_explicit(&c->pending, memory_order_relaxed) != 0 ||
	    !http_scan_at_start(&c->scan) || !head ||
	    atomic_load_explicit(&conn_h2_lib, memory_order_relaxed))
		return CONN_START_NO;
	k = http_response_h2c_head(head, head_len < written ? head_len : written);
	if (!k)
		return CONN_START_NO;
	if (!(idx = conn_pool_claim_long()))
		return CONN_START_POOL_FULL;
	e = &conn_pool[idx - 1];
	h2_scan_reset(&e->u.h2.scan, 0);
	h2_scan_upgraded(&e->u.h2.scan);
	h2_out_reset(&e->u.h2.out);
	conn_h2_req_stale(e);
	e->h2_lost = false;
	e->h2_up = true;
	/* Stream 1 is the current request's, if it has a context (a request
	 * without one keeps no stream: conn_h2_request()). */
	__atomic_store_n(&e->hold, (f & CONN_F_HAS_CTX) ? 1 : 0, __ATOMIC_RELAXED);
	h2_scan_watch(&e->u.h2.scan, 1);
	/* A compare-and-swap from 0, as ctxshim_conn_h2_start(): a read on
	 * another thread (a client that does not wait for the 101, two
	 * readers) may store a split head's entry meanwhile, which a plain
	 * store would lose for good. */
	if (!__atomic_compare_exchange_n(&c->cap, &(uint16_t){0}, (uint16_t)idx, false,
					 __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
		conn_pool_release(idx);
		return CONN_START_NO;
	}
	/* As ctxshim_conn_h2_start(): given up on "the preface" (which is
	 * the client's next bytes) and c->cap make it followed as HTTP/2. */
	http_scan_stop_http2(&c->scan);
	conn_flags_update(c, 0, CONN_F_OVERFLOW);
	conn_h2_written(c, head, head_len, written, iov, iovcnt, k);
	return CONN_START_OK;
}
