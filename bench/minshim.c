/* SPDX-License-Identifier: Apache-2.0 */
/* libminshim.so: the least an OTEP-4947 writer that learns the context from
 * the socket can do for nginx's request path (issue 8, B1z; bench/README.md
 * "B1z: the minimal writer, measured").  A yardstick for B1, not a
 * product: it measures what a record writer costs nginx when it does
 * nothing else.
 *
 *   LD_PRELOAD=build/bench/libminshim.so nginx ...
 *
 * What it does, and all it does:
 *  - exports the TLS pointer otel_thread_ctx_v1 (TLSDESC, as the shim) and
 *    keeps one 28-byte record per thread (attrs-data-size 0);
 *  - recv(): when the bytes read are one whole HTTP/1.x request head (a
 *    request line ending in "HTTP/1.x", up to and including the empty line,
 *    nothing after it), the context is cleared, the head's lines are
 *    searched for a `traceparent` header (name case-insensitive, at a line
 *    start; newlines 64 bytes at a time with SSE2), the value is validated and
 *    decoded (W3C: lowercase hex, non-zero ids, version ff invalid; a
 *    second traceparent line makes it invalid), a span-id is drawn and the
 *    record is published (pointer set to NULL, record written, valid = 1,
 *    pointer stored, compiler fences: the OTEP's pointer-swap protocol
 *    with its "set the pointer to NULL first" variant for one buffer);
 *  - epoll_wait(): clears the context (no context between requests).
 *
 * Not done, on purpose (the shim does them; bench/README.md says what they
 * cost): attributes, tracestate, a connection table, heads split over
 * several reads or followed by more bytes (pipelining, a body) -- those
 * publish nothing rather than something wrong --, heads over 4 KiB read
 * into a buffer with less than 64 bytes to spare, the other read and
 * event-loop calls, TLS, configuration, a process context.
 *
 * Real symbols are bound with dlsym(RTLD_NEXT) once: each pointer starts at
 * a function that binds and calls through, so the hooks are one indirect
 * call with no test (as in hooks/hook-socket.c).
 */
#include "config.h"

#include <dlfcn.h>
#include <emmintrin.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#define MS_EXPORT      __attribute__((visibility("default")))
#define MS_COLD        __attribute__((cold, noinline))
#define ms_likely(x)   __builtin_expect(!!(x), 1)
#define ms_unlikely(x) __builtin_expect(!!(x), 0)

#define MS_TP_LEN   55 /* a version-00 traceparent value */
#define MS_NAME_LEN 12 /* "traceparent:" */

/* The OTEP-4947 pointer: TLSDESC (built with -mtls-dialect=gnu2). */
MS_EXPORT __thread void *otel_thread_ctx_v1;

/* The thread's record and what the hooks need, in static TLS (this library
 * is preloaded: initial-exec is one %fs-relative access). */
struct ms_thread {
	/* an otel_thread_ctx_record: trace-id, span-id, valid, trace-flags,
	 * attrs-data-size (always 0 here) */
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint32_t valid_flags_size; /* valid | flags << 8 | size << 16 (LE) */
	uint32_t spare;
	void **slot;  /* &otel_thread_ctx_v1 once known */
	uint64_t rng; /* wyrand state; 0 = not seeded in this thread */
};
_Static_assert(offsetof(struct ms_thread, valid_flags_size) == 24, "record layout");
static __thread struct ms_thread ms_self
	__attribute__((tls_model("initial-exec"), aligned(64)));

/* ---- real symbols ---- */

static ssize_t ms_recv_boot(int fd, void *buf, size_t len, int flags);
static int ms_epoll_wait_boot(int epfd, struct epoll_event *ev, int max, int timeout);
static __typeof__(recv) *ms_real_recv = ms_recv_boot;
static __typeof__(epoll_wait) *ms_real_epoll_wait = ms_epoll_wait_boot;

static void ms_after_fork_child(void);

static void
ms_bind(void)
{
	void *r = dlsym(RTLD_NEXT, "recv");
	void *e = dlsym(RTLD_NEXT, "epoll_wait");

	if (r)
		ms_real_recv = (__typeof__(recv) *)r;
	if (e)
		ms_real_epoll_wait = (__typeof__(epoll_wait) *)e;
}

__attribute__((constructor)) static void
ms_init(void)
{
	ms_bind();
	/* a forked child must not repeat its parent's span-ids */
	pthread_atfork(NULL, NULL, ms_after_fork_child);
}

static MS_COLD ssize_t
ms_recv_boot(int fd, void *buf, size_t len, int flags)
{
	ms_bind();
	if (ms_real_recv == ms_recv_boot) {
		errno = ENOSYS;
		return -1;
	}
	return ms_real_recv(fd, buf, len, flags);
}

static MS_COLD int
ms_epoll_wait_boot(int epfd, struct epoll_event *ev, int max, int timeout)
{
	ms_bind();
	if (ms_real_epoll_wait == ms_epoll_wait_boot) {
		errno = ENOSYS;
		return -1;
	}
	return ms_real_epoll_wait(epfd, ev, max, timeout);
}

/* ---- the thread's state ---- */

/* &ms_self once per call (gcc would recompute a TLS address after each
 * fence rather than keep it). */
static inline struct ms_thread *
ms_thread(void)
{
	struct ms_thread *t = &ms_self;

	__asm__("" : "+r"(t));
	return t;
}

static MS_COLD void **
ms_slot_init(struct ms_thread *t)
{
	return t->slot = (void **)&otel_thread_ctx_v1;
}

static inline void
ms_store_ptr(void **slot, void *p)
{
	atomic_signal_fence(memory_order_seq_cst);
	*(void *volatile *)slot = p;
	atomic_signal_fence(memory_order_seq_cst);
}

static void
ms_after_fork_child(void)
{
	ms_thread()->rng = 0;
}

/* wyrand: one multiply per 64 bits; seeded per thread from getrandom. */
static MS_COLD uint64_t
ms_seed(void)
{
	uint64_t s = 0;
	int e = errno;

	if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s)) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		s = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^
		    (uint64_t)(uintptr_t)&ts ^ (uint64_t)ts.tv_sec;
	}
	errno = e;
	return s | 1; /* 0 means "not seeded" */
}

static inline uint64_t
ms_span_id(struct ms_thread *t)
{
	uint64_t x = t->rng;
	__uint128_t m;
	uint64_t v;

	if (ms_unlikely(!x))
		x = ms_seed();
	x += 0xa0761d6478bd642full;
	t->rng = x;
	m = (__uint128_t)x * (x ^ 0xe7037ed1a0b428dbull);
	v = (uint64_t)(m >> 64) ^ (uint64_t)m;
	return v ? v : 1; /* a span-id is never all zero */
}

/* ---- traceparent ---- */

static inline __m128i
ms_load(const char *p)
{
	return _mm_loadu_si128((const __m128i *)(const void *)p);
}

/* Sixteen characters: their digit values, and in *bad a byte above zero
 * where a character is not a lowercase hex digit (t = c - '0' and
 * u = c - 'a' wrapping: a digit has t <= 9, a letter u <= 5; the value is
 * min(t, u + 10)). */
static inline __m128i
ms_nibbles(__m128i x, __m128i *bad)
{
	__m128i t = _mm_sub_epi8(x, _mm_set1_epi8('0'));
	__m128i u = _mm_sub_epi8(x, _mm_set1_epi8('a'));

	*bad = _mm_min_epu8(_mm_subs_epu8(t, _mm_set1_epi8(9)),
			    _mm_subs_epu8(u, _mm_set1_epi8(5)));
	return _mm_min_epu8(t, _mm_add_epi8(u, _mm_set1_epi8(10)));
}

/* digit pairs (first digit in the low byte of a 16-bit lane) to bytes in
 * the lanes' low bytes: (lane * 0x1001) >> 8 */
static inline __m128i
ms_pairs(__m128i n)
{
	__m128i k = _mm_set1_epi16(0x1001);

	__asm__("" : "+x"(k)); /* a multiply, not a shift and an add */
	return _mm_srli_epi16(_mm_mullo_epi16(n, k), 8);
}

static inline int
ms_hexv(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* The two flag digits by table: [0][c] is c's value as the high nibble,
 * [1][c] as the low one, 0x100 if c is not a lowercase hex digit; OR the
 * two and compare once. */
#define MS_HV(c)                                     \
	((c) >= '0' && (c) <= '9'   ? (c) - '0'      \
	 : (c) >= 'a' && (c) <= 'f' ? (c) - 'a' + 10 \
				    : -1)
#define MS_FT(c, sh) (MS_HV(c) < 0 ? 0x100 : MS_HV(c) << (sh))
#define MS_FT4(c, sh) \
	MS_FT(c, sh), MS_FT((c) + 1, sh), MS_FT((c) + 2, sh), MS_FT((c) + 3, sh)
#define MS_FT16(c, sh) \
	MS_FT4(c, sh), MS_FT4((c) + 4, sh), MS_FT4((c) + 8, sh), MS_FT4((c) + 12, sh)
#define MS_FT64(c, sh)                                                \
	MS_FT16(c, sh), MS_FT16((c) + 16, sh), MS_FT16((c) + 32, sh), \
		MS_FT16((c) + 48, sh)
#define MS_FT256(sh) MS_FT64(0, sh), MS_FT64(64, sh), MS_FT64(128, sh), MS_FT64(192, sh)
static const uint16_t ms_flag_tab[2][256] = {{MS_FT256(4)}, {MS_FT256(0)}};

static inline uint16_t
ms_u16(const char *s)
{
	uint16_t v;

	memcpy(&v, s, sizeof(v));
	return v;
}

static inline uint64_t
ms_u64(const char *s)
{
	uint64_t v;

	memcpy(&v, s, sizeof(v));
	return v;
}

static inline uint32_t
ms_u32(const char *s)
{
	uint32_t v;

	memcpy(&v, s, sizeof(v));
	return v;
}

/* Exactly the W3C fields at v[0..54] after the version: the dashes, the
 * lowercase hex trace-id, parent-id and flags, ids not all zero.  Decodes
 * the trace-id into t's record (not published: the caller cleared the
 * pointer); returns the flags, or -1. */
static inline __attribute__((always_inline)) int
ms_fields(struct ms_thread *t, const char *v)
{
	__m128i b1, b2, b3, n1, n2, id;
	unsigned flags;

	if (v[2] != '-' || v[35] != '-' || v[52] != '-')
		return -1;
	n1 = ms_nibbles(ms_load(v + 3), &b1);
	n2 = ms_nibbles(ms_load(v + 19), &b2);
	(void)ms_nibbles(ms_load(v + 36), &b3);
	b1 = _mm_max_epu8(b1, _mm_max_epu8(b2, b3));
	flags = ms_flag_tab[0][(unsigned char)v[53]] |
		ms_flag_tab[1][(unsigned char)v[54]];
	if (_mm_movemask_epi8(_mm_cmpeq_epi8(b1, _mm_setzero_si128())) != 0xffff ||
	    flags > 0xff)
		return -1;
	id = _mm_packus_epi16(ms_pairs(n1), ms_pairs(n2));
	/* all-zero ids; the parent-id's digits are all '0' */
	if (_mm_movemask_epi8(_mm_cmpeq_epi8(id, _mm_setzero_si128())) == 0xffff ||
	    _mm_movemask_epi8(_mm_cmpeq_epi8(ms_load(v + 36), _mm_set1_epi8('0'))) ==
		    0xffff)
		return -1;
	_mm_storeu_si128((__m128i *)(void *)t->trace_id, id);
	return (int)flags;
}

static inline bool
ms_ows(unsigned char c)
{
	return c == ' ' || c == '\t';
}

/* Version-00 value followed by OWS: only OWS up to the line end (in
 * v[0..n-1]). */
static MS_COLD bool
ms_ows_to_eol(const char *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (v[i] == '\r' || v[i] == '\n')
			return true;
		if (!ms_ows((unsigned char)v[i]))
			return false;
	}
	return false;
}

/* A version other than 00: two lowercase hex digits but not "ff"; its
 * first 55 characters are read, followed by the end of the value or '-';
 * unknown flag bits are cleared (W3C). */
static MS_COLD int
ms_parse_other(struct ms_thread *t, const char *v, size_t n)
{
	int h = ms_hexv((unsigned char)v[0]), l = ms_hexv((unsigned char)v[1]);
	int flags;

	if ((h | l) < 0 || (h == 15 && l == 15))
		return -1;
	if (v[MS_TP_LEN] != '-' && !ms_ows_to_eol(v + MS_TP_LEN, n - MS_TP_LEN))
		return -1;
	flags = ms_fields(t, v);
	return flags < 0 ? -1 : (flags & 0x03);
}

/* The traceparent value at v, n > 55 bytes readable: the flags, or -1. */
static inline __attribute__((always_inline)) int
ms_parse(struct ms_thread *t, const char *v, size_t n)
{
	unsigned char end = (unsigned char)v[MS_TP_LEN];

	if (ms_unlikely(ms_u16(v) != ms_u16("00")))
		return ms_parse_other(t, v, n);
	if (ms_unlikely(end != '\r' && end != '\n') &&
	    !ms_ows_to_eol(v + MS_TP_LEN, n - MS_TP_LEN))
		return -1;
	return ms_fields(t, v);
}

/* ---- the request head ---- */

/* Does the line ending with the newline at p[i] (i >= 1) end in
 * " HTTP/1.x" (then CR)?  A request line. */
static inline bool
ms_request_line(const char *p, size_t i)
{
	size_t e = i - (p[i - 1] == '\r');

	return e >= 12 && p[e - 9] == ' ' &&
	       (ms_u64(p + e - 8) & 0x00ffffffffffffffull) ==
		       (ms_u64("HTTP/1.x") & 0x00ffffffffffffffull);
}

/* "traceparent:" at p (12 bytes readable), the name in any case */
static inline bool
ms_is_traceparent(const char *p)
{
	return (ms_u64(p) | 0x2020202020202020ull) == ms_u64("tracepar") &&
	       (ms_u32(p + 8) | 0x00202020u) == ms_u32("ent:");
}

/* Newlines in the 64 bytes at p, bit i for p[i]. */
static inline uint64_t
ms_nl64(const char *p)
{
	const __m128i nl = _mm_set1_epi8('\n');
	uint64_t a = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(ms_load(p), nl));
	uint64_t b = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(ms_load(p + 16), nl));
	uint64_t c = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(ms_load(p + 32), nl));
	uint64_t d = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(ms_load(p + 48), nl));

	return a | b << 16 | c << 32 | d << 48;
}

/* The n >= 16 bytes recv() read at p, where at least n + 64 bytes are
 * readable (the rest of the caller's buffer: whole 64-byte blocks are
 * scanned, and the bits past n masked off).  Only a whole head is used: a
 * request line, header lines, the empty line, and nothing after it. */
static inline __attribute__((always_inline)) void
ms_head(const char *p, size_t n)
{
	struct ms_thread *t = NULL;
	void **slot = NULL;
	int flags = -1; /* -1: no traceparent; -2: an invalid one */

	/* a method token: it starts with a letter (upper case in practice) */
	if ((unsigned char)(p[0] - 'A') > 'Z' - 'A')
		return;
	for (size_t base = 0; base < n; base += 64) {
		uint64_t m = ms_nl64(p + base);

		if (n - base < 64)
			m &= (1ull << (n - base)) - 1;
		while (m) {
			/* the line after this newline; p[s] is readable even
			 * at s == n (then it is not a complete head: no empty
			 * line can follow, whatever p[s] holds) */
			size_t s = base + (size_t)__builtin_ctzll(m) + 1;
			unsigned char c;

			m &= m - 1;
			if (ms_unlikely(!slot)) {
				/* the first line: a request line, or not a head */
				if (!ms_request_line(p, s - 1))
					return;
				t = ms_thread();
				slot = t->slot;
				if (ms_unlikely(!slot))
					slot = ms_slot_init(t);
				/* a new request: nothing published until its
				 * head is complete; then on to the line after
				 * the request line */
				ms_store_ptr(slot, NULL);
			}
			c = (unsigned char)p[s];
			if ((c | 0x20) == 't') {
				size_t v = s + MS_NAME_LEN;

				if (n - s <= MS_NAME_LEN || !ms_is_traceparent(p + s))
					continue;
				if (flags != -1) {
					flags = -2; /* a second traceparent */
					continue;
				}
				/* OWS: one space as a rule */
				v += p[v] == ' ';
				while (ms_unlikely(ms_ows((unsigned char)p[v])) &&
				       v < n)
					v++;
				flags = n - v > MS_TP_LEN ? ms_parse(t, p + v, n - v)
							  : -2;
				if (flags < 0)
					flags = -2;
			} else if (c <= '\r') {
				/* the empty line (no field name starts with a
				 * control character): the head must end the read */
				if (c == '\r' ? s + 2 != n || p[s + 1] != '\n'
					      : c != '\n' || s + 1 != n)
					return;
				if (flags >= 0) {
					uint64_t id = ms_span_id(t);

					memcpy(t->span_id, &id, sizeof(id));
					t->valid_flags_size = 1u | (unsigned)flags << 8;
					ms_store_ptr(slot, t->trace_id);
				}
				return;
			}
		}
	}
}

static void ms_short_head(const char *p, size_t n);

/* A read into a buffer with less than 64 bytes to spare: the same on a
 * copy (heads up to 4 KiB; a longer one publishes nothing, but still
 * ends the previous request's context). */
static MS_COLD void
ms_head_copy(const char *p, size_t n)
{
	char copy[4096 + 64];

	if (n > sizeof(copy) - 64) {
		ms_short_head(p, n);
		return;
	}
	memcpy(copy, p, n);
	ms_head(copy, n);
}

/* A read that starts a head but is not scanned: shorter than 16 bytes
 * (e.g. "GET / HTTP/1.0\n\n" minus a byte: too short for a traceparent) or
 * too long for ms_head_copy().  A new request all the same: no context. */
static MS_COLD void
ms_short_head(const char *p, size_t n)
{
	const char *nl = memchr(p, '\n', n);
	struct ms_thread *t;

	if ((unsigned char)(p[0] - 'A') > 'Z' - 'A' || !nl || nl == p ||
	    !ms_request_line(p, (size_t)(nl - p)))
		return;
	t = ms_thread();
	if (t->slot)
		ms_store_ptr(t->slot, NULL);
}

/* ---- the hooks ---- */

MS_EXPORT ssize_t
recv(int fd, void *buf, size_t len, int flags)
{
	ssize_t n = ms_real_recv(fd, buf, len, flags);

	if (ms_likely(n >= 16) && ms_likely(!(flags & MSG_PEEK))) {
		if (ms_likely(len - (size_t)n >= 64))
			ms_head(buf, (size_t)n);
		else
			ms_head_copy(buf, (size_t)n);
	} else if (n > 0 && !(flags & MSG_PEEK)) {
		ms_short_head(buf, (size_t)n);
	}
	return n;
}

MS_EXPORT int
epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
	void **slot = ms_thread()->slot;

	/* the event loop is idle: no request is being served */
	if (slot)
		ms_store_ptr(slot, NULL);
	return ms_real_epoll_wait(epfd, ev, max, timeout);
}
