/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "pctx-read.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "maps.h"
#include "remote.h"

#define PCTXR_ATTEMPTS 8
/* How many times one read looks for the mapping again in the maps when
 * the header is no longer where it was (read_header()). */
#define PCTXR_REMAPS 8
/* How many OTEL_CTX mappings without an established header one read
 * passes over for the next one: a hostile process may map thousands, and
 * each step scans the maps again. */
#define PCTXR_SKIPS 8

/* How an attempt ended (pctxr_snapshot.last_err), for pctxr_describe() */
enum {
	PCTXR_HEADER = 1, /* reading the header */
	PCTXR_UPDATING,   /* the header said "being updated" */
	PCTXR_UNWRITTEN,  /* the header was all zero: not written yet */
	PCTXR_PAYLOAD,    /* reading the payload */
	PCTXR_CHANGED,    /* the header changed while the payload was read */
};
#define PCTXR_MAPS_MAX (64u << 20)

/* Address of the first OTEL_CTX mapping at or above from (the OTEP allows
 * one; pctxr_read_maps() says why a second is looked for). */
static int
find_mapping(const char *buf,
	     size_t len,
	     uint64_t from,
	     uint64_t *addr,
	     enum pctx_map_kind *kind)
{
	const char *line = buf;

	while (line < buf + len) {
		const char *nl = memchr(line, '\n', (size_t)(buf + len - line));
		size_t l = nl ? (size_t)(nl - line) : (size_t)(buf + len - line);
		struct maps_entry e;
		enum pctx_map_kind k;

		/* Like the eBPF profiler: never an executable mapping.  Every
		 * accepted name holds "OTEL_CTX": the other lines (thousands
		 * in a process with many threads) are skipped unparsed. */
		if (memmem(line, l, "OTEL_CTX", 8) &&
		    maps_parse_line(line, l, &e) == 0 && e.perms[0] == 'r' &&
		    e.perms[2] != 'x' &&
		    e.end - e.start >= sizeof(struct otel_process_ctx_header) &&
		    e.start >= from &&
		    (k = pctx_map_name_kind(e.path, e.path_len)) != PCTX_MAP_NONE) {
			*addr = e.start;
			*kind = k;
			return 0;
		}
		line += l + 1;
	}
	return -ENOENT;
}

static void
pause_briefly(void)
{
	struct timespec ts = {0, 1000000}; /* 1 ms: let the writer finish */

	nanosleep(&ts, NULL);
}

/* The header at *addr.  When nothing is mapped there any more, the
 * mapping was replaced (a writer that publishes again by mapping a new
 * OTEL_CTX region and unmapping the old one) or dropped since the maps
 * were read: look for it again in the maps as they are now, at most
 * *remaps_left more times.  Returns 0, -ENOENT (no mapping any more), or
 * the errno of the reads. */
static int
read_header(pid_t pid,
	    uint64_t *addr,
	    enum pctx_map_kind *kind,
	    unsigned *remaps_left,
	    struct otel_process_ctx_header *h)
{
	char path[64], *buf;
	size_t len;
	int r;

	while ((r = remote_read(pid, *addr, h, sizeof(*h))) == -EFAULT &&
	       *remaps_left > 0) {
		(*remaps_left)--;
		snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
		r = remote_read_file(path, PCTXR_MAPS_MAX, &buf, &len);
		if (r < 0)
			return r == -ENOENT ? -ESRCH : r;
		r = find_mapping(buf, len, 0, addr, kind);
		free(buf);
		if (r < 0)
			return r;
	}
	return r;
}

int
pctxr_read(pid_t pid, struct pctxr_snapshot *out)
{
	char path[64], *buf;
	size_t len;
	int r;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	r = remote_read_file(path, PCTXR_MAPS_MAX, &buf, &len);
	if (r < 0)
		return r == -ENOENT ? -ESRCH : r;
	r = pctxr_read_maps(pid, buf, len, out);
	free(buf);
	return r;
}

int
pctxr_read_maps(pid_t pid,
		const char *maps,
		size_t maps_len,
		struct pctxr_snapshot *out)
{
	struct otel_process_ctx_header h, h2;
	uint64_t addr;
	enum pctx_map_kind kind;
	uint8_t *payload = NULL;
	unsigned attempt, remaps_left = PCTXR_REMAPS, skips_left = PCTXR_SKIPS;
	int r;

	r = find_mapping(maps, maps_len, 0, &addr, &kind);
	if (r < 0)
		return r;
	out->map_addr = addr;
	out->kind = kind;
	for (attempt = 1; attempt <= PCTXR_ATTEMPTS; attempt++) {
		out->attempts = attempt;
		out->last_err = PCTXR_HEADER;
		r = read_header(pid, &addr, &kind, &remaps_left, &h);
		out->map_addr = addr;
		out->kind = kind;
		if (r < 0)
			break;
		out->no_signature =
			memcmp(h.signature, PCTX_SIGNATURE, PCTX_SIGNATURE_LEN) != 0;
		out->version = h.version;
		out->payload_size = h.payload_size;
		out->payload_addr = h.payload;
		/* A writer maps the memfd before it fills in the header (and
		 * early ones wrote the signature last): a header without its
		 * signature yet, and with version 0 or timestamp 0, is one
		 * about to be published, read again as one being updated.
		 * The OTEP orders only the timestamp (last, after a fence):
		 * the version may be stored before the signature.  So is one
		 * with our signature and timestamp 0. */
		if (out->no_signature &&
		    (h.version == 0 || h.monotonic_published_at_ns == 0) &&
		    memcmp(h.signature, "\0\0\0\0\0\0\0\0", 8) == 0) {
			out->last_err = PCTXR_UNWRITTEN;
			r = -EAGAIN;
			pause_briefly();
			continue;
		}
		if (!out->no_signature && h.monotonic_published_at_ns == 0) {
			out->last_err = PCTXR_UPDATING;
			r = -EAGAIN;
			pause_briefly();
			continue;
		}
		if (out->no_signature || h.version != PCTX_VERSION) {
			/* OTEP-4719: a mapping is established only by its
			 * signature and version.  Another one named OTEL_CTX
			 * above it (a process that breaks the one-context rule:
			 * a second SDK, an older writer's leftover) may be the
			 * process context: read that one instead of giving up,
			 * up to PCTXR_SKIPS of them. */
			r = -EBADMSG;
			if (skips_left-- == 0 ||
			    find_mapping(maps, maps_len, addr + 1, &addr, &kind) < 0)
				break;
			out->map_addr = addr;
			out->kind = kind;
			attempt = 0;
			continue;
		}
		if (h.payload_size == 0 || h.payload_size > PCTXR_PAYLOAD_CAP) {
			r = h.payload_size ? -E2BIG : -EBADMSG;
			break;
		}
		free(payload);
		payload = malloc(h.payload_size);
		if (!payload) {
			r = -ENOMEM;
			break;
		}
		out->last_err = PCTXR_PAYLOAD;
		r = remote_read(pid, h.payload, payload, h.payload_size);
		if (r == -EFAULT) {
			/* the writer freed the old payload after an update */
			r = -EAGAIN;
			continue;
		}
		if (r < 0)
			break;
		out->last_err = PCTXR_HEADER;
		r = read_header(pid, &addr, &kind, &remaps_left, &h2);
		out->map_addr = addr;
		out->kind = kind;
		if (r < 0)
			break;
		if (h2.monotonic_published_at_ns != h.monotonic_published_at_ns ||
		    h2.payload != h.payload || h2.payload_size != h.payload_size) {
			out->last_err = PCTXR_CHANGED;
			r = -EAGAIN;
			continue;
		}
		out->map_addr = addr;
		out->kind = kind;
		out->published_at_ns = h.monotonic_published_at_ns;
		out->payload = payload;
		out->payload_len = h.payload_size;
		out->attempts = attempt;
		return 0;
	}
	free(payload);
	return r;
}

void
pctxr_free(struct pctxr_snapshot *s)
{
	free(s->payload);
	s->payload = NULL;
	s->payload_len = 0;
}

void
pctxr_describe(
	int err, bool decode, const struct pctxr_snapshot *s, char *buf, size_t n)
{
	unsigned long long at = (unsigned long long)s->map_addr;
	unsigned long long pl = (unsigned long long)s->payload_addr;

	if (decode) {
		snprintf(buf, n,
			 "its payload (%u bytes at 0x%llx) is not a valid "
			 "ProcessContext "
			 "protobuf (%s)",
			 s->payload_size, pl, strerror(-err));
		return;
	}
	switch (err) {
	case -EBADMSG:
		if (s->no_signature)
			snprintf(buf, n,
				 "the mapping at 0x%llx does not start with the "
				 "signature " PCTX_SIGNATURE,
				 at);
		else if (s->version != PCTX_VERSION)
			snprintf(buf, n,
				 "the header at 0x%llx has version %u (ctxdump "
				 "reads version %u)",
				 at, s->version, PCTX_VERSION);
		else
			snprintf(buf, n, "the header at 0x%llx has payload_size 0", at);
		return;
	case -E2BIG:
		snprintf(buf, n,
			 "the header at 0x%llx has payload_size %u, more than the "
			 "%u bytes ctxdump reads",
			 at, s->payload_size, (unsigned)PCTXR_PAYLOAD_CAP);
		return;
	case -EAGAIN:
		if (s->last_err == PCTXR_UPDATING)
			snprintf(buf, n,
				 "the header at 0x%llx still said \"being updated\" "
				 "(monotonic_published_at_ns 0) after %u reads",
				 at, s->attempts);
		else if (s->last_err == PCTXR_UNWRITTEN)
			snprintf(buf, n,
				 "the header at 0x%llx was still empty (not "
				 "written yet) after %u reads",
				 at, s->attempts);
		else if (s->last_err == PCTXR_PAYLOAD)
			snprintf(buf, n,
				 "its payload (%u bytes at 0x%llx) is not readable: "
				 "%s (%u attempts)",
				 s->payload_size, pl, strerror(EFAULT), s->attempts);
		else
			snprintf(buf, n,
				 "the header at 0x%llx changed during each of %u "
				 "reads",
				 at, s->attempts);
		return;
	default:
		break;
	}
	if (s->last_err == PCTXR_PAYLOAD)
		snprintf(buf, n, "cannot read its payload (%u bytes at 0x%llx): %s",
			 s->payload_size, pl, strerror(-err));
	else if (s->map_addr)
		snprintf(buf, n, "cannot read the header at 0x%llx: %s", at,
			 strerror(-err));
	else
		snprintf(buf, n, "%s", strerror(-err));
}
