/* SPDX-License-Identifier: Apache-2.0 */
/* A signal handler that interrupts the shim while it builds a request's
 * context (test-preload-socket.c, "hold").  No tracing code: it looks at
 * its own thread's record the way an in-process reader would (ctxobs.h).
 *
 * The landing spot is exact, not left to a timer: the shim publishes a
 * thread's first request while it holds its busy flags, and registers
 * the thread's exit handler then with pthread_setspecific(), which this
 * program defines (exported: the shim's call binds to it).  Armed, it
 * raises SIGUSR1 there, once, on a thread started for each case:
 *
 *   hold-jump out       the handler siglongjmp()s back to the request loop
 *                       (a request timeout); the next request, on a new
 *                       connection, must show its trace.
 *   hold-jump outalt    the same from a handler on a signal stack (a
 *                       buffer in the thread's own frame, above the
 *                       shim's).
 *   hold-jump inside    the handler jumps inside itself (its own
 *                       sigsetjmp()/siglongjmp()), then reads a request on
 *                       another connection and returns: that read must
 *                       not publish (the interrupted build is still in
 *                       progress), and the interrupted read's request
 *                       must show its trace afterwards.
 *   hold-jump insidealt the same on a signal stack above the shim's frame.
 *
 * Prints "RESULT <case> ok" and exits 0, or describes what went wrong and
 * exits 1. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ctxobs.h"
#include "listen-loopback.h"

static int lsock;
static struct sockaddr_in srv_addr;
static const char *mode;
static bool shim;

static volatile pid_t armed_tid;
static volatile sig_atomic_t raised;
static sigjmp_buf loop_env;
static int side_srv = -1;
static volatile int side_saw_own = -1;

static int (*real_setspecific)(pthread_key_t, const void *);

static void
bind_setspecific(void)
{
	real_setspecific = (int (*)(pthread_key_t, const void *))dlsym(
		RTLD_NEXT, "pthread_setspecific");
}

/* The shim's (and anyone's) pthread_setspecific(): raises SIGUSR1 on the
 * armed thread, once, then does the real thing.  Bound here too, not
 * only in main(): a preloaded runtime (ASan's) calls it before main(). */
int
pthread_setspecific(pthread_key_t key, const void *v)
{
	if (!real_setspecific)
		bind_setspecific();
	if (armed_tid && armed_tid == (pid_t)syscall(SYS_gettid)) {
		armed_tid = 0;
		raised = 1;
		(void)syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid),
			      SIGUSR1);
	}
	return real_setspecific(key, v);
}

static void
fail(const char *what)
{
	printf("RESULT %s FAIL %s\n", mode, what);
	fflush(stdout);
	exit(1);
}

/* Is the calling thread's context trace ...<n>? */
static bool
ctx_is(unsigned n)
{
	const struct otel_thread_ctx_record *r = ctxobs_record();

	if (!shim)
		return true;
	return r && r->valid == 1 && r->trace_id[15] == n &&
	       memcmp(r->trace_id, "\x4b\xf9\x2f\x35\x77\xb3\x4d\xa6", 8) == 0;
}

static void
pair(int *srv, int *cli)
{
	socklen_t len = sizeof(srv_addr);

	*cli = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*cli < 0 || connect(*cli, (struct sockaddr *)&srv_addr, len) < 0)
		fail("connect");
	*srv = accept4(lsock, NULL, NULL, SOCK_CLOEXEC);
	if (*srv < 0)
		fail("accept");
}

static void
send_request(int fd, unsigned n)
{
	char req[256];
	int len = snprintf(
		req, sizeof(req),
		"GET /r%u HTTP/1.1\r\nHost: x\r\ntraceparent: "
		"00-4bf92f3577b34da600000000000000%02x-00f067aa0ba902b7-01\r\n\r\n",
		n, n);

	if (write(fd, req, (size_t)len) != len)
		fail("write");
}

/* One read that returns the whole head (it is all there). */
static void
read_request(int fd)
{
	char buf[512];

	if (read(fd, buf, sizeof(buf)) <= 0)
		fail("read");
}

static void
on_usr1(int sig)
{
	(void)sig;
	if (strncmp(mode, "out", 3) == 0)
		siglongjmp(loop_env, 1); /* the request timed out */
	else {
		sigjmp_buf local;

		/* a jump that stays inside the handler */
		if (sigsetjmp(local, 1) == 0)
			siglongjmp(local, 1);
		read_request(side_srv);
		side_saw_own = ctx_is(3);
	}
}

static void *
run(void *arg)
{
	/* a signal stack in this frame: on the thread's stack, above every
	 * frame of the shim's that the handler interrupts */
	char altstack[65536];
	struct sigaction sa = {.sa_handler = on_usr1};
	stack_t before = {.ss_flags = SS_DISABLE};
	int srv, cli, srv2, cli2, side_cli;

	(void)arg;
	if (strstr(mode, "alt")) {
		stack_t ss = {.ss_sp = altstack, .ss_size = sizeof(altstack)};

		if (sigaltstack(&ss, &before) < 0)
			fail("sigaltstack");
		sa.sa_flags = SA_ONSTACK;
	}
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) < 0)
		fail("sigaction");
	pair(&srv, &cli);
	pair(&side_srv, &side_cli);
	send_request(side_cli, 3);
	send_request(cli, 1);
	armed_tid = (pid_t)syscall(SYS_gettid);
	if (sigsetjmp(loop_env, 1) == 0) {
		read_request(srv);
		if (!raised)
			fail("pthread_setspecific() was not called in the read (no "
			     "shim?)");
		if (strncmp(mode, "out", 3) == 0)
			fail("the handler returned");
		if (side_saw_own != 0 && shim)
			fail("the handler's read published while the interrupted build "
			     "was in progress");
		if (!ctx_is(1))
			fail("the interrupted read's request has no context");
	} else {
		/* timed out: the request is given up, a new connection */
		if (!raised)
			fail("jumped without the signal");
		close(srv);
		close(cli);
		pair(&srv2, &cli2);
		send_request(cli2, 2);
		read_request(srv2);
		if (!ctx_is(2))
			fail("no context for the request after the jump");
		close(srv2);
		close(cli2);
	}
	/* the signal stack dies with this frame: the one before it back (a
	 * sanitizer's own, which it takes down when the thread ends, and
	 * cannot while the thread's stack pointer is inside ours) */
	if (strstr(mode, "alt") && sigaltstack(&before, NULL) < 0)
		fail("sigaltstack");
	return NULL;
}

int
main(int argc, char **argv)
{
	pthread_t t;

	if (argc != 2 ||
	    (strcmp(argv[1], "out") != 0 && strcmp(argv[1], "outalt") != 0 &&
	     strcmp(argv[1], "inside") != 0 && strcmp(argv[1], "insidealt") != 0)) {
		fprintf(stderr, "usage: hold-jump out|outalt|inside|insidealt\n");
		return 64;
	}
	mode = argv[1];
	shim = dlsym(RTLD_DEFAULT, OTEL_THREAD_CTX_SYMBOL) != NULL;
	if (!shim)
		fail("no otel_thread_ctx_v1: run under the shim");
	if (!real_setspecific)
		bind_setspecific();
	if (!real_setspecific)
		fail("no pthread_setspecific after ours");
	lsock = listen_loopback(8, SOCK_CLOEXEC, &srv_addr);
	if (lsock < 0)
		fail("listen");
	/* a thread of its own: its first publication is the read's */
	pthread_create(&t, NULL, run, NULL);
	pthread_join(t, NULL);
	printf("RESULT %s ok\n", mode);
	return 0;
}
