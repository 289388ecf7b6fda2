/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The file `ctxdump record` writes and `ctxdump report` reads (format
 * described in doc/ctxdump.1, FILE FORMAT):
 *
 *   header  8 bytes "CTXDPROF", u16 version (1), u16 header size (16),
 *           u32 flags (0); little endian
 *   records u32 prefix = type | payload length << 8, then the payload.
 *
 * Payload integers are unsigned LEB128 ("varints"); byte strings are a
 * varint length and the bytes; ids (trace, span) are raw bytes.  Strings,
 * frames, stacks and contexts are defined once by a record with a fresh id
 * (counting from 1) before the first sample that uses them, so samples are
 * a few bytes each and a reader can process the file in one pass.  A
 * reader skips record types it does not know; a file that ends inside a
 * record (recording killed) is read up to the last whole record.
 *
 * PFILE_LAYOUT records describe the layouts the samples after them were
 * read through: one per layout found, before the first sample, and one
 * more whenever a rediscovery (the writer library dlclose()d, another
 * one dlopen()ed) finds a layout of that kind with another module, TLS
 * model, ABI version or readable flag.  A later record of a kind
 * supersedes the earlier one for the samples that follow it, never for
 * those before; a kind with no later record keeps its last one.  Files
 * of older recorders hold one per kind and read the same way.
 *
 * PFILE_EXEC (a record type added without a version change: older
 * readers skip it) says the target ran execve() between the samples
 * before it and those after it: time since the start, the new comm and
 * command line.  What a file says of the process (PCTX, RESOURCE,
 * LAYOUT, THREAD) holds from one EXEC to the next, and the records that
 * follow it describe the new image again; no frame, stack or context
 * defined before it is used after it.  No sample of a round that an exec
 * straddled is written. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PFILE_MAGIC       "CTXDPROF"
#define PFILE_VERSION     1
#define PFILE_HEADER_SIZE 16
/* Largest payload: the 24-bit length field. */
#define PFILE_PAYLOAD_MAX ((1u << 24) - 1)
/* What a reader takes: what a recorder writes (at most 1024 frames a
 * stack, record.c MAX_FRAMES; symbols and modules of at most 255 bytes,
 * unwind.h; attribute values of at most 255, TREC_VALUE_MAX and
 * LAY_CL_STR_MAX).  A file is hostile input, and a few bytes of it must
 * not cost a reader more than that: every sample walks its stack and
 * every frame of a report spells out its name, so these two bound what
 * one sample costs.  A longer stack is a malformed record; a longer
 * string is cut (PFILE_STRING_CUT marks the cut). */
#define PFILE_STACK_MAX  1024
#define PFILE_STRING_MAX 256
#define PFILE_STRING_CUT "..."
/* A layout's module path is cut at PATH_MAX (what a recorder writes,
 * etls_symbol.module); a reader keeps at most PFILE_LAYOUT_MAX distinct
 * layouts (each LAYOUT record is compared with those kept) and counts the
 * records of any further ones. */
#define PFILE_PATH_MAX   4096
#define PFILE_LAYOUT_MAX 64

enum pfile_type {
	PFILE_INFO = 1,     /* recording parameters and the target */
	PFILE_PCTX = 2,     /* the raw OTEP-4719 process-context payload */
	PFILE_LAYOUT = 3,   /* a thread-context layout found in the target */
	PFILE_RESOURCE = 4, /* a resource attribute not from the process context */
	PFILE_THREAD = 5,   /* a thread's name */
	PFILE_STRING = 6,   /* id, bytes */
	PFILE_FRAME = 7,    /* id, ip, symbol, module, offset, flags */
	PFILE_STACK = 8,    /* id, flags, frame ids innermost first */
	PFILE_CTX = 9,      /* id, layout, flags, ids, attributes */
	PFILE_ROUND = 10,   /* one stop of all threads: time, stop window */
	PFILE_SAMPLE = 11,  /* tid, state, stack id, context ids */
	PFILE_END = 12,     /* totals, why recording ended */
	PFILE_EXEC = 13,    /* the target ran execve(): a new program image */
};

/* PFILE_FRAME flags */
#define PFILE_FRAME_SIGNAL 0x1u /* signal trampoline */
#define PFILE_FRAME_DYNSYM 0x2u /* symbol from .dynsym only */
/* PFILE_STACK flags */
#define PFILE_STACK_TRUNCATED 0x1u /* unwinding stopped before the outermost frame */
/* Frames from index g (innermost first) on were guessed (found past a
 * function without unwind information, STACK_FRAME_GUESSED); g follows
 * the frame ids.  A reader that does not know it ignores the field. */
#define PFILE_STACK_GUESSED 0x2u
/* PFILE_CTX flags */
#define PFILE_CTX_VALID     0x1u
#define PFILE_CTX_TRACE     0x2u /* trace_id / span_id / trace flags set */
#define PFILE_CTX_TXN       0x4u /* Elastic transaction id follows */
#define PFILE_CTX_TRUNCATED 0x8u /* attributes cut short */

/* PFILE_END reasons */
enum pfile_end_reason {
	PFILE_END_DURATION = 0,
	PFILE_END_SIGNAL = 1,
	PFILE_END_EXITED = 2,
	PFILE_END_ERROR = 3,
	/* the process ran execve() of a 32-bit program (after an EXEC) */
	PFILE_END_ELF32 = 4,
};

/* ---- writing ---- */

struct pfile_w {
	FILE *f;
	uint8_t *buf; /* the record being built */
	size_t len, cap;
	unsigned type;
	int err; /* first error (negative errno); everything after is dropped */
	uint64_t bytes;
};

int pfile_w_open(struct pfile_w *w, FILE *f);
void pfile_w_close(struct pfile_w *w);
void pfile_w_begin(struct pfile_w *w, unsigned type);
void pfile_w_u(struct pfile_w *w, uint64_t v);
void pfile_w_raw(struct pfile_w *w, const void *p, size_t n);
void pfile_w_bytes(struct pfile_w *w, const void *p, size_t n);
/* Append the record to the stream; returns 0 or w->err. */
int pfile_w_end(struct pfile_w *w);

/* ---- reading ---- */

struct pfile_r {
	const uint8_t *p, *end;
	bool bad; /* read past the end or a malformed varint */
};

uint64_t pfile_r_u(struct pfile_r *r);
/* A varint that must fit in 32 bits (ids, counts). */
uint32_t pfile_r_u32(struct pfile_r *r);
bool pfile_r_raw(struct pfile_r *r, void *out, size_t n);
bool pfile_r_bytes(struct pfile_r *r, const uint8_t **p, size_t *n);

/* Check the file header.  Returns its size (the offset of the first
 * record), -ENODATA (an empty file), -EBADMSG (not a ctxdump recording,
 * or version 0), -EPROTONOSUPPORT (a newer version) or the negative errno
 * of a failed read (EISDIR for a directory). */
int pfile_read_header(FILE *f);

/* Next record into *buf (grown as needed).  Returns 1, 0 at the end of
 * the file, PFILE_NEXT_HEADER where the header of another recording
 * starts instead of a record, -EBADMSG for a record cut short, or the
 * negative errno of a failed read (never taken for the end of the file). */
#define PFILE_NEXT_HEADER 2
int pfile_next(FILE *f, unsigned *type, uint8_t **buf, size_t *cap, size_t *len);
