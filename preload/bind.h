/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Finds the definition of name that our hook hides (RTLD_NEXT, or the given
 * symbol version with dlvsym).  self is our own hook, so that a loader
 * quirk that hands it back to us cannot recurse.  A required symbol that
 * cannot be found ends the process with a message (a hook without its real
 * function cannot keep its promise to pass calls through); an optional one
 * returns NULL.  With a version, an interposer after us that defines
 * name without a version is preferred (bind.c, bind_interposer()): the
 * application's reference name@version would have bound to it. */
void *
ctxshim_bind(const char *name, const char *version, const void *self, bool required);

/* ctxshim_bind(name, version, self, false) but for interposers without a
 * version, which a version here does not look for, then, when RTLD_NEXT does not
 * see the library (loaded RTLD_LOCAL as a plugin's dependency after
 * start-up), the first of sonames (NULL-terminated) that is already loaded
 * and defines name (dlopen RTLD_NOLOAD, which also pins it).  Returns NULL
 * if none has it, never ends the process, and leaves no dlerror() message
 * behind.  A hook whose library is not found must retry at its next call:
 * the library may be loaded later. */
void *ctxshim_bind_loaded(const char *const *sonames,
			  const char *name,
			  const char *version,
			  const void *self);

/* For a hook file's constructor: true if one of sonames (NULL-terminated)
 * is loaded already, so that binding now finds it.  The RTLD_NOLOAD handle
 * is kept (it pins the library our pointers will point into); no
 * dlerror() message is left behind, and errno is kept. */
bool ctxshim_lib_loaded(const char *const *sonames);

/* The executable segments' range [*lo, *hi) of the loaded object that
 * contains addr (a function of a library we interpose), so a hook can tell
 * the library's calls to its own exported functions (through the PLT) from
 * the application's.  Returns false if no object contains addr. */
bool ctxshim_text_range(const void *addr, uintptr_t *lo, uintptr_t *hi);

/* The same range for the loaded object whose DT_SONAME (or, without one,
 * file name) is one of sonames (NULL-terminated).  Only dl_iterate_phdr(), never the loader's lock
 * that dlopen() holds while it runs constructors (ctxshim_lib_loaded()
 * takes it): for paths where another thread may wait in a constructor for
 * the caller.  Nothing is pinned. */
bool ctxshim_lib_text_range(const char *const *sonames, uintptr_t *lo, uintptr_t *hi);

/* The number of objects ever loaded (dl_iterate_phdr's dlpi_adds): a
 * look for a library that found nothing holds while this is unchanged.
 * No dl*() call. */
unsigned long long ctxshim_dl_adds(void);

/* Callers with a copy of a hooked library of their own.
 *
 * Our exported names also catch the calls of an object that a plugin
 * loader opened RTLD_LOCAL with a copy of the library inside it or among
 * its own dependencies (CPAN's FCGI.so builds libfcgi's sources in; a
 * Python wheel carries libssl under another soname).  Without the shim
 * that object would have called its own copy: nothing in the global scope
 * defines the name, so its own scope does.  A hook whose real function
 * was not found in the global scope therefore asks, per call, for the
 * object its caller's return address is in: if that object's own scope
 * (its dependency tree, the way dlsym() on its handle searches it)
 * defines names[0] as something other than the hook's primary binding and
 * other than our hook, the call must go there, untouched, with the
 * object's own definitions of the names (NULL for a name its copy lacks:
 * such a call is the hook's).
 *
 * The return address names the caller: a wrapper in the object with the
 * copy that tail-calls the name (a jmp through its PLT) is taken for its
 * own caller's object, and a helper library of the plugin that does not
 * itself depend on the copy is looked at in its own dependency tree only.
 * Both then get the primary binding, as before.  Without a primary
 * binding (the library is not loaded under its own name, so only a copy
 * can have been meant), such a caller gets the one copy the loaded
 * objects hold; when they hold two or more, it gets nothing, and the hook
 * fails the call as it does when the library is not loaded.
 *
 * The answer is kept per object, in a table of CTXSHIM_CALLERS_MAX
 * entries, each immutable once published: a lookup is a few compares
 * without a lock; the first call from an object makes dl*() calls (not
 * from a signal handler, as any first binding), then takes a mutex to add
 * the entry.  A return address in no object (JIT code) gets an entry for
 * its page.  Objects are not pinned: every dlclose() (hooks/hook-dl.c)
 * that unloads something starts a new generation, and entries of an older
 * one are skipped, since their address ranges may name another object
 * now.  A full table with such entries is emptied (readers check an
 * epoch around their look, as a seqlock); a full table of current entries
 * answers a new object anew on each call, without caching. */
#define CTXSHIM_CALLERS_MAX 64
#define CTXSHIM_CALLERS_FNS 24

struct ctxshim_caller {
	uintptr_t lo, hi; /* the object's executable segments */
	unsigned gen;     /* ctxshim_dl_gen when it was resolved */
	bool own;         /* fn[] holds its own copy's definitions */
	bool lone;        /* ... of the only copy loaded, found without a primary */
	unsigned long long adds; /* lone: dlpi_adds when the copies were counted */
	void *fn[CTXSHIM_CALLERS_FNS];
};

struct ctxshim_callers {
	const char *const *names; /* at most CTXSHIM_CALLERS_FNS */
	unsigned n;
	const char *version; /* of every name, or NULL */
	/* NULL, or each name's own (NULL: version's), for a library that
	 * added a name at a later node (hook-gnutls.c) */
	const char *const *versions;
	const void *const *selves; /* our hooks, by name (NULL: not hooked) */
	int global;                /* see ctxshim_callers_bound() (atomic) */
	unsigned count;            /* entries in use (atomic) */
	unsigned epoch;            /* bumped when the table is emptied (atomic) */
	struct ctxshim_caller entry[CTXSHIM_CALLERS_MAX];
};

/* Bumped after every dlclose() (hooks/hook-dl.c). */
extern unsigned ctxshim_dl_gen;

/* After the hook file bound primary0, its definition of cs->names[0]:
 * whether that is what RTLD_NEXT finds (the global scope after the shim).
 * Then every caller would have bound to it without the shim (the dynamic
 * linker searches the global scope first), and ctxshim_callers_own()
 * answers NULL at once.  Leaves no dlerror() message. */
void ctxshim_callers_bound(struct ctxshim_callers *cs, const void *primary0);

/* The definitions (by cs->names) the caller whose return address is ret
 * would have called without the shim, if they are another copy than
 * primary0 (the hook's binding of names[0], NULL if none); NULL when
 * the primary binding is right for it or nothing better is known.
 * Keeps errno; leaves no dlerror() message. */
void *const *ctxshim_callers_lookup(struct ctxshim_callers *cs,
				    const void *ret,
				    const void *primary0);

/* The table's answer for ret if it has one of this generation (true, and
 * *own as ctxshim_callers_lookup() would set it), without binding or dl*()
 * calls: a hook that retries its binding on every call while its library
 * is not found asks this first, so that the calls of a caller with its
 * own copy do not search for the library each time. */
bool
ctxshim_callers_cached(struct ctxshim_callers *cs, const void *ret, void *const **own);

static inline void *const *
ctxshim_callers_own(struct ctxshim_callers *cs, const void *ret, const void *primary0)
{
	/* The common case (a library the program links), without a call. */
	if (__atomic_load_n(&cs->global, __ATOMIC_RELAXED))
		return NULL;
	return ctxshim_callers_lookup(cs, ret, primary0);
}

/* In an exported hook: pass the call of a caller with its own copy of the
 * library to that copy (own_fn(ret): the hook file's wrapper of
 * ctxshim_callers_own(), NULL when the call is ours), as function i of
 * type type, and return its result. */
#define CTXSHIM_OWN_RETURN(own_fn, i, type, ...)                         \
	do {                                                             \
		void *const *own_ = own_fn(__builtin_return_address(0)); \
		if (own_ && own_[i])                                     \
			return ((type)own_[i])(__VA_ARGS__);             \
	} while (0)

/* The same for a function without a result. */
#define CTXSHIM_OWN_RETURN_VOID(own_fn, i, type, ...)                    \
	do {                                                             \
		void *const *own_ = own_fn(__builtin_return_address(0)); \
		if (own_ && own_[i]) {                                   \
			((type)own_[i])(__VA_ARGS__);                    \
			return;                                          \
		}                                                        \
	} while (0)
