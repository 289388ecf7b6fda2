/* SPDX-License-Identifier: Apache-2.0 */
/* GLib thread pools in a program with no tracing code.  Started with
 * TRACEPARENT, the main thread has a context; the "early" thread, started
 * from .preinit_array before any constructor, has none.  Both push work.
 *
 *   pool-glib ctx N    N items from each of main and early, alternating,
 *                      through a one-thread pool (so one pool thread runs
 *                      both contexts in turn), then through a four-thread
 *                      pool whose first four items are all in flight at
 *                      once; every item prints what it sees (ITEM lines)
 *   pool-glib gtask    GIO's GTask pool (created and fed by libgio):
 *                      g_task_run_in_thread_sync() from main and early
 *   pool-glib api      what the application gets back from the pool API
 *                      (order with a sort function and move_to_front,
 *                      item_free_func at an immediate free, exclusive
 *                      pools, errors, a free GLib refuses): no contexts, the same output with
 *                      and without the shim
 *   pool-glib sortrace  four threads set the same pool's sort function
 *                      and push, over and over (freed memory poisoned):
 *                      "sortrace ok"
 *   pool-glib freerace  an item pushes into its own pool until GLib
 *                      refuses, while main frees the pool: "freerace ok"
 *   pool-glib freemany  many pools made, then freed newest first (each
 *                      free then looks up a pool made before the ones
 *                      just freed): "freemany ok"
 */
#include "config.h"

#include "ctxobs.h"
#include "early-thread.h"

#include <gio/gio.h>
#include <glib.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CTX_TEXT 80

static GMutex out_lock;

static void G_GNUC_PRINTF(1, 2) out(const char *fmt, ...)
{
	va_list ap;

	g_mutex_lock(&out_lock);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
	g_mutex_unlock(&out_lock);
}

static int
tid(void)
{
	return (int)syscall(SYS_gettid);
}

/* ---- ctx ---- */

struct item {
	char name[32];
	bool barrier;
};

static pthread_barrier_t in_flight;

static void
run_item(gpointer data, gpointer user_data)
{
	struct item *it = data;
	char c[CTX_TEXT];

	if (it->barrier)
		pthread_barrier_wait(&in_flight);
	ctxobs_format(c, sizeof(c));
	out("ITEM %s pool=%s tid=%d %s\n", it->name, (const char *)user_data, tid(), c);
	g_free(it);
}

struct push_job {
	GThreadPool *pool;
	const char *who;
	int i;
	bool barrier;
};

static void
push_one(void *arg)
{
	struct push_job *j = arg;
	struct item *it = g_new0(struct item, 1);
	GError *err = NULL;

	snprintf(it->name, sizeof(it->name), "%s-%d", j->who, j->i);
	it->barrier = j->barrier;
	if (!g_thread_pool_push(j->pool, it, &err)) {
		fprintf(stderr, "push: %s\n", err ? err->message : "?");
		exit(1);
	}
}

static void
push_pair(GThreadPool *pool, int i, bool barrier)
{
	struct push_job m = {pool, "main", i, barrier}, e = {pool, "early", i, barrier};

	push_one(&m);
	on_early(push_one, &e);
}

static int
cmd_ctx(int n)
{
	GThreadPool *one, *four;
	char c[CTX_TEXT];
	int i;

	ctxobs_format(c, sizeof(c));
	out("MAIN tid=%d %s\n", tid(), c);

	/* Frozen (max_threads 0) while both push, then one thread runs all
	 * the items in push order. */
	one = g_thread_pool_new(run_item, "one", 0, FALSE, NULL);
	for (i = 0; i < n; i++)
		push_pair(one, i, false);
	g_thread_pool_set_max_threads(one, 1, NULL);
	g_thread_pool_free(one, FALSE, TRUE);

	/* Items 0 and 1 of each (four) wait for each other: in flight at
	 * once, on four pool threads. */
	pthread_barrier_init(&in_flight, NULL, 4);
	four = g_thread_pool_new_full(run_item, "four", NULL, 4, TRUE, NULL);
	for (i = 0; i < n; i++)
		push_pair(four, i, i < 2);
	g_thread_pool_free(four, FALSE, TRUE);

	ctxobs_format(c, sizeof(c));
	out("DONE tid=%d %s\n", tid(), c);
	return 0;
}

/* ---- gtask ---- */

static void
task_fn(GTask *task, gpointer source, gpointer data, GCancellable *cancel)
{
	char c[CTX_TEXT];

	(void)source;
	(void)cancel;
	ctxobs_format(c, sizeof(c));
	out("TASK %s tid=%d %s\n", (const char *)data, tid(), c);
	g_task_return_boolean(task, TRUE);
}

static void
run_task(void *who)
{
	GTask *t = g_task_new(NULL, NULL, NULL, NULL);

	g_task_set_task_data(t, who, NULL);
	g_task_run_in_thread_sync(t, task_fn);
	if (!g_task_propagate_boolean(t, NULL))
		exit(1);
	g_object_unref(t);
}

static int
cmd_gtask(void)
{
	char c[CTX_TEXT];

	ctxobs_format(c, sizeof(c));
	out("MAIN tid=%d %s\n", tid(), c);
	run_task("main");
	on_early(run_task, "early");
	run_task("main-again");
	return 0;
}

/* ---- api ---- */

static GMutex order_lock;
static GString *order;

static void
record(gpointer data, gpointer user_data)
{
	(void)user_data;
	g_mutex_lock(&order_lock);
	g_string_append_printf(order, " %d", GPOINTER_TO_INT(data));
	g_mutex_unlock(&order_lock);
}

static gint
by_value(gconstpointer a, gconstpointer b, gpointer user_data)
{
	int x = GPOINTER_TO_INT(a), y = GPOINTER_TO_INT(b);

	(void)user_data;
	return x < y ? -1 : x > y;
}

static GString *freed;

static void
free_item(gpointer data)
{
	g_string_append_printf(freed, " %d", GPOINTER_TO_INT(data));
}

/* GLib's critical warnings, on stdout with the rest of the output. */
static void
log_to_stdout(const gchar *domain,
	      GLogLevelFlags level,
	      const gchar *msg,
	      gpointer user_data)
{
	(void)level;
	(void)user_data;
	printf("log %s: %s\n", domain ? domain : "-", msg);
}

static int
cmd_api(void)
{
	static const int values[] = {5, 3, 9, 2, 7};
	GThreadPool *p;
	GError *err = NULL;
	gboolean r;
	unsigned i;

	order = g_string_new("");
	freed = g_string_new("");

	/* Sorted, with one item moved to the front, run by one thread. */
	p = g_thread_pool_new(record, "u", 0, FALSE, NULL);
	g_thread_pool_set_sort_function(p, by_value, NULL);
	for (i = 0; i < G_N_ELEMENTS(values); i++)
		g_thread_pool_push(p, GINT_TO_POINTER(values[i]), NULL);
	printf("unprocessed %u\n", g_thread_pool_unprocessed(p));
	printf("move_to_front(7) %d\n",
	       g_thread_pool_move_to_front(p, GINT_TO_POINTER(7)));
	printf("move_to_front(42) %d\n",
	       g_thread_pool_move_to_front(p, GINT_TO_POINTER(42)));
	printf("func_is_user_data %d\n",
	       strcmp(((GThreadPool *)p)->user_data, "u") == 0);
	g_thread_pool_set_max_threads(p, 1, NULL);
	g_thread_pool_free(p, FALSE, TRUE);
	printf("order%s\n", order->str);

	/* Items still queued at an immediate free go to item_free_func. */
	p = g_thread_pool_new_full(record, NULL, free_item, 0, FALSE, NULL);
	for (i = 0; i < G_N_ELEMENTS(values); i++)
		g_thread_pool_push(p, GINT_TO_POINTER(values[i]), NULL);
	g_thread_pool_set_sort_function(p, by_value, NULL);
	g_thread_pool_set_sort_function(p, NULL, NULL);
	g_thread_pool_free(p, TRUE, TRUE);
	printf("freed%s\n", freed->str);

	/* An exclusive pool with its threads started at creation. */
	g_string_truncate(order, 0);
	p = g_thread_pool_new(record, NULL, 2, TRUE, &err);
	printf("exclusive %d threads %u\n", p != NULL && !err,
	       g_thread_pool_get_num_threads(p));
	for (i = 0; i < 3; i++)
		g_thread_pool_push(p, GINT_TO_POINTER(1), NULL);
	g_thread_pool_free(p, FALSE, TRUE);
	printf("exclusive ran%s\n", order->str);

	/* Not waiting: the pool finishes its items after free returns. */
	g_string_truncate(order, 0);
	p = g_thread_pool_new(record, NULL, 2, FALSE, NULL);
	for (i = 0; i < 3; i++)
		g_thread_pool_push(p, GINT_TO_POINTER(2), NULL);
	g_thread_pool_free(p, FALSE, FALSE);
	for (i = 0; i < 500; i++) {
		g_mutex_lock(&order_lock);
		r = order->len == 6;
		g_mutex_unlock(&order_lock);
		if (r)
			break;
		g_usleep(10000);
	}
	printf("nowait ran%s\n", order->str);

	/* NULL is no task: GLib refuses it, and the function never runs. */
	g_log_set_default_handler(log_to_stdout, NULL);
	g_string_truncate(order, 0);
	p = g_thread_pool_new(record, NULL, 1, FALSE, NULL);
	printf("push NULL %d\n", g_thread_pool_push(p, NULL, NULL));
	printf("move_to_front(NULL) %d\n", g_thread_pool_move_to_front(p, NULL));
	g_thread_pool_free(p, FALSE, TRUE);
	printf("null ran%s\n", order->str);

	/* A frozen pool with an item left cannot be freed without
	 * immediate: GLib refuses the free (a critical warning), and the
	 * pool goes on. */
	g_string_truncate(order, 0);
	p = g_thread_pool_new(record, NULL, 0, FALSE, NULL);
	g_thread_pool_push(p, GINT_TO_POINTER(3), NULL);
	g_thread_pool_free(p, FALSE, TRUE);
	g_thread_pool_push(p, GINT_TO_POINTER(4), NULL);
	g_thread_pool_set_max_threads(p, 1, NULL);
	g_thread_pool_free(p, FALSE, TRUE);
	printf("refused free ran%s\n", order->str);
	g_string_free(order, TRUE);
	g_string_free(freed, TRUE);
	return 0;
}

/* ---- sortrace ---- */

static GThreadPool *race_pool;

static void
race_item(gpointer data, gpointer user_data)
{
	(void)data;
	(void)user_data;
}

static gpointer
race_setter(gpointer unused)
{
	int i;

	(void)unused;
	for (i = 0; i < 10000; i++) {
		g_thread_pool_set_sort_function(race_pool, by_value, NULL);
		g_thread_pool_push(race_pool, GINT_TO_POINTER(i % 7 + 1), NULL);
		g_thread_pool_push(race_pool, GINT_TO_POINTER(i % 5 + 1), NULL);
	}
	return NULL;
}

/* Each push sorts with the comparator GLib holds: that must be the one
 * the last set_sort_function() installed, not one already freed. */
static int
cmd_sortrace(void)
{
	GThread *t[4];
	unsigned i;

	/* Freed memory is overwritten, so a stale comparator crashes. */
	mallopt(M_PERTURB, 0xa5);
	race_pool = g_thread_pool_new(race_item, NULL, 1, FALSE, NULL);
	for (i = 0; i < G_N_ELEMENTS(t); i++)
		t[i] = g_thread_new("setter", race_setter, NULL);
	for (i = 0; i < G_N_ELEMENTS(t); i++)
		g_thread_join(t[i]);
	g_thread_pool_free(race_pool, FALSE, TRUE);
	printf("sortrace ok\n");
	return 0;
}

/* ---- freerace ---- */

static GThreadPool *free_pool;
static GMutex free_lock;
static GCond free_cond;
static bool free_started;

static void
ignore_log(const gchar *domain, GLogLevelFlags level, const gchar *msg, gpointer u)
{
	(void)domain;
	(void)level;
	(void)msg;
	(void)u;
}

/* Item 1 pushes items 2 into its own pool until GLib refuses them (the
 * pool is being freed); the refused push is the application's mistake,
 * and GLib's critical warning is silenced.  A push accepted while the
 * free is under way runs; one refused never does.  At most
 * FREE_PUSH_MAX, yielding after each: under valgrind, which runs one
 * thread at a time, a loop that did not yield pushed items for minutes
 * (gigabytes of them) before main got to its free. */
#define FREE_PUSH_MAX 20000

static void
free_item_fn(gpointer data, gpointer user_data)
{
	int n;

	(void)user_data;
	if (GPOINTER_TO_INT(data) != 1)
		return;
	g_mutex_lock(&free_lock);
	free_started = true;
	g_cond_signal(&free_cond);
	g_mutex_unlock(&free_lock);
	for (n = 0; n < FREE_PUSH_MAX &&
		    g_thread_pool_push(free_pool, GINT_TO_POINTER(2), NULL);
	     n++)
		sched_yield();
}

static int
cmd_freerace(int rounds)
{
	int i;

	g_log_set_default_handler(ignore_log, NULL);
	for (i = 0; i < rounds; i++) {
		free_started = false;
		free_pool = g_thread_pool_new(free_item_fn, NULL, 2, FALSE, NULL);
		g_thread_pool_push(free_pool, GINT_TO_POINTER(1), NULL);
		g_mutex_lock(&free_lock);
		while (!free_started)
			g_cond_wait(&free_cond, &free_lock);
		g_mutex_unlock(&free_lock);
		g_thread_pool_free(free_pool, FALSE, TRUE);
	}
	printf("freerace ok\n");
	return 0;
}

/* ---- freemany ---- */

/* More pools than the shim has buckets for them: some share one, and
 * there the newer pool is freed before the older one is looked up. */
#define FREE_MANY 200

static void
many_item_fn(gpointer data, gpointer user_data)
{
	(void)data;
	(void)user_data;
}

static int
cmd_freemany(void)
{
	static GThreadPool *pools[FREE_MANY];
	int i;

	for (i = 0; i < FREE_MANY; i++)
		pools[i] = g_thread_pool_new(many_item_fn, NULL, 1, FALSE, NULL);
	for (i = FREE_MANY - 1; i >= 0; i--)
		g_thread_pool_free(pools[i], FALSE, TRUE);
	printf("freemany ok\n");
	return 0;
}

int
main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : "";

	if (strcmp(cmd, "ctx") == 0 && argc > 2)
		return cmd_ctx(atoi(argv[2]));
	if (strcmp(cmd, "gtask") == 0)
		return cmd_gtask();
	if (strcmp(cmd, "api") == 0)
		return cmd_api();
	if (strcmp(cmd, "sortrace") == 0)
		return cmd_sortrace();
	if (strcmp(cmd, "freerace") == 0 && argc > 2)
		return cmd_freerace(atoi(argv[2]));
	if (strcmp(cmd, "freemany") == 0)
		return cmd_freemany();
	fprintf(stderr,
		"usage: pool-glib ctx N|gtask|api|sortrace|freerace N|freemany\n");
	return 2;
}
