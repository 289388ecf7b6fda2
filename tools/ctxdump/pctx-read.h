/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Reading a process's OTEP-4719 process context from outside: find the
 * OTEL_CTX mapping in /proc/PID/maps and copy the payload with the
 * seqlock protocol of the OTEP (timestamp 0 = being written; a changed
 * timestamp = torn read, start again). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "process-ctx.h"

/* Size cap for a payload; the same as the shared decoder's limit. */
#define PCTXR_PAYLOAD_CAP PCTX_PAYLOAD_MAX

struct pctxr_snapshot {
	uint64_t map_addr;
	enum pctx_map_kind kind;
	uint64_t published_at_ns;
	uint8_t *payload; /* malloc'd */
	size_t payload_len;
	unsigned attempts;
	/* What was last seen, also after a failure (for pctxr_describe()):
	 * the header's version and payload fields, and how the last attempt
	 * ended. */
	uint32_t version;
	uint32_t payload_size;
	uint64_t payload_addr;
	int last_err;
	bool no_signature;
};

/* Returns 0, -ENOENT if the process has no OTEL_CTX mapping, -EBADMSG if
 * the mapping has no valid header (signature, version), -E2BIG if the
 * payload is larger than the cap, -EAGAIN if no consistent copy was made in
 * a few attempts, or the errno of the reads (-ESRCH, -EPERM). */
int pctxr_read(pid_t pid, struct pctxr_snapshot *out);

/* The same with the text of /proc/PID/maps already read (ctxdump reads
 * it once for everything it looks up). */
int pctxr_read_maps(pid_t pid,
		    const char *maps,
		    size_t maps_len,
		    struct pctxr_snapshot *out);

void pctxr_free(struct pctxr_snapshot *s);

/* Why pctxr_read() (err, its result) or pctx_decode() (with decode set)
 * failed on s, in words for a message: what was wrong, at which
 * address, with the values that were read. */
void pctxr_describe(
	int err, bool decode, const struct pctxr_snapshot *s, char *buf, size_t n);
