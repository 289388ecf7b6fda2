/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Shared by the tests that run ctxdump against the test writers
 * (test-ctxdump-tls.c, test-ctxdump-static.c, test-ctxdump-reload.c): what
 * a writer of test/helpers/writer-common.c says each thread published
 * (its THREAD lines up to READY), escapes and UTF-8 for the suites' JSON
 * string readers, and the checks a suite's create function makes before
 * ctxdump may attach.  Paths come from test-prof.h.  Static functions. */

#include "test-prof.h"

#include <stdint.h>
#include <string.h>

#include "thread-record.h"

#define MAX_THREADS 16
#define TIMEOUT_MS  30000

/* What the writer says one thread published (a THREAD line). */
struct expect_thread {
	pid_t tid;
	char kind[16];
	uint64_t ptr;
	bool has_record;
	unsigned valid;
	char trace_id[33];
	char span_id[17];
	unsigned flags;
	uint8_t attrs[TREC_MAX_SIZE];
	size_t attrs_len;
};

/* attrs_data from its hex ("-": none). */
static __attribute__((unused)) void
cw_hex_to_bytes(const char *hex, uint8_t *out, size_t cap, size_t *len)
{
	size_t n = strlen(hex), i;

	*len = 0;
	if (strcmp(hex, "-") == 0)
		return;
	ck_assert_uint_eq(n % 2, 0);
	ck_assert_uint_le(n / 2, cap);
	for (i = 0; i < n / 2; i++) {
		unsigned b;

		ck_assert_int_eq(sscanf(hex + 2 * i, "%2x", &b), 1);
		out[i] = (uint8_t)b;
	}
	*len = n / 2;
}

static __attribute__((unused)) void
cw_parse_thread_line(const char *line, struct expect_thread *t)
{
	char ptr[32], valid[8], trace[40], span[24], flags[8];
	static char attrs[2 * TREC_MAX_SIZE + 8];
	int tid;

	memset(t, 0, sizeof(*t));
	ck_assert_int_eq(sscanf(line, "THREAD %d %15s %31s %7s %39s %23s %7s %1287s",
				&tid, t->kind, ptr, valid, trace, span, flags, attrs),
			 8);
	t->tid = tid;
	t->ptr = strtoull(ptr, NULL, 16);
	if (strcmp(valid, "-") == 0)
		return;
	t->has_record = true;
	t->valid = (unsigned)atoi(valid);
	ck_assert_uint_eq(strlen(trace), 32);
	ck_assert_uint_eq(strlen(span), 16);
	memcpy(t->trace_id, trace, 33);
	memcpy(t->span_id, span, 17);
	t->flags = (unsigned)strtoul(flags, NULL, 16);
	cw_hex_to_bytes(attrs, t->attrs, sizeof(t->attrs), &t->attrs_len);
}

/* Reads the writer's THREAD lines into t[*n...] up to its READY line, whose
 * thread count must be *n and whose pid, stored in *pid, the child's. */
static __attribute__((unused)) void
cw_read_threads(struct test_child *child, struct expect_thread *t, int *n, pid_t *pid)
{
	char line[4096];

	for (;;) {
		test_child_readline(child, line, sizeof(line), TIMEOUT_MS);
		if (strncmp(line, "THREAD ", 7) == 0) {
			ck_assert_int_lt(*n, MAX_THREADS);
			cw_parse_thread_line(line, &t[(*n)++]);
		} else if (strncmp(line, "READY ", 6) == 0) {
			int ready_pid, ready_n;
			char model[32];

			ck_assert_int_eq(sscanf(line, "READY %d %31s %d", &ready_pid,
						model, &ready_n),
					 3);
			ck_assert_int_eq(ready_n, *n);
			*pid = ready_pid;
			ck_assert_int_eq(*pid, child->pid);
			return;
		}
	}
}

/* Code point cp as UTF-8 at out + *n. */
static __attribute__((unused)) void
cw_put_utf8(uint8_t *out, size_t *n, uint32_t cp)
{
	if (cp < 0x80) {
		out[(*n)++] = (uint8_t)cp;
	} else if (cp < 0x800) {
		out[(*n)++] = (uint8_t)(0xc0 | (cp >> 6));
		out[(*n)++] = (uint8_t)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		out[(*n)++] = (uint8_t)(0xe0 | (cp >> 12));
		out[(*n)++] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
		out[(*n)++] = (uint8_t)(0x80 | (cp & 0x3f));
	} else {
		out[(*n)++] = (uint8_t)(0xf0 | (cp >> 18));
		out[(*n)++] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
		out[(*n)++] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
		out[(*n)++] = (uint8_t)(0x80 | (cp & 0x3f));
	}
}

/* The byte a JSON escape \c other than \u stands for, -1 if JSON has no
 * such escape. */
static __attribute__((unused)) int
cw_json_unescape(unsigned char c)
{
	switch (c) {
	case '"':
	case '\\':
	case '/':
		return c;
	case 'b':
		return '\b';
	case 'f':
		return '\f';
	case 'n':
		return '\n';
	case 'r':
		return '\r';
	case 't':
		return '\t';
	default:
		return -1;
	}
}

/* For a suite's create function: skips the suite unless ctxdump is built
 * and may attach to the writers. */
/* Functions each writer thread's stack must show, innermost first: the
 * main thread reads stdin in writer_main(); workers park in
 * writer_park_thread(), the "noattrs" one inside a SIGUSR1 handler, so
 * worker_main() is reached only by unwinding through the signal frame. */
static __attribute__((unused)) const char *const *
cw_want_frames(const char *kind)
{
	static const char *const main_thread[] = {"writer_main", "main", NULL};
	static const char *const in_signal[] = {
		"writer_park_thread", "writer_signal_park", "worker_main", NULL};
	static const char *const worker[] = {"writer_park_thread", "worker_main", NULL};

	if (strcmp(kind, "untouched") == 0)
		return main_thread;
	if (strcmp(kind, "noattrs") == 0)
		return in_signal;
	return worker;
}

static __attribute__((unused)) void
cw_require_ctxdump(void)
{
	struct stat st;
	int scope = 0;
	FILE *f;

	if (stat(test_ctxdump_path(), &st) < 0 || !(st.st_mode & S_IXUSR))
		test_skip("%s is not built yet", test_ctxdump_path());
	f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	if (f) {
		if (fscanf(f, "%d", &scope) != 1)
			scope = 0;
		fclose(f);
	}
	/* ctxdump and the writer are siblings: Yama scope 1 lets only an
	 * ancestor (or CAP_SYS_PTRACE) attach. */
	if (scope >= 3 || (scope >= 1 && geteuid() != 0))
		test_skip("%s", "kernel.yama.ptrace_scope forbids attaching to a "
				"sibling process");
}
