/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>

/* OTEP-4719 publication of the process context (the OTEL_CTX mapping). */

/* Collects the resource from the environment; call once, in the
 * constructor, before ctxshim_pctx_publish(). */
void ctxshim_pctx_prepare(void);
/* Creates the mapping and publishes.  Returns false if the context could
 * not be published at all. */
bool ctxshim_pctx_publish(void);
/* In a forked child: the mapping was not inherited (MADV_DONTFORK); publish
 * a new one with a new service.instance.id and process.pid. */
void ctxshim_pctx_after_fork_child(void);
/* True if /proc/self/maps already has an OTEL_CTX mapping (someone else's). */
bool ctxshim_pctx_exists(void);
