/* SPDX-License-Identifier: Apache-2.0 */
/* ctxdump against a process running libctxshim.so: the shim's process
 * context (resource, schema, key map) and the records of its threads.
 * The helper is the plain `threads` program; the shim gives every thread
 * the context of the TRACEPARENT it was started with (the OpenTelemetry
 * environment carrier, inherited through pthread_create). */
#include "test-common.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TRACE_ID  "4bf92f3577b34da6a3ce929d0e0e4736"
#define PARENT_ID "00f067aa0ba902b7"
#define SERVICE   "ctxdump-shim-test"

/* LD_PRELOAD is set here rather than with test_child_start(…, true), whose
 * copy of the string is never freed (LeakSanitizer). */
static char preload[4200];
static char *shim_env[] = {
	"TRACEPARENT=00-" TRACE_ID "-" PARENT_ID "-01",
	"OTEL_SERVICE_NAME=" SERVICE,
	preload,
	NULL,
};

static const char *
threads_path(void)
{
	static char path[4096];

	snprintf(path, sizeof(path), "%s/threads", test_env_path("HELPER_DIR"));
	return path;
}

/* Outside of a test (no Check asserts): does the preloaded helper show an
 * OTEL_CTX mapping?  Returns a reason to skip, or NULL. */
static const char *
probe_shim(void)
{
	int out[2], in[2];
	char buf[4096], path[64];
	const char *why = "the preloaded helper printed no READY line";
	size_t len = 0;
	pid_t pid;
	FILE *f;

	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(in, O_CLOEXEC) < 0)
		return "pipe failed";
	pid = fork();
	if (pid < 0)
		return "fork failed";
	if (pid == 0) {
		char lib[4200];
		char *argv[] = {(char *)threads_path(), "--wait", "1", NULL};

		snprintf(lib, sizeof(lib), "LD_PRELOAD=%s",
			 test_env_path("CTXSHIM_LIB"));
		putenv(lib);
		dup2(in[0], 0);
		dup2(out[1], 1);
		execv(argv[0], argv);
		_exit(127);
	}
	close(out[1]);
	close(in[0]);
	for (;;) {
		struct pollfd p = {.fd = out[0], .events = POLLIN};
		ssize_t r;

		if (poll(&p, 1, 10000) <= 0)
			break;
		r = read(out[0], buf + len, sizeof(buf) - 1 - len);
		if (r <= 0)
			break;
		len += (size_t)r;
		buf[len] = '\0';
		if (strchr(buf, '\n')) {
			why = "libctxshim.so does not publish a process context yet "
			      "(no "
			      "OTEL_CTX mapping in the preloaded helper)";
			break;
		}
	}
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	while (f && fgets(buf, sizeof(buf), f)) {
		if (strstr(buf, "OTEL_CTX")) {
			why = NULL;
			break;
		}
	}
	if (f)
		fclose(f);
	close(in[1]);
	close(out[0]);
	if (waitpid(pid, NULL, 0) < 0)
		kill(pid, SIGKILL);
	return why;
}

/* Blank what may differ between two dumps of the same sleeping process,
 * in place: the stop time, and each thread's state letter (read before
 * the stop: a thread may be between two sleeps, 'R', in one of them). */
static void
strip_run_state(char *json)
{
	char *s = strstr(json, "\"stopped_ns\": ");
	char *d;

	if (s) {
		s += strlen("\"stopped_ns\": ");
		d = s;
		while (*d >= '0' && *d <= '9')
			d++;
		memmove(s, d, strlen(d) + 1);
	}
	for (s = json; (s = strstr(s, "\"state\": \"")) != NULL;) {
		s += strlen("\"state\": \"");
		if (*s && *s != '"')
			*s = '?';
	}
}

START_TEST(shim_context_and_records)
{
	char *argv[] = {(char *)threads_path(), "--wait", "3", NULL};
	char line[1024], arg[16], *out = NULL, *err = NULL, *p, *end;
	char *dump[] = {(char *)test_ctxdump_path(), (char *)test_stop_timeout_arg(),
			"--json", arg, NULL};
	char *text[] = {(char *)test_ctxdump_path(), (char *)test_stop_timeout_arg(),
			arg, NULL};
	struct test_child c;
	pid_t tids[8];
	unsigned n = 0, i;
	int st;

	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s",
		 test_env_path("CTXSHIM_LIB"));
	test_child_start(&c, argv, shim_env, false);
	test_child_expect(&c, "READY ", line, sizeof(line), 10000);
	/* READY <pid> <tid>... */
	p = line + 6;
	tids[n++] = (pid_t)strtol(p, &end, 10);
	ck_assert_int_eq(tids[0], c.pid);
	while (*end && n < 8) {
		p = end;
		tids[n] = (pid_t)strtol(p, &end, 10);
		if (end == p)
			break;
		n++;
	}
	ck_assert_uint_eq(n, 4);
	snprintf(arg, sizeof(arg), "%d", (int)c.pid);

	st = test_run_capture(dump, NULL, false, &out, &err, 30000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x: %s", st,
		      err);
	ck_assert_str_eq(err, "");
	/* the shim's symbol, TLSDESC resolved to static TLS (preloaded);
	 * no other object defines the name, so no note about one */
	ck_assert_msg(strstr(out, "libctxshim.so\",\n"), "%s", out);
	ck_assert_msg(!strstr(out, "\"symbol_note\""), "%s", out);
	ck_assert_ptr_nonnull(strstr(out, "\"model\": \"tlsdesc-static\""));
	/* the process context */
	ck_assert_ptr_null(strstr(out, "\"process_context\": null"));
	ck_assert_ptr_nonnull(strstr(out, "\"service.name\": \"" SERVICE "\""));
	ck_assert_ptr_nonnull(strstr(out, "\"service.instance.id\": \""));
	ck_assert_ptr_nonnull(strstr(out, "\"schema_version\": \"tlsdesc_v1_dev\""));
	ck_assert_ptr_nonnull(strstr(out, "\"key_map\": [\n"));
	/* every thread continues the trace from TRACEPARENT in a child span */
	for (i = 0; i < n; i++) {
		char *t = test_json_thread(out, tids[i]);

		ck_assert_msg(t, "thread %d missing: %s", (int)tids[i], out);
		ck_assert_msg(strstr(t, "\"trace_id\": \"" TRACE_ID "\""), "%s", t);
		ck_assert_ptr_nonnull(strstr(t, "\"valid\": 1,"));
		ck_assert_ptr_nonnull(strstr(t, "\"flags\": 1,"));
		ck_assert_ptr_nonnull(strstr(t, "\"span_id\": \""));
		ck_assert_ptr_null(strstr(t, "\"span_id\": \"" PARENT_ID "\""));
		ck_assert_ptr_null(strstr(t, "\"span_id\": \"0000000000000000\""));
		/* every attribute index is in the published key map */
		ck_assert_msg(!strstr(t, "\"key\": \"#"), "unknown key index: %s", t);
		free(t);
	}
	/* The same dump through the text of /proc/PID/maps, the path of
	 * kernels without PROCMAP_QUERY (before 6.11: Debian 12's own 6.1):
	 * the same output but for the stop time and thread states. */
	{
		char *text_env[] = {"CTXDUMP_TEST_MAPS_TEXT=1", NULL};
		char *out2 = NULL, *err2 = NULL;

		st = test_run_capture(dump, text_env, false, &out2, &err2, 30000);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x: %s",
			      st, err2);
		ck_assert_str_eq(err2, "");
		strip_run_state(out);
		strip_run_state(out2);
		if (strcmp(out2, out) != 0) {
			size_t at = 0, from;

			while (out[at] && out[at] == out2[at])
				at++;
			from = at > 40 ? at - 40 : 0;
			ck_abort_msg("maps text path differs at byte %zu: \"%.80s\" vs "
				     "\"%.80s\"",
				     at, out + from, out2 + from);
		}
		free(out2);
		free(err2);
	}
	free(out);
	free(err);

	st = test_run_capture(text, NULL, false, &out, &err, 30000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x: %s", st,
		      err);
	ck_assert_msg(strstr(out, "Service: " SERVICE " (instance "), "%s", out);
	ck_assert_ptr_nonnull(strstr(out, "Schema: tlsdesc_v1_dev, key map: "));
	ck_assert_ptr_nonnull(strstr(out, "    trace_id=" TRACE_ID " span_id="));
	free(out);
	free(err);

	ck_assert_int_ne(test_proc_state(c.pid), 't');
	ck_assert_int_ne(test_proc_state(c.pid), 'T');
	st = test_child_finish(&c, 10000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "helper status 0x%x", st);
}
END_TEST

/* The value of attribute key in one thread's JSON block t, or "" if it
 * has none (into out). */
static const char *
attr_value(const char *t, const char *key, char *out, size_t cap)
{
	char pat[96];
	const char *k, *v, *q;

	out[0] = '\0';
	snprintf(pat, sizeof(pat), "\"key\": \"%s\",", key);
	k = strstr(t, pat);
	if (!k || !(v = strstr(k, "\"value\": \"")))
		return out;
	v += strlen("\"value\": \"");
	q = strchr(v, '"');
	if (q && (size_t)(q - v) < cap) {
		memcpy(out, v, (size_t)(q - v));
		out[q - v] = '\0';
	}
	return out;
}

/* The environment carriers of a process's first context (preload/shim.c):
 * TRACEPARENT, and in a CGI program (GATEWAY_INTERFACE=CGI/1.1) the
 * request its server hands it: HTTP_TRACEPARENT (or a valid TRACEPARENT),
 * HTTP_TRACESTATE, REQUEST_METHOD, REQUEST_URI or SCRIPT_NAME + PATH_INFO,
 * HTTP_<header> for CTXSHIM_HEADER_ATTRS.  Per case: the trace the main thread shows
 * ("" none, "new" a fresh one), its parent, method, path, x-request-id. */
/* In a case's environment: CTXSHIM_TRACEPARENT_PID set to the program's
 * own pid (by a shell that then execs it). */
#define OWN_PID "CTXSHIM_TRACEPARENT_PID=$$"
/* ... CTXSHIM_TRACEPARENT_PPID set to its parent's (what a posix_spawn()
 * under the shim sets): replaced by the test's pid, which starts it. */
#define OWN_PPID "CTXSHIM_TRACEPARENT_PPID="

static const struct carrier_case {
	const char *name;
	char *env[12];
	const char *trace, *parent, *method, *path, *rid;
} carrier_cases[] = {
	{"cgi",
	 {"GATEWAY_INTERFACE=CGI/1.1", "REQUEST_METHOD=POST",
	  "REQUEST_URI=/cgi-bin/x.cgi/a?q=1", "SCRIPT_NAME=/cgi-bin/x.cgi",
	  "HTTP_TRACEPARENT=00-" TRACE_ID "-" PARENT_ID "-01",
	  "HTTP_TRACESTATE=a=1, b=2", "HTTP_X_REQUEST_ID=r-1",
	  "CTXSHIM_HEADER_ATTRS=x-request-id"},
	 TRACE_ID,
	 PARENT_ID,
	 "POST",
	 "/cgi-bin/x.cgi/a",
	 "r-1"},
	{"cgi-no-uri-no-traceparent",
	 {"GATEWAY_INTERFACE=CGI/1.1", "REQUEST_METHOD=GET", "SCRIPT_NAME=/cgi-bin/y",
	  "PATH_INFO=/p", "QUERY_STRING=a=b"},
	 "new",
	 "",
	 "GET",
	 "/cgi-bin/y/p",
	 ""},
	{"cgi-bad-traceparent",
	 {"GATEWAY_INTERFACE=CGI/1.1", "REQUEST_METHOD=GET", "REQUEST_URI=/z",
	  "HTTP_TRACEPARENT=00-" TRACE_ID "-" PARENT_ID "-0G"},
	 "new",
	 "",
	 "GET",
	 "/z",
	 ""},
	/* what a server under the shim with CTXSHIM_EXEC_TRACEPARENT=1 hands
	 * its CGI programs: the request's trace with its own span, marked with
	 * the program's pid (OWN_PID) */
	{"traceparent-own",
	 {"GATEWAY_INTERFACE=CGI/1.1", "REQUEST_METHOD=GET", "REQUEST_URI=/z",
	  "HTTP_TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	  "TRACEPARENT=00-" TRACE_ID "-" PARENT_ID "-01", OWN_PID},
	 TRACE_ID,
	 PARENT_ID,
	 "GET",
	 "/z",
	 ""},
	/* the same from a server that posix_spawn()s its CGI programs: marked
	 * with the program's parent */
	{"traceparent-own-spawned",
	 {"GATEWAY_INTERFACE=CGI/1.1", "REQUEST_METHOD=GET", "REQUEST_URI=/z",
	  "HTTP_TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	  "TRACEPARENT=00-" TRACE_ID "-" PARENT_ID "-01", OWN_PPID},
	 TRACE_ID,
	 PARENT_ID,
	 "GET",
	 "/z",
	 ""},
	{"traceparent-inherited-spawned",
	 {"GATEWAY_INTERFACE=CGI/1.1", "REQUEST_METHOD=GET", "REQUEST_URI=/z",
	  "HTTP_TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	  "TRACEPARENT=00-" TRACE_ID "-" PARENT_ID "-01", "CTXSHIM_TRACEPARENT_PPID=1"},
	 "0af7651916cd43dd8448eb211c80319c",
	 "b7ad6b7169203331",
	 "GET",
	 "/z",
	 ""},
	/* a TRACEPARENT the server was started with and passes on to every
	 * CGI program (no marker, or another pid's): not this request's */
	{"traceparent-inherited",
	 {"GATEWAY_INTERFACE=CGI/1.1", "REQUEST_METHOD=GET", "REQUEST_URI=/z",
	  "HTTP_TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	  "TRACEPARENT=00-" TRACE_ID "-" PARENT_ID "-01", "CTXSHIM_TRACEPARENT_PID=1"},
	 "0af7651916cd43dd8448eb211c80319c",
	 "b7ad6b7169203331",
	 "GET",
	 "/z",
	 ""},
	{"cgi-bad-env-traceparent",
	 {"GATEWAY_INTERFACE=CGI/1.1", "REQUEST_METHOD=PUT", "REQUEST_URI=/z",
	  "HTTP_TRACEPARENT=00-" TRACE_ID "-" PARENT_ID "-01", "TRACEPARENT=00-x"},
	 TRACE_ID,
	 PARENT_ID,
	 "PUT",
	 "/z",
	 ""},
	{"traceparent-not-cgi",
	 {"REQUEST_METHOD=GET", "REQUEST_URI=/z",
	  "TRACEPARENT=00-" TRACE_ID "-" PARENT_ID "-01"},
	 TRACE_ID,
	 PARENT_ID,
	 "",
	 "",
	 ""},
	{"carrier-off",
	 {"GATEWAY_INTERFACE=CGI/1.1", "REQUEST_METHOD=GET", "REQUEST_URI=/z",
	  "HTTP_TRACEPARENT=00-" TRACE_ID "-" PARENT_ID "-01", "CTXSHIM_ENV_CARRIER=0"},
	 "",
	 "",
	 "",
	 "",
	 ""},
	{"not-cgi",
	 {"REQUEST_METHOD=GET", "REQUEST_URI=/z",
	  "HTTP_TRACEPARENT=00-" TRACE_ID "-" PARENT_ID "-01"},
	 "",
	 "",
	 "",
	 "",
	 ""},
};

START_TEST(shim_env_carriers)
{
	const struct carrier_case *k = &carrier_cases[_i];
	char *argv[] = {(char *)threads_path(), "--wait", "1", NULL};
	char *own_argv[] = {"/bin/sh", "-c", OWN_PID " exec \"$0\" --wait 1",
			    (char *)threads_path(), NULL};
	char *env[16], line[256], arg[16], v[256], ppid[64], *out = NULL, *err = NULL,
							     *t;
	bool own = false;
	char *dump[] = {(char *)test_ctxdump_path(), (char *)test_stop_timeout_arg(),
			"--json", arg, NULL};
	struct test_child c;
	size_t n = 0;
	int st;

	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s",
		 test_env_path("CTXSHIM_LIB"));
	env[n++] = preload;
	for (size_t i = 0; k->env[i]; i++) {
		if (strcmp(k->env[i], OWN_PID) == 0) {
			own = true;
		} else if (strcmp(k->env[i], OWN_PPID) == 0) {
			snprintf(ppid, sizeof(ppid), OWN_PPID "%d", (int)getpid());
			env[n++] = ppid;
		} else {
			env[n++] = k->env[i];
		}
	}
	env[n] = NULL;
	/* the shell's pid is the program's after its exec */
	test_child_start(&c, own ? own_argv : argv, env, false);
	test_child_expect(&c, "READY ", line, sizeof(line), 10000);
	snprintf(arg, sizeof(arg), "%d", (int)c.pid);
	st = test_run_capture(dump, NULL, false, &out, &err, 30000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: status 0x%x: %s",
		      k->name, st, err);
	t = test_json_thread(out, c.pid);
	ck_assert_msg(t, "%s: main thread missing: %s", k->name, out);
	if (!*k->trace) {
		ck_assert_msg(strstr(t, "\"context\": null"), "%s: %s", k->name, t);
	} else {
		if (strcmp(k->trace, "new") == 0)
			ck_assert_msg(strstr(t, "\"trace_id\": \"") &&
					      !strstr(t, TRACE_ID) &&
					      !strstr(t, "\"trace_id\": \"000000"),
				      "%s: %s", k->name, t);
		else
			ck_assert_msg(strstr(t, k->trace), "%s: %s", k->name, t);
		ck_assert_msg(!strstr(t, "\"span_id\": \"" PARENT_ID "\""), "%s: %s",
			      k->name, t);
		ck_assert_str_eq(attr_value(t, "ctxshim.parent_span_id", v, sizeof(v)),
				 k->parent);
		ck_assert_str_eq(attr_value(t, "http.request.method", v, sizeof(v)),
				 k->method);
		ck_assert_str_eq(attr_value(t, "url.path", v, sizeof(v)), k->path);
		ck_assert_str_eq(
			attr_value(t, "http.request.header.x-request-id", v, sizeof(v)),
			k->rid);
	}
	free(t);
	free(out);
	free(err);
	st = test_child_finish(&c, 10000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "helper status 0x%x", st);
}
END_TEST

TEST_SUITE(ctxdump_shim_suite)
{
	Suite *s;
	TCase *tc;
	const char *why;

	if (access(test_shim_path(), R_OK) != 0)
		test_skip("%s is not built", test_shim_path());
	why = probe_shim();
	if (why)
		test_skip("%s", why);
	s = suite_create("ctxdump-shim");
	tc = tcase_create("shim");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, shim_context_and_records);
	tcase_add_loop_test(tc, shim_env_carriers, 0,
			    (int)(sizeof(carrier_cases) / sizeof(carrier_cases[0])));
	suite_add_tcase(s, tc);
	return s;
}
