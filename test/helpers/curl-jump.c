/* SPDX-License-Identifier: Apache-2.0 */
/* curl-jump: a request timeout the legacy way, around libcurl: a
 * blocking curl_easy_perform() to a server that never answers, and a
 * SIGALRM handler that siglongjmp()s back out of it.  No tracing code but
 * ctxobs.h: what it prints is the same with and without the shim when
 * hooks/hook-curl.c cleans up after the jump (test-preload-host.c).
 *
 *   curl-jump
 *
 * Prints, one per line:
 *   shown-kept <0|1>   the thread shows after the jump what it showed
 *                      before the transfer (hook-curl.c used to leave the
 *                      abandoned transfer's client span published)
 *   reperform <rc>     curl_easy_perform() on the abandoned handle again
 *                      (libcurl 7.88 refuses it: the handle is still in
 *                      its internal multi handle)
 *   dup-sent <list>    the header lines a curl_easy_duphandle() copy of
 *                      the abandoned handle sends that are the
 *                      application's (X-*), or "-"
 *   multi-like-easy <0|1>  a handle made after the abandoned one's
 *                      curl_easy_cleanup(), added to a multi handle, sends
 *                      a traceparent exactly when a fresh handle's
 *                      curl_easy_perform() does (hook-curl.c used to take
 *                      the handle for its own abandoned perform's when
 *                      they had one address, and sent none)
 *   abandoned-left <n>  after a transfer left by a jump from a callback
 *                      that had just given the handle a list with a
 *                      traceparent of its own, and the curl_easy_cleanup()
 *                      of every abandoned handle: the shim's count of
 *                      abandoned handles (hook-curl.c, curl_abandoned_n,
 *                      read through libctxshim.so's .symtab; 0 without the
 *                      shim, "?" if not found).  It used to stay at 1, and
 *                      every later hooked call of the process took
 *                      curl_lock.
 * and "same-address <0|1>" on stderr (whether the new handle got the
 * abandoned one's address, which the last check needs to mean much).
 *
 *   curl-jump lock
 *
 * First a timeout's jump out of a curl_easy_perform() (from then on
 * hook-curl.c blocks signals while it holds its table's lock); then a
 * signal handler that siglongjmp()s out of curl_easy_setopt(), sent by
 * another thread every few microseconds for a second (on a loaded
 * machine up to 10 s, until 100 jumps), so that jumps land everywhere in
 * hook-curl.c's setopt hook, also where it holds its table's lock; then
 * another thread's curl_easy_setopt().  Prints "lock-jumps
 * <0|1>" (at least 100 jumps) and "lock-free <0|1>": that setopt returned
 * within 5 s (a jump out of the lock used to leave it locked, and every
 * later hooked call of the process waited for good).
 *
 *   curl-jump alloc
 *
 * With libcurl's allocation callbacks the application's
 * (curl_global_init_mem()), after a timeout's jump out of a
 * curl_easy_perform(), a perform of a handle whose URL is a CURLU handle
 * (CURLOPT_CURLU); a callback blocks SIGUSR2 on its first call.  Prints
 * "alloc-saw-ours <0|1>": a callback ran with SIGTERM blocked (hook-curl.c
 * used to read the CURLU's scheme with the thread's signals blocked) and
 * "alloc-change-kept <0|1>": SIGUSR2 is still blocked after the perform
 * (the hook's restore used to undo it).
 *
 *   curl-jump fault
 *
 * After a timeout's jump out of a curl_easy_perform(), a SIGSEGV sent by
 * another thread every few microseconds for half a second (up to 10 s on a
 * loaded machine, until 100 jumps), whose handler longjmp()s (no mask
 * restore) out of curl_easy_setopt().  Prints
 * "fault-jumps <0|1>" (at least 100) and "fault-mask-kept <0|1>": after
 * every jump the thread blocked no more than SIGSEGV (hook-curl.c, which
 * lets faults through its block, used to leave every other signal blocked
 * for good).  A jump out of the few instructions that hold hook-curl.c's
 * lock leaves it held (ctxshim(7), LIMITS): the main thread may stop
 * there, and the other thread prints what it saw by then. */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <curl/curl.h>

#include "ctxobs.h"
#include "listen-loopback.h"
#include "signal-storm.h"

static sigjmp_buf loop_env;

/* What the answering server saw in its latest request. */
static atomic_int seen_tp;
static char seen_app[256];
static atomic_int seen_n;

static void
on_alarm(int sig)
{
	(void)sig;
	siglongjmp(loop_env, 1);
}

static int
listen_any(unsigned *port)
{
	struct sockaddr_in a;
	int s = listen_loopback(16, SOCK_CLOEXEC, &a);

	if (s < 0)
		exit(2);
	*port = ntohs(a.sin_port);
	return s;
}

/* Answers every request with an empty 200, noting its traceparent and the
 * application's X- lines. */
static void *
answer(void *arg)
{
	int ls = *(int *)arg;

	for (;;) {
		char buf[8192], app[256] = "";
		size_t len = 0;
		ssize_t r;
		int c = accept(ls, NULL, NULL);
		char *line;
		bool tp = false;
		static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n"
					   "Connection: close\r\n\r\n";

		if (c < 0)
			continue;
		while (len < sizeof(buf) - 1 &&
		       (r = read(c, buf + len, sizeof(buf) - 1 - len)) > 0) {
			len += (size_t)r;
			buf[len] = '\0';
			if (strstr(buf, "\r\n\r\n"))
				break;
		}
		buf[len] = '\0';
		for (line = strtok(buf, "\r\n"); line; line = strtok(NULL, "\r\n")) {
			if (strncasecmp(line, "traceparent:", 12) == 0)
				tp = true;
			if (strncasecmp(line, "x-", 2) == 0 &&
			    strlen(app) + strlen(line) + 2 < sizeof(app)) {
				strcat(app, app[0] ? "," : "");
				strcat(app, line);
			}
		}
		memcpy(seen_app, app, sizeof(app));
		atomic_store(&seen_tp, tp);
		atomic_fetch_add(&seen_n, 1); /* before the client can see the answer */
		(void)!write(c, resp, sizeof(resp) - 1);
		close(c);
	}
	return NULL;
}

static size_t
discard(char *p, size_t size, size_t n, void *ud)
{
	(void)p;
	(void)ud;
	return size * n;
}

/* ---- abandoned-left: a static of libctxshim.so, by its .symtab entry ---- */

struct sym_find {
	const char *name;
	void *addr;
	bool shim;
};

static int
sym_in(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct sym_find *f = arg;
	const ElfW(Ehdr) * eh;
	const ElfW(Shdr) * sh;
	struct stat st;
	void *map;
	int fd, i;

	(void)size;
	if (!strstr(info->dlpi_name, "libctxshim"))
		return 0;
	f->shim = true;
	fd = open(info->dlpi_name, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0)
		return 1;
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return 1;
	eh = map;
	sh = (const ElfW(Shdr) *)((const char *)map + eh->e_shoff);
	for (i = 0; i < eh->e_shnum; i++) {
		const ElfW(Sym) *sym =
			(const void *)((const char *)map + sh[i].sh_offset);
		const char *str = (const char *)map + sh[sh[i].sh_link].sh_offset;
		size_t j, n = sh[i].sh_size / sizeof(*sym);

		if (sh[i].sh_type != SHT_SYMTAB)
			continue;
		for (j = 0; j < n; j++)
			if (strcmp(str + sym[j].st_name, f->name) == 0)
				f->addr = (void *)(info->dlpi_addr + sym[j].st_value);
	}
	munmap(map, (size_t)st.st_size);
	return 1;
}

static void
print_abandoned_left(void)
{
	struct sym_find f = {.name = "curl_abandoned_n"};

	(void)dl_iterate_phdr(sym_in, &f);
	if (!f.shim)
		printf("abandoned-left 0\n");
	else if (!f.addr)
		printf("abandoned-left ?\n");
	else
		printf("abandoned-left %u\n",
		       __atomic_load_n((unsigned *)f.addr, __ATOMIC_RELAXED));
}

/* The application's own trace context, set from a callback of the
 * transfer, which then ends by a jump out of the signal handler. */
static struct curl_slist *own_list;

static int
set_own_then_jump(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	(void)dt;
	(void)dn;
	(void)ut;
	(void)un;
	(void)curl_easy_setopt((CURL *)ud, CURLOPT_HTTPHEADER, own_list);
	raise(SIGALRM);
	return 0;
}

/* ---- lock: jumps out of curl_easy_setopt() at random points ---------- */

static sigjmp_buf lock_env;
static pthread_t lock_main;
static atomic_int lock_armed, lock_stop, lock_jumps;

static void
on_usr1(int sig)
{
	(void)sig;
	if (atomic_load(&lock_armed)) {
		atomic_store(&lock_armed, 0);
		siglongjmp(lock_env, 1);
	}
}

static void *
lock_setopt(void *arg)
{
	CURL *h = arg;

	/* a hooked option that allocates nothing in libcurl */
	(void)curl_easy_setopt(h, CURLOPT_PREREQDATA, NULL);
	return arg;
}

/* Sends the signals, then tries the lock from another thread, prints,
 * and ends the process (the main thread may be stuck in the lock). */
static void *
lock_kick(void *arg)
{
	struct timespec limit;
	pthread_t th;
	void *ret;
	bool free_ok;

	signal_storm(lock_main, SIGUSR1, &lock_jumps, 100, 1000);
	atomic_store(&lock_stop, 1);
	clock_gettime(CLOCK_REALTIME, &limit);
	limit.tv_sec += 5;
	free_ok = pthread_create(&th, NULL, lock_setopt, arg) == 0 &&
		  pthread_timedjoin_np(th, &ret, &limit) == 0;
	fprintf(stderr, "jumps %d\n", atomic_load(&lock_jumps));
	printf("lock-jumps %d\nlock-free %d\n", atomic_load(&lock_jumps) >= 100,
	       free_ok);
	fflush(stdout);
	_exit(0);
}

static int
lock_main_loop(void)
{
	struct sigaction sa = {.sa_handler = on_usr1};
	CURL *h = curl_easy_init(), *other = curl_easy_init();
	pthread_t kick;

	if (!h || !other)
		return 2;
	(void)sigaction(SIGUSR1, &sa, NULL);
	lock_main = pthread_self();
	/* both handles get their entries before the jumps start */
	(void)curl_easy_setopt(h, CURLOPT_PREREQDATA, NULL);
	(void)curl_easy_setopt(other, CURLOPT_PREREQDATA, NULL);
	if (pthread_create(&kick, NULL, lock_kick, other) != 0)
		return 2;
	while (!atomic_load(&lock_stop)) {
		if (sigsetjmp(lock_env, 1) == 0) {
			atomic_store(&lock_armed, 1);
			while (!atomic_load(&lock_stop))
				(void)curl_easy_setopt(h, CURLOPT_PREREQDATA, NULL);
			atomic_store(&lock_armed, 0);
		} else {
			atomic_fetch_add(&lock_jumps, 1);
		}
	}
	pause(); /* lock_kick() ends the process */
	return 0;
}

/* ---- alloc: the application's allocation callbacks --------------------- */

static int alloc_watch, alloc_saw_ours, alloc_changed;

static void
alloc_check(void)
{
	sigset_t m;

	if (!alloc_watch)
		return;
	(void)pthread_sigmask(SIG_SETMASK, NULL, &m);
	if (sigismember(&m, SIGTERM))
		alloc_saw_ours = 1;
	if (!alloc_changed) {
		sigemptyset(&m);
		sigaddset(&m, SIGUSR2);
		(void)pthread_sigmask(SIG_BLOCK, &m, NULL);
		alloc_changed = 1;
	}
}

static void *
alloc_malloc(size_t n)
{
	alloc_check();
	return malloc(n);
}

static void
alloc_free(void *p)
{
	alloc_check();
	free(p);
}

static void *
alloc_realloc(void *p, size_t n)
{
	alloc_check();
	return realloc(p, n);
}

static char *
alloc_strdup(const char *s)
{
	alloc_check();
	return strdup(s);
}

static void *
alloc_calloc(size_t n, size_t size)
{
	alloc_check();
	return calloc(n, size);
}

static int
alloc_main(CURL *jumped)
{
	CURL *h = curl_easy_init();
	CURLU *u = curl_url();
	sigset_t m;

	curl_easy_cleanup(jumped);
	if (!h || !u ||
	    curl_url_set(u, CURLUPART_URL, "http://127.0.0.1:1/", 0) != CURLUE_OK)
		return 2;
	(void)curl_easy_setopt(h, CURLOPT_CURLU, u);
	alloc_watch = 1;
	(void)curl_easy_perform(h); /* refused: nothing listens on port 1 */
	alloc_watch = 0;
	(void)pthread_sigmask(SIG_SETMASK, NULL, &m);
	printf("alloc-saw-ours %d\nalloc-change-kept %d\n", alloc_saw_ours,
	       alloc_changed && sigismember(&m, SIGUSR2));
	return 0;
}

/* ---- fault: a fault's handler jumps out of curl_easy_setopt() -------- */

static jmp_buf fault_env;
static atomic_int fault_armed, fault_stop, fault_jumps, fault_left;

static void
on_segv(int sig)
{
	(void)sig;
	if (atomic_exchange(&fault_armed, 0))
		longjmp(fault_env, 1);
}

static void *
fault_kick(void *arg)
{
	struct timespec pause = {.tv_nsec = 100000000};

	signal_storm(*(pthread_t *)arg, SIGSEGV, &fault_jumps, 100, 500);
	atomic_store(&fault_stop, 1);
	/* the main thread's last check */
	nanosleep(&pause, NULL);
	fprintf(stderr, "fault jumps %d, left blocked %d\n", atomic_load(&fault_jumps),
		atomic_load(&fault_left));
	printf("fault-jumps %d\nfault-mask-kept %d\n", atomic_load(&fault_jumps) >= 100,
	       atomic_load(&fault_left) == 0);
	fflush(stdout);
	_exit(0);
}

static int
fault_main(void)
{
	struct sigaction sa = {.sa_handler = on_segv};
	CURL *h = curl_easy_init();
	pthread_t self = pthread_self(), kick;
	sigset_t m;

	if (!h)
		return 2;
	(void)sigaction(SIGSEGV, &sa, NULL);
	(void)curl_easy_setopt(h, CURLOPT_PREREQDATA, NULL);
	if (pthread_create(&kick, NULL, fault_kick, &self) != 0)
		return 2;
	while (!atomic_load(&fault_stop)) {
		if (setjmp(fault_env) == 0) {
			atomic_store(&fault_armed, 1);
			while (!atomic_load(&fault_stop))
				(void)curl_easy_setopt(h, CURLOPT_PREREQDATA, NULL);
			atomic_store(&fault_armed, 0);
		} else {
			atomic_fetch_add(&fault_jumps, 1);
			/* The handler's entry blocked SIGSEGV, which its jump
			 * keeps; nothing else. */
			(void)pthread_sigmask(SIG_SETMASK, NULL, &m);
			if (sigismember(&m, SIGTERM))
				atomic_fetch_add(&fault_left, 1);
			sigemptyset(&m);
			sigaddset(&m, SIGSEGV);
			(void)pthread_sigmask(SIG_UNBLOCK, &m, NULL);
		}
	}
	for (;;)
		pause(); /* fault_kick() ends the process */
}

static CURL *
handle(const char *url, struct curl_slist *list)
{
	CURL *h = curl_easy_init();

	if (!h)
		exit(2);
	(void)curl_easy_setopt(h, CURLOPT_URL, url);
	(void)curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	(void)curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
	if (list)
		(void)curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
	return h;
}

static void
perform_answered(CURL *h)
{
	int n = atomic_load(&seen_n);

	if (curl_easy_perform(h) != CURLE_OK || atomic_load(&seen_n) != n + 1)
		exit(3);
}

int
main(int argc, char **argv)
{
	struct itimerval t = {.it_value = {.tv_usec = 200000}};
	struct sigaction sa = {.sa_handler = on_alarm};
	struct curl_slist *list = curl_slist_append(NULL, "X-App: 1");
	char stall_url[64], ok_url[64], before[128];
	unsigned stall_port, ok_port;
	int stall = listen_any(&stall_port), ok = listen_any(&ok_port);
	volatile CURL *abandoned;
	CURL *h, *dup;
	CURLM *multi;
	pthread_t th;
	int running, n, tp_easy;

	snprintf(stall_url, sizeof(stall_url), "http://127.0.0.1:%u/", stall_port);
	snprintf(ok_url, sizeof(ok_url), "http://127.0.0.1:%u/", ok_port);
	(void)sigaction(SIGALRM, &sa, NULL);
	if (argc > 1 &&
	    (strcmp(argv[1], "alloc") == 0 || strcmp(argv[1], "fault") == 0)) {
		if ((argv[1][0] == 'a'
			     ? curl_global_init_mem(CURL_GLOBAL_DEFAULT, alloc_malloc,
						    alloc_free, alloc_realloc,
						    alloc_strdup, alloc_calloc)
			     : curl_global_init(CURL_GLOBAL_DEFAULT)) != 0)
			return 2;
		h = handle(stall_url, NULL);
		if (sigsetjmp(loop_env, 1) == 0) {
			(void)setitimer(ITIMER_REAL, &t, NULL);
			(void)curl_easy_perform(h);
			return 1;
		}
		return argv[1][0] == 'a' ? alloc_main(h) : fault_main();
	}
	if (argc > 1 && strcmp(argv[1], "lock") == 0) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
			return 2;
		h = handle(stall_url, NULL);
		if (sigsetjmp(loop_env, 1) == 0) {
			(void)setitimer(ITIMER_REAL, &t, NULL);
			(void)curl_easy_perform(h);
			return 1;
		}
		return lock_main_loop();
	}
	if (!list || curl_global_init(CURL_GLOBAL_DEFAULT) != 0 ||
	    pthread_create(&th, NULL, answer, &ok) != 0)
		return 2;

	/* What a fresh handle's blocking transfer sends. */
	h = handle(ok_url, NULL);
	perform_answered(h);
	tp_easy = atomic_load(&seen_tp);
	curl_easy_cleanup(h);

	/* The server never accepts: the kernel completes the connection, curl
	 * sends its request and waits in poll() for the answer. */
	snprintf(before, sizeof(before), "%s", ctxobs_shown());
	abandoned = handle(stall_url, list);
	if (sigsetjmp(loop_env, 1) == 0) {
		(void)setitimer(ITIMER_REAL, &t, NULL);
		(void)curl_easy_perform((CURL *)abandoned);
		printf("perform returned\n");
		return 1;
	}
	printf("shown-kept %d\n", strcmp(before, ctxobs_shown()) == 0);

	printf("reperform %d\n", (int)curl_easy_perform((CURL *)abandoned));

	dup = curl_easy_duphandle((CURL *)abandoned);
	if (!dup)
		return 2;
	(void)curl_easy_setopt(dup, CURLOPT_URL, ok_url);
	perform_answered(dup);
	printf("dup-sent %s\n", seen_app[0] ? seen_app : "-");
	curl_easy_cleanup(dup);

	curl_easy_cleanup((CURL *)abandoned);
	h = handle(ok_url, NULL);
	fprintf(stderr, "same-address %d\n", h == (CURL *)abandoned);
	multi = curl_multi_init();
	n = atomic_load(&seen_n);
	if (!multi || curl_multi_add_handle(multi, h) != CURLM_OK)
		return 2;
	do {
		if (curl_multi_perform(multi, &running) != CURLM_OK ||
		    curl_multi_poll(multi, NULL, 0, 1000, NULL) != CURLM_OK)
			return 2;
	} while (running);
	if (atomic_load(&seen_n) != n + 1)
		return 3;
	printf("multi-like-easy %d\n", atomic_load(&seen_tp) == tp_easy);
	(void)curl_multi_remove_handle(multi, h);
	curl_easy_cleanup(h);
	(void)curl_multi_cleanup(multi);

	/* A callback gives the handle a list with the application's own
	 * traceparent (hook-curl.c drops its nodes: curl_relink_locked()),
	 * then the transfer is left by a jump. */
	own_list = curl_slist_append(NULL, "traceparent: "
					   "00-0af7651916cd43dd8448eb211c80319c-"
					   "00f067aa0ba902b7-01");
	if (!own_list)
		return 2;
	abandoned = handle(stall_url, list);
	(void)curl_easy_setopt((CURL *)abandoned, CURLOPT_NOPROGRESS, 0L);
	(void)curl_easy_setopt((CURL *)abandoned, CURLOPT_XFERINFOFUNCTION,
			       set_own_then_jump);
	(void)curl_easy_setopt((CURL *)abandoned, CURLOPT_XFERINFODATA,
			       (CURL *)abandoned);
	if (sigsetjmp(loop_env, 1) == 0) {
		(void)curl_easy_perform((CURL *)abandoned);
		printf("perform returned\n");
		return 1;
	}
	curl_easy_cleanup((CURL *)abandoned);
	curl_slist_free_all(own_list);
	print_abandoned_left();
	curl_slist_free_all(list);
	close(stall);
	curl_global_cleanup();
	return 0;
}
