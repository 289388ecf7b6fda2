/* SPDX-License-Identifier: Apache-2.0 */
/* A server whose requests interleave on its threads, with no tracing code
 * but a look at its own published context (ctxobs.h), for the integration
 * tests.
 *
 * usage: interleave-server MODE
 *   mhd-thread  libmicrohttpd, one thread per connection
 *   mhd-pool    libmicrohttpd, a pool of 2 epoll threads: each thread
 *               runs the handler calls (head, each body chunk, the last
 *               one) of several connections' requests in turn
 *   evhttp      libevent's evhttp on one thread; each callback answers
 *               from a zero timer, which runs after the other events of
 *               the loop's round
 *   mhd-longpoll, evhttp-longpoll
 *               a long poll on one thread: libmicrohttpd driven by our own
 *               select() loop (MHD_run_from_select), or evhttp as above.
 *               A second listener, announced "WAITER <port>", takes one
 *               waiting request over a plain socket.  A line on stdin
 *               ends the loop: the thread prints "WAITING", accepts the
 *               waiter and reads its head itself, then runs the library
 *               (no wait that blocks) until the handler of a request for
 *               /answer has answered the waiter, and prints "AFTER
 *               <trace or none>": what the thread shows right after
 *               that handler.  Then it serves on as before.
 *
 * Listens on 127.0.0.1 (ephemeral port) and prints "READY <port>".  At
 * every handler call, and in the evhttp timer, it compares the trace-id the
 * thread publishes with the one of the request's traceparent: the handler
 * calls must show that trace; the timer, which runs outside any callback,
 * what the callback's thread showed when it scheduled it (hook-evhttp.c:
 * event_base_once()), which is that trace too but in /answer.  A mismatch prints "BAD <where> <url> want=<trace> got=<trace or none>".  Every request is answered "ok\n".
 * At EOF on stdin it prints "CHECKS <n> BAD <m>" and exits 0. */
#include "config.h"

#include "ctxobs.h"
#include "listen-loopback.h"
#include "mhd-select.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <microhttpd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long checks, bad;
static bool stdin_eof;

/* The trace-id of a traceparent value, or "none". */
static void
want_of(const char *tp, char want[33])
{
	if (tp && strlen(tp) >= 35) {
		memcpy(want, tp + 3, 32);
		want[32] = '\0';
	} else {
		strcpy(want, "none");
	}
}

/* The calling thread must show trace want.  Also evhttp's zero timer,
 * which runs after the other events of the same loop round
 * (event_base_once() activates it at once): when one of them read the
 * head of another connection's request (its body not complete: no
 * callback yet), the socket level shows that request until the loop's
 * next wait, but the timer shows the request it was scheduled for (old:
 * none, or that other request). */
static void
check(const char *want, const char *where, const char *url)
{
	char got[33];

	ctxobs_trace(got);
	pthread_mutex_lock(&lock);
	checks++;
	if (strcmp(got, want) != 0) {
		bad++;
		printf("BAD %s %s want=%s got=%s\n", where, url, want, got);
		fflush(stdout);
	}
	pthread_mutex_unlock(&lock);
}

/* ---- the long poll's waiter ---- */

static int waiter_lfd = -1, waiter_fd = -1;
static bool waiter_answered;

static int
waiter_listen(void)
{
	struct sockaddr_in a;

	waiter_lfd = listen_loopback(4, SOCK_CLOEXEC, &a);
	if (waiter_lfd < 0) {
		perror("interleave-server: listen");
		return -1;
	}
	return ntohs(a.sin_port);
}

/* Accept the waiter and read its head: the thread shows its request (the
 * socket level's), as a loop thread does that read it in the same round
 * as the request that answers it. */
static bool
waiter_take(void)
{
	char buf[2048];
	size_t n = 0;
	ssize_t r;

	printf("WAITING\n");
	fflush(stdout);
	waiter_fd = accept(waiter_lfd, NULL, NULL);
	if (waiter_fd < 0)
		return false;
	while (n < sizeof(buf) - 1) {
		r = read(waiter_fd, buf + n, sizeof(buf) - 1 - n);
		if (r <= 0)
			return false;
		n += (size_t)r;
		buf[n] = '\0';
		if (strstr(buf, "\r\n\r\n"))
			return true;
	}
	return false;
}

/* From a handler: the waiter's response, on its own connection. */
static void
waiter_answer(void)
{
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
				   "Connection: close\r\n\r\nok\n";
	size_t off = 0;
	ssize_t w;

	if (waiter_fd < 0 || waiter_answered)
		return;
	while (off < sizeof(resp) - 1) {
		w = write(waiter_fd, resp + off, sizeof(resp) - 1 - off);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	waiter_answered = true;
}

/* What the thread shows now, then the waiter is closed (after the look:
 * a close ends its request too). */
static void
waiter_report(void)
{
	char got[33];

	ctxobs_trace(got);
	printf("AFTER %s\n", got);
	fflush(stdout);
	close(waiter_fd);
	waiter_fd = -1;
}

/* ---- libmicrohttpd ---- */

static enum MHD_Result
mhd_handler(void *cls,
	    struct MHD_Connection *conn,
	    const char *url,
	    const char *method,
	    const char *version,
	    const char *upload_data,
	    size_t *upload_data_size,
	    void **req_cls)
{
	static char ok[] = "ok\n";
	struct MHD_Response *resp;
	enum MHD_Result r;
	char *want = *req_cls;

	(void)cls;
	(void)method;
	(void)version;
	(void)upload_data;
	if (!want) {
		want = malloc(33);
		if (!want)
			return MHD_NO;
		want_of(MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						    "traceparent"),
			want);
		*req_cls = want;
		check(want, "head", url);
		return MHD_YES;
	}
	if (*upload_data_size) {
		check(want, "body", url);
		*upload_data_size = 0;
		return MHD_YES;
	}
	check(want, "last", url);
	if (strcmp(url, "/answer") == 0)
		waiter_answer();
	resp = MHD_create_response_from_buffer(sizeof(ok) - 1, ok,
					       MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return MHD_NO;
	r = MHD_queue_response(conn, 200, resp);
	MHD_destroy_response(resp);
	return r;
}

static void
mhd_completed(void *cls,
	      struct MHD_Connection *conn,
	      void **req_cls,
	      enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)conn;
	(void)toe;
	free(*req_cls);
	*req_cls = NULL;
}

static int
run_mhd(bool pool)
{
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD;
	struct MHD_Daemon *d;
	struct sockaddr_in a;
	char buf[64];
	int lfd = listen_loopback(64, SOCK_CLOEXEC, &a);

	if (lfd < 0) {
		perror("interleave-server: listen");
		return 1;
	}
	if (pool)
		d = MHD_start_daemon(flags | MHD_USE_EPOLL, 0, NULL, NULL, mhd_handler,
				     NULL, MHD_OPTION_LISTEN_SOCKET, lfd,
				     MHD_OPTION_THREAD_POOL_SIZE, 2u,
				     MHD_OPTION_NOTIFY_COMPLETED, mhd_completed, NULL,
				     MHD_OPTION_END);
	else
		d = MHD_start_daemon(flags | MHD_USE_THREAD_PER_CONNECTION, 0, NULL,
				     NULL, mhd_handler, NULL, MHD_OPTION_LISTEN_SOCKET,
				     lfd, MHD_OPTION_NOTIFY_COMPLETED, mhd_completed,
				     NULL, MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "interleave-server: MHD_start_daemon failed\n");
		return 1;
	}
	printf("READY %u\n", (unsigned)ntohs(a.sin_port));
	fflush(stdout);
	while (read(0, buf, sizeof(buf)) > 0)
		;
	MHD_stop_daemon(d);
	return 0;
}

static int
run_mhd_longpoll(void)
{
	struct MHD_Daemon *d;
	struct sockaddr_in a;
	int lfd = listen_loopback(64, SOCK_CLOEXEC | SOCK_NONBLOCK, &a);
	int wport = waiter_listen();
	fd_set rs, ws, es;
	MHD_socket max = 0;

	if (lfd < 0 || wport < 0) {
		perror("interleave-server: listen");
		return 1;
	}
	d = MHD_start_daemon(0, 0, NULL, NULL, mhd_handler, NULL,
			     MHD_OPTION_LISTEN_SOCKET, lfd, MHD_OPTION_NOTIFY_COMPLETED,
			     mhd_completed, NULL, MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "interleave-server: MHD_start_daemon failed\n");
		return 1;
	}
	printf("READY %u\nWAITER %d\n", (unsigned)ntohs(a.sin_port), wport);
	fflush(stdout);
	if (mhd_select_loop(d) && waiter_take()) {
		/* The connections' bytes that arrived meanwhile, without a
		 * wait: the waiter's request stays the thread's until MHD
		 * reads another connection. */
		FD_ZERO(&rs);
		FD_ZERO(&ws);
		FD_ZERO(&es);
		if (MHD_get_fdset(d, &rs, &ws, &es, &max) == MHD_YES) {
			/* ready for reading, nothing else (an fd in es is an
			 * error to MHD) */
			FD_CLR(lfd, &rs);
			FD_ZERO(&ws);
			FD_ZERO(&es);
			(void)MHD_run_from_select(d, &rs, &ws, &es);
		}
		waiter_report();
		while (mhd_select_loop(d))
			;
	}
	MHD_stop_daemon(d);
	return 0;
}

/* ---- libevent evhttp ---- */

static struct event_base *base;

/* A request answered from a timer, and what its callback's thread showed
 * when it scheduled the timer. */
struct ev_later {
	struct evhttp_request *req;
	char sched[33];
};

static void
ev_answer(evutil_socket_t fd, short what, void *arg)
{
	struct ev_later *l = arg;
	struct evhttp_request *req = l->req;
	struct evbuffer *b = evbuffer_new();

	(void)fd;
	(void)what;
	check(l->sched, "timer", evhttp_request_get_uri(req));
	free(l);
	if (b)
		evbuffer_add(b, "ok\n", 3);
	evhttp_send_reply(req, 200, "OK", b);
	if (b)
		evbuffer_free(b);
}

static void
ev_callback(struct evhttp_request *req, void *arg)
{
	struct timeval now = {0, 0};
	struct ev_later *l;
	char want[33];

	(void)arg;
	want_of(evhttp_find_header(evhttp_request_get_input_headers(req),
				   "traceparent"),
		want);
	check(want, "callback", evhttp_request_get_uri(req));
	if (strcmp(evhttp_request_get_uri(req), "/answer") == 0) {
		waiter_answer();
		/* back to waiter_report() right after the callback */
		event_base_loopbreak(base);
	}
	l = malloc(sizeof(*l));
	if (!l) {
		fprintf(stderr, "interleave-server: out of memory\n");
		exit(1);
	}
	l->req = req;
	/* The timer shows what the thread shows here: this request, except
	 * after the write of the waiter's response (/answer), which shows
	 * the waiter's request until the callback returns (the socket level
	 * follows that connection's writes). */
	ctxobs_trace(l->sched);
	if (strcmp(l->sched, want) != 0 &&
	    strcmp(evhttp_request_get_uri(req), "/answer") != 0)
		check(want, "schedule", evhttp_request_get_uri(req));
	if (event_base_once(base, -1, EV_TIMEOUT, ev_answer, l, &now) != 0)
		ev_answer(-1, 0, l);
}

static void
ev_stdin(evutil_socket_t fd, short what, void *arg)
{
	char buf[64];

	(void)what;
	(void)arg;
	if (read(fd, buf, sizeof(buf)) <= 0)
		stdin_eof = true;
	if (stdin_eof || waiter_lfd >= 0)
		event_base_loopbreak(base);
}

static int
run_evhttp(bool longpoll)
{
	struct evhttp *http;
	struct event *in;
	struct sockaddr_in a;
	int lfd = listen_loopback(64, SOCK_CLOEXEC | SOCK_NONBLOCK, &a);

	base = event_base_new();
	http = base ? evhttp_new(base) : NULL;
	if (lfd < 0 || !http || !evhttp_accept_socket_with_handle(http, lfd)) {
		fprintf(stderr, "interleave-server: cannot start evhttp\n");
		return 1;
	}
	evhttp_set_gencb(http, ev_callback, NULL);
	in = event_new(base, 0, EV_READ | EV_PERSIST, ev_stdin, NULL);
	if (!in || event_add(in, NULL) != 0) {
		fprintf(stderr, "interleave-server: cannot watch stdin\n");
		return 1;
	}
	printf("READY %u\n", (unsigned)ntohs(a.sin_port));
	if (longpoll)
		printf("WAITER %d\n", waiter_listen());
	fflush(stdout);
	if (longpoll) {
		(void)event_base_dispatch(base);
		if (stdin_eof || !waiter_take())
			return 1;
		/* Rounds with a zero timeout, which keep the waiter's request
		 * shown, until the callback answered it. */
		while (!waiter_answered)
			if (event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK) < 0)
				return 1;
		waiter_report();
	}
	while (!stdin_eof)
		(void)event_base_dispatch(base);
	event_free(in);
	evhttp_free(http);
	event_base_free(base);
	return 0;
}

int
main(int argc, char **argv)
{
	int r;

	if (argc != 2) {
		fprintf(stderr, "usage: interleave-server mhd-thread|mhd-pool|evhttp|"
				"mhd-longpoll|evhttp-longpoll\n");
		return 2;
	}
	if (strcmp(argv[1], "mhd-thread") == 0)
		r = run_mhd(false);
	else if (strcmp(argv[1], "mhd-pool") == 0)
		r = run_mhd(true);
	else if (strcmp(argv[1], "evhttp") == 0)
		r = run_evhttp(false);
	else if (strcmp(argv[1], "mhd-longpoll") == 0)
		r = run_mhd_longpoll();
	else if (strcmp(argv[1], "evhttp-longpoll") == 0)
		r = run_evhttp(true);
	else
		r = 2;
	if (r == 0) {
		printf("CHECKS %lu BAD %lu\n", checks, bad);
		fflush(stdout);
	}
	return r;
}
