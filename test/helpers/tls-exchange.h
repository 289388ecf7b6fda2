/* SPDX-License-Identifier: Apache-2.0 */
/* The steps tls-biocb and tls-ownbio share: one HTTPS/1.1 exchange inside
 * the helper, each side ending with SSL_up_ref, SSL_free, SSL_free. */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/ssl.h>

static void __attribute__((noreturn)) fail(const char *what)
{
	printf("FAILED %s\n", what);
	fflush(stdout);
	exit(1);
}

/* Read until the end of a head. */
static void
read_head(SSL *s)
{
	char buf[4096];
	size_t len = 0;

	while (!memmem(buf, len, "\r\n\r\n", 4)) {
		int r = SSL_read(s, buf + len, (int)(sizeof(buf) - len));

		if (r <= 0)
			fail("SSL_read");
		len += (size_t)r;
	}
}

/* The last two steps of both sides: a second reference taken and freed,
 * then the session freed. */
static void
finish(SSL *s)
{
	if (SSL_up_ref(s) != 1)
		fail("SSL_up_ref");
	SSL_free(s);
	SSL_free(s);
}
