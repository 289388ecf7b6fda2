/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* OTEL_RESOURCE_ATTRIBUTES (the OTel SDK environment variable
 * specification): key1=value1,key2=value2 with percent-encoded keys and
 * values, as the shim reads it for the process context's resource; its
 * behaviour is described in ctxshim(7).  Pure code: no I/O, no logging, no
 * allocation, no state, so the shim's constructor and the fuzzer
 * (test/fuzz/fuzz-resource.c) run the same parser. */

#include <stddef.h>
#include <sys/types.h>

/* The longest key and value kept, in bytes after decoding. */
#define RESENV_KEY_MAX   255
#define RESENV_VALUE_MAX 1023

/* Why a variable is malformed (and so discarded whole). */
enum resenv_bad {
	RESENV_OK,
	RESENV_NO_EQ,     /* an entry has no '=' */
	RESENV_EMPTY_KEY, /* an entry's key is empty (or blank) */
	RESENV_BAD_KEY,   /* a bad %-escape, a NUL or bytes not UTF-8 in a key */
	RESENV_BAD_VALUE, /* the same in a value */
};

/* A kept entry: NUL-terminated, decoded, in the caller's text buffer. */
struct resenv_kv {
	const char *key;
	const char *value;
};

struct resenv_result {
	size_t n;        /* entries in kv[]: distinct keys, first-seen order */
	size_t too_long; /* entries skipped: key or value over the limits */
	size_t skipped;  /* entries skipped: past room or text_cap */
	/* A malformed variable: which entry, counting every comma-separated
	 * field (blank ones too) from 1, and why; else 0 and RESENV_OK. */
	size_t bad_entry;
	enum resenv_bad bad;
};

/* Parses s (NUL-terminated; NULL is an empty variable).  Trims blanks
 * (space, tab) around each entry, key and value, skips blank entries, and
 * keeps up to room distinct keys (the last value of a repeated key wins)
 * whose key and value, each NUL-terminated, are appended to text past
 * *text_len (text_cap bytes in all).  An entry past room or text_cap is
 * skipped, not the rest, and a repeated key that finds no text room keeps
 * the value it had.  Returns 0 and fills kv[0..res->n) and *text_len, or
 * -EINVAL when an entry cannot be decoded: the whole variable is then
 * refused, *text_len is left alone, and kv and the text past *text_len are
 * scratch.  res is filled in both cases (the caller logs from it); on
 * -EINVAL too_long counts the entries skipped before the malformed one. */
int resenv_parse(const char *s,
		 struct resenv_kv *kv,
		 size_t room,
		 char *text,
		 size_t text_cap,
		 size_t *text_len,
		 struct resenv_result *res);
