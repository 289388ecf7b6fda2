/* SPDX-License-Identifier: Apache-2.0 */
/* OTEP-4947's publication protocol, checked on the built shim one
 * instruction at a time: a reader may stop a thread anywhere, so at every
 * instruction of a worker serving requests (helpers/step-publish.c) the
 * record otel_thread_ctx_v1 points at, if any, must be complete (valid is
 * 1, attrs-data holds whole entries) and must not change while that
 * pointer stays published ("pointer swap": the record is built first,
 * then the pointer is stored).  A store the compiler moved past the
 * pointer store shows up as a record that changes under its pointer. */
#include "test-common.h"

#include "thread-record.h"

#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/wait.h>

#define REQUESTS  4       /* helpers/step-publish.c's STEP_PUBLISH_REQUESTS */
#define MAX_STEPS 5000000 /* some 8000 instructions for all of it */

static bool
peek(pid_t pid, uint64_t addr, void *buf, size_t n)
{
	struct iovec l = {buf, n}, r = {(void *)(uintptr_t)addr, n};

	return process_vm_readv(pid, &l, 1, &r, 1, 0) == (ssize_t)n;
}

/* Whether attrs (size bytes) ends exactly after its last entry. */
static bool
attrs_whole(const uint8_t *attrs, size_t size)
{
	size_t i = 0;

	while (size - i >= TREC_ENTRY_OVERHEAD &&
	       size - i - TREC_ENTRY_OVERHEAD >= attrs[i + 1])
		i += TREC_ENTRY_OVERHEAD + attrs[i + 1];
	return i == size;
}

START_TEST(test_record_complete_while_published)
{
	char *argv[] = {(char *)test_helper_path("step-publish"), NULL};
	struct test_child c;
	char line[256];
	long tid;
	uint64_t slot, done_addr, cur = 0;
	uint8_t seen[TREC_MAX_SIZE], now[TREC_MAX_SIZE];
	size_t seen_len = 0;
	unsigned long steps = 0;
	unsigned published = 0, cleared = 0;
	int st, done = 0;

	test_child_start(&c, argv, NULL, true);
	test_child_expect(&c, "READY ", line, sizeof(line), 10000);
	ck_assert_int_eq(
		sscanf(line, "READY %ld %" SCNx64 " %" SCNx64, &tid, &slot, &done_addr),
		3);
	ck_assert_msg(slot != 0, "otel_thread_ctx_v1 not found: %s", line);
	ck_assert_int_eq(ptrace(PTRACE_SEIZE, (pid_t)tid, NULL, NULL), 0);
	ck_assert_int_eq(ptrace(PTRACE_INTERRUPT, (pid_t)tid, NULL, NULL), 0);
	ck_assert_int_eq(waitpid((pid_t)tid, &st, __WALL), tid);
	test_child_send(&c, "go\n");

	while (!done) {
		uint64_t ptr;
		uint16_t size;

		ck_assert_msg(steps++ < MAX_STEPS, "not done after %lu steps", steps);
		ck_assert_int_eq(ptrace(PTRACE_SINGLESTEP, (pid_t)tid, NULL, NULL), 0);
		ck_assert_int_eq(waitpid((pid_t)tid, &st, __WALL), tid);
		ck_assert_msg(WIFSTOPPED(st) && WSTOPSIG(st) == SIGTRAP,
			      "worker: status %#x at step %lu", st, steps);
		ck_assert(peek(c.pid, slot, &ptr, sizeof(ptr)));
		ck_assert(peek(c.pid, done_addr, &done, sizeof(done)));
		if (ptr != cur) {
			cur = ptr;
			seen_len = 0;
			cleared += !ptr;
		}
		if (!ptr)
			continue;
		ck_assert_msg(peek(c.pid, ptr, now, TREC_HEADER_SIZE),
			      "step %lu: record at 0x%" PRIx64 " unreadable", steps,
			      ptr);
		memcpy(&size,
		       now + offsetof(struct otel_thread_ctx_record, attrs_data_size),
		       sizeof(size));
		ck_assert_msg(now[offsetof(struct otel_thread_ctx_record, valid)] ==
				      TREC_VALID,
			      "step %lu: published record at 0x%" PRIx64
			      " has valid=%u",
			      steps, ptr,
			      now[offsetof(struct otel_thread_ctx_record, valid)]);
		ck_assert_msg(size <= TREC_ATTRS_MAX, "step %lu: attrs-data-size %u",
			      steps, size);
		ck_assert(peek(c.pid, ptr + TREC_HEADER_SIZE, now + TREC_HEADER_SIZE,
			       size));
		ck_assert_msg(attrs_whole(now + TREC_HEADER_SIZE, size),
			      "step %lu: attrs-data ends inside an entry", steps);
		if (!seen_len) {
			published++;
			seen_len = TREC_HEADER_SIZE + size;
			memcpy(seen, now, seen_len);
			continue;
		}
		ck_assert_msg((size_t)TREC_HEADER_SIZE + size == seen_len &&
				      memcmp(seen, now, seen_len) == 0,
			      "step %lu: the record at 0x%" PRIx64
			      " changed while published",
			      steps, ptr);
	}
	ck_assert_int_eq(ptrace(PTRACE_DETACH, (pid_t)tid, NULL, NULL), 0);
	/* one record per request, each replaced or cleared before the next */
	ck_assert_uint_eq(published, REQUESTS);
	ck_assert_uint_ge(cleared, 1);
	ck_assert_int_eq(test_child_finish(&c, 10000), 0);
}
END_TEST

TEST_SUITE(preload_publish_suite)
{
	Suite *s = suite_create("preload-publish");
	TCase *tc = tcase_create("Publication protocol");

	tcase_add_test(tc, test_record_complete_while_published);
	suite_add_tcase(s, tc);
	return s;
}
