/* SPDX-License-Identifier: Apache-2.0 */
/* Real programs under the shim must behave exactly as without it: nginx,
 * lighttpd, python3 -m http.server, redis-server, our libmicrohttpd and
 * libevent servers, and the curl command line, each driven twice with the
 * same requests (traceparent headers, pipelining, large bodies, chunked
 * bodies, binary and TLS-looking bytes, an HTTP/2 preface), once without
 * and once with LD_PRELOAD.  Everything they say is collected into one
 * transcript per run -- responses, exit statuses and their own logs -- and
 * the two transcripts must be byte-identical after these normalisations,
 * each of a value that differs between any two runs, shim or not:
 *
 *   - the HTTP Date header's value (a clock);
 *   - the timestamps at the start of nginx, lighttpd, python and redis log
 *     lines, and the python log's bracketed date (a clock);
 *   - process and thread ids: nginx "PID#TID:" and "process PID", the
 *     redis "PID:M" prefix and "pid=PID", mhd/evhttp-server "<tid>" in
 *     their IN/BLOCK/DONE lines (the kernel's numbering);
 *   - nginx's "signal 15 (SIGTERM) received from PID" (the test's pid);
 *   - curl's "Failed to connect ... after N ms" (a clock);
 *   - the READY line of mhd/evhttp-server, which choose their own port;
 *   - the fd number in mhd-server's DONE lines: with a thread per
 *     connection, which descriptors are free when the next connection is
 *     accepted depends on when libmicrohttpd's threads finished closing
 *     the previous ones (two runs without the shim differ there too).
 *
 * Nothing else is rewritten: the servers' own access logs are configured
 * without clock fields and compared as written.  nginx's process-level
 * notices are not logged (main error_log at warn): its master and worker
 * write them into one file in an order that varies between any two runs;
 * everything about requests is (http error_log at info).  Each server gets the
 * same port in both runs (chosen free once), so ports need no
 * normalisation.  Every exchange has a deadline; a connection the server
 * keeps open is half-closed by the client after its bytes are sent, and
 * read until the server closes it. */
/* test-integration.h is static functions: not all are used here */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test-integration.h"

#include <netinet/tcp.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <time.h>

#define NGINX    "/usr/sbin/nginx"
#define LIGHTTPD "/usr/sbin/lighttpd"
#define REDIS    "/usr/bin/redis-server"
#define PYTHON   "/usr/bin/python3"
#define CURL     "/usr/bin/curl"

#define CASE_TIMEOUT_MS 10000
#define TP1             "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
#define TP2             "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
#define BIG_FILE        (512 * 1024)
#define BIG_BODY        (300 * 1024)

/* ---- a growing text ---- */

struct text {
	char *buf;
	size_t len, cap;
};

static void
text_add(struct text *t, const void *p, size_t n)
{
	if (t->len + n + 1 > t->cap) {
		t->cap = (t->len + n + 1) * 2;
		t->buf = realloc(t->buf, t->cap);
		ck_assert_ptr_nonnull(t->buf);
	}
	memcpy(t->buf + t->len, p, n);
	t->len += n;
	t->buf[t->len] = '\0';
}

static void text_printf(struct text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void
text_printf(struct text *t, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	ck_assert_int_lt(n, (int)sizeof(buf));
	text_add(t, buf, (size_t)n);
}

/* Every match of the extended regex pat (line by line) replaced with rep
 * (which may use \1..\9). */
static void
text_replace(struct text *t, const char *pat, const char *rep)
{
	struct text out = {0};
	regmatch_t m[10];
	regex_t re;
	const char *p = t->buf ? t->buf : "";

	ck_assert_int_eq(regcomp(&re, pat, REG_EXTENDED | REG_NEWLINE), 0);
	while (*p && regexec(&re, p, 10, m, p == t->buf ? 0 : REG_NOTBOL) == 0) {
		const char *r;

		text_add(&out, p, (size_t)m[0].rm_so);
		for (r = rep; *r; r++) {
			if (r[0] == '\\' && r[1] >= '1' && r[1] <= '9') {
				int k = r[1] - '0';

				if (m[k].rm_so >= 0)
					text_add(&out, p + m[k].rm_so,
						 (size_t)(m[k].rm_eo - m[k].rm_so));
				r++;
			} else {
				text_add(&out, r, 1);
			}
		}
		if (m[0].rm_eo == m[0].rm_so) {
			/* an empty match: step over one byte */
			if (!p[m[0].rm_eo])
				break;
			text_add(&out, p + m[0].rm_eo, 1);
			p += m[0].rm_eo + 1;
		} else {
			p += m[0].rm_eo;
		}
	}
	text_add(&out, p, strlen(p));
	regfree(&re);
	free(t->buf);
	*t = out;
}

/* The whole file, or "(none)". */
static void
text_add_file(struct text *t, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *data;
	size_t n = 0;

	if (fd < 0) {
		text_printf(t, "(no %s)\n", strrchr(path, '/') + 1);
		return;
	}
	data = it_read_all(fd, &n);
	close(fd);
	text_add(t, data ? data : "", n);
	free(data);
}

/* ---- files ---- */

static void
write_file(const char *path, const void *data, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	ck_assert_msg(fd >= 0, "%s", path);
	ck_assert_int_eq(write(fd, data, n), (ssize_t)n);
	close(fd);
}

static uint64_t
xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void
random_bytes(uint8_t *b, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)xorshift(&seed);
}

static unsigned
free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	unsigned port;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(getsockname(s, (struct sockaddr *)&a, &len), 0);
	port = ntohs(a.sin_port);
	close(s);
	return port;
}

/* A test directory the servers may read (nginx workers run as nobody):
 * www/ with index.html, big.bin (binary), a subdirectory. */
struct world {
	char dir[64];
	char www[96];
	char bigbody[96]; /* a file with BIG_BODY bytes, for curl */
	unsigned port;
};

static void
world_setup(struct world *w)
{
	char path[160];
	uint8_t *big = malloc(BIG_FILE);

	ck_assert_ptr_nonnull(big);
	snprintf(w->dir, sizeof(w->dir), "/tmp/ctxshim-matrix-XXXXXX");
	ck_assert_ptr_nonnull(test_mkdtemp(w->dir));
	ck_assert_int_eq(chmod(w->dir, 0755), 0);
	snprintf(w->www, sizeof(w->www), "%s/www", w->dir);
	ck_assert_int_eq(mkdir(w->www, 0755), 0);
	snprintf(path, sizeof(path), "%s/index.html", w->www);
	write_file(path, "<html>ctxshim matrix</html>\n", 28);
	snprintf(path, sizeof(path), "%s/sub", w->www);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/sub/a.txt", w->www);
	write_file(path, "a\n", 2);
	random_bytes(big, BIG_FILE, 42);
	snprintf(path, sizeof(path), "%s/big.bin", w->www);
	write_file(path, big, BIG_FILE);
	snprintf(w->bigbody, sizeof(w->bigbody), "%s/body.bin", w->dir);
	write_file(w->bigbody, big, BIG_BODY);
	free(big);
	w->port = free_port();
}

static void
world_cleanup(struct world *w)
{
	char *argv[] = {"/bin/rm", "-rf", w->dir, NULL};

	ck_assert_int_eq(test_run_capture(argv, NULL, false, NULL, NULL, 30000), 0);
}

/* ---- talking to a server ---- */

static void
wait_port(unsigned port, pid_t pid)
{
	long deadline = test_now_ms() + 20000;

	while (!it_port_listening(port)) {
		int st;

		ck_assert_msg(waitpid(pid, &st, WNOHANG) == 0,
			      "server exited before listening (status %#x)", st);
		ck_assert_msg(test_now_ms() < deadline, "port %u never opened", port);
		usleep(5000);
	}
}

/* Send the bytes of one case (in pieces of `chunk` bytes, 0 = at once)
 * and read until the server closes; the answer goes to the transcript.  A server that neither answers nor closes within the
 * deadline is recorded as such (it must do the same in both runs). */
static void
exchange(struct text *t,
	 unsigned port,
	 const char *name,
	 const void *req,
	 size_t len,
	 size_t chunk)
{
	const char *p = req;
	long deadline;
	int fd = it_connect(port), one = 1;
	struct text ans = {0};
	bool half_closed = false;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	while (len) {
		size_t n = chunk && chunk < len ? chunk : len;
		ssize_t r = send(fd, p, n, MSG_NOSIGNAL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break; /* the server closed early: what it said counts */
		p += r;
		len -= (size_t)r;
	}
	/* Read until the server closes.  Half-closing at once would race
	 * with servers that drop pipelined requests at EOF (evhttp): the
	 * client half-closes only after a second of silence, for servers
	 * that wait for more bytes (a TLS record, a preface). */
	deadline = test_now_ms() + CASE_TIMEOUT_MS;
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		char buf[65536];
		long left = deadline - test_now_ms();
		ssize_t r;
		int pr;

		if (left <= 0) {
			text_printf(&ans, "\n[no close within %d ms]", CASE_TIMEOUT_MS);
			break;
		}
		pr = poll(&pfd, 1, half_closed || left < 1000 ? (int)left : 1000);
		if (pr == 0 && !half_closed) {
			shutdown(fd, SHUT_WR);
			half_closed = true;
			continue;
		}
		if (pr <= 0)
			continue;
		r = read(fd, buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			text_printf(&ans, "\n[%s]",
				    errno == ECONNRESET ? "reset" : "error");
			break;
		}
		if (r == 0)
			break;
		/* NUL bytes escaped: the transcript is a C string */
		for (ssize_t k = 0; k < r; k++) {
			if (buf[k])
				text_add(&ans, buf + k, 1);
			else
				text_add(&ans, "\\x00", 4);
		}
	}
	close(fd);
	text_printf(t, "=== %s: %zu bytes\n", name, ans.len);
	if (ans.len)
		text_add(t, ans.buf, ans.len);
	text_printf(t, "\n");
	free(ans.buf);
}

static void
http_cases(struct text *t, unsigned port)
{
	static const char get[] =
		"GET /index.html HTTP/1.1\r\nHost: localhost\r\n"
		"traceparent: " TP1 "\r\ntracestate: rojo=00f067aa0ba902b7\r\n"
		"Connection: close\r\n\r\n";
	static const char pipelined[] =
		"GET /index.html HTTP/1.1\r\nHost: localhost\r\ntraceparent: " TP1
		"\r\n\r\n"
		"GET /missing HTTP/1.1\r\nHost: localhost\r\ntraceparent: " TP2
		"\r\n\r\n"
		"HEAD /big.bin HTTP/1.1\r\nHost: localhost\r\n\r\n"
		"GET /sub/a.txt HTTP/1.1\r\nHost: localhost\r\nConnection: "
		"close\r\n\r\n";
	static const char big_get[] =
		"GET /big.bin HTTP/1.1\r\nHost: localhost\r\n"
		"traceparent: " TP2 "\r\nConnection: close\r\n\r\n";
	static const char chunked[] =
		"POST /index.html HTTP/1.1\r\nHost: localhost\r\ntraceparent: " TP1
		"\r\n"
		"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
		"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n";
	static const char http10[] = "GET / HTTP/1.0\r\ntraceparent: " TP1 "\r\n\r\n";
	static const char bad_tp[] =
		"GET /index.html HTTP/1.1\r\nHost: localhost\r\n"
		"traceparent: 00-XYZ-00f067aa0ba902b7-01\r\n"
		"traceparent: " TP2 "\r\nConnection: close\r\n\r\n";
	static const uint8_t tls_hello[] = {
		0x16, 0x03, 0x01, 0x00, 0x2f, 0x01, 0x00, 0x00, 0x2b, 0x03, 0x03,
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b,
		0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16,
		0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x00,
		0x00, 0x02, 0x13, 0x01, 0x01, 0x00, 0x00, 0x00};
	static const char h2[] =
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00"
		"\x00\x00\x00";
	/* Requests that end after the request line without reaching a
	 * handler -- a header line without a colon, a client that goes away
	 * mid-headers -- first on a new connection, then after a request on
	 * the same one: libmicrohttpd reports their completion to
	 * mhd-server's NOTIFY_COMPLETED only if they were made
	 * "client-aware", which a URI log callback does (hook-mhd.c,
	 * mhd_notify_completed()). */
	static const char bad_header[] = "GET /index.html HTTP/1.1\r\nHost: localhost"
					 "\r\nNoColon\r\n\r\n";
	static const char cut[] = "GET /index.html HTTP/1.1\r\nHost: loc";
	static const char then_bad[] =
		"GET /index.html HTTP/1.1\r\nHost: localhost\r\n\r\n"
		"GET /sub/a.txt HTTP/1.1\r\nHost: localhost\r\nNoColon\r\n\r\n";
	static const char then_cut[] =
		"GET /index.html HTTP/1.1\r\nHost: localhost\r\n\r\n"
		"GET /sub/a.txt HTTP/1.1\r\nHost: loc";
	char head[512], *post;
	uint8_t bin[1024];
	size_t n;

	exchange(t, port, "get-traceparent", get, sizeof(get) - 1, 0);
	exchange(t, port, "pipelined", pipelined, sizeof(pipelined) - 1, 0);
	exchange(t, port, "split-7", pipelined, sizeof(pipelined) - 1, 7);
	exchange(t, port, "big-get", big_get, sizeof(big_get) - 1, 0);
	n = (size_t)snprintf(head, sizeof(head),
			     "POST /index.html HTTP/1.1\r\nHost: localhost\r\n"
			     "traceparent: " TP1 "\r\nContent-Length: %d\r\n"
			     "Connection: close\r\n\r\n",
			     BIG_BODY);
	post = malloc(n + BIG_BODY);
	ck_assert_ptr_nonnull(post);
	memcpy(post, head, n);
	random_bytes((uint8_t *)post + n, BIG_BODY, 7);
	exchange(t, port, "post-large", post, n + BIG_BODY, 0);
	free(post);
	exchange(t, port, "chunked", chunked, sizeof(chunked) - 1, 0);
	exchange(t, port, "http10", http10, sizeof(http10) - 1, 0);
	exchange(t, port, "bad-traceparent", bad_tp, sizeof(bad_tp) - 1, 0);
	random_bytes(bin, sizeof(bin), 99);
	exchange(t, port, "binary", bin, sizeof(bin), 0);
	exchange(t, port, "tls-hello", tls_hello, sizeof(tls_hello), 0);
	exchange(t, port, "h2-preface", h2, sizeof(h2) - 1, 0);
	exchange(t, port, "bad-header", bad_header, sizeof(bad_header) - 1, 0);
	exchange(t, port, "cut-headers", cut, sizeof(cut) - 1, 0);
	exchange(t, port, "then-bad-header", then_bad, sizeof(then_bad) - 1, 0);
	exchange(t, port, "then-cut-headers", then_cut, sizeof(then_cut) - 1, 0);
}

static void
redis_cases(struct text *t, unsigned port)
{
	static const char ping[] = "*1\r\n$4\r\nPING\r\n";
	static const char pipelined[] =
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nv1\r\n*2\r\n$3\r\nGET\r\n$"
		"1\r\nk\r\n"
		"*2\r\n$6\r\nEXISTS\r\n$1\r\nk\r\n*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n"
		"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING inline\r\n*1\r\n$4\r\nQUIT\r\n";
	static const char http[] = "GET / HTTP/1.1\r\nHost: localhost\r\n"
				   "traceparent: " TP1 "\r\n\r\n";
	static const char bad_proto[] = "*2\r\n$3\r\nGET\r\n$abc\r\n";
	char head[128], *big;
	uint8_t bin[512], tls[64];
	size_t n;

	exchange(t, port, "ping", ping, sizeof(ping) - 1, 0);
	exchange(t, port, "pipelined", pipelined, sizeof(pipelined) - 1, 0);
	exchange(t, port, "split-3", pipelined, sizeof(pipelined) - 1, 3);
	/* a 300 KiB value, written and read back */
	n = (size_t)snprintf(head, sizeof(head),
			     "*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%d\r\n", BIG_BODY);
	big = malloc(n + BIG_BODY + 64);
	ck_assert_ptr_nonnull(big);
	memcpy(big, head, n);
	memset(big + n, 'x', BIG_BODY);
	memcpy(big + n + BIG_BODY, "\r\n*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n", 24);
	exchange(t, port, "big-value", big, n + BIG_BODY + 24, 0);
	free(big);
	exchange(t, port, "http-request", http, sizeof(http) - 1, 0);
	exchange(t, port, "bad-protocol", bad_proto, sizeof(bad_proto) - 1, 0);
	random_bytes(bin, sizeof(bin), 99);
	bin[0] = '*';
	exchange(t, port, "binary", bin, sizeof(bin), 0);
	random_bytes(tls, sizeof(tls), 5);
	tls[0] = 0x16;
	tls[1] = 0x03;
	tls[2] = 0x01;
	exchange(t, port, "tls-hello", tls, sizeof(tls), 0);
}

/* ---- the servers ---- */

enum stop_how { STOP_TERM, STOP_STDIN, STOP_REDIS };

struct server {
	const char *name;
	const char *program; /* must exist */
	const char *package; /* Debian package, for the message */
	bool redis;
	enum stop_how stop;
	/* writes configuration files; fills argv */
	void (*prepare)(const struct world *w, char **argv, char *buf, size_t n);
	const char *logs[3]; /* files in w->dir, appended to the transcript */
	void (*normalize)(struct text *t);
};

static void
prep_nginx(const struct world *w, char **argv, char *buf, size_t n)
{
	static char conf_path[160];
	char conf[2048], path[160];
	int len;

	len = snprintf(
		conf, sizeof(conf),
		"worker_processes 1;\ndaemon off;\nmaster_process on;\n"
		"pid %1$s/nginx.pid;\nerror_log %1$s/error.log warn;\n"
		"events { worker_connections 64; }\n"
		"http {\n"
		"  error_log %1$s/http-error.log info;\n"
		"  log_format plain '$remote_addr \"$request\" $status "
		"$body_bytes_sent \"$http_traceparent\"';\n"
		"  access_log %1$s/access.log plain;\n"
		"  client_body_temp_path %1$s/body;\n"
		"  proxy_temp_path %1$s/proxy;\n  fastcgi_temp_path %1$s/fastcgi;\n"
		"  uwsgi_temp_path %1$s/uwsgi;\n  scgi_temp_path %1$s/scgi;\n"
		"  sendfile on;\n"
		"  server { listen 127.0.0.1:%2$u; root %3$s; }\n"
		"}\n",
		w->dir, w->port, w->www);
	ck_assert_int_lt(len, (int)sizeof(conf));
	snprintf(path, sizeof(path), "%s/nginx.conf", w->dir);
	write_file(path, conf, (size_t)len);
	snprintf(buf, n, "%s/error.log", w->dir);
	snprintf(conf_path, sizeof(conf_path), "%s", path);
	argv[0] = NGINX;
	argv[1] = "-p";
	argv[2] = (char *)w->dir;
	argv[3] = "-c";
	argv[4] = conf_path;
	argv[5] = "-e";
	argv[6] = buf;
	argv[7] = NULL;
}

static void
norm_nginx(struct text *t)
{
	text_replace(t, "^[0-9]{4}/[0-9]{2}/[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} ",
		     "<time> ");
	text_replace(t, "\\] [0-9]+#[0-9]+: ", "] <pid>#<tid>: ");
	text_replace(t, "process [0-9]+", "process <pid>");
	text_replace(t, "received from [0-9]+", "received from <pid>");
	/* a connection's serial number *N depends on nothing else */
}

static void
prep_lighttpd(const struct world *w, char **argv, char *buf, size_t n)
{
	char conf[2048], path[160];
	int len;

	len = snprintf(
		conf, sizeof(conf),
		"server.document-root = \"%3$s\"\n"
		"server.bind = \"127.0.0.1\"\nserver.port = %2$u\n"
		"server.errorlog = \"%1$s/error.log\"\n"
		"server.modules += ( \"mod_accesslog\" )\n"
		"accesslog.filename = \"%1$s/access.log\"\n"
		"accesslog.format = \"%%h \\\"%%r\\\" %%>s %%b "
		"\\\"%%{traceparent}i\\\"\"\n"
		"index-file.names = ( \"index.html\" )\n"
		"mimetype.assign = ( \".html\" => \"text/html\", "
		"\".txt\" => \"text/plain\", \"\" => \"application/octet-stream\" )\n",
		w->dir, w->port, w->www);
	ck_assert_int_lt(len, (int)sizeof(conf));
	snprintf(path, sizeof(path), "%s/lighttpd.conf", w->dir);
	write_file(path, conf, (size_t)len);
	snprintf(buf, n, "%s", path);
	argv[0] = LIGHTTPD;
	argv[1] = "-D";
	argv[2] = "-f";
	argv[3] = buf;
	argv[4] = NULL;
}

static void
norm_lighttpd(struct text *t)
{
	text_replace(t, "^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}: ",
		     "<time>: ");
}

static void
prep_python(const struct world *w, char **argv, char *buf, size_t n)
{
	snprintf(buf, n, "%u", w->port);
	argv[0] = PYTHON;
	argv[1] = "-m";
	argv[2] = "http.server";
	argv[3] = buf;
	argv[4] = "--bind";
	argv[5] = "127.0.0.1";
	argv[6] = "--directory";
	argv[7] = (char *)w->www;
	argv[8] = NULL;
}

static void
norm_python(struct text *t)
{
	text_replace(t,
		     "\\[[0-9]{2}/[A-Z][a-z]{2}/[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}\\]",
		     "[<date>]");
}

static void
prep_redis(const struct world *w, char **argv, char *buf, size_t n)
{
	snprintf(buf, n, "%u", w->port);
	argv[0] = REDIS;
	argv[1] = "--port";
	argv[2] = buf;
	argv[3] = "--bind";
	argv[4] = "127.0.0.1";
	argv[5] = "--save";
	argv[6] = "";
	argv[7] = "--appendonly";
	argv[8] = "no";
	argv[9] = "--daemonize";
	argv[10] = "no";
	argv[11] = "--dir";
	argv[12] = (char *)w->dir;
	argv[13] = "--logfile";
	argv[14] = "redis.log";
	argv[15] = NULL;
}

static void
norm_redis(struct text *t)
{
	text_replace(t, "^[0-9]+:([A-Z]) [0-9]{2} [A-Z][a-z]{2} [0-9]{4} [0-9:.]+ ",
		     "<pid>:\\1 <time> ");
	text_replace(t, "pid=[0-9]+", "pid=<pid>");
}

static void
prep_helper(const struct world *w,
	    char **argv,
	    char *buf,
	    size_t n,
	    const char *name,
	    const char *arg)
{
	(void)w;
	snprintf(buf, n, "%s/%s", test_env_path("HELPER_DIR"), name);
	argv[0] = buf;
	argv[1] = (char *)arg;
	argv[2] = NULL;
}

static void
prep_mhd(const struct world *w, char **argv, char *buf, size_t n)
{
	prep_helper(w, argv, buf, n, "mhd-server", "thread");
}

static void
prep_mhd_epoll(const struct world *w, char **argv, char *buf, size_t n)
{
	prep_helper(w, argv, buf, n, "mhd-server", "epoll");
}

static void
prep_evhttp(const struct world *w, char **argv, char *buf, size_t n)
{
	prep_helper(w, argv, buf, n, "evhttp-server", NULL);
}

static void
norm_helper(struct text *t)
{
	/* their output names the handling thread, and the port they chose */
	text_replace(t, "^(IN|DONE|BLOCK) [0-9]+ ", "\\1 <tid> ");
	text_replace(t, " fd=[0-9]+ ", " fd=<fd> ");
	text_replace(t, "^READY [0-9]+", "READY <port>");
}

static const struct server servers[] = {
	{"nginx",
	 NGINX,
	 "nginx-light",
	 false,
	 STOP_TERM,
	 prep_nginx,
	 {"error.log", "http-error.log", "access.log"},
	 norm_nginx},
	{"lighttpd",
	 LIGHTTPD,
	 "lighttpd",
	 false,
	 STOP_TERM,
	 prep_lighttpd,
	 {"error.log", "access.log"},
	 norm_lighttpd},
	{"python3-http.server",
	 PYTHON,
	 "python3",
	 false,
	 STOP_TERM,
	 prep_python,
	 {NULL},
	 norm_python},
	{"redis-server",
	 REDIS,
	 "redis-server",
	 true,
	 STOP_REDIS,
	 prep_redis,
	 {"redis.log"},
	 norm_redis},
	{"mhd-server-thread",
	 NULL,
	 NULL,
	 false,
	 STOP_STDIN,
	 prep_mhd,
	 {NULL},
	 norm_helper},
	{"mhd-server-epoll",
	 NULL,
	 NULL,
	 false,
	 STOP_STDIN,
	 prep_mhd_epoll,
	 {NULL},
	 norm_helper},
	{"evhttp-server",
	 NULL,
	 NULL,
	 false,
	 STOP_STDIN,
	 prep_evhttp,
	 {NULL},
	 norm_helper},
};

/* Our helpers choose their port and print it: wait for READY. */
static unsigned
helper_ready(struct test_child *c)
{
	char line[256];

	test_child_expect(c, "READY ", line, sizeof(line), 20000);
	return (unsigned)strtoul(line + 6, NULL, 10);
}

/* stdout of a child until EOF (the helpers' IN/DONE lines). */
static void
drain_output(struct test_child *c, struct text *t)
{
	if (c->len)
		text_add(t, c->buf, c->len);
	c->len = 0;
	for (;;) {
		char buf[4096];
		ssize_t r = read(c->out_fd, buf, sizeof(buf));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		text_add(t, buf, (size_t)r);
	}
}

/* One run of one server; returns its transcript. */
static struct text
run_server(const struct server *sv, struct world *w, bool preload)
{
	char *argv[20], buf[256], path[160];
	struct text t = {0}, out = {0};
	struct test_child c;
	unsigned port;
	int st;

	for (int i = 0; i < 3 && sv->logs[i]; i++) {
		snprintf(path, sizeof(path), "%s/%s", w->dir, sv->logs[i]);
		unlink(path);
	}
	sv->prepare(w, argv + 3, buf, sizeof(buf));
	/* stderr joined to stdout, which the transcript gets */
	argv[0] = "/bin/sh";
	argv[1] = "-c";
	argv[2] = "exec \"$0\" \"$@\" 2>&1";
	{
		char *env[] = {"PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1", NULL};

		test_child_start(&c, argv, env, preload);
	}
	if (sv->stop == STOP_STDIN) {
		port = helper_ready(&c);
	} else {
		port = w->port;
		wait_port(port, c.pid);
	}
	text_printf(&t, "##### %s\n", sv->name);
	if (sv->redis)
		redis_cases(&t, port);
	else
		http_cases(&t, port);

	switch (sv->stop) {
	case STOP_TERM:
		kill(c.pid, SIGTERM);
		break;
	case STOP_REDIS: {
		static const char shut[] = "*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n";

		exchange(&t, port, "shutdown", shut, sizeof(shut) - 1, 0);
		break;
	}
	case STOP_STDIN:
		break;
	}
	if (c.in_fd >= 0)
		close(c.in_fd);
	c.in_fd = -1;
	drain_output(&c, &out);
	st = test_child_finish(&c, 30000);
	text_printf(&t, "##### exit: %s %d\n", WIFEXITED(st) ? "status" : "signal",
		    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	text_printf(&t, "##### stdout+stderr:\n");
	if (out.len)
		text_add(&t, out.buf, out.len);
	free(out.buf);
	for (int i = 0; i < 3 && sv->logs[i]; i++) {
		snprintf(path, sizeof(path), "%s/%s", w->dir, sv->logs[i]);
		text_printf(&t, "##### %s:\n", sv->logs[i]);
		text_add_file(&t, path);
	}
	text_replace(&t, "^Date: [^\r\n]*", "Date: <date>");
	if (sv->normalize)
		sv->normalize(&t);
	return t;
}

/* The first line where the transcripts differ, with some context. */
static void
assert_same(const char *what, const struct text *a, const struct text *b)
{
	size_t i = 0, line = 1, ls = 0;

	if (a->len == b->len && memcmp(a->buf, b->buf, a->len) == 0)
		return;
	while (i < a->len && i < b->len && a->buf[i] == b->buf[i]) {
		if (a->buf[i] == '\n') {
			line++;
			ls = i + 1;
		}
		i++;
	}
	ck_abort_msg("%s differs with the shim at line %zu:\n--- without:\n%.300s\n"
		     "--- with:\n%.300s",
		     what, line, a->buf + ls, b->buf + ls);
}

/* MATRIX_KEEP=DIR: write each transcript (without the shim) to
 * DIR/<name>.txt, to read what is compared. */
static void
keep_transcript(const char *name, const struct text *t)
{
	const char *dir = getenv("MATRIX_KEEP");
	char path[4096];

	if (!dir || !*dir)
		return;
	snprintf(path, sizeof(path), "%s/%s.txt", dir, name);
	write_file(path, t->buf, t->len);
}

static void
check_server(const struct server *sv)
{
	struct world w;
	struct text a, b;

	if (sv->program && access(sv->program, X_OK) != 0)
		ck_abort_msg("%s is not installed (Debian: apt-get install %s)",
			     sv->program, sv->package);
	world_setup(&w);
	a = run_server(sv, &w, false);
	b = run_server(sv, &w, true);
	fprintf(stderr, "matrix: %s: %zu-byte transcripts\n", sv->name, a.len);
	keep_transcript(sv->name, &a);
	/* a transcript that says nothing would prove nothing */
	ck_assert_msg(strstr(a.buf, sv->redis ? "+PONG" : " 200 OK"), "%s:\n%s",
		      sv->name, a.buf);
	assert_same(sv->name, &a, &b);
	free(a.buf);
	free(b.buf);
	world_cleanup(&w);
}

START_TEST(server_byte_identical)
{
	check_server(&servers[_i]);
}
END_TEST

/* ---- the curl command line ---- */

static struct text
run_curl(const struct world *w, unsigned port, unsigned dead_port, bool preload)
{
	char url[5][128], data[128];
	struct text t = {0};
	char *env[] = {"TRACEPARENT=" TP1, NULL};
	const char *const *cmd;

	snprintf(url[0], sizeof(url[0]), "http://127.0.0.1:%u/index.html", port);
	snprintf(url[1], sizeof(url[1]), "http://127.0.0.1:%u/missing", port);
	snprintf(url[2], sizeof(url[2]), "http://127.0.0.1:%u/big.bin", port);
	snprintf(url[3], sizeof(url[3]), "http://127.0.0.1:%u/sub", port);
	snprintf(url[4], sizeof(url[4]), "http://127.0.0.1:%u/", dead_port);
	snprintf(data, sizeof(data), "@%s", w->bigbody);
	{
		const char *cmds[][16] = {
			{CURL, "-sS", "-D", "-", url[0], url[1], NULL},
			{CURL, "-sS", "-H", "traceparent: " TP2, "-o", "/dev/null",
			 "-w", "%{http_code} %{size_download} %{num_connects}\\n",
			 url[2], url[0], NULL},
			{CURL, "-sS", "-D", "-", "--data-binary", data, url[0], NULL},
			{CURL, "-sS", "-D", "-", "--http1.0", "-I", url[2], NULL},
			{CURL, "-sS", "-L", "-D", "-", "-o", "/dev/null", url[3], NULL},
			{CURL, "-sS", "--max-time", "5", url[4], NULL},
			{CURL, "-sS", "-H", "Transfer-Encoding: chunked",
			 "--data-binary", "abc", url[0], NULL},
		};

		for (size_t k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++) {
			char *out = NULL, *err = NULL;
			int st;

			cmd = cmds[k];
			st = test_run_capture((char *const *)cmd, env, preload, &out,
					      &err, 30000);
			text_printf(
				&t,
				"=== curl #%zu: exit %d\n--- stdout:\n%s\n--- "
				"stderr:\n%s\n",
				k, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st),
				out, err);
			free(out);
			free(err);
		}
	}
	text_replace(&t, "^Date: [^\r\n]*", "Date: <date>");
	/* "Failed to connect ... after N ms" (a clock) */
	text_replace(&t, "after [0-9]+ ms", "after <n> ms");
	return t;
}

/* curl under the shim (with a TRACEPARENT to pass on: hook-curl adds the
 * header to its requests) against nginx without it. */
START_TEST(curl_byte_identical)
{
	const struct server *ngx = &servers[0];
	char *argv[20], buf[256];
	struct text a, b;
	struct test_child c;
	struct world w;
	unsigned dead;

	if (strchr(test_env_path("CTXSHIM_LIB"), ' ')) {
		/* With libasan preloaded, Debian's curl hangs in setlocale()
		 * before main() does anything, shim or not. */
		fprintf(stderr, "matrix: curl: not run in a sanitizer build\n");
		return;
	}
	if (access(CURL, X_OK) != 0)
		ck_abort_msg("%s is not installed (Debian: apt-get install curl)",
			     CURL);
	if (access(NGINX, X_OK) != 0)
		ck_abort_msg(
			"%s is not installed (Debian: apt-get install nginx-light)",
			NGINX);
	world_setup(&w);
	ngx->prepare(&w, argv, buf, sizeof(buf));
	test_child_start(&c, argv, NULL, false);
	wait_port(w.port, c.pid);
	dead = free_port();
	a = run_curl(&w, w.port, dead, false);
	b = run_curl(&w, w.port, dead, true);
	kill(c.pid, SIGTERM);
	test_child_finish(&c, 30000);
	fprintf(stderr, "matrix: curl: %zu-byte transcripts\n", a.len);
	keep_transcript("curl", &a);
	ck_assert_ptr_nonnull(strstr(a.buf, "200 524288 1"));
	assert_same("curl", &a, &b);
	free(a.buf);
	free(b.buf);
	world_cleanup(&w);
}
END_TEST

TEST_SUITE(integration_matrix_suite)
{
	Suite *s = suite_create("integration-matrix");
	TCase *tc = tcase_create("matrix");

	tcase_set_timeout(tc, 240);
	tcase_add_loop_test(tc, server_byte_identical, 0,
			    sizeof(servers) / sizeof(servers[0]));
	tcase_add_test(tc, curl_byte_identical);
	suite_add_tcase(s, tc);
	return s;
}
