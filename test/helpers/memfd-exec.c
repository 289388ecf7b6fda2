/* SPDX-License-Identifier: Apache-2.0 */
/* Runs a program from a copy of it in a memfd, as in-memory loaders and
 * some container runtimes do.
 *
 *   memfd-exec PROGRAM [ARG...]
 *
 * copies PROGRAM into a memfd named after it and fexecve()s that with
 * argv PROGRAM ARG... (the pid stays this one's).  A statically linked
 * PROGRAM then maps no file at all: its maps name only
 * "/memfd:NAME (deleted)" (test-ctxdump-static.c).  Exits 127 with a
 * message if it cannot. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef MFD_EXEC
#define MEMFD_EXEC MFD_EXEC
#else
#define MEMFD_EXEC 0x0010U /* <linux/memfd.h> since Linux 6.3 */
#endif

extern char **environ;

int
main(int argc, char **argv)
{
	const char *name;
	char buf[1 << 16];
	ssize_t n;
	int in, fd;

	if (argc < 2) {
		fputs("usage: memfd-exec PROGRAM [ARG...]\n", stderr);
		return 127;
	}
	name = strrchr(argv[1], '/') ? strrchr(argv[1], '/') + 1 : argv[1];
	in = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (in < 0) {
		perror(argv[1]);
		return 127;
	}
	/* close-on-exec is fine for an ELF program: the kernel has read it
	 * by the time the descriptor is closed (not so for a script) */
	/* MFD_EXEC: where vm.memfd_noexec is 1 a memfd is created sealed
	 * against execution unless asked (Linux 6.3; older kernels reject
	 * the flag: then none) */
	fd = memfd_create(name, MFD_CLOEXEC | MEMFD_EXEC);
	if (fd < 0 && errno == EINVAL)
		fd = memfd_create(name, MFD_CLOEXEC);
	if (fd < 0) {
		perror("memfd-exec: memfd_create");
		return 127;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(fd, buf, (size_t)n) != n) {
			perror("memfd-exec: write");
			return 127;
		}
	if (n < 0) {
		perror(argv[1]);
		return 127;
	}
	close(in);
	fexecve(fd, argv + 1, environ);
	perror("memfd-exec: fexecve");
	return 127;
}
