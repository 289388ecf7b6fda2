/* SPDX-License-Identifier: Apache-2.0 */
/* exec: keeping the shim in the new program when asked to.
 *
 * By default we change nothing: the dynamic loader preloads the shim into
 * the new program if LD_PRELOAD is still in the environment it gets (or if
 * the shim is in /etc/ld.so.preload).  A program that clears or rebuilds
 * its environment before exec (env -i, sudo, daemons that sanitise the
 * environment, nginx's binary upgrade) drops it, and its children run
 * without the shim.
 *
 * With CTXSHIM_FOLLOW_EXEC=1, and only then, every exec the shim can see
 * gets an environment with the shim in LD_PRELOAD (appended to what is
 * there; nothing happens if a library of that name is already listed) and
 * CTXSHIM_FOLLOW_EXEC=1 itself, so the setting follows the process tree
 * through the next exec too.  Nothing else is put back: the new program
 * runs with the default configuration unless its environment has one.
 *
 * With CTXSHIM_EXEC_TRACEPARENT=1, and only then, an exec from a thread
 * that publishes a context hands it to the new program the way
 * OpenTelemetry's environment-variable carriers do: TRACEPARENT with the
 * thread's trace-id, its span-id as the parent (the incoming parent-id
 * with CTXSHIM_PROPAGATE=transparent, as for outgoing requests) and its
 * flags, and TRACESTATE with its tracestate.  Both replace whatever the
 * environment had under those names (a TRACESTATE of another trace is
 * dropped with nothing in its place).  CTXSHIM_TRACEPARENT_PID names the
 * process that execs (which the new program keeps), and
 * CTXSHIM_TRACEPARENT_PPID the parent of a posix_spawn()ed one (whose pid
 * is not known before): a CGI program takes TRACEPARENT over its
 * request's HTTP_TRACEPARENT only when it is its own (shim.c), not one
 * its server inherited and passed on.  The new program continues the
 * trace in a child span if it runs the shim (preload/shim.c), or in its
 * own OpenTelemetry SDK.  A CGI server started with it hands its CGI
 * programs the request's context with its own span as their parent.
 * Without a context (a thread between requests, CTXSHIM_NEW_TRACES=0's
 * zero ids) the environment is passed as it is.  Off by default: the new
 * program sees an environment its parent did not write.
 *
 * Covered: execve, execv, execvp, execvpe, execl, execle, execlp, fexecve,
 * execveat, an exec in a fork() or vfork() child (which runs with the
 * forking thread's context), and posix_spawn() and posix_spawnp(), which
 * exec through glibc-internal calls and so get the same environment here,
 * before the call.  glibc has two of each: the GLIBC_2.15 ones every
 * program linked since 2011 references, and older compatibility ones
 * that also try the shell on ENOEXEC.  Ours are defined at GLIBC_2.15
 * only, so that an old binary's references reach the old functions
 * untouched, and as its default version (".symver ..., name@@NODE,
 * remove", and that node in preload/ctxshim.sym), so that a lookup
 * without a version finds them too: an interposer preloaded before the
 * shim (ASan's posix_spawn) passes its calls on to ours.  Not
 * covered: system() and popen(), which spawn through glibc-internal calls
 * with environ; they pass it as it is.
 *
 * An exec may run in a vfork() child, which shares the parent's memory:
 * nothing here writes shared state, allocates with malloc or locks.  The
 * new environment is built on the stack; only an unusually large one (more
 * than 4 KiB of pointers and strings) goes to an anonymous mapping, which
 * is unmapped if the exec fails, and which a vfork parent keeps after its
 * child's exec succeeds.  The caller's environ is never modified.  The real
 * functions and the shim's own path are looked up at load time, since a
 * vfork child must not call dlsym.
 *
 * Such a child may also run on a small stack of its own (posix_spawn-like
 * helpers built on clone(CLONE_VM | CLONE_VFORK) give it a few KiB), which
 * exec without the shim fits in.  So when the environment stays as it is
 * (the default: neither setting on, or no context to hand on) every hook
 * is a few tests and a tail call to the real function, with no frame
 * to speak of: the 4 KiB buffer lives only in the noinline
 * hook_exec_*_follow() functions, and the execl family sizes its argument
 * vector from the argument count, as glibc's execl does (posix/execl.c), on
 * the stack up to EXEC_ARGV_STACK entries and in a mapping beyond. */
#include "config.h"

#include "hooks.h"

#include "cfg.h"
#include "log.h"
#include "w3c.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXEC_STACK_BYTES 4096
#define EXEC_ARGV_STACK  256

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
typedef int (*execveat_fn)(int, const char *, char *const[], char *const[], int);
typedef int (*posix_spawn_fn)(pid_t *,
			      const char *,
			      const posix_spawn_file_actions_t *,
			      const posix_spawnattr_t *,
			      char *const[],
			      char *const[]);

/* glibc's current posix_spawn and posix_spawnp (see the top). */
#define EXEC_SPAWN_NODE "GLIBC_2.15"

HOOK_EXPORT int execve(const char *path, char *const argv[], char *const envp[]);
HOOK_EXPORT int execv(const char *path, char *const argv[]);
HOOK_EXPORT int execvp(const char *file, char *const argv[]);
HOOK_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]);
HOOK_EXPORT int execl(const char *path, const char *arg, ...);
HOOK_EXPORT int execle(const char *path, const char *arg, ...);
HOOK_EXPORT int execlp(const char *file, const char *arg, ...);
HOOK_EXPORT int fexecve(int fd, char *const argv[], char *const envp[]);
HOOK_EXPORT int execveat(
	int dirfd, const char *path, char *const argv[], char *const envp[], int flags);
HOOK_EXPORT int ctxshim_posix_spawn_215(pid_t *pid,
					const char *path,
					const posix_spawn_file_actions_t *actions,
					const posix_spawnattr_t *attr,
					char *const argv[],
					char *const envp[]);
HOOK_EXPORT int ctxshim_posix_spawnp_215(pid_t *pid,
					 const char *file,
					 const posix_spawn_file_actions_t *actions,
					 const posix_spawnattr_t *attr,
					 char *const argv[],
					 char *const envp[]);

static pthread_once_t bind_once = PTHREAD_ONCE_INIT;
static execve_fn real_execve_fn;
static execv_fn real_execv_fn;
static execv_fn real_execvp_fn;
static execve_fn real_execvpe_fn;
static fexecve_fn real_fexecve_fn;
static execveat_fn real_execveat_fn;
static posix_spawn_fn real_posix_spawn_fn;
static posix_spawn_fn real_posix_spawnp_fn;

/* The shim as the new program's loader should find it; empty when
 * CTXSHIM_FOLLOW_EXEC is off or the path is unknown. */
static char shim_path[PATH_MAX];
static const char *shim_base;

static const char preload_var[] = "LD_PRELOAD=";
static const char follow_var[] = "CTXSHIM_FOLLOW_EXEC=";
static const char follow_entry[] = "CTXSHIM_FOLLOW_EXEC=1";
static const char tp_var[] = "TRACEPARENT=";
static const char ts_var[] = "TRACESTATE=";
static const char tp_pid_var[] = "CTXSHIM_TRACEPARENT_PID=";
static const char tp_ppid_var[] = "CTXSHIM_TRACEPARENT_PPID=";

static void
hook_exec_bind_once(void)
{
	real_execve_fn =
		(execve_fn)ctxshim_bind("execve", NULL, (const void *)execve, true);
	real_execv_fn =
		(execv_fn)ctxshim_bind("execv", NULL, (const void *)execv, true);
	real_execvp_fn =
		(execv_fn)ctxshim_bind("execvp", NULL, (const void *)execvp, true);
	real_execvpe_fn =
		(execve_fn)ctxshim_bind("execvpe", NULL, (const void *)execvpe, true);
	real_fexecve_fn =
		(fexecve_fn)ctxshim_bind("fexecve", NULL, (const void *)fexecve, true);
	/* glibc >= 2.34 */
	real_execveat_fn = (execveat_fn)ctxshim_bind("execveat", NULL,
						     (const void *)execveat, false);
	real_posix_spawn_fn = (posix_spawn_fn)ctxshim_bind(
		"posix_spawn", EXEC_SPAWN_NODE, (const void *)ctxshim_posix_spawn_215,
		true);
	real_posix_spawnp_fn = (posix_spawn_fn)ctxshim_bind(
		"posix_spawnp", EXEC_SPAWN_NODE, (const void *)ctxshim_posix_spawnp_215,
		true);
}

static void
hook_exec_find_self(void)
{
	Dl_info info;
	char *r;

	/* A static function: the exported names may resolve to another
	 * preloaded library that interposes them too. */
	if (!dladdr((const void *)hook_exec_find_self, &info) || !info.dli_fname ||
	    !*info.dli_fname) {
		ctxshim_log("CTXSHIM_FOLLOW_EXEC: cannot find the shim's own path");
		return;
	}
	/* A relative LD_PRELOAD entry means nothing after a chdir(). */
	r = realpath(info.dli_fname, shim_path);
	if (!r) {
		if (strlen(info.dli_fname) >= sizeof(shim_path))
			return;
		strcpy(shim_path, info.dli_fname);
	}
	shim_base = strrchr(shim_path, '/');
	shim_base = shim_base ? shim_base + 1 : shim_path;
	ctxshim_log("CTXSHIM_FOLLOW_EXEC: exec keeps %s in LD_PRELOAD", shim_path);
}

/* After the shim's constructor (priority 101), which loaded the
 * configuration. */
__attribute__((constructor)) static void
hook_exec_init(void)
{
	int saved_errno = errno;

	pthread_once(&bind_once, hook_exec_bind_once);
	if (ctxshim_active() && ctxshim_cfg.follow_exec)
		hook_exec_find_self();
	errno = saved_errno;
}

static inline void
hook_exec_bind(void)
{
	pthread_once(&bind_once, hook_exec_bind_once);
}

static bool
hook_exec_following(void)
{
	return ctxshim_active() && ctxshim_cfg.follow_exec && shim_base;
}

/* The context an exec hands on with CTXSHIM_EXEC_TRACEPARENT=1: the
 * calling thread's (in a vfork child, the parent thread's: only read),
 * unless it has none worth passing (CTXSHIM_NEW_TRACES=0 publishes zero
 * ids). */
static const struct ctxshim_ctx *
hook_exec_ctx(void)
{
	const struct ctxshim_ctx *c;

	if (!ctxshim_cfg.exec_traceparent || !ctxshim_active())
		return NULL;
	c = ctxshim_current();
	if (!c || w3c_id_is_zero(c->trace_id, sizeof(c->trace_id)) ||
	    w3c_id_is_zero(c->span_id, sizeof(c->span_id)))
		return NULL;
	return c;
}

/* Does this exec get another environment than the one it is given? */
static inline bool
hook_exec_changes_env(void)
{
	return hook_exec_following() || hook_exec_ctx();
}

static bool
hook_exec_is_var(const char *entry, const char *var, size_t var_len)
{
	return strncmp(entry, var, var_len) == 0;
}

/* Does the LD_PRELOAD value (entries separated by ':' or ' ', as ld.so
 * reads them) name a library like ours? */
static bool
hook_exec_lists_shim(const char *v)
{
	size_t base_len = strlen(shim_base);

	while (*v) {
		size_t n = strcspn(v, ": ");
		const char *slash = memrchr(v, '/', n);
		const char *b = slash ? slash + 1 : v;
		size_t bn = n - (size_t)(b - v);

		if ((n == strlen(shim_path) && memcmp(v, shim_path, n) == 0) ||
		    (bn == base_len && memcmp(b, shim_base, bn) == 0))
			return true;
		v += n;
		if (*v)
			v++;
	}
	return false;
}

/* Stack space, or a mapping when that is too small. */
struct exec_buf {
	char stack[EXEC_STACK_BYTES] __attribute__((aligned(16)));
	void *map;
	size_t map_len;
};

static void *
hook_exec_buf_get(struct exec_buf *b, size_t need)
{
	if (need <= sizeof(b->stack))
		return b->stack;
	b->map = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		      -1, 0);
	if (b->map == MAP_FAILED) {
		b->map = NULL;
		return NULL;
	}
	b->map_len = need;
	return b->map;
}

static void
hook_exec_buf_release(struct exec_buf *b)
{
	int saved_errno = errno;

	if (b->map)
		(void)munmap(b->map, b->map_len);
	b->map = NULL;
	errno = saved_errno;
}

/* v in decimal at out, NUL-terminated (at most 10 digits and the NUL). */
static void
hook_exec_uint(char *out, unsigned v)
{
	char d[10];
	int n = 0;

	do
		d[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (n > 0)
		*out++ = d[--n];
	*out = '\0';
}

/* envp with what this exec adds, in b: the shim in LD_PRELOAD and
 * CTXSHIM_FOLLOW_EXEC=1 when following, TRACEPARENT and TRACESTATE from
 * the thread's context (hook_exec_ctx()) with CTXSHIM_TRACEPARENT_PID
 * (this process) or, for a spawned child (spawn), CTXSHIM_TRACEPARENT_PPID
 * (its parent: this process); envp itself when it has all of
 * that already or when there is no room.  ld.so uses the last LD_PRELOAD
 * entry of the environment, so that is the one we extend; the copy has
 * just one, and at most one TRACEPARENT and TRACESTATE, ours.  Everything
 * else keeps its order. */
static char *const *
hook_exec_env(char *const *envp, struct exec_buf *b, bool spawn)
{
	const struct ctxshim_ctx *c = hook_exec_ctx();
	const char *preload = NULL;
	bool following = hook_exec_following(), has_follow = false, listed = true;
	size_t n, need, k = 0, i, old_len = 0, path_len = 0, ts_len = 0;
	char **out, *p;

	for (n = 0; envp && envp[n]; n++) {
		if (hook_exec_is_var(envp[n], preload_var, sizeof(preload_var) - 1))
			preload = envp[n] + sizeof(preload_var) - 1;
		else if (hook_exec_is_var(envp[n], follow_var, sizeof(follow_var) - 1))
			has_follow = true;
	}
	if (following)
		listed = preload && hook_exec_lists_shim(preload);
	else
		has_follow = true; /* nothing of the sort to add */
	if (listed && has_follow && !c)
		return envp;
	/* n entries, LD_PRELOAD, CTXSHIM_FOLLOW_EXEC, TRACEPARENT, TRACESTATE,
	 * CTXSHIM_TRACEPARENT_PID or _PPID, NULL; then the strings */
	need = (n + 6) * sizeof(char *);
	if (!listed) {
		old_len = preload ? strlen(preload) : 0;
		path_len = strlen(shim_path);
		need += sizeof(preload_var) + old_len + 1 + path_len + 1;
	}
	if (c) {
		if (c->tracestate_len <= sizeof(c->tracestate))
			ts_len = c->tracestate_len;
		need += sizeof(tp_var) + W3C_TRACEPARENT_LEN + sizeof(ts_var) + ts_len +
			sizeof(tp_ppid_var) + 10;
	}
	out = hook_exec_buf_get(b, need);
	if (!out)
		return envp;
	for (i = 0; i < n; i++) {
		if (!listed &&
		    hook_exec_is_var(envp[i], preload_var, sizeof(preload_var) - 1))
			continue;
		if (c &&
		    (hook_exec_is_var(envp[i], tp_var, sizeof(tp_var) - 1) ||
		     hook_exec_is_var(envp[i], ts_var, sizeof(ts_var) - 1) ||
		     hook_exec_is_var(envp[i], tp_pid_var, sizeof(tp_pid_var) - 1) ||
		     hook_exec_is_var(envp[i], tp_ppid_var, sizeof(tp_ppid_var) - 1)))
			continue;
		out[k++] = envp[i];
	}
	p = (char *)(out + n + 6);
	if (!listed) {
		out[k++] = p;
		memcpy(p, preload_var, sizeof(preload_var) - 1);
		p += sizeof(preload_var) - 1;
		if (old_len) {
			memcpy(p, preload, old_len);
			p += old_len;
			*p++ = ':';
		}
		memcpy(p, shim_path, path_len + 1);
		p += path_len + 1;
	}
	if (!has_follow)
		out[k++] = (char *)follow_entry;
	if (c) {
		const uint8_t *parent =
			ctxshim_cfg.propagate == CTXSHIM_PROPAGATE_TRANSPARENT &&
					c->has_parent
				? c->parent_id
				: c->span_id;

		out[k++] = p;
		memcpy(p, tp_var, sizeof(tp_var) - 1);
		p += sizeof(tp_var) - 1;
		p += w3c_traceparent_format(p, c->trace_id, parent, c->flags) + 1;
		if (ts_len) {
			out[k++] = p;
			memcpy(p, ts_var, sizeof(ts_var) - 1);
			p += sizeof(ts_var) - 1;
			memcpy(p, c->tracestate, ts_len);
			p[ts_len] = '\0';
			p += ts_len + 1;
		}
		out[k++] = p;
		if (spawn) {
			memcpy(p, tp_ppid_var, sizeof(tp_ppid_var) - 1);
			p += sizeof(tp_ppid_var) - 1;
		} else {
			memcpy(p, tp_pid_var, sizeof(tp_pid_var) - 1);
			p += sizeof(tp_pid_var) - 1;
		}
		hook_exec_uint(p, (unsigned)getpid());
	}
	out[k] = NULL;
	return out;
}

/* The following variants: the 4 KiB struct exec_buf is their frame, never
 * the pass-through's (noinline keeps gcc from merging the frames, cold
 * moves them out of the way). */
#define EXEC_FOLLOW __attribute__((noinline, cold))

static EXEC_FOLLOW int
hook_exec_execve_follow(const char *path, char *const argv[], char *const envp[])
{
	struct exec_buf b = {.map = NULL};
	int r;

	r = real_execve_fn(path, argv, hook_exec_env(envp, &b, false));
	hook_exec_buf_release(&b);
	return r;
}

static EXEC_FOLLOW int
hook_exec_execvpe_follow(const char *file, char *const argv[], char *const envp[])
{
	struct exec_buf b = {.map = NULL};
	int r;

	r = real_execvpe_fn(file, argv, hook_exec_env(envp, &b, false));
	hook_exec_buf_release(&b);
	return r;
}

static EXEC_FOLLOW int
hook_exec_fexecve_follow(int fd, char *const argv[], char *const envp[])
{
	struct exec_buf b = {.map = NULL};
	int r;

	r = real_fexecve_fn(fd, argv, hook_exec_env(envp, &b, false));
	hook_exec_buf_release(&b);
	return r;
}

static EXEC_FOLLOW int
hook_exec_execveat_follow(
	int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
	struct exec_buf b = {.map = NULL};
	int r;

	r = real_execveat_fn(dirfd, path, argv, hook_exec_env(envp, &b, false), flags);
	hook_exec_buf_release(&b);
	return r;
}

/* posix_spawn or posix_spawnp (real): the call returns after the child
 * has exec'd or failed to, so the environment in our frame outlives its
 * use.  It reports errors by its result: errno stays as the real call
 * leaves it, whatever building the environment did. */
static EXEC_FOLLOW int
hook_exec_spawn_follow(posix_spawn_fn real,
		       pid_t *pid,
		       const char *path,
		       const posix_spawn_file_actions_t *actions,
		       const posix_spawnattr_t *attr,
		       char *const argv[],
		       char *const envp[])
{
	struct exec_buf b = {.map = NULL};
	int saved_errno = errno, r;
	char *const *env = hook_exec_env(envp, &b, true);

	errno = saved_errno;
	r = real(pid, path, actions, attr, argv, env);
	hook_exec_buf_release(&b);
	return r;
}

static inline int
hook_exec_spawn(posix_spawn_fn *real,
		pid_t *pid,
		const char *path,
		const posix_spawn_file_actions_t *actions,
		const posix_spawnattr_t *attr,
		char *const argv[],
		char *const envp[])
{
	hook_exec_bind();
	if (!hook_exec_changes_env())
		return (*real)(pid, path, actions, attr, argv, envp);
	return hook_exec_spawn_follow(*real, pid, path, actions, attr, argv, envp);
}

static inline int
hook_exec_execve(const char *path, char *const argv[], char *const envp[])
{
	hook_exec_bind();
	if (!hook_exec_changes_env())
		return real_execve_fn(path, argv, envp);
	return hook_exec_execve_follow(path, argv, envp);
}

static inline int
hook_exec_execvpe(const char *file, char *const argv[], char *const envp[])
{
	hook_exec_bind();
	if (!hook_exec_changes_env())
		return real_execvpe_fn(file, argv, envp);
	return hook_exec_execvpe_follow(file, argv, envp);
}

static inline int
hook_exec_execv(const char *path, char *const argv[])
{
	hook_exec_bind();
	if (!hook_exec_changes_env())
		return real_execv_fn(path, argv);
	return hook_exec_execve_follow(path, argv, environ);
}

static inline int
hook_exec_execvp(const char *file, char *const argv[])
{
	hook_exec_bind();
	if (!hook_exec_changes_env())
		return real_execvp_fn(file, argv);
	return hook_exec_execvpe_follow(file, argv, environ);
}

static inline int
hook_exec_fexecve(int fd, char *const argv[], char *const envp[])
{
	hook_exec_bind();
	if (!hook_exec_changes_env())
		return real_fexecve_fn(fd, argv, envp);
	return hook_exec_fexecve_follow(fd, argv, envp);
}

static inline int
hook_exec_execveat(
	int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
	hook_exec_bind();
	if (!real_execveat_fn) {
		errno = ENOSYS;
		return -1;
	}
	if (!hook_exec_changes_env())
		return real_execveat_fn(dirfd, path, argv, envp, flags);
	return hook_exec_execveat_follow(dirfd, path, argv, envp, flags);
}

/* The execl family: the arguments as a vector, then the v variant, as
 * glibc's own execl does.  The vector is sized from the count (alloca, as
 * glibc's VLA), so a short call costs a few words of stack. */
enum exec_l_kind { EXEC_L, EXEC_LE, EXEC_LP };

static int
hook_exec_l(enum exec_l_kind kind, const char *path, const char *arg, va_list ap)
{
	char **argv;
	char *const *envp = environ;
	void *map = NULL;
	size_t argc = 1, map_len = 0, i;
	va_list count;
	int r, saved_errno;

	va_copy(count, ap);
	if (arg)
		while (va_arg(count, const char *))
			argc++;
	else
		argc = 0;
	va_end(count);
	if (argc >= INT_MAX) {
		errno = E2BIG;
		return -1;
	}
	if (argc + 1 > EXEC_ARGV_STACK) {
		map_len = (argc + 1) * sizeof(char *);
		map = mmap(NULL, map_len, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (map == MAP_FAILED) {
			errno = ENOMEM;
			return -1;
		}
		argv = map;
	} else {
		argv = __builtin_alloca((argc + 1) * sizeof(char *));
	}
	if (argc)
		argv[0] = (char *)arg;
	for (i = 1; i < argc; i++)
		argv[i] = va_arg(ap, char *);
	argv[argc] = NULL;
	if (arg)
		(void)va_arg(ap, char *); /* the terminating NULL */
	if (kind == EXEC_LE)
		envp = va_arg(ap, char *const *);

	if (kind == EXEC_LP)
		r = hook_exec_execvp(path, argv);
	else if (kind == EXEC_LE)
		r = hook_exec_execve(path, argv, envp);
	else
		r = hook_exec_execv(path, argv);
	saved_errno = errno;
	if (map)
		(void)munmap(map, map_len);
	errno = saved_errno;
	return r;
}

HOOK_EXPORT int
execve(const char *path, char *const argv[], char *const envp[])
{
	return hook_exec_execve(path, argv, envp);
}

HOOK_EXPORT int
execv(const char *path, char *const argv[])
{
	return hook_exec_execv(path, argv);
}

HOOK_EXPORT int
execvp(const char *file, char *const argv[])
{
	return hook_exec_execvp(file, argv);
}

HOOK_EXPORT int
execvpe(const char *file, char *const argv[], char *const envp[])
{
	return hook_exec_execvpe(file, argv, envp);
}

HOOK_EXPORT int
fexecve(int fd, char *const argv[], char *const envp[])
{
	return hook_exec_fexecve(fd, argv, envp);
}

HOOK_EXPORT int
execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
	return hook_exec_execveat(dirfd, path, argv, envp, flags);
}

HOOK_EXPORT int
execl(const char *path, const char *arg, ...)
{
	va_list ap;
	int r;

	va_start(ap, arg);
	r = hook_exec_l(EXEC_L, path, arg, ap);
	va_end(ap);
	return r;
}

HOOK_EXPORT int
execle(const char *path, const char *arg, ...)
{
	va_list ap;
	int r;

	va_start(ap, arg);
	r = hook_exec_l(EXEC_LE, path, arg, ap);
	va_end(ap);
	return r;
}

HOOK_EXPORT int
execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	int r;

	va_start(ap, arg);
	r = hook_exec_l(EXEC_LP, file, arg, ap);
	va_end(ap);
	return r;
}

HOOK_EXPORT int
ctxshim_posix_spawn_215(pid_t *pid,
			const char *path,
			const posix_spawn_file_actions_t *actions,
			const posix_spawnattr_t *attr,
			char *const argv[],
			char *const envp[])
{
	return hook_exec_spawn(&real_posix_spawn_fn, pid, path, actions, attr, argv,
			       envp);
}

HOOK_EXPORT int
ctxshim_posix_spawnp_215(pid_t *pid,
			 const char *file,
			 const posix_spawn_file_actions_t *actions,
			 const posix_spawnattr_t *attr,
			 char *const argv[],
			 char *const envp[])
{
	return hook_exec_spawn(&real_posix_spawnp_fn, pid, file, actions, attr, argv,
			       envp);
}

__asm__(".symver ctxshim_posix_spawn_215, posix_spawn@@" EXEC_SPAWN_NODE ", remove");
__asm__(".symver ctxshim_posix_spawnp_215, posix_spawnp@@" EXEC_SPAWN_NODE ", remove");
