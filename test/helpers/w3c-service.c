/* SPDX-License-Identifier: Apache-2.0 */
/* w3c-service: the service the W3C Trace Context conformance tests drive.
 * It contains no tracing code at all: run under libctxshim.so it must
 * behave as a conformant Trace Context participant, which is what the
 * integration suite checks.
 *
 * A libmicrohttpd server on 127.0.0.1.  A POST carries a JSON array of
 * {"url": ..., "arguments": ...}; for each element, in order, the service
 * POSTs the "arguments" value (as JSON) to "url" with libcurl, then
 * answers 200 (500 if the body is not such an array).
 *
 *   w3c-service [--threads] [--multi] [--reuse]
 *     --threads  one thread per connection (default: MHD's internal
 *                polling thread)
 *     --multi    make the calls through the multi interface, all at once
 *     --reuse    one easy handle for all the calls of a request
 *
 * Prints "READY <port>" and stops when stdin reaches end of file. */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>
#include <microhttpd.h>

#include "listen-loopback.h"

#define BODY_MAX  (1024 * 1024)
#define CALLS_MAX 64
#define URL_MAX   2048

static bool opt_multi, opt_reuse;

/* ---- a small JSON scanner: only what this service needs ----------------- */

struct json {
	const char *p, *end;
};

static void
json_ws(struct json *j)
{
	while (j->p < j->end &&
	       (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static bool
json_lit(struct json *j, char c)
{
	json_ws(j);
	if (j->p < j->end && *j->p == c) {
		j->p++;
		return true;
	}
	return false;
}

/* A string; with out, its value (simple escapes only; \u only for ASCII). */
static bool
json_string(struct json *j, char *out, size_t cap)
{
	size_t n = 0;

	if (!json_lit(j, '"'))
		return false;
	while (j->p < j->end && *j->p != '"') {
		char c = *j->p++;

		if (c == '\\') {
			if (j->p >= j->end)
				return false;
			c = *j->p++;
			switch (c) {
			case 'n':
				c = '\n';
				break;
			case 't':
				c = '\t';
				break;
			case 'r':
				c = '\r';
				break;
			case 'b':
				c = '\b';
				break;
			case 'f':
				c = '\f';
				break;
			case 'u': {
				char hex[5] = {0};
				unsigned long v;

				if (j->end - j->p < 4)
					return false;
				memcpy(hex, j->p, 4);
				j->p += 4;
				v = strtoul(hex, NULL, 16);
				c = v < 0x80 ? (char)v : '?';
				break;
			}
			default: /* '"', '\\', '/' */
				break;
			}
		}
		if (out) {
			if (n + 1 >= cap)
				return false;
			out[n++] = c;
		}
	}
	if (out)
		out[n] = '\0';
	return json_lit(j, '"');
}

static bool json_value(struct json *j, int depth);

static bool
json_container(struct json *j, char open, char close, int depth)
{
	if (!json_lit(j, open) || depth > 64)
		return false;
	if (json_lit(j, close))
		return true;
	do {
		if (open == '{' && (!json_string(j, NULL, 0) || !json_lit(j, ':')))
			return false;
		if (!json_value(j, depth + 1))
			return false;
	} while (json_lit(j, ','));
	return json_lit(j, close);
}

/* Skips one value of any type. */
static bool
json_value(struct json *j, int depth)
{
	json_ws(j);
	if (j->p >= j->end)
		return false;
	switch (*j->p) {
	case '"':
		return json_string(j, NULL, 0);
	case '[':
		return json_container(j, '[', ']', depth);
	case '{':
		return json_container(j, '{', '}', depth);
	default:
		/* number, true, false, null */
		if (!*j->p || !strchr("-0123456789tfn", *j->p))
			return false;
		while (j->p < j->end && *j->p &&
		       strchr("+-.0123456789eEtruefalsn", *j->p))
			j->p++;
		return true;
	}
}

struct call {
	char url[URL_MAX];
	const char *args; /* the raw JSON text of "arguments" */
	size_t args_len;
};

/* [{"url": ..., "arguments": ...}, ...] */
static int
parse_calls(const char *body, size_t len, struct call *calls)
{
	struct json j = {body, body + len};
	int n = 0;

	if (!json_lit(&j, '['))
		return -1;
	if (json_lit(&j, ']'))
		return 0;
	do {
		struct call *c = &calls[n];

		if (n == CALLS_MAX || !json_lit(&j, '{'))
			return -1;
		c->url[0] = '\0';
		c->args = "null";
		c->args_len = 4;
		if (!json_lit(&j, '}')) {
			do {
				char key[64];

				if (!json_string(&j, key, sizeof(key)) ||
				    !json_lit(&j, ':'))
					return -1;
				json_ws(&j);
				if (strcmp(key, "url") == 0) {
					if (!json_string(&j, c->url, sizeof(c->url)))
						return -1;
				} else if (strcmp(key, "arguments") == 0) {
					c->args = j.p;
					if (!json_value(&j, 1))
						return -1;
					c->args_len = (size_t)(j.p - c->args);
				} else if (!json_value(&j, 1)) {
					return -1;
				}
			} while (json_lit(&j, ','));
			if (!json_lit(&j, '}'))
				return -1;
		}
		if (!c->url[0])
			return -1;
		n++;
	} while (json_lit(&j, ','));
	if (!json_lit(&j, ']'))
		return -1;
	json_ws(&j);
	return j.p == j.end ? n : -1;
}

/* ---- the calls --------------------------------------------------------------- */

static size_t
discard(char *buf, size_t size, size_t n, void *arg)
{
	(void)buf;
	(void)arg;
	return size * n;
}

static void
setup(CURL *easy, const struct call *c, struct curl_slist *headers)
{
	curl_easy_setopt(easy, CURLOPT_URL, c->url);
	curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(easy, CURLOPT_POSTFIELDS, c->args);
	curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE, (long)c->args_len);
	curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(easy, CURLOPT_TIMEOUT, 20L);
}

static void
do_calls(const struct call *calls, int n)
{
	struct curl_slist *headers =
		curl_slist_append(NULL, "Content-Type: application/json");
	CURL *easy[CALLS_MAX], *shared = NULL;
	int i;

	if (opt_multi) {
		CURLM *multi = curl_multi_init();
		int running = 1;

		for (i = 0; i < n; i++) {
			easy[i] = curl_easy_init();
			setup(easy[i], &calls[i], headers);
			curl_multi_add_handle(multi, easy[i]);
		}
		while (running && curl_multi_perform(multi, &running) == CURLM_OK)
			if (running)
				curl_multi_poll(multi, NULL, 0, 1000, NULL);
		for (i = 0; i < n; i++) {
			curl_multi_remove_handle(multi, easy[i]);
			curl_easy_cleanup(easy[i]);
		}
		curl_multi_cleanup(multi);
	} else {
		for (i = 0; i < n; i++) {
			CURL *e = opt_reuse ? (shared ? shared
						      : (shared = curl_easy_init()))
					    : curl_easy_init();

			setup(e, &calls[i], headers);
			(void)curl_easy_perform(e);
			if (!opt_reuse)
				curl_easy_cleanup(e);
		}
		if (shared)
			curl_easy_cleanup(shared);
	}
	curl_slist_free_all(headers);
}

/* ---- the server ------------------------------------------------------------- */

struct request {
	char *body;
	size_t len;
	bool too_big;
};

static enum MHD_Result
reply(struct MHD_Connection *conn, unsigned int status)
{
	struct MHD_Response *r =
		MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret = MHD_queue_response(conn, status, r);

	MHD_destroy_response(r);
	return ret;
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
	struct request *req = *req_cls;
	struct call *calls;
	int n;

	(void)cls;
	(void)url;
	(void)version;
	if (strcmp(method, "POST") != 0)
		return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED);
	if (!req) {
		req = calloc(1, sizeof(*req));
		if (!req)
			return MHD_NO;
		*req_cls = req;
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		if (req->len + *upload_data_size > BODY_MAX) {
			req->too_big = true;
		} else {
			char *b = realloc(req->body, req->len + *upload_data_size + 1);

			if (!b)
				return MHD_NO;
			memcpy(b + req->len, upload_data, *upload_data_size);
			req->body = b;
			req->len += *upload_data_size;
		}
		*upload_data_size = 0;
		return MHD_YES;
	}
	calls = malloc(sizeof(*calls) * CALLS_MAX);
	n = (calls && !req->too_big)
		    ? parse_calls(req->body ? req->body : "", req->len, calls)
		    : -1;
	if (n > 0)
		do_calls(calls, n);
	free(calls);
	return reply(conn, n >= 0 ? MHD_HTTP_OK : MHD_HTTP_INTERNAL_SERVER_ERROR);
}

static void
completed(void *cls,
	  struct MHD_Connection *conn,
	  void **req_cls,
	  enum MHD_RequestTerminationCode toe)
{
	struct request *req = *req_cls;

	(void)cls;
	(void)conn;
	(void)toe;
	if (req) {
		free(req->body);
		free(req);
		*req_cls = NULL;
	}
}

int
main(int argc, char **argv)
{
	struct sockaddr_in a;
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD;
	struct MHD_Daemon *d;
	char buf[64];
	int i, lfd;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--threads") == 0) {
			flags |= MHD_USE_THREAD_PER_CONNECTION;
		} else if (strcmp(argv[i], "--multi") == 0) {
			opt_multi = true;
		} else if (strcmp(argv[i], "--reuse") == 0) {
			opt_reuse = true;
		} else {
			fprintf(stderr, "w3c-service: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	lfd = listen_loopback(64, SOCK_CLOEXEC, &a);
	if (lfd < 0) {
		perror("w3c-service: listen");
		return 1;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	d = MHD_start_daemon(flags, 0, NULL, NULL, handler, NULL,
			     MHD_OPTION_LISTEN_SOCKET, lfd, MHD_OPTION_NOTIFY_COMPLETED,
			     completed, NULL, MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "w3c-service: MHD_start_daemon failed\n");
		return 1;
	}
	printf("READY %u\n", (unsigned)ntohs(a.sin_port));
	fflush(stdout);
	while (read(0, buf, sizeof(buf)) > 0)
		;
	MHD_stop_daemon(d);
	curl_global_cleanup();
	return 0;
}
