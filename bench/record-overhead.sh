#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# What `ctxdump record` costs the process it samples (issue 10), as ratios
# measured in this run: the target with `ctxdump record -F 20` and with
# `-F 100` attached, against the same target with nothing attached, the
# three interleaved (the order rotates every run), medians over runs.
#
#   sh bench/record-overhead.sh [BUILDDIR]     (default: ./build)
#
# Targets:
#   R1-R4  nginx (1 worker, under libctxshim.so) serving a 612-byte file
#          to wrk (1 thread, 8 keep-alive connections, traceparent on every
#          request); requests/s and p99 latency.  The recorder samples the
#          worker.
#   R5-R6  a CPU-bound single thread (sha256sum of REC_CPU_MB MiB of zeros);
#          the time it takes.
#   R7     how long the recorder stopped the nginx worker per round, and
#          the file it wrote (from `ctxdump report`).
#
# Environment:
#   REC_RATES="20 100"  sampling rates compared with no recording
#   REC_RUNS=N          runs of each configuration (default 7)
#   REC_SECS=N          seconds per wrk run (default 3)
#   REC_CPU_MB=N        MiB hashed per CPU-bound run (default 1024)
#   REC_PIN="N W"       nginx on CPU N, wrk on CPU W ("auto": the first two
#                       CPUs, wrk on the first; see bench_pin in
#                       bench/nginx-lib.sh); default off: the recorder
#                       takes its CPU time from whichever it shares a CPU with
#   REC_KEEP=1          keep the work directory (raw numbers)
#
# Needs a build of this tree (libctxshim.so, ctxdump), nginx (nginx-light),
# wrk and curl for R1-R4, sha256sum for R5-R6; what is missing is skipped.
# 127.0.0.1 only.  Nothing here is a test: timings are never asserted.

set -u

SRCDIR=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$SRCDIR/build}
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || {
	echo "record-overhead: no build directory ${1:-$SRCDIR/build}" >&2
	exit 2
}
RATES=${REC_RATES:-"20 100"}
RUNS=${REC_RUNS:-7}
SECS=${REC_SECS:-3}
CPU_MB=${REC_CPU_MB:-1024}
SHIM=$BUILD/libctxshim.so
CTXDUMP=$BUILD/tools/ctxdump/ctxdump
for f in "$SHIM" "$CTXDUMP"; do
	if [ ! -f "$f" ]; then
		echo "record-overhead: $f is missing; build first (ninja -C $BUILD)" >&2
		exit 2
	fi
done

# As in bench/run.sh: as root, everything measured runs at nice -10.
PRIO=
if [ "$(id -u)" = 0 ] && nice -n -10 true 2>/dev/null; then
	PRIO="nice -n -10"
fi

# median, ratio, ratio_ci, port_free, alive, ngx_*, wrk_*, bench_pin
. "$SRCDIR/bench/nginx-lib.sh"
# unpinned unless REC_PIN says otherwise (bench/run.sh pins B1/B2)
bench_pin "${REC_PIN:-off}"

W=$(mktemp -d /tmp/ctxshim-recbench.XXXXXX)
NGINX=
REC=
ROWS=$W/rows
: >"$ROWS"

cleanup() {
	[ -n "$REC" ] && kill "$REC" 2>/dev/null
	[ -n "$NGINX" ] && ngx_stop "$NGINX"
	if [ "${REC_KEEP:-0}" = 1 ]; then
		echo "record-overhead: raw numbers kept in $W" >&2
	else
		rm -rf "$W"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

log() {
	echo "record-overhead: $*" >&2
}

# row ID MEASUREMENT RATIO DETAIL [INTERVAL] (INTERVAL: ratio_ci's)
row() {
	printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5:--}" >>"$ROWS"
}

# record_start PID RATE TAG: ctxdump record in the background (REC)
record_start() {
	# 4>&-: not a writer of the CPU-bound target's fifo (it would never
	# see EOF)
	$PRIO "$CTXDUMP" record -q -F "$2" -o "$W/rec.$3.prof" "$1" 2>"$W/rec.$3.err" 4>&- &
	REC=$!
	# the first rounds are on disk: sampling has begun
	i=0
	while [ "$(stat -c %s "$W/rec.$3.prof" 2>/dev/null || echo 0)" -lt 200 ]; do
		i=$((i + 1))
		[ $i -gt 200 ] && break
		sleep 0.01
	done
}

record_stop() {
	kill -INT "$REC" 2>/dev/null
	wait "$REC" 2>/dev/null
	REC=
}

# "0 20 100", rotated by $1
order() {
	set -- "$1" 0 $RATES
	n=$1
	shift
	k=$(($# > 0 ? n % $# : 0))
	i=0
	out=
	for r in "$@"; do
		[ $i -ge "$k" ] && out="$out $r"
		i=$((i + 1))
	done
	i=0
	for r in "$@"; do
		[ $i -lt "$k" ] && out="$out $r"
		i=$((i + 1))
	done
	echo $out
}

# ---- nginx ------------------------------------------------------------------

bench_nginx() {
	d=$W/nginx
	chmod 755 "$W"
	ngx_www "$W/www"
	port=18280
	while ! port_free $port; do port=$((port + 1)); done
	ngx_conf "$d" "$port" "$W/www"
	NGX_PREFIX="$PRIO $NGX_PIN"
	ngx_start "$d" "$SHIM"
	NGINX=$NGX_PID
	if ! ngx_up "$port"; then
		log "nginx did not start:"
		cat "$d/error.log" >&2
		return
	fi
	worker=$(ngx_worker "$NGINX")
	if [ -z "$worker" ]; then
		log "no nginx worker"
		return
	fi
	tp="traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	url="http://127.0.0.1:$port/small.html"
	log "nginx + wrk: $RUNS runs of ${SECS} s per configuration (no recording, rates $RATES)"
	# shellcheck disable=SC2086 # WRK_PIN is a command with options
	$PRIO $WRK_PIN wrk -t1 -c8 -d1s -s "$SRCDIR/bench/wrk-head.lua" -H "$tp" "$url" \
		>/dev/null # warm-up
	: >"$W/nginx.runs"
	run=0
	while [ $run -lt "$RUNS" ]; do
		line=
		for r in $(order $run); do
			[ "$r" != 0 ] && record_start "$worker" "$r" "ngx$r"
			# shellcheck disable=SC2086 # WRK_PIN is a command with options
			$PRIO $WRK_PIN wrk -t1 -c8 -d"${SECS}s" --latency -s "$SRCDIR/bench/wrk-head.lua" -H "$tp" "$url" \
				>"$W/wrk.$r" 2>&1
			[ "$r" != 0 ] && record_stop
			eval "rps_$r=\$(wrk_rps \"\$W/wrk.\$r\")"
			eval "p99_$r=\$(wrk_p99_us \"\$W/wrk.\$r\")"
		done
		# columns: rps and p99 of no recording, then of each rate
		line="$rps_0 $p99_0"
		for r in $RATES; do
			eval "line=\"\$line \$rps_$r \$p99_$r\""
		done
		echo "$line" >>"$W/nginx.runs"
		run=$((run + 1))
	done
	base=$(awk '{print $1}' "$W/nginx.runs" | median)
	col=3
	for r in $RATES; do
		rr=$(awk -v c=$col '{print $c}' "$W/nginx.runs" | median)
		row R-ngx-rps-$r "nginx requests/s, recording at $r Hz / not recording" \
			"$(ratio "$W/nginx.runs" $col 1 %.3f)" \
			"$(awk -v a="$rr" -v b="$base" 'BEGIN{printf "%.0f / %.0f req/s", a, b}')" \
			"$(ratio_ci "$W/nginx.runs" $col 1 %.3f)"
		lp=$(awk '{print $2}' "$W/nginx.runs" | median)
		lr=$(awk -v c=$((col + 1)) '{print $c}' "$W/nginx.runs" | median)
		row R-ngx-p99-$r "nginx p99 latency, recording at $r Hz / not recording" \
			"$(ratio "$W/nginx.runs" $((col + 1)) 2 %.3f)" \
			"$(awk -v a="$lr" -v b="$lp" 'BEGIN{printf "%.0f / %.0f us", a, b}')" \
			"$(ratio_ci "$W/nginx.runs" $((col + 1)) 2 %.3f)"
		# the stop windows and file size of the last recording
		if [ -f "$W/rec.ngx$r.prof" ]; then
			"$CTXDUMP" report "$W/rec.ngx$r.prof" >"$W/rep.$r" 2>/dev/null
			st=$(sed -n 's/^Stopped: \(.*\)$/\1/p' "$W/rep.$r")
			sz=$(stat -c %s "$W/rec.ngx$r.prof")
			ns=$(sed -n 's/^Recording of .* \([0-9]*\) samples of .*/\1/p' "$W/rep.$r")
			row R-ngx-stop-$r "nginx worker stopped per round at $r Hz" "-" \
				"$st; ${ns:-?} samples, $sz bytes in ${SECS} s"
		fi
		col=$((col + 2))
	done
	ngx_stop "$NGINX"
	NGINX=
}

# ---- CPU-bound ----------------------------------------------------------------

now_ns() {
	date +%s%N
}

bench_cpu() {
	log "sha256sum of $CPU_MB MiB: $RUNS runs per configuration"
	: >"$W/cpu.runs"
	run=0
	while [ $run -lt "$RUNS" ]; do
		for r in $(order $run); do
			rm -f "$W/fifo"
			mkfifo "$W/fifo"
			$PRIO sha256sum <"$W/fifo" >/dev/null &
			SHA=$!
			exec 4>"$W/fifo"
			[ "$r" != 0 ] && record_start "$SHA" "$r" "cpu$r"
			t0=$(now_ns)
			head -c "$((CPU_MB * 1048576))" /dev/zero >&4
			exec 4>&-
			wait "$SHA"
			t1=$(now_ns)
			[ "$r" != 0 ] && record_stop
			eval "t_$r=$((t1 - t0))"
		done
		line="$t_0"
		for r in $RATES; do
			eval "line=\"\$line \$t_$r\""
		done
		echo "$line" >>"$W/cpu.runs"
		run=$((run + 1))
	done
	base=$(awk '{print $1}' "$W/cpu.runs" | median)
	col=2
	for r in $RATES; do
		tr=$(awk -v c=$col '{print $c}' "$W/cpu.runs" | median)
		# throughput ratio = time without / time with
		row R-cpu-$r "CPU-bound throughput, recording at $r Hz / not recording" \
			"$(ratio "$W/cpu.runs" 1 $col %.3f)" \
			"$(awk -v a="$tr" -v b="$base" 'BEGIN{printf "%.3f / %.3f s", a / 1e9, b / 1e9}')" \
			"$(ratio_ci "$W/cpu.runs" 1 $col %.3f)"
		col=$((col + 1))
	done
}

# ---- main ---------------------------------------------------------------------

T0=$(date +%s)
if command -v nginx >/dev/null && command -v wrk >/dev/null && command -v curl >/dev/null; then
	bench_nginx
else
	row R-ngx "nginx under wrk" "skip" "needs nginx, wrk, curl"
fi
if command -v sha256sum >/dev/null; then
	bench_cpu
else
	row R-cpu "CPU-bound throughput" "skip" "needs sha256sum"
fi

echo
echo "ctxdump record overhead ($(uname -m), $(nproc) CPUs, kernel $(uname -r)), $(date -u +%Y-%m-%d)"
echo "command: sh bench/record-overhead.sh ${1:-} (REC_RUNS=$RUNS, REC_SECS=$SECS," \
	"REC_CPU_MB=$CPU_MB${PRIO:+, $PRIO})"
echo
awk -F '\t' '
	BEGIN { printf "%-16s %-58s %7s  %-13s %s\n", "id", "measurement", "ratio",
		"95% interval", "detail (medians of each side)" }
	{ printf "%-16s %-58s %7s  %-13s %s\n", $1, $2, $3, ($5 == "" ? "-" : $5), $4 }' "$ROWS"
echo "(total $(($(date +%s) - T0)) s)"
