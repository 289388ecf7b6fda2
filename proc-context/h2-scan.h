/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Incremental HTTP/2 request scanner (prefix h2_scan_), the socket level's
 * view of an HTTP/2 server connection whose frames no library hook sees
 * (nginx's, lighttpd's, h2o's own HTTP/2 code; plaintext after the TLS
 * hooks for h2 over TLS, or h2c with prior knowledge).
 *
 * Fed, per connection, the bytes each server read returned (client to
 * server only), split at any point down to 1-byte reads, it checks the
 * rest of the client connection preface (RFC 9113 §3.4), follows the
 * frames (9-byte header: 24-bit length, type, flags, 31-bit stream id),
 * and decodes every header block (HEADERS + CONTINUATION, padding and
 * priority fields stepped over) with HPACK (RFC 7541): integers, string
 * literals with and without Huffman coding, the static table and a model
 * of the client's dynamic table (entry sizes by their decoded lengths,
 * §4.1; size updates, §6.3; FIFO eviction).  Every block is decoded, so
 * that the model stays in step (trailers, blocks of streams not reported),
 * but only a block that opens a new client stream (odd id above every id
 * seen) is reported, and only its fields whose names are in the
 * configuration.  Other frames are stepped over by their length.
 *
 * Bounded state, no pointers kept: the dynamic table model keeps for each
 * entry its size and which configured name it has (if any), and the value
 * of entries with a configured name while an arena has room; a reference
 * to an entry whose value did not fit reports the field as
 * H2_SCAN_F_UNKNOWN (the caller leaves it out).  A value longer than
 * H2_SCAN_VALUE_MAX is reported with its first bytes and H2_SCAN_F_CUT.
 *
 * Gives up for good on anything a conforming client cannot send or the
 * model cannot follow: a wrong preface, a CONTINUATION out of place or a
 * frame other than CONTINUATION inside a block, an index beyond the
 * tables, a bad integer or Huffman code (EOS, padding longer than 7 bits
 * or not all ones), a size update above the limit or after a field, more
 * dynamic entries than the model holds.
 *
 * "Seen" stream ids are those of HEADERS frames: a PRIORITY frame may name
 * an idle stream (RFC 9113 §5.1) that a later request does not open.
 *
 * Cost: frame payloads other than header blocks are stepped over in one
 * step per read; header block bytes go through a byte-wise HPACK state
 * machine, but for runs of one-byte indexed fields not to be reported
 * (one short loop, each index tested against a mask worked out once per
 * run); string literals are copied (raw) or decoded (Huffman)
 * from refills of up to 8 bytes, one lookup of a 16 KiB table
 * (h2-huff.h) per one or two codes of up to 12 bits (longer codes compare
 * per length), a value not kept only counted.  Measured with callgrind
 * on Chrome-like requests (bench/h2-insns.sh: 20 fields, nghttp2's
 * encoder, the shim's 4 names configured): about 13,500 instructions for
 * the connection's first request (preface, SETTINGS, a 595-byte block of
 * literals) and 2,470 for each next one (89-byte blocks: a new :path and
 * traceparent, the rest indexed; fed with h2_scan_feed_cb()); before
 * 2026-12-04, 28,900 and 5,400, then 21,300 and 3,900 (one lookup of 8
 * bits per code), then 16,500 and 3,000, then 16,600 and 2,800 (the
 * pair table's fields bits of a word, not bytes), then 15,400 and 2,700
 * (a test per lookup for a code longer than 12 bits), then 14,100 and
 * 2,560 (calls of the decoder's steps).
 *
 * Pure code: no malloc, no I/O, no globals with state; async-signal-safe.
 * Never writes to the bytes it is fed.
 *
 * Shared state, as in fcgi-scan.h: a server that reads one connection
 * from two threads at once feeds its state from both.  The results are
 * then meaningless, but whatever the state's fields hold the scanner
 * never reads or writes outside the state, its configuration and its
 * tables, and a feed ends (a field out of its range gives up:
 * H2_SCAN_WHY_STATE); h2_scan_field() bounds the value it hands out,
 * but its index k may then be any: the caller checks it against its
 * configuration (preload/conn.c does).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define H2_SCAN_KEEP_MAX  12   /* configured names */
#define H2_SCAN_NAME_MAX  32   /* bytes of a configured name */
#define H2_SCAN_VALUE_MAX 1024 /* bytes of a reported value */
/* The client connection preface, RFC 9113 §3.4. */
#define H2_SCAN_PREFACE     "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define H2_SCAN_PREFACE_LEN 24
/* sizeof(struct h2_scan) at most: what an HTTP head's capture takes
 * (sizeof(struct http_scan_capture)); the socket level keeps either in
 * one pool entry. */
#define H2_SCAN_STATE_MAX 3608
/* The dynamic table model: entries (4096 bytes / 32, the most a client
 * can have live at the initial size), the largest table size a size
 * update may set, and bytes of kept values. */
#define H2_SCAN_ENTRIES   128
#define H2_SCAN_TABLE_MAX 65536
#define H2_SCAN_ARENA     1544

/* Shared configuration: fill with h2_scan_config_add(), then read-only. */
struct h2_scan_config {
	uint8_t n;
	uint8_t name_len[H2_SCAN_KEEP_MAX];
	char name[H2_SCAN_KEEP_MAX][H2_SCAN_NAME_MAX];
	/* Private lookup tables.  Bit k: name k has this length. */
	uint16_t by_len[H2_SCAN_NAME_MAX + 1];
	/* By static table index (RFC 7541 Appendix A): k + 1 of its name,
	 * 0 if not configured; and bit i set where static_k[i] is not 0. */
	uint8_t static_k[62];
	uint64_t static_named;
};

/* Report fields named name (1..H2_SCAN_NAME_MAX bytes; lower case, as
 * HTTP/2 sends names; pseudo-headers with their colon: ":method",
 * ":path").  Returns its index k, -EEXIST if it is configured already,
 * -EINVAL for a bad name, -ENOSPC past H2_SCAN_KEEP_MAX. */
int h2_scan_config_add(struct h2_scan_config *cfg, const char *name);

/* Per-connection state: treat as opaque.  It fits in one socket-level pool
 * entry (preload/conn.c asserts it). */
struct h2_scan {
	uint32_t left;     /* payload bytes left in the frame */
	uint32_t block_id; /* stream of the header block in progress */
	uint32_t max_id;   /* highest stream a HEADERS frame opened */
	uint32_t t_size;   /* dynamic table: size (RFC 7541 §4.1) */
	uint32_t t_max;    /* and maximum size (§4.2) */
	uint32_t int_val;  /* HPACK integer in progress */
	uint32_t str_left; /* encoded bytes left of the string in progress */
	uint32_t dec_len;  /* its decoded bytes so far */
	uint32_t f_nlen;   /* decoded name length of the field in progress */
	uint32_t watch;    /* the caller's stream (h2_scan_watch()) */
	uint64_t h_acc;    /* Huffman bits not yet decoded (top h_bits) */
	uint64_t e_named;  /* bit d - 1: dynamic entry d (1: newest) has a
			    * configured name (as e_k says; for d <= 64) */
	uint16_t a_tail;   /* arena: offset of the oldest kept value */
	uint16_t a_used;   /* and bytes in use */
	uint16_t rep_len;  /* the field reported */
	uint8_t rep_k, rep_flags, rep_static;
	uint8_t hdr[9], hdr_pos;
	uint8_t phase, pre, frame_flags, pad, prio_left;
	uint8_t in_block, report, field_seen, watch_rst;
	uint8_t hp, kind, int_what, int_shift, str_value, str_huff, h_bits;
	uint8_t f_k;    /* configured name of the field in progress, 0xff: none */
	uint8_t e_head; /* next entry slot */
	uint8_t e_count;
	uint8_t why; /* give-up reason, H2_SCAN_WHY_* */
	/* Dynamic entries, a ring, oldest first from e_head - e_count. */
	uint16_t e_nlen[H2_SCAN_ENTRIES], e_vlen[H2_SCAN_ENTRIES];
	uint16_t e_off[H2_SCAN_ENTRIES];  /* kept value's arena offset */
	uint8_t e_k[H2_SCAN_ENTRIES];     /* configured name, flags */
	uint8_t name[H2_SCAN_NAME_MAX];   /* literal name in progress */
	uint8_t value[H2_SCAN_VALUE_MAX]; /* value in progress, reported */
	uint8_t arena[H2_SCAN_ARENA];     /* kept values, a FIFO ring */
};

enum {
	H2_SCAN_WHY_NONE = 0,
	H2_SCAN_WHY_PREFACE, /* not the client connection preface */
	H2_SCAN_WHY_FRAME,   /* frame out of place (CONTINUATION rules) */
	H2_SCAN_WHY_HPACK,   /* a header block the decoder rejects */
	H2_SCAN_WHY_TABLE,   /* more dynamic entries than the model holds */
	H2_SCAN_WHY_CALLER,  /* h2_scan_stop() */
	H2_SCAN_WHY_STATE,   /* the state was changed under a feed */
};

/* Start over for a new connection.  preface_seen: bytes of the preface
 * (0..H2_SCAN_PREFACE_LEN) already consumed before the first byte fed
 * (the HTTP/1 scanner read "PRI " before it gave up); more: gives up
 * (H2_SCAN_WHY_PREFACE, not reported by a feed). */
void h2_scan_reset(struct h2_scan *st, unsigned preface_seen);

/* After h2_scan_reset(), for a connection upgraded from HTTP/1.1
 * ("Upgrade: h2c", RFC 7540 §3.2): stream 1, the upgrade
 * request, is open already (it has no HEADERS frame), so the first new
 * stream is 3.  Both HPACK tables start empty, as reset leaves them. */
static inline void
h2_scan_upgraded(struct h2_scan *st)
{
	if (st->max_id < 1)
		st->max_id = 1;
}

enum h2_scan_status {
	H2_SCAN_MORE = 0,    /* all bytes consumed, nothing to report */
	H2_SCAN_FIELD = 1,   /* a configured field of the new request's
			      * block: h2_scan_field() until the next feed */
	H2_SCAN_REQUEST = 2, /* the new request's block ended (END_HEADERS):
			      * h2_scan_stream() names its stream */
	H2_SCAN_GAVE_UP = 3, /* reported once; later feeds consume all */
};

/* Feed the next bytes; *consumed says how many were used (all of them
 * with H2_SCAN_MORE).  Call again with the rest after FIELD/REQUEST, even
 * when no bytes are left, until MORE or GAVE_UP: a block whose last field
 * ends at the read's last byte reports that FIELD with every byte
 * consumed, and its REQUEST on the next call (consuming nothing). */
enum h2_scan_status h2_scan_feed(struct h2_scan *st,
				 const struct h2_scan_config *cfg,
				 const void *buf,
				 size_t len,
				 size_t *consumed);

/* A feed's reports handed over as they come (h2_scan_feed_cb()): r is
 * H2_SCAN_FIELD (h2_scan_field() is valid during the call) or
 * H2_SCAN_REQUEST (h2_scan_stream()), at the feed's offset at (the bytes
 * consumed up to it).  Returns true for the feed to go on, false to stop
 * it: the feed returns r at once (taken by the call: the caller keeps
 * track, as preload/conn.c does). */
typedef bool h2_scan_report_fn(void *arg,
			       const struct h2_scan *st,
			       enum h2_scan_status r,
			       size_t at);

/* As h2_scan_feed(), but each FIELD and REQUEST goes to report(arg, ...)
 * in the feed, which goes on while report returns true: one call per
 * read instead of one per report (preload/conn.c).  Returns MORE or
 * GAVE_UP, or FIELD or REQUEST when report returned false (taken) or
 * when the feed did not hand it over: a third report at one offset (a
 * block's last field and its end come at one offset; more only from a
 * state changed under the feed, which could report without end), which
 * the caller takes as from h2_scan_feed().  report NULL: h2_scan_feed(). */
enum h2_scan_status h2_scan_feed_cb(struct h2_scan *st,
				    const struct h2_scan_config *cfg,
				    const void *buf,
				    size_t len,
				    size_t *consumed,
				    h2_scan_report_fn *report,
				    void *arg);

#define H2_SCAN_F_CUT     1u /* longer than H2_SCAN_VALUE_MAX: first bytes */
#define H2_SCAN_F_UNKNOWN 2u /* an indexed entry whose value was not kept */

/* The field H2_SCAN_FIELD reported: its configured index, value (decoded,
 * not NUL-terminated; NULL and length 0 with H2_SCAN_F_UNKNOWN), length
 * and flags.  The value is valid until the next feed. */
struct h2_scan_field {
	unsigned k;
	const uint8_t *value;
	size_t len;
	unsigned flags;
};
void h2_scan_field(const struct h2_scan *st, struct h2_scan_field *f);

/* The stream id of the block last reported. */
uint32_t h2_scan_stream(const struct h2_scan *st);

/* The stream whose end by the client the caller wants to know of (its
 * current request's): a RST_STREAM frame of it (RFC 9113 §6.4, the client
 * cancelled it) sets a flag that h2_scan_watch_reset() takes.  A new
 * watch clears the flag. */
static inline void
h2_scan_watch(struct h2_scan *st, uint32_t stream)
{
	st->watch = stream;
	st->watch_rst = 0;
}

/* Did the client reset the watched stream since h2_scan_watch() or the
 * last call?  Clears the flag. */
static inline bool
h2_scan_watch_reset(struct h2_scan *st)
{
	if (!st->watch_rst)
		return false; /* (no store on every read) */
	st->watch_rst = 0;
	return true;
}

/* Give up now (the caller lost track of the stream). */
void h2_scan_stop(struct h2_scan *st);

static inline bool
h2_scan_gave_up(const struct h2_scan *st)
{
	return st->why != H2_SCAN_WHY_NONE;
}

/*
 * The server's side of the connection (prefix h2_out_): where the frames
 * it writes begin, to tell which write starts the response of a request.
 * Fed, per connection, the bytes each server write sent (server to
 * client, split at any point), it follows the 9-byte frame headers and
 * steps over payloads by their length; a header split across writes is
 * kept in the state (its length, type and stream id as they arrive), not
 * buffered.  No preface on this side (the server's first frame is its
 * SETTINGS).  16 bytes, no pointers; pure, async-signal-safe.  Written
 * only by the server's writes: two threads writing one connection at once
 * put it out of step, as they would the connection itself, but whatever
 * its fields hold the h2_out_ calls stay within it and the bytes they are
 * given (test/fuzz/fuzz-shared-state.c, mode 3).
 */
struct h2_out {
	uint32_t left; /* payload bytes left in the current frame */
	uint32_t len;  /* the frame header in progress: its length so far */
	uint32_t sid;  /* and stream id so far */
	uint8_t pos;   /* its bytes seen (0: at a frame's start) */
	uint8_t type;  /* its type */
	uint8_t lost;  /* bytes of unknown content crossed a frame header */
	uint8_t pad_;
};

/* The frame types that start or end a stream's response (RFC 9113 §6). */
#define H2_OUT_HEADERS    0x1
#define H2_OUT_RST_STREAM 0x3

static inline void
h2_out_reset(struct h2_out *o)
{
	o->left = o->len = o->sid = 0;
	o->pos = o->type = o->lost = o->pad_ = 0;
}

/* A whole frame header h[0..8] at a frame's start (pos 0, left 0, not
 * lost: the caller checks): its payload's length into left; returns 1
 * if it is a HEADERS or RST_STREAM frame of stream (0: of any stream),
 * else 0.  Inline, for a walk of a write's iovecs whose frame header
 * has an iovec of its own (nginx's writev: preload/conn.c), and
 * h2_out_frames(); big-endian fields by word loads. */
static inline __attribute__((always_inline)) int
h2_out_header(struct h2_out *o, const uint8_t *h, uint32_t stream)
{
	uint32_t w, sid;

	memcpy(&w, h, 4);
	memcpy(&sid, h + 5, 4);
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_BIG_ENDIAN__
	w = __builtin_bswap32(w);
	sid = __builtin_bswap32(sid);
#endif
	sid &= 0x7fffffffu; /* the reserved bit (§4.1) */
	o->left = w >> 8;
	return ((w & 0xff) == H2_OUT_HEADERS || (w & 0xff) == H2_OUT_RST_STREAM) &&
	       sid != 0 && (stream == 0 || sid == stream);
}

/* The frames of the next len bytes the server wrote (p), as far as they
 * are whole: payloads stepped over by their length, each whole frame
 * header read (h2_out_header(); *hit |= its result) -- not lost (the
 * caller checks).  Returns the bytes walked: len, or less where a frame
 * header begins that is not whole within them, or one is in progress
 * (pos, split across writes): the rest is h2_out_feed()'s, byte by byte.
 * Inline, for preload/conn.c's walk of a write from one buffer (several
 * frames: what SSL_write() or libnghttp2's nghttp2_session_mem_send()
 * gathered) and h2_out_feed().  Bounded by len whatever o holds (shared
 * state). */
static inline __attribute__((always_inline)) size_t
h2_out_frames(struct h2_out *o, const uint8_t *p, size_t len, uint32_t stream, int *hit)
{
	size_t off = 0;
	uint32_t left = o->left;

	while (len - off > left) {
		off += left;
		if (len - off < 9 || o->pos) {
			o->left = 0;
			return off;
		}
		*hit |= h2_out_header(o, p + off, stream);
		left = o->left;
		off += 9;
	}
	o->left = left - (uint32_t)(len - off);
	return len;
}

/* The next len bytes the server wrote.  Returns 1 when a frame header
 * among them (completed by them) is a HEADERS or RST_STREAM frame of
 * stream (0: of any stream), 0 if none, -1 once the state is lost
 * (h2_out_skip()): then nothing can be told any more. */
int h2_out_feed(struct h2_out *o, const void *buf, size_t len, uint32_t stream);

/* The next len bytes the server wrote, their content unknown (sendfile,
 * splice): 0 while they stay within the current frame's payload, else
 * -1, and the state is lost for good (as h2_out_feed() then). */
int h2_out_skip(struct h2_out *o, size_t len);
