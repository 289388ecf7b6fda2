/* SPDX-License-Identifier: Apache-2.0 */
/* Context follows the work, observed from outside with ctxdump: worker
 * threads (from TRACEPARENT and from a real traced HTTP request), 10 000
 * threads starting and ending while ctxdump dumps in a loop, and forked
 * children (fork, _Fork, fork on a thread without a context). */
#include "test-flow.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>

#define TRACE_ID  "4bf92f3577b34da6a3ce929d0e0e4736"
#define PARENT_ID "00f067aa0ba902b7"

static char preload[4200], events[4200];

/* ctxdump --json PID; fails the test unless ctxdump exits 0 (or 1, a
 * partial dump, if partial_ok: threads may end while it works). */
static char *
dump(pid_t pid, bool partial_ok, int *status)
{
	char arg[16], *argv[] = {(char *)test_ctxdump_path(),
				 (char *)test_stop_timeout_arg(), "--json", arg, NULL};
	char *out, *err;
	int st;

	snprintf(arg, sizeof(arg), "%d", (int)pid);
	st = test_run_capture(argv, NULL, false, &out, &err, 60000);
	ck_assert_msg(WIFEXITED(st) && (WEXITSTATUS(st) == 0 ||
					(partial_ok && WEXITSTATUS(st) == 1)),
		      "ctxdump %d: status %#x: %s", (int)pid, st, err);
	free(err);
	if (status)
		*status = st;
	return out;
}

static char **
shim_env(const char *events_path)
{
	static char *env[4];
	size_t k = 0;

	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s",
		 test_env_path("CTXSHIM_LIB"));
	env[k++] = preload;
	env[k++] = "TRACEPARENT=00-" TRACE_ID "-" PARENT_ID "-01";
	if (events_path) {
		snprintf(events, sizeof(events), "CTXSHIM_EVENTS=%s", events_path);
		env[k++] = events;
	}
	env[k] = NULL;
	return env;
}

struct rec {
	char trace[40], span[24], record[24], slot[24];
};

static bool
thread_rec(const char *json, pid_t tid, struct rec *r)
{
	char *t = test_json_thread(json, tid);

	if (!t)
		return false;
	flow_json_str(t, "trace_id", r->trace, sizeof(r->trace));
	flow_json_str(t, "span_id", r->span, sizeof(r->span));
	flow_json_str(t, "record_addr", r->record, sizeof(r->record));
	flow_json_str(t, "slot_addr", r->slot, sizeof(r->slot));
	free(t);
	return true;
}

/* Both threads show the same context from records of their own. */
static void
assert_shared_context(const char *json,
		      pid_t a,
		      pid_t b,
		      const char *trace,
		      char *span,
		      size_t span_n)
{
	struct rec ra, rb;

	ck_assert_msg(thread_rec(json, a, &ra), "thread %d missing: %s", (int)a, json);
	ck_assert_msg(thread_rec(json, b, &rb), "thread %d missing: %s", (int)b, json);
	ck_assert_str_eq(ra.trace, trace);
	ck_assert_str_eq(rb.trace, trace);
	ck_assert_str_eq(ra.span, rb.span);
	ck_assert_str_ne(ra.span, PARENT_ID);
	ck_assert_str_ne(ra.record, "");
	ck_assert_str_ne(ra.record, rb.record);
	ck_assert_str_ne(ra.slot, rb.slot);
	snprintf(span, span_n, "%s", ra.span);
}

static char *
slurp(const char *path)
{
	char *buf = calloc(1, 1 << 20);
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_ge(read(fd, buf, (1 << 20) - 1), 0);
	close(fd);
	return buf;
}

START_TEST(worker_thread_from_traceparent)
{
	char *argv[] = {(char *)test_helper_path("ctxflow"), "worker", NULL};
	char line[256], span[24], ev[] = "/tmp/ctxshim-flow-XXXXXX", want[128];
	struct test_child c;
	struct rec r;
	char *json, *log;
	int main_tid, worker_tid, st;

	close(test_mkstemp(ev));
	test_child_start(&c, argv, shim_env(ev), false);
	test_child_expect(&c, "READY ", line, sizeof(line), 10000);
	ck_assert_int_eq(sscanf(line, "READY %*d %d %d", &main_tid, &worker_tid), 2);

	json = dump(c.pid, false, NULL);
	assert_shared_context(json, main_tid, worker_tid, TRACE_ID, span, sizeof(span));
	free(json);

	/* The worker ends: it is gone, main keeps its context. */
	test_child_send(&c, "release\n");
	test_child_expect(&c, "JOINED ", line, sizeof(line), 10000);
	json = dump(c.pid, false, NULL);
	ck_assert_msg(!thread_rec(json, worker_tid, &r), "%s", json);
	ck_assert_msg(thread_rec(json, main_tid, &r), "%s", json);
	ck_assert_str_eq(r.trace, TRACE_ID);
	ck_assert_str_eq(r.span, span);
	free(json);
	st = test_child_finish(&c, 10000);
	ck_assert_int_eq(st, 0);

	/* ... and cleared its record on the way out. */
	log = slurp(ev);
	unlink(ev);
	snprintf(want, sizeof(want),
		 "tid=%d fd=- detach trace=- span=- reason=thread-exit\n", worker_tid);
	ck_assert_msg(strstr(log, want), "no '%s' in:\n%s", want, log);
	free(log);
}
END_TEST

START_TEST(worker_thread_from_http_request)
{
	char *argv[] = {(char *)test_helper_path("flow-http"), "worker", NULL};
	char *env[] = {preload, NULL};
	char line[256], span[24], ctx[128], want[128], *json, *resp;
	struct test_child c;
	struct rec r;
	int port, conn_tid, worker_tid, fd, st;

	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s",
		 test_env_path("CTXSHIM_LIB"));
	test_child_start(&c, argv, env, false);
	test_child_expect(&c, "READY ", line, sizeof(line), 10000);
	ck_assert_int_eq(sscanf(line, "READY %*d %d", &port), 1);
	fd = flow_http_send(port, '7');
	test_child_expect(&c, "WORKERS ", line, sizeof(line), 10000);
	ck_assert_int_eq(sscanf(line, "WORKERS %*d %d %d", &conn_tid, &worker_tid), 2);

	/* The thread that read the request and the worker it started (which
	 * blocks) show the request's context, each from its own record. */
	json = dump(c.pid, false, NULL);
	assert_shared_context(json, conn_tid, worker_tid,
			      "77777777777777777777777777777777", span, sizeof(span));
	free(json);

	test_child_send(&c, "release\n");
	resp = flow_http_read(fd);
	snprintf(want, sizeof(want), "trace=77777777777777777777777777777777 span=%s",
		 span);
	flow_body_ctx(resp, "worker", ctx, sizeof(ctx));
	ck_assert_str_eq(ctx, want);
	flow_body_ctx(resp, "joined", ctx, sizeof(ctx));
	ck_assert_str_eq(ctx, want);
	free(resp);
	test_child_expect(&c, "JOINED", line, sizeof(line), 10000);
	json = dump(c.pid, false, NULL);
	ck_assert_msg(!thread_rec(json, worker_tid, &r), "%s", json);
	ck_assert_msg(!thread_rec(json, conn_tid, &r), "%s", json);
	free(json);
	st = test_child_finish(&c, 10000);
	ck_assert_int_eq(st, 0);
}
END_TEST

/* One dump of the churning helper: no thread shows a context it should
 * not have.  Returns how many threads showed the main context. */
static unsigned
check_churn_dump(const char *json, pid_t pid, const char *span)
{
	const char *p = json;
	unsigned with_ctx = 0;

	while ((p = strstr(p, "\"tid\": "))) {
		pid_t tid = (pid_t)strtol(p + 7, NULL, 10);
		char *t = test_json_thread(p, tid);
		char comm[32], trace[40], sp[24];

		ck_assert_ptr_nonnull(t);
		flow_json_str(t, "comm", comm, sizeof(comm));
		flow_json_str(t, "trace_id", trace, sizeof(trace));
		flow_json_str(t, "span_id", sp, sizeof(sp));
		if (tid == pid || strcmp(comm, "c-none") == 0 ||
		    strcmp(comm, "w-none") == 0 || trace[0]) {
			if (tid == pid) {
				ck_assert_str_eq(trace, TRACE_ID);
			} else if (strcmp(comm, "c-none") == 0 ||
				   strcmp(comm, "w-none") == 0) {
				/* started by a thread without a context: a
				 * context here would be stale */
				ck_assert_msg(!trace[0], "thread %d (%s) shows %s",
					      (int)tid, comm, trace);
			} else {
				ck_assert_str_eq(trace, TRACE_ID);
			}
			if (trace[0]) {
				ck_assert_str_eq(sp, span);
				with_ctx++;
			}
		}
		free(t);
		p += 7;
	}
	return with_ctx;
}

START_TEST(ten_thousand_threads_under_ctxdump)
{
	char *argv[] = {(char *)test_helper_path("ctxflow"), "churn", "10000", NULL};
	char line[512], span[24];
	struct test_child c;
	unsigned long created, mismatches;
	long rss0, rss1;
	unsigned dumps = 0, partial = 0, seen = 0;
	const char *sp;
	int st;

	test_child_start(&c, argv, shim_env(NULL), false);
	test_child_expect(&c, "READY ", line, sizeof(line), 10000);
	sp = strstr(line, "span=");
	ck_assert_ptr_nonnull(sp);
	snprintf(span, sizeof(span), "%s", sp + 5);
	for (;;) {
		struct pollfd pfd = {.fd = c.out_fd, .events = POLLIN};
		char *json = dump(c.pid, true, &st);

		dumps++;
		partial += WEXITSTATUS(st) == 1;
		seen += check_churn_dump(json, c.pid, span);
		free(json);
		if (c.len || poll(&pfd, 1, 0) > 0)
			break;
	}
	test_child_expect(&c, "RESULT ", line, sizeof(line), 120000);
	ck_assert_int_eq(sscanf(line,
				"RESULT created=%lu mismatches=%lu rss_start_kb=%ld "
				"rss_end_kb=%ld",
				&created, &mismatches, &rss0, &rss1),
			 4);
	fprintf(stderr,
		"churn: %lu threads, %u dumps (%u partial), %u contexts seen, RSS %ld "
		"-> %ld kB\n",
		created, dumps, partial, seen, rss0, rss1);
	ck_assert_uint_eq(created, 10400);
	ck_assert_uint_eq(mismatches, 0);
	ck_assert_uint_ge(dumps, 2);
	/* Bounded: records live in each thread's TLS; nothing accumulates per
	 * thread.  (Not under ASan, whose quarantine keeps freed memory.) */
#ifndef __SANITIZE_ADDRESS__
	ck_assert_msg(rss1 - rss0 < 4096, "RSS grew from %ld to %ld kB", rss0, rss1);
#endif
	st = test_child_finish(&c, 10000);
	ck_assert_int_eq(st, 0);
}
END_TEST

static const char *const fork_kinds[] = {"main", "_Fork", "early"};

START_TEST(fork_child_keeps_forking_thread_context)
{
	const char *kind = fork_kinds[_i];
	char *argv[] = {(char *)test_helper_path("ctxflow"), "fork", (char *)kind,
			NULL};
	char line[256], parent_ctx[128] = "", child_ctx[128] = "", want[128];
	char inst_b[64], inst_p[64], inst_c[64], *jb, *jp, *jc;
	struct test_child c;
	pid_t parent = 0, child = 0;
	struct rec r, rb, rp;
	const char *p;
	unsigned n_threads = 0;
	int i, st;

	test_child_start(&c, argv, shim_env(NULL), false);
	/* The parent before the fork, to compare with after. */
	test_child_expect(&c, "FORKING ", line, sizeof(line), 10000);
	jb = dump(c.pid, false, NULL);
	ck_assert_msg(thread_rec(jb, c.pid, &rb), "%s", jb);
	flow_json_str(jb, "service.instance.id", inst_b, sizeof(inst_b));
	ck_assert_uint_eq(strlen(inst_b), 36);
	free(jb);
	test_child_send(&c, "fork\n");
	for (i = 0; i < 2; i++) {
		test_child_readline(&c, line, sizeof(line), 10000);
		if (strncmp(line, "PARENT ", 7) == 0) {
			parent = (pid_t)strtol(line + 7, NULL, 10);
			snprintf(parent_ctx, sizeof(parent_ctx), "%s",
				 strstr(line, "trace="));
		} else {
			snprintf(want, sizeof(want), "CHILD %s ", kind);
			ck_assert_msg(strncmp(line, want, strlen(want)) == 0, "%s",
				      line);
			child = (pid_t)strtol(line + strlen(want), NULL, 10);
			snprintf(child_ctx, sizeof(child_ctx), "%s",
				 strstr(line, "trace="));
		}
	}
	ck_assert_int_eq(parent, c.pid);
	ck_assert_int_gt(child, 0);
	ck_assert_msg(strncmp(parent_ctx, "trace=" TRACE_ID, 38) == 0, "%s",
		      parent_ctx);

	jp = dump(parent, false, NULL);
	jc = dump(child, false, NULL);
	/* Only the forking thread exists in the child ... */
	for (p = jc; (p = strstr(p, "\"tid\": ")); p++)
		n_threads++;
	ck_assert_msg(n_threads == 1, "%s", jc);
	ck_assert_msg(thread_rec(jc, child, &r), "%s", jc);
	/* ... with the context it had in the parent. */
	if (strcmp(kind, "early") == 0) {
		ck_assert_str_eq(r.trace, "");
		ck_assert_str_eq(child_ctx, FLOW_NONE);
	} else {
		snprintf(want, sizeof(want), "trace=%s span=%s", r.trace, r.span);
		ck_assert_str_eq(want, parent_ctx);
		ck_assert_str_eq(child_ctx, parent_ctx);
	}
	/* Its own process context: a new instance id, its own pid. */
	ck_assert_ptr_null(strstr(jc, "\"process_context\": null"));
	flow_json_str(jp, "service.instance.id", inst_p, sizeof(inst_p));
	flow_json_str(jc, "service.instance.id", inst_c, sizeof(inst_c));
	ck_assert_uint_eq(strlen(inst_c), 36);
	ck_assert_str_ne(inst_p, inst_c);
	/* The parent is the process it was: the fork changed neither its
	 * process context nor its main thread's record (the child's side of
	 * the fork must run in the child only). */
	ck_assert_str_eq(inst_p, inst_b);
	ck_assert_msg(thread_rec(jp, parent, &rp), "%s", jp);
	ck_assert_str_eq(rp.trace, rb.trace);
	ck_assert_str_eq(rp.span, rb.span);
	ck_assert_str_eq(rp.record, rb.record);
	ck_assert_str_eq(rp.slot, rb.slot);
	/* process.pid is an int (semantic conventions): a JSON number. */
	p = strstr(jc, "\"process.pid\": ");
	ck_assert_msg(p, "%s", jc);
	ck_assert_int_eq(strtol(p + strlen("\"process.pid\": "), NULL, 10), child);
	free(jp);
	free(jc);
	st = test_child_finish(&c, 10000);
	ck_assert_int_eq(st, 0);
}
END_TEST

TEST_SUITE(ctxdump_flow_suite)
{
	Suite *s = suite_create("ctxdump-flow");
	TCase *tc;

	if (access(test_helper_path("ctxflow"), X_OK) != 0)
		test_skip("ctxflow is not built");
	if (access(test_ctxdump_path(), X_OK) != 0)
		test_skip("ctxdump is not built");
	tc = tcase_create("threads");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, worker_thread_from_traceparent);
	if (access(test_helper_path("flow-http"), X_OK) == 0)
		tcase_add_test(tc, worker_thread_from_http_request);
	else
		fprintf(stderr, "flow-http is not built: no HTTP worker test\n");
	tcase_add_test(tc, ten_thousand_threads_under_ctxdump);
	suite_add_tcase(s, tc);
	tc = tcase_create("fork");
	tcase_add_loop_test(tc, fork_child_keeps_forking_thread_context, 0,
			    sizeof(fork_kinds) / sizeof(fork_kinds[0]));
	suite_add_tcase(s, tc);
	return s;
}
