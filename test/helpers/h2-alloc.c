/* SPDX-License-Identifier: Apache-2.0 */
/* h2-alloc: the application's nghttp2_mem allocator must never run under
 * a lock of the shim's (hooks/hook-nghttp2.c, around
 * nghttp2_session_server_new3()).  No network, no tracing code.
 *
 *   h2-alloc abba   two threads: thread A makes a server session with
 *                   nghttp2_session_server_new3() and an allocator whose
 *                   malloc takes the application's pool lock L; thread B
 *                   holds L while it deletes another session
 *                   (nghttp2_session_del()).
 *   h2-alloc self   one thread: the allocator, when its pool is "full",
 *                   frees an idle session (nghttp2_session_del()) to make
 *                   room.
 *
 * Prints what each step returned, then "DONE"; a watchdog prints
 * "DEADLOCK" and exits 2 if nothing finished in 5 s. */
#include "config.h"

#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER; /* the app's L */
static sem_t b_locked, a_in_alloc;
static int alloc_calls;
static nghttp2_session *idle_session; /* a session B (or the evictor) deletes */
static const char *mode;

static void *
app_malloc(size_t n, void *ud)
{
	(void)ud;
	if (strcmp(mode, "abba") == 0) {
		if (alloc_calls++ == 0)
			sem_post(&a_in_alloc);
		pthread_mutex_lock(&pool_lock);
		void *p = malloc(n);
		pthread_mutex_unlock(&pool_lock);
		return p;
	}
	/* self: the pool is short: evict the idle connection first */
	if (idle_session) {
		nghttp2_session *s = idle_session;
		idle_session = NULL;
		nghttp2_session_del(s);
	}
	return malloc(n);
}
static void
app_free(void *p, void *ud)
{
	(void)ud;
	free(p);
}
static void *
app_calloc(size_t n, size_t sz, void *ud)
{
	(void)ud;
	void *p = app_malloc(n * sz, ud);
	if (p)
		memset(p, 0, n * sz);
	return p;
}
static void *
app_realloc(void *p, size_t n, void *ud)
{
	(void)ud;
	return realloc(p, n);
}

static ssize_t
send_cb(nghttp2_session *s, const uint8_t *d, size_t n, int f, void *u)
{
	(void)s;
	(void)d;
	(void)f;
	(void)u;
	return (ssize_t)n;
}

static nghttp2_session_callbacks *cbs;

static void *
thread_b(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&pool_lock);
	sem_post(&b_locked);
	sem_wait(&a_in_alloc);
	usleep(100000); /* A is now blocked on pool_lock inside its constructor */
	nghttp2_session_del(idle_session); /* tear down a connection under L */
	idle_session = NULL;
	pthread_mutex_unlock(&pool_lock);
	return NULL;
}

static void *
watchdog(void *arg)
{
	(void)arg;
	sleep(5);
	printf("DEADLOCK (nothing finished in 5 s)\n");
	fflush(stdout);
	_exit(2);
}

int
main(int argc, char **argv)
{
	nghttp2_mem mem = {NULL, app_malloc, app_free, app_calloc, app_realloc};
	nghttp2_session *srv = NULL;
	pthread_t b, w;
	int r;

	mode = argc > 1 ? argv[1] : "abba";
	setvbuf(stdout, NULL, _IONBF, 0);
	pthread_create(&w, NULL, watchdog, NULL);
	if (nghttp2_session_callbacks_new(&cbs) != 0)
		return 1;
	nghttp2_session_callbacks_set_send_callback(cbs, send_cb);
	/* the connection that gets torn down: a plain session, default allocator */
	if (nghttp2_session_server_new(&idle_session, cbs, NULL) != 0)
		return 1;

	if (strcmp(mode, "abba") == 0) {
		sem_init(&b_locked, 0, 0);
		sem_init(&a_in_alloc, 0, 0);
		pthread_create(&b, NULL, thread_b, NULL);
		sem_wait(&b_locked);
		printf("A: nghttp2_session_server_new3 with the app's allocator\n");
		r = nghttp2_session_server_new3(&srv, cbs, NULL, NULL, &mem);
		printf("A: server_new3 returned %d\n", r);
		pthread_join(b, NULL);
		printf("B: done\n");
	} else {
		printf("nghttp2_session_server_new3 with the evicting allocator\n");
		r = nghttp2_session_server_new3(&srv, cbs, NULL, NULL, &mem);
		printf("server_new3 returned %d, idle session %s\n", r,
		       idle_session ? "kept" : "evicted");
	}
	nghttp2_session_del(srv);
	nghttp2_session_callbacks_del(cbs);
	printf("DONE\n");
	return 0;
}
