/* SPDX-License-Identifier: Apache-2.0 */
/* The connections without an fd of preload/conn.c (ctxshim_conn_virt(),
 * ctxshim_conn_virt_forget(), ctxshim_conn_by_id(): TLS sessions over
 * BIOs of the application's, hooks/hook-socket.c,
 * hook_socket_tls_find()), linked directly into this program.  A session
 * that finds no slot is not followed: its requests show no context, and
 * nothing else notices it.  The keys are live heap blocks, as session
 * pointers are, freed and allocated again as a server's sessions are. */
#include "test-common.h"

#include "conn.h"
#include "shim.h"

#include <stdint.h>
#include <stdlib.h>

/* Inactive: conn.c's constructor maps no fd table; this one is .bss. */
__thread void *otel_thread_ctx_v1;
/* the name the shim's code writes through (shim.h) */
extern __thread void *ctxshim_own_slot __attribute__((alias("otel_thread_ctx_v1")));
enum ctxshim_mode ctxshim_mode = CTXSHIM_OFF;

/* Sessions live at once: as many as a busy Boost.Asio or h2o server
 * holds, far more than the 64 the table first had. */
#define LIVE 1000
/* Sessions live at once in the churn: half the slots, so that many of
 * them share a window; and sessions through the table: ten times its
 * slots. */
#define CHURN_LIVE (CTXSHIM_CONN_VIRT_N / 2)
#define CHURN      (10 * CTXSHIM_CONN_VIRT_N)

/* A heap block as a session pointer, of sizes that vary as the blocks
 * between sessions do. */
static void *
new_key(void)
{
	static unsigned seed = 1;
	void *k = malloc(1024 + (size_t)(rand_r(&seed) % 4096));

	ck_assert_ptr_nonnull(k);
	return k;
}

/* key has a slot, with an id of the table's that names it. */
static int
claim(const void *key)
{
	struct ctxshim_conn *c;
	int id = -1, again = -1;

	c = ctxshim_conn_virt(key, true, &id);
	ck_assert_msg(c != NULL, "a session got no slot");
	ck_assert_int_ge(id, CTXSHIM_CONN_VIRT_BASE);
	ck_assert_int_lt(id, CTXSHIM_CONN_VIRT_BASE + CTXSHIM_CONN_VIRT_N);
	ck_assert_ptr_eq(ctxshim_conn_by_id(id), c);
	ck_assert_uint_eq(atomic_load(&c->flags), CONN_F_TRACKED | CONN_F_TLS);
	ck_assert_ptr_eq(ctxshim_conn_virt(key, false, &again), c);
	ck_assert_int_eq(again, id);
	return id;
}

/* key, claimed as id, is still found there. */
static void
assert_found(const void *key, int id)
{
	int got = -1;

	ck_assert_ptr_eq(ctxshim_conn_virt(key, false, &got), ctxshim_conn_by_id(id));
	ck_assert_int_eq(got, id);
}

/* key's session ends (then its memory is freed). */
static void
forget(void *key)
{
	int id;

	ctxshim_conn_virt_forget(key);
	ck_assert_ptr_null(ctxshim_conn_virt(key, false, &id));
	free(key);
}

/* LIVE sessions at once: each has a slot of its own, found again by its
 * pointer and by its id. */
START_TEST(test_virt_many_live)
{
	static void *key[LIVE];
	static int id[LIVE];
	static bool used[CTXSHIM_CONN_VIRT_N];
	int i;

	for (i = 0; i < LIVE; i++)
		id[i] = claim(key[i] = new_key());
	for (i = 0; i < LIVE; i++) {
		assert_found(key[i], id[i]);
		ck_assert_msg(!used[id[i] - CTXSHIM_CONN_VIRT_BASE],
			      "two sessions share slot %d", id[i]);
		used[id[i] - CTXSHIM_CONN_VIRT_BASE] = true;
	}
	for (i = 0; i < LIVE; i++)
		forget(key[i]);
}
END_TEST

/* Sessions end and new ones take their places, one at a time,
 * CHURN_LIVE live, until ten times as many sessions as the table has slots went
 * through it: every one gets a slot (an ended session's slot is free
 * again), and a session whose neighbours in the table ended is still
 * found (a lookup does not stop at a freed slot). */
START_TEST(test_virt_churn)
{
	static void *key[CHURN_LIVE];
	static int id[CHURN_LIVE];
	int i, j;

	for (i = 0; i < CHURN_LIVE; i++)
		id[i] = claim(key[i] = new_key());
	for (i = CHURN_LIVE; i < CHURN; i++) {
		int old = i % CHURN_LIVE;

		forget(key[old]);
		id[old] = claim(key[old] = new_key());
		if (old == CHURN_LIVE - 1)
			for (j = 0; j < CHURN_LIVE; j++)
				assert_found(key[j], id[j]);
	}
	for (i = 0; i < CHURN_LIVE; i++)
		forget(key[i]);
}
END_TEST

/* More sessions than slots: the ones past the room are not followed
 * (NULL), the others keep slots of their own, and once they end every
 * slot is free again. */
START_TEST(test_virt_full)
{
	enum { N = CTXSHIM_CONN_VIRT_N + CTXSHIM_CONN_VIRT_N / 4 };
	/* keys only: 16 bytes apart, as the smallest heap blocks */
	static char block[N][16];
	static void *key[LIVE];
	static int id[N];
	static bool used[CTXSHIM_CONN_VIRT_N];
	int i, got = 0;

	for (i = 0; i < N; i++) {
		if (!ctxshim_conn_virt(block[i], true, &id[i])) {
			id[i] = -1;
			continue;
		}
		ck_assert_int_ge(id[i], CTXSHIM_CONN_VIRT_BASE);
		ck_assert_int_lt(id[i], CTXSHIM_CONN_VIRT_BASE + CTXSHIM_CONN_VIRT_N);
		ck_assert(!used[id[i] - CTXSHIM_CONN_VIRT_BASE]);
		used[id[i] - CTXSHIM_CONN_VIRT_BASE] = true;
		got++;
	}
	ck_assert_int_le(got, CTXSHIM_CONN_VIRT_N);
	ck_assert_int_lt(got, N);
	for (i = 0; i < N; i++)
		if (id[i] >= 0)
			assert_found(block[i], id[i]);
	/* ids past the table name no slot */
	ck_assert_ptr_null(
		ctxshim_conn_by_id(CTXSHIM_CONN_VIRT_BASE + CTXSHIM_CONN_VIRT_N));
	for (i = 0; i < N; i++)
		ctxshim_conn_virt_forget(block[i]);
	/* all free again */
	for (i = 0; i < LIVE; i++)
		id[i] = claim(key[i] = new_key());
	for (i = 0; i < LIVE; i++)
		forget(key[i]);
}
END_TEST

TEST_SUITE(conn_virt_suite)
{
	Suite *s = suite_create("conn-virt");
	TCase *tc = tcase_create("virt");

	/* One process for all: the table is the process's, and each test
	 * leaves it empty. */
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_virt_many_live);
	tcase_add_test(tc, test_virt_churn);
	tcase_add_test(tc, test_virt_full);
	suite_add_tcase(s, tc);
	return s;
}
