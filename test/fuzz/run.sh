#!/bin/sh
# Build the libFuzzer harnesses of test/fuzz/ with clang and run each for a
# fixed time.
#
#   test/fuzz/run.sh [SECONDS] [HARNESS...]
#
# SECONDS per harness (default 10; 0 only replays the seeds and the
# regression inputs).  HARNESS: names such as http-scan or fuzz-http-scan.c
# (default: every fuzz-*.c here).  Environment:
#   FUZZ_OUT   work directory (default /tmp/ctxshim-fuzz): binaries, the
#              growing corpora (corpus/NAME) and crashes (crash/NAME-*)
#   FUZZ_JOBS  harnesses run at the same time (default: number of CPUs)
#   CC         clang (default clang)
#   FUZZ_FLAGS extra libFuzzer flags, e.g. "-dict=... -max_len=65536"
# Exit status 0 if no harness found anything, 1 otherwise (the crashing
# input is printed; copy it into test/fuzz/regress/NAME/ with a fix).
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
secs=${1:-10}
[ $# -gt 0 ] && shift
out=${FUZZ_OUT:-/tmp/ctxshim-fuzz}
cc=${CC:-clang}
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}

case $secs in
*[!0-9]* | '') echo "run.sh: SECONDS must be a number: '$secs'" >&2; exit 64 ;;
esac
if ! command -v "$cc" >/dev/null 2>&1; then
	echo "run.sh: $cc not found (Debian: apt-get install clang libclang-rt-14-dev)" >&2
	exit 2
fi

if [ $# -gt 0 ]; then
	names=
	for h in "$@"; do
		h=${h##*/}
		h=${h#fuzz-}
		h=${h%.c}
		[ -f "$here/fuzz-$h.c" ] || { echo "run.sh: no harness fuzz-$h.c" >&2; exit 64; }
		names="$names $h"
	done
else
	names=
	for f in "$here"/fuzz-*.c; do
		n=${f##*/fuzz-}
		n=${n%.c}
		[ "$n" = main ] || names="$names $n"
	done
fi

mkdir -p "$out/inc" "$out/obj" "$out/bin" "$out/log" || exit 2
cat >"$out/inc/config.h" <<'H'
#pragma once
#define CTXSHIM_VERSION "fuzz"
#define CTXSHIM_LIBDIR "/nonexistent"
#define CTXSHIM_PKGLIBDIR "/nonexistent"
H

# Instrumented for coverage and both sanitizers; UBSan findings abort.
cflags="-g -O1 -std=gnu11 -D_GNU_SOURCE -fno-omit-frame-pointer -Wno-gnu-variable-sized-type-not-at-end
	-fsanitize=address,undefined -fno-sanitize-recover=undefined
	-I$out/inc -I$src/proc-context -I$src/tools/ctxdump -I$src/preload -I$src/hooks
	-I$here"

# What each harness links besides proc-context/*.c: the ctxdump harnesses
# get every ctxdump source but its main (output.c and elf-tls.c call into
# the others).
ctxdump_lib() {
	for f in "$src"/tools/ctxdump/*.c; do
		[ "${f##*/}" = ctxdump.c ] || echo "tools/ctxdump/${f##*/}"
	done
}
extra_sources() {
	case $1 in
	escape | tlsmath | elf | report) ctxdump_lib ;;
	esac
}
extra_libs() {
	case $1 in
	escape | tlsmath | elf | report)
		echo "-lelf $(pkg-config --libs libunwind-ptrace libunwind-generic 2>/dev/null ||
			echo -lunwind-ptrace -lunwind-generic -lunwind) -lpthread"
		;;
	esac
}

build() {
	name=$1
	objs=
	for f in "$src"/proc-context/*.c $(for s in $(extra_sources "$name"); do echo "$src/$s"; done); do
		o="$out/obj/$(echo "${f#"$src"/}" | tr / _).o"
		if [ ! -f "$o" ]; then
			# shellcheck disable=SC2086
			$cc $cflags -fsanitize=fuzzer-no-link -c "$f" -o "$o" || return 1
		fi
		objs="$objs $o"
	done
	# shellcheck disable=SC2086,SC2046
	$cc $cflags -fsanitize=fuzzer "$here/fuzz-$name.c" $objs $(extra_libs "$name") \
		-o "$out/bin/fuzz-$name"
}

max_len() {
	case $1 in
	elf | report) echo 65536 ;;
	http-scan) echo 16384 ;;
	pctx) echo 8192 ;;
	*) echo 4096 ;;
	esac
}

run_one() {
	name=$1
	log="$out/log/$name.log"
	mkdir -p "$out/corpus/$name" "$out/crash"
	set -- "$out/corpus/$name"
	[ -d "$here/corpus/$name" ] && set -- "$@" "$here/corpus/$name"
	[ -d "$here/regress/$name" ] && set -- "$@" "$here/regress/$name"
	if [ "$secs" -eq 0 ]; then
		set -- -runs=0 "$@"
	else
		set -- -max_total_time="$secs" "$@"
	fi
	# shellcheck disable=SC2086
	ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1} \
		UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
		"$out/bin/fuzz-$name" -timeout=10 -rss_limit_mb=2048 \
		-max_len="$(max_len "$name")" -print_final_stats=1 \
		-artifact_prefix="$out/crash/$name-" ${FUZZ_FLAGS:-} "$@" >"$log" 2>&1
	st=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
	if [ $st -eq 0 ]; then
		echo "fuzz-$name: ok (${runs:-?} runs, ${cov:-cov: ?})"
	else
		echo "fuzz-$name: FAILED (exit $st), log $log:"
		grep -E 'ERROR|invariant|runtime error|SUMMARY|Test unit written|Timeout|leak' "$log" | head -n 20
		touch "$out/failed"
	fi
}

rm -f "$out/failed" "$out"/obj/*.o # objects are shared by the harnesses of one run
start=$(date +%s)
for n in $names; do
	build "$n" || { echo "fuzz-$n: build failed"; exit 2; }
done
# shellcheck disable=SC2086
set -- $names
echo "built $# harnesses in $(($(date +%s) - start)) s; ${secs} s each, $jobs at a time"
running=0
for n in $names; do
	run_one "$n" &
	running=$((running + 1))
	if [ $running -ge "$jobs" ]; then
		wait
		running=0
	fi
done
wait
echo "total $(($(date +%s) - start)) s"
[ ! -f "$out/failed" ]
