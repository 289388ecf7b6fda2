/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>

/* For the pool hooks: while a thread submits work to a pool library, the
 * threads that library starts on its behalf (libuv's workers on the first
 * uv_queue_work(), GLib's pool-spawner and exclusive workers) are pool
 * infrastructure, not work of the submitter's request.  They must not
 * inherit its context: they would show it, stale, for as long as they
 * live.  Pauses nest; both calls touch only the calling thread. */
void hook_pthread_inherit_pause(void);
void hook_pthread_inherit_resume(void);

/* hooks/hook-pool-uv.c: is start the start routine of one of libuv's own
 * threads (its pool's workers, started by whichever request first uses
 * the pool, uv_fs_*() and uv_getaddrinfo() included)?  Those do not
 * inherit either.  False while libuv is not loaded; one a dlopen()
 * brought in since the last call is found here, without the loader's
 * lock. */
bool hook_pool_uv_thread(const void *start);
