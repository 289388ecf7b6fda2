/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Text (py-spy dump style) and JSON rendering of a struct dump.  Every
 * string that came from the target is escaped: no raw control bytes, no
 * bidirectional or invisible format characters and no invalid UTF-8 reach
 * the output.  The JSON field names are frozen in
 * doc/ctxdump.1. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dump.h"

struct output_opts {
	bool quiet;   /* only threads with a valid record */
	bool verbose; /* text: stop window, TLS details */
};

void output_text(FILE *f, const struct dump *d, const struct output_opts *o);
void output_json(FILE *f, const struct dump *d, const struct output_opts *o);

/* Why an object of the target could not be opened (etls_symbol's
 * unopenable_err, a negative errno): strerror(), or what -ESTALE means
 * there.  Shared with ctxdump.c's warnings, so they say it alike. */
const char *output_open_error(int err);

/* What an object defines otel_thread_ctx_v1 as when not as the 8-byte
 * thread-local pointer (etls_symbol's misdef_*: "a function", "a
 * thread-local of 4 bytes", ...), into buf of n bytes.  Shared with
 * ctxdump.c's warning, so that it and the symbol line say it alike. */
const char *output_misdef_what(const struct etls_symbol *s, char *buf, size_t n);

/* The ELF symbol type ty (STT_*) as readelf -s names it ("STT_FUNC"), for
 * whoever looks the object up; shared with ctxdump.c's warnings. */
const char *output_elf_type_name(unsigned ty);

/* Whether code point cp is never printed as is: a control (C0, DEL, C1)
 * or a Unicode format character that reorders or hides text on a
 * terminal (bidirectional controls, zero-width characters, line and
 * paragraph separators, BOM, tag characters).  report's --folded
 * replaces them too. */
bool output_cp_escaped(uint32_t cp);

/* Escapers, exposed for the tests of the tool. */
/* Text: the code points of output_cp_escaped(), backslash (and '"' if
 * quote) and bytes that are not valid UTF-8 become \xNN (each byte of
 * the character) / \\ / \". */
void output_text_escape(FILE *f, const uint8_t *s, size_t n, bool quote);
/* JSON string with quotes; the code points of output_cp_escaped() become
 * \uXXXX (a surrogate pair outside the BMP), invalid UTF-8 becomes U+FFFD. */
void output_json_string(FILE *f, const uint8_t *s, size_t n);

/* Length of the well-formed UTF-8 sequence at s (1-4), 0 if invalid;
 * *cp receives the code point. */
size_t output_utf8_next(const uint8_t *s, size_t n, uint32_t *cp);

/* How many of the n bytes at s to keep when cutting them to at most keep
 * (<= n) bytes: keep, or up to 3 fewer so that a UTF-8 character is not
 * cut in two (its first bytes alone would show as an escape or U+FFFD). */
size_t output_utf8_cut(const uint8_t *s, size_t n, size_t keep);
