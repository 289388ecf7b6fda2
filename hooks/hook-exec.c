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
 * there; nothing happens if a library of that name is already listed, by
 * an absolute path or a bare name) and
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
 * nothing here allocates with malloc or locks, and the only shared state
 * written is the thread's note of a mapping (see struct exec_map).  The
 * new environment is built on the stack, sized to what it needs; only an
 * unusually large one (more than 4 KiB of pointers and strings) goes to
 * an anonymous mapping, which is unmapped when the exec fails, and by the
 * thread's next such exec when a vfork child's exec succeeded.  The
 * caller's environ is never modified, and an environment the hook cannot
 * read (a bad pointer, which the real call reports with EFAULT) is passed
 * on as it is.  The real functions and the shim's own path are looked up
 * at load time, since a vfork child must not call dlsym.
 *
 * Such a child may also run on a small stack of its own (posix_spawn-like
 * helpers built on clone(CLONE_VM | CLONE_VFORK) give it a few KiB, a
 * crash handler on its signal stack execs a reporter), which exec without
 * the shim fits in.  So when the environment stays as it is (the default:
 * neither setting on, or no context to hand on) every hook is a few tests
 * and a tail call to the real function, with no frame to speak of; the
 * noinline hook_exec_follow() takes what the new environment needs, and
 * the execl family sizes its argument vector from the argument count on
 * the stack, whatever the count, exactly as glibc's execl does
 * (posix/execl.c, a VLA, "to avoid dynamic memory allocation" in a signal
 * handler or a vfork child), and like it stops counting at INT_MAX with
 * E2BIG: a call glibc's execl makes, ours makes too, with a few words
 * more of stack.  A mapping for a long vector failed
 * with ENOMEM where glibc's would not, and the one a vfork child's exec
 * left behind stayed in the parent. */
#include "config.h"

#include "hooks.h"

#include "cfg.h"
#include "log.h"
#include "sys.h"
#include "w3c.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXEC_STACK_BYTES 4096

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
	const char *name;

	/* A static function: the exported names may resolve to another
	 * preloaded library that interposes them too. */
	if (!dladdr((const void *)hook_exec_find_self, &info) || !info.dli_fname ||
	    !*info.dli_fname) {
		ctxshim_log("CTXSHIM_FOLLOW_EXEC: cannot find the shim's own path");
		return;
	}
	/* The name ld.so loaded us by when it is absolute: what LD_PRELOAD
	 * or /etc/ld.so.preload lists, so that hook_exec_lists_shim() finds
	 * it there (realpath() would resolve a symlink to another name).
	 * Only a relative one, which means nothing after a chdir(), is
	 * resolved. */
	name = info.dli_fname;
	if (name[0] != '/') {
		if (!realpath(name, shim_path))
			shim_path[0] = '\0';
	} else if (strlen(name) < sizeof(shim_path)) {
		strcpy(shim_path, name);
	}
	/* ld.so splits LD_PRELOAD at ':' and ' ': such a path would make the
	 * new program print an error and run without us. */
	if (!shim_path[0] || strpbrk(shim_path, ": ")) {
		ctxshim_log("CTXSHIM_FOLLOW_EXEC: %s cannot be put in LD_PRELOAD; "
			    "exec will not keep the shim",
			    name);
		shim_path[0] = '\0';
		return;
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
 * reads them) name a library like ours?  Not by a relative path: that
 * names a file from the directory the exec runs in, which a daemon's
 * chdir() makes another than the one ld.so found us from (the reason
 * hook_exec_find_self() resolves one); ld.so loads a file it reaches by
 * two names once. */
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
		    ((!slash || *v == '/') && bn == base_len &&
		     memcmp(b, shim_base, bn) == 0))
			return true;
		v += n;
		if (*v)
			v++;
	}
	return false;
}

/* A mapping made in a vfork() child (or a clone(CLONE_VM) one) whose exec
 * succeeds stays in the parent's address space, and nobody could unmap
 * it.  The child runs on its parent's thread pointer, so it notes the
 * mapping in this thread-local slot before the exec, and the exec's
 * failure takes it back; the parent thread's next exec that needs a
 * mapping unmaps what is noted first.  At most one such mapping per
 * thread remains, not one per exec.  A fork() child writes its own copy
 * of the slot.
 *
 * The slot is one pointer, to the mapping's start, where its length and
 * its maker are: it is taken with an exchange and given back with a
 * compare-and-swap, so that a signal handler's exec (the only other user
 * of the slot while this thread or its vfork child runs) finds a whole
 * note or none, and only the frame that took a note out acts on it.
 * Three fields read and written one by one let a handler's exec unmap a
 * leftover a second time while the exec it interrupted mapped its own
 * buffer, usually at the same address, then filled it: a crash. */
struct exec_map {
	size_t len;
	pid_t pid; /* the process whose hook made it */
};
#define EXEC_MAP_HDR 16 /* the environment after it, 8-aligned */
_Static_assert(sizeof(struct exec_map) <= EXEC_MAP_HDR, "the header fits");

static __thread struct exec_map *exec_map_note;

/* Is m a leftover: made by another process than this one (self) and its
 * parent (which, in a vfork child, is the process whose hook frame this
 * one interrupted: that frame still uses it)? */
static bool
hook_exec_leftover(const struct exec_map *m, pid_t self)
{
	return m->pid != self && m->pid != (pid_t)syscall(SYS_getppid);
}

/* len bytes for the new environment, noted in exec_map_note; *outer: the
 * note taken out of the slot, which a hook frame this one interrupted
 * still uses, for hook_exec_unmap() to put back.  Keeps errno. */
static void *
hook_exec_map(struct exec_map **outer, size_t len)
{
	int saved_errno = errno;
	pid_t self = (pid_t)syscall(SYS_getpid);
	struct exec_map *m, *left;

	*outer = __atomic_exchange_n(&exec_map_note, NULL, __ATOMIC_SEQ_CST);
	if (*outer && hook_exec_leftover(*outer, self)) {
		(void)munmap(*outer, (*outer)->len);
		*outer = NULL;
	}
	len += EXEC_MAP_HDR;
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		m = NULL;
	} else {
		m->len = len;
		m->pid = self;
	}
	/* The slot is empty again unless a handler's vfork child's exec
	 * succeeded meanwhile and left its mapping there. */
	left = __atomic_exchange_n(&exec_map_note, m ? m : *outer, __ATOMIC_SEQ_CST);
	if (left && hook_exec_leftover(left, self))
		(void)munmap(left, left->len);
	errno = saved_errno;
	if (!m) {
		*outer = NULL;
		return NULL;
	}
	return (char *)m + EXEC_MAP_HDR;
}

/* After the exec failed (or a spawn returned): buf (NULL, or what
 * hook_exec_map() gave) is ours to unmap, and the slot gets outer back if
 * it still notes buf's mapping.  Keeps errno. */
static void
hook_exec_unmap(struct exec_map *outer, void *buf)
{
	int saved_errno = errno;
	struct exec_map *m, *noted;

	if (!buf)
		return;
	m = noted = (struct exec_map *)(void *)((char *)buf - EXEC_MAP_HDR);
	/* Else a handler's vfork child left its mapping there: it stays, a
	 * leftover for the next exec. */
	(void)__atomic_compare_exchange_n(&exec_map_note, &noted, outer, false,
					  __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	(void)munmap(m, m->len);
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

/* An environment with a bad pointer is the application's bug, which the
 * real call reports with EFAULT: we must not fault on it first.  Each page
 * the scan reads is probed once with sys_readable8() (the select hook's
 * probe, hook-socket.c); the environment's strings and its array are
 * usually on one or two pages. */
struct exec_probe {
	uintptr_t page; /* the last page found readable; 1: none yet */
};

static bool
hook_exec_readable(struct exec_probe *pr, uintptr_t a)
{
	uintptr_t page = a & ~(uintptr_t)4095;

	if (page == pr->page)
		return true;
	/* page + 8: never NULL, which the call takes for "no set" */
	if (!sys_readable8(page + 8))
		return false;
	pr->page = page;
	return true;
}

/* Can the string s be read up to its NUL or its first max bytes? */
static bool
hook_exec_str_readable(struct exec_probe *pr, const char *s, size_t max)
{
	uintptr_t a = (uintptr_t)s;
	size_t i;

	for (i = 0; i < max; i++) {
		if ((i == 0 || ((a + i) & 4095) == 0) && !hook_exec_readable(pr, a + i))
			return false;
		if (!s[i])
			break;
	}
	return true;
}

/* What an exec adds to its environment (hook_exec_env_scan()). */
struct exec_env {
	const struct ctxshim_ctx *c; /* the context to hand on, or NULL */
	const char *preload;         /* the value of the last LD_PRELOAD */
	size_t n;                    /* entries */
	size_t old_len, path_len, ts_len;
	bool listed;     /* LD_PRELOAD needs no change */
	bool has_follow; /* CTXSHIM_FOLLOW_EXEC needs no adding */
};

/* The bytes the new environment needs (hook_exec_env_fill()), or 0 when
 * envp itself will do: it has all that this exec adds already, or it
 * cannot be read (the real call reports that).  Keeps errno.  ld.so uses
 * the last LD_PRELOAD entry of the environment, so that is the one we
 * extend. */
static size_t
hook_exec_env_scan(char *const *envp, struct exec_env *e)
{
	struct exec_probe pr = {1};
	bool following = hook_exec_following();
	int saved_errno = errno;
	size_t n, need = 0;

	*e = (struct exec_env){.c = hook_exec_ctx(), .listed = true};
	for (n = 0; envp; n++) {
		/* the array: its first word, and each word that starts a page
		 * or straddles into one */
		if ((n == 0 || ((uintptr_t)&envp[n] & 4095) < sizeof(char *) ||
		     ((uintptr_t)&envp[n] & 4095) > 4096 - sizeof(char *)) &&
		    (!hook_exec_readable(&pr, (uintptr_t)&envp[n]) ||
		     !hook_exec_readable(&pr,
					 (uintptr_t)&envp[n] + sizeof(char *) - 1)))
			goto bad;
		if (!envp[n])
			break;
		/* as far as the longest name compared below */
		if (!hook_exec_str_readable(&pr, envp[n], sizeof(tp_ppid_var)))
			goto bad;
		if (hook_exec_is_var(envp[n], preload_var, sizeof(preload_var) - 1))
			e->preload = envp[n] + sizeof(preload_var) - 1;
		else if (hook_exec_is_var(envp[n], follow_var, sizeof(follow_var) - 1))
			e->has_follow = true;
	}
	e->n = n;
	if (e->preload && !hook_exec_str_readable(&pr, e->preload, SIZE_MAX))
		goto bad;
	errno = saved_errno;
	if (following)
		e->listed = e->preload && hook_exec_lists_shim(e->preload);
	else
		e->has_follow = true; /* nothing of the sort to add */
	if (e->listed && e->has_follow && !e->c)
		return 0;
	/* n entries, LD_PRELOAD, CTXSHIM_FOLLOW_EXEC, TRACEPARENT, TRACESTATE,
	 * CTXSHIM_TRACEPARENT_PID or _PPID, NULL; then the strings */
	need = (n + 6) * sizeof(char *);
	if (!e->listed) {
		e->old_len = e->preload ? strlen(e->preload) : 0;
		e->path_len = strlen(shim_path);
		need += sizeof(preload_var) + e->old_len + 1 + e->path_len + 1;
	}
	if (e->c) {
		if (e->c->tracestate_len <= sizeof(e->c->tracestate))
			e->ts_len = e->c->tracestate_len;
		need += sizeof(tp_var) + W3C_TRACEPARENT_LEN + sizeof(ts_var) +
			e->ts_len + sizeof(tp_ppid_var) + 10;
	}
	return need;
bad:
	errno = saved_errno;
	return 0;
}

/* envp with what this exec adds (e, from hook_exec_env_scan()), at out:
 * the shim in LD_PRELOAD and CTXSHIM_FOLLOW_EXEC=1 when following,
 * TRACEPARENT and TRACESTATE from the thread's context (hook_exec_ctx())
 * with CTXSHIM_TRACEPARENT_PID (this process) or, for a spawned child
 * (spawn), CTXSHIM_TRACEPARENT_PPID (its parent: this process).  The copy
 * has just one LD_PRELOAD, and at most one TRACEPARENT and TRACESTATE,
 * ours.  Everything else keeps its order. */
static char *const *
hook_exec_env_fill(char *const *envp, const struct exec_env *e, void *buf, bool spawn)
{
	const struct ctxshim_ctx *c = e->c;
	char **out = buf, *p;
	size_t k = 0, i;

	for (i = 0; i < e->n; i++) {
		if (!e->listed &&
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
	p = (char *)(out + e->n + 6);
	if (!e->listed) {
		out[k++] = p;
		memcpy(p, preload_var, sizeof(preload_var) - 1);
		p += sizeof(preload_var) - 1;
		if (e->old_len) {
			memcpy(p, e->preload, e->old_len);
			p += e->old_len;
			*p++ = ':';
		}
		memcpy(p, shim_path, e->path_len + 1);
		p += e->path_len + 1;
	}
	if (!e->has_follow)
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
		if (e->ts_len) {
			out[k++] = p;
			memcpy(p, ts_var, sizeof(ts_var) - 1);
			p += sizeof(ts_var) - 1;
			memcpy(p, c->tracestate, e->ts_len);
			p[e->ts_len] = '\0';
			p += e->ts_len + 1;
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

/* The calls whose environment we change, with their arguments. */
enum exec_kind {
	EXEC_EXECVE,
	EXEC_EXECVPE,
	EXEC_FEXECVE,
	EXEC_EXECVEAT,
	EXEC_SPAWN,
	EXEC_SPAWNP,
};

struct exec_call {
	enum exec_kind kind;
	int fd, flags;
	const char *path;
	char *const *argv;
	char *const *envp;
	pid_t *pid;
	const posix_spawn_file_actions_t *actions;
	const posix_spawnattr_t *attr;
};

/* x with the environment this exec gets.  The new environment is on the
 * stack, sized to what it needs (often a few hundred bytes: the exec may
 * run on a small stack, a signal handler's or a clone() child's), in a
 * mapping beyond EXEC_STACK_BYTES.  The pass-through never comes here
 * (noinline keeps gcc from merging the frames, cold moves it out of the
 * way).  A spawn returns after its child has exec'd or failed to, so its
 * environment outlives its use; it reports errors by its result, and
 * errno stays as the real call leaves it. */
static __attribute__((noinline, cold)) int
hook_exec_follow(const struct exec_call *x)
{
	struct exec_env e;
	size_t need = hook_exec_env_scan(x->envp, &e);
	char *const *env = x->envp;
	void *buf = NULL, *map = NULL;
	struct exec_map *outer = NULL;
	int r;

	if (need > EXEC_STACK_BYTES)
		buf = map = hook_exec_map(&outer, need);
	else if (need)
		buf = __builtin_alloca(need);
	if (buf)
		env = hook_exec_env_fill(x->envp, &e, buf,
					 x->kind == EXEC_SPAWN ||
						 x->kind == EXEC_SPAWNP);
	switch (x->kind) {
	case EXEC_EXECVE:
		r = real_execve_fn(x->path, x->argv, env);
		break;
	case EXEC_EXECVPE:
		r = real_execvpe_fn(x->path, x->argv, env);
		break;
	case EXEC_FEXECVE:
		r = real_fexecve_fn(x->fd, x->argv, env);
		break;
	case EXEC_EXECVEAT:
		r = real_execveat_fn(x->fd, x->path, x->argv, env, x->flags);
		break;
	case EXEC_SPAWN:
		r = real_posix_spawn_fn(x->pid, x->path, x->actions, x->attr, x->argv,
					env);
		break;
	default:
		r = real_posix_spawnp_fn(x->pid, x->path, x->actions, x->attr, x->argv,
					 env);
		break;
	}
	hook_exec_unmap(outer, map);
	return r;
}

static inline int
hook_exec_spawn(enum exec_kind kind,
		pid_t *pid,
		const char *path,
		const posix_spawn_file_actions_t *actions,
		const posix_spawnattr_t *attr,
		char *const argv[],
		char *const envp[])
{
	struct exec_call x = {.kind = kind,
			      .path = path,
			      .argv = argv,
			      .envp = envp,
			      .pid = pid,
			      .actions = actions,
			      .attr = attr};

	hook_exec_bind();
	if (!hook_exec_changes_env())
		return (kind == EXEC_SPAWN ? real_posix_spawn_fn
					   : real_posix_spawnp_fn)(pid, path, actions,
								   attr, argv, envp);
	return hook_exec_follow(&x);
}

static inline int
hook_exec_execve(const char *path, char *const argv[], char *const envp[])
{
	struct exec_call x = {
		.kind = EXEC_EXECVE, .path = path, .argv = argv, .envp = envp};

	hook_exec_bind();
	if (!hook_exec_changes_env())
		return real_execve_fn(path, argv, envp);
	return hook_exec_follow(&x);
}

static inline int
hook_exec_execvpe(const char *file, char *const argv[], char *const envp[])
{
	struct exec_call x = {
		.kind = EXEC_EXECVPE, .path = file, .argv = argv, .envp = envp};

	hook_exec_bind();
	if (!hook_exec_changes_env())
		return real_execvpe_fn(file, argv, envp);
	return hook_exec_follow(&x);
}

static inline int
hook_exec_execv(const char *path, char *const argv[])
{
	struct exec_call x = {
		.kind = EXEC_EXECVE, .path = path, .argv = argv, .envp = environ};

	hook_exec_bind();
	if (!hook_exec_changes_env())
		return real_execv_fn(path, argv);
	return hook_exec_follow(&x);
}

static inline int
hook_exec_execvp(const char *file, char *const argv[])
{
	struct exec_call x = {
		.kind = EXEC_EXECVPE, .path = file, .argv = argv, .envp = environ};

	hook_exec_bind();
	if (!hook_exec_changes_env())
		return real_execvp_fn(file, argv);
	return hook_exec_follow(&x);
}

static inline int
hook_exec_fexecve(int fd, char *const argv[], char *const envp[])
{
	struct exec_call x = {
		.kind = EXEC_FEXECVE, .fd = fd, .argv = argv, .envp = envp};

	hook_exec_bind();
	/* glibc's fexecve() fails with EINVAL on a NULL envp (where execve()
	 * takes it for an empty one): a new environment would make it run. */
	if (!envp || !hook_exec_changes_env())
		return real_fexecve_fn(fd, argv, envp);
	return hook_exec_follow(&x);
}

static inline int
hook_exec_execveat(
	int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
	struct exec_call x = {.kind = EXEC_EXECVEAT,
			      .fd = dirfd,
			      .flags = flags,
			      .path = path,
			      .argv = argv,
			      .envp = envp};

	hook_exec_bind();
	if (!real_execveat_fn) {
		errno = ENOSYS;
		return -1;
	}
	if (!hook_exec_changes_env())
		return real_execveat_fn(dirfd, path, argv, envp, flags);
	return hook_exec_follow(&x);
}

/* The execl family: the arguments as a vector, then the v variant, as
 * glibc's own execl does.  The vector is sized from the count, on the
 * stack whatever the count (alloca, as glibc's VLA: see the top), so a
 * short call costs a few words of stack. */
enum exec_l_kind { EXEC_L, EXEC_LE, EXEC_LP };

/* The vector's size, (argc + 1) pointers with argc < INT_MAX, cannot wrap;
 * it is what glibc's VLA of argc + 1 pointers takes of the stack. */
_Static_assert(INT_MAX < SIZE_MAX / sizeof(char *) - 1,
	       "the execl vector's size can overflow");

static int
hook_exec_l(enum exec_l_kind kind, const char *path, const char *arg, va_list ap)
{
	char **argv;
	char *const *envp = environ;
	size_t argc = 1, i;
	va_list count;
	int r;

	/* Counting stops at INT_MAX arguments, as glibc's execl does
	 * (posix/execl.c): a list that is not terminated (or garbage) is read
	 * no further than glibc would read it, and fails with E2BIG where it
	 * fails. */
	va_copy(count, ap);
	if (arg) {
		while (va_arg(count, const char *))
			if (++argc == INT_MAX) {
				va_end(count);
				errno = E2BIG;
				return -1;
			}
	} else {
		argc = 0;
	}
	va_end(count);
	argv = __builtin_alloca((argc + 1) * sizeof(char *));
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
	return hook_exec_spawn(EXEC_SPAWN, pid, path, actions, attr, argv, envp);
}

HOOK_EXPORT int
ctxshim_posix_spawnp_215(pid_t *pid,
			 const char *file,
			 const posix_spawn_file_actions_t *actions,
			 const posix_spawnattr_t *attr,
			 char *const argv[],
			 char *const envp[])
{
	return hook_exec_spawn(EXEC_SPAWNP, pid, file, actions, attr, argv, envp);
}

__asm__(".symver ctxshim_posix_spawn_215, posix_spawn@@" EXEC_SPAWN_NODE ", remove");
__asm__(".symver ctxshim_posix_spawnp_215, posix_spawnp@@" EXEC_SPAWN_NODE ", remove");
