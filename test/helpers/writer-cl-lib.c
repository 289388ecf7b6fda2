/* SPDX-License-Identifier: Apache-2.0 */
/* Polar Signals custom-labels v1 variables (otep-formats.md §8): the ABI
 * version constant and the thread-local labelset pointer.  Built into
 * libcustomlabels-test.so (TLSDESC, as the spec requires for a DSO) and,
 * with WCL_IN_EXE, into writer-layouts-le (local-exec, exported with
 * --export-dynamic-symbol).  Test code only: no tracing. */
#include "config.h"

#include <stdatomic.h>
#include <stdint.h>

#ifdef WCL_IN_EXE
#define WCL_TLS_MODEL __attribute__((tls_model("local-exec")))
#else
#define WCL_TLS_MODEL
#endif

__attribute__((visibility("default"), used)) uint32_t custom_labels_abi_version = 1;
__attribute__((visibility("default"),
	       used)) __thread void *custom_labels_current_set WCL_TLS_MODEL;

__attribute__((visibility("default"))) void wcl_set(void *set);

void
wcl_set(void *set)
{
	/* BARRIER; current_set = ls; BARRIER (custom-labels src/util.h) */
	__asm__ volatile("" ::: "memory");
	*(void *volatile *)&custom_labels_current_set = set;
	__asm__ volatile("" ::: "memory");
}
