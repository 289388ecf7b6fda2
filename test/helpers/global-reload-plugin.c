/* SPDX-License-Identifier: Apache-2.0 */
/* A plugin that depends on libfcgi (global-reload-host.c loads it
 * RTLD_GLOBAL): one call into libfcgi.  FCGX_Init() is never called, so
 * FCGX_Accept_r() returns -9998 at once, touching nothing. */
#include <fcgiapp.h>
#include <string.h>

int plug(void);

__attribute__((visibility("default"))) int
plug(void)
{
	FCGX_Request req;

	memset(&req, 0, sizeof(req));
	req.ipcFd = -1;
	return FCGX_Accept_r(&req);
}
