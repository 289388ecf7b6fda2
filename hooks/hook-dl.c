/* SPDX-License-Identifier: Apache-2.0 */
/* dlclose(): the generation of loaded objects, for the table of callers
 * with their own copy of a hooked library (preload/bind.h).
 *
 * That table maps a caller's address range to an answer without pinning
 * the caller (a plugin loader that unloads a plugin to reload it fresh
 * must see it unloaded).  Once an object is gone, another may be mapped
 * at its addresses, so every dlclose() that unloaded something starts a
 * new generation: the number of objects ever unloaded (dl_iterate_phdr's
 * dlpi_subs), read after the real call.  A dlclose() that only drops a
 * reference (the shim's own RTLD_NOLOAD handles among them) leaves it
 * alone.  The entries of older generations are skipped. */
#include "config.h"

#include "hooks.h"

#include <errno.h>
#include <link.h>
#include <pthread.h>

typedef int (*dlclose_fn)(void *);

HOOK_EXPORT int dlclose(void *handle);

static pthread_once_t bind_once = PTHREAD_ONCE_INIT;
static dlclose_fn real_dlclose_fn;

static void
hook_dl_bind_once(void)
{
	real_dlclose_fn =
		(dlclose_fn)ctxshim_bind("dlclose", NULL, (const void *)dlclose, true);
}

static inline int
real_dlclose(void *handle)
{
	pthread_once(&bind_once, hook_dl_bind_once);
	return real_dlclose_fn(handle);
}

static int
hook_dl_subs_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs))
		*(unsigned long long *)data = info->dlpi_subs;
	return 1;
}

static int
hook_dl_dlclose(void *handle)
{
	unsigned long long subs = 0;
	int r = real_dlclose(handle), saved_errno = errno;
	unsigned gen;

	(void)dl_iterate_phdr(hook_dl_subs_cb, &subs);
	/* Only forward: a concurrent dlclose() that read the count before
	 * another one unloaded something may store after it, and an older
	 * generation would make that object's entries current again. */
	gen = __atomic_load_n(&ctxshim_dl_gen, __ATOMIC_RELAXED);
	while ((int)((unsigned)subs - gen) > 0 &&
	       !__atomic_compare_exchange_n(&ctxshim_dl_gen, &gen, (unsigned)subs, true,
					    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
	errno = saved_errno;
	return r;
}

HOOK_EXPORT int
dlclose(void *handle)
{
	return hook_dl_dlclose(handle);
}
