/* SPDX-License-Identifier: Apache-2.0 */
/* h2_scan_feed() over arbitrary bytes: fed whole and in the pieces the
 * input's first bytes choose (the state moved between pieces, as the
 * socket level's pool does), the events (status, absolute offset, field,
 * flags, value, stream) and the final state must be the same, the dynamic
 * table model consistent (sizes, entries, arena) after every event, and
 * the input untouched.  The first byte chooses how the rest is fed: as
 * the connection after the preface (its low bits: preface bytes seen), or
 * wrapped as one header block in HEADERS and CONTINUATION frames of a
 * size the byte chooses, so that random bytes reach the HPACK decoder. */
#include "fuzz.h"

#include <string.h>

#include "h2-scan.h"

#define MAX_EV 64

static const char *const names[] = {":method",     ":path",      ":authority",
				    "traceparent", "tracestate", "user-agent",
				    "x",           "custom-key"};
#define N_NAMES (sizeof(names) / sizeof(names[0]))

struct ev {
	int st;
	size_t off;
	unsigned k, flags;
	size_t len;
	uint32_t hash, stream;
};

static uint32_t
hash(const uint8_t *s, size_t n)
{
	uint32_t h = 2166136261u;

	while (n--)
		h = (h ^ *s++) * 16777619u;
	return h;
}

/* What h2-scan.c keeps: entry sizes add up, kept values fill the arena. */
static void
model_ok(const struct h2_scan *st)
{
	uint32_t size = 0, kept = 0, d;

	FUZZ_CHECK(st->t_max <= H2_SCAN_TABLE_MAX && st->t_size <= st->t_max);
	FUZZ_CHECK(st->e_count <= H2_SCAN_ENTRIES && st->a_used <= H2_SCAN_ARENA);
	FUZZ_CHECK(st->a_tail < H2_SCAN_ARENA);
	for (d = 1; d <= st->e_count; d++) {
		unsigned s = (st->e_head - d) & (H2_SCAN_ENTRIES - 1);

		size += 32u + st->e_nlen[s] + st->e_vlen[s];
		if (st->e_k[s] & 0x10) /* kept */
			kept += st->e_vlen[s] < H2_SCAN_VALUE_MAX ? st->e_vlen[s]
								  : H2_SCAN_VALUE_MAX;
	}
	FUZZ_CHECK(size == st->t_size && kept == st->a_used);
}

static unsigned
run(const struct h2_scan_config *cfg,
    const uint8_t *p,
    size_t n,
    unsigned pre,
    const uint8_t *cuts,
    size_t ncuts,
    struct ev *ev,
    uint8_t *why)
{
	static struct h2_scan st, moved;
	size_t off = 0, ci = 0, end;
	unsigned nev = 0;

	h2_scan_reset(&st, pre);
	while (off < n) {
		size_t step = ncuts ? (size_t)(1u + cuts[ci++ % ncuts] % 64u) : n;
		int r;

		end = off + step < n ? off + step : n;
		do {
			size_t used = 0;

			r = h2_scan_feed(&st, cfg, p + off, end - off, &used);
			FUZZ_CHECK(used <= end - off);
			off += used;
			model_ok(&st);
			if (r == H2_SCAN_MORE) {
				FUZZ_CHECK(off == end);
				continue;
			}
			FUZZ_CHECK(r == H2_SCAN_FIELD || r == H2_SCAN_REQUEST ||
				   (r == H2_SCAN_GAVE_UP && h2_scan_gave_up(&st)));
			if (nev == MAX_EV)
				continue;
			memset(&ev[nev], 0, sizeof(ev[nev]));
			ev[nev].st = r;
			ev[nev].off = off;
			ev[nev].stream = h2_scan_stream(&st);
			if (r == H2_SCAN_FIELD) {
				struct h2_scan_field f;

				h2_scan_field(&st, &f);
				FUZZ_CHECK(f.k < cfg->n && f.len <= H2_SCAN_VALUE_MAX);
				FUZZ_CHECK((f.value == NULL) ==
					   !!(f.flags & H2_SCAN_F_UNKNOWN));
				ev[nev].k = f.k;
				ev[nev].flags = f.flags;
				ev[nev].len = f.len;
				if (f.value)
					ev[nev].hash = hash(f.value, f.len);
			}
			nev++;
		} while (r != H2_SCAN_MORE);
		/* no pointers into itself */
		moved = st;
		memset(&st, 0xa5, sizeof(st));
		st = moved;
	}
	*why = st.why;
	return nev;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t buf[1 << 16], copy[1 << 16];
	struct h2_scan_config cfg;
	struct ev a[MAX_EV], b[MAX_EV];
	const uint8_t *cuts;
	size_t n = 0, ncuts, i;
	unsigned na, nb, mode, pre = 0;
	uint8_t wa, wb;

	if (size < 2)
		return 0;
	mode = data[0];
	ncuts = data[1] % 8;
	if (size < 2 + ncuts)
		return 0;
	cuts = data + 2;
	data += 2 + ncuts;
	size -= 2 + ncuts;
	memset(&cfg, 0, sizeof(cfg));
	for (i = 0; i < N_NAMES; i++)
		FUZZ_CHECK(h2_scan_config_add(&cfg, names[i]) == (int)i);
	if (mode & 0x80) {
		/* the preface, then HEADERS (stream 1) and CONTINUATIONs of
		 * up to 1 + (mode & 0x7f) bytes, the last with END_HEADERS */
		size_t fl = 1 + (mode & 0x7f), off = 0;
		bool first = true;

		memcpy(buf, H2_SCAN_PREFACE, H2_SCAN_PREFACE_LEN);
		n = H2_SCAN_PREFACE_LEN;
		do {
			size_t l = size - off < fl ? size - off : fl;
			uint8_t h[9] = {0, 0, (uint8_t)l, first ? 1 : 9, 0, 0, 0, 0, 1};

			if (n + 9 + l > sizeof(buf))
				break;
			if (off + l == size)
				h[4] = 0x04;
			memcpy(buf + n, h, 9);
			memcpy(buf + n + 9, data + off, l);
			n += 9 + l;
			off += l;
			first = false;
		} while (off < size);
	} else {
		pre = mode % (H2_SCAN_PREFACE_LEN + 1);
		n = size < sizeof(buf) ? size : sizeof(buf);
		memcpy(buf, data, n);
	}
	memcpy(copy, buf, n);
	na = run(&cfg, buf, n, pre, NULL, 0, a, &wa);
	nb = run(&cfg, buf, n, pre, cuts, ncuts, b, &wb);
	FUZZ_CHECK(memcmp(copy, buf, n) == 0);
	FUZZ_CHECK(na == nb && wa == wb);
	for (i = 0; i < na; i++) {
		FUZZ_CHECK(a[i].st == b[i].st && a[i].off == b[i].off);
		FUZZ_CHECK(a[i].k == b[i].k && a[i].flags == b[i].flags);
		FUZZ_CHECK(a[i].len == b[i].len && a[i].hash == b[i].hash);
		FUZZ_CHECK(a[i].stream == b[i].stream);
	}
	return 0;
}
