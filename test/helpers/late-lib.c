/* SPDX-License-Identifier: Apache-2.0 */
/* Built twice, as liblate-a.so (LATE_FN late_a) and liblate-b.so (late_b),
 * for late-dlopen.c: a function that stays on its thread's stack, blocked
 * in read() on fd until it reads a byte or the file ends. */
#include "config.h"

#include <errno.h>
#include <unistd.h>

void LATE_FN(int fd);

__attribute__((noinline)) void
LATE_FN(int fd)
{
	char c;

	while (read(fd, &c, 1) < 0 && errno == EINTR)
		;
	/* not a tail call: this frame stays under read() */
	__asm__ volatile("" ::: "memory");
}
