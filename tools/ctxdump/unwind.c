/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "unwind.h"

#include "fd-budget.h"
#include "maps.h"
#include "remote.h"
#include "stop.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <libunwind.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Exported by libunwind-generic (it is the backend libunwind-ptrace's
 * _UPT_find_proc_info uses) but declared only in libunwind's private
 * headers: binary search of an .eh_frame_hdr table described by a
 * UNW_INFO_FORMAT_REMOTE_TABLE unw_dyn_info_t, reading it through the
 * address space's access_mem.  Newer libunwind releases offer a public
 * wrapper, unw_get_proc_info_in_range(); Debian 12's 1.6.2 does not. */
extern int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as,
					      unw_word_t ip,
					      unw_dyn_info_t *di,
					      unw_proc_info_t *pi,
					      int need_unwind_info,
					      void *arg);

/* libunwind is opened on first use, not linked: a dump without stacks
 * then does not load it and what it needs (libunwind.so, liblzma) at
 * every start (measured: 0.12 ms of the 1 ms a start takes here; a
 * 1000-thread dump takes 15 ms in all).  Only stack_unwind() needs it,
 * always after the threads were let go. */
#define UW_STR_(x) #x
#define UW_STR(x)  UW_STR_(x)

static struct {
	__typeof__(unw_create_addr_space) *create_addr_space;
	__typeof__(unw_destroy_addr_space) *destroy_addr_space;
	__typeof__(unw_set_caching_policy) *set_caching_policy;
	__typeof__(unw_init_remote) *init_remote;
	__typeof__(unw_get_reg) *get_reg;
	__typeof__(unw_step) *step;
	__typeof__(_Ux86_64_dwarf_search_unwind_table) *search_unwind_table;
	bool ok;
} uwl;
static pthread_once_t uwl_once = PTHREAD_ONCE_INIT;
/* Why it could not be loaded (the first candidate's reason). */
static char uwl_why[256];

static void
uwl_open(void)
{
	/* the run-time name (soname 8 since libunwind 1.0), else the
	 * development link, for a libunwind of another major version */
	static const char *const names[] = {
		"libunwind-" UW_STR(UNW_TARGET) ".so.8",
		"libunwind-generic.so",
	};
	size_t i;

	for (i = 0; !uwl.ok && i < sizeof(names) / sizeof(names[0]); i++) {
		void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		const char *missing = NULL;

		if (!h) {
			const char *e = dlerror();

			if (!uwl_why[0])
				snprintf(uwl_why, sizeof(uwl_why), "%s",
					 e ? e : names[i]);
			continue;
		}
#define UWL_SYM(field, name)                                            \
	((uwl.field = (__typeof__(uwl.field))dlsym(h, name)) != NULL || \
	 (missing = name, false))
		uwl.ok = UWL_SYM(create_addr_space, UW_STR(unw_create_addr_space)) &&
			 UWL_SYM(destroy_addr_space, UW_STR(unw_destroy_addr_space)) &&
			 UWL_SYM(set_caching_policy, UW_STR(unw_set_caching_policy)) &&
			 UWL_SYM(init_remote, UW_STR(unw_init_remote)) &&
			 UWL_SYM(get_reg, UW_STR(unw_get_reg)) &&
			 UWL_SYM(step, UW_STR(unw_step)) &&
			 UWL_SYM(search_unwind_table,
				 "_Ux86_64_dwarf_search_unwind_table");
#undef UWL_SYM
		if (!uwl.ok) {
			/* not the libunwind we know: try the next name */
			if (!uwl_why[0])
				snprintf(uwl_why, sizeof(uwl_why), "%s: no %s",
					 names[i], missing);
			(void)dlclose(h);
		}
	}
}

const char *
stack_unwind_unavailable(void)
{
	(void)pthread_once(&uwl_once, uwl_open);
	return uwl.ok ? NULL : uwl_why;
}

#define UW_PAGE 4096u
/* bytes of a module's file read at once (uw_image_read()) */
#define UW_BLOCK (64u << 10)
/* the largest symbol table and string table read (uw_load_syms_from()):
 * a bound against holes in hostile files, well above real tables */
#define UW_SYMTAB_MAX (256u << 20)
/* Read size for /proc/PID/maps, which the kernel hands out up to a page
 * per read(): fewer system calls than with stdio's default of 1 KiB */
#define UW_MAPS_BUF (64u << 10)
/* Frames whose ip and sp both repeat mean a broken unwind table. */
#define UW_MAX_LOOP 2
/* Memory reads libunwind may make for one step (uw_access_mem): one per
 * byte of the FDE's instructions and DWARF expressions, which come from
 * the target's files and may jump back (DW_OP_skip, DW_OP_bra), which
 * libunwind follows for ever.  A step of a real stack takes a few
 * hundred (at most 235 measured: libc, deep recursion, signal frames). */
#define UW_STEP_READS (1u << 16)

/* DWARF exception-header pointer encodings (LSB, "DWARF Extensions"). */
#define DW_EH_PE_absptr   0x00
#define DW_EH_PE_udata2   0x02
#define DW_EH_PE_udata4   0x03
#define DW_EH_PE_udata8   0x04
#define DW_EH_PE_sdata2   0x0a
#define DW_EH_PE_sdata4   0x0b
#define DW_EH_PE_sdata8   0x0c
#define DW_EH_PE_pcrel    0x10
#define DW_EH_PE_datarel  0x30
#define DW_EH_PE_indirect 0x80
#define DW_EH_PE_omit     0xff

/* Where libunwind finds the search table of module i when ctxdump built it
 * (struct uw_module.synth): above the canonical user half of the x86_64
 * address space, where no target mapping and no stack copy can be. */
#define UW_SYNTH_BASE   0x8000000000000000ull
#define UW_SYNTH_STRIDE (1ull << 32)

struct uw_sym {
	uint64_t addr;
	uint64_t size;
	const char *name;
	int rank;
	/* name was demangled (uw_sym_name()) or found not to need it; and
	 * whether name is then our allocation */
	bool name_done, name_owned;
};

struct uw_module {
	char *path; /* as in maps */
	uint64_t inode;
	unsigned dev_major, dev_minor;
	bool is_vdso;
	/* lowest mapping: gives the load bias */
	uint64_t map_start, map_offset, map_end;

	bool tried;  /* load attempted */
	bool loaded; /* image, elf and bias valid */
	/* The file's descriptor (a negative errno if it could not be
	 * opened), kept while loaded when it counts in uw_fds (kept); else
	 * closed once loaded (shed), and opened again for each block of the
	 * image read later (uw_image_read()). */
	int fd;
	bool kept, shed;
	Elf *elf;
	/* The module's bytes from file offset 0 to the end of its last
	 * PT_LOAD (size): the vdso's in image, a copy of ours; a file's
	 * read in blocks of UW_BLOCK as they are asked for
	 * (uw_image_read()), blocks[] NULL until then. */
	const uint8_t *image;
	size_t size;
	uint8_t *copy;
	uint8_t **blocks;
	uint64_t bias;
	GElf_Phdr *phdr;
	size_t phnum;

	bool have_table;
	unw_dyn_info_t di;
	/* A search table built from .eh_frame when the module has no
	 * .eh_frame_hdr (gcc -static links without --eh-frame-hdr): pairs of
	 * int32 {pc, fde} relative to .eh_frame, what .eh_frame_hdr would
	 * hold.  libunwind reads it at di.u.rti.table_data, an address no
	 * target maps (uw_synth_addr()), which uw_access_mem serves from
	 * here. */
	int32_t *synth;
	size_t synth_len; /* bytes */
	size_t index;     /* in uw_proc.mods */

	bool syms_tried;
	bool syms_dynsym;
	/* separate debug file (/usr/lib/debug/.build-id/...) for .symtab:
	 * dbg_fd is closed once the symbols are read, dbg_elf kept for
	 * their names */
	int dbg_fd;
	Elf *dbg_elf;
	struct uw_sym *syms;
	size_t nsyms;
};

struct uw_map {
	uint64_t start, end, offset;
	bool writable;
	/* The mapping differs from what the module list was read from
	 * before the stop (stack_unwind_sync() after it): what it held while
	 * the threads were stopped is unknown, so nothing is read or named
	 * from it until the next stack_unwind_sync(). */
	bool unsure;
	struct uw_module *mod; /* NULL: anonymous, heap, stack */
};

/* A mapping of a file as stack_unwind_sync() compares them: the list of
 * these tells whether the modules changed, while anonymous mappings
 * (thread stacks, malloc arenas), which come and go all the time, are
 * left out. */
struct uw_fmap {
	uint64_t start, end, offset, inode;
	unsigned dev_major, dev_minor;
};

struct uw_proc {
	pid_t pid;
	/* pid's thread exited while the list was in use, and a module could
	 * not be opened through it: stack_unwind() says -ESRCH until
	 * stack_unwind_rebind(), so that the caller reads through another
	 * thread instead of naming frames without their module's symbols */
	bool gone;
	struct uw_map *maps; /* sorted by start */
	size_t nmaps;
	struct uw_module **mods;
	size_t nmods;
	/* the file mappings (those of mods) in the order of the maps file,
	 * and their lines of it as read (uw_fmaps_same()) */
	struct uw_fmap *fmaps;
	size_t nfmaps;
	char *ftext;
	size_t ftext_len;
	unw_addr_space_t as;
};

/* Per stack_unwind() call: handed to the accessors as their arg. */
struct uw_ctx {
	struct uw_proc *proc;
	const struct stack_snap *snap;
	bool mem_fail;
	uint64_t fail_addr;
	/* in libunwind's table search: the only time the tables ctxdump
	 * built are readable (uw_access_mem), not as a frame's memory at an
	 * address the target chose */
	bool in_search;
	/* the registers libunwind starts from: snap->regs, or those of a
	 * frame past a call through a null pointer (uw_skip_null_call) */
	const struct user_regs_struct *regs;
	struct user_regs_struct restart;
	/* a look-up of unwind information failed during this step */
	bool no_info;
	/* memory reads in this step (uw_access_mem), and whether they
	 * went over UW_STEP_READS */
	unsigned reads;
	bool too_many_reads;
};

/* One process at a time: ctxdump dumps one pid, and every thread of it
 * shares the parsed modules and libunwind's per-address-space cache. */
static struct uw_proc *uw_cache;
/* The modules that keep their descriptor (uw_module.kept), in every
 * struct uw_proc (stack_unwind_sync() moves modules from one to the
 * next); max 0 until the first module is loaded. */
static struct fd_budget uw_fds;
static bool uw_fds_ready;
static bool uw_atexit_done;
/* What stack_unwind_stopped() found, for the stack_unwind_sync() after
 * the stop: STACK_SYNC_* + 1, or 0 (not called, or it failed). */
static int uw_stopped;

static uint64_t
uw_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The range stack_snap_capture_many() copies for registers r: from the red
 * zone below sp up to max bytes above sp, but not past the thread's TCB
 * (fs_base) when it lies above sp -- glibc and musl put it at the top of
 * a thread's stack block, above every frame --, nor past fs_base +
 * tls_floor (< 0) when that lies above sp: the static TLS between a
 * thread's stack and its TCB (tlsm_static_block_tpoff()), which the
 * unwinder never reads and which was half of what a sleeping thread's
 * copy took (the shim's block alone is 2.8 KiB). */
static bool
uw_stack_range(const struct user_regs_struct *r,
	       size_t max_stack_bytes,
	       int64_t tls_floor,
	       uint64_t *start,
	       size_t *want)
{
	uint64_t sp = r->rsp;

	if (max_stack_bytes == 0 || sp < STACK_RED_ZONE)
		return false;
	*start = (sp - STACK_RED_ZONE) & ~(uint64_t)7;
	*want = (size_t)(sp - *start) + max_stack_bytes;
	if (r->fs_base > sp && r->fs_base - *start < *want)
		*want = (size_t)(r->fs_base - *start);
	if (tls_floor < 0 && r->fs_base > sp &&
	    r->fs_base - sp > (uint64_t)-tls_floor) {
		uint64_t end = r->fs_base - (uint64_t)-tls_floor;

		if (end - *start < *want)
			*want = (size_t)(end - *start);
	}
	return true;
}

void
stack_snap_capture_many(pid_t pid,
			const pid_t *tids,
			size_t n,
			size_t max_stack_bytes,
			int64_t tls_floor,
			struct stack_snap *const *out,
			int *err,
			struct stack_arena *arena)
{
	struct remote_range *rg = calloc(n ? n : 1, sizeof(*rg));
	uint64_t t0 = uw_now_ns(), *start = calloc(n ? n : 1, sizeof(*start));
	size_t i, total = 0, k = 0, off = 0;
	uint8_t *base = NULL;
	/* reserved before the stop (stack_arena_reserve()), or nothing */
	void *reserved = arena->base;
	size_t reserved_len = arena->len;

	arena->base = NULL;
	arena->len = 0;
	for (i = 0; i < n; i++) {
		struct stack_snap *s = out[i];
		size_t want = 0;

		memset(s, 0, sizeof(*s));
		err[i] = 0;
		if (ptrace(PTRACE_GETREGS, tids[i], NULL, &s->regs) < 0) {
			err[i] = -errno;
			continue;
		}
		s->tid = tids[i];
		s->regs_valid = true;
		if (start && uw_stack_range(&s->regs, max_stack_bytes, tls_floor,
					    &start[i], &want))
			s->stack_len = want; /* for now: the size wanted */
		total += (want + 15) & ~(size_t)15;
	}
	if (rg && start && total && reserved && total <= reserved_len) {
		base = reserved;
		total = reserved_len;
		reserved = NULL;
	} else if (rg && start && total) {
		/* MAP_POPULATE: the kernel pages it all in here, in one go */
		base = mmap(NULL, total, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (base == MAP_FAILED)
			base = NULL;
	}
	/* unmapped with the arena, after the stop: not here */
	arena->spare = reserved;
	arena->spare_len = reserved ? reserved_len : 0;
	for (i = 0; i < n; i++) {
		struct stack_snap *s = out[i];
		size_t want = s->stack_len;

		s->stack_len = 0;
		if (!base || err[i] || !want)
			continue;
		s->stack = base + off;
		rg[k++] = (struct remote_range){start[i], s->stack, want, 0};
		off += (want + 15) & ~(size_t)15;
	}
	remote_read_many(pid, rg, k);
	for (i = k = 0; i < n; i++) {
		struct stack_snap *s = out[i];
		ssize_t r;

		if (!s->stack)
			continue;
		r = rg[k++].got;
		if (r <= 0) {
			/* The red zone reaches into the guard page of an
			 * almost full stack: start at sp itself. */
			uint64_t sp_start = s->regs.rsp & ~(uint64_t)7;
			size_t skip = (size_t)(sp_start - start[i]);

			r = remote_read_prefix(pid, sp_start, s->stack,
					       rg[k - 1].len - skip);
			start[i] = sp_start;
		}
		if (r > 0) {
			s->stack_addr = start[i];
			s->stack_len = (size_t)r & ~(size_t)7;
		}
	}
	for (i = 0; i < n; i++)
		out[i]->capture_ns = (uw_now_ns() - t0) / (n ? n : 1);
	arena->base = base;
	arena->len = base ? total : 0;
	free(rg);
	free(start);
}

int
stack_arena_reserve(struct stack_arena *a, size_t len)
{
	void *p;

	stack_arena_free(a);
	if (!len)
		return 0;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	a->base = p;
	a->len = len;
	return 0;
}

void
stack_arena_recycle(struct stack_arena *a)
{
	if (a->spare)
		(void)munmap(a->spare, a->spare_len);
	a->spare = NULL;
	a->spare_len = 0;
}

void
stack_arena_free(struct stack_arena *a)
{
	if (a->base)
		(void)munmap(a->base, a->len);
	if (a->spare)
		(void)munmap(a->spare, a->spare_len);
	a->base = a->spare = NULL;
	a->len = a->spare_len = 0;
}

/* ---- modules ---------------------------------------------------------- */

static void
uw_syms_free(struct uw_module *m)
{
	size_t i;

	for (i = 0; i < m->nsyms; i++)
		if (m->syms[i].name_owned)
			free((char *)m->syms[i].name);
	free(m->syms);
}

static void
uw_module_free(struct uw_module *m)
{
	size_t i;

	if (!m)
		return;
	if (m->elf)
		elf_end(m->elf);
	if (m->fd >= 0)
		close(m->fd);
	if (m->kept)
		fd_budget_give(&uw_fds);
	if (m->dbg_elf)
		elf_end(m->dbg_elf);
	if (m->dbg_fd >= 0)
		close(m->dbg_fd);
	free(m->copy);
	if (m->blocks)
		for (i = 0; i < (m->size + UW_BLOCK - 1) / UW_BLOCK; i++)
			free(m->blocks[i]);
	free(m->blocks);
	free(m->synth);
	free(m->phdr);
	uw_syms_free(m);
	free(m->path);
	free(m);
}

static void
uw_proc_free(struct uw_proc *p)
{
	size_t i;

	if (!p)
		return;
	if (p->as)
		uwl.destroy_addr_space(p->as);
	for (i = 0; i < p->nmods; i++)
		uw_module_free(p->mods[i]);
	free(p->mods);
	free(p->maps);
	free(p->fmaps);
	free(p->ftext);
	free(p);
}

void
stack_unwind_reset(void)
{
	uw_proc_free(uw_cache);
	uw_cache = NULL;
	uw_stopped = 0;
	/* from RLIMIT_NOFILE again, even after fd_budget_drain() */
	uw_fds_ready = false;
}

void
stack_unwind_rebind(pid_t from, pid_t to)
{
	size_t i;

	if (!uw_cache || uw_cache->pid != from)
		return;
	uw_cache->pid = to;
	uw_cache->gone = false;
	for (i = 0; i < uw_cache->nmods; i++)
		if (uw_cache->mods[i]->fd == -ESRCH)
			uw_cache->mods[i]->tried = false;
}

static void
uw_atexit(void)
{
	stack_unwind_reset();
}

/* Parse one line read from /proc/PID/maps into e, NUL-terminating the
 * pathname inside line (which the caller owns). */
static int
uw_parse_maps_line(char *line, size_t len, struct maps_entry *e)
{
	if (maps_parse_line(line, len, e) < 0)
		return -EINVAL;
	line[e->path - line + e->path_len] = '\0';
	return 0;
}

/* Whether a mapping of path is one of a module: a file, or [vdso]. */
static bool
uw_is_module_path(const char *path)
{
	return path[0] == '/' || strcmp(path, "[vdso]") == 0;
}

/* The module a mapping of path at file offset offset belongs to.  One file
 * can be mapped more than once at different load biases: loaded twice
 * (dlmopen), or mapped as data by the program itself (a library or
 * executable read with mmap, as libelf does).  Every load starts with a
 * mapping at offset 0 and its other mappings follow it in address order,
 * so an offset-0 mapping starts a module of its own and any other joins
 * the nearest one below it with the same file. */
static struct uw_module *
uw_find_or_add_module(struct uw_proc *p,
		      const char *path,
		      unsigned maj,
		      unsigned min,
		      uint64_t inode,
		      uint64_t offset)
{
	struct uw_module *m, **mods;
	size_t i;

	for (i = p->nmods; offset != 0 && i-- > 0;) {
		m = p->mods[i];
		if (m->inode == inode && m->dev_major == maj && m->dev_minor == min &&
		    strcmp(m->path, path) == 0)
			return m;
	}
	mods = realloc(p->mods, (p->nmods + 1) * sizeof(*mods));
	if (!mods)
		return NULL;
	p->mods = mods;
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->path = strdup(path);
	if (!m->path) {
		free(m);
		return NULL;
	}
	m->fd = -1;
	m->dbg_fd = -1;
	m->inode = inode;
	m->dev_major = maj;
	m->dev_minor = min;
	m->is_vdso = strcmp(path, "[vdso]") == 0;
	m->map_start = UINT64_MAX;
	m->index = p->nmods;
	p->mods[p->nmods++] = m;
	return m;
}

static int
uw_map_cmp(const void *a, const void *b)
{
	const struct uw_map *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static struct uw_proc *
uw_proc_load(pid_t pid, int *err)
{
	char fn[64], *line = NULL;
	size_t cap = 0, nalloc = 0, falloc = 0, talloc = 0;
	struct uw_proc *p;
	ssize_t r;
	FILE *f;

	snprintf(fn, sizeof(fn), "/proc/%d/maps", (int)pid);
	f = fopen(fn, "re");
	if (!f) {
		*err = stop_maps_error(pid, -errno);
		return NULL;
	}
	(void)setvbuf(f, NULL, _IOFBF, UW_MAPS_BUF);
	p = calloc(1, sizeof(*p));
	if (!p)
		goto nomem;
	p->pid = pid;
	while ((r = getline(&line, &cap, f)) > 0) {
		bool nl = line[r - 1] == '\n';
		struct maps_entry e;
		struct uw_map *mp;

		if (uw_parse_maps_line(line, (size_t)r, &e) < 0 || e.end <= e.start)
			continue;
		if (p->nmaps == nalloc) {
			size_t n = nalloc ? 2 * nalloc : 64;
			struct uw_map *maps = realloc(p->maps, n * sizeof(*maps));

			if (!maps)
				goto nomem;
			p->maps = maps;
			nalloc = n;
		}
		mp = &p->maps[p->nmaps];
		memset(mp, 0, sizeof(*mp));
		mp->start = e.start;
		mp->end = e.end;
		mp->offset = e.offset;
		mp->writable = e.perms[1] == 'w';
		if (uw_is_module_path(e.path)) {
			struct uw_module *m = uw_find_or_add_module(
				p, e.path, e.dev_major, e.dev_minor, e.inode, e.offset);
			struct uw_fmap *fm;

			if (!m)
				goto nomem;
			if (p->nfmaps == falloc) {
				size_t n = falloc ? 2 * falloc : 64;

				fm = realloc(p->fmaps, n * sizeof(*fm));
				if (!fm)
					goto nomem;
				p->fmaps = fm;
				falloc = n;
			}
			if ((size_t)r > talloc - p->ftext_len) {
				size_t n = talloc ? 2 * talloc : 4096;
				char *t;

				while (n - p->ftext_len < (size_t)r)
					n *= 2;
				t = realloc(p->ftext, n);
				if (!t)
					goto nomem;
				p->ftext = t;
				talloc = n;
			}
			/* the line as read (parsing cut it at the path's end) */
			memcpy(p->ftext + p->ftext_len, line, (size_t)r);
			p->ftext_len += (size_t)r;
			if (nl)
				p->ftext[p->ftext_len - 1] = '\n';
			fm = &p->fmaps[p->nfmaps++];
			fm->start = e.start;
			fm->end = e.end;
			fm->offset = e.offset;
			fm->inode = e.inode;
			fm->dev_major = e.dev_major;
			fm->dev_minor = e.dev_minor;
			mp->mod = m;
			if (e.start < m->map_start) {
				m->map_start = e.start;
				m->map_end = e.end;
				m->map_offset = e.offset;
			}
		}
		p->nmaps++;
	}
	free(line);
	fclose(f);
	if (p->nmaps == 0) {
		uw_proc_free(p);
		*err = stop_maps_error(pid, -ENODATA);
		return NULL;
	}
	qsort(p->maps, p->nmaps, sizeof(*p->maps), uw_map_cmp);
	return p;
nomem:
	free(line);
	fclose(f);
	uw_proc_free(p);
	*err = -ENOMEM;
	return NULL;
}

static struct uw_map *
uw_find_map(struct uw_proc *p, uint64_t addr)
{
	size_t lo = 0, hi = p->nmaps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (addr < p->maps[mid].start)
			hi = mid;
		else if (addr >= p->maps[mid].end)
			lo = mid + 1;
		else
			return &p->maps[mid];
	}
	return NULL;
}

/* Our own [vdso]: the kernel maps the same image into every process, so the
 * target's vdso code and unwind tables can be read here instead of from the
 * live target. */
static int
uw_own_vdso(const uint8_t **img, size_t *len)
{
	uint64_t base = getauxval(AT_SYSINFO_EHDR);
	char *line = NULL;
	size_t cap = 0;
	int ret = -ENOENT;
	ssize_t r;
	FILE *f;

	if (!base)
		return -ENOENT;
	f = fopen("/proc/self/maps", "re");
	if (!f)
		return -errno;
	while ((r = getline(&line, &cap, f)) > 0) {
		struct maps_entry e;

		if (uw_parse_maps_line(line, (size_t)r, &e) == 0 && e.start == base) {
			*img = (const uint8_t *)(uintptr_t)e.start;
			*len = (size_t)(e.end - e.start);
			ret = 0;
			break;
		}
	}
	free(line);
	fclose(f);
	return ret;
}

static int
uw_open_module_file(struct uw_proc *p, struct uw_module *m)
{
	size_t len = strlen(m->path);
	bool del = maps_path_deleted(m->path, &len);
	char path[PATH_MAX];
	const struct remote_mapped rm = {
		.path = path,
		.start = m->map_start,
		.end = m->map_end,
		.dev_major = m->dev_major,
		.dev_minor = m->dev_minor,
		.inode = m->inode,
		.deleted = del,
	};
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%.*s", (int)len, m->path);
	fd = remote_open_mapped(p->pid, &rm, &st);
	if (fd < 0) {
		int e = errno;

		if (stop_thread_exiting(p->pid, p->pid)) {
			p->gone = true;
			return -ESRCH;
		}
		return -e;
	}
	return fd;
}

/* Load bias from the module's lowest mapping: file offset O mapped at S lies
 * in a PT_LOAD whose vaddr for O is p_vaddr + (O - p_offset) (p_vaddr and
 * p_offset are congruent modulo the page size). */
static bool
uw_compute_bias(struct uw_module *m)
{
	size_t i;

	for (i = 0; i < m->phnum; i++) {
		const GElf_Phdr *ph = &m->phdr[i];
		uint64_t pstart = ph->p_offset & ~(uint64_t)(UW_PAGE - 1);

		if (ph->p_type != PT_LOAD)
			continue;
		if (m->map_offset >= pstart &&
		    m->map_offset < ph->p_offset + (ph->p_filesz ? ph->p_filesz : 1)) {
			m->bias = m->map_start -
				  (ph->p_vaddr + m->map_offset - ph->p_offset);
			return true;
		}
	}
	return false;
}

/* Decode one fixed-size DWARF EH pointer from the file image; only the
 * encodings .eh_frame_hdr headers use in practice.  Returns the size read
 * or 0 if unsupported. */
static size_t
uw_read_eh_value(const uint8_t *p, size_t avail, uint8_t enc, uint64_t *val)
{
	size_t n;

	switch (enc & 0x0f) {
	case DW_EH_PE_absptr:
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8:
		n = 8;
		break;
	case DW_EH_PE_udata4:
	case DW_EH_PE_sdata4:
		n = 4;
		break;
	case DW_EH_PE_udata2:
	case DW_EH_PE_sdata2:
		n = 2;
		break;
	default:
		return 0;
	}
	if (avail < n)
		return 0;
	if (n == 8) {
		memcpy(val, p, 8);
	} else if (n == 4) {
		uint32_t u;

		memcpy(&u, p, 4);
		*val = (enc & 0x0f) == DW_EH_PE_sdata4 ? (uint64_t)(int64_t)(int32_t)u
						       : u;
	} else {
		uint16_t u;

		memcpy(&u, p, 2);
		*val = (enc & 0x0f) == DW_EH_PE_sdata2 ? (uint64_t)(int64_t)(int16_t)u
						       : u;
	}
	return n;
}

/* ---- a search table from .eh_frame ------------------------------------ */

/* Bounded readers over one section image [0, len). */
static bool
uw_get_u32(const uint8_t *b, size_t len, size_t off, uint32_t *v)
{
	if (off > len || len - off < 4)
		return false;
	memcpy(v, b + off, 4);
	return true;
}

static bool
uw_get_uleb(const uint8_t *b, size_t len, size_t *off, uint64_t *v)
{
	unsigned shift = 0;

	*v = 0;
	while (*off < len && shift < 64) {
		uint8_t c = b[(*off)++];

		*v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return true;
		shift += 7;
	}
	return false;
}

/* Size of a fixed-size encoded pointer, 0 for one we do not decode. */
static size_t
uw_enc_size(uint8_t enc)
{
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr:
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8:
		return 8;
	case DW_EH_PE_udata4:
	case DW_EH_PE_sdata4:
		return 4;
	case DW_EH_PE_udata2:
	case DW_EH_PE_sdata2:
		return 2;
	default:
		return 0;
	}
}

/* The FDE pointer encoding of the CIE at off (its 'R' augmentation,
 * absptr without one); false if it is no CIE we understand.  Only what
 * .eh_frame CIEs carry is parsed (LSB "Exception Frames"). */
static bool
uw_cie_fde_enc(const uint8_t *b, size_t len, size_t off, uint8_t *enc)
{
	uint32_t rlen, id;
	size_t end, aug, aug_end, p;
	uint64_t v;
	uint8_t version;

	if (!uw_get_u32(b, len, off, &rlen) || rlen == 0xffffffffu || rlen < 8 ||
	    rlen > len - off - 4 || !uw_get_u32(b, len, off + 4, &id) || id != 0)
		return false;
	end = off + 4 + rlen;
	p = off + 8;
	version = b[p++];
	if (version != 1 && version != 3 && version != 4)
		return false;
	aug = p;
	/* "zR", "zPLR" and the like: a long one is no CIE of ours, and the
	 * bound keeps each call short whatever the file holds */
	while (p < end && p - aug < 16 && b[p])
		p++;
	if (p >= end || b[p])
		return false;
	aug_end = p++;
	*enc = DW_EH_PE_absptr;
	if (aug == aug_end)
		return true; /* no augmentation: absolute pointers */
	if (b[aug] != 'z')
		return false; /* "eh" and other old forms */
	if (version == 4) {
		if (end - p < 2)
			return false;
		p += 2; /* address_size, segment_selector_size */
	}
	if (!uw_get_uleb(b, end, &p, &v) || /* code alignment */
	    !uw_get_uleb(b, end, &p, &v))   /* data alignment (sleb: skipped) */
		return false;
	if (version == 1) {
		if (p >= end)
			return false;
		p++; /* return address register */
	} else if (!uw_get_uleb(b, end, &p, &v)) {
		return false;
	}
	if (!uw_get_uleb(b, end, &p, &v) || v > end - p) /* augmentation length */
		return false;
	for (aug++; aug < aug_end; aug++) {
		size_t n;

		switch (b[aug]) {
		case 'R':
			if (p >= end)
				return false;
			*enc = b[p];
			return true;
		case 'L':
			p++;
			break;
		case 'P':
			if (p >= end || (b[p] & 0x70) == 0x50) /* aligned */
				return false;
			n = uw_enc_size(b[p]);
			if (!n || end - p < 1 + n)
				return false;
			p += 1 + n;
			break;
		case 'S':
		case 'B':
		case 'G':
			break;
		default:
			return false;
		}
		if (p > end)
			return false;
	}
	return true;
}

static int
uw_synth_cmp(const void *a, const void *b)
{
	int32_t x = ((const int32_t *)a)[0], y = ((const int32_t *)b)[0];

	return x < y ? -1 : x > y;
}

/* Target address of module m's built table. */
static uint64_t
uw_synth_addr(const struct uw_module *m)
{
	return UW_SYNTH_BASE + (uint64_t)m->index * UW_SYNTH_STRIDE;
}

/* pread() of n bytes at off, all of them or fail (a file that ends
 * before: truncated since it was loaded). */
static bool
uw_pread_all(int fd, uint8_t *buf, size_t n, uint64_t off)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = pread(fd, buf + got, n - got, (off_t)(off + got));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		got += (size_t)r;
	}
	return true;
}

/* The part of a module's file the unwinder reads (its loaded segments:
 * code, unwind tables, dynamic section), m->size bytes from offset 0:
 * what the file holds past its last PT_LOAD (symbol tables, debug
 * sections) is left to libelf, which reads the sections it is asked for.
 * Nothing is read yet (uw_image_read()): a library of hundreds of MB of
 * which a stack touches a few FDEs costs a few blocks.  A file shorter
 * than its segments (truncated since it was loaded) fails. */
static bool
uw_image_open(struct uw_module *m)
{
	uint64_t end = 0;
	struct stat st;
	size_t i;

	for (i = 0; i < m->phnum; i++) {
		const GElf_Phdr *ph = &m->phdr[i];

		if (ph->p_type == PT_LOAD &&
		    ph->p_offset + ph->p_filesz >= ph->p_offset &&
		    ph->p_offset + ph->p_filesz > end)
			end = ph->p_offset + ph->p_filesz;
	}
	if (end == 0 || fstat(m->fd, &st) < 0 || end > (uint64_t)st.st_size ||
	    end > SIZE_MAX - UW_BLOCK)
		return false;
	m->blocks = calloc(((size_t)end + UW_BLOCK - 1) / UW_BLOCK, sizeof(*m->blocks));
	if (!m->blocks)
		return false;
	m->size = (size_t)end;
	return true;
}

/* Copy n bytes at file offset off of module m (within m->size) to buf:
 * from the vdso's image, or from the blocks of the file, each read with
 * pread() when first asked for.  Never a mapping of the file: the target
 * can truncate a file it maps and can write (a library copy of its own, a
 * memfd), and a read of a mapping past the file's new end raises SIGBUS,
 * which no handler could jump out of safely here: libunwind calls
 * uw_access_mem(), which reads the module, while it holds the lock of its
 * global cache, with signals blocked (lock_acquire() in libunwind's
 * libunwind_i.h; the kernel kills a process whose fault signal is
 * blocked).  A read past the file's end fails instead. */
static bool
uw_image_read(struct uw_proc *p, struct uw_module *m, uint64_t off, void *buf, size_t n)
{
	uint8_t *out = buf;

	if (off > m->size || n > m->size - off)
		return false;
	if (m->image) {
		memcpy(out, m->image + off, n);
		return true;
	}
	while (n) {
		size_t b = (size_t)(off / UW_BLOCK), in = (size_t)(off % UW_BLOCK);
		size_t len = m->size - b * UW_BLOCK, k = UW_BLOCK - in;

		if (len > UW_BLOCK)
			len = UW_BLOCK;
		if (!m->blocks[b]) {
			uint8_t *blk = malloc(len);
			/* shed: through a descriptor of its own, checked to
			 * be the same file (uw_open_module_file()) */
			int fd = m->shed ? uw_open_module_file(p, m) : m->fd;
			bool ok = fd >= 0 && blk &&
				  uw_pread_all(fd, blk, len, (uint64_t)b * UW_BLOCK);

			if (m->shed && fd >= 0)
				close(fd);
			if (!ok) {
				free(blk);
				return false;
			}
			m->blocks[b] = blk;
		}
		if (k > n)
			k = n;
		memcpy(out, m->blocks[b] + in, k);
		out += k;
		off += k;
		n -= k;
	}
	return true;
}

/* A module without .eh_frame_hdr (statically linked executables: gcc
 * passes --eh-frame-hdr to the linker only when linking dynamically or
 * -static-pie) still has .eh_frame, which its own libgcc unwinder walks.
 * Build the binary-search table .eh_frame_hdr would have held from it:
 * every FDE's start, relative to .eh_frame, sorted.  .eh_frame must lie
 * in a read-only PT_LOAD, where uw_module_read serves the FDEs from the
 * file.  Every length and offset comes from the file and is checked. */
static void
uw_setup_table_from_eh_frame(struct uw_module *m, uint64_t lo, uint64_t hi, uint64_t gp)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	size_t shstrndx, i, n = 0, cap, off, cie_cached = SIZE_MAX;
	uint8_t enc = 0, *own = NULL;
	const uint8_t *b = NULL;
	size_t len = 0;
	uint64_t sec = 0;
	int32_t *t;

	if (elf_getshdrstrndx(m->elf, &shstrndx) != 0)
		return;
	while ((scn = elf_nextscn(m->elf, scn))) {
		const char *name;

		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_PROGBITS && sh.sh_type != SHT_X86_64_UNWIND))
			continue;
		name = elf_strptr(m->elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".eh_frame") != 0)
			continue;
		if (sh.sh_offset >= m->size || sh.sh_size > m->size - sh.sh_offset ||
		    sh.sh_size < 8)
			return;
		/* in a read-only segment, at the same offset as in the file */
		for (i = 0; i < m->phnum; i++) {
			const GElf_Phdr *ph = &m->phdr[i];

			if (ph->p_type == PT_LOAD && !(ph->p_flags & PF_W) &&
			    sh.sh_offset >= ph->p_offset &&
			    sh.sh_offset + sh.sh_size <= ph->p_offset + ph->p_filesz &&
			    sh.sh_addr - ph->p_vaddr == sh.sh_offset - ph->p_offset)
				break;
		}
		if (i == m->phnum || sh.sh_size > (size_t)INT32_MAX)
			return;
		len = (size_t)sh.sh_size;
		sec = sh.sh_addr;
		/* a file's: read for this scan only (not kept in blocks:
		 * libunwind reads back the few FDEs it needs) */
		if (m->image) {
			b = m->image + sh.sh_offset;
		} else {
			own = malloc(len);
			if (!own || !uw_pread_all(m->fd, own, len, sh.sh_offset)) {
				free(own);
				return;
			}
			b = own;
		}
		break;
	}
	if (!b)
		return;
	/* an FDE we take has at least 12 bytes: length, CIE pointer, two
	 * 2-byte addresses */
	cap = len / 12 + 1;
	t = malloc(cap * 2 * sizeof(*t));
	if (!t) {
		free(own);
		return;
	}
	for (off = 0; n < cap;) {
		uint32_t rlen, id;
		uint64_t pc, range;
		size_t rec, sz;
		int64_t rel;

		if (!uw_get_u32(b, len, off, &rlen) || rlen == 0)
			break; /* the end, or the terminator libgcc stops at */
		if (rlen == 0xffffffffu || rlen < 4 || rlen > len - off - 4)
			break; /* 64-bit DWARF or garbage: what came before stays */
		rec = off + 4;
		if (!uw_get_u32(b, len, rec, &id))
			break;
		if (id != 0 && id <= rec) {
			/* an FDE: id is its distance back to its CIE */
			if (rec - id != cie_cached) {
				cie_cached = SIZE_MAX;
				if (uw_cie_fde_enc(b, len, rec - id, &enc))
					cie_cached = rec - id;
			}
			sz = uw_enc_size(enc);
			if (cie_cached != SIZE_MAX && sz &&
			    !(enc & DW_EH_PE_indirect) &&
			    ((enc & 0x70) == DW_EH_PE_absptr ||
			     (enc & 0x70) == DW_EH_PE_pcrel) &&
			    2 * sz <= rlen - 4 &&
			    uw_read_eh_value(b + rec + 4, 2 * sz, enc, &pc) == sz &&
			    uw_read_eh_value(b + rec + 4 + sz, sz, enc & 0x0f,
					     &range) == sz &&
			    range != 0) {
				if ((enc & 0x70) == DW_EH_PE_pcrel)
					pc += sec + rec + 4;
				rel = (int64_t)(pc - sec);
				/* pc 0: an FDE of discarded code */
				if (pc != 0 && pc >= lo && pc < hi &&
				    rel >= INT32_MIN && rel <= INT32_MAX) {
					t[2 * n] = (int32_t)rel;
					t[2 * n + 1] = (int32_t)off;
					n++;
				}
			}
		}
		off = rec + rlen;
	}
	free(own);
	if (n == 0) {
		free(t);
		return;
	}
	qsort(t, n, 2 * sizeof(*t), uw_synth_cmp);
	m->synth = t;
	m->synth_len = n * 2 * sizeof(*t);
	memset(&m->di, 0, sizeof(m->di));
	m->di.start_ip = m->bias + lo;
	m->di.end_ip = m->bias + hi;
	m->di.gp = gp;
	m->di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
	m->di.u.rti.segbase = m->bias + sec;
	m->di.u.rti.table_data = uw_synth_addr(m);
	m->di.u.rti.table_len = m->synth_len / sizeof(unw_word_t);
	m->have_table = true;
}

/* Describe the module's .eh_frame_hdr binary-search table to libunwind in
 * target addresses; libunwind reads it back through uw_access_mem, which
 * serves it from the file. */
static void
uw_setup_table(struct uw_proc *p, struct uw_module *m)
{
	const GElf_Phdr *eh = NULL;
	uint64_t lo = UINT64_MAX, hi = 0, gp = 0, fde_count, dummy;
	/* the header: 4 bytes, then two encoded values of 8 bytes at most */
	uint8_t h[4 + 2 * 8];
	size_t i, off, n, hlen;

	for (i = 0; i < m->phnum; i++) {
		const GElf_Phdr *ph = &m->phdr[i];

		if (ph->p_type == PT_LOAD) {
			if (ph->p_vaddr < lo)
				lo = ph->p_vaddr;
			if (ph->p_vaddr + ph->p_memsz > hi)
				hi = ph->p_vaddr + ph->p_memsz;
		} else if (ph->p_type == PT_GNU_EH_FRAME) {
			eh = ph;
		} else if (ph->p_type == PT_DYNAMIC && ph->p_offset < m->size &&
			   ph->p_filesz <= m->size - ph->p_offset) {
			/* DT_PLTGOT is the base of DW_EH_PE_datarel in FDEs. */
			size_t k;

			for (k = 0; k + sizeof(Elf64_Dyn) <= ph->p_filesz;
			     k += sizeof(Elf64_Dyn)) {
				Elf64_Dyn d;

				if (!uw_image_read(p, m, ph->p_offset + k, &d,
						   sizeof(d)) ||
				    d.d_tag == DT_NULL)
					break;
				if (d.d_tag == DT_PLTGOT)
					gp = m->bias + d.d_un.d_ptr;
			}
		}
	}
	if (lo >= hi)
		return;
	if (!eh || eh->p_offset >= m->size || eh->p_filesz < 4 ||
	    eh->p_filesz > m->size - eh->p_offset)
		goto from_eh_frame;
	hlen = eh->p_filesz < sizeof(h) ? (size_t)eh->p_filesz : sizeof(h);
	if (!uw_image_read(p, m, eh->p_offset, h, hlen))
		goto from_eh_frame;
	/* version, eh_frame_ptr_enc, fde_count_enc, table_enc; libunwind's
	 * remote search needs the usual datarel|sdata4 table. */
	if (h[0] != 1 || h[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4) ||
	    h[1] == DW_EH_PE_omit || h[2] == DW_EH_PE_omit)
		goto from_eh_frame;
	off = 4;
	n = uw_read_eh_value(h + off, hlen - off, h[1], &dummy);
	if (!n)
		goto from_eh_frame;
	off += n;
	n = uw_read_eh_value(h + off, hlen - off, h[2], &fde_count);
	if (!n)
		goto from_eh_frame;
	off += n;
	if (fde_count == 0 || fde_count > (eh->p_filesz - off) / 8)
		goto from_eh_frame;
	memset(&m->di, 0, sizeof(m->di));
	m->di.start_ip = m->bias + lo;
	m->di.end_ip = m->bias + hi;
	m->di.gp = gp;
	m->di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
	m->di.u.rti.name_ptr = 0;
	m->di.u.rti.segbase = m->bias + eh->p_vaddr;
	m->di.u.rti.table_data = m->bias + eh->p_vaddr + off;
	/* two int32 per entry, counted in words */
	m->di.u.rti.table_len = fde_count * 8 / sizeof(unw_word_t);
	m->have_table = true;
	return;
from_eh_frame:
	uw_setup_table_from_eh_frame(m, lo, hi, gp);
}

static void uw_load_syms(struct uw_proc *p, struct uw_module *m);

/* Close the descriptor of m, loaded from a file.  Its symbols are read
 * first (uw_load_syms(), which the first frame named in it would do
 * anyway): that is the last libelf reads through it, and what it read
 * stays (ELF_C_FDDONE).  Reading the whole file instead (ELF_C_FDREAD)
 * would cost as much memory as the file is large. */
static void
uw_module_shed(struct uw_proc *p, struct uw_module *m)
{
	uw_load_syms(p, m);
	(void)elf_cntl(m->elf, ELF_C_FDDONE);
	close(m->fd);
	m->fd = -1;
	m->shed = true;
	if (m->kept)
		fd_budget_give(&uw_fds);
	m->kept = false;
}

/* Out of descriptors (EMFILE, ENFILE) while loading a module of p: every
 * loaded module closes its descriptor, and none keeps one from now on
 * (until stack_unwind_reset()).  Those whose symbols were read first:
 * the others may need a descriptor to read theirs (a debug file).
 * Whether one was closed. */
static bool
uw_fds_shed(struct uw_proc *p)
{
	bool shed = false;
	size_t i, k;

	for (k = 0; k < 2; k++)
		for (i = 0; i < p->nmods; i++) {
			struct uw_module *m = p->mods[i];

			if (m->loaded && m->fd >= 0 && (k == 1 || m->syms_tried)) {
				uw_module_shed(p, m);
				shed = true;
			}
		}
	fd_budget_drain(&uw_fds);
	uw_fds_ready = true;
	return shed;
}

static bool
uw_module_load(struct uw_proc *p, struct uw_module *m)
{
	GElf_Ehdr eh;
	size_t i;

	if (m->tried)
		return m->loaded;
	m->tried = true;
	if (m->is_vdso) {
		const uint8_t *img = NULL;
		size_t len = 0;

		if (uw_own_vdso(&img, &len) < 0 || len != m->map_end - m->map_start)
			return false;
		m->copy = malloc(len);
		if (!m->copy)
			return false;
		memcpy(m->copy, img, len);
		m->elf = elf_memory((char *)m->copy, len);
		m->image = m->copy;
		m->size = len;
		m->map_offset = 0;
	} else {
		m->fd = uw_open_module_file(p, m);
		if (fd_exhausted(m->fd) && uw_fds_shed(p))
			m->fd = uw_open_module_file(p, m);
		if (m->fd < 0)
			return false;
		/* read with pread(), never mapped (ELF_C_READ_MMAP), as the
		 * module's segments are (uw_image_read()) */
		m->elf = elf_begin(m->fd, ELF_C_READ, NULL);
	}
	if (!m->elf || elf_kind(m->elf) != ELF_K_ELF ||
	    gelf_getclass(m->elf) != ELFCLASS64 || !gelf_getehdr(m->elf, &eh) ||
	    elf_getphdrnum(m->elf, &m->phnum) != 0 || m->phnum == 0)
		goto fail;
	m->phdr = calloc(m->phnum, sizeof(*m->phdr));
	if (!m->phdr)
		goto fail;
	for (i = 0; i < m->phnum; i++)
		if (!gelf_getphdr(m->elf, (int)i, &m->phdr[i]))
			goto fail;
	if (!m->is_vdso && !uw_image_open(m))
		goto fail;
	if (!uw_compute_bias(m))
		goto fail;
	uw_setup_table(p, m);
	m->loaded = true;
	if (!m->is_vdso) {
		if (!uw_fds_ready) {
			fd_budget_init(&uw_fds);
			uw_fds_ready = true;
		}
		m->kept = fd_budget_take(&uw_fds);
		if (!m->kept)
			uw_module_shed(p, m);
	}
	return true;
fail:
	/* nothing reads a module that could not be loaded: its descriptor
	 * would only count against RLIMIT_NOFILE */
	if (m->elf)
		elf_end(m->elf);
	m->elf = NULL;
	if (m->fd >= 0)
		close(m->fd);
	m->fd = -1;
	return false;
}

/* Whether addr lies in a writable PT_LOAD (data, GOT, bss) of a loaded
 * module. */
static bool
uw_module_in_data(const struct uw_module *m, uint64_t addr)
{
	uint64_t v = addr - m->bias;
	size_t i;

	if (!m->loaded)
		return false;
	for (i = 0; i < m->phnum; i++) {
		const GElf_Phdr *ph = &m->phdr[i];

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_W) && v >= ph->p_vaddr &&
		    v - ph->p_vaddr < ph->p_memsz)
			return true;
	}
	return false;
}

/* Copy 8 bytes at target address addr from the module's file image, only
 * from a read-only PT_LOAD (text, rodata, eh_frame): those bytes are the
 * same in the process as in the file; bytes past the segment read as 0. */
static bool
uw_module_read(struct uw_proc *p, const struct uw_map *mp, uint64_t addr, uint64_t *val)
{
	struct uw_module *m = mp->mod;
	uint64_t foff;
	size_t i;

	if (mp->writable || mp->unsure || !uw_module_load(p, m))
		return false;
	foff = addr - mp->start + mp->offset;
	for (i = 0; i < m->phnum; i++) {
		const GElf_Phdr *ph = &m->phdr[i];
		uint8_t buf[8] = {0};
		size_t n;

		if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W) ||
		    foff < ph->p_offset || foff >= ph->p_offset + ph->p_filesz ||
		    foff >= m->size)
			continue;
		n = (size_t)(ph->p_offset + ph->p_filesz - foff);
		if (n > m->size - foff)
			n = (size_t)(m->size - foff);
		if (n > 8)
			n = 8;
		if (!uw_image_read(p, m, foff, buf, n))
			return false;
		memcpy(val, buf, 8);
		return true;
	}
	return false;
}

/* ---- symbols ---------------------------------------------------------- */

/* Among aliases at one address prefer the name a person would write:
 * exported (global or weak) over local ones like __GI___libc_read or
 * __libc_start_main_alias_1, then fewer leading underscores (read over
 * __read), then a default version (name@@V, printed without the version)
 * over an old one (name@V). */
static int
uw_sym_rank(const char *name, unsigned bind)
{
	const char *at = strchr(name, '@');
	int r = 0;

	while (name[r] == '_')
		r++;
	r *= 4;
	if (bind == STB_LOCAL)
		r += 1000;
	if (at && at[1] != '@')
		r += 2;
	return r;
}

static int
uw_sym_cmp(const void *a, const void *b)
{
	const struct uw_sym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return strcmp(x->name, y->name);
}

static void
uw_load_syms_from(struct uw_module *m, Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh)
{
	Elf_Scn *strscn = elf_getscn(elf, sh->sh_link);
	GElf_Shdr strsh;
	Elf_Data *data;
	size_t i, n, k = 0;

	/* libelf reads all of what a section header says, and a hole in
	 * the file makes any size: 768 MiB of .symtab cost 2.6 GB (the
	 * table, and ours) */
	if (sh->sh_entsize != sizeof(Elf64_Sym) || sh->sh_size > UW_SYMTAB_MAX ||
	    !strscn || !gelf_getshdr(strscn, &strsh) || strsh.sh_size > UW_SYMTAB_MAX)
		return;
	data = elf_getdata(scn, NULL);
	if (!data)
		return;
	n = data->d_size / sizeof(Elf64_Sym);
	m->syms = calloc(n ? n : 1, sizeof(*m->syms));
	if (!m->syms)
		return;
	for (i = 0; i < n; i++) {
		GElf_Sym sym;
		const char *name;
		unsigned type;

		if (!gelf_getsym(data, (int)i, &sym))
			continue;
		type = GELF_ST_TYPE(sym.st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) ||
		    sym.st_shndx == SHN_UNDEF || sym.st_value == 0)
			continue;
		name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!name || !*name)
			continue;
		m->syms[k].addr = sym.st_value;
		m->syms[k].size = sym.st_size;
		if (sym.st_size == 0 && sym.st_shndx < SHN_LORESERVE) {
			/* No size (_init, assembly without .size): it
			 * still ends with its section, so that the PLT
			 * after .init is not named _init+0x80. */
			Elf_Scn *ss = elf_getscn(elf, sym.st_shndx);
			GElf_Shdr ssh;

			if (ss && gelf_getshdr(ss, &ssh) &&
			    sym.st_value >= ssh.sh_addr &&
			    sym.st_value < ssh.sh_addr + ssh.sh_size)
				m->syms[k].size =
					ssh.sh_addr + ssh.sh_size - sym.st_value;
		}
		m->syms[k].name = name;
		m->syms[k].rank = uw_sym_rank(name, GELF_ST_BIND(sym.st_info));
		k++;
	}
	qsort(m->syms, k, sizeof(*m->syms), uw_sym_cmp);
	/* keep the best-ranked alias of each address (first after sorting) */
	for (i = 0, n = 0; i < k; i++)
		if (n == 0 || m->syms[n - 1].addr != m->syms[i].addr)
			m->syms[n++] = m->syms[i];
	m->nsyms = n;
}

static Elf_Scn *
uw_find_scn(Elf *elf, GElf_Word type, GElf_Shdr *sh)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn)))
		if (gelf_getshdr(scn, sh) && sh->sh_type == type)
			return scn;
	return NULL;
}

/* The NT_GNU_BUILD_ID of elf; returns its length, 0 if there is none. */
static size_t
uw_build_id(Elf *elf, uint8_t *id, size_t cap)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(elf, scn))) {
		Elf_Data *data;
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		data = elf_getdata(scn, NULL);
		if (!data)
			continue;
		while ((off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    memcmp((const char *)data->d_buf + name_off, "GNU", 4) ==
				    0 &&
			    nh.n_descsz > 0 && nh.n_descsz <= cap) {
				memcpy(id, (const uint8_t *)data->d_buf + desc_off,
				       nh.n_descsz);
				return nh.n_descsz;
			}
		}
	}
	return 0;
}

/* Stripped distribution libraries (Debian's libc) keep their full symbol
 * table in a separate debug file named by build id; look for it under the
 * target's root first, then ours.  Only a file with the same build id is
 * used. */
static Elf_Scn *
uw_open_debug_symtab(struct uw_proc *p, struct uw_module *m, GElf_Shdr *sh)
{
	uint8_t id[64], did[64];
	char hex[2 * sizeof(id) + 1], fn[PATH_MAX];
	struct stat st;
	size_t n, i, k;

	n = uw_build_id(m->elf, id, sizeof(id));
	if (n < 2)
		return NULL;
	for (i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
	for (k = 0; k < 2; k++) {
		Elf_Scn *scn;
		int fd;

		snprintf(fn, sizeof(fn), "/usr/lib/debug/.build-id/%.2s/%s.debug", hex,
			 hex + 2);
		/* a regular file only: the target's root is the target's,
		 * and a FIFO there would make us wait with its threads
		 * stopped */
		fd = k == 0 ? remote_open_in_root(p->pid, fn, &st)
			    : remote_open_regular(fn, &st);
		if (fd < 0)
			continue;
		/* read, not mapped, as the module (uw_module_load()) */
		m->dbg_elf = elf_begin(fd, ELF_C_READ, NULL);
		if (m->dbg_elf && elf_kind(m->dbg_elf) == ELF_K_ELF &&
		    uw_build_id(m->dbg_elf, did, sizeof(did)) == n &&
		    memcmp(id, did, n) == 0 &&
		    (scn = uw_find_scn(m->dbg_elf, SHT_SYMTAB, sh))) {
			m->dbg_fd = fd;
			return scn;
		}
		if (m->dbg_elf)
			elf_end(m->dbg_elf);
		m->dbg_elf = NULL;
		close(fd);
	}
	return NULL;
}

static void
uw_load_syms(struct uw_proc *p, struct uw_module *m)
{
	Elf_Scn *scn;
	GElf_Shdr sh;

	if (m->syms_tried)
		return;
	m->syms_tried = true;
	scn = uw_find_scn(m->elf, SHT_SYMTAB, &sh);
	if (scn)
		uw_load_syms_from(m, m->elf, scn, &sh);
	if (m->nsyms == 0 && !m->is_vdso && (scn = uw_open_debug_symtab(p, m, &sh))) {
		free(m->syms);
		m->syms = NULL;
		uw_load_syms_from(m, m->dbg_elf, scn, &sh);
		/* nothing more is read from it: the names stay (FDDONE) */
		(void)elf_cntl(m->dbg_elf, ELF_C_FDDONE);
		close(m->dbg_fd);
		m->dbg_fd = -1;
	}
	if (m->nsyms == 0 && (scn = uw_find_scn(m->elf, SHT_DYNSYM, &sh))) {
		free(m->syms);
		m->syms = NULL;
		uw_load_syms_from(m, m->elf, scn, &sh);
		m->syms_dynsym = true;
	}
}

static struct uw_sym *
uw_lookup_sym(struct uw_proc *p, struct uw_module *m, uint64_t vaddr)
{
	size_t lo = 0, hi;
	struct uw_sym *s;

	uw_load_syms(p, m);
	hi = m->nsyms;
	if (hi == 0)
		return NULL;
	/* last symbol with addr <= vaddr */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->syms[mid].addr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	s = &m->syms[lo - 1];
	if (s->size && vaddr - s->addr >= s->size)
		return NULL;
	return s;
}

/* C++ names are shown demangled, as gdb and eu-stack show them, by the
 * C++ runtime's own demangler: looked up on the first mangled name, so
 * that ctxdump (C) needs libstdc++ only for C++ targets, whose hosts have
 * it.  Names longer than this stay as they are: they come from the
 * target's files, and the demangler recurses on what it reads.  (It
 * refuses longer ones itself: libiberty's DEMANGLE_RECURSION_LIMIT, 2048
 * components, two a byte.) */
#define UW_DEMANGLE_MAX 1024
static bool uw_demangle_off;
static struct {
	char *(*demangle)(const char *name, char *buf, size_t *len, int *status);
	bool tried;
} uwd;

void
stack_unwind_set_demangle(bool on)
{
	uw_demangle_off = !on;
}

/* Whether the demangled form of name (n bytes) surely stays small.  Each
 * back-reference (S<seq>_, T<n>_, a pack expansion Dp) prints again what
 * it refers to, which may hold references itself: the output can double
 * with each (a 300-byte name demangles to 1 GB in seconds).  Taken as at
 * most n << refs bytes.  Most real names have a handful of references
 * (libstdc++'s exports at most 7), but some have dozens that do not nest
 * (0.5% of libLLVM's, up to 45): those are demangled in a child
 * (uw_demangle_child()). */
#define UW_DEMANGLE_BUDGET (1u << 22)
static bool
uw_demangle_bounded(const char *name, size_t n)
{
	uint64_t out = n;
	size_t i;

	for (i = 2; i + 1 < n; i++) {
		bool ref = false;

		if (name[i] == 'D' && name[i + 1] == 'p') {
			ref = true;
		} else if (name[i] == 'S' || name[i] == 'T') {
			size_t k = i + 1;

			while (k < n && ((name[k] >= '0' && name[k] <= '9') ||
					 (name[k] >= 'A' && name[k] <= 'Z')))
				k++;
			ref = k < n && name[k] == '_';
		}
		if (ref && (out *= 2) > UW_DEMANGLE_BUDGET)
			return false;
	}
	return true;
}

/* How long a child may demangle one name (uw_demangle_child()): a real
 * name takes microseconds. */
#define UW_DEMANGLE_CHILD_MS 200

/* name demangled in a child process, of which only the first
 * STACK_SYMBOL_MAX - 1 bytes come back (all that is shown): for a name
 * whose output may be huge (uw_demangle_bounded()).  The child is killed
 * after UW_DEMANGLE_CHILD_MS, which bounds its memory too (it grows some
 * hundred MB a second at most), and nothing of it reaches this process's
 * heap.  NULL if it failed, timed out, or a child could not be made. */
static char *
uw_demangle_child(const char *name)
{
	char out[STACK_SYMBOL_MAX];
	size_t len = 0;
	int fd[2], st;
	pid_t c;

	if (pipe2(fd, O_CLOEXEC) < 0)
		return NULL;
	c = fork();
	if (c == 0) {
		struct itimerval it = {{0, 0}, {0, UW_DEMANGLE_CHILD_MS * 1000}};
		sigset_t alrm;
		char *d;
		int r = -1;

		/* ctxdump may have been started with SIGALRM blocked (execve
		 * keeps the mask): the timer would then never end the child */
		sigemptyset(&alrm);
		sigaddset(&alrm, SIGALRM);
		(void)sigprocmask(SIG_UNBLOCK, &alrm, NULL);
		signal(SIGALRM, SIG_DFL);
		(void)setitimer(ITIMER_REAL, &it, NULL);
		d = uwd.demangle(name, NULL, NULL, &r);
		if (r == 0 && d && write(fd[1], d, strnlen(d, sizeof(out) - 1)) < 0)
			_exit(1);
		_exit(r == 0 ? 0 : 1);
	}
	close(fd[1]);
	if (c < 0) {
		close(fd[0]);
		return NULL;
	}
	for (;;) {
		ssize_t r = read(fd[0], out + len, sizeof(out) - 1 - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
		if (len == sizeof(out) - 1)
			break;
	}
	close(fd[0]);
	while (waitpid(c, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || len == 0)
		return NULL;
	return strndup(out, len);
}

/* The demangled name of "_Z..." (its "@VERSION" cut off), allocated, or
 * NULL: not mangled, too long, not demangled, or no demangler. */
static char *
uw_demangle(const char *name)
{
	char buf[UW_DEMANGLE_MAX + 1], *d;
	size_t n;
	int st = -1;

	if (uw_demangle_off || name[0] != '_' || name[1] != 'Z')
		return NULL;
	n = strcspn(name, "@");
	if (n > UW_DEMANGLE_MAX)
		return NULL;
	if (!uwd.tried) {
		void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);

		uwd.tried = true;
		if (h)
			uwd.demangle =
				(__typeof__(uwd.demangle))dlsym(h, "__cxa_demangle");
	}
	if (!uwd.demangle)
		return NULL;
	memcpy(buf, name, n);
	buf[n] = '\0';
	if (!uw_demangle_bounded(buf, n))
		return uw_demangle_child(buf);
	d = uwd.demangle(buf, NULL, NULL, &st);
	if (st != 0) {
		free(d);
		return NULL;
	}
	return d;
}

/* s's name as shown: demangled once, when first shown. */
static const char *
uw_sym_name(struct uw_sym *s)
{
	char *d;

	if (!s->name_done) {
		s->name_done = true;
		d = uw_demangle(s->name);
		if (d) {
			s->name = d;
			s->name_owned = true;
		}
	}
	return s->name;
}

static void
uw_copy_str(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);

	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* Whether addr lies in a mapping marked unsure (struct uw_map). */
static bool
uw_unsure(struct uw_proc *p, uint64_t addr)
{
	const struct uw_map *mp = uw_find_map(p, addr);

	return mp && mp->unsure;
}

/* Fill symbol, offset, module; lookup is the address used to find the
 * function (ip - 1 for a return address, so a call at the very end of a
 * function does not resolve to the next one). */
static void
uw_symbolize(struct uw_proc *p, struct stack_frame *f, uint64_t lookup)
{
	struct uw_map *mp = uw_find_map(p, lookup);
	struct uw_sym *s;
	struct uw_module *m;

	f->symbol[0] = '\0';
	f->module[0] = '\0';
	f->offset = 0;
	if (!mp || !mp->mod || mp->unsure)
		return;
	m = mp->mod;
	uw_copy_str(f->module, sizeof(f->module), m->path);
	if (!uw_module_load(p, m))
		return;
	f->offset = f->ip - m->bias;
	s = uw_lookup_sym(p, m, lookup - m->bias);
	if (!s)
		return;
	uw_copy_str(f->symbol, sizeof(f->symbol), uw_sym_name(s));
	f->symbol[strcspn(f->symbol, "@")] = '\0';
	f->offset = f->ip - (m->bias + s->addr);
	if (m->syms_dynsym)
		f->flags |= STACK_FRAME_DYNSYM;
}

/* ---- libunwind accessors ---------------------------------------------- */

static int
uw_find_proc_info(unw_addr_space_t as,
		  unw_word_t ip,
		  unw_proc_info_t *pi,
		  int need_unwind_info,
		  void *arg)
{
	struct uw_ctx *c = arg;
	struct uw_map *mp = uw_find_map(c->proc, ip);
	struct uw_module *m;
	int r = -UNW_ENOINFO;

	if (mp && mp->mod && !mp->unsure) {
		m = mp->mod;
		if (uw_module_load(c->proc, m) && m->have_table &&
		    ip >= m->di.start_ip && ip < m->di.end_ip) {
			c->in_search = true;
			r = uwl.search_unwind_table(as, ip, &m->di, pi,
						    need_unwind_info, arg);
			c->in_search = false;
		}
	}
	/* libunwind then falls back to the frame-pointer chain */
	if (r == -UNW_ENOINFO)
		c->no_info = true;
	return r;
}

static void
uw_put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
	/* libunwind frees what dwarf_search_unwind_table allocated itself. */
}

static int
uw_get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *addr, void *arg)
{
	return -UNW_ENOINFO;
}

static int
uw_access_mem(
	unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write, void *arg)
{
	struct uw_ctx *c = arg;
	const struct stack_snap *s = c->snap;
	struct uw_map *mp;

	if (write)
		return -UNW_EREADONLYREG;
	if (++c->reads > UW_STEP_READS) {
		c->too_many_reads = true;
		return -UNW_EINVAL;
	}
	if (s->stack_len >= 8 && addr >= s->stack_addr &&
	    addr - s->stack_addr <= s->stack_len - 8) {
		memcpy(val, s->stack + (addr - s->stack_addr), 8);
		return 0;
	}
	if (c->in_search && addr >= UW_SYNTH_BASE) {
		/* a search table ctxdump built (uw_setup_table_from_eh_frame) */
		uint64_t i = (addr - UW_SYNTH_BASE) / UW_SYNTH_STRIDE;
		uint64_t off = (addr - UW_SYNTH_BASE) % UW_SYNTH_STRIDE;
		const struct uw_module *m =
			i < c->proc->nmods ? c->proc->mods[i] : NULL;

		if (m && m->synth && off < m->synth_len) {
			uint8_t buf[8] = {0};
			size_t n = m->synth_len - (size_t)off;

			memcpy(buf, (const uint8_t *)m->synth + off, n < 8 ? n : 8);
			memcpy(val, buf, 8);
			return 0;
		}
	}
	mp = uw_find_map(c->proc, addr);
	if (mp && mp->mod && uw_module_read(c->proc, mp, addr, val))
		return 0;
	if (c->in_search && mp && mp->mod && !mp->unsure &&
	    uw_module_in_data(mp->mod, addr)) {
		/* An FDE's personality routine is reached through an
		 * indirect pointer in the module's data (DW.ref.*), which
		 * libunwind reads while parsing the FDE (fwrite and every
		 * other function with cleanups).  Its value does not matter
		 * for unwinding and live data is off limits: read as 0.
		 * Only then: a frame's saved registers in module data (a
		 * coroutine stack in .data, deeper than the copy) must fail
		 * the read, not end the stack at a return address of 0. */
		*val = 0;
		return 0;
	}
	if (!c->mem_fail) {
		c->mem_fail = true;
		c->fail_addr = addr;
	}
	return -UNW_EINVAL;
}

static int
uw_access_reg(
	unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write, void *arg)
{
	const struct user_regs_struct *r = ((struct uw_ctx *)arg)->regs;

	if (write)
		return -UNW_EREADONLYREG;
	switch (reg) {
	case UNW_X86_64_RAX:
		*val = r->rax;
		break;
	case UNW_X86_64_RDX:
		*val = r->rdx;
		break;
	case UNW_X86_64_RCX:
		*val = r->rcx;
		break;
	case UNW_X86_64_RBX:
		*val = r->rbx;
		break;
	case UNW_X86_64_RSI:
		*val = r->rsi;
		break;
	case UNW_X86_64_RDI:
		*val = r->rdi;
		break;
	case UNW_X86_64_RBP:
		*val = r->rbp;
		break;
	case UNW_X86_64_RSP:
		*val = r->rsp;
		break;
	case UNW_X86_64_R8:
		*val = r->r8;
		break;
	case UNW_X86_64_R9:
		*val = r->r9;
		break;
	case UNW_X86_64_R10:
		*val = r->r10;
		break;
	case UNW_X86_64_R11:
		*val = r->r11;
		break;
	case UNW_X86_64_R12:
		*val = r->r12;
		break;
	case UNW_X86_64_R13:
		*val = r->r13;
		break;
	case UNW_X86_64_R14:
		*val = r->r14;
		break;
	case UNW_X86_64_R15:
		*val = r->r15;
		break;
	case UNW_X86_64_RIP:
		*val = r->rip;
		break;
	default:
		return -UNW_EBADREG;
	}
	return 0;
}

static int
uw_access_fpreg(
	unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write, void *arg)
{
	return -UNW_EBADREG;
}

static int
uw_resume(unw_addr_space_t as, unw_cursor_t *cursor, void *arg)
{
	return -UNW_EINVAL;
}

static int
uw_get_proc_name(unw_addr_space_t as,
		 unw_word_t addr,
		 char *buf,
		 size_t len,
		 unw_word_t *off,
		 void *arg)
{
	/* Symbolization is ours (uw_symbolize), cached per module. */
	return -UNW_ENOINFO;
}

static unw_accessors_t uw_accessors = {
	.find_proc_info = uw_find_proc_info,
	.put_unwind_info = uw_put_unwind_info,
	.get_dyn_info_list_addr = uw_get_dyn_info_list_addr,
	.access_mem = uw_access_mem,
	.access_reg = uw_access_reg,
	.access_fpreg = uw_access_fpreg,
	.resume = uw_resume,
	.get_proc_name = uw_get_proc_name,
};

/* ---- unwinding -------------------------------------------------------- */

/* The x86_64 signal return trampoline (glibc and musl __restore_rt):
 * mov $__NR_rt_sigreturn, %rax; syscall.  The kernel pushes its address as
 * the handler's return address. */
static bool
uw_is_sigreturn(struct uw_proc *p, uint64_t ip)
{
	static const uint8_t code[9] = {0x48, 0xc7, 0xc0, 0x0f, 0x00,
					0x00, 0x00, 0x0f, 0x05};
	struct uw_map *mp = uw_find_map(p, ip);
	uint64_t w[2];

	if (!mp || !mp->mod || !uw_module_read(p, mp, ip, &w[0]) ||
	    !uw_module_read(p, mp, ip + 8, &w[1]))
		return false;
	return memcmp(w, code, sizeof(code)) == 0;
}

/* The frame a signal interrupted has ip 0: a call through a null
 * function pointer (the usual SIGSEGV), whose return address is the word
 * at sp.  libunwind has no unwind information for address 0 and would end
 * or guess; go on from the caller instead, with the registers the signal
 * frame restored.  Returns 0 with cur re-initialized there, or -1. */
static int
uw_skip_null_call(struct uw_ctx *c, unw_cursor_t *cur)
{
	static const struct {
		unw_regnum_t reg;
		size_t off;
	} regs[] = {
#define UW_R(n, f) {UNW_X86_64_##n, offsetof(struct user_regs_struct, f)}
		UW_R(RAX, rax), UW_R(RDX, rdx), UW_R(RCX, rcx), UW_R(RBX, rbx),
		UW_R(RSI, rsi), UW_R(RDI, rdi), UW_R(RBP, rbp), UW_R(R8, r8),
		UW_R(R9, r9),   UW_R(R10, r10), UW_R(R11, r11), UW_R(R12, r12),
		UW_R(R13, r13), UW_R(R14, r14), UW_R(R15, r15),
#undef UW_R
	};
	struct user_regs_struct r = *c->regs;
	unw_word_t sp = 0, ra = 0, v;
	size_t i;

	if (uwl.get_reg(cur, UNW_REG_SP, &sp) < 0 || sp == 0 ||
	    uw_access_mem(c->proc->as, sp, &ra, 0, c) < 0 || ra == 0)
		return -1;
	for (i = 0; i < sizeof(regs) / sizeof(regs[0]); i++) {
		v = 0;
		(void)uwl.get_reg(cur, regs[i].reg, &v);
		memcpy((char *)&r + regs[i].off, &v, sizeof(v));
	}
	r.rip = ra;
	r.rsp = sp + 8;
	c->restart = r;
	c->regs = &c->restart;
	return uwl.init_remote(cur, c->proc->as, c) < 0 ? -1 : 0;
}

static struct uw_proc *
uw_get_proc(pid_t pid, int *err)
{
	struct uw_proc *p;

	/* Another thread of the process than the cache's (the caller moved
	 * on after one it read through ended, or gave up on it): what was
	 * read stays good, as stack_unwind_sync() keeps it.  A cache thrown
	 * away here for a load through a thread that was dying left none,
	 * and with it went what the stop found (uw_stopped) and the marks
	 * of what changed around it. */
	if (uw_cache) {
		if (uw_cache->pid != pid)
			stack_unwind_rebind(uw_cache->pid, pid);
		return uw_cache;
	}
	(void)pthread_once(&uwl_once, uwl_open);
	if (!uwl.ok) {
		*err = -ELIBACC; /* "Can not access a needed shared library" */
		return NULL;
	}
	if (!uw_atexit_done) {
		uw_atexit_done = true;
		atexit(uw_atexit);
	}
	(void)elf_version(EV_CURRENT);
	p = uw_proc_load(pid, err);
	if (!p)
		return NULL;
	p->as = uwl.create_addr_space(&uw_accessors, 0);
	if (!p->as) {
		uw_proc_free(p);
		*err = -ENOMEM;
		return NULL;
	}
	uwl.set_caching_policy(p->as, UNW_CACHE_GLOBAL);
	uw_cache = p;
	return p;
}

/* One line of the maps file (len bytes with its newline) against p's
 * file mappings from *cur on (an offset in p->ftext): 1 the next of them,
 * moving *cur past it; 0 no mapping of a module; -1 another one.  The
 * text is compared as it is: no parsing for a line as it was, nor for the
 * anonymous ones, which are most (two per thread stack). */
static int
uw_fmap_line(const struct uw_proc *p, char *line, size_t len, size_t *cur)
{
	const char *slash = memchr(line, '/', len), *br = memchr(line, '[', len);
	const char *path = !slash || (br && br < slash) ? br : slash;
	struct maps_entry e;
	size_t plen;

	/* the fields before the pathname have neither character */
	if (!path)
		return 0;
	plen = (size_t)(line + len - path);
	if (path[plen - 1] == '\n')
		plen--;
	if (path == br && (plen != 6 || memcmp(path, "[vdso]", 6) != 0))
		return 0;
	if (p->ftext_len - *cur >= len && memcmp(p->ftext + *cur, line, len) == 0) {
		*cur += len;
		return 1;
	}
	/* not as it was: unless uw_proc_load() would not take it either */
	if (uw_parse_maps_line(line, len, &e) < 0 || e.end <= e.start ||
	    !uw_is_module_path(e.path))
		return 0;
	return -1;
}

/* Whether the file mappings of pid are still those p was read from: 1
 * yes, 0 no, or a negative errno (stop_maps_error(): -ESRCH when pid's
 * maps cannot be read, or are empty, because it exited).  One read of
 * the maps, compared as it goes, nothing kept: called twice every round
 * of a recording. */
static int
uw_fmaps_same(const struct uw_proc *p, pid_t pid)
{
	/* one process at a time (uw_cache); not malloc()ed every round,
	 * where freeing it could give the heap's top back to the kernel */
	static char buf[UW_MAPS_BUF];
	size_t have = 0, cur = 0, lines = 0;
	int fd, same = 1;
	char fn[64];

	snprintf(fn, sizeof(fn), "/proc/%d/maps", (int)pid);
	fd = open(fn, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return stop_maps_error(pid, -errno);
	while (same) {
		ssize_t r = read(fd, buf + have, UW_MAPS_BUF - have);
		char *l = buf, *nl;

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		have += (size_t)r;
		while (same && (nl = memchr(l, '\n', have - (size_t)(l - buf)))) {
			lines++;
			same = uw_fmap_line(p, l, (size_t)(nl + 1 - l), &cur) >= 0;
			l = nl + 1;
		}
		have -= (size_t)(l - buf);
		memmove(buf, l, have);
		/* a line longer than the buffer (the kernel writes none):
		 * uw_proc_load() reads it */
		if (have == UW_MAPS_BUF)
			same = 0;
	}
	/* a last line without a newline */
	if (same && have) {
		lines++;
		same = uw_fmap_line(p, buf, have, &cur) >= 0;
	}
	close(fd);
	if (!lines)
		return stop_maps_error(pid, -ENODATA);
	return same && cur == p->ftext_len;
}

static bool
uw_module_same(const struct uw_module *a, const struct uw_module *b)
{
	return a->inode == b->inode && a->dev_major == b->dev_major &&
	       a->dev_minor == b->dev_minor && a->is_vdso == b->is_vdso &&
	       a->map_start == b->map_start && a->map_end == b->map_end &&
	       a->map_offset == b->map_offset;
}

/* Mark every file mapping of q that p did not have (both lists are in
 * address order). */
static void
uw_mark_new(struct uw_proc *q, const struct uw_proc *p)
{
	size_t i, j = 0;

	for (i = 0; i < q->nmaps; i++) {
		struct uw_map *mp = &q->maps[i];
		const struct uw_fmap *f;

		if (!mp->mod)
			continue;
		while (j < p->nfmaps && p->fmaps[j].start < mp->start)
			j++;
		f = j < p->nfmaps ? &p->fmaps[j] : NULL;
		mp->unsure = !f || f->start != mp->start || f->end != mp->end ||
			     f->offset != mp->offset || f->inode != mp->mod->inode ||
			     f->dev_major != mp->mod->dev_major ||
			     f->dev_minor != mp->mod->dev_minor;
	}
}

/* Read the module list of pid again into a new cache, which takes over
 * the modules of p whose file and lowest mapping are the same (their ELF
 * data, unwind tables and symbols stay good); p is freed.  A new libunwind
 * address space: the old one's cache may hold unwind information for
 * addresses whose module changed.  *dropped tells whether a module of p
 * that was loaded (so may have named frames) is gone.  With mark, the
 * mappings p did not have are marked unsure. */
static int
uw_proc_update(struct uw_proc *p, pid_t pid, bool mark, bool *dropped)
{
	struct uw_module **adopt = NULL;
	struct uw_proc *q;
	size_t i, j = 0;
	int err = 0;

	q = uw_proc_load(pid, &err);
	if (!q)
		return err;
	adopt = q->nmods ? calloc(q->nmods, sizeof(*adopt)) : NULL;
	q->as = uwl.create_addr_space(&uw_accessors, 0);
	if ((q->nmods && !adopt) || !q->as) {
		free(adopt);
		uw_proc_free(q);
		return -ENOMEM;
	}
	uwl.set_caching_policy(q->as, UNW_CACHE_GLOBAL);
	/* Both module lists are in the order of their lowest mapping. */
	for (i = 0; i < q->nmods; i++) {
		while (j < p->nmods && p->mods[j]->map_start < q->mods[i]->map_start)
			j++;
		if (j < p->nmods && uw_module_same(p->mods[j], q->mods[i])) {
			adopt[i] = p->mods[j];
			p->mods[j++] = NULL;
		}
	}
	for (i = 0; i < q->nmaps; i++)
		if (q->maps[i].mod && adopt[q->maps[i].mod->index])
			q->maps[i].mod = adopt[q->maps[i].mod->index];
	for (i = 0; i < q->nmods; i++) {
		struct uw_module *m = adopt[i];

		if (!m)
			continue;
		uw_module_free(q->mods[i]);
		q->mods[i] = m;
		m->index = i;
		if (m->synth)
			m->di.u.rti.table_data = uw_synth_addr(m);
	}
	free(adopt);
	*dropped = false;
	for (j = 0; j < p->nmods; j++)
		*dropped |= p->mods[j] && p->mods[j]->tried;
	if (mark)
		uw_mark_new(q, p);
	uw_proc_free(p);
	uw_cache = q;
	return 0;
}

static void
uw_mark_all(struct uw_proc *p)
{
	size_t i;

	for (i = 0; i < p->nmaps; i++)
		p->maps[i].unsure = p->maps[i].mod != NULL;
}

int
stack_unwind_stopped(pid_t pid)
{
	struct uw_proc *p = uw_cache;
	bool dropped = false;
	size_t i;
	int r;

	uw_stopped = 0;
	if (!p) {
		/* Nothing read before the stop (every thread it was read
		 * through ended): read now, through a thread that cannot
		 * end, it is exactly what the stacks ran in.  Else the read
		 * after the stop would take every file mapping for changed,
		 * and no stack would get past its first frame. */
		p = uw_get_proc(pid, &r);
		if (!p)
			return r;
		uw_stopped = STACK_SYNC_CHANGED + 1;
		return STACK_SYNC_CHANGED;
	}
	if (p->pid != pid)
		stack_unwind_rebind(p->pid, pid);
	r = uw_fmaps_same(p, pid);
	if (r == 0)
		r = uw_proc_update(p, pid, false, &dropped);
	if (r < 0)
		return r;
	for (i = 0; i < uw_cache->nmaps; i++)
		uw_cache->maps[i].unsure = false;
	if (r == 1)
		r = STACK_SYNC_SAME;
	else
		r = dropped ? STACK_SYNC_DROPPED : STACK_SYNC_CHANGED;
	uw_stopped = r + 1;
	return r;
}

int
stack_unwind_sync(pid_t pid, bool after_stop)
{
	struct uw_proc *p = uw_cache;
	bool dropped = false;
	size_t i;
	int r = 0, stopped = uw_stopped - 1;

	uw_stopped = 0;
	if (!p) {
		p = uw_get_proc(pid, &r);
		if (!p)
			return r;
		/* nothing read before the stop to compare with */
		if (after_stop)
			uw_mark_all(p);
		return STACK_SYNC_CHANGED;
	}
	if (p->pid != pid)
		stack_unwind_rebind(p->pid, pid);
	/* read while the threads were stopped: what their stacks ran in */
	if (after_stop && stopped >= 0)
		return stopped;
	for (i = 0; i < p->nmaps; i++)
		p->maps[i].unsure = false;
	r = uw_fmaps_same(p, pid);
	if (r == 1)
		return STACK_SYNC_SAME;
	if (r == 0)
		r = uw_proc_update(p, pid, after_stop, &dropped);
	if (r < 0) {
		/* what was mapped around the stop cannot be told */
		if (after_stop)
			uw_mark_all(p);
		return r;
	}
	return dropped ? STACK_SYNC_DROPPED : STACK_SYNC_CHANGED;
}

/* Why the walk ended early, judged from the last failed memory read. */
static const char *
uw_end_reason(const struct uw_ctx *c, int step_ret)
{
	const struct stack_snap *s = c->snap;

	if (c->too_many_reads)
		return "unwind information loops or is too long";
	if (c->mem_fail) {
		struct uw_map *mp = uw_find_map(c->proc, c->fail_addr);

		if (mp && (!mp->mod || mp->writable) &&
		    c->fail_addr >= s->stack_addr + s->stack_len &&
		    (s->stack_len == 0 || c->fail_addr - s->stack_addr < (64u << 20)))
			return "caller frame lies beyond the copied stack";
		return "unwinding needed memory outside the snapshot";
	}
	if (step_ret == -UNW_ENOINFO || step_ret == -UNW_EBADFRAME)
		return "no unwind information";
	if (step_ret == -UNW_ESTOPUNWIND)
		return "unwinding loop";
	return step_ret < 0 ? "unwind error" : NULL;
}

int
stack_unwind(pid_t pid,
	     const struct stack_snap *s,
	     struct stack_frame *frames,
	     size_t max_frames,
	     size_t *n_out)
{
	struct uw_ctx ctx = {0};
	unw_cursor_t cursor;
	uint64_t prev_ip = 0, prev_sp = 0, seen_ip = 0, seen_sp = 0;
	bool prev_signal = false, guessed = false, seen = false;
	unsigned repeats = 0;
	size_t n = 0;
	int err = 0, ret;

	if (!s || !frames || !n_out || max_frames == 0 || !s->regs_valid)
		return -EINVAL;
	ctx.proc = uw_get_proc(pid, &err);
	if (!ctx.proc)
		return err;
	if (ctx.proc->gone)
		return -ESRCH;
	ctx.snap = s;
	ctx.regs = &s->regs;
	ret = uwl.init_remote(&cursor, ctx.proc->as, &ctx);
	if (ret < 0)
		return -EINVAL;
	for (;;) {
		struct stack_frame *f = &frames[n];
		unw_word_t ip = 0, sp = 0, lookup;
		bool exact, interrupted = prev_signal;

		memset(f, 0, sizeof(*f));
		if (uwl.get_reg(&cursor, UNW_REG_IP, &ip) < 0)
			break;
		(void)uwl.get_reg(&cursor, UNW_REG_SP, &sp);
		f->ip = ip;
		if (guessed)
			f->flags |= STACK_FRAME_GUESSED;
		if (uw_is_sigreturn(ctx.proc, ip))
			f->flags |= STACK_FRAME_SIGNAL;
		/* A return address may be one past the call's function; frame
		 * #0, the trampoline and the frame a signal interrupted hold
		 * exact instruction addresses. */
		exact = n == 0 || prev_signal || (f->flags & STACK_FRAME_SIGNAL) ||
			ip == 0;
		lookup = exact ? ip : ip - 1;
		uw_symbolize(ctx.proc, f, lookup);
		n++;
		if (uw_unsure(ctx.proc, ip) || uw_unsure(ctx.proc, lookup)) {
			/* Which file this frame ran in is not known (its
			 * mapping changed around the stop): a bare address,
			 * and no unwind information to go on with. */
			f->flags |= STACK_FRAME_TRUNCATED;
			f->end_reason = "module mappings changed while sampled";
			break;
		}
		if (n == max_frames)
			break;
		if (n > 1 && ip == prev_ip && sp == prev_sp &&
		    ++repeats >= UW_MAX_LOOP) {
			f->flags |= STACK_FRAME_TRUNCATED;
			f->end_reason = uw_end_reason(&ctx, -UNW_ESTOPUNWIND);
			break;
		}
		/* Two frames of one stack never share ip and sp: one that
		 * repeats an earlier frame, not only the one before, means a
		 * chain that leads back to itself (a corrupt or hostile
		 * stack), which would be walked round up to max_frames.
		 * Brent's method finds it within twice the cycle's start and
		 * length: compare with the frame kept at each power of two. */
		if (seen && ip == seen_ip && sp == seen_sp) {
			f->flags |= STACK_FRAME_TRUNCATED;
			f->end_reason = uw_end_reason(&ctx, -UNW_ESTOPUNWIND);
			break;
		}
		if ((n & (n - 1)) == 0) {
			seen = true;
			seen_ip = ip;
			seen_sp = sp;
		}
		prev_ip = ip;
		prev_sp = sp;
		prev_signal = f->flags & STACK_FRAME_SIGNAL;
		ctx.mem_fail = false;
		if (ip == 0 && interrupted) {
			/* a call through a null pointer */
			if (uw_skip_null_call(&ctx, &cursor) == 0)
				continue;
			f->flags |= STACK_FRAME_TRUNCATED;
			f->end_reason = uw_end_reason(&ctx, -UNW_ENOINFO);
			break;
		}
		ctx.no_info = false;
		ctx.reads = 0;
		ctx.too_many_reads = false;
		ret = uwl.step(&cursor);
		/* and every frame after a guessed one rests on it */
		guessed = guessed || ctx.no_info;
		if (ret > 0) {
			unw_word_t nip = 0;

			/* ip 0 is how a thread's outermost frame often ends
			 * when rbp-based fallback walked off the chain; after
			 * a signal frame it is the interrupted pc instead. */
			if (uwl.get_reg(&cursor, UNW_REG_IP, &nip) == 0 &&
			    (nip != 0 || (f->flags & STACK_FRAME_SIGNAL)))
				continue;
			ret = 0;
		}
		if (ret < 0 || ctx.mem_fail) {
			f->flags |= STACK_FRAME_TRUNCATED;
			f->end_reason = uw_end_reason(&ctx, ret);
		}
		break;
	}
	if (ctx.proc->gone)
		return -ESRCH;
	if (n == 0)
		return -EINVAL;
	*n_out = n;
	return 0;
}
