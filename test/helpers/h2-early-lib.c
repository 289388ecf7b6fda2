/* SPDX-License-Identifier: Apache-2.0 */
/* libh2early.so, for h2-early: a library that sets up an nghttp2
 * callbacks object in its constructor, which runs before the preloaded
 * shim's (a library the program links is initialised before the preloaded
 * ones, which it does not depend on).  No tracing code. */
#include "config.h"

#include "h2-early.h"

int h2_early_frames;
nghttp2_session_callbacks *h2_early_cbs;

static int
early_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	(void)s;
	(void)f;
	(void)ud;
	h2_early_frames++;
	return 0;
}

__attribute__((constructor)) static void
h2_early_init(void)
{
	if (nghttp2_session_callbacks_new(&h2_early_cbs) == 0)
		nghttp2_session_callbacks_set_on_frame_recv_callback(h2_early_cbs,
								     early_frame_recv);
}
