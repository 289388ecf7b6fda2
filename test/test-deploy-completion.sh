#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# The bash completion (bash-completion/): each file, sourced in bash --norc
# (with bash-completion's framework as well when it is installed, and
# without it), completes the commands, options, pids, files, units and
# commands it should; and it stays in step with the tools: every long
# option that a --help prints is offered where it applies, and every
# option offered is one the tool takes (run with it, it does not answer
# "unrecognized option").  Skips (77) without bash.

. "$(dirname "$0")/deploy-lib.sh"

command -v bash >/dev/null || dp_skip "bash not installed"
comp_dir=$CTXSHIM_SRCDIR/bash-completion
D=$CTXSHIM_BUILDDIR/tools/ctxdump/ctxdump
S=$CTXSHIM_CMD
E=$CTXSHIM_ENTRYPOINT
framework=/usr/share/bash-completion/bash_completion

# drive.bash FRAMEWORK FILE WORD...: what FILE's function gives for the
# command line WORD... (the last word is the one completed, the cursor at
# its end), one per line.  Called outside readline, compopt says so on
# stderr: that line is dropped, any other is an error.
cat >"$dp_tmp/drive.bash" <<'DRIVE'
[[ $1 == 1 ]] && . /usr/share/bash-completion/bash_completion
. "$2" || exit 3
shift 2
COMP_WORDS=("$@")
COMP_CWORD=$(($# - 1))
COMP_LINE="$*"
COMP_POINT=${#COMP_LINE}
spec=$(complete -p "$1") || exit 3
fn=${spec#*-F }
fn=${fn%% *}
"$fn" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}" \
	2> >(grep -v 'compopt: not currently executing completion function' >&2)
((${#COMPREPLY[@]} == 0)) || printf '%s\n' "${COMPREPLY[@]}"
DRIVE

# comp FILE WORD...: sets reply to the completions, one per line.
comp() {
	dp_f=$comp_dir/$1
	shift
	reply=$(bash --norc "$dp_tmp/drive.bash" "$fw" "$dp_f" "$@" 2>"$dp_tmp/comp.err")
	dp_st=$?
	if [ $dp_st -ne 0 ] || [ -s "$dp_tmp/comp.err" ]; then
		fail "completing '$*': exit $dp_st: $(cat "$dp_tmp/comp.err")"
	fi
}

# has WORD: $reply has WORD as a line of its own.
# shellcheck disable=SC2317 # called through check
has() {
	printf '%s\n' "$reply" | grep -qxF -- "$1" && return 0
	printf '  %s\n  has no line: %s\n' "$(printf '%s' "$reply" | tr '\n' ' ')" "$1"
	return 1
}
# lacks WORD
# shellcheck disable=SC2317 # called through check
lacks() {
	printf '%s\n' "$reply" | grep -qxF -- "$1" || return 0
	printf '  has the line: %s\n' "$1"
	return 1
}
# words: $reply sorted on one line.
words() {
	printf '%s\n' "$reply" | sort | tr '\n' ' '
}

mkdir -p "$dp_tmp/files/dir1" "$dp_tmp/root/etc/systemd/system" || exit 1
: >"$dp_tmp/files/rec.prof"
: >"$dp_tmp/root/etc/systemd/system/zzctx-app.service"
: >"$dp_tmp/root/etc/systemd/system/zzctx-app.socket"
# bash-completion's loader finds ctxdump's file for "ctxshim run -- ctxdump"
# here, as it would in completionsdir.
mkdir -p "$dp_tmp/user/completions" &&
	ln -s "$comp_dir"/* "$dp_tmp/user/completions/" || exit 1
BASH_COMPLETION_USER_DIR=$dp_tmp/user
export BASH_COMPLETION_USER_DIR

modes=0
[ -f "$framework" ] && modes="0 1"
[ -f "$framework" ] ||
	echo "# bash-completion not installed: only without its framework (Debian: bash-completion)"
for fw in $modes; do
	m="(framework $fw)"
	comp ctxdump ctxdump ''
	check "ctxdump: subcommands $m" has record
	check "ctxdump: pids $m" has $$
	comp ctxdump ctxdump re
	check "ctxdump re: the two subcommands $m" same "$(words)" "record report "
	comp ctxdump ctxdump --pid ''
	check "ctxdump --pid: pids $m" has $$
	check "ctxdump --pid: no subcommand $m" lacks record
	comp ctxdump ctxdump -p $$ -t ''
	check "ctxdump -p PID -t: its tids $m" has $$
	comp ctxdump ctxdump --sta
	check "ctxdump --sta $m" same "$(words)" "--stack-size --stacks "
	comp ctxdump ctxdump -n ''
	check "ctxdump -n: a number, nothing $m" same "$reply" ""
	comp ctxdump ctxdump record --o
	check "ctxdump record --o $m" same "$reply" --output
	comp ctxdump ctxdump record -o "$dp_tmp/files/re"
	check "ctxdump record -o: files $m" has "$dp_tmp/files/rec.prof"
	comp ctxdump ctxdump record ''
	check "ctxdump record: pids $m" has $$
	comp ctxdump ctxdump report --fo
	check "ctxdump report --fo $m" same "$reply" --folded
	comp ctxdump ctxdump report "$dp_tmp/files/r"
	check "ctxdump report: files $m" has "$dp_tmp/files/rec.prof"
	comp ctxdump ctxdump report --top ''
	check "ctxdump report --top: a number, nothing $m" same "$reply" ""

	comp ctxshim ctxshim ''
	check "ctxshim: commands $m" same "$(words)" \
		"check env help preload run status systemd-dropin version "
	comp ctxshim ctxshim run --f
	check "ctxshim run --f $m" same "$reply" --force
	comp ctxshim ctxshim run bas
	check "ctxshim run CMD $m" has bash
	comp ctxshim ctxshim run -n svc --log=stderr -- bas
	check "ctxshim run OPTIONS -- CMD $m" has bash
	comp ctxshim ctxshim run -fn svc bas
	check "ctxshim run -fn svc CMD $m" has bash
	comp ctxshim ctxshim run --log "$dp_tmp/files/re"
	check "ctxshim run --log: files $m" has "$dp_tmp/files/rec.prof"
	comp ctxshim ctxshim check --h
	check "ctxshim check --h $m" same "$reply" --help
	comp ctxshim ctxshim env --env
	check "ctxshim env --env $m" same "$reply" --env-file
	comp ctxshim ctxshim status ''
	check "ctxshim status: pids $m" has $$
	comp ctxshim ctxshim status --p
	check "ctxshim status --p $m" same "$reply" --pid
	comp ctxshim ctxshim preload ''
	check "ctxshim preload: actions $m" same "$(words)" "install status uninstall "
	comp ctxshim ctxshim preload install --d
	check "ctxshim preload install --d $m" same "$reply" --dry-run
	comp ctxshim ctxshim preload install --root "$dp_tmp/files/d"
	check "ctxshim preload --root: directories $m" same "$reply" "$dp_tmp/files/dir1"
	comp ctxshim ctxshim systemd-dropin --pr
	check "ctxshim systemd-dropin --pr $m" same "$reply" --print
	comp ctxshim ctxshim systemd-dropin --root "$dp_tmp/root" zzctx
	check "ctxshim systemd-dropin --root: its services $m" same "$reply" zzctx-app.service
	comp ctxshim-entrypoint ctxshim-entrypoint --h
	check "ctxshim-entrypoint --h $m" same "$reply" --help
	comp ctxshim-entrypoint ctxshim-entrypoint bas
	check "ctxshim-entrypoint CMD $m" has bash
	comp ctxshim-entrypoint ctxshim-entrypoint -- bas
	check "ctxshim-entrypoint -- CMD $m" has bash
done
# With the framework, the command's own completion (_command_offset).
if [ -f "$framework" ]; then
	fw=1
	comp ctxshim ctxshim run -n svc -- ctxdump rec
	check "ctxshim run -- ctxdump: ctxdump's completion" same "$reply" record
	comp ctxshim-entrypoint ctxshim-entrypoint ctxshim run --for
	check "ctxshim-entrypoint ctxshim: ctxshim's completion" same "$reply" --force
fi

# In step with --help.  help_opts: the long options that the option lines
# of a --help text on stdin define.
help_opts() {
	sed -n 's/^ *\(-[A-Za-z0-9], \)\{0,1\}\(--[a-z][a-z0-9-]*\).*/\2/p' | sort -u
}
# offered FILE WORD...: the options the completion offers there, sorted.
fw=0
[ -f "$framework" ] && fw=1
offered() {
	comp "$@" -
	printf '%s\n' "$reply" | grep -- '^--' | sort -u
}
# in_list WORD LIST
in_list() {
	printf '%s\n' "$2" | grep -qxF -- "$1"
}
# rejects COMMAND...: the tool answers COMMAND with a usage error about the
# option itself (64, "unrecognized", "invalid option", "ambiguous").
rejects() {
	"$@" </dev/null >/dev/null 2>"$dp_tmp/rej"
	[ $? -eq 64 ] && grep -qE 'unrecognized|invalid option|ambiguous' "$dp_tmp/rej"
}

# sync NAME HELP OFFERED EXACT RUN...: every option of HELP is in OFFERED;
# EXACT=1: nothing else is (getopt_long takes a prefix of an option, so a
# wrong one can pass the run); none is rejected by RUN... OPTION.
sync() {
	dp_name=$1 dp_help=$2 dp_offered=$3 dp_exact=$4
	shift 4
	dp_bad=
	for o in $dp_help; do
		in_list "$o" "$dp_offered" || dp_bad="$dp_bad $o"
	done
	check "$dp_name: --help's options offered" same "$dp_bad" ""
	[ "$dp_offered" ] || fail "$dp_name: no option offered"
	dp_bad=
	for o in $dp_offered; do
		if [ "$dp_exact" = 1 ] && ! in_list "$o" "$dp_help"; then
			dp_bad="$dp_bad $o(not in --help)"
		elif [ $# -gt 0 ] && rejects "$@" "$o"; then
			dp_bad="$dp_bad $o"
		fi
	done
	check "$dp_name: offers no option it rejects" same "$dp_bad" ""
}

sync ctxdump "$("$D" --help | help_opts)" "$(offered ctxdump ctxdump)" 1 "$D"
sync "ctxdump record" "$("$D" record --help | help_opts)" \
	"$(offered ctxdump ctxdump record)" 1 "$D" record
sync "ctxdump report" "$("$D" report --help | help_opts)" \
	"$(offered ctxdump ctxdump report)" 1 "$D" report
# The entrypoint takes any other word as the command: no run.
sync ctxshim-entrypoint "$("$E" --help | help_opts)" \
	"$(offered ctxshim-entrypoint ctxshim-entrypoint)" 1

# ctxshim: one --help for all commands.  An option line whose text starts
# with "cmd[, cmd]:" applies to those commands, any other to each command
# whose usage line has "[options]".  --root below a directory that does
# not exist: an option that preload or systemd-dropin took by mistake
# changes nothing on this host.
"$S" --help >"$dp_tmp/help" || fail "ctxshim --help"
with_options=$(sed -n 's/^ ctxshim \([a-z-]*\) \[options\].*/\1/p' "$dp_tmp/help")
check "ctxshim --help: usage lines with [options]" test -n "$with_options"
none=$dp_tmp/no-such-root
for cmd in run check env status preload systemd-dropin version help; do
	case $cmd in
	preload) set -- ctxshim ctxshim preload install ;;
	*) set -- ctxshim ctxshim "$cmd" ;;
	esac
	offers=$(offered "$@")
	want=
	while IFS= read -r line; do
		o=$(printf '%s\n' "$line" | help_opts)
		[ -n "$o" ] || continue
		scope=$(printf '%s\n' "$line" |
			sed -n 's/^ *\(-[A-Za-z0-9], \)\{0,1\}--[a-z0-9-]*\( <[^>]*>\)\{0,1\}  *\([a-z, -]*\): .*/\3/p')
		if [ -n "$scope" ]; then
			case ", $scope," in
			*", $cmd,"*) want="$want $o" ;;
			esac
		elif in_list "$cmd" "$with_options"; then
			want="$want $o"
		fi
	done <"$dp_tmp/help"
	case $cmd in
	preload)
		for action in install uninstall status; do
			sync "ctxshim preload $action" "$want" \
				"$(offered ctxshim ctxshim preload "$action")" 0 \
				"$S" preload "$action" --root="$none"
		done
		;;
	systemd-dropin)
		sync "ctxshim $cmd" "$want" "$offers" 0 "$S" "$cmd" --root="$none"
		;;
	*) sync "ctxshim $cmd" "$want" "$offers" 0 "$S" "$cmd" ;;
	esac
done

dp_finish
