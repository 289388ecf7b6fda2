/* SPDX-License-Identifier: Apache-2.0 */
/* dlopen-loop LIB HOLD_US [copy DIR]: an OTEP-4947 writer library
 * dlopen()ed and dlclose()d in a loop while ctxdump dumps the process
 * (test-ctxdump-reload.c).
 *
 * Two worker threads park; the main thread loops: dlopen() LIB (e.g.
 * libwtls-tlsdesc.so, test/helpers/writer-tls-lib.c), publish a record
 * through it, keep it loaded HOLD_US microseconds, dlclose() it (it must
 * be unloaded).  So the library is mapped when ctxdump looks it up and
 * may be unmapped, or mapped again with its slots not filled in yet, when
 * the threads stop.  With "copy DIR", each round loads a fresh copy of
 * LIB (another inode) at DIR/libdlopen-loop.so, renamed over the last
 * one, as a plugin that is replaced and loaded again.  Only one copy is
 * ever loaded.
 *
 * Prints "READY <pid>" after the first round, then loops until stdin is
 * closed; prints "ROUNDS <n>" and exits 0.  The library is unloaded at
 * the end, and the copy removed.
 *
 * dlopen-loop LIB zero|none: LIB (libwtls-slot.so) dlopen()ed once and
 * the slot of its variable broken for good: zeros (not filled in) or an
 * inaccessible page (unreadable), and a process context of an unknown
 * version published; prints "READY <pid>" and waits until
 * stdin is closed. */
#include "config.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "thread-record.h"

#define N_WORKERS 2

static atomic_bool stop;
static int park_fd[2] = {-1, -1};

static void
die(const char *what)
{
	fprintf(stderr, "dlopen-loop: %s\n", what);
	exit(1);
}

/* from to a new file renamed over to: another inode each time */
static void
copy(const char *from, const char *to)
{
	char tmp[4200];
	struct stat st;
	int in = open(from, O_RDONLY | O_CLOEXEC), out;

	snprintf(tmp, sizeof(tmp), "%s.tmp", to);
	if (in < 0 || fstat(in, &st) < 0)
		die("cannot open the library");
	out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	if (out < 0 || sendfile(out, in, NULL, (size_t)st.st_size) != st.st_size)
		die("cannot copy the library");
	close(in);
	close(out);
	if (rename(tmp, to) != 0)
		die("cannot rename the copy");
}

static void *
park_main(void *arg)
{
	char c;

	(void)arg;
	while (read(park_fd[0], &c, 1) > 0)
		;
	return NULL;
}

static void *
stdin_main(void *arg)
{
	char line[64];

	(void)arg;
	while (fgets(line, sizeof(line), stdin))
		;
	atomic_store(&stop, true);
	return NULL;
}

static void
hold(unsigned us)
{
	struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)us * 1000};

	if (us)
		nanosleep(&ts, NULL);
}

/* An OTEP-4719 process context of a version no reader knows, which
 * ctxdump warns about: once however many times it tries the dump. */
static void
pctx_unknown_version(void)
{
	uint64_t now = 1;
	uint32_t v = 99;
	uint8_t *map;
	int fd = memfd_create("OTEL_CTX", MFD_CLOEXEC);

	if (fd < 0 || ftruncate(fd, 4096) < 0)
		die("memfd_create failed");
	map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		die("mmap failed");
	memcpy(map, "OTEL_CTX", 8);
	memcpy(map + 8, &v, sizeof(v));
	memcpy(map + 16, &now, sizeof(now));
}

/* "zero" and "none": LIB (libwtls-slot.so) dlopen()ed once, and the
 * TLSDESC descriptor of its variable overwritten with zeros (as the
 * loader has not filled it in yet), or its page made inaccessible (as
 * unmapped, to process_vm_readv()), for good.  Nothing touches the
 * library again; _exit(): not even its destructors. */
static int
broken(const char *lib, bool zero)
{
	long pg = sysconf(_SC_PAGESIZE);
	void *(*slot)(void);
	uintptr_t at;
	char line[64];
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);

	if (!h)
		die(dlerror());
	*(void **)&slot = dlsym(h, "writer_tls_slot");
	if (!slot || !slot())
		die("the library does not tell where its descriptor is");
	at = (uintptr_t)slot();
	if (mprotect((void *)(at & ~(uintptr_t)(pg - 1)), (size_t)pg,
		     zero ? PROT_READ | PROT_WRITE : PROT_NONE) != 0)
		die("mprotect failed");
	if (zero)
		memset((void *)at, 0, 16);
	pctx_unknown_version();
	printf("READY %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		;
	_exit(0);
}

int
main(int argc, char **argv)
{
	static _Alignas(8) uint8_t rec[TREC_MAX_SIZE];
	struct otel_thread_ctx_record *r = (struct otel_thread_ctx_record *)rec;
	pthread_t th[N_WORKERS + 1];
	char path[4096];
	const char *lib = argv[1];
	unsigned long rounds = 0;
	unsigned hold_us;
	bool copies;
	int w;

	if (argc == 3 && (strcmp(argv[2], "zero") == 0 || strcmp(argv[2], "none") == 0))
		return broken(lib, strcmp(argv[2], "zero") == 0);
	if (argc != 3 && !(argc == 5 && strcmp(argv[3], "copy") == 0)) {
		fprintf(stderr,
			"usage: dlopen-loop LIB HOLD_US [copy DIR] | LIB zero|none\n");
		return 2;
	}
	hold_us = (unsigned)strtoul(argv[2], NULL, 10);
	copies = argc == 5;
	if (copies) {
		snprintf(path, sizeof(path), "%s/libdlopen-loop.so", argv[4]);
		lib = path;
	}
	if (pipe(park_fd) != 0)
		die("pipe failed");
	for (w = 0; w < N_WORKERS; w++)
		if (pthread_create(&th[w], NULL, park_main, NULL))
			die("pthread_create failed");
	memset(r->trace_id, 0x5a, sizeof(r->trace_id));
	memset(r->span_id, 0xa5, sizeof(r->span_id));
	r->trace_flags = 1;
	r->attrs_data_size = 0;
	r->valid = TREC_VALID;
	while (!atomic_load(&stop)) {
		void (*set)(void *);
		void *h;

		if (copies && rounds == 0)
			copy(argv[1], path);
		h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
		if (!h)
			die(dlerror());
		*(void **)&set = dlsym(h, "writer_tls_set");
		if (!set)
			die(dlerror());
		set(rec);
		hold(hold_us);
		/* the next copy while this one is loaded: the library is
		 * unloaded only as long as its dlclose() and dlopen() take */
		if (copies)
			copy(argv[1], path);
		if (dlclose(h) != 0)
			die(dlerror());
		if (rounds++ == 0) {
			if (!copies && dlopen(lib, RTLD_NOW | RTLD_NOLOAD))
				die("the library was not unloaded by dlclose()");
			if (pthread_create(&th[N_WORKERS], NULL, stdin_main, NULL))
				die("pthread_create failed");
			printf("READY %d\n", (int)getpid());
			fflush(stdout);
		}
	}
	if (copies)
		unlink(path);
	close(park_fd[1]);
	for (w = 0; w <= N_WORKERS; w++)
		pthread_join(th[w], NULL);
	printf("ROUNDS %lu\n", rounds);
	return 0;
}
