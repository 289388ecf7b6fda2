/* SPDX-License-Identifier: Apache-2.0 */
/* curl-client: a libcurl program with no tracing code, built once per
 * Debian libcurl flavour (curl-client-openssl, -gnutls, -nss), for the
 * tests of hooks/hook-curl.c.  It only observes: it prints its thread's
 * published record (otel_thread_ctx_v1, when a shim defines it) before,
 * during (from the header callback) and after each transfer.
 *
 *   curl-client [options] URL
 *     -H LINE    add LINE to the handle's CURLOPT_HTTPHEADER list
 *     -n N       N transfers one after the other on the same handle
 *     -m K       K handles at once through the multi interface
 *     -C         multi: curl_multi_cleanup before removing the handles
 *     -X         multi: curl_easy_cleanup while the handles are still added
 *     -D         also transfer with a curl_easy_duphandle copy (after the
 *                original's transfer, and after freeing the original);
 *                multi: a copy of the first handle made once the handles
 *                are added (and any -L, -N done), transferred with
 *                curl_easy_perform after all the originals are freed
 *     -R         set the headers, curl_easy_reset, then only the URL
 *     -S         CURLOPT_HTTPHEADER set again from inside the transfer
 *     -L LINE    multi: once the handles are added, append LINE to the
 *                -H list (curl_slist_append: its head stays the same)
 *     -N LINE    multi: once the handles are added, give them a new list
 *                with the -N lines instead (CURLOPT_HTTPHEADER again), and
 *                free the old one at once; the new one is "the list" below
 *     -A LINE    after the handle's first transfer (-n), append LINE to the
 *                -H list (curl_slist_append) before the next one
 *     -q         give each handle a CURLOPT_PREREQFUNCTION of its own (it
 *                prints PREREQ ok, or PREREQ bad when its pointer is not
 *                its CURLOPT_PREREQDATA)
 *     -Q LINE    -q, and that callback appends LINE to the -H list the
 *                first time it runs in the handle's last transfer (-n),
 *                or in any handle's (-m): right before libcurl builds the
 *                request
 *     -T         run the transfers on a new thread
 *     -u         give the URL as a CURLU handle (CURLOPT_CURLU)
 *     -p PROTO   CURLOPT_DEFAULT_PROTOCOL (for a URL without a scheme)
 *     -W         sign the requests with CURLOPT_AWS_SIGV4 (a made-up key)
 *     -w         the same with CURLOPT_HTTPAUTH's CURLAUTH_AWS_SIGV4 only
 *     -P PLUGIN  dlopen PLUGIN (RTLD_LOCAL; -G: RTLD_GLOBAL) and call its
 *                plugin_fetch(URL) too: a second libcurl flavour
 *     -r         a relay: first the thread reads a request (traceparent
 *                with trace-id RELAY_TRACE) from a connection of its own,
 *                and the transfers' write callback streams their bodies to
 *                it as its response; the connection is closed at the end
 *     -E         with DURING, run a shell (posix_spawn) that prints
 *                EXECTS <its TRACESTATE, or "none">, and wait for it
 *
 * Output lines: VERSION, BEFORE/DURING/AFTER <trace-hex> <span-hex> (or
 * "none"), LIST <n> <first line> (the application's own list after the
 * transfers, which must be unchanged), DONE <status>. */
#include "config.h"

#include "listen-loopback.h"
#include "thread-record.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>

#define MAX_MULTI 16

static struct curl_slist *app_headers, *late_lines, *new_headers, *between_lines,
	*prereq_lines;
static const char *url, *default_protocol;
static int n_transfers = 1, n_multi;
static bool opt_dup, opt_reset, opt_curlu, opt_multi_cleanup_first,
	opt_easy_cleanup_in_multi;
static bool opt_setopt_inside, opt_prereq, opt_sigv4, opt_sigv4_auth, opt_exec;
static int failures;
/* -r: the relayed request's connection (ours, its client's), and whether
 * its response head went out */
static int relay_fd = -1, relay_peer = -1;
static bool relay_started;

#define RELAY_TRACE "5eed0000000000000000000000000517"

static void
print_record(const char *what)
{
	void **slot = dlsym(RTLD_DEFAULT, "otel_thread_ctx_v1");
	const struct otel_thread_ctx_record *r = slot ? *slot : NULL;
	int i;

	printf("%s ", what);
	if (!r || !r->valid) {
		printf("none\n");
		return;
	}
	for (i = 0; i < 16; i++)
		printf("%02x", r->trace_id[i]);
	printf(" ");
	for (i = 0; i < 8; i++)
		printf("%02x", r->span_id[i]);
	printf("\n");
}

/* -E: what a program executed now gets as TRACESTATE (the shim sets it
 * from the thread's context under CTXSHIM_EXEC_TRACEPARENT=1). */
static void
print_exec_tracestate(void)
{
	char *argv[] = {"/bin/sh", "-c", "echo \"EXECTS ${TRACESTATE:-none}\"", NULL};
	extern char **environ;
	pid_t pid;
	int st;

	fflush(stdout);
	if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) != 0 ||
	    waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		printf("ERROR exec\n");
		failures++;
	}
}

#define XFER_MAGIC 0x78666572u

struct xfer {
	unsigned magic;
	CURL *easy;
	bool seen_header;
	int round; /* transfers started on the handle */
};

static void
append_lines(const struct curl_slist *lines)
{
	for (; lines; lines = lines->next)
		app_headers = curl_slist_append(app_headers, lines->data);
}

/* The application's own pre-request callback (-q, -Q). */
static int
on_prereq(void *arg, char *primary_ip, char *local_ip, int primary_port, int local_port)
{
	static bool appended;
	struct xfer *x = arg;

	(void)primary_ip;
	(void)local_ip;
	(void)primary_port;
	(void)local_port;
	if (!x || x->magic != XFER_MAGIC) {
		printf("PREREQ bad\n");
		failures++;
		return CURL_PREREQFUNC_OK;
	}
	printf("PREREQ ok\n");
	if (!appended && prereq_lines && (n_multi > 0 || x->round == n_transfers)) {
		appended = true;
		append_lines(prereq_lines);
	}
	return CURL_PREREQFUNC_OK;
}

static size_t
on_header(char *buf, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;

	(void)buf;
	if (!x->seen_header) {
		x->seen_header = true;
		print_record("DURING");
		if (opt_exec)
			print_exec_tracestate();
		if (opt_setopt_inside)
			curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, app_headers);
	}
	return size * n;
}

static void
write_all(int fd, const char *p, size_t n)
{
	ssize_t w;

	while (n > 0 && (w = write(fd, p, n)) > 0) {
		p += w;
		n -= (size_t)w;
	}
}

static size_t
on_body(char *buf, size_t size, size_t n, void *arg)
{
	static const char head[] = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n";

	(void)arg;
	if (relay_fd >= 0) {
		if (!relay_started)
			write_all(relay_fd, head, sizeof(head) - 1);
		relay_started = true;
		write_all(relay_fd, buf, size * n);
	}
	return size * n;
}

/* -r: a connection to ourselves, its request read as a server reads one. */
static bool
relay_read(void)
{
	static const char req[] = "GET /relay HTTP/1.1\r\nHost: r\r\ntraceparent: "
				  "00-" RELAY_TRACE "-00f067aa0ba902b7-01\r\n\r\n";
	struct sockaddr_in a;
	int lfd = listen_loopback(1, SOCK_CLOEXEC, &a);
	char buf[512];
	size_t got = 0;
	ssize_t r;

	if (lfd < 0)
		return false;
	relay_peer = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (relay_peer < 0 || connect(relay_peer, (struct sockaddr *)&a, sizeof(a)) < 0)
		return false;
	write_all(relay_peer, req, sizeof(req) - 1);
	relay_fd = accept(lfd, NULL, NULL);
	close(lfd);
	while (relay_fd >= 0 && got < sizeof(req) - 1 &&
	       (r = read(relay_fd, buf, sizeof(buf))) > 0)
		got += (size_t)r;
	return got == sizeof(req) - 1;
}

static void
setup(CURL *easy, struct xfer *x, bool with_headers)
{
	x->magic = XFER_MAGIC;
	x->easy = easy;
	x->seen_header = false;
	x->round = n_multi > 0 ? 1 : 0;
	if (opt_curlu) {
		CURLU *u = curl_url();

		curl_url_set(u, CURLUPART_URL, url, 0);
		curl_easy_setopt(easy, CURLOPT_CURLU, u);
		/* Freed with the handle, found again through CURLINFO_PRIVATE. */
		curl_easy_setopt(easy, CURLOPT_PRIVATE, u);
	} else {
		curl_easy_setopt(easy, CURLOPT_URL, url);
	}
	if (default_protocol)
		curl_easy_setopt(easy, CURLOPT_DEFAULT_PROTOCOL, default_protocol);
	if (opt_sigv4)
		curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:s3");
	if (opt_sigv4_auth)
		curl_easy_setopt(easy, CURLOPT_HTTPAUTH, (long)CURLAUTH_AWS_SIGV4);
	if (opt_sigv4 || opt_sigv4_auth)
		curl_easy_setopt(easy, CURLOPT_USERPWD, "AKIDEXAMPLE:secret");
	if (with_headers && app_headers)
		curl_easy_setopt(easy, CURLOPT_HTTPHEADER, app_headers);
	curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(easy, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(easy, CURLOPT_TIMEOUT, 30L);
	if (opt_prereq) {
		curl_easy_setopt(easy, CURLOPT_PREREQFUNCTION, on_prereq);
		curl_easy_setopt(easy, CURLOPT_PREREQDATA, x);
	}
}

static void
free_curlu(CURL *easy)
{
	char *p = NULL;

	if (opt_curlu && curl_easy_getinfo(easy, CURLINFO_PRIVATE, &p) == CURLE_OK && p)
		curl_url_cleanup((CURLU *)p);
}

static void
perform(CURL *easy, struct xfer *x)
{
	CURLcode rc;

	x->seen_header = false;
	x->round++;
	rc = curl_easy_perform(easy);
	if (rc != CURLE_OK) {
		printf("ERROR %s\n", curl_easy_strerror(rc));
		failures++;
	}
	print_record("AFTER");
}

static void
run_easy(void)
{
	struct xfer x, xd;
	CURL *easy = curl_easy_init(), *dup = NULL;
	int i;

	setup(easy, &x, !opt_reset);
	if (opt_reset) {
		curl_easy_setopt(easy, CURLOPT_HTTPHEADER, app_headers);
		curl_easy_reset(easy);
		setup(easy, &x, false);
	}
	for (i = 0; i < n_transfers; i++) {
		perform(easy, &x);
		if (i == 0)
			append_lines(between_lines);
	}
	if (opt_dup) {
		dup = curl_easy_duphandle(easy);
		xd.magic = XFER_MAGIC;
		xd.easy = dup;
		xd.round = 0;
		curl_easy_setopt(dup, CURLOPT_HEADERDATA, &xd);
		perform(dup, &xd);
	}
	free_curlu(easy);
	curl_easy_cleanup(easy);
	if (dup) {
		/* The copy must not depend on the original in any way. */
		perform(dup, &xd);
		curl_easy_cleanup(dup);
	}
}

static void
run_multi(void)
{
	struct xfer x[MAX_MULTI], xd;
	CURL *easy[MAX_MULTI], *dup = NULL;
	CURLM *multi = curl_multi_init();
	int i, running = 1;

	for (i = 0; i < n_multi; i++) {
		easy[i] = curl_easy_init();
		setup(easy[i], &x[i], true);
		curl_multi_add_handle(multi, easy[i]);
	}
	/* The application changes its mind after adding the handles, before
	 * the requests go out: libcurl reads the list when it sends them. */
	append_lines(late_lines);
	if (new_headers) {
		for (i = 0; i < n_multi; i++)
			curl_easy_setopt(easy[i], CURLOPT_HTTPHEADER, new_headers);
		curl_slist_free_all(app_headers);
		app_headers = new_headers;
		new_headers = NULL;
	}
	if (opt_dup) {
		dup = curl_easy_duphandle(easy[0]);
		xd = x[0];
		xd.easy = dup;
		curl_easy_setopt(dup, CURLOPT_HEADERDATA, &xd);
	}
	while (running) {
		CURLMcode mc = curl_multi_perform(multi, &running);

		if (mc != CURLM_OK) {
			printf("ERROR %s\n", curl_multi_strerror(mc));
			failures++;
			break;
		}
		if (running)
			curl_multi_poll(multi, NULL, 0, 1000, NULL);
	}
	for (;;) {
		int left;
		CURLMsg *m = curl_multi_info_read(multi, &left);

		if (!m)
			break;
		if (m->msg == CURLMSG_DONE && m->data.result != CURLE_OK) {
			printf("ERROR %s\n", curl_easy_strerror(m->data.result));
			failures++;
		}
	}
	print_record("AFTER");
	if (opt_multi_cleanup_first) {
		curl_multi_cleanup(multi);
		multi = NULL;
	}
	for (i = 0; i < n_multi; i++) {
		if (multi && !opt_easy_cleanup_in_multi)
			curl_multi_remove_handle(multi, easy[i]);
		free_curlu(easy[i]);
		/* A handle taken out of its multi handle is a plain easy handle
		 * again: a blocking transfer on it must work as well. */
		if (!multi && opt_multi_cleanup_first) {
			perform(easy[i], &x[i]);
		}
		curl_easy_cleanup(easy[i]);
	}
	if (multi)
		curl_multi_cleanup(multi);
	if (dup) {
		perform(dup, &xd);
		curl_easy_cleanup(dup);
	}
}

static void *
run(void *arg)
{
	(void)arg;
	if (relay_fd == -2 && !relay_read()) {
		printf("ERROR relay\n");
		failures++;
	}
	print_record("BEFORE");
	if (n_multi > 0)
		run_multi();
	else
		run_easy();
	if (relay_fd >= 0) {
		close(relay_fd);
		close(relay_peer);
	}
	return NULL;
}

int
main(int argc, char **argv)
{
	const char *plugin = NULL;
	bool on_thread = false, plugin_global = false;
	struct curl_slist *l;
	int c, n = 0;

	while ((c = getopt(argc, argv, "H:L:N:A:qQ:n:m:CXDRSTup:WwP:GrE")) != -1) {
		switch (c) {
		case 'H':
			app_headers = curl_slist_append(app_headers, optarg);
			break;
		case 'L':
			late_lines = curl_slist_append(late_lines, optarg);
			break;
		case 'N':
			new_headers = curl_slist_append(new_headers, optarg);
			break;
		case 'A':
			between_lines = curl_slist_append(between_lines, optarg);
			break;
		case 'Q':
			prereq_lines = curl_slist_append(prereq_lines, optarg);
			/* fall through */
		case 'q':
			opt_prereq = true;
			break;
		case 'n':
			n_transfers = atoi(optarg);
			break;
		case 'm':
			n_multi = atoi(optarg);
			if (n_multi < 1 || n_multi > MAX_MULTI)
				return 2;
			break;
		case 'C':
			opt_multi_cleanup_first = true;
			break;
		case 'X':
			opt_easy_cleanup_in_multi = true;
			break;
		case 'D':
			opt_dup = true;
			break;
		case 'R':
			opt_reset = true;
			break;
		case 'S':
			opt_setopt_inside = true;
			break;
		case 'T':
			on_thread = true;
			break;
		case 'u':
			opt_curlu = true;
			break;
		case 'p':
			default_protocol = optarg;
			break;
		case 'W':
			opt_sigv4 = true;
			break;
		case 'w':
			opt_sigv4_auth = true;
			break;
		case 'P':
			plugin = optarg;
			break;
		case 'G':
			plugin_global = true;
			break;
		case 'r':
			relay_fd = -2; /* run() reads the request */
			break;
		case 'E':
			opt_exec = true;
			break;
		default:
			return 2;
		}
	}
	if (optind != argc - 1)
		return 2;
	url = argv[optind];
	curl_global_init(CURL_GLOBAL_DEFAULT);
	printf("VERSION %s\n", curl_version());
	if (on_thread) {
		pthread_t t;

		pthread_create(&t, NULL, run, NULL);
		pthread_join(t, NULL);
	} else {
		run(NULL);
	}
	if (plugin) {
		void *h = dlopen(plugin,
				 RTLD_NOW | (plugin_global ? RTLD_GLOBAL : RTLD_LOCAL));
		int (*fetch)(const char *) =
			h ? (int (*)(const char *))dlsym(h, "plugin_fetch") : NULL;

		if (!fetch) {
			printf("ERROR plugin: %s\n", dlerror());
			failures++;
		} else if (fetch(url) != 0) {
			failures++;
		}
		print_record("AFTER");
		/* Not dlclose()d: the process is about to end anyway. */
	}
	/* The application's list is still exactly what it built. */
	for (l = app_headers; l; l = l->next)
		n++;
	printf("LIST %d %s\n", n, app_headers ? app_headers->data : "-");
	curl_slist_free_all(app_headers);
	curl_slist_free_all(late_lines);
	curl_slist_free_all(new_headers);
	curl_slist_free_all(between_lines);
	curl_slist_free_all(prereq_lines);
	curl_global_cleanup();
	printf("DONE %d\n", failures);
	return failures ? 1 : 0;
}
