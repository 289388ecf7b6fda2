/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "shim.h"

#include "cfg.h"
#include "dynsym.h"
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

struct writer_scan {
	const void *self; /* an address in our own object */
	const char *self_soname;
	bool past_self;
	const char *why;
};

static int
writer_scan_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct writer_scan *s = data;
	const char *soname;

	(void)size;
	if (ctxshim_object_holds(info, s->self)) {
		s->past_self = true;
		s->self_soname = ctxshim_dynsym_soname(info);
		return 0;
	}
	if (!ctxshim_dynsym_defines(info, OTEL_THREAD_CTX_SYMBOL))
		return 0;
	/* Another copy of the shim after us (two files: LD_PRELOAD and
	 * /etc/ld.so.preload naming different installations) is no other
	 * writer: our hooks come first, and its constructor finds us before
	 * it and stays passive.  Counted, each copy made the other passive
	 * and nothing was published. */
	soname = s->past_self && s->self_soname ? ctxshim_dynsym_soname(info) : NULL;
	if (soname && strcmp(soname, s->self_soname) == 0)
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
	struct writer_scan s = {(const void *)&other_writer, NULL, false, NULL};

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
