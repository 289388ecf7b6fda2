/* SPDX-License-Identifier: Apache-2.0 */
/* A cleartext HTTP/2 client (prior knowledge) that builds its frames
 * itself and decides what goes into each write, for the tests of the
 * socket level's HTTP/2 following (preload/conn.c, "HTTP/2"): several
 * requests in one read, frames split across reads.  Header blocks are
 * HPACK-encoded with libnghttp2's deflater (one per connection, so later
 * blocks refer to its dynamic table, as a real client's do).
 *
 *   h2-frames PORT [tls]
 *
 * Connects to 127.0.0.1:PORT (with "tls": over TLS with GnuTLS, ALPN h2,
 * the certificate not checked; each write is one TLS record, so each
 * piece of WRITE is one record, and one read of the server's TLS
 * library), prints "READY <local port>", then runs the commands read on
 * stdin, one per line:
 *
 *   PREFACE              append the client preface and an empty SETTINGS
 *   HEADERS ID PATH TP   append a GET request's HEADERS frame for stream
 *                        ID (END_HEADERS | END_STREAM); TP: its
 *                        traceparent value, "-" for none
 *   RST ID               append a RST_STREAM frame (CANCEL) for stream ID
 *   PING                 append a PING frame
 *   WRITE N1,N2,...      write what was appended in pieces of N1, N2, ...
 *                        bytes (the rest as the last piece; "0": all at
 *                        once), each only once the server has read the
 *                        one before (its socket's receive queue, in
 *                        /proc/net/tcp, is empty), so that each piece is
 *                        one read of the server's; prints "WROTE"
 *   WAIT ID...           read frames until each stream ID has ended
 *                        (END_STREAM), ACKing the server's SETTINGS;
 *                        prints "RESP ID..."
 *
 * Exits 0 at the end of stdin, 1 on any error (with a message on
 * stderr). */
#include "config.h"

#include "h2-build.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>
#ifdef H2F_TLS
#include <gnutls/gnutls.h>
#else
/* Built without GnuTLS: "tls" fails. */
typedef void *gnutls_session_t;
#define gnutls_record_send(s, p, n) (-1)
#define gnutls_record_recv(s, p, n) (-1)
#define GNUTLS_E_INTERRUPTED        (-52)
#define GNUTLS_E_AGAIN              (-28)
#endif

static int fd = -1;
static unsigned server_port, local_port;
static nghttp2_hd_deflater *deflater;
static gnutls_session_t tls; /* NULL: in clear */
static uint8_t out[65536];
static size_t out_len;

static void
die(const char *what)
{
	fprintf(stderr, "h2-frames: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void
append(const void *p, size_t n)
{
	if (n > sizeof(out) - out_len) {
		errno = ENOBUFS;
		die("append");
	}
	memcpy(out + out_len, p, n);
	out_len += n;
}

static void
headers(uint32_t id, const char *path, const char *tp)
{
	nghttp2_nv nv[5];
	uint8_t block[4096], h[9];
	size_t n = 0;
	ssize_t len;

#define NV(k, v)                                                                     \
	nv[n++] = (nghttp2_nv){(uint8_t *)(k), (uint8_t *)(v), strlen(k), strlen(v), \
			       NGHTTP2_NV_FLAG_NONE}
	NV(":method", "GET");
	NV(":scheme", "http");
	NV(":authority", "localhost");
	NV(":path", path);
	if (strcmp(tp, "-") != 0)
		NV("traceparent", tp);
#undef NV
	len = nghttp2_hd_deflate_hd(deflater, block, sizeof(block), nv, n);
	if (len < 0) {
		errno = EINVAL;
		die("nghttp2_hd_deflate_hd");
	}
	(void)h2_frame(h, (size_t)len, 0x1 /* HEADERS */, 0x4 | 0x1, id);
	append(h, sizeof(h));
	append(block, (size_t)len);
}

/* The server's side of the connection has no unread bytes. */
static bool
server_drained(void)
{
	char line[512], want_l[32], want_r[32];
	FILE *f = fopen("/proc/net/tcp", "re");
	bool found = false, empty = false;

	if (!f)
		die("/proc/net/tcp");
	snprintf(want_l, sizeof(want_l), "0100007F:%04X", server_port);
	snprintf(want_r, sizeof(want_r), "0100007F:%04X", local_port);
	while (fgets(line, sizeof(line), f)) {
		char l[32], r[32];
		unsigned long tx, rx;

		if (sscanf(line, "%*s %31s %31s %*s %lx:%lx", l, r, &tx, &rx) != 4)
			continue;
		if (strcmp(l, want_l) == 0 && strcmp(r, want_r) == 0) {
			found = true;
			empty = rx == 0;
		}
	}
	fclose(f);
	if (!found) {
		errno = ENOENT;
		die("the server's socket is not in /proc/net/tcp");
	}
	return empty;
}

static void
write_all(const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = tls ? gnutls_record_send(tls, p, n) : write(fd, p, n);

		if ((w < 0 && errno == EINTR && !tls) ||
		    (tls && (w == GNUTLS_E_INTERRUPTED || w == GNUTLS_E_AGAIN)))
			continue;
		if (w <= 0)
			die("write");
		p += w;
		n -= (size_t)w;
	}
}

/* The TLS session on fd, for "tls". */
static void
tls_start(void)
{
#ifndef H2F_TLS
	errno = ENOTSUP;
	die("tls (built without GnuTLS)");
#else
	static const gnutls_datum_t h2 = {(unsigned char *)"h2", 2};
	gnutls_certificate_credentials_t cred;
	gnutls_datum_t got;
	int r;

	if (gnutls_certificate_allocate_credentials(&cred) < 0 ||
	    gnutls_init(&tls, GNUTLS_CLIENT) < 0 ||
	    gnutls_set_default_priority(tls) < 0 ||
	    gnutls_credentials_set(tls, GNUTLS_CRD_CERTIFICATE, cred) < 0 ||
	    gnutls_alpn_set_protocols(tls, &h2, 1, 0) < 0) {
		errno = EPROTO;
		die("gnutls setup");
	}
	gnutls_transport_set_int(tls, fd);
	do
		r = gnutls_handshake(tls);
	while (r < 0 && !gnutls_error_is_fatal(r));
	if (r < 0 || gnutls_alpn_get_selected_protocol(tls, &got) < 0 ||
	    got.size != 2 || memcmp(got.data, "h2", 2) != 0) {
		fprintf(stderr, "h2-frames: TLS handshake: %s\n",
			r < 0 ? gnutls_strerror(r) : "no ALPN h2");
		exit(1);
	}
#endif
}

static void
write_pieces(char *spec)
{
	size_t off = 0;
	char *tok, *save = NULL;

	for (tok = strtok_r(spec, ",", &save); off < out_len;
	     tok = strtok_r(NULL, ",", &save)) {
		size_t n = tok ? strtoul(tok, NULL, 10) : 0;
		unsigned waited = 0;

		if (n == 0 || n > out_len - off)
			n = out_len - off;
		write_all(out + off, n);
		off += n;
		/* The next piece only once this one was read: a poll loop on
		 * the server's receive queue, at most 20 s. */
		while (!server_drained()) {
			struct timespec ts = {0, 1000000};

			if (++waited > 20000) {
				errno = ETIMEDOUT;
				die("the server does not read");
			}
			nanosleep(&ts, NULL);
		}
	}
	out_len = 0;
}

static void
read_full(uint8_t *p, size_t n)
{
	while (n) {
		ssize_t r = tls ? gnutls_record_recv(tls, p, n) : read(fd, p, n);

		if ((r < 0 && errno == EINTR && !tls) ||
		    (tls && (r == GNUTLS_E_INTERRUPTED || r == GNUTLS_E_AGAIN)))
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = ECONNRESET;
			die("read");
		}
		p += r;
		n -= (size_t)r;
	}
}

static void
wait_streams(char *list)
{
	uint32_t ids[16];
	bool done[16] = {false};
	unsigned n = 0, left, i;
	char *tok, *save = NULL;

	for (tok = strtok_r(list, " ", &save); tok && n < 16;
	     tok = strtok_r(NULL, " ", &save))
		ids[n++] = (uint32_t)strtoul(tok, NULL, 10);
	left = n;
	while (left) {
		uint8_t h[9], *pay;
		size_t len;
		uint32_t id;

		read_full(h, sizeof(h));
		len = (size_t)h[0] << 16 | (size_t)h[1] << 8 | h[2];
		id = ((uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 |
		      (uint32_t)h[7] << 8 | h[8]) &
		     0x7fffffffu;
		pay = malloc(len ? len : 1);
		if (!pay)
			die("malloc");
		read_full(pay, len);
		free(pay);
		if (h[3] == 0x4 /* SETTINGS */ && !(h[4] & 0x1)) {
			uint8_t ack[9];

			write_all(ack, h2_settings_ack(ack));
		}
		if (h[3] == 0x7 /* GOAWAY */) {
			errno = ECONNRESET;
			die("GOAWAY");
		}
		if ((h[3] == 0x0 || h[3] == 0x1) && (h[4] & 0x1))
			for (i = 0; i < n; i++)
				if (ids[i] == id && !done[i]) {
					done[i] = true;
					left--;
				}
	}
}

int
main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);
	char line[1024];
	int one = 1;

	if (argc != 2 && (argc != 3 || strcmp(argv[2], "tls") != 0)) {
		fprintf(stderr, "usage: h2-frames PORT [tls]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	server_port = (unsigned)strtoul(argv[1], NULL, 10);
	if (nghttp2_hd_deflate_new(&deflater, 4096) != 0)
		die("nghttp2_hd_deflate_new");
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket");
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	a.sin_port = htons((uint16_t)server_port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
		die("connect");
	if (getsockname(fd, (struct sockaddr *)&a, &al) != 0)
		die("getsockname");
	local_port = ntohs(a.sin_port);
	if (argc == 3)
		tls_start();
	printf("READY %u\n", local_port);
	while (fgets(line, sizeof(line), stdin)) {
		char path[512], tp[256];
		unsigned id;

		line[strcspn(line, "\n")] = '\0';
		if (strcmp(line, "PREFACE") == 0) {
			uint8_t h[64];

			append(h, h2_preface(h));
		} else if (sscanf(line, "HEADERS %u %511s %255s", &id, path, tp) == 3) {
			headers(id, path, tp);
		} else if (sscanf(line, "RST %u", &id) == 1) {
			uint8_t h[13] = {0};

			(void)h2_frame(h, 4, 0x3 /* RST_STREAM */, 0, id);
			h[12] = 0x8; /* CANCEL */
			append(h, sizeof(h));
		} else if (strcmp(line, "PING") == 0) {
			uint8_t h[17] = {0};

			(void)h2_frame(h, 8, 0x6 /* PING */, 0, 0);
			append(h, sizeof(h));
		} else if (strncmp(line, "WRITE ", 6) == 0) {
			write_pieces(line + 6);
			printf("WROTE\n");
		} else if (strncmp(line, "WAIT ", 5) == 0) {
			char ids[sizeof(line)];

			snprintf(ids, sizeof(ids), "%s", line + 5);
			wait_streams(line + 5);
			printf("RESP %s\n", ids);
		} else {
			fprintf(stderr, "h2-frames: unknown command: %s\n", line);
			return 1;
		}
	}
	nghttp2_hd_deflate_del(deflater);
	close(fd);
	return 0;
}
