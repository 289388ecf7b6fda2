/* SPDX-License-Identifier: Apache-2.0 */
/* What an unmodified host does to its sockets, through
 * test/helpers/sock-attack.c run under the shim (it checks its own
 * thread's context and prints one RESULT line; run without the shim it
 * must pass too, so the calls' results are the kernel's):
 *
 *  - MSG_PEEK (also with MSG_WAITALL) of a whole and of half a head, many
 *    and zero-length iovecs, recvmmsg, EAGAIN/EINTR/EOF in the middle of
 *    a head: covered, to keep them so;
 *  - close_range() with flags the kernel rejects closed nothing but made
 *    the shim forget the connections in the range;
 *  - close_range(CLOSE_RANGE_UNSHARE) in one thread of several closes that
 *    thread's own copy of the table, but made the shim forget the
 *    connections the other threads go on serving;
 *  - closefrom() with a negative number closes everything (glibc takes it
 *    as 0) but the shim forgot nothing: a pipe that got a connection's
 *    number then published that connection's old request; in a _Fork()
 *    child (no atfork handler) too, which must not be taken for a vfork()
 *    child;
 *  - a forking server's parent and child each read a request right after
 *    fork() or _Fork(): the child must not draw the parent's span-ids;
 *  - a vfork() child's dup2() onto a number its parent uses for a pipe
 *    made the parent's pipe a copy of the connection (its bytes were
 *    scanned, its reads published the connection's stale request), and
 *    its closefrom()/close_range() before exec made the parent forget
 *    every connection (shared memory, hook-socket.c, sk_vfork_child());
 *  - dup2() of a connection in the middle of a head: the copy's rest of
 *    the head took a free capture of the pool whose last head had been
 *    scanned on the copy's number, and published that old head's
 *    url.path (preload/conn.c, conn_dup_head());
 *  - fclose() of an fdopen()ed connection closes its fd inside glibc: the
 *    shim went on publishing the request, and a pipe that got the number
 *    published the HTTP-looking bytes read from it (fclose hook); fclose()
 *    of other streams keeps its result and errno;
 *  - a copy made by dup() or fcntl(F_DUPFD/F_DUPFD_CLOEXEC), through
 *    fcntl64 (the header's name under _FILE_OFFSET_BITS=64) or plain
 *    fcntl, was no connection: with the original closed, its response and
 *    its next request went unseen; and a vfork() child's copies must not
 *    make its parent's pipes look like the connection;
 *  - a connection read through one descriptor and written through a copy
 *    (dup, dup2, dup3, F_DUPFD, made before its first request like
 *    inetd's fd 0 and 1, or in the middle of one): the write through the
 *    copy was I/O on another connection (the thread dropped the request's
 *    context while writing its response), the response never answered
 *    the request, and the next keep-alive request kept the first one's
 *    context; closing either descriptor must leave the other carrying the
 *    connection, and a number reused after a copy's close no link; the
 *    close of the descriptor whose request the thread showed (the
 *    original, or the copy the head was read through) cleared it while
 *    the request went on through the other one; a pool worker's wait
 *    judged the request by the slot it was read from, closed by another
 *    thread (cleared while the copy carried it on) or a copy since the
 *    state moved away (shown after its response, at every wait);
 *  - rings of copies (copy-ring): a copy fifteen links away from the
 *    reader (sixteen descriptors) was beyond the eight-hop walk: its
 *    response answered nothing and every later request of the connection
 *    got the context of the one before it; copies of copies, dup2() over
 *    the reader, close_range()/closefrom() around it, a pipelined request
 *    read through a copy;
 *  - a connection inherited as fd 0 and fd 1 (inetd, socket activation)
 *    was never followed (TCP, or AF_UNIX accepted from a named listener);
 *    CTXSHIM_INHERITED=0 keeps it so, a socketpair() there (sshd's, socat
 *    EXEC's) is never followed, and a client-side TCP socket there must
 *    stay harmless (its I/O publishes nothing and leaves another
 *    connection's context alone).
 *
 * Each runs with the event log off and on (the hooks take other paths). */
#include "test-common.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void
run_attack(const char *mode, const char *how, bool shim, bool events)
{
	char path[4096], *out = NULL, *err = NULL, want[64];
	char *argv[] = {path, (char *)mode, (char *)how, NULL};
	char *env_on[] = {"CTXSHIM_EVENTS=/dev/null", NULL};
	int st;

	unsetenv("CTXSHIM_EVENTS");
	snprintf(path, sizeof(path), "%s/sock-attack", test_env_path("HELPER_DIR"));
	st = test_run_capture(argv, events ? env_on : NULL, shim, &out, &err, 30000);
	snprintf(want, sizeof(want), "RESULT %s ", mode);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, want) &&
			      strstr(out, " fails=0\n"),
		      "sock-attack %s %s (shim %s, events %s): status %#x:\n%s\n%s",
		      mode, how ? how : "", shim ? "on" : "off", events ? "on" : "off",
		      st, out, err);
	free(out);
	free(err);
}

/* _i: bit 0 the event log, bit 1 without the shim (the kernel's answers) */
static void
run_both(const char *mode, const char *how, int i)
{
	run_attack(mode, how, !(i & 2), i & 1);
}

/* The modes without a variant: _i >> 2 picks the mode, _i & 3 as in
 * run_both(). */
static const char *const simple_modes[] = {
	"peek",
	"iov",
	"eintr",
	"close-range-einval",
	"close-range-unshare",
	"closefrom-negative",
	"dup2-mid-head",
	"fdopen-fclose",
	"fclose-results",
	"vfork-dup",
	"copy-reuse",
	"copy-read",
	"stdin-client",
};

START_TEST(simple)
{
	run_both(simple_modes[_i >> 2], NULL, _i & 3);
}
END_TEST

START_TEST(vfork_child_fds)
{
	run_both("vfork-dup2", _i & 4 ? "close_range" : "closefrom", _i & 3);
}
END_TEST

static const char *const dup_hows[] = {"dup", "fcntl", "fcntl-cloexec", "fcntl-sym"};

START_TEST(dup_answer)
{
	run_both("dup-answer", dup_hows[_i >> 2], _i & 3);
}
END_TEST

/* Modes with a variant: {mode, variant}.  The last three fork children,
 * also by _Fork(), which runs no atfork handler. */
static const char *const variant_modes[][2] = {
	{"copy-rw", "dup"},
	{"copy-rw", "dup2"},
	{"copy-rw", "dup3"},
	{"copy-rw", "fcntl"},
	{"copy-close", "original"},
	{"copy-close", "copy"},
	{"stdin-server", "on"},
	{"stdin-server", "off"},
	{"stdin-server", "unix"},
	{"stdin-server", "pair"},
	{"copy-ring", "long"},
	{"copy-ring", "copy-of-copy"},
	{"copy-ring", "dup2-leader"},
	{"copy-ring", "close-range"},
	{"copy-ring", "closefrom"},
	{"copy-ring", "pipelined"},
	{"copy-close", "read-copy"},
	{"copy-wait", "close"},
	{"copy-wait", "read"},
	{"inherit-wait", "close"},
	{"inherit-wait", "read"},
	{"inherit-wait", "gone"},
	{"closefrom-negative", "_Fork"},
	{"fork-ids", "fork"},
	{"fork-ids", "_Fork"},
};

START_TEST(variants)
{
	run_both(variant_modes[_i >> 2][0], variant_modes[_i >> 2][1], _i & 3);
}
END_TEST

/* Races, under the shim only (without it nothing is published, so
 * nothing is checked): a response written through a copy of a connection
 * pops its queue of pipelined requests while the state moves to another
 * descriptor -- in a signal handler on the writer's thread ("signal"),
 * or as another thread closes the original and the other copies
 * ("close") -- another connection churning the pool.  Timed: the old code
 * published another connection's context in most "signal" runs and in a
 * few "close" runs (preload/conn.c, "Copies"). */
START_TEST(copy_race)
{
	static const char *const how[] = {"signal", "close"};

	run_attack("copy-race", how[_i], true, _i == 1);
}
END_TEST

TEST_SUITE(sockattack_suite)
{
	Suite *s = suite_create("preload-sockattack");
	TCase *tc = tcase_create("attack");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, simple, 0,
			    (int)(4 * sizeof(simple_modes) / sizeof(simple_modes[0])));
	tcase_add_loop_test(tc, vfork_child_fds, 0, 8);
	tcase_add_loop_test(tc, dup_answer, 0, 16);
	tcase_add_loop_test(
		tc, variants, 0,
		(int)(4 * sizeof(variant_modes) / sizeof(variant_modes[0])));
	tcase_add_loop_test(tc, copy_race, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}
