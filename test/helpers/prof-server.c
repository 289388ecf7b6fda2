/* SPDX-License-Identifier: Apache-2.0 */
/* prof-server: a thread-per-connection HTTP/1.1 server whose handler
 * spends known time in named functions, for `ctxdump record` tests.  No
 * tracing code: run under libctxshim.so, the shim's socket level gives
 * each request's thread its context.
 *
 *   GET /cpu/<ms>              prof_cpu_work() spins for <ms> ms
 *   GET /sleep/<ms>            prof_sleep_work() sleeps (nanosleep) <ms> ms
 *   GET /mixed/<cpu>/<sleep>   both, CPU first
 *   GET /vfork/<ms>            vfork()s a child that sleeps <ms> ms and
 *                              exits: meanwhile the handler's thread
 *                              cannot be stopped (a reader's stops time out)
 *   anything else              answered at once
 *
 * Prints "READY <pid> <port>", then for every answered request
 * "DONE <tid> <path> <cpu_ns> <sleep_ns>" with the time each function
 * really took (CLOCK_MONOTONIC); the response body is the same line.
 * Keep-alive; exits when stdin is closed. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "listen-loopback.h"

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The functions the recording must find by name: global, never inlined
 * or tail-called. */
__attribute__((noinline, noclone)) uint64_t prof_cpu_work(unsigned ms);
__attribute__((noinline, noclone)) uint64_t prof_sleep_work(unsigned ms);
__attribute__((noinline, noclone)) void
prof_handle_request(int fd, const char *path, size_t len);

static volatile uint64_t sink;

uint64_t
prof_cpu_work(unsigned ms)
{
	uint64_t t0 = now_ns(), end = t0 + (uint64_t)ms * 1000000u, x = t0 | 1;
	unsigned i;

	do {
		/* mostly our own instructions, a clock read now and then */
		for (i = 0; i < 20000; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
		sink = x;
	} while (now_ns() < end);
	__asm__ volatile("" ::: "memory");
	return now_ns() - t0;
}

uint64_t
prof_sleep_work(unsigned ms)
{
	uint64_t t0 = now_ns(), end = t0 + (uint64_t)ms * 1000000u, now;

	while ((now = now_ns()) < end) {
		struct timespec ts = {(time_t)((end - now) / 1000000000u),
				      (long)((end - now) % 1000000000u)};

		nanosleep(&ts, NULL);
	}
	__asm__ volatile("" ::: "memory");
	return now_ns() - t0;
}

/* vfork() a child that sleeps ms and exits; returns the time taken. */
static __attribute__((noinline)) uint64_t
prof_vfork_wait(unsigned ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
	uint64_t t0 = now_ns();
	pid_t pid = vfork();

	if (pid == 0) {
		nanosleep(&ts, NULL);
		_exit(0);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
	return now_ns() - t0;
}

static void
write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t r = write(fd, p, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return;
		p += r;
		n -= (size_t)r;
	}
}

void
prof_handle_request(int fd, const char *path, size_t len)
{
	unsigned a = 0, b = 0;
	uint64_t cpu = 0, slp = 0;
	char body[512], resp[768];
	int n;

	if (sscanf(path, "/cpu/%u", &a) == 1) {
		cpu = prof_cpu_work(a);
	} else if (sscanf(path, "/sleep/%u", &a) == 1) {
		slp = prof_sleep_work(a);
	} else if (sscanf(path, "/mixed/%u/%u", &a, &b) == 2) {
		cpu = prof_cpu_work(a);
		slp = prof_sleep_work(b);
	} else if (sscanf(path, "/vfork/%u", &a) == 1) {
		slp = prof_vfork_wait(a);
	}
	n = snprintf(body, sizeof(body), "DONE %ld %.*s %" PRIu64 " %" PRIu64 "\n",
		     (long)syscall(SYS_gettid), (int)len, path, cpu, slp);
	pthread_mutex_lock(&out_lock);
	fputs(body, stdout);
	fflush(stdout);
	pthread_mutex_unlock(&out_lock);
	n = snprintf(resp, sizeof(resp),
		     "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
		     "Content-Length: %d\r\n\r\n%s",
		     n, body);
	write_all(fd, resp, (size_t)n);
	__asm__ volatile("" ::: "memory");
}

static void *
conn_thread(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[8192];
	size_t len = 0;

	for (;;) {
		char *end, *sp1, *sp2;
		ssize_t r;

		end = len >= 4 ? memmem(buf, len, "\r\n\r\n", 4) : NULL;
		if (!end) {
			if (len == sizeof(buf))
				break;
			r = read(fd, buf + len, sizeof(buf) - len);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
			len += (size_t)r;
			continue;
		}
		/* "METHOD SP target SP version" */
		sp1 = memchr(buf, ' ', (size_t)(end - buf));
		sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(end - sp1 - 1)) : NULL;
		if (sp1 && sp2) {
			*sp2 = '\0';
			prof_handle_request(fd, sp1 + 1, (size_t)(sp2 - sp1 - 1));
		}
		end += 4;
		len -= (size_t)(end - buf);
		memmove(buf, end, len);
	}
	close(fd);
	return NULL;
}

static void *
accept_thread(void *arg)
{
	int lfd = (int)(intptr_t)arg;

	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		pthread_t th;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return NULL;
		}
		if (pthread_create(&th, NULL, conn_thread, (void *)(intptr_t)fd) != 0) {
			close(fd);
			continue;
		}
		pthread_detach(th);
	}
}

int
main(void)
{
	struct sockaddr_in sa;
	pthread_t th;
	char buf[64];
	int lfd;

	lfd = listen_loopback(64, SOCK_CLOEXEC, &sa);
	if (lfd < 0) {
		perror("prof-server: listen");
		return 1;
	}
	if (pthread_create(&th, NULL, accept_thread, (void *)(intptr_t)lfd) != 0)
		return 1;
	printf("READY %d %d\n", (int)getpid(), (int)ntohs(sa.sin_port));
	fflush(stdout);
	while (read(0, buf, sizeof(buf)) > 0)
		;
	return 0;
}
