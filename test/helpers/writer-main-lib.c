/* SPDX-License-Identifier: Apache-2.0 */
/* writer-tlsdesc and writer-gd: the variable lives in the shared object
 * the program is linked with (libwtls-tlsdesc.so or libwtls-gd.so) and is
 * only accessed there. */
#include "config.h"

#include "writer.h"

int
main(int argc, char **argv)
{
	struct writer_tls_ops ops = {
		.model = WRITER_MODEL,
		.set = writer_tls_set,
		.get = writer_tls_get,
	};

	return writer_main(argc, argv, &ops);
}
