/* SPDX-License-Identifier: Apache-2.0 */
/* w3c_traceparent_parse() over arbitrary bytes, with the round trip through
 * w3c_traceparent_format() as oracle, and the hex codec. */
#include "fuzz.h"

#include <errno.h>
#include <string.h>

#include "w3c.h"

static bool
is_ows(uint8_t c)
{
	return c == ' ' || c == '\t';
}

static void
check_hex(const uint8_t *data, size_t size)
{
	uint8_t bin[64], before[64];
	char text[128];
	size_t n = size / 2 > sizeof(bin) ? sizeof(bin) : size / 2, i;

	memset(bin, 0x5a, sizeof(bin));
	memcpy(before, bin, sizeof(bin));
	if (w3c_hex_decode(bin, (const char *)data, n) < 0) {
		/* untouched on error */
		FUZZ_CHECK(memcmp(bin, before, sizeof(bin)) == 0);
		return;
	}
	w3c_hex_encode(text, bin, n);
	FUZZ_CHECK(memcmp(text, data, 2 * n) == 0);
	for (i = 0; i < n && bin[i] == 0; i++)
		;
	FUZZ_CHECK(w3c_id_is_zero(bin, n) == (i == n));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct w3c_traceparent tp, tp2, poison;
	const uint8_t *s = data;
	size_t len = size;
	char out[W3C_TRACEPARENT_LEN + 1];
	int r;

	check_hex(data, size);

	memset(&poison, 0xa5, sizeof(poison));
	tp = poison;
	r = w3c_traceparent_parse((const char *)data, size, &tp);
	if (r < 0) {
		FUZZ_CHECK(r == -EINVAL);
		FUZZ_CHECK(memcmp(&tp, &poison, sizeof(tp)) == 0);
		return 0;
	}
	FUZZ_CHECK(r == 0);
	FUZZ_CHECK(tp.version != 0xff);
	FUZZ_CHECK(!w3c_id_is_zero(tp.trace_id, sizeof(tp.trace_id)));
	FUZZ_CHECK(!w3c_id_is_zero(tp.parent_id, sizeof(tp.parent_id)));
	if (tp.version != 0)
		FUZZ_CHECK((tp.flags & ~W3C_FLAGS_KNOWN) == 0);

	/* the value without its OWS */
	while (len > 0 && is_ows(s[0]))
		s++, len--;
	while (len > 0 && is_ows(s[len - 1]))
		len--;
	FUZZ_CHECK(len >= W3C_TRACEPARENT_LEN);
	FUZZ_CHECK(tp.version != 0 || len == W3C_TRACEPARENT_LEN);
	FUZZ_CHECK(len == W3C_TRACEPARENT_LEN || s[W3C_TRACEPARENT_LEN] == '-');

	/* what we send on is our own version 00 of the same ids */
	FUZZ_CHECK(w3c_traceparent_format(out, tp.trace_id, tp.parent_id, tp.flags) ==
		   W3C_TRACEPARENT_LEN);
	FUZZ_CHECK(out[W3C_TRACEPARENT_LEN] == '\0');
	FUZZ_CHECK(memcmp(out + 2, s + 2, W3C_TRACEPARENT_LEN - 4) == 0);
	if (tp.version == 0 && (tp.flags & ~W3C_FLAGS_KNOWN) == 0)
		FUZZ_CHECK(memcmp(out, s, W3C_TRACEPARENT_LEN) == 0);
	FUZZ_CHECK(w3c_traceparent_parse(out, W3C_TRACEPARENT_LEN, &tp2) == 0);
	FUZZ_CHECK(tp2.version == 0);
	FUZZ_CHECK(memcmp(tp2.trace_id, tp.trace_id, sizeof(tp.trace_id)) == 0);
	FUZZ_CHECK(memcmp(tp2.parent_id, tp.parent_id, sizeof(tp.parent_id)) == 0);
	FUZZ_CHECK(tp2.flags == (tp.flags & W3C_FLAGS_KNOWN));
	return 0;
}
