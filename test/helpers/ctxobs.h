/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* How a test helper sees its own thread's published context, the way an
 * in-process reader would: the calling thread's otel_thread_ctx_v1 found
 * with dlsym() (which returns the calling thread's instance of a TLS
 * symbol).  Without the shim there is no such symbol and every thread
 * shows "-".  The helpers contain no other tracing code. */

#include "thread-record.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The calling thread's published record, or NULL. */
static inline const struct otel_thread_ctx_record *
ctxobs_record(void)
{
	void *const *slot = (void *const *)dlsym(RTLD_DEFAULT, OTEL_THREAD_CTX_SYMBOL);

	return slot ? (const struct otel_thread_ctx_record *)*slot : NULL;
}

/* n bytes at b in lowercase hex into out (2n + 1 bytes). */
static inline void
ctxobs_hex(char *out, const uint8_t *b, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = hex[b[i] >> 4];
		out[2 * i + 1] = hex[b[i] & 15];
	}
	out[2 * n] = '\0';
}

/* The calling thread's trace-id in hex, or "none", in out. */
static inline __attribute__((unused)) const char *
ctxobs_trace(char out[33])
{
	const struct otel_thread_ctx_record *r = ctxobs_record();

	if (!r || r->valid != 1)
		return strcpy(out, "none");
	ctxobs_hex(out, r->trace_id, 16);
	return out;
}

/* "trace=<32 hex> span=<16 hex>", or "trace=- span=-" for none. */
static inline void
ctxobs_format(char *out, size_t n)
{
	const struct otel_thread_ctx_record *r = ctxobs_record();
	char t[33], s[17];

	if (!r || r->valid != 1) {
		snprintf(out, n, "trace=- span=-");
		return;
	}
	ctxobs_hex(t, r->trace_id, 16);
	ctxobs_hex(s, r->span_id, 8);
	snprintf(out, n, "trace=%s span=%s", t, s);
}

/* ctxobs_format() into the calling thread's own buffer, for printing and
 * comparing. */
static inline __attribute__((unused)) const char *
ctxobs_shown(void)
{
	static __thread char s[128];

	ctxobs_format(s, sizeof(s));
	return s;
}
