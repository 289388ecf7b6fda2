/* SPDX-License-Identifier: Apache-2.0 */
/* Threads that are busy or blocked in system calls while ctxdump stops
 * them; no tracing code.
 *
 *   blocked [--busy N]
 *
 * One thread per blocking call below, each calling it in a loop, and N
 * threads spinning on the CPU.  A call that returns (EINTR or anything
 * else) is counted per call: a reader that stops the process must not
 * make a blocking call return, except where the kernel documents it
 * (signal(7): epoll_wait, sigwaitinfo, semop and socket calls with a
 * timeout return EINTR after a stop even without a handler).
 *   read      read() on a pipe nobody writes
 *   accept    accept() on a socket nobody connects to
 *   recv      recv() on a connected socket whose peer is silent
 *   poll      poll() without timeout
 *   select    select() without timeout
 *   epoll     epoll_wait() without timeout
 *   nanosleep a one-hour nanosleep()
 *   cond      pthread_cond_wait()
 *   sigwait   sigwaitinfo() for a blocked signal
 *   waitpid   waitpid() for a child that sleeps
 *   futex     a FUTEX_WAIT without timeout
 * Prints "READY <pid>"; then on stdin "report" prints "REPORT <spins>
 * <call>=<returns> ..." (spins: iterations of the busy threads so far),
 * and EOF ends the program (exit 0). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "listen-loopback.h"

enum call {
	C_READ,
	C_ACCEPT,
	C_RECV,
	C_POLL,
	C_SELECT,
	C_EPOLL,
	C_NANOSLEEP,
	C_COND,
	C_SIGWAIT,
	C_WAITPID,
	C_FUTEX,
	N_CALLS
};

static const char *const names[N_CALLS] = {
	"read",      "accept", "recv",    "poll",    "select", "epoll",
	"nanosleep", "cond",   "sigwait", "waitpid", "futex",
};

static atomic_uint returns[N_CALLS];
static atomic_ulong spins;
static int pipe_fd[2], lsock, csock[2], epfd;
static pid_t child;
static pthread_mutex_t mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static uint32_t futex_word;
static pthread_barrier_t started;

static void *
blocker(void *arg)
{
	enum call c = (enum call)(long)arg;
	char b;

	pthread_barrier_wait(&started);
	for (;;) {
		switch (c) {
		case C_READ:
			(void)read(pipe_fd[0], &b, 1);
			break;
		case C_ACCEPT:
			(void)accept(lsock, NULL, NULL);
			break;
		case C_RECV:
			(void)recv(csock[0], &b, 1, 0);
			break;
		case C_POLL: {
			struct pollfd p = {.fd = pipe_fd[0], .events = POLLIN};

			(void)poll(&p, 1, -1);
			break;
		}
		case C_SELECT: {
			fd_set s;

			FD_ZERO(&s);
			FD_SET(pipe_fd[0], &s);
			(void)select(pipe_fd[0] + 1, &s, NULL, NULL, NULL);
			break;
		}
		case C_EPOLL: {
			struct epoll_event ev;

			(void)epoll_wait(epfd, &ev, 1, -1);
			break;
		}
		case C_NANOSLEEP: {
			struct timespec ts = {3600, 0};

			(void)nanosleep(&ts, NULL);
			break;
		}
		case C_COND:
			pthread_mutex_lock(&mtx);
			pthread_cond_wait(&cond, &mtx);
			pthread_mutex_unlock(&mtx);
			break;
		case C_SIGWAIT: {
			sigset_t s;

			sigemptyset(&s);
			sigaddset(&s, SIGUSR2);
			(void)sigwaitinfo(&s, NULL);
			break;
		}
		case C_WAITPID:
			(void)waitpid(child, NULL, 0);
			break;
		case C_FUTEX:
			(void)syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0,
				      NULL, NULL, 0);
			break;
		case N_CALLS:
			break;
		}
		atomic_fetch_add(&returns[c], 1);
	}
	return NULL;
}

static void *
spinner(void *arg)
{
	volatile unsigned long x = 0;

	(void)arg;
	pthread_barrier_wait(&started);
	for (;;) {
		for (unsigned i = 0; i < 100000; i++)
			x = x * 31 + i;
		atomic_fetch_add(&spins, 1);
	}
	return NULL;
}

static void
setup(void)
{
	struct epoll_event ev = {.events = EPOLLIN};
	sigset_t s;

	/* SIGUSR2 blocked in every thread (inherited), for sigwaitinfo */
	sigemptyset(&s);
	sigaddset(&s, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	if (pipe(pipe_fd) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, csock) < 0)
		exit(1);
	lsock = listen_loopback(4, 0, NULL);
	if (lsock < 0)
		exit(1);
	epfd = epoll_create1(0);
	ev.data.fd = pipe_fd[0];
	if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, pipe_fd[0], &ev) < 0)
		exit(1);
	child = fork();
	if (child == 0) {
		sleep(3600);
		_exit(0);
	}
}

int
main(int argc, char **argv)
{
	unsigned busy = argc > 2 && strcmp(argv[1], "--busy") == 0
				? (unsigned)atoi(argv[2])
				: 0;
	char line[64];
	pthread_t th;
	long i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	setup();
	pthread_barrier_init(&started, NULL, N_CALLS + busy + 1);
	for (i = 0; i < N_CALLS; i++)
		if (pthread_create(&th, NULL, blocker, (void *)i) != 0)
			return 1;
	for (i = 0; i < (long)busy; i++)
		if (pthread_create(&th, NULL, spinner, NULL) != 0)
			return 1;
	pthread_barrier_wait(&started);
	printf("READY %d\n", (int)getpid());
	while (fgets(line, sizeof(line), stdin)) {
		if (strncmp(line, "report", 6) != 0)
			continue;
		printf("REPORT %lu", atomic_load(&spins));
		for (i = 0; i < N_CALLS; i++)
			printf(" %s=%u", names[i], atomic_load(&returns[i]));
		printf("\n");
	}
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	_exit(0);
}
