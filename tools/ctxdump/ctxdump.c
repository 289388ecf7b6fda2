/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <elf.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "dump.h"
#include "elf-tls.h"
#include "output.h"
#include "pctx-read.h"
#include "process-ctx.h"
#include "profile.h"
#include "dump-layouts.h"
#include "remote.h"
#include "stop.h"
#include "thread-record.h"
#include "tls-math.h"
#include "unwind.h"

#define DEFAULT_MAX_FRAMES 64
#define UNLIMITED_FRAMES   DUMP_UNLIMITED_FRAMES
#define DEFAULT_STACK_SIZE (64u << 10)
/* How long one round of stops may take before a thread is given up: a
 * thread in D state (or blocked in vfork) cannot stop, and meanwhile every
 * other thread stays stopped.  Sleeping threads stop in microseconds. */
#define STOP_TIMEOUT_MS     500
#define MAX_STOP_TIMEOUT_MS 60000
#define CMDLINE_MAX         (64u << 10)
/* While no thread is stopped yet, one that is runnable only waits for a
 * CPU: it is waited for this long (or the stop timeout, if longer).  That
 * holds nothing of the target, and a dump that stops nothing fails. */
#define CPU_WAIT_MS 2000

/* CPU_WAIT_MS, or for the tests CTXDUMP_TEST_CPU_WAIT_MS (1 to 2000):
 * a wait that runs out is not sure to on an idle machine, where the
 * kernel lets a starved thread run a little every second (the real-time
 * throttling gives the others 5 %). */
static unsigned
cpu_wait_ms(void)
{
	unsigned ms = dump_test_ms("CTXDUMP_TEST_CPU_WAIT_MS", CPU_WAIT_MS);

	return ms ? ms : CPU_WAIT_MS;
}
/* Threads from which their names are read on a second thread, from
 * before the stop on and during it (stop_prefetch()): a name costs about
 * 2.3 us, starting a thread some 30-50 us. */
#define PREFETCH_MIN 64
/* That thread keeps a descriptor of its own open through the ELF
 * lookups: one more than a dump needs (CLI_NOFILE_DUMP) without it
 * (under ulimit -n 5 the lookups of a process with 64 threads or more
 * found none left: "none of its objects could be opened"). */
#define PREFETCH_NOFILE 1u

struct ctxdump_control {
	pid_t pid;
	pid_t tid;
	bool stacks;
	bool json;
	bool quiet;
	int verbose;
	size_t max_frames;
	size_t stack_size;
	unsigned stop_timeout_ms;
};

static void usage(void) __attribute__((noreturn));

/* A file name from the target's maps, escaped like everything printed
 * from the target (a library may be named with ESC sequences). */
static const char *
escaped_n(const void *s, size_t n)
{
	static char buf[4 * PATH_MAX + 1];
	FILE *f;

	if (n > PATH_MAX)
		n = PATH_MAX;
	f = fmemopen(buf, sizeof(buf), "w");
	if (!f)
		return "?";
	output_text_escape(f, s, n, false);
	if (fclose(f) != 0)
		return "?";
	buf[sizeof(buf) - 1] = '\0';
	return buf;
}

static const char *
escaped(const char *s)
{
	return escaped_n(s, strlen(s));
}

/* The thread-context schemas whose records are the OTEP-4947 v1 layout
 * (otep-formats.md §1.6): what writers publish today, the final name the
 * OTEP announces, and the name of an earlier draft. */
static bool
schema_known(const struct pctx_str *v)
{
	static const char *const known[] = {"tlsdesc_v1_dev", "tls_v1", "tlsdesc_v1"};
	size_t i;

	for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (pctx_str_eq(*v, known[i]))
			return true;
	return false;
}

static void
usage(void)
{
	fputs("\nUsage:\n"
	      " ctxdump [options] <pid>\n"
	      " ctxdump record [options] <pid>    (see ctxdump record --help)\n"
	      " ctxdump report [options] <file>   (see ctxdump report --help)\n"
	      "\n"
	      "Show the OpenTelemetry thread context (OTEP-4947) of every thread of a\n"
	      "running process, together with its process context (OTEP-4719).\n"
	      "\n"
	      "Options:\n"
	      " -p, --pid <pid>           the process (instead of <pid>)\n"
	      " -t, --tid <tid>           show only this thread\n"
	      " -s, --stacks              also show each thread's native stack\n"
	      " -n, --max-frames <n>      at most <n> frames per thread (default 64,\n"
	      "                             at most 4096; 0 for that most)\n"
	      "     --stack-size <bytes>  stack bytes copied per thread (default 64K)\n"
	      "     --no-demangle         show C++ function names mangled\n"
	      "     --stop-timeout <ms>   how long to wait for a thread to stop\n"
	      "                             (default 500)\n"
	      " -j, --json                print JSON\n"
	      " -q, --quiet               show only threads with a valid context\n"
	      " -v, --verbose             also show the stop time, the resource and\n"
	      "                             TLS details\n"
	      "\n"
	      " -h, --help                display this help\n"
	      " -V, --version             display version\n"
	      "\n"
	      "Exit status:\n"
	      " 0   every thread was read\n"
	      " 1   partial: some threads could not be stopped or read (threads\n"
	      "       that ended during the dump are not a reason)\n"
	      " 2   fatal: no such process (or --tid thread in it), it exited,\n"
	      "       cannot attach, or no otel_thread_ctx_v1 nor another known\n"
	      "       layout\n"
	      " 64  usage error\n"
	      "\n"
	      "For more details see ctxdump(1).\n",
	      stdout);
	cli_exit_printed();
}

static void
parse_options(struct ctxdump_control *ctl, int argc, char **argv)
{
	enum { OPT_STACK_SIZE = CHAR_MAX + 1, OPT_STOP_TIMEOUT, OPT_NO_DEMANGLE };
	static const struct option longopts[] = {
		{"pid", required_argument, NULL, 'p'},
		{"tid", required_argument, NULL, 't'},
		{"stacks", no_argument, NULL, 's'},
		{"max-frames", required_argument, NULL, 'n'},
		{"stack-size", required_argument, NULL, OPT_STACK_SIZE},
		{"stop-timeout", required_argument, NULL, OPT_STOP_TIMEOUT},
		{"no-demangle", no_argument, NULL, OPT_NO_DEMANGLE},
		{"json", no_argument, NULL, 'j'},
		{"quiet", no_argument, NULL, 'q'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	const char *pid = NULL;
	int c;

	ctl->max_frames = DEFAULT_MAX_FRAMES;
	ctl->stack_size = DEFAULT_STACK_SIZE;
	ctl->stop_timeout_ms = STOP_TIMEOUT_MS;
	/* Our own messages: getopt's would name the full argv[0]. */
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":p:t:sn:jqvhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			pid = optarg;
			break;
		case 't':
			ctl->tid =
				(pid_t)cli_parse_num(optarg, "thread id", 1, INT_MAX);
			break;
		case 's':
			ctl->stacks = true;
			break;
		case 'n': {
			long long n = cli_parse_num(optarg, "frame count", 0, INT_MAX);

			ctl->max_frames = n == 0 || n > UNLIMITED_FRAMES
						  ? UNLIMITED_FRAMES
						  : (size_t)n;
			break;
		}
		case OPT_STACK_SIZE:
			ctl->stack_size = cli_parse_stack_size(optarg);
			break;
		case OPT_NO_DEMANGLE:
			stack_unwind_set_demangle(false);
			break;
		case OPT_STOP_TIMEOUT:
			ctl->stop_timeout_ms = (unsigned)cli_parse_num(
				optarg, "stop timeout", 1, MAX_STOP_TIMEOUT_MS);
			break;
		case 'j':
			ctl->json = true;
			break;
		case 'q':
			ctl->quiet = true;
			break;
		case 'v':
			ctl->verbose++;
			break;
		case 'h':
			usage();
		case 'V':
			cli_version();
		default:
			cli_option_error(c, argv, longopts, true);
		}
	}
	ctl->pid = (pid_t)cli_parse_num(cli_pid_operand(argc, argv, pid), "process id",
					1, INT_MAX);
}

/* ---- reading ---- */

struct run {
	const struct ctxdump_control *ctl;
	struct dump d;
	bool partial;
	/* the first thread whose attach failed with EPERM (0: none) */
	pid_t eperm_tid;
	/* Allocated (and paged in) before the threads are stopped: room for
	 * cap threads. */
	size_t cap;
	size_t zeroed;    /* entries of d.threads zeroed (and paged in) */
	size_t recs_used; /* bytes of d.recs handed out */
	struct remote_range *ranges;
	size_t *range_thread; /* index in d.threads of each range */
	/* the program read (remote_image_load() before the stop) */
	const struct remote_image *img;
};

static void
load_cmdline(struct dump *d)
{
	if (remote_read_cmdline(d->mem_pid, CMDLINE_MAX, &d->cmdline, &d->cmdline_len) <
	    0) {
		d->cmdline = NULL;
		d->cmdline_len = 0;
		return;
	}
	if (d->cmdline_len > CMDLINE_MAX) {
		/* at a character: the note after it says the rest is cut */
		d->cmdline_len = output_utf8_cut((const uint8_t *)d->cmdline,
						 d->cmdline_len, CMDLINE_MAX);
		d->cmdline_truncated = true;
	}
}

/* What load_pctx() failed with, for the output (d->pctx_err, left alone
 * while a context read before stays shown: a key-map refresh that
 * failed), and copied to why (if not NULL), for the caller's message.
 * -ENOENT is no context at all. */
static int
pctx_failed(struct dump *d, int err, char *why, size_t why_len)
{
	if (!d->has_pctx)
		d->pctx_err = err == -ENOENT ? 0 : err;
	if (why)
		snprintf(why, why_len, "%s", d->pctx_why);
	return err;
}

/* Read and decode the process context, finding its mapping in the maps
 * of ep (NULL: read them again); returns 0, -ENOENT (none), or another
 * negative errno, with why (if not NULL) saying what was wrong, for the
 * caller's message. */
static int
load_pctx(struct dump *d, struct etls_proc *ep, char *why, size_t why_len)
{
	struct pctxr_snapshot snap = {0};
	struct pctx_decoded *pd;
	const char *maps = NULL;
	size_t maps_len = 0;
	/* not d->mem_pid itself: whether the objects failed to open because
	 * that thread ended is asked of it after this (DUMP_AGAIN), and the
	 * stop picks a stopped one to read through */
	pid_t via = d->mem_pid;
	int r;

	if (ep)
		maps = etls_proc_maps(ep, &maps_len);
	r = dump_pctx_read(d->pid, &via, maps, maps_len, &snap);
	if (r < 0) {
		pctxr_describe(r, false, &snap, d->pctx_why, sizeof(d->pctx_why));
		return pctx_failed(d, r, why, why_len);
	}
	pd = malloc(sizeof(*pd));
	if (!pd) {
		pctxr_free(&snap);
		snprintf(d->pctx_why, sizeof(d->pctx_why), "%s", strerror(ENOMEM));
		return pctx_failed(d, -ENOMEM, why, why_len);
	}
	r = pctx_decode(snap.payload, snap.payload_len, pd);
	if (r < 0) {
		pctxr_describe(r, true, &snap, d->pctx_why, sizeof(d->pctx_why));
		free(pd);
		pctxr_free(&snap);
		return pctx_failed(d, r, why, why_len);
	}
	if (d->has_pctx) {
		pctxr_free(&d->pctx);
		free(d->pd);
	}
	d->pctx = snap;
	d->pd = pd;
	d->has_pctx = true;
	d->pctx_err = 0;
	return 0;
}

static void set_error(struct dump_thread *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void
set_error(struct dump_thread *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	t->error = t->cold->error;
	vsnprintf(t->error, sizeof(t->cold->error), fmt, ap);
	va_end(ap);
}

static void set_stack_error(struct dump_thread *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void
set_stack_error(struct dump_thread *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	t->stack_error = t->cold->stack_error;
	vsnprintf(t->stack_error, sizeof(t->cold->stack_error), fmt, ap);
	va_end(ap);
}

/* --stacks: registers and stack copies of every stopped thread, batched
 * (stack_snap_capture_many); t->snap_err keeps each thread's result. */
static void
capture_stacks(struct run *run)
{
	struct dump *d = &run->d;
	struct stack_snap **snaps =
		calloc(d->n_threads ? d->n_threads : 1, sizeof(*snaps));
	pid_t *tids = calloc(d->n_threads ? d->n_threads : 1, sizeof(*tids));
	int *err = calloc(d->n_threads ? d->n_threads : 1, sizeof(*err));
	/* the writer's static TLS block, resolved in this stop: where the
	 * threads' stacks end at the latest */
	int64_t tls_floor =
		d->has_symbol ? tlsm_static_block_tpoff(&d->acc, d->sym.st_value) : 0;
	size_t i, k = 0;

	if (snaps && tids && err) {
		for (i = 0; i < d->n_threads; i++) {
			if (!d->threads[i].stopped)
				continue;
			d->threads[i].snap = &d->threads[i].cold->snap;
			snaps[k] = d->threads[i].snap;
			tids[k++] = d->threads[i].tid;
		}
		stack_snap_capture_many(d->mem_pid, tids, k, run->ctl->stack_size,
					tls_floor, snaps, err, &d->stack_arena);
		for (i = k = 0; i < d->n_threads; i++)
			if (d->threads[i].stopped)
				d->threads[i].snap_err = err[k++];
	} else {
		for (i = 0; i < d->n_threads; i++)
			d->threads[i].snap_err = -ENOMEM;
	}
	free(snaps);
	free(tids);
	free(err);
}

/* Bytes of a record copied in the first batch, at most: the header and
 * 228 bytes of attributes hold most records whole.  The copies are packed
 * in dump.recs, whose first cap * REC_FIRST_MAX bytes are paged in before
 * the stop; a larger record is copied again, whole, further on (see
 * read_threads()). */
#define REC_FIRST_MAX 256

/* Bytes of a record at addr to copy first: up to REC_FIRST_MAX, but not
 * into the next page unless the header itself crosses it. */
static size_t
record_first_piece(uint64_t addr)
{
	size_t in_page = 4096 - (size_t)(addr & 4095);

	if (in_page < TREC_HEADER_SIZE || in_page > REC_FIRST_MAX)
		return REC_FIRST_MAX;
	return in_page;
}

/* n bytes of run->d.recs (reserve_threads() sized it for every thread's
 * first piece plus a whole record). */
static uint8_t *
recs_take(struct run *run, size_t n)
{
	uint8_t *p = run->d.recs + run->recs_used;

	run->recs_used += n;
	return p;
}

/* The thread pointer of a stopped thread, and its state at the stop
 * (stop_state(): whether the stop interrupted a blocking system call);
 * with --stacks, both from the register snapshot taken with the stack
 * copy, else from one PTRACE_GETREGS.  false (and t->error set) if it
 * cannot be had. */
static bool
read_tp(struct run *run, struct dump_thread *t, uint64_t *tp)
{
	int r, blocked = -1;

	*tp = 0;
	if (run->ctl->stacks) {
		r = t->snap_err;
		if (r == 0) {
			t->has_snap = true;
			if (t->snap->regs_valid) {
				blocked = remote_regs_blocked(&t->snap->regs);
#if defined(__x86_64__)
				*tp = t->snap->regs.fs_base;
#endif
			}
		} else {
			set_stack_error(t, "cannot copy registers: %s", strerror(-r));
		}
	}
	if (!*tp) {
		r = remote_thread_stop_regs(t->tid, tp, &blocked);
		if (r == -ESRCH) {
			/* a stopped thread is only gone once killed: it ended
			 * while held (dropped after the read, not an error) */
			t->exited = true;
			return false;
		}
		if (r < 0) {
			set_error(t, "cannot read the thread pointer: %s",
				  strerror(-r));
			t->state = stop_state(t->state, t->group_stop, -1);
			return false;
		}
	}
	t->state = stop_state(t->state, t->group_stop, blocked);
	return true;
}

/* Everything that needs the threads stopped: registers (and optionally
 * stacks) thread by thread, then every TLS slot in one batched read, then
 * every record (header plus the recommended maximum) in another: a
 * handful of system calls in all instead of two per thread.  Decoding
 * happens after detaching. */
static void
read_threads(struct run *run)
{
	struct dump *d = &run->d;
	struct remote_range *rg = run->ranges;
	size_t *idx = run->range_thread;
	size_t i, k = 0;
	int r;

	if (run->ctl->stacks)
		capture_stacks(run);
	for (i = 0; i < d->n_threads; i++) {
		struct dump_thread *t = &d->threads[i];
		uint64_t tp, slot;

		if (!t->stopped)
			continue;
		d->n_stopped++;
		if (!read_tp(run, t, &tp))
			continue;
		/* kept for shared_tps(), after the threads run again */
		t->tp = tp;
		if (!d->has_symbol)
			continue; /* only the other layouts (dlay_read) */
		if (d->acc.model == TLSM_UNRESOLVED || d->acc.model == TLSM_NONE) {
			set_error(t, "the TLS slot of " OTEL_THREAD_CTX_SYMBOL
				     " is not resolved");
			continue;
		}
		if (tp == 0) {
			/* tlsm_slot_addr() would say -EINVAL, shown as a DTV
			 * read error even for a static model */
			set_error(t, "the thread has no thread pointer (it is 0), "
				     "so no TLS (a thread started by a raw clone() "
				     "that set none up?)");
			continue;
		}
		r = tlsm_slot_addr(&d->acc, tp, remote_tlsm_read, &t->tid, &slot);
		if (r == -ENODATA)
			continue; /* no TLS block for the module in this thread yet */
		if (r < 0) {
			set_error(t, "cannot read the thread's DTV: %s", strerror(-r));
			continue;
		}
		t->has_slot = true;
		t->slot_addr = slot;
		rg[k] = (struct remote_range){slot, &t->record_addr, sizeof(uint64_t),
					      0};
		idx[k++] = i;
	}
	remote_read_many(d->mem_pid, rg, k);
	for (i = 0; i < k; i++) {
		struct dump_thread *t = &d->threads[idx[i]];

		if (rg[i].got == (ssize_t)sizeof(uint64_t))
			continue;
		t->record_addr = 0;
		set_error(t, "cannot read the TLS slot at 0x%" PRIx64 ": %s",
			  t->slot_addr,
			  strerror(rg[i].got < 0 ? (int)-rg[i].got : EFAULT));
	}

	/* Each record's header and what its page still holds, for every
	 * thread in one batch: a second remote page per record costs about
	 * as much as the whole read (the shim's records mostly start 192
	 * bytes before a page end, and their attributes fit in those). */
	for (i = k = 0; i < d->n_threads; i++) {
		struct dump_thread *t = &d->threads[i];

		if (!t->has_slot || t->error || !t->record_addr)
			continue;
		t->rec = recs_take(run, record_first_piece(t->record_addr));
		rg[k] = (struct remote_range){t->record_addr, t->rec,
					      record_first_piece(t->record_addr), 0};
		idx[k++] = i;
	}
	remote_read_many(d->mem_pid, rg, k);
	for (i = 0; i < k; i++) {
		struct dump_thread *t = &d->threads[idx[i]];
		ssize_t n = rg[i].got;

		if (n < TREC_HEADER_SIZE) {
			set_error(t, "cannot read the record at 0x%" PRIx64 ": %s",
				  t->record_addr, strerror(n < 0 ? (int)-n : EFAULT));
			continue;
		}
		memcpy(&t->hdr, t->rec, TREC_HEADER_SIZE);
		t->has_record = true;
		t->rec_len = (size_t)n;
	}

	/* Attributes that continue on the next page, up to the recommended
	 * maximum: a second batch, only for those records. */
	for (i = k = 0; i < d->n_threads; i++) {
		struct dump_thread *t = &d->threads[i];
		uint8_t *whole;
		size_t need;

		if (!t->has_record || t->hdr.valid != TREC_VALID)
			continue;
		need = TREC_HEADER_SIZE + (size_t)t->hdr.attrs_data_size;
		if (need > TREC_MAX_SIZE)
			need = TREC_MAX_SIZE;
		/* a first piece cut short met an unmapped page: no more */
		if (t->rec_len >= need ||
		    t->rec_len < record_first_piece(t->record_addr))
			continue;
		/* room for the whole record, after the packed first pieces
		 * (past the part paged in before the stop: only records
		 * larger than REC_FIRST_MAX get here) */
		whole = recs_take(run, need);
		memcpy(whole, t->rec, t->rec_len);
		t->rec = whole;
		rg[k] = (struct remote_range){t->record_addr + t->rec_len,
					      t->rec + t->rec_len, need - t->rec_len,
					      0};
		idx[k++] = i;
	}
	remote_read_many(d->mem_pid, rg, k);
	for (i = 0; i < k; i++)
		if (rg[i].got > 0)
			d->threads[idx[i]].rec_len += (size_t)rg[i].got;

	for (i = 0; i < d->n_threads; i++) {
		struct dump_thread *t = &d->threads[i];
		size_t want, have;

		if (!t->has_record || t->hdr.valid != TREC_VALID ||
		    t->hdr.attrs_data_size == 0)
			continue;
		want = t->hdr.attrs_data_size;
		have = t->rec_len - TREC_HEADER_SIZE;
		if (have >= want) {
			t->attrs_len = want; /* in t->rec */
			continue;
		}
		/* Larger than the recommended maximum (or cut by an unmapped
		 * page): the rest thread by thread, while still stopped, all
		 * of it (at most 64 KiB, a u16 size): a key index that repeats
		 * is read from its last occurrence (OTEP-4947). */
		t->attrs = malloc(want);
		if (!t->attrs) {
			t->attrs_capped = true;
			continue;
		}
		memcpy(t->attrs, t->rec + TREC_HEADER_SIZE, have);
		{
			ssize_t m = remote_read_prefix(
				d->mem_pid, t->record_addr + TREC_HEADER_SIZE + have,
				t->attrs + have, want - have);

			if (m > 0)
				have += (size_t)m;
			if (have < want)
				t->attrs_capped = true;
		}
		t->attrs_len = have;
	}
}

static int
cmp_tid(const void *a, const void *b)
{
	const struct dump_thread *x = a, *y = b;

	return (x->tid > y->tid) - (x->tid < y->tid);
}

static void
decode_attrs(struct run *run)
{
	struct dump *d = &run->d;
	struct trec_attrs_decoded *dec;
	bool unknown = false, refreshed = false;
	size_t i;

	dec = malloc(sizeof(*dec));
	if (!dec)
		return;
again:
	for (i = 0; i < d->n_threads; i++) {
		struct dump_thread *t = &d->threads[i];
		unsigned n_keys = d->pd ? d->pd->n_keys : 0;

		if (!t->has_record || t->hdr.valid != TREC_VALID)
			continue;
		free(t->dec_attr);
		t->dec_attr = NULL;
		t->n_dec = 0;
		t->dec_truncated = false;
		if (trec_attrs_decode(dump_attrs(t), t->attrs_len, n_keys, dec) < 0)
			continue;
		if (dec->n) {
			t->dec_attr = malloc(dec->n * sizeof(*t->dec_attr));
			if (!t->dec_attr)
				continue;
			memcpy(t->dec_attr, dec->attr, dec->n * sizeof(*t->dec_attr));
		}
		t->n_dec = dec->n;
		t->dec_truncated = dec->truncated;
		unknown |= dec->n_unknown > 0;
	}
	/* The key map is append-only: an index we do not know means the map
	 * grew since we read it (OTEP-4947: refresh before continuing). */
	if (unknown && !refreshed) {
		refreshed = true;
		unknown = false;
		if (load_pctx(d, NULL, NULL, 0) == 0)
			goto again;
	}
	free(dec);
}

static void
unwind_stacks(struct run *run)
{
	struct dump *d = &run->d;
	size_t i, cap = run->ctl->max_frames + 1, lost = 0;
	struct stack_frame *scratch;
	bool exited = false;

	/* One scratch array for the unwinder and a right-sized copy per
	 * thread: a frame is over 500 bytes, and max_frames + 1 of them per
	 * thread would be 35 MiB of fresh pages for 1000 threads. */
	scratch = malloc(cap * sizeof(*scratch));
	for (i = 0; i < d->n_threads; i++) {
		struct dump_thread *t = &d->threads[i];
		size_t n = 0;
		int r;

		if (!t->has_snap)
			continue;
		if (!scratch) {
			set_stack_error(t, "out of memory");
			continue;
		}
		/* The stacks are unwound after the threads run again, through
		 * the files their process maps: once it has exited, every
		 * thread would fail alike. */
		if (exited) {
			set_stack_error(t, "cannot unwind: the process exited");
			lost++;
			continue;
		}
		/* one frame more than shown tells whether the stack goes on */
		r = dump_unwind(run->ctl->pid, &d->mem_pid, run->img, t->snap, scratch,
				cap, &n);
		if (r == 0 && n > run->ctl->max_frames) {
			n = run->ctl->max_frames;
			t->frames_capped = true;
		}
		if (r == -ESRCH && dump_process_exiting(run->ctl->pid)) {
			set_stack_error(t, "cannot unwind: the process exited");
			exited = true;
			lost++;
			n = 0;
		} else if (r < 0) {
			const char *why = r == -ENOEXEC ? "the process ran execve() "
							  "since it was stopped"
							: strerror(-r);

			set_stack_error(t, "cannot unwind: %s", why);
			cli_warn("tid %d: cannot unwind the stack: %s", (int)t->tid,
				 why);
			run->partial = true;
			n = 0;
		}
		if (n) {
			t->frames = malloc(n * sizeof(*t->frames));
			if (!t->frames) {
				set_stack_error(t, "out of memory");
				t->frames_capped = false;
				n = 0;
			} else {
				memcpy(t->frames, scratch, n * sizeof(*t->frames));
			}
		}
		t->n_frames = n;
	}
	free(scratch);
	if (exited) {
		cli_warn("process %d exited before %zu of its stacks could be "
			 "unwound%s",
			 (int)run->ctl->pid, lost, dump_exited_note(run->ctl->pid));
		run->partial = true;
	}
}

/* Page in [p, p + len) now, writable: the first write to a fresh page is
 * a page fault, and a thousand of them inside the stop window cost as much
 * as the reads themselves.  MADV_POPULATE_WRITE (Linux 5.14) does it in
 * one call, in half the time of touching each page (measured); older
 * kernels get the touching. */
static void
prefault(void *p, size_t len)
{
	volatile uint8_t *b = p;
	uintptr_t first = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
	uintptr_t last = ((uintptr_t)p + len) & ~(uintptr_t)4095;
	size_t off;

#ifdef MADV_POPULATE_WRITE
	if (last > first &&
	    madvise((void *)first, last - first, MADV_POPULATE_WRITE) == 0) {
		if (len) {
			b[0] = b[0];
			b[len - 1] = b[len - 1];
		}
		return;
	}
#else
	(void)first;
	(void)last;
#endif
	for (off = 0; off < len; off += 4096)
		b[off] = b[off];
	if (len)
		b[len - 1] = b[len - 1];
}

/* Room for n threads: the thread list, its cold part, the records' copies
 * and the read batches.  Only what the stop writes for the hot threads
 * expected is paged in (the rest of n is a margin for threads created
 * meanwhile): the thread list (zeroed), the first REC_FIRST_MAX bytes per
 * thread of the copies, and with --stacks the cold part (the register
 * snapshots).
 * Called before any thread points into cold or recs (those are replaced,
 * not moved). */
static int
reserve_threads(struct run *run, size_t n, size_t hot)
{
	struct dump *d = &run->d;
	struct dump_thread *nt;
	struct remote_range *nr;
	size_t *ni;

	if (n <= run->cap)
		return 0;
	if (hot > n)
		hot = n;
	nt = realloc(d->threads, n * sizeof(*nt));
	if (!nt)
		return -ENOMEM;
	d->threads = nt;
	prefault(nt + run->cap, (hot > run->cap ? hot - run->cap : 0) * sizeof(*nt));
	/* the rest is zeroed when collect_threads() gets there */
	if (hot > run->zeroed) {
		memset(nt + run->zeroed, 0, (hot - run->zeroed) * sizeof(*nt));
		run->zeroed = hot;
	}
	/* calloc: fresh zero pages, not touched unless written */
	free(d->cold);
	d->cold = calloc(n, sizeof(*d->cold));
	if (!d->cold)
		return -ENOMEM;
	if (run->ctl->stacks)
		prefault(d->cold, hot * sizeof(*d->cold));
	free(d->recs);
	d->recs = malloc(n * (REC_FIRST_MAX + TREC_MAX_SIZE));
	if (!d->recs)
		return -ENOMEM;
	prefault(d->recs, hot * REC_FIRST_MAX);
	run->recs_used = 0;
	nr = realloc(run->ranges, n * sizeof(*nr));
	if (!nr)
		return -ENOMEM;
	run->ranges = nr;
	ni = realloc(run->range_thread, n * sizeof(*ni));
	if (!ni)
		return -ENOMEM;
	run->range_thread = ni;
	prefault(nr, hot * sizeof(*nr));
	prefault(ni, hot * sizeof(*ni));
	run->cap = n;
	return 0;
}

static void
free_batches(struct run *run)
{
	free(run->ranges);
	free(run->range_thread);
	run->ranges = NULL;
	run->range_thread = NULL;
}

/* Turn the stop set into the thread list, reporting every thread that
 * could not be read once on stderr.  Threads that exited before they
 * could be stopped, or while stopped, are left out. */
static int
collect_threads(struct run *run, struct stop_set *ss)
{
	struct dump *d = &run->d;
	size_t i;
	int r;

	if (ss->n > run->cap) {
		/* threads appeared after the estimate: grow inside the stop */
		r = reserve_threads(run, ss->n, ss->n);
		if (r < 0)
			return r;
	}
	for (i = 0; i < ss->n; i++) {
		const struct stop_thread *st = &ss->t[i];
		struct dump_thread *t = &d->threads[d->n_threads];

		if (d->n_threads >= run->zeroed) {
			/* more threads than expected: past the paged-in part */
			memset(t, 0, sizeof(*t));
			run->zeroed = d->n_threads + 1;
		}
		t->cold = &d->cold[d->n_threads];
		switch (st->status) {
		case STOP_VANISHED:
		case STOP_EXITED:
			/* Threads come and go: one that ended during the dump
			 * is simply no longer there (counted, not an error). */
			d->n_exited++;
			continue;
		/* (said on standard error once it is known that what was
		 * read is of one program: dump_process()) */
		case STOP_FAILED:
			set_error(t, "cannot attach: %s", strerror(st->err));
			if (st->err == EPERM && !run->eperm_tid)
				run->eperm_tid = st->tid;
			run->partial = true;
			break;
		case STOP_TIMEOUT:
			set_error(t, "did not stop within %u ms",
				  run->ctl->stop_timeout_ms);
			run->partial = true;
			break;
		default:
			break;
		}
		t->tid = st->tid;
		t->stopped = st->status == STOP_STOPPED;
		t->group_stop = st->group_stop;
		/* a stopped thread's state comes from its registers
		 * (read_tp()); one that did not stop gets its state read
		 * after the threads run again (unstopped_states()) */
		t->state = st->state;
		if (!ss->names) /* else still being read: copy_names() */
			memcpy(t->comm, st->comm, sizeof(t->comm));
		d->n_threads++;
	}
	return 0;
}

/* The names, once they are all read: a prefetched listing's names thread
 * goes on during the stop (stop_names_wait()), so collect_threads() may
 * have copied some before they were there.  Still in the stop.  Returns
 * stop_names_wait()'s error (a name not read for want of a descriptor). */
static int
copy_names(struct dump *d, struct stop_set *ss)
{
	size_t i;
	int r;

	if (!ss->names)
		return 0;
	r = stop_names_wait(ss);
	for (i = 0; i < d->n_threads; i++) {
		struct dump_thread *t = &d->threads[i];
		const struct stop_thread *st = stop_find(ss, t->tid);

		if (st)
			memcpy(t->comm, st->comm, sizeof(t->comm));
	}
	return r;
}

/* The state of each listed thread that did not stop (it timed out, could
 * not be seized, or is an exited group leader), from /proc now that the
 * others run again: what kept it from stopping ('D', 'Z', ...) is still
 * there, or was a moment ago. */
static void
unstopped_states(struct dump *d)
{
	size_t i;

	for (i = 0; i < d->n_threads; i++) {
		struct dump_thread *t = &d->threads[i];
		char comm[64], state;

		if (t->stopped || t->state == 'Z' || t->state == 'X')
			continue;
		if (stop_read_task_stat(d->pid, t->tid, comm, sizeof(comm), &state) < 0)
			state = '?';
		t->state = state;
	}
}

/* Threads that were stopped but ended while held (the process was killed
 * during the dump: SIGKILL ends even a ptrace-stop) are left out like
 * those that ended before their stop.  A failed read of a thread that
 * still exists stays an error. */
static void
drop_exited(struct run *run)
{
	struct dump *d = &run->d;
	size_t i, k = 0;

	for (i = 0; i < d->n_threads; i++) {
		struct dump_thread *t = &d->threads[i];

		if (!t->exited && t->stopped && t->error &&
		    stop_thread_ended(d->pid, t->tid))
			t->exited = true;
		if (!t->exited) {
			if (k != i)
				d->threads[k] = *t;
			k++;
			continue;
		}
		free(t->attrs);
		d->n_exited++;
		d->n_stopped--;
	}
	d->n_threads = k;
}

static void
dump_free(struct dump *d)
{
	size_t i;

	dlay_free(d); /* before the threads it hangs off */
	for (i = 0; i < d->n_threads; i++) {
		struct dump_thread *t = &d->threads[i];

		free(t->attrs);
		free(t->dec_attr);
		free(t->frames);
	}
	free(d->threads);
	free(d->cold);
	free(d->recs);
	etls_proc_free(d->ep);
	d->ep = NULL;
	stack_arena_free(&d->stack_arena);
	free(d->cmdline);
	if (d->has_pctx)
		pctxr_free(&d->pctx);
	free(d->pd);
}

/* Threads of the stop still seized after it (stop_late_add()). */
static struct stop_late late;

static int
finish(struct run *run, int status)
{
	struct output_opts o = {.quiet = run->ctl->quiet,
				.verbose = run->ctl->verbose > 0};

	if (run->ctl->json)
		output_json(stdout, &run->d, &o);
	else
		output_text(stdout, &run->d, &o);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		cli_warn("write error on standard output: %s", strerror(errno));
		status = CLI_EXIT_FATAL;
	}
	dump_free(&run->d);
	stop_late_free(&late);
	return status;
}

static bool
proc_exists(pid_t pid, pid_t tid)
{
	char path[64];
	struct stat st;

	if (tid)
		snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)pid, (int)tid);
	else
		snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	return stat(path, &st) == 0;
}

/* dump_process(): the process ran execve() during the dump; tried this
 * many times in all. */
#define DUMP_EXEC       (-1)
#define DUMP_EXEC_TRIES 3
/* and waited this long before the next */
#define DUMP_EXEC_PAUSE_MS 20u
/* dump_process(): the thread the objects were opened through exited
 * before they all were (nothing shown); tried this many times in all */
#define DUMP_AGAIN       (-2)
#define DUMP_AGAIN_TRIES 3
/* dump_process(): in the stop, the slot of otel_thread_ctx_v1 was not
 * mapped (-EFAULT) or not filled in: a process that dlopen()s and
 * dlclose()s its writer library in a loop, stopped with the library
 * unloaded since the look-up, or in the loader between its mmap() and its
 * relocation (nothing shown).  Looked up and stopped again, this many
 * times in all; the last try shows what it read.  In a tight loop a first
 * stop lands in such a window in up to one dump of five, a try after one
 * that failed in about one of fifteen: eight tries all fail about once in
 * 1e9 dumps.  A slot that stays unusable costs eight short stops and 28
 * ms of pauses. */
#define DUMP_SLOT       (-3)
#define DUMP_SLOT_TRIES 8

/* Sleep ms, also through the signals the late threads' SIGCHLD handler
 * takes.  (Its loader and constructors run first in a new program: a
 * thread whose TLS is not set up yet cannot be read.) */
static void
pause_ms(unsigned ms)
{
	uint64_t t = remote_now_ns() + (uint64_t)ms * 1000000u;
	struct timespec ts = {.tv_sec = (time_t)(t / 1000000000u),
			      .tv_nsec = (long)(t % 1000000000u)};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* Whether ctxdump can open a process's /proc/PID/map_files/ entries
 * (CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE); true when it cannot tell. */
static bool
can_open_map_files(void)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct c[2];

	if (syscall(SYS_capget, &h, c) != 0)
		return true;
	return (c[0].effective & (1u << CAP_SYS_ADMIN)) != 0 ||
	       (c[1].effective & (1u << (CAP_CHECKPOINT_RESTORE - 32))) != 0;
}

/* Whether the first object that could not be opened may have failed
 * only because the thread it was opened through exited: its /proc/TID
 * entries went away (-ENOENT), not a replaced file (-ESTALE, opened by
 * its path), no permission, nor a deleted file that only map_files can
 * reach and ctxdump may not open. */
static bool
unopenable_by_exit(const struct etls_symbol *s)
{
	if (s->unopenable_err != -ENOENT && s->unopenable_err != -ESRCH)
		return false;
	return !s->unopenable_deleted || can_open_map_files();
}

/* Everything of one dump of ctl->pid, tried slot_tries times before for
 * DUMP_SLOT.  Returns the exit status, or DUMP_EXEC when the process ran
 * execve() during it, DUMP_AGAIN or DUMP_SLOT (all with nothing shown). */
/* What load_pctx() returned, said: none (-ENOENT) and no permission
 * (said with the rest) are not a warning. */
static void
pctx_warn(struct run *run, int err, const char *why)
{
	if (err < 0 && err != -ENOENT && err != -EPERM && err != -EACCES) {
		cli_warn("cannot read the process context: %s; ignoring it", why);
		run->partial = true;
	}
}

/* ---- threads on one thread pointer ---- */

/* Thread t runs on a thread pointer that is not its own (owner: the
 * thread whose it is, or -1 if unknown): what was read through it is
 * another thread's, and t has no TLS of its own, so no context.  The
 * caller says why (t->error). */
static void
not_own_tp(struct dump *d, struct dump_thread *t, pid_t owner)
{
	unsigned k;

	t->tp_owner = owner;
	t->has_slot = false;
	t->slot_addr = 0;
	t->record_addr = 0;
	t->has_record = false;
	free(t->attrs);
	t->attrs = NULL;
	t->attrs_len = 0;
	t->attrs_capped = false;
	/* the other layouts were read through it too (dlay_read()) */
	if (d->alt_raw && t->alt_idx)
		for (k = 0; k < LAY_N; k++)
			d->alt_raw[(t->alt_idx - 1) * LAY_N + k].state = LAY_ABSENT;
}

/* Threads that run on one thread pointer (dump_tp_owners()): the owner,
 * named by glibc's descriptor there, keeps what was read; the others get
 * no context.  When it names none of them (not glibc, a statically
 * linked program, a copy of another thread's TLS), no context is shown
 * for any: any one would be a guess, and the same record on several
 * threads reads as several threads working on one request.  After the
 * threads run again: the stop window stays as it was.  With --tid there
 * is no other thread to compare with: the descriptor at the thread's own
 * thread pointer is believed when it names another live thread of the
 * process (only a copy of that thread's descriptor would fool it). */
static void
shared_tps(struct run *run)
{
	struct dump *d = &run->d;
	struct dump_tid_field f = {.ep = d->ep};
	struct dump_tp_share *share;
	uint64_t *tps;
	pid_t *tids;
	size_t i, n = 0;

	for (i = 0; i < d->n_threads; i++)
		n += d->threads[i].tp != 0;
	if (n == 1 && run->ctl->tid) {
		struct dump_thread *t = d->threads;
		pid_t tid;

		while (!t->tp)
			t++;
		tid = dump_tp_tid(d->mem_pid, &f, t->tp);
		/* glibc's tid is the one of the process's namespace: the
		 * thread's own (one read), else which thread's */
		tid = tid && tid != dump_ns_tid(d->pid, t->tid)
			      ? dump_host_tid(d->pid, tid)
			      : 0;
		if (tid && tid != t->tid) {
			not_own_tp(d, t, tid);
			set_error(t,
				  "glibc's thread descriptor at its thread pointer "
				  "is thread %d's: no TLS of its own (a raw "
				  "clone() without CLONE_SETTLS?)",
				  (int)tid);
		}
		return;
	}
	if (n < 2)
		return;
	n = d->n_threads;
	share = malloc(n * sizeof(*share));
	tps = malloc(n * sizeof(*tps));
	tids = malloc(n * sizeof(*tids));
	for (i = 0; share && tps && tids && i < n; i++) {
		tps[i] = d->threads[i].tp;
		tids[i] = d->threads[i].tid;
	}
	/* else each thread as read */
	if (share && tps && tids &&
	    dump_tp_owners(d->pid, d->mem_pid, &f, tids, tps, n, share) > 0)
		for (i = 0; i < n; i++) {
			const struct dump_tp_share *s = &share[i];
			struct dump_thread *t = &d->threads[i];

			if (!s->owner)
				continue;
			not_own_tp(d, t, s->owner);
			if (s->owner > 0)
				set_error(t,
					  "shares the thread pointer of thread %d, "
					  "whose TLS it is: no TLS of its own (a raw "
					  "clone() without CLONE_SETTLS?)",
					  (int)s->owner);
			else if (s->n > 2)
				set_error(t,
					  "shares its thread pointer with thread %d "
					  "and %zu more, and whose TLS it is cannot "
					  "be told: no context is shown for any",
					  (int)s->other, s->n - 2);
			else
				set_error(t,
					  "shares its thread pointer with thread %d, "
					  "and whose TLS it is cannot be told: no "
					  "context is shown for either",
					  (int)s->other);
		}
	free(share);
	free(tps);
	free(tids);
}

/* Whether the slot read in the stop sends the dump round again
 * (DUMP_SLOT): its object unloaded since the look-up (-EFAULT), or mapped
 * by a dlopen() that has not relocated it yet. */
static bool
slot_unusable(const struct dump *d, int slot_err)
{
	return d->has_symbol && d->acc.model == TLSM_UNRESOLVED &&
	       (slot_err == -EFAULT ||
		(slot_err == 0 &&
		 (d->sym.tlsdesc_slot || d->sym.dtpmod_slot || d->sym.tpoff_slot)));
}

/* Whether every thread seized in this stop stopped (none is left for
 * stop_late_add()). */
static bool
stop_none_late(const struct stop_set *ss)
{
	size_t i;

	for (i = 0; i < ss->n; i++)
		if (ss->t[i].status == STOP_TIMEOUT)
			return false;
	return true;
}

/* cli_nofile_hint() for a dump as ctl asks for it. */
static void
nofile_hint(const struct ctxdump_control *ctl, int err)
{
	if (ctl->stacks)
		cli_nofile_hint(err, "a dump", CLI_NOFILE_STACKS, " with --stacks");
	else
		cli_nofile_hint(err, "a dump", CLI_NOFILE_DUMP, "");
}

/* Whether RLIMIT_NOFILE leaves extra descriptors beyond the least that
 * a dump as ctl asks for needs, besides those ctxdump was started with
 * (old: not counted, and under ulimit -n 6 with one of them open the
 * names thread took the descriptor the ELF lookups needed). */
static bool
nofile_allows(const struct ctxdump_control *ctl, unsigned extra)
{
	struct rlimit rl;

	return getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
	       rl.rlim_cur >= (ctl->stacks ? CLI_NOFILE_STACKS : CLI_NOFILE_DUMP) +
				      extra + cli_inherited();
}

static int
dump_process(const struct ctxdump_control *ctl, unsigned slot_tries)
{
	struct run run = {0};
	struct dump *d = &run.d;
	struct stop_set ss;
	struct etls_proc *ep;
	struct remote_image img;
	long long tgid;
	long hint;
	bool exec = false, exec_seen, doomed = false;
	uint64_t t_stop;
	char leader_state, pctx_why[256];
	size_t i;
	int r, names_err, slot_err = 0, pctx_err = 0;

	run.ctl = ctl;
	d->pid = ctl->pid;
	d->stacks = ctl->stacks;
	if (!proc_exists(ctl->pid, 0)) {
		cli_warn("process %d does not exist", (int)ctl->pid);
		return CLI_EXIT_FATAL;
	}
	if (ctl->pid == getpid()) {
		cli_warn("ctxdump cannot dump itself");
		return CLI_EXIT_FATAL;
	}
	if (!dump_proc_status(ctl->pid, &tgid, &leader_state))
		tgid = -1;
	if (tgid != ctl->pid) {
		/* name the process when it is known, as record and ctxshim
		 * status do: the fix is then one copy and paste */
		if (tgid > 0)
			cli_warn("%d is a thread of process %lld, not a process; use "
				 "ctxdump -t %d %lld",
				 (int)ctl->pid, tgid, (int)ctl->pid, tgid);
		else
			cli_warn("%d is a thread, not a process; use -t %d with its "
				 "process id",
				 (int)ctl->pid, (int)ctl->pid);
		return CLI_EXIT_FATAL;
	}
	if (ctl->tid && !proc_exists(ctl->pid, ctl->tid)) {
		long long owner;
		char st;

		/* A tid of another process is a mistake, not an exit. */
		if (dump_proc_status(ctl->tid, &owner, &st) && owner != ctl->pid)
			cli_warn("thread %d belongs to process %lld, not %d",
				 (int)ctl->tid, owner, (int)ctl->pid);
		else
			cli_warn("thread %d of process %d does not exist (it may have "
				 "exited)",
				 (int)ctl->tid, (int)ctl->pid);
		return CLI_EXIT_FATAL;
	}
	d->mem_pid = dump_memory_pid(ctl->pid, leader_state);
	/* The kernel's thread count: sizes the thread list below, and for
	 * a process with many threads their names are read on a second
	 * thread, on another core, while this one lists them and does the
	 * work below until the stop (stop_prefetch(); below PREFETCH_MIN
	 * threads, starting that thread costs more than the names). */
	hint = ctl->tid ? 1 : stop_count_threads(ctl->pid);
	stop_init(&ss, ctl->pid);
	if (hint >= PREFETCH_MIN && nofile_allows(ctl, PREFETCH_NOFILE))
		(void)stop_prefetch(&ss, (size_t)hint);
	load_cmdline(d);

	/* The mappings once for the process context and the three symbols
	 * (the file-backed ones through PROCMAP_QUERY where the kernel has
	 * it: the text of maps at 1000 threads is 2000 lines, 0.7 ms to
	 * produce), and each ELF object opened once. */
	r = dump_proc_load(ctl->pid, &d->mem_pid, &ep);
	/* What it all is read from: an exec from here on is seen in the
	 * stop (remote_image_same()). */
	remote_image_load(d->mem_pid, &img);
	run.img = &img;
	if (ep) {
		/* The process context needs no stop: it has its own seqlock.
		 * Said after the stop, in which one that failed because every
		 * thread read through ended (threads that live a few ms) is
		 * read again, through a stopped one. */
		pctx_err = load_pctx(d, ep, pctx_why, sizeof(pctx_why));
		/* the objects' symbol tables searched once for all three */
		dlay_want(ep);
		r = etls_proc_find(ep, OTEL_THREAD_CTX_SYMBOL, &d->sym);
		/* Elastic's and custom-labels' variables too (issue 10): a
		 * process with only those is read as well. */
		if ((r == 0 || r == -ENOENT) && dlay_find(d, ep) && r == -ENOENT)
			r = 1;
		/* for shared_tps() after the stop (freed by dump_free()) */
		d->ep = ep;
	}
	/* Said now only when no stop follows; else after the stop, once the
	 * dump is not tried again (DUMP_SLOT), so once however many tries. */
	if (r != 0 && r != 1) {
		pctx_warn(&run, pctx_err, pctx_why);
		pctx_err = 0;
	}
	if (r == -ENOENT && d->sym.n_unopenable && unopenable_by_exit(&d->sym) &&
	    stop_thread_exiting(ctl->pid, d->mem_pid)) {
		/* opened through a thread that exited meanwhile (the leader
		 * has exited, and the other threads come and go): another
		 * one is read through on the next try */
		stop_free(&ss);
		dump_free(d);
		return DUMP_AGAIN;
	}
	if (r == -ENOENT && d->sym.n_unopenable) {
		/* the definition may be in what could not be opened */
		const struct etls_symbol *s = &d->sym;

		/* none opened: nothing was looked at, which "none of those
		 * it could open defines it" would hide */
		if (s->n_unopenable >= s->n_objects)
			cli_warn("cannot look for " OTEL_THREAD_CTX_SYMBOL
				 " in process %d: none of its %u object%s could be "
				 "opened, the first %s%s: %s",
				 (int)ctl->pid, s->n_objects, CLI_PL(s->n_objects),
				 escaped(s->unopenable),
				 s->unopenable_deleted ? " (deleted)" : "",
				 output_open_error(s->unopenable_err));
		else
			cli_warn("none of the objects of process %d that ctxdump "
				 "could open defines " OTEL_THREAD_CTX_SYMBOL
				 "; %u of %u could not be opened, the first %s%s: %s",
				 (int)ctl->pid, s->n_unopenable, s->n_objects,
				 escaped(s->unopenable),
				 s->unopenable_deleted ? " (deleted)" : "",
				 output_open_error(s->unopenable_err));
		if ((s->unopenable_err == -ESTALE || s->unopenable_err == -ENOENT) &&
		    !can_open_map_files())
			cli_warn("the mapped files themselves are only reachable "
				 "through /proc/%d/map_files/, which needs "
				 "CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE",
				 (int)ctl->pid);
		/* Its files are opened through /proc/PID/root, which needs
		 * the ptrace access an attach would have needed next: say
		 * what denied it, as for a failed attach. */
		if (s->unopenable_err == -EACCES || s->unopenable_err == -EPERM)
			stop_diagnose_eperm(ctl->pid, ctl->pid);
		nofile_hint(ctl, s->unopenable_err);
		stop_free(&ss);
		return finish(&run, CLI_EXIT_FATAL);
	}
	if (r == -ENOENT && d->sym.has_misdef) {
		/* defined, but not as OTEP-4947 says: not "no writer" */
		const struct etls_symbol *s = &d->sym;
		char what[80];

		(void)output_misdef_what(s, what, sizeof(what));
		cli_warn("%s in process %d defines " OTEL_THREAD_CTX_SYMBOL
			 " as %s, not as the 8-byte thread-local pointer (STT_TLS) "
			 "of OTEP-4947: ctxdump cannot read it",
			 escaped(s->misdef_module), (int)ctl->pid, what);
		stop_free(&ss);
		return finish(&run, CLI_EXIT_FATAL);
	}
	if (r == -ENOENT) {
		cli_warn(
			"no loaded object of process %d defines " OTEL_THREAD_CTX_SYMBOL
			" (is an OTEP-4947 writer such as libctxshim.so loaded?)",
			(int)ctl->pid);
		/* A statically linked executable is the only object that can
		 * hold the writer: no loader runs to preload one, which is
		 * what most users of such a program want to know (busybox,
		 * a Go or musl build); stripped, it may also define the
		 * variable without ctxdump seeing it.  (Not said of a
		 * dynamically linked one: there a missing writer library is
		 * likelier.) */
		d->exe_elf32 = !d->sym.exe_static && dump_exe_is_elf32(d->mem_pid);
		if (d->sym.exe_static)
			cli_warn("its executable is statically linked: no dynamic "
				 "loader runs in it, so LD_PRELOAD cannot load "
				 "libctxshim.so there");
		/* not "is a writer loaded?": none could be read there */
		else if (d->exe_elf32)
			cli_warn("its executable is a 32-bit program: ctxdump reads "
				 "64-bit processes only, and the 64-bit "
				 "libctxshim.so cannot load there");
		if (d->sym.exe_stripped && d->sym.exe_static)
			cli_warn("it is also stripped (no .symtab): a writer built "
				 "into it must export " OTEL_THREAD_CTX_SYMBOL
				 " as OTEP-4947 asks (link "
				 "-static-pie "
				 "-Wl,--export-dynamic-symbol=" OTEL_THREAD_CTX_SYMBOL
				 ") or keep its symbol table");
		stop_free(&ss);
		return finish(&run, CLI_EXIT_FATAL);
	}
	if ((r == -ESRCH || r == -ENODATA) && dump_is_kthread(ctl->pid)) {
		cli_warn("process %d is a kernel thread: it has no user-space memory "
			 "and no thread context to read",
			 (int)ctl->pid);
		stop_free(&ss);
		dump_free(d);
		return CLI_EXIT_FATAL;
	}
	if (r == -ESRCH) {
		cli_warn("process %d exited%s", (int)ctl->pid,
			 dump_exited_note(ctl->pid));
		stop_free(&ss);
		dump_free(d);
		return CLI_EXIT_FATAL;
	}
	if (r == -EACCES || r == -EPERM) {
		cli_warn("cannot read /proc/%d/maps: %s", (int)ctl->pid, strerror(-r));
		stop_diagnose_eperm(ctl->pid, ctl->pid);
		stop_free(&ss);
		dump_free(d);
		return CLI_EXIT_FATAL;
	}
	if (r == -EPROTONOSUPPORT) {
		cli_warn("process %d defines " OTEL_THREAD_CTX_SYMBOL
			 " for an architecture ctxdump cannot read",
			 (int)ctl->pid);
		stop_free(&ss);
		dump_free(d);
		return CLI_EXIT_FATAL;
	}
	if (r == -ENODATA) {
		/* no file mapped at all, by a process that is not exiting
		 * (stop_maps_error()): not "No data available" */
		dump_warn_no_files(ctl->pid, d->mem_pid, OTEL_THREAD_CTX_SYMBOL, "");
		stop_free(&ss);
		dump_free(d);
		return CLI_EXIT_FATAL;
	}
	if (r < 0) {
		cli_warn("cannot examine the objects of process %d: %s", (int)ctl->pid,
			 strerror(-r));
		stop_free(&ss);
		dump_free(d);
		return CLI_EXIT_FATAL;
	}
	d->has_symbol = r == 0;
	if (r == 1 && d->sym.n_unopenable) {
		/* Another layout is read, but otel_thread_ctx_v1 may be
		 * defined in an object that could not be opened: its records
		 * are not shown, for a reason worth the exit status, as a
		 * process context that could not be read (pctx_warn()). */
		const struct etls_symbol *s = &d->sym;

		cli_warn(
			"cannot tell whether process %d defines " OTEL_THREAD_CTX_SYMBOL
			": %u of its %u object%s could not be opened, the first "
			"%s%s: %s; showing the other layouts",
			(int)ctl->pid, s->n_unopenable, s->n_objects,
			CLI_PL(s->n_objects), escaped(s->unopenable),
			s->unopenable_deleted ? " (deleted)" : "",
			output_open_error(s->unopenable_err));
		run.partial = true;
	}

	/* Sized from the kernel's thread count, with room for threads
	 * created meanwhile. */
	{
		if (hint < 1)
			hint = 64;
		if (reserve_threads(&run, (size_t)hint + (size_t)hint / 4 + 16,
				    (size_t)hint + 16) < 0) {
			cli_warn("out of memory");
			free_batches(&run);
			stop_free(&ss);
			dump_free(d);
			return CLI_EXIT_FATAL;
		}
		/* The stacks' copies, paged in now instead of in the stop
		 * window (about 5 KiB a thread blocked in a system call;
		 * deeper stacks that do not fit get their own mapping). */
		if (ctl->stacks)
			(void)stack_arena_reserve(&d->stack_arena,
						  ((size_t)hint + 16) *
							  STACK_ARENA_GUESS);
	}
	/* The unwinder's module list, read last before the stop and
	 * compared while the threads are stopped: a library dlclose()d and
	 * another dlopen()ed at its address in between would otherwise name
	 * the second one's frames after the first (stack_unwind_sync(),
	 * stack_unwind_stopped()).  Its errors: unwind_stacks() says. */
	if (ctl->stacks) {
		(void)dump_unwind_sync(ctl->pid, &d->mem_pid, &img, false);
		dump_test_sync_pause();
	}

	/* ---- threads stopped from here ---- */
	t_stop = remote_now_ns();
	r = stop_all(&ss, ctl->tid, ctl->stop_timeout_ms, cpu_wait_ms(), NULL);
	if (r == -EPERM) {
		stop_release(&ss);
		cli_warn("attach: ptrace(PTRACE_SEIZE, %d): %s", (int)ss.fail_tid,
			 strerror(ss.fail_err));
		stop_diagnose_eperm(ctl->pid, ss.fail_tid);
		stop_free(&ss);
		free_batches(&run);
		dump_free(d);
		return CLI_EXIT_FATAL;
	}
	if ((r == -ETIMEDOUT || r == -ESRCH) &&
	    stop_ran_exec(ctl->pid, &img, ss.exec_seen, r == -ESRCH && !ctl->tid,
			  ctl->stop_timeout_ms)) {
		/* what stopped or ended was of the old program, and nothing
		 * of the new one stopped */
		stop_release(&ss);
		(void)stop_late_add(&late, &ss);
		stop_free(&ss);
		free_batches(&run);
		dump_free(d);
		return DUMP_EXEC;
	}
	if (r == -ETIMEDOUT) {
		/* Alive, but nothing to read: say so, not "exited".  A wait
		 * for a CPU went on past the stop timeout: say how long. */
		unsigned ms = (unsigned)((remote_now_ns() - t_stop) / 1000000u);

		stop_release(&ss);
		if (ss.cpu_waited && ctl->tid)
			cli_warn("thread %d did not stop within %u ms (runnable: "
				 "waiting for a CPU)",
				 (int)ctl->tid, ms);
		else if (ss.cpu_waited)
			cli_warn("no thread of process %d stopped within %u ms "
				 "(runnable: waiting for a CPU)",
				 (int)ctl->pid, ms);
		else if (ctl->tid)
			cli_warn("thread %d did not stop within %u ms", (int)ctl->tid,
				 ctl->stop_timeout_ms);
		else
			cli_warn("no thread of process %d stopped within %u ms",
				 (int)ctl->pid, ctl->stop_timeout_ms);
		if (ss.cpu_waited)
			cli_warn("on a loaded machine, or for a target of low "
				 "priority, try a --stop-timeout longer than that");
		else
			cli_warn("a thread in uninterruptible sleep (state D, e.g. in "
				 "vfork()) cannot stop until it wakes; on a loaded "
				 "machine try a longer --stop-timeout");
		stop_free(&ss);
		free_batches(&run);
		dump_free(d);
		return CLI_EXIT_FATAL;
	}
	if (r < 0) {
		/* Gone with none stopped: "during the dump" if a thread had
		 * been seized already (killed while we waited for the
		 * others' stops, perhaps with their stops not yet
		 * collected), as when it goes while held (below). */
		const char *when = "before it could be stopped";

		for (i = 0; i < ss.n; i++)
			if (ss.t[i].status == STOP_EXITED)
				when = "during the dump";
		stop_release(&ss);
		if (r == -ESRCH && ctl->tid)
			cli_warn("thread %d exited %s", (int)ctl->tid, when);
		else if (r == -ESRCH)
			cli_warn("process %d exited %s%s", (int)ctl->pid, when,
				 dump_exited_note(ctl->pid));
		else {
			cli_warn("cannot stop process %d: %s", (int)ctl->pid,
				 strerror(-r));
			nofile_hint(ctl, r);
		}
		stop_free(&ss);
		free_batches(&run);
		dump_free(d);
		return CLI_EXIT_FATAL;
	}
	r = collect_threads(&run, &ss);
	if (r == 0) {
		/* Read through a thread that cannot exit while we read: the
		 * one chosen before the stop may have (a zombie leader's
		 * process). */
		d->mem_pid = dump_stopped_reader(ctl->pid, d->mem_pid, &ss);
		/* The slots are process-global; read them while nothing runs. */
		if (d->has_symbol)
			slot_err = etls_resolve(d->mem_pid, &d->sym, &d->acc);
		/* A try that will be thrown away (DUMP_SLOT, below): let the
		 * threads go at once, without copying registers and stacks */
		doomed = slot_unusable(d, slot_err) &&
			 slot_tries + 1 < DUMP_SLOT_TRIES && stop_none_late(&ss) &&
			 !stop_late_busy(&late);
		if (!doomed) {
			read_threads(&run);
			if (ctl->stacks)
				(void)stack_unwind_stopped(d->mem_pid);
			dlay_read(d);
			if (pctx_err == -ESRCH)
				pctx_err =
					load_pctx(d, NULL, pctx_why, sizeof(pctx_why));
		}
		/* last: an exec before this point (the kernel's exec waits
		 * for the threads held, stop.c) made some of it the next
		 * program's */
		exec = !remote_image_same(d->mem_pid, &img);
	}
	/* the names the names thread has not read yet: still in the stop,
	 * or a thread that ends (or is renamed) once let go would have
	 * none (or another) */
	names_err = copy_names(d, &ss);
	if (r == 0)
		r = names_err;
	stop_detach_all(&ss);
	/* ---- threads running again ---- */
	free_batches(&run);
	d->stopped_ns = stop_window_ns(&ss);
	d->stop_rounds = ss.rounds;
	exec_seen = ss.exec_seen;
	stop_release(&ss);
	/* A thread that did not stop in time is still seized with its stop
	 * pending: let it go as soon as it stops, not when we exit (the
	 * output may block on a pipe for as long as its reader likes). */
	(void)stop_late_add(&late, &ss);
	stop_free(&ss);
	if (ctl->stacks && r >= 0 && !doomed) {
		dump_test_sync_pause();
		(void)dump_unwind_sync(ctl->pid, &d->mem_pid, &img, true);
	}
	if (r < 0) {
		cli_warn("cannot collect the threads: %s", strerror(-r));
		nofile_hint(ctl, r);
		dump_free(d);
		return CLI_EXIT_FATAL;
	}
	if (exec && remote_image_changed(ctl->pid, &img)) {
		dump_free(d);
		return DUMP_EXEC;
	}
	drop_exited(&run);
	unstopped_states(d);
	/* A slot that could not be read through a stopped thread: it can
	 * only have been killed, with its whole process. */
	if ((!d->n_threads && d->n_exited) ||
	    (slot_err < 0 && dump_process_exiting(ctl->pid))) {
		/* every thread ended before or while it was held: the
		 * process was killed (or exited) during the dump, or ran
		 * execve() */
		if (stop_ran_exec(ctl->pid, &img, exec_seen, !ctl->tid,
				  ctl->stop_timeout_ms)) {
			dump_free(d);
			return DUMP_EXEC;
		}
		if (ctl->tid)
			cli_warn("thread %d exited during the dump", (int)ctl->tid);
		else
			cli_warn("process %d exited during the dump", (int)ctl->pid);
		dump_free(d);
		return CLI_EXIT_FATAL;
	}
	/* Its object unloaded since the look-up (-EFAULT), or mapped by a
	 * dlopen() that has not relocated it yet: look again with the
	 * threads running (not in the stop: every stop would take longer),
	 * unless a thread is still held (its stop is late). */
	if (doomed || (slot_unusable(d, slot_err) && slot_tries + 1 < DUMP_SLOT_TRIES &&
		       !stop_late_busy(&late))) {
		dump_free(d);
		return DUMP_SLOT;
	}
	/* here, not before the stop: once however many times it is tried */
	if (d->has_symbol && d->sym.n_definitions > 1)
		cli_warn("%u objects define " OTEL_THREAD_CTX_SYMBOL
			 "; showing the one in %s",
			 d->sym.n_definitions, escaped(d->sym.module));
	/* A program that defines the name as something else runs under the
	 * shim, which goes passive: the valid slot shown then holds no
	 * context, and the wrong definition is why (doc/ctxdump.1,
	 * DIAGNOSTICS).  Not an error: the exit status stays. */
	if (d->has_symbol && d->sym.has_misdef) {
		static char other[4 * PATH_MAX + 1];
		char what[80];

		/* escaped() has one buffer: the first path is copied out */
		(void)snprintf(other, sizeof(other), "%s",
			       escaped(d->sym.misdef_module));
		cli_warn("%s also defines " OTEL_THREAD_CTX_SYMBOL
			 ", as %s (%s); showing the 8-byte thread-local pointer in %s",
			 other, output_misdef_what(&d->sym, what, sizeof(what)),
			 output_elf_type_name(d->sym.misdef_type),
			 escaped(d->sym.module));
	}

	shared_tps(&run);
	/* no more lookups in the objects */
	etls_proc_free(d->ep);
	d->ep = NULL;

	pctx_warn(&run, pctx_err, pctx_why);
	if (d->has_symbol && d->acc.model == TLSM_UNRESOLVED) {
		char tries[32] = "";

		/* how often it failed, when it was tried again */
		if (slot_tries)
			snprintf(tries, sizeof(tries), " (%u tries)", slot_tries + 1);
		if (slot_err < 0)
			cli_warn("cannot read the TLS slot of " OTEL_THREAD_CTX_SYMBOL
				 " in %s: %s%s; no thread can be read",
				 escaped(d->sym.module), strerror(-slot_err), tries);
		else if (d->sym.tlsdesc_slot || d->sym.dtpmod_slot || d->sym.tpoff_slot)
			cli_warn("the loader has not filled in the TLS slot "
				 "of " OTEL_THREAD_CTX_SYMBOL
				 " in %s%s; no thread can be read",
				 escaped(d->sym.module), tries);
		else
			cli_warn("no TLS relocation of a loaded object "
				 "reaches " OTEL_THREAD_CTX_SYMBOL
				 " of %s, so its place in each "
				 "thread is unknown; no thread can be read",
				 escaped(d->sym.module));
		run.partial = true;
	}
	for (i = 0; i < d->n_threads; i++) {
		struct dump_thread *t = &d->threads[i];
		bool unstopped =
			t->error && (strncmp(t->error, "cannot attach", 13) == 0 ||
				     strncmp(t->error, "did not stop", 12) == 0);

		/* the others are read errors, said once for all above when
		 * no thread can be read; a shared thread pointer is none
		 * (shared_tps()) */
		if (t->error &&
		    (unstopped || t->tp_owner || d->acc.model != TLSM_UNRESOLVED)) {
			cli_warn("tid %d: %s, skipping", (int)t->tid, t->error);
			run.partial = true;
		}
	}
	/* DIAGNOSTICS: an attach that failed with EPERM gets its hint, also
	 * when only some threads failed */
	if (run.eperm_tid)
		stop_diagnose_eperm(ctl->pid, run.eperm_tid);
	/* /proc/PID/task lists threads in creation order, which is tid
	 * order until tids wrap: sort (272-byte elements) only if needed. */
	for (i = 1; i < d->n_threads && d->threads[i - 1].tid < d->threads[i].tid; i++)
		;
	if (i < d->n_threads)
		qsort(d->threads, d->n_threads, sizeof(*d->threads), cmp_tid);
	decode_attrs(&run);
	/* The record has no version of its own: the process context's
	 * schema says which layout it is. */
	if (d->has_symbol && d->has_pctx && d->pd->has_threadlocal &&
	    !schema_known(&d->pd->schema_version))
		cli_warn("process %d names the thread-context schema \"%s\" "
			 "(threadlocal.schema_version), which ctxdump does not know; "
			 "its records are shown as OTEP-4947 tlsdesc_v1_dev records",
			 (int)ctl->pid,
			 escaped_n(d->pd->schema_version.ptr,
				   d->pd->schema_version.len));
	dlay_finish(d);
	/* A context of another layout that could not be read is a thread
	 * not read, as an unreadable OTEP record is: said on stderr, with
	 * where it was, and partial output. */
	for (i = 0; i < d->n_threads; i++) {
		const struct dump_thread *t = &d->threads[i];
		unsigned j;

		if (t->error)
			continue; /* said once for the thread above */
		for (j = 0; j < t->n_alt; j++) {
			const struct dump_alt *a = &t->alt[j];

			if (a->state != LAY_ERROR)
				continue;
			if (a->ptr)
				cli_warn("tid %d: cannot read the %s context at "
					 "0x%" PRIx64 ": %s",
					 (int)t->tid, lay_symbol(a->kind), a->ptr,
					 strerror(-a->err));
			else
				cli_warn("tid %d: cannot read %s: %s", (int)t->tid,
					 lay_symbol(a->kind), strerror(-a->err));
			run.partial = true;
		}
	}
	if (ctl->stacks) {
		const char *why = stack_unwind_unavailable();

		/* once here; each thread then says it has no stack */
		if (why)
			cli_warn("cannot load libunwind (%s): no stacks", why);
		unwind_stacks(&run);
	}
	return finish(&run, run.partial ? CLI_EXIT_PARTIAL : CLI_EXIT_OK);
}

int
main(int argc, char **argv)
{
	static char outbuf[1u << 16];
	struct ctxdump_control ctl = {0};
	unsigned execs = 0, again = 0, slot_tries = 0;
	int r;

	cli_count_inherited();
	/* Subcommands (issue 10); a process id is never a word. */
	if (argc > 1 && strcmp(argv[1], "record") == 0)
		return record_main(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "report") == 0)
		return report_main(argc - 1, argv + 1);
	parse_options(&ctl, argc, argv);
	/* A 1000-thread dump is hundreds of KiB: fewer, larger writes when
	 * it goes to a file or a pipe. */
	if (!isatty(STDOUT_FILENO))
		setvbuf(stdout, outbuf, _IOFBF, sizeof(outbuf));
	/* The wait for the stops sleeps on SIGCHLD; an inherited SIG_IGN
	 * would make the kernel skip that notification. */
	signal(SIGCHLD, SIG_DFL);

	/* A process that ran execve() during the dump is another program
	 * now: dump that one, once the threads still held of the first try
	 * are let go (the thread that ran the exec may be one of them). */
	for (;;) {
		r = dump_process(&ctl, slot_tries);
		if (r == DUMP_SLOT) {
			/* 1, 2, ... ms: time for a loader to finish */
			pause_ms(++slot_tries);
			continue;
		}
		if (r == DUMP_AGAIN) {
			if (++again < DUMP_AGAIN_TRIES)
				continue;
			cli_warn("the threads of process %d that ctxdump read it "
				 "through exited before its objects could be "
				 "opened, %u times; nothing is shown",
				 (int)ctl.pid, again);
			stop_late_free(&late);
			return CLI_EXIT_FATAL;
		}
		if (r != DUMP_EXEC)
			return r;
		stop_late_release(&late, ctl.stop_timeout_ms);
		if (ctl.tid && ctl.tid != ctl.pid) {
			cli_warn("process %d ran execve() during the dump: thread %d "
				 "is gone with it",
				 (int)ctl.pid, (int)ctl.tid);
		} else if (stop_late_busy(&late)) {
			cli_warn(
				"process %d ran execve() during the dump, and a thread "
				"of it still held did not stop within %u ms; nothing "
				"is shown",
				(int)ctl.pid, ctl.stop_timeout_ms);
		} else if (++execs == DUMP_EXEC_TRIES) {
			cli_warn("process %d ran execve() during the dump, %u times; "
				 "nothing is shown",
				 (int)ctl.pid, execs);
		} else {
			cli_warn("process %d ran execve() during the dump; dumping the "
				 "new program",
				 (int)ctl.pid);
			pause_ms(DUMP_EXEC_PAUSE_MS);
			/* the new program's slot gets its own tries, and its
			 * own module list (--stacks read the old one) */
			slot_tries = 0;
			stack_unwind_reset();
			continue;
		}
		stop_late_free(&late);
		return CLI_EXIT_FATAL;
	}
}
