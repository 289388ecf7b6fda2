#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# Run every benchmark of issue 8 and print one table of ratios, each
# measured in this run (with and without side by side, alternating, medians).
#
#   sh bench/run.sh [BUILDDIR]          (default: ./build)
#
# Environment:
#   BENCH_ONLY="B5 B6"   run only these groups (B1 B2 B3 B4 B5 B6 B7 B8 R;
#                        B1, B2 and B8 are one nginx group (with the
#                        callgrind rows B1i, B1h, B1m, B1f), B5-B7 share the
#                        1000-thread target, R is bench/record-overhead.sh)
#   BENCH_REPS=N         repetitions of the fast wall-clock pairs (default 21)
#   BENCH_THREADS=N      threads of the ctxdump target (default 1000)
#   BENCH_NGINX_SECS=N   seconds per wrk run (default 0.7; see NGINX_REST)
#   BENCH_NGINX_RUNS=N   pairs of wrk runs (default 20)
#   BENCH_PIN="N W"      CPUs of nginx's worker and of wrk ("off": unpinned;
#                        default: the first two CPUs, wrk on the first)
#   BENCH_RT=0           nginx and its clients at nice -10 like the rest,
#                        not SCHED_FIFO (the default as root)
#   BENCH_NGINX_LAT_REQS=N  requests per run of B2u (default 10000; 0: none)
#   BENCH_NGINX_AA=1     check the harness: the "with" side of B1/B2/B1c/B2u
#                        runs without the shim too (expect 1.00 +- noise)
#   BENCH_NGINX_CG_REQS=N  requests of the smaller callgrind run of B1i; the
#                        larger sends 2N (default 2000; 0: no B1i/B1h/B1m/B1f)
#   BENCH_NGINX_MIN=0    no third side with bench/libminshim.so, the minimal
#                        record writer (rows B1z, B1zc, B1zi, B1zh)
#   BENCH_SENDFILE=on    nginx with "sendfile on" (Debian's stock nginx.conf)
#   BENCH_KEEP=1         keep the work directory (raw numbers) and say where
#   REC_RUNS, REC_SECS, REC_CPU_MB   passed to record-overhead.sh (group R;
#                        defaults here 3, 2, 256: about 30 s)
#
# Needs: a build of this tree (libctxshim.so, ctxdump, bench/bench-*), gdb,
# eu-stack (elfutils), valgrind, nginx (nginx-light), wrk.  A group whose
# tools are missing prints SKIP.  All traffic goes to 127.0.0.1 only.
# Every row is a ratio measured here (the median over pairs of runs made
# back to back, alternating which goes first); PASS/MISS compares it with
# the target of issue 8, "info" rows have none.  Nothing here is a test:
# timings are never asserted, the exit status is 0 unless the benchmark
# itself broke.

set -u

SRCDIR=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$SRCDIR/build}
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || {
	echo "bench: no build directory ${1:-$SRCDIR/build}" >&2
	exit 2
}
REPS=${BENCH_REPS:-21}
NTHREADS=${BENCH_THREADS:-1000}
ONLY=${BENCH_ONLY:-"B1 B2 B3 B4 B5 B6 B7 B8 R"}
NGINX_SECS=${BENCH_NGINX_SECS:-0.7}

# Shared machines are noisy: as root, the benchmarked processes (both
# sides of every ratio alike) run at nice -10 so that background load
# disturbs them less.
PRIO=
if [ "$(id -u)" = 0 ] && nice -n -10 true 2>/dev/null; then
	PRIO="nice -n -10"
fi
# nginx and the clients of B1/B2 go further: as root they run SCHED_FIFO
# (BENCH_RT=0: at $PRIO like the rest), each on a CPU of its own (below).
# A request is a ping-pong between client and worker; at nice -10 every
# wake-up of either still waits for whatever else runs on its CPU, and
# requests/s and the tail follow that load (measured: 20-50 k req/s and a
# p99 of 5-10 ms beside 4 busy loops, 80-90 k req/s and 0.3 ms with FIFO).
NPRIO=$PRIO
if [ "${BENCH_RT:-1}" != 0 ] && [ "$(id -u)" = 0 ] && chrt -f 10 true 2>/dev/null; then
	NPRIO="chrt -f 10"
fi
# A CPU's real-time tasks may run kernel.sched_rt_runtime_us of every
# kernel.sched_rt_period_us (0.95 s of 1 s by default; the budget is
# counted from period ticks, not over a sliding window); past that the
# CPU idles until the next tick, the worker runnable.  Runs of wrk -d1s
# (1.1 s of a busy worker) one after the other met it in the second run of
# nearly every pair: 13-34 ms idle (perf sched: swapper ran on the
# worker's CPU), that side's p99 10-22 ms instead of 0.15 (wrk's
# coordinated-omission correction fills the stall with samples), its
# requests/s 2-5 % lower.  Per-pair ratios then split into two modes by
# which side ran second, and the medians of B1 and B2 fell anywhere
# between them.  Now a run lasts NGINX_SECS (0.7-0.8 s) and the CPUs rest
# NGINX_REST after it, so that no period holds more than about 0.85 s of
# real-time work; longer runs are throttled again (and such pairs left
# out as other load is: see "waited" below).
NGINX_REST=0.3
WRK_DMAX="$(awk -v s="$NGINX_SECS" 'BEGIN { printf "%d", s + 5 }')s"

# median, ratio, ratio_ci, port_free, alive, ngx_*, wrk_*, bench_pin
. "$SRCDIR/bench/nginx-lib.sh"
bench_pin "${BENCH_PIN:-auto}"

SHIM=$BUILD/libctxshim.so
# the minimal record writer, the yardstick of B1 (bench/minshim.c)
MINSHIM=$BUILD/bench/libminshim.so
NGXCLIENT=$BUILD/bench/bench-ngxclient
TRACEPARENT="traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
# every wrk run sends the same head (wrk's own header order varies per run)
WRK_SCRIPT=$SRCDIR/bench/wrk-head.lua
CTXDUMP=$BUILD/tools/ctxdump/ctxdump
TIMEIT=$BUILD/bench/bench-timeit
for f in "$SHIM" "$CTXDUMP" "$TIMEIT" "$BUILD/bench/bench-sleepers" \
	"$BUILD/bench/bench-floor" "$BUILD/bench/bench-readloop" \
	"$BUILD/bench/bench-httpreq" "$BUILD/bench/bench-ngxclient"; do
	if [ ! -x "$f" ] && [ ! -f "$f" ]; then
		echo "bench: $f is missing; build first (ninja -C $BUILD)" >&2
		exit 2
	fi
done

W=$(mktemp -d /tmp/ctxshim-bench.XXXXXX)
TPID=
CGPID=
ROWS=$W/rows

cleanup() {
	{ exec 3>&-; } 2>/dev/null
	if [ -n "$TPID" ]; then
		kill "$TPID" 2>/dev/null
		wait "$TPID" 2>/dev/null
	fi
	stop_nginx
	if [ -n "$CGPID" ]; then
		kill "$CGPID" 2>/dev/null
		wait "$CGPID" 2>/dev/null
	fi
	if [ "${BENCH_KEEP:-0}" = 1 ]; then
		echo "bench: raw numbers kept in $W" >&2
	else
		rm -rf "$W"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

want() {
	case " $ONLY " in *" $1 "*) return 0 ;; esac
	return 1
}

log() {
	echo "bench: $*" >&2
}

# row ID MEASUREMENT VALUE TARGET-OP TARGET DETAIL [INTERVAL]
#   TARGET-OP: le (value <= target) or ge (value >= target)
#   INTERVAL: the 95 % interval of a median of ratios (ratio_ci)
row() {
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "${7:--}" >>"$ROWS"
}

skip() {
	printf '%s\t%s\t-\tskip\t-\t%s\t-\n' "$1" "$2" "$3" >>"$ROWS"
}

# timed OUT CMD... -> prints "<ns> <status>".  A short pause first: after
# a dump (or gdb) detaches, the target's threads need a moment to go back
# to sleep, and B5-B7 are about a sleeping target.
timed() {
	sleep 0.05
	$PRIO "$TIMEIT" "$@"
}

# the "stopped_ns" of a ctxdump --json output file
json_stopped() {
	sed -n 's/^ *"stopped_ns": \([0-9][0-9]*\),*$/\1/p' "$1"
}

valid_records() {
	grep -c '"valid": 1,' "$1"
}

# ---- the 1000-thread target (B5, B6, B7) ----------------------------------

start_target() {
	mkfifo "$W/target.in"
	TRACEPARENT=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 \
		OTEL_SERVICE_NAME=bench-sleepers LD_PRELOAD=$SHIM \
		$PRIO "$BUILD/bench/bench-sleepers" "$NTHREADS" <"$W/target.in" \
		>"$W/target.out" 2>"$W/target.err" &
	TPID=$!
	# Holding the fifo open keeps the target alive; closing fd 3 ends it.
	exec 3>"$W/target.in"
	i=0
	while ! grep -q '^READY' "$W/target.out" 2>/dev/null; do
		i=$((i + 1))
		if [ $i -gt 300 ] || ! kill -0 "$TPID" 2>/dev/null; then
			log "the $NTHREADS-thread target did not start:"
			cat "$W/target.err" >&2
			exit 2
		fi
		sleep 0.05
	done
}

stop_target() {
	exec 3>&-
	wait "$TPID" 2>/dev/null
	TPID=
}

bench_ctxdump() {
	start_target
	# Warm-up (page cache, dentries) and the slot's TP offset for the floor.
	"$CTXDUMP" --json "$TPID" >"$W/warm.json" 2>"$W/warm.err"
	tpoff=$(sed -n 's/^ *"tpoff": \(-*[0-9][0-9]*\),*$/\1/p' "$W/warm.json")
	nvalid=$(valid_records "$W/warm.json")
	if [ -z "$tpoff" ] || [ "$nvalid" -ne "$NTHREADS" ]; then
		log "ctxdump read $nvalid of $NTHREADS records (tpoff '$tpoff'):"
		cat "$W/warm.err" >&2
		exit 2
	fi
	"$BUILD/bench/bench-floor" "$TPID" "$tpoff" >"$W/warm.floor"
	"$CTXDUMP" --stacks --json "$TPID" >/dev/null 2>&1

	if want B5; then
		log "B5: ctxdump vs the floor, $REPS pairs on $NTHREADS threads"
		: >"$W/b5"
		i=0
		while [ $i -lt "$REPS" ]; do
			# alternate which one goes first
			if [ $((i % 2)) -eq 0 ]; then
				c=$(timed "$W/c.json" "$CTXDUMP" --json "$TPID")
				f=$(timed "$W/f.out" "$BUILD/bench/bench-floor" "$TPID" "$tpoff")
			else
				f=$(timed "$W/f.out" "$BUILD/bench/bench-floor" "$TPID" "$tpoff")
				c=$(timed "$W/c.json" "$CTXDUMP" --json "$TPID")
			fi
			cs=$(json_stopped "$W/c.json")
			fs=$(sed -n 's/^stopped_ns=\([0-9]*\) .*/\1/p' "$W/f.out")
			fr=$(sed -n 's/.* records=\([0-9]*\)$/\1/p' "$W/f.out")
			cr=$(valid_records "$W/c.json")
			echo "${c% *} ${cs:-nan} ${f% *} ${fs:-nan} $cr $fr" >>"$W/b5"
			i=$((i + 1))
		done
		cw=$(awk '{print $1}' "$W/b5" | median)
		cs=$(awk '{print $2}' "$W/b5" | median)
		fw=$(awk '{print $3}' "$W/b5" | median)
		fs=$(awk '{print $4}' "$W/b5" | median)
		bad=$(awk -v n="$NTHREADS" '$5 != n || $6 != n' "$W/b5" | wc -l)
		[ "$bad" -eq 0 ] || log "B5: $bad runs did not read every record"
		row B5a "ctxdump wall / floor wall ($NTHREADS threads)" \
			"$(ratio "$W/b5" 1 3)" le 1.3 \
			"$(awk -v a="$cw" -v b="$fw" 'BEGIN{printf "%.1f / %.1f ms", a/1e6, b/1e6}')" \
			"$(ratio_ci "$W/b5" 1 3)"
		row B5b "ctxdump stopped window / floor's" \
			"$(ratio "$W/b5" 2 4)" le 1.3 \
			"$(awk -v a="$cs" -v b="$fs" 'BEGIN{printf "%.1f / %.1f ms", a/1e6, b/1e6}')" \
			"$(ratio_ci "$W/b5" 2 4)"
	fi

	if want B6; then
		if ! command -v gdb >/dev/null; then
			skip B6 "gdb wall / ctxdump wall" "no gdb"
		else
			n=$(((REPS + 3) / 4))
			[ $n -lt 3 ] && n=3
			log "B6: gdb vs ctxdump, $n pairs"
			: >"$W/b6"
			i=0
			while [ $i -lt $n ]; do
				g=$(timed "$W/g.out" gdb -nx -batch -p "$TPID" \
					-ex 'thread apply all p (void*)otel_thread_ctx_v1')
				# gdb prints text: so does ctxdump by default
				c=$(timed "$W/c.txt" "$CTXDUMP" "$TPID")
				f=$(timed "$W/f.out" "$BUILD/bench/bench-floor" "$TPID" "$tpoff")
				gn=$(grep -c '^\$[0-9]* = (void \*) 0x' "$W/g.out")
				echo "${g% *} ${c% *} $gn ${f% *}" >>"$W/b6"
				i=$((i + 1))
			done
			gw=$(awk '{print $1}' "$W/b6" | median)
			cw=$(awk '{print $2}' "$W/b6" | median)
			gn=$(awk '{print $3}' "$W/b6" | median)
			fw=$(awk '{print $4}' "$W/b6" | median)
			[ "${gn%.*}" -eq "$NTHREADS" ] ||
				log "B6: gdb printed $gn of $NTHREADS pointers"
			row B6 "gdb 'thread apply all p' wall / ctxdump (text) wall" \
				"$(ratio "$W/b6" 1 2 %.1f)" ge 15 \
				"$(awk -v a="$gw" -v b="$cw" 'BEGIN{printf "%.0f / %.1f ms", a/1e6, b/1e6}')" \
				"$(ratio_ci "$W/b6" 1 2 %.1f)"
			# what the floor itself allows on this machine
			row B6f "gdb wall / floor wall (the ceiling of B6 here)" \
				"$(ratio "$W/b6" 1 4 %.1f)" info - \
				"$(awk -v a="$gw" -v b="$fw" 'BEGIN{printf "%.0f / %.1f ms", a/1e6, b/1e6}')" \
				"$(ratio_ci "$W/b6" 1 4 %.1f)"
		fi
	fi

	if want B7; then
		if ! command -v eu-stack >/dev/null; then
			skip B7a "eu-stack wall / ctxdump --stacks wall" "no eu-stack"
		else
			n=$(((REPS + 2) / 3))
			[ $n -lt 5 ] && n=5
			log "B7: eu-stack vs ctxdump --stacks vs ctxdump, $n triples"
			: >"$W/b7"
			i=0
			while [ $i -lt $n ]; do
				e=$(timed "$W/e.out" eu-stack -p "$TPID")
				if [ $((i % 2)) -eq 0 ]; then
					s=$(timed "$W/s.json" "$CTXDUMP" --stacks --json "$TPID")
					c=$(timed "$W/c.json" "$CTXDUMP" --json "$TPID")
				else
					c=$(timed "$W/c.json" "$CTXDUMP" --json "$TPID")
					s=$(timed "$W/s.json" "$CTXDUMP" --stacks --json "$TPID")
				fi
				echo "${e% *} ${s% *} $(json_stopped "$W/s.json")" \
					"$(json_stopped "$W/c.json")" >>"$W/b7"
				i=$((i + 1))
			done
			ew=$(awk '{print $1}' "$W/b7" | median)
			sw=$(awk '{print $2}' "$W/b7" | median)
			ss=$(awk '{print $3}' "$W/b7" | median)
			cs=$(awk '{print $4}' "$W/b7" | median)
			row B7a "eu-stack -p wall / ctxdump --stacks wall" \
				"$(ratio "$W/b7" 1 2 %.1f)" ge 5 \
				"$(awk -v a="$ew" -v b="$sw" 'BEGIN{printf "%.0f / %.1f ms", a/1e6, b/1e6}')" \
				"$(ratio_ci "$W/b7" 1 2 %.1f)"
			row B7b "ctxdump stopped window, --stacks / without" \
				"$(ratio "$W/b7" 3 4)" le 1.5 \
				"$(awk -v a="$ss" -v b="$cs" 'BEGIN{printf "%.1f / %.1f ms", a/1e6, b/1e6}')" \
				"$(ratio_ci "$W/b7" 3 4)"
		fi
	fi
	stop_target
}

# ---- callgrind: B3 and B4 ---------------------------------------------------

# instructions counted in function $1 (or in each of the space-separated
# functions of $1) of a run of the rest ("summary:")
cg_count() {
	toggles=
	for fn in $1; do
		toggles="$toggles --toggle-collect=$fn"
	done
	shift
	# shellcheck disable=SC2086 # one word per option
	valgrind --tool=callgrind $toggles \
		--callgrind-out-file="$W/cg.out" "$@" >"$W/cg.stdout" 2>"$W/cg.err" ||
		{ log "callgrind failed: $*"; cat "$W/cg.err" >&2; echo nan; return; }
	sed -n 's/^summary: *//p' "$W/cg.out"
}

bench_read() {
	n=20000
	for kind in file pipe; do
		plain=$(cg_count readloop_run "$BUILD/bench/bench-readloop" $kind $n)
		shim=$(LD_PRELOAD=$SHIM cg_count readloop_run \
			"$BUILD/bench/bench-readloop" $kind $n)
		row "B3$( [ $kind = file ] && echo a || echo b)" \
			"extra instructions per read() on a $kind" \
			"$(awk -v a="$shim" -v b="$plain" -v n=$n 'BEGIN{printf "%.1f", (a-b)/n}')" \
			le 10 \
			"$(awk -v a="$shim" -v b="$plain" -v n=$n 'BEGIN{printf "%.1f vs %.1f per call", a/n, b/n}')"
	done
}

bench_http() {
	n=2000
	head=$("$BUILD/bench/bench-httpreq" 1 | sed -n 's/^head_bytes=\([0-9]*\) .*/\1/p')
	warm=8 # rounds httpreq.c runs before the counted ones
	plain=$(cg_count httpreq_read "$BUILD/bench/bench-httpreq" $n)
	shim=$(LD_PRELOAD=$SHIM cg_count httpreq_read "$BUILD/bench/bench-httpreq" $n)
	# Scanning (B4a).  A read that holds one whole head, as each of
	# bench-httpreq's does, is scanned by http_scan_whole()'s body inlined
	# into ctxshim_request_ctx_whole() (the read hook's fused path), which
	# callgrind cannot count apart from the context building around it:
	# "bench-httpreq scan" counts the library's out-of-line
	# http_scan_whole() (same source, the object the shim links) over the
	# same head bytes, from a scanner at a message start as the hook's.
	# It is added for every head when the shim's fused path ran at all
	# (bench-httpreq checks each read is one whole head; a shim without
	# ctxshim_request_ctx_whole() counts 0 there and gets none), and
	# http_scan_feed(), counted in the shim, for heads split across reads
	# or anything else the fused path leaves to the feed (0 here).
	# Checked against a direct count (tree of 2026-11-30, 371-byte head):
	# callgrind --dump-instr=yes --toggle-collect=ctxshim_request_ctx_whole
	# gives that function 800 per head, 798 of them its own 690 plus its
	# calls (traceparent parse 86, span-id 22); its own instructions, each
	# given to the inline chain addr2line -i names, are the scan 525,
	# request_attrs() 115, request_ids() 23, entry, exit and the
	# header-attribute loop 27.  "scan" counts 509: 496 in the body and 13
	# of call, pushes and pops.  Compiled into the larger function, the
	# inlined body takes 29 more (lf_next() 10, the line loop 9, the start
	# tests 7, match_fast() 3: register allocation), 16 net, which B4b
	# carries.
	scan=$(LD_PRELOAD=$SHIM cg_count http_scan_feed "$BUILD/bench/bench-httpreq" $n)
	fused=$(LD_PRELOAD=$SHIM cg_count ctxshim_request_ctx_whole \
		"$BUILD/bench/bench-httpreq" $n)
	whole=0
	if awk -v f="$fused" 'BEGIN{exit !(f > 0)}'; then
		whole=$(cg_count http_scan_whole "$BUILD/bench/bench-httpreq" scan $n)
	elif awk -v s="$scan" 'BEGIN{exit !(s == 0)}'; then
		log "B4a: the shim ran neither http_scan_feed nor ctxshim_request_ctx_whole"
	fi
	# the part of B4b that any writer of a record from a traceparent does:
	# parse it, draw a span-id, publish (everything else in B4b is the
	# connection table, the attributes and the hook itself)
	core=$(LD_PRELOAD=$SHIM cg_count \
		"w3c_traceparent_parse ctxshim_new_span_id ctxshim_build_begin ctxshim_build_publish" \
		"$BUILD/bench/bench-httpreq" $n)
	rplain=$(cg_count httpreq_respond "$BUILD/bench/bench-httpreq" $n)
	rshim=$(LD_PRELOAD=$SHIM cg_count httpreq_respond "$BUILD/bench/bench-httpreq" $n)
	# per head: http_scan_feed also runs in the warm-up rounds, "scan"
	# scans n heads
	per=$(awk -v s="$scan" -v x="$whole" -v n=$n -v w=$warm \
		'BEGIN{printf "%.1f", s/(n+w) + x/n}')
	row B4a "scanning instructions per head byte ($head-byte head)" \
		"$(awk -v p="$per" -v h="$head" 'BEGIN{printf "%.2f", p/h}')" \
		le 4 \
		"$(awk -v s="$scan" -v x="$whole" -v n=$n -v w=$warm \
			'BEGIN{printf "whole-head path (http_scan_whole): %.0f per head; http_scan_feed: %.0f", x/n, s/(n+w)}')"
	row B4b "parse + publish instructions per request" \
		"$(awk -v a="$shim" -v b="$plain" -v p="$per" -v n=$n \
			'BEGIN{printf "%.0f", (a-b)/n - p}')" \
		le 150 \
		"$(awk -v a="$shim" -v b="$plain" -v n=$n -v r="$rshim" -v q="$rplain" \
			'BEGIN{printf "read hook total %.0f/request; response write +%.0f", (a-b)/n, (r-q)/n}')"
	row B4c "of B4b: traceparent parse + span-id + publication" \
		"$(awk -v c="$core" -v n=$n -v w=$warm 'BEGIN{printf "%.0f", c/(n+w)}')" \
		info - "the floor of parse + publish; see bench/README.md"
}

# ---- nginx: B1, B2, B8 ------------------------------------------------------

rss_kib() {
	awk '$1 == "VmRSS:" { print $2 }' "/proc/$1/status"
}

# user and system CPU time of process $1 so far, in clock ticks
cpu_ticks() {
	sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | awk '{ print $12, $13 }'
}

stop_nginx() {
	# shellcheck disable=SC2086 # unset ones are no argument
	ngx_stop ${NPLAIN:-} ${NSHIM:-} ${NMIN:-}
	NPLAIN=
	NSHIM=
	NMIN=
}

# capture_head PORT: the request head wrk sends in the B1 runs, as nginx
# receives it, in $W/head (bench-ngxclient answers the first one and exits;
# wrk gets "connection refused" for the rest of its second).  The Host
# line carries PORT: B1's ports have the same number of digits.  Without
# bench/wrk-head.lua the order of wrk's header lines would change from one
# wrk process to the next.
capture_head() {
	: >"$W/capture.out" # before the background job opens it
	"$NGXCLIENT" capture "$1" "$W/head" >"$W/capture.out" 2>&1 &
	cp=$!
	i=0
	while ! grep -q '^READY' "$W/capture.out" && [ $i -lt 100 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	wrk -s "$WRK_SCRIPT" -H "$TRACEPARENT" -t1 -c1 -d1s "http://127.0.0.1:$1/small.html" >/dev/null 2>&1
	kill "$cp" 2>/dev/null # if wrk sent nothing
	wait "$cp" 2>/dev/null
	HEAD_BYTES=$(sed -n 's/^head_bytes=//p' "$W/capture.out")
	if [ -z "$HEAD_BYTES" ]; then
		log "could not capture the head wrk sends:"
		cat "$W/capture.out" >&2
		return 1
	fi
	if ! tr -d '\r' <"$W/head" | grep -qx "$TRACEPARENT"; then
		log "wrk's request head has no '$TRACEPARENT':"
		cat "$W/head" >&2
		return 1
	fi
}

# cg_nginx NAME N [LD_PRELOAD]: nginx as one process (master_process off)
# under callgrind, counting ngx_process_events_and_timers inclusively (the
# event loop: everything nginx does for a request, the shim's hooks it
# calls included), while bench-ngxclient sends it N requests with the head
# wrk sends, one after the other on one keep-alive connection.  Sets CG to
# the count, "nan" if something failed.
cg_nginx() {
	CG=nan
	d=$W/cg-$1-$2
	ngx_conf "$d" "$PCG" "$W/www" single
	LD_PRELOAD=${3:-} OTEL_SERVICE_NAME=bench-nginx valgrind --tool=callgrind \
		--toggle-collect=ngx_process_events_and_timers \
		--callgrind-out-file="$d/cg.out" \
		nginx -p "$d" -c "$d/nginx.conf" -e "$d/error.log" >"$d/vg.out" 2>&1 &
	CGPID=$!
	if ! cg_up "$PCG" "$d"; then
		kill "$CGPID" 2>/dev/null
		wait "$CGPID" 2>/dev/null
		CGPID=
		return
	fi
	# the client sends nginx SIGTERM after the last response
	if ! "$NGXCLIENT" run "$PCG" "$W/head" "$2" "$CGPID" >"$d/client.out" 2>&1; then
		log "bench-ngxclient failed against nginx under callgrind:"
		cat "$d/client.out" >&2
		kill "$CGPID" 2>/dev/null
	fi
	cg_down "$NGXCLIENT" run "$PCG" "$W/head" 0
	grep -q "^requests=$2 " "$d/client.out" || return
	CG=$(sed -n 's/^summary: *//p' "$d/cg.out")
	[ -n "$CG" ] || CG=nan
}

# B1i, B1m, B1f: user-space instructions per request of nginx without and
# with the shim (callgrind, the difference between N and 2N requests, so
# that start-up, the connection and the shutdown cancel out), and what they
# predict for the B1 ratio given the worker's user share of its CPU time in
# the plain wrk runs.  See bench/README.md ("B1 from instructions").
bench_nginx_cg() {
	n1=${BENCH_NGINX_CG_REQS:-2000}
	n2=$((2 * n1))
	log "B1i: nginx under callgrind, $n1 and $n2 requests with wrk's $HEAD_BYTES-byte head"
	cg_nginx plain "$n1"
	p1=$CG
	cg_nginx plain "$n2"
	p2=$CG
	cg_nginx shim "$n1" "$SHIM"
	s1=$CG
	cg_nginx shim "$n2" "$SHIM"
	s2=$CG
	case "$p1 $p2 $s1 $s2" in *nan*)
		skip B1i "nginx user instructions per request, with / without" \
			"callgrind run failed"
		return ;;
	esac
	if ! grep -q 'libctxshim\.so' "$W/cg-shim-$n2/cg.out"; then
		log "B1i: no libctxshim.so code inside ngx_process_events_and_timers"
	fi
	# the same for the minimal writer (B1zi, with B1f below)
	m1=nan
	m2=nan
	if [ -n "$MIN" ]; then
		cg_nginx min "$n1" "$MINSHIM"
		m1=$CG
		cg_nginx min "$n2" "$MINSHIM"
		m2=$CG
		grep -q 'libminshim\.so' "$W/cg-min-$n2/cg.out" 2>/dev/null ||
			log "B1zi: no libminshim.so code inside ngx_process_events_and_timers"
	fi
	# per request: (C(2N) - C(N)) / N; the cross-check C(2N) / C(N) should be
	# close to 2 (start-up and shutdown are a few thousand instructions)
	ip=$(awk -v a="$p2" -v b="$p1" -v n="$n1" 'BEGIN { printf "%.0f", (a - b) / n }')
	is=$(awk -v a="$s2" -v b="$s1" -v n="$n1" 'BEGIN { printf "%.0f", (a - b) / n }')
	lin=$(awk -v a="$p2" -v b="$p1" -v c="$s2" -v d="$s1" \
		'BEGIN { printf "%.3f/%.3f", a / b, c / d }')
	row B1i "nginx user instructions per request, with / without" \
		"$(awk -v a="$is" -v b="$ip" 'BEGIN { printf "%.3f", a / b }')" info - \
		"$is / $ip (+$((is - ip))); C(${n2})/C(${n1}) = $lin"
	# B1h: the shim's instruction-cache footprint per request, the cost
	# B1i does not show (bench/README.md, "Same IPC"; about 5 s)
	hl=$(HOT_HEAD=$W/head sh "$SRCDIR/bench/hot-lines.sh" "$BUILD" 2>"$W/hot.err")
	hget() { echo "$hl" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
	if [ -n "$(hget shim_lines)" ]; then
		row B1h "shim code lines (64 B) run per nginx request" \
			"$(hget shim_lines)" info - \
			"$(hget shim_ir) insns in $(hget shim_pages) pages; sim. I1 ($(hget i1)) misses/request $(hget i1_plain) without, $(hget i1_shim) with"
	else
		log "B1h: bench/hot-lines.sh failed:"
		cat "$W/hot.err" >&2
		skip B1h "shim code lines (64 B) run per nginx request" \
			"bench/hot-lines.sh failed"
	fi
	# the worker's user share of its CPU time during the plain wrk runs
	u=$(awk -v p="$PPLAIN" '$1 == p { ut += $4 - $2; st += $5 - $3 }
		END { if (ut + st > 0) printf "%.4f", ut / (ut + st); else print "nan" }' \
		"$W/b1cpu")
	if [ "$u" = nan ]; then
		skip B1m "model: req/s ratio from instructions and user share" \
			"no CPU times of the nginx worker"
		bench_nginx_cg_min
		return
	fi
	tck=$(getconf CLK_TCK 2>/dev/null || echo 100)
	# CPU time per request (user + system) and how busy each worker was
	cpu=$(awk -v p="$PPLAIN" -v s="$PSHIM" -v t="$tck" '
		{ k = ($1 == p) ? "p" : "s"; u[k] += $4 - $2; y[k] += $5 - $3
		  r[k] += $6; d[k] += $7 }
		END { for (k in r) {
			us[k] = r[k] ? u[k] / t * 1e6 / r[k] : 0
			ys[k] = r[k] ? y[k] / t * 1e6 / r[k] : 0
			b[k] = d[k] ? (u[k] + y[k]) / t / d[k] * 100 : 0 }
		  printf "worker %.0f%% busy; CPU/req user+sys %.2f+%.2f / %.2f+%.2f us",
			b["p"], us["s"], ys["s"], us["p"], ys["p"] }' "$W/b1cpu")
	row B1m "model: req/s with / without, from B1i and user share" \
		"$(awk -v u="$u" -v a="$is" -v b="$ip" \
			'BEGIN { printf "%.3f", 1 / (1 + u * (a - b) / b) }')" info - \
		"u = $(awk -v u="$u" 'BEGIN { printf "%.3f", u }'); $cpu"
	# the same model for a shim that spends exactly the B4 budgets on wrk's
	# head (4 per head byte + 150 per request) and nothing else
	row B1f "model at the B4 budgets ($HEAD_BYTES-byte head), floor" \
		"$(awk -v u="$u" -v h="$HEAD_BYTES" -v b="$ip" \
			'BEGIN { printf "%.3f", 1 / (1 + u * (4 * h + 150) / b) }')" info - \
		"$(awk -v u="$u" -v h="$HEAD_BYTES" -v b="$ip" 'BEGIN {
			printf "+%d insns; 0.99 allows +%.0f insns/request in all",
				4 * h + 150, (1 / 0.99 - 1) * b / u }')"
	bench_nginx_cg_min
}

# B1zi, B1zh: the minimal writer's instructions per request in the same
# callgrind harness as B1i (the plain counts are B1i's), with the B1m model
# for them, and its code lines like B1h.  Uses bench_nginx_cg's p1, p2, m1,
# m2, ip, n1 and u.
bench_nginx_cg_min() {
	[ -n "$MIN" ] || return 0
	case "$m1 $m2" in *nan*)
		skip B1zi "nginx user instructions per request, minimal / without" \
			"callgrind run failed"
		return ;;
	esac
	im=$(awk -v a="$m2" -v b="$m1" -v n="$n1" 'BEGIN { printf "%.0f", (a - b) / n }')
	row B1zi "nginx user instructions per request, minimal / without" \
		"$(awk -v a="$im" -v b="$ip" 'BEGIN { printf "%.3f", a / b }')" info - \
		"$im / $ip (+$((im - ip))); C(${n2})/C(${n1}) = $(awk -v a="$m2" -v b="$m1" \
			'BEGIN { printf "%.3f", a / b }'); model (B1m) $(awk -v u="$u" -v a="$im" \
			-v b="$ip" 'BEGIN { if (u == "nan") print "-"
				else printf "%.3f", 1 / (1 + u * (a - b) / b) }')"
	hl=$(HOT_SHIM=$MINSHIM HOT_HEAD=$W/head sh "$SRCDIR/bench/hot-lines.sh" "$BUILD" \
		2>"$W/hot-min.err")
	if [ -n "$(hget shim_lines)" ]; then
		row B1zh "minimal writer's code lines (64 B) run per request" \
			"$(hget shim_lines)" info - \
			"$(hget shim_ir) insns in $(hget shim_pages) pages; sim. I1 ($(hget i1)) misses/request $(hget i1_plain) without, $(hget i1_shim) with"
	else
		log "B1zh: bench/hot-lines.sh failed:"
		cat "$W/hot-min.err" >&2
		skip B1zh "minimal writer's code lines (64 B) run per request" \
			"bench/hot-lines.sh failed"
	fi
}

# wrk_run PORT OUT: one measured wrk run against the nginx on PORT, on the
# wrk CPU, report in OUT; NGINX_SECS long (wrk's -d counts whole seconds and
# ends a run up to 0.1 s late: SIGINT stops it and it reports as usual),
# then NGINX_REST without work (see there)
wrk_run() {
	# shellcheck disable=SC2086 # NPRIO and WRK_PIN are commands with options
	$NPRIO $WRK_PIN wrk -s "$WRK_SCRIPT" -t1 -c8 -d"$WRK_DMAX" --latency \
		-H "$TRACEPARENT" "http://127.0.0.1:$1/small.html" >"$2" 2>&1 &
	wrk_pid=$!
	sleep "$NGINX_SECS"
	kill -INT "$wrk_pid" 2>/dev/null
	wait "$wrk_pid"
	sleep "$NGINX_REST"
}

# CPU time process $1 has run (user + system, ns, exact: not sampled) and
# time it spent runnable but waiting for a CPU, from /proc/PID/schedstat
sched_ns() {
	cut -d' ' -f1,2 "/proc/$1/schedstat" 2>/dev/null
}

# ngx_both FIRST: start the plain and the shim's nginx (FIRST = plain or
# shim starts first), and with $MIN the minimal writer's too (last after
# plain, first before shim: the order reverses as a whole), wait for them,
# set NPLAIN, NSHIM, NMIN and their workers wp, ws, wm, and warm them up
# (not counted).  1 if they did not start.
ngx_both() {
	if [ "$1" = plain ]; then
		sides="plain shim${MIN:+ min}"
	else
		sides="${MIN:+min }shim plain"
	fi
	for side in $sides; do
		case $side in
		plain)
			ngx_start "$W/ngx-plain"
			NPLAIN=$NGX_PID ;;
		shim)
			ngx_start "$W/ngx-shim" "$AA_SHIM"
			NSHIM=$NGX_PID ;;
		min)
			ngx_start "$W/ngx-min" "$MINSHIM"
			NMIN=$NGX_PID ;;
		esac
	done
	if ! ngx_up "$PPLAIN" || ! ngx_up "$PSHIM" || { [ -n "$MIN" ] && ! ngx_up "$PMIN"; }; then
		log "nginx did not start:"
		cat "$W/ngx-plain/error.log" "$W/ngx-shim/error.log" >&2
		[ -n "$MIN" ] && cat "$W/ngx-min/error.log" >&2
		stop_nginx
		return 1
	fi
	# the workers, for their CPU times (B1c, B1m) and RSS (B8a)
	wp=$(ngx_worker "$NPLAIN")
	ws=$(ngx_worker "$NSHIM")
	wm=
	if [ -n "$MIN" ]; then
		wm=$(ngx_worker "$NMIN")
		if [ -n "$wm" ]; then
			grep -q 'libminshim\.so' "/proc/$wm/maps" ||
				log "B1z: the minimal writer's nginx worker ($wm) has no libminshim.so mapped"
			! grep -q 'libctxshim\.so' "/proc/$wm/maps" ||
				log "B1z: the minimal writer's nginx worker ($wm) has libctxshim.so mapped"
		fi
	fi
	# the comparison is only meaningful if exactly one side has the shim
	if [ -n "$wp" ] && [ -n "$ws" ] && [ -n "$AA_SHIM" ]; then
		grep -q 'libctxshim\.so' "/proc/$ws/maps" ||
			log "B1: the shim's nginx worker ($ws) has no libctxshim.so mapped"
		! grep -q 'libctxshim\.so' "/proc/$wp/maps" ||
			log "B1: the plain nginx worker ($wp) has libctxshim.so mapped"
	fi
	# warm-up: the workers' first requests (page faults, the shim's
	# tables, caches)
	for port in $PPLAIN $PSHIM ${MIN:+$PMIN}; do
		if [ -n "$HEAD_OK" ]; then
			"$NGXCLIENT" run "$port" "$W/head" 2000 >/dev/null 2>&1
		else
			wrk_run "$port" "$W/wrk.warm"
		fi
	done
	return 0
}

# b1_run PORT: one wrk run of B1/B2 against PORT, with the CPU time of its
# worker (ticks for B1m in b1cpu -- the minimal writer's in b1cpu.min --,
# schedstat ns for B1c in sched.PORT)
b1_run() {
	wk=$wp
	cpuf=$W/b1cpu
	[ "$1" = "$PSHIM" ] && wk=$ws
	[ "$1" = "${PMIN:-}" ] && wk=$wm && cpuf=$W/b1cpu.min
	c0=$(cpu_ticks "$wk")
	s0=$(sched_ns "$wk")
	wrk_run "$1" "$W/wrk.$1"
	s1=$(sched_ns "$wk")
	c1=$(cpu_ticks "$wk")
	if grep -q -e '^ *Non-2xx' -e '^ *Socket errors' "$W/wrk.$1"; then
		log "B1: errors in a wrk run on port $1:"
		grep -e '^ *Non-2xx' -e '^ *Socket errors' "$W/wrk.$1" >&2
	fi
	nreq=$(wrk_reqs "$W/wrk.$1")
	# port, user and system ticks before, after, requests, seconds
	[ -n "$c0" ] && [ -n "$c1" ] && echo "$1 $c0 $c1 $nreq $(wrk_secs "$W/wrk.$1")" >>"$cpuf"
	# the worker's CPU ns per request, and the ns it waited for its CPU
	awk -v a="${s0:-0 0}" -v b="${s1:-0 0}" -v n="${nreq:-0}" \
		'BEGIN { split(a, x, " "); split(b, y, " ")
			 if (n > 0 && y[1] > x[1])
				printf "%.1f %.0f\n", (y[1] - x[1]) / n, y[2] - x[2]
			 else print "nan nan" }' >"$W/sched.$1"
}

# lat_run PORT: one B2u run against PORT (bench-ngxclient lat: the captured
# head on one keep-alive connection, one request at a time, clock_gettime
# around each); prints its p50 and p99 in ns, nothing if it failed
lat_run() {
	# shellcheck disable=SC2086 # NPRIO and WRK_PIN are commands with options
	if ! $NPRIO $WRK_PIN "$NGXCLIENT" lat "$1" "$W/head" "$LAT_REQS" 500 \
		>"$W/lat.$1" 2>&1; then
		log "B2u: bench-ngxclient lat failed:"
		cat "$W/lat.$1" >&2
		return
	fi
	tr ' ' '\n' <"$W/lat.$1" | sed -n 's/^p50_ns=//p; s/^p99_ns=//p' | tr '\n' ' '
}

# B1z, B1zc: the minimal writer's side of the B1 runs against the plain
# side, exactly as B1 and B1c compare the shim's: the median of the
# per-triple ratios over the triples in which neither of the two workers
# waited for its CPU (columns 9-12 of b1).  Called after B1c; the rows are
# finished by min_check (whether the writer published at all).
bench_nginx_min() {
	awk -v t="$NGINX_SECS" 'NF >= 12 && $4 <= t * 1e7 && $12 <= t * 1e7' "$W/b1" \
		>"$W/b1z.clean"
	awk 'NF >= 12' "$W/b1" >"$W/b1z"
	nzc=$(wc -l <"$W/b1z.clean")
	nz=$(wc -l <"$W/b1z")
	BZF=$W/b1z.clean
	[ $((2 * nzc)) -ge "$nz" ] || BZF=$W/b1z
	zp=$(awk '{print $1}' "$BZF" | median)
	zr=$(awk '{print $9}' "$BZF" | median)
	zcp=$(awk '{print $3}' "$BZF" | median)
	zcm=$(awk '{print $11}' "$BZF" | median)
	B1Z_VAL=$(ratio "$BZF" 9 1 %.3f)
	B1Z_DETAIL=$(awk -v a="$zr" -v b="$zp" -v u="$(wc -l <"$BZF")" -v c="$nzc" -v n="$nz" \
		'BEGIN{printf "%.0f / %.0f req/s; %d of %d triples used (%d clean)", a, b, u, n, c}')
	B1Z_CI=$(ratio_ci "$BZF" 9 1 %.3f)
	B1ZC_VAL=$(ratio "$BZF" 3 11 %.3f)
	B1ZC_CI=$(ratio_ci "$BZF" 3 11 %.3f)
	B1ZC_DETAIL=$(awk -v a="$zcm" -v b="$zcp" \
		'BEGIN{printf "without %.2f us, minimal %.2f us", b / 1e3, a / 1e3}')
	B1Z_ROWS=1
}

# min_check: does the minimal writer publish?  Its nginx once more, with
# wrk loading it, and its worker read with ctxdump until 3 dumps showed
# the traceparent's trace-id with a span-id of its own (200 dumps at
# most; a dump that stops the worker in epoll_wait shows no context, as
# it should); the B1z rows say how many, and are left out (SKIP) if none
# did: a yardstick that publishes nothing would measure nothing.  Neither
# pinned nor real-time this time: a real-time worker on its own CPU sits
# in epoll_wait whenever ctxdump holds up wrk (3 of 40-115 dumps showed a
# record); unpinned, about every other dump does.
min_check() {
	mcp=$NGX_PREFIX
	NGX_PREFIX=
	ngx_start "$W/ngx-min" "$MINSHIM"
	NMIN=$NGX_PID
	NGX_PREFIX=$mcp
	wm=
	ngx_up "$PMIN" && wm=$(ngx_worker "$NMIN")
	if [ -z "$wm" ]; then
		log "B1z: the minimal writer's nginx did not start for the check:"
		cat "$W/ngx-min/error.log" >&2
	fi
	trace=$(echo "$TRACEPARENT" | cut -d- -f2)
	parent=$(echo "$TRACEPARENT" | cut -d- -f3)
	wrk -s "$WRK_SCRIPT" -t1 -c8 -d20s -H "$TRACEPARENT" \
		"http://127.0.0.1:$PMIN/small.html" >/dev/null 2>&1 &
	mcw=$!
	sleep 0.3
	seen=0
	i=0
	while [ -n "$wm" ] && [ $i -lt 200 ] && [ $seen -lt 3 ]; do
		if "$CTXDUMP" "$wm" >"$W/min-ctxdump" 2>&1 &&
			grep "trace_id=$trace " "$W/min-ctxdump" | grep -q 'span_id=' &&
			! grep -q "span_id=$parent" "$W/min-ctxdump"; then
			seen=$((seen + 1))
		fi
		i=$((i + 1))
	done
	kill "$mcw" 2>/dev/null
	wait "$mcw" 2>/dev/null
	stop_nginx
	[ -n "${B1Z_ROWS:-}" ] || return 0
	if [ "$seen" -eq 0 ]; then
		log "B1z: ctxdump saw no record in the minimal writer's worker ($wm) under load:"
		cat "$W/min-ctxdump" >&2
		skip B1z "nginx requests/s, minimal writer / without" \
			"libminshim.so published no record (ctxdump, $i dumps under load)"
		MIN=
		return 0
	fi
	row B1z "nginx requests/s, minimal writer / without" "$B1Z_VAL" info - \
		"$B1Z_DETAIL; its record in $seen of $i ctxdumps" "$B1Z_CI"
	row B1zc "nginx worker CPU time per request, without / minimal" "$B1ZC_VAL" \
		info - "$B1ZC_DETAIL" "$B1ZC_CI"
}

bench_nginx() {
	chmod 755 "$W"
	ngx_www "$W/www"
	p=18080
	while ! port_free $p || ! port_free $((p + 1)) || ! port_free $((p + 2)) ||
		! port_free $((p + 3)); do
		p=$((p + 4))
	done
	PPLAIN=$p
	PSHIM=$((p + 1))
	PCG=$((p + 2))
	PMIN=$((p + 3))
	# the head every B1 request carries, for the callgrind client (B1i),
	# the warm-ups and B2u
	HEAD_OK=
	capture_head "$PPLAIN" && HEAD_OK=1
	# The same configuration, each with its own port (same number of
	# digits: same head length), directory and log, serving the same file;
	# only one is under load at a time.  Their workers share the nginx CPU.
	ngx_conf "$W/ngx-plain" "$PPLAIN" "$W/www"
	ngx_conf "$W/ngx-shim" "$PSHIM" "$W/www"
	# B1z: a third side, nginx under the minimal record writer
	# (bench/minshim.c), measured in the same runs as B1, alternating
	# with the other two (the order of the three reverses from one triple
	# to the next, so each pair of sides alternates too)
	MIN=
	if [ "${BENCH_NGINX_MIN:-1}" != 0 ]; then
		if [ -f "$MINSHIM" ]; then
			MIN=1
			ngx_conf "$W/ngx-min" "$PMIN" "$W/www"
		else
			log "B1z: $MINSHIM is missing (ninja -C $BUILD); no B1z rows"
			skip B1z "nginx requests/s, minimal writer / without" \
				"bench/libminshim.so is not built"
		fi
	fi
	NGX_PREFIX="$NPRIO $NGX_PIN"
	AA_SHIM=$SHIM
	if [ "${BENCH_NGINX_AA:-0}" = 1 ]; then
		log "B1/B2: A/A check, both sides without the shim"
		AA_SHIM=
	fi
	runs=${BENCH_NGINX_RUNS:-20}
	LAT_REQS=${BENCH_NGINX_LAT_REQS:-10000}
	[ -n "$HEAD_OK" ] || LAT_REQS=0
	if [ "$NPRIO" != "$PRIO" ]; then
		rt=$(cat /proc/sys/kernel/sched_rt_runtime_us 2>/dev/null || echo -1)
		awk -v s="$NGINX_SECS" -v r="$rt" 'BEGIN { exit !(r >= 0 && s + 0.15 > r / 1e6) }' &&
			log "B1/B2: runs of $NGINX_SECS s at SCHED_FIFO outlast the real-time" \
				"budget (kernel.sched_rt_runtime_us=$rt): the kernel idles" \
				"the worker's CPU in them, and such pairs are left out"
	fi
	log "B1/B2: nginx + wrk, $runs pairs of ${NGINX_SECS} s (1 worker, 8 keep-alive" \
		"connections), fresh nginx processes for each pair${PIN_DESC:+; $PIN_DESC}" \
		"(load average $(cut -d' ' -f1-3 /proc/loadavg))"
	: >"$W/b1"
	: >"$W/b1cpu"
	: >"$W/b1cpu.min"
	: >"$W/b2u"
	i=0
	while [ $i -lt "$runs" ]; do
		# Fresh processes for every pair: each nginx process has its own
		# memory layout (ASLR, physical pages), which makes it a few per
		# cent faster or slower for its whole life (two plain nginx
		# against each other, 2 pairs per start: pairs of one start
		# agree, starts differ by up to +-5 %); one pair per start
		# samples that as often as the run noise.  The side that starts
		# first and the side that runs first alternate (ABBA...), so a
		# drift (load, clock) favours each side in half of the pairs.
		if [ $((i % 2)) -eq 0 ]; then
			first=plain
			order="$PPLAIN $PSHIM"
			order3="$order${MIN:+ $PMIN}"
		else
			first=shim
			order="$PSHIM $PPLAIN"
			order3="${MIN:+$PMIN }$order"
		fi
		if ! ngx_both $first; then
			skip B1 "nginx requests/s with / without the shim" "nginx did not start"
			return
		fi
		for port in $order3; do
			b1_run "$port"
		done
		# req/s, p99 (us), worker CPU ns per request, ns waited:
		# plain in columns 1-4, shim in 5-8, the minimal writer in 9-12
		echo "$(wrk_rps "$W/wrk.$PPLAIN") $(wrk_p99_us "$W/wrk.$PPLAIN")" \
			"$(cat "$W/sched.$PPLAIN")" \
			"$(wrk_rps "$W/wrk.$PSHIM") $(wrk_p99_us "$W/wrk.$PSHIM")" \
			"$(cat "$W/sched.$PSHIM")" \
			"${MIN:+$(wrk_rps "$W/wrk.$PMIN") $(wrk_p99_us "$W/wrk.$PMIN")}" \
			"${MIN:+$(cat "$W/sched.$PMIN")}" >>"$W/b1"
		# B2u: the same processes, the same order
		if [ "$LAT_REQS" -gt 0 ]; then
			for port in $order; do
				lat_run "$port" >"$W/lat1.$port"
			done
			l1=$(cat "$W/lat1.$PPLAIN")
			l2=$(cat "$W/lat1.$PSHIM")
			[ -n "$l1" ] && [ -n "$l2" ] && echo "$l1 $l2" >>"$W/b2u"
		fi
		i=$((i + 1))
		# the last pair's workers stay for B8a
		[ $i -lt "$runs" ] && stop_nginx
	done
	# Pairs in which either worker waited for its CPU for more than 1 % of
	# its run (other load got through: RT throttling, the fair server, a
	# CPU-bound kernel thread) measured that load more than the shim: they
	# are left out, whole, as long as at least half of the pairs are
	# clean.  Which pairs that hits does not depend on the side.
	awk -v t="$NGINX_SECS" '$4 <= t * 1e7 && $8 <= t * 1e7' "$W/b1" >"$W/b1.clean"
	nclean=$(wc -l <"$W/b1.clean")
	B1F=$W/b1.clean
	[ $((2 * nclean)) -ge "$runs" ] || B1F=$W/b1
	rp=$(awk '{print $1}' "$B1F" | median)
	lp=$(awk '{print $2}' "$B1F" | median)
	cp=$(awk '{print $3}' "$B1F" | median)
	rs=$(awk '{print $5}' "$B1F" | median)
	ls=$(awk '{print $6}' "$B1F" | median)
	cs=$(awk '{print $7}' "$B1F" | median)
	used=$(wc -l <"$B1F")
	row B1 "nginx requests/s, with / without the shim" \
		"$(ratio "$B1F" 5 1 %.3f)" ge 0.99 \
		"$(awk -v a="$rs" -v b="$rp" -v u="$used" -v c="$nclean" -v n="$runs" \
			'BEGIN{printf "%.0f / %.0f req/s; %d of %d pairs used (%d clean)", a, b, u, n, c}')" \
		"$(ratio_ci "$B1F" 5 1 %.3f)"
	row B2 "nginx p99 latency, with / without the shim" \
		"$(ratio "$B1F" 6 2 %.3f)" le 1.03 \
		"$(awk -v a="$ls" -v b="$lp" 'BEGIN{printf "%.0f / %.0f us", a, b}')" \
		"$(ratio_ci "$B1F" 6 2 %.3f)"
	# the worker's own CPU time per request (schedstat, exact) in the same
	# runs, without / with: B1 if the worker alone set the pace
	row B1c "nginx worker CPU time per request, without / with" \
		"$(ratio "$B1F" 3 7 %.3f)" info - \
		"$(awk -v a="$cs" -v b="$cp" 'BEGIN{printf "without %.2f us, with %.2f us", b / 1e3, a / 1e3}')" \
		"$(ratio_ci "$B1F" 3 7 %.3f)"
	[ -n "$MIN" ] && bench_nginx_min
	if [ -s "$W/b2u" ]; then
		a50=$(awk '{print $1}' "$W/b2u" | median)
		a99=$(awk '{print $2}' "$W/b2u" | median)
		b50=$(awk '{print $3}' "$W/b2u" | median)
		b99=$(awk '{print $4}' "$W/b2u" | median)
		row B2u "nginx p99 latency, 1 request in flight, with / without" \
			"$(ratio "$W/b2u" 4 2 %.3f)" info - \
			"$(awk -v a="$b99" -v b="$a99" -v c="$b50" -v d="$a50" \
				-v r="$(ratio "$W/b2u" 3 1 %.3f)" \
				'BEGIN{printf "%.1f / %.1f us; p50 %.1f / %.1f us (%s)",
					a / 1e3, b / 1e3, c / 1e3, d / 1e3, r}')" \
			"$(ratio_ci "$W/b2u" 4 2 %.3f)"
	fi

	# B8: the workers' resident memory after the same load
	if [ -n "$wp" ] && [ -n "$ws" ]; then
		kp=$(rss_kib "$wp")
		ks=$(rss_kib "$ws")
		row B8a "RSS added to the nginx worker by the shim (MiB)" \
			"$(awk -v a="$ks" -v b="$kp" 'BEGIN{printf "%.2f", (a-b)/1024}')" le 1 \
			"$ks vs $kp KiB"
	fi
	stop_nginx
	[ -n "$MIN" ] && min_check
	if [ -z "$HEAD_OK" ]; then
		skip B1i "nginx user instructions per request, with / without" \
			"could not capture wrk's request head"
	elif ! command -v valgrind >/dev/null; then
		skip B1i "nginx user instructions per request, with / without" "no valgrind"
	elif [ "${BENCH_NGINX_CG_REQS:-2000}" -gt 0 ]; then
		bench_nginx_cg
	fi
}

bench_sizes() {
	sizes=$("$BUILD/bench/bench-sizes")
	get() { echo "$sizes" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
	# the table is indexed by fd: besides its slot, each fd has a byte in
	# the hot map and four 8-byte words, each written only by what needs
	# it (bench/README.md, B8b), and each chunk of fds a pointer
	row B8b "bytes of state per tracked connection" "$(get slot)" le 256 \
		"struct slot $(get slot) B (scanner $(get scan) B); per fd also $(get hot) B hot map, 4 words of 8 B written when used, $(get chunk_ptr) B per $(get chunk_fds) fds"
}

# ---- R: ctxdump record's overhead (bench/record-overhead.sh) ----------------

# Its rows, shortened to fit this table, as info rows (no target in issue
# 8).  Fewer and shorter runs than its defaults, to take about 30 s: the
# REC_* variables still apply.
bench_record() {
	REC_KEEP=1 REC_RUNS=${REC_RUNS:-3} REC_SECS=${REC_SECS:-2} \
		REC_CPU_MB=${REC_CPU_MB:-256} \
		sh "$SRCDIR/bench/record-overhead.sh" "$BUILD" >"$W/rec.out" 2>"$W/rec.err"
	rd=$(sed -n 's/^record-overhead: raw numbers kept in //p' "$W/rec.err")
	if [ -z "$rd" ] || [ ! -f "$rd/rows" ]; then
		log "record-overhead.sh failed:"
		cat "$W/rec.err" >&2
		skip R "ctxdump record overhead" "record-overhead.sh failed"
		return
	fi
	awk -F '\t' '
		function r(id, m) { printf "%s\t%s\t%s\tinfo\t-\t%s\t%s\n", id, m, $3, $4, $5 }
		{ n = split($1, k, "-"); hz = k[n] }
		/^R-ngx-rps-/ { r("Rr" hz, "nginx req/s, ctxdump record -F " hz " / none"); next }
		/^R-ngx-p99-/ { r("Rl" hz, "nginx p99 latency, ctxdump record -F " hz " / none"); next }
		/^R-ngx-stop-/ { r("Rs" hz, "nginx worker stopped per round at " hz " Hz"); next }
		/^R-cpu-[0-9]/ { r("Rc" hz, "CPU-bound throughput, record -F " hz " / none"); next }
		{ printf "%s\t%s\t-\tskip\t-\t%s\n", $1, $2, $4 }' "$rd/rows" >>"$ROWS"
	case $rd in /tmp/ctxshim-recbench.*) rm -rf "$rd" ;; esac
}

# ---- main -----------------------------------------------------------------

: >"$ROWS"
T0=$(date +%s)
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
if want B3 || want B4; then
	if ! command -v valgrind >/dev/null; then
		want B3 && skip B3 "extra instructions per read()" "no valgrind"
		want B4 && skip B4 "HTTP head scan / parse + publish" "no valgrind"
	else
		want B3 && log "B3: callgrind, read() loops" && bench_read
		want B4 && log "B4: callgrind, HTTP requests" && bench_http
	fi
fi
if want B5 || want B6 || want B7; then
	bench_ctxdump
fi
if want B1 || want B2 || want B8; then
	if ! command -v nginx >/dev/null || ! command -v wrk >/dev/null ||
		! command -v curl >/dev/null; then
		skip B1 "nginx requests/s with / without the shim" "needs nginx, wrk, curl"
	else
		bench_nginx
	fi
	[ -x "$BUILD/bench/bench-sizes" ] && bench_sizes
fi
if want R; then
	log "R: ctxdump record overhead (bench/record-overhead.sh, about 30 s)"
	bench_record
fi

echo
echo "ctxshim benchmarks ($(uname -m), $(nproc) CPUs, kernel $(uname -r)), $(date -u +%Y-%m-%d)"
echo "command: ${BENCH_ONLY:+BENCH_ONLY=\"$BENCH_ONLY\" }sh bench/run.sh ${1:-}" \
	"(BENCH_REPS=$REPS, BENCH_THREADS=$NTHREADS," \
	"BENCH_NGINX_SECS=$NGINX_SECS, BENCH_NGINX_RUNS=${BENCH_NGINX_RUNS:-20}${PRIO:+, $PRIO})"
if want B1 || want B2 || want B8; then
	echo "nginx rows: ${PIN_DESC:-unpinned}${NPRIO:+, $NPRIO}; load average at the start" \
		"$LOAD0$([ "${BENCH_NGINX_AA:-0}" = 1 ] && echo "; A/A CHECK: no shim on either side")"
fi
echo
# A verdict whose target lies inside the row's 95 % interval is the
# median's, but another run may well give the other one: the line under
# the table names those rows.
awk -F '\t' '
	BEGIN { printf "%-5s %-52s %8s  %-8s %-6s %-13s %s\n", "id", "measurement", "value",
		"target", "result", "95% interval", "detail (medians of each side)"
		pass = miss = 0; near = "" }
	{
		if ($4 == "skip") { res = "SKIP"; tgt = "-" }
		else if ($4 == "info") { res = "info"; tgt = "-" }
		else if ($4 == "le") { tgt = "<= " $5; res = ($3 + 0 <= $5 + 0) ? "PASS" : "MISS" }
		else { tgt = ">= " $5; res = ($3 + 0 >= $5 + 0) ? "PASS" : "MISS" }
		if (res == "PASS") pass++; else if (res == "MISS") miss++
		ci = ($7 == "") ? "-" : $7
		if ((res == "PASS" || res == "MISS") && split(ci, lh, "-") == 2 &&
		    lh[1] + 0 <= $5 + 0 && $5 + 0 <= lh[2] + 0)
			near = near " " $1
		printf "%-5s %-52s %8s  %-8s %-6s %-13s %s\n", $1, $2, $3, tgt, res, ci, $6
	}
	END {
		printf "\n%d PASS, %d MISS\n", pass, miss
		if (near != "")
			printf "target inside the 95%% interval (this run cannot tell PASS from MISS):%s\n", near
	}' "$ROWS"
echo "(total $(($(date +%s) - T0)) s)"
