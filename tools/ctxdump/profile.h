/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The sampling subcommands of ctxdump (issue 10):
 *
 *   ctxdump record PID [--rate HZ] [--duration S] [-o FILE]
 *   ctxdump report FILE [--folded | --spans] [filters]
 *
 * argv[0] is the subcommand name.  Both return the process exit status
 * (0 ok, 1 partial, 2 fatal, 64 usage), as ctxdump does. */

#include <stdio.h>

int record_main(int argc, char **argv);
int report_main(int argc, char **argv);

/* report_main() on an open stream instead of the file operand of argv
 * (which must still be there; it names the stream in messages).  For the
 * fuzzer (test/fuzz/fuzz-report.c). */
int report_stream(FILE *in, int argc, char **argv);
