#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# ctxshim preload install|uninstall|status against temporary roots: the
# previous /etc/ld.so.preload comes back byte for byte (and mode), with and
# without a file before; --dry-run changes nothing; an edit made after the
# install survives the uninstall.

. "$(dirname "$0")/deploy-lib.sh"

S=$CTXSHIM_CMD
built_lib=$CTXSHIM_LIB
# The path written into ld.so.preload is the library's path inside the root.
lib=/usr/lib/ctxshim-test/libctxshim.so
CTXSHIM_LIB=$lib
export CTXSHIM_LIB

new_root() {
	root=$dp_tmp/$1
	mkdir -p "$root/etc" "$root${lib%/*}"
	cp "$built_lib" "$root$lib"
	pf=$root/etc/ld.so.preload
}
# A tree listing with checksums: "nothing changed" means equal listings.
snapshot() {
	(cd "$1" && find . -print | sort | while IFS= read -r f; do
		if [ -f "$f" ]; then
			printf '%s %s %s\n' "$f" "$(stat -c %a "$f")" "$(cksum <"$f")"
		else
			printf '%s\n' "$f"
		fi
	done)
}

# ------------------------------------------------------------ no file before

new_root r1
expect_status 1 "status: nothing installed" "$S" preload status --root "$root"
check "says not installed" contains "$dp_out" "not installed"
before=$(snapshot "$root")
expect_status 0 "install --dry-run" "$S" preload install --root "$root" --dry-run
check "dry run says what it would do" contains "$dp_out" "would append $lib to $pf"
check "dry run warns too" contains "$dp_err" "WARNING"
check "dry run changes nothing" same "$(snapshot "$root")" "$before"
expect_status 0 "install" "$S" preload install --root "$root"
check "loud warning on stderr" contains "$dp_err" \
	"ctxshim: WARNING: $pf makes EVERY dynamically linked program"
check "file holds the library" same "$(cat "$pf")" "$lib"
check "file is 0644" same "$(stat -c %a "$pf")" 644
expect_status 0 "status: installed" "$S" preload status --root "$root"
check "status names the entry" contains "$dp_out" "installed: $lib in $pf"
after=$(snapshot "$root")
expect_status 0 "install twice" "$S" preload install --root "$root"
check "second install is a no-op" same "$(snapshot "$root")" "$after"
check "says already" contains "$dp_out" "already loads"
expect_status 0 "uninstall --dry-run" "$S" preload uninstall --root "$root" --dry-run
check "dry run changes nothing" same "$(snapshot "$root")" "$after"
expect_status 0 "uninstall" "$S" preload uninstall --root "$root"
check "file removed again" test ! -e "$pf"
check "root as before" same "$(snapshot "$root" | grep -v '^./var')" \
	"$(printf '%s\n' "$before" | grep -v '^./var')"
check "no state left" test ! -e "$root/var/lib/ctxshim"
expect_status 1 "status after uninstall" "$S" preload status --root "$root"
expect_status 0 "uninstall again is a no-op" "$S" preload uninstall --root "$root"

# ------------------------------------------------------------ file before

# Odd but valid content: two entries on a line, blanks, no final newline,
# a byte that is not UTF-8, and mode 0600.
new_root r2
printf '/usr/lib/libfoo.so  /usr/lib/libbar.so\n\n\t/opt/x/libé\377.so' >"$pf"
chmod 600 "$pf"
cp -p "$pf" "$dp_tmp/r2.orig"
expect_status 0 "install over an existing file" "$S" preload install --root "$root"
{
	cat "$dp_tmp/r2.orig"
	printf '\n%s\n' "$lib"
} >"$dp_tmp/r2.want"
check "entry appended on a new line" cmp "$pf" "$dp_tmp/r2.want"
check "mode kept" same "$(stat -c %a "$pf")" 600
check "backup kept" cmp "$root/var/lib/ctxshim/ld.so.preload.orig" "$dp_tmp/r2.orig"
expect_status 0 "status" "$S" preload status --root "$root"
check "status mentions the backup" contains "$dp_out" "previous file kept in"
expect_status 0 "uninstall" "$S" preload uninstall --root "$root"
check "restored byte for byte" cmp "$pf" "$dp_tmp/r2.orig"
check "mode restored" same "$(stat -c %a "$pf")" 600

# Empty file before: still exists (and empty) afterwards.
new_root r3
: >"$pf"
"$S" preload install --root "$root" >/dev/null 2>&1
check "empty file: just the entry" same "$(cat "$pf")" "$lib"
"$S" preload uninstall --root "$root" >/dev/null 2>&1
check "empty file restored" test -f "$pf" -a ! -s "$pf"

# Edited after the install: uninstall removes only our entry, keeps the
# administrator's line and the backup.
new_root r4
printf '/usr/lib/libfoo.so\n' >"$pf"
"$S" preload install --root "$root" >/dev/null 2>&1
printf '/usr/lib/libnew.so\n' >>"$pf"
expect_status 0 "uninstall after an edit" "$S" preload uninstall --root "$root"
check "only our entry removed" same "$(cat "$pf")" "/usr/lib/libfoo.so
/usr/lib/libnew.so"
check "warns that the file changed" contains "$dp_err" "changed after 'ctxshim preload install'"
check "backup kept" test -f "$root/var/lib/ctxshim/ld.so.preload.orig"
expect_status 1 "status: not installed" "$S" preload status --root "$root"

# Our entry on a shared line (written by hand, no ctxshim state).
new_root r5
printf '/usr/lib/libfoo.so:%s /usr/lib/libbar.so\n/usr/lib/libz.so\n' "$lib" >"$pf"
expect_status 0 "uninstall of a hand-made entry" "$S" preload uninstall --root "$root"
check "other entries kept" same "$(cat "$pf")" "/usr/lib/libfoo.so /usr/lib/libbar.so
/usr/lib/libz.so"

# ------------------------------------------------------------ errors

new_root r6
rm "$root$lib"
expect_status 1 "install refuses a library missing in the root" \
	"$S" preload install --root "$root"
check "names it" contains "$dp_err" "$root$lib: No such file"
check "nothing written" test ! -e "$pf"
expect_status 1 "--root must exist" "$S" preload status --root "$dp_tmp/nonexistent"
expect_status 64 "unknown action" "$S" preload frob
expect_status 64 "missing action" "$S" preload
expect_status 64 "unknown option" "$S" preload status --bogus

dp_finish
