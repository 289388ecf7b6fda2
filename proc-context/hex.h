/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* One hexadecimal digit, either case: shared by the formats that carry
 * hex numbers (HTTP chunk sizes, percent escapes, /proc/PID/maps). */

#include <stdint.h>

/* The digit's value, or -1 for any other byte. */
static inline int
hex_digit_value(uint8_t c)
{
	if ((unsigned)(c - '0') < 10u)
		return c - '0';
	c |= 0x20;
	if ((unsigned)(c - 'a') < 6u)
		return c - 'a' + 10;
	return -1;
}
