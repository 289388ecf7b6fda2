/* SPDX-License-Identifier: Apache-2.0 */
/* remote_read_many(): ctxdump's batched process_vm_readv, read from our own
 * process (the kernel allows a process to read itself). */
#include "test-common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/ucontext.h>
#include <sys/wait.h>
#include <unistd.h>

#include "remote.h"

#define PAGE 4096u

static uint64_t
addr_of(const void *p)
{
	return (uint64_t)(uintptr_t)p;
}

/* More ranges than one call takes (IOV_MAX), every one its own value. */
START_TEST(many_small)
{
	enum { N = 2500 };
	static uint64_t src[N], dst[N];
	static struct remote_range rg[N];
	size_t i;

	for (i = 0; i < N; i++) {
		src[i] = 0x1000000000000000u + i * 7919u;
		dst[i] = 0;
		/* backwards, so the order of the ranges is not the memory's */
		rg[i] = (struct remote_range){addr_of(&src[N - 1 - i]), &dst[i], 8,
					      12345};
	}
	remote_read_many(getpid(), rg, N);
	for (i = 0; i < N; i++) {
		ck_assert_int_eq(rg[i].got, 8);
		ck_assert_uint_eq(dst[i], src[N - 1 - i]);
	}
}
END_TEST

/* Ranges across page boundaries, one ending in an unmapped page, one fully
 * unmapped, one empty: each gets its own prefix or error, and the ranges
 * after a fault are still read. */
START_TEST(faults_and_prefixes)
{
	uint8_t *map = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t out[6][640], *gap;
	struct remote_range rg[6];
	size_t i;

	ck_assert_ptr_ne(map, MAP_FAILED);
	for (i = 0; i < 3 * PAGE; i++)
		map[i] = (uint8_t)(i * 31 + 7);
	/* pages 0 and 2 stay, page 1 goes: page 0 ends at a hole */
	ck_assert_int_eq(munmap(map + PAGE, PAGE), 0);
	gap = map + PAGE;
	memset(out, 0xee, sizeof(out));
	rg[0] = (struct remote_range){addr_of(map + 100), out[0], 640, 0};
	rg[1] = (struct remote_range){addr_of(map + PAGE - 100), out[1], 640, 0};
	rg[2] = (struct remote_range){addr_of(map + 2 * PAGE - 300), out[2], 640, 0};
	rg[3] = (struct remote_range){addr_of(gap + 8), out[3], 16, 0};
	rg[4] = (struct remote_range){addr_of(map + 2 * PAGE), out[4], 0, 99};
	rg[5] = (struct remote_range){addr_of(map + 2 * PAGE + 5), out[5], 640, 0};
	remote_read_many(getpid(), rg, 6);

	ck_assert_int_eq(rg[0].got, 640);
	ck_assert_mem_eq(out[0], map + 100, 640);
	/* 100 bytes up to the hole */
	ck_assert_int_eq(rg[1].got, 100);
	ck_assert_mem_eq(out[1], map + PAGE - 100, 100);
	/* starts in the hole, ends in page 2: nothing (no prefix) */
	ck_assert_int_eq(rg[2].got, -EFAULT);
	ck_assert_int_eq(rg[3].got, -EFAULT);
	ck_assert_int_eq(rg[4].got, 0);
	ck_assert_int_eq(rg[5].got, 640);
	ck_assert_mem_eq(out[5], map + 2 * PAGE + 5, 640);
	munmap(map, PAGE);
	munmap(map + 2 * PAGE, PAGE);
}
END_TEST

/* A range of more pages than one call takes is read on its own, between
 * batched neighbours. */
START_TEST(huge_range)
{
	size_t len = 1100 * PAGE + 123, i;
	uint8_t *src = malloc(len), *dst = malloc(len);
	uint64_t a = 0x1122334455667788u, b = 0, c = 0x99aabbccddeeff00u, d = 0;
	struct remote_range rg[3] = {
		{addr_of(&a), &b, 8, 0},
		{0, dst, len, 0},
		{addr_of(&c), &d, 8, 0},
	};

	ck_assert_ptr_nonnull(src);
	ck_assert_ptr_nonnull(dst);
	for (i = 0; i < len; i++)
		src[i] = (uint8_t)(i ^ (i >> 9));
	rg[1].addr = addr_of(src);
	remote_read_many(getpid(), rg, 3);
	ck_assert_int_eq(rg[0].got, 8);
	ck_assert_int_eq(rg[1].got, (ssize_t)len);
	ck_assert_int_eq(rg[2].got, 8);
	ck_assert_uint_eq(b, a);
	ck_assert_uint_eq(d, c);
	ck_assert_int_eq(memcmp(src, dst, len), 0);
	free(src);
	free(dst);
}
END_TEST

/* A process that is gone: every range reports the same error. */
START_TEST(process_gone)
{
	uint64_t v = 1, out[3];
	struct remote_range rg[3];
	pid_t child = fork();
	size_t i;
	int st;

	ck_assert_int_ge(child, 0);
	if (child == 0)
		_exit(0);
	ck_assert_int_eq(waitpid(child, &st, 0), child);
	for (i = 0; i < 3; i++)
		rg[i] = (struct remote_range){addr_of(&v), &out[i], 8, 0};
	remote_read_many(child, rg, 3);
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(rg[i].got, -ESRCH);
}
END_TEST

/* remote_pread_upto(), which ctxdump reads an object whole with (elf-tls.c
 * obj_read_whole()) for the bytes it charged: never past len, however
 * long the file is, and what there is when the file is shorter. */
START_TEST(pread_upto)
{
	char path[] = "/tmp/ctxshim-remote-XXXXXX", buf[3 * PAGE];
	static char data[2 * PAGE];
	size_t i;
	int fd = test_mkstemp(path);

	ck_assert_int_ge(fd, 0);
	for (i = 0; i < sizeof(data); i++)
		data[i] = (char)(i * 31 + 7);
	ck_assert_int_eq(write(fd, data, sizeof(data)), (ssize_t)sizeof(data));
	/* the file's offset is not where it reads from */
	memset(buf, 'x', sizeof(buf));
	ck_assert_int_eq(remote_pread_upto(fd, buf, PAGE + 1), PAGE + 1);
	ck_assert_mem_eq(buf, data, PAGE + 1);
	ck_assert_int_eq(buf[PAGE + 1], 'x');
	/* shorter than asked: what there is */
	memset(buf, 'x', sizeof(buf));
	ck_assert_int_eq(remote_pread_upto(fd, buf, sizeof(buf)),
			 (ssize_t)sizeof(data));
	ck_assert_mem_eq(buf, data, sizeof(data));
	ck_assert_int_eq(buf[sizeof(data)], 'x');
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	ck_assert_int_eq(remote_pread_upto(fd, buf, sizeof(buf)), 0);
	ck_assert_int_eq(remote_pread_upto(fd, buf, 0), 0);
	close(fd);
	ck_assert_int_eq(remote_pread_upto(fd, buf, 1), -EBADF);
	ck_assert_int_eq(unlink(path), 0);
}
END_TEST

/* remote_read_file() at its limit, past the first buffer's 4 KiB (the
 * maps and /proc/PID/status are read so): a file of max bytes is read
 * whole, one of max + 1 bytes its first max bytes, each with a NUL after
 * them. */
START_TEST(read_file_at_max)
{
	char path[] = "/tmp/ctxshim-remote-XXXXXX", *buf;
	static char data[10001];
	const size_t max = sizeof(data) - 1;
	size_t i, len;
	int fd = test_mkstemp(path);

	ck_assert_int_ge(fd, 0);
	for (i = 0; i < sizeof(data); i++)
		data[i] = (char)('a' + i % 26);
	ck_assert_int_eq(write(fd, data, max), (ssize_t)max);
	ck_assert_int_eq(remote_read_file(path, max, &buf, &len), 0);
	ck_assert_uint_eq(len, max);
	ck_assert_mem_eq(buf, data, max);
	ck_assert_int_eq(buf[len], '\0');
	free(buf);
	ck_assert_int_eq(write(fd, data + max, 1), 1);
	ck_assert_int_eq(remote_read_file(path, max, &buf, &len), 0);
	ck_assert_uint_eq(len, max);
	ck_assert_mem_eq(buf, data, max);
	ck_assert_int_eq(buf[len], '\0');
	free(buf);
	/* A max below the first buffer's size holds too. */
	ck_assert_int_eq(remote_read_file(path, 64, &buf, &len), 0);
	ck_assert_uint_eq(len, 64);
	ck_assert_mem_eq(buf, data, 64);
	ck_assert_int_eq(buf[len], '\0');
	free(buf);
	close(fd);
	ck_assert_int_eq(unlink(path), 0);
}
END_TEST

/* The descriptors open in this process (those of the listing not
 * counted). */
static unsigned
fds_open(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	unsigned n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;
}

/* remote_open_in_root() of paths in this process's root: an absolute
 * symlink followed, a FIFO, a directory and nothing at the path refused
 * without a wait (ESTALE: not a regular file), and a process that is gone;
 * not one descriptor left open by any of them. */
START_TEST(open_in_root)
{
	char dir[] = "/tmp/ctxshim-remote-XXXXXX", file[64], link[64], fifo[64];
	unsigned before = fds_open();
	struct stat st, fst;
	pid_t child;
	int fd, w;

	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	snprintf(file, sizeof(file), "%s/file", dir);
	snprintf(link, sizeof(link), "%s/link", dir);
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	w = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	ck_assert_int_ge(w, 0);
	ck_assert_int_eq(write(w, "x", 1), 1);
	ck_assert_int_eq(fstat(w, &fst), 0);
	close(w);
	ck_assert_int_eq(symlink(file, link), 0);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);

	fd = remote_open_in_root(getpid(), link, &st);
	ck_assert_int_ge(fd, 0);
	ck_assert_uint_eq(st.st_ino, fst.st_ino);
	ck_assert_uint_eq(st.st_dev, fst.st_dev);
	close(fd);
	ck_assert_int_eq(remote_open_in_root(getpid(), fifo, &st), -1);
	ck_assert_int_eq(errno, ESTALE);
	ck_assert_int_eq(remote_open_in_root(getpid(), dir, &st), -1);
	ck_assert_int_eq(errno, ESTALE);
	ck_assert_int_eq(remote_open_in_root(getpid(), "/nonexistent/lib.so", &st), -1);
	ck_assert_int_eq(errno, ENOENT);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0)
		_exit(0);
	ck_assert_int_eq(waitpid(child, NULL, 0), child);
	ck_assert_int_eq(remote_open_in_root(child, file, &st), -1);
	ck_assert_uint_eq(fds_open(), before);

	ck_assert_int_eq(unlink(fifo), 0);
	ck_assert_int_eq(unlink(link), 0);
	ck_assert_int_eq(unlink(file), 0);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* A file write()n with one byte, its stat() in *st. */
static void
make_file(const char *path, char byte, struct stat *st)
{
	int w = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	ck_assert_int_ge(w, 0);
	ck_assert_int_eq(write(w, &byte, 1), 1);
	ck_assert_int_eq(fstat(w, st), 0);
	close(w);
}

/* remote_open_mapped() on a file this process maps: the mapped inode
 * whatever is at its path (map_files, root), else the path only if the
 * file there is the mapped one (ESTALE for a replaced one, ENOENT for a
 * removed one), and /proc/PID/exe for the executable; never the file at
 * the path when map_files shows another. */
START_TEST(open_mapped)
{
	char dir[] = "/tmp/ctxshim-remote-XXXXXX", file[64], other[64], exe[64];
	unsigned before = fds_open();
	struct stat fst, ost, st, est;
	struct remote_mapped m;
	bool root = geteuid() == 0;
	void *map;
	int fd;

	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	snprintf(file, sizeof(file), "%s/file", dir);
	snprintf(other, sizeof(other), "%s/other", dir);
	make_file(file, 'a', &fst);
	fd = open(file, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	map = mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE, fd, 0);
	ck_assert_ptr_ne(map, MAP_FAILED);
	close(fd);
	m = (struct remote_mapped){.path = file,
				   .start = addr_of(map),
				   .end = addr_of(map) + PAGE,
				   .dev_major = major(fst.st_dev),
				   .dev_minor = minor(fst.st_dev),
				   .inode = fst.st_ino};

	fd = remote_open_mapped(getpid(), &m, &st);
	ck_assert_int_ge(fd, 0);
	ck_assert_uint_eq(st.st_ino, fst.st_ino);
	close(fd);
	/* replaced at its path: map_files still opens it; the path only
	 * leads to the other file */
	make_file(other, 'b', &ost);
	ck_assert_int_eq(rename(other, file), 0);
	fd = remote_open_mapped(getpid(), &m, &st);
	if (root) {
		ck_assert_int_ge(fd, 0);
		ck_assert_uint_eq(st.st_ino, fst.st_ino);
		close(fd);
	} else {
		ck_assert_int_eq(fd, -1);
		ck_assert_int_eq(errno, ESTALE);
	}
	/* a range where another file is mapped now (the anonymous page
	 * that replaces it): the path's file is not taken for it either */
	ck_assert_ptr_eq(mmap(map, PAGE, PROT_READ,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
			 map);
	ck_assert_int_eq(remote_open_mapped(getpid(), &m, &st), -1);
	ck_assert_int_eq(errno, ESTALE);
	/* removed: no path, and not the executable */
	ck_assert_int_eq(unlink(file), 0);
	m.deleted = true;
	ck_assert_int_eq(remote_open_mapped(getpid(), &m, &st), -1);
	ck_assert_int_eq(errno, ENOENT);
	/* the executable: /proc/PID/exe, by device and inode (as an
	 * open() sees it: valgrind gives its client's file to an open(),
	 * its own to a stat()) */
	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)getpid());
	fd = open(exe, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &est), 0);
	close(fd);
	m = (struct remote_mapped){.path = "/memfd:x",
				   .dev_major = major(est.st_dev),
				   .dev_minor = minor(est.st_dev),
				   .inode = est.st_ino,
				   .deleted = true,
				   .exe_only = true};
	fd = remote_open_mapped(getpid(), &m, &st);
	ck_assert_int_ge(fd, 0);
	ck_assert_uint_eq(st.st_ino, est.st_ino);
	close(fd);
	m.inode = fst.st_ino;
	ck_assert_int_eq(remote_open_mapped(getpid(), &m, &st), -1);
	ck_assert_int_eq(errno, ESTALE);

	ck_assert_int_eq(munmap(map, PAGE), 0);
	ck_assert_uint_eq(fds_open(), before);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

#ifdef __x86_64__
static volatile sig_atomic_t openat2_calls;

/* SIGSYS from the filter below: openat2() was not run; it fails with
 * ENOSYS, as on a kernel before 5.6. */
static void
openat2_trap(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	openat2_calls++;
	((ucontext_t *)uc)->uc_mcontext.gregs[REG_RAX] = -ENOSYS;
}
#endif

/* Where the kernel has no openat2() (or a seccomp filter denies it),
 * paths are opened the old way, /proc/PID/root/PATH: still regular files
 * only; and openat2() is tried once, not again for every object. */
START_TEST(open_in_root_without_openat2)
{
#ifdef __x86_64__
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
	char dir[] = "/tmp/ctxshim-remote-XXXXXX", file[64], fifo[64];
	struct sigaction sa;
	struct stat st, fst;
	pid_t child;
	int status;

	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	snprintf(file, sizeof(file), "%s/file", dir);
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	make_file(file, 'a', &fst);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		int fd, fd2;

		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = openat2_trap;
		sa.sa_flags = SA_SIGINFO;
		if (sigaction(SIGSYS, &sa, NULL) != 0 ||
		    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
		    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
			_exit(10);
		fd = remote_open_in_root(getpid(), file, &st);
		if (fd < 0 || st.st_ino != fst.st_ino)
			_exit(11);
		if (remote_open_in_root(getpid(), fifo, &st) != -1 || errno != ESTALE)
			_exit(12);
		fd2 = remote_open_in_root(getpid(), file, &st);
		if (fd2 < 0 || st.st_ino != fst.st_ino)
			_exit(13);
		/* (0 under valgrind, which fails it itself) */
		_exit(openat2_calls <= 1 ? 0 : 20 + (int)openat2_calls);
	}
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x",
		      status);
	ck_assert_int_eq(unlink(fifo), 0);
	ck_assert_int_eq(unlink(file), 0);
	ck_assert_int_eq(rmdir(dir), 0);
#endif
}
END_TEST

/* A regular file whose read waits for data, as a FIFO's does, and takes
 * what it reads from others: /proc/kmsg, which a process can put a
 * symlink to at a library's path (in its own root, or in its own
 * directory on the host), for ctxdump (root: it may open it) to read the
 * library's symbols from (where map_files cannot be opened: without
 * CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE).  Old: opened; a read took the kernel's messages from the
 * system's logger, and once there were none waited for the next one.
 * No object is mapped from procfs: refused as a FIFO is.  Root only
 * (others may not open it anyway). */
START_TEST(open_in_root_refuses_procfs)
{
	char link[64];
	struct stat st;

	if (geteuid() != 0) {
		fprintf(stderr, "open_in_root_refuses_procfs: not root, not run\n");
		return;
	}
	snprintf(link, sizeof(link), "/tmp/ctxshim-remote-%d.so", (int)getpid());
	ck_assert_int_eq(symlink("/proc/kmsg", link), 0);
	errno = 0;
	ck_assert_int_eq(remote_open_in_root(getpid(), link, &st), -1);
	ck_assert_int_eq(errno, ESTALE);
	ck_assert_int_eq(unlink(link), 0);
	errno = 0;
	ck_assert_int_eq(remote_open_regular("/proc/kmsg", &st), -1);
	ck_assert_int_eq(errno, ESTALE);
}
END_TEST

TEST_SUITE(remote_suite)
{
	Suite *s = suite_create("ctxdump-remote");
	TCase *tc = tcase_create("read_many");

	tcase_add_test(tc, many_small);
	tcase_add_test(tc, faults_and_prefixes);
	tcase_add_test(tc, huge_range);
	tcase_add_test(tc, process_gone);
	tcase_add_test(tc, pread_upto);
	tcase_add_test(tc, read_file_at_max);
	tcase_add_test(tc, open_in_root);
	tcase_add_test(tc, open_in_root_refuses_procfs);
	tcase_add_test(tc, open_mapped);
	tcase_add_test(tc, open_in_root_without_openat2);
	suite_add_tcase(s, tc);
	return s;
}
