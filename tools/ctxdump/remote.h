/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Reading another process: bounded process_vm_readv() reads, the thread
 * pointer of a ptrace-stopped thread, and small /proc files. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Copy up to len bytes from addr in process pid.  The remote range is split
 * at page boundaries so that an unmapped page only shortens the copy.
 * Returns the number of bytes of the readable prefix (> 0), or a negative
 * errno when not even the first byte could be read (-EFAULT, -ESRCH,
 * -EPERM). */
ssize_t remote_read_prefix(pid_t pid, uint64_t addr, void *buf, size_t len);

/* Copy exactly len bytes; returns 0 or a negative errno (-EFAULT if only a
 * part was readable). */
int remote_read(pid_t pid, uint64_t addr, void *buf, size_t len);

/* One of many independent reads for remote_read_many(). */
struct remote_range {
	uint64_t addr;
	void *buf;
	size_t len;
	/* out: bytes of the readable prefix (len if all of it), or a
	 * negative errno when not even the first byte could be read */
	ssize_t got;
};

/* Read n independent ranges of process pid with as few process_vm_readv()
 * calls as possible: up to IOV_MAX remote pieces per call, every range
 * split at page boundaries so that each result is a clean prefix, exactly
 * as remote_read_prefix() would give it.  A range that faults ends its
 * call (the kernel stops at the first piece it cannot copy); the next call
 * starts after it.  For reading one small thing from each of 1000 stopped
 * threads this is 1 system call instead of 1000, which is most of the
 * read phase of the stop window. */
void remote_read_many(pid_t pid, struct remote_range *r, size_t n);

/* tlsm_read_fn adapter: opaque points at a pid_t. */
int remote_tlsm_read(void *opaque, uint64_t addr, void *buf, size_t len);

struct user_regs_struct;

/* Whether the registers of a thread at its ptrace-stop show that the stop
 * interrupted a blocking system call: 1 (in a system call whose result is
 * EINTR or a restart code), 0 (in user space, or leaving a system call
 * that completed), -1 (this architecture's registers cannot tell). */
int remote_regs_blocked(const struct user_regs_struct *regs);

/* The thread pointer of a ptrace-stopped thread and remote_regs_blocked()
 * of its registers: one PTRACE_GETREGS on x86_64 (elsewhere *blocked is
 * -1).  Returns 0 or a negative errno. */
int remote_thread_stop_regs(pid_t tid, uint64_t *tp, int *blocked);

/* open(path, O_RDONLY | O_CLOEXEC) of a file the target names (a mapped
 * object's path, maps' map_files): only if it is a regular file, as every
 * mapped ELF object is, and without opening anything else first.  The
 * target can put a FIFO (whose open() for reading waits for a writer: for
 * ever, with its threads stopped) or a device (whose driver's open() acts)
 * at the path, or a symlink to a file of procfs, sysfs, debugfs or
 * tracefs (regular, but whose read may wait as well: /proc/kmsg), which
 * is refused too.  Fills *st; returns the descriptor, or -1 with errno
 * (ESTALE: not a regular file, so not the mapped one). */
int remote_open_regular(const char *path, struct stat *st);

/* remote_open_regular() of path as process pid sees it (an absolute
 * path, as maps shows), through its root directory (/proc/PID/root: a
 * container's own).  Every symlink on the way is resolved inside that
 * root, an absolute one too (openat2() RESOLVE_IN_ROOT, Linux 5.6):
 * opened as /proc/PID/root/PATH, an absolute symlink in the container's
 * path was resolved against ctxdump's root, where it can name any file
 * of the host.  Where the kernel has no openat2() (or a seccomp filter
 * hides it), the old way. */
int remote_open_in_root(pid_t pid, const char *path, struct stat *st);

/* Whether the file open at fd (st: its fstat()) is the one that maps
 * shows as dev_major:dev_minor and inode: the same inode number, and the
 * same device, unless the file is on a filesystem whose stat() gives
 * another device than maps (overlayfs, where maps shows the layer's file;
 * btrfs, whose subvolumes have a device number each): there the inode
 * number only. */
bool remote_same_file(int fd,
		      const struct stat *st,
		      unsigned dev_major,
		      unsigned dev_minor,
		      uint64_t inode);

/* A file mapping of the target, as its maps line shows it. */
struct remote_mapped {
	/* The path (without " (deleted)"), the lowest mapping's range
	 * (map_files), and the file's device and inode. */
	const char *path;
	uint64_t start, end;
	unsigned dev_major, dev_minor;
	uint64_t inode;
	/* " (deleted)": no path leads to it any more, though
	 * /proc/PID/exe still does if it is the executable */
	bool deleted;
	/* the executable, mapped from no file that a path opens (a
	 * memfd): only /proc/PID/exe */
	bool exe_only;
};

/* Open the file that m maps in process pid: the mapped inode itself
 * through /proc/PID/map_files (needs CAP_SYS_ADMIN or
 * CAP_CHECKPOINT_RESTORE), else its path in the target's root
 * (remote_open_in_root()) unless exe_only, else, deleted or exe_only,
 * /proc/PID/exe.  Whichever opened it, the file must be the one maps
 * showed (remote_same_file(); the same device too for /proc/PID/exe):
 * another file mapped at the range since, or put at the path, is not
 * parsed as it.  Fills *st; returns the descriptor, or -1 with errno:
 * ESTALE (another file is there), else why the path (exe_only: the
 * executable) could not be opened, ENOENT for a deleted file. */
int remote_open_mapped(pid_t pid, const struct remote_mapped *m, struct stat *st);

/* The first len bytes of the file open at fd into buf, read with pread()
 * from offset 0: fewer where the file ends first (it may have been
 * truncated since it was measured), never more, however it grew.  Returns
 * the count, or a negative errno. */
ssize_t remote_pread_upto(int fd, void *buf, size_t len);

/* Read a whole (small) file, at most max bytes, into a malloc'd buffer with
 * a NUL after the data.  Returns 0 or a negative errno. */
int remote_read_file(const char *path, size_t max, char **buf, size_t *len);

/* The command line of pid (/proc/PID/cmdline) into a malloc'd buffer with a
 * NUL after the data: its NUL-separated arguments without the trailing
 * empty ones (and without the last one's terminator), at most max bytes, or
 * max + 1 when it is longer.  Returns 0 or a negative errno. */
int remote_read_cmdline(pid_t pid, size_t max, char **buf, size_t *len);

/* Which program image a process runs: the address of its AT_RANDOM
 * bytes (auxv) and the bytes.  execve() keeps the pid and gives the
 * process a new image, with 16 new random bytes that the kernel puts
 * where auxv's AT_RANDOM says, so those bytes still being there is what
 * says "no exec since": one 16-byte read (remote_image_same()).
 * /proc/PID/exe (the same file when a program execs itself) and the mm
 * layout in /proc/PID/stat (the same without ASLR) cannot tell. */
struct remote_image {
	bool known;
	uint64_t addr;
	uint8_t bytes[16];
};

/* The image of pid (a thread of the process whose memory can be read)
 * into img; without one (auxv unreadable) img->known is false, and every
 * remote_image_same() says yes. */
void remote_image_load(pid_t pid, struct remote_image *img);

/* Whether pid still runs image img.  A new image has other random bytes,
 * or none mapped there, or (a thread read through that the exec ended)
 * no such thread. */
bool remote_image_same(pid_t pid, const struct remote_image *img);

/* Whether a and b are both known and the same image. */
bool remote_image_equal(const struct remote_image *a, const struct remote_image *b);

/* Whether process pid now runs another image than img (it ran
 * execve()): read afresh from pid itself, so that a thread gone with the
 * exec, or a process gone altogether, is not taken for one. */
bool remote_image_changed(pid_t pid, const struct remote_image *img);

/* Monotonic clock in nanoseconds. */
uint64_t remote_now_ns(void);
