/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "dump-layouts.h"

#include <errno.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "remote.h"

#define DLAY_OTHERS (LAY_MASK(LAY_ELASTIC) | LAY_MASK(LAY_CUSTOM_LABELS))

void
dlay_want(struct etls_proc *ep)
{
	lay_want(ep, DLAY_OTHERS);
}

bool
dlay_find(struct dump *d, struct etls_proc *ep)
{
	struct lay_proc *lp = malloc(sizeof(*lp));

	if (!lp)
		return false;
	if (lay_find_in(ep, d->mem_pid, DLAY_OTHERS, lp) < 0) {
		free(lp);
		return false;
	}
	free(d->alt);
	d->alt = lp;
	return true;
}

void
dlay_read(struct dump *d)
{
	uint64_t *tps;
	size_t i;
	unsigned ok;

	if (!d->alt || !d->n_threads)
		return;
	ok = lay_resolve(d->alt);
	tps = calloc(d->n_threads, sizeof(*tps));
	d->alt_raw = calloc(d->n_threads * LAY_N, sizeof(*d->alt_raw));
	if (!tps || !d->alt_raw) {
		free(tps);
		free(d->alt_raw);
		d->alt_raw = NULL;
		return;
	}
	for (i = 0; i < d->n_threads; i++) {
		struct dump_thread *t = &d->threads[i];

		t->alt_idx = i + 1;
		/* as read_threads() read it in this stop (0: none, or it
		 * could not be read) */
		tps[i] = t->stopped ? t->tp : 0;
	}
	lay_read(d->alt, ok, tps, d->n_threads, d->alt_raw);
	/* threads that were not stopped have no copy at all, nor have
	 * those without a thread pointer (a raw clone() with CLONE_SETTLS
	 * and 0; not "Invalid argument", said once for the OTEP record) */
	for (i = 0; i < d->n_threads; i++)
		if (!d->threads[i].stopped || !tps[i]) {
			unsigned k;

			for (k = 0; k < LAY_N; k++)
				d->alt_raw[i * LAY_N + k].state = LAY_ABSENT;
		}
	free(tps);
}

void
dlay_finish(struct dump *d)
{
	struct lay_ctx *c;
	size_t i;

	if (!d->alt_raw)
		return;
	c = malloc(sizeof(*c));
	if (!c)
		return;
	for (i = 0; i < d->n_threads; i++) {
		struct dump_thread *t = &d->threads[i];
		unsigned k;

		if (!t->alt_idx)
			continue;
		for (k = 0; k < LAY_N; k++) {
			const struct lay_raw *r =
				&d->alt_raw[(t->alt_idx - 1) * LAY_N + k];
			struct dump_alt *a;
			size_t size;

			if (r->state != LAY_COPIED && r->state != LAY_ERROR)
				continue;
			if (!t->alt) {
				t->alt = calloc(LAY_N, sizeof(*t->alt));
				if (!t->alt)
					break;
			}
			a = &t->alt[t->n_alt];
			memset(a, 0, sizeof(*a));
			a->kind = (enum lay_kind)k;
			a->state = r->state;
			a->err = r->err;
			a->slot_addr = r->slot_addr;
			a->ptr = r->ptr;
			a->cl_count = r->cl_count;
			if (r->state == LAY_COPIED &&
			    lay_decode((enum lay_kind)k, r, d->pd, c) == 0) {
				size = offsetof(struct lay_ctx, attrs) +
				       (size_t)c->n_attrs * sizeof(c->attrs[0]);
				a->ctx = malloc(size);
				if (!a->ctx)
					continue;
				memcpy(a->ctx, c, size);
			} else if (r->state == LAY_COPIED) {
				continue;
			}
			t->n_alt++;
		}
	}
	free(c);
}

void
dlay_free(struct dump *d)
{
	size_t i, k;

	for (i = 0; i < d->n_threads; i++) {
		for (k = 0; k < d->threads[i].n_alt; k++)
			free(d->threads[i].alt[k].ctx);
		free(d->threads[i].alt);
	}
	free(d->alt);
	free(d->alt_raw);
	d->alt = NULL;
	d->alt_raw = NULL;
}
