/* SPDX-License-Identifier: Apache-2.0 */
/* Which thread of the target to address its maps and memory through
 * (dump.h): the process itself, or a live thread when the main thread
 * has exited.  Shared by the one-shot dump and `ctxdump record`, and kept
 * out of ctxdump.c (the main) so that the fuzz harnesses, which link every
 * ctxdump source but the main, link record.c too. */
#include "config.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "dump.h"
#include "elf-tls.h"
#include "output.h"
#include "remote.h"
#include "stop.h"

static bool
tid_in(pid_t tid, const pid_t *set, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (set[i] == tid)
			return true;
	return false;
}

/* The threads of pid into *tids (*cap long, grown as needed), in the
 * kernel's order: the leader, then oldest first, since a new thread joins
 * the tail of its process's list.  Returns how many; 0 if the list
 * cannot be read. */
static size_t
list_threads(pid_t pid, pid_t **tids, size_t *cap)
{
	char path[64];
	struct dirent *de;
	size_t n = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (!dir)
		return 0;
	while ((de = readdir(dir)) != NULL) {
		pid_t tid = stop_task_tid(de->d_name);

		if (!tid)
			continue;
		if (n == *cap) {
			size_t c = *cap ? *cap * 2 : 64;
			pid_t *t = realloc(*tids, c * sizeof(*t));

			if (!t)
				break; /* the threads listed so far */
			*tids = t;
			*cap = c;
		}
		(*tids)[n++] = tid;
	}
	closedir(dir);
	return n;
}

pid_t
dump_find_thread(pid_t pid, bool (*match)(pid_t pid, pid_t tid, void *arg), void *arg)
{
	pid_t *tids = NULL, found = 0;
	size_t cap = 0, n = list_threads(pid, &tids, &cap), i;

	for (i = 0; i < n && !found; i++)
		if (match(pid, tids[i], arg))
			found = tids[i];
	free(tids);
	return found;
}

/* How long to go on looking for a thread to read a process through while
 * its threads end (live_thread(), via_live_thread()): a bound in time
 * rather than only in tries, because how many threads end under a read
 * depends on how slow the read is (a loaded machine, ASan).  A test sets
 * it longer (CTXDUMP_TEST_LIVE_WAIT_MS) to see that a process whose
 * threads have all exited is not waited on. */
#define LIVE_WAIT_NS (1000ull * 1000000u)

static uint64_t
live_deadline(void)
{
	static uint64_t wait_ns;

	if (!wait_ns) {
		unsigned ms = dump_test_ms("CTXDUMP_TEST_LIVE_WAIT_MS", 600000);

		wait_ns = ms ? ms * 1000000ull : LIVE_WAIT_NS;
	}
	return remote_now_ns() + wait_ns;
}

/* The threads that ended under a read, remembered so as not to be tried
 * again: the last ones of them. */
#define GONE_RING 32

/* Whether tids[m], a list of pid's threads in which none is live, are
 * all its threads, each still there and exiting: then none will be again
 * (an exiting thread starts none), and the list, read while nothing
 * ended, left none out.  Each was seen exiting (or gone) before the
 * kernel's count is read: by live_thread(), else by its callers (the
 * leader seen a zombie or exiting, or it failed a read with -ESRCH, as
 * the threads in avoid did).  Read again after the count, each is
 * still there and exiting: so each was there, and exiting, at the count
 * (exiting is for good), and with as many counted, those were all.  (A
 * tid freed and given to a new thread in between would defeat this: a
 * wrap of the pid space within these few reads.)  A thread that lives on
 * in exit (a zombie its tracer has not waited for, one blocked in
 * do_exit() past PF_EXITING; not one held by a core dump, which waits
 * before it) would otherwise be waited on for as long as live_thread()
 * waits. */
static bool
none_live(pid_t pid, const pid_t *tids, size_t m)
{
	size_t i;

	if (stop_count_threads(pid) != (long)m)
		return false;
	for (i = 0; i < m; i++)
		if (!stop_thread_in_exit(pid, tids[i]))
			return false;
	return true;
}

/* A thread of pid other than the leader that is not exiting
 * (stop_thread_exiting()) and not in avoid[n]: the oldest such, or with
 * youngest the most recently created; 0 if there is none, or the list
 * cannot be read.
 * A list of /proc/PID/task read while threads end is no snapshot: the
 * kernel walks the thread list by position, and threads that go
 * meanwhile make it skip others.  Relays of threads that live 2 ms, all
 * let go at once after a stop (each one's time ran out while stopped, so
 * they end together), were listed as the zombie leader and eight ending
 * threads while the eight threads those had started ran: "cannot unwind
 * the stack: No such process" in about one --stacks dump in 25 on a
 * loaded machine.  So while the list shows no such thread but some that
 * are exiting, it is read again each millisecond until deadline
 * (remote_now_ns()), or until none_live() tells that none can come: a
 * process that exits lists only its leader soon, but one thread kept in
 * its exit would keep the list so for as long. */
static pid_t
live_thread(pid_t pid, const pid_t *avoid, size_t n, bool youngest, uint64_t deadline)
{
	const struct timespec ms = {0, 1000000};
	pid_t *tids = NULL, found = 0;
	size_t cap = 0;

	for (;;) {
		size_t m = list_threads(pid, &tids, &cap), i;
		bool ending = false;

		for (i = 0; i < m && !found; i++) {
			pid_t tid = tids[youngest ? m - 1 - i : i];

			if (tid == pid)
				continue;
			if (tid_in(tid, avoid, n))
				ending = ending || stop_thread_exiting(pid, tid);
			else if (stop_thread_exiting(pid, tid))
				ending = true;
			else
				found = tid;
		}
		if (found || !ending || remote_now_ns() >= deadline ||
		    none_live(pid, tids, m))
			break;
		(void)nanosleep(&ms, NULL);
	}
	free(tids);
	return found;
}

pid_t
dump_memory_pid(pid_t pid, char leader_state)
{
	char comm[64];
	pid_t found;

	if (!leader_state &&
	    stop_read_task_stat(pid, pid, comm, sizeof(comm), &leader_state) < 0)
		return pid;
	if (leader_state != 'Z' && leader_state != 'X')
		return pid;
	/* The oldest: nothing tells yet that the threads are short-lived,
	 * and one that has run long is likely to run on (a zombie leader's
	 * server whose workers live long and whose helpers come and go). */
	found = live_thread(pid, NULL, 0, false, live_deadline());
	return found ? found : pid;
}

/* Another thread to read through after those in gone[n] failed with
 * -ESRCH: the leader if it is not one of them and not exiting, else the
 * youngest other live thread (looked for until deadline); 0 if there is
 * none.  The youngest because a thread read through has ended: where
 * threads live about as long as each other (relays, pools of short
 * tasks) it has the most time left, while the oldest is the next to end
 * (after a stop, with every other thread whose time ran out meanwhile);
 * where threads live long, any of them outlives the read. */
static pid_t
next_memory_pid(pid_t pid, const pid_t *gone, size_t n, uint64_t deadline)
{
	if (!tid_in(pid, gone, n) && !stop_thread_exiting(pid, pid))
		return pid;
	return live_thread(pid, gone, n, true, deadline);
}

/* fn(tid, 0, arg) through *mem_pid, and while it fails with -ESRCH (that
 * thread is gone: an exited leader's, or one read through after a
 * detach), fn(next, ended, arg) through another live thread of pid,
 * stored in *mem_pid.  For LIVE_WAIT_NS after the first failure, and at
 * least GONE_RING tries: threads that live 2 ms outlived an unwind under
 * ASan on a loaded machine about three times in five, and 8 tries in a
 * row failed in one --stacks dump in 50.
 * Given up, *mem_pid is left at a thread that is live then (looked for
 * once more, without waiting) or at pid if none is, as dump_memory_pid()
 * leaves it, not at the thread that failed last: the next read would
 * spend its first try on that one. */
static int
via_live_thread(pid_t pid, pid_t *mem_pid, int (*fn)(pid_t, pid_t, void *), void *arg)
{
	pid_t gone[GONE_RING];
	uint64_t deadline = 0;
	size_t k = 0;
	int r = fn(*mem_pid, 0, arg);

	while (r == -ESRCH) {
		pid_t next, ended = *mem_pid;
		bool last;

		if (!deadline)
			deadline = live_deadline();
		last = k >= GONE_RING && remote_now_ns() >= deadline;
		gone[k++ % GONE_RING] = ended;
		next = next_memory_pid(pid, gone, k < GONE_RING ? k : GONE_RING,
				       last ? 0 : deadline);
		*mem_pid = next ? next : pid;
		if (!next || last)
			break;
		r = fn(next, ended, arg);
	}
	return r;
}

bool
dump_process_exiting(pid_t pid)
{
	return next_memory_pid(pid, NULL, 0, live_deadline()) == 0;
}

/* etls_proc_set_reader()'s fallback: the objects are opened after the
 * load, one by one, through a thread that may end meanwhile */
static pid_t
reader_after(pid_t pid, pid_t ended)
{
	if (!stop_thread_exiting(pid, ended))
		return 0;
	return next_memory_pid(pid, &ended, 1, live_deadline());
}

struct proc_load_args {
	pid_t pid;
	struct etls_proc **ep;
};

static int
proc_load_at(pid_t tid, pid_t gone, void *arg)
{
	const struct proc_load_args *a = arg;
	int r = etls_proc_load(tid, a->ep);

	(void)gone;
	if (r == 0)
		etls_proc_set_reader(*a->ep, a->pid, reader_after);
	return r;
}

int
dump_proc_load(pid_t pid, pid_t *mem_pid, struct etls_proc **ep)
{
	struct proc_load_args a = {pid, ep};

	return via_live_thread(pid, mem_pid, proc_load_at, &a);
}

struct pctx_args {
	const char *maps;
	size_t maps_len;
	struct pctxr_snapshot *snap;
};

static int
pctx_read_at(pid_t tid, pid_t gone, void *arg)
{
	const struct pctx_args *a = arg;

	(void)gone;
	return a->maps ? pctxr_read_maps(tid, a->maps, a->maps_len, a->snap)
		       : pctxr_read(tid, a->snap);
}

int
dump_pctx_read(pid_t pid,
	       pid_t *mem_pid,
	       const char *maps,
	       size_t maps_len,
	       struct pctxr_snapshot *snap)
{
	struct pctx_args a = {maps, maps_len, snap};

	return via_live_thread(pid, mem_pid, pctx_read_at, &a);
}

struct unwind_args {
	const struct remote_image *img;
	const struct stack_snap *s;
	struct stack_frame *frames;
	size_t max_frames, *n;
};

static int
unwind_at(pid_t tid, pid_t gone, void *arg)
{
	const struct unwind_args *a = arg;

	if (gone) {
		/* an exec (which ends every other thread) makes the
		 * process another program: its files are not the ones the
		 * stacks ran in.  (Not a read that fails: tid may be gone
		 * already, which the unwinding then says.) */
		if (a->img && remote_image_changed(tid, a->img))
			return -ENOEXEC;
		/* what was read through the thread that is gone stays good */
		stack_unwind_rebind(gone, tid);
	}
	return stack_unwind(tid, a->s, a->frames, a->max_frames, a->n);
}

int
dump_unwind(pid_t pid,
	    pid_t *mem_pid,
	    const struct remote_image *img,
	    const struct stack_snap *s,
	    struct stack_frame *frames,
	    size_t max_frames,
	    size_t *n)
{
	struct unwind_args a = {img, s, frames, max_frames, n};

	return via_live_thread(pid, mem_pid, unwind_at, &a);
}

struct sync_args {
	const struct remote_image *img;
	bool after_stop;
};

static int
unwind_sync_at(pid_t tid, pid_t gone, void *arg)
{
	const struct sync_args *a = arg;

	/* as unwind_at(): another program's maps are not the stacks' */
	if (gone && a->img && remote_image_changed(tid, a->img))
		return -ENOEXEC;
	return stack_unwind_sync(tid, a->after_stop);
}

int
dump_unwind_sync(pid_t pid,
		 pid_t *mem_pid,
		 const struct remote_image *img,
		 bool after_stop)
{
	struct sync_args a = {img, after_stop};

	return via_live_thread(pid, mem_pid, unwind_sync_at, &a);
}

unsigned
dump_test_ms(const char *name, unsigned max)
{
	const char *e = getenv(name);
	unsigned long ms;
	char *end;

	if (!e || *e < '0' || *e > '9')
		return 0; /* unset, or spaces or a sign strtoul() would take */
	errno = 0;
	ms = strtoul(e, &end, 10);
	return errno || *end || ms > max ? 0 : (unsigned)ms;
}

void
dump_test_sync_pause(void)
{
	static int ms = -1;
	struct timespec ts;

	if (ms < 0)
		ms = (int)dump_test_ms("CTXDUMP_TEST_SYNC_PAUSE_MS", 1000);
	if (!ms)
		return;
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	/* the rest of it after a signal (record's SIGCHLD of late threads) */
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

pid_t
dump_stopped_reader(pid_t pid, pid_t prev, const struct stop_set *ss)
{
	pid_t pick = 0;
	size_t i;

	for (i = 0; i < ss->n; i++) {
		pid_t tid = ss->t[i].tid;

		if (ss->t[i].status != STOP_STOPPED)
			continue;
		if (tid == prev)
			return prev;
		if (tid == pid || !pick)
			pick = tid;
	}
	return pick ? pick : prev;
}

/* The "Tgid:" of pid and the letter of its "State:" line in one read of
 * /proc/PID/status; false if it cannot be read. */
bool
dump_proc_status(pid_t pid, long long *tgid, char *state)
{
	char path[64], *buf, *p;
	size_t len;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (remote_read_file(path, 1 << 16, &buf, &len) < 0)
		return false;
	*tgid = -1;
	*state = '?';
	for (p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, "Tgid:", 5) == 0)
			*tgid = strtoll(p + 5, NULL, 10);
		else if (strncmp(p, "State:", 6) == 0)
			*state = p[6 + strspn(p + 6, " \t")];
	}
	free(buf);
	return true;
}

/* Whether pid is a kernel thread (PF_KTHREAD in the flags, field 9 of
 * /proc/PID/stat): its maps are empty like those of a process that has
 * exited, but it has not (-ENODATA from dump_proc_load(), not -ESRCH). */
bool
dump_is_kthread(pid_t pid)
{
	unsigned long long flags = 0;
	char state;

	return stop_read_task_flags(pid, pid, &state, &flags) == 0 &&
	       (flags & 0x00200000ull) != 0; /* PF_KTHREAD */
}

void
dump_warn_no_files(pid_t pid, pid_t mem_pid, const char *syms, const char *then)
{
	char path[64], exe[PATH_MAX];
	ssize_t n;

	cli_warn("process %d maps no ELF object from a file: ctxdump cannot "
		 "look for %s in it%s",
		 (int)pid, syms, then);
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)mem_pid);
	n = readlink(path, exe, sizeof(exe));
	if (n <= 0 || (size_t)n >= sizeof(exe) || etls_path_is_file(exe, (size_t)n))
		return;
	/* the path is the target's to choose (memfd_create()'s name) */
	fprintf(stderr, "%s: its executable is ", cli_name());
	output_text_escape(stderr, (const uint8_t *)exe, (size_t)n, false);
	fputs(": ctxdump looks up symbols in objects mapped from files, and in "
	      "an executable that is none (a memfd) only where it is mapped\n",
	      stderr);
}

bool
dump_exe_is_elf32(pid_t pid)
{
	unsigned char ident[EI_NIDENT];
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = pread(fd, ident, sizeof(ident), 0);
	close(fd);
	return n == (ssize_t)sizeof(ident) && memcmp(ident, ELFMAG, SELFMAG) == 0 &&
	       ident[EI_CLASS] == ELFCLASS32;
}

const char *
dump_exited_note(pid_t pid)
{
	char comm[64], state;

	if (stop_read_task_stat(pid, pid, comm, sizeof(comm), &state) == 0 &&
	    state == 'Z')
		return " (zombie, not reaped yet)";
	return "";
}

/* ---- threads on one thread pointer ---- */

pid_t
dump_tp_tid(pid_t mem_pid, struct dump_tid_field *f, uint64_t tp)
{
	int32_t tid;

	if (!f->looked) {
		f->looked = true;
		f->ok = f->ep && etls_glibc_tid_off(f->ep, &f->off) == 0;
	}
	if (!f->ok ||
	    remote_read(mem_pid, tp + (uint64_t)f->off, &tid, sizeof(tid)) < 0)
		return 0;
	return tid > 0 ? (pid_t)tid : 0;
}

/* The last field of NSpid: equal to tid when ctxdump runs in the
 * process's namespace; not so for a process in a container dumped from
 * the host. */
pid_t
dump_ns_tid(pid_t pid, pid_t tid)
{
	char path[64], line[256];
	pid_t v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *p = line + 6, *end;

		if (strncmp(line, "NSpid:", 6) != 0)
			continue;
		for (;;) {
			long n = strtol(p, &end, 10);

			if (end == p)
				break;
			v = (pid_t)n;
			p = end;
		}
		break;
	}
	fclose(f);
	return v;
}

static bool
has_ns_tid(pid_t pid, pid_t tid, void *nstid)
{
	return dump_ns_tid(pid, tid) == *(const pid_t *)nstid;
}

pid_t
dump_host_tid(pid_t pid, pid_t nstid)
{
	return dump_find_thread(pid, has_ns_tid, &nstid);
}

struct tp_ref {
	uint64_t tp;
	size_t i;
};

static int
cmp_tp_ref(const void *a, const void *b)
{
	const struct tp_ref *x = a, *y = b;

	if (x->tp != y->tp)
		return x->tp > y->tp ? 1 : -1;
	return (x->i > y->i) - (x->i < y->i);
}

/* Sorting a thousand thread pointers costs some tens of us, and the
 * descriptor is read only for a thread pointer found twice. */
int
dump_tp_owners(pid_t pid,
	       pid_t mem_pid,
	       struct dump_tid_field *f,
	       const pid_t *tids,
	       const uint64_t *tps,
	       size_t n,
	       struct dump_tp_share *share)
{
	struct tp_ref *v;
	size_t i, a, b, m = 0;
	int not_own = 0;

	memset(share, 0, n * sizeof(*share));
	for (i = 0; i < n; i++)
		m += tps[i] != 0;
	if (m < 2)
		return 0;
	v = malloc(m * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (i = m = 0; i < n; i++)
		if (tps[i])
			v[m++] = (struct tp_ref){tps[i], i};
	qsort(v, m, sizeof(*v), cmp_tp_ref);
	for (a = 0; a < m; a = b) {
		pid_t tid, owner = 0;

		for (b = a + 1; b < m && v[b].tp == v[a].tp; b++)
			;
		if (b - a < 2)
			continue;
		tid = dump_tp_tid(mem_pid, f, v[a].tp);
		/* glibc's tid is the one of the process's namespace */
		for (i = a; i < b && tid && !owner; i++)
			if (dump_ns_tid(pid, tids[v[i].i]) == tid)
				owner = tids[v[i].i];
		for (i = a; i < b; i++) {
			struct dump_tp_share *s = &share[v[i].i];

			if (owner && tids[v[i].i] == owner)
				continue;
			s->owner = owner ? owner : -1;
			s->other = tids[v[i == a ? a + 1 : a].i];
			s->n = b - a;
			not_own++;
		}
	}
	free(v);
	return not_own;
}
