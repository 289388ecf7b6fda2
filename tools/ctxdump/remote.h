/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Reading another process: bounded process_vm_readv() reads, the thread
 * pointer of a ptrace-stopped thread, and small /proc files. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
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

/* tlsm_read_fn adapter: opaque points at a pid_t. */
int remote_tlsm_read(void *opaque, uint64_t addr, void *buf, size_t len);

/* The thread pointer (fs_base on x86_64, TPIDR_EL0 on aarch64) of a
 * ptrace-stopped thread.  Returns 0 or a negative errno. */
int remote_thread_pointer(pid_t tid, uint64_t *tp);

/* Read a whole (small) file, at most max bytes, into a malloc'd buffer with
 * a NUL after the data.  Returns 0 or a negative errno. */
int remote_read_file(const char *path, size_t max, char **buf, size_t *len);

/* Monotonic clock in nanoseconds. */
uint64_t remote_now_ns(void);
