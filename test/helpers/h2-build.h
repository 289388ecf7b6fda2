/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* HTTP/2 frames (RFC 9113) as a client or a server writes them, for the
 * test helpers and benchmarks that build their bytes by hand on a
 * loopback connection, to choose what goes into each write (one builder
 * here, so that a frame is written the same way by all of them; FastCGI's
 * are in fcgi-build.h). */

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The client connection preface (RFC 9113, 3.4), without its NUL. */
#define H2_PREFACE     "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define H2_PREFACE_LEN (sizeof(H2_PREFACE) - 1)

/* A frame header: 24-bit length len, type, flags, stream id (0: the
 * connection's). */
static inline size_t
h2_frame(uint8_t *b, size_t len, unsigned type, unsigned flags, uint32_t stream)
{
	b[0] = (uint8_t)(len >> 16);
	b[1] = (uint8_t)(len >> 8);
	b[2] = (uint8_t)len;
	b[3] = (uint8_t)type;
	b[4] = (uint8_t)flags;
	b[5] = (uint8_t)(stream >> 24);
	b[6] = (uint8_t)(stream >> 16);
	b[7] = (uint8_t)(stream >> 8);
	b[8] = (uint8_t)stream;
	return 9;
}

/* An empty SETTINGS frame (every setting at its default). */
static inline __attribute__((unused)) size_t
h2_settings(uint8_t *b)
{
	return h2_frame(b, 0, 0x4, 0, 0);
}

/* The acknowledgement of the peer's SETTINGS. */
static inline __attribute__((unused)) size_t
h2_settings_ack(uint8_t *b)
{
	return h2_frame(b, 0, 0x4, 0x1, 0);
}

/* What a client with prior knowledge sends first: the preface and an
 * empty SETTINGS frame. */
static inline __attribute__((unused)) size_t
h2_preface(uint8_t *b)
{
	memcpy(b, H2_PREFACE, H2_PREFACE_LEN);
	return H2_PREFACE_LEN + h2_settings(b + H2_PREFACE_LEN);
}
