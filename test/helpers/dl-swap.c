/* SPDX-License-Identifier: Apache-2.0 */
/* One library dlclose()d and another dlopen()ed in its place while
 * ctxdump records (test-ctxdump-record.c):
 *
 *   dl-swap DIR
 *
 * prints "READY <pid>", then on a line "a" on stdin dlopen()s
 * DIR/libswap-a.so and starts a thread spinning in its swap_spin_a(), and
 * prints "A <load address> <tid>"; on a line "b" the same with
 * DIR/libswap-b.so and swap_spin_b() ("B ...").  Either first ends the
 * thread of the library loaded before, if any, and dlclose()s it: the
 * two libraries have the same size, so the loader usually maps the next
 * where the last one was.  On a line "loop MS" it prints "LOOPING" and
 * swaps the two over and over, each spinning for about MS milliseconds,
 * until the next line or the end of stdin (for ctxdump's one-shot
 * --stacks).
 * Exits 0 when stdin is closed. */
#include "config.h"

#include <dlfcn.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct spin {
	void (*fn)(volatile int *);
	volatile int stop;
	volatile int tid;
	pthread_t th;
	void *h;
};

static void
spin(struct spin *s)
{
	s->tid = (int)syscall(SYS_gettid);
	s->fn(&s->stop);
}

/* The thread's outer frame tells which library it was started in. */
static __attribute__((noinline)) void *
spin_main_a(void *arg)
{
	spin(arg);
	__asm__ volatile("" ::: "memory");
	return NULL;
}

static __attribute__((noinline)) void *
spin_main_b(void *arg)
{
	spin(arg);
	__asm__ volatile("" ::: "memory");
	return NULL;
}

static bool quiet;

static int
start(const char *dir, const char *name, const char *sym, struct spin *s)
{
	struct link_map *lm = NULL;
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	memset(s, 0, sizeof(*s));
	s->h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!s->h) {
		fprintf(stderr, "dl-swap: %s\n", dlerror());
		return -1;
	}
	*(void **)&s->fn = dlsym(s->h, sym);
	if (!s->fn || dlinfo(s->h, RTLD_DI_LINKMAP, &lm) != 0 ||
	    pthread_create(&s->th, NULL, sym[10] == 'a' ? spin_main_a : spin_main_b,
			   s) != 0)
		return -1;
	while (!s->tid)
		usleep(1000);
	if (!quiet) {
		printf("%c %lx %d\n", sym[10] == 'a' ? 'A' : 'B',
		       (unsigned long)lm->l_addr, s->tid);
		fflush(stdout);
	}
	return 0;
}

static void
finish(struct spin *s)
{
	s->stop = 1;
	pthread_join(s->th, NULL);
	dlclose(s->h);
	s->h = NULL;
}

int
main(int argc, char **argv)
{
	static struct spin s;
	char line[64];

	if (argc != 2) {
		fprintf(stderr, "usage: dl-swap DIR\n");
		return 64;
	}
	/* unbuffered: "loop" polls the descriptor for the next line, which
	 * must not sit in stdio's buffer */
	setvbuf(stdin, NULL, _IONBF, 0);
	printf("READY %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		bool a = strcmp(line, "a\n") == 0;

		if (strncmp(line, "loop ", 5) == 0) {
			struct pollfd pfd = {.fd = 0, .events = POLLIN};
			int ms = atoi(line + 5);

			printf("LOOPING\n");
			fflush(stdout);
			quiet = true;
			for (a = true; poll(&pfd, 1, ms) == 0; a = !a) {
				if (s.h)
					finish(&s);
				if (start(argv[1], a ? "libswap-a.so" : "libswap-b.so",
					  a ? "swap_spin_a" : "swap_spin_b", &s) != 0)
					return 1;
			}
			quiet = false;
			continue;
		}
		if (!a && strcmp(line, "b\n") != 0)
			continue;
		if (s.h)
			finish(&s);
		if (start(argv[1], a ? "libswap-a.so" : "libswap-b.so",
			  a ? "swap_spin_a" : "swap_spin_b", &s) != 0)
			return 1;
	}
	if (s.h)
		finish(&s);
	return 0;
}
