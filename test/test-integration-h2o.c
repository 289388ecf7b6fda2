/* SPDX-License-Identifier: Apache-2.0 */
/* h2o from Debian (2.2.5) under the shim, over HTTPS.  h2o links libssl
 * but talks to it through BIOs of its own method, made with
 * BIO_meth_new(BIO_TYPE_FD, "h2o_socket") over its own buffers: no fd in
 * them, so the shim follows its sessions by their pointer
 * (hooks/hook-openssl.c, ossl_fd()).  Old: libcrypto's fd BIO ctrl,
 * asked for the fd of such a BIO, answered 0, the session was taken for
 * stdin's, and no HTTPS request of h2o got a context.
 *
 * h2o is an event loop (epoll): the shim clears a request at its next
 * wait, so what it publishes is checked in the event log.  Checked, for
 * HTTP/1.1 and HTTP/2 (ALPN h2) with curl as the client: curl gets the
 * page; h2o attached the request (one span, reason "request") and
 * released it; afterwards ctxdump finds neither trace on any thread. */
#include "test-common.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test-nginx.h"
#pragma GCC diagnostic pop

#define H2O          "/usr/bin/h2o"
#define CURL         "/usr/bin/curl"
#define TRACE_PREFIX "6b1e0d2c4a3f5e7d9c8b0a1f2e3d4c"
#define INDEX        "<html>ctxshim h2o</html>\n"

/* h2o's configuration: one TLS listener on n->srv.port, one thread. */
static void
h2_write_conf(struct nx_server *n)
{
	char conf[2048];
	int len;

	len = snprintf(conf, sizeof(conf),
		       "%4$s"
		       "num-threads: 1\n"
		       "pid-file: %1$s/h2o.pid\n"
		       "error-log: %1$s/error.log\n"
		       "listen:\n"
		       "  host: 127.0.0.1\n"
		       "  port: %2$u\n"
		       "  ssl:\n"
		       "    certificate-file: %3$s\n"
		       "    key-file: %1$s/key.pem\n"
		       "hosts:\n"
		       "  default:\n"
		       "    paths:\n"
		       "      /:\n"
		       "        file.dir: %1$s/www\n",
		       n->dir, n->srv.port, n->cert,
		       /* as root, h2o would switch to nobody */
		       geteuid() == 0 ? "user: root\n" : "");
	ck_assert_int_lt(len, (int)sizeof(conf));
	nx_write_file(n->conf, conf, (size_t)len);
}

/* curl (without the shim) gets the page with request k's traceparent. */
static void
h2_get(const struct nx_server *n, const char *version_opt, unsigned k)
{
	char tp[128], url[64], *out = NULL, *err = NULL;
	char *argv[] = {CURL, "-sSk", "--max-time", "20", (char *)version_opt,
			"-H", tp,     url,          NULL};
	int st;

	nx_traceparent(TRACE_PREFIX, k, tp);
	tp[strlen(tp) - 2] = '\0'; /* without its CRLF */
	snprintf(url, sizeof(url), "https://127.0.0.1:%u/index.html", n->srv.port);
	st = test_run_capture(argv, NULL, false, &out, &err, IT_TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "curl %s: %s", version_opt,
		      err ? err : "");
	ck_assert_str_eq(out, INDEX);
	free(out);
	free(err);
}

START_TEST(test_h2o_https)
{
	static const char *const version[] = {"--http1.1", "--http2"};
	char dir[64], cert[128], key[128], trace[33], span[17], *log, *json;
	char *argv[] = {H2O, "-c", NULL, NULL};
	struct nx_server n;
	unsigned k;

	memset(&n, 0, sizeof(n));
	snprintf(dir, sizeof(dir), "/tmp/ctxshim-h2o-XXXXXX");
	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	ck_assert_int_eq(chmod(dir, 0755), 0);
	nx_setup(&n, dir, INDEX, 1);
	snprintf(n.conf, sizeof(n.conf), "%s/h2o.conf", n.dir);
	nx_self_signed(n.dir, cert, key);
	n.cert = cert;
	n.key = key;
	n.srv.port = nx_free_port();
	h2_write_conf(&n);
	argv[2] = n.conf;
	nx_launch(&n, argv, true, "h2o");
	for (k = 1; k <= 2; k++) {
		long tid;

		h2_get(&n, version[k - 1], k);
		nx_trace(TRACE_PREFIX, k, trace);
		tid = nx_wait_attach_tid(&n.srv, trace);
		log = it_events(&n.srv);
		ck_assert_msg(it_events_count(log, trace, "request") == 1,
			      "%s: not attached once by its head:\n%.3000s",
			      version[k - 1], log);
		ck_assert_msg(it_events_spans(log, trace, span) == 1,
			      "%s: not one span:\n%.3000s", version[k - 1], log);
		ck_assert_msg(nx_released(log, trace, tid),
			      "%s: not released:\n%.3000s", version[k - 1], log);
		free(log);
	}
	json = it_ctxdump(n.srv.child.pid);
	for (k = 1; k <= 2; k++) {
		nx_trace(TRACE_PREFIX, k, trace);
		ck_assert_msg(it_dump_count_trace(json, trace) == 0,
			      "trace %s still published:\n%s", trace, json);
	}
	free(json);
	nx_halt(&n, SIGTERM, "h2o");
	nx_cleanup(&n);
}
END_TEST

TEST_SUITE(h2o_suite)
{
	Suite *s = suite_create("integration-h2o");
	TCase *tc = tcase_create("h2o");

	if (access(H2O, X_OK) != 0)
		test_skip("%s is not installed (Debian: apt-get install h2o)", H2O);
	if (access(CURL, X_OK) != 0 || access(NX_OPENSSL, X_OK) != 0)
		test_skip("%s or %s is not installed (Debian: apt-get install curl "
			  "openssl)",
			  CURL, NX_OPENSSL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_h2o_https);
	suite_add_tcase(s, tc);
	return s;
}
