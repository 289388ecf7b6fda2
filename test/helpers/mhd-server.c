/* SPDX-License-Identifier: Apache-2.0 */
/* A libmicrohttpd server with no tracing code but a look at its own
 * published context (ctxobs.h) in its response bodies, for the
 * integration tests.
 *
 * usage: mhd-server [-u] [-a] [-x] [-m[N]] thread|select|epoll|external [CERT KEY]
 *   thread  MHD_USE_THREAD_PER_CONNECTION (one thread per connection)
 *   select  MHD_USE_INTERNAL_POLLING_THREAD (one select() loop)
 *   epoll   MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL (one epoll loop)
 *   external  no thread of MHD's: the main thread's select() loop runs
 *           the daemon (MHD_run_from_select()) and reads stdin; a /block
 *           request would block it for good
 *   CERT KEY  PEM files: serve HTTPS (MHD_USE_TLS; Debian's libmicrohttpd
 *             does TLS with GnuTLS)
 *   -u  set an MHD_OPTION_URI_LOG_CALLBACK, which prints "URI <uri>" and
 *       returns the request's state: the handler's first call prints
 *       "REQCLS <url>" when it finds that value in *req_cls
 *   -a  pass the options in an MHD_OPTION_ARRAY, with MHD's messages on
 *       (MHD_USE_ERROR_LOG, MHD_OPTION_EXTERNAL_LOGGER as the second
 *       option, so MHD says it is not the first) printed as "MHD <text>"
 *   -x  also pass option 99, which libmicrohttpd does not know (the
 *       daemon does not start), with MHD's messages as for -a
 *   -m  also pass MHD_OPTION_CONNECTION_TIMEOUT 300 times (-mN: N times,
 *       N <= 300) in an MHD_OPTION_ARRAY: more options than the shim
 *       rewrites, so that it leaves them to MHD (url.path is then MHD's
 *       decoded url)
 *
 * Listens on 127.0.0.1 (ephemeral port) and prints "READY <port>".  Every
 * request is answered with "<method> <url> <body bytes>\n".  A request for
 * a path starting with /block first prints "IN <tid> <method> <url>" and
 * waits until the test writes a line "GO" on stdin; the handler is then
 * inside the request, which is what the test looks at.  Each completed
 * request prints "DONE <tid> <url> <termination code>".  A request for a
 * path starting with /stream is answered from a content reader
 * (MHD_create_response_from_callback()) with STREAM_LINES lines, each the
 * trace-id the reader's thread published (ctxobs_trace(), "none" padded
 * to 32) when it wrote that line, over many reader calls; the first call
 * prints "BODY <tid> <url>", the one that writes the end "END <tid>
 * <url>", the reader's free callback "FREE <url>", and the completion
 * callback, before "DONE", "SEEN <url> <trace or none>".  Every request for
 * /shared is answered with the same such response, made at the first one
 * and kept until the daemon stops (MHD counts the connections that hold
 * it).  EOF on stdin
 * stops the daemon and exits 0.  The response never depends on threads or
 * time (no Date header), so runs with and without the shim are
 * byte-identical. */
#include "config.h"

#include "ctxobs.h"
#include "mhd-select.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <microhttpd.h>

/* Lines from stdin are handed to blocked handlers through this pipe, so
 * the main thread alone reads stdin. */
static int go_pipe[2];
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static struct MHD_Response *shared; /* under shared_lock */

struct request {
	size_t body;
	bool started;    /* the handler has been called */
	char stream[64]; /* the /stream url, or "" */
};

static void
say(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&out_lock);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	pthread_mutex_unlock(&out_lock);
}

static long
tid(void)
{
	return (long)syscall(SYS_gettid);
}

static void
wait_go(void)
{
	char c;

	/* One byte per "GO"; 0 (EOF) when the test has finished. */
	while (read(go_pipe[0], &c, 1) < 0 && errno == EINTR)
		;
}

/* The whole file at path, NUL-terminated (MHD takes PEM as a string);
 * NULL on error. */
static char *
slurp(const char *path)
{
	struct stat st;
	char *buf = NULL;
	FILE *f = fopen(path, "re");

	if (f && fstat(fileno(f), &st) == 0 && st.st_size > 0) {
		buf = calloc(1, (size_t)st.st_size + 1);
		if (buf && fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
			free(buf);
			buf = NULL;
		}
	}
	if (f)
		(void)fclose(f);
	return buf;
}

/* A /stream body: 33-byte lines, much more than the sockets of a
 * connection buffer (test-integration-mhd.c, test_stream_bodies, reads one
 * body only after another one), in blocks of whole lines, so that each
 * line is written by one reader call. */
#define STREAM_LINE  33
#define STREAM_LINES 262144
#define STREAM_BYTES ((uint64_t)STREAM_LINE * STREAM_LINES)
#define STREAM_BLOCK (STREAM_LINE * 496)

struct stream {
	char url[64];
};

static ssize_t
stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	const struct stream *st = cls;
	char line[STREAM_LINE + 1], t[33];
	size_t i;

	if (pos == 0)
		say("BODY %ld %s", tid(), st->url);
	if (max > STREAM_BYTES - pos)
		max = (size_t)(STREAM_BYTES - pos);
	snprintf(line, sizeof(line), "%-32s\n", ctxobs_trace(t));
	for (i = 0; i < max; i++)
		buf[i] = line[(pos + i) % STREAM_LINE];
	if (pos + max == STREAM_BYTES)
		say("END %ld %s", tid(), st->url);
	return (ssize_t)max;
}

static void
stream_free(void *cls)
{
	struct stream *st = cls;

	say("FREE %s", st->url);
	free(st);
}

static struct MHD_Response *
stream_response(const char *url)
{
	struct MHD_Response *resp;
	struct stream *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	snprintf(st->url, sizeof(st->url), "%s", url);
	resp = MHD_create_response_from_callback(STREAM_BYTES, STREAM_BLOCK,
						 stream_read, st, stream_free);
	if (!resp)
		free(st);
	return resp;
}

static enum MHD_Result
handler(void *cls,
	struct MHD_Connection *conn,
	const char *url,
	const char *method,
	const char *version,
	const char *upload_data,
	size_t *upload_data_size,
	void **req_cls)
{
	struct request *rq = *req_cls;
	struct MHD_Response *resp;
	enum MHD_Result r;
	char body[512];
	int n;

	(void)cls;
	(void)version;
	(void)upload_data;
	if (!rq || !rq->started) {
		if (rq) {
			say("REQCLS %s", url); /* from the URI log callback */
		} else {
			rq = calloc(1, sizeof(*rq));
			if (!rq)
				return MHD_NO;
			*req_cls = rq;
		}
		rq->started = true;
		return MHD_YES;
	}
	if (*upload_data_size) {
		rq->body += *upload_data_size;
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (strncmp(url, "/block", 6) == 0) {
		say("IN %ld %s %s", tid(), method, url);
		wait_go();
	}
	if (strncmp(url, "/shared", 7) == 0) {
		pthread_mutex_lock(&shared_lock);
		if (!shared)
			shared = stream_response("/shared");
		resp = shared;
		pthread_mutex_unlock(&shared_lock);
		return resp ? MHD_queue_response(conn, MHD_HTTP_OK, resp) : MHD_NO;
	}
	if (strncmp(url, "/stream", 7) == 0) {
		snprintf(rq->stream, sizeof(rq->stream), "%s", url);
		resp = stream_response(url);
	} else {
		n = snprintf(body, sizeof(body), "%s %s %zu\n", method, url, rq->body);
		if (n < 0 || (size_t)n >= sizeof(body))
			return MHD_NO;
		resp = MHD_create_response_from_buffer((size_t)n, body,
						       MHD_RESPMEM_MUST_COPY);
	}
	if (!resp)
		return MHD_NO;
	r = MHD_queue_response(conn, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	return r;
}

static void
completed(void *cls,
	  struct MHD_Connection *conn,
	  void **req_cls,
	  enum MHD_RequestTerminationCode toe)
{
	const union MHD_ConnectionInfo *ci;
	const struct request *rq = *req_cls;
	char t[33];

	(void)cls;
	(void)conn;
	if (rq && rq->stream[0])
		say("SEEN %s %s", rq->stream, ctxobs_trace(t));
	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	say("DONE %ld fd=%d %d", tid(), ci ? ci->connect_fd : -1, (int)toe);
	free(*req_cls);
	*req_cls = NULL;
}

static void *
uri_log(void *cls, const char *uri, struct MHD_Connection *conn)
{
	(void)cls;
	(void)conn;
	say("URI %s", uri ? uri : "(null)");
	return calloc(1, sizeof(struct request));
}

static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	pthread_mutex_lock(&out_lock);
	fputs("MHD ", stdout);
	vprintf(fmt, ap);
	fflush(stdout);
	pthread_mutex_unlock(&out_lock);
}

/* -a: the options as an array (-u, TLS: their options too). */
static struct MHD_Daemon *
start_array(unsigned int flags,
	    struct sockaddr *sa,
	    bool uri,
	    const char *cert,
	    const char *key)
{
	struct MHD_OptionItem o[8];
	int n = 0;

	o[n++] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, sa};
	o[n++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log,
					 NULL};
	o[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED,
					 (intptr_t)completed, NULL};
	if (uri)
		o[n++] = (struct MHD_OptionItem){MHD_OPTION_URI_LOG_CALLBACK,
						 (intptr_t)uri_log, NULL};
	if (cert) {
		o[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0,
						 (void *)cert};
		o[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0,
						 (void *)key};
	}
	o[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
	return MHD_start_daemon(flags | MHD_USE_ERROR_LOG, 0, NULL, NULL, handler, NULL,
				MHD_OPTION_ARRAY, o, MHD_OPTION_END);
}

/* -m: the options of the plain daemon, then many more. */
static struct MHD_Daemon *
start_many(unsigned int flags, struct sockaddr *sa, size_t many)
{
	static struct MHD_OptionItem o[300 + 1];
	size_t i;

	for (i = 0; i < many && i < 300; i++)
		o[i] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, 30, NULL};
	o[i] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
	return MHD_start_daemon(flags, 0, NULL, NULL, handler, NULL,
				MHD_OPTION_SOCK_ADDR, sa, MHD_OPTION_NOTIFY_COMPLETED,
				completed, NULL, MHD_OPTION_ARRAY, o, MHD_OPTION_END);
}

int
main(int argc, char **argv)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	const union MHD_DaemonInfo *info;
	struct MHD_Daemon *d;
	unsigned int flags;
	char line[64], *cert = NULL, *key = NULL;
	bool uri = false, array = false, unknown = false;
	size_t many = 0;

	for (; argc > 1 && argv[1][0] == '-'; argc--, argv++) {
		if (strcmp(argv[1], "-u") == 0)
			uri = true;
		else if (strcmp(argv[1], "-a") == 0)
			array = true;
		else if (strcmp(argv[1], "-x") == 0)
			unknown = true;
		else if (strncmp(argv[1], "-m", 2) == 0)
			many = argv[1][2] ? strtoul(argv[1] + 2, NULL, 10) : 300;
		else
			break;
	}
	if ((argc != 2 && argc != 4) ||
	    (strcmp(argv[1], "thread") != 0 && strcmp(argv[1], "select") != 0 &&
	     strcmp(argv[1], "epoll") != 0 && strcmp(argv[1], "external") != 0)) {
		fprintf(stderr, "usage: mhd-server [-u] [-a] [-x] [-m[N]] "
				"thread|select|epoll|external [CERT KEY]\n");
		return 64;
	}
	if (argc == 4) {
		cert = slurp(argv[2]);
		key = slurp(argv[3]);
		if (!cert || !key) {
			fprintf(stderr, "mhd-server: cannot read %s or %s\n", argv[2],
				argv[3]);
			return 1;
		}
	}
	if (pipe2(go_pipe, O_CLOEXEC) != 0) {
		perror("mhd-server: pipe");
		return 1;
	}
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_SUPPRESS_DATE_NO_CLOCK;
	if (strcmp(argv[1], "thread") == 0)
		flags |= MHD_USE_THREAD_PER_CONNECTION;
	else if (strcmp(argv[1], "epoll") == 0)
		flags |= MHD_USE_EPOLL;
	else if (strcmp(argv[1], "external") == 0)
		flags &= ~(unsigned int)MHD_USE_INTERNAL_POLLING_THREAD;
	if (cert)
		flags |= MHD_USE_TLS;
	if (array)
		d = start_array(flags, (struct sockaddr *)&sin, uri, cert, key);
	else if (many)
		d = start_many(flags, (struct sockaddr *)&sin, many);
	else if (unknown)
		d = MHD_start_daemon(flags | MHD_USE_ERROR_LOG, 0, NULL, NULL, handler,
				     NULL, MHD_OPTION_SOCK_ADDR,
				     (struct sockaddr *)&sin,
				     MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
				     MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
				     (enum MHD_OPTION)99, MHD_OPTION_END);
	else if (uri && !cert)
		d = MHD_start_daemon(flags, 0, NULL, NULL, handler, NULL,
				     MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sin,
				     MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
				     MHD_OPTION_URI_LOG_CALLBACK, uri_log, NULL,
				     MHD_OPTION_END);
	else if (uri)
		d = MHD_start_daemon(flags, 0, NULL, NULL, handler, NULL,
				     MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sin,
				     MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
				     MHD_OPTION_URI_LOG_CALLBACK, uri_log, NULL,
				     MHD_OPTION_HTTPS_MEM_CERT, cert,
				     MHD_OPTION_HTTPS_MEM_KEY, key, MHD_OPTION_END);
	else if (cert)
		d = MHD_start_daemon(flags, 0, NULL, NULL, handler, NULL,
				     MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sin,
				     MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
				     MHD_OPTION_HTTPS_MEM_CERT, cert,
				     MHD_OPTION_HTTPS_MEM_KEY, key, MHD_OPTION_END);
	else
		d = MHD_start_daemon(flags, 0, NULL, NULL, handler, NULL,
				     MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sin,
				     MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
				     MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "mhd-server: MHD_start_daemon failed\n");
		return 1;
	}
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	if (!info || !info->port) {
		fprintf(stderr, "mhd-server: no port\n");
		return 1;
	}
	say("READY %u", (unsigned)info->port);

	if (!(flags & MHD_USE_INTERNAL_POLLING_THREAD))
		/* external: from this thread, until EOF on stdin */
		while (mhd_select_loop(d))
			;
	else
		while (fgets(line, sizeof(line), stdin)) {
			if (strncmp(line, "GO", 2) == 0 &&
			    write(go_pipe[1], "g", 1) != 1)
				break;
		}
	/* Release any handler still waiting, then stop. */
	close(go_pipe[1]);
	MHD_stop_daemon(d);
	if (shared)
		MHD_destroy_response(shared);
	close(go_pipe[0]);
	free(cert);
	free(key);
	return 0;
}
