/* SPDX-License-Identifier: Apache-2.0 */
/* libwelastic.so: Elastic's universal-profiling correlation variables as
 * the Elastic spec declares them (otep-formats.md §7): a thread-local
 * pointer reached through TLSDESC (-mtls-dialect=gnu2) and the process
 * storage pointer.  Test code only: no tracing. */
#include "config.h"

#include <stdatomic.h>

__attribute__((
	visibility("default"))) __thread void *elastic_apm_profiling_correlation_tls_v1;
__attribute__((visibility(
	"default"))) void *elastic_apm_profiling_correlation_process_storage_v1;

__attribute__((visibility("default"))) void welastic_set(void *buf);
__attribute__((visibility("default"))) void welastic_set_storage(void *st);

void
welastic_set(void *buf)
{
	atomic_signal_fence(memory_order_seq_cst);
	*(void *volatile *)&elastic_apm_profiling_correlation_tls_v1 = buf;
	atomic_signal_fence(memory_order_seq_cst);
}

void
welastic_set_storage(void *st)
{
	/* non-NULL only once fully initialized */
	atomic_thread_fence(memory_order_seq_cst);
	*(void *volatile *)&elastic_apm_profiling_correlation_process_storage_v1 = st;
}
