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
#include <stdio.h>

/* The calling thread's published record, or NULL. */
static inline const struct otel_thread_ctx_record *
ctxobs_record(void)
{
	void *const *slot = dlsym(RTLD_DEFAULT, OTEL_THREAD_CTX_SYMBOL);

	return slot ? (const struct otel_thread_ctx_record *)*slot : NULL;
}

/* "trace=<32 hex> span=<16 hex>", or "trace=- span=-" for none. */
static inline void
ctxobs_format(char *out, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const struct otel_thread_ctx_record *r = ctxobs_record();
	char t[33], s[17];
	int i;

	if (!r || r->valid != 1) {
		snprintf(out, n, "trace=- span=-");
		return;
	}
	for (i = 0; i < 16; i++) {
		t[2 * i] = hex[r->trace_id[i] >> 4];
		t[2 * i + 1] = hex[r->trace_id[i] & 15];
	}
	for (i = 0; i < 8; i++) {
		s[2 * i] = hex[r->span_id[i] >> 4];
		s[2 * i + 1] = hex[r->span_id[i] & 15];
	}
	t[32] = s[16] = '\0';
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
