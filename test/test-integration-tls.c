/* SPDX-License-Identifier: Apache-2.0 */
/* TLS servers and clients under the shim (hooks/hook-openssl.c,
 * hooks/hook-gnutls.c, the TLS handoff of hooks/hook-socket.c), with a
 * self-signed certificate (nx_self_signed(), test-nginx.h):
 *
 *  - thread-per-connection servers with no tracing code
 *    (helpers/tls-server.c) built on OpenSSL (SSL_read/SSL_write, the _ex
 *    calls, memory BIOs without an fd, the session used only through an
 *    SSL BIO (BIO_f_ssl), libssl dlopen()ed RTLD_LOCAL after start-up)
 *    and on GnuTLS (gnutls_record_recv/_recv_seq/_recv_packet,
 *    gnutls_record_send/_send2/_send_range/_send_file, a session over
 *    two fds of one connection, a record timeout): while a request
 *    blocks inside the server,
 *    ctxdump shows its context on the serving thread and nowhere else; a
 *    keep-alive request after it gets its own; the context goes away
 *    afterwards;
 *  - the same OpenSSL servers holding a second reference to each session
 *    (SSL_up_ref, SSL_dup) and freeing it while a request is in progress:
 *    only the free of the last reference ends the session's tracking;
 *  - a GnuTLS send left by a longjmp out of its push function and sent
 *    again with gnutls_record_send2 answers its request;
 *  - a request a GnuTLS server reads as TLS 1.3 0-RTT data of a resumed
 *    session (gnutls_record_recv_early_data) gets its context;
 *  - a session freed after its fd was closed and its number accepted
 *    again (OpenSSL, GnuTLS): the new connection keeps its context;
 *  - BIO callbacks of the application's see the same calls under the shim
 *    as without it;
 *  - nginx from Debian with "listen ... ssl": the same bytes with and
 *    without the shim (the Date header aside), and the event log shows
 *    each traced request's trace-id attached once, with one span, on the
 *    worker, then released;
 *  - the same nginx with "ssl_early_data on": a request sent as TLS 1.3
 *    0-RTT data of a resumed session (read with SSL_read_early_data,
 *    answered with SSL_write_early_data) and the next one on the
 *    connection each show their own context on the worker, and the idle
 *    worker none;
 *  - libmicrohttpd with MHD_USE_TLS (helpers/mhd-server.c, GnuTLS) in
 *    each threading mode: the blocked handler's thread shows its
 *    request's context, one span per request;
 *  - Python's asyncio over TLS (memory BIOs, no fd): a handler that runs
 *    after the loop's zero-timeout wait and blocks it shows its request;
 *  - libcurl over https (helpers/curl-get.c) under the shim with
 *    TRACEPARENT: each request carries exactly one traceparent, a child
 *    of TRACEPARENT (injection happens at libcurl level, above TLS). */
#include "test-common.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test-integration.h"
#include "test-nginx.h"
#include "tls-client.h"
#pragma GCC diagnostic pop

#include <fcntl.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#define T1  "0af7651916cd43dd8448eb211c80319c"
#define P1  "b7ad6b7169203331"
#define TP1 "traceparent: 00-" T1 "-" P1 "-01\r\n"
#define T2  "4bf92f3577b34da6a3ce929d0e0e4736"
#define T3  "3bf92f3577b34da6a3ce929d0e0e4736"

#define NGINX        NX_NGINX
#define TRACE_PREFIX "5bf92f3577b34da6a3ce929d0e0e47"
#define N_TRACED     7

/* ---- certificate ---- */

struct tls_dir {
	char dir[64];
	char cert[128];
	char key[128];
};

/* A temporary directory with a self-signed certificate for localhost. */
static void
tls_dir_make(struct tls_dir *d)
{
	snprintf(d->dir, sizeof(d->dir), "/tmp/ctxshim-tls-XXXXXX");
	ck_assert_ptr_nonnull(test_mkdtemp(d->dir));
	/* nginx workers run as nobody when the test runs as root. */
	ck_assert_int_eq(chmod(d->dir, 0755), 0);
	nx_self_signed(d->dir, d->cert, d->key);
}

static void
tls_dir_remove(struct tls_dir *d)
{
	char *argv[] = {"/bin/rm", "-rf", d->dir, NULL};

	(void)test_run_capture(argv, NULL, false, NULL, NULL, IT_TIMEOUT_MS);
}

/* argv of a test helper run as "NAME CERT KEY" (prog: room for its path). */
static void
helper_argv(
	char *argv[4], char *prog, size_t n, const char *name, const struct tls_dir *d)
{
	snprintf(prog, n, "%s/%s", test_env_path("HELPER_DIR"), name);
	argv[0] = prog;
	argv[1] = (char *)d->cert;
	argv[2] = (char *)d->key;
	argv[3] = NULL;
}

/* ---- thread-per-connection servers ---- */

enum srv_kind {
	SRV_OPENSSL,
	SRV_OPENSSL_EX,
	SRV_OPENSSL_MEM_BIO,
	SRV_OPENSSL_DLOPEN,
	SRV_OPENSSL_UP_REF,
	SRV_OPENSSL_MEM_BIO_UP_REF,
	/* the session used through an SSL BIO only (BIO_f_ssl, as s_server
	 * -WWW): under a buffer BIO with BIO_gets/BIO_write, and alone with
	 * BIO_read_ex/BIO_write_ex; and requests read with SSL_read, but
	 * responses written through the buffer and SSL BIOs.  Before
	 * libcrypto's BIO calls were hooked, the first two got no context,
	 * and the third's second request showed the first one's (OpenSSL
	 * 3.0's SSL BIO does not go through the exported SSL_read_ex and
	 * SSL_write_ex) */
	SRV_OPENSSL_SSL_BIO,
	SRV_OPENSSL_SSL_BIO_EX,
	SRV_OPENSSL_SSL_BIO_OUT,
	/* an SSL BIO (of the server's own method) that does call
	 * SSL_read_ex and SSL_write_ex: each byte seen once, one request
	 * per head */
	SRV_OPENSSL_SSL_BIO_PLT,
	/* --bio ssl with libssl and libcrypto dlopen()ed RTLD_LOCAL */
	SRV_OPENSSL_DLOPEN_SSL_BIO,
	/* memory BIOs, and a switch to a coroutine and back after each head
	 * (--yield): old, the switch back dropped the request's context, as
	 * if answered (a connection without an fd has no descriptor slot) */
	SRV_OPENSSL_MEM_BIO_YIELD,
	/* memory BIOs behind BIOs of the server's own method of type
	 * BIO_TYPE_FD, as h2o's: old, libcrypto's fd BIO ctrl asked for
	 * its fd answered 0 (no fd set), and the session, taken for fd 0's,
	 * got no context */
	SRV_OPENSSL_FD_TYPE_BIO,
	SRV_GNUTLS, /* from here on: left out when not built */
	/* a send retried as gnutls_record_send(s, NULL, 0), and responses
	 * sent with gnutls_record_send_file(): old, neither was seen as the
	 * response, and the next request on the connection showed the one
	 * before it */
	SRV_GNUTLS_AGAIN,
	SRV_GNUTLS_FILE,
	/* responses sent with gnutls_record_send2 and
	 * gnutls_record_send_range, requests read with
	 * gnutls_record_recv_packet and gnutls_record_recv_seq: old, the
	 * first two were not seen, so the next request on the connection
	 * showed the one before it, and the last two got no context */
	SRV_GNUTLS_SEND2,
	SRV_GNUTLS_RANGE,
	SRV_GNUTLS_PACKET,
	SRV_GNUTLS_SEQ,
	/* a session over two fds (gnutls_transport_set_int2): reads through
	 * a copy of the accepted fd, writes through the fd itself */
	SRV_GNUTLS_INT2,
	/* reads with a record timeout, which libgnutls waits for in poll():
	 * old, that wait let the connection go, and a request whose body was
	 * read after its head showed no context (test_tpc_continue) */
	SRV_GNUTLS_TIMEOUT,
	SRV_N,
};

static const char *const srv_name[SRV_N] = {"openssl",
					    "openssl --ex",
					    "openssl --bio mem",
					    "openssl dlopen",
					    "openssl --up-ref",
					    "openssl --bio mem --up-ref",
					    "openssl --bio ssl",
					    "openssl --bio ssl --ex",
					    "openssl --bio ssl-out",
					    "openssl --bio ssl-plt",
					    "openssl dlopen --bio ssl",
					    "openssl --bio mem --yield",
					    "openssl --bio fd-type",
					    "gnutls",
					    "gnutls --send again",
					    "gnutls --send file",
					    "gnutls --send send2",
					    "gnutls --send range",
					    "gnutls --recv packet",
					    "gnutls --recv seq",
					    "gnutls --transport int2",
					    "gnutls --timeout"};

/* --read-size for the next srv_start(), or NULL: the helper's default. */
static const char *srv_read_size;

static void
srv_start(struct it_server *s, enum srv_kind k, const struct tls_dir *d)
{
	static char prog[4096], plugin[4096];
	char *argv[10], *env[] = {"CTXSHIM_HEADER_ATTRS=x-request-id", NULL};
	const char *dir = test_env_path("HELPER_DIR");
	size_t n = 0;

	if (k == SRV_OPENSSL_DLOPEN || k == SRV_OPENSSL_DLOPEN_SSL_BIO) {
		snprintf(prog, sizeof(prog), "%s/dlopen-main", dir);
		snprintf(plugin, sizeof(plugin), "%s/libtls-server-plugin.so", dir);
		argv[n++] = prog;
		argv[n++] = plugin;
	} else {
		snprintf(prog, sizeof(prog), "%s/tls-server-%s", dir,
			 k >= SRV_GNUTLS ? "gnutls" : "openssl");
		argv[n++] = prog;
	}
	argv[n++] = (char *)d->cert;
	argv[n++] = (char *)d->key;
	if (k == SRV_OPENSSL_EX || k == SRV_OPENSSL_SSL_BIO_EX)
		argv[n++] = "--ex";
	if (k == SRV_OPENSSL_SSL_BIO || k == SRV_OPENSSL_SSL_BIO_EX ||
	    k == SRV_OPENSSL_DLOPEN_SSL_BIO) {
		argv[n++] = "--bio";
		argv[n++] = "ssl";
	}
	if (k == SRV_OPENSSL_SSL_BIO_OUT || k == SRV_OPENSSL_SSL_BIO_PLT) {
		argv[n++] = "--bio";
		argv[n++] = k == SRV_OPENSSL_SSL_BIO_OUT ? "ssl-out" : "ssl-plt";
	}
	if (k == SRV_OPENSSL_MEM_BIO || k == SRV_OPENSSL_MEM_BIO_UP_REF ||
	    k == SRV_OPENSSL_MEM_BIO_YIELD) {
		argv[n++] = "--bio";
		argv[n++] = "mem";
	}
	if (k == SRV_OPENSSL_MEM_BIO_YIELD)
		argv[n++] = "--yield";
	if (k == SRV_OPENSSL_FD_TYPE_BIO) {
		argv[n++] = "--bio";
		argv[n++] = "fd-type";
	}
	if (k == SRV_OPENSSL_UP_REF || k == SRV_OPENSSL_MEM_BIO_UP_REF)
		argv[n++] = "--up-ref";
	if (k == SRV_GNUTLS_AGAIN || k == SRV_GNUTLS_FILE || k == SRV_GNUTLS_SEND2 ||
	    k == SRV_GNUTLS_RANGE) {
		static const char *const how[] = {"again", "file", "send2", "range"};

		argv[n++] = "--send";
		argv[n++] = (char *)how[k - SRV_GNUTLS_AGAIN];
	}
	if (k == SRV_GNUTLS_PACKET || k == SRV_GNUTLS_SEQ) {
		argv[n++] = "--recv";
		argv[n++] = k == SRV_GNUTLS_PACKET ? "packet" : "seq";
	}
	if (k == SRV_GNUTLS_TIMEOUT)
		argv[n++] = "--timeout";
	if (k == SRV_GNUTLS_INT2) {
		argv[n++] = "--transport";
		argv[n++] = "int2";
	}
	if (srv_read_size) {
		argv[n++] = "--read-size";
		argv[n++] = (char *)srv_read_size;
	}
	argv[n] = NULL;
	it_server_start(s, argv, true, env);
}

/* Wait for "BLOCK <tid> <path>"; checks the path, returns the tid. */
static long
expect_block(struct it_server *s, const char *path)
{
	char line[1200], *p;
	long tid;

	test_child_expect(&s->child, "BLOCK ", line, sizeof(line), IT_TIMEOUT_MS);
	tid = strtol(line + 6, &p, 10);
	ck_assert_int_gt(tid, 0);
	ck_assert_msg(strcmp(p + 1, path) == 0, "blocked in %s, expected %s", p + 1,
		      path);
	return tid;
}

/* ctxdump: tid publishes a context with this method and path (trace and
 * parent if given, else a new trace); no other thread publishes it. */
static void
assert_ctx(struct it_server *s,
	   long tid,
	   const char *trace,
	   const char *parent,
	   const char *path,
	   struct it_thread_ctx *out)
{
	char *json = it_ctxdump(s->child.pid);
	struct it_thread_ctx t;

	ck_assert_msg(it_dump_thread(json, tid, &t), "thread %ld not listed:\n%s", tid,
		      json);
	ck_assert_msg(t.has_ctx, "thread %ld has no context:\n%s", tid, json);
	if (trace) {
		ck_assert_str_eq(t.trace, trace);
		ck_assert_str_ne(t.span, parent);
		ck_assert_str_eq(t.parent, parent);
	} else {
		ck_assert_str_ne(t.trace, T1);
		ck_assert_str_ne(t.trace, "00000000000000000000000000000000");
		ck_assert_str_eq(t.parent, "");
	}
	ck_assert_str_ne(t.span, "0000000000000000");
	ck_assert_str_eq(t.method, "GET");
	ck_assert_str_eq(t.path, path);
	ck_assert_msg(it_dump_count_trace(json, t.trace) == 1,
		      "trace %s published by more than one thread:\n%s", t.trace, json);
	free(json);
	*out = t;
}

/* A traced request blocks: its context is on the serving thread; the
 * next request on the connection (keep-alive, untraced, sent in 1-byte
 * records) gets a new trace; after the connection closes, nothing is
 * left.  One span per request in the log, attached by the head. */
START_TEST(test_tpc_server)
{
	struct tls_dir d;
	struct it_server s;
	struct it_thread_ctx t, t2;
	struct tc c;
	char *log, span[17];
	static const char second[] = "GET /block/two HTTP/1.1\r\nHost: x\r\n\r\n";
	long tid, tid2;

	tls_dir_make(&d);
	srv_start(&s, (enum srv_kind)_i, &d);
	tc_connect(&c, s.port);
	tc_send(&c,
		"GET /block/one?q=1 HTTP/1.1\r\nHost: x\r\n" TP1
		"X-Request-Id: rid-7\r\n\r\n",
		strlen("GET /block/one?q=1 HTTP/1.1\r\nHost: x\r\n" TP1
		       "X-Request-Id: rid-7\r\n\r\n"),
		0);
	tid = expect_block(&s, "/block/one?q=1");
	assert_ctx(&s, tid, T1, P1, "/block/one", &t);
	ck_assert_uint_eq(t.flags, 1);
	ck_assert_str_eq(t.extra, "rid-7");
	test_child_send(&s.child, "go\n");
	it_assert_path_body(tc_read_response(&c), "/block/one?q=1");

	tc_send(&c, second, strlen(second), 1);
	tid2 = expect_block(&s, "/block/two");
	ck_assert_int_eq(tid2, tid);
	assert_ctx(&s, tid, NULL, NULL, "/block/two", &t2);
	ck_assert_str_ne(t2.span, t.span);
	test_child_send(&s.child, "go\n");
	it_assert_path_body(tc_read_response(&c), "/block/two");
	tc_close(&c);
	it_wait_detached(&s, tid, NULL, NULL);

	log = it_events(&s);
	ck_assert_msg(it_events_spans(log, T1, span) == 1, "%s: log:\n%s", srv_name[_i],
		      log);
	ck_assert_str_eq(span, t.span);
	ck_assert_msg(it_events_count(log, T1, "request") == 1, "%s: log:\n%s",
		      srv_name[_i], log);
	ck_assert_msg(it_events_count(log, t2.trace, "request") == 1, "%s: log:\n%s",
		      srv_name[_i], log);
	free(log);
	it_assert_gone(&s, tid, T1);
	it_assert_gone(&s, tid, t2.trace);
	it_server_stop(&s);
	tls_dir_remove(&d);
}
END_TEST

/* A read that fills the application's buffer exactly: the server reads
 * with a buffer of the request's own length (--read-size), so the one
 * read of its TLS record returns as many bytes as it was asked for.  The
 * hooks take a read's bytes only when it returns at most what it was
 * asked for (a length beyond the buffer is not the plaintext); that
 * bound is inclusive, or such a request got no context. */
static const enum srv_kind fill_kind[] = {SRV_OPENSSL, SRV_OPENSSL_EX,
					  SRV_OPENSSL_SSL_BIO_EX, SRV_GNUTLS,
					  SRV_GNUTLS_SEQ};

START_TEST(test_tpc_read_fills_buffer)
{
	static const char req[] = "GET /block/fill HTTP/1.1\r\nHost: x\r\n" TP1 "\r\n";
	char size[16];
	struct tls_dir d;
	struct it_server s;
	struct it_thread_ctx t;
	struct tc c;
	long tid;

	snprintf(size, sizeof(size), "%zu", strlen(req));
	srv_read_size = size;
	tls_dir_make(&d);
	srv_start(&s, fill_kind[_i], &d);
	srv_read_size = NULL;
	tc_connect(&c, s.port);
	tc_send(&c, req, strlen(req), 0);
	tid = expect_block(&s, "/block/fill");
	assert_ctx(&s, tid, T1, P1, "/block/fill", &t);
	test_child_send(&s.child, "go\n");
	it_assert_path_body(tc_read_response(&c), "/block/fill");
	tc_close(&c);
	it_wait_detached(&s, tid, NULL, NULL);
	it_server_stop(&s);
	tls_dir_remove(&d);
}
END_TEST

/* More pipelined requests than a connection's queue holds (16 behind the
 * current one), all in one TLS record: the thread-per-connection server
 * reads them in one SSL_read (gnutls_record_recv) and answers them in
 * turn.  The connection is no longer followed from the head that did not
 * fit on, which the event log says once, with reason pipeline-full, as
 * for a plain connection (hooks/hook-socket.c, sk_gave_up()): TLS
 * plaintext feeds the same request model, through the same queue. */
#define PIPE_REQS 24

START_TEST(test_tpc_pipeline_full)
{
	static const enum srv_kind kind[] = {SRV_OPENSSL, SRV_GNUTLS};
	char req[PIPE_REQS * 48], *buf = NULL, *log;
	size_t len = 0, cap = 0, n = 0;
	const char *p;
	struct tls_dir d;
	struct it_server s;
	unsigned got = 0, full = 0;
	struct tc c;
	int i;

	for (i = 0; i < PIPE_REQS; i++)
		n += (size_t)snprintf(req + n, sizeof(req) - n,
				      "GET /p/%d HTTP/1.1\r\nHost: x\r\n\r\n", i);
	tls_dir_make(&d);
	srv_start(&s, kind[_i], &d);
	tc_connect(&c, s.port);
	tc_send(&c, req, n, 0);
	/* every request is answered, in order */
	while (got < PIPE_REQS) {
		ck_assert_msg(tc_read_some(&c, &buf, &len, &cap),
			      "connection closed after %u responses", got);
		for (got = 0, p = buf; (p = strstr(p, "HTTP/1.1 200")) != NULL; p++)
			got++;
	}
	free(buf);
	tc_close(&c);
	log = it_events(&s);
	for (p = log; (p = strstr(p, " reason=pipeline-full\n")) != NULL; p++)
		full++;
	ck_assert_msg(full == 1, "%s: %u pipeline-full lines:\n%s", srv_name[kind[_i]],
		      full, log);
	free(log);
	it_server_stop(&s);
	tls_dir_remove(&d);
}
END_TEST

/* A request with "Expect: 100-continue": the server writes "100 Continue"
 * before it reads the body, then blocks.  The interim response answers
 * nothing: the request keeps its context while the body is read and
 * after.  With --send again the interim response's send is retried as
 * gnutls_record_send(s, NULL, 0), whose bytes the hook does not have at
 * hand (old: taken for the final response, the body's read dropped the
 * context). */
START_TEST(test_tpc_continue)
{
	static const char head[] = "POST /block/up HTTP/1.1\r\nHost: x\r\n" TP1
				   "Expect: 100-continue\r\nContent-Length: 4\r\n\r\n";
	struct tls_dir d;
	struct it_server s;
	struct it_thread_ctx t;
	struct tc c;
	char *buf = NULL, *json;
	size_t len = 0, cap = 0;
	long tid;

	tls_dir_make(&d);
	srv_start(&s, (enum srv_kind)_i, &d);
	tc_connect(&c, s.port);
	tc_send(&c, head, strlen(head), 0);
	while (!buf || !strstr(buf, "\r\n\r\n"))
		ck_assert_msg(tc_read_some(&c, &buf, &len, &cap),
			      "connection closed early");
	ck_assert_str_eq(buf, "HTTP/1.1 100 Continue\r\n\r\n");
	free(buf);
	tc_send(&c, "abcd", 4, 0);
	tid = expect_block(&s, "/block/up");
	json = it_ctxdump(s.child.pid);
	ck_assert_msg(it_dump_thread(json, tid, &t), "thread %ld not listed:\n%s", tid,
		      json);
	ck_assert_msg(t.has_ctx, "%s: thread %ld has no context:\n%s", srv_name[_i],
		      tid, json);
	ck_assert_str_eq(t.trace, T1);
	ck_assert_str_eq(t.parent, P1);
	ck_assert_str_eq(t.method, "POST");
	ck_assert_str_eq(t.path, "/block/up");
	free(json);
	test_child_send(&s.child, "go\n");
	it_assert_path_body(tc_read_response(&c), "/block/up");
	tc_close(&c);
	it_wait_detached(&s, tid, NULL, NULL);
	it_server_stop(&s);
	tls_dir_remove(&d);
}
END_TEST

/* helpers/tls-resume-gnutls.c: the response to a request, interrupted
 * and finished another way, answers it: the next request shows its own
 * context.  hints: a GnuTLS send of "103 Early Hints" (longer than the
 * head the hook keeps of an interrupted send) and the final response,
 * interrupted and resumed with (NULL, 0); jump: a gnutls_record_send()
 * left by a longjmp out of its push function, then sent with
 * gnutls_record_send2(); early: request 2 as TLS 1.3 0-RTT data of a
 * resumed session, read with gnutls_record_recv_early_data() (old: not
 * hooked, no context). */
static const char *const resume_mode[] = {"hints", "jump", "early"};

START_TEST(test_gnutls_resumed)
{
	static char prog[4096];
	char *argv[] = {prog, (char *)resume_mode[_i], NULL}, *out;
	int st;

	snprintf(prog, sizeof(prog), "%s/tls-resume-gnutls",
		 test_env_path("HELPER_DIR"));
	st = test_run_capture(argv, NULL, true, &out, NULL, IT_TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: status %#x: %s",
		      resume_mode[_i], st, out);
	ck_assert_msg(strstr(out, "REQ1 trace=0af7651916cd43dd8448eb211c803191 "),
		      "%s: %s", resume_mode[_i], out);
	ck_assert_msg(strstr(out, "REQ2 trace=0af7651916cd43dd8448eb211c803192 "),
		      "%s: %s", resume_mode[_i], out);
	free(out);
}
END_TEST

/* Two connections in parallel, each blocked in its request: each thread
 * shows its own connection's context. */
START_TEST(test_tpc_two_connections)
{
	static const char r1[] = "GET /block/a HTTP/1.1\r\nHost: x\r\n" TP1 "\r\n";
	static const char r2[] = "GET /block/b HTTP/1.1\r\nHost: x\r\n"
				 "traceparent: 00-" T2 "-" P1 "-00\r\n\r\n";
	struct tls_dir d;
	struct it_server s;
	struct it_thread_ctx t;
	struct tc c1, c2;
	long tid1, tid2;

	tls_dir_make(&d);
	srv_start(&s, SRV_OPENSSL, &d);
	tc_connect(&c1, s.port);
	tc_connect(&c2, s.port);
	tc_send(&c1, r1, strlen(r1), 0);
	tid1 = expect_block(&s, "/block/a");
	tc_send(&c2, r2, strlen(r2), 7);
	tid2 = expect_block(&s, "/block/b");
	ck_assert_int_ne(tid1, tid2);
	assert_ctx(&s, tid1, T1, P1, "/block/a", &t);
	assert_ctx(&s, tid2, T2, P1, "/block/b", &t);
	ck_assert_uint_eq(t.flags, 0);
	test_child_send(&s.child, "go\ngo\n");
	free(tc_read_response(&c1));
	free(tc_read_response(&c2));
	tc_close(&c1);
	tc_close(&c2);
	it_wait_detached(&s, tid1, NULL, NULL);
	it_wait_detached(&s, tid2, NULL, NULL);
	it_server_stop(&s);
	tls_dir_remove(&d);
}
END_TEST

/* A server that holds a second reference to each session (--up-ref) frees
 * one while each request is in progress and after each response: the
 * request keeps its context, and the next traced request on the session
 * gets its own (trace and parent from its traceparent), also when it was
 * pipelined behind the one before (read before the free, made current
 * by the response).  The free of the last reference, while a request is
 * in progress, ends it there. */
START_TEST(test_tpc_up_ref)
{
	static const char r1[] = "GET /block/one HTTP/1.1\r\nHost: x\r\n" TP1 "\r\n";
	static const char r2[] = "GET /block/two HTTP/1.1\r\nHost: x\r\n"
				 "traceparent: 00-" T2 "-" P1 "-01\r\n\r\n";
	static const char r3[] = "GET /block/end HTTP/1.1\r\nHost: x\r\n"
				 "traceparent: 00-" T3 "-" P1 "-01\r\n\r\n";
	static const char r4[] = "GET /block/three HTTP/1.1\r\nHost: x\r\n" TP1 "\r\n"
				 "GET /block/four HTTP/1.1\r\nHost: x\r\n"
				 "traceparent: 00-" T2 "-" P1 "-01\r\n\r\n";
	struct tls_dir d;
	struct it_server s;
	struct it_thread_ctx t;
	struct tc c;
	char line[512], *json, *log;
	long tid;

	tls_dir_make(&d);
	srv_start(&s, (enum srv_kind)_i, &d);
	tc_connect(&c, s.port);
	tc_send(&c, r1, strlen(r1), 0);
	tid = expect_block(&s, "/block/one");
	assert_ctx(&s, tid, T1, P1, "/block/one", &t);
	test_child_send(&s.child, "go\n");
	it_assert_path_body(tc_read_response(&c), "/block/one");

	tc_send(&c, r2, strlen(r2), 0);
	ck_assert_int_eq(expect_block(&s, "/block/two"), tid);
	assert_ctx(&s, tid, T2, P1, "/block/two", &t);
	test_child_send(&s.child, "go\n");
	it_assert_path_body(tc_read_response(&c), "/block/two");

	tc_send(&c, r4, strlen(r4), 0);
	ck_assert_int_eq(expect_block(&s, "/block/three"), tid);
	assert_ctx(&s, tid, T1, P1, "/block/three", &t);
	test_child_send(&s.child, "go\n");
	it_assert_path_body(tc_read_response(&c), "/block/three");
	ck_assert_int_eq(expect_block(&s, "/block/four"), tid);
	assert_ctx(&s, tid, T2, P1, "/block/four", &t);
	test_child_send(&s.child, "go\n");
	it_assert_path_body(tc_read_response(&c), "/block/four");

	/* The server frees both references, then blocks. */
	tc_send(&c, r3, strlen(r3), 0);
	ck_assert_int_eq(expect_block(&s, "/block/end"), tid);
	json = it_ctxdump(s.child.pid);
	ck_assert_msg(it_dump_thread(json, tid, &t), "thread %ld not listed:\n%s", tid,
		      json);
	ck_assert_msg(!t.has_ctx && it_dump_count_trace(json, T3) == 0,
		      "context left after the last SSL_free:\n%s", json);
	free(json);
	log = it_events(&s);
	ck_assert_msg(it_events_count(log, T3, "ssl-free") == 1, "log:\n%s", log);
	free(log);
	test_child_send(&s.child, "go\n");
	test_child_expect(&s.child, "CLOSED ", line, sizeof(line), IT_TIMEOUT_MS);
	tc_close(&c);
	it_assert_gone(&s, tid, T1);
	it_assert_gone(&s, tid, T2);
	it_server_stop(&s);
	tls_dir_remove(&d);
}
END_TEST

/* ---- a session freed after its fd was reused ---- */

static const char *const defer_lib[] = {"openssl", "gnutls"};
static const char *const defer_reason[] = {"ssl-free", "gnutls-deinit"};

/* helpers/tls-defer.c: session A's fd is closed, connection B gets its
 * number, and A is freed while B's request is in progress (SSL_free,
 * gnutls_deinit of a session that still names the fd): B's context stays
 * published, and no event ends it.  The end of B itself, with its fd
 * open, still ends B's request (preload/conn.c, "Sessions"). */
START_TEST(test_deferred_free)
{
	static const char ra[] = "GET /a HTTP/1.1\r\nHost: x\r\n" TP1 "\r\n";
	static const char rb[] = "GET /block/b HTTP/1.1\r\nHost: x\r\n"
				 "traceparent: 00-" T2 "-" P1 "-01\r\n\r\n";
	static const char rc[] = "GET /block/end HTTP/1.1\r\nHost: x\r\n"
				 "traceparent: 00-" T3 "-" P1 "-01\r\n\r\n";
	static char prog[4096];
	char *argv[4], line[512], fda[512], name[32], *json, *log;
	struct tls_dir d;
	struct it_server s;
	struct it_thread_ctx t;
	struct tc ca, cb;
	long tid;

	tls_dir_make(&d);
	snprintf(name, sizeof(name), "tls-defer-%s", defer_lib[_i]);
	helper_argv(argv, prog, sizeof(prog), name, &d);
	it_server_start(&s, argv, true, NULL);

	tc_connect(&ca, s.port);
	test_child_expect(&s.child, "ACCEPT ", line, sizeof(line), IT_TIMEOUT_MS);
	snprintf(fda, sizeof(fda), "%s", line);
	tc_send(&ca, ra, strlen(ra), 0);
	it_assert_path_body(tc_read_response(&ca), "/a");

	tc_connect(&cb, s.port);
	test_child_expect(&s.child, "ACCEPT ", line, sizeof(line), IT_TIMEOUT_MS);
	ck_assert_msg(strcmp(line, fda) == 0, "B not on A's fd number: %s, %s", fda,
		      line);
	tc_send(&cb, rb, strlen(rb), 0);
	tid = expect_block(&s, "/block/b");
	/* A was freed just before: B's request keeps its context. */
	assert_ctx(&s, tid, T2, P1, "/block/b", &t);
	log = it_events(&s);
	ck_assert_msg(it_events_count(log, T2, defer_reason[_i]) == 0,
		      "%s: B's context ended by A's end:\n%s", defer_lib[_i], log);
	free(log);
	test_child_send(&s.child, "go\n");
	it_assert_path_body(tc_read_response(&cb), "/block/b");

	/* B freed with its fd open: that ends B's request. */
	tc_send(&cb, rc, strlen(rc), 0);
	ck_assert_int_eq(expect_block(&s, "/block/end"), tid);
	json = it_ctxdump(s.child.pid);
	ck_assert_msg(it_dump_thread(json, tid, &t), "thread %ld not listed:\n%s", tid,
		      json);
	ck_assert_msg(!t.has_ctx && it_dump_count_trace(json, T3) == 0,
		      "%s: context left after the session's end:\n%s", defer_lib[_i],
		      json);
	free(json);
	log = it_events(&s);
	ck_assert_msg(it_events_count(log, T3, defer_reason[_i]) == 1, "%s: log:\n%s",
		      defer_lib[_i], log);
	free(log);
	test_child_send(&s.child, "go\n");
	test_child_expect(&s.child, "CLOSED ", line, sizeof(line), IT_TIMEOUT_MS);
	tc_close(&ca);
	tc_close(&cb);
	it_server_stop(&s);
	tls_dir_remove(&d);
}
END_TEST

/* More TLS sessions without an fd at once than the shim first had room
 * for (64 slots): a server over memory BIOs (--bio mem: no fd, as
 * Boost.Asio's ssl::stream and h2o's sessions) with MANY_SESSIONS
 * connections, every request blocked in its handler with a trace of its
 * own.  Every handler's thread shows its own trace (old: about a third of
 * them showed nothing, their sessions not followed). */
#define MANY_SESSIONS 100

START_TEST(test_many_sessions_without_fd)
{
	static struct tc c[MANY_SESSIONS];
	static long tid[MANY_SESSIONS];
	char req[256], path[32], trace[33], *json;
	struct it_thread_ctx t;
	struct tls_dir d;
	struct it_server s;
	unsigned i, missing = 0;
	int n;

	tls_dir_make(&d);
	srv_start(&s, SRV_OPENSSL_MEM_BIO, &d);
	/* every session made before the first request: all live at once */
	for (i = 0; i < MANY_SESSIONS; i++)
		tc_connect(&c[i], s.port);
	for (i = 0; i < MANY_SESSIONS; i++) {
		snprintf(path, sizeof(path), "/block/%u", i);
		n = snprintf(req, sizeof(req),
			     "GET %s HTTP/1.1\r\nHost: x\r\ntraceparent: "
			     "00-5e55%028x-" P1 "-01\r\n\r\n",
			     path, i + 1);
		tc_send(&c[i], req, (size_t)n, 0);
		tid[i] = expect_block(&s, path);
	}
	json = it_ctxdump(s.child.pid);
	for (i = 0; i < MANY_SESSIONS; i++) {
		snprintf(trace, sizeof(trace), "5e55%028x", i + 1);
		ck_assert_msg(it_dump_thread(json, tid[i], &t), "thread %ld not listed",
			      tid[i]);
		if (!t.has_ctx || strcmp(t.trace, trace) != 0) {
			if (!missing)
				fprintf(stderr, "/block/%u: thread %ld shows %s\n", i,
					tid[i], t.has_ctx ? t.trace : "nothing");
			missing++;
		}
	}
	free(json);
	ck_assert_msg(missing == 0, "%u of %d handlers without their request's trace",
		      missing, MANY_SESSIONS);
	for (i = 0; i < MANY_SESSIONS; i++)
		test_child_send(&s.child, "go\n");
	for (i = 0; i < MANY_SESSIONS; i++) {
		snprintf(path, sizeof(path), "/block/%u", i);
		it_assert_path_body(tc_read_response(&c[i]), path);
		tc_close(&c[i]);
	}
	it_server_stop(&s);
	tls_dir_remove(&d);
}
END_TEST

/* ---- BIO callbacks ---- */

/* helpers/tls-biocb.c: a server and a client session in one process, on
 * socket BIOs and on fd BIOs, each with a BIO callback of the
 * application's, and the server's response written through an SSL BIO
 * with one: the callbacks see exactly the same calls under the shim as
 * without it (hooks/hook-openssl.c, ossl_fd() and "The SSL BIO"), and
 * the server sessions are still followed (a request context from each). */
/* A session written from inside its own read (helpers/tls-duplex.c: a
 * writer coroutine answers /a while the reader is parked in SSL_read()
 * waiting for /b): the answer is seen, and /b gets its own context (old:
 * the guard against counting bytes twice took any call of the session for
 * a nested one, the answer was lost, and /b showed /a's trace). */
START_TEST(test_write_inside_read)
{
	static char prog[4096];
	char *argv[4], *out, *err;
	struct tls_dir d;
	int st;

	tls_dir_make(&d);
	helper_argv(argv, prog, sizeof(prog), "tls-duplex", &d);
	st = test_run_capture(argv, NULL, true, &out, &err, IT_TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "tls-duplex: %#x\n%s%s",
		      st, out, err);
	ck_assert_msg(
		strstr(out, "READ /a trace=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa ") &&
			strstr(out, "READ /b trace=bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb "),
		"%s", out);
	free(out);
	free(err);
	tls_dir_remove(&d);
}
END_TEST

START_TEST(test_bio_callback)
{
	static char prog[4096];
	char *argv[4], *out[2], *err, evenv[96], *env[] = {evenv, NULL}, *log;
	struct tls_dir d;
	struct it_server ev;
	int st, i;

	tls_dir_make(&d);
	helper_argv(argv, prog, sizeof(prog), "tls-biocb", &d);
	memset(&ev, 0, sizeof(ev));
	snprintf(ev.events, sizeof(ev.events), "/tmp/ctxshim-it-events-XXXXXX");
	ev.events_fd = mkostemp(ev.events, O_CLOEXEC);
	ck_assert_int_gt(ev.events_fd, 2);
	snprintf(evenv, sizeof(evenv), "CTXSHIM_EVENTS=%s", ev.events);
	for (i = 0; i < 2; i++) {
		st = test_run_capture(argv, i ? env : NULL, i == 1, &out[i], &err,
				      IT_TIMEOUT_MS);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			      "tls-biocb%s: %#x\n%s%s", i ? " (shim)" : "", st, out[i],
			      err);
		free(err);
	}
	unlink(ev.events);
	ck_assert_msg(strstr(out[0], "socket server calls=") && strstr(out[0], "DONE"),
		      "tls-biocb: %s", out[0]);
	ck_assert_msg(strcmp(out[0], out[1]) == 0,
		      "BIO callbacks saw other calls under the shim:\n--- without\n%s"
		      "--- with\n%s",
		      out[0], out[1]);
	log = it_events(&ev);
	ck_assert_msg(it_events_count(log, T1, "request") == 1 &&
			      it_events_count(log, T2, "request") == 1,
		      "server sessions not followed:\n%s", log);
	free(log);
	close(ev.events_fd);
	free(out[0]);
	free(out[1]);
	tls_dir_remove(&d);
}
END_TEST

/* ---- nginx with ssl ---- */

struct ngx {
	struct nx_server nx;
	struct tls_dir tls;
};

static void
ngx_setup(struct ngx *n)
{
	memset(n, 0, sizeof(*n));
	tls_dir_make(&n->tls);
	nx_setup(&n->nx, n->tls.dir, "<html>ctxshim over tls</html>\n", 100 * 1024);
	n->nx.cert = n->tls.cert;
	n->nx.key = n->tls.key;
}

/* Send req over TLS in records of chunk bytes; read until nginx closes. */
static void
exchange(unsigned port,
	 const char *label,
	 const char *req,
	 size_t len,
	 size_t chunk,
	 char **acc,
	 size_t *acc_len)
{
	struct tc c;
	size_t got;
	char *resp;

	tc_connect(&c, port);
	tc_send(&c, req, len, chunk);
	resp = tc_read_all(&c, &got);
	tc_close(&c);
	nx_append(acc, acc_len, label, resp, got);
	free(resp);
}

/* Traced requests use trace ids 1..N_TRACED. */
static char *
ngx_requests(unsigned port)
{
	char *acc = NULL, req[1024];
	size_t acc_len = 0;
	int n;

	nx_traced_requests(port, TRACE_PREFIX, exchange, "== 1-byte records\n",
			   "== big\n", &acc, &acc_len);
	n = snprintf(req, sizeof(req),
		     "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	exchange(port, "== untraced\n", req, (size_t)n, 0, &acc, &acc_len);
	nx_strip_date(acc);
	return acc;
}

START_TEST(test_nginx_ssl)
{
	struct ngx n;
	char *plain, *shim;

	ngx_setup(&n);
	nx_start(&n.nx, false);
	plain = ngx_requests(n.nx.srv.port);
	nx_stop(&n.nx);

	nx_start(&n.nx, true);
	shim = ngx_requests(n.nx.srv.port);
	nx_assert_same(plain, shim, NULL);
	ck_assert_ptr_nonnull(strstr(plain, "HTTP/1.1 200 OK"));
	ck_assert_ptr_nonnull(strstr(plain, "HTTP/1.1 404 Not Found"));
	ck_assert_ptr_nonnull(strstr(plain, "HTTP/1.1 405 Not Allowed"));

	nx_assert_traced(&n.nx, TRACE_PREFIX, N_TRACED, "released");
	nx_stop(&n.nx);
	free(plain);
	free(shim);
	nx_cleanup(&n.nx);
}
END_TEST

/* ---- nginx with ssl_early_data: a request sent as TLS 1.3 0-RTT data ---- */

/* nginx reads 0-RTT data with SSL_read_early_data() (one byte during the
 * handshake, the rest from its recv handler) and answers it with
 * SSL_write_early_data(); libssl runs both through its PLT to
 * SSL_read_ex and SSL_write_ex, which the shim follows.  To read the
 * worker's record while a request runs, its access log is a FIFO the test
 * fills (ed_fill()): the worker blocks in the log write of the request,
 * after its response, before it goes back to epoll_wait(). */
#define ED_T1 "6bf92f3577b34da6a3ce929d0e0e4701"
#define ED_P1 "00f067aa0ba902b1"
#define ED_T2 "6bf92f3577b34da6a3ce929d0e0e4702"
#define ED_P2 "00f067aa0ba902b2"

/* Fill the FIFO (fd nonblocking): the worker's next log write blocks. */
static void
ed_fill(int fd)
{
	char nl[256];

	memset(nl, '\n', sizeof(nl));
	while (write(fd, nl, sizeof(nl)) > 0)
		;
	ck_assert_int_eq(errno, EAGAIN);
	/* up to the last byte: a line shorter than what is left would fit */
	while (write(fd, nl, 1) > 0)
		;
	ck_assert_int_eq(errno, EAGAIN);
}

/* Read the FIFO until a log line containing want went by, then empty it. */
static void
ed_drain(int fd, const char *want)
{
	long deadline = test_now_ms() + IT_TIMEOUT_MS;
	char buf[4096], tail[8192] = "";
	bool seen = false;

	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t r = read(fd, buf, sizeof(buf) - 1);
		size_t tl = strlen(tail);

		if (r > 0) {
			buf[r] = '\0';
			/* keep the end, for a line cut between two reads */
			if (tl + (size_t)r >= sizeof(tail)) {
				memmove(tail, tail + tl / 2, tl - tl / 2 + 1);
				tl = strlen(tail);
			}
			memcpy(tail + tl, buf, (size_t)r + 1);
			seen = seen || strstr(tail, want);
			continue;
		}
		ck_assert_int_eq(errno, EAGAIN);
		if (seen)
			return;
		ck_assert_msg(test_now_ms() < deadline, "no access log line with %s",
			      want);
		(void)poll(&pfd, 1, 100);
	}
}

/* The idle worker publishes nothing. */
static void
ed_assert_idle(long worker)
{
	char *json = it_ctxdump((pid_t)worker);
	struct it_thread_ctx t;

	ck_assert_msg(it_dump_thread(json, worker, &t), "worker %ld not listed:\n%s",
		      worker, json);
	ck_assert_msg(!t.has_ctx, "idle worker %ld still shows %s:\n%s", worker,
		      t.trace, json);
	free(json);
}

/* A session of nginx's with a ticket that allows early data: an untraced
 * request on a full handshake, read to its end (the tickets come first),
 * and a clean close. */
static SSL_SESSION *
ed_ticket(unsigned port, int fifo)
{
	static const char req[] = "GET /warm HTTP/1.1\r\nHost: x\r\n\r\n";
	struct tc c;
	SSL_SESSION *sess;
	char *resp;

	tc_connect(&c, port);
	ck_assert_str_eq(SSL_get_version(c.ssl), "TLSv1.3");
	tc_send(&c, req, strlen(req), 0);
	resp = tc_read_response(&c);
	ck_assert_msg(strstr(resp, "\r\n\r\nearly=\n"), "response: %s", resp);
	free(resp);
	ed_drain(fifo, "\"GET /warm ");
	sess = SSL_get1_session(c.ssl);
	ck_assert_ptr_nonnull(sess);
	ck_assert_int_eq(SSL_SESSION_is_resumable(sess), 1);
	ck_assert_uint_gt(SSL_SESSION_get_max_early_data(sess), 0);
	(void)SSL_shutdown(c.ssl);
	tc_close(&c);
	return sess;
}

/* Request 1 as 0-RTT data of a resumed session (nginx's $ssl_early_data
 * is "1" in its answer), request 2 on the same connection after the
 * handshake: while each runs, the worker shows its context (its trace,
 * parent, and a span of its own); between them and after them, none.
 * Old (the SSL_read_ex hook not reached from SSL_read_early_data):
 * request 1 had no context. */
START_TEST(test_nginx_early_data)
{
	static const char r1[] = "GET /zero HTTP/1.1\r\nHost: x\r\n"
				 "traceparent: 00-" ED_T1 "-" ED_P1 "-01\r\n\r\n";
	static const char r2[] = "GET /second HTTP/1.1\r\nHost: x\r\n"
				 "traceparent: 00-" ED_T2 "-" ED_P2 "-01\r\n\r\n";
	struct ngx n;
	struct tc c;
	char *argv[] = {NGINX, "-p", n.nx.dir, "-c", n.nx.conf, "-e", n.nx.err, NULL};
	char fifo_path[128], extra[512], span1[17], span2[17], *resp, *log;
	SSL_SESSION *sess;
	size_t written;
	long worker;
	int fifo, len, one = 1;

	ngx_setup(&n);
	snprintf(fifo_path, sizeof(fifo_path), "%s/access.fifo", n.tls.dir);
	ck_assert_int_eq(mkfifo(fifo_path, 0666), 0);
	/* Open before nginx does (its open for writing would wait for a
	 * reader); small, so that a few bytes fill it. */
	fifo = open(fifo_path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	ck_assert_int_ge(fifo, 0);
	(void)fcntl(fifo, F_SETPIPE_SZ, 4096);
	len = snprintf(extra, sizeof(extra),
		       "    ssl_protocols TLSv1.3;\n"
		       "    ssl_early_data on;\n"
		       "    access_log %s;\n"
		       "    location / { return 200 \"early=$ssl_early_data\\n\"; }\n",
		       fifo_path);
	ck_assert_int_lt(len, (int)sizeof(extra));
	n.nx.srv.port = nx_free_port();
	nx_write_conf(&n.nx, n.nx.srv.port, extra);
	nx_launch(&n.nx, argv, true, "nginx");

	sess = ed_ticket(n.nx.srv.port, fifo);
	ed_fill(fifo);
	c.fd = it_connect(n.nx.srv.port);
	ck_assert_int_eq(setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)),
			 0);
	c.ssl = SSL_new(client_ctx());
	ck_assert_ptr_nonnull(c.ssl);
	ck_assert_int_eq(SSL_set_fd(c.ssl, c.fd), 1);
	ck_assert_int_eq(SSL_set_session(c.ssl, sess), 1);
	ck_assert_int_eq(SSL_write_early_data(c.ssl, r1, strlen(r1), &written), 1);
	ck_assert_uint_eq(written, strlen(r1));

	/* Request 1: the worker blocks in its log write, after the answer.
	 * The client's Finished is sent only then (SSL_connect()): nginx's
	 * $ssl_early_data is "1" until the handshake is over. */
	worker = nx_wait_attach_tid(&n.nx.srv, ED_T1);
	ck_assert_int_ne(worker, n.nx.srv.child.pid);
	it_assert_get(worker, ED_T1, ED_P1, "/zero", span1);
	ck_assert_msg(SSL_connect(c.ssl) == 1, "TLS handshake failed");
	ck_assert_int_eq(SSL_session_reused(c.ssl), 1);
	ck_assert_int_eq(SSL_get_early_data_status(c.ssl), SSL_EARLY_DATA_ACCEPTED);
	resp = tc_read_response(&c);
	ck_assert_msg(strstr(resp, "\r\n\r\nearly=1\n"), "not read as early data: %s",
		      resp);
	free(resp);
	ed_drain(fifo, "\"GET /zero ");
	it_wait_detached(&n.nx.srv, worker, ED_T1, "epoll_wait");
	ed_assert_idle(worker);

	/* Request 2, after the handshake: its own context. */
	ed_fill(fifo);
	tc_send(&c, r2, strlen(r2), 0);
	ck_assert_int_eq(nx_wait_attach_tid(&n.nx.srv, ED_T2), worker);
	it_assert_get(worker, ED_T2, ED_P2, "/second", span2);
	ck_assert_str_ne(span2, span1);
	resp = tc_read_response(&c);
	ck_assert_msg(strstr(resp, "\r\n\r\nearly=\n"), "response: %s", resp);
	free(resp);
	ed_drain(fifo, "\"GET /second ");
	it_wait_detached(&n.nx.srv, worker, ED_T2, "epoll_wait");
	ed_assert_idle(worker);
	tc_close(&c);

	/* Each attached once, by its head, with one span; request 2 not
	 * queued behind request 1 (a "pipelined" switch: the 0-RTT answer,
	 * SSL_write_early_data's, was not seen), request 1 not shown again
	 * by a later read. */
	log = it_events(&n.nx.srv);
	ck_assert_msg(it_events_count(log, ED_T1, "request") == 1 &&
			      it_events_spans(log, ED_T1, NULL) == 1 &&
			      it_events_count(log, ED_T1, "read") == 0 &&
			      it_events_count(log, ED_T2, "request") == 1 &&
			      it_events_spans(log, ED_T2, NULL) == 1,
		      "request 1 not answered, or not started once, log:\n%s", log);
	free(log);
	nx_stop(&n.nx);
	SSL_SESSION_free(sess);
	close(fifo);
	nx_cleanup(&n.nx);
}
END_TEST

/* ---- libmicrohttpd over https ---- */

static const char *const mhd_modes[] = {"thread", "select", "epoll"};

/* Wait for mhd-server's "IN <tid> GET <url>"; checks the url, returns the
 * tid. */
static long
mhd_expect_in(struct it_server *s, const char *url)
{
	char line[1200], want[600], *p;
	long tid;

	test_child_expect(&s->child, "IN ", line, sizeof(line), IT_TIMEOUT_MS);
	tid = strtol(line + 3, &p, 10);
	ck_assert_int_gt(tid, 0);
	snprintf(want, sizeof(want), " GET %s", url);
	ck_assert_str_eq(p, want);
	return tid;
}

static void
mhd_assert_body(char *resp, const char *body)
{
	const char *b = strstr(resp, "\r\n\r\n");

	ck_assert_msg(strncmp(resp, "HTTP/1.1 200 OK\r\n", 17) == 0 && b &&
			      strcmp(b + 4, body) == 0,
		      "unexpected response: %s", resp);
	free(resp);
}

/* A libmicrohttpd HTTPS server (MHD_USE_TLS; Debian's libmicrohttpd does
 * TLS with GnuTLS over the accepted fd, so hook-gnutls.c hands the
 * plaintext to the socket level, whose context hook-mhd.c adopts) in each
 * threading mode: while a traced request blocks in the handler, ctxdump
 * shows its trace, parent and header on the handler's thread only, with
 * one span-id in the log; the next request on the session (untraced, in
 * 1-byte records) gets its own trace; afterwards nothing is left.
 *
 * url.path is the target as sent, without the query, on both requests,
 * though MHD hands the handler its percent-decoded url ("/block/café"):
 * the socket level stops scanning the fd once hook-mhd.c claims it, so
 * the second request's path can only come from MHD's URI log callback
 * (hooks/hook-mhd.c, "url.path"). */
START_TEST(test_mhd_https)
{
	static const char first[] =
		"GET /block/caf%C3%A9?q=1 HTTP/1.1\r\nHost: x\r\n" TP1
		"X-Request-Id: rid-8\r\n\r\n";
	static const char second[] = "GET /block/caf%C3%A9/2?q=2 HTTP/1.1\r\n"
				     "Host: x\r\nConnection: close\r\n\r\n";
	static char prog[4096];
	char *argv[5], *env[] = {"CTXSHIM_HEADER_ATTRS=x-request-id", NULL};
	char *log, line[512], span[17];
	struct tls_dir d;
	struct it_server s;
	struct it_thread_ctx t, t2;
	struct tc c;
	long tid, tid2;

	tls_dir_make(&d);
	snprintf(prog, sizeof(prog), "%s/mhd-server", test_env_path("HELPER_DIR"));
	argv[0] = prog;
	argv[1] = (char *)mhd_modes[_i];
	argv[2] = d.cert;
	argv[3] = d.key;
	argv[4] = NULL;
	it_server_start(&s, argv, true, env);

	tc_connect(&c, s.port);
	tc_send(&c, first, strlen(first), 0);
	tid = mhd_expect_in(&s, "/block/caf\xc3\xa9");
	assert_ctx(&s, tid, T1, P1, "/block/caf%C3%A9", &t);
	ck_assert_uint_eq(t.flags, 1);
	ck_assert_str_eq(t.extra, "rid-8");
	test_child_send(&s.child, "GO\n");
	mhd_assert_body(tc_read_response(&c), "GET /block/caf\xc3\xa9 0\n");

	tc_send(&c, second, strlen(second), 1);
	tid2 = mhd_expect_in(&s, "/block/caf\xc3\xa9/2");
	assert_ctx(&s, tid2, NULL, NULL, "/block/caf%C3%A9/2", &t2);
	ck_assert_str_ne(t2.span, t.span);
	test_child_send(&s.child, "GO\n");
	mhd_assert_body(tc_read_response(&c), "GET /block/caf\xc3\xa9/2 0\n");
	tc_close(&c);
	/* The first request's "DONE" went by while waiting for "IN". */
	test_child_expect(&s.child, "DONE ", line, sizeof(line), IT_TIMEOUT_MS);

	log = it_events(&s);
	/* The socket level built the first request's context from the TLS
	 * plaintext ("request"), and the handler published that same span. */
	ck_assert_msg(it_events_spans(log, T1, span) == 1, "%s: log:\n%s",
		      mhd_modes[_i], log);
	ck_assert_str_eq(span, t.span);
	ck_assert_msg(it_events_count(log, T1, "request") == 1, "%s: log:\n%s",
		      mhd_modes[_i], log);
	ck_assert_msg(it_events_count(log, T1, "mhd-handler") >= 1, "%s: log:\n%s",
		      mhd_modes[_i], log);
	ck_assert_msg(it_events_spans(log, t2.trace, span) == 1, "%s: log:\n%s",
		      mhd_modes[_i], log);
	free(log);
	it_assert_gone(&s, tid, T1);
	it_assert_gone(&s, tid2, t2.trace);
	it_server_stop(&s);
	tls_dir_remove(&d);
}
END_TEST

/* ---- libcurl over https ---- */

/* Each transfer carries exactly one traceparent: TRACEPARENT's trace, a
 * new span-id each. */
START_TEST(test_curl_https)
{
	char tp_env[] = "TRACEPARENT=00-" T1 "-" P1 "-01";
	char prog[4096], url[128], *env[] = {tp_env, NULL}, *out, *err;
	char *cargv[] = {prog, "-k", "-n", "3", url, NULL};
	char spans[3][17], line[512];
	struct tls_dir d;
	struct it_server s;
	int st, i;

	tls_dir_make(&d);
	srv_start(&s, SRV_OPENSSL, &d);
	snprintf(prog, sizeof(prog), "%s/curl-get", test_env_path("HELPER_DIR"));
	snprintf(url, sizeof(url), "https://127.0.0.1:%u/x", s.port);
	st = test_run_capture(cargv, env, true, &out, &err, IT_TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "curl-get: %#x %s %s", st,
		      out, err);
	ck_assert_ptr_nonnull(strstr(out, "DONE 0"));
	for (i = 0; i < 3; i++) {
		char want[128];

		test_child_expect(&s.child, "REQ ", line, sizeof(line), IT_TIMEOUT_MS);
		snprintf(want, sizeof(want), " /x 1 00-%s-", T1);
		ck_assert_msg(strstr(line, want),
			      "request without exactly one "
			      "traceparent of the trace: %s",
			      line);
		memcpy(spans[i], strstr(line, want) + strlen(want), 16);
		spans[i][16] = '\0';
		ck_assert_str_ne(spans[i], P1);
		ck_assert_str_eq(strstr(line, want) + strlen(want) + 16, "-01");
	}
	ck_assert_str_ne(spans[0], spans[1]);
	ck_assert_str_ne(spans[1], spans[2]);
	free(out);
	free(err);
	it_server_stop(&s);
	tls_dir_remove(&d);
}
END_TEST

/* ---- a session object reused with SSL_clear() ---- */

static const char *const clear_mode[] = {"clean", "unanswered", "cut", "implicit"};

/* helpers/tls-clear.c: a server session over memory BIOs (followed by its
 * SSL pointer) that SSL_clear() resets for a second client.  Connection
 * 1's request (trace 1111..., /one), answered or not, its head whole or
 * cut short, must not reach connection 2: nothing of it published on
 * connection 2 (its handshake, its request), whose request's context is
 * its own (trace 2222..., /two).  clean and implicit passed before
 * SSL_clear() was hooked: they keep the hook from ending what libssl's own
 * SSL_clear() calls (SSL_new, a first handshake) must not end. */
START_TEST(test_ssl_clear)
{
	static const char t1[] = "trace=11111111111111111111111111111111 ";
	static const char t2[] = "trace=22222222222222222222222222222222 ";
	static char prog[4096];
	char *argv[3], *out, *err, *line;
	int st;

	snprintf(prog, sizeof(prog), "%s/tls-clear", test_env_path("HELPER_DIR"));
	argv[0] = prog;
	argv[1] = (char *)clear_mode[_i];
	argv[2] = NULL;
	st = test_run_capture(argv, NULL, true, &out, &err, IT_TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, "DONE\n"),
		      "tls-clear %s: %#x\n%s%s", clear_mode[_i], st, out, err);
	/* Connection 1 was followed at all (its head whole). */
	if (strcmp(clear_mode[_i], "cut") != 0)
		ck_assert_msg(strstr(out, t1), "%s: connection 1 not followed:\n%s",
			      clear_mode[_i], out);
	line = strstr(out, "conn2 ");
	ck_assert_ptr_nonnull(line);
	ck_assert_msg(!strstr(line, t1) && !strstr(line, "a1=/one"),
		      "%s: connection 1's request on connection 2:\n%s", clear_mode[_i],
		      out);
	line = strstr(out, "conn2 read");
	ck_assert_ptr_nonnull(line);
	ck_assert_msg(strncmp(strstr(line, "trace="), t2, strlen(t2)) == 0 &&
			      strstr(line, " a1=/two"),
		      "%s: connection 2's request not its own:\n%s", clear_mode[_i],
		      out);
	free(out);
	free(err);
}
END_TEST

/* Python's asyncio over TLS (asyncio.start_server(ssl=...), the system
 * python3 with libssl.so.3): the session has no fd (asyncio's SSL
 * transport feeds memory BIOs from its own recv()), so it is followed by
 * its SSL pointer, under a virtual id.  The loop reads a request in its
 * read callback and runs the handler after a zero-timeout epoll_wait, as
 * over plain TCP (test-preload-asyncio.c): a handler that blocks the loop
 * must show its request.  Old, that wait cleared the context of a
 * connection without an fd (hooks/hook-socket.c, sk_wait_keeps()).  The
 * server ends with its one connection. */
#define PYTHON "/usr/bin/python3"

static const char asyncio_tls_py[] =
	"import asyncio, ssl, sys, threading\n"
	"ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n"
	"ctx.load_cert_chain(sys.argv[1], sys.argv[2])\n"
	"async def handle(r, w):\n"
	"    while True:\n"
	"        try:\n"
	"            head = await r.readuntil(b'\\r\\n\\r\\n')\n"
	"        except (asyncio.IncompleteReadError, ConnectionError):\n"
	"            break\n"
	"        path = head.split(b' ', 2)[1].decode()\n"
	"        if path.startswith('/block'):\n"
	"            print('BLOCK', threading.get_native_id(), path, flush=True)\n"
	"            sys.stdin.readline()\n"
	"        body = ('path=' + path + '\\n').encode()\n"
	"        w.write(b'HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\n\\r\\n'\n"
	"                % len(body) + body)\n"
	"        await w.drain()\n"
	"    w.close()\n"
	"    stop.set()\n"
	"async def main():\n"
	"    global stop\n"
	"    stop = asyncio.Event()\n"
	"    srv = await asyncio.start_server(handle, '127.0.0.1', 0, ssl=ctx)\n"
	"    print('READY', srv.sockets[0].getsockname()[1], flush=True)\n"
	"    await stop.wait()\n"
	"asyncio.run(main())\n";

START_TEST(test_asyncio_tls)
{
	static const char first[] = "GET /block/one HTTP/1.1\r\nHost: x\r\n" TP1 "\r\n";
	static const char second[] = "GET /block/two HTTP/1.1\r\nHost: x\r\n\r\n";
	char *argv[] = {PYTHON, "-c", (char *)asyncio_tls_py, NULL, NULL, NULL};
	struct tls_dir d;
	struct it_server s;
	struct it_thread_ctx t, t2;
	struct tc c;
	long tid;

	if (access(PYTHON, X_OK) != 0)
		test_skip(PYTHON " not found");
	tls_dir_make(&d);
	argv[3] = d.cert;
	argv[4] = d.key;
	it_server_start(&s, argv, true, NULL);
	tc_connect(&c, s.port);
	tc_send(&c, first, strlen(first), 0);
	tid = expect_block(&s, "/block/one");
	assert_ctx(&s, tid, T1, P1, "/block/one", &t);
	test_child_send(&s.child, "go\n");
	it_assert_path_body(tc_read_response(&c), "/block/one");
	/* the next request on the connection: its own context */
	tc_send(&c, second, strlen(second), 0);
	ck_assert_int_eq(expect_block(&s, "/block/two"), tid);
	assert_ctx(&s, tid, NULL, NULL, "/block/two", &t2);
	ck_assert_str_ne(t2.span, t.span);
	test_child_send(&s.child, "go\n");
	it_assert_path_body(tc_read_response(&c), "/block/two");
	tc_close(&c);
	it_wait_detached(&s, tid, t2.trace, NULL);
	it_server_stop(&s);
	tls_dir_remove(&d);
}
END_TEST

static const char *const jump_mode[] = {"read", "bio"};

/* helpers/tls-jump.c: a request timeout that siglongjmp()s out of a
 * blocking SSL_read (a session reused with SSL_clear()) or BIO_read on an
 * SSL BIO.  The next connection's request has its context: the guards
 * the hooks held across the abandoned call were released
 * (hooks/hook-longjmp.c); before, that session and every SSL BIO of the
 * thread stayed unfollowed. */
START_TEST(test_read_timeout_jump)
{
	static char prog[4096];
	char *argv[3], *out, *err, *line;
	int st;

	snprintf(prog, sizeof(prog), "%s/tls-jump", test_env_path("HELPER_DIR"));
	argv[0] = prog;
	argv[1] = (char *)jump_mode[_i];
	argv[2] = NULL;
	st = test_run_capture(argv, NULL, true, &out, &err, IT_TIMEOUT_MS);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, "DONE\n"),
		      "tls-jump %s: %#x\n%s%s", jump_mode[_i], st, out, err);
	line = strstr(out, "conn2 ");
	ck_assert_msg(line && strncmp(line + 6,
				      "trace=22222222222222222222222222222222 ",
				      39) == 0,
		      "tls-jump %s: connection 2's request without its context:\n%s",
		      jump_mode[_i], out);
	free(out);
	free(err);
}
END_TEST

TEST_SUITE(tls_suite)
{
	Suite *s = suite_create("integration-tls");
	TCase *tc = tcase_create("tls");
	char p[4096];
	int n = SRV_N;

	snprintf(p, sizeof(p), "%s/tls-server-openssl", test_env_path("HELPER_DIR"));
	if (access(p, X_OK) != 0)
		test_skip("%s not built (Debian: apt-get install libssl-dev)", p);
	snprintf(p, sizeof(p), "%s/tls-server-gnutls", test_env_path("HELPER_DIR"));
	if (access(p, X_OK) != 0)
		n = SRV_GNUTLS; /* built without libgnutls28-dev */
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_tpc_server, 0, n);
	tcase_add_test(tc, test_tpc_two_connections);
	tcase_add_loop_test(tc, test_tpc_read_fills_buffer, 0, n > SRV_GNUTLS ? 5 : 3);
	tcase_add_loop_test(tc, test_tpc_pipeline_full, 0, n > SRV_GNUTLS ? 2 : 1);
	/* openssl, and the GnuTLS servers that are built */
	tcase_add_loop_test(tc, test_tpc_continue, SRV_OPENSSL, SRV_OPENSSL + 1);
	tcase_add_loop_test(tc, test_tpc_continue, SRV_GNUTLS, n);
	tcase_add_loop_test(tc, test_tpc_up_ref, SRV_OPENSSL_UP_REF,
			    SRV_OPENSSL_MEM_BIO_UP_REF + 1);
	snprintf(p, sizeof(p), "%s/tls-defer-gnutls", test_env_path("HELPER_DIR"));
	tcase_add_loop_test(tc, test_deferred_free, 0, access(p, X_OK) == 0 ? 2 : 1);
	snprintf(p, sizeof(p), "%s/tls-resume-gnutls", test_env_path("HELPER_DIR"));
	if (access(p, X_OK) == 0)
		tcase_add_loop_test(
			tc, test_gnutls_resumed, 0,
			(int)(sizeof(resume_mode) / sizeof(resume_mode[0])));
	tcase_add_test(tc, test_bio_callback);
	tcase_add_test(tc, test_write_inside_read);
	tcase_add_test(tc, test_many_sessions_without_fd);
	tcase_add_test(tc, test_asyncio_tls);
	snprintf(p, sizeof(p), "%s/tls-clear", test_env_path("HELPER_DIR"));
	if (access(p, X_OK) == 0)
		tcase_add_loop_test(tc, test_ssl_clear, 0,
				    (int)(sizeof(clear_mode) / sizeof(clear_mode[0])));
	snprintf(p, sizeof(p), "%s/tls-jump", test_env_path("HELPER_DIR"));
	if (access(p, X_OK) == 0)
		tcase_add_loop_test(tc, test_read_timeout_jump, 0,
				    (int)(sizeof(jump_mode) / sizeof(jump_mode[0])));
	if (access(NGINX, X_OK) == 0) {
		tcase_add_test(tc, test_nginx_ssl);
		tcase_add_test(tc, test_nginx_early_data);
	}
	snprintf(p, sizeof(p), "%s/curl-get", test_env_path("HELPER_DIR"));
	if (access(p, X_OK) == 0)
		tcase_add_test(tc, test_curl_https);
	snprintf(p, sizeof(p), "%s/mhd-server", test_env_path("HELPER_DIR"));
	if (access(p, X_OK) == 0)
		tcase_add_loop_test(tc, test_mhd_https, 0, 3);
	suite_add_tcase(s, tc);
	return s;
}
