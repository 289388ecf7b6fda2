/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "remote.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <time.h>
#include <unistd.h>

#define REMOTE_PAGE 4096u
/* Remote iovecs per process_vm_readv() call (IOV_MAX is 1024). */
#define REMOTE_IOV_BATCH 256u
/* Remote iovecs per call of remote_read_many(): IOV_MAX. */
#define REMOTE_MANY_IOV 1024u
/* The most of /proc/PID/cmdline read past the bytes kept, looking for an
 * argument after empty ones: execve() takes at most 6 MiB of arguments and
 * environment (fs/exec.c bprm_stack_limits()), so only an area set with
 * prctl(PR_SET_MM) can be longer, and is not read to its end. */
#define REMOTE_CMDLINE_SCAN (8u << 20)

uint64_t
remote_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void
remote_image_load(pid_t pid, struct remote_image *img)
{
	char path[64], *buf = NULL;
	size_t len = 0, i;

	img->known = false;
	snprintf(path, sizeof(path), "/proc/%d/auxv", (int)pid);
	if (remote_read_file(path, 1u << 14, &buf, &len) < 0)
		return;
	for (i = 0; i + 16 <= len; i += 16) {
		uint64_t type, val;

		memcpy(&type, buf + i, 8);
		memcpy(&val, buf + i + 8, 8);
		if (type == AT_NULL)
			break;
		if (type == AT_RANDOM && val) {
			img->addr = val;
			img->known = remote_read(pid, val, img->bytes,
						 sizeof(img->bytes)) == 0;
			break;
		}
	}
	free(buf);
}

bool
remote_image_same(pid_t pid, const struct remote_image *img)
{
	uint8_t now[sizeof(img->bytes)];

	if (!img->known)
		return true;
	return remote_read(pid, img->addr, now, sizeof(now)) == 0 &&
	       memcmp(now, img->bytes, sizeof(now)) == 0;
}

bool
remote_image_equal(const struct remote_image *a, const struct remote_image *b)
{
	return a->known && b->known && a->addr == b->addr &&
	       memcmp(a->bytes, b->bytes, sizeof(a->bytes)) == 0;
}

bool
remote_image_changed(pid_t pid, const struct remote_image *img)
{
	struct remote_image now;

	if (!img->known)
		return false;
	remote_image_load(pid, &now);
	return now.known && !remote_image_equal(&now, img);
}

ssize_t
remote_read_prefix(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec riov[REMOTE_IOV_BATCH];
	size_t done = 0;

	if (len == 0)
		return 0;
	if (addr + len < addr)
		return -EFAULT;
	while (done < len) {
		struct iovec liov = {(uint8_t *)buf + done, 0};
		uint64_t a = addr + done;
		size_t n = 0, want = 0;
		ssize_t r;

		/* A fault inside one iovec can still return a short count
		 * (measured, reader.md §2.2), but page-sized pieces make the
		 * result a clean prefix. */
		while (n < REMOTE_IOV_BATCH && done + want < len) {
			uint64_t start = a + want;
			size_t in_page =
				REMOTE_PAGE - (size_t)(start & (REMOTE_PAGE - 1));
			size_t piece = len - done - want;

			if (piece > in_page)
				piece = in_page;
			riov[n].iov_base = (void *)(uintptr_t)start;
			riov[n].iov_len = piece;
			want += piece;
			n++;
		}
		liov.iov_len = want;
		r = process_vm_readv(pid, &liov, 1, riov, n, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (done)
				break;
			return -errno;
		}
		if (r == 0)
			break;
		done += (size_t)r;
		if ((size_t)r < want)
			break;
	}
	if (done == 0)
		return -EFAULT;
	return (ssize_t)done;
}

/* Pieces of a range split at page boundaries. */
static size_t
range_pieces(uint64_t addr, size_t len)
{
	uint64_t first = addr & ~(uint64_t)(REMOTE_PAGE - 1);
	uint64_t last = (addr + len - 1) & ~(uint64_t)(REMOTE_PAGE - 1);

	return (size_t)((last - first) / REMOTE_PAGE) + 1;
}

void
remote_read_many(pid_t pid, struct remote_range *rg, size_t n)
{
	struct iovec liov[REMOTE_MANY_IOV], riov[REMOTE_MANY_IOV];
	size_t i = 0, j;

	while (i < n) {
		size_t k = 0, end;
		ssize_t got;

		for (end = i; end < n; end++) {
			struct remote_range *r = &rg[end];
			size_t off = 0;

			/* an empty or wrapping range is read alone below */
			if (r->len == 0 || r->addr + r->len < r->addr)
				break;
			if (k + range_pieces(r->addr, r->len) > REMOTE_MANY_IOV)
				break;
			while (off < r->len) {
				uint64_t a = r->addr + off;
				size_t piece =
					REMOTE_PAGE - (size_t)(a & (REMOTE_PAGE - 1));

				if (piece > r->len - off)
					piece = r->len - off;
				liov[k].iov_base = (uint8_t *)r->buf + off;
				liov[k].iov_len = piece;
				riov[k].iov_base = (void *)(uintptr_t)a;
				riov[k].iov_len = piece;
				k++;
				off += piece;
			}
		}
		if (end == i) {
			/* empty, wrapping, or too big for one call */
			rg[i].got = rg[i].len == 0
					    ? 0
					    : remote_read_prefix(pid, rg[i].addr,
								 rg[i].buf, rg[i].len);
			i++;
			continue;
		}
		got = process_vm_readv(pid, liov, k, riov, k, 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && errno != EFAULT) {
			int e = errno;

			for (j = i; j < n; j++)
				rg[j].got = -e;
			return;
		}
		if (got < 0)
			got = 0;
		for (j = i; j < end; j++) {
			if ((size_t)got >= rg[j].len) {
				rg[j].got = (ssize_t)rg[j].len;
				got -= (ssize_t)rg[j].len;
				continue;
			}
			/* the call stopped inside this range */
			rg[j].got = got > 0 ? got : -EFAULT;
			j++;
			break;
		}
		i = j;
	}
}

int
remote_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	ssize_t r = remote_read_prefix(pid, addr, buf, len);

	if (r < 0)
		return (int)r;
	return (size_t)r == len ? 0 : -EFAULT;
}

int
remote_tlsm_read(void *opaque, uint64_t addr, void *buf, size_t len)
{
	return remote_read(*(pid_t *)opaque, addr, buf, len);
}

int
remote_regs_blocked(const struct user_regs_struct *regs)
{
#if defined(__x86_64__)
	long nr = (long)regs->orig_rax, ret = (long)regs->rax;

	if (nr < 0)
		return 0; /* not in a system call */
	/* The kernel's restart codes (ERESTARTSYS 512, ERESTARTNOINTR 513,
	 * ERESTARTNOHAND 514, ERESTART_RESTARTBLOCK 516; the stop comes
	 * before they are turned into a restart) and EINTR: the call was
	 * waiting when the interrupt woke it. */
	return ret == -EINTR || (ret <= -512 && ret >= -516);
#else
	(void)regs;
	return -1;
#endif
}

int
remote_thread_stop_regs(pid_t tid, uint64_t *tp, int *blocked)
{
#if defined(__x86_64__)
	/* All registers in one call: fs_base, and orig_rax and rax for
	 * the state. */
	struct user_regs_struct regs;

	if (ptrace(PTRACE_GETREGS, tid, NULL, &regs) < 0)
		return -errno;
	*tp = regs.fs_base;
	*blocked = remote_regs_blocked(&regs);
	return 0;
#elif defined(__aarch64__)
	/* NT_ARM_TLS grew a second register (TPIDR2_EL0) with SME; an 8-byte
	 * iovec still returns TPIDR_EL0 (the kernel clamps the length). */
	uint64_t v = 0;
	struct iovec iov = {&v, sizeof(v)};

	*blocked = -1;
	if (ptrace(PTRACE_GETREGSET, tid, (void *)(uintptr_t)NT_ARM_TLS, &iov) < 0)
		return -errno;
	*tp = v;
	return 0;
#else
	(void)tid;
	(void)tp;
	*blocked = -1;
	return -EOPNOTSUPP;
#endif
}

/* read(2) again after a signal handler interrupted it. */
static ssize_t
read_retry(int fd, void *buf, size_t n)
{
	ssize_t r;

	do
		r = read(fd, buf, n);
	while (r < 0 && errno == EINTR);
	return r;
}

/* f_type of statfs(2), as linux/magic.h has them */
#define REMOTE_OVERLAYFS_MAGIC 0x794c7630
#define REMOTE_BTRFS_MAGIC     0x9123683e
#define REMOTE_PROC_MAGIC      0x9fa0
#define REMOTE_SYSFS_MAGIC     0x62656572
#define REMOTE_DEBUGFS_MAGIC   0x64626720
#define REMOTE_TRACEFS_MAGIC   0x74726163

bool
remote_same_file(int fd,
		 const struct stat *st,
		 unsigned dev_major,
		 unsigned dev_minor,
		 uint64_t inode)
{
	struct statfs sf;

	if ((uint64_t)st->st_ino != inode)
		return false;
	if (major(st->st_dev) == dev_major && minor(st->st_dev) == dev_minor)
		return true;
	/* The inode number alone let a file of another filesystem pass for
	 * the mapped one: a tmpfs mounted over a library's directory gives
	 * its files the same small inode numbers as the first one did. */
	return fstatfs(fd, &sf) == 0 &&
	       ((unsigned long)sf.f_type == REMOTE_OVERLAYFS_MAGIC ||
		(unsigned long)sf.f_type == REMOTE_BTRFS_MAGIC);
}

ssize_t
remote_pread_upto(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = pread(fd, (uint8_t *)buf + got, len - got, (off_t)got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/* The file that the O_PATH descriptor pfd stands for, opened for reading
 * if it is a regular file of a filesystem that stores files
 * (remote_open_regular()); pfd is closed. */
static int
reopen_regular(int pfd, struct stat *st)
{
	char self[64];
	struct statfs sf;
	int fd, e;

	/* A "regular" file of procfs, sysfs, debugfs or tracefs is no
	 * object that a process maps, and its read may wait as a FIFO's
	 * does or take what it reads from others (/proc/kmsg: a symlink to
	 * it at a library's path, which ctxdump, as root, may open). */
	if (fstat(pfd, st) < 0 || fstatfs(pfd, &sf) < 0)
		e = errno;
	else if (!S_ISREG(st->st_mode) ||
		 (unsigned long)sf.f_type == REMOTE_PROC_MAGIC ||
		 (unsigned long)sf.f_type == REMOTE_SYSFS_MAGIC ||
		 (unsigned long)sf.f_type == REMOTE_DEBUGFS_MAGIC ||
		 (unsigned long)sf.f_type == REMOTE_TRACEFS_MAGIC)
		e = ESTALE;
	else
		e = 0;
	if (e) {
		close(pfd);
		errno = e;
		return -1;
	}
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	fd = open(self, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	e = errno;
	close(pfd);
	errno = e;
	return fd;
}

int
remote_open_regular(const char *path, struct stat *st)
{
	/* O_PATH looks the file up and opens nothing: no FIFO waits, no
	 * driver runs.  Opening its /proc/self/fd link again then opens
	 * that same inode, whatever is at the path by now. */
	int pfd = open(path, O_PATH | O_CLOEXEC);

	return pfd < 0 ? -1 : reopen_regular(pfd, st);
}

int
remote_open_in_root(pid_t pid, const char *path, struct stat *st)
{
	/* No magic links either: the container's /proc/self/root/... (or
	 * /proc/1/root) would lead out of its root again. */
	struct open_how how = {.flags = O_PATH | O_CLOEXEC,
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	/* Once openat2() failed so, it always will: not tried again. */
	static bool no_openat2;
	char root[PATH_MAX + 64];
	int rfd, pfd, e, tries;

	if (no_openat2)
		goto fallback;
	snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
	rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return -1;
	/* EAGAIN: a rename raced the lookup of a "..", which the target
	 * can make happen every time: a few tries, not a loop */
	for (tries = 0;; tries++) {
		pfd = (int)syscall(SYS_openat2, rfd, path, &how, sizeof(how));
		if (pfd >= 0 || (errno != EINTR && errno != EAGAIN) || tries == 8)
			break;
	}
	e = errno;
	close(rfd);
	if (pfd >= 0)
		return reopen_regular(pfd, st);
	/* ENOSYS: before Linux 5.6; EPERM: container runtimes' seccomp
	 * profiles older than openat2() deny what they do not know */
	if (e != ENOSYS && e != EPERM) {
		errno = e;
		return -1;
	}
	no_openat2 = true;
fallback:
	snprintf(root, sizeof(root), "/proc/%d/root%s", (int)pid, path);
	return remote_open_regular(root, st);
}

int
remote_open_mapped(pid_t pid, const struct remote_mapped *m, struct stat *st)
{
	char fn[PATH_MAX + 64];
	bool other = false;
	int fd, e = ENOENT;

	snprintf(fn, sizeof(fn), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid,
		 m->start, m->end);
	fd = remote_open_regular(fn, st);
	if (fd >= 0) {
		if (remote_same_file(fd, st, m->dev_major, m->dev_minor, m->inode))
			return fd;
		/* another file mapped there since maps was read: the path
		 * may still lead to this one */
		close(fd);
		other = true;
	}
	/* A deleted file's path too: what is there now tells a replaced
	 * file (ESTALE) from a removed one. */
	if (!m->exe_only) {
		fd = remote_open_in_root(pid, m->path, st);
		if (fd >= 0 &&
		    remote_same_file(fd, st, m->dev_major, m->dev_minor, m->inode))
			return fd;
		if (fd >= 0) {
			close(fd);
			other = true;
		} else {
			e = errno;
		}
	}
	/* A deleted file may be the executable, which /proc/PID/exe still
	 * opens.  The device always: the executable's file was told by the
	 * device of a stat() too, and an exec since, of a file on another
	 * device with the same inode number, must not pass for it. */
	if (m->deleted || m->exe_only) {
		snprintf(fn, sizeof(fn), "/proc/%d/exe", (int)pid);
		fd = remote_open_regular(fn, st);
		if (fd >= 0 && (uint64_t)st->st_ino == m->inode &&
		    major(st->st_dev) == m->dev_major &&
		    minor(st->st_dev) == m->dev_minor)
			return fd;
		if (fd >= 0)
			close(fd);
		if (m->exe_only)
			e = fd >= 0 ? ESTALE : errno;
	}
	errno = other ? ESTALE : e;
	return -1;
}

int
remote_read_file(const char *path, size_t max, char **buf, size_t *len)
{
	/* The first buffer no larger than max allows: the loop stops
	 * growing it at max + 1, never shrinks it. */
	size_t cap = max < 4095 ? max + 1 : 4096, n = 0;
	char *b;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	b = malloc(cap);
	if (!b) {
		close(fd);
		return -ENOMEM;
	}
	for (;;) {
		ssize_t r;

		if (cap - n < 2) {
			char *nb;

			if (cap >= max + 1)
				break;
			cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
			nb = realloc(b, cap);
			if (!nb) {
				free(b);
				close(fd);
				return -ENOMEM;
			}
			b = nb;
		}
		r = read_retry(fd, b + n, cap - n - 1);
		if (r < 0) {
			int e = errno;

			free(b);
			close(fd);
			return -e;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	b[n] = '\0';
	*buf = b;
	*len = n;
	return 0;
}

int
remote_read_cmdline(pid_t pid, size_t max, char **buf, size_t *len)
{
	char path[64], chunk[4096];
	size_t off = 0, end = 0, i;
	char *b;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	b = malloc(max + 2);
	if (!b) {
		close(fd);
		return -ENOMEM;
	}
	/* A process that rewrote its title (nginx's ngx_setproctitle())
	 * pads the rest of the argument area with NULs, which the kernel
	 * gives as empty arguments; end is past the last byte that is not
	 * one. */
	while (end <= max && off < REMOTE_CMDLINE_SCAN) {
		ssize_t r = read_retry(fd, chunk, sizeof(chunk));

		if (r < 0) {
			int e = errno;

			free(b);
			close(fd);
			return -e;
		}
		if (r == 0)
			break;
		for (i = 0; i < (size_t)r; i++)
			if (chunk[i])
				end = off + i + 1;
		if (off <= max)
			memcpy(b + off, chunk,
			       (size_t)r < max + 1 - off ? (size_t)r : max + 1 - off);
		off += (size_t)r;
	}
	close(fd);
	*len = end < max + 1 ? end : max + 1;
	b[*len] = '\0';
	*buf = b;
	return 0;
}
