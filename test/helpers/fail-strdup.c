/* SPDX-License-Identifier: Apache-2.0 */
/* Preloaded into ctxdump: every strdup() fails as out of memory would.
 * An allocation failure cannot be reached reliably any other way (a
 * memory limit makes whichever allocation comes first fail), and
 * `ctxdump report` calls strdup() only for what it keeps of the file, so
 * this makes exactly those paths run.  glibc's own calls go to its
 * internal __strdup(), never here. */
#include "config.h"

#include <errno.h>
#include <stddef.h>

char *strdup(const char *s);

char *
strdup(const char *s)
{
	(void)s;
	errno = ENOMEM;
	return NULL;
}
