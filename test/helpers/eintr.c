/* SPDX-License-Identifier: Apache-2.0 */
/* Which blocking calls a ctxdump stop makes fail with EINTR
 * (test-ctxdump-eintr.c, doc/ctxdump.1 NOTES).  No signal handler is
 * installed anywhere: a plain stop and resume (PTRACE_INTERRUPT, then
 * PTRACE_DETACH) is all that happens to the threads.  The executable
 * exports an (always NULL) otel_thread_ctx_v1 so that ctxdump stops it.
 *
 *   eintr
 *
 * starts one thread per call below, each blocked in it with nothing that
 * could wake it (timeouts of 100 s), and prints "READY <pid> <calls>" and
 * then "CALL <tid> <name>" for each.  Every return of a call is counted, with
 * its errno; the thread calls again at once.  "REPORT" on stdin prints
 * "RESULT <name> <returns> <eintr> <other errno or 0>" per call, then
 * "END"; end of stdin exits 0. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "listen-loopback.h"

#define LONG_S 100

/* only so that ctxdump reads (and so stops) the process: never set */
__attribute__((visibility("default"))) __thread void *otel_thread_ctx_v1;

static int pipe_fd[2], listen_fd, epoll_fd, conn_fd[2];
static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;

static int
c_epoll_wait(void)
{
	struct epoll_event ev;

	return epoll_wait(epoll_fd, &ev, 1, -1);
}

static int
c_epoll_wait_timeout(void)
{
	struct epoll_event ev;

	return epoll_wait(epoll_fd, &ev, 1, LONG_S * 1000);
}

static int
c_poll(void)
{
	struct pollfd p = {.fd = pipe_fd[0], .events = POLLIN};

	return poll(&p, 1, -1);
}

static int
c_poll_timeout(void)
{
	struct pollfd p = {.fd = pipe_fd[0], .events = POLLIN};

	return poll(&p, 1, LONG_S * 1000);
}

static int
c_select(void)
{
	fd_set r;

	FD_ZERO(&r);
	FD_SET(pipe_fd[0], &r);
	return select(pipe_fd[0] + 1, &r, NULL, NULL, NULL);
}

static int
c_select_timeout(void)
{
	struct timeval tv = {LONG_S, 0};
	fd_set r;

	FD_ZERO(&r);
	FD_SET(pipe_fd[0], &r);
	return select(pipe_fd[0] + 1, &r, NULL, NULL, &tv);
}

static int
c_nanosleep(void)
{
	struct timespec ts = {LONG_S, 0};

	return nanosleep(&ts, NULL);
}

static int
c_clock_nanosleep(void)
{
	struct timespec ts = {LONG_S, 0};
	int e = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);

	errno = e;
	return e ? -1 : 0;
}

static int
c_clock_nanosleep_abs(void)
{
	struct timespec ts;
	int e;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += LONG_S;
	e = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
	errno = e;
	return e ? -1 : 0;
}

static int
c_read_pipe(void)
{
	char b;

	return (int)read(pipe_fd[0], &b, 1);
}

static int
c_recv(void)
{
	char b;

	return (int)recv(conn_fd[0], &b, 1, 0);
}

static int
c_accept(void)
{
	return accept(listen_fd, NULL, NULL);
}

static int
c_cond_wait(void)
{
	int e;

	pthread_mutex_lock(&mutex);
	e = pthread_cond_wait(&cond, &mutex);
	pthread_mutex_unlock(&mutex);
	errno = e;
	return e ? -1 : 0;
}

static int
c_cond_timedwait(void)
{
	struct timespec ts;
	int e;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += LONG_S;
	pthread_mutex_lock(&mutex);
	e = pthread_cond_timedwait(&cond, &mutex, &ts);
	pthread_mutex_unlock(&mutex);
	errno = e;
	return e ? -1 : 0;
}

static int
c_sigwaitinfo(void)
{
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, SIGUSR1);
	return sigwaitinfo(&s, NULL);
}

static int
c_sigtimedwait(void)
{
	struct timespec ts = {LONG_S, 0};
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, SIGUSR1);
	return sigtimedwait(&s, NULL, &ts);
}

static int
c_pause(void)
{
	return pause();
}

static const struct call {
	const char *name;
	int (*fn)(void);
} calls[] = {
	{"epoll_wait", c_epoll_wait},
	{"epoll_wait-timeout", c_epoll_wait_timeout},
	{"poll", c_poll},
	{"poll-timeout", c_poll_timeout},
	{"select", c_select},
	{"select-timeout", c_select_timeout},
	{"nanosleep", c_nanosleep},
	{"clock_nanosleep", c_clock_nanosleep},
	{"clock_nanosleep-abs", c_clock_nanosleep_abs},
	{"read-pipe", c_read_pipe},
	{"recv", c_recv},
	{"accept", c_accept},
	{"pthread_cond_wait", c_cond_wait},
	{"pthread_cond_timedwait", c_cond_timedwait},
	{"sigwaitinfo", c_sigwaitinfo},
	{"sigtimedwait", c_sigtimedwait},
	{"pause", c_pause},
};
#define N_CALLS (sizeof(calls) / sizeof(calls[0]))

static atomic_uint returns[N_CALLS], eintr[N_CALLS];
static atomic_int other[N_CALLS];
static pid_t tids[N_CALLS];
static pthread_barrier_t started;

static void *
runner(void *arg)
{
	size_t i = (size_t)arg;

	tids[i] = (pid_t)syscall(SYS_gettid);
	pthread_barrier_wait(&started);
	for (;;) {
		int r = calls[i].fn();

		atomic_fetch_add(&returns[i], 1);
		if (r < 0 && errno == EINTR)
			atomic_fetch_add(&eintr[i], 1);
		else if (r < 0)
			atomic_store(&other[i], errno);
	}
	return NULL;
}

int
main(void)
{
	struct epoll_event ev = {.events = EPOLLIN};
	char line[64];
	pthread_t t;
	sigset_t s;
	size_t i;

	/* SIGUSR1 is waited for, never sent; blocked in every thread */
	sigemptyset(&s);
	sigaddset(&s, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	listen_fd = listen_loopback(4, 0, NULL);
	epoll_fd = epoll_create1(0);
	if (pipe(pipe_fd) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, conn_fd) < 0 ||
	    listen_fd < 0 || epoll_fd < 0 ||
	    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, pipe_fd[0], &ev) < 0) {
		perror("eintr: setup");
		return 1;
	}
	pthread_barrier_init(&started, NULL, N_CALLS + 1);
	for (i = 0; i < N_CALLS; i++)
		if (pthread_create(&t, NULL, runner, (void *)i) != 0)
			return 1;
	pthread_barrier_wait(&started);
	printf("READY %d %zu\n", (int)getpid(), N_CALLS);
	for (i = 0; i < N_CALLS; i++)
		printf("CALL %d %s\n", (int)tids[i], calls[i].name);
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (strncmp(line, "REPORT", 6) != 0)
			continue;
		for (i = 0; i < N_CALLS; i++)
			printf("RESULT %s %u %u %d\n", calls[i].name,
			       atomic_load(&returns[i]), atomic_load(&eintr[i]),
			       atomic_load(&other[i]));
		printf("END\n");
		fflush(stdout);
	}
	return 0;
}
