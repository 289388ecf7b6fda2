/* SPDX-License-Identifier: Apache-2.0 */
/* etls_examine_image(), the pure entry point the ELF fuzzer drives
 * (test/fuzz/fuzz-elf.c), must find what etls_find() finds in a live
 * process through /proc: the same definition, bias, PT_TLS and slots,
 * for the writers of every TLS model.  No ptrace: etls_find() only reads
 * /proc/PID/maps and the mapped files. */
#include "test-common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "elf-tls.h"
#include "maps.h"
#include "thread-record.h"

static uint8_t *
slurp(const char *path, size_t *len)
{
	struct stat st;
	uint8_t *b;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	ck_assert_msg(fd >= 0, "%s", path);
	ck_assert_int_eq(fstat(fd, &st), 0);
	b = malloc((size_t)st.st_size + 1);
	ck_assert_ptr_nonnull(b);
	ck_assert_int_eq(read(fd, b, (size_t)st.st_size), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return b;
}

/* Start and file offset of path's lowest mapping in pid. */
static void
lowest_mapping(pid_t pid, const char *path, uint64_t *start, uint64_t *offset)
{
	char mp[64], line[8192];
	bool found = false;
	FILE *f;

	snprintf(mp, sizeof(mp), "/proc/%d/maps", (int)pid);
	f = fopen(mp, "re");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		struct maps_entry e;

		if (maps_parse_line(line, strlen(line), &e) < 0 ||
		    e.path_len != strlen(path) || memcmp(e.path, path, e.path_len) != 0)
			continue;
		if (!found || e.offset < *offset) {
			*start = e.start;
			*offset = e.offset;
			found = true;
		}
	}
	fclose(f);
	ck_assert_msg(found, "%s not mapped", path);
}

static void
examine(pid_t pid, const char *path, bool user, struct etls_symbol *sym)
{
	uint64_t start = 0, offset = 0;
	size_t len;
	uint8_t *img = slurp(path, &len);

	lowest_mapping(pid, path, &start, &offset);
	ck_assert_int_eq(etls_examine_image(img, len, start, offset,
					    OTEL_THREAD_CTX_SYMBOL, user, sym),
			 0);
	free(img);
}

START_TEST(image_matches_live_process)
{
	static const char *const writers[] = {"writer-tlsdesc", "writer-gd",
					      "writer-ie", "writer-le",
					      "writer-alias-ld"};
	static char line[8192];
	char path[4096];
	struct etls_symbol live, img;
	struct test_child c;
	char *argv[2] = {path, NULL};

	snprintf(path, sizeof(path), "%s/%s", test_env_path("HELPER_DIR"), writers[_i]);
	test_child_start(&c, argv, NULL, false);
	test_child_expect(&c, "READY ", line, sizeof(line), 10000);
	ck_assert_int_eq(etls_find(c.pid, &live), 0);

	examine(c.pid, live.module, false, &img);
	ck_assert_uint_eq(img.bias, live.bias);
	ck_assert_uint_eq(img.st_value, live.st_value);
	ck_assert_uint_eq(img.st_size, 8);
	ck_assert_uint_eq(img.tls_vaddr, live.tls_vaddr);
	ck_assert_uint_eq(img.tls_memsz, live.tls_memsz);
	ck_assert_uint_eq(img.tls_align, live.tls_align);
	ck_assert_int_eq(img.arch, live.arch);
	if (live.reloc_module[0]) {
		/* the slot is in the user's relocations (initial-exec) */
		ck_assert_uint_eq(img.tpoff_slot, 0);
		examine(c.pid, live.reloc_module, true, &img);
		ck_assert_uint_ne(img.tpoff_slot, 0);
	}
	ck_assert_uint_eq(img.tlsdesc_slot, live.tlsdesc_slot);
	ck_assert_uint_eq(img.dtpmod_slot, live.dtpmod_slot);
	ck_assert_uint_eq(img.dtpoff_slot, live.dtpoff_slot);
	ck_assert_uint_eq(img.tpoff_slot, live.tpoff_slot);
	ck_assert_int_eq(img.anon_slots, live.anon_slots);
	ck_assert_int_eq(img.slot_adjust, live.slot_adjust);
	ck_assert_int_eq(WEXITSTATUS(test_child_finish(&c, 10000)), 0);
}
END_TEST

START_TEST(image_errors)
{
	char path[4096];
	struct etls_symbol sym;
	uint8_t junk[512];
	uint8_t *img;
	size_t len, cut;

	memset(junk, 0x7f, sizeof(junk));
	ck_assert_int_eq(etls_examine_image(junk, sizeof(junk), 0x1000, 0,
					    OTEL_THREAD_CTX_SYMBOL, false, &sym),
			 -ENOEXEC);
	ck_assert_int_eq(etls_examine_image(junk, 0, 0x1000, 0, OTEL_THREAD_CTX_SYMBOL,
					    false, &sym),
			 -ENOEXEC);
	/* an ELF file without the symbol */
	snprintf(path, sizeof(path), "%s/threads", test_env_path("HELPER_DIR"));
	img = slurp(path, &len);
	ck_assert_int_eq(etls_examine_image(img, len, 0x1000, 0, OTEL_THREAD_CTX_SYMBOL,
					    false, &sym),
			 -ENOENT);
	free(img);
	/* a defining library cut anywhere: never more than "not found" */
	snprintf(path, sizeof(path), "%s/libwtls-tlsdesc.so",
		 test_env_path("HELPER_DIR"));
	img = slurp(path, &len);
	for (cut = 0; cut < len; cut += 97) {
		uint8_t *part = malloc(cut + 1);
		int r;

		memcpy(part, img, cut);
		r = etls_examine_image(part, cut, 0x7f0000000000, 0,
				       OTEL_THREAD_CTX_SYMBOL, false, &sym);
		ck_assert_msg(r == 0 || r == -ENOENT || r == -ENOEXEC, "cut %zu: %d",
			      cut, r);
		free(part);
	}
	ck_assert_int_eq(etls_examine_image(img, len, 0x7f0000000000, 0,
					    OTEL_THREAD_CTX_SYMBOL, false, &sym),
			 0);
	ck_assert_uint_ne(sym.tlsdesc_slot, 0);
	free(img);
}
END_TEST

/* otel_thread_ctx_v1 exported as an alias of a hidden thread-local
 * (writer-tls-alias.c, at offset 0x28 of the module's block): no
 * relocation names it, the symbol-less ones address the block plus their
 * addend. */
START_TEST(alias_images)
{
	static const char *const libs[] = {"libwtls-alias-tlsdesc.so",
					   "libwtls-alias-gd.so",
					   "libwtls-alias-ld.so"};
	struct etls_symbol sym;
	char path[4096];
	uint8_t *img;
	size_t len;

	snprintf(path, sizeof(path), "%s/%s", test_env_path("HELPER_DIR"), libs[_i]);
	img = slurp(path, &len);
	ck_assert_int_eq(etls_examine_image(img, len, 0x7f0000000000, 0,
					    OTEL_THREAD_CTX_SYMBOL, false, &sym),
			 0);
	free(img);
	ck_assert_uint_eq(sym.st_value, 0x28);
	ck_assert(sym.anon_slots);
	switch (_i) {
	case 0: /* gnu2: its own descriptor (addend 0x28) among two */
		ck_assert_uint_ne(sym.tlsdesc_slot, 0);
		ck_assert_int_eq(sym.slot_adjust, 0);
		break;
	case 1: /* gnu: a module id; the offset is st_value */
		ck_assert_uint_eq(sym.tlsdesc_slot, 0);
		ck_assert_uint_ne(sym.dtpmod_slot, 0);
		ck_assert_uint_eq(sym.dtpoff_slot, 0);
		break;
	default: /* local-dynamic: the module's base (addend 0) */
		ck_assert_uint_ne(sym.tlsdesc_slot, 0);
		ck_assert_int_eq(sym.slot_adjust, 0x28);
	}
}
END_TEST

/* A load that cannot open the process's maps (the process, or the thread
 * read through, is gone: record's rediscovery retries through another
 * thread, again and again in a long recording) frees the names it wanted.
 * Old: 13 names, some 360 bytes, leaked per failed load. */
START_TEST(proc_load_error_frees)
{
	struct etls_proc *p;
	size_t before, after;
	int i, failed = 0;

	/* no such process (pid_max is at most 2^22): the first loads set up
	 * what stays (libelf, caches of a few entries); no check inside the
	 * loops (Check's own buffers) */
	for (i = 0; i < 100; i++)
		(void)etls_proc_load(INT_MAX, &p);
	before = mallinfo2().uordblks;
	for (i = 0; i < 100; i++)
		failed += etls_proc_load(INT_MAX, &p) < 0 && !p;
	after = mallinfo2().uordblks;
	ck_assert_int_eq(failed, 100);
	ck_assert_msg(after <= before, "%zu bytes more in use after 100 loads",
		      after - before);
}
END_TEST

TEST_SUITE(ctxdump_elf_suite)
{
	Suite *s = suite_create("ctxdump-elf");
	TCase *tc = tcase_create("image");

	tcase_add_loop_test(tc, image_matches_live_process, 0, 5);
	tcase_add_loop_test(tc, alias_images, 0, 3);
	tcase_add_test(tc, image_errors);
	tcase_add_test(tc, proc_load_error_frees);
	suite_add_tcase(s, tc);
	return s;
}
