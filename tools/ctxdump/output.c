/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "output.h"

#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <string.h>

#include "cli.h"
#include "w3c.h"

/* Everything goes through a buffer of our own (struct ob) and reaches
 * the FILE in large writes: a 1000-thread dump is half a megabyte in
 * tens of thousands of pieces of a few bytes (keys, indents, numbers,
 * short names), and putc_unlocked() costs several instructions per byte
 * where a copy into our buffer costs a fraction of one (callgrind, the
 * JSON of 1000 threads: 8.1 million instructions written byte by byte
 * into the stdio buffer, 3.8 million now; 0.74 -> about 0.3 ms). */
struct ob {
	FILE *f;
	char *start, *p, *end; /* the buffer, its first free byte, its end */
};

static void
ob_init(struct ob *o, FILE *f, char *buf, size_t size)
{
	o->f = f;
	o->start = o->p = buf;
	o->end = buf + size;
}

static void
ob_flush(struct ob *o)
{
	if (o->p > o->start)
		fwrite_unlocked(o->start, 1, (size_t)(o->p - o->start), o->f);
	o->p = o->start;
}

/* Room for n more bytes at o->p; false if n is larger than the whole
 * buffer (the caller then writes to o->f itself, after the flush). */
static inline bool
ob_room(struct ob *o, size_t n)
{
	if ((size_t)(o->end - o->p) >= n)
		return true;
	ob_flush(o);
	return (size_t)(o->end - o->p) >= n;
}

static inline void
ob_write(struct ob *o, const void *s, size_t n)
{
	if (!ob_room(o, n)) {
		fwrite_unlocked(s, 1, n, o->f);
		return;
	}
	memcpy(o->p, s, n);
	o->p += n;
}

static inline void
ob_putc(struct ob *o, char c)
{
	if (o->p == o->end)
		ob_flush(o);
	*o->p++ = c;
}

static inline void
ob_puts(struct ob *o, const char *s)
{
	ob_write(o, s, strlen(s));
}

static void ob_printf(struct ob *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void
ob_printf(struct ob *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(o->p, (size_t)(o->end - o->p), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < (size_t)(o->end - o->p)) {
		o->p += n;
		return;
	}
	/* did not fit: again after a flush, or straight to the file */
	ob_flush(o);
	va_start(ap, fmt);
	if ((size_t)n < (size_t)(o->end - o->p)) {
		(void)vsnprintf(o->p, (size_t)(o->end - o->p), fmt, ap);
		o->p += n;
	} else {
		(void)vfprintf(o->f, fmt, ap);
	}
	va_end(ap);
}

/* Decimal or hex digits of v, without printf(): per thread, fprintf()
 * cost more than the rest of its output (and a division by a variable
 * base more than the rest of this). */
static void
put_u64(struct ob *f, uint64_t v, unsigned base)
{
	char buf[24], *p = buf + sizeof(buf);

	if (base == 16) {
		do {
			*--p = "0123456789abcdef"[v & 15];
			v >>= 4;
		} while (v);
	} else {
		do {
			*--p = (char)('0' + v % 10);
			v /= 10;
		} while (v);
	}
	ob_write(f, p, (size_t)(buf + sizeof(buf) - p));
}

size_t
output_utf8_cut(const uint8_t *s, size_t n, size_t keep)
{
	size_t i;

	/* the first byte left out a continuation byte: back off to the
	 * character's first (what is not UTF-8 anyway is escaped as is) */
	for (i = 0; i < 3 && keep > 0 && keep < n && (s[keep] & 0xc0) == 0x80; i++)
		keep--;
	return keep;
}

size_t
output_utf8_next(const uint8_t *s, size_t n, uint32_t *cp)
{
	uint32_t c;
	size_t len, i;

	if (n == 0)
		return 0;
	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
		c = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		len = 3;
		c = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		c = s[0] & 0x07;
	} else {
		return 0; /* continuation byte, overlong C0/C1 lead, > U+10FFFF */
	}
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	/* overlong forms, surrogates, beyond Unicode */
	if ((len == 3 && c < 0x800) || (len == 4 && c < 0x10000) || c > 0x10ffff ||
	    (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

bool
output_cp_escaped(uint32_t cp)
{
	/* C0, DEL, C1; then the format characters that make a terminal show
	 * text in another order or other than its bytes ("Trojan Source",
	 * CVE-2021-42574): ALM, ZWSP ZWNJ ZWJ LRM RLM, the line and paragraph
	 * separators, LRE RLE PDF LRO RLO, WJ, the invisible operators, LRI
	 * RLI FSI PDI and the deprecated format controls, the BOM (ZWNBSP),
	 * and the tag characters, invisible copies of ASCII that can carry
	 * hidden text ("ASCII smuggling") */
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x061c ||
	       (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) ||
	       (cp >= 0x2060 && cp <= 0x206f) || cp == 0xfeff ||
	       (cp >= 0xe0000 && cp <= 0xe007f);
}

/* Printable ASCII that needs no escape in text (quote: '"' escaped too)
 * or in JSON: the common case, written in runs rather than byte by byte
 * (a 1000-thread dump prints half a megabyte). */
static size_t
plain_run(const uint8_t *s, size_t n, bool quote)
{
	size_t i = 0;

	while (i < n && s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\\' &&
	       !(quote && s[i] == '"'))
		i++;
	return i;
}

static void
ob_text_escape(struct ob *f, const uint8_t *s, size_t n, bool quote)
{
	size_t i = 0;

	while (i < n) {
		uint32_t cp;
		size_t l, k, run = plain_run(s + i, n - i, quote);

		if (run) {
			ob_write(f, s + i, run);
			i += run;
			continue;
		}
		l = output_utf8_next(s + i, n - i, &cp);

		if (l == 0 || output_cp_escaped(cp)) {
			/* escape every byte of the offending sequence */
			for (k = 0; k < (l ? l : 1); k++)
				ob_printf(f, "\\x%02x", s[i + k]);
			i += l ? l : 1;
			continue;
		}
		if (cp == '\\')
			ob_puts(f, "\\\\");
		else if (quote && cp == '"')
			ob_puts(f, "\\\"");
		else
			ob_write(f, s + i, l);
		i += l;
	}
}

static void
ob_json_string(struct ob *f, const uint8_t *s, size_t n)
{
	size_t i = 0;

	ob_putc(f, '"');
	while (i < n) {
		uint32_t cp;
		size_t l, run = plain_run(s + i, n - i, true);

		if (run) {
			ob_write(f, s + i, run);
			i += run;
			continue;
		}
		l = output_utf8_next(s + i, n - i, &cp);
		if (l == 0) {
			ob_puts(f, "\\ufffd");
			i++;
			continue;
		}
		switch (cp) {
		case '"':
			ob_puts(f, "\\\"");
			break;
		case '\\':
			ob_puts(f, "\\\\");
			break;
		case '\n':
			ob_puts(f, "\\n");
			break;
		case '\r':
			ob_puts(f, "\\r");
			break;
		case '\t':
			ob_puts(f, "\\t");
			break;
		case '\b':
			ob_puts(f, "\\b");
			break;
		case '\f':
			ob_puts(f, "\\f");
			break;
		default:
			/* the same string to a JSON parser, but not shown as is
			 * by a viewer in a terminal (U+2028/2029 are also line
			 * breaks to JavaScript) */
			if (output_cp_escaped(cp) && cp > 0xffff)
				/* outside the BMP: a surrogate pair */
				ob_printf(f, "\\u%04x\\u%04x",
					  0xd800 + ((unsigned)(cp - 0x10000) >> 10),
					  0xdc00 + ((unsigned)(cp - 0x10000) & 0x3ff));
			else if (output_cp_escaped(cp))
				ob_printf(f, "\\u%04x", (unsigned)cp);
			else
				ob_write(f, s + i, l);
		}
		i += l;
	}
	ob_putc(f, '"');
}

static void
text_cstr(struct ob *f, const char *s)
{
	ob_text_escape(f, (const uint8_t *)s, strlen(s), false);
}

static const char *
state_word(char st)
{
	switch (st) {
	case 'R':
		return "running";
	case 'S':
		return "sleeping";
	case 'D':
		return "disk-sleep";
	case 'T':
		return "stopped";
	case 't':
		return "tracing-stop";
	case 'Z':
		return "zombie";
	case 'X':
		return "dead";
	case 'I':
		return "idle";
	case 'P':
		return "parked";
	case 'W':
		return "waking";
	}
	return "unknown";
}

/* Names of the layouts (layouts.h), here so that this file links alone. */
static const char *const alt_symbol[LAY_N] = {
	[LAY_OTEL] = OTEL_THREAD_CTX_SYMBOL,
	[LAY_ELASTIC] = LAY_ELASTIC_SYMBOL,
	[LAY_CUSTOM_LABELS] = LAY_CL_SYMBOL,
};

const char *
output_open_error(int err)
{
	/* remote_open_mapped(): the inode at the path is not the mapped
	 * one, and /proc/PID/map_files could not be opened either (or
	 * showed another file: mapped there since maps was read) */
	if (err == -ESTALE)
		return "the file at its path is not the one mapped (replaced since "
		       "it was loaded)";
	if (err == ETLS_ERR_SHORT)
		return "the file is shorter than its mapping (truncated since it was "
		       "loaded)";
	return strerror(-err);
}

/* otel_thread_ctx_v1 was not found, but not every object was looked at:
 * some could not be opened, and it may be defined in one of them.  "Not
 * found in any loaded object" would be false then, as "Process context:
 * none" is for a context that could not be read. */
static bool
symbol_unread(const struct dump *d)
{
	return !d->has_symbol && d->sym.n_unopenable > 0;
}

/* Why (symbol_unread()): the counts, then the first object that could
 * not be opened, into buf (raw: the path is the target's, and the callers
 * escape it all; the rest is ours, with nothing to escape).  Room for a
 * path of PATH_MAX bytes and the words around it. */
#define SYMBOL_WHY_MAX (PATH_MAX + 256)

static const char *
symbol_why(const struct dump *d, char *buf)
{
	const struct etls_symbol *s = &d->sym;
	int n;

	if (s->n_unopenable >= s->n_objects)
		n = snprintf(buf, SYMBOL_WHY_MAX,
			     "none of its %u object%s could be opened", s->n_objects,
			     CLI_PL(s->n_objects));
	else
		n = snprintf(buf, SYMBOL_WHY_MAX,
			     "%u of its %u object%s could not be opened",
			     s->n_unopenable, s->n_objects, CLI_PL(s->n_objects));
	(void)snprintf(buf + n, SYMBOL_WHY_MAX - (size_t)n, ", the first %s%s: %s",
		       s->unopenable, s->unopenable_deleted ? " (deleted)" : "",
		       output_open_error(s->unopenable_err));
	return buf;
}

const char *
output_misdef_what(const struct etls_symbol *s, char *buf, size_t n)
{
	unsigned ty = s->misdef_type;

	if (ty == STT_TLS)
		(void)snprintf(buf, n, "a thread-local of %" PRIu64 " bytes",
			       s->misdef_size);
	else if (ty == STT_OBJECT || ty == STT_COMMON)
		(void)snprintf(buf, n,
			       "a global (not thread-local) object of %" PRIu64
			       " bytes",
			       s->misdef_size);
	else
		(void)snprintf(buf, n, "%s",
			       ty == STT_FUNC || ty == STT_GNU_IFUNC
				       ? "a function"
				       : "a symbol without a type");
	return buf;
}

/* Why no object of a 32-bit process was looked at (d->exe_elf32): the
 * text line's parentheses and JSON's symbol_error. */
#define SYMBOL_ELF32_WHY "a 32-bit process: ctxdump reads 64-bit processes only"

/* otel_thread_ctx_v1 was not found as the 8-byte thread-local pointer,
 * but an object defines the name as something else: "not found in any
 * loaded object" would be false (and send the user looking for a missing
 * writer). */
static bool
symbol_misdefined(const struct dump *d)
{
	return !d->has_symbol && !symbol_unread(d) && d->sym.has_misdef;
}

const char *
output_elf_type_name(unsigned ty)
{
	switch (ty) {
	case STT_TLS:
		return "STT_TLS";
	case STT_OBJECT:
		return "STT_OBJECT";
	case STT_COMMON:
		return "STT_COMMON";
	case STT_FUNC:
		return "STT_FUNC";
	case STT_GNU_IFUNC:
		return "STT_GNU_IFUNC";
	default:
		return "STT_NOTYPE";
	}
}

/* Where the name is defined and what as, raw (the path is the target's;
 * the callers escape it all), into buf of SYMBOL_WHY_MAX: of an only,
 * wrong definition, or with also (symbol_note) of one beside the valid
 * definition shown. */
static const char *
symbol_misdef_why(const struct dump *d, bool also, char *buf)
{
	char what[80];

	(void)snprintf(buf, SYMBOL_WHY_MAX,
		       "%sdefined in %s but not as the 8-byte thread-local pointer "
		       "(as %s, %s)",
		       also ? "also " : "", d->sym.misdef_module,
		       output_misdef_what(&d->sym, what, sizeof(what)),
		       output_elf_type_name(d->sym.misdef_type));
	return buf;
}

/* A valid definition is shown, and another object defines the name as
 * something else (etls_symbol's misdef_*): "symbol_note" says so. */
static bool
symbol_noted(const struct dump *d)
{
	return d->has_symbol && d->sym.has_misdef;
}

static bool
alt_valid(const struct dump_thread *t)
{
	unsigned i;

	for (i = 0; i < t->n_alt; i++)
		if (t->alt[i].ctx && t->alt[i].ctx->valid)
			return true;
	return false;
}

static bool
thread_has_valid(const struct dump *d, const struct dump_thread *t)
{
	return (t->has_record && t->hdr.valid == TREC_VALID) || alt_valid(t);
}

static bool
thread_shown(const struct dump *d,
	     const struct dump_thread *t,
	     const struct output_opts *o)
{
	return !o->quiet || thread_has_valid(d, t);
}

/* Name of attribute index key: from the key map, or NULL. */
static const struct pctx_str *
key_name(const struct dump *d, unsigned key)
{
	if (!d->pd || key >= d->pd->n_keys || d->pd->key_map[key].len == 0)
		return NULL;
	return &d->pd->key_map[key];
}

static const struct pctx_attr *
find_res(const struct dump *d, const char *key)
{
	return d->pd ? pctx_find_resource(d->pd, key) : NULL;
}

/* ---- text ---- */

static void
text_value(struct ob *f, const struct pctx_attr *a)
{
	switch (a->type) {
	case PCTX_V_STRING:
		ob_text_escape(f, a->str.ptr, a->str.len, false);
		break;
	case PCTX_V_BOOL:
		ob_puts(f, a->b ? "true" : "false");
		break;
	case PCTX_V_INT:
		ob_printf(f, "%" PRId64, a->i);
		break;
	case PCTX_V_DOUBLE:
		ob_printf(f, "%.17g", a->d);
		break;
	default:
		ob_puts(f, "(?)");
	}
}

static void
text_header(struct ob *f, const struct dump *d, const struct output_opts *o)
{
	static char why[SYMBOL_WHY_MAX];
	const struct pctx_attr *svc, *inst;
	size_t i;

	ob_printf(f, "Process %d:", (int)d->pid);
	for (i = 0; i < d->cmdline_len;) {
		size_t l = strnlen(d->cmdline + i, d->cmdline_len - i);

		ob_putc(f, ' ');
		ob_text_escape(f, (const uint8_t *)d->cmdline + i, l, false);
		i += l + 1;
	}
	if (d->cmdline_truncated)
		ob_printf(f, " (command line truncated: shown the first %zu bytes)",
			  d->cmdline_len);
	ob_putc(f, '\n');

	/* one that is there but could not be read is not "none": said as
	 * a thread that could not be read is (text_thread()) */
	if (!d->has_pctx && d->pctx_err) {
		ob_printf(f, "Process context: (not read: %s)\n", d->pctx_why);
	} else if (!d->has_pctx) {
		ob_puts(f, "Process context: none\n");
	} else {
		svc = find_res(d, "service.name");
		inst = find_res(d, "service.instance.id");
		ob_puts(f, "Service: ");
		if (svc)
			text_value(f, svc);
		else
			ob_puts(f, "(unknown)");
		if (inst) {
			ob_puts(f, " (instance ");
			text_value(f, inst);
			ob_putc(f, ')');
		}
		ob_putc(f, '\n');
		if (d->pd->has_threadlocal || d->pd->n_keys) {
			/* a key map without a schema version is used all the
			 * same (the attributes are named from it) */
			ob_puts(f, "Schema: ");
			if (d->pd->has_threadlocal)
				ob_text_escape(f, d->pd->schema_version.ptr,
					       d->pd->schema_version.len, false);
			else
				ob_puts(f, "none (no threadlocal.schema_version)");
			ob_puts(f, ", key map:");
			for (i = 0; i < d->pd->n_keys; i++) {
				ob_puts(f, i ? ", " : " ");
				ob_text_escape(f, d->pd->key_map[i].ptr,
					       d->pd->key_map[i].len, false);
			}
			if (d->pd->n_keys == 0)
				ob_puts(f, " (empty)");
			ob_putc(f, '\n');
		} else {
			ob_puts(f, "Schema: none (no threadlocal.* keys)\n");
		}
		if (o->verbose) {
			for (i = 0; i < d->pd->n_resource; i++) {
				ob_puts(f, "Resource: ");
				ob_text_escape(f, d->pd->resource[i].key.ptr,
					       d->pd->resource[i].key.len, false);
				ob_putc(f, '=');
				text_value(f, &d->pd->resource[i]);
				ob_putc(f, '\n');
			}
		}
	}

	if (!d->has_symbol && d->exe_elf32) {
		ob_puts(f, "Symbol: " OTEL_THREAD_CTX_SYMBOL
			   " not looked up (" SYMBOL_ELF32_WHY ")\n");
	} else if (symbol_unread(d) && d->sym.n_unopenable >= d->sym.n_objects) {
		ob_puts(f, "Symbol: " OTEL_THREAD_CTX_SYMBOL " not looked up (");
		text_cstr(f, symbol_why(d, why));
		ob_puts(f, ")\n");
	} else if (symbol_unread(d)) {
		ob_printf(f,
			  "Symbol: " OTEL_THREAD_CTX_SYMBOL
			  " not found in the %u object%s that could be opened (",
			  d->sym.n_objects - d->sym.n_unopenable,
			  CLI_PL(d->sym.n_objects - d->sym.n_unopenable));
		text_cstr(f, symbol_why(d, why));
		ob_puts(f, ")\n");
	} else if (symbol_misdefined(d)) {
		ob_puts(f, "Symbol: " OTEL_THREAD_CTX_SYMBOL " ");
		text_cstr(f, symbol_misdef_why(d, false, why));
		ob_putc(f, '\n');
	} else if (!d->has_symbol) {
		ob_puts(f, "Symbol: " OTEL_THREAD_CTX_SYMBOL
			   " not found in any loaded object\n");
	} else {
		ob_puts(f, "Symbol: " OTEL_THREAD_CTX_SYMBOL " in ");
		text_cstr(f, d->sym.module);
		ob_printf(f, " (%s%s)\n", tlsm_model_name(d->acc.model),
			  d->sym.from_symtab ? ", .symtab" : "");
	}
	if (d->alt) {
		unsigned k;

		for (k = 0; k < LAY_N; k++) {
			const struct lay_layout *l = &d->alt->l[k];

			if (!l->present)
				continue;
			ob_printf(f, "Symbol: %s in ", alt_symbol[k]);
			text_cstr(f, l->sym.module);
			ob_printf(f, " (%s", tlsm_model_name(l->acc.model));
			if (l->sym.from_symtab)
				ob_puts(f, ", .symtab");
			if (!l->abi_ok)
				ob_printf(f, ", ABI version %u: not read",
					  l->abi_version);
			ob_puts(f, ")\n");
		}
	}
	if (o->verbose && d->has_symbol) {
		if (d->acc.model == TLSM_TLSDESC_DYNAMIC || d->acc.model == TLSM_GD)
			ob_printf(f, "TLS: module %" PRIu64 ", offset 0x%" PRIx64 "\n",
				  d->acc.modid, d->acc.offset);
		else if (d->acc.model != TLSM_UNRESOLVED)
			ob_printf(f, "TLS: at thread pointer %+" PRId64 "\n",
				  d->acc.tpoff);
		if (d->sym.from_symtab)
			ob_puts(f, "TLS: symbol from .symtab (no object exports it "
				   "in .dynsym)\n");
		if (d->acc.model == TLSM_LE && d->sym.no_interp)
			ob_puts(f, "TLS: block placed by the libc of a statically "
				   "linked executable\n");
		if (d->sym.anon_slots)
			ob_printf(f,
				  "TLS: slot from a relocation without a symbol "
				  "(hidden alias or local-dynamic code), adjusted by "
				  "%+" PRId64 "\n",
				  d->sym.slot_adjust);
		if (d->sym.reloc_module[0]) {
			ob_puts(f, "TLS: slot from the relocations of ");
			text_cstr(f, d->sym.reloc_module);
			ob_putc(f, '\n');
		}
		ob_printf(
			f,
			"Objects: %u examined, %u unreadable, %u defining the symbol\n",
			d->sym.n_objects, d->sym.n_unopenable, d->sym.n_definitions);
	}
	if (o->verbose) {
		ob_printf(f, "Stopped: %zu thread%s for %.3f ms (%u scan%s",
			  d->n_stopped, d->n_stopped == 1 ? "" : "s",
			  (double)d->stopped_ns / 1e6, d->stop_rounds,
			  d->stop_rounds == 1 ? "" : "s");
		if (d->n_exited)
			ob_printf(f, "; %zu exited meanwhile, not shown", d->n_exited);
		ob_puts(f, ")\n");
	}
}

static void
text_frames(struct ob *f, const struct dump_thread *t)
{
	size_t i;

	if (t->stack_error) {
		ob_printf(f, "    (no stack: %s)\n", t->stack_error);
		return;
	}
	for (i = 0; i < t->n_frames; i++) {
		const struct stack_frame *fr = &t->frames[i];

		ob_printf(f, "    #%-2zu 0x%016" PRIx64 " ", i, fr->ip);
		if (fr->symbol[0]) {
			text_cstr(f, fr->symbol);
			ob_printf(f, "+0x%" PRIx64, fr->offset);
			if (fr->module[0]) {
				ob_puts(f, " (");
				text_cstr(f, fr->module);
				ob_putc(f, ')');
			}
		} else if (fr->module[0]) {
			ob_puts(f, "?? (");
			text_cstr(f, fr->module);
			ob_printf(f, "+0x%" PRIx64 ")", fr->offset);
		} else {
			ob_puts(f, "??");
		}
		if (fr->flags & STACK_FRAME_GUESSED)
			ob_puts(f, " [guessed]");
		ob_putc(f, '\n');
		if ((fr->flags & STACK_FRAME_TRUNCATED) && fr->end_reason)
			ob_printf(f, "    (stack ends: %s)\n", fr->end_reason);
	}
	if (t->frames_capped && t->n_frames >= DUMP_UNLIMITED_FRAMES)
		ob_printf(f,
			  "    (more frames: shown the first %zu, the most ctxdump "
			  "shows)\n",
			  t->n_frames);
	else if (t->frames_capped)
		ob_printf(f,
			  "    (more frames: shown the first %zu, use -n 0 for all)\n",
			  t->n_frames);
}

/* A thread's Elastic and custom-labels contexts, "[layout]" first. */
static void
text_alt(struct ob *f, const struct dump *d, const struct dump_thread *t)
{
	const struct lay_ctx *c;
	char hex[33];
	unsigned i, j;

	for (j = 0; j < t->n_alt; j++) {
		const struct dump_alt *a = &t->alt[j];
		const char *tag =
			a->kind == LAY_ELASTIC ? "[elastic]" : "[custom-labels]";

		c = a->ctx;
		if (a->state == LAY_ERROR) {
			ob_printf(f, "    %s (not read: %s)\n", tag, strerror(-a->err));
			continue;
		}
		if (!c)
			continue;
		if (a->kind == LAY_ELASTIC) {
			ob_puts(f, "    [elastic]");
			if (!c->valid) {
				ob_printf(f, " (being updated: valid=%u)\n",
					  c->raw_valid);
			} else if (!c->has_trace) {
				ob_puts(f, " (no trace)\n");
			} else {
				w3c_hex_encode(hex, c->trace_id, 16);
				hex[32] = '\0';
				ob_printf(f, " trace_id=%s", hex);
				w3c_hex_encode(hex, c->span_id, 8);
				hex[16] = '\0';
				ob_printf(f, " span_id=%s", hex);
				w3c_hex_encode(hex, c->txn_id, 8);
				hex[16] = '\0';
				ob_printf(f, " transaction_id=%s flags=%02x\n", hex,
					  c->flags);
			}
			continue;
		}
		if (!c->n_attrs)
			ob_puts(f, "    [custom-labels] (no labels)\n");
		for (i = 0; i < c->n_attrs; i++) {
			ob_puts(f, "    [custom-labels] ");
			ob_text_escape(f, c->attrs[i].key, c->attrs[i].klen, false);
			ob_putc(f, '=');
			ob_text_escape(f, c->attrs[i].val, c->attrs[i].vlen, false);
			ob_putc(f, '\n');
		}
		if (c->truncated)
			ob_printf(
				f,
				"    [custom-labels] (labels truncated: count=%" PRIu64
				")\n",
				a->cl_count);
	}
	(void)d;
}

static void
text_thread(struct ob *f, const struct dump *d, const struct dump_thread *t)
{
	char hex[33];
	unsigned i;

	/* the common lines without fprintf(): see put_u64() */
	ob_write(f, "Thread ", 7);
	put_u64(f, (uint64_t)t->tid, 10);
	ob_write(f, " \"", 2);
	ob_text_escape(f, (const uint8_t *)t->comm, strlen(t->comm), true);
	ob_write(f, "\" (", 3);
	ob_puts(f, state_word(t->state));
	ob_write(f, ")\n", 2);
	if (t->error) {
		ob_printf(f, "    (not read: %s)\n", t->error);
	} else if (!t->has_record) {
		/* with only another layout's context, that says it all */
		if (!alt_valid(t))
			ob_puts(f, "    (no context)\n");
	} else if (t->hdr.valid != TREC_VALID) {
		ob_printf(f, "    (record at 0x%" PRIx64 " not valid: valid=%u)\n",
			  t->record_addr, t->hdr.valid);
	} else {
		ob_write(f, "    trace_id=", 13);
		w3c_hex_encode(hex, t->hdr.trace_id, 16);
		ob_write(f, hex, 32);
		ob_write(f, " span_id=", 9);
		w3c_hex_encode(hex, t->hdr.span_id, 8);
		ob_write(f, hex, 16);
		ob_write(f, " flags=", 7);
		w3c_hex_encode(hex, &t->hdr.trace_flags, 1);
		ob_write(f, hex, 2);
		ob_putc(f, '\n');
		for (i = 0; i < t->n_dec; i++) {
			const struct trec_attr *a = &t->dec_attr[i];
			const struct pctx_str *k = key_name(d, a->key);

			ob_write(f, "    ", 4);
			if (k)
				ob_text_escape(f, k->ptr, k->len, false);
			else
				ob_printf(f, "#%u", a->key);
			ob_putc(f, '=');
			ob_text_escape(f, a->val, a->len, false);
			ob_putc(f, '\n');
		}
		if (t->attrs_capped || t->dec_truncated)
			ob_printf(f, "    (attributes truncated: attrs_data_size=%u)\n",
				  t->hdr.attrs_data_size);
	}
	text_alt(f, d, t);
	if (d->stacks)
		text_frames(f, t);
}

/* The buffer of a whole dump (the escapers exposed alone use a small
 * one). */
#define OB_SIZE (64u << 10)

void
output_text(FILE *file, const struct dump *d, const struct output_opts *o)
{
	static char buf[OB_SIZE];
	struct ob ob, *f = &ob;
	size_t i;
	bool first = true;

	ob_init(f, file, buf, sizeof(buf));
	/* Few writes, but glibc would lock each of them once the process
	 * has had a second thread. */
	flockfile(file);
	text_header(f, d, o);
	for (i = 0; i < d->n_threads; i++) {
		if (!thread_shown(d, &d->threads[i], o))
			continue;
		/* a blank line after the header, and between stacks */
		if (first || d->stacks)
			ob_putc(f, '\n');
		first = false;
		text_thread(f, d, &d->threads[i]);
	}
	ob_flush(f);
	funlockfile(file);
}

void
output_text_escape(FILE *file, const uint8_t *s, size_t n, bool quote)
{
	char buf[1024];
	struct ob ob;

	ob_init(&ob, file, buf, sizeof(buf));
	ob_text_escape(&ob, s, n, quote);
	ob_flush(&ob);
}

void
output_json_string(FILE *file, const uint8_t *s, size_t n)
{
	char buf[1024];
	struct ob ob;

	ob_init(&ob, file, buf, sizeof(buf));
	ob_json_string(&ob, s, n);
	ob_flush(&ob);
}

/* ---- JSON ---- */

/* Minimal pretty printer: one member per line, two-space indent. */
struct jw {
	struct ob *f;
	int depth;
	bool first;
};

static void
jw_nl(struct jw *w)
{
	/* the newline and the indent, up to 32 spaces at a time */
	static const char nl[] = "\n                                ";
	size_t left = (size_t)w->depth * 2, m = left < 32 ? left : 32;

	ob_write(w->f, nl, 1 + m);
	for (left -= m; left; left -= m) {
		m = left < 32 ? left : 32;
		ob_write(w->f, nl + 1, m);
	}
}

/* Start a value: comma and newline as needed. */
static void
jw_sep(struct jw *w)
{
	if (!w->first)
		ob_putc(w->f, ',');
	if (w->depth > 0)
		jw_nl(w);
	w->first = false;
}

static void
jw_open(struct jw *w, char c)
{
	ob_putc(w->f, c);
	w->depth++;
	w->first = true;
}

static void
jw_close(struct jw *w, char c)
{
	bool empty = w->first;

	w->depth--;
	if (!empty)
		jw_nl(w);
	ob_putc(w->f, c);
	w->first = false;
}

/* Key k (n bytes): one of our own names (plain ASCII), written without
 * the escaping scan, with the separator and indent before it in one
 * piece: keys are most of the pieces of a dump.  Inlined, so that every
 * copy has a constant length (the literal key of jw_key(); 64 spaces of
 * which the indent keeps what it needs) and needs no call. */
static const char jw_spaces[] =
	"                                                                ";
#define JW_SPACES (sizeof(jw_spaces) - 1) /* 64 */

static inline __attribute__((always_inline)) void
jw_keyn(struct jw *w, const char *k, size_t n)
{
	size_t indent = (size_t)w->depth * 2;
	char *p;

	/* room for ",\n", the 64 spaces, and '"', k, "\": " after indent */
	if (indent > JW_SPACES || !ob_room(w->f, n + JW_SPACES + 6)) {
		jw_sep(w);
		ob_putc(w->f, '"');
		ob_write(w->f, k, n);
		ob_write(w->f, "\": ", 3);
		w->first = true;
		return;
	}
	p = w->f->p;
	if (!w->first)
		*p++ = ',';
	*p++ = '\n';
	memcpy(p, jw_spaces, JW_SPACES);
	p += indent;
	*p++ = '"';
	memcpy(p, k, n);
	p += n;
	memcpy(p, "\": ", 3);
	w->f->p = p + 3;
	w->first = true; /* the value follows without separator */
}

#define jw_key(w, k) jw_keyn((w), k, sizeof(k) - 1)

/* A value follows jw_key() or jw_elem(), which already printed the
 * separator: only the state changes. */
static void
jw_val_start(struct jw *w)
{
	w->first = false;
}

/* Start an array element. */
static void
jw_elem(struct jw *w)
{
	jw_sep(w);
	w->first = true;
}

static void
jw_str(struct jw *w, const uint8_t *s, size_t n)
{
	jw_val_start(w);
	ob_json_string(w->f, s, n);
}

/* A string of ours known to need no escape (hex digits, our literals). */
static void
jw_plain(struct jw *w, const char *s, size_t n)
{
	jw_val_start(w);
	ob_putc(w->f, '"');
	ob_write(w->f, s, n);
	ob_putc(w->f, '"');
}

static void
jw_cstr(struct jw *w, const char *s)
{
	jw_str(w, (const uint8_t *)s, strlen(s));
}

/* A literal: true, false, null or a formatted number. */
static void
jw_raw(struct jw *w, const char *literal)
{
	jw_val_start(w);
	ob_puts(w->f, literal);
}

static void
jw_u64(struct jw *w, uint64_t v)
{
	jw_val_start(w);
	put_u64(w->f, v, 10);
}

static void
jw_i64(struct jw *w, int64_t v)
{
	jw_val_start(w);
	ob_printf(w->f, "%" PRId64, v);
}

static void
jw_addr(struct jw *w, uint64_t v)
{
	jw_val_start(w);
	ob_write(w->f, "\"0x", 3);
	put_u64(w->f, v, 16);
	ob_putc(w->f, '"');
}

static void
jw_obj_begin(struct jw *w)
{
	jw_val_start(w);
	jw_open(w, '{');
}

static void
jw_arr_begin(struct jw *w)
{
	jw_val_start(w);
	jw_open(w, '[');
}

static void
json_value(struct jw *w, const struct pctx_attr *a)
{
	char buf[64];

	switch (a->type) {
	case PCTX_V_STRING:
		jw_str(w, a->str.ptr, a->str.len);
		break;
	case PCTX_V_BOOL:
		jw_raw(w, a->b ? "true" : "false");
		break;
	case PCTX_V_INT:
		jw_i64(w, a->i);
		break;
	case PCTX_V_DOUBLE:
		/* JSON has no NaN or infinities */
		if (a->d != a->d || a->d > 1.7976931348623157e308 ||
		    a->d < -1.7976931348623157e308) {
			jw_raw(w, "null");
		} else {
			snprintf(buf, sizeof(buf), "%.17g", a->d);
			jw_raw(w, buf);
		}
		break;
	default:
		jw_raw(w, "null");
	}
}

/* Whether a and b are one JSON member name as ob_json_string() writes
 * them: each byte that is not UTF-8 becomes U+FFFD there, so "k\xff" and
 * "k\xfe" are one name. */
static bool
json_same_name(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
	size_t i = 0, j = 0;

	while (i < an && j < bn) {
		uint32_t ca = 0xfffd, cb = 0xfffd;
		size_t la = output_utf8_next(a + i, an - i, &ca);
		size_t lb = output_utf8_next(b + j, bn - j, &cb);

		if (!la) {
			ca = 0xfffd;
			la = 1;
		}
		if (!lb) {
			cb = 0xfffd;
			lb = 1;
		}
		if (ca != cb)
			return false;
		i += la;
		j += lb;
	}
	return i == an && j == bn;
}

static void
json_attr_object(struct jw *w, const struct pctx_attr *v, unsigned n, bool skip_tl)
{
	unsigned i;

	jw_obj_begin(w);
	for (i = 0; i < n; i++) {
		const struct pctx_attr *a = &v[i];
		unsigned j;

		if (skip_tl && a->key.len >= 12 &&
		    memcmp(a->key.ptr, "threadlocal.", 12) == 0)
			continue;
		/* A key the writer repeated (OTLP says keys MUST be unique):
		 * one member, the last, as pctx_find() and the usual JSON
		 * readers take it, not two members of one name.  n is at
		 * most PCTX_MAX_ATTRS. */
		for (j = i + 1; j < n; j++)
			if (json_same_name((const uint8_t *)v[j].key.ptr, v[j].key.len,
					   (const uint8_t *)a->key.ptr, a->key.len))
				break;
		if (j < n)
			continue;
		jw_sep(w);
		ob_json_string(w->f, a->key.ptr, a->key.len);
		ob_puts(w->f, ": ");
		w->first = true;
		json_value(w, a);
	}
	jw_close(w, '}');
}

static void
json_pctx(struct jw *w, const struct dump *d)
{
	unsigned i;

	jw_key(w, "process_context");
	if (!d->has_pctx) {
		jw_raw(w, "null");
		/* a key of its own, as a thread's "error": a reader that
		 * takes null for no context is not misled into more */
		if (d->pctx_err) {
			jw_key(w, "process_context_error");
			jw_cstr(w, d->pctx_why);
		}
		return;
	}
	jw_obj_begin(w);
	jw_key(w, "address");
	jw_addr(w, d->pctx.map_addr);
	jw_key(w, "published_at_ns");
	jw_u64(w, d->pctx.published_at_ns);
	jw_key(w, "schema_version");
	if (d->pd->has_threadlocal)
		jw_str(w, d->pd->schema_version.ptr, d->pd->schema_version.len);
	else
		jw_raw(w, "null");
	jw_key(w, "key_map");
	jw_arr_begin(w);
	for (i = 0; i < d->pd->n_keys; i++) {
		jw_elem(w);
		jw_str(w, d->pd->key_map[i].ptr, d->pd->key_map[i].len);
	}
	jw_close(w, ']');
	jw_key(w, "resource");
	json_attr_object(w, d->pd->resource, d->pd->n_resource, false);
	jw_key(w, "attributes");
	json_attr_object(w, d->pd->attrs, d->pd->n_attrs, true);
	jw_close(w, '}');
}

static void
json_symbol(struct jw *w, const struct dump *d)
{
	bool dyn = d->acc.model == TLSM_TLSDESC_DYNAMIC || d->acc.model == TLSM_GD;
	bool stat = d->acc.model == TLSM_TLSDESC_STATIC || d->acc.model == TLSM_IE ||
		    d->acc.model == TLSM_LE;

	jw_key(w, "symbol");
	if (!d->has_symbol) {
		jw_raw(w, "null");
		/* a key of its own, as "process_context_error": null alone
		 * says that no object defines it */
		if (d->exe_elf32) {
			jw_key(w, "symbol_error");
			jw_cstr(w, SYMBOL_ELF32_WHY);
		} else if (symbol_unread(d)) {
			static char why[SYMBOL_WHY_MAX];

			jw_key(w, "symbol_error");
			jw_cstr(w, symbol_why(d, why));
		} else if (symbol_misdefined(d)) {
			static char why[SYMBOL_WHY_MAX];

			jw_key(w, "symbol_error");
			jw_cstr(w, symbol_misdef_why(d, false, why));
		}
		return;
	}
	jw_obj_begin(w);
	jw_key(w, "name");
	jw_cstr(w, OTEL_THREAD_CTX_SYMBOL);
	jw_key(w, "module");
	jw_cstr(w, d->sym.module);
	jw_key(w, "model");
	jw_cstr(w, tlsm_model_name(d->acc.model));
	jw_key(w, "symbol_table");
	jw_cstr(w, d->sym.from_symtab ? ".symtab" : ".dynsym");
	jw_key(w, "tpoff");
	if (stat)
		jw_i64(w, d->acc.tpoff);
	else
		jw_raw(w, "null");
	jw_key(w, "module_id");
	if (dyn)
		jw_u64(w, d->acc.modid);
	else
		jw_raw(w, "null");
	jw_key(w, "offset");
	if (dyn)
		jw_u64(w, d->acc.offset);
	else
		jw_raw(w, "null");
	jw_close(w, '}');
	/* beside it, as "symbol_error" is when there is none: present
	 * only when there is something to say */
	if (symbol_noted(d)) {
		static char why[SYMBOL_WHY_MAX];

		jw_key(w, "symbol_note");
		jw_cstr(w, symbol_misdef_why(d, true, why));
	}
}

static void
json_context(struct jw *w, const struct dump *d, const struct dump_thread *t)
{
	char hex[33];
	unsigned i;
	bool valid = t->hdr.valid == TREC_VALID;

	jw_key(w, "context");
	if (t->error || !t->has_record) {
		jw_raw(w, "null");
		return;
	}
	jw_obj_begin(w);
	jw_key(w, "layout");
	jw_plain(w, OTEL_THREAD_CTX_SYMBOL, strlen(OTEL_THREAD_CTX_SYMBOL));
	jw_key(w, "record_addr");
	jw_addr(w, t->record_addr);
	jw_key(w, "valid");
	jw_u64(w, t->hdr.valid);
	jw_key(w, "trace_id");
	if (valid) {
		w3c_hex_encode(hex, t->hdr.trace_id, 16);
		jw_plain(w, hex, 32);
	} else {
		jw_raw(w, "null");
	}
	jw_key(w, "span_id");
	if (valid) {
		w3c_hex_encode(hex, t->hdr.span_id, 8);
		jw_plain(w, hex, 16);
	} else {
		jw_raw(w, "null");
	}
	jw_key(w, "flags");
	if (valid)
		jw_u64(w, t->hdr.trace_flags);
	else
		jw_raw(w, "null");
	jw_key(w, "attrs_data_size");
	jw_u64(w, valid ? t->hdr.attrs_data_size : 0);
	jw_key(w, "attrs_truncated");
	jw_raw(w, valid && (t->attrs_capped || t->dec_truncated) ? "true" : "false");
	jw_key(w, "attrs");
	jw_arr_begin(w);
	for (i = 0; valid && i < t->n_dec; i++) {
		const struct trec_attr *a = &t->dec_attr[i];
		const struct pctx_str *k = key_name(d, a->key);
		char unk[8];

		jw_elem(w);
		jw_obj_begin(w);
		jw_key(w, "key");
		if (k) {
			jw_str(w, k->ptr, k->len);
		} else {
			snprintf(unk, sizeof(unk), "#%u", a->key);
			jw_cstr(w, unk);
		}
		jw_key(w, "index");
		jw_u64(w, a->key);
		jw_key(w, "value");
		jw_str(w, a->val, a->len);
		jw_close(w, '}');
	}
	jw_close(w, ']');
	jw_close(w, '}');
}

static void
json_frames(struct jw *w, const struct dump_thread *t)
{
	size_t i;

	jw_key(w, "frames");
	jw_arr_begin(w);
	for (i = 0; i < t->n_frames; i++) {
		const struct stack_frame *fr = &t->frames[i];

		jw_elem(w);
		jw_obj_begin(w);
		jw_key(w, "ip");
		jw_addr(w, fr->ip);
		jw_key(w, "symbol");
		if (fr->symbol[0])
			jw_cstr(w, fr->symbol);
		else
			jw_raw(w, "null");
		jw_key(w, "offset");
		jw_u64(w, fr->offset);
		jw_key(w, "module");
		if (fr->module[0])
			jw_cstr(w, fr->module);
		else
			jw_raw(w, "null");
		jw_key(w, "guessed");
		jw_raw(w, (fr->flags & STACK_FRAME_GUESSED) ? "true" : "false");
		jw_close(w, '}');
	}
	jw_close(w, ']');
	jw_key(w, "frames_truncated");
	jw_raw(w, t->frames_capped ? "true" : "false");
	/* what the text output says as "(stack ends: ...)": the walk
	 * stopped before the outermost frame */
	if (t->n_frames && (t->frames[t->n_frames - 1].flags & STACK_FRAME_TRUNCATED) &&
	    t->frames[t->n_frames - 1].end_reason) {
		jw_key(w, "stack_end");
		jw_cstr(w, t->frames[t->n_frames - 1].end_reason);
	}
	if (t->stack_error) {
		jw_key(w, "stack_error");
		jw_cstr(w, t->stack_error);
	}
}

static void
json_hex_or_null(struct jw *w, bool have, const uint8_t *id, size_t n)
{
	char hex[33];

	if (!have) {
		jw_raw(w, "null");
		return;
	}
	w3c_hex_encode(hex, id, n);
	jw_str(w, (const uint8_t *)hex, 2 * n);
}

/* "layouts": the other layouts the process defines. */
static void
json_alt_layouts(struct jw *w, const struct dump *d)
{
	unsigned k;

	jw_key(w, "layouts");
	jw_arr_begin(w);
	for (k = 0; d->alt && k < LAY_N; k++) {
		const struct lay_layout *l = &d->alt->l[k];

		if (!l->present)
			continue;
		jw_elem(w);
		jw_obj_begin(w);
		jw_key(w, "name");
		jw_cstr(w, alt_symbol[k]);
		jw_key(w, "module");
		jw_cstr(w, l->sym.module);
		jw_key(w, "model");
		jw_cstr(w, tlsm_model_name(l->acc.model));
		jw_key(w, "symbol_table");
		jw_cstr(w, l->sym.from_symtab ? ".symtab" : ".dynsym");
		jw_key(w, "readable");
		jw_raw(w,
		       l->abi_ok && l->acc.model != TLSM_UNRESOLVED ? "true" : "false");
		if (k == LAY_CUSTOM_LABELS) {
			jw_key(w, "abi_version");
			jw_u64(w, l->abi_version);
		}
		jw_close(w, '}');
	}
	jw_close(w, ']');
}

/* "other_contexts": the thread's Elastic and custom-labels contexts. */
static void
json_alt_contexts(struct jw *w, const struct dump *d, const struct dump_thread *t)
{
	unsigned j, i;

	jw_key(w, "other_contexts");
	jw_arr_begin(w);
	for (j = 0; j < t->n_alt; j++) {
		const struct dump_alt *a = &t->alt[j];
		const struct lay_ctx *c = a->ctx;

		if (a->state != LAY_ERROR && !c)
			continue;
		jw_elem(w);
		jw_obj_begin(w);
		jw_key(w, "layout");
		jw_cstr(w, alt_symbol[a->kind]);
		jw_key(w, "slot_addr");
		jw_addr(w, a->slot_addr);
		if (a->state == LAY_ERROR) {
			jw_key(w, "error");
			jw_cstr(w, strerror(-a->err));
			jw_close(w, '}');
			continue;
		}
		jw_key(w, "pointer");
		jw_addr(w, a->ptr);
		if (a->kind == LAY_ELASTIC) {
			jw_key(w, "minor_version");
			jw_u64(w, c->minor_version);
			jw_key(w, "valid");
			jw_u64(w, c->raw_valid);
			jw_key(w, "trace_id");
			json_hex_or_null(w, c->has_trace, c->trace_id, 16);
			jw_key(w, "span_id");
			json_hex_or_null(w, c->has_trace, c->span_id, 8);
			jw_key(w, "transaction_id");
			json_hex_or_null(w, c->has_trace, c->txn_id, 8);
			jw_key(w, "flags");
			if (c->has_trace)
				jw_u64(w, c->flags);
			else
				jw_raw(w, "null");
		} else {
			jw_key(w, "count");
			jw_u64(w, a->cl_count);
			jw_key(w, "truncated");
			jw_raw(w, c->truncated ? "true" : "false");
			jw_key(w, "trace_id");
			json_hex_or_null(w, c->has_trace, c->trace_id, 16);
			jw_key(w, "span_id");
			json_hex_or_null(w,
					 c->has_trace && !w3c_id_is_zero(c->span_id, 8),
					 c->span_id, 8);
			jw_key(w, "labels");
			jw_arr_begin(w);
			for (i = 0; i < c->n_attrs; i++) {
				jw_elem(w);
				jw_obj_begin(w);
				jw_key(w, "key");
				jw_str(w, c->attrs[i].key, c->attrs[i].klen);
				jw_key(w, "value");
				jw_str(w, c->attrs[i].val, c->attrs[i].vlen);
				jw_close(w, '}');
			}
			jw_close(w, ']');
		}
		jw_close(w, '}');
	}
	jw_close(w, ']');
	(void)d;
}

static void
json_thread(struct jw *w, const struct dump *d, const struct dump_thread *t)
{
	char st[2] = {t->state, '\0'};

	jw_elem(w);
	jw_obj_begin(w);
	jw_key(w, "tid");
	jw_u64(w, (uint64_t)t->tid);
	jw_key(w, "comm");
	jw_cstr(w, t->comm);
	jw_key(w, "state");
	jw_cstr(w, st);
	jw_key(w, "slot_addr");
	if (t->has_slot)
		jw_addr(w, t->slot_addr);
	else
		jw_raw(w, "null");
	json_context(w, d, t);
	if (d->alt)
		json_alt_contexts(w, d, t);
	if (t->error) {
		jw_key(w, "error");
		jw_cstr(w, t->error);
	}
	/* its thread pointer is another thread's (a raw clone() without
	 * CLONE_SETTLS): whose, or null if that cannot be told */
	if (t->tp_owner) {
		jw_key(w, "thread_pointer_owner");
		if (t->tp_owner > 0)
			jw_u64(w, (uint64_t)t->tp_owner);
		else
			jw_raw(w, "null");
	}
	if (d->stacks)
		json_frames(w, t);
	jw_close(w, '}');
}

void
output_json(FILE *file, const struct dump *d, const struct output_opts *o)
{
	static char buf[OB_SIZE];
	struct ob ob, *f = &ob;
	struct jw w = {f, 0, true};
	size_t i;

	ob_init(f, file, buf, sizeof(buf));
	flockfile(file); /* see output_text() */
	jw_obj_begin(&w);
	jw_key(&w, "pid");
	jw_u64(&w, (uint64_t)d->pid);
	jw_key(&w, "cmdline");
	jw_arr_begin(&w);
	for (i = 0; i < d->cmdline_len;) {
		size_t l = strnlen(d->cmdline + i, d->cmdline_len - i);

		jw_elem(&w);
		jw_str(&w, (const uint8_t *)d->cmdline + i, l);
		i += l + 1;
	}
	jw_close(&w, ']');
	jw_key(&w, "cmdline_truncated");
	jw_raw(&w, d->cmdline_truncated ? "true" : "false");
	json_symbol(&w, d);
	json_alt_layouts(&w, d);
	json_pctx(&w, d);
	jw_key(&w, "stopped_ns");
	jw_u64(&w, d->stopped_ns);
	jw_key(&w, "exited_threads");
	jw_u64(&w, d->n_exited);
	jw_key(&w, "threads");
	jw_arr_begin(&w);
	for (i = 0; i < d->n_threads; i++)
		if (thread_shown(d, &d->threads[i], o))
			json_thread(&w, d, &d->threads[i]);
	jw_close(&w, ']');
	jw_close(&w, '}');
	ob_putc(f, '\n');
	ob_flush(f);
	funlockfile(file);
}
