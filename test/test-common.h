/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Shared by every Check test program.  Each test-*.c file registers its
 * suites with TEST_SUITE(); test-main.c finds them through the linker
 * section and runs them.  A suite that cannot run here (no ptrace, a
 * missing package) calls test_skip() and the program exits 77, which meson
 * reports as SKIP. */

#include "config.h"

#include <check.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/types.h>

/* Under valgrind (meson test --setup valgrind) the long sweeps shrink:
 * the same code paths, in seconds instead of minutes. */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

struct test_suite_desc {
	const char *name;
	Suite *(*create)(void);
};

#define TEST_SUITE(fn_)                                                            \
	static Suite *fn_(void);                                                   \
	static const struct test_suite_desc test_desc_##fn_ = {#fn_, fn_};         \
	static const struct test_suite_desc *test_descp_##fn_                      \
		__attribute__((used, section("test_section"))) = &test_desc_##fn_; \
	static Suite *fn_(void)

/* Mark the whole program as skipped (exit 77) with a reason on stderr. */
void test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Paths handed in by meson through the environment. */
const char *test_env_path(const char *var);
/* The built ctxdump, and a helper program of test/helpers (by name); the
 * helper's path is good until 4 more calls. */
const char *test_ctxdump_path(void);
const char *test_helper_path(const char *name);
/* libctxshim.so itself.  $CTXSHIM_LIB is what goes into LD_PRELOAD, which
 * in a sanitizer build starts with the sanitizer runtime. */
const char *test_shim_path(void);

/* A helper process with a line-based handshake: the helper prints lines
 * (READY …) on stdout and waits for commands on stdin. */
struct test_child {
	pid_t pid;
	int out_fd; /* helper's stdout */
	int in_fd;  /* helper's stdin */
	char buf[65536];
	size_t len;
};

/* Start argv[0] with extra environment entries (NULL-terminated, may be
 * NULL).  With preload, LD_PRELOAD is set to $CTXSHIM_LIB. */
void test_child_start(struct test_child *c,
		      char *const argv[],
		      char *const env[],
		      bool preload);
/* Read one line (without '\n') into line; fails the test after timeout_ms. */
void test_child_readline(struct test_child *c, char *line, size_t n, int timeout_ms);
/* Read lines until one starts with prefix; returns it in line. */
void test_child_expect(
	struct test_child *c, const char *prefix, char *line, size_t n, int timeout_ms);
void test_child_send(struct test_child *c, const char *text);
/* Close stdin, wait for exit; returns the wait status.  Fails the test if
 * the child does not exit within timeout_ms (it is killed then). */
int test_child_finish(struct test_child *c, int timeout_ms);
/* Run a command to completion, capturing stdout (and stderr if err != NULL)
 * into malloc'd NUL-terminated buffers; returns the wait status. */
int test_run_capture(char *const argv[],
		     char *const env[],
		     bool preload,
		     char **out,
		     char **err,
		     int timeout_ms);
/* --stop-timeout=MS for a one-shot dump whose subject is what it reads,
 * not how soon the threads stop: ten times ctxdump's default 500 ms,
 * scaled by test_time_scale(), at most ctxdump's 60000.  On a loaded
 * machine (load 15-30 on 2 CPUs, sanitizer runs beside) a thread waited
 * for a CPU past the default.  The string is static. */
const char *test_stop_timeout_arg(void);
/* That MS: a limit on a whole ctxdump run must exceed it, or a stop that
 * times out is reported as a run that was killed. */
unsigned test_stop_timeout_ms(void);
/* How long a test lets one ctxdump run take: the stop timeout and 25 s
 * to start, read and print, so that a stop that times out is reported
 * with ctxdump's own message, not as a run the test killed. */
int test_ctxdump_run_ms(void);
/* argv for ctxdump with the arguments args (NULL-terminated): its path,
 * test_stop_timeout_arg() unless args start with the subcommand record or
 * report (which take no such option), then args, then NULL; cap entries
 * in all at most (fails the test otherwise).  ctxdump takes the last of
 * a repeated option, so a --stop-timeout in args (a test of the timeout
 * itself) wins.  Returns the number of arguments without the NULL. */
int test_ctxdump_argv(char **argv, int cap, const char *const *args);
/* ctxdump with a0 and the arguments after it in ap (NULL-terminated, up
 * to 14; as test_ctxdump_argv() puts them) as test_run_capture() runs
 * it; returns its wait status, out and err malloc'd. */
int
test_ctxdump_vrun(char **out, char **err, int timeout_ms, const char *a0, va_list ap);
/* ctxdump with the arguments args (NULL-terminated, up to 13; as
 * test_ctxdump_argv() puts them) as test_run_capture() runs it, as root
 * without the capabilities that /proc/PID/map_files needs (a replaced or
 * deleted file mapped can then not be opened, as for another user); as it
 * is when not root or without setpriv.  Returns its exit status. */
int test_run_ctxdump_no_map_files(char **out,
				  char **err,
				  const char *const *args,
				  int timeout_ms);
/* test_mkdtemp() and test_mkstemp() for what a test keeps in /tmp/ctxshim-*
 * (or /tmp/ctxdump-*): the test program removes what they made when it
 * ends, also after a failed test, whose process (Check forks one per test)
 * ends at the failed assertion without running its own cleanup. */
char *test_mkdtemp(char *tmpl);
int test_mkstemp(char *tmpl);
/* Read the small file path (a /proc file) into buf, NUL-terminated; its
 * length, or -1 if it cannot be opened or read. */
ssize_t test_read_small(const char *path, char *buf, size_t cap);
/* Process state letter from /proc/PID/stat ('R', 'S', 't', 'T', …). */
char test_proc_state(pid_t pid);
/* Its parent's pid from /proc/PID/stat, -1 if it cannot be read. */
pid_t test_proc_ppid(pid_t pid);
/* The same for thread tid of pid (0: the process, as test_proc_state()). */
char test_task_state(pid_t pid, pid_t tid);
/* Wait (at most timeout_ms) until thread tid of pid is blocked in system
 * call nr (/proc/PID/task/TID/syscall); fails the test otherwise. */
void test_wait_syscall(pid_t pid, pid_t tid, long nr, int timeout_ms);
/* The part of ctxdump's JSON about thread tid (up to the next thread or
 * the end), malloc'd, or NULL if the thread is not listed. */
char *test_json_thread(const char *json, pid_t tid);
/* How much slower than a plain build on an idle machine threads may be to
 * start, stop and end: a sanitizer build (ASan's thread registry and fake
 * stacks) several times, a valgrind run (the test setup's
 * CK_TIMEOUT_MULTIPLIER) more.  Deadlines that must not run out are scaled
 * by it; a thread that never stops still fails them. */
unsigned test_time_scale(void);
/* CLOCK_MONOTONIC in milliseconds. */
long test_now_ms(void);
/* A tracestate of the members "keyNN=value-value-NN" (20 bytes each) for
 * NN = from..to, joined with ','; returns its length. */
size_t test_ts_members(char *out, size_t cap, unsigned from, unsigned to);
/* list with a space after each ',' (OWS, which W3C's 512-character limit
 * does not count); returns its length. */
size_t test_ts_spaced(char *out, size_t cap, const char *list);

/* size bytes that end where an inaccessible page starts (fresh, zero
 * filled): a read or write past them faults at once, also without a
 * sanitizer.  munmap(*map, *map_len) when done. */
static inline void *
test_guarded_tail(size_t size, void **map, size_t *map_len)
{
	size_t len = ((size + 4095) / 4096 + 1) * 4096;
	unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert(m != MAP_FAILED);
	ck_assert(mprotect(m + len - 4096, 4096, PROT_NONE) == 0);
	*map = m;
	*map_len = len;
	return m + len - 4096 - size;
}
