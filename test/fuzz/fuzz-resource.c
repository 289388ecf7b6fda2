/* SPDX-License-Identifier: Apache-2.0 */
/* resenv_parse(), the OTEL_RESOURCE_ATTRIBUTES parser of the process
 * context's resource.  Input: [room][text size][bytes already used][the
 * variable...] (cut at a NUL, as the environment would).  Oracle: a model
 * of ctxshim(7)'s description written here, with a decoder that decodes a
 * whole key or value before it checks it (the parser checks as it goes,
 * within its 255/1023-byte buffers): the same verdict (a malformed entry
 * anywhere keeps nothing, and is the first one), the same entries kept,
 * skipped and too long, each kept key and value the decoding of its input
 * (the last value of a repeated key); and on its own, that what is kept is
 * UTF-8 without NUL within the limits, with distinct keys, inside the part
 * of the text buffer the parser says it used. */
#include "fuzz.h"

#include <errno.h>
#include <string.h>

#include "resource-env.h"
#include "thread-record.h"

#define ROOM_MAX 49 /* the shim passes at most MAX_RESOURCE - 2 = 46 */
#define TEXT_MAX 8192

struct model {
	int verdict; /* 0 or -EINVAL */
	size_t bad_entry;
	enum resenv_bad bad;
	size_t too_long, skipped, n, used;
	const uint8_t *key[ROOM_MAX], *value[ROOM_MAX];
	size_t key_len[ROOM_MAX], value_len[ROOM_MAX];
};

static int
hex_value(char c)
{
	static const char digits[] = "0123456789abcdef";
	const char *d;

	if (c >= 'A' && c <= 'F')
		c = (char)(c - 'A' + 'a');
	d = c ? strchr(digits, c) : NULL;
	return d ? (int)(d - digits) : -1;
}

/* s[0..len) percent-decoded into out (len bytes suffice), then checked as
 * a whole: its length, or -1 for a bad escape, a NUL or not UTF-8. */
static ssize_t
ref_decode(uint8_t *out, const char *s, size_t len)
{
	size_t i, o = 0;

	for (i = 0; i < len; i++) {
		if (s[i] != '%') {
			out[o++] = (uint8_t)s[i];
			continue;
		}
		if (len - i < 3 || hex_value(s[i + 1]) < 0 || hex_value(s[i + 2]) < 0)
			return -1;
		out[o++] = (uint8_t)(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
		i += 2;
	}
	if (memchr(out, 0, o) || !trec_utf8_valid(out, o))
		return -1;
	return (ssize_t)o;
}

static bool
blank(char c)
{
	return c == ' ' || c == '\t';
}

/* [*a, *b) without the blanks at either end */
static void
ref_trim(const char *s, size_t *a, size_t *b)
{
	while (*a < *b && blank(s[*a]))
		(*a)++;
	while (*b > *a && blank(s[*b - 1]))
		(*b)--;
}

/* ctxshim(7): entries split at ','; blank ones skipped; no '=', an empty
 * key, a bad escape, a NUL or bytes not UTF-8 discard the variable; a key
 * over 255 or a value over 1023 bytes skips the entry; a repeated key
 * keeps its last value; past room keys or the text an entry is skipped
 * (key and value take their bytes plus a NUL each; a repeat only its
 * value's). dec holds the decoded bytes (as many as s has). */
static void
model_run(struct model *m,
	  const char *s,
	  size_t len,
	  uint8_t *dec,
	  size_t room,
	  size_t cap)
{
	size_t start = 0, field = 0, d = 0;

	while (start <= len && len > 0) {
		const char *comma = memchr(s + start, ',', len - start);
		size_t end = comma ? (size_t)(comma - s) : len;
		size_t a = start, b = end, ka, kb, va, vb, i;
		const char *eq;
		ssize_t kl, vl;
		uint8_t *k = dec + d, *v;

		field++;
		start = end + 1;
		ref_trim(s, &a, &b);
		if (a == b)
			goto next;
		m->verdict = -EINVAL;
		m->bad_entry = field;
		eq = memchr(s + a, '=', b - a);
		if (!eq) {
			m->bad = RESENV_NO_EQ;
			return;
		}
		ka = a, kb = (size_t)(eq - s), va = kb + 1, vb = b;
		ref_trim(s, &ka, &kb);
		ref_trim(s, &va, &vb);
		kl = ref_decode(k, s + ka, kb - ka);
		v = k + (kl > 0 ? kl : 0);
		vl = ref_decode(v, s + va, vb - va);
		if (kb == ka) {
			m->bad = RESENV_EMPTY_KEY;
			return;
		}
		if (kl < 0 || vl < 0) {
			m->bad = kl < 0 ? RESENV_BAD_KEY : RESENV_BAD_VALUE;
			return;
		}
		m->verdict = 0;
		m->bad_entry = 0;
		d += (size_t)(kl + vl);
		if (kl > RESENV_KEY_MAX || vl > RESENV_VALUE_MAX) {
			m->too_long++;
			goto next;
		}
		for (i = 0; i < m->n; i++)
			if (m->key_len[i] == (size_t)kl &&
			    memcmp(m->key[i], k, (size_t)kl) == 0)
				break;
		if ((i == m->n && m->n == room) ||
		    m->used + (i == m->n ? (size_t)kl + 1 : 0) + (size_t)vl + 1 > cap) {
			m->skipped++;
			goto next;
		}
		if (i == m->n) {
			m->key[i] = k;
			m->key_len[i] = (size_t)kl;
			m->used += (size_t)kl + 1;
			m->n++;
		}
		m->value[i] = v;
		m->value_len[i] = (size_t)vl;
		m->used += (size_t)vl + 1;
next:
		if (!comma)
			break;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct model m;
	struct fuzz_in in = {data, size};
	size_t room = fuzz_byte(&in) % (ROOM_MAX + 1);
	unsigned c = fuzz_byte(&in);
	size_t cap = c == 255 ? TEXT_MAX : 1 + (size_t)c * 16;
	size_t pre = fuzz_byte(&in) % 32, len, used, i, j;
	struct resenv_result r;
	struct resenv_kv *kv;
	char *s, *text;
	uint8_t *dec;
	int ret;

	if (pre > cap)
		pre = cap;
	len = strnlen((const char *)in.p, in.left);
	/* exactly sized, so that a write past them is caught by ASan */
	s = malloc(len + 1);
	dec = malloc(len + 1);
	text = malloc(cap);
	kv = malloc(room ? room * sizeof(*kv) : 1);
	FUZZ_CHECK(s && dec && text && kv);
	memcpy(s, in.p, len);
	s[len] = '\0';
	memset(text, 'P', cap);

	used = pre;
	ret = resenv_parse(s, kv, room, text, cap, &used, &r);
	memset(&m, 0, sizeof(m));
	m.used = pre;
	model_run(&m, s, len, dec, room, cap);

	FUZZ_CHECK(ret == m.verdict);
	FUZZ_CHECK(r.bad_entry == m.bad_entry);
	FUZZ_CHECK(r.bad == m.bad);
	FUZZ_CHECK(r.too_long == m.too_long);
	/* what the caller had in the text buffer stays */
	for (i = 0; i < pre; i++)
		FUZZ_CHECK(text[i] == 'P');
	if (ret < 0) {
		FUZZ_CHECK(used == pre);
		goto out;
	}
	FUZZ_CHECK(r.bad == RESENV_OK && r.bad_entry == 0);
	FUZZ_CHECK(r.n == m.n && r.skipped == m.skipped && used == m.used);
	FUZZ_CHECK(r.n <= room && used <= cap);
	for (i = 0; i < r.n; i++) {
		size_t kl = strlen(kv[i].key), vl;

		FUZZ_CHECK(kv[i].key >= text + pre && kv[i].key + kl < text + used);
		vl = strlen(kv[i].value);
		FUZZ_CHECK(kv[i].value >= text + pre && kv[i].value + vl < text + used);
		FUZZ_CHECK(kl >= 1 && kl <= RESENV_KEY_MAX && vl <= RESENV_VALUE_MAX);
		FUZZ_CHECK(trec_utf8_valid((const uint8_t *)kv[i].key, kl));
		FUZZ_CHECK(trec_utf8_valid((const uint8_t *)kv[i].value, vl));
		FUZZ_CHECK(kl == m.key_len[i] && memcmp(kv[i].key, m.key[i], kl) == 0);
		FUZZ_CHECK(vl == m.value_len[i] &&
			   memcmp(kv[i].value, m.value[i], vl) == 0);
		for (j = 0; j < i; j++)
			FUZZ_CHECK(strcmp(kv[i].key, kv[j].key) != 0);
	}
out:
	free(kv);
	free(text);
	free(dec);
	free(s);
	return 0;
}
