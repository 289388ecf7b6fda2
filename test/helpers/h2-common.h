/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the HTTP/2 test server and client (h2-server, h2-client) share:
 * both drive nghttp2 with memory buffers over a blocking socket they own,
 * and send what the session has queued the same way. */

#include <errno.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <nghttp2/nghttp2.h>

/* Sends n bytes to fd.  0, or -1 on a socket error. */
static inline int
h2_send_all(int fd, const uint8_t *data, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, data, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		data += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Sends everything session s has queued to fd.  0, or -1 on a session or
 * socket error. */
static inline int
h2_flush(nghttp2_session *s, int fd)
{
	for (;;) {
		const uint8_t *data;
		ssize_t n = nghttp2_session_mem_send(s, &data);

		if (n < 0)
			return -1;
		if (n == 0)
			return 0;
		if (h2_send_all(fd, data, (size_t)n) < 0)
			return -1;
	}
}
