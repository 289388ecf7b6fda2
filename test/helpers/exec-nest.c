/* SPDX-License-Identifier: Apache-2.0 */
/* A signal handler's exec inside the thread's own, with a vfork() child's
 * mapping left over (hooks/hook-exec.c, hook_exec_map()).
 *
 *   exec-nest
 *
 * Run with CTXSHIM_FOLLOW_EXEC=1: every exec here passes an environment
 * of more than 4 KiB (environ and fillers) without LD_PRELOAD, which the
 * shim puts back in a mapping.  A vfork() child execs /bin/true (its
 * mapping stays in this process, noted for the thread's next exec to
 * unmap); then the main
 * thread execs a file that does not exist, and SIGUSR1 arrives inside
 * that exec's first large anonymous mmap() (this program's mmap(), which
 * the shim's calls reach: an executable's definitions come first), right
 * after the real one: its handler makes the same failing exec.  mmap()
 * and munmap() note the large anonymous ranges; a munmap() of a range
 * that is not mapped (by the time it runs, perhaps another's) is counted.
 * Prints how each exec ended, that count and how many of the ranges are
 * still mapped (the leftover too would be a leak): the same with and
 * without the shim (hook-exec.c used to leave the unmapped leftover noted during
 * the mmap(), and the handler's exec unmapped it again: the outer exec's
 * new mapping, at the same address, which it then filled). */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define N_ENV  600
#define N_MAPS 8

static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static int (*real_munmap)(void *, size_t);

/* Large anonymous ranges mapped now (written by a vfork child too: shared
 * memory) since main() began tracking, and munmap()s of ranges not among
 * them. */
static struct {
	void *p;
	size_t len;
} maps[N_MAPS];
static volatile int bad_unmaps;
static volatile sig_atomic_t armed, tracking;

static char *env[N_ENV + 1];
static char env_buf[N_ENV][32];
static char *const nowhere_argv[] = {"/nonexistent/ctxshim-exec-nest", NULL};

/* At the first call: the shim's constructor maps before ours would run. */
static void
bind_real(void)
{
	if (real_munmap)
		return;
	real_mmap = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT,
									   "mmap");
	real_munmap = (int (*)(void *, size_t))dlsym(RTLD_NEXT, "munmap");
}

void *
mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void *p;
	int i;

	bind_real();
	p = real_mmap(addr, len, prot, flags, fd, off);

	if (!tracking || p == MAP_FAILED || !(flags & MAP_ANONYMOUS) || len <= 4096)
		return p;
	for (i = 0; i < N_MAPS; i++)
		if (!maps[i].p) {
			maps[i].p = p;
			maps[i].len = len;
			break;
		}
	if (armed) {
		armed = 0;
		(void)raise(SIGUSR1);
	}
	return p;
}

int
munmap(void *p, size_t len)
{
	int i;

	bind_real();
	if (tracking && len > 4096) {
		for (i = 0; i < N_MAPS; i++)
			if (maps[i].p == p && maps[i].len == len)
				break;
		if (i < N_MAPS)
			maps[i].p = NULL;
		else
			bad_unmaps++;
	}
	return real_munmap(p, len);
}

static int nested_errno;

static void
on_usr1(int sig)
{
	int saved_errno = errno;

	(void)sig;
	(void)execve(nowhere_argv[0], nowhere_argv, env);
	nested_errno = errno;
	errno = saved_errno;
}

/* Apart, so that nothing of the caller's frame lives across vfork(). */
static __attribute__((noinline)) int
vfork_true(void)
{
	char *argv[] = {"/bin/true", NULL};
	int status = -1;
	pid_t pid = vfork();

	if (pid == 0) {
		execve(argv[0], argv, env);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return status;
}

int
main(void)
{
	struct sigaction sa = {.sa_handler = on_usr1};
	int i, n, n_mapped, status;

	/* environ without LD_PRELOAD (a sanitizer's options stay), then
	 * fillers */
	for (i = n = 0; environ[i] && n < N_ENV / 2; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0)
			env[n++] = environ[i];
	for (i = 0; n < N_ENV; i++) {
		snprintf(env_buf[i], sizeof(env_buf[i]), "EXEC_NEST_%03d=xxxxxxxx", i);
		env[n++] = env_buf[i];
	}
	env[N_ENV] = NULL;
	if (sigaction(SIGUSR1, &sa, NULL) != 0) {
		perror("sigaction");
		return 1;
	}

	/* from here: the shim's own tables are mapped by now */
	tracking = 1;
	status = vfork_true();
	printf("vfork child: status %#x\n", status);

	armed = 1;
	(void)execve(nowhere_argv[0], nowhere_argv, env);
	printf("exec: %s\n", strerror(errno));
	/* without the shim no mmap() came: the handler's exec now */
	if (armed) {
		armed = 0;
		(void)raise(SIGUSR1);
	}
	printf("nested exec: %s\n", nested_errno ? strerror(nested_errno) : "none");
	printf("unmapped twice: %d\n", bad_unmaps);
	for (i = n_mapped = 0; i < N_MAPS; i++)
		n_mapped += maps[i].p != NULL;
	printf("still mapped: %d\n", n_mapped);
	return 0;
}
