/* SPDX-License-Identifier: Apache-2.0 */
#include "test-common.h"

#include <errno.h>
#include <string.h>

#include "tls-math.h"

/* A tiny synthetic address space: a list of 8-byte words. */
struct fake_mem {
	struct {
		uint64_t addr, val;
	} w[16];
	unsigned n;
	unsigned reads;
};

static void
fake_set(struct fake_mem *m, uint64_t addr, uint64_t val)
{
	ck_assert_uint_lt(m->n, 16);
	m->w[m->n].addr = addr;
	m->w[m->n].val = val;
	m->n++;
}

static int
fake_read(void *opaque, uint64_t addr, void *buf, size_t len)
{
	struct fake_mem *m = opaque;
	unsigned i;

	m->reads++;
	ck_assert_uint_eq(len, 8);
	for (i = 0; i < m->n; i++) {
		if (m->w[i].addr == addr) {
			memcpy(buf, &m->w[i].val, 8);
			return 0;
		}
	}
	return -EFAULT;
}

START_TEST(le_x86_64)
{
	int64_t off = 0;

	/* Measured on Debian 12 (reader.md §1.3): memsz 0x30, align 16,
	 * st_value 0x28 -> fs_base - 8. */
	ck_assert_int_eq(
		tlsm_le_tpoff(TLSM_X86_64, TLSM_GLIBC, 0x28, 0x3de0, 0x30, 16, &off),
		0);
	ck_assert_int_eq(off, -8);
	/* memsz not a multiple of the alignment: rounded up */
	ck_assert_int_eq(tlsm_le_tpoff(TLSM_X86_64, TLSM_GLIBC, 0, 0, 0x11, 8, &off),
			 0);
	ck_assert_int_eq(off, -0x18);
	/* align 0 means 1 */
	ck_assert_int_eq(tlsm_le_tpoff(TLSM_X86_64, TLSM_GLIBC, 4, 0, 12, 0, &off), 0);
	ck_assert_int_eq(off, -8);
	/* p_vaddr misaligned inside the alignment: firstbyte = 8,
	 * off = roundup(0x30 - 8, 16) + 8 = 0x38 */
	ck_assert_int_eq(
		tlsm_le_tpoff(TLSM_X86_64, TLSM_GLIBC, 0x10, 0x1008, 0x30, 16, &off),
		0);
	ck_assert_int_eq(off, 0x10 - 0x38);
	/* A statically linked glibc executable places the block itself
	 * (csu/libc-tls.c): roundup(memsz, align), no first-byte term, so
	 * the misaligned image gives -0x30 where ld.so's gives -0x38. */
	ck_assert_int_eq(tlsm_static_exe_tpoff(TLSM_X86_64, TLSM_GLIBC, 0, 0x1008, 0x30,
					       16, &off),
			 0);
	ck_assert_int_eq(off, -0x30);
	ck_assert_int_eq(
		tlsm_le_tpoff(TLSM_X86_64, TLSM_GLIBC, 0, 0x1008, 0x30, 16, &off), 0);
	ck_assert_int_eq(off, -0x38);
	/* aligned: both agree */
	ck_assert_int_eq(tlsm_static_exe_tpoff(TLSM_X86_64, TLSM_GLIBC, 0x28, 0x3de0,
					       0x30, 16, &off),
			 0);
	ck_assert_int_eq(off, -8);
	/* musl x86_64 uses the same value */
	ck_assert_int_eq(tlsm_le_tpoff(TLSM_X86_64, TLSM_MUSL, 0x28, 0, 0x30, 16, &off),
			 0);
	ck_assert_int_eq(off, -8);
	/* bad alignment, symbol outside the block */
	ck_assert_int_eq(tlsm_le_tpoff(TLSM_X86_64, TLSM_GLIBC, 0, 0, 0x30, 12, &off),
			 -EINVAL);
	ck_assert_int_eq(
		tlsm_le_tpoff(TLSM_X86_64, TLSM_GLIBC, 0x40, 0, 0x30, 16, &off),
		-EINVAL);
	/* a hostile executable's 2^63 alignment (found by test/fuzz, was a
	 * signed overflow) */
	ck_assert_int_eq(tlsm_le_tpoff(TLSM_X86_64, TLSM_GLIBC, 0, 0, 1,
				       (uint64_t)1 << 63, &off),
			 -EINVAL);
}
END_TEST

START_TEST(le_aarch64)
{
	int64_t off = 0;

	/* glibc: blocks start after the 16-byte tcbhead_t, rounded up to the
	 * alignment: tpoff = roundup(16, align) + st_value */
	ck_assert_int_eq(tlsm_le_tpoff(TLSM_AARCH64, TLSM_GLIBC, 8, 0, 0x30, 8, &off),
			 0);
	ck_assert_int_eq(off, 16 + 8);
	ck_assert_int_eq(tlsm_le_tpoff(TLSM_AARCH64, TLSM_GLIBC, 8, 0, 0x30, 64, &off),
			 0);
	ck_assert_int_eq(off, 64 + 8);
	/* firstbyte 8 with align 16: off = 16, gap 0 < 8 -> 32, minus 8 = 24 */
	ck_assert_int_eq(
		tlsm_le_tpoff(TLSM_AARCH64, TLSM_GLIBC, 0, 0x10008, 0x30, 16, &off), 0);
	ck_assert_int_eq(off, 24);
	/* musl: GAP_ABOVE_TP + ((p_vaddr - 16) & (align - 1)) */
	ck_assert_int_eq(tlsm_le_tpoff(TLSM_AARCH64, TLSM_MUSL, 8, 0, 0x30, 64, &off),
			 0);
	ck_assert_int_eq(off, 64 + 8);
	ck_assert_int_eq(
		tlsm_le_tpoff(TLSM_AARCH64, TLSM_MUSL, 0, 0x10008, 0x30, 16, &off), 0);
	ck_assert_int_eq(off, 24);
}
END_TEST

START_TEST(resolver_patterns)
{
	static const uint8_t ret[] = {0x48, 0x8b, 0x40, 0x08, 0xc3, 0x90};
	static const uint8_t endbr_ret[] = {0xf3, 0x0f, 0x1e, 0xfa, 0x48,
					    0x8b, 0x40, 0x08, 0xc3};
	static const uint8_t undefweak[] = {0x48, 0x8b, 0x40, 0x08, 0x64, 0x48, 0x2b,
					    0x04, 0x25, 0x00, 0x00, 0x00, 0x00, 0xc3};
	static const uint8_t dynamic[] = {0x48, 0x89, 0x74, 0x24, 0xf0, 0x64, 0x48,
					  0x8b, 0x34, 0x25, 0x08, 0x00, 0x00, 0x00};
	static const uint8_t a64[] = {0x00, 0x04, 0x40, 0xf9, 0xc0, 0x03, 0x5f, 0xd6};
	static const uint8_t a64_bti[] = {0x5f, 0x24, 0x03, 0xd5, 0x00, 0x04,
					  0x40, 0xf9, 0xc0, 0x03, 0x5f, 0xd6};

	ck_assert_int_eq(tlsm_classify_resolver(TLSM_X86_64, ret, sizeof(ret)),
			 TLSM_RES_RETURN_ARG);
	ck_assert_int_eq(
		tlsm_classify_resolver(TLSM_X86_64, endbr_ret, sizeof(endbr_ret)),
		TLSM_RES_RETURN_ARG);
	ck_assert_int_eq(
		tlsm_classify_resolver(TLSM_X86_64, undefweak, sizeof(undefweak)),
		TLSM_RES_UNDEFWEAK);
	ck_assert_int_eq(tlsm_classify_resolver(TLSM_X86_64, dynamic, sizeof(dynamic)),
			 TLSM_RES_UNKNOWN);
	/* truncated read: the ret byte is missing */
	ck_assert_int_eq(tlsm_classify_resolver(TLSM_X86_64, ret, 4), TLSM_RES_UNKNOWN);
	ck_assert_int_eq(tlsm_classify_resolver(TLSM_X86_64, NULL, 0),
			 TLSM_RES_UNKNOWN);
	ck_assert_int_eq(tlsm_classify_resolver(TLSM_AARCH64, a64, sizeof(a64)),
			 TLSM_RES_RETURN_ARG);
	ck_assert_int_eq(tlsm_classify_resolver(TLSM_AARCH64, a64_bti, sizeof(a64_bti)),
			 TLSM_RES_RETURN_ARG);
	ck_assert_int_eq(tlsm_classify_resolver(TLSM_AARCH64, ret, sizeof(ret)),
			 TLSM_RES_UNKNOWN);
	ck_assert_int_eq(tlsm_classify_resolver(TLSM_X86_64, a64, sizeof(a64)),
			 TLSM_RES_UNKNOWN);
}
END_TEST

START_TEST(tlsdesc_classify)
{
	static const uint8_t ret[] = {0x48, 0x8b, 0x40, 0x08, 0xc3};
	static const uint8_t other[] = {0x48, 0x89, 0x74, 0x24, 0xf0};
	static const uint8_t a64[] = {0x00, 0x04, 0x40, 0xf9, 0xc0, 0x03, 0x5f, 0xd6};
	uint64_t dyn[3] = {2, 0x10, 3};
	uint64_t lazy[3] = {0x3fd8, 0x24, 0};
	struct tlsm_access a;

	/* static: arg is the TP offset (measured -8 for the preload case) */
	tlsm_from_tlsdesc(TLSM_X86_64, TLSM_GLIBC, 0x7f0000001000, (uint64_t)-8, ret,
			  sizeof(ret), NULL, &a);
	ck_assert_int_eq(a.model, TLSM_TLSDESC_STATIC);
	ck_assert_int_eq(a.tpoff, -8);
	/* not relocated yet */
	tlsm_from_tlsdesc(TLSM_X86_64, TLSM_GLIBC, 0, 0, NULL, 0, NULL, &a);
	ck_assert_int_eq(a.model, TLSM_UNRESOLVED);
	/* dynamic: {modid, offset, gen} */
	tlsm_from_tlsdesc(TLSM_X86_64, TLSM_GLIBC, 0x7f0000002000, 0x5555000, other,
			  sizeof(other), dyn, &a);
	ck_assert_int_eq(a.model, TLSM_TLSDESC_DYNAMIC);
	ck_assert_uint_eq(a.modid, 2);
	ck_assert_uint_eq(a.offset, 0x10);
	ck_assert_uint_eq(a.gen, 3);
	ck_assert(a.check_gen);
	/* musl has no generation in its argument block */
	tlsm_from_tlsdesc(TLSM_X86_64, TLSM_MUSL, 0x7f0000002000, 0x5555000, other,
			  sizeof(other), dyn, &a);
	ck_assert_int_eq(a.model, TLSM_TLSDESC_DYNAMIC);
	ck_assert(!a.check_gen);
	/* module ids 1 to 4096 are dynamic TLS, both ends included
	 * (reader.md): past them the block is no descriptor argument */
	dyn[0] = TLSM_MODID_MAX;
	tlsm_from_tlsdesc(TLSM_X86_64, TLSM_GLIBC, 0x7f0000002000, 0x5555000, other,
			  sizeof(other), dyn, &a);
	ck_assert_int_eq(a.model, TLSM_TLSDESC_DYNAMIC);
	ck_assert_uint_eq(a.modid, TLSM_MODID_MAX);
	dyn[0] = TLSM_MODID_MAX + 1;
	tlsm_from_tlsdesc(TLSM_X86_64, TLSM_GLIBC, 0x7f0000002000, 0x5555000, other,
			  sizeof(other), dyn, &a);
	ck_assert_int_eq(a.model, TLSM_UNRESOLVED);
	/* glibc < 2.34 lazy stub: arg is the address of the Elf64_Rela */
	tlsm_from_tlsdesc(TLSM_X86_64, TLSM_GLIBC, 0x555555555030, 0x555555554560,
			  other, sizeof(other), lazy, &a);
	ck_assert_int_eq(a.model, TLSM_UNRESOLVED);
	/* unknown resolver, unreadable arg, small negative arg: static */
	tlsm_from_tlsdesc(TLSM_X86_64, TLSM_GLIBC, 0x7f0000002000, (uint64_t)-152,
			  other, sizeof(other), NULL, &a);
	ck_assert_int_eq(a.model, TLSM_TLSDESC_STATIC);
	ck_assert_int_eq(a.tpoff, -152);
	/* unknown resolver: on variant II an offset of 0 or above is the TCB
	 * or beyond it, never a TLS block */
	tlsm_from_tlsdesc(TLSM_X86_64, TLSM_GLIBC, 0x7f0000002000, 0, other,
			  sizeof(other), NULL, &a);
	ck_assert_int_eq(a.model, TLSM_UNRESOLVED);
	tlsm_from_tlsdesc(TLSM_X86_64, TLSM_GLIBC, 0x7f0000002000, 16, other,
			  sizeof(other), NULL, &a);
	ck_assert_int_eq(a.model, TLSM_UNRESOLVED);
	/* aarch64 static */
	tlsm_from_tlsdesc(TLSM_AARCH64, TLSM_GLIBC, 0xffff00001000, 0x30, a64,
			  sizeof(a64), NULL, &a);
	ck_assert_int_eq(a.model, TLSM_TLSDESC_STATIC);
	ck_assert_int_eq(a.tpoff, 0x30);
	ck_assert_str_eq(tlsm_model_name(a.model), "tlsdesc-static");
}
END_TEST

START_TEST(gd_ie_classify)
{
	struct tlsm_access a;

	tlsm_from_gd(TLSM_X86_64, TLSM_GLIBC, 1, 0, &a);
	ck_assert_int_eq(a.model, TLSM_GD);
	ck_assert_uint_eq(a.modid, 1);
	tlsm_from_gd(TLSM_X86_64, TLSM_GLIBC, 0, 0, &a);
	ck_assert_int_eq(a.model, TLSM_UNRESOLVED);
	tlsm_from_gd(TLSM_X86_64, TLSM_GLIBC, 5000, 0, &a);
	ck_assert_int_eq(a.model, TLSM_UNRESOLVED);
	/* the bound itself is a module id (reader.md: [1, 4096]) */
	tlsm_from_gd(TLSM_X86_64, TLSM_GLIBC, TLSM_MODID_MAX, 0, &a);
	ck_assert_int_eq(a.model, TLSM_GD);
	ck_assert_uint_eq(a.modid, TLSM_MODID_MAX);
	tlsm_from_gd(TLSM_X86_64, TLSM_GLIBC, TLSM_MODID_MAX + 1, 0, &a);
	ck_assert_int_eq(a.model, TLSM_UNRESOLVED);

	tlsm_from_ie(TLSM_X86_64, TLSM_GLIBC, (uint64_t)-16, &a);
	ck_assert_int_eq(a.model, TLSM_IE);
	ck_assert_int_eq(a.tpoff, -16);
	tlsm_from_ie(TLSM_X86_64, TLSM_GLIBC, 0, &a);
	ck_assert_int_eq(a.model, TLSM_UNRESOLVED);
	tlsm_from_ie(TLSM_X86_64, TLSM_GLIBC, 16, &a); /* positive on variant II */
	ck_assert_int_eq(a.model, TLSM_UNRESOLVED);
	tlsm_from_ie(TLSM_AARCH64, TLSM_GLIBC, 16, &a);
	ck_assert_int_eq(a.model, TLSM_IE);
	tlsm_from_ie(TLSM_AARCH64, TLSM_GLIBC, 8, &a); /* inside tcbhead_t */
	ck_assert_int_eq(a.model, TLSM_UNRESOLVED);
	tlsm_from_ie(TLSM_AARCH64, TLSM_MUSL, 0, &a);
	ck_assert_int_eq(a.model, TLSM_IE);
}
END_TEST

START_TEST(slot_static)
{
	struct tlsm_access a;
	struct fake_mem m = {0};
	uint64_t addr = 0;

	tlsm_from_ie(TLSM_X86_64, TLSM_GLIBC, (uint64_t)-8, &a);
	ck_assert_int_eq(tlsm_slot_addr(&a, 0x7f0000000740, fake_read, &m, &addr), 0);
	ck_assert_uint_eq(addr, 0x7f0000000738);
	ck_assert_uint_eq(m.reads, 0);
	ck_assert_int_eq(tlsm_slot_addr(&a, 0, fake_read, &m, &addr), -EINVAL);
	tlsm_from_ie(TLSM_AARCH64, TLSM_GLIBC, 0x20, &a);
	ck_assert_int_eq(tlsm_slot_addr(&a, 0xffff00000000, fake_read, &m, &addr), 0);
	ck_assert_uint_eq(addr, 0xffff00000020);
	a.model = TLSM_UNRESOLVED;
	ck_assert_int_eq(tlsm_slot_addr(&a, 0xffff00000000, fake_read, &m, &addr),
			 -EINVAL);
}
END_TEST

/* Where a thread's stack ends at the latest, below the thread pointer:
 * only from a static model on x86_64, and only a believable offset. */
START_TEST(static_block_tpoff)
{
	struct tlsm_access a;

	tlsm_from_ie(TLSM_X86_64, TLSM_GLIBC, (uint64_t)-2880, &a);
	ck_assert_int_eq(tlsm_static_block_tpoff(&a, 0x10), -2896);
	ck_assert_int_eq(tlsm_static_block_tpoff(&a, 0), -2880);
	a.model = TLSM_TLSDESC_STATIC;
	ck_assert_int_eq(tlsm_static_block_tpoff(&a, 0x40), -2944);
	a.model = TLSM_LE;
	ck_assert_int_eq(tlsm_static_block_tpoff(&a, 0x40), -2944);
	/* a variable past its block's start from the thread pointer */
	ck_assert_int_eq(tlsm_static_block_tpoff(&a, (uint64_t)1 << 40), 0);
	a.tpoff = 16;
	ck_assert_int_eq(tlsm_static_block_tpoff(&a, 0), 0);
	a.tpoff = -((int64_t)1 << 40);
	ck_assert_int_eq(tlsm_static_block_tpoff(&a, 0), 0);
	a.tpoff = -2880;
	a.model = TLSM_TLSDESC_DYNAMIC;
	ck_assert_int_eq(tlsm_static_block_tpoff(&a, 0), 0);
	a.model = TLSM_GD;
	ck_assert_int_eq(tlsm_static_block_tpoff(&a, 0), 0);
	a.model = TLSM_UNRESOLVED;
	ck_assert_int_eq(tlsm_static_block_tpoff(&a, 0), 0);
	/* TLS variant I: the blocks are above the thread pointer */
	tlsm_from_ie(TLSM_AARCH64, TLSM_GLIBC, 0x20, &a);
	ck_assert_int_eq(tlsm_static_block_tpoff(&a, 0), 0);
}
END_TEST

START_TEST(slot_dtv_glibc_x86_64)
{
	const uint64_t tp = 0x7f0000001000, dtv = 0x5000010;
	struct tlsm_access a;
	struct fake_mem m = {0};
	uint64_t addr = 0;

	fake_set(&m, tp + 8, dtv);          /* tcbhead_t.dtv */
	fake_set(&m, dtv - 16, 4);          /* dtv[-1].counter: 4 slots */
	fake_set(&m, dtv, 3);               /* dtv[0].counter: generation */
	fake_set(&m, dtv + 16, tp - 8);     /* module 1: static block */
	fake_set(&m, dtv + 32, 0x600000);   /* module 2: dynamic block */
	fake_set(&m, dtv + 48, UINT64_MAX); /* module 3: TLS_DTV_UNALLOCATED */

	tlsm_from_gd(TLSM_X86_64, TLSM_GLIBC, 2, 0x18, &a);
	ck_assert_int_eq(tlsm_slot_addr(&a, tp, fake_read, &m, &addr), 0);
	ck_assert_uint_eq(addr, 0x600018);
	tlsm_from_gd(TLSM_X86_64, TLSM_GLIBC, 1, 0, &a);
	ck_assert_int_eq(tlsm_slot_addr(&a, tp, fake_read, &m, &addr), 0);
	ck_assert_uint_eq(addr, tp - 8);
	tlsm_from_gd(TLSM_X86_64, TLSM_GLIBC, 3, 0, &a);
	ck_assert_int_eq(tlsm_slot_addr(&a, tp, fake_read, &m, &addr), -ENODATA);
	/* beyond the DTV's length: the thread never saw the module */
	tlsm_from_gd(TLSM_X86_64, TLSM_GLIBC, 5, 0, &a);
	ck_assert_int_eq(tlsm_slot_addr(&a, tp, fake_read, &m, &addr), -ENODATA);
	/* TLSDESC dynamic: a newer generation than the thread's DTV */
	{
		uint64_t newer[3] = {2, 8, 4}, same[3] = {2, 8, 3};
		static const uint8_t code[] = {0x90};

		tlsm_from_tlsdesc(TLSM_X86_64, TLSM_GLIBC, 1, 2, code, 1, newer, &a);
		ck_assert_int_eq(tlsm_slot_addr(&a, tp, fake_read, &m, &addr),
				 -ENODATA);
		tlsm_from_tlsdesc(TLSM_X86_64, TLSM_GLIBC, 1, 2, code, 1, same, &a);
		ck_assert_int_eq(tlsm_slot_addr(&a, tp, fake_read, &m, &addr), 0);
		ck_assert_uint_eq(addr, 0x600008);
	}
	/* unreadable DTV pointer */
	ck_assert_int_eq(tlsm_slot_addr(&a, tp + 0x100, fake_read, &m, &addr), -EFAULT);
}
END_TEST

START_TEST(slot_dtv_aarch64)
{
	const uint64_t tp = 0xffff80001000, dtv = 0xaaaa0010;
	struct tlsm_access a;
	struct fake_mem m = {0};
	uint64_t addr = 0;

	/* glibc aarch64: DTV pointer at tp + 0, 16-byte entries */
	fake_set(&m, tp, dtv);
	fake_set(&m, dtv - 16, 2);
	fake_set(&m, dtv + 32, 0xbbbb0000);
	tlsm_from_gd(TLSM_AARCH64, TLSM_GLIBC, 2, 0x40, &a);
	ck_assert_int_eq(tlsm_slot_addr(&a, tp, fake_read, &m, &addr), 0);
	ck_assert_uint_eq(addr, 0xbbbb0040);

	/* musl aarch64: DTV pointer at tp - 8, 8-byte entries, dtv[0] = count */
	memset(&m, 0, sizeof(m));
	fake_set(&m, tp - 8, dtv);
	fake_set(&m, dtv, 2);
	fake_set(&m, dtv + 16, 0xcccc0000);
	tlsm_from_gd(TLSM_AARCH64, TLSM_MUSL, 2, 0x8, &a);
	ck_assert_int_eq(tlsm_slot_addr(&a, tp, fake_read, &m, &addr), 0);
	ck_assert_uint_eq(addr, 0xcccc0008);
	tlsm_from_gd(TLSM_AARCH64, TLSM_MUSL, 3, 0x8, &a);
	ck_assert_int_eq(tlsm_slot_addr(&a, tp, fake_read, &m, &addr), -ENODATA);

	/* musl x86_64: tp + 8, 8-byte entries */
	memset(&m, 0, sizeof(m));
	fake_set(&m, tp + 8, dtv);
	fake_set(&m, dtv, 1);
	fake_set(&m, dtv + 8, 0xdddd0000);
	tlsm_from_gd(TLSM_X86_64, TLSM_MUSL, 1, 0, &a);
	ck_assert_int_eq(tlsm_slot_addr(&a, tp, fake_read, &m, &addr), 0);
	ck_assert_uint_eq(addr, 0xdddd0000);
}
END_TEST

/* Overwrite a word set before (or add it). */
static void
fake_put(struct fake_mem *m, uint64_t addr, uint64_t val)
{
	unsigned i;

	for (i = 0; i < m->n; i++) {
		if (m->w[i].addr == addr) {
			m->w[i].val = val;
			return;
		}
	}
	fake_set(m, addr, val);
}

/* glibc's slotinfo generation of a general-dynamic module (the layout of
 * Debian 12's libthread_db descriptors), and the DTV check it enables: a
 * thread whose DTV generation is older than the module's has no block for
 * it, whatever its slot holds (a module id reused after dlclose()). */
START_TEST(gd_generation_glibc)
{
	const uint64_t rtld = 0x7f0000033020, l1 = 0x500000, l2 = 0x510000;
	const uint64_t map = 0x520000, tp = 0x7f0000000740, dtv = 0x530010;
	const struct tlsm_glibc_db db = {
		.rtld_global = rtld,
		.slotinfo_list = 0x1070,
		.list_len = 0,
		.list_next = 8,
		.list_slotinfo = 16,
		.slotinfo_size = 16,
		.si_gen = 0,
		.si_map = 8,
		.lm_modid = 0x480,
	};
	struct tlsm_glibc_db bad = db;
	struct fake_mem m = {0};
	struct tlsm_access a;
	uint64_t gen = 0, addr = 0;

	/* modids 0-1 in the first list, 2-5 in the second */
	fake_set(&m, rtld + 0x1070, l1);
	fake_set(&m, l1, 2);
	fake_set(&m, l1 + 8, l2);
	fake_set(&m, l2, 4);
	fake_set(&m, l2 + 16 + 0 * 16 + 8, 0); /* modid 2: closed */
	fake_set(&m, l2 + 16 + 1 * 16, 5);     /* modid 3: gen 5 */
	fake_set(&m, l2 + 16 + 1 * 16 + 8, map);
	fake_set(&m, map + 0x480, 3);
	fake_set(&m, l2 + 16 + 2 * 16 + 8, map); /* modid 4: map says 3 */
	ck_assert_int_eq(tlsm_glibc_module_gen(&db, 3, fake_read, &m, &gen), 0);
	ck_assert_uint_eq(gen, 5);
	ck_assert_int_eq(tlsm_glibc_module_gen(&db, 2, fake_read, &m, &gen), -ENOENT);
	/* another module holds modid 4 now */
	ck_assert_int_eq(tlsm_glibc_module_gen(&db, 4, fake_read, &m, &gen), -ENOENT);
	ck_assert_int_eq(tlsm_glibc_module_gen(&db, 0, fake_read, &m, &gen), -EINVAL);
	ck_assert_int_eq(
		tlsm_glibc_module_gen(&db, TLSM_MODID_MAX + 1, fake_read, &m, &gen),
		-EINVAL);
	/* the last module id is looked up (past the last list here), not
	 * refused as out of range */
	ck_assert_int_eq(
		tlsm_glibc_module_gen(&db, TLSM_MODID_MAX, fake_read, &m, &gen),
		-EFAULT);
	/* past the last list */
	ck_assert_int_eq(tlsm_glibc_module_gen(&db, 6, fake_read, &m, &gen), -EFAULT);
	bad.slotinfo_size = 8;
	ck_assert_int_eq(tlsm_glibc_module_gen(&bad, 3, fake_read, &m, &gen), -EINVAL);

	/* the thread's DTV: generation 4, slot 3 still the old module's block */
	fake_set(&m, tp + 8, dtv);
	fake_set(&m, dtv - 16, 16);
	fake_set(&m, dtv, 4);
	fake_set(&m, dtv + 3 * 16, 0x6660000);
	tlsm_from_gd(TLSM_X86_64, TLSM_GLIBC, 3, 0x10, &a);
	/* without the module's generation: the stale block (as before) */
	ck_assert_int_eq(tlsm_slot_addr(&a, tp, fake_read, &m, &addr), 0);
	ck_assert_uint_eq(addr, 0x6660010);
	a.gen = 5;
	a.check_gen = true;
	ck_assert_int_eq(tlsm_slot_addr(&a, tp, fake_read, &m, &addr), -ENODATA);
	/* once the thread has caught up, its slot is the module's block */
	fake_put(&m, dtv, 5);
	ck_assert_int_eq(tlsm_slot_addr(&a, tp, fake_read, &m, &addr), 0);
	ck_assert_uint_eq(addr, 0x6660010);
	/* the module closed (what elf-tls.c sets for -ENOENT): no block for
	 * any thread, whatever its slot holds */
	a.gen = UINT64_MAX;
	ck_assert_int_eq(tlsm_slot_addr(&a, tp, fake_read, &m, &addr), -ENODATA);

	/* hostile: a list of length 0 that is its own next ends the walk */
	memset(&m, 0, sizeof(m));
	fake_set(&m, rtld + 0x1070, l1);
	fake_set(&m, l1, 0);
	fake_set(&m, l1 + 8, l1);
	ck_assert_int_eq(tlsm_glibc_module_gen(&db, 3, fake_read, &m, &gen), -EINVAL);
	/* no list at all (with a TLS module loaded: nonsense) */
	memset(&m, 0, sizeof(m));
	fake_set(&m, rtld + 0x1070, 0);
	ck_assert_int_eq(tlsm_glibc_module_gen(&db, 3, fake_read, &m, &gen), -EINVAL);
}
END_TEST

/* libwtls-tlsdesc.so's PT_LOADs (ld.bfd, -z separate-code) and the
 * mappings glibc's loader made of them at 0x7f0000010000, as maps shows
 * them (RELRO splits the data). */
static const struct tlsm_load wtls_loads[] = {
	{0x0, 0x0, 0x4e8, false},
	{0x1000, 0x1000, 0x159, true},
	{0x2000, 0x2000, 0xbc, false},
	{0x3e00, 0x2e00, 0x218, false},
};
#define WTLS_NL (sizeof(wtls_loads) / sizeof(wtls_loads[0]))
#define LDR     0x7f0000010000ull
static const struct tlsm_map wtls_maps[] = {
	{LDR, LDR + 0x1000, 0, false},
	{LDR + 0x1000, LDR + 0x2000, 0x1000, true},
	{LDR + 0x2000, LDR + 0x3000, 0x2000, false},
	{LDR + 0x3000, LDR + 0x4000, 0x2000, false},
	{LDR + 0x4000, LDR + 0x5000, 0x3000, false},
};
#define WTLS_NM (sizeof(wtls_maps) / sizeof(wtls_maps[0]))

/* wtls_maps with one more mapping before (at) or after them into out */
static void
maps_with(struct tlsm_map *out, bool before, struct tlsm_map extra)
{
	memcpy(out + (before ? 1 : 0), wtls_maps, sizeof(wtls_maps));
	out[before ? 0 : WTLS_NM] = extra;
}

START_TEST(map_bias)
{
	const struct tlsm_load exe[] = {{0x400000, 0, 0x1000, true},
					{0x401e00, 0xe00, 0x300, false}};
	const struct tlsm_load gap[] = {{0x400000, 0, 0x1000, false},
					{0x402000, 0x1000, 0x500, true}};
	const struct tlsm_map *m = wtls_maps;
	struct tlsm_map data = {0x600000, 0x601000, 0x800, false};
	uint64_t bias = 1;

	ck_assert_int_eq(tlsm_map_bias(wtls_loads, WTLS_NL, &m[0], &bias), 0);
	ck_assert_uint_eq(bias, LDR);
	/* a mapping further in: its PT_LOAD's page-rounded vaddr */
	ck_assert_int_eq(tlsm_map_bias(wtls_loads, WTLS_NL, &m[4], &bias), 0);
	ck_assert_uint_eq(bias, LDR);
	/* ET_EXEC: bias 0 */
	ck_assert_int_eq(tlsm_map_bias(exe, 2,
				       &(struct tlsm_map){0x400000, 0x401000, 0, true},
				       &bias),
			 0);
	ck_assert_uint_eq(bias, 0);
	/* an offset no PT_LOAD holds */
	bias = 1;
	ck_assert_int_eq(
		tlsm_map_bias(exe, 2,
			      &(struct tlsm_map){0x600000, 0x601000, 0x5000, false},
			      &bias),
		-ENOENT);
	ck_assert_int_eq(tlsm_map_bias(exe, 0, &data, &bias), -ENOENT);
	ck_assert_uint_eq(bias, 1);
	/* a mapping at the offset where one PT_LOAD's file bytes end and the
	 * next one's begin (page-aligned segments, a gap between their
	 * vaddrs) belongs to the next one: the first would put the bias a
	 * page off */
	ck_assert_int_eq(
		tlsm_map_bias(gap, 2,
			      &(struct tlsm_map){0x500000, 0x501000, 0x1000, true},
			      &bias),
		0);
	ck_assert_uint_eq(bias, 0x500000 - 0x402000);
}
END_TEST

START_TEST(loader_map_choice)
{
	struct tlsm_map below[WTLS_NM + 1], above[WTLS_NM + 1], below_x[WTLS_NM + 1];
	struct tlsm_map twice[2 * WTLS_NM];
	size_t i;
	/* the text remapped anonymously (huge pages): no executable
	 * mapping of the file is left */
	const struct tlsm_map no_text[] = {{LDR - 0x5000, LDR, 0, false},
					   {LDR, LDR + 0x1000, 0, false},
					   {LDR + 0x2000, LDR + 0x3000, 0x2000, false},
					   {LDR + 0x3000, LDR + 0x4000, 0x2000, false},
					   {LDR + 0x4000, LDR + 0x5000, 0x3000, false}};
	/* old layout (no separate code): the text in the first PT_LOAD, at
	 * offset 0 */
	const struct tlsm_load old[] = {{0, 0, 0x7a0, true},
					{0x1e00, 0xe00, 0x230, false}};
	const struct tlsm_map old_maps[] = {
		{LDR - 0x2000, LDR, 0, false},
		{LDR, LDR + 0x1000, 0, true},
		{LDR + 0x1000, LDR + 0x2000, 0, false},
		{LDR + 0x2000, LDR + 0x3000, 0x1000, false}};
	const struct tlsm_map old_maps_x[] = {
		{LDR - 0x2000, LDR, 0, true},
		{LDR, LDR + 0x1000, 0, true},
		{LDR + 0x1000, LDR + 0x2000, 0, false},
		{LDR + 0x2000, LDR + 0x3000, 0x1000, false}};
	/* hostile: wrapping ranges and offsets */
	const struct tlsm_load wrap[] = {
		{UINT64_MAX - 0xfff, UINT64_MAX, UINT64_MAX, true}};
	const struct tlsm_map wrap_maps[] = {{UINT64_MAX, 0, 0, true},
					     {0x1000, 0, UINT64_MAX, true}};

	/* the program's own read-only mapping of the whole file, below the
	 * loader's, and above them */
	maps_with(below, true, (struct tlsm_map){LDR - 0x5000, LDR, 0, false});
	ck_assert_int_eq(tlsm_loader_map(wtls_loads, WTLS_NL, below, 6), 1);
	maps_with(above, false,
		  (struct tlsm_map){LDR + 0x9000, LDR + 0xe000, 0, false});
	ck_assert_int_eq(tlsm_loader_map(wtls_loads, WTLS_NL, above, 6), 0);
	/* executable too: it places the text (vaddr = offset) but not the
	 * data (a page further) */
	maps_with(below_x, true, (struct tlsm_map){LDR - 0x5000, LDR, 0, true});
	ck_assert_int_eq(tlsm_loader_map(wtls_loads, WTLS_NL, below_x, 6), 1);
	ck_assert_int_eq(tlsm_loader_map(wtls_loads, WTLS_NL, no_text, 5), -1);
	/* loaded twice (dlmopen()): the first, as before */
	for (i = 0; i < WTLS_NM; i++) {
		twice[i] = wtls_maps[i];
		twice[i].start -= 0x5000;
		twice[i].end -= 0x5000;
		twice[WTLS_NM + i] = wtls_maps[i];
	}
	ck_assert_int_eq(tlsm_loader_map(wtls_loads, WTLS_NL, twice, 10), 0);
	ck_assert_int_eq(tlsm_loader_map(old, 2, old_maps, 4), 1);
	/* an executable whole-file mapping places the text there too, but
	 * not the data */
	ck_assert_int_eq(tlsm_loader_map(old, 2, old_maps_x, 4), 1);
	/* only some of the mappings seen: none fits */
	ck_assert_int_eq(tlsm_loader_map(wtls_loads, WTLS_NL, below, 2), -1);
	/* the third PT_LOAD starts where the second mapping ends: not in it */
	ck_assert_int_eq(tlsm_loader_map(wtls_loads, 3, wtls_maps, 2), -1);
	ck_assert_int_eq(tlsm_loader_map(wtls_loads, 0, below, 6), -1);
	ck_assert_int_eq(tlsm_loader_map(wtls_loads, WTLS_NL, NULL, 0), -1);
	ck_assert_int_eq(tlsm_loader_map(wrap, 1, wrap_maps, 2), -1);
}
END_TEST

TEST_SUITE(tlsmath_suite)
{
	Suite *s = suite_create("ctxdump-tlsmath");
	TCase *tc = tcase_create("formulas");

	tcase_add_test(tc, le_x86_64);
	tcase_add_test(tc, le_aarch64);
	tcase_add_test(tc, resolver_patterns);
	tcase_add_test(tc, tlsdesc_classify);
	tcase_add_test(tc, gd_ie_classify);
	tcase_add_test(tc, slot_static);
	tcase_add_test(tc, static_block_tpoff);
	tcase_add_test(tc, slot_dtv_glibc_x86_64);
	tcase_add_test(tc, slot_dtv_aarch64);
	tcase_add_test(tc, gd_generation_glibc);
	tcase_add_test(tc, map_bias);
	tcase_add_test(tc, loader_map_choice);
	suite_add_tcase(s, tc);
	return s;
}
