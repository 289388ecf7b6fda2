/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "flowctor.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>

static pthread_t thread;
static sem_t go;
static void (*job)(void *);
static void *job_arg;

static void *
flowctor_main(void *unused)
{
	(void)unused;
	while (sem_wait(&go) < 0)
		;
	job(job_arg);
	return NULL;
}

__attribute__((constructor)) static void
flowctor_init(void)
{
	if (sem_init(&go, 0, 0) != 0 ||
	    pthread_create(&thread, NULL, flowctor_main, NULL))
		abort();
}

void
flowctor_post(void (*fn)(void *), void *arg)
{
	job = fn;
	job_arg = arg;
	sem_post(&go);
}

void
flowctor_join(void)
{
	pthread_join(thread, NULL);
}
