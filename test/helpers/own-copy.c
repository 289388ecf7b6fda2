/* SPDX-License-Identifier: Apache-2.0 */
/* libown-copy.so: a plugin with its own copy of a hooked library's
 * functions (as CPAN's FCGI.so carries libfcgi's code), which it calls
 * through its PLT, so that the preloaded shim's exported names catch
 * them (test-preload-plugins.c).  Each stand-in records that it ran.
 * own_copy_main() prints what each call returned and which of the copy's
 * functions ran: the same with the shim as without it. */
#include "config.h"

#include <stdio.h>

/* The head of libfcgi's FCGX_Request, which the shim reads. */
struct fcgx_request {
	int requestId;
	int role;
	void *in, *out, *err;
	char **envp;
	void *paramsPtr;
	int ipcFd;
};

int FCGX_Accept_r(struct fcgx_request *req);
void FCGX_Finish_r(struct fcgx_request *req);
void FCGX_Free(struct fcgx_request *req, int close);
int own_copy_main(void);

static unsigned ran;
static char *envp[] = {
	"REQUEST_METHOD=GET", "REQUEST_URI=/own",
	"HTTP_TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	NULL};

int
FCGX_Accept_r(struct fcgx_request *req)
{
	ran |= 1;
	req->envp = envp;
	req->ipcFd = -1;
	return 0;
}

void
FCGX_Finish_r(struct fcgx_request *req)
{
	(void)req;
	ran |= 2;
}

void
FCGX_Free(struct fcgx_request *req, int close)
{
	(void)req;
	(void)close;
	ran |= 4;
}

int
own_copy_main(void)
{
	struct fcgx_request req = {0, 1, NULL, NULL, NULL, NULL, NULL, -1};
	int r;

	r = FCGX_Accept_r(&req);
	FCGX_Finish_r(&req);
	FCGX_Free(&req, 0);
	printf("fcgi: accept %d, the copy's accept/finish/free ran: %u%u%u\n", r,
	       ran & 1, (ran >> 1) & 1, (ran >> 2) & 1);
	return ran == 7 && r == 0 ? 0 : 1;
}
