#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# libctxshim.so built as a distribution package builds it: buildtype plain
# with Debian's hardening flags (a CFLAGS -D_FORTIFY_SOURCE=3 that CPPFLAGS'
# =2 redefines, as dpkg-buildflags gives with DEB_CFLAGS_MAINT_APPEND) and
# Fedora's -flto=auto.  The library must keep the properties of
# symbol-tls.sh and symbols-leak.sh, export what this build's library
# exports, and the header check (test-build-c99) must still build.  Only
# those two targets are compiled (about a minute on 2 cores).

. "$(dirname "$0")/deploy-lib.sh"

: "${CTXSHIM_BUILDDIR:?}"
for p in meson ninja readelf nm; do
	command -v "$p" >/dev/null 2>&1 || dp_skip "$p not found"
done
grep -q 'libasan\.so' "$CTXSHIM_LIB" && dp_skip "sanitizer build"
b=$dp_tmp/build
if ! CFLAGS="-g -O2 -flto=auto -ffat-lto-objects -fstack-protector-strong -fstack-clash-protection -fcf-protection -Wformat -Werror=format-security -D_FORTIFY_SOURCE=3" \
	CPPFLAGS="-Wdate-time -D_FORTIFY_SOURCE=2" \
	LDFLAGS="-Wl,-z,relro -Wl,-z,now -flto=auto" \
	meson setup --buildtype=plain -Di386_stub=disabled -Dbash_completion=disabled \
	"$b" "$CTXSHIM_SRCDIR" >"$dp_tmp/setup.log" 2>&1; then
	fail "meson setup with distribution flags"
	cat "$dp_tmp/setup.log"
	dp_finish
fi
ok "meson setup with distribution flags"
if nice ninja -C "$b" libctxshim.so test/test-build-c99 >"$dp_tmp/build.log" 2>&1; then
	ok "libctxshim.so and test-build-c99 build"
else
	fail "libctxshim.so and test-build-c99 build"
	grep -E 'error|FAILED' "$dp_tmp/build.log"
	dp_finish
fi
lib=$b/libctxshim.so
check "symbol-tls.sh" sh "$CTXSHIM_SRCDIR/test/symbol-tls.sh" readelf "$lib"
check "symbols-leak.sh" sh "$CTXSHIM_SRCDIR/test/symbols-leak.sh" nm "$lib" \
	"$CTXSHIM_SRCDIR/preload/ctxshim.sym"
exports() {
	readelf -W --dyn-syms "$1" | awk 'NR > 3 && $7 != "UND" { print $4, $5, $6, $8 }' | sort
}
check "the same exports as $CTXSHIM_LIB" same "$(exports "$lib")" "$(exports "$CTXSHIM_LIB")"
check "no TEXTREL" sh -c "! readelf -d '$lib' | grep -q TEXTREL"
check "no executable stack" same "$(readelf -W -l "$lib" | awk '$1 == "GNU_STACK" { print $7 }')" RW
dp_finish
