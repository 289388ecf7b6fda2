/* SPDX-License-Identifier: Apache-2.0 */
/* Link-time stubs the request-model tests need when they compile
 * preload/request-ctx.c in (include it after "request-ctx.c"): the
 * configuration, fixed trace and span ids, and a tracestate stub that keeps
 * the lines it is given, joined with '|' (what the two entry points pass
 * must be the same, not just what survives validation).  Include from one
 * .c file per program only: these are definitions. */
#ifndef CTXSHIM_TEST_REQUEST_STUBS_H
#define CTXSHIM_TEST_REQUEST_STUBS_H

#include <errno.h>
#include <stdint.h>
#include <string.h>

struct ctxshim_config ctxshim_cfg;

void
ctxshim_new_trace_id(uint8_t id[16])
{
	memset(id, 0x11, 16);
}

void
ctxshim_new_span_id(uint8_t id[8])
{
	memset(id, 0x22, 8);
}

/* A program that wants another tracestate stub defines
 * TEST_REQUEST_STUBS_OWN_TRACESTATE before including this. */
#ifndef TEST_REQUEST_STUBS_OWN_TRACESTATE
int
ctxshim_ctx_set_tracestate(struct ctxshim_ctx *c,
			   const char *const *lines,
			   const size_t *lens,
			   size_t n_lines)
{
	size_t i, at = 0;

	for (i = 0; i < n_lines; i++) {
		if (at + lens[i] + 1 > sizeof(c->tracestate))
			return -1;
		memcpy(c->tracestate + at, lines[i], lens[i]);
		at += lens[i];
		c->tracestate[at++] = '|';
	}
	c->tracestate_len = (uint16_t)at;
	return 0;
}
#endif

/* ctxshim_request_ctx_whole() as conn.c calls it: only after the cheap
 * tests it leaves to its caller. */
static inline int
ctx_whole(struct ctxshim_ctx *c,
	  struct http_scan *st,
	  const struct http_scan_config *cfg,
	  const void *buf,
	  size_t len,
	  const int index[CTXSHIM_MAX_HEADER_ATTRS])
{
	if (!http_scan_whole_ready(st, buf, len))
		return -EAGAIN;
	return ctxshim_request_ctx_whole(c, st, cfg, buf, len, index);
}

#define TP_V00 "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

#endif
