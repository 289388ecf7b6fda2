/* SPDX-License-Identifier: Apache-2.0 */
/* curl-lists: CURLOPT_HTTPHEADER lists a libcurl program may free or set
 * where the shim cannot see them, for test-preload-host.c (run with and
 * without the shim, with TRACEPARENT: the same output and exit status).
 * The HTTP server is a thread of this program on 127.0.0.1.  No tracing
 * code.
 *
 *   curl-lists freed FILE
 *       A handle's HTTP transfer with a header list, the list freed (as
 *       libcurl allows once the transfer is over), then the same handle
 *       used for a file:// transfer of FILE, for which libcurl never reads
 *       the list (hooks/hook-curl.c used to walk the freed list).  Prints
 *       both results and what the file transfer read.
 *   curl-lists oom
 *       malloc() and calloc() fail for the length of one
 *       curl_easy_setopt(CURLOPT_HTTPHEADER) on a new handle (as curl-oom
 *       does), which is then sent as it is: libcurl kept the list, which
 *       must reach the server (hooks/hook-curl.c used to send its own list
 *       instead).  Prints the result and the request's header lines, Host
 *       aside (its port changes). */
#include "config.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>

#include "fail-alloc.h"
#include "listen-loopback.h"

/* ---- the server ---------------------------------------------------------- */

static int listen_fd;
static char head[8192];

/* One connection: its request head into head[], a 200 answer. */
static void *
serve_one(void *arg)
{
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
				 "Connection: close\r\n\r\nok";
	size_t len = 0;
	int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);

	(void)arg;
	if (fd < 0)
		return NULL;
	while (len < sizeof(head) - 1 && !strstr(head, "\r\n\r\n")) {
		ssize_t r = read(fd, head + len, sizeof(head) - 1 - len);

		if (r <= 0)
			break;
		len += (size_t)r;
		head[len] = '\0';
	}
	(void)write(fd, ok, sizeof(ok) - 1);
	close(fd);
	return NULL;
}

/* Listens on 127.0.0.1 (a port of the kernel's choice); the URL to it. */
static void
listen_url(char *url, size_t n)
{
	struct sockaddr_in a;

	listen_fd = listen_loopback(4, SOCK_CLOEXEC, &a);
	if (listen_fd < 0) {
		perror("curl-lists: listen");
		exit(2);
	}
	snprintf(url, n, "http://127.0.0.1:%u/", (unsigned)ntohs(a.sin_port));
}

/* curl_easy_perform(h) against the server; the server's thread is done
 * when it returns. */
static CURLcode
perform_served(CURL *h)
{
	pthread_t t;
	CURLcode rc;

	memset(head, 0, sizeof(head));
	if (pthread_create(&t, NULL, serve_one, NULL) != 0)
		exit(2);
	rc = curl_easy_perform(h);
	if (rc != CURLE_OK)
		(void)shutdown(listen_fd, SHUT_RDWR); /* ends a waiting accept */
	pthread_join(t, NULL);
	return rc;
}

static size_t
discard(char *p, size_t size, size_t n, void *ud)
{
	(void)p;
	(void)ud;
	return size * n;
}

#define GOT_MAX 64

/* What the file:// transfer read, into a GOT_MAX-byte string. */
static size_t
keep(char *p, size_t size, size_t n, void *ud)
{
	char *buf = ud;
	size_t have = strlen(buf), len = size * n;

	if (have + len >= GOT_MAX)
		return 0;
	memcpy(buf + have, p, len);
	buf[have + len] = '\0';
	return len;
}

/* ---- freed --------------------------------------------------------------- */

static int
freed(const char *file)
{
	char url[64], file_url[4096], got[GOT_MAX] = "";
	struct curl_slist *l = NULL;
	CURL *h = curl_easy_init();

	l = curl_slist_append(l, "X-One: 1");
	l = curl_slist_append(l, "X-Two: 2");
	if (!h || !l)
		return 2;
	listen_url(url, sizeof(url));
	/* The file's URL is made on the stack beforehand: nothing of this
	 * program allocates between the free and the file:// transfer and
	 * takes the freed nodes' memory again. */
	snprintf(file_url, sizeof(file_url), "file://%s", file);
	(void)curl_easy_setopt(h, CURLOPT_URL, url);
	(void)curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
	(void)curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
	printf("http %d\n", (int)perform_served(h));
	fflush(stdout); /* out before a fault in the next transfer */
	curl_slist_free_all(l);
	(void)curl_easy_setopt(h, CURLOPT_URL, file_url);
	(void)curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, keep);
	(void)curl_easy_setopt(h, CURLOPT_WRITEDATA, got);
	printf("file %d %s", (int)curl_easy_perform(h), got);
	curl_easy_cleanup(h);
	return 0;
}

/* ---- oom ----------------------------------------------------------------- */

static int
oom(void)
{
	struct curl_slist *l = curl_slist_append(NULL, "Authorization: Bearer secret");
	CURL *h = curl_easy_init();
	char url[64], *line, *save;
	CURLcode rc;

	if (!h || !l)
		return 2;
	fail_now = 1;
	rc = curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
	fail_now = 0;
	printf("setopt under ENOMEM %d\n", (int)rc);
	listen_url(url, sizeof(url));
	(void)curl_easy_setopt(h, CURLOPT_URL, url);
	(void)curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
	printf("perform %d\n", (int)perform_served(h));
	for (line = strtok_r(head, "\r\n", &save); line;
	     line = strtok_r(NULL, "\r\n", &save))
		if (strncasecmp(line, "Host:", 5) != 0)
			printf("  %s\n", line);
	curl_easy_cleanup(h);
	curl_slist_free_all(l);
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "freed") == 0)
		return freed(argv[2]);
	if (argc == 2 && strcmp(argv[1], "oom") == 0)
		return oom();
	fprintf(stderr, "usage: curl-lists freed FILE | curl-lists oom\n");
	return 64;
}
