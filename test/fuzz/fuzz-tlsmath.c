/* SPDX-License-Identifier: Apache-2.0 */
/* ctxdump's TLS arithmetic (tools/ctxdump/tls-math.c) on values a hostile
 * or broken target controls: the loader-written slots (TLSDESC descriptor
 * and the code at its entry, GD pair, IE word), the executable's PT_TLS
 * fields, and the thread's DTV, read from a fake address space made of
 * the input.  Oracles: the models and results are the documented ones,
 * reads stay inside what the fake space returns, and UBSan finds no
 * overflow. */
#include "fuzz.h"

#include <errno.h>
#include <string.h>

#include "tls-math.h"

struct space {
	uint64_t base;
	const uint8_t *mem;
	size_t len;
	unsigned reads;
};

static int
space_read(void *opaque, uint64_t addr, void *buf, size_t len)
{
	struct space *s = opaque;

	s->reads++;
	if (addr < s->base || addr - s->base > s->len ||
	    len > s->len - (addr - s->base))
		return -EFAULT;
	memcpy(buf, s->mem + (addr - s->base), len);
	return 0;
}

static void
check_access(const struct tlsm_access *a,
	     enum tlsm_arch arch,
	     enum tlsm_libc libc,
	     struct space *sp,
	     uint64_t tp)
{
	uint64_t addr = 0x1234;
	int r;

	FUZZ_CHECK(a->arch == arch && a->libc == libc);
	FUZZ_CHECK(a->model >= TLSM_NONE && a->model <= TLSM_UNRESOLVED);
	FUZZ_CHECK(tlsm_model_name(a->model) != NULL);
	if (a->model == TLSM_TLSDESC_DYNAMIC || a->model == TLSM_GD)
		FUZZ_CHECK(a->modid >= 1 && a->modid <= TLSM_MODID_MAX);
	sp->reads = 0;
	r = tlsm_slot_addr(a, tp, space_read, sp, &addr);
	FUZZ_CHECK(sp->reads <= 4);
	if (r < 0) {
		FUZZ_CHECK(r == -EINVAL || r == -ENODATA || r == -EFAULT);
		FUZZ_CHECK(addr == 0x1234);
		FUZZ_CHECK(r != -EINVAL || tp == 0 || a->model == TLSM_UNRESOLVED ||
			   a->model == TLSM_NONE);
		return;
	}
	FUZZ_CHECK(tp != 0);
	if (a->model == TLSM_TLSDESC_STATIC || a->model == TLSM_IE ||
	    a->model == TLSM_LE)
		FUZZ_CHECK(addr == tp + (uint64_t)a->tpoff);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = {data, size};
	unsigned sel = fuzz_byte(&in);
	enum tlsm_arch arch = sel & 1 ? TLSM_AARCH64 : TLSM_X86_64;
	enum tlsm_libc libc = sel & 2 ? TLSM_MUSL : TLSM_GLIBC;
	uint64_t entry = fuzz_u64(&in), arg = fuzz_u64(&in);
	uint64_t dyn[3] = {fuzz_u64(&in), fuzz_u64(&in), fuzz_u64(&in)};
	uint64_t modid = fuzz_u64(&in), dtpoff = fuzz_u64(&in), got = fuzz_u64(&in);
	uint64_t st_value = fuzz_u64(&in), vaddr = fuzz_u64(&in), memsz = fuzz_u64(&in);
	uint64_t align = fuzz_u64(&in), tp = fuzz_u64(&in);
	uint8_t code[16];
	size_t ncode = fuzz_byte(&in) % (sizeof(code) + 1), i;
	struct tlsm_access a;
	struct tlsm_dtv_layout lay;
	struct space sp;
	int64_t tpoff = 0x7777;
	int r;

	for (i = 0; i < sizeof(code); i++)
		code[i] = (uint8_t)fuzz_byte(&in);
	/* small numbers are the interesting ones: let some bits pick them */
	if (sel & 4)
		memsz &= 0xffff, st_value &= 0xffff;
	if (sel & 8)
		align = (uint64_t)1 << (align & 63);
	if (sel & 16)
		modid &= 0xff;
	sp.base = sel & 32 ? tp - (tp & 0xfff) : fuzz_u64(&in);
	sp.mem = in.p;
	sp.len = in.left;

	(void)tlsm_classify_resolver(arch, code, ncode);
	(void)tlsm_classify_resolver(arch, NULL, 0);
	tlsm_dtv_layout(arch, libc, &lay);
	FUZZ_CHECK(lay.stride == 8 || lay.stride == 16);

	tlsm_from_tlsdesc(arch, libc, entry, arg, code, ncode, sel & 64 ? NULL : dyn,
			  &a);
	if (entry == 0)
		FUZZ_CHECK(a.model == TLSM_UNRESOLVED);
	if (a.model == TLSM_TLSDESC_STATIC)
		FUZZ_CHECK(a.tpoff == (int64_t)arg);
	check_access(&a, arch, libc, &sp, tp);

	tlsm_from_gd(arch, libc, modid, dtpoff, &a);
	FUZZ_CHECK(a.model ==
		   (modid >= 1 && modid <= TLSM_MODID_MAX ? TLSM_GD : TLSM_UNRESOLVED));
	check_access(&a, arch, libc, &sp, tp);

	tlsm_from_ie(arch, libc, got, &a);
	FUZZ_CHECK(a.model == TLSM_IE || a.model == TLSM_UNRESOLVED);
	check_access(&a, arch, libc, &sp, tp);

	r = tlsm_le_tpoff(arch, libc, st_value, vaddr, memsz, align, &tpoff);
	if (r < 0) {
		FUZZ_CHECK(r == -EINVAL && tpoff == 0x7777);
	} else {
		memset(&a, 0, sizeof(a));
		a.arch = arch;
		a.libc = libc;
		a.model = TLSM_LE;
		a.tpoff = tpoff;
		/* the variable lies inside the block the loader reserves */
		if (arch == TLSM_X86_64)
			FUZZ_CHECK(tpoff <= 0);
		check_access(&a, arch, libc, &sp, tp);
	}
	return 0;
}
