/* SPDX-License-Identifier: Apache-2.0 */
/* Built twice, as libswap-a.so (SWAP_FN swap_spin_a) and libswap-b.so
 * (swap_spin_b), for dl-swap.c: the same code under names of the same
 * length, so both libraries have the same size and layout and the loader
 * maps the second where the first one was. */
#include "config.h"

void SWAP_FN(volatile int *stop);

__attribute__((noinline)) void
SWAP_FN(volatile int *stop)
{
	while (!*stop)
		__asm__ volatile("" ::: "memory");
}
