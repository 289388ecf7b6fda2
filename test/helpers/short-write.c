/* SPDX-License-Identifier: Apache-2.0 */
/* libshort-write.so: preloaded after libctxshim.so (LD_PRELOAD="...
 * libctxshim.so .../libshort-write.so"), so that the shim's real_write(),
 * real_send(), real_sendto(), real_writev() and real_sendmsg() (bound
 * with RTLD_NEXT) reach these first.  A helper arms it with
 * short_write_arm(max), found with dlsym(): the next one of those calls,
 * on any descriptor, hands the kernel only its first max bytes and
 * returns what the kernel took -- the short write a socket may make at
 * any time (a full send buffer, a signal), made at a byte the test
 * chooses, which the kernel alone makes only at its own chunk sizes.
 * sock-edge's "short" mode puts the bytes after max on a PROT_NONE page:
 * a hook that looks past what was written faults there. */
#include "config.h"

#include <stddef.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static size_t armed; /* 0: off; else the next call's cap + 1 */

EXPORT void short_write_arm(size_t max);

EXPORT void
short_write_arm(size_t max)
{
	armed = max + 1;
}

/* The cap of this call (and disarm), or n */
static size_t
take(size_t n)
{
	size_t m = armed;

	armed = 0;
	return m && m - 1 < n ? m - 1 : n;
}

/* iov cut to its first max bytes, into out (at most 64 iovecs) */
static int
cut(const struct iovec *iov, int n, size_t max, struct iovec *out)
{
	int i, k = 0;

	for (i = 0; i < n && i < 64 && max; i++) {
		out[k] = iov[i];
		if (out[k].iov_len > max)
			out[k].iov_len = max;
		max -= out[k].iov_len;
		k++;
	}
	return k;
}

static size_t
total(const struct iovec *iov, size_t n)
{
	size_t i, t = 0;

	for (i = 0; i < n; i++)
		t += iov[i].iov_len;
	return t;
}

EXPORT ssize_t
write(int fd, const void *buf, size_t n)
{
	return syscall(SYS_write, fd, buf, take(n));
}

EXPORT ssize_t
send(int fd, const void *buf, size_t n, int flags)
{
	return syscall(SYS_sendto, fd, buf, take(n), flags, NULL, 0);
}

EXPORT ssize_t
sendto(int fd,
       const void *buf,
       size_t n,
       int flags,
       const struct sockaddr *a,
       socklen_t al)
{
	return syscall(SYS_sendto, fd, buf, take(n), flags, a, al);
}

EXPORT ssize_t
writev(int fd, const struct iovec *iov, int n)
{
	struct iovec v[64];
	size_t t = n > 0 ? total(iov, (size_t)n) : 0, m = take(t);

	if (m == t)
		return syscall(SYS_writev, fd, iov, n);
	return syscall(SYS_writev, fd, v, cut(iov, n, m, v));
}

EXPORT ssize_t
sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct iovec v[64];
	struct msghdr m2;
	size_t t = msg ? total(msg->msg_iov, msg->msg_iovlen) : 0, m = take(t);

	if (m == t)
		return syscall(SYS_sendmsg, fd, msg, flags);
	m2 = *msg;
	m2.msg_iov = v;
	m2.msg_iovlen = (size_t)cut(msg->msg_iov, (int)msg->msg_iovlen, m, v);
	return syscall(SYS_sendmsg, fd, &m2, flags);
}
