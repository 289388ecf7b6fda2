/* SPDX-License-Identifier: Apache-2.0 */
/* fcgi_scan_feed() over arbitrary bytes: fed whole and in the pieces the
 * input's first bytes choose, the events (status, absolute offset, kept
 * values) must be the same, every kept value NUL-terminated at its length
 * inside the arena, and the input untouched.  With the first byte's top
 * bit, the rest is wrapped as the content of one request's FCGI_PARAMS
 * records (a valid FCGI_BEGIN_REQUEST before, the empty record after), so
 * that random bytes reach the name-value parser.  Two names are cut
 * (fcgi_scan_config_cut()), the others dropped past their limits. */
#include "fuzz.h"

#include <string.h>

#include "fcgi-scan.h"

#define MAX_EV 16

static const char *const names[] = {
	"REQUEST_METHOD",  "REQUEST_URI", "HTTP_TRACEPARENT",
	"HTTP_TRACESTATE", "A",           "AB"};
#define N_NAMES (sizeof(names) / sizeof(names[0]))

struct ev {
	int st;
	size_t off;
	uint16_t present;
	uint32_t hash[N_NAMES];
};

static uint32_t
hash(const char *s, size_t n)
{
	uint32_t h = 2166136261u;

	while (n--)
		h = (h ^ (uint8_t)*s++) * 16777619u;
	return h;
}

static unsigned
run(const struct fcgi_scan_config *cfg,
    const uint8_t *p,
    size_t n,
    const uint8_t *cuts,
    size_t ncuts,
    struct ev *ev)
{
	static struct fcgi_scan st;
	size_t off = 0, ci = 0, end;
	unsigned nev = 0, k;

	fcgi_scan_reset(&st);
	while (off < n) {
		size_t step = ncuts ? (size_t)(1u + cuts[ci++ % ncuts] % 64u) : n;

		end = off + step < n ? off + step : n;
		while (off < end) {
			size_t used = 0;
			int r = fcgi_scan_feed(&st, cfg, p + off, end - off, &used);

			FUZZ_CHECK(used <= end - off);
			off += used;
			if (r == FCGI_SCAN_MORE) {
				FUZZ_CHECK(off == end);
				continue;
			}
			if (nev == MAX_EV)
				return nev;
			ev[nev].st = r;
			ev[nev].off = off;
			ev[nev].present = 0;
			for (k = 0; k < N_NAMES; k++) {
				size_t l = 99999;
				const char *v = fcgi_scan_value(&st, k, &l);

				ev[nev].hash[k] = 0;
				if (!v)
					continue;
				FUZZ_CHECK(v >= st.arena &&
					   v + l < st.arena + FCGI_SCAN_ARENA);
				FUZZ_CHECK(v[l] == '\0' && strlen(v) == l);
				FUZZ_CHECK(l <= cfg->value_max[k]);
				ev[nev].present |= (uint16_t)(1u << k);
				ev[nev].hash[k] = hash(v, l);
			}
			nev++;
		}
	}
	return nev;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t buf[1 << 16], copy[1 << 16];
	static const size_t maxes[N_NAMES] = {20, 256, 64, 512, 3, 300};
	struct fcgi_scan_config cfg;
	struct ev a[MAX_EV], b[MAX_EV];
	const uint8_t *cuts;
	size_t n = 0, ncuts, i;
	unsigned na, nb, mode;

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
		FUZZ_CHECK(fcgi_scan_config_add(&cfg, names[i], maxes[i]) == (int)i);
	/* Longer values of these two are cut, not dropped. */
	FUZZ_CHECK(fcgi_scan_config_cut(&cfg, 1) == 0);
	FUZZ_CHECK(fcgi_scan_config_cut(&cfg, 4) == 0);
	if (mode & 0x80) {
		/* BEGIN_REQUEST id 1, then PARAMS records of up to 255 bytes
		 * (mode's low bits), then the empty one */
		static const uint8_t begin[16] = {1, 1, 0, 1, 0, 8, 0, 0,
						  0, 1, 0, 0, 0, 0, 0, 0};
		size_t rec = 1 + (mode & 0x7f) * 2, off = 0;

		memcpy(buf, begin, 16);
		n = 16;
		while (off < size && n + 8 + rec + 16 < sizeof(buf)) {
			size_t l = size - off < rec ? size - off : rec;
			uint8_t h[8] = {1,          4, 0, 1, (uint8_t)(l >> 8),
					(uint8_t)l, 0, 0};

			memcpy(buf + n, h, 8);
			memcpy(buf + n + 8, data + off, l);
			n += 8 + l;
			off += l;
		}
		memcpy(buf + n, "\1\4\0\1\0\0\0\0", 8);
		n += 8;
	} else {
		n = size < sizeof(buf) ? size : sizeof(buf);
		memcpy(buf, data, n);
	}
	memcpy(copy, buf, n);
	na = run(&cfg, buf, n, NULL, 0, a);
	nb = run(&cfg, buf, n, cuts, ncuts, b);
	FUZZ_CHECK(memcmp(copy, buf, n) == 0);
	FUZZ_CHECK(na == nb);
	for (i = 0; i < na; i++) {
		FUZZ_CHECK(a[i].st == b[i].st && a[i].off == b[i].off);
		FUZZ_CHECK(a[i].present == b[i].present);
		FUZZ_CHECK(memcmp(a[i].hash, b[i].hash, sizeof(a[i].hash)) == 0);
	}
	if (mode & 0x80)
		FUZZ_CHECK(na >= 1 && a[na - 1].st == FCGI_SCAN_PARAMS_END &&
			   a[na - 1].off == n);
	return 0;
}
