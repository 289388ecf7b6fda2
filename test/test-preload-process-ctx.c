/* SPDX-License-Identifier: Apache-2.0 */
/* The OTEP-4719 process context, read from outside the process the way a
 * profiler does: /proc/PID/maps to find OTEL_CTX, /proc/PID/mem to read. */
#include "test-common.h"

#include "maps.h"
#include "process-ctx.h"
#include "thread-record.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct pctx_seen {
	enum pctx_map_kind kind;
	unsigned n_mappings;
	uint64_t start, end;
	struct otel_process_ctx_header h;
	uint8_t payload[65536];
	struct pctx_decoded d;
};

/* Returns false if no OTEL_CTX mapping is listed. */
static bool
read_pctx(pid_t pid, struct pctx_seen *s)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	ssize_t len;
	FILE *maps;
	int mem;

	memset(s, 0, sizeof(*s));
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	maps = fopen(path, "re");
	ck_assert_ptr_nonnull(maps);
	while ((len = getline(&line, &cap, maps)) > 0) {
		struct maps_entry e;
		enum pctx_map_kind k;

		if (line[len - 1] == '\n')
			line[--len] = '\0';
		ck_assert_int_eq(maps_parse_line(line, (size_t)len, &e), 0);
		k = pctx_map_name_kind(e.path, e.path_len);
		if (k == PCTX_MAP_NONE)
			continue;
		s->n_mappings++;
		s->kind = k;
		s->start = e.start;
		s->end = e.end;
	}
	free(line);
	fclose(maps);
	if (!s->n_mappings)
		return false;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	mem = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(mem, 0);
	ck_assert_int_eq(pread(mem, &s->h, sizeof(s->h), (off_t)s->start),
			 sizeof(s->h));
	ck_assert_int_eq(memcmp(s->h.signature, "OTEL_CTX", 8), 0);
	ck_assert_uint_eq(s->h.version, 2);
	ck_assert_uint_ne(s->h.monotonic_published_at_ns, 0);
	ck_assert_uint_gt(s->h.payload_size, 0);
	ck_assert_uint_le(s->h.payload_size, sizeof(s->payload));
	ck_assert_int_eq(pread(mem, s->payload, s->h.payload_size, (off_t)s->h.payload),
			 (ssize_t)s->h.payload_size);
	close(mem);
	ck_assert_int_eq(pctx_decode(s->payload, s->h.payload_size, &s->d), 0);
	return true;
}

static void
assert_resource(const struct pctx_seen *s, const char *key, const char *value)
{
	const struct pctx_attr *a = pctx_find_resource(&s->d, key);

	ck_assert_msg(a, "resource %s missing", key);
	ck_assert_int_eq(a->type, PCTX_V_STRING);
	ck_assert_msg(pctx_str_eq(a->str, value), "resource %s = '%.*s', want '%s'",
		      key, (int)a->str.len, (const char *)a->str.ptr, value);
}

/* process.pid is an int in the semantic conventions: AnyValue.int_value. */
static void
assert_resource_int(const struct pctx_seen *s, const char *key, int64_t value)
{
	const struct pctx_attr *a = pctx_find_resource(&s->d, key);

	ck_assert_msg(a, "resource %s missing", key);
	ck_assert_msg(a->type == PCTX_V_INT, "resource %s has type %d, want int", key,
		      (int)a->type);
	ck_assert_msg(a->i == value, "resource %s = %lld, want %lld", key,
		      (long long)a->i, (long long)value);
}

static void
resource_text(const struct pctx_seen *s, const char *key, char *out, size_t n)
{
	const struct pctx_attr *a = pctx_find_resource(&s->d, key);

	ck_assert_msg(a && a->type == PCTX_V_STRING, "resource %s missing", key);
	ck_assert_uint_lt(a->str.len, n);
	memcpy(out, a->str.ptr, a->str.len);
	out[a->str.len] = '\0';
}

static bool
is_uuid4(const char *u)
{
	int i;

	if (strlen(u) != 36)
		return false;
	for (i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (u[i] != '-')
				return false;
		} else if (!isxdigit((unsigned char)u[i]) ||
			   isupper((unsigned char)u[i])) {
			return false;
		}
	}
	return u[14] == '4' && strchr("89ab", u[19]);
}

static void
start_threads(struct test_child *c, char **env, char *line, size_t n)
{
	static char path[4096];
	char *argv[] = {path, "--wait", "4", NULL};

	snprintf(path, sizeof(path), "%s/threads", test_env_path("HELPER_DIR"));
	test_child_start(c, argv, env, true);
	test_child_expect(c, "READY ", line, n, 20000);
}

START_TEST(test_published_and_decodes)
{
	struct test_child c;
	struct pctx_seen *s = calloc(1, sizeof(*s));
	char line[4096], text[256];
	char *env[] = {"OTEL_SERVICE_NAME=checkout",
		       "OTEL_RESOURCE_ATTRIBUTES=deployment.environment.name=test, "
		       "team = a%2Cb ,"
		       "service.name=ignored",
		       "CTXSHIM_HEADER_ATTRS=X-Request-Id, traceresponse,x-request-id",
		       NULL};

	start_threads(&c, env, line, sizeof(line));
	ck_assert_msg(read_pctx(c.pid, s), "no OTEL_CTX mapping in /proc/%d/maps",
		      (int)c.pid);
	ck_assert_uint_eq(s->n_mappings, 1);
	/* This machine's kernel cannot name the mapping; the memfd name is
	 * what makes it discoverable.  Both are acceptable. */
	ck_assert_msg(s->kind == PCTX_MAP_MEMFD || s->kind == PCTX_MAP_ANON_SHMEM,
		      "kind %d", s->kind);
	ck_assert_uint_ge(s->h.payload, s->start);
	ck_assert_uint_le(s->h.payload + s->h.payload_size, s->end);

	assert_resource(s, "service.name", "checkout");
	assert_resource(s, "process.executable.name", "threads");
	assert_resource(s, "deployment.environment.name", "test");
	assert_resource(s, "team", "a,b");
	assert_resource(s, "telemetry.sdk.name", "ctxshim");
	assert_resource(s, "telemetry.distro.name", "ctxshim");
	assert_resource(s, "telemetry.distro.version", CTXSHIM_VERSION);
	assert_resource_int(s, "process.pid", c.pid);
	resource_text(s, "service.instance.id", text, sizeof(text));
	ck_assert_msg(is_uuid4(text), "instance id %s", text);

	ck_assert(s->d.has_threadlocal);
	ck_assert(pctx_str_eq(s->d.schema_version, "tlsdesc_v1_dev"));
	/* x-request-id is listed twice: one key-map entry; then
	 * http.request.method_original, appended after the headers. */
	ck_assert_uint_eq(s->d.n_keys, 6);
	ck_assert(pctx_str_eq(s->d.key_map[0], "http.request.method"));
	ck_assert(pctx_str_eq(s->d.key_map[1], "url.path"));
	ck_assert(pctx_str_eq(s->d.key_map[2], "ctxshim.parent_span_id"));
	ck_assert(pctx_str_eq(s->d.key_map[3], "http.request.header.x-request-id"));
	ck_assert(pctx_str_eq(s->d.key_map[4], "http.request.header.traceresponse"));
	ck_assert(pctx_str_eq(s->d.key_map[5], "http.request.method_original"));

	/* The header's bytes as §5.3 shows them (host order, x86_64), the
	 * payload right after it (README), and the payload's threadlocal.*
	 * tail exactly as the reference encoding of §5.4 (an attribute
	 * field 2 per key, schema first, then the key map as an array). */
	{
		static const char *const keys[] = {"http.request.method",
						   "url.path",
						   "ctxshim.parent_span_id",
						   "http.request.header.x-request-id",
						   "http.request.header.traceresponse",
						   "http.request.method_original"};
		const uint8_t *raw = (const uint8_t *)&s->h;
		uint8_t tail[512];
		size_t tl = 0;

		ck_assert_mem_eq(raw, "OTEL_CTX\x02\x00\x00\x00", 12);
		ck_assert_uint_eq(raw[12] | raw[13] << 8 | raw[14] << 16 |
					  (uint32_t)raw[15] << 24,
				  s->h.payload_size);
		ck_assert(s->h.payload == s->start + 32);
		ck_assert_int_eq(pctx_encode(tail, sizeof(tail), &tl, NULL, 0,
					     "tlsdesc_v1_dev", keys, 6),
				 0);
		ck_assert_uint_gt(s->h.payload_size, tl);
		ck_assert_mem_eq(s->payload + s->h.payload_size - tl, tail, tl);
	}

	ck_assert_int_eq(test_child_finish(&c, 20000), 0);
	free(s);
}
END_TEST

START_TEST(test_program_name_default)
{
	struct test_child c;
	struct pctx_seen *s = calloc(1, sizeof(*s));
	char line[4096];
	char *env[] = {"OTEL_RESOURCE_ATTRIBUTES=bad%zz=1", NULL};

	start_threads(&c, env, line, sizeof(line));
	ck_assert(read_pctx(c.pid, s));
	/* A malformed OTEL_RESOURCE_ATTRIBUTES is discarded whole: keys are
	 * percent-decoded too, so the bad escape is in the key here.  The
	 * semantic conventions' default: "unknown_service:" and
	 * process.executable.name. */
	assert_resource(s, "service.name", "unknown_service:threads");
	assert_resource(s, "process.executable.name", "threads");
	ck_assert_ptr_null(pctx_find_resource(&s->d, "bad"));
	ck_assert_ptr_null(pctx_find_resource(&s->d, "bad%zz"));
	ck_assert_int_eq(test_child_finish(&c, 20000), 0);
	free(s);
}
END_TEST

/* Copies the threads helper to dir/name (mode 0755). */
static void
copy_threads(const char *dir, const char *name, char *out, size_t n)
{
	char src[4096], buf[65536];
	int in, fd;
	ssize_t r;

	snprintf(src, sizeof(src), "%s/threads", test_env_path("HELPER_DIR"));
	snprintf(out, n, "%s/%s", dir, name);
	in = open(src, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(in, 0);
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	ck_assert_int_ge(fd, 0);
	while ((r = read(in, buf, sizeof(buf))) > 0)
		ck_assert_int_eq(write(fd, buf, (size_t)r), r);
	ck_assert_int_eq(r, 0);
	close(in);
	ck_assert_int_eq(close(fd), 0);
}

/* process.executable.name is the base name of /proc/PID/exe's target (the
 * semantic conventions' registry), and the default service.name is
 * "unknown_service:" and it, whatever the program was started as: a name
 * longer than comm's 15 bytes, an argv[0] of the caller's choice (bash's
 * exec -a), an exec of /proc/self/fd/N (comm and argv[0] say "3"), an
 * executable deleted since (" (deleted)" is no part of its name), a
 * program executed by another one under the shim (the shell here; with
 * CTXSHIM_FOLLOW_EXEC through env -u LD_PRELOAD).  The
 * environment sets service.name but not process.executable.name, a fact
 * about the process like process.pid. */
START_TEST(test_executable_name)
{
#define LONG_NAME "threads-with-a-long-name"
	static const struct {
		const char *script; /* bash -c SCRIPT COPY, NULL: COPY itself */
		const char *env;
		const char *svc; /* NULL: the default */
	} cases[] = {
		{NULL, NULL, NULL},
		{"exec -a renamed \"$0\" --wait 4", NULL, NULL},
		{"exec 3<\"$0\"; exec /proc/self/fd/3 --wait 4", NULL, NULL},
		{"exec 3<\"$0\"; rm \"$0\"; exec /proc/self/fd/3 --wait 4", NULL, NULL},
		{"exec env -u LD_PRELOAD \"$0\" --wait 4", "CTXSHIM_FOLLOW_EXEC=1",
		 NULL},
		{NULL, "OTEL_SERVICE_NAME=named", "named"},
		{NULL,
		 "OTEL_RESOURCE_ATTRIBUTES=service.name=from-attrs,"
		 "process.executable.name=fake",
		 "from-attrs"},
		{NULL, "OTEL_RESOURCE_ATTRIBUTES=process.executable.name=fake", NULL},
	};
	char dir[] = "/tmp/ctxshim-exe-XXXXXX";
	unsigned i;

	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pctx_seen *s = calloc(1, sizeof(*s));
		char copy[4096], line[4096], script[256], exe[256], svc[256];
		char *argv[] = {copy, "--wait", "4", NULL};
		char *sh_argv[] = {"/bin/bash", "-c", script, copy, NULL};
		char *env[] = {(char *)cases[i].env, NULL};
		struct test_child c;

		copy_threads(dir, LONG_NAME, copy, sizeof(copy));
		if (cases[i].script)
			snprintf(script, sizeof(script), "%s", cases[i].script);
		test_child_start(&c, cases[i].script ? sh_argv : argv, env, true);
		test_child_expect(&c, "READY ", line, sizeof(line), 20000);
		ck_assert_msg(read_pctx(c.pid, s), "case %u: no process context", i);
		resource_text(s, "process.executable.name", exe, sizeof(exe));
		ck_assert_msg(strcmp(exe, LONG_NAME) == 0,
			      "case %u: process.executable.name %s", i, exe);
		resource_text(s, "service.name", svc, sizeof(svc));
		ck_assert_msg(strcmp(svc, cases[i].svc
						  ? cases[i].svc
						  : "unknown_service:" LONG_NAME) == 0,
			      "case %u: service.name %s", i, svc);
		ck_assert_int_eq(test_child_finish(&c, 20000), 0);
		unlink(copy);
		free(s);
	}
	ck_assert_int_eq(rmdir(dir), 0);
#undef LONG_NAME
}
END_TEST

/* Every string of the payload is UTF-8: protobuf strings must be, and a
 * reader that checks (Go's protobuf, in the eBPF profiler) refuses the
 * whole payload otherwise. */
static void
assert_all_utf8(const struct pctx_seen *s)
{
	unsigned i;

	for (i = 0; i < s->d.n_resource; i++) {
		const struct pctx_attr *a = &s->d.resource[i];

		ck_assert_msg(trec_utf8_valid(a->key.ptr, a->key.len),
			      "resource key %u is not UTF-8", i);
		if (a->type == PCTX_V_STRING)
			ck_assert_msg(trec_utf8_valid(a->str.ptr, a->str.len),
				      "value of %.*s is not UTF-8", (int)a->key.len,
				      (const char *)a->key.ptr);
	}
}

/* An executable whose file name is not UTF-8 (nor then its comm): no
 * process.executable.name, and service.name is plain unknown_service,
 * rather than bytes that make a checking reader refuse the payload. */
START_TEST(test_executable_name_not_utf8)
{
	char dir[] = "/tmp/ctxshim-exe-XXXXXX", copy[4096], line[4096];
	char *argv[] = {copy, "--wait", "4", NULL};
	struct pctx_seen *s = calloc(1, sizeof(*s));
	struct test_child c;

	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	copy_threads(dir, "thr\377\376ads", copy, sizeof(copy));
	test_child_start(&c, argv, NULL, true);
	test_child_expect(&c, "READY ", line, sizeof(line), 20000);
	ck_assert(read_pctx(c.pid, s));
	assert_all_utf8(s);
	ck_assert_ptr_null(pctx_find_resource(&s->d, "process.executable.name"));
	assert_resource(s, "service.name", "unknown_service");
	ck_assert_int_eq(test_child_finish(&c, 20000), 0);
	unlink(copy);
	ck_assert_int_eq(rmdir(dir), 0);
	free(s);
}
END_TEST

/* OTel SDK specification: ',' and '=' are percent-encoded in keys as in
 * values, so keys are decoded; OTEL_RESOURCE_ATTRIBUTES overrides the
 * shim's default service.instance.id (and OTEL_SERVICE_NAME still wins for
 * service.name); blank entries are skipped, not a decoding failure. */
START_TEST(test_resource_env_keys_and_precedence)
{
	struct test_child c;
	struct pctx_seen *s = calloc(1, sizeof(*s));
	char line[4096];
	char *env[] = {
		"OTEL_SERVICE_NAME=svc",
		"OTEL_RESOURCE_ATTRIBUTES=my%2Ckey%3D=v%3D1, k8s%2Epod = p ,dup=1,"
		"service.instance.id=pod-7.ctr,service.name=other,dup=2, \t,"
		"process.pid=1, ",
		NULL};

	start_threads(&c, env, line, sizeof(line));
	ck_assert(read_pctx(c.pid, s));
	assert_resource(s, "my,key=", "v=1");
	assert_resource(s, "k8s.pod", "p");
	assert_resource(s, "dup", "2"); /* the last of a repeated key */
	ck_assert_ptr_null(pctx_find_resource(&s->d, "my%2Ckey%3D"));
	assert_resource(s, "service.instance.id", "pod-7.ctr");
	assert_resource(s, "service.name", "svc");
	assert_resource(s, "telemetry.distro.name", "ctxshim");
	/* The pid is a fact about the process: the environment cannot set it,
	 * and it stays an int. */
	assert_resource_int(s, "process.pid", c.pid);
	ck_assert_int_eq(test_child_finish(&c, 20000), 0);

	/* An empty value is no value: the resource merge keeps the next
	 * source's (here the default), never an empty service.name. */
	env[0] = "OTEL_RESOURCE_ATTRIBUTES=service.name=,service.namespace=";
	env[1] = NULL;
	start_threads(&c, env, line, sizeof(line));
	ck_assert(read_pctx(c.pid, s));
	assert_resource(s, "service.name", "unknown_service:threads");
	assert_resource(s, "service.namespace", "");
	ck_assert_int_eq(test_child_finish(&c, 20000), 0);
	free(s);
}
END_TEST

/* Bytes that are not UTF-8 never reach the payload: in
 * OTEL_RESOURCE_ATTRIBUTES they are a decoding failure (the variable is
 * discarded whole, as for a bad escape, and so is a decoded NUL); an
 * OTEL_SERVICE_NAME that is not UTF-8 is ignored. */
START_TEST(test_resource_env_not_utf8)
{
	static char longbad[3][1200];
	char *const vars[] = {
		"OTEL_RESOURCE_ATTRIBUTES=a=1,bin=%FF%FE",
		"OTEL_RESOURCE_ATTRIBUTES=a=1,bin=\xc3\x28",
		"OTEL_RESOURCE_ATTRIBUTES=a=1,k%C0%AF=v",
		"OTEL_RESOURCE_ATTRIBUTES=a=1,nul=x%00y",
		/* an empty key is a decoding failure too (ctxshim(7)) */
		"OTEL_RESOURCE_ATTRIBUTES=a=1, =v",
		longbad[0],
		longbad[1],
		longbad[2],
	};
	unsigned i;

	/* past the 1023 bytes kept, a bad escape, a NUL or a byte that is
	 * not UTF-8 is still one (old: the entry was only skipped as too
	 * long) */
	for (i = 0; i < 3; i++) {
		static const char *const tail[] = {"%zz", "%00", "%C3%A9%FF"};
		size_t o = (size_t)snprintf(longbad[i], sizeof(longbad[i]),
					    "OTEL_RESOURCE_ATTRIBUTES=a=1,long=");

		memset(longbad[i] + o, 'x', 1100);
		snprintf(longbad[i] + o + 1100, sizeof(longbad[i]) - o - 1100, "%s",
			 tail[i]);
	}

	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		struct test_child c;
		struct pctx_seen *s = calloc(1, sizeof(*s));
		char line[4096];
		char *env[] = {vars[i], "OTEL_SERVICE_NAME=caf\xe9", NULL};

		start_threads(&c, env, line, sizeof(line));
		ck_assert(read_pctx(c.pid, s));
		assert_all_utf8(s);
		ck_assert_msg(!pctx_find_resource(&s->d, "a"), "%s kept", vars[i]);
		ck_assert_ptr_null(pctx_find_resource(&s->d, "bin"));
		ck_assert_ptr_null(pctx_find_resource(&s->d, "nul"));
		assert_resource(s, "service.name", "unknown_service:threads");
		ck_assert_int_eq(test_child_finish(&c, 20000), 0);
		free(s);
	}
}
END_TEST

/* Our own limits never cost more than the entry that exceeds them: an
 * OTEL_RESOURCE_ATTRIBUTES that fills the resource text (8 KiB, here to
 * its last byte, all kept) leaves the default service.name in place, a repeated key that finds no room keeps the value
 * it had, and a key longer than we keep skips that entry only. */
START_TEST(test_resource_env_limits)
{
	static char full[16384], repeat[16384], longkey[1024], edge[4096];
	char *vars[] = {full, repeat, longkey, edge};
	char key255[256], key256[257];
	unsigned i, j;
	size_t o;

	o = (size_t)snprintf(full, sizeof(full), "OTEL_RESOURCE_ATTRIBUTES=");
	for (i = 0; i < 8; i++) {
		o += (size_t)snprintf(full + o, sizeof(full) - o,
				      "%sk%u=", i ? "," : "", i);
		memset(full + o, 'x', 1020);
		o += 1020;
	}
	full[o] = '\0';
	o = (size_t)snprintf(repeat, sizeof(repeat),
			     "OTEL_RESOURCE_ATTRIBUTES=a=first,b=prod");
	for (i = 0; i < 9; i++) {
		o += (size_t)snprintf(repeat + o, sizeof(repeat) - o, ",a=");
		memset(repeat + o, 'y', 1000);
		o += 1000;
	}
	repeat[o] = '\0';
	o = (size_t)snprintf(longkey, sizeof(longkey), "OTEL_RESOURCE_ATTRIBUTES=a=1,");
	memset(longkey + o, 'k', 300);
	o += 300;
	snprintf(longkey + o, sizeof(longkey) - o, "=v,c=3");
	/* At the limits ctxshim(7) gives: a key of 255 bytes and a value of
	 * 1023 are kept, one byte more is skipped. */
	memset(key255, 'k', 255);
	key255[255] = '\0';
	o = (size_t)snprintf(edge, sizeof(edge),
			     "OTEL_RESOURCE_ATTRIBUTES=%s=v,b=", key255);
	memset(edge + o, 'b', 1023);
	o += 1023;
	o += (size_t)snprintf(edge + o, sizeof(edge) - o, ",j%s=x,c=", key255);
	memset(edge + o, 'c', 1024);
	o += 1024;
	snprintf(edge + o, sizeof(edge) - o, ",d=4");

	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		struct test_child c;
		struct pctx_seen *s = calloc(1, sizeof(*s));
		char line[4096];
		char *env[] = {vars[i], NULL};
		const struct pctx_attr *a;

		start_threads(&c, env, line, sizeof(line));
		ck_assert(read_pctx(c.pid, s));
		assert_resource(s, "service.name", "unknown_service:threads");
		if (i == 0) {
			a = pctx_find_resource(&s->d, "k7");
			ck_assert_msg(a && a->type == PCTX_V_STRING &&
					      a->str.len == 1020,
				      "the entry that fills the text to its end was "
				      "not kept");
		} else if (i == 1) {
			assert_resource(s, "b", "prod");
			a = pctx_find_resource(&s->d, "a");
			ck_assert_msg(a && a->type == PCTX_V_STRING &&
					      a->str.len == 1000,
				      "a lost its value");
			for (j = 0; j < 1000; j++)
				ck_assert_int_eq(a->str.ptr[j], 'y');
		} else if (i == 2) {
			assert_resource(s, "a", "1");
			assert_resource(s, "c", "3");
		} else if (i == 3) {
			assert_resource(s, key255, "v");
			a = pctx_find_resource(&s->d, "b");
			ck_assert_msg(a && a->type == PCTX_V_STRING &&
					      a->str.len == 1023,
				      "a value of 1023 bytes was not kept");
			ck_assert_msg(!pctx_find_resource(&s->d, "c"),
				      "a value of 1024 bytes was kept");
			snprintf(key256, sizeof(key256), "j%s", key255);
			ck_assert_msg(!pctx_find_resource(&s->d, key256),
				      "a key of 256 bytes was kept");
			assert_resource(s, "d", "4");
		}
		ck_assert_int_eq(test_child_finish(&c, 20000), 0);
		free(s);
	}
}
END_TEST

/* Past our room, each entry is skipped, not the rest of the variable:
 * service.name and service.instance.id are there whatever the number of
 * entries, a later entry that fits the text still gets in, and a
 * malformed entry past the room still discards the whole variable. */
START_TEST(test_resource_env_room)
{
	static char many[4096], bad[4200], text[16384];
	char *vars[] = {many, bad, text};
	unsigned i, j;
	size_t o;

	o = (size_t)snprintf(many, sizeof(many), "OTEL_RESOURCE_ATTRIBUTES=");
	for (i = 0; i < 60; i++)
		o += (size_t)snprintf(many + o, sizeof(many) - o, "%sk%u=v%u",
				      i ? "," : "", i, i);
	snprintf(bad, sizeof(bad), "%s,late=1,bad%%zz=1", many);
	o = (size_t)snprintf(text, sizeof(text), "OTEL_RESOURCE_ATTRIBUTES=");
	for (i = 0; i < 9; i++) {
		o += (size_t)snprintf(text + o, sizeof(text) - o,
				      "%sbig%u=", i ? "," : "", i);
		memset(text + o, 'x', 1000);
		o += 1000;
	}
	snprintf(text + o, sizeof(text) - o, ",small=s");

	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		struct test_child c;
		struct pctx_seen *s = calloc(1, sizeof(*s));
		char line[4096], key[16];
		char *env[] = {vars[i], NULL};
		unsigned found = 0;

		start_threads(&c, env, line, sizeof(line));
		ck_assert(read_pctx(c.pid, s));
		assert_resource(s, "service.name", "unknown_service:threads");
		ck_assert(pctx_find_resource(&s->d, "service.instance.id"));
		if (i == 0) {
			for (j = 0; j < 60; j++) {
				snprintf(key, sizeof(key), "k%u", j);
				found += pctx_find_resource(&s->d, key) != NULL;
			}
			/* the first ones, as many as fit beside ours */
			ck_assert_uint_ge(found, 30);
			ck_assert_uint_lt(found, 60);
			ck_assert(pctx_find_resource(&s->d, "k0"));
			ck_assert_uint_eq(s->d.n_resource, 48);
		} else if (i == 1) {
			ck_assert(!pctx_find_resource(&s->d, "k0"));
			ck_assert(!pctx_find_resource(&s->d, "late"));
		} else {
			ck_assert(pctx_find_resource(&s->d, "big0"));
			ck_assert(!pctx_find_resource(&s->d, "big8"));
			assert_resource(s, "small", "s");
		}
		ck_assert_int_eq(test_child_finish(&c, 20000), 0);
		free(s);
	}
}
END_TEST

START_TEST(test_disabled_publishes_nothing)
{
	struct test_child c;
	struct pctx_seen *s = calloc(1, sizeof(*s));
	char line[4096];
	char *env[] = {"CTXSHIM_DISABLE=1", NULL};

	start_threads(&c, env, line, sizeof(line));
	ck_assert(!read_pctx(c.pid, s));
	ck_assert_int_eq(test_child_finish(&c, 20000), 0);
	free(s);
}
END_TEST

/* The anonymous fallback: discoverable only where the kernel can name it
 * ([anon:OTEL_CTX]); otherwise the shim must say so in its log. */
START_TEST(test_anonymous_fallback)
{
	struct test_child c;
	struct pctx_seen *s = calloc(1, sizeof(*s));
	char line[4096], logpath[] = "/tmp/ctxshim-log-XXXXXX", logenv[128], log[8192];
	char *env[] = {"CTXSHIM_TEST_FORCE_ANON=1", logenv, NULL};
	int fd = test_mkstemp(logpath);
	ssize_t n;

	ck_assert_int_ge(fd, 0);
	snprintf(logenv, sizeof(logenv), "CTXSHIM_LOG=%s", logpath);
	start_threads(&c, env, line, sizeof(line));
	if (read_pctx(c.pid, s)) {
		ck_assert_int_eq(s->kind, PCTX_MAP_ANON);
		assert_resource(s, "telemetry.sdk.name", "ctxshim");
	} else {
		n = pread(fd, log, sizeof(log) - 1, 0);
		ck_assert_int_gt(n, 0);
		log[n] = '\0';
		ck_assert_msg(strstr(log, "not discoverable"), "log: %s", log);
	}
	ck_assert_int_eq(test_child_finish(&c, 20000), 0);
	close(fd);
	unlink(logpath);
	free(s);
}
END_TEST

/* Run /bin/true under the shim with its log on stderr, in a child that
 * first calls sandbox(arg); the log into log (NUL-terminated).  False,
 * with a note, where the sandbox cannot be made here (test_skip() would
 * end only this forked test, as an error). */
static bool
true_logged(const char *test,
	    bool (*sandbox)(const void *),
	    const void *arg,
	    char *log,
	    size_t cap)
{
	char tmpl[] = "/tmp/ctxshim-test-XXXXXX";
	int fe = test_mkstemp(tmpl), st;
	ssize_t n;
	pid_t pid;

	ck_assert_int_ge(fe, 0);
	unlink(tmpl);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(fe, 2);
		setenv("LD_PRELOAD", test_env_path("CTXSHIM_LIB"), 1);
		setenv("CTXSHIM_LOG", "stderr", 1);
		if (!sandbox(arg))
			_exit(77);
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
		fprintf(stderr, "note: %s not run: its sandbox cannot be made here\n",
			test);
		close(fe);
		return false;
	}
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "wait status %#x", st);
	n = pread(fe, log, cap - 1, 0);
	ck_assert_int_gt(n, 0);
	log[n] = '\0';
	close(fe);
	return true;
}

static bool
seccomp_sandbox(const void *prog)
{
	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
	       prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog) == 0;
}

/* A sandbox that refuses memfd_create() (a seccomp filter answering
 * EPERM, as systemd's SystemCallFilter= does by default with
 * SystemCallErrorNumber=): the context goes to the anonymous mapping, and
 * the log must say why there is no memfd, not only that the mapping
 * could not be named (which then reads as a kernel without
 * CONFIG_ANON_VMA_NAME). */
START_TEST(test_memfd_refused_is_logged)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_memfd_create, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
	char log[8192];

	if (!true_logged("memfd_refused_is_logged", seccomp_sandbox, &prog, log,
			 sizeof(log)))
		return;
	ck_assert_msg(strstr(log, "memfd_create") && strstr(log, strerror(EPERM)),
		      "log: %s", log);
}
END_TEST

static bool
no_proc_sandbox(const void *unused)
{
	(void)unused;
	return unshare(CLONE_NEWNS) == 0 &&
	       mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
	       umount2("/proc", MNT_DETACH) == 0;
}

/* A chroot or a sandbox without /proc: the shim cannot tell its
 * executable's name (service.name is plain unknown_service); the log
 * must say why. */
START_TEST(test_no_proc_is_logged)
{
	char log[8192];

	/* The sanitizer runtime preloaded before the shim needs /proc
	 * itself. */
	if (getenv("ASAN_OPTIONS")) {
		fprintf(stderr, "note: no_proc_is_logged not run: the sanitizer "
				"runtime needs /proc\n");
		return;
	}
	if (!true_logged("no_proc_is_logged", no_proc_sandbox, NULL, log, sizeof(log)))
		return;
	ck_assert_msg(strstr(log, "/proc/self/exe"), "log: %s", log);
}
END_TEST

START_TEST(test_fork_child_republishes)
{
	static char path[4096];
	char *argv[] = {path, "--fork", NULL};
	struct pctx_seen *p = calloc(1, sizeof(*p)), *k = calloc(1, sizeof(*k));
	char line[256], id_p[64], id_k[64];
	struct test_child c;
	int parent_pid = 0, child_pid = 0, i;

	snprintf(path, sizeof(path), "%s/threads", test_env_path("HELPER_DIR"));
	test_child_start(&c, argv, NULL, true);
	for (i = 0; i < 2; i++) {
		test_child_readline(&c, line, sizeof(line), 20000);
		if (sscanf(line, "PARENT %d", &parent_pid) != 1)
			ck_assert_int_eq(sscanf(line, "CHILD %d", &child_pid), 1);
	}
	ck_assert_int_gt(parent_pid, 0);
	ck_assert_int_gt(child_pid, 0);
	ck_assert(read_pctx(parent_pid, p));
	ck_assert(read_pctx(child_pid, k));
	/* Exactly one mapping each: MADV_DONTFORK kept the parent's out. */
	ck_assert_uint_eq(k->n_mappings, 1);
	resource_text(p, "service.instance.id", id_p, sizeof(id_p));
	resource_text(k, "service.instance.id", id_k, sizeof(id_k));
	ck_assert_str_ne(id_p, id_k);
	ck_assert(is_uuid4(id_k));
	/* Each its own pid, an int in the child too. */
	assert_resource_int(p, "process.pid", parent_pid);
	assert_resource_int(k, "process.pid", child_pid);
	ck_assert_int_eq(test_child_finish(&c, 20000), 0);
	free(p);
	free(k);
}
END_TEST

/* A pre-forking server (nginx) writes its process title over argv and the
 * original environment strings before it forks its workers: a worker's
 * process context, encoded after that, still has the service name the
 * process started with, never bytes of the title. */
START_TEST(test_fork_after_proctitle)
{
	static char path[4096];
	char *argv[] = {path, NULL};
	char *env_named[] = {"OTEL_SERVICE_NAME=billing", NULL};
	char *const *envs[] = {env_named, NULL};
	const char *want[] = {"billing", "unknown_service:proctitle"};
	unsigned i;

	snprintf(path, sizeof(path), "%s/proctitle", test_env_path("HELPER_DIR"));
	for (i = 0; i < 2; i++) {
		struct pctx_seen *k = calloc(1, sizeof(*k));
		struct test_child c;
		char line[256];
		int child_pid = 0, n;

		test_child_start(&c, argv, envs[i], true);
		for (n = 0; n < 2; n++) {
			test_child_readline(&c, line, sizeof(line), 20000);
			(void)sscanf(line, "CHILD %d", &child_pid);
		}
		ck_assert_int_gt(child_pid, 0);
		ck_assert(read_pctx(child_pid, k));
		assert_all_utf8(k);
		assert_resource(k, "service.name", want[i]);
		ck_assert_int_eq(test_child_finish(&c, 20000), 0);
		free(k);
	}
}
END_TEST

static unsigned
count_otel_ctx_maps(pid_t pid)
{
	char path[64], line[4096];
	unsigned n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		struct maps_entry e;
		size_t len = strcspn(line, "\n");

		if (maps_parse_line(line, len, &e) == 0 &&
		    pctx_map_name_kind(e.path, e.path_len) != PCTX_MAP_NONE)
			n++;
	}
	fclose(f);
	return n;
}

static void
read_log(int fd, char *buf, size_t n)
{
	ssize_t r = pread(fd, buf, n - 1, 0);

	ck_assert_int_ge(r, 0);
	buf[r] = '\0';
}

/* What the shim sets about itself and the process (process.pid,
 * process.executable.name, telemetry.*) OTEL_RESOURCE_ATTRIBUTES cannot
 * override: the entry is dropped, and the log names its key once.  A key
 * the shim does not set (telemetry.auto.version), or service.name, which
 * OTEL_SERVICE_NAME overrides as the specification orders, is not named. */
START_TEST(test_resource_env_own_keys_logged)
{
	static const char *const own[] = {"telemetry.sdk.name",
					  "telemetry.distro.version", "process.pid",
					  "process.executable.name"};
	static const char *const not_own[] = {"telemetry.auto.version", "service.name",
					      "k is"};
	struct pctx_seen *s = calloc(1, sizeof(*s));
	char line[4096], logpath[] = "/tmp/ctxshim-log-XXXXXX", logenv[64], log[8192];
	char want[256],
		*env[] = {"OTEL_SERVICE_NAME=svc",
			  "OTEL_RESOURCE_ATTRIBUTES=telemetry.sdk.name=x,k=1,process."
			  "pid=3,"
			  "telemetry.distro.version=9,process.executable.name=foo,"
			  "telemetry.auto.version=2,service.name=other,process.pid=4",
			  logenv, NULL};
	struct test_child c;
	int fd = test_mkstemp(logpath);
	unsigned i;

	ck_assert_int_ge(fd, 0);
	snprintf(logenv, sizeof(logenv), "CTXSHIM_LOG=%s", logpath);
	start_threads(&c, env, line, sizeof(line));
	ck_assert(read_pctx(c.pid, s));
	assert_resource(s, "telemetry.sdk.name", "ctxshim");
	assert_resource(s, "process.executable.name", "threads");
	assert_resource_int(s, "process.pid", c.pid);
	assert_resource(s, "telemetry.auto.version", "2");
	assert_resource(s, "service.name", "svc");
	read_log(fd, log, sizeof(log));
	for (i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
		const char *at;

		snprintf(want, sizeof(want),
			 "OTEL_RESOURCE_ATTRIBUTES: %s is set by the shim, ignoring "
			 "that entry\n",
			 own[i]);
		at = strstr(log, want);
		ck_assert_msg(at, "no line for %s; log: %s", own[i], log);
		/* once, even for a key the variable repeats */
		ck_assert_msg(!strstr(at + 1, want), "%s logged twice; log: %s", own[i],
			      log);
	}
	for (i = 0; i < sizeof(not_own) / sizeof(not_own[0]); i++) {
		snprintf(want, sizeof(want), "OTEL_RESOURCE_ATTRIBUTES: %s",
			 not_own[i]);
		ck_assert_msg(!strstr(log, want), "%s named; log: %s", not_own[i], log);
	}
	ck_assert_int_eq(test_child_finish(&c, 20000), 0);
	close(fd);
	unlink(logpath);
	free(s);
}
END_TEST

/* An SDK that published OTEL_CTX before us keeps it: one mapping, ours
 * never made, and the log says why. */
START_TEST(test_passive_when_context_exists)
{
	char threads[4096], preload[8192], logpath[] = "/tmp/ctxshim-log-XXXXXX";
	char logenv[64], line[256], log[4096];
	char *argv[] = {threads, "--wait", "1", NULL};
	char *env[] = {preload, logenv, NULL};
	struct test_child c;
	int fd = test_mkstemp(logpath);

	ck_assert_int_ge(fd, 0);
	snprintf(threads, sizeof(threads), "%s/threads", test_env_path("HELPER_DIR"));
	/* The later preload's constructor runs first. */
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s %s/libpctx-first.so",
		 test_env_path("CTXSHIM_LIB"), test_env_path("HELPER_DIR"));
	snprintf(logenv, sizeof(logenv), "CTXSHIM_LOG=%s", logpath);
	test_child_start(&c, argv, env, false);
	test_child_expect(&c, "READY ", line, sizeof(line), 20000);
	ck_assert_uint_eq(count_otel_ctx_maps(c.pid), 1);
	read_log(fd, log, sizeof(log));
	ck_assert_msg(
		strstr(log,
		       "passive: an OTEL_CTX process context is already published"),
		"log: %s", log);
	ck_assert_int_eq(test_child_finish(&c, 20000), 0);
	close(fd);
	unlink(logpath);
}
END_TEST

/* An instrumented executable defines otel_thread_ctx_v1 itself: the shim
 * neither publishes a process context nor writes a record. */
START_TEST(test_passive_when_symbol_defined)
{
	char writer[4096], logpath[] = "/tmp/ctxshim-log-XXXXXX", logenv[64];
	char line[8192], log[4096];
	char *argv[] = {writer, NULL};
	char *env[] = {logenv, NULL};
	struct test_child c;
	int fd = test_mkstemp(logpath);

	ck_assert_int_ge(fd, 0);
	snprintf(writer, sizeof(writer), "%s/writer-le", test_env_path("HELPER_DIR"));
	if (access(writer, X_OK) != 0)
		return;
	snprintf(logenv, sizeof(logenv), "CTXSHIM_LOG=%s", logpath);
	test_child_start(&c, argv, env, true);
	test_child_expect(&c, "READY ", line, sizeof(line), 20000);
	ck_assert_uint_eq(count_otel_ctx_maps(c.pid), 0);
	read_log(fd, log, sizeof(log));
	ck_assert_msg(strstr(log, "passive: another module defines otel_thread_ctx_v1"),
		      "log: %s", log);
	ck_assert_int_eq(test_child_finish(&c, 20000), 0);
	close(fd);
	unlink(logpath);
}
END_TEST

/* A real second writer, the OTEP variable in a library (writer-tls-lib.c),
 * makes the shim passive wherever it is: preloaded before the shim, or
 * loaded after it (a later preload, a library the program links, or a
 * plugin that a library's constructor loaded RTLD_LOCAL before ours ran,
 * writer-local-first.c, which dlsym() did not see), found through a
 * DT_GNU_HASH table (libwtls-tlsdesc.so) or a DT_HASH one
 * (libwtls-sysv.so), or through a read-only dynamic section whose
 * addresses ld.so leaves unrelocated (libdynsym-lld-ro.so, built when lld
 * is there).  The log says which side of us it is on. */
#define BEFORE_US "another module defines otel_thread_ctx_v1 before us"
#define AFTER_US  "a library loaded after us defines otel_thread_ctx_v1"

START_TEST(test_passive_when_library_defines)
{
	static const struct {
		const char *prog, *lib;
		bool lib_first;
		const char *why;
	} cases[] = {
		{"writer-tlsdesc", NULL, false, AFTER_US},
		{"threads", "libwtls-tlsdesc.so", true, BEFORE_US},
		{"threads", "libwtls-tlsdesc.so", false, AFTER_US},
		{"threads", "libwtls-sysv.so", true, BEFORE_US},
		{"threads", "libwtls-sysv.so", false, AFTER_US},
		{"threads", "libwriter-local-first.so", false, AFTER_US},
		{"threads", "libdynsym-lld-ro.so", true, BEFORE_US},
		{"threads", "libdynsym-lld-ro.so", false, AFTER_US},
	};
	char prog[4096], preload[8192], logpath[] = "/tmp/ctxshim-log-XXXXXX";
	char logenv[64], line[8192], log[4096], want[128];
	char *argv[] = {prog, "--wait", "1", NULL};
	char *env[] = {logenv, NULL, NULL};
	const char *dir = test_env_path("HELPER_DIR");
	const char *shim = test_env_path("CTXSHIM_LIB");
	struct test_child c;
	int fd;

	/* a library that only another linker builds */
	if (cases[_i].lib && access(test_helper_path(cases[_i].lib), F_OK) != 0)
		return;
	fd = test_mkstemp(logpath);
	ck_assert_int_ge(fd, 0);
	snprintf(prog, sizeof(prog), "%s/%s", dir, cases[_i].prog);
	if (strcmp(cases[_i].prog, "threads") != 0)
		argv[1] = NULL;
	snprintf(logenv, sizeof(logenv), "CTXSHIM_LOG=%s", logpath);
	if (cases[_i].lib) {
		if (cases[_i].lib_first)
			snprintf(preload, sizeof(preload), "LD_PRELOAD=%s/%s %s", dir,
				 cases[_i].lib, shim);
		else
			snprintf(preload, sizeof(preload), "LD_PRELOAD=%s %s/%s", shim,
				 dir, cases[_i].lib);
		env[1] = preload;
	}
	test_child_start(&c, argv, env, !cases[_i].lib);
	test_child_expect(&c, "READY ", line, sizeof(line), 20000);
	ck_assert_uint_eq(count_otel_ctx_maps(c.pid), 0);
	read_log(fd, log, sizeof(log));
	snprintf(want, sizeof(want), "passive: %s; ", cases[_i].why);
	ck_assert_msg(strstr(log, want), "%s with %s: log: %s", cases[_i].prog,
		      cases[_i].lib ? preload : "the shim", log);
	ck_assert_int_eq(test_child_finish(&c, 20000), 0);
	close(fd);
	unlink(logpath);
}
END_TEST

/* Two copies of the shim, two files (LD_PRELOAD and /etc/ld.so.preload
 * naming different installations): the first publishes, the second
 * stays passive.  Each took the other for another writer, and nothing
 * was published. */
START_TEST(test_active_when_loaded_twice)
{
	char threads[4096], copy[4200], preload[8400], dir[] = "/tmp/ctxshim-XXXXXX";
	char logpath[] = "/tmp/ctxshim-log-XXXXXX", logenv[64], line[256], log[4096];
	char *argv[] = {threads, "--wait", "1", NULL};
	char *cp[] = {"/bin/cp", (char *)test_shim_path(), copy, NULL};
	char *env[] = {preload, logenv, NULL};
	struct test_child c;
	char *out;
	int fd;

	ck_assert_ptr_nonnull(test_mkdtemp(dir));
	snprintf(copy, sizeof(copy), "%s/libctxshim.so", dir);
	ck_assert_int_eq(test_run_capture(cp, NULL, false, &out, NULL, 20000), 0);
	free(out);
	fd = test_mkstemp(logpath);
	ck_assert_int_ge(fd, 0);
	snprintf(threads, sizeof(threads), "%s/threads", test_env_path("HELPER_DIR"));
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s %s",
		 test_env_path("CTXSHIM_LIB"), copy);
	snprintf(logenv, sizeof(logenv), "CTXSHIM_LOG=%s", logpath);
	test_child_start(&c, argv, env, false);
	test_child_expect(&c, "READY ", line, sizeof(line), 20000);
	ck_assert_uint_eq(count_otel_ctx_maps(c.pid), 1);
	read_log(fd, log, sizeof(log));
	ck_assert_msg(strstr(log, "]: active (ctxshim "), "log: %s", log);
	ck_assert_msg(strstr(log, "passive: " BEFORE_US), "log: %s", log);
	ck_assert_msg(!strstr(log, AFTER_US), "log: %s", log);
	ck_assert_int_eq(test_child_finish(&c, 20000), 0);
	close(fd);
	unlink(logpath);
}
END_TEST

/* Does out hold exactly the helper's "READY <pid>" line, as
 * hostile-symbol.c prints it? */
static bool
only_ready_line(const char *out)
{
	int pid, end = 0;

	return sscanf(out, "READY %d\n%n", &pid, &end) == 1 && end > 0 && !out[end];
}

/* A program that defines otel_thread_ctx_v1 as something other than the
 * OTEP's 8-byte thread-local pointer (test/helpers/hostile-symbol.c: a
 * global object, a function, a 4-byte and a 64-byte thread-local) runs
 * with the shim as it runs without it, and the shim stays passive.  The
 * shim's TLS accesses used to go through the exported name, whose
 * relocation binds to the program's definition: ld.so died of SIGFPE
 * relocating it against the object and the function, before main(); the
 * thread-locals had the shim's descriptor address the program's variable
 * (4 bytes for an 8-byte access).  An IFUNC that nothing calls keeps its
 * resolver unrun: the shim used to ask dlsym() about the name, which ran
 * it in the shim's constructor, before the program's own constructors
 * (hostile-symbol.c's resolver then writes RESOLVER RAN to stderr). */
START_TEST(test_passive_when_symbol_misdefined)
{
	static const char *const kinds[] = {"object", "func", "size", "array", "ifunc"};
	char name[32], logpath[] = "/tmp/ctxshim-log-XXXXXX", logenv[64], log[4096];
	char *argv[2], *env[] = {logenv, NULL};
	char *out[2], *err[2];
	int status[2], fd = test_mkstemp(logpath);

	ck_assert_int_ge(fd, 0);
	snprintf(name, sizeof(name), "hostile-sym-%s", kinds[_i]);
	argv[0] = (char *)test_helper_path(name);
	argv[1] = NULL;
	snprintf(logenv, sizeof(logenv), "CTXSHIM_LOG=%s", logpath);
	for (int shim = 0; shim < 2; shim++)
		status[shim] = test_run_capture(argv, env, shim, &out[shim], &err[shim],
						20000);
	ck_assert_msg(WIFEXITED(status[0]) && WEXITSTATUS(status[0]) == 0,
		      "%s without the shim: wait status %#x", name, status[0]);
	ck_assert_msg(status[1] == status[0],
		      "%s with the shim: wait status %#x, without: %#x", name,
		      status[1], status[0]);
	ck_assert_msg(!strstr(err[1], "RESOLVER RAN"),
		      "%s: the shim ran the program's IFUNC resolver", name);
	for (int shim = 0; shim < 2; shim++) {
		ck_assert_msg(only_ready_line(out[shim]), "%s stdout: %s", name,
			      out[shim]);
		ck_assert_msg(!*err[shim], "%s stderr: %s", name, err[shim]);
		free(out[shim]);
		free(err[shim]);
	}
	read_log(fd, log, sizeof(log));
	ck_assert_msg(strstr(log, "passive: another module defines otel_thread_ctx_v1 "
				  "before us"),
		      "%s log: %s", name, log);
	ck_assert_msg(!strstr(log, "active (ctxshim"), "%s log: %s", name, log);
	close(fd);
	unlink(logpath);
}
END_TEST

/* One length limit for CTXSHIM_HEADER_ATTRS on every path: a 31-byte name
 * is listed and the socket level takes it (it logs the names it cannot
 * capture); a 32-byte one is refused up front, with a log line, and never
 * listed (it would name a key nginx-style servers never fill). */
START_TEST(test_header_name_limit)
{
	struct test_child c;
	struct pctx_seen *s = calloc(1, sizeof(*s));
	char line[4096], log[4096], logpath[] = "/tmp/ctxshim-log-XXXXXX", logenv[64];
	char *env[] = {"CTXSHIM_HEADER_ATTRS=x-abcdefghijklmnopqrstuvwxyz-31,"
		       "x-abcdefghijklmnopqrstuvwxyz-032",
		       logenv, NULL};
	int fd = test_mkstemp(logpath);

	ck_assert_int_ge(fd, 0);
	snprintf(logenv, sizeof(logenv), "CTXSHIM_LOG=%s", logpath);
	start_threads(&c, env, line, sizeof(line));
	ck_assert(read_pctx(c.pid, s));
	ck_assert_uint_eq(s->d.n_keys, 5);
	ck_assert(pctx_str_eq(s->d.key_map[3],
			      "http.request.header.x-abcdefghijklmnopqrstuvwxyz-31"));
	ck_assert(pctx_str_eq(s->d.key_map[4], "http.request.method_original"));
	read_log(fd, log, sizeof(log));
	ck_assert_msg(strstr(log,
			     "CTXSHIM_HEADER_ATTRS: 'x-abcdefghijklmnopqrstuvwxyz-032' "
			     "is longer than 31 bytes"),
		      "log: %s", log);
	ck_assert_msg(!strstr(log, "cannot capture"), "log: %s", log);
	ck_assert_int_eq(test_child_finish(&c, 20000), 0);
	close(fd);
	unlink(logpath);
	free(s);
}
END_TEST

/* CTXSHIM_HEADER_ATTRS holds at most 8 names (ctxshim(7)): a ninth is
 * logged and left out, never written past the table; blanks around a name
 * go, a name that is not an HTTP token is logged and left out. */
START_TEST(test_header_names_count_and_form)
{
	struct test_child c;
	struct pctx_seen *s = calloc(1, sizeof(*s));
	char line[4096], log[4096], logpath[] = "/tmp/ctxshim-log-XXXXXX", logenv[64];
	char name[64];
	char *env[] = {"CTXSHIM_HEADER_ATTRS=h1 \t,x:y,h2,h3,h4,h5,h6,h7,h8,h9", logenv,
		       NULL};
	unsigned i;
	int fd = test_mkstemp(logpath);

	ck_assert_int_ge(fd, 0);
	snprintf(logenv, sizeof(logenv), "CTXSHIM_LOG=%s", logpath);
	start_threads(&c, env, line, sizeof(line));
	ck_assert(read_pctx(c.pid, s));
	ck_assert_uint_eq(s->d.n_keys, 3 + 8 + 1);
	for (i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "http.request.header.h%u", i + 1);
		ck_assert_msg(pctx_str_eq(s->d.key_map[3 + i], name), "key %u", 3 + i);
	}
	ck_assert(pctx_str_eq(s->d.key_map[11], "http.request.method_original"));
	read_log(fd, log, sizeof(log));
	ck_assert_msg(strstr(log, "CTXSHIM_HEADER_ATTRS: 'x:y' is not a header name"),
		      "log: %s", log);
	ck_assert_msg(strstr(log, "CTXSHIM_HEADER_ATTRS: more than 8 headers, "
				  "ignoring 'h9'"),
		      "log: %s", log);
	ck_assert_int_eq(test_child_finish(&c, 20000), 0);
	close(fd);
	unlink(logpath);
	free(s);
}
END_TEST

/* A process started with a file size limit below a page (ulimit -f 1):
 * sizing the memfd past RLIMIT_FSIZE raises SIGXFSZ, whose default action
 * kills the process.  The shim must leave it running (the context goes to
 * the anonymous mapping instead), and so must its forked child. */
START_TEST(test_file_size_limit)
{
	static char path[4096];
	char *argv[] = {path, "--fork", NULL};
	struct rlimit saved, low;
	struct pctx_seen *s = calloc(1, sizeof(*s));
	char line[256];
	struct test_child c;
	int pids[2] = {0, 0}, i;

	snprintf(path, sizeof(path), "%s/threads", test_env_path("HELPER_DIR"));
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &saved), 0);
	low = saved;
	low.rlim_cur = 1024;
	/* only for the child: this process writes files of its own */
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &low), 0);
	test_child_start(&c, argv, NULL, true);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &saved), 0);
	for (i = 0; i < 2; i++) {
		test_child_readline(&c, line, sizeof(line), 20000);
		if (sscanf(line, "PARENT %d", &pids[0]) != 1)
			ck_assert_int_eq(sscanf(line, "CHILD %d", &pids[1]), 1);
	}
	for (i = 0; i < 2; i++) {
		ck_assert_int_gt(pids[i], 0);
		/* discoverable where the kernel names anonymous mappings */
		if (read_pctx(pids[i], s))
			ck_assert_int_eq(s->kind, PCTX_MAP_ANON);
	}
	ck_assert_int_eq(test_child_finish(&c, 20000), 0);
	free(s);
}
END_TEST

/* A file size limit of exactly the mapping's size (one page) lets the memfd
 * be sized: the context is the memfd, as without a limit, not the
 * anonymous fallback, which this kernel may not make discoverable. */
START_TEST(test_file_size_limit_at_size)
{
	static char path[4096];
	char *argv[] = {path, "--wait", "4", NULL};
	struct rlimit saved, low;
	struct pctx_seen *s = calloc(1, sizeof(*s));
	char line[4096];
	struct test_child c;

	snprintf(path, sizeof(path), "%s/threads", test_env_path("HELPER_DIR"));
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &saved), 0);
	low = saved;
	low.rlim_cur = (rlim_t)sysconf(_SC_PAGESIZE);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &low), 0);
	test_child_start(&c, argv, NULL, true);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &saved), 0);
	test_child_expect(&c, "READY ", line, sizeof(line), 20000);
	ck_assert(read_pctx(c.pid, s));
	ck_assert_uint_eq(s->end - s->start, (uint64_t)low.rlim_cur);
	ck_assert_int_eq(s->kind, PCTX_MAP_MEMFD);
	ck_assert_int_eq(test_child_finish(&c, 20000), 0);
	free(s);
}
END_TEST

TEST_SUITE(preload_pctx_suite)
{
	Suite *s = suite_create("Process context (OTEP-4719) publication");
	TCase *tc = tcase_create("publication");

	tcase_add_test(tc, test_published_and_decodes);
	tcase_add_test(tc, test_program_name_default);
	tcase_add_test(tc, test_executable_name);
	tcase_add_test(tc, test_executable_name_not_utf8);
	tcase_add_test(tc, test_resource_env_keys_and_precedence);
	tcase_add_test(tc, test_resource_env_not_utf8);
	tcase_add_test(tc, test_resource_env_limits);
	tcase_add_test(tc, test_resource_env_room);
	tcase_add_test(tc, test_resource_env_own_keys_logged);
	tcase_add_test(tc, test_disabled_publishes_nothing);
	tcase_add_test(tc, test_anonymous_fallback);
	tcase_add_test(tc, test_fork_child_republishes);
	tcase_add_test(tc, test_fork_after_proctitle);
	tcase_add_test(tc, test_file_size_limit);
	tcase_add_test(tc, test_file_size_limit_at_size);
	tcase_add_test(tc, test_passive_when_context_exists);
	tcase_add_test(tc, test_passive_when_symbol_defined);
	tcase_add_loop_test(tc, test_passive_when_library_defines, 0, 8);
	tcase_add_test(tc, test_active_when_loaded_twice);
	tcase_add_loop_test(tc, test_passive_when_symbol_misdefined, 0, 5);
	tcase_add_test(tc, test_header_name_limit);
	tcase_add_test(tc, test_header_names_count_and_form);
	tcase_add_test(tc, test_memfd_refused_is_logged);
	tcase_add_test(tc, test_no_proc_is_logged);
	suite_add_tcase(s, tc);
	return s;
}
