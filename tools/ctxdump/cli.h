/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What ctxdump and its subcommands (record, report) share on the command
 * line: the exit codes, messages on standard error prefixed with the
 * command's name ("ctxdump", "ctxdump record", "ctxdump report"), usage
 * errors that end with the --help hint, and option values checked
 * against their range. */

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit codes say whether the output can be trusted (elfutils eu-stack). */
#define CLI_EXIT_OK      0
#define CLI_EXIT_PARTIAL 1
#define CLI_EXIT_FATAL   2
#define CLI_EXIT_USAGE   64

/* Largest --stack-size. */
#define CLI_MAX_STACK_SIZE (8u << 20)
/* Smallest --stack-size: less than a page holds no useful frame (the
 * return addresses of a few calls at most). */
#define CLI_MIN_STACK_SIZE (4u << 10)

/* "s" unless n is 1, for a count in a message: "1 span", "2 spans". */
#define CLI_PL(n) ((n) == 1 ? "" : "s")

/* The command name of the messages ("ctxdump" until set). */
void cli_set_name(const char *name);
const char *cli_name(void);

/* "NAME: message" on standard error. */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The least RLIMIT_NOFILE that a dump needs, measured
 * (test-ctxdump-hostile.c descriptors_below_the_least): stdin, stdout,
 * stderr and the two descriptors that open an object
 * (remote_open_regular()) or list the threads; with stacks, the pipe
 * that libunwind opens when it is loaded. */
#define CLI_NOFILE_DUMP   5u
#define CLI_NOFILE_STACKS 7u

/* Count the descriptors above 2 and below RLIMIT_NOFILE that ctxdump
 * was started with, for the descriptor budget (fd_budget_init(),
 * nofile_allows()) and cli_nofile_hint().  Call it first, before ctxdump
 * opens any of its own: those are counted by the budget as they are
 * opened, and would take from the limit twice. */
void cli_count_inherited(void);
/* How many cli_count_inherited() found. */
unsigned cli_inherited(void);

/* After a failure with err (a negative errno): the hint for one that ran
 * out of descriptors (EMFILE: RLIMIT_NOFILE, and that what ("a dump")
 * needs need of them, how (" with --stacks", or "")); ENFILE: the
 * system's).  Nothing for another err. */
void cli_nofile_hint(int err, const char *what, unsigned need, const char *how);

/* "NAME: message" and "Try 'NAME --help' for more information.", then
 * exit with CLI_EXIT_USAGE. */
void cli_usage_err(const char *fmt, ...)
	__attribute__((noreturn, format(printf, 1, 2)));

/* -V, --version of every ctxdump command (util-linux: the same line for
 * all), then exit with CLI_EXIT_OK. */
void cli_version(void) __attribute__((noreturn));

/* After --help or --version: exit 0 once standard output took it all,
 * else say so and exit CLI_EXIT_FATAL (--help >/dev/full is an error). */
void cli_exit_printed(void) __attribute__((noreturn));

/* A decimal integer in [min, max]; anything else is a usage error naming
 * what ("invalid WHAT: 'S'", with the range unless max is INT_MAX). */
long long cli_parse_num(const char *s, const char *what, long long min, long long max);

/* A --stack-size: bytes, with an optional K or M suffix (and B or iB
 * after it), from CLI_MIN_STACK_SIZE to CLI_MAX_STACK_SIZE; else a usage
 * error. */
size_t cli_parse_stack_size(const char *s);

/* The usage error for what getopt_long() returned as c (':' or '?'; with
 * opterr = 0 and ':' first in the option string), worded as getopt would
 * (longopts: the long options it was given).  With short_form, a short
 * option's missing argument is named the way getopt does ("option
 * requires an argument -- 'x'"). */
void cli_option_error(int c,
		      char *const *argv,
		      const struct option *longopts,
		      bool short_form) __attribute__((noreturn));

/* A secret seed for ctx_hash_bytes() (rng.h), drawn at the first call
 * and the same afterwards. */
uint64_t cli_hash_seed(void);

/* The one operand after the options (what names it in "no WHAT
 * specified"); anything after it is a usage error. */
const char *cli_operand(int argc, char *const *argv, const char *what);

/* The process id: opt_pid, the value of -p/--pid (NULL if not given:
 * gdb, strace, perf and eu-stack take it so, and users type it), else
 * the one operand; both together are a usage error. */
const char *cli_pid_operand(int argc, char *const *argv, const char *opt_pid);
