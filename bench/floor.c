/* SPDX-License-Identifier: Apache-2.0 */
/* The physical floor of a one-shot ptrace snapshot (issue 8, B5): the least
 * work any reader must do to read every thread's OTEP-4947 record while the
 * thread is stopped (reader.md §2.1 and §4), done the cheapest way we know.
 *
 *   bench-floor PID TPOFF
 *
 * List /proc/PID/task once; PTRACE_SEIZE + PTRACE_INTERRUPT every thread;
 * wait for each stop with waitpid(tid) in order (waitpid(-1) walks every
 * tracee per call: quadratic, 10 ms at 1000 threads); PTRACE_GETREGS per
 * thread; then the 8-byte slot at fs_base + TPOFF of every thread in one
 * process_vm_readv (an iovec per thread, 1024 per call), the 28-byte
 * record headers they point to the same way (36 bytes per thread); and
 * PTRACE_DETACH everything.  TPOFF is the slot's thread-pointer offset
 * (static TLS), which the benchmark takes from `ctxdump --json`
 * (symbol.tpoff) beforehand.
 *
 * No rescan, no deadline, no signal handling, no ELF, no output but one
 * line:
 *   stopped_ns=<first interrupt .. last detach> threads=<n> records=<valid>
 * x86_64 only (fs_base). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FLOOR_MAX_THREADS 100000
#define FLOOR_IOV         1024 /* IOV_MAX */

static uint64_t
floor_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Read n independent ranges (all of length len) into out, IOV_MAX iovecs
 * per call; a range that cannot be read is skipped. */
static void
floor_read_many(pid_t pid, const uint64_t *addr, size_t n, size_t len, uint8_t *out)
{
	static struct iovec l[FLOOR_IOV], r[FLOOR_IOV];
	size_t done = 0;

	while (done < n) {
		size_t k = n - done < FLOOR_IOV ? n - done : FLOOR_IOV, i;
		ssize_t got;

		for (i = 0; i < k; i++) {
			l[i].iov_base = out + (done + i) * len;
			l[i].iov_len = len;
			r[i].iov_base = (void *)(uintptr_t)addr[done + i];
			r[i].iov_len = len;
		}
		got = process_vm_readv(pid, l, k, r, k, 0);
		if (got < 0)
			got = 0;
		done += (size_t)got / len;
		if ((size_t)got < k * len)
			done++; /* skip the range that failed */
	}
}

int
main(int argc, char **argv)
{
	static pid_t tids[FLOOR_MAX_THREADS];
	static char seized[FLOOR_MAX_THREADS];
	static uint64_t addr[FLOOR_MAX_THREADS], slot[FLOOR_MAX_THREADS];
	static uint8_t hdr[FLOOR_MAX_THREADS][28];
	uint64_t t_first = 0, t_last;
	size_t n = 0, i, m = 0, nrec = 0, records = 0;
	char path[64];
	struct dirent *de;
	long long tpoff;
	pid_t pid;
	DIR *d;

	if (argc != 3) {
		fprintf(stderr, "usage: bench-floor PID TPOFF\n");
		return 64;
	}
	pid = (pid_t)strtol(argv[1], NULL, 10);
	tpoff = strtoll(argv[2], NULL, 10);
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d) {
		perror("bench-floor: opendir");
		return 2;
	}
	while ((de = readdir(d)) != NULL && n < FLOOR_MAX_THREADS) {
		long tid = strtol(de->d_name, NULL, 10);

		if (tid > 0)
			tids[n++] = (pid_t)tid;
	}
	closedir(d);
	for (i = 0; i < n; i++) {
		if (ptrace(PTRACE_SEIZE, tids[i], NULL, NULL) < 0)
			continue;
		if (!t_first)
			t_first = floor_now_ns();
		(void)ptrace(PTRACE_INTERRUPT, tids[i], NULL, NULL);
		seized[i] = 1;
	}
	for (i = 0; i < n; i++) {
		int st;

		while (seized[i] && waitpid(tids[i], &st, __WALL) < 0 && errno == EINTR)
			;
	}
	for (i = 0; i < n; i++) {
		struct user_regs_struct regs;

		if (seized[i] && ptrace(PTRACE_GETREGS, tids[i], NULL, &regs) == 0)
			addr[m++] = regs.fs_base + (uint64_t)tpoff;
	}
	floor_read_many(pid, addr, m, sizeof(uint64_t), (uint8_t *)slot);
	for (i = 0; i < m; i++)
		if (slot[i])
			addr[nrec++] = slot[i];
	floor_read_many(pid, addr, nrec, sizeof(hdr[0]), &hdr[0][0]);
	for (i = 0; i < n; i++)
		if (seized[i])
			(void)ptrace(PTRACE_DETACH, tids[i], NULL, NULL);
	t_last = floor_now_ns();
	for (i = 0; i < nrec; i++)
		records += hdr[i][24] == 1; /* valid */
	printf("stopped_ns=%llu threads=%zu records=%zu\n",
	       (unsigned long long)(t_first ? t_last - t_first : 0), n, records);
	return 0;
}
