/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The traceparent rules of w3c.h spelled out one at a time, byte by byte:
 * the oracle for w3c_traceparent_parse()'s fast paths (SSE2 blocks for the
 * 55-byte v00 form, word tricks elsewhere), which must accept and reject
 * exactly the same.  Shared by test/test-w3c.c and the fuzz harness
 * test/fuzz/fuzz-traceparent.c. */

#include "w3c.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static inline int
ref_hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static inline bool
ref_hex_bytes(const char *s, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int h = ref_hex(s[2 * i]), l = ref_hex(s[2 * i + 1]);

		if (h < 0 || l < 0)
			return false;
		out[i] = (uint8_t)(h << 4 | l);
	}
	return true;
}

static inline int
ref_traceparent_parse(const char *s, size_t len, struct w3c_traceparent *out)
{
	struct w3c_traceparent tp;
	bool zt = true, zp = true;

	while (len > 0 && (s[0] == ' ' || s[0] == '\t'))
		s++, len--;
	while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	if (len < 55 || !ref_hex_bytes(s, &tp.version, 1) || tp.version == 0xff)
		return -EINVAL;
	if ((tp.version == 0 && len != 55) || (len > 55 && s[55] != '-'))
		return -EINVAL;
	if (s[2] != '-' || s[35] != '-' || s[52] != '-')
		return -EINVAL;
	if (!ref_hex_bytes(s + 3, tp.trace_id, 16) ||
	    !ref_hex_bytes(s + 36, tp.parent_id, 8) ||
	    !ref_hex_bytes(s + 53, &tp.flags, 1))
		return -EINVAL;
	for (int i = 0; i < 16; i++)
		zt = zt && tp.trace_id[i] == 0;
	for (int i = 0; i < 8; i++)
		zp = zp && tp.parent_id[i] == 0;
	if (zt || zp)
		return -EINVAL;
	if (tp.version != 0)
		tp.flags &= W3C_FLAGS_KNOWN;
	*out = tp;
	return 0;
}
