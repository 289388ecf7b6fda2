/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Threads of the ctxdump targets churn and exits, shared so that the
 * tests can expect the same of both: long-lived workers publishing known
 * records, and a thread nearly always blocked in vfork(). */

#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "record-writer.h"

struct target_worker {
	unsigned index;             /* its record is fill(index, "worker") */
	pthread_barrier_t *started; /* waited on once tid and record are set */
	pid_t tid;                  /* the thread's id */
	struct record record;
};

/* A worker thread (arg: its struct target_worker): publishes its record,
 * then sleeps until the process ends. */
static inline void *
target_worker_run(void *arg)
{
	struct target_worker *w = arg;

	w->tid = (pid_t)syscall(SYS_gettid);
	fill(&w->record, w->index, "worker");
	publish(&w->record);
	pthread_barrier_wait(w->started);
	for (;;)
		pause();
	return NULL;
}

struct target_vforker {
	struct timespec child_sleep; /* how long each child lives */
	struct timespec gap;         /* a sleep between children (or none) */
	pthread_barrier_t *started;  /* waited on once tid is set */
	atomic_bool *stopping;       /* once true, no new child */
	pid_t tid;                   /* the thread's id */
};

/* The vforker thread (arg: its struct target_vforker).  While its child
 * sleeps, the parent thread waits in the kernel and cannot enter
 * ptrace-stop, like a thread in D state, so ctxdump has to give up on it
 * at its deadline. */
static inline void *
target_vforker_run(void *arg)
{
	struct target_vforker *v = arg;

	v->tid = (pid_t)syscall(SYS_gettid);
	pthread_barrier_wait(v->started);
	while (!atomic_load(v->stopping)) {
		pid_t pid = vfork();

		if (pid == 0) {
			/* the parent thread waits uninterruptibly meanwhile */
			nanosleep(&v->child_sleep, NULL);
			_exit(0);
		}
		if (pid < 0)
			break;
		waitpid(pid, NULL, 0);
		if (v->gap.tv_sec || v->gap.tv_nsec)
			nanosleep(&v->gap, NULL);
	}
	return NULL;
}
