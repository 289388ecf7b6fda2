# shellcheck shell=sh disable=SC2034 # variables for the scripts that source this
# SPDX-License-Identifier: Apache-2.0
#
# Sourced by the test-deploy-*.sh scripts (meson suite 'deploy').  meson
# passes CTXSHIM_LIB, CTXSHIM_CMD, CTXSHIM_ENTRYPOINT, HELPER_DIR and
# CTXSHIM_SRCDIR/CTXSHIM_BUILDDIR.  Each check prints "ok - …" or
# "FAIL - …"; the script ends with dp_finish: exit 0 when all passed, 1
# otherwise (77 from dp_skip when the environment cannot run it).

set -u

dp_failed=0
dp_passed=0

for dp_var in CTXSHIM_LIB CTXSHIM_CMD CTXSHIM_ENTRYPOINT CTXSHIM_SRCDIR; do
	eval "dp_val=\${$dp_var-}"
	if [ -z "$dp_val" ]; then
		echo "$dp_var is not set (run this test through meson test)" >&2
		exit 1
	fi
done

unset LD_PRELOAD OTEL_SERVICE_NAME OTEL_RESOURCE_ATTRIBUTES CTXSHIM_LOG CTXSHIM_EVENTS
unset CTXSHIM_DISABLE

# A shim built with -Db_sanitize=address needs the ASan runtime loaded
# first in uninstrumented programs: dp_base_preload is what LD_PRELOAD
# holds before ctxshim appends to it ("" normally).
dp_base_preload=
if grep -q 'libasan\.so' "$CTXSHIM_LIB" 2>/dev/null; then
	dp_base_preload=$(${CC:-cc} -print-file-name=libasan.so)
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0:verify_asan_link_order=0
	export ASAN_OPTIONS
fi

dp_tmp=$(mktemp -d "${TMPDIR:-/tmp}/ctxshim-deploy.XXXXXX") || exit 1
dp_pids=

# dp_running PID: PID is a child of this shell that has not exited.  The
# parent check keeps dp_cleanup from signalling a process that reused the
# pid of a job the shell has already reaped.
dp_running() {
	dp_st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	dp_st=${dp_st##*) }
	dp_state=${dp_st%% *}
	dp_st=${dp_st#* }
	[ "$dp_state" != Z ] && [ "${dp_st%% *}" = "$$" ]
}

# dp_running_of PIDS...: those still running.
dp_running_of() {
	for dp_p in "$@"; do
		dp_running "$dp_p" && printf ' %s' "$dp_p"
	done
}

# Ends the jobs in $dp_pids and reaps them, those that had already exited
# too: a job left unreaped when the script exits becomes a zombie for good
# under a PID 1 that does not reap (a container's).  A job that ignores
# SIGTERM gets SIGKILL after 2 s.
# shellcheck disable=SC2086 # pids separated by blanks
dp_cleanup() {
	dp_left=$(dp_running_of $dp_pids)
	[ -z "$dp_left" ] || kill $dp_left 2>/dev/null
	dp_n=0
	while [ -n "$dp_left" ] && [ $dp_n -lt 20 ]; do
		sleep 0.1
		dp_left=$(dp_running_of $dp_left)
		dp_n=$((dp_n + 1))
	done
	[ -z "$dp_left" ] || kill -KILL $dp_left 2>/dev/null
	[ -z "$dp_pids" ] || wait $dp_pids
	rm -rf "$dp_tmp"
}
trap dp_cleanup EXIT
trap 'exit 1' INT TERM HUP

ok() {
	dp_passed=$((dp_passed + 1))
	printf 'ok - %s\n' "$*"
}

fail() {
	dp_failed=$((dp_failed + 1))
	printf 'FAIL - %s\n' "$*"
}

# check DESCRIPTION COMMAND...: the command must succeed.
check() {
	dp_desc=$1
	shift
	if "$@"; then
		ok "$dp_desc"
	else
		fail "$dp_desc"
	fi
}

# expect_status WANT DESCRIPTION COMMAND...: run it, stdout in $dp_out,
# stderr in $dp_err, and compare the exit status.
expect_status() {
	dp_want=$1
	dp_desc=$2
	shift 2
	"$@" >"$dp_tmp/out" 2>"$dp_tmp/err"
	dp_status=$?
	dp_out=$(cat "$dp_tmp/out")
	dp_err=$(cat "$dp_tmp/err")
	if [ "$dp_status" = "$dp_want" ]; then
		ok "$dp_desc (exit $dp_status)"
	else
		fail "$dp_desc: exit $dp_status, want $dp_want"
		printf '  stdout: %s\n  stderr: %s\n' "$dp_out" "$dp_err"
	fi
}

# contains HAYSTACK NEEDLE
contains() {
	case $1 in
	*"$2"*) return 0 ;;
	esac
	printf '  %s\n  does not contain: %s\n' "$1" "$2"
	return 1
}

# not_contains TEXT PART
not_contains() {
	case $1 in
	*"$2"*)
		printf '  %s\n  contains: %s\n' "$1" "$2"
		return 1
		;;
	esac
	return 0
}

# same TEXT1 TEXT2
same() {
	[ "$1" = "$2" ] && return 0
	printf '  got:  %s\n  want: %s\n' "$1" "$2"
	return 1
}

# snapshot DIR: a listing of the tree with checksums, and a link as its
# target (not followed out of the tree): "nothing changed" means equal
# listings.
snapshot() {
	(cd "$1" && find . -print | sort | while IFS= read -r f; do
		if [ -L "$f" ]; then
			printf '%s -> %s\n' "$f" "$(readlink "$f")"
		elif [ -f "$f" ]; then
			printf '%s %s %s\n' "$f" "$(stat -c %a "$f")" "$(cksum <"$f")"
		else
			printf '%s\n' "$f"
		fi
	done)
}

# climb DIR: as many "../" as DIR has names: the way from DIR to this
# host's /, which the same link inside a root DIR cannot climb out of.
climb() {
	printf '%s' "$1" | sed 's|/[^/]*|../|g'
}

dp_skip() {
	echo "SKIP: $*"
	exit 77
}

dp_finish() {
	printf '%d passed, %d failed\n' "$dp_passed" "$dp_failed"
	[ "$dp_failed" -eq 0 ]
	exit $?
}

# start_blocked COMMAND...: start COMMAND in the background with a
# handshake instead of sleeps: COMMAND finds two FIFOs in $DP_READY and
# $DP_GO; it writes a line to $DP_READY when ready, then reads $DP_GO.
# COMMAND must exec its way to the process under test, so that $! is that
# process.  Sets bg_pid to the pid and bg_go to the FIFO that releases it.
dp_seq=0
start_blocked() {
	dp_seq=$((dp_seq + 1))
	DP_READY=$dp_tmp/ready.$dp_seq
	DP_GO=$dp_tmp/go.$dp_seq
	mkfifo "$DP_READY" "$DP_GO" || return 1
	export DP_READY DP_GO
	"$@" &
	bg_pid=$!
	bg_go=$DP_GO
	dp_pids="$dp_pids $!"
	dp_line=$(dp_read_ready "$DP_READY")
	unset DP_READY DP_GO
	if [ "$dp_line" != ready ]; then
		fail "$1 did not start"
		dp_finish
	fi
}

# dp_read_ready FIFO: the first line written to FIFO.  timeout(1) is only a
# guard for a command that dies before it opens the FIFO (the open would
# block forever); the handshake itself is the line.
dp_read_ready() {
	# shellcheck disable=SC2016 # expanded by that sh
	timeout 60 sh -c 'read -r l <"$1" && printf "%s\n" "$l"' sh "$1"
}

# start_helper COMMAND...: start a helper that prints "READY <pid>" on
# stdout and then waits for stdin to close (test/helpers/*.c).  Sets bg_pid
# to that pid and bg_go to the FIFO that closes its stdin (see release).
start_helper() {
	dp_seq=$((dp_seq + 1))
	dp_ready=$dp_tmp/ready.$dp_seq
	dp_go=$dp_tmp/go.$dp_seq
	dp_in=$dp_tmp/in.$dp_seq
	mkfifo "$dp_ready" "$dp_go" "$dp_in" || return 1
	# The helper's stdin is the FIFO $dp_in, held open by a job of its own
	# until release writes to $dp_go; not a pipeline, whose first process
	# has no pid to put in $dp_pids: left blocked opening $dp_go when the
	# script fails before release, it held meson's stderr until the
	# timeout.  $dp_in is opened first so that the helper starts now.
	{ read -r dp_x <"$dp_go"; } >"$dp_in" &
	dp_pids="$dp_pids $!"
	"$@" <"$dp_in" >"$dp_ready" &
	dp_pids="$dp_pids $!"
	dp_line=$(dp_read_ready "$dp_ready")
	case $dp_line in
	"READY "*) ;;
	*)
		fail "helper $1 did not start: '$dp_line'"
		dp_finish
		;;
	esac
	bg_pid=${dp_line#READY }
	bg_go=$dp_go
}

# release PID GO: let a process started by start_blocked finish; returns its
# exit status.
release() {
	printf 'go\n' >"$2"
	wait "$1"
}

# For start_blocked: an sh (dynamically linked) that signals and waits.
# shellcheck disable=SC2016 # expanded by the sh that runs it
DP_BLOCKER='echo ready >"$DP_READY"; read -r x <"$DP_GO"'

# Crafted ELF headers: printf only, so no cross toolchain is needed.
# elf64 FILE TYPE MACHINE [INTERP]: ELF64 LE header, one program header
# (PT_INTERP with INTERP, or PT_LOAD) and the interpreter string.
# bytes B...: those bytes; le VALUE SIZE: VALUE little-endian in SIZE bytes.
bytes() {
	for dp_b in "$@"; do
		# shellcheck disable=SC2059 # the format is the octal escape
		printf "\\$(printf '%03o' "$dp_b")"
	done
}
le() { # le VALUE SIZE
	dp_v=$1
	dp_n=0
	while [ $dp_n -lt "$2" ]; do
		bytes $((dp_v % 256))
		dp_v=$((dp_v / 256))
		dp_n=$((dp_n + 1))
	done
}
elf64() {
	dp_interp=${4-}
	if [ -n "$dp_interp" ]; then dp_ptype=3; else dp_ptype=1; fi
	dp_ilen=$((${#dp_interp} + 1))
	{
		bytes 127 69 76 70 2 1 1 0 0 0 0 0 0 0 0 0
		le "$2" 2; le "$3" 2; le 1 4; le 0 8; le 64 8; le 0 8
		le 0 4; le 64 2; le 56 2; le 1 2; le 64 2; le 0 2; le 0 2
		le $dp_ptype 4; le 4 4; le 120 8; le 120 8; le 120 8
		le $dp_ilen 8; le $dp_ilen 8; le 1 8
		printf '%s' "$dp_interp"
		bytes 0
	} >"$1"
	chmod 755 "$1"
}

# dp_prog32: build ./prog32, a 32-bit program that prints "p32" and exits
# 5, against the i386 libc alone (no 32-bit start files needed).  Returns
# 1, having said why, without that libc (the package libc6-i386), with a
# compiler that cannot build it, or on a kernel that runs no 32-bit
# programs (no ia32 emulation: it exits 5 only where it runs).
dp_prog32() {
	printf 'int puts(const char *);\nvoid exit(int);\nvoid _start(void) { puts("p32"); exit(5); }\n' >p32.c
	dp_ld32=$(readlink -f /lib/ld-linux.so.2 2>/dev/null)
	if [ -z "$dp_ld32" ] || [ ! -f "${dp_ld32%/*}/libc.so.6" ]; then
		echo "# no i386 libc to build a 32-bit program with: not checked"
		return 1
	fi
	if ! ${CC:-cc} -m32 -fno-pie -no-pie -nostdlib -nostartfiles -o prog32 p32.c \
		-Wl,-dynamic-linker,/lib/ld-linux.so.2 "${dp_ld32%/*}/libc.so.6" 2>cc32.err; then
		echo "# ${CC:-cc} -m32 cannot build a 32-bit program: not checked:"
		sed 's/^/#   /' cc32.err
		return 1
	fi
	./prog32 >/dev/null 2>&1
	if [ $? -ne 5 ]; then
		echo "# this kernel runs no 32-bit programs: not checked"
		return 1
	fi
}
