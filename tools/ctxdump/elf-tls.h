/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Finding otel_thread_ctx_v1 in a live process: which mapped ELF object
 * defines it (.dynsym, STT_TLS, size 8), where the loader-written slots of
 * the relocations against it are (.rela.dyn and .rela.plt), and, once the
 * threads are stopped, which TLS access model those slots describe. */

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tls-math.h"

/* Why an object could not be read: its file ends a page or more before
 * its mapping does, so it was truncated after it was loaded (an errno
 * that open() never returns). */
#define ETLS_ERR_SHORT (-EBADFD)

struct etls_symbol {
	/* Defining object, path as in /proc/PID/maps (" (deleted)" removed). */
	char module[PATH_MAX];
	bool deleted;
	/* and its file, as maps shows it */
	unsigned dev_major, dev_minor;
	uint64_t inode;
	bool is_exec;
	/* Found in the object's .symtab, not its .dynsym: no object exports
	 * the symbol (a statically linked writer, or one that does not
	 * export it).  Only defined thread-locals of size 8 count: global
	 * or weak, else a local one if it is the only one of that name in
	 * the object (a hidden global the linker made local; two or more
	 * file-scope statics are ambiguous). */
	bool from_symtab;
	/* The defining object has no PT_INTERP: with is_exec, a statically
	 * linked executable (-static or -static-pie), whose libc placed its
	 * TLS block itself (tlsm_static_exe_tpoff()). */
	bool no_interp;
	uint64_t bias;     /* load bias: runtime address - ELF vaddr */
	uint64_t st_value; /* offset in the module's TLS template */
	uint64_t st_size;
	/* The defining object's PT_TLS. */
	uint64_t tls_vaddr, tls_memsz, tls_align;

	/* Runtime addresses of the slots the loader fills in, from the
	 * relocations against the symbol (0 = none). */
	uint64_t tlsdesc_slot; /* {entry, arg} */
	uint64_t dtpmod_slot;  /* module id */
	uint64_t dtpoff_slot;  /* offset in the block */
	uint64_t tpoff_slot;   /* TP offset */
	/* The slots came from relocations without a symbol (r_sym 0): the
	 * variable is reached through a hidden alias (or local-dynamic code),
	 * so the linker bound the access itself and the slot addresses the
	 * module's TLS block plus the relocation's addend.  The variable
	 * lies slot_adjust (st_value - addend) further. */
	bool anon_slots;
	int64_t slot_adjust;
	/* Object whose relocations gave the slots, if not the definer (an
	 * executable using a library's variable initial-exec). */
	char reloc_module[PATH_MAX];

	enum tlsm_arch arch;
	enum tlsm_libc libc;
	/* glibc, general dynamic: where the module's generation is kept */
	bool has_glibc_db;
	struct tlsm_glibc_db glibc_db;
	unsigned n_definitions; /* distinct objects defining the symbol */
	unsigned n_objects;     /* ELF objects examined */
	unsigned n_unopenable;  /* mapped objects that could not be opened */
	/* The first of those, and why (-ESTALE: the file at its path is no
	 * longer the mapped one).  Also filled when etls_proc_find() returns
	 * -ENOENT, with the counts above: the definition may be in it. */
	char unopenable[PATH_MAX];
	bool unopenable_deleted;
	int unopenable_err; /* a negative errno, or ETLS_ERR_SHORT */
	/* When etls_proc_find() returns -ENOENT: the executable has a TLS
	 * segment but no .symtab (stripped), so a definition that it does
	 * not export cannot be found; exe_static: it is statically linked
	 * (no PT_INTERP): nothing can be preloaded into it, and stripped,
	 * its .dynsym can hold the symbol only when built -static-pie with
	 * the symbol exported. */
	bool exe_stripped;
	bool exe_static;
	/* When etls_proc_find() returns -ENOENT: an object whose .dynsym
	 * defines the name, but not as an 8-byte thread-local (another
	 * type, or another size): what it is and where.  When it returns 0:
	 * such an object besides the definer (a program that misdefines
	 * the name under the shim, which then goes passive), the one a
	 * lookup by name finds first: the executable, else the first in
	 * load order. */
	bool has_misdef;
	char misdef_module[PATH_MAX];
	unsigned misdef_type; /* STT_* */
	uint64_t misdef_size;
};

/* Look through the mapped objects of pid: the .dynsym of each, and only
 * if none defines the symbol there, their .symtab (as the eBPF profiler
 * does: .dynsym first, then .symtab).  Runs while the target runs.
 * Returns 0, -ENOENT if no object defines the symbol, -ESRCH if the process
 * is gone, -EPROTONOSUPPORT for an architecture ctxdump cannot read, or
 * another negative errno. */
int etls_find(pid_t pid, struct etls_symbol *sym);

/* The same for any thread-local pointer variable name (STT_TLS, size 8):
 * otel_thread_ctx_v1, elastic_apm_profiling_correlation_tls_v1,
 * custom_labels_current_set. */
int etls_find_named(pid_t pid, const char *name, struct etls_symbol *sym);

/* One listing of a process's mappings and the ELF objects it maps, for
 * several lookups: a dump looks up three symbols and the process
 * context, and a 1000-thread process has some 2000 lines of maps (0.7 ms
 * of kernel time to print them).  Lists only the file-backed mappings
 * with PROCMAP_QUERY (Linux 6.11), else parses the text of maps.  Objects
 * are opened and parsed once, on first use.  Runs while the target
 * runs. */
struct etls_proc;

/* Returns 0 and *out, -ESRCH if the process is gone or exiting, -ENODATA
 * if it maps no file nor its executable (a kernel thread), or another
 * negative errno (-EACCES, -EPERM, -ENOMEM).  The executable is read
 * through /proc/PID/exe where no path opens it (a program run from a
 * memfd with fexecve()). */
int etls_proc_load(pid_t pid, struct etls_proc **out);

/* Whether a mapping named path (len bytes, as maps shows it) is one whose
 * objects are read by that path: a path, but not a memfd, a file under
 * /dev/ or a SysV segment (the executable is read all the same, through
 * /proc/PID/exe). */
bool etls_path_is_file(const char *path, size_t len);

/* When the thread p reads the process through (the pid given to
 * etls_proc_load()) has ended, go on through next_reader(tgid, ended):
 * another live thread of process tgid, or 0 if ended has not ended or
 * there is none.  Without it, p reads through that one thread only. */
void etls_proc_set_reader(struct etls_proc *p,
			  pid_t tgid,
			  pid_t (*next_reader)(pid_t tgid, pid_t ended));

/* That name will be looked up in p (etls_proc_find()): the symbol tables
 * of each object are then searched for it in the same pass as for the
 * others, and an object that does not name it is not opened again for
 * it.  A name not said beforehand costs a pass over the objects of its
 * own (an open of each one beyond the descriptor budget).  At most 32;
 * otel_thread_ctx_v1 and the names of glibc that ctxdump reads are said
 * by etls_proc_load(). */
void etls_proc_want(struct etls_proc *p, const char *name);

/* etls_find_named() on the snapshot p. */
int etls_proc_find(struct etls_proc *p, const char *name, struct etls_symbol *sym);

/* Text in the format of /proc/PID/maps (not NUL-terminated) holding at
 * least every mapping whose name contains "OTEL_CTX" (the process
 * context's): only those when the kernel listed the file-backed mappings
 * (PROCMAP_QUERY) and one was found among them, else the whole of maps,
 * read now if it was not yet.  "" if it cannot be read. */
const char *etls_proc_maps(struct etls_proc *p, size_t *len);

void etls_proc_free(struct etls_proc *p); /* NULL is fine */

/* Where glibc keeps each thread's tid: the offset from a thread's thread
 * pointer of the tid field of its struct pthread, from libthread_db's
 * descriptor _thread_db_pthread_tid (GLIBC_PRIVATE, in the .dynsym of
 * libc.so.6).  Tells which of several threads on one thread pointer owns
 * it.  Returns 0, or -ENOENT if the process does not say (not glibc, a
 * statically linked program, a descriptor that makes no sense). */
int etls_glibc_tid_off(struct etls_proc *p, int64_t *tp_off);

/* Runtime address and size of the exported data object (STT_OBJECT, not
 * thread-local) name in the .dynsym of the object that defines sym, which
 * etls_proc_find() found in p, e.g. custom_labels_abi_version.  Returns
 * 0, -ENOENT, or another negative errno. */
int etls_proc_find_data(struct etls_proc *p,
			const struct etls_symbol *sym,
			const char *name,
			uint64_t *addr,
			uint64_t *size);

/* For tests and fuzzers: the part of etls_find_named() that reads one ELF
 * object, here from its bytes in memory, which may be anything (libelf
 * may convert them in place).  The object's lowest mapping starts at
 * map_start with file offset map_offset.  Looks for the definition of
 * name (STT_TLS, size 8) and fills what the object tells: bias, st_value,
 * st_size, the PT_TLS fields, arch, is_exec (ET_EXEC or a PIE) and the
 * slots of the relocations against it; with user, looks for an undefined
 * reference instead and fills only the slots.  The symbol tables are
 * first searched for every name a dump looks up, as etls_proc_find()
 * searches each object.  Returns 0, -ENOENT (no such symbol, or no slot
 * for user),
 * -ENOEXEC (not a 64-bit ELF object), or -EPROTO if that search said a
 * table where the symbol was found does not name it (a dump would miss
 * it: a bug the fuzzer looks for). */
int etls_examine_image(void *image,
		       size_t size,
		       uint64_t map_start,
		       uint64_t map_offset,
		       const char *name,
		       bool user,
		       struct etls_symbol *sym);

/* Read the loader-written slots and classify the access.  Call while the
 * target's threads are stopped (the slots are process-global and a
 * concurrent dlopen could be filling them in).  Always fills *acc; the
 * model is TLSM_UNRESOLVED when no slot is usable.  Returns 0 or the
 * negative errno of a failed read of a slot. */
int etls_resolve(pid_t pid, const struct etls_symbol *sym, struct tlsm_access *acc);

/* The raw words of the slot etls_resolve() reads first (the TLSDESC
 * descriptor, the IE word, or the GD pair; zeros for local-exec, which
 * has none), for a cheap check that the loader has not rewritten them
 * since: a writer library unloaded and loaded again gets new values
 * there, or its slot address is no longer mapped.  Call while the
 * threads are stopped.  Returns 0 or the negative errno of the read. */
int etls_slot_words(pid_t pid, const struct etls_symbol *sym, uint64_t w[2]);

/* What a dynamic access acc (etls_resolve() from slot words w) depends on
 * besides those words, for the same check: a writer library unloaded and
 * loaded again at the same address under the same module id leaves its
 * slot words as they were, but not its generation, and a thread whose DTV
 * predates the new generation still holds the old, freed block there.
 * General dynamic on glibc (with the _thread_db descriptors): g[0] is the
 * slotinfo generation of module w[0] (UINT64_MAX if no module holds it);
 * TLSDESC dynamic: g is the {module, offset, generation} the descriptor's
 * argument w[1] points at (glibc may give the new descriptor the old
 * argument's memory).  Zeros for every other access.  Call while the
 * threads are stopped.  Returns 0 or the negative errno of a read. */
int etls_slot_gen(pid_t pid,
		  const struct etls_symbol *sym,
		  const struct tlsm_access *acc,
		  const uint64_t w[2],
		  uint64_t g[3]);
