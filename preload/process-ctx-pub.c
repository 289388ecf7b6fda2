/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "process-ctx-pub.h"

#include "cfg.h"
#include "log.h"
#include "maps.h"
#include "process-ctx.h"
#include "resource-env.h"
#include "sys.h"
#include "thread-ctx.h"
#include "thread-record.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#endif
#ifndef PR_SET_VMA_ANON_NAME
#define PR_SET_VMA_ANON_NAME 0
#endif
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif

/* Bounds on what we take from the environment, so the payload (and this
 * file's static storage) stays small and fixed. */
#define MAX_RESOURCE 48
#define RES_TEXT_MAX 8192
#define PAYLOAD_MAX  16384

static const char *const builtin_keys[] = {
	[CTXSHIM_KEY_METHOD] = "http.request.method",
	[CTXSHIM_KEY_PATH] = "url.path",
	[CTXSHIM_KEY_PARENT] = "ctxshim.parent_span_id",
};

/* The resource: builtin entries plus OTEL_RESOURCE_ATTRIBUTES, decoded
 * into res_text.  Instance id and pid are regenerated after fork. */
static struct pctx_kv_typed resource[MAX_RESOURCE];
static size_t n_resource;
static char res_text[RES_TEXT_MAX];
static size_t res_text_len;
static char instance_id[37];
static char header_keys[CTXSHIM_MAX_HEADER_ATTRS][CTXSHIM_HEADER_NAME_MAX + 32];
static const char *key_map[CTXSHIM_KEY_FIRST_HEADER + CTXSHIM_MAX_HEADER_ATTRS + 1];
static size_t n_keys;

static uint8_t payload[PAYLOAD_MAX];
static struct otel_process_ctx_header *mapping;
static size_t mapping_size;

static const char *
store_text(const char *s, size_t len)
{
	char *dst;

	if (res_text_len + len + 1 > sizeof(res_text))
		return NULL;
	dst = res_text + res_text_len;
	memcpy(dst, s, len);
	dst[len] = '\0';
	res_text_len += len + 1;
	return dst;
}

static ssize_t
find_resource(const char *key)
{
	size_t i;

	for (i = 0; i < n_resource; i++)
		if (strcmp(resource[i].key, key) == 0)
			return (ssize_t)i;
	return -1;
}

/* Appends an entry for key; false if the resource is full. */
static bool
new_resource(const char *key)
{
	if (n_resource == MAX_RESOURCE) {
		ctxshim_log("resource attribute %s dropped (more than %d)", key,
			    MAX_RESOURCE);
		return false;
	}
	memset(&resource[n_resource], 0, sizeof(resource[n_resource]));
	resource[n_resource].key = key;
	n_resource++;
	return true;
}

/* Sets key to value unless it is already set (first writer wins, so call
 * in precedence order).  An empty value counts as unset: the OTel resource
 * merge takes the secondary value where the primary one is "". */
static void
add_resource(const char *key, const char *value)
{
	ssize_t i;

	if (!value) { /* store_text() ran out of room */
		ctxshim_log("resource attribute %s dropped (no room)", key);
		return;
	}
	i = find_resource(key);
	if (i >= 0) {
		if (resource[i].type == PCTX_V_STRING && !resource[i].str[0])
			resource[i].str = value;
		return;
	}
	if (!new_resource(key))
		return;
	resource[n_resource - 1].type = PCTX_V_STRING;
	resource[n_resource - 1].str = value;
}

/* An int-valued entry (semantic conventions type process.pid as int), set
 * unless key is already set, like add_resource(). */
static void
add_resource_int(const char *key, int64_t value)
{
	if (find_resource(key) >= 0 || !new_resource(key))
		return;
	resource[n_resource - 1].type = PCTX_V_INT;
	resource[n_resource - 1].i = value;
}

/* The message for each way OTEL_RESOURCE_ATTRIBUTES can be malformed. */
static const char *const resenv_why[] = {
	[RESENV_OK] = "",
	[RESENV_NO_EQ] = "has no '='",
	[RESENV_EMPTY_KEY] = "has an empty key",
	[RESENV_BAD_KEY] = "has a bad %-escape, a NUL or bytes that are not UTF-8 "
			   "in its key",
	[RESENV_BAD_VALUE] = "has a bad %-escape, a NUL or bytes that are not "
			     "UTF-8 in its value",
};

/* OTEL_RESOURCE_ATTRIBUTES, parsed by resenv_parse() into res_text; a
 * failure to decode discards the whole variable, as the OTel specification
 * asks. */
static void
load_resource_env(void)
{
	const char *env = secure_getenv("OTEL_RESOURCE_ATTRIBUTES");
	struct resenv_kv kv[MAX_RESOURCE];
	struct resenv_result r;
	size_t i, room;
	int ret;

	/* service.name and service.instance.id are added after these, and
	 * are never left out for them. */
	room = MAX_RESOURCE - 2 > n_resource ? MAX_RESOURCE - 2 - n_resource : 0;
	if (!env || !*env)
		return;
	ret = resenv_parse(env, kv, room, res_text, sizeof(res_text), &res_text_len,
			   &r);
	/* one line per entry, in the order the parser met them: all of them
	 * come before the one that is malformed, if any */
	for (i = 0; i < r.too_long; i++)
		ctxshim_log("OTEL_RESOURCE_ATTRIBUTES: an entry with a key over %d "
			    "or a value over %d bytes, skipping it",
			    RESENV_KEY_MAX, RESENV_VALUE_MAX);
	if (ret < 0) {
		ctxshim_log("OTEL_RESOURCE_ATTRIBUTES is malformed: entry %zu %s; "
			    "ignoring the whole variable, as the OTel specification "
			    "asks",
			    r.bad_entry, resenv_why[r.bad]);
		return;
	}
	if (r.skipped)
		ctxshim_log("OTEL_RESOURCE_ATTRIBUTES: %zu entries past our room "
			    "(%zu keys, %d bytes of text), skipped",
			    r.skipped, room, RES_TEXT_MAX);
	for (i = 0; i < r.n; i++) {
		/* What the shim set before (process.pid, process.executable.name,
		 * telemetry.*: see ctxshim_pctx_prepare()) stays, and the user
		 * who asked for something else is told.  Such a key is one of
		 * our own strings: nothing to escape.  service.name from
		 * OTEL_SERVICE_NAME stays too, as the specification orders. */
		if (find_resource(kv[i].key) >= 0 &&
		    strcmp(kv[i].key, "service.name") != 0)
			ctxshim_log("OTEL_RESOURCE_ATTRIBUTES: %s is set by the shim, "
				    "ignoring that entry",
				    kv[i].key);
		add_resource(kv[i].key, kv[i].value);
	}
}

/* A resource string must be UTF-8 (see resource-env.c, percent_decode()). */
static bool
utf8_text(const char *s)
{
	return trec_utf8_valid((const uint8_t *)s, strlen(s));
}

/* process.executable.name, and through it the default service.name (see
 * default_service_name()).  The semantic conventions' registry
 * (model/process/registry.yaml in open-telemetry/semantic-conventions):
 * "The name of the process executable. On Linux based systems, this SHOULD
 * be set to the base name of the target of /proc/[pid]/exe."  Earlier
 * versions said it "can be set to the Name in proc/[pid]/status", i.e.
 * /proc/self/comm; that changed (semantic-conventions issue #1736) because
 * comm is cut to 15 bytes and a process can rename itself
 * (prctl(PR_SET_NAME)).  comm also names the path given to execve(), not
 * the file: a symlink's name, "3" for an exec of /proc/self/fd/3 (runc,
 * fexecve()).  program_invocation_short_name is the base name of argv[0],
 * which the caller chooses ("-bash" for a login shell, bash's exec -a):
 * process.command's business, not the executable's, and its memory is the
 * process title's in pre-forking servers (nginx's ngx_setproctitle()
 * writes over it before forking the workers that encode the resource
 * again).  So: the link's base name, comm only when the link cannot be
 * read or its name cannot be used, else none.  Copied into a buffer of
 * our own either way, and UTF-8 or not at all (a protobuf string must
 * be, see resource-env.c).  Read in the constructor of every program
 * image: a forked child runs the same executable and keeps it, a program
 * started by exec loads the shim anew (LD_PRELOAD kept, or put back by
 * CTXSHIM_FOLLOW_EXEC) and reads its own. */
static const char *
executable_name(void)
{
	static char path[4096], comm[64], name[256];
	static const char deleted[] = " (deleted)";
	long r = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", path,
			 sizeof(path) - 1);
	int exe_errno = errno; /* when r < 0 */

	if (r > 0 && (size_t)r < sizeof(path) - 1) {
		size_t len = (size_t)r, dl = sizeof(deleted) - 1;
		const char *base;

		path[len] = '\0';
		/* The file was removed or replaced since the exec (a package
		 * upgrade), or it never had a name (an exec of a memfd). */
		if (len > dl && memcmp(path + len - dl, deleted, dl) == 0)
			path[len -= dl] = '\0';
		base = strrchr(path, '/');
		base = base ? base + 1 : path;
		len = strlen(base);
		if (len && len < sizeof(name) && utf8_text(base)) {
			memcpy(name, base, len + 1);
			return name;
		}
	}
	if (sys_read_file("/proc/self/comm", comm, sizeof(comm)) > 0) {
		comm[strcspn(comm, "\n")] = '\0';
		if (comm[0] && utf8_text(comm))
			return comm;
	}
	/* Said: service.name is then plain unknown_service, and the likely
	 * cause (a chroot or sandbox without /proc) is the user's to fix. */
	if (r < 0)
		ctxshim_log("cannot read /proc/self/exe: %s (is /proc mounted?); no "
			    "process.executable.name",
			    strerror(exe_errno));
	return NULL;
}

/* The semantic conventions, service.name (model/service/registry.yaml):
 * "If the value was not specified, SDKs MUST fallback to unknown_service:
 * concatenated with process.executable.name, e.g. unknown_service:bash.
 * If process.executable.name is not available, the value MUST be set to
 * unknown_service."  Made from the resource's process.executable.name
 * (ours; OTEL_RESOURCE_ATTRIBUTES's only where we found none), so the two
 * always agree.  In a buffer of its own (the longest value we keep, 1023
 * bytes, fits): it must not depend on the room OTEL_RESOURCE_ATTRIBUTES
 * left in res_text. */
static const char *
default_service_name(void)
{
	static char svc[sizeof("unknown_service:") + 1024];
	ssize_t i = find_resource("process.executable.name");

	if (i < 0 || resource[i].type != PCTX_V_STRING || !resource[i].str[0])
		return "unknown_service";
	snprintf(svc, sizeof(svc), "unknown_service:%s", resource[i].str);
	return svc;
}

static void
refresh_ids(void)
{
	ssize_t i = find_resource("process.pid");

	ctxshim_random_uuid(instance_id);
	/* A forked child encodes the resource again, with its own pid. */
	if (i >= 0 && resource[i].type == PCTX_V_INT)
		resource[i].i = (int64_t)getpid();
}

void
ctxshim_pctx_prepare(void)
{
	const char *svc = secure_getenv("OTEL_SERVICE_NAME"), *exe;
	unsigned i;

	n_resource = 0;
	res_text_len = 0;
	refresh_ids();
	/* Precedence (first added wins): OTEL_SERVICE_NAME, then
	 * OTEL_RESOURCE_ATTRIBUTES, then our defaults, as in the OTel SDK
	 * environment variable specification.  Except for what describes the
	 * shim and the process itself (telemetry.*, process.pid,
	 * process.executable.name: facts -- the environment also reaches the
	 * programs this one executes -- and `ctxshim status` tells our context
	 * by telemetry.distro.name), which go first.  The default service.name
	 * comes last, from the process.executable.name that won.  A user's
	 * service.instance.id is kept, also in a forked child, as an SDK
	 * initialised from the same environment would.  Strings from the
	 * environment are copied: a forked child encodes the resource again,
	 * and pre-forking servers (nginx's ngx_setproctitle()) write their
	 * title over that memory first. */
	if (svc && *svc) {
		if (utf8_text(svc))
			add_resource("service.name", store_text(svc, strlen(svc)));
		else
			ctxshim_log("OTEL_SERVICE_NAME is not UTF-8, ignoring it");
	}
	add_resource_int("process.pid", (int64_t)getpid());
	exe = executable_name();
	if (exe)
		add_resource("process.executable.name", exe);
	add_resource("telemetry.sdk.name", "ctxshim");
	add_resource("telemetry.sdk.language", "c");
	add_resource("telemetry.sdk.version", CTXSHIM_VERSION);
	add_resource("telemetry.distro.name", "ctxshim");
	add_resource("telemetry.distro.version", CTXSHIM_VERSION);
	load_resource_env();
	add_resource("service.name", default_service_name());
	add_resource("service.instance.id", instance_id);

	n_keys = 0;
	key_map[n_keys++] = builtin_keys[CTXSHIM_KEY_METHOD];
	key_map[n_keys++] = builtin_keys[CTXSHIM_KEY_PATH];
	key_map[n_keys++] = builtin_keys[CTXSHIM_KEY_PARENT];
	for (i = 0; i < ctxshim_cfg.n_header_attrs; i++) {
		snprintf(header_keys[i], sizeof(header_keys[i]),
			 "http.request.header.%s", ctxshim_cfg.header_attrs[i]);
		key_map[n_keys++] = header_keys[i];
	}
	/* Index CTXSHIM_KEY_FIRST_HEADER + n_header_attrs, appended so that no
	 * earlier index moves: ctxshim_key_method_original() (request-ctx.h). */
	key_map[n_keys++] = "http.request.method_original";
}

static uint64_t
boottime_ns(void)
{
	struct timespec ts;
	uint64_t ns;

	/* Never 0, which readers take for "being written" and would wait on
	 * forever: a clock that fails (a seccomp filter where the vDSO falls
	 * back to the system call) gives the monotonic one, then 1. */
	if (clock_gettime(CLOCK_BOOTTIME, &ts) != 0 &&
	    clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		return 1;
	ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	return ns ? ns : 1;
}

/* Whether a memfd of size bytes may be made: sizing it past RLIMIT_FSIZE
 * (ulimit -f) raises SIGXFSZ (inode_newsize_ok() in the kernel), which
 * kills a process that keeps the default action.  The anonymous mapping
 * is the OTEP's fallback when there is no memfd. */
static bool
memfd_allowed(size_t size)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_FSIZE, &rl) != 0) {
		ctxshim_log("cannot read RLIMIT_FSIZE: %s: no memfd", strerror(errno));
		return false;
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < size) {
		ctxshim_log("RLIMIT_FSIZE %llu is below the %zu bytes of the process "
			    "context: no memfd",
			    (unsigned long long)rl.rlim_cur, size);
		return false;
	}
	return true;
}

bool
ctxshim_pctx_publish(void)
{
	struct otel_process_ctx_header *h;
	size_t len = 0, size, page = (size_t)sysconf(_SC_PAGESIZE);
	bool memfd = false, named;
	void *addr = MAP_FAILED;
	int fd = -1, r;

	r = pctx_encode_typed(payload, sizeof(payload), &len, resource, n_resource,
			      PCTX_SCHEMA_VERSION, key_map, n_keys);
	if (r < 0) {
		ctxshim_log("cannot encode the process context: error %d", r);
		return false;
	}
	/* One mapping holds the header and, right after it, the payload: a
	 * reader finds both with one maps lookup, and the payload lives as
	 * long as the mapping. */
	size = (sizeof(*h) + len + page - 1) & ~(page - 1);

	if (!ctxshim_cfg.test_force_anon && memfd_allowed(size)) {
		fd = (int)syscall(SYS_memfd_create, "OTEL_CTX",
				  MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL);
		if (fd < 0)
			fd = (int)syscall(SYS_memfd_create, "OTEL_CTX",
					  MFD_CLOEXEC | MFD_ALLOW_SEALING);
		/* Said here: the anonymous mapping's message below would blame
		 * the kernel's naming alone (a sandbox refusing memfd_create,
		 * no descriptor free). */
		if (fd < 0)
			ctxshim_log("memfd_create(OTEL_CTX) failed: %s; using an "
				    "anonymous mapping",
				    strerror(errno));
	}
	if (fd >= 0) {
		if (ftruncate(fd, (off_t)size) == 0)
			addr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd,
				    0);
		if (addr == MAP_FAILED)
			ctxshim_log(
				"cannot size or map the OTEL_CTX memfd: %s; using an "
				"anonymous mapping",
				strerror(errno));
		sys_close(fd);
		memfd = addr != MAP_FAILED;
	}
	if (addr == MAP_FAILED)
		addr = mmap(NULL, size, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (addr == MAP_FAILED) {
		ctxshim_log("cannot map the process context: %s", strerror(errno));
		return false;
	}
	if (madvise(addr, size, MADV_DONTFORK) != 0) {
		ctxshim_log("madvise(MADV_DONTFORK) on the process context failed: %s",
			    strerror(errno));
		munmap(addr, size);
		return false;
	}

	h = addr;
	memcpy((uint8_t *)addr + sizeof(*h), payload, len);
	memcpy(h->signature, PCTX_SIGNATURE, sizeof(h->signature));
	h->version = PCTX_VERSION;
	h->payload_size = (uint32_t)len;
	h->payload = (uint64_t)(uintptr_t)((uint8_t *)addr + sizeof(*h));
	atomic_thread_fence(memory_order_seq_cst);
	/* The timestamp goes last: readers treat 0 as "not ready". */
	*(volatile uint64_t *)&h->monotonic_published_at_ns = boottime_ns();
	atomic_thread_fence(memory_order_seq_cst);

	named = prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)addr, size,
		      (unsigned long)"OTEL_CTX") == 0;
	mapping = h;
	mapping_size = size;

	if (!memfd && !named)
		ctxshim_log("process context published at %p but not discoverable: no "
			    "memfd "
			    "and the kernel refused to name the mapping "
			    "(CONFIG_ANON_VMA_NAME?)",
			    addr);
	else
		ctxshim_log("process context published at %p (%zu bytes payload, %s%s)",
			    addr, len, memfd ? "memfd" : "anonymous",
			    named ? ", named" : "");
	return true;
}

void
ctxshim_pctx_after_fork_child(void)
{
	/* MADV_DONTFORK: the parent's mapping does not exist here. */
	mapping = NULL;
	mapping_size = 0;
	refresh_ids();
	(void)ctxshim_pctx_publish();
}

static bool
pctx_map_line(const struct maps_entry *e, void *arg)
{
	(void)arg;
	return pctx_map_name_kind(e->path, e->path_len) != PCTX_MAP_NONE;
}

bool
ctxshim_pctx_exists(void)
{
	static char buf[4096];

	return sys_maps_scan(buf, sizeof(buf), pctx_map_line, NULL);
}
