/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "stop.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fd-budget.h"
#include "output.h"
#include "remote.h"

/* A scan that keeps finding new threads means threads are being created
 * faster than we stop them; stop trying after this many rounds. */
#define STOP_MAX_ROUNDS 1000

void
stop_init(struct stop_set *s, pid_t pid)
{
	memset(s, 0, sizeof(*s));
	s->pid = pid;
}

static int names_finish(struct stop_set *s, int taskfd);

void
stop_free(struct stop_set *s)
{
	(void)names_finish(s, -1);
	free(s->t);
	free(s->hash);
	s->t = NULL;
	s->hash = NULL;
	s->n = s->cap = s->hash_cap = 0;
}

uint64_t
stop_window_ns(const struct stop_set *s)
{
	if (!s->t_first_ns || s->t_last_ns < s->t_first_ns)
		return 0;
	return s->t_last_ns - s->t_first_ns;
}

static size_t
hash_slot(pid_t tid, size_t cap)
{
	return ((size_t)(uint32_t)tid * 2654435761u) & (cap - 1);
}

static struct stop_thread *
find(struct stop_set *s, pid_t tid)
{
	size_t i;

	if (!s->hash_cap)
		return NULL;
	for (i = hash_slot(tid, s->hash_cap); s->hash[i];
	     i = (i + 1) & (s->hash_cap - 1)) {
		struct stop_thread *t = &s->t[s->hash[i] - 1];

		if (t->tid == tid)
			return t;
	}
	return NULL;
}

static void
hash_put(struct stop_set *s, size_t idx)
{
	size_t i = hash_slot(s->t[idx].tid, s->hash_cap);

	while (s->hash[i])
		i = (i + 1) & (s->hash_cap - 1);
	s->hash[i] = (int)idx + 1;
}

static struct stop_thread *
add(struct stop_set *s, pid_t tid)
{
	struct stop_thread *t;

	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct stop_thread *nt = realloc(s->t, cap * sizeof(*nt));

		if (!nt)
			return NULL;
		s->t = nt;
		s->cap = cap;
	}
	/* keep the table at most half full */
	if ((s->n + 1) * 2 > s->hash_cap) {
		size_t cap = s->hash_cap ? s->hash_cap * 2 : 128, i;
		int *nh = calloc(cap, sizeof(*nh));

		if (!nh)
			return NULL;
		free(s->hash);
		s->hash = nh;
		s->hash_cap = cap;
		for (i = 0; i < s->n; i++)
			hash_put(s, i);
	}
	t = &s->t[s->n];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	t->status = STOP_VANISHED;
	hash_put(s, s->n);
	s->n++;
	return t;
}

/* "tid (comm) S ...": comm may itself contain ')'. */
static int
parse_task_stat(char *buf, char *comm, size_t n, char *state)
{
	char *open_p = strchr(buf, '('), *close_p = strrchr(buf, ')');
	size_t l;

	if (!open_p || !close_p || close_p < open_p || close_p[1] != ' ')
		return -EINVAL;
	l = (size_t)(close_p - open_p - 1);
	if (l >= n)
		l = n - 1;
	memcpy(comm, open_p + 1, l);
	comm[l] = '\0';
	*state = close_p[2];
	return 0;
}

/* path relative to dirfd (or absolute) */
static int
read_small_file(int dirfd, const char *path, char *buf, size_t size)
{
	ssize_t r;
	int fd, e;

	fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = read(fd, buf, size - 1);
	e = errno;
	close(fd);
	if (r <= 0)
		return r < 0 ? -e : -ENOENT;
	buf[r] = '\0';
	return 0;
}

int
stop_read_task_stat(pid_t pid, pid_t tid, char *comm, size_t n, char *state)
{
	char path[64], buf[1024];
	int r;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	r = read_small_file(AT_FDCWD, path, buf, sizeof(buf));
	return r < 0 ? r : parse_task_stat(buf, comm, n, state);
}

/* PF_EXITING of the kernel's task flags (/proc/PID/stat field 9): set
 * when the task starts do_exit(). */
#define STOP_PF_EXITING 0x4u

int
stop_read_task_flags(pid_t pid, pid_t tid, char *state, unsigned long long *flags)
{
	char path[64], buf[1024], comm[64], *p;
	int r, field;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	r = read_small_file(AT_FDCWD, path, buf, sizeof(buf));
	if (r < 0 || (r = parse_task_stat(buf, comm, sizeof(comm), state)) < 0)
		return r;
	/* the fields after the name, which may hold spaces and ')' */
	p = strrchr(buf, ')');
	for (field = 2; p && field < 9; field++) {
		p = strchr(p + 1, ' ');
		if (p)
			p++;
	}
	*flags = p ? strtoull(p, NULL, 10) : 0;
	return 0;
}

/* 1 if thread tid of pid is listed and exiting, 0 if it is listed and
 * not, or a negative errno (-ENOENT: gone). */
static int
thread_exit_state(pid_t pid, pid_t tid)
{
	unsigned long long flags = 0;
	char state = 0;
	int r = stop_read_task_flags(pid, tid, &state, &flags);

	/* A thread in do_exit() releases its memory map and its root
	 * (exit_mm(), exit_fs()) well before /proc shows it as a zombie
	 * (exit_notify()): opens through /proc/TID then fail while its
	 * state still reads R.  PF_EXITING is set early, though after a
	 * core dump's wait and a PTRACE_EVENT_EXIT stop (exit_signals()). */
	if (r < 0)
		return r;
	return state == 'Z' || state == 'X' || (flags & STOP_PF_EXITING);
}

bool
stop_thread_exiting(pid_t pid, pid_t tid)
{
	int r = thread_exit_state(pid, tid);

	return r == 1 || r == -ENOENT || r == -ESRCH;
}

bool
stop_thread_in_exit(pid_t pid, pid_t tid)
{
	return thread_exit_state(pid, tid) == 1;
}

int
stop_maps_error(pid_t tid, int err)
{
	return stop_thread_exiting(tid, tid) ? -ESRCH : err;
}

#if !STOP_STATE_AT_STOP
/* The same through an open /proc/PID/task directory: a 1000-thread dump
 * opens 1000 of these, and the shorter path walk is measurable. */
static int
read_task_stat_at(int taskfd, pid_t tid, char *comm, size_t n, char *state)
{
	char path[32], buf[1024];
	int r;

	snprintf(path, sizeof(path), "%d/stat", (int)tid);
	r = read_small_file(taskfd, path, buf, sizeof(buf));
	return r < 0 ? r : parse_task_stat(buf, comm, n, state);
}
#endif

/* The kernel's count of the process's threads (exited group leaders
 * waiting for the others included), or -1.  The link count of
 * /proc/PID/task is 2 plus that count (proc_task_getattr(), since Linux
 * 2.6.x): one stat(), about 2 us, where /proc/PID/stat (field 20, the
 * same number) sums every thread's times and costs 0.2-0.4 ms at 1000
 * threads, once before the stop and once inside it (known_set_complete).
 * A kernel that counted no threads there (link count 2) gets field 20. */
long
stop_count_threads(pid_t pid)
{
	char path[64], buf[1024], *p;
	struct stat st;
	int field;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if (stat(path, &st) == 0 && st.st_nlink > 2)
		return (long)st.st_nlink - 2;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_small_file(AT_FDCWD, path, buf, sizeof(buf)) < 0)
		return -1;
	p = strrchr(buf, ')');
	if (!p)
		return -1;
	/* p + 1 is the space before field 3 */
	for (field = 2; field < 20 && p; field++)
		p = strchr(p + 1, ' ');
	return p ? strtol(p + 1, NULL, 10) : -1;
}

/* Whether a rescan can be skipped: every thread we know of is stopped or
 * gone, and the kernel counts exactly as many threads as we hold stopped.
 * A stopped thread cannot clone, and a clone() that returned before its
 * caller stopped has already added to the count, so equality means no
 * thread appeared since the listing.  One small read instead of listing
 * /proc/PID/task again (about 1 us per thread, inside the stop window).
 * Anything unusual (zombie leader, timeout, failure, a thread exiting
 * right now) makes the counts differ or returns false: full rescan. */
static bool
known_set_complete(const struct stop_set *s)
{
	size_t i, stopped = 0;
	long nr;

	for (i = 0; i < s->n; i++) {
		switch (s->t[i].status) {
		case STOP_STOPPED:
			stopped++;
			break;
		case STOP_EXITED:
		case STOP_VANISHED:
			break;
		default:
			return false;
		}
	}
	if (!stopped)
		return false;
	nr = stop_count_threads(s->pid);
	return nr > 0 && (size_t)nr == stopped;
}

pid_t
stop_task_tid(const char *name)
{
	char *end;
	long tid = strtol(name, &end, 10);

	return *end || tid <= 0 || tid > INT_MAX ? 0 : (pid_t)tid;
}

/* The thread ids listed in d, from its start: stop_all() lists the same
 * descriptor again for each rescan (rewinddir()) and reads the names
 * through it, so a stop holds one descriptor of /proc/PID/task, not two. */
static int
list_tasks_in(DIR *d, pid_t **out, size_t *n_out)
{
	struct dirent *de;
	pid_t *v = NULL;
	size_t n = 0, cap = 0;

	rewinddir(d);
	for (;;) {
		pid_t tid;

		errno = 0;
		de = readdir(d);
		if (!de)
			break;
		tid = stop_task_tid(de->d_name);
		if (!tid)
			continue;
		if (n == cap) {
			pid_t *nv;

			cap = cap ? cap * 2 : 64;
			nv = realloc(v, cap * sizeof(*nv));
			if (!nv) {
				free(v);
				return -ENOMEM;
			}
			v = nv;
		}
		v[n++] = tid;
	}
	/* a process reaped since the directory was opened: what opening
	 * it again would have said */
	if (errno) {
		int e = errno;

		free(v);
		return e == ENOENT ? -ESRCH : -e;
	}
	*out = v;
	*n_out = n;
	return 0;
}

static int
list_tasks(pid_t pid, pid_t **out, size_t *n_out)
{
	char path[64];
	DIR *d;
	int r;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return errno == ENOENT ? -ESRCH : -errno;
	r = list_tasks_in(d, out, n_out);
	closedir(d);
	return r;
}

#if STOP_STATE_AT_STOP
/* The name from /proc/PID/task/TID/comm: the raw bytes and a newline.
 * Cheaper than .../stat (no do_task_stat(), no times summed), and the
 * state comes from the stop instead (stop_state()). */
static int
read_task_comm_at(int taskfd, pid_t pid, pid_t tid, char *comm, size_t n)
{
	char path[64], buf[80];
	size_t l;
	int r;

	if (taskfd >= 0) {
		/* "TID/comm" by hand: snprintf() would be a tenth of the
		 * user-space work of a 1000-thread dump */
		char digits[16], *d = digits + sizeof(digits), *p = path;
		unsigned v = (unsigned)tid;

		do
			*--d = (char)('0' + v % 10);
		while ((v /= 10) != 0);
		while (d < digits + sizeof(digits))
			*p++ = *d++;
		memcpy(p, "/comm", sizeof("/comm"));
	} else {
		snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid,
			 (int)tid);
	}
	r = read_small_file(taskfd >= 0 ? taskfd : AT_FDCWD, path, buf, sizeof(buf));
	if (r < 0)
		return r;
	/* the name (a C string: no NUL) and the kernel's newline; a name
	 * may hold newlines of its own */
	l = strlen(buf);
	if (l && buf[l - 1] == '\n')
		l--;
	if (l >= n)
		l = n - 1;
	memcpy(comm, buf, l);
	comm[l] = '\0';
	return 0;
}
#endif

/* Names (and, where the stop cannot tell it, states) of threads
 * [from, to), while they still run.  A thread whose name cannot be read
 * gets state '?' (gone, unless it is the only one asked for).  Returns
 * -EMFILE or -ENFILE if a name could not be read for want of a
 * descriptor (the thread is not gone: the stop cannot go on), else 0.
 * About 2.3 us of kernel work per thread for the name (path walk, open,
 * read; 4.5 us with the state from .../stat).  stop_prefetch() reads them on a
 * second thread while the caller lists the threads and does its other
 * work before the stop.  (Two threads reading names of the same process
 * each take about 1.3 times as long per name as one alone, with file
 * tables of their own; 1.6 times sharing one.) */
static int
read_names(struct stop_set *s, int taskfd, size_t from, size_t to, bool mark_gone)
{
	size_t i;
	int err = 0;

	for (i = from; i < to; i++) {
		struct stop_thread *t = &s->t[i];
#if STOP_STATE_AT_STOP
		int r = read_task_comm_at(taskfd, s->pid, t->tid, t->comm,
					  sizeof(t->comm));

		/* Not from the names thread: it may run during the stop,
		 * when the state is the stop's own (and seize() finds a
		 * thread that is gone). */
		if (mark_gone)
			t->state = r < 0 ? '?' : '\0';
#else
		int r = taskfd >= 0 ? read_task_stat_at(taskfd, t->tid, t->comm,
							sizeof(t->comm), &t->state)
				    : stop_read_task_stat(s->pid, t->tid, t->comm,
							  sizeof(t->comm), &t->state);

		(void)mark_gone; /* the names thread is done before the stop */
		if (r < 0 && !fd_exhausted(r))
			t->state = '?';
#endif
		t->unnamed = fd_exhausted(r);
		if (t->unnamed && !err)
			err = r;
	}
	return err;
}

/* stop_prefetch(): the names of the threads, read by a second thread
 * while the caller lists them and does its other work before the stop
 * (maps, ELF lookups, paging in), and during the stop where that tells
 * the states; helped at the end by stop_names_wait() (or by stop_all(),
 * before it stops anything, where it does not).
 * The listing hands the threads over as it goes (nm->avail), and both
 * claim up to NAMES_CHUNK threads at a time (nm->next). */
#define NAMES_CHUNK 16
/* How long stop_all() waits for the names thread to end by itself. */
#define NAMES_LAST_WAIT_NS 200000

struct stop_names {
	struct stop_set *s;
	int taskfd;
	atomic_size_t avail; /* threads s->t[0, avail) listed so far */
	atomic_bool listed;  /* avail is final */
	atomic_size_t next;  /* first thread not claimed yet */
	pthread_t th;
	bool running;
	bool pinned; /* started off our CPU: cpus is what it may use */
	cpu_set_t cpus;
	atomic_bool done; /* the thread has no more to do */
	/* an -EMFILE or -ENFILE of read_names() in names_work() (0: none):
	 * names_finish() reads those names again */
	atomic_int err;
};

/* Name the threads listed, until the listing is over and every thread
 * is claimed.  s->t is not reallocated while this runs (stop_prefetch()
 * reserves it), and only entries below avail, filled in before avail
 * was published, are touched. */
static void
names_work(struct stop_names *nm, int taskfd)
{
	for (;;) {
		/* listed first: once it is set, avail is final */
		bool listed = atomic_load_explicit(&nm->listed, memory_order_acquire);
		size_t avail = atomic_load_explicit(&nm->avail, memory_order_acquire);
		size_t i = atomic_load_explicit(&nm->next, memory_order_relaxed), end;

		if (i >= avail) {
			if (listed)
				return;
			/* ahead of the listing (on a core of our own) */
			sched_yield();
			continue;
		}
		end = avail - i < NAMES_CHUNK ? avail : i + NAMES_CHUNK;
		if (atomic_compare_exchange_weak(&nm->next, &i, end)) {
			int r = read_names(nm->s, taskfd, i, end, !STOP_STATE_AT_STOP);

			if (r < 0)
				atomic_store(&nm->err, r); /* any: it is read again */
		}
	}
}

static void *
names_main(void *arg)
{
	struct stop_names *nm = arg;
	/* A file table of our own: every open() and close() of a name
	 * would otherwise take the lock of the shared one, and every
	 * lookup through taskfd count references on its file, with the
	 * main thread doing the same on the other core (measured, names
	 * read over and over by two threads: 1.7 instead of 2.0 us per
	 * name, 1.3 us by one thread alone). */
#if defined(__SANITIZE_THREAD__)
	/* ThreadSanitizer tracks descriptors per process, not per file
	 * table: our close() of our copy would look like a race. */
	bool own_files = false;
#else
	bool own_files = unshare(CLONE_FILES) == 0;
#endif

	/* Placed now: free to move again (back to the caller's CPU when
	 * that one waits for us and ours is busy). */
	if (nm->pinned)
		(void)sched_setaffinity(0, sizeof(nm->cpus), &nm->cpus);
	names_work(nm, nm->taskfd);
	if (own_files && nm->taskfd >= 0)
		close(nm->taskfd); /* our copy; the caller closes its own */
	atomic_store_explicit(&nm->done, true, memory_order_release);
	return NULL;
}

/* Finish the prefetched names (help through taskfd, or nm's own if it
 * is negative, then join); idempotent.  Returns -EMFILE or -ENFILE if a
 * name could not be read for want of a descriptor, else 0. */
static int
names_finish(struct stop_set *s, int taskfd)
{
	struct stop_names *nm = s->names;
	uint64_t end;
	bool moved;
	int err;

	if (!nm)
		return 0;
	names_work(nm, taskfd >= 0 ? taskfd : nm->taskfd);
	/* Its last chunk takes some 40 us; the chunk ends, or it is not
	 * getting the CPU it is on. */
	end = remote_now_ns() + NAMES_LAST_WAIT_NS;
	while (nm->running && !atomic_load_explicit(&nm->done, memory_order_acquire) &&
	       remote_now_ns() < end)
		sched_yield();
	moved = nm->running && nm->pinned &&
		!atomic_load_explicit(&nm->done, memory_order_acquire);
	if (moved) {
		/* Still to finish (a chunk, or even to start) where the
		 * other work on its CPU lets it: move it to ours, which is
		 * free while we wait (a thread left waiting on a CPU that a
		 * real-time task held kept the dump 0.1-0.5 s). */
		cpu_set_t here;
		int cpu = sched_getcpu();

		CPU_ZERO(&here);
		if (cpu >= 0 && cpu < CPU_SETSIZE) {
			CPU_SET(cpu, &here);
			(void)pthread_setaffinity_np(nm->th, sizeof(here), &here);
		}
	}
	if (nm->running)
		pthread_join(nm->th, NULL);
	/* A thread that ended meanwhile has no tid left, and glibc then
	 * applies the mask to the caller: ours again, in case. */
	if (moved)
		(void)sched_setaffinity(0, sizeof(nm->cpus), &nm->cpus);
	err = atomic_load(&nm->err);
	if (err < 0) {
		/* The names thread's file table is a copy of ours as it
		 * started, with what was open then: full for it, ours may
		 * not be.  Read as it reads them (this may be in the stop,
		 * where a name read tells no state). */
		size_t i;

		err = 0;
		for (i = 0; i < s->n; i++)
			if (s->t[i].unnamed) {
				int r = read_names(s, taskfd >= 0 ? taskfd : nm->taskfd,
						   i, i + 1, !STOP_STATE_AT_STOP);

				if (r < 0 && !err)
					err = r;
			}
	}
	if (nm->taskfd >= 0)
		close(nm->taskfd);
	free(nm);
	s->names = NULL;
	return err;
}

int
stop_names_wait(struct stop_set *s)
{
	return names_finish(s, -1);
}

const struct stop_thread *
stop_find(struct stop_set *s, pid_t tid)
{
	return find(s, tid);
}

char
stop_state(char before, bool group_stop, int blocked)
{
	if (group_stop)
		return 'T';
	if (blocked > 0)
		return 'S';
	if (blocked == 0)
		return 'R';
	return before ? before : '?';
}

/* The job-control stops held back beyond a stop window (stop_release()),
 * those of SIGTSTP, SIGTTIN, SIGTTOU that the caller's own mask did not
 * block: while a thread that did not stop in time is still attached with
 * its interrupt pending (or an exit is not collected), ctxdump must not
 * be suspended either -- the thread would stop late and stay stopped as
 * long as ctxdump.  stop_late_release() lets them through once its list
 * is empty; a one-shot dump keeps them until it exits (which detaches
 * every thread).  windows: stop sets whose signals are blocked now. */
static sigset_t jc_held;
static bool jc_holding;
static unsigned windows;

static void
jc_set(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTSTP);
	sigaddset(set, SIGTTIN);
	sigaddset(set, SIGTTOU);
}

/* Keep the job-control stops blocked past the window; oldmask is the mask
 * the window restores. */
static void
jc_hold(const sigset_t *oldmask)
{
	sigset_t all;
	int sig;

	if (jc_holding)
		return;
	jc_set(&all);
	sigemptyset(&jc_held);
	for (sig = 1; sig < NSIG; sig++)
		if (sigismember(&all, sig) == 1 && sigismember(oldmask, sig) != 1)
			sigaddset(&jc_held, sig);
	sigprocmask(SIG_BLOCK, &jc_held, NULL);
	jc_holding = true;
}

static void
jc_let_go(void)
{
	if (!jc_holding || windows)
		return;
	jc_holding = false;
	sigprocmask(SIG_UNBLOCK, &jc_held, NULL);
}

static void
block_signals(struct stop_set *s, sigset_t *waitset)
{
	sigemptyset(waitset);
	sigaddset(waitset, SIGCHLD);
	sigaddset(waitset, SIGINT);
	sigaddset(waitset, SIGTERM);
	sigaddset(waitset, SIGHUP);
	sigaddset(waitset, SIGQUIT);
	if (!s->masked) {
		/* A blocked SIGCHLD stays pending even with SIG_DFL, so a stop
		 * reported between waitpid() and sigtimedwait() is not lost.
		 * The job-control stops (Ctrl-Z, a background read or write of
		 * the terminal) are blocked too but not waited for: suspended
		 * inside the window, ctxdump would hold the target stopped for
		 * as long as it stays suspended.  Left pending, they take
		 * effect in stop_release(), once every thread was let go.
		 * (SIGSTOP cannot be blocked: ctxdump.1.) */
		sigset_t block;
		int sig;

		jc_set(&block);
		for (sig = 1; sig < NSIG; sig++)
			if (sigismember(waitset, sig) == 1)
				sigaddset(&block, sig);
		sigprocmask(SIG_BLOCK, &block, &s->oldmask);
		s->masked = true;
		windows++;
	}
}

/* One wait status; returns true if it ended a STOP_PENDING thread. */
static bool
handle_status(struct stop_set *s, pid_t tid, int st)
{
	struct stop_thread *t = find(s, tid);
	bool was_pending;

	if (!t)
		return false;
	was_pending = t->status == STOP_PENDING;
	if (WIFSTOPPED(st)) {
		int event = (st >> 16) & 0xff, sig = WSTOPSIG(st);

		if (t->status != STOP_PENDING && t->status != STOP_TIMEOUT)
			return false;
		t->status = STOP_STOPPED;
		if (event == PTRACE_EVENT_STOP) {
			/* interrupt-stop (SIGTRAP) or group-stop (stop signal);
			 * a group stop is re-armed by the kernel on detach. */
			t->group_stop = sig != SIGTRAP;
		} else {
			/* signal-delivery-stop: hand the signal back on detach */
			t->pending_sig = sig;
		}
	} else if (WIFEXITED(st) || WIFSIGNALED(st)) {
		t->status = STOP_EXITED;
	}
	return was_pending;
}

bool
stop_thread_ended(pid_t pid, pid_t tid)
{
	char comm[64], state = '?';
	int r = stop_read_task_stat(pid, tid, comm, sizeof(comm), &state);

	return r == -ENOENT || r == -ESRCH ||
	       (r == 0 && (state == 'Z' || state == 'X'));
}

/* The signal mask in "Key:\t<hex>" of a /proc status text, or 0. */
static unsigned long long
status_mask(const char *buf, const char *key)
{
	const char *p = strstr(buf, key);

	return p ? strtoull(p + strlen(key), NULL, 16) : 0;
}

/* Thread tid of pid: 1 ending (in do_exit(), SIGKILL pending for it or
 * its process, or the process dumping core), 0 not, 2 a zombie, -1
 * gone. */
static int
task_ending(pid_t pid, pid_t tid)
{
	const unsigned long long kill_bit = 1ull << (SIGKILL - 1);
	unsigned long long flags = 0;
	char path[64], buf[4096], state = 0;
	int r = stop_read_task_flags(pid, tid, &state, &flags);

	if (r < 0)
		return r == -ENOENT || r == -ESRCH ? -1 : 0;
	if (state == 'Z' || state == 'X')
		return 2;
	if (flags & STOP_PF_EXITING)
		return 1;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	r = read_small_file(AT_FDCWD, path, buf, sizeof(buf));
	if (r < 0)
		return r == -ENOENT || r == -ESRCH ? -1 : 0;
	/* CoreDumping: its process dumps core, in this thread when it has
	 * neither SIGKILL pending nor PF_EXITING (the other threads get
	 * both); it ends when the dump is written */
	return ((status_mask(buf, "\nSigPnd:") | status_mask(buf, "\nShdPnd:")) &
		kill_bit) != 0 ||
	       status_mask(buf, "\nCoreDumping:") != 0;
}

bool
stop_ran_exec(pid_t pid,
	      const struct remote_image *img,
	      bool seen,
	      bool all_gone,
	      unsigned timeout_ms)
{
	uint64_t end = remote_now_ns() + (uint64_t)timeout_ms * 1000000u;

	/* Every thread listed went away, yet the process is not going: the
	 * old program's threads ended for an exec that is still loading the
	 * new one (its id may not show anything of it yet). */
	if (!seen && all_gone && !stop_process_dying(pid))
		seen = true;

	for (;;) {
		if (remote_image_changed(pid, img))
			return true;
		if (!seen || remote_now_ns() >= end || task_ending(pid, pid) < 0)
			return false;
		usleep(1000);
	}
}

/* At most this many other threads looked at behind a zombie leader. */
#define DYING_LOOK 64

bool
stop_process_dying(pid_t pid)
{
	pid_t *tids = NULL;
	size_t n = 0, i, looked = 0;
	int r = task_ending(pid, pid);

	if (r != 2)
		return r != 0;
	/* A zombie leader: the process lives on if it only called
	 * pthread_exit().  An exit_group() or a kill puts SIGKILL in every
	 * other thread's pending set until it ends: one still there says
	 * which. */
	if (list_tasks(pid, &tids, &n) < 0)
		return true;
	r = -1;
	for (i = 0; i < n && looked < DYING_LOOK && r < 0; i++) {
		if (tids[i] == pid)
			continue;
		looked++;
		r = task_ending(pid, tids[i]);
		if (r == 2)
			r = -1;
	}
	free(tids);
	return r != 0;
}

static bool
exit_status_code(int code)
{
	return code == CLD_EXITED || code == CLD_KILLED || code == CLD_DUMPED;
}

/* Collect the exits of the seized threads of s that ended, whatever
 * state they were left in (only system calls: also run from a signal
 * handler, while this thread is in seize()).  Returns how many. */
static size_t
collect_exits(struct stop_set *s)
{
	size_t i, k = 0;

	for (i = 0; i < s->n; i++) {
		struct stop_thread *t = &s->t[i];
		siginfo_t si;
		int st;

		if (t->status != STOP_PENDING && t->status != STOP_STOPPED &&
		    t->status != STOP_TIMEOUT &&
		    !(t->status == STOP_EXITED && t->unreaped))
			continue;
		/* A look first: a ptrace-stop is reported whatever the
		 * options say, and it is wait_stops()' to take. */
		memset(&si, 0, sizeof(si));
		if (waitid(P_PID, (id_t)t->tid, &si,
			   WEXITED | WNOHANG | WNOWAIT | __WALL) < 0 ||
		    si.si_pid != t->tid || !exit_status_code(si.si_code))
			continue;
		if (waitpid(t->tid, &st, __WALL | WNOHANG) == t->tid) {
			(void)handle_status(s, t->tid, st);
			t->unreaped = false;
			k++;
		}
	}
	return k;
}

/* A thread not stopped after this long is looked at in /proc: has it
 * exited?  Sleeping threads stop in microseconds, so this costs nothing
 * in the usual case. */
#define STOP_EXIT_CHECK_NS 5000000u

/* Past the deadline with no thread held, a thread that is runnable is
 * waited for in steps this long; each step's end looks at the states
 * again (of at most STOP_CPU_LOOK threads still to stop). */
#define STOP_CPU_STEP_NS 10000000u
#define STOP_CPU_LOOK    64

/* Take the stops there are of the threads of s still to stop (and of late
 * ones), without waiting.  Returns true when a thread of s is stopped:
 * held.  (An id gone, ECHILD, is left to wait_stops() to find.) */
static bool
take_stops(struct stop_set *s)
{
	bool held = false;
	size_t i;

	for (i = 0; i < s->n; i++) {
		struct stop_thread *t = &s->t[i];
		int st;

		if ((t->status == STOP_PENDING || t->status == STOP_TIMEOUT) &&
		    waitpid(t->tid, &st, __WALL | WNOHANG) == t->tid)
			handle_status(s, t->tid, st);
		held = held || t->status == STOP_STOPPED;
	}
	return held;
}

/* Whether one of the threads from s->t[from] on that are still to stop
 * is runnable ('R').  The kernel interrupts a thread that runs at once
 * and wakes one that sleeps, so a runnable one that has not stopped yet
 * waits for a CPU; one in 'D' (vfork(), a wait in the kernel) waits for
 * something else, which may take any time. */
static bool
runnable_left(const struct stop_set *s, size_t from)
{
	size_t i, looked = 0;

	for (i = from; i < s->n && looked < STOP_CPU_LOOK; i++) {
		const struct stop_thread *t = &s->t[i];
		char comm[64], state = '?';

		if (t->status != STOP_PENDING)
			continue;
		looked++;
		if (stop_read_task_stat(s->pid, t->tid, comm, sizeof(comm), &state) ==
			    0 &&
		    state == 'R')
			return true;
	}
	return false;
}

/* wait_stops()' wait for a thread that has no CPU, while none is held. */
struct cpu_wait {
	uint64_t end; /* when it ends at the latest; 0: no wait (any more) */
	bool waiting; /* the deadline passed with none held: it is on */
};

/* A thread stopped while wait_stops() waited for a CPU: that wait is over,
 * and the others get timeout_ns from now, the time any round may hold
 * the threads that stopped.  Returns the new deadline. */
static uint64_t
cpu_wait_over(struct cpu_wait *w, uint64_t now, uint64_t timeout_ns)
{
	w->waiting = false;
	w->end = 0;
	return now + timeout_ns;
}

/* The threads still to stop are late: seized, their interrupt pending
 * (stop_release(), struct stop_late). */
static void
pending_late(struct stop_set *s)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (s->t[i].status == STOP_PENDING)
			s->t[i].status = STOP_TIMEOUT;
}

/* Collect the stop of every STOP_PENDING thread, one thread at a time.
 * waitpid(-1) would look at every tracee on each call (the kernel walks
 * the tracer's whole ptraced list), which made the wait quadratic: 10 ms
 * of the stop window for 1000 threads, against 0.3 ms for this loop.  A
 * thread not stopped yet is waited for with sigtimedwait() on SIGCHLD,
 * which every ptrace-stop sends, so the deadline and the termination
 * signals still apply; a SIGCHLD from another thread's stop only costs
 * one more WNOHANG poll.  A thread that exits instead of stopping is
 * reported by waitpid() (and so collected), except an exited group
 * leader, which is seen in /proc.
 * The deadline is short because the threads that stopped are held until
 * the others stop.  When it passes with none held (every thread of s
 * still to stop, or gone) and a thread still to stop is runnable, that
 * one only waits for a CPU (a loaded machine, a target of low priority),
 * and waiting on costs the target nothing: the wait goes on, a step at a
 * time while one is runnable, until cpu_wait_ms after the start.  Every
 * SIGCHLD then takes the stops of all of them: the first stop ends this,
 * and the others get timeout_ms from then, as in a wait without it. */
static int
wait_stops(struct stop_set *s,
	   const sigset_t *waitset,
	   unsigned timeout_ms,
	   unsigned cpu_wait_ms)
{
	const uint64_t start = remote_now_ns(), limit = (uint64_t)timeout_ms * 1000000u;
	uint64_t deadline = start + limit;
	struct cpu_wait cpu = {0};
	unsigned checks = 0;
	bool late = false;
	size_t i;

	if (cpu_wait_ms > timeout_ms)
		cpu.end = start + (uint64_t)cpu_wait_ms * 1000000u;

	for (i = 0; i < s->n; i++) {
		struct stop_thread *t = &s->t[i];
		uint64_t check = 0;
		int st;

		/* A thread that missed the deadline of an earlier round may
		 * have stopped since: take it if it did, without waiting. */
		if (t->status == STOP_TIMEOUT &&
		    waitpid(t->tid, &st, __WALL | WNOHANG) == t->tid)
			handle_status(s, t->tid, st);
		while (t->status == STOP_PENDING) {
			struct timespec ts;
			uint64_t now, left;
			int sig;
			pid_t r;

			r = waitpid(t->tid, &st, __WALL | WNOHANG);
			if (r == t->tid) {
				handle_status(s, r, st);
				if (cpu.waiting && t->status == STOP_STOPPED)
					deadline = cpu_wait_over(&cpu, remote_now_ns(),
								 limit);
				continue;
			}
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				/* ECHILD: no longer our tracee: it ran
				 * execve() and goes on with the process id
				 * (exec_leader() looks there).  Nothing to
				 * hold here. */
				t->status = STOP_EXITED;
				s->exec_seen = s->exec_seen || t->tid != s->pid;
				break;
			}
			now = remote_now_ns();
			if (!check) {
				check = now + STOP_EXIT_CHECK_NS;
			} else if (now >= check) {
				check = now + STOP_EXIT_CHECK_NS;
				/* Threads that ended while held: an exit of
				 * the process, or the exec of a thread not
				 * stopped yet (this one, perhaps), which waits
				 * for those exits to be collected.  Every
				 * fourth look: one system call per thread. */
				if (++checks % 4 == 0)
					(void)collect_exits(s);
				/* a group leader that ended while other
				 * threads live is a zombie its tracer is not
				 * told about (the kernel delays it until the
				 * last thread is gone): waitpid() would never
				 * report it */
				if (stop_thread_ended(s->pid, t->tid)) {
					t->status = STOP_EXITED;
					t->unreaped = true;
					break;
				}
			}
			/* (also when this look comes past cpu.end: ctxdump
			 * itself got no CPU for that long, and a thread still
			 * runnable waited for one all the same) */
			if (!late && now >= deadline && cpu.end) {
				bool held = take_stops(s);

				if (held && cpu.waiting) {
					/* one stopped at last */
					deadline = cpu_wait_over(&cpu, now, limit);
					continue;
				}
				if (!held && runnable_left(s, i)) {
					/* nothing was held before now */
					s->t_first_ns = now;
					s->cpu_waited = true;
					cpu.waiting = true;
					if (now < cpu.end) {
						deadline =
							cpu.end - now > STOP_CPU_STEP_NS
								? now + STOP_CPU_STEP_NS
								: cpu.end;
						continue;
					}
				} else if (!held && cpu.waiting) {
					/* none runnable any more (one went to
					 * sleep, or into D): not a wait for a
					 * CPU that ran out, which the caller
					 * would say */
					s->cpu_waited = false;
				}
			}
			if (late || now >= deadline) {
				/* past the deadline: only collect stops that
				 * are already there */
				late = true;
				break;
			}
			left = deadline - now;
			if (left > check - now)
				left = check - now;
			ts.tv_sec = (time_t)(left / 1000000000u);
			ts.tv_nsec = (long)(left % 1000000000u);
			sig = sigtimedwait(waitset, NULL, &ts);
			if (sig == SIGCHLD && cpu.waiting) {
				/* the stop of any of them ends the wait for a
				 * CPU: from then on one is held */
				now = remote_now_ns();
				if (take_stops(s))
					deadline = cpu_wait_over(&cpu, now, limit);
				else
					s->t_first_ns = now;
			}
			if (sig < 0 || sig == SIGCHLD)
				continue;
			s->signal = sig;
			return -EINTR;
		}
	}
	pending_late(s);
	return 0;
}

/* ---- an execve() of the target while threads are seized ----
 * execve() in a multi-threaded process kills the other threads
 * (de_thread()) and waits until each is released; a traced one only is
 * once its tracer collects its exit.  All that time the exec holds the
 * process's cred_guard_mutex, which PTRACE_SEIZE takes as well -- and
 * when a signal interrupts that wait the kernel restarts it
 * (-ERESTARTNOINTR).  So a seize of any of its threads, made after
 * ctxdump seized another and while the exec runs, waits for an exit only
 * the waiting thread could collect: until a SIGKILL (the kernel's known
 * exec/ptrace_attach deadlock).
 * While stop_all() seizes, a timer therefore sends this thread a signal
 * every SEIZE_WATCH_MS.  When two of them find the same seize still
 * waiting, the handler collects the exits of the threads seized so far
 * (and of the late ones): the exec goes on, the seize returns, and what
 * was collected is STOP_EXITED.  The threads that then stop belong to the
 * new program image, which the callers tell by its AT_RANDOM bytes
 * (remote_image_same()).  Without the deadlock the handler only reads
 * two variables. */
#define SEIZE_WATCH_MS 20

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

static struct stop_late *late_auto;
static pid_t late_tracer;
static size_t late_pass(struct stop_late *l);

/* A read of the target's memory while its threads are stopped can block
 * for good: process_vm_readv() of a page in a userfaultfd range waits
 * (killable only) for the target to serve the fault, which it cannot do
 * while it is stopped, and the window's signals are blocked.  If a stop
 * window lasts this long after the threads stopped, ctxdump exits: the
 * exit wakes the blocked read and the kernel lets the threads go. */
#define STOP_STUCK_MS 30000

static timer_t stuck_timer;
static bool stuck_ready;
static volatile pid_t stuck_pid;
static const char *volatile stuck_path;

void
stop_stuck_unlink(const char *path)
{
	stuck_path = path;
}

static void
stuck_expired(union sigval v)
{
	char msg[256];
	int n;

	(void)v;
	n = snprintf(msg, sizeof(msg),
		     "%s: reading the memory of process %d has been blocked for "
		     "%u s while its threads are stopped (a userfaultfd range "
		     "it does not serve?); giving up so that they run again\n",
		     cli_name(), (int)stuck_pid, STOP_STUCK_MS / 1000);
	if (n > 0)
		(void)!write(STDERR_FILENO, msg,
			     (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
	if (stuck_path)
		(void)unlink(stuck_path);
	_exit(CLI_EXIT_FATAL);
}

static void
stuck_arm(pid_t pid, bool on)
{
	struct itimerspec its;

	memset(&its, 0, sizeof(its));
	if (on && !stuck_ready) {
		struct sigevent sev;

		memset(&sev, 0, sizeof(sev));
		sev.sigev_notify = SIGEV_THREAD;
		sev.sigev_notify_function = stuck_expired;
		if (timer_create(CLOCK_MONOTONIC, &sev, &stuck_timer) < 0)
			return;
		stuck_ready = true;
	}
	if (!stuck_ready)
		return;
	if (on) {
		stuck_pid = pid;
		its.it_value.tv_sec = STOP_STUCK_MS / 1000;
	}
	(void)timer_settime(stuck_timer, 0, &its, NULL);
}

/* Set by seize() around PTRACE_SEIZE: the stop set, and a count of the
 * seizes begun, which the handler compares with the one it saw last. */
static struct stop_set *volatile watch_set;
static volatile unsigned long watch_seq;
static unsigned long watch_seen;
static timer_t watch_timer;
static pthread_t watch_thread;
static bool watch_ready;

static void
watch_on_signal(int sig)
{
	int saved = errno;
	struct stop_set *s = watch_set;
	unsigned long seq = watch_seq;

	(void)sig;
	if (s && seq == watch_seen) {
		if (collect_exits(s))
			s->exec_seen = true;
		if (late_auto && (pid_t)syscall(SYS_gettid) == late_tracer)
			(void)late_pass(late_auto);
	}
	watch_seen = seq;
	errno = saved;
}

/* Arm the timer for this thread (made on first use, again if another
 * thread stops a process).  Without one (no timer left), seizes are not
 * watched. */
static void
watch_arm(bool on)
{
	struct itimerspec its;

	memset(&its, 0, sizeof(its));
	if (on && (!watch_ready || !pthread_equal(watch_thread, pthread_self()))) {
		struct sigaction sa;
		struct sigevent sev;
		sigset_t rt;

		if (watch_ready)
			(void)timer_delete(watch_timer);
		watch_ready = false;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = watch_on_signal;
		sa.sa_flags = SA_RESTART;
		sigemptyset(&sa.sa_mask);
		memset(&sev, 0, sizeof(sev));
		sev.sigev_notify = SIGEV_THREAD_ID;
		sev.sigev_signo = SIGRTMIN;
		sev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
		if (sigaction(SIGRTMIN, &sa, NULL) < 0 ||
		    timer_create(CLOCK_MONOTONIC, &sev, &watch_timer) < 0)
			return;
		sigemptyset(&rt);
		sigaddset(&rt, SIGRTMIN);
		pthread_sigmask(SIG_UNBLOCK, &rt, NULL);
		watch_thread = pthread_self();
		watch_ready = true;
	}
	if (!watch_ready)
		return;
	if (on) {
		its.it_value.tv_nsec = SEIZE_WATCH_MS * 1000000L;
		its.it_interval = its.it_value;
		watch_seen = watch_seq - 1;
	}
	(void)timer_settime(watch_timer, 0, &its, NULL);
}

/* Seize and interrupt one listed thread.  Returns -EPERM only for a
 * permission failure (not for an exiting thread). */
static int
seize(struct stop_set *s, struct stop_thread *t)
{
	long r;
	int e;

	if (t->state == 'Z' || t->state == 'X') {
		/* An exited group leader stays a zombie while other threads
		 * run; PTRACE_SEIZE would fail with EPERM.  (Known only where
		 * the state is read before the stop; elsewhere the EPERM
		 * below finds it.) */
		t->status = STOP_ZOMBIE;
		return 0;
	}
	watch_seq++;
	watch_set = s;
	atomic_signal_fence(memory_order_seq_cst);
	r = ptrace(PTRACE_SEIZE, t->tid, NULL, NULL);
	e = errno;
	atomic_signal_fence(memory_order_seq_cst);
	watch_set = NULL;
	if (r == 0) {
		if (!s->t_first_ns)
			s->t_first_ns = remote_now_ns();
		t->status = STOP_PENDING;
		/* A thread that is exiting can still be interrupted (and its
		 * exit is then collected); ESRCH says that its id is gone:
		 * this was the thread that ran execve(), seized while the
		 * exec ended, and it goes on as the group leader, with the
		 * process id.  Interrupted there, its stop is the leader's
		 * (a second interrupt of the leader is harmless). */
		if (ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL) < 0 &&
		    errno == ESRCH && t->tid != s->pid) {
			(void)ptrace(PTRACE_INTERRUPT, s->pid, NULL, NULL);
			s->exec_seen = true;
		}
		return 0;
	}
	if (e == ESRCH) {
		t->status = STOP_VANISHED;
		return 0;
	}
	if (e == EPERM) {
		char comm[64], state = '?';

		r = stop_read_task_stat(s->pid, t->tid, comm, sizeof(comm), &state);
		/* An exiting thread also answers EPERM (py-spy #771). */
		if (r == -ENOENT || r == -ESRCH) {
			t->status = STOP_VANISHED;
			return 0;
		}
		if (r == 0 && (state == 'Z' || state == 'X')) {
			t->state = state;
			t->status = STOP_ZOMBIE;
			return 0;
		}
	}
	t->status = STOP_FAILED;
	t->err = e;
	return e == EPERM ? -EPERM : 0;
}

static size_t
count(const struct stop_set *s, enum stop_status st)
{
	size_t i, n = 0;

	for (i = 0; i < s->n; i++)
		n += s->t[i].status == st;
	return n;
}

/* Empty the thread list (stop_all() then starts from a fresh listing). */
static void
forget_threads(struct stop_set *s)
{
	s->n = 0;
	if (s->hash)
		memset(s->hash, 0, s->hash_cap * sizeof(*s->hash));
}

/* Room for cap threads in s->t and its hash, so that neither moves while
 * the names thread reads s->t.  false: out of memory. */
static bool
reserve(struct stop_set *s, size_t cap)
{
	size_t hcap = 128, i;

	if (cap > s->cap) {
		struct stop_thread *nt = realloc(s->t, cap * sizeof(*nt));

		if (!nt)
			return false;
		s->t = nt;
		s->cap = cap;
	}
	while (hcap < 2 * cap)
		hcap *= 2;
	if (hcap > s->hash_cap) {
		int *nh = calloc(hcap, sizeof(*nh));

		if (!nh)
			return false;
		free(s->hash);
		s->hash = nh;
		s->hash_cap = hcap;
		for (i = 0; i < s->n; i++)
			hash_put(s, i);
	}
	return true;
}

/* Start the names thread.  The kernel puts a new thread on the CPU of
 * the thread that creates it and leaves it there while that one runs
 * (measured on a 2-vCPU VM: the names were read only once the caller
 * blocked, at the stop), so it starts on the CPUs we may use minus the
 * one we run on, and then widens its mask again; names_finish() moves it
 * back to us if that CPU does not let it finish.  (Starting it where
 * the kernel likes and sleeping until it runs, for our wake-up to find
 * the idle CPU, left both on one CPU.)  With only one CPU there is no
 * point in a second thread. */
static void
names_start(struct stop_names *nm)
{
	pthread_attr_t attr;
	cpu_set_t other;
	sigset_t all, old;
	int cpu = sched_getcpu();

	if (sched_getaffinity(0, sizeof(nm->cpus), &nm->cpus) == 0) {
		if (CPU_COUNT(&nm->cpus) < 2)
			return;
		nm->pinned = cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &nm->cpus);
	}
	if (pthread_attr_init(&attr) != 0)
		return;
	/* A small stack: reading a name needs a few hundred bytes. */
	(void)pthread_attr_setstacksize(&attr, 256u << 10);
	if (nm->pinned) {
		other = nm->cpus;
		CPU_CLR(cpu, &other);
		nm->pinned =
			pthread_attr_setaffinity_np(&attr, sizeof(other), &other) == 0;
	}
	/* Every signal blocked in it: it may still run during the stop,
	 * where stop_all() waits for the termination signals itself. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	nm->running = pthread_create(&nm->th, &attr, names_main, nm) == 0;
	pthread_attr_destroy(&attr);
	if (!nm->running && nm->pinned) {
		/* not allowed after all (the cpuset changed): anywhere */
		nm->pinned = false;
		if (pthread_attr_init(&attr) == 0) {
			(void)pthread_attr_setstacksize(&attr, 256u << 10);
			nm->running =
				pthread_create(&nm->th, &attr, names_main, nm) == 0;
			pthread_attr_destroy(&attr);
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Bytes of directory entries per getdents64() of the listing: about 64
 * threads, handed to the names thread as soon as they are read. */
#define PREFETCH_DENTS 2048
/* At most this many threads are listed ahead; more are found by the
 * rescan inside stop_all() (the kernel's count differs). */
#define PREFETCH_MAX (1u << 20)

int
stop_prefetch(struct stop_set *s, size_t expect)
{
	union {
		struct dirent64 align;
		char b[PREFETCH_DENTS];
	} buf;
	struct stop_names *nm;
	char path[64];
	size_t cap;
	int dfd, r = 0;

	if (s->n || s->names)
		return -EINVAL;
	if (expect > PREFETCH_MAX)
		expect = PREFETCH_MAX;
	cap = expect + expect / 4 + 64;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)s->pid);
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	nm = calloc(1, sizeof(*nm));
	if (!nm || !reserve(s, cap)) {
		free(nm);
		close(dfd);
		return -ENOMEM;
	}
	nm->s = s;
	atomic_init(&nm->avail, 0);
	atomic_init(&nm->listed, false);
	atomic_init(&nm->next, 0);
	atomic_init(&nm->done, false);
	atomic_init(&nm->err, 0);
	/* the names thread's own (the listing moves dfd's position) */
	nm->taskfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	s->names = nm;
	names_start(nm);

	/* The listing, handed over to the names thread batch by batch;
	 * never past the room reserved (s->t must not move). */
	for (;;) {
		ssize_t got = getdents64(dfd, buf.b, sizeof(buf.b)), off;

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			r = errno == ENOENT ? -ESRCH : -errno;
			break;
		}
		if (got == 0)
			break;
		for (off = 0; off + (ssize_t)offsetof(struct dirent64, d_name) < got;) {
			struct dirent64 *de = (struct dirent64 *)(buf.b + off);
			pid_t tid;

			if (de->d_reclen == 0 || off + de->d_reclen > got)
				break;
			off += de->d_reclen;
			tid = stop_task_tid(de->d_name);
			if (!tid || find(s, tid))
				continue;
			if (s->n == s->cap)
				break;
			(void)add(s, tid); /* room reserved */
		}
		atomic_store_explicit(&nm->avail, s->n, memory_order_release);
		if (s->n == s->cap)
			break;
	}
	close(dfd);
	atomic_store_explicit(&nm->listed, true, memory_order_release);
	if (r < 0 || s->n == 0) {
		(void)names_finish(s, -1);
		forget_threads(s);
		return r < 0 ? r : -ESRCH;
	}
	return 0;
}

/* Take the threads of l that are listed in s from s->t[from] on (not the
 * ended ones: only their exits are to come) into s as they are: seized by
 * an earlier stop, their interrupt pending -- or their stop there already,
 * which wait_stops() takes -- late (STOP_TIMEOUT) until late_wait() says
 * to wait for them.  A seize of them would fail (EPERM: ours already),
 * and every round that met one was lost until it stopped.
 * Each leaves l: from now on s lets it go, and gives it back to a
 * struct stop_late (stop_late_add()) if it does not stop in this round
 * either.  SIGCHLD is blocked (block_signals()), so the handler does not
 * touch l meanwhile.  The stop window starts here if nothing was seized
 * before: any time a late stop was held before this round is not of this
 * round, and the SIGCHLD handler lets go of a stop that arrives between
 * rounds, so that time is short. */
static void
late_take(struct stop_set *s, struct stop_late *l, size_t from)
{
	size_t i, k = 0, busy = 0;

	for (i = 0; i < l->n; i++) {
		struct stop_thread *t = l->ended[i] ? NULL : find(s, l->tid[i]);

		if (t && (size_t)(t - s->t) >= from) {
			/* waited for only while no thread is held (late_wait()) */
			t->status = STOP_TIMEOUT;
			t->late = true;
			t->err = 0;
			if (!s->t_first_ns)
				s->t_first_ns = remote_now_ns();
			continue;
		}
		l->tid[k] = l->tid[i];
		l->ended[k] = l->ended[i];
		busy += !l->ended[k++];
	}
	__atomic_store_n(&l->n, k, __ATOMIC_RELAXED);
	__atomic_store_n(&l->busy, busy, __ATOMIC_RELAXED);
}

/* Is tid one of l's?  (With SIGCHLD blocked: the handler changes l.) */
static bool
late_has(const struct stop_late *l, pid_t tid)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (l->tid[i] == tid)
			return true;
	return false;
}

/* PTRACE_SEIZE of thread t (listed in this round: from s->t[from] on)
 * failed with EPERM, while threads of l are late.  It may be one of them:
 * a late thread that ran execve() since l was looked at last goes on
 * with the process id (the kernel gives the thread that runs it the
 * leader's, de_thread()), where only a pass over l finds it (late_pass(),
 * which interrupts it again there: its interrupt may not have outlived
 * the exec).  Found there, still not stopped, it is taken over as any
 * late thread (late_take()); let go by the pass (its stop had come), it
 * is seized again.  Returns what seize() did, 0 for a take-over. */
static int
seize_late(struct stop_set *s, struct stop_late *l, size_t from, struct stop_thread *t)
{
	(void)late_pass(l);
	if (!late_has(l, t->tid))
		return seize(s, t);
	late_take(s, l, from);
	if (!t->late)
		return seize(s, t); /* ended: its exit is still to come */
	/* an id that changed: an exec (exec_leader(), stop_ran_exec()) */
	s->exec_seen = true;
	return 0;
}

/* The threads taken over by late_take() that did not stop meanwhile are
 * waited for as any other, but only when no thread was held: a round
 * that held the others while it waited for one that had already missed
 * an earlier round's deadline kept them stopped up to timeout_ms (and
 * the round that long) every time it met it -- for a thread that waits
 * long for a CPU or sits in vfork(), every round.  Those that stopped
 * are taken now; returns true (they are STOP_PENDING again) if there is
 * one to wait for. */
static bool
late_wait(struct stop_set *s)
{
	bool any = false;
	size_t i;

	if (take_stops(s))
		return false;
	for (i = 0; i < s->n; i++)
		if (s->t[i].late && s->t[i].status == STOP_TIMEOUT) {
			s->t[i].status = STOP_PENDING;
			any = true;
		}
	return any;
}

/* After an exec seen while threads were seized: the thread that ran it,
 * if it is ours, now has the process id, where it stops or is still to
 * stop.  Its stop is the leader entry's (read, then detached); not
 * stopped yet, it is late (STOP_TIMEOUT, struct stop_late).  An entry
 * that stopped already is detached as such (and if that finds it
 * running, its stop is collected as a late one's). */
static void
exec_leader(struct stop_set *s)
{
	struct stop_thread *l = find(s, s->pid);
	pid_t r;
	int st;

	/* (a zombie leader: no exec, or one still waiting for the other
	 * threads' exits, which a late thread's id going away tells) */
	if (!l || l->status == STOP_STOPPED || l->status == STOP_PENDING ||
	    stop_thread_ended(s->pid, s->pid))
		return;
	do
		r = waitpid(s->pid, &st, __WALL | WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return; /* not ours */
	l->unreaped = false;
	l->status = STOP_PENDING;
	if (r == 0 || !handle_status(s, s->pid, st))
		l->status = STOP_TIMEOUT;
}

static void detach_one(struct stop_thread *t, int sig);

/* Let go of the stopped tasks that are not threads of s->pid.  A listed
 * thread may end between the listing and its PTRACE_SEIZE, and its id go
 * to a task of another process (pid_max wraps in seconds under heavy
 * thread churn): that task was stopped by mistake, and read through the
 * memory of s->pid it would be sampled as a thread of it.  Stopped under
 * ptrace, its id cannot change hands again before it is let go, so the
 * check is sure.  tgkill() with signal 0 sends nothing and fails with
 * ESRCH for a task outside the thread group: one system call without a
 * path walk (a look-up in /proc/PID/task cost 1.8 ms more per 1000
 * threads inside the stop window). */
static void
drop_foreign(struct stop_set *s)
{
	size_t i;

	for (i = 0; i < s->n; i++) {
		struct stop_thread *t = &s->t[i];

		if (t->status != STOP_STOPPED ||
		    syscall(SYS_tgkill, (long)s->pid, (long)t->tid, 0L) == 0 ||
		    errno != ESRCH)
			continue;
		detach_one(t, t->pending_sig);
		if (t->status == STOP_DETACHED)
			t->status = STOP_VANISHED;
	}
}

/* For the tests: with CTXDUMP_TEST_SEIZE_GATE=FILE, the first stop removes
 * FILE once it has listed the threads and waits (10 s at most) for FILE
 * to exist again before it seizes them, so that a test can end a thread
 * and give its id to another process in between. */
static void
test_seize_gate(void)
{
	static bool done;
	const char *gate;
	int i;

	if (done)
		return;
	gate = getenv("CTXDUMP_TEST_SEIZE_GATE");
	if (!gate || unlink(gate) < 0)
		return;
	done = true;
	for (i = 0; i < 10000 && access(gate, F_OK) < 0; i++)
		(void)usleep(1000);
}

int
stop_all(struct stop_set *s,
	 pid_t only_tid,
	 unsigned timeout_ms,
	 unsigned cpu_wait_ms,
	 struct stop_late *late)
{
	sigset_t waitset;
	bool seized_any = false, late_waited = false;
	unsigned round;
	int r = 0, taskfd = -1;
	DIR *taskdir = NULL;

	block_signals(s, &waitset);
	if (!only_tid) {
		char path[64];

		snprintf(path, sizeof(path), "/proc/%d/task", (int)s->pid);
		taskfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		/* the rescans list it again (list_tasks_in()) */
		if (taskfd >= 0 && !(taskdir = fdopendir(taskfd))) {
			close(taskfd);
			taskfd = -1;
		}
	}
	watch_arm(true);
	for (round = 0; round < STOP_MAX_ROUNDS; round++) {
		pid_t *tids = NULL, one = only_tid;
		size_t n = 0, i, first_new = s->n;

		if (round == 0 && s->names) {
			/* Listed by stop_prefetch().  Where the stop tells the
			 * states, the names thread goes on during the stop,
			 * on the other core, until stop_names_wait(); else
			 * the names are finished first.  (A single thread is
			 * not taken from that list.)  With no names thread
			 * (one CPU) they are read now, before the stop: read
			 * after it, a thread that ended or was renamed
			 * meanwhile would be shown nameless or misnamed. */
			if (!STOP_STATE_AT_STOP || only_tid || !s->names->running)
				r = names_finish(s, taskfd);
			if (r < 0)
				break;
			if (!only_tid) {
				first_new = 0;
				goto named;
			}
			forget_threads(s);
			first_new = 0;
		}
		if (only_tid) {
			if (round > 0)
				break;
			tids = &one;
			n = 1;
		} else {
			if (round > 0 && known_set_complete(s))
				break;
			r = taskdir ? list_tasks_in(taskdir, &tids, &n)
				    : list_tasks(s->pid, &tids, &n);
			if (r < 0)
				break;
		}
		if (s->names && s->n + n > s->cap)
			r = names_finish(s, taskfd); /* add() is to move s->t */
		if (r < 0) {
			if (tids != &one)
				free(tids);
			break;
		}
		for (i = 0; i < n; i++) {
			if (find(s, tids[i]))
				continue;
			if (!add(s, tids[i])) {
				r = -ENOMEM;
				break;
			}
		}
		if (tids != &one)
			free(tids);
		if (r < 0)
			break;
		/* Names (states) first, while the new threads still run: a
		 * stopped thread would always look stopped. */
		r = read_names(s, taskfd, first_new, s->n, true);
		if (r < 0)
			break;
named:
		if (s->n == first_new)
			break; /* stable: every known thread stopped or gone */
		s->rounds++;
		test_seize_gate();
		if (late && late->n) {
			late_take(s, late, first_new);
			/* held already, wherever it is listed: an EPERM on
			 * a thread before it is not the first seize failing
			 * (it may be the process id, where a taken thread
			 * that ran execve() since the listing is now) */
			for (i = first_new; i < s->n && !seized_any; i++)
				seized_any = s->t[i].late;
		}
		for (i = first_new; i < s->n; i++) {
			struct stop_thread *t = &s->t[i];
			int e;

			if (t->late)
				continue; /* by late_take() */
			if (t->state == '?' && !only_tid) {
				t->status = STOP_VANISHED;
				continue;
			}
			e = seize(s, t);
			if (e == -EPERM && late && late->n)
				e = seize_late(s, late, first_new, t);
			if (t->late) {
				seized_any = true;
				continue;
			}
			if (e == -EPERM && !seized_any) {
				s->fail_tid = t->tid;
				s->fail_err = t->err;
				r = -EPERM;
				break;
			}
			if (t->status == STOP_PENDING)
				seized_any = true;
		}
		if (r < 0)
			break;
		r = wait_stops(s, &waitset, timeout_ms, cpu_wait_ms);
		if (r == 0 && late && !late_waited && late_wait(s)) {
			/* nothing held before now (the stop window starts
			 * here, as for a wait for a CPU) */
			late_waited = true;
			s->t_first_ns = remote_now_ns();
			r = wait_stops(s, &waitset, timeout_ms, cpu_wait_ms);
		}
		if (r < 0)
			break;
	}
	watch_arm(false);
	if (s->exec_seen)
		exec_leader(s);
	if (r == 0)
		drop_foreign(s);
	if (taskdir)
		closedir(taskdir);
	if (r == 0 && count(s, STOP_STOPPED) == 0) {
		/* Nothing to read: a zombie-only process, threads that are
		 * all still seized but did not stop in time (the process
		 * lives: its one thread in vfork(), or none of them got a
		 * CPU), or everything vanished. */
		if (count(s, STOP_ZOMBIE))
			r = 0;
		else
			r = count(s, STOP_TIMEOUT) ? -ETIMEDOUT : -ESRCH;
	}
	if (r < 0) {
		/* Those not stopped yet (a termination signal ended the wait)
		 * are as late as after the deadline: stop_release() and a
		 * struct stop_late let them go once they stop.  Left
		 * STOP_PENDING, a recorder ending on the signal held each
		 * that stopped until it exited. */
		pending_late(s);
		stop_detach_all(s);
	} else {
		stuck_arm(s->pid, true);
	}
	return r;
}

/* The signal a stop reported by status st holds back, to hand on when
 * the thread is let go: that of a signal-delivery-stop; none for an
 * interrupt or group stop (PTRACE_EVENT_STOP; the kernel re-arms a group
 * stop on detach). */
static int
stop_signal(int st)
{
	return WIFSTOPPED(st) && ((st >> 16) & 0xff) == 0 ? WSTOPSIG(st) : 0;
}

/* Collect the exit of thread t if it is there (a zombie only its tracer
 * can release).  Returns true when t needs nothing more. */
static bool
reap(struct stop_thread *t)
{
	pid_t r;
	int st;

	do
		r = waitpid(t->tid, &st, __WALL | WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return false;
	if (r == t->tid && WIFSTOPPED(st)) {
		/* cannot happen to a thread that exited; a stop must not be
		 * lost all the same */
		if (ptrace(PTRACE_DETACH, t->tid, NULL, (void *)(long)stop_signal(st)) <
		    0)
			return false;
	}
	/* reaped now, or ECHILD: not our tracee any more */
	t->unreaped = false;
	return true;
}

/* PTRACE_DETACH of a thread that was stopped, or that stopped late.  A
 * stopped thread leaves ptrace-stop only through SIGKILL: ESRCH means it
 * is exiting, and its exit is ours to collect. */
static void
detach_one(struct stop_thread *t, int sig)
{
	if (ptrace(PTRACE_DETACH, t->tid, NULL, (void *)(long)sig) == 0) {
		t->status = STOP_DETACHED;
		return;
	}
	t->status = STOP_EXITED;
	t->unreaped = true;
	if (reap(t) || stop_thread_ended(t->tid, t->tid))
		return;
	/* Neither stopped nor ended: the id is now another task's.  After
	 * an execve() by another thread, the process id (the old leader's,
	 * stopped, then killed by the exec) is the thread that ran it, and
	 * if it is seized by us it is still to stop -- and its interrupt may
	 * have been lost on the way: a late thread, interrupted again (here
	 * and by every late_pass()) until it stops and is let go. */
	t->status = STOP_TIMEOUT;
	t->unreaped = false;
	(void)ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL);
}

/* A thread that stopped after its deadline can be detached now. */
static void
detach_late(struct stop_set *s)
{
	size_t i;

	for (i = 0; i < s->n; i++) {
		struct stop_thread *t = &s->t[i];
		int st;

		if (t->status != STOP_TIMEOUT)
			continue;
		if (waitpid(t->tid, &st, __WALL | WNOHANG) == t->tid) {
			if (WIFSTOPPED(st))
				detach_one(t, stop_signal(st));
			else
				t->status = STOP_EXITED;
		}
	}
}

void
stop_detach_all(struct stop_set *s)
{
	bool any = false;
	size_t i;

	for (i = 0; i < s->n; i++) {
		struct stop_thread *t = &s->t[i];

		if (t->status != STOP_STOPPED)
			continue;
		detach_one(t, t->pending_sig);
		any = true;
	}
	detach_late(s);
	stuck_arm(s->pid, false);
	if (any || (s->t_first_ns && !s->t_last_ns))
		s->t_last_ns = remote_now_ns();
}

void
stop_release(struct stop_set *s)
{
	size_t i;
	bool late = false;

	stop_detach_all(s);
	detach_late(s);
	for (i = 0; i < s->n; i++) {
		struct stop_thread *t = &s->t[i];

		if (t->status == STOP_EXITED && t->unreaped)
			(void)reap(t);
		/* an exit still to collect cannot be left stopped: only a
		 * thread that may still stop holds the job-control stops */
		if (t->status == STOP_TIMEOUT)
			late = true;
	}
	if (s->masked) {
		sigset_t mask = s->oldmask;

		if (late)
			jc_hold(&s->oldmask);
		/* In one change of the mask: restored first and the held
		 * stops blocked again after, a Ctrl-Z that came during the
		 * window was delivered in between, and ctxdump was suspended
		 * with late threads seized -- each stopped when its stop
		 * came, until SIGCONT. */
		if (jc_holding)
			sigorset(&mask, &s->oldmask, &jc_held);
		sigprocmask(SIG_SETMASK, &mask, NULL);
		s->masked = false;
		windows--;
	}
	if (s->signal) {
		/* Everything is released: now die from the signal the user sent. */
		signal(s->signal, SIG_DFL);
		raise(s->signal);
	}
}

/* Late threads are let go from a SIGCHLD handler: the kernel tells the
 * tracer of every ptrace-stop and exit with SIGCHLD, so a late thread is
 * detached the moment it stops whatever the caller does then -- blocked
 * writing its output to a pipe nobody reads, unwinding, symbolizing --
 * instead of at its next poll (stop_late_release()).  Only the tracer
 * thread may detach; the list is touched by the caller only with SIGCHLD
 * blocked, and inside a stop window SIGCHLD is blocked and waited for
 * (block_signals()), so the handler never meets a stop set's threads.
 * SA_RESTART: the caller's read(), write() and waitpid() go on unseen. */
static struct sigaction late_oldact;

/* One pass over l without waiting: detach the late threads that stopped,
 * collect the ones that exited.  Returns how many remain that may still
 * stop (stop_late_busy()), not counting ended ones.  Only system calls
 * (and, when a detach fails, a /proc path formatted with snprintf(),
 * which for integers into a buffer neither locks nor allocates): also
 * run from the SIGCHLD handler. */
static size_t
late_pass(struct stop_late *l)
{
	size_t i, k = 0, busy = 0;

	for (i = 0; i < l->n; i++) {
		struct stop_thread t = {.tid = l->tid[i]};
		bool ended = l->ended[i];
		pid_t r;
		int st;

		r = waitpid(t.tid, &st, __WALL | WNOHANG);
		if (r < 0 && errno == ECHILD && !ended && t.tid != l->pid && l->pid) {
			/* Seized, not seen to end, and its id gone: it ran
			 * execve(), and is at the process id now. */
			t.tid = l->pid;
			r = waitpid(t.tid, &st, __WALL | WNOHANG);
		}
		if (r == 0 || (r < 0 && errno == EINTR)) {
			/* still running, or a zombie leader.  Interrupted
			 * again: the thread that ran execve() may have lost
			 * the interrupt sent before its exec ended. */
			if (r == 0 && !ended)
				(void)ptrace(PTRACE_INTERRUPT, t.tid, NULL, NULL);
			l->tid[k] = t.tid;
			l->ended[k++] = ended;
			busy += !ended;
			continue;
		}
		if (r == t.tid && WIFSTOPPED(st)) {
			detach_one(&t, stop_signal(st));
			if (t.unreaped || t.status == STOP_TIMEOUT) {
				/* killed meanwhile, or (TIMEOUT) not ours
				 * to detach yet after all */
				l->tid[k] = t.tid;
				l->ended[k] = t.unreaped;
				busy += !l->ended[k++];
			}
		}
		/* else exited and collected, or not ours any more */
	}
	__atomic_store_n(&l->n, k, __ATOMIC_RELAXED);
	__atomic_store_n(&l->busy, busy, __ATOMIC_RELAXED);
	return busy;
}

static void
late_on_sigchld(int sig)
{
	int saved = errno;

	(void)sig;
	if (late_auto && (pid_t)syscall(SYS_gettid) == late_tracer)
		(void)late_pass(late_auto);
	errno = saved;
}

static void
late_block(sigset_t *old)
{
	sigset_t chld;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, old);
}

int
stop_late_add(struct stop_late *l, const struct stop_set *s)
{
	sigset_t old;
	size_t i;
	int r = 0;

	late_block(&old);
	l->pid = s->pid;
	for (i = 0; i < s->n; i++) {
		const struct stop_thread *t = &s->t[i];
		size_t j;

		if (t->status != STOP_TIMEOUT &&
		    !(t->status == STOP_EXITED && t->unreaped))
			continue;
		for (j = 0; j < l->n && l->tid[j] != t->tid; j++)
			;
		if (j < l->n) {
			/* a late thread this stop saw end */
			l->ended[j] = l->ended[j] || t->status == STOP_EXITED;
			continue;
		}
		if (l->n == l->cap) {
			size_t cap = l->cap ? 2 * l->cap : 16;
			pid_t *nl = realloc(l->tid, cap * sizeof(*nl));
			bool *ne;

			if (!nl) {
				r = -ENOMEM;
				break;
			}
			l->tid = nl;
			ne = realloc(l->ended, cap * sizeof(*ne));
			if (!ne) {
				r = -ENOMEM;
				break;
			}
			l->ended = ne;
			l->cap = cap;
		}
		l->ended[l->n] = t->status == STOP_EXITED;
		l->tid[l->n++] = t->tid;
	}
	/* A late thread that ended since (a group leader calling
	 * pthread_exit()) is not reported until its process ends: once the
	 * pass below leaves it, seen in /proc.  Rare, so a read per round is
	 * cheap. */
	if (late_pass(l)) {
		size_t busy = 0;

		for (i = 0; i < l->n; i++) {
			char comm[64], st = '?';

			/* a zombie: ended (an id that is gone may be the
			 * thread that ran execve(), which late_pass() looks
			 * for at the pid) */
			if (!l->ended[i] &&
			    stop_read_task_stat(s->pid, l->tid[i], comm, sizeof(comm),
						&st) == 0 &&
			    (st == 'Z' || st == 'X'))
				l->ended[i] = true;
			busy += !l->ended[i];
		}
		__atomic_store_n(&l->busy, busy, __ATOMIC_RELAXED);
	}
	/* (the pass also looked once at a stop between stop_release() and
	 * now, which raised no SIGCHLD we could act on) */
	if (l->n && !late_auto) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = late_on_sigchld;
		sa.sa_flags = SA_RESTART;
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGCHLD, &sa, &late_oldact) == 0) {
			late_auto = l;
			late_tracer = (pid_t)syscall(SYS_gettid);
		}
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	return r;
}

void
stop_late_release(struct stop_late *l, unsigned wait_ms)
{
	uint64_t end;

	if (!__atomic_load_n(&l->busy, __ATOMIC_RELAXED)) {
		/* every one let go (by the SIGCHLD handler, perhaps), or
		 * ended: the handler collects those when they are reported */
		jc_let_go();
		return;
	}
	end = remote_now_ns() + (uint64_t)wait_ms * 1000000u;
	for (;;) {
		sigset_t old;
		size_t k;

		late_block(&old);
		k = late_pass(l);
		sigprocmask(SIG_SETMASK, &old, NULL);
		if (!k)
			jc_let_go();
		if (!k || remote_now_ns() >= end)
			return;
		usleep(1000);
	}
}

size_t
stop_late_busy(const struct stop_late *l)
{
	return __atomic_load_n(&l->busy, __ATOMIC_RELAXED);
}

void
stop_late_free(struct stop_late *l)
{
	if (late_auto == l) {
		sigset_t old;

		late_block(&old);
		late_auto = NULL;
		(void)sigaction(SIGCHLD, &late_oldact, NULL);
		sigprocmask(SIG_SETMASK, &old, NULL);
	}
	free(l->tid);
	free(l->ended);
	l->tid = NULL;
	l->ended = NULL;
	l->n = l->cap = l->busy = 0;
}

/* ---- permission diagnosis (strace diagnose_attach_eperm) ----
 * Shared by the dump and ctxdump record (moved from ctxdump.c). */

/* Value of "Key:" in a /proc status file, or -1. */
static long long
status_field(const char *path, const char *key)
{
	char *buf, *p;
	size_t len, kl = strlen(key);
	long long v = -1;

	if (remote_read_file(path, 1 << 16, &buf, &len) < 0)
		return -1;
	for (p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, key, kl) == 0 && p[kl] == ':') {
			v = strtoll(p + kl + 1, NULL, 10);
			break;
		}
	}
	free(buf);
	return v;
}

static bool
have_cap_sys_ptrace(void)
{
	char *buf, *p;
	size_t len;
	bool have = false;

	if (remote_read_file("/proc/self/status", 1 << 16, &buf, &len) < 0)
		return false;
	p = strstr(buf, "\nCapEff:");
	if (p)
		have = (strtoull(p + 8, NULL, 16) >> 19) & 1; /* CAP_SYS_PTRACE */
	free(buf);
	return have;
}

void
stop_diagnose_eperm(pid_t pid, pid_t tid)
{
	char path[64], comm[64] = "", state;
	long long tracer, uid, scope = -1;
	char *buf;
	size_t len;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	tracer = status_field(path, "TracerPid");
	if (tracer > 0 && tracer != getpid()) {
		if (stop_read_task_stat((pid_t)tracer, (pid_t)tracer, comm,
					sizeof(comm), &state) < 0)
			snprintf(comm, sizeof(comm), "?");
		if (tid != pid)
			fprintf(stderr,
				"%s: thread %d of process %d is already being traced "
				"by pid %lld (",
				cli_name(), (int)tid, (int)pid, tracer);
		else
			fprintf(stderr,
				"%s: process %d is already being traced by pid %lld (",
				cli_name(), (int)pid, tracer);
		output_text_escape(stderr, (const uint8_t *)comm, strlen(comm), false);
		fputs("); only one tracer at a time is possible\n", stderr);
		return;
	}
	uid = status_field(path, "Uid");
	/* Root without CAP_SYS_PTRACE is a container's root (docker drops the
	 * capability by default): "run as root" would not help there. */
	if (uid >= 0 && (uid_t)uid != geteuid() && !have_cap_sys_ptrace()) {
		if (geteuid() == 0)
			cli_warn("process %d may be owned by a different user (uid "
				 "%lld); ctxdump runs as root but without "
				 "CAP_SYS_PTRACE, which that needs (in a container: "
				 "docker run --cap-add SYS_PTRACE)",
				 (int)pid, uid);
		else
			cli_warn("process %d may be owned by a different user (uid "
				 "%lld); run ctxdump as that user or as root",
				 (int)pid, uid);
		return;
	}
	if (remote_read_file("/proc/sys/kernel/yama/ptrace_scope", 64, &buf, &len) ==
	    0) {
		scope = strtoll(buf, NULL, 10);
		free(buf);
	}
	/* Yama scope 1 and 2 only restrict tracers without CAP_SYS_PTRACE;
	 * scope 3 forbids every attach. */
	if (scope == 3) {
		cli_warn("kernel.yama.ptrace_scope = 3 forbids every ptrace attach "
			 "(reboot "
			 "needed to lower it)");
		return;
	}
	if (scope >= 1 && !have_cap_sys_ptrace()) {
		cli_warn("kernel.yama.ptrace_scope = %lld may be restricting this "
			 "attach (run as "
			 "root or grant CAP_SYS_PTRACE)",
			 scope);
		return;
	}
	if (!have_cap_sys_ptrace()) {
		cli_warn("process %d may not be dumpable, or ctxdump runs in a "
			 "container "
			 "without CAP_SYS_PTRACE (docker run --cap-add SYS_PTRACE)",
			 (int)pid);
		return;
	}
	cli_warn(
		"ctxdump has CAP_SYS_PTRACE; a seccomp filter or a security module may "
		"forbid ptrace here");
}
