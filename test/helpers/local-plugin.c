/* SPDX-License-Identifier: Apache-2.0 */
/* A plugin that uses GLib's thread pool, libmicrohttpd, libevent's evhttp
 * and libuv's pool, loaded RTLD_LOCAL by plugin-host, so that its
 * libraries are invisible to the shim's RTLD_NEXT while its calls to them
 * reach the shim's exported names (test-preload-plugins.c).  No tracing
 * code.
 *
 * stdout has the API results, the same with and without the shim; stderr
 * has what each callback's thread publishes ("<where> trace=… span=…",
 * ctxobs.h): the submitter's context (TRACEPARENT) in the GLib and libuv
 * pool items, the request's traceparent in the libmicrohttpd handler. */
#include "config.h"

#include "ctxobs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <glib.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/http.h>
#include <microhttpd.h>
#include <uv.h>

int plugin_main(void) __attribute__((visibility("default")));

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static void
observe(const char *where)
{
	char c[96];

	ctxobs_format(c, sizeof(c));
	pthread_mutex_lock(&out_lock);
	fprintf(stderr, "%s %s\n", where, c);
	fflush(stderr);
	pthread_mutex_unlock(&out_lock);
}

/* ---- GLib ---------------------------------------------------------------- */

static int glib_ran;

static void
glib_work(gpointer data, gpointer user_data)
{
	(void)user_data;
	observe("glib-item");
	__atomic_add_fetch(&glib_ran, GPOINTER_TO_INT(data), __ATOMIC_RELAXED);
}

static void
run_glib(void)
{
	GError *err = NULL;
	GThreadPool *p = g_thread_pool_new(glib_work, NULL, 2, FALSE, &err);
	int i;

	printf("g_thread_pool_new: %s\n", p ? "pool" : "NULL");
	if (!p)
		return;
	for (i = 1; i <= 3; i++)
		printf("g_thread_pool_push: %d\n",
		       g_thread_pool_push(p, GINT_TO_POINTER(i), NULL));
	g_thread_pool_free(p, FALSE, TRUE);
	printf("glib items: %d\n", glib_ran);
}

/* ---- libmicrohttpd ----------------------------------------------------- */

static enum MHD_Result
mhd_handler(void *cls,
	    struct MHD_Connection *c,
	    const char *url,
	    const char *method,
	    const char *version,
	    const char *upload_data,
	    size_t *upload_data_size,
	    void **req_cls)
{
	static const char body[] = "ok\n";
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)cls, (void)url, (void)method, (void)version, (void)upload_data;
	(void)upload_data_size;
	if (!*req_cls) {
		*req_cls = c;
		return MHD_YES;
	}
	observe("mhd-handler");
	r = MHD_create_response_from_buffer(sizeof(body) - 1, (void *)body,
					    MHD_RESPMEM_PERSISTENT);
	ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

static void
run_mhd(void)
{
	static const char req[] =
		"GET /plugin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
		"traceparent: "
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\n\r\n";
	struct sockaddr_in sin = {.sin_family = AF_INET};
	const union MHD_DaemonInfo *info;
	struct MHD_Daemon *d;
	char buf[512];
	size_t len = 0;
	ssize_t n;
	int fd;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL,
			     mhd_handler, NULL, MHD_OPTION_SOCK_ADDR,
			     (struct sockaddr *)&sin, MHD_OPTION_END);
	printf("MHD_start_daemon: %s\n", d ? "daemon" : "NULL");
	if (!d)
		return;
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	sin.sin_port = htons(info ? info->port : 0);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
	    write(fd, req, sizeof(req) - 1) == (ssize_t)(sizeof(req) - 1)) {
		while (len < sizeof(buf) - 1 &&
		       (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
			len += (size_t)n;
	}
	buf[len] = '\0';
	printf("MHD response: %.15s\n", buf);
	if (fd >= 0)
		close(fd);
	MHD_stop_daemon(d);
	printf("MHD_stop_daemon: done\n");
}

/* ---- libevent evhttp ----------------------------------------------------- */

static void
evh_cb(struct evhttp_request *r, void *arg)
{
	(void)r, (void)arg;
}

static void
run_evhttp(void)
{
	struct event_base *b = event_base_new();
	struct evhttp *h = b ? evhttp_new(b) : NULL;

	if (!h) {
		printf("evhttp_new: NULL\n");
		return;
	}
	printf("evhttp_set_cb: %d\n", evhttp_set_cb(h, "/x", evh_cb, NULL));
	printf("evhttp_set_cb again: %d\n", evhttp_set_cb(h, "/x", evh_cb, NULL));
	evhttp_set_gencb(h, evh_cb, NULL);
	printf("evhttp_del_cb: %d\n", evhttp_del_cb(h, "/x"));
	printf("evhttp_del_cb again: %d\n", evhttp_del_cb(h, "/x"));
	evhttp_free(h);
	event_base_free(b);
	printf("evhttp_free: done\n");
}

/* ---- libuv --------------------------------------------------------------- */

static int uv_after_status = 1;

static void
uv_work(uv_work_t *w)
{
	(void)w;
	observe("uv-work");
}

static void
uv_after(uv_work_t *w, int status)
{
	(void)w;
	uv_after_status = status;
}

static void
run_uv(void)
{
	uv_loop_t loop;
	uv_work_t w;
	int r;

	if (uv_loop_init(&loop) != 0) {
		printf("uv_loop_init: failed\n");
		return;
	}
	r = uv_queue_work(&loop, &w, uv_work, uv_after);
	printf("uv_queue_work: %d\n", r);
	if (r == 0)
		uv_run(&loop, UV_RUN_DEFAULT);
	printf("uv after_work status: %d\n", uv_after_status);
	(void)uv_loop_close(&loop);
}

int
plugin_main(void)
{
	run_glib();
	run_mhd();
	run_evhttp();
	run_uv();
	fflush(stdout);
	return 0;
}
