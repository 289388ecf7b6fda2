/* SPDX-License-Identifier: Apache-2.0 */
/* Stands in for an OpenTelemetry SDK that publishes its own OTEP-4719
 * process context before the shim's constructor runs: preloaded after
 * libctxshim.so, its constructor runs first.  The mapping is a memfd named
 * OTEL_CTX holding only a header; no reader needs more for this test. */
#include "config.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

__attribute__((constructor)) static void
publish_first(void)
{
	struct {
		char sig[8];
		uint32_t version, size;
		uint64_t ts, payload;
	} * h;
	struct timespec ts;
	int fd = memfd_create("OTEL_CTX", MFD_CLOEXEC);

	if (fd < 0 || ftruncate(fd, 4096) < 0)
		return;
	h = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	close(fd);
	if (h == MAP_FAILED)
		return;
	memcpy(h->sig, "OTEL_CTX", 8);
	h->version = 2;
	h->size = 0;
	h->payload = (uint64_t)(uintptr_t)(h + 1);
	clock_gettime(CLOCK_BOOTTIME, &ts);
	h->ts = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
