/* SPDX-License-Identifier: Apache-2.0 */
/* A target that truncates a library it has loaded while ctxdump reads it
 * (test-ctxdump-hostile.c): a file ctxdump maps (libelf's
 * ELF_C_READ_MMAP) then raises SIGBUS on access past its new end.
 *
 *   hostile-truncate DIR LIB
 *
 * Copies LIB (test/helpers/trunc-lib.c) into DIR, dlopen()s the copy,
 * starts a thread blocked in its trunc_wait() and prints "READY <pid>
 * <tid>" once that thread is in its read().  Then, one command a line on
 * stdin:
 *   t     truncates the copy to 0 bytes; prints "TRUNCATED"
 *   r     writes its content back; prints "RESTORED"
 *   loop  prints "LOOPING", then truncates and restores it over and over
 *         until the next line; prints "LOOPED <times>"
 * Nothing of this process touches the library's pages after the load, so
 * it lives on with the file truncated (the kernel drops the relocated
 * private copies of them too: the library is broken from then on).  At the end of stdin it removes
 * the copy and exits 0. */
#include "config.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int (*trunc_wait)(int fd);
static int wait_fd;
static volatile int waiter_tid;

static void *
waiter(void *arg)
{
	(void)arg;
	waiter_tid = (int)syscall(SYS_gettid);
	(void)trunc_wait(wait_fd);
	return NULL;
}

/* Whether thread tid is in read(): /proc/self/task/TID/syscall starts
 * with the number of the system call it waits in. */
static int
in_read(int tid)
{
	char path[64], buf[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return atoi(buf) == SYS_read && buf[0] >= '0' && buf[0] <= '9';
}

static void
die(const char *what)
{
	perror(what);
	exit(1);
}

static void
restore(int fd, const char *img, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t w = pwrite(fd, img + off, len - off, (off_t)off);

		if (w <= 0)
			die("pwrite");
		off += (size_t)w;
	}
}

int
main(int argc, char **argv)
{
	char path[4096], line[64], *img;
	struct stat st;
	pthread_t th;
	int in, fd, p[2];
	void *h;

	if (argc != 3) {
		fprintf(stderr, "usage: hostile-truncate DIR LIB\n");
		return 64;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	snprintf(path, sizeof(path), "%s/libtrunc-copy.so", argv[1]);
	in = open(argv[2], O_RDONLY | O_CLOEXEC);
	if (in < 0 || fstat(in, &st) < 0)
		die(argv[2]);
	img = malloc((size_t)st.st_size);
	if (!img || read(in, img, (size_t)st.st_size) != st.st_size)
		die(argv[2]);
	close(in);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	if (fd < 0)
		die(path);
	restore(fd, img, (size_t)st.st_size);
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h || !(trunc_wait = (int (*)(int))dlsym(h, "trunc_wait"))) {
		fprintf(stderr, "hostile-truncate: %s\n", dlerror());
		return 1;
	}
	if (pipe2(p, O_CLOEXEC) < 0)
		die("pipe2");
	wait_fd = p[0];
	if (pthread_create(&th, NULL, waiter, NULL) != 0)
		die("pthread_create");
	while (!waiter_tid || !in_read(waiter_tid))
		sched_yield();
	printf("READY %d %d\n", (int)getpid(), waiter_tid);
	while (fgets(line, sizeof(line), stdin)) {
		if (strcmp(line, "t\n") == 0) {
			if (ftruncate(fd, 0) < 0)
				die("ftruncate");
			printf("TRUNCATED\n");
		} else if (strcmp(line, "r\n") == 0) {
			restore(fd, img, (size_t)st.st_size);
			printf("RESTORED\n");
		} else if (strcmp(line, "loop\n") == 0) {
			struct pollfd pf = {.fd = STDIN_FILENO, .events = POLLIN};
			unsigned long n = 0;

			printf("LOOPING\n");
			while (poll(&pf, 1, 0) == 0) {
				if (ftruncate(fd, 0) < 0)
					die("ftruncate");
				restore(fd, img, (size_t)st.st_size);
				n++;
			}
			printf("LOOPED %lu\n", n);
		}
	}
	unlink(path);
	/* not exit(): the loader would run the copy's destructors, from
	 * pages that may be gone */
	_exit(0);
}
