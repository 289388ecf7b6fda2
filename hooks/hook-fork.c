/* SPDX-License-Identifier: Apache-2.0 */
/* Process creation.
 *
 * fork(): nothing to hook.  The constructor's pthread_atfork() child
 * handler (preload/shim.c) runs in the child: the forking thread keeps its
 * context (the child continues that work), its id generator is re-seeded,
 * and the process context is published again with a new
 * service.instance.id and process.pid (the parent's mapping is
 * MADV_DONTFORK, so the child starts without one).  The other threads do
 * not exist in the child, and neither do their records as far as a reader
 * can tell: a reader finds records through the threads listed in
 * /proc/PID/task.
 *
 * _Fork() (glibc 2.34, the async-signal-safe fork) runs no atfork
 * handlers, so without this hook its child would draw the same ids as the
 * parent and have no process context.  We do the same as the fork handler,
 * in the child only.
 *
 * vfork() and posix_spawn() (which glibc implements with
 * clone(CLONE_VM | CLONE_VFORK) and internal calls no hook sees) share the
 * parent's memory until exec: no hook may write shared state there.  The
 * exec hooks build the new environment on the stack (hook-exec.c); the
 * socket level's dup/dup2/dup3/fcntl(F_DUPFD)/close_range/closefrom hooks
 * tell a vfork child by its pid and leave the parent's connection table
 * alone (hook-socket.c, sk_vfork_child(); a close() or fclose() there
 * still makes the parent forget that connection, and a dup2 onto the
 * shim's log fd stops the parent's log rather than let the child write
 * log lines into the application's file).  So neither needs a hook; a vfork()
 * wrapper would even be wrong, since its frame would be gone when the
 * parent resumes. */
#include "config.h"

#include "hooks.h"

#include "process-ctx-pub.h"

#include <errno.h>
#include <pthread.h>
#include <sys/types.h>
#include <unistd.h>

typedef pid_t (*fork_fn)(void);

HOOK_EXPORT pid_t _Fork(void);

static pthread_once_t bind_once = PTHREAD_ONCE_INIT;
static fork_fn real__Fork_fn;

static void
hook_fork_bind_once(void)
{
	real__Fork_fn =
		(fork_fn)ctxshim_bind("_Fork", NULL, (const void *)_Fork, false);
}

/* _Fork() may be called from a signal handler, where binding (dlsym) is
 * not allowed: bind at load time. */
__attribute__((constructor)) static void
hook_fork_init(void)
{
	pthread_once(&bind_once, hook_fork_bind_once);
}

static inline pid_t
real__Fork(void)
{
	pthread_once(&bind_once, hook_fork_bind_once);
	if (!real__Fork_fn) {
		errno = ENOSYS;
		return -1;
	}
	return real__Fork_fn();
}

static pid_t
hook_fork__Fork(void)
{
	pid_t r = real__Fork();
	int saved_errno;

	if (r != 0 || !ctxshim_active())
		return r;
	saved_errno = errno;
	ctxshim_thread_after_fork_child();
	ctxshim_pctx_after_fork_child();
	hook_socket_after_fork_child();
	errno = saved_errno;
	return r;
}

HOOK_EXPORT pid_t
_Fork(void)
{
	return hook_fork__Fork();
}
