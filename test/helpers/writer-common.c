/* SPDX-License-Identifier: Apache-2.0 */
/* The part every test writer shares: worker threads that each publish one
 * known OTEP-4947 record through the program's TLS access model, a
 * readiness handshake on stdout, and an exit when stdin is closed.
 *
 * Output, one line per thread and then READY:
 *   THREAD <tid> <kind> <ptr> <valid> <trace_id> <span_id> <flags> <attrs>
 *   READY <pid> <model> <nthreads>
 * ptr is the value the thread reads back from otel_thread_ctx_v1 (0x0 for
 * NULL); the other fields are "-" without a record, attrs is the hex of
 * attrs_data ("" shown as "-").  The main thread ("untouched") never
 * accesses the variable.  Workers then block in writer_park_thread(), a
 * known frame for ctxdump --stacks; the "noattrs" worker does so inside a
 * SIGUSR1 handler, writer_signal_park(), so that unwinders have to step
 * through a signal frame to reach worker_main().  READY is printed only
 * when every worker is blocked there (its /proc/self/task/TID/syscall shows
 * the read on the park pipe).  Nothing here ever sleeps. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "thread-record.h"
#include "writer.h"

enum writer_kind {
	KIND_FULL,    /* 640-byte record: attrs exactly TREC_ATTRS_MAX */
	KIND_SMALL,   /* a few attributes, one key repeated */
	KIND_NOATTRS, /* valid record, attrs_data_size 0 */
	KIND_INVALID, /* valid = 0 */
	KIND_VALID2,  /* valid = 2 (reserved: must be ignored) */
	KIND_NULL,    /* pointer explicitly set to NULL */
	N_WORKERS,
};

static const char *const kind_names[N_WORKERS] = {
	"full", "small", "noattrs", "invalid", "valid2", "null",
};

struct worker {
	enum writer_kind kind;
	pid_t tid;
	void *readback;
	/* 8-aligned storage for one record of up to TREC_MAX_SIZE bytes */
	uint64_t rec[TREC_MAX_SIZE / 8];
};

static struct writer_tls_ops *tls_ops;
static struct worker workers[N_WORKERS];
static pthread_barrier_t started, go, published;
static int park_fd[2] = {-1, -1};
static uint8_t salt;

static void
park_done(int *parked)
{
	*parked = 0;
	__asm__ volatile("" ::: "memory");
}

/* Blocks until the main thread closes the pipe.  Global and never inlined
 * or tail-called so that it shows in every worker's stack by name.  The
 * cleanup variable gives it (built with -fexceptions) a personality
 * routine and an LSDA, which an unwinder must get past to reach the
 * caller. */
__attribute__((noinline, noclone)) void writer_park_thread(void);

void
writer_park_thread(void)
{
	int parked __attribute__((cleanup(park_done))) = 1;
	char c;
	ssize_t r;

	do
		r = read(park_fd[0], &c, 1);
	while (r > 0 || (r < 0 && errno == EINTR));
	__asm__ volatile("" ::: "memory");
}

/* SIGUSR1 handler of the "noattrs" worker. */
__attribute__((noinline, noclone)) void writer_signal_park(int sig);

void
writer_signal_park(int sig)
{
	writer_park_thread();
	__asm__ volatile("" ::: "memory");
}

static void
die(const char *what)
{
	fprintf(stderr, "writer: %s\n", what);
	exit(1);
}

static void
add_attr(struct trec_attr_writer *w, uint8_t key, const char *val, size_t len)
{
	if (trec_attrs_add(w, key, val, len) != 0)
		die("attribute did not fit");
}

static void
build_record(struct worker *wk, unsigned idx)
{
	struct otel_thread_ctx_record *r = (struct otel_thread_ctx_record *)wk->rec;
	struct trec_attr_writer w;
	char v[TREC_VALUE_MAX + 1];
	size_t i;

	memset(wk->rec, 0, sizeof(wk->rec));
	for (i = 0; i < sizeof(r->trace_id); i++)
		r->trace_id[i] = (uint8_t)(salt + 0x10 * (idx + 1) + i);
	for (i = 0; i < sizeof(r->span_id); i++)
		r->span_id[i] = (uint8_t)(0xa0 + 0x08 * idx + i + salt);
	r->trace_flags = (uint8_t)(idx & 3);
	r->valid = TREC_VALID;
	trec_attrs_init(&w, r->attrs_data, TREC_ATTRS_MAX);
	switch (wk->kind) {
	case KIND_FULL:
		/* 2 + 255 + 2 + 255 + 2 + 96 = 612 bytes: the limit exactly */
		for (i = 0; i < TREC_VALUE_MAX; i++)
			v[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[i % 36];
		add_attr(&w, 0, v, TREC_VALUE_MAX);
		/* 127 x U+00E9 and "!": multi-byte UTF-8 up to the last byte */
		for (i = 0; i + 2 <= TREC_VALUE_MAX - 1; i += 2) {
			v[i] = (char)0xc3;
			v[i + 1] = (char)0xa9;
		}
		v[i] = '!';
		add_attr(&w, 1, v, TREC_VALUE_MAX);
		/* characters an output format has to escape */
		memset(v, '.', 96);
		memcpy(v, "quote\" backslash\\ tab\t slash/ <tag> & end", 41);
		add_attr(&w, 2, v, 96);
		if (w.len != TREC_ATTRS_MAX)
			die("full record is not 640 bytes");
		break;
	case KIND_SMALL:
		add_attr(&w, 0, "first", 5);
		add_attr(&w, 3, "/api/v1/items/42", 16);
		add_attr(&w, 0, "GET", 3); /* the last occurrence wins */
		add_attr(&w, 1, "", 0);
		break;
	case KIND_INVALID:
		add_attr(&w, 0, "ignored", 7);
		r->valid = 0;
		break;
	case KIND_VALID2:
		add_attr(&w, 0, "reserved", 8);
		r->valid = 2;
		break;
	case KIND_NOATTRS:
	case KIND_NULL:
	case N_WORKERS:
		break;
	}
	r->attrs_data_size = (uint16_t)w.len;
}

static void *
worker_main(void *arg)
{
	struct worker *wk = arg;

	wk->tid = (pid_t)syscall(SYS_gettid);
	pthread_barrier_wait(&started);
	pthread_barrier_wait(&go);
	if (wk->kind == KIND_NULL) {
		tls_ops->set(NULL);
	} else {
		build_record(wk, (unsigned)(wk - workers));
		tls_ops->set(wk->rec);
	}
	wk->readback = tls_ops->get();
	pthread_barrier_wait(&published);
	if (wk->kind == KIND_NOATTRS)
		pthread_kill(pthread_self(), SIGUSR1);
	else
		writer_park_thread();
	return NULL;
}

/* Whether thread tid is blocked in read(2) on the park pipe, according to
 * /proc/self/task/TID/syscall ("NR arg1 ..." while in a system call). */
static bool
parked(pid_t tid)
{
	char path[64], buf[128];
	long nr = -1;
	unsigned long fd = ~0ul;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	f = fopen(path, "re");
	if (!f)
		die("cannot read /proc/self/task/TID/syscall");
	if (!fgets(buf, sizeof(buf), f) || sscanf(buf, "%ld %lx", &nr, &fd) != 2)
		nr = -1;
	fclose(f);
	return nr == SYS_read && fd == (unsigned long)park_fd[0];
}

static void
print_hex(const uint8_t *p, size_t n)
{
	size_t i;

	if (n == 0)
		fputs("-", stdout);
	for (i = 0; i < n; i++)
		printf("%02x", p[i]);
}

static void
print_worker(const struct worker *wk)
{
	const struct otel_thread_ctx_record *r = (const void *)wk->rec;

	printf("THREAD %d %s 0x%" PRIxPTR, (int)wk->tid, kind_names[wk->kind],
	       (uintptr_t)wk->readback);
	if (wk->kind == KIND_NULL) {
		printf(" - - - - -\n");
		return;
	}
	printf(" %u ", r->valid);
	print_hex(r->trace_id, sizeof(r->trace_id));
	putchar(' ');
	print_hex(r->span_id, sizeof(r->span_id));
	printf(" %02x ", r->trace_flags);
	print_hex(r->attrs_data, r->attrs_data_size);
	putchar('\n');
}

int
writer_main(int argc, char **argv, struct writer_tls_ops *ops)
{
	pthread_t th[N_WORKERS];
	struct sigaction sa;
	char buf[256];
	unsigned i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = writer_signal_park;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) < 0)
		die("sigaction failed");
	tls_ops = ops;
	salt = (uint8_t)getpid();
	if (pipe(park_fd) < 0)
		die("pipe failed");
	pthread_barrier_init(&started, NULL, N_WORKERS + 1);
	pthread_barrier_init(&go, NULL, N_WORKERS + 1);
	pthread_barrier_init(&published, NULL, N_WORKERS + 1);
	for (i = 0; i < N_WORKERS; i++) {
		workers[i].kind = (enum writer_kind)i;
		if (pthread_create(&th[i], NULL, worker_main, &workers[i]) != 0)
			die("pthread_create failed");
	}
	pthread_barrier_wait(&started);
	if (ops->load && ops->load(ops, argc, argv) < 0)
		exit(1);
	pthread_barrier_wait(&go);
	pthread_barrier_wait(&published);
	/* READY must mean that every stack is final: wait until each worker
	 * sits in read(2) on the park pipe (a state, not a timeout). */
	for (i = 0; i < N_WORKERS; i++)
		while (!parked(workers[i].tid))
			sched_yield();

	printf("THREAD %d untouched 0x0 - - - - -\n", (int)getpid());
	for (i = 0; i < N_WORKERS; i++)
		print_worker(&workers[i]);
	printf("READY %d %s %d\n", (int)getpid(), ops->model, N_WORKERS + 1);
	fflush(stdout);

	while (read(0, buf, sizeof(buf)) > 0)
		;
	close(park_fd[1]);
	for (i = 0; i < N_WORKERS; i++)
		pthread_join(th[i], NULL);
	close(park_fd[0]);
	return 0;
}
