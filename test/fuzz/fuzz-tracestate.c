/* SPDX-License-Identifier: Apache-2.0 */
/* w3c_tracestate_parse/format/combine/truncate.  Input: one byte that picks
 * the truncation limit (x4), then header lines separated by '\n'.  Oracles:
 * every accepted member is valid on its own, the normalised list parses
 * back to the same members, format with a limit and truncate in place agree
 * and respect the limit, combine equals parse + format, and the streaming
 * w3c_tracestate_check gives parse's verdict. */
#include "fuzz.h"

#include <errno.h>
#include <string.h>

#include "w3c.h"

#define MAX_LINES 48
/* 32 members of "key=value" at most, plus commas */
#define LIST_MAX (W3C_TRACESTATE_MAX_MEMBERS * (W3C_TRACESTATE_MEMBER_MAX + 1))

static bool
member_eq(const struct w3c_tracestate_member *a, const struct w3c_tracestate_member *b)
{
	return a->key_len == b->key_len && a->value_len == b->value_len &&
	       memcmp(a->key, b->key, a->key_len) == 0 &&
	       memcmp(a->value, b->value, a->value_len) == 0;
}

/* w3c_tracestate_check over the lines, in pieces of step bytes. */
static int
check_all(const char *const *lines,
	  const size_t *lens,
	  size_t n,
	  size_t step,
	  bool trim_cr)
{
	struct w3c_tracestate_check c;
	int r = 0;

	memset(&c, 0, sizeof(c));
	for (size_t l = 0; l < n; l++) {
		for (size_t o = 0; o < lens[l]; o += step) {
			size_t k = lens[l] - o < step ? lens[l] - o : step;

			if (w3c_tracestate_check_feed(&c, lines[l] + o, k) < 0)
				r = -EINVAL;
		}
		if (w3c_tracestate_check_end(&c, trim_cr) < 0)
			r = -EINVAL;
	}
	return r;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char list[LIST_MAX + 1], list2[LIST_MAX + 1], trunc[LIST_MAX + 1];
	const char *lines[MAX_LINES];
	size_t lens[MAX_LINES], n_lines = 0, len, len2, tlen, max_len, i;
	struct w3c_tracestate ts, ts2, poison;
	struct fuzz_in in = {data, size};
	unsigned dropped, dropped2;
	const char *p, *end;
	int r;

	max_len = (size_t)fuzz_byte(&in) * 4;
	p = (const char *)in.p;
	end = p + in.left;
	while (n_lines < MAX_LINES) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));

		lines[n_lines] = p;
		lens[n_lines++] = nl ? (size_t)(nl - p) : (size_t)(end - p);
		if (!nl)
			break;
		p = nl + 1;
	}

	memset(&poison, 0xa5, sizeof(poison));
	ts = poison;
	r = w3c_tracestate_parse(lines, lens, n_lines, &ts);

	/* The streaming check gives the same verdict, in any pieces; with
	 * trim_cr, that of the lines without their trailing SP/HTAB/CR. */
	{
		size_t step = 1 + max_len / 4 % 9, tl[MAX_LINES];
		struct w3c_tracestate ts3;

		for (i = 0; i < n_lines; i++) {
			tl[i] = lens[i];
			while (tl[i] > 0 && (lines[i][tl[i] - 1] == ' ' ||
					     lines[i][tl[i] - 1] == '\t' ||
					     lines[i][tl[i] - 1] == '\r'))
				tl[i]--;
		}
		FUZZ_CHECK(check_all(lines, lens, n_lines, SIZE_MAX, false) == r);
		FUZZ_CHECK(check_all(lines, lens, n_lines, step, false) == r);
		FUZZ_CHECK(check_all(lines, lens, n_lines, step, true) ==
			   w3c_tracestate_parse(lines, tl, n_lines, &ts3));
	}
	len = 12345;
	if (r < 0) {
		FUZZ_CHECK(r == -EINVAL);
		FUZZ_CHECK(memcmp(&ts, &poison, sizeof(ts)) == 0);
		FUZZ_CHECK(w3c_tracestate_combine(list, sizeof(list), &len, lines, lens,
						  n_lines) == -EINVAL);
		FUZZ_CHECK(len == 12345);
		return 0;
	}
	FUZZ_CHECK(ts.n <= W3C_TRACESTATE_MAX_MEMBERS);
	for (i = 0; i < ts.n; i++) {
		const struct w3c_tracestate_member *m = &ts.member[i];

		FUZZ_CHECK(w3c_tracestate_key_valid(m->key, m->key_len));
		FUZZ_CHECK(w3c_tracestate_value_valid(m->value, m->value_len));
		/* members point into the input */
		FUZZ_CHECK(m->key >= (const char *)data &&
			   m->value + m->value_len <= (const char *)data + size);
	}

	/* the normalised list, no limit */
	FUZZ_CHECK(w3c_tracestate_format(list, sizeof(list) - 1, &len, &ts, SIZE_MAX,
					 &dropped) == 0);
	FUZZ_CHECK(dropped == 0);
	FUZZ_CHECK(w3c_tracestate_combine(list2, sizeof(list2) - 1, &len2, lines, lens,
					  n_lines) == 0);
	FUZZ_CHECK(len2 == len && memcmp(list, list2, len) == 0);
	if (len > 0)
		FUZZ_CHECK(w3c_tracestate_format(list2, len - 1, &len2, &ts, SIZE_MAX,
						 NULL) == -ENOSPC);

	/* it parses back to the same members */
	{
		const char *l1[1] = {list};
		size_t n1[1] = {len};

		FUZZ_CHECK(w3c_tracestate_parse(l1, n1, 1, &ts2) == 0);
		FUZZ_CHECK(ts2.n == ts.n);
		for (i = 0; i < ts.n; i++)
			FUZZ_CHECK(member_eq(&ts.member[i], &ts2.member[i]));
	}

	/* a limit: format and truncate-in-place drop the same entries */
	FUZZ_CHECK(w3c_tracestate_format(list2, sizeof(list2) - 1, &len2, &ts, max_len,
					 &dropped) == 0);
	FUZZ_CHECK(len2 <= max_len);
	FUZZ_CHECK(dropped <= ts.n);
	FUZZ_CHECK((dropped == 0) == (len <= max_len));
	memcpy(trunc, list, len);
	if (len == 0) {
		FUZZ_CHECK(w3c_tracestate_truncate(trunc, 0, max_len, &tlen,
						   &dropped2) == 0);
	} else {
		FUZZ_CHECK(w3c_tracestate_truncate(trunc, len, max_len, &tlen,
						   &dropped2) == 0);
	}
	FUZZ_CHECK(tlen == len2 && dropped2 == dropped);
	FUZZ_CHECK(memcmp(trunc, list2, tlen) == 0);
	return 0;
}
