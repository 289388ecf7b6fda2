/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* W3C Trace Context (Level 1 and Level 2): traceparent and tracestate.
 *
 * Pure code: no I/O, no allocation, no state, async-signal-safe.  Every
 * function returns 0 or a negative errno and fills its out-parameters only
 * on success.  Inputs are (pointer, length) pairs and need not be
 * NUL-terminated; a NUL byte inside a value is just an invalid character. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define W3C_TRACEPARENT_LEN 55
#define W3C_TRACE_ID_SIZE   16
#define W3C_PARENT_ID_SIZE  8

#define W3C_FLAG_SAMPLED 0x01
#define W3C_FLAG_RANDOM  0x02 /* Level 2: the trace-id is random */
#define W3C_FLAGS_KNOWN  (W3C_FLAG_SAMPLED | W3C_FLAG_RANDOM)

#define W3C_TRACESTATE_MAX_MEMBERS 32
#define W3C_TRACESTATE_MAX_LEN     512 /* what we propagate */
#define W3C_TRACESTATE_LONG_ENTRY  128 /* truncation drops longer entries first */
#define W3C_TRACESTATE_KEY_MAX     256
#define W3C_TRACESTATE_VALUE_MAX   256
/* "key=value", the longest member the grammar allows */
#define W3C_TRACESTATE_MEMBER_MAX \
	(W3C_TRACESTATE_KEY_MAX + 1 + W3C_TRACESTATE_VALUE_MAX)

struct w3c_traceparent {
	uint8_t version;
	uint8_t trace_id[W3C_TRACE_ID_SIZE];
	uint8_t parent_id[W3C_PARENT_ID_SIZE];
	uint8_t flags;
};

/* Parses one traceparent header value.  Optional whitespace (SP, HTAB)
 * around the value is ignored.  Version 00 must be exactly 55 characters
 * and keeps all 8 flag bits as received.  A higher version is read from its
 * first 55 characters, which must be followed by the end of the value or by
 * '-'; its unknown flag bits are cleared because we cannot know what they
 * mean.  Version ff, uppercase or non-hex digits, a wrong separator and an
 * all-zero trace-id or parent-id give -EINVAL. */
int w3c_traceparent_parse(const char *s, size_t len, struct w3c_traceparent *out);

/* How many bytes of a traceparent value to hand w3c_traceparent_parse()
 * when only its first cap bytes (cap > W3C_TRACEPARENT_LEN) are kept: s
 * holds those bytes, n is the whole value's length, leading and trailing
 * OWS already removed.  A value cut to cap bytes is invalid if its 56th
 * character is OWS (version 00: longer than 55; a later version: that
 * character must be '-'), but the parser would trim that OWS off the kept
 * bytes and could find a valid value: 0 (an invalid value) then, else
 * min(n, cap). */
static inline size_t
w3c_traceparent_kept_len(const char *s, size_t n, size_t cap)
{
	if (n <= cap)
		return n;
	if (s[W3C_TRACEPARENT_LEN] == ' ' || s[W3C_TRACEPARENT_LEN] == '\t')
		return 0;
	return cap;
}

/* Writes "00-<trace-id>-<span-id>-<flags>" and a NUL; returns 55.  Flags
 * are masked to W3C_FLAGS_KNOWN: unknown bits must go out as zero.  The
 * caller is responsible for non-zero ids. */
size_t w3c_traceparent_format(char out[W3C_TRACEPARENT_LEN + 1],
			      const uint8_t trace_id[W3C_TRACE_ID_SIZE],
			      const uint8_t span_id[W3C_PARENT_ID_SIZE],
			      uint8_t flags);

/* Level 2 key: (lcalpha / DIGIT) 0*255(lcalpha / DIGIT / "_" / "-" / "*" /
 * "/" / "@").  Every Level 1 key (simple and multi-tenant) matches it. */
bool w3c_tracestate_key_valid(const char *key, size_t len);
/* 1-256 characters of 0x20-0x7E other than ',' and '=', not ending in a
 * space.  Leading spaces belong to the value. */
bool w3c_tracestate_value_valid(const char *value, size_t len);

/* A parsed tracestate: pointers into the caller's header lines. */
struct w3c_tracestate_member {
	const char *key;
	const char *value;
	uint16_t key_len;
	uint16_t value_len;
};

struct w3c_tracestate {
	struct w3c_tracestate_member member[W3C_TRACESTATE_MAX_MEMBERS];
	unsigned n;
};

/* Parses the tracestate header lines as one list (RFC 9110 §5.3: lines
 * joined with ',' in the order received).  OWS around members is skipped,
 * trailing OWS of a value is stripped, empty and whitespace-only members
 * are skipped and do not count towards the 32-member limit.  Any invalid
 * member, or more than 32 members, makes the whole tracestate invalid:
 * -EINVAL, and the caller drops it.  Duplicate keys are kept.  An empty
 * list (no lines, or only empty members) is valid with n == 0.  The members
 * point into lines[], which must outlive *out. */
int w3c_tracestate_parse(const char *const *lines,
			 const size_t *lens,
			 size_t n_lines,
			 struct w3c_tracestate *out);

/* Whether a tracestate line holds only OWS and commas: empty members,
 * which w3c_tracestate_parse() skips and does not count.  A caller that
 * keeps a bounded number of lines gives such a line no slot, or enough of
 * them would push a valid list over its bound (hooks/hook-http.h,
 * hooks/hook-curl.c). */
static inline bool
w3c_tracestate_line_empty(const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != ',')
			return false;
	return true;
}

/* Streaming check of a tracestate list: the verdict w3c_tracestate_parse()
 * would give on the joined lines, without keeping them.  For lists longer
 * than what a caller stores (W3C_TRACESTATE_MAX_LEN): an invalid member
 * or a 33rd member anywhere makes the whole list invalid (W3C: discard
 * it), including past the bytes kept.  Feed each line's value (after its
 * leading OWS, or not: OWS around members is skipped anyway) in pieces of
 * any size, then end the line; lines are joined as by ','.  All-zero
 * bytes are a fresh checker.  Once invalid it stays invalid and further
 * calls return -EINVAL at once.  Pure, no state outside *c. */
struct w3c_tracestate_check {
	uint16_t len;  /* key, or value up to its last non-OWS character */
	uint16_t ows;  /* value: OWS since then (saturates past 256) */
	uint8_t state; /* private */
	uint8_t n;     /* members so far */
	uint8_t pend;  /* private: that OWS has a HTAB / a CR */
	uint8_t spare;
};

/* 0 while the list so far can still be valid, -EINVAL once it cannot. */
int
w3c_tracestate_check_feed(struct w3c_tracestate_check *c, const char *s, size_t len);
/* The end of a line (a list boundary).  trim_cr: a CR among the line's
 * trailing whitespace is not part of the value (an HTTP/1.x line read up
 * to its LF); else a CR is an invalid character as anywhere else.  0 if
 * the lines so far form a valid list, else -EINVAL. */
int w3c_tracestate_check_end(struct w3c_tracestate_check *c, bool trim_cr);

/* Streaming truncation of a tracestate list that may be longer than what a
 * caller keeps: the list is fed in pieces, each header line ended with
 * w3c_tracestate_trunc_end(), and out[0, len) always holds the normalised
 * list ("k1=v1,k2=v2": no OWS, no empty members) that
 * w3c_tracestate_format() would produce with max_len = cap from the whole
 * list: entries over 128 characters dropped right-most first, then entries
 * from the right, only as many as needed, the others in order.  It does
 * not validate (pair it with a w3c_tracestate_check, whose verdict wins);
 * a CR is taken as OWS.  out may be the buffer the fed bytes come from:
 * the list is never written ahead of the bytes read.  Start with
 * w3c_tracestate_trunc_init().  Pure, no state outside *t and out. */
struct w3c_tracestate_trunc {
	uint16_t len;     /* bytes of the list in out */
	uint16_t mlen;    /* member in progress: bytes (saturates) */
	uint16_t mlast;   /* ... up to its last non-OWS byte */
	uint8_t n;        /* entries in out */
	uint8_t state;    /* private */
	uint8_t dropped;  /* entries dropped (saturates) */
	uint8_t long_cut; /* private: an entry over 128 characters was dropped */
	uint16_t start[W3C_TRACESTATE_MAX_MEMBERS], size[W3C_TRACESTATE_MAX_MEMBERS];
	char member[W3C_TRACESTATE_MEMBER_MAX];
};

/* A fresh truncation: the scalars zeroed, not the member buffer. */
static inline void
w3c_tracestate_trunc_init(struct w3c_tracestate_trunc *t)
{
	memset(t, 0, offsetof(struct w3c_tracestate_trunc, member));
}

void w3c_tracestate_trunc_feed(
	struct w3c_tracestate_trunc *t, char *out, size_t cap, const char *s, size_t n);
void w3c_tracestate_trunc_end(struct w3c_tracestate_trunc *t, char *out, size_t cap);

/* Writes the normalised list ("k1=v1,k2=v2", no OWS) of ts, dropping whole
 * entries until it is at most max_len characters (truncation policy, from
 * the spec's Limits section): while the list is too long, drop the
 * right-most entry longer than 128 characters; when there is none left,
 * drop the right-most entry.  Only as many entries as needed are dropped
 * and the others keep their order.  Pass SIZE_MAX for no limit.
 * A NUL is written after the list when cap leaves room for it; the list
 * itself must fit in cap or -ENOSPC.  *n_dropped (may be NULL) gets the
 * number of entries dropped. */
int w3c_tracestate_format(char *out,
			  size_t cap,
			  size_t *len_out,
			  const struct w3c_tracestate *ts,
			  size_t max_len,
			  unsigned *n_dropped);

/* w3c_tracestate_parse() + w3c_tracestate_format() without truncation:
 * the combined, validated, normalised list, or -EINVAL (drop it all), or
 * -ENOSPC when the valid list does not fit in cap (up to ~16 KiB for 32
 * maximal members).  For propagation prefer parse + format with
 * W3C_TRACESTATE_MAX_LEN, which needs no intermediate buffer. */
int w3c_tracestate_combine(char *out,
			   size_t cap,
			   size_t *len_out,
			   const char *const *lines,
			   const size_t *lens,
			   size_t n_lines);

/* Applies the truncation policy of w3c_tracestate_format() in place to a
 * normalised list (entries separated by ',' with no OWS, no empty entries,
 * as produced by the functions above).  -EINVAL when buf holds more than 32
 * entries or an empty entry.  A NUL is not written. */
int w3c_tracestate_truncate(
	char *buf, size_t len, size_t max_len, size_t *len_out, unsigned *n_dropped);

/* Writes 2 * n lowercase hex digits, no NUL. */
void w3c_hex_encode(char *out, const uint8_t *in, size_t n);
/* Reads 2 * n_bytes lowercase hex digits; uppercase or anything else gives
 * -EINVAL and leaves out untouched. */
int w3c_hex_decode(uint8_t *out, const char *in, size_t n_bytes);
bool w3c_id_is_zero(const uint8_t *id, size_t n);
