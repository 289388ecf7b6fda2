/* SPDX-License-Identifier: Apache-2.0 */
/* libuv's thread pool in a program with no tracing code.  Started with
 * TRACEPARENT, the main thread has a context; a second loop runs on a
 * thread started by the "early" thread (created from .preinit_array before
 * any constructor), which has none.  Both loops submit work to libuv's
 * one, shared pool.
 *
 *   pool-uv ctx N   N requests from each loop; the first two of each (four)
 *                   are in flight at once on the four pool threads; WORK
 *                   lines from the pool threads, AFTER lines from the loop
 *                   threads, LOOP lines once each loop is done
 *   pool-uv fsfirst the pool started by a file-system request
 *                   (uv_fs_stat) from the main thread, then a thread
 *                   of the application's own started with
 *                   uv_thread_create(): a THREAD line with what it sees
 *   pool-uv cross   a request submitted to main's loop by a thread started
 *                   by the early thread (no context), before main runs
 *                   the loop: AFTER on main with the request's context,
 *                   then LOOP main with main's own back
 *   pool-uv api     what the application gets back (uv_cancel of a queued
 *                   request, a NULL after_work_cb, resubmitting a request
 *                   from its after_work_cb, EINVAL): no contexts, the same
 *                   output with and without the shim
 */
#include "config.h"

#include "ctxobs.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <uv.h>

#define CTX_TEXT 80

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static void __attribute__((format(printf, 1, 2))) out(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&out_lock);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
	pthread_mutex_unlock(&out_lock);
}

static int
tid(void)
{
	return (int)syscall(SYS_gettid);
}

/* ---- the early thread: starts one thread and is done ---- */

static pthread_t early, early_child;
static sem_t early_go;
static void *(*early_fn)(void *);
static void *early_arg;

static void *
early_main(void *unused)
{
	(void)unused;
	while (sem_wait(&early_go) < 0)
		;
	if (pthread_create(&early_child, NULL, early_fn, early_arg) != 0)
		abort();
	return NULL;
}

/* Start fn(arg) on a thread created by the early thread; join with
 * join_early(). */
static void
start_from_early(void *(*fn)(void *), void *arg)
{
	early_fn = fn;
	early_arg = arg;
	sem_post(&early_go);
	pthread_join(early, NULL);
}

static void
join_early(void)
{
	pthread_join(early_child, NULL);
}

static void
start_early(int argc, char **argv, char **envp)
{
	(void)argc;
	(void)argv;
	(void)envp;
	if (sem_init(&early_go, 0, 0) != 0 ||
	    pthread_create(&early, NULL, early_main, NULL) != 0)
		abort();
}

__attribute__((section(".preinit_array"), used)) static void (*const early_init)(
	int, char **, char **) = start_early;

/* ---- ctx ---- */

struct request {
	uv_work_t req;
	char name[32];
	bool barrier;
};

static pthread_barrier_t in_flight;

static void
work(uv_work_t *req)
{
	struct request *r = req->data;
	char c[CTX_TEXT];

	if (r->barrier)
		pthread_barrier_wait(&in_flight);
	ctxobs_format(c, sizeof(c));
	out("WORK %s tid=%d %s\n", r->name, tid(), c);
}

static void
after(uv_work_t *req, int status)
{
	struct request *r = req->data;
	char c[CTX_TEXT];

	ctxobs_format(c, sizeof(c));
	out("AFTER %s status=%d tid=%d %s\n", r->name, status, tid(), c);
	free(r);
}

struct loop_job {
	const char *who;
	int n;
};

static void *
run_loop(void *arg)
{
	struct loop_job *j = arg;
	uv_loop_t loop;
	char c[CTX_TEXT];
	int i;

	ctxobs_format(c, sizeof(c));
	out("LOOPSTART %s tid=%d %s\n", j->who, tid(), c);
	uv_loop_init(&loop);
	for (i = 0; i < j->n; i++) {
		struct request *r = calloc(1, sizeof(*r));

		if (!r)
			abort();
		snprintf(r->name, sizeof(r->name), "%s-%d", j->who, i);
		r->barrier = i < 2;
		r->req.data = r;
		if (uv_queue_work(&loop, &r->req, work, after) != 0)
			abort();
	}
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
	ctxobs_format(c, sizeof(c));
	out("LOOP %s tid=%d %s\n", j->who, tid(), c);
	return NULL;
}

static int
cmd_ctx(int n)
{
	struct loop_job m = {"main", n}, e = {"early", n};
	char c[CTX_TEXT];

	/* Four pool threads, for the four requests that wait for each
	 * other. */
	setenv("UV_THREADPOOL_SIZE", "4", 1);
	pthread_barrier_init(&in_flight, NULL, 4);
	ctxobs_format(c, sizeof(c));
	out("MAIN tid=%d %s\n", tid(), c);
	start_from_early(run_loop, &e);
	run_loop(&m);
	join_early();
	return 0;
}

/* ---- fsfirst ---- */

static void
fs_done(uv_fs_t *req)
{
	uv_fs_req_cleanup(req);
}

static void
app_thread(void *arg)
{
	char c[CTX_TEXT];

	(void)arg;
	ctxobs_format(c, sizeof(c));
	out("THREAD tid=%d %s\n", tid(), c);
}

static int
cmd_fsfirst(void)
{
	uv_loop_t loop;
	uv_fs_t req;
	uv_thread_t t;
	char c[CTX_TEXT];

	ctxobs_format(c, sizeof(c));
	out("MAIN tid=%d %s\n", tid(), c);
	if (uv_loop_init(&loop) != 0 || uv_fs_stat(&loop, &req, "/", fs_done) != 0)
		abort();
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
	if (uv_thread_create(&t, app_thread, NULL) != 0 || uv_thread_join(&t) != 0)
		abort();
	return 0;
}

/* ---- cross ---- */

static uv_loop_t cross_loop;

static void *
cross_submit(void *unused)
{
	struct request *r = calloc(1, sizeof(*r));

	(void)unused;
	if (!r)
		abort();
	snprintf(r->name, sizeof(r->name), "early-on-main");
	r->req.data = r;
	if (uv_queue_work(&cross_loop, &r->req, work, after) != 0)
		abort();
	return NULL;
}

/* The loop is not running while the other thread submits, and main
 * joins it before running the loop. */
static int
cmd_cross(void)
{
	char c[CTX_TEXT];

	ctxobs_format(c, sizeof(c));
	out("MAIN tid=%d %s\n", tid(), c);
	if (uv_loop_init(&cross_loop) != 0)
		abort();
	start_from_early(cross_submit, NULL);
	join_early();
	uv_run(&cross_loop, UV_RUN_DEFAULT);
	uv_loop_close(&cross_loop);
	ctxobs_format(c, sizeof(c));
	out("LOOP main tid=%d %s\n", tid(), c);
	return 0;
}

/* ---- api ---- */

static sem_t block;
static int ran;

static void
blocking_work(uv_work_t *req)
{
	(void)req;
	while (sem_wait(&block) < 0)
		;
	__atomic_add_fetch(&ran, 1, __ATOMIC_SEQ_CST);
}

static void
count_work(uv_work_t *req)
{
	(void)req;
	__atomic_add_fetch(&ran, 1, __ATOMIC_SEQ_CST);
}

static void
report_after(uv_work_t *req, int status)
{
	printf("after %s status=%s\n", (const char *)req->data,
	       status ? uv_err_name(status) : "0");
}

static int resubmits;

static void
resubmit_after(uv_work_t *req, int status)
{
	printf("resubmit after status=%d round=%d\n", status, resubmits);
	if (++resubmits < 3 &&
	    uv_queue_work(req->loop, req, count_work, resubmit_after) != 0)
		printf("resubmit failed\n");
}

static int
cmd_api(void)
{
	uv_loop_t *loop = uv_default_loop();
	uv_work_t a = {.data = "a"}, b = {.data = "b"}, c = {.data = "c"},
		  d = {.data = "d"};

	setenv("UV_THREADPOOL_SIZE", "1", 1);
	sem_init(&block, 0, 0);
	/* a holds the only pool thread, so b is still queued when cancelled. */
	printf("queue a %d\n", uv_queue_work(loop, &a, blocking_work, report_after));
	printf("queue b %d\n", uv_queue_work(loop, &b, count_work, report_after));
	printf("cancel b %d\n", uv_cancel((uv_req_t *)&b));
	printf("queue c (no after_work_cb) %d\n",
	       uv_queue_work(loop, &c, count_work, NULL));
	printf("queue d (no work_cb) %s\n",
	       uv_err_name(uv_queue_work(loop, &d, NULL, report_after)));
	sem_post(&block);
	uv_run(loop, UV_RUN_DEFAULT);
	printf("ran %d\n", ran);

	ran = 0;
	printf("queue a again %d\n",
	       uv_queue_work(loop, &a, count_work, resubmit_after));
	uv_run(loop, UV_RUN_DEFAULT);
	printf("ran %d data %s\n", ran, (const char *)a.data);
	printf("close %d\n", uv_loop_close(loop));
	return 0;
}

int
main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : "";

	if (strcmp(cmd, "ctx") == 0 && argc > 2)
		return cmd_ctx(atoi(argv[2]));
	if (strcmp(cmd, "api") == 0)
		return cmd_api();
	if (strcmp(cmd, "fsfirst") == 0)
		return cmd_fsfirst();
	if (strcmp(cmd, "cross") == 0)
		return cmd_cross();
	fprintf(stderr, "usage: pool-uv ctx N|fsfirst|cross|api\n");
	return 2;
}
