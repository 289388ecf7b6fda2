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
 *   asio-spawn plain    answers at once
 *   asio-spawn timer    waits on a steady_timer (5 ms) between the head and
 *                       the answer: suspended with its request, resumed by
 *                       the timer, other connections' heads read meanwhile
 *   asio-spawn tls      as plain, over asio::ssl::stream (OpenSSL over a
 *                       BIO pair, a certificate made at start): the
 *                       reactor reads ciphertext, the SSL_read() that gets
 *                       the head runs in the read's handler on its stack
 *   asio-spawn threads  as timer, with io.run() on 4 threads; a request
 *                       for /sleep prints "SLEEPING" and waits an hour
 *                       instead (until EOF on stdin)
 *
 * Prints "READY <port>" (listen-loopback.h), then "READING" before each
 * read of a head, so that a test can let that first try find nothing;
 * ends at EOF on stdin.  No tracing code but the read of the record. */
#include "config.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
/* before Asio: Boost 1.74's awaitable.hpp, compiled in C++20, uses
 * std::exchange without including it */
#include <utility>

/* Boost 1.74's own headers include ones it deprecated, and asio::spawn
 * is built on Boost.Coroutine, deprecated too: quiet both notes */
#define BOOST_ALLOW_DEPRECATED_HEADERS
#define BOOST_COROUTINES_NO_DEPRECATION_WARNING
#include <boost/asio.hpp>
#include <boost/asio/spawn.hpp>
#include <boost/asio/ssl.hpp>

#include "ctxobs.h"
#include "listen-loopback.h"
#include "tls-selfsigned.h"

namespace asio = boost::asio;
using asio::ip::tcp;

static bool use_timer;

template <class Stream>
static void
session(Stream &s, asio::yield_context y)
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
		bool sleep = std::string(asio::buffers_begin(buf.data()),
					 asio::buffers_begin(buf.data()) + n)
				     .rfind("GET /sleep ", 0) == 0;
		buf.consume(n);
		if (sleep) {
			printf("SLEEPING\n");
			fflush(stdout);
		}
		if (use_timer) {
			timer.expires_after(sleep ? std::chrono::milliseconds(3600000)
						  : std::chrono::milliseconds(5));
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
	asio::ssl::context tls(asio::ssl::context::tls_server);
	std::vector<std::thread> more;
	struct sockaddr_in a;
	int fd = listen_loopback(16, SOCK_CLOEXEC, &a);
	const char *mode = argc == 2 ? argv[1] : "";
	bool use_tls = strcmp(mode, "tls") == 0, threads = strcmp(mode, "threads") == 0;

	if (strcmp(mode, "plain") != 0 && strcmp(mode, "timer") != 0 && !use_tls &&
	    !threads) {
		fprintf(stderr, "usage: asio-spawn plain|timer|tls|threads\n");
		return 2;
	}
	if (fd < 0) {
		perror("asio-spawn: listen");
		return 1;
	}
	if (use_tls && !tls_self_signed(tls.native_handle())) {
		fprintf(stderr, "asio-spawn: cannot make a certificate\n");
		return 1;
	}
	use_timer = strcmp(mode, "timer") == 0 || threads;
	tcp::acceptor acc(io, tcp::v4(), fd);
	asio::posix::stream_descriptor in(io, 0);

	asio::spawn(io, [&](asio::yield_context y) {
		for (;;) {
			boost::system::error_code ec;
			tcp::socket s(io);

			acc.async_accept(s, y[ec]);
			if (ec)
				return;
			asio::spawn(io, [&tls, use_tls, s = std::move(s)](
						asio::yield_context y2) mutable {
				if (!use_tls) {
					session(s, y2);
					return;
				}
				asio::ssl::stream<tcp::socket> t(std::move(s), tls);
				boost::system::error_code ec2;

				t.async_handshake(asio::ssl::stream_base::server,
						  y2[ec2]);
				if (!ec2)
					session(t, y2);
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
	for (int i = 1; threads && i < 4; i++)
		more.emplace_back([&io] { io.run(); });
	io.run();
	for (auto &t : more)
		t.join();
	/* Not through the destructors: io_context's would unwind the
	 * coroutines still suspended (the /sleep ones) while it empties its
	 * timer queue, and each unwinding destroys a timer of that queue
	 * (a SEGV under ASan). */
	fflush(stdout);
	_exit(0);
}
