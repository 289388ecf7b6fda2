/* SPDX-License-Identifier: Apache-2.0 */
/* ctxdump report: what a `ctxdump record` file says.
 *
 *   --folded  one line per distinct stack, "root;...;leaf count", with the
 *             sample's service, request and trace as the first frames
 *             (flamegraph.pl, speedscope, inferno);
 *   --spans   inferred spans (Elastic's inferred-spans idea): consecutive
 *             samples of one thread in one span of one trace become a call
 *             tree of time intervals, and its nodes become spans, printed
 *             as OTLP/JSON traces;
 *   default   a text summary: the top functions per request path and per
 *             trace.
 *
 * The file is read in one pass into compact tables (proffile.h): strings,
 * frames, stacks and contexts by id, and 28 bytes per sample.  A target
 * that ran execve() while recorded has one program image per EXEC record
 * (struct r_image): each sample and context belongs to one, and is
 * labelled with its service and command, never another's. */
#include "config.h"

#include "profile.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "layouts.h"
#include "output.h"
#include "process-ctx.h"
#include "proffile.h"
#include "rng.h"
#include "w3c.h"

#define MAX_FILTERS 16
/* --spans: spans kept for the output (sorted before it is printed), about
 * 100 bytes each; the JSON of one is about 400. */
#define DEFAULT_MAX_SPANS 500000
/* Contexts kept per sample: one per layout. */
#define SAMPLE_CTX LAY_N

/* ---- the loaded recording ---- */

struct r_str {
	char *p; /* NUL-terminated copy */
	uint32_t n;
};

struct r_frame {
	uint64_t ip, offset;
	uint32_t sym, mod, flags;
	uint32_t fn; /* function id (display name) */
};

struct r_stack {
	uint32_t *f; /* frame ids, innermost first */
	uint32_t n, flags;
	uint32_t guessed; /* f[guessed..n) were guessed (n: none) */
};

struct r_ctx {
	uint32_t image; /* index in prof.images: whose key map */
	uint8_t kind, flags, trace_flags;
	uint8_t trace[16], span[8], txn[8];
	uint32_t n;
	uint32_t *kv; /* key and value string ids */
};

struct r_round {
	uint64_t t; /* ns since the start */
	uint64_t window;
};

struct r_sample {
	uint32_t round, tid, stack, image;
	uint32_t ctx[SAMPLE_CTX]; /* 0 = none */
};

/* A thread of one program image: after an exec the thread at the pid (and
 * a tid reused later) is another program's, with its own name. */
struct r_thread {
	uint32_t tid, image;
	char *comm; /* the last name seen */
};

struct r_layout {
	unsigned kind;
	bool usable;
	char *module, *model;
};

struct r_kv {
	char *key, *value;
};

/* A growable array of fixed-size items. */
struct vec {
	void *v;
	size_t n, cap, size;
};

static void *
vec_at(struct vec *a, size_t i)
{
	return (uint8_t *)a->v + i * a->size;
}

/* Make index i valid (zero-filled); returns it or NULL. */
static void *
vec_slot(struct vec *a, size_t i)
{
	if (i >= a->cap) {
		size_t cap = a->cap ? a->cap : 64;
		void *nv;

		while (cap <= i)
			cap *= 2;
		nv = realloc(a->v, cap * a->size);
		if (!nv)
			return NULL;
		memset((uint8_t *)nv + a->cap * a->size, 0, (cap - a->cap) * a->size);
		a->v = nv;
		a->cap = cap;
	}
	if (i >= a->n)
		a->n = i + 1;
	return vec_at(a, i);
}

/* Program images told apart, at most (a process that execs more often
 * than this during one recording is not one this tool is for). */
#define REPORT_IMAGES_MAX 1024

/* One program image of the target: the first from the start, one more
 * per EXEC record.  What the file says of the process (PCTX, RESOURCE)
 * goes to the last one. */
struct r_image {
	uint64_t t; /* since the start (EXEC); 0 for the first */
	char *comm; /* EXEC's; NULL for the first (INFO's) */
	uint8_t *pctx_payload;
	struct pctx_decoded *pd;
	struct vec resource; /* struct r_kv, from RESOURCE records */
};

struct prof {
	/* INFO */
	bool has_info;
	uint64_t pid, t0_real, t0_mono, rate;
	char *comm, *cmdline;
	size_t cmdline_len;
	struct vec images;     /* struct r_image, at least one */
	unsigned images_more;  /* EXEC records past REPORT_IMAGES_MAX */
	struct vec layouts;    /* struct r_layout, distinct, at most PFILE_LAYOUT_MAX */
	unsigned layouts_more; /* LAYOUT records of other layouts past those */

	struct vec strings; /* struct r_str by id */
	struct vec frames;  /* struct r_frame by id */
	struct vec stacks;  /* struct r_stack by id */
	struct vec ctxs;    /* struct r_ctx by id */
	struct vec rounds;  /* struct r_round */
	struct vec samples; /* struct r_sample */
	struct vec threads; /* struct r_thread */
	/* tid -> index in threads + 1, open addressing: a file may name
	 * any number of threads */
	uint32_t *thr_slot;
	size_t thr_cap;
	/* function names (frame display names), deduplicated */
	struct vec fns; /* char * */

	bool has_end;
	uint64_t end_t, end_reason, lost_ticks, win_sum, win_max;
	bool truncated; /* the file ended inside a record */
	/* another recording starts at joined_off: only this one is read */
	bool joined;
	uint64_t joined_off;
	unsigned bad_records;
	/* where the record the file ends inside starts, and the first
	 * malformed one: a file from elsewhere is looked at by offset */
	uint64_t cut_off, bad_off;
};

static const char *
str(const struct prof *p, uint32_t id)
{
	const struct r_str *s;

	if (!id || id >= p->strings.n)
		return "";
	s = (const struct r_str *)p->strings.v + id;
	return s->p ? s->p : "";
}

static char *
dup_bytes(const uint8_t *b, size_t n)
{
	char *s = malloc(n + 1);

	if (s) {
		memcpy(s, b, n);
		s[n] = '\0';
	}
	return s;
}

/* How many of a string's n bytes to keep so that they and the cut mark
 * (PFILE_STRING_CUT) fit max bytes; n if the string fits whole. */
static size_t
cut_keep(const uint8_t *b, size_t n, size_t max)
{
	if (n <= max)
		return n;
	/* not inside a UTF-8 sequence */
	return output_utf8_cut(b, n, max - (sizeof(PFILE_STRING_CUT) - 1));
}

/* A string of the file, cut to max bytes with a visible mark
 * (PFILE_STRING_CUT). */
static char *
dup_cut_to(const uint8_t *b, size_t n, size_t max)
{
	const size_t mark = sizeof(PFILE_STRING_CUT) - 1;
	size_t keep = cut_keep(b, n, max);
	char *s;

	if (keep == n)
		return dup_bytes(b, n);
	s = malloc(keep + mark + 1);
	if (s) {
		memcpy(s, b, keep);
		memcpy(s + keep, PFILE_STRING_CUT, mark + 1);
	}
	return s;
}

/* Cut to PFILE_STRING_MAX bytes: a recorder writes none that long, and
 * every frame and attribute of a report spells its strings out again. */
static char *
dup_cut(const uint8_t *b, size_t n)
{
	return dup_cut_to(b, n, PFILE_STRING_MAX);
}

/* ---- function names ---- */

struct fn_map {
	uint64_t *h;
	uint32_t *id; /* fn id + 1 */
	size_t cap, n;
};

/* The tables below are keyed by what the file holds: their hashes are
 * seeded (ctx_hash_bytes()), or a file of colliding keys would make
 * loading it quadratic. */
static uint64_t
hash_str(const char *s)
{
	return ctx_hash_bytes(s, strlen(s), cli_hash_seed());
}

/* The id of function name s (taking ownership of s), or FN_NONE when s
 * is NULL or memory runs out (the load fails: 0 is a function's id). */
#define FN_NONE UINT32_MAX

static uint32_t
fn_intern(struct prof *p, struct fn_map *m, char *s)
{
	uint64_t h;
	size_t i;

	if (!s)
		return FN_NONE;
	h = hash_str(s);
	if ((m->n + 1) * 2 > m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 256, j;
		uint64_t *nh = calloc(cap, sizeof(*nh));
		uint32_t *ni = calloc(cap, sizeof(*ni));

		if (!nh || !ni) {
			free(nh);
			free(ni);
			free(s);
			return FN_NONE;
		}
		for (j = 0; j < m->cap; j++) {
			size_t k;

			if (!m->id[j])
				continue;
			for (k = m->h[j] & (cap - 1); ni[k]; k = (k + 1) & (cap - 1))
				;
			nh[k] = m->h[j];
			ni[k] = m->id[j];
		}
		free(m->h);
		free(m->id);
		m->h = nh;
		m->id = ni;
		m->cap = cap;
	}
	for (i = h & (m->cap - 1); m->id[i]; i = (i + 1) & (m->cap - 1)) {
		char **name = vec_at(&p->fns, m->id[i] - 1);

		if (m->h[i] == h && strcmp(*name, s) == 0) {
			free(s);
			return m->id[i] - 1;
		}
	}
	{
		char **slot = vec_slot(&p->fns, p->fns.n);

		if (!slot) {
			free(s);
			return FN_NONE;
		}
		*slot = s;
		m->h[i] = h;
		m->id[i] = (uint32_t)p->fns.n;
		m->n++;
		return (uint32_t)p->fns.n - 1;
	}
}

static const char *
fn_name(const struct prof *p, uint32_t fn)
{
	if (fn >= p->fns.n)
		return "?";
	return ((char *const *)p->fns.v)[fn];
}

/* Symbol, else module basename + offset, else the address. */
static char *
frame_display(const struct prof *p, const struct r_frame *f)
{
	const char *sym = str(p, f->sym), *mod = str(p, f->mod), *b;
	char buf[512];

	if (*sym)
		return strdup(sym);
	if (*mod) {
		b = strrchr(mod, '/');
		b = b ? b + 1 : mod;
		snprintf(buf, sizeof(buf), "%s+0x%" PRIx64, b, f->offset);
	} else {
		snprintf(buf, sizeof(buf), "0x%" PRIx64, f->ip);
	}
	return strdup(buf);
}

/* ---- loading ---- */

static void
free_prof(struct prof *p)
{
	size_t i;

	for (i = 0; i < p->strings.n; i++)
		free(((struct r_str *)p->strings.v)[i].p);
	for (i = 0; i < p->stacks.n; i++)
		free(((struct r_stack *)p->stacks.v)[i].f);
	for (i = 0; i < p->ctxs.n; i++)
		free(((struct r_ctx *)p->ctxs.v)[i].kv);
	for (i = 0; i < p->fns.n; i++)
		free(((char **)p->fns.v)[i]);
	for (i = 0; i < p->images.n; i++) {
		struct r_image *im = (struct r_image *)p->images.v + i;
		size_t j;

		for (j = 0; j < im->resource.n; j++) {
			free(((struct r_kv *)im->resource.v)[j].key);
			free(((struct r_kv *)im->resource.v)[j].value);
		}
		free(im->resource.v);
		free(im->comm);
		free(im->pctx_payload);
		free(im->pd);
	}
	for (i = 0; i < p->layouts.n; i++) {
		free(((struct r_layout *)p->layouts.v)[i].module);
		free(((struct r_layout *)p->layouts.v)[i].model);
	}
	for (i = 0; i < p->threads.n; i++)
		free(((struct r_thread *)p->threads.v)[i].comm);
	free(p->strings.v);
	free(p->frames.v);
	free(p->stacks.v);
	free(p->ctxs.v);
	free(p->rounds.v);
	free(p->samples.v);
	free(p->threads.v);
	free(p->thr_slot);
	free(p->fns.v);
	free(p->images.v);
	free(p->layouts.v);
	free(p->comm);
	free(p->cmdline);
}

static void
init_prof(struct prof *p)
{
	memset(p, 0, sizeof(*p));
	p->strings.size = sizeof(struct r_str);
	p->frames.size = sizeof(struct r_frame);
	p->stacks.size = sizeof(struct r_stack);
	p->ctxs.size = sizeof(struct r_ctx);
	p->rounds.size = sizeof(struct r_round);
	p->samples.size = sizeof(struct r_sample);
	p->threads.size = sizeof(struct r_thread);
	p->fns.size = sizeof(char *);
	p->images.size = sizeof(struct r_image);
	p->layouts.size = sizeof(struct r_layout);
}

static size_t
thr_hash(uint32_t image, uint32_t tid, size_t cap)
{
	uint32_t key[2] = {image, tid};

	return (size_t)(ctx_hash_bytes(key, sizeof(key), cli_hash_seed()) & (cap - 1));
}

static struct r_thread *
thread_find(const struct prof *p, uint32_t image, uint32_t tid)
{
	size_t i;

	if (!p->thr_cap)
		return NULL;
	for (i = thr_hash(image, tid, p->thr_cap); p->thr_slot[i];
	     i = (i + 1) & (p->thr_cap - 1)) {
		struct r_thread *t =
			(struct r_thread *)p->threads.v + p->thr_slot[i] - 1;

		if (t->tid == tid && t->image == image)
			return t;
	}
	return NULL;
}

/* A new thread entry for tid in image (not there yet); NULL when out of
 * memory. */
static struct r_thread *
thread_add(struct prof *p, uint32_t image, uint32_t tid)
{
	struct r_thread *t;
	size_t i;

	if ((p->threads.n + 1) * 2 > p->thr_cap) {
		size_t cap = p->thr_cap ? p->thr_cap * 2 : 64;
		uint32_t *ns = calloc(cap, sizeof(*ns));

		if (!ns)
			return NULL;
		for (i = 0; i < p->threads.n; i++) {
			const struct r_thread *o = (struct r_thread *)p->threads.v + i;
			size_t k = thr_hash(o->image, o->tid, cap);

			while (ns[k])
				k = (k + 1) & (cap - 1);
			ns[k] = (uint32_t)i + 1;
		}
		free(p->thr_slot);
		p->thr_slot = ns;
		p->thr_cap = cap;
	}
	t = vec_slot(&p->threads, p->threads.n);
	if (!t)
		return NULL;
	t->tid = tid;
	t->image = image;
	for (i = thr_hash(image, tid, p->thr_cap); p->thr_slot[i];
	     i = (i + 1) & (p->thr_cap - 1))
		;
	p->thr_slot[i] = (uint32_t)p->threads.n;
	return t;
}

/* Ids count up from 1 without gaps (slot 0 is reserved): a record
 * defines the next id, or redefines one; anything else is corrupt. */
static bool
id_ok(uint32_t id, const struct vec *a)
{
	return id > 0 && id <= a->n && id < (1u << 30);
}

/* A new program image (the first, or after an EXEC record). */
static struct r_image *
image_add(struct prof *p)
{
	struct r_image *im = vec_slot(&p->images, p->images.n);

	if (im)
		im->resource.size = sizeof(struct r_kv);
	return im;
}

static struct r_image *
image_cur(const struct prof *p)
{
	return (struct r_image *)p->images.v + p->images.n - 1;
}

static const struct r_image *
image_at(const struct prof *p, uint32_t i)
{
	return (const struct r_image *)p->images.v + (i < p->images.n ? i : 0);
}

/* A process id as the output gives it: a pid_t above 0. */
static bool
pid_valid(int64_t v)
{
	return v > 0 && v <= INT_MAX;
}

static bool
load_record(
	struct prof *p, struct fn_map *fm, unsigned type, const uint8_t *b, size_t n)
{
	struct pfile_r r = {b, b + n, false};
	const uint8_t *bp;
	size_t bl;
	uint32_t id, i;

	switch (type) {
	case PFILE_INFO:
		/* a pid_t above 0, as the recorder writes it; another value
		 * (a crafted file's) is unknown, 0, and left out of the
		 * output rather than shown negative or made up */
		p->pid = pfile_r_u(&r);
		if (p->pid > INT_MAX)
			p->pid = 0;
		p->t0_real = pfile_r_u(&r);
		p->t0_mono = pfile_r_u(&r);
		p->rate = pfile_r_u(&r);
		(void)pfile_r_u(&r); /* max frames */
		(void)pfile_r_u(&r); /* stack size */
		pfile_r_bytes(&r, &bp, &bl);
		free(p->comm);
		p->comm = dup_bytes(bp ? bp : (const uint8_t *)"", bl);
		pfile_r_bytes(&r, &bp, &bl);
		free(p->cmdline);
		p->cmdline = dup_bytes(bp ? bp : (const uint8_t *)"", bl);
		p->cmdline_len = bl;
		p->has_info = !r.bad;
		break;
	case PFILE_PCTX: {
		struct pctx_decoded *pd;
		uint8_t *copy;

		(void)pfile_r_u(&r);
		if (!pfile_r_bytes(&r, &bp, &bl))
			break;
		copy = malloc(bl ? bl : 1);
		pd = malloc(sizeof(*pd));
		if (!copy || !pd) {
			free(copy);
			free(pd);
			return false;
		}
		memcpy(copy, bp, bl);
		if (pctx_decode(copy, bl, pd) < 0) {
			free(copy);
			free(pd);
			break;
		}
		free(image_cur(p)->pctx_payload);
		free(image_cur(p)->pd);
		image_cur(p)->pctx_payload = copy;
		image_cur(p)->pd = pd;
		break;
	}
	case PFILE_RESOURCE: {
		const uint8_t *kp, *vp;
		size_t kl, vl;
		struct r_kv *kv;

		if (!pfile_r_bytes(&r, &kp, &kl) || !pfile_r_bytes(&r, &vp, &vl))
			break;
		kv = vec_slot(&image_cur(p)->resource, image_cur(p)->resource.n);
		if (!kv)
			return false;
		kv->key = dup_bytes(kp, kl);
		kv->value = dup_bytes(vp, vl);
		/* the resource's readers compare both as strings */
		if (!kv->key || !kv->value)
			return false;
		break;
	}
	case PFILE_LAYOUT: {
		struct r_layout nl = {0}, *l;
		const uint8_t *mp, *mo;
		size_t ml, mol;
		/* checked before it is narrowed (as PFILE_CTX's) */
		uint64_t kind = pfile_r_u(&r);

		nl.kind = kind < LAY_N ? (unsigned)kind : LAY_N;
		nl.usable = pfile_r_u(&r) != 0;
		pfile_r_bytes(&r, &bp, &bl); /* the symbol name */
		pfile_r_bytes(&r, &mp, &ml);
		pfile_r_bytes(&r, &mo, &mol);
		if (r.bad || nl.kind >= LAY_N)
			break;
		/* A later record of a kind is the layout later samples were
		 * read through (after a rediscovery): listed once each, in
		 * the order they came, and only so many (each record is
		 * compared with those kept). */
		nl.module = dup_cut_to(mp, ml, PFILE_PATH_MAX);
		nl.model = dup_cut(mo, mol);
		if (!nl.module || !nl.model) {
			free(nl.module);
			free(nl.model);
			return false;
		}
		for (i = 0; i < p->layouts.n; i++) {
			l = (struct r_layout *)p->layouts.v + i;
			if (l->kind == nl.kind && l->usable == nl.usable &&
			    strcmp(l->module, nl.module) == 0 &&
			    strcmp(l->model, nl.model) == 0)
				break;
		}
		if (i == p->layouts.n && p->layouts.n >= PFILE_LAYOUT_MAX &&
		    p->layouts_more < UINT_MAX)
			p->layouts_more++;
		if (i < p->layouts.n || p->layouts.n >= PFILE_LAYOUT_MAX) {
			free(nl.module);
			free(nl.model);
			break;
		}
		l = vec_slot(&p->layouts, p->layouts.n);
		if (!l) {
			free(nl.module);
			free(nl.model);
			return false;
		}
		*l = nl;
		break;
	}
	case PFILE_THREAD: {
		uint32_t tid = pfile_r_u32(&r);
		struct r_thread *t;
		char *name;

		if (!pfile_r_bytes(&r, &bp, &bl))
			break;
		/* cut as a string record: every span of the thread names it
		 * (thread.name), and a name of 16 MiB must not come out once
		 * per sample (a recorder writes /proc's comm, 15 bytes) */
		name = dup_cut(bp, bl);
		if (!name)
			return false;
		t = thread_find(p, (uint32_t)p->images.n - 1, tid);
		if (!t)
			t = thread_add(p, (uint32_t)p->images.n - 1, tid);
		if (!t) {
			free(name);
			return false;
		}
		free(t->comm);
		t->comm = name;
		break;
	}
	case PFILE_STRING: {
		struct r_str *s;

		id = pfile_r_u32(&r);
		if (!pfile_r_bytes(&r, &bp, &bl) || !id_ok(id, &p->strings)) {
			r.bad = true; /* malformed: skipped and counted */
			break;
		}
		s = vec_slot(&p->strings, id);
		if (!s)
			return false;
		free(s->p);
		s->p = dup_cut(bp, bl);
		if (!s->p)
			return false;
		s->n = (uint32_t)strlen(s->p);
		break;
	}
	case PFILE_FRAME: {
		struct r_frame f = {0}, *fp;

		id = pfile_r_u32(&r);
		f.ip = pfile_r_u(&r);
		f.sym = pfile_r_u32(&r);
		f.mod = pfile_r_u32(&r);
		f.offset = pfile_r_u(&r);
		f.flags = pfile_r_u32(&r);
		if (r.bad || !id_ok(id, &p->frames)) {
			r.bad = true;
			break;
		}
		/* A string it names must be defined before it: another id is
		 * corrupt, taken as none (the frame is still defined, so
		 * that the ids after it stay in sequence). */
		if (f.sym >= p->strings.n || f.mod >= p->strings.n) {
			r.bad = true;
			f.sym = f.sym < p->strings.n ? f.sym : 0;
			f.mod = f.mod < p->strings.n ? f.mod : 0;
		}
		fp = vec_slot(&p->frames, id);
		if (!fp)
			return false;
		*fp = f;
		fp->fn = fn_intern(p, fm, frame_display(p, &f));
		if (fp->fn == FN_NONE)
			return false;
		break;
	}
	case PFILE_STACK: {
		struct r_stack *s;
		uint32_t flags, cnt;

		id = pfile_r_u32(&r);
		flags = pfile_r_u32(&r);
		cnt = pfile_r_u32(&r);
		if (r.bad || !id_ok(id, &p->stacks) || cnt > PFILE_STACK_MAX ||
		    cnt > (size_t)(r.end - r.p)) {
			r.bad = true;
			break;
		}
		s = vec_slot(&p->stacks, id);
		if (!s)
			return false;
		free(s->f);
		s->f = malloc((cnt ? cnt : 1) * sizeof(*s->f));
		if (!s->f)
			return false;
		/* a frame not defined before: malformed, and the stack
		 * defined empty ([no stack]) */
		for (i = 0; i < cnt; i++) {
			s->f[i] = pfile_r_u32(&r);
			if (s->f[i] >= p->frames.n)
				r.bad = true;
		}
		s->n = r.bad ? 0 : cnt;
		s->flags = flags;
		s->guessed = s->n;
		if (flags & PFILE_STACK_GUESSED) {
			uint32_t g = pfile_r_u32(&r);

			if (r.bad || g >= s->n) {
				r.bad = true;
				s->n = s->guessed = 0;
			} else {
				s->guessed = g;
			}
		}
		break;
	}
	case PFILE_CTX: {
		struct r_ctx c = {0}, *cp;
		uint64_t kind;

		id = pfile_r_u32(&r);
		/* checked before it is narrowed: 256 must not pass as 0 */
		kind = pfile_r_u(&r);
		c.kind = kind < LAY_N ? (uint8_t)kind : LAY_N;
		c.flags = (uint8_t)pfile_r_u(&r);
		pfile_r_raw(&r, c.trace, 16);
		pfile_r_raw(&r, c.span, 8);
		c.trace_flags = (uint8_t)pfile_r_u(&r);
		if (c.flags & PFILE_CTX_TXN)
			pfile_r_raw(&r, c.txn, 8);
		c.n = pfile_r_u32(&r);
		if (r.bad || !id_ok(id, &p->ctxs) || c.n > LAY_ATTRS_MAX ||
		    c.kind >= LAY_N) {
			r.bad = true;
			break;
		}
		c.kv = malloc((c.n ? c.n : 1) * 2 * sizeof(uint32_t));
		if (!c.kv)
			return false;
		for (i = 0; i < 2 * c.n; i++)
			c.kv[i] = pfile_r_u32(&r);
		if (r.bad) {
			free(c.kv);
			break;
		}
		/* a string not defined before: malformed, taken as none */
		for (i = 0; i < 2 * c.n; i++)
			if (c.kv[i] >= p->strings.n) {
				c.kv[i] = 0;
				r.bad = true;
			}
		cp = vec_slot(&p->ctxs, id);
		if (!cp) {
			free(c.kv);
			return false;
		}
		free(cp->kv);
		c.image = (uint32_t)p->images.n - 1;
		*cp = c;
		break;
	}
	case PFILE_ROUND: {
		struct r_round *rd = vec_slot(&p->rounds, p->rounds.n);

		if (!rd)
			return false;
		rd->t = pfile_r_u(&r);
		rd->window = pfile_r_u(&r);
		/* a time the start's wall-clock time plus it would wrap is
		 * malformed, and taken as the last one that does not (spans
		 * are printed in wall-clock time, wall_ns()) */
		if (rd->t > UINT64_MAX - p->t0_real) {
			rd->t = UINT64_MAX - p->t0_real;
			r.bad = true;
		}
		/* CLOCK_MONOTONIC: a round before the one before it is
		 * malformed, and taken as at that one's time (durations and
		 * span ends never go back, gaps never wrap) */
		if (p->rounds.n > 1 && rd->t < rd[-1].t) {
			rd->t = rd[-1].t;
			r.bad = true;
		}
		break;
	}
	case PFILE_SAMPLE: {
		struct r_sample s = {0}, *sp;
		uint32_t nc, k;
		bool bad_ref = false;

		/* a sample belongs to the round before it: without one, it
		 * is malformed (skipped) */
		if (!p->rounds.n) {
			r.bad = true;
			break;
		}
		s.round = (uint32_t)p->rounds.n - 1;
		s.image = (uint32_t)p->images.n - 1;
		s.tid = pfile_r_u32(&r);
		(void)pfile_r_u(&r); /* state */
		s.stack = pfile_r_u32(&r);
		nc = pfile_r_u32(&r);
		for (k = 0; k < nc && !r.bad; k++) {
			uint32_t c = pfile_r_u32(&r);

			if (k < SAMPLE_CTX && c < p->ctxs.n)
				s.ctx[k] = c;
			else if (c >= p->ctxs.n)
				bad_ref = true;
		}
		if (r.bad)
			break;
		/* a stack or context not defined before: malformed, taken
		 * as none (the sample is still counted) */
		if (s.stack >= p->stacks.n) {
			s.stack = 0;
			bad_ref = true;
		}
		sp = vec_slot(&p->samples, p->samples.n);
		if (!sp)
			return false;
		*sp = s;
		r.bad = bad_ref;
		break;
	}
	case PFILE_EXEC: {
		struct r_image *im;
		uint64_t t = pfile_r_u(&r);

		if (!pfile_r_bytes(&r, &bp, &bl))
			break;
		/* An image costs some 100 bytes, and 20 KiB more with a
		 * process context of its own, for an EXEC record of 6
		 * bytes: past REPORT_IMAGES_MAX the execs are only counted
		 * (the last image then stands for the programs after it,
		 * and takes the last one's process context and resources). */
		if (p->images.n >= REPORT_IMAGES_MAX) {
			if (p->images_more < UINT_MAX)
				p->images_more++;
			break;
		}
		im = image_add(p);
		if (!im)
			return false;
		im->t = t;
		im->comm = dup_cut(bp, bl);
		if (!im->comm)
			return false;
		break;
	}
	case PFILE_END:
		p->end_t = pfile_r_u(&r);
		p->end_reason = pfile_r_u(&r);
		(void)pfile_r_u(&r);
		(void)pfile_r_u(&r);
		p->lost_ticks = pfile_r_u(&r);
		p->win_sum = pfile_r_u(&r);
		p->win_max = pfile_r_u(&r);
		p->has_end = !r.bad;
		break;
	default:
		break; /* a later version's record */
	}
	if (r.bad)
		p->bad_records++;
	return true;
}

/* Read the recording in f (named path in messages). */
static int
load(struct prof *p, FILE *f, const char *path)
{
	struct fn_map fm = {0};
	uint8_t *buf = NULL;
	size_t cap = 0, len;
	unsigned type, bad;
	uint64_t off;
	int r;

	r = pfile_read_header(f);
	if (r == -ENODATA) {
		cli_warn("%s: empty file, not a ctxdump recording", path);
		goto out;
	}
	if (r == -EBADMSG || r == -EPROTONOSUPPORT) {
		cli_warn("%s: %s", path,
			 r == -EPROTONOSUPPORT
				 ? "recorded by a newer ctxdump (unsupported version)"
				 : "not a ctxdump recording");
		goto out;
	}
	if (r < 0) {
		cli_warn("cannot read %s: %s", path, strerror(-r));
		goto out;
	}
	/* the strings vector starts with the reserved id 0 */
	if (!image_add(p) || !vec_slot(&p->strings, 0) || !vec_slot(&p->frames, 0) ||
	    !vec_slot(&p->stacks, 0) || !vec_slot(&p->ctxs, 0)) {
		r = -ENOMEM;
		goto out;
	}
	off = (uint64_t)r;
	while ((r = pfile_next(f, &type, &buf, &cap, &len)) == 1) {
		bad = p->bad_records;
		if (!load_record(p, &fm, type, buf, len)) {
			r = -ENOMEM;
			break;
		}
		if (bad == 0 && p->bad_records)
			p->bad_off = off;
		off += 4 + len;
	}
	if (r == -EBADMSG) {
		p->truncated = true;
		p->cut_off = off;
		r = 0;
	}
	if (r == PFILE_NEXT_HEADER) {
		p->joined = true;
		p->joined_off = off;
		r = 0;
	}
	if (r == -ENOMEM)
		cli_warn("%s: %s", path, strerror(-r));
	else if (r < 0)
		cli_warn("cannot read %s: %s", path, strerror(-r));
	if (p->images_more)
		cli_warn("%s: %u exec%s past the first %u are not told apart: the "
			 "samples from there on are all labelled as the last program",
			 path, p->images_more, CLI_PL(p->images_more),
			 (unsigned)REPORT_IMAGES_MAX - 1);
out:
	free(buf);
	free(fm.h);
	free(fm.id);
	return r;
}

/* A string from the target (through the file) on standard output: no
 * control byte or invalid UTF-8 reaches the terminal (output.h). */
static void
put_text(const char *s)
{
	output_text_escape(stdout, (const uint8_t *)s, strlen(s), false);
}

/* ---- sample properties ---- */

static const struct r_ctx *
ctx_of(const struct prof *p, uint32_t id)
{
	if (!id || id >= p->ctxs.n)
		return NULL;
	return (const struct r_ctx *)p->ctxs.v + id;
}

/* The sample's trace context: the first of its contexts with a trace id,
 * in layout order (OTEP, Elastic, custom-labels).  An all-zero trace id is
 * none (W3C, OTLP: invalid), whatever the context's flags say (Elastic's
 * trace-present byte is taken as is): it would be "trace 000..." and
 * spans of an invalid traceId. */
static const struct r_ctx *
primary_ctx(const struct prof *p, const struct r_sample *s)
{
	unsigned k;

	for (k = 0; k < SAMPLE_CTX; k++) {
		const struct r_ctx *c = ctx_of(p, s->ctx[k]);

		if (c && (c->flags & PFILE_CTX_TRACE) && !w3c_id_is_zero(c->trace, 16))
			return c;
	}
	return NULL;
}

/* Value of the first attribute named key in any of the sample's
 * contexts, or NULL. */
static const char *
sample_attr(const struct prof *p, const struct r_sample *s, const char *key)
{
	unsigned k, i;

	for (k = 0; k < SAMPLE_CTX; k++) {
		const struct r_ctx *c = ctx_of(p, s->ctx[k]);

		for (i = 0; c && i < c->n; i++)
			if (strcmp(str(p, c->kv[2 * i]), key) == 0)
				return str(p, c->kv[2 * i + 1]);
	}
	return NULL;
}

/* Whether one of the sample's contexts has attribute key (with value
 * val; NULL: any): each attribute is looked at, not only the first of
 * that name (two layouts may both have the key, with other values). */
static bool
sample_has_attr(const struct prof *p,
		const struct r_sample *s,
		const char *key,
		const char *val)
{
	unsigned k, i;

	for (k = 0; k < SAMPLE_CTX; k++) {
		const struct r_ctx *c = ctx_of(p, s->ctx[k]);

		for (i = 0; c && i < c->n; i++)
			if (strcmp(str(p, c->kv[2 * i]), key) == 0 &&
			    (!val || strcmp(str(p, c->kv[2 * i + 1]), val) == 0))
				return true;
	}
	return false;
}

static const char *
sample_attr_any(const struct prof *p, const struct r_sample *s, const char *const *keys)
{
	const char *v;

	for (; *keys; keys++)
		if ((v = sample_attr(p, s, *keys)) && *v)
			return v;
	return NULL;
}

static const char *const method_keys[] = {"http.request.method", "http.method",
					  "method", NULL};
static const char *const path_keys[] = {"http.route", "url.path", "http.target", "path",
					NULL};

/* "GET /api/x", "/api/x", or "": method and path of at most
 * PFILE_STRING_MAX bytes each (longer ones were cut when loaded), a
 * space and the NUL: never cut again, or two requests whose paths differ
 * only at their ends would be one (and a name could end inside a UTF-8
 * sequence). */
#define REQ_NAME_MAX (2 * PFILE_STRING_MAX + 2)

static void
request_name(const struct prof *p, const struct r_sample *s, char *out, size_t n)
{
	const char *m = sample_attr_any(p, s, method_keys);
	const char *path = sample_attr_any(p, s, path_keys);

	if (m && path)
		snprintf(out, n, "%s %s", m, path);
	else if (path)
		snprintf(out, n, "%s", path);
	else if (m)
		snprintf(out, n, "%s", m);
	else
		out[0] = '\0';
}

/* A string resource attribute with a value: the process context's, else
 * one the recording has from elsewhere (Elastic's process storage). */
static bool
resource_str(const struct r_image *im, const char *key, const char **v, size_t *len)
{
	size_t i;

	if (im->pd) {
		const struct pctx_attr *a = pctx_find_resource(im->pd, key);

		if (a && a->type == PCTX_V_STRING && a->str.len) {
			*v = (const char *)a->str.ptr;
			*len = a->str.len;
			return true;
		}
	}
	for (i = 0; i < im->resource.n; i++) {
		const struct r_kv *kv = (const struct r_kv *)im->resource.v + i;

		if (strcmp(kv->key, key) == 0 && kv->value[0]) {
			*v = kv->value;
			*len = strlen(kv->value);
			return true;
		}
	}
	return false;
}

/* service.name as the process has it, taken as is: the shim's default is
 * "unknown_service:<executable>" already, never to be prefixed again.  For
 * a process without one, the semantic conventions' default made here:
 * "unknown_service:" and process.executable.name, else the command name
 * the recording has (/proc/PID/comm, what older conventions suggested for
 * process.executable.name), else "unknown_service" (never ours).  Each
 * program image (one per exec) has its own. */
static const char *
image_comm(const struct prof *p, const struct r_image *im)
{
	return im->comm ? im->comm : p->comm;
}

/* The service's name: "unknown_service:" and a string of the file. */
#define SVC_NAME_MAX (sizeof("unknown_service:") + PFILE_STRING_MAX)

static const char *
service_name(const struct prof *p, uint32_t image, char *buf, size_t n)
{
	const struct r_image *im = image_at(p, image);
	const char *v, *comm = image_comm(p, im), *prefix = "unknown_service:";
	size_t len, keep;

	if (resource_str(im, "service.name", &v, &len)) {
		prefix = "";
	} else if (!resource_str(im, "process.executable.name", &v, &len)) {
		v = comm ? comm : "";
		len = strlen(v);
		if (!len)
			prefix = "unknown_service";
	}
	/* as long as a string of the file at most (n is SVC_NAME_MAX), and
	 * not cut inside a UTF-8 sequence */
	keep = cut_keep((const uint8_t *)v, len, PFILE_STRING_MAX);
	snprintf(buf, n, "%s%.*s%s", prefix, (int)keep, v,
		 keep < len ? PFILE_STRING_CUT : "");
	return buf;
}

static const char *
thread_name(const struct prof *p, uint32_t image, uint32_t tid)
{
	const struct r_thread *t = thread_find(p, image, tid);

	return t && t->comm ? t->comm : "";
}

/* Wall-clock time of t since the start, saturated: a file may give any
 * start time, also after its rounds. */
static uint64_t
wall_ns(const struct prof *p, uint64_t t)
{
	return t > UINT64_MAX - p->t0_real ? UINT64_MAX : p->t0_real + t;
}

static uint64_t
round_time(const struct prof *p, uint32_t round)
{
	return round < p->rounds.n ? ((const struct r_round *)p->rounds.v)[round].t : 0;
}

static const struct r_stack *
stack_of(const struct prof *p, uint32_t id)
{
	if (!id || id >= p->stacks.n)
		return NULL;
	return (const struct r_stack *)p->stacks.v + id;
}

static uint32_t
frame_fn(const struct prof *p, uint32_t fid)
{
	if (!fid || fid >= p->frames.n)
		return UINT32_MAX;
	return ((const struct r_frame *)p->frames.v)[fid].fn;
}

static void
hex(char *out, const uint8_t *b, size_t n)
{
	w3c_hex_encode(out, b, n);
	out[2 * n] = '\0';
}

/* ---- filters ---- */

enum filter_kind { F_TRACE, F_PATH, F_ATTR, F_TID };

struct filter {
	enum filter_kind kind;
	const char *a; /* trace prefix, path, attribute key */
	const char *b; /* attribute value (NULL: any) */
	long tid;
};

struct rpt_ctl {
	const char *file;
	/* file as messages name it: "standard input" for "-" */
	const char *name;
	enum { MODE_SUMMARY, MODE_FOLDED, MODE_SPANS } mode;
	struct filter f[MAX_FILTERS];
	unsigned n_filters;
	bool traced_only;
	bool context_spans;
	bool collapse;
	unsigned min_samples;
	size_t max_spans;
	unsigned top;
	unsigned max_traces;
	/* reading a pipe: let the first SIGINT and SIGQUIT pass while the
	 * recording is read (hold_signals()) */
	bool hold_signals;
};

static bool
sample_matches(const struct prof *p,
	       const struct rpt_ctl *ctl,
	       const struct r_sample *s)
{
	const struct r_ctx *c = primary_ctx(p, s);
	char h[33], req[REQ_NAME_MAX];
	unsigned i;

	if (ctl->traced_only && !c)
		return false;
	for (i = 0; i < ctl->n_filters; i++) {
		const struct filter *f = &ctl->f[i];
		const char *v;

		switch (f->kind) {
		case F_TRACE:
			if (!c)
				return false;
			hex(h, c->trace, 16);
			if (strncmp(h, f->a, strlen(f->a)) != 0)
				return false;
			break;
		case F_PATH:
			v = sample_attr_any(p, s, path_keys);
			request_name(p, s, req, sizeof(req));
			if ((!v || strcmp(v, f->a) != 0) && strcmp(req, f->a) != 0)
				return false;
			break;
		case F_ATTR:
			if (!sample_has_attr(p, s, f->a, f->b))
				return false;
			break;
		case F_TID:
			if ((long)s->tid != f->tid)
				return false;
			break;
		}
	}
	return true;
}

/* ---- counting map: string -> count ---- */

struct cmap_ent {
	char *key;
	uint64_t h, count;
};

struct cmap {
	struct cmap_ent *v;
	size_t cap, n;
};

static bool
cmap_add(struct cmap *m, const char *key, size_t len, uint64_t add)
{
	uint64_t h = ctx_hash_bytes(key, len, cli_hash_seed());
	size_t i;

	if ((m->n + 1) * 2 > m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 1024, j;
		struct cmap_ent *nv = calloc(cap, sizeof(*nv));

		if (!nv)
			return false;
		for (j = 0; j < m->cap; j++) {
			size_t k;

			if (!m->v[j].key)
				continue;
			for (k = m->v[j].h & (cap - 1); nv[k].key;
			     k = (k + 1) & (cap - 1))
				;
			nv[k] = m->v[j];
		}
		free(m->v);
		m->v = nv;
		m->cap = cap;
	}
	for (i = h & (m->cap - 1); m->v[i].key; i = (i + 1) & (m->cap - 1)) {
		if (m->v[i].h == h && strlen(m->v[i].key) == len &&
		    memcmp(m->v[i].key, key, len) == 0) {
			m->v[i].count += add;
			return true;
		}
	}
	m->v[i].key = dup_bytes((const uint8_t *)key, len);
	if (!m->v[i].key)
		return false;
	m->v[i].h = h;
	m->v[i].count = add;
	m->n++;
	return true;
}

static uint64_t *
cmap_find(struct cmap *m, const char *key, size_t len)
{
	uint64_t h;
	size_t i;

	if (!m->cap)
		return NULL;
	h = ctx_hash_bytes(key, len, cli_hash_seed());
	for (i = h & (m->cap - 1); m->v[i].key; i = (i + 1) & (m->cap - 1))
		if (m->v[i].h == h && strlen(m->v[i].key) == len &&
		    memcmp(m->v[i].key, key, len) == 0)
			return &m->v[i].count;
	return NULL;
}

/* The key of the entry whose count cmap_find() returned. */
static const char *
cmap_key(const uint64_t *count)
{
	return ((const struct cmap_ent *)(const void *)((const char *)count -
							offsetof(struct cmap_ent,
								 count)))
		->key;
}

static void
cmap_free(struct cmap *m)
{
	size_t i;

	for (i = 0; i < m->cap; i++)
		free(m->v[i].key);
	free(m->v);
	m->v = NULL;
	m->cap = m->n = 0;
}

/* ---- --folded ---- */

struct sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void
sb_put(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		char *np;

		while (cap < b->len + n + 1)
			cap *= 2;
		np = realloc(b->p, cap);
		if (!np) {
			b->oom = true;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

/* A folded-stack frame: ';' separates frames and the line ends with
 * " count" (the last space-separated field, so spaces in names are
 * fine), so ';' becomes ':'; what the text output escapes
 * (output_cp_escaped(): controls, bidirectional and invisible format
 * characters) and bytes that are not UTF-8 become '?': a frame names what
 * the target said, and the output goes to terminals and other tools. */
static void
sb_frame(struct sbuf *b, const char *s)
{
	const uint8_t *u = (const uint8_t *)s;
	size_t n = strlen(s), i, l;
	uint32_t cp;

	if (b->len)
		sb_put(b, ";", 1);
	for (i = 0; i < n; i += l) {
		l = output_utf8_next(u + i, n - i, &cp);
		if (!l) {
			l = 1;
			sb_put(b, "?", 1);
		} else if (output_cp_escaped(cp)) {
			sb_put(b, "?", 1);
		} else if (cp == ';') {
			sb_put(b, ":", 1);
		} else {
			sb_put(b, s + i, l);
		}
	}
}

/* The folded lines are never all spelled out: a stack's line is up to
 * PFILE_STACK_MAX frames of up to PFILE_STRING_MAX bytes, and a file of a
 * few bytes per stack can hold many.  A line is its first frames (the
 * prefix: service, request, trace; interned, split at ';') and a stack,
 * whose frames are interned folded names (ids: equal ids, equal names).
 * Lines are sorted and merged by comparing those pieces as strcmp() would
 * compare the lines, and printed one piece at a time. */
#define FOLD_NONE UINT32_MAX

struct fold_pre {
	const char *s; /* the prefix, frames joined by ';' (a key of the map) */
	uint32_t n_seg;
	uint32_t off[3], len[3];
};

struct fold_line {
	uint32_t pre;    /* prefix id */
	uint32_t stack;  /* stack id */
	uint32_t marker; /* name id of [no stack] / [truncated], or FOLD_NONE */
	uint64_t count;
};

struct fold {
	const struct prof *p;
	struct fold_pre *pre;
	size_t n_pre;
	uint32_t *fn_name; /* function id -> name id */
	/* the same, for a guessed frame ("f [guessed]"); NULL: no stack
	 * has one */
	uint32_t *fn_gname;
	const char **name; /* name id -> folded name (a key of the map) */
	uint32_t *name_len;
	size_t n_names;
	uint32_t unknown, unknown_g; /* name ids of fn_name()'s "?" */
};

/* The name id of the folded form of s, suffix added (names: name ->
 * id + 1). */
static uint32_t
fold_intern(struct fold *F,
	    struct cmap *names,
	    struct sbuf *b,
	    const char *s,
	    const char *suffix)
{
	uint64_t *slot;

	b->len = 0;
	sb_frame(b, s);
	sb_put(b, suffix, strlen(suffix));
	if (b->oom)
		return FOLD_NONE;
	slot = cmap_find(names, b->p, b->len);
	if (slot)
		return (uint32_t)(*slot - 1);
	if (!cmap_add(names, b->p, b->len, F->n_names + 1))
		return FOLD_NONE;
	slot = cmap_find(names, b->p, b->len);
	F->name[F->n_names] = cmap_key(slot);
	F->name_len[F->n_names] = (uint32_t)b->len;
	return (uint32_t)F->n_names++;
}

static size_t
fold_nseg(const struct fold *F, const struct fold_line *l)
{
	const struct r_stack *st = stack_of(F->p, l->stack);

	return F->pre[l->pre].n_seg + (l->marker != FOLD_NONE) + (st ? st->n : 0);
}

/* Piece i of line l: its bytes and its name id (FOLD_NONE: a prefix
 * frame, compared byte by byte). */
static void
fold_seg(const struct fold *F,
	 const struct fold_line *l,
	 size_t i,
	 const char **s,
	 size_t *n,
	 uint32_t *id)
{
	const struct fold_pre *pr = &F->pre[l->pre];
	const struct r_stack *st;
	uint32_t fn;

	if (i < pr->n_seg) {
		*s = pr->s + pr->off[i];
		*n = pr->len[i];
		*id = FOLD_NONE;
		return;
	}
	i -= pr->n_seg;
	if (l->marker != FOLD_NONE) {
		if (i == 0) {
			*id = l->marker;
			goto name;
		}
		i--;
	}
	/* frames outermost first */
	st = stack_of(F->p, l->stack);
	fn = frame_fn(F->p, st->f[st->n - 1 - i]);
	if (st->n - 1 - i >= st->guessed)
		*id = fn < F->p->fns.n ? F->fn_gname[fn] : F->unknown_g;
	else
		*id = fn < F->p->fns.n ? F->fn_name[fn] : F->unknown;
name:
	*s = F->name[*id];
	*n = F->name_len[*id];
}

/* strcmp() of the two lines, piece by piece: no name holds ';' or NUL,
 * so where one piece is a prefix of the other, the shorter line goes on
 * with ';' (or ends) against a byte of a name. */
static int
fold_cmp(const void *x, const void *y, void *arg)
{
	const struct fold *F = arg;
	const struct fold_line *a = x, *b = y;
	size_t na = fold_nseg(F, a), nb = fold_nseg(F, b), i;

	for (i = 0;; i++) {
		const char *sa, *sb;
		size_t la, lb;
		uint32_t ia, ib;
		int c;

		if (i == na || i == nb)
			return (i < nb) ? -1 : (i < na) ? 1 : 0;
		fold_seg(F, a, i, &sa, &la, &ia);
		fold_seg(F, b, i, &sb, &lb, &ib);
		if (ia != FOLD_NONE && ia == ib)
			continue;
		c = memcmp(sa, sb, la < lb ? la : lb);
		if (c)
			return c;
		if (la == lb)
			continue;
		if (la < lb)
			return (i + 1 < na ? ';' : 0) < (uint8_t)sb[la] ? -1 : 1;
		return (uint8_t)sa[lb] < (i + 1 < nb ? ';' : 0) ? -1 : 1;
	}
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Samples are counted by their prefix and stack id (pairs sorted), and
 * lines that read the same (two stacks may) are merged after sorting. */
static int
report_folded(const struct prof *p, const struct rpt_ctl *ctl)
{
	struct cmap pres = {0}, names = {0};
	struct fold F = {.p = p};
	struct sbuf b = {0};
	struct fold_line *lines = NULL;
	uint64_t *pairs = NULL;
	char svc[SVC_NAME_MAX], req[REQ_NAME_MAX], h[33], th[96];
	uint32_t no_stack, cut, svc_image = UINT32_MAX;
	size_t i, j, n = 0, n_lines = 0;
	bool guessed = false;
	int ret = CLI_EXIT_OK;

	pairs = malloc((p->samples.n ? p->samples.n : 1) * sizeof(*pairs));
	F.fn_name = malloc((p->fns.n ? p->fns.n : 1) * sizeof(*F.fn_name));
	for (i = 0; i < p->stacks.n && !guessed; i++) {
		const struct r_stack *st = (const struct r_stack *)p->stacks.v + i;

		guessed = st->guessed < st->n;
	}
	if (guessed)
		F.fn_gname = malloc((p->fns.n ? p->fns.n : 1) * sizeof(*F.fn_gname));
	/* every function and "?" (twice with guessed frames), the two
	 * markers */
	j = (p->fns.n + 1) * (guessed ? 2 : 1) + 2;
	F.name = malloc(j * sizeof(*F.name));
	F.name_len = malloc(j * sizeof(*F.name_len));
	if (!pairs || !F.fn_name || !F.name || !F.name_len || (guessed && !F.fn_gname))
		goto oom;
	for (i = 0; i < p->samples.n; i++) {
		const struct r_sample *s = (const struct r_sample *)p->samples.v + i;
		const struct r_ctx *c;
		uint64_t *slot;

		if (!sample_matches(p, ctl, s))
			continue;
		c = primary_ctx(p, s);
		b.len = 0;
		/* once per image, not per sample: service_name() walks the
		 * image's resources (samples come in file order, their
		 * images in ascending order) */
		if (s->image != svc_image) {
			service_name(p, s->image, svc, sizeof(svc));
			svc_image = s->image;
		}
		sb_frame(&b, svc);
		if (c) {
			request_name(p, s, req, sizeof(req));
			sb_frame(&b, req[0] ? req : "[unknown request]");
			hex(h, c->trace, 16);
			snprintf(th, sizeof(th), "trace %s", h);
			sb_frame(&b, th);
		} else {
			sb_frame(&b, "[no trace]");
		}
		if (b.oom)
			goto oom;
		slot = cmap_find(&pres, b.p, b.len);
		if (!slot) {
			struct fold_pre *np;

			if (F.n_pre == UINT32_MAX)
				goto oom;
			if ((F.n_pre & (F.n_pre - 1)) == 0) {
				np = realloc(F.pre,
					     (F.n_pre ? 2 * F.n_pre : 1) * sizeof(*np));
				if (!np)
					goto oom;
				F.pre = np;
			}
			if (!cmap_add(&pres, b.p, b.len, F.n_pre + 1))
				goto oom;
			slot = cmap_find(&pres, b.p, b.len);
			F.pre[F.n_pre++] = (struct fold_pre){0};
		}
		pairs[n++] = (*slot - 1) << 32 | s->stack;
	}
	/* the prefixes' own strings and pieces */
	for (i = 0; i < pres.cap; i++) {
		struct fold_pre *pr;
		const char *k = pres.v[i].key, *e;

		if (!k)
			continue;
		pr = &F.pre[pres.v[i].count - 1];
		pr->s = k;
		for (e = k; pr->n_seg < 3; e++) {
			const char *semi = strchr(e, ';');

			pr->off[pr->n_seg] = (uint32_t)(e - k);
			pr->len[pr->n_seg] =
				(uint32_t)(semi ? (size_t)(semi - e) : strlen(e));
			pr->n_seg++;
			if (!semi)
				break;
			e = semi;
		}
	}
	for (i = 0; i < p->fns.n; i++) {
		F.fn_name[i] = fold_intern(&F, &names, &b, fn_name(p, (uint32_t)i), "");
		if (F.fn_name[i] == FOLD_NONE)
			goto oom;
		if (!guessed)
			continue;
		F.fn_gname[i] = fold_intern(&F, &names, &b, fn_name(p, (uint32_t)i),
					    " [guessed]");
		if (F.fn_gname[i] == FOLD_NONE)
			goto oom;
	}
	F.unknown = fold_intern(&F, &names, &b, "?", "");
	F.unknown_g = guessed ? fold_intern(&F, &names, &b, "?", " [guessed]") : 0;
	no_stack = fold_intern(&F, &names, &b, "[no stack]", "");
	cut = fold_intern(&F, &names, &b, "[truncated]", "");
	if (F.unknown == FOLD_NONE || F.unknown_g == FOLD_NONE ||
	    no_stack == FOLD_NONE || cut == FOLD_NONE)
		goto oom;
	/* the distinct (prefix, stack) pairs and their counts */
	qsort(pairs, n, sizeof(*pairs), cmp_u64);
	lines = malloc((n ? n : 1) * sizeof(*lines));
	if (!lines)
		goto oom;
	for (i = 0; i < n; i = j) {
		const struct r_stack *st;
		struct fold_line *l = &lines[n_lines++];

		for (j = i + 1; j < n && pairs[j] == pairs[i]; j++)
			;
		l->pre = (uint32_t)(pairs[i] >> 32);
		l->stack = (uint32_t)pairs[i];
		l->count = j - i;
		st = stack_of(p, l->stack);
		l->marker = !st || !st->n                         ? no_stack
			    : (st->flags & PFILE_STACK_TRUNCATED) ? cut
								  : FOLD_NONE;
		if (!st || !st->n)
			l->stack = 0;
	}
	qsort_r(lines, n_lines, sizeof(*lines), fold_cmp, &F);
	for (i = 0; i < n_lines; i = j) {
		uint64_t count = lines[i].count;
		size_t k, ns = fold_nseg(&F, &lines[i]);

		for (j = i + 1; j < n_lines && fold_cmp(&lines[i], &lines[j], &F) == 0;
		     j++)
			count += lines[j].count;
		for (k = 0; k < ns; k++) {
			const char *s;
			size_t l;
			uint32_t id;

			fold_seg(&F, &lines[i], k, &s, &l, &id);
			if (k)
				putchar(';');
			fwrite(s, 1, l, stdout);
		}
		printf(" %" PRIu64 "\n", count);
	}
	goto out;
oom:
	cli_warn("out of memory");
	ret = CLI_EXIT_FATAL;
out:
	free(pairs);
	free(lines);
	free(b.p);
	free(F.pre);
	free(F.fn_name);
	free(F.fn_gname);
	free(F.name);
	free(F.name_len);
	cmap_free(&pres);
	cmap_free(&names);
	return ret;
}

/* ---- inferred spans ---- */

/* A node of a run's call tree on the path of the last sample: a function
 * seen at one depth in consecutive samples with the same frames above it.
 * Only that path is kept (at most PFILE_STACK_MAX nodes): a node that
 * leaves it is complete and becomes a span (or not) at once. */
struct onode {
	uint32_t fn;
	uint32_t count;
	uint32_t n_children;
	uint64_t start, end;
	/* spans of closed children waiting for this node's span id (their
	 * parent): index in the spans + 1, linked through ispan.next */
	uint32_t pending;
	/* once closed: the span it is (or was folded into) */
	bool is_span;
	int span;      /* its index in the spans, -1: left out (or none) */
	uint8_t id[8]; /* its id, left out or not */
};

struct ispan {
	uint8_t trace[16], span_id[8], parent[8];
	bool has_parent;
	uint32_t fn;
	uint32_t depth;
	uint32_t *chain; /* the functions folded into it, outermost first */
	uint32_t n_chain;
	uint64_t start, end;
	uint32_t count;
	uint32_t tid;
	uint32_t next; /* see onode.pending */
	uint8_t kind;  /* layout of the context */
	bool context_span;
	uint32_t sample; /* context spans: the first sample (name, attributes) */
	uint32_t image;  /* the program image whose resource it goes under */
};

/* The spans for the output: at most max (all of them are sorted before
 * the first is printed); dropped counts the ones left out.  Inferred
 * spans deeper than depth_cut are left out, and those at depth_cut past
 * the first cut_room (make_spans()); by_depth counts the inferred spans
 * made at each depth, kept or not. */
struct spans {
	struct ispan *v;
	size_t n, cap, max, dropped;
	uint32_t depth_cut;
	size_t cut_room;
	size_t by_depth[PFILE_STACK_MAX];
	bool oom;
};

/* A new span, of a call depth (CTX_SPAN_DEPTH: a context span). */
#define CTX_SPAN_DEPTH UINT32_MAX

static struct ispan *
add_span(struct spans *S, uint32_t depth)
{
	if (depth < PFILE_STACK_MAX)
		S->by_depth[depth]++;
	if (S->n >= S->max || (depth != CTX_SPAN_DEPTH && depth >= S->depth_cut &&
			       (depth > S->depth_cut || !S->cut_room))) {
		S->dropped++;
		return NULL;
	}
	if (depth == S->depth_cut)
		S->cut_room--;
	if (S->n == S->cap) {
		size_t cap = S->cap ? S->cap * 2 : 64;
		struct ispan *nv;

		if (cap > S->max)
			cap = S->max;
		nv = realloc(S->v, cap * sizeof(*nv));
		if (!nv) {
			S->oom = true;
			return NULL;
		}
		S->v = nv;
		S->cap = cap;
	}
	memset(&S->v[S->n], 0, sizeof(S->v[0]));
	return &S->v[S->n++];
}

/* Fold fn into sp (sp->fn is its first function, kept without a chain:
 * most spans fold nothing). */
static void
chain_add(struct spans *S, struct ispan *sp, uint32_t fn)
{
	uint32_t *nc;

	nc = realloc(sp->chain, (sp->n_chain + 1) * sizeof(*nc));
	if (!nc) {
		S->oom = true;
		return;
	}
	if (!sp->chain)
		nc[0] = sp->fn;
	sp->chain = nc;
	sp->chain[sp->n_chain++] = fn;
}

static uint32_t
chain_fn(const struct ispan *sp, uint32_t k)
{
	return sp->chain ? sp->chain[k] : sp->fn;
}

/* Deterministic, non-zero span ids: a hash of what makes the span. */
static void
make_span_id(uint8_t out[8],
	     const uint8_t trace[16],
	     uint32_t tid,
	     uint64_t start,
	     uint32_t depth,
	     uint32_t fn)
{
	uint64_t h = 0x9e3779b97f4a7c15ull, v[5] = {0};
	unsigned i;

	memcpy(&v[0], trace, 8);
	memcpy(&v[1], trace + 8, 8);
	v[2] = tid;
	v[3] = start;
	v[4] = (uint64_t)depth << 32 | fn;
	for (i = 0; i < 5; i++) {
		h ^= v[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
		h ^= h >> 31;
		h *= 0xbf58476d1ce4e5b9ull;
		h ^= h >> 27;
	}
	if (!h)
		h = 1;
	memcpy(out, &h, 8);
}

/* What the spans of one run share. */
struct run {
	const struct r_ctx *c;
	uint32_t tid;
	unsigned min_samples;
	bool collapse;
};

/* The parent of the spans waiting for nd: its span, or (nd is plumbing)
 * the context's span. */
static void
resolve_pending(struct spans *S, struct onode *nd, const struct run *R)
{
	uint32_t k;

	for (k = nd->pending; k; k = S->v[k - 1].next) {
		struct ispan *sp = &S->v[k - 1];

		if (nd->is_span) {
			memcpy(sp->parent, nd->id, 8);
			sp->has_parent = true;
		} else if (!w3c_id_is_zero(R->c->span, 8)) {
			memcpy(sp->parent, R->c->span, 8);
			sp->has_parent = true;
		}
	}
	nd->pending = 0;
}

/* The open nodes at depths [from, to) leave the path (complete), parents
 * first: every one at depth plumb or deeper seen in at least min_samples
 * samples is a span named after its function, from its first to its
 * last sample, whose parent is the span of the enclosing frame (for the
 * outermost ones, the context's span).  With collapse, a node that is its
 * parent's only child over exactly the same samples is folded into the
 * parent's span instead (a call chain always seen whole: one span named
 * after its outermost frame, Elastic's pillar removal the other way up).
 *
 * A node at depth from has an open parent (from > 0): that one went on
 * into the next sample, so it has more samples (no folding) and its span
 * id is not known yet (it may fold into its own parent): the span waits
 * on the parent's pending list.  Plumbing is only known when the run
 * ends; a node that closes before cannot be plumbing (see infer()). */
static void
close_nodes(struct spans *S,
	    struct onode *open,
	    size_t from,
	    size_t to,
	    uint32_t plumb,
	    const struct run *R)
{
	size_t d;

	for (d = from; d < to && !S->oom; d++) {
		struct onode *nd = &open[d];
		struct onode *pa = d ? &open[d - 1] : NULL;
		bool pa_open = pa && d == from;
		struct ispan *sp;

		nd->is_span = false;
		nd->span = -1;
		if (d < plumb || nd->count < R->min_samples) {
			resolve_pending(S, nd, R);
			continue;
		}
		if (R->collapse && pa && !pa_open && pa->is_span &&
		    pa->n_children == 1 && pa->count == nd->count &&
		    pa->start == nd->start && pa->end == nd->end) {
			nd->is_span = true;
			nd->span = pa->span;
			memcpy(nd->id, pa->id, 8);
			if (nd->span >= 0)
				chain_add(S, &S->v[nd->span], nd->fn);
			resolve_pending(S, nd, R);
			continue;
		}
		nd->is_span = true;
		make_span_id(nd->id, R->c->trace, R->tid, nd->start, (uint32_t)d,
			     nd->fn);
		sp = add_span(S, (uint32_t)d);
		if (sp) {
			memcpy(sp->trace, R->c->trace, 16);
			memcpy(sp->span_id, nd->id, 8);
			sp->fn = nd->fn;
			sp->depth = (uint32_t)d;
			sp->n_chain = 1;
			sp->start = nd->start;
			sp->end = nd->end;
			sp->count = nd->count;
			sp->tid = R->tid;
			sp->kind = R->c->kind;
			sp->image = R->c->image;
			nd->span = (int)(sp - S->v);
			if (pa_open) {
				sp->next = pa->pending;
				pa->pending = (uint32_t)nd->span + 1;
			} else if (pa && pa->is_span) {
				memcpy(sp->parent, pa->id, 8);
				sp->has_parent = true;
			} else if (!w3c_id_is_zero(R->c->span, 8)) {
				memcpy(sp->parent, R->c->span, 8);
				sp->has_parent = true;
			}
		}
		resolve_pending(S, nd, R);
	}
}

struct tsample {
	uint32_t tid;
	uint32_t idx; /* sample index: file (time) order */
};

static int
cmp_tsample(const void *a, const void *b)
{
	const struct tsample *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return (x->idx > y->idx) - (x->idx < y->idx);
}

static bool
same_ctx(const struct r_ctx *a, const struct r_ctx *b)
{
	return a && b && a->image == b->image && memcmp(a->trace, b->trace, 16) == 0 &&
	       memcmp(a->span, b->span, 8) == 0;
}

/* The idle stacks (below) as a trie of their functions, outermost first:
 * how far a run's trunk goes down some idle stack is then one walk of the
 * trunk, not one comparison per idle stack and run (a hostile file can
 * hold millions of one-sample runs).  Open addressing on (node, function);
 * node 0 is the root, the others count from 1. */
struct idle_trie {
	struct trie_ent {
		uint32_t parent, fn, child; /* child 0: empty slot */
	} * v;
	size_t cap;
	uint32_t n_nodes;
};

static size_t
trie_slot(const struct idle_trie *t, uint32_t parent, uint32_t fn)
{
	uint64_t h = ((uint64_t)parent << 32 | fn) * 0x9e3779b97f4a7c15ull;
	size_t i;

	for (i = (size_t)(h >> 20) & (t->cap - 1); t->v[i].child;
	     i = (i + 1) & (t->cap - 1))
		if (t->v[i].parent == parent && t->v[i].fn == fn)
			break;
	return i;
}

/* Build the trie of the stacks idle[0..n); false when out of memory. */
static bool
trie_build(struct idle_trie *t, const struct prof *p, const uint32_t *idle, size_t n)
{
	size_t total = 0, i, d;

	for (i = 0; i < n; i++) {
		const struct r_stack *st = stack_of(p, idle[i]);

		total += st ? st->n : 0;
	}
	t->cap = 64;
	while (t->cap < 2 * total + 2)
		t->cap *= 2;
	t->v = calloc(t->cap, sizeof(*t->v));
	t->n_nodes = 0;
	if (!t->v)
		return false;
	for (i = 0; i < n; i++) {
		const struct r_stack *st = stack_of(p, idle[i]);
		uint32_t node = 0, L = st ? st->n : 0;

		for (d = 0; d < L; d++) {
			uint32_t fn = frame_fn(p, st->f[L - 1 - d]);
			size_t k = trie_slot(t, node, fn);

			if (!t->v[k].child)
				t->v[k] = (struct trie_ent){node, fn, ++t->n_nodes};
			node = t->v[k].child;
		}
	}
	return true;
}

/* How many of the trunk's frames (trunk[0..n), outermost first) some idle
 * stack starts with. */
static uint32_t
trie_prefix(const struct idle_trie *t, const uint32_t *trunk, uint32_t n)
{
	uint32_t node = 0, d;

	for (d = 0; d < n; d++) {
		size_t k = trie_slot(t, node, trunk[d]);

		if (!t->v[k].child)
			break;
		node = t->v[k].child;
	}
	return d;
}

/* Idle stacks bound the plumbing of a run; this many distinct ones are
 * looked at. */
#define MAX_IDLE_STACKS 512

/* Whether st holds a sample's stack from its innermost frame to its
 * outermost one, none of it guessed: only then are its frames at known
 * depths. */
static bool
whole_stack(const struct r_stack *st)
{
	return st && st->n && !(st->flags & PFILE_STACK_TRUNCATED) &&
	       st->guessed == st->n;
}

/* The end of a run's call tree (open[0..depth_open), trunk_n frames of
 * it seen in every sample): every node is complete; the trunk's frames
 * that idle threads run too are plumbing. */
static void
end_tree(struct spans *S,
	 struct onode *open,
	 size_t depth_open,
	 uint32_t *trunk,
	 size_t trunk_n,
	 const struct idle_trie *trie,
	 size_t n_idle,
	 const struct run *R)
{
	uint32_t plumb;
	size_t d;

	for (d = 0; d < trunk_n; d++)
		trunk[d] = open[d].fn;
	plumb = n_idle ? trie_prefix(trie, trunk, (uint32_t)trunk_n) : 0;
	/* No idle stack shares even the run's outermost frame: no thread was
	 * idle, or only threads of another kind (the main thread, while
	 * every worker was busy).  Where the run's plumbing ends is then
	 * unknown, and its thread start is never a span. */
	if (plumb == 0)
		plumb = trunk_n ? (uint32_t)trunk_n - 1 : 0;
	close_nodes(S, open, 0, depth_open, plumb, R);
}

/* The runs of every thread: the longest sequences of its samples in one
 * context span.  Each becomes a call tree (a node per function and depth,
 * extended while following samples keep the same frames above it) and
 * its spans.  The frames at the top of the run's stacks that threads of
 * the process also run outside any context (thread start, connection or
 * event loop: where a context gets attached) are plumbing, not spans; if
 * no sample without a context shares the run's outermost frame (none is
 * without a context, or only another kind of thread is), only the deepest
 * frame every sample of the run shares and the frames below it are.
 *
 * Only the path of the last sample is kept (close_nodes()).  The trunk
 * (the first sample's nodes seen in every sample) is what is left open of
 * the first sample's path, and plumbing never goes deeper than the
 * trunk: so a node that leaves the path before the run ends, at a depth
 * where the trunk then stops at the latest, is no plumbing. */
static void
infer(const struct prof *p, const struct rpt_ctl *ctl, struct spans *S)
{
	struct tsample *ts = malloc((p->samples.n ? p->samples.n : 1) * sizeof(*ts));
	uint32_t *trunk = NULL, *idle = NULL;
	uint8_t *seen = calloc(p->stacks.n ? p->stacks.n : 1, 1);
	struct idle_trie trie = {0};
	struct onode *open = NULL;
	size_t n = p->samples.n, i, open_cap = 0, n_idle = 0;

	idle = malloc(MAX_IDLE_STACKS * sizeof(*idle));
	if (!ts || !seen || !idle) {
		S->oom = true;
		free(ts);
		free(seen);
		free(idle);
		return;
	}
	/* the distinct stacks of samples of no request: without a trace
	 * context and without request attributes (as in the summary), not
	 * those of a request that came without a traceparent under
	 * CTXSHIM_NEW_TRACES=0 (zero ids): that one runs the handler, and
	 * its frames would be taken for plumbing in the traced runs */
	for (i = 0; i < n && n_idle < MAX_IDLE_STACKS; i++) {
		const struct r_sample *s = (const struct r_sample *)p->samples.v + i;

		if (whole_stack(stack_of(p, s->stack)) && !seen[s->stack] &&
		    !primary_ctx(p, s) && !sample_attr_any(p, s, method_keys) &&
		    !sample_attr_any(p, s, path_keys)) {
			seen[s->stack] = 1;
			idle[n_idle++] = s->stack;
		}
	}
	if (!trie_build(&trie, p, idle, n_idle)) {
		S->oom = true;
		n = 0;
	}
	for (i = 0; i < n; i++)
		ts[i] = (struct tsample){((const struct r_sample *)p->samples.v)[i].tid,
					 (uint32_t)i};
	qsort(ts, n, sizeof(*ts), cmp_tsample);
	for (i = 0; i < n && !S->oom;) {
		const struct r_sample *s0 =
			(const struct r_sample *)p->samples.v + ts[i].idx;
		struct run R = {primary_ctx(p, s0), ts[i].tid, ctl->min_samples,
				ctl->collapse};
		size_t j, depth_open = 0, k, d, trunk_n = 0;
		bool have_trunk = false, match = R.c && sample_matches(p, ctl, s0);

		/* the filters select samples, not runs: the contexts of one
		 * span may differ in their attributes (a route set once it
		 * is known), so a run is the samples the filters agree on */
		for (j = i + 1; j < n && ts[j].tid == ts[i].tid; j++) {
			const struct r_sample *sj =
				(const struct r_sample *)p->samples.v + ts[j].idx;

			if (!same_ctx(primary_ctx(p, sj), R.c) ||
			    sample_matches(p, ctl, sj) != match)
				break;
		}
		if (!match) {
			i = j;
			continue;
		}
		/* the call tree of samples [i, j) */
		for (k = i; k < j && !S->oom; k++) {
			const struct r_sample *s =
				(const struct r_sample *)p->samples.v + ts[k].idx;
			const struct r_stack *st = stack_of(p, s->stack);
			uint64_t t = round_time(p, s->round);
			size_t L = st ? st->n : 0, common = 0;

			/* A sample without its whole stack (unwinding failed,
			 * or stopped short of the outermost frame) cannot be
			 * placed in the tree: taken for outermost frames, its
			 * frames would end every open node as if they had
			 * returned and cut the trunk (plumbing) to nothing.
			 * What it hides is unknown: the tree ends there, and
			 * the samples after it make another. */
			if (!whole_stack(st)) {
				end_tree(S, open, depth_open, trunk, trunk_n, &trie,
					 n_idle, &R);
				depth_open = trunk_n = 0;
				have_trunk = false;
				continue;
			}
			if (L > open_cap) {
				struct onode *no = realloc(open, L * sizeof(*no));
				uint32_t *nt = realloc(trunk, L * sizeof(*nt));

				if (no)
					open = no;
				if (nt)
					trunk = nt;
				if (!no || !nt) {
					S->oom = true;
					break;
				}
				open_cap = L;
			}
			/* frames outermost first: st->f[L - 1 - d] */
			while (common < depth_open && common < L &&
			       open[common].fn == frame_fn(p, st->f[L - 1 - common]))
				common++;
			/* the path below common ends: complete nodes */
			close_nodes(S, open, common, depth_open, 0, &R);
			if (!have_trunk)
				trunk_n = L;
			else if (common < trunk_n)
				trunk_n = common;
			for (d = 0; d < common; d++) {
				open[d].end = t;
				open[d].count++;
			}
			for (d = common; d < L; d++) {
				open[d] = (struct onode){
					.fn = frame_fn(p, st->f[L - 1 - d]),
					.count = 1,
					.start = t,
					.end = t,
				};
				if (d)
					open[d - 1].n_children++;
			}
			depth_open = L;
			have_trunk = true;
		}
		if (S->oom)
			break;
		/* plumbing: what idle threads run too */
		end_tree(S, open, depth_open, trunk, trunk_n, &trie, n_idle, &R);
		i = j;
	}
	free(trunk);
	free(open);
	free(ts);
	free(seen);
	free(idle);
	free(trie.v);
}

static void
json_kv_str(FILE *f, bool *first, const char *key, const char *val, size_t vlen)
{
	fputs(*first ? "" : ",", f);
	*first = false;
	fputs("{\"key\":", f);
	output_json_string(f, (const uint8_t *)key, strlen(key));
	fputs(",\"value\":{\"stringValue\":", f);
	output_json_string(f, (const uint8_t *)val, vlen);
	fputs("}}", f);
}

static void
json_kv_int(FILE *f, bool *first, const char *key, int64_t v)
{
	fputs(*first ? "" : ",", f);
	*first = false;
	fputs("{\"key\":", f);
	output_json_string(f, (const uint8_t *)key, strlen(key));
	/* OTLP/JSON: 64-bit integers are decimal strings */
	fprintf(f, ",\"value\":{\"intValue\":\"%" PRId64 "\"}}", v);
}

static void
json_kv_bool(FILE *f, bool *first, const char *key, bool v)
{
	fputs(*first ? "" : ",", f);
	*first = false;
	fputs("{\"key\":", f);
	output_json_string(f, (const uint8_t *)key, strlen(key));
	fprintf(f, ",\"value\":{\"boolValue\":%s}}", v ? "true" : "false");
}

static void
json_resource(FILE *f, const struct prof *p, uint32_t image)
{
	const struct r_image *im = image_at(p, image);
	bool first = true, have_svc = false, have_pid = false;
	char svc[SVC_NAME_MAX];
	unsigned i;

	fputs("\"resource\":{\"attributes\":[", f);
	if (im->pd) {
		for (i = 0; i < im->pd->n_resource; i++) {
			const struct pctx_attr *a = &im->pd->resource[i];
			char key[256];
			size_t kl = a->key.len < sizeof(key) - 1 ? a->key.len
								 : sizeof(key) - 1;

			if (kl) /* an attribute without a key has no pointer */
				memcpy(key, a->key.ptr, kl);
			key[kl] = '\0';
			have_svc |= strcmp(key, "service.name") == 0;
			/* a process context's process.pid that is no pid (a
			 * crafted file's) is left out: the INFO record's
			 * stands in for it */
			if (strcmp(key, "process.pid") == 0) {
				if (a->type != PCTX_V_INT || !pid_valid(a->i))
					continue;
				have_pid = true;
			}
			switch (a->type) {
			case PCTX_V_STRING:
				json_kv_str(f, &first, key, (const char *)a->str.ptr,
					    a->str.len);
				break;
			case PCTX_V_INT:
				json_kv_int(f, &first, key, a->i);
				break;
			case PCTX_V_BOOL:
				json_kv_bool(f, &first, key, a->b);
				break;
			case PCTX_V_DOUBLE:
				if (a->d == a->d && a->d < 1.7e308 && a->d > -1.7e308) {
					fputs(first ? "" : ",", f);
					first = false;
					fputs("{\"key\":", f);
					output_json_string(f, (const uint8_t *)key, kl);
					fprintf(f,
						",\"value\":{\"doubleValue\":%.17g}}",
						a->d);
				}
				break;
			default:
				break;
			}
		}
	} else {
		for (i = 0; i < im->resource.n; i++) {
			const struct r_kv *kv = (const struct r_kv *)im->resource.v + i;

			have_svc |= strcmp(kv->key, "service.name") == 0;
			json_kv_str(f, &first, kv->key, kv->value, strlen(kv->value));
		}
	}
	if (!have_svc) {
		service_name(p, image, svc, sizeof(svc));
		json_kv_str(f, &first, "service.name", svc, strlen(svc));
	}
	if (p->has_info && p->pid && !have_pid)
		json_kv_int(f, &first, "process.pid", (int64_t)p->pid);
	fputs("]}", f);
}

/* Whether key, an attribute key of context c, stands for an index the key
 * map lacked: the recorder writes such a key as "#N" (record.c), as the
 * dump shows it.  OTEP-4947 has readers ignore an attribute whose index is
 * not in the key map, and "#7" as an OTLP key would be made-up data.  A
 * key map may name a key "#7" itself: that one is a key. */
static bool
unknown_index_key(const struct prof *p, const struct r_ctx *c, const char *key)
{
	const struct pctx_decoded *pd = image_at(p, c->image)->pd;
	size_t i, kl;

	if (c->kind != LAY_OTEL || key[0] != '#' || !key[1])
		return false;
	for (kl = 1; key[kl]; kl++)
		if (key[kl] < '0' || key[kl] > '9')
			return false;
	for (i = 0; pd && i < pd->n_keys; i++)
		if (pd->key_map[i].len == kl &&
		    memcmp(pd->key_map[i].ptr, key, kl) == 0)
			return false;
	return true;
}

/* Attribute keys of a context (key string ids), then their position. */
static int
cmp_attr_key(const void *a, const void *b, void *arg)
{
	const struct prof *p = arg;
	const uint32_t *x = *(const uint32_t *const *)a,
		       *y = *(const uint32_t *const *)b;
	int c = strcmp(str(p, x[0]), str(p, y[0]));

	return c ? c : (x > y) - (x < y);
}

/* The keys ctxdump itself gives a context span (json_span; thread.name
 * only if the thread has a name: named). */
static const char *const ctx_span_own_keys[] = {"ctxdump.inferred", "ctxdump.samples",
						"thread.id", "thread.name",
						"ctxdump.layout"};

/* Which attributes of context c a span leaves out (keep[k] false): those
 * of an index the key map lacked, and every key already in the span.
 * OTLP keys must be unique within a span; two keys the recording cut to
 * the same 256 bytes (PFILE_STRING_MAX) or a key ctxdump sets itself
 * would repeat one.  The first one stays: ctxdump's own keys are facts
 * of the sample, a cut key's value is as likely either one's, and
 * suffixing a key to make it unique would make up a name.  Returns how
 * many are left out (OTLP droppedAttributesCount). */
static uint32_t
ctx_span_attrs(const struct prof *p, const struct r_ctx *c, bool named, bool keep[])
{
	const size_t n_own = sizeof(ctx_span_own_keys) / sizeof(ctx_span_own_keys[0]);
	const uint32_t *by_key[LAY_ATTRS_MAX];
	uint32_t k, n = 0, dropped = 0;
	size_t i;

	for (k = 0; k < c->n && k < LAY_ATTRS_MAX; k++) {
		const char *key = str(p, c->kv[2 * k]);

		keep[k] = !unknown_index_key(p, c, key);
		for (i = 0; keep[k] && i < n_own; i++)
			keep[k] = strcmp(key, ctx_span_own_keys[i]) != 0 ||
				  (!named && strcmp(key, "thread.name") == 0);
		if (keep[k])
			by_key[n++] = &c->kv[2 * k];
		else
			dropped++;
	}
	qsort_r(by_key, n, sizeof(by_key[0]), cmp_attr_key, (void *)p);
	for (i = 1; i < n; i++) {
		if (strcmp(str(p, by_key[i][0]), str(p, by_key[i - 1][0])) == 0) {
			keep[(by_key[i] - c->kv) / 2] = false;
			dropped++;
		}
	}
	return dropped;
}

static void
json_span(FILE *f, const struct prof *p, const struct ispan *sp)
{
	const struct r_sample *s =
		sp->context_span ? (const struct r_sample *)p->samples.v + sp->sample
				 : NULL;
	const struct r_ctx *c = s ? primary_ctx(p, s) : NULL;
	char tid_hex[33], id_hex[17], par_hex[17], frames[2048], req[REQ_NAME_MAX];
	bool first = true, keep[LAY_ATTRS_MAX];
	size_t fl = 0;
	uint32_t k, dropped = 0;

	hex(tid_hex, sp->trace, 16);
	hex(id_hex, sp->span_id, 8);
	fputs("{\"traceId\":\"", f);
	fputs(tid_hex, f);
	fputs("\",\"spanId\":\"", f);
	fputs(id_hex, f);
	fputc('"', f);
	if (sp->has_parent) {
		hex(par_hex, sp->parent, 8);
		fprintf(f, ",\"parentSpanId\":\"%s\"", par_hex);
	}
	fputs(",\"name\":", f);
	if (sp->context_span) {
		request_name(p, s, req, sizeof(req));
		if (!req[0])
			snprintf(req, sizeof(req), "[context span]");
		output_json_string(f, (const uint8_t *)req, strlen(req));
	} else {
		output_json_string(f, (const uint8_t *)fn_name(p, sp->fn),
				   strlen(fn_name(p, sp->fn)));
	}
	/* SPAN_KIND_INTERNAL (1); context spans: SPAN_KIND_SERVER (2) */
	fprintf(f, ",\"kind\":%d", sp->context_span ? 2 : 1);
	fprintf(f,
		",\"startTimeUnixNano\":\"%" PRIu64 "\",\"endTimeUnixNano\":\"%" PRIu64
		"\"",
		wall_ns(p, sp->start), wall_ns(p, sp->end));
	fputs(",\"attributes\":[", f);
	if (!sp->context_span) {
		json_kv_str(f, &first, "code.function.name", fn_name(p, sp->fn),
			    strlen(fn_name(p, sp->fn)));
		/* the call chain folded into the span, outermost first */
		for (k = 0; k < sp->n_chain; k++) {
			const char *nm = fn_name(p, chain_fn(sp, k));
			size_t l = strlen(nm);

			if (fl + l + 2 > sizeof(frames))
				break;
			if (k)
				frames[fl++] = ';';
			memcpy(frames + fl, nm, l);
			fl += l;
		}
		json_kv_str(f, &first, "ctxdump.frames", frames, fl);
	}
	json_kv_bool(f, &first, "ctxdump.inferred", !sp->context_span);
	json_kv_int(f, &first, "ctxdump.samples", sp->count);
	json_kv_int(f, &first, "thread.id", sp->tid);
	{
		const char *tn = thread_name(p, sp->image, sp->tid);

		if (*tn)
			json_kv_str(f, &first, "thread.name", tn, strlen(tn));
	}
	json_kv_str(f, &first, "ctxdump.layout", lay_symbol((enum lay_kind)sp->kind),
		    strlen(lay_symbol((enum lay_kind)sp->kind)));
	if (c)
		dropped =
			ctx_span_attrs(p, c, *thread_name(p, sp->image, sp->tid), keep);
	for (k = 0; c && k < c->n && k < LAY_ATTRS_MAX; k++) {
		const char *v = str(p, c->kv[2 * k + 1]);

		if (keep[k])
			json_kv_str(f, &first, str(p, c->kv[2 * k]), v, strlen(v));
	}
	fputc(']', f);
	if (dropped)
		fprintf(f, ",\"droppedAttributesCount\":%" PRIu32, dropped);
	fputc('}', f);
}

static int
cmp_span(const void *a, const void *b)
{
	const struct ispan *x = a, *y = b;
	int c;

	/* the spans of each program image together (report_spans()) */
	if (x->image != y->image)
		return x->image < y->image ? -1 : 1;
	c = memcmp(x->trace, y->trace, 16);
	if (c)
		return c;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->context_span != y->context_span)
		return x->context_span ? -1 : 1;
	if (x->end != y->end)
		return x->end > y->end ? -1 : 1;
	/* the order does not depend on the one spans were made in */
	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return memcmp(x->span_id, y->span_id, 8);
}

/* Contexts by trace and span id (then id): qsort_r() on context ids. */
static int
cmp_ctx_span(const void *a, const void *b, void *arg)
{
	const struct r_ctx *v = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	int c = (v[x].image > v[y].image) - (v[x].image < v[y].image);

	if (!c)
		c = memcmp(v[x].trace, v[y].trace, 16);
	if (!c)
		c = memcmp(v[x].span, v[y].span, 8);
	return c ? c : (x > y) - (x < y);
}

/* --context-spans: one span per context span seen, from its first to its
 * last sample, so that a viewer can show the inferred spans without the
 * SDK's own export.  Contexts with the same trace and span id (their
 * attributes changed) are one span: the contexts are sorted by those ids
 * once, not compared with every span made so far.  A span refers to its
 * last sample (name, attributes) instead of copying from it. */
#define CS_NONE    UINT32_MAX
#define CS_DROPPED (UINT32_MAX - 1)

/* A context span's parent: the incoming span libctxshim.so publishes. */
static void
set_ctx_span_parent(const struct prof *p, const struct r_sample *s, struct ispan *sp)
{
	const char *par = sample_attr(p, s, "ctxshim.parent_span_id");

	if (par && strlen(par) == 16 && w3c_hex_decode(sp->parent, par, 8) == 0 &&
	    !w3c_id_is_zero(sp->parent, 8))
		sp->has_parent = true;
}

static void
add_context_spans(const struct prof *p, const struct rpt_ctl *ctl, struct spans *S)
{
	const struct r_ctx *cv = p->ctxs.v;
	size_t nc = p->ctxs.n ? p->ctxs.n : 1, i, n = 0;
	uint32_t *ids = malloc(nc * sizeof(*ids));
	uint32_t *group = malloc(nc * sizeof(*group)); /* ctx id -> group */
	uint32_t *gspan = malloc(nc * sizeof(*gspan)); /* group -> span + 1 */
	uint32_t g = 0;

	if (!ids || !group || !gspan) {
		S->oom = true;
		goto out;
	}
	for (i = 0; i < p->ctxs.n; i++) {
		group[i] = CS_NONE;
		gspan[i] = CS_NONE;
		if (i && (cv[i].flags & PFILE_CTX_TRACE) &&
		    !w3c_id_is_zero(cv[i].span, 8))
			ids[n++] = (uint32_t)i;
	}
	qsort_r(ids, n, sizeof(*ids), cmp_ctx_span, (void *)cv);
	for (i = 0; i < n; i++) {
		if (i && (cv[ids[i]].image != cv[ids[i - 1]].image ||
			  memcmp(cv[ids[i]].trace, cv[ids[i - 1]].trace, 16) != 0 ||
			  memcmp(cv[ids[i]].span, cv[ids[i - 1]].span, 8) != 0))
			g++;
		group[ids[i]] = g;
	}
	for (i = 0; i < p->samples.n && !S->oom; i++) {
		const struct r_sample *s = (const struct r_sample *)p->samples.v + i;
		const struct r_ctx *c = primary_ctx(p, s);
		uint64_t t = round_time(p, s->round);
		struct ispan *sp;
		uint32_t *gs;

		if (!c || w3c_id_is_zero(c->span, 8) || !sample_matches(p, ctl, s))
			continue;
		gs = &gspan[group[c - cv]];
		if (*gs == CS_DROPPED)
			continue;
		if (*gs != CS_NONE) {
			sp = &S->v[*gs];
			if (t < sp->start)
				sp->start = t;
			/* the last sample names it: a span's attributes grow
			 * while it runs (a route is set once it is known) */
			if (t >= sp->end) {
				sp->end = t;
				sp->sample = (uint32_t)i;
			}
			sp->count++;
			if (!sp->has_parent)
				set_ctx_span_parent(p, s, sp);
			continue;
		}
		sp = add_span(S, CTX_SPAN_DEPTH);
		if (!sp) {
			*gs = CS_DROPPED;
			continue;
		}
		*gs = (uint32_t)(sp - S->v);
		memcpy(sp->trace, c->trace, 16);
		memcpy(sp->span_id, c->span, 8);
		sp->start = sp->end = t;
		sp->count = 1;
		sp->tid = s->tid;
		sp->kind = c->kind;
		sp->image = c->image;
		sp->context_span = true;
		sp->sample = (uint32_t)i;
		set_ctx_span_parent(p, s, sp);
	}
out:
	free(ids);
	free(group);
	free(gspan);
}

/* Spans past --max-spans are the deepest ones: every span printed has
 * its parent printed too (or, outermost, the context's span, which is
 * the application's), never one that was left out, which a trace viewer
 * could not place.  Context spans come first; then, if the inferred ones
 * did not all fit, they are made again, keeping every one at a depth all
 * of whose spans fit, and the first ones made at the next depth in the
 * room the shallower ones leave (a span's parent is at a smaller depth:
 * its enclosing frame, or what that was folded into).  A node's children
 * close before it does, so a cut by the order spans are made in would
 * keep children of a parent it left out.  A span left out changes
 * nothing of the others: the second pass makes the same spans. */
static void
make_spans(const struct prof *p, const struct rpt_ctl *ctl, struct spans *S)
{
	size_t n_ctx, dropped_ctx, sum = 0, i;
	uint32_t d;

	S->depth_cut = UINT32_MAX;
	if (ctl->context_spans)
		add_context_spans(p, ctl, S);
	n_ctx = S->n;
	dropped_ctx = S->dropped;
	infer(p, ctl, S);
	if (S->oom || S->dropped == dropped_ctx || S->max <= n_ctx)
		return;
	for (d = 0; d < PFILE_STACK_MAX && sum + S->by_depth[d] <= S->max - n_ctx; d++)
		sum += S->by_depth[d];
	for (i = n_ctx; i < S->n; i++)
		free(S->v[i].chain);
	S->n = n_ctx;
	S->dropped = dropped_ctx;
	S->depth_cut = d;
	S->cut_room = S->max - n_ctx - sum;
	infer(p, ctl, S);
}

static int
report_spans(const struct prof *p, const struct rpt_ctl *ctl)
{
	struct spans S = {.max = ctl->max_spans};
	size_t i;
	uint32_t im;
	bool first;
	int ret = CLI_EXIT_OK;

	make_spans(p, ctl, &S);
	if (S.oom) {
		cli_warn("out of memory");
		ret = CLI_EXIT_FATAL;
		goto out;
	}
	if (S.dropped) {
		cli_warn("%s: more than %zu span%s: %zu left out (see --max-spans)",
			 ctl->name, S.max, CLI_PL(S.max), S.dropped);
		ret = CLI_EXIT_PARTIAL;
	}
	if (S.n)
		qsort(S.v, S.n, sizeof(*S.v), cmp_span);
	/* one ResourceSpans per program image (the first always): each
	 * image's spans under its own service.  S.v is sorted by image
	 * first (cmp_span()): one pass, whatever the number of EXEC
	 * records (a scan of the spans per image was quadratic). */
	fputs("{\"resourceSpans\":[", stdout);
	for (i = 0, im = 0;;) {
		fputc('{', stdout);
		json_resource(stdout, p, im);
		fputs(",\"scopeSpans\":[{\"scope\":{\"name\":\"ctxdump\",\"version\":"
		      "\"" CTXSHIM_VERSION "\"},\"spans\":[",
		      stdout);
		for (first = true; i < S.n && S.v[i].image == im; i++) {
			fputs(first ? "\n" : ",\n", stdout);
			first = false;
			json_span(stdout, p, &S.v[i]);
		}
		fputs("\n]}]}", stdout);
		if (i >= S.n)
			break;
		im = S.v[i].image;
		fputc(',', stdout);
	}
	fputs("]}\n", stdout);
out:
	for (i = 0; i < S.n; i++)
		free(S.v[i].chain);
	free(S.v);
	return ret;
}

/* ---- text summary ---- */

struct fcount {
	uint32_t fn;
	uint64_t total, self;
	uint32_t seen;  /* last sample counted (for total) + 1 */
	uint32_t depth; /* smallest depth, counted from the outermost frame */
	bool pick;
};

static int
cmp_fcount(const void *a, const void *b)
{
	const struct fcount *x = a, *y = b;

	if (x->pick != y->pick)
		return x->pick ? -1 : 1;
	if (x->total != y->total)
		return x->total < y->total ? 1 : -1;
	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	if (x->self != y->self)
		return x->self < y->self ? 1 : -1;
	return (x->fn > y->fn) - (x->fn < y->fn);
}

/* Top functions of a set of samples: total = samples with the function
 * anywhere on the stack, self = samples with it as the leaf.  The frames
 * every sample shares from the thread's entry point (the trunk: thread
 * start, connection loop, request dispatcher) would fill the list at
 * 100%, so only the deepest of them is shown, and more of them only when
 * fewer than three lines would be left.
 *
 * fc has an entry per function, all clear (depth UINT32_MAX) and left so:
 * only the functions of these samples are touched (touched[]), so that a
 * group costs what its samples hold, not the number of functions of the
 * whole recording (a hostile file may have many groups and many
 * functions). */
static void
print_top(const struct prof *p,
	  const uint32_t *idx,
	  size_t n,
	  unsigned top,
	  const char *indent,
	  struct fcount *fc,
	  uint32_t *touched)
{
	uint32_t *trunk = NULL;
	struct fcount *sel = NULL;
	size_t trunk_n = 0, n_touched = 0, i, k, used = 0, picked = 0;

	if (!n)
		return;
	for (i = 0; i < n; i++) {
		const struct r_sample *s =
			(const struct r_sample *)p->samples.v + idx[i];
		const struct r_stack *st = stack_of(p, s->stack);
		size_t L = st ? st->n : 0;

		if (i == 0) {
			trunk = malloc((L ? L : 1) * sizeof(*trunk));
			if (!trunk)
				break;
			for (k = 0; k < L; k++)
				trunk[k] = frame_fn(p, st->f[L - 1 - k]);
			trunk_n = L;
		} else {
			for (k = 0; k < trunk_n && k < L; k++)
				if (trunk[k] != frame_fn(p, st->f[L - 1 - k]))
					break;
			trunk_n = k;
		}
		for (k = 0; k < L; k++) {
			uint32_t fn = frame_fn(p, st->f[k]);

			if (fn >= p->fns.n)
				continue;
			if (fc[fn].seen != i + 1) {
				if (!fc[fn].seen)
					touched[n_touched++] = fn;
				fc[fn].seen = (uint32_t)i + 1;
				fc[fn].total++;
			}
			if (k == 0)
				fc[fn].self++;
			if (L - 1 - k < fc[fn].depth)
				fc[fn].depth = (uint32_t)(L - 1 - k);
		}
	}
	/* everything but the trunk above its deepest frame */
	for (i = 0; i < n_touched; i++)
		fc[touched[i]].pick = true;
	/* (not the deepest one's function where it recurs higher up) */
	for (k = 0; k + 1 < trunk_n; k++)
		if (trunk[k] < p->fns.n && trunk[k] != trunk[trunk_n - 1])
			fc[trunk[k]].pick = false;
	for (i = 0; i < n_touched; i++)
		picked += fc[touched[i]].pick;
	for (k = trunk_n > 1 ? trunk_n - 1 : 0; k-- > 0 && picked < 3;)
		if (trunk[k] < p->fns.n && fc[trunk[k]].seen && !fc[trunk[k]].pick) {
			fc[trunk[k]].pick = true;
			picked++;
		}
	sel = malloc((n_touched ? n_touched : 1) * sizeof(*sel));
	for (i = 0; sel && i < n_touched; i++) {
		fc[touched[i]].fn = touched[i];
		if (fc[touched[i]].pick)
			sel[used++] = fc[touched[i]];
	}
	if (sel)
		qsort(sel, used, sizeof(*sel), cmp_fcount);
	for (i = 0; i < used && i < top; i++) {
		printf("%s%6.1f%% %6.1f%%  ", indent,
		       100.0 * (double)sel[i].total / (double)n,
		       100.0 * (double)sel[i].self / (double)n);
		put_text(fn_name(p, sel[i].fn));
		putchar('\n');
	}
	/* clear for the next group */
	for (i = 0; i < n_touched; i++)
		fc[touched[i]] = (struct fcount){.depth = UINT32_MAX};
	free(sel);
	free(trunk);
}

struct group {
	char *key;   /* request name, or trace id hex */
	char *label; /* trace: its request name */
	uint32_t *idx;
	size_t n, cap;
	uint64_t first_t, last_t;
	uint32_t tid, image; /* trace: first thread, of this program image */
	unsigned n_threads;
	size_t n_traces; /* request: the distinct traces of its samples */
};

/* The group of key, found through idx (key -> index + 1). */
static struct group *
group_get(struct group **g, size_t *n, struct cmap *idx, const char *key)
{
	size_t len = strlen(key), i, cap;
	struct group *ng;
	uint64_t *slot;

	slot = cmap_find(idx, key, len);
	if (slot && *slot)
		return &(*g)[*slot - 1];
	if (!cmap_add(idx, key, len, (uint64_t)*n + 1))
		return NULL;
	/* capacity: 16, then doubled whenever n reaches a power of two */
	cap = *n < 16 ? 16 : 2 * *n;
	if (*n == 0 || (*n >= 16 && (*n & (*n - 1)) == 0)) {
		ng = realloc(*g, cap * sizeof(*ng));
		if (!ng)
			return NULL;
		*g = ng;
	}
	ng = *g;
	i = (*n)++;
	memset(&ng[i], 0, sizeof(ng[0]));
	ng[i].key = strdup(key);
	if (!ng[i].key)
		return NULL;
	return &ng[i];
}

static bool
group_add(struct group *g, uint32_t idx, uint64_t t)
{
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 64;
		uint32_t *ni = realloc(g->idx, cap * sizeof(*ni));

		if (!ni)
			return false;
		g->idx = ni;
		g->cap = cap;
	}
	if (!g->n || t < g->first_t)
		g->first_t = t;
	if (!g->n || t > g->last_t)
		g->last_t = t;
	g->idx[g->n++] = idx;
	return true;
}

static void
groups_free(struct group *g, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(g[i].key);
		free(g[i].label);
		free(g[i].idx);
	}
	free(g);
}

static int
cmp_group_n(const void *a, const void *b)
{
	const struct group *x = a, *y = b;

	if (x->n != y->n)
		return x->n < y->n ? 1 : -1;
	return strcmp(x->key, y->key);
}

static int
cmp_group_dur(const void *a, const void *b)
{
	const struct group *x = a, *y = b;
	uint64_t dx = x->last_t - x->first_t, dy = y->last_t - y->first_t;

	if (dx != dy)
		return dx < dy ? 1 : -1;
	return cmp_group_n(a, b);
}

static const char *
end_reason_text(uint64_t r)
{
	switch (r) {
	case PFILE_END_DURATION:
		return "duration reached";
	case PFILE_END_SIGNAL:
		return "interrupted";
	case PFILE_END_EXITED:
		return "process exited";
	case PFILE_END_ELF32:
		return "the process ran a 32-bit program";
	default:
		return "error";
	}
}

/* The threads of the THREAD records, each tid once (a thread that ran
 * in several program images has a record in each). */
static size_t
distinct_tids(const struct prof *p)
{
	const struct r_thread *t = p->threads.v;
	uint64_t *v;
	size_t i, n = 0;

	if (p->images.n < 2)
		return p->threads.n;
	v = malloc((p->threads.n ? p->threads.n : 1) * sizeof(*v));
	if (!v)
		return p->threads.n;
	for (i = 0; i < p->threads.n; i++)
		v[i] = t[i].tid;
	qsort(v, p->threads.n, sizeof(*v), cmp_u64);
	for (i = 0; i < p->threads.n; i++)
		n += !i || v[i] != v[i - 1];
	free(v);
	return n;
}

static void
summary_header(const struct prof *p)
{
	char svc[SVC_NAME_MAX];
	size_t i, ntid, rl = 0;
	uint64_t last =
		p->rounds.n ? ((const struct r_round *)p->rounds.v)[p->rounds.n - 1].t
			    : 0;
	/* the recording's length: to its end (-d 2.5 at 100 Hz: 2.5 s, not
	 * the 2.49 s of its last round), or its last round if cut short */
	double secs = (double)(p->has_end && p->end_t > last ? p->end_t : last) / 1e9;

	/* every thread sampled has a THREAD record, one per program image
	 * it ran in: counted once */
	ntid = distinct_tids(p);
	if (p->pid)
		printf("Recording of process %" PRIu64 " (", p->pid);
	else
		fputs("Recording of process ? (", stdout);
	put_text(p->comm ? p->comm : "?");
	printf("): %" PRIu64 " Hz, %.3f s, %zu round%s, %zu sample%s of %zu thread%s\n",
	       p->rate, secs, p->rounds.n, CLI_PL(p->rounds.n), p->samples.n,
	       CLI_PL(p->samples.n), ntid, CLI_PL(ntid));
	fputs("Service: ", stdout);
	put_text(service_name(p, 0, svc, sizeof(svc)));
	putchar('\n');
	for (i = 1; i < p->images.n; i++) {
		const struct r_image *im = image_at(p, (uint32_t)i);

		printf("Exec at %.3f s: ", (double)im->t / 1e9);
		put_text(im->comm);
		fputs(", service ", stdout);
		put_text(service_name(p, (uint32_t)i, svc, sizeof(svc)));
		putchar('\n');
	}
	for (i = 0; i < p->layouts.n; i++) {
		const struct r_layout *l = (const struct r_layout *)p->layouts.v + i;

		printf("Layout: %s in ", lay_symbol((enum lay_kind)l->kind));
		put_text(l->module);
		fputs(" (", stdout);
		put_text(l->model);
		printf("%s)\n", l->usable ? "" : ", not readable");
		rl++;
	}
	if (p->layouts_more)
		printf("Layout: %u more layout record%s not listed\n", p->layouts_more,
		       CLI_PL(p->layouts_more));
	if (!rl)
		puts("Layout: none (no trace context)");
	if (p->rounds.n) {
		/* summed as a double: a file's windows may be any u64, and
		 * a sum that wraps would make the average less than the
		 * longest (only the first digits are printed) */
		double sum = 0;
		uint64_t max = 0;

		for (i = 0; i < p->rounds.n; i++) {
			uint64_t w = ((const struct r_round *)p->rounds.v)[i].window;

			sum += (double)w;
			if (w > max)
				max = w;
		}
		printf("Stopped: %.1f us per round on average, %.1f us at most\n",
		       sum / (double)p->rounds.n / 1e3, (double)max / 1e3);
		/* how regular the sampling was: the bound on every duration */
		for (i = 1, max = 0; i < p->rounds.n; i++) {
			const struct r_round *r =
				(const struct r_round *)p->rounds.v + i;

			if (r->t - r[-1].t > max)
				max = r->t - r[-1].t;
		}
		printf("Sampling: interval %.1f ms, largest gap between rounds %.1f "
		       "ms\n",
		       p->rate ? 1e3 / (double)p->rate : 0.0, (double)max / 1e6);
	}
	if (p->has_end)
		printf("Ended: %s%s\n", end_reason_text(p->end_reason),
		       p->lost_ticks
			       ? " (some ticks missed: rounds took longer than the "
				 "interval)"
			       : "");
	else
		puts("Ended: file incomplete (the recording was cut short)");
}

static int
report_summary(const struct prof *p, const struct rpt_ctl *ctl)
{
	struct group *paths = NULL, *traces = NULL;
	struct cmap pidx = {0}, tidx = {0}, pairs = {0};
	size_t np = 0, nt = 0, i, nsel = 0, ntraced = 0;
	struct fcount *fc = malloc((p->fns.n ? p->fns.n : 1) * sizeof(*fc));
	uint32_t *touched = malloc((p->fns.n ? p->fns.n : 1) * sizeof(*touched));
	char req[REQ_NAME_MAX], h[33], pair[32 + sizeof(req)];
	int ret = CLI_EXIT_OK;

	if (!fc || !touched)
		goto oom;
	for (i = 0; i < p->fns.n; i++)
		fc[i] = (struct fcount){.depth = UINT32_MAX};
	summary_header(p);
	for (i = 0; i < p->samples.n; i++) {
		const struct r_sample *s = (const struct r_sample *)p->samples.v + i;
		const struct r_ctx *c = primary_ctx(p, s);
		uint64_t t = round_time(p, s->round);
		struct group *g;

		if (!sample_matches(p, ctl, s))
			continue;
		nsel++;
		request_name(p, s, req, sizeof(req));
		/* a request is known by its attributes, with or without a
		 * trace: CTXSHIM_NEW_TRACES=0 publishes those of a request
		 * that brought no traceparent with zero ids; a sample with
		 * neither (an idle thread) is of no request */
		if (!c && !req[0])
			continue;
		g = group_get(&paths, &np, &pidx, req[0] ? req : "[unknown request]");
		if (!g || !group_add(g, (uint32_t)i, t))
			goto oom;
		if (!c)
			continue;
		hex(h, c->trace, 16);
		/* the request's traces: each trace it has samples of, once
		 * (a trace may call the service for several requests) */
		memcpy(pair, h, 32);
		snprintf(pair + 32, sizeof(pair) - 32, "%s", g->key);
		if (!cmap_find(&pairs, pair, strlen(pair))) {
			if (!cmap_add(&pairs, pair, strlen(pair), 1))
				goto oom;
			g->n_traces++;
		}
		g = group_get(&traces, &nt, &tidx, h);
		if (!g || !group_add(g, (uint32_t)i, t))
			goto oom;
		if (!g->label) {
			g->label = strdup(req[0] ? req : "[unknown request]");
			if (!g->label)
				goto oom;
			g->tid = s->tid;
			g->image = s->image;
			g->n_threads = 1;
		} else if (g->tid != s->tid) {
			g->n_threads = 2; /* "several" */
		}
	}
	for (i = 0; i < nt; i++)
		ntraced += traces[i].n;
	printf("\n%zu of %zu samples selected, %zu with a trace context\n", nsel,
	       p->samples.n, ntraced);
	if (np)
		qsort(paths, np, sizeof(*paths), cmp_group_n);
	if (np)
		puts("\nTop functions per request (total%  self%  function):");
	for (i = 0; i < np; i++) {
		size_t ntr = paths[i].n_traces;

		put_text(paths[i].key);
		printf(": %zu sample%s in %zu trace%s\n", paths[i].n,
		       CLI_PL(paths[i].n), ntr, CLI_PL(ntr));
		print_top(p, paths[i].idx, paths[i].n, ctl->top, "  ", fc, touched);
	}
	if (nt)
		qsort(traces, nt, sizeof(*traces), cmp_group_dur);
	if (nt)
		puts("\nTraces, longest first (sampled time from the first to the last "
		     "sample):");
	for (i = 0; i < nt && (!ctl->max_traces || i < ctl->max_traces); i++) {
		const struct group *g = &traces[i];
		const char *tn;

		printf("trace %s  ", g->key);
		put_text(g->label);
		printf("  %.3f s  %zu sample%s  thread %u",
		       (double)(g->last_t - g->first_t) / 1e9, g->n, CLI_PL(g->n),
		       g->tid);
		/* which thread that is, as the spans' thread.name has it */
		tn = thread_name(p, g->image, g->tid);
		if (*tn) {
			fputs(" (", stdout);
			put_text(tn);
			putchar(')');
		}
		puts(g->n_threads > 1 ? " and others" : "");
		print_top(p, g->idx, g->n, ctl->top, "  ", fc, touched);
	}
	if (ctl->max_traces && nt > ctl->max_traces)
		printf("(%zu more trace%s; --traces 0 shows all)\n",
		       nt - ctl->max_traces, CLI_PL(nt - ctl->max_traces));
	goto out;
oom:
	cli_warn("out of memory");
	ret = CLI_EXIT_FATAL;
out:
	groups_free(paths, np);
	groups_free(traces, nt);
	cmap_free(&pidx);
	cmap_free(&tidx);
	cmap_free(&pairs);
	free(fc);
	free(touched);
	return ret;
}

/* ---- command line ---- */

static void usage(void) __attribute__((noreturn));

static void
usage(void)
{
	fputs("\nUsage:\n"
	      " ctxdump report [options] <file>\n"
	      "\n"
	      "Show what a 'ctxdump record' file holds: a summary of the top "
	      "functions\n"
	      "per request and per trace, folded stacks, or inferred spans.  A <file>\n"
	      "of - is standard input.  From a pipe, FIFO or socket, it reads to the\n"
	      "recording's end after one Ctrl-C (SIGINT, SIGQUIT); a second quits.\n"
	      "\n"
	      "Output:\n"
	      "     --folded              folded stacks (flamegraph.pl, speedscope) "
	      "with\n"
	      "                             service, request and trace as root frames\n"
	      "     --spans               inferred spans as OTLP/JSON traces\n"
	      "     --context-spans       with --spans: also a span for each context "
	      "span\n"
	      "     --collapse            with --spans: fold call chains always seen "
	      "whole\n"
	      "                             into one span\n"
	      "     --min-samples <n>     with --spans: smallest span, in samples "
	      "(default 2)\n"
	      "     --max-spans <n>       with --spans: most spans printed (default "
	      "500000)\n"
	      "     --top <n>             functions shown per group (default 8)\n"
	      "     --traces <n>          traces shown in the summary (default 20, 0: "
	      "all)\n"
	      "\n"
	      "Filters (all must match):\n"
	      "     --trace <hex>         samples of this trace (a prefix is enough)\n"
	      "     --path <path>         samples whose request path (or \"METHOD "
	      "path\")\n"
	      "                             is this\n"
	      "     --attr <key>[=<value>]  samples with this context attribute\n"
	      "     --tid <tid>           samples of this thread\n"
	      "     --traced              only samples with a trace context\n"
	      "\n"
	      " -h, --help                display this help\n"
	      " -V, --version             display version\n"
	      "\n"
	      "Exit status:\n"
	      " 0   the whole recording was reported\n"
	      " 1   partial: the file is cut short or has malformed records, or\n"
	      "       --spans left spans out (--max-spans)\n"
	      " 2   fatal: the file cannot be read or is not a recording, or the\n"
	      "       output cannot be written\n"
	      " 64  usage error\n"
	      "\n"
	      "For more details see ctxdump(1).\n",
	      stdout);
	cli_exit_printed();
}

static struct filter *
new_filter(struct rpt_ctl *ctl)
{
	if (ctl->n_filters == MAX_FILTERS)
		cli_usage_err("at most %d filters", MAX_FILTERS);
	return &ctl->f[ctl->n_filters++];
}

static void
parse_args(struct rpt_ctl *ctl, int argc, char **argv)
{
	enum {
		OPT_FOLDED = CHAR_MAX + 1,
		OPT_SPANS,
		OPT_CONTEXT_SPANS,
		OPT_COLLAPSE,
		OPT_MIN_SAMPLES,
		OPT_TOP,
		OPT_TRACES,
		OPT_TRACE,
		OPT_PATH,
		OPT_ATTR,
		OPT_TID,
		OPT_TRACED,
		OPT_MAX_SPANS,
	};
	static const struct option longopts[] = {
		{"folded", no_argument, NULL, OPT_FOLDED},
		{"spans", no_argument, NULL, OPT_SPANS},
		{"context-spans", no_argument, NULL, OPT_CONTEXT_SPANS},
		{"collapse", no_argument, NULL, OPT_COLLAPSE},
		{"min-samples", required_argument, NULL, OPT_MIN_SAMPLES},
		{"top", required_argument, NULL, OPT_TOP},
		{"traces", required_argument, NULL, OPT_TRACES},
		{"trace", required_argument, NULL, OPT_TRACE},
		{"path", required_argument, NULL, OPT_PATH},
		{"attr", required_argument, NULL, OPT_ATTR},
		{"tid", required_argument, NULL, OPT_TID},
		{"traced", no_argument, NULL, OPT_TRACED},
		{"max-spans", required_argument, NULL, OPT_MAX_SPANS},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	/* the options of one output only, as written (the last one) */
	const char *spans_only = NULL, *summary_only = NULL;
	struct filter *f;
	char *eq;
	size_t i;
	int c;

	ctl->min_samples = 2;
	ctl->max_spans = DEFAULT_MAX_SPANS;
	ctl->top = 8;
	ctl->max_traces = 20;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":hV", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_FOLDED:
		case OPT_SPANS:
			if (ctl->mode != MODE_SUMMARY)
				cli_usage_err(
					"--folded and --spans exclude each other");
			ctl->mode = c == OPT_FOLDED ? MODE_FOLDED : MODE_SPANS;
			break;
		case OPT_CONTEXT_SPANS:
			spans_only = "context-spans";
			ctl->context_spans = true;
			break;
		case OPT_COLLAPSE:
			spans_only = "collapse";
			ctl->collapse = true;
			break;
		case OPT_MIN_SAMPLES:
			spans_only = "min-samples";
			ctl->min_samples = (unsigned)cli_parse_num(
				optarg, "sample count", 1, INT_MAX);
			break;
		case OPT_TOP:
			summary_only = "top";
			ctl->top = (unsigned)cli_parse_num(optarg, "count for --top", 1,
							   INT_MAX);
			break;
		case OPT_TRACES:
			summary_only = "traces";
			ctl->max_traces = (unsigned)cli_parse_num(
				optarg, "count for --traces", 0, INT_MAX);
			break;
		case OPT_TRACE:
			/* ids are printed in lowercase; upper case as
			 * pasted from elsewhere matches as well */
			for (i = 0; optarg[i]; i++)
				if (!isxdigit((unsigned char)optarg[i]))
					cli_usage_err("invalid trace id: '%s' (hex "
						      "digits expected)",
						      optarg);
			if (i == 0 || i > 32)
				cli_usage_err("invalid trace id: '%s'", optarg);
			for (i = 0; optarg[i]; i++)
				optarg[i] = (char)tolower((unsigned char)optarg[i]);
			f = new_filter(ctl);
			f->kind = F_TRACE;
			f->a = optarg;
			break;
		case OPT_PATH:
			f = new_filter(ctl);
			f->kind = F_PATH;
			f->a = optarg;
			break;
		case OPT_ATTR:
			f = new_filter(ctl);
			f->kind = F_ATTR;
			eq = strchr(optarg, '=');
			if (eq == optarg)
				cli_usage_err("invalid attribute filter: '%s'", optarg);
			if (eq) {
				*eq = '\0';
				f->b = eq + 1;
			}
			f->a = optarg;
			break;
		case OPT_TID:
			f = new_filter(ctl);
			f->kind = F_TID;
			f->tid = (long)cli_parse_num(optarg, "thread id", 1, INT_MAX);
			break;
		case OPT_TRACED:
			ctl->traced_only = true;
			break;
		case OPT_MAX_SPANS:
			spans_only = "max-spans";
			ctl->max_spans =
				(size_t)cli_parse_num(optarg, "span count", 1, INT_MAX);
			break;
		case 'h':
			usage();
		case 'V':
			cli_version();
		default:
			cli_option_error(c, argv, longopts, false);
		}
	}
	/* an option for another output would be ignored: say so */
	if (spans_only && ctl->mode != MODE_SPANS)
		cli_usage_err("option '--%s' requires --spans", spans_only);
	if (summary_only && ctl->mode != MODE_SUMMARY)
		cli_usage_err("option '--%s' cannot be used with %s", summary_only,
			      ctl->mode == MODE_FOLDED ? "--folded" : "--spans");
	ctl->file = cli_operand(argc, argv, "recording file");
	ctl->name = strcmp(ctl->file, "-") == 0 ? "standard input" : ctl->file;
}

/* What on_held_signal() writes (hold_signals() fills it when standard
 * error is a terminal), and its length; 0: nothing. */
static char held_note[128];
static size_t held_note_len;

static void
on_held_signal(int sig)
{
	int e = errno;

	(void)sig;
	/* Whoever pressed Ctrl-C sees why nothing ended: a FIFO whose
	 * writer stays open and idle is waited for as long as it is, and
	 * looked like a hang.  write(2) is async-signal-safe; the line was
	 * made before the handler was set. */
	if (held_note_len)
		(void)!write(STDERR_FILENO, held_note, held_note_len);
	errno = e;
}

/* `ctxdump record -o - PID | ctxdump report -` ends with Ctrl-C (or
 * Ctrl-\), which the terminal sends to the whole pipeline: the recorder
 * then ends the recording and writes its end, which the report must
 * still read and report (old: killed by the same Ctrl-C, it printed
 * nothing).  So while a pipe or socket is read, the first SIGINT and
 * SIGQUIT do nothing (SA_RESETHAND: a second one ends the report, as it
 * ends the recorder, which then gives up) but say so on a terminal; one
 * ignored from the start (in a background job) stays ignored.  hold
 * false: their actions as they were. */
static void
hold_signals(bool hold, struct sigaction old[2])
{
	static const int sigs[2] = {SIGINT, SIGQUIT};
	struct sigaction sa;
	int i, n;

	if (hold && isatty(STDERR_FILENO)) {
		n = snprintf(held_note, sizeof(held_note),
			     "%s: interrupt: reading the recording to its end first; "
			     "interrupt again to quit\n",
			     cli_name());
		held_note_len = n > 0 && (size_t)n < sizeof(held_note) ? (size_t)n : 0;
	}
	for (i = 0; i < 2; i++) {
		if (!hold) {
			(void)sigaction(sigs[i], &old[i], NULL);
			continue;
		}
		memset(&old[i], 0, sizeof(old[i])); /* SIG_DFL */
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_held_signal;
		sa.sa_flags = SA_RESTART | SA_RESETHAND;
		sigemptyset(&sa.sa_mask);
		if (sigaction(sigs[i], NULL, &old[i]) == 0 &&
		    old[i].sa_handler != SIG_IGN)
			(void)sigaction(sigs[i], &sa, NULL);
	}
}

/* The report of the recording in f, on standard output. */
static int
report_run(const struct rpt_ctl *ctl, FILE *f)
{
	struct sigaction old[2];
	struct prof p;
	int r, status;

	init_prof(&p);
	if (ctl->hold_signals)
		hold_signals(true, old);
	r = load(&p, f, ctl->name);
	if (ctl->hold_signals)
		hold_signals(false, old);
	if (r < 0) {
		free_prof(&p);
		return CLI_EXIT_FATAL;
	}
	if (p.truncated)
		cli_warn("%s ends inside a record at offset %" PRIu64
			 " (recording cut short, or a corrupt length); using what "
			 "is complete",
			 ctl->name, p.cut_off);
	else if (!p.has_end)
		/* a recorder killed between records, or one still at work:
		 * whole, but not all */
		cli_warn("%s has no end record (recording cut short or still "
			 "going on); using what it holds",
			 ctl->name);
	if (p.joined)
		cli_warn("%s: another recording starts at offset %" PRIu64
			 " (files joined together?); reporting only the one "
			 "before it",
			 ctl->name, p.joined_off);
	if (p.bad_records == 1)
		cli_warn("%s: 1 malformed record at offset %" PRIu64
			 " skipped or read in part",
			 ctl->name, p.bad_off);
	else if (p.bad_records)
		cli_warn("%s: %u malformed records (the first at offset %" PRIu64
			 ") skipped or read in part",
			 ctl->name, p.bad_records, p.bad_off);
	switch (ctl->mode) {
	case MODE_FOLDED:
		status = report_folded(&p, ctl);
		break;
	case MODE_SPANS:
		status = report_spans(&p, ctl);
		break;
	default:
		status = report_summary(&p, ctl);
		break;
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		cli_warn("write error on standard output: %s", strerror(errno));
		status = CLI_EXIT_FATAL;
	}
	if (status == CLI_EXIT_OK &&
	    (p.truncated || !p.has_end || p.bad_records || p.joined))
		status = CLI_EXIT_PARTIAL;
	free_prof(&p);
	return status;
}

int
report_stream(FILE *in, int argc, char **argv)
{
	struct rpt_ctl ctl = {0};

	cli_set_name("ctxdump report");
	parse_args(&ctl, argc, argv);
	return report_run(&ctl, in);
}

int
report_main(int argc, char **argv)
{
	static char outbuf[1u << 16];
	struct rpt_ctl ctl = {0};
	struct stat st;
	FILE *f;
	int status;

	cli_set_name("ctxdump report");
	parse_args(&ctl, argc, argv);
	if (!isatty(STDOUT_FILENO))
		setvbuf(stdout, outbuf, _IOFBF, sizeof(outbuf));
	f = strcmp(ctl.file, "-") == 0 ? stdin : fopen(ctl.file, "re");
	if (!f) {
		cli_warn("cannot open %s: %s", ctl.file, strerror(errno));
		return CLI_EXIT_FATAL;
	}
	if (fstat(fileno(f), &st) == 0 &&
	    (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
		ctl.hold_signals = true;
	status = report_run(&ctl, f);
	if (f != stdin)
		fclose(f);
	return status;
}
