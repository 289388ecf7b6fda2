/* SPDX-License-Identifier: Apache-2.0 */
/* nginx from Debian under the shim, socket level only (nginx's internals
 * cannot be interposed): with its own configuration in a temporary
 * directory (127.0.0.1, a free port, one worker, master process, no
 * daemon), the same requests must get the same bytes with and without the
 * shim (the Date header aside), and the event log must show each traced
 * request's trace-id attached on the worker, with one span, and detached
 * afterwards. */
#include "test-common.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test-integration.h"
#include "test-nginx.h"
#pragma GCC diagnostic pop

#define NGINX        NX_NGINX
#define TRACE_PREFIX "4bf92f3577b34da6a3ce929d0e0e47"
#define N_TRACED     8

static void
ngx_setup(struct nx_server *n)
{
	char dir[64];

	memset(n, 0, sizeof(*n));
	snprintf(dir, sizeof(dir), "/tmp/ctxshim-nginx-XXXXXX");
	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	/* Workers run as nobody when the test runs as root. */
	ck_assert_int_eq(chmod(dir, 0755), 0);
	nx_setup(n, dir, "<html>ctxshim</html>\n", 200 * 1024);
}

/* The request set; traced requests use trace ids 1..N_TRACED. */
static char *
run_requests(unsigned port)
{
	char *acc = NULL, req[1024], tp[128];
	size_t acc_len = 0;
	int n;

	nx_traced_requests(port, TRACE_PREFIX, nx_exchange_tcp, "== 1-byte\n", "== sendfile\n",
			   &acc, &acc_len);
	n = snprintf(req, sizeof(req), "GET /index.html HTTP/1.0\r\n%s\r\n",
		     nx_traceparent(TRACE_PREFIX, 8, tp));
	nx_exchange_tcp(port, "== http/1.0\n", req, (size_t)n, 0, &acc, &acc_len);
	n = snprintf(req, sizeof(req),
		     "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	nx_exchange_tcp(port, "== untraced\n", req, (size_t)n, 0, &acc, &acc_len);
	nx_exchange_tcp(port, "== junk\n", "\x16\x03\x01\x00\x10junkjunkjunk\r\n\r\n", 21, 0,
		 &acc, &acc_len);
	nx_strip_date(acc);
	return acc;
}

START_TEST(test_nginx_identical_and_events)
{
	struct nx_server n;
	char *plain, *shim;

	ngx_setup(&n);
	nx_start(&n, false);
	plain = run_requests(n.srv.port);
	nx_stop(&n);

	nx_start(&n, true);
	shim = run_requests(n.srv.port);
	nx_assert_same(plain, shim, NULL);
	ck_assert_ptr_nonnull(strstr(plain, "HTTP/1.1 200 OK"));
	ck_assert_ptr_nonnull(strstr(plain, "HTTP/1.1 404 Not Found"));
	ck_assert_ptr_nonnull(strstr(plain, "HTTP/1.1 405 Not Allowed"));
	ck_assert_ptr_nonnull(strstr(plain, "HTTP/1.1 400 Bad Request"));

	/* Each traced request: attached on the worker (not the master), one
	 * span, and detached once the worker went back to its loop. */
	nx_assert_traced(&n, TRACE_PREFIX, N_TRACED, "detached");
	nx_stop(&n);
	free(plain);
	free(shim);
	nx_cleanup(&n);
}
END_TEST

TEST_SUITE(nginx_suite)
{
	Suite *s = suite_create("integration-nginx");
	TCase *tc = tcase_create("nginx");

	if (access(NGINX, X_OK) != 0)
		test_skip("%s is not installed (Debian: apt-get install nginx-light)",
			  NGINX);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_nginx_identical_and_events);
	suite_add_tcase(s, tc);
	return s;
}
