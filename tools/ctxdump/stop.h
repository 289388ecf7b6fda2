/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Stopping every thread of a process for a consistent snapshot, and letting
 * it go again (reader.md §2.1).
 *
 * PTRACE_SEIZE + PTRACE_INTERRUPT, never PTRACE_ATTACH: a seized thread
 * resumes by itself if ctxdump dies, even from SIGKILL, and no SIGSTOP is
 * involved that could race with the target's own job control.  While
 * threads are held, SIGINT, SIGTERM, SIGHUP and SIGQUIT are blocked and
 * waited for together with SIGCHLD: one of them ends the stop early, every
 * thread is detached, and stop_release() then lets the signal take its
 * default action. */

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum stop_status {
	STOP_PENDING,  /* seized, stop not reported yet */
	STOP_STOPPED,  /* in ptrace-stop: may be read */
	STOP_DETACHED, /* was stopped, now detached */
	STOP_VANISHED, /* listed, but gone before it could be seized */
	STOP_EXITED,   /* seized, then exited before it stopped */
	STOP_ZOMBIE,   /* exited thread (group leader) waiting to be reaped */
	STOP_FAILED,   /* PTRACE_SEIZE failed (err) */
	STOP_TIMEOUT,  /* seized but did not stop before the deadline */
};

struct stop_thread {
	pid_t tid;
	enum stop_status status;
	int err;         /* errno of a failed PTRACE_SEIZE */
	int pending_sig; /* signal to re-inject on detach */
	bool group_stop; /* reported a group-stop (target was job-stopped) */
	char state;      /* /proc state letter read before the stop */
	char comm[64];   /* thread name (raw bytes, NUL-terminated) */
};

struct stop_set {
	pid_t pid;
	struct stop_thread *t;
	size_t n, cap;
	int *hash; /* open addressing: tid -> index + 1 */
	size_t hash_cap;
	/* First PTRACE_INTERRUPT and end of the last PTRACE_DETACH. */
	uint64_t t_first_ns, t_last_ns;
	unsigned rounds;
	/* The thread whose PTRACE_SEIZE failed when stop_all() returned
	 * -EPERM, and the errno. */
	pid_t fail_tid;
	int fail_err;
	int signal; /* termination signal received while holding threads */
	bool masked;
	sigset_t oldmask;
};

void stop_init(struct stop_set *s, pid_t pid);

/* Stop every thread of s->pid (only thread only_tid if it is not 0),
 * rescanning /proc/PID/task until a scan finds no new thread.  timeout_ms
 * bounds each wait for the stops.  Returns
 *   0        at least one thread is stopped (see the per-thread status),
 *   -EPERM   the first thread could not be seized (fail_tid, fail_err),
 *   -ESRCH   the process (or thread only_tid) does not exist or every
 *            thread vanished,
 *   -EINTR   a termination signal arrived; everything is detached again,
 *   other negative errno values for internal errors (everything detached).
 */
int stop_all(struct stop_set *s, pid_t only_tid, unsigned timeout_ms);

/* Detach every stopped thread, re-injecting signals that arrived during
 * the stop.  Idempotent. */
void stop_detach_all(struct stop_set *s);

/* Late cleanup: detach threads that were seized but only stopped after the
 * deadline, restore the signal mask, and if a termination signal arrived,
 * die from it now that nothing is held. */
void stop_release(struct stop_set *s);

void stop_free(struct stop_set *s);

/* How long threads were held: first interrupt to last detach (0 if none). */
uint64_t stop_window_ns(const struct stop_set *s);

/* The kernel's count of the threads of pid (field 20 of /proc/PID/stat),
 * or -1. */
long stop_count_threads(pid_t pid);

/* Read "comm" and the state letter of /proc/PID/task/TID/stat.  Returns 0
 * or a negative errno (-ENOENT: no such thread). */
int stop_read_task_stat(pid_t pid, pid_t tid, char *comm, size_t n, char *state);
