/* SPDX-License-Identifier: Apache-2.0 */
/* Small HTTP servers with no tracing code that hand each request's work to
 * another thread, a pool or a coroutine.  The shim's socket level gives the
 * thread that reads a request that request's context (traceparent); every
 * place the work then runs reports what it reads from its own
 * otel_thread_ctx_v1 in the response body, one "<where>=<context>" line
 * each.  All listen on 127.0.0.1, print "READY <pid> <port>" and serve N
 * connections (one request each).
 *
 *   flow-http uv N        libuv: the loop thread reads, uv_queue_work()
 *                         runs the work (all N in flight at once: N <= 4)
 *   flow-http glib N      a thread per connection reads, a GThreadPool item
 *                         does the work (all N in flight at once: N <= 4)
 *   flow-http ucontext N  one thread, a coroutine per connection: all read
 *                         their request first, then answer in reverse order
 *   flow-http ucontext-sched N  one thread that reads every request's head
 *                         itself and makes a coroutine for each; the last
 *                         one answers first, and the scheduler reports what
 *                         it shows after a switch back from a coroutine:
 *                         "SCHED read <context>" while all are in flight,
 *                         "SCHED answered <context>" once the request it
 *                         read last was answered
 *   flow-http ucontext-dup N  as ucontext-sched, but each request has a
 *                         4-byte body, sent after "HEADS" (every head
 *                         read), which its coroutine reads through a dup()
 *                         of the connection: "SCHED body <context>" after
 *                         the switch back from the last one, "SCHED
 *                         answered <context>" once it answered through
 *                         the original
 *   flow-http ucontext-moved N  as ucontext-sched, but each coroutine
 *                         first moves its connection to a dup() and
 *                         closes the original
 *   flow-http ucontext-reuse N  as ucontext-sched, but the last request's
 *                         coroutine, resumed, closes its connection
 *                         unanswered and dup()s the first one onto that
 *                         number: "SCHED closed <context>" after the
 *                         switch back (that request's client gets no
 *                         response)
 *   flow-http ucontext-fcgi  one multiplexed FastCGI connection that this
 *                         program also writes to (two requests in one
 *                         write), a coroutine per request: "FCGI <k> read
 *                         <context>" after request k is read, "FCGI 0
 *                         resumed <context>" once request 1 was answered
 *   flow-http ucontext-pipelined [single]  one connection that this
 *                         program also writes to, two requests pipelined
 *                         in one write (single: one request): "PIPE read
 *                         <context>" after the scheduler read them,
 *                         "PIPE answered <context>" after another thread
 *                         wrote the first one's response, "PIPE resumed
 *                         <context>" after the switch back from a
 *                         coroutine that answered the second one
 *   flow-http setcontext-fail N  one thread reads the first request's head,
 *                         saves a ucontext (getcontext), reads the other
 *                         heads, and setcontext()s to the ucontext made
 *                         unreadable (EFAULT): "SCHED before <context>",
 *                         "SCHED failed <context>" after the failed switch,
 *                         "SCHED waited <context>" after an epoll_wait()
 *                         with nothing ready
 *   flow-http worker      one connection; its thread starts a worker that
 *                         blocks: "WORKERS <pid> <conn tid> <worker tid>",
 *                         then "release" on stdin ends the worker, the
 *                         response goes out, "JOINED"; exit at stdin EOF
 */
#include "config.h"

#include "ctxobs.h"
#include "fcgi-build.h"
#include "fcgi-scan.h"
#include "listen-loopback.h"

#include <arpa/inet.h>
#include <errno.h>
#include <glib.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>
#include <uv.h>

#define CTX_TEXT 80
#define HEAD_MAX 8192
#define MAX_CONN 16

struct conn {
	int fd;
	char head[HEAD_MAX];
	size_t len;
	char body[1024];
	size_t body_len;
	/* glib */
	GMutex lock;
	GCond cond;
	bool done;
	/* ucontext */
	ucontext_t uc;
	char stack[64 * 1024];
};

static struct conn conns[MAX_CONN];
static pthread_barrier_t in_flight;

static void
die(const char *what)
{
	fprintf(stderr, "flow-http: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int
tid(void)
{
	return (int)syscall(SYS_gettid);
}

/* Append "<where>=<this thread's context>\n" to the body. */
static void
note(struct conn *c, const char *where)
{
	char ctx[CTX_TEXT];
	int n;

	ctxobs_format(ctx, sizeof(ctx));
	n = snprintf(c->body + c->body_len, sizeof(c->body) - c->body_len, "%s=%s\n",
		     where, ctx);
	if (n > 0 && (size_t)n < sizeof(c->body) - c->body_len)
		c->body_len += (size_t)n;
}

static bool
head_complete(const struct conn *c)
{
	return memmem(c->head, c->len, "\r\n\r\n", 4) != NULL;
}

static void
read_head(struct conn *c)
{
	while (!head_complete(c)) {
		ssize_t r = read(c->fd, c->head + c->len, sizeof(c->head) - c->len);

		if (r <= 0)
			die("read");
		c->len += (size_t)r;
	}
}

static size_t
response(const struct conn *c, char *out, size_t cap)
{
	int n = snprintf(
		out, cap,
		"HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n"
		"%.*s",
		c->body_len, (int)c->body_len, c->body);

	return n > 0 ? (size_t)n : 0;
}

static void
write_response(struct conn *c)
{
	char buf[2048];
	size_t n = response(c, buf, sizeof(buf)), off = 0;

	while (off < n) {
		ssize_t w = write(c->fd, buf + off, n - off);

		if (w <= 0)
			die("write");
		off += (size_t)w;
	}
}

static void
respond(struct conn *c)
{
	write_response(c);
	close(c->fd);
}

static int
listen_local(int *port)
{
	struct sockaddr_in a;
	int fd = listen_loopback(64, SOCK_CLOEXEC, &a);

	if (fd < 0)
		die("listen");
	*port = ntohs(a.sin_port);
	return fd;
}

static void
ready(int port)
{
	printf("READY %d %d\n", (int)getpid(), port);
	fflush(stdout);
}

/* ---- libuv ---- */

struct uv_conn {
	uv_tcp_t tcp;
	uv_work_t work;
	uv_write_t wr;
	uv_buf_t out;
	char outbuf[2048];
	struct conn *c;
};

static uv_tcp_t uv_server;
static int uv_n, uv_accepted, uv_served;

static void
uv_alloc(uv_handle_t *h, size_t want, uv_buf_t *buf)
{
	struct uv_conn *u = h->data;

	(void)want;
	*buf = uv_buf_init(u->c->head + u->c->len,
			   (unsigned)(sizeof(u->c->head) - u->c->len));
}

static void
uv_closed(uv_handle_t *h)
{
	free(h->data);
	if (++uv_served == uv_n)
		uv_close((uv_handle_t *)&uv_server, NULL);
}

static void
uv_written(uv_write_t *wr, int status)
{
	struct uv_conn *u = wr->data;

	(void)status;
	uv_close((uv_handle_t *)&u->tcp, uv_closed);
}

static void
uv_work(uv_work_t *w)
{
	struct uv_conn *u = w->data;

	pthread_barrier_wait(&in_flight);
	note(u->c, "work");
}

static void
uv_after(uv_work_t *w, int status)
{
	struct uv_conn *u = w->data;

	(void)status;
	note(u->c, "after");
	u->out = uv_buf_init(u->outbuf,
			     (unsigned)response(u->c, u->outbuf, sizeof(u->outbuf)));
	u->wr.data = u;
	uv_write(&u->wr, (uv_stream_t *)&u->tcp, &u->out, 1, uv_written);
}

static void
uv_on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct uv_conn *u = s->data;

	(void)buf;
	if (n < 0) {
		uv_close((uv_handle_t *)s, uv_closed);
		return;
	}
	u->c->len += (size_t)n;
	if (!head_complete(u->c))
		return;
	uv_read_stop(s);
	note(u->c, "read");
	u->work.data = u;
	if (uv_queue_work(s->loop, &u->work, uv_work, uv_after) != 0)
		die("uv_queue_work");
}

static void
uv_on_conn(uv_stream_t *server, int status)
{
	struct uv_conn *u;

	if (status < 0 || uv_accepted == uv_n)
		return;
	u = calloc(1, sizeof(*u));
	if (!u)
		die("calloc");
	u->c = &conns[uv_accepted++];
	u->tcp.data = u;
	uv_tcp_init(server->loop, &u->tcp);
	if (uv_accept(server, (uv_stream_t *)&u->tcp) != 0)
		die("uv_accept");
	uv_read_start((uv_stream_t *)&u->tcp, uv_alloc, uv_on_read);
}

static int
cmd_uv(int n)
{
	uv_loop_t *loop = uv_default_loop();
	struct sockaddr_in a;
	struct sockaddr_storage got;
	int len = sizeof(got);

	setenv("UV_THREADPOOL_SIZE", "4", 1);
	uv_n = n;
	uv_ip4_addr("127.0.0.1", 0, &a);
	uv_tcp_init(loop, &uv_server);
	if (uv_tcp_bind(&uv_server, (const struct sockaddr *)&a, 0) != 0 ||
	    uv_listen((uv_stream_t *)&uv_server, 64, uv_on_conn) != 0 ||
	    uv_tcp_getsockname(&uv_server, (struct sockaddr *)&got, &len) != 0)
		die("uv listen");
	ready(ntohs(((struct sockaddr_in *)&got)->sin_port));
	uv_run(loop, UV_RUN_DEFAULT);
	uv_loop_close(loop);
	return 0;
}

/* ---- GLib ---- */

static void
glib_item(gpointer data, gpointer user_data)
{
	struct conn *c = data;

	(void)user_data;
	pthread_barrier_wait(&in_flight);
	note(c, "item");
	g_mutex_lock(&c->lock);
	c->done = true;
	g_cond_signal(&c->cond);
	g_mutex_unlock(&c->lock);
}

static GThreadPool *glib_pool;

static void *
glib_conn(void *arg)
{
	struct conn *c = arg;

	read_head(c);
	note(c, "read");
	g_mutex_init(&c->lock);
	g_cond_init(&c->cond);
	g_thread_pool_push(glib_pool, c, NULL);
	g_mutex_lock(&c->lock);
	while (!c->done)
		g_cond_wait(&c->cond, &c->lock);
	g_mutex_unlock(&c->lock);
	note(c, "conn");
	respond(c);
	return NULL;
}

static int
cmd_glib(int n)
{
	pthread_t t[MAX_CONN];
	int port, lfd = listen_local(&port), i;

	/* Exclusive: its four threads exist before any request does, so what
	 * an item shows cannot come from the thread's birth. */
	glib_pool = g_thread_pool_new(glib_item, NULL, 4, TRUE, NULL);
	ready(port);
	for (i = 0; i < n; i++) {
		conns[i].fd = accept(lfd, NULL, NULL);
		if (conns[i].fd < 0)
			die("accept");
		if (pthread_create(&t[i], NULL, glib_conn, &conns[i]) != 0)
			die("pthread_create");
	}
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	g_thread_pool_free(glib_pool, FALSE, TRUE);
	return 0;
}

/* ---- ucontext ---- */

static ucontext_t sched;
static struct conn *co_conn[MAX_CONN];

static void
co_main(int i)
{
	struct conn *c = co_conn[i];

	read_head(c);
	note(c, "read");
	swapcontext(&c->uc, &sched);
	note(c, "resumed");
	respond(c);
}

static int
cmd_ucontext(int n)
{
	int port, lfd = listen_local(&port), i;
	char ctx[CTX_TEXT];

	ready(port);
	for (i = 0; i < n; i++) {
		struct conn *c = &conns[i];

		c->fd = accept(lfd, NULL, NULL);
		if (c->fd < 0)
			die("accept");
		co_conn[i] = c;
		if (getcontext(&c->uc) < 0)
			die("getcontext");
		c->uc.uc_stack.ss_sp = c->stack;
		c->uc.uc_stack.ss_size = sizeof(c->stack);
		c->uc.uc_link = &sched;
		makecontext(&c->uc, (void (*)(void))co_main, 1, i);
	}
	/* Every coroutine reads its request, ... */
	for (i = 0; i < n; i++)
		swapcontext(&sched, &conns[i].uc);
	ctxobs_format(ctx, sizeof(ctx));
	printf("SCHED %s\n", ctx);
	/* ... then they answer, last first. */
	for (i = n - 1; i >= 0; i--)
		swapcontext(&sched, &conns[i].uc);
	ctxobs_format(ctx, sizeof(ctx));
	printf("SCHED %s\n", ctx);
	return 0;
}

/* ---- ucontext, a scheduler that reads ---- */

/* The request's coroutine: it starts, yields, answers and yields again,
 * so that every switch back to the scheduler is a hooked swapcontext(),
 * and it closes the connection only after that (a close is not an
 * answer). */
static void
co_sched_main(int i)
{
	struct conn *c = co_conn[i];

	note(c, "start");
	swapcontext(&c->uc, &sched);
	note(c, "resumed");
	write_response(c);
	swapcontext(&c->uc, &sched);
	close(c->fd);
}

static void
sched_report(const char *what)
{
	char ctx[CTX_TEXT];

	ctxobs_format(ctx, sizeof(ctx));
	printf("SCHED %s %s\n", what, ctx);
	fflush(stdout);
}

/* Accept n connections, read each head (the scheduler's thread then
 * shows that request) and make a coroutine for each, started in fn(i),
 * the last one in last(i). */
static void
sched_accept(int lfd, int n, void (*fn)(int), void (*last)(int))
{
	int i;

	for (i = 0; i < n; i++) {
		struct conn *c = &conns[i];

		c->fd = accept(lfd, NULL, NULL);
		if (c->fd < 0)
			die("accept");
		read_head(c);
		co_conn[i] = c;
		if (getcontext(&c->uc) < 0)
			die("getcontext");
		c->uc.uc_stack.ss_sp = c->stack;
		c->uc.uc_stack.ss_size = sizeof(c->stack);
		c->uc.uc_link = &sched;
		makecontext(&c->uc, (void (*)(void))(i == n - 1 ? last : fn), 1, i);
	}
}

/* ---- ucontext, a connection closed and its number reused by a copy ---- */

/* The last request's coroutine, resumed, closes its connection without an
 * answer and dup()s the first connection, which takes the number back:
 * the slot is a copy (CONN_F_LINK) of another connection now. */
static void
co_reuse_main(int i)
{
	struct conn *c = co_conn[i];
	int fd = c->fd, d;

	note(c, "start");
	swapcontext(&c->uc, &sched);
	close(fd);
	d = dup(conns[0].fd);
	if (d != fd)
		die("dup did not reuse the number");
	swapcontext(&c->uc, &sched);
	close(d);
}

/* As co_sched_main(), but the coroutine first moves its connection to a
 * copy and closes the original (the socket stays open): it goes on
 * showing its request, and so does the scheduler after the switch back
 * if that was the request it read last (old: the close cleared the
 * coroutine's, and the switch back read the scheduler's as closed). */
static void
co_moved_main(int i)
{
	struct conn *c = co_conn[i];
	int d = dup(c->fd);

	if (d < 0)
		die("dup");
	close(c->fd);
	c->fd = d;
	co_sched_main(i);
}

/* ucontext-sched (fn, last: co_sched_main, what: "answered"),
 * ucontext-moved (co_moved_main for both, "answered") and ucontext-reuse
 * (co_sched_main, co_reuse_main, "closed"). */
static int
cmd_ucontext_sched(int n, void (*fn)(int), void (*last)(int), const char *what)
{
	int port, lfd = listen_local(&port), i;

	ready(port);
	/* The scheduler reads each head (its thread shows that request) and
	 * makes a coroutine for it. */
	sched_accept(lfd, n, fn, last);
	/* Every coroutine starts; back here the scheduler shows what it read
	 * last, a request in flight. */
	for (i = 0; i < n; i++)
		swapcontext(&sched, &conns[i].uc);
	sched_report("read");
	/* The request read last is answered by its coroutine, or lost its
	 * connection: back here, the scheduler must not show it any more. */
	swapcontext(&sched, &conns[n - 1].uc);
	sched_report(what);
	for (i = n - 2; i >= 0; i--)
		swapcontext(&sched, &conns[i].uc);
	/* Each coroutine ends through uc_link. */
	for (i = n - 1; i >= 0; i--)
		swapcontext(&sched, &conns[i].uc);
	return 0;
}

/* ---- ucontext, a coroutine that reads through a copy ---- */

/* Each request has a body of DUP_BODY bytes, which the client sends only
 * after "HEADS" (every head read). */
#define DUP_BODY 4

static void
read_exact(int fd, void *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, (char *)buf + got, n - got);

		if (r <= 0)
			die("read");
		got += (size_t)r;
	}
}

/* As co_sched_main(), but the coroutine first reads its request's body
 * through a dup() of the connection: the copy becomes the connection's
 * leader and the descriptor the scheduler read the head from a link
 * (preload/conn.c, "Copies"), while the request is still live.  The copy
 * stays open until the end: its close would hand the state back. */
static void
co_dup_main(int i)
{
	struct conn *c = co_conn[i];
	char body[DUP_BODY];
	int d = dup(c->fd);

	if (d < 0)
		die("dup");
	note(c, "start");
	read_exact(d, body, sizeof(body));
	note(c, "body");
	swapcontext(&c->uc, &sched);
	note(c, "resumed");
	write_response(c);
	swapcontext(&c->uc, &sched);
	close(d);
	close(c->fd);
}

static int
cmd_ucontext_dup(int n)
{
	int port, lfd = listen_local(&port), i;

	ready(port);
	sched_accept(lfd, n, co_dup_main, co_dup_main);
	printf("HEADS\n");
	fflush(stdout);
	/* Every coroutine reads its body; back here the scheduler shows the
	 * request it read last, in flight although its descriptor became a
	 * link (old: read as answered, dropped). */
	for (i = 0; i < n; i++)
		swapcontext(&sched, &conns[i].uc);
	sched_report("body");
	/* The last one answers through the original, a copy now: back here,
	 * that request is not shown any more (old: the switch away stamped
	 * a copy's request without a sequence, and it came back). */
	for (i = n - 1; i >= 0; i--) {
		swapcontext(&sched, &conns[i].uc);
		if (i == n - 1)
			sched_report("answered");
	}
	for (i = n - 1; i >= 0; i--)
		swapcontext(&sched, &conns[i].uc);
	return 0;
}

/* ---- ucontext, pipelined requests ---- */

static int pipe_srv;
static ucontext_t pipe_uc;
static char pipe_stack[64 * 1024];

static void
pipe_report(const char *what)
{
	char ctx[CTX_TEXT];

	ctxobs_format(ctx, sizeof(ctx));
	printf("PIPE %s %s\n", what, ctx);
	fflush(stdout);
}

static void
pipe_respond(void)
{
	static const char r[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

	if (write(pipe_srv, r, sizeof(r) - 1) != (ssize_t)(sizeof(r) - 1))
		die("write");
}

static void *
pipe_writer(void *arg)
{
	(void)arg;
	pipe_respond();
	return NULL;
}

/* Answers the second request, if there is one. */
static void
co_pipe_main(int pipelined)
{
	if (pipelined)
		pipe_respond();
	swapcontext(&pipe_uc, &sched);
}

/* The scheduler shows the first request after another thread answered
 * it, and switches to a coroutine and back: a request already answered
 * when the switch saved it comes back, as without pipelining (the
 * thread's work after that response), also when the coroutine answered
 * the request the first one's response made current meanwhile (old:
 * judged by that one's state, not shown). */
static int
cmd_ucontext_pipelined(bool pipelined)
{
	int port, lfd = listen_local(&port), cfd, heads = 0;
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port)};
	char req[1024], buf[2048];
	size_t len = 0, got = 0;
	pthread_t t;
	int k;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (cfd < 0 || connect(cfd, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("connect");
	pipe_srv = accept(lfd, NULL, NULL);
	if (pipe_srv < 0)
		die("accept");
	for (k = 0; k < (pipelined ? 2 : 1); k++) {
		char trace[33];

		memset(trace, '1' + k, 32);
		trace[32] = '\0';
		len += (size_t)snprintf(
			req + len, sizeof(req) - len,
			"GET /p%d HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			"traceparent: 00-%s-00f067aa0ba902b7-01\r\n\r\n",
			k, trace);
	}
	if (write(cfd, req, len) != (ssize_t)len)
		die("write");
	while (heads < k) {
		ssize_t r = read(pipe_srv, buf + got, sizeof(buf) - got);
		const char *p;

		if (r <= 0)
			die("read");
		got += (size_t)r;
		for (heads = 0, p = buf;
		     (p = memmem(p, got - (size_t)(p - buf), "\r\n\r\n", 4)); p += 4)
			heads++;
	}
	pipe_report("read");
	if (pthread_create(&t, NULL, pipe_writer, NULL) != 0)
		die("pthread_create");
	pthread_join(t, NULL);
	pipe_report("answered");
	if (getcontext(&pipe_uc) < 0)
		die("getcontext");
	pipe_uc.uc_stack.ss_sp = pipe_stack;
	pipe_uc.uc_stack.ss_size = sizeof(pipe_stack);
	pipe_uc.uc_link = &sched;
	makecontext(&pipe_uc, (void (*)(void))co_pipe_main, 1, (int)pipelined);
	swapcontext(&sched, &pipe_uc);
	pipe_report("resumed");
	/* The coroutine ends through uc_link. */
	swapcontext(&sched, &pipe_uc);
	close(pipe_srv);
	close(cfd);
	close(lfd);
	return 0;
}

/* ---- ucontext, a multiplexed FastCGI connection ---- */

#define FCGI_MUX_N 2

static ucontext_t fcgi_uc[FCGI_MUX_N];
static char fcgi_stack[FCGI_MUX_N][64 * 1024];
static size_t fcgi_len[FCGI_MUX_N];
static int fcgi_srv;

/* Request k (request id k + 1, trace-id of digit '1' + k): its
 * FCGI_BEGIN_REQUEST and parameters. */
static size_t
fcgi_mux_request(uint8_t *b, unsigned k)
{
	char path[16], tp[64], trace[33];
	size_t n, off, rec;

	memset(trace, '1' + (int)k, 32);
	trace[32] = '\0';
	snprintf(path, sizeof(path), "/f%u", k);
	snprintf(tp, sizeof(tp), "00-%s-00f067aa0ba902b7-01", trace);
	n = fcgi_begin(b);
	n += fcgi_get(b + n, path, tp);
	/* fcgi-build.h writes request id 1 */
	for (off = 0; off + 8 <= n; off += rec) {
		b[off + 3] = (uint8_t)(k + 1);
		rec = 8 + ((size_t)b[off + 4] << 8 | b[off + 5]) + b[off + 6];
	}
	return n;
}

static void
fcgi_report(int k, const char *what)
{
	char ctx[CTX_TEXT];

	ctxobs_format(ctx, sizeof(ctx));
	printf("FCGI %d %s %s\n", k, what, ctx);
	fflush(stdout);
}

/* Request k's coroutine: it reads exactly its request's records, yields,
 * answers (FCGI_STDOUT, FCGI_END_REQUEST) and yields again. */
static void
co_fcgi_main(int k)
{
	uint8_t b[512];
	size_t n;

	read_exact(fcgi_srv, b, fcgi_len[k]);
	fcgi_report(k, "read");
	swapcontext(&fcgi_uc[k], &sched);
	fcgi_report(k, "resumed");
	n = fcgi_rec(b, FCGI_SCAN_STDOUT, 4);
	memcpy(b + n, "\r\n\r\n", 4);
	n += 4;
	n += fcgi_rec(b + n, FCGI_SCAN_END_REQUEST, 8);
	memset(b + n, 0, 8);
	n += 8;
	b[3] = b[12 + 3] = (uint8_t)(k + 1);
	if (write(fcgi_srv, b, n) != (ssize_t)n)
		die("write");
	swapcontext(&fcgi_uc[k], &sched);
}

static int
cmd_ucontext_fcgi(void)
{
	static uint8_t req[1024];
	int port, lfd = listen_local(&port), cfd, k;
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port)};
	size_t len = 0;

	/* This program is the web server too: both requests go out in one
	 * write, the second begun while the first is open (multiplexed). */
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (cfd < 0 || connect(cfd, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("connect");
	fcgi_srv = accept(lfd, NULL, NULL);
	if (fcgi_srv < 0)
		die("accept");
	for (k = 0; k < FCGI_MUX_N; k++) {
		fcgi_len[k] = fcgi_mux_request(req + len, (unsigned)k);
		len += fcgi_len[k];
		if (getcontext(&fcgi_uc[k]) < 0)
			die("getcontext");
		fcgi_uc[k].uc_stack.ss_sp = fcgi_stack[k];
		fcgi_uc[k].uc_stack.ss_size = sizeof(fcgi_stack[k]);
		fcgi_uc[k].uc_link = &sched;
		makecontext(&fcgi_uc[k], (void (*)(void))co_fcgi_main, 1, k);
	}
	if (write(cfd, req, len) != (ssize_t)len)
		die("write");
	/* Request 0 is read and its coroutine yields; request 1 is read
	 * (the connection's seq moves) and answered; then request 0's
	 * coroutine comes back to a request still in flight (old: read as
	 * answered, dropped). */
	swapcontext(&sched, &fcgi_uc[0]);
	swapcontext(&sched, &fcgi_uc[1]);
	swapcontext(&sched, &fcgi_uc[1]);
	swapcontext(&sched, &fcgi_uc[0]);
	/* Each coroutine ends through uc_link. */
	swapcontext(&sched, &fcgi_uc[1]);
	swapcontext(&sched, &fcgi_uc[0]);
	close(fcgi_srv);
	close(cfd);
	close(lfd);
	return 0;
}

/* ---- setcontext() that fails ---- */

static int
cmd_setcontext_fail(int n)
{
	int port, lfd = listen_local(&port), i, ep, r;
	struct epoll_event ev;
	ucontext_t *uc;

	ready(port);
	uc = mmap(NULL, sizeof(*uc), PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (uc == MAP_FAILED)
		die("mmap");
	/* The ucontext holds the first request, the thread the last one (the
	 * socket level's both). */
	for (i = 0; i < n; i++) {
		struct conn *c = &conns[i];

		c->fd = accept(lfd, NULL, NULL);
		if (c->fd < 0)
			die("accept");
		read_head(c);
		note(c, "read");
		if (i == 0 && getcontext(uc) < 0)
			die("getcontext");
	}
	sched_report("before");
	if (munmap(uc, sizeof(*uc)) < 0)
		die("munmap");
	r = setcontext(uc);
	if (r != -1 || errno != EFAULT)
		die("setcontext");
	sched_report("failed");
	/* The next wait ends what the thread shows, as before the switch
	 * (old: the failed switch had given the socket level the
	 * ucontext's request, and the thread kept the last one). */
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0 || epoll_wait(ep, &ev, 1, 1) < 0)
		die("epoll_wait");
	close(ep);
	sched_report("waited");
	for (i = 0; i < n; i++)
		respond(&conns[i]);
	return 0;
}

/* ---- worker ---- */

static int release_pipe[2];
static pthread_mutex_t worker_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t worker_cond = PTHREAD_COND_INITIALIZER;
static int worker_tid;

static void *
worker(void *arg)
{
	char b;

	pthread_mutex_lock(&worker_lock);
	worker_tid = tid();
	pthread_cond_signal(&worker_cond);
	pthread_mutex_unlock(&worker_lock);
	note(arg, "worker");
	(void)!read(release_pipe[0], &b, 1);
	return NULL;
}

static void *
worker_conn(void *arg)
{
	struct conn *c = arg;
	pthread_t w;

	read_head(c);
	note(c, "read");
	if (pthread_create(&w, NULL, worker, c) != 0)
		die("pthread_create");
	pthread_mutex_lock(&worker_lock);
	while (!worker_tid)
		pthread_cond_wait(&worker_cond, &worker_lock);
	pthread_mutex_unlock(&worker_lock);
	printf("WORKERS %d %d %d\n", (int)getpid(), tid(), worker_tid);
	fflush(stdout);
	pthread_join(w, NULL);
	note(c, "joined");
	respond(c);
	return NULL;
}

static int
cmd_worker(void)
{
	int port, lfd = listen_local(&port);
	char line[64], buf[64];
	pthread_t t;

	if (pipe(release_pipe) < 0)
		die("pipe");
	ready(port);
	conns[0].fd = accept(lfd, NULL, NULL);
	if (conns[0].fd < 0)
		die("accept");
	if (pthread_create(&t, NULL, worker_conn, &conns[0]) != 0)
		die("pthread_create");
	if (!fgets(line, sizeof(line), stdin) || strncmp(line, "release", 7) != 0)
		return 1;
	(void)!write(release_pipe[1], "x", 1);
	pthread_join(t, NULL);
	printf("JOINED\n");
	fflush(stdout);
	while (read(0, buf, sizeof(buf)) > 0)
		;
	return 0;
}

int
main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : "";
	int n = argc > 2 ? atoi(argv[2]) : 0;

	if (n < 0 || n > MAX_CONN)
		n = 0;
	if (n)
		pthread_barrier_init(&in_flight, NULL, (unsigned)n);
	if (strcmp(cmd, "uv") == 0 && n && n <= 4)
		return cmd_uv(n);
	if (strcmp(cmd, "glib") == 0 && n && n <= 4)
		return cmd_glib(n);
	if (strcmp(cmd, "ucontext") == 0 && n)
		return cmd_ucontext(n);
	if (strcmp(cmd, "ucontext-sched") == 0 && n)
		return cmd_ucontext_sched(n, co_sched_main, co_sched_main, "answered");
	if (strcmp(cmd, "ucontext-moved") == 0 && n)
		return cmd_ucontext_sched(n, co_moved_main, co_moved_main, "answered");
	if (strcmp(cmd, "ucontext-dup") == 0 && n)
		return cmd_ucontext_dup(n);
	if (strcmp(cmd, "ucontext-reuse") == 0 && n > 1)
		return cmd_ucontext_sched(n, co_sched_main, co_reuse_main, "closed");
	if (strcmp(cmd, "ucontext-pipelined") == 0)
		return cmd_ucontext_pipelined(argc <= 2 ||
					      strcmp(argv[2], "single") != 0);
	if (strcmp(cmd, "ucontext-fcgi") == 0)
		return cmd_ucontext_fcgi();
	if (strcmp(cmd, "setcontext-fail") == 0 && n)
		return cmd_setcontext_fail(n);
	if (strcmp(cmd, "worker") == 0)
		return cmd_worker();
	fprintf(stderr,
		"usage: flow-http uv N|glib N|ucontext N|ucontext-sched N|"
		"ucontext-dup N|ucontext-moved N|ucontext-reuse N|ucontext-fcgi|"
		"ucontext-pipelined [single]|setcontext-fail N|worker\n");
	return 2;
}
