#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# The shim's instruction-cache footprint per nginx request (issue 8, B1;
# bench/README.md "Same IPC"): nginx (master_process off) under callgrind
# with its cache simulation, counting ngx_process_events_and_timers
# inclusively like B1i, while bench-ngxclient sends the B1 request head N
# and then 2N times on one keep-alive connection, without and with the
# shim.  Per request (the difference between the 2N and the N run, / N):
#
#   shim_ir     instructions executed in libctxshim.so (or HOT_SHIM)
#   shim_lines  distinct 64-byte code lines of that library executed in
#               the steady state: lines holding an instruction that ran at
#               least once per two requests (count(2N) - count(N) >= N/2)
#   shim_pages  distinct 4 KiB pages of those lines
#   i1_plain, i1_shim   simulated I1 misses of the whole event loop
#
# and, with HOT_FUNCS=1, the shim functions holding those lines.
#
#   sh bench/hot-lines.sh [BUILDDIR]    (default: ./build)
#
# Environment:
#   HOT_REQS=N     requests of the smaller run (default 500; the larger 2N)
#   HOT_HEAD=FILE  the request head to send (default: the head wrk sends in
#                  the B1 runs, "GET /small.html" with Host and traceparent,
#                  121 bytes; bench/run.sh passes the one it captured)
#   HOT_FUNCS=1    also list the shim's hot lines per function
#   BENCH_SENDFILE=on  nginx with "sendfile on" (bench/nginx-lib.sh)
#   HOT_KEEP=1     keep the work directory (the callgrind profiles)
#   HOT_SHIM=LIB   the preloaded library to measure (default
#                  BUILDDIR/libctxshim.so; run.sh passes bench/libminshim.so
#                  for B1zh)
#   HOT_I1=S,A,L   the simulated I1: bytes, ways, line bytes (default:
#                  this CPU's, as valgrind reads it with cpuid, since the
#                  misses are meant to predict B1 here; 65536,16,64 gives
#                  the counts of the tables before 2026-12-02, 32768,8,64
#                  is the usual x86-64 one)
#
# Counts repeat to within a few instructions and lines per request; about
# 4 s in all.
# Output: one line "shim_ir=... shim_lines=... shim_pages=... i1_plain=...
# i1_shim=... ir_plain=... ir_shim=... i1=S,A,L" on stdout; exit 1 if a run
# failed.

set -u

SRCDIR=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$SRCDIR/build}
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || {
	echo "hot-lines: no build directory ${1:-$SRCDIR/build}" >&2
	exit 2
}
SHIM=${HOT_SHIM:-$BUILD/libctxshim.so}
NGXCLIENT=$BUILD/bench/bench-ngxclient
N=${HOT_REQS:-500}
I1=${HOT_I1:-}
for t in valgrind nginx; do
	command -v $t >/dev/null || {
		echo "hot-lines: $t is missing" >&2
		exit 2
	}
done
if [ ! -f "$SHIM" ] || [ ! -x "$NGXCLIENT" ]; then
	echo "hot-lines: build first (ninja -C $BUILD)" >&2
	exit 2
fi
if [ -z "$I1" ]; then
	# "I1: 32,768 B, 8-way, 64 B lines" (what the simulation uses: the
	# CPU's own, or the nearest geometry valgrind can simulate)
	I1=$(valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file=/dev/null \
		-v /bin/true 2>&1 | awk '$2 == "I1:" && $5 ~ /-way,$/ {
			gsub(/,/, "", $3); sub(/-way,/, "", $5)
			print $3 "," $5 "," $6; exit }')
	case $I1 in
	[0-9]*,[0-9]*,[0-9]*) ;;
	*)
		echo "hot-lines: cannot read this CPU's I1 from valgrind; simulating 32768,8,64" >&2
		I1=32768,8,64
		;;
	esac
fi

. "$SRCDIR/bench/nginx-lib.sh"

cg_workdir hot-lines "${HOT_KEEP:-0}" 18380
if [ -n "${HOT_HEAD:-}" ]; then
	cp "$HOT_HEAD" "$W/head"
else
	printf 'GET /small.html HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n%s\r\n\r\n' "$P" \
		"traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" \
		>"$W/head"
fi

# cg NAME REQS [LD_PRELOAD]: like bench/run.sh cg_nginx, with the cache
# simulation and per-instruction counts; profile in $W/NAME-REQS.out
cg() {
	d=$W/$1-$2
	ngx_conf "$d" "$P" "$W/www" single
	LD_PRELOAD=${3:-} OTEL_SERVICE_NAME=bench-nginx valgrind --tool=callgrind \
		--toggle-collect=ngx_process_events_and_timers \
		--cache-sim=yes --I1="$I1" --dump-instr=yes \
		--callgrind-out-file="$W/$1-$2.out" \
		nginx -p "$d" -c "$d/nginx.conf" -e "$d/error.log" >"$d/vg.out" 2>&1 &
	CGPID=$!
	cg_up "$P" "$d" || return 1
	"$NGXCLIENT" run "$P" "$W/head" "$2" "$CGPID" >"$d/client.out" 2>&1 ||
		cat "$d/client.out" >&2
	cg_down "$NGXCLIENT" run "$P" "$W/head" 0
	grep -q "^requests=$2 " "$d/client.out" || {
		echo "hot-lines: bench-ngxclient failed ($1, $2 requests)" >&2
		return 1
	}
}

# per-instruction counts of a callgrind profile (positions "instr line",
# events starting "Ir ... I1mr"): prints "ADDR IR FUNCTION" for every
# instruction of an object whose name contains $2 (self cost only: the
# line after "calls=" is a call's inclusive cost), then "total IR I1MR"
# over all objects
cg_instr() {
	awk -v want="$2" '
	function hex(s,   i, c, v) {
		v = 0
		s = tolower(s)
		for (i = 3; i <= length(s); i++) {
			c = index("0123456789abcdef", substr(s, i, 1)) - 1
			v = v * 16 + c
		}
		return v
	}
	# "ob=(3) name" / "ob=(3)" name compression
	function named(line, tbl,   id, nm) {
		sub(/^[a-z]+=/, "", line)
		if (line ~ /^\([0-9]+\)/) {
			id = line
			sub(/\).*/, "", id)
			nm = line
			sub(/^\([0-9]+\) ?/, "", nm)
			if (nm != "")
				tbl[id] = nm
			return tbl[id]
		}
		return line
	}
	/^events:/ {
		for (i = 2; i <= NF; i++) {
			if ($i == "Ir") cir = i - 1
			if ($i == "I1mr") ci1 = i - 1
		}
		next
	}
	/^ob=/ { ob = named($0, obs); next }
	/^fn=/ { fn = named($0, fns); next }
	/^c(ob|fn)=/ {
		# keep the compression table complete
		if ($0 ~ /^cob=/) named($0, obs); else named($0, fns)
		next
	}
	/^(fl|fi|fe|cfi|cfl)=/ { next }
	/^calls=/ { skipnext = 1; next }
	/^(0x|\+|-|\*)/ {
		a = $1
		if (a ~ /^0x/) addr = hex(a)
		else if (a ~ /^\+/) addr += substr(a, 2) + 0
		else if (a ~ /^-/) addr -= substr(a, 2) + 0
		if (skipnext) { skipnext = 0; next }
		ir = $(cir + 2); i1 = $(ci1 + 2)
		tir += ir; ti1 += i1
		if (index(ob, want))
			cnt[addr] += ir
		fnof[addr] = fn
		next
	}
	END {
		for (a in cnt)
			printf "%.0f %.0f %s\n", a, cnt[a], fnof[a]
		printf "total %.0f %.0f\n", tir, ti1
	}' "$1"
}

cg plain "$N" && cg plain $((2 * N)) && cg shim "$N" "$SHIM" &&
	cg shim $((2 * N)) "$SHIM" || exit 1

for r in plain-$N plain-$((2 * N)) shim-$N shim-$((2 * N)); do
	cg_instr "$W/$r.out" "$(basename "$SHIM")" >"$W/$r.instr"
done

# instructions whose count grew by N/2 or more between the runs: the
# steady-state code of a request
awk -v n="$N" -v funcs="${HOT_FUNCS:-0}" -v i1geo="$I1" '
	FNR == 1 { f++ }
	$1 == "total" { tot[f] = $2; i1[f] = $3; next }
	f == 3 { c1[$1] = $2; next }
	f == 4 {
		sir += $2 - c1[$1]
		if ($2 - c1[$1] >= n / 2) {
			line = int($1 / 64)
			if (!(line in lines)) {
				lines[line] = 1
				nl++
				fl[$3]++
				pg = int($1 / 4096)
				if (!(pg in pages)) { pages[pg] = 1; np++ }
			}
		}
	}
	END {
		printf "shim_ir=%.0f shim_lines=%d shim_pages=%d i1_plain=%.1f i1_shim=%.1f ir_plain=%.0f ir_shim=%.0f i1=%s\n",
			sir / n, nl, np, (i1[2] - i1[1]) / n, (i1[4] - i1[3]) / n,
			(tot[2] - tot[1]) / n, (tot[4] - tot[3]) / n, i1geo
		if (funcs == 1)
			for (fn in fl)
				printf "  %3d %s\n", fl[fn], fn | "sort -rn"
	}' "$W/plain-$N.instr" "$W/plain-$((2 * N)).instr" "$W/shim-$N.instr" \
	"$W/shim-$((2 * N)).instr"
