/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The context model for an incoming HTTP request, shared by the socket
 * level and the library hooks so that a request gets the same context
 * whichever layer saw it:
 *
 * - valid traceparent: a server span like a non-recording SDK span -- the
 *   same trace-id, a new span-id, the incoming flags (known bits), the
 *   incoming parent-id kept for ctxdump, tracestate kept (truncated to 512
 *   bytes by whole entries);
 * - none, or invalid (which also drops tracestate, W3C): a new trace with
 *   random ids and the random flag (plus sampled if CTXSHIM_SAMPLED=1),
 *   unless CTXSHIM_NEW_TRACES=0, which publishes the attributes with zero
 *   ids;
 * - attributes: http.request.method, url.path (query removed unless
 *   CTXSHIM_URL_QUERY=1), then the CTXSHIM_HEADER_ATTRS headers. */

#include <stdbool.h>
#include <stddef.h>

#include "cfg.h"
#include "thread-ctx.h"

struct ctxshim_request {
	const char *method;
	size_t method_len;
	const char *target; /* request-target as received */
	size_t target_len;
	const char *traceparent; /* NULL = absent */
	size_t traceparent_len;
	bool traceparent_repeated; /* two traceparent fields: invalid */
	const char *const *tracestate; /* header lines in order */
	const size_t *tracestate_lens;
	size_t n_tracestate;
	/* Values of the configured headers, by CTXSHIM_HEADER_ATTRS index;
	 * NULL = absent. */
	const char *extra[CTXSHIM_MAX_HEADER_ATTRS];
	size_t extra_len[CTXSHIM_MAX_HEADER_ATTRS];
};

/* Fill c for request r.  Pure apart from drawing random ids. */
void ctxshim_request_ctx(struct ctxshim_ctx *c, const struct ctxshim_request *r);

/* The path part of an HTTP request-target (origin-form or absolute-form),
 * with the query unless keep_query.  Returns a pointer into target. */
const char *ctxshim_url_path(const char *target, size_t len, bool keep_query,
			     size_t *path_len);
