/* SPDX-License-Identifier: Apache-2.0 */
#include "test-common.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern const struct test_suite_desc *__start_test_section[];
extern const struct test_suite_desc *__stop_test_section[];

void
test_skip(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("SKIP: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(77);
}

const char *
test_env_path(const char *var)
{
	const char *v = getenv(var);

	if (!v || !*v)
		test_skip("%s is not set (run this test through meson test)", var);
	return v;
}

const char *
test_ctxdump_path(void)
{
	static char path[4096];

	snprintf(path, sizeof(path), "%s/tools/ctxdump/ctxdump",
		 test_env_path("CTXSHIM_BUILDDIR"));
	return path;
}

const char *
test_helper_path(const char *name)
{
	static char path[4][4096];
	static int k;

	k = (k + 1) % 4;
	snprintf(path[k], sizeof(path[k]), "%s/%s", test_env_path("HELPER_DIR"), name);
	return path[k];
}

const char *
test_shim_path(void)
{
	const char *v = test_env_path("CTXSHIM_LIB"), *sp = strrchr(v, ' ');

	return sp ? sp + 1 : v;
}

static char **
build_env(char *const extra[], bool preload)
{
	extern char **environ;
	size_t n = 0, m = 0, i, k = 0;
	char **env;

	while (environ[n])
		n++;
	while (extra && extra[m])
		m++;
	env = calloc(n + m + 2, sizeof(*env));
	ck_assert_ptr_nonnull(env);
	for (i = 0; i < n; i++) {
		if (strncmp(environ[i], "LD_PRELOAD=", 11) == 0)
			continue;
		env[k++] = environ[i];
	}
	for (i = 0; i < m; i++)
		env[k++] = extra[i];
	if (preload) {
		static char preload_var[4200];

		snprintf(preload_var, sizeof(preload_var), "LD_PRELOAD=%s",
			 test_env_path("CTXSHIM_LIB"));
		env[k++] = preload_var;
	}
	env[k] = NULL;
	return env;
}

void
test_child_start(struct test_child *c,
		 char *const argv[],
		 char *const env[],
		 bool preload)
{
	int in[2], out[2];
	char **envp = build_env(env, preload);

	memset(c, 0, sizeof(*c));
	ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
	c->pid = fork();
	ck_assert_int_ge(c->pid, 0);
	if (c->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		execve(argv[0], argv, envp);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	free(envp);
	close(in[0]);
	close(out[1]);
	c->in_fd = in[1];
	c->out_fd = out[0];
}

long
test_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

size_t
test_ts_members(char *out, size_t cap, unsigned from, unsigned to)
{
	size_t len = 0;

	out[0] = '\0';
	for (unsigned i = from; i <= to && len < cap; i++)
		len += (size_t)snprintf(out + len, cap - len,
					"%skey%02u=value-value-%02u",
					i > from ? "," : "", i, i);
	return len;
}

size_t
test_ts_spaced(char *out, size_t cap, const char *list)
{
	size_t len = 0;

	for (; *list && len + 2 < cap; list++) {
		out[len++] = *list;
		if (*list == ',')
			out[len++] = ' ';
	}
	out[len] = '\0';
	return len;
}

void
test_child_readline(struct test_child *c, char *line, size_t n, int timeout_ms)
{
	long deadline = test_now_ms() + timeout_ms;

	for (;;) {
		char *nl = memchr(c->buf, '\n', c->len);
		struct pollfd pfd = {.fd = c->out_fd, .events = POLLIN};
		ssize_t r;
		long left;

		if (nl) {
			size_t l = (size_t)(nl - c->buf);

			ck_assert_uint_lt(l, n);
			memcpy(line, c->buf, l);
			line[l] = '\0';
			memmove(c->buf, nl + 1, c->len - l - 1);
			c->len -= l + 1;
			return;
		}
		left = deadline - test_now_ms();
		ck_assert_msg(left > 0, "timeout waiting for a line from pid %d",
			      (int)c->pid);
		if (poll(&pfd, 1, (int)left) <= 0)
			continue;
		ck_assert_uint_lt(c->len, sizeof(c->buf));
		r = read(c->out_fd, c->buf + c->len, sizeof(c->buf) - c->len);
		ck_assert_msg(r > 0, "helper pid %d closed its output", (int)c->pid);
		c->len += (size_t)r;
	}
}

void
test_child_expect(
	struct test_child *c, const char *prefix, char *line, size_t n, int timeout_ms)
{
	do
		test_child_readline(c, line, n, timeout_ms);
	while (strncmp(line, prefix, strlen(prefix)) != 0);
}

void
test_child_send(struct test_child *c, const char *text)
{
	size_t len = strlen(text);

	ck_assert_int_eq(write(c->in_fd, text, len), (ssize_t)len);
}

static int
wait_deadline(pid_t pid, int timeout_ms)
{
	long deadline = test_now_ms() + timeout_ms;
	int status;

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return status;
		ck_assert_int_eq(r, 0);
		if (test_now_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			ck_abort_msg("pid %d did not exit in %d ms", (int)pid,
				     timeout_ms);
		}
		usleep(2000);
	}
}

int
test_child_finish(struct test_child *c, int timeout_ms)
{
	int status;

	if (c->in_fd >= 0)
		close(c->in_fd);
	c->in_fd = -1;
	status = wait_deadline(c->pid, timeout_ms);
	close(c->out_fd);
	c->out_fd = -1;
	return status;
}

static char *
slurp_fd(int fd)
{
	size_t cap = 4096, len = 0;
	char *b = malloc(cap);

	ck_assert_ptr_nonnull(b);
	for (;;) {
		ssize_t r;

		if (cap - len < 2) {
			cap *= 2;
			b = realloc(b, cap);
			ck_assert_ptr_nonnull(b);
		}
		r = read(fd, b + len, cap - len - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	b[len] = '\0';
	return b;
}

int
test_run_capture(char *const argv[],
		 char *const env[],
		 bool preload,
		 char **out,
		 char **err,
		 int timeout_ms)
{
	char tmpl_o[] = "/tmp/ctxshim-test-XXXXXX",
	     tmpl_e[] = "/tmp/ctxshim-test-XXXXXX";
	int fo = mkostemp(tmpl_o, O_CLOEXEC), fe = mkostemp(tmpl_e, O_CLOEXEC), status;
	char **envp = build_env(env, preload);
	pid_t pid;

	ck_assert_int_ge(fo, 0);
	ck_assert_int_ge(fe, 0);
	unlink(tmpl_o);
	unlink(tmpl_e);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);

		dup2(devnull, 0);
		dup2(fo, 1);
		dup2(fe, 2);
		/* Only 0, 1 and 2: what the test program inherited or opened
		 * without O_CLOEXEC would count against the
		 * RLIMIT_NOFILE that ctxdump's tests give it. */
		(void)close_range(3, ~0u, 0);
		execve(argv[0], argv, envp);
		_exit(127);
	}
	free(envp);
	status = wait_deadline(pid, timeout_ms);
	lseek(fo, 0, SEEK_SET);
	lseek(fe, 0, SEEK_SET);
	if (out)
		*out = slurp_fd(fo);
	if (err)
		*err = slurp_fd(fe);
	close(fo);
	close(fe);
	return status;
}

unsigned
test_stop_timeout_ms(void)
{
	unsigned ms = 5000 * test_time_scale();

	return ms < 60000 ? ms : 60000;
}

int
test_ctxdump_run_ms(void)
{
	return (int)test_stop_timeout_ms() + 25000;
}

const char *
test_stop_timeout_arg(void)
{
	static char arg[32];

	snprintf(arg, sizeof(arg), "--stop-timeout=%u", test_stop_timeout_ms());
	return arg;
}

int
test_ctxdump_argv(char **argv, int cap, const char *const *args)
{
	int n = 0;

	argv[n++] = (char *)test_ctxdump_path();
	if (!args[0] ||
	    (strcmp(args[0], "record") != 0 && strcmp(args[0], "report") != 0))
		argv[n++] = (char *)test_stop_timeout_arg();
	for (; *args; args++) {
		ck_assert_msg(n < cap - 1, "too many arguments for ctxdump");
		argv[n++] = (char *)*args;
	}
	argv[n] = NULL;
	return n;
}

int
test_ctxdump_vrun(char **out, char **err, int timeout_ms, const char *a0, va_list ap)
{
	const char *args[15];
	char *argv[17];
	int n = 0;

	for (const char *a = a0; a; a = va_arg(ap, const char *)) {
		ck_assert_int_lt(n, 14);
		args[n++] = a;
	}
	args[n] = NULL;
	test_ctxdump_argv(argv, 17, args);
	return test_run_capture(argv, NULL, false, out, err, timeout_ms);
}

int
test_run_ctxdump_no_map_files(char **out,
			      char **err,
			      const char *const *args,
			      int timeout_ms)
{
	char *argv[18] = {"/usr/bin/setpriv",
			  "--bounding-set=-sys_admin,-checkpoint_restore"};
	int n = 2, st;

	if (geteuid() != 0 || access(argv[0], X_OK) != 0)
		n = 0; /* as it is */
	test_ctxdump_argv(argv + n, 16, args);
	st = test_run_capture(argv, NULL, false, out, err, timeout_ms);
	ck_assert_msg(WIFEXITED(st), "status 0x%x", st);
	return WEXITSTATUS(st);
}

unsigned
test_time_scale(void)
{
	const char *m = getenv("CK_TIMEOUT_MULTIPLIER");
	unsigned k = m && atoi(m) > 0 ? (unsigned)atoi(m) : 1;

	if (getenv("ASAN_OPTIONS") || getenv("UBSAN_OPTIONS"))
		k *= 5;
	return k;
}

char *
test_json_thread(const char *json, pid_t tid)
{
	char key[64];
	const char *s, *e;

	snprintf(key, sizeof(key), "\"tid\": %d,", (int)tid);
	s = strstr(json, key);
	if (!s)
		return NULL;
	e = strstr(s + 1, "\"tid\": ");
	if (!e)
		e = s + strlen(s);
	return strndup(s, (size_t)(e - s));
}

ssize_t
test_read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, cap - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return n;
}

char
test_task_state(pid_t pid, pid_t tid)
{
	char path[64], buf[512], *p;

	if (tid)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid,
			 (int)tid);
	else
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (test_read_small(path, buf, sizeof(buf)) < 0)
		return '?';
	p = strrchr(buf, ')');
	return (p && p[1] == ' ') ? p[2] : '?';
}

void
test_wait_syscall(pid_t pid, pid_t tid, long nr, int timeout_ms)
{
	long deadline = test_now_ms() + timeout_ms;
	char path[96], buf[64] = "";

	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
	for (;;) {
		ssize_t n = test_read_small(path, buf, sizeof(buf));

		if (n < 0)
			buf[0] = '\0';
		/* "running" while on a CPU; the number while blocked in it */
		if (n > 0 && buf[0] >= '0' && buf[0] <= '9' &&
		    strtol(buf, NULL, 10) == nr)
			return;
		ck_assert_msg(test_now_ms() < deadline,
			      "thread %d of %d never blocked in system call %ld (%s)",
			      (int)tid, (int)pid, nr, buf);
		usleep(2000);
	}
}

char
test_proc_state(pid_t pid)
{
	return test_task_state(pid, 0);
}

pid_t
test_proc_ppid(pid_t pid)
{
	char path[64], buf[1024], *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (test_read_small(path, buf, sizeof(buf)) < 0)
		return -1;
	/* "pid (comm) S ppid ...": comm may itself contain ')' */
	p = strrchr(buf, ')');
	if (!p || strlen(p) < 5)
		return -1;
	return (pid_t)strtol(p + 4, NULL, 10);
}

/* What test_mkdtemp() and test_mkstemp() made, one path a line, appended
 * by the forked tests; main() removes those paths once every suite ran. */
static char tmp_registry[] = "/tmp/ctxshim-registry-XXXXXX";
static bool tmp_registry_ok;

static void
tmp_track(const char *path)
{
	char line[4200];
	int fd, n;

	if (!tmp_registry_ok)
		return;
	n = snprintf(line, sizeof(line), "%s\n", path);
	fd = open(tmp_registry, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0)
		return;
	/* one write: lines of concurrent tests do not mix */
	if (n > 0 && (size_t)n < sizeof(line))
		(void)!write(fd, line, (size_t)n);
	close(fd);
}

char *
test_mkdtemp(char *tmpl)
{
	char *r = mkdtemp(tmpl);

	if (r)
		tmp_track(r);
	return r;
}

int
test_mkstemp(char *tmpl)
{
	int fd = mkstemp(tmpl);

	if (fd >= 0)
		tmp_track(tmpl);
	return fd;
}

static int
tmp_remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st, (void)ftw;
	if (type == FTW_DP)
		(void)rmdir(path);
	else
		(void)unlink(path);
	return 0;
}

/* Remove what the registry lists (only under /tmp/ctxshim- and, for the
 * ctxdump tests' files, /tmp/ctxdump-, whatever it says), then the
 * registry. */
static void
tmp_cleanup(void)
{
	char line[4200];
	FILE *f;

	/* stdio, not slurp_fd(): a Check assertion (even one that holds)
	 * reports to a test that no longer runs here. */
	if (!tmp_registry_ok)
		return;
	f = fopen(tmp_registry, "re");
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if ((strncmp(line, "/tmp/ctxshim-", 13) == 0 ||
		     strncmp(line, "/tmp/ctxdump-", 13) == 0) &&
		    !strstr(line, "/.."))
			(void)nftw(line, tmp_remove_one, 16, FTW_DEPTH | FTW_PHYS);
	}
	if (f)
		fclose(f);
	unlink(tmp_registry);
}

/* Check runs each test in a process of its own process group and, once it
 * ended, SIGKILLs that group: what a failed test started (its cleanup never
 * runs: a failed assertion _exit()s) dies then, but as an orphan, which the
 * init of a container or CI machine may never reap (a zombie for good); and
 * what left the group (setsid(), a daemon) runs on, holding its port, its
 * files and the output meson reads.  So main() forks first: the child runs
 * the suites, and this process, a child subreaper (prctl(2)), inherits those
 * orphans, reaps each as it ends and, once the runner is done, kills and
 * reaps what still runs. */
static pid_t reaper_runner;

static void
reaper_forward(int sig)
{
	(void)kill(reaper_runner, sig);
}

static void
reaper_signals(void (*handler)(int))
{
	struct sigaction sa = {.sa_handler = handler};

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

/* SIGKILL every child (all orphans the reaper inherited, the runner is gone)
 * and reap them until none is left; without /proc/PID/task/TID/children
 * (CONFIG_PROC_CHILDREN) only reap those that ended. */
static void
reaper_kill_all(void)
{
	char path[64];
	int pid;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)getpid(),
		 (int)getpid());
	for (;;) {
		FILE *f = fopen(path, "re");
		bool listed = f != NULL;
		pid_t r;

		while (f && fscanf(f, "%d", &pid) == 1) {
			if (test_proc_state(pid) != 'Z')
				fprintf(stderr, "%s: pid %d left running: killed\n",
					program_invocation_short_name, pid);
			(void)kill(pid, SIGKILL);
		}
		if (f)
			fclose(f);
		r = waitpid(-1, NULL, listed ? 0 : WNOHANG);
		if (r <= 0 && !(r < 0 && errno == EINTR))
			return;
	}
}

/* Returns in the runner (or if there is no reaper); the reaper exits as the
 * runner did.  None with CK_FORK=no: the tests then run in this process
 * (a failed check returns to the runner, nothing is orphaned), and a
 * debugger (meson test --gdb) stays in the process that runs them. */
static void
reaper_start(void)
{
	const char *fork_env = getenv("CK_FORK");
	int st = 0;
	pid_t r;

	if ((fork_env && strcmp(fork_env, "no") == 0) ||
	    prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
		return;
	reaper_runner = fork();
	if (reaper_runner <= 0)
		return;
	/* meson's timeout and ^C reach the runner (Check kills the test) */
	reaper_signals(reaper_forward);
	do
		r = waitpid(-1, &st, 0);
	while (r != reaper_runner && (r >= 0 || errno == EINTR));
	reaper_signals(SIG_IGN); /* the runner's pid may be reused now */
	reaper_kill_all();
	if (r == reaper_runner && WIFSIGNALED(st)) {
		signal(WTERMSIG(st), SIG_DFL);
		raise(WTERMSIG(st));
	}
	exit(r == reaper_runner && WIFEXITED(st) ? WEXITSTATUS(st) : 1);
}

int
main(void)
{
	const struct test_suite_desc **d;
	struct rlimit core = {0, 0};
	SRunner *sr = NULL;
	int failed, fd;

	/* A crashing forked test must not litter the build tree with cores. */
	setrlimit(RLIMIT_CORE, &core);
	/* before the reaper: its "left running" line to a closed pipe */
	signal(SIGPIPE, SIG_IGN);
	reaper_start();

	for (d = (const struct test_suite_desc **)__start_test_section;
	     d < (const struct test_suite_desc **)__stop_test_section; d++) {
		Suite *s = (*d)->create();

		if (!sr)
			sr = srunner_create(s);
		else
			srunner_add_suite(sr, s);
	}
	if (!sr) {
		fprintf(stderr, "no test suites registered\n");
		return 1;
	}
	fd = mkstemp(tmp_registry);
	tmp_registry_ok = fd >= 0;
	if (fd >= 0)
		close(fd);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	tmp_cleanup();
	return failed == 0 ? 0 : 1;
}
