/* SPDX-License-Identifier: Apache-2.0 */
/* A target that maps many objects (test-ctxdump-hostile.c): more than a
 * low RLIMIT_NOFILE lets ctxdump hold descriptors for.
 *
 *   many-objects DIR LIB N [FN [PAD_MB]]
 *
 * Copies LIB N times into DIR (each another inode, so another object to
 * ctxdump), dlopen()s each copy, prints "READY <pid>" and waits for the
 * end of stdin; then removes the copies and exits 0.  With FN (not "-"),
 * a function void FN(int fd) of LIB that blocks reading fd (liblate-a.so's
 * late_a): each copy's runs on a thread of its own, so that the stacks
 * go through every copy; READY once every one of them is blocked in
 * read().  With PAD_MB, each copy is PAD_MB MiB longer than LIB: a hole
 * at its end, which the loader does not map (so that ctxdump has no
 * reason to read it). */
#include "config.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int block[2];

struct blocked {
	void *fn;
	_Atomic pid_t tid;
};

static void
copy(const char *from, const char *to, long pad_mb)
{
	char buf[65536];
	ssize_t n;
	off_t len = 0;
	int in = open(from, O_RDONLY | O_CLOEXEC),
	    out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);

	if (in < 0 || out < 0) {
		perror(in < 0 ? from : to);
		exit(1);
	}
	while ((n = read(in, buf, sizeof(buf))) > 0) {
		if (write(out, buf, (size_t)n) != n) {
			perror(to);
			exit(1);
		}
		len += n;
	}
	/* sparse: costs no disk, reads as zeros */
	if (pad_mb > 0 && ftruncate(out, len + ((off_t)pad_mb << 20)) < 0) {
		perror(to);
		exit(1);
	}
	close(in);
	close(out);
}

static void *
blocked_main(void *arg)
{
	struct blocked *b = arg;
	void (*f)(int);

	*(void **)&f = b->fn;
	atomic_store(&b->tid, (pid_t)syscall(SYS_gettid));
	f(block[0]);
	return NULL;
}

/* Wait until thread b is blocked in read(): its system call, as
 * /proc/self/task/TID/syscall shows it while it is blocked. */
static void
wait_blocked(struct blocked *b)
{
	char path[64], buf[64];

	for (;;) {
		pid_t tid = atomic_load(&b->tid);
		ssize_t n = -1;
		int fd;

		if (tid) {
			snprintf(path, sizeof(path), "/proc/self/task/%d/syscall",
				 (int)tid);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd >= 0) {
				n = read(fd, buf, sizeof(buf) - 1);
				close(fd);
			}
		}
		if (n > 0) {
			buf[n] = '\0';
			if (buf[0] >= '0' && buf[0] <= '9' &&
			    strtol(buf, NULL, 10) == SYS_read)
				return;
		}
		usleep(1000);
	}
}

int
main(int argc, char **argv)
{
	const char *fn = argc > 4 && strcmp(argv[4], "-") != 0 ? argv[4] : NULL;
	long pad_mb = argc > 5 ? atol(argv[5]) : 0;
	struct blocked *th = NULL;
	char path[4096], c;
	int i, n;

	if (argc < 4 || argc > 6 || (n = atoi(argv[3])) <= 0 || pad_mb < 0) {
		fprintf(stderr, "usage: many-objects DIR LIB N [FN [PAD_MB]]\n");
		return 64;
	}
	if (pipe2(block, O_CLOEXEC) < 0 || !(th = calloc((size_t)n, sizeof(*th)))) {
		perror("many-objects");
		return 1;
	}
	for (i = 0; i < n; i++) {
		pthread_t pt;
		void *h;

		snprintf(path, sizeof(path), "%s/libmany-%d.so", argv[1], i);
		copy(argv[2], path, pad_mb);
		h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			fprintf(stderr, "many-objects: %s\n", dlerror());
			return 1;
		}
		if (!fn)
			continue;
		th[i].fn = dlsym(h, fn);
		if (!th[i].fn || pthread_create(&pt, NULL, blocked_main, &th[i]) != 0 ||
		    pthread_detach(pt) != 0) {
			fprintf(stderr, "many-objects: %s: cannot start its thread\n",
				fn);
			return 1;
		}
	}
	for (i = 0; fn && i < n; i++)
		wait_blocked(&th[i]);
	printf("READY %d\n", (int)getpid());
	fflush(stdout);
	while (read(STDIN_FILENO, &c, 1) > 0)
		;
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/libmany-%d.so", argv[1], i);
		unlink(path);
	}
	return 0;
}
