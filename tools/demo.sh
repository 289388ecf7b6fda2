#!/bin/sh
# The demo: unmodified programs run under libctxshim.so, and ctxdump reads
# what they publish from outside.  Usage: tools/demo.sh [BUILDDIR]
set -eu
build=${1:-$(cd "$(dirname "$0")/.." && pwd)/build}
# the build tree's ctxshim preloads the build tree's libctxshim.so; run
# execs the program, so $! is the program's pid
ctxshim=$build/tools/ctxshim/ctxshim
ctxdump=$build/tools/ctxdump/ctxdump
helpers=$build/test/helpers
tmp=$(mktemp -d)
pids=
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# bold headings on a terminal only: a log or a pipe gets plain text
if [ -t 1 ]; then
	say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
	say() { printf '\n== %s\n' "$*"; }
fi

# Waits for a line starting with $2 in file $1 (a helper's readiness line).
wait_line() {
	i=0
	while ! grep -q "^$2" "$1" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 500 ] || { echo "demo: timed out waiting for '$2'" >&2; exit 1; }
		sleep 0.02
	done
	grep "^$2" "$1" | head -n 1
}

say "1. A multi-threaded program with no tracing code, started with a TRACEPARENT"
echo "   TRACEPARENT=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 \\"
echo "   ctxshim run -n demo-batch -- threads --wait 3"
mkfifo "$tmp/in"
TRACEPARENT=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 \
	"$ctxshim" run -n demo-batch -- \
	"$helpers/threads" --wait 3 <"$tmp/in" >"$tmp/out" &
pid=$!
pids="$pids $pid"
exec 3>"$tmp/in"
wait_line "$tmp/out" READY >/dev/null

say "2. Its process context (OTEP-4719) is a memfd mapping named OTEL_CTX"
grep OTEL_CTX "/proc/$pid/maps"

say "3. ctxdump stops it for a moment and reads every thread's record (OTEP-4947)"
"$ctxdump" "$pid"

say "4. One thread with its stack (copied while stopped, unwound after)"
"$ctxdump" --stacks --max-frames 4 --tid "$pid" "$pid"
exec 3>&-
wait "$pid"

if [ -x "$helpers/tpc-server" ] && command -v curl >/dev/null; then
	say "5. A thread-per-connection HTTP server with no tracing code receives a traced request"
	mkfifo "$tmp/ctl"
	echo "   CTXSHIM_HEADER_ATTRS=x-request-id ctxshim run -- tpc-server"
	CTXSHIM_HEADER_ATTRS=x-request-id "$ctxshim" run -- \
		"$helpers/tpc-server" <"$tmp/ctl" >"$tmp/srv" &
	spid=$!
	pids="$pids $spid"
	exec 4>"$tmp/ctl"
	port=$(wait_line "$tmp/srv" READY | awk '{print $NF}')
	echo "   curl -H 'traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' \\"
	echo "        -H 'x-request-id: demo-42' http://127.0.0.1:$port/block/orders?id=7"
	curl -s -o "$tmp/resp" \
		-H 'traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' \
		-H 'x-request-id: demo-42' "http://127.0.0.1:$port/block/orders?id=7" &
	cpid=$!
	wait_line "$tmp/srv" BLOCK >/dev/null
	say "6. While the handler is blocked, ctxdump shows the request on its thread"
	"$ctxdump" --quiet "$spid"
	echo go >&4
	wait "$cpid"
	exec 4>&-
	wait "$spid" || true
fi
say "done"
