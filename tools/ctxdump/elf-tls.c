/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "elf-tls.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fd-budget.h"
#include "maps.h"
#include "process-ctx.h"
#include "remote.h"
#include "stop.h"
#include "thread-record.h"

#define ETLS_PAGE     4096u
#define ETLS_MAPS_MAX (64u << 20)
/* threads one etls_proc goes on through after the first (reader_switch()) */
#define ETLS_READER_SWITCHES 8u
/* bytes of files one etls_proc reads whole, beyond the descriptor budget
 * (obj_elf()) */
#define ETLS_WHOLE_MAX (32u << 20)
/* names whose lookups one etls_proc remembers (a bit each) */
#define ETLS_NAMES_MAX 32u
/* mappings of one file that objs_add() keeps for tlsm_loader_map(): the
 * loader's are 4 or 5 (RELRO splits the data), and a program's own
 * mappings of the file below them come first */
#define ETLS_OBJ_MAPS 10
/* PT_LOADs elf_parse() keeps: linkers make 2 to 5 */
#define ETLS_LOADS_MAX 16
/* the largest section read (symbols, their names, relocations): libelf
 * reads what the section header says, and a file may have a hole there
 * of any size (lookup_in()) */
#define ETLS_SECTION_MAX (64u << 20)

/* Relocation types, numbered per psABI (elf.h spells the aarch64 names
 * differently across versions). */
#define X86_64_DTPMOD64 16
#define X86_64_DTPOFF64 17
#define X86_64_TPOFF64  18
#define X86_64_TLSDESC  36
#define A64_DTPMOD      1028
#define A64_DTPREL      1029
#define A64_TPREL       1030
#define A64_TLSDESC     1031

struct etls_elf {
	int fd;
	Elf *e;
	/* The bytes e was made from (elf_memory()) when the file was read
	 * whole (obj_elf()), else NULL */
	void *image;
	GElf_Ehdr eh;
	bool has_tls;
	GElf_Phdr tls;
	uint64_t bias;
	bool bias_ok;
	Elf_Scn *dynsym;
	size_t dynsym_ndx;
	GElf_Shdr dynsym_sh;
	/* The full symbol table, unless stripped: only looked at when no
	 * object exports the symbol. */
	Elf_Scn *symtab;
	GElf_Shdr symtab_sh;
	bool has_interp;
	/* ET_DYN with DF_1_PIE: the main program even where /proc/PID/exe
	 * is ld.so ("ld.so PROG"); glibc refuses to dlopen() one */
	bool is_pie;
	bool has_symtab; /* a fact: symtab goes with the Elf */
};

/* One mapped file, deduplicated by device and inode. */
struct etls_obj {
	unsigned dev_major, dev_minor;
	uint64_t inode;
	char *path;
	bool deleted;
	/* The executable, mapped from no file that a path opens (a memfd):
	 * opened as /proc/PID/exe. */
	bool exe_only;
	/* The mapping with the lowest file offset, and of those at 0 the
	 * lowest: gives the load bias unless the loader's first mapping can
	 * be told among the first mappings of the file (maps, in address
	 * order; elf_parse()). */
	uint64_t start, end, offset;
	struct tlsm_map maps[ETLS_OBJ_MAPS];
	unsigned n_maps;
	/* Opened and parsed on first use, then kept for the next symbol
	 * looked up in the same struct etls_proc (a dump looks up three):
	 * open, or read whole, or closed and opened again when it is next
	 * asked for (obj_elf()); x.e is NULL while it is closed. */
	bool tried;
	bool ok;
	int err; /* why it could not be opened or parsed */
	/* Which of the names of p (etls_proc.names) its .dynsym and .symtab
	 * were searched for once parsed (scanned), and which they name at
	 * all, defined or not, of any type (a table that could not be read
	 * counts as naming every one): an object that does not name one is
	 * not opened again to look for it (obj_names()). */
	uint32_t scanned, in_dynsym, in_symtab;
	struct etls_elf x;
};

struct etls_objs {
	struct etls_obj *v;
	size_t n, cap;
};

/* One snapshot of a process's maps and its mapped ELF objects. */
struct etls_proc {
	pid_t pid; /* the thread read through */
	/* etls_proc_set_reader(): when pid has ended, another live thread
	 * of process tgid to go on through, or 0 */
	pid_t (*next_reader)(pid_t tgid, pid_t ended);
	pid_t tgid;
	unsigned reader_switches;
	char *maps; /* the text of /proc/PID/maps; NULL until needed */
	size_t maps_len;
	/* With PROCMAP_QUERY: the file-backed mappings named like the
	 * process context's, as maps lines (for pctxr_read_maps()) */
	char *ctx_lines;
	size_t ctx_len;
	struct etls_objs objs;
	struct fd_budget fds; /* objects that stay open */
	uint64_t whole_left;  /* bytes still to read whole (obj_elf()) */
	/* The object open beyond both, if one is: closed when another is
	 * opened */
	struct etls_obj *transient;
	bool exe_ok;
	struct stat exe_st;
	/* The names looked up, or to be (etls_proc_want()): each object's
	 * symbol tables are searched for all of them in one pass when it is
	 * parsed (obj_scan()).  An object beyond the descriptor budget was
	 * opened and parsed again for each of some 8 lookups of a dump, and
	 * most objects name none of them. */
	char *names[ETLS_NAMES_MAX];
	size_t name_len[ETLS_NAMES_MAX];
	unsigned n_names;
};

static void elf_close(struct etls_elf *x);
static void obj_scan(struct etls_proc *p, struct etls_obj *ob);
static void proc_want_dump_names(struct etls_proc *p);

static void
objs_free(struct etls_objs *o)
{
	size_t i;

	for (i = 0; i < o->n; i++) {
		free(o->v[i].path);
		if (o->v[i].ok)
			elf_close(&o->v[i].x);
	}
	free(o->v);
	o->v = NULL;
	o->n = o->cap = 0;
}

bool
etls_path_is_file(const char *p, size_t len)
{
	/* memfd and SysV segments look like paths but are no ELF files
	 * that a path opens (a program run from a memfd is read through
	 * /proc/PID/exe: obj_mapping()). */
	if (len == 0 || p[0] != '/')
		return false;
	if (len >= 7 && memcmp(p, "/memfd:", 7) == 0)
		return false;
	if (len >= 5 && memcmp(p, "/dev/", 5) == 0)
		return false;
	if (len >= 5 && memcmp(p, "/SYSV", 5) == 0)
		return false;
	return true;
}

static int
objs_add(struct etls_objs *o, const struct maps_entry *e, bool exe_only)
{
	size_t len = e->path_len, i;
	bool del = maps_path_deleted(e->path, &len);
	const struct tlsm_map m = {e->start, e->end, e->offset, e->perms[2] == 'x'};
	struct etls_obj *ob;

	for (i = 0; i < o->n; i++) {
		ob = &o->v[i];
		if (ob->inode == e->inode && ob->dev_major == e->dev_major &&
		    ob->dev_minor == e->dev_minor) {
			if (e->offset < ob->offset) {
				ob->start = e->start;
				ob->end = e->end;
				ob->offset = e->offset;
			}
			if (ob->n_maps < ETLS_OBJ_MAPS)
				ob->maps[ob->n_maps++] = m;
			return 0;
		}
	}
	if (len >= PATH_MAX)
		return 0;
	if (o->n == o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 32;
		struct etls_obj *nv = realloc(o->v, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		o->v = nv;
		o->cap = cap;
	}
	ob = &o->v[o->n];
	memset(ob, 0, sizeof(*ob));
	ob->path = strndup(e->path, len);
	if (!ob->path)
		return -ENOMEM;
	ob->dev_major = e->dev_major;
	ob->dev_minor = e->dev_minor;
	ob->inode = e->inode;
	ob->deleted = del;
	ob->exe_only = exe_only;
	ob->start = e->start;
	ob->end = e->end;
	ob->offset = e->offset;
	ob->maps[0] = m;
	ob->n_maps = 1;
	o->n++;
	return 0;
}

/* Whether the mapping e is one of an object to read: a file that its
 * path opens, or the executable whatever its name: a static program run
 * from a memfd with fexecve() maps nothing else ("/memfd:NAME (deleted)"),
 * and /proc/PID/exe opens it (the same device and inode; exec took a
 * regular file).  Sets *exe_only for the latter. */
static bool
obj_mapping(const struct etls_proc *p, const struct maps_entry *e, bool *exe_only)
{
	*exe_only = false;
	if (e->inode == 0)
		return false;
	if (etls_path_is_file(e->path, e->path_len))
		return true;
	*exe_only = p->exe_ok && (uint64_t)p->exe_st.st_ino == e->inode &&
		    major(p->exe_st.st_dev) == e->dev_major &&
		    minor(p->exe_st.st_dev) == e->dev_minor;
	return *exe_only;
}

static int
objs_load(struct etls_proc *p, const char *buf, size_t len)
{
	struct etls_objs *o = &p->objs;
	const char *line = buf;
	int r = 0;

	while (line < buf + len) {
		const char *nl = memchr(line, '\n', (size_t)(buf + len - line));
		size_t l = nl ? (size_t)(nl - line) : (size_t)(buf + len - line);
		struct maps_entry e;
		bool exe_only;

		/* A file's path starts with '/'; the anonymous mappings (two
		 * per thread: stack and guard page) have none and are most
		 * of the lines: skip them unparsed. */
		if (memchr(line, '/', l) && maps_parse_line(line, l, &e) == 0 &&
		    obj_mapping(p, &e, &exe_only)) {
			r = objs_add(o, &e, exe_only);
			if (r < 0)
				break;
		}
		line += l + 1;
	}
	/* An empty maps file is what a zombie (or kernel thread) shows:
	 * etls_proc_load() tells which. */
	if (r >= 0 && o->n == 0)
		r = -ENODATA;
	return r < 0 ? r : 0;
}

/* The object's file, checked to be the mapped one (remote_open_mapped()),
 * or a negative errno. */
static int
obj_open(pid_t pid, const struct etls_obj *ob)
{
	const struct remote_mapped m = {
		.path = ob->path,
		.start = ob->start,
		.end = ob->end,
		.dev_major = ob->dev_major,
		.dev_minor = ob->dev_minor,
		.inode = ob->inode,
		.deleted = ob->deleted,
		.exe_only = ob->exe_only,
	};
	struct stat st;
	int fd = remote_open_mapped(pid, &m, &st);

	return fd < 0 ? -errno : fd;
}

/* The facts elf_parse() filled stay; the sections go with the Elf. */
static void
elf_close(struct etls_elf *x)
{
	if (x->e)
		elf_end(x->e);
	if (x->fd >= 0)
		close(x->fd);
	free(x->image);
	x->e = NULL;
	x->fd = -1;
	x->image = NULL;
	x->dynsym = x->symtab = NULL;
}

/* Whether the dynamic section scn (header sh) has DF_1_PIE in
 * DT_FLAGS_1. */
static bool
dyn_is_pie(Elf_Scn *scn, const GElf_Shdr *sh)
{
	Elf_Data *d;
	GElf_Dyn dyn;
	size_t i, n;

	if (sh->sh_size > ETLS_SECTION_MAX || !(d = elf_getdata(scn, NULL)))
		return false;
	n = sh->sh_size / (sh->sh_entsize ? sh->sh_entsize : sizeof(Elf64_Dyn));
	for (i = 0; i < n && gelf_getdyn(d, (int)i, &dyn); i++) {
		if (dyn.d_tag == DT_NULL)
			break;
		if (dyn.d_tag == DT_FLAGS_1)
			return (dyn.d_un.d_val & DF_1_PIE) != 0;
	}
	return false;
}

/* Headers, PT_TLS, PT_INTERP, load bias, .dynsym, .symtab and DF_1_PIE of
 * the object opened in x->e.  The bias comes from the loader's first
 * mapping among the nm mappings m of its file, else from lowest. */
static int
elf_parse(struct etls_elf *x,
	  const struct tlsm_map *m,
	  size_t nm,
	  const struct tlsm_map *lowest)
{
	struct tlsm_load ld[ETLS_LOADS_MAX];
	size_t nph = 0, nl = 0, i;
	Elf_Scn *scn = NULL;
	bool dyn_seen = false;
	int k;

	if (!x->e || elf_kind(x->e) != ELF_K_ELF || !gelf_getehdr(x->e, &x->eh) ||
	    x->eh.e_ident[EI_CLASS] != ELFCLASS64 || elf_getphdrnum(x->e, &nph) < 0)
		return -ENOEXEC;
	for (i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(x->e, (int)i, &ph))
			continue;
		if (ph.p_type == PT_TLS) {
			x->has_tls = true;
			x->tls = ph;
		}
		if (ph.p_type == PT_INTERP)
			x->has_interp = true;
		if (ph.p_type == PT_LOAD && nl < ETLS_LOADS_MAX) {
			ld[nl].vaddr = ph.p_vaddr;
			ld[nl].offset = ph.p_offset;
			ld[nl].filesz = ph.p_filesz;
			ld[nl].exec = (ph.p_flags & PF_X) != 0;
			nl++;
		}
	}
	/* The lowest mapping at offset 0 may be the program's own of the
	 * file (libbacktrace, symbolizers), and a bias from it makes every
	 * address in the object wrong. */
	k = tlsm_loader_map(ld, nl, m, nm);
	x->bias_ok = tlsm_map_bias(ld, nl, k >= 0 ? &m[k] : lowest, &x->bias) == 0;
	while ((scn = elf_nextscn(x->e, scn)) != NULL) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_DYNAMIC && !dyn_seen) {
			dyn_seen = true;
			x->is_pie = x->eh.e_type == ET_DYN && dyn_is_pie(scn, &sh);
		} else if (sh.sh_type == SHT_DYNSYM && !x->dynsym) {
			x->dynsym = scn;
			x->dynsym_ndx = elf_ndxscn(scn);
			x->dynsym_sh = sh;
		} else if (sh.sh_type == SHT_SYMTAB && !x->symtab) {
			x->symtab = scn;
			x->symtab_sh = sh;
			x->has_symtab = true;
		}
		if (x->dynsym && x->symtab && dyn_seen)
			break;
	}
	return 0;
}

/* The executable's inode, which tells it among the objects (PIE ones
 * too); a thread that is ending has no executable any more. */
static void
exe_stat(struct etls_proc *p)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)p->pid);
	p->exe_ok = stat(path, &p->exe_st) == 0;
}

/* After a failure through p->pid: whether p now reads through another
 * thread, because that one has ended (etls_proc_set_reader()).  The
 * objects are opened one by one as they are needed, and in a process
 * whose leader has exited each thread may live only a few ms. */
static bool
reader_switch(struct etls_proc *p, int err)
{
	pid_t next;

	if ((err != -ENOENT && err != -ESRCH) || !p->next_reader ||
	    p->reader_switches >= ETLS_READER_SWITCHES)
		return false;
	next = p->next_reader(p->tgid, p->pid);
	if (!next)
		return false;
	p->pid = next;
	p->reader_switches++;
	if (!p->exe_ok)
		exe_stat(p);
	return true;
}

/* Whether the file open at fd ends a page or more before the lowest
 * mapping of ob: the loader maps no more than a segment's last page past
 * the end of the file, so it was truncated after it was loaded. */
static bool
obj_short(int fd, const struct etls_obj *ob)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	       (uint64_t)st.st_size + ETLS_PAGE <= ob->offset + (ob->end - ob->start);
}

/* Out of descriptors (EMFILE, ENFILE) anyway: every object of p that
 * holds one is closed (as those beyond the budget are, obj_elf()), and
 * none stays open from now on.  Whether one was closed. */
static bool
fds_shed(struct etls_proc *p)
{
	bool shed = false;
	size_t i;

	for (i = 0; i < p->objs.n; i++) {
		struct etls_obj *ob = &p->objs.v[i];

		if (ob->ok && ob->x.fd >= 0) {
			elf_close(&ob->x);
			shed = true;
		}
	}
	p->transient = NULL;
	fd_budget_drain(&p->fds);
	return shed;
}

/* At the end of a lookup: the object open beyond the budget, if one is,
 * is closed now rather than when the next lookup opens another.  Kept
 * open, it took the descriptor that stopping the threads needs next under
 * a low RLIMIT_NOFILE (ulimit -n 9). */
static void
transient_close(struct etls_proc *p)
{
	if (p->transient) {
		elf_close(&p->transient->x);
		p->transient = NULL;
	}
}

/* The file open at fd read whole into memory, if it fits in what is left
 * of p->whole_left, which is charged what is held: its size taken once,
 * and never more read (remote_pread_upto()).  libelf's own whole read
 * (ELF_C_FDREAD) reads the size it took at elf_begin(), and a target that
 * grew the file (a hole: no disk needed) between that and a size taken
 * here to charge made ctxdump hold gigabytes. */
static void *
obj_read_whole(struct etls_proc *p, int fd, size_t *len, size_t *held)
{
	char magic[SELFMAG];
	struct stat st;
	void *buf;
	ssize_t got;

	/* not for a data file that is mapped (a cache of icons, of fonts):
	 * it is no ELF object, and would be read for nothing */
	if (remote_pread_upto(fd, magic, sizeof(magic)) != (ssize_t)sizeof(magic) ||
	    memcmp(magic, ELFMAG, SELFMAG) != 0)
		return NULL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    (uint64_t)st.st_size > p->whole_left)
		return NULL;
	buf = malloc((size_t)st.st_size);
	if (!buf)
		return NULL;
	got = remote_pread_upto(fd, buf, (size_t)st.st_size);
	if (got <= 0) {
		free(buf);
		return NULL;
	}
	p->whole_left -= (uint64_t)st.st_size;
	*len = (size_t)got;
	*held = (size_t)st.st_size;
	return buf;
}

/* The parsed ELF object of ob, opened on first use; NULL if it cannot be
 * opened or is no 64-bit ELF object.  Its sections only until the next
 * call for another object, which may close it (p->transient). */
static struct etls_elf *
obj_elf(struct etls_proc *p, struct etls_obj *ob)
{
	struct etls_elf *x = &ob->x;
	struct tlsm_map lowest;
	size_t len = 0, held = 0;
	bool kept;
	int fd;

	if (ob->tried && (!ob->ok || x->e))
		return ob->ok ? x : NULL;
	/* Kept open, the first objects up to the budget, for later lookups:
	 * libelf reads their sections through the descriptor as they are
	 * needed and keeps what it read.  A process may map hundreds of
	 * objects: the next ones are read whole, so that their descriptor
	 * can be closed, while their files add up to no more than
	 * ETLS_WHOLE_MAX (most libraries are small: 300 of 16 KiB under
	 * ulimit -n 64 took 1.5 times as long when each was parsed again);
	 * the others are opened when they are asked for, one at a time, and
	 * parsed again (their headers, the sections a lookup needs).
	 * Reading every one whole made ctxdump's memory grow by the size of
	 * their files: 2.3 GB for 300 libraries of 50 MB. */
	transient_close(p);
	ob->tried = true;
	ob->ok = false;
	do
		fd = obj_open(p->pid, ob);
	while (fd < 0 && (reader_switch(p, fd) || (fd_exhausted(fd) && fds_shed(p))));
	if (fd < 0) {
		ob->err = fd;
		return NULL;
	}
	/* Again when it is opened again: obj_open() checked that it is the
	 * same inode, but its bytes may have changed (the target can write
	 * it), and the object is then what they say now. */
	memset(x, 0, sizeof(*x));
	x->fd = fd;
	kept = fd_budget_take(&p->fds);
	if (!kept)
		x->image = obj_read_whole(p, fd, &len, &held);
	/* Read with pread(), never mapped (ELF_C_READ_MMAP): the target can
	 * truncate a file it maps and can write (a library copy of its own,
	 * a memfd), and a read of a mapping past the file's new end raises
	 * SIGBUS, which would kill ctxdump in the middle of a dump or a
	 * recording.  A read past the end fails instead, and so does the
	 * object.  The cost is a copy of what is read (headers, symbol
	 * tables, relocations). */
	x->e = x->image ? elf_memory(x->image, len)
			: elf_begin(x->fd, ELF_C_READ, NULL);
	lowest = (struct tlsm_map){ob->start, ob->end, ob->offset, false};
	if (elf_parse(x, ob->maps, ob->n_maps, &lowest) < 0) {
		ob->err = obj_short(x->fd, ob) ? ETLS_ERR_SHORT : -ENOEXEC;
		elf_close(x);
		if (kept)
			fd_budget_give(&p->fds);
		/* freed: what it held is left for the next ones (a target's
		 * large files that only start like ELF objects used it up) */
		p->whole_left += held;
		return NULL;
	}
	if (x->image) {
		close(x->fd);
		x->fd = -1;
	} else if (!kept) {
		p->transient = ob;
	}
	ob->ok = true;
	obj_scan(p, ob);
	return x;
}

/* A symbol table's entries and names, straight from the section data
 * (class 64, native layout: libelf converts or copies when it must). */
struct sym_table {
	Elf_Data *d;
	const Elf64_Sym *syms;
	size_t n;
	const char *strs;
	size_t strsz;
};

static bool
sym_table_get(struct etls_elf *x,
	      Elf_Scn *scn,
	      const GElf_Shdr *sh,
	      struct sym_table *t)
{
	Elf_Data *sd;
	Elf_Scn *strscn;
	GElf_Shdr ssh;

	/* Not read beyond ETLS_SECTION_MAX: libelf would read all of a
	 * section of gigabytes that a hole in the file makes (768 MiB of
	 * .dynsym cost 790 MB of memory), and keeps it.  No real .dynsym
	 * comes near it (libc's: 70 KiB). */
	if (!scn || sh->sh_entsize != sizeof(Elf64_Sym) ||
	    sh->sh_size > ETLS_SECTION_MAX)
		return false;
	strscn = elf_getscn(x->e, sh->sh_link);
	if (!strscn || !gelf_getshdr(strscn, &ssh) || ssh.sh_size > ETLS_SECTION_MAX)
		return false;
	t->d = elf_getdata(scn, NULL);
	sd = elf_getdata(strscn, NULL);
	if (!t->d || !t->d->d_buf || t->d->d_type != ELF_T_SYM || !sd || !sd->d_buf)
		return false;
	t->syms = t->d->d_buf;
	t->n = t->d->d_size / sizeof(*t->syms);
	t->strs = sd->d_buf;
	t->strsz = sd->d_size;
	return true;
}

/* The bit of name among the names of p, or 0 if it is none of them. */
static uint32_t
name_bit(const struct etls_proc *p, const char *name)
{
	unsigned i;

	for (i = 0; i < p->n_names; i++)
		if (strcmp(p->names[i], name) == 0)
			return (uint32_t)1 << i;
	return 0;
}

void
etls_proc_want(struct etls_proc *p, const char *name)
{
	if (name_bit(p, name) || p->n_names >= ETLS_NAMES_MAX)
		return;
	p->names[p->n_names] = strdup(name);
	if (!p->names[p->n_names])
		return;
	p->name_len[p->n_names] = strlen(name);
	p->n_names++;
}

/* The bits of all the names of p. */
static uint32_t
names_all(const struct etls_proc *p)
{
	return p->n_names >= 32 ? UINT32_MAX : ((uint32_t)1 << p->n_names) - 1;
}

/* The names of p that the table names (any entry, defined or not); all
 * of them if it cannot be read. */
static uint32_t
table_names(const struct etls_proc *p,
	    struct etls_elf *x,
	    Elf_Scn *scn,
	    const GElf_Shdr *sh)
{
	uint32_t all = names_all(p), found = 0;
	struct sym_table t;
	size_t i;
	unsigned k;

	if (!scn)
		return 0;
	if (!sym_table_get(x, scn, sh, &t))
		return all;
	for (i = 1; i < t.n && found != all; i++) {
		uint32_t off = t.syms[i].st_name;
		const char *nm = t.strs + off;

		if (off >= t.strsz)
			continue;
		for (k = 0; k < p->n_names; k++) {
			size_t l = p->name_len[k];

			/* the name and its NUL inside the string table */
			if (nm[0] == p->names[k][0] && t.strsz - off > l &&
			    memcmp(nm, p->names[k], l + 1) == 0)
				found |= (uint32_t)1 << k;
		}
	}
	return found;
}

/* The first time ob is parsed, or again once names were added: which of
 * the names its tables name. */
static void
obj_scan(struct etls_proc *p, struct etls_obj *ob)
{
	uint32_t all = names_all(p);

	if (ob->scanned == all)
		return;
	ob->in_dynsym = table_names(p, &ob->x, ob->x.dynsym, &ob->x.dynsym_sh);
	ob->in_symtab = table_names(p, &ob->x, ob->x.symtab, &ob->x.symtab_sh);
	ob->scanned = all;
}

/* Whether ob's .dynsym (or .symtab) may name name: false only when it was
 * searched for it (obj_scan()) and does not; then ob need not be opened
 * again for it. */
static bool
obj_names(const struct etls_proc *p,
	  const struct etls_obj *ob,
	  const char *name,
	  bool symtab)
{
	uint32_t bit = name_bit(p, name);

	if (!ob->tried || !ob->ok || !bit || !(ob->scanned & bit))
		return true;
	return ((symtab ? ob->in_symtab : ob->in_dynsym) & bit) != 0;
}

/* Index of the entry named name in the symbol table scn (section header
 * sh): defined, of type type (and size size, unless 0; of any type for
 * LOOKUP_ANY_TYPE), or an undefined reference for a type < 0.  With full
 * (.symtab), a global or weak symbol first; else a local one only if it
 * is the only one of that name: the linker makes a hidden global local in
 * a shared object or PIE, but each translation unit may have a file-scope
 * static of the same name, and two of them leave no way to tell which one
 * is the writer's.
 * lookup_sym(): defined STT_TLS of size 8 in .dynsym when defined is
 * true.  The symbols and their names are read straight from the section
 * data (class 64, native layout: libelf converts or copies when it
 * must): gelf_getsym() and elf_strptr() per symbol cost most of a dump's
 * ELF work, and a libc has thousands of symbols. */
#define LOOKUP_ANY_TYPE 0x100 /* above every STT_* (4 bits) */
static bool
lookup_in(struct etls_elf *x,
	  Elf_Scn *scn,
	  const GElf_Shdr *sh,
	  bool full,
	  const char *want,
	  int type,
	  uint64_t size,
	  size_t *idx,
	  GElf_Sym *out)
{
	size_t i, wl = strlen(want) + 1, local = 0;
	struct sym_table t;
	unsigned n_local = 0;

	if (!sym_table_get(x, scn, sh, &t))
		return false;
	for (i = 1; i < t.n; i++) {
		const Elf64_Sym *s = &t.syms[i];

		if ((s->st_shndx == SHN_UNDEF) == (type >= 0))
			continue;
		if (type >= 0 && type != LOOKUP_ANY_TYPE &&
		    (ELF64_ST_TYPE(s->st_info) != (unsigned)type ||
		     (size && s->st_size != size)))
			continue;
		if (full && ELF64_ST_BIND(s->st_info) != STB_LOCAL &&
		    ELF64_ST_BIND(s->st_info) != STB_GLOBAL &&
		    ELF64_ST_BIND(s->st_info) != STB_WEAK)
			continue;
		/* the name and its NUL inside the string table */
		if (s->st_name >= t.strsz || t.strsz - s->st_name < wl ||
		    memcmp(t.strs + s->st_name, want, wl) != 0)
			continue;
		if (full && ELF64_ST_BIND(s->st_info) == STB_LOCAL) {
			if (!n_local++)
				local = i;
			continue;
		}
		if (!gelf_getsym(t.d, (int)i, out))
			return false;
		*idx = i;
		return true;
	}
	if (n_local != 1 || !gelf_getsym(t.d, (int)local, out))
		return false;
	*idx = local;
	return true;
}

static bool
lookup_sym_type(struct etls_elf *x,
		const char *want,
		int type,
		uint64_t size,
		size_t *idx,
		GElf_Sym *out)
{
	return lookup_in(x, x->dynsym, &x->dynsym_sh, false, want, type, size, idx,
			 out);
}

static bool
lookup_sym(
	struct etls_elf *x, const char *want, bool defined, size_t *idx, GElf_Sym *out)
{
	return lookup_sym_type(x, want, defined ? STT_TLS : -1, defined ? 8 : 0, idx,
			       out);
}

/* Walks the entries of every SHT_RELA section tied to .dynsym: GNU ld puts
 * R_X86_64_TLSDESC in .rela.plt, the others in .rela.dyn.  Start with *it
 * zeroed; fills *rel and returns true while there is an entry.  An entry
 * that cannot be read ends its section. */
struct rela_iter {
	Elf_Scn *scn;
	Elf_Data *d;
	size_t i, n;
};

static bool
next_dyn_rela(struct etls_elf *x, struct rela_iter *it, GElf_Rela *rel)
{
	for (;;) {
		GElf_Shdr sh;
		size_t ent;

		if (it->d && it->i < it->n) {
			if (gelf_getrela(it->d, (int)it->i++, rel))
				return true;
			it->i = it->n;
			continue;
		}
		it->d = NULL;
		it->scn = elf_nextscn(x->e, it->scn);
		if (!it->scn)
			return false;
		if (!gelf_getshdr(it->scn, &sh) || sh.sh_type != SHT_RELA ||
		    sh.sh_link != x->dynsym_ndx || sh.sh_size > ETLS_SECTION_MAX)
			continue;
		it->d = elf_getdata(it->scn, NULL);
		if (!it->d)
			continue;
		ent = sh.sh_entsize ? sh.sh_entsize : sizeof(Elf64_Rela);
		it->n = sh.sh_size / ent;
		it->i = 0;
	}
}

/* Record the slots of the TLS relocations against symbol symidx, in every
 * section next_dyn_rela() walks.  Returns true if any was found. */
static bool
scan_relocs(struct etls_elf *x, size_t symidx, uint64_t bias, struct etls_symbol *sym)
{
	bool a64 = x->eh.e_machine == EM_AARCH64;
	struct rela_iter it = {0};
	bool found = false;
	GElf_Rela rel;

	while (next_dyn_rela(x, &it, &rel)) {
		uint64_t type, slot;

		if (GELF_R_SYM(rel.r_info) != symidx)
			continue;
		type = GELF_R_TYPE(rel.r_info);
		slot = bias + rel.r_offset;
		/* a hostile bias and offset can wrap to 0, which the fields
		 * use for "no slot" */
		if (slot == 0)
			continue;
		if (type == (a64 ? A64_TLSDESC : X86_64_TLSDESC)) {
			if (!sym->tlsdesc_slot)
				sym->tlsdesc_slot = slot;
		} else if (type == (a64 ? A64_DTPMOD : X86_64_DTPMOD64)) {
			if (!sym->dtpmod_slot)
				sym->dtpmod_slot = slot;
		} else if (type == (a64 ? A64_DTPREL : X86_64_DTPOFF64)) {
			if (!sym->dtpoff_slot)
				sym->dtpoff_slot = slot;
		} else if (type == (a64 ? A64_TPREL : X86_64_TPOFF64)) {
			if (!sym->tpoff_slot)
				sym->tpoff_slot = slot;
		} else {
			continue;
		}
		found = true;
	}
	return found;
}

static bool
has_slots(const struct etls_symbol *s)
{
	return s->tlsdesc_slot || s->dtpmod_slot || s->tpoff_slot;
}

/* No relocation names the symbol: the module's own code reaches the
 * variable through a hidden name (an exported alias of a hidden
 * thread-local, usual with -fvisibility=hidden; or local-dynamic code),
 * which the linker binds locally.  Its TLSDESC, DTPMOD64 and TPOFF64
 * relocations then have no symbol and address the module's TLS block plus
 * their addend (reader.md §1.4 and §5; the eBPF profiler's
 * resolveTLSAccess takes offset = st_value for them).  Every one of them
 * addresses the same block, so any will do; a TLSDESC or TPOFF64 whose
 * addend is st_value is the variable's own.  Returns true if any was
 * found. */
static bool
scan_anon_relocs(struct etls_elf *x, uint64_t bias, struct etls_symbol *sym)
{
	bool a64 = x->eh.e_machine == EM_AARCH64;
	int64_t desc_addend = 0, tp_addend = 0;
	struct rela_iter it = {0};
	GElf_Rela rel;

	while (next_dyn_rela(x, &it, &rel)) {
		uint64_t type, slot;
		bool own;

		if (GELF_R_SYM(rel.r_info) != 0)
			continue;
		type = GELF_R_TYPE(rel.r_info);
		slot = bias + rel.r_offset;
		if (slot == 0)
			continue;
		own = (uint64_t)rel.r_addend == sym->st_value;
		if (type == (a64 ? A64_TLSDESC : X86_64_TLSDESC)) {
			if (!sym->tlsdesc_slot ||
			    (own && (uint64_t)desc_addend != sym->st_value)) {
				sym->tlsdesc_slot = slot;
				desc_addend = rel.r_addend;
			}
		} else if (type == (a64 ? A64_DTPMOD : X86_64_DTPMOD64)) {
			/* the offset in the block is st_value */
			if (!sym->dtpmod_slot)
				sym->dtpmod_slot = slot;
		} else if (type == (a64 ? A64_TPREL : X86_64_TPOFF64)) {
			if (!sym->tpoff_slot ||
			    (own && (uint64_t)tp_addend != sym->st_value)) {
				sym->tpoff_slot = slot;
				tp_addend = rel.r_addend;
			}
		}
	}
	if (!has_slots(sym))
		return false;
	sym->anon_slots = true;
	/* etls_resolve() uses the TLSDESC slot first, then the TPOFF64
	 * word, then the GD pair (whose offset is st_value) */
	/* Modular: the addends are the target's (hostile) values, and the
	 * address math wraps the same way. */
	if (sym->tlsdesc_slot)
		sym->slot_adjust = (int64_t)(sym->st_value - (uint64_t)desc_addend);
	else if (sym->tpoff_slot)
		sym->slot_adjust = (int64_t)(sym->st_value - (uint64_t)tp_addend);
	return true;
}

static bool
path_is_musl(const char *path)
{
	const char *b = strrchr(path, '/');

	b = b ? b + 1 : path;
	return strncmp(b, "ld-musl-", 8) == 0 || strncmp(b, "libc.musl-", 10) == 0;
}

/* The definition of name in x's .dynsym, or with symtab in its .symtab:
 * "a file without a TLS segment defines no thread-local".  Fills what the
 * object itself tells (not the module path, and is_exec only for
 * ET_EXEC or a PIE). */
static bool
examine_definition(struct etls_elf *x,
		   const char *name,
		   bool symtab,
		   struct etls_symbol *cur)
{
	size_t idx;
	GElf_Sym s;

	if (!x->has_tls || !x->bias_ok)
		return false;
	if (symtab ? !lookup_in(x, x->symtab, &x->symtab_sh, true, name, STT_TLS, 8,
				&idx, &s)
		   : !lookup_sym(x, name, true, &idx, &s))
		return false;
	cur->from_symtab = symtab;
	cur->no_interp = !x->has_interp;
	/* a PIE too: started as "ld.so PROG" it is not /proc/PID/exe, yet
	 * it is the main program, first in the lookup scope, and ld.so
	 * placed its block where its local-exec code looks */
	cur->is_exec = x->eh.e_type == ET_EXEC || x->is_pie;
	cur->bias = x->bias;
	cur->st_value = s.st_value;
	cur->st_size = s.st_size;
	cur->tls_vaddr = x->tls.p_vaddr;
	cur->tls_memsz = x->tls.p_memsz;
	cur->tls_align = x->tls.p_align;
	if (x->eh.e_machine == EM_X86_64)
		cur->arch = TLSM_X86_64;
	else if (x->eh.e_machine == EM_AARCH64)
		cur->arch = TLSM_AARCH64;
	else
		cur->arch = (enum tlsm_arch) - 1;
	/* idx is a .dynsym index only for a .dynsym definition; relocations
	 * cannot name a symbol that only .symtab has */
	if (symtab || !scan_relocs(x, idx, x->bias, cur))
		(void)scan_anon_relocs(x, x->bias, cur);
	return true;
}

/* The slots of the relocations against an undefined reference to name. */
static bool
examine_user(struct etls_elf *x, const char *name, struct etls_symbol *sym)
{
	size_t idx;
	GElf_Sym s;

	return x->bias_ok && lookup_sym(x, name, false, &idx, &s) &&
	       scan_relocs(x, idx, x->bias, sym);
}

int
etls_examine_image(void *image,
		   size_t size,
		   uint64_t map_start,
		   uint64_t map_offset,
		   const char *name,
		   bool user,
		   struct etls_symbol *sym)
{
	struct etls_proc *p;
	struct etls_obj ob;
	struct etls_elf *x = &ob.x;
	struct tlsm_map lowest;
	bool found;
	int r;

	memset(sym, 0, sizeof(*sym));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	memset(&ob, 0, sizeof(ob));
	x->fd = -1;
	x->e = elf_memory(image, size);
	lowest = (struct tlsm_map){map_start, map_start, map_offset, false};
	r = elf_parse(x, NULL, 0, &lowest);
	if (r < 0) {
		elf_close(x);
		etls_proc_free(p);
		return r;
	}
	/* The tables searched once for every name a dump wants, as
	 * obj_elf() does (obj_scan()); proc_find() then skips a table that
	 * does not name the symbol.  A definition or reference found in
	 * one it would skip is one a dump would miss. */
	proc_want_dump_names(p);
	etls_proc_want(p, name);
	ob.tried = ob.ok = true;
	obj_scan(p, &ob);
	found = user ? examine_user(x, name, sym)
		     : examine_definition(x, name, false, sym) ||
				examine_definition(x, name, true, sym);
	if (found && !obj_names(p, &ob, name, !user && sym->from_symtab))
		r = -EPROTO;
	elf_close(x);
	etls_proc_free(p);
	return r < 0 ? r : found ? 0 : -ENOENT;
}

int
etls_find(pid_t pid, struct etls_symbol *sym)
{
	return etls_find_named(pid, OTEL_THREAD_CTX_SYMBOL, sym);
}

/* PROCMAP_QUERY (Linux 6.11, include/uapi/linux/fs.h), declared here as
 * the kernel defines it: the build's headers may predate it. */
struct etls_procmap_query {
	uint64_t size;
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start;
	uint64_t vma_end;
	uint64_t vma_flags;
	uint64_t vma_page_size;
	uint64_t vma_offset;
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t vma_name_size;
	uint32_t build_id_size;
	uint64_t vma_name_addr;
	uint64_t build_id_addr;
};
#define ETLS_PROCMAP_QUERY            _IOWR('f', 17, struct etls_procmap_query)
#define ETLS_PMQ_READABLE             0x01
#define ETLS_PMQ_WRITABLE             0x02
#define ETLS_PMQ_EXECUTABLE           0x04
#define ETLS_PMQ_SHARED               0x08
#define ETLS_PMQ_COVERING_OR_NEXT_VMA 0x10
#define ETLS_PMQ_FILE_BACKED_VMA      0x20

static int
ctx_lines_add(struct etls_proc *p, const struct maps_entry *e)
{
	char line[PATH_MAX + 128];
	int n = snprintf(
		line, sizeof(line), "%llx-%llx %s %08llx %02x:%02x %llu %.*s\n",
		(unsigned long long)e->start, (unsigned long long)e->end, e->perms,
		(unsigned long long)e->offset, e->dev_major, e->dev_minor,
		(unsigned long long)e->inode, (int)e->path_len, e->path);
	char *nb;

	if (n < 0 || (size_t)n >= sizeof(line))
		return 0;
	nb = realloc(p->ctx_lines, p->ctx_len + (size_t)n);
	if (!nb)
		return -ENOMEM;
	memcpy(nb + p->ctx_len, line, (size_t)n);
	p->ctx_lines = nb;
	p->ctx_len += (size_t)n;
	return 0;
}

/* The file-backed mappings only, from the kernel, one ioctl each: the
 * text of maps costs about 0.35 us per line to produce, and a process
 * with 1000 threads has 2000 lines of thread stacks and guard pages for
 * some 30 of files.  Returns -ENOTTY (or -EINVAL) on kernels without
 * PROCMAP_QUERY: the caller then reads the text. */
static int
objs_query(struct etls_proc *p, int fd)
{
	char name[PATH_MAX + 64];
	struct etls_procmap_query q;
	uint64_t addr = 0;
	int r;

	/* Once: tools that do not know this ioctl (valgrind) would take the
	 * name the kernel writes for uninitialised bytes. */
	memset(name, 0, sizeof(name));
	for (;;) {
		struct maps_entry e;
		bool exe_only;

		memset(&q, 0, sizeof(q));
		q.size = sizeof(q);
		q.query_flags =
			ETLS_PMQ_COVERING_OR_NEXT_VMA | ETLS_PMQ_FILE_BACKED_VMA;
		q.query_addr = addr;
		q.vma_name_addr = (uint64_t)(uintptr_t)name;
		q.vma_name_size = sizeof(name);
		if (ioctl(fd, ETLS_PROCMAP_QUERY, &q) < 0) {
			r = -errno;
			if (r == -ENOENT)
				break; /* no mapping at or above addr */
			/* no memory map (any more): as the empty text */
			return r == -ESRCH ? -ENODATA : r;
		}
		if (q.vma_end <= addr)
			return -EINVAL; /* would not advance */
		addr = q.vma_end;
		memset(&e, 0, sizeof(e));
		e.start = q.vma_start;
		e.end = q.vma_end;
		e.offset = q.vma_offset;
		e.perms[0] = q.vma_flags & ETLS_PMQ_READABLE ? 'r' : '-';
		e.perms[1] = q.vma_flags & ETLS_PMQ_WRITABLE ? 'w' : '-';
		e.perms[2] = q.vma_flags & ETLS_PMQ_EXECUTABLE ? 'x' : '-';
		e.perms[3] = q.vma_flags & ETLS_PMQ_SHARED ? 's' : 'p';
		e.dev_major = q.dev_major;
		e.dev_minor = q.dev_minor;
		e.inode = q.inode;
		/* vma_name_size counts the terminating NUL; 0 = no name */
		e.path = name;
		e.path_len = q.vma_name_size ? strnlen(name, q.vma_name_size) : 0;
		if (obj_mapping(p, &e, &exe_only)) {
			r = objs_add(&p->objs, &e, exe_only);
			if (r < 0)
				return r;
		}
		/* a look-alike ("/memfd:OTEL_CTX_BACKUP") is left out, so
		 * that the text is read if no file-backed mapping is the
		 * process context (an anonymous one may be) */
		if (pctx_map_name_kind(e.path, e.path_len) != PCTX_MAP_NONE) {
			r = ctx_lines_add(p, &e);
			if (r < 0)
				return r;
		}
	}
	/* An empty list is what a zombie (or kernel thread) shows. */
	return p->objs.n ? 0 : -ENODATA;
}

/* The text of /proc/PID/maps into p->maps. */
static int
maps_read_text(struct etls_proc *p)
{
	char path[64];
	int r;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)p->pid);
	r = remote_read_file(path, ETLS_MAPS_MAX, &p->maps, &p->maps_len);
	if (r < 0) {
		p->maps = NULL;
		return r == -ENOENT ? -ESRCH : r;
	}
	return 0;
}

void
etls_proc_set_reader(struct etls_proc *p,
		     pid_t tgid,
		     pid_t (*next_reader)(pid_t tgid, pid_t ended))
{
	p->tgid = tgid;
	p->next_reader = next_reader;
}

/* The names a dump looks up, wanted before the first object is parsed. */
static void
proc_want_dump_names(struct etls_proc *p)
{
	/* What find_glibc_db(), glibc_tid_off() and link_map_biases() look
	 * up, so that each object is searched for them in its first pass
	 * too (obj_scan()): libraries dlopen()ed after libc are mapped below
	 * it, so listed before it, and each would be opened again for each
	 * of these names. */
	static const char *const glibc_names[] = {
		"_rtld_global",
		"_r_debug",
		"_thread_db_pthread_tid",
		"_thread_db_sizeof_pthread",
		"_thread_db_rtld_global__dl_tls_dtv_slotinfo_list",
		"_thread_db_dtv_slotinfo_list_len",
		"_thread_db_dtv_slotinfo_list_next",
		"_thread_db_dtv_slotinfo_list_slotinfo",
		"_thread_db_dtv_slotinfo_gen",
		"_thread_db_dtv_slotinfo_map",
		"_thread_db_link_map_l_tls_modid",
		"_thread_db_sizeof_dtv_slotinfo",
	};
	size_t i;

	etls_proc_want(p, OTEL_THREAD_CTX_SYMBOL);
	for (i = 0; i < sizeof(glibc_names) / sizeof(glibc_names[0]); i++)
		etls_proc_want(p, glibc_names[i]);
}

int
etls_proc_load(pid_t pid, struct etls_proc **out)
{
	struct etls_proc *p;
	char path[64];
	int r, fd;

	*out = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->pid = pid;
	fd_budget_init(&p->fds);
	p->whole_left = ETLS_WHOLE_MAX;
	proc_want_dump_names(p);
	/* first: it tells the executable among the mappings (obj_mapping()) */
	exe_stat(p);
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = stop_maps_error(pid, -errno);
		etls_proc_free(p); /* and the names wanted above */
		return r;
	}
	/* CTXDUMP_TEST_MAPS_TEXT: take the path of kernels without
	 * PROCMAP_QUERY (before 6.11, e.g. Debian 12's own 6.1) on any
	 * kernel, so that the tests cover it. */
	r = getenv("CTXDUMP_TEST_MAPS_TEXT") ? -ENOTTY : objs_query(p, fd);
	close(fd);
	if (r == -ENOTTY || r == -EINVAL || r == -EOPNOTSUPP) {
		/* no PROCMAP_QUERY: parse the text */
		objs_free(&p->objs);
		free(p->ctx_lines);
		p->ctx_lines = NULL;
		p->ctx_len = 0;
		r = maps_read_text(p);
		if (r == 0)
			r = objs_load(p, p->maps, p->maps_len);
	}
	if (r < 0) {
		etls_proc_free(p);
		return r == -ENOMEM ? r : stop_maps_error(pid, r);
	}
	*out = p;
	return 0;
}

const char *
etls_proc_maps(struct etls_proc *p, size_t *len)
{
	/* The process context is a file-backed mapping when its writer
	 * could create a memfd; else (an anonymous "[anon:OTEL_CTX]") only
	 * the whole text tells. */
	if (!p->maps && p->ctx_len) {
		*len = p->ctx_len;
		return p->ctx_lines;
	}
	if (!p->maps && maps_read_text(p) < 0) {
		*len = 0;
		return "";
	}
	*len = p->maps_len;
	return p->maps;
}

void
etls_proc_free(struct etls_proc *p)
{
	if (!p)
		return;
	objs_free(&p->objs);
	free(p->maps);
	free(p->ctx_lines);
	while (p->n_names)
		free(p->names[--p->n_names]);
	free(p);
}

int
etls_find_named(pid_t pid, const char *name, struct etls_symbol *sym)
{
	struct etls_proc *p;
	int r;

	memset(sym, 0, sizeof(*sym));
	r = etls_proc_load(pid, &p);
	if (r < 0)
		return r;
	r = etls_proc_find(p, name, sym);
	etls_proc_free(p);
	return r;
}

/* The first defined data object named name in the mapped objects and its
 * value (n bytes of it, read from the target: the object is read-only
 * data, so reading it while the target runs is fine). */
static bool
find_glibc_value(
	struct etls_proc *p, const char *name, uint64_t *addr, void *val, size_t n)
{
	size_t i, idx;
	GElf_Sym s;

	for (i = 0; i < p->objs.n; i++) {
		struct etls_elf *x;

		if (!obj_names(p, &p->objs.v[i], name, false))
			continue;
		x = obj_elf(p, &p->objs.v[i]);
		if (!x || !x->bias_ok ||
		    !lookup_sym_type(x, name, STT_OBJECT, 0, &idx, &s))
			continue;
		if (s.st_size < n)
			return false;
		*addr = x->bias + s.st_value;
		if (!val)
			return true;
		for (;;) {
			int r = remote_read(p->pid, *addr, val, n);

			if (r == 0)
				return true;
			if (!reader_switch(p, r))
				return false;
		}
	}
	return false;
}

/* One libthread_db field descriptor, {bits, count, offset}
 * (nptl_db/db_info.c DB_DEFINE_DESC): a scalar field of that many bits,
 * or, with count 0, a flexible array. */
static bool
glibc_field_bits(
	struct etls_proc *p, const char *name, uint32_t bits, bool array, uint32_t *off)
{
	uint32_t d[3];
	uint64_t a;

	if (!find_glibc_value(p, name, &a, d, sizeof(d)))
		return false;
	if (array ? d[1] != 0 : d[0] != bits || d[1] != 1)
		return false;
	if (d[2] > 0xffff) /* no glibc structure is this large */
		return false;
	*off = d[2];
	return true;
}

/* A 64-bit field (or an array). */
static bool
glibc_field(struct etls_proc *p, const char *name, bool array, uint32_t *off)
{
	return glibc_field_bits(p, name, 64, array, off);
}

static int
glibc_tid_off(struct etls_proc *p, int64_t *tp_off)
{
	uint32_t off;

	/* pid_t tid of struct pthread, 32 bits */
	if (!glibc_field_bits(p, "_thread_db_pthread_tid", 32, false, &off))
		return -ENOENT;
#if defined(__x86_64__)
	/* TLS_TCB_AT_TP: the thread pointer is the struct pthread */
	*tp_off = off;
	return 0;
#elif defined(__aarch64__)
	{
		/* TLS_DTV_AT_TP: the struct pthread ends at the thread
		 * pointer (THREAD_SELF is tp - 1 struct pthread) */
		uint32_t size;
		uint64_t a;

		if (!find_glibc_value(p, "_thread_db_sizeof_pthread", &a, &size,
				      sizeof(size)) ||
		    size > 0xffff || size < off + 4)
			return -ENOENT;
		*tp_off = (int64_t)off - (int64_t)size;
		return 0;
	}
#else
	(void)off;
	return -ENOENT;
#endif
}

int
etls_glibc_tid_off(struct etls_proc *p, int64_t *tp_off)
{
	int r = glibc_tid_off(p, tp_off);

	transient_close(p);
	return r;
}

/* What the generation check of a general-dynamic access needs (struct
 * tlsm_glibc_db); false if this glibc does not tell (no descriptors,
 * stripped, not glibc). */
static bool
find_glibc_db(struct etls_proc *p, struct tlsm_glibc_db *db)
{
	uint32_t size;
	uint64_t a;

	memset(db, 0, sizeof(*db));
	return find_glibc_value(p, "_rtld_global", &db->rtld_global, NULL, 0) &&
	       glibc_field(p, "_thread_db_rtld_global__dl_tls_dtv_slotinfo_list", false,
			   &db->slotinfo_list) &&
	       glibc_field(p, "_thread_db_dtv_slotinfo_list_len", false,
			   &db->list_len) &&
	       glibc_field(p, "_thread_db_dtv_slotinfo_list_next", false,
			   &db->list_next) &&
	       glibc_field(p, "_thread_db_dtv_slotinfo_list_slotinfo", true,
			   &db->list_slotinfo) &&
	       glibc_field(p, "_thread_db_dtv_slotinfo_gen", false, &db->si_gen) &&
	       glibc_field(p, "_thread_db_dtv_slotinfo_map", false, &db->si_map) &&
	       glibc_field(p, "_thread_db_link_map_l_tls_modid", false,
			   &db->lm_modid) &&
	       find_glibc_value(p, "_thread_db_sizeof_dtv_slotinfo", &a, &size,
				sizeof(size)) &&
	       (db->slotinfo_size = size) >= 16 && size <= 256;
}

/* How many load biases of the objects in the dynamic loader's link_map
 * chain (_r_debug.r_map, through the public fields of <link.h>: l_addr at
 * 0, l_next at 24) fit in v, in the chain's order: the order the objects
 * were loaded in, which is the order of the global lookup scope the
 * loader binds a symbol in.  0 if the chain cannot be read (a statically
 * linked program, musl without _r_debug, memory that makes no sense). */
#define ETLS_LINK_MAPS_MAX 4096
static size_t
link_map_biases(struct etls_proc *p, uint64_t *v, size_t max)
{
	uint64_t rd, lm, w[4];
	size_t n = 0;

	if (!find_glibc_value(p, "_r_debug", &rd, NULL, 0) ||
	    remote_read(p->pid, rd + 8, &lm, sizeof(lm)) < 0)
		return 0;
	while (lm && n < max) {
		if (remote_read(p->pid, lm, w, sizeof(w)) < 0)
			return 0;
		v[n++] = w[0];
		lm = w[3];
	}
	return lm ? 0 : n; /* longer than any real chain: a cycle */
}

/* Position of the object loaded at bias in the chain, or SIZE_MAX. */
static size_t
load_rank(const uint64_t *v, size_t n, uint64_t bias)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (v[i] == bias)
			return i;
	return SIZE_MAX;
}

/* The load order of the objects (link_map_biases()), read on first need
 * only: most processes have one definition and need none. */
struct load_order {
	uint64_t *bias;
	size_t n;
	bool tried;
};

static void
load_order_read(struct etls_proc *p, struct load_order *lo)
{
	if (lo->tried)
		return;
	lo->tried = true;
	lo->bias = malloc(ETLS_LINK_MAPS_MAX * sizeof(*lo->bias));
	if (lo->bias)
		lo->n = link_map_biases(p, lo->bias, ETLS_LINK_MAPS_MAX);
}

/* Whether x's .dynsym defines name as something else than what OTEP-4947
 * says, and what as: the first of these types it has one of (an 8-byte
 * STT_TLS only without skip_valid: with it, an object that has one is a
 * definer, not a wrong one).  One pass over the symbols for any type
 * first: most objects do not have the name at all. */
static bool
misdef_in(struct etls_elf *x,
	  const char *name,
	  bool skip_valid,
	  unsigned *type,
	  uint64_t *size)
{
	static const int types[] = {STT_TLS,    STT_OBJECT, STT_NOTYPE,
				    STT_COMMON, STT_FUNC,   STT_GNU_IFUNC};
	size_t t, idx;
	GElf_Sym s;

	if (!lookup_sym_type(x, name, LOOKUP_ANY_TYPE, 0, &idx, &s))
		return false;
	for (t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		if (!lookup_sym_type(x, name, types[t], 0, &idx, &s))
			continue;
		if (skip_valid && types[t] == STT_TLS && s.st_size == 8)
			return false;
		*type = (unsigned)types[t];
		*size = s.st_size;
		return true;
	}
	return false;
}

static void
set_misdef(struct etls_symbol *sym,
	   const struct etls_obj *ob,
	   unsigned type,
	   uint64_t size)
{
	sym->has_misdef = true;
	snprintf(sym->misdef_module, sizeof(sym->misdef_module), "%s", ob->path);
	sym->misdef_type = type;
	sym->misdef_size = size;
}

/* A valid definition was found, in object chosen: does another object
 * define the name as something else?  Such a program runs under the
 * shim, which goes passive (preload/shim.c other_writer(): a lookup by
 * name finds the wrong one, in the executable or an earlier object, or
 * one after it), and its valid slot then holds no context, for a reason
 * worth naming.  Of several, the one a lookup by name binds to: the
 * executable's, else the first in load order (else in the maps). */
static void
find_misdef_beside(struct etls_proc *p,
		   const char *name,
		   size_t chosen,
		   struct load_order *lo,
		   struct etls_symbol *sym)
{
	struct etls_objs *objs = &p->objs;
	size_t i, rank = SIZE_MAX; /* of the one kept, once compared */
	uint64_t size, kept_bias = 0;
	bool ranked = false, kept_bias_ok = false;
	unsigned type;

	for (i = 0; i < objs->n; i++) {
		struct etls_obj *ob = &objs->v[i];
		struct etls_elf *x;
		size_t r;

		if (i == chosen || !obj_names(p, ob, name, false))
			continue;
		x = obj_elf(p, ob);
		if (!x || !misdef_in(x, name, true, &type, &size))
			continue;
		if ((p->exe_ok && (uint64_t)p->exe_st.st_ino == ob->inode) ||
		    x->eh.e_type == ET_EXEC || x->is_pie) {
			set_misdef(sym, ob, type, size);
			return;
		}
		if (!sym->has_misdef) {
			set_misdef(sym, ob, type, size);
			kept_bias = x->bias;
			kept_bias_ok = x->bias_ok;
			continue;
		}
		/* a second one: the load order decides (an object whose
		 * bias is unknown has no place in it) */
		if (!ranked) {
			load_order_read(p, lo);
			rank = kept_bias_ok ? load_rank(lo->bias, lo->n, kept_bias)
					    : SIZE_MAX;
			ranked = true;
		}
		r = x->bias_ok ? load_rank(lo->bias, lo->n, x->bias) : SIZE_MAX;
		if (r < rank) {
			set_misdef(sym, ob, type, size);
			rank = r;
		}
	}
}

static int
proc_find(struct etls_proc *p, const char *name, struct etls_symbol *sym)
{
	/* Load order of the objects, read once a second definition shows
	 * up: the loader binds the symbol to the first one in it. */
	struct load_order lo = {0};
	size_t best_rank = SIZE_MAX, best_i = 0;
	struct etls_objs *objs = &p->objs;
	struct etls_symbol best, cur;
	bool have = false, musl = false, exe_stripped = false, exe_static = false;
	bool any_interp = false;
	size_t i, k;
	int r = 0;

	memset(sym, 0, sizeof(*sym));
	memset(&best, 0, sizeof(best));
	/* the thread read through was ending already at the load */
	if (!p->exe_ok)
		(void)reader_switch(p, -ESRCH);
	/* Two passes over the objects: first their .dynsym, where the OTEP
	 * puts the symbol; then, only if no object exports it, their .symtab
	 * (a statically linked writer has no .dynsym, or one without the
	 * symbol). */
	for (k = 0; k < 2 * objs->n; k++) {
		bool symtab = k >= objs->n;
		struct etls_obj *ob = &objs->v[k % objs->n];
		struct etls_elf *x;
		size_t cur_rank;
		bool skip;

		if (symtab && k == objs->n && have)
			break;
		if (!symtab) {
			musl |= path_is_musl(ob->path);
			best.n_objects++;
		}
		/* one that does not name it: what parsing it told is enough */
		skip = !obj_names(p, ob, name, symtab);
		x = skip ? &ob->x : obj_elf(p, ob);
		if (!x) {
			/* not an ELF object is no failure: a mapped data file */
			if (symtab || ob->err == -ENOEXEC)
				continue;
			if (!best.n_unopenable++) {
				snprintf(best.unopenable, sizeof(best.unopenable), "%s",
					 ob->path);
				best.unopenable_deleted = ob->deleted;
				best.unopenable_err = ob->err;
			}
			continue;
		}
		/* a program with PT_INTERP mapped: a dynamic loader runs,
		 * even where the executable itself has none (the program
		 * started as "ld.so PROG": /proc/PID/exe is the loader) */
		any_interp |= x->has_interp;
		if (p->exe_ok && (uint64_t)p->exe_st.st_ino == ob->inode) {
			exe_static = !x->has_interp;
			exe_stripped = symtab && x->has_tls && !x->has_symtab;
		}
		memset(&cur, 0, sizeof(cur));
		if (skip || !examine_definition(x, name, symtab, &cur))
			continue;
		snprintf(cur.module, sizeof(cur.module), "%s", ob->path);
		cur.deleted = ob->deleted;
		cur.dev_major = ob->dev_major;
		cur.dev_minor = ob->dev_minor;
		cur.inode = ob->inode;
		cur.is_exec |= p->exe_ok && (uint64_t)p->exe_st.st_ino == ob->inode;

		best.n_definitions++;
		if (have && !lo.tried) {
			load_order_read(p, &lo);
			best_rank = load_rank(lo.bias, lo.n, best.bias);
		}
		cur_rank = have ? load_rank(lo.bias, lo.n, cur.bias) : SIZE_MAX;
		/* The executable comes first in the lookup scope; then the
		 * libraries in load order, which /proc/PID/maps does not
		 * follow (a library loaded later is mapped lower): the first
		 * of them is the one the loader binds the symbol to, unless
		 * the load order is unknown.  Otherwise the first definition
		 * whose slots are filled in. */
		if (!have || (cur.is_exec && !best.is_exec) ||
		    (!best.is_exec && !cur.is_exec && cur_rank != SIZE_MAX &&
		     best_rank != SIZE_MAX && cur_rank < best_rank) ||
		    (!best.is_exec && (cur_rank == SIZE_MAX || best_rank == SIZE_MAX) &&
		     !has_slots(&best) && has_slots(&cur))) {
			unsigned nd = best.n_definitions, no = best.n_objects,
				 nu = best.n_unopenable;
			int ue = best.unopenable_err;
			bool ud = best.unopenable_deleted;

			memcpy(cur.unopenable, best.unopenable, sizeof(cur.unopenable));
			best = cur;
			best.n_definitions = nd;
			best.n_objects = no;
			best.n_unopenable = nu;
			best.unopenable_err = ue;
			best.unopenable_deleted = ud;
			best_rank = cur_rank;
			best_i = k % objs->n;
			have = true;
		}
	}
	if (have)
		find_misdef_beside(p, name, best_i, &lo, &best);
	free(lo.bias);
	if (!have) {
		/* why none may have been found */
		sym->n_objects = best.n_objects;
		sym->n_unopenable = best.n_unopenable;
		memcpy(sym->unopenable, best.unopenable, sizeof(sym->unopenable));
		sym->unopenable_deleted = best.unopenable_deleted;
		sym->unopenable_err = best.unopenable_err;
		sym->exe_stripped = exe_stripped;
		sym->exe_static = exe_static && !any_interp;
		/* defined, but not as OTEP-4947 says: worth telling apart
		 * from no definition at all */
		for (i = 0; i < objs->n; i++) {
			struct etls_elf *x;
			uint64_t size;
			unsigned type;

			if (!obj_names(p, &objs->v[i], name, false))
				continue;
			x = obj_elf(p, &objs->v[i]);
			if (x && misdef_in(x, name, false, &type, &size)) {
				set_misdef(sym, &objs->v[i], type, size);
				break;
			}
		}
		return -ENOENT;
	}
	best.libc = musl ? TLSM_MUSL : TLSM_GLIBC;
#if defined(__x86_64__)
	if (best.arch != TLSM_X86_64)
		r = -EPROTONOSUPPORT;
#elif defined(__aarch64__)
	if (best.arch != TLSM_AARCH64)
		r = -EPROTONOSUPPORT;
#else
	r = -EPROTONOSUPPORT;
#endif

	/* A library that defines the variable but never accesses it itself:
	 * the users' relocations (e.g. an executable's R_X86_64_TPOFF64) tell
	 * where the loader put it. */
	if (r == 0 && !has_slots(&best) && !best.is_exec) {
		for (i = 0; i < objs->n; i++) {
			struct etls_elf *x;

			if (!obj_names(p, &objs->v[i], name, false))
				continue;
			x = obj_elf(p, &objs->v[i]);
			if (x && examine_user(x, name, &best)) {
				snprintf(best.reloc_module, sizeof(best.reloc_module),
					 "%s", objs->v[i].path);
				break;
			}
		}
	}
	if (r < 0)
		return r;
	/* general dynamic on glibc: the module's generation (etls_resolve) */
	if (best.libc == TLSM_GLIBC && best.dtpmod_slot && !best.tlsdesc_slot &&
	    !best.tpoff_slot)
		best.has_glibc_db = find_glibc_db(p, &best.glibc_db);
	*sym = best;
	return 0;
}

int
etls_proc_find(struct etls_proc *p, const char *name, struct etls_symbol *sym)
{
	int r;

	etls_proc_want(p, name);
	r = proc_find(p, name, sym);

	transient_close(p);
	return r;
}

/* tpoff + adjust, modular: both come from target memory. */
static int64_t
tpoff_adjust(int64_t tpoff, int64_t adjust)
{
	return (int64_t)((uint64_t)tpoff + (uint64_t)adjust);
}

int
etls_resolve(pid_t pid, const struct etls_symbol *sym, struct tlsm_access *acc)
{
	int r;

	if (sym->tlsdesc_slot) {
		uint64_t desc[2], dyn[3];
		uint8_t code[16];
		ssize_t nc = 0;
		bool dyn_ok = false;

		r = remote_read(pid, sym->tlsdesc_slot, desc, sizeof(desc));
		if (r < 0)
			goto fail;
		if (desc[0])
			nc = remote_read_prefix(pid, desc[0], code, sizeof(code));
		if (desc[1] && remote_read(pid, desc[1], dyn, sizeof(dyn)) == 0)
			dyn_ok = true;
		tlsm_from_tlsdesc(sym->arch, sym->libc, desc[0], desc[1], code,
				  nc > 0 ? (size_t)nc : 0, dyn_ok ? dyn : NULL, acc);
		/* a symbol-less descriptor addresses block + addend */
		if (acc->model == TLSM_TLSDESC_STATIC)
			acc->tpoff = tpoff_adjust(acc->tpoff, sym->slot_adjust);
		else if (acc->model == TLSM_TLSDESC_DYNAMIC)
			acc->offset += (uint64_t)sym->slot_adjust;
		return 0;
	}
	/* Initial-exec before general dynamic: a TPOFF64 word means the
	 * module has static TLS, at the same offset in every thread, while
	 * a thread older than a dlopen() that reaches it only through
	 * initial-exec code has no DTV slot for it (a module with both, as
	 * lld links one: GNU ld turns the general-dynamic code into
	 * initial-exec). */
	if (sym->tpoff_slot) {
		uint64_t got;

		r = remote_read(pid, sym->tpoff_slot, &got, sizeof(got));
		if (r < 0)
			goto fail;
		tlsm_from_ie(sym->arch, sym->libc, got, acc);
		if (acc->model == TLSM_IE)
			acc->tpoff = tpoff_adjust(acc->tpoff, sym->slot_adjust);
		return 0;
	}
	if (sym->dtpmod_slot) {
		uint64_t modid, off = sym->st_value;

		r = remote_read(pid, sym->dtpmod_slot, &modid, sizeof(modid));
		if (r < 0)
			goto fail;
		if (sym->dtpoff_slot) {
			r = remote_read(pid, sym->dtpoff_slot, &off, sizeof(off));
			if (r < 0)
				goto fail;
		}
		tlsm_from_gd(sym->arch, sym->libc, modid, off, acc);
		/* A module id reused after dlclose(): a thread that has not
		 * reached dynamic TLS since still has the old module's block in
		 * its DTV slot (reader.md §1.4 (b)).  glibc's __tls_get_addr
		 * repairs that from the slotinfo generation; so does
		 * libthread_db (td_thr_tlsbase), and so do we.  Without the
		 * generation the check stays off, as it always was. */
		if (acc->model == TLSM_GD && sym->has_glibc_db) {
			uint64_t gen;

			r = tlsm_glibc_module_gen(&sym->glibc_db, modid,
						  remote_tlsm_read, &pid, &gen);
			if (r == 0) {
				acc->gen = gen;
				acc->check_gen = true;
			} else if (r == -ENOENT) {
				/* The module was closed: whatever a thread's
				 * slot holds is not its block.  No context
				 * rather than a stale one. */
				acc->gen = UINT64_MAX;
				acc->check_gen = true;
			}
		}
		return 0;
	}
	memset(acc, 0, sizeof(*acc));
	acc->arch = sym->arch;
	acc->libc = sym->libc;
	acc->model = TLSM_UNRESOLVED;
	if (sym->is_exec) {
		/* a statically linked executable has no ld.so to place its
		 * block: its libc did (reader.md §1.2) */
		int (*le)(enum tlsm_arch, enum tlsm_libc, uint64_t, uint64_t, uint64_t,
			  uint64_t, int64_t *) =
			sym->no_interp ? tlsm_static_exe_tpoff : tlsm_le_tpoff;
		int64_t tpoff;

		if (le(sym->arch, sym->libc, sym->st_value, sym->tls_vaddr,
		       sym->tls_memsz, sym->tls_align, &tpoff) == 0) {
			acc->model = TLSM_LE;
			acc->tpoff = tpoff;
		}
	}
	return 0;
fail:
	memset(acc, 0, sizeof(*acc));
	acc->arch = sym->arch;
	acc->libc = sym->libc;
	acc->model = TLSM_UNRESOLVED;
	return r;
}

int
etls_slot_words(pid_t pid, const struct etls_symbol *sym, uint64_t w[2])
{
	int r;

	w[0] = w[1] = 0;
	/* the order of etls_resolve() */
	if (sym->tlsdesc_slot)
		return remote_read(pid, sym->tlsdesc_slot, w, 2 * sizeof(*w));
	if (sym->tpoff_slot)
		return remote_read(pid, sym->tpoff_slot, &w[0], sizeof(*w));
	if (sym->dtpmod_slot) {
		r = remote_read(pid, sym->dtpmod_slot, &w[0], sizeof(*w));
		if (r == 0 && sym->dtpoff_slot)
			r = remote_read(pid, sym->dtpoff_slot, &w[1], sizeof(*w));
		return r;
	}
	return 0;
}

int
etls_slot_gen(pid_t pid,
	      const struct etls_symbol *sym,
	      const struct tlsm_access *acc,
	      const uint64_t w[2],
	      uint64_t g[3])
{
	int r;

	g[0] = g[1] = g[2] = 0;
	if (acc->model == TLSM_TLSDESC_DYNAMIC && sym->tlsdesc_slot)
		return remote_read(pid, w[1], g, 3 * sizeof(*g));
	if (acc->model == TLSM_GD && sym->dtpmod_slot && !sym->tlsdesc_slot &&
	    !sym->tpoff_slot && sym->has_glibc_db) {
		r = tlsm_glibc_module_gen(&sym->glibc_db, w[0], remote_tlsm_read, &pid,
					  &g[0]);
		if (r == -ENOENT) {
			g[0] = UINT64_MAX; /* as etls_resolve() takes it */
			r = 0;
		}
		return r;
	}
	return 0;
}

int
etls_proc_find_data(struct etls_proc *p,
		    const struct etls_symbol *sym,
		    const char *name,
		    uint64_t *addr,
		    uint64_t *size)
{
	struct etls_elf *x = NULL;
	GElf_Sym s;
	size_t i, idx;
	int r = -ENOENT;

	/* The definer as the lookup found it, opened again only if it was
	 * closed, and then checked to be the mapped file still (obj_open()):
	 * not whatever is at its path by now. */
	for (i = 0; i < p->objs.n; i++) {
		struct etls_obj *ob = &p->objs.v[i];

		if (ob->inode != sym->inode || ob->dev_major != sym->dev_major ||
		    ob->dev_minor != sym->dev_minor)
			continue;
		x = obj_elf(p, ob);
		if (!x)
			r = ob->err;
		break;
	}
	if (x && x->dynsym && lookup_sym_type(x, name, STT_OBJECT, 0, &idx, &s)) {
		*addr = sym->bias + s.st_value;
		*size = s.st_size;
		r = 0;
	}
	transient_close(p);
	return r;
}
