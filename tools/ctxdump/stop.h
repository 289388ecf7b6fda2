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
 * default action.  SIGTSTP, SIGTTIN and SIGTTOU are blocked too and take
 * effect only then -- or, while a thread that did not stop in time is
 * still attached, once stop_late_release() has let it go -- so that
 * ctxdump never sits suspended on held threads.
 *
 * Threads exit while they are held: before their stop (pthread_exit()
 * between the listing and the interrupt), or while stopped (the process
 * is killed: SIGKILL ends even a ptrace-stop).  A traced thread that
 * exited stays a zombie until its tracer collects it, and an exited group
 * leader is not even reported to the tracer while other threads live; the
 * process cannot finish exiting meanwhile.  stop.c collects every such
 * exit itself (STOP_EXITED, with unreaped set while it cannot yet), so no
 * caller has to.  What a caller must still do is hand the threads a stop
 * could not let go (late stops, unreaped exits) to a struct stop_late: a
 * SIGCHLD handler then lets each go the moment it stops or ends, also
 * while the caller is blocked writing its output.  One that outlives its
 * stops (ctxdump record) calls stop_late_release() now and then too: it
 * lets the held job-control stops through once the list is empty. */

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Where the state letter of a stopped thread comes from.  x86_64: from the
 * stop itself (stop_state() with the registers at the stop), so only the
 * name is read before it (/proc/PID/task/TID/comm).  Elsewhere: the state
 * in /proc/PID/task/TID/stat, read with the name just before the stop. */
#if defined(__x86_64__)
#define STOP_STATE_AT_STOP 1
#else
#define STOP_STATE_AT_STOP 0
#endif

enum stop_status {
	STOP_PENDING,  /* seized, stop not reported yet */
	STOP_STOPPED,  /* in ptrace-stop: may be read */
	STOP_DETACHED, /* was stopped, now detached */
	STOP_VANISHED, /* listed, but gone before it could be seized */
	STOP_EXITED,   /* seized, then exited (before it stopped or while held) */
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
	bool unreaped;   /* STOP_EXITED, but a zombie not collected yet */
	bool late;       /* taken over from a struct stop_late (stop_all()) */
	/* '?': the name could not be read (gone); 'Z'/'X': an exited group
	 * leader (STOP_ZOMBIE).  Otherwise, with STOP_STATE_AT_STOP, 0 (see
	 * stop_state()); without, the /proc state read before the stop. */
	char state;
	bool unnamed;  /* its name not read for want of a descriptor */
	char comm[64]; /* thread name (raw bytes, NUL-terminated) */
};

struct stop_set {
	pid_t pid;
	struct stop_thread *t;
	size_t n, cap;
	int *hash; /* open addressing: tid -> index + 1 */
	size_t hash_cap;
	/* First PTRACE_INTERRUPT or take-over of a late thread (or the
	 * last look that saw no thread stopped, when stop_all() waited for
	 * one that had no CPU: nothing was held before) and end of the last
	 * PTRACE_DETACH. */
	uint64_t t_first_ns, t_last_ns;
	unsigned rounds;
	/* stop_all() waited on past timeout_ms for a thread that was
	 * runnable (cpu_wait_ms), and none went to sleep meanwhile */
	bool cpu_waited;
	/* The thread whose PTRACE_SEIZE failed when stop_all() returned
	 * -EPERM, and the errno. */
	pid_t fail_tid;
	int fail_err;
	struct stop_names *names; /* stop_prefetch() in progress */
	int signal; /* termination signal received while holding threads */
	/* The process ran execve() while threads were seized: their exits
	 * were collected for it (stop.c), or a seized thread's id went
	 * away -- that of the thread that ran it, which goes on with the
	 * process id (perhaps still seized by us). */
	bool exec_seen;
	bool masked;
	sigset_t oldmask;
};

/* The thread id a /proc/PID/task entry names, or 0 ("." and ".."). */
pid_t stop_task_tid(const char *name);

void stop_init(struct stop_set *s, pid_t pid);

/* Optional, some time before stop_all() (not for one thread): list the
 * threads of s->pid now (expect: about how many there are, from
 * stop_count_threads()), reading their names on a second thread as they
 * are listed and while the caller does other work before the stop (on an
 * idle core that work is then free).  With STOP_STATE_AT_STOP that
 * thread goes on during the stop, and the names are complete after
 * stop_names_wait(); else stop_all() reads the rest before it stops
 * anything.  stop_free() ends it if stop_all() is not called.  Leave s
 * alone meanwhile (but for stop_all()).  Returns 0 or a negative errno
 * (stop_all() then lists the threads itself). */
int stop_prefetch(struct stop_set *s, size_t expect);

struct stop_late;

/* Stop every thread of s->pid (only thread only_tid if it is not 0),
 * rescanning /proc/PID/task until a scan finds no new thread.  A thread
 * of late (if not NULL) that is listed is not seized again but taken out
 * of late into s as it is, seized with its interrupt pending: stopped if
 * its stop is there, or comes in time once the others were waited for and
 * none of them stopped (a wait for it then holds nothing), else late once
 * more (STOP_TIMEOUT).  One whose seize fails with EPERM (ours already)
 * is looked for in late once more after a pass over it: a late thread
 * that ran execve() is at the process id now, and is taken over there.
 * Call it with late from the thread that called stop_late_add().
 * timeout_ms bounds each wait for the stops -- but while no thread is
 * stopped (held) yet and one still to stop is runnable (waits for a CPU),
 * the wait goes on until cpu_wait_ms after its start (no longer than
 * timeout_ms if cpu_wait_ms is not more), and once one stops, the others
 * get timeout_ms from then.  Returns
 *   0        at least one thread is stopped (see the per-thread status),
 *   -EPERM   the first thread could not be seized (fail_tid, fail_err),
 *   -ESRCH   the process (or thread only_tid) does not exist or every
 *            thread vanished,
 *   -ETIMEDOUT  no thread stopped in that time, yet one or more of
 *            them is still there (seized, STOP_TIMEOUT: its stop is
 *            late, stop_release() and struct stop_late deal with it),
 *   -EINTR   a termination signal arrived; everything is detached again,
 *   other negative errno values for internal errors (everything detached).
 */
int stop_all(struct stop_set *s,
	     pid_t only_tid,
	     unsigned timeout_ms,
	     unsigned cpu_wait_ms,
	     struct stop_late *late);

/* Detach every stopped thread, re-injecting signals that arrived during
 * the stop.  Idempotent. */
void stop_detach_all(struct stop_set *s);

/* The file that ctxdump removes when a stop window blocks too long and it
 * exits (record's temporary output: nothing recorded is kept, FILE stays
 * as it was); NULL for none.  path must stay valid until it is replaced. */
void stop_stuck_unlink(const char *path);

/* After stop_prefetch(): wait until every listed thread's name is read.
 * Where the stop tells the states (STOP_STATE_AT_STOP) the names thread
 * goes on during the stop, so the names of a prefetched listing are only
 * complete after this (call it before stop_detach_all(): a name read
 * once the threads run again is gone for a thread that ended meanwhile,
 * and another for one renamed).  Without a names thread (one CPU)
 * stop_all() reads them before the stop.  Idempotent; stop_free() does
 * it too.  Returns -EMFILE or -ENFILE if a name could not be read for
 * want of a descriptor (the first call only), else 0. */
int stop_names_wait(struct stop_set *s);

/* The thread tid of s, or NULL. */
const struct stop_thread *stop_find(struct stop_set *s, pid_t tid);

/* Late cleanup: detach threads that were seized but only stopped after the
 * deadline, collect the exits of threads that ended while held, restore
 * the signal mask, and if a termination signal arrived, die from it now
 * that nothing is held.  Threads left seized (STOP_TIMEOUT) or unreaped
 * are released when the caller exits, or by a struct stop_late. */
void stop_release(struct stop_set *s);

/* Threads that stop_all() seized, or saw exit, that the stop set could not
 * let go: their stop or exit is still to come.  They cannot be seized
 * again meanwhile (a later stop_all() takes them over instead), and each
 * must be detached (or collected) as soon as it stops (or ends): none is
 * held stopped between stops. */
struct stop_late {
	pid_t pid; /* their process */
	pid_t *tid;
	/* per tid: it has ended, only its exit is still to be collected (a
	 * group leader that exited before its other threads: the kernel
	 * reports it only once the last one is gone) */
	bool *ended;
	size_t n, cap;
	/* how many of the n have not ended: threads that may still stop */
	size_t busy;
};

/* Take over the threads of s (after stop_release()) still seized but not
 * stopped, and the unreaped exits.  Returns 0 or -ENOMEM (those are then
 * released when the caller exits).  From then on they are let go from a
 * SIGCHLD handler (installed with SA_RESTART, on the first list that
 * needs it, until stop_late_free()) the moment they stop or end, whatever
 * the caller is doing: blocked writing its output, unwinding.  Call it
 * from the thread that called stop_all(). */
int stop_late_add(struct stop_late *l, const struct stop_set *s);

/* Detach the late threads that have stopped by now and collect the ones
 * that exited; keep the others.  With wait_ms, poll that long for them. */
void stop_late_release(struct stop_late *l, unsigned wait_ms);

/* How many late threads may still stop (l->n less the ended ones waiting
 * for their exit to be collected): those are worth a wait or a fast poll,
 * and while there are any the job-control stops stay held.  An ended
 * thread cannot be left stopped; the SIGCHLD handler collects its exit
 * when the kernel reports it. */
size_t stop_late_busy(const struct stop_late *l);

void stop_late_free(struct stop_late *l);

void stop_free(struct stop_set *s);

/* How long threads were held: first interrupt to last detach (0 if none). */
uint64_t stop_window_ns(const struct stop_set *s);

/* The kernel's count of the threads of pid (field 20 of /proc/PID/stat),
 * or -1. */
long stop_count_threads(pid_t pid);

/* Whether thread tid of pid has ended: gone from /proc, or a zombie. */
bool stop_thread_ended(pid_t pid, pid_t tid);

/* Whether process pid is going away: gone, or its threads ending -- in
 * do_exit(), or with a SIGKILL pending (a kill, or an exit_group()
 * taking them down).  Looks at the leader and, behind a zombie leader, at
 * one other thread.  A leader in the middle of pthread_exit() looks the
 * same for a moment: callers see whether the process then ends. */
bool stop_process_dying(pid_t pid);

struct remote_image;

/* After a stop in which every thread of pid went away (all_gone) or none
 * stopped: whether pid ran execve() and runs another image than img now
 * (remote_image_changed()).  When the stop saw an exec on its way
 * (stop_set.exec_seen), or every thread went away from a process that is
 * not going away, the new program may still be loading: wait for it, at
 * most timeout_ms, unless the process is gone. */
bool stop_ran_exec(pid_t pid,
		   const struct remote_image *img,
		   bool seen,
		   bool all_gone,
		   unsigned timeout_ms);

/* The state of a stopped thread at the moment it stopped: 'T' it was in
 * a group-stop (job control; stop_thread.group_stop); else from blocked
 * (remote_regs_blocked() of its registers at the stop): 'S' the stop
 * interrupted a blocking system call (which returns EINTR or is
 * restarted), 'R' it stopped in user space or on the way out of a system
 * call that had completed (it was running or runnable); blocked < 0
 * (cannot tell): before, the state read before the stop (stop_thread.
 * state), '?' if none. */
char stop_state(char before, bool group_stop, int blocked);

/* Read "comm" and the state letter of /proc/PID/task/TID/stat.  Returns 0
 * or a negative errno (-ENOENT: no such thread). */
int stop_read_task_stat(pid_t pid, pid_t tid, char *comm, size_t n, char *state);

/* The state letter and the flags (PF_*, field 9) of
 * /proc/PID/task/TID/stat.  Returns 0 or a negative errno. */
int stop_read_task_flags(pid_t pid, pid_t tid, char *state, unsigned long long *flags);

/* Whether thread tid of pid has exited or is exiting (gone, a zombie, or
 * in do_exit(): PF_EXITING): its mappings and files can no longer be read
 * through /proc/TID, or soon cannot.  (stop_thread_ended() without the
 * last.) */
bool stop_thread_exiting(pid_t pid, pid_t tid);

/* Whether thread tid of pid is still listed but exiting (a zombie, or in
 * do_exit()): stop_thread_exiting() without "gone".  Such a thread never
 * runs user code again, so it starts no thread. */
bool stop_thread_in_exit(pid_t pid, pid_t tid);

/* Why the maps of thread tid could not be read (err), or why they were
 * empty (-ENODATA): -ESRCH if that thread is exiting or gone, which a
 * dying thread's maps show as one of those (a failed open or read, or
 * nothing), so that the caller reads through another thread
 * (via_live_thread() in target.c); else err, which no other thread would
 * change, so that the caller does not go through every thread for it. */
int stop_maps_error(pid_t tid, int err);

/* After PTRACE_SEIZE of thread tid of pid failed with EPERM: one hint on
 * standard error why (ctxdump.1 DIAGNOSTICS): traced already by another
 * process (named), owned by another user, the Yama setting, no
 * CAP_SYS_PTRACE. */
void stop_diagnose_eperm(pid_t pid, pid_t tid);
