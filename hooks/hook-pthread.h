/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* For the pool hooks: while a thread submits work to a pool library, the
 * threads that library starts on its behalf (libuv's workers on the first
 * uv_queue_work(), GLib's pool-spawner and exclusive workers) are pool
 * infrastructure, not work of the submitter's request.  They must not
 * inherit its context: they would show it, stale, for as long as they
 * live.  Pauses nest; both calls touch only the calling thread. */
void hook_pthread_inherit_pause(void);
void hook_pthread_inherit_resume(void);
