/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The helpers' own loop of a libmicrohttpd daemon started without a thread
 * of its own (MHD_run_from_select(), the "external" mode applications use
 * to drive MHD from their event loop), with stdin as the test's line to
 * the helper: mhd-server runs it until EOF, interleave-server until each
 * line, to take its next step. */

#include <errno.h>
#include <stdbool.h>
#include <sys/select.h>
#include <unistd.h>

#include <microhttpd.h>

/* Runs d until a line arrives on stdin (true) or EOF or an error (false). */
static inline bool
mhd_select_loop(struct MHD_Daemon *d)
{
	char buf[64];

	for (;;) {
		fd_set rs, ws, es;
		MHD_socket max = 0;

		FD_ZERO(&rs);
		FD_ZERO(&ws);
		FD_ZERO(&es);
		if (MHD_get_fdset(d, &rs, &ws, &es, &max) != MHD_YES)
			return false;
		FD_SET(0, &rs);
		if (select(max + 1, &rs, &ws, &es, NULL) < 0) {
			if (errno == EINTR)
				continue;
			return false;
		}
		if (FD_ISSET(0, &rs))
			return read(0, buf, sizeof(buf)) > 0;
		(void)MHD_run_from_select(d, &rs, &ws, &es);
	}
}
