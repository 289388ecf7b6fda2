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

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>
#include <pthread.h>

/* The OTEP-4947 thread-context pointer: STT_TLS, global, default
 * visibility, 8 bytes, in .dynsym (listed in ctxshim.sym). */
CTXSHIM_EXPORT __thread void *otel_thread_ctx_v1 = NULL;

/* Our own definition, whoever wins symbol resolution for the exported name:
 * lets the constructor tell whether another module defines it too. */
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

/* Another OTEP-4947 writer already in the process (an instrumented app or
 * an SDK library) owns the name: the executable or an earlier preload shows
 * up first in the global scope, a later library after us (RTLD_NEXT). */
static const char *
other_writer(void)
{
	void *first = dlsym(RTLD_DEFAULT, OTEL_THREAD_CTX_SYMBOL);
	void *next = dlsym(RTLD_NEXT, OTEL_THREAD_CTX_SYMBOL);

	if (first && first != (void *)&ctxshim_own_slot)
		return "another module defines otel_thread_ctx_v1 before us";
	if (next)
		return "a library loaded after us defines otel_thread_ctx_v1";
	return NULL;
}

/* A CGI program (RFC 3875: the server sets GATEWAY_INTERFACE=CGI/1.x) is
 * the handler of one request, which its server hands over in the
 * environment: REQUEST_METHOD, the target as REQUEST_URI (Apache httpd,
 * lighttpd; else SCRIPT_NAME, PATH_INFO and QUERY_STRING), and every
 * request header as HTTP_<NAME> (upper case, '-' as '_'), the
 * traceparent as HTTP_TRACEPARENT.  Its main thread publishes that request
 * as a server thread would have (the same model, request-ctx.h: a child
 * span of the incoming traceparent, or a new trace without one), and its
 * threads inherit it.  Read once, here: the environment is the program's
 * own once main() runs.  Returns false if this is no CGI program. */
static bool
adopt_cgi_request(void)
{
	const char *gw = secure_getenv("GATEWAY_INTERFACE");
	const char *uri, *ts;
	char target[2048];
	struct ctxshim_request r;
	struct ctxshim_ctx c;
	size_t ts_len = 0;
	unsigned i;

	if (!gw || strncmp(gw, "CGI/", 4) != 0)
		return false;
	memset(&r, 0, sizeof(r));
	r.method = secure_getenv("REQUEST_METHOD");
	r.method_len = r.method ? strlen(r.method) : 0;
	uri = secure_getenv("REQUEST_URI");
	if (uri) {
		r.target = uri;
		r.target_len = strlen(uri);
	} else {
		const char *sn = secure_getenv("SCRIPT_NAME");
		const char *pi = secure_getenv("PATH_INFO");
		const char *qs = secure_getenv("QUERY_STRING");
		int n = snprintf(target, sizeof(target), "%s%s%s%s", sn ? sn : "",
				 pi ? pi : "", qs && *qs ? "?" : "",
				 qs && *qs ? qs : "");

		/* too long: no url.path rather than a cut one */
		if (n > 0 && (size_t)n < sizeof(target)) {
			r.target = target;
			r.target_len = (size_t)n;
		}
	}
	r.traceparent = secure_getenv("HTTP_TRACEPARENT");
	r.traceparent_len = r.traceparent ? strlen(r.traceparent) : 0;
	ts = secure_getenv("HTTP_TRACESTATE");
	if (ts) {
		ts_len = strlen(ts);
		r.tracestate = &ts;
		r.tracestate_lens = &ts_len;
		r.n_tracestate = 1;
	}
	for (i = 0; i < ctxshim_cfg.n_header_attrs; i++) {
		const char *h = ctxshim_cfg.header_attrs[i];
		char name[sizeof("HTTP_") + CTXSHIM_HEADER_NAME_MAX];
		size_t k;

		memcpy(name, "HTTP_", 5);
		for (k = 0; h[k]; k++)
			name[5 + k] =
				h[k] == '-' ? '_' : (char)toupper((unsigned char)h[k]);
		name[5 + k] = '\0';
		r.extra[i] = secure_getenv(name);
		r.extra_len[i] = r.extra[i] ? strlen(r.extra[i]) : 0;
	}
	ctxshim_request_ctx(&c, &r);
	ctxshim_attach(&c);
	CTXSHIM_EVENT(CTXSHIM_EV_ATTACH, -1, &c, "cgi-request");
	ctxshim_log("main thread publishes its CGI request (%s)",
		    r.traceparent ? "from HTTP_TRACEPARENT" : "no traceparent");
	return true;
}

/* OpenTelemetry's environment-variable carriers: a process started with
 * TRACEPARENT (and TRACESTATE) continues that trace, so a batch job or a
 * shell-out is attributed to the request that started it.  The main
 * thread gets a child span of it; threads inherit it.  Without
 * TRACEPARENT, a CGI program publishes the request it serves. */
static void
adopt_env_context(void)
{
	const char *tp_text = secure_getenv("TRACEPARENT");
	const char *ts_text = secure_getenv("TRACESTATE");
	struct w3c_traceparent tp;
	struct trec_attr_writer w;
	struct ctxshim_ctx c;

	if (!ctxshim_env_bool("CTXSHIM_ENV_CARRIER", true))
		return;
	if (!tp_text) {
		(void)adopt_cgi_request();
		return;
	}
	if (w3c_traceparent_parse(tp_text, strlen(tp_text), &tp) < 0) {
		ctxshim_log("TRACEPARENT is not a valid traceparent, ignoring it");
		return;
	}
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

__attribute__((constructor(101))) static void
ctxshim_init(void)
{
	const char *why;

	ctxshim_config_load();
	if (ctxshim_cfg.disabled) {
		ctxshim_log("disabled by CTXSHIM_DISABLE");
		return;
	}
	/* Resolve the TLS descriptor now, on the main thread, so that a reader
	 * never meets an unresolved one (glibc < 2.34 bound them lazily). */
	(void)*(void *volatile *)&otel_thread_ctx_v1;

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
