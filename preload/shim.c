/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "shim.h"

#include "cfg.h"
#include "events.h"
#include "log.h"
#include "process-ctx-pub.h"
#include "request-ctx.h"
#include "thread-ctx.h"
#include "w3c.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <link.h>
#include <pthread.h>
#include <stdint.h>

/* The OTEP-4947 thread-context pointer: STT_TLS, global, default
 * visibility, 8 bytes, in .dynsym (listed in ctxshim.sym). */
CTXSHIM_EXPORT __thread void *otel_thread_ctx_v1 = NULL;

/* Our own definition, whoever wins symbol resolution for the exported name
 * (shim.h): every access of the shim goes through it, and it lets the
 * constructor tell whether another module defines the name too. */
extern __thread void *ctxshim_own_slot
	__attribute__((alias("otel_thread_ctx_v1"), visibility("hidden")));

enum ctxshim_mode ctxshim_mode = CTXSHIM_OFF;

static void
after_fork_child(void)
{
	/* fork() returns 0 with errno as the caller left it (the mapping's
	 * prctl naming fails with EINVAL on many kernels) */
	int saved_errno = errno;

	if (ctxshim_mode != CTXSHIM_ACTIVE)
		return;
	ctxshim_thread_after_fork_child();
	ctxshim_pctx_after_fork_child();
	errno = saved_errno;
}

/* The end of the PT_LOAD segment of info that holds addr, or 0. */
static uintptr_t
segment_end(const struct dl_phdr_info *info, uintptr_t addr)
{
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && addr >= start &&
		    addr - start < ph->p_memsz)
			return start + ph->p_memsz;
	}
	return 0;
}

/* The address of a table that the dynamic section names, and the end of
 * the segment that holds it (NULL if none does).  ld.so adds the load bias
 * to d_ptr in place for most objects, but not for the vdso (read-only;
 * glibc >= 2.35 marks it l_ld_readonly) nor on targets whose dynamic
 * section is read-only (DL_RO_DYN_SECTION): take the value that lies
 * inside the object. */
static const void *
dyn_table(const struct dl_phdr_info *info, ElfW(Addr) v, uintptr_t *end)
{
	if ((*end = segment_end(info, v)))
		return (const void *)v;
	if ((*end = segment_end(info, info->dlpi_addr + v)))
		return (const void *)(info->dlpi_addr + v);
	return NULL;
}

struct dynsyms {
	const ElfW(Sym) * sym;
	const char *str;
	uintptr_t sym_end, str_end;
};

/* Is dynamic symbol i a definition of name, of any type?  A local one is
 * no definition for ld.so; all else is bounded by the segments. */
static bool
dynsym_defines(const struct dynsyms *t, uint32_t i, const char *name)
{
	size_t len = strlen(name) + 1;
	const ElfW(Sym) * s;

	if (i >= (t->sym_end - (uintptr_t)t->sym) / sizeof(*s))
		return false;
	s = t->sym + i;
	if (s->st_shndx == SHN_UNDEF || ELF64_ST_BIND(s->st_info) == STB_LOCAL)
		return false;
	return s->st_name < t->str_end - (uintptr_t)t->str &&
	       len <= t->str_end - (uintptr_t)t->str - s->st_name &&
	       memcmp(t->str + s->st_name, name, len) == 0;
}

/* name in a DT_GNU_HASH table (glibc elf/dl-lookup.c do_lookup_x(), and
 * dl_new_hash() for the hash).  A chain ends at an entry with bit 0 set,
 * or here at the end of the segment. */
static bool
gnu_hash_defines(const struct dynsyms *t,
		 const uint32_t *h,
		 uintptr_t end,
		 const char *name)
{
	const unsigned bits = sizeof(ElfW(Addr)) * 8;
	const uint32_t *buckets, *chain;
	const ElfW(Addr) * bloom;
	uint32_t hash = 5381, i;
	ElfW(Addr) word;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		hash = hash * 33 + *p;
	if (end - (uintptr_t)h < 4 * sizeof(*h) || !h[0] || !h[2] || h[3] >= 32)
		return false;
	bloom = (const ElfW(Addr) *)(h + 4);
	if ((end - (uintptr_t)bloom) / sizeof(*bloom) <= h[2])
		return false;
	buckets = (const uint32_t *)(bloom + h[2]);
	if ((end - (uintptr_t)buckets) / sizeof(*buckets) <= h[0])
		return false;
	chain = buckets + h[0];
	word = bloom[(hash / bits) % h[2]];
	if (!((word >> (hash % bits)) & (word >> ((hash >> h[3]) % bits)) & 1))
		return false;
	for (i = buckets[hash % h[0]];
	     i >= h[1] && i - h[1] < (end - (uintptr_t)chain) / 4; i++) {
		if ((chain[i - h[1]] | 1) == (hash | 1) && dynsym_defines(t, i, name))
			return true;
		if (chain[i - h[1]] & 1)
			break;
	}
	return false;
}

/* Does the object define name?  Looked up as ld.so looks it up, in its
 * hash table: an object without one defines nothing for dlsym() either.
 * DT_HASH's nchain is the number of symbols, so a plain scan does there
 * (only objects linked with --hash-style=sysv lack DT_GNU_HASH). */
static bool
object_defines(const struct dl_phdr_info *info, const char *name)
{
	const uint32_t *gnu = NULL, *sysv = NULL;
	uintptr_t gnu_end = 0, sysv_end = 0;
	const ElfW(Dyn) *d = NULL;
	struct dynsyms t = {0};
	size_t ndyn = 0, nsyms;

	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) {
			d = (const ElfW(Dyn) *)(info->dlpi_addr +
						info->dlpi_phdr[i].p_vaddr);
			ndyn = info->dlpi_phdr[i].p_memsz / sizeof(*d);
		}
	for (; ndyn && d->d_tag != DT_NULL; d++, ndyn--) {
		if (d->d_tag == DT_SYMTAB)
			t.sym = dyn_table(info, d->d_un.d_ptr, &t.sym_end);
		else if (d->d_tag == DT_STRTAB)
			t.str = dyn_table(info, d->d_un.d_ptr, &t.str_end);
		else if (d->d_tag == DT_GNU_HASH)
			gnu = dyn_table(info, d->d_un.d_ptr, &gnu_end);
		else if (d->d_tag == DT_HASH)
			sysv = dyn_table(info, d->d_un.d_ptr, &sysv_end);
	}
	if (!t.sym || !t.str)
		return false;
	if (gnu)
		return gnu_hash_defines(&t, gnu, gnu_end, name);
	if (!sysv || sysv_end - (uintptr_t)sysv < 2 * sizeof(*sysv))
		return false;
	nsyms = (t.sym_end - (uintptr_t)t.sym) / sizeof(*t.sym);
	for (uint32_t i = 0; i < sysv[1] && i < nsyms; i++)
		if (dynsym_defines(&t, i, name))
			return true;
	return false;
}

struct writer_scan {
	uintptr_t self; /* an address in our own object */
	bool past_self;
	const char *why;
};

static int
writer_scan_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct writer_scan *s = data;

	(void)size;
	if (segment_end(info, s->self)) {
		s->past_self = true;
		return 0;
	}
	if (!object_defines(info, OTEL_THREAD_CTX_SYMBOL))
		return 0;
	s->why = s->past_self ? "a library loaded after us defines otel_thread_ctx_v1"
			      : "another module defines otel_thread_ctx_v1 before us";
	return 1;
}

/* Another OTEP-4947 writer already in the process (an instrumented app or
 * an SDK library) owns the name: the executable or an earlier preload
 * comes before us in dl_iterate_phdr()'s order (load order, which is the
 * global scope's at start-up), a later library after us, as does a plugin
 * that a library's constructor, run before ours, loaded RTLD_LOCAL: a
 * second writer all the same, though dlsym() would not have seen it.
 * Read from the objects' dynamic sections rather than asked of dlsym(),
 * which would run an IFUNC resolver of that name (the program's code,
 * before its own constructors) and allocate a dlopen()ed module's TLS
 * block. */
static const char *
other_writer(void)
{
	struct writer_scan s = {(uintptr_t)&other_writer, false, NULL};

	(void)dl_iterate_phdr(writer_scan_cb, &s);
	return s.why;
}

/* secure_getenv() as a ctxshim_cgi_lookup_fn; with arg non-NULL the
 * request's traceparent and tracestate are taken from TRACEPARENT and
 * TRACESTATE instead. */
static const char *
cgi_env_lookup(const char *name, void *arg)
{
	if (arg && strcmp(name, "HTTP_TRACEPARENT") == 0)
		name = "TRACEPARENT";
	else if (arg && strcmp(name, "HTTP_TRACESTATE") == 0)
		name = "TRACESTATE";
	return secure_getenv(name);
}

/* Does the environment variable name a pid equal to pid? */
static bool
env_names_pid(const char *name, pid_t pid)
{
	const char *v = secure_getenv(name);
	char *end;
	long n;

	if (!v || !*v)
		return false;
	errno = 0;
	n = strtol(v, &end, 10);
	return !*end && errno == 0 && n == (long)pid;
}

/* Is TRACEPARENT this program's own, set by the shim's exec hook in the
 * process that became this program (CTXSHIM_TRACEPARENT_PID) or by its
 * posix_spawn hook in this program's parent (CTXSHIM_TRACEPARENT_PPID; see
 * hooks/hook-exec.c), rather than one that a server was started with and
 * passes on in every CGI program's environment? */
static bool
traceparent_is_own(void)
{
	int saved_errno = errno;
	bool ok = env_names_pid("CTXSHIM_TRACEPARENT_PID", getpid()) ||
		  env_names_pid("CTXSHIM_TRACEPARENT_PPID", getppid());

	errno = saved_errno;
	return ok;
}

/* A CGI program (RFC 3875: the server sets GATEWAY_INTERFACE=CGI/1.x) is
 * the handler of one request, which its server hands over in the
 * environment: REQUEST_METHOD, the target as REQUEST_URI (Apache httpd,
 * lighttpd; else SCRIPT_NAME, PATH_INFO and QUERY_STRING), and every
 * request header as HTTP_<NAME> (upper case, '-' as '_'), the
 * traceparent as HTTP_TRACEPARENT.  Its main thread publishes that request
 * as a server thread would have (the same model, request-ctx.h: a child
 * span of the incoming traceparent, or a new trace without one), and its
 * threads inherit it.  A valid TRACEPARENT that the server's shim set for
 * this program (CTXSHIM_EXEC_TRACEPARENT=1: the request's context with
 * the server's span as the parent, and its mark) is taken
 * instead of HTTP_TRACEPARENT, with TRACESTATE, so the program's span is
 * a child of the server's; any other TRACEPARENT (the server's own, passed
 * on to every request) is not this request's.  Read
 * once, here: the environment is the program's own once main() runs.  A
 * FastCGI request's parameters are the same list (hooks/hook-fcgi.c),
 * hence ctxshim_request_ctx_cgi().  Returns false if this is no CGI
 * program. */
static bool
adopt_cgi_request(bool env)
{
	const char *gw = secure_getenv("GATEWAY_INTERFACE");
	struct ctxshim_ctx c;

	if (!gw || strncmp(gw, "CGI/", 4) != 0)
		return false;
	ctxshim_request_ctx_cgi(&c, cgi_env_lookup, env ? &env : NULL);
	ctxshim_attach(&c);
	CTXSHIM_EVENT(CTXSHIM_EV_ATTACH, -1, &c, "cgi-request");
	ctxshim_log("main thread publishes its CGI request (%s)",
		    env            ? "from TRACEPARENT"
		    : c.has_parent ? "from HTTP_TRACEPARENT"
				   : "no valid traceparent");
	return true;
}

/* OpenTelemetry's environment-variable carriers: a process started with
 * TRACEPARENT (and TRACESTATE) continues that trace, so a batch job or a
 * shell-out is attributed to the request that started it.  The main
 * thread gets a child span of it; threads inherit it.  A CGI program
 * publishes the request it serves, with the trace of TRACEPARENT if that
 * is valid. */
static void
adopt_env_context(void)
{
	const char *tp_text = secure_getenv("TRACEPARENT");
	const char *ts_text = secure_getenv("TRACESTATE");
	struct w3c_traceparent tp;
	struct trec_attr_writer w;
	struct ctxshim_ctx c;
	bool tp_ok;

	if (!ctxshim_env_bool("CTXSHIM_ENV_CARRIER", true))
		return;
	tp_ok = tp_text && w3c_traceparent_parse(tp_text, strlen(tp_text), &tp) == 0;
	if (tp_text && !tp_ok)
		ctxshim_log("TRACEPARENT is not a valid traceparent, ignoring it");
	if (adopt_cgi_request(tp_ok && traceparent_is_own()) || !tp_ok)
		return;
	ctxshim_ctx_begin(&c, &tp);
	trec_attrs_init(&w, c.attrs, sizeof(c.attrs));
	ctxshim_ctx_add_parent_attr(&c, &w);
	c.attrs_len = (uint16_t)w.len;
	if (ts_text) {
		size_t len = strlen(ts_text);

		if (ctxshim_ctx_set_tracestate(&c, &ts_text, &len, 1) < 0)
			ctxshim_log("TRACESTATE is invalid, ignoring it");
	}
	ctxshim_attach(&c);
	CTXSHIM_EVENT(CTXSHIM_EV_ATTACH, -1, &c, "env-traceparent");
	ctxshim_log("main thread continues trace from TRACEPARENT");
}

static void
ctxshim_init_body(void)
{
	const char *why;

	ctxshim_config_load();
	if (ctxshim_cfg.disabled) {
		ctxshim_log("disabled by CTXSHIM_DISABLE");
		return;
	}
	/* Resolve the TLS descriptor now, on the main thread, so that a reader
	 * never meets an unresolved one (glibc < 2.34 bound them lazily).  It
	 * is the alias's, the one every access of the shim shares and
	 * readers take (shim.h, test/symbol-tls.sh). */
	(void)*(void *volatile *)&ctxshim_own_slot;

	why = other_writer();
	if (!why && ctxshim_pctx_exists())
		why = "an OTEL_CTX process context is already published";
	if (why) {
		ctxshim_mode = CTXSHIM_PASSIVE;
		ctxshim_log("passive: %s; the shim will not publish anything", why);
		return;
	}

	ctxshim_thread_init();
	ctxshim_pctx_prepare();
	if (!ctxshim_pctx_publish())
		ctxshim_log("continuing without a process context");
	(void)pthread_atfork(NULL, NULL, after_fork_child);
	ctxshim_mode = CTXSHIM_ACTIVE;
	ctxshim_log("active (ctxshim %s)", CTXSHIM_VERSION);
	adopt_env_context();
}

/* main() starts with errno 0 (C11 7.5p3), whatever failed in here (the
 * mapping's prctl() naming fails with EINVAL on many kernels). */
__attribute__((constructor(101))) static void
ctxshim_init(void)
{
	int saved_errno = errno;

	ctxshim_init_body();
	errno = saved_errno;
}
