/* SPDX-License-Identifier: Apache-2.0 */
/* Edge cases of the socket level found by review, through
 * test/helpers/sock-edge.c run under the shim (it checks its own
 * thread's context and prints one RESULT line):
 *
 *  - urgent data (MSG_OOB) read in the middle of a request head was fed to
 *    the scanner as stream bytes: the traceparent got a stray byte and the
 *    request a new trace;
 *  - poll/ppoll/__poll_chk read the application's array before the call
 *    while a request's context was published: a bad pointer, or an nfds
 *    larger than the array, was a SIGSEGV in the hook where the kernel
 *    returns -1/EFAULT (the idle clear they exist for is checked too, with
 *    select/pselect), and ppoll/__ppoll_chk with an invalid timeout on a
 *    ready fd returned its count where the kernel says EINVAL;
 *  - writev/sendmsg with "HTTP/1.1 " and "100 Continue" in separate iovecs
 *    counted as the final response: the body was read without the
 *    request's context;
 *  - a response write the kernel took only the first 4 bytes of, the rest
 *    of its buffer unmapped: the write hooks read 12 bytes of it (a
 *    status line's) whatever the call returned, and faulted;
 *  - "100 Continue" and the final response in one write counted as
 *    interim only, and a write with the responses of two pipelined
 *    requests answered only the first: the connection's next request was
 *    read under the previous one's context;
 *  - a response written with sendmmsg() or pwritev2() was unseen: the
 *    connection's next request was queued behind the unanswered one and
 *    read under its context;
 *  - pipelined responses written with one sendmmsg() of several messages:
 *    only the first message that carried bytes was seen, so two responses
 *    in two messages answered one request (the next request was read under
 *    the second one's context), a head in one message and its body in the
 *    next never ended the response (the pipelined request behind it never
 *    became current), and so did a response whose message the kernel took
 *    in part, its rest written after;
 *  - a request body moved out of the connection with splice() (HAProxy's
 *    splice-request) was unseen: the scanner still counted it as to come
 *    and took the connection's next requests for it (no context);
 *  - a libuv after-work callback that answered its request while the
 *    socket level published another request (read in the same loop
 *    iteration) restored that one when it returned, and it stayed
 *    published on the idle loop (test/helpers/uv-restore.c);
 *  - after a response, the next request's first byte read through a dup()
 *    of the connection, or a write on a connection with no request: with
 *    the event log off, no check saw the context cleared there
 *    (hook-socket.c, sk_follow());
 *  - a server back in its wait after a response (the epoll waits, poll,
 *    select and their kin): the waits' fast path, which clears the
 *    answered request's context with the event log off, was checked only
 *    indirectly (a mutation audit: removing epoll_wait's clear failed
 *    preload-upstream only).
 *  - a forward proxy's CONNECT: neither its 407 (the connection stays
 *    HTTP/1, the retry gets its context) nor its 200 (the tunnel's bytes
 *    are no requests of the proxy's) was checked but by
 *    integration-apache's 2xx (a mutation audit: ignoring the status code
 *    survived every preload test);
 *  - dup2() of a connection onto itself, a connection accept4() returns
 *    as fd 0, and a head read with readv() of one iovec: none was checked
 *    (a mutation audit: forgetting the connection on the first, ignoring
 *    fd 0 on the second, feeding readv only past one iovec survived).
 *
 * Each runs with the event log off and on (the hooks take other paths). */
#include "test-common.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void
run_helper(const char *helper, const char *mode, const char *how, bool events)
{
	char path[4096], *out = NULL, *err = NULL, want[64];
	char *argv[] = {path, (char *)mode, (char *)how, NULL};
	char *env_on[] = {"CTXSHIM_EVENTS=/dev/null", NULL};
	int st;

	unsetenv("CTXSHIM_EVENTS");
	snprintf(path, sizeof(path), "%s/%s", test_env_path("HELPER_DIR"), helper);
	st = test_run_capture(argv, events ? env_on : NULL, true, &out, &err, 30000);
	snprintf(want, sizeof(want), "RESULT %s ", mode);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, want) &&
			      strstr(out, " fails=0\n"),
		      "%s %s %s (events %s): status %#x%s%s:\n%s\n%s", helper, mode,
		      how ? how : "", events ? "on" : "off", st,
		      WIFSIGNALED(st) ? ", killed by signal " : "",
		      WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "", out, err);
	free(out);
	free(err);
}

static void
run_edge(const char *mode, const char *how, bool events)
{
	run_helper("sock-edge", mode, how, events);
}

START_TEST(oob_not_stream)
{
	run_edge("oob", _i & 1 ? "recvmsg" : "recv", _i & 2);
}
END_TEST

START_TEST(poll_efault)
{
	run_edge("poll-efault", NULL, _i & 1);
}
END_TEST

START_TEST(continue_split_iovecs)
{
	run_edge("continue", _i & 1 ? "sendmsg" : "writev", _i & 2);
}
END_TEST

/* The same in one iovec: the response write's usual path, which decides
 * "interim" from the status code's first digit. */
START_TEST(continue_one_iovec)
{
	run_edge("continue", "writev1", _i & 1);
}
END_TEST

START_TEST(continue_and_final)
{
	run_edge("continue-final", _i & 1 ? "writev" : "write", _i & 2);
}
END_TEST

/* sock-edge short, with libshort-write.so preloaded after the shim, so
 * that the shim's real_*() reach it (RTLD_NEXT) */
START_TEST(short_write)
{
	static const char *const how[] = {"write", "send", "writev", "sendmsg",
					  "pipelined"};
	char path[4096], pre[8300], *out = NULL, *err = NULL;
	char *argv[] = {path, "short", (char *)how[_i % 5], NULL};
	char *env[] = {pre, _i >= 5 ? "CTXSHIM_EVENTS=/dev/null" : NULL, NULL};
	int st;

	unsetenv("CTXSHIM_EVENTS");
	snprintf(path, sizeof(path), "%s/sock-edge", test_env_path("HELPER_DIR"));
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s %s/libshort-write.so",
		 test_env_path("CTXSHIM_LIB"), test_env_path("HELPER_DIR"));
	st = test_run_capture(argv, env, false, &out, &err, 30000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
			      strstr(out, "RESULT short fails=0\n"),
		      "short %s (events %s): status %#x%s%s:\n%s\n%s", how[_i % 5],
		      _i >= 5 ? "on" : "off", st,
		      WIFSIGNALED(st) ? ", killed by signal " : "",
		      WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "", out, err);
	free(out);
	free(err);
}
END_TEST

START_TEST(batched_responses)
{
	run_edge("batch", NULL, _i & 1);
}
END_TEST

START_TEST(response_writers)
{
	run_edge("writers", _i & 1 ? "pwritev2" : "sendmmsg", _i & 2);
}
END_TEST

static const char *const mmsg_how[] = {"two", "headbody", "short", "empty"};

START_TEST(mmsg_pipelined)
{
	run_edge("mmsg", mmsg_how[_i % 4], _i >= 4);
}
END_TEST

START_TEST(splice_body)
{
	run_edge("splice", NULL, _i & 1);
}
END_TEST

/* With the event log off the hooks clear inline for a read on the
 * connection's own descriptor; these two reach sk_follow()'s own clear,
 * which no other check did. */
START_TEST(after_response)
{
	run_edge("after", _i & 1 ? "other-write" : "dup-read", _i & 2);
}
END_TEST

static const char *const idle_waits[] = {"epoll_wait",  "epoll_pwait", "epoll_pwait2",
					 "poll",        "__poll_chk",  "ppoll",
					 "__ppoll_chk", "select",      "pselect"};
#define N_IDLE_WAITS (int)(sizeof(idle_waits) / sizeof(idle_waits[0]))

START_TEST(idle_after_response)
{
	run_edge("idle", idle_waits[_i % N_IDLE_WAITS], _i >= N_IDLE_WAITS);
}
END_TEST

START_TEST(connect_tunnel)
{
	run_edge("connect", _i & 1 ? "200" : "407", _i & 2);
}
END_TEST

START_TEST(fd_edges)
{
	static const char *const how[] = {"dup2-self", "accept4-0", "readv1"};

	run_edge("fd", how[_i % 3], _i >= 3);
}
END_TEST

START_TEST(uv_after_work_restore)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/uv-restore", test_env_path("HELPER_DIR"));
	if (access(path, X_OK) != 0)
		return; /* built without libuv */
	run_helper("uv-restore", "uv-restore", NULL, _i & 1);
}
END_TEST

TEST_SUITE(sockedge_suite)
{
	Suite *s = suite_create("preload-sockedge");
	TCase *tc = tcase_create("edge");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, oob_not_stream, 0, 4);
	tcase_add_loop_test(tc, poll_efault, 0, 2);
	tcase_add_loop_test(tc, continue_split_iovecs, 0, 4);
	tcase_add_loop_test(tc, continue_one_iovec, 0, 2);
	tcase_add_loop_test(tc, continue_and_final, 0, 4);
	tcase_add_loop_test(tc, short_write, 0, 10);
	tcase_add_loop_test(tc, batched_responses, 0, 2);
	tcase_add_loop_test(tc, response_writers, 0, 4);
	tcase_add_loop_test(tc, mmsg_pipelined, 0, 8);
	tcase_add_loop_test(tc, splice_body, 0, 2);
	tcase_add_loop_test(tc, after_response, 0, 4);
	tcase_add_loop_test(tc, idle_after_response, 0, 2 * N_IDLE_WAITS);
	tcase_add_loop_test(tc, connect_tunnel, 0, 4);
	tcase_add_loop_test(tc, fd_edges, 0, 6);
	tcase_add_loop_test(tc, uv_after_work_restore, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}
