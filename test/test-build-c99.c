/* SPDX-License-Identifier: Apache-2.0 */

/* Build check: the public layout header compiles as strict C99
 * (-std=c99 -Werror=pedantic -Werror=all -Werror=extra) on its own, as an
 * SDK or reader would include it.  config.h is left out on purpose for the
 * same reason. */
#include "thread-record.h"

/* C99 has no static assertion: a negative array size fails the build. */
typedef char trec_c99_layout_check[offsetof(struct otel_thread_ctx_record,
					    attrs_data) == TREC_HEADER_SIZE
					   ? 1
					   : -1];

int
main(void)
{
	uint8_t buf[8];
	struct trec_attr_writer w;

	/* Link against the library too: the declarations must match. */
	trec_attrs_init(&w, buf, sizeof(buf));
	return trec_attrs_add(&w, 1, "ok", 2) == 0 && w.len == 4 ? 0 : 1;
}
