/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Attribute keys the shim publishes, by their index in
 * threadlocal.attribute_key_map.  The map is append-only: never reorder. */
enum ctxshim_key {
	CTXSHIM_KEY_METHOD = 0, /* http.request.method */
	CTXSHIM_KEY_PATH = 1,   /* url.path */
	CTXSHIM_KEY_PARENT = 2, /* ctxshim.parent_span_id: the incoming parent-id */
	CTXSHIM_KEY_FIRST_HEADER = 3,
};

#define CTXSHIM_MAX_HEADER_ATTRS 8
/* With its NUL: names of up to 31 bytes, the longest the socket level's
 * scanner matches (HTTP_SCAN_NAME_MAX; conn.c checks), so that a name
 * the key map lists is captured on every path. */
#define CTXSHIM_HEADER_NAME_MAX 32

/* What outgoing requests carry (CTXSHIM_PROPAGATE). */
enum ctxshim_propagate {
	CTXSHIM_PROPAGATE_CHILD = 0,   /* default: a new span-id per request */
	CTXSHIM_PROPAGATE_OFF,         /* "0": inject nothing */
	CTXSHIM_PROPAGATE_TRANSPARENT, /* "transparent": the incoming parent-id */
};

/* Configuration read once, in the constructor, with secure_getenv() (so a
 * setuid program ignores it).  Read-only afterwards: hooks read it without
 * locks. */
struct ctxshim_config {
	bool disabled;             /* CTXSHIM_DISABLE=1 */
	bool test_force_anon;      /* CTXSHIM_TEST_FORCE_ANON=1 (tests only) */
	bool new_traces;           /* CTXSHIM_NEW_TRACES (default 1) */
	bool sample_new;           /* CTXSHIM_SAMPLED: sampled bit on new traces */
	bool url_query;            /* CTXSHIM_URL_QUERY: keep the query in url.path */
	bool follow_exec;          /* CTXSHIM_FOLLOW_EXEC: re-add the shim at exec */
	bool exec_traceparent;     /* CTXSHIM_EXEC_TRACEPARENT: the thread's
				 * context to TRACEPARENT at exec */
	bool inherited;            /* CTXSHIM_INHERITED (default 1): follow the
				 * connections a daemon inherits (conn.c) */
	unsigned max_header_bytes; /* CTXSHIM_MAX_HEADER_BYTES (default 16384) */
	enum ctxshim_propagate propagate; /* CTXSHIM_PROPAGATE (hooks/hook-curl.c) */
	unsigned n_header_attrs;          /* CTXSHIM_HEADER_ATTRS=x-request-id,… */
	char header_attrs[CTXSHIM_MAX_HEADER_ATTRS][CTXSHIM_HEADER_NAME_MAX];
};

extern struct ctxshim_config ctxshim_cfg;

/* Fill ctxshim_cfg from the environment; logs what it ignored. */
void ctxshim_config_load(void);

/* True for "1", "yes", "true", "on" (any case). */
bool ctxshim_env_bool(const char *name, bool dflt);
