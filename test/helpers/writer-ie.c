/* SPDX-License-Identifier: Apache-2.0 */
/* writer-ie: the executable uses libwtls-def.so's otel_thread_ctx_v1 with
 * the initial-exec model (a GOT slot filled through R_X86_64_TPOFF64). */
#include "config.h"

#include <stdatomic.h>

#include "writer.h"

extern __thread void *otel_thread_ctx_v1 __attribute__((tls_model("initial-exec")));

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
		.model = "ie",
		.set = writer_tls_set,
		.get = writer_tls_get,
	};

	return writer_main(argc, argv, &ops);
}
