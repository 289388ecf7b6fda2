/* SPDX-License-Identifier: Apache-2.0 */
/* A legacy per-connection HTTP/1.1 daemon, the way inetd, tcpserver and
 * systemd socket activation (Accept=yes) run them: it never calls
 * accept(), its connection is there when it starts.  No library, no
 * tracing code: read() and write() on the descriptors it was given.
 *
 *   inetd-daemon inetd   requests read from fd 0, responses written to
 *                        fd 1 (the same socket: systemd-socket-activate
 *                        --inetd, inetd, tcpserver)
 *   inetd-daemon fd3     requests read from and responses written to fd 3
 *                        (systemd-socket-activate -a: LISTEN_FDS=1)
 *
 * Keep-alive loop: for each request head it prints "IN <pid> <tid>" on
 * stderr (the test reads systemd-socket-activate's stderr) and waits for
 * SIGUSR1 (a minute at most) before it writes the response, so that the
 * test can read its published context with ctxdump meanwhile.  At end of stream it closes
 * the connection's descriptors, prints "CLOSED <pid>", waits for SIGUSR1
 * once more and exits 0. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static sigset_t usr1;

static void
say(const char *what)
{
	char line[96];
	int n = snprintf(line, sizeof(line), "%s %ld %ld\n", what, (long)getpid(),
			 (long)syscall(SYS_gettid));

	if (write(2, line, (size_t)n) != n)
		_exit(3);
}

/* At most a minute: a test that failed sends nothing, and its daemon must
 * not stay behind. */
static void
wait_go(void)
{
	struct timespec t = {.tv_sec = 60};

	while (sigtimedwait(&usr1, NULL, &t) < 0)
		if (errno != EINTR)
			_exit(4);
}

static void
write_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t r = write(fd, s, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			_exit(5);
		s += r;
		n -= (size_t)r;
	}
}

int
main(int argc, char **argv)
{
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	bool fd3 = argc > 1 && strcmp(argv[1], "fd3") == 0;
	int in = fd3 ? 3 : 0, out = fd3 ? 3 : 1;
	char buf[4096];
	size_t len = 0;

	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, NULL);
	for (;;) {
		char *end;
		ssize_t r;

		buf[len] = '\0';
		end = strstr(buf, "\r\n\r\n");
		if (end) {
			size_t used = (size_t)(end + 4 - buf);

			say("IN");
			wait_go();
			write_all(out, resp, sizeof(resp) - 1);
			memmove(buf, buf + used, len - used);
			len -= used;
			continue;
		}
		if (len == sizeof(buf) - 1)
			return 6;
		r = read(in, buf + len, sizeof(buf) - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return 7;
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close(in);
	if (out != in)
		close(out);
	say("CLOSED");
	wait_go();
	return 0;
}
