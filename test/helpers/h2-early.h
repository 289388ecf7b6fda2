/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <nghttp2/nghttp2.h>

/* libh2early.so (h2-early-lib.c): the callbacks object its constructor
 * made, with an on_frame_recv callback that counts its calls. */
extern int h2_early_frames;
extern nghttp2_session_callbacks *h2_early_cbs;
