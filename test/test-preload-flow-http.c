/* SPDX-License-Identifier: Apache-2.0 */
/* Several traced HTTP requests in flight at once, each handed to a pool
 * thread or a coroutine: the work of each request runs under that
 * request's context and no other.  The contexts come from real requests
 * (the socket-level hooks parse their traceparent); the helper flow-http
 * reports, in each response, what every place the work ran read from its
 * own otel_thread_ctx_v1. */
#include "test-flow.h"

#include <sys/wait.h>

#define N_REQ 4

static char preload[4200];

static const char *
flow_http(void)
{
	static char path[4096];

	snprintf(path, sizeof(path), "%s/flow-http", test_env_path("HELPER_DIR"));
	return path;
}

/* Start flow-http MODE N_REQ, send N_REQ requests with trace-ids 1111…,
 * 2222…, … and collect the responses. */
static void
serve(const char *mode, char *resp[N_REQ], struct test_child *c)
{
	char n[8], *argv[] = {(char *)flow_http(), (char *)mode, n, NULL};
	char *env[] = {preload, NULL};
	char line[256];
	int fds[N_REQ], port, i;

	snprintf(n, sizeof(n), "%d", N_REQ);
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s",
		 test_env_path("CTXSHIM_LIB"));
	test_child_start(c, argv, env, false);
	test_child_expect(c, "READY ", line, sizeof(line), 10000);
	ck_assert_int_eq(sscanf(line, "READY %*d %d", &port), 1);
	/* All sent before any is read: the server holds each request's work
	 * until all are in flight. */
	for (i = 0; i < N_REQ; i++)
		fds[i] = flow_http_send(port, (char)('1' + i));
	for (i = 0; i < N_REQ; i++)
		resp[i] = flow_http_read(fds[i]);
}

/* Every place listed in wheres saw request i's context: its trace-id and
 * one server span-id, not the caller's (the parent-id). */
static void
check_responses(char *resp[N_REQ], const char *const *wheres, size_t n_wheres)
{
	char spans[N_REQ][17];
	int i, j;

	for (i = 0; i < N_REQ; i++) {
		char want[64], first[128] = "", ctx[128];
		size_t w;

		ck_assert_msg(strncmp(resp[i], "HTTP/1.1 200 ", 13) == 0, "%s",
			      resp[i]);
		memset(want, '1' + i, 32);
		want[32] = '\0';
		for (w = 0; w < n_wheres; w++) {
			flow_body_ctx(resp[i], wheres[w], ctx, sizeof(ctx));
			ck_assert_msg(strncmp(ctx, "trace=", 6) == 0 &&
					      strncmp(ctx + 6, want, 32) == 0,
				      "request %d, %s: %s", i, wheres[w], ctx);
			ck_assert_msg(!strstr(ctx, "00f067aa0ba902b7"), "%s", ctx);
			if (!w)
				snprintf(first, sizeof(first), "%s", ctx);
			ck_assert_msg(strcmp(ctx, first) == 0,
				      "request %d: %s is %s, read was %s", i, wheres[w],
				      ctx, first);
		}
		snprintf(spans[i], sizeof(spans[i]), "%s", strstr(first, "span=") + 5);
		for (j = 0; j < i; j++)
			ck_assert_str_ne(spans[i], spans[j]);
	}
}

static void
finish(struct test_child *c, char *resp[N_REQ])
{
	int i, st = test_child_finish(c, 10000);

	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "flow-http status %#x",
		      st);
	for (i = 0; i < N_REQ; i++)
		free(resp[i]);
}

START_TEST(http_libuv_pool)
{
	static const char *const wheres[] = {"read", "work", "after"};
	struct test_child c;
	char *resp[N_REQ];

	serve("uv", resp, &c);
	check_responses(resp, wheres, 3);
	finish(&c, resp);
}
END_TEST

START_TEST(http_glib_pool)
{
	static const char *const wheres[] = {"read", "item", "conn"};
	struct test_child c;
	char *resp[N_REQ];

	serve("glib", resp, &c);
	check_responses(resp, wheres, 3);
	finish(&c, resp);
}
END_TEST

START_TEST(http_ucontext_coroutines)
{
	static const char *const wheres[] = {"read", "resumed"};
	struct test_child c;
	char *resp[N_REQ], line[256];

	serve("ucontext", resp, &c);
	check_responses(resp, wheres, 2);
	/* the scheduler, between its coroutines, has none of theirs */
	test_child_expect(&c, "SCHED ", line, sizeof(line), 5000);
	ck_assert_str_eq(line, "SCHED " FLOW_NONE);
	test_child_expect(&c, "SCHED ", line, sizeof(line), 5000);
	ck_assert_str_eq(line, "SCHED " FLOW_NONE);
	finish(&c, resp);
}
END_TEST

/* A scheduler that reads each request's head itself (its thread then
 * shows that request) and makes a coroutine for it.  A switch back from a
 * coroutine shows what the scheduler showed when it switched away, but
 * not a request answered meanwhile (old: the request the scheduler read
 * last, answered by its own coroutine, was shown again, until the
 * scheduler's next wait). */
static void
scheduler_reads(const char *mode)
{
	static const char *const wheres[] = {"start", "resumed"};
	struct test_child c;
	char *resp[N_REQ], line[256], want[128];

	serve(mode, resp, &c);
	check_responses(resp, wheres, 2);
	/* in flight: the request read last, with the span its coroutine
	 * showed */
	flow_body_ctx(resp[N_REQ - 1], "start", want, sizeof(want));
	test_child_expect(&c, "SCHED read ", line, sizeof(line), 5000);
	ck_assert_str_eq(line + strlen("SCHED read "), want);
	test_child_expect(&c, "SCHED answered ", line, sizeof(line), 5000);
	ck_assert_str_eq(line, "SCHED answered " FLOW_NONE);
	finish(&c, resp);
}

START_TEST(http_ucontext_scheduler_reads)
{
	scheduler_reads("ucontext-sched");
}
END_TEST

/* The same, each coroutine moving its connection to a dup() and closing
 * the original first: the request goes on through the copy, shown by the
 * coroutine from start to response and by the scheduler after the switch
 * back (old: the close cleared the coroutine's, and the switch back read
 * the scheduler's, stamped with the closed descriptor, as closed). */
START_TEST(http_ucontext_moved_to_copy)
{
	scheduler_reads("ucontext-moved");
}
END_TEST

/* A coroutine that reads its request's body through a dup() of the
 * connection (the copy becomes the connection's leader, the descriptor
 * the scheduler read the head from a link) and switches back: the
 * scheduler still shows the request it read last, which is in flight
 * (old: the link's slot read as answered, and the switch back dropped
 * it). */
START_TEST(http_ucontext_read_through_copy)
{
	static const char *const wheres[] = {"start", "body", "resumed"};
	char n[8], *argv[] = {(char *)flow_http(), "ucontext-dup", n, NULL};
	char *env[] = {preload, NULL};
	char *resp[N_REQ], line[256], want[128];
	struct test_child c;
	int fds[N_REQ], port, i;

	snprintf(n, sizeof(n), "%d", N_REQ);
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s",
		 test_env_path("CTXSHIM_LIB"));
	test_child_start(&c, argv, env, false);
	test_child_expect(&c, "READY ", line, sizeof(line), 10000);
	ck_assert_int_eq(sscanf(line, "READY %*d %d", &port), 1);
	for (i = 0; i < N_REQ; i++)
		fds[i] = flow_http_send_head(port, (char)('1' + i), 4);
	/* the bodies only once every head was read */
	test_child_expect(&c, "HEADS", line, sizeof(line), 5000);
	for (i = 0; i < N_REQ; i++)
		ck_assert_int_eq(write(fds[i], "body", 4), 4);
	for (i = 0; i < N_REQ; i++)
		resp[i] = flow_http_read(fds[i]);
	check_responses(resp, wheres, 3);
	flow_body_ctx(resp[N_REQ - 1], "start", want, sizeof(want));
	test_child_expect(&c, "SCHED body ", line, sizeof(line), 5000);
	ck_assert_str_eq(line + strlen("SCHED body "), want);
	/* answered through the original, a copy of the connection now: not
	 * shown after the switch back (old: came back) */
	test_child_expect(&c, "SCHED answered ", line, sizeof(line), 5000);
	ck_assert_str_eq(line, "SCHED answered " FLOW_NONE);
	finish(&c, resp);
}
END_TEST

/* The coroutine of the request the scheduler read last closes its
 * connection unanswered, and a dup() of another connection takes the
 * number: the switch back must not show the closed request (old: the
 * new copy's slot read as "a connection that became a copy", whose
 * answer is not checked, and the request came back until the next
 * wait). */
START_TEST(http_ucontext_closed_number_reused_by_copy)
{
	char *resp[N_REQ], line[256], want[33];
	struct test_child c;
	int i;

	serve("ucontext-reuse", resp, &c);
	ck_assert_str_eq(resp[N_REQ - 1], "");
	for (i = 0; i < N_REQ - 1; i++)
		ck_assert_msg(strncmp(resp[i], "HTTP/1.1 200 ", 13) == 0, "%s",
			      resp[i]);
	/* before the close: the request read last, in flight */
	memset(want, '1' + N_REQ - 1, 32);
	want[32] = '\0';
	test_child_expect(&c, "SCHED read ", line, sizeof(line), 5000);
	ck_assert_msg(strncmp(line, "SCHED read trace=", 17) == 0 &&
			      strncmp(line + 17, want, 32) == 0,
		      "%s", line);
	test_child_expect(&c, "SCHED closed ", line, sizeof(line), 5000);
	ck_assert_str_eq(line, "SCHED closed " FLOW_NONE);
	finish(&c, resp);
}
END_TEST

/* A multiplexed FastCGI connection: request 0's coroutine reads it and
 * yields, request 1's reads it (the connection's seq moves) and answers
 * it; request 0's coroutine, switched back to, still shows its request
 * (old: the moved seq read as request 0 answered, and the switch back
 * dropped it). */
START_TEST(http_ucontext_fcgi_multiplexed)
{
	char *argv[] = {(char *)flow_http(), "ucontext-fcgi", NULL};
	char *env[] = {preload, NULL};
	char line[256], read0[256], want[64];
	struct test_child c;
	int st;

	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s",
		 test_env_path("CTXSHIM_LIB"));
	test_child_start(&c, argv, env, false);
	test_child_expect(&c, "FCGI 0 read ", line, sizeof(line), 10000);
	snprintf(read0, sizeof(read0), "%s", line + strlen("FCGI 0 read "));
	snprintf(want, sizeof(want), "trace=%s", "11111111111111111111111111111111");
	ck_assert_msg(strncmp(read0, want, strlen(want)) == 0, "%s", line);
	test_child_expect(&c, "FCGI 1 read ", line, sizeof(line), 5000);
	snprintf(want, sizeof(want), "trace=%s", "22222222222222222222222222222222");
	ck_assert_msg(strncmp(line + strlen("FCGI 1 read "), want, strlen(want)) == 0,
		      "%s", line);
	test_child_expect(&c, "FCGI 0 resumed ", line, sizeof(line), 5000);
	ck_assert_str_eq(line + strlen("FCGI 0 resumed "), read0);
	st = test_child_finish(&c, 10000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "flow-http status %#x",
		      st);
}
END_TEST

/* The scheduler still shows the first of two pipelined requests after
 * another thread answered it (that response made the second one
 * current), switches to a coroutine that answers the second one, and
 * back: the first request comes back, as it does without pipelining
 * (_i 1: the thread's work after its response) -- old: judged by the
 * second request's state, dropped. */
START_TEST(http_ucontext_pipelined_answered)
{
	char *argv[] = {(char *)flow_http(), "ucontext-pipelined",
			_i ? "single" : "pipelined", NULL};
	char *env[] = {preload, NULL};
	char line[256], want[256];
	struct test_child c;
	int st;

	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s",
		 test_env_path("CTXSHIM_LIB"));
	test_child_start(&c, argv, env, false);
	snprintf(want, sizeof(want), "trace=%s", "11111111111111111111111111111111");
	test_child_expect(&c, "PIPE read ", line, sizeof(line), 10000);
	ck_assert_msg(strncmp(line + strlen("PIPE read "), want, strlen(want)) == 0,
		      "%s", line);
	snprintf(want, sizeof(want), "%s", line + strlen("PIPE read "));
	test_child_expect(&c, "PIPE answered ", line, sizeof(line), 5000);
	ck_assert_str_eq(line + strlen("PIPE answered "), want);
	test_child_expect(&c, "PIPE resumed ", line, sizeof(line), 5000);
	ck_assert_str_eq(line + strlen("PIPE resumed "), want);
	st = test_child_finish(&c, 10000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "flow-http status %#x",
		      st);
}
END_TEST

/* A setcontext() that fails (EFAULT) leaves the thread as it was: the
 * request it shows is still the socket level's, which the next wait
 * clears (old: the failed switch had handed the socket level the
 * ucontext's request, and the thread kept showing the last one it read
 * after its wait). */
START_TEST(http_setcontext_failure_keeps_socket_level)
{
	static const char *const wheres[] = {"read"};
	struct test_child c;
	char *resp[N_REQ], line[256], want[128];

	serve("setcontext-fail", resp, &c);
	check_responses(resp, wheres, 1);
	flow_body_ctx(resp[N_REQ - 1], "read", want, sizeof(want));
	test_child_expect(&c, "SCHED before ", line, sizeof(line), 5000);
	ck_assert_str_eq(line + strlen("SCHED before "), want);
	test_child_expect(&c, "SCHED failed ", line, sizeof(line), 5000);
	ck_assert_str_eq(line + strlen("SCHED failed "), want);
	test_child_expect(&c, "SCHED waited ", line, sizeof(line), 5000);
	ck_assert_str_eq(line, "SCHED waited " FLOW_NONE);
	finish(&c, resp);
}
END_TEST

TEST_SUITE(preload_flow_http_suite)
{
	Suite *s = suite_create("preload-flow-http");
	TCase *tc = tcase_create("requests in flight");

	if (access(flow_http(), X_OK) != 0)
		test_skip("flow-http is not built (install libuv1-dev and "
			  "libglib2.0-dev)");
	tcase_add_test(tc, http_libuv_pool);
	tcase_add_test(tc, http_glib_pool);
	tcase_add_test(tc, http_ucontext_coroutines);
	tcase_add_test(tc, http_ucontext_scheduler_reads);
	tcase_add_test(tc, http_ucontext_moved_to_copy);
	tcase_add_test(tc, http_ucontext_read_through_copy);
	tcase_add_test(tc, http_ucontext_closed_number_reused_by_copy);
	tcase_add_test(tc, http_ucontext_fcgi_multiplexed);
	tcase_add_loop_test(tc, http_ucontext_pipelined_answered, 0, 2);
	tcase_add_test(tc, http_setcontext_failure_keeps_socket_level);
	suite_add_tcase(s, tc);
	return s;
}
