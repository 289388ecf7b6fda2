/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP/2 per-stream header path (hooks/hook-h2.h): arbitrary header
 * fields, in order, then the collected request.  Input: a sequence of
 * [u8 name length][name][u16 value length, little endian][value]. */
#include "fuzz.h"

#include <strings.h>
#include <string.h>

#include "hook-h2.h"
#include "w3c.h"

static const char names[][CTXSHIM_HEADER_NAME_MAX] = {"x-request-id", "x-b3-traceid"};

static bool
within(const void *p, size_t len, const void *base, size_t size)
{
	const char *c = p, *b = base;

	return len == 0 || (c >= b && c + len <= b + size);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct hook_h2_req q;
	static const char *ts_lines[4096];
	static size_t ts_lens[4096];
	struct hook_h2_view v;
	unsigned n_tp = 0, i;
	size_t off = 0, n_ts = 0;

	hook_h2_req_init(&q);
	while (off < size) {
		size_t nl = data[off++], vl;
		const uint8_t *name, *value;

		if (size - off < nl + 2)
			break;
		name = data + off;
		off += nl;
		vl = (size_t)data[off] | (size_t)data[off + 1] << 8;
		off += 2;
		if (size - off < vl)
			vl = size - off;
		value = data + off;
		off += vl;
		if (nl == 11 && strncasecmp((const char *)name, "traceparent", 11) == 0)
			n_tp++;
		if (nl == 10 &&
		    strncasecmp((const char *)name, "tracestate", 10) == 0 &&
		    n_ts < sizeof(ts_lens) / sizeof(ts_lens[0])) {
			ts_lines[n_ts] = (const char *)value;
			ts_lens[n_ts++] = vl;
		}
		hook_h2_req_header(&q, names, 2, name, nl, value, vl);
	}
	hook_h2_req_view(&q, &v);

	FUZZ_CHECK(q.method_len <= HOOK_H2_METHOD_MAX);
	FUZZ_CHECK(q.path_len <= HOOK_H2_PATH_MAX);
	FUZZ_CHECK(q.tp_len <= HOOK_H2_TP_MAX);
	FUZZ_CHECK(q.ts_len <= HOOK_H2_TS_MAX);
	FUZZ_CHECK(within(v.r.method, v.r.method_len, &q, sizeof(q)));
	FUZZ_CHECK(within(v.r.target, v.r.target_len, &q, sizeof(q)));
	FUZZ_CHECK(within(v.r.traceparent, v.r.traceparent_len, &q, sizeof(q)));
	FUZZ_CHECK((v.r.traceparent != NULL) == (n_tp > 0));
	FUZZ_CHECK(v.r.traceparent_repeated == (n_tp > 1));
	for (i = 0; i < CTXSHIM_MAX_HEADER_ATTRS; i++) {
		FUZZ_CHECK(within(v.r.extra[i], v.r.extra_len[i], &q, sizeof(q)));
		FUZZ_CHECK(v.r.extra_len[i] <= HOOK_H2_EXTRA_MAX);
		FUZZ_CHECK(i < 2 || !v.r.extra[i]);
	}
	{
		struct w3c_tracestate ts;
		bool kept = false;

		if (v.r.n_tracestate) {
			FUZZ_CHECK(v.r.n_tracestate == 1);
			FUZZ_CHECK(within(v.r.tracestate[0], v.r.tracestate_lens[0], &q,
					  sizeof(q)));
			kept = w3c_tracestate_parse(v.r.tracestate, v.r.tracestate_lens,
						    1, &ts) == 0;
		}
		/* what the request keeps (a stored list that parses) is there
		 * exactly when the whole list, all fields joined, is valid
		 * (W3C: an invalid one is discarded whole) */
		if (n_ts < sizeof(ts_lens) / sizeof(ts_lens[0]))
			FUZZ_CHECK(kept ==
				   (n_ts > 0 && w3c_tracestate_parse(ts_lines, ts_lens,
								     n_ts, &ts) == 0));
	}
	if (v.r.traceparent) {
		struct w3c_traceparent tp;

		(void)w3c_traceparent_parse(v.r.traceparent, v.r.traceparent_len, &tp);
	}
	return 0;
}
