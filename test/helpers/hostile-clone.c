/* SPDX-License-Identifier: Apache-2.0 */
/* A writer with threads started by a raw clone(), which glibc never set
 * up.  Prints "CASE <name> <tid>" for each, "READY <pid>" and blocks until
 * stdin is closed.  The main thread publishes trace id 0x33..., and an
 * Elastic correlation buffer with trace id 0x44... (another layout, read
 * through the thread pointer too); the modes (argv[1]):
 *   bare    (default) one thread with CLONE_SETTLS and a thread pointer
 *           of 0: it has no TLS at all, so no otel_thread_ctx_v1.
 *           ctxdump must say so (not report a DTV it never needed, nor
 *           fail to read its Elastic buffer) and still read the main
 *           thread's contexts.
 *   shared  two threads without CLONE_SETTLS: they run on the main
 *           thread's thread pointer, and the main thread's TLS is not
 *           theirs.  ctxdump must show the contexts for the main thread
 *           only (glibc's thread descriptor there names it).
 *   pair    one thread without CLONE_SETTLS: the least that shares a
 *           thread pointer, with the main thread.
 *   copied  three threads with CLONE_SETTLS and one thread pointer into a
 *           copy of the main thread's TLS and thread descriptor: none
 *           owns it, and the descriptor names a thread (main) that is
 *           not one of them.  ctxdump must show the copied contexts for
 *           none of them. */
#include "config.h"

#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "record-writer.h"

__attribute__((
	visibility("default"))) __thread void *elastic_apm_profiling_correlation_tls_v1;

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

/* A raw clone() thread with flags added to the usual ones, on its own
 * stack; its tid, or -1. */
static int
start(int flags, void *tls)
{
	size_t stack_size = 1 << 16;
	char *stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	int tid;

	if (stack == MAP_FAILED)
		return -1;
	tid = clone(bare_thread, stack + stack_size,
		    CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
			    CLONE_SYSVSEM | flags,
		    NULL, NULL, tls, NULL);
	if (tid < 0)
		perror("clone");
	return tid;
}

/* The copy of the main thread's TLS for "copied": its static TLS block
 * from the lower of the two pointers on, and the first 1 KiB of its
 * thread descriptor (x86-64: the thread pointer points at glibc's struct
 * pthread, whose tid lies inside that). */
static _Alignas(4096) uint8_t fake_tls[1 << 16];

static void *
copy_tls(void)
{
	uintptr_t tp = (uintptr_t)__builtin_thread_pointer();
	uintptr_t a = (uintptr_t)&otel_thread_ctx_v1;
	uintptr_t b = (uintptr_t)&elastic_apm_profiling_correlation_tls_v1;
	uintptr_t lo = (a < b ? a : b) & ~(uintptr_t)63;
	uint8_t *fake = fake_tls + sizeof(fake_tls) / 2;

	if (lo > tp || tp - lo > sizeof(fake_tls) / 4)
		return NULL;
	memcpy(fake - (tp - lo), (void *)lo, tp - lo + 1024);
	return fake;
}

int
main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "bare";
	static struct record rec;
	static uint8_t elastic[37] = {1, 0, 1, 1, 1};
	char line[64];

	fill(&rec, 0x32, "main"); /* trace id 0x33... */
	publish(&rec);
	memset(elastic + 5, 0x44, 16);
	memset(elastic + 21, 0x55, 8);
	*(void *volatile *)&elastic_apm_profiling_correlation_tls_v1 = elastic;
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (strcmp(mode, "bare") == 0) {
		int tid = start(CLONE_SETTLS, NULL);

		if (tid < 0)
			return 1;
		printf("CASE bare %d\n", tid);
	} else if (strcmp(mode, "shared") == 0) {
		int a = start(0, NULL), b = start(0, NULL);

		if (a < 0 || b < 0)
			return 1;
		printf("CASE shared1 %d\n", a);
		printf("CASE shared2 %d\n", b);
	} else if (strcmp(mode, "pair") == 0) {
		int tid = start(0, NULL);

		if (tid < 0)
			return 1;
		printf("CASE pair %d\n", tid);
	} else if (strcmp(mode, "copied") == 0) {
		void *fake = copy_tls();

		if (!fake) {
			fputs("cannot copy the TLS\n", stderr);
			return 1;
		}
		for (int i = 1; i <= 3; i++) {
			int tid = start(CLONE_SETTLS, fake);

			if (tid < 0)
				return 1;
			printf("CASE copy%d %d\n", i, tid);
		}
	} else {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 64;
	}
	printf("READY %d\n", (int)getpid());
	while (fgets(line, sizeof(line), stdin))
		;
	publish(NULL);
	return 0;
}
