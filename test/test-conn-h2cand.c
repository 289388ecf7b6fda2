/* SPDX-License-Identifier: Apache-2.0 */
/* The h2c upgrade candidates of preload/conn.c (ctxshim_conn_h2_candidate*:
 * the connection an nghttp2 server session took for the one it was
 * upgraded from, hooks/hook-nghttp2.c, nh_upgraded()), linked directly
 * into this program.  The socket write path consults the table
 * (hooks/hook-socket.c, sk_write_continues()): a wrong answer there shows
 * a request's context on another connection's writes, or none on its
 * own, and nothing else notices it. */
#include "test-common.h"

#include "conn.h"
#include "shim.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

/* Inactive: conn.c's constructor maps no table; the candidates need none. */
__thread void *otel_thread_ctx_v1;
/* the name the shim's code writes through (shim.h) */
extern __thread void *ctxshim_own_slot __attribute__((alias("otel_thread_ctx_v1")));
enum ctxshim_mode ctxshim_mode = CTXSHIM_OFF;

#define CAND_N CTXSHIM_CONN_H2_CAND_N

START_TEST(test_cand_one)
{
	unsigned slot;

	ck_assert(!ctxshim_conn_h2_candidate(7, 3));
	slot = ctxshim_conn_h2_candidate_add(7, 3);
	ck_assert_uint_ge(slot, 1);
	ck_assert_uint_le(slot, CAND_N);
	ck_assert(ctxshim_conn_h2_candidate(7, 3));
	/* The same fd of another generation: closed and accepted again
	 * (conn_reset() bumps gen), or dup2()'d over */
	ck_assert(!ctxshim_conn_h2_candidate(7, 4));
	ck_assert(!ctxshim_conn_h2_candidate(7, 2));
	/* another fd of the same generation */
	ck_assert(!ctxshim_conn_h2_candidate(8, 3));
	ck_assert(!ctxshim_conn_h2_candidate(6, 3));
	ctxshim_conn_h2_candidate_remove(slot);
	ck_assert(!ctxshim_conn_h2_candidate(7, 3));
	/* removed twice: the second finds the slot empty and changes
	 * nothing (nh_session_free() after nh_upgrade_settled() passes 0) */
	ctxshim_conn_h2_candidate_remove(slot);
	ck_assert(!ctxshim_conn_h2_candidate(7, 3));
}
END_TEST

START_TEST(test_cand_bounds)
{
	unsigned a, b;

	/* no fd: no candidate */
	ck_assert_uint_eq(ctxshim_conn_h2_candidate_add(-1, 1), 0);
	ck_assert(!ctxshim_conn_h2_candidate(-1, 1));
	/* slot numbers that are no slot: nothing happens */
	ctxshim_conn_h2_candidate_remove(0);
	ctxshim_conn_h2_candidate_remove(CAND_N + 1);
	ctxshim_conn_h2_candidate_remove(UINT_MAX);
	/* fd 0 with gen 0 is a key like any other (never the empty 0) */
	a = ctxshim_conn_h2_candidate_add(0, 0);
	ck_assert_uint_ne(a, 0);
	ck_assert(ctxshim_conn_h2_candidate(0, 0));
	/* fd -1's key with gen 0 is 0, what a free slot holds: with any
	 * slot taken, every free one matched it (old) */
	ck_assert(!ctxshim_conn_h2_candidate(-1, 0));
	/* the largest fd and generation do not wrap into another key */
	b = ctxshim_conn_h2_candidate_add(INT_MAX - 1, UINT32_MAX);
	ck_assert_uint_ne(b, 0);
	ck_assert_uint_ne(a, b);
	ck_assert(ctxshim_conn_h2_candidate(INT_MAX - 1, UINT32_MAX));
	ck_assert(!ctxshim_conn_h2_candidate(INT_MAX - 1, 0));
	ck_assert(!ctxshim_conn_h2_candidate(INT_MAX - 2, UINT32_MAX));
	ctxshim_conn_h2_candidate_remove(a);
	ck_assert(!ctxshim_conn_h2_candidate(0, 0));
	ck_assert(ctxshim_conn_h2_candidate(INT_MAX - 1, UINT32_MAX));
	ctxshim_conn_h2_candidate_remove(b);
	ck_assert(!ctxshim_conn_h2_candidate(INT_MAX - 1, UINT32_MAX));
}
END_TEST

/* What a slot names now (nghttp2's confirmation asks it: the candidate
 * may have gone on to a copy of its fd since, preload/conn.c): the key
 * it was given, nothing once given back, nothing for a number that is no
 * slot; the out-parameters are left alone then. */
START_TEST(test_cand_get)
{
	unsigned slot = ctxshim_conn_h2_candidate_add(INT_MAX - 1, UINT32_MAX);
	uint32_t gen = 11;
	int fd = 22;

	ck_assert_uint_ne(slot, 0);
	ck_assert(ctxshim_conn_h2_candidate_get(slot, &fd, &gen));
	ck_assert_int_eq(fd, INT_MAX - 1);
	ck_assert_uint_eq(gen, UINT32_MAX);
	ctxshim_conn_h2_candidate_remove(slot);
	fd = 22;
	gen = 11;
	ck_assert(!ctxshim_conn_h2_candidate_get(slot, &fd, &gen));
	ck_assert(!ctxshim_conn_h2_candidate_get(0, &fd, &gen));
	ck_assert(!ctxshim_conn_h2_candidate_get(CAND_N + 1, &fd, &gen));
	ck_assert(!ctxshim_conn_h2_candidate_get(UINT_MAX, &fd, &gen));
	ck_assert_int_eq(fd, 22);
	ck_assert_uint_eq(gen, 11);
	/* fd 0 of generation 0 is a key like any other */
	slot = ctxshim_conn_h2_candidate_add(0, 0);
	ck_assert(ctxshim_conn_h2_candidate_get(slot, &fd, &gen));
	ck_assert_int_eq(fd, 0);
	ck_assert_uint_eq(gen, 0);
	ctxshim_conn_h2_candidate_remove(slot);
}
END_TEST

/* Every slot taken: the 65th candidate gets none (0, which _remove()
 * ignores) and is no candidate -- its writes after the preface show
 * nothing, as any other's -- while the 64 stay; a slot given back is
 * taken again. */
START_TEST(test_cand_full)
{
	unsigned slot[CAND_N], extra;
	int i;

	for (i = 0; i < CAND_N; i++) {
		slot[i] = ctxshim_conn_h2_candidate_add(100 + i, 9);
		ck_assert_msg(slot[i] >= 1 && slot[i] <= CAND_N, "candidate %d: %u", i,
			      slot[i]);
	}
	ck_assert_uint_eq(ctxshim_conn_h2_candidate_add(100 + CAND_N, 9), 0);
	ck_assert(!ctxshim_conn_h2_candidate(100 + CAND_N, 9));
	ctxshim_conn_h2_candidate_remove(0);
	for (i = 0; i < CAND_N; i++)
		ck_assert_msg(ctxshim_conn_h2_candidate(100 + i, 9), "candidate %d", i);
	ctxshim_conn_h2_candidate_remove(slot[17]);
	ck_assert(!ctxshim_conn_h2_candidate(117, 9));
	extra = ctxshim_conn_h2_candidate_add(100 + CAND_N, 9);
	ck_assert_uint_eq(extra, slot[17]);
	ck_assert(ctxshim_conn_h2_candidate(100 + CAND_N, 9));
	ck_assert_uint_eq(ctxshim_conn_h2_candidate_add(117, 9), 0);
	ctxshim_conn_h2_candidate_remove(extra);
	for (i = 0; i < CAND_N; i++)
		if (i != 17)
			ctxshim_conn_h2_candidate_remove(slot[i]);
	for (i = 0; i <= CAND_N; i++)
		ck_assert(!ctxshim_conn_h2_candidate(100 + i, 9));
	/* all given back: the whole table is there again */
	for (i = 0; i < CAND_N; i++)
		ck_assert_uint_ne(slot[i] = ctxshim_conn_h2_candidate_add(200 + i, 1),
				  0);
	for (i = 0; i < CAND_N; i++)
		ctxshim_conn_h2_candidate_remove(slot[i]);
}
END_TEST

/* Sessions of several threads take and give back slots while another
 * thread's writes look theirs up: each sees its own candidate for as
 * long as it holds it, nobody else's key, and the table ends empty. */
#define RACE_THREADS 4
#define RACE_ROUNDS  20000

static void *
race_thread(void *arg)
{
	int id = (int)(intptr_t)arg, fd = 1000 + id, i;
	uintptr_t bad = 0;

	for (i = 0; i < RACE_ROUNDS; i++) {
		uint32_t gen = (uint32_t)i;
		unsigned s = ctxshim_conn_h2_candidate_add(fd, gen);

		/* at most RACE_THREADS held at once: never full */
		if (!s || !ctxshim_conn_h2_candidate(fd, gen) ||
		    ctxshim_conn_h2_candidate(fd, gen + 1))
			bad++;
		ctxshim_conn_h2_candidate_remove(s);
		if (ctxshim_conn_h2_candidate(fd, gen))
			bad++;
	}
	return (void *)bad;
}

START_TEST(test_cand_race)
{
	pthread_t th[RACE_THREADS];
	unsigned slot[CAND_N];
	void *bad;
	int i;

	for (i = 0; i < RACE_THREADS; i++)
		ck_assert_int_eq(
			pthread_create(&th[i], NULL, race_thread, (void *)(intptr_t)i),
			0);
	for (i = 0; i < RACE_THREADS; i++) {
		ck_assert_int_eq(pthread_join(th[i], &bad), 0);
		ck_assert_msg(bad == NULL, "thread %d: %zu wrong answers", i,
			      (size_t)(uintptr_t)bad);
	}
	for (i = 0; i < CAND_N; i++)
		ck_assert_uint_ne(slot[i] = ctxshim_conn_h2_candidate_add(300 + i, 2),
				  0);
	for (i = 0; i < CAND_N; i++)
		ctxshim_conn_h2_candidate_remove(slot[i]);
}
END_TEST

/* A forked child inherits the parent's candidates with the sessions that
 * hold them (the heap comes along): it answers for them as the parent
 * does, and what it gives back is its own copy's. */
START_TEST(test_cand_fork)
{
	unsigned slot = ctxshim_conn_h2_candidate_add(42, 5);
	pid_t pid;
	int st;

	ck_assert_uint_ne(slot, 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		bool ok = ctxshim_conn_h2_candidate(42, 5);

		ctxshim_conn_h2_candidate_remove(slot);
		ok = ok && !ctxshim_conn_h2_candidate(42, 5);
		_exit(ok ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ck_assert(ctxshim_conn_h2_candidate(42, 5));
	ctxshim_conn_h2_candidate_remove(slot);
	ck_assert(!ctxshim_conn_h2_candidate(42, 5));
}
END_TEST

TEST_SUITE(conn_h2cand_suite)
{
	Suite *s = suite_create("conn-h2cand");
	TCase *tc = tcase_create("candidates");

	/* One process for all: the table is the process's, and each test
	 * leaves it empty. */
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_cand_one);
	tcase_add_test(tc, test_cand_bounds);
	tcase_add_test(tc, test_cand_get);
	tcase_add_test(tc, test_cand_full);
	tcase_add_test(tc, test_cand_race);
	tcase_add_test(tc, test_cand_fork);
	suite_add_tcase(s, tc);
	return s;
}
