/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP/2 frame and HPACK request scanner: see h2-scan.h. */
#include "config.h"

#include "h2-scan.h"
#include "h2-huff.h"

#include <errno.h>
#include <string.h>

_Static_assert(sizeof(struct h2_scan) <= H2_SCAN_STATE_MAX,
	       "struct h2_scan must fit in one socket-level pool entry");
_Static_assert(H2_SCAN_ARENA < 65536 && H2_SCAN_ENTRIES == 128,
	       "arena offsets are 16 bits, entry slots 7");
_Static_assert(H2_SCAN_TABLE_MAX - 32 <= 65535, "entry lengths are 16 bits");

/* Frame types and flags, RFC 9113 §6. */
enum {
	F_DATA = 0,
	F_HEADERS = 1,
	F_RST_STREAM = 3,
	F_PUSH_PROMISE = 5,
	F_CONTINUATION = 9
};
#define FL_END_HEADERS 0x04
#define FL_PADDED      0x08
#define FL_PRIORITY    0x20

/* Where the feed is: the preface, a frame header, a HEADERS frame's pad
 * length and priority fields, a header block fragment, padding, another
 * frame's payload. */
enum { PH_PREFACE = 0, PH_HDR, PH_PADLEN, PH_PRIO, PH_BLOCK, PH_PAD, PH_SKIP, PH_DEAD };
/* Where the HPACK decoder is: at a representation's first byte, in an
 * integer's continuation bytes, at a string's first byte, in a string. */
enum { HP_START = 0, HP_INT, HP_SLEN, HP_STR };
/* The representation (RFC 7541 §6) and which of its integers is read. */
enum { K_INDEXED = 0, K_INC, K_NOINC, K_SIZE };
enum { I_INDEX = 0, I_NAME, I_SIZE, I_SLEN };

#define K_NONE 0xff
/* e_k: the configured name in the low bits (K_NONE's low bits: none) ... */
#define E_K_MASK 0x0f
#define E_K_NONE 0x0f
/* ... and the value: kept in the arena, kept cut at H2_SCAN_VALUE_MAX. */
#define E_KEPT 0x10
#define E_CUT  0x20

/* RFC 7541 Appendix A. */
struct static_entry {
	const char *name, *value;
	uint8_t nlen, vlen;
};
#define S(n_, v_)                                      \
	{                                              \
		n_, v_, sizeof(n_) - 1, sizeof(v_) - 1 \
	}
static const struct static_entry static_table[62] = {
	{"", "", 0, 0}, /* index 0 is not an entry */
	S(":authority", ""),
	S(":method", "GET"),
	S(":method", "POST"),
	S(":path", "/"),
	S(":path", "/index.html"),
	S(":scheme", "http"),
	S(":scheme", "https"),
	S(":status", "200"),
	S(":status", "204"),
	S(":status", "206"),
	S(":status", "304"),
	S(":status", "400"),
	S(":status", "404"),
	S(":status", "500"),
	S("accept-charset", ""),
	S("accept-encoding", "gzip, deflate"),
	S("accept-language", ""),
	S("accept-ranges", ""),
	S("accept", ""),
	S("access-control-allow-origin", ""),
	S("age", ""),
	S("allow", ""),
	S("authorization", ""),
	S("cache-control", ""),
	S("content-disposition", ""),
	S("content-encoding", ""),
	S("content-language", ""),
	S("content-length", ""),
	S("content-location", ""),
	S("content-range", ""),
	S("content-type", ""),
	S("cookie", ""),
	S("date", ""),
	S("etag", ""),
	S("expect", ""),
	S("expires", ""),
	S("from", ""),
	S("host", ""),
	S("if-match", ""),
	S("if-modified-since", ""),
	S("if-none-match", ""),
	S("if-range", ""),
	S("if-unmodified-since", ""),
	S("last-modified", ""),
	S("link", ""),
	S("location", ""),
	S("max-forwards", ""),
	S("proxy-authenticate", ""),
	S("proxy-authorization", ""),
	S("range", ""),
	S("referer", ""),
	S("refresh", ""),
	S("retry-after", ""),
	S("server", ""),
	S("set-cookie", ""),
	S("strict-transport-security", ""),
	S("transfer-encoding", ""),
	S("user-agent", ""),
	S("vary", ""),
	S("via", ""),
	S("www-authenticate", ""),
};
#undef S
#define STATIC_N 61

/*
 * The Huffman code of RFC 7541 Appendix B is canonical: codes of one
 * length are consecutive, in symbol order, and each length's first code
 * follows the previous length's last (checked against the RFC's table by
 * test/test-h2-scan.c through its Appendix C vectors and libnghttp2's
 * encoder over every byte value).  So a code is decoded from the next 30
 * bits by its length alone: the codes of up to 12 bits (the letters,
 * digits and most punctuation), with the code after them when it ends
 * within the 12 bits too, by one lookup of the next 12 bits (h2-huff.h),
 * longer ones by comparing against each length's last code.  The tables
 * below were derived from the RFC's code lengths (its "len" column).
 */
/* Symbols in code order (by length, then value); EOS last. */
/* clang-format off */
static const uint8_t huff_sym[256] = {
	/* 5 bits */
	48, 49, 50, 97, 99, 101, 105, 111, 115, 116,
	/* 6 bits */
	32, 37, 45, 46, 47, 51, 52, 53, 54, 55, 56, 57, 61, 65, 95, 98, 100,
	102, 103, 104, 108, 109, 110, 112, 114, 117,
	/* 7 bits */
	58, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82,
	83, 84, 85, 86, 87, 89, 106, 107, 113, 118, 119, 120, 121, 122,
	/* 8 bits */
	38, 42, 44, 59, 88, 90,
	/* 10 bits */
	33, 34, 40, 41, 63,
	/* 11 bits */
	39, 43, 124,
	/* 12 bits */
	35, 62,
	/* 13 bits */
	0, 36, 64, 91, 93, 126,
	/* 14 bits */
	94, 125,
	/* 15 bits */
	60, 96, 123,
	/* 19 bits */
	92, 195, 208,
	/* 20 bits */
	128, 130, 131, 162, 184, 194, 224, 226,
	/* 21 bits */
	153, 161, 167, 172, 176, 177, 179, 209, 216, 217, 227, 229, 230,
	/* 22 bits */
	129, 132, 133, 134, 136, 146, 154, 156, 160, 163, 164, 169, 170, 173,
	178, 181, 185, 186, 187, 189, 190, 196, 198, 228, 232, 233,
	/* 23 bits */
	1, 135, 137, 138, 139, 140, 141, 143, 147, 149, 150, 151, 152, 155,
	157, 158, 165, 166, 168, 174, 175, 180, 182, 183, 188, 191, 197, 231,
	239,
	/* 24 bits */
	9, 142, 144, 145, 148, 159, 171, 206, 215, 225, 236, 237,
	/* 25 bits */
	199, 207, 234, 235,
	/* 26 bits */
	192, 193, 200, 201, 202, 205, 210, 213, 218, 219, 238, 240, 242, 243,
	255,
	/* 27 bits */
	203, 204, 211, 212, 214, 221, 222, 223, 241, 244, 245, 246, 247, 248,
	250, 251, 252, 253, 254,
	/* 28 bits */
	2, 3, 4, 5, 6, 7, 8, 11, 12, 14, 15, 16, 17, 18, 19, 20, 21, 23, 24,
	25, 26, 27, 28, 29, 30, 31, 127, 220, 249,
	/* 30 bits */
	10, 13, 22,
};
/* clang-format on */
/* Per length: one past the last code, and the index in huff_sym of
 * code 0 (the first code's index minus its value). */
static const uint32_t huff_end[31] = {
	0x0,       0x0,      0x0,       0x0,      0x0,       0xa,       0x2e,
	0x7c,      0xfe,     0x0,       0x3fd,    0x7fd,     0xffc,     0x1ffe,
	0x3ffe,    0x7fff,   0x0,       0x0,      0x0,       0x7fff3,   0xfffee,
	0x1fffe9,  0x3fffec, 0x7ffff5,  0xfffff6, 0x1fffff0, 0x3ffffef, 0x7fffff1,
	0xfffffff, 0x0,      0x40000000};
static const int32_t huff_off[31] = {
	0,          0,        0,          0,         0,         0,         -10,
	-56,        -180,     74,         -942,      -1963,     -4008,     -8100,
	-16290,     -32672,   95,         95,        95,        -524177,   -1048452,
	-2097010,   -4194139, -8388423,   -16777020, -33554226, -67108642, -134217489,
	-268435202, 253,      -1073741567};
#define MIN(a_, b_) ((a_) < (b_) ? (a_) : (b_))

int
h2_scan_config_add(struct h2_scan_config *cfg, const char *name)
{
	size_t n = name ? strlen(name) : 0, i;
	unsigned k;

	if (n == 0 || n > H2_SCAN_NAME_MAX)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];

		/* HTTP/2 sends names in lower case (RFC 9113 §8.2.1), a colon
		 * only first: any other name could never match. */
		if (c <= 0x20 || c >= 0x7f || (c >= 'A' && c <= 'Z') || (c == ':' && i))
			return -EINVAL;
	}
	for (k = 0; k < cfg->n; k++)
		if (cfg->name_len[k] == n && memcmp(cfg->name[k], name, n) == 0)
			return -EEXIST;
	if (cfg->n >= H2_SCAN_KEEP_MAX)
		return -ENOSPC;
	k = cfg->n++;
	memcpy(cfg->name[k], name, n);
	cfg->name_len[k] = (uint8_t)n;
	cfg->by_len[n] |= (uint16_t)(1u << k);
	for (i = 1; i <= STATIC_N; i++)
		if (static_table[i].nlen == n &&
		    memcmp(static_table[i].name, name, n) == 0) {
			cfg->static_k[i] = (uint8_t)(k + 1);
			cfg->static_named |= 1ull << i;
		}
	return (int)k;
}

void
h2_scan_reset(struct h2_scan *st, unsigned preface_seen)
{
	/* The entries, the name and value buffers and the arena need no
	 * clearing: only live entries and decoded bytes are read. */
	memset(st, 0, offsetof(struct h2_scan, e_nlen));
	st->t_max = 4096; /* SETTINGS_HEADER_TABLE_SIZE's initial value */
	st->f_k = K_NONE;
	st->pre = (uint8_t)preface_seen;
	st->phase = preface_seen == H2_SCAN_PREFACE_LEN ? PH_HDR : PH_PREFACE;
	if (preface_seen > H2_SCAN_PREFACE_LEN) {
		st->why = H2_SCAN_WHY_PREFACE;
		st->phase = PH_DEAD;
	}
}

void
h2_scan_stop(struct h2_scan *st)
{
	if (st->why == H2_SCAN_WHY_NONE)
		st->why = H2_SCAN_WHY_CALLER;
	st->phase = PH_DEAD;
}

static enum h2_scan_status
give_up(struct h2_scan *st, uint8_t why)
{
	st->phase = PH_DEAD;
	st->why = why;
	return H2_SCAN_GAVE_UP;
}

/* A field of the state out of every range a feed leaves it in: it was
 * changed under a feed (two threads reading one connection feed one
 * state at once) or overwritten.  Give up before the field indexes
 * anything; *bad: no byte of this piece was used. */
static enum h2_scan_status
state_bad(struct h2_scan *st, size_t *bad)
{
	*bad = 0;
	return give_up(st, H2_SCAN_WHY_STATE);
}

/* ---- the dynamic table model (RFC 7541 §2.3.2, §4) ----------------------- */

static unsigned
slot_of(const struct h2_scan *st, uint32_t d)
{
	/* d: 1 for the newest entry */
	return (st->e_head - d) & (H2_SCAN_ENTRIES - 1);
}

static void
evict_to(struct h2_scan *st, uint32_t max)
{
	while (st->t_size > max && st->e_count) {
		unsigned s = slot_of(st, st->e_count);

		st->t_size -= 32u + st->e_nlen[s] + st->e_vlen[s];
		if (st->e_k[s] & E_KEPT) {
			/* Kept values are in entry order: the oldest entry's is
			 * at the arena's tail. */
			unsigned n = MIN(st->e_vlen[s], H2_SCAN_VALUE_MAX);

			st->a_tail = (uint16_t)((st->a_tail + n) % H2_SCAN_ARENA);
			st->a_used = (uint16_t)(st->a_used - n);
		}
		st->e_count--;
	}
}

/* §4.4: a new entry (the field just decoded, its value in st->value if
 * its name is configured).  Returns false if the model cannot hold it. */
static bool
insert(struct h2_scan *st, uint32_t nlen, uint32_t vlen, unsigned k)
{
	uint64_t size = 32u + (uint64_t)nlen + vlen;
	unsigned s;

	if (size > st->t_max) {
		/* Not an error: the table is emptied, nothing added. */
		evict_to(st, 0);
		return true;
	}
	evict_to(st, st->t_max - (uint32_t)size);
	if (st->e_count >= H2_SCAN_ENTRIES)
		return false;
	s = st->e_head & (H2_SCAN_ENTRIES - 1);
	st->e_head = (uint8_t)((s + 1) & (H2_SCAN_ENTRIES - 1));
	st->e_count++;
	st->t_size += (uint32_t)size;
	st->e_nlen[s] = (uint16_t)nlen;
	st->e_vlen[s] = (uint16_t)vlen;
	st->e_k[s] = E_K_NONE;
	/* Every entry's d grows by one; bits past e_count are not read
	 * (indexed_run()), so an eviction leaves them. */
	st->e_named = st->e_named << 1 | (k != K_NONE);
	if (k == K_NONE)
		return true;
	st->e_k[s] = (uint8_t)k;
	if (MIN(vlen, H2_SCAN_VALUE_MAX) <= (uint32_t)(H2_SCAN_ARENA - st->a_used)) {
		unsigned n = MIN(vlen, H2_SCAN_VALUE_MAX);
		unsigned off = (st->a_tail + st->a_used) % H2_SCAN_ARENA;
		unsigned first = MIN(n, H2_SCAN_ARENA - off);

		memcpy(st->arena + off, st->value, first);
		memcpy(st->arena, st->value + first, n - first);
		st->e_off[s] = (uint16_t)off;
		st->a_used = (uint16_t)(st->a_used + n);
		st->e_k[s] |= E_KEPT | (vlen > H2_SCAN_VALUE_MAX ? E_CUT : 0);
	}
	return true;
}

/* ---- HPACK (RFC 7541 §5, §6) -------------------------------------------- */

static unsigned
static_k(const struct h2_scan_config *cfg, uint32_t idx)
{
	return cfg->static_k[idx] ? cfg->static_k[idx] - 1u : K_NONE;
}

/* An indexed header field (§6.1): reported if its name is configured. */
static enum h2_scan_status
indexed(struct h2_scan *st, const struct h2_scan_config *cfg, uint32_t idx)
{
	unsigned s, k, off;

	if (idx == 0 || (idx > STATIC_N && idx - STATIC_N > st->e_count))
		return give_up(st, H2_SCAN_WHY_HPACK);
	if (idx <= STATIC_N) {
		k = static_k(cfg, idx);
		if (k == K_NONE || !st->report)
			return H2_SCAN_MORE;
		st->rep_k = (uint8_t)k;
		st->rep_static = (uint8_t)idx;
		st->rep_len = static_table[idx].vlen;
		st->rep_flags = 0;
		return H2_SCAN_FIELD;
	}
	s = slot_of(st, idx - STATIC_N);
	k = st->e_k[s] & E_K_MASK;
	if (k == E_K_NONE || !st->report)
		return H2_SCAN_MORE;
	st->rep_k = (uint8_t)k;
	st->rep_static = 0;
	off = st->e_off[s];
	if ((st->e_k[s] & E_KEPT) && off < H2_SCAN_ARENA) {
		unsigned n = MIN(st->e_vlen[s], H2_SCAN_VALUE_MAX);
		unsigned first = MIN(n, H2_SCAN_ARENA - off);

		memcpy(st->value, st->arena + off, first);
		memcpy(st->value + first, st->arena, n - first);
		st->rep_len = (uint16_t)n;
		st->rep_flags = st->e_k[s] & E_CUT ? H2_SCAN_F_CUT : 0;
	} else {
		st->rep_len = 0;
		st->rep_flags = H2_SCAN_F_UNKNOWN;
	}
	return H2_SCAN_FIELD;
}

static unsigned
name_match(const struct h2_scan_config *cfg, const uint8_t *name, uint32_t len)
{
	unsigned m;

	if (len == 0 || len > H2_SCAN_NAME_MAX)
		return K_NONE;
	for (m = cfg->by_len[len]; m; m &= m - 1) {
		unsigned k = (unsigned)__builtin_ctz(m);

		if (memcmp(cfg->name[k], name, len) == 0)
			return k;
	}
	return K_NONE;
}

/* The field's value ended. */
static enum h2_scan_status
field_end(struct h2_scan *st)
{
	uint32_t vlen = st->dec_len;

	st->hp = HP_START;
	st->field_seen = 1;
	if (st->kind == K_INC && !insert(st, st->f_nlen, vlen, st->f_k))
		return give_up(st, H2_SCAN_WHY_TABLE);
	if (st->f_k == K_NONE || !st->report)
		return H2_SCAN_MORE;
	st->rep_k = st->f_k;
	st->rep_static = 0;
	st->rep_len = (uint16_t)MIN(vlen, H2_SCAN_VALUE_MAX);
	st->rep_flags = vlen > H2_SCAN_VALUE_MAX ? H2_SCAN_F_CUT : 0;
	return H2_SCAN_FIELD;
}

/* The string in progress ended.  Inlined, like int_done(), into hpack()'s
 * few callers: out of line, each of a request's two or three strings and
 * its integers paid a call that saved six registers (bench/h2-insns.sh). */
static inline __attribute__((always_inline)) enum h2_scan_status
string_end(struct h2_scan *st, const struct h2_scan_config *cfg)
{
	/* §5.2: at most 7 bits of padding, the most significant bits of
	 * EOS (all ones). */
	if (st->str_huff &&
	    (st->h_bits > 7 || (st->h_bits && ~st->h_acc >> (64 - st->h_bits))))
		return give_up(st, H2_SCAN_WHY_HPACK);
	if (st->str_value)
		return field_end(st);
	st->f_nlen = st->dec_len;
	st->f_k = (uint8_t)name_match(cfg, st->name, st->dec_len);
	st->str_value = 1;
	st->hp = HP_SLEN;
	return H2_SCAN_MORE;
}

/* The code at the top of w (acc's top 32 bits), known to be at least
 * l bits long: its length, compared against each length's last code
 * from l on (huff_end[30] is above every 30-bit value), and its index in
 * huff_sym (256: EOS).  The caller knows that 30 bits are there, or
 * checks the length it returns against the bits it has. */
static inline __attribute__((always_inline)) unsigned
huff_len(uint32_t w, unsigned l, int32_t *idx)
{
	uint32_t c;

	for (;; l++) {
		c = w >> (32 - l);
		if (c < huff_end[l])
			break;
	}
	*idx = (int32_t)c + huff_off[l];
	return l;
}

/* Huffman codes from acc (its top bits), so that every code taken is
 * complete (no length check): one or two per lookup of the pair table
 * while acc holds at least its 12 bits, a longer code only while it
 * holds at least 30, the longest code (else it stops, for a refill).
 * mode: HM_COUNT only counts them (a value not kept), HM_STORE stores
 * each at dst[len] (the caller made sure of room for all and one byte
 * more: from 64 bits at most 12 codes are taken, and a lookup writes two
 * bytes, the second a spare one when it decodes one code or none),
 * HM_CAP stores while len < cap.  Returns the length of an EOS code met
 * (acc and bits as before it: the caller gives up), else 0.  Inlined per
 * mode. */
enum { HM_COUNT, HM_STORE, HM_CAP };
static inline __attribute__((always_inline)) unsigned
huff_codes(uint64_t *accp,
	   unsigned *bitsp,
	   uint32_t *lenp,
	   uint8_t *dst,
	   uint32_t cap,
	   int mode)
{
	uint64_t acc = *accp;
	int bits = (int)*bitsp;
	unsigned eos = 0, l;
	size_t len = *lenp;
	int32_t idx;

	for (;;) {
		/* The pair table's codes.  An entry of a longer code (bits
		 * H2_HUFF_LONG, no symbol) takes bits below 0 and shifts
		 * nothing (128 is 0 modulo 64): the loop ends on it without
		 * a test of its own. */
		do {
			const struct h2_huff_pair *e =
				&h2_huff_pair[acc >> (64 - H2_HUFF_PAIR_BITS)];

			l = e->bits;
			/* both symbols stored (the second a spare byte when
			 * there is one) */
			if (mode == HM_STORE) {
				memcpy(dst + len, e->sym, 2);
			} else if (mode == HM_CAP) {
				if (len < cap)
					dst[len] = e->sym[0];
				if (e->n == 2 && len + 1 < cap)
					dst[len + 1] = e->sym[1];
			}
			len += e->n;
			acc <<= l & 63;
			bits -= (int)l;
		} while (bits >= H2_HUFF_PAIR_BITS);
		if (__builtin_expect(bits >= 0, 1))
			break;
		/* a code longer than 12 bits: complete with 30 at hand */
		bits += H2_HUFF_LONG;
		if (bits < 30)
			break;
		l = huff_len((uint32_t)(acc >> 32), H2_HUFF_PAIR_BITS + 1, &idx);
		if (idx >= 256) {
			eos = l;
			break;
		}
		if (mode == HM_STORE || (mode == HM_CAP && len < cap))
			dst[len] = huff_sym[idx];
		len++;
		acc <<= l;
		bits -= (int)l;
		if (bits < H2_HUFF_PAIR_BITS)
			break;
	}
	*accp = acc;
	*bitsp = (unsigned)bits;
	*lenp = (uint32_t)len;
	return eos;
}

/* The codes of p[*ip..n) after those in acc, while at least 30 bits are
 * at hand (the longest code: every code is complete), refilling acc as
 * it goes: with 8 bytes at hand in one load, counted by whole bytes
 * (bits is below 30 at each refill, so that is 4 to 8 of them, and 56 to
 * 63 bits after; the bits of acc below the counted ones are then those
 * of the next bytes, which a later refill ORs in again, and none is left
 * there once all n are counted), the last ones of a piece of 8 or more
 * in one load of its last 8, of a shorter piece a byte at a time.  Ends
 * with every byte in and fewer than 30 bits, at an EOS code (returns its
 * length), or with HM_STORE where room for the codes of one more refill
 * (12 and a spare byte: huff_codes()) is not sure (the caller goes on
 * with HM_CAP).  Inlined per mode. */
static inline __attribute__((always_inline)) unsigned
huff_run(const uint8_t *p,
	 size_t n,
	 size_t *ip,
	 uint64_t *accp,
	 unsigned *bitsp,
	 uint32_t *lenp,
	 uint8_t *dst,
	 uint32_t cap,
	 int mode)
{
	size_t i = *ip;
	uint64_t acc = *accp;
	unsigned bits = *bitsp, eos = 0;

	for (;;) {
		/* Not *lenp + 13 > cap: that wrapped for a dec_len near 2^32,
		 * which no string reaches but a state fed by two threads at
		 * once may hold (one's str_left taken from below the
		 * other's), and the codes went 4 GiB past the state. */
		if (mode == HM_STORE && *lenp > cap - 13)
			break;
		if (n - i >= 8) {
			uint64_t v;

			memcpy(&v, p + i, 8);
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_BIG_ENDIAN__
			v = __builtin_bswap64(v);
#endif
			acc |= v >> bits;
			i += (63 - bits) >> 3;
			bits |= 56;
		} else {
			if (i < n && n >= 8) {
				/* p[i] at the top of the last 8 bytes */
				uint64_t v;
				unsigned have = (unsigned)(n - i);
				unsigned k = MIN((64 - bits) >> 3, have);

				memcpy(&v, p + n - 8, 8);
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_BIG_ENDIAN__
				v = __builtin_bswap64(v);
#endif
				v <<= 8 * (8 - have);
				acc |= v >> (64 - 8 * k) << (64 - 8 * k - bits);
				bits += 8 * k;
				i += k;
			} else {
				while (bits <= 56 && i < n) {
					acc |= (uint64_t)p[i++] << (56 - bits);
					bits += 8;
				}
			}
			if (bits < 30)
				break; /* all bytes are in */
		}
		eos = huff_codes(&acc, &bits, lenp, dst, cap, mode);
		if (eos)
			break;
	}
	*ip = i;
	*accp = acc;
	*bitsp = bits;
	return eos;
}

/* n bytes of the string in progress: the name (kept up to
 * H2_SCAN_NAME_MAX bytes to compare), the value (kept up to
 * H2_SCAN_VALUE_MAX if the name is configured) or only counted.  On a bad
 * code *bad is the number of bytes up to the one that ends it. */
static enum h2_scan_status
string_bytes(struct h2_scan *st, const uint8_t *p, size_t n, size_t *bad)
{
	uint8_t *dst = NULL;
	uint32_t cap = 0, len = st->dec_len;
	uint64_t acc;
	unsigned bits, eos;
	size_t i;

	if (!st->str_value) {
		dst = st->name;
		cap = H2_SCAN_NAME_MAX;
	} else if (st->f_k != K_NONE) {
		dst = st->value;
		cap = H2_SCAN_VALUE_MAX;
	}
	if (!st->str_huff) {
		if (len < cap)
			memcpy(dst + len, p, MIN(n, cap - len));
		st->dec_len = len + (uint32_t)n;
		return H2_SCAN_MORE;
	}
	/* The bits not yet decoded are the top bits of acc. */
	acc = st->h_acc;
	bits = st->h_bits;
	/* Fewer than the longest code are ever left over (state_bad()). */
	if (bits >= 30)
		return state_bad(st, bad);
	i = 0;
	/* A value not kept is only counted; room for every code of a
	 * refill spares the check per symbol while there is room. */
	if (!dst) {
		eos = huff_run(p, n, &i, &acc, &bits, &len, NULL, 0, HM_COUNT);
	} else {
		eos = huff_run(p, n, &i, &acc, &bits, &len, dst, cap, HM_STORE);
		if (!eos)
			eos = huff_run(p, n, &i, &acc, &bits, &len, dst, cap, HM_CAP);
	}
	if (eos) {
		/* EOS: up to the byte holding its last bit (bits - eos after
		 * it, in acc) */
		*bad = i - (bits - eos) / 8;
		return give_up(st, H2_SCAN_WHY_HPACK);
	}
	/* The codes complete in the last bits; the rest waits for the
	 * string's next bytes (or is its padding).  The bits below the
	 * last are zeros: a code (or pair) is taken only if its length is
	 * within bits. */
	while (bits >= 5) {
		const struct h2_huff_pair *e =
			&h2_huff_pair[acc >> (64 - H2_HUFF_PAIR_BITS)];
		unsigned l = e->bits, sym;
		int32_t idx;

		if (l != H2_HUFF_LONG) {
			if (l <= bits) {
				if (len < cap)
					dst[len] = e->sym[0];
				if (e->n == 2 && len + 1 < cap)
					dst[len + 1] = e->sym[1];
				len += e->n;
				acc <<= l;
				bits -= l;
				continue;
			}
			/* the first code alone: its length (5 to 12) */
			if (e->n == 2)
				l = huff_len((uint32_t)(acc >> 32), 5, &idx);
			if (l > bits)
				break;
			sym = e->sym[0];
		} else {
			l = huff_len((uint32_t)(acc >> 32), H2_HUFF_PAIR_BITS + 1,
				     &idx);
			if (l > bits)
				break;
			if (idx >= 256) {
				*bad = n - (bits - l) / 8; /* EOS, as above */
				return give_up(st, H2_SCAN_WHY_HPACK);
			}
			sym = huff_sym[idx];
		}
		acc <<= l;
		bits -= l;
		if (len < cap)
			dst[len] = (uint8_t)sym;
		len++;
	}
	st->h_acc = acc;
	st->h_bits = (uint8_t)bits;
	st->dec_len = len;
	return H2_SCAN_MORE;
}

/* The integer in progress (§5.1) is complete in st->int_val.  Inlined
 * (string_end()). */
static inline __attribute__((always_inline)) enum h2_scan_status
int_done(struct h2_scan *st, const struct h2_scan_config *cfg)
{
	uint32_t v = st->int_val;

	switch (st->int_what) {
	case I_INDEX:
		st->hp = HP_START;
		st->field_seen = 1;
		return indexed(st, cfg, v);
	case I_SIZE:
		/* §4.2: only at the start of a block; our limit stands for
		 * the SETTINGS_HEADER_TABLE_SIZE the server sent. */
		if (st->field_seen || v > H2_SCAN_TABLE_MAX)
			return give_up(st, H2_SCAN_WHY_HPACK);
		st->t_max = v;
		evict_to(st, v);
		st->hp = HP_START;
		return H2_SCAN_MORE;
	case I_NAME:
		st->hp = HP_SLEN;
		if (v == 0) {
			st->str_value = 0;
			return H2_SCAN_MORE;
		}
		st->str_value = 1;
		if (v <= STATIC_N) {
			st->f_k = (uint8_t)static_k(cfg, v);
			st->f_nlen = static_table[v].nlen;
		} else {
			unsigned s;

			if (v - STATIC_N > st->e_count)
				return give_up(st, H2_SCAN_WHY_HPACK);
			s = slot_of(st, v - STATIC_N);
			st->f_k = (st->e_k[s] & E_K_MASK) == E_K_NONE
					  ? K_NONE
					  : st->e_k[s] & E_K_MASK;
			st->f_nlen = st->e_nlen[s];
		}
		return H2_SCAN_MORE;
	default: /* I_SLEN */
		st->str_left = v;
		st->dec_len = 0;
		st->h_acc = 0;
		st->h_bits = 0;
		st->hp = HP_STR;
		return v ? H2_SCAN_MORE : string_end(st, cfg);
	}
}

/* From p[i]: a run of indexed fields with one-byte indexes (§6.1; most
 * of a later request's block) that are valid and not to be reported,
 * consumed in a tight loop.  Which indexes end the run is worked out
 * once, as a bit per index (0..127): 0 and 127 (a longer index), a
 * dynamic index past the table or past the 64 entries e_named covers
 * (126 and up), and, in a block to report, one whose name is
 * configured.  indexed() decides on those: e_named is only the fast
 * path's (whatever it holds, no field is read outside the state).
 * Returns where the run ends (n, or the first byte that starts
 * anything else: hpack() takes it). */
static inline __attribute__((always_inline)) size_t
indexed_run(struct h2_scan *st,
	    const struct h2_scan_config *cfg,
	    const uint8_t *p,
	    size_t i,
	    size_t n)
{
	size_t start = i;
	uint32_t count = st->e_count;
	/* Entry d (bit d - 1 here) has index d + STATIC_N: bit d + 61 of
	 * the 128 (lo: indexes 0..63, hi: 64..127). */
	uint64_t dyn = count >= 64 ? 0 : ~0ull << count, lo = 1, hi = 3ull << 62;

	if (st->report) {
		dyn |= st->e_named;
		lo |= cfg->static_named;
	}
	lo |= dyn << 62;
	hi |= dyn >> 2;
	while (i < n) {
		unsigned b = p[i];

		/* bit 6 of b: index 64 or above; a shift by b takes its low
		 * 6 bits */
		if (b < 0x80 || ((b & 0x40 ? hi : lo) >> (b & 63) & 1))
			break;
		i++;
	}
	if (i != start) {
		st->kind = K_INDEXED;
		st->field_seen = 1;
	}
	return i;
}

/* Where a feed's reports go (h2_scan_feed_cb()): fn, while it returns
 * true; the offset in the feed of the last one, and how many came there
 * without a byte consumed in between. */
struct sink {
	h2_scan_report_fn *fn;
	void *arg;
	size_t last;
	unsigned same;
};

/* Report r (at offset at of the feed) to the sink: true if it took it
 * and the feed goes on.  A feed of a state changed under it (two
 * threads) could report without consuming anything, each time: a third
 * report at one offset (a block's last field and its end make two) is
 * returned instead, so that the feed ends whatever fn returns. */
static bool
sink_took(struct sink *k, const struct h2_scan *st, enum h2_scan_status r, size_t at)
{
	if (!k->fn)
		return false;
	if (at != k->last) {
		k->last = at;
		k->same = 0;
	} else if (++k->same >= 2) {
		return false;
	}
	return k->fn(k->arg, st, r, at);
}

/* n bytes of a header block fragment (at offset base of the feed);
 * *used: how many were consumed (all of them unless a field is reported
 * and not taken by the sink, or the decoder gives up). */
static enum h2_scan_status
hpack(struct h2_scan *st,
      const struct h2_scan_config *cfg,
      const uint8_t *p,
      size_t n,
      size_t *used,
      struct sink *k,
      size_t base)
{
	enum h2_scan_status r = H2_SCAN_MORE;
	size_t i = 0;

	while (i < n && r == H2_SCAN_MORE) {
		if (st->hp == HP_START && (p[i] & 0x80)) {
			i = indexed_run(st, cfg, p, i, n);
			if (i == n)
				break;
		}
		switch (st->hp) {
		case HP_START: {
			uint8_t b = p[i++];
			unsigned mask;

			if ((b & 0x80) && b != 0xff) {
				/* An indexed field with a one-byte index that
				 * ended a run (indexed_run()): int_done()'s work
				 * here. */
				st->kind = K_INDEXED;
				st->field_seen = 1;
				r = indexed(st, cfg, b & 0x7fu);
				break;
			}
			if (b & 0x80) {
				st->kind = K_INDEXED;
				st->int_what = I_INDEX;
				mask = 0x7f;
			} else if (b & 0x40) {
				st->kind = K_INC;
				st->int_what = I_NAME;
				mask = 0x3f;
			} else if (b & 0x20) {
				st->kind = K_SIZE;
				st->int_what = I_SIZE;
				mask = 0x1f;
			} else {
				/* without indexing, never indexed: the same here */
				st->kind = K_NOINC;
				st->int_what = I_NAME;
				mask = 0x0f;
			}
			st->int_val = b & mask;
			if (st->int_val < mask) {
				r = int_done(st, cfg);
			} else {
				st->hp = HP_INT;
				st->int_shift = 0;
			}
			break;
		}
		case HP_SLEN: {
			uint8_t b = p[i++];

			st->str_huff = b >> 7;
			st->int_what = I_SLEN;
			st->int_val = b & 0x7f;
			if (st->int_val < 0x7f) {
				r = int_done(st, cfg);
			} else {
				st->hp = HP_INT;
				st->int_shift = 0;
			}
			break;
		}
		case HP_INT: {
			uint8_t b = p[i++], shift = st->int_shift;

			/* Four continuation bytes (28 bits) are more than
			 * any index, size or string here can need. */
			if (shift > 21) {
				r = give_up(st, H2_SCAN_WHY_HPACK);
				break;
			}
			st->int_val += (uint32_t)(b & 0x7f) << shift;
			st->int_shift = (uint8_t)(shift + 7);
			if (!(b & 0x80))
				r = int_done(st, cfg);
			break;
		}
		default: { /* HP_STR */
			size_t take = MIN(n - i, st->str_left);

			r = string_bytes(st, p + i, take, &take);
			i += take;
			st->str_left -= (uint32_t)take;
			if (r == H2_SCAN_MORE && st->str_left == 0)
				r = string_end(st, cfg);
			break;
		}
		}
		if (r == H2_SCAN_FIELD && sink_took(k, st, r, base + i))
			r = H2_SCAN_MORE;
	}
	*used = i;
	return r;
}

/* ---- frames (RFC 9113 §4, §6) ------------------------------------------- */

/* The 9 header bytes h are in: start the frame. */
static enum h2_scan_status
frame(struct h2_scan *st, const uint8_t *h)
{
	uint32_t len = (uint32_t)h[0] << 16 | (uint32_t)h[1] << 8 | h[2];
	uint8_t type = h[3], flags = h[4];
	uint32_t id = ((uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 |
		       (uint32_t)h[7] << 8 | h[8]) &
		      0x7fffffffu;

	st->left = len;
	st->pad = 0;
	if (st->in_block) {
		/* §6.10: a block's frames come alone, on its stream. */
		if (type != F_CONTINUATION || id != st->block_id)
			return give_up(st, H2_SCAN_WHY_FRAME);
		st->frame_flags = flags;
		st->phase = PH_BLOCK;
		return H2_SCAN_MORE;
	}
	switch (type) {
	case F_HEADERS: {
		uint32_t need =
			(flags & FL_PADDED ? 1u : 0u) + (flags & FL_PRIORITY ? 5u : 0u);

		/* §5.1.1: a client opens odd streams only. */
		if (id == 0 || !(id & 1) || len < need)
			return give_up(st, H2_SCAN_WHY_FRAME);
		st->block_id = id;
		st->report = id > st->max_id;
		if (st->report)
			st->max_id = id;
		st->in_block = 1;
		st->field_seen = 0;
		st->frame_flags = flags;
		st->prio_left = 5;
		st->phase = flags & FL_PADDED     ? PH_PADLEN
			    : flags & FL_PRIORITY ? PH_PRIO
						  : PH_BLOCK;
		return H2_SCAN_MORE;
	}
	case F_CONTINUATION:
	case F_PUSH_PROMISE: /* a server's frame: its block would be lost */
		return give_up(st, H2_SCAN_WHY_FRAME);
	default:
		/* The caller's stream ended by the client (h2_scan_watch()). */
		if (type == F_RST_STREAM && id != 0 && id == st->watch)
			st->watch_rst = 1;
		/* §5.5: unknown types are ignored, like the rest. */
		st->phase = len ? PH_SKIP : PH_HDR;
		return H2_SCAN_MORE;
	}
}

/* The header block fragment of the frame ended. */
static enum h2_scan_status
fragment_end(struct h2_scan *st)
{
	st->phase = st->pad ? PH_PAD : PH_HDR;
	if (!(st->frame_flags & FL_END_HEADERS))
		return H2_SCAN_MORE;
	st->in_block = 0;
	if (st->hp != HP_START)
		return give_up(st, H2_SCAN_WHY_HPACK); /* a field cut short */
	if (!st->report)
		return H2_SCAN_MORE;
	st->report = 0;
	return H2_SCAN_REQUEST;
}

enum h2_scan_status
h2_scan_feed_cb(struct h2_scan *st,
		const struct h2_scan_config *cfg,
		const void *buf,
		size_t len,
		size_t *consumed,
		h2_scan_report_fn *report,
		void *arg)
{
	const uint8_t *p = buf;
	enum h2_scan_status r = H2_SCAN_MORE;
	size_t off = 0;
	struct sink k = {report, arg, SIZE_MAX, 0};

	if (st->phase == PH_DEAD) {
		*consumed = len;
		return H2_SCAN_MORE;
	}
	while (r == H2_SCAN_MORE) {
		/* Before the end of the bytes: a block's end right after the
		 * field reported last is reported on the next call. */
		if (st->phase == PH_BLOCK && st->left == 0) {
			r = fragment_end(st);
			if (r == H2_SCAN_REQUEST && sink_took(&k, st, r, off))
				r = H2_SCAN_MORE;
			continue;
		}
		if (off == len)
			break;
		switch (st->phase) {
		case PH_PREFACE: {
			unsigned pre = st->pre;
			size_t take, i;

			if (pre >= H2_SCAN_PREFACE_LEN) {
				r = give_up(st, H2_SCAN_WHY_STATE);
				break;
			}
			take = MIN(len - off, (size_t)(H2_SCAN_PREFACE_LEN - pre));
			for (i = 0; i < take; i++)
				if (p[off + i] != (uint8_t)H2_SCAN_PREFACE[pre + i]) {
					off += i + 1;
					r = give_up(st, H2_SCAN_WHY_PREFACE);
					break;
				}
			if (r != H2_SCAN_MORE)
				break;
			st->pre = (uint8_t)(pre + take);
			off += take;
			if (st->pre == H2_SCAN_PREFACE_LEN)
				st->phase = PH_HDR;
			break;
		}
		case PH_HDR: {
			unsigned pos = st->hdr_pos;
			size_t take;

			if (pos >= 9) {
				r = give_up(st, H2_SCAN_WHY_STATE);
				break;
			}
			if (pos == 0 && len - off >= 9) {
				/* A whole header at hand (the usual case): read
				 * where it is. */
				off += 9;
				r = frame(st, p + off - 9);
				break;
			}
			take = MIN(len - off, 9u - pos);
			memcpy(st->hdr + pos, p + off, take);
			pos += (unsigned)take;
			st->hdr_pos = (uint8_t)pos;
			off += take;
			if (pos == 9) {
				st->hdr_pos = 0;
				r = frame(st, st->hdr);
			}
			break;
		}
		case PH_PADLEN: {
			uint32_t need;

			st->pad = p[off++];
			st->left--;
			need = st->pad + (st->frame_flags & FL_PRIORITY ? 5u : 0u);
			/* §6.2: padding longer than what is left is an error */
			if (need > st->left) {
				r = give_up(st, H2_SCAN_WHY_FRAME);
				break;
			}
			st->left -= st->pad;
			st->phase = st->frame_flags & FL_PRIORITY ? PH_PRIO : PH_BLOCK;
			break;
		}
		case PH_PRIO: {
			size_t take = MIN(len - off, (size_t)st->prio_left);

			st->prio_left = (uint8_t)(st->prio_left - take);
			st->left -= (uint32_t)take;
			off += take;
			if (!st->prio_left)
				st->phase = PH_BLOCK;
			break;
		}
		case PH_BLOCK: {
			size_t used = 0;

			r = hpack(st, cfg, p + off, MIN(len - off, (size_t)st->left),
				  &used, &k, off);
			off += used;
			st->left -= (uint32_t)used;
			break;
		}
		case PH_PAD: {
			size_t take = MIN(len - off, (size_t)st->pad);

			st->pad = (uint8_t)(st->pad - take);
			off += take;
			if (!st->pad)
				st->phase = PH_HDR;
			break;
		}
		case PH_SKIP: {
			size_t take = MIN(len - off, (size_t)st->left);

			st->left -= (uint32_t)take;
			off += take;
			if (!st->left)
				st->phase = PH_HDR;
			break;
		}
		case PH_DEAD:
			/* Another feed of the same state gave up meanwhile
			 * (two threads reading one connection): the rest is
			 * unread, as after any give-up. */
			off = len;
			break;
		default:
			r = give_up(st, H2_SCAN_WHY_STATE);
			break;
		}
	}
	*consumed = off;
	return r;
}

enum h2_scan_status
h2_scan_feed(struct h2_scan *st,
	     const struct h2_scan_config *cfg,
	     const void *buf,
	     size_t len,
	     size_t *consumed)
{
	return h2_scan_feed_cb(st, cfg, buf, len, consumed, NULL, NULL);
}

void
h2_scan_field(const struct h2_scan *st, struct h2_scan_field *f)
{
	unsigned stat = st->rep_static, flags = st->rep_flags;
	size_t len = MIN(st->rep_len, H2_SCAN_VALUE_MAX);

	/* Each read once and bounded: the state may have been changed under
	 * the feed (state_bad()). */
	f->k = st->rep_k;
	if ((flags & H2_SCAN_F_UNKNOWN) || stat > STATIC_N) {
		f->value = NULL;
		f->len = 0;
		f->flags = H2_SCAN_F_UNKNOWN;
		return;
	}
	f->flags = flags;
	if (stat) {
		f->value = (const uint8_t *)static_table[stat].value;
		len = MIN(len, static_table[stat].vlen);
	} else {
		f->value = st->value;
	}
	f->len = len;
}

uint32_t
h2_scan_stream(const struct h2_scan *st)
{
	/* A reported block is the one that raised max_id. */
	return st->max_id;
}

/* ---- the server's frames (h2-scan.h, "h2_out_") ---- */

int
h2_out_feed(struct h2_out *o, const void *buf, size_t len, uint32_t stream)
{
	const uint8_t *p = buf;
	size_t off = 0;
	int hit = 0;

	if (o->lost)
		return -1;
	/* An empty iovec's base may be NULL (writev() takes that), and
	 * NULL + 0 is undefined in C. */
	if (len == 0)
		return 0;
	for (;;) {
		/* Whole frame headers and payloads: the usual case. */
		off += h2_out_frames(o, p + off, len - off, stream, &hit);
		if (off >= len)
			return hit;
		/* A frame header split across writes, byte by byte. */
		if (o->pos < 3)
			o->len = (o->len << 8) | p[off];
		else if (o->pos == 3)
			o->type = p[off];
		else if (o->pos >= 5)
			o->sid = (o->sid << 8) | p[off];
		off++;
		if (++o->pos < 9)
			continue;
		o->sid &= 0x7fffffffu; /* the reserved bit (§4.1) */
		if ((o->type == H2_OUT_HEADERS || o->type == H2_OUT_RST_STREAM) &&
		    o->sid != 0 && (stream == 0 || o->sid == stream))
			hit = 1;
		o->left = o->len & 0xffffffu;
		o->len = o->sid = 0;
		o->pos = 0;
	}
}

int
h2_out_skip(struct h2_out *o, size_t len)
{
	if (o->lost)
		return -1;
	if (len == 0)
		return 0;
	if (o->pos == 0 && len <= o->left) {
		o->left -= (uint32_t)len;
		return 0;
	}
	o->lost = 1;
	return -1;
}
