/* SPDX-License-Identifier: Apache-2.0 */
/* A legacy daemon that gets its connection from its parent, never from
 * accept(): test/helpers/inetd-daemon under the real
 * systemd-socket-activate (package systemd), in its two modes --
 *
 *  - --inetd: the connection is fd 0 and fd 1 (one socket); the daemon
 *    reads requests on 0 and writes responses on 1;
 *  - -a (Accept=yes): the connection is fd 3, LISTEN_FDS=1, LISTEN_PID
 *    the daemon's pid; it reads and writes fd 3 --
 *
 * with LD_PRELOAD=libctxshim.so given to the daemon only.  Two keep-alive
 * requests with different traceparents; while the daemon handles each
 * (it waits for SIGUSR1 before answering), ctxdump must show that
 * request's trace on its thread, with a new span-id each time, and once
 * the client has closed (and the daemon with it) no context at all.
 * Before start-up looked at inherited descriptors, the daemon published
 * nothing; before copies of a connection were one connection, --inetd
 * mode lost the context while writing the response on fd 1 and kept the
 * first request's context for the second.  CTXSHIM_INHERITED=0 turns the
 * start-up look off.
 *
 * systemd-socket-activate cannot listen on port 0, so it is handed our
 * own listening socket through its own LISTEN_FDS (it passes descriptors
 * from sd_listen_fds() through).  Its stderr, which the daemon inherits,
 * is the pipe the daemon's "IN"/"CLOSED" lines come through. */
#include "test-integration-block.h"

#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#define SOCKET_ACTIVATE "/usr/bin/systemd-socket-activate"

struct inetd_run {
	struct test_child log; /* out_fd: systemd-socket-activate's stderr */
	struct it_server ev;   /* only its event log */
	int lfd;
	unsigned port;
};

/* Environment for the daemon, as -E arguments. */
static void
add_env(char **argv, size_t *n, const char *name, const char *value)
{
	static char store[8][4400];
	static unsigned used;

	if (!value)
		return;
	ck_assert_uint_lt(used, 8);
	snprintf(store[used], sizeof(store[used]), "--setenv=%s=%s", name, value);
	argv[(*n)++] = store[used++];
}

static void
inetd_start(struct inetd_run *r, bool inetd, bool inherited)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	char daemon[4096], *argv[24];
	size_t n = 0;
	int err[2];
	pid_t pid;

	memset(r, 0, sizeof(*r));
	r->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(r->lfd, 0);
	ck_assert_int_eq(bind(r->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(r->lfd, 8), 0);
	ck_assert_int_eq(getsockname(r->lfd, (struct sockaddr *)&a, &al), 0);
	r->port = ntohs(a.sin_port);
	ck_assert_int_eq(pipe2(err, O_CLOEXEC), 0);
	snprintf(r->ev.events, sizeof(r->ev.events),
		 "/tmp/ctxshim-inetd-events-XXXXXX");
	r->ev.events_fd = mkostemp(r->ev.events, O_CLOEXEC);
	ck_assert_int_gt(r->ev.events_fd, 2);

	snprintf(daemon, sizeof(daemon), "%s/inetd-daemon",
		 test_env_path("HELPER_DIR"));
	argv[n++] = SOCKET_ACTIVATE;
	argv[n++] = "--accept";
	if (inetd)
		argv[n++] = "--inetd";
	add_env(argv, &n, "LD_PRELOAD", test_env_path("CTXSHIM_LIB"));
	add_env(argv, &n, "ASAN_OPTIONS", getenv("ASAN_OPTIONS"));
	add_env(argv, &n, "UBSAN_OPTIONS", getenv("UBSAN_OPTIONS"));
	add_env(argv, &n, "CTXSHIM_EVENTS", r->ev.events);
	if (!inherited)
		add_env(argv, &n, "CTXSHIM_INHERITED", "0");
	argv[n++] = daemon;
	argv[n++] = inetd ? "inetd" : "fd3";
	argv[n] = NULL;

	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char lp[32];
		int nul = open("/dev/null", O_RDWR);

		/* If the test dies, so does the listener (the daemon gives up
		 * waiting by itself: inetd-daemon.c). */
		(void)prctl(PR_SET_PDEATHSIG, SIGTERM);
		/* fd 3: the listening socket, passed down as sd_listen_fds() */
		if (dup2(r->lfd, 3) != 3 || dup2(err[1], 2) != 2 || nul < 0 ||
		    dup2(nul, 0) != 0 || dup2(nul, 1) != 1)
			_exit(126);
		snprintf(lp, sizeof(lp), "%d", (int)getpid());
		setenv("LISTEN_PID", lp, 1);
		setenv("LISTEN_FDS", "1", 1);
		unsetenv("LISTEN_FDNAMES");
		unsetenv("LD_PRELOAD");
		execv(argv[0], argv);
		_exit(127);
	}
	close(err[1]);
	r->log.pid = pid;
	r->log.out_fd = err[0];
	r->log.in_fd = -1;
}

/* The next "<what> <pid> <tid>" line of the daemon. */
static void
inetd_expect(struct inetd_run *r, const char *what, pid_t *pid, long *tid)
{
	char line[512], pfx[16];
	char *end;

	snprintf(pfx, sizeof(pfx), "%s ", what);
	test_child_expect(&r->log, pfx, line, sizeof(line), IT_TIMEOUT_MS);
	*pid = (pid_t)strtol(line + strlen(pfx), &end, 10);
	*tid = strtol(end, NULL, 10);
	ck_assert_int_gt(*pid, 0);
	ck_assert_int_gt(*tid, 0);
	/* The daemon has its event log open: the path can go (the test
	 * reads it through ev.events_fd), and a failing test leaves none. */
	unlink(r->ev.events);
}

static void
inetd_stop(struct inetd_run *r)
{
	int st;

	kill(r->log.pid, SIGTERM);
	ck_assert_int_eq(waitpid(r->log.pid, &st, 0), r->log.pid);
	close(r->log.out_fd);
	close(r->lfd);
	close(r->ev.events_fd);
	unlink(r->ev.events);
}

/* ctxdump of the daemon while it handles a request: the thread's
 * context, in *t. */
static void
dump_daemon(
	pid_t pid, long tid, struct it_thread_ctx *t, unsigned *n_tp, unsigned *n_tp2)
{
	char *json = it_ctxdump(pid);

	ck_assert_msg(it_dump_thread(json, tid, t), "thread %ld not in:\n%s", tid,
		      json);
	*n_tp = it_dump_count_trace(json, TP_TRACE);
	*n_tp2 = it_dump_count_trace(json, TP2_TRACE);
	free(json);
}

static void
run_keepalive(bool inetd)
{
	struct inetd_run r;
	struct it_thread_ctx t1, t2, t3;
	unsigned n1, n2;
	char *resp, *log, span1[17];
	pid_t pid, pid2;
	long tid, tid2;
	int fd;

	inetd_start(&r, inetd, true);
	fd = it_connect(r.port);

	it_send_str(fd, "GET /one HTTP/1.1\r\nHost: t\r\ntraceparent: " TP "\r\n\r\n");
	inetd_expect(&r, "IN", &pid, &tid);
	dump_daemon(pid, tid, &t1, &n1, &n2);
	ck_assert_msg(t1.has_ctx, "no context while the daemon handles request 1");
	ck_assert_str_eq(t1.trace, TP_TRACE);
	ck_assert_str_eq(t1.parent, TP_PARENT);
	ck_assert_str_eq(t1.path, "/one");
	ck_assert_str_ne(t1.span, TP_PARENT);
	ck_assert_uint_eq(n1, 1);
	memcpy(span1, t1.span, sizeof(span1));
	kill(pid, SIGUSR1);
	resp = it_read_response(fd);
	it_assert_ok_body(resp, "ok");
	free(resp);

	it_send_str(fd, "GET /two HTTP/1.1\r\nHost: t\r\ntraceparent: " TP2 "\r\n\r\n");
	inetd_expect(&r, "IN", &pid2, &tid2);
	ck_assert_int_eq(pid2, pid);
	dump_daemon(pid, tid2, &t2, &n1, &n2);
	ck_assert_msg(t2.has_ctx, "no context while the daemon handles request 2");
	ck_assert_msg(strcmp(t2.trace, TP2_TRACE) == 0,
		      "request 2 shows trace %s (request 1's is " TP_TRACE ")",
		      t2.trace);
	ck_assert_str_eq(t2.path, "/two");
	ck_assert_str_ne(t2.span, span1);
	ck_assert_uint_eq(n1, 0);
	ck_assert_uint_eq(n2, 1);
	kill(pid, SIGUSR1);
	resp = it_read_response(fd);
	it_assert_ok_body(resp, "ok");
	free(resp);

	/* the client goes; the daemon closes its end and waits */
	close(fd);
	inetd_expect(&r, "CLOSED", &pid2, &tid2);
	dump_daemon(pid, tid2, &t3, &n1, &n2);
	ck_assert_msg(!t3.has_ctx, "context %s still published after the close",
		      t3.trace);
	ck_assert_uint_eq(n1 + n2, 0);
	kill(pid, SIGUSR1);
	/* The event log: one span per request; each kept while its response
	 * was written (no "other-conn" detach through fd 1), and dropped at
	 * the read that waited for the next request. */
	log = it_events(&r.ev);
	it_assert_one_span(log, TP_TRACE, span1);
	it_assert_one_span(log, TP2_TRACE, t2.span);
	ck_assert_msg(it_events_count(log, TP_TRACE, "other-conn") == 0 &&
			      it_events_count(log, TP2_TRACE, "other-conn") == 0,
		      "a write through the copy was taken for another connection:\n%s",
		      log);
	/* The log names the connection: fd 0 is one like any other, not
	 * "fd=-" (no connection). */
	ck_assert_msg(strstr(log, inetd ? " fd=0 attach trace=" TP_TRACE " "
					: " fd=3 attach trace=" TP_TRACE " "),
		      "log:\n%s", log);
	ck_assert_msg(it_events_count(log, TP_TRACE, "response-sent") == 1 &&
			      it_events_count(log, TP2_TRACE, "response-sent") == 1,
		      "log:\n%s", log);
	free(log);
	inetd_stop(&r);
}

START_TEST(inetd_keepalive)
{
	run_keepalive(true);
}
END_TEST

START_TEST(listen_fds_keepalive)
{
	run_keepalive(false);
}
END_TEST

/* CTXSHIM_INHERITED=0: the inherited connection is not followed. */
START_TEST(inherited_off)
{
	struct inetd_run r;
	struct it_thread_ctx t;
	unsigned n1, n2;
	char *resp;
	pid_t pid;
	long tid;
	int fd;

	inetd_start(&r, _i == 0, false);
	fd = it_connect(r.port);
	it_send_str(fd, "GET /one HTTP/1.1\r\nHost: t\r\ntraceparent: " TP "\r\n\r\n");
	inetd_expect(&r, "IN", &pid, &tid);
	dump_daemon(pid, tid, &t, &n1, &n2);
	ck_assert_msg(!t.has_ctx, "CTXSHIM_INHERITED=0, yet trace %s", t.trace);
	kill(pid, SIGUSR1);
	resp = it_read_response(fd);
	it_assert_ok_body(resp, "ok");
	free(resp);
	close(fd);
	inetd_expect(&r, "CLOSED", &pid, &tid);
	kill(pid, SIGUSR1);
	inetd_stop(&r);
}
END_TEST

TEST_SUITE(inetd_suite)
{
	Suite *s = suite_create("integration-inetd");
	TCase *tc = tcase_create("socket-activate");

	if (access(SOCKET_ACTIVATE, X_OK) != 0)
		test_skip("%s not installed (package systemd)", SOCKET_ACTIVATE);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, inetd_keepalive);
	tcase_add_test(tc, listen_fds_keepalive);
	tcase_add_loop_test(tc, inherited_off, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}
