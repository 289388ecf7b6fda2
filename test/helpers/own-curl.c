/* SPDX-License-Identifier: Apache-2.0 */
/* libown-curl.so: stand-ins for the libcurl functions the shim hooks, at
 * the symbol version of Debian's libcurl.so.4 (own-curl.map), as a
 * library that carries its own libcurl under another soname would have
 * them, called through its PLT (test-preload-plugins.c, run by
 * own-copy-host).  own_copy_main() prints what each call returned and
 * which stand-ins ran: the same with the shim as without it. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct own_curl CURL;
typedef struct own_curl CURLM;

CURL *curl_easy_init(void);
int curl_easy_setopt(CURL *easy, int opt, ...);
int curl_easy_perform(CURL *easy);
void curl_easy_cleanup(CURL *easy);
void curl_easy_reset(CURL *easy);
CURL *curl_easy_duphandle(CURL *easy);
int curl_multi_add_handle(CURLM *multi, CURL *easy);
int curl_multi_remove_handle(CURLM *multi, CURL *easy);
int curl_multi_cleanup(CURLM *multi);
int own_copy_main(void);
typedef CURL *(*own_init_fn)(void);
own_init_fn own_copy_pointer(void);
void own_copy_pointer_check(CURL *got);

struct own_curl {
	long timeout;
	const char *url;
};

static struct own_curl handle;
static unsigned ran;

#define RAN(bit) (ran |= 1u << (bit))

CURL *
curl_easy_init(void)
{
	RAN(0);
	return &handle;
}

/* curl.h: options below 10000 take a long, from 10000 a pointer. */
int
curl_easy_setopt(CURL *easy, int opt, ...)
{
	va_list ap;

	RAN(1);
	va_start(ap, opt);
	if (opt < 10000)
		easy->timeout = va_arg(ap, long);
	else
		easy->url = va_arg(ap, const char *);
	va_end(ap);
	return 0;
}

int
curl_easy_perform(CURL *easy)
{
	RAN(2);
	return easy->url && strcmp(easy->url, "http://own/") == 0 && easy->timeout == 7
		       ? 0
		       : 1;
}

void
curl_easy_cleanup(CURL *easy)
{
	(void)easy;
	RAN(3);
}

void
curl_easy_reset(CURL *easy)
{
	(void)easy;
	RAN(4);
}

CURL *
curl_easy_duphandle(CURL *easy)
{
	RAN(5);
	return easy;
}

int
curl_multi_add_handle(CURLM *multi, CURL *easy)
{
	(void)multi, (void)easy;
	RAN(6);
	return 0;
}

int
curl_multi_remove_handle(CURLM *multi, CURL *easy)
{
	(void)multi, (void)easy;
	RAN(7);
	return 0;
}

int
curl_multi_cleanup(CURLM *multi)
{
	(void)multi;
	RAN(8);
	return 0;
}

int
own_copy_main(void)
{
	CURL *e = curl_easy_init();
	int r = e == &handle;

	r += curl_easy_setopt(e, 10002 /* CURLOPT_URL */, "http://own/") == 0;
	r += curl_easy_setopt(e, 13 /* CURLOPT_TIMEOUT */, 7L) == 0;
	/* 0 only if both options arrived as set */
	r += curl_easy_perform(e) == 0;
	r += curl_easy_duphandle(e) == e;
	r += curl_multi_add_handle(e, e) == 0;
	r += curl_multi_remove_handle(e, e) == 0;
	r += curl_multi_cleanup(e) == 0;
	curl_easy_reset(e);
	curl_easy_cleanup(e);
	printf("curl: %d of 8 calls returned the copy's results, the copy's "
	       "functions ran: %#x\n",
	       r, ran);
	return r == 8 && ran == 0x1ff ? 0 : 1;
}

/* For own-copy-host's OWN_COPY_POINTER: curl_easy_init's address as this
 * library's code takes it (through its GOT: the shim's hook, under the
 * shim), for the host to call from outside the library, as a caller that
 * was handed a pointer, or entered through a tail-calling wrapper, does. */
own_init_fn
own_copy_pointer(void)
{
	return curl_easy_init;
}

void
own_copy_pointer_check(CURL *got)
{
	printf("curl: a call through a pointer from outside the copy %s\n",
	       got == &handle ? "returned its handle"
	       : got          ? "returned another handle"
			      : "failed");
}
