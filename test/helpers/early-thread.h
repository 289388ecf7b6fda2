/* SPDX-License-Identifier: Apache-2.0 */
/* The "early" thread of the flow helpers (ctxflow.c, pool-glib.c): started
 * from .preinit_array, before any constructor (the shim's included), so it
 * is a thread the shim never saw created and that has no context.  It
 * runs jobs: on_early(fn, arg) runs fn(arg) there and waits for it. */
#ifndef CTXSHIM_TEST_EARLY_THREAD_H
#define CTXSHIM_TEST_EARLY_THREAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

static pthread_t early;
static pthread_mutex_t early_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t early_cond = PTHREAD_COND_INITIALIZER;
static void (*early_job)(void *);
static void *early_arg;
static bool early_done;

static void *
early_main(void *unused)
{
	(void)unused;
	pthread_mutex_lock(&early_lock);
	for (;;) {
		while (!early_job)
			pthread_cond_wait(&early_cond, &early_lock);
		pthread_mutex_unlock(&early_lock);
		early_job(early_arg);
		pthread_mutex_lock(&early_lock);
		early_job = NULL;
		early_done = true;
		pthread_cond_broadcast(&early_cond);
	}
	return NULL;
}

/* Run fn(arg) on the early thread and wait for it. */
static void
on_early(void (*fn)(void *), void *arg)
{
	pthread_mutex_lock(&early_lock);
	early_arg = arg;
	early_done = false;
	early_job = fn;
	pthread_cond_broadcast(&early_cond);
	while (!early_done)
		pthread_cond_wait(&early_cond, &early_lock);
	pthread_mutex_unlock(&early_lock);
}

static void
start_early(int argc, char **argv, char **envp)
{
	(void)argc;
	(void)argv;
	(void)envp;
	if (pthread_create(&early, NULL, early_main, NULL) != 0)
		abort();
}

__attribute__((section(".preinit_array"), used)) static void (*const early_init)(
	int, char **, char **) = start_early;

#endif
