/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "dynsym.h"

#include <stdint.h>
#include <string.h>

/* The end of the PT_LOAD segment of info that holds addr, or 0. */
static uintptr_t
segment_end(const struct dl_phdr_info *info, uintptr_t addr)
{
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && addr >= start &&
		    addr - start < ph->p_memsz)
			return start + ph->p_memsz;
	}
	return 0;
}

/* The address of a table that the dynamic section names, and the end of
 * the segment that holds it (NULL if none does).  ld.so adds the load bias
 * to d_ptr in place for most objects, but not for the vdso (read-only;
 * glibc >= 2.35 marks it l_ld_readonly) nor on targets whose dynamic
 * section is read-only (DL_RO_DYN_SECTION): take the value that lies
 * inside the object. */
static const void *
dyn_table(const struct dl_phdr_info *info, ElfW(Addr) v, uintptr_t *end)
{
	if ((*end = segment_end(info, v)))
		return (const void *)v;
	if ((*end = segment_end(info, info->dlpi_addr + v)))
		return (const void *)(info->dlpi_addr + v);
	return NULL;
}

/* The object's dynamic section and its number of entries (NULL, 0 if it
 * has none). */
static const ElfW(Dyn) * dyn_section(const struct dl_phdr_info *info, size_t *n)
{
	const ElfW(Dyn) *d = NULL;

	*n = 0;
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) {
			d = (const ElfW(Dyn) *)(info->dlpi_addr +
						info->dlpi_phdr[i].p_vaddr);
			*n = info->dlpi_phdr[i].p_memsz / sizeof(*d);
		}
	return d;
}

struct dynsyms {
	const ElfW(Sym) * sym;
	const char *str;
	const ElfW(Versym) * ver; /* DT_VERSYM, if unversioned is asked */
	uintptr_t sym_end, str_end, ver_end;
	bool unversioned; /* only a definition without a version counts */
};

/* Is dynamic symbol i a definition of name, of any type?  A local one is
 * no definition for ld.so; all else is bounded by the segments. */
static bool
dynsym_defines(const struct dynsyms *t, uint32_t i, const char *name)
{
	size_t len = strlen(name) + 1;
	const ElfW(Sym) * s;

	if (i >= (t->sym_end - (uintptr_t)t->sym) / sizeof(*s))
		return false;
	s = t->sym + i;
	if (s->st_shndx == SHN_UNDEF || ELF64_ST_BIND(s->st_info) == STB_LOCAL)
		return false;
	if (!(s->st_name < t->str_end - (uintptr_t)t->str &&
	      len <= t->str_end - (uintptr_t)t->str - s->st_name &&
	      memcmp(t->str + s->st_name, name, len) == 0))
		return false;
	if (!t->unversioned || !t->ver)
		return true;
	/* Without a version for ld.so: index 0 or 1 (the base definition,
	 * whose l_versions entry has no hash) and not hidden, the test of
	 * glibc elf/dl-lookup.c check_match() that lets such a definition
	 * satisfy a reference of any version. */
	return i < (t->ver_end - (uintptr_t)t->ver) / sizeof(*t->ver) &&
	       (t->ver[i] & 0x8000) == 0 && (t->ver[i] & 0x7fff) <= VER_NDX_GLOBAL;
}

/* name in a DT_GNU_HASH table (glibc elf/dl-lookup.c do_lookup_x(), and
 * dl_new_hash() for the hash).  A chain ends at an entry with bit 0 set,
 * or here at the end of the segment. */
static bool
gnu_hash_defines(const struct dynsyms *t,
		 const uint32_t *h,
		 uintptr_t end,
		 const char *name)
{
	const unsigned bits = sizeof(ElfW(Addr)) * 8;
	const uint32_t *buckets, *chain;
	const ElfW(Addr) * bloom;
	uint32_t hash = 5381, i;
	ElfW(Addr) word;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		hash = hash * 33 + *p;
	if (end - (uintptr_t)h < 4 * sizeof(*h) || !h[0] || !h[2] || h[3] >= 32)
		return false;
	bloom = (const ElfW(Addr) *)(h + 4);
	if ((end - (uintptr_t)bloom) / sizeof(*bloom) <= h[2])
		return false;
	buckets = (const uint32_t *)(bloom + h[2]);
	if ((end - (uintptr_t)buckets) / sizeof(*buckets) <= h[0])
		return false;
	chain = buckets + h[0];
	/* a mask, as ld.so takes it (l_gnu_bitmask_idxbits): the same as a
	 * modulo for the power of two that linkers write, and still inside
	 * the h[2] words for any other count */
	word = bloom[(hash / bits) & (h[2] - 1)];
	if (!((word >> (hash % bits)) & (word >> ((hash >> h[3]) % bits)) & 1))
		return false;
	for (i = buckets[hash % h[0]];
	     i >= h[1] && i - h[1] < (end - (uintptr_t)chain) / 4; i++) {
		if ((chain[i - h[1]] | 1) == (hash | 1) && dynsym_defines(t, i, name))
			return true;
		if (chain[i - h[1]] & 1)
			break;
	}
	return false;
}

/* name in a DT_HASH table (glibc do_lookup_x() again, and _dl_elf_hash()),
 * in the chain of its bucket rather than in every symbol: a library linked
 * with --hash-style=sysv alone and 5000 symbols cost 470,000 instructions
 * read whole, in the constructor of every process that loads it.  The
 * chains are bounded by the segment, not by nchain, and a chain that
 * loops ends after as many steps as there are entries. */
static bool
sysv_hash_defines(const struct dynsyms *t,
		  const uint32_t *h,
		  uintptr_t end,
		  const char *name)
{
	size_t n = (end - (uintptr_t)h) / sizeof(*h), room;
	uint32_t hash = 0, i;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
		hash = (hash << 4) + *p;
		hash ^= (hash >> 24) & 0xf0;
		hash &= 0x0fffffff;
	}
	if (n < 2 || !h[0] || h[0] > n - 2)
		return false;
	room = n - 2 - h[0]; /* chain entries inside the segment */
	i = h[2 + hash % h[0]];
	for (size_t k = 0; i != STN_UNDEF && i < room && k < room; k++) {
		if (dynsym_defines(t, i, name))
			return true;
		i = h[2 + h[0] + i];
	}
	return false;
}

static bool
dynsym_lookup(const struct dl_phdr_info *info, const char *name, bool unversioned)
{
	const uint32_t *gnu = NULL, *sysv = NULL;
	uintptr_t gnu_end = 0, sysv_end = 0;
	struct dynsyms t = {.unversioned = unversioned};
	size_t ndyn;
	const ElfW(Dyn) *d = dyn_section(info, &ndyn);

	for (; ndyn && d->d_tag != DT_NULL; d++, ndyn--) {
		if (d->d_tag == DT_SYMTAB)
			t.sym = dyn_table(info, d->d_un.d_ptr, &t.sym_end);
		else if (d->d_tag == DT_STRTAB)
			t.str = dyn_table(info, d->d_un.d_ptr, &t.str_end);
		else if (d->d_tag == DT_GNU_HASH)
			gnu = dyn_table(info, d->d_un.d_ptr, &gnu_end);
		else if (d->d_tag == DT_HASH)
			sysv = dyn_table(info, d->d_un.d_ptr, &sysv_end);
		else if (d->d_tag == DT_VERSYM && unversioned)
			t.ver = dyn_table(info, d->d_un.d_ptr, &t.ver_end);
	}
	if (!t.sym || !t.str)
		return false;
	if (gnu)
		return gnu_hash_defines(&t, gnu, gnu_end, name);
	return sysv && sysv_hash_defines(&t, sysv, sysv_end, name);
}

bool
ctxshim_dynsym_defines(const struct dl_phdr_info *info, const char *name)
{
	return dynsym_lookup(info, name, false);
}

bool
ctxshim_dynsym_unversioned(const struct dl_phdr_info *info, const char *name)
{
	return dynsym_lookup(info, name, true);
}

const char *
ctxshim_dynsym_soname(const struct dl_phdr_info *info)
{
	const char *str = NULL;
	uintptr_t str_end = 0;
	ElfW(Xword) off = 0;
	bool has_soname = false;
	size_t ndyn;
	const ElfW(Dyn) *d = dyn_section(info, &ndyn);

	for (; ndyn && d->d_tag != DT_NULL; d++, ndyn--) {
		if (d->d_tag == DT_STRTAB)
			str = dyn_table(info, d->d_un.d_ptr, &str_end);
		else if (d->d_tag == DT_SONAME) {
			off = d->d_un.d_val;
			has_soname = true;
		}
	}
	if (!has_soname || !str || off >= str_end - (uintptr_t)str ||
	    !memchr(str + off, '\0', str_end - (uintptr_t)str - off))
		return NULL;
	return str + off;
}

bool
ctxshim_object_holds(const struct dl_phdr_info *info, const void *addr)
{
	return segment_end(info, (uintptr_t)addr) != 0;
}
