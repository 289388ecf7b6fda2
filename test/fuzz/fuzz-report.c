/* SPDX-License-Identifier: Apache-2.0 */
/* `ctxdump report` over arbitrary files (tools/ctxdump/report.c and the
 * record reader of proffile.c): a recording is read from wherever the user
 * got it, so every length, count and id in it is hostile.  The input is
 * read as a recording by every kind of report (summary, folded stacks,
 * inferred spans with and without the options that change their shape,
 * filters); output goes to /dev/null.  Besides the sanitizers' checks: a
 * report never fails for a usage reason, and one that is not fatal had a
 * recording to read (the header at least). */
#include "fuzz.h"

#include <string.h>

#include "profile.h"
#include "proffile.h"

#define EXIT_USAGE 64

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* parse_args() writes into --attr's argument: fresh copies */
	static const char *const modes[][10] = {
		{"report", "in", NULL},
		{"report", "--folded", "in", NULL},
		{"report", "--spans", "--context-spans", "--min-samples", "1", "in",
		 NULL},
		{"report", "--spans", "--collapse", "--traced", "in", NULL},
		{"report", "--traces", "0", "--top", "3", "--attr", "http.route", "in",
		 NULL},
		{"report", "--folded", "--tid", "7", "--trace", "01", "in", NULL},
	};
	static bool init;
	size_t m;

	if (!init) {
		/* the reports are printed: nowhere */
		FUZZ_CHECK(freopen("/dev/null", "w", stdout) != NULL);
		init = true;
	}
	if (!size)
		return 0; /* fmemopen() wants a buffer */
	for (m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		char args[10][32], *argv[10];
		int argc, st;
		FILE *f;

		for (argc = 0; modes[m][argc]; argc++) {
			snprintf(args[argc], sizeof(args[argc]), "%s", modes[m][argc]);
			argv[argc] = args[argc];
		}
		argv[argc] = NULL;
		f = fmemopen((void *)data, size, "r");
		FUZZ_CHECK(f);
		st = report_stream(f, argc, argv);
		fclose(f);
		FUZZ_CHECK(st >= 0 && st <= 2);
		if (st != 2)
			FUZZ_CHECK(size >= PFILE_HEADER_SIZE &&
				   memcmp(data, PFILE_MAGIC, 8) == 0);
	}
	return 0;
}
