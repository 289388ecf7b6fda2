#!/bin/sh
# Fails when a C source or header of the tree is not as clang-format 14
# would write it (.clang-format at the top): keeps whole files clean, so
# that formatting a change touches only the change.
# usage: format.sh CLANG_FORMAT SRCDIR
set -eu
cf=$1 src=$2
cd "$src"
if [ -e .git ] && command -v git >/dev/null 2>&1; then
	files=$(git ls-files '*.c' '*.h')
else
	files=$(find preload hooks proc-context tools test bench -name '*.[ch]' | sort)
fi
# One process for all (one per file takes ~30 s): each place that differs
# is reported as file:line:col.
# shellcheck disable=SC2086
if ! "$cf" --style=file --dry-run -Werror $files; then
	echo "not clang-format clean: run $cf -i on the files above" >&2
	exit 1
fi
