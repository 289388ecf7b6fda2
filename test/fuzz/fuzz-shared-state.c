/* SPDX-License-Identifier: Apache-2.0 */
/* The three stream scanners (HTTP/1, FastCGI, HTTP/2: the mode's low two
 * bits 0, 1, 2) with their state changed between reads, as a second thread reading the same socket, or
 * the pool entry's next owner, changes it (preload/conn.c, "Two
 * readers"): every field may hold any value at any feed, and the scanner
 * must still stay within its state, its capture and the bytes it is fed,
 * and each feed must end.  Input: [mode][script length][script][stream].
 * The stream is the connection's bytes (the seeds are real requests, so
 * that the scanners get deep into heads, records and header blocks before
 * their state is changed; mutated, it reaches what a fixed stream cannot).
 * The script is a list of steps: [read size, 0: the rest][pokes], pokes
 * = [count & 3] x ([field][kind][index, if an array][value]), the kind
 * (top 2 bits) saying small (its low 6 bits), all ones less those, a u16
 * or 8 raw bytes to follow; once the script runs out, the rest of the
 * stream is one read; with the mode's bit 4, an HTTP/2 feed also reads a
 * script byte at each report it hands over (h2_scan_feed_cb()), whose low
 * bit pokes the state there, in the middle of the feed (a bit of its own,
 * so that the inputs of test/fuzz/regress/ made before it still mean
 * what they meant).  Each read goes through the loop
 * preload/conn.c runs for it, with its bound where it has one: a scanner
 * that asks to be called again without taking a byte more often than
 * that is a read() that never returns, which aborts here (no alarm(): the
 * unit suite's replay has no libFuzzer -timeout).  What the socket level
 * makes of each result is made of it here too: an HTTP head's capture
 * becomes a context through ctxshim_request_ctx_capture() (and, with the
 * mode's bit, each read is first offered to ctxshim_request_ctx_whole()),
 * a FastCGI request's parameters one through the CGI model (which reads
 * its values with strlen()), an HTTP/2 field's value is read to its
 * length and collected into the request entry of hooks/hook-h2.h (a pool
 * entry too: the script writes its fields as well), whose request becomes
 * a context at the block's end; each context's record must decode.
 * The low bits 3 (HTTP/1 before, as 0: its seeds were rewritten to 0) are
 * the server's side of an HTTP/2 connection, as a second thread writing
 * it changes it: the stream is what the server wrote, each step one
 * write (out_write(), which reads more script bytes: how, in which
 * iovecs, and pokes in the middle of the write) walked by
 * preload/conn.c's frame walk (struct h2_out, proc-context/h2-scan.h);
 * the connection is followed as conn.c follows it
 * (ctxshim_conn_h2_start(), or with the mode's bit 3
 * ctxshim_conn_h2_upgrade() on its first write, a 101 and frames), its
 * current request of stream 1 with the mode's bit 2, else none.
 * preload/request-ctx.c, request-cgi.c and conn.c are compiled in
 * (fuzz-request.c does the first). */
#include "fuzz.h"

#include <stddef.h>
#include <string.h>

#include "fcgi-scan.h"
#include "h2-scan.h"
#include "hook-h2.h"
#include "http-scan.h"
#include "request-cgi.c"
#include "request-ctx.c"
#include "conn.c"

#include "../test-request-stubs.h"

/* What conn.c needs besides the request model: inactive (its constructor
 * maps no table), no publication buffer, no log or event fd. */
enum ctxshim_mode ctxshim_mode = CTXSHIM_OFF;
int ctxshim_events_fd = -1;
int ctxshim_log_fd = -1;

void
ctxshim_log(const char *fmt, ...)
{
	(void)fmt;
}

struct ctxshim_ctx *
ctxshim_build_begin(void)
{
	return NULL;
}

void
ctxshim_build_cancel(void)
{
}

/* A result that takes no byte and asks for another call, in a row: more
 * than this and the read loop would go on for ever.  conn.c bounds its
 * HTTP/2 loop so (ctxshim_conn_h2_feed()); its HTTP/1 and FastCGI loops
 * call again after a head or a request's parameters whatever was taken,
 * and the scanners take a byte at least for either (the head's LF, the
 * empty FCGI_PARAMS record's header), so a few is already wrong. */
#define H1_IDLE_MAX   4
#define FCGI_IDLE_MAX 4
#define H2_IDLE_MAX   (2 * H2_SCAN_KEEP_MAX + 4)

struct field {
	uint8_t where; /* W_STATE or W_CAP */
	uint16_t off;
	uint16_t size; /* of one element */
	uint16_t count;
};
/* W_ENTRY, W_CONN: mode 3's pool entry and connection */
enum { W_STATE, W_CAP, W_REQ, W_ENTRY, W_CONN };

/* clang-format off */
#define F(where, type, f) \
	{where, offsetof(type, f), sizeof(((type *)0)->f), 1}
#define A(where, type, f) \
	{where, offsetof(type, f), sizeof(((type *)0)->f[0]), \
	 sizeof(((type *)0)->f) / sizeof(((type *)0)->f[0])}
/* Any byte of the struct (a torn store, another state over it). */
#define RAW(where, type) {where, 0, 1, sizeof(type)}

#define HS(f)  F(W_STATE, struct http_scan, f)
#define HC(f)  F(W_CAP, struct http_scan_capture, f)
#define HCA(f) A(W_CAP, struct http_scan_capture, f)
static const struct field http_fields[] = {
	HS(n), HS(head_bytes), HS(flags), HS(match), HS(phase), HS(pos), HS(field),
	HS(sub), HC(cur_seen), HC(cur_last), HC(cur_start), HC(target_len),
	HC(tracestate_len), HC(method_len), HC(traceparent_len),
	HC(tracestate_truncated), HC(extra_present),
	HC(extra_truncated), HC(extra_bad), HC(ts_checking), HCA(extra_len),
	HC(ts_check.len), HC(ts_check.ows), HC(ts_check.state), HC(ts_check.n),
	HC(ts_check.pend), HC(ts_trunc.len), HC(ts_trunc.mlen), HC(ts_trunc.mlast),
	HC(ts_trunc.n), HC(ts_trunc.state), HC(ts_trunc.dropped),
	HC(ts_trunc.long_cut), HCA(ts_trunc.start), HCA(ts_trunc.size),
	RAW(W_STATE, struct http_scan), RAW(W_CAP, struct http_scan_capture),
};

#define FS(f)  F(W_STATE, struct fcgi_scan, f)
#define FSA(f) A(W_STATE, struct fcgi_scan, f)
static const struct field fcgi_fields[] = {
	FS(left), FS(nv_len), FS(nv_pos), FS(nlen), FS(match), FS(req_id),
	FS(arena_used), FS(present), FSA(val_off), FSA(val_len), FSA(hdr),
	FS(hdr_pos), FS(phase), FS(pad), FS(ours), FS(last), FS(req_phase),
	FS(nv_phase), FS(lbuf_pos), FSA(lbuf), FS(keep), FS(why),
	RAW(W_STATE, struct fcgi_scan),
};

#define H2(f)  F(W_STATE, struct h2_scan, f)
#define H2A(f) A(W_STATE, struct h2_scan, f)
#define HQ(f)  F(W_REQ, struct hook_h2_req, f)
#define HQA(f) A(W_REQ, struct hook_h2_req, f)
static const struct field h2_fields[] = {
	H2(left), H2(block_id), H2(max_id), H2(t_size), H2(t_max), H2(int_val),
	H2(str_left), H2(dec_len), H2(f_nlen), H2(h_acc), H2(a_tail), H2(a_used),
	H2(rep_len), H2(rep_k), H2(rep_flags), H2(rep_static), H2A(hdr),
	H2(hdr_pos), H2(phase), H2(pre), H2(frame_flags), H2(pad), H2(prio_left),
	H2(in_block), H2(report), H2(field_seen), H2(hp), H2(kind), H2(int_what),
	H2(int_shift), H2(str_value), H2(str_huff), H2(h_bits), H2(f_k), H2(e_head),
	H2(e_count), H2(why), H2(e_named), H2A(e_nlen), H2A(e_vlen), H2A(e_off), H2A(e_k),
	RAW(W_STATE, struct h2_scan),
	/* the request entry conn_h2_field() collects the fields in */
	HQ(path_len), HQ(ts_len), HQA(extra_len), HQ(method_len), HQ(tp_len),
	HQ(n_tp), HQ(extra_seen), HQ(has_method), HQ(has_path), HQ(has_ts),
	HQ(method_cut), HQ(ts_checking), HQ(ts_bad), HQ(ts_check.len),
	HQ(ts_check.state), HQ(ts_check.n), HQ(ts_trunc.len), HQ(ts_trunc.mlen),
	HQ(ts_trunc.n), HQ(ts_trunc.state), HQA(ts_trunc.start),
	HQA(ts_trunc.size), RAW(W_REQ, struct hook_h2_req),
};

#define HO(f) F(W_STATE, struct h2_out, f)
static const struct field out_fields[] = {
	HO(left), HO(len), HO(sid), HO(pos), HO(type), HO(lost), HO(pad_),
	RAW(W_STATE, struct h2_out),
	/* the current request's stream (conn_h2_out()), the entry that
	 * holds the walk (any value: conn_h2_out() bounds it), the request
	 * and its answer (conn_h2_answer()) */
	F(W_ENTRY, struct conn_pool_entry, hold), F(W_CONN, struct ctxshim_conn, cap),
	F(W_CONN, struct ctxshim_conn, seq), F(W_CONN, struct ctxshim_conn, answered),
};
/* clang-format on */

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* The extra headers: two usual ones, or as many as the scanner takes (its
 * split-name candidates then fill 12 of their 16 bits). */
static const char *const extras[HTTP_SCAN_EXTRA_MAX] = {
	"x-request-id",    "trace",
	"x-b3-traceid",    "baggage",
	"x-amzn-trace-id", "x-correlation-id",
	"user-agent",      "x",
};

static struct http_scan_config http_cfg[2];
static struct fcgi_scan_config fcgi_cfg;
static struct h2_scan_config h2_cfg;
static int extra_index[2][CTXSHIM_MAX_HEADER_ATTRS];

static struct http_scan hst;
static struct http_scan_capture cap;
static struct fcgi_scan fst;
static struct h2_scan h2st;
static struct hook_h2_req h2q;
static bool h2q_lost;
static int h2_k_tp, h2_k_ts;
/* What each configured name makes of its fields, worked out once
 * (conn.c's conn_h2_kind[]). */
static struct hook_h2_kind h2_kind[H2_SCAN_KEEP_MAX];
static struct ctxshim_ctx ctx;
/* Mode 3: the connection, its pool entry + 1 (0: not followed yet), the
 * request's stream, and the same walk of the same bytes in a state that
 * only the harness writes.  poked: a poke changed the state (poke()):
 * from there the two walks may differ. */
static struct ctxshim_conn out_c;
static unsigned out_idx;
static uint32_t out_stream;
static struct h2_out out_ref;
static bool poked;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const struct {
		const char *name;
		size_t max;
	} cgi_vars[] = {
		{"REQUEST_METHOD", HTTP_SCAN_METHOD_MAX},
		{"REQUEST_URI", HTTP_SCAN_TARGET_MAX},
		{"SCRIPT_NAME", HTTP_SCAN_TARGET_MAX},
		{"PATH_INFO", HTTP_SCAN_TARGET_MAX},
		{"QUERY_STRING", HTTP_SCAN_TARGET_MAX},
		{"HTTP_TRACEPARENT", HTTP_SCAN_TRACEPARENT_MAX},
		{"HTTP_TRACESTATE", HTTP_SCAN_TRACESTATE_MAX},
		{"HTTP_X_REQUEST_ID", HTTP_SCAN_VALUE_MAX},
		{"HTTP_TRACE", HTTP_SCAN_VALUE_MAX},
	};
	static const char *const h2_names[] = {":method",      ":path",
					       "traceparent",  "tracestate",
					       "x-request-id", "trace"};
	unsigned i, j, k;

	(void)argc, (void)argv;
	/* conn.c's configurations (conn_scan_config() and the like) */
	ctxshim_cfg.new_traces = true;
	ctxshim_cfg.n_header_attrs = 2;
	strcpy(ctxshim_cfg.header_attrs[0], extras[0]);
	strcpy(ctxshim_cfg.header_attrs[1], extras[1]);
	for (j = 0; j < 2; j++) {
		http_scan_config_init(&http_cfg[j]);
		for (i = 0; i < CTXSHIM_MAX_HEADER_ATTRS; i++)
			extra_index[j][i] = -1;
		for (i = 0; i < (j ? HTTP_SCAN_EXTRA_MAX : 2u); i++) {
			FUZZ_CHECK(http_scan_config_add_header(&http_cfg[j], extras[i],
							       strlen(extras[i]),
							       &k) == 0);
			if (i < CTXSHIM_MAX_HEADER_ATTRS)
				extra_index[j][i] = (int)k;
		}
	}
	for (i = 0; i < N(cgi_vars); i++)
		FUZZ_CHECK(fcgi_scan_config_add(&fcgi_cfg, cgi_vars[i].name,
						cgi_vars[i].max) >= 0);
	/* REQUEST_URI is cut, as conn_fcgi_config() has it */
	FUZZ_CHECK(fcgi_scan_config_cut(&fcgi_cfg, 1) == 0);
	for (i = 0; i < N(h2_names); i++)
		FUZZ_CHECK(h2_scan_config_add(&h2_cfg, h2_names[i]) == (int)i);
	h2_k_tp = 2;
	h2_k_ts = 3;
	for (i = 0; i < h2_cfg.n && i < H2_SCAN_KEEP_MAX; i++)
		h2_kind[i] = hook_h2_field_kind((const char(*)[CTXSHIM_HEADER_NAME_MAX])
							ctxshim_cfg.header_attrs,
						ctxshim_cfg.n_header_attrs,
						(const uint8_t *)h2_cfg.name[i],
						h2_cfg.name_len[i]);
	return 0;
}

/* A context as a reader takes it: its record decodes whole. */
static void
check_ctx(const struct ctxshim_ctx *c)
{
	static struct trec_attrs_decoded d;
	unsigned i;

	FUZZ_CHECK(c->attrs_len <= TREC_ATTRS_MAX);
	FUZZ_CHECK(c->tracestate_len <= sizeof(c->tracestate));
	FUZZ_CHECK(trec_attrs_decode(c->attrs, c->attrs_len, 255, &d) == 0);
	FUZZ_CHECK(!d.truncated && d.n_duplicates == 0);
	for (i = 0; i < d.n; i++)
		FUZZ_CHECK(trec_utf8_valid(d.attr[i].val, d.attr[i].len));
}

/* Write one poke's value: the input says which field and what. */
static void
poke(struct fuzz_in *sc, const struct field *fields, size_t n_fields, uint8_t *base[5])
{
	const struct field *f = &fields[fuzz_byte(sc) % n_fields];
	unsigned v = fuzz_byte(sc), i = 0;
	uint64_t x;
	uint8_t *p;

	if (f->count > 256)
		i = (fuzz_byte(sc) | fuzz_byte(sc) << 8) % f->count;
	else if (f->count > 1)
		i = fuzz_byte(sc) % f->count;
	p = base[f->where] + f->off + (size_t)i * f->size;
	switch (v >> 6) {
	case 0:
		x = v & 63;
		break;
	case 1:
		x = ~(uint64_t)0 - (v & 63);
		break;
	case 2:
		x = fuzz_byte(sc) | fuzz_byte(sc) << 8;
		break;
	default:
		x = fuzz_u64(sc);
		break;
	}
	/* little endian: the low bytes */
	memcpy(p, &x, f->size < sizeof(x) ? f->size : sizeof(x));
	poked = true;
}

/* ctxshim_conn_feed(): the usual read whole, else the scanner's loop
 * (ctxshim_conn_feed_loop()), a context built for each captured head. */
static void
http_read(unsigned mode, const uint8_t *p, size_t len)
{
	const struct http_scan_config *cfg = &http_cfg[(mode >> 3) & 1];
	const int *index = extra_index[(mode >> 3) & 1];
	unsigned idle = 0;
	size_t off = 0;

	if ((mode & 4) && ctx_whole(&ctx, &hst, cfg, p, len, index) == 0) {
		check_ctx(&ctx);
		return;
	}
	while (off < len && !http_scan_gave_up(&hst)) {
		enum http_scan_status r;
		unsigned flags;
		size_t n = (size_t)-1;

		r = http_scan_feed(&hst, cfg, &cap, p + off, len - off, &n);
		FUZZ_CHECK(n <= len - off);
		FUZZ_CHECK(r == HTTP_SCAN_MORE || r == HTTP_SCAN_HEAD ||
			   r == HTTP_SCAN_GAVE_UP);
		off += n;
		if (r == HTTP_SCAN_MORE && http_scan_in_head(&hst))
			break;
		if (r == HTTP_SCAN_HEAD) {
			flags = http_scan_flags(&hst);
			/* conn_captured() */
			if ((flags & (HTTP_SCAN_F_CAPTURED | HTTP_SCAN_F_OVERSIZED |
				      HTTP_SCAN_F_CAPTURE_LOST)) ==
			    HTTP_SCAN_F_CAPTURED) {
				ctxshim_request_ctx_capture(&ctx, &cap, flags, index);
				check_ctx(&ctx);
			}
			if (n == 0 && ++idle > H1_IDLE_MAX)
				fuzz_fail(__FILE__, __LINE__,
					  "http_scan_feed() reports heads without "
					  "taking a byte: conn.c's read loop spins");
			if (n)
				idle = 0;
		}
		if (r == HTTP_SCAN_GAVE_UP || (r != HTTP_SCAN_HEAD && n == 0))
			break;
	}
}

static const char *
fcgi_lookup(const char *name, void *st)
{
	return fcgi_scan_get(st, &fcgi_cfg, name);
}

/* ctxshim_conn_fcgi_feed(); each value read as the CGI model reads it,
 * to its NUL (strlen()), and to its length. */
static void
fcgi_read(const uint8_t *p, size_t len)
{
	unsigned idle = 0, k;
	size_t off = 0;

	while (off < len) {
		enum fcgi_scan_status r;
		size_t n = (size_t)-1;

		r = fcgi_scan_feed(&fst, &fcgi_cfg, p + off, len - off, &n);
		FUZZ_CHECK(n <= len - off);
		off += n;
		if (r != FCGI_SCAN_PARAMS_END)
			break;
		for (k = 0; k <= FCGI_SCAN_KEEP_MAX; k++) {
			size_t vl = 0, i;
			const char *v = fcgi_scan_value(&fst, k, &vl);
			volatile char sum = 0;

			if (!v)
				continue;
			for (i = 0; i < vl; i++)
				sum ^= v[i];
			(void)strlen(v);
		}
		ctxshim_request_ctx_cgi(&ctx, fcgi_lookup, &fst);
		check_ctx(&ctx);
		if (n == 0 && ++idle > FCGI_IDLE_MAX)
			fuzz_fail(__FILE__, __LINE__,
				  "fcgi_scan_feed() ends parameters without taking "
				  "a byte: conn.c's read loop spins");
		if (n)
			idle = 0;
	}
}

/* conn_h2_field(): the field into the request's entry. */
static void
h2_field(const struct h2_scan_field *f)
{
	unsigned k = f->k;

	if ((int)k == h2_k_tp && (f->flags & H2_SCAN_F_UNKNOWN))
		h2q_lost = true;
	if (h2q_lost || k >= h2_cfg.n || k >= H2_SCAN_KEEP_MAX)
		return;
	if ((int)k == h2_k_ts && (f->flags & (H2_SCAN_F_CUT | H2_SCAN_F_UNKNOWN))) {
		h2q.has_ts = true;
		h2q.ts_bad = true;
		return;
	}
	if ((f->flags & H2_SCAN_F_UNKNOWN) || (!f->value && f->len))
		return;
	hook_h2_req_field(&h2q, h2_kind[k], f->value, f->len);
}

/* Another thread's changes to the state in the middle of a feed: pokes
 * from the script (h2_report()). */
struct h2_pokes {
	struct fuzz_in *sc;
	const struct field *fields;
	size_t n;
	uint8_t **base;
};

/* conn_h2_report(): each reported field's value read, and collected as
 * conn_h2_field() does; each request's context built as conn_h2_build()
 * does.  A script byte may change the state first. */
static bool
h2_report(void *arg, const struct h2_scan *s, enum h2_scan_status r, size_t at)
{
	struct h2_pokes *pk = arg;

	(void)at;
	if (r == H2_SCAN_FIELD) {
		struct h2_scan_field f;
		volatile uint8_t sum = 0;
		size_t i;

		h2_scan_field(s, &f);
		/* (its name may be anything after a change: conn_h2_field()
		 * bounds it) */
		FUZZ_CHECK(f.len <= H2_SCAN_VALUE_MAX);
		FUZZ_CHECK(f.len == 0 || f.value);
		for (i = 0; i < f.len; i++)
			sum ^= f.value[i];
		h2_field(&f);
	} else {
		struct hook_h2_view v;

		FUZZ_CHECK(r == H2_SCAN_REQUEST);
		(void)h2_scan_stream(s);
		if (!h2q_lost) {
			hook_h2_req_view(&h2q, &v);
			ctxshim_request_ctx(&ctx, &v.r);
			check_ctx(&ctx);
		}
		hook_h2_req_init(&h2q);
		h2q_lost = false;
	}
	if (pk && pk->sc->left && (fuzz_byte(pk->sc) & 1))
		poke(pk->sc, pk->fields, pk->n, pk->base);
	return true;
}

/* ctxshim_conn_h2_feed()'s loop: one feed per read, its reports taken
 * by h2_report(), a report returned taken the same way; pk, if not NULL,
 * the script that pokes the state at each report. */
static void
h2_read(const uint8_t *p, size_t len, struct h2_pokes *pk)
{
	unsigned idle = 0;
	size_t off = 0;

	for (;;) {
		enum h2_scan_status r;
		size_t n = (size_t)-1;

		if (idle >= H2_IDLE_MAX)
			fuzz_fail(__FILE__, __LINE__,
				  "h2_scan_feed_cb() asks to be called again without "
				  "taking a byte past conn.c's bound");
		r = h2_scan_feed_cb(&h2st, &h2_cfg, p + off, len - off, &n, h2_report,
				    pk);
		FUZZ_CHECK(n <= len - off);
		off += n;
		idle = n ? 0 : idle + 1;
		if (r == H2_SCAN_FIELD || r == H2_SCAN_REQUEST)
			(void)h2_report(NULL, &h2st, r, off);
		else if (r == H2_SCAN_GAVE_UP || off >= len)
			break;
	}
}

/* Mode 3: a script byte may change the state there, in the middle of a
 * write's walk (between the calls conn.c makes for it). */
static void
out_poke(struct h2_pokes *pk)
{
	if (pk->sc->left && (fuzz_byte(pk->sc) & 1))
		poke(pk->sc, pk->fields, pk->n, pk->base);
}

/* ctxshim_conn_h2_written()'s walk of the iovecs without a call, then
 * conn_h2_walk()'s, from the harness: a poke may come between any two
 * iovecs.  The write's hit (1, -1 or 0), as conn_h2_answer() takes it. */
static int
out_walk(struct h2_pokes *pk,
	 const struct iovec *iov,
	 size_t n,
	 size_t written,
	 bool inline_first)
{
	uint32_t stream = 0;
	struct h2_out *o = conn_h2_out(&out_c, &stream);
	size_t i = 0, k;
	int hit = 0, r;

	if (!o)
		return 0;
	for (; inline_first && i < n && written; i++) {
		k = iov[i].iov_len < written ? iov[i].iov_len : written;
		if (o->lost)
			break;
		if (k <= o->left)
			o->left -= (uint32_t)k;
		else if (k == 9 && !o->left && !o->pos)
			hit |= h2_out_header(o, iov[i].iov_base, stream);
		else
			break;
		written -= k;
		out_poke(pk);
	}
	for (; i < n && written; i++) {
		k = iov[i].iov_len < written ? iov[i].iov_len : written;
		r = h2_out_feed(o, iov[i].iov_base, k, stream);
		FUZZ_CHECK(r >= -1 && r <= 1);
		hit |= r;
		written -= k;
		out_poke(pk);
	}
	if (written && (r = h2_out_skip(o, written)) != 0) {
		FUZZ_CHECK(r == -1);
		hit |= r;
	}
	return hit;
}

/* conn_h2_written()'s walk of a write from one buffer: its whole frames
 * (h2_out_frames()), then the rest byte by byte (h2_out_feed()), a poke
 * possible in between. */
static int
out_frames(struct h2_pokes *pk, const uint8_t *p, size_t len, size_t written)
{
	uint32_t stream = 0;
	struct h2_out *o = conn_h2_out(&out_c, &stream);
	size_t walked = 0;
	int hit = 0, r;

	if (!o)
		return 0;
	if (!o->lost) {
		walked = h2_out_frames(o, p, len, stream, &hit);
		FUZZ_CHECK(walked <= len);
		FUZZ_CHECK(hit == 0 || hit == 1);
		out_poke(pk);
	}
	if (walked < len) {
		r = h2_out_feed(o, p + walked, len - walked, stream);
		FUZZ_CHECK(r >= -1 && r <= 1);
		hit |= r;
	}
	if (written > len && (r = h2_out_skip(o, written - len)) != 0)
		hit |= r;
	return hit;
}

/* The client's preface read: the HTTP scanner gives up on it (reason
 * "http2"), and the connection is followed as HTTP/2 (conn.c's read
 * path). */
static bool
out_start(void)
{
	http_scan_stop_http2(&out_c.scan);
	return ctxshim_conn_h2_start(&out_c, H2_SCAN_PREFACE_LEN) == CONN_START_OK;
}

/* Mode 3's pokes go to the connection's entry once it has one (its
 * stream set as conn_h2_request() sets it, for a connection not
 * upgraded); before that, nowhere. */
static void
out_setup(uint8_t *base[5], bool started)
{
	static struct conn_pool_entry none;
	struct conn_pool_entry *e = started ? &conn_pool[out_c.cap - 1] : &none;

	if (started && !e->h2_up)
		e->hold = out_stream;
	base[W_STATE] = (uint8_t *)&e->u.h2.out;
	base[W_ENTRY] = (uint8_t *)e;
	base[W_CONN] = (uint8_t *)&out_c;
}

/* One write of the server's (mode 3) of the next len bytes p: script
 * bytes say which entry point takes it, its iovecs and what the write
 * returned.  Each iovec is a buffer of its own (ASan sees a read past
 * its end, not the next one's bytes).  The entry points are conn.c's
 * (ctxshim_conn_h2_written(): the write hooks' direct path;
 * ctxshim_conn_responded_iov() with iovecs, one buffer, or bytes of
 * unknown content: sendfile), or the h2_out_* calls they make, made
 * here with pokes between them.  Unpoked, every path answers the write
 * exactly when the harness's own walk of the same bytes (out_ref) finds
 * a frame of the request's (the property test-conn-h2out.c checks on
 * well-formed frames).  Returns the bytes of p written (1 at least). */
static size_t
out_write(struct h2_pokes *pk, const uint8_t *p, size_t len)
{
	struct fuzz_in *sc = pk->sc;
	unsigned op = fuzz_byte(sc), path = op & 7, i;
	/* one buffer: 2 and 5; no content known: 3 and 7 */
	size_t n = (path == 2 || path == 3 || path == 5 || path == 7)
			   ? 1
			   : 1 + ((op >> 3) & 7);
	struct iovec iov[8];
	size_t rest = len, written = len, took, x;
	bool unknown = path == 3 || path == 7, answered = false;
	int want, hit = 0;

	for (i = 0; i < n; i++) {
		size_t l = i + 1 < n ? fuzz_byte(sc) % (rest + 1) : rest;
		/* an empty one at an odd index with a NULL base */
		uint8_t *b = (l || !(i & 1)) ? malloc(l) : NULL;

		FUZZ_CHECK(b || !l);
		if (l)
			memcpy(b, p + (len - rest), l);
		iov[i].iov_base = b;
		iov[i].iov_len = l;
		rest -= l;
	}
	/* what the write returned: all, less (the kernel took part: a byte
	 * at least, the hooks walk no write that wrote nothing), or more
	 * than the iovecs (bytes the walk cannot know) */
	if (op & 64) {
		x = fuzz_byte(sc);
		written = (op & 128) ? len + x : len - x % len;
	}
	took = unknown || written > len ? len : written;

	/* the first write of an upgraded connection: the 101, then frames;
	 * its bytes are always known (the upgrade takes the head buffer),
	 * also on the paths of unknown content */
	if (!out_idx) {
		bool started;
		size_t head = iov[0].iov_len < written ? iov[0].iov_len : written;
		size_t k = http_response_h2c_head(iov[0].iov_base, head);

		unknown = false;
		took = written > len ? len : written;

		want = 0;
		if (ctxshim_conn_h2_upgrade(&out_c, iov[0].iov_base, iov[0].iov_len,
					    written, n > 1 ? iov : NULL,
					    n > 1 ? n : 0) == CONN_START_OK) {
			answered = ctxshim_conn_answered(&out_c);
			FUZZ_CHECK(k > 0);
			if (k < took)
				want = h2_out_feed(&out_ref, p + k, took - k,
						   out_stream);
			if (written > took)
				want |= h2_out_skip(&out_ref, written - took);
			started = true;
		} else {
			/* not a 101 h2c: written before the connection was
			 * followed as HTTP/2 (a poke to c->cap: never) */
			started = out_start();
			FUZZ_CHECK(started || poked);
		}
		/* (CONN_POOL_N + 1: tried, nothing to release) */
		out_idx = started ? out_c.cap : CONN_POOL_N + 1;
		out_setup(pk->base, started);
		goto done;
	}

	if (unknown)
		want = h2_out_skip(&out_ref, written);
	else {
		want = h2_out_feed(&out_ref, p, took, out_stream);
		if (written > took)
			want |= h2_out_skip(&out_ref, written - took);
	}
	switch (path) {
	case 0:
		FUZZ_CHECK(ctxshim_conn_h2_written(&out_c, iov, n, written) || poked);
		break;
	case 1:
		FUZZ_CHECK(
			!ctxshim_conn_responded_iov(&out_c, NULL, 0, written, iov, n) ||
			poked);
		break;
	case 2:
		FUZZ_CHECK(!ctxshim_conn_responded_iov(&out_c, iov[0].iov_base, len,
						       written, NULL, 0) ||
			   poked);
		break;
	case 3:
		FUZZ_CHECK(!ctxshim_conn_responded_iov(&out_c, NULL, 0, written, NULL,
						       0) ||
			   poked);
		break;
	case 4:
		hit = out_walk(pk, iov, n, written, false);
		break;
	case 5:
		hit = out_frames(pk, iov[0].iov_base, took, written);
		break;
	case 6:
		hit = out_walk(pk, iov, n, written, true);
		break;
	default: {
		uint32_t stream;
		struct h2_out *o = conn_h2_out(&out_c, &stream);

		hit = o ? h2_out_skip(o, written) : 0;
		FUZZ_CHECK(hit == 0 || hit == -1);
		break;
	}
	}
	answered = path < 4 ? ctxshim_conn_answered(&out_c) : hit != 0;
done:
	FUZZ_CHECK(poked || answered == (want != 0));
	/* unanswered again, so that every write is checked */
	atomic_store(&out_c.answered, (uint8_t)((atomic_load(&out_c.seq) >> 1) - 1));
	for (i = 0; i < n; i++)
		free(iov[i].iov_base);
	return unknown ? len : took;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = {data, size}, sc;
	unsigned mode = fuzz_byte(&in), kind = mode & 3;
	size_t slen = fuzz_byte(&in), off = 0;
	const struct field *fields;
	size_t n_fields;
	uint8_t *base[5] = {NULL, (uint8_t *)&cap, (uint8_t *)&h2q, NULL, NULL};
	struct h2_pokes pk = {&sc, NULL, 0, base};
	unsigned i;

	if (slen > in.left)
		slen = in.left;
	sc.p = in.p;
	sc.left = slen;
	in.p += slen;
	in.left -= slen;

	memset(&cap, 0, sizeof(cap));
	if (kind == 1) {
		fcgi_scan_reset(&fst);
		base[W_STATE] = (uint8_t *)&fst;
		fields = fcgi_fields;
		n_fields = N(fcgi_fields);
	} else if (kind == 2) {
		/* the stream with the client's preface, or past it (as
     * conn.c starts one whose preface the HTTP scanner saw) */
		h2_scan_reset(&h2st, (mode & 8) ? H2_SCAN_PREFACE_LEN : 0);
		hook_h2_req_init(&h2q);
		h2q_lost = false;
		base[W_STATE] = (uint8_t *)&h2st;
		fields = h2_fields;
		n_fields = N(h2_fields);
	} else if (kind == 3) {
		/* every entry's walk and stream (a poked c->cap walks
		 * another), the connection with a request of stream 1 or
		 * none, followed now or at its first write (the upgrade) */
		for (i = 0; i < CONN_POOL_N; i++) {
			h2_out_reset(&conn_pool[i].u.h2.out);
			conn_pool[i].hold = 0;
		}
		memset(&out_c, 0, sizeof(out_c));
		atomic_store(&out_c.flags, CONN_F_TRACKED | CONN_F_REQ |
						   ((mode & 4) ? CONN_F_HAS_CTX : 0));
		atomic_store(&out_c.seq, 2);
		out_stream = (mode & 4) ? 1 : 0;
		h2_out_reset(&out_ref);
		poked = false;
		out_idx = 0;
		out_setup(base, false);
		if (!(mode & 8)) {
			FUZZ_CHECK(out_start());
			out_idx = out_c.cap;
			out_setup(base, true);
		}
		fields = out_fields;
		n_fields = N(out_fields);
	} else {
		http_scan_reset(&hst);
		base[W_STATE] = (uint8_t *)&hst;
		fields = http_fields;
		n_fields = N(http_fields);
	}
	pk.fields = fields;
	pk.n = n_fields;
	while (off < in.left) {
		size_t piece = in.left - off;
		unsigned pokes;

		if (sc.left) {
			size_t want = fuzz_byte(&sc);

			if (want && want < piece)
				piece = want;
			pokes = fuzz_byte(&sc) & 3;
			for (i = 0; i < pokes; i++)
				poke(&sc, fields, n_fields, base);
		}
		if (kind == 1)
			fcgi_read(in.p + off, piece);
		else if (kind == 2)
			h2_read(in.p + off, piece, (mode & 16) ? &pk : NULL);
		else if (kind == 3)
			piece = out_write(&pk, in.p + off, piece);
		else
			http_read(mode, in.p + off, piece);
		off += piece;
	}
	if (kind == 3)
		conn_pool_release(out_idx);
	return 0;
}
