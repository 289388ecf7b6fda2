#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# The shim stacked with other LD_PRELOAD libraries: jemalloc (a malloc
# replacement, which libc and the loader call from the first allocation
# on) and proxychains (a socket interposer that wraps connect() and close()
# and finds libc's through RTLD_NEXT), listed before the shim (what
# "ctxshim run" makes of an LD_PRELOAD that has them: it appends) and
# after it.  An epoll server (accept4, recv) must answer byte for byte as
# under the two libraries alone, keep every entry in its order, and
# publish its request's context, which ctxdump reads.  A libcurl client's
# connect() must reach proxychains's in either order: the shim's own
# connect() passes the call on to the next definition, not to libc's.

. "$(dirname "$0")/deploy-lib.sh"

[ -z "$dp_base_preload" ] ||
	dp_skip "a malloc replacement cannot run beside the ASan runtime"
for so in libjemalloc.so.2 libproxychains.so.4; do
	ldconfig -p | grep -q "^[[:space:]]$so " ||
		dp_skip "$so is not installed (packages libjemalloc2, libproxychains4)"
done
command -v curl >/dev/null || dp_skip "no curl"

S=$CTXSHIM_CMD
lib=$CTXSHIM_LIB
dump=$CTXSHIM_BUILDDIR/tools/ctxdump/ctxdump
stack="libjemalloc.so.2 libproxychains.so.4"
trace=4bf92f3577b34da6a3ce929d0e0e4736
cd "$dp_tmp" || exit 1
# Loopback goes out directly: no proxy is needed to reach the server.
printf 'strict_chain\nquiet_mode\nlocalnet 127.0.0.0/255.0.0.0\n[ProxyList]\nsocks5 127.0.0.1 9\n' >pc.conf
PROXYCHAINS_CONF_FILE=$dp_tmp/pc.conf
export PROXYCHAINS_CONF_FILE

# serve LABEL COMMAND...: run epoll-server through COMMAND, send it a
# traced request that blocks, and set: sv_env (its LD_PRELOAD), sv_maps
# (which of the three libraries it maps, sorted), sv_dump
# (ctxdump's output while the request blocks), sv_resp (the response, with
# its head).
sv_n=0
serve() {
	sv_label=$1
	shift
	sv_n=$((sv_n + 1))
	mkfifo "in.$sv_n" "go.$sv_n"
	# The helper's stdin: held open by this job until the request is
	# released, then the line that releases it, then its end.
	{
		read -r _ <"go.$sv_n"
		echo go
	} >"in.$sv_n" &
	dp_pids="$dp_pids $!"
	"$@" "$HELPER_DIR/epoll-server" <"in.$sv_n" >"out.$sv_n" 2>"err.$sv_n" &
	sv_pid=$!
	dp_pids="$dp_pids $sv_pid"
	sv_port=
	for _ in $(seq 100); do
		sv_port=$(sed -n 's/^READY //p' "out.$sv_n")
		[ -n "$sv_port" ] && break
		sleep 0.1
	done
	if [ -z "$sv_port" ]; then
		fail "$sv_label: epoll-server did not start: $(cat "err.$sv_n")"
		printf 'go\n' >"go.$sv_n"
		return
	fi
	curl -si -m 30 -H "traceparent: 00-$trace-00f067aa0ba902b7-01" \
		"http://127.0.0.1:$sv_port/block/interop" >"resp.$sv_n" 2>&1 &
	sv_curl=$!
	for _ in $(seq 100); do
		grep -q '^BLOCK ' "out.$sv_n" && break
		sleep 0.1
	done
	sv_env=$(tr '\0' '\n' <"/proc/$sv_pid/environ" | sed -n 's/^LD_PRELOAD=//p')
	sv_maps=$(grep -o -e 'libjemalloc\.so\.2' -e 'libproxychains\.so\.4' \
		-e 'libctxshim\.so' "/proc/$sv_pid/maps" | sort -u | tr '\n' ' ')
	sv_dump=$("$dump" --stop-timeout=5000 "$sv_pid" 2>&1)
	printf 'go\n' >"go.$sv_n"
	wait "$sv_curl"
	wait "$sv_pid"
	check "$sv_label: exits 0" same "$?" 0
	sv_resp=$(cat "resp.$sv_n")
}

serve "the two libraries alone" env LD_PRELOAD="$stack"
want_resp=$sv_resp
check "alone: answers" contains "$want_resp" "path=/block/interop"
check "alone: no shim" same "$sv_maps" "libjemalloc.so.2 libproxychains.so.4 "

serve "ctxshim run" env LD_PRELOAD="$stack" "$S" run --
check "run: appends the shim, the others first as they were" \
	same "$sv_env" "$stack:$lib"
check "run: maps all three" \
	same "$sv_maps" "libctxshim.so libjemalloc.so.2 libproxychains.so.4 "
check "run: the same response" same "$sv_resp" "$want_resp"
check "run: ctxdump finds the symbol" contains "$sv_dump" "Symbol: otel_thread_ctx_v1"
check "run: the request's trace is published" contains "$sv_dump" "$trace"

serve "shim first" env LD_PRELOAD="$lib $stack"
check "first: maps all three" \
	same "$sv_maps" "libctxshim.so libjemalloc.so.2 libproxychains.so.4 "
check "first: the same response" same "$sv_resp" "$want_resp"
check "first: ctxdump finds the symbol" contains "$sv_dump" "Symbol: otel_thread_ctx_v1"
check "first: the request's trace is published" contains "$sv_dump" "$trace"

# A server without any preload for the client below.
mkfifo in.c go.c
{
	read -r _ <go.c
} >in.c &
dp_pids="$dp_pids $!"
"$HELPER_DIR/epoll-server" <in.c >out.c 2>err.c &
dp_pids="$dp_pids $!"
cport=
for _ in $(seq 100); do
	cport=$(sed -n 's/^READY //p' out.c)
	[ -n "$cport" ] && break
	sleep 0.1
done
[ -n "$cport" ] || fail "epoll-server did not start: $(cat err.c)"
# Without the localnet line every connection goes to the proxy, which
# does not exist: the request fails where proxychains's connect() runs.
grep -v '^localnet' pc.conf >pc-all.conf
for order in "$lib $stack" "$stack:$lib"; do
	expect_status 0 "client, LD_PRELOAD=$order, loopback direct" \
		env LD_PRELOAD="$order" "$HELPER_DIR/curl-get" "http://127.0.0.1:$cport/chain"
	check "answered" contains "$dp_out" "BODY path=/chain"
	expect_status 1 "client, LD_PRELOAD=$order, all through the proxy" \
		env LD_PRELOAD="$order" PROXYCHAINS_CONF_FILE="$dp_tmp/pc-all.conf" \
		"$HELPER_DIR/curl-get" "http://127.0.0.1:$cport/chain"
	check "proxychains's connect() ran" same "$dp_out" "DONE 1"
done
printf 'go\n' >go.c

dp_finish
