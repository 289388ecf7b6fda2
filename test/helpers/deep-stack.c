/* SPDX-License-Identifier: Apache-2.0 */
/* deep-stack DEPTH PAD [MODE]: a thread with a 16 MiB stack calls deep()
 * DEPTH + 1 times, each frame holding PAD bytes more, and waits in
 * pause(2) at the bottom: stacks larger than 4 MiB and deeper than 4096
 * frames for ctxdump's --stack-size and -n 0, and odd ones
 * (test-ctxdump-cli.c).  MODE:
 *
 *   data     deep() runs on a ucontext whose stack is in .data (a
 *            file-backed writable mapping), as a coroutine on a static
 *            stack does
 *   maplibc  the program first maps its libc file once more, read-only
 *            (as a libelf user does)
 *   nullcall at the bottom, deep() calls through a null function pointer:
 *            the SIGSEGV handler waits instead
 *   nosym    at the bottom, the thread waits in code no symbol covers,
 *            in the section after that of a function without a size (as
 *            the PLT follows .init and its _init)
 *   mangled  at the bottom, the thread waits in a function named as C++
 *            names demo::Scheduler::wait(int), through one with many
 *            back-references, demo::Many::set(demo::A&, ...), and one
 *            whose demangled name would be a gigabyte (a hostile file)
 *   nocfi    at the bottom, deep() calls the wait through a function
 *            without unwind information (assembly without CFI) that keeps
 *            the frame-pointer chain
 *   cycle    at the bottom, the thread waits in a function whose unwind
 *            information finds its caller through rbp, which points at
 *            two frames on the stack that name each other as their
 *            caller (a corrupt or hostile stack): a walk without end
 *   cycle3   as cycle, with three frames that lead round to the first
 *   longname at the bottom, the thread waits in a function whose name has
 *            256 bytes, one more than ctxdump keeps of a name
 *   symver   at the bottom, the thread waits in a function whose only
 *            symbol is versioned, "versioned_wait@@VERS_1"
 *   cfaloop  at the bottom, the thread waits in a function whose unwind
 *            information computes the caller's frame with a DWARF
 *            expression that jumps back to itself (a hostile file)
 *
 * Prints "READY <pid> <tid>" once at the bottom; exits when stdin is
 * closed. */
#include "config.h"

#include <alloca.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

/* found in .dynsym, so that ctxdump accepts the process */
__thread void *otel_thread_ctx_v1;

static size_t pad;
static atomic_int bottom;

int deep(unsigned n);

/* Never set: the compiler cannot tell that the bottom never returns (it
 * would call deep() infinitely recursive). */
static volatile int leave;

/* The bottom: says where, then waits. */
__attribute__((noinline)) static int
bottom_wait(void)
{
	atomic_store(&bottom, (int)syscall(SYS_gettid));
	while (!leave)
		pause();
	return 0;
}

/* nosym: a function without .size that jumps to a pause(2) loop in the
 * next section, which no symbol covers */
void sizeless(void);
__asm__(".section .ds_sizeless,\"ax\",@progbits\n"
	".globl sizeless\n"
	".type sizeless, @function\n"
	"sizeless:\n"
	"	jmp 1f\n"
	".section .ds_after,\"ax\",@progbits\n"
	"	.p2align 4\n"
	"1:	mov $34, %eax\n" /* SYS_pause, x86_64 */
	"	syscall\n"
	"	jmp 1b\n"
	".text\n");

static int
nosym_wait(void)
{
	atomic_store(&bottom, (int)syscall(SYS_gettid));
	sizeless();
	return 0;
}

/* mangled: C++ names, without a C++ compiler.  The last one's 26
 * back-references each double what they refer to. */
static int mangled_wait(void) __asm__("_ZN4demo9Scheduler4waitEi");
static int many_refs(void) __asm__("_ZN4demo4Many3setERNS_1AE"
				   "S2_S2_S2_S2_S2_S2_S2_S2_S2_S2_"
				   "S2_S2_S2_S2_S2_S2_S2_S2_S2_S2_");
#define BOMB_NAME                                                            \
	"_Z1f1A1BIS_S_E"                                                     \
	"S0_IS1_S1_ES0_IS2_S2_ES0_IS3_S3_ES0_IS4_S4_ES0_IS5_S5_ES0_IS6_S6_E" \
	"S0_IS7_S7_ES0_IS8_S8_ES0_IS9_S9_ES0_ISA_SA_ES0_ISB_SB_ES0_ISC_SC_E" \
	"S0_ISD_SD_ES0_ISE_SE_ES0_ISF_SF_ES0_ISG_SG_ES0_ISH_SH_ES0_ISI_SI_E" \
	"S0_ISJ_SJ_ES0_ISK_SK_ES0_ISL_SL_ES0_ISM_SM_ES0_ISN_SN_ES0_ISO_SO_E" \
	"S0_ISP_SP_E"
static int bomb(void) __asm__(BOMB_NAME);

__attribute__((noinline)) static int
bomb(void)
{
	return bottom_wait() + 1;
}

__attribute__((noinline)) static int
many_refs(void)
{
	return bomb() + 1;
}

__attribute__((noinline)) static int
mangled_wait(void)
{
	return many_refs() + 1;
}

/* longname: "longname" and 248 x, 256 bytes (STACK_SYMBOL_MAX) */
#define X8  "xxxxxxxx"
#define X64 X8 X8 X8 X8 X8 X8 X8 X8
static int long_wait(void) __asm__("longname" X64 X64 X64 X8 X8 X8 X8 X8 X8 X8);

__attribute__((noinline)) static int
long_wait(void)
{
	/* + 2: not one body with bomb(), which -fipa-icf would merge */
	return bottom_wait() + 2;
}

/* symver: .symver with @@@ renames the symbol, none left unversioned */
__attribute__((noinline, used)) static int
versioned_wait(void)
{
	return bottom_wait() + 3;
}
__asm__(".symver versioned_wait, versioned_wait@@@VERS_1");

/* nocfi: no .cfi_* directives, so no FDE in .eh_frame */
int nocfi_call(void);
__asm__(".text\n"
	".globl nocfi_call\n"
	".type nocfi_call, @function\n"
	"nocfi_call:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	call bottom_wait\n"
	"	pop %rbp\n"
	"	ret\n"
	".size nocfi_call, .-nocfi_call\n");

/* cycle: frames[0..1] and frames[2..3] are {saved rbp, return address}
 * pairs; cycle_spin() waits with rbp = frames, under unwind information
 * that says its caller's frame is at rbp */
void cycle_spin(const uint64_t *frames);
extern const char cycle_ret[];
__asm__(".text\n"
	".globl cycle_spin\n"
	".type cycle_spin, @function\n"
	"cycle_spin:\n"
	"	.cfi_startproc\n"
	"	push %rbp\n"
	"	.cfi_def_cfa_offset 16\n"
	"	.cfi_offset %rbp, -16\n"
	"	mov %rsp, %rbp\n"
	"	.cfi_def_cfa_register %rbp\n"
	"	mov %rdi, %rbp\n"
	"1:	mov $34, %eax\n" /* SYS_pause, x86_64 */
	"	syscall\n"
	"	jmp 1b\n"
	/* never run: its return address is the one the frames hold */
	"	call cycle_spin\n"
	".globl cycle_ret\n"
	"cycle_ret:\n"
	"	.cfi_endproc\n"
	".size cycle_spin, .-cycle_spin\n");

/* frames in the cycle: 2, or 3 (a cycle that only a check against an
 * earlier frame, not the one before, finds) */
static unsigned cycle_len = 2;

__attribute__((noinline)) static int
cycle_wait(void)
{
	uint64_t f[6] __attribute__((aligned(16)));
	unsigned i;

	for (i = 0; i < cycle_len; i++) {
		f[2 * i] = (uint64_t)(uintptr_t)&f[2 * ((i + 1) % cycle_len)];
		f[2 * i + 1] = (uint64_t)(uintptr_t)cycle_ret;
	}
	atomic_store(&bottom, (int)syscall(SYS_gettid));
	cycle_spin(f);
	return 0;
}

/* cfaloop: DW_CFA_def_cfa_expression, 3 bytes: DW_OP_skip -3 */
int cfaloop_wait(void);
__asm__(".text\n"
	".globl cfaloop_wait\n"
	".type cfaloop_wait, @function\n"
	"cfaloop_wait:\n"
	"	.cfi_startproc\n"
	"	push %rbp\n"
	"	.cfi_escape 0x0f, 3, 0x2f, 0xfd, 0xff\n"
	"	call bottom_wait\n"
	"	pop %rbp\n"
	"	ret\n"
	"	.cfi_endproc\n"
	".size cfaloop_wait, .-cfaloop_wait\n");

/* nullcall: what deep(0) calls; read as it is called, so that the call
 * stays a call through a null pointer */
static int (*volatile bottom_call)(void) = bottom_wait;

static void
on_segv(int sig)
{
	(void)sig;
	(void)bottom_wait();
}

/* Not a loop, not a tail call: the frame is used after the call. */
__attribute__((noinline)) int
deep(unsigned n)
{
	volatile char *frame = alloca(pad + 1);

	frame[0] = (char)n;
	if (n == 0)
		return bottom_call();
	return deep(n - 1) + frame[0];
}

/* initialised: in .data, not .bss */
static char data_stack[1 << 20] = {1};
static ucontext_t back, on_data;
static unsigned depth;

static void
on_data_stack(void)
{
	(void)deep(depth);
}

static void *
run(void *arg)
{
	if (arg) {
		/* the thread's own stack is the way back, never taken */
		if (getcontext(&on_data) != 0)
			return NULL;
		on_data.uc_stack.ss_sp = data_stack;
		on_data.uc_stack.ss_size = sizeof(data_stack);
		on_data.uc_link = &back;
		makecontext(&on_data, on_data_stack, 0);
		(void)swapcontext(&back, &on_data);
		return NULL;
	}
	return (void *)(long)deep(depth);
}

/* libc's file mapped once more, at offset 0 like a loaded object's first
 * mapping */
static int
map_libc(void)
{
	Dl_info info;
	struct stat st;
	int fd;

	if (!dladdr((void *)pause, &info) || !info.dli_fname)
		return -1;
	fd = open(info.dli_fname, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0 ||
	    mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) == MAP_FAILED)
		return -1;
	close(fd);
	return 0;
}

int
main(int argc, char **argv)
{
	pthread_attr_t a;
	pthread_t th;
	char line[64];

	const char *mode = argc == 4 ? argv[3] : "";

	if (argc < 3 || argc > 4 ||
	    (*mode && strcmp(mode, "data") != 0 && strcmp(mode, "maplibc") != 0 &&
	     strcmp(mode, "nullcall") != 0 && strcmp(mode, "nosym") != 0 &&
	     strcmp(mode, "mangled") != 0 && strcmp(mode, "nocfi") != 0 &&
	     strcmp(mode, "cycle") != 0 && strcmp(mode, "cycle3") != 0 &&
	     strcmp(mode, "longname") != 0 && strcmp(mode, "symver") != 0 &&
	     strcmp(mode, "cfaloop") != 0)) {
		fprintf(stderr,
			"usage: deep-stack DEPTH PAD [data|maplibc|nullcall|"
			"nosym|mangled|nocfi|cycle|cycle3|longname|symver|cfaloop]\n");
		return 64;
	}
	if (strcmp(mode, "nullcall") == 0) {
		signal(SIGSEGV, on_segv);
		bottom_call = NULL;
	} else if (strcmp(mode, "nosym") == 0) {
		bottom_call = nosym_wait;
	} else if (strcmp(mode, "mangled") == 0) {
		bottom_call = mangled_wait;
	} else if (strcmp(mode, "nocfi") == 0) {
		bottom_call = nocfi_call;
	} else if (strcmp(mode, "cycle") == 0) {
		bottom_call = cycle_wait;
	} else if (strcmp(mode, "cycle3") == 0) {
		cycle_len = 3;
		bottom_call = cycle_wait;
	} else if (strcmp(mode, "longname") == 0) {
		bottom_call = long_wait;
	} else if (strcmp(mode, "symver") == 0) {
		bottom_call = versioned_wait;
	} else if (strcmp(mode, "cfaloop") == 0) {
		bottom_call = cfaloop_wait;
	}
	depth = (unsigned)atol(argv[1]);
	pad = (size_t)atol(argv[2]);
	if (strcmp(mode, "maplibc") == 0 && map_libc() != 0)
		return 1;
	if (pthread_attr_init(&a) != 0 ||
	    pthread_attr_setstacksize(&a, 16u << 20) != 0 ||
	    pthread_create(&th, &a, run, strcmp(mode, "data") == 0 ? &a : NULL) != 0)
		return 1;
	while (!atomic_load(&bottom))
		usleep(1000);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("READY %d %d\n", (int)getpid(), atomic_load(&bottom));
	while (fgets(line, sizeof(line), stdin))
		;
	return 0;
}
