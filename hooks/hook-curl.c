/* SPDX-License-Identifier: Apache-2.0 */
/* libcurl: outgoing HTTP requests carry the thread's trace context.
 *
 * Versions.  Debian ships libcurl in three builds whose symbols carry
 * different version nodes: libcurl.so.4 (CURL_OPENSSL_4),
 * libcurl-gnutls.so.4 (CURL_GNUTLS_3) and libcurl-nss.so.4 (CURL_NSS_3),
 * and a process may load two of them (a plugin built against the other).
 * An unversioned hook would catch all three and then forward to whichever
 * dlsym(RTLD_NEXT) finds first.  So every hooked name is exported once per
 * node (".symver ..., name@NODE, remove", the nodes are in
 * preload/ctxshim.sym) and each copy forwards with dlvsym() to its own
 * flavour (the technique of libfaketime's pthread_cond_timedwait
 * wrappers).  References without a version (a self-built unversioned
 * libcurl) do not match these non-default definitions and go straight to
 * libcurl: no injection there.  A flavour loaded RTLD_LOCAL (a plugin's
 * dependency) is invisible to RTLD_NEXT; we then look it up by soname with
 * RTLD_NOLOAD, which also pins it so our pointers cannot outlive it.  A
 * caller with its own copy of a flavour (under another soname) is passed
 * to that copy, untouched (preload/bind.h, ctxshim_callers_own()).
 *
 * Headers.  libcurl neither copies CURLOPT_HTTPHEADER lists nor offers a
 * way to add one header, and the application's list is its own memory,
 * which it may still extend after curl_multi_add_handle (libcurl reads
 * the list when it sends the request).  We remember the list the
 * application sets, per handle, and when a transfer starts
 * (curl_easy_perform, curl_multi_add_handle) give curl a list that starts
 * with our one or two nodes ("traceparent: ..." and "tracestate: ...", in
 * one allocation of ours) and goes on, through the next pointer of our
 * last node, into the application's live list: curl then sees the lines
 * the application appends later, and nothing of the application's is
 * copied or written.  No pointer of the application's leads to our nodes,
 * so its curl_slist_free_all() never reaches them; we free them when the
 * transfer ends (curl_easy_perform returns, curl_multi_remove_handle,
 * curl_multi_cleanup, curl_easy_cleanup, curl_easy_reset), after giving
 * curl the application's own list back, and we never walk past them (the
 * application may free its list once its transfer is over).  A new
 * CURLOPT_HTTPHEADER while ours is in use is looked at as on the first
 * start: our last node is linked to the new list, or ours is dropped when
 * the new list has trace context of its own.  curl_easy_duphandle would
 * copy the pointer to our list into the new handle, so the copy gets the
 * application's list back.
 *
 * Lines added after the start.  The application may also give its live
 * list a traceparent or tracestate line after the transfer started
 * (curl_slist_append after curl_multi_add_handle, from a callback, or
 * between two requests of one transfer), and then owns propagation as
 * below.  So the decision is taken again right before libcurl builds each
 * request: while our nodes are installed, libcurl's CURLOPT_PREREQFUNCTION
 * is ours (curl_prereq()), which calls the application's own callback, if
 * any, with its own pointer, then scans the application's list (valid
 * then: libcurl is about to send it) and, if it has trace context now,
 * gives curl that list itself, so the request is the application's list
 * byte for byte (and a blocking call shows the thread's own context
 * again, as when the line was there from the start).  libcurl 7.88 calls that callback in multi.c,
 * multi_runsingle(), state MSTATE_DO, just before multi_do() builds the
 * request (http.c, Curl_http() and Curl_add_custom_headers() read the
 * list), on the handle's own thread, for every request of a transfer
 * (after a redirect, on a reused connection).  Hooking curl_slist_append
 * instead would see only appends made with that call and the list's head
 * (an application may keep a tail pointer, link its own nodes or change a
 * node's data), would take our lock in every append of every thread, and
 * could tell a list from another only by its head pointer: walking other
 * handles' lists is unsafe (an application may free its list once its
 * transfer is done, before curl_multi_remove_handle).  Setting our nodes'
 * data to a line libcurl skips ("" has neither ':' nor ';', see
 * Curl_add_custom_headers()) would leave a line CURLOPT_AWS_SIGV4 still
 * signs (http_aws_sigv4.c, make_headers()); the application's list
 * itself leaves nothing of ours.  The callback is the application's again
 * (libcurl's CURLOPT_PREREQFUNCTION and CURLOPT_PREREQDATA as it set
 * them) whenever our nodes are not installed, and in a
 * curl_easy_duphandle copy.
 *
 * Internal calls.  libcurl calls its own exported functions through the
 * PLT: curl_easy_perform calls curl_multi_add_handle/remove_handle,
 * curl_multi_init calls curl_easy_init for its connection-closure handle,
 * DNS-over-HTTPS sets up internal handles with curl_easy_setopt and
 * curl_multi_add_handle, HTTP/2 server push duplicates handles.  Those are
 * not the application's transfers: a call whose return address lies in
 * the flavour's own text passes straight through.  curl_easy_perform also
 * marks its handle in a thread-local, so its own curl_multi_add_handle is
 * recognised even in a build that would call it some other way.
 *
 * What is sent (W3C Trace Context, processing model).  The thread's
 * current context is the server span of the request being handled.  Each
 * transfer gets a new span-id, a child of it, with the same trace-id and
 * flags (sampled and the Level 2 random bit unchanged) and the incoming
 * tracestate unchanged: we mint a span-id but own no tracestate key, so
 * the list is forwarded as received (normalised, at most 512 bytes).
 * While curl_easy_perform blocks, the thread's record shows that client
 * span, then the server context again.  With the multi interface the
 * context is taken when the handle is added; the record is left alone,
 * since one thread drives many transfers.
 *
 * CTXSHIM_PROPAGATE=transparent forwards the incoming parent-id instead (a
 * locally started trace has none: then the server span-id).  The trade-off:
 * the shim records no spans, so the span-ids it mints appear in no
 * tracing backend; with the default, the callee's spans point at a parent
 * nobody reported (the backend shows a gap for this service, but a
 * profile taken during the call names exactly this request).  Transparent
 * keeps the backend's tree connected (the callee looks like a direct
 * child of our caller) at the price of several calls sharing one
 * parent-id and of no client span in the record.  CTXSHIM_PROPAGATE=0
 * injects nothing.
 *
 * No context, no header.  A thread with no context (not handling a
 * request: a CLI, a cron job, a daemon's start-up) sends nothing: the W3C
 * "SHOULD send a new traceparent" is about a participant that received a
 * request without one, and that case does have a context here (the
 * incoming hooks start a new trace for it, unless CTXSHIM_NEW_TRACES=0,
 * which publishes zero ids and so sends nothing either).  Inventing
 * traces for every curl-using program in a system-wide preload would send
 * random ids to arbitrary servers.
 *
 * The application's own trace context.  A list that already has a
 * traceparent or a tracestate line (any case, any form: "traceparent:"
 * with no value disables the header, "traceparent;" sends it empty) is
 * left exactly as it is: an application that sets either header owns
 * propagation for that request, and our traceparent next to its
 * tracestate would file its vendors' state under our trace.  When the
 * thread has no context and the application's traceparent is valid, the
 * thread publishes it during curl_easy_perform (span-id = its parent-id),
 * so programs that propagate by hand become visible to profilers too.
 *
 * A jump out of a signal handler that ends curl_easy_perform (a client's
 * request timeout: alarm() and siglongjmp(); hook-longjmp.c) skips what
 * the hook does after the real call: hook_curl_unwound() publishes again
 * what the thread showed before the call, and the handle's next hooked
 * call gives it the application's list back and frees our nodes
 * (curl_settle(); the handler may not: it may have interrupted curl, or
 * malloc).  libcurl 7.88 refuses another perform on such a
 * handle (CURLE_FAILED_INIT: it stays in curl_easy_perform's own multi
 * handle), so nothing more is sent with our nodes in between.
 *
 * Only http and https: CURLOPT_HTTPHEADER also holds the MIME headers of
 * SMTP and IMAP uploads.  The scheme is taken the way libcurl takes it:
 * CURLOPT_CURLU before CURLOPT_URL, a scheme only when followed by ":/",
 * otherwise CURLOPT_DEFAULT_PROTOCOL, or else libcurl's guess from the host
 * name. */
#include "config.h"

#include "hooks.h"

#include "cfg.h"
#include "events.h"
#include "hook-scope.h"
#include "log.h"
#include "w3c.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <curl/curl.h>
/* uthash's default on a failed allocation is exit(): never in a host
 * process.  A failed add leaves the entry's hh.tbl NULL; we free the entry
 * and the handle goes untraced. */
#define HASH_NONFATAL_OOM 1
#include <uthash.h>

/* typecheck-gcc.h turns it into a macro. */
#undef curl_easy_setopt

/* Application lists longer than this are left alone (a list that long is
 * a bug, or a cycle). */
#define CURL_LIST_MAX     10000
#define CURL_TS_LINES_MAX 32

enum curl_flavour {
	CURL_FL_OPENSSL,
	CURL_FL_GNUTLS,
	CURL_FL_NSS,
	CURL_FL_N,
};

enum curl_fn {
	CURL_FN_EASY_INIT,
	CURL_FN_EASY_SETOPT,
	CURL_FN_EASY_PERFORM,
	CURL_FN_EASY_CLEANUP,
	CURL_FN_EASY_RESET,
	CURL_FN_EASY_DUPHANDLE,
	CURL_FN_MULTI_ADD_HANDLE,
	CURL_FN_MULTI_REMOVE_HANDLE,
	CURL_FN_MULTI_CLEANUP,
	CURL_FN_HOOKED, /* the ones above are ours too; the ones below optional */
	CURL_FN_URL_GET = CURL_FN_HOOKED,
	CURL_FN_FREE,
	CURL_FN_N,
};

static const char *const curl_fn_name[CURL_FN_N] = {
	"curl_easy_init",
	"curl_easy_setopt",
	"curl_easy_perform",
	"curl_easy_cleanup",
	"curl_easy_reset",
	"curl_easy_duphandle",
	"curl_multi_add_handle",
	"curl_multi_remove_handle",
	"curl_multi_cleanup",
	"curl_url_get",
	"curl_free",
};

/* One flavour's real functions. */
struct curl_real {
	const char *version; /* its symbol version node */
	const char *soname;
	const void *const *self; /* our exported copies, by enum curl_fn */
	void *fn[CURL_FN_N];
	/* The flavour's executable segments: calls from there are internal. */
	uintptr_t text_lo, text_hi;
	bool complete; /* every hooked function found */
	struct ctxshim_callers callers;
};

typedef CURL *(*curl_easy_init_fn)(void);
typedef CURLcode (*curl_easy_setopt_fn)(CURL *, CURLoption, ...);
typedef CURLcode (*curl_easy_perform_fn)(CURL *);
typedef void (*curl_easy_cleanup_fn)(CURL *);
typedef void (*curl_easy_reset_fn)(CURL *);
typedef CURL *(*curl_easy_duphandle_fn)(CURL *);
typedef CURLMcode (*curl_multi_handle_fn)(CURLM *, CURL *);
typedef CURLMcode (*curl_multi_cleanup_fn)(CURLM *);
typedef CURLUcode (*curl_url_get_fn)(const CURLU *, CURLUPart, char **, unsigned int);
typedef void (*curl_free_fn)(void *);
/* Any function pointer travels through a va_list the same way; this is
 * the type we read it as for CURLOPTTYPE_FUNCTIONPOINT options. */
typedef void (*curl_any_fn)(void);

/* What we know about one application handle.  A handle is used by one
 * thread at a time (libcurl's rule), so only the table needs the lock. */
struct curl_handle {
	CURL *easy; /* key */
	struct curl_real *real;
	struct curl_slist *app;  /* the application's CURLOPT_HTTPHEADER */
	struct curl_slist *ours; /* our nodes, then app: what curl holds now, or NULL */
	unsigned ours_extra;     /* the number of our nodes at the start of ours */
	CURLM *multi;            /* ours is installed for this multi handle */
	CURLU *curlu;            /* CURLOPT_CURLU */
	uint8_t url_kind;        /* enum curl_url_kind of CURLOPT_URL */
	bool default_other;      /* CURLOPT_DEFAULT_PROTOCOL is not http(s) */
	bool default_http;       /* CURLOPT_DEFAULT_PROTOCOL is http(s) */
	bool sigv4;              /* libcurl signs the request (AWS SigV4) */
	/* The application's CURLOPT_PREREQFUNCTION and CURLOPT_PREREQDATA. */
	curl_prereq_callback app_prereq;
	void *app_prereq_data;
	bool prereq_ours; /* curl calls curl_prereq() for this handle */
	bool ours_off;    /* ours is set aside: curl holds app, as it is */
	bool app_set;     /* app is what the application set (or copied) */
	UT_hash_handle hh;
};

enum curl_url_kind {
	CURL_URL_UNSET,
	CURL_URL_HTTP,
	CURL_URL_OTHER,
	CURL_URL_GUESS,       /* no scheme: libcurl's guess is http */
	CURL_URL_GUESS_OTHER, /* no scheme: libcurl's guess is another protocol */
};

static struct curl_handle *curl_handles;
/* The table's lock: 0 when free, else its holder's thread id (gettid(),
 * below 2^30), with CURL_LOCK_WAITERS set while other threads may sleep
 * on it (futex).  It names its holder, for a fork() from a signal handler
 * that interrupted a holder (curl_atfork_lock()): that thread holds it
 * from the very instruction that takes it to the one that gives it back,
 * which a flag set after a pthread_mutex_lock() is not (a signal lands
 * right after the lock's atomic instruction more often than anywhere
 * else). */
static uint32_t curl_lock;
#define CURL_LOCK_WAITERS 0x80000000u

/* Once the process has seen a signal handler's jump end a curl hook
 * (curl_jumped), the thread's signals are blocked while it holds
 * curl_lock: such a jump (a client's request timeout, siglongjmp(),
 * hook-longjmp.c) could otherwise leave the lock held, and every later
 * hooked call of the process would wait for it for good; nor can
 * anything release it for the jump, since the table (uthash's lists,
 * e->ours just freed) is not consistent at every instruction.  Blocked,
 * the signal arrives when the mask is restored, after the unlock.  The
 * synchronous signals (a fault of the thread's own) stay unblocked: the
 * kernel would kill the process instead of running the application's
 * handler; and so do glibc's two internal ones (cancellation, setxid), as
 * pthread_sigmask() leaves them.
 *
 * Only then: the kernel's 64-bit set, by system call, is two calls per
 * critical section (curl_sig_block()), six per transfer with its
 * curl_easy_setopt(CURLOPT_URL), about 2.7 us on a 30 us keep-alive
 * loopback request -- a price for every libcurl client to guard against
 * what only one that jumps out of libcurl can meet.  Before its first such
 * jump a process pays one load per critical section, and that first jump
 * can still land in one: the hooks hold the lock for a few hundred
 * instructions of a transfer, so the window is small (and jumping out of
 * libcurl, which is not async-signal-safe, is already undefined in
 * POSIX).  The lock word names its holder, and the jump could release it
 * for nothing, but the table may be half-changed then: a new one would
 * have to replace it, every handle set up before going untraced. */
#define CURL_SIGBIT(sig) (UINT64_C(1) << ((sig)-1))
static const uint64_t curl_lock_sigs =
	~(CURL_SIGBIT(SIGSEGV) | CURL_SIGBIT(SIGBUS) | CURL_SIGBIT(SIGFPE) |
	  CURL_SIGBIT(SIGILL) | CURL_SIGBIT(SIGTRAP) | CURL_SIGBIT(SIGSYS) |
	  CURL_SIGBIT(SIGKILL) | CURL_SIGBIT(SIGSTOP) | CURL_SIGBIT(32) |
	  CURL_SIGBIT(33));
/* A jump ended a curl hook's frame, in any thread (hook_curl_unwound()). */
static bool curl_jumped;
/* The mask to restore, and how many curl_sig_block() calls of this
 * thread that blocked or nest in one that did are running: the outermost
 * blocks and restores, so that a hook whose critical sections follow one
 * another (curl_easy_perform's before the real call) pays one pair of
 * system calls for all.  Counted only while blocked, so that no jump out
 * of an unblocked section leaves a count behind. */
static __thread uint64_t curl_sig_mask __attribute__((tls_model("initial-exec")));
static __thread unsigned curl_sig_depth __attribute__((tls_model("initial-exec")));
/* The stack pointer of the outermost curl_sig_block() that blocked: a
 * jump above it out of a fault's handler (which the block lets through)
 * ends the blocked section (hook_curl_unwound()). */
static __thread uintptr_t curl_sig_sp __attribute__((tls_model("initial-exec")));

/* Blocks, counted as depth.  In this order, so that a jump out of a
 * fault's handler anywhere in between finds what to put back
 * (hook_curl_unwound()): the count first, and the application's mask
 * written by the kernel itself as it blocks (until then our whole set:
 * a mask without all of it is not ours yet). */
static inline __attribute__((always_inline)) void
curl_sig_enter(unsigned depth)
{
	curl_sig_mask = curl_lock_sigs;
	curl_sig_sp = ctxshim_stack_pointer();
	atomic_signal_fence(memory_order_seq_cst);
	curl_sig_depth = depth;
	atomic_signal_fence(memory_order_seq_cst);
	(void)syscall(SYS_rt_sigprocmask, SIG_BLOCK, &curl_lock_sigs, &curl_sig_mask,
		      sizeof(curl_sig_mask));
}

/* The application's mask back, then the count (see curl_sig_enter()). */
static void
curl_sig_leave(void)
{
	(void)syscall(SYS_rt_sigprocmask, SIG_SETMASK, &curl_sig_mask, NULL,
		      sizeof(curl_sig_mask));
	atomic_signal_fence(memory_order_seq_cst);
	curl_sig_depth = 0;
}

/* Keeps errno (the system calls cannot fail).  Inlined, for the caller's
 * stack pointer. */
static inline __attribute__((always_inline)) void
curl_sig_block(void)
{
	/* A handler that runs before the block restores what it blocked
	 * itself before it returns. */
	if (curl_sig_depth == 0) {
		if (__atomic_load_n(&curl_jumped, __ATOMIC_RELAXED))
			curl_sig_enter(1);
		return;
	}
	curl_sig_depth++;
}

/* Ends a curl_sig_block(): if it blocked, or nested in one that did
 * (another thread's jump may have set curl_jumped in between). */
static void
curl_sig_restore(void)
{
	if (curl_sig_depth == 1)
		curl_sig_leave();
	else if (curl_sig_depth)
		curl_sig_depth--;
}

/* Around a call that may run the application's code (libcurl's
 * allocation callbacks, curl_global_init_mem()) inside a blocked section:
 * it runs with the application's own mask, and a change it makes to the
 * mask stays (the block that follows keeps it for the restore).  Nothing
 * is held meanwhile, so a jump from there leaves no count behind.
 * Returns what curl_sig_reblock() needs. */
static unsigned
curl_sig_open(void)
{
	unsigned depth = curl_sig_depth;

	if (depth)
		curl_sig_leave();
	return depth;
}

static inline __attribute__((always_inline)) void
curl_sig_reblock(unsigned depth)
{
	if (depth)
		curl_sig_enter(depth);
}

/* This thread's id in curl_lock, 0 until its first lock (a fork()'s
 * child takes its own: curl_atfork_child()). */
static __thread uint32_t curl_tid __attribute__((tls_model("initial-exec")));

static inline uint32_t
curl_self_id(void)
{
	if (__builtin_expect(!curl_tid, 0))
		curl_tid = (uint32_t)syscall(SYS_gettid);
	return curl_tid;
}

/* Does this thread hold curl_lock? */
static inline bool
curl_lock_mine(void)
{
	uint32_t v = __atomic_load_n(&curl_lock, __ATOMIC_RELAXED);

	return curl_tid && (v & ~CURL_LOCK_WAITERS) == curl_tid;
}

/* Held by another thread: wait (glibc's lowlevellock, with the holder's
 * id in the word).  Keeps errno. */
static __attribute__((noinline, cold)) void
curl_lock_wait(uint32_t me)
{
	int saved_errno = errno;
	uint32_t v;

	for (;;) {
		v = __atomic_load_n(&curl_lock, __ATOMIC_RELAXED);
		if (v == 0) {
			/* Others may still sleep on it: wake one when done. */
			if (__atomic_compare_exchange_n(
				    &curl_lock, &v, me | CURL_LOCK_WAITERS, false,
				    __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
				break;
			continue;
		}
		if (!(v & CURL_LOCK_WAITERS) &&
		    !__atomic_compare_exchange_n(&curl_lock, &v, v | CURL_LOCK_WAITERS,
						 false, __ATOMIC_RELAXED,
						 __ATOMIC_RELAXED))
			continue;
		(void)syscall(SYS_futex, &curl_lock, FUTEX_WAIT_PRIVATE,
			      v | CURL_LOCK_WAITERS, NULL, NULL, 0);
	}
	errno = saved_errno;
}

static inline void
curl_lock_acquire(void)
{
	uint32_t me = curl_self_id(), v = 0;

	if (!__atomic_compare_exchange_n(&curl_lock, &v, me, false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		curl_lock_wait(me);
}

/* Keeps errno. */
static inline void
curl_lock_release(void)
{
	int saved_errno;

	if (__atomic_exchange_n(&curl_lock, 0, __ATOMIC_RELEASE) & CURL_LOCK_WAITERS) {
		saved_errno = errno;
		(void)syscall(SYS_futex, &curl_lock, FUTEX_WAKE_PRIVATE, 1, NULL, NULL,
			      0);
		errno = saved_errno;
	}
}

static void
curl_lock_take(void)
{
	curl_sig_block();
	curl_lock_acquire();
}

static void
curl_lock_give(void)
{
	curl_lock_release();
	curl_sig_restore();
}

/* The handle our curl_easy_perform hook is running on this thread. */
static __thread CURL *curl_performing;
/* The context to show again if curl_prereq() sets our lines aside while
 * that call shows our client span, or NULL. */
static __thread const struct hook_scope *curl_performing_server;

/* The curl_easy_perform hooks running on this thread, outermost first (a
 * transfer started from another's callback nests), for a jump out of a
 * signal handler that ends their frames (hook-longjmp.c): the hook never
 * comes back to put back what it changed, and hook_curl_unwound() does
 * it from these.  Values only, so that a record a jump we do not see left
 * behind is never followed into freed memory; saved (the context to
 * publish again) is in the hook's frame, read only while the jump's
 * handler runs below that frame.  Deeper transfers are not recorded. */
#define CURL_FRAMES 4
struct curl_frame {
	uintptr_t sp; /* the hook's stack pointer (0: none known) */
	CURL *easy;
	CURL *outer;                           /* curl_performing and */
	const struct hook_scope *outer_server; /* curl_performing_server before */
	const struct hook_scope *saved;
	bool installed; /* our nodes are on easy (a blocking transfer's) */
	bool published; /* curl_unpublish_call() is to run */
};
static __thread struct curl_frame curl_frames[CURL_FRAMES];

static __thread unsigned curl_depth; /* the hooks running, recorded or not */
/* Handles whose blocking transfer a jump ended with our nodes installed,
 * in all threads, or more (curl_settle()). */
static unsigned curl_abandoned_n;
/* An application's CURLOPT_PREREQFUNCTION or CURLOPT_PREREQDATA went
 * unrecorded (curl_prereq_unseen()). */
static bool curl_prereq_lost;
/* An application's CURLOPT_HTTPHEADER went unrecorded (set before our
 * constructor ran, or no memory for its entry): a handle whose list we
 * did not see ourselves may hold one, which ours would replace. */
static bool curl_headers_lost;

/* An application's pre-request callback or pointer we could not record
 * (set before our constructor ran, or no memory for its entry): ours,
 * which gives back what it recorded, is never set again. */
static void
curl_prereq_unseen(void)
{
	__atomic_store_n(&curl_prereq_lost, true, __ATOMIC_RELAXED);
}

/* ---- binding ---------------------------------------------------------- */

static void curl_register_atfork(void);

static void
curl_bind(struct curl_real *r)
{
	static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
	const char *const sonames[] = {r->soname, NULL};
	int i;

	for (i = 0; i < CURL_FN_N; i++) {
		/* The functions we only call (not hook) have no self. */
		const void *self = i < CURL_FN_HOOKED ? r->self[i] : NULL;

		r->fn[i] =
			ctxshim_bind_loaded(sonames, curl_fn_name[i], r->version, self);
	}
	r->complete = true;
	for (i = 0; i < CURL_FN_HOOKED; i++)
		r->complete = r->complete && r->fn[i];
	r->callers.names = curl_fn_name;
	r->callers.n = CURL_FN_HOOKED;
	r->callers.version = r->version;
	r->callers.selves = r->self;
	ctxshim_callers_bound(&r->callers, r->fn[0]);
	if (r->fn[CURL_FN_EASY_SETOPT] &&
	    !ctxshim_text_range(r->fn[CURL_FN_EASY_SETOPT], &r->text_lo, &r->text_hi)) {
		ctxshim_log("curl: no text segment found for %s", r->soname);
	}
	/* A fork while another thread holds the table lock must not leave
	 * the child's table locked. */
	pthread_once(&atfork_once, curl_register_atfork);
}

#define CURL_SELF(tag) static const void *const curl_self_##tag[CURL_FN_HOOKED];

CURL_SELF(openssl)
CURL_SELF(gnutls)
CURL_SELF(nss)

static struct curl_real curl_real[CURL_FL_N] = {
	[CURL_FL_OPENSSL] =
		{"CURL_OPENSSL_4", "libcurl.so.4", curl_self_openssl, {0}, 0, 0},
	[CURL_FL_GNUTLS] =
		{"CURL_GNUTLS_3", "libcurl-gnutls.so.4", curl_self_gnutls, {0}, 0, 0},
	[CURL_FL_NSS] = {"CURL_NSS_3", "libcurl-nss.so.4", curl_self_nss, {0}, 0, 0},
};

static pthread_once_t curl_once[CURL_FL_N] = {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT,
					      PTHREAD_ONCE_INIT};

static void
curl_bind_openssl(void)
{
	curl_bind(&curl_real[CURL_FL_OPENSSL]);
}

static void
curl_bind_gnutls(void)
{
	curl_bind(&curl_real[CURL_FL_GNUTLS]);
}

static void
curl_bind_nss(void)
{
	curl_bind(&curl_real[CURL_FL_NSS]);
}

static void (*const curl_bind_fn[CURL_FL_N])(void) = {curl_bind_openssl,
						      curl_bind_gnutls, curl_bind_nss};

/* Said once per flavour: the application's call fails (curl_flavour()). */
static void
curl_unbound(struct curl_real *r)
{
	static bool said[CURL_FL_N];
	int saved_errno = errno;

	if (!__atomic_exchange_n(&said[r - curl_real], true, __ATOMIC_RELAXED))
		ctxshim_log(
			"curl: %s is not loaded, and a call at %s was not a copy's: "
			"failing it",
			r->soname, r->version);
	errno = saved_errno;
}

/* The flavour, bound, or NULL if a hooked function of it was not found.
 * Then the library is not loaded under the flavour's soname, and a call
 * that a copy of it did not take (ctxshim_callers_own(), which also finds
 * the only copy loaded for a tail-calling wrapper) has no function to go
 * to: the exported hook fails it as libcurl reports a failure, which a
 * caller can handle, rather than end the process. */
static inline struct curl_real *
curl_flavour(enum curl_flavour fl)
{
	struct curl_real *r = &curl_real[fl];

	pthread_once(&curl_once[fl], curl_bind_fn[fl]);
	if (__builtin_expect(!r->complete, 0)) {
		curl_unbound(r);
		return NULL;
	}
	return r;
}

/* The caller's own copy of flavour fl (by curl_fn_name), or NULL: the
 * call is ours. */
static inline void *const *
curl_own(enum curl_flavour fl, const void *ret)
{
	struct curl_real *r = &curl_real[fl];

	pthread_once(&curl_once[fl], curl_bind_fn[fl]);
	return ctxshim_callers_own(&r->callers, ret, r->fn[0]);
}

/* The fork handlers.  A fork() while another thread holds curl_lock
 * must not leave the child's table locked (or half-changed): the prepare
 * handler takes the lock for the fork, and the parent's and the child's
 * handlers release it.  Two ways a signal handler meets them:
 *
 *  - it jumps out of the fork() in between (a timeout's siglongjmp();
 *    glibc holds none of its own locks there in a single-threaded
 *    process): the parent's handler never runs, and the lock used to stay
 *    held, so that every later hooked call of the process, and the next
 *    fork(), waited for good.  Nothing changed under the fork's hold, so
 *    the jump releases it (hook_curl_unwound(), from curl_fork_sp; the
 *    hold is taken and given back with the signals blocked, so that a
 *    jump always finds curl_fork_held and the lock agreeing);
 *  - it forks while its own thread holds the lock in a critical section
 *    (curl_lock_mine()): the prepare handler used to wait for it, which
 *    the interrupted section never gives back.  Both processes go on
 *    with that section after the handler, and it releases the lock:
 *    the fork takes nothing.
 *
 * Not blocked for the whole fork: the application's own fork handlers and
 * its signals keep their timing (a signal raised in one of them is
 * handled before the fork() goes on, as without the shim). */
static __thread bool curl_fork_held __attribute__((tls_model("initial-exec")));
/* The prepare handler's stack pointer, for hook_curl_unwound(). */
static __thread uintptr_t curl_fork_sp __attribute__((tls_model("initial-exec")));

/* Blocks our set (curl_lock_sigs) into *old; the system call keeps errno. */
static inline void
curl_fork_block(uint64_t *old)
{
	(void)syscall(SYS_rt_sigprocmask, SIG_BLOCK, &curl_lock_sigs, old,
		      sizeof(*old));
}

static inline void
curl_fork_unblock(const uint64_t *old)
{
	(void)syscall(SYS_rt_sigprocmask, SIG_SETMASK, old, NULL, sizeof(*old));
}

static void
curl_atfork_lock(void)
{
	uint64_t old;

	if (curl_lock_mine())
		return;
	curl_fork_block(&old);
	curl_lock_acquire();
	curl_fork_sp = ctxshim_stack_pointer();
	curl_fork_held = true;
	curl_fork_unblock(&old);
}

/* The parent's, and the child's: the fork's hold, if it still has one. */
static void
curl_atfork_release(void)
{
	uint64_t old;

	if (!curl_fork_held)
		return;
	curl_fork_block(&old);
	curl_fork_held = false;
	curl_lock_release();
	curl_fork_unblock(&old);
}

/* The child's thread has an id of its own: a section the handler that
 * forked interrupted (curl_atfork_lock()) holds the lock under it. */
static void
curl_atfork_child(void)
{
	uint32_t old = curl_tid;

	curl_tid = (uint32_t)syscall(SYS_gettid);
	if (old &&
	    (__atomic_load_n(&curl_lock, __ATOMIC_RELAXED) & ~CURL_LOCK_WAITERS) == old)
		__atomic_store_n(&curl_lock, curl_tid, __ATOMIC_RELAXED);
	curl_atfork_release();
}

static void
curl_register_atfork(void)
{
	(void)pthread_atfork(curl_atfork_lock, curl_atfork_release, curl_atfork_child);
}

/* Called from libcurl itself (see "Internal calls" above)? */
static inline bool
curl_internal(const struct curl_real *r, const void *ra)
{
	uintptr_t a = (uintptr_t)ra;

	return a >= r->text_lo && a < r->text_hi;
}

static inline CURL *
real_curl_easy_init(struct curl_real *r)
{
	return ((curl_easy_init_fn)r->fn[CURL_FN_EASY_INIT])();
}

static inline CURLcode
real_curl_easy_setopt_ptr(struct curl_real *r, CURL *easy, CURLoption opt, void *v)
{
	return ((curl_easy_setopt_fn)r->fn[CURL_FN_EASY_SETOPT])(easy, opt, v);
}

static inline CURLcode
real_curl_easy_perform(struct curl_real *r, CURL *easy)
{
	return ((curl_easy_perform_fn)r->fn[CURL_FN_EASY_PERFORM])(easy);
}

static inline void
real_curl_easy_cleanup(struct curl_real *r, CURL *easy)
{
	((curl_easy_cleanup_fn)r->fn[CURL_FN_EASY_CLEANUP])(easy);
}

static inline void
real_curl_easy_reset(struct curl_real *r, CURL *easy)
{
	((curl_easy_reset_fn)r->fn[CURL_FN_EASY_RESET])(easy);
}

static inline CURL *
real_curl_easy_duphandle(struct curl_real *r, CURL *easy)
{
	return ((curl_easy_duphandle_fn)r->fn[CURL_FN_EASY_DUPHANDLE])(easy);
}

static inline CURLMcode
real_curl_multi_add_handle(struct curl_real *r, CURLM *multi, CURL *easy)
{
	return ((curl_multi_handle_fn)r->fn[CURL_FN_MULTI_ADD_HANDLE])(multi, easy);
}

static inline CURLMcode
real_curl_multi_remove_handle(struct curl_real *r, CURLM *multi, CURL *easy)
{
	return ((curl_multi_handle_fn)r->fn[CURL_FN_MULTI_REMOVE_HANDLE])(multi, easy);
}

static inline CURLMcode
real_curl_multi_cleanup(struct curl_real *r, CURLM *multi)
{
	return ((curl_multi_cleanup_fn)r->fn[CURL_FN_MULTI_CLEANUP])(multi);
}

/* ---- the handle table --------------------------------------------------- */

/* Caller holds curl_lock. */
static struct curl_handle *
curl_handle_find(CURL *easy)
{
	struct curl_handle *e;

	HASH_FIND_PTR(curl_handles, &easy, e);
	return e;
}

/* Caller holds curl_lock.  NULL when out of memory: the handle then simply
 * goes untraced. */
static struct curl_handle *
curl_handle_get(struct curl_real *r, CURL *easy)
{
	struct curl_handle *e = curl_handle_find(easy);

	if (e)
		return e;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->easy = easy;
	e->real = r;
	HASH_ADD_PTR(curl_handles, easy, e);
	if (!e->hh.tbl) {
		free(e); /* the table itself could not be allocated */
		return NULL;
	}
	return e;
}

/* Takes the entry out of the table (caller holds curl_lock); the caller
 * frees it with curl_handle_free() once curl no longer uses e->ours. */
static struct curl_handle *
curl_handle_take(CURL *easy)
{
	struct curl_handle *e = curl_handle_find(easy);

	if (e)
		HASH_DEL(curl_handles, e);
	return e;
}

static void
curl_handle_free(struct curl_handle *e)
{
	if (!e)
		return;
	free(e->ours);
	free(e);
}

/* ---- header lists --------------------------------------------------------- */

static bool
curl_name_is(const char *line, const char *name, size_t len)
{
	return strncasecmp(line, name, len) == 0 &&
	       (line[len] == ':' || line[len] == ';');
}

/* What the application's list says about trace context. */
struct curl_app_headers {
	const char *traceparent; /* value, NULL if the list has none */
	size_t traceparent_len;
	bool has_traceparent;
	bool has_tracestate;
	const char *ts[CURL_TS_LINES_MAX];
	size_t ts_len[CURL_TS_LINES_MAX];
	size_t n_ts;
	bool ts_overflow;
};

static const char *
curl_header_value(const char *line, size_t name_len, size_t *len)
{
	const char *v = line + name_len;

	if (*v == ';') { /* "name;": an empty header */
		*len = 0;
		return v + 1;
	}
	v++;
	while (*v == ' ' || *v == '\t')
		v++;
	*len = strlen(v);
	return v;
}

/* False when the list is too long to look at (or a cycle). */
static bool
curl_scan(const struct curl_slist *l, struct curl_app_headers *a)
{
	size_t n = 0;

	memset(a, 0, offsetof(struct curl_app_headers, ts));
	a->n_ts = 0;
	a->ts_overflow = false;
	for (; l; l = l->next) {
		if (++n > CURL_LIST_MAX)
			return false;
		if (!l->data)
			continue;
		if (curl_name_is(l->data, "traceparent", 11)) {
			if (!a->has_traceparent)
				a->traceparent = curl_header_value(l->data, 11,
								   &a->traceparent_len);
			else
				a->traceparent = NULL; /* two of them: not a context */
			a->has_traceparent = true;
		} else if (curl_name_is(l->data, "tracestate", 10)) {
			const char *v;
			size_t len;

			a->has_tracestate = true;
			v = curl_header_value(l->data, 10, &len);
			/* Empty members take no slot: enough of them would
			 * drop a valid list from the context adopted for the
			 * call (curl_publish_call()). */
			if (w3c_tracestate_line_empty(v, len))
				continue;
			if (a->n_ts == CURL_TS_LINES_MAX) {
				a->ts_overflow = true;
				continue;
			}
			a->ts[a->n_ts] = v;
			a->ts_len[a->n_ts] = len;
			a->n_ts++;
		}
	}
	return true;
}

/* Our n_extra lines as list nodes, nodes and strings in one allocation
 * (free() it), the last node linked to app, the application's live list
 * (see "Headers" above).  NULL when out of memory. */
static struct curl_slist *
curl_ours_new(const char *const *extra, unsigned n_extra, struct curl_slist *app)
{
	struct curl_slist *nodes;
	size_t bytes = 0;
	unsigned k;
	char *s;

	if (n_extra == 0)
		return NULL;
	for (k = 0; k < n_extra; k++)
		bytes += strlen(extra[k]) + 1;
	nodes = malloc(n_extra * sizeof(*nodes) + bytes);
	if (!nodes)
		return NULL;
	s = (char *)(nodes + n_extra);
	for (k = 0; k < n_extra; k++) {
		size_t len = strlen(extra[k]) + 1;

		memcpy(s, extra[k], len);
		nodes[k].data = s;
		nodes[k].next = k + 1 < n_extra ? &nodes[k + 1] : app;
		s += len;
	}
	return nodes;
}

/* ---- schemes -------------------------------------------------------------- */

static bool
curl_scheme_is_http(const char *s, size_t len)
{
	return (len == 4 && strncasecmp(s, "http", 4) == 0) ||
	       (len == 5 && strncasecmp(s, "https", 5) == 0);
}

/* As libcurl 7.88 parses an application's URL (urlapi.c with
 * CURLU_GUESS_SCHEME): a scheme is RFC 3986 scheme characters followed by
 * ":/"; without one, the prefixes below of the host name (after any
 * "user:password@", as urlapi.c's parse_hostname_login() strips it) pick
 * the protocol, unless CURLOPT_DEFAULT_PROTOCOL is set (curl_is_http()). */
static enum curl_url_kind
curl_url_kind(const char *url)
{
	static const char *const guessed[] = {"ftp.",  "dict.", "ldap.",
					      "imap.", "smtp.", "pop3."};
	const char *host, *at;
	size_t i;

	if (!url)
		return CURL_URL_UNSET;
	for (i = 0; i < 40; i++) {
		char c = url[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.'))
			break;
	}
	if (i > 0 && url[i] == ':' && url[i + 1] == '/')
		return curl_scheme_is_http(url, i) ? CURL_URL_HTTP : CURL_URL_OTHER;
	at = memchr(url, '@', strcspn(url, "/?#"));
	host = at ? at + 1 : url;
	for (i = 0; i < sizeof(guessed) / sizeof(guessed[0]); i++)
		if (strncasecmp(host, guessed[i], strlen(guessed[i])) == 0)
			return CURL_URL_GUESS_OTHER;
	return CURL_URL_GUESS;
}

/* Does this transfer speak HTTP?  Reads the entry: the handle's thread. */
static bool
curl_is_http(const struct curl_handle *e)
{
	enum curl_url_kind k = e->url_kind;

	if (e->curlu && e->real->fn[CURL_FN_URL_GET]) {
		char *scheme = NULL;
		/* libcurl allocates with the application's callbacks: never
		 * with the thread's signals blocked by us. */
		unsigned blocked = curl_sig_open();
		CURLUcode uc = ((curl_url_get_fn)e->real->fn[CURL_FN_URL_GET])(
			e->curlu, CURLUPART_SCHEME, &scheme, CURLU_DEFAULT_SCHEME);

		if (uc == CURLUE_OK && scheme) {
			k = curl_scheme_is_http(scheme, strlen(scheme))
				    ? CURL_URL_HTTP
				    : CURL_URL_OTHER;
			if (e->real->fn[CURL_FN_FREE])
				((curl_free_fn)e->real->fn[CURL_FN_FREE])(scheme);
		}
		curl_sig_reblock(blocked);
		if (uc != CURLUE_OK || !scheme)
			return false;
	}
	/* libcurl prefixes CURLOPT_DEFAULT_PROTOCOL before it guesses (url.c,
	 * parseurlandfillconn()). */
	if (k == CURL_URL_GUESS)
		return !e->default_other;
	if (k == CURL_URL_GUESS_OTHER)
		return e->default_http;
	return k == CURL_URL_HTTP;
}

/* ---- contexts ------------------------------------------------------------- */

/* The thread's context, unless it has none worth propagating
 * (CTXSHIM_NEW_TRACES=0 publishes zero ids). */
static const struct ctxshim_ctx *
curl_current(void)
{
	const struct ctxshim_ctx *c = ctxshim_current();

	if (!c || w3c_id_is_zero(c->trace_id, sizeof(c->trace_id)))
		return NULL;
	return c;
}

/* The client span of one blocking call: a child of server with its
 * attributes, the parent attribute now naming the server span.  Kept out
 * of line: the decoded attributes take 4 KiB of stack. */
static __attribute__((noinline)) void
curl_client_ctx(struct ctxshim_ctx *client,
		const struct ctxshim_ctx *server,
		const uint8_t span_id[8])
{
	struct trec_attrs_decoded d;
	struct trec_attr_writer w;
	unsigned i;

	memcpy(client, server, offsetof(struct ctxshim_ctx, attrs));
	memcpy(client->tracestate, server->tracestate, server->tracestate_len);
	memcpy(client->span_id, span_id, sizeof(client->span_id));
	memcpy(client->parent_id, server->span_id, sizeof(client->parent_id));
	client->has_parent = 1;
	trec_attrs_init(&w, client->attrs, sizeof(client->attrs));
	if (trec_attrs_decode(server->attrs, server->attrs_len, 256, &d) == 0)
		for (i = 0; i < d.n; i++)
			if (d.attr[i].key != CTXSHIM_KEY_PARENT)
				(void)trec_attrs_add(&w, d.attr[i].key, d.attr[i].val,
						     d.attr[i].len);
	ctxshim_ctx_add_parent_attr(client, &w);
	client->attrs_len = (uint16_t)w.len;
}

/* The decision for one transfer, taken when it starts. */
struct curl_plan {
	unsigned n_extra;
	const char *extra[2];
	char tp_line[sizeof("traceparent: ") + W3C_TRACEPARENT_LEN];
	char ts_line[sizeof("tracestate: ") + CTXSHIM_TRACESTATE_MAX];
	bool client_span;   /* publish a child span while the call blocks */
	bool adopt;         /* publish the application's traceparent instead */
	uint8_t span_id[8]; /* the child's span-id */
	struct w3c_traceparent app_tp;
};

static void
curl_plan(struct curl_plan *p,
	  const struct curl_handle *e,
	  const struct curl_app_headers *a,
	  bool blocking)
{
	const struct ctxshim_ctx *cur = curl_current();
	const uint8_t *parent;
	char tp[W3C_TRACEPARENT_LEN + 1];

	p->n_extra = 0;
	p->client_span = false;
	p->adopt = false;
	if (a->has_traceparent) {
		/* The application propagates by hand: hands off its headers. */
		if (blocking && !cur && a->traceparent &&
		    w3c_traceparent_parse(a->traceparent, a->traceparent_len,
					  &p->app_tp) == 0)
			p->adopt = true;
		return;
	}
	/* Its tracestate alone: it owns propagation as well (see "The
	 * application's own trace context" above). */
	if (a->has_tracestate)
		return;
	/* libcurl signs every line of the list (http_aws_sigv4.c,
	 * make_headers()), ours too: a proxy or sidecar that rewrites
	 * traceparent on the way, as a tracing one does, would break the
	 * signature of a request that works without us (the Elastic APM
	 * Node.js agent skips such requests too, its PR #1089). */
	if (e->sigv4)
		return;
	if (!cur || ctxshim_cfg.propagate == CTXSHIM_PROPAGATE_OFF)
		return;
	if (ctxshim_cfg.propagate == CTXSHIM_PROPAGATE_TRANSPARENT) {
		parent = cur->has_parent ? cur->parent_id : cur->span_id;
	} else {
		ctxshim_new_span_id(p->span_id);
		parent = p->span_id;
		p->client_span = blocking;
	}
	(void)w3c_traceparent_format(tp, cur->trace_id, parent, cur->flags);
	memcpy(p->tp_line, "traceparent: ", 13);
	memcpy(p->tp_line + 13, tp, W3C_TRACEPARENT_LEN + 1);
	p->extra[p->n_extra++] = p->tp_line;
	if (cur->tracestate_len > 0 && cur->tracestate_len <= CTXSHIM_TRACESTATE_MAX) {
		memcpy(p->ts_line, "tracestate: ", 12);
		memcpy(p->ts_line + 12, cur->tracestate, cur->tracestate_len);
		p->ts_line[12 + cur->tracestate_len] = '\0';
		p->extra[p->n_extra++] = p->ts_line;
	}
}

static int curl_prereq(void *clientp,
		       char *primary_ip,
		       char *local_ip,
		       int primary_port,
		       int local_port);

/* Make curl_prereq() libcurl's pre-request callback for e (see "Lines
 * added after the start" above).  Data first: libcurl must never call it
 * with the application's pointer.  Left as the application set it when
 * this libcurl has no such option (before 7.80). */
static bool
curl_prereq_set(struct curl_handle *e)
{
	if (__atomic_load_n(&curl_prereq_lost, __ATOMIC_RELAXED))
		return false;
	if (real_curl_easy_setopt_ptr(e->real, e->easy, CURLOPT_PREREQDATA, e) !=
	    CURLE_OK)
		return false;
	if (((curl_easy_setopt_fn)e->real->fn[CURL_FN_EASY_SETOPT])(
		    e->easy, CURLOPT_PREREQFUNCTION, curl_prereq) != CURLE_OK) {
		(void)real_curl_easy_setopt_ptr(e->real, e->easy, CURLOPT_PREREQDATA,
						e->app_prereq_data);
		return false;
	}
	return true;
}

/* Give handle easy the application's pre-request callback (and pointer)
 * back: e's, or the one a duplicated handle inherited. */
static void
curl_prereq_give_back(struct curl_real *r,
		      CURL *easy,
		      curl_prereq_callback fn,
		      void *data)
{
	(void)((curl_easy_setopt_fn)r->fn[CURL_FN_EASY_SETOPT])(
		easy, CURLOPT_PREREQFUNCTION, fn);
	(void)real_curl_easy_setopt_ptr(r, easy, CURLOPT_PREREQDATA, data);
}

/* Give curl our lines followed by the application's list for e's
 * transfer.  False (nothing changed) when there is nothing to add or no
 * memory. */
static bool
curl_install(struct curl_handle *e, const struct curl_plan *p, CURLM *multi)
{
	struct curl_slist *ours;
	bool prereq;

	if (p->n_extra == 0)
		return false;
	ours = curl_ours_new(p->extra, p->n_extra, e->app);
	if (!ours)
		return false;
	if (real_curl_easy_setopt_ptr(e->real, e->easy, CURLOPT_HTTPHEADER, ours) !=
	    CURLE_OK) {
		free(ours);
		return false;
	}
	prereq = e->prereq_ours || curl_prereq_set(e);
	curl_lock_take();
	free(e->ours);
	e->ours = ours;
	e->ours_extra = p->n_extra;
	e->ours_off = false;
	e->multi = multi;
	e->prereq_ours = prereq;
	curl_lock_give();
	return true;
}

/* Ours is no longer in use: the application's pre-request callback goes
 * back.  Caller holds curl_lock. */
static void
curl_forget_locked(struct curl_handle *e)
{
	if (e->prereq_ours)
		curl_prereq_give_back(e->real, e->easy, e->app_prereq,
				      e->app_prereq_data);
	e->prereq_ours = false;
	e->ours = NULL;
	e->ours_extra = 0;
	e->ours_off = false;
	e->multi = NULL;
}

/* Give the application's list back and free ours.  Caller holds
 * curl_lock. */
static void
curl_restore_locked(struct curl_handle *e)
{
	struct curl_slist *ours = e->ours;

	if (!ours)
		return;
	(void)real_curl_easy_setopt_ptr(e->real, e->easy, CURLOPT_HTTPHEADER, e->app);
	curl_forget_locked(e);
	free(ours);
}

/* One abandoned handle less (never below 0: a record a jump we did not
 * see left behind may have counted one that is not). */
static void
curl_abandoned_done(void)
{
	unsigned n = __atomic_load_n(&curl_abandoned_n, __ATOMIC_RELAXED);

	while (n && !__atomic_compare_exchange_n(&curl_abandoned_n, &n, n - 1, false,
						 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* e holds our nodes for a blocking transfer (installed without a multi
 * handle, curl_install()) that no hook of this thread runs: a jump ended
 * it (hook_curl_unwound()), as no other thread may use the handle during
 * its transfer (libcurl's rule).  Caller holds curl_lock. */
static bool
curl_abandoned_locked(const struct curl_handle *e)
{
	unsigned i, n = curl_depth < CURL_FRAMES ? curl_depth : CURL_FRAMES;

	if (!e->ours || e->multi)
		return false;
	for (i = 0; i < n; i++)
		if (curl_frames[i].easy == e->easy)
			return false;
	return curl_depth <= CURL_FRAMES; /* unrecorded ones may run it */
}

/* Before any other hooked call on easy: if a jump ended its blocking
 * transfer, curl still holds our nodes, which lead to the application's
 * list as it was then.  The jump's handler could not give the list back
 * (it may have interrupted curl itself, or malloc), so
 * the handle's next call does, before curl sees anything else: the
 * handle holds exactly the application's list again, and our nodes are
 * freed, once.  libcurl 7.88 sends nothing more on that handle (it stays
 * in curl_easy_perform's own multi handle: a perform fails with
 * CURLE_FAILED_INIT), but a curl_easy_duphandle copy got our nodes, and a
 * later libcurl might.  Keeps errno. */
static void
curl_settle(CURL *easy)
{
	static bool said;
	struct curl_handle *e;
	bool gave_back = false;
	int saved_errno;

	if (__builtin_expect(!__atomic_load_n(&curl_abandoned_n, __ATOMIC_RELAXED), 1))
		return;
	saved_errno = errno;
	curl_lock_take();
	e = curl_handle_find(easy);
	if (e && curl_abandoned_locked(e)) {
		curl_restore_locked(e);
		curl_abandoned_done();
		gave_back = true;
	}
	curl_lock_give();
	if (gave_back && !__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
		ctxshim_log("curl: a jump ended a transfer of handle %p: its header "
			    "list is the application's again",
			    easy);
	errno = saved_errno;
}

/* Our nodes leave easy while its blocking transfer runs (on this thread:
 * a callback of it set a list of the application's own): a jump that ends
 * that transfer now has nothing left to give back, and must not count the
 * handle as abandoned, since no later call of it would count it out
 * again (curl_abandoned_locked() needs e->ours), and every hooked call of
 * the process would take curl_lock from then on (curl_settle()).  Caller
 * holds curl_lock. */
static void
curl_relinked_off(CURL *easy)
{
	unsigned i, n = curl_depth < CURL_FRAMES ? curl_depth : CURL_FRAMES;

	for (i = 0; i < n; i++)
		if (curl_frames[i].easy == easy)
			curl_frames[i].installed = false;
	atomic_signal_fence(memory_order_seq_cst);
}

/* A new application list (e->app, already given to curl) while ours is in
 * use (a multi transfer, or a callback of a running one): judged as on the
 * first start.  Without trace context of its own, our last node now leads
 * to it and curl gets ours again; with a traceparent or tracestate line
 * (or a list too long to look at), curl keeps the application's list as
 * given, and ours is returned for the caller to free once the lock is
 * released.  Caller holds curl_lock. */
static struct curl_slist *
curl_relink_locked(struct curl_handle *e)
{
	struct curl_slist *old = e->ours;
	struct curl_app_headers a;

	if (curl_scan(e->app, &a) && !a.has_traceparent && !a.has_tracestate) {
		e->ours[e->ours_extra - 1].next = e->app;
		if (real_curl_easy_setopt_ptr(e->real, e->easy, CURLOPT_HTTPHEADER,
					      e->ours) == CURLE_OK) {
			e->ours_off = false;
			return NULL;
		}
		/* curl kept the application's list. */
	}
	curl_relinked_off(e->easy);
	curl_forget_locked(e);
	return old;
}

/* libcurl's pre-request callback while ours is installed (see "Lines
 * added after the start" above): on the handle's thread, right before
 * the request is built.  Returns what the application's callback
 * returned; keeps the errno it left. */
static int
curl_prereq(void *clientp,
	    char *primary_ip,
	    char *local_ip,
	    int primary_port,
	    int local_port)
{
	struct curl_handle *e = clientp;
	const struct hook_scope *server;
	struct curl_app_headers a;
	int rc = CURL_PREREQFUNC_OK;
	int saved_errno;

	/* First: the application's callback may extend its list too. */
	if (e->app_prereq)
		rc = e->app_prereq(e->app_prereq_data, primary_ip, local_ip,
				   primary_port, local_port);
	/* The entry's fields change only on the handle's thread, this one. */
	if (!e->ours || e->ours_off)
		return rc;
	saved_errno = errno;
	if (curl_scan(e->app, &a) && !a.has_traceparent && !a.has_tracestate) {
		errno = saved_errno;
		return rc;
	}
	if (real_curl_easy_setopt_ptr(e->real, e->easy, CURLOPT_HTTPHEADER, e->app) ==
	    CURLE_OK) {
		curl_lock_take();
		e->ours_off = true;
		curl_lock_give();
		/* Our client span is sent nowhere now: a blocking call shows the
		 * thread's own context again, as when the application's line was
		 * there from the start. */
		server = curl_performing_server;
		if (server && curl_performing == e->easy) {
			curl_performing_server = NULL;
			hook_scope_restore(server, "curl-app-late");
		}
	}
	errno = saved_errno;
	return rc;
}

/* ---- hooks ---------------------------------------------------------------- */

static CURL *
hook_curl_easy_init(struct curl_real *r, const void *ra)
{
	struct curl_handle *stale = NULL;
	int saved_errno;
	CURL *easy = real_curl_easy_init(r);

	if (!easy || !ctxshim_active() || curl_internal(r, ra))
		return easy;
	/* An entry at this address belongs to a handle freed behind our back
	 * (never by the application, which calls curl_easy_cleanup). */
	saved_errno = errno;
	curl_lock_take();
	stale = curl_handle_take(easy);
	curl_lock_give();
	curl_handle_free(stale);
	errno = saved_errno;
	return easy;
}

static CURLcode
hook_curl_easy_setopt_ptr(struct curl_real *r, CURL *easy, CURLoption opt, void *v)
{
	struct curl_slist *old = NULL;
	struct curl_handle *e;
	int saved_errno;
	CURLcode rc;

	if (opt != CURLOPT_HTTPHEADER && opt != CURLOPT_URL && opt != CURLOPT_CURLU &&
	    opt != CURLOPT_DEFAULT_PROTOCOL && opt != CURLOPT_PREREQDATA &&
	    opt != CURLOPT_AWS_SIGV4)
		return real_curl_easy_setopt_ptr(r, easy, opt, v);
	curl_settle(easy);
	rc = real_curl_easy_setopt_ptr(r, easy, opt, v);
	if (rc != CURLE_OK)
		return rc;
	saved_errno = errno;
	curl_lock_take();
	e = curl_handle_get(r, easy);
	if (!e && opt == CURLOPT_PREREQDATA)
		curl_prereq_unseen();
	if (!e && opt == CURLOPT_HTTPHEADER)
		__atomic_store_n(&curl_headers_lost, true, __ATOMIC_RELAXED);
	if (e) {
		switch (opt) {
		case CURLOPT_PREREQDATA:
			e->app_prereq_data = v;
			/* Ours stays what libcurl passes to its callback. */
			if (e->prereq_ours)
				(void)real_curl_easy_setopt_ptr(r, easy, opt, e);
			break;
		case CURLOPT_HTTPHEADER:
			e->app = v;
			e->app_set = true;
			if (e->ours)
				old = curl_relink_locked(e);
			break;
		case CURLOPT_URL:
			e->url_kind = (uint8_t)curl_url_kind(v);
			break;
		case CURLOPT_CURLU:
			e->curlu = v;
			break;
		case CURLOPT_AWS_SIGV4:
			/* libcurl sets CURLOPT_HTTPAUTH to CURLAUTH_AWS_SIGV4;
			 * NULL leaves it as it was. */
			e->sigv4 = e->sigv4 || v;
			break;
		default: /* CURLOPT_DEFAULT_PROTOCOL */
			e->default_http = v && curl_scheme_is_http(v, strlen(v));
			e->default_other = v && !e->default_http;
			break;
		}
	}
	curl_lock_give();
	free(old);
	errno = saved_errno;
	return rc;
}

/* The application's CURLOPT_PREREQFUNCTION: recorded, and passed on
 * (what libcurl returns is returned), but while ours is libcurl's, ours
 * stays and calls it (see "Lines added after the start" above). */
static CURLcode
hook_curl_easy_setopt_prereq(struct curl_real *r, CURL *easy, curl_prereq_callback fn)
{
	curl_easy_setopt_fn real = (curl_easy_setopt_fn)r->fn[CURL_FN_EASY_SETOPT];
	struct curl_handle *e;
	int saved_errno;
	CURLcode rc;

	curl_settle(easy);
	rc = real(easy, CURLOPT_PREREQFUNCTION, fn);
	if (rc != CURLE_OK)
		return rc;
	saved_errno = errno;
	curl_lock_take();
	e = curl_handle_get(r, easy);
	if (!e) {
		curl_prereq_unseen();
	} else {
		e->app_prereq = fn;
		if (e->prereq_ours)
			(void)real(easy, CURLOPT_PREREQFUNCTION, curl_prereq);
	}
	curl_lock_give();
	errno = saved_errno;
	return rc;
}

/* CURLOPT_HTTPAUTH: does libcurl sign with AWS SigV4 (curl_plan())?  A
 * mask with other methods as well counts, on the safe side. */
static CURLcode
hook_curl_easy_setopt_auth(struct curl_real *r, CURL *easy, long v)
{
	bool sigv4 = ((unsigned long)v & CURLAUTH_AWS_SIGV4) != 0;
	struct curl_handle *e;
	int saved_errno;
	CURLcode rc;

	curl_settle(easy);
	rc = ((curl_easy_setopt_fn)r->fn[CURL_FN_EASY_SETOPT])(easy, CURLOPT_HTTPAUTH,
							       v);
	if (rc != CURLE_OK)
		return rc;
	saved_errno = errno;
	curl_lock_take();
	e = sigv4 ? curl_handle_get(r, easy) : curl_handle_find(easy);
	if (e)
		e->sigv4 = sigv4;
	curl_lock_give();
	errno = saved_errno;
	return rc;
}

/* The variadic setopt: read the argument by the option's type
 * (CURLOPTTYPE_* in curl/curl.h) and pass it on as that type. */
/* setopt's one argument after opt, of the type opt takes (curl.h,
 * CURLOPTTYPE_*), passed on to fn. */
static CURLcode
curl_setopt_va(curl_easy_setopt_fn fn, CURL *easy, CURLoption opt, va_list ap)
{
	if (opt < CURLOPTTYPE_OBJECTPOINT)
		return fn(easy, opt, va_arg(ap, long));
	if (opt < CURLOPTTYPE_FUNCTIONPOINT)
		return fn(easy, opt, va_arg(ap, void *));
	if (opt < CURLOPTTYPE_OFF_T)
		return fn(easy, opt, va_arg(ap, curl_any_fn));
	if (opt < CURLOPTTYPE_BLOB)
		return fn(easy, opt, va_arg(ap, curl_off_t));
	return fn(easy, opt, va_arg(ap, void *));
}

static CURLcode
hook_curl_easy_setopt(
	struct curl_real *r, CURL *easy, CURLoption opt, va_list ap, const void *ra)
{
	curl_easy_setopt_fn real = (curl_easy_setopt_fn)r->fn[CURL_FN_EASY_SETOPT];

	if (opt < CURLOPTTYPE_OBJECTPOINT) {
		if (opt == CURLOPT_HTTPAUTH && ctxshim_active() &&
		    !curl_internal(r, ra))
			return hook_curl_easy_setopt_auth(r, easy, va_arg(ap, long));
		return curl_setopt_va(real, easy, opt, ap);
	}
	if (opt < CURLOPTTYPE_FUNCTIONPOINT) {
		void *v = va_arg(ap, void *);

		if (curl_internal(r, ra))
			return real(easy, opt, v);
		if (!ctxshim_active()) {
			if (opt == CURLOPT_PREREQDATA)
				curl_prereq_unseen();
			if (opt == CURLOPT_HTTPHEADER)
				__atomic_store_n(&curl_headers_lost, true,
						 __ATOMIC_RELAXED);
			return real(easy, opt, v);
		}
		return hook_curl_easy_setopt_ptr(r, easy, opt, v);
	}
	if (opt == CURLOPT_PREREQFUNCTION) {
		curl_prereq_callback fn = va_arg(ap, curl_prereq_callback);

		if (curl_internal(r, ra))
			return real(easy, opt, fn);
		if (!ctxshim_active()) {
			curl_prereq_unseen();
			return real(easy, opt, fn);
		}
		return hook_curl_easy_setopt_prereq(r, easy, fn);
	}
	return curl_setopt_va(real, easy, opt, ap);
}

/* Publish what the thread shows during a blocking transfer: our client
 * span, or the application's traceparent adopted.  *saved gets the
 * context to go back to.  Returns whether curl_unpublish_call() must run
 * afterwards, which it must whenever the thread had a context, even if we
 * showed nothing new: the socket level clears a context it published when
 * the thread waits in poll(), and libcurl waits in poll() inside
 * curl_easy_perform, so the rest of the request would lose it. */
static bool
curl_publish_call(const struct curl_plan *p,
		  bool installed,
		  const struct curl_app_headers *a,
		  struct hook_scope *saved)
{
	struct ctxshim_ctx c;

	hook_scope_capture(saved);
	if (installed && p->client_span && saved->has) {
		curl_client_ctx(&c, &saved->ctx, p->span_id);
		ctxshim_attach(&c);
		CTXSHIM_EVENT(CTXSHIM_EV_ATTACH, -1, &c, "curl-client");
	} else if (p->adopt) {
		memset(&c, 0, offsetof(struct ctxshim_ctx, attrs));
		memcpy(c.trace_id, p->app_tp.trace_id, sizeof(c.trace_id));
		memcpy(c.span_id, p->app_tp.parent_id, sizeof(c.span_id));
		c.flags = p->app_tp.flags & W3C_FLAGS_KNOWN;
		if (a->n_ts > 0 && !a->ts_overflow)
			(void)ctxshim_ctx_set_tracestate(&c, a->ts, a->ts_len, a->n_ts);
		ctxshim_attach(&c);
		CTXSHIM_EVENT(CTXSHIM_EV_ATTACH, -1, &c, "curl-app-traceparent");
		return true;
	}
	return saved->has;
}

/* The thread's context from before the transfer comes back, as after any
 * hook's callback (hook_scope_restore()): not a request the socket level
 * published that was answered meanwhile -- a proxy whose write callback
 * streams the backend's response to its client showed that client's
 * request again after the transfer, until its next wait. */
static void
curl_unpublish_call(const struct hook_scope *saved)
{
	hook_scope_restore(saved, "curl-done");
}

/* hooks.h: a jump to a frame at to ends the curl_easy_perform hooks whose
 * frames are below it on the thread's stack.  For each, what its return
 * would have done and a signal handler may do: the thread shows the
 * context it showed before the call again (it used to keep the abandoned
 * transfer's client span, which every later transfer took for the
 * thread's own context and restored), and the hook is no longer the
 * thread's running transfer (a new handle at the same address went
 * untraced through curl_multi_add_handle, and curl_prereq() read the dead
 * frame's context).  The handle's header list is left to curl_settle(). */
void
hook_curl_unwound(uintptr_t to)
{
	unsigned d = curl_depth;
	struct curl_frame *f;
	uint64_t cur, mask;

	/* A fault's handler (the block lets faults through) jumped out of a
	 * blocked section: the thread gets the application's mask back, with
	 * what the handler's entry added that we never block (its own
	 * signal; a jump that restores a saved mask sets it after this),
	 * and its next block blocks again.  It used to keep our block for
	 * good with a longjmp() that keeps the mask, and with any jump to
	 * stay counted in, so that no later section blocked. */
	if (curl_sig_depth && curl_sig_sp && curl_sig_sp < to &&
	    ctxshim_stack_between(curl_sig_sp, to)) {
		(void)syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &cur, sizeof(cur));
		/* Not all of our set blocked: the fault came before the block
		 * or after the restore, and the mask is the application's. */
		if ((cur & curl_lock_sigs) == curl_lock_sigs) {
			mask = curl_sig_mask | (cur & ~curl_lock_sigs);
			(void)syscall(SYS_rt_sigprocmask, SIG_SETMASK, &mask, NULL,
				      sizeof(mask));
		}
		atomic_signal_fence(memory_order_seq_cst);
		curl_sig_depth = 0;
	}
	/* A jump out of a fork() that holds curl_lock for its child
	 * (curl_atfork_lock()): the parent's handler will not run. */
	if (curl_fork_held && curl_fork_sp && curl_fork_sp < to &&
	    ctxshim_stack_between(curl_fork_sp, to)) {
		curl_fork_held = false;
		atomic_signal_fence(memory_order_seq_cst);
		curl_lock_release();
	}
	if (d > CURL_FRAMES)
		return; /* the innermost are not recorded */
	while (d > 0) {
		f = &curl_frames[d - 1];
		if (!(f->sp && f->sp < to && ctxshim_stack_between(f->sp, to)))
			break;
		if (!curl_jumped)
			__atomic_store_n(&curl_jumped, true, __ATOMIC_RELAXED);
		if (f->installed)
			__atomic_add_fetch(&curl_abandoned_n, 1, __ATOMIC_RELAXED);
		if (f->published)
			curl_unpublish_call(f->saved);
		curl_performing = f->outer;
		curl_performing_server = f->outer_server;
		d--;
		atomic_signal_fence(memory_order_seq_cst);
		curl_depth = d;
	}
}

/* Look the handle up and decide; false when the transfer is not ours to
 * touch. */
static bool
curl_prepare(struct curl_real *r,
	     CURL *easy,
	     bool blocking,
	     struct curl_plan *p,
	     struct curl_app_headers *a,
	     struct curl_handle **ep)
{
	struct curl_handle *e;

	curl_lock_take();
	e = curl_handle_find(easy);
	curl_lock_give();
	/* No entry: the application set no URL through us.  e->multi: our
	 * list is already in a running transfer (curl will refuse this one).
	 * Not HTTP: libcurl never reads the header list, which the
	 * application may have freed after its last HTTP transfer on this
	 * handle, so neither do we. */
	if (!e || e->multi || e->real != r || !curl_is_http(e))
		return false;
	/* A list libcurl holds that we never saw: ours would drop it. */
	if (!e->app_set && __atomic_load_n(&curl_headers_lost, __ATOMIC_RELAXED))
		return false;
	if (!curl_scan(e->app, a))
		return false;
	curl_plan(p, e, a, blocking);
	*ep = e;
	return true;
}

static CURLcode
hook_curl_easy_perform(struct curl_real *r, CURL *easy, const void *ra)
{
	struct curl_app_headers a;
	struct curl_plan p;
	struct curl_handle *e = NULL;
	struct hook_scope saved;
	bool installed = false, published = false;
	const struct hook_scope *outer_server;
	int saved_errno;
	CURL *outer;
	CURLcode rc;

	unsigned depth;

	if (!ctxshim_active() || curl_internal(r, ra))
		return real_curl_easy_perform(r, easy);
	saved_errno = errno;
	/* One block for the critical sections up to the real call; and no
	 * jump between our nodes given to curl and the frame that records
	 * them (hook_curl_unwound()). */
	curl_sig_block();
	curl_settle(easy);
	if (curl_prepare(r, easy, true, &p, &a, &e)) {
		installed = curl_install(e, &p, NULL);
		published = curl_publish_call(&p, installed, &a, &saved);
	}
	outer = curl_performing;
	outer_server = curl_performing_server;
	depth = curl_depth;
	if (depth < CURL_FRAMES) {
		struct curl_frame *f = &curl_frames[depth];

		f->sp = ctxshim_stack_pointer();
		f->easy = easy;
		f->outer = outer;
		f->outer_server = outer_server;
		f->saved = &saved;
		f->installed = installed;
		f->published = published;
	}
	/* the record whole before a jump's hook_curl_unwound() can see it */
	atomic_signal_fence(memory_order_seq_cst);
	curl_depth = depth + 1;
	curl_performing = easy;
	curl_performing_server =
		installed && p.client_span && saved.has ? &saved : NULL;
	curl_sig_restore();
	errno = saved_errno;
	rc = real_curl_easy_perform(r, easy);
	saved_errno = errno;
	curl_performing = outer;
	curl_performing_server = outer_server;
	atomic_signal_fence(memory_order_seq_cst);
	curl_depth = depth;
	if (installed) {
		curl_lock_take();
		/* The entry is still there: only curl_easy_cleanup and
		 * curl_easy_reset remove it, and libcurl forbids both from
		 * inside the transfer's callbacks. */
		e = curl_handle_find(easy);
		if (e)
			curl_restore_locked(e);
		curl_lock_give();
	}
	if (published)
		curl_unpublish_call(&saved);
	errno = saved_errno;
	return rc;
}

/* Before curl_easy_cleanup or curl_easy_reset of easy: its entry, taken
 * out of the table, to be freed once the real call has run, or NULL. */
static struct curl_handle *
curl_forget(struct curl_real *r, CURL *easy, const void *ra)
{
	struct curl_handle *e;

	if (!ctxshim_active() || curl_internal(r, ra))
		return NULL;
	curl_lock_take();
	e = curl_handle_take(easy);
	if (e && curl_abandoned_locked(e))
		curl_abandoned_done(); /* freed by the caller */
	curl_lock_give();
	return e;
}

static void
curl_forgotten(struct curl_handle *e)
{
	int saved_errno = errno;

	curl_handle_free(e);
	errno = saved_errno;
}

static void
hook_curl_easy_cleanup(struct curl_real *r, CURL *easy, const void *ra)
{
	struct curl_handle *e = curl_forget(r, easy, ra);

	real_curl_easy_cleanup(r, easy);
	/* Only now: a handle still in a multi is taken out of it inside
	 * curl_easy_cleanup, while curl may still look at its headers. */
	curl_forgotten(e);
}

static void
hook_curl_easy_reset(struct curl_real *r, CURL *easy, const void *ra)
{
	struct curl_handle *e = curl_forget(r, easy, ra);

	real_curl_easy_reset(r, easy);
	curl_forgotten(e);
}

static CURL *
hook_curl_easy_duphandle(struct curl_real *r, CURL *easy, const void *ra)
{
	struct curl_handle *e, *n = NULL, *stale = NULL;
	struct curl_slist *app = NULL;
	curl_prereq_callback app_prereq = NULL;
	void *app_prereq_data = NULL;
	bool reset = false, prereq = false;
	int saved_errno;
	CURL *dup;

	/* the copy must not get our nodes of an abandoned transfer */
	if (ctxshim_active() && !curl_internal(r, ra))
		curl_settle(easy);
	dup = real_curl_easy_duphandle(r, easy);
	if (!dup || !ctxshim_active())
		return dup;
	saved_errno = errno;
	curl_lock_take();
	/* An entry at the copy's address belongs to a handle freed behind
	 * our back (as in hook_curl_easy_init()), whether or not we know the
	 * original: its list may be freed memory. */
	stale = curl_handle_take(dup);
	e = curl_handle_find(easy);
	if (e) {
		app = e->app;
		reset = e->ours != NULL;
		prereq = e->prereq_ours;
		app_prereq = e->app_prereq;
		app_prereq_data = e->app_prereq_data;
		/* A copy made by libcurl itself (HTTP/2 server push) becomes
		 * the application's handle once its push callback accepts it
		 * (the application may even run a transfer of its own on it
		 * later).  It holds the original's list: without an entry,
		 * our nodes would replace that list at its next transfer, and
		 * the application's headers would go missing.  So it gets one
		 * when the original has a list of the application's (else the
		 * entry a later curl_easy_setopt makes knows as much).  A push
		 * libcurl denies is freed inside libcurl, leaving the entry
		 * stale: as for any handle freed behind our back, the next
		 * handle at that address (curl_easy_init,
		 * curl_easy_duphandle) drops it, and until then only libcurl
		 * itself, which never reaches these hooks, can use the
		 * address. */
		if (!curl_internal(r, ra) || e->app_set) {
			n = malloc(sizeof(*n));
			if (n) {
				memcpy(n, e, sizeof(*n));
				memset(&n->hh, 0, sizeof(n->hh));
				n->easy = dup;
				n->ours = NULL;
				n->ours_extra = 0;
				n->ours_off = false;
				n->multi = NULL;
				n->prereq_ours = false;
				HASH_ADD_PTR(curl_handles, easy, n);
				if (!n->hh.tbl) {
					free(n); /* the copy goes untraced */
					n = NULL;
				}
			}
			/* The copy holds the original's list, unrecorded. */
			if (!n && e->app_set)
				__atomic_store_n(&curl_headers_lost, true,
						 __ATOMIC_RELAXED);
		}
	}
	curl_lock_give();
	/* The copy got the pointer to our list, which we free when the
	 * original's transfer ends, and our pre-request callback, whose
	 * pointer is the original's entry. */
	if (reset)
		(void)real_curl_easy_setopt_ptr(r, dup, CURLOPT_HTTPHEADER, app);
	if (prereq)
		curl_prereq_give_back(r, dup, app_prereq, app_prereq_data);
	curl_handle_free(stale);
	errno = saved_errno;
	return dup;
}

static CURLMcode
hook_curl_multi_add_handle(struct curl_real *r,
			   CURLM *multi,
			   CURL *easy,
			   const void *ra)
{
	struct curl_app_headers a;
	struct curl_plan p;
	struct curl_handle *e = NULL;
	bool installed = false;
	int saved_errno;
	CURLMcode rc;

	if (!ctxshim_active() || easy == curl_performing || curl_internal(r, ra))
		return real_curl_multi_add_handle(r, multi, easy);
	saved_errno = errno;
	curl_sig_block(); /* one block for both critical sections */
	curl_settle(easy);
	if (curl_prepare(r, easy, false, &p, &a, &e))
		installed = curl_install(e, &p, multi);
	curl_sig_restore();
	errno = saved_errno;
	rc = real_curl_multi_add_handle(r, multi, easy);
	if (rc != CURLM_OK && installed) {
		saved_errno = errno;
		curl_lock_take();
		e = curl_handle_find(easy);
		if (e)
			curl_restore_locked(e);
		curl_lock_give();
		errno = saved_errno;
	}
	return rc;
}

static CURLMcode
hook_curl_multi_remove_handle(struct curl_real *r,
			      CURLM *multi,
			      CURL *easy,
			      const void *ra)
{
	struct curl_handle *e;
	int saved_errno;
	CURLMcode rc = real_curl_multi_remove_handle(r, multi, easy);

	if (rc != CURLM_OK || !ctxshim_active() || easy == curl_performing ||
	    curl_internal(r, ra))
		return rc;
	saved_errno = errno;
	curl_lock_take();
	e = curl_handle_find(easy);
	if (e && e->ours && e->multi == multi)
		curl_restore_locked(e);
	curl_lock_give();
	errno = saved_errno;
	return rc;
}

static CURLMcode
hook_curl_multi_cleanup(struct curl_real *r, CURLM *multi, const void *ra)
{
	struct curl_handle *e, *tmp;
	int saved_errno;
	CURLMcode rc = real_curl_multi_cleanup(r, multi);

	if (rc != CURLM_OK || !ctxshim_active() || curl_internal(r, ra))
		return rc;
	/* The easy handles outlive their multi handle; whatever was still in
	 * it gets the application's list back. */
	saved_errno = errno;
	curl_lock_take();
	HASH_ITER (hh, curl_handles, e, tmp) {
		if (e->ours && e->multi == multi)
			curl_restore_locked(e);
	}
	curl_lock_give();
	errno = saved_errno;
	return rc;
}

/* ---- exported names, one set per version node ----------------------------- */

/* Each flavour's copies: a non-default version of the libcurl name
 * ("name@NODE"), the C name removed from the symbol table. */
#define CURL_SYMVER(tag, fn, node) \
	__asm__(".symver ctxshim_" #fn "_" #tag ", " #fn "@" node ", remove")

#define CURL_FLAVOUR_HOOKS(tag, fl, node)                                              \
	static void *const *curl_own_##tag(const void *ret)                            \
	{                                                                              \
		return curl_own(fl, ret);                                              \
	}                                                                              \
	HOOK_EXPORT CURL *ctxshim_curl_easy_init_##tag(void);                          \
	HOOK_EXPORT CURLcode ctxshim_curl_easy_setopt_##tag(CURL *, CURLoption, ...);  \
	HOOK_EXPORT CURLcode ctxshim_curl_easy_perform_##tag(CURL *);                  \
	HOOK_EXPORT void ctxshim_curl_easy_cleanup_##tag(CURL *);                      \
	HOOK_EXPORT void ctxshim_curl_easy_reset_##tag(CURL *);                        \
	HOOK_EXPORT CURL *ctxshim_curl_easy_duphandle_##tag(CURL *);                   \
	HOOK_EXPORT CURLMcode ctxshim_curl_multi_add_handle_##tag(CURLM *, CURL *);    \
	HOOK_EXPORT CURLMcode ctxshim_curl_multi_remove_handle_##tag(CURLM *, CURL *); \
	HOOK_EXPORT CURLMcode ctxshim_curl_multi_cleanup_##tag(CURLM *);               \
                                                                                       \
	HOOK_EXPORT CURL *ctxshim_curl_easy_init_##tag(void)                           \
	{                                                                              \
		CTXSHIM_OWN_RETURN(curl_own_##tag, CURL_FN_EASY_INIT,                  \
				   curl_easy_init_fn);                                 \
		struct curl_real *r = curl_flavour(fl);                                \
                                                                                       \
		return r ? hook_curl_easy_init(r, __builtin_return_address(0)) : NULL; \
	}                                                                              \
	HOOK_EXPORT CURLcode ctxshim_curl_easy_setopt_##tag(CURL *easy,                \
							    CURLoption opt, ...)       \
	{                                                                              \
		void *const *own = curl_own_##tag(__builtin_return_address(0));        \
		struct curl_real *r;                                                   \
		CURLcode rc;                                                           \
		va_list ap;                                                            \
                                                                                       \
		va_start(ap, opt);                                                     \
		if (own && own[CURL_FN_EASY_SETOPT])                                   \
			rc = curl_setopt_va(                                           \
				(curl_easy_setopt_fn)own[CURL_FN_EASY_SETOPT], easy,   \
				opt, ap);                                              \
		else if ((r = curl_flavour(fl)) != NULL)                               \
			rc = hook_curl_easy_setopt(r, easy, opt, ap,                   \
						   __builtin_return_address(0));       \
		else                                                                   \
			rc = CURLE_FAILED_INIT;                                        \
		va_end(ap);                                                            \
		return rc;                                                             \
	}                                                                              \
	HOOK_EXPORT CURLcode ctxshim_curl_easy_perform_##tag(CURL *easy)               \
	{                                                                              \
		CTXSHIM_OWN_RETURN(curl_own_##tag, CURL_FN_EASY_PERFORM,               \
				   curl_easy_perform_fn, easy);                        \
		struct curl_real *r = curl_flavour(fl);                                \
                                                                                       \
		return r ? hook_curl_easy_perform(r, easy,                             \
						  __builtin_return_address(0))         \
			 : CURLE_FAILED_INIT;                                          \
	}                                                                              \
	HOOK_EXPORT void ctxshim_curl_easy_cleanup_##tag(CURL *easy)                   \
	{                                                                              \
		CTXSHIM_OWN_RETURN_VOID(curl_own_##tag, CURL_FN_EASY_CLEANUP,          \
					curl_easy_cleanup_fn, easy);                   \
		struct curl_real *r = curl_flavour(fl);                                \
                                                                                       \
		if (r)                                                                 \
			hook_curl_easy_cleanup(r, easy, __builtin_return_address(0));  \
	}                                                                              \
	HOOK_EXPORT void ctxshim_curl_easy_reset_##tag(CURL *easy)                     \
	{                                                                              \
		CTXSHIM_OWN_RETURN_VOID(curl_own_##tag, CURL_FN_EASY_RESET,            \
					curl_easy_reset_fn, easy);                     \
		struct curl_real *r = curl_flavour(fl);                                \
                                                                                       \
		if (r)                                                                 \
			hook_curl_easy_reset(r, easy, __builtin_return_address(0));    \
	}                                                                              \
	HOOK_EXPORT CURL *ctxshim_curl_easy_duphandle_##tag(CURL *easy)                \
	{                                                                              \
		CTXSHIM_OWN_RETURN(curl_own_##tag, CURL_FN_EASY_DUPHANDLE,             \
				   curl_easy_duphandle_fn, easy);                      \
		struct curl_real *r = curl_flavour(fl);                                \
                                                                                       \
		return r ? hook_curl_easy_duphandle(r, easy,                           \
						    __builtin_return_address(0))       \
			 : NULL;                                                       \
	}                                                                              \
	HOOK_EXPORT CURLMcode ctxshim_curl_multi_add_handle_##tag(CURLM *multi,        \
								  CURL *easy)          \
	{                                                                              \
		CTXSHIM_OWN_RETURN(curl_own_##tag, CURL_FN_MULTI_ADD_HANDLE,           \
				   curl_multi_handle_fn, multi, easy);                 \
		struct curl_real *r = curl_flavour(fl);                                \
                                                                                       \
		return r ? hook_curl_multi_add_handle(r, multi, easy,                  \
						      __builtin_return_address(0))     \
			 : CURLM_INTERNAL_ERROR;                                       \
	}                                                                              \
	HOOK_EXPORT CURLMcode ctxshim_curl_multi_remove_handle_##tag(CURLM *multi,     \
								     CURL *easy)       \
	{                                                                              \
		CTXSHIM_OWN_RETURN(curl_own_##tag, CURL_FN_MULTI_REMOVE_HANDLE,        \
				   curl_multi_handle_fn, multi, easy);                 \
		struct curl_real *r = curl_flavour(fl);                                \
                                                                                       \
		return r ? hook_curl_multi_remove_handle(r, multi, easy,               \
							 __builtin_return_address(0))  \
			 : CURLM_INTERNAL_ERROR;                                       \
	}                                                                              \
	HOOK_EXPORT CURLMcode ctxshim_curl_multi_cleanup_##tag(CURLM *multi)           \
	{                                                                              \
		CTXSHIM_OWN_RETURN(curl_own_##tag, CURL_FN_MULTI_CLEANUP,              \
				   curl_multi_cleanup_fn, multi);                      \
		struct curl_real *r = curl_flavour(fl);                                \
                                                                                       \
		return r ? hook_curl_multi_cleanup(r, multi,                           \
						   __builtin_return_address(0))        \
			 : CURLM_INTERNAL_ERROR;                                       \
	}                                                                              \
	static const void *const curl_self_##tag[CURL_FN_HOOKED] = {                   \
		[CURL_FN_EASY_INIT] = (const void *)ctxshim_curl_easy_init_##tag,      \
		[CURL_FN_EASY_SETOPT] = (const void *)ctxshim_curl_easy_setopt_##tag,  \
		[CURL_FN_EASY_PERFORM] =                                               \
			(const void *)ctxshim_curl_easy_perform_##tag,                 \
		[CURL_FN_EASY_CLEANUP] =                                               \
			(const void *)ctxshim_curl_easy_cleanup_##tag,                 \
		[CURL_FN_EASY_RESET] = (const void *)ctxshim_curl_easy_reset_##tag,    \
		[CURL_FN_EASY_DUPHANDLE] =                                             \
			(const void *)ctxshim_curl_easy_duphandle_##tag,               \
		[CURL_FN_MULTI_ADD_HANDLE] =                                           \
			(const void *)ctxshim_curl_multi_add_handle_##tag,             \
		[CURL_FN_MULTI_REMOVE_HANDLE] =                                        \
			(const void *)ctxshim_curl_multi_remove_handle_##tag,          \
		[CURL_FN_MULTI_CLEANUP] =                                              \
			(const void *)ctxshim_curl_multi_cleanup_##tag,                \
	};                                                                             \
	CURL_SYMVER(tag, curl_easy_init, node);                                        \
	CURL_SYMVER(tag, curl_easy_setopt, node);                                      \
	CURL_SYMVER(tag, curl_easy_perform, node);                                     \
	CURL_SYMVER(tag, curl_easy_cleanup, node);                                     \
	CURL_SYMVER(tag, curl_easy_reset, node);                                       \
	CURL_SYMVER(tag, curl_easy_duphandle, node);                                   \
	CURL_SYMVER(tag, curl_multi_add_handle, node);                                 \
	CURL_SYMVER(tag, curl_multi_remove_handle, node);                              \
	CURL_SYMVER(tag, curl_multi_cleanup, node)

CURL_FLAVOUR_HOOKS(openssl, CURL_FL_OPENSSL, "CURL_OPENSSL_4");
CURL_FLAVOUR_HOOKS(gnutls, CURL_FL_GNUTLS, "CURL_GNUTLS_3");
CURL_FLAVOUR_HOOKS(nss, CURL_FL_NSS, "CURL_NSS_3");
