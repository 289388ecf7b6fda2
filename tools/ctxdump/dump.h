/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What one ctxdump run collected: filled by ctxdump.c, printed as text or
 * JSON by output.c from the same structs so the two cannot drift. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "elf-tls.h"
#include "layouts.h"
#include "pctx-read.h"
#include "process-ctx.h"
#include "thread-record.h"
#include "tls-math.h"
#include "unwind.h"

/* What --max-frames 0 ("no limit") means. */
#define DUMP_UNLIMITED_FRAMES 4096

/* The large per-thread fields a dump seldom writes: kept out of struct
 * dump_thread so the array written while the threads are stopped stays
 * small (its pages are faulted in before the stop, and every page costs
 * wall time).  Touched only for a thread with an error, or with
 * --stacks (then faulted in before the stop as well). */
struct dump_cold {
	char error[160];
	char stack_error[160];
	struct stack_snap snap;
};

/* A thread's context in one of the other layouts. */
struct dump_alt {
	enum lay_kind kind;
	enum lay_state state; /* LAY_COPIED or LAY_ERROR */
	int err;              /* LAY_ERROR: negative errno */
	uint64_t slot_addr, ptr;
	uint64_t cl_count; /* custom-labels count as read */
	/* decoded (LAY_COPIED), allocated for its n_attrs attributes only;
	 * points into dump.alt_raw */
	struct lay_ctx *ctx;
};

struct dump_thread {
	pid_t tid;
	char comm[64];
	/* State letter at the snapshot: for a stopped thread, where the
	 * stop found it (stop_state()); for one that did not stop, from
	 * /proc right after the stop ('?': unknown) */
	char state;
	bool stopped;    /* in ptrace-stop during the read phase */
	bool group_stop; /* it was in a group-stop (job control) */
	bool exited;     /* ended while held (killed): dropped after the read */
	/* Why the thread could not be read; NULL if it was (else points
	 * into cold) */
	char *error;
	struct dump_cold *cold; /* this thread's, in dump.cold */

	/* Its thread pointer, as read in the stop (0: none, or not read) */
	uint64_t tp;
	uint64_t slot_addr;   /* &otel_thread_ctx_v1 in this thread */
	uint64_t record_addr; /* its value; 0 = no record */
	/* (the two bools here, not before slot_addr: no larger struct for
	 * tp, and no more pages to fault in before the stop) */
	bool has_slot;   /* the thread has a TLS block for the module */
	bool has_record; /* the 28-byte header was copied */
	struct otel_thread_ctx_record hdr;
	/* Raw copy of the record, made while stopped: the header and up to
	 * the recommended maximum of attrs_data (TREC_MAX_SIZE).  Points
	 * into dump.recs, where the copies are packed: most records are
	 * far smaller than the maximum, and so are fewer pages. */
	uint8_t *rec;
	size_t rec_len; /* bytes of rec copied */
	/* attrs_data (valid == 1 only) when it did not fit in rec (malloc'd);
	 * NULL: it is in rec.  Use dump_attrs(). */
	uint8_t *attrs;
	size_t attrs_len;  /* bytes copied */
	bool attrs_capped; /* attrs-data not all read (unmapped, or no memory) */
	/* Decoded after the threads run again (entries point into attrs);
	 * a compact copy, not a struct trec_attrs_decoded per thread: that
	 * is 4 KiB, and 4 MiB of fresh pages for 1000 threads. */
	struct trec_attr *dec_attr;
	unsigned n_dec;
	bool dec_truncated;

	bool has_snap;
	int snap_err;            /* of the register copy (--stacks) */
	struct stack_snap *snap; /* --stacks: &cold->snap */
	struct stack_frame *frames;
	size_t n_frames;
	bool frames_capped; /* more frames than --max-frames */
	char *stack_error;  /* NULL = none, else in cold */

	/* 1 + index of the thread's copies in dump.alt_raw (the other
	 * layouts, dump-layouts.c); 0 = none */
	size_t alt_idx;
	/* Its Elastic and custom-labels contexts, decoded after the threads
	 * run again (only layouts whose pointer was set or could not be
	 * read) */
	struct dump_alt *alt;
	unsigned n_alt;
	/* This thread runs on a thread pointer that is not its own, or
	 * shares it with others (a raw clone() without CLONE_SETTLS): the
	 * tid of the thread whose TLS is there, or -1 if that cannot be
	 * told; 0: its own, as far as ctxdump can tell.  Decided after the
	 * threads run again (shared_tps() in ctxdump.c). */
	pid_t tp_owner;
};

/* attrs_len bytes of the thread's attrs_data.  Not a pointer kept in the
 * struct: the thread list is sorted (moved) after the read. */
static inline const uint8_t *
dump_attrs(const struct dump_thread *t)
{
	return t->attrs ? t->attrs : t->rec + TREC_HEADER_SIZE;
}

struct dump {
	pid_t pid;
	/* Whose maps, files and memory are read: pid, or a live thread of
	 * it when the thread-group leader has exited (pthread_exit() from
	 * main): /proc/PID/maps is empty then and process_vm_readv(PID)
	 * fails, while the threads still share the address space. */
	pid_t mem_pid;
	char *cmdline; /* NUL-separated arguments */
	size_t cmdline_len;
	bool cmdline_truncated; /* more than CMDLINE_MAX bytes: the first ones */

	bool has_symbol;
	struct etls_symbol sym;
	struct tlsm_access acc;
	/* Without has_symbol: the executable is a 32-bit program
	 * (dump_exe_is_elf32()), so no object was looked at: the output
	 * says so, not "not found in any loaded object". */
	bool exe_elf32;

	bool has_pctx;
	struct pctxr_snapshot pctx;
	struct pctx_decoded *pd;
	/* Without has_pctx: the negative errno of a process context that is
	 * there (an OTEL_CTX mapping) but could not be read or decoded, and
	 * why, for the output ("none" would be false); 0 if there is none */
	int pctx_err;
	char pctx_why[256];

	/* The objects found before the stop, kept for the few lookups made
	 * after it (which thread owns a shared thread pointer); NULL once
	 * freed */
	struct etls_proc *ep;

	struct dump_thread *threads;
	size_t n_threads;
	struct dump_cold *cold; /* one per entry of threads' capacity */
	uint8_t *recs;          /* the records' copies (dump_thread.rec) */
	size_t n_stopped;
	size_t n_exited; /* listed, but exited during the stop: not shown */
	uint64_t stopped_ns;
	unsigned stop_rounds;
	bool stacks;
	struct stack_arena stack_arena; /* the threads' stack copies */

	/* Elastic and custom-labels layouts, if the process defines one
	 * (dump-layouts.c): NULL if not */
	struct lay_proc *alt;
	struct lay_raw *alt_raw; /* LAY_N per thread */
};

/* Whose maps and memory of process pid to read (dump.mem_pid): pid,
 * unless its leader has exited (state Z while other threads run, or X),
 * then the oldest thread of pid that has not (looked for up to a second
 * while the list shows only threads that end); pid if there is none.
 * leader_state is the leader's state letter, or 0 to read it here.
 * Shared by the dump and `ctxdump record` (target.c). */
pid_t dump_memory_pid(pid_t pid, char leader_state);

/* The first listed thread of process pid for which match(pid, tid, arg)
 * holds; 0 if none, or the list cannot be read. */
pid_t
dump_find_thread(pid_t pid, bool (*match)(pid_t pid, pid_t tid, void *arg), void *arg);

/* Where glibc keeps the tid in its thread descriptor, from the thread
 * pointer (etls_glibc_tid_off()): looked up in ep on first use when ep is
 * set (most processes have no thread pointer twice), else as the caller
 * set looked, ok and off. */
struct dump_tid_field {
	struct etls_proc *ep;
	bool looked, ok;
	int64_t off;
};

/* The tid in glibc's thread descriptor at thread pointer tp, read
 * through mem_pid; 0 when it cannot be told (not glibc, memory gone).
 * Target memory: believe it only if it names a thread asked about. */
pid_t dump_tp_tid(pid_t mem_pid, struct dump_tid_field *f, uint64_t tp);

/* The tid of thread tid of process pid in the process's own PID
 * namespace (what glibc's descriptor holds), or 0 if it cannot be read. */
pid_t dump_ns_tid(pid_t pid, pid_t tid);

/* The thread of process pid whose tid in the process's own namespace is
 * nstid, or 0. */
pid_t dump_host_tid(pid_t pid, pid_t nstid);

/* A thread that shares its thread pointer with others (dump_tp_owners()). */
struct dump_tp_share {
	/* whose TLS is at it: that thread's tid, or -1 if it cannot be
	 * told; 0: this thread's own, or not shared */
	pid_t owner;
	pid_t other; /* another thread on it */
	size_t n;    /* threads on it, this one included */
};

/* Threads that run on one thread pointer (a raw clone() without
 * CLONE_SETTLS runs on its parent's): whatever is read through it is the
 * TLS of one of them, shown for each as if its own.  The n threads
 * tids[i] of process pid, on thread pointers tps[i] (0: none, never
 * grouped), are grouped by it; for a group, glibc's descriptor at the
 * thread pointer names the owner.  share[i] is set for every thread.
 * Read while the threads run (glibc sets the tid before a thread runs
 * and keeps it until it ends).  Returns how many threads are not owners
 * of the thread pointer they share, or -ENOMEM. */
int dump_tp_owners(pid_t pid,
		   pid_t mem_pid,
		   struct dump_tid_field *f,
		   const pid_t *tids,
		   const uint64_t *tps,
		   size_t n,
		   struct dump_tp_share *share);

/* etls_proc_load() through *mem_pid (from dump_memory_pid()); while that
 * thread turns out to be gone (-ESRCH: the leader has exited, or so has
 * the thread read for it), through another live one (the youngest, for
 * up to a second and at least 32 tries), stored in *mem_pid.  Given up
 * (-ESRCH), *mem_pid is a thread live then, or pid if none is, for the
 * next read to start with.  Returns etls_proc_load()'s result. */
int dump_proc_load(pid_t pid, pid_t *mem_pid, struct etls_proc **ep);

/* The process context (pctxr_read_maps() with the maps text given, else
 * pctxr_read()) through *mem_pid, as dump_proc_load() does
 * etls_proc_load(): the thread the maps were read through may have ended
 * since.  Returns their result. */
int dump_pctx_read(pid_t pid,
		   pid_t *mem_pid,
		   const char *maps,
		   size_t maps_len,
		   struct pctxr_snapshot *snap);

/* stack_unwind() through *mem_pid, as dump_proc_load() does
 * etls_proc_load(): stacks are unwound after the threads are let go, and
 * the unwinder reads the module list and opens the modules through that
 * thread when it needs them.  Returns stack_unwind()'s result, or
 * -ENOEXEC when the thread to go on through is of another program than
 * img (the process ran execve() since the stop; img may be NULL). */
struct remote_image;
int dump_unwind(pid_t pid,
		pid_t *mem_pid,
		const struct remote_image *img,
		const struct stack_snap *s,
		struct stack_frame *frames,
		size_t max_frames,
		size_t *n);

/* stack_unwind_sync() through *mem_pid, as dump_unwind() does
 * stack_unwind() (and -ENOEXEC as it says). */
int dump_unwind_sync(pid_t pid,
		     pid_t *mem_pid,
		     const struct remote_image *img,
		     bool after_stop);

/* A test hook's number of milliseconds from environment variable name:
 * 1 to max, or 0 when it is unset, not a plain decimal number, or out of
 * range (then ignored: the normal behaviour). */
unsigned dump_test_ms(const char *name, unsigned max);

/* CTXDUMP_TEST_SYNC_PAUSE_MS: sleep so long after the module list's read
 * before the stop and before its read after the threads' release (--stacks
 * and each round of record), so that a test sees a library swapped around
 * the stop in most dumps or rounds rather than in one of some hundreds
 * (test-ctxdump-reload.c, test-ctxdump-record.c). */
void dump_test_sync_pause(void);

/* The thread to read through while the threads of pid are stopped: prev
 * if it is one of the stopped ones in ss (none can exit before they run
 * again), else the leader if it is, else the first; prev if none is. */
struct stop_set;
pid_t dump_stopped_reader(pid_t pid, pid_t prev, const struct stop_set *ss);

/* Whether every thread of pid has exited or is exiting (the process was
 * killed, exited, or is gone): nothing of it can be read any more.  While
 * threads end, the list is read again for up to a second: read then, it
 * can leave out threads that run. */
bool dump_process_exiting(pid_t pid);

/* The "Tgid:" of pid and the letter of its "State:" line; false if
 * /proc/PID/status cannot be read. */
bool dump_proc_status(pid_t pid, long long *tgid, char *state);

/* Whether pid is a kernel thread: it maps nothing, like a process that
 * has exited, and the messages must not say it exited. */
bool dump_is_kthread(pid_t pid);

/* After -ENODATA from dump_proc_load() for a process that is no kernel
 * thread: it maps no object from a file, nor its executable (a program
 * that a loader of its own put in anonymous memory), so no symbol can be
 * looked up.  Says so on standard error, in a line that names syms and
 * ends in then ("" or "; ..."), and names its executable (read through
 * mem_pid) when that is not a file objects are read from. */
void dump_warn_no_files(pid_t pid, pid_t mem_pid, const char *syms, const char *then);

/* Whether the executable of pid is a 32-bit ELF program (x86_64's ia32
 * compat mode): its objects are no ELF files to ctxdump, so a look-up
 * finds no writer whether or not one is loaded. */
bool dump_exe_is_elf32(pid_t pid);

/* What to add to "process N exited": " (zombie, not reaped yet)" while
 * /proc/N/stat says Z (it did exit, but its parent has not reaped it, so
 * ps and /proc still show it), else "". */
const char *dump_exited_note(pid_t pid);
