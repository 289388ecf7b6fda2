/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>

#define CTXSHIM_EXPORT __attribute__((visibility("default")))

/* The exported OTEP-4947 pointer.  Our own accesses go through the exported
 * (interposable) name so the library carries an R_X86_64_TLSDESC relocation
 * against it, which is what readers look for. */
extern __thread void *otel_thread_ctx_v1;

enum ctxshim_mode {
	CTXSHIM_OFF = 0,     /* not initialised yet, or CTXSHIM_DISABLE=1 */
	CTXSHIM_ACTIVE = 1,  /* we publish contexts */
	CTXSHIM_PASSIVE = 2, /* someone else owns OTEL_CTX / otel_thread_ctx_v1 */
};

/* Written once by the constructor before any hook can act on it. */
extern enum ctxshim_mode ctxshim_mode;

static inline bool
ctxshim_active(void)
{
	return __builtin_expect(ctxshim_mode == CTXSHIM_ACTIVE, 1);
}
