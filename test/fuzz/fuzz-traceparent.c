/* SPDX-License-Identifier: Apache-2.0 */
/* w3c_traceparent_parse() over arbitrary bytes, with the round trip through
 * w3c_traceparent_format() and a byte-at-a-time reference parser as
 * oracles, and the hex codec.  Random bytes rarely come near a valid value,
 * so the input is also read as edits of valid values (the SIMD fast path
 * of the 55-byte v00 form must agree with the reference everywhere). */
#include "fuzz.h"

#include <errno.h>
#include <string.h>

#include "w3c.h"
#include "../w3c-ref.h"

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

/* Parse s[0..len) from its own heap block (so ASan sees any read past
 * len) and compare with the reference. */
static void
check_ref(const uint8_t *s, size_t len)
{
	struct w3c_traceparent got, want;
	uint8_t *copy = malloc(len ? len : 1);
	int rg, rw;

	FUZZ_CHECK(copy != NULL);
	memcpy(copy, s, len);
	memset(&got, 0xa5, sizeof(got));
	want = got;
	rg = w3c_traceparent_parse((const char *)copy, len, &got);
	rw = ref_traceparent_parse((const char *)copy, len, &want);
	free(copy);
	FUZZ_CHECK(rg == rw);
	FUZZ_CHECK(memcmp(&got, &want, sizeof(got)) == 0);
}

/* data as edits of a valid value: byte 0 picks the template and the
 * length change, then (position, byte) pairs. */
static void
check_edits(const uint8_t *data, size_t size)
{
	static const char *const tmpl[] = {
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-0000000000000000-00",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff-",
		"fe-abcdef0123456789abcdef0123456789-0123456789abcdef-03",
	};
	uint8_t buf[64];
	size_t len, i;

	if (size == 0)
		return;
	len = strlen(tmpl[data[0] & 3]);
	memcpy(buf, tmpl[data[0] & 3], len);
	/* 0..7: shorter or longer by up to 3 bytes (the 8th template byte
	 * is a dash for the higher version) */
	len = len + (size_t)((data[0] >> 2) & 7) - 3;
	if (len > sizeof(buf))
		len = sizeof(buf);
	for (i = len > 55 ? 55 : len; i < len; i++)
		buf[i] = '-';
	for (i = 1; i + 1 < size; i += 2)
		if (len)
			buf[data[i] % len] = data[i + 1];
	check_ref(buf, len);
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
	check_ref(data, size);
	check_edits(data, size);

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
