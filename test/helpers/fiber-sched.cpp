/* SPDX-License-Identifier: Apache-2.0 */
/* fiber-sched: Boost.Context fibers through the library's own C++ header
 * API (boost::context::fiber), whose switches are inlined into the
 * program and call libboost_context's jump_fcontext()/ontop_fcontext()
 * through its PLT.  Fibers A, B and D each read a request head with a
 * traceparent of their own from their own connection (the socket level
 * publishes it) and switch back to main (resume()); main resumes A and B,
 * which work and end, and destroys D while it is suspended: Boost then
 * unwinds D's stack by throwing forced_unwind out of a function run on top
 * of it, through the shim's switch frame.  Then E and F do as A and B,
 * resumed in the other order.  Each prints what its thread's record shows
 * (ctxobs.h), one line each:
 *
 *   A-read, B-read, D-read, A-work, B-work, D-unwound (in a destructor on
 *   D's stack), MAIN-destroyed, E-read, F-read, F-work, E-work, MAIN-end,
 *   each followed by <trace> (32 hex or "none").
 *
 * No tracing code but the read of the record. */
#include "config.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <boost/context/fiber.hpp>

static __attribute__((noreturn)) void
die(const char *what)
{
	perror(what);
	exit(2);
}

#include "ctxobs.h"
#include "sock-pair.h"

namespace ctx = boost::context;

static void
show(const char *who, const char *what)
{
	char t[33];

	printf("%s-%s %s\n", who, what, ctxobs_trace(t));
	fflush(stdout);
}

/* The server's end of a new connection on which a request with trace's
 * traceparent waits (the client's end stays open). */
static int
request(char c)
{
	char trace[33];
	int cli, srv;

	memset(trace, c, 32);
	trace[32] = '\0';
	(void)pair_sent(&cli, &srv, trace);
	return srv;
}

/* Shows its thread's record when D's stack is unwound. */
struct unwound {
	~unwound()
	{
		show("D", "unwound");
	}
};

/* A fiber that reads its request, switches back to main, and works when
 * resumed. */
static ctx::fiber
worker(const char *name, int fd, ctx::fiber &&main_f)
{
	read_head(fd);
	show(name, "read");
	main_f = std::move(main_f).resume();
	show(name, "work");
	return std::move(main_f);
}

static ctx::fiber
doomed(int fd, ctx::fiber &&main_f)
{
	unwound u;

	read_head(fd);
	show("D", "read");
	main_f = std::move(main_f).resume();
	die("D resumed");
}

int
main()
{
	int fa = request('a'), fb = request('b'), fd = request('d');
	int fe = request('e'), ff = request('f');
	ctx::fiber a{[fa](ctx::fiber &&m) { return worker("A", fa, std::move(m)); }};
	ctx::fiber b{[fb](ctx::fiber &&m) { return worker("B", fb, std::move(m)); }};
	ctx::fiber d{[fd](ctx::fiber &&m) { return doomed(fd, std::move(m)); }};

	a = std::move(a).resume();
	b = std::move(b).resume();
	d = std::move(d).resume();
	a = std::move(a).resume();
	b = std::move(b).resume();
	if (a || b)
		die("A or B not done");
	{
		ctx::fiber gone = std::move(d);
	}
	show("MAIN", "destroyed");

	ctx::fiber e{[fe](ctx::fiber &&m) { return worker("E", fe, std::move(m)); }};
	ctx::fiber f{[ff](ctx::fiber &&m) { return worker("F", ff, std::move(m)); }};

	e = std::move(e).resume();
	f = std::move(f).resume();
	f = std::move(f).resume();
	e = std::move(e).resume();
	show("MAIN", "end");
	return 0;
}
