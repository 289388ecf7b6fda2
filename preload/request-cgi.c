/* SPDX-License-Identifier: Apache-2.0 */
/* A request handed over as CGI meta-variables (RFC 3875): a CGI program's
 * environment (shim.c) or a FastCGI request's parameters
 * (hooks/hook-fcgi.c), both the same NAME=value list, so one model for
 * both.  No allocation and no libc call that can (a FastCGI request's
 * path), no lock. */
#include "config.h"

#include "request-ctx.h"

#include <stdbool.h>
#include <string.h>

/* The target when there is no REQUEST_URI: SCRIPT_NAME, PATH_INFO and
 * "?" QUERY_STRING, as RFC 3875 §3.3 rebuilds it.  Longer: none. */
#define CGI_TARGET_MAX 2048

/* Append s at out + at; with encode, as a request-target's path has it:
 * SCRIPT_NAME and PATH_INFO come decoded (RFC 3875 §4.1.5, §4.1.13), and a
 * decoded '?' or '#' must not end the path, so those, '%', spaces and
 * other bytes a target cannot hold are percent-encoded again.  Returns the
 * new length, (size_t)-1 once too long. */
static size_t
cgi_append(char *out, size_t at, const char *s, bool encode)
{
	static const char hex[] = "0123456789ABCDEF";

	if (!s || at == (size_t)-1)
		return at;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		bool esc = encode && (ch <= ' ' || ch >= 0x7f || ch == '%' ||
				      ch == '?' || ch == '#');

		if (CGI_TARGET_MAX - at <= (esc ? 3u : 1u))
			return (size_t)-1;
		if (esc) {
			out[at++] = '%';
			out[at++] = hex[ch >> 4];
			out[at++] = hex[ch & 15];
		} else {
			out[at++] = (char)ch;
		}
	}
	return at;
}

void
ctxshim_request_ctx_cgi(struct ctxshim_ctx *c, ctxshim_cgi_lookup_fn *lookup, void *arg)
{
	char target[CGI_TARGET_MAX];
	struct ctxshim_request r;
	const char *uri, *ts;
	size_t ts_len = 0;
	unsigned i;

	memset(&r, 0, sizeof(r));
	r.method = lookup("REQUEST_METHOD", arg);
	r.method_len = r.method ? strlen(r.method) : 0;
	uri = lookup("REQUEST_URI", arg);
	/* One without a path (empty, or a query alone: no server sends
	 * that) tells less than SCRIPT_NAME and PATH_INFO. */
	if (uri && *uri && *uri != '?' && *uri != '#') {
		r.target = uri;
		r.target_len = strlen(uri);
	} else {
		const char *qs = lookup("QUERY_STRING", arg);
		size_t n, path;

		n = cgi_append(target, 0, lookup("SCRIPT_NAME", arg), true);
		n = cgi_append(target, n, lookup("PATH_INFO", arg), true);
		path = n;
		if (qs && *qs) {
			n = cgi_append(target, n, "?", false);
			n = cgi_append(target, n, qs, false);
		}
		/* too long: no url.path rather than a cut one; no path (only a
		 * query): none rather than an empty one */
		if (n != (size_t)-1 && path > 0) {
			r.target = target;
			r.target_len = n;
		}
	}
	r.traceparent = lookup("HTTP_TRACEPARENT", arg);
	r.traceparent_len = r.traceparent ? strlen(r.traceparent) : 0;
	ts = lookup("HTTP_TRACESTATE", arg);
	if (ts) {
		ts_len = strlen(ts);
		r.tracestate = &ts;
		r.tracestate_lens = &ts_len;
		r.n_tracestate = 1;
	}
	for (i = 0; i < ctxshim_cfg.n_header_attrs; i++) {
		char name[CTXSHIM_CGI_VAR_MAX];

		r.extra[i] = lookup(
			ctxshim_cgi_header_var(name, ctxshim_cfg.header_attrs[i]), arg);
		r.extra_len[i] = r.extra[i] ? strlen(r.extra[i]) : 0;
	}
	ctxshim_request_ctx(c, &r);
}

const char *
ctxshim_cgi_header_var(char name[CTXSHIM_CGI_VAR_MAX], const char *h)
{
	size_t k;

	/* RFC 3875 §4.1.18: upper case, '-' as '_'.  ASCII only: the
	 * locale's toupper() has no say in a header name.  The body's two
	 * headers have variables of their own (§4.1.2, §4.1.3), without the
	 * HTTP_ prefix. */
	memcpy(name, "HTTP_", 5);
	for (k = 0; k < CTXSHIM_HEADER_NAME_MAX && h[k]; k++) {
		char ch = h[k];

		if (ch == '-')
			ch = '_';
		else if (ch >= 'a' && ch <= 'z')
			ch = (char)(ch - 'a' + 'A');
		name[5 + k] = ch;
	}
	name[5 + k] = '\0';
	if (strcmp(name, "HTTP_CONTENT_TYPE") == 0 ||
	    strcmp(name, "HTTP_CONTENT_LENGTH") == 0)
		return name + 5;
	return name;
}

const char *
ctxshim_cgi_envp_lookup(const char *name, void *envp)
{
	char *const *e = envp;
	size_t n = strlen(name);

	for (; e && *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}
