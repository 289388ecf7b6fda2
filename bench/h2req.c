/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP/2 requests with browser-like header blocks, to count what the
 * socket level's HTTP/2 following costs per request (proc-context/
 * h2-scan.h, preload/conn.c "HTTP/2"; bench/h2-insns.sh).
 *
 *   bench-h2req scan N       feed the client's bytes of one connection
 *                            with N requests to the scanner alone
 *                            (h2_scan_feed_cb(), the shim's configuration:
 *                            :method, :path, traceparent, tracestate):
 *                            the preface, SETTINGS, WINDOW_UPDATE and the
 *                            first request in h2req_first(), each later
 *                            request (one read each) in h2req_later()
 *   bench-h2req run PORT N [PID]
 *                            the same bytes to an h2c server (prior
 *                            knowledge) on 127.0.0.1:PORT, one request
 *                            at a time (the next once the previous
 *                            stream ended, every response a 200), the
 *                            SETTINGS ACK with the second request; then
 *                            SIGTERM to PID (as
 *                            bench-ngxclient run) and close; prints
 *                            "requests=N"
 *
 * The header blocks are HPACK-encoded by libnghttp2's deflater (Huffman
 * where shorter, its indexing choices: the dynamic table of one
 * connection, so that later blocks refer to the first one's entries, as a
 * browser's do): the 19 fields of a Chrome navigation (sec-ch-ua...,
 * user-agent, accept, accept-encoding, accept-language, a cookie) and a
 * traceparent, with a new :path and traceparent per request.  Every
 * request is a HEADERS frame with END_STREAM and a priority field, as
 * Chrome sends them.  The bytes are the same in both modes and every run.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "h2-build.h"
#include "h2-scan.h"

#define H2R_BLOCK 4096

static nghttp2_hd_deflater *deflater;

/* The connection's opening, as Chrome sends it: the preface, SETTINGS
 * (header table 65536, initial window 6 MiB, max header list 256 KiB)
 * and a connection WINDOW_UPDATE (so that responses never wait for
 * one). */
static size_t
opening(uint8_t *p)
{
	static const uint8_t settings[] = {0, 1, 0, 1,    0, 0,  /* HEADER_TABLE_SIZE */
					   0, 4, 0, 0x60, 0, 0,  /* INITIAL_WINDOW */
					   0, 6, 0, 4,    0, 0}; /* MAX_HEADER_LIST */
	size_t n = 0;

	memcpy(p, H2_PREFACE, H2_PREFACE_LEN);
	n += H2_PREFACE_LEN;
	n += h2_frame(p + n, sizeof(settings), 0x4, 0, 0);
	memcpy(p + n, settings, sizeof(settings));
	n += sizeof(settings);
	n += h2_frame(p + n, 4, 0x8, 0, 0);
	p[n++] = 0x00;
	p[n++] = 0xef;
	p[n++] = 0x00;
	p[n++] = 0x01;
	return n;
}

#define NV(n_, v_)                                                                \
	{                                                                         \
		(uint8_t *)(n_), (uint8_t *)(v_), sizeof(n_) - 1, sizeof(v_) - 1, \
			NGHTTP2_NV_FLAG_NONE                                      \
	}

/* Request i's HEADERS frame (stream 2i + 1) into p. */
static size_t
request(uint8_t *p, size_t cap, unsigned i, const char *authority)
{
	char path[64], tp[64];
	nghttp2_nv nv[] = {
		NV(":method", "GET"),
		NV(":authority", ""),
		NV(":scheme", "http"),
		NV(":path", ""),
		NV("sec-ch-ua", "\"Google Chrome\";v=\"131\", \"Chromium\";v=\"131\", "
				"\"Not_A Brand\";v=\"24\""),
		NV("sec-ch-ua-mobile", "?0"),
		NV("sec-ch-ua-platform", "\"Linux\""),
		NV("upgrade-insecure-requests", "1"),
		NV("user-agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 "
				 "(KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"),
		NV("accept", "text/html,application/xhtml+xml,application/xml;q=0.9,"
			     "image/avif,image/webp,image/apng,*/*;q=0.8,"
			     "application/signed-exchange;v=b3;q=0.7"),
		NV("sec-fetch-site", "same-origin"),
		NV("sec-fetch-mode", "navigate"),
		NV("sec-fetch-user", "?1"),
		NV("sec-fetch-dest", "document"),
		NV("referer", "http://127.0.0.1/"),
		NV("accept-encoding", "gzip, deflate, br, zstd"),
		NV("accept-language", "en-US,en;q=0.9,de;q=0.8"),
		NV("cookie", "_ga=GA1.1.1234567890.1733270000; "
			     "session=3f9a8b7c6d5e4f30a1b2c3d4e5f60718; theme=dark"),
		NV("priority", "u=0, i"),
		NV("traceparent", ""),
	};
	size_t nnv = sizeof(nv) / sizeof(nv[0]), n;
	uint32_t id = 2 * i + 1;
	ssize_t r;

	snprintf(path, sizeof(path), "/small.html?page=%u", i);
	/* A new trace per request, as a browser's instrumentation starts. */
	snprintf(tp, sizeof(tp), "00-%016x%016x-%016x-01", 0x4bf92f35u + i,
		 0x77b34da6u ^ (i * 2654435761u), 0x00f067aau + i * 7u);
	nv[1].value = (uint8_t *)authority;
	nv[1].valuelen = strlen(authority);
	nv[3].value = (uint8_t *)path;
	nv[3].valuelen = strlen(path);
	nv[nnv - 1].value = (uint8_t *)tp;
	nv[nnv - 1].valuelen = strlen(tp);
	/* 9-byte frame header, 5-byte priority field (Chrome: exclusive on
	 * stream 0, weight 256), then the block. */
	r = nghttp2_hd_deflate_hd(deflater, p + 14, cap - 14, nv, nnv);
	if (r < 0) {
		fprintf(stderr, "bench-h2req: deflate: %s\n", nghttp2_strerror((int)r));
		exit(1);
	}
	n = h2_frame(p, (size_t)r + 5, 0x1, 0x25, id);
	p[n++] = 0x80;
	p[n++] = 0;
	p[n++] = 0;
	p[n++] = 0;
	p[n++] = 0xff;
	return n + (size_t)r;
}

static void
deflater_new(void)
{
	if (nghttp2_hd_deflate_new(&deflater, 4096) != 0) {
		fprintf(stderr, "bench-h2req: nghttp2_hd_deflate_new failed\n");
		exit(1);
	}
}

/* ---- scan ---------------------------------------------------------------- */

static struct h2_scan_config cfg;
static struct h2_scan st;
static unsigned fields, requests;

static bool
scan_report(void *arg, const struct h2_scan *s, enum h2_scan_status r, size_t at)
{
	struct h2_scan_field f;

	(void)arg;
	(void)at;
	if (r == H2_SCAN_FIELD) {
		h2_scan_field(s, &f);
		fields++;
	} else {
		requests++;
	}
	return true;
}

/* All of buf through the scanner, as conn.c feeds it. */
static void
scan(const uint8_t *buf, size_t len)
{
	size_t off = 0, n;
	unsigned idle = 0;

	while (idle < 2 * H2_SCAN_KEEP_MAX + 4) {
		enum h2_scan_status r = h2_scan_feed_cb(&st, &cfg, buf + off, len - off,
							&n, scan_report, NULL);

		off += n;
		idle = n ? 0 : idle + 1;
		if (r == H2_SCAN_FIELD || r == H2_SCAN_REQUEST) {
			(void)scan_report(NULL, &st, r, off);
		} else if (r == H2_SCAN_GAVE_UP) {
			fprintf(stderr, "bench-h2req: the scanner gave up\n");
			exit(1);
		} else if (off >= len) {
			break;
		}
	}
}

/* Toggles for callgrind (--toggle-collect, or callgrind_annotate
 * --inclusive=yes). */
void h2req_first(const uint8_t *buf, size_t len);
void h2req_later(const uint8_t *buf, size_t len);
__attribute__((noinline)) void
h2req_first(const uint8_t *buf, size_t len)
{
	scan(buf, len);
}

__attribute__((noinline)) void
h2req_later(const uint8_t *buf, size_t len)
{
	scan(buf, len);
}

static int
do_scan(unsigned n)
{
	static const char *const names[] = {":method", ":path", "traceparent",
					    "tracestate"};
	static uint8_t buf[H2R_BLOCK * 2];
	unsigned i;
	size_t len, first, later = 0;

	for (i = 0; i < 4; i++)
		(void)h2_scan_config_add(&cfg, names[i]);
	h2_scan_reset(&st, 0);
	deflater_new();
	len = opening(buf);
	len += request(buf + len, sizeof(buf) - len, 0, "127.0.0.1:18443");
	h2req_first(buf, len);
	first = len;
	for (i = 1; i < n; i++) {
		len = request(buf, sizeof(buf), i, "127.0.0.1:18443");
		later += len;
		h2req_later(buf, len);
	}
	printf("requests=%u fields=%u bytes_first=%zu bytes_later=%.1f\n", requests,
	       fields, first, n > 1 ? (double)later / (n - 1) : 0.0);
	return requests == n && fields == 3 * n ? 0 : 1;
}

/* ---- run ----------------------------------------------------------------- */

static int fd = -1;
static uint8_t in[65536];
static size_t in_len;

static void
write_all(const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			perror("bench-h2req: write");
			exit(1);
		}
		p += w;
		n -= (size_t)w;
	}
}

static nghttp2_hd_inflater *inflater;

/* A response HEADERS frame's block (END_HEADERS: nginx sends no
 * CONTINUATION for these): through the inflater, which must see every
 * block; mine: the request's, whose :status must be 200. */
static void
status(const uint8_t *p, uint32_t len, uint8_t flags, bool mine)
{
	bool ok = false;

	if (!(flags & 0x4) || (flags & 0x28)) {
		fprintf(stderr, "bench-h2req: a response HEADERS frame not handled\n");
		exit(1);
	}
	while (len) {
		nghttp2_nv nv;
		int fl = 0;
		ssize_t r = nghttp2_hd_inflate_hd2(inflater, &nv, &fl, p, len, 1);

		if (r < 0) {
			fprintf(stderr, "bench-h2req: inflate: %s\n",
				nghttp2_strerror((int)r));
			exit(1);
		}
		p += r;
		len -= (uint32_t)r;
		if ((fl & NGHTTP2_HD_INFLATE_EMIT) && nv.namelen == 7 &&
		    memcmp(nv.name, ":status", 7) == 0)
			ok = nv.valuelen == 3 && memcmp(nv.value, "200", 3) == 0;
		if ((fl & NGHTTP2_HD_INFLATE_FINAL) ||
		    (!r && !(fl & NGHTTP2_HD_INFLATE_EMIT)))
			break;
	}
	nghttp2_hd_inflate_end_headers(inflater);
	if (mine && !ok) {
		fprintf(stderr, "bench-h2req: a response other than 200\n");
		exit(1);
	}
}

/* Read frames until stream id ends; *ack: the server sent its SETTINGS
 * (to be acknowledged). */
static void
wait_stream(uint32_t id, bool *ack)
{
	for (;;) {
		while (in_len >= 9) {
			uint32_t len =
				(uint32_t)in[0] << 16 | (uint32_t)in[1] << 8 | in[2];
			uint8_t type = in[3], flags = in[4];
			uint32_t sid = ((uint32_t)in[5] << 24 | (uint32_t)in[6] << 16 |
					(uint32_t)in[7] << 8 | in[8]) &
				       0x7fffffffu;
			bool end;

			if (in_len < 9 + len)
				break;
			if (type == 0x4 && !(flags & 1))
				*ack = true;
			if (type == 0x7 || (type == 0x3 && sid == id)) {
				fprintf(stderr, "bench-h2req: GOAWAY or RST_STREAM\n");
				exit(1);
			}
			if (type == 0x1)
				status(in + 9, len, flags, sid == id);
			end = sid == id && (type == 0x0 || type == 0x1) && (flags & 1);
			memmove(in, in + 9 + len, in_len - 9 - len);
			in_len -= 9 + len;
			if (end)
				return;
		}
		ssize_t r = read(fd, in + in_len, sizeof(in) - in_len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			fprintf(stderr, "bench-h2req: read: %s\n",
				r ? strerror(errno) : "connection closed");
			exit(1);
		}
		in_len += (size_t)r;
	}
}

static int
do_run(const char *port, unsigned n, const char *pid)
{
	static uint8_t buf[H2R_BLOCK * 2];
	struct sockaddr_in sa = {.sin_family = AF_INET};
	char authority[32];
	int one = 1;
	bool ack = false, acked = false;
	unsigned i;
	size_t len;

	sa.sin_port = htons((uint16_t)atoi(port));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		perror("bench-h2req: connect");
		return 1;
	}
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	snprintf(authority, sizeof(authority), "127.0.0.1:%s", port);
	deflater_new();
	if (nghttp2_hd_inflate_new(&inflater) != 0) {
		fprintf(stderr, "bench-h2req: nghttp2_hd_inflate_new failed\n");
		return 1;
	}
	for (i = 0; i < n; i++) {
		len = i ? 0 : opening(buf);
		if (ack && !acked) {
			len += h2_settings_ack(buf + len);
			acked = true;
		}
		len += request(buf + len, sizeof(buf) - len, i, authority);
		write_all(buf, len);
		wait_stream(2 * i + 1, &ack);
	}
	if (pid)
		(void)kill((pid_t)atoi(pid), SIGTERM);
	close(fd);
	printf("requests=%u\n", n);
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "scan") == 0)
		return do_scan((unsigned)atoi(argv[2]));
	if ((argc == 4 || argc == 5) && strcmp(argv[1], "run") == 0)
		return do_run(argv[2], (unsigned)atoi(argv[3]),
			      argc == 5 ? argv[4] : NULL);
	fprintf(stderr, "usage: bench-h2req scan N | run PORT N [PID]\n");
	return 2;
}
