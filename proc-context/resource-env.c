/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "resource-env.h"

#include "hex.h"
#include "thread-record.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* How many bytes at the end of out[0..n) may be the start of a character
 * that the next bytes complete: from its last lead byte on, if the
 * continuation bytes after it are fewer than the longest form has. */
static size_t
utf8_open_tail(const char *out, size_t n)
{
	size_t p = n;

	while (p > 0 && n - p < 3 && ((uint8_t)out[p - 1] & 0xc0) == 0x80)
		p--;
	if (p > 0 && (uint8_t)out[p - 1] >= 0xc0)
		p--;
	return n - p;
}

/* Percent-decodes s[0..len) into out (cap bytes, len <= cap is enough).
 * Returns the decoded length, -2 when it does not fit in cap (the rest still
 * checked for the errors below), or -1 for a bad escape, a decoded NUL (we
 * keep C strings) or a result that is not UTF-8: every one of these is a
 * decoding failure, and a protobuf string must be UTF-8 -- a reader that
 * checks, as Go's protobuf does for the eBPF profiler, would refuse the
 * whole process context, thread-context keys included. */
static ssize_t
percent_decode(char *out, size_t cap, const char *s, size_t len)
{
	size_t i, o = 0;
	bool too_long = false;

	for (i = 0; i < len; i++) {
		char c = s[i];

		if (c == '%') {
			int hi, lo;

			if (i + 2 >= len)
				return -1;
			hi = hex_digit_value((uint8_t)s[i + 1]);
			lo = hex_digit_value((uint8_t)s[i + 2]);
			if (hi < 0 || lo < 0)
				return -1;
			c = (char)(hi << 4 | lo);
			i += 2;
		}
		if (c == '\0')
			return -1;
		/* Too long to keep, but a bad escape, a NUL or bytes that are
		 * not UTF-8 further on are still a decoding error (the whole
		 * variable goes): what out holds is checked up to its last
		 * whole character, and the rest goes on in its place. */
		if (o == cap) {
			size_t tail = utf8_open_tail(out, o);

			if (!trec_utf8_valid((const uint8_t *)out, o - tail))
				return -1;
			memmove(out, out + o - tail, tail);
			o = tail;
			too_long = true;
		}
		out[o++] = c;
	}
	if (!trec_utf8_valid((const uint8_t *)out, o))
		return -1;
	if (too_long)
		return -2;
	return (ssize_t)o;
}

static void
trim(const char **s, size_t *len)
{
	while (*len && (**s == ' ' || **s == '\t')) {
		(*s)++;
		(*len)--;
	}
	while (*len && ((*s)[*len - 1] == ' ' || (*s)[*len - 1] == '\t'))
		(*len)--;
}

static const char *
store(char *text, size_t *len, const char *s, size_t n)
{
	char *dst = text + *len;

	memcpy(dst, s, n);
	dst[n] = '\0';
	*len += n + 1;
	return dst;
}

/* The OTel SDK specification has ',' and '=' percent-encoded in keys and
 * values alike (others may be), so both are decoded, and a failure to
 * decode discards the whole variable: everything is validated before the
 * caller adds anything. */
int
resenv_parse(const char *s,
	     struct resenv_kv *kv,
	     size_t room,
	     char *text,
	     size_t text_cap,
	     size_t *text_len,
	     struct resenv_result *res)
{
	size_t n = 0, i, used = *text_len, entry = 0;
	const char *p = s;

	memset(res, 0, sizeof(*res));
	while (p && *p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		const char *k = p, *v;
		size_t klen, vlen;
		/* One byte over the limits: percent_decode() gets exactly
		 * the limit as its cap and says -2 past it. */
		char ktmp[RESENV_KEY_MAX + 1], vtmp[RESENV_VALUE_MAX + 1];
		ssize_t kl, vl;

		p = end ? end + 1 : NULL;
		/* every comma-separated field, blank ones too, for the
		 * caller's message about a malformed one */
		entry++;
		/* An empty or blank entry ("a=1,", "a=1, ") holds nothing to
		 * decode: skipped. */
		trim(&k, &len);
		if (len == 0)
			continue;
		res->bad_entry = entry;
		res->bad = RESENV_NO_EQ;
		if (!eq)
			return -EINVAL;
		klen = (size_t)(eq - k);
		v = eq + 1;
		vlen = len - klen - 1;
		trim(&k, &klen);
		trim(&v, &vlen);
		kl = percent_decode(ktmp, RESENV_KEY_MAX, k, klen);
		vl = percent_decode(vtmp, RESENV_VALUE_MAX, v, vlen);
		res->bad = kl == 0    ? RESENV_EMPTY_KEY
			   : kl == -1 ? RESENV_BAD_KEY
				      : RESENV_BAD_VALUE;
		if (kl == 0 || kl == -1 || vl == -1)
			return -EINVAL;
		res->bad_entry = 0;
		res->bad = RESENV_OK;
		/* Well-formed but longer than we keep: that entry only (a
		 * limit of ours, not a decoding error of the variable). */
		if (kl < 0 || vl < 0) {
			res->too_long++;
			continue;
		}
		/* A repeated key: the last value wins, as in the SDKs (their
		 * attribute sets keep the last) and so in the eBPF profiler,
		 * which reads this variable too. */
		for (i = 0; i < n; i++)
			if (strlen(kv[i].key) == (size_t)kl &&
			    memcmp(kv[i].key, ktmp, (size_t)kl) == 0)
				break;
		/* Past the room (entries, text) an entry is skipped, not the
		 * rest: later ones are still validated (a malformed one
		 * discards the variable, wherever it is) and may still fit.
		 * Key and value are stored together or not at all; a repeat
		 * that finds no room keeps the value it replaces. */
		if (i == room ||
		    used + (i == n ? (size_t)kl + 1 : 0) + (size_t)vl + 1 > text_cap) {
			res->skipped++;
			continue;
		}
		if (i == n)
			kv[i].key = store(text, &used, ktmp, (size_t)kl);
		kv[i].value = store(text, &used, vtmp, (size_t)vl);
		if (i == n)
			n++;
	}
	res->n = n;
	*text_len = used;
	return 0;
}
