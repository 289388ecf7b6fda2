/* SPDX-License-Identifier: Apache-2.0 */
/* Like writer-tls-lib.c, but the way a library built with
 * -fvisibility=hidden exports its thread-local: the code uses a hidden
 * variable and otel_thread_ctx_v1 is an exported alias of it (STT_TLS,
 * GLOBAL, size 8 in .dynsym, as the OTEP asks).  The linker binds the
 * hidden accesses itself, so no relocation names otel_thread_ctx_v1: the
 * TLSDESC (-mtls-dialect=gnu2) or DTPMOD64 (gnu) relocations have no
 * symbol and address the module's TLS block plus an addend.  Another
 * hidden thread-local, used too, comes first in the block (initialised:
 * .tdata precedes .tbss), so that the variable is not at offset 0 and its
 * relocation is not the only one.  Built a third time with
 * -ftls-model=local-dynamic: one TLSDESC for the module's base (addend 0)
 * and the variable's offset added in code; and a fourth with
 * -ftls-model=initial-exec: symbol-less TPOFF64 words. */
#include "config.h"

#include <stdatomic.h>

#include "writer.h"

__attribute__((visibility("hidden"))) __thread char wtls_alias_pad[40] = {1};
__attribute__((visibility("hidden"))) __thread void *wtls_alias_ctx;
extern __thread void *otel_thread_ctx_v1
	__attribute__((alias("wtls_alias_ctx"), visibility("default")));

__attribute__((visibility("default"))) void
writer_tls_set(void *rec)
{
	/* a second symbol-less relocation, with another addend */
	*(char volatile *)&wtls_alias_pad[0] = 1;
	atomic_signal_fence(memory_order_seq_cst);
	*(void *volatile *)&wtls_alias_ctx = rec;
	atomic_signal_fence(memory_order_seq_cst);
}

__attribute__((visibility("default"))) void *
writer_tls_get(void)
{
	/* two variables here too: local-dynamic code uses the base */
	(void)*(char volatile *)&wtls_alias_pad[0];
	return *(void *volatile *)&wtls_alias_ctx;
}
