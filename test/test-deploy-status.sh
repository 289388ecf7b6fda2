#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# ctxshim status PID: loaded or not, version, active or passive, read from
# /proc/PID/maps and the OTEL_CTX process context.  The helper writer-pctx
# publishes a hand-encoded context, so the decoder and the state logic are
# tested without depending on the shim's own publisher; a stand-in library
# named libctxshim.so plays the loaded shim.  The real shim is checked too.

. "$(dirname "$0")/deploy-lib.sh"

S=$CTXSHIM_CMD
lib=$CTXSHIM_LIB
W=${HELPER_DIR:?}/writer-pctx
[ -x "$W" ] || dp_skip "helper $W not built"
cd "$dp_tmp" || exit 1
version=$("$S" --version | sed 's/.* //')

expect_status 64 "no pid" "$S" status
expect_status 64 "not a number" "$S" status 12x
expect_status 64 "zero" "$S" status 000
expect_status 2 "no such process" "$S" status 999999999
check "says so" contains "$dp_err" "process 999999999 does not exist"

# A zombie (exited, not reaped): "cannot tell", not "not loaded" (old:
# exit 1, "library: not loaded").  The helper's child is the zombie; the
# helper reaps it before it exits (a parent killed instead would leave it
# to PID 1, which in a container may never reap it).
start_helper "$HELPER_DIR/zombie"
zpid=${bg_pid#* }
bg_pid=${bg_pid%% *}
expect_status 2 "zombie" "$S" status "$zpid"
check "says it exited" same "$dp_err" "ctxshim: status: process $zpid has exited (zombie, not reaped yet)"
release "$bg_pid" "$bg_go"
check "the zombie helper exits 0" same "$?" 0
check "the zombie is reaped" test ! -e "/proc/$zpid"

# A kernel thread (kthreadd, 2, where the pid namespace shows kernel
# threads; else any): "cannot tell", said as ctxdump says it (old: exit 1,
# "library: not loaded").  PF_KTHREAD is in the flags, the 7th field after
# the ")" that ends comm.
kthread=
for d in /proc/2 /proc/[0-9]*; do
	f=$(sed 's/.*) //' "$d/stat" 2>/dev/null | awk '{ print $7 }')
	case $f in
	'' | *[!0-9]*) continue ;;
	esac
	if [ $((f & 0x00200000)) -ne 0 ]; then
		kthread=${d#/proc/}
		break
	fi
done
if [ -n "$kthread" ]; then
	expect_status 2 "kernel thread" "$S" status "$kthread"
	check "says it is one" same "$dp_err" \
		"ctxshim: status: process $kthread is a kernel thread: it has no user-space memory to load the shim into"
	check "and reports nothing" same "$dp_out" ""
else
	echo "# no kernel thread in this pid namespace: not checked"
fi

# A plain process: nothing loaded, no context.
start_blocked sh -c "$DP_BLOCKER"
expect_status 1 "plain process" "$S" status "$bg_pid"
check "not loaded" contains "$dp_out" "library:  not loaded"
check "no context" contains "$dp_out" "context:  none"
check "process line" contains "$dp_out" "process:  $bg_pid (sh)"
expect_status 1 "leading zeros (old: does not exist)" "$S" status "00$bg_pid"
check "the same process" contains "$dp_out" "process:  $bg_pid (sh)"
for o in "-p $bg_pid" "-p$bg_pid" "--pid=$bg_pid" "--pid $bg_pid" "-- $bg_pid"; do
	# shellcheck disable=SC2086 # the option and its argument, split
	expect_status 1 "status $o" "$S" status $o
	check "status $o: the process" contains "$dp_out" "process:  $bg_pid"
done
expect_status 64 "-p and an operand" "$S" status -p "$bg_pid" "$bg_pid"
check "says why" contains "$dp_err" "unexpected argument '$bg_pid' (the process id is given with --pid)"
expect_status 64 "-p without a pid" "$S" status -p
check "getopt's message" contains "$dp_err" "ctxshim: status: option requires an argument -- 'p'"
release "$bg_pid" "$bg_go"

# A thread id is no process id (old: reported as process TID).
start_helper "${HELPER_DIR}/threads" --wait 2
tid=${bg_pid#* }
tid=${tid%% *}
bg_pid=${bg_pid%% *}
expect_status 2 "a thread id" "$S" status "$tid"
check "names its process" same "$dp_err" \
	"ctxshim: status: $tid is a thread of process $bg_pid, not a process; ask about process $bg_pid"
release "$bg_pid" "$bg_go"

# A program names itself: its comm and its library's path are escaped
# like the context's strings (old: printed raw, terminal escapes and all).
cp /bin/sh "$(printf 'x\033[2Jy')" || exit 1
mkdir "$(printf 'lib\033]0;t\007')" || exit 1
printf 'int dp_fake;\n' >fake.c
${CC:-cc} -shared -fPIC -o "$(printf 'lib\033]0;t\007')/libctxshim.so" fake.c || exit 1
start_blocked env LD_PRELOAD="${dp_base_preload:+$dp_base_preload:}$dp_tmp/$(printf 'lib\033]0;t\007')/libctxshim.so" \
	"./$(printf 'x\033[2Jy')" -c "$DP_BLOCKER"
expect_status 0 "escape bytes in comm and library path" "$S" status "$bg_pid"
check "comm escaped" contains "$dp_out" "process:  $bg_pid (x\\x1b[2Jy)"
check "library path escaped" contains "$dp_out" "library:  $dp_tmp/lib\\x1b]0;t\\x07/libctxshim.so"
check "no raw escape byte" not_contains "$dp_out" "$(printf '\033')"
release "$bg_pid" "$bg_go"

# The same for what ctxdump escapes beyond control bytes (old: printed
# raw): a C1 control and an RLO in comm, a tag character and a byte that
# is not UTF-8 in the library path.
cp /bin/sh "$(printf 'x\302\233\342\200\256y')" || exit 1
mkdir "$(printf 'lib\363\240\200\201\377')" || exit 1
cp "$(printf 'lib\033]0;t\007')/libctxshim.so" "$(printf 'lib\363\240\200\201\377')/" || exit 1
start_blocked env LD_PRELOAD="${dp_base_preload:+$dp_base_preload:}$dp_tmp/$(printf 'lib\363\240\200\201\377')/libctxshim.so" \
	"./$(printf 'x\302\233\342\200\256y')" -c "$DP_BLOCKER"
expect_status 0 "C1, RLO, tag character, invalid UTF-8 in comm and library path" "$S" status "$bg_pid"
check "comm: C1 and RLO escaped" contains "$dp_out" "process:  $bg_pid (x\\xc2\\x9b\\xe2\\x80\\xaey)"
check "library path: tag character and \\xff escaped" contains "$dp_out" \
	"library:  $dp_tmp/lib\\xf3\\xa0\\x80\\x81\\xff/libctxshim.so"
release "$bg_pid" "$bg_go"

# Another writer's context (an SDK), no shim: decoded, strings escaped.
esc=$(printf 'svc\033[31m\134')
start_helper "$W" othersdk 1.2.3 "$esc"
expect_status 1 "an SDK's context, no shim" "$S" status "$bg_pid"
check "not loaded" contains "$dp_out" "library:  not loaded"
check "publisher from telemetry.distro.*" contains "$dp_out" \
	"context:  /memfd:OTEL_CTX (deleted) at 0x"
check "published by" contains "$dp_out" ", published by othersdk 1.2.3"
check "control bytes and backslash escaped" contains "$dp_out" 'service:  svc\x1b[31m\x5c'
check "instance id" contains "$dp_out" "instance: 0f0e0d0c-0b0a-4908-8706-050403020100"
release "$bg_pid" "$bg_go"

# The context's strings are escaped as ctxdump escapes them
# (tools/ctxdump/output.c output_cp_escaped()), each byte as \xNN: C1
# controls, format characters that reorder or hide text, bytes that are
# not well-formed UTF-8; other characters stay as they are (old: only C0,
# DEL and backslash were escaped).
esc=$(printf 'c1\302\233 rlo\342\200\256 tag\363\240\200\201 ff\377 ov\300\257 sur\355\240\200 e\303\251 he\327\251 emoji\360\237\230\200 .')
start_helper "$W" othersdk 1.2.3 "$esc"
expect_status 1 "a context with characters ctxdump escapes" "$S" status "$bg_pid"
check "C1 control escaped" contains "$dp_out" 'service:  c1\xc2\x9b '
check "RLO escaped" contains "$dp_out" ' rlo\xe2\x80\xae '
check "tag character escaped" contains "$dp_out" ' tag\xf3\xa0\x80\x81 '
check "byte ff escaped" contains "$dp_out" ' ff\xff '
check "overlong form escaped" contains "$dp_out" ' ov\xc0\xaf '
check "surrogate escaped" contains "$dp_out" ' sur\xed\xa0\x80 '
check "e acute, Hebrew and an emoji kept" contains "$dp_out" \
	"$(printf ' e\303\251 he\327\251 emoji\360\237\230\200 .')"
release "$bg_pid" "$bg_go"

# A stand-in libctxshim.so (no code) plus a context that names ctxshim.
mkdir fake
${CC:-cc} -shared -fPIC -o fake/libctxshim.so fake.c || exit 1
fake_preload=${dp_base_preload:+$dp_base_preload:}$dp_tmp/fake/libctxshim.so
start_helper env LD_PRELOAD="$fake_preload" "$W" ctxshim 7.7.7 my-service
expect_status 0 "loaded and active" "$S" status "$bg_pid"
check "library path" contains "$dp_out" "library:  $dp_tmp/fake/libctxshim.so"
check "version from the context" contains "$dp_out" "version:  7.7.7"
check "active" contains "$dp_out" "state:    active"
check "service" contains "$dp_out" "service:  my-service"
release "$bg_pid" "$bg_go"

# Unknown fields that are groups (wire types 3/4), one nested in another,
# are stepped over as ctxdump's reader does (pb_next_field(); old:
# "malformed protobuf"): in the Resource and at the end of the payload.
start_helper env LD_PRELOAD="$fake_preload" "$W" ctxshim 7.7.7 grouped --group
expect_status 0 "unknown group fields, nested" "$S" status "$bg_pid"
check "groups stepped over: active" contains "$dp_out" "state:    active"
check "groups stepped over: the fields after them" contains "$dp_out" "service:  grouped"
release "$bg_pid" "$bg_go"

# A payload malformed after its first attributes (here: it ends inside
# a group) is malformed as a whole, as ctxdump reads it (old: the
# attributes before the bad field were shown as the context).
start_helper env LD_PRELOAD="$fake_preload" "$W" ctxshim 7.7.7 app --open-group
expect_status 0 "a group without its end tag" "$S" status "$bg_pid"
check "unterminated group: malformed" contains "$dp_out" \
	"unreadable: the process context payload is malformed protobuf"
release "$bg_pid" "$bg_go"

# Field number 0 and a varint above 64 bits are refused as ctxdump's
# reader refuses them (pb_next_field(), pb_get_varint()).
for bad in --field-zero --long-varint; do
	start_helper env LD_PRELOAD="$fake_preload" "$W" ctxshim 7.7.7 app "$bad"
	expect_status 0 "$bad" "$S" status "$bg_pid"
	check "$bad: malformed" contains "$dp_out" \
		"unreadable: the process context payload is malformed protobuf"
	release "$bg_pid" "$bg_go"
done

start_helper env LD_PRELOAD="$fake_preload" "$W" othersdk 1.2.3 app
expect_status 0 "loaded, context by someone else" "$S" status "$bg_pid"
check "passive, says who published" contains "$dp_out" \
	"state:    passive (the process context was published by othersdk 1.2.3)"
check "version unknown (not our library file)" contains "$dp_out" "version:  unknown"
release "$bg_pid" "$bg_go"

start_helper env LD_PRELOAD="$fake_preload" "$W" ctxshim 7.7.7 app --unfinished
expect_status 0 "context never completed" "$S" status "$bg_pid"
check "state unknown, with the reason" contains "$dp_out" \
	"state:    unknown (the process context is being written)"
release "$bg_pid" "$bg_go"

# CTXSHIM_DISABLE=no (or 0, false, off) does not disable the shim: it is
# not the reason for a missing context.
start_blocked env LD_PRELOAD="$fake_preload" CTXSHIM_DISABLE=no sh -c "$DP_BLOCKER"
expect_status 0 "loaded, no context, CTXSHIM_DISABLE=no" "$S" status "$bg_pid"
check "not blamed on CTXSHIM_DISABLE=no" contains "$dp_out" \
	"state:    passive (no process context; the shim's log says why"
release "$bg_pid" "$bg_go"

# A value with a newline is one entry of the environment: the line after
# it is not a CTXSHIM_DISABLE of its own.
start_blocked env LD_PRELOAD="$fake_preload" DP_NOTE="x
CTXSHIM_DISABLE=1" sh -c "$DP_BLOCKER"
expect_status 0 "loaded, no context, CTXSHIM_DISABLE=1 inside another value" "$S" status "$bg_pid"
check "not blamed on another variable's value" contains "$dp_out" \
	"state:    passive (no process context; the shim's log says why"
release "$bg_pid" "$bg_go"

# The real shim.
start_blocked "$S" run --service-name status-test -- sh -c "$DP_BLOCKER"
expect_status 0 "real shim loaded" "$S" status "$bg_pid"
check "library path" contains "$dp_out" "library:  $lib"
check "version" contains "$dp_out" "version:  $version"
case $dp_out in
*"state:    active"*)
	ok "real shim: active"
	check "service name from --service-name" contains "$dp_out" "service:  status-test"
	check "published by ctxshim" contains "$dp_out" "published by ctxshim $version"
	;;
*) check "real shim: a state is reported" contains "$dp_out" "state:    passive" ;;
esac
release "$bg_pid" "$bg_go"

LD_PRELOAD=${dp_base_preload:+$dp_base_preload:}$lib
export LD_PRELOAD
start_blocked env CTXSHIM_DISABLE=1 sh -c "$DP_BLOCKER"
expect_status 0 "real shim, disabled" "$S" status "$bg_pid"
check "passive because of CTXSHIM_DISABLE" contains "$dp_out" \
	"state:    passive (no process context; CTXSHIM_DISABLE is on"
release "$bg_pid" "$bg_go"

# The shim publishes in its constructor, the program after it: two.
start_helper "$W" othersdk 1.2.3 app
expect_status 0 "shim and another writer" "$S" status "$bg_pid"
case $dp_out in
*"published by ctxshim"*)
	check "active: ours is one of them" contains "$dp_out" "state:    active"
	check "warns about two contexts" contains "$dp_err" "has 2 OTEL_CTX mappings"
	;;
*) check "the other writer's context is shown" contains "$dp_out" "published by othersdk" ;;
esac
release "$bg_pid" "$bg_go"
unset LD_PRELOAD

# Another user cannot read root's maps: exit 2 with a hint.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	start_blocked sh -c "$DP_BLOCKER"
	chmod 755 "$dp_tmp"
	expect_status 2 "unprivileged user on a root process" \
		setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
		"$S" status "$bg_pid"
	check "names the file and the fix" contains "$dp_err" \
		"cannot read /proc/$bg_pid/maps (run as the process owner or root)"
	release "$bg_pid" "$bg_go"
fi

# The maps can be read but not the memory: root without CAP_SYS_PTRACE on
# another user's process here, the owner itself under Yama's
# kernel.yama.ptrace_scope=1.  The context is "unreadable", said why (old:
# dash exited 2 at the failed redirection in pctx_read, printing nothing).
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
		env LD_PRELOAD="$lib" sleep 60 &
	np=$!
	dp_pids="$dp_pids $np"
	i=0
	while [ $i -lt 1000 ] && ! grep -q OTEL_CTX "/proc/$np/maps" 2>/dev/null; do
		sleep 0.01
		i=$((i + 1))
	done
	noptrace() { setpriv --inh-caps=-sys_ptrace --bounding-set=-sys_ptrace "$@"; }
	# shellcheck disable=SC2016 # expanded by that sh
	if noptrace cat "/proc/$np/maps" >/dev/null 2>&1 &&
		! noptrace sh -c 'true <"$1"' sh "/proc/$np/mem" 2>/dev/null; then
		expect_status 0 "maps readable, memory not" noptrace "$S" status "$np"
		check "the context is unreadable, and why" contains "$dp_out" \
			"unreadable: cannot open /proc/$np/mem (it needs ptrace access"
		check "the state says it cannot tell" contains "$dp_out" "state:    unknown"
		# root already: the capability is what is missing (old: "run as
		# root")
		check "the hint names CAP_SYS_PTRACE" contains "$dp_out" \
			"ptrace access: root with CAP_SYS_PTRACE"
	else
		echo "# maps and memory equally readable without CAP_SYS_PTRACE here"
	fi
	kill "$np" 2>/dev/null
fi

dp_finish
