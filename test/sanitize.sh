#!/bin/sh
# Sanitizer and valgrind runs (issue 9), for CI and by hand:
#
#   test/sanitize.sh [ASAN_BUILDDIR [PLAIN_BUILDDIR]]
#
# 1. An ASan+UBSan build (-Db_sanitize=address,undefined, set up in
#    ASAN_BUILDDIR if missing; default build-asan): the unit suite with
#    LeakSanitizer on for the test programs, then the preload and ctxdump
#    suites (test/meson.build preloads the ASan runtime first; leaks are
#    not checked in preloaded programs such as python3 or nginx), and
#    the integration suite: the hooks in real servers (nginx, apache,
#    haproxy, ...) under real traffic (about 2 minutes).
# 2. ctxdump of that build under LeakSanitizer against a threaded program
#    under the shim (with --stacks), a hostile target and a hostile
#    process context: no leak, no sanitizer report.
# 3. In PLAIN_BUILDDIR (default build; set up if missing): the unit suite
#    under valgrind memcheck (meson test --setup valgrind; the slow tests
#    shrink their samples under valgrind) and the preload-valgrind test
#    (servers and helpers under the shim under memcheck).
#
# Prints one line per step and "sanitize: N step(s) failed" at the end;
# exit status 0 only if every step passed.  Logs stay in the build dirs
# (meson-logs/) and in $TMPDIR/ctxshim-sanitize.*.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
asan=${1:-$src/build-asan}
plain=${2:-$src/build}
jobs=${SANITIZE_JOBS:-2}
failed=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ctxshim-sanitize.XXXXXX") || exit 2

step() {
	name=$1
	shift
	t0=$(date +%s)
	if "$@" >"$tmp/$name.log" 2>&1; then
		echo "sanitize: $name: ok ($(($(date +%s) - t0)) s)"
	else
		echo "sanitize: $name: FAILED ($(($(date +%s) - t0)) s), log $tmp/$name.log"
		tail -n 40 "$tmp/$name.log"
		failed=$((failed + 1))
	fi
}

setup() {
	dir=$1
	shift
	if [ ! -f "$dir/build.ninja" ]; then
		meson setup "$dir" "$src" "$@" || return 1
	fi
	meson compile -C "$dir"
}

# ---- 1. ASan + UBSan ----
lsan_wrapper="sh -c 'ASAN_OPTIONS=\"\$ASAN_OPTIONS:detect_leaks=1\" exec \"\$@\"' lsan"
step asan-build setup "$asan" -Db_sanitize=address,undefined
step asan-unit meson test -C "$asan" --suite unit --print-errorlogs \
	--num-processes "$jobs" --wrapper "$lsan_wrapper"
step asan-preload-ctxdump meson test -C "$asan" --suite preload --suite ctxdump \
	--print-errorlogs --num-processes "$jobs"
step asan-integration meson test -C "$asan" --suite integration \
	--print-errorlogs --num-processes "$jobs"

# ---- 2. ctxdump under LeakSanitizer ----
# Start a helper with stdin on a fifo, wait for READY, dump it, stop it.
dump_target() {
	preload=$1
	shift
	fifo=$tmp/in.$$
	rm -f "$fifo"
	mkfifo "$fifo" || return 1
	if [ "$preload" = shim ]; then
		libasan=$(cc -print-file-name=libasan.so)
		env LD_PRELOAD="$libasan $asan/libctxshim.so" \
			ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0 \
			TRACEPARENT=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 \
			"$@" <"$fifo" >"$tmp/target.out" 2>&1 &
	else
		ASAN_OPTIONS=detect_leaks=0 "$@" <"$fifo" >"$tmp/target.out" 2>&1 &
	fi
	tpid=$!
	exec 9>"$fifo"
	i=0
	while ! grep -q '^READY' "$tmp/target.out" 2>/dev/null; do
		i=$((i + 1))
		if [ $i -gt 500 ] || ! kill -0 $tpid 2>/dev/null; then
			echo "target $* did not start:"
			cat "$tmp/target.out"
			exec 9>&-
			return 1
		fi
		sleep 0.02
	done
	rc=0
	for opts in "" "-j" "-s" "-s -j"; do
		# shellcheck disable=SC2086
		ASAN_OPTIONS=detect_leaks=1:halt_on_error=1 \
			UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
			"$asan/tools/ctxdump/ctxdump" $opts $tpid >"$tmp/dump.out" 2>"$tmp/dump.err"
		st=$?
		if [ $st -gt 1 ] || grep -q 'Sanitizer' "$tmp/dump.err"; then
			echo "ctxdump $opts on $*: exit $st"
			cat "$tmp/dump.err"
			rc=1
		fi
	done
	exec 9>&-
	wait $tpid || { echo "target $* failed"; rc=1; }
	return $rc
}
lsan_ctxdump() {
	h=$asan/test/helpers
	dump_target shim "$h/threads" --wait 8 &&
		dump_target plain "$h/hostile-records" &&
		dump_target plain "$h/hostile-pctx" strings &&
		dump_target plain "$h/writer-tlsdesc"
}
step lsan-ctxdump lsan_ctxdump

# ---- 3. valgrind ----
step plain-build setup "$plain"
step valgrind-unit meson test -C "$plain" --setup valgrind --suite unit --print-errorlogs \
	--num-processes "$jobs"
step valgrind-programs meson test -C "$plain" preload-valgrind --print-errorlogs

# the logs of a failed step stay for inspection
[ $failed -eq 0 ] && rm -rf "$tmp"
echo "sanitize: $failed step(s) failed"
[ $failed -eq 0 ]
