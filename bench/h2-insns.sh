#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# What the shim spends per HTTP/2 request at the socket level (servers
# with their own HTTP/2 code: preload/conn.c "HTTP/2", proc-context/
# h2-scan.h), counted with callgrind, with browser-like header blocks
# (bench/h2req.c: Chrome's 19 fields and a traceparent, HPACK by
# libnghttp2's deflater, a new :path and traceparent per request):
#
#   (a) nginx h2c (prior knowledge, "listen ... http2", master_process
#       off) under callgrind with the shim, bench-h2req run sending N,
#       then 2N requests on one connection, one at a time, and 0 and 1
#       request:
#         ngx_later  instructions of libctxshim.so per later request:
#                    (count(2N) - count(N)) / N
#         ngx_first  the first request: count(1) - count(0) (count(0): a
#                    connection that sends nothing; the first request
#                    also brings the preface, SETTINGS and WINDOW_UPDATE)
#         ngx_later_writes  the server's writes per later request
#   (b) the scanner alone (bench-h2req scan N) on the same bytes:
#         scan_first  the opening and the first request (h2req_first)
#         scan_later  per later request (h2req_later / (N - 1))
#
# and below each, the split by function (self instructions, per request).
#
#   sh bench/h2-insns.sh [BUILDDIR]     (default: ./build)
#
# Environment: H2_REQS=N (default 200), H2_KEEP=1 keeps the work
# directory (the callgrind profiles).  About 20 s.  Needs valgrind,
# nginx (built with the http2 module: nginx-light has it) and a build
# with bench/bench-h2req (libnghttp2-dev).

set -u

SRCDIR=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$SRCDIR/build}
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || {
	echo "h2-insns: no build directory ${1:-$SRCDIR/build}" >&2
	exit 2
}
SHIM=$BUILD/libctxshim.so
H2REQ=$BUILD/bench/bench-h2req
N=${H2_REQS:-200}
for t in valgrind nginx; do
	command -v $t >/dev/null || {
		echo "h2-insns: $t is missing" >&2
		exit 2
	}
done
if [ ! -f "$SHIM" ] || [ ! -x "$H2REQ" ]; then
	echo "h2-insns: build first (ninja -C $BUILD; bench-h2req needs libnghttp2)" >&2
	exit 2
fi

. "$SRCDIR/bench/nginx-lib.sh"

cg_workdir h2-insns "${H2_KEEP:-0}" 18480

# cg REQS: nginx h2c under callgrind with the shim, REQS requests;
# profile in $W/cg-REQS.out
cg() {
	d=$W/ngx-$1
	ngx_conf "$d" "$P" "$W/www" single
	sed -i "s|listen 127.0.0.1:$P;|listen 127.0.0.1:$P http2;|" "$d/nginx.conf"
	LD_PRELOAD=$SHIM OTEL_SERVICE_NAME=bench-nginx valgrind --tool=callgrind \
		--toggle-collect=ngx_process_events_and_timers \
		--callgrind-out-file="$W/cg-$1.out" \
		nginx -p "$d" -c "$d/nginx.conf" -e "$d/error.log" >"$d/vg.out" 2>&1 &
	CGPID=$!
	cg_up "$P" "$d" || return 1
	"$H2REQ" run "$P" "$1" "$CGPID" >"$d/client.out" 2>&1 || cat "$d/client.out" >&2
	cg_down "$H2REQ" run "$P" 0
	grep -q "^requests=$1\$" "$d/client.out" || {
		echo "h2-insns: bench-h2req failed ($1 requests)" >&2
		return 1
	}
}

# fns FILE [OBJ]: "function self-instructions" of a profile (of object
# OBJ only, if given), one per line.  Read from the profile itself, not
# from callgrind_annotate, which names the object of a function's lines
# in its own file only: the lines inlined into it from other files
# (fi=/fe=: hooks/hook-h2.h into conn.c's conn_h2_report(), ...) came
# without one, and a filter by object left them out.  Names are
# compressed ("ob=(id) name" once, then "ob=(id)"; cob= and cfn= define
# them too); the line after calls= is the call's inclusive cost.
fns() {
	awk -v obj="${2:-}" '
	function name(l, tab,   id, nm) {
		sub(/^[a-z]+=/, "", l)
		if (l !~ /^\(/)
			return l
		id = l; sub(/\).*/, "", id)
		nm = l; sub(/^\([0-9]+\) ?/, "", nm)
		if (nm != "")
			tab[id] = nm
		return tab[id]
	}
	/^c?ob=/ { o = name($0, obs); if ($0 ~ /^ob=/) ob = o; next }
	/^c?fn=/ { f = name($0, fns); if ($0 ~ /^fn=/) fn = f; next }
	/^calls=/ { skip = 1; next }
	/^[0-9+*-]/ {
		if (skip) { skip = 0; next }
		if (obj == "" || index(ob, obj)) s[fn] += $NF
	}
	END { for (f in s) printf "%s %.0f\n", f, s[f] }' "$1"
}

# total FILE OBJ: instructions of OBJ in a profile
total() {
	fns "$1" "$2" | awk '{ t += $2 } END { printf "%.0f\n", t }'
}

# calls FILE FN: calls of function FN in a profile (name compression:
# "cfn=(id) name" once, then "cfn=(id)")
calls() {
	awk -v want="$2" '
	/^c?fn=/ {
		l = $0; sub(/^c?fn=/, "", l)
		id = l; sub(/\).*/, "", id)
		nm = l; sub(/^\([0-9]+\) ?/, "", nm)
		if (nm != "") names[id] = nm
		cur = names[id]
		next
	}
	/^calls=/ { if (cur == want) { split($0, a, /[= ]/); n += a[2] } }
	END { printf "%.0f\n", n }' "$1"
}

# split A B DIV: per function, (B - A) / DIV, largest first (A: "-" for none)
split() {
	if [ "$1" = - ]; then : >"$W/none"; set -- "$W/none" "$2" "$3"; fi
	awk -v d="$3" 'FILENAME == ARGV[1] { a[$1] = $2; next }
		{ v = ($2 - a[$1]) / d; if (v >= 1 || v <= -1) printf "  %8.1f %s\n", v, $1 }' \
		"$1" "$2" | sort -rn | head -25
}


SO=$(basename "$SHIM")
for r in 0 1 "$N" $((2 * N)); do
	cg "$r" || exit 1
	fns "$W/cg-$r.out" "$SO" >"$W/f-$r"
done
t0=$(total "$W/cg-0.out" "$SO")
t1=$(total "$W/cg-1.out" "$SO")
tn=$(total "$W/cg-$N.out" "$SO")
t2n=$(total "$W/cg-$((2 * N)).out" "$SO")

# (b) the scanner alone
valgrind --tool=callgrind --callgrind-out-file="$W/scan.out" "$H2REQ" scan "$N" \
	>"$W/scan.log" 2>&1 || {
	cat "$W/scan.log" >&2
	exit 1
}
for f in first later; do
	LD_BIND_NOW=1 valgrind --tool=callgrind --toggle-collect="h2req_$f" \
		--callgrind-out-file="$W/scan-$f.out" "$H2REQ" scan "$N" >/dev/null 2>&1
	fns "$W/scan-$f.out" >"$W/s-$f"
done
sf=$(awk '{ t += $2 } END { printf "%.0f", t }' "$W/s-first")
sl=$(awk '{ t += $2 } END { printf "%.0f", t }' "$W/s-later")

# the write walk per write: conn_h2_written(), or ctxshim_conn_h2_written()
# (the write hooks' direct path, which the walk is inlined into), with
# h2_out_feed()
walkfns='$1 == "conn_h2_written" || $1 == "ctxshim_conn_h2_written" || $1 == "h2_out_feed"'
wn=$(($(calls "$W/cg-$N.out" conn_h2_written) + $(calls "$W/cg-$N.out" ctxshim_conn_h2_written)))
w2n=$(($(calls "$W/cg-$((2 * N)).out" conn_h2_written) +
	$(calls "$W/cg-$((2 * N)).out" ctxshim_conn_h2_written)))
wk=$(awk "$walkfns"' { t += $2 } END { printf "%.0f", t }' "$W/f-$((2 * N))")
wk1=$(awk "$walkfns"' { t += $2 } END { printf "%.0f", t }' "$W/f-$N")

awk -v n="$N" -v t0="$t0" -v t1="$t1" -v tn="$tn" -v t2n="$t2n" -v sf="$sf" -v sl="$sl" \
	-v wn="$wn" -v w2n="$w2n" -v wk="$wk" -v wk1="$wk1" \
	'BEGIN { printf "ngx_first=%.0f ngx_later=%.1f ngx_writes=%.2f ngx_walk_per_write=%.1f scan_first=%.0f scan_later=%.1f reqs=%d\n",
		t1 - t0, (t2n - tn) / n, (w2n - wn) / n, (wk - wk1) / (w2n - wn), sf, sl / (n - 1), n }'
echo "nginx, first request (count(1) - count(0)), by function:"
split "$W/f-0" "$W/f-1" 1
echo "nginx, per later request, by function:"
split "$W/f-$N" "$W/f-$((2 * N))" "$N"
echo "scanner alone, opening + first request, by function:"
split - "$W/s-first" 1
echo "scanner alone, per later request, by function:"
split - "$W/s-later" $((N - 1))
