/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* One reader for the three thread-context layouts a process may publish
 * (otep-formats.md §1, §7, §8):
 *
 *   otel_thread_ctx_v1                        OTEP-4947 record: 28-byte
 *       header + attrs-data; pointer -> record (2 levels)
 *   elastic_apm_profiling_correlation_tls_v1  Elastic universal profiling:
 *       pointer -> packed 37-byte buffer (2 levels)
 *   custom_labels_current_set                 Polar Signals custom-labels
 *       v1: pointer -> labelset -> label array -> key/value bytes (4
 *       levels, every one bounded here)
 *
 * lay_find() locates the exported TLS variables (elf-tls.c) while the
 * target runs; lay_resolve() and lay_read() run while its threads are
 * ptrace-stopped and only copy bytes, level by level, one batched
 * process_vm_readv per level for all threads; lay_decode() turns a copy
 * into a uniform context after the threads run again. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "elf-tls.h"
#include "process-ctx.h"
#include "thread-record.h"
#include "tls-math.h"

enum lay_kind { LAY_OTEL = 0, LAY_ELASTIC = 1, LAY_CUSTOM_LABELS = 2, LAY_N };

#define LAY_MASK(k)  (1u << (k))
#define LAY_MASK_ALL ((1u << LAY_N) - 1)

#define LAY_ELASTIC_SYMBOL  "elastic_apm_profiling_correlation_tls_v1"
#define LAY_ELASTIC_STORAGE "elastic_apm_profiling_correlation_process_storage_v1"
#define LAY_CL_SYMBOL       "custom_labels_current_set"
#define LAY_CL_ABI_SYMBOL   "custom_labels_abi_version"

/* Elastic's packed TLS buffer (ApmCorrelationBuf). */
#define LAY_ELASTIC_SIZE 37
/* custom-labels: at most this many labels, and this many bytes of each
 * key and value, are copied per thread; more is flagged as truncated. */
#define LAY_CL_MAX_LABELS 16
#define LAY_CL_STR_MAX    255
/* Decoded attributes per context (the OTEP allows 256 key indexes). */
#define LAY_ATTRS_MAX 256

/* The TLS variable's name ("otel_thread_ctx_v1", ...). */
const char *lay_symbol(enum lay_kind k);

struct lay_layout {
	bool present; /* the variable was found */
	struct etls_symbol sym;
	struct tlsm_access acc; /* TLSM_UNRESOLVED until lay_resolve() */
	/* custom-labels: address of custom_labels_abi_version and its value
	 * (layout unusable unless 1); Elastic: address of the process
	 * storage pointer (0 if the object does not define it). */
	uint64_t data_addr;
	uint32_t abi_version;
	bool abi_ok;
	/* lay_slots_mark(): the slot's words (etls_slot_words()) and the
	 * error of reading them, when the layout was last resolved */
	bool slot_marked;
	int slot_err;
	uint64_t slot_words[2];
	/* and what the access depends on besides (etls_slot_gen()) */
	int gen_err;
	uint64_t gen_words[3];
};

struct lay_proc {
	pid_t pid;
	unsigned mask; /* LAY_MASK() of the layouts present */
	struct lay_layout l[LAY_N];
};

/* Look for the layouts in want (LAY_MASK bits) among the objects mapped
 * in pid; runs while the target runs.  Returns 0 if at least one was
 * found, -ENOENT if none, or the first error other than "not defined"
 * (-ESRCH, -EACCES, -EPROTONOSUPPORT, ...). */
int lay_find(pid_t pid, unsigned want, struct lay_proc *lp);
/* The same on maps and objects already read (etls_proc_load()). */
int lay_find_in(struct etls_proc *ep, pid_t pid, unsigned want, struct lay_proc *lp);
/* Say to ep that the symbols of the layouts in want will be looked up
 * (etls_proc_want()), before the first lookup in it. */
void lay_want(struct etls_proc *ep, unsigned want);

/* Read the loader-written slots of every present layout (and the
 * custom-labels ABI version).  Call while the threads are stopped.
 * Returns the mask of layouts whose slot is resolved. */
unsigned lay_resolve(struct lay_proc *lp);

/* Note the slot words of every present layout (with the threads stopped,
 * right after lay_resolve()), for lay_slots_changed(). */
void lay_slots_mark(struct lay_proc *lp);
/* Whether the slot words of a marked layout differ from those noted (or
 * became readable or unreadable): the loader rewrote them, i.e. the
 * defining library was unloaded and perhaps loaded again elsewhere, and
 * what lay_find() found and lay_resolve() worked out is stale.  For a
 * dynamic access, also whether the module's generation (or the TLSDESC
 * argument) changed under the same words: the library was loaded again in
 * the same place with the same module id (etls_slot_gen()).  One read per
 * present layout, one more for TLSDESC dynamic, a few (the slotinfo walk)
 * for general dynamic; call with the threads stopped. */
bool lay_slots_changed(const struct lay_proc *lp);

/* The raw copy of one thread's context in one layout. */
enum lay_state {
	LAY_ABSENT = 0, /* layout not present or not asked for */
	LAY_NO_BLOCK,   /* the thread has no TLS block for the module yet */
	LAY_NULL,       /* the TLS pointer is NULL: no context */
	LAY_COPIED,     /* the context bytes were copied */
	LAY_ERROR,      /* a read failed (err) */
};

/* Bytes copied per thread and layout: an OTEP record up to here (more
 * than the recommended maximum of 640; larger ones are cut and marked
 * truncated), or a custom-labels labelset, its label array and as much
 * of the keys and values as fits. */
#define LAY_RAW_MAX 2048

struct lay_cl_label {
	uint16_t koff, klen; /* in buf; klen copied (cut at LAY_CL_STR_MAX) */
	uint16_t voff, vlen;
	bool key_null; /* key.buf == NULL: the label is to be ignored */
	bool cut;      /* key or value longer than what was copied */
};

struct lay_raw {
	enum lay_state state;
	int err;            /* negative errno for LAY_ERROR */
	uint64_t slot_addr; /* address of the TLS variable in this thread */
	uint64_t ptr;       /* its value */
	/* OTEP record (header + attrs-data up to LAY_RAW_MAX bytes), the
	 * 37-byte Elastic buffer, or the custom-labels labelset (24 bytes),
	 * its label array (at 24) and the label strings (after the array). */
	uint8_t buf[LAY_RAW_MAX];
	size_t len;
	bool truncated;    /* attributes or labels cut short */
	uint64_t cl_count; /* custom-labels: count as read */
	unsigned cl_n;     /* labels copied (<= LAY_CL_MAX_LABELS) */
	struct lay_cl_label cl[LAY_CL_MAX_LABELS];
};

/* Copy the contexts of n stopped threads (thread pointers tps[i]) in the
 * layouts of want that are resolved; out has n * LAY_N entries, thread i
 * layout k at out[i * LAY_N + k].  Every pointer chase is bounded. */
void lay_read(const struct lay_proc *lp,
	      unsigned want,
	      const uint64_t *tps,
	      size_t n,
	      struct lay_raw *out);

struct lay_attr {
	const uint8_t *key; /* NULL: unknown OTEP key index (see index) */
	size_t klen;
	const uint8_t *val;
	size_t vlen;
	unsigned index; /* OTEP key index */
};

/* A decoded context, pointing into the lay_raw (and the key map). */
struct lay_ctx {
	enum lay_kind kind;
	bool valid;         /* a usable context (see lay_decode) */
	unsigned raw_valid; /* OTEP valid byte, Elastic valid byte */
	bool has_trace;     /* trace_id/span_id/flags are set */
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t flags;
	bool has_txn; /* Elastic transaction (local root span) id */
	uint8_t txn_id[8];
	unsigned minor_version; /* Elastic layout-minor-version */
	bool truncated;         /* attributes cut short */
	bool unknown_keys;      /* OTEP: a key index outside the key map */
	unsigned n_attrs;
	struct lay_attr attrs[LAY_ATTRS_MAX];
};

/* Decode a copied context of layout k.  pd (may be NULL) gives the OTEP
 * key map.  valid is: OTEP valid == 1; Elastic valid != 0 (has_trace
 * when trace-present != 0); custom-labels a non-NULL labelset (keys with
 * a NULL buffer skipped, the first of repeated keys wins; labels named
 * "trace_id" and "span_id" holding lowercase hex of the right length
 * also fill trace_id/span_id).  Returns 0, or -ENODATA when raw holds no
 * context. */
int lay_decode(enum lay_kind k,
	       const struct lay_raw *raw,
	       const struct pctx_decoded *pd,
	       struct lay_ctx *out);

/* Whether the copied OTEP record in raw (layout LAY_OTEL) is valid and
 * uses an attribute index the key map of pd (may be NULL) does not have:
 * the map grew since pd was read (OTEP-4947: refresh it before going on).
 * Walks the entries only, without decoding them. */
bool lay_otel_unknown_keys(const struct lay_raw *raw, const struct pctx_decoded *pd);

/* Service name and environment from Elastic's process storage (the
 * non-thread-local elastic_apm_profiling_correlation_process_storage_v1),
 * NUL-terminated and cut to the caps.  Needs no stop (the pointer is only
 * set once the storage is complete).  Returns 0, -ENOENT (no storage), or
 * another negative errno. */
int lay_elastic_storage(const struct lay_proc *lp,
			char *service,
			size_t service_cap,
			char *env,
			size_t env_cap);
