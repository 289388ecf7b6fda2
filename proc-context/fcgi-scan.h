/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Incremental FastCGI request scanner (prefix fcgi_scan_), the socket
 * level's view of a FastCGI server's connection (php-fpm reads its records
 * from the accepted socket itself, without libfcgi: hooks/hook-fcgi.c does
 * not see it).
 *
 * Fed, per connection, the bytes each read returned, split at any point
 * (down to 1-byte reads), it follows the records (FastCGI 1.0, §3.3: an
 * 8-byte header -- version 1, type, request id, content length, padding
 * length -- then the content and the padding) and, for the request it
 * follows, the name-value pairs of its FCGI_PARAMS stream (§3.4: 1- or
 * 4-byte lengths, then the name and the value; a pair may span records).
 * It keeps only the values of the names in its configuration (the CGI
 * meta-variables preload/request-cgi.c looks up), of a name sent twice the
 * last (as php-fpm's $_SERVER has it), each bounded: a value
 * longer than its limit, one holding a NUL byte (a C string would cut it)
 * or one that does not fit the arena is dropped whole, as the HTTP
 * scanner's header values beyond their limits are -- except one of a name
 * configured to be cut (fcgi_scan_config_cut()), of which the first bytes
 * up to the limit are kept, as the HTTP scanner keeps a long
 * request-target's first 256.  The empty FCGI_PARAMS
 * record ends the stream: the feed stops there with FCGI_SCAN_PARAMS, and
 * the values stay valid until the next feed.  Results do not depend on
 * how the stream was split.
 *
 * Requests: an FCGI_BEGIN_REQUEST starts the request followed when none is
 * in its parameters (a new request on a kept connection, or the first);
 * records of any other request id (a multiplexing client's second
 * request, or management records, id 0) are stepped over unread.  The
 * request's other streams (FCGI_STDIN, FCGI_DATA) are stepped over too.
 * A request whose FCGI_BEGIN_REQUEST has FCGI_KEEP_CONN clear is the
 * connection's last (§5.1: the application closes it after responding):
 * an FCGI_BEGIN_REQUEST after its parameters makes the scanner give up
 * (FCGI_SCAN_WHY_CLOSING), for no server ever runs that request -- php-fpm
 * reads on to the end of the stream before it closes, and a client that
 * sent more would otherwise have it shown as the request the server works
 * on, for as long as it keeps the connection open.
 *
 * Gives up (for good, as the HTTP scanner does) on a version other than 1,
 * a record type outside 1..11, or an FCGI_BEGIN_REQUEST whose content is
 * not 8 bytes: not FastCGI, or out of step with the stream.  Lengths are
 * at most 16 bits in a record header and 31 bits in a pair; both are only
 * counted down, never used to index anything.
 *
 * Pure code: no malloc, no I/O, no globals with state; async-signal-safe.
 * Never writes to the bytes it is fed.
 *
 * Shared state.  A state is meant for one feed at a time, but a server
 * that reads one socket from two threads at once feeds its connection's
 * state from both (the socket level keeps one per connection, and one
 * feed may even give it up while the other still writes to it): the
 * results are then meaningless, but the scanner never reads or writes
 * outside its state and its configuration, whatever their fields hold
 * (it used to take a record header's position, which two feeds can push
 * past 8, as the place to copy the rest of a read to).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FCGI_SCAN_KEEP_MAX 16 /* names kept */
#define FCGI_SCAN_NAME_MAX 40 /* bytes of a kept name ("HTTP_" + 31 + slack) */
/* Bytes of kept values, a NUL after each: the state then fits in what an
 * HTTP head's capture takes (the socket level keeps either in one pool
 * entry, preload/conn.c). */
#define FCGI_SCAN_ARENA 3456

/* FastCGI 1.0 record types the scanner cares about. */
#define FCGI_SCAN_BEGIN_REQUEST 1
#define FCGI_SCAN_END_REQUEST   3
#define FCGI_SCAN_PARAMS        4
#define FCGI_SCAN_STDOUT        6
#define FCGI_SCAN_TYPE_MAX      11 /* FCGI_UNKNOWN_TYPE */

enum fcgi_scan_status {
	FCGI_SCAN_MORE = 0,       /* all bytes consumed, nothing to report */
	FCGI_SCAN_PARAMS_END = 1, /* the followed request's parameters are
				   * complete: *consumed bytes include the
				   * empty FCGI_PARAMS record's header */
	FCGI_SCAN_GAVE_UP = 2,    /* gave up on the record header that ends at
				 * byte *consumed; reported once (later feeds
				 * consume everything and report nothing) */
};

/* Shared configuration: fill with fcgi_scan_config_add(), then read-only. */
struct fcgi_scan_config {
	uint8_t n;
	uint8_t name_len[FCGI_SCAN_KEEP_MAX];
	uint16_t value_max[FCGI_SCAN_KEEP_MAX];
	uint16_t cut; /* bit k: a longer value k is cut to value_max[k] */
	char name[FCGI_SCAN_KEEP_MAX][FCGI_SCAN_NAME_MAX];
	/* Bit k: name k has this length (a pair's candidates, at once). */
	uint32_t by_len[FCGI_SCAN_NAME_MAX + 1];
};

/* Keep the value of parameter name (1..FCGI_SCAN_NAME_MAX bytes, exact
 * match), at most value_max bytes (1..FCGI_SCAN_ARENA - 1).  Returns its
 * index, -EEXIST if it is kept already (the index is then not returned),
 * -EINVAL for a bad name or limit, -ENOSPC past FCGI_SCAN_KEEP_MAX. */
int
fcgi_scan_config_add(struct fcgi_scan_config *cfg, const char *name, size_t value_max);

/* Keep the first value_max bytes of a longer value of kept name k (an
 * index fcgi_scan_config_add() returned) rather than drop it.  Returns 0,
 * -EINVAL for an index not added. */
int fcgi_scan_config_cut(struct fcgi_scan_config *cfg, unsigned k);

/* Per-connection state: treat as opaque.  Zero bytes = fresh scanner. */
struct fcgi_scan {
	uint32_t left;   /* content bytes left in the current record */
	uint32_t nv_len; /* length of the name, then the value, in progress */
	uint32_t nv_pos; /* bytes of it seen */
	uint32_t nlen;   /* the pair's name length */
	uint32_t match;  /* kept names still matching the name in progress */
	uint16_t req_id; /* request followed (0: none yet) */
	uint16_t arena_used;
	uint16_t present; /* bit k: value k kept */
	uint16_t val_off[FCGI_SCAN_KEEP_MAX];
	uint16_t val_len[FCGI_SCAN_KEEP_MAX];
	uint8_t hdr[8]; /* the record header in progress */
	uint8_t hdr_pos;
	uint8_t phase;     /* private */
	uint8_t pad;       /* padding bytes left */
	uint8_t ours;      /* the current record is the request's PARAMS
			    * (OURS_PARAMS) or FCGI_BEGIN_REQUEST (OURS_BEGIN):
			    * private */
	uint8_t last;      /* the followed request has FCGI_KEEP_CONN clear */
	uint8_t req_phase; /* private: none, in its parameters, after them */
	uint8_t nv_phase;  /* private */
	uint8_t lbuf_pos;
	uint8_t lbuf[4];
	int8_t keep; /* kept name of the value in progress, -1: none */
	uint8_t why; /* give-up reason, FCGI_SCAN_WHY_* */
	char arena[FCGI_SCAN_ARENA];
};

enum {
	FCGI_SCAN_WHY_NONE = 0,
	FCGI_SCAN_WHY_VERSION, /* version byte not 1 */
	FCGI_SCAN_WHY_TYPE,    /* record type outside 1..11 */
	FCGI_SCAN_WHY_BEGIN,   /* FCGI_BEGIN_REQUEST content not 8 bytes */
	FCGI_SCAN_WHY_CALLER,  /* fcgi_scan_stop() */
	FCGI_SCAN_WHY_CLOSING, /* FCGI_BEGIN_REQUEST after the last request */
	FCGI_SCAN_WHY_STATE,   /* the state was changed under a feed */
};

/* Start over (a new connection). */
void fcgi_scan_reset(struct fcgi_scan *st);

/* Feed the next bytes of the stream; *consumed says how many were used.
 * Call again with the rest after FCGI_SCAN_PARAMS_END. */
enum fcgi_scan_status fcgi_scan_feed(struct fcgi_scan *st,
				     const struct fcgi_scan_config *cfg,
				     const void *buf,
				     size_t len,
				     size_t *consumed);

/* Give up now (the caller lost track of the stream). */
void fcgi_scan_stop(struct fcgi_scan *st);

static inline bool
fcgi_scan_gave_up(const struct fcgi_scan *st)
{
	return st->why != FCGI_SCAN_WHY_NONE;
}

/* Value k of the request whose parameters just ended (NUL-terminated;
 * NULL: absent, or dropped), *len its length if len is not NULL.  Valid
 * after FCGI_SCAN_PARAMS_END until the next feed. */
const char *fcgi_scan_value(const struct fcgi_scan *st, unsigned k, size_t *len);

/* The value of kept name name (NULL: absent, dropped, or not a kept
 * name), as fcgi_scan_value(). */
const char *fcgi_scan_get(const struct fcgi_scan *st,
			  const struct fcgi_scan_config *cfg,
			  const char *name);
