/* SPDX-License-Identifier: Apache-2.0 */
/* Replay driver: runs every file named on the command line (directories:
 * every regular file in them) through a harness's LLVMFuzzerTestOneInput(),
 * without libFuzzer.  Built with gcc into the unit suite, it keeps the seed
 * corpora and every crasher found so far (test/fuzz/regress/) running in the
 * normal, sanitizer and valgrind test setups.  Each input gets a buffer of
 * exactly its size, so that a read past the end is caught by ASan and
 * valgrind.  Exits 1 if no input was found (a moved corpus must not turn the
 * test into a no-op). */
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static unsigned n_inputs;

static void
run_file(const char *path)
{
	struct stat st;
	uint8_t *buf;
	size_t off = 0;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "fuzz-main: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!buf) {
		fprintf(stderr, "fuzz-main: %s: out of memory\n", path);
		exit(1);
	}
	while (off < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + off, (size_t)st.st_size - off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			fprintf(stderr, "fuzz-main: %s: short read\n", path);
			exit(1);
		}
		off += (size_t)r;
	}
	close(fd);
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "fuzz-main: %s (%zu bytes)\n", path, off);
	(void)LLVMFuzzerTestOneInput(buf, off);
	free(buf);
	n_inputs++;
}

static void
run_path(const char *path)
{
	struct dirent **names;
	struct stat st;
	int n, i;

	if (stat(path, &st) < 0) {
		fprintf(stderr, "fuzz-main: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	if (!S_ISDIR(st.st_mode)) {
		run_file(path);
		return;
	}
	n = scandir(path, &names, NULL, alphasort);
	if (n < 0) {
		fprintf(stderr, "fuzz-main: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	for (i = 0; i < n; i++) {
		char sub[4096];

		if (names[i]->d_name[0] != '.') {
			snprintf(sub, sizeof(sub), "%s/%s", path, names[i]->d_name);
			if (stat(sub, &st) == 0 && S_ISREG(st.st_mode))
				run_file(sub);
		}
		free(names[i]);
	}
	free(names);
}

int
main(int argc, char **argv)
{
	int i;

	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (i = 1; i < argc; i++)
		run_path(argv[i]);
	if (n_inputs == 0) {
		fprintf(stderr, "fuzz-main: no inputs\n");
		return 1;
	}
	printf("%u inputs ok\n", n_inputs);
	return 0;
}
