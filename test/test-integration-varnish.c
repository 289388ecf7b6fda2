/* SPDX-License-Identifier: Apache-2.0 */
/* Varnish Cache from Debian (varnish 7.1) under the shim, as a reverse
 * proxy in front of tpc-server (started without the shim), socket level
 * only.  varnishd's manager process forks the cache process, which closes
 * every descriptor it inherits, the event log's too: what the shim
 * publishes there is read with ctxdump instead.  Checked:
 *
 * 1. While the backend holds "GET /block/v1" (traceparent given), exactly
 *    one thread of the cache process, a cache-worker, publishes that
 *    trace, with a span of its own whose parent is the incoming one.  It
 *    is the thread that read the request; it waits (pthread_cond_wait) for
 *    the fetch another worker makes, and keeps its context meanwhile.
 * 2. Once the backend answers and the response went out on the kept-alive
 *    connection, no thread publishes the trace any more.  The worker
 *    polls the connection for timeout_linger (it does with 0 too),
 *    hands it to varnish's waiter thread and waits in its pool
 *    (pthread_cond_wait): the shim's poll hook clears the context, and
 *    should it not, its condition-variable hook (hook_socket_thread_wait())
 *    does.  Either alone is enough here; with both off, this fails.
 * 3. The same requests (misses, cache hits, pass, HTTP/1.0, keep-alive
 *    with two traces, a 400 of varnish's own) get the same bytes with and
 *    without the shim, apart from what differs between two runs without
 *    it (vn_normalise()).
 * 4. After them, none of their traces is published, nor any other context
 *    (each untraced request got a trace of its own). */
#include "test-common.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test-integration.h"
#include "test-nginx.h"
#pragma GCC diagnostic pop

#include <dirent.h>
#include <limits.h>

#define VARNISHD     "/usr/sbin/varnishd"
#define SETPRIV      "/usr/bin/setpriv"
#define TRACE_PREFIX "5f0c3a9d2e7b41c8a6d4e2f1b3c5d7"
#define PARENT_SPAN  "00f067aa0ba902b7" /* nx_traceparent()'s */
#define BLOCK_TRACE  1                  /* traces 2..N_TRACED: vn_requests() */
#define N_TRACED     7

struct vn_run {
	struct test_child backend; /* tpc-server, never under the shim */
	struct test_child mgt;     /* varnishd's manager process */
	pid_t cache;               /* its child, the cache process */
	unsigned port;
	char dir[64];
};

/* /proc/PID/exe is varnishd (false for a zombie or a process gone). */
static bool
vn_is_varnishd(pid_t pid)
{
	char path[64], exe[PATH_MAX];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	if (n < 0)
		return false;
	exe[n] = '\0';
	return strcmp(exe, VARNISHD) == 0;
}

/* The cache process: the only varnishd whose parent is the manager. */
static pid_t
vn_find_cache(pid_t mgt)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t found = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d))) {
		pid_t pid = (pid_t)strtol(e->d_name, NULL, 10);

		if (pid <= 0 || test_proc_ppid(pid) != mgt || !vn_is_varnishd(pid))
			continue;
		ck_assert_msg(found == 0, "two varnishd children of %d: %d and %d",
			      (int)mgt, (int)found, (int)pid);
		found = pid;
	}
	closedir(d);
	ck_assert_msg(found > 0, "varnishd %d has no cache process", (int)mgt);
	return found;
}

/* varnishd prints nothing on stdout (its messages go to stderr, left to
 * the test's log): it is ready once a request through it gets the
 * backend's answer.  The manager binds the listening socket before it
 * starts the cache process; a connection made meanwhile waits in the
 * backlog until the cache process accepts it. */
static void
vn_wait_ready(struct vn_run *v)
{
	long deadline = nx_now_ms() + IT_TIMEOUT_MS;
	char *resp;

	while (!it_port_listening(v->port)) {
		ck_assert_msg(test_proc_state(v->mgt.pid) != 'Z' &&
				      test_proc_state(v->mgt.pid) != '?',
			      "varnishd exited; see its messages above");
		ck_assert_msg(nx_now_ms() < deadline,
			      "varnishd did not start listening");
		usleep(5000);
	}
	resp = it_exchange(
		v->port, "GET /ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
		NULL);
	ck_assert_msg(strstr(resp, "\r\n\r\npath=/ready\n"), "first response: %s",
		      resp);
	free(resp);
}

/* Start tpc-server, then varnishd in front of it, under the shim if
 * preload; returns once a request through varnish was answered. */
static void
vn_start(struct vn_run *v, bool preload)
{
	char backend_path[4096], line[256], listen[64], backend[64], workdir[128];
	char *backend_argv[] = {backend_path, NULL};
	/* Everything in the temporary directory, nothing from /etc/varnish:
	 * -n the working directory (shared memory log, compiled VCL), -b
	 * the built-in VCL for one backend, which varnishd still compiles
	 * with the C compiler at start (the package depends on gcc and
	 * libc6-dev).  -j none: no jail; started as root, the default unix
	 * jail runs the cache process as the package's user vcache, and
	 * ctxdump, running as root, may then attach only with
	 * CAP_SYS_PTRACE, which a container often lacks; without it the
	 * processes keep the test's user and need no users from the
	 * package.  -T none: no CLI port.  -l 1m, -s malloc,16m: a 1 MiB log
	 * instead of 80 and a small cache; one pool of 5 to 10 workers
	 * instead of two of 100.  setpriv --pdeathsig: should the test die
	 * before vn_stop(), the manager is killed with it and its cache
	 * process follows. */
	char *argv[] = {SETPRIV,  "--pdeathsig=KILL",
			VARNISHD, "-F",
			"-a",     listen,
			"-b",     backend,
			"-n",     workdir,
			"-j",     "none",
			"-T",     "none",
			"-l",     "1m",
			"-s",     "malloc,16m",
			"-p",     "thread_pools=1",
			"-p",     "thread_pool_min=5",
			"-p",     "thread_pool_max=10",
			NULL};
	unsigned backend_port;

	memset(v, 0, sizeof(*v));
	snprintf(v->dir, sizeof(v->dir), "/tmp/ctxshim-varnish-XXXXXX");
	ck_assert_ptr_nonnull(test_mkdtemp(v->dir));
	snprintf(backend_path, sizeof(backend_path), "%s",
		 test_helper_path("tpc-server"));
	test_child_start(&v->backend, backend_argv, NULL, false);
	test_child_expect(&v->backend, "READY ", line, sizeof(line), IT_TIMEOUT_MS);
	backend_port = (unsigned)strtoul(line + 6, NULL, 10);
	ck_assert_uint_gt(backend_port, 0);
	v->port = nx_free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%u", v->port);
	snprintf(backend, sizeof(backend), "127.0.0.1:%u", backend_port);
	snprintf(workdir, sizeof(workdir), "%s/inst", v->dir);
	test_child_start(&v->mgt, argv, NULL, preload);
	vn_wait_ready(v);
	v->cache = vn_find_cache(v->mgt.pid);
}

/* SIGTERM: the manager stops the cache process, reaps it ("Child cleanup
 * complete") and exits 0.  Then the backend (end of its stdin) and the
 * directory. */
static void
vn_stop(struct vn_run *v)
{
	char *rm[] = {"/bin/rm", "-rf", v->dir, NULL};
	int st;

	ck_assert_int_eq(kill(v->mgt.pid, SIGTERM), 0);
	st = test_child_finish(&v->mgt, IT_TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "varnishd exit status %#x",
		      st);
	if (vn_is_varnishd(v->cache)) {
		(void)kill(v->cache, SIGKILL);
		ck_abort_msg("the cache process %d outlived varnishd", (int)v->cache);
	}
	st = test_child_finish(&v->backend, IT_TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "tpc-server exit status %#x", st);
	ck_assert_int_eq(test_run_capture(rm, NULL, false, NULL, NULL, IT_TIMEOUT_MS),
			 0);
}

/* The first thread listed in json that publishes trace (NULL: any
 * context), with its name in comm; -1 if none does. */
static long
vn_trace_tid(const char *json, const char *trace, char comm[32])
{
	char pat[64];
	const char *p, *t = NULL, *q = json, *end;

	snprintf(pat, sizeof(pat), "\"trace_id\": \"%s", trace ? trace : "");
	p = strstr(json, pat);
	if (!p)
		return -1;
	while ((q = strstr(q, "\"tid\": ")) && q < p)
		t = q++;
	ck_assert_ptr_nonnull(t);
	end = strstr(t, "\"context\": ");
	ck_assert_ptr_nonnull(end);
	comm[0] = '\0';
	(void)it_json_str(t, end, "\"comm\"", comm, 32);
	return strtol(t + 7, NULL, 10);
}

/* Polls ctxdump until no thread of the cache process publishes trace (NULL:
 * any context); label names the request(s) in the failure message. */
static void
vn_wait_unpublished(const struct vn_run *v, const char *trace, const char *label)
{
	long deadline = nx_now_ms() + IT_TIMEOUT_MS;

	for (;;) {
		char *json = it_ctxdump(v->cache), comm[32], *th;
		long tid = vn_trace_tid(json, trace, comm);

		if (tid < 0) {
			free(json);
			return;
		}
		if (nx_now_ms() >= deadline) {
			th = test_json_thread(json, (pid_t)tid);
			ck_abort_msg(
				"%s: still published after the response by thread %ld "
				"(%s):\n%.3000s",
				label, tid, comm, th ? th : json);
		}
		free(json);
		usleep(10000);
	}
}

/* Check 1 and 2 (under the shim; without it, the same exchange only):
 * "GET /block/v1" with a traceparent on a connection kept alive, held by
 * the backend; its response is appended to *acc. */
static void
vn_blocked(struct vn_run *v, bool preload, char **acc, size_t *acc_len)
{
	char req[512], tp[128], trace[33], line[256], comm[32], *resp;
	struct it_thread_ctx t;
	int fd = it_connect(v->port), n;

	nx_trace(TRACE_PREFIX, BLOCK_TRACE, trace);
	n = snprintf(req, sizeof(req), "GET /block/v1 HTTP/1.1\r\nHost: x\r\n%s\r\n",
		     nx_traceparent(TRACE_PREFIX, BLOCK_TRACE, tp));
	it_send(fd, req, (size_t)n);
	test_child_expect(&v->backend, "BLOCK ", line, sizeof(line), IT_TIMEOUT_MS);
	ck_assert_ptr_nonnull(strstr(line, " /block/v1"));
	if (preload) {
		char *json = it_ctxdump(v->cache);
		long tid = vn_trace_tid(json, trace, comm);

		ck_assert_msg(tid > 0,
			      "no thread publishes the blocked request:\n%.3000s",
			      json);
		ck_assert_msg(it_dump_count_trace(json, trace) == 1,
			      "more than one thread publishes the trace:\n%.3000s",
			      json);
		ck_assert_msg(tid != v->cache, "published on the main thread:\n%.3000s",
			      json);
		ck_assert_str_eq(comm, "cache-worker");
		ck_assert(it_dump_thread(json, tid, &t) && t.has_ctx);
		ck_assert_str_eq(t.trace, trace);
		ck_assert_str_ne(t.span, PARENT_SPAN);
		ck_assert_str_ne(t.span, "0000000000000000");
		ck_assert_str_eq(t.parent, PARENT_SPAN);
		ck_assert_uint_eq(t.flags, 1);
		ck_assert_str_eq(t.method, "GET");
		ck_assert_str_eq(t.path, "/block/v1");
		free(json);
	}
	test_child_send(&v->backend, "go\n");
	resp = it_read_response(fd);
	ck_assert_msg(strstr(resp, "\r\n\r\npath=/block/v1\n"), "response: %s", resp);
	nx_append(acc, acc_len, "== blocked\n", resp, strlen(resp));
	free(resp);
	/* Checked with the connection still open: varnish does not close it
	 * on the worker (that would clear the context anyway). */
	if (preload)
		vn_wait_unpublished(v, trace, "the blocked request");
	close(fd);
}

/* Check 3's requests, traces 2..N_TRACED; the responses, labelled. */
static void
vn_requests(unsigned port, char **acc, size_t *acc_len)
{
	char req[1024], tp[128], *resp;
	size_t got;
	int fd, n;

	/* A miss, the same object untraced and traced from the cache. */
	n = snprintf(req, sizeof(req),
		     "GET /obj HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n",
		     nx_traceparent(TRACE_PREFIX, 2, tp));
	nx_exchange_tcp(port, "== miss\n", req, (size_t)n, 0, acc, acc_len);
	n = snprintf(req, sizeof(req),
		     "GET /obj HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	nx_exchange_tcp(port, "== hit untraced\n", req, (size_t)n, 0, acc, acc_len);
	n = snprintf(req, sizeof(req),
		     "GET /obj HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n",
		     nx_traceparent(TRACE_PREFIX, 3, tp));
	nx_exchange_tcp(port, "== hit\n", req, (size_t)n, 0, acc, acc_len);
	/* HTTP/1.0, and a POST, which the built-in VCL passes. */
	n = snprintf(req, sizeof(req), "GET /old HTTP/1.0\r\n%s\r\n",
		     nx_traceparent(TRACE_PREFIX, 4, tp));
	nx_exchange_tcp(port, "== http/1.0\n", req, (size_t)n, 0, acc, acc_len);
	n = snprintf(req, sizeof(req),
		     "POST /form HTTP/1.1\r\nHost: x\r\n%sContent-Length: 5\r\n"
		     "Connection: close\r\n\r\nhello",
		     nx_traceparent(TRACE_PREFIX, 5, tp));
	nx_exchange_tcp(port, "== pass\n", req, (size_t)n, 0, acc, acc_len);
	/* Two requests on one connection, each with its own trace. */
	fd = it_connect(port);
	n = snprintf(req, sizeof(req), "GET /ka/1 HTTP/1.1\r\nHost: x\r\n%s\r\n",
		     nx_traceparent(TRACE_PREFIX, 6, tp));
	it_send(fd, req, (size_t)n);
	resp = it_read_response(fd);
	nx_append(acc, acc_len, "== keep-alive 1\n", resp, strlen(resp));
	free(resp);
	n = snprintf(req, sizeof(req),
		     "GET /ka/2 HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n",
		     nx_traceparent(TRACE_PREFIX, 7, tp));
	it_send(fd, req, (size_t)n);
	resp = it_read_all(fd, &got);
	close(fd);
	nx_append(acc, acc_len, "== keep-alive 2\n", resp, got);
	free(resp);
	/* HTTP/1.1 without Host: varnish answers 400 itself. */
	n = snprintf(req, sizeof(req),
		     "GET /nohost HTTP/1.1\r\nConnection: close\r\n\r\n");
	nx_exchange_tcp(port, "== no host\n", req, (size_t)n, 0, acc, acc_len);
}

/* Remove what follows each prefix in s up to the next stop. */
static void
vn_strip(char *s, const char *prefix, const char *stop)
{
	char *p = s;

	while ((p = strstr(p, prefix))) {
		char *v = p + strlen(prefix), *e = strstr(v, stop);

		if (!e)
			break;
		memmove(v, e, strlen(e) + 1);
		p = v;
	}
}

/* What differs between two runs without the shim, and only that:
 * - the Date header;
 * - the transaction ids (VXIDs) in X-Varnish: each worker thread takes
 *   its ids from a block of its own (32768 of them), so the numbers
 *   depend on which thread took which task (32776 in one run, 65538 or 3
 *   in the next);
 * - in the page varnish makes for the 400 (the last exchange), the same
 *   id ("XID: 32794" or "XID: 11") and, with its number of digits, the
 *   Content-Length.
 * Age stays 0: the hits follow the miss within the second. */
static void
vn_normalise(char *s)
{
	char *own;

	nx_strip_date(s);
	vn_strip(s, "\r\nX-Varnish: ", "\r\n");
	own = strstr(s, "== no host\n");
	ck_assert_ptr_nonnull(own);
	vn_strip(own, "\r\nContent-Length: ", "\r\n");
	vn_strip(own, "<p>XID: ", "</p>");
}

static char *
vn_run(bool preload)
{
	struct vn_run v;
	char *acc = NULL;
	size_t acc_len = 0;
	unsigned k;

	vn_start(&v, preload);
	vn_blocked(&v, preload, &acc, &acc_len);
	vn_requests(v.port, &acc, &acc_len);
	/* Check 4: none of the traces, and no other context either (each
	 * untraced request got a trace of its own). */
	for (k = 2; preload && k <= N_TRACED; k++) {
		char trace[33], label[48];

		snprintf(label, sizeof(label), "trace %u", k);
		vn_wait_unpublished(&v, nx_trace(TRACE_PREFIX, k, trace), label);
	}
	if (preload)
		vn_wait_unpublished(&v, NULL, "an untraced request");
	vn_stop(&v);
	vn_normalise(acc);
	return acc;
}

START_TEST(test_varnish_proxy)
{
	char *plain = vn_run(false), *shim = vn_run(true);

	nx_assert_same(plain, shim, NULL);
	ck_assert_ptr_nonnull(strstr(plain, "HTTP/1.1 200 OK"));
	ck_assert_ptr_nonnull(strstr(plain, "HTTP/1.1 400 Bad Request"));
	free(plain);
	free(shim);
}
END_TEST

TEST_SUITE(varnish_suite)
{
	Suite *s = suite_create("integration-varnish");
	TCase *tc = tcase_create("varnish");

	if (access(VARNISHD, X_OK) != 0)
		test_skip("%s is not installed (Debian: apt-get install varnish)",
			  VARNISHD);
	if (access(SETPRIV, X_OK) != 0)
		test_skip("%s is not installed (Debian: util-linux)", SETPRIV);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_varnish_proxy);
	suite_add_tcase(s, tc);
	return s;
}
