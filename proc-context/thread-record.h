/* SPDX-License-Identifier: Apache-2.0 */
#ifndef CTXSHIM_THREAD_RECORD_H
#define CTXSHIM_THREAD_RECORD_H

/**
 * @file thread-record.h
 * OTEP-4947 Thread-Local Context Record: the byte layout shared by the
 * writer (libctxshim.so) and readers (ctxdump), plus the encoder and decoder
 * of the packed attribute entries that follow the 28-byte header.
 *
 * This header is public: it builds as strict C99 (`-std=c99 -pedantic`) and
 * as C++.  The functions are pure: no I/O, no allocation, no global state,
 * so they may be called from signal handlers.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Name of the exported TLS pointer (`STT_TLS`, global, 8 bytes). */
#define OTEL_THREAD_CTX_SYMBOL "otel_thread_ctx_v1"

/** Size of the fixed record header (trace id .. attrs_data_size). */
#define TREC_HEADER_SIZE 28
/** Recommended maximum size of a whole record, header included. */
#define TREC_MAX_SIZE 640
/** Maximum size of attrs_data: TREC_MAX_SIZE - TREC_HEADER_SIZE. */
#define TREC_ATTRS_MAX 612
/** Maximum length of one attribute value (the length byte is a uint8). */
#define TREC_VALUE_MAX 255
/** Size of one attribute entry's key and length bytes. */
#define TREC_ENTRY_OVERHEAD 2
/** The only value of `valid` that marks a record as readable. */
#define TREC_VALID 1

/**
 * Thread-Local Context Record.  `otel_thread_ctx_v1` points at one of these
 * (or is NULL).  The natural layout has no padding, so no packing attribute
 * is needed; the record must start on a 2-byte boundary.  Multi-byte fields
 * are in host byte order.
 */
struct otel_thread_ctx_record {
	/** W3C trace id, byte 0 = first two hex digits; all zero = none. */
	uint8_t trace_id[16];
	/** W3C span id; all zero = none. */
	uint8_t span_id[8];
	/** 1 = the record may be read; any other value = ignore it. */
	uint8_t valid;
	/** W3C trace-flags byte (sampled, random); 0 without a trace. */
	uint8_t trace_flags;
	/** Number of bytes in attrs_data. */
	uint16_t attrs_data_size;
	/** Packed entries: uint8 key, uint8 length, length bytes of UTF-8. */
	uint8_t attrs_data[];
};

/* The layout is the ABI between processes, so pin every offset.  C99 has no
 * static assertion; thread-record.c repeats these checks with _Static_assert
 * for every build of the library itself. */
#if defined(__cplusplus) && __cplusplus >= 201103L
#define TREC_LAYOUT_ASSERT(expr, msg) static_assert(expr, msg)
#elif !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define TREC_LAYOUT_ASSERT(expr, msg) _Static_assert(expr, msg)
#endif

#ifdef TREC_LAYOUT_ASSERT
TREC_LAYOUT_ASSERT(offsetof(struct otel_thread_ctx_record, trace_id) == 0,
		   "trace_id at 0");
TREC_LAYOUT_ASSERT(offsetof(struct otel_thread_ctx_record, span_id) == 16,
		   "span_id at 16");
TREC_LAYOUT_ASSERT(offsetof(struct otel_thread_ctx_record, valid) == 24, "valid at 24");
TREC_LAYOUT_ASSERT(offsetof(struct otel_thread_ctx_record, trace_flags) == 25,
		   "trace_flags at 25");
TREC_LAYOUT_ASSERT(offsetof(struct otel_thread_ctx_record, attrs_data_size) == 26,
		   "attrs_data_size at 26");
TREC_LAYOUT_ASSERT(offsetof(struct otel_thread_ctx_record, attrs_data) == 28,
		   "attrs_data at 28");
TREC_LAYOUT_ASSERT(sizeof(struct otel_thread_ctx_record) == TREC_HEADER_SIZE,
		   "header is 28 bytes");
TREC_LAYOUT_ASSERT(TREC_ATTRS_MAX == TREC_MAX_SIZE - TREC_HEADER_SIZE, "attrs limit");
#endif

/**
 * Attribute encoder state.  Initialise with trec_attrs_init(); then
 * attrs_data is buf[0..len).
 */
struct trec_attr_writer {
	/** Destination, usually a record's attrs_data. */
	uint8_t *buf;
	/** Usable bytes in buf, never more than TREC_ATTRS_MAX. */
	size_t cap;
	/** Bytes written so far. */
	size_t len;
	/** Entries dropped because they did not fit. */
	unsigned dropped;
	/** Values shortened to TREC_VALUE_MAX bytes (entry still written). */
	unsigned capped;
};

/**
 * Start encoding into buf.  cap is clamped to TREC_ATTRS_MAX so that the
 * whole record stays within TREC_MAX_SIZE.
 */
void trec_attrs_init(struct trec_attr_writer *w, uint8_t *buf, size_t cap);

/**
 * Append one entry.  A value longer than TREC_VALUE_MAX is shortened to at
 * most 255 bytes, cut on a UTF-8 character boundary (w->capped++).  An entry
 * that does not fit in the remaining space is dropped whole, never cut to
 * fit (w->dropped++).
 *
 * @return 0 on success, -ENOSPC if the entry was dropped, -EINVAL for a NULL
 *         writer or a NULL value with a non-zero length.
 */
int
trec_attrs_add(struct trec_attr_writer *w, uint8_t key, const void *val, size_t len);

/** One decoded attribute; val points into the decoded buffer. */
struct trec_attr {
	/** Index into threadlocal.attribute_key_map. */
	uint8_t key;
	/** Value length in bytes. */
	uint8_t len;
	/** Value bytes (not NUL-terminated). */
	const uint8_t *val;
};

/** Result of trec_attrs_decode(). */
struct trec_attrs_decoded {
	/** Distinct keys in order of first appearance, each with its last value. */
	struct trec_attr attr[256];
	/** Number of entries in attr. */
	unsigned n;
	/** attrs_data ended inside an entry; decoding stopped there. */
	bool truncated;
	/** Entries of attr whose key is >= n_known_keys (kept, not resolved). */
	unsigned n_unknown;
	/** Entries replaced by a later entry with the same key. */
	unsigned n_duplicates;
};

/**
 * Decode attrs_data.  Stops at an incomplete entry (truncated = true); the
 * last occurrence of a key wins; keys >= n_known_keys are kept and counted
 * in n_unknown.  Invalid UTF-8 is not rejected (see trec_utf8_valid()).
 *
 * @return 0 on success, -EINVAL for a NULL out, or NULL data with size > 0.
 */
int trec_attrs_decode(const uint8_t *data,
		      size_t size,
		      unsigned n_known_keys,
		      struct trec_attrs_decoded *out);

/** The decoded attribute with this key, or NULL. */
const struct trec_attr *trec_attrs_find(const struct trec_attrs_decoded *d,
					uint8_t key);

/**
 * Whether s[0..len) is well-formed UTF-8 (no overlong forms, no surrogates,
 * nothing above U+10FFFF).
 */
bool trec_utf8_valid(const uint8_t *s, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* CTXSHIM_THREAD_RECORD_H */
