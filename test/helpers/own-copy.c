/* SPDX-License-Identifier: Apache-2.0 */
/* libown-copy.so: a plugin with its own copy of hooked libraries'
 * functions (as CPAN's FCGI.so carries libfcgi's code, or a Python
 * wheel's libcurl a libnghttp2 of its own: libfcgi's, libnghttp2's,
 * libmicrohttpd's, libevent's, GLib's and libuv's), which it calls through its
 * PLT, so that the preloaded shim's exported names catch them
 * (test-preload-plugins.c).  Each stand-in records that it ran.
 * own_copy_main() prints what each call returned and which of the copy's
 * functions ran: the same with the shim as without it. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>

/* The head of libfcgi's FCGX_Request, which the shim reads. */
struct fcgx_request {
	int requestId;
	int role;
	void *in, *out, *err;
	char **envp;
	void *paramsPtr;
	int ipcFd;
};

int FCGX_Accept_r(struct fcgx_request *req);
void FCGX_Finish_r(struct fcgx_request *req);
void FCGX_Free(struct fcgx_request *req, int close);
int own_copy_main(void);

/* libnghttp2's, with opaque types (the shim never looks into them when
 * the call is the copy's). */
typedef struct own_nh nghttp2_session;
typedef struct own_nh nghttp2_session_callbacks;
typedef void (*own_cb)(void);

#define NH_SETTERS(X)                     \
	X(0, on_begin_headers_callback)   \
	X(1, on_header_callback)          \
	X(2, on_header_callback2)         \
	X(3, on_frame_recv_callback)      \
	X(4, on_data_chunk_recv_callback) \
	X(5, on_stream_close_callback)    \
	X(6, before_frame_send_callback)  \
	X(7, on_frame_send_callback)      \
	X(8, on_frame_not_send_callback)  \
	X(9, send_data_callback)

struct own_nh {
	int n;
};

static unsigned long nh_ran;

#define NH_SETTER(bit, what)                                                    \
	void nghttp2_session_callbacks_set_##what(nghttp2_session_callbacks *c, \
						  own_cb fn);                   \
	void nghttp2_session_callbacks_set_##what(nghttp2_session_callbacks *c, \
						  own_cb fn)                    \
	{                                                                       \
		(void)c, (void)fn;                                              \
		nh_ran |= 1ul << (bit);                                         \
	}
NH_SETTERS(NH_SETTER)

int nghttp2_session_callbacks_new(nghttp2_session_callbacks **c);
void nghttp2_session_callbacks_del(nghttp2_session_callbacks *c);
int nghttp2_session_server_new(nghttp2_session **s,
			       const nghttp2_session_callbacks *c,
			       void *u);
int nghttp2_session_server_new2(nghttp2_session **s,
				const nghttp2_session_callbacks *c,
				void *u,
				const void *opt);
int nghttp2_session_server_new3(nghttp2_session **s,
				const nghttp2_session_callbacks *c,
				void *u,
				const void *opt,
				void *mem);
void nghttp2_session_del(nghttp2_session *s);
int nghttp2_submit_request(nghttp2_session *s,
			   const void *pri,
			   const void *nva,
			   unsigned long nvlen,
			   const void *prd,
			   void *u);
int nghttp2_submit_headers(nghttp2_session *s,
			   unsigned char flags,
			   int id,
			   const void *pri,
			   const void *nva,
			   unsigned long nvlen,
			   void *u);
int nghttp2_submit_response(nghttp2_session *s,
			    int id,
			    const void *nva,
			    unsigned long nvlen,
			    const void *prd);
int
nghttp2_submit_data(nghttp2_session *s, unsigned char flags, int id, const void *prd);

static struct own_nh nh_obj;

int
nghttp2_session_callbacks_new(nghttp2_session_callbacks **c)
{
	nh_ran |= 1ul << 10;
	*c = &nh_obj;
	return 0;
}

void
nghttp2_session_callbacks_del(nghttp2_session_callbacks *c)
{
	(void)c;
	nh_ran |= 1ul << 11;
}

int
nghttp2_session_server_new(nghttp2_session **s,
			   const nghttp2_session_callbacks *c,
			   void *u)
{
	(void)c, (void)u;
	nh_ran |= 1ul << 12;
	*s = &nh_obj;
	return 0;
}

int
nghttp2_session_server_new2(nghttp2_session **s,
			    const nghttp2_session_callbacks *c,
			    void *u,
			    const void *opt)
{
	(void)c, (void)u, (void)opt;
	nh_ran |= 1ul << 13;
	*s = &nh_obj;
	return 0;
}

int
nghttp2_session_server_new3(nghttp2_session **s,
			    const nghttp2_session_callbacks *c,
			    void *u,
			    const void *opt,
			    void *mem)
{
	(void)c, (void)u, (void)opt, (void)mem;
	nh_ran |= 1ul << 14;
	*s = &nh_obj;
	return 0;
}

void
nghttp2_session_del(nghttp2_session *s)
{
	(void)s;
	nh_ran |= 1ul << 15;
}

int
nghttp2_submit_request(nghttp2_session *s,
		       const void *pri,
		       const void *nva,
		       unsigned long nvlen,
		       const void *prd,
		       void *u)
{
	(void)s, (void)pri, (void)nva, (void)nvlen, (void)prd, (void)u;
	nh_ran |= 1ul << 16;
	return 1;
}

int
nghttp2_submit_headers(nghttp2_session *s,
		       unsigned char flags,
		       int id,
		       const void *pri,
		       const void *nva,
		       unsigned long nvlen,
		       void *u)
{
	(void)s, (void)flags, (void)pri, (void)nva, (void)nvlen, (void)u;
	nh_ran |= 1ul << 17;
	return id;
}

int
nghttp2_submit_response(nghttp2_session *s,
			int id,
			const void *nva,
			unsigned long nvlen,
			const void *prd)
{
	(void)s, (void)id, (void)nva, (void)nvlen, (void)prd;
	nh_ran |= 1ul << 18;
	return 0;
}

int
nghttp2_submit_data(nghttp2_session *s, unsigned char flags, int id, const void *prd)
{
	(void)s, (void)flags, (void)id, (void)prd;
	nh_ran |= 1ul << 19;
	return 0;
}

/* Every stand-in once; the number of results that were the copy's. */
static int
own_nghttp2(void)
{
	nghttp2_session_callbacks *c = NULL;
	nghttp2_session *s = NULL;
	int r = 0;

#define NH_CALL(bit, what) nghttp2_session_callbacks_set_##what(&nh_obj, NULL);
	NH_SETTERS(NH_CALL)
	r += nghttp2_session_callbacks_new(&c) == 0 && c == &nh_obj;
	r += nghttp2_session_server_new(&s, c, NULL) == 0 && s == &nh_obj;
	r += nghttp2_session_server_new2(&s, c, NULL, NULL) == 0;
	r += nghttp2_session_server_new3(&s, c, NULL, NULL, NULL) == 0;
	r += nghttp2_submit_request(s, NULL, NULL, 0, NULL, NULL) == 1;
	r += nghttp2_submit_headers(s, 0, 7, NULL, NULL, 0, NULL) == 7;
	r += nghttp2_submit_response(s, 1, NULL, 0, NULL) == 0;
	r += nghttp2_submit_data(s, 0, 1, NULL) == 0;
	nghttp2_session_del(s);
	nghttp2_session_callbacks_del(c);
	return r;
}

static unsigned ran;
static char *envp[] = {
	"REQUEST_METHOD=GET", "REQUEST_URI=/own",
	"HTTP_TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	NULL};

int
FCGX_Accept_r(struct fcgx_request *req)
{
	ran |= 1;
	req->envp = envp;
	req->ipcFd = -1;
	return 0;
}

void
FCGX_Finish_r(struct fcgx_request *req)
{
	(void)req;
	ran |= 2;
}

void
FCGX_Free(struct fcgx_request *req, int close)
{
	(void)req;
	(void)close;
	ran |= 4;
}

/* libmicrohttpd's, libevent's evhttp, GLib's thread pools and libuv's
 * uv_queue_work, with opaque types: each returns &other_obj (or 1, or
 * 0) and sets its bit in other_ran. */
struct own_other {
	int n;
};

static struct own_other other_obj;
static unsigned long other_ran;

#define OTHER_RAN(bit) (other_ran |= 1ul << (bit))

struct own_other *MHD_start_daemon_va(unsigned flags,
				      unsigned short port,
				      void *apc,
				      void *apc_cls,
				      void *dh,
				      void *dh_cls,
				      va_list ap);
struct own_other *MHD_start_daemon(unsigned flags,
				   unsigned short port,
				   void *apc,
				   void *apc_cls,
				   void *dh,
				   void *dh_cls,
				   ...);
void MHD_stop_daemon(struct own_other *d);
int MHD_queue_response(struct own_other *c, unsigned status, struct own_other *r);
int evhttp_set_cb(struct own_other *h, const char *path, void *cb, void *arg);
int evhttp_del_cb(struct own_other *h, const char *path);
void evhttp_set_gencb(struct own_other *h, void *cb, void *arg);
void evhttp_free(struct own_other *h);
int
evhttp_add_virtual_host(struct own_other *h, const char *pattern, struct own_other *v);
int evhttp_remove_virtual_host(struct own_other *h, struct own_other *v);
struct own_other *
g_thread_pool_new(void *func, void *data, int max, int exclusive, void **error);
struct own_other *g_thread_pool_new_full(
	void *func, void *data, void *item_free, int max, int exclusive, void **error);
int g_thread_pool_push(struct own_other *pool, void *data, void **error);
void g_thread_pool_free(struct own_other *pool, int immediate, int wait_);
void g_thread_pool_set_sort_function(struct own_other *pool, void *func, void *data);
int g_thread_pool_move_to_front(struct own_other *pool, void *data);
int g_thread_pool_set_max_threads(struct own_other *pool, int max, void **error);
int
uv_queue_work(struct own_other *loop, struct own_other *req, void *work, void *after);

struct own_other *
MHD_start_daemon_va(unsigned flags,
		    unsigned short port,
		    void *apc,
		    void *apc_cls,
		    void *dh,
		    void *dh_cls,
		    va_list ap)
{
	(void)flags, (void)port, (void)apc, (void)apc_cls, (void)dh, (void)dh_cls,
		(void)ap;
	OTHER_RAN(0);
	return &other_obj;
}

/* As libmicrohttpd's: through MHD_start_daemon_va() (its PLT).  The shim
 * cannot forward variadic arguments, so it hands a caller of this one to
 * the copy's MHD_start_daemon_va() directly: bit 1 stays clear there (not
 * printed). */
struct own_other *
MHD_start_daemon(unsigned flags,
		 unsigned short port,
		 void *apc,
		 void *apc_cls,
		 void *dh,
		 void *dh_cls,
		 ...)
{
	struct own_other *d;
	va_list ap;

	OTHER_RAN(1);
	va_start(ap, dh_cls);
	d = MHD_start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls, ap);
	va_end(ap);
	return d;
}

void
MHD_stop_daemon(struct own_other *d)
{
	(void)d;
	OTHER_RAN(2);
}

int
MHD_queue_response(struct own_other *c, unsigned status, struct own_other *r)
{
	(void)c, (void)status, (void)r;
	OTHER_RAN(3);
	return 1;
}

int
evhttp_set_cb(struct own_other *h, const char *path, void *cb, void *arg)
{
	(void)h, (void)path, (void)cb, (void)arg;
	OTHER_RAN(4);
	return 1;
}

int
evhttp_del_cb(struct own_other *h, const char *path)
{
	(void)h, (void)path;
	OTHER_RAN(5);
	return 1;
}

void
evhttp_set_gencb(struct own_other *h, void *cb, void *arg)
{
	(void)h, (void)cb, (void)arg;
	OTHER_RAN(6);
}

void
evhttp_free(struct own_other *h)
{
	(void)h;
	OTHER_RAN(7);
}

int
evhttp_add_virtual_host(struct own_other *h, const char *pattern, struct own_other *v)
{
	(void)h, (void)pattern, (void)v;
	OTHER_RAN(8);
	return 1;
}

int
evhttp_remove_virtual_host(struct own_other *h, struct own_other *v)
{
	(void)h, (void)v;
	OTHER_RAN(9);
	return 1;
}

struct own_other *
g_thread_pool_new(void *func, void *data, int max, int exclusive, void **error)
{
	(void)func, (void)data, (void)max, (void)exclusive, (void)error;
	OTHER_RAN(10);
	return &other_obj;
}

struct own_other *
g_thread_pool_new_full(
	void *func, void *data, void *item_free, int max, int exclusive, void **error)
{
	(void)func, (void)data, (void)item_free, (void)max, (void)exclusive,
		(void)error;
	OTHER_RAN(11);
	return &other_obj;
}

int
g_thread_pool_push(struct own_other *pool, void *data, void **error)
{
	(void)pool, (void)data, (void)error;
	OTHER_RAN(12);
	return 1;
}

void
g_thread_pool_free(struct own_other *pool, int immediate, int wait_)
{
	(void)pool, (void)immediate, (void)wait_;
	OTHER_RAN(13);
}

void
g_thread_pool_set_sort_function(struct own_other *pool, void *func, void *data)
{
	(void)pool, (void)func, (void)data;
	OTHER_RAN(14);
}

int
g_thread_pool_move_to_front(struct own_other *pool, void *data)
{
	(void)pool, (void)data;
	OTHER_RAN(15);
	return 1;
}

int
g_thread_pool_set_max_threads(struct own_other *pool, int max, void **error)
{
	(void)pool, (void)max, (void)error;
	OTHER_RAN(16);
	return 1;
}

int
uv_queue_work(struct own_other *loop, struct own_other *req, void *work, void *after)
{
	(void)loop, (void)req, (void)work, (void)after;
	OTHER_RAN(17);
	return 0;
}

/* Every stand-in once; the number of results that were the copy's. */
static int
own_others(void)
{
	struct own_other *o = &other_obj;
	int r = 0;

	r += MHD_start_daemon(0, 0, NULL, NULL, NULL, NULL, 0) == o;
	r += MHD_queue_response(o, 200, o) == 1;
	MHD_stop_daemon(o);
	r += evhttp_set_cb(o, "/", NULL, NULL) == 1;
	r += evhttp_del_cb(o, "/") == 1;
	evhttp_set_gencb(o, NULL, NULL);
	r += evhttp_add_virtual_host(o, "x", o) == 1;
	r += evhttp_remove_virtual_host(o, o) == 1;
	evhttp_free(o);
	r += g_thread_pool_new(NULL, NULL, 1, 0, NULL) == o;
	r += g_thread_pool_new_full(NULL, NULL, NULL, 1, 0, NULL) == o;
	r += g_thread_pool_push(o, NULL, NULL) == 1;
	g_thread_pool_set_sort_function(o, NULL, NULL);
	r += g_thread_pool_move_to_front(o, NULL) == 1;
	r += g_thread_pool_set_max_threads(o, 2, NULL) == 1;
	g_thread_pool_free(o, 0, 0);
	r += uv_queue_work(o, o, NULL, NULL) == 0;
	return r;
}

int
own_copy_main(void)
{
	struct fcgx_request req = {0, 1, NULL, NULL, NULL, NULL, NULL, -1};
	int r, n, o;

	r = FCGX_Accept_r(&req);
	FCGX_Finish_r(&req);
	FCGX_Free(&req, 0);
	printf("fcgi: accept %d, the copy's accept/finish/free ran: %u%u%u\n", r,
	       ran & 1, (ran >> 1) & 1, (ran >> 2) & 1);
	n = own_nghttp2();
	printf("nghttp2: %d of 8 results the copy's, its functions ran: %#lx\n", n,
	       nh_ran);
	o = own_others();
	printf("mhd, evhttp, glib, uv: %d of 12 results the copy's, its functions "
	       "ran: %#lx\n",
	       o, other_ran & ~2ul);
	return ran == 7 && r == 0 && n == 8 && nh_ran == 0xffffful && o == 12 &&
			       (other_ran | 2) == 0x3fffful
		       ? 0
		       : 1;
}
