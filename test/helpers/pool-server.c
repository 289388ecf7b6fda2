/* SPDX-License-Identifier: Apache-2.0 */
/* An HTTP/1.1 server shaped like Apache httpd's event MPM, with no tracing
 * code, for the socket-level tests of worker pools.
 *
 *   pool-server [--workers N] [--wait cond|cnd|sem]
 *
 * Listens on 127.0.0.1 (port chosen by the kernel) and prints "READY
 * <port>".  A listener thread accepts connections and polls the ones parked
 * between requests; a readable connection goes to a queue that N worker
 * threads (default 2) take from, waiting on a condition variable
 * (pthread_cond_wait; --wait cnd: C11's cnd_wait; --wait sem: sem_wait on a
 * semaphore counting the queued connections).  A worker
 * serves the requests the connection has ready (one, or several
 * pipelined), prints "DONE <tid> <path>" after each response, hands the
 * connection back to the listener ("PARKED <tid>") and waits for the next
 * one: after a response, no read, poll or close of that connection happens
 * on the worker's thread.  A request whose path starts with "/block"
 * prints "BLOCK <tid> <path>" and, before it is answered, waits on a
 * condition variable until one line on stdin releases it (a handler
 * waiting for another thread's result).  A request whose path starts with
 * "/gil" is answered in two writes: the head, then (as an interpreter's
 * thread would, handing its lock to and fro) a few condition variable
 * waits of 5 ms each ("/gilmono": on a condition variable on
 * CLOCK_MONOTONIC, as CPython's own), "GIL <tid> <path>", a sleep until
 * one line on stdin releases it, and the body.  The response body is "path=<path>\n".
 * Exits when stdin is closed. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

#include "http1-reader.h"
#include "listen-loopback.h"
#include "serve-common.h"

#define MAX_CONNS 64
#define BUF_MAX   (64 * 1024)

struct conn {
	int fd;
	struct http1_conn h;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER;
static struct conn *queue[MAX_CONNS]; /* readable, for the workers */
static size_t n_queued;
static struct conn *parked[MAX_CONNS]; /* between requests, for the listener */
static size_t n_parked;
static int wake[2]; /* a worker parked a connection: the listener polls again */

/* --wait: how workers wait for the queue (C11 and semaphore variants) */
static enum { WAIT_COND, WAIT_CND, WAIT_SEM } wait_kind;
static cnd_t work_cnd;
static mtx_t work_mtx; /* with work_cnd, guards the queue instead of mu */
static sem_t work_sem;

static pthread_cond_t block_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t gil_mono_cv; /* CLOCK_MONOTONIC (main) */
static unsigned block_tokens;

static ssize_t
conn_read(void *fdp, char *buf, size_t n)
{
	ssize_t r;

	do
		r = read(*(int *)fdp, buf, n);
	while (r < 0 && errno == EINTR);
	return r;
}

static int
write_all(int fd, const char *buf, size_t n)
{
	while (n) {
		ssize_t r = write(fd, buf, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		buf += r;
		n -= (size_t)r;
	}
	return 0;
}

static void
park(struct conn *c)
{
	pthread_mutex_lock(&mu);
	parked[n_parked++] = c;
	pthread_mutex_unlock(&mu);
	(void)!write(wake[1], "p", 1);
}

static void
maybe_block(long tid, const char *path)
{
	if (strncmp(path, "/block", 6) != 0)
		return;
	serve_say("BLOCK %ld %s\n", tid, path);
	pthread_mutex_lock(&mu);
	while (!block_tokens)
		pthread_cond_wait(&block_cv, &mu);
	block_tokens--;
	pthread_mutex_unlock(&mu);
}

/* "/gil": the head written, the thread waits for a lock held by another
 * thread 5 ms at a time (as CPython's threads wait for the GIL) and keeps
 * working on the response; false if the connection failed. */
static bool
gil_head(int fd, long tid, const char *path, const char *resp, size_t n)
{
	static pthread_cond_t gil_cv = PTHREAD_COND_INITIALIZER;
	const char *body = strstr(resp, "\r\n\r\n") + 4;
	bool mono = strncmp(path, "/gilmono", 8) == 0;
	struct timespec t;
	unsigned i;

	if (write_all(fd, resp, (size_t)(body - resp)) < 0)
		return false;
	pthread_mutex_lock(&mu);
	for (i = 0; i < 3; i++) {
		clock_gettime(mono ? CLOCK_MONOTONIC : CLOCK_REALTIME, &t);
		t.tv_nsec += 5000000;
		if (t.tv_nsec >= 1000000000) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000;
		}
		(void)pthread_cond_timedwait(mono ? &gil_mono_cv : &gil_cv, &mu, &t);
	}
	pthread_mutex_unlock(&mu);
	serve_say("GIL %ld %s\n", tid, path);
	/* a sleep, no wait: until a line on stdin */
	for (;;) {
		bool go;

		pthread_mutex_lock(&mu);
		go = block_tokens > 0;
		if (go)
			block_tokens--;
		pthread_mutex_unlock(&mu);
		if (go)
			break;
		usleep(1000);
	}
	return write_all(fd, body, n - (size_t)(body - resp)) == 0;
}

/* One request of c, and the ones pipelined behind it; false when the
 * connection is over. */
static bool
serve_ready(struct conn *c, long tid)
{
	char path[1024], resp[1400];

	do {
		size_t n;

		if (!http1_next(&c->h, path, sizeof(path)))
			return false;
		http1_drop(&c->h);
		maybe_block(tid, path);
		n = http1_response(resp, sizeof(resp), path);
		if (strncmp(path, "/gil", 4) == 0) {
			if (!gil_head(c->fd, tid, path, resp, n))
				return false;
		} else if (write_all(c->fd, resp, n) < 0) {
			return false;
		}
		serve_say("DONE %ld %s\n", tid, path);
	} while (http1_head_end(c->h.buf, c->h.len));
	return true;
}

/* The next readable connection, waiting for one as --wait says. */
static struct conn *
take_job(void)
{
	struct conn *c;

	if (wait_kind == WAIT_SEM)
		while (sem_wait(&work_sem) < 0)
			;
	if (wait_kind == WAIT_CND) {
		mtx_lock(&work_mtx);
		while (!n_queued)
			cnd_wait(&work_cnd, &work_mtx);
		c = queue[--n_queued];
		mtx_unlock(&work_mtx);
		return c;
	}
	pthread_mutex_lock(&mu);
	while (!n_queued)
		pthread_cond_wait(&work_cv, &mu);
	c = queue[--n_queued];
	pthread_mutex_unlock(&mu);
	return c;
}

/* Queue c for the workers (the listener holds mu). */
static void
put_job(struct conn *c)
{
	if (wait_kind == WAIT_CND) {
		mtx_lock(&work_mtx);
		queue[n_queued++] = c;
		cnd_signal(&work_cnd);
		mtx_unlock(&work_mtx);
		return;
	}
	queue[n_queued++] = c;
	if (wait_kind == WAIT_SEM)
		sem_post(&work_sem);
	else
		pthread_cond_signal(&work_cv);
}

static void *
worker(void *arg)
{
	long tid = syscall(SYS_gettid);

	(void)arg;
	for (;;) {
		struct conn *c;

		c = take_job();
		if (serve_ready(c, tid)) {
			park(c);
			serve_say("PARKED %ld\n", tid);
		} else {
			close(c->fd);
			free(c->h.buf);
			free(c);
			serve_say("CLOSED %ld\n", tid);
		}
	}
	return NULL;
}

/* Accepts, and polls the parked connections: a readable one is queued. */
static void
listener(int ls)
{
	for (;;) {
		struct pollfd p[MAX_CONNS + 2];
		struct conn *polled[MAX_CONNS];
		size_t n, i;

		pthread_mutex_lock(&mu);
		n = n_parked;
		memcpy(polled, parked, n * sizeof(*polled));
		pthread_mutex_unlock(&mu);
		p[0] = (struct pollfd){.fd = ls, .events = POLLIN};
		p[1] = (struct pollfd){.fd = wake[0], .events = POLLIN};
		for (i = 0; i < n; i++)
			p[i + 2] =
				(struct pollfd){.fd = polled[i]->fd, .events = POLLIN};
		if (poll(p, n + 2, -1) < 0)
			continue;
		if (p[1].revents) {
			char b[64];

			(void)!read(wake[0], b, sizeof(b));
		}
		pthread_mutex_lock(&mu);
		for (i = 0; i < n; i++) {
			size_t k;

			if (!p[i + 2].revents)
				continue;
			for (k = 0; k < n_parked && parked[k] != polled[i]; k++)
				;
			parked[k] = parked[--n_parked];
			put_job(polled[i]);
		}
		pthread_mutex_unlock(&mu);
		if (p[0].revents) {
			struct conn *c = calloc(1, sizeof(*c));
			int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);

			if (fd < 0 || !c || n_parked + n_queued + 2 > MAX_CONNS) {
				if (fd >= 0)
					close(fd);
				free(c);
				continue;
			}
			c->fd = fd;
			c->h = (struct http1_conn){.read = conn_read,
						   .io = &c->fd,
						   .read_size = 4096,
						   .buf = malloc(BUF_MAX),
						   .cap = BUF_MAX};
			pthread_mutex_lock(&mu);
			parked[n_parked++] = c;
			pthread_mutex_unlock(&mu);
		}
	}
}

static void *
control(void *arg)
{
	char line[256];

	(void)arg;
	/* One line on stdin releases one blocked request; EOF ends it all. */
	while (fgets(line, sizeof(line), stdin)) {
		pthread_mutex_lock(&mu);
		block_tokens++;
		pthread_cond_broadcast(&block_cv);
		pthread_mutex_unlock(&mu);
	}
	exit(0);
}

int
main(int argc, char **argv)
{
	struct sockaddr_in a;
	unsigned workers = 2, i;
	pthread_condattr_t ca;
	pthread_t th;
	int ls;

	for (i = 1; i < (unsigned)argc; i++) {
		if (strcmp(argv[i], "--workers") == 0 && i + 1 < (unsigned)argc) {
			workers = (unsigned)strtoul(argv[++i], NULL, 10);
		} else if (strcmp(argv[i], "--wait") == 0 && i + 1 < (unsigned)argc) {
			i++;
			if (strcmp(argv[i], "cnd") == 0)
				wait_kind = WAIT_CND;
			else if (strcmp(argv[i], "sem") == 0)
				wait_kind = WAIT_SEM;
			else if (strcmp(argv[i], "cond") != 0)
				break;
		} else {
			break;
		}
	}
	if (i != (unsigned)argc) {
		fprintf(stderr,
			"usage: pool-server [--workers N] [--wait cond|cnd|sem]\n");
		return 64;
	}
	if (pthread_condattr_init(&ca) != 0 ||
	    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
	    pthread_cond_init(&gil_mono_cv, &ca) != 0)
		return 1;
	if (cnd_init(&work_cnd) != thrd_success ||
	    mtx_init(&work_mtx, mtx_plain) != thrd_success ||
	    sem_init(&work_sem, 0, 0) < 0)
		return 1;
	if (workers == 0 || workers > 16)
		workers = 2;
	if (pipe2(wake, O_CLOEXEC) < 0)
		return 1;
	ls = listen_loopback(64, SOCK_CLOEXEC, &a);
	if (ls < 0) {
		fprintf(stderr, "pool-server: listen: %s\n", strerror(errno));
		return 1;
	}
	for (i = 0; i < workers; i++)
		if (pthread_create(&th, NULL, worker, NULL) != 0)
			return 1;
	pthread_create(&th, NULL, control, NULL);
	serve_say("READY %d\n", ntohs(a.sin_port));
	listener(ls);
	return 0;
}
