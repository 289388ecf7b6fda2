#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# 32-bit programs that inherit the shim print nothing: where the empty
# 32-bit libctxshim.so is installed where the i386 loader's $LIB points,
# LD_PRELOAD (ctxshim run, env, the entrypoint) and /etc/ld.so.preload
# (preload install --root) and drop-ins name the library through $LIB
# (only when no other user could replace the empty one; the path with a
# note otherwise); a 64-bit
# program still loads the shim; with the 64-bit library in the entry
# itself (the control) the 32-bit loader says "wrong ELF class".  Entries
# with an absolute path from before are still replaced and removed.  A
# 64-bit program of another glibc's loader, which expands $LIB elsewhere,
# gets the path; --root reads Fedora's and Arch's layouts, and takes the
# path where the loader does not confirm what $LIB is.

. "$(dirname "$0")/deploy-lib.sh"

S=$CTXSHIM_CMD
E=$CTXSHIM_ENTRYPOINT
[ -n "${CTXSHIM_LIB32-}" ] || dp_skip "the 32-bit libctxshim.so is not built (-Di386_stub)"
# An ASan runtime in LD_PRELOAD is a 64-bit entry too.
[ -z "$dp_base_preload" ] || dp_skip "sanitizer build: its runtime in LD_PRELOAD is 64-bit"
cd "$dp_tmp" || exit 1
dp_prog32 || dp_finish

# What this host's loaders expand $LIB to (glibc 2.33 and later say).
dst() {
	"$1" --list-diagnostics 2>/dev/null | sed -n 's/^dl_dst_lib="\(.*\)"$/\1/p'
}
dst64=$(dst /lib64/ld-linux-x86-64.so.2)
dst32=$(dst /lib/ld-linux.so.2)
if [ -z "$dst64" ] || [ -z "$dst32" ]; then
	dp_skip "the loaders do not say what \$LIB is (glibc before 2.33)"
fi

# An install tree as meson makes it: the library in the 64-bit loader's
# $LIB, the empty one in the 32-bit loader's.
p=$dp_tmp/prefix
lib=$p/$dst64/ctxshim/libctxshim.so
mkdir -p "${lib%/*}" "$p/$dst32/ctxshim"
cp "$CTXSHIM_LIB" "$lib"
cp "$CTXSHIM_LIB32" "$p/$dst32/ctxshim/libctxshim.so"
entry="$p/\$LIB/ctxshim/libctxshim.so"

# ------------------------------------------------------------ LD_PRELOAD

# The control: the library by its path, as before.
expect_status 5 "control: a 32-bit program under run with the library's path" \
	env CTXSHIM_LIB="$CTXSHIM_LIB" "$S" run -- sh -c ./prog32
check "its loader says wrong ELF class" contains "$dp_err" "wrong ELF class: ELFCLASS64"

CTXSHIM_LIB=$lib
export CTXSHIM_LIB
expect_status 0 "env names the library through \$LIB" "$S" env
check "LD_PRELOAD with \$LIB" same "$dp_out" "export LD_PRELOAD='$entry'"
expect_status 0 "env --env-file: the path (a reader of the file may expand \$LIB)" "$S" env --env-file
check "LD_PRELOAD with the path" same "$dp_out" "LD_PRELOAD=$lib"
expect_status 0 "env --env-file with the entry in LD_PRELOAD (after env)" \
	env LD_PRELOAD="$entry" "$S" env --env-file
check "LD_PRELOAD with the path" same "$dp_out" "LD_PRELOAD=$lib"
check "no warning" same "$dp_err" ""
expect_status 5 "a 32-bit program under run" "$S" run -- sh -c ./prog32
check "its output unchanged" same "$dp_out" p32
check "nothing on stderr" same "$dp_err" ""
expect_status 0 "a 64-bit program under run" "$S" run -- cat /proc/self/maps
check "loads the library" contains "$dp_out" " $lib"
expect_status 5 "a 32-bit program under run --force" "$S" run --force -- ./prog32
check "nothing on stderr" same "$dp_err" ""
expect_status 5 "a 32-bit program started under the entrypoint" "$E" sh -c ./prog32
check "nothing on stderr" same "$dp_err" ""
expect_status 0 "a 64-bit program under the entrypoint" "$E" cat /proc/self/maps
check "loads the library" contains "$dp_out" " $lib"
# Nested: the entry is recognized, not replaced with a warning.
# shellcheck disable=SC2016 # for the command's shell
expect_status 0 "run inside run" "$S" run -- "$S" run -- sh -c 'echo "$LD_PRELOAD"'
check "one entry" same "$dp_out" "$entry"
check "no warning" same "$dp_err" ""
# The entry names a library of the same file to an old absolute entry.
# shellcheck disable=SC2016 # for the command's shell
expect_status 0 "run with the path in LD_PRELOAD already" \
	env LD_PRELOAD="$lib" "$S" run -- sh -c 'echo "$LD_PRELOAD"'
check "kept, no warning" same "$dp_err" ""
# Without the empty library where $LIB points, the path as before.
mv "$p/$dst32" "$p/away"
expect_status 0 "env without the 32-bit library" "$S" env
check "the path" same "$dp_out" "export LD_PRELOAD='$lib'"
mv "$p/away" "$p/$dst32"
# Another 32-bit file of its name: a real library (its code would run in
# every 32-bit program), or the empty one cut short (its pages past the
# end would crash each of them in the loader).  The path then.
stub=$p/$dst32/ctxshim/libctxshim.so
cp -L "${dp_ld32%/*}/libc.so.6" "$stub"
expect_status 0 "env with a real 32-bit library in its place" "$S" env
check "the path" same "$dp_out" "export LD_PRELOAD='$lib'"
# shellcheck disable=SC2016 # for the command's shell
expect_status 0 "the entrypoint with a real 32-bit library in its place" \
	"$E" sh -c 'echo "$LD_PRELOAD"'
check "the path" same "$dp_out" "$lib"
size=$(wc -c <"$CTXSHIM_LIB32")
head -c $((size - 512)) "$CTXSHIM_LIB32" >"$stub"
expect_status 0 "env with the 32-bit library cut short" "$S" env
check "the path" same "$dp_out" "export LD_PRELOAD='$lib'"
# Its program header table moved to the end of the file (e_phoff at 28),
# whole, then without the last entry's p_align: the missing bytes, read
# as zeros, would pass every other check.
phoff=$(od -An -t u4 -j 28 -N 4 "$CTXSHIM_LIB32" | tr -d ' ')
phnum=$(od -An -t u2 -j 44 -N 2 "$CTXSHIM_LIB32" | tr -d ' ')
for cut in 0 4; do
	cp "$CTXSHIM_LIB32" "$stub"
	dd if="$CTXSHIM_LIB32" bs=1 skip="$phoff" count=$((phnum * 32 - cut)) 2>/dev/null >>"$stub"
	le "$size" 4 | dd of="$stub" bs=1 seek=28 conv=notrunc 2>/dev/null
	expect_status 0 "env with the 32-bit library's program headers at its end, $cut bytes cut" "$S" env
	if [ $cut = 0 ]; then
		check "\$LIB" same "$dp_out" "export LD_PRELOAD='$entry'"
	else
		check "the path" same "$dp_out" "export LD_PRELOAD='$lib'"
	fi
done
cp "$CTXSHIM_LIB32" "$stub"
# A 32-bit process that mapped the empty library: status says that it is
# not the shim.
printf '%s\n' 'int printf(const char *, ...);' 'int getpid(void);' 'int fflush(void *);' \
	'int read(int, void *, unsigned);' 'void exit(int);' \
	'void _start(void) { char c; printf("READY %d\n", getpid()); fflush(0);' \
	'	while (read(0, &c, 1) > 0) ; exit(0); }' >wait32.c
if ${CC:-cc} -m32 -fno-pie -no-pie -nostdlib -nostartfiles -o wait32 wait32.c \
	-Wl,-dynamic-linker,/lib/ld-linux.so.2 "${dp_ld32%/*}/libc.so.6"; then
	start_helper env LD_PRELOAD="$entry" ./wait32
	expect_status 1 "status of a 32-bit process with the empty library" "$S" status "$bg_pid"
	check "names it, not as the shim" contains "$dp_out" \
		"library:  not loaded (only $stub, the empty 32-bit libctxshim.so"
	release "$bg_pid" "$bg_go"
else
	fail "cannot build a waiting 32-bit program"
fi

# A 64-bit program of another glibc (Nix's, Guix's, one that a product
# bundles): its loader expands $LIB to its own directory, where no
# libctxshim.so is.  Simulated with a copy of this host's loader whose $LIB
# string is changed in place.  The command itself gets the path; the test
# program of the entrypoint's probe (true in PATH) does not make it drop
# the shim.
other=$dp_tmp/other/ld-linux-x86-64.so.2
mkdir -p "${other%/*}"
cp -L /lib64/ld-linux-x86-64.so.2 "$other"
at=$(LC_ALL=C grep -obUaP "\\x00\\Q$dst64\\E\\x00" "$other" 2>/dev/null | sed -n '1s/:.*//p')
[ -z "$at" ] || printf X | dd of="$other" bs=1 seek=$((at + ${#dst64})) conv=notrunc 2>/dev/null
printf '#include <dlfcn.h>\n#include <stdio.h>\nint main(void) { puts(dlsym(RTLD_DEFAULT, "otel_thread_ctx_v1") ? "shim" : "none"); return 0; }\n' >p64.c
if [ -z "$at" ] || [ "$(dst "$other")" = "$dst64" ] ||
	! ${CC:-cc} -o p64other p64.c -Wl,-dynamic-linker,"$other" || [ "$(./p64other)" != none ]; then
	echo "# cannot make a loader that expands \$LIB differently: not checked"
else
	expect_status 0 "a 64-bit program of another glibc under run" "$S" run -- ./p64other
	check "loads the shim" same "$dp_out" shim
	check "nothing on stderr" same "$dp_err" ""
	expect_status 0 "a 64-bit program of another glibc under the entrypoint" "$E" ./p64other
	check "loads the shim" same "$dp_out" shim
	check "nothing on stderr" same "$dp_err" ""
	mkdir bin
	cp p64other bin/true
	expect_status 0 "the entrypoint with true of another glibc in PATH" \
		env PATH="$dp_tmp/bin:$PATH" "$E" cat /proc/self/maps
	check "loads the library" contains "$dp_out" " $lib"
	check "nothing on stderr" same "$dp_err" ""
fi

# ------------------------------------------------------------ --root

# A system with this host's loaders and C libraries at their places, the
# libraries below /usr as meson installs them.
r=$dp_tmp/root
mkdir -p "$r/lib64" "$r/lib" "$r/bin" "$r/$dst64" "$r/$dst32" "$r/usr/$dst64/ctxshim" "$r/usr/$dst32/ctxshim"
cp -L /lib64/ld-linux-x86-64.so.2 /lib/x86_64-linux-gnu/libc.so.6 "$r/$dst64/"
ln -s "/$dst64/ld-linux-x86-64.so.2" "$r/lib64/ld-linux-x86-64.so.2"
cp -L /lib/ld-linux.so.2 "$r/$dst32/"
cp -L "${dp_ld32%/*}/libc.so.6" "$r/$dst32/"
ln -s "/$dst32/ld-linux.so.2" "$r/lib/ld-linux.so.2"
cp "$CTXSHIM_LIB" "$r/usr/$dst64/ctxshim/libctxshim.so"
cp "$CTXSHIM_LIB32" "$r/usr/$dst32/ctxshim/libctxshim.so"
cp prog32 "$r/bin/prog32"
cp prog32 "$r/bin/suid32"
chmod 4755 "$r/bin/suid32"
${CC:-cc} -o "$r/bin/p64" p64.c
rlib=/usr/$dst64/ctxshim/libctxshim.so
rentry="/usr/\$LIB/ctxshim/libctxshim.so"
pf=$r/etc/ld.so.preload
mkdir -p "$r/etc"
# An entry from before (the path): replaced, and removed on uninstall.
printf '%s\n' "$rlib" >"$pf"
CTXSHIM_LIB=$rlib
expect_status 0 "preload install --root" "$S" preload install --root "$r"
check "replaces the path by the entry with \$LIB" contains "$dp_out" "replaced $rlib by $rentry"
check "the file holds it" same "$(cat "$pf")" "$rentry"
expect_status 0 "preload status --root" "$S" preload status --root "$r"
check "names the entry and the 64-bit library" contains "$dp_out" \
	"installed: $rentry in $pf (to 64-bit programs $rlib)"
if [ "$(id -u)" = 0 ] && chroot "$r" /bin/p64 >/dev/null 2>&1; then
	expect_status 5 "a 32-bit program in the system" chroot "$r" /bin/prog32
	check "nothing on stderr" same "$dp_err" ""
	expect_status 5 "a setuid 32-bit program in the system, run by another user" \
		chroot --userspec=65534:65534 "$r" /bin/suid32
	check "nothing on stderr" same "$dp_err" ""
	expect_status 0 "a 64-bit program in the system" chroot "$r" /bin/p64
	check "loads the shim" same "$dp_out" shim
	# The control: the path, as before.
	printf '%s\n' "$rlib" >"$pf.new"
	mv "$pf" "$pf.keep"
	mv "$pf.new" "$pf"
	expect_status 5 "control: a 32-bit program with the path in ld.so.preload" chroot "$r" /bin/prog32
	check "its loader says wrong ELF class" contains "$dp_err" "wrong ELF class: ELFCLASS64"
	mv "$pf.keep" "$pf"
else
	echo "# not root, or no chroot: the system's programs were not run"
fi
expect_status 0 "preload uninstall --root" "$S" preload uninstall --root "$r"
check "restores the file from before, without its entry" same "$(cat "$pf")" ""
check "says so" contains "$dp_out" "removed the libctxshim.so entries that the previous file had"
rm "$pf"
# No empty library in the system: the path, as before.
rm "$r/usr/$dst32/ctxshim/libctxshim.so"
expect_status 0 "install without the 32-bit library" "$S" preload install --root "$r"
check "the path" same "$(cat "$pf")" "$rlib"
expect_status 0 "uninstall" "$S" preload uninstall --root "$r"

# Systems of other distributions, whose loaders are read, not run (here
# files with the one string that matters): distro ROOT LIB64 LIB32 STRING
# makes one with the loaders in /usr/LIB64 and /usr/LIB32, /lib64 a link
# to the first and /lib to /usr/lib, STRING in the x86_64 loader.
distro() {
	rm -rf "$1"
	mkdir -p "$1/etc" "$1/usr/$2/ctxshim" "$1/usr/$3/ctxshim"
	ln -s "usr/$2" "$1/lib64"
	ln -s usr/lib "$1/lib"
	printf '\177ELF\000%s\000' "$4" >"$1/usr/$2/ld-linux-x86-64.so.2"
	printf '\177ELF\000%s\000' "$3" >"$1/usr/$3/ld-linux.so.2"
	[ "$3" = lib ] || ln -s "../$3/ld-linux.so.2" "$1/usr/lib/ld-linux.so.2"
	cp "$lib" "$1/usr/$2/ctxshim/libctxshim.so"
	cp "$CTXSHIM_LIB32" "$1/usr/$3/ctxshim/libctxshim.so"
	CTXSHIM_LIB=/usr/$2/ctxshim/libctxshim.so
}
distro "$dp_tmp/fedora" lib64 lib lib64
expect_status 0 "preload install --root, Fedora's layout" "$S" preload install --root "$dp_tmp/fedora"
check "the entry with \$LIB" same "$(cat "$dp_tmp/fedora/etc/ld.so.preload")" "/usr/\$LIB/ctxshim/libctxshim.so"
distro "$dp_tmp/arch" lib lib32 lib
expect_status 0 "preload install --root, Arch's layout" "$S" preload install --root "$dp_tmp/arch"
check "the entry with \$LIB" same "$(cat "$dp_tmp/arch/etc/ld.so.preload")" "/usr/\$LIB/ctxshim/libctxshim.so"
# A loader whose $LIB is not what its place suggests: the path.
distro "$dp_tmp/unconfirmed" lib64 lib usr/lib64
expect_status 0 "preload install --root, a loader with another \$LIB" "$S" preload install --root "$dp_tmp/unconfirmed"
check "the path" same "$(cat "$dp_tmp/unconfirmed/etc/ld.so.preload")" /usr/lib64/ctxshim/libctxshim.so
# A real 32-bit library where the empty one would be: the path.
distro "$dp_tmp/real32" lib64 lib lib64
cp -L "${dp_ld32%/*}/libc.so.6" "$dp_tmp/real32/usr/lib/ctxshim/libctxshim.so"
expect_status 0 "preload install --root, a real 32-bit library in its place" "$S" preload install --root "$dp_tmp/real32"
check "the path" same "$(cat "$dp_tmp/real32/etc/ld.so.preload")" /usr/lib64/ctxshim/libctxshim.so
# An empty one that another user could replace: the path, with a note
# (it would be loaded into every 32-bit program, setuid ones included).
distro "$dp_tmp/gw32" lib64 lib lib64
chmod 775 "$dp_tmp/gw32/usr/lib/ctxshim"
expect_status 0 "preload install --root, a 32-bit library in a group-writable directory" \
	"$S" preload install --root "$dp_tmp/gw32"
check "the path" same "$(cat "$dp_tmp/gw32/etc/ld.so.preload")" /usr/lib64/ctxshim/libctxshim.so
check "with a note" contains "$dp_err" "ctxshim: note: $dp_tmp/gw32/etc/ld.so.preload names /usr/lib64/ctxshim/libctxshim.so, not through \$LIB: $dp_tmp/gw32/usr/lib/ctxshim is writable by its group or by others (mode 775)"
# A FIFO where the empty one would be: the path, without waiting for a
# writer (old: od blocked in its open for ever; timeout(1) only ends such
# a hang).
distro "$dp_tmp/fifo32" lib64 lib lib64
rm "$dp_tmp/fifo32/usr/lib/ctxshim/libctxshim.so"
mkfifo "$dp_tmp/fifo32/usr/lib/ctxshim/libctxshim.so"
expect_status 0 "preload install --root, a FIFO in its place" \
	timeout 60 "$S" preload install --root "$dp_tmp/fifo32"
check "the path" same "$(cat "$dp_tmp/fifo32/etc/ld.so.preload")" /usr/lib64/ctxshim/libctxshim.so

# ------------------------------------------------------- systemd-dropin

# A unit with a root directory of its own (RootDirectory=) runs its
# programs with that system's loaders, not the host's: the drop-in names
# the library by its path, which they load whatever their $LIB.  The host
# here is a Debian system below --root; its units run in a Fedora one
# (whose $LIB, lib64, has no libctxshim.so) and in a Debian one.
h=$dp_tmp/host
distro "$h" lib/x86_64-linux-gnu lib/i386-linux-gnu lib/x86_64-linux-gnu
hlib=$CTXSHIM_LIB
distro "$h/srv/fedora" lib64 lib lib64
mkdir -p "$h/srv/fedora${hlib%/*}"
cp "$lib" "$h/srv/fedora$hlib"
distro "$h/srv/debian" lib/x86_64-linux-gnu lib/i386-linux-gnu lib/x86_64-linux-gnu
mkdir -p "$h/etc/systemd/system"
CTXSHIM_LIB=$hlib
hentry="/usr/\$LIB/ctxshim/libctxshim.so"
unit() {
	printf '[Unit]\nDescription=app\n\n[Service]\nExecStart=/bin/true\n%s\n' "$1" \
		>"$h/etc/systemd/system/app.service"
}
unit ''
expect_status 0 "systemd-dropin --root, a unit in the host's root" \
	"$S" systemd-dropin --print --root "$h" app
check "the entry with \$LIB" contains "$dp_out" "Environment=\"LD_PRELOAD=$hentry\""
check "no note" same "$dp_err" ""
# The 32-bit library is loaded into the service's 32-bit programs: named
# through $LIB only when no other user can replace it either, as for
# preload install; the path otherwise, with a note (--print too: its text
# is what is written).
hstub=$h/usr/lib/i386-linux-gnu/ctxshim
chmod 775 "$hstub"
expect_status 0 "systemd-dropin --root, a 32-bit library in a group-writable directory" \
	"$S" systemd-dropin --print --root "$h" app
check "the path" contains "$dp_out" "Environment=\"LD_PRELOAD=$hlib\""
check "the note only" same "$dp_err" "ctxshim: note: the drop-in names $hlib, not through \$LIB: $hstub is writable by its group or by others (mode 775): they could replace the library that app.service loads"
expect_status 0 "written so too" "$S" systemd-dropin --root "$h" app
check "the path" contains "$(cat "$h/etc/systemd/system/app.service.d/ctxshim.conf")" \
	"Environment=\"LD_PRELOAD=$hlib\""
check "with the note" contains "$dp_err" "ctxshim: note: the drop-in names $hlib, not through \$LIB: $hstub is writable"
expect_status 0 "removed" "$S" systemd-dropin --remove --root "$h" app
chmod 755 "$hstub"
if [ "$(id -u)" = 0 ]; then
	chown 65534 "$hstub/libctxshim.so"
	expect_status 0 "systemd-dropin --root, a 32-bit library of another user" \
		"$S" systemd-dropin --print --root "$h" app
	check "the path" contains "$dp_out" "Environment=\"LD_PRELOAD=$hlib\""
	check "the note only" same "$dp_err" "ctxshim: note: the drop-in names $hlib, not through \$LIB: $hstub/libctxshim.so is owned by uid 65534, not root: that user could replace the library that app.service loads"
	chown 0 "$hstub/libctxshim.so"
fi
expect_status 0 "systemd-dropin --root, the 32-bit library safe again" \
	"$S" systemd-dropin --print --root "$h" app
check "the entry with \$LIB" contains "$dp_out" "Environment=\"LD_PRELOAD=$hentry\""
check "no note" same "$dp_err" ""
unit 'RootDirectory=/srv/fedora'
expect_status 0 "systemd-dropin --root, a unit in a root of another layout" \
	"$S" systemd-dropin --print --root "$h" app
check "the path" contains "$dp_out" "Environment=\"LD_PRELOAD=$hlib\""
check "with a note" contains "$dp_err" "note: app.service sets RootDirectory=/srv/fedora: the drop-in names $hlib"
expect_status 0 "written so too" "$S" systemd-dropin --root "$h" app
check "the path" contains "$(cat "$h/etc/systemd/system/app.service.d/ctxshim.conf")" \
	"Environment=\"LD_PRELOAD=$hlib\""
expect_status 0 "removed" "$S" systemd-dropin --remove --root "$h" app
unit 'RootDirectory = /srv/debian'
expect_status 0 "systemd-dropin --root, a unit in a root of the same layout" \
	"$S" systemd-dropin --print --root "$h" app
check "the path" contains "$dp_out" "Environment=\"LD_PRELOAD=$hlib\""
check "the note only" same "$dp_err" "ctxshim: note: app.service sets RootDirectory=/srv/debian: the drop-in names $hlib, not through \$LIB (which the loaders there expand)"
unit 'RootImage=/srv/app.raw'
expect_status 0 "systemd-dropin --root, a unit in an image" \
	"$S" systemd-dropin --print --root "$h" app
check "the path" contains "$dp_out" "Environment=\"LD_PRELOAD=$hlib\""
check "with a note" contains "$dp_err" "note: app.service sets RootImage=/srv/app.raw"
# What an image holds is not checked from here: written, saying so.
expect_status 0 "systemd-dropin --root, written for a unit in an image" \
	"$S" systemd-dropin --root "$h" app
check "says the image's library is not checked" contains "$dp_err" \
	"ctxshim: note: app.service sets RootImage=/srv/app.raw: the library that it loads there is not checked (only $h$hlib is)"
expect_status 0 "removed" "$S" systemd-dropin --remove --root "$h" app
# Set by a drop-in of the unit, and in a root without the library.
unit ''
mkdir -p "$h/etc/systemd/system/app.service.d" "$h/srv/empty"
printf '[Service]\nRootDirectory=/srv/empty\n' >"$h/etc/systemd/system/app.service.d/10-root.conf"
expect_status 0 "systemd-dropin --root, a drop-in sets a root without the library" \
	"$S" systemd-dropin --print --root "$h" app
check "the path" contains "$dp_out" "Environment=\"LD_PRELOAD=$hlib\""
check "warns" contains "$dp_err" "warning: app.service runs in /srv/empty (RootDirectory=), which has no $hlib"
# The unit file sets a root, a drop-in resets it (an empty value): the
# unit runs on the host, where the entry of the root's loaders names
# another directory (old: /srv/fedora's, whose $LIB is lib64, for a
# library there in /usr/lib64: the host's loaders found no
# /usr/lib/x86_64-linux-gnu/ctxshim/libctxshim.so).  Which value is the
# last one is not told: the path, which loads either way.
mkdir -p "$h/usr/lib64/ctxshim"
cp "$lib" "$h/usr/lib64/ctxshim/libctxshim.so"
rm -f "$h/etc/systemd/system/app.service.d/10-root.conf"
unit 'RootDirectory=/srv/fedora'
printf '[Service]\nRootDirectory=\n' >"$h/etc/systemd/system/app.service.d/10-root.conf"
expect_status 0 "systemd-dropin --root, a drop-in resets the root" \
	env CTXSHIM_LIB=/usr/lib64/ctxshim/libctxshim.so "$S" systemd-dropin --print --root "$h" app
check "the path" contains "$dp_out" "Environment=\"LD_PRELOAD=/usr/lib64/ctxshim/libctxshim.so\""

dp_finish
