/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* How many descriptors of ELF files one of ctxdump's caches keeps open:
 * the objects searched for the symbol (elf-tls.c) and the modules of the
 * unwinder (unwind.c).  A process may map hundreds of files: each cache
 * keeps the descriptors of the first ones it opens, up to the budget's
 * max, and closes those of the others once it has read what it needs
 * now, to open them again when it needs more. */

#include <stdbool.h>

struct fd_budget {
	unsigned open; /* descriptors kept now */
	unsigned max;  /* at most (fd_budget_init()) */
};

/* FD_BUDGET_MAX, but no more than a quarter of what RLIMIT_NOFILE
 * allows beyond FD_BUDGET_RESERVE, so that the other cache and the
 * output have theirs. */
#define FD_BUDGET_MAX 256u
/* The descriptors a dump needs besides the caches': stdin, stdout and
 * stderr, libunwind's pipe (it opens one when loaded, for --stacks), the
 * stop's two of /proc/PID/task, and one object or module open at a
 * time. */
#define FD_BUDGET_RESERVE 8u
void fd_budget_init(struct fd_budget *b);

/* Whether one more descriptor may be kept; if so it counts from now. */
bool fd_budget_take(struct fd_budget *b);

/* A kept descriptor was closed. */
void fd_budget_give(struct fd_budget *b);

/* Whether err (a negative errno of open()) says that no descriptor is
 * left: the process's (EMFILE) or the system's (ENFILE). */
bool fd_exhausted(int err);

/* After fd_exhausted(): the cache has closed every descriptor it kept
 * and keeps none from now on. */
void fd_budget_drain(struct fd_budget *b);
