/* SPDX-License-Identifier: Apache-2.0 */
/* libcurlearly.so, for curl-early: a library that prepares a libcurl
 * handle with the application's default headers in its constructor (an
 * SDK client made at static initialisation), which runs before the
 * preloaded shim's (see h2-early-lib.c).  No tracing code. */
#include "config.h"

#include "curl-early.h"

CURL *curl_early_handle;

__attribute__((constructor)) static void
curl_early_init(void)
{
	struct curl_slist *l = NULL;

	l = curl_slist_append(l, "Authorization: Bearer early");
	l = curl_slist_append(l, "X-Early: 1");
	curl_early_handle = curl_easy_init();
	if (l && curl_early_handle)
		(void)curl_easy_setopt(curl_early_handle, CURLOPT_HTTPHEADER, l);
}
