#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# ctxshim run, check and env: the shim reaches dynamic programs (seen in
# their /proc/self/maps), the variables are set and appended to, pid,
# signals and exit status pass through, and programs the shim cannot load
# into (static, musl, 32-bit, other machine, setuid/setgid, scripts for
# those) are refused with a reason and exit 126, unless --force.

. "$(dirname "$0")/deploy-lib.sh"

S=$CTXSHIM_CMD
lib=$CTXSHIM_LIB
cd "$dp_tmp" || exit 1
want_preload=${dp_base_preload:+$dp_base_preload:}$lib
LD_PRELOAD=$dp_base_preload
export LD_PRELOAD
[ -n "$LD_PRELOAD" ] || unset LD_PRELOAD

# ------------------------------------------------------------ usage

expect_status 64 "no command" "$S"
check "usage error says Try --help" \
	contains "$dp_err" "Try 'ctxshim --help' for more information."
check "usage error is prefixed" contains "$dp_err" "ctxshim: no command specified"
expect_status 64 "unknown command" "$S" frobnicate
check "names it" same "$dp_err" "ctxshim: unknown command 'frobnicate'
Try 'ctxshim --help' for more information."
# An option before the command is an option, with getopt's messages and
# where it goes (old: "unknown command '--service-name'").
expect_status 64 "a long option before the command" "$S" --service-name svc run true
check "unrecognized option, and where options go" same "$dp_err" "ctxshim: unrecognized option '--service-name' (options follow the command: ctxshim run [options] -- <command>)
Try 'ctxshim --help' for more information."
expect_status 64 "a short option before the command" "$S" -nsvc run true
check "invalid option, its first letter" contains "$dp_err" \
	"ctxshim: invalid option -- 'n' (options follow the command"
expect_status 0 "-- before the command" "$S" -- version
check "runs it" contains "$dp_out" "library: "
expect_status 64 "run without a command" "$S" run
expect_status 64 "run with an unknown option" "$S" run --bogus -- true
check "names the option" contains "$dp_err" "unrecognized option '--bogus'"
expect_status 64 "option without its argument" "$S" run --log
# Short options bundled as util-linux takes them, with getopt(3)'s
# messages for the letters that are no option (old: "unrecognized option
# '-fn'" for every bundle, '-nsvc' too).
expect_status 0 "bundled flag and option: -fn NAME" "$S" run -fn 'b svc' -- env
check "-fn sets the service name" contains "$dp_out" "
OTEL_SERVICE_NAME=b svc
"
expect_status 0 "arguments attached: -fnsvc -rk=v -lrel.log" \
	"$S" run -fnsvc -rk=v -lrel.log env
check "-fnsvc" contains "$dp_out" "
OTEL_SERVICE_NAME=svc
"
check "-rk=v" contains "$dp_out" "
OTEL_RESOURCE_ATTRIBUTES=k=v
"
check "-lrel.log" contains "$dp_out" "
CTXSHIM_LOG=$dp_tmp/rel.log
"
expect_status 0 "an attached argument may start with a dash" "$S" env --env-file -n-x
check "-n-x" contains "$dp_out" "OTEL_SERVICE_NAME=-x"
expect_status 64 "an unknown letter in a bundle" "$S" run -fx -- true
check "names the letter" contains "$dp_err" "ctxshim: run: invalid option -- 'x'"
expect_status 64 "an unknown short option" "$S" run -x -- true
check "names the letter" contains "$dp_err" "ctxshim: run: invalid option -- 'x'"
expect_status 64 "a dash in a bundle is no --" "$S" run -f- true
check "names the dash" contains "$dp_err" "ctxshim: run: invalid option -- '-'"
expect_status 64 "a bundle without its last option's argument" "$S" run -fn
check "names the option, after the command" same "$dp_err" "ctxshim: run: option requires an argument -- 'n'
Try 'ctxshim --help' for more information."
# The same errors of the other commands, and those of an option's value,
# name the command too (old: "ctxshim: option ...", as if it were an
# option of ctxshim itself).
expect_status 64 "env --log without its argument" "$S" env --log
check "names env" contains "$dp_err" "ctxshim: env: option '--log' requires an argument"
expect_status 64 "systemd-dropin --root without its argument" "$S" systemd-dropin x --root
check "names systemd-dropin" contains "$dp_err" \
	"ctxshim: systemd-dropin: option '--root' requires an argument"
expect_status 64 "preload --root without its argument" "$S" preload status --root
check "names preload" contains "$dp_err" "ctxshim: preload: option '--root' requires an argument"
expect_status 64 "run --log=" "$S" run --log= -- true
check "names run" contains "$dp_err" "ctxshim: run: option '--log' requires a non-empty argument"
expect_status 0 "env takes bundles too" "$S" env --env-file -nsvc
check "env -nsvc" contains "$dp_out" "OTEL_SERVICE_NAME=svc"
expect_status 64 "env has no -f" "$S" env -fn svc
check "names the letter" contains "$dp_err" "ctxshim: env: invalid option -- 'f'"
expect_status 64 "status: an unknown option" "$S" status -x 1
check "names the letter" contains "$dp_err" "ctxshim: status: invalid option -- 'x'"
expect_status 0 "run -fV is -f -V" "$S" run -fV touch ran-fV
check "prints the version" contains "$dp_out" "ctxshim from ctxshim "
check "and runs nothing" test ! -e ran-fV
expect_status 0 "version --help is help" "$S" version --help
check "prints the usage" contains "$dp_out" " ctxshim version"
# -V wherever -h is taken, as util-linux does (old: a usage error after
# check, status, preload and systemd-dropin).
for a in check status preload 'preload status' systemd-dropin version; do
	# shellcheck disable=SC2086 # the command and its action
	expect_status 0 "$a -V" "$S" $a -V
	check "$a -V: the version" contains "$dp_out" "ctxshim "
done
# -h and -V bundled: the first of them wins, as getopt(3) hands them to
# util-linux's tools, before the command too (old: check -Vh, status -Vh,
# preload -hV, version -hV and ctxshim -hV were usage errors).
for a in '' run check status preload 'preload status' systemd-dropin env version; do
	# shellcheck disable=SC2086 # the command and its action
	expect_status 0 "${a:-ctxshim} -hV is -h" "$S" $a -hV
	check "${a:-ctxshim} -hV: the usage" contains "$dp_out" "Usage:"
	# shellcheck disable=SC2086
	expect_status 0 "${a:-ctxshim} -Vh is -V" "$S" $a -Vh
	check "${a:-ctxshim} -Vh: the version" same "$dp_out" "ctxshim from ctxshim $("$S" -V | sed 's/.* //')"
done
expect_status 0 "status -Vp1 is -V" "$S" status -Vp1
check "status -Vp1: the version" contains "$dp_out" "ctxshim from ctxshim "
# Help and version that cannot be written fail (old: exit 0, and
# run -V went on to run the command), in ctxshim's name as util-linux
# says it (old: "cat: write error: ...", "dash: 1: printf: printf: I/O
# error").
# shellcheck disable=SC2016 # expanded by that sh
for a in --help -V version 'run -V touch ran-V' 'env -V'; do
	expect_status 1 "$a to a full device" sh -c 'exec "$0" $1 >/dev/full' "$S" "$a"
	check "$a: says so" same "$dp_err" "ctxshim: write error: No space left on device"
	expect_status 1 "$a to a closed standard output" sh -c 'exec "$0" $1 >&-' "$S" "$a"
	check "$a: says so" same "$dp_err" "ctxshim: write error"
done
check "run -V ran nothing" test ! -e ran-V
# The same for the commands whose output is their result (old: exit 0
# and "dash: 1: printf: printf: I/O error", so that a full disk left an
# empty --env-file taken as written).
# shellcheck disable=SC2016 # expanded by that sh
for a in env 'env --env-file' 'systemd-dropin --print x.service'; do
	expect_status 1 "$a to a full device" sh -c 'exec "$0" $1 >/dev/full' "$S" "$a"
	check "$a: says so" same "$dp_err" "ctxshim: write error: No space left on device"
	expect_status 1 "$a to a closed standard output" sh -c 'exec "$0" $1 >&-' "$S" "$a"
	check "$a: says so" same "$dp_err" "ctxshim: write error"
done
# check and status answer with their exit status: a report that cannot be
# written is "cannot tell" (2), not yes or no (old: exit 0 or 1 after
# "printf: I/O error").  check sh is yes; a missing library and a process
# without the shim (this shell, run without it) are no.
# shellcheck disable=SC2016 # expanded by that sh
for a in 'check sh' "status $$"; do
	for l in "$lib" /nonexistent/libctxshim.so; do
		expect_status 2 "$a to a full device" env CTXSHIM_LIB="$l" \
			sh -c 'exec "$0" $1 >/dev/full' "$S" "$a"
		check "$a: says so" same "$dp_err" "ctxshim: write error: No space left on device"
		expect_status 2 "$a to a closed standard output" env CTXSHIM_LIB="$l" \
			sh -c 'exec "$0" $1 >&-' "$S" "$a"
		check "$a: says so" same "$dp_err" "ctxshim: write error"
	done
done
expect_status 64 "malformed --resource" "$S" run --resource novalue -- true
# Entries the shim's parser would reject, and with them the whole
# variable (old: accepted, the valid k dropped too, silently).
expect_status 64 "bad percent-escape in --resource" \
	"$S" run -r 'k=caf%C3%A9,x=%zz' -- true
check "names the entry and the escape" contains "$dp_err" \
	"invalid resource attribute 'x=%zz': bad percent-escape \"%zz\""
expect_status 64 "truncated percent-escape" "$S" run -r 'k=%4' -- true
expect_status 64 "%00" "$S" run -r 'k=a%00b' -- true
expect_status 64 "not UTF-8 once decoded" "$S" run -r 'k=%C3' -- true
check "says why" contains "$dp_err" "'k=%C3': the value is not UTF-8 once decoded"
expect_status 64 "blank key" "$S" run -r ' =v' -- true
expect_status 64 "env checks it too" "$S" env -r 'x=%zz'
expect_status 0 "valid escapes pass" "$S" run -r 'k=caf%C3%A9,e=a%3Db%2Cc' -- true
expect_status 64 "empty --service-name" "$S" run --service-name= -- true
check "names run" contains "$dp_err" "ctxshim: run: the service name must not be empty"
expect_status 0 "--help" "$S" --help
check "--help shows the synopsis" contains "$dp_out" " ctxshim run [options] [--] <command>"
check "--help ends with the man page" contains "$dp_out" "For more details see ctxshim(1)"
expect_status 0 "--version" "$S" --version
check "--version format" contains "$dp_out" "ctxshim from ctxshim "
# help, documented (old: it worked, but neither ctxshim(1) nor --help
# named it, and "help run" printed the help too); no operand, as version.
expect_status 0 "help" "$S" help
check "help is --help" same "$dp_out" "$("$S" --help)"
check "--help names it" contains "$dp_out" " ctxshim help
"
check "ctxshim(1) names it" contains "$(cat "$CTXSHIM_SRCDIR/doc/ctxshim.1")" ".B ctxshim help
"
expect_status 0 "help -V is -V" "$S" help -V
check "help -V: the version" contains "$dp_out" "ctxshim from ctxshim "
expect_status 64 "help with an operand" "$S" help run
check "names it" same "$dp_err" "ctxshim: help: unexpected argument 'run'
Try 'ctxshim --help' for more information."
# Other options in getopt's words, as check and status say them (old:
# "help: unexpected argument '-x'").
expect_status 64 "help with an option" "$S" help -x
check "refuses it as getopt" same "$dp_err" "ctxshim: help: invalid option -- 'x'
Try 'ctxshim --help' for more information."
expect_status 64 "version with a long option" "$S" version --bogus
check "refuses it as getopt" same "$dp_err" "ctxshim: version: unrecognized option '--bogus'
Try 'ctxshim --help' for more information."
expect_status 0 "version" "$S" version
check "version names the library" contains "$dp_out" "library: $lib"

# ------------------------------------------------------------ dynamic

expect_status 0 "run /bin/true" "$S" run -- /bin/true
expect_status 0 "run cat /proc/self/maps" "$S" run -- cat /proc/self/maps
check "the shim is mapped in the program" contains "$dp_out" " $lib"
expect_status 0 "run without -- (first non-option ends the options)" \
	"$S" run cat /proc/self/maps
check "the shim is mapped" contains "$dp_out" " $lib"

expect_status 64 "a blank --resource" "$S" run -r ' ,	' -- true
check "says it is empty" contains "$dp_err" "ctxshim: run: empty --resource"
# blank members are skipped, as the shim skips them
expect_status 0 "run sets the variables" "$S" run --service-name 'my svc' \
	-r 'a=1, ,b=2' --resource=c=3 --log rel.log --events /tmp/ev.log -- env
env_out=$dp_out
check "LD_PRELOAD" contains "$env_out" "
LD_PRELOAD=$want_preload
"
check "OTEL_SERVICE_NAME" contains "$env_out" "OTEL_SERVICE_NAME=my svc"
check "OTEL_RESOURCE_ATTRIBUTES" contains "$env_out" "OTEL_RESOURCE_ATTRIBUTES=a=1,b=2,c=3"
check "CTXSHIM_LOG made absolute" contains "$env_out" "CTXSHIM_LOG=$dp_tmp/rel.log"
check "CTXSHIM_EVENTS" contains "$env_out" "CTXSHIM_EVENTS=/tmp/ev.log"
expect_status 0 "--log stderr stays stderr" "$S" run --log stderr -- env
check "CTXSHIM_LOG=stderr" contains "$dp_out" "CTXSHIM_LOG=stderr"
# The other words the shim reads as stderr or off (stderr in any case, the
# boolean words) pass as they are (old: made "$PWD/1", a file named "1"
# in the working directory, the file the shim itself no longer makes of
# CTXSHIM_LOG=1).
for w in STDERR 1 Yes true on 0 no FALSE off; do
	expect_status 0 "--log $w and --events $w" "$S" run --log "$w" --events="$w" -- env
	check "CTXSHIM_LOG=$w" contains "$dp_out" "
CTXSHIM_LOG=$w
"
	check "CTXSHIM_EVENTS=$w" contains "$dp_out" "
CTXSHIM_EVENTS=$w
"
	check "no file $w" test ! -e "$w"
done
expect_status 0 "--log ./1 is the file" "$S" run --log ./1 -- env
check "CTXSHIM_LOG=$dp_tmp/./1" contains "$dp_out" "CTXSHIM_LOG=$dp_tmp/./1"
rm -f 1
# Only the command loads the shim, not the awk that ctxshim runs just
# before its exec (old: three processes logged "active" for one command).
expect_status 0 "--log stderr, one command" "$S" run --log stderr -- /bin/true
check "only the command logs" same \
	"$(printf '%s\n' "$dp_err" | sed -n 's/^ctxshim\[\([0-9]*\)\].*/\1/p' |
		sort -u | wc -l | tr -d ' ')" 1

OTEL_RESOURCE_ATTRIBUTES=deployment.environment.name=test,service.version=1
export OTEL_RESOURCE_ATTRIBUTES
expect_status 0 "--resource appends" "$S" run -r k=v -- env
check "existing attributes first" contains "$dp_out" \
	"OTEL_RESOURCE_ATTRIBUTES=deployment.environment.name=test,service.version=1,k=v"
expect_status 0 "--resource overrides a key" "$S" run -r service.version=2 -- env
check "the old value of that key is gone" contains "$dp_out" \
	"OTEL_RESOURCE_ATTRIBUTES=deployment.environment.name=test,service.version=2
"
# A member of --resource after a blank (the shim trims it) sets its key too.
expect_status 0 "--resource overrides a key after a blank" "$S" run -r 'k=v, service.version=2' -- env
check "the old value of that key is gone" contains "$dp_out" \
	"OTEL_RESOURCE_ATTRIBUTES=deployment.environment.name=test,k=v, service.version=2
"
unset OTEL_RESOURCE_ATTRIBUTES

# An existing LD_PRELOAD is kept, first, and both libraries load.
printf 'int dp_other_marker = 1;\n' >other.c
if ${CC:-cc} -shared -fPIC -o "$dp_tmp/libother.so" other.c; then
	LD_PRELOAD="${dp_base_preload:+$dp_base_preload }$dp_tmp/libother.so"
	export LD_PRELOAD
	expect_status 0 "existing LD_PRELOAD: env" "$S" run -- env
	check "existing LD_PRELOAD kept, shim appended" contains "$dp_out" \
		"LD_PRELOAD=$LD_PRELOAD:$lib"
	expect_status 0 "existing LD_PRELOAD: maps" "$S" run -- cat /proc/self/maps
	check "the other library is mapped" contains "$dp_out" " $dp_tmp/libother.so"
	check "the shim is mapped" contains "$dp_out" " $lib"
	LD_PRELOAD=${dp_base_preload:+$dp_base_preload:}$dp_tmp/libother.so:$lib
	expect_status 0 "shim already in LD_PRELOAD" "$S" run -- env
	check "not added twice" contains "$dp_out" "
LD_PRELOAD=$LD_PRELOAD
"
	LD_PRELOAD=$dp_base_preload
	[ -n "$LD_PRELOAD" ] || unset LD_PRELOAD
else
	fail "cannot build a test library with ${CC:-cc}"
fi

# Another copy of the shim (another path) in LD_PRELOAD: of two copies in one
# process only the first loaded publishes, so ours takes its place, and the
# user is told.
mkdir -p "$dp_tmp/copy"
cp "$lib" "$dp_tmp/copy/libctxshim.so"
LD_PRELOAD="${dp_base_preload:+$dp_base_preload }$dp_tmp/copy/libctxshim.so"
export LD_PRELOAD
expect_status 0 "another libctxshim.so in LD_PRELOAD: env" "$S" run -- env
check "the other copy is replaced by the shim" contains "$dp_out" "
LD_PRELOAD=$want_preload
"
check "says it replaced it" contains "$dp_err" \
	"LD_PRELOAD names another libctxshim.so ($dp_tmp/copy/libctxshim.so): replaced by $lib"
expect_status 0 "another libctxshim.so in LD_PRELOAD: maps" "$S" run -- cat /proc/self/maps
check "the other copy is not mapped" test -z "$(printf '%s\n' "$dp_out" | grep "$dp_tmp/copy/")"
check "the shim is active: it published its OTEL_CTX mapping" contains "$dp_out" "OTEL_CTX"
expect_status 0 "env replaces it too" "$S" env --env-file
check "env: LD_PRELOAD" contains "$dp_out" "LD_PRELOAD=$want_preload"
# With the shim's own entry after it: one entry, in the first one's place.
LD_PRELOAD="${dp_base_preload:+$dp_base_preload }$dp_tmp/copy/libctxshim.so $lib"
expect_status 0 "another libctxshim.so and the shim in LD_PRELOAD" "$S" run -- env
check "the shim once, in the other copy's place" contains "$dp_out" "
LD_PRELOAD=$want_preload
"
LD_PRELOAD=$dp_base_preload
[ -n "$LD_PRELOAD" ] || unset LD_PRELOAD

# The same file under another path (an install symlink) is not another
# copy: the loader maps it once, so nothing is replaced and nobody is warned.
mkdir -p "$dp_tmp/link"
ln -s "$lib" "$dp_tmp/link/libctxshim.so"
LD_PRELOAD="${dp_base_preload:+$dp_base_preload }$dp_tmp/link/libctxshim.so"
export LD_PRELOAD
expect_status 0 "the shim under another path in LD_PRELOAD: env" "$S" run -- env
check "LD_PRELOAD is left as it was" contains "$dp_out" "
LD_PRELOAD=$LD_PRELOAD
"
check "no warning about another copy" test -z "$(printf '%s\n' "$dp_err" | grep 'another libctxshim.so')"
expect_status 0 "the shim under another path in LD_PRELOAD: maps" "$S" run -- cat /proc/self/maps
check "the shim is active: it published its OTEL_CTX mapping" contains "$dp_out" "OTEL_CTX"
LD_PRELOAD=$dp_base_preload
[ -n "$LD_PRELOAD" ] || unset LD_PRELOAD

# ------------------------------------------------------------ pass-through

expect_status 3 "exit status passes through" "$S" run -- sh -c 'exit 3'
expect_status 143 "death by SIGTERM passes through" "$S" run -- sh -c 'kill -TERM $$'
# shellcheck disable=SC2016 # a literal $HOME
expect_status 0 "arguments pass through unchanged" "$S" run -- \
	printf '[%s]' 'a b' '' '*' '-n' '$HOME'
check "argument bytes" same "$dp_out" "[a b][][*][-n][\$HOME]"

# Same pid: the process we started is the program, shim loaded, and a
# signal sent to that pid reaches the program itself.
start_blocked "$S" run -- sh -c "$DP_BLOCKER"
check "run execs: the pid runs the command" \
	contains "$(tr '\0' ' ' <"/proc/$bg_pid/cmdline")" "sh -c echo ready"
check "run execs: shim in that pid" contains "$(cat "/proc/$bg_pid/maps")" " $lib"
kill -TERM "$bg_pid"
wait "$bg_pid"
check "SIGTERM to the pid ends the command (143)" same "$?" 143

# ------------------------------------------------------------ refusals

expect_status 127 "command not found" "$S" run -- no-such-command-dp
check "says so as a shell" same "$dp_err" "ctxshim: no-such-command-dp: not found"
expect_status 127 "check: command not found" "$S" check no-such-command-dp
check "says so too" same "$dp_err" "ctxshim: no-such-command-dp: not found"
printf '#!/bin/sh\n' >noexec
chmod 644 noexec
expect_status 126 "not executable" "$S" run -- ./noexec
# In the words of ctxshim-entrypoint, and with its status (old: "No such
# file or directory" where the entrypoint said "not found").
for c in '127 no-such-command-dp' '127 ./no-such-dp' '126 ./noexec'; do
	expect_status "${c%% *}" "run ${c#* }" "$S" run -- "${c#* }"
	run_err=${dp_err#ctxshim: }
	expect_status "${c%% *}" "entrypoint ${c#* }" "$CTXSHIM_ENTRYPOINT" "${c#* }"
	check "${c#* }: the same message" same "$run_err" "${dp_err#ctxshim-entrypoint: }"
done
mkdir adir
expect_status 126 "a directory is not a command" "$S" run -- ./adir
check "says so like env(1), and why" same "$dp_err" "ctxshim: ./adir: Permission denied (a directory)"
expect_status 126 "check: a directory" "$S" check ./adir
# Found in PATH, like execvp(): EACCES, not "not found" (old: 127).
mkdir -p pdir/adircmd
expect_status 126 "a directory in PATH" env PATH="$dp_tmp/pdir:$PATH" "$S" run -- adircmd
check "names what was found" same "$dp_err" "ctxshim: $dp_tmp/pdir/adircmd: Permission denied (a directory)"
mkdir -p pdir2 && printf '#!/bin/sh\necho ran\n' >pdir2/adircmd && chmod 755 pdir2/adircmd
expect_status 0 "a command after a directory of its name in PATH" \
	env PATH="$dp_tmp/pdir:$dp_tmp/pdir2:$PATH" "$S" run -- adircmd
check "runs it" same "$dp_out" "ran"
# Two of that name that cannot be run: the first is the one named.
mkdir -p pdir3 && printf '#!/bin/sh\n' >pdir3/adircmd && chmod 644 pdir3/adircmd
expect_status 126 "two in PATH that cannot be run" \
	env PATH="$dp_tmp/pdir:$dp_tmp/pdir3:$PATH" "$S" run -- adircmd
check "names the first" same "$dp_err" "ctxshim: $dp_tmp/pdir/adircmd: Permission denied (a directory)"
# A file that has x bits but cannot be run: to root that means a noexec
# mount; to another user, too few x bits or the mount.
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null &&
	unshare -m true 2>/dev/null; then
	mkdir nxdir
	# shellcheck disable=SC2016 # expanded by that sh
	expect_status 126 "an x bit on a noexec mount" unshare -m sh -c \
		'mount -t tmpfs -o noexec dp-nx "$1" && cp /bin/true "$1/t" &&
		exec "$2" run -- "$1/t"' sh "$dp_tmp/nxdir" "$S"
	check "asks about the mount" same "$dp_err" \
		"ctxshim: $dp_tmp/nxdir/t: Permission denied (on a file system mounted noexec?)"
	# the same for a script's interpreter there (old: only "which is not
	# executable", as for a file without x bits)
	printf '#!%s/nxdir/sh\ntrue\n' "$dp_tmp" >s-nxinterp && chmod 755 s-nxinterp
	# shellcheck disable=SC2016 # expanded by that sh
	expect_status 126 "an interpreter on a noexec mount" unshare -m sh -c \
		'mount -t tmpfs -o noexec dp-nx "$1" && cp /bin/sh "$1/sh" &&
		exec "$2" run -- ./s-nxinterp' sh "$dp_tmp/nxdir" "$S"
	check "asks about the interpreter's mount" same "$dp_err" \
		"ctxshim: cannot execute ./s-nxinterp: it names the interpreter $dp_tmp/nxdir/sh, which is not executable (on a file system mounted noexec?)"
	if command -v setpriv >/dev/null; then
		chmod 755 "$dp_tmp"
		cp /bin/true owner-x && chmod 744 owner-x
		expect_status 126 "x for its owner only, run by another user" \
			setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
			"$S" run -- ./owner-x
		check "names both causes" same "$dp_err" \
			"ctxshim: ./owner-x: Permission denied (not executable by uid $(id -u nobody), or on a file system mounted noexec)"
	fi
else
	echo "# not root or no mount namespace: no noexec mount"
fi
# An empty PATH element is the current directory, as execvp() takes it.
mkdir -p pcwd && printf '#!/bin/sh\necho ran here\n' >pcwd/herecmd && chmod 755 pcwd/herecmd
for c in "$S run --" "$CTXSHIM_ENTRYPOINT"; do
	# shellcheck disable=SC2086 # the command and its options
	expect_status 0 "${c##*/}: an empty PATH element" \
		env -C pcwd PATH=":$PATH" $c herecmd
	check "${c##*/}: runs it" same "$dp_out" "ran here"
done
# check: a command the shim could load into, but no library to load
# (old: "ok", while run exits 125).
expect_status 1 "check: library missing" env CTXSHIM_LIB=/nonexistent/libctxshim.so \
	"$S" check sh
check "says so" contains "$dp_out" "sh: missing: /nonexistent/libctxshim.so does not exist"
# The build tree's script uses the build tree's library without
# CTXSHIM_LIB (the README's path from quick start); a copy elsewhere
# (as installed) never does.
expect_status 0 "build tree: version" env -u CTXSHIM_LIB "$S" version
check "names the build tree's library" contains "$dp_out" "library: $lib"
# shellcheck disable=SC2016 # for the command's shell
expect_status 0 "build tree: run" env -u CTXSHIM_LIB "$S" run -- sh -c 'echo "$LD_PRELOAD"'
check "preloads the build tree's library" same "$dp_out" "$want_preload"
cp "$S" ./ctxshim-copy
expect_status 0 "a copy: version" env -u CTXSHIM_LIB ./ctxshim-copy version
case $dp_out in
*"library: $lib"*) fail "a copy does not use the build tree's library" ;;
*) ok "a copy does not use the build tree's library" ;;
esac
expect_status 125 "library missing" env CTXSHIM_LIB=/nonexistent/libctxshim.so \
	"$S" run -- /bin/true
check "names the library" contains "$dp_err" "/nonexistent/libctxshim.so"

printf 'int main(void) { return 5; }\n' >prog.c
if ${CC:-cc} -static -o static prog.c 2>/dev/null; then
	expect_status 126 "static binary refused" "$S" run -- ./static
	check "reason: statically linked, the command named once" same "$dp_err" \
		"ctxshim: cannot load the shim into ./static: it is statically linked (no PT_INTERP): no dynamic loader runs that could load libctxshim.so
ctxshim: use --force to run it anyway"
	check "hint: --force" contains "$dp_err" "use --force"
	expect_status 1 "check: static" "$S" check ./static
	check "check names the verdict, and the command once (old: twice)" same "$dp_out" \
		"./static: static: it is statically linked (no PT_INTERP): no dynamic loader runs that could load libctxshim.so"
	expect_status 5 "--force runs it anyway" "$S" run --force -- ./static
	# A script whose interpreter is static, directly and through env.
	printf '#!%s/static\n' "$dp_tmp" >s-static
	printf '#!/usr/bin/env static\n' >s-env-static
	printf '#!%s/s-static\n' "$dp_tmp" >s-nested
	chmod 755 s-static s-env-static s-nested
	expect_status 126 "#! to a static binary refused" "$S" run -- ./s-static
	check "reason names the script and interpreter" contains "$dp_err" \
		"./s-static: it is a script for $dp_tmp/static; $dp_tmp/static is statically linked"
	expect_status 126 "#!/usr/bin/env static refused" env PATH="$dp_tmp:$PATH" \
		"$S" run -- ./s-env-static
	expect_status 126 "#! to a #! to a static binary refused" "$S" run -- ./s-nested
else
	fail "gcc -static failed (libc6-dev installed?)"
fi
if ${CC:-cc} -o dynamic prog.c; then
	expect_status 5 "a dynamic build of the same program runs" "$S" run -- ./dynamic
fi

printf '#!/bin/sh\ngrep -c libctxshim /proc/$$/maps\n' >s-sh
chmod 755 s-sh
expect_status 0 "#!/bin/sh script runs with the shim" "$S" run -- ./s-sh
check "the script's shell has the shim mapped" test "${dp_out:-0}" -ge 1
printf '#!/usr/bin/env sh\ngrep -c libctxshim /proc/$$/maps\n' >s-envsh
chmod 755 s-envsh
expect_status 0 "#!/usr/bin/env sh script runs with the shim" "$S" run -- ./s-envsh
# A chain of #! scripts: the kernel follows five (fs/exec.c, exec_binprm),
# and check as many; a sixth is one too many for both (old: five was).
mkdir chain
printf '#!/bin/true\n' >chain/c1
for n in 2 3 4 5 6; do
	printf '#!%s/chain/c%d\n' "$dp_tmp" $((n - 1)) >chain/c$n
done
chmod 755 chain/c*
check "control: the kernel runs five levels of #!" ./chain/c5
if ./chain/c6 2>/dev/null; then
	fail "control: the kernel refuses six levels of #!"
else
	ok "control: the kernel refuses six levels of #!"
fi
expect_status 0 "check: five levels of #!" "$S" check ./chain/c5
expect_status 2 "check: six levels of #!" "$S" check ./chain/c6
check "says so" contains "$dp_out" "$dp_tmp/chain/c1: too many levels of #! interpreters"
# env options that take LD_PRELOAD away from the program, and ones that
# do not (the word after -u or -C is not the program).
printf '#!/usr/bin/env -S -i sh\ngrep -c libctxshim /proc/$$/maps || :\n' >s-envi
chmod 755 s-envi
expect_status 126 "#!/usr/bin/env -S -i sh refused" "$S" run -- ./s-envi
check "reason: env -i" contains "$dp_err" \
	"./s-envi: it is a script for /usr/bin/env -i, which starts sh without the LD_PRELOAD"
expect_status 1 "check: cleared" "$S" check ./s-envi
check "check names the verdict" contains "$dp_out" "./s-envi: cleared:"
expect_status 0 "--force runs it, without the shim" "$S" run --force -- ./s-envi
check "the script's shell has no shim" test "$dp_out" = 0
for w in '-iS sh' '-S - sh' '-S --ignore-environment sh' '-S -v -i sh' \
	'-S -u LD_PRELOAD sh' '-S -uLD_PRELOAD sh' '-S --unset=LD_PRELOAD sh' \
	'-S --unset LD_PRELOAD sh' '-S LD_PRELOAD= sh' '-S -0iv sh' \
	'-S --split-string=-i sh' '-S --ignore-e sh' '-S --u=LD_PRELOAD sh' \
	'-S --un LD_PRELOAD sh' '-S --s=-i sh' '-S -- LD_PRELOAD= sh'; do
	printf '#!/usr/bin/env %s\ntrue\n' "$w" >s-envw
	chmod 755 s-envw
	expect_status 1 "check: #!/usr/bin/env $w is cleared" "$S" check ./s-envw
done
# env applies -i and -u before NAME=VALUE: an LD_PRELOAD given back
# (-S expands ${LD_PRELOAD} from env's own environment) keeps the shim.
for w in "-S LD_PRELOAD=\${LD_PRELOAD} sh" \
	"-S -i PATH=/usr/bin:/bin LD_PRELOAD=\${LD_PRELOAD} sh" \
	"-S -u LD_PRELOAD LD_PRELOAD=\${LD_PRELOAD}:/nonexistent.so sh"; do
	printf '#!/usr/bin/env %s\ngrep -c libctxshim /proc/$$/maps || :\n' "$w" >s-envw
	chmod 755 s-envw
	expect_status 0 "#!/usr/bin/env $w runs with the shim" "$S" run -- ./s-envw
	check "#!/usr/bin/env $w: the shell has the shim mapped" \
		test "${dp_out:-0}" -ge 1
done
printf '#!/usr/bin/env -S -u DEBUG -C / LD_PRELOAD_X=1 %s/static\n' "$dp_tmp" >s-envu
chmod 755 s-envu
if [ -x static ]; then
	expect_status 1 "check: #!/usr/bin/env -S -u NAME -C DIR PROG judges PROG" \
		"$S" check ./s-envu
	check "PROG is static, not NAME" contains "$dp_out" "./s-envu: static:"
fi
printf '#!/usr/bin/env -S -u PATH sh -i\ntrue\n' >s-envu2
chmod 755 s-envu2
expect_status 0 "check: #!/usr/bin/env -S -u PATH sh -i is ok (-i is sh's)" \
	"$S" check ./s-envu2
# Abbreviated long options as getopt_long(3) takes them, and "--".
for w in '-S --u PATH sh' '-S --c / sh' '-S --ignore-s sh' '-S -- sh -i'; do
	printf '#!/usr/bin/env %s\ntrue\n' "$w" >s-envw
	chmod 755 s-envw
	expect_status 0 "check: #!/usr/bin/env $w is ok" "$S" check ./s-envw
done

# Crafted ELF headers (elf64 in deploy-lib.sh).
elf64 musl 3 62 /lib/ld-musl-x86_64.so.1
expect_status 126 "musl interpreter refused" "$S" run -- ./musl
check "reason: musl" contains "$dp_err" "linked with musl (/lib/ld-musl-x86_64.so.1)"
expect_status 1 "check: musl" "$S" check ./musl
elf64 glibc-hdr 3 62 /lib64/ld-linux-x86-64.so.2
expect_status 0 "check: crafted glibc header is fine" "$S" check ./glibc-hdr
elf64 aarch64 3 183 /lib/ld-linux-aarch64.so.1
expect_status 126 "another machine refused" "$S" run -- ./aarch64
check "reason: machine" contains "$dp_err" "built for another machine (ELF e_machine 183"
elf64 static-hdr 2 62
expect_status 1 "check: crafted header without PT_INTERP is static" "$S" check ./static-hdr
elf64 object 1 62
expect_status 1 "check: ELF relocatable is not a program" "$S" check ./object
head -c 100 glibc-hdr >truncated
chmod 755 truncated
expect_status 1 "check: truncated program headers" "$S" check ./truncated
# A PT_INTERP not all in the file: its size 2^63 (p_filesz at 96), its
# offset 2^63 or 64 KiB (p_offset at 72).  Old: "ok" with no interpreter.
for w in '96 \0\0\0\0\0\0\0\200' '72 \0\0\0\0\0\0\0\200' '72 \0\0\1\0\0\0\0\0'; do
	cp glibc-hdr interp-out
	# shellcheck disable=SC2059 # the bytes are the format
	printf "${w#* }" | dd of=interp-out bs=1 seek="${w%% *}" conv=notrunc 2>/dev/null
	expect_status 1 "check: PT_INTERP out of the file ($w)" "$S" check ./interp-out
	check "says so ($w)" contains "$dp_out$dp_err" "has an invalid PT_INTERP"
done
# One whose path does not end in a NUL, its size one short (p_filesz at
# 96): the kernel refuses to run it (ENOEXEC, binfmt_elf.c).  Old: "ok".
cp glibc-hdr interp-nonul
le 27 8 | dd of=interp-nonul bs=1 seek=96 conv=notrunc 2>/dev/null
expect_status 1 "check: PT_INTERP without its NUL" "$S" check ./interp-nonul
check "says so (no NUL)" contains "$dp_out$dp_err" "has an invalid PT_INTERP"
# The sizes at the kernel's limits (binfmt_elf.c: 2 to PATH_MAX bytes):
# "/" and its NUL; a path of 4095 bytes (slashes before the loader's) and
# its NUL; one byte more.
elf64 interp2 3 62 /
expect_status 126 "check: a PT_INTERP of 2 bytes" "$S" check ./interp2
check "names it" same "$dp_err" \
	"ctxshim: cannot execute ./interp2: it names the interpreter /, which is a directory"
interp_long=$(printf '%4069s' '' | tr ' ' /)lib64/ld-linux-x86-64.so.2
elf64 interp4096 3 62 "$interp_long"
expect_status 0 "check: a PT_INTERP of 4096 bytes" "$S" check ./interp4096
elf64 interp4097 3 62 "/$interp_long"
expect_status 1 "check: a PT_INTERP of 4097 bytes" "$S" check ./interp4097
check "says so (4097 bytes)" contains "$dp_out" "has an invalid PT_INTERP"
# A NUL inside the path (at 126, after "/lib64"): the kernel opens the
# path up to it (old: "/lib64ld-linux-x86-64.so.2", every NUL dropped).
cp glibc-hdr interp-nul
printf '\0' | dd of=interp-nul bs=1 seek=126 conv=notrunc 2>/dev/null
# That directory cannot be executed (EACCES).
expect_status 126 "check: PT_INTERP with a NUL inside" "$S" check ./interp-nul
check "names the path up to it" same "$dp_err" \
	"ctxshim: cannot execute ./interp-nul: it names the interpreter /lib64, which is a directory"
# A newline is part of the path (old: the path cut at it, "/lib64"); no
# file has that name (ENOENT).
cp glibc-hdr interp-nl
printf '\n' | dd of=interp-nl bs=1 seek=126 conv=notrunc 2>/dev/null
expect_status 127 "check: PT_INTERP with a newline inside" "$S" check ./interp-nl
check "names the path with it, escaped" contains "$dp_err" \
	"the interpreter /lib64\\x0ald-linux-x86-64.so.2, which does not exist"
# An interpreter that is not there (a program of another system, a #!
# line with DOS line endings, a typo) makes exec fail: run and check say
# so with exec's status, the entrypoint too (old: check "ok", and run
# and the entrypoint let the shell say "ctxshim: 107: exec: ./x: not
# found" of a file that is there).
elf64 nointerp 3 62 /no/such/ld-linux-x86-64.so.2
printf '#!/no/such/interp\ntrue\n' >s-nointerp
printf '#!/bin/sh\r\ntrue\r\n' >s-crlf
printf '#!/usr/bin/env sh\r\ntrue\r\n' >s-crlfenv
printf '#!%s\ntrue\n' "$dp_tmp" >s-dirinterp
printf '#!%s/noexec\ntrue\n' "$dp_tmp" >s-noexecinterp
printf '#!%s/s-nointerp\ntrue\n' "$dp_tmp" >s-nested
# The #! line is the file's bytes: a terminal escape in it is shown
# escaped, as ctxdump shows the target's (old: sent to the terminal raw).
printf '#!/no/\033[2J\001such\ntrue\n' >s-escinterp
# A backslash alone, too (as \x5c: else \x1b in a name reads as an escape).
printf '#!/no/back\\slash\ntrue\n' >s-bsinterp
chmod 755 s-nointerp s-crlf s-crlfenv s-dirinterp s-noexecinterp s-nested s-escinterp \
	s-bsinterp
run_nl='
'
for c in "127 nointerp:it names the interpreter /no/such/ld-linux-x86-64.so.2, which does not exist" \
	"127 s-nointerp:it names the interpreter /no/such/interp, which does not exist" \
	"127 s-crlf:it names the interpreter /bin/sh with a carriage return after it, which does not exist (a #! line with DOS line endings?)" \
	"127 s-crlfenv:it is a script for /usr/bin/env sh with a carriage return after it, which env(1) does not find (a #! line with DOS line endings?)" \
	"126 s-dirinterp:it names the interpreter $dp_tmp, which is a directory" \
	"126 s-noexecinterp:it names the interpreter $dp_tmp/noexec, which is not executable" \
	"127 s-nested:it is a script for $dp_tmp/s-nointerp; $dp_tmp/s-nointerp names the interpreter /no/such/interp, which does not exist" \
	"127 s-escinterp:it names the interpreter /no/\\x1b[2J\\x01such, which does not exist" \
	"127 s-bsinterp:it names the interpreter /no/back\\x5cslash, which does not exist"; do
	c_st=${c%% *}
	c_f=${c#* }
	c_f=${c_f%%:*}
	c_why=${c#*:}
	expect_status "$c_st" "run: $c_f: its interpreter cannot be executed" "$S" run -- "./$c_f"
	check "run: $c_f: says why" same "$dp_err" "ctxshim: cannot execute ./$c_f: $c_why"
	expect_status "$c_st" "check: $c_f: its interpreter cannot be executed" "$S" check "./$c_f"
	check "check: $c_f: says why" same "$dp_err" "ctxshim: cannot execute ./$c_f: $c_why"
	check "check: $c_f: no verdict" same "$dp_out" ""
	expect_status "$c_st" "entrypoint: $c_f: its interpreter cannot be executed" \
		"$CTXSHIM_ENTRYPOINT" "./$c_f"
	check "entrypoint: $c_f: says why, last" same "${dp_err##*"$run_nl"}" \
		"ctxshim-entrypoint: cannot execute ./$c_f: $c_why"
done
# An interpreter that is there, under a name with an escape: check's
# answer on standard output shows it escaped too.
ln -s /bin/sh "$dp_tmp/sh$(printf '\033')[2J"
printf '#!%s/sh\033[2J\ntrue\n' "$dp_tmp" >s-escok
chmod 755 s-escok
expect_status 0 "check: an interpreter with an escape in its name" "$S" check ./s-escok
check "check: the answer shows it escaped" contains "$dp_out" \
	"./s-escok: ok: it is a script for $dp_tmp/sh\\x1b[2J; "
# Program headers the kernel does not load (fs/binfmt_elf.c,
# load_elf_phdrs): entries of other than 56 bytes (e_phentsize at 54), a
# table over 64 KiB (e_phnum at 56, 1171 entries, the table in the file).
# Old: "ok", having read all of the table that the header claims.  1170
# entries, 65520 bytes, some kernels load: mainline's load_elf_phdrs also
# refuses a table larger than a page (ELF_MIN_ALIGN), others do not (a
# 6.18 build ran 1170), and exec itself then says so.
cp glibc-hdr phent64
le 64 2 | dd of=phent64 bs=1 seek=54 conv=notrunc 2>/dev/null
expect_status 1 "check: program headers of 64 bytes" "$S" check ./phent64
check "says so" same "$dp_out" "./phent64: notexec: it has an invalid program header table (entries of 64 bytes; the kernel loads those of 56 only)"
expect_status 126 "run refuses it" "$S" run -- ./phent64
check "with the reason" contains "$dp_err" "cannot load the shim into ./phent64: it has an invalid program header table"
for n in 1170 1171; do
	cp glibc-hdr phnum$n
	le $n 2 | dd of=phnum$n bs=1 seek=56 conv=notrunc 2>/dev/null
	dd if=/dev/zero of=phnum$n bs=1 count=0 seek=$((64 + n * 56)) 2>/dev/null
done
expect_status 0 "check: a table of 65520 bytes" "$S" check ./phnum1170
expect_status 1 "check: a table of 65576 bytes" "$S" check ./phnum1171
check "says so" same "$dp_out" "./phnum1171: notexec: it has an invalid program header table (65576 bytes; the kernel loads 64 KiB at most)"
{
	bytes 127 69 76 70 1 1 1 0 0 0 0 0 0 0 0 0
	le 2 2; le 3 2; le 1 4; le 0 4; le 52 4; le 0 4; le 0 4
	le 52 2; le 32 2; le 0 2; le 40 2; le 0 2; le 0 2
} >elf32
chmod 755 elf32
expect_status 126 "32-bit ELF refused" "$S" run -- ./elf32
check "reason: 32-bit" contains "$dp_err" "is a 32-bit program"
printf '#!%s/elf32\n' "$dp_tmp" >s-elf32
chmod 755 s-elf32
expect_status 126 "#! to a 32-bit program refused" "$S" run -- ./s-elf32

# setuid/setgid: secure-execution mode only when the ids change.
cp /bin/true sbin-true
chmod 4755 sbin-true
expect_status 0 "setuid to oneself is not secure mode: allowed" "$S" run -- ./sbin-true
if [ "$(id -u)" = 0 ]; then
	cp /bin/true suid-true
	chown nobody suid-true && chmod 4755 suid-true
	expect_status 126 "setuid copy refused" "$S" run -- ./suid-true
	check "reason: setuid" contains "$dp_err" "is setuid (owner uid $(id -u nobody))"
	cp /bin/true sgid-true
	chgrp "$(id -g nobody)" sgid-true && chmod 2755 sgid-true
	expect_status 126 "setgid copy refused" "$S" run -- ./sgid-true
	check "reason: setgid" contains "$dp_err" "is setgid"
	chmod 2745 sgid-true
	expect_status 0 "setgid bit without group x is no setgid" "$S" check ./sgid-true
	expect_status 0 "--force runs the setuid copy" "$S" run --force -- ./suid-true
	# Unprivileged user running a setuid-root copy.
	chmod 755 "$dp_tmp"
	cp /bin/true suid-root
	chmod 4755 suid-root
	if command -v setpriv >/dev/null; then
		expect_status 126 "setuid-root copy refused for a user" \
			setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
			env CTXSHIM_LIB="$lib" "$S" run -- ./suid-root
		check "reason: setuid root" contains "$dp_err" "is setuid (owner uid 0)"
	fi
else
	echo "# not root: setuid-to-another-user cases not run"
fi

# ------------------------------------------------------------ the caller's environment

# The wrapper's own variables (lib, command, add, ctx_...) never reach the
# command: a variable of the caller's with the same name keeps its value.
expect_status 0 "the caller's variables named like the wrapper's" \
	env lib=mylib command=build add=yes ctx_found=x "$S" run -- env
for v in lib=mylib command=build add=yes ctx_found=x; do
	check "keeps $v" contains "$dp_out" "$v"
done
# Names that no shell variable can have (docker and Kubernetes allow them;
# dash does not import them).
expect_status 0 "names that are not shell identifiers" \
	env spring.profiles.active=prod log-level=debug "$S" run -- env
check "keeps spring.profiles.active" contains "$dp_out" "spring.profiles.active=prod"
check "keeps log-level" contains "$dp_out" "log-level=debug"
# Those go through env(1), which would take a command named with "=" for
# one more variable and run its first argument instead (old: "env: 'arg':
# No such file or directory", exit 127; "./a=b rm x" ran rm): it runs,
# without them, and says so; the entrypoint too.
# shellcheck disable=SC2016 # expanded by the script
printf '#!/bin/sh\necho "ran $0 $*"; env\n' >eq=cmd
chmod 755 eq=cmd
for c in "ctxshim:$S run --" "ctxshim-entrypoint:$CTXSHIM_ENTRYPOINT"; do
	# shellcheck disable=SC2086 # the command and its options
	expect_status 0 "${c%%:*}: a command with = in its name, names that are not identifiers" \
		env spring.profiles.active=prod log-level=debug ${c#*:} ./eq=cmd arg
	check "${c%%:*}: runs it, with its argument" contains "$dp_out" "ran ./eq=cmd arg"
	check "${c%%:*}: says which variables it lost" same "$dp_err" \
		"${c%%:*}: warning: ./eq=cmd runs without spring.profiles.active log-level: variables of such names go through env(1), which would take a command name with \"=\" for one more"
	check "${c%%:*}: with the shim" contains "$dp_out" "LD_PRELOAD=$want_preload"
done
# The loader splits LD_PRELOAD at spaces and colons only: a name with a tab
# in it is one (missing) name, and the shim is not listed yet.
tab=$(printf '\t')
expect_status 0 "a tab in LD_PRELOAD" \
	env "LD_PRELOAD=${dp_base_preload:+$dp_base_preload:}no-such-dp.so$tab$lib" \
	"$S" run -- cat /proc/self/maps
check "the shim is mapped" contains "$dp_out" " $lib"
# A name without a slash is looked up in the loader's path, never in the
# current directory, even where a libctxshim.so is.
dp_before=$dp_failed # the subshell fails only for its own checks
(
	cd "${lib%/*}" || exit 1
	expect_status 0 "a bare libctxshim.so in LD_PRELOAD, where the library is" \
		env "LD_PRELOAD=${dp_base_preload:+$dp_base_preload:}libctxshim.so" \
		"$S" run -- cat /proc/self/maps
	check "the shim is mapped" contains "$dp_out" " $lib"
	[ "$dp_failed" = "$dp_before" ]
) || fail "a bare libctxshim.so in LD_PRELOAD"
# libc before the shim: RTLD_NEXT does not find libc's functions from the
# shim, which must not abort the program (old: SIGABRT before main()).
if [ -z "$dp_base_preload" ]; then
	expect_status 0 "libc before the shim in LD_PRELOAD" \
		env LD_PRELOAD=libc.so.6 "$S" run -- /bin/echo runs
	check "the command ran" same "$dp_out" runs
fi
# A library the loader would ignore (with a message into the command's
# output) is refused like a missing one.
expect_status 125 "not a library" env CTXSHIM_LIB=/etc/passwd "$S" run -- /bin/true
check "says so" contains "$dp_err" "/etc/passwd is not a 64-bit little-endian ELF file"
expect_status 1 "check: not a library" env CTXSHIM_LIB=/etc/passwd "$S" check /bin/true
check "says missing, and why" contains "$dp_out" "missing: /etc/passwd is not a 64-bit little-endian ELF file"
# A path with a blank: the loader would look for its pieces, in every
# program.  run refuses it; check says why run would (old: "ok", exit 0),
# and env prints no LD_PRELOAD that splits (old: printed it, exit 0).
mkdir -p "$dp_tmp/a dir"
cp "$lib" "$dp_tmp/a dir/libctxshim.so"
blank=$dp_tmp/a\ dir/libctxshim.so
expect_status 125 "run: a library path with a blank" env CTXSHIM_LIB="$blank" "$S" run -- /bin/true
check "says so" same "$dp_err" \
	"ctxshim: the library path must not contain blanks or colons (the loader splits LD_PRELOAD and /etc/ld.so.preload there): $blank"
expect_status 1 "check: a library path with a blank" env CTXSHIM_LIB="$blank" "$S" check /bin/true
check "says missing, and why" same "$dp_out" \
	"/bin/true: missing: $blank has blanks or colons, where the loader splits LD_PRELOAD"
for o in "" --env-file; do
	# shellcheck disable=SC2086 # no option, or one
	expect_status 1 "env${o:+ $o}: a library path with a blank" \
		env CTXSHIM_LIB="$blank" "$S" env $o
	check "env${o:+ $o}: says so" same "$dp_err" \
		"ctxshim: the library path must not contain blanks or colons (the loader splits LD_PRELOAD and /etc/ld.so.preload there): $blank"
	check "env${o:+ $o}: prints nothing" same "$dp_out" ""
done
expect_status 0 "entrypoint: a library path with a blank" \
	env CTXSHIM_LIB="$blank" "$CTXSHIM_ENTRYPOINT" /bin/true
check "entrypoint: says so" same "$dp_err" \
	"ctxshim-entrypoint: the library path $blank contains blanks or colons, not using it
ctxshim-entrypoint: starting /bin/true without the shim"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	cp "$lib" private.so
	chmod 600 private.so
	expect_status 125 "a library the user cannot read" \
		setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
		env CTXSHIM_LIB="$dp_tmp/private.so" "$S" run -- /bin/true
	check "says so" contains "$dp_err" "Permission denied (the library cannot be read by uid"
	expect_status 1 "check: a library the user cannot read" \
		setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
		env CTXSHIM_LIB="$dp_tmp/private.so" "$S" check /bin/true
	check "says which reason" contains "$dp_out" \
		"missing: $dp_tmp/private.so cannot be read by uid $(id -u nobody)"
fi
# An inherited entry the shim rejects would make it ignore the whole
# variable, --resource with it: that entry is left out, with a warning.
expect_status 0 "an inherited resource entry the shim rejects" \
	env 'OTEL_RESOURCE_ATTRIBUTES=team=payments%zz,a=1' "$S" run -r b=2 -- env
check "the rest merged" contains "$dp_out" "OTEL_RESOURCE_ATTRIBUTES=a=1,b=2"
check "says what it left out" contains "$dp_err" "left out 'team=payments%zz'"

# ------------------------------------------------------------ env

expect_status 0 "env" "$S" env -n "it's \"x\"" -r a=b --log x.log
env_out=$dp_out
check "env prints exports" contains "$env_out" "export LD_PRELOAD='$want_preload'"
(
	unset LD_PRELOAD
	eval "$env_out"
	check "exports evaluate to the values" same \
		"$LD_PRELOAD|$OTEL_SERVICE_NAME|$OTEL_RESOURCE_ATTRIBUTES|$CTXSHIM_LOG" \
		"$want_preload|it's \"x\"|a=b|$dp_tmp/x.log"
) || fail "env exports do not evaluate"
expect_status 0 "env --env-file" "$S" env --env-file -n svc
check "env-file lines" same "$dp_out" "LD_PRELOAD=$want_preload
OTEL_SERVICE_NAME=svc"
# Values docker run --env-file (as it is) and systemd's EnvironmentFile=
# (blanks stripped, quotes, escapes) read differently are refused, with
# nothing written; the others are written as they are.
for v in 'a\b' ' svc' 'svc	' '"svc"' "'svc"; do
	expect_status 1 "env --env-file refuses '$v'" "$S" env --env-file -n "$v"
	check "  says why" contains "$dp_err" "the value of OTEL_SERVICE_NAME has a"
	check "  writes nothing" test -z "$dp_out"
done
for v in "svc$(printf '\r')X_INJECTED=1" "sv$(printf '\377')c"; do
	expect_status 1 "env --env-file refuses a carriage return or non-UTF-8" \
		"$S" env --env-file -n "$v"
	check "  says why" contains "$dp_err" "the value of OTEL_SERVICE_NAME has "
	check "  writes nothing" test -z "$dp_out"
done
v='a "b" c;d#e%41'
expect_status 0 "env --env-file keeps '$v'" "$S" env --env-file -n "$v"
check "  as it is" contains "$dp_out" "
OTEL_SERVICE_NAME=$v"
# systemd's own parser of such files, where there is one: the generator of
# environment.d(5) reads them as EnvironmentFile= does (it also expands
# "$", which the value has none of) and prints what it read, quoted.
G=/usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator
if [ -x "$G" ]; then
	mkdir -p "$dp_tmp/xdg/environment.d"
	printf '%s\n' "$dp_out" >"$dp_tmp/xdg/environment.d/ctxshim.conf"
	g_out=$(env -i HOME=/nonexistent XDG_CONFIG_HOME="$dp_tmp/xdg" "$G" |
		grep '^OTEL_SERVICE_NAME=')
	check "  systemd reads it as it is" same \
		"$(eval "$g_out" && printf '%s' "$OTEL_SERVICE_NAME")" "$v"
else
	echo "# skipped: no systemd environment.d generator to read it with"
fi
expect_status 64 "env rejects operands" "$S" env extra

dp_finish
