/* SPDX-License-Identifier: Apache-2.0 */

/* Build check: the public layout header compiles as C++ and its functions
 * link with C linkage. */
#include "thread-record.h"

static_assert(sizeof(otel_thread_ctx_record) == TREC_HEADER_SIZE, "28-byte header");
static_assert(offsetof(otel_thread_ctx_record, attrs_data_size) == 26, "size at 26");

int
main()
{
	uint8_t buf[8];
	trec_attr_writer w;

	trec_attrs_init(&w, buf, sizeof(buf));
	return trec_attrs_add(&w, 1, "ok", 2) == 0 && w.len == 4 ? 0 : 1;
}
