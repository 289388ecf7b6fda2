/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "cfg.h"
#include "events.h"
#include "log.h"
#include "request-ctx.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct ctxshim_config ctxshim_cfg;

/* 1 or 0 for the boolean words (1, yes, true, on; 0, no, false, off; any
 * case), -1 for anything else. */
static int
env_bool_word(const char *v)
{
	static const char *const words[] = {"0", "no",  "false", "off",
					    "1", "yes", "true",  "on"};
	size_t i;

	for (i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strcasecmp(v, words[i]) == 0)
			return i >= 4;
	return -1;
}

bool
ctxshim_env_bool(const char *name, bool dflt)
{
	const char *v = secure_getenv(name);
	int b;

	if (!v || !*v)
		return dflt;
	if ((b = env_bool_word(v)) >= 0)
		return b;
	ctxshim_log("%s=%s is not a boolean, using %s", name, v, dflt ? "1" : "0");
	return dflt;
}

static unsigned
env_uint(const char *name, unsigned dflt, unsigned min, unsigned max)
{
	const char *v = secure_getenv(name);
	unsigned long n;
	char *end;

	if (!v || !*v)
		return dflt;
	errno = 0;
	n = strtoul(v, &end, 10);
	/* strtoul() takes "-N" as 2^64 - N: a negative number is out of
	 * range too, however large. */
	if (errno || *end || strchr(v, '-') || n < min || n > max) {
		ctxshim_log("%s=%s is not a number in %u..%u, using %u", name, v, min,
			    max, dflt);
		return dflt;
	}
	return (unsigned)n;
}

/* HTTP field names are tokens (RFC 9110 §5.6.2); we keep them lowercase so
 * the attribute key is stable whatever case the config used. */
static bool
header_name_ok(const char *s, size_t len)
{
	static const char extra[] = "!#$%&'*+-.^_`|~";
	size_t i;

	if (len == 0 || len >= CTXSHIM_HEADER_NAME_MAX)
		return false;
	for (i = 0; i < len; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr(extra, s[i]))
			return false;
	return true;
}

/* Whether the (lowercase) name is configured already: one header, one
 * key-map entry -- a second index with the same attribute name would spend
 * a slot and record bytes on a copy, and give readers two attributes with
 * one name. */
static bool
header_name_dup(const char *s, size_t len)
{
	unsigned i;

	for (i = 0; i < ctxshim_cfg.n_header_attrs; i++)
		if (strlen(ctxshim_cfg.header_attrs[i]) == len &&
		    strncasecmp(ctxshim_cfg.header_attrs[i], s, len) == 0)
			return true;
	return false;
}

static void
load_header_attrs(void)
{
	const char *v = secure_getenv("CTXSHIM_HEADER_ATTRS");

	while (v && *v) {
		const char *end = strchr(v, ',');
		size_t len = end ? (size_t)(end - v) : strlen(v);
		size_t i;

		while (len && (*v == ' ' || *v == '\t')) {
			v++;
			len--;
		}
		while (len && (v[len - 1] == ' ' || v[len - 1] == '\t'))
			len--;
		if (len == 0) {
			/* empty element between commas: nothing to do */
		} else if (len >= CTXSHIM_HEADER_NAME_MAX) {
			ctxshim_log(
				"CTXSHIM_HEADER_ATTRS: '%.*s' is longer than %d bytes, "
				"ignoring it",
				(int)len, v, CTXSHIM_HEADER_NAME_MAX - 1);
		} else if (!header_name_ok(v, len)) {
			ctxshim_log("CTXSHIM_HEADER_ATTRS: '%.*s' is not a header "
				    "name, ignoring",
				    (int)len, v);
		} else if (header_name_dup(v, len)) {
			ctxshim_log("CTXSHIM_HEADER_ATTRS: '%.*s' is listed twice, "
				    "ignoring it",
				    (int)len, v);
		} else if (ctxshim_cfg.n_header_attrs == CTXSHIM_MAX_HEADER_ATTRS) {
			ctxshim_log("CTXSHIM_HEADER_ATTRS: more than %d headers, "
				    "ignoring '%.*s'",
				    CTXSHIM_MAX_HEADER_ATTRS, (int)len, v);
		} else {
			char *dst =
				ctxshim_cfg.header_attrs[ctxshim_cfg.n_header_attrs++];

			for (i = 0; i < len; i++)
				dst[i] = (char)tolower((unsigned char)v[i]);
			dst[len] = '\0';
		}
		v = end ? end + 1 : NULL;
	}
}

/* "transparent" is not a boolean, so this one has its own parser. */
static enum ctxshim_propagate
load_propagate(void)
{
	const char *v = secure_getenv("CTXSHIM_PROPAGATE");

	if (v && strcasecmp(v, "transparent") == 0)
		return CTXSHIM_PROPAGATE_TRANSPARENT;
	/* The boolean words stand for 1 and 0; the message of
	 * ctxshim_env_bool() would not name the third value. */
	if (v && *v && env_bool_word(v) < 0) {
		ctxshim_log("CTXSHIM_PROPAGATE=%s is not 1, 0 or transparent, using 1",
			    v);
		return CTXSHIM_PROPAGATE_CHILD;
	}
	return ctxshim_env_bool("CTXSHIM_PROPAGATE", true) ? CTXSHIM_PROPAGATE_CHILD
							   : CTXSHIM_PROPAGATE_OFF;
}

/* Where CTXSHIM_LOG or CTXSHIM_EVENTS sends its lines: "stderr" in any
 * case, or a boolean word.  Users write CTXSHIM_LOG=1 as for the other
 * switches; taken as a path, that created a file named "1" (or "true")
 * in the working directory of every process that inherited it, and
 * logged nothing where they looked.  A file of such a name is still
 * reachable as "./1". */
static const char *
sink_target(const char *v)
{
	if (!v || !*v)
		return NULL;
	if (strcasecmp(v, "stderr") == 0)
		return "stderr";
	switch (env_bool_word(v)) {
	case 0:
		return NULL;
	case 1:
		return "stderr";
	default:
		return v;
	}
}

void
ctxshim_config_load(void)
{
	memset(&ctxshim_cfg, 0, sizeof(ctxshim_cfg));
	ctxshim_log_open(sink_target(secure_getenv("CTXSHIM_LOG")));
	ctxshim_cfg.disabled = ctxshim_env_bool("CTXSHIM_DISABLE", false);
	if (!ctxshim_cfg.disabled)
		ctxshim_events_open(sink_target(secure_getenv("CTXSHIM_EVENTS")));
	ctxshim_cfg.test_force_anon =
		ctxshim_env_bool("CTXSHIM_TEST_FORCE_ANON", false);
	ctxshim_cfg.new_traces = ctxshim_env_bool("CTXSHIM_NEW_TRACES", true);
	ctxshim_cfg.sample_new = ctxshim_env_bool("CTXSHIM_SAMPLED", false);
	ctxshim_cfg.url_query = ctxshim_env_bool("CTXSHIM_URL_QUERY", false);
	ctxshim_cfg.follow_exec = ctxshim_env_bool("CTXSHIM_FOLLOW_EXEC", false);
	ctxshim_cfg.exec_traceparent =
		ctxshim_env_bool("CTXSHIM_EXEC_TRACEPARENT", false);
	ctxshim_cfg.inherited = ctxshim_env_bool("CTXSHIM_INHERITED", true);
	ctxshim_cfg.max_header_bytes =
		env_uint("CTXSHIM_MAX_HEADER_BYTES", 16384, 256, 1u << 20);
	load_header_attrs();
	ctxshim_cfg.propagate = load_propagate();
	if (ctxshim_request_known_methods(
		    secure_getenv("OTEL_INSTRUMENTATION_HTTP_KNOWN_METHODS")) < 0)
		ctxshim_log(
			"OTEL_INSTRUMENTATION_HTTP_KNOWN_METHODS: more than 32 methods "
			"or one over 20 bytes, ignoring it");
}
