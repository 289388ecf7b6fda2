#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# 'meson install' into a DESTDIR, then the installed programs run from
# there: the library at its stable path and through the libdir symlink,
# ctxshim with the library path substituted at build time, the entrypoint
# finding the library relative to itself, ctxdump, the man pages rendering
# without a groff warning, and the bash completion in place.

. "$(dirname "$0")/deploy-lib.sh"

: "${CTXSHIM_BUILDDIR:?}" "${DP_PREFIX:?}" "${DP_BINDIR:?}" "${DP_LIBDIR:?}" "${DP_MANDIR:?}"
dest=$dp_tmp/dest
if ! meson install -C "$CTXSHIM_BUILDDIR" --no-rebuild --quiet --destdir "$dest" \
	>"$dp_tmp/install.log" 2>&1; then
	fail "meson install --destdir"
	cat "$dp_tmp/install.log"
	dp_finish
fi
ok "meson install --destdir"

bin=$dest$DP_BINDIR
pkglib=$dest$DP_LIBDIR/ctxshim/libctxshim.so
S=$bin/ctxshim
E=$bin/ctxshim-entrypoint
cd "$dp_tmp" || exit 1
# is32 FILE: an ELF32 file (class byte 1).
# shellcheck disable=SC2317 # called through check
is32() {
	[ "$(od -An -t u1 -j 4 -N 1 "$1" 2>/dev/null | tr -d ' ')" = 1 ]
}
base=${dp_base_preload:+$dp_base_preload:}

check "library at the stable path" test -f "$pkglib"
check "libdir symlink" same "$(readlink "$dest$DP_LIBDIR/libctxshim.so")" ctxshim/libctxshim.so
# The empty 32-bit library where an i386 loader's $LIB points (Debian's
# multiarch and biarch directories, for Debian's libdir).
if [ -n "${CTXSHIM_LIB32-}" ] && [ "$DP_LIBDIR" = "$DP_PREFIX/lib/x86_64-linux-gnu" ]; then
	for d in lib/i386-linux-gnu lib32; do
		check "32-bit library in $d" is32 "$dest$DP_PREFIX/$d/ctxshim/libctxshim.so"
	done
fi
check "ctxshim installed executable" test -x "$S"
check "ctxshim-entrypoint installed executable" test -x "$E"
check "ctxshim mode 0755" same "$(stat -c %a "$S")" 755
check "ctxdump installed" test -x "$bin/ctxdump"
check "library path substituted" grep -q \
	"^ctxshim_default_lib='$DP_LIBDIR/ctxshim/libctxshim.so'\$" "$S"
check "no @VAR@ left in ctxshim" sh -c "! grep -n '@[A-Z_]*@' '$S'"
check "no @VAR@ left in ctxshim-entrypoint" sh -c "! grep -n '@[A-Z_]*@' '$E'"
check "no build tree path in ctxshim, ctxshim-entrypoint" sh -c "! grep -n '$CTXSHIM_BUILDDIR' '$S' '$E'"
check "no source tree path in the library" sh -c "! grep -q '$CTXSHIM_SRCDIR' '$pkglib'"
for page in man1/ctxshim.1 man1/ctxshim-entrypoint.1 man7/ctxshim.7 man1/ctxdump.1; do
	check "man page $page installed" test -f "$dest$DP_MANDIR/$page"
done
# The bash completion, one file named after each command, where
# bash-completion's loader looks for it (none with -Dbash_completion=disabled).
if [ -n "${DP_COMPLETIONSDIR-}" ]; then
	for c in ctxdump ctxshim ctxshim-entrypoint; do
		check "bash completion $c installed" cmp -s "$CTXSHIM_SRCDIR/bash-completion/$c" \
			"$dest$DP_COMPLETIONSDIR/$c"
	done
fi

# The installed programs, run from the DESTDIR.
env -u CTXSHIM_LIB "$S" version >"$dp_tmp/out" 2>&1
check "installed ctxshim names the installed path" contains "$(cat "$dp_tmp/out")" \
	"library: $DP_LIBDIR/ctxshim/libctxshim.so"
expect_status 0 "installed ctxshim --version" "$S" --version
check "version" contains "$dp_out" "ctxshim from ctxshim "
expect_status 0 "installed ctxdump --version" "$bin/ctxdump" --version

CTXSHIM_LIB=$pkglib
export CTXSHIM_LIB
[ -z "$base" ] || { LD_PRELOAD=$dp_base_preload && export LD_PRELOAD; }
expect_status 0 "installed ctxshim run" "$S" run -- cat /proc/self/maps
check "installed library mapped" contains "$dp_out" " $pkglib"
CTXSHIM_LIB=$dest$DP_LIBDIR/libctxshim.so
expect_status 0 "through the libdir symlink" "$S" run -- cat /proc/self/maps
check "the symlink's target is mapped" contains "$dp_out" " $pkglib"
unset CTXSHIM_LIB

# The entrypoint finds the library relative to itself: bindir/../libdir.
case $DP_LIBDIR in
"$DP_PREFIX"/*) rel_ok=1 ;;
*) rel_ok=0 ;;
esac
if [ "$rel_ok" = 1 ] && [ "${DP_BINDIR%/*}" = "$DP_PREFIX" ]; then
	OTEL_SERVICE_NAME=installed-ep
	export OTEL_SERVICE_NAME
	start_blocked "$E" sh -c "$DP_BLOCKER"
	expect_status 0 "installed ctxshim status on the installed entrypoint's program" \
		env CTXSHIM_LIB="$pkglib" "$S" status "$bg_pid"
	check "loaded from the DESTDIR" contains "$dp_out" "library:  $pkglib"
	check "the entrypoint's entry has no /../" sh -c \
		"tr '\\0' '\\n' < /proc/$bg_pid/environ | grep '^LD_PRELOAD=/' | grep -v '/\\.\\./'"
	case $dp_out in
	*"state:    active"*) check "service name" contains "$dp_out" "service:  installed-ep" ;;
	esac
	release "$bg_pid" "$bg_go"
	unset OTEL_SERVICE_NAME
else
	echo "# bindir/libdir not below the prefix: relative lookup not tested"
fi

# Man pages: no groff warnings; the entrypoint page is a .so link.
unset LD_PRELOAD
if command -v groff >/dev/null; then
	for page in man1/ctxshim.1 man7/ctxshim.7 man1/ctxshim-entrypoint.1; do
		(cd "$dest$DP_MANDIR" && groff -man -ww -z -t "$page") >"$dp_tmp/groff" 2>&1
		check "groff -ww: $page" same "$(cat "$dp_tmp/groff")" ""
	done
	(cd "$dest$DP_MANDIR" && groff -man -Tascii -P-bcou man1/ctxshim-entrypoint.1) \
		>"$dp_tmp/page" 2>&1
	check "ctxshim-entrypoint.1 shows ctxshim(1)" grep -q "CONTAINER ENTRYPOINT" "$dp_tmp/page"
else
	echo "# groff not installed: man pages not rendered"
fi

dp_finish
