#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# The scripts are POSIX sh: shellcheck (sh dialect) finds nothing in the
# generated ctxshim and ctxshim-entrypoint, in their sources and in the
# deploy tests, nor (bash dialect) in the bash completion; dash, bash
# --posix and (when installed) busybox sh and posh parse them and run a few
# commands; the man pages render without a groff warning and (when
# installed) mandoc -Tlint finds nothing.  Skips (77) only if none
# of shellcheck, a shell, groff or mandoc is installed.
# shellcheck disable=SC2016 # $LD_PRELOAD is for the shell under test

. "$(dirname "$0")/deploy-lib.sh"

src=$CTXSHIM_SRCDIR
scripts="$CTXSHIM_CMD $CTXSHIM_ENTRYPOINT"
tests=$(ls "$src"/test/test-deploy-*.sh)
ran=0

if command -v shellcheck >/dev/null; then
	ran=1
	for f in $scripts; do
		check "shellcheck -s sh ${f##*/}" shellcheck -s sh "$f"
	done
	check "shellcheck common.sh" shellcheck "$src/tools/ctxshim/common.sh"
	for f in "$src"/bash-completion/ctxdump "$src"/bash-completion/ctxshim*; do
		check "shellcheck -s bash ${f##*/} (completion)" shellcheck -s bash "$f"
	done
	# shellcheck disable=SC2086 # a list of files
	(cd "$src/test" && shellcheck -s sh -x deploy-lib.sh ${tests}) >"$dp_tmp/sc" 2>&1
	check "shellcheck the deploy tests" same "$(cat "$dp_tmp/sc")" ""
else
	echo "# shellcheck not installed (Debian: shellcheck)"
fi

for sh in dash "bash --posix" "busybox sh" posh; do
	command -v "${sh%% *}" >/dev/null || continue
	ran=1
	for f in $scripts; do
		# shellcheck disable=SC2086 # "bash --posix" is two words
		check "$sh -n ${f##*/}" $sh -n "$f"
	done
	# shellcheck disable=SC2086
	out=$(CTXSHIM_LIB=$CTXSHIM_LIB $sh "$CTXSHIM_CMD" check /bin/true 2>&1)
	check "$sh runs ctxshim check" contains "$out" "/bin/true: ok:"
	# shellcheck disable=SC2086
	out=$(CTXSHIM_LIB=$CTXSHIM_LIB $sh "$CTXSHIM_CMD" run -- sh -c 'echo "$LD_PRELOAD"' 2>&1)
	check "$sh runs ctxshim run" contains "$out" "$CTXSHIM_LIB"
	# shellcheck disable=SC2086
	out=$(CTXSHIM_LIB=$CTXSHIM_LIB $sh "$CTXSHIM_ENTRYPOINT" sh -c 'echo "$LD_PRELOAD"' 2>&1)
	check "$sh runs ctxshim-entrypoint" contains "$out" "$CTXSHIM_LIB"
done

if command -v groff >/dev/null; then
	ran=1
	for page in "$src"/doc/ctxshim.1 "$src"/doc/ctxshim.7 "$src"/doc/ctxdump.1; do
		groff -man -ww -z -t "$page" >"$dp_tmp/groff" 2>&1
		check "groff -ww ${page##*/}" same "$(cat "$dp_tmp/groff")" ""
		# An escape the tools print as \xNN must render so, not as
		# \\xNN (roff "\e\ex" where "\ex" was meant).
		out=$(groff -man -Tascii -P-cbou -t "$page" 2>/dev/null | grep -n '\\\\x')
		check "${page##*/} renders no \\\\x" same "$out" ""
	done
fi
# mandoc's lint (Debian: mandoc) knows the man(7) conventions groff does
# not check, such as the date of .TH.
if command -v mandoc >/dev/null; then
	ran=1
	for page in "$src"/doc/ctxshim.1 "$src"/doc/ctxshim.7 "$src"/doc/ctxdump.1; do
		mandoc -Tlint -W warning "$page" >"$dp_tmp/mandoc" 2>&1
		check "mandoc -Tlint ${page##*/}" same "$(cat "$dp_tmp/mandoc")" ""
	done
else
	echo "# mandoc not installed: man pages not linted with mandoc -Tlint"
fi

[ $ran = 1 ] || dp_skip "no shellcheck, shell or groff to lint with"
dp_finish
