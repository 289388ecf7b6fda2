/* SPDX-License-Identifier: Apache-2.0 */
/* Upstreams (hooks/hook-socket.c, "Upstreams"), through
 * test/helpers/upstream.c run under the shim: a proxy in one thread that
 * reads a client's request, sends a request on to a backend over a socket
 * it connect()ed, waits in epoll_wait() and reads the backend's answer; it
 * checks its own thread's context at each step and prints one RESULT line
 * (the modes are described there):
 *
 *  - the answer's read brings the client's request back (read, recv,
 *    readv, recvmsg), after a blocking and after a non-blocking connect;
 *  - an answer shaped like a request head is never a request;
 *  - an answer for a request answered, or a connection closed, brings
 *    nothing back; a kept-alive upstream follows the request that wrote
 *    to it last;
 *  - a number reused (socket(), dup2(), accept()) never carries the old
 *    request;
 *  - a zero-timeout wait after a round that read an answer and then
 *    another client's request head does not keep that request;
 *  - a client program's connect() and I/O publish nothing and return
 *    what the real calls return;
 *  - where an upstream could be taken for another request's (a pool's
 *    other thread, an inherited context, a shared upstream, a stale
 *    context in an event loop's batch, a vfork child's connect, a close
 *    the hooks did not see), the thread shows the right request or none.
 *
 * Each runs with the event log off and on (the hooks take other paths);
 * with it on, the log must show the switch with reason "upstream" exactly
 * where the helper expects one. */
#include "test-common.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test-integration.h"
#pragma GCC diagnostic pop

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TRACE1 "4bf92f3577b34da6a3ce929d0e0e4736"
#define TRACE2 "5c0a3f4688c45eb7b4df03ae1f1f5847"
#define EVIL   "e0e1e2e3e4e5e6e7e8e9eaebecedee01"

/* Run the helper in mode (how: its read call); events: with an event log,
 * whose "upstream" switches of TRACE1 and TRACE2 must number up1 and
 * up2. */
static void
run_upstream(const char *mode, const char *how, bool events, unsigned up1, unsigned up2)
{
	char path[4096], *out = NULL, *err = NULL, want[64], evpath[64], env_ev[96];
	char *argv[] = {path, (char *)mode, (char *)how, NULL};
	char *env_on[] = {env_ev, NULL};
	char *log = NULL;
	int st, fd = -1;

	unsetenv("CTXSHIM_EVENTS");
	snprintf(path, sizeof(path), "%s/upstream", test_env_path("HELPER_DIR"));
	if (events) {
		snprintf(evpath, sizeof(evpath), "/tmp/ctxshim-upstream-XXXXXX");
		fd = test_mkstemp(evpath);
		ck_assert_int_ge(fd, 0);
		snprintf(env_ev, sizeof(env_ev), "CTXSHIM_EVENTS=%s", evpath);
	}
	st = test_run_capture(argv, events ? env_on : NULL, true, &out, &err, 30000);
	snprintf(want, sizeof(want), "RESULT %s ", mode);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, want) &&
			      strstr(out, " fails=0\n"),
		      "upstream %s %s (events %s): status %#x%s%s:\n%s\n%s", mode,
		      how ? how : "", events ? "on" : "off", st,
		      WIFSIGNALED(st) ? ", killed by signal " : "",
		      WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "", out, err);
	if (events) {
		FILE *f = fdopen(fd, "r");
		size_t cap = 1 << 20, len;

		ck_assert_ptr_nonnull(f);
		log = calloc(1, cap + 1);
		ck_assert_ptr_nonnull(log);
		len = fread(log, 1, cap, f);
		log[len] = '\0';
		fclose(f);
		unlink(evpath);
		ck_assert_msg(it_events_count(log, TRACE1, "upstream") == up1 &&
				      it_events_count(log, TRACE2, "upstream") == up2,
			      "upstream %s %s: not %u and %u \"upstream\" events:\n%s",
			      mode, how ? how : "", up1, up2, log);
		ck_assert_msg(!strstr(log, EVIL), "the backend's trace in the log:\n%s",
			      log);
		free(log);
	}
	free(out);
	free(err);
}

static const char *const reads[] = {"read", "recv", "readv", "recvmsg"};

START_TEST(proxy_reads)
{
	run_upstream("proxy", reads[_i & 3], _i & 4, 1, 0);
}
END_TEST

START_TEST(proxy_nonblock)
{
	run_upstream("nonblock", NULL, _i & 1, 1, 0);
}
END_TEST

START_TEST(request_shaped_answer)
{
	run_upstream("shaped", NULL, _i & 1, 1, 0);
}
END_TEST

START_TEST(client_gone)
{
	run_upstream("gone", NULL, _i & 1, 0, 0);
}
END_TEST

START_TEST(kept_alive_upstream)
{
	run_upstream("keepalive", NULL, _i & 1, 1, 1);
}
END_TEST

START_TEST(fd_reuse)
{
	run_upstream("reuse", NULL, _i & 1, 0, 0);
}
END_TEST

START_TEST(answer_then_head_in_a_round)
{
	run_upstream("round", NULL, _i & 1, 1, 0);
}
END_TEST

START_TEST(client_program)
{
	run_upstream("client", NULL, _i & 1, 0, 0);
}
END_TEST

/* Where following an upstream could show a thread a request it does not
 * work on (helpers/upstream-attr.c describes each), the thread shows the
 * right one or none.  Each once showed the wrong request. */
static const struct {
	const char *mode, *want;
} attr_cases[] = {
	{"bg", "LAST bg-thread-after-its-own-read trace=- span=-"},
	{"inh", "LAST inheriting-thread-after-pooled-read trace=" TRACE2 " span="},
	{"mux", "LAST after-A's-answer trace=- span=-"},
	{"batch", "LAST after-A's-answer trace=- span=-"},
	{"retry", "LAST after-A's-answer trace=- span=-"},
	{"vfork", "LAST after-reading-a-pipe trace=- span=-"},
	{"unseen", "LAST after-reading-a-pipe trace=- span=-"},
};

START_TEST(no_wrong_request)
{
	char path[4096], *argv[] = {path, (char *)attr_cases[_i].mode, NULL};
	char *out = NULL, *err = NULL;
	int st;

	snprintf(path, sizeof(path), "%s/upstream-attr", test_env_path("HELPER_DIR"));
	st = test_run_capture(argv, NULL, true, &out, &err, 30000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
			      strstr(out, attr_cases[_i].want),
		      "upstream-attr %s: status %#x, want '%s':\n%s%s",
		      attr_cases[_i].mode, st, attr_cases[_i].want, out, err);
	free(out);
	free(err);
}
END_TEST

TEST_SUITE(upstream_suite)
{
	Suite *s = suite_create("preload-upstream");
	TCase *tc = tcase_create("upstream");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, proxy_reads, 0, 8);
	tcase_add_loop_test(tc, proxy_nonblock, 0, 2);
	tcase_add_loop_test(tc, request_shaped_answer, 0, 2);
	tcase_add_loop_test(tc, client_gone, 0, 2);
	tcase_add_loop_test(tc, kept_alive_upstream, 0, 2);
	tcase_add_loop_test(tc, fd_reuse, 0, 2);
	tcase_add_loop_test(tc, answer_then_head_in_a_round, 0, 2);
	tcase_add_loop_test(tc, client_program, 0, 2);
	tcase_add_loop_test(tc, no_wrong_request, 0,
			    sizeof(attr_cases) / sizeof(attr_cases[0]));
	suite_add_tcase(s, tc);
	return s;
}
