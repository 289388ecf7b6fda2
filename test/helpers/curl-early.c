/* SPDX-License-Identifier: Apache-2.0 */
/* curl-early: sends a request on the handle that a library's constructor
 * set up, header list included, before the shim's constructor ran
 * (curl-early-lib.c; main() only sets the URL), then one on a handle of
 * its own whose list main() sets.  The shim never saw the first list and
 * must not replace it with one of its own (test-preload-curl.c,
 * hooks/hook-curl.c).  No tracing code.
 *
 *   curl-early URL
 *
 * Prints both curl_easy_perform() results ("early N", "main N"). */
#include "config.h"

#include "curl-early.h"

#include <stdio.h>

static size_t
discard(char *p, size_t size, size_t n, void *ud)
{
	(void)p;
	(void)ud;
	return size * n;
}

int
main(int argc, char **argv)
{
	struct curl_slist *l = curl_slist_append(NULL, "X-App: main");
	CURL *h = curl_easy_init();

	if (argc != 2 || !curl_early_handle || !h || !l)
		return 2;
	(void)curl_easy_setopt(curl_early_handle, CURLOPT_URL, argv[1]);
	(void)curl_easy_setopt(curl_early_handle, CURLOPT_WRITEFUNCTION, discard);
	printf("early %d\n", (int)curl_easy_perform(curl_early_handle));
	(void)curl_easy_setopt(h, CURLOPT_URL, argv[1]);
	(void)curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
	(void)curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
	printf("main %d\n", (int)curl_easy_perform(h));
	curl_easy_cleanup(h);
	curl_easy_cleanup(curl_early_handle);
	curl_slist_free_all(l);
	return 0;
}
