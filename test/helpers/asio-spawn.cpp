/* SPDX-License-Identifier: Apache-2.0 */
/* asio-spawn: an HTTP/1.1 server of Boost.Asio stackful coroutines
 * (asio::spawn, on Boost.Coroutine, whose libboost_coroutine.so switches
 * with libboost_context's jump_fcontext() through its PLT): one coroutine
 * accepts, one per connection reads request heads (async_read_until) and
 * answers each, keep-alive, with the body "<trace>\n", the trace its
 * handler sees (ctxobs.h: 32 hex or "none").  Asio's read first tries the
 * socket in the coroutine; when that finds nothing (EAGAIN) the coroutine
 * suspends, and the io_context's reactor, on the thread's own stack, does
 * the read that gets the head and resumes the coroutine.
 *
 *   asio-spawn plain   answers at once
 *   asio-spawn timer   waits on a steady_timer (5 ms) between the head and
 *                      the answer: suspended with its request, resumed by
 *                      the timer, other connections' heads read meanwhile
 *
 * Prints "READY <port>" (listen-loopback.h), then "READING" before each
 * read of a head, so that a test can let that first try find nothing;
 * ends at EOF on stdin.  No tracing code but the read of the record. */
#include "config.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
/* before Asio: Boost 1.74's awaitable.hpp, compiled in C++20, uses
 * std::exchange without including it */
#include <utility>

/* Boost 1.74's own headers include ones it deprecated, and asio::spawn
 * is built on Boost.Coroutine, deprecated too: quiet both notes */
#define BOOST_ALLOW_DEPRECATED_HEADERS
#define BOOST_COROUTINES_NO_DEPRECATION_WARNING
#include <boost/asio.hpp>
#include <boost/asio/spawn.hpp>

#include "ctxobs.h"
#include "listen-loopback.h"

namespace asio = boost::asio;
using asio::ip::tcp;

static bool use_timer;

static void
session(tcp::socket s, asio::yield_context y)
{
	boost::system::error_code ec;
	asio::streambuf buf;
	asio::steady_timer timer(s.get_executor());
	char trace[33];

	for (;;) {
		printf("READING\n");
		fflush(stdout);
		size_t n = asio::async_read_until(s, buf, "\r\n\r\n", y[ec]);
		if (ec)
			return;
		buf.consume(n);
		if (use_timer) {
			timer.expires_after(std::chrono::milliseconds(5));
			timer.async_wait(y[ec]);
		}
		std::string body = std::string(ctxobs_trace(trace)) + "\n";
		std::string resp = "HTTP/1.1 200 OK\r\nContent-Length: " +
				   std::to_string(body.size()) + "\r\n\r\n" + body;
		asio::async_write(s, asio::buffer(resp), y[ec]);
		if (ec)
			return;
	}
}

int
main(int argc, char **argv)
{
	asio::io_context io;
	struct sockaddr_in a;
	int fd = listen_loopback(16, SOCK_CLOEXEC, &a);

	if (argc != 2 ||
	    (strcmp(argv[1], "plain") != 0 && strcmp(argv[1], "timer") != 0)) {
		fprintf(stderr, "usage: asio-spawn plain|timer\n");
		return 2;
	}
	if (fd < 0) {
		perror("asio-spawn: listen");
		return 1;
	}
	use_timer = strcmp(argv[1], "timer") == 0;
	tcp::acceptor acc(io, tcp::v4(), fd);
	asio::posix::stream_descriptor in(io, 0);

	asio::spawn(io, [&](asio::yield_context y) {
		for (;;) {
			boost::system::error_code ec;
			tcp::socket s(io);

			acc.async_accept(s, y[ec]);
			if (ec)
				return;
			asio::spawn(io,
				    [s = std::move(s)](asio::yield_context y2) mutable {
					    session(std::move(s), y2);
				    });
		}
	});
	asio::spawn(io, [&](asio::yield_context y) {
		boost::system::error_code ec;
		char b[64];

		while (!ec)
			in.async_read_some(asio::buffer(b), y[ec]);
		io.stop();
	});
	printf("READY %u\n", (unsigned)ntohs(a.sin_port));
	fflush(stdout);
	io.run();
	return 0;
}
