/* SPDX-License-Identifier: Apache-2.0 */
/* curl-get: a libcurl program with no tracing code, for the end-to-end
 * checks of outgoing propagation over TLS and HTTP/2 (hooks/hook-curl.c
 * injects at libcurl level; hooks/hook-nghttp2.c must then leave
 * libcurl's own HTTP/2 requests alone).
 *
 *   curl-get [-k] [-2] [-n N] [-H LINE] URL
 *     -k      do not verify the server's certificate (tests' self-signed)
 *     -2      HTTP/2 with prior knowledge (h2c on http:// URLs)
 *     -n N    N transfers one after the other on the same handle
 *     -H LINE add LINE to CURLOPT_HTTPHEADER
 *
 * Prints "BODY <body>" per transfer and "DONE <failures>". */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

static size_t
on_body(char *buf, size_t size, size_t n, void *arg)
{
	(void)arg;
	printf("BODY %.*s", (int)(size * n), buf);
	return size * n;
}

int
main(int argc, char **argv)
{
	struct curl_slist *headers = NULL;
	bool insecure = false, h2 = false;
	int n = 1, failures = 0, c, i;
	CURL *easy;

	while ((c = getopt(argc, argv, "k2n:H:")) != -1) {
		switch (c) {
		case 'k':
			insecure = true;
			break;
		case '2':
			h2 = true;
			break;
		case 'n':
			n = atoi(optarg);
			break;
		case 'H':
			headers = curl_slist_append(headers, optarg);
			break;
		default:
			return 64;
		}
	}
	if (optind != argc - 1)
		return 64;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	easy = curl_easy_init();
	curl_easy_setopt(easy, CURLOPT_URL, argv[optind]);
	curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
	if (headers)
		curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
	if (insecure) {
		curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (h2)
		curl_easy_setopt(easy, CURLOPT_HTTP_VERSION,
				 (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
	for (i = 0; i < n; i++) {
		CURLcode rc = curl_easy_perform(easy);

		if (rc != CURLE_OK) {
			fprintf(stderr, "curl-get: %s\n", curl_easy_strerror(rc));
			failures++;
		}
	}
	fflush(stdout);
	printf("DONE %d\n", failures);
	curl_easy_cleanup(easy);
	curl_slist_free_all(headers);
	curl_global_cleanup();
	return failures ? 1 : 0;
}
