/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

/* Driver for instruction counts of the request-head scanner (target B4:
 * <= 4 instructions per head byte).  Feeds `iterations` copies of one
 * request profile through one connection's scanner, in reads of `chunk`
 * bytes (0 = the whole request in one read), and checks that every head
 * was found and captured.  Run it under
 *   valgrind --tool=callgrind --toggle-collect=http_scan_feed
 * (bench/http-scan-insns.sh does) so that only the scanner, with the
 * memchr/memcpy it calls, is counted.
 *
 * CHUNK "whole" is the shim's usual read instead: each head alone in one
 * read, taken by http_scan_whole() (which the shim's read hook inlines)
 * from a fresh scanner at a message start; a body follows through
 * http_scan_feed() as a later read would (a check that the scanner was
 * left in the body, not counted under
 *   --toggle-collect=http_scan_whole).
 *
 *   http-scan-bench PROFILE ITERATIONS [CHUNK|whole]
 *   PROFILE: curl | browser | minimal | post */

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http-scan.h"

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static const char curl_req[] = "GET /api/v1/items?id=42 HTTP/1.1\r\n"
			       "Host: service.internal:8080\r\n"
			       "User-Agent: curl/7.88.1\r\n"
			       "Accept: */*\r\n"
			       "traceparent: " TP "\r\n"
			       "\r\n";

static const char browser_req[] =
	"GET /static/app/main.3f9a1c.js?v=20240101 HTTP/1.1\r\n"
	"Host: www.example.com\r\n"
	"Connection: keep-alive\r\n"
	"sec-ch-ua: \"Chromium\";v=\"124\", \"Google Chrome\";v=\"124\", "
	"\"Not-A.Brand\";v=\"99\"\r\n"
	"sec-ch-ua-mobile: ?0\r\n"
	"User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like "
	"Gecko) "
	"Chrome/124.0.0.0 Safari/537.36\r\n"
	"sec-ch-ua-platform: \"Linux\"\r\n"
	"Accept: */*\r\n"
	"Sec-Fetch-Site: same-origin\r\n"
	"Sec-Fetch-Mode: no-cors\r\n"
	"Sec-Fetch-Dest: script\r\n"
	"Referer: https://www.example.com/dashboard\r\n"
	"Accept-Encoding: gzip, deflate, br, zstd\r\n"
	"Accept-Language: en-US,en;q=0.9,de;q=0.8\r\n"
	"Cookie: session=8f2b6c1e9d0a4b7c; theme=dark; "
	"_ga=GA1.2.1234567890.1700000000\r\n"
	"traceparent: " TP "\r\n"
	"tracestate: rojo=00f067aa0ba902b7,congo=t61rcWkgMzE\r\n"
	"X-Request-ID: 9b2d5f0e-3c41-4a8e-b7f6-12ab34cd56ef\r\n"
	"\r\n";

static const char minimal_req[] = "GET / HTTP/1.1\r\n"
				  "Host: a\r\n"
				  "traceparent: " TP "\r\n"
				  "\r\n";

/* Content-Length is the body's length (a body 2 bytes short once made the
 * next request's "PO" body bytes and its method "ST"). */
#define POST_BODY \
	"{\"resourceSpans\":[{\"resource\":{},\"scopeSpans\":[]}],\"x\":\"pad000\"}"
_Static_assert(sizeof(POST_BODY) - 1 == 64, "post body is Content-Length bytes");

static const char post_req[] = "POST /v1/traces HTTP/1.1\r\n"
			       "Host: collector:4318\r\n"
			       "Content-Type: application/json\r\n"
			       "Content-Length: 64\r\n"
			       "traceparent: " TP "\r\n"
			       "\r\n" POST_BODY;

int
main(int argc, char **argv)
{
	static const struct {
		const char *name, *req;
		size_t head; /* bytes of the head (the rest is body) */
	} profiles[] = {
		{"curl", curl_req, sizeof(curl_req) - 1},
		{"browser", browser_req, sizeof(browser_req) - 1},
		{"minimal", minimal_req, sizeof(minimal_req) - 1},
		{"post", post_req, sizeof(post_req) - sizeof(POST_BODY)},
	};
	struct http_scan_config cfg;
	struct http_scan_capture *cap;
	struct http_scan st = {0};
	const char *req = NULL;
	size_t len, head = 0, chunk, heads = 0, i;
	unsigned long iterations;
	bool whole;

	if (argc < 3) {
		fprintf(stderr,
			"usage: %s curl|browser|minimal|post ITERATIONS [CHUNK]\n",
			argv[0]);
		return 2;
	}
	for (i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++)
		if (strcmp(argv[1], profiles[i].name) == 0) {
			req = profiles[i].req;
			head = profiles[i].head;
		}
	if (!req) {
		fprintf(stderr, "unknown profile %s\n", argv[1]);
		return 2;
	}
	iterations = strtoul(argv[2], NULL, 10);
	whole = argc > 3 && strcmp(argv[3], "whole") == 0;
	chunk = argc > 3 && !whole ? strtoul(argv[3], NULL, 10) : 0;
	len = strlen(req);
	if (!chunk || chunk > len)
		chunk = len;

	http_scan_config_init(&cfg);
	if (http_scan_config_add_header(&cfg, "x-request-id", 12, NULL) < 0)
		return 1;
	cap = calloc(1, sizeof(*cap));
	if (!cap)
		return 1;

	for (unsigned long it = 0; whole && it < iterations; it++) {
		struct http_scan_head h;
		size_t used;

		memset(&st, 0, sizeof(st));
		if (http_scan_whole(&st, &cfg, req, head, &h) != 0 ||
		    !(h.flags & HTTP_SCAN_F_CAPTURED) || h.traceparent_len != 55)
			return 1;
		heads++;
		if (len > head &&
		    (http_scan_feed(&st, &cfg, cap, req + head, len - head, &used) !=
			     HTTP_SCAN_MORE ||
		     used != len - head))
			return 1;
		if (!http_scan_at_start(&st))
			return 1;
	}
	for (unsigned long it = 0; !whole && it < iterations; it++) {
		for (size_t pos = 0; pos < len; pos += chunk) {
			size_t n = len - pos < chunk ? len - pos : chunk, off = 0;

			while (off < n) {
				size_t used;
				enum http_scan_status r =
					http_scan_feed(&st, &cfg, cap, req + pos + off,
						       n - off, &used);

				off += used;
				if (r == HTTP_SCAN_GAVE_UP)
					return 1;
				if (r == HTTP_SCAN_HEAD) {
					/* where the profile says the head ends */
					if (pos + off != head ||
					    !(http_scan_flags(&st) &
					      HTTP_SCAN_F_CAPTURED) ||
					    cap->traceparent_len != 55)
						return 1;
					heads++;
				}
			}
		}
		/* the whole request, body included, is over */
		if (!http_scan_at_start(&st))
			return 1;
	}
	if (heads != iterations) {
		fprintf(stderr, "found %zu heads, want %lu\n", heads, iterations);
		return 1;
	}
	if (whole)
		printf("profile=%s head_bytes=%zu request_bytes=%zu chunk=whole "
		       "iterations=%lu\n",
		       argv[1], head, len, iterations);
	else
		printf("profile=%s head_bytes=%zu request_bytes=%zu chunk=%zu "
		       "iterations=%lu\n",
		       argv[1], head, len, chunk, iterations);
	free(cap);
	return 0;
}
