/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Incremental HTTP/1.x request-head scanner (prefix http_scan_).
 *
 * Fed, per connection, the bytes each read()/recv() returned, split at any
 * point (down to 1-byte reads).  It finds request heads, captures what the
 * shim publishes (method, target, traceparent, tracestate, a few configured
 * headers), skips bodies (Content-Length, chunked) to find the next
 * pipelined or keep-alive request, and gives up quickly on streams that are
 * not HTTP/1.x (TLS, the HTTP/2 preface, RESP, binary).  Pure code: no
 * malloc, no I/O, no globals with state; async-signal-safe.  Results do not
 * depend on how the stream was split: the same events at the same absolute
 * offsets with the same captured values.
 *
 * Memory layout (the B8 budget is <= 256 bytes per tracked connection):
 *
 *  - struct http_scan (24 bytes) is the only per-connection part: phase,
 *    a few counters, the head's flags.  All-zero bytes are a valid fresh
 *    scanner, so a zero-filled (mmap'd) connection table needs no init.
 *  - struct http_scan_capture (~3 KiB) receives the values.  It is needed
 *    only while a head is being scanned, so it need not live with the
 *    connection.  Suggested use: one scratch capture per thread, passed to
 *    every feed; if a feed returns with http_scan_in_head() true (the head
 *    is split across reads, the uncommon case), copy the scratch capture
 *    into a pool slot (plain struct assignment) and pass that slot to this
 *    connection's next feeds until the head completes or the scanner gives
 *    up.  The trade-off: split heads cost a 3 KiB copy and a pool slot; in
 *    exchange, idle and body-transferring connections cost 24 bytes.
 *  - struct http_scan_config (~1.3 KiB, one per process) holds the limits
 *    and the header-name tables; it is read-only while feeding.
 *
 * If no capture can be had (pool exhausted), pass NULL: framing is still
 * followed (so later requests are found) and the head is reported without
 * HTTP_SCAN_F_CAPTURED.  A capture must be present from the head's first
 * byte.  Captures must be zero-filled before their first use (static or
 * mmap'd memory is).  The scanner marks the capture it fills (owner) and
 * notices when another one, or NULL, is passed mid-head
 * (HTTP_SCAN_F_CAPTURE_LOST); this is a cheap guard against a forgotten
 * copy, not a proof: an old capture of the same connection passes it.
 *
 * Cost (B4: <= 4 instructions per head byte, and every instruction is
 * paid by the server too): header lines whose name is not one we look for
 * are skipped after one table lookup on their first byte, with an inline
 * SSE2 search for their LF (32 bytes a step; memchr() without SSE2), and
 * the next line is taken without going back through the phase dispatch;
 * names that may match are compared a word at a time; the request target
 * is scanned 16 bytes at a time (SSE2; 8 without); a traceparent whose
 * whole line is in the read is captured in one go.  Searches near the end
 * of a read re-read the last 16 bytes of the read instead of running past
 * it: nothing outside [buf, buf + len) is ever read.  Byte-at-a-time paths
 * are used only for tokens split across reads.  After giving up, a feed is
 * one compare; callers can test http_scan_gave_up() inline before
 * calling.  A whole head in one read takes a straight pass without the
 * phases; a version-00 traceparent followed by CRLF is taken without
 * searching for its LF.  Measured with callgrind (bench/http-scan-insns.sh,
 * heads with a traceparent, one read each): about 340 instructions for a
 * 97-byte head, 425 (2.5 per byte) for a 173-byte curl head and 1,550
 * (1.9 per byte) for an 818-byte browser head; each extra read costs
 * about 150-200 more.  http_scan_whole() takes the usual read (one whole
 * head, nothing after it) in place, without a capture: the same results,
 * less work (no copies), and it falls back to the feed for anything
 * else before changing anything.
 *
 * Parsing decisions (RFC 9112 / 9110, W3C Trace Context):
 *  - Line endings: CRLF, or a bare LF (RFC 9112 §2.2 allows recipients to
 *    accept LF alone; nginx does).  A CR elsewhere at a line start, or at
 *    the end of the request line, not followed by LF is malformed: give up.
 *    In field values a trailing CR is trimmed like OWS.
 *  - Empty lines before a request line are skipped (RFC 9112 §2.2).
 *  - Request line: method = 1..20 of [A-Z_-] starting with A-Z (anything
 *    else gives up at once, which is what rejects TLS, RESP and binary);
 *    one or more SP; target = bytes > 0x20 (captured up to 256 bytes,
 *    query included: the caller strips it; a longer one is cut there
 *    unmarked, as in struct http_scan_head: an origin-form one's path is
 *    then 256 bytes, over the 255 an attribute value keeps, so url.path
 *    is cut either way); one or more SP; "HTTP/1.0" or
 *    "HTTP/1.1"; CRLF or LF.  Method "PRI" gives up (HTTP/2 preface).
 *  - Header names match ASCII case-insensitively, exactly (no OWS before
 *    ':').  Leading and trailing OWS of values are removed.
 *  - traceparent: the first line's value is captured (up to 64 bytes,
 *    enough to decide validity exactly: a v00 value longer than 55 is
 *    invalid and a higher version only looks at byte 56).  A second
 *    traceparent line, or a folded one, sets HTTP_SCAN_F_TRACEPARENT_BAD
 *    (W3C: treat as invalid and restart).  Validation is the caller's
 *    (w3c_traceparent_parse()).
 *  - tracestate: all lines joined in order with ',' (RFC 9110 §5.3).  If
 *    the joined list exceeds 512 bytes, what is kept is the normalised
 *    list (no OWS, no empty members) cut to 512 characters by W3C's
 *    truncation policy (w3c_tracestate_trunc: entries over 128 characters
 *    first, right-most first, then from the right), and
 *    tracestate_truncated is set if entries were dropped.  Folded ->
 *    HTTP_SCAN_F_TRACESTATE_BAD.
 *    A list that exceeds 512 bytes is still checked to its end, across
 *    lines and reads (w3c_tracestate_check_*(), from its first byte): an
 *    invalid member or more than 32 members anywhere sets
 *    HTTP_SCAN_F_TRACESTATE_BAD too, since W3C discards such a list whole
 *    and the stored prefix alone could look valid; then nothing is kept
 *    (tracestate_len 0: where the check saw it, which depends on the
 *    reads, does not show).  A list that fits is
 *    left to the caller to validate (w3c_tracestate_parse()), so that
 *    requests with a usual tracestate pay nothing per byte for it.
 *  - Extra headers (configured, <= 8): lines joined with ", "; values cut
 *    at 256 bytes (extra_truncated bit); folded -> extra_bad bit.
 *  - obs-fold (a line starting with SP/HTAB): never unfolded; it marks the
 *    field it continues as bad (Content-Length / Transfer-Encoding: bad
 *    framing) and sets HTTP_SCAN_F_OBS_FOLD.
 *  - Framing: Transfer-Encoding whose last coding is "chunked" -> chunked
 *    body (extensions and trailers skipped); Content-Length (digits only,
 *    one line) -> that many bytes; neither -> no body.  Anything we cannot
 *    frame for sure -- a bad or repeated Content-Length, both headers,
 *    Transfer-Encoding not ending in chunked or in HTTP/1.0, a folded
 *    framing header -- sets HTTP_SCAN_F_BAD_FRAMING: the head is still
 *    reported, then the scanner gives up (servers reject such requests and
 *    close; guessing would only attribute garbage).
 *  - Limits: a head longer than max_head_bytes (default 16 KiB, counted
 *    from the end of the previous message) is reported with
 *    HTTP_SCAN_F_OVERSIZED and no capture; its framing is still followed
 *    so the next request is found.  A head, a chunk-size line, or the
 *    last chunk plus its trailers longer than give_up_bytes (default
 *    256 KiB) gives up the connection.
 *  - Upgrades and CONNECT are not tracked: the bytes after the switch
 *    (WebSocket frames, TLS, the h2 preface) make the scanner give up by
 *    themselves, but a tunnel may carry plain HTTP, whose heads are not
 *    this server's requests: HTTP_SCAN_F_CONNECT marks a CONNECT head so
 *    that the caller, which sees the answer, can call http_scan_stop().
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "w3c.h"

#define HTTP_SCAN_DEFAULT_MAX_HEAD (16u * 1024)
#define HTTP_SCAN_DEFAULT_GIVE_UP  (256u * 1024)
#define HTTP_SCAN_LIMIT_MAX        (1u << 30)

#define HTTP_SCAN_EXTRA_MAX       8  /* configured extra header names */
#define HTTP_SCAN_NAME_MAX        31 /* bytes in a configured header name */
#define HTTP_SCAN_METHOD_MAX      20
#define HTTP_SCAN_TARGET_MAX      256
#define HTTP_SCAN_TRACEPARENT_MAX 64
#define HTTP_SCAN_TRACESTATE_MAX  512
#define HTTP_SCAN_VALUE_MAX       256

/* What http_scan_feed() stopped for. */
enum http_scan_status {
	HTTP_SCAN_MORE = 0,    /* all bytes consumed, nothing to report */
	HTTP_SCAN_HEAD = 1,    /* a request head completed: *consumed bytes
				 * include its final LF; flags and capture
				 * are valid until the next feed */
	HTTP_SCAN_GAVE_UP = 2, /* gave up at byte *consumed (the offending
				 * byte); reported once */
};

enum http_scan_give_up {
	HTTP_SCAN_GIVE_UP_NONE = 0,
	HTTP_SCAN_GIVE_UP_TLS,       /* first byte 0x16: TLS handshake */
	HTTP_SCAN_GIVE_UP_HTTP2,     /* "PRI * HTTP/2.0" preface */
	HTTP_SCAN_GIVE_UP_NOT_HTTP,  /* not an HTTP/1.x request line */
	HTTP_SCAN_GIVE_UP_MALFORMED, /* bad line ending or chunk syntax */
	HTTP_SCAN_GIVE_UP_TOO_LONG,  /* beyond give_up_bytes */
	HTTP_SCAN_GIVE_UP_FRAMING,   /* body length unknown, see above */
	HTTP_SCAN_GIVE_UP_CALLER,    /* http_scan_stop() */
	HTTP_SCAN_GIVE_UP_FASTCGI,   /* http_scan_stop_fastcgi() */
};

/* Flags of the current or last head, http_scan_flags(). */
enum {
	HTTP_SCAN_F_CAPTURED = 0x0001,        /* capture holds this head */
	HTTP_SCAN_F_OVERSIZED = 0x0002,       /* > max_head_bytes: ignored */
	HTTP_SCAN_F_CAPTURE_LOST = 0x0004,    /* capture missing mid-head */
	HTTP_SCAN_F_HTTP10 = 0x0008,          /* HTTP/1.0 (else 1.1) */
	HTTP_SCAN_F_TRACEPARENT = 0x0010,     /* traceparent line seen */
	HTTP_SCAN_F_TRACEPARENT_BAD = 0x0020, /* repeated or folded */
	HTTP_SCAN_F_TRACESTATE = 0x0040,      /* tracestate line(s) seen */
	HTTP_SCAN_F_TRACESTATE_BAD = 0x0080,  /* folded, or invalid past 512 B */
	HTTP_SCAN_F_CONTENT_LENGTH = 0x0100,
	HTTP_SCAN_F_CHUNKED = 0x0200,     /* body is chunked */
	HTTP_SCAN_F_BAD_FRAMING = 0x0400, /* scanner gave up after it */
	HTTP_SCAN_F_OBS_FOLD = 0x0800,    /* some line was folded */
	HTTP_SCAN_F_TRANSFER_ENCODING = 0x1000,
	HTTP_SCAN_F_CONNECT = 0x2000, /* method CONNECT: a 2xx starts a tunnel */
};
/* Flags only meaningful with a capture; cleared when not captured. */
#define HTTP_SCAN_F_CAPTURE_ONLY                                 \
	(HTTP_SCAN_F_TRACEPARENT | HTTP_SCAN_F_TRACEPARENT_BAD | \
	 HTTP_SCAN_F_TRACESTATE | HTTP_SCAN_F_TRACESTATE_BAD)

/* Private phase numbers the inline queries need. */
#define HTTP_SCAN_PH_HEAD_FIRST 1
#define HTTP_SCAN_PH_HEAD_LAST  12
#define HTTP_SCAN_PH_DEAD       255

/* Per-connection state: treat as opaque.  Zero bytes = fresh scanner. */
struct http_scan {
	/* Body or chunk bytes left; in a head: the method's first bytes,
	 * then the Content-Length value. */
	uint64_t n;
	uint32_t head_bytes; /* bytes of this head / chunk line so far */
	uint16_t flags;      /* HTTP_SCAN_F_* */
	uint16_t match;      /* header names still matching (split name) */
	uint8_t phase;
	uint8_t pos;   /* position inside the current token */
	uint8_t field; /* header whose value is being read */
	uint8_t sub;   /* value sub-state; give-up reason when dead */
};
_Static_assert(sizeof(struct http_scan) == 24, "per-connection state grew");

/* Values of one head.  Lengths are bytes; strings are not NUL-terminated. */
struct http_scan_capture {
	const struct http_scan *owner; /* scanner filling it (private) */
	uint32_t cur_seen, cur_last;   /* value in progress (private) */
	uint16_t cur_start;            /* (private) */

	uint16_t target_len;
	uint16_t tracestate_len;
	uint8_t method_len;
	uint8_t traceparent_len;
	bool tracestate_truncated; /* members dropped, see above */
	uint8_t extra_present;     /* bit k: extra header k was seen */
	uint8_t extra_truncated;   /* bit k: value cut at 256 bytes */
	uint8_t extra_bad;         /* bit k: folded */
	/* ts_check in use (private).  A byte, not a bool: a capture two
	 * readers of a socket share, or a pool entry reused under a feed
	 * (preload/conn.c, "Two readers"), may hold any byte here, and a
	 * bool other than 0 or 1 is undefined (UBSan stops on its load). */
	uint8_t ts_checking;
	uint16_t extra_len[HTTP_SCAN_EXTRA_MAX];

	char method[HTTP_SCAN_METHOD_MAX];
	char traceparent[HTTP_SCAN_TRACEPARENT_MAX];
	char target[HTTP_SCAN_TARGET_MAX];
	char tracestate[HTTP_SCAN_TRACESTATE_MAX];
	char extra[HTTP_SCAN_EXTRA_MAX][HTTP_SCAN_VALUE_MAX];
	/* The tracestate list beyond what fits above (private; set up when
	 * it first overflows, so a head without a long list never touches
	 * it). */
	struct w3c_tracestate_check ts_check;
	struct w3c_tracestate_trunc ts_trunc; /* ... and is cut (private) */
};

#define HTTP_SCAN_NAMES (4 + HTTP_SCAN_EXTRA_MAX)

/* Shared configuration: fill with the functions below, then read-only. */
struct http_scan_config {
	uint32_t max_head_bytes;
	uint32_t give_up_bytes;
	uint8_t n_names; /* 4 built-in names + extras */
	uint8_t max_name_len;
	uint8_t name_len[HTTP_SCAN_NAMES];
	uint16_t first[256];               /* names starting with this byte */
	uint8_t name[HTTP_SCAN_NAMES][32]; /* lower case */
	uint8_t fold[HTTP_SCAN_NAMES][32]; /* 0x20 where name has a letter */
};

/* Defaults: 16 KiB / 256 KiB limits, no extra headers. */
void http_scan_config_init(struct http_scan_config *cfg);

/* max_head_bytes: heads longer than this are ignored (>= 64);
 * give_up_bytes: heads longer than this give up the connection
 * (max_head_bytes <= give_up_bytes <= HTTP_SCAN_LIMIT_MAX).
 * 0 keeps the current value.  -EINVAL if out of range. */
int http_scan_config_set_limits(struct http_scan_config *cfg,
				uint32_t max_head_bytes,
				uint32_t give_up_bytes);

/* Look for header `name` (a token, 1..31 bytes, any case) too; its value
 * goes to capture->extra[k], k = number of extras added before (returned in
 * *index_out if not NULL).  -EINVAL not a token or too long, -EEXIST already
 * looked for (including the built-in traceparent, tracestate,
 * content-length, transfer-encoding), -ENOSPC more than 8. */
int http_scan_config_add_header(struct http_scan_config *cfg,
				const char *name,
				size_t len,
				unsigned *index_out);

/* Start over (new connection, or the caller lost track). */
void http_scan_reset(struct http_scan *st);

/* Feed the next bytes of the stream.  Processes until a head completes,
 * the scanner gives up, or all `len` bytes are consumed; *consumed says how
 * many were.  Call again with the rest after HTTP_SCAN_HEAD:
 *
 *	for (off = 0; off < len; off += n) {
 *		r = http_scan_feed(st, cfg, cap, buf + off, len - off, &n);
 *		if (r == HTTP_SCAN_HEAD) use(http_scan_flags(st), cap);
 *		else if (r == HTTP_SCAN_GAVE_UP) { off += n; break; }
 *	}
 *
 * cap may be NULL (framing only) and may change between heads.  A HEAD
 * without HTTP_SCAN_F_CAPTURED still means "a new request started" (its
 * values are unknown: oversized, or no capture), so the previous request's
 * context should end there.  Feeds of one connection must not run
 * concurrently; different connections and threads share cfg freely. */
enum http_scan_status http_scan_feed(struct http_scan *st,
				     const struct http_scan_config *cfg,
				     struct http_scan_capture *cap,
				     const void *buf,
				     size_t len,
				     size_t *consumed);

/* One whole request head in one read, taken in place (the socket level's
 * usual read, B1): the values point into the read's bytes instead of a
 * capture.  Lengths are what a capture would hold (target cut at 256
 * bytes, traceparent at 64, values at 256; whitespace trimmed). */
struct http_scan_head {
	const char *method;
	const char *target;
	const char *traceparent; /* NULL: no traceparent line */
	const char *tracestate;  /* NULL: no tracestate line */
	uint16_t target_len;
	uint16_t tracestate_len;
	uint8_t method_len;
	uint8_t traceparent_len;
	uint8_t extra_present;   /* bit k: extra header k was seen */
	uint8_t cl_state;        /* (private) */
	uint16_t flags;          /* http_scan_flags() after the head */
	uint64_t content_length; /* with HTTP_SCAN_F_CONTENT_LENGTH */
	uint16_t extra_len[HTTP_SCAN_EXTRA_MAX];
	const char *extra[HTTP_SCAN_EXTRA_MAX];
};

/* If st is between messages (a new head would start at buf[0], no bytes
 * of it seen before) and buf[0, len) is exactly one request head whose
 * usual form this takes -- "METHOD SP target SP HTTP/1.x", header lines
 * each whole, every wanted field (traceparent, tracestate, configured
 * names, a valid Content-Length) at most once, no Transfer-Encoding, no
 * folded line, the empty line as the last bytes (a body comes in later
 * reads), within max_head_bytes -- fills *h with what http_scan_feed()
 * with a capture would capture, leaves st exactly as that feed would
 * (status HTTP_SCAN_HEAD, *consumed == len; in the body when
 * Content-Length is not 0) and returns 0.  Otherwise returns
 * -EAGAIN with st unchanged (*h is scratch then: it may have been
 * written): feed the bytes as usual.  Reads only buf[0, len). */
int http_scan_whole(struct http_scan *st,
		    const struct http_scan_config *cfg,
		    const void *buf,
		    size_t len,
		    struct http_scan_head *h);

/* Give up on this connection now (e.g. it was upgraded). */
void http_scan_stop(struct http_scan *st);
/* The same, the reason saying that the caller follows the stream as
 * FastCGI records (fcgi-scan.h) from now on. */
void http_scan_stop_fastcgi(struct http_scan *st);
/* The same, the reason HTTP_SCAN_GIVE_UP_HTTP2: the caller follows the
 * stream as HTTP/2 from now on (an "Upgrade: h2c" switched it). */
void http_scan_stop_http2(struct http_scan *st);

/* The next len bytes of the stream went by unseen (spliced out of the
 * socket into a pipe: HAProxy moves bodies so).  If they are all bytes of
 * the body, or of the chunk data, the scanner is in, it steps over them
 * exactly as a feed of them would and returns 0; otherwise (a head, a
 * chunk-size line, more than the body) it cannot follow any more: it
 * gives up (HTTP_SCAN_GIVE_UP_CALLER) and returns -EPIPE, as it does if
 * it had given up before. */
int http_scan_skip(struct http_scan *st, uint64_t len);

/* Why it gave up (HTTP_SCAN_GIVE_UP_NONE if it did not); its name. */
enum http_scan_give_up http_scan_give_up_reason(const struct http_scan *st);
const char *http_scan_give_up_name(enum http_scan_give_up reason);

static inline bool
http_scan_gave_up(const struct http_scan *st)
{
	return st->phase == HTTP_SCAN_PH_DEAD;
}

/* A request head has started and not completed yet (its capture must be
 * kept and passed to the next feed). */
static inline bool
http_scan_in_head(const struct http_scan *st)
{
	return (unsigned)st->phase - HTTP_SCAN_PH_HEAD_FIRST <=
	       HTTP_SCAN_PH_HEAD_LAST - HTTP_SCAN_PH_HEAD_FIRST;
}

/* Between messages with no byte of the next one seen: where
 * http_scan_whole() can take a head (a cheap test before calling it). */
static inline bool
http_scan_at_start(const struct http_scan *st)
{
	/* one test, not two (B1) */
	return (st->head_bytes | st->phase) == 0;
}

/* The cheap tests of http_scan_whole() (st between messages, at least 16
 * bytes, the last an LF): false means it takes nothing.  A caller that
 * makes them first passes ready to http_scan_whole_inline(). */
static inline bool
http_scan_whole_ready(const struct http_scan *st, const void *buf, size_t len)
{
	return http_scan_at_start(st) && len >= 16 &&
	       ((const uint8_t *)buf)[len - 1] == '\n';
}

static inline unsigned
http_scan_flags(const struct http_scan *st)
{
	return st->flags;
}

/* The length of the HTTP/1.x response whose head starts at p[0..n): its
 * head, plus its Content-Length body (none for 1xx, 204 and 304).  0 when
 * that cannot be told from the head in p[0..n) (no status line, a head
 * cut by the end, chunked, a body that runs until the close, a
 * Content-Length that is not plain digits).  The result may exceed n (a
 * body that goes on); no byte outside p[0..n) is read.  The socket level
 * uses it to find the responses after the first in one write. */
size_t http_response_len(const uint8_t *p, size_t n);

/* The length of the "101 Switching Protocols" head at p[0..n) when it
 * switches to cleartext HTTP/2: a field "Upgrade: h2c" (name and token
 * without case, blanks around the token; the last Upgrade field counts),
 * the head whole within p[0..n).  0 otherwise: another protocol ("h2c"
 * in a list of several included, which is not HTTP/2 alone), a head cut
 * by the end.  CRLF or bare LF line ends.  No byte outside p[0..n) is
 * read.  The socket level follows the connection as HTTP/2 from the
 * write of such a head on (preload/conn.c, "Upgrade: h2c"). */
size_t http_response_h2c_head(const uint8_t *p, size_t n);
