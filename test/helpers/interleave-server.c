/* SPDX-License-Identifier: Apache-2.0 */
/* A server whose requests interleave on its threads, with no tracing code
 * but a look at its own published context (ctxobs.h), for the integration
 * tests.
 *
 * usage: interleave-server mhd-thread|mhd-pool|evhttp
 *   mhd-thread  libmicrohttpd, one thread per connection
 *   mhd-pool    libmicrohttpd, a pool of 2 epoll threads: each thread
 *               runs the handler calls (head, each body chunk, the last
 *               one) of several connections' requests in turn
 *   evhttp      libevent's evhttp on one thread; each callback answers
 *               from a zero timer, after the loop's next wait
 *
 * Listens on 127.0.0.1 (ephemeral port) and prints "READY <port>".  At
 * every handler call, and in the evhttp timer, it compares the trace-id the
 * thread publishes with the one of the request's traceparent: the handler
 * calls must show that trace; the timer, which runs outside any callback,
 * must not show another request's.  A mismatch prints "BAD <where> <url>
 * want=<trace> got=<trace or none>".  Every request is answered "ok\n".
 * At EOF on stdin it prints "CHECKS <n> BAD <m>" and exits 0. */
#include "config.h"

#include "ctxobs.h"
#include "listen-loopback.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <microhttpd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long checks, bad;

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

/* The calling thread must show trace want; with other_only, it may also
 * show none, but no other request's. */
static void
check(const char *want, bool other_only, const char *where, const char *url)
{
	char got[33];

	ctxobs_trace(got);
	pthread_mutex_lock(&lock);
	checks++;
	if (strcmp(got, want) != 0 && !(other_only && strcmp(got, "none") == 0)) {
		bad++;
		printf("BAD %s %s want=%s got=%s\n", where, url, want, got);
		fflush(stdout);
	}
	pthread_mutex_unlock(&lock);
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
		check(want, false, "head", url);
		return MHD_YES;
	}
	if (*upload_data_size) {
		check(want, false, "body", url);
		*upload_data_size = 0;
		return MHD_YES;
	}
	check(want, false, "last", url);
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

/* ---- libevent evhttp ---- */

static struct event_base *base;

static void
ev_answer(evutil_socket_t fd, short what, void *arg)
{
	struct evhttp_request *req = arg;
	struct evbuffer *b = evbuffer_new();
	char want[33];

	(void)fd;
	(void)what;
	want_of(evhttp_find_header(evhttp_request_get_input_headers(req),
				   "traceparent"),
		want);
	check(want, true, "timer", evhttp_request_get_uri(req));
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
	char want[33];

	(void)arg;
	want_of(evhttp_find_header(evhttp_request_get_input_headers(req),
				   "traceparent"),
		want);
	check(want, false, "callback", evhttp_request_get_uri(req));
	if (event_base_once(base, -1, EV_TIMEOUT, ev_answer, req, &now) != 0)
		ev_answer(-1, 0, req);
}

static void
ev_stdin(evutil_socket_t fd, short what, void *arg)
{
	char buf[64];

	(void)what;
	(void)arg;
	if (read(fd, buf, sizeof(buf)) <= 0)
		event_base_loopbreak(base);
}

static int
run_evhttp(void)
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
	fflush(stdout);
	event_base_dispatch(base);
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
		fprintf(stderr,
			"usage: interleave-server mhd-thread|mhd-pool|evhttp\n");
		return 2;
	}
	if (strcmp(argv[1], "mhd-thread") == 0)
		r = run_mhd(false);
	else if (strcmp(argv[1], "mhd-pool") == 0)
		r = run_mhd(true);
	else if (strcmp(argv[1], "evhttp") == 0)
		r = run_evhttp();
	else
		r = 2;
	if (r == 0) {
		printf("CHECKS %lu BAD %lu\n", checks, bad);
		fflush(stdout);
	}
	return r;
}
