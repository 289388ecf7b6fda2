/* SPDX-License-Identifier: Apache-2.0 */
/* /proc/PID/maps lines as ctxdump reads them (maps_parse_line, then
 * pctx_map_name_kind on the pathname), over arbitrary bytes split into
 * lines the way tools/ctxdump does.  Oracles: an accepted line prints back
 * in the kernel's format and parses to the same entry; the pathname lies in
 * the line; only the six exact OTEL_CTX names are classified. */
#include "fuzz.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "maps.h"
#include "process-ctx.h"

static enum pctx_map_kind
reference_kind(const char *p, size_t n)
{
	static const struct {
		const char *name;
		enum pctx_map_kind kind;
	} names[] = {
		{"[anon_shmem:OTEL_CTX]", PCTX_MAP_ANON_SHMEM},
		{"[anon:OTEL_CTX]", PCTX_MAP_ANON},
		{"/memfd:OTEL_CTX", PCTX_MAP_MEMFD},
	};
	static const char del[] = " (deleted)";
	size_t i, l;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		l = strlen(names[i].name);
		if (n < l || memcmp(p, names[i].name, l) != 0)
			continue;
		if (n == l ||
		    (n == l + strlen(del) && memcmp(p + l, del, strlen(del)) == 0))
			return names[i].kind;
	}
	return PCTX_MAP_NONE;
}

static void
check_line(const char *line, size_t len)
{
	static char buf[8192];
	struct maps_entry e, e2, poison;
	int r, n;

	memset(&poison, 0xa5, sizeof(poison));
	e = poison;
	r = maps_parse_line(line, len, &e);
	if (r < 0) {
		FUZZ_CHECK(r == -EINVAL);
		FUZZ_CHECK(memcmp(&e, &poison, sizeof(e)) == 0);
		return;
	}
	FUZZ_CHECK(e.start <= e.end);
	FUZZ_CHECK(e.perms[4] == '\0' && strlen(e.perms) == 4);
	FUZZ_CHECK(e.path >= line && e.path + e.path_len <= line + len);
	FUZZ_CHECK(e.path_len == 0 || e.path[0] != ' ');
	FUZZ_CHECK(pctx_map_name_kind(e.path, e.path_len) ==
		   reference_kind(e.path, e.path_len));

	if (e.path_len > sizeof(buf) - 128)
		return;
	/* the path may hold NUL bytes: copied, not printed */
	n = snprintf(buf, sizeof(buf),
		     "%" PRIx64 "-%" PRIx64 " %s %08" PRIx64 " %02x:%02x %" PRIu64 "%s",
		     e.start, e.end, e.perms, e.offset, e.dev_major, e.dev_minor,
		     e.inode, e.path_len ? "    " : "");
	FUZZ_CHECK(n > 0 && (size_t)n + e.path_len + 1 < sizeof(buf));
	memcpy(buf + n, e.path, e.path_len);
	n += (int)e.path_len;
	buf[n++] = '\n';
	FUZZ_CHECK(maps_parse_line(buf, (size_t)n, &e2) == 0);
	FUZZ_CHECK(e2.start == e.start && e2.end == e.end && e2.offset == e.offset);
	FUZZ_CHECK(memcmp(e2.perms, e.perms, 5) == 0);
	FUZZ_CHECK(e2.dev_major == e.dev_major && e2.dev_minor == e.dev_minor);
	FUZZ_CHECK(e2.inode == e.inode);
	FUZZ_CHECK(e2.path_len == e.path_len &&
		   memcmp(e2.path, e.path, e.path_len) == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data, *line = buf;

	/* the loop of tools/ctxdump (objs_load, find_mapping) */
	while (line < buf + size) {
		const char *nl = memchr(line, '\n', (size_t)(buf + size - line));
		size_t l = nl ? (size_t)(nl - line) : (size_t)(buf + size - line);

		check_line(line, l);
		if (nl)
			check_line(line, l + 1); /* with its newline */
		line += l + 1;
	}
	FUZZ_CHECK(pctx_map_name_kind(buf, size) == reference_kind(buf, size));
	return 0;
}
