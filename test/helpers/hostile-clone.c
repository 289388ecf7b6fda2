/* SPDX-License-Identifier: Apache-2.0 */
/* A writer with one thread started by a raw clone() with CLONE_SETTLS and
 * a thread pointer of 0: that thread has no TLS at all, so no
 * otel_thread_ctx_v1.  ctxdump must say so (not report a DTV it never
 * needed) and still read the main thread's record.  Prints "CASE bare
 * <tid>", "READY <pid>" and blocks until stdin is closed. */
#include "config.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "record-writer.h"

/* No libc in here: with no thread pointer, whatever touches TLS (errno,
 * the stack protector) would fault.  pause(2) forever, by hand. */
static int
bare_thread(void *arg)
{
	(void)arg;
	for (;;) {
		register long nr __asm__("rax") = SYS_pause;

		__asm__ volatile("syscall" : "+r"(nr) : : "rcx", "r11", "memory");
	}
	return 0;
}

int
main(void)
{
	static struct record rec;
	char line[64];
	size_t stack_size = 1 << 16;
	char *stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	int tid;

	if (stack == MAP_FAILED)
		return 1;
	fill(&rec, 0x32, "main"); /* trace id 0x33... */
	publish(&rec);

	tid = clone(bare_thread, stack + stack_size,
		    CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
			    CLONE_SYSVSEM | CLONE_SETTLS,
		    NULL, NULL, NULL, NULL);
	if (tid < 0) {
		perror("clone");
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("CASE bare %d\n", tid);
	printf("READY %d\n", (int)getpid());
	while (fgets(line, sizeof(line), stdin))
		;
	publish(NULL);
	return 0;
}
