/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Copy-then-unwind stacks for ctxdump.
 *
 * While the threads are ptrace-stopped, stack_snap_capture_many() copies
 * only their registers and the tops of their stacks (a PTRACE_GETREGS per
 * thread, batched process_vm_readv calls).  After every thread has been
 * detached, stack_unwind() runs libunwind over each snapshot with our own
 * accessors: memory comes from the stack copy or from the read-only
 * segments of the ELF files mapped in the process (and [vdso] from our own
 * identical vdso), never from the live process (a module's writable data
 * reads as 0); unwind tables come from each module's .eh_frame_hdr (or,
 * without one, a search table built from its .eh_frame); symbols from
 * .symtab, the build-id debug file (/usr/lib/debug/.build-id) or .dynsym.
 * Module data is parsed once per process and cached until
 * stack_unwind_reset() (or exit), or, for a module whose mappings
 * changed, stack_unwind_sync().  No libunwind-ptrace fallback is needed:
 * it could not do better for code without an ELF file (JIT), and for a
 * stack deeper than the copy it would need the thread stopped again; such
 * stacks end with STACK_FRAME_TRUNCATED and a reason instead.
 *
 * x86_64 only. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#define STACK_SYMBOL_MAX 256
#define STACK_MODULE_MAX 256

/* Bytes below the stack pointer that belong to the frame (x86_64 psABI
 * red zone); the copy starts there. */
#define STACK_RED_ZONE 128

/* stack_frame.flags */
enum {
	/* This frame is a signal trampoline (__restore_rt); the next frame's
	 * ip is an interrupted instruction, not a return address. */
	STACK_FRAME_SIGNAL = 1u << 0,
	/* Unwinding stopped after this frame before reaching the outermost
	 * frame: the caller's frame lies outside the stack copy, or there is
	 * no unwind information (see stack_frame.end_reason). */
	STACK_FRAME_TRUNCATED = 1u << 1,
	/* symbol/offset came from .dynsym only (no .symtab, no debug file),
	 * so a static function may show as the nearest exported one. */
	STACK_FRAME_DYNSYM = 1u << 2,
	/* A frame below had no unwind information (assembly without CFI,
	 * JIT code): libunwind went on from it by following the frame-pointer
	 * chain, which such code need not keep, so this frame may be wrong,
	 * and frames may be missing above it. */
	STACK_FRAME_GUESSED = 1u << 3,
};

struct stack_frame {
	uint64_t ip;
	/* Function name, "" if unknown. */
	char symbol[STACK_SYMBOL_MAX];
	/* ip - start of symbol; without a symbol, ip - module load bias
	 * (the address as in the ELF file); 0 without a module. */
	uint64_t offset;
	/* Path of the mapped file as in /proc/PID/maps ("[vdso]" too), ""
	 * for anonymous memory (JIT code). */
	char module[STACK_MODULE_MAX];
	/* STACK_FRAME_* */
	uint32_t flags;
	/* Why unwinding ended after this frame when STACK_FRAME_TRUNCATED is
	 * set (static string), else NULL. */
	const char *end_reason;
};

struct stack_snap {
	pid_t tid;
	bool regs_valid;
	struct user_regs_struct regs;
	/* Target address of stack[0] (8-byte aligned, STACK_RED_ZONE below
	 * the stack pointer when readable). */
	uint64_t stack_addr;
	/* Bytes copied: up to max_stack_bytes above the stack pointer, less
	 * where readable memory ends or, for a thread whose TCB (fs_base)
	 * lies above its stack pointer (glibc, musl), at fs_base. */
	size_t stack_len;
	uint8_t *stack;
	/* Nanoseconds stack_snap_capture_many() spent, per thread (the added
	 * stop time). */
	uint64_t capture_ns;
};

/* One allocation holding the stack copies of stack_snap_capture_many().
 * stack_arena_reserve() makes it before the stop, paged in, so that the
 * stop window does not pay for it; the capture uses it if the copies fit,
 * else maps what they need (the reserve is kept in spare until freed). */
struct stack_arena {
	void *base;
	size_t len;
	void *spare;
	size_t spare_len;
};

/* Bytes of stack copy per thread worth reserving: a thread blocked in a
 * system call needs 2-3 KiB (about 5 KiB with its static TLS blocks,
 * where no static model of the writer tells where those start). */
#define STACK_ARENA_GUESS (16u << 10)

/* Map and page in len bytes for a later stack_snap_capture_many() with
 * this arena.  Returns 0 or -ENOMEM (the capture then maps its own). */
int stack_arena_reserve(struct stack_arena *a, size_t len);

/* Once the copies in a are no longer used: keep the mapping they were in
 * as the reserve of the next capture (a recorder's next round), free the
 * rest. */
void stack_arena_recycle(struct stack_arena *a);

/* Call after detaching.  Unwinds the snapshot of a thread of process pid
 * into frames[0..*n_out).  Reads /proc/PID/maps and the mapped ELF files
 * (cached per process until stack_unwind_reset(): pid may be any thread
 * of it, and given another one than before, the cache moves to it as
 * stack_unwind_rebind() does).  Returns 0 when at least frame #0 was
 * produced (a shortened stack is flagged in the last frame), or a
 * negative errno: -EINVAL (no registers in s, bad arguments), -ENOMEM,
 * -ESRCH (thread pid exited before its maps, or a module it needed, could
 * be read through it: stack_unwind_rebind()), -ENODATA (its maps are
 * empty while it runs), or why its maps could not be opened. */
int stack_unwind(pid_t pid,
		 const struct stack_snap *s,
		 struct stack_frame *frames,
		 size_t max_frames,
		 size_t *n_out);

/* Call while the n threads tids of process pid are ptrace-stopped.  Copies
 * each one's registers and [sp - STACK_RED_ZONE, sp + max_stack_bytes) as
 * far as it is readable, with no symbol or /proc work and as few system
 * calls as possible: one PTRACE_GETREGS per thread, then every stack copy
 * in batched process_vm_readv() calls (IOV_MAX pages per call) into one
 * allocation, paged in by the kernel in one go, that *arena owns.  With
 * 1000 threads that is a few system calls instead of a thousand, and no
 * page faults one by one, inside the stop window.  Per thread, err[i] = 0
 * (*out[i] filled; its stack_len may be 0 if nothing around sp was
 * readable) or the negative errno of PTRACE_GETREGS.  With tls_floor (< 0,
 * from tlsm_static_block_tpoff(); 0: none) a copy also ends at fs_base +
 * tls_floor when that lies above the stack pointer.  The copies live as
 * long as the arena: stack_arena_free() or stack_arena_recycle(). */
void stack_snap_capture_many(pid_t pid,
			     const pid_t *tids,
			     size_t n,
			     size_t max_stack_bytes,
			     int64_t tls_floor,
			     struct stack_snap *const *out,
			     int *err,
			     struct stack_arena *arena);

void stack_arena_free(struct stack_arena *a);

/* Drop the cached module data (also done at exit).  Needed before
 * another process is unwound, or the same one after an execve(). */
void stack_unwind_reset(void);

/* stack_unwind_sync() results */
enum {
	/* the file mappings are those the module list was read from */
	STACK_SYNC_SAME = 0,
	/* they changed: the list was read again */
	STACK_SYNC_CHANGED = 1,
	/* as CHANGED, and a module that named frames is gone: a frame named
	 * before, at the same address and module path, may be another
	 * library's now (one loaded again from the same path) */
	STACK_SYNC_DROPPED = 2,
};

/* For a process sampled over and over (ctxdump record): compare the
 * mappings of files of process pid (any thread of it; the cache moves to
 * it, as stack_unwind_rebind() does) with those the cached module list
 * was read from, their lines of /proc/PID/maps as they were, and only
 * when one differs read the list again, keeping the data of every module
 * whose file (device and inode, not the path: a file deleted since still
 * is the one read) and lowest mapping stayed: nothing is parsed again for
 * a library that did not move.  Anonymous mappings, which change all the
 * time, are not compared.  When nothing changed it costs one read of
 * /proc/PID/maps.  A library dlclose()d and another dlopen()ed at its
 * address would otherwise be named and unwound as the first.
 *
 * Call it before stopping the threads (after_stop false), then
 * stack_unwind_stopped() while they are stopped, then again once they
 * run (after_stop true), before unwinding what was copied in the stop.
 * After a stack_unwind_stopped() that could read the maps this returns
 * what that found and reads nothing.  Without one, a mapping whose range,
 * offset, device or inode is not as before the stop changed at some point
 * around it, which cannot be told, so until the next call stack_unwind()
 * names no frame in it and ends the stack there (STACK_FRAME_TRUNCATED);
 * if the maps cannot be read after the stop, every file mapping is
 * treated so.  Returns STACK_SYNC_* or a negative errno (-ESRCH: pid
 * exited before its maps could be read; -ENOMEM; -ELIBACC and others: see
 * stack_unwind()). */
int stack_unwind_sync(pid_t pid, bool after_stop);

/* While every thread of the process is stopped (pid one of them, which
 * cannot exit meanwhile): compare the file mappings with the module list
 * read before the stop, and read the list again if one differs, as
 * stack_unwind_sync() does.  Nothing can map or unmap a file then, so the
 * list is exactly what the stacks copied in this stop ran in: a library
 * dlclose()d and another dlopen()ed at its address before the stop, and
 * the first one mapped there again before the threads' release (checked
 * after it), would otherwise go unseen and name the second one's frames
 * after the first.  One read of /proc/PID/maps in the stop window (20 to
 * 100 us for a small process on a VM, the first read of a while being the
 * slowest; 0.4 ms for 1000 threads, two mappings each); the parsing only
 * when a file mapping changed since the read before the stop.  Without
 * a list from before the stop (its read failed: every thread it was read
 * through ended), the list is read here, as stack_unwind_sync() would
 * read it (STACK_SYNC_CHANGED): the parsing then falls in the stop, but
 * the stacks are named, where a list read after the stop could name none
 * of them.  Returns STACK_SYNC_* or a negative errno, after which
 * stack_unwind_sync() after the stop reads the maps as it would without
 * this call. */
int stack_unwind_stopped(pid_t pid);

/* Thread from, which the cached module data is read through, has exited
 * (stack_unwind() said -ESRCH): go on through thread to of the same
 * process, keeping what was read (its threads share their mappings), and
 * try again the modules that could not be opened through from.  Nothing
 * if the cache is not from's. */
void stack_unwind_rebind(pid_t from, pid_t to);

/* Whether stack_unwind() shows C++ symbols demangled (the default), as
 * "ns::f(int)" rather than "_ZN2ns1fEi". */
void stack_unwind_set_demangle(bool on);

/* NULL when stack_unwind() can work; else why libunwind (opened on the
 * first call of either) could not be loaded. */
const char *stack_unwind_unavailable(void);
