/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "fd-budget.h"

#include "cli.h"

#include <errno.h>
#include <sys/resource.h>

void
fd_budget_init(struct fd_budget *b)
{
	struct rlimit rl;
	rlim_t reserve;

	b->open = 0;
	b->max = FD_BUDGET_MAX;
	/* With one descriptor kept per object, ulimit -n 64 left none for
	 * the objects after the first 60 (the symbol was not found).  And a
	 * quarter of all of them left too few for what cannot do without:
	 * under ulimit -n 8, two objects kept open took what the stop needs
	 * (libunwind's pipe and stdio had 5, the stop 2 of the 3 left:
	 * "cannot stop process: Too many open files").  The descriptors
	 * ctxdump was started with take from the reserve too (old: not
	 * counted, and the objects kept open took what the stop needed). */
	reserve = FD_BUDGET_RESERVE + cli_inherited();
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (rl.rlim_cur <= reserve || (rl.rlim_cur - reserve) / 4 < FD_BUDGET_MAX))
		b->max = rl.rlim_cur <= reserve
				 ? 0
				 : (unsigned)((rl.rlim_cur - reserve) / 4);
}

bool
fd_budget_take(struct fd_budget *b)
{
	if (b->open >= b->max)
		return false;
	b->open++;
	return true;
}

void
fd_budget_give(struct fd_budget *b)
{
	if (b->open)
		b->open--;
}

bool
fd_exhausted(int err)
{
	return err == -EMFILE || err == -ENFILE;
}

void
fd_budget_drain(struct fd_budget *b)
{
	b->open = 0;
	b->max = 0;
}
