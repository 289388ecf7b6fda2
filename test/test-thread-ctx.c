/* SPDX-License-Identifier: Apache-2.0 */
/* The shim's per-thread publication (preload/thread-ctx.c), linked directly
 * into this program with its own otel_thread_ctx_v1. */
#include "test-common.h"

#include "shim.h"
#include "maps.h"
#include "sys.h"
#include "thread-ctx.h"
#include "w3c.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

__thread void *otel_thread_ctx_v1;
/* the name the shim's code writes through (shim.h) */
extern __thread void *ctxshim_own_slot __attribute__((alias("otel_thread_ctx_v1")));
enum ctxshim_mode ctxshim_mode = CTXSHIM_ACTIVE;

static const struct otel_thread_ctx_record *
published(void)
{
	return otel_thread_ctx_v1;
}

static void
make_ctx(struct ctxshim_ctx *c, uint8_t seed, const char *method)
{
	struct trec_attr_writer w;

	memset(c, 0, sizeof(*c));
	memset(c->trace_id, seed, 16);
	memset(c->span_id, seed + 1, 8);
	c->flags = 0x03;
	trec_attrs_init(&w, c->attrs, sizeof(c->attrs));
	ck_assert_int_eq(trec_attrs_add(&w, 0, method, strlen(method)), 0);
	ck_assert_int_eq(trec_attrs_add(&w, 1, "/x", 2), 0);
	c->attrs_len = (uint16_t)w.len;
}

START_TEST(test_attach_publishes_complete_record)
{
	struct ctxshim_ctx c;
	const struct otel_thread_ctx_record *r;

	ck_assert_ptr_null(published());
	ck_assert_ptr_null(ctxshim_current());
	make_ctx(&c, 0x11, "GET");
	ctxshim_attach(&c);
	r = published();
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq((uintptr_t)r % 2, 0);
	ck_assert_int_eq(memcmp(r->trace_id, c.trace_id, 16), 0);
	ck_assert_int_eq(memcmp(r->span_id, c.span_id, 8), 0);
	ck_assert_uint_eq(r->valid, 1);
	ck_assert_uint_eq(r->trace_flags, 0x03);
	ck_assert_uint_eq(r->attrs_data_size, c.attrs_len);
	ck_assert_int_eq(memcmp(r->attrs_data, "\x00\x03GET\x01\x02/x", 9), 0);
	ck_assert_ptr_nonnull(ctxshim_current());
	ck_assert_int_eq(memcmp(ctxshim_current()->trace_id, c.trace_id, 16), 0);
	ctxshim_detach();
	ck_assert_ptr_null(published());
	ck_assert_ptr_null(ctxshim_current());
}
END_TEST

/* An update never writes into the record a reader may be looking at. */
START_TEST(test_update_swaps_buffers)
{
	struct ctxshim_ctx a, b;
	const struct otel_thread_ctx_record *ra, *rb;
	uint8_t copy[TREC_MAX_SIZE];

	make_ctx(&a, 0x21, "GET");
	make_ctx(&b, 0x31, "POST");
	ctxshim_attach(&a);
	ra = published();
	memcpy(copy, ra, TREC_HEADER_SIZE + ra->attrs_data_size);
	ctxshim_attach(&b);
	rb = published();
	ck_assert_ptr_ne(ra, rb);
	ck_assert_int_eq(memcmp(copy, ra, TREC_HEADER_SIZE + a.attrs_len), 0);
	ck_assert_int_eq(memcmp(rb->trace_id, b.trace_id, 16), 0);
	ck_assert_int_eq(memcmp(rb->attrs_data + 2, "POST", 4), 0);
	/* Re-attaching the current context (hooks do this on a switch back)
	 * must also work from ctxshim_current() itself. */
	ctxshim_attach(ctxshim_current());
	ck_assert_int_eq(memcmp(published()->trace_id, b.trace_id, 16), 0);
	ctxshim_detach();
}
END_TEST

START_TEST(test_oversized_lengths_rejected)
{
	struct ctxshim_ctx c;

	make_ctx(&c, 0x41, "GET");
	c.attrs_len = TREC_ATTRS_MAX + 1;
	c.tracestate_len = CTXSHIM_TRACESTATE_MAX + 1;
	ctxshim_attach(&c);
	ck_assert_uint_eq(published()->attrs_data_size, 0);
	ck_assert_uint_eq(ctxshim_current()->tracestate_len, 0);
	ctxshim_detach();
}
END_TEST

/* Lengths exactly at their limits are published whole: attrs-data of
 * TREC_ATTRS_MAX bytes (a record of TREC_MAX_SIZE) and a tracestate of
 * CTXSHIM_TRACESTATE_MAX bytes, by an attach and by an in-place build
 * (test_oversized_lengths_rejected has one byte more). */
static void
make_full_ctx(struct ctxshim_ctx *c, uint8_t seed)
{
	struct trec_attr_writer w;
	char v[TREC_VALUE_MAX];

	memset(c, 0, sizeof(*c));
	memset(c->trace_id, seed, 16);
	memset(c->span_id, seed + 1, 8);
	memset(v, 'v', sizeof(v));
	trec_attrs_init(&w, c->attrs, sizeof(c->attrs));
	ck_assert_int_eq(trec_attrs_add(&w, 0, v, sizeof(v)), 0);
	ck_assert_int_eq(trec_attrs_add(&w, 1, v, sizeof(v)), 0);
	ck_assert_int_eq(trec_attrs_add(&w, 2, v, TREC_ATTRS_MAX - w.len - 2), 0);
	ck_assert_uint_eq(w.len, TREC_ATTRS_MAX);
	c->attrs_len = (uint16_t)w.len;
	memset(c->tracestate, 'k', CTXSHIM_TRACESTATE_MAX);
	c->tracestate_len = CTXSHIM_TRACESTATE_MAX;
}

static void
assert_full_published(const struct ctxshim_ctx *want)
{
	ck_assert_ptr_nonnull(published());
	ck_assert_uint_eq(published()->attrs_data_size, TREC_ATTRS_MAX);
	ck_assert_mem_eq(published()->attrs_data, want->attrs, TREC_ATTRS_MAX);
	ck_assert_uint_eq(ctxshim_current()->tracestate_len, CTXSHIM_TRACESTATE_MAX);
	ck_assert_mem_eq(ctxshim_current()->tracestate, want->tracestate,
			 CTXSHIM_TRACESTATE_MAX);
}

START_TEST(test_lengths_at_limits_kept)
{
	struct ctxshim_ctx c, *b;

	make_full_ctx(&c, 0x42);
	ctxshim_attach(&c);
	assert_full_published(&c);
	b = ctxshim_build_begin();
	ck_assert_ptr_nonnull(b);
	make_full_ctx(b, 0x43);
	ctxshim_build_publish(b);
	make_full_ctx(&c, 0x43);
	assert_full_published(&c);
	ctxshim_detach();
}
END_TEST

/* otep-formats.md §5.2 and §5.1 (ctx-sharing-demo), byte for byte, as the
 * shim itself publishes them: by attach and by an in-place build. */
START_TEST(test_published_vectors)
{
	static const uint8_t dump_52[59] = {
		0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98,
		0x76, 0x54, 0x32, 0x10, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
		0x01, 0x01, 0x1f, 0x00, 0x00, 0x03, 0x47, 0x45, 0x54, 0x01, 0x09, 0x2f,
		0x61, 0x70, 0x69, 0x2f, 0x74, 0x65, 0x73, 0x74, 0x02, 0x0d, 0x73, 0x69,
		0x6d, 0x70, 0x6c, 0x65, 0x2d, 0x77, 0x72, 0x69, 0x74, 0x65, 0x72,
	};
	static const char *const vals[] = {"GET", "/api/test", "simple-writer"};
	uint8_t dump_51[38];
	struct trec_attr_writer w;
	struct ctxshim_ctx c, *b;
	unsigned i;

	memset(&c, 0x5a, sizeof(c)); /* the shim's own fields must not leak */
	memcpy(c.trace_id, dump_52, 16);
	memcpy(c.span_id, dump_52 + 16, 8);
	c.valid = 0;
	c.flags = 0x01;
	c.tracestate_len = 0;
	trec_attrs_init(&w, c.attrs, sizeof(c.attrs));
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(
			trec_attrs_add(&w, (uint8_t)i, vals[i], strlen(vals[i])), 0);
	c.attrs_len = (uint16_t)w.len;
	ctxshim_attach(&c);
	ck_assert_ptr_nonnull(published());
	ck_assert_mem_eq(published(), dump_52, sizeof(dump_52));

	/* §5.1: trace 01 x16, span 02 x8, valid 1, flags 0, size 10,
	 * attrs 00 03 "foo" 01 03 "bar". */
	memset(dump_51, 0x01, 16);
	memset(dump_51 + 16, 0x02, 8);
	memcpy(dump_51 + 24,
	       "\x01\x00\x0a\x00\x00\x03"
	       "foo"
	       "\x01\x03"
	       "bar",
	       14);
	b = ctxshim_build_begin();
	ck_assert_ptr_nonnull(b);
	ctxshim_ctx_begin(b, NULL);
	memset(b->trace_id, 0x01, 16);
	memset(b->span_id, 0x02, 8);
	b->flags = 0;
	trec_attrs_init(&w, b->attrs, sizeof(b->attrs));
	ck_assert_int_eq(trec_attrs_add(&w, 0, "foo", 3), 0);
	ck_assert_int_eq(trec_attrs_add(&w, 1, "bar", 3), 0);
	b->attrs_len = (uint16_t)w.len;
	ctxshim_build_publish(b);
	ck_assert_mem_eq(published(), dump_51, sizeof(dump_51));
	ck_assert_uint_eq((uintptr_t)published() % 2, 0);
	ctxshim_detach();
	ck_assert_ptr_null(published());
}
END_TEST

static struct ctxshim_ctx sig_ctx;

static void
on_usr1(int sig)
{
	(void)sig;
	ctxshim_attach(&sig_ctx);
}

START_TEST(test_attach_from_signal_handler)
{
	make_ctx(&sig_ctx, 0x51, "PUT");
	signal(SIGUSR1, on_usr1);
	raise(SIGUSR1);
	ck_assert_ptr_nonnull(published());
	ck_assert_int_eq(memcmp(published()->trace_id, sig_ctx.trace_id, 16), 0);
	ctxshim_detach();
	signal(SIGUSR1, SIG_DFL);
}
END_TEST

/* The socket level's per-request path: build in the unpublished buffer,
 * then publish it in place. */
START_TEST(test_build_in_place)
{
	struct ctxshim_ctx a, *b;
	const struct otel_thread_ctx_record *ra;
	uint8_t copy[TREC_MAX_SIZE];

	make_ctx(&a, 0x71, "GET");
	ctxshim_attach(&a);
	ra = published();
	memcpy(copy, ra, TREC_HEADER_SIZE + ra->attrs_data_size);

	b = ctxshim_build_begin();
	ck_assert_ptr_nonnull(b);
	ck_assert_ptr_ne(b->trace_id, (const void *)ra);
	/* While building, nothing changes for a reader, and an attach from
	 * a signal handler on this thread is dropped (the build wins). */
	make_ctx(b, 0x81, "POST");
	ck_assert_ptr_eq(published(), ra);
	ck_assert_int_eq(memcmp(copy, ra, TREC_HEADER_SIZE + a.attrs_len), 0);
	make_ctx(&sig_ctx, 0x91, "PUT");
	signal(SIGUSR1, on_usr1);
	raise(SIGUSR1);
	signal(SIGUSR1, SIG_DFL);
	ck_assert_ptr_eq(published(), ra);
	ck_assert_ptr_null(ctxshim_build_begin()); /* one build at a time */

	ctxshim_build_publish(b);
	ck_assert_ptr_eq(published(), (const void *)b->trace_id);
	ck_assert_uint_eq(published()->valid, 1);
	ck_assert_uint_eq(published()->trace_flags, 0x03);
	ck_assert_uint_eq(published()->attrs_data_size, b->attrs_len);
	ck_assert_int_eq(memcmp(published()->attrs_data, "\x00\x04POST", 6), 0);
	ck_assert_ptr_eq(ctxshim_current(), b);
	/* The lock is released: a plain attach works again. */
	ctxshim_attach(&a);
	ck_assert_int_eq(memcmp(published()->trace_id, a.trace_id, 16), 0);
	ctxshim_detach();
}
END_TEST

START_TEST(test_build_cancel_and_bad_lengths)
{
	struct ctxshim_ctx a, *b;
	const struct otel_thread_ctx_record *ra;

	make_ctx(&a, 0xa1, "GET");
	ctxshim_attach(&a);
	ra = published();
	b = ctxshim_build_begin();
	ck_assert_ptr_nonnull(b);
	make_ctx(b, 0xb1, "POST");
	ctxshim_build_cancel();
	ck_assert_ptr_eq(published(), ra);
	ck_assert_int_eq(memcmp(ctxshim_current()->trace_id, a.trace_id, 16), 0);

	/* Lengths out of range are published as empty, never read past. */
	b = ctxshim_build_begin();
	ck_assert_ptr_nonnull(b);
	make_ctx(b, 0xc1, "GET");
	b->attrs_len = TREC_ATTRS_MAX + 1;
	b->tracestate_len = CTXSHIM_TRACESTATE_MAX + 1;
	ctxshim_build_publish(b);
	ck_assert_uint_eq(published()->attrs_data_size, 0);
	ck_assert_uint_eq(ctxshim_current()->tracestate_len, 0);

	/* A buffer that begin() did not hand out is not published. */
	b = ctxshim_build_begin();
	ck_assert_ptr_nonnull(b);
	ctxshim_build_publish(&a);
	ck_assert_int_eq(memcmp(published()->trace_id, "\xc1\xc1", 2), 0);
	ctxshim_detach();
	ck_assert_ptr_null(published());
}
END_TEST

START_TEST(test_detach_span)
{
	struct ctxshim_ctx a;
	uint8_t other[8];

	memset(other, 0x55, sizeof(other));
	ck_assert(!ctxshim_detach_span(other)); /* nothing published */
	make_ctx(&a, 0xd1, "GET");
	ctxshim_attach(&a);
	ck_assert(!ctxshim_detach_span(other));
	ck_assert_ptr_nonnull(published());
	ck_assert(ctxshim_detach_span(a.span_id));
	ck_assert_ptr_null(published());
	ck_assert_ptr_null(ctxshim_current());
	ck_assert(!ctxshim_detach_span(a.span_id));
}
END_TEST

/* The socket level's ownership mark (thread-ctx.h, sk_owned): set only by
 * its own publications, cleared by every other store into the slot; its
 * detach compares span-ids whenever the mark is not set. */
START_TEST(test_sock_ownership)
{
	struct ctxshim_ctx a, b, *p;
	uint8_t other[8];

	memset(other, 0x55, sizeof(other));
	make_ctx(&a, 0xe1, "GET");
	make_ctx(&b, 0xe3, "PUT");
	ctxshim_attach_sock(&a);
	ck_assert_uint_eq(ctxshim_self.sk_owned, 1);
	ck_assert_int_eq(memcmp(published()->span_id, a.span_id, 8), 0);
	/* Another publication (a library hook's) is not the socket level's. */
	ctxshim_attach(&b);
	ck_assert_uint_eq(ctxshim_self.sk_owned, 0);
	ck_assert(!ctxshim_detach_sock(a.span_id));
	ck_assert_ptr_nonnull(published());
	/* The same span-id attached by someone else (a library hook taking
	 * the request context the socket level saw) is still cleared, by
	 * span-id, as before the mark existed. */
	ctxshim_attach(&a);
	ck_assert_uint_eq(ctxshim_self.sk_owned, 0);
	ck_assert(!ctxshim_detach_sock(other));
	ck_assert(ctxshim_detach_sock(a.span_id));
	ck_assert_ptr_null(published());
	ck_assert_ptr_null(ctxshim_current());
	/* A built request is the socket level's; owned, it is cleared
	 * without comparing (the socket level passes the span-id it kept). */
	p = ctxshim_build_begin();
	ck_assert_ptr_nonnull(p);
	memcpy(p, &b, sizeof(b));
	ctxshim_build_publish(p);
	ck_assert_uint_eq(ctxshim_self.sk_owned, 1);
	ck_assert(ctxshim_detach_sock(b.span_id));
	ck_assert_uint_eq(ctxshim_self.sk_owned, 0);
	ck_assert_ptr_null(published());
	ck_assert(!ctxshim_detach_sock(b.span_id));
	/* A detach, and an update in progress. */
	ctxshim_attach_sock(&a);
	ctxshim_detach();
	ck_assert_uint_eq(ctxshim_self.sk_owned, 0);
	ck_assert_ptr_null(published());
	ctxshim_attach_sock(&a);
	ctxshim_self.busy = 1;
	ck_assert(!ctxshim_detach_sock(a.span_id));
	ck_assert_ptr_nonnull(published());
	ctxshim_self.busy = 0;
	ck_assert(ctxshim_detach_sock(a.span_id));
	ck_assert_ptr_null(published());
}
END_TEST

/* The socket level's idle wait in one test (ctxshim_sk_idle_fast()): only
 * its own context, with neither busy flag held. */
START_TEST(test_sock_idle_fast)
{
	struct ctxshim_ctx a, b;

	make_ctx(&a, 0xf1, "GET");
	make_ctx(&b, 0xf3, "PUT");
	ck_assert(!ctxshim_sk_idle_fast()); /* nothing published */
	ctxshim_attach_sock(&a);
	ctxshim_self.sk.fdp1 = 8;
	ck_assert(ctxshim_sk_idle_fast());
	ck_assert_ptr_null(published());
	ck_assert_ptr_null(ctxshim_current());
	ck_assert_int_eq(ctxshim_self.sk.fdp1, 0);
	ck_assert_int_eq(ctxshim_self.sk.busy, 0);
	ck_assert_uint_eq(ctxshim_self.busy, 0);
	ck_assert_uint_eq(ctxshim_self.sk_owned, 0);
	ck_assert_uint_eq(ctxshim_self.sk_pending, 0);
	ck_assert(!ctxshim_sk_idle_fast());
	/* Not ours: left alone. */
	ctxshim_attach(&b);
	ctxshim_self.sk.fdp1 = 8;
	ck_assert(!ctxshim_sk_idle_fast());
	ck_assert_ptr_nonnull(published());
	ck_assert_int_eq(ctxshim_self.sk.fdp1, 8);
	/* Ours, but the socket level or an update is in progress. */
	ctxshim_attach_sock(&a);
	ctxshim_self.sk.busy = 1;
	ck_assert(!ctxshim_sk_idle_fast());
	ck_assert_ptr_nonnull(published());
	ctxshim_self.sk.busy = 0;
	ctxshim_self.busy = 1;
	ck_assert(!ctxshim_sk_idle_fast());
	ck_assert_ptr_nonnull(published());
	ctxshim_self.busy = 0;
	ck_assert(ctxshim_sk_idle_fast());
	ck_assert_ptr_null(published());
	ctxshim_self.sk.fdp1 = 0;
}
END_TEST

static bool
count_line(const struct maps_entry *e, void *arg)
{
	(void)e;
	++*(unsigned *)arg;
	return false;
}

/* sys_maps_scan() through a buffer shorter than some lines (a long
 * pathname) gives every line, those without their pathname. */
START_TEST(test_maps_scan_small_buffer)
{
	char big[8192], small[80];
	unsigned a = 0, b = 0;

	ck_assert(!sys_maps_scan(big, sizeof(big), count_line, &a));
	ck_assert(!sys_maps_scan(small, sizeof(small), count_line, &b));
	ck_assert_uint_gt(a, 5);
	ck_assert_uint_eq(a, b);
}
END_TEST

/* A jump out of a signal handler (hooks/hook-longjmp.c): a hold whose
 * frame the jump ends is released, and the thread publishes nothing; one
 * whose frame it keeps, or not on the thread's own stack, stays.  Run on
 * a thread given by the test: NULL, or the line of the first check that
 * failed (Check's own assertions belong to the main thread). */
#define UNWOUND_CHECK(cond)                                 \
	do {                                                \
		if (!(cond))                                \
			return (void *)(uintptr_t)__LINE__; \
	} while (0)

static void *
unwound_checks(void *arg)
{
	/* not on any stack: a coroutine's, say */
	static char elsewhere[64];
	uintptr_t here = (uintptr_t)__builtin_frame_address(0),
		  other = (uintptr_t)elsewhere;
	struct ctxshim_ctx a;

	(void)arg;
	make_ctx(&a, 0x91, "GET");
	/* this frame, which the code that asks runs below */
	UNWOUND_CHECK(ctxshim_stack_between(here, here + 64));
	UNWOUND_CHECK(!ctxshim_stack_between(other, here));
	/* a frame below the code that asks: not one it runs inside */
	UNWOUND_CHECK(!ctxshim_stack_between(here - 65536, here + 64));
	/* A hold with its frame known: kept by a jump below it, released by
	 * one above it. */
	ctxshim_attach(&a);
	ctxshim_self.busy = CTXSHIM_BUSY_KNOWN;
	ctxshim_self.owner_sp = here;
	ctxshim_thread_unwound(here - 512, false);
	UNWOUND_CHECK(ctxshim_self.busy == CTXSHIM_BUSY_KNOWN);
	UNWOUND_CHECK(published());
	ctxshim_thread_unwound(here + 64, false);
	UNWOUND_CHECK(ctxshim_self.busy == 0 && ctxshim_self.owner_sp == 0);
	UNWOUND_CHECK(!published() && !ctxshim_current());
	UNWOUND_CHECK(ctxshim_self.sk_owned == 0);
	/* A hold inside the socket level's: released with that one only. */
	ctxshim_attach_sock(&a);
	ctxshim_self.busy = 1;
	ctxshim_thread_unwound(here + 64, false);
	UNWOUND_CHECK(ctxshim_self.busy == 1 && published());
	ctxshim_thread_unwound(here + 64, true);
	UNWOUND_CHECK(ctxshim_self.busy == 0 && !published());
	UNWOUND_CHECK(ctxshim_self.sk_owned == 0);
	/* A holder off the thread's stack (a coroutine's): kept. */
	ctxshim_attach(&a);
	ctxshim_self.busy = CTXSHIM_BUSY_KNOWN;
	ctxshim_self.owner_sp = other;
	ctxshim_thread_unwound(here, false);
	UNWOUND_CHECK(ctxshim_self.busy == CTXSHIM_BUSY_KNOWN && published());
	ctxshim_self.busy = 0;
	ctxshim_self.owner_sp = 0;
	/* Nothing held: nothing changes. */
	ctxshim_thread_unwound(here + 64, false);
	UNWOUND_CHECK(published());
	/* Only the socket level's hold ended, outside an update: its own
	 * context goes, another (a library hook's) stays. */
	ctxshim_thread_unwound(here + 64, true);
	UNWOUND_CHECK(published());
	ctxshim_attach_sock(&a);
	ctxshim_thread_unwound(here + 64, true);
	UNWOUND_CHECK(!published() && ctxshim_self.sk_owned == 0);
	ctxshim_detach();
	return NULL;
}

START_TEST(test_unwound)
{
	pthread_t t;
	void *ret;

	/* The main thread's own stack is the kernel's [stack], which
	 * valgrind replaces with one of its own: there, only a thread's
	 * (the mapping with its thread descriptor) is found. */
	if (!RUNNING_ON_VALGRIND) {
		ret = unwound_checks(NULL);
		ck_assert_msg(!ret, "main thread: check at line %d failed",
			      (int)(uintptr_t)ret);
	}
	ck_assert_int_eq(pthread_create(&t, NULL, unwound_checks, NULL), 0);
	ck_assert_int_eq(pthread_join(t, &ret), 0);
	ck_assert_msg(!ret, "thread: check at line %d failed", (int)(uintptr_t)ret);
}
END_TEST

/* A jump out of a signal handler that interrupted an attach (a library
 * hook's publication, outside the socket level's hold): the hold knows
 * its frame, so a jump above it releases it and the thread publishes
 * again.  The handler lands inside the hold exactly: the attach faults
 * reading a context that ends in an unreadable page. */
static sigjmp_buf fault_env;
static uintptr_t fault_to;

static void
on_fault(int sig)
{
	(void)sig;
	/* what hooks/hook-longjmp.c does before the real jump */
	ctxshim_thread_unwound(fault_to, false);
	siglongjmp(fault_env, 1);
}

static void *
attach_jump_checks(void *arg)
{
	struct sigaction sa = {.sa_handler = on_fault}, old;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	volatile bool jumped = false;
	struct ctxshim_ctx a;

	(void)arg;
	UNWOUND_CHECK(m != MAP_FAILED && mprotect(m + pg, pg, PROT_NONE) == 0);
	fault_to = (uintptr_t)__builtin_frame_address(0);
	UNWOUND_CHECK(sigaction(SIGSEGV, &sa, &old) == 0);
	if (sigsetjmp(fault_env, 1) == 0)
		ctxshim_attach((const struct ctxshim_ctx *)(void *)(m + pg - 8));
	else
		jumped = true;
	(void)sigaction(SIGSEGV, &old, NULL);
	(void)munmap(m, 2 * pg);
	UNWOUND_CHECK(jumped);
	UNWOUND_CHECK(ctxshim_self.busy == 0 && !published());
	make_ctx(&a, 0x93, "GET");
	ctxshim_attach(&a);
	UNWOUND_CHECK(published() &&
		      memcmp(published()->trace_id, a.trace_id, 16) == 0);
	ctxshim_detach();
	return NULL;
}

START_TEST(test_jump_out_of_attach)
{
	pthread_t t;
	void *ret;

	ck_assert_int_eq(pthread_create(&t, NULL, attach_jump_checks, NULL), 0);
	ck_assert_int_eq(pthread_join(t, &ret), 0);
	ck_assert_msg(!ret, "check at line %d failed", (int)(uintptr_t)ret);
}
END_TEST

static void *
thread_main(void *arg)
{
	struct ctxshim_ctx c;

	(void)arg;
	if (published() != NULL)
		return (void *)1;
	make_ctx(&c, 0x61, "GET");
	ctxshim_attach(&c);
	return (void *)(uintptr_t)(published() != NULL ? 0 : 2);
}

START_TEST(test_threads_have_own_records)
{
	struct ctxshim_ctx c;
	pthread_t t;
	void *ret;

	ctxshim_thread_init();
	make_ctx(&c, 0x71, "GET");
	ctxshim_attach(&c);
	ck_assert_int_eq(pthread_create(&t, NULL, thread_main, NULL), 0);
	ck_assert_int_eq(pthread_join(t, &ret), 0);
	ck_assert_ptr_null(ret);
	/* The other thread's attach did not touch ours. */
	ck_assert_int_eq(memcmp(published()->trace_id, c.trace_id, 16), 0);
	ctxshim_detach();
}
END_TEST

START_TEST(test_passive_mode_writes_nothing)
{
	struct ctxshim_ctx c;

	make_ctx(&c, 0x81, "GET");
	ctxshim_mode = CTXSHIM_PASSIVE;
	ctxshim_attach(&c);
	ctxshim_mode = CTXSHIM_ACTIVE;
	ck_assert_ptr_null(published());
	ck_assert_ptr_null(ctxshim_current());
}
END_TEST

START_TEST(test_begin_child_and_new_trace)
{
	struct w3c_traceparent tp;
	struct ctxshim_ctx c;
	const char *h = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03";

	ck_assert_int_eq(w3c_traceparent_parse(h, strlen(h), &tp), 0);
	ctxshim_ctx_begin(&c, &tp);
	ck_assert_int_eq(memcmp(c.trace_id, tp.trace_id, 16), 0);
	ck_assert_int_eq(memcmp(c.parent_id, tp.parent_id, 8), 0);
	ck_assert_int_ne(memcmp(c.span_id, tp.parent_id, 8), 0);
	ck_assert(!w3c_id_is_zero(c.span_id, 8));
	ck_assert_uint_eq(c.has_parent, 1);
	ck_assert_uint_eq(c.flags, 0x03);
	ck_assert_uint_eq(c.attrs_len, 0);
	/* W3C: flag bits it does not know are not passed on. */
	tp.flags = 0xff;
	ctxshim_ctx_begin(&c, &tp);
	ck_assert_uint_eq(c.flags, W3C_FLAGS_KNOWN);

	ctxshim_ctx_begin(&c, NULL);
	ck_assert(!w3c_id_is_zero(c.trace_id, 16));
	ck_assert(!w3c_id_is_zero(c.span_id, 8));
	ck_assert_uint_eq(c.has_parent, 0);
	ck_assert_uint_eq(c.flags, W3C_FLAG_RANDOM);
}
END_TEST

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t
id_u64(const uint8_t id[8])
{
	uint64_t v;

	memcpy(&v, id, 8);
	return v;
}

/* Sorts v[0..n) and fails on a zero or repeated id. */
static void
assert_ids_distinct(uint64_t *v, size_t n, const char *what)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	ck_assert_msg(v[0] != 0, "%s: an all-zero span-id", what);
	for (size_t i = 1; i < n; i++)
		ck_assert_msg(v[i] != v[i - 1], "%s: span-id %#llx twice", what,
			      (unsigned long long)v[i]);
}

#define FORK_IDS 2000

/* A forked child must not draw the ids its parent draws next. */
START_TEST(test_fork_child_reseeds)
{
	static uint64_t v[2 * FORK_IDS];
	uint8_t warm[8], id[8];
	int p[2], status;
	pid_t pid;

	ctxshim_new_span_id(warm);
	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int ok = 1;

		ctxshim_thread_after_fork_child();
		for (int i = 0; i < FORK_IDS && ok; i++) {
			ctxshim_new_span_id(id);
			ok = write(p[1], id, 8) == 8;
		}
		_exit(ok ? 0 : 1);
	}
	for (int i = 0; i < FORK_IDS; i++) {
		ctxshim_new_span_id(id);
		v[i] = id_u64(id);
		ck_assert_int_eq(read(p[0], id, 8), 8);
		v[FORK_IDS + i] = id_u64(id);
	}
	waitpid(pid, &status, 0);
	ck_assert_int_eq(status, 0);
	assert_ids_distinct(v, 2 * FORK_IDS, "parent and child");
	close(p[0]);
	close(p[1]);
}
END_TEST

#define THREAD_IDS 20000
#define ID_THREADS 4

struct id_thread {
	pthread_t th;
	uint64_t *v;
	struct ctx_splitmix after_first;
	unsigned gen_before;
};

static void *
id_thread_main(void *arg)
{
	struct id_thread *it = arg;
	uint8_t id[8];

	it->gen_before = ctxshim_self.rng_gen; /* a new thread: never seeded */
	for (int i = 0; i < THREAD_IDS; i++) {
		ctxshim_new_span_id(id);
		it->v[i] = id_u64(id);
		if (i == 0)
			it->after_first = ctxshim_self.span_rng;
	}
	return NULL;
}

/* Every thread seeds its own generator on its first draw: two threads
 * (and the main one) never draw the same sequence, nor share an id. */
START_TEST(test_threads_draw_distinct_span_ids)
{
	uint64_t *v = malloc((ID_THREADS + 1) * THREAD_IDS * sizeof(*v));
	struct id_thread it[ID_THREADS];
	uint8_t id[8];

	ck_assert_ptr_nonnull(v);
	for (int k = 0; k < ID_THREADS; k++) {
		it[k].v = v + (size_t)k * THREAD_IDS;
		ck_assert_int_eq(
			pthread_create(&it[k].th, NULL, id_thread_main, &it[k]), 0);
	}
	for (int i = 0; i < THREAD_IDS; i++) {
		ctxshim_new_span_id(id);
		v[(size_t)ID_THREADS * THREAD_IDS + i] = id_u64(id);
	}
	for (int k = 0; k < ID_THREADS; k++) {
		ck_assert_int_eq(pthread_join(it[k].th, NULL), 0);
		ck_assert_uint_eq(it[k].gen_before, 0);
		ck_assert(it[k].after_first.gamma & 1);
		ck_assert(it[k].after_first.gamma != ctxshim_self.span_rng.gamma);
		for (int j = 0; j < k; j++)
			ck_assert(it[k].after_first.gamma != it[j].after_first.gamma);
	}
	assert_ids_distinct(v, (ID_THREADS + 1) * THREAD_IDS, "threads");
	free(v);
}
END_TEST

/* White box: ctxshim_new_span_id() is ctx_splitmix_span_id() on the
 * thread's generator (it writes the common case out for B4c), including
 * the step over the state 0 that would give the all-zero id. */
START_TEST(test_span_id_is_thread_splitmix)
{
	struct ctx_splitmix g;
	uint8_t a[8], b[8];

	ctxshim_new_span_id(a); /* seeded */
	g = ctxshim_self.span_rng;
	for (int i = 0; i < 1000; i++) {
		ctxshim_new_span_id(a);
		ctx_splitmix_span_id(&g, b);
		ck_assert_mem_eq(a, b, 8);
	}
	ctxshim_self.span_rng.state = -ctxshim_self.span_rng.gamma;
	g = ctxshim_self.span_rng;
	ctxshim_new_span_id(a);
	ctx_splitmix_span_id(&g, b);
	ck_assert_mem_eq(a, b, 8);
	ck_assert_uint_eq(id_u64(a), ctx_mix64(g.gamma));
	ck_assert_uint_eq(ctxshim_self.span_rng.state, ctxshim_self.span_rng.gamma);
	ck_assert(id_u64(a) != 0);
}
END_TEST

/* The exit handler is registered with the thread's first store into
 * otel_thread_ctx_v1, whichever call makes it (a detach, an attach, an
 * in-place build): a thread that exits while it publishes is cleared.  A
 * key created after the shim's has its destructor run after the shim's,
 * so it sees what the shim left. */
static pthread_key_t probe_key;
static void *probe_seen[3];

static void
probe_exit(void *arg)
{
	probe_seen[(uintptr_t)arg - 1] = otel_thread_ctx_v1;
}

static void *
exit_thread_main(void *arg)
{
	struct ctxshim_ctx c, *b;

	(void)pthread_setspecific(probe_key, arg);
	make_ctx(&c, 0x17, "GET");
	switch ((uintptr_t)arg) {
	case 1: /* the slot first known to a detach */
		ctxshim_detach();
		ctxshim_attach(&c);
		break;
	case 2:
		ctxshim_attach(&c);
		break;
	case 3:
		b = ctxshim_build_begin();
		if (b) {
			ctxshim_ctx_begin(b, NULL);
			ctxshim_build_publish(b);
		}
		break;
	}
	return otel_thread_ctx_v1;
}

START_TEST(test_exit_clears_whatever_published_first)
{
	ctxshim_thread_init();
	ck_assert_int_eq(pthread_key_create(&probe_key, probe_exit), 0);
	for (uintptr_t k = 1; k <= 3; k++) {
		pthread_t th;
		void *ret;

		probe_seen[k - 1] = (void *)1;
		ck_assert_int_eq(pthread_create(&th, NULL, exit_thread_main, (void *)k),
				 0);
		ck_assert_int_eq(pthread_join(th, &ret), 0);
		ck_assert_msg(ret != NULL, "case %u published nothing", (unsigned)k);
		ck_assert_msg(probe_seen[k - 1] == NULL,
			      "case %u: still published at exit", (unsigned)k);
	}
	pthread_key_delete(probe_key);
}
END_TEST

TEST_SUITE(thread_ctx_suite)
{
	Suite *s = suite_create("Per-thread publication");
	TCase *tc = tcase_create("attach and detach");

	tcase_add_test(tc, test_attach_publishes_complete_record);
	tcase_add_test(tc, test_update_swaps_buffers);
	tcase_add_test(tc, test_oversized_lengths_rejected);
	tcase_add_test(tc, test_lengths_at_limits_kept);
	tcase_add_test(tc, test_published_vectors);
	tcase_add_test(tc, test_attach_from_signal_handler);
	tcase_add_test(tc, test_threads_have_own_records);
	tcase_add_test(tc, test_build_in_place);
	tcase_add_test(tc, test_build_cancel_and_bad_lengths);
	tcase_add_test(tc, test_detach_span);
	tcase_add_test(tc, test_sock_ownership);
	tcase_add_test(tc, test_sock_idle_fast);
	tcase_add_test(tc, test_unwound);
	tcase_add_test(tc, test_jump_out_of_attach);
	tcase_add_test(tc, test_maps_scan_small_buffer);
	tcase_add_test(tc, test_passive_mode_writes_nothing);
	tcase_add_test(tc, test_exit_clears_whatever_published_first);
	suite_add_tcase(s, tc);
	tc = tcase_create("ids");
	tcase_add_test(tc, test_begin_child_and_new_trace);
	tcase_add_test(tc, test_fork_child_reseeds);
	tcase_add_test(tc, test_threads_draw_distinct_span_ids);
	tcase_add_test(tc, test_span_id_is_thread_splitmix);
	suite_add_tcase(s, tc);
	return s;
}
