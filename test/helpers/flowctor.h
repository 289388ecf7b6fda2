/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* libflowctor.so: a library that starts a thread from its own
 * constructor, which runs before the preloaded shim's constructor (the
 * loader initialises DT_NEEDED libraries first). */

/* Run fn(arg) on that thread; the thread ends when fn returns. */
void flowctor_post(void (*fn)(void *), void *arg);
/* Wait for the thread to end. */
void flowctor_join(void);
