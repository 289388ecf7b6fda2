/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "bind.h"

#include "dynsym.h"
#include "sys.h"

#include <dlfcn.h>
#include <errno.h>
#include <gnu/lib-names.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static void
die(const char *what, const char *name, const char *why)
{
	char msg[512];
	size_t n = 0;
	const char *parts[] = {
		"ctxshim: ", what, " ", name, "(): ", why ? why : "not found", "\n"};
	size_t i;

	/* Built by hand: stdio may be what is broken. */
	for (i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		size_t l = strlen(parts[i]);

		if (n + l >= sizeof(msg))
			l = sizeof(msg) - n - 1;
		memcpy(msg + n, parts[i], l);
		n += l;
	}
	(void)!sys_write(2, msg, n);
	abort();
}

struct next_find {
	const char *name;
	const void *u, *v;
	int n, at_u, at_v; /* positions in the list of loaded objects */
	bool unversioned;  /* u's object defines name without a version */
};

static int
next_find_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct next_find *f = data;

	(void)size;
	if (f->at_u < 0 && ctxshim_object_holds(info, f->u)) {
		f->at_u = f->n;
		f->unversioned = ctxshim_dynsym_unversioned(info, f->name);
	}
	if (f->at_v < 0 && ctxshim_object_holds(info, f->v))
		f->at_v = f->n;
	f->n++;
	return f->at_u >= 0 && f->at_v >= 0;
}

/* v is name@version as dlvsym() found it after us.  dlvsym() asks for
 * that exact version (a hidden one, for glibc), which ld.so does not do
 * for the application's reference name@version: that one also binds to a
 * definition without a version (elf/dl-lookup.c check_match()), such as
 * the pthread_cond_wait of libtsan, of a lock profiler or of any other
 * interposer listed after us in LD_PRELOAD or linked by the program.
 * Forwarding to v would hide the application's calls from it (TSan saw
 * no cond wait and reported a double lock).  So: the first definition
 * after us that an unversioned lookup finds, if its object defines name
 * without a version and comes before v's in the list of loaded objects
 * (the global scope's order for all but an object a dlopen(RTLD_GLOBAL)
 * made global after it was loaded).  libc's own definitions all have a
 * version: never its old one (pthread_cond_wait@GLIBC_2.2.5, which an
 * unversioned lookup returned on some glibc versions) nor its default
 * one, which v already is.  Leaves no dlerror() message. */
static void *
bind_interposer(const char *name, void *v, const void *self)
{
	struct next_find f = {name, NULL, v, 0, -1, -1, false};

	f.u = dlsym(RTLD_NEXT, name);
	if (!f.u) {
		(void)dlerror();
		return v;
	}
	if (f.u == v || f.u == self)
		return v;
	(void)dl_iterate_phdr(next_find_cb, &f);
	return f.unversioned && f.at_u >= 0 && f.at_v >= 0 && f.at_u < f.at_v
		       ? (void *)f.u
		       : v;
}

/* dlerror() state is per thread and any dl*() call discards what it
 * holds (glibc >= 2.34, _dlerror_run()), so a lookup here, on whatever
 * application thread first calls a hook, cannot keep an error message the
 * application has not read yet; glibc offers no way to put one back.
 * What we can keep is not to leave a message of ours behind: each failed
 * lookup's message is consumed at once, so the thread's next dlerror()
 * returns NULL, as after any successful dl*() call of its own.  The hooks
 * of optional libraries also bind eagerly in constructors when the library
 * is loaded at start-up, so that most processes make no dl*() call on an
 * application thread at all. */
static void *
bind_next(const char *name, const char *version, const void *self, bool required)
{
	bool own;
	void *p;

	p = version ? dlvsym(RTLD_NEXT, name, version) : dlsym(RTLD_NEXT, name);
	/* Our own hook: we were dlopen()ed rather than preloaded (a host
	 * that loads every library it finds; it takes static TLS room to
	 * spare, GLIBC_TUNABLES=glibc.rtld.optional_static_tls), and
	 * RTLD_NEXT then searches a scope we are not in.  Not found, then:
	 * libc's own handle below has the real one, for an optional name
	 * too (libc has siglongjmp, whose hook aborts without it). */
	own = p && p == self;
	if (own)
		p = NULL;
	if (!p && (required || own)) {
		/* RTLD_NEXT searches the objects after us only: with libc
		 * itself in LD_PRELOAD before us ("LD_PRELOAD=libc.so.6
		 * libctxshim.so"), libc is not among them.  Ask libc's own
		 * handle before giving up. */
		const char *e = dlerror(); /* consumes the message */
		char why[256] = "not found";
		void *libc;

		/* The next dl*() call frees the message: keep a copy. */
		if (e) {
			strncpy(why, e, sizeof(why) - 1);
			why[sizeof(why) - 1] = '\0';
		}
		libc = dlopen(LIBC_SO, RTLD_LAZY | RTLD_NOLOAD);

		if (libc) {
			uintptr_t lo, hi;

			p = version ? dlvsym(libc, name, version) : dlsym(libc, name);
			/* self, taken through the GOT, is libc's function
			 * too then (libc comes first in the global scope):
			 * only a p inside this library would be our hook. */
			if (p &&
			    ctxshim_text_range((const void *)ctxshim_bind, &lo, &hi) &&
			    (uintptr_t)p >= lo && (uintptr_t)p < hi)
				p = NULL;
		}
		if (!p && required)
			die("cannot resolve real", name, why);
		(void)dlerror();
	} else if (!p) {
		(void)dlerror(); /* consumes the message */
	}
	return p;
}

void *
ctxshim_bind(const char *name, const char *version, const void *self, bool required)
{
	void *p = bind_next(name, version, self, required);

	return p && version ? bind_interposer(name, p, self) : p;
}

/* Keep a reference on the loaded object that defines p (none for the main
 * program, which is never unloaded). */
static void
bind_pin(const void *p)
{
	struct link_map *lm = NULL;
	Dl_info info;

	if (!dladdr1(p, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm || !lm->l_name ||
	    !lm->l_name[0])
		return;
	if (!dlopen(lm->l_name, RTLD_LAZY | RTLD_NOLOAD))
		(void)dlerror();
}

static bool lib_present(const char *soname);

void *
ctxshim_bind_loaded(const char *const *sonames,
		    const char *name,
		    const char *version,
		    const void *self)
{
	/* Not bind_interposer(): ctxshim_callers_bound() and
	 * callers_fill() compare what a caller's scope defines with p, so
	 * with an interposer's p every caller whose scope reaches the
	 * library would count as having a copy of its own and bypass both
	 * the shim and the interposer; and some lookups here are for the
	 * shim's own calls (BIO_method_name), which want the library. */
	void *p = bind_next(name, version, self, false);
	size_t i;

	/* Found through RTLD_NEXT: a library loaded at start-up, or one a
	 * dlopen() made global later, which a dlclose() may unload and a
	 * dlopen() bring back elsewhere while p still points into the old
	 * mapping.  Pinned as well, as below. */
	if (p)
		bind_pin(p);
	for (i = 0; !p && sonames && sonames[i]; i++) {
		/* RTLD_NOLOAD: never loads anything.  The reference kept on
		 * success pins the library, so p cannot outlive it.  No
		 * dlerror() where no dl call failed: it would take a message
		 * the application has not read yet. */
		void *lib;

		if (!lib_present(sonames[i]))
			continue;
		lib = dlopen(sonames[i], RTLD_LAZY | RTLD_NOLOAD);
		if (!lib) {
			(void)dlerror();
			continue;
		}
		p = version ? dlvsym(lib, name, version) : dlsym(lib, name);
		if (!p || p == self) {
			p = NULL;
			(void)dlerror();
			(void)dlclose(lib);
		}
	}
	return p;
}

bool
ctxshim_lib_loaded(const char *const *sonames)
{
	int saved_errno = errno;
	bool found = false;
	size_t i;

	for (i = 0; !found && sonames[i]; i++) {
		if (!lib_present(sonames[i]))
			continue; /* no dl call failed: no dlerror() either */
		found = dlopen(sonames[i], RTLD_LAZY | RTLD_NOLOAD) != NULL;
		if (!found)
			(void)dlerror();
	}
	errno = saved_errno;
	return found;
}

struct text_find {
	uintptr_t addr, lo, hi;
	const char *const *sonames; /* or by soname, if non-NULL */
};

static int
text_find_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct text_find *f = data;
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	bool mine = false;
	ElfW(Half) i;

	(void)size;
	if (f->sonames) {
		/* By DT_SONAME, or by the file's name for an object without
		 * one (a vendored build), as dlopen(RTLD_NOLOAD) matches the
		 * name an object was loaded by. */
		const char *so = ctxshim_dynsym_soname(info), *base = NULL;

		if (!so && info->dlpi_name && info->dlpi_name[0]) {
			base = strrchr(info->dlpi_name, '/');
			base = base ? base + 1 : info->dlpi_name;
		}
		for (i = 0; (so || base) && !mine && f->sonames[i]; i++)
			mine = strcmp(so ? so : base, f->sonames[i]) == 0;
	}
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t s = info->dlpi_addr + ph->p_vaddr, e = s + ph->p_memsz;

		if (ph->p_type != PT_LOAD)
			continue;
		if (!f->sonames && f->addr >= s && f->addr < e)
			mine = true;
		if (ph->p_flags & PF_X) {
			lo = s < lo ? s : lo;
			hi = e > hi ? e : hi;
		}
	}
	if (!mine || hi == 0)
		return 0;
	f->lo = lo;
	f->hi = hi;
	return 1;
}

bool
ctxshim_text_range(const void *addr, uintptr_t *lo, uintptr_t *hi)
{
	struct text_find f = {(uintptr_t)addr, 0, 0, NULL};

	if (!addr || dl_iterate_phdr(text_find_cb, &f) != 1)
		return false;
	*lo = f.lo;
	*hi = f.hi;
	return true;
}

bool
ctxshim_lib_text_range(const char *const *sonames, uintptr_t *lo, uintptr_t *hi)
{
	struct text_find f = {0, 0, 0, sonames};

	if (dl_iterate_phdr(text_find_cb, &f) != 1)
		return false;
	*lo = f.lo;
	*hi = f.hi;
	return true;
}

/* Whether an object of that name (ctxshim_lib_text_range()) is loaded,
 * without the loader: a dlopen(RTLD_NOLOAD) of a name not loaded still
 * searches the library path for the file (and opens it where it is
 * installed), which made every process start under the shim cost some
 * 250 system calls more for the ~15 libraries the hooks look for.
 * Checked first, so that only the names found are asked of dlopen().
 * (dlopen() also knows an object by the other names it was asked for:
 * a library whose DT_SONAME differs from every name we look for is
 * missed.) */
static bool
lib_present(const char *soname)
{
	const char *const one[] = {soname, NULL};
	uintptr_t lo, hi;

	return ctxshim_lib_text_range(one, &lo, &hi);
}

/* The version of cs's name i, or NULL. */
static const char *
callers_version(const struct ctxshim_callers *cs, unsigned i)
{
	return cs->versions && cs->versions[i] ? cs->versions[i] : cs->version;
}

void
ctxshim_callers_bound(struct ctxshim_callers *cs, const void *primary0)
{
	const char *name = cs->names[0], *version = callers_version(cs, 0);
	void *g = version ? dlvsym(RTLD_NEXT, name, version) : dlsym(RTLD_NEXT, name);

	if (!g)
		(void)dlerror();
	__atomic_store_n(&cs->global, primary0 && g == primary0, __ATOMIC_RELAXED);
}

static pthread_mutex_t callers_lock = PTHREAD_MUTEX_INITIALIZER;
unsigned ctxshim_dl_gen;
/* An answer for this thread's hook to use right away: a copy of an
 * entry's functions, taken while the table could not change under it, or
 * one a full table could not keep. */
static __thread void *callers_answer_fn[CTXSHIM_CALLERS_FNS];

static void *
callers_sym(void *lib, const struct ctxshim_callers *cs, unsigned i)
{
	const char *name = cs->names[i], *version = callers_version(cs, i);
	void *p = version ? dlvsym(lib, name, version) : dlsym(lib, name);

	if (!p)
		(void)dlerror();
	return p;
}

/* Fill e from lib's scope if it defines names[0] as another copy than
 * primary0 and our hook. */
static void
callers_fill(const struct ctxshim_callers *cs,
	     struct ctxshim_caller *e,
	     void *lib,
	     const void *primary0)
{
	void *p = callers_sym(lib, cs, 0);
	unsigned i;

	if (!p || p == primary0 || p == cs->selves[0])
		return;
	/* A copy of an older version may lack the later names: those stay
	 * NULL, and their hooks handle such a call as their own. */
	for (i = 0; i < cs->n; i++) {
		p = callers_sym(lib, cs, i);
		e->fn[i] = cs->selves[i] && p == cs->selves[i] ? NULL : p;
	}
	e->own = e->fn[0] != NULL;
}

/* A handle on the object that contains addr, or NULL for the main program
 * (its scope is the global one, where the shim comes before any library:
 * it would find our hook or the primary) and for what dlopen() cannot
 * name.  Not pinned (bind.h): the caller must dlclose() it at once. */
static void *
callers_open(const void *addr)
{
	struct link_map *lm = NULL;
	Dl_info info;
	void *lib;

	if (!dladdr1(addr, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm ||
	    !lm->l_name || !lm->l_name[0])
		return NULL;
	lib = dlopen(lm->l_name, RTLD_LAZY | RTLD_NOLOAD);
	if (!lib)
		(void)dlerror();
	return lib;
}

#define CALLERS_SCAN_MAX 512

struct callers_scan {
	uintptr_t at[CALLERS_SCAN_MAX];
	unsigned n;
	bool truncated;
	unsigned long long adds;
};

static int
callers_scan_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct callers_scan *s = data;
	ElfW(Half) i;

	(void)size;
	s->adds = info->dlpi_adds;
	if (s->n == CALLERS_SCAN_MAX) {
		/* a copy among the rest would go unseen: no lone answer */
		s->truncated = true;
		return 1;
	}
	for (i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_LOAD) {
			s->at[s->n++] = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
			break;
		}
	return 0;
}

static int
callers_adds_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	*(unsigned long long *)data = info->dlpi_adds;
	return 1;
}

/* Objects loaded so far (dlpi_adds): a lone answer holds only while no
 * object was added, since dlopen() does not start a generation. */
unsigned long long
ctxshim_dl_adds(void)
{
	unsigned long long adds = 0;

	(void)dl_iterate_phdr(callers_adds_cb, &adds);
	return adds;
}

/* No primary binding: the library is not loaded under its own name, so
 * nothing but a copy can have been meant.  A caller that does not own one
 * got here by a tail call or a function pointer from an object that does
 * (bind.h); when the loaded objects hold exactly one copy, that is where
 * the call was going.  With two or more, which one is unknown: e stays
 * not own, and the hook fails the call as before. */
static void
callers_lone_copy(const struct ctxshim_callers *cs, struct ctxshim_caller *e)
{
	struct callers_scan *s;
	struct ctxshim_caller c;
	void *lib, *p, *first = NULL;
	unsigned i;

	/* 4 KiB: off the stack, which may be a small one (this runs once
	 * per caller object, in a case that used to fail). */
	s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (s == MAP_FAILED)
		return;
	s->n = 0;
	s->truncated = false;
	s->adds = 0;
	/* Collected first: no dl*() call inside the loader's lock. */
	(void)dl_iterate_phdr(callers_scan_cb, s);
	e->adds = s->adds;
	for (i = 0; i < s->n && !s->truncated; i++) {
		lib = callers_open((const void *)s->at[i]);
		if (!lib)
			continue;
		p = callers_sym(lib, cs, 0);
		if (p && p != cs->selves[0] && p != first) {
			if (first) {
				(void)dlclose(lib);
				memset(e->fn, 0, sizeof(e->fn));
				e->own = e->lone = false;
				break;
			}
			first = p;
			memset(&c, 0, sizeof(c));
			callers_fill(cs, &c, lib, NULL);
			memcpy(e->fn, c.fn, sizeof(e->fn));
			e->own = c.own;
			e->lone = c.own;
		}
		(void)dlclose(lib);
	}
	(void)munmap(s, sizeof(*s));
}

/* Fill e for the object containing ret (see bind.h); in_object: ret is
 * in a loaded object. */
static void
callers_resolve(const struct ctxshim_callers *cs,
		struct ctxshim_caller *e,
		const void *ret,
		bool in_object,
		const void *primary0)
{
	void *lib = in_object ? callers_open(ret) : NULL;

	e->own = false;
	if (lib) {
		callers_fill(cs, e, lib, primary0);
		/* Not pinned (bind.h): the caller's calls come from its own
		 * text, which cannot go away under them. */
		(void)dlclose(lib);
	}
	if (!e->own && !primary0)
		callers_lone_copy(cs, e);
}

/* A fork while another thread adds an entry must not leave the child's
 * lock taken. */
static void
callers_prefork(void)
{
	pthread_mutex_lock(&callers_lock);
}

static void
callers_postfork(void)
{
	pthread_mutex_unlock(&callers_lock);
}

__attribute__((constructor)) static void
callers_atfork(void)
{
	(void)pthread_atfork(callers_prefork, callers_postfork, callers_postfork);
}

/* The table's answer for address a in generation gen: true if it has one
 * (*own: NULL, or this thread's copy of the functions).  bound: the hook
 * has a primary binding now, and a lone copy found without one
 * (callers_lone_copy()) is no answer any more.  Entries are
 * immutable until the table is emptied, which bumps the epoch first: a
 * look the epoch did not change around is consistent (a seqlock). */
static bool
callers_answer(const struct ctxshim_callers *cs,
	       uintptr_t a,
	       unsigned gen,
	       bool bound,
	       void *const **own)
{
	unsigned ep = __atomic_load_n(&cs->epoch, __ATOMIC_ACQUIRE);
	unsigned i = __atomic_load_n(&cs->count, __ATOMIC_ACQUIRE);
	const struct ctxshim_caller *e = NULL;
	bool found = false, is_own = false;

	while (i-- > 0) {
		e = &cs->entry[i];
		if (e->gen == gen && a >= e->lo && a < e->hi && !(bound && e->lone) &&
		    !(e->lone && e->adds != ctxshim_dl_adds())) {
			found = true;
			break;
		}
	}
	if (found) {
		is_own = e->own;
		if (is_own)
			memcpy(callers_answer_fn, e->fn, sizeof(callers_answer_fn));
	}
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n(&cs->epoch, __ATOMIC_RELAXED) != ep)
		return false;
	*own = is_own ? callers_answer_fn : NULL;
	return found;
}

bool
ctxshim_callers_cached(struct ctxshim_callers *cs, const void *ret, void *const **own)
{
	return callers_answer(cs, (uintptr_t)ret,
			      __atomic_load_n(&ctxshim_dl_gen, __ATOMIC_ACQUIRE), false,
			      own);
}

/* Under callers_lock: add e, emptying a full table that holds entries of
 * an older generation first.  False if the table is full of current ones. */
static bool
callers_add(struct ctxshim_callers *cs, const struct ctxshim_caller *e)
{
	unsigned n = __atomic_load_n(&cs->count, __ATOMIC_RELAXED), i;

	if (n == CTXSHIM_CALLERS_MAX) {
		for (i = 0; i < n && cs->entry[i].gen == e->gen; i++)
			;
		if (i == n)
			return false;
		/* A reader that sees the new epoch sees the empty table; one
		 * that saw the old epoch and reads an entry written below sees
		 * the new epoch after its look (the fence), and looks again. */
		__atomic_store_n(&cs->count, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&cs->epoch, cs->epoch + 1, __ATOMIC_RELEASE);
		__atomic_thread_fence(__ATOMIC_RELEASE);
		n = 0;
	}
	cs->entry[n] = *e;
	__atomic_store_n(&cs->count, n + 1, __ATOMIC_RELEASE);
	return true;
}

void *const *
ctxshim_callers_lookup(struct ctxshim_callers *cs,
		       const void *ret,
		       const void *primary0)
{
	unsigned gen = __atomic_load_n(&ctxshim_dl_gen, __ATOMIC_ACQUIRE);
	struct ctxshim_caller fresh = {.gen = gen};
	void *const *own;
	bool in_object;
	int saved_errno;

	if (callers_answer(cs, (uintptr_t)ret, gen, primary0 != NULL, &own))
		return own;
	/* Looked up without the lock, so that it is never held across the
	 * loader's own lock (a library constructor may call a hook while
	 * dlopen() holds that). */
	saved_errno = errno;
	in_object = ctxshim_text_range(ret, &fresh.lo, &fresh.hi);
	if (!in_object) {
		/* In no object (JIT code): its page, never its own copy. */
		fresh.lo = (uintptr_t)ret & ~(uintptr_t)4095;
		fresh.hi = fresh.lo + 4096;
	}
	callers_resolve(cs, &fresh, ret, in_object, primary0);
	errno = saved_errno;
	pthread_mutex_lock(&callers_lock);
	/* Another thread may have added it meanwhile (the same answer). */
	if (!callers_answer(cs, (uintptr_t)ret, gen, primary0 != NULL, &own))
		(void)callers_add(cs, &fresh);
	pthread_mutex_unlock(&callers_lock);
	if (!fresh.own)
		return NULL;
	memcpy(callers_answer_fn, fresh.fn, sizeof(callers_answer_fn));
	return callers_answer_fn;
}
