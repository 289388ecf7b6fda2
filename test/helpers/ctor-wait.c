/* SPDX-License-Identifier: Apache-2.0 */
/* libctor-wait.so, for host-safe dlopen-ctor: a library whose constructor
 * hands work to a thread of the program and waits for it, as a plugin
 * that starts a service from its constructor does.  The program names two
 * pipe descriptors in HOST_SAFE_CTOR_FDS ("GO DONE"): the constructor
 * writes a byte to GO and waits for one on DONE, with dlopen()'s lock
 * held all the while. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void
ctor_wait(void)
{
	const char *fds = getenv("HOST_SAFE_CTOR_FDS");
	int go, done;
	char c;

	if (!fds || sscanf(fds, "%d %d", &go, &done) != 2)
		return;
	(void)!write(go, "g", 1);
	(void)!read(done, &c, 1);
}
