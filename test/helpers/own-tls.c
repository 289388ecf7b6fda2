/* SPDX-License-Identifier: Apache-2.0 */
/* libown-tls.so: stand-ins for the libssl and libgnutls functions the
 * shim hooks, at their libraries' symbol versions (own-tls.map), as a
 * library that carries its own libssl would have them (a Python wheel's
 * libssl under another soname), called through its PLT
 * (test-preload-plugins.c, run by own-copy-host).  own_copy_main() prints
 * what each call returned and which stand-ins ran: the same with the shim
 * as without it.  gnutls_record_send is gnutls_record_send2(s, buf, n, 0,
 * 0) through the PLT, as in GnuTLS 3.7.9: the shim's send2 is what that
 * call reaches, and it must go to this copy's. */
#include "config.h"

#include <stddef.h>
#include <stdio.h>

typedef struct own_ssl SSL;

int SSL_read(SSL *s, void *buf, int num);
int SSL_read_ex(SSL *s, void *buf, size_t num, size_t *n);
int SSL_peek(SSL *s, void *buf, int num);
int SSL_peek_ex(SSL *s, void *buf, size_t num, size_t *n);
int SSL_write(SSL *s, const void *buf, int num);
int SSL_write_ex(SSL *s, const void *buf, size_t num, size_t *n);
void SSL_free(SSL *s);
int SSL_set_fd(SSL *s, int fd);
int SSL_do_handshake(SSL *s);
int SSL_up_ref(SSL *s);
SSL *SSL_dup(SSL *s);
int own_copy_main(void);

typedef struct own_ssl *gnutls_session_t;

long gnutls_record_recv(gnutls_session_t s, void *buf, size_t n);
long gnutls_record_send(gnutls_session_t s, const void *buf, size_t n);
long gnutls_record_send2(
	gnutls_session_t s, const void *buf, size_t n, size_t pad, unsigned flags);
long gnutls_record_send_range(gnutls_session_t s,
			      const void *buf,
			      size_t n,
			      const void *range);
long
gnutls_record_recv_seq(gnutls_session_t s, void *buf, size_t n, unsigned char *seq);
long gnutls_record_recv_packet(gnutls_session_t s, void **packet);
void gnutls_deinit(gnutls_session_t s);
int gnutls_handshake(gnutls_session_t s);

struct own_ssl {
	int fd;
};

static unsigned ran;

#define RAN(bit) (ran |= 1u << (bit))

int
SSL_read(SSL *s, void *buf, int num)
{
	(void)s, (void)buf;
	RAN(0);
	return num;
}

int
SSL_read_ex(SSL *s, void *buf, size_t num, size_t *n)
{
	(void)s, (void)buf;
	RAN(1);
	*n = num;
	return 1;
}

int
SSL_peek(SSL *s, void *buf, int num)
{
	(void)s, (void)buf;
	RAN(2);
	return num;
}

int
SSL_peek_ex(SSL *s, void *buf, size_t num, size_t *n)
{
	(void)s, (void)buf;
	RAN(3);
	*n = num;
	return 1;
}

int
SSL_write(SSL *s, const void *buf, int num)
{
	(void)s, (void)buf;
	RAN(4);
	return num;
}

int
SSL_write_ex(SSL *s, const void *buf, size_t num, size_t *n)
{
	(void)s, (void)buf;
	RAN(5);
	*n = num;
	return 1;
}

void
SSL_free(SSL *s)
{
	(void)s;
	RAN(6);
}

int
SSL_set_fd(SSL *s, int fd)
{
	s->fd = fd;
	RAN(7);
	return 1;
}

int
SSL_do_handshake(SSL *s)
{
	(void)s;
	RAN(8);
	return 1;
}

int
SSL_up_ref(SSL *s)
{
	(void)s;
	RAN(9);
	return 1;
}

SSL *
SSL_dup(SSL *s)
{
	RAN(10);
	return s;
}

long
gnutls_record_recv(gnutls_session_t s, void *buf, size_t n)
{
	(void)s, (void)buf;
	RAN(11);
	return (long)n;
}

long
gnutls_record_send(gnutls_session_t s, const void *buf, size_t n)
{
	RAN(12);
	return gnutls_record_send2(s, buf, n, 0, 0);
}

long
gnutls_record_send2(
	gnutls_session_t s, const void *buf, size_t n, size_t pad, unsigned flags)
{
	(void)s, (void)buf, (void)pad, (void)flags;
	if (ran & 1u << 15)
		RAN(16); /* a second call, the application's */
	RAN(15);
	return (long)n;
}

long
gnutls_record_send_range(gnutls_session_t s,
			 const void *buf,
			 size_t n,
			 const void *range)
{
	(void)s, (void)buf, (void)range;
	RAN(17);
	return (long)n;
}

long
gnutls_record_recv_seq(gnutls_session_t s, void *buf, size_t n, unsigned char *seq)
{
	(void)s, (void)buf, (void)seq;
	RAN(18);
	return (long)n;
}

long
gnutls_record_recv_packet(gnutls_session_t s, void **packet)
{
	(void)s;
	RAN(19);
	*packet = NULL;
	return 0;
}

void
gnutls_deinit(gnutls_session_t s)
{
	(void)s;
	RAN(13);
}

int
gnutls_handshake(gnutls_session_t s)
{
	(void)s;
	RAN(14);
	return 0;
}

int
own_copy_main(void)
{
	struct own_ssl s = {-1};
	char buf[8];
	size_t n = 0;
	int r = 0, g = 0;
	void *p = &s;

	/* A server session on fd 0 (which the shim may look at), as a
	 * real one would be. */
	r += SSL_set_fd(&s, 0) == 1;
	r += SSL_do_handshake(&s) == 1;
	r += SSL_read(&s, buf, 5) == 5;
	r += SSL_read_ex(&s, buf, 6, &n) == 1 && n == 6;
	r += SSL_peek(&s, buf, 3) == 3;
	r += SSL_peek_ex(&s, buf, 4, &n) == 1 && n == 4;
	r += SSL_write(&s, "x", 1) == 1;
	r += SSL_write_ex(&s, "xy", 2, &n) == 1 && n == 2;
	r += SSL_up_ref(&s) == 1;
	r += SSL_dup(&s) == &s;
	SSL_free(&s);
	printf("ssl: %d of 10 calls returned the copy's results, the copy's "
	       "functions ran: %#x\n",
	       r, ran & 0x7ff);
	g += gnutls_handshake(&s) == 0;
	g += gnutls_record_recv(&s, buf, 7) == 7;
	g += gnutls_record_send(&s, "abc", 3) == 3;
	g += gnutls_record_send2(&s, "abcd", 4, 1, 0) == 4;
	g += gnutls_record_send_range(&s, "ab", 2, NULL) == 2;
	g += gnutls_record_recv_seq(&s, buf, 5, (unsigned char *)buf) == 5;
	g += gnutls_record_recv_packet(&s, (void **)&p) == 0 && !p;
	gnutls_deinit(&s);
	printf("gnutls: %d of 7 calls returned the copy's results, the copy's "
	       "functions ran: %#x\n",
	       g, ran >> 11);
	return r == 10 && g == 7 && ran == 0xfffff ? 0 : 1;
}
