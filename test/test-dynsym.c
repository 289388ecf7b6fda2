/* SPDX-License-Identifier: Apache-2.0 */
/* preload/dynsym.c against the loader: every dynamic symbol of every
 * object loaded in this process, as the object's own file (libelf) says,
 * and names that are not there. */
#include "config.h"

#include "dynsym.h"
#include "test-common.h"
#include "thread-record.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

struct name {
	char *s;
	bool defined;
};

struct totals {
	size_t objects, names, defined, absent;
	bool vdso, ldso, sysv_only, main_exec, libstdcxx;
	size_t unrelocated; /* objects but the vdso whose d_ptr is an offset */
};

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(((const struct name *)a)->s, ((const struct name *)b)->s);
}

/* The names of the file's .dynsym (SHT_DYNSYM), sorted and unique; a name
 * counts as defined if one of its entries (versions) is defined and not
 * local, which is what ld.so's lookup takes. */
static struct name *
file_dynsym(Elf *e, size_t *n)
{
	struct name *v = NULL;
	Elf_Scn *scn = NULL;
	size_t k = 0, out = 0;

	*n = 0;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		ck_assert_ptr_nonnull(gelf_getshdr(scn, &sh));
		if (sh.sh_type != SHT_DYNSYM)
			continue;
		ck_assert_ptr_nonnull(d = elf_getdata(scn, NULL));
		ck_assert_uint_gt(sh.sh_entsize, 0);
		v = calloc(sh.sh_size / sh.sh_entsize, sizeof(*v));
		ck_assert_ptr_nonnull(v);
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *nm;

			ck_assert_ptr_nonnull(gelf_getsym(d, (int)i, &s));
			nm = elf_strptr(e, sh.sh_link, s.st_name);
			ck_assert_ptr_nonnull(nm);
			if (!*nm)
				continue;
			v[k].s = strdup(nm);
			v[k].defined = s.st_shndx != SHN_UNDEF &&
				       GELF_ST_BIND(s.st_info) != STB_LOCAL;
			k++;
		}
	}
	ck_assert_ptr_nonnull(v);
	qsort(v, k, sizeof(*v), name_cmp);
	for (size_t i = 0; i < k; i++) {
		if (out && strcmp(v[out - 1].s, v[i].s) == 0) {
			v[out - 1].defined |= v[i].defined;
			free(v[i].s);
			continue;
		}
		v[out++] = v[i];
	}
	*n = out;
	return v;
}

static bool
expected(const struct name *v, size_t n, const char *s)
{
	struct name key = {(char *)s, false};
	const struct name *hit = bsearch(&key, v, n, sizeof(*v), name_cmp);

	return hit && hit->defined;
}

/* One lookup, with the name and object in the failure message. */
static void
check_one(const struct dl_phdr_info *info,
	  const char *obj,
	  const struct name *v,
	  size_t n,
	  const char *s,
	  struct totals *t)
{
	bool want = expected(v, n, s);

	ck_assert_msg(ctxshim_dynsym_defines(info, s) == want,
		      "%s: \"%s\": dynsym says %s, the file says %s", obj, s,
		      want ? "undefined" : "defined", want ? "defined" : "undefined");
	if (!want)
		t->absent++;
}

/* Names that are not in the table (most of them): one byte changed at
 * every place, the same GNU hash with two bytes changed (so the chain's
 * hash matches and only the string comparison can tell), cut short,
 * prefixed, suffixed, with a version. */
static void
check_mutations(const struct dl_phdr_info *info,
		const char *obj,
		const struct name *v,
		size_t n,
		const char *s,
		struct totals *t)
{
	size_t len = strlen(s);
	char *m = malloc(len + 16);

	ck_assert_ptr_nonnull(m);
	/* under valgrind (meson test --setup valgrind) the first, middle
	 * and last bytes only: the same paths in seconds, not minutes */
	for (size_t i = 0; i < len;
	     i += RUNNING_ON_VALGRIND && len > 2 ? (len - 1) / 2 : 1) {
		memcpy(m, s, len + 1);
		m[i] ^= (m[i] == 1) ? 2 : 1;
		check_one(info, obj, v, n, m, t);
	}
	for (size_t i = 0; i + 1 < len; i++) {
		unsigned char a = (unsigned char)s[i], b = (unsigned char)s[i + 1];

		/* h * 33 + c: +1 here and -33 in the next byte cancel */
		if (a == 255 || b <= 33)
			continue;
		memcpy(m, s, len + 1);
		m[i] = (char)(a + 1);
		m[i + 1] = (char)(b - 33);
		check_one(info, obj, v, n, m, t);
		break;
	}
	memcpy(m, s, len - 1);
	m[len - 1] = '\0';
	check_one(info, obj, v, n, m, t);
	m[0] = '_';
	memcpy(m + 1, s, len + 1);
	check_one(info, obj, v, n, m, t);
	memcpy(m, s, len);
	memcpy(m + len, "x", 2);
	check_one(info, obj, v, n, m, t);
	memcpy(m + len, "@GLIBC_2.2.5", 13);
	check_one(info, obj, v, n, m, t);
	free(m);
}

/* The entry of tag in the object's dynamic section, or NULL. */
static const ElfW(Dyn) * dyn_entry(const struct dl_phdr_info *info, ElfW(Sxword) tag)
{
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Dyn) * d;

		if (info->dlpi_phdr[i].p_type != PT_DYNAMIC)
			continue;
		d = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
		for (; d->d_tag != DT_NULL; d++)
			if (d->d_tag == tag)
				return d;
	}
	return NULL;
}

static int
check_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct totals *t = data;
	uintptr_t vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
	const char *obj = info->dlpi_name;
	char *image = NULL;
	struct name *v;
	size_t n, defined = 0, absent = t->absent;
	int fd = -1;
	Elf *e;

	(void)size;
	if (vdso && ctxshim_object_holds(info, (const void *)vdso)) {
		const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)vdso;
		size_t len = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;

		/* the kernel maps the whole image, section headers too */
		image = malloc(len);
		ck_assert_ptr_nonnull(image);
		memcpy(image, eh, len);
		e = elf_memory(image, len);
		obj = "[vdso]";
		t->vdso = true;
	} else {
		if (!*obj)
			obj = "/proc/self/exe";
		fd = open(obj, O_RDONLY | O_CLOEXEC);
		ck_assert_msg(fd >= 0, "%s: cannot open", obj);
		e = elf_begin(fd, ELF_C_READ, NULL);
		if (strstr(obj, "/ld-linux"))
			t->ldso = true;
		if (strstr(obj, "libstdc++"))
			t->libstdcxx = true;
	}
	ck_assert_msg(e != NULL, "%s: %s", obj, elf_errmsg(-1));
	if (!*info->dlpi_name) {
		GElf_Ehdr eh;

		ck_assert_ptr_nonnull(gelf_getehdr(e, &eh));
		t->main_exec = eh.e_type == ET_EXEC;
	}
	ck_assert_msg(dyn_entry(info, DT_SYMTAB), "%s: no DT_SYMTAB", obj);
	if (strcmp(obj, "[vdso]") != 0)
		t->unrelocated +=
			dyn_entry(info, DT_SYMTAB)->d_un.d_ptr < info->dlpi_addr;
	if (!dyn_entry(info, DT_GNU_HASH)) {
		ck_assert_msg(dyn_entry(info, DT_HASH), "%s: no hash table", obj);
		t->sysv_only = true;
	}
	v = file_dynsym(e, &n);
	for (size_t i = 0; i < n; i++) {
		check_one(info, obj, v, n, v[i].s, t);
		defined += v[i].defined;
		check_mutations(info, obj, v, n, v[i].s, t);
	}
	check_one(info, obj, v, n, "", t);
	check_one(info, obj, v, n, OTEL_THREAD_CTX_SYMBOL, t);
	printf("%s: %zu names (%zu defined), %zu absent names\n", obj, n, defined,
	       t->absent - absent);
	t->objects++;
	t->names += n;
	t->defined += defined;
	for (size_t i = 0; i < n; i++)
		free(v[i].s);
	free(v);
	(void)elf_end(e);
	free(image);
	if (fd >= 0)
		(void)close(fd);
	return 0;
}

/* A made-up object in memory whose one PT_LOAD segment ends at a
 * PROT_NONE page: a read past the segment fails the test with SIGSEGV
 * (Check runs each test in a child).  Its dynamic section holds absolute
 * addresses (dlpi_addr 0), as ld.so leaves it after relocating it. */
struct fake {
	unsigned char *seg;
	size_t len;
	ElfW(Phdr) ph[2];
	ElfW(Dyn) dyn[5];
	struct dl_phdr_info info;
};

static void
fake_init(struct fake *f, size_t pages)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	memset(f, 0, sizeof(*f));
	f->len = pages * pg;
	f->seg = mmap(NULL, f->len + pg, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(f->seg, MAP_FAILED);
	ck_assert_int_eq(mprotect(f->seg + f->len, pg, PROT_NONE), 0);
	f->ph[0].p_type = PT_LOAD;
	f->ph[0].p_vaddr = (uintptr_t)f->seg;
	f->ph[0].p_memsz = f->len;
	f->ph[1].p_type = PT_DYNAMIC;
	f->ph[1].p_vaddr = (uintptr_t)f->dyn;
	f->ph[1].p_memsz = sizeof(f->dyn);
	f->info.dlpi_phdr = f->ph;
	f->info.dlpi_phnum = 2;
	f->info.dlpi_name = "fake";
}

/* The tables at these offsets of the segment (hash_tag DT_GNU_HASH or
 * DT_HASH). */
static void
fake_tables(struct fake *f, ElfW(Sxword) hash_tag, size_t hash, size_t sym, size_t str)
{
	f->dyn[0] =
		(ElfW(Dyn)){.d_tag = hash_tag, .d_un.d_ptr = (uintptr_t)f->seg + hash};
	f->dyn[1] =
		(ElfW(Dyn)){.d_tag = DT_SYMTAB, .d_un.d_ptr = (uintptr_t)f->seg + sym};
	f->dyn[2] =
		(ElfW(Dyn)){.d_tag = DT_STRTAB, .d_un.d_ptr = (uintptr_t)f->seg + str};
	f->dyn[3] = (ElfW(Dyn)){.d_tag = DT_NULL};
}

static uint32_t
gnu_hash(const char *s)
{
	uint32_t h = 5381;

	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

/* A global object symbol named by the string at st_name. */
static void
fake_sym(struct fake *f, size_t sym, uint32_t i, uint32_t st_name)
{
	ElfW(Sym) *s = (ElfW(Sym) *)(f->seg + sym) + i;

	s->st_name = st_name;
	s->st_info = ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT);
	s->st_shndx = 1;
	s->st_value = 8;
}

/* A string that runs into the end of the segment without its NUL: no
 * byte past the segment is read, and a shorter name does not match. */
START_TEST(hostile_string_at_segment_end)
{
	struct fake f;
	uint32_t *h;

	fake_init(&f, 1);
	fake_tables(&f, DT_HASH, 0, 64, f.len - 3);
	h = (uint32_t *)f.seg;
	h[0] = 1; /* nbucket */
	h[1] = 2; /* nchain: the number of symbols */
	h[2] = 1; /* bucket[0]: symbol 1; chain[1] 0, its end */
	fake_sym(&f, 64, 1, 0);
	memcpy(f.seg + f.len - 3, "abc", 3);
	ck_assert(!ctxshim_dynsym_defines(&f.info, "abc"));
	ck_assert(!ctxshim_dynsym_defines(&f.info, "ab"));
	ck_assert(!ctxshim_dynsym_defines(&f.info, "abcd"));
	/* the same with its NUL is found */
	fake_tables(&f, DT_HASH, 0, 64, f.len - 4);
	memcpy(f.seg + f.len - 4, "abc", 4);
	ck_assert(ctxshim_dynsym_defines(&f.info, "abc"));
	/* nchain past the segment's end */
	h[1] = UINT32_MAX;
	ck_assert(ctxshim_dynsym_defines(&f.info, "abc"));
	ck_assert(!ctxshim_dynsym_defines(&f.info, "abd"));
}
END_TEST

/* A DT_HASH table is looked up as ld.so looks it up, in the chain of the
 * name's bucket (glibc elf/dl-lookup.c do_lookup_x(), _dl_elf_hash()), not
 * by reading every symbol: a symbol in no chain is not found, and a chain
 * that loops ends. */
START_TEST(sysv_hash_chains)
{
	struct fake f;
	uint32_t *h;

	fake_init(&f, 1);
	fake_tables(&f, DT_HASH, 0, 64, 1024);
	h = (uint32_t *)f.seg;
	h[0] = 1; /* nbucket */
	h[1] = 3; /* nchain */
	h[2] = 2; /* bucket[0]: symbol 2, then chain[2]: 1, then chain[1]: end */
	h[3 + 2] = 1;
	fake_sym(&f, 64, 1, 1);
	fake_sym(&f, 64, 2, 5);
	memcpy(f.seg + 1024 + 1, "abc\0def", 8);
	ck_assert(ctxshim_dynsym_defines(&f.info, "abc"));
	ck_assert(ctxshim_dynsym_defines(&f.info, "def"));
	ck_assert(!ctxshim_dynsym_defines(&f.info, "ghi"));
	/* symbol 1 in no chain */
	h[3 + 2] = 0;
	ck_assert(!ctxshim_dynsym_defines(&f.info, "abc"));
	ck_assert(ctxshim_dynsym_defines(&f.info, "def"));
	/* a loop: 2, 1, 2, ... */
	h[3 + 2] = 1;
	h[3 + 1] = 2;
	ck_assert(ctxshim_dynsym_defines(&f.info, "abc"));
	ck_assert(!ctxshim_dynsym_defines(&f.info, "ghi"));
	/* buckets and chains past the segment's end */
	h[0] = UINT32_MAX;
	ck_assert(!ctxshim_dynsym_defines(&f.info, "abc"));
	h[0] = 1;
	h[2] = UINT32_MAX;
	ck_assert(!ctxshim_dynsym_defines(&f.info, "abc"));
}
END_TEST

/* A GNU hash table: the chain of the name's bucket, every entry with the
 * name's hash and none with the end bit, runs to the end of the segment;
 * the symbols it names have no matching name. */
START_TEST(hostile_gnu_chain_without_end)
{
	const char *name = "nosuch";
	uint32_t hash = gnu_hash(name);
	struct fake f;
	uint32_t *h, *chain;
	ElfW(Addr) * bloom;

	fake_init(&f, 2);
	fake_tables(&f, DT_GNU_HASH, 0, 0, 0);
	h = (uint32_t *)f.seg;
	h[0] = 1; /* nbuckets */
	h[1] = 1; /* symoffset */
	h[2] = 1; /* bloom words */
	h[3] = 6; /* bloom shift */
	bloom = (ElfW(Addr) *)(h + 4);
	bloom[0] = ~(ElfW(Addr))0;
	h = (uint32_t *)(bloom + 1); /* buckets */
	h[0] = 1;
	chain = h + 1;
	for (uint32_t *c = chain; (unsigned char *)c < f.seg + f.len; c++)
		*c = hash & ~1u;
	ck_assert(!ctxshim_dynsym_defines(&f.info, name));
	/* symoffset and the bucket past every symbol, huge counts */
	h = (uint32_t *)f.seg;
	h[1] = UINT32_MAX - 1;
	ck_assert(!ctxshim_dynsym_defines(&f.info, name));
	h[1] = 1;
	((uint32_t *)(bloom + 1))[0] = UINT32_MAX;
	ck_assert(!ctxshim_dynsym_defines(&f.info, name));
	h[0] = UINT32_MAX;
	ck_assert(!ctxshim_dynsym_defines(&f.info, name));
	h[0] = 1;
	h[2] = UINT32_MAX;
	ck_assert(!ctxshim_dynsym_defines(&f.info, name));
	h[2] = 1;
	h[3] = UINT32_MAX;
	ck_assert(!ctxshim_dynsym_defines(&f.info, name));
}
END_TEST

/* Counts of zero, where ld.so would divide by them or mask with them
 * less one: nothing is found, and nothing is read outside the tables. */
START_TEST(hostile_zero_counts)
{
	struct fake f;
	uint32_t *h;
	ElfW(Addr) * bloom;

	fake_init(&f, 1);
	fake_tables(&f, DT_HASH, 0, 64, 1024);
	h = (uint32_t *)f.seg;
	h[0] = 0; /* nbucket */
	h[1] = 2;
	fake_sym(&f, 64, 1, 1);
	memcpy(f.seg + 1024 + 1, "abc", 4);
	ck_assert(!ctxshim_dynsym_defines(&f.info, "abc"));
	fake_tables(&f, DT_GNU_HASH, 0, 256, 1024);
	h[0] = 0; /* nbuckets */
	h[1] = 1; /* symoffset */
	h[2] = 1; /* bloom words */
	h[3] = 6; /* bloom shift */
	bloom = (ElfW(Addr) *)(h + 4);
	bloom[0] = ~(ElfW(Addr))0;
	((uint32_t *)(bloom + 1))[0] = 1;
	((uint32_t *)(bloom + 1))[1] = gnu_hash("abc") | 1;
	ck_assert(!ctxshim_dynsym_defines(&f.info, "abc"));
	/* a bloom shift of 32, the first one a uint32_t cannot take (the
	 * same table with 31 finds the name) */
	h[0] = 1;
	fake_sym(&f, 256, 1, 1);
	h[3] = 31;
	ck_assert(ctxshim_dynsym_defines(&f.info, "abc"));
	h[3] = 32;
	ck_assert(!ctxshim_dynsym_defines(&f.info, "abc"));
	h[3] = 6;
	/* no bloom words: a mask of all ones would index far outside */
	h[0] = 1;
	h[2] = 0;
	ck_assert(!ctxshim_dynsym_defines(&f.info, "abc"));
}
END_TEST

/* Boundaries of the segment: a chain that would continue at the word
 * just past its end, and a symbol entry that starts inside it but does
 * not fit (its name and binding readable, its value not). */
START_TEST(hostile_tables_at_segment_end)
{
	const size_t sym = 48, syms = (4096 - sym) / sizeof(ElfW(Sym));
	const size_t last = 4096 - sym - syms * sizeof(ElfW(Sym));
	struct fake f;
	uint32_t *h;

	ck_assert_uint_ge(last, 8); /* st_name, st_info and st_shndx inside */
	fake_init(&f, 1);
	fake_tables(&f, DT_HASH, 0, sym, 1024);
	h = (uint32_t *)f.seg;
	h[0] = 1;    /* nbucket */
	h[1] = 1024; /* nchain: the segment's words */
	/* bucket[0] names chain entry 1021, the last word of the segment
	 * being 2 + nbucket + 1021: a next one would be past it */
	h[2] = 4096 / 4 - 3;
	ck_assert(!ctxshim_dynsym_defines(&f.info, "abc"));
	/* symbol `syms', cut by the end of the segment */
	fake_sym(&f, sym, (uint32_t)syms, 1);
	memcpy(f.seg + 1024 + 1, "abc", 4);
	h[2] = (uint32_t)syms;
	h[3 + syms] = 0;
	ck_assert(!ctxshim_dynsym_defines(&f.info, "abc"));
	/* the one before it fits, and is found */
	fake_sym(&f, sym, (uint32_t)syms - 1, 1);
	h[2] = (uint32_t)syms - 1;
	h[3 + syms - 1] = 0;
	ck_assert(ctxshim_dynsym_defines(&f.info, "abc"));
}
END_TEST

/* An object without PT_DYNAMIC, and one whose tables lie outside its
 * segments, define nothing. */
START_TEST(hostile_no_tables)
{
	struct fake f;
	static uint32_t outside[64];

	fake_init(&f, 1);
	f.info.dlpi_phnum = 1;
	ck_assert(!ctxshim_dynsym_defines(&f.info, "x"));
	f.info.dlpi_phnum = 2;
	f.dyn[0] = (ElfW(Dyn)){.d_tag = DT_HASH, .d_un.d_ptr = (uintptr_t)outside};
	f.dyn[1] = (ElfW(Dyn)){.d_tag = DT_SYMTAB, .d_un.d_ptr = (uintptr_t)outside};
	f.dyn[2] = (ElfW(Dyn)){.d_tag = DT_STRTAB, .d_un.d_ptr = (uintptr_t)f.seg};
	ck_assert(!ctxshim_dynsym_defines(&f.info, "x"));
	ck_assert(!ctxshim_object_holds(&f.info, outside));
	ck_assert(ctxshim_object_holds(&f.info, f.seg + f.len - 1));
	ck_assert(!ctxshim_object_holds(&f.info, f.seg + f.len));
}
END_TEST

/* ld.so picks the bloom word with a mask of the number of words less one
 * (glibc elf/dl-lookup.c do_lookup_x(), l_gnu_bitmask_idxbits), which
 * linkers make a power of two; of 3 words it takes 0 or 2.  A table made
 * for that lookup is read the same way here. */
START_TEST(bloom_words_not_power_of_two)
{
	const unsigned bits = sizeof(ElfW(Addr)) * 8;
	char name[16];
	uint32_t hash = 0, *h, *buckets;
	ElfW(Addr) * bloom;
	struct fake f;
	unsigned k;

	for (k = 0; k < 1000; k++) {
		(void)snprintf(name, sizeof(name), "sym%u", k);
		hash = gnu_hash(name);
		if ((hash / bits) % 3 != ((hash / bits) & 2))
			break;
	}
	ck_assert_uint_lt(k, 1000);
	fake_init(&f, 1);
	fake_tables(&f, DT_GNU_HASH, 0, 256, 1024);
	h = (uint32_t *)f.seg;
	h[0] = 1; /* nbuckets */
	h[1] = 1; /* symoffset */
	h[2] = 3; /* bloom words */
	h[3] = 6; /* bloom shift */
	bloom = (ElfW(Addr) *)(h + 4);
	bloom[(hash / bits) & 2] =
		(ElfW(Addr))1 << (hash % bits) | (ElfW(Addr))1 << ((hash >> 6) % bits);
	buckets = (uint32_t *)(bloom + 3);
	buckets[0] = 1;
	buckets[1] = hash | 1; /* chain[0]: symbol 1, the last */
	fake_sym(&f, 256, 1, 1);
	memcpy(f.seg + 1024 + 1, name, strlen(name) + 1);
	ck_assert(ctxshim_dynsym_defines(&f.info, name));
}
END_TEST

/* Every object here, with two DT_HASH-only ones (one of 4000 symbols),
 * libstdc++ (the largest .dynsym, with versions) and a few more big ones
 * loaded.  (An object that dlmopen() loaded into another namespace is not there: dl_iterate_phdr()
 * reports only its caller's namespace.) */
START_TEST(every_symbol_of_every_object)
{
	static const char *const more[] = {"libstdc++.so.6", "libcrypto.so.3",
					   "libpython3.11.so.1.0", "libglib-2.0.so.0"};
	static const char *const linkers[] = {"libdynsym-lld-ro.so",
					      "libdynsym-gold.so"};
	const char *many = test_helper_path("libdynsym-sysv-many.so");
	const char *sysv = test_helper_path("libwtls-sysv.so");
	struct totals t = {0};

	ck_assert_uint_ne(elf_version(EV_CURRENT), EV_NONE);
	ck_assert_msg(dlopen(sysv, RTLD_NOW | RTLD_LOCAL), "%s", dlerror());
	ck_assert_msg(dlopen(many, RTLD_NOW | RTLD_LOCAL), "%s", dlerror());
	/* built when the linker is there */
	for (size_t i = 0; i < sizeof(linkers) / sizeof(*linkers); i++) {
		const char *path = test_helper_path(linkers[i]);

		if (access(path, F_OK) != 0)
			printf("not built: %s\n", linkers[i]);
		else
			ck_assert_msg(dlopen(path, RTLD_NOW | RTLD_LOCAL), "%s",
				      dlerror());
	}
	for (size_t i = 0; i < sizeof(more) / sizeof(*more); i++)
		if (!dlopen(more[i], RTLD_NOW | RTLD_LOCAL))
			printf("not loaded: %s\n", dlerror());
	(void)dl_iterate_phdr(check_object, &t);
	printf("%zu objects (%zu besides the vdso with unrelocated addresses), %zu "
	       "names (%zu defined) and %zu absent names looked "
	       "up\n",
	       t.objects, t.unrelocated, t.names, t.defined, t.absent);
	ck_assert(t.vdso || !getauxval(AT_SYSINFO_EHDR));
	ck_assert(t.ldso);
	ck_assert(t.sysv_only);
	if (access(test_helper_path(linkers[0]), F_OK) == 0)
		ck_assert_uint_eq(t.unrelocated, 1);
#ifdef DYNSYM_NOPIE
	ck_assert(t.main_exec);
#endif
	ck_assert_uint_gt(t.defined, 10000);
}
END_TEST

struct by_soname {
	const char *soname;
	const char *name;
	int defines, unversioned; /* -1: object not found */
};

static int
by_soname_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct by_soname *b = data;
	const char *so = ctxshim_dynsym_soname(info);

	(void)size;
	if (!so || strcmp(so, b->soname) != 0)
		return 0;
	b->defines = ctxshim_dynsym_defines(info, b->name);
	b->unversioned = ctxshim_dynsym_unversioned(info, b->name);
	return 1;
}

/* A definition without a version is one that a versioned reference binds
 * to (preload/bind.c, bind_interposer()): libz's (at the base version)
 * are, and none of libc's, which has only versioned ones, old and new. */
START_TEST(unversioned_definitions)
{
	static const struct by_soname want[] = {
		{"libc.so.6", "pthread_cond_wait", 1, 0},
		{"libc.so.6", "posix_spawn", 1, 0},
		{"libc.so.6", "write", 1, 0},
		{"libc.so.6", "no_such_name_here", 0, 0},
		{"libz.so.1", "deflate", 1, 1},
		{"libz.so.1", "no_such_name_here", 0, 0},
	};

	bool libz = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL) != NULL;

	if (!libz)
		printf("not loaded: %s\n", dlerror());
	for (size_t i = 0; i < sizeof(want) / sizeof(*want); i++) {
		struct by_soname b = {want[i].soname, want[i].name, -1, -1};

		if (!libz && strcmp(b.soname, "libz.so.1") == 0)
			continue;
		(void)dl_iterate_phdr(by_soname_cb, &b);
		ck_assert_msg(b.defines == want[i].defines &&
				      b.unversioned == want[i].unversioned,
			      "%s in %s: defines %d, unversioned %d", b.name, b.soname,
			      b.defines, b.unversioned);
	}
}
END_TEST

TEST_SUITE(dynsym_suite)
{
	Suite *s = suite_create("dynamic symbols of loaded objects");
	TCase *tc = tcase_create("Loader");

	tcase_add_test(tc, every_symbol_of_every_object);
	tcase_add_test(tc, unversioned_definitions);
	suite_add_tcase(s, tc);
	tc = tcase_create("Hostile tables");
	tcase_add_test(tc, hostile_string_at_segment_end);
	tcase_add_test(tc, hostile_gnu_chain_without_end);
	tcase_add_test(tc, sysv_hash_chains);
	tcase_add_test(tc, hostile_no_tables);
	tcase_add_test(tc, bloom_words_not_power_of_two);
	tcase_add_test(tc, hostile_zero_counts);
	tcase_add_test(tc, hostile_tables_at_segment_end);
	suite_add_tcase(s, tc);
	return s;
}
