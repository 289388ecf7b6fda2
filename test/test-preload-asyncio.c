/* SPDX-License-Identifier: Apache-2.0 */
/* Python's asyncio (asyncio.start_server, real python3): the loop reads a
 * request in its read callback and runs the handler after its next
 * epoll_wait, called with timeout 0 (hooks/hook-socket.c, "Handlers run
 * after the next wait").  A handler that blocks the loop must show its
 * request; when one loop round read two connections' requests, the thread
 * must show neither while the first handler runs (the shim cannot tell
 * whose handler that is).  Observed with ctxdump -j and the event log. */
#include "test-common.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test-integration.h"
#pragma GCC diagnostic pop

#define PYTHON "/usr/bin/python3"

#define T1  "0af7651916cd43dd8448eb211c80319c"
#define T2  "4bf92f3577b34da6a3ce929d0e0e4736"
#define T3  "5ce0e9a56015fec5aadfa328ae398115"
#define TP1 "traceparent: 00-" T1 "-b7ad6b7169203331-01\r\n"
#define TP2 "traceparent: 00-" T2 "-00f067aa0ba902b7-01\r\n"
#define TP3 "traceparent: 00-" T3 "-1111111111111111-01\r\n"

/* Keep-alive HTTP/1.1 on asyncio streams.  A path starting with /block
 * prints "IN <tid> <path>" and blocks the loop until a line on stdin (a
 * handler's synchronous work); /quit ends the server. */
static const char server_py[] =
	"import asyncio, sys, threading\n"
	"stop = None\n"
	"async def handle(r, w):\n"
	"    while True:\n"
	"        try:\n"
	"            head = await r.readuntil(b'\\r\\n\\r\\n')\n"
	"        except (asyncio.IncompleteReadError, ConnectionError):\n"
	"            break\n"
	"        path = head.split(b' ', 2)[1].decode()\n"
	"        if path.startswith('/block'):\n"
	"            print('IN', threading.get_native_id(), path, flush=True)\n"
	"            sys.stdin.readline()\n"
	"        body = ('path=' + path + '\\n').encode()\n"
	"        w.write(b'HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\n\\r\\n'\n"
	"                % len(body) + body)\n"
	"        await w.drain()\n"
	"        print('DONE', path, flush=True)\n"
	"        if path == '/quit':\n"
	"            stop.set()\n"
	"    w.close()\n"
	"async def main():\n"
	"    global stop\n"
	"    stop = asyncio.Event()\n"
	"    srv = await asyncio.start_server(handle, '127.0.0.1', 0)\n"
	"    print('READY', srv.sockets[0].getsockname()[1], flush=True)\n"
	"    await stop.wait()\n"
	"asyncio.run(main())\n";

static void
py_start_env(struct it_server *s, char *const extra[])
{
	char *argv[] = {PYTHON, "-c", (char *)server_py, NULL};

	if (access(PYTHON, X_OK) != 0)
		test_skip(PYTHON " not found");
	it_server_start(s, argv, true, extra);
}

static void
py_start(struct it_server *s)
{
	py_start_env(s, NULL);
}

/* Send a request for path on fd and read its response. */
static void
py_get(int fd, const char *path, const char *tp)
{
	char req[512], *resp;

	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n", path, tp);
	it_send_str(fd, req);
	resp = it_read_response(fd);
	it_assert_path_body(resp, path);
}

/* Send a /block request on fd and wait until its handler blocks the loop;
 * its thread. */
static long
py_block(struct it_server *s, int fd, const char *path, const char *tp)
{
	char req[512];
	long tid;

	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n", path, tp);
	(void)it_send_blocking(s, fd, req, &tid);
	return tid;
}

/* The handler blocked in the loop shows path and trace. */
static void
assert_shows(struct it_server *s, long tid, const char *trace, const char *path)
{
	char *json = it_ctxdump(s->child.pid);
	struct it_thread_ctx t;

	ck_assert_msg(it_dump_thread(json, tid, &t), "no thread %ld:\n%s", tid, json);
	ck_assert_msg(t.has_ctx, "the loop shows nothing while %s blocks it:\n%s", path,
		      json);
	ck_assert_str_eq(t.trace, trace);
	ck_assert_str_eq(t.path, path);
	free(json);
}

/* Release the blocked handler and read its response on fd. */
static void
py_release(struct it_server *s, int fd, const char *path)
{
	char line[512], *resp;

	test_child_send(&s->child, "GO\n");
	resp = it_read_response(fd);
	it_assert_path_body(resp, path);
	test_child_expect(&s->child, "DONE ", line, sizeof(line), IT_TIMEOUT_MS);
}

static void
py_quit(struct it_server *s)
{
	int fd = it_connect(s->port);

	py_get(fd, "/quit", "");
	close(fd);
	it_server_stop(s);
}

/* One request per loop round: its handler, run after a zero-timeout
 * epoll_wait, shows it while it blocks the loop -- the process's first
 * request, the next one on the same keep-alive connection and one on a
 * new connection -- and the wait after the response clears it. */
START_TEST(test_blocking_handler_shown)
{
	struct it_server s;
	long tid;
	int fd, fd2;

	py_start(&s);
	fd = it_connect(s.port);
	tid = py_block(&s, fd, "/block1", TP1);
	assert_shows(&s, tid, T1, "/block1");
	py_release(&s, fd, "/block1");
	it_wait_detached(&s, tid, T1, "epoll_wait");

	tid = py_block(&s, fd, "/block2", TP2);
	assert_shows(&s, tid, T2, "/block2");
	py_release(&s, fd, "/block2");

	fd2 = it_connect(s.port);
	tid = py_block(&s, fd2, "/block3", TP3);
	assert_shows(&s, tid, T3, "/block3");
	py_release(&s, fd2, "/block3");
	it_wait_detached(&s, tid, T3, "epoll_wait");
	close(fd);
	close(fd2);
	py_quit(&s);
}
END_TEST

/* Two connections' requests read in one loop round (both arrive while a
 * third connection's handler blocks the loop): the first handler runs
 * after the zero-timeout wait while the thread last read the second
 * request, so the wait clears it and the thread shows nothing (not the
 * second request's context). */
START_TEST(test_two_in_one_round_not_kept)
{
	struct it_server s;
	char line[512], *json, *log;
	struct it_thread_ctx t;
	long tid;
	int a, b, c;

	py_start(&s);
	a = it_connect(s.port);
	b = it_connect(s.port);
	c = it_connect(s.port);
	/* All three accepted and read by the loop. */
	py_get(a, "/ping-a", "");
	py_get(b, "/ping-b", "");
	tid = py_block(&s, c, "/block-c", TP1);
	assert_shows(&s, tid, T1, "/block-c");
	/* While the loop is blocked: both requests wait in the kernel. */
	it_send_str(a, "GET /block-a HTTP/1.1\r\nHost: x\r\n" TP2 "\r\n");
	it_send_str(b, "GET /block-b HTTP/1.1\r\nHost: x\r\n" TP3 "\r\n");
	py_release(&s, c, "/block-c");
	/* The loop's next round reads a, then b, then runs a's handler. */
	test_child_expect(&s.child, "IN ", line, sizeof(line), IT_TIMEOUT_MS);
	ck_assert_msg(strstr(line, " /block-a"), "%s", line);
	tid = strtol(line + 3, NULL, 10);
	json = it_ctxdump(s.child.pid);
	ck_assert_msg(it_dump_thread(json, tid, &t), "no thread %ld:\n%s", tid, json);
	ck_assert_msg(!t.has_ctx, "a's handler shows %s (%s):\n%s", t.trace, t.path,
		      json);
	free(json);
	/* One round indeed: reading b replaced a's request before any wait. */
	log = it_events(&s);
	ck_assert_msg(it_events_count(log, T2, "other-conn") == 1, "%s", log);
	free(log);
	py_release(&s, a, "/block-a");
	test_child_expect(&s.child, "IN ", line, sizeof(line), IT_TIMEOUT_MS);
	ck_assert_msg(strstr(line, " /block-b"), "%s", line);
	py_release(&s, b, "/block-b");
	close(a);
	close(b);
	close(c);
	py_quit(&s);
}
END_TEST

/* The same when the first request's head draws no span-id -- one too
 * large to capture (CTXSHIM_MAX_HEADER_BYTES), or one without a
 * traceparent under CTXSHIM_NEW_TRACES=0 (zero ids) -- so that the second
 * is the only head the span-ids count: a's handler must not show b's
 * request either. */
static void
two_in_one_round_first_uncounted(bool oversized)
{
	static char big[20000];
	char *extra[] = {"CTXSHIM_NEW_TRACES=0", NULL};
	struct it_server s;
	char line[512], *json;
	struct it_thread_ctx t;
	long tid;
	int a, b, c;

	py_start_env(&s, oversized ? NULL : extra);
	a = it_connect(s.port);
	b = it_connect(s.port);
	c = it_connect(s.port);
	py_get(a, "/ping-a", "");
	py_get(b, "/ping-b", "");
	tid = py_block(&s, c, "/block-c", TP1);
	assert_shows(&s, tid, T1, "/block-c");
	if (oversized) {
		/* a head over the default 16384 bytes: no context */
		snprintf(big, sizeof(big),
			 "GET /block-a HTTP/1.1\r\nHost: x\r\nX-Big: ");
		memset(big + strlen(big), 'b', 17000);
		strcat(big, "\r\n\r\n");
		it_send_str(a, big);
	} else {
		it_send_str(a, "GET /block-a HTTP/1.1\r\nHost: x\r\n\r\n");
	}
	it_send_str(b, "GET /block-b HTTP/1.1\r\nHost: x\r\n" TP3 "\r\n");
	py_release(&s, c, "/block-c");
	test_child_expect(&s.child, "IN ", line, sizeof(line), IT_TIMEOUT_MS);
	ck_assert_msg(strstr(line, " /block-a"), "%s", line);
	tid = strtol(line + 3, NULL, 10);
	json = it_ctxdump(s.child.pid);
	ck_assert_msg(it_dump_thread(json, tid, &t), "no thread %ld:\n%s", tid, json);
	ck_assert_msg(!t.has_ctx || strcmp(t.trace, T3) != 0,
		      "a's handler shows b's request (%s):\n%s", t.path, json);
	free(json);
	py_release(&s, a, "/block-a");
	test_child_expect(&s.child, "IN ", line, sizeof(line), IT_TIMEOUT_MS);
	ck_assert_msg(strstr(line, " /block-b"), "%s", line);
	py_release(&s, b, "/block-b");
	close(a);
	close(b);
	close(c);
	py_quit(&s);
}

START_TEST(test_two_in_one_round_oversized_first)
{
	two_in_one_round_first_uncounted(true);
}
END_TEST

START_TEST(test_two_in_one_round_untraced_first)
{
	two_in_one_round_first_uncounted(false);
}
END_TEST

TEST_SUITE(asyncio_suite)
{
	Suite *s = suite_create("preload-asyncio");
	TCase *tc = tcase_create("asyncio");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_blocking_handler_shown);
	tcase_add_test(tc, test_two_in_one_round_not_kept);
	tcase_add_test(tc, test_two_in_one_round_oversized_first);
	tcase_add_test(tc, test_two_in_one_round_untraced_first);
	suite_add_tcase(s, tc);
	return s;
}
