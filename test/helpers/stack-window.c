/* SPDX-License-Identifier: Apache-2.0 */
/* stack-window: a statically linked program (no .eh_frame_hdr, so ctxdump
 * builds its search table from .eh_frame) whose main thread waits in
 * read(2) in a frame whose CFA is rbp + 16, with rbp the address given as
 * argv[1] (default 0x8000000000000000: where ctxdump serves the tables it
 * built).  That address is no memory of the process: an unwinder must stop
 * there (test-ctxdump-static.c).  Prints "READY <pid>", exits when stdin is
 * closed. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* found in .symtab, so that ctxdump accepts the process */
__thread void *otel_thread_ctx_v1;

long stack_window_read(int fd, void *buf, long n, unsigned long rbp);

/* read(fd, buf, n) with rbp = the 4th argument and the CFA described as
 * rbp + 16 while in the system call */
__asm__(".text\n"
	".globl stack_window_read\n"
	".type stack_window_read, @function\n"
	"stack_window_read:\n"
	".cfi_startproc\n"
	"	push %rbp\n"
	".cfi_adjust_cfa_offset 8\n"
	".cfi_rel_offset %rbp, 0\n"
	"	mov %rcx, %rbp\n"
	".cfi_def_cfa %rbp, 16\n"
	"	xor %eax, %eax\n"
	"	syscall\n"
	"	mov %rsp, %rbp\n"
	".cfi_def_cfa %rsp, 16\n"
	"	pop %rbp\n"
	".cfi_adjust_cfa_offset -8\n"
	".cfi_restore %rbp\n"
	"	ret\n"
	".cfi_endproc\n"
	".size stack_window_read, .-stack_window_read\n");

int
main(int argc, char **argv)
{
	unsigned long rbp = argc > 1 ? strtoul(argv[1], NULL, 0) : 0x8000000000000000ul;
	char c;

	otel_thread_ctx_v1 = NULL;
	printf("READY %d\n", (int)getpid());
	fflush(stdout);
	while (stack_window_read(0, &c, 1, rbp) > 0)
		;
	return 0;
}
