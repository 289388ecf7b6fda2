/* SPDX-License-Identifier: Apache-2.0 */
/* Loads two copies of an OTEP-4947 writer library under file names made
 * of control bytes (ESC sequences, a BEL, an invalid UTF-8 byte), for
 * ctxdump's hostile target tests: two objects define otel_thread_ctx_v1,
 * so ctxdump names the one it shows in a warning, and the name came from
 * the target.
 *
 *   hostile-dlopen DIR LIB [first]
 *
 * Copies LIB (a library that defines otel_thread_ctx_v1 and exports
 * writer_tls_set(), test/helpers/writer-tls-lib.c) into DIR twice,
 * dlopen()s both, publishes a valid record through each (with "first":
 * through the first one loaded only, which the loader binds the symbol to
 * and which is mapped above the second), prints "READY <pid>" and blocks
 * until stdin is closed; removes the copies. */
#include "config.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "thread-record.h"

static const char *const names[2] = {
	"libevil\x1b[7mone\x07\xff.so",
	"libevil\x1b]0;two\x07\x01.so",
};

static void
copy(const char *from, const char *to)
{
	struct stat st;
	int in = open(from, O_RDONLY | O_CLOEXEC), out;

	if (in < 0 || fstat(in, &st) < 0) {
		perror(from);
		exit(1);
	}
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	if (out < 0 || sendfile(out, in, NULL, (size_t)st.st_size) != st.st_size) {
		perror(to);
		exit(1);
	}
	close(in);
	close(out);
}

int
main(int argc, char **argv)
{
	static _Alignas(8) uint8_t rec[2][TREC_MAX_SIZE];
	char path[2][4096], line[64];
	int i;

	if (argc != 3 && !(argc == 4 && strcmp(argv[3], "first") == 0)) {
		fprintf(stderr, "usage: hostile-dlopen DIR LIB [first]\n");
		return 64;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 0; i < 2; i++) {
		void *h;
		void (*set)(void *);

		snprintf(path[i], sizeof(path[i]), "%s/%s", argv[1], names[i]);
		copy(argv[2], path[i]);
		h = dlopen(path[i], RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			fprintf(stderr, "hostile-dlopen: %s\n", dlerror());
			return 1;
		}
		set = (void (*)(void *))dlsym(h, "writer_tls_set");
		if (!set) {
			fprintf(stderr, "hostile-dlopen: %s\n", dlerror());
			return 1;
		}
		memset(rec[i], 0x66 + i, TREC_HEADER_SIZE);
		rec[i][24] = 1;
		rec[i][25] = 1;
		rec[i][26] = rec[i][27] = 0;
		if (argc == 3 || i == 0)
			set(rec[i]);
	}
	printf("READY %d\n", (int)getpid());
	while (fgets(line, sizeof(line), stdin))
		;
	for (i = 0; i < 2; i++)
		unlink(path[i]);
	return 0;
}
