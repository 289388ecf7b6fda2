/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The OTEP-4947 writer shared by the churn and exits helpers: the
 * executable defines and exports otel_thread_ctx_v1 itself (local-exec),
 * and worker i publishes a known record: trace id 16 bytes of (i + 1),
 * span id 8 bytes of (0xa0 + i), flags 01, attribute 0 "<name>-<i>". */

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "thread-record.h"

__attribute__((visibility("default"))) __thread void *otel_thread_ctx_v1;

struct record {
	struct otel_thread_ctx_record h;
	uint8_t attrs[64];
};

static inline void
publish(struct record *r)
{
	/* signal-handler semantics (OTEP-4947): a compiler fence suffices */
	atomic_signal_fence(memory_order_seq_cst);
	*(void *volatile *)&otel_thread_ctx_v1 = r;
	atomic_signal_fence(memory_order_seq_cst);
}

static inline void
fill(struct record *r, unsigned i, const char *name)
{
	int n;

	memset(r, 0, sizeof(*r));
	memset(r->h.trace_id, (int)(i + 1), sizeof(r->h.trace_id));
	memset(r->h.span_id, (int)(0xa0 + i), sizeof(r->h.span_id));
	r->h.trace_flags = 1;
	n = snprintf((char *)r->attrs + 2, sizeof(r->attrs) - 2, "%s-%u", name, i);
	r->attrs[0] = 0;
	r->attrs[1] = (uint8_t)n;
	r->h.attrs_data_size = (uint16_t)(n + 2);
	r->h.valid = 1;
}
