/* SPDX-License-Identifier: Apache-2.0 */
/* A deterministic HTTP/1.1 client and a one-shot head catcher, so that the
 * instructions nginx spends per request can be counted under callgrind
 * with exactly the request head wrk sends in the B1 runs (issue 8, B1i).
 *
 *   bench-ngxclient capture PORT OUT   listen on 127.0.0.1:PORT, print
 *                                      "READY", take one request head and
 *                                      write it to OUT, answer, exit
 *   bench-ngxclient run PORT HEAD N [PID]
 *                                      send the head in file HEAD N times,
 *                                      one after the other, on one
 *                                      keep-alive connection to
 *                                      127.0.0.1:PORT; read each response
 *                                      whole (Content-Length) before the
 *                                      next; then SIGTERM to PID (if
 *                                      given), close; print "requests=N ..."
 *   bench-ngxclient lat PORT HEAD N [WARM]
 *                                      the same, WARM untimed requests and
 *                                      then N timed ones; print requests/s
 *                                      and the mean, p50, p90, p99, p99.9
 *                                      and max latency in ns (B2)
 *
 * wrk is not deterministic (it sends as many requests as fit in its
 * duration, several connections at once); this sends a fixed number, one
 * at a time, so that two counts differ only by the requests between them.
 * Every response must be a 200 with a body, or the run fails (exit 1).
 *
 * PID is the server when it runs as one process (nginx with master_process
 * off, under callgrind): nginx checks its terminate flag only after an
 * event, so a SIGTERM that lands just after that check and before it
 * blocks again is not seen until the next event.  Sending it before our
 * close() makes sure that one more event (the close) follows it.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define NGXC_HEAD_MAX 8192
#define NGXC_BUF_SIZE 65536

static int
ngxc_addr(const char *port, struct sockaddr_in *sa)
{
	char *end;
	long p = strtol(port, &end, 10);

	if (*port == '\0' || *end != '\0' || p <= 0 || p > 65535)
		return -1;
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)p);
	sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return 0;
}

static int
ngxc_write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Position just past the first "\r\n\r\n" in buf[0..len), or 0. */
static size_t
ngxc_head_end(const char *buf, size_t len)
{
	for (size_t i = 3; i < len; i++)
		if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' &&
		    buf[i - 3] == '\r')
			return i + 1;
	return 0;
}

static int
ngxc_capture(const char *port, const char *out)
{
	struct sockaddr_in sa;
	char buf[NGXC_HEAD_MAX];
	size_t len = 0, end = 0;
	int one = 1, ls, fd;
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n"
				   "Connection: close\r\n\r\n";

	if (ngxc_addr(port, &sa) < 0)
		return 2;
	ls = socket(AF_INET, SOCK_STREAM, 0);
	if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(ls, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(ls, 16) < 0) {
		perror("bench-ngxclient: listen");
		return 1;
	}
	printf("READY\n");
	fflush(stdout);
	/* wrk first connects once and closes without sending (its check
	 * that the address is reachable): take the first connection that
	 * sends something. */
	do {
		fd = accept(ls, NULL, NULL);
		if (fd < 0) {
			perror("bench-ngxclient: accept");
			return 1;
		}
		while (end == 0 && len < sizeof(buf)) {
			ssize_t r = read(fd, buf + len, sizeof(buf) - len);

			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
			len += (size_t)r;
			end = ngxc_head_end(buf, len);
		}
		if (len == 0)
			close(fd);
	} while (len == 0);
	if (end == 0) {
		fprintf(stderr, "bench-ngxclient: no complete request head\n");
		return 1;
	}
	/* Only the first head: a client that pipelined would have sent more. */
	FILE *f = fopen(out, "wb");

	if (f == NULL || fwrite(buf, 1, end, f) != end || fclose(f) != 0) {
		perror(out);
		return 1;
	}
	(void)ngxc_write_all(fd, resp, sizeof(resp) - 1);
	close(fd);
	close(ls);
	printf("head_bytes=%zu\n", end);
	return 0;
}

/* Content-Length of a response head, or -1 (none or not a 200). */
static long
ngxc_content_length(const char *head, size_t len)
{
	static const char cl[] = "\r\ncontent-length:";

	if (len < 12 || memcmp(head, "HTTP/1.1 200", 12) != 0)
		return -1;
	for (size_t i = 0; i + sizeof(cl) - 1 < len; i++)
		if (strncasecmp(head + i, cl, sizeof(cl) - 1) == 0)
			return strtol(head + i + sizeof(cl) - 1, NULL, 10);
	return -1;
}

/* Load the request head in HEADFILE into head (NGXC_HEAD_MAX): its length,
 * or 0 after saying why. */
static size_t
ngxc_load_head(const char *headfile, char *head)
{
	size_t hlen;
	FILE *f = fopen(headfile, "rb");

	if (f == NULL) {
		perror(headfile);
		return 0;
	}
	hlen = fread(head, 1, NGXC_HEAD_MAX, f);
	fclose(f);
	if (hlen == 0 || ngxc_head_end(head, hlen) != hlen) {
		fprintf(stderr, "bench-ngxclient: %s is not one request head\n",
			headfile);
		return 0;
	}
	return hlen;
}

/* A keep-alive connection to 127.0.0.1:PORT, or -1 after saying why. */
static int
ngxc_connect(const char *port)
{
	struct sockaddr_in sa;
	int one = 1, fd;

	if (ngxc_addr(port, &sa) < 0) {
		fprintf(stderr, "bench-ngxclient: bad port %s\n", port);
		return -1;
	}
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("bench-ngxclient: connect");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* Request number i: send the head and read the whole response (a 200 with
 * a Content-Length body, nothing more).  Its body length, or -1 after
 * saying why. */
static long
ngxc_exchange(int fd, const char *head, size_t hlen, char *buf, size_t cap, long i)
{
	size_t len = 0, end = 0;
	long clen;

	if (ngxc_write_all(fd, head, hlen) < 0) {
		perror("bench-ngxclient: write");
		return -1;
	}
	/* One request in flight at a time: nginx never sees two heads in one
	 * read, as with wrk's one request per connection. */
	while (end == 0) {
		ssize_t r = read(fd, buf + len, cap - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || len + (size_t)r >= cap) {
			fprintf(stderr, "bench-ngxclient: response %ld cut short\n", i);
			return -1;
		}
		len += (size_t)r;
		end = ngxc_head_end(buf, len);
	}
	clen = ngxc_content_length(buf, end);
	if (clen < 0 || (size_t)clen > cap - end) {
		const char *cr = memchr(buf, '\r', end);

		fprintf(stderr, "bench-ngxclient: response %ld: %.*s\n", i,
			cr != NULL ? (int)(cr - buf) : (int)end, buf);
		return -1;
	}
	while (len < end + (size_t)clen) {
		ssize_t r = read(fd, buf + len, cap - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			fprintf(stderr, "bench-ngxclient: body %ld cut short\n", i);
			return -1;
		}
		len += (size_t)r;
	}
	if (len != end + (size_t)clen) {
		fprintf(stderr, "bench-ngxclient: response %ld has extra bytes\n", i);
		return -1;
	}
	return clen;
}

static int
ngxc_run(const char *port, const char *headfile, long n, pid_t server)
{
	static char head[NGXC_HEAD_MAX], buf[NGXC_BUF_SIZE];
	size_t hlen = ngxc_load_head(headfile, head);
	long body_total = 0;
	int fd;

	if (hlen == 0)
		return 2;
	fd = ngxc_connect(port);
	if (fd < 0)
		return 1;
	for (long i = 0; i < n; i++) {
		long clen = ngxc_exchange(fd, head, hlen, buf, sizeof(buf), i);

		if (clen < 0)
			return 1;
		body_total += clen;
	}
	if (server > 0 && kill(server, SIGTERM) < 0) {
		perror("bench-ngxclient: kill");
		return 1;
	}
	close(fd);
	printf("requests=%ld head_bytes=%zu body_bytes=%ld\n", n, hlen, body_total);
	return 0;
}

static uint64_t
ngxc_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int
ngxc_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Nearest-rank percentile p (0 < p <= 100) of the n sorted values v. */
static uint64_t
ngxc_pct(const uint64_t *v, size_t n, double p)
{
	size_t k = (size_t)((p / 100.0) * (double)n + 0.999999);

	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return v[k - 1];
}

/* Latency of each of N requests (after WARM untimed ones) sent one at a
 * time on one keep-alive connection: from just before the head is written
 * to the last byte of the response, CLOCK_MONOTONIC.  A closed loop with
 * one request in flight measures the server's own path (wake-up, read,
 * parse, the file, write), not a queue behind other connections. */
static int
ngxc_lat(const char *port, const char *headfile, long n, long warm)
{
	static char head[NGXC_HEAD_MAX], buf[NGXC_BUF_SIZE];
	size_t hlen = ngxc_load_head(headfile, head);
	uint64_t *lat, t0, t_all, sum = 0;
	int fd;

	if (hlen == 0)
		return 2;
	lat = calloc((size_t)n, sizeof(*lat));
	if (lat == NULL) {
		perror("bench-ngxclient: calloc");
		return 1;
	}
	fd = ngxc_connect(port);
	if (fd < 0) {
		free(lat);
		return 1;
	}
	for (long i = 0; i < warm; i++)
		if (ngxc_exchange(fd, head, hlen, buf, sizeof(buf), i) < 0)
			goto fail;
	t_all = ngxc_now_ns();
	for (long i = 0; i < n; i++) {
		t0 = ngxc_now_ns();
		if (ngxc_exchange(fd, head, hlen, buf, sizeof(buf), warm + i) < 0)
			goto fail;
		lat[i] = ngxc_now_ns() - t0;
		sum += lat[i];
	}
	t_all = ngxc_now_ns() - t_all;
	close(fd);
	qsort(lat, (size_t)n, sizeof(*lat), ngxc_cmp_u64);
	printf("requests=%ld rps=%.0f mean_ns=%.0f p50_ns=%" PRIu64 " p90_ns=%" PRIu64
	       " p99_ns=%" PRIu64 " p999_ns=%" PRIu64 " max_ns=%" PRIu64 "\n",
	       n, (double)n * 1e9 / (double)(t_all ? t_all : 1),
	       (double)sum / (double)n, ngxc_pct(lat, (size_t)n, 50),
	       ngxc_pct(lat, (size_t)n, 90), ngxc_pct(lat, (size_t)n, 99),
	       ngxc_pct(lat, (size_t)n, 99.9), lat[n - 1]);
	free(lat);
	return 0;
fail:
	close(fd);
	free(lat);
	return 1;
}

/* A count argument: 0 and up, at most max; -1 if it is not one. */
static long
ngxc_count(const char *s, long max)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v < 0 || v > max)
		return -1;
	return v;
}

int
main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "capture") == 0)
		return ngxc_capture(argv[2], argv[3]);
	if ((argc == 5 || argc == 6) && strcmp(argv[1], "run") == 0) {
		char *end, *pend = NULL;
		long n = strtol(argv[4], &end, 10);
		long pid = argc == 6 ? strtol(argv[5], &pend, 10) : 0;

		if (*argv[4] != '\0' && *end == '\0' && n >= 0 &&
		    (pend == NULL || (*argv[5] != '\0' && *pend == '\0' && pid > 0)))
			return ngxc_run(argv[2], argv[3], n, (pid_t)pid);
	}
	if ((argc == 5 || argc == 6) && strcmp(argv[1], "lat") == 0) {
		long n = ngxc_count(argv[4], 100000000);
		long warm = argc == 6 ? ngxc_count(argv[5], 100000000) : 0;

		if (n > 0 && warm >= 0)
			return ngxc_lat(argv[2], argv[3], n, warm);
	}
	fprintf(stderr, "usage: bench-ngxclient capture PORT OUT\n"
			"       bench-ngxclient run PORT HEADFILE N [PID]\n"
			"       bench-ngxclient lat PORT HEADFILE N [WARM]\n");
	return 2;
}
