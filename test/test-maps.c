/* SPDX-License-Identifier: Apache-2.0 */
#include "test-common.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "maps.h"
#include "process-ctx.h"

static void
parse_ok(const char *line, struct maps_entry *e)
{
	ck_assert_msg(maps_parse_line(line, strlen(line), e) == 0, "\"%s\"", line);
}

static void
assert_path(const struct maps_entry *e, const char *path)
{
	ck_assert_msg(
		e->path_len == strlen(path) && memcmp(e->path, path, e->path_len) == 0,
		"path \"%.*s\", expected \"%s\"", (int)e->path_len, e->path, path);
}

START_TEST(parse_fields)
{
	struct maps_entry e;

	parse_ok("7f3a1c000000-7f3a1c021000 r-xp 0001a000 fd:01 1835023    "
		 "/usr/lib/x86_64-linux-gnu/libc.so.6\n",
		 &e);
	ck_assert(e.start == 0x7f3a1c000000ull);
	ck_assert(e.end == 0x7f3a1c021000ull);
	ck_assert_str_eq(e.perms, "r-xp");
	ck_assert(e.offset == 0x1a000);
	ck_assert_uint_eq(e.dev_major, 0xfd);
	ck_assert_uint_eq(e.dev_minor, 1);
	ck_assert(e.inode == 1835023);
	assert_path(&e, "/usr/lib/x86_64-linux-gnu/libc.so.6");

	/* The example used by libdatadog's reader tests (§2.6). */
	parse_ok("7f000000-7f001000 rw-p 00000000 00:00 0 [anon:OTEL_CTX]", &e);
	ck_assert(e.start == 0x7f000000 && e.end == 0x7f001000);
	ck_assert_str_eq(e.perms, "rw-p");
	assert_path(&e, "[anon:OTEL_CTX]");
	ck_assert_int_eq(pctx_map_name_kind(e.path, e.path_len), PCTX_MAP_ANON);

	/* Full 64-bit addresses, shared mapping, no trailing newline. */
	parse_ok("ffffffffff600000-ffffffffff601000 --xs 00000000 00:00 0              "
		 "    "
		 "[vsyscall]",
		 &e);
	ck_assert(e.start == 0xffffffffff600000ull);
	ck_assert(e.end == 0xffffffffff601000ull);
	ck_assert_str_eq(e.perms, "--xs");
	assert_path(&e, "[vsyscall]");
}
END_TEST

START_TEST(parse_paths)
{
	struct maps_entry e;

	/* A memfd mapping as this kernel shows it: " (deleted)" is part of
	 * the path and the matcher accepts it. */
	parse_ok("7f5e2b9f4000-7f5e2b9f5000 rw-p 00000000 00:01 3075                   "
		 "    "
		 "/memfd:OTEL_CTX (deleted)\n",
		 &e);
	assert_path(&e, "/memfd:OTEL_CTX (deleted)");
	ck_assert_uint_eq(e.dev_minor, 1);
	ck_assert(e.inode == 3075);
	ck_assert_int_eq(pctx_map_name_kind(e.path, e.path_len), PCTX_MAP_MEMFD);

	parse_ok(
		"7f5e2b9f4000-7f5e2b9f5000 rw-s 00000000 00:01 9 [anon_shmem:OTEL_CTX]",
		&e);
	ck_assert_int_eq(pctx_map_name_kind(e.path, e.path_len), PCTX_MAP_ANON_SHMEM);

	/* Spaces inside the name, including a trailing one, are kept. */
	parse_ok(
		"00400000-00401000 r--p 00000000 08:02 42        /tmp/my dir/a b.so \n",
		&e);
	assert_path(&e, "/tmp/my dir/a b.so ");

	parse_ok("00400000-00401000 r--p 00000000 08:02 42 /memfd:OTEL_CTX_BACKUP "
		 "(deleted)",
		 &e);
	ck_assert_int_eq(pctx_map_name_kind(e.path, e.path_len), PCTX_MAP_NONE);

	/* Anonymous: no pathname, with or without newline. */
	parse_ok("7ffd1000-7ffd3000 rw-p 00000000 00:00 0\n", &e);
	ck_assert_uint_eq(e.path_len, 0);
	ck_assert_ptr_nonnull(e.path);
	parse_ok("7ffd1000-7ffd3000 rw-p 00000000 00:00 0", &e);
	ck_assert_uint_eq(e.path_len, 0);
	ck_assert_int_eq(pctx_map_name_kind(e.path, e.path_len), PCTX_MAP_NONE);
}
END_TEST

START_TEST(parse_length_bounds)
{
	/* The length bounds the line; bytes after it are never looked at. */
	static const char two[] = "1000-2000 rw-p 00000000 00:00 0 [heap]\n"
				  "3000-4000 r--p 00000000 00:00 0 [stack]\n";
	const char *second = strchr(two, '\n') + 1;
	struct maps_entry e;

	ck_assert_int_eq(maps_parse_line(two, (size_t)(second - two), &e), 0);
	assert_path(&e, "[heap]");
	ck_assert_int_eq(maps_parse_line(second, strlen(second), &e), 0);
	assert_path(&e, "[stack]");
	ck_assert(e.start == 0x3000);
	/* Cut right after the inode: a valid line without a pathname. */
	ck_assert_int_eq(maps_parse_line(two, 31, &e), 0);
	ck_assert_uint_eq(e.path_len, 0);
}
END_TEST

START_TEST(parse_malformed)
{
	static const char *const bad[] = {
		"",
		"\n",
		"1000-2000",
		"1000-2000 ",
		"1000 2000 rw-p 00000000 00:00 0",
		"-2000 rw-p 00000000 00:00 0",
		"1000- rw-p 00000000 00:00 0",
		"1000-2000 rw-p",
		"1000-2000 rw-p ",
		"1000-2000 rw-q 00000000 00:00 0",
		"1000-2000 rwxpp 00000000 00:00 0",
		"1000-2000 wr-p 00000000 00:00 0",
		"1000-2000 rw- 00000000 00:00 0",
		"1000-2000 rw-p 0000000g 00:00 0",
		"1000-2000 rw-p 00000000 0000 0",
		"1000-2000 rw-p 00000000 00: 0",
		"1000-2000 rw-p 00000000 00:00",
		"1000-2000 rw-p 00000000 00:00 ",
		"1000-2000 rw-p 00000000 00:00 x",
		"1000-2000 rw-p 00000000 00:00 12x /path",
		"1000-2000  rw-p 00000000 00:00 0",
		"2000-1000 rw-p 00000000 00:00 0",           /* end < start */
		"10000000000000000-2 rw-p 00000000 00:00 0", /* 17 hex digits */
		"1000-2000 rw-p 00000000 100000000:00 0",    /* major > 32 bits */
		"1000-2000 rw-p 00000000 00:00 18446744073709551616", /* > 2^64-1 */
		"  1000-2000 rw-p 00000000 00:00 0",
		"1000-2000 rw-p 00000000 00:00 0\n\n",
	};
	static const char biggest[] = "0-ffffffffffffffff rw-p ffffffffffffffff "
				      "ffffffff:ffffffff 18446744073709551615";
	struct maps_entry e;
	size_t i;

	memset(&e, 0x5a, sizeof(e));
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(maps_parse_line(bad[i], strlen(bad[i]), &e) == -EINVAL,
			      "\"%s\"", bad[i]);
	/* Untouched on failure. */
	ck_assert_uint_eq(e.dev_major, 0x5a5a5a5a);
	ck_assert_int_eq(maps_parse_line(NULL, 0, &e), -EINVAL);
	ck_assert_int_eq(maps_parse_line("1000-2000 rw-p 0 0:0 0", 22, NULL), -EINVAL);

	/* Largest values still parse. */
	ck_assert_int_eq(maps_parse_line(biggest, strlen(biggest), &e), 0);
	ck_assert(e.end == UINT64_MAX && e.offset == UINT64_MAX &&
		  e.inode == UINT64_MAX);
	ck_assert_uint_eq(e.dev_major, 0xffffffffu);
}
END_TEST

START_TEST(parse_own_maps)
{
	/* Every line the kernel gives us parses, and our own executable is
	 * among the paths.  (Tests may do I/O; the parser does not.) */
	FILE *f = fopen("/proc/self/maps", "re");
	char line[4096];
	unsigned n = 0;
	bool found_exe = false;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		struct maps_entry e;

		ck_assert_msg(maps_parse_line(line, strlen(line), &e) == 0, "%s", line);
		ck_assert(e.start < e.end);
		if (e.path_len > 0 && memmem(e.path, e.path_len, "test-maps", 9))
			found_exe = true;
		n++;
	}
	fclose(f);
	ck_assert_uint_gt(n, 5);
	ck_assert(found_exe);
}
END_TEST

/* The " (deleted)" suffix, and only as a suffix. */
START_TEST(path_deleted)
{
	static const struct {
		const char *path;
		bool deleted;
		size_t len;
	} cases[] = {
		{"/usr/lib/libc.so.6 (deleted)", true, 18},
		{"/usr/lib/libc.so.6", false, 18},
		{"/x (deleted)/lib.so", false, 19},
		{"/memfd:a (deleted)", true, 8},
		{" (deleted)", false, 10},
		{"", false, 0},
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len = strlen(cases[i].path);

		ck_assert_msg(maps_path_deleted(cases[i].path, &len) ==
				      cases[i].deleted,
			      "%s", cases[i].path);
		ck_assert_uint_eq(len, cases[i].len);
	}
}
END_TEST

TEST_SUITE(maps_suite)
{
	Suite *s = suite_create("/proc/PID/maps parser");
	TCase *tc = tcase_create("Lines");

	tcase_add_test(tc, parse_fields);
	tcase_add_test(tc, parse_paths);
	tcase_add_test(tc, parse_length_bounds);
	tcase_add_test(tc, parse_malformed);
	tcase_add_test(tc, parse_own_maps);
	tcase_add_test(tc, path_deleted);
	suite_add_tcase(s, tc);
	return s;
}
