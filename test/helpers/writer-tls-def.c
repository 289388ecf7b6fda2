/* SPDX-License-Identifier: Apache-2.0 */
/* Defines otel_thread_ctx_v1 in a shared object that never accesses it:
 * the only relocation against it is writer-ie's R_X86_64_TPOFF64, so a
 * reader must look into the other modules' relocations (initial-exec). */
#include "config.h"

__attribute__((visibility("default"))) __thread void *otel_thread_ctx_v1;
