/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "tls-math.h"

#include <errno.h>
#include <string.h>

/* glibc's aarch64 TLS_TCB_SIZE and musl's GAP_ABOVE_TP: static blocks start
 * this far above tp (variant I). */
#define TLSM_AARCH64_TCB 16

/* The page a load bias is rounded to (x86_64's: elf-tls.c's ETLS_PAGE,
 * which rounded it before tlsm_map_bias()). */
#define TLSM_PAGE 4096u

/* Beyond this a "static offset" is certainly an address (e.g. the lazy
 * TLSDESC argument of glibc < 2.34, which points at the Elf64_Rela). */
#define TLSM_TPOFF_MAX ((int64_t)1 << 30)

const char *
tlsm_model_name(enum tlsm_model m)
{
	switch (m) {
	case TLSM_TLSDESC_STATIC:
		return "tlsdesc-static";
	case TLSM_TLSDESC_DYNAMIC:
		return "tlsdesc-dynamic";
	case TLSM_GD:
		return "general-dynamic";
	case TLSM_IE:
		return "initial-exec";
	case TLSM_LE:
		return "local-exec";
	case TLSM_UNRESOLVED:
		return "unresolved";
	case TLSM_NONE:
		break;
	}
	return "none";
}

/* A static TLS area larger than this is not believed. */
#define TLSM_STATIC_AREA_MAX (64 << 20)

int64_t
tlsm_static_block_tpoff(const struct tlsm_access *acc, uint64_t st_value)
{
	int64_t off;

	if (acc->arch != TLSM_X86_64 ||
	    (acc->model != TLSM_TLSDESC_STATIC && acc->model != TLSM_IE &&
	     acc->model != TLSM_LE) ||
	    st_value > TLSM_STATIC_AREA_MAX || acc->tpoff >= 0 ||
	    acc->tpoff < -(int64_t)TLSM_STATIC_AREA_MAX)
		return 0;
	off = acc->tpoff - (int64_t)st_value;
	return off < 0 && off >= -(int64_t)TLSM_STATIC_AREA_MAX ? off : 0;
}

static bool
is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

/* The executable's static TLS offset.  With dyn_loader, ld.so placed the
 * block (elf/dl-tls.c _dl_determine_tlsoffset, honouring the image's
 * first-byte misalignment); without, a statically linked glibc executable
 * placed it itself (csu/libc-tls.c __libc_setup_tls: x86_64
 * l_tls_offset = roundup (memsz, align), aarch64 roundup (TCB, align),
 * no first-byte term).  musl computes the same either way. */
static int
le_tpoff(enum tlsm_arch arch,
	 enum tlsm_libc libc,
	 bool dyn_loader,
	 uint64_t st_value,
	 uint64_t p_vaddr,
	 uint64_t p_memsz,
	 uint64_t p_align,
	 int64_t *tpoff)
{
	uint64_t al = p_align ? p_align : 1, fb, off;

	/* The values come from the target's executable: bound the alignment
	 * like the size, or the offsets below overflow int64_t. */
	if (!is_pow2(al) || al > ((uint64_t)1 << 40) || p_memsz > ((uint64_t)1 << 40) ||
	    st_value > p_memsz)
		return -EINVAL;
	/* glibc: l_tls_firstbyte_offset = p_vaddr & (align - 1), and
	 * firstbyte = -that & (align - 1) (elf/dl-tls.c). */
	fb = (0 - (p_vaddr & (al - 1))) & (al - 1);
	if (!dyn_loader && libc == TLSM_GLIBC)
		fb = 0;
	if (arch == TLSM_X86_64) {
		/* Variant II, the executable is the first module placed:
		 * off = roundup(0 + memsz - firstbyte, align) + firstbyte and the
		 * block lies at tp - off.  musl's size + (-(image + size) & (al-1))
		 * is the same value for an image aligned like its p_vaddr. */
		uint64_t sz = p_memsz >= fb ? p_memsz - fb : 0;

		off = ((sz + al - 1) & ~(al - 1)) + fb;
		*tpoff = (int64_t)st_value - (int64_t)off;
		return 0;
	}
	if (libc == TLSM_MUSL) {
		/* musl: offset = GAP_ABOVE_TP + ((image - GAP_ABOVE_TP) & (al-1)) */
		off = TLSM_AARCH64_TCB + ((p_vaddr - TLSM_AARCH64_TCB) & (al - 1));
	} else {
		/* glibc variant I: off = roundup(TCB, align), bumped by one
		 * alignment if the gap is smaller than firstbyte; the block starts
		 * at tp + off - firstbyte. */
		off = (TLSM_AARCH64_TCB + al - 1) & ~(al - 1);
		if (off - TLSM_AARCH64_TCB < fb)
			off += al;
		off -= fb;
	}
	*tpoff = (int64_t)(off + st_value);
	return 0;
}

int
tlsm_le_tpoff(enum tlsm_arch arch,
	      enum tlsm_libc libc,
	      uint64_t st_value,
	      uint64_t p_vaddr,
	      uint64_t p_memsz,
	      uint64_t p_align,
	      int64_t *tpoff)
{
	return le_tpoff(arch, libc, true, st_value, p_vaddr, p_memsz, p_align, tpoff);
}

int
tlsm_static_exe_tpoff(enum tlsm_arch arch,
		      enum tlsm_libc libc,
		      uint64_t st_value,
		      uint64_t p_vaddr,
		      uint64_t p_memsz,
		      uint64_t p_align,
		      int64_t *tpoff)
{
	return le_tpoff(arch, libc, false, st_value, p_vaddr, p_memsz, p_align, tpoff);
}

/* x86_64: movq 8(%rax),%rax; ret — glibc _dl_tlsdesc_return and musl
 * __tlsdesc_static. */
static const uint8_t x86_ret_arg[] = {0x48, 0x8b, 0x40, 0x08, 0xc3};
static const uint8_t x86_endbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
/* glibc _dl_tlsdesc_undefweak: movq 8(%rax),%rax; subq %fs:0,%rax; ret.  Its
 * first four bytes equal the above, so matching must include the ret. */
static const uint8_t x86_undefweak[] = {0x48, 0x8b, 0x40, 0x08, 0x64, 0x48, 0x2b,
					0x04, 0x25, 0x00, 0x00, 0x00, 0x00, 0xc3};
/* aarch64 (little endian): ldr x0, [x0, #8]; ret, optionally after bti c. */
static const uint8_t a64_ret_arg[] = {0x00, 0x04, 0x40, 0xf9, 0xc0, 0x03, 0x5f, 0xd6};
static const uint8_t a64_bti_c[] = {0x5f, 0x24, 0x03, 0xd5};

static bool
match_at(const uint8_t *code, size_t n, size_t at, const uint8_t *pat, size_t plen)
{
	return at + plen <= n && memcmp(code + at, pat, plen) == 0;
}

enum tlsm_resolver
tlsm_classify_resolver(enum tlsm_arch arch, const uint8_t *code, size_t n)
{
	size_t skip = 0;

	if (!code)
		return TLSM_RES_UNKNOWN;
	if (arch == TLSM_X86_64) {
		if (match_at(code, n, 0, x86_endbr64, sizeof(x86_endbr64)))
			skip = sizeof(x86_endbr64);
		if (match_at(code, n, skip, x86_ret_arg, sizeof(x86_ret_arg)))
			return TLSM_RES_RETURN_ARG;
		if (match_at(code, n, skip, x86_undefweak, sizeof(x86_undefweak)))
			return TLSM_RES_UNDEFWEAK;
		return TLSM_RES_UNKNOWN;
	}
	if (match_at(code, n, 0, a64_bti_c, sizeof(a64_bti_c)))
		skip = sizeof(a64_bti_c);
	if (match_at(code, n, skip, a64_ret_arg, sizeof(a64_ret_arg)))
		return TLSM_RES_RETURN_ARG;
	return TLSM_RES_UNKNOWN;
}

static void
access_init(struct tlsm_access *out,
	    enum tlsm_arch arch,
	    enum tlsm_libc libc,
	    enum tlsm_model model)
{
	memset(out, 0, sizeof(*out));
	out->arch = arch;
	out->libc = libc;
	out->model = model;
}

/* A static TP offset that a loader could have produced for this target. */
static bool
plausible_tpoff(enum tlsm_arch arch, enum tlsm_libc libc, int64_t tpoff)
{
	if (tpoff <= -TLSM_TPOFF_MAX || tpoff >= TLSM_TPOFF_MAX)
		return false;
	if (arch == TLSM_X86_64)
		return tpoff < 0; /* blocks lie below the TCB */
	/* glibc places blocks after the 16-byte tcbhead_t; musl may start a
	 * library at tp + 0 when the executable has no TLS (reader.md §1.5). */
	return libc == TLSM_MUSL ? tpoff >= 0 : tpoff >= TLSM_AARCH64_TCB;
}

void
tlsm_from_tlsdesc(enum tlsm_arch arch,
		  enum tlsm_libc libc,
		  uint64_t entry,
		  uint64_t arg,
		  const uint8_t *code,
		  size_t ncode,
		  const uint64_t dynarg[3],
		  struct tlsm_access *out)
{
	enum tlsm_resolver res;

	access_init(out, arch, libc, TLSM_UNRESOLVED);
	/* An all-zero descriptor is the file image: not relocated yet. */
	if (entry == 0)
		return;
	res = tlsm_classify_resolver(arch, code, ncode);
	if (res == TLSM_RES_RETURN_ARG) {
		out->model = TLSM_TLSDESC_STATIC;
		out->tpoff = (int64_t)arg;
		return;
	}
	if (res == TLSM_RES_UNDEFWEAK)
		return;
	/* Unknown resolver (glibc _dl_tlsdesc_dynamic, musl __tlsdesc_dynamic, or
	 * a loader we do not know): the argument of a dynamic descriptor points
	 * at {module id, offset[, generation]}. */
	if (dynarg && dynarg[0] >= 1 && dynarg[0] <= TLSM_MODID_MAX) {
		out->model = TLSM_TLSDESC_DYNAMIC;
		out->modid = dynarg[0];
		out->offset = dynarg[1];
		if (libc == TLSM_GLIBC) {
			out->gen = dynarg[2];
			out->check_gen = true;
		}
		return;
	}
	/* Last resort for unknown static resolvers (e.g. a future glibc with a
	 * different prologue): accept the argument only if it looks like a TP
	 * offset; a lazy-binding stub's argument is an address. */
	if (!code || ncode == 0)
		return;
	if (plausible_tpoff(arch, libc, (int64_t)arg)) {
		out->model = TLSM_TLSDESC_STATIC;
		out->tpoff = (int64_t)arg;
	}
}

void
tlsm_from_gd(enum tlsm_arch arch,
	     enum tlsm_libc libc,
	     uint64_t modid,
	     uint64_t dtpoff,
	     struct tlsm_access *out)
{
	access_init(out, arch, libc, TLSM_UNRESOLVED);
	if (modid < 1 || modid > TLSM_MODID_MAX)
		return;
	out->model = TLSM_GD;
	out->modid = modid;
	out->offset = dtpoff;
}

void
tlsm_from_ie(enum tlsm_arch arch,
	     enum tlsm_libc libc,
	     uint64_t got,
	     struct tlsm_access *out)
{
	access_init(out, arch, libc, TLSM_UNRESOLVED);
	if (!plausible_tpoff(arch, libc, (int64_t)got))
		return;
	/* 0 is the unrelocated file image, except on musl/aarch64 where a block
	 * may legitimately start at tp. */
	if (got == 0 && !(arch == TLSM_AARCH64 && libc == TLSM_MUSL))
		return;
	out->model = TLSM_IE;
	out->tpoff = (int64_t)got;
}

void
tlsm_dtv_layout(enum tlsm_arch arch, enum tlsm_libc libc, struct tlsm_dtv_layout *out)
{
	/* glibc: tcbhead_t.dtv at tp+8 (x86_64, TLS_TCB_AT_TP) or tp+0 (aarch64,
	 * TLS_DTV_AT_TP), 16-byte dtv_t entries.  musl: struct pthread's dtv at
	 * tp+8 (x86_64) or just below tp (aarch64, TLS_ABOVE_TP), 8-byte
	 * entries. */
	if (libc == TLSM_GLIBC) {
		out->dtv_off = arch == TLSM_X86_64 ? 8 : 0;
		out->stride = 16;
	} else {
		out->dtv_off = arch == TLSM_X86_64 ? 8 : -8;
		out->stride = 8;
	}
}

static int
read_u64(tlsm_read_fn rd, void *opaque, uint64_t addr, uint64_t *v)
{
	return rd(opaque, addr, v, sizeof(*v));
}

int
tlsm_slot_addr(const struct tlsm_access *a,
	       uint64_t tp,
	       tlsm_read_fn rd,
	       void *opaque,
	       uint64_t *addr)
{
	struct tlsm_dtv_layout lay;
	uint64_t dtv, val, count;
	int r;

	if (tp == 0)
		return -EINVAL;
	switch (a->model) {
	case TLSM_TLSDESC_STATIC:
	case TLSM_IE:
	case TLSM_LE:
		*addr = tp + (uint64_t)a->tpoff;
		return 0;
	case TLSM_TLSDESC_DYNAMIC:
	case TLSM_GD:
		break;
	default:
		return -EINVAL;
	}

	tlsm_dtv_layout(a->arch, a->libc, &lay);
	r = read_u64(rd, opaque, tp + (uint64_t)lay.dtv_off, &dtv);
	if (r < 0)
		return r;
	if (dtv == 0)
		return -ENODATA;
	if (a->libc == TLSM_GLIBC) {
		/* dtv[-1].counter is the number of slots, dtv[0].counter the
		 * generation the thread's DTV is up to date with. */
		r = read_u64(rd, opaque, dtv - lay.stride, &count);
		if (r < 0)
			return r;
		if (a->modid > count)
			return -ENODATA;
		if (a->check_gen) {
			uint64_t gen;

			r = read_u64(rd, opaque, dtv, &gen);
			if (r < 0)
				return r;
			/* _dl_tlsdesc_dynamic's fast-path condition */
			if (gen < a->gen)
				return -ENODATA;
		}
	} else {
		/* musl: dtv[0] is the module count; dlopen updates every thread */
		r = read_u64(rd, opaque, dtv, &count);
		if (r < 0)
			return r;
		if (a->modid > count)
			return -ENODATA;
	}
	r = read_u64(rd, opaque, dtv + a->modid * lay.stride, &val);
	if (r < 0)
		return r;
	/* TLS_DTV_UNALLOCATED is (void *)-1; 0 means never set up. */
	if (val == 0 || val == UINT64_MAX)
		return -ENODATA;
	*addr = val + a->offset;
	return 0;
}

int
tlsm_glibc_module_gen(const struct tlsm_glibc_db *db,
		      uint64_t modid,
		      tlsm_read_fn rd,
		      void *opaque,
		      uint64_t *gen)
{
	uint64_t list, len, idx = modid, map, lm_modid, g;
	unsigned hops;
	int r;

	if (modid < 1 || modid > TLSM_MODID_MAX || !db->rtld_global ||
	    db->slotinfo_size < 16 || db->slotinfo_size > 256)
		return -EINVAL;
	r = read_u64(rd, opaque, db->rtld_global + db->slotinfo_list, &list);
	if (r < 0)
		return r;
	/* glibc's own walk (_dl_update_slotinfo): skip whole lists until
	 * the index falls into one.  Target memory is hostile: glibc makes
	 * no empty list, and with none each hop takes the index down, so a
	 * cycle ends within modid hops. */
	for (hops = 0;; hops++) {
		/* No list at all, with a TLS module loaded: nonsense. */
		if (!list || hops > TLSM_MODID_MAX)
			return -EINVAL;
		r = read_u64(rd, opaque, list + db->list_len, &len);
		if (r < 0)
			return r;
		if (len == 0)
			return -EINVAL;
		if (idx < len)
			break;
		idx -= len;
		r = read_u64(rd, opaque, list + db->list_next, &list);
		if (r < 0)
			return r;
	}
	list += db->list_slotinfo + idx * db->slotinfo_size;
	r = read_u64(rd, opaque, list + db->si_map, &map);
	if (r < 0)
		return r;
	if (!map)
		return -ENOENT; /* the slot is free: the module was closed */
	r = read_u64(rd, opaque, map + db->lm_modid, &lm_modid);
	if (r < 0)
		return r;
	if (lm_modid != modid)
		return -ENOENT; /* another module holds the slot now */
	r = read_u64(rd, opaque, list + db->si_gen, &g);
	if (r < 0)
		return r;
	*gen = g;
	return 0;
}

int
tlsm_map_bias(const struct tlsm_load *ld,
	      size_t nl,
	      const struct tlsm_map *m,
	      uint64_t *bias)
{
	size_t i;

	for (i = 0; i < nl; i++) {
		uint64_t pg_off = ld[i].offset & ~(uint64_t)(TLSM_PAGE - 1);
		uint64_t pg_vaddr = ld[i].vaddr & ~(uint64_t)(TLSM_PAGE - 1);

		if (m->offset >= pg_off && m->offset < ld[i].offset + ld[i].filesz) {
			*bias = m->start - (pg_vaddr + (m->offset - pg_off));
			return 0;
		}
	}
	return -ENOENT;
}

/* Whether a mapping of m maps file offset l->offset at bias + l->vaddr:
 * the loader maps each PT_LOAD at its page-rounded vaddr and offset, and
 * both are the same distance into their page (whatever its size), so the
 * PT_LOAD's first byte is where its vaddr says. */
static bool
load_mapped(const struct tlsm_load *l,
	    uint64_t bias,
	    const struct tlsm_map *m,
	    size_t nm)
{
	size_t j;

	for (j = 0; j < nm; j++) {
		uint64_t in = l->offset - m[j].offset;

		if (l->offset >= m[j].offset && in < m[j].end - m[j].start &&
		    m[j].start + in == bias + l->vaddr && (m[j].exec || !l->exec))
			return true;
	}
	return false;
}

int
tlsm_loader_map(const struct tlsm_load *ld,
		size_t nl,
		const struct tlsm_map *m,
		size_t nm)
{
	size_t i, k;

	for (i = 0; i < nm; i++) {
		uint64_t bias;
		bool fits = false;

		if (m[i].offset != 0 || tlsm_map_bias(ld, nl, &m[i], &bias) < 0)
			continue;
		/* all of them: a mapping of the whole file places each
		 * PT_LOAD whose vaddr equals its offset, but not the data
		 * (the linkers put it a page or more further) */
		for (k = 0; k < nl; k++) {
			if (ld[k].filesz == 0)
				continue;
			fits = load_mapped(&ld[k], bias, m, nm);
			if (!fits)
				break;
		}
		if (fits)
			return (int)i;
	}
	return -1;
}
