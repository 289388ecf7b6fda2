/* SPDX-License-Identifier: Apache-2.0 */
/* A libevent evhttp server with no tracing code, for the integration tests.
 *
 * usage: evhttp-server [-m | -l]
 *   -m  allow every method bit (evhttp_set_allowed_methods()), so that a
 *       method libevent does not know reaches the callbacks
 *   -l  /stream replies start later: the request callback schedules a
 *       zero timer (event_base_once()), which starts the reply
 *
 * Listens on 127.0.0.1 (ephemeral port) and prints "READY <port>".  One
 * event loop thread.  Callbacks:
 *   /block        evhttp_set_cb: prints "IN <tid> <method> <uri>", then waits
 *                 for a line on stdin before answering;
 *   /gone         evhttp_set_cb, then evhttp_del_cb: answered by the
 *                 generic callback;
 *   anything else the generic callback (evhttp_set_gencb, set twice: the
 *                 first one is replaced);
 *   Host: vhost.test  a virtual host with its own generic callback;
 *   /stream...    evhttp_set_cb("/stream/a"), ("/stream/b"), ("/stream/c"):
 *                 a chunked reply of STREAM_CHUNKS chunks, each written by
 *                 the chunk callback of the one before
 *                 (evhttp_send_reply_chunk_with_cb(); the first by the
 *                 request callback, followed by an empty chunk with a
 *                 callback that aborts: libevent ignores it), every line
 *                 the trace-id the writing thread shows (ctxobs.h);
 *                 prints "BODY <tid> <uri>" when
 *                 it starts, "END <tid> <uri>" after the last chunk,
 *                 "SEEN <uri> <trace>" from its completion callback, and
 *                 "CUT <uri>" when the client closed before the end.  One
 *                 /stream request per connection.
 *   /stale        evhttp_set_cb: the first schedules a once event on a pipe
 *                 (event_base_once()) and is answered at once; the next,
 *                 /stream/stale, prints "STALE <1 if at the first's
 *                 address>", wakes the once event, and that streams its
 *                 reply as /stream does
 * Every answer is "<name> <method> <uri> <body bytes>\n" with fixed Date and
 * Content-Type headers, so runs with and without the shim are
 * byte-identical; each finished request prints "DONE <tid> <uri>".  A line
 * "QUIT" or EOF on stdin (between requests) frees everything and exits 0. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "ctxobs.h"

static struct event_base *base;

static long
tid(void)
{
	return (long)syscall(SYS_gettid);
}

/* One line from stdin, unbuffered (the loop watches fd 0 too); returns
 * false at EOF. */
static bool
read_line(char *buf, size_t cap)
{
	size_t n = 0;

	for (;;) {
		char c;
		ssize_t r = read(0, &c, 1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		if (c == '\n')
			break;
		if (n + 1 < cap)
			buf[n++] = c;
	}
	buf[n] = '\0';
	return true;
}

static const char *
method_name(enum evhttp_cmd_type cmd)
{
	switch (cmd) {
	case EVHTTP_REQ_GET:
		return "GET";
	case EVHTTP_REQ_POST:
		return "POST";
	case EVHTTP_REQ_PUT:
		return "PUT";
	default:
		return "OTHER";
	}
}

static void
on_complete(struct evhttp_request *req, void *arg)
{
	(void)req;
	printf("DONE %ld %s\n", tid(), (const char *)arg);
	fflush(stdout);
	free(arg);
}

static void
reply(struct evhttp_request *req, const char *name)
{
	struct evkeyvalq *out = evhttp_request_get_output_headers(req);
	struct evbuffer *buf = evbuffer_new();
	const char *uri = evhttp_request_get_uri(req);
	char *uri_copy = strdup(uri);

	evhttp_add_header(out, "Date", "Thu, 01 Jan 1970 00:00:00 GMT");
	evhttp_add_header(out, "Content-Type", "text/plain");
	evbuffer_add_printf(buf, "%s %s %s %zu\n", name,
			    method_name(evhttp_request_get_command(req)), uri,
			    evbuffer_get_length(evhttp_request_get_input_buffer(req)));
	if (uri_copy)
		evhttp_request_set_on_complete_cb(req, on_complete, uri_copy);
	evhttp_send_reply(req, 200, "OK", buf);
	evbuffer_free(buf);
}

static void
cb_block(struct evhttp_request *req, void *arg)
{
	char line[64];

	printf("IN %ld %s %s\n", tid(), method_name(evhttp_request_get_command(req)),
	       evhttp_request_get_uri(req));
	fflush(stdout);
	(void)read_line(line, sizeof(line));
	reply(req, arg);
}

static void
cb_named(struct evhttp_request *req, void *arg)
{
	reply(req, arg);
}

/* A /stream reply: 33-byte lines, much more than a connection's socket
 * buffers (test-integration-evhttp.c, test_stream_chunks, reads one reply
 * only after the other), so that the chunk callbacks of two requests
 * interleave on the loop thread. */
#define STREAM_LINE        33
#define STREAM_CHUNK_LINES 496
#define STREAM_CHUNKS      512

struct stream {
	struct evhttp_request *req;
	char uri[64];
	unsigned sent;
	bool done;
};

static void stream_written(struct evhttp_connection *evcon, void *arg);

static void
stream_never(struct evhttp_connection *evcon, void *arg)
{
	(void)evcon;
	(void)arg;
	fprintf(stderr, "evhttp-server: the callback of an empty chunk ran\n");
	abort();
}

static void
stream_chunk(struct stream *st)
{
	struct evbuffer *buf = evbuffer_new();
	char line[STREAM_LINE + 1], t[33];
	unsigned i;

	snprintf(line, sizeof(line), "%-32s\n", ctxobs_trace(t));
	for (i = 0; i < STREAM_CHUNK_LINES; i++)
		evbuffer_add(buf, line, STREAM_LINE);
	st->sent++;
	evhttp_send_reply_chunk_with_cb(st->req, buf, stream_written, st);
	/* An empty chunk is no write: libevent keeps the callback of the
	 * pending one (stream_written), and never calls this one. */
	if (st->sent == 1)
		evhttp_send_reply_chunk_with_cb(st->req, buf, stream_never, st);
	evbuffer_free(buf);
}

/* The chunk before is written: the next one, or the end. */
static void
stream_written(struct evhttp_connection *evcon, void *arg)
{
	struct stream *st = arg;

	(void)evcon;
	if (st->sent < STREAM_CHUNKS) {
		stream_chunk(st);
		return;
	}
	printf("END %ld %s\n", tid(), st->uri);
	fflush(stdout);
	evhttp_send_reply_end(st->req);
}

static void
stream_complete(struct evhttp_request *req, void *arg)
{
	struct stream *st = arg;
	char t[33];

	(void)req;
	st->done = true;
	printf("SEEN %s %s\n", st->uri, ctxobs_trace(t));
	fflush(stdout);
}

/* The connection goes away: after the reply (Connection: close), or cut
 * short by the client, when evhttp detached the request from it and
 * evhttp_send_reply_end() frees it. */
static void
stream_closed(struct evhttp_connection *evcon, void *arg)
{
	struct stream *st = arg;

	(void)evcon;
	if (!st->done) {
		printf("CUT %s\n", st->uri);
		fflush(stdout);
		evhttp_send_reply_end(st->req);
	}
	free(st);
}

static void stream_start(evutil_socket_t fd, short what, void *arg);
static bool stream_later; /* -l */

/* /stale */
static int stale_pipe[2] = {-1, -1};
static struct evhttp_request *stale_first;
static struct stream *stale_waiting;

static void
stale_fire(evutil_socket_t fd, short what, void *arg)
{
	char c;

	(void)what;
	(void)arg;
	if (read(fd, &c, 1) == 1 && stale_waiting)
		stream_start(-1, 0, stale_waiting);
	stale_waiting = NULL;
}

static void
cb_stale(struct evhttp_request *req, void *arg)
{
	stale_first = req;
	if (event_base_once(base, stale_pipe[0], EV_READ, stale_fire, NULL, NULL) != 0)
		evhttp_send_error(req, 500, NULL);
	else
		reply(req, arg);
}

static void
cb_stream(struct evhttp_request *req, void *arg)
{
	static const struct timeval now = {0, 0};
	struct stream *st = calloc(1, sizeof(*st));

	(void)arg;
	if (!st) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	st->req = req;
	snprintf(st->uri, sizeof(st->uri), "%s", evhttp_request_get_uri(req));
	printf("BODY %ld %s\n", tid(), st->uri);
	fflush(stdout);
	evhttp_connection_set_closecb(evhttp_request_get_connection(req), stream_closed,
				      st);
	if (arg) {
		printf("STALE %d\n", req == stale_first);
		fflush(stdout);
		stale_waiting = st;
		if (write(stale_pipe[1], "x", 1) != 1)
			evhttp_send_error(req, 500, NULL);
	} else if (!stream_later)
		stream_start(-1, 0, st);
	else if (event_base_once(base, -1, EV_TIMEOUT, stream_start, st, &now) != 0)
		evhttp_send_error(req, 500, NULL);
}

/* The reply of st, from its request's callback or (-l) a timer that
 * callback scheduled. */
static void
stream_start(evutil_socket_t fd, short what, void *arg)
{
	struct stream *st = arg;
	struct evhttp_request *req = st->req;

	(void)fd;
	(void)what;
	evhttp_request_set_on_complete_cb(req, stream_complete, st);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Date",
			  "Thu, 01 Jan 1970 00:00:00 GMT");
	evhttp_send_reply_start(req, 200, "OK");
	stream_chunk(st);
}

static void
on_stdin(evutil_socket_t fd, short what, void *arg)
{
	char line[64];

	(void)fd;
	(void)what;
	(void)arg;
	if (!read_line(line, sizeof(line)) || strcmp(line, "QUIT") == 0)
		event_base_loopbreak(base);
}

int
main(int argc, char **argv)
{
	struct evhttp_bound_socket *bound;
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	struct evhttp *http, *vhost;
	struct event *ev_in;

	/* A client that closes mid-reply makes evhttp's writev() fail with
	 * EPIPE, as a server must expect. */
	(void)signal(SIGPIPE, SIG_IGN);
	base = event_base_new();
	http = base ? evhttp_new(base) : NULL;
	vhost = evhttp_new(base);
	if (!http || !vhost) {
		fprintf(stderr, "evhttp-server: cannot create the server\n");
		return 1;
	}
	bound = evhttp_bind_socket_with_handle(http, "127.0.0.1", 0);
	if (!bound || getsockname(evhttp_bound_socket_get_fd(bound),
				  (struct sockaddr *)&sin, &len) != 0) {
		fprintf(stderr, "evhttp-server: cannot listen on 127.0.0.1\n");
		return 1;
	}
	if (evhttp_set_cb(http, "/block", cb_block, "block") != 0 ||
	    evhttp_set_cb(http, "/block", cb_named, "again") != -1 ||
	    evhttp_set_cb(http, "/gone", cb_named, "gone") != 0 ||
	    evhttp_del_cb(http, "/gone") != 0 || evhttp_del_cb(http, "/gone") != -1 ||
	    evhttp_set_cb(http, "/stream/a", cb_stream, NULL) != 0 ||
	    evhttp_set_cb(http, "/stream/b", cb_stream, NULL) != 0 ||
	    evhttp_set_cb(http, "/stream/c", cb_stream, NULL) != 0 ||
	    evhttp_set_cb(http, "/stale", cb_stale, "stale") != 0 ||
	    evhttp_set_cb(http, "/stream/stale", cb_stream, "stale") != 0 ||
	    pipe(stale_pipe) != 0) {
		fprintf(stderr, "evhttp-server: callback registration misbehaves\n");
		return 1;
	}
	if (argc > 1 && strcmp(argv[1], "-m") == 0)
		evhttp_set_allowed_methods(http, 0xffff);
	stream_later = argc > 1 && strcmp(argv[1], "-l") == 0;
	evhttp_set_gencb(http, cb_named, "first");
	evhttp_set_gencb(http, cb_named, "generic");
	evhttp_set_gencb(vhost, cb_named, "vhost");
	if (evhttp_add_virtual_host(http, "vhost.test", vhost) != 0) {
		fprintf(stderr, "evhttp-server: cannot add the virtual host\n");
		return 1;
	}
	ev_in = event_new(base, 0, EV_READ | EV_PERSIST, on_stdin, NULL);
	if (!ev_in || event_add(ev_in, NULL) != 0) {
		fprintf(stderr, "evhttp-server: cannot watch stdin\n");
		return 1;
	}
	printf("READY %u\n", (unsigned)ntohs(sin.sin_port));
	fflush(stdout);

	event_base_dispatch(base);
	event_free(ev_in);
	evhttp_free(http); /* frees the virtual host too */
	event_base_free(base);
	return 0;
}
