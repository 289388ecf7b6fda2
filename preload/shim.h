/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>

#define CTXSHIM_EXPORT __attribute__((visibility("default")))

/* The OTEP-4947 pointer, exported as otel_thread_ctx_v1 (shim.c).  The
 * shim reaches it only through this hidden alias, never through the
 * exported name: a relocation against that name binds to the first
 * definition in the global scope, which may be the application's, and ld.so
 * dies (SIGFPE) relocating a TLS access against a definition that is not
 * thread-local (test/helpers/hostile-symbol.c).  Readers find the variable
 * by name in .dynsym and its slot through the symbol-less TLSDESC
 * relocation of this alias (test/symbol-tls.sh). */
extern __thread void *ctxshim_own_slot __attribute__((visibility("hidden")));

enum ctxshim_mode {
	CTXSHIM_OFF = 0,     /* not initialised yet, or CTXSHIM_DISABLE=1 */
	CTXSHIM_ACTIVE = 1,  /* we publish contexts */
	CTXSHIM_PASSIVE = 2, /* someone else owns OTEL_CTX / otel_thread_ctx_v1 */
};

/* Written once by the constructor before any hook can act on it.  Hidden:
 * read PC-relative, not through the GOT (ctxshim_build_begin(), once per
 * request). */
extern enum ctxshim_mode ctxshim_mode __attribute__((visibility("hidden")));

static inline bool
ctxshim_active(void)
{
	return __builtin_expect(ctxshim_mode == CTXSHIM_ACTIVE, 1);
}

/* The functions of a request's usual path (the socket hooks nginx-like
 * servers call, the scanner, the request model, publication): gcc puts
 * them in .text.hot, which ld places together, so that they share pages
 * (the I-TLB) instead of being spread over the library's .text, and each
 * starts a 64-byte line, so that where a function's hot code falls in
 * cache lines does not move with the size of the code before it
 * (bench/hot-lines.sh counts the lines a request touches). */
#define CTXSHIM_HOT __attribute__((hot, aligned(64)))

/* CTXSHIM_HOT for the functions of the request path of an nginx-like
 * event loop (recv, writev, epoll_wait, close): gcc emits them first in
 * their file, in source order, so that their code lines are next to each
 * other at the start of the file's .text.hot rather than wherever the call
 * graph puts them among the file's other hot functions (B1: pages). */
#define CTXSHIM_HOT_FIRST __attribute__((hot, aligned(64), no_reorder))
