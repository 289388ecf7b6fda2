/* SPDX-License-Identifier: Apache-2.0 */
/* A target whose OTEP-4947 record lies in a userfaultfd range that it
 * never serves, for ctxdump's hostile target tests: process_vm_readv() of
 * the record waits (killable only) for the fault to be served, which
 * nothing does, and which the target could not do anyway while ctxdump
 * holds its threads stopped.  The executable defines and exports
 * otel_thread_ctx_v1 (local-exec) and points it into a page registered
 * for missing-page faults, which it never touches itself.
 *
 * Prints "READY <pid>" and blocks until stdin is closed (exit 0); or,
 * where userfaultfd cannot be used (a kernel without it, a seccomp
 * filter, vm.unprivileged_userfaultfd = 0 without CAP_SYS_PTRACE),
 * "UNAVAILABLE <why>" and exits 0.  No shim, no tracing library. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

__attribute__((visibility("default"))) __thread void *otel_thread_ctx_v1;

static int
unavailable(const char *what)
{
	printf("UNAVAILABLE %s: %s\n", what, strerror(errno));
	return 0;
}

int
main(void)
{
	struct uffdio_register reg;
	struct uffdio_api api;
	char line[64];
	uint8_t *page;
	int uffd;

	setvbuf(stdout, NULL, _IOLBF, 0);
#ifdef SYS_userfaultfd
	uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
#else
	uffd = -1;
	errno = ENOSYS;
#endif
	if (uffd < 0)
		return unavailable("userfaultfd");
	memset(&api, 0, sizeof(api));
	api.api = UFFD_API;
	if (ioctl(uffd, UFFDIO_API, &api) < 0)
		return unavailable("UFFDIO_API");
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		    0);
	if (page == MAP_FAILED)
		return 1;
	memset(&reg, 0, sizeof(reg));
	reg.range.start = (uintptr_t)page;
	reg.range.len = 4096;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	if (ioctl(uffd, UFFDIO_REGISTER, &reg) < 0)
		return unavailable("UFFDIO_REGISTER");
	/* the page is never touched here: it stays missing */
	otel_thread_ctx_v1 = page + 64;
	printf("READY %d\n", (int)getpid());
	while (fgets(line, sizeof(line), stdin))
		;
	return 0;
}
