/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The TLS address arithmetic of ctxdump, kept free of I/O so it can be
 * tested on synthetic inputs for both architectures: how a loader-written
 * slot (TLSDESC descriptor, GD GOT pair, IE GOT word) or the executable's
 * PT_TLS turns into a per-thread address of otel_thread_ctx_v1.
 *
 * References: glibc elf/dl-tls.c (_dl_determine_tlsoffset), the
 * sysdeps/{x86_64,aarch64}/dl-machine.h relocation code, dl-tlsdesc.S, and
 * musl ldso/dynlink.c; see reader.md §1. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum tlsm_arch {
	TLSM_X86_64,
	TLSM_AARCH64,
};

enum tlsm_libc {
	TLSM_GLIBC,
	TLSM_MUSL,
};

enum tlsm_model {
	TLSM_NONE = 0,
	TLSM_TLSDESC_STATIC,  /* descriptor resolver returns its argument */
	TLSM_TLSDESC_DYNAMIC, /* argument points at {module, offset[, gen]} */
	TLSM_GD,              /* DTPMOD64 + DTPOFF64 GOT pair, DTV walk */
	TLSM_IE,              /* TPOFF64 GOT word */
	TLSM_LE,              /* executable's PT_TLS, no relocation */
	TLSM_UNRESOLVED,      /* slot not (yet) filled in by the loader */
};

/* How to find the variable in any thread of one process. */
struct tlsm_access {
	enum tlsm_arch arch;
	enum tlsm_libc libc;
	enum tlsm_model model;
	int64_t tpoff;   /* static models: address = tp + tpoff */
	uint64_t modid;  /* dynamic models: DTV index */
	uint64_t offset; /* dynamic models: offset in the module's block */
	/* Dynamic models on glibc: a thread whose DTV generation (dtv[0]) is
	 * older than gen has no block for this module yet, whatever its slot
	 * holds (a module id reused after dlclose() leaves the old module's
	 * block there).  TLSDESC: the descriptor's gen_count; general
	 * dynamic: the module's slotinfo generation, when it can be read
	 * (tlsm_glibc_module_gen()). */
	uint64_t gen;
	bool check_gen;
};

/* Sanity limit for a module id (the eBPF profiler uses the same bound). */
#define TLSM_MODID_MAX 4096

const char *tlsm_model_name(enum tlsm_model m);

/* For a static model on x86_64 (TLS variant II: the blocks lie below the
 * thread pointer), the thread-pointer offset of the start of the block
 * that holds the variable (st_value: its offset in the module's TLS
 * template); 0 when there is none or it makes no sense.  glibc and musl
 * put a thread's static TLS area between its stack and its thread
 * pointer, so the stack of a thread whose thread pointer is above its
 * stack pointer ends at or below tp + that offset. */
int64_t tlsm_static_block_tpoff(const struct tlsm_access *acc, uint64_t st_value);

/* Thread-pointer offset of a variable defined in the executable and
 * accessed local-exec (no relocation): st_value is the offset in the TLS
 * template, p_* are the executable's PT_TLS fields.  Returns -EINVAL for an
 * alignment that is not a power of two. */
int tlsm_le_tpoff(enum tlsm_arch arch,
		  enum tlsm_libc libc,
		  uint64_t st_value,
		  uint64_t p_vaddr,
		  uint64_t p_memsz,
		  uint64_t p_align,
		  int64_t *tpoff);

/* The same for a statically linked executable (no PT_INTERP: static or
 * static-pie), whose libc placed its TLS block without ld.so: glibc
 * ignores the image's first-byte misalignment there (csu/libc-tls.c), so
 * the result differs from tlsm_le_tpoff() only when p_vaddr is not
 * aligned to p_align. */
int tlsm_static_exe_tpoff(enum tlsm_arch arch,
			  enum tlsm_libc libc,
			  uint64_t st_value,
			  uint64_t p_vaddr,
			  uint64_t p_memsz,
			  uint64_t p_align,
			  int64_t *tpoff);

enum tlsm_resolver {
	TLSM_RES_UNKNOWN,
	TLSM_RES_RETURN_ARG, /* [endbr64|bti c] load arg; ret */
	TLSM_RES_UNDEFWEAK,  /* glibc x86_64 _dl_tlsdesc_undefweak */
};

/* Classify the code at a TLSDESC entry point (n bytes were readable). */
enum tlsm_resolver
tlsm_classify_resolver(enum tlsm_arch arch, const uint8_t *code, size_t n);

/* Access from a TLSDESC descriptor {entry, arg}.  code/ncode: bytes read at
 * entry (ncode may be 0 if unreadable).  dynarg: the three words read at arg,
 * or NULL if arg did not point at readable memory.  Always fills *out; the
 * model is TLSM_UNRESOLVED when the descriptor cannot be used. */
void tlsm_from_tlsdesc(enum tlsm_arch arch,
		       enum tlsm_libc libc,
		       uint64_t entry,
		       uint64_t arg,
		       const uint8_t *code,
		       size_t ncode,
		       const uint64_t dynarg[3],
		       struct tlsm_access *out);

/* Access from a legacy general-dynamic GOT pair (DTPMOD64, DTPOFF64). */
void tlsm_from_gd(enum tlsm_arch arch,
		  enum tlsm_libc libc,
		  uint64_t modid,
		  uint64_t dtpoff,
		  struct tlsm_access *out);

/* Access from an initial-exec GOT word (TPOFF64 / TLS_TPREL). */
void tlsm_from_ie(enum tlsm_arch arch,
		  enum tlsm_libc libc,
		  uint64_t got,
		  struct tlsm_access *out);

/* Where the DTV pointer sits relative to tp and how big an entry is. */
struct tlsm_dtv_layout {
	int64_t dtv_off;
	unsigned stride;
};
void
tlsm_dtv_layout(enum tlsm_arch arch, enum tlsm_libc libc, struct tlsm_dtv_layout *out);

/* Reads len bytes of target memory at addr; returns 0 or a negative errno. */
typedef int (*tlsm_read_fn)(void *opaque, uint64_t addr, void *buf, size_t len);

/* Where glibc keeps the generation of each module id, as its libthread_db
 * finds it (nptl_db/td_thr_tlsbase.c): ld.so's _rtld_global holds
 * _dl_tls_dtv_slotinfo_list, a chain of {len, next, slotinfo[len]}, and
 * slotinfo[modid] is {gen, map}.  The offsets come from the descriptors
 * glibc exports for libthread_db (_thread_db_*, in libc.so.6 since 2.34,
 * libpthread.so.0 before; {bits, count, offset} each), never from a
 * hard-coded layout. */
struct tlsm_glibc_db {
	uint64_t rtld_global;   /* runtime address of _rtld_global */
	uint32_t slotinfo_list; /* offset of _dl_tls_dtv_slotinfo_list in it */
	uint32_t list_len, list_next, list_slotinfo; /* in dtv_slotinfo_list */
	uint32_t slotinfo_size;                      /* sizeof (dtv_slotinfo) */
	uint32_t si_gen, si_map;                     /* in dtv_slotinfo */
	uint32_t lm_modid;                           /* l_tls_modid in link_map */
};

/* The generation at which the module now holding modid was loaded (the
 * module of the map whose l_tls_modid is modid; a thread whose DTV is
 * older has not set up its slot for that module).  Returns 0 and *gen,
 * -ENOENT if no module holds modid (its slot is free, or another module's:
 * the module the relocation names was closed), -EINVAL if the target's
 * structures make no sense, or the reader's error. */
int tlsm_glibc_module_gen(const struct tlsm_glibc_db *db,
			  uint64_t modid,
			  tlsm_read_fn rd,
			  void *opaque,
			  uint64_t *gen);

/* Per-thread address of the variable, given the thread pointer.  Returns 0,
 * -ENODATA if the thread has no TLS block for the module yet (no context),
 * -EINVAL if the access is unusable, or the reader's error. */
int tlsm_slot_addr(const struct tlsm_access *a,
		   uint64_t tp,
		   tlsm_read_fn rd,
		   void *opaque,
		   uint64_t *addr);

/* One PT_LOAD of an ELF object, and one mapping of its file as
 * /proc/PID/maps shows it. */
struct tlsm_load {
	uint64_t vaddr, offset, filesz;
	bool exec; /* PF_X */
};
struct tlsm_map {
	uint64_t start, end, offset;
	bool exec; /* 'x' in its permissions */
};

/* The load bias (runtime address - ELF vaddr) that mapping m of the
 * object gives: its start less the page-rounded vaddr of the file offset
 * it maps, from the first of the nl PT_LOADs ld that holds that offset.
 * Returns 0 and *bias, or -ENOENT if none holds it. */
int tlsm_map_bias(const struct tlsm_load *ld,
		  size_t nl,
		  const struct tlsm_map *m,
		  uint64_t *bias);

/* Which of the nm mappings m of one file (in address order) is the first
 * mapping the loader made of it: the first at offset 0 whose bias places
 * every PT_LOAD of ld that has bytes in the file where a mapping of m
 * maps them (an executable one for an executable PT_LOAD).  A program
 * that maps the file itself at offset 0 (libbacktrace, symbolizers, crash
 * reporters) adds one mapping of the whole file, below the loader's ones
 * as often as not.  Returns its index, or -1 if none fits. */
int tlsm_loader_map(const struct tlsm_load *ld,
		    size_t nl,
		    const struct tlsm_map *m,
		    size_t nm);
