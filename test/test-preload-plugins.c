/* SPDX-License-Identifier: Apache-2.0 */
/* Libraries loaded RTLD_LOCAL as a plugin's dependencies (hooks
 * hook-pool-glib.c, hook-mhd.c, hook-evhttp.c, hook-pool-uv.c): RTLD_NEXT
 * cannot see them, yet the plugin's calls reach the shim's exported names,
 * so the hooks find the real functions by soname (preload/bind.c,
 * ctxshim_bind_loaded()).  The plugin (helpers/local-plugin.c, run by
 * helpers/plugin-host.c) must get the same API results with the shim as
 * without it (they once were a NULL pool, a NULL daemon, -2 from
 * evhttp_set_cb), and the shim's tracing must work through the fallback.
 * plugin-host also checks that the shim's bindings leave no dlerror()
 * message behind on the application's thread (a blind call before the
 * library is loaded, whose binding fails and is retried later).  A plugin
 * with its own copy of such a library keeps calling its copy. */
#include "test-common.h"

#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TRACE_ID "4bf92f3577b34da6a3ce929d0e0e4736"
/* The traceparent local-plugin.c sends to its libmicrohttpd daemon. */
#define REQ_TRACE_ID "0af7651916cd43dd8448eb211c80319c"

static const char expected[] = "dlerror after a blind call: none\n"
			       "g_thread_pool_new: pool\n"
			       "g_thread_pool_push: 1\n"
			       "g_thread_pool_push: 1\n"
			       "g_thread_pool_push: 1\n"
			       "glib items: 6\n"
			       "MHD_start_daemon: daemon\n"
			       "MHD response: HTTP/1.1 200 OK\n"
			       "MHD_stop_daemon: done\n"
			       "evhttp_set_cb: 0\n"
			       "evhttp_set_cb again: -1\n"
			       "evhttp_del_cb: 0\n"
			       "evhttp_del_cb again: -1\n"
			       "evhttp_free: done\n"
			       "uv_queue_work: 0\n"
			       "uv after_work status: 0\n"
			       "dlerror after the plugin: none\n";

static unsigned
count(const char *s, const char *needle)
{
	unsigned n = 0;

	while ((s = strstr(s, needle))) {
		n++;
		s++;
	}
	return n;
}

/* Run local-plugin under plugin-host without and with the shim, with
 * LD_LIBRARY_PATH=libdir if not NULL: the same API results, and the
 * shim's tracing through the fallback by name. */
static void
run_local_plugin(const char *libdir)
{
	char host[4096], plugin[4096], path[4200], *argv[] = {host, plugin, NULL};
	char *env[] = {"TRACEPARENT=00-" TRACE_ID "-00f067aa0ba902b7-01",
		       "CTXSHIM_EVENTS=stderr", path, NULL};
	char *out[2], *err[2];
	int st[2], shim;

	snprintf(host, sizeof(host), "%s/plugin-host", test_env_path("HELPER_DIR"));
	snprintf(plugin, sizeof(plugin), "%s/liblocal-plugin.so",
		 test_env_path("HELPER_DIR"));
	if (access(host, X_OK) != 0 || access(plugin, R_OK) != 0)
		test_skip("%s not built (GLib, libmicrohttpd, libevent, libuv -dev)",
			  plugin);
	if (libdir)
		snprintf(path, sizeof(path), "LD_LIBRARY_PATH=%s", libdir);
	else
		env[2] = NULL;
	for (shim = 0; shim < 2; shim++) {
		st[shim] = test_run_capture(argv, env, shim, &out[shim], &err[shim],
					    60000);
		ck_assert_msg(WIFEXITED(st[shim]) && WEXITSTATUS(st[shim]) == 0,
			      "%s shim: status %#x:\n%s%s", shim ? "with" : "without",
			      st[shim], out[shim], err[shim]);
		ck_assert_msg(strcmp(out[shim], expected) == 0,
			      "%s shim, output differs:\n--- expected\n%s--- got\n%s%s",
			      shim ? "with" : "without", expected, out[shim],
			      err[shim]);
	}
	/* Without the shim nothing is published; with it, the pool items run
	 * under the submitter's context and the handler under the request's. */
	ck_assert_msg(count(err[0], "trace=- span=-") == 5, "%s", err[0]);
	ck_assert_msg(count(err[1], "glib-item trace=" TRACE_ID) == 3, "%s", err[1]);
	ck_assert_msg(count(err[1], "uv-work trace=" TRACE_ID) == 1, "%s", err[1]);
	ck_assert_msg(count(err[1], "mhd-handler trace=" REQ_TRACE_ID) == 1, "%s",
		      err[1]);
	/* ... through the hooks (the event log's reasons): the pool threads
	 * would also show the submitter's context had they inherited it, as
	 * they do when the hooks find no library to bind and the calls pass
	 * straight to the plugin's. */
	ck_assert_msg(count(err[1], "reason=glib-pool-item\n") == 3, "%s", err[1]);
	ck_assert_msg(count(err[1], "reason=uv-work\n") == 1, "%s", err[1]);
	ck_assert_msg(count(err[1], "reason=mhd-handler\n") == 1, "%s", err[1]);
	for (shim = 0; shim < 2; shim++) {
		free(out[shim]);
		free(err[shim]);
	}
}

START_TEST(plugin_libraries_loaded_local)
{
	run_local_plugin(NULL);
}
END_TEST

/* Copy the library `name' from Debian's directory into dir with its
 * DT_SONAME entry turned into DT_DEBUG (which ld.so ignores in a shared
 * object): a library built without a soname, known only by the name it
 * was loaded by. */
static void
copy_without_soname(const char *dir, const char *name)
{
	char from[256], to[4200];
	unsigned char *b;
	const Elf64_Ehdr *eh;
	size_t len, i, patched = 0;
	FILE *f;

	snprintf(from, sizeof(from), "/lib/x86_64-linux-gnu/%s", name);
	snprintf(to, sizeof(to), "%s/%s", dir, name);
	f = fopen(from, "rb");
	if (!f)
		test_skip("%s: %s", from, strerror(errno));
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	len = (size_t)ftell(f);
	rewind(f);
	b = malloc(len);
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq(fread(b, 1, len, f), len);
	fclose(f);
	eh = (const Elf64_Ehdr *)b;
	ck_assert(len > sizeof(*eh) && memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0);
	for (i = 0; i < eh->e_shnum; i++) {
		const Elf64_Shdr *sh =
			(const Elf64_Shdr *)(b + eh->e_shoff + i * eh->e_shentsize);
		Elf64_Dyn *d;
		size_t k;

		if (sh->sh_type != SHT_DYNAMIC)
			continue;
		d = (Elf64_Dyn *)(b + sh->sh_offset);
		for (k = 0; k < sh->sh_size / sizeof(*d); k++)
			if (d[k].d_tag == DT_SONAME) {
				d[k].d_tag = DT_DEBUG;
				patched++;
			}
	}
	ck_assert_uint_eq(patched, 1);
	f = fopen(to, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(b, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
	free(b);
}

/* The same plugin whose libraries have no soname (vendored builds),
 * known only by the names they were loaded by: the hooks' binding (its
 * callers' scope first, then the look by name of bind.c's lib_present(),
 * which takes a file's name where there is no soname) must find them
 * all the same. */
START_TEST(plugin_libraries_without_soname)
{
	static const char *const libs[] = {"libmicrohttpd.so.12", "libglib-2.0.so.0",
					   "libuv.so.1", "libevent-2.1.so.7"};
	char dir[] = "/tmp/ctxshim-nosoname-XXXXXX";
	size_t i;

	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	for (i = 0; i < sizeof(libs) / sizeof(libs[0]); i++)
		copy_without_soname(dir, libs[i]);
	run_local_plugin(dir);
}
END_TEST

/* A plugin with its own copy of a hooked library (helpers/own-copy.c:
 * libfcgi's, libnghttp2's, libmicrohttpd's, libevent's, GLib's and
 * libuv's hooked functions; helpers/own-tls.c and own-curl.c: libssl's,
 * libgnutls's and libcurl's at their symbol versions), opened RTLD_LOCAL alone or after the real
 * libraries (also
 * RTLD_LOCAL, which the shim's fallback by soname finds): its calls reach
 * the shim's names and must go to its own copy, with the copy's results
 * (they once failed with ENOSYS, or went to the real library with the
 * copy's objects and crashed); unloaded and loaded again, twice, and it
 * must really unload (the shim keeps no reference to it). */
#define OWN_COPY_WANT                                                             \
	"fcgi: accept 0, the copy's accept/finish/free ran: 111\n"                \
	"nghttp2: 8 of 8 results the copy's, its functions ran: 0xfffff\n"        \
	"mhd, evhttp, glib, uv: 12 of 12 results the copy's, its functions ran: " \
	"0x3fffd\n"

#define OWN_TLS_WANT                                                              \
	"ssl: 10 of 10 calls returned the copy's results, the copy's functions "  \
	"ran: 0x7ff\n"                                                            \
	"gnutls: 7 of 7 calls returned the copy's results, the copy's functions " \
	"ran: 0x1ff\n"

#define OWN_CURL_WANT                                                           \
	"curl: 8 of 8 calls returned the copy's results, the copy's functions " \
	"ran: 0x1ff\n"

static const struct {
	const char *plugin, *lib, *want;
} own_cases[] = {
	{"libown-copy.so", NULL, OWN_COPY_WANT},
	{"libown-copy.so", "libfcgi.so.0", OWN_COPY_WANT},
	{"libown-copy.so", "libnghttp2.so.14", OWN_COPY_WANT},
	{"libown-copy.so",
	 "libmicrohttpd.so.12 libevent-2.1.so.7 libglib-2.0.so.0 libuv.so.1",
	 OWN_COPY_WANT},
	{"libown-tls.so", NULL, OWN_TLS_WANT},
	{"libown-tls.so", "libssl.so.3 libgnutls.so.30", OWN_TLS_WANT},
	{"libown-curl.so", NULL, OWN_CURL_WANT},
	{"libown-curl.so", "libcurl.so.4", OWN_CURL_WANT},
};

START_TEST(plugin_own_library_copy)
{
	char host[4096], plugin[4096], libs[256], want[1024], *argv[8] = {host, plugin};
	char *out, *err, *save = NULL;
	size_t n = 2;
	int st, shim;

	snprintf(host, sizeof(host), "%s/own-copy-host", test_env_path("HELPER_DIR"));
	snprintf(plugin, sizeof(plugin), "%s/%s", test_env_path("HELPER_DIR"),
		 own_cases[_i].plugin);
	snprintf(libs, sizeof(libs), "%s", own_cases[_i].lib ? own_cases[_i].lib : "");
	for (char *l = strtok_r(libs, " ", &save); l && n < 7;
	     l = strtok_r(NULL, " ", &save))
		argv[n++] = l;
	argv[n] = NULL;
	snprintf(want, sizeof(want),
		 "%sround 0: the plugin is unloaded after dlclose\n"
		 "%sround 1: the plugin is unloaded after dlclose\n",
		 own_cases[_i].want, own_cases[_i].want);
	for (shim = 0; shim < 2; shim++) {
		st = test_run_capture(argv, NULL, shim, &out, &err, 60000);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
				      strcmp(out, want) == 0,
			      "%s %s, %s shim: status %#x:\n%s%s", own_cases[_i].plugin,
			      own_cases[_i].lib ? own_cases[_i].lib : "alone",
			      shim ? "with" : "without", st, out, err);
		free(out);
		free(err);
	}
}
END_TEST

/* A call that reaches the shim's name from outside the object with the
 * copy (through a pointer the plugin took, or through a wrapper of it
 * that tail-calls the name) cannot be told apart by its return address.
 * With no libcurl loaded under its soname only a copy can have been meant:
 * the only one loaded gets the call (it once ended the process with
 * "cannot resolve real curl_easy_init()").  With two copies loaded, which
 * one is unknown, and the call fails as libcurl reports a failure (NULL
 * here) instead, also when the second copy comes after the first call
 * (2: the answer the shim kept for the caller is no answer then). */
START_TEST(plugin_own_copy_pointer)
{
	char host[4096], plugin[4096], dir[] = "/tmp/ctxshim-own-XXXXXX", second[4200];
	char want[1024], cmd[8600], *argv[4] = {host, plugin, NULL, NULL};
	char *env[] = {"OWN_COPY_POINTER=1", _i == 2 ? "OWN_COPY_LATE=1" : NULL, NULL};
	char *out, *err;
	int st, shim;

	snprintf(host, sizeof(host), "%s/own-copy-host", test_env_path("HELPER_DIR"));
	snprintf(plugin, sizeof(plugin), "%s/libown-curl.so",
		 test_env_path("HELPER_DIR"));
	if (_i > 0) {
		/* Another file: loaded as a second object. */
		ck_assert_ptr_nonnull(test_mkdtemp(dir));
		snprintf(second, sizeof(second), "%s/libown-curl-2.so", dir);
		snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", plugin, second);
		ck_assert_int_eq(system(cmd), 0);
		argv[2] = second;
	}
	for (shim = 0; shim < 2; shim++) {
		const char *ptr = shim && _i > 0 ? "failed" : "returned its handle";
		/* 2: a first call, before the second copy is loaded */
		const char *first =
			_i == 2 ? "curl: a call through a pointer from outside "
				  "the copy returned its handle\n"
				: "";

		snprintf(want, sizeof(want),
			 OWN_CURL_WANT
			 "%scurl: a call through a pointer from outside the "
			 "copy %s\n"
			 "round 0: the plugin is unloaded after dlclose\n" OWN_CURL_WANT
			 "curl: a call through a pointer from outside the "
			 "copy %s\n"
			 "round 1: the plugin is unloaded after dlclose\n",
			 first, ptr, ptr);
		st = test_run_capture(argv, env, shim, &out, &err, 60000);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
				      strcmp(out, want) == 0,
			      "%s, %s shim: status %#x:\n%s%s",
			      _i ? "two copies" : "one copy", shim ? "with" : "without",
			      st, out, err);
		free(out);
		free(err);
	}
}
END_TEST

/* A hooked library loaded after start-up RTLD_GLOBAL (a plugin's
 * dependency, helpers/global-reload-plugin.c) is found through RTLD_NEXT;
 * unloaded with the plugin and loaded again at other addresses, its
 * calls must reach the copy now loaded (the shim once kept calling the
 * unmapped old one: SIGSEGV). */
START_TEST(plugin_global_library_reloaded)
{
	static const char want[] = "round 0: FCGX_Accept_r() = -9998\n"
				   "round 1: FCGX_Accept_r() = -9998\n";
	char host[4096], plugin[4096], *argv[] = {host, plugin, NULL};
	char *out, *err;
	int st, shim;

	snprintf(host, sizeof(host), "%s/global-reload-host",
		 test_env_path("HELPER_DIR"));
	snprintf(plugin, sizeof(plugin), "%s/libglobal-reload-plugin.so",
		 test_env_path("HELPER_DIR"));
	if (access(host, X_OK) != 0 || access(plugin, R_OK) != 0)
		test_skip("%s not built (libfcgi-dev)", plugin);
	for (shim = 0; shim < 2; shim++) {
		st = test_run_capture(argv, NULL, shim, &out, &err, 60000);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
				      strcmp(out, want) == 0,
			      "%s shim: status %#x:\n%s%s", shim ? "with" : "without",
			      st, out, err);
		free(out);
		free(err);
	}
}
END_TEST

TEST_SUITE(preload_plugins_suite)
{
	Suite *s = suite_create("preload-plugins");
	TCase *tc = tcase_create("plugins");

	tcase_add_test(tc, plugin_libraries_loaded_local);
	tcase_add_test(tc, plugin_libraries_without_soname);
	tcase_add_loop_test(tc, plugin_own_library_copy, 0,
			    sizeof(own_cases) / sizeof(own_cases[0]));
	tcase_add_loop_test(tc, plugin_own_copy_pointer, 0, 3);
	tcase_add_test(tc, plugin_global_library_reloaded);
	suite_add_tcase(s, tc);
	return s;
}
