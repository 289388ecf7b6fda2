/* SPDX-License-Identifier: Apache-2.0 */
/* The walk of an HTTP/2 connection's writes (preload/conn.c, "HTTP/2
 * answers"), linked directly into this program: the write hooks' direct
 * path (ctxshim_conn_h2_written(), which steps over a payload iovec and
 * reads a frame header that has an iovec of its own inline) must answer
 * exactly the writes the general walk (ctxshim_conn_responded_iov())
 * answers, with the iovecs and with their bytes as one buffer (a write(),
 * an SSL_write(): its whole frames walked inline, conn_h2_written()),
 * and all three those that carry the header of a HEADERS or
 * RST_STREAM frame of the request's stream, whatever the iovecs: a
 * header alone, cut anywhere, empty ones (with a NULL base too), a
 * write the kernel took part of, bytes of unknown content, a count
 * larger than the iovecs.  A wrong answer there shows a request's
 * context after its response, or none before it, and nothing else
 * notices it. */
#include "test-common.h"

#include "conn.h"
#include "h2-scan.h"
#include "shim.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

/* Inactive: conn.c's constructor maps no table; these connections are
 * the test's own slots. */
__thread void *otel_thread_ctx_v1;
/* the name the shim's code writes through (shim.h) */
extern __thread void *ctxshim_own_slot __attribute__((alias("otel_thread_ctx_v1")));
enum ctxshim_mode ctxshim_mode = CTXSHIM_OFF;

#define REQUIRE(cond_)                                                         \
	do {                                                                   \
		if (!(cond_))                                                  \
			ck_abort_msg("%s:%d: %s", __FILE__, __LINE__, #cond_); \
	} while (0)

#define WIRE_MAX 65536

static uint8_t wire[WIRE_MAX];
/* 1 where a frame starts or its header ends */
static uint8_t bound[WIRE_MAX + 1];
static struct ctxshim_conn conns[2][3];

/* The server's frames: DATA, HEADERS, RST_STREAM, SETTINGS, WINDOW_UPDATE
 * and CONTINUATION of streams 0, 1 and 3 (the reserved bit set on some),
 * payloads of random bytes (which look like frame headers as often as
 * not).  Its length. */
static size_t
make_wire(unsigned *seed)
{
	static const uint8_t types[] = {0x0, 0x1, 0x3, 0x4, 0x8, 0x9};
	size_t n = 0, i, len;

	memset(bound, 0, sizeof(bound));
	while (n + 9 + 64 <= WIRE_MAX) {
		uint32_t sid = (uint32_t)(rand_r(seed) % 3);

		sid = sid ? 2 * sid - 1 : 0;
		if (rand_r(seed) % 8 == 0)
			sid |= 0x80000000u;
		len = (size_t)(rand_r(seed) % 64);
		bound[n] = bound[n + 9] = 1;
		wire[n] = 0;
		wire[n + 1] = 0;
		wire[n + 2] = (uint8_t)len;
		wire[n + 3] = types[rand_r(seed) % sizeof(types)];
		wire[n + 4] = (uint8_t)rand_r(seed);
		wire[n + 5] = (uint8_t)(sid >> 24);
		wire[n + 6] = (uint8_t)(sid >> 16);
		wire[n + 7] = (uint8_t)(sid >> 8);
		wire[n + 8] = (uint8_t)sid;
		for (i = 0; i < len; i++)
			wire[n + 9 + i] = (uint8_t)rand_r(seed);
		n += 9 + len;
	}
	bound[n] = 1;
	return n;
}

/* c, a connection upgraded by "Upgrade: h2c": followed as HTTP/2, its
 * current request stream 1's, with a context, not answered. */
static void
conn_up(struct ctxshim_conn *c)
{
	static const char h[] = "HTTP/1.1 101 Switching Protocols\r\n"
				"Connection: Upgrade\r\nUpgrade: h2c\r\n\r\n";

	memset(c, 0, sizeof(*c));
	atomic_store(&c->flags, CONN_F_TRACKED | CONN_F_REQ | CONN_F_HAS_CTX);
	atomic_store(&c->seq, 2);
	atomic_store(&c->answered, 0);
	ck_assert_int_eq(
		ctxshim_conn_h2_upgrade(c, h, sizeof(h) - 1, sizeof(h) - 1, NULL, 0),
		CONN_START_OK);
	ck_assert(ctxshim_conn_h2(c));
	ck_assert(!ctxshim_conn_answered(c));
}

enum path { DIRECT, GENERAL, ONE_BUFFER };

/* A write of written bytes (iov, n) on c, by the direct path, the
 * general one, or the general one with the iovecs' bytes as one buffer
 * (head, head_len; NULL with no iovec): did it answer the request?  The
 * request is made unanswered again after, so that every write is
 * checked. */
static bool
wrote(struct ctxshim_conn *c,
      enum path path,
      const struct iovec *iov,
      size_t n,
      const uint8_t *head,
      size_t head_len,
      size_t written)
{
	bool answered;

	if (path == DIRECT)
		REQUIRE(ctxshim_conn_h2_written(c, iov, n, written));
	else if (path == GENERAL)
		REQUIRE(!ctxshim_conn_responded_iov(c, NULL, 0, written, iov, n));
	else
		REQUIRE(!ctxshim_conn_responded_iov(c, head, head_len, written, NULL,
						    0));
	answered = ctxshim_conn_answered(c);
	atomic_store(&c->answered, (uint8_t)((atomic_load(&c->seq) >> 1) - 1));
	return answered;
}

/* Both paths, and the walk of the bytes written (ref: fed them, or
 * skipped them with no iovec, then skipped extra more). */
static void
check_write(struct ctxshim_conn *c,
	    struct h2_out *ref,
	    const struct iovec *iov,
	    size_t n,
	    size_t pos,
	    size_t written,
	    size_t extra,
	    unsigned *hits)
{
	int want = n ? h2_out_feed(ref, wire + pos, written, 1)
		     : h2_out_skip(ref, written);
	size_t i, held = 0;
	bool a, b, one;

	if (extra)
		want |= h2_out_skip(ref, extra);
	for (i = 0; i < n; i++)
		held += iov[i].iov_len;
	a = wrote(&c[0], DIRECT, iov, n, NULL, 0, written + extra);
	b = wrote(&c[1], GENERAL, iov, n, NULL, 0, written + extra);
	one = wrote(&c[2], ONE_BUFFER, NULL, 0, n ? wire + pos : NULL, held,
		    written + extra);
	ck_assert_msg(a == b && a == one && a == (want != 0),
		      "at %zu, %zu bytes (+%zu) in %zu iovecs: direct %d, general %d, "
		      "one buffer %d, frames %d",
		      pos, written, extra, n, a, b, one, want);
	*hits += a;
}

/* One connection pair over the whole wire; lose: once past 9/10 of it,
 * one write claims more bytes than its iovecs hold (whose content the
 * walk cannot know: from there every write answers). */
static void
walk_wire(struct ctxshim_conn *c, unsigned seed, bool lose)
{
	size_t len = make_wire(&seed), pos = 0;
	struct h2_out ref;
	unsigned hits = 0, writes = 0;
	bool lost = false;

	conn_up(&c[0]);
	conn_up(&c[1]);
	conn_up(&c[2]);
	h2_out_reset(&ref);
	while (pos < len) {
		struct iovec iov[8];
		size_t n = 0, end = pos, want = 1 + (size_t)(rand_r(&seed) % 8),
		       written;
		size_t extra = 0;

		/* Bytes of unknown content within a payload (sendfile): no
		 * iovec, or none of them. */
		if (ref.left && !ref.lost && rand_r(&seed) % 8 == 0) {
			written = 1 + (size_t)rand_r(&seed) % ref.left;
			if (written > len - pos)
				written = len - pos;
			check_write(c, &ref, rand_r(&seed) % 2 ? NULL : iov, 0, pos,
				    written, 0, &hits);
			pos += written;
			writes++;
			continue;
		}
		while (n < want && end < len) {
			size_t next = end + 1;

			if (rand_r(&seed) % 6 == 0) {
				iov[n].iov_base = rand_r(&seed) % 2 ? NULL : wire + end;
				iov[n++].iov_len = 0;
				continue;
			}
			if (rand_r(&seed) % 4)
				while (next < len && !bound[next])
					next++;
			else
				next += (size_t)(rand_r(&seed) % 20);
			if (next > len)
				next = len;
			iov[n].iov_base = wire + end;
			iov[n++].iov_len = next - end;
			end = next;
		}
		if (end == pos)
			continue;
		written = end - pos;
		if (lose && !lost && pos > len / 10 * 9) {
			/* all of them, and 1000 bytes more */
			extra = 1000;
			lost = true;
		} else if (rand_r(&seed) % 4 == 0) {
			/* the kernel took part of it */
			written = 1 + (size_t)rand_r(&seed) % written;
		}
		check_write(c, &ref, iov, n, pos, written, extra, &hits);
		pos += written;
		writes++;
	}
	/* The stream holds a few hundred frames of stream 1 that answer. */
	ck_assert_uint_gt(hits, 100);
	ck_assert_uint_gt(writes, 1000);
	ck_assert(!lose || (ref.lost && lost));
}

/* The client's RST_STREAM (RFC 9113 §6.4: it cancelled the stream) of
 * the current request's stream ends that request: its context goes.  Kept, every later read and write
 * of the connection (PINGs, other streams' frames) showed the cancelled
 * request until the next one came.  One of another stream does not end
 * it; each split of the client's bytes into two reads gives the same. */
START_TEST(test_h2out_client_reset)
{
	static const uint8_t rst3[] = {0, 0, 4, 3, 0, 0, 0, 0, 3, 0, 0, 0, 8};
	static const uint8_t rst1[] = {0, 0, 4, 3, 0, 0, 0, 0, 1, 0, 0, 0, 8};
	uint8_t in[128];
	size_t n = 0, cut, end3;

	memcpy(in, H2_SCAN_PREFACE, H2_SCAN_PREFACE_LEN);
	n = H2_SCAN_PREFACE_LEN;
	memcpy(in + n, "\0\0\0\x04\0\0\0\0\0", 9); /* SETTINGS */
	n += 9;
	memcpy(in + n, rst3, sizeof(rst3));
	n += sizeof(rst3);
	end3 = n;
	memcpy(in + n, rst1, sizeof(rst1));
	n += sizeof(rst1);
	for (cut = 0; cut <= n; cut++) {
		struct ctxshim_conn *c = &conns[1][2];
		struct ctxshim_ctx *full = NULL;
		unsigned n_new = 0;

		conn_up(c);
		(void)ctxshim_conn_h2_feed(c, in, cut, &full, &n_new);
		REQUIRE(ctxshim_conn_h2(c));
		/* from stream 1's RST_STREAM frame header on (its payload
		 * is an error code), as a server's answers (h2_out_feed()) */
		REQUIRE(ctxshim_conn_answered(c) == (cut >= n - 4));
		if (cut >= end3)
			REQUIRE(ctxshim_conn_live(c) == (cut < n - 4));
		(void)ctxshim_conn_h2_feed(c, in + cut, n - cut, &full, &n_new);
		REQUIRE(full == NULL);
		REQUIRE(ctxshim_conn_h2(c));
		REQUIRE(ctxshim_conn_answered(c) && !ctxshim_conn_live(c));
		/* nor do its writes show it (hooks/hook-socket.c, sk_follow()) */
		REQUIRE(!(atomic_load(&c->flags) & CONN_F_HAS_CTX));
		ctxshim_conn_lost(c);
	}
}
END_TEST

START_TEST(test_h2out_paths)
{
	walk_wire(conns[0], 27u + (unsigned)_i, false);
}
END_TEST

START_TEST(test_h2out_lost)
{
	walk_wire(conns[1], 2718u + (unsigned)_i, true);
}
END_TEST

TEST_SUITE(conn_h2out_suite)
{
	Suite *s = suite_create("conn-h2out");
	TCase *tc = tcase_create("walk");

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_h2out_paths, 0, 8);
	tcase_add_loop_test(tc, test_h2out_lost, 0, 2);
	tcase_add_test(tc, test_h2out_client_reset);
	suite_add_tcase(s, tc);
	return s;
}
