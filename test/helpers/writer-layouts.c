/* SPDX-License-Identifier: Apache-2.0 */
/* writer-layouts: threads that publish known contexts in the three
 * thread-context layouts ctxdump reads (otep-formats.md §1, §7, §8):
 * OTEP-4947 otel_thread_ctx_v1 (libwtls-tlsdesc.so), Elastic's
 * elastic_apm_profiling_correlation_tls_v1 (libwelastic.so, with its
 * process storage) and Polar Signals' custom_labels_current_set
 * (libcustomlabels-test.so; built as writer-layouts-le, the executable
 * defines it local-exec and publishes no OTEP record at all).
 *
 * Output, one line per thread and then READY:
 *   THREAD <tid> <name> otel=<trace>-<span>|- \
 *          elastic=<valid>-<present>-<trace>-<span>-<txn>-<flags>|- \
 *          labels=<count>[-<trace>-<span>]|-
 *   READY <pid> <nthreads>
 * Threads then block in read(2) on a pipe until stdin is closed.
 *
 * With an option, other threads instead of the usual ones:
 *   --unreadable  "all" as above; "el-unreadable" and "cl-unreadable",
 *                 whose Elastic and custom-labels pointers lead into a
 *                 PROT_NONE page: elastic=unreadable-<hex address> and
 *                 labels=unreadable-<hex address>
 *   --bad-keys    "labels" as above; "cl-bad-keys", whose set has
 *                 "user"="alice" and then two labels with values "v1"
 *                 and "v2" whose key pointers lead into that page:
 *                 labels=bad-keys-<count> */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "thread-record.h"

#ifndef WL_NO_OTEP
void writer_tls_set(void *rec);
#endif
void welastic_set(void *buf);
void welastic_set_storage(void *st);
void wcl_set(void *set);

enum { L_OTEL = 1, L_ELASTIC = 2, L_CL = 4 };
enum { CL_NORMAL, CL_EMPTY, CL_BIG, CL_BAD_KEYS };

struct spec {
	const char *name;
	unsigned layouts;
	uint8_t el_valid, el_present;
	int cl_kind;
	/* the thread's Elastic and custom-labels pointers lead into
	 * unreadable memory: a context freed or unmapped under them */
	bool unreadable;
};

static const struct spec specs[] = {
	{"otel", L_OTEL, 0, 0, 0, false},
	{"elastic", L_ELASTIC, 1, 1, 0, false},
	{"labels", L_CL, 0, 0, CL_NORMAL, false},
	{"all", L_OTEL | L_ELASTIC | L_CL, 1, 1, CL_NORMAL, false},
	{"el-updating", L_ELASTIC, 0, 1, 0, false},
	{"el-notrace", L_ELASTIC, 1, 0, 0, false},
	{"cl-empty", L_CL, 0, 0, CL_EMPTY, false},
	{"cl-big", L_CL, 0, 0, CL_BIG, false},
	{"none", 0, 0, 0, 0, false},
};
#define N_THREADS (sizeof(specs) / sizeof(specs[0]))

/* --unreadable: a readable thread next to the unreadable ones */
static const struct spec specs_unreadable[] = {
	{"all", L_OTEL | L_ELASTIC | L_CL, 1, 1, CL_NORMAL, false},
	{"el-unreadable", L_ELASTIC, 1, 1, 0, true},
	{"cl-unreadable", L_CL, 0, 0, CL_NORMAL, true},
};

/* --bad-keys */
static const struct spec specs_bad_keys[] = {
	{"labels", L_CL, 0, 0, CL_NORMAL, false},
	{"cl-bad-keys", L_CL, 0, 0, CL_BAD_KEYS, false},
};

/* PROT_NONE: what the unreadable pointers point into */
static uint8_t *guard;
#define GUARD_ELASTIC 0
#define GUARD_CL_SET  64
#define GUARD_CL_KEY  512

struct cl_string {
	size_t len;
	const unsigned char *buf;
};
struct cl_label {
	struct cl_string key, value;
};
struct cl_set {
	struct cl_label *storage;
	size_t count, capacity;
};

#define BIG_LABELS 40

struct worker {
	const struct spec *sp;
	unsigned idx;
	pid_t tid;
	uint64_t otel[TREC_MAX_SIZE / 8];
	uint8_t elastic[37];
	struct cl_set set;
	struct cl_label labels[BIG_LABELS];
	char strs[BIG_LABELS][40];
	char trace_hex[33], span_hex[17];
	char big[300];
	uint8_t trace[3][16], span[3][8], txn[8];
};

static struct worker workers[N_THREADS];
static pthread_barrier_t published;
static int park_fd[2];

static void
hex(char *out, const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", p[i]);
}

static void
ids(struct worker *w)
{
	unsigned l, b;

	for (l = 0; l < 3; l++) {
		for (b = 0; b < 16; b++)
			w->trace[l][b] = (uint8_t)(0x40 * l + 0x10 + w->idx * 3 + b);
		for (b = 0; b < 8; b++)
			w->span[l][b] = (uint8_t)(0xc0 + 0x10 * l + w->idx + b);
	}
	for (b = 0; b < 8; b++)
		w->txn[b] = (uint8_t)(0xe0 + w->idx + b);
}

static void
cl_str(struct cl_string *s, const char *text)
{
	s->len = text ? strlen(text) : 3;
	s->buf = (const unsigned char *)text;
}

static void
build_labels(struct worker *w)
{
	struct cl_label *lb = w->labels;
	unsigned i;

	memset(&w->set, 0, sizeof(w->set));
	w->set.storage = lb;
	w->set.capacity = BIG_LABELS;
	switch (w->sp->cl_kind) {
	case CL_NORMAL:
		hex(w->trace_hex, w->trace[2], 16);
		hex(w->span_hex, w->span[2], 8);
		cl_str(&lb[0].key, "http.method");
		cl_str(&lb[0].value, "GET");
		cl_str(&lb[1].key, NULL); /* key.buf NULL: ignored */
		cl_str(&lb[1].value, "ignored");
		cl_str(&lb[2].key, "trace_id");
		cl_str(&lb[2].value, w->trace_hex);
		cl_str(&lb[3].key, "span_id");
		cl_str(&lb[3].value, w->span_hex);
		cl_str(&lb[4].key, "http.method"); /* first occurrence wins */
		cl_str(&lb[4].value, "POST");
		cl_str(&lb[5].key, "url.path");
		cl_str(&lb[5].value, "/labels/\"q\"");
		w->set.count = 6;
		break;
	case CL_EMPTY:
		w->set.count = 0;
		break;
	case CL_BAD_KEYS:
		cl_str(&lb[0].key, "user");
		cl_str(&lb[0].value, "alice");
		/* keys ctxdump cannot read: both labels are to be skipped as
		 * NULL keys are, not shown with an empty key (the second one
		 * then hidden as a repeat of the first) */
		lb[1].key.len = 6;
		lb[1].key.buf = guard + GUARD_CL_KEY;
		cl_str(&lb[1].value, "v1");
		lb[2].key.len = 6;
		lb[2].key.buf = guard + GUARD_CL_KEY;
		cl_str(&lb[2].value, "v2");
		w->set.count = 3;
		break;
	case CL_BIG:
		for (i = 0; i < BIG_LABELS; i++) {
			snprintf(w->strs[i], sizeof(w->strs[i]), "k%02u", i);
			cl_str(&lb[i].key, w->strs[i]);
			cl_str(&lb[i].value, w->strs[i]);
		}
		memset(w->big, 'x', sizeof(w->big));
		lb[0].value.len = sizeof(w->big);
		lb[0].value.buf = (const unsigned char *)w->big;
		w->set.count = BIG_LABELS;
		break;
	}
}

static void
build(struct worker *w)
{
	ids(w);
	if (w->sp->layouts & L_OTEL) {
		struct otel_thread_ctx_record *r = (void *)w->otel;
		struct trec_attr_writer aw;

		memcpy(r->trace_id, w->trace[0], 16);
		memcpy(r->span_id, w->span[0], 8);
		r->trace_flags = 1;
		trec_attrs_init(&aw, r->attrs_data, TREC_ATTRS_MAX);
		trec_attrs_add(&aw, 0, "GET", 3);
		trec_attrs_add(&aw, 1, "/otel", 5);
		r->attrs_data_size = (uint16_t)aw.len;
		r->valid = TREC_VALID;
	}
	if (w->sp->layouts & L_ELASTIC) {
		uint8_t *b = w->elastic;

		b[0] = 1; /* layout-minor-version, little endian */
		b[1] = 0;
		b[2] = w->sp->el_valid;
		b[3] = w->sp->el_present;
		b[4] = 1;
		memcpy(b + 5, w->trace[1], 16);
		memcpy(b + 21, w->span[1], 8);
		memcpy(b + 29, w->txn, 8);
	}
	if (w->sp->layouts & L_CL)
		build_labels(w);
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	char c;
	ssize_t r;

	w->tid = (pid_t)syscall(SYS_gettid);
	build(w);
#ifndef WL_NO_OTEP
	if (w->sp->layouts & L_OTEL)
		writer_tls_set(w->otel);
#endif
	if (w->sp->layouts & L_ELASTIC)
		welastic_set(w->sp->unreadable ? guard + GUARD_ELASTIC : w->elastic);
	if (w->sp->layouts & L_CL)
		wcl_set(w->sp->unreadable ? guard + GUARD_CL_SET : (void *)&w->set);
	pthread_barrier_wait(&published);
	do
		r = read(park_fd[0], &c, 1);
	while (r > 0 || (r < 0 && errno == EINTR));
	return NULL;
}

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
		return false;
	if (!fgets(buf, sizeof(buf), f) || sscanf(buf, "%ld %lx", &nr, &fd) != 2)
		nr = -1;
	fclose(f);
	return nr == SYS_read && fd == (unsigned long)park_fd[0];
}

static void
print_worker(const struct worker *w)
{
	char t[33], s[17], x[17];
	bool otel = w->sp->layouts & L_OTEL;

#ifdef WL_NO_OTEP
	otel = false;
#endif
	printf("THREAD %d %s otel=", (int)w->tid, w->sp->name);
	if (otel) {
		hex(t, w->trace[0], 16);
		hex(s, w->span[0], 8);
		printf("%s-%s", t, s);
	} else {
		putchar('-');
	}
	fputs(" elastic=", stdout);
	if ((w->sp->layouts & L_ELASTIC) && w->sp->unreadable) {
		printf("unreadable-%" PRIxPTR, (uintptr_t)(guard + GUARD_ELASTIC));
	} else if (w->sp->layouts & L_ELASTIC) {
		hex(t, w->trace[1], 16);
		hex(s, w->span[1], 8);
		hex(x, w->txn, 8);
		printf("%u-%u-%s-%s-%s-01", w->sp->el_valid, w->sp->el_present, t, s,
		       x);
	} else {
		putchar('-');
	}
	fputs(" labels=", stdout);
	if ((w->sp->layouts & L_CL) && w->sp->unreadable)
		printf("unreadable-%" PRIxPTR, (uintptr_t)(guard + GUARD_CL_SET));
	else if ((w->sp->layouts & L_CL) && w->sp->cl_kind == CL_BAD_KEYS)
		printf("bad-keys-%zu", w->set.count);
	else if (w->sp->layouts & L_CL)
		printf("%zu", w->set.count);
	else
		putchar('-');
	/* the trace context in the "trace_id"/"span_id" labels */
	if ((w->sp->layouts & L_CL) && w->sp->cl_kind == CL_NORMAL &&
	    !w->sp->unreadable)
		printf("-%s-%s", w->trace_hex, w->span_hex);
	putchar('\n');
}

/* Elastic process storage: minor version, service name, environment,
 * socket path (u32 length + bytes each, packed). */
static uint8_t storage[128];

static void
put_str(size_t *off, const char *s)
{
	uint32_t l = (uint32_t)strlen(s);

	memcpy(storage + *off, &l, 4);
	memcpy(storage + *off + 4, s, l);
	*off += 4 + l;
}

int
main(int argc, char **argv)
{
	const struct spec *sp = specs;
	unsigned n = N_THREADS, i;
	pthread_t th[N_THREADS];
	size_t off = 2;
	char buf[64];

	if (argc > 1 && strcmp(argv[1], "--unreadable") == 0) {
		sp = specs_unreadable;
		n = sizeof(specs_unreadable) / sizeof(specs_unreadable[0]);
	} else if (argc > 1 && strcmp(argv[1], "--bad-keys") == 0) {
		sp = specs_bad_keys;
		n = sizeof(specs_bad_keys) / sizeof(specs_bad_keys[0]);
	} else if (argc > 1) {
		fprintf(stderr, "writer-layouts: unknown option %s\n", argv[1]);
		return 2;
	}
	guard = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (guard == MAP_FAILED)
		return 1;
	storage[0] = 1;
	put_str(&off, "elastic-svc");
	put_str(&off, "testing");
	put_str(&off, "/tmp/none.sock");
	welastic_set_storage(storage);
	if (pipe(park_fd) < 0)
		return 1;
	pthread_barrier_init(&published, NULL, n + 1);
	for (i = 0; i < n; i++) {
		workers[i].sp = &sp[i];
		workers[i].idx = i;
		if (pthread_create(&th[i], NULL, worker_main, &workers[i]) != 0)
			return 1;
	}
	pthread_barrier_wait(&published);
	for (i = 0; i < n; i++)
		while (!parked(workers[i].tid))
			sched_yield();
	for (i = 0; i < n; i++)
		print_worker(&workers[i]);
	printf("READY %d %u\n", (int)getpid(), n + 1);
	fflush(stdout);
	while (read(0, buf, sizeof(buf)) > 0)
		;
	close(park_fd[1]);
	for (i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	return 0;
}
