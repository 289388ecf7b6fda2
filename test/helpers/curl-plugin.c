/* SPDX-License-Identifier: Apache-2.0 */
/* A plugin linked against another libcurl flavour than the program that
 * loads it (curl-client -P): both flavours are then in one process, and
 * each must get its own calls.  No tracing code. */
#include "config.h"

#include <stdio.h>

#include <curl/curl.h>

int plugin_fetch(const char *url);

static size_t
on_body(char *buf, size_t size, size_t n, void *arg)
{
	(void)buf;
	(void)arg;
	return size * n;
}

__attribute__((visibility("default"))) int
plugin_fetch(const char *url)
{
	CURL *easy = curl_easy_init();
	struct curl_slist *h = curl_slist_append(NULL, "X-Plugin: 1");
	CURLcode rc;

	printf("PLUGIN VERSION %s\n", curl_version());
	curl_easy_setopt(easy, CURLOPT_URL, url);
	curl_easy_setopt(easy, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(easy, CURLOPT_TIMEOUT, 30L);
	rc = curl_easy_perform(easy);
	printf("PLUGIN DONE %d\n", (int)rc);
	curl_easy_cleanup(easy);
	curl_slist_free_all(h);
	return rc == CURLE_OK ? 0 : 1;
}
