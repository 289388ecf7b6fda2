/* SPDX-License-Identifier: Apache-2.0 */
/* Preloaded: maps the whole file of the loaded object whose name ends with
 * $MAP_BELOW ("libwtls-tlsdesc.so", or the executable's name) read-only at
 * offset 0, below the loader's mapping of it, before main() runs, as
 * libbacktrace, in-process symbolizers and crash reporters do to read their
 * own debug information.  /proc/PID/maps then shows two offset-0 mappings
 * of the file, the lower one not the loader's (test-ctxdump-tls.c).  Exits
 * 2 with a message on stderr when it cannot place the mapping, so that a
 * test never passes without it. */
#include "config.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE 4096u

static void __attribute__((noreturn)) fail(const char *what, const char *on)
{
	fprintf(stderr, "map-below: %s: %s\n", what, on);
	_exit(2);
}

__attribute__((constructor)) static void
map_below(void)
{
	const char *want = getenv("MAP_BELOW");
	char line[4096], path[4096] = "";
	uint64_t lib_start = 0, prev_end = 0, hole = 0, len;
	struct stat st;
	size_t wl;
	void *p;
	FILE *f;
	int fd;

	if (!want || !*want)
		return;
	wl = strlen(want);
	f = fopen("/proc/self/maps", "re");
	if (!f)
		fail("cannot open", "/proc/self/maps");
	/* the loader's lowest mapping of the file: its first line */
	while (fgets(line, sizeof(line), f)) {
		uint64_t s, e, off;
		char *name = strchr(line, '/');
		size_t nl;

		if (!name || sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %" SCNx64, &s,
				    &e, &off) != 3)
			continue;
		nl = strcspn(name, "\n");
		name[nl] = '\0';
		if (off == 0 && nl >= wl && strcmp(name + nl - wl, want) == 0 &&
		    name[nl - wl - 1] == '/') {
			lib_start = s;
			snprintf(path, sizeof(path), "%s", name);
			break;
		}
	}
	if (!lib_start)
		fail("no mapping of", want);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0)
		fail("cannot open", path);
	len = ((uint64_t)st.st_size + PAGE - 1) & ~(uint64_t)(PAGE - 1);
	/* the highest hole below it that the file fits in */
	rewind(f);
	while (fgets(line, sizeof(line), f)) {
		uint64_t s, e, lo;

		if (sscanf(line, "%" SCNx64 "-%" SCNx64, &s, &e) != 2 || s > lib_start)
			break;
		lo = prev_end < 0x10000 ? 0x10000 : prev_end;

		if (s >= lo + len)
			hole = s - len;
		prev_end = e;
	}
	fclose(f);
	if (!hole)
		fail("no hole below the loader's mapping of", path);
	p = mmap((void *)(uintptr_t)hole, len, PROT_READ,
		 MAP_PRIVATE | MAP_FIXED_NOREPLACE, fd, 0);
	if (p != (void *)(uintptr_t)hole)
		fail("cannot map below the loader's mapping", path);
	close(fd);
}
