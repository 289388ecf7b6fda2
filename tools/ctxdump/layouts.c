/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "layouts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "remote.h"
#include "w3c.h"

/* custom-labels structs (LP64): string_t {size_t len; const char *buf},
 * label_t {string_t key, value}, labelset_t {label_t *storage; size_t
 * count; size_t capacity}. */
#define CL_SET_SIZE   24
#define CL_LABEL_SIZE 32
#define CL_ARRAY_OFF  CL_SET_SIZE
#define CL_STR_OFF    (CL_ARRAY_OFF + LAY_CL_MAX_LABELS * CL_LABEL_SIZE)

static const char *const lay_symbols[LAY_N] = {
	[LAY_OTEL] = OTEL_THREAD_CTX_SYMBOL,
	[LAY_ELASTIC] = LAY_ELASTIC_SYMBOL,
	[LAY_CUSTOM_LABELS] = LAY_CL_SYMBOL,
};

const char *
lay_symbol(enum lay_kind k)
{
	return (unsigned)k < LAY_N ? lay_symbols[k] : "?";
}

int
lay_find(pid_t pid, unsigned want, struct lay_proc *lp)
{
	struct etls_proc *ep;
	int r;

	memset(lp, 0, sizeof(*lp));
	r = etls_proc_load(pid, &ep);
	if (r < 0)
		return r;
	r = lay_find_in(ep, pid, want, lp);
	etls_proc_free(ep);
	return r;
}

void
lay_want(struct etls_proc *ep, unsigned want)
{
	unsigned k;

	for (k = 0; k < LAY_N; k++)
		if (want & LAY_MASK(k))
			etls_proc_want(ep, lay_symbols[k]);
}

int
lay_find_in(struct etls_proc *ep, pid_t pid, unsigned want, struct lay_proc *lp)
{
	int first_err = 0;
	unsigned k;

	memset(lp, 0, sizeof(*lp));
	lp->pid = pid;
	lay_want(ep, want);
	for (k = 0; k < LAY_N; k++) {
		struct lay_layout *l = &lp->l[k];
		uint64_t addr, size;
		int r;

		if (!(want & LAY_MASK(k)))
			continue;
		r = etls_proc_find(ep, lay_symbols[k], &l->sym);
		if (r == -ESRCH)
			return r;
		if (r < 0) {
			if (r != -ENOENT && !first_err)
				first_err = r;
			continue;
		}
		l->present = true;
		l->acc.model = TLSM_UNRESOLVED;
		lp->mask |= LAY_MASK(k);
		if (k == LAY_CUSTOM_LABELS &&
		    etls_proc_find_data(ep, &l->sym, LAY_CL_ABI_SYMBOL, &addr, &size) ==
			    0 &&
		    size == sizeof(uint32_t))
			l->data_addr = addr;
		if (k == LAY_ELASTIC &&
		    etls_proc_find_data(ep, &l->sym, LAY_ELASTIC_STORAGE, &addr,
					&size) == 0 &&
		    size == sizeof(uint64_t))
			l->data_addr = addr;
	}
	if (lp->mask)
		return 0;
	return first_err ? first_err : -ENOENT;
}

static bool
usable(const struct lay_layout *l)
{
	return l->present && l->acc.model != TLSM_UNRESOLVED &&
	       l->acc.model != TLSM_NONE && l->abi_ok;
}

unsigned
lay_resolve(struct lay_proc *lp)
{
	unsigned k, ok = 0;

	for (k = 0; k < LAY_N; k++) {
		struct lay_layout *l = &lp->l[k];

		if (!l->present)
			continue;
		if (etls_resolve(lp->pid, &l->sym, &l->acc) < 0)
			l->acc.model = TLSM_UNRESOLVED;
		l->abi_ok = true;
		if (k == LAY_CUSTOM_LABELS && l->data_addr) {
			/* A writer of another ABI version has another layout;
			 * one without the symbol at all is read as version 1. */
			uint32_t v = 0;

			if (remote_read(lp->pid, l->data_addr, &v, sizeof(v)) == 0)
				l->abi_version = v;
			l->abi_ok = v == 1;
		}
		if (usable(l))
			ok |= LAY_MASK(k);
	}
	return ok;
}

void
lay_slots_mark(struct lay_proc *lp)
{
	unsigned k;

	for (k = 0; k < LAY_N; k++) {
		struct lay_layout *l = &lp->l[k];

		if (!l->present)
			continue;
		l->slot_err = etls_slot_words(lp->pid, &l->sym, l->slot_words);
		l->gen_err = l->slot_err < 0
				     ? 0
				     : etls_slot_gen(lp->pid, &l->sym, &l->acc,
						     l->slot_words, l->gen_words);
		l->slot_marked = true;
	}
}

bool
lay_slots_changed(const struct lay_proc *lp)
{
	unsigned k;

	for (k = 0; k < LAY_N; k++) {
		const struct lay_layout *l = &lp->l[k];
		uint64_t w[2], g[3];
		int err;

		if (!l->present || !l->slot_marked)
			continue;
		err = etls_slot_words(lp->pid, &l->sym, w);
		if ((err < 0) != (l->slot_err < 0))
			return true;
		if (err == 0 && memcmp(w, l->slot_words, sizeof(w)) != 0)
			return true;
		if (err < 0)
			continue;
		/* The same words, but the module may have been unloaded and
		 * loaded again in the same place: its generation says. */
		err = etls_slot_gen(lp->pid, &l->sym, &l->acc, w, g);
		if ((err < 0) != (l->gen_err < 0))
			return true;
		if (err == 0 && memcmp(g, l->gen_words, sizeof(g)) != 0)
			return true;
	}
	return false;
}

/* ---- reading (threads stopped) ---- */

/* Scratch for the batches, kept between calls: the record loop reads
 * 100 times a second and should not allocate (or fault in fresh pages)
 * inside every stop. */
static struct remote_range *lay_rg;
static size_t *lay_idx;
static size_t lay_cap;

static int
reserve(size_t n)
{
	struct remote_range *rg;
	size_t *idx;

	if (n <= lay_cap)
		return 0;
	rg = realloc(lay_rg, n * sizeof(*rg));
	if (!rg)
		return -ENOMEM;
	lay_rg = rg;
	idx = realloc(lay_idx, n * sizeof(*idx));
	if (!idx)
		return -ENOMEM;
	lay_idx = idx;
	lay_cap = n;
	return 0;
}

static void __attribute__((destructor)) lay_scratch_free(void)
{
	free(lay_rg);
	free(lay_idx);
	lay_rg = NULL;
	lay_idx = NULL;
	lay_cap = 0;
}

static void
set_error(struct lay_raw *r, ssize_t got)
{
	r->state = LAY_ERROR;
	r->err = got < 0 ? (int)got : -EFAULT;
}

_Static_assert(LAY_RAW_MAX >= TREC_MAX_SIZE, "a first piece fits in lay_raw.buf");

/* Bytes of an OTEP record at addr to copy first: up to the recommended
 * maximum, but not into the next page unless the header crosses it. */
static size_t
otel_first_piece(uint64_t addr)
{
	size_t in_page = 4096 - (size_t)(addr & 4095);

	if (in_page < TREC_HEADER_SIZE || in_page > TREC_MAX_SIZE)
		return TREC_MAX_SIZE;
	return in_page;
}

static uint64_t
load64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

void
lay_read(const struct lay_proc *lp,
	 unsigned want,
	 const uint64_t *tps,
	 size_t n,
	 struct lay_raw *out)
{
	/* The custom-labels strings need two ranges per label. */
	size_t per = LAY_N + 2 * LAY_CL_MAX_LABELS, i, k, m;
	pid_t pid = lp->pid;
	unsigned ok = 0;

	for (i = 0; i < n * LAY_N; i++) {
		out[i].state = LAY_ABSENT;
		out[i].len = 0;
		out[i].truncated = false;
		out[i].cl_n = 0;
		out[i].cl_count = 0;
		out[i].ptr = 0;
		out[i].slot_addr = 0;
		out[i].err = 0;
	}
	for (k = 0; k < LAY_N; k++)
		if ((want & LAY_MASK(k)) && usable(&lp->l[k]))
			ok |= LAY_MASK(k);
	if (!ok || !n)
		return;
	if (reserve(n * per) < 0) {
		for (i = 0; i < n * LAY_N; i++)
			if (ok & LAY_MASK(i % LAY_N))
				set_error(&out[i], -ENOMEM);
		return;
	}

	/* level 1: the TLS variable of each thread and layout */
	for (i = m = 0; i < n; i++) {
		for (k = 0; k < LAY_N; k++) {
			struct lay_raw *r = &out[i * LAY_N + k];
			uint64_t slot;
			int e;

			if (!(ok & LAY_MASK(k)))
				continue;
			if (!tps[i]) {
				set_error(r, -EINVAL);
				continue;
			}
			e = tlsm_slot_addr(&lp->l[k].acc, tps[i], remote_tlsm_read,
					   &pid, &slot);
			if (e == -ENODATA) {
				r->state = LAY_NO_BLOCK;
				continue;
			}
			if (e < 0) {
				set_error(r, e);
				continue;
			}
			r->slot_addr = slot;
			lay_rg[m] =
				(struct remote_range){slot, &r->ptr, sizeof(r->ptr), 0};
			lay_idx[m++] = i * LAY_N + k;
		}
	}
	remote_read_many(pid, lay_rg, m);

	/* level 2: what the pointers point at */
	for (i = 0, k = m, m = 0; i < k; i++) {
		struct lay_raw *r = &out[lay_idx[i]];
		enum lay_kind kind = (enum lay_kind)(lay_idx[i] % LAY_N);
		size_t len;

		if (lay_rg[i].got != (ssize_t)sizeof(r->ptr)) {
			r->ptr = 0;
			set_error(r, lay_rg[i].got);
			continue;
		}
		if (!r->ptr) {
			r->state = LAY_NULL;
			continue;
		}
		len = kind == LAY_OTEL      ? otel_first_piece(r->ptr)
		      : kind == LAY_ELASTIC ? LAY_ELASTIC_SIZE
					    : CL_SET_SIZE;
		lay_rg[m] = (struct remote_range){r->ptr, r->buf, len, 0};
		lay_idx[m++] = lay_idx[i];
	}
	remote_read_many(pid, lay_rg, m);

	/* level 3: the rest of OTEP attributes, custom-labels label arrays */
	for (i = 0, k = m, m = 0; i < k; i++) {
		struct lay_raw *r = &out[lay_idx[i]];
		enum lay_kind kind = (enum lay_kind)(lay_idx[i] % LAY_N);
		ssize_t got = lay_rg[i].got;

		if (kind == LAY_OTEL) {
			struct otel_thread_ctx_record h;
			size_t need;

			if (got < TREC_HEADER_SIZE) {
				set_error(r, got);
				continue;
			}
			r->state = LAY_COPIED;
			r->len = (size_t)got;
			memcpy(&h, r->buf, sizeof(h));
			if (h.valid != TREC_VALID)
				continue;
			/* Past the recommended 640 bytes as well: a key index
			 * that repeats is read from its last occurrence
			 * (OTEP-4947).  A record larger than the buffer is
			 * cut here, and its samples say so (truncated): up
			 * to 64 KiB per thread and round is not worth it. */
			need = TREC_HEADER_SIZE + (size_t)h.attrs_data_size;
			if (need > LAY_RAW_MAX) {
				need = LAY_RAW_MAX;
				r->truncated = true;
			}
			/* a first piece cut short met an unmapped page */
			if (r->len >= need || r->len < otel_first_piece(r->ptr))
				continue;
			lay_rg[m] = (struct remote_range){
				r->ptr + r->len, r->buf + r->len, need - r->len, 0};
			lay_idx[m++] = lay_idx[i];
		} else if (kind == LAY_ELASTIC) {
			if (got != LAY_ELASTIC_SIZE) {
				set_error(r, got);
				continue;
			}
			r->state = LAY_COPIED;
			r->len = LAY_ELASTIC_SIZE;
		} else {
			uint64_t storage, count;

			if (got != CL_SET_SIZE) {
				set_error(r, got);
				continue;
			}
			r->state = LAY_COPIED;
			r->len = CL_SET_SIZE;
			storage = load64(r->buf);
			count = load64(r->buf + 8);
			r->cl_count = count;
			if (count > LAY_CL_MAX_LABELS) {
				count = LAY_CL_MAX_LABELS;
				r->truncated = true;
			}
			if (!storage || !count)
				continue;
			lay_rg[m] =
				(struct remote_range){storage, r->buf + CL_ARRAY_OFF,
						      (size_t)count * CL_LABEL_SIZE, 0};
			lay_idx[m++] = lay_idx[i];
		}
	}
	remote_read_many(pid, lay_rg, m);

	/* level 4: custom-labels keys and values, up to two ranges per
	 * label: collected behind the level-3 ranges, which are still read */
	for (i = 0, k = m; i < k; i++) {
		struct lay_raw *r = &out[lay_idx[i]];
		enum lay_kind kind = (enum lay_kind)(lay_idx[i] % LAY_N);
		ssize_t got = lay_rg[i].got;
		size_t space = LAY_RAW_MAX - CL_STR_OFF, off = CL_STR_OFF, j, nl;

		if (kind == LAY_OTEL) {
			if (got > 0)
				r->len += (size_t)got;
			continue;
		}
		/* a label array cut by an unmapped page: the whole labels */
		nl = got > 0 ? (size_t)got / CL_LABEL_SIZE : 0;
		if (nl * CL_LABEL_SIZE < lay_rg[i].len)
			r->truncated = true;
		r->cl_n = (unsigned)nl;
		for (j = 0; j < nl; j++) {
			const uint8_t *lab = r->buf + CL_ARRAY_OFF + j * CL_LABEL_SIZE;
			struct lay_cl_label *c = &r->cl[j];
			uint64_t len[2] = {load64(lab), load64(lab + 16)};
			uint64_t ptr[2] = {load64(lab + 8), load64(lab + 24)};
			unsigned s;

			memset(c, 0, sizeof(*c));
			c->key_null = ptr[0] == 0;
			for (s = 0; s < 2; s++) {
				size_t l = len[s] > LAY_CL_STR_MAX ? LAY_CL_STR_MAX
								   : (size_t)len[s];

				if (len[s] > l)
					c->cut = true;
				if (l > space) {
					l = space;
					c->cut = true;
				}
				if (!ptr[s] || (s == 0 && c->key_null))
					l = 0;
				if (s == 0) {
					c->koff = (uint16_t)off;
					c->klen = (uint16_t)l;
				} else {
					c->voff = (uint16_t)off;
					c->vlen = (uint16_t)l;
				}
				if (!l)
					continue;
				lay_rg[m] = (struct remote_range){ptr[s], r->buf + off,
								  l, 0};
				/* label j, string s of this raw */
				lay_idx[m++] =
					(lay_idx[i] * LAY_CL_MAX_LABELS + j) * 2 + s;
				off += l;
				space -= l;
			}
			if (c->cut)
				r->truncated = true;
		}
	}
	remote_read_many(pid, lay_rg + k, m - k);
	for (i = k; i < m; i++) {
		size_t s = lay_idx[i] % 2, j = (lay_idx[i] / 2) % LAY_CL_MAX_LABELS;
		struct lay_raw *r = &out[lay_idx[i] / 2 / LAY_CL_MAX_LABELS];
		ssize_t got = lay_rg[i].got;
		size_t l = got > 0 ? (size_t)got : 0;

		if (l == lay_rg[i].len)
			continue;
		/* unreadable string: keep the prefix, flag the label; a key
		 * of which nothing could be read is no key at all: skipped
		 * like a NULL one, not shown (nor deduplicated) as "" */
		if (s == 0) {
			r->cl[j].klen = (uint16_t)l;
			if (l == 0)
				r->cl[j].key_null = true;
		} else
			r->cl[j].vlen = (uint16_t)l;
		r->cl[j].cut = true;
		r->truncated = true;
	}
}

/* ---- decoding (threads running) ---- */

static bool
is_hex_id(const uint8_t *s, size_t len, size_t want)
{
	size_t i;

	if (len != want)
		return false;
	for (i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

static bool
bytes_eq(const uint8_t *a, size_t al, const char *b)
{
	return al == strlen(b) && memcmp(a, b, al) == 0;
}

static void
decode_otel(const struct lay_raw *raw, const struct pctx_decoded *pd, struct lay_ctx *o)
{
	struct otel_thread_ctx_record h;
	struct trec_attrs_decoded *dec;
	size_t have;
	unsigned i, n_keys = pd ? pd->n_keys : 0;

	memcpy(&h, raw->buf, sizeof(h));
	o->raw_valid = h.valid;
	o->valid = h.valid == TREC_VALID;
	if (!o->valid)
		return;
	memcpy(o->trace_id, h.trace_id, 16);
	memcpy(o->span_id, h.span_id, 8);
	o->flags = h.trace_flags;
	o->has_trace = !w3c_id_is_zero(h.trace_id, 16);
	have = raw->len - TREC_HEADER_SIZE;
	if (have > h.attrs_data_size)
		have = h.attrs_data_size;
	o->truncated = raw->truncated || have < h.attrs_data_size;
	if (!have)
		return;
	dec = malloc(sizeof(*dec));
	if (!dec) {
		o->truncated = true;
		return;
	}
	if (trec_attrs_decode(raw->buf + TREC_HEADER_SIZE, have, n_keys, dec) == 0) {
		o->truncated |= dec->truncated;
		for (i = 0; i < dec->n && o->n_attrs < LAY_ATTRS_MAX; i++) {
			struct lay_attr *a = &o->attrs[o->n_attrs++];

			a->index = dec->attr[i].key;
			a->val = dec->attr[i].val;
			a->vlen = dec->attr[i].len;
			/* An element that names nothing (empty, or no
			 * string) is no name either, as in the dump
			 * (output.c, key_name()): recorded as "#N", which
			 * the report leaves out of OTLP (no empty keys). */
			if (a->index < n_keys && pd->key_map[a->index].len) {
				a->key = pd->key_map[a->index].ptr;
				a->klen = pd->key_map[a->index].len;
			} else {
				a->key = NULL;
				a->klen = 0;
				o->unknown_keys |= a->index >= n_keys;
			}
		}
	}
	free(dec);
}

static void
decode_elastic(const struct lay_raw *raw, struct lay_ctx *o)
{
	const uint8_t *b = raw->buf;

	o->minor_version = (unsigned)b[0] | (unsigned)b[1] << 8;
	o->raw_valid = b[2];
	o->valid = b[2] != 0;
	if (!o->valid || b[3] == 0)
		return;
	o->has_trace = true;
	o->flags = b[4];
	memcpy(o->trace_id, b + 5, 16);
	memcpy(o->span_id, b + 21, 8);
	memcpy(o->txn_id, b + 29, 8);
	o->has_txn = !w3c_id_is_zero(o->txn_id, 8);
}

static void
decode_cl(const struct lay_raw *raw, struct lay_ctx *o)
{
	unsigned j, i;
	bool have_span = false;

	o->valid = true;
	o->raw_valid = 1;
	o->truncated = raw->truncated;
	for (j = 0; j < raw->cl_n && j < LAY_CL_MAX_LABELS; j++) {
		const struct lay_cl_label *c = &raw->cl[j];
		const uint8_t *k = raw->buf + c->koff, *v = raw->buf + c->voff;
		bool dup = false;

		if (c->key_null)
			continue;
		/* custom-labels: the first of repeated keys wins */
		for (i = 0; i < o->n_attrs && !dup; i++)
			dup = o->attrs[i].klen == c->klen &&
			      memcmp(o->attrs[i].key, k, c->klen) == 0;
		if (dup)
			continue;
		o->attrs[o->n_attrs++] = (struct lay_attr){k, c->klen, v, c->vlen, j};
		if (bytes_eq(k, c->klen, "trace_id") && !c->cut &&
		    is_hex_id(v, c->vlen, 32) &&
		    w3c_hex_decode(o->trace_id, (const char *)v, 16) == 0 &&
		    !w3c_id_is_zero(o->trace_id, 16))
			o->has_trace = true;
		if (bytes_eq(k, c->klen, "span_id") && !c->cut &&
		    is_hex_id(v, c->vlen, 16) &&
		    w3c_hex_decode(o->span_id, (const char *)v, 8) == 0)
			have_span = true;
	}
	if (!have_span)
		memset(o->span_id, 0, sizeof(o->span_id));
	if (!o->has_trace)
		memset(o->trace_id, 0, sizeof(o->trace_id));
}

bool
lay_otel_unknown_keys(const struct lay_raw *raw, const struct pctx_decoded *pd)
{
	struct otel_thread_ctx_record h;
	unsigned n_keys = pd ? pd->n_keys : 0;
	size_t have, pos = 0;
	const uint8_t *a;

	if (raw->state != LAY_COPIED || raw->len < TREC_HEADER_SIZE)
		return false;
	memcpy(&h, raw->buf, sizeof(h));
	if (h.valid != TREC_VALID)
		return false;
	have = raw->len - TREC_HEADER_SIZE;
	if (have > h.attrs_data_size)
		have = h.attrs_data_size;
	a = raw->buf + TREC_HEADER_SIZE;
	/* whole entries only, as trec_attrs_decode() takes them */
	while (have - pos >= 2 && have - pos - 2 >= a[pos + 1]) {
		if (a[pos] >= n_keys)
			return true;
		pos += 2 + (size_t)a[pos + 1];
	}
	return false;
}

int
lay_decode(enum lay_kind k,
	   const struct lay_raw *raw,
	   const struct pctx_decoded *pd,
	   struct lay_ctx *out)
{
	memset(out, 0, offsetof(struct lay_ctx, attrs));
	out->kind = k;
	if (raw->state != LAY_COPIED)
		return -ENODATA;
	switch (k) {
	case LAY_OTEL:
		decode_otel(raw, pd, out);
		break;
	case LAY_ELASTIC:
		decode_elastic(raw, out);
		break;
	case LAY_CUSTOM_LABELS:
		decode_cl(raw, out);
		break;
	default:
		return -EINVAL;
	}
	return 0;
}

/* Elastic process storage: u16 layout-minor-version, then utf8-str
 * (u32 length + bytes) service name, environment, socket path; packed.
 * The eBPF reader caps the name and environment at 128 bytes. */
int
lay_elastic_storage(const struct lay_proc *lp,
		    char *service,
		    size_t service_cap,
		    char *env,
		    size_t env_cap)
{
	const struct lay_layout *l = &lp->l[LAY_ELASTIC];
	uint8_t buf[2 + 2 * (4 + 128)];
	uint64_t ptr;
	ssize_t got;
	size_t off = 2, i;

	if (!l->present || !l->data_addr || service_cap == 0 || env_cap == 0)
		return -ENOENT;
	if (remote_read(lp->pid, l->data_addr, &ptr, sizeof(ptr)) < 0 || !ptr)
		return -ENOENT;
	got = remote_read_prefix(lp->pid, ptr, buf, sizeof(buf));
	if (got < 6)
		return -EFAULT;
	for (i = 0; i < 2; i++) {
		char *dst = i == 0 ? service : env;
		size_t cap = i == 0 ? service_cap : env_cap;
		uint32_t len;

		dst[0] = '\0';
		if (off + 4 > (size_t)got)
			return i ? 0 : -EFAULT;
		memcpy(&len, buf + off, 4);
		off += 4;
		if (len > 128 || off + len > (size_t)got)
			return i ? 0 : -EBADMSG;
		if (len >= cap)
			len = (uint32_t)(cap - 1);
		memcpy(dst, buf + off, len);
		dst[len] = '\0';
		off += len;
	}
	return 0;
}
