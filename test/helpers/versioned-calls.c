/* SPDX-License-Identifier: Apache-2.0 */
/* Makes each call that glibc versions and the shim hooks at that version:
 * a pthread_cond_wait() woken by another thread, a pthread_cond_timedwait()
 * past its deadline, a posix_spawn() and a posix_spawnp() of itself
 * ("versioned-calls child" exits 0 at once), then prints their results
 * and how many of them libversioned-interposer.so saw, if it is loaded
 * (preload-core). */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int woken;

static void *
waker(void *arg)
{
	pthread_mutex_lock(&lock);
	woken = 1;
	pthread_cond_signal(&cond);
	pthread_mutex_unlock(&lock);
	return arg;
}

static int
spawned(int (*spawn)(pid_t *,
		     const char *,
		     const posix_spawn_file_actions_t *,
		     const posix_spawnattr_t *,
		     char *const[],
		     char *const[]),
	char *self)
{
	char *argv[] = {self, "child", NULL};
	pid_t pid;
	int r, st = -1;

	r = spawn(&pid, self, NULL, NULL, argv, environ);
	if (r == 0 && waitpid(pid, &st, 0) != pid)
		st = -1;
	return r ? -r : st;
}

int
main(int argc, char **argv)
{
	static const char *const names[] = {"pthread_cond_wait",
					    "pthread_cond_timedwait", "posix_spawn",
					    "posix_spawnp"};
	unsigned (*count)(const char *);
	struct timespec past = {0, 0};
	pthread_t t;
	int r;

	if (argc > 1 && strcmp(argv[1], "child") == 0)
		return 0;
	pthread_mutex_lock(&lock);
	/* the lock is held until the wait: the waker cannot come first */
	if (pthread_create(&t, NULL, waker, NULL) != 0)
		return 1;
	r = 0;
	while (!woken && r == 0)
		r = pthread_cond_wait(&cond, &lock);
	printf("pthread_cond_wait %d\n", r);
	printf("pthread_cond_timedwait %d\n",
	       pthread_cond_timedwait(&cond, &lock, &past));
	pthread_mutex_unlock(&lock);
	pthread_join(t, NULL);
	printf("posix_spawn %d\n", spawned(posix_spawn, argv[0]));
	printf("posix_spawnp %d\n", spawned(posix_spawnp, argv[0]));

	*(void **)&count = dlsym(RTLD_DEFAULT, "versioned_interposer_count");
	for (size_t i = 0; count && i < sizeof(names) / sizeof(names[0]); i++)
		printf("interposer saw %s %u\n", names[i], count(names[i]));
	return 0;
}
