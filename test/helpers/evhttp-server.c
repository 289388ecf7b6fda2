/* SPDX-License-Identifier: Apache-2.0 */
/* A libevent evhttp server with no tracing code, for the integration tests.
 *
 * usage: evhttp-server [-m]
 *   -m  allow every method bit (evhttp_set_allowed_methods()), so that a
 *       method libevent does not know reaches the callbacks
 *
 * Listens on 127.0.0.1 (ephemeral port) and prints "READY <port>".  One
 * event loop thread.  Callbacks:
 *   /block        evhttp_set_cb: prints "IN <tid> <method> <uri>", then waits
 *                 for a line on stdin before answering;
 *   /gone         evhttp_set_cb, then evhttp_del_cb: answered by the
 *                 generic callback;
 *   anything else the generic callback (evhttp_set_gencb, set twice: the
 *                 first one is replaced);
 *   Host: vhost.test  a virtual host with its own generic callback.
 * Every answer is "<name> <method> <uri> <body bytes>\n" with fixed Date and
 * Content-Type headers, so runs with and without the shim are
 * byte-identical; each finished request prints "DONE <tid> <uri>".  A line
 * "QUIT" or EOF on stdin (between requests) frees everything and exits 0. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

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
	    evhttp_del_cb(http, "/gone") != 0 || evhttp_del_cb(http, "/gone") != -1) {
		fprintf(stderr, "evhttp-server: callback registration misbehaves\n");
		return 1;
	}
	if (argc > 1 && strcmp(argv[1], "-m") == 0)
		evhttp_set_allowed_methods(http, 0xffff);
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
