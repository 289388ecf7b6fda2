/* SPDX-License-Identifier: Apache-2.0 */
/* FastCGI record and FCGI_PARAMS scanner: see fcgi-scan.h. */
#include "config.h"

#include "fcgi-scan.h"

#include <errno.h>
#include <string.h>

enum { PH_HDR = 0, PH_CONTENT, PH_PAD, PH_DEAD };
enum { REQ_NONE = 0, REQ_PARAMS, REQ_AFTER };
/* Where the pair in progress is: its name's length, its value's, the name,
 * the value. */
enum { NV_NLEN = 0, NV_VLEN, NV_NAME, NV_VALUE };
/* st->ours */
enum { OURS_NONE = 0, OURS_PARAMS, OURS_BEGIN };
/* FastCGI 1.0, §5.1: FCGI_BEGIN_REQUEST's body is roleB1, roleB0, flags,
 * reserved[5]. */
#define BEGIN_FLAGS_AT 2
#define FCGI_KEEP_CONN 1
/* Bits of st->match that can name a kept name. */
#define KEPT_MASK ((1u << FCGI_SCAN_KEEP_MAX) - 1)

/* A state that two feeds change at once (fcgi-scan.h, "Shared state") may
 * hold anything: every index and offset into the state or the
 * configuration is read once into a local, checked against the array it
 * indexes, and used from there. */

int
fcgi_scan_config_add(struct fcgi_scan_config *cfg, const char *name, size_t value_max)
{
	size_t n = name ? strlen(name) : 0;
	unsigned k;

	if (n == 0 || n > FCGI_SCAN_NAME_MAX || value_max == 0 ||
	    value_max >= FCGI_SCAN_ARENA)
		return -EINVAL;
	for (k = 0; k < cfg->n; k++)
		if (cfg->name_len[k] == n && memcmp(cfg->name[k], name, n) == 0)
			return -EEXIST;
	if (cfg->n >= FCGI_SCAN_KEEP_MAX)
		return -ENOSPC;
	k = cfg->n++;
	memcpy(cfg->name[k], name, n);
	cfg->name_len[k] = (uint8_t)n;
	cfg->value_max[k] = (uint16_t)value_max;
	cfg->by_len[n] |= 1u << k;
	return (int)k;
}

int
fcgi_scan_config_cut(struct fcgi_scan_config *cfg, unsigned k)
{
	if (k >= cfg->n || k >= FCGI_SCAN_KEEP_MAX)
		return -EINVAL;
	cfg->cut |= (uint16_t)(1u << k);
	return 0;
}

void
fcgi_scan_reset(struct fcgi_scan *st)
{
	/* The arena needs no clearing: only present values are read.  But
	 * its last byte is a NUL, which no feed overwrites (value bytes stop
	 * short of it, value_end() writes only NULs): the values are C
	 * strings to their readers (preload/request-cgi.c), and one whose
	 * own NUL another feed of a shared state wrote over must end in the
	 * arena, not run into what the pool entry held before and past it. */
	memset(st, 0, offsetof(struct fcgi_scan, arena));
	st->arena[FCGI_SCAN_ARENA - 1] = '\0';
}

void
fcgi_scan_stop(struct fcgi_scan *st)
{
	if (st->why == FCGI_SCAN_WHY_NONE)
		st->why = FCGI_SCAN_WHY_CALLER;
	st->phase = PH_DEAD;
}

static enum fcgi_scan_status
give_up(struct fcgi_scan *st, uint8_t why)
{
	st->phase = PH_DEAD;
	st->why = why;
	return FCGI_SCAN_GAVE_UP;
}

/* A new request to follow: forget the previous one's values. */
static void
request_begin(struct fcgi_scan *st, uint16_t id)
{
	st->req_id = id;
	st->req_phase = REQ_PARAMS;
	st->last = 0; /* until its flags are read */
	st->present = 0;
	st->arena_used = 0;
	st->nv_phase = NV_NLEN;
	st->lbuf_pos = 0;
	st->keep = -1;
}

/* The pair's name length is known (st->nlen): the kept names of that
 * length are its candidates. */
static void
name_begin(struct fcgi_scan *st, const struct fcgi_scan_config *cfg)
{
	st->match = st->nlen <= FCGI_SCAN_NAME_MAX ? cfg->by_len[st->nlen] : 0;
	st->nv_pos = 0;
}

/* The bytes of value k kept of one of len bytes: its first value_max of a
 * longer one that is cut (fcgi_scan_config_cut()). */
static inline size_t
kept_len(const struct fcgi_scan_config *cfg, unsigned k, size_t len)
{
	return len > cfg->value_max[k] ? cfg->value_max[k] : len;
}

/* The name ended: the value that follows (st->nv_len bytes) is kept if
 * exactly one kept name matched and it fits its limit (or is cut to it)
 * and the arena.  A name seen before in this request replaces its earlier
 * value (dropped even if this one is not kept): the last one wins, as in
 * the table php-fpm builds (main/fastcgi.c, fcgi_hash_set(), which the
 * script's $_SERVER comes from), so that a parameter a server sends twice
 * (nginx's fastcgi_param of a name fastcgi_params has, a header the client
 * sent twice) gives the value the script sees. */
static void
value_begin(struct fcgi_scan *st, const struct fcgi_scan_config *cfg)
{
	uint32_t m = st->match & KEPT_MASK;
	unsigned k;

	st->keep = -1;
	st->nv_pos = 0;
	if (!m || (m & (m - 1)))
		return;
	k = (unsigned)__builtin_ctz(m);
	st->present &= (uint16_t) ~(1u << k);
	if ((st->nv_len > cfg->value_max[k] && !((cfg->cut >> k) & 1)) ||
	    (size_t)st->arena_used + kept_len(cfg, k, st->nv_len) + 1 > FCGI_SCAN_ARENA)
		return;
	st->keep = (int8_t)k;
}

/* Inline: it ends every pair, kept or not. */
static inline __attribute__((always_inline)) void
value_end(struct fcgi_scan *st, const struct fcgi_scan_config *cfg)
{
	int k = st->keep;
	size_t at, len;

	if (k < 0)
		return;
	st->keep = -1;
	if (k >= FCGI_SCAN_KEEP_MAX)
		return;
	at = st->arena_used;
	len = kept_len(cfg, (unsigned)k, st->nv_len);
	if (at + len >= FCGI_SCAN_ARENA)
		return;
	st->arena[at + len] = '\0';
	st->val_off[k] = (uint16_t)at;
	st->val_len[k] = (uint16_t)len;
	st->present |= (uint16_t)(1u << k);
	st->arena_used = (uint16_t)(at + len + 1);
}

/* n bytes of the followed request's FCGI_PARAMS stream. */
static void
params(struct fcgi_scan *st,
       const struct fcgi_scan_config *cfg,
       const uint8_t *p,
       size_t n)
{
	while (n) {
		/* A phase out of range (a state changed under us) would
		 * consume nothing and loop for good: it is taken as one in
		 * range. */
		switch (st->nv_phase & 3) {
		case NV_NLEN:
		case NV_VLEN: {
			uint32_t v;

			if (st->nv_phase == NV_NLEN && st->lbuf_pos == 0 && n >= 2 &&
			    !((p[0] | p[1]) & 0x80)) {
				/* The usual pair: both lengths of one byte, here. */
				st->nlen = p[0];
				v = p[1];
				p += 2;
				n -= 2;
			} else {
				unsigned lp = st->lbuf_pos < sizeof(st->lbuf)
						      ? st->lbuf_pos
						      : 0;

				st->lbuf[lp] = *p++;
				st->lbuf_pos = (uint8_t)(lp + 1);
				n--;
				/* §3.4: a length under 128 is one byte, else four
				 * with the top bit set. */
				if (!(st->lbuf[0] & 0x80))
					v = st->lbuf[0];
				else if (st->lbuf_pos < 4)
					continue;
				else
					v = ((uint32_t)(st->lbuf[0] & 0x7f) << 24) |
					    ((uint32_t)st->lbuf[1] << 16) |
					    ((uint32_t)st->lbuf[2] << 8) | st->lbuf[3];
				st->lbuf_pos = 0;
				if (st->nv_phase == NV_NLEN) {
					st->nlen = v;
					st->nv_phase = NV_VLEN;
					continue;
				}
			}
			name_begin(st, cfg);
			st->nv_len = v; /* the value's, kept for value_begin() */
			st->nv_phase = NV_NAME;
			if (st->nlen == 0) {
				value_begin(st, cfg);
				st->nv_phase = NV_VALUE;
			}
			if (st->nv_phase == NV_VALUE && st->nv_len == 0) {
				value_end(st, cfg);
				st->nv_phase = NV_NLEN;
			}
			break;
		}
		case NV_NAME: {
			uint32_t left = st->nlen - st->nv_pos;
			size_t take = n < left ? n : left;

			uint32_t at = st->nv_pos;

			if (st->match && at == 0 && take == st->nlen &&
			    take <= FCGI_SCAN_NAME_MAX) {
				/* The whole name here (the usual case): one
				 * compare per candidate. */
				uint32_t m = st->match & KEPT_MASK, mm = m;

				while (mm) {
					unsigned k = (unsigned)__builtin_ctz(mm);

					mm &= mm - 1;
					if (memcmp(cfg->name[k], p, take) != 0)
						m &= ~(1u << k);
				}
				st->match = m;
			} else if (st->match) {
				uint32_t m = st->match & KEPT_MASK;
				size_t i;

				/* Candidates have length nlen <= NAME_MAX, so
				 * at + i indexes their names (unless the state
				 * was changed under us: then none matches). */
				if (at >= FCGI_SCAN_NAME_MAX ||
				    take > FCGI_SCAN_NAME_MAX - at)
					m = 0;
				for (i = 0; i < take && m; i++) {
					uint32_t mm = m;

					while (mm) {
						unsigned k =
							(unsigned)__builtin_ctz(mm);

						mm &= mm - 1;
						if ((uint8_t)cfg->name[k][at + i] !=
						    p[i])
							m &= ~(1u << k);
					}
				}
				st->match = m;
			}
			st->nv_pos += (uint32_t)take;
			p += take;
			n -= take;
			if (st->nv_pos == st->nlen) {
				value_begin(st, cfg);
				if (st->nv_len == 0) {
					value_end(st, cfg);
					st->nv_phase = NV_NLEN;
				} else {
					st->nv_phase = NV_VALUE;
				}
			}
			break;
		}
		case NV_VALUE: {
			uint32_t left = st->nv_len - st->nv_pos;
			size_t take = n < left ? n : left;

			int k = st->keep;

			if (k >= 0 && k < FCGI_SCAN_KEEP_MAX) {
				size_t max = cfg->value_max[k];
				/* Past the limit of a value cut: not kept
				 * (nor counted: at stays within what
				 * value_begin() reserved). */
				size_t pos = st->nv_pos < max ? st->nv_pos : max;
				size_t at = (size_t)st->arena_used + pos;
				size_t copy = take < max - pos ? take : max - pos;

				/* A NUL would cut the C string the builder
				 * reads: drop the value whole.  at + copy is
				 * below the arena's end (value_begin()), unless
				 * the state was changed under us. */
				if (memchr(p, '\0', take) || at >= FCGI_SCAN_ARENA ||
				    copy >= FCGI_SCAN_ARENA - at)
					st->keep = -1;
				else
					memcpy(st->arena + at, p, copy);
			}
			st->nv_pos += (uint32_t)take;
			p += take;
			n -= take;
			if (st->nv_pos == st->nv_len) {
				value_end(st, cfg);
				st->nv_phase = NV_NLEN;
			}
			break;
		}
		}
	}
}

/* n bytes of the followed request's FCGI_BEGIN_REQUEST body (8 bytes,
 * st->left of them still to come before these): its flags byte. */
static void
begin_body(struct fcgi_scan *st, const uint8_t *p, size_t n)
{
	uint32_t at = 8u - st->left;

	if (at <= BEGIN_FLAGS_AT && BEGIN_FLAGS_AT - at < n)
		st->last = !(p[BEGIN_FLAGS_AT - at] & FCGI_KEEP_CONN);
}

/* The 8 header bytes are in: start the record.  Returns
 * FCGI_SCAN_PARAMS_END at the followed request's empty FCGI_PARAMS,
 * FCGI_SCAN_GAVE_UP, else FCGI_SCAN_MORE. */
static enum fcgi_scan_status
record(struct fcgi_scan *st)
{
	const uint8_t *h = st->hdr;
	uint8_t type = h[1];
	uint16_t id = (uint16_t)(h[2] << 8 | h[3]);

	if (h[0] != 1)
		return give_up(st, FCGI_SCAN_WHY_VERSION);
	if (type == 0 || type > FCGI_SCAN_TYPE_MAX)
		return give_up(st, FCGI_SCAN_WHY_TYPE);
	st->left = (uint32_t)(h[4] << 8 | h[5]);
	st->pad = h[6];
	st->ours = OURS_NONE;
	st->phase = st->left ? PH_CONTENT : st->pad ? PH_PAD : PH_HDR;
	if (type == FCGI_SCAN_BEGIN_REQUEST) {
		if (st->left != 8)
			return give_up(st, FCGI_SCAN_WHY_BEGIN);
		/* The server closes the connection once it answered the last
		 * request: this one is never run. */
		if (id != 0 && st->last && st->req_phase == REQ_AFTER)
			return give_up(st, FCGI_SCAN_WHY_CLOSING);
		/* A second request while the first's parameters come: a
		 * multiplexing client; it is not followed. */
		if (id != 0 && (st->req_phase != REQ_PARAMS || id == st->req_id)) {
			request_begin(st, id);
			st->ours = OURS_BEGIN;
		}
		return FCGI_SCAN_MORE;
	}
	if (type != FCGI_SCAN_PARAMS || id == 0 || id != st->req_id ||
	    st->req_phase != REQ_PARAMS)
		return FCGI_SCAN_MORE;
	if (st->left) {
		st->ours = OURS_PARAMS;
		return FCGI_SCAN_MORE;
	}
	/* The empty record ends the stream; a pair it cuts is dropped. */
	st->req_phase = REQ_AFTER;
	st->keep = -1;
	return FCGI_SCAN_PARAMS_END;
}

enum fcgi_scan_status
fcgi_scan_feed(struct fcgi_scan *st,
	       const struct fcgi_scan_config *cfg,
	       const void *buf,
	       size_t len,
	       size_t *consumed)
{
	const uint8_t *p = buf;
	size_t off = 0;
	enum fcgi_scan_status r = FCGI_SCAN_MORE;

	while (off < len && r == FCGI_SCAN_MORE) {
		switch (st->phase) {
		case PH_HDR: {
			size_t at = st->hdr_pos, take;

			if (at >= sizeof(st->hdr)) {
				*consumed = off;
				return give_up(st, FCGI_SCAN_WHY_STATE);
			}
			take = sizeof(st->hdr) - at;
			if (take > len - off)
				take = len - off;
			memcpy(st->hdr + at, p + off, take);
			st->hdr_pos = (uint8_t)(at + take);
			off += take;
			if (at + take == sizeof(st->hdr)) {
				st->hdr_pos = 0;
				r = record(st);
			}
			break;
		}
		case PH_CONTENT: {
			/* st->left read once: took more than the buffer has
			 * if the other feed of a shared state changed it
			 * between two reads. */
			size_t left = st->left;
			size_t take = len - off < left ? len - off : left;

			if (st->ours == OURS_PARAMS)
				params(st, cfg, p + off, take);
			else if (st->ours == OURS_BEGIN)
				begin_body(st, p + off, take);
			st->left = (uint32_t)(left - take);
			off += take;
			if (left == take)
				st->phase = st->pad ? PH_PAD : PH_HDR;
			break;
		}
		case PH_PAD: {
			size_t pad = st->pad;
			size_t take = len - off < pad ? len - off : pad;

			st->pad = (uint8_t)(pad - take);
			off += take;
			if (!st->pad)
				st->phase = PH_HDR;
			break;
		}
		default:
			/* Gave up before: the bytes go by unread. */
			*consumed = len;
			return FCGI_SCAN_MORE;
		}
	}
	*consumed = off;
	return r;
}

const char *
fcgi_scan_value(const struct fcgi_scan *st, unsigned k, size_t *len)
{
	size_t off, n;

	if (k >= FCGI_SCAN_KEEP_MAX || !((st->present >> k) & 1))
		return NULL;
	/* Read once: the offset and length checked are the ones returned
	 * (a shared state, as above). */
	off = st->val_off[k];
	n = st->val_len[k];
	if (off + n >= FCGI_SCAN_ARENA)
		return NULL;
	if (len)
		*len = n;
	return st->arena + off;
}

const char *
fcgi_scan_get(const struct fcgi_scan *st,
	      const struct fcgi_scan_config *cfg,
	      const char *name)
{
	size_t n = strlen(name);
	unsigned k;

	for (k = 0; k < cfg->n && k < FCGI_SCAN_KEEP_MAX; k++)
		if (cfg->name_len[k] == n && memcmp(cfg->name[k], name, n) == 0)
			return fcgi_scan_value(st, k, NULL);
	return NULL;
}
