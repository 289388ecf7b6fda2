/* SPDX-License-Identifier: Apache-2.0 */
/* The main() of the writers whose variable is accessed outside the
 * program's own code: in the shared object it is linked with
 * (writer-tlsdesc and writer-gd: libwtls-tlsdesc.so or libwtls-gd.so; the
 * alias-* writers), or in writer-local.c, where it is a file-scope
 * static.  WRITER_MODEL names the model in the READY line. */
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
