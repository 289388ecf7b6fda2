/* SPDX-License-Identifier: Apache-2.0 */
/* curl-stale: a handle freed where the shim cannot see it, then a
 * curl_easy_duphandle() copy made at its address.  The program takes
 * curl_easy_cleanup() from dlsym(RTLD_DEFAULT), which finds libcurl's
 * default version and so never reaches the shim's (versioned) hook, as
 * happens in programs that resolve libcurl at run time.  The freed handle
 * had a CURLOPT_HTTPHEADER list, which the program frees too; the copy
 * must not be taken for the freed handle (hooks/hook-curl.c used to keep
 * its entry and walk the freed list at the copy's curl_easy_perform()).
 *
 *   curl-stale URL
 *
 * Prints the copy's curl_easy_perform() result (stderr says whether the
 * copy got the freed handle's address).  No tracing code. */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

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
	void (*cleanup)(CURL *) =
		(void (*)(CURL *))dlsym(RTLD_DEFAULT, "curl_easy_cleanup");
	struct curl_slist *list = NULL, *other = NULL;
	char line[200];
	CURL *a, *src, *copy;

	if (argc != 2 || !cleanup)
		return 2;
	memset(line, 'a', sizeof(line) - 1);
	line[sizeof(line) - 1] = '\0';
	memcpy(line, "X-Old: ", 7);
	list = curl_slist_append(list, line);
	a = curl_easy_init();
	src = curl_easy_init();
	if (!list || !a || !src)
		return 2;
	(void)curl_easy_setopt(a, CURLOPT_URL, argv[1]);
	(void)curl_easy_setopt(a, CURLOPT_HTTPHEADER, list);
	cleanup(a);
	curl_slist_free_all(list);
	other = curl_slist_append(NULL, "X-Other: 1");
	copy = curl_easy_duphandle(src);
	if (!copy)
		return 2;
	fprintf(stderr, "copy at the freed handle's address: %s\n",
		copy == a ? "yes" : "no");
	(void)curl_easy_setopt(copy, CURLOPT_URL, argv[1]);
	(void)curl_easy_setopt(copy, CURLOPT_WRITEFUNCTION, discard);
	printf("perform %d\n", (int)curl_easy_perform(copy));
	cleanup(copy);
	cleanup(src);
	curl_slist_free_all(other);
	return 0;
}
