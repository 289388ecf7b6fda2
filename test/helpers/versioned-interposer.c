/* SPDX-License-Identifier: Apache-2.0 */
/* libversioned-interposer.so: an interposer such as ThreadSanitizer's
 * runtime or a lock profiler, preloaded after libctxshim.so.  It defines
 * pthread_cond_wait, pthread_cond_timedwait, posix_spawn and posix_spawnp
 * without a symbol version, which ld.so binds the program's references
 * to (pthread_cond_wait@GLIBC_2.3.2, posix_spawn@GLIBC_2.15) when it is
 * loaded alone, counts the calls, and passes them on to glibc's.  A
 * program reads a count with versioned_interposer_count(), found with
 * dlsym(). */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <spawn.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

enum { I_WAIT, I_TIMEDWAIT, I_SPAWN, I_SPAWNP, I_N };

static const char *const names[I_N] = {"pthread_cond_wait", "pthread_cond_timedwait",
				       "posix_spawn", "posix_spawnp"};
static unsigned counts[I_N];

EXPORT unsigned versioned_interposer_count(const char *name);

EXPORT unsigned
versioned_interposer_count(const char *name)
{
	for (int i = 0; i < I_N; i++)
		if (strcmp(name, names[i]) == 0)
			return __atomic_load_n(&counts[i], __ATOMIC_RELAXED);
	return 0;
}

/* glibc's function of the version the program references */
static void *
next(int i, const char *version)
{
	__atomic_fetch_add(&counts[i], 1, __ATOMIC_RELAXED);
	return dlvsym(RTLD_NEXT, names[i], version);
}

typedef int (*spawn_fn)(pid_t *,
			const char *,
			const posix_spawn_file_actions_t *,
			const posix_spawnattr_t *,
			char *const[],
			char *const[]);

EXPORT int
pthread_cond_wait(pthread_cond_t *cv, pthread_mutex_t *m)
{
	int (*fn)(pthread_cond_t *, pthread_mutex_t *) = next(I_WAIT, "GLIBC_2.3.2");

	return fn(cv, m);
}

EXPORT int
pthread_cond_timedwait(pthread_cond_t *cv, pthread_mutex_t *m, const struct timespec *t)
{
	int (*fn)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *) =
		next(I_TIMEDWAIT, "GLIBC_2.3.2");

	return fn(cv, m, t);
}

EXPORT int
posix_spawn(pid_t *pid,
	    const char *path,
	    const posix_spawn_file_actions_t *fa,
	    const posix_spawnattr_t *attr,
	    char *const argv[],
	    char *const envp[])
{
	return ((spawn_fn)next(I_SPAWN, "GLIBC_2.15"))(pid, path, fa, attr, argv, envp);
}

EXPORT int
posix_spawnp(pid_t *pid,
	     const char *file,
	     const posix_spawn_file_actions_t *fa,
	     const posix_spawnattr_t *attr,
	     char *const argv[],
	     char *const envp[])
{
	return ((spawn_fn)next(I_SPAWNP, "GLIBC_2.15"))(pid, file, fa, attr, argv,
							envp);
}
