/* SPDX-License-Identifier: Apache-2.0 */
/* curl-oom: a libcurl program whose allocator fails for the length of one
 * curl_easy_setopt(CURLOPT_HTTPHEADER) on a new handle, as under memory
 * pressure or a cgroup limit (fail-alloc.h).  No tracing code.
 *
 * Prints the results; the test runs it with and without the shim and
 * compares (hooks/hook-curl.c must then leave that handle untraced, never
 * exit). */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <curl/curl.h>

#include "fail-alloc.h"

int
main(void)
{
	struct curl_slist *l = curl_slist_append(NULL, "X-A: 1");
	CURL *h = curl_easy_init(), *d;
	CURLcode rc;

	if (!h || !l)
		return 2;
	fail_now = 1;
	rc = curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
	fail_now = 0;
	printf("setopt under ENOMEM: %d\n", (int)rc);
	rc = curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
	printf("setopt after: %d\n", (int)rc);
	d = curl_easy_duphandle(h);
	printf("duphandle: %s\n", d ? "ok" : "NULL");
	rc = curl_easy_setopt(d, CURLOPT_HTTPHEADER, NULL);
	printf("setopt on the copy: %d\n", (int)rc);
	curl_easy_cleanup(d);
	curl_easy_cleanup(h);
	curl_slist_free_all(l);
	printf("DONE\n");
	return 0;
}
