/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* One line of /proc/PID/maps:
 *   start-end perms offset major:minor inode [padding pathname]
 * Pure parsing of a line the caller has read; no I/O. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct maps_entry {
	uint64_t start, end, offset;
	char perms[5]; /* "rw-p", NUL-terminated */
	unsigned dev_major, dev_minor;
	uint64_t inode;
	/* Points into the line, not NUL-terminated; path_len 0 = no pathname.
	 * Spaces inside the name and a " (deleted)" suffix are kept. */
	const char *path;
	size_t path_len;
};

/* Parse len bytes of line (a trailing '\n' is allowed).  Returns 0, or
 * -EINVAL for a malformed line; *e is only written on success. */
int maps_parse_line(const char *line, size_t len, struct maps_entry *e);

/* Whether the path of *len bytes ends with the " (deleted)" that the
 * kernel appends to a file unlinked since it was mapped; if so, *len
 * drops it.  The suffix only: a directory may be named "x (deleted)". */
bool maps_path_deleted(const char *path, size_t *len);
