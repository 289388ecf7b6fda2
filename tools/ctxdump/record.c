/* SPDX-License-Identifier: Apache-2.0 */
/* ctxdump record: wall-clock sampling of every thread of a process, each
 * sample labelled with the thread's context at that instant.
 *
 * Every round stops all threads (stop.c), copies registers and the top of
 * each stack (unwind.c, batched) and each thread's context in every layout
 * the process publishes (layouts.c, batched), and detaches.  Unwinding,
 * symbolization, context decoding and writing happen with the target
 * running, before the next round.  Stacks, frames, strings and contexts
 * are interned (proffile.h), so the file grows by a few bytes per sample
 * and the tool's memory stays bounded: the intern tables are dropped and
 * started again past a size cap.
 *
 * Unlike the one-shot dump, the recorder outlives its stops, so it keeps
 * what a stop could not let go (struct stop_late): a thread that did not
 * stop in time stays seized with the interrupt pending and is detached as
 * soon as it stops between rounds -- a round that meets it takes it over
 * as it is, and samples it if its stop comes in that round's time -- and
 * an exit stop.c could not collect yet (a group leader that ended before
 * its other threads) is collected as soon as it can be, or its process
 * could never finish exiting. */
#include "config.h"

#include "profile.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "dump.h"
#include "layouts.h"
#include "output.h"
#include "pctx-read.h"
#include "proffile.h"
#include "remote.h"
#include "rng.h"
#include "stop.h"
#include "unwind.h"
#include "w3c.h"

#define DEFAULT_RATE       100
#define MAX_RATE           1000
#define DEFAULT_MAX_FRAMES 128
#define MAX_FRAMES         1024
#define DEFAULT_STACK_SIZE (64u << 10)
/* A thread that does not stop within this time is skipped for the round:
 * meanwhile every other thread stays stopped, so it is much shorter than
 * the one-shot dump's 500 ms. */
#define STOP_TIMEOUT_MS 50
/* While no thread is stopped yet, one that is runnable only waits for a
 * CPU (a loaded machine, a target of low priority): it is waited for
 * until this long after the round began.  That holds nothing of the
 * target, where giving up loses the round (a process's only thread).
 * One that waits longer stays seized, and the next round waits for it
 * again (stop_all() takes it over). */
#define CPU_WAIT_MS 500
/* Past this many bytes an intern table is dropped and started again. */
#define ITAB_MAX_BYTES (32u << 20)
/* How often unresolved layouts, the process context and new modules may
 * be looked at again. */
#define REFRESH_NS 1000000000ull
/* The most of the target's command line kept (as the one-shot dump). */
#define CMDLINE_MAX (64u << 10)
/* Once a termination signal arrived, how long the rest of the recording
 * may take to go out to a pipe or socket nobody reads from fast enough
 * (a second signal gives up at once). */
#define SIGNAL_GRACE_NS 3000000000ull

struct rec_ctl {
	pid_t pid;
	unsigned rate;
	double duration; /* seconds, 0 = until interrupted */
	const char *output;
	size_t max_frames;
	size_t stack_size;
	bool quiet;
};

/* ---- intern tables ---- */

struct itab_ent {
	uint64_t h;
	uint8_t *key; /* NULL: empty slot */
	uint32_t len, id;
	uint64_t val; /* the caller's, 0 in a new entry */
};

struct itab {
	struct itab_ent *v;
	size_t cap, n, bytes;
	uint32_t next; /* next id; ids are never reused */
	unsigned resets;
};

/* The strings come from the target, which could choose them to collide:
 * seeded. */
static uint64_t
hash_bytes(const void *p, size_t n)
{
	return ctx_hash_bytes(p, n, cli_hash_seed());
}

static void
itab_clear(struct itab *t)
{
	size_t i;

	for (i = 0; i < t->cap; i++)
		free(t->v[i].key);
	free(t->v);
	t->v = NULL;
	t->cap = t->n = t->bytes = 0;
}

static bool
itab_grow(struct itab *t)
{
	size_t cap = t->cap ? t->cap * 2 : 1024, i;
	struct itab_ent *nv = calloc(cap, sizeof(*nv));

	if (!nv)
		return false;
	for (i = 0; i < t->cap; i++) {
		struct itab_ent *e = &t->v[i];
		size_t j;

		if (!e->key)
			continue;
		for (j = e->h & (cap - 1); nv[j].key; j = (j + 1) & (cap - 1))
			;
		nv[j] = *e;
	}
	free(t->v);
	t->v = nv;
	t->cap = cap;
	return true;
}

/* The entry of key, *fresh when it was not in the table (the caller then
 * writes its definition); valid until the next call.  NULL on allocation
 * failure. */
static struct itab_ent *
itab_ent(struct itab *t, const void *key, size_t len, bool *fresh)
{
	uint64_t h = hash_bytes(key, len);
	size_t i;

	*fresh = false;
	if (!t->next)
		t->next = 1;
	if (t->bytes > ITAB_MAX_BYTES) {
		/* bounded memory: forget everything, ids go on */
		itab_clear(t);
		t->resets++;
	}
	if ((t->n + 1) * 2 > t->cap && !itab_grow(t))
		return NULL;
	for (i = h & (t->cap - 1); t->v[i].key; i = (i + 1) & (t->cap - 1)) {
		struct itab_ent *e = &t->v[i];

		if (e->h == h && e->len == len && memcmp(e->key, key, len) == 0)
			return e;
	}
	t->v[i].key = malloc(len ? len : 1);
	if (!t->v[i].key)
		return NULL;
	memcpy(t->v[i].key, key, len);
	t->v[i].h = h;
	t->v[i].len = (uint32_t)len;
	t->v[i].id = t->next++;
	t->v[i].val = 0;
	t->n++;
	t->bytes += len + sizeof(struct itab_ent) * 2 + 16;
	*fresh = true;
	return &t->v[i];
}

/* Id of key, *fresh as itab_ent()'s.  0 on allocation failure. */
static uint32_t
itab_get(struct itab *t, const void *key, size_t len, bool *fresh)
{
	const struct itab_ent *e = itab_ent(t, key, len, fresh);

	return e ? e->id : 0;
}

/* ---- the recording ---- */

struct rec_layout {
	bool present;
	bool usable;
	enum tlsm_model model;
	uint32_t abi_version;
	char module[PATH_MAX]; /* etls_symbol.module */
};

struct rec {
	const struct rec_ctl *ctl;
	pid_t pid;
	/* Whose maps and memory are read (dump_memory_pid()): pid, or a live
	 * thread of it once its leader has exited; chosen again each round
	 * among the stopped threads (dump_stopped_reader()), so a thread read
	 * through that exits is replaced at the next round, or when it exits
	 * before the round's stacks are unwound (dump_unwind()). */
	pid_t mem_pid;
	struct pfile_w w;
	FILE *out; /* fopencookie(): out_write() on out_fd */
	int out_fd;
	bool out_own;       /* opened by us: closed at the end */
	bool out_regular;   /* a regular file: writes never wait on a reader */
	int out_err;        /* errno of a failed write */
	uint64_t out_bytes; /* written, not merely buffered */
	uint64_t grace_end;
	/* -o FILE written to tmp_path, renamed to final_path (open_output()) */
	char *tmp_path, *final_path;
	bool final_existed; /* FILE existed before (tmp_path replaces it) */
	uint64_t t0_mono, t0_real;

	struct lay_proc lp;
	bool have_layouts;
	unsigned usable;
	/* lay_resolve() ran in this round's stop: lp and usable are what the
	 * next samples are read through, to be compared with the file's */
	bool resolved;
	/* What the file last said of each layout kind (PFILE_LAYOUT), so
	 * that after a rediscovery only a layout that changed is written
	 * again, and one that comes back as it was is not. */
	struct rec_layout written[LAY_N];
	uint64_t resolve_ns;
	/* Look for the layouts again before the next stop: a writer
	 * library's slots changed (rediscover; it was unloaded, perhaps
	 * loaded again elsewhere), or none was found (every REFRESH_NS
	 * since discover_ns: one may be dlopen()ed later). */
	bool rediscover;
	uint64_t discover_ns;

	/* The program image everything above was read from (an exec gives
	 * the process another): one 16-byte read per round tells. */
	struct remote_image img;
	/* an exec was seen after the round's stop: reload before the next */
	bool exec_pending;
	uint64_t execs;
	/* when the last exec was seen: for REFRESH_NS after it, a missing
	 * layout or process context is looked for every round, as the new
	 * image may still be in its loader or constructors */
	uint64_t exec_ns;
	/* The last exec started a 32-bit program, whose frames and objects
	 * ctxdump does not read: the recording ends there. */
	bool exec_elf32;

	/* glibc's tid in its thread descriptor, for threads on one thread
	 * pointer (dump_tp_owners()): looked up with the layouts */
	struct dump_tid_field tidf;

	bool has_pctx;
	struct pctxr_snapshot pctx;
	struct pctx_decoded *pd;
	uint64_t pctx_ns;
	/* the last header timestamp the context was read again for
	 * (pctx_republished()), whether or not that read worked */
	uint64_t pctx_tried_ns;

	struct itab strings, frame_tab, stacks, ctxs, threads;
	/* the stack copies' buffer, paged in once and reused every round */
	struct stack_arena arena;

	/* per-round scratch, grown as needed (before the stop) */
	size_t cap;
	pid_t *tids;
	char *states;
	struct stack_snap *snaps;
	struct stack_snap **snapp;
	int *err;
	uint64_t *tps;
	struct dump_tp_share *share;
	struct lay_raw *raws;
	struct stack_frame *frames; /* max_frames + 1 */
	struct lay_ctx *ctx;
	uint8_t *key; /* stack/context keys */
	size_t key_cap;

	/* threads still seized after a round (they did not stop in time,
	 * or exited and are not collected yet): let go as soon as they can */
	struct stop_late late;

	uint64_t rounds, samples, lost_ticks, failed_rounds;
	/* Once per round and thread that did not stop in the round's time
	 * (a late one each round it is still late): each is a sample the
	 * recording lacks, and each skipped round has one at least.  Not
	 * once per thread: a thread late for 300 rounds would count as one
	 * that missed one, and the summary would hide the gap. */
	uint64_t timeouts;
	uint64_t skipped_rounds;
	uint64_t exec_rounds; /* dropped: an exec happened before their end */
	int last_err;         /* of a failed round */
	/* Rounds skipped or failed while the process looked like it was
	 * going away (stop_process_dying()): not counted above if it then
	 * ends (they met its exit), else added to them (fold_dying()). */
	uint64_t dying_skipped, dying_failed;
	int dying_err;
	pid_t fail_tid;  /* whose PTRACE_SEIZE failed (-EPERM) */
	bool eperm_said; /* the hint of stop_diagnose_eperm() was given */
	uint64_t win_sum, win_max;
	int end_reason;
};

static volatile sig_atomic_t rec_signal, rec_signals;

static void
on_signal(int sig)
{
	rec_signal = sig;
	rec_signals++;
}

static uint64_t
now_real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint32_t
intern_string(struct rec *rc, const void *s, size_t n)
{
	bool fresh;
	uint32_t id;

	if (n == 0)
		return 0;
	id = itab_get(&rc->strings, s, n, &fresh);
	if (fresh) {
		pfile_w_begin(&rc->w, PFILE_STRING);
		pfile_w_u(&rc->w, id);
		pfile_w_bytes(&rc->w, s, n);
		pfile_w_end(&rc->w);
	}
	return id;
}

static uint32_t
intern_cstr(struct rec *rc, const char *s)
{
	return intern_string(rc, s, strlen(s));
}

/* A frame is known by its address and its module: an address first seen
 * in no known module (a library mapped since the module list was read)
 * resolves once the list is read again, and a library mapped where
 * another one was gets frames of its own. */
static uint32_t
intern_frame(struct rec *rc, const struct stack_frame *f)
{
	uint8_t key[sizeof(f->ip) + STACK_MODULE_MAX];
	size_t ml = strnlen(f->module, STACK_MODULE_MAX);
	uint32_t id, sym, mod;
	bool fresh;

	memcpy(key, &f->ip, sizeof(f->ip));
	memcpy(key + sizeof(f->ip), f->module, ml);
	id = itab_get(&rc->frame_tab, key, sizeof(f->ip) + ml, &fresh);
	if (!fresh)
		return id;
	sym = intern_cstr(rc, f->symbol);
	mod = intern_cstr(rc, f->module);
	pfile_w_begin(&rc->w, PFILE_FRAME);
	pfile_w_u(&rc->w, id);
	pfile_w_u(&rc->w, f->ip);
	pfile_w_u(&rc->w, sym);
	pfile_w_u(&rc->w, mod);
	pfile_w_u(&rc->w, f->offset);
	pfile_w_u(&rc->w,
		  ((f->flags & STACK_FRAME_SIGNAL) ? PFILE_FRAME_SIGNAL : 0) |
			  ((f->flags & STACK_FRAME_DYNSYM) ? PFILE_FRAME_DYNSYM : 0));
	pfile_w_end(&rc->w);
	return id;
}

static bool
key_reserve(struct rec *rc, size_t n)
{
	uint8_t *nk;

	if (n <= rc->key_cap)
		return true;
	nk = realloc(rc->key, n);
	if (!nk)
		return false;
	rc->key = nk;
	rc->key_cap = n;
	return true;
}

/* A stack is its frames, whether it was cut, and from which frame on it
 * was guessed: a frame is known by its address alone (intern_frame()),
 * and the same address may be reached by unwinding in one stack and by
 * guessing in another. */
static uint32_t
intern_stack(struct rec *rc, size_t n, bool truncated)
{
	uint32_t *ids, flags = truncated ? PFILE_STACK_TRUNCATED : 0, id;
	size_t i, guessed = n;
	bool fresh;

	if (!key_reserve(rc, (n + 2) * sizeof(uint32_t)))
		return 0;
	ids = (uint32_t *)(void *)rc->key;
	for (i = 0; i < n; i++) {
		ids[i + 1] = intern_frame(rc, &rc->frames[i]);
		/* sticky (unwind.c): the first guessed frame says it */
		if (guessed == n && (rc->frames[i].flags & STACK_FRAME_GUESSED))
			guessed = i;
	}
	if (guessed < n)
		flags |= PFILE_STACK_GUESSED;
	ids[0] = flags;
	ids[n + 1] = (uint32_t)guessed;
	id = itab_get(&rc->stacks, ids, (n + 2) * sizeof(uint32_t), &fresh);
	if (fresh) {
		pfile_w_begin(&rc->w, PFILE_STACK);
		pfile_w_u(&rc->w, id);
		pfile_w_u(&rc->w, flags);
		pfile_w_u(&rc->w, n);
		for (i = 0; i < n; i++)
			pfile_w_u(&rc->w, ids[i + 1]);
		if (flags & PFILE_STACK_GUESSED)
			pfile_w_u(&rc->w, guessed);
		pfile_w_end(&rc->w);
	}
	return id;
}

/* Context key and CTX payload (after the id): layout, flags, trace id,
 * span id, trace flags, [transaction id], attribute count, then key and
 * value string ids. */
static uint32_t
intern_ctx(struct rec *rc, const struct lay_ctx *c)
{
	uint8_t *k;
	size_t len = 0, i;
	uint32_t flags = PFILE_CTX_VALID, id;
	bool fresh;

	if (!key_reserve(rc, 64 + (size_t)c->n_attrs * 8))
		return 0;
	if (c->has_trace)
		flags |= PFILE_CTX_TRACE;
	if (c->has_txn)
		flags |= PFILE_CTX_TXN;
	if (c->truncated)
		flags |= PFILE_CTX_TRUNCATED;
	/* the strings first: their definitions precede the context's */
	k = rc->key;
	k[len++] = (uint8_t)c->kind;
	k[len++] = (uint8_t)flags;
	memcpy(k + len, c->trace_id, 16);
	len += 16;
	memcpy(k + len, c->span_id, 8);
	len += 8;
	k[len++] = c->flags;
	if (c->has_txn) {
		memcpy(k + len, c->txn_id, 8);
		len += 8;
	}
	memcpy(k + len, &c->n_attrs, sizeof(uint32_t));
	len += sizeof(uint32_t);
	for (i = 0; i < c->n_attrs; i++) {
		const struct lay_attr *a = &c->attrs[i];
		uint32_t ks, vs;
		char unk[16];

		if (a->key) {
			ks = intern_string(rc, a->key, a->klen);
		} else {
			snprintf(unk, sizeof(unk), "#%u", a->index);
			ks = intern_cstr(rc, unk);
		}
		vs = intern_string(rc, a->val, a->vlen);
		/* intern_string() may have moved nothing: rc->key is ours */
		memcpy(rc->key + len, &ks, 4);
		memcpy(rc->key + len + 4, &vs, 4);
		len += 8;
	}
	id = itab_get(&rc->ctxs, rc->key, len, &fresh);
	if (fresh) {
		const uint8_t *p = rc->key;

		pfile_w_begin(&rc->w, PFILE_CTX);
		pfile_w_u(&rc->w, id);
		pfile_w_u(&rc->w, c->kind);
		pfile_w_u(&rc->w, flags);
		pfile_w_raw(&rc->w, c->trace_id, 16);
		pfile_w_raw(&rc->w, c->span_id, 8);
		pfile_w_u(&rc->w, c->flags);
		if (c->has_txn)
			pfile_w_raw(&rc->w, c->txn_id, 8);
		pfile_w_u(&rc->w, c->n_attrs);
		p += len - (size_t)c->n_attrs * 8;
		for (i = 0; i < c->n_attrs; i++) {
			uint32_t ks, vs;

			memcpy(&ks, p + i * 8, 4);
			memcpy(&vs, p + i * 8 + 4, 4);
			pfile_w_u(&rc->w, ks);
			pfile_w_u(&rc->w, vs);
		}
		pfile_w_end(&rc->w);
	}
	return id;
}

/* THREAD record when a thread is first seen or renamed: its entry keeps
 * the hash of the name last written (renamed back to an earlier name,
 * that is written again, and the report shows the name it has now). */
static void
note_thread(struct rec *rc, pid_t tid, const char *comm)
{
	size_t l = strnlen(comm, 63);
	uint64_t h = hash_bytes(comm, l) | 1; /* never an entry's first 0 */
	bool fresh;
	struct itab_ent *e = itab_ent(&rc->threads, &tid, sizeof(tid), &fresh);

	if (!e || e->val == h)
		return;
	e->val = h;
	pfile_w_begin(&rc->w, PFILE_THREAD);
	pfile_w_u(&rc->w, (uint64_t)tid);
	pfile_w_bytes(&rc->w, comm, l);
	pfile_w_end(&rc->w);
}

static void
load_pctx(struct rec *rc, bool write)
{
	struct pctxr_snapshot snap = {0};
	struct pctx_decoded *pd;
	/* not rc->mem_pid itself: the unwinder rebinds on its own when the
	 * thread it reads through has ended (dump_unwind()) */
	pid_t via = rc->mem_pid;

	rc->pctx_ns = remote_now_ns();
	if (dump_pctx_read(rc->pid, &via, NULL, 0, &snap) < 0)
		return;
	if (rc->has_pctx && snap.published_at_ns == rc->pctx.published_at_ns) {
		pctxr_free(&snap);
		return;
	}
	pd = malloc(sizeof(*pd));
	if (!pd || pctx_decode(snap.payload, snap.payload_len, pd) < 0) {
		free(pd);
		pctxr_free(&snap);
		return;
	}
	if (remote_image_changed(via, &rc->img)) {
		/* read while the target ran: perhaps from the next image,
		 * which must not label this one's samples (a thread read
		 * through that ended since is no exec) */
		rc->exec_pending = true;
		free(pd);
		pctxr_free(&snap);
		return;
	}
	if (rc->has_pctx) {
		pctxr_free(&rc->pctx);
		free(rc->pd);
	}
	rc->pctx = snap;
	rc->pd = pd;
	rc->has_pctx = true;
	if (write) {
		pfile_w_begin(&rc->w, PFILE_PCTX);
		pfile_w_u(&rc->w, snap.published_at_ns);
		pfile_w_bytes(&rc->w, snap.payload, snap.payload_len);
		pfile_w_end(&rc->w);
	}
}

/* A PFILE_LAYOUT record for each present layout the file does not
 * describe yet as it is now (module, TLS model, ABI version, readable):
 * the first ones, and after a rediscovery those that changed, so the
 * file says what the samples after it were read through (a later record
 * of a kind supersedes the earlier one, proffile.h).  Called in a round
 * whose stop resolved the layouts: only then are the model and the
 * readable flag known, and lay_resolve() runs in the first stop after
 * every discovery. */
static void
write_layouts(struct rec *rc)
{
	unsigned k;

	for (k = 0; k < LAY_N; k++) {
		const struct lay_layout *l = &rc->lp.l[k];
		struct rec_layout *wl = &rc->written[k];
		bool usable = (rc->usable & LAY_MASK(k)) != 0;

		if (!l->present)
			continue; /* gone: the file's last word on it stands */
		if (wl->present && wl->usable == usable && wl->model == l->acc.model &&
		    wl->abi_version == l->abi_version &&
		    strcmp(wl->module, l->sym.module) == 0)
			continue;
		wl->present = true;
		wl->usable = usable;
		wl->model = l->acc.model;
		wl->abi_version = l->abi_version;
		snprintf(wl->module, sizeof(wl->module), "%s", l->sym.module);
		pfile_w_begin(&rc->w, PFILE_LAYOUT);
		pfile_w_u(&rc->w, k);
		pfile_w_u(&rc->w, usable ? 1 : 0);
		pfile_w_bytes(&rc->w, lay_symbol((enum lay_kind)k),
			      strlen(lay_symbol((enum lay_kind)k)));
		pfile_w_bytes(&rc->w, l->sym.module, strlen(l->sym.module));
		pfile_w_bytes(&rc->w, tlsm_model_name(l->acc.model),
			      strlen(tlsm_model_name(l->acc.model)));
		pfile_w_u(&rc->w, l->abi_version);
		pfile_w_end(&rc->w);
	}
}

static void
write_resource(struct rec *rc, const char *key, const char *value)
{
	pfile_w_begin(&rc->w, PFILE_RESOURCE);
	pfile_w_bytes(&rc->w, key, strlen(key));
	pfile_w_bytes(&rc->w, value, strlen(value));
	pfile_w_end(&rc->w);
}

/* The target's command name and command line (*cmd malloc'd, or NULL
 * with *len 0): remote_read_cmdline()'s, without trailing empty
 * arguments, as the one-shot dump shows it.  A command line longer than
 * CMDLINE_MAX is cut and ends in PFILE_STRING_CUT, as a reader cuts a
 * long string. */
static void
read_command(struct rec *rc, char comm[64], char **cmd, size_t *len)
{
	const size_t mark = sizeof(PFILE_STRING_CUT) - 1;
	char path[64];
	size_t l;
	FILE *f;

	comm[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)rc->pid);
	f = fopen(path, "re");
	if (f) {
		/* the name (a C string: no NUL) and the kernel's newline; a
		 * name may hold newlines of its own (PR_SET_NAME), as
		 * stop.c read_task_comm_at() reads it */
		l = fread(comm, 1, 63, f);
		if (l && comm[l - 1] == '\n')
			l--;
		comm[l] = '\0';
		fclose(f);
	}
	*cmd = NULL;
	if (remote_read_cmdline(rc->mem_pid, CMDLINE_MAX, cmd, len) < 0) {
		*cmd = NULL;
		*len = 0;
	} else if (*len > CMDLINE_MAX) {
		/* the bytes before the mark end at a character (the mark
		 * stands for the rest, separators included) */
		size_t keep = output_utf8_cut((const uint8_t *)*cmd, *len,
					      CMDLINE_MAX - mark);

		memcpy(*cmd + keep, PFILE_STRING_CUT, mark);
		*len = keep + mark;
	}
}

static void
write_info(struct rec *rc)
{
	char comm[64], *cmd;
	size_t len;

	read_command(rc, comm, &cmd, &len);
	pfile_w_begin(&rc->w, PFILE_INFO);
	pfile_w_u(&rc->w, (uint64_t)rc->pid);
	pfile_w_u(&rc->w, rc->t0_real);
	pfile_w_u(&rc->w, rc->t0_mono);
	pfile_w_u(&rc->w, rc->ctl->rate);
	pfile_w_u(&rc->w, rc->ctl->max_frames);
	pfile_w_u(&rc->w, rc->ctl->stack_size);
	pfile_w_bytes(&rc->w, comm, strlen(comm));
	pfile_w_bytes(&rc->w, cmd ? cmd : "", len);
	pfile_w_bytes(&rc->w, CTXSHIM_VERSION, strlen(CTXSHIM_VERSION));
	pfile_w_end(&rc->w);
	free(cmd);
}

/* Elastic's process storage: the service it names, for a process
 * without a process context. */
static void
write_storage(struct rec *rc)
{
	char svc[129], env[129];

	if (!rc->have_layouts ||
	    lay_elastic_storage(&rc->lp, svc, sizeof(svc), env, sizeof(env)) != 0)
		return;
	if (svc[0])
		write_resource(rc, "service.name", svc);
	if (env[0])
		write_resource(rc, "deployment.environment.name", env);
}

static void rediscover(struct rec *rc, uint64_t now);

/* The target ran execve(): nothing read from the old image (layouts and
 * TLS offsets, maps and ELF files, the unwinder's module list, the
 * process context, frames and stacks by address) describes the new one.
 * Dropped, read again while the target runs, and an EXEC record in the
 * file, after which come the new image's process context, resources,
 * layouts, threads, frames and stacks (proffile.h), so that a report
 * labels the samples of each image with its own service and command.
 * The image id is read first: anything read after it is of that image
 * or of a later one, which the next round's remote_image_same() catches.
 * remote_image_same() also says no when the thread it reads through is gone;
 * the id read again tells: the same bytes at the same place are the same
 * image, and nothing is dropped.  Returns whether it was an exec. */
static bool
image_reload(struct rec *rc)
{
	struct remote_image old = rc->img;
	char comm[64], *cmd;
	size_t len;

	rc->exec_pending = false;
	rc->mem_pid = dump_memory_pid(rc->pid, 0);
	remote_image_load(rc->mem_pid, &rc->img);
	if (old.known && (rc->img.known ? remote_image_equal(&rc->img, &old)
					: stop_process_dying(rc->pid))) {
		/* no exec; or the process is going, as its next stop says */
		rc->img = old;
		return false;
	}
	rc->execs++;
	rc->exec_ns = remote_now_ns();
	stack_unwind_reset();
	/* ids go on: only the tables of what depends on the image */
	itab_clear(&rc->frame_tab);
	itab_clear(&rc->stacks);
	itab_clear(&rc->ctxs);
	itab_clear(&rc->threads);
	memset(rc->written, 0, sizeof(rc->written));
	memset(&rc->lp, 0, sizeof(rc->lp));
	memset(&rc->tidf, 0, sizeof(rc->tidf));
	rc->tidf.looked = true; /* not glibc until rediscover() says */
	rc->have_layouts = false;
	rc->resolved = false;
	if (rc->has_pctx) {
		pctxr_free(&rc->pctx);
		free(rc->pd);
		rc->pd = NULL;
		rc->has_pctx = false;
	}
	rc->pctx_tried_ns = 0;

	read_command(rc, comm, &cmd, &len);
	pfile_w_begin(&rc->w, PFILE_EXEC);
	pfile_w_u(&rc->w, remote_now_ns() - rc->t0_mono);
	pfile_w_bytes(&rc->w, comm, strlen(comm));
	pfile_w_bytes(&rc->w, cmd ? cmd : "", len);
	pfile_w_end(&rc->w);
	free(cmd);

	/* As record_main() refuses one up front: its stacks would be
	 * misread as 64-bit frames (old: "[truncated]" stacks until the
	 * end).  The EXEC record above tells the report where it ended. */
	if (dump_exe_is_elf32(rc->mem_pid)) {
		rc->exec_elf32 = true;
		return true;
	}
	rediscover(rc, remote_now_ns());
	load_pctx(rc, true);
	write_storage(rc);
	return true;
}

static int
reserve(struct rec *rc, size_t n)
{
	size_t i;

	if (n <= rc->cap)
		return 0;
	n += n / 4 + 16;
#define GROW(p)                                             \
	do {                                                \
		void *np_ = realloc((p), n * sizeof(*(p))); \
		if (!np_)                                   \
			return -ENOMEM;                     \
		(p) = np_;                                  \
	} while (0)
	GROW(rc->tids);
	GROW(rc->states);
	GROW(rc->snaps);
	GROW(rc->snapp);
	GROW(rc->err);
	GROW(rc->tps);
	GROW(rc->share);
#undef GROW
	{
		struct lay_raw *nr = realloc(rc->raws, n * LAY_N * sizeof(*nr));

		if (!nr)
			return -ENOMEM;
		rc->raws = nr;
	}
	for (i = 0; i < n; i++)
		rc->snapp[i] = &rc->snaps[i];
	rc->cap = n;
	return 0;
}

static bool
proc_alive(pid_t pid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	return stat(path, &st) == 0;
}

/* The unwinder's module list brought up to date with the target's file
 * mappings (stack_unwind_sync()): before the stop, while the target runs,
 * so that the parsing of a change is done outside the stop, and compared
 * again in it (stack_unwind_stopped()), so that the round is unwound with
 * the libraries the threads ran in, not those of when the list was read
 * (a library dlclose()d and another dlopen()ed at its address would be
 * named as the first).  After the stop it only reads the maps if the
 * comparison in it failed.  One read of the maps before the stop and one
 * in it when nothing changed (20 to 100 us of the stop for a small
 * process).  Not only while the libraries are seen to move: a gate on
 * changes seen between rounds (tried) missed the swaps of the first
 * rounds and of those whose reads before the stop happened to find the
 * same library, which record_library_swapped_loop caught under ASan. */
static void
sync_modules(struct rec *rc, bool after_stop)
{
	int r = dump_unwind_sync(rc->pid, &rc->mem_pid, &rc->img, after_stop);

	rc->lp.pid = rc->mem_pid;
	/* ended by an exec since the round's stop: the next round reloads */
	if (r == -ENOEXEC)
		rc->exec_pending = true;
	/* Frames are interned by address and module path: a library gone
	 * and another loaded from the same path (a plugin rebuilt and
	 * reloaded) must not find the first one's frames. */
	if (r == STACK_SYNC_DROPPED)
		itab_clear(&rc->frame_tab);
}

/* Thread j's snapshot unwound through rc->mem_pid, or another thread
 * if that one exited since the round's detach (dump_unwind()). */
static int
unwind_mem(struct rec *rc, size_t j, size_t *n)
{
	int r = dump_unwind(rc->pid, &rc->mem_pid, &rc->img, &rc->snaps[j], rc->frames,
			    rc->ctl->max_frames + 1, n);

	rc->lp.pid = rc->mem_pid;
	/* ended by an exec since the round's stop: the next round reloads */
	if (r == -ENOEXEC)
		rc->exec_pending = true;
	return r;
}

/* Unwind thread j's snapshot into rc->frames; returns the frame count
 * (0: no stack) and whether it was cut. */
static size_t
unwind_one(struct rec *rc, size_t j, bool *truncated)
{
	size_t n = 0;

	*truncated = false;
	if (rc->err[j] || !rc->snaps[j].regs_valid || rc->exec_pending)
		return 0;
	/* The module list is that of the round (sync_modules()): an address
	 * in no module of it was in none while the threads were stopped. */
	if (unwind_mem(rc, j, &n) < 0)
		return 0;
	if (n > rc->ctl->max_frames) {
		n = rc->ctl->max_frames;
		*truncated = true;
	}
	if (n && (rc->frames[n - 1].flags & STACK_FRAME_TRUNCATED))
		*truncated = true;
	return n;
}

/* Whether to read the process context again for a record that uses a
 * key index its map lacks.  The map is append-only, so it grew: if the
 * context was published since it was read (OTEP-4719: a new timestamp in
 * its 32-byte header, read alone: cheap enough for every such round), at
 * once; once per timestamp, so that a record that uses an index the map
 * never gets does not cost a read of the whole context every round.
 * Without a header to read there (no context yet, the mapping replaced
 * or gone, the header being updated), at most once per REFRESH_NS, as
 * load_pctx() then reads the maps too. */
static bool
pctx_republished(struct rec *rc)
{
	struct otel_process_ctx_header h;
	uint64_t ts;

	if (!rc->has_pctx ||
	    remote_read(rc->mem_pid, rc->pctx.map_addr, &h, sizeof(h)) < 0 ||
	    memcmp(h.signature, PCTX_SIGNATURE, PCTX_SIGNATURE_LEN) != 0 ||
	    h.version != PCTX_VERSION || h.monotonic_published_at_ns == 0)
		return remote_now_ns() - rc->pctx_ns > REFRESH_NS;
	ts = h.monotonic_published_at_ns;
	if (ts == rc->pctx.published_at_ns || ts == rc->pctx_tried_ns)
		return false;
	rc->pctx_tried_ns = ts;
	return true;
}

/* After detaching: stacks, contexts and the records of one round. */
static void
write_round(struct rec *rc, const struct stop_set *ss, size_t k, uint64_t t)
{
	uint32_t ctx_ids[LAY_N];
	size_t j, si = 0;

	/* The key map is append-only: an index it does not have means it
	 * grew (OTEP-4947: refresh it before going on), so read it again
	 * before this round's contexts are written with it. */
	for (j = 0; j < k; j++)
		if (lay_otel_unknown_keys(&rc->raws[j * LAY_N + LAY_OTEL], rc->pd)) {
			if (pctx_republished(rc))
				load_pctx(rc, true);
			break;
		}
	pfile_w_begin(&rc->w, PFILE_ROUND);
	pfile_w_u(&rc->w, t - rc->t0_mono);
	pfile_w_u(&rc->w, stop_window_ns(ss));
	pfile_w_u(&rc->w, k);
	pfile_w_end(&rc->w);
	for (j = 0; j < k; j++) {
		const struct stop_thread *st;
		size_t n, kk, nc = 0;
		bool trunc;
		uint32_t stack = 0;

		/* the stop_thread of rc->tids[j] (same order, skipping the
		 * ones that were not stopped) */
		while (si < ss->n && ss->t[si].tid != rc->tids[j])
			si++;
		st = si < ss->n ? &ss->t[si] : NULL;
		if (st)
			note_thread(rc, st->tid, st->comm);
		n = unwind_one(rc, j, &trunc);
		if (n)
			stack = intern_stack(rc, n, trunc);
		for (kk = 0; kk < LAY_N; kk++) {
			struct lay_ctx *c = rc->ctx;

			if (lay_decode((enum lay_kind)kk, &rc->raws[j * LAY_N + kk],
				       rc->pd, c) < 0 ||
			    !c->valid)
				continue;
			ctx_ids[nc] = intern_ctx(rc, c);
			if (ctx_ids[nc])
				nc++;
		}
		pfile_w_begin(&rc->w, PFILE_SAMPLE);
		pfile_w_u(&rc->w, (uint64_t)rc->tids[j]);
		pfile_w_u(&rc->w, (uint8_t)rc->states[j]);
		pfile_w_u(&rc->w, stack);
		pfile_w_u(&rc->w, nc);
		for (kk = 0; kk < nc; kk++)
			pfile_w_u(&rc->w, ctx_ids[kk]);
		pfile_w_end(&rc->w);
		rc->samples++;
	}
}

/* Whether pid is gone or its leader is a zombie (with no thread left
 * that could be stopped). */
static bool
process_ending(pid_t pid)
{
	char comm[64], state = '?';

	if (stop_read_task_stat(pid, pid, comm, sizeof(comm), &state) < 0)
		return true;
	return state == 'Z' || state == 'X';
}

/* With no thread of ss stopped in time: how many were seized and did
 * not stop in time, yet have not ended -- still seized (STOP_TIMEOUT),
 * or stopped since and let go (STOP_DETACHED).  Any means the process
 * lives: its one thread in vfork() or another wait a stop cannot
 * interrupt, or threads a loaded machine did not run within the limit. */
static size_t
missed_stops(const struct stop_set *ss)
{
	size_t i, n = 0;

	for (i = 0; i < ss->n; i++)
		n += ss->t[i].status == STOP_TIMEOUT ||
		     ss->t[i].status == STOP_DETACHED;
	return n;
}

/* Where the threads' stacks end at the latest, as a thread-pointer
 * offset (stack_snap_capture_many()): the lowest static TLS block of the
 * layouts resolved so far (a module's static block does not move while
 * its image runs; an exec resets the layouts), or 0. */
static int64_t
tls_floor(const struct rec *rc)
{
	int64_t floor = 0;
	unsigned k;

	for (k = 0; rc->have_layouts && k < LAY_N; k++) {
		const struct lay_layout *l = &rc->lp.l[k];
		int64_t off;

		if (!l->present || !(rc->usable & LAY_MASK(k)))
			continue;
		off = tlsm_static_block_tpoff(&l->acc, l->sym.st_value);
		if (off < floor)
			floor = off;
	}
	return floor;
}

/* What dump_tp_owners() needs of the objects, taken while they are
 * loaded: a raw clone() may start a thread at any time. */
static void
learn_tid_field(struct rec *rc, struct etls_proc *ep)
{
	rc->tidf.looked = true;
	rc->tidf.ok = etls_glibc_tid_off(ep, &rc->tidf.off) == 0;
}

/* The layouts afresh, while the target runs: the mappings and objects
 * are read again (some 0.1 to 0.5 ms), only when the last round saw a
 * writer's slots change or, with no layout, once per REFRESH_NS. */
static void
rediscover(struct rec *rc, uint64_t now)
{
	struct lay_proc *lp = malloc(sizeof(*lp));
	struct etls_proc *ep = NULL;
	int r;

	if (!lp)
		return; /* tried again next round */
	rc->rediscover = false;
	rc->discover_ns = now;
	r = dump_proc_load(rc->pid, &rc->mem_pid, &ep);
	if (r == 0) {
		/* the layouts' names too, before glibc's first pass over the
		 * objects (etls_proc_want()) */
		lay_want(ep, LAY_MASK_ALL);
		learn_tid_field(rc, ep);
		r = lay_find_in(ep, rc->mem_pid, LAY_MASK_ALL, lp);
		etls_proc_free(ep);
	}
	if (r == 0) {
		rc->lp = *lp;
		rc->have_layouts = true;
	} else if (r == -ENOENT) {
		/* the writer is gone: no context until one comes back */
		memset(&rc->lp, 0, sizeof(rc->lp));
		rc->have_layouts = false;
	}
	/* other errors (the process is going): the next stop says */
	rc->lp.pid = rc->mem_pid;
	/* resolved (and the slots marked) in the next stop */
	rc->usable = 0;
	rc->resolve_ns = 0;
	free(lp);
}

/* A round in which every thread went away, or none stopped: whether it
 * met an exec (a process that lives on with another image), which the
 * next round then reloads (image_reload()); the round is one dropped at
 * an exec. */
static bool
round_met_exec(struct rec *rc, const struct stop_set *ss, bool all_gone)
{
	if (!stop_ran_exec(rc->pid, &rc->img, ss->exec_seen, all_gone, STOP_TIMEOUT_MS))
		return false;
	rc->exec_pending = true;
	rc->exec_rounds++;
	return true;
}

/* One sampling round.  Returns 0, or a negative errno: -ESRCH (the
 * process is gone), -EPERM (cannot attach), others. */
static int
sample_round(struct rec *rc)
{
	struct stop_set ss;
	size_t i, k = 0;
	uint64_t t, win;
	long hint = stop_count_threads(rc->pid);
	bool exec;
	int r;

	/* room for the threads before they are stopped */
	if (reserve(rc, hint > 0 ? (size_t)hint : 64) < 0)
		return -ENOMEM;
	/* the first round's stack copies, paged in outside the window (later
	 * rounds reuse the pages the last one used) */
	if (!rc->arena.base)
		(void)stack_arena_reserve(&rc->arena, ((size_t)(hint > 0 ? hint : 64) +
						       16) * STACK_ARENA_GUESS);
	if (rc->exec_pending) {
		image_reload(rc);
		if (rc->exec_elf32)
			return 0;
	}
	t = remote_now_ns();
	if (rc->rediscover ||
	    (!rc->have_layouts && (t - rc->discover_ns > REFRESH_NS ||
				   (rc->execs && t - rc->exec_ns < REFRESH_NS))))
		rediscover(rc, t);
	/* A process context published after the recording started (or
	 * after an exec): looked for while the target runs, every round
	 * for REFRESH_NS after an exec, else once per REFRESH_NS as the
	 * maps are read (as the layouts are).  Not only when a record uses
	 * a key index (write_round()): a writer may publish records without
	 * attributes, or none, and the resource names the service. */
	if (!rc->has_pctx && ((rc->execs && t - rc->exec_ns < REFRESH_NS) ||
			      t - rc->pctx_ns > REFRESH_NS))
		load_pctx(rc, true);
	/* last before the stop: the less time between, the fewer frames a
	 * change in between leaves unnamed */
	sync_modules(rc, false);
	dump_test_sync_pause();

	/* ---- threads stopped from here ---- */
	stop_init(&ss, rc->pid);
	/* a thread still seized from an earlier round is taken into this
	 * one as it is (stop_all()), also one that ran execve() since: sampled
	 * if its stop comes in time */
	r = stop_all(&ss, 0, STOP_TIMEOUT_MS, CPU_WAIT_MS, &rc->late);
	if (r == -ETIMEDOUT) {
		/* nothing stopped in time, but the process lives: skip the
		 * round */
		rc->timeouts += missed_stops(&ss);
		r = -EAGAIN;
	}
	if (r < 0) {
		if (ss.signal) {
			/* Our own end, not stop.c's default action; taken
			 * by sigtimedwait(), so on_signal() did not count it */
			rec_signal = ss.signal;
			rec_signals++;
			ss.signal = 0;
		}
		stop_release(&ss);
		(void)stop_late_add(&rc->late, &ss); /* else released at exit */
		if (r == -EPERM)
			rc->fail_tid = ss.fail_tid;
		if ((r == -ESRCH || r == -EAGAIN) &&
		    round_met_exec(rc, &ss, r == -ESRCH))
			r = 0;
		stop_free(&ss);
		return r == -EINTR ? 0 : r;
	}
	t = remote_now_ns();
	if (reserve(rc, ss.n) < 0) {
		stop_release(&ss);
		(void)stop_late_add(&rc->late, &ss); /* as below */
		stop_free(&ss);
		return -ENOMEM;
	}
	for (i = 0; i < ss.n; i++) {
		if (ss.t[i].status == STOP_TIMEOUT)
			rc->timeouts++;
		if (ss.t[i].status != STOP_STOPPED)
			continue;
		rc->tids[k] = ss.t[i].tid;
		rc->states[k] = ss.t[i].group_stop ? 'T' : ss.t[i].state;
		k++;
	}
	/* sticky: the unwinder caches its module list per pid */
	rc->mem_pid = dump_stopped_reader(rc->pid, rc->mem_pid, &ss);
	rc->lp.pid = rc->mem_pid;
	stack_snap_capture_many(rc->mem_pid, rc->tids, k, rc->ctl->stack_size,
				tls_floor(rc), rc->snapp, rc->err, &rc->arena);
	/* the module list the stacks ran in (sync_modules()) */
	if (k)
		(void)stack_unwind_stopped(rc->mem_pid);
	/* each thread's state where the stop found it (stop_state()) */
	for (i = 0; i < k; i++)
		rc->states[i] =
			stop_state(rc->states[i], rc->states[i] == 'T',
				   !rc->err[i] && rc->snaps[i].regs_valid
					   ? remote_regs_blocked(&rc->snaps[i].regs)
					   : -1);
	if (rc->have_layouts && lay_slots_changed(&rc->lp)) {
		/* The loader rewrote a slot (or unmapped it) since it was
		 * resolved: the writer library was dlclose()d, perhaps
		 * dlopen()ed again at another TLS place.  Nothing read
		 * through the old resolution can be trusted: no context this
		 * round, the layouts found again before the next. */
		rc->usable = 0;
		rc->rediscover = true;
	} else if (rc->have_layouts && rc->usable != rc->lp.mask &&
		   (!rc->resolve_ns || t - rc->resolve_ns > REFRESH_NS)) {
		/* the slots are process-global: read them while nothing runs */
		rc->usable = lay_resolve(&rc->lp);
		lay_slots_mark(&rc->lp);
		rc->resolve_ns = t;
		rc->resolved = true;
	}
	for (i = 0; i < k; i++)
		rc->tps[i] = !rc->err[i] && rc->snaps[i].regs_valid
#if defined(__x86_64__)
				     ? rc->snaps[i].regs.fs_base
#else
				     ? 0
#endif
				     : 0;
	lay_read(&rc->lp, rc->usable, rc->tps, k, rc->raws);
	/* Last, after everything was read: an exec before this point (since
	 * the last round, or by a thread that did not stop, during this
	 * one) shows, and all of this round may be of either image, read
	 * through the old one's offsets: none of it is kept.  An exec after
	 * this point is the next round's. */
	exec = k && !remote_image_same(rc->mem_pid, &rc->img);
	stop_detach_all(&ss);
	/* ---- threads running again ---- */
	if (ss.signal) {
		rec_signal = ss.signal;
		rec_signals++; /* as above */
		ss.signal = 0;
	}
	stop_release(&ss);
	(void)stop_late_add(&rc->late, &ss);

	if (!k && (missed_stops(&ss) || process_ending(rc->pid))) {
		/* none stopped in time, the leader a zombie: the process is
		 * exiting, unless a thread missed the limit (as above) or
		 * the process ran execve() */
		r = missed_stops(&ss) ? -EAGAIN : -ESRCH;
		if (round_met_exec(rc, &ss, r == -ESRCH))
			r = 0;
		stack_arena_recycle(&rc->arena);
		stop_free(&ss);
		return r;
	}
	if (exec) {
		stack_arena_recycle(&rc->arena);
		stop_free(&ss);
		if (!image_reload(rc))
			return -EAGAIN; /* no exec after all: a skipped round */
		rc->exec_rounds++;
		return 0;
	}
	dump_test_sync_pause();
	sync_modules(rc, true);
	/* Threads on one thread pointer (a raw clone() without
	 * CLONE_SETTLS): what was read through it is its owner's TLS, not
	 * the others' (as the dump shows them, shared_tps()). */
	if (rc->usable && dump_tp_owners(rc->pid, rc->mem_pid, &rc->tidf, rc->tids,
					 rc->tps, k, rc->share) > 0)
		for (i = 0; i < k; i++) {
			size_t kk;

			if (rc->share[i].owner)
				for (kk = 0; kk < LAY_N; kk++)
					rc->raws[i * LAY_N + kk].state = LAY_ABSENT;
		}
	win = stop_window_ns(&ss);
	rc->win_sum += win;
	if (win > rc->win_max)
		rc->win_max = win;
	rc->rounds++;
	if (rc->resolved) {
		/* before the samples read through them */
		write_layouts(rc);
		rc->resolved = false;
	}
	write_round(rc, &ss, k, t);
	/* the next round copies into the same pages (grown if it had to) */
	stack_arena_recycle(&rc->arena);
	stop_free(&ss);
	if (fflush(rc->out) != 0 && !rc->w.err)
		rc->w.err = -(rc->out_err ? rc->out_err : errno ? errno : EIO);
	return 0;
}

static void
write_end(struct rec *rc)
{
	pfile_w_begin(&rc->w, PFILE_END);
	pfile_w_u(&rc->w, remote_now_ns() - rc->t0_mono);
	pfile_w_u(&rc->w, (uint64_t)rc->end_reason);
	pfile_w_u(&rc->w, rc->rounds);
	pfile_w_u(&rc->w, rc->samples);
	pfile_w_u(&rc->w, rc->lost_ticks);
	pfile_w_u(&rc->w, rc->win_sum);
	pfile_w_u(&rc->w, rc->win_max);
	pfile_w_end(&rc->w);
}

static void
rec_free(struct rec *rc)
{
	stack_arena_free(&rc->arena);
	itab_clear(&rc->strings);
	itab_clear(&rc->frame_tab);
	itab_clear(&rc->stacks);
	itab_clear(&rc->ctxs);
	itab_clear(&rc->threads);
	free(rc->tids);
	free(rc->states);
	free(rc->snaps);
	free(rc->snapp);
	free(rc->err);
	free(rc->tps);
	free(rc->share);
	free(rc->raws);
	free(rc->frames);
	free(rc->ctx);
	free(rc->key);
	stop_late_free(&rc->late);
	if (rc->out)
		fclose(rc->out); /* an error path: nothing more to say */
	if (rc->out_own)
		close(rc->out_fd);
	if (rc->tmp_path) {
		/* nothing recorded: FILE stays as it was */
		stop_stuck_unlink(NULL);
		(void)unlink(rc->tmp_path);
		free(rc->tmp_path);
		free(rc->final_path);
	}
	if (rc->has_pctx)
		pctxr_free(&rc->pctx);
	free(rc->pd);
	pfile_w_close(&rc->w);
}

/* ---- the output ---- */

/* Wait until the output takes more: poll(), but the termination signals
 * are let in only inside the wait (ppoll()), so one that arrives after
 * the look at rec_signal still ends the wait and the grace applies.
 * Returns poll()'s count, -EINTR, -ETIMEDOUT once the grace is over (or
 * on a second signal), or another negative errno. */
static int
out_wait(struct rec *rc)
{
	struct pollfd pfd = {.fd = rc->out_fd, .events = POLLOUT};
	struct timespec ts, *tsp = NULL;
	sigset_t term, old;
	int timeout, pr;

	/* also lets the job-control stops through once no thread is held
	 * (Ctrl-Z while the output waits) */
	stop_late_release(&rc->late, 0);
	timeout = stop_late_busy(&rc->late) ? 10 : -1;

	sigemptyset(&term);
	sigaddset(&term, SIGINT);
	sigaddset(&term, SIGTERM);
	sigaddset(&term, SIGHUP);
	sigaddset(&term, SIGQUIT);
	sigprocmask(SIG_BLOCK, &term, &old);
	if (rec_signal) {
		uint64_t now = remote_now_ns(), ms;

		if (!rc->grace_end)
			rc->grace_end = now + SIGNAL_GRACE_NS;
		if (now >= rc->grace_end || rec_signals > 1) {
			sigprocmask(SIG_SETMASK, &old, NULL);
			return -ETIMEDOUT;
		}
		ms = (rc->grace_end - now) / 1000000u + 1;
		if (timeout < 0 || ms < (uint64_t)timeout)
			timeout = (int)ms;
	}
	if (timeout >= 0) {
		ts.tv_sec = timeout / 1000;
		ts.tv_nsec = (long)(timeout % 1000) * 1000000;
		tsp = &ts;
	}
	pr = ppoll(&pfd, 1, tsp, &old);
	if (pr < 0)
		pr = -errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	return pr;
}

/* The stream's write function.  A thread that missed a round's deadline
 * is still seized with its stop pending (rc->late); SIGCHLD lets it go
 * the moment it stops (stop_late_add()), and the waits below look too.
 * A pipe or socket is written in PIPE_BUF pieces once poll() says it
 * takes more, so a reader that stops reading (a pager, a slow ssh) never
 * blocks us inside write() for good: a termination signal still ends the
 * recording, with SIGNAL_GRACE_NS for the rest to go out.  The descriptor
 * may be shared (standard output): it is not made non-blocking.  Only
 * bytes that write() took are counted. */
static ssize_t
out_write(void *cookie, const char *buf, size_t n)
{
	struct rec *rc = cookie;
	size_t done = 0;

	while (done < n && !rc->out_err) {
		size_t len = n - done;
		ssize_t w;

		if (!rc->out_regular) {
			int pr = out_wait(rc);

			if (pr < 0 && pr != -EINTR) {
				rc->out_err = -pr;
				break;
			}
			if (pr <= 0)
				continue;
			if (len > PIPE_BUF)
				len = PIPE_BUF;
		}
		w = write(rc->out_fd, buf + done, len);
		if (w < 0) {
			if (errno != EINTR && errno != EAGAIN)
				rc->out_err = errno;
			continue;
		}
		done += (size_t)w;
		rc->out_bytes += (uint64_t)w;
	}
	if (done < n)
		errno = rc->out_err ? rc->out_err : EIO;
	return (ssize_t)done;
}

/* The temporary file next to path: ".NAME.PID.N.tmp" in its directory. */
static int
open_temp(const char *path, char **tmp_out)
{
	const char *slash = strrchr(path, '/');
	int dl = slash ? (int)(slash - path + 1) : 0;
	size_t cap = strlen(path) + 48;
	char *tmp = malloc(cap);
	unsigned i;
	int fd = -1;

	if (!tmp)
		return -ENOMEM;
	for (i = 0; i < 100; i++) {
		snprintf(tmp, cap, "%.*s.%s.%d.%u.tmp", dl, path, path + dl,
			 (int)getpid(), i);
		/* as fopen(): 0666 less the umask */
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd >= 0 || errno != EEXIST)
			break;
	}
	if (fd < 0) {
		int e = errno;

		free(tmp);
		return -e;
	}
	*tmp_out = tmp;
	return fd;
}

/* Whether an existing FILE must be written in place rather than replaced
 * by a new file: a new one would be ours, with no ACL, and no other name
 * would lead to it (root writing ~user/rec.prof must leave it the user's).
 * tmp: what the temporary file got (its group may come from a set-group-ID
 * directory). */
static bool
keep_inode(const char *path, const struct stat *st, const struct stat *tmp)
{
	if (st->st_nlink > 1 || st->st_uid != tmp->st_uid || st->st_gid != tmp->st_gid)
		return true;
	/* an ACL beyond the mode bits; other attributes are the file
	 * system's (a security label is set anew on the new file) */
	return getxattr(path, "system.posix_acl_access", NULL, 0) > 0;
}

/* -o FILE goes to a temporary file in FILE's directory, renamed over FILE
 * once a round is recorded (commit_output()), or at the end of a
 * recording that did not fail: a recording that fails (the target is
 * traced already, or gone) leaves an earlier FILE as it was.  A symbolic
 * link keeps pointing to the new file.  Written directly (truncated at
 * once, as before): a FILE that is not a regular file (a FIFO,
 * /dev/null), FILE in a directory we cannot create files in, and a FILE
 * whose owner, group, ACL or other names a new file would not keep
 * (keep_inode()).  Returns 0 or a negative errno. */
static int
open_output(struct rec *rc)
{
	const char *path = rc->ctl->output;
	struct stat st, lst;
	bool exists;
	int fd = -1;

	if (strcmp(path, "-") == 0) {
		rc->out_fd = STDOUT_FILENO;
	} else {
		exists = stat(path, &st) == 0;
		if (exists && S_ISREG(st.st_mode)) {
			/* the permission fopen() would need */
			fd = open(path, O_WRONLY | O_CLOEXEC);
			if (fd < 0)
				return -errno;
			close(fd);
			fd = -1;
			rc->final_path = realpath(path, NULL);
		} else if (!exists && lstat(path, &lst) != 0) {
			rc->final_path = strdup(path);
		}
		if (rc->final_path) {
			struct stat tst;

			fd = open_temp(rc->final_path, &rc->tmp_path);
			if (fd >= 0 && exists &&
			    (fstat(fd, &tst) != 0 || keep_inode(path, &st, &tst))) {
				close(fd);
				(void)unlink(rc->tmp_path);
				free(rc->tmp_path);
				rc->tmp_path = NULL;
				fd = -1;
			}
			if (fd >= 0 && exists)
				(void)fchmod(fd, st.st_mode & 0777);
			if (fd >= 0)
				stop_stuck_unlink(rc->tmp_path);
			rc->final_existed = exists;
			if (fd < 0) {
				free(rc->final_path);
				rc->final_path = NULL;
			}
		}
		if (fd < 0)
			fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
		if (fd < 0)
			return -errno;
		rc->out_fd = fd;
		rc->out_own = true;
	}
	if (fstat(rc->out_fd, &st) == 0 && S_ISREG(st.st_mode))
		rc->out_regular = true;
	rc->out = fopencookie(rc, "w", (cookie_io_functions_t){.write = out_write});
	if (!rc->out)
		return -ENOMEM;
	setvbuf(rc->out, NULL, _IOFBF, 1u << 18);
	return 0;
}

/* Copy what the temporary file holds into fd, from its start. */
static int
copy_temp(const char *tmp, int fd)
{
	char buf[65536];
	int in = open(tmp, O_RDONLY | O_CLOEXEC), e = 0;
	ssize_t r;

	if (in < 0)
		return -errno;
	while ((r = read(in, buf, sizeof(buf))) != 0) {
		size_t off = 0;

		if (r < 0) {
			if (errno == EINTR)
				continue;
			e = -errno;
			break;
		}
		while (off < (size_t)r) {
			ssize_t w = write(fd, buf + off, (size_t)r - off);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				e = w < 0 ? -errno : -EIO;
				break;
			}
			off += (size_t)w;
		}
		if (e)
			break;
	}
	close(in);
	return e;
}

/* The temporary file becomes FILE.  rename() can fail where open_output()
 * could not tell: FILE is a mount point (a file bind-mounted into a
 * container: EBUSY), or a security module forbids it.  FILE is then written in place: what the temporary file holds is copied
 * into it, and the rest of the recording goes there too.  The temporary
 * file is gone either way.  Returns 0, or a negative errno (rename()'s)
 * when FILE could not be written at all; *in_place_err then says why not
 * in place. */
static int
commit_output(struct rec *rc, int *in_place_err)
{
	int e, fd, r;

	*in_place_err = 0;
	if (!rc->tmp_path)
		return 0;
	if (rc->out && fflush(rc->out) != 0 && !rc->w.err)
		rc->w.err = -(rc->out_err ? rc->out_err : errno ? errno : EIO);
	if (rename(rc->tmp_path, rc->final_path) == 0) {
		e = 0;
		goto done;
	}
	e = -errno;
	fd = open(rc->final_path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	r = fd < 0 ? -errno : copy_temp(rc->tmp_path, fd);
	if (r == 0 && rc->out_own) {
		/* the stream goes on there, where the copy ended */
		close(rc->out_fd);
		rc->out_fd = fd;
		fd = -1;
	}
	if (fd >= 0 && close(fd) != 0 && r == 0)
		r = -errno;
	if (r == 0)
		e = 0;
	*in_place_err = r;
done:
	stop_stuck_unlink(NULL);
	(void)unlink(rc->tmp_path);
	free(rc->tmp_path);
	free(rc->final_path);
	rc->tmp_path = rc->final_path = NULL;
	return e;
}

static void
warn_commit_error(const char *outname, int e, int in_place_err)
{
	cli_warn("cannot replace %s: %s; nor write it in place: %s", outname,
		 strerror(-e), strerror(-in_place_err));
}

/* Flush, and close what we opened; the first error into rc->w.err. */
static void
close_output(struct rec *rc)
{
	if (rc->out && fflush(rc->out) != 0 && !rc->w.err)
		rc->w.err = -(rc->out_err ? rc->out_err : errno ? errno : EIO);
	if (rc->out)
		fclose(rc->out);
	rc->out = NULL;
	if (rc->out_own && close(rc->out_fd) != 0 && !rc->w.err)
		rc->w.err = -errno;
	rc->out_own = false;
}

static void
warn_write_error(const struct rec *rc, const char *outname)
{
	if (rc->w.err == -ETIMEDOUT && rc->out_err == ETIMEDOUT)
		cli_warn("%s did not take the rest of the recording within %u s of "
			 "the signal: the recording is incomplete",
			 outname, (unsigned)(SIGNAL_GRACE_NS / 1000000000u));
	else
		cli_warn("write error on %s: %s", outname, strerror(-rc->w.err));
}

/* Whether the layouts could not be looked for because ctxdump may not
 * open the objects of the process (s: as etls_proc_find() left it when it
 * found no definition).  They are opened through /proc/PID/root, which
 * the ptrace access check guards: most often the attach is denied too. */
static bool
objects_denied(const struct etls_symbol *s)
{
	return s->n_unopenable &&
	       (s->unopenable_err == -EACCES || s->unopenable_err == -EPERM);
}

/* The end of both warnings below: the first object that could not be
 * opened (the target's path, escaped), why, and how the recording goes
 * on. */
static void
warn_first_unopenable(const struct etls_symbol *s, const char *recording)
{
	output_text_escape(stderr, (const uint8_t *)s->unopenable,
			   strlen(s->unopenable), false);
	fprintf(stderr, "%s: %s; recording stacks %s\n",
		s->unopenable_deleted ? " (deleted)" : "",
		output_open_error(s->unopenable_err), recording);
}

/* What failed, first, then the hint of a failed attach, as the dump says
 * it (dump_process() in ctxdump.c): not "defines none", which ctxdump
 * could not tell. */
static void
warn_objects_denied(struct rec *rc, const struct etls_symbol *s)
{
	fprintf(stderr,
		"%s: cannot look for " OTEL_THREAD_CTX_SYMBOL ", " LAY_ELASTIC_SYMBOL
		", " LAY_CL_SYMBOL " in process %d: %u of its %u object%s could not "
		"be opened, the first ",
		cli_name(), (int)rc->pid, s->n_unopenable, s->n_objects,
		CLI_PL(s->n_objects));
	warn_first_unopenable(s, "without trace context");
	stop_diagnose_eperm(rc->pid, rc->pid);
	rc->eperm_said = true;
}

/* Some objects could not be opened, for another reason than a denied
 * access (a library replaced on disk, without the capability
 * /proc/PID/map_files needs), and none of the others defines
 * otel_thread_ctx_v1: it may be in those, so not "defines none" (as the
 * dump says it, dump_process() in ctxdump.c).  Said even with -q: the
 * recording lacks what it was asked for. */
static void
warn_objects_unopenable(struct rec *rc, const struct etls_symbol *s)
{
	if (rc->have_layouts)
		fprintf(stderr,
			"%s: cannot tell whether process %d "
			"defines " OTEL_THREAD_CTX_SYMBOL
			": %u of its %u object%s could not be opened, the first ",
			cli_name(), (int)rc->pid, s->n_unopenable, s->n_objects,
			CLI_PL(s->n_objects));
	else
		fprintf(stderr,
			"%s: none of the objects of process %d that ctxdump could "
			"open defines " OTEL_THREAD_CTX_SYMBOL ", " LAY_ELASTIC_SYMBOL
			", " LAY_CL_SYMBOL "; %u of its %u could not be opened, the "
			"first ",
			cli_name(), (int)rc->pid, s->n_unopenable, s->n_objects);
	warn_first_unopenable(s, rc->have_layouts ? "with the other layouts"
						  : "without trace context");
}

/* ---- command line ---- */

static void usage(void) __attribute__((noreturn));

static void
usage(void)
{
	fputs("\nUsage:\n"
	      " ctxdump record [options] <pid>\n"
	      "\n"
	      "Sample the native stacks of every thread of a running process (wall\n"
	      "clock), each sample labelled with the thread's trace context, into a\n"
	      "file for 'ctxdump report'.  Ends with Ctrl-C (or SIGTERM, SIGHUP,\n"
	      "SIGQUIT), --duration or the process's exit; the process keeps running.\n"
	      "\n"
	      "Options:\n"
	      " -p, --pid <pid>           the process (instead of <pid>)\n"
	      " -F, --rate <hz>           rounds per second (default 100, at most "
	      "1000)\n"
	      " -d, --duration <seconds>  stop after this time (default: until "
	      "interrupted)\n"
	      " -o, --output <file>       where to write (default ctxdump.prof; - for\n"
	      "                             standard output)\n"
	      " -n, --max-frames <n>      at most <n> frames per stack (default 128,\n"
	      "                             at most 1024; 0 for that most)\n"
	      "     --stack-size <bytes>  stack bytes copied per thread (default 64K)\n"
	      "     --no-demangle         keep C++ function names mangled\n"
	      " -q, --quiet               no summary at the end\n"
	      "\n"
	      " -h, --help                display this help\n"
	      " -V, --version             display version\n"
	      "\n"
	      "Exit status:\n"
	      " 0   recorded without a gap\n"
	      " 1   partial: some rounds failed or were skipped (the recording has\n"
	      "       a gap there; the summary counts them)\n"
	      " 2   fatal: no such process, cannot attach, or nothing could be\n"
	      "       recorded or written (a process without a known layout is\n"
	      "       recorded without trace context)\n"
	      " 64  usage error\n"
	      "\n"
	      "For more details see ctxdump(1).\n",
	      stdout);
	cli_exit_printed();
}

/* --duration: seconds as a plain decimal number, with an optional
 * fraction ("30", "0.5"), above 0 and at most 1e7.  Not all that strtod()
 * takes: "0x10" would be 16 s, "1e3" 1000 s, and "inf" or " 5" no number
 * a user means; the other numbers of the command line are decimal
 * integers (cli_parse_num()). */
static double
parse_duration(const char *s)
{
	size_t whole = strspn(s, "0123456789"), frac = 0, len = whole;
	double v;

	if (s[whole] == '.') {
		frac = strspn(s + whole + 1, "0123456789");
		len += 1 + frac;
	}
	if (whole + frac == 0 || s[len] != '\0')
		cli_usage_err("invalid duration: '%s'", s);
	v = strtod(s, NULL);
	if (!(v > 0) || v > 1e7)
		cli_usage_err("invalid duration: '%s'", s);
	return v;
}

static void
parse_args(struct rec_ctl *ctl, int argc, char **argv)
{
	enum { OPT_STACK_SIZE = CHAR_MAX + 1, OPT_NO_DEMANGLE };
	static const struct option longopts[] = {
		{"pid", required_argument, NULL, 'p'},
		{"rate", required_argument, NULL, 'F'},
		{"duration", required_argument, NULL, 'd'},
		{"output", required_argument, NULL, 'o'},
		{"max-frames", required_argument, NULL, 'n'},
		{"stack-size", required_argument, NULL, OPT_STACK_SIZE},
		{"no-demangle", no_argument, NULL, OPT_NO_DEMANGLE},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	const char *pid = NULL;
	int c;

	ctl->rate = DEFAULT_RATE;
	ctl->output = "ctxdump.prof";
	ctl->max_frames = DEFAULT_MAX_FRAMES;
	ctl->stack_size = DEFAULT_STACK_SIZE;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":p:F:d:o:n:qhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			pid = optarg;
			break;
		case 'F':
			ctl->rate =
				(unsigned)cli_parse_num(optarg, "rate", 1, MAX_RATE);
			break;
		case 'd':
			ctl->duration = parse_duration(optarg);
			break;
		case 'o':
			if (!*optarg)
				cli_usage_err("empty output file name");
			ctl->output = optarg;
			break;
		case 'n':
			/* 0 is the most, as for a dump (old: a usage error) */
			ctl->max_frames = (size_t)cli_parse_num(optarg, "frame count",
								0, MAX_FRAMES);
			if (!ctl->max_frames)
				ctl->max_frames = MAX_FRAMES;
			break;
		case OPT_STACK_SIZE:
			ctl->stack_size = cli_parse_stack_size(optarg);
			break;
		case OPT_NO_DEMANGLE:
			stack_unwind_set_demangle(false);
			break;
		case 'q':
			ctl->quiet = true;
			break;
		case 'h':
			usage();
		case 'V':
			cli_version();
		default:
			cli_option_error(c, argv, longopts, false);
		}
	}
	ctl->pid = (pid_t)cli_parse_num(cli_pid_operand(argc, argv, pid), "process id",
					1, INT_MAX);
}

static void
install_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal; /* no SA_RESTART: end the sleep */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGQUIT, &sa, NULL);
	/* and they must reach us: a blocked mask is inherited through exec */
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGINT);
	sigaddset(&sa.sa_mask, SIGTERM);
	sigaddset(&sa.sa_mask, SIGHUP);
	sigaddset(&sa.sa_mask, SIGQUIT);
	sigprocmask(SIG_UNBLOCK, &sa.sa_mask, NULL);
	/* the stops are waited for with SIGCHLD (stop.c) */
	signal(SIGCHLD, SIG_DFL);
	signal(SIGPIPE, SIG_IGN);
}

/* Sleep until the monotonic time t (or a termination signal; SIGCHLD,
 * which lets late threads go (stop_late_add()), sleeps on). */
static void
sleep_until(uint64_t t)
{
	struct timespec ts = {.tv_sec = (time_t)(t / 1000000000u),
			      .tv_nsec = (long)(t % 1000000000u)};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR &&
	       !rec_signal)
		;
}

/* Sleep until t; meanwhile let a late thread go as soon as it stops (a
 * stopped thread must not wait for the next round).  The SIGCHLD handler
 * may let it go first, during a sleep, but only stop_late_release() lets
 * the job-control stops held for it through: so it runs once more after
 * the list emptied.  (Left out, a Ctrl-Z was held for as long as a thread
 * that is nearly always in vfork() was late again at each round, every
 * one of its stops being taken by the handler.) */
static void
wait_until(struct rec *rc, uint64_t t)
{
	for (;;) {
		uint64_t now;

		stop_late_release(&rc->late, 0);
		if (!stop_late_busy(&rc->late) || rec_signal)
			break;
		now = remote_now_ns();
		if (now >= t)
			return;
		sleep_until(now + 1000000u < t ? now + 1000000u : t);
	}
	if (!rec_signal)
		sleep_until(t);
}

/* failed: the run ends with CLI_EXIT_FATAL (its warning said why), so
 * the output may not hold what was recorded.  While the temporary file
 * still exists (rec_free() removes it), FILE holds nothing of it. */
/* The rounds counted apart as meeting the exit were gaps after all: the
 * process lived on (a leader that only called pthread_exit() looks like
 * one going away), or the recording ended otherwise. */
static void
fold_dying(struct rec *rc)
{
	rc->skipped_rounds += rc->dying_skipped;
	rc->failed_rounds += rc->dying_failed;
	if (rc->dying_failed)
		rc->last_err = rc->dying_err;
	rc->dying_skipped = rc->dying_failed = 0;
}

/* When tick k of a recording at rate hz is due, in ns from its start:
 * k / rate s exactly (rounded down to the ns), never an interval rounded
 * once and added up, which drifts (1e9 / 3 = 333333333: a third tick at
 * 999999999 ns, inside a 1 s recording). */
static uint64_t
tick_ns(uint64_t k, unsigned rate)
{
	return k / rate * 1000000000ull + k % rate * 1000000000ull / rate;
}

/* The first tick due after e ns from the start. */
static uint64_t
tick_after(uint64_t e, unsigned rate)
{
	uint64_t k =
		e / 1000000000ull * rate + e % 1000000000ull * rate / 1000000000ull;

	while (tick_ns(k, rate) <= e)
		k++;
	return k;
}

static void
print_summary(const struct rec *rc, uint64_t elapsed, bool failed)
{
	const char *name =
		strcmp(rc->ctl->output, "-") == 0 ? "standard output" : rc->ctl->output;

	if (failed && rc->tmp_path) {
		fprintf(stderr,
			"ctxdump record: %" PRIu64 " sample%s in %" PRIu64
			" round%s over %.3f s, nothing recorded: %s %s\n",
			rc->samples, CLI_PL(rc->samples), rc->rounds,
			CLI_PL(rc->rounds), (double)elapsed / 1e9, name,
			rc->final_existed ? "left unchanged" : "not created");
	} else {
		fprintf(stderr,
			"ctxdump record: %" PRIu64 " sample%s in %" PRIu64
			" round%s over %.3f s %s %s (%" PRIu64 " bytes)\n",
			rc->samples, CLI_PL(rc->samples), rc->rounds,
			CLI_PL(rc->rounds), (double)elapsed / 1e9,
			failed ? "recorded, not all of it written to" : "written to",
			name, rc->out_bytes);
	}
	if (!rc->rounds && !rc->skipped_rounds && !rc->failed_rounds && !rc->execs)
		return;
	fputs("ctxdump record: ", stderr);
	if (rc->rounds)
		fprintf(stderr,
			"threads stopped %.1f us per round on average, %.1f us at most",
			(double)rc->win_sum / (double)rc->rounds / 1e3,
			(double)rc->win_max / 1e3);
	else
		fputs("no round completed", stderr);
	if (rc->lost_ticks)
		fprintf(stderr, "; %" PRIu64 " tick%s missed", rc->lost_ticks,
			CLI_PL(rc->lost_ticks));
	if (rc->timeouts)
		fprintf(stderr, "; %" PRIu64 " time%s a thread did not stop in time",
			rc->timeouts, CLI_PL(rc->timeouts));
	if (rc->skipped_rounds)
		fprintf(stderr,
			"; %" PRIu64 " round%s skipped (no thread stopped in time)",
			rc->skipped_rounds, CLI_PL(rc->skipped_rounds));
	if (rc->failed_rounds)
		fprintf(stderr, "; %" PRIu64 " round%s failed (%s)", rc->failed_rounds,
			CLI_PL(rc->failed_rounds), strerror(-rc->last_err));
	if (rc->execs)
		fprintf(stderr,
			"; the process ran execve() %" PRIu64 " time%s (%" PRIu64
			" round%s dropped at an exec)",
			rc->execs, CLI_PL(rc->execs), rc->exec_rounds,
			CLI_PL(rc->exec_rounds));
	fputc('\n', stderr);
}

int
record_main(int argc, char **argv)
{
	static struct rec rcs;
	struct rec_ctl ctl = {0};
	struct rec *rc = &rcs;
	struct etls_proc *ep;
	uint64_t start, tick = 0, next, end_t = 0, now;
	long long tgid;
	char state;
	bool to_stdout;
	int r, ce, status = CLI_EXIT_OK;
	const char *outname;

	cli_set_name("ctxdump record");
	parse_args(&ctl, argc, argv);
	/* Before anything is opened: with standard output closed (`>&-`)
	 * the first file opened on the way (the read end of a pipe, as
	 * seen) would become fd 1, and the recording would wait forever to
	 * write into it; open read-only, the target would be stopped for a
	 * recording no write could take. */
	if (strcmp(ctl.output, "-") == 0) {
		int fl = fcntl(STDOUT_FILENO, F_GETFL);

		if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY) {
			cli_warn("cannot write to standard output: %s",
				 fl < 0 ? "it is closed"
					: "it is not open for writing");
			return CLI_EXIT_FATAL;
		}
		/* A mistake in the command line, told before the target is
		 * looked at (old: after its objects were read and warned
		 * about). */
		if (isatty(STDOUT_FILENO)) {
			cli_warn("not writing a recording to a terminal (use -o "
				 "FILE, or pipe it into 'ctxdump report -')");
			return CLI_EXIT_USAGE;
		}
	}
	memset(rc, 0, sizeof(*rc));
	rc->ctl = &ctl;
	rc->pid = ctl.pid;
	if (!proc_alive(ctl.pid)) {
		cli_warn("process %d does not exist", (int)ctl.pid);
		return CLI_EXIT_FATAL;
	}
	if (ctl.pid == getpid()) {
		cli_warn("ctxdump cannot record itself");
		return CLI_EXIT_FATAL;
	}
	/* /proc/TID exists for every thread too: a recording of it would
	 * be labelled with a process id that is none */
	if (dump_proc_status(ctl.pid, &tgid, &state) && tgid != ctl.pid) {
		cli_warn("%d is a thread of process %lld, not a process; record "
			 "process %lld (every thread of it is sampled)",
			 (int)ctl.pid, tgid, tgid);
		return CLI_EXIT_FATAL;
	}
	rc->frames = malloc((ctl.max_frames + 1) * sizeof(*rc->frames));
	rc->ctx = malloc(sizeof(*rc->ctx));
	if (!rc->frames || !rc->ctx) {
		cli_warn("out of memory");
		rec_free(rc);
		return CLI_EXIT_FATAL;
	}

	/* layouts and the process context: while the target runs, through
	 * a live thread if the leader has exited (as the dump does) */
	rc->mem_pid = dump_memory_pid(ctl.pid, 0);
	/* before anything else is read from the image (image_reload()) */
	remote_image_load(rc->mem_pid, &rc->img);
	r = dump_proc_load(ctl.pid, &rc->mem_pid, &ep);
	if (r == 0) {
		lay_want(ep, LAY_MASK_ALL); /* as in rediscover() */
		learn_tid_field(rc, ep);
		r = lay_find_in(ep, rc->mem_pid, LAY_MASK_ALL, &rc->lp);
		etls_proc_free(ep);
	}
	if ((r == -ESRCH || r == -ENODATA) && dump_is_kthread(ctl.pid)) {
		cli_warn("process %d is a kernel thread: it has no user-space memory "
			 "and no thread context to record",
			 (int)ctl.pid);
		rec_free(rc);
		return CLI_EXIT_FATAL;
	}
	if (r == -ESRCH) {
		cli_warn("process %d exited%s", (int)ctl.pid,
			 dump_exited_note(ctl.pid));
		rec_free(rc);
		return CLI_EXIT_FATAL;
	}
	if (r == -EACCES || r == -EPERM) {
		cli_warn("cannot read /proc/%d/maps: %s", (int)ctl.pid, strerror(-r));
		stop_diagnose_eperm(ctl.pid, ctl.pid);
		rec_free(rc);
		return CLI_EXIT_FATAL;
	}
	/* Neither its objects nor its stacks are ones ctxdump reads (old:
	 * recorded, "[truncated]" stacks of misread frames, exit 0). */
	if (dump_exe_is_elf32(rc->mem_pid)) {
		cli_warn("cannot record process %d: its executable is a 32-bit "
			 "program: ctxdump reads 64-bit processes only",
			 (int)ctl.pid);
		rec_free(rc);
		return CLI_EXIT_FATAL;
	}
	rc->have_layouts = r == 0;
	rc->discover_ns = remote_now_ns();
	if (!rc->have_layouts && objects_denied(&rc->lp.l[LAY_OTEL].sym)) {
		warn_objects_denied(rc, &rc->lp.l[LAY_OTEL].sym);
	} else if (rc->lp.l[LAY_OTEL].sym.n_unopenable && !rc->lp.l[LAY_OTEL].present) {
		warn_objects_unopenable(rc, &rc->lp.l[LAY_OTEL].sym);
	} else if (r == -ENODATA && !ctl.quiet) {
		dump_warn_no_files(ctl.pid, rc->mem_pid,
				   OTEL_THREAD_CTX_SYMBOL ", " LAY_ELASTIC_SYMBOL
							  ", " LAY_CL_SYMBOL,
				   "; recording stacks without trace context");
	} else if (!rc->have_layouts && !ctl.quiet)
		cli_warn("process %d defines none of " OTEL_THREAD_CTX_SYMBOL
			 ", " LAY_ELASTIC_SYMBOL ", " LAY_CL_SYMBOL
			 "; recording stacks without trace context",
			 (int)ctl.pid);

	if (stack_unwind_unavailable())
		cli_warn("cannot load libunwind (%s): recording without stacks",
			 stack_unwind_unavailable());

	to_stdout = strcmp(ctl.output, "-") == 0;
	outname = to_stdout ? "standard output" : ctl.output;
	r = open_output(rc);
	if (r < 0) {
		cli_warn("cannot open %s: %s", ctl.output, strerror(-r));
		rec_free(rc);
		return CLI_EXIT_FATAL;
	}
	rc->t0_mono = remote_now_ns();
	rc->t0_real = now_real_ns();
	pfile_w_open(&rc->w, rc->out);
	write_info(rc);
	load_pctx(rc, true);
	write_storage(rc);

	install_signals();
	now = remote_now_ns();
	if (ctl.duration > 0)
		end_t = now + (uint64_t)(ctl.duration * 1e9 + 0.5);
	start = next = now;
	rc->end_reason = PFILE_END_DURATION;
	for (;;) {
		if (rec_signal) {
			rc->end_reason = PFILE_END_SIGNAL;
			break;
		}
		r = sample_round(rc);
		if (rc->exec_elf32) {
			cli_warn("process %d ran execve() of a 32-bit program: "
				 "ctxdump reads 64-bit processes only; the recording "
				 "ends there",
				 (int)ctl.pid);
			rc->end_reason = PFILE_END_ELF32;
			/* nothing recorded before it: as for such a process
			 * refused up front (else partial, below) */
			if (!rc->rounds)
				status = CLI_EXIT_FATAL;
			break;
		}
		if (r == -ESRCH) {
			rc->end_reason = PFILE_END_EXITED;
			if (!rc->rounds) {
				cli_warn("process %d exited before it could be stopped",
					 (int)ctl.pid);
				status = CLI_EXIT_FATAL;
			}
			break;
		}
		if ((r == -EAGAIN || (r < 0 && rc->rounds)) &&
		    stop_process_dying(ctl.pid)) {
			/* a kill, or exit_group() taking the threads down:
			 * threads that cannot stop any more, or seize
			 * failing -- the end of the recording, not a gap in
			 * it, if the process now ends */
			if (r == -EAGAIN) {
				rc->dying_skipped++;
			} else {
				rc->dying_failed++;
				rc->dying_err = r;
			}
		} else if (r == -EAGAIN) {
			fold_dying(rc);
			rc->skipped_rounds++;
		} else if (r < 0) {
			fold_dying(rc);
			rc->failed_rounds++;
			rc->last_err = r;
			if (!rc->rounds) {
				/* nothing recorded: attach fails for good */
				cli_warn("cannot stop process %d: %s", (int)ctl.pid,
					 strerror(-r));
				/* the stacks' and, unless it is standard
				 * output, the recording's file */
				cli_nofile_hint(
					r,
					to_stdout ? "a recording to standard output"
						  : "a recording to a file",
					CLI_NOFILE_STACKS + !to_stdout, "");
				if (r == -EPERM && !rc->eperm_said)
					stop_diagnose_eperm(ctl.pid,
							    rc->fail_tid ? rc->fail_tid
									 : ctl.pid);
				rc->end_reason = PFILE_END_ERROR;
				status = CLI_EXIT_FATAL;
				break;
			}
		} else {
			fold_dying(rc);
		}
		if (rc->w.err) {
			warn_write_error(rc, outname);
			rc->end_reason = PFILE_END_ERROR;
			status = CLI_EXIT_FATAL;
			break;
		}
		/* a round is recorded: the file replaces an earlier one */
		if (rc->rounds && rc->tmp_path) {
			r = commit_output(rc, &ce);
			if (r < 0) {
				warn_commit_error(outname, r, ce);
				rc->end_reason = PFILE_END_ERROR;
				status = CLI_EXIT_FATAL;
				break;
			}
		}
		if (rec_signal)
			continue;
		now = remote_now_ns();
		next = start + tick_ns(++tick, ctl.rate);
		if (next <= now) {
			/* a round took longer than the interval: skip ticks */
			uint64_t k = tick_after(now - start, ctl.rate);

			rc->lost_ticks += k - tick;
			tick = k;
			next = start + tick_ns(tick, ctl.rate);
		}
		if (end_t && next >= end_t) {
			if (end_t > now)
				wait_until(rc, end_t);
			if (!rec_signal)
				break;
			continue;
		}
		wait_until(rc, next);
	}
	if (rc->end_reason != PFILE_END_EXITED)
		fold_dying(rc);
	/* nothing may stay seized: wait a little for late stops (exiting
	 * releases the rest) */
	stop_late_release(&rc->late, 200);
	write_end(rc);
	close_output(rc);
	if (rc->w.err && status == CLI_EXIT_OK) {
		warn_write_error(rc, outname);
		status = CLI_EXIT_FATAL;
	}
	/* an earlier FILE is replaced only by a recording that did not fail */
	if (status != CLI_EXIT_FATAL) {
		r = commit_output(rc, &ce);
		/* FILE may hold nothing of it: not a success */
		if (r < 0) {
			warn_commit_error(outname, r, ce);
			status = CLI_EXIT_FATAL;
		}
	}
	if (!ctl.quiet)
		print_summary(rc, remote_now_ns() - rc->t0_mono,
			      status == CLI_EXIT_FATAL);
	/* a skipped round is a gap in the recording as a failed one is, and
	 * as a thread that did not stop in time makes a dump partial */
	if (status == CLI_EXIT_OK &&
	    (rc->failed_rounds || rc->skipped_rounds || rc->exec_elf32))
		status = CLI_EXIT_PARTIAL;
	rec_free(rc);
	return status;
}
