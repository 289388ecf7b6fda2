/* SPDX-License-Identifier: Apache-2.0 */
/* upstream-attr MODE: situations where following upstreams
 * (hooks/hook-socket.c, "Upstreams") could show a thread a request it is
 * not working on; the last line, "LAST <what> trace=... span=...", is the
 * calling thread's context at the end, which must be the right one or none
 * (test-preload-upstream.c).  A backend that echoes runs in a child
 * process; the client connections are socket pairs the helper accept()s
 * (sock-pair.h).  Modes:
 *
 *   bg      an upstream opened under request A, used by another thread
 *           (a pool's health check) while A is still worked on: none
 *   inh     a thread started by request B (inheriting B) reads a pooled
 *           upstream opened under A: still B
 *   mux     A's and B's requests on one upstream (pipelined, multiplexed):
 *           A's answer read: none (not B)
 *   batch   one event-loop batch: B's head read, then the rest of A's body
 *           written on A's upstream: A's answer read: none (not B)
 *   retry   A's first backend fails and the next one is connected in the
 *           batch that read B's head: A's answer read: none (not B)
 *   vfork   a vfork() child connects a socket; the parent later gets that
 *           number for a pipe: none
 *   unseen  an upstream closed behind the hooks' back; a pipe gets its
 *           number: none */
#include "config.h"

#include "ctxobs.h"
#include "listen-loopback.h"
#include "self-check.h"
#include "sock-pair.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define TRACE1 "4bf92f3577b34da6a3ce929d0e0e4736"
#define TRACE2 "5c0a3f4688c45eb7b4df03ae1f1f5847"

static struct sockaddr_in be;
static pid_t be_pid;
static int g_up, g_pipe[2];

static void
say(const char *what)
{
	printf("%s %s\n", what, ctxobs_shown());
	fflush(stdout);
}

/* The echo backend, in a child process. */
static void
backend(void)
{
	int l = listen_loopback(8, 0, &be);

	if (l < 0)
		die("backend");
	be_pid = fork();
	if (be_pid < 0)
		die("fork");
	if (be_pid == 0) {
		for (;;) {
			int c = accept(l, NULL, NULL);

			if (c < 0)
				_exit(0);
			if (fork() == 0) {
				char b[512];
				ssize_t r;

				while ((r = read(c, b, sizeof(b))) > 0)
					send_all(c, b, (size_t)r, 0);
				_exit(0);
			}
			close(c);
		}
	}
	close(l);
}

static int
up_connect(void)
{
	int u = socket(AF_INET, SOCK_STREAM, 0);

	if (u < 0 || connect(u, (struct sockaddr *)&be, sizeof(be)) != 0)
		die("connect");
	return u;
}

/* An event loop's wait for fd (clears what the thread publishes). */
static void
wait_in(int fd)
{
	struct epoll_event e = {.events = EPOLLIN, .data.fd = fd}, o;
	int ep = epoll_create1(0);

	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) != 0)
		die("epoll");
	while (epoll_wait(ep, &o, 1, 2000) < 0)
		;
	close(ep);
}

static void *
bg_thread(void *arg)
{
	char b[16];

	(void)arg;
	read_n(g_pipe[0], b, 1);
	send_all(g_up, "PING", 4, 0);
	wait_in(g_up);
	read_n(g_up, b, 4);
	say("LAST bg-thread-after-its-own-read");
	return NULL;
}

static void *
inh_thread(void *arg)
{
	char b[16];

	(void)arg;
	send_all(g_up, "Q2..", 4, 0);
	read_n(g_up, b, 4);
	say("LAST inheriting-thread-after-pooled-read");
	return NULL;
}

int
main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	int c1, s1, c2, s2, u, u2;
	char b[64];
	pthread_t t;

	backend();
	if (strcmp(mode, "bg") == 0) {
		if (pipe(g_pipe) != 0 || pthread_create(&t, NULL, bg_thread, NULL) != 0)
			die("bg");
		pair_traced(&c1, &s1, TRACE1);
		u = up_connect(); /* opened lazily under A */
		send_all(u, "Q1..", 4, 0);
		read_n(u, b, 4);
		g_up = u; /* back to the pool; A still worked on */
		if (write(g_pipe[1], "x", 1) != 1)
			die("write");
		pthread_join(t, NULL);
	} else if (strcmp(mode, "inh") == 0) {
		pair_traced(&c1, &s1, TRACE1);
		u = up_connect();
		send_all(u, "Q1..", 4, 0);
		read_n(u, b, 4);
		g_up = u;
		pair_traced(&c2, &s2, TRACE2);
		if (pthread_create(&t, NULL, inh_thread, NULL) != 0)
			die("inh");
		pthread_join(t, NULL);
	} else if (strcmp(mode, "mux") == 0) {
		pair_traced(&c1, &s1, TRACE1);
		u = up_connect();
		send_all(u, "reqA", 4, 0);
		pair_traced(&c2, &s2, TRACE2);
		send_all(u, "reqB", 4, 0);
		wait_in(u);
		read_n(u, b, 4);
		say("LAST after-A's-answer");
	} else if (strcmp(mode, "batch") == 0) {
		pair_traced(&c1, &s1, TRACE1);
		u = up_connect();
		send_all(u, "A-he", 4, 0); /* A's head, not all its body */
		wait_in(s1);
		pair_traced(&c2, &s2, TRACE2); /* event 1: B's head */
		u2 = up_connect();
		send_all(u2, "B-he", 4, 0);
		send_all(u, "A-bd", 4, 0); /* event 2: the rest of A's body */
		wait_in(u);
		read_n(u, b, 8);
		say("LAST after-A's-answer");
	} else if (strcmp(mode, "retry") == 0) {
		struct sockaddr_in dead = be;
		socklen_t dl = sizeof(dead), el = sizeof(int);
		struct pollfd pf;
		int t0 = socket(AF_INET, SOCK_STREAM, 0), e, u1;

		/* a port nobody listens on */
		dead.sin_port = 0;
		if (t0 < 0 || bind(t0, (struct sockaddr *)&dead, sizeof(dead)) != 0 ||
		    getsockname(t0, (struct sockaddr *)&dead, &dl) != 0)
			die("port");
		close(t0);
		pair_traced(&c1, &s1, TRACE1);
		u1 = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		(void)connect(u1, (struct sockaddr *)&dead, sizeof(dead));
		pf = (struct pollfd){.fd = u1, .events = POLLOUT};
		(void)poll(&pf, 1, 1000);
		pair_traced(&c2, &s2, TRACE2); /* event 1: B's head */
		(void)getsockopt(u1, SOL_SOCKET, SO_ERROR, &e, &el); /* event 2 */
		close(u1);
		u = up_connect(); /* A's next backend */
		send_all(u, "reqA", 4, 0);
		wait_in(u);
		read_n(u, b, 4);
		say("LAST after-A's-answer");
	} else if (strcmp(mode, "vfork") == 0) {
		struct pollfd pf;
		pid_t pid;
		int p[2], st;

		pair_traced(&c1, &s1, TRACE1);
		pid = vfork();
		if (pid == 0) {
			int k = socket(AF_INET, SOCK_STREAM, 0);

			(void)connect(k, (struct sockaddr *)&be, sizeof(be));
			_exit(0);
		}
		if (pid < 0 || waitpid(pid, &st, 0) != pid)
			die("vfork");
		pf = (struct pollfd){.fd = s1, .events = POLLIN};
		(void)poll(&pf, 1, 100);
		if (pipe(p) != 0 || write(p[1], "log!", 4) != 4)
			die("pipe");
		read_n(p[0], b, 4);
		say("LAST after-reading-a-pipe");
	} else if (strcmp(mode, "unseen") == 0) {
		struct pollfd pf;
		int p[2];

		pair_traced(&c1, &s1, TRACE1);
		u = up_connect();
		syscall(SYS_close, u); /* a close the hooks do not see */
		pf = (struct pollfd){.fd = s1, .events = POLLIN};
		(void)poll(&pf, 1, 100);
		if (pipe(p) != 0 || write(p[1], "log!", 4) != 4)
			die("pipe");
		read_n(p[0], b, 4);
		say("LAST after-reading-a-pipe");
	} else {
		fprintf(stderr,
			"usage: upstream-attr bg|inh|mux|batch|retry|vfork|unseen\n");
		kill(be_pid, SIGTERM);
		return 64;
	}
	kill(be_pid, SIGTERM);
	return fails;
}
