/* SPDX-License-Identifier: Apache-2.0 */
/* h2-early: an nghttp2 server session made from a callbacks object that a
 * library's constructor set up before the shim's constructor ran
 * (h2-early-lib.c: on_frame_recv), and that main() completes later
 * (on_stream_close).  A client session in the same process sends it a
 * request through memory.  Prints how often each callback of the
 * application ran; the shim must not change it (test-preload-host.c,
 * hooks/hook-nghttp2.c).  No tracing code. */
#include "config.h"

#include "h2-early.h"

#include <stdio.h>

static int closes;

static int
app_stream_close(nghttp2_session *s, int32_t id, uint32_t error_code, void *ud)
{
	(void)s;
	(void)id;
	(void)error_code;
	(void)ud;
	closes++;
	return 0;
}

int
main(void)
{
	nghttp2_nv nva[] = {
		{(uint8_t *)":method", (uint8_t *)"GET", 7, 3, NGHTTP2_NV_FLAG_NONE},
		{(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, NGHTTP2_NV_FLAG_NONE},
		{(uint8_t *)":path", (uint8_t *)"/", 5, 1, NGHTTP2_NV_FLAG_NONE},
		{(uint8_t *)":authority", (uint8_t *)"h", 10, 1, NGHTTP2_NV_FLAG_NONE},
	};
	nghttp2_session_callbacks *ccbs;
	nghttp2_session *srv, *cli;
	const uint8_t *data;
	ssize_t n;

	if (!h2_early_cbs || nghttp2_session_callbacks_new(&ccbs) != 0)
		return 2;
	nghttp2_session_callbacks_set_on_stream_close_callback(h2_early_cbs,
							       app_stream_close);
	if (nghttp2_session_server_new(&srv, h2_early_cbs, NULL) != 0 ||
	    nghttp2_session_client_new(&cli, ccbs, NULL) != 0)
		return 2;
	(void)nghttp2_submit_settings(cli, NGHTTP2_FLAG_NONE, NULL, 0);
	if (nghttp2_submit_request(cli, NULL, nva, sizeof(nva) / sizeof(nva[0]), NULL,
				   NULL) < 0)
		return 2;
	while ((n = nghttp2_session_mem_send(cli, &data)) > 0)
		if (nghttp2_session_mem_recv(srv, data, (size_t)n) != n)
			return 3;
	/* The server's RST_STREAM closes the stream on its side. */
	(void)nghttp2_submit_rst_stream(srv, NGHTTP2_FLAG_NONE, 1, NGHTTP2_NO_ERROR);
	while ((n = nghttp2_session_mem_send(srv, &data)) > 0)
		;
	printf("frame_recv %d stream_close %d\n", h2_early_frames, closes);
	nghttp2_session_del(cli);
	nghttp2_session_del(srv);
	nghttp2_session_callbacks_del(ccbs);
	nghttp2_session_callbacks_del(h2_early_cbs);
	return 0;
}
