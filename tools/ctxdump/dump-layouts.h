/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The one-shot dump's view of the two other thread-context layouts
 * (layouts.h): Elastic's elastic_apm_profiling_correlation_tls_v1 and
 * Polar Signals' custom_labels_current_set, read next to the OTEP-4947
 * record that ctxdump.c reads itself. */

#include "dump.h"

/* Look for the other layouts (target running) in the objects of ep.
 * Returns true if the process defines at least one; d->alt is then set. */
bool dlay_find(struct dump *d, struct etls_proc *ep);
/* Before any lookup in ep: the symbols dlay_find() looks up will be
 * (lay_want()). */
void dlay_want(struct etls_proc *ep);

/* Copy every stopped thread's contexts in those layouts (threads
 * stopped). */
void dlay_read(struct dump *d);

/* Decode the copies into each thread's alt array (threads running). */
void dlay_finish(struct dump *d);

void dlay_free(struct dump *d);
