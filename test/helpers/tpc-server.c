/* SPDX-License-Identifier: Apache-2.0 */
/* A thread-per-connection HTTP/1.1 server with no tracing code, for the
 * socket-level tests.
 *
 *   tpc-server [--read-size N] [--io read|recv|recvfrom|readv|recvmsg|
 *               read_chk|recv_chk|recvfrom_chk]
 *              [--wio write|send|sendto|writev|sendmsg|sendfile]
 *              [--block-poll] [--pool [--co]]
 *              [--call URL]
 *
 * Listens on 127.0.0.1, port chosen by the kernel, prints "READY <port>",
 * then serves each connection on its own thread: reads request
 * heads with N-byte reads through the chosen call, skips Content-Length
 * bodies, keeps the connection open (keep-alive, pipelining from its own
 * buffer) until the client closes.  A request whose path starts with
 * "/block" prints "BLOCK <tid> <path>" and waits for one line on stdin
 * before answering (with --block-poll it waits in poll() on a pipe, as a
 * handler waiting on a database or an upstream would); every answered
 * request prints "DONE <tid> <path>".
 * The response body is "path=<path>\n".  Exits when stdin is closed.
 *
 * --pool: a request's work (its "/block" wait) runs as a job on a pool of
 * one worker thread, which the first request starts after queueing its
 * job, as Python's ThreadPoolExecutor does on its first submit; the
 * connection's thread waits for the job (a condition variable) and then
 * answers.  The worker prints "JOB <tid> <path>" for each job it takes
 * and waits for the next one on a condition variable.  With --call, the
 * job makes the call (below), and each piece of the upstream's response
 * waits a moment for a lock first, as Python code running in a pycurl
 * callback waits for the GIL: a wait while the client span is shown.
 * With --co, the worker runs every job in one ucontext coroutine, made
 * when it starts (so with the first request's context) and switched to
 * for each job, as a green-thread scheduler would.
 *
 * Built a second time with libcurl as tpc-curl-server, whose --call URL
 * makes a request whose path starts with "/call" GET URL with
 * curl_easy_perform() on the connection's thread before it is answered
 * ("CALLED <tid> <status>"), as a handler calling an upstream would: what
 * the shim propagates from a socket-level context. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include "http1-reader.h"
#include "serve-common.h"

static bool use_pool;

#ifdef TPC_CURL
#include <curl/curl.h>
#include <time.h>

static const char *call_url;

static size_t
call_discard(char *p, size_t size, size_t n, void *arg)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
	struct timespec t;

	(void)p;
	(void)arg;
	if (use_pool) {
		/* a short wait that times out, like a contended GIL's */
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_nsec += 1000000;
		if (t.tv_nsec >= 1000000000) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000;
		}
		pthread_mutex_lock(&mu);
		(void)pthread_cond_timedwait(&cv, &mu, &t);
		pthread_mutex_unlock(&mu);
	}
	return size * n;
}

static void
maybe_call(long tid, const char *path)
{
	CURL *h;
	CURLcode r;
	long status = 0;

	if (!call_url || strncmp(path, "/call", 5) != 0)
		return;
	h = curl_easy_init();
	if (!h) {
		serve_say("CALLED %ld init-failed\n", tid);
		return;
	}
	(void)curl_easy_setopt(h, CURLOPT_URL, call_url);
	(void)curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, call_discard);
	(void)curl_easy_setopt(h, CURLOPT_TIMEOUT, 20L);
	r = curl_easy_perform(h);
	if (r == CURLE_OK)
		(void)curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(h);
	serve_say("CALLED %ld %ld\n", tid, r == CURLE_OK ? status : -(long)r);
}
#else
static void
maybe_call(long tid, const char *path)
{
	(void)tid;
	(void)path;
}
#endif

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cv = PTHREAD_COND_INITIALIZER; /* a job queued */
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER; /* a job done */
static bool pool_started;

struct job {
	const char *path;
	bool done;
};
static struct job *pool_job; /* the one queued, not taken yet */

static bool use_co;
static ucontext_t co_sched, co_ctx;
static struct job *co_job; /* the job the coroutine runs next */
static long co_tid;

static void
co_body(void)
{
	for (;;) {
		serve_maybe_block(co_tid, co_job->path);
		maybe_call(co_tid, co_job->path);
		swapcontext(&co_ctx, &co_sched);
	}
}

static void *
pool_worker(void *arg)
{
	long tid = syscall(SYS_gettid);
	static char co_stack[256 * 1024];

	(void)arg;
	if (use_co) {
		co_tid = tid;
		getcontext(&co_ctx);
		co_ctx.uc_stack.ss_sp = co_stack;
		co_ctx.uc_stack.ss_size = sizeof(co_stack);
		co_ctx.uc_link = NULL;
		makecontext(&co_ctx, co_body, 0);
	}
	pthread_mutex_lock(&pool_mu);
	for (;;) {
		struct job *j;

		while (!pool_job)
			pthread_cond_wait(&pool_cv, &pool_mu);
		j = pool_job;
		pool_job = NULL;
		pthread_cond_broadcast(&done_cv);
		pthread_mutex_unlock(&pool_mu);
		serve_say("JOB %ld %s\n", tid, j->path);
		if (use_co) {
			co_job = j;
			swapcontext(&co_sched, &co_ctx);
		} else {
			serve_maybe_block(tid, j->path);
			maybe_call(tid, j->path);
		}
		pthread_mutex_lock(&pool_mu);
		j->done = true;
		pthread_cond_broadcast(&done_cv);
	}
	return NULL;
}

/* The request's work as a pool job, the pool started by the first one;
 * on the connection's own thread if no thread can be started. */
static void
pool_run(long tid, const char *path)
{
	struct job j = {path, false};

	pthread_mutex_lock(&pool_mu);
	while (pool_job)
		pthread_cond_wait(&done_cv, &pool_mu);
	pool_job = &j;
	if (!pool_started) {
		pthread_t th;

		pool_started = pthread_create(&th, NULL, pool_worker, NULL) == 0;
		if (!pool_started) {
			pool_job = NULL;
			pthread_mutex_unlock(&pool_mu);
			serve_maybe_block(tid, path);
			maybe_call(tid, path);
			return;
		}
		pthread_detach(th);
	}
	pthread_cond_signal(&pool_cv);
	while (!j.done)
		pthread_cond_wait(&done_cv, &pool_mu);
	pthread_mutex_unlock(&pool_mu);
}

/* The fortified entry points, called directly as a fortified build
 * would. */
ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd,
		       void *buf,
		       size_t len,
		       size_t buflen,
		       int flags,
		       struct sockaddr *addr,
		       socklen_t *addrlen);

#define BUF_MAX (512 * 1024)

static size_t read_size = 4096;
static const char *io = "read";
static const char *wio = "write";

static ssize_t
do_read(int fd, char *buf, size_t n)
{
	if (strcmp(io, "recv") == 0)
		return recv(fd, buf, n, 0);
	if (strcmp(io, "recvfrom") == 0)
		return recvfrom(fd, buf, n, 0, NULL, NULL);
	if (strcmp(io, "readv") == 0 || strcmp(io, "recvmsg") == 0) {
		/* Two iovecs, so the split between them is exercised too. */
		size_t a = n / 2 ? n / 2 : n, b = n - a;
		struct iovec v[2] = {{buf, a}, {buf + a, b}};
		struct msghdr m = {.msg_iov = v, .msg_iovlen = b ? 2 : 1};

		if (strcmp(io, "readv") == 0)
			return readv(fd, v, b ? 2 : 1);
		return recvmsg(fd, &m, 0);
	}
	if (strcmp(io, "read_chk") == 0)
		return __read_chk(fd, buf, n, n);
	if (strcmp(io, "recv_chk") == 0)
		return __recv_chk(fd, buf, n, n, 0);
	if (strcmp(io, "recvfrom_chk") == 0)
		return __recvfrom_chk(fd, buf, n, n, 0, NULL, NULL);
	return read(fd, buf, n);
}

/* n bytes of buf through a file, as a static-file server sends a body
 * (sendfile(2); no head for the shim to look at). */
static ssize_t
send_from_file(int fd, const char *buf, size_t n)
{
	int mfd = memfd_create("tpc-body", MFD_CLOEXEC);
	off_t off = 0;
	ssize_t r = -1;

	if (mfd < 0)
		return -1;
	if (write(mfd, buf, n) == (ssize_t)n)
		r = sendfile(fd, mfd, &off, n);
	close(mfd);
	return r;
}

static int
do_write(int fd, const char *buf, size_t n)
{
	while (n) {
		ssize_t r;

		if (strcmp(wio, "send") == 0) {
			r = send(fd, buf, n, MSG_NOSIGNAL);
		} else if (strcmp(wio, "sendfile") == 0) {
			r = send_from_file(fd, buf, n);
		} else if (strcmp(wio, "sendto") == 0) {
			r = sendto(fd, buf, n, MSG_NOSIGNAL, NULL, 0);
		} else if (strcmp(wio, "writev") == 0 || strcmp(wio, "sendmsg") == 0) {
			size_t a = n > 8 ? 8 : n;
			struct iovec v[2] = {{(void *)buf, a},
					     {(void *)(buf + a), n - a}};
			struct msghdr m = {.msg_iov = v, .msg_iovlen = 2};

			r = wio[1] == 'r' ? writev(fd, v, 2)
					  : sendmsg(fd, &m, MSG_NOSIGNAL);
		} else {
			r = write(fd, buf, n);
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		buf += r;
		n -= (size_t)r;
	}
	return 0;
}

/* The read of http1-reader.h: do_read(), retried when interrupted. */
static ssize_t
conn_read(void *fdp, char *buf, size_t n)
{
	ssize_t r;

	do
		r = do_read(*(int *)fdp, buf, n);
	while (r < 0 && errno == EINTR);
	return r;
}

static void *
serve(void *arg)
{
	int fd = (int)(long)arg;
	long tid = syscall(SYS_gettid);
	struct http1_conn h = {.read = conn_read,
			       .io = &fd,
			       .read_size = read_size,
			       .buf = malloc(BUF_MAX),
			       .cap = BUF_MAX};
	char path[1024], resp[1400];

	serve_say("CONN %ld\n", tid);
	while (http1_next(&h, path, sizeof(path))) {
		size_t n;

		http1_drop(&h);
		if (use_pool) {
			pool_run(tid, path);
		} else {
			serve_maybe_block(tid, path);
			maybe_call(tid, path);
		}
		n = http1_response(resp, sizeof(resp), path);
		if (do_write(fd, resp, n) < 0)
			break;
		serve_say("DONE %ld %s\n", tid, path);
	}
	close(fd);
	free(h.buf);
	serve_say("CLOSED %ld\n", tid);
	return NULL;
}

int
main(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--read-size") == 0 && i + 1 < argc)
			read_size = (size_t)strtoul(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--io") == 0 && i + 1 < argc)
			io = argv[++i];
		else if (strcmp(argv[i], "--wio") == 0 && i + 1 < argc)
			wio = argv[++i];
		else if (strcmp(argv[i], "--block-poll") == 0)
			serve_block_poll = true;
		else if (strcmp(argv[i], "--pool") == 0)
			use_pool = true;
		else if (strcmp(argv[i], "--co") == 0)
			use_co = true;
#ifdef TPC_CURL
		else if (strcmp(argv[i], "--call") == 0 && i + 1 < argc)
			call_url = argv[++i];
#endif
		else {
			fprintf(stderr, "tpc-server: unknown option %s\n", argv[i]);
			return 64;
		}
	}
	if (read_size == 0 || read_size > BUF_MAX)
		read_size = 4096;
#ifdef TPC_CURL
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return 1;
#endif
	return serve_forever("tpc-server", serve, false);
}
