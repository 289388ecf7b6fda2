/* SPDX-License-Identifier: Apache-2.0 */
/* writer-reload LIB PAD [late | switch LIB2]: an OTEP-4947 writer library
 * dlclose()d and dlopen()ed again while a reader records
 * (test-ctxdump-reload.c).
 *
 * LIB (libwtls-tlsdesc.so or libwtls-gd.so) is dlopen()ed and two worker
 * threads publish a record through it (phase 1).  On "reload" on stdin,
 * LIB is dlclose()d (and must be unloaded), PAD (a library with TLS of its
 * own and no known variable) is dlopen()ed into the room LIB left (its
 * static TLS or its module id) and LIB is dlopen()ed again, so it ends up
 * at another TLS place; the workers then publish phase-2 records through
 * it.  Every record stays in memory, so a reader that keeps LIB's old
 * TLS place reads stale pointers (or PAD's variable) instead.
 *
 * With "late", LIB is not loaded before "reload" (the workers publish
 * nothing in phase 1, no THREAD lines) and then only dlopen()ed: a
 * writer that appears while the reader records.
 *
 * With "switch LIB2", LIB2 (another writer library, e.g. libwtls-gd.so
 * after libwtls-tlsdesc.so) is dlopen()ed in place of LIB after the
 * dlclose(): the variable comes back in another module, perhaps through
 * another TLS access model, and a reader that describes the layout it
 * read through must describe LIB2's from then on.
 *
 * Output:
 *   THREAD <tid> <phase> <ptr> <trace_id>    per worker and phase
 *   READY <pid>                              after phase 1
 *   MOVED <0|1> <old> <new> <modid1> <modid2>
 *                                            whether LIB's TLS place (TP
 *                                            offset of the calling thread's
 *                                            variable) or module id changed
 *                                            (with "switch": LIB2's against
 *                                            LIB's)
 *   RELOADED                                 after phase 2
 * then waits for EOF on stdin and exits 0.  No sleeps. */
#include "config.h"

#include <dlfcn.h>
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

#define N_WORKERS 2
#define N_PHASES  2

static uint64_t recs[N_PHASES][N_WORKERS][TREC_MAX_SIZE / 8];
static void *readback[N_PHASES][N_WORKERS];
static pid_t tids[N_WORKERS];
static void (*lib_set)(void *rec);
static void *(*lib_get)(void);
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int phase = -1; /* the phase the workers are to publish */
static int done;       /* workers that published it */
static int park_fd[2] = {-1, -1};

static void
die(const char *what)
{
	fprintf(stderr, "writer-reload: %s\n", what);
	exit(1);
}

static void
build(int p, int w)
{
	struct otel_thread_ctx_record *r = (struct otel_thread_ctx_record *)recs[p][w];
	size_t i;

	for (i = 0; i < sizeof(r->trace_id); i++)
		r->trace_id[i] = (uint8_t)(0x40 + 0x20 * p + 0x08 * w + i);
	for (i = 0; i < sizeof(r->span_id); i++)
		r->span_id[i] = (uint8_t)(0xc0 + 0x10 * p + w + i);
	r->trace_flags = 1;
	r->attrs_data_size = 0;
	r->valid = TREC_VALID;
}

static void *
worker_main(void *arg)
{
	int w = (int)(uintptr_t)arg, p;
	char c;

	tids[w] = (pid_t)syscall(SYS_gettid);
	for (p = 0; p < N_PHASES; p++) {
		pthread_mutex_lock(&lock);
		while (phase < p)
			pthread_cond_wait(&cond, &lock);
		pthread_mutex_unlock(&lock);
		build(p, w);
		if (lib_set) { /* none in phase 1 of "late" */
			lib_set(recs[p][w]);
			readback[p][w] = lib_get();
		}
		pthread_mutex_lock(&lock);
		done++;
		pthread_cond_broadcast(&cond);
		pthread_mutex_unlock(&lock);
	}
	while (read(park_fd[0], &c, 1) > 0)
		;
	return NULL;
}

static void
run_phase(int p)
{
	pthread_mutex_lock(&lock);
	done = 0;
	phase = p;
	pthread_cond_broadcast(&cond);
	while (done < N_WORKERS)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
}

static void *
load(const char *path, size_t *modid)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	if (!h)
		die(dlerror());
	if (dlinfo(h, RTLD_DI_TLS_MODID, modid) != 0)
		die(dlerror());
	*(void **)&lib_set = dlsym(h, "writer_tls_set");
	*(void **)&lib_get = dlsym(h, "writer_tls_get");
	if (!lib_set || !lib_get)
		die("the library lacks writer_tls_set/get");
	return h;
}

/* Where LIB's variable is for the calling thread, relative to its thread
 * pointer (dlsym() of a thread-local gives the caller's copy). */
static intptr_t
tls_place(void *h)
{
	void *v = dlsym(h, OTEL_THREAD_CTX_SYMBOL);

	if (!v)
		die("the library does not export " OTEL_THREAD_CTX_SYMBOL);
	return (intptr_t)v - (intptr_t)__builtin_thread_pointer();
}

static void
print_phase(int p)
{
	int w;
	size_t i;

	for (w = 0; w < N_WORKERS; w++) {
		const struct otel_thread_ctx_record *r = (const void *)recs[p][w];

		printf("THREAD %d %d 0x%" PRIxPTR " ", (int)tids[w], p + 1,
		       (uintptr_t)readback[p][w]);
		for (i = 0; i < sizeof(r->trace_id); i++)
			printf("%02x", r->trace_id[i]);
		putchar('\n');
	}
	fflush(stdout);
}

int
main(int argc, char **argv)
{
	pthread_t th[N_WORKERS];
	intptr_t place1 = 0, place2;
	size_t modid1 = 0, modid2 = 0;
	char line[64];
	void *h = NULL, *pad = NULL;
	const char *lib2;
	bool late;
	int w;

	if (argc != 3 && !(argc == 4 && strcmp(argv[3], "late") == 0) &&
	    !(argc == 5 && strcmp(argv[3], "switch") == 0)) {
		fprintf(stderr, "usage: writer-reload LIB PAD [late | switch LIB2]\n");
		return 2;
	}
	late = argc == 4;
	lib2 = argc == 5 ? argv[4] : argv[1];
	if (pipe(park_fd) != 0)
		die("pipe failed");
	if (!late) {
		h = load(argv[1], &modid1);
		place1 = tls_place(h);
	}
	for (w = 0; w < N_WORKERS; w++)
		if (pthread_create(&th[w], NULL, worker_main, (void *)(uintptr_t)w))
			die("pthread_create failed");
	run_phase(0);
	if (!late)
		print_phase(0);
	printf("READY %d\n", (int)getpid());
	fflush(stdout);

	if (!fgets(line, sizeof(line), stdin) || strcmp(line, "reload\n") != 0)
		die("expected \"reload\" on stdin");
	if (!late) {
		lib_set = NULL;
		lib_get = NULL;
		if (dlclose(h) != 0)
			die(dlerror());
		if (dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD))
			die("the library was not unloaded by dlclose()");
		pad = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
		if (!pad)
			die(dlerror());
	}
	h = load(lib2, &modid2);
	place2 = tls_place(h);
	printf("MOVED %d %" PRIdPTR " %" PRIdPTR " %zu %zu\n",
	       place1 != place2 || modid1 != modid2, place1, place2, modid1, modid2);
	run_phase(1);
	print_phase(1);
	printf("RELOADED\n");
	fflush(stdout);

	while (fgets(line, sizeof(line), stdin))
		;
	close(park_fd[1]);
	for (w = 0; w < N_WORKERS; w++)
		pthread_join(th[w], NULL);
	(void)pad; /* both stay loaded until exit: the records are here */
	return 0;
}
