/* SPDX-License-Identifier: Apache-2.0 */
/* ctxdump's ELF reading (tools/ctxdump/elf-tls.c: program headers, load
 * bias, the one-pass search of the symbol tables for every name a dump
 * wants, .dynsym and .symtab lookup, relocation scan; -EPROTO if the two
 * disagree) over arbitrary bytes, as if a
 * target had mapped a hostile file, followed by the local-exec arithmetic
 * etls_resolve() applies to an executable's PT_TLS.  Input: a flags byte,
 * the mapping's start and file offset (8 bytes each), then the file. */
#include "fuzz.h"

#include <errno.h>
#include <string.h>

#include "elf-tls.h"
#include "thread-record.h"

static void
check(uint8_t *image,
      size_t size,
      uint64_t start,
      uint64_t offset,
      const char *name,
      bool user)
{
	struct etls_symbol sym;
	int64_t tpoff;
	int r;

	r = etls_examine_image(image, size, start, offset, name, user, &sym);
	FUZZ_CHECK(r == 0 || r == -ENOENT || r == -ENOEXEC);
	if (r < 0)
		return;
	if (user) {
		FUZZ_CHECK(sym.tlsdesc_slot || sym.dtpmod_slot || sym.dtpoff_slot ||
			   sym.tpoff_slot);
		return;
	}
	FUZZ_CHECK(sym.st_size == 8);
	FUZZ_CHECK(sym.arch == TLSM_X86_64 || sym.arch == TLSM_AARCH64 ||
		   sym.arch == (enum tlsm_arch) - 1);
	/* what etls_resolve() computes for a definition in the executable */
	(void)tlsm_le_tpoff(sym.arch == TLSM_AARCH64 ? TLSM_AARCH64 : TLSM_X86_64,
			    TLSM_GLIBC, sym.st_value, sym.tls_vaddr, sym.tls_memsz,
			    sym.tls_align, &tpoff);
	(void)tlsm_le_tpoff(TLSM_AARCH64, TLSM_MUSL, sym.st_value, sym.tls_vaddr,
			    sym.tls_memsz, sym.tls_align, &tpoff);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = {data, size};
	unsigned flags = fuzz_byte(&in);
	uint64_t start = fuzz_u64(&in), offset = fuzz_u64(&in);
	uint8_t *image;

	/* realistic mappings most of the time: page-aligned, offset 0 */
	if (flags & 1) {
		start &= ~(uint64_t)0xfff;
		offset = 0;
	}
	/* libelf may convert the image in place: a private copy each time */
	image = malloc(in.left ? in.left : 1);
	FUZZ_CHECK(image);
	memcpy(image, in.p, in.left);
	check(image, in.left, start, offset, OTEL_THREAD_CTX_SYMBOL, false);
	memcpy(image, in.p, in.left);
	check(image, in.left, start, offset, OTEL_THREAD_CTX_SYMBOL, true);
	free(image);
	return 0;
}
