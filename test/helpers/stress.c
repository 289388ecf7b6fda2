/* SPDX-License-Identifier: Apache-2.0 */
/* Load and races for the shim's hooks (test-preload-stress.c); no tracing
 * code: it only looks at its own thread's published context the way an
 * in-process reader would (ctxobs.h).  Each mode prints one line
 *   RESULT <mode> n=<done> bad=<mismatches> ms=<wall> rss0_kb=<> rss1_kb=<>
 * (rss0 after a warm-up, rss1 at the end) and exits 0 if bad is 0.
 *
 *   stress conns N      2 server threads accept on one listening socket,
 *                       2 clients make N connections, one request each
 *                       (traceparent with trace-id = the request number),
 *                       reset by the client (no TIME_WAIT): accepted fds
 *                       are reused all the time.  A server thread checks
 *                       that its context is the request's trace when it
 *                       has read the head.
 *   stress forks N      4 threads fork N times in all: children that exec
 *                       /bin/true (execv, execve, posix_spawn, vfork +
 *                       execv), that start and join a thread, that fork
 *                       again; every child must exit 0.
 *   stress sigread N    the main thread reads N pipelined requests from a
 *                       socket (written in 1..13-byte pieces) while a
 *                       100 us timer signal's handler recv()s and read()s
 *                       other server connections that carry requests too,
 *                       and answers each of those once it has read its
 *                       head; every request must arrive intact and the
 *                       main thread must see each one's trace as its
 *                       context.
 *   stress closerace N  N rounds: 4 threads block in read()/recv() on
 *                       accepted connections while another thread closes
 *                       those fds, new connections take the same numbers,
 *                       and a request on each must give its own trace.
 *   stress sample N     N keep-alive requests, two at a time in flight
 *                       (every fourth without a traceparent), while a 17 us timer signal on the
 *                       serving thread reads its record as a sampling
 *                       profiler would: every record marked valid must
 *                       be one request's whole context.
 *   stress sigjmp N     a legacy iterative server: the main thread
 *                       accepts, reads one request head under a request
 *                       timeout and answers; a 13 us timer signal's
 *                       handler siglongjmp()s back to the accept loop
 *                       whenever it lands inside that read (the
 *                       alarm() + sigsetjmp() pattern), and the server
 *                       closes the connection; the client sends the
 *                       request again on a new one (twice at most per
 *                       request).  Every head read
 *                       whole must show its trace as the context, also
 *                       after a jump out of the shim's own processing.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ctxobs.h"
#include "listen-loopback.h"

extern char **environ;

static atomic_ulong bad, ctx_bad, done;
static bool shim; /* otel_thread_ctx_v1 exists: check contexts */
static unsigned n_total;
static struct sockaddr_in srv_addr;
static int lsock;

static long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

static long
rss_kb(void)
{
	/* read(2) into the stack, not stdio: the forks mode samples this
	 * while other threads fork, and a malloc() racing a fork() leaves
	 * the child a held allocator lock under ASan (gcc 12's runtime takes
	 * none of its locks around fork; google/sanitizers#1814) */
	char buf[4096], *p;
	ssize_t n = 0, r;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	while (n < (ssize_t)sizeof(buf) - 1 &&
	       (r = read(fd, buf + n, sizeof(buf) - 1 - (size_t)n)) > 0)
		n += r;
	close(fd);
	buf[n] = '\0';
	p = strstr(buf, "\nVmRSS:");
	return p ? strtol(p + 7, NULL, 10) : -1;
}

/* A failure: counted, the first few described on stderr. */
#define mismatch(...)                                 \
	do {                                          \
		if (atomic_fetch_add(&bad, 1) < 5)    \
			fprintf(stderr, __VA_ARGS__); \
	} while (0)

/* The trace-id of request i: 16 bytes, the last 8 = i + 1. */
static void
trace_of(unsigned long i, char hex[33])
{
	snprintf(hex, 33, "4bf92f3577b34da6%016lx", i + 1);
}

/* Is the calling thread's context the trace of request i?  (Always true
 * without the shim.) */
static bool
ctx_is(unsigned long i)
{
	const struct otel_thread_ctx_record *r = ctxobs_record();
	uint64_t v = 0;
	int k;

	if (!shim)
		return true;
	if (!r || r->valid != 1)
		return false;
	for (k = 8; k < 16; k++)
		v = v << 8 | r->trace_id[k];
	return v == i + 1;
}

static int
listen_any(void)
{
	int s = listen_loopback(256, SOCK_CLOEXEC, &srv_addr);

	if (s < 0) {
		perror("listen");
		exit(2);
	}
	return s;
}

static int
connect_srv(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct linger lg = {1, 0};

	if (fd < 0 || connect(fd, (struct sockaddr *)&srv_addr, sizeof(srv_addr)) < 0) {
		perror("connect");
		exit(2);
	}
	/* close() sends a reset: no TIME_WAIT, ports never run out */
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	return fd;
}

static void
write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t r = write(fd, p, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			perror("write");
			exit(2);
		}
		p += r;
		n -= (size_t)r;
	}
}

static size_t
request(char *buf, size_t cap, unsigned long i)
{
	char hex[33];

	trace_of(i, hex);
	return (size_t)snprintf(buf, cap,
				"GET /r%lu HTTP/1.1\r\nHost: x\r\n"
				"traceparent: 00-%s-00f067aa0ba902b7-01\r\n\r\n",
				i, hex);
}

/* Read one request head from fd (blocking, byte runs); returns its number
 * or -1 at EOF/error. */
static long
read_head(int fd, bool use_recv)
{
	char buf[512];
	size_t len = 0;

	for (;;) {
		ssize_t r = use_recv ? recv(fd, buf + len, sizeof(buf) - 1 - len, 0)
				     : read(fd, buf + len, sizeof(buf) - 1 - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		len += (size_t)r;
		buf[len] = '\0';
		if (strstr(buf, "\r\n\r\n"))
			return strncmp(buf, "GET /r", 6) == 0
				       ? strtol(buf + 6, NULL, 10)
				       : -2;
		if (len == sizeof(buf) - 1)
			return -2;
	}
}

/* ---- conns ---- */

static void *
conns_server(void *arg)
{
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

	(void)arg;
	for (;;) {
		int fd = accept4(lsock, NULL, NULL, SOCK_CLOEXEC);
		long i;
		char b;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return NULL; /* listening socket shut down */
		}
		i = read_head(fd, (fd & 1) != 0);
		if (i >= 0) {
			if (!ctx_is((unsigned long)i))
				mismatch(
					"conns: request %lu on fd %lu: wrong context\n",
					(unsigned long)i, (unsigned long)fd);
			write_all(fd, resp, sizeof(resp) - 1);
			/* the client resets: read until then */
			while (read(fd, &b, 1) > 0)
				;
		} else {
			mismatch("conns: bad head on fd %lu (%lu)\n", (unsigned long)fd,
				 (unsigned long)-i);
		}
		close(fd);
	}
}

static void *
conns_client(void *arg)
{
	unsigned long first = (unsigned long)arg, i;
	char req[256], resp[256];

	for (i = first; i < n_total; i += 2) {
		int fd = connect_srv();
		size_t n = request(req, sizeof(req), i), got = 0;

		write_all(fd, req, n);
		while (got < 40) {
			ssize_t r = read(fd, resp + got, sizeof(resp) - got);

			if (r <= 0)
				break;
			got += (size_t)r;
		}
		if (got < 40 || memcmp(resp + got - 2, "ok", 2) != 0)
			mismatch("conns: request %lu: short answer (%lu bytes)\n", i,
				 (unsigned long)got);
		close(fd);
		atomic_fetch_add(&done, 1);
	}
	return NULL;
}

static void
mode_conns(long *rss0)
{
	pthread_t s[2], c[2];
	int k;

	lsock = listen_any();
	for (k = 0; k < 2; k++)
		pthread_create(&s[k], NULL, conns_server, NULL);
	for (k = 0; k < 2; k++)
		pthread_create(&c[k], NULL, conns_client, (void *)(long)k);
	while (atomic_load(&done) < n_total / 10 + 1 && atomic_load(&done) < n_total)
		usleep(1000);
	*rss0 = rss_kb();
	for (k = 0; k < 2; k++)
		pthread_join(c[k], NULL);
	shutdown(lsock, SHUT_RDWR);
	for (k = 0; k < 2; k++)
		pthread_join(s[k], NULL);
	close(lsock);
}

/* ---- forks ---- */

static void *
child_thread(void *arg)
{
	return arg;
}

static pid_t __attribute__((noinline)) vfork_true(void)
{
	char *const tru[] = {"/bin/true", NULL};
	pid_t pid = vfork();

	if (pid == 0) {
		execv(tru[0], tru);
		_exit(127);
	}
	return pid;
}

/* No thread starts or exits while another forks: the forkers and the main
 * thread meet before the first fork and after the last.  A thread being
 * set up or torn down (its TLS, ASan's thread state and allocator cache)
 * is in the allocator, whose lock a child must not inherit held (see
 * rss_kb()); case 4 children allocate. */
static pthread_barrier_t forks_gate;

static void *
forker(void *arg)
{
	unsigned long k = (unsigned long)arg, i;
	char *const tru[] = {"/bin/true", NULL};

	pthread_barrier_wait(&forks_gate);

	for (i = k; i < n_total; i += 4) {
		pid_t pid = -1;
		int st;

		switch (i % 6) {
		case 0:
		case 1:
			pid = fork();
			if (pid == 0) {
				if (i % 6 == 0)
					execv(tru[0], tru);
				else
					execve(tru[0], tru, environ);
				_exit(127);
			}
			break;
		case 2:
			if (posix_spawn(&pid, tru[0], NULL, NULL, tru, environ) != 0)
				pid = -1;
			break;
		case 3:
			pid = vfork_true();
			break;
		case 4:
			pid = fork();
			if (pid == 0) {
				pthread_t t;

				if (pthread_create(&t, NULL, child_thread, NULL) != 0 ||
				    pthread_join(t, NULL) != 0)
					_exit(3);
				_exit(0);
			}
			break;
		default:
			pid = fork();
			if (pid == 0) {
				pid_t g = fork();

				if (g == 0)
					_exit(0);
				if (g < 0 || waitpid(g, &st, 0) != g || st != 0)
					_exit(4);
				_exit(0);
			}
			break;
		}
		if (pid < 0) {
			mismatch("forks: %lu: cannot start (errno %lu)\n", i,
				 (unsigned long)errno);
			continue;
		}
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			mismatch("forks: %lu: child status %#lx\n", i,
				 (unsigned long)st);
		atomic_fetch_add(&done, 1);
	}
	pthread_barrier_wait(&forks_gate);
	return NULL;
}

static void
mode_forks(long *rss0)
{
	pthread_t t[4];
	int k;

	pthread_barrier_init(&forks_gate, NULL, 5);
	for (k = 0; k < 4; k++)
		pthread_create(&t[k], NULL, forker, (void *)(long)k);
	pthread_barrier_wait(&forks_gate);
	while (atomic_load(&done) < n_total / 10 + 1 && atomic_load(&done) < n_total)
		usleep(1000);
	*rss0 = rss_kb();
	pthread_barrier_wait(&forks_gate);
	for (k = 0; k < 4; k++)
		pthread_join(t[k], NULL);
	pthread_barrier_destroy(&forks_gate);
}

/* ---- sigread ---- */

static int sig_fd[2];          /* server ends the handler reads */
static atomic_ulong sig_bytes; /* bytes the handler got */
static atomic_ulong sig_sent;
/* One reader of the handler's connections at a time, as in any server
 * (the timer signal may land on two threads at once): a handler that
 * finds another one running skips its turn. */
static atomic_flag sig_busy = ATOMIC_FLAG_INIT;
static unsigned sig_crlf[2]; /* how much of "\r\n\r\n" ends what was read */

/* Reads what is there (64 bytes at most) from handler connection k and
 * answers every request whose head ends in it, as a server would.
 * Unanswered, each head after the first would wait in the shim as a
 * pipelined request, holding one of the 256 entries of its process-wide
 * pool until the connection closes: thousands of them (one run reads
 * about 1000 heads here, a loaded machine more before its scanner loses
 * the stream to a read it could not see) leave none for the main
 * connection, whose heads then get no context at all (measured: 2000 to
 * 6000 wrong of 20 000 in 4 of 34 runs under load).  That is a test of
 * a connection that never answers, not of a signal handler. */
static ssize_t
sig_serve(int k)
{
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	static const char end[] = "\r\n\r\n";
	char buf[64];
	ssize_t r, i;

	r = k == 0 ? recv(sig_fd[0], buf, sizeof(buf), MSG_DONTWAIT)
		   : read(sig_fd[1], buf, sizeof(buf));
	for (i = 0; i < r; i++) {
		if (buf[i] == end[sig_crlf[k]])
			sig_crlf[k]++;
		else
			sig_crlf[k] = buf[i] == '\r';
		if (sig_crlf[k] < 4)
			continue;
		sig_crlf[k] = 0;
		/* the client end is drained: a failure here is not expected */
		if (k == 0)
			(void)!send(sig_fd[0], resp, sizeof(resp) - 1,
				    MSG_DONTWAIT | MSG_NOSIGNAL);
		else
			(void)!write(sig_fd[1], resp, sizeof(resp) - 1);
	}
	if (r > 0)
		atomic_fetch_add(&sig_bytes, (unsigned long)r);
	return r;
}

static void
on_alarm(int sig)
{
	int saved = errno;

	(void)sig;
	if (!atomic_flag_test_and_set(&sig_busy)) {
		(void)sig_serve(0);
		(void)sig_serve(1);
		atomic_flag_clear(&sig_busy);
	}
	errno = saved;
}

struct feeder {
	int fd;
	unsigned long n;
	bool pieces;
	atomic_ulong *sent;
};

static void *
feeder(void *arg)
{
	struct feeder *f = arg;
	char req[256];
	unsigned long i;
	unsigned seed = 7;

	for (i = 0; i < f->n; i++) {
		size_t n = request(req, sizeof(req), f->pieces ? i : 1000000 + i),
		       off = 0;

		while (off < n) {
			size_t k = f->pieces
					   ? 1 + (seed = seed * 1103515245 + 12345) % 13
					   : n - off;

			if (k > n - off)
				k = n - off;
			write_all(f->fd, req + off, k);
			off += k;
		}
		if (f->sent)
			atomic_fetch_add(f->sent, n);
	}
	shutdown(f->fd, SHUT_WR);
	return NULL;
}

/* An accepted (server-side, tracked) connection and its client end. */
static void
accepted_pair(int *server, int *client)
{
	int one = 1;

	*client = connect_srv();
	setsockopt(*client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	*server = accept4(lsock, NULL, NULL, SOCK_CLOEXEC);
	if (*server < 0) {
		perror("accept");
		exit(2);
	}
}

/* Reads and drops what the server answers. */
static void *
drainer(void *arg)
{
	char b[4096];

	while (read(*(int *)arg, b, sizeof(b)) > 0)
		;
	return NULL;
}

static void
mode_sigread(long *rss0)
{
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	pthread_t td, tdh[2];
	struct itimerval it = {{0, 100}, {0, 100}};
	struct sigaction sa;
	struct feeder fm, fs[2];
	pthread_t tm, ts[2];
	int main_srv, cli[3], k;
	unsigned long i;

	lsock = listen_any();
	accepted_pair(&main_srv, &cli[0]);
	for (k = 0; k < 2; k++) {
		accepted_pair(&sig_fd[k], &cli[1 + k]);
		fcntl(sig_fd[k], F_SETFL, O_NONBLOCK);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	fm = (struct feeder){cli[0], n_total, true, NULL};
	pthread_create(&tm, NULL, feeder, &fm);
	pthread_create(&td, NULL, drainer, &cli[0]);
	for (k = 0; k < 2; k++) {
		pthread_create(&tdh[k], NULL, drainer, &cli[1 + k]);
		fs[k] = (struct feeder){cli[1 + k], n_total / 4 + 1, false, &sig_sent};
		pthread_create(&ts[k], NULL, feeder, &fs[k]);
	}
	setitimer(ITIMER_REAL, &it, NULL);
	/* the main thread: requests split anywhere, read in small pieces.
	 * The timer is blocked from just after each read until the heads it
	 * completed are checked: a handler that reads another connection in
	 * between would switch the thread to it (documented), which says
	 * nothing of the shim but how slow the check is.  The handler still
	 * runs here between the pieces of a head, and inside the reads. */
	{
		char buf[8192], want[256];
		size_t len = 0;
		sigset_t alrm;

		sigemptyset(&alrm);
		sigaddset(&alrm, SIGALRM);
		for (i = 0; i < n_total;) {
			ssize_t r = read(main_srv, buf + len, 1 + (i * 7) % 200);
			int read_errno = errno;
			char *end;

			pthread_sigmask(SIG_BLOCK, &alrm, NULL);
			if (r < 0 && read_errno == EINTR) {
				pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
				continue;
			}
			if (r <= 0) {
				mismatch("sigread: EOF after %lu of %u\n", i, n_total);
				break;
			}
			len += (size_t)r;
			while ((end = memmem(buf, len, "\r\n\r\n", 4)) != NULL) {
				size_t hl = (size_t)(end + 4 - buf), wl;

				wl = request(want, sizeof(want), i);
				if (hl != wl || memcmp(buf, want, wl) != 0)
					mismatch("sigread: request %lu corrupted (%lu "
						 "bytes)\n",
						 i, (unsigned long)hl);
				else if (!ctx_is(i) &&
					 atomic_fetch_add(&ctx_bad, 1) < 3)
					fprintf(stderr,
						"sigread: request %lu: context of "
						"another connection\n",
						i);
				/* answered: the next head is the next request */
				write_all(main_srv, resp, sizeof(resp) - 1);
				memmove(buf, buf + hl, len - hl);
				len -= hl;
				i++;
				atomic_fetch_add(&done, 1);
				if (i == n_total / 10 + 1)
					*rss0 = rss_kb();
			}
			pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
		}
		pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
	}
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
	pthread_join(tm, NULL);
	shutdown(main_srv, SHUT_WR);
	pthread_join(td, NULL);
	for (k = 0; k < 2; k++)
		pthread_join(ts[k], NULL);
	/* what the handler left unread, served the same way (a handler may
	 * still run on another thread) */
	while (atomic_flag_test_and_set(&sig_busy))
		sched_yield();
	for (k = 0; k < 2; k++) {
		/* up to the feeder's EOF: a non-blocking read can find the
		 * queue empty while the rest is still on its way */
		for (;;) {
			struct pollfd p = {sig_fd[k], POLLIN, 0};
			ssize_t r = sig_serve(k);

			if (r > 0 || (r < 0 && errno == EINTR))
				continue;
			if (r == 0 || errno != EAGAIN || poll(&p, 1, 10000) <= 0)
				break;
		}
		shutdown(sig_fd[k], SHUT_WR);
		pthread_join(tdh[k], NULL);
	}
	atomic_flag_clear(&sig_busy);
	if (atomic_load(&sig_bytes) != atomic_load(&sig_sent))
		mismatch("sigread: the handler read %lu of %lu bytes\n",
			 atomic_load(&sig_bytes), atomic_load(&sig_sent));
	for (k = 0; k < 3; k++)
		close(cli[k]);
	close(main_srv);
	close(sig_fd[0]);
	close(sig_fd[1]);
	close(lsock);
}

/* ---- sample ---- */

/* What a sampling profiler sees (the eBPF profiler reads the interrupted
 * thread's record from its perf event): a timer signal at a random point
 * of this thread's work, the shim's publications included, reads the
 * record through the thread's otel_thread_ctx_v1 as such a reader would,
 * without any call.  A record marked valid must be one request's whole
 * context (its trace, its url.path and its method, never a mix of two,
 * never a partly written attribute list), and a request near the one
 * being served. */
static const struct otel_thread_ctx_record *const *smp_slot;
static volatile unsigned long smp_n, smp_valid, smp_bad;
static volatile unsigned long smp_cur; /* the request being served */
static volatile int smp_why;
static uint8_t smp_copy[TREC_HEADER_SIZE + 64];

static uint64_t
be64(const uint8_t *p)
{
	uint64_t v = 0;
	int k;

	for (k = 0; k < 8; k++)
		v = v << 8 | p[k];
	return v;
}

/* 0 if r is one request's context, else why not. */
static int
sample_check(const struct otel_thread_ctx_record *r)
{
	unsigned size = r->attrs_data_size, off = 0;
	long path = -1;
	bool get = false;

	if (size > TREC_ATTRS_MAX)
		return 1;
	while (off + 2 <= size) {
		const uint8_t *v = r->attrs_data + off + 2;
		unsigned len = r->attrs_data[off + 1], k;

		if (off + 2 + len > size)
			return 2;
		if (len == 3 && memcmp(v, "GET", 3) == 0)
			get = true;
		for (k = 2; len > 2 && v[0] == '/' && v[1] == 'r' && k < len; k++)
			path = (k == 2 ? 0 : path * 10) + (v[k] - '0');
		off += 2 + len;
	}
	if (off != size)
		return 2;
	if (!get || path < 0)
		return 3;
	/* the request being served, the one before it (answered, until the
	 * shim lets it go) or the one after it (pipelined, handed over at
	 * the response's last byte): never an older one */
	if ((unsigned long)path + 1 < smp_cur || (unsigned long)path > smp_cur + 1)
		return 7;
	if (be64(r->span_id) == 0)
		return 4;
	/* request i carries trace 4bf92f3577b34da6<i + 1>, but every fourth
	 * carries none and gets a new random trace */
	if (be64(r->trace_id) != 0x4bf92f3577b34da6ULL)
		return path % 4 == 3 ? 0 : 6;
	if (path % 4 == 3 || be64(r->trace_id + 8) != (uint64_t)path + 1)
		return 5;
	return 0;
}

static void
on_sample(int sig)
{
	const struct otel_thread_ctx_record *r =
		*(const struct otel_thread_ctx_record *const volatile *)smp_slot;
	int why;

	(void)sig;
	smp_n++;
	if (!r || r->valid != 1)
		return;
	smp_valid++;
	why = sample_check(r);
	if (why && smp_bad++ == 0) {
		smp_why = why;
		memcpy(smp_copy, r, sizeof(smp_copy));
	}
}

/* Keeps two requests in flight (pipelined), so that the shim also
 * publishes a request's context while the one before it is published. */
static void *
sample_client(void *arg)
{
	int fd = *(int *)arg;
	char req[256], resp[256];
	unsigned long sent = 0, answered = 0;
	size_t got = 0;

	while (answered < n_total) {
		char *end;

		while (sent < n_total && sent < answered + 2) {
			size_t n = sent % 4 == 3
					   ? (size_t)snprintf(req, sizeof(req),
							      "GET /r%lu HTTP/1.1\r\n"
							      "Host: x\r\n\r\n",
							      sent)
					   : request(req, sizeof(req), sent);

			write_all(fd, req, n);
			sent++;
		}
		/* responses end in "ok" (Content-Length: 2) */
		while ((end = memmem(resp, got, "\r\n\r\nok", 6)) != NULL) {
			size_t used = (size_t)(end + 6 - resp);

			memmove(resp, resp + used, got - used);
			got -= used;
			answered++;
		}
		if (answered == n_total || (sent < n_total && sent < answered + 2))
			continue;
		{
			ssize_t r = read(fd, resp + got, sizeof(resp) - got);

			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				mismatch("sample: response %lu cut\n", answered);
				return NULL;
			}
			got += (size_t)r;
		}
	}
	return NULL;
}

static void
mode_sample(long *rss0)
{
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	struct sigevent sev = {.sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGPROF};
	/* a period no phase of a request divides evenly */
	struct itimerspec its = {{0, 17011}, {0, 17011}};
	struct sigaction sa = {.sa_handler = on_sample, .sa_flags = SA_RESTART};
	pthread_t tc;
	timer_t timer;
	int srv, cli;
	unsigned long i;
	char buf[1024];
	size_t len = 0;

	if (!shim) {
		fprintf(stderr, "sample: no otel_thread_ctx_v1: run under the shim\n");
		exit(2);
	}
	smp_slot = dlsym(RTLD_DEFAULT, OTEL_THREAD_CTX_SYMBOL);
	lsock = listen_any();
	accepted_pair(&srv, &cli);
	sev._sigev_un._tid = gettid(); /* sigev_notify_thread_id: glibc 2.41 */
	if (sigaction(SIGPROF, &sa, NULL) ||
	    timer_create(CLOCK_MONOTONIC, &sev, &timer) ||
	    timer_settime(timer, 0, &its, NULL)) {
		perror("sample: timer");
		exit(2);
	}
	pthread_create(&tc, NULL, sample_client, &cli);
	/* reads of any size, which may end inside the next head or hold
	 * both: the shim's whole-head, split and pipelined paths */
	for (i = 0; i < n_total;) {
		char *end = memmem(buf, len, "\r\n\r\n", 4);
		ssize_t r;

		if (end) {
			size_t used = (size_t)(end + 4 - buf);

			if (strncmp(buf, "GET /r", 6) != 0 ||
			    strtoul(buf + 6, NULL, 10) != i) {
				mismatch("sample: request %lu not read whole\n", i);
				break;
			}
			write_all(srv, resp, sizeof(resp) - 1);
			memmove(buf, buf + used, len - used);
			len -= used;
			atomic_fetch_add(&done, 1);
			if (i++ == n_total / 10)
				*rss0 = rss_kb();
			smp_cur = i;
			continue;
		}
		r = read(srv, buf + len, 1 + (i * 37) % (sizeof(buf) - 1 - len));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			mismatch("sample: connection ended at request %lu\n", i);
			break;
		}
		len += (size_t)r;
	}
	timer_delete(timer);
	pthread_join(tc, NULL);
	fprintf(stderr, "sample: %lu samples, %lu of a valid record\n", smp_n,
		smp_valid);
	if (smp_bad) {
		char hex[2 * sizeof(smp_copy) + 1];
		size_t k;

		for (k = 0; k < sizeof(smp_copy); k++)
			snprintf(hex + 2 * k, 3, "%02x", smp_copy[k]);
		mismatch("sample: %lu valid records were not one request's (first: "
			 "reason %d, %s)\n",
			 smp_bad, smp_why, hex);
	}
	/* a test that samples nothing proves nothing */
	if (smp_valid < n_total / 10)
		mismatch("sample: only %lu samples of a valid record\n", smp_valid);
	close(cli);
	close(srv);
	close(lsock);
}

/* ---- closerace ---- */

#define RACERS 4

struct racer {
	int fd;
	pthread_t th;
};

static void *
racer_read(void *arg)
{
	struct racer *r = arg;
	char b[64];

	/* blocks; the fd is closed (and maybe reused) under it */
	(void)(r->fd & 1 ? recv(r->fd, b, sizeof(b), 0) : read(r->fd, b, sizeof(b)));
	return NULL;
}

static void
mode_closerace(long *rss0)
{
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	unsigned long round;

	lsock = listen_any();
	for (round = 0; round < n_total; round++) {
		struct racer rc[RACERS];
		int cli[RACERS], k;

		for (k = 0; k < RACERS; k++) {
			accepted_pair(&rc[k].fd, &cli[k]);
			pthread_create(&rc[k].th, NULL, racer_read, &rc[k]);
		}
		/* close under the readers (shutdown wakes them afterwards) */
		for (k = 0; k < RACERS; k++) {
			int fd = rc[k].fd;

			if (round & 1)
				usleep(50);
			shutdown(fd, SHUT_RDWR);
			close(fd);
		}
		for (k = 0; k < RACERS; k++) {
			pthread_join(rc[k].th, NULL);
			close(cli[k]);
		}
		/* the same fd numbers again: each request its own context */
		for (k = 0; k < RACERS; k++) {
			int srv, c;
			char req[256];
			size_t n;
			long i;

			accepted_pair(&srv, &c);
			n = request(req, sizeof(req),
				    round * RACERS + (unsigned long)k);
			write_all(c, req, n);
			i = read_head(srv, k & 1);
			if (i != (long)(round * RACERS + (unsigned long)k) ||
			    !ctx_is((unsigned long)i))
				mismatch("closerace: round %lu: wrong request or "
					 "context "
					 "(%lu)\n",
					 round, (unsigned long)i);
			write_all(srv, resp, sizeof(resp) - 1);
			close(srv);
			close(c);
		}
		atomic_fetch_add(&done, 1);
		if (round == n_total / 10)
			*rss0 = rss_kb();
	}
	close(lsock);
}

/* ---- sigjmp ---- */

static sigjmp_buf sj_env;
static volatile sig_atomic_t sj_armed, sj_tries;
static volatile unsigned long sj_ticks, sj_jumps;

static void
on_sigjmp(int sig)
{
	(void)sig;
	sj_ticks++;
	/* a request given up twice goes through the third time: the run
	 * always ends, however slow the host */
	if (!sj_armed || sj_tries >= 2)
		return;
	/* the request timed out: abandon it, whatever it was doing */
	sj_armed = 0;
	sj_tries++;
	sj_jumps++;
	siglongjmp(sj_env, 1);
}

static void *
sigjmp_client(void *arg)
{
	char req[256], resp[256];
	unsigned long i;

	(void)arg;
	for (i = 0; i < n_total; i++) {
		size_t n = request(req, sizeof(req), i);

		for (;;) {
			int fd = connect_srv();
			size_t got = 0;
			ssize_t r;

			write_all(fd, req, n);
			while ((r = read(fd, resp + got, sizeof(resp) - got)) > 0)
				got += (size_t)r;
			close(fd);
			if (got >= 40 && memcmp(resp + got - 2, "ok", 2) == 0)
				break;
			/* timed out and closed by the server: again */
		}
	}
	return NULL;
}

static void
mode_sigjmp(long *rss0)
{
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	struct sigevent sev = {.sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGALRM};
	struct itimerspec its = {{0, 13007}, {0, 13007}};
	struct sigaction sa = {.sa_handler = on_sigjmp};
	/* static: kept across siglongjmp() */
	static int fd;
	static unsigned long i, first_bad = ~0ul, ok_after, none, other, jumps0;
	pthread_t tc;
	timer_t timer;

	if (getenv("STRESS_SIGJMP_NS")) /* experiments */
		its.it_interval.tv_nsec = its.it_value.tv_nsec =
			strtol(getenv("STRESS_SIGJMP_NS"), NULL, 10);
	lsock = listen_any();
	sev._sigev_un._tid = gettid();
	if (sigaction(SIGALRM, &sa, NULL) ||
	    timer_create(CLOCK_MONOTONIC, &sev, &timer) ||
	    timer_settime(timer, 0, &its, NULL)) {
		perror("sigjmp: timer");
		exit(2);
	}
	pthread_create(&tc, NULL, sigjmp_client, NULL);
	for (i = 0; i < n_total;) {
		long k;

		do
			fd = accept4(lsock, NULL, NULL, SOCK_CLOEXEC);
		while (fd < 0 && (errno == EINTR || errno == ECONNABORTED));
		if (fd < 0) {
			perror("accept");
			exit(2);
		}
		if (sigsetjmp(sj_env, 1)) {
			/* timed out: drop the connection */
			close(fd);
			continue;
		}
		sj_armed = 1;
		k = read_head(fd, false);
		sj_armed = 0;
		if (k != (long)i) {
			mismatch("sigjmp: request %lu: read %ld\n", i, k);
			break;
		}
		if (!ctx_is(i)) {
			const struct otel_thread_ctx_record *r = ctxobs_record();

			if (first_bad == ~0ul) {
				first_bad = i;
				jumps0 = sj_jumps;
			}
			atomic_fetch_add(&ctx_bad, 1);
			if (!r || r->valid != 1)
				none++;
			else
				other++;
		} else if (first_bad != ~0ul) {
			ok_after++;
		}
		write_all(fd, resp, sizeof(resp) - 1);
		close(fd);
		sj_tries = 0;
		atomic_fetch_add(&done, 1);
		if (i++ == n_total / 10)
			*rss0 = rss_kb();
	}
	timer_delete(timer);
	pthread_join(tc, NULL);
	fprintf(stderr,
		"sigjmp: %lu ticks, %lu jumps; %lu requests without their context "
		"(%lu none, %lu another), the first at request %ld after %lu jumps, "
		"%lu right after it\n",
		sj_ticks, sj_jumps, atomic_load(&ctx_bad), none, other,
		first_bad == ~0ul ? -1L : (long)first_bad, jumps0, ok_after);
	if (atomic_load(&ctx_bad))
		mismatch("sigjmp: %lu requests without their context\n",
			 atomic_load(&ctx_bad));
	close(lsock);
}

int
main(int argc, char **argv)
{
	long t0, rss0 = -1;
	const char *mode;

	if (argc != 3) {
		fprintf(stderr, "usage: stress "
				"conns|forks|sigread|closerace|sample|sigjmp N\n");
		return 64;
	}
	mode = argv[1];
	shim = dlsym(RTLD_DEFAULT, OTEL_THREAD_CTX_SYMBOL) != NULL;
	n_total = (unsigned)strtoul(argv[2], NULL, 10);
	signal(SIGPIPE, SIG_IGN);
	t0 = now_ms();
	if (strcmp(mode, "conns") == 0)
		mode_conns(&rss0);
	else if (strcmp(mode, "forks") == 0)
		mode_forks(&rss0);
	else if (strcmp(mode, "sigread") == 0)
		mode_sigread(&rss0);
	else if (strcmp(mode, "closerace") == 0)
		mode_closerace(&rss0);
	else if (strcmp(mode, "sample") == 0)
		mode_sample(&rss0);
	else if (strcmp(mode, "sigjmp") == 0)
		mode_sigjmp(&rss0);
	else
		return 64;
	printf("RESULT %s n=%lu bad=%lu ctx_bad=%lu ms=%ld rss0_kb=%ld rss1_kb=%ld\n",
	       mode, atomic_load(&done), atomic_load(&bad), atomic_load(&ctx_bad),
	       now_ms() - t0, rss0, rss_kb());
	return atomic_load(&bad) ? 1 : 0;
}
