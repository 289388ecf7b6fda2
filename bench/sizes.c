/* SPDX-License-Identifier: Apache-2.0 */
/* The shim's per-connection state, from the structs themselves (issue 8,
 * B8): printed by bench/run.sh next to the measured RSS. */
#include "config.h"

#include <stdio.h>

#include "conn.h"

int
main(void)
{
	printf("slot=%zu hot=%zu chunk_fds=%u chunk_ptr=%zu scan=%zu\n",
	       sizeof(struct ctxshim_conn), sizeof(*ctxshim_conn_tab.hot),
	       (unsigned)CTXSHIM_CONN_CHUNK, sizeof(*ctxshim_conn_tab.chunks),
	       sizeof(struct http_scan));
	return 0;
}
