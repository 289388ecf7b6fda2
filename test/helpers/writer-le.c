/* SPDX-License-Identifier: Apache-2.0 */
/* writer-le: the executable defines otel_thread_ctx_v1 and accesses it
 * with the local-exec model (no relocation at all); it is exported into
 * .dynsym with -Wl,--export-dynamic-symbol as the OTEP requires. */
#include "config.h"

#include <stdatomic.h>

#include "writer.h"

__thread void *otel_thread_ctx_v1 __attribute__((tls_model("local-exec")));

void
writer_tls_set(void *rec)
{
	atomic_signal_fence(memory_order_seq_cst);
	*(void *volatile *)&otel_thread_ctx_v1 = rec;
	atomic_signal_fence(memory_order_seq_cst);
}

void *
writer_tls_get(void)
{
	return *(void *volatile *)&otel_thread_ctx_v1;
}

int
main(int argc, char **argv)
{
	struct writer_tls_ops ops = {
		.model = "le",
		.set = writer_tls_set,
		.get = writer_tls_get,
	};

	return writer_main(argc, argv, &ops);
}
