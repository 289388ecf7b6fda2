/* SPDX-License-Identifier: Apache-2.0 */
/* writer-redlopen LIB: a module id reused after dlclose(), with a thread
 * whose DTV still holds the old module's block (reader.md §1.4 (b), §8).
 *
 * LIB (libwtls-gd.so, or libwtls-tlsdesc.so with
 * GLIBC_TUNABLES=glibc.rtld.optional_static_tls=0) is dlopen()ed; the
 * "stale" thread publishes a record through it, so glibc gives that
 * thread a block for the module and records it in the thread's DTV.  The
 * library is then dlclose()d (and must be unloaded) and dlopen()ed again:
 * it gets the same module id with a newer generation.  glibc repairs a
 * DTV only when its own thread next reaches dynamic TLS, which the stale
 * thread never does: its DTV keeps the old generation and the old block,
 * which still holds the old record pointer.  The "fresh" thread, started
 * after the reload, and the main thread publish records through the new
 * library.
 *
 * With "wait" (writer-redlopen LIB wait), the reload waits for a line on
 * stdin after the stale thread published: a reader can resolve the first
 * library before it goes (test-ctxdump-reload.c).  While the library is
 * unloaded, the stale record gets another trace id, so a reader that still
 * follows the stale thread's DTV slot after the reload shows that one.
 *
 * Output:
 *   THREAD <tid> stale <ptr> <trace_id>      first, with "wait" only
 *   LOADED <pid>                             then, with "wait" only
 *   MODID <first> <second> <base1> <base2>   module ids, load addresses
 *   THREAD <tid> <stale|fresh|main> <ptr> <trace_id>
 *   READY <pid>
 * then waits for EOF on stdin and exits 0.  No sleeps: the threads say
 * through barriers when they have published. */
#include "config.h"

#include <dlfcn.h>
#include <link.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "thread-record.h"

enum { REC_STALE, REC_FRESH, REC_MAIN, N_REC };

static const char *const rec_names[N_REC] = {"stale", "fresh", "main"};

static uint64_t recs[N_REC][TREC_MAX_SIZE / 8];
static void *readback[N_REC];
static pid_t tids[N_REC];
static void (*lib_set)(void *rec);
static void *(*lib_get)(void);
static pthread_barrier_t published;
static int park_fd[2] = {-1, -1};

static void
die(const char *what)
{
	fprintf(stderr, "writer-redlopen: %s\n", what);
	exit(1);
}

/* salt 0: the record as first published; 1: the stale record rewritten
 * while its library was unloaded */
static void
build(unsigned k, unsigned salt)
{
	struct otel_thread_ctx_record *r = (struct otel_thread_ctx_record *)recs[k];
	size_t i;

	r->valid = 0;
	for (i = 0; i < sizeof(r->trace_id); i++)
		r->trace_id[i] = (uint8_t)(0x10 * (k + 1) + 0x80 * salt + i);
	for (i = 0; i < sizeof(r->span_id); i++)
		r->span_id[i] = (uint8_t)(0xa0 + 0x10 * k + i);
	r->trace_flags = 1;
	r->attrs_data_size = 0;
	r->valid = TREC_VALID;
}

static void
publish(unsigned k)
{
	tids[k] = (pid_t)syscall(SYS_gettid);
	build(k, 0);
	lib_set(recs[k]);
	readback[k] = lib_get();
}

/* Never touches the library again after publishing. */
static void *
thread_main(void *arg)
{
	unsigned k = (unsigned)(uintptr_t)arg;
	char c;

	publish(k);
	pthread_barrier_wait(&published);
	while (read(park_fd[0], &c, 1) > 0)
		;
	return NULL;
}

static void *
load(const char *path, size_t *modid, uintptr_t *base)
{
	struct link_map *lm = NULL;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	if (!h)
		die(dlerror());
	*(void **)&lib_set = dlsym(h, "writer_tls_set");
	*(void **)&lib_get = dlsym(h, "writer_tls_get");
	if (!lib_set || !lib_get)
		die("the library lacks writer_tls_set/get");
	if (dlinfo(h, RTLD_DI_TLS_MODID, modid) != 0 ||
	    dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0)
		die(dlerror());
	*base = (uintptr_t)lm->l_addr;
	return h;
}

static void
print_rec(unsigned k)
{
	const struct otel_thread_ctx_record *r = (const void *)recs[k];
	size_t i;

	printf("THREAD %d %s 0x%" PRIxPTR " ", (int)tids[k], rec_names[k],
	       (uintptr_t)readback[k]);
	for (i = 0; i < sizeof(r->trace_id); i++)
		printf("%02x", r->trace_id[i]);
	putchar('\n');
}

int
main(int argc, char **argv)
{
	pthread_t stale, fresh;
	size_t modid1 = 0, modid2 = 0;
	uintptr_t base1 = 0, base2 = 0;
	bool wait_reload = argc == 3 && strcmp(argv[2], "wait") == 0;
	void *h;
	char c;

	if (argc != 2 && !wait_reload) {
		fprintf(stderr, "usage: writer-redlopen LIBRARY [wait]\n");
		return 2;
	}
	if (pipe(park_fd) != 0 || pthread_barrier_init(&published, NULL, 2) != 0)
		die("setup failed");

	h = load(argv[1], &modid1, &base1);
	if (pthread_create(&stale, NULL, thread_main, (void *)(uintptr_t)REC_STALE))
		die("pthread_create failed");
	pthread_barrier_wait(&published);
	if (wait_reload) {
		print_rec(REC_STALE);
		printf("LOADED %d\n", (int)getpid());
		fflush(stdout);
		while (read(0, &c, 1) == 1 && c != '\n')
			;
	}

	/* the old module goes; its id is free for the next one */
	lib_set = NULL;
	lib_get = NULL;
	if (dlclose(h) != 0)
		die(dlerror());
	if (dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD))
		die("the library was not unloaded by dlclose()");
	if (wait_reload)
		build(REC_STALE, 1);

	h = load(argv[1], &modid2, &base2);
	if (pthread_create(&fresh, NULL, thread_main, (void *)(uintptr_t)REC_FRESH))
		die("pthread_create failed");
	pthread_barrier_wait(&published);
	publish(REC_MAIN);

	printf("MODID %zu %zu 0x%" PRIxPTR " 0x%" PRIxPTR "\n", modid1, modid2, base1,
	       base2);
	print_rec(REC_STALE);
	print_rec(REC_FRESH);
	print_rec(REC_MAIN);
	printf("READY %d\n", (int)getpid());
	fflush(stdout);

	while (read(0, &c, 1) > 0)
		;
	close(park_fd[1]);
	pthread_join(stale, NULL);
	pthread_join(fresh, NULL);
	lib_set(NULL);
	(void)h; /* stays loaded until exit: the threads' records point here */
	return 0;
}
