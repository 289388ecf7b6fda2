#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# ctxshim systemd-dropin: the exact text, quoting of values for systemd,
# writing and removing below --root (only a library that loads and that no
# other user can replace, the root's symbolic links followed inside it),
# unit name handling, and (when systemd-analyze is installed) systemd itself parsing
# the drop-in without a complaint.

. "$(dirname "$0")/deploy-lib.sh"

S=$CTXSHIM_CMD
built_lib=$CTXSHIM_LIB
lib=/usr/lib/x86_64-linux-gnu/ctxshim/libctxshim.so
CTXSHIM_LIB=$lib
export CTXSHIM_LIB
# The caller's own variables must not leak into a unit's drop-in.
printf 'int dp_caller;\n' >"$dp_tmp/caller.c"
${CC:-cc} -shared -fPIC -o "$dp_tmp/libcaller.so" "$dp_tmp/caller.c" || exit 1
LD_PRELOAD=${dp_base_preload:+$dp_base_preload:}$dp_tmp/libcaller.so
OTEL_RESOURCE_ATTRIBUTES=caller=1
export LD_PRELOAD OTEL_RESOURCE_ATTRIBUTES

expect_status 0 "--print" "$S" systemd-dropin --print nginx.service
check "drop-in text" same "$dp_out" "# Written by 'ctxshim systemd-dropin': loads libctxshim.so into nginx.service.
# To undo: ctxshim systemd-dropin --remove nginx.service
# (or remove this file), then 'systemctl daemon-reload' and restart the unit.
# Note: this LD_PRELOAD replaces any that the unit sets itself.
[Service]
Environment=\"LD_PRELOAD=$lib\"
Environment=\"OTEL_SERVICE_NAME=nginx\""
plain=$dp_out

expect_status 0 "unit name without .service" "$S" systemd-dropin --print nginx
check "same text" same "$dp_out" "$plain"
# A dot is no unit type: systemctl takes php8.2-fpm for php8.2-fpm.service.
expect_status 0 "unit name with a dot and no type" "$S" systemd-dropin --print php8.2-fpm
check "its service name" contains "$dp_out" 'Environment="OTEL_SERVICE_NAME=php8.2-fpm"'

expect_status 0 "all options" "$S" systemd-dropin --print \
	--service-name 'a b%c"d\e' -r k=v,k2=v2 --log /var/log/ctxshim.log \
	--events=/run/ev.log checkout
check "service name quoted for systemd" contains "$dp_out" \
	'Environment="OTEL_SERVICE_NAME=a b%%c\"d\\e"'
check "resource attributes, without the caller's" contains "$dp_out" \
	'Environment="OTEL_RESOURCE_ATTRIBUTES=k=v,k2=v2"'
check "log" contains "$dp_out" 'Environment="CTXSHIM_LOG=/var/log/ctxshim.log"'
check "events" contains "$dp_out" 'Environment="CTXSHIM_EVENTS=/run/ev.log"'
check "LD_PRELOAD without the caller's" contains "$dp_out" "Environment=\"LD_PRELOAD=$lib\""

# Short options bundled as util-linux takes them (old: "unrecognized
# option '-nsvc'").
expect_status 0 "bundled short options" "$S" systemd-dropin --print -nsvc -rk=v \
	-l/var/log/ctxshim.log checkout
check "-nsvc" contains "$dp_out" 'Environment="OTEL_SERVICE_NAME=svc"'
check "-rk=v" contains "$dp_out" 'Environment="OTEL_RESOURCE_ATTRIBUTES=k=v"'
check "-l/var/log/ctxshim.log" contains "$dp_out" \
	'Environment="CTXSHIM_LOG=/var/log/ctxshim.log"'
expect_status 64 "an unknown letter" "$S" systemd-dropin --print -nsvc -q checkout
check "names it" contains "$dp_err" "ctxshim: systemd-dropin: invalid option -- 'q'"

expect_status 0 "template unit" "$S" systemd-dropin --print getty@.service
check "service name of a template" contains "$dp_out" 'OTEL_SERVICE_NAME=getty"'
expect_status 0 "instance unit" "$S" systemd-dropin --print 'getty@tty1'
check "service name of an instance" contains "$dp_out" 'OTEL_SERVICE_NAME=getty@tty1"'

# unit_file FILE: a unit file that systemd loads (an empty one masks the
# unit, as a link to /dev/null does).
unit_file() {
	printf '[Service]\nExecStart=/bin/true\n' >"$1"
}

# Writing below a root.
root=$dp_tmp/root
mkdir -p "$root${lib%/*}"
cp "$built_lib" "$root$lib"
expect_status 0 "write" "$S" systemd-dropin --root "$root" nginx
file=$root/etc/systemd/system/nginx.service.d/ctxshim.conf
check "says where" contains "$dp_out" "wrote $file"
check "tells how to apply" contains "$dp_out" "systemctl daemon-reload"
# The printed text, but for the undo command: it names the root (old:
# 'ctxshim systemd-dropin --remove nginx.service', which removes this
# host's drop-in, not the one written below the root).
rooted=$(printf '%s\n' "$plain" | sed "s|--remove nginx.service|--remove --root $root nginx.service|")
check "file has the printed text, undone below the root" same "$(cat "$file")" "$rooted"
check "file is 0644" same "$(stat -c %a "$file")" 644
expect_status 0 "--print with --root" "$S" systemd-dropin --print --root "$root" nginx
check "prints what is written" same "$dp_out" "$rooted"
expect_status 0 "write again (idempotent)" "$S" systemd-dropin --root "$root" nginx
check "same file" same "$(cat "$file")" "$rooted"
expect_status 0 "remove" "$S" systemd-dropin --remove --root "$root" nginx
check "file removed" test ! -e "$file"
check "empty .d directory removed" test ! -e "${file%/*}"
expect_status 0 "remove again" "$S" systemd-dropin --remove --root "$root" nginx

# The undo command of the comment, run as the user would paste it, undoes
# exactly what was written: a root (given relative, with blanks and a
# quote) and a unit name escaped by systemd-escape (a backslash) are
# quoted for the shell, and the command is the rest of its line (old: in
# quotes of its own, around those: '... --root '/a b' 'x.service'').
odd="$dp_tmp/it's a root"
mkdir -p "$odd${lib%/*}"
cp "$built_lib" "$odd$lib"
oddfile="$odd/etc/systemd/system/a\\x2db.service.d/ctxshim.conf"
expect_status 0 "write below a root with blanks and a quote" \
	env -C "$dp_tmp" "$S" systemd-dropin --root "./it's a root" 'a\x2db'
check "written" test -f "$oddfile"
undo=$(sed -n "s/^# To undo: //p" "$oddfile")
check "the comment names the root, quoted" same "$undo" \
	"ctxshim systemd-dropin --remove --root '$dp_tmp/it'\\''s a root' 'a\\x2db.service'"
# the drop-in of that unit in another root, which it must not touch
mkdir -p "$root/etc/systemd/system/a\\x2db.service.d"
: >"$root/etc/systemd/system/a\\x2db.service.d/ctxshim.conf"
expect_status 0 "the comment's undo command, run by sh" \
	env PATH="${S%/*}:$PATH" sh -c "$undo"
check "removes the drop-in below that root" test ! -e "$oddfile"
check "and nothing else" test -e "$root/etc/systemd/system/a\\x2db.service.d/ctxshim.conf"
rm -rf "$root/etc/systemd/system/a\\x2db.service.d"
# A line break would end the comment and the rest of the name would be
# parsed by systemd: refused (removing is still possible).
nlroot="$dp_tmp/nl
root"
mkdir -p "$nlroot${lib%/*}"
cp "$built_lib" "$nlroot$lib"
expect_status 1 "a root with a newline is refused" "$S" systemd-dropin --root "$nlroot" nginx
check "says why" contains "$dp_err" "a directory name with a newline or carriage return"
check "nothing written" test ! -e "$nlroot/etc/systemd/system/nginx.service.d"
expect_status 1 "also with --print" "$S" systemd-dropin --print --root "$nlroot" nginx
expect_status 0 "removing below it works" "$S" systemd-dropin --remove --root "$nlroot" nginx
# Also one at the end of the name ($(...) drops it; old: the drop-in was
# written below the root without it).
nlroot="$dp_tmp/nlend
"
mkdir -p "$nlroot${lib%/*}" "$dp_tmp/nlend"
cp "$built_lib" "$nlroot$lib"
expect_status 1 "a root that ends with a newline is refused" "$S" systemd-dropin --root "$nlroot" nginx
check "says why" contains "$dp_err" "a directory name with a newline or carriage return"
check "nothing written below the other" test ! -e "$dp_tmp/nlend/etc"
# A library path with a line break: it would end the Environment= line,
# and systemd would parse the rest as a line (old: written).
for c in '
' "$(printf '\r')"; do
	expect_status 1 "a library path with a line break is refused" \
		env CTXSHIM_LIB="/opt/a${c}b/libctxshim.so" "$S" systemd-dropin --print nginx
	check "says why" contains "$dp_err" \
		"ctxshim: systemd-dropin: the library path must not contain a newline or carriage return (it would end the drop-in's Environment= line): /opt/a"
	check "prints no drop-in" same "$dp_out" ""
done
# An empty --root is no root (old: this host's /etc/systemd/system); with
# --print, so that a regression writes nothing.
expect_status 64 "an empty --root is a usage error" \
	"$S" systemd-dropin --print --root '' nginx
check "says why" contains "$dp_err" \
	"ctxshim: systemd-dropin: option '--root' requires a non-empty argument"
check "prints no drop-in" same "$dp_out" ""
expect_status 1 "--root must exist" "$S" systemd-dropin --root "$dp_tmp/nonexistent" nginx
check "the error names the command" contains "$dp_err" \
	"ctxshim: systemd-dropin: --root: $dp_tmp/nonexistent: No such directory"
# A root that cannot be changed: one line that says what failed, on what,
# and why (old: mkdir's message, then ours without the why).
eroot=$dp_tmp/eroot
mkdir -p "$eroot${lib%/*}"
cp "$built_lib" "$eroot$lib"
: >"$eroot/etc"
expect_status 1 "etc is a file" "$S" systemd-dropin --root "$eroot" nginx
check "one line after the notes" same "$(printf '%s\n' "$dp_err" | grep -v '^ctxshim: note: ')" \
	"ctxshim: cannot create $eroot/etc/systemd/system/nginx.service.d: $eroot/etc is not a directory"
rm "$eroot/etc"
# shellcheck disable=SC2016 # expanded by that sh
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null &&
	unshare -m true 2>/dev/null; then
	ro='mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
	expect_status 1 "a read-only root" unshare -m sh -c "$ro" "$eroot" \
		"$S" systemd-dropin --root "$eroot" nginx
	check "one line after the notes" same "$(printf '%s\n' "$dp_err" | grep -v '^ctxshim: note: ')" \
		"ctxshim: cannot create $eroot/etc: Read-only file system"
	mkdir -p "$eroot/etc/systemd/system/nginx.service.d"
	: >"$eroot/etc/systemd/system/nginx.service.d/ctxshim.conf"
	expect_status 1 "--remove in a read-only root" unshare -m sh -c "$ro" "$eroot" \
		"$S" systemd-dropin --remove --root "$eroot" nginx
	check "one line" same "$dp_err" \
		"ctxshim: cannot remove $eroot/etc/systemd/system/nginx.service.d/ctxshim.conf: Read-only file system"
else
	echo "# not root or no mount namespace: no read-only root"
fi

# No unit file of that name: written all the same (an image build may
# install the unit later), with a warning (old: silence).
expect_status 0 "write without a unit file" "$S" systemd-dropin --root "$root" nginx
check "warns of a unit that does not exist" contains "$dp_err" \
	"warning: no unit file nginx.service in $root's /etc/systemd/system"
case $dp_err in
*"systemd is not running"*) fail "no warning about this host's systemd with --root" ;;
*) ok "no warning about this host's systemd with --root" ;;
esac
mkdir -p "$root/usr/lib/systemd/system"
unit_file "$root/usr/lib/systemd/system/nginx.service"
expect_status 0 "write for a unit that exists" "$S" systemd-dropin --root "$root" nginx
check "no warning then" not_contains "$dp_err" "no unit file"
unit_file "$root/usr/lib/systemd/system/getty@.service"
expect_status 0 "write for an instance of a template" "$S" systemd-dropin --root "$root" getty@tty1
check "its template is found" not_contains "$dp_err" "no unit file"
expect_status 0 "write for a template" "$S" systemd-dropin --root "$root" getty@.service
check "the template is found" not_contains "$dp_err" "no unit file"
expect_status 0 "write for an instance of a missing template" "$S" systemd-dropin --root "$root" foo@x
check "warns naming the template" contains "$dp_err" \
	"no unit file foo@.service (for foo@x.service)"
rm -rf "$root/usr/lib/systemd" "$root/etc/systemd/system/getty@tty1.service.d" \
	"$root/etc/systemd/system/getty@.service.d" "$root/etc/systemd/system/foo@x.service.d" \
	"$root/etc/systemd/system/nginx.service.d"

# Links of the root are followed inside it, as for preload: etc ->
# /data/etc is the root's /data/etc, not this host's (old: the drop-in
# was written there, and its unit file found there), and a ".." stops at
# the root.  $outside stands for a directory of this host.
outside=$dp_tmp/outside-host
mkdir -p "$outside/systemd/system"
unit_file "$outside/systemd/system/nginx.service"
outside_before=$(snapshot "$outside")
for how in absolute relative; do
	lroot=$dp_tmp/l-$how
	mkdir -p "$lroot${lib%/*}"
	cp "$built_lib" "$lroot$lib"
	if [ $how = absolute ]; then
		ln -s "$outside" "$lroot/etc"
	else
		ln -s "$(climb "$lroot")${outside#/}" "$lroot/etc"
	fi
	lfile=$lroot$outside/systemd/system/nginx.service.d/ctxshim.conf
	expect_status 0 "etc a link ($how): write" "$S" systemd-dropin --root "$lroot" nginx
	check "etc a link ($how): says where" contains "$dp_out" "wrote $lfile"
	check "etc a link ($how): the root's directory" test -f "$lfile"
	check "etc a link ($how): not this host's unit file" contains "$dp_err" \
		"warning: no unit file nginx.service"
	check "etc a link ($how): nothing changes outside the root" \
		same "$(snapshot "$outside")" "$outside_before"
	expect_status 0 "etc a link ($how): remove" "$S" systemd-dropin --remove --root "$lroot" nginx
	check "etc a link ($how): removes it" test ! -e "$lfile"
	check "etc a link ($how): nothing changed outside the root" \
		same "$(snapshot "$outside")" "$outside_before"
done
# A link in the place of the temporary file is removed, not written
# through; the drop-in a link is removed as the link (old: "does not
# exist" when it pointed to no file of this host).
ldir=$lroot$outside/systemd/system/nginx.service.d
mkdir -p "$ldir"
ln -s "$outside/systemd/system/nginx.service" "$ldir/ctxshim.conf.tmp"
expect_status 0 "a link as the temporary file" "$S" systemd-dropin --root "$lroot" nginx
check "the drop-in written" contains "$(cat "$ldir/ctxshim.conf")" "[Service]"
check "nothing changed outside the root" same "$(snapshot "$outside")" "$outside_before"
rm "$ldir/ctxshim.conf"
mkdir -p "$lroot/srv"
: >"$lroot/srv/dropin.conf"
ln -s /srv/dropin.conf "$ldir/ctxshim.conf"
expect_status 0 "remove a drop-in that is a link" "$S" systemd-dropin --remove --root "$lroot" nginx
check "the link goes" test ! -L "$ldir/ctxshim.conf"
check "the file it named stays" test -f "$lroot/srv/dropin.conf"
# A loop: one line that names the path and the link; --print checks nothing.
lroot=$dp_tmp/l-loop
mkdir -p "$lroot${lib%/*}"
cp "$built_lib" "$lroot$lib"
ln -s /etc2 "$lroot/etc"
ln -s /etc "$lroot/etc2"
for o in "" --remove; do
	# shellcheck disable=SC2086 # no option, or one
	expect_status 1 "a link loop${o:+ ($o)}" "$S" systemd-dropin $o --root "$lroot" nginx
	check "one line${o:+ ($o)}" same "$dp_err" \
		"ctxshim: cannot resolve $lroot/etc/systemd/system/nginx.service.d inside $lroot: $lroot/etc: Too many levels of symbolic links"
done
expect_status 0 "a link loop: --print" "$S" systemd-dropin --print --root "$lroot" nginx

# Below --root the library is for that system, not for this host: it is
# not loaded here (it could be built for another machine or C library, and
# loading it would run the root's code on the host), only checked: a
# 64-bit shared library for the machine and C library of the root's
# programs.  A missing library is refused too; --print (above, with a path
# that does not exist here) writes without checks.
broken=$dp_tmp/broken
mkdir -p "$broken${lib%/*}" "$broken/usr/bin"
bfile=$broken/etc/systemd/system/nginx.service.d/ctxshim.conf
mark=$dp_tmp/constructor-ran
printf '#include <stdio.h>\n__attribute__((constructor)) static void dp_ctor(void)\n{ FILE *f = fopen("%s", "w"); if (f) fclose(f); }\n' \
	"$mark" >"$dp_tmp/ctor.c"
${CC:-cc} -shared -fPIC -o "$broken$lib" "$dp_tmp/ctor.c" || exit 1
cp /bin/true "$broken/usr/bin/true"
expect_status 0 "--root: a library for the root is written" \
	"$S" systemd-dropin --root "$broken" nginx
check "--root: the library was not loaded on this host" test ! -e "$mark"
check "--root: says it was not test-loaded" contains "$dp_err" "was not test-loaded (--root)"
check "--root: written" test -e "$bfile"
rm -f "$bfile"

# An aarch64 root prepared on this x86_64 host (elf64 in deploy-lib.sh).
arm=$dp_tmp/arm
mkdir -p "$arm${lib%/*}" "$arm/usr/bin"
elf64 "$arm$lib" 3 183
elf64 "$arm/usr/bin/true" 3 183 /lib/ld-linux-aarch64.so.1
expect_status 0 "--root: a library for another machine's root is written" \
	"$S" systemd-dropin --root "$arm" nginx
check "--root: written for the aarch64 root" test -e "$arm/etc/systemd/system/nginx.service.d/ctxshim.conf"
# That library in an x86_64 root, and an x86_64 library in a musl root.
elf64 "$broken$lib" 3 183
expect_status 1 "--root: a library for another machine than the root's programs is refused" \
	"$S" systemd-dropin --root "$broken" nginx
check "says why (machine)" contains "$dp_err" "built for another machine"
check "nothing written (machine)" test ! -e "$bfile"
cp "$built_lib" "$broken$lib"
elf64 "$broken/usr/bin/true" 3 62 /lib/ld-musl-x86_64.so.1
expect_status 1 "--root: a glibc library in a musl root is refused" \
	"$S" systemd-dropin --root "$broken" nginx
check "says why (musl)" contains "$dp_err" "linked with musl"
check "nothing written (musl)" test ! -e "$bfile"
# Programs that are symbolic links (a busybox system, store paths) are
# followed inside the root, never to this host's files of the same name.
bb=$dp_tmp/bb
bbfile=$bb/etc/systemd/system/nginx.service.d/ctxshim.conf
mkdir -p "$bb${lib%/*}" "$bb/usr/bin" "$bb/bin" "$bb/opt/real"
cp "$built_lib" "$bb$lib"
elf64 "$bb/bin/busybox" 3 62 /lib/ld-musl-x86_64.so.1
ln -s /bin/busybox "$bb/bin/true"
ln -s ../../bin/busybox "$bb/usr/bin/env"
ln -s /bin/true "$bb/usr/bin/true"
ln -s busybox "$bb/bin/sh"
expect_status 1 "--root: a glibc library in a busybox (musl) root of links is refused" \
	"$S" systemd-dropin --root "$bb" nginx
check "says why (musl, through the links)" contains "$dp_err" "$bb/bin/busybox is linked with musl"
check "nothing written (busybox)" test ! -e "$bbfile"
# The same links to a glibc program: the library suits.  The library
# itself a link to an absolute path of the root.
elf64 "$bb/bin/busybox" 3 62 /lib64/ld-linux-x86-64.so.2
mv "$bb$lib" "$bb/opt/real/libctxshim.so"
ln -s /opt/real/libctxshim.so "$bb$lib"
expect_status 0 "--root: programs and library that are links, followed in the root" \
	"$S" systemd-dropin --root "$bb" nginx
check "written (links)" test -e "$bbfile"
check "no note that nothing was compared" test -n "${dp_err##*was not compared*}"
rm -f "$bbfile"
# A library that is a link to a file of this host only: the root's loader
# would not find it.
rm "$bb$lib"
ln -s "$built_lib" "$bb$lib"
expect_status 1 "--root: a library linked to a file outside the root is refused" \
	"$S" systemd-dropin --root "$bb" nginx
check "says why (outside the root)" contains "$dp_err" "$bb$lib: No such file"
check "nothing written (outside)" test ! -e "$bbfile"
# No program to compare with: written, and said so.
rm "$bb$lib" "$bb/bin/busybox"
cp "$built_lib" "$bb$lib"
expect_status 0 "--root: no program in the root to compare with" \
	"$S" systemd-dropin --root "$bb" nginx
check "says nothing was compared" contains "$dp_err" "the library was not compared with its programs"
rm -f "$bbfile"

printf 'not an ELF file\n' >"$broken$lib"
expect_status 1 "--root: a file that is not a library is refused" \
	"$S" systemd-dropin --root "$broken" nginx
check "says why (not a library)" contains "$dp_err" "not a 64-bit little-endian ELF shared library"
check "nothing written (not a library)" test ! -e "$bfile"
rm "$broken$lib"
expect_status 1 "a missing library is refused" "$S" systemd-dropin --root "$broken" nginx
check "names it" contains "$dp_err" "$broken$lib: No such file"
check "nothing written (missing)" test ! -e "$bfile"

# The service loads the library at every start, maybe as root: one that
# another user could replace (an owner other than root, or the root
# directory's owner with --root; a file or directory on the way writable by
# group or others) would run that user's code in it, and is refused (old:
# written).  One that other users cannot load, or in a build directory (a
# developer's test), is written with a warning.  --print checks nothing.
troot=$dp_tmp/trust
tfile=$troot/etc/systemd/system/nginx.service.d/ctxshim.conf
mkdir -p "$troot${lib%/*}" "$troot/usr/bin" "$troot/usr/lib/systemd/system"
chmod 755 "$troot" "$troot/usr" "$troot/usr/lib" "$troot/usr/lib/x86_64-linux-gnu" "$troot${lib%/*}"
cp "$built_lib" "$troot$lib"
chmod 644 "$troot$lib"
cp /bin/true "$troot/usr/bin/true"
unit_file "$troot/usr/lib/systemd/system/nginx.service"
expect_status 0 "trust: an installed library (0644, in 0755 directories) is written" \
	"$S" systemd-dropin --root "$troot" nginx
check "trust: written" test -f "$tfile"
check "trust: the one note, no warning" same "$dp_err" \
	"ctxshim: note: $troot$lib was not test-loaded (--root): start nginx.service in that system to see that it loads"
rm -rf "${troot:?}/etc"
# dropin_refused DESCRIPTION LIB WHY: CTXSHIM_LIB=LIB in $troot is refused
# for WHY, with nothing written; --print prints it without a word.
dropin_refused() {
	expect_status 1 "trust: $1 is refused" \
		env CTXSHIM_LIB="$2" "$S" systemd-dropin --root "$troot" nginx
	check "trust: says why ($1)" same "$dp_err" "ctxshim: refusing to write $tfile: $3
ctxshim: install the library first (meson install, or copy it to /usr/local/lib/ctxshim/ with mode 0644) and point CTXSHIM_LIB there (--print writes the drop-in to stdout without checks)"
	check "trust: nothing written ($1)" test ! -e "$troot/etc"
	expect_status 0 "trust: --print prints it ($1)" \
		env CTXSHIM_LIB="$2" "$S" systemd-dropin --print --root "$troot" nginx
	check "trust: --print names it ($1)" contains "$dp_out" "Environment=\"LD_PRELOAD=$2\""
	check "trust: --print says nothing ($1)" same "$dp_err" ""
}
# dropin_warned DESCRIPTION LIB WHY: written, with a warning that says WHY.
dropin_warned() {
	expect_status 0 "trust: $1 is written" \
		env CTXSHIM_LIB="$2" "$S" systemd-dropin --root "$troot" nginx
	check "trust: written ($1)" contains "$(cat "$tfile")" "Environment=\"LD_PRELOAD=$2\""
	check "trust: the note and a warning ($1)" same "$dp_err" \
		"ctxshim: note: $troot$2 was not test-loaded (--root): start nginx.service in that system to see that it loads
ctxshim: warning: $3"
	rm -rf "${troot:?}/etc"
}
if [ "$(id -u)" = 0 ]; then
	mkdir -p "$troot/home/dev"
	cp "$troot$lib" "$troot/home/dev/libctxshim.so"
	chown 65534 "$troot/home/dev"
	dropin_refused "a library in a directory of another user" /home/dev/libctxshim.so \
		"$troot/home/dev is owned by uid 65534, not root: that user could replace the library that nginx.service loads"
	mkdir -p "$troot/opt/nobody"
	cp "$troot$lib" "$troot/opt/nobody/libctxshim.so"
	chown 65534 "$troot/opt/nobody/libctxshim.so"
	dropin_refused "a library of another user" /opt/nobody/libctxshim.so \
		"$troot/opt/nobody/libctxshim.so is owned by uid 65534, not root: that user could replace the library that nginx.service loads"
else
	echo "# not root: no library of another user"
fi
mkdir -p "$troot/srv/shared"
chmod 777 "$troot/srv/shared"
cp "$troot$lib" "$troot/srv/shared/libctxshim.so"
dropin_refused "a library in a world-writable directory" /srv/shared/libctxshim.so \
	"$troot/srv/shared is writable by its group or by others (mode 777): they could replace the library that nginx.service loads"
mkdir -p "$troot/opt/gw"
cp "$troot$lib" "$troot/opt/gw/libctxshim.so"
chmod 664 "$troot/opt/gw/libctxshim.so"
dropin_refused "a group-writable library" /opt/gw/libctxshim.so \
	"$troot/opt/gw/libctxshim.so is writable by its group or by others (mode 664): they could replace the library that nginx.service loads"
# Through a symbolic link, resolved inside the root: the directory of the
# file it names counts.
ln -s /srv/shared/libctxshim.so "$troot/opt/link.so"
dropin_refused "a link to a library in a world-writable directory" /opt/link.so \
	"$troot/srv/shared is writable by its group or by others (mode 777): they could replace the library that nginx.service loads"
# A build tree (here owned by root): the developer's test.
mkdir -p "$troot/src/ctxshim/build"
chmod 755 "$troot/src" "$troot/src/ctxshim" "$troot/src/ctxshim/build"
: >"$troot/src/ctxshim/build/build.ninja"
cp "$troot$lib" "$troot/src/ctxshim/build/libctxshim.so"
dropin_warned "a library in a build directory" /src/ctxshim/build/libctxshim.so \
	"$troot/src/ctxshim/build is a build directory: the library goes away with the next clean or rebuild"
# ... but not when, further on, another user could replace it.
chmod 666 "$troot/src/ctxshim/build/libctxshim.so"
dropin_refused "a world-writable library in a build directory" /src/ctxshim/build/libctxshim.so \
	"$troot/src/ctxshim/build/libctxshim.so is writable by its group or by others (mode 666): they could replace the library that nginx.service loads"
mkdir -p "$troot/opt/private"
cp "$troot$lib" "$troot/opt/private/libctxshim.so"
chmod 600 "$troot/opt/private/libctxshim.so"
dropin_warned "a library that only its owner can read" /opt/private/libctxshim.so \
	"$troot/opt/private/libctxshim.so is not readable by everyone (mode 600): other users' programs could not load the library"

# A unit with RootDirectory=: its loader opens the library inside that
# directory, and that copy is what another user must not be able to
# replace, with the unit's root and the directories above it (old: only
# the host's copy was checked, and a group-writable one in the root was
# written).
aroot=$troot/srv/app
mkdir -p "$aroot/opt/gw" "$aroot/usr/bin"
chmod 755 "$troot/srv" "$aroot" "$aroot/opt" "$aroot/opt/gw"
cp "$troot$lib" "$aroot/opt/gw/libctxshim.so"
chmod 644 "$aroot/opt/gw/libctxshim.so"
cp /bin/true "$aroot/usr/bin/true"
chmod 644 "$troot/opt/gw/libctxshim.so"
printf '[Service]\nRootDirectory=/srv/app\n' >"$troot/usr/lib/systemd/system/nginx.service"
expect_status 0 "trust: a library in the unit's RootDirectory= is written" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" nginx
check "trust: written (RootDirectory=)" contains "$(cat "$tfile")" \
	"Environment=\"LD_PRELOAD=/opt/gw/libctxshim.so\""
check "trust: the one note (RootDirectory=)" same "$dp_err" \
	"ctxshim: note: $aroot/opt/gw/libctxshim.so was not test-loaded (RootDirectory=/srv/app): start nginx.service to see that it loads"
rm -rf "${troot:?}/etc"
# uroot_refused DESCRIPTION PATH MODE OLD: CTXSHIM_LIB=/opt/gw/libctxshim.so
# is refused when PATH (the copy in the root, the root, a directory above
# it) has MODE, and printed by --print; PATH gets mode OLD again.  The
# unit is $tunit.
tunit=nginx
uroot_refused() {
	chmod "$3" "$2"
	expect_status 1 "trust: $1 is refused" \
		env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" "$tunit"
	check "trust: says why ($1)" same "$dp_err" "ctxshim: refusing to write $tfile: $2 is writable by its group or by others (mode $3): they could replace the library that $tunit.service loads in its RootDirectory=/srv/app
ctxshim: copy the library into /srv/app as root, with mode 0644, where only root can write to it and to every directory from / down to it (--print writes the drop-in to stdout without checks)"
	check "trust: nothing written ($1)" test ! -e "$troot/etc"
	expect_status 0 "trust: --print prints it ($1)" \
		env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --print --root "$troot" "$tunit"
	check "trust: --print says nothing ($1)" same "$dp_err" ""
	chmod "$4" "$2"
}
# (old, these were written: only the host's copy was checked)
uroot_refused "a group-writable library in the unit's root" "$aroot/opt/gw/libctxshim.so" 664 644
uroot_refused "a group-writable root directory of the unit" "$aroot" 775 755
uroot_refused "a world-writable directory above the unit's root" "$troot/srv" 777 755
# A unit's root without the library (its programs print that it cannot
# be preloaded, a warning says so): the one that is put there is what it
# will load, and no other user may be able to put one there (old: only
# the host's copy was checked, and this was written).
mv "$aroot/opt/gw/libctxshim.so" "$aroot/opt/gw/libctxshim.so.away"
expect_status 0 "trust: a unit's root without the library is written" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" nginx
check "trust: warns (a unit's root without the library)" contains "$dp_err" \
	"ctxshim: warning: nginx.service runs in /srv/app (RootDirectory=), which has no /opt/gw/libctxshim.so"
rm -rf "${troot:?}/etc"
chmod 775 "$aroot/opt"
expect_status 1 "trust: a unit's root without the library, where a group can put one, is refused" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" nginx
check "trust: says why (a unit's root without the library)" contains "$dp_err" "ctxshim: refusing to write $tfile: $aroot/opt is writable by its group or by others (mode 775): they could replace the library that nginx.service loads in its RootDirectory=/srv/app
ctxshim: copy the library into /srv/app as root, with mode 0644, where only root can write to it and to every directory from / down to it (--print writes the drop-in to stdout without checks)"
check "trust: nothing written (a unit's root without the library)" test ! -e "$troot/etc"
chmod 755 "$aroot/opt"
# A unit that binds the library in (BindReadOnlyPaths=, BindPaths=) loads
# this host's file, not the root's: no warning, and the host's file is
# what is checked and compared (old: the warning, and the root's path
# checked).  The entries of the unit and its drop-ins in systemd's order;
# an empty one empties the list.
sdir=$troot/usr/lib/systemd/system
mkdir -p "$troot/opt/bound" "$sdir/nginx.service.d"
chmod 755 "$troot/opt/bound"
cp "$troot$lib" "$troot/opt/bound/libctxshim.so"
chmod 644 "$troot/opt/bound/libctxshim.so"
# bound_written DESCRIPTION KEY FILE: written, with the notes that say KEY
# puts $troot/FILE there and that it was not test-loaded.
bound_written() {
	expect_status 0 "bind: $1 is written" \
		env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" nginx
	check "bind: written ($1)" test -f "$tfile"
	check "bind: the notes, no warning ($1)" same "$dp_err" \
		"ctxshim: note: nginx.service's $2= puts $troot$3 at /opt/gw/libctxshim.so in its RootDirectory=/srv/app: that file of this host is the one it loads, and the one checked
ctxshim: note: $troot$3 was not test-loaded (--root): start nginx.service in that system to see that it loads"
	rm -rf "${troot:?}/etc"
}
# bound_refused DESCRIPTION FILE: refused, $troot/FILE being group-writable.
bound_refused() {
	chmod 664 "$troot$2"
	expect_status 1 "bind: $1 is refused" \
		env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" nginx
	check "bind: says why ($1)" contains "$dp_err" "ctxshim: refusing to write $tfile: $troot$2 is writable by its group or by others (mode 664): they could replace the library that nginx.service loads
ctxshim: bind in a copy that root installed with mode 0644, where only root can write to it and to every directory from / down to it (--print writes the drop-in to stdout without checks)"
	check "bind: nothing written ($1)" test ! -e "$troot/etc"
	chmod 644 "$troot$2"
}
printf '[Service]\nRootDirectory=/srv/app\nBindReadOnlyPaths=/opt/gw/libctxshim.so\n' >"$sdir/nginx.service"
bound_written "the library bound in" BindReadOnlyPaths /opt/gw/libctxshim.so
bound_refused "a group-writable library bound in" /opt/gw/libctxshim.so
printf '[Service]\nRootDirectory=/srv/app\nBindReadOnlyPaths=/opt/gw\n' >"$sdir/nginx.service"
bound_written "its directory bound in" BindReadOnlyPaths /opt/gw/libctxshim.so
# The root's programs load the bound file: compared with them, not with
# this host's (old: written for a musl root).
mv "$aroot/usr/bin/true" "$aroot/usr/bin/true.away"
elf64 "$aroot/usr/bin/true" 3 62 /lib/ld-musl-x86_64.so.1
expect_status 1 "bind: a library bound into a musl root is refused" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" nginx
check "bind: says why (musl root)" contains "$dp_err" \
	"libctxshim.so cannot load into the programs of $aroot"
check "bind: nothing written (musl root)" test ! -e "$troot/etc"
mv "$aroot/usr/bin/true.away" "$aroot/usr/bin/true"
# The deepest destination wins; "-" and a source that is not there bind
# nothing; several entries on a line, quoted, with options.
printf '[Service]\nRootDirectory=/srv/app\nBindPaths=/usr:/usr -/opt/none:/opt/gw/libctxshim.so "/opt/bound":/opt/gw:norbind\n' \
	>"$sdir/nginx.service"
bound_written "a SRC:DEST:norbind entry and a missing -SRC" BindPaths /opt/bound/libctxshim.so
bound_refused "a group-writable library bound from elsewhere" /opt/bound/libctxshim.so
# An entry not read here (an escape) assumes no bind; a drop-in that
# empties the list drops it, and its entry counts.
printf '[Service]\nRootDirectory=/srv/app\nBindReadOnlyPaths=/opt/g\\x77\n' >"$sdir/nginx.service"
printf '[Service]\nBindReadOnlyPaths=\nBindReadOnlyPaths=/opt/bound:/opt/gw\n' >"$sdir/nginx.service.d/a.conf"
bound_written "the list emptied by a drop-in, then a bind" BindReadOnlyPaths /opt/bound/libctxshim.so
printf '[Service]\nBindReadOnlyPaths=\n' >"$sdir/nginx.service.d/b.conf"
expect_status 0 "bind: the list emptied by a later drop-in is written" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" nginx
check "bind: warns again (list emptied)" contains "$dp_err" \
	"ctxshim: warning: nginx.service runs in /srv/app (RootDirectory=), which has no /opt/gw/libctxshim.so"
rm -rf "${troot:?}/etc" "$sdir/nginx.service.d"
# An entry not read here may bind anything at the library's path, which
# nothing could then check: refused (old: written with a note).
# bind_unread DESCRIPTION: refused so, and printed by --print.
bind_unread() {
	expect_status 1 "bind: $1 is refused" \
		env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" nginx
	check "bind: says why ($1)" same "$dp_err" \
		"ctxshim: refusing to write $tfile: nginx.service has a BindPaths= or BindReadOnlyPaths= entry that is not read here (an escape, a specifier, two sources for one path): it may put a file at /opt/gw/libctxshim.so that cannot be checked
ctxshim: write the drop-in by hand if that file is safe (--print writes it to stdout without checks)"
	check "bind: nothing written ($1)" test ! -e "$troot/etc"
	expect_status 0 "bind: --print prints it ($1)" \
		env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --print --root "$troot" nginx
}
printf '[Service]\nRootDirectory=/srv/app\nBindReadOnlyPaths=/opt/g\\x77\n' >"$sdir/nginx.service"
bind_unread "an entry with an escape"
# A specifier in an entry elsewhere is no doubt about the library's path
# (old: the note, and its bind not counted).
printf '[Service]\nRootDirectory=/srv/app\nBindReadOnlyPaths=/opt/gw %%S/x:/var/lib/x\n' >"$sdir/nginx.service"
bound_written "a specifier in another entry" BindReadOnlyPaths /opt/gw/libctxshim.so
printf '[Service]\nRootDirectory=/srv/app\nBindReadOnlyPaths=%%S/x:/opt/gw\n' >"$sdir/nginx.service"
bind_unread "a specifier in the source of a bind at the library"
printf '[Service]\nRootDirectory=/srv/app\n' >"$sdir/nginx.service"
mv "$aroot/opt/gw/libctxshim.so.away" "$aroot/opt/gw/libctxshim.so"
# systemd reads the unit file before all drop-ins, and the drop-ins of
# every unit directory by their names: an override in /etc that empties
# the list of the package's unit in /usr/lib drops its bind, and the
# root's group-writable copy is what the service loads (old: /etc's
# drop-ins were read first, the bind counted and this was written).
printf '[Service]\nRootDirectory=/srv/app\nBindReadOnlyPaths=/opt/bound:/opt/gw\n' >"$sdir/nginx.service"
mkdir -p "$troot/etc/systemd/system/nginx.service.d"
printf '[Service]\nBindReadOnlyPaths=\n' >"$troot/etc/systemd/system/nginx.service.d/override.conf"
chmod 664 "$aroot/opt/gw/libctxshim.so"
expect_status 1 "bind: a bind that /etc's drop-in drops is refused" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" nginx
check "bind: says why (dropped by /etc's drop-in)" contains "$dp_err" \
	"ctxshim: refusing to write $tfile: $aroot/opt/gw/libctxshim.so is writable by its group or by others (mode 664)"
check "bind: nothing written (dropped by /etc's drop-in)" test ! -e "$tfile"
chmod 644 "$aroot/opt/gw/libctxshim.so"
# z.conf of /etc binds it again, after override.conf; those of /usr/lib
# are hidden by the ones of /etc of the same names (old: read, and their
# deeper bind of a file that is not there refused)
printf '[Service]\nBindReadOnlyPaths=/opt/bound:/opt/gw\n' >"$troot/etc/systemd/system/nginx.service.d/z.conf"
mkdir -p "$sdir/nginx.service.d"
printf '[Service]\nBindReadOnlyPaths=/opt/none:/opt/gw/libctxshim.so\n' >"$sdir/nginx.service.d/z.conf"
printf '[Service]\nBindReadOnlyPaths=/opt/none:/opt/gw/libctxshim.so\n' >"$sdir/nginx.service.d/override.conf"
bound_written "a bind again in a later drop-in" BindReadOnlyPaths /opt/bound/libctxshim.so
rm -rf "$sdir/nginx.service.d"
# Lines as systemd reads them: one that ends in a backslash goes on with
# the next (comment lines in between dropped), also at the end of a file
# (old: each line by itself: the entry with the backslash was not read and
# refused, the RootDirectory= continued below not seen and the root's
# group-writable copy written, the one that is a continuation a setting).
printf '[Service]\nRootDirectory=/srv/app\nBindReadOnlyPaths=/usr:/usr \\\n# (the list goes on)\n  /opt/bound:/opt/gw\n' >"$sdir/nginx.service"
bound_written "an entry on a continuation line" BindReadOnlyPaths /opt/bound/libctxshim.so
printf '[Service]\nRootDirectory=/srv/app\nBindReadOnlyPaths=/opt/bound:/opt/gw %s' "\\" >"$sdir/nginx.service"
bound_written "a backslash at the end of the file" BindReadOnlyPaths /opt/bound/libctxshim.so
printf '[Service]\nRootDirectory=\\\n  /srv/app\n' >"$sdir/nginx.service"
uroot_refused "a group-writable library in a root on a continuation line" "$aroot/opt/gw/libctxshim.so" 664 644
# A carriage return alone ends a line too, as a newline does (systemd's
# read_line(); old: one line with the Description=, the RootDirectory=
# after it not seen and the root's group-writable copy written).
printf '[Service]\nDescription=web\rRootDirectory=/srv/app\n' >"$sdir/nginx.service"
uroot_refused "a group-writable library in a root set after a carriage return" "$aroot/opt/gw/libctxshim.so" 664 644
# A byte order mark at the start of a file is not read (old: it was the
# start of "[Service]", which was then no section header, and the
# RootDirectory= below not seen).
printf '\357\273\277[Service]\nRootDirectory=/srv/app\n' >"$sdir/nginx.service"
uroot_refused "a group-writable library in a root set after a byte order mark" "$aroot/opt/gw/libctxshim.so" 664 644
printf '[Service]\nEnvironment=A=\\\n  RootDirectory=/srv/app\n' >"$sdir/nginx.service"
chmod 664 "$aroot/opt/gw/libctxshim.so"
expect_status 0 "a RootDirectory= that continues a line is written" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" nginx
check "the host's copy checked (RootDirectory= continues a line)" same "$dp_err" \
	"ctxshim: note: $troot/opt/gw/libctxshim.so was not test-loaded (--root): start nginx.service in that system to see that it loads"
rm -rf "${troot:?}/etc"
chmod 644 "$aroot/opt/gw/libctxshim.so"
# service.d/ is below the unit's own drop-in directories, wherever they
# are: /etc's service.d/root.conf does not hide /usr/lib's
# nginx.service.d/root.conf (old: it did, the RootDirectory= there was not
# seen, and the group-writable copy in the root written).
printf '[Service]\n' >"$sdir/nginx.service"
mkdir -p "$sdir/nginx.service.d" "$troot/etc/systemd/system/service.d"
printf '[Service]\nRootDirectory=/srv/app\n' >"$sdir/nginx.service.d/root.conf"
printf '[Service]\n' >"$troot/etc/systemd/system/service.d/root.conf"
chmod 664 "$aroot/opt/gw/libctxshim.so"
expect_status 1 "a RootDirectory= that service.d/ does not hide is read" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" nginx
check "its copy checked (not hidden by service.d/)" contains "$dp_err" \
	"ctxshim: refusing to write $tfile: $aroot/opt/gw/libctxshim.so is writable by its group or by others (mode 664): they could replace the library that nginx.service loads in its RootDirectory=/srv/app"
check "nothing written (not hidden by service.d/)" test ! -e "$tfile"
chmod 644 "$aroot/opt/gw/libctxshim.so"
rm -rf "${troot:?}/etc" "$sdir/nginx.service.d"
# The drop-ins of the unit name's prefixes up to a dash apply too
# (web-app-.service.d/, web-.service.d/ for web-app-api.service): below
# those of the unit's own name, a longer prefix's hiding a shorter's of
# the same name, and above service.d/ (old: not read, the RootDirectory=
# of web-.service.d/ not seen and the root's group-writable copy written,
# the one of service.d/ not hidden).
tunit=web-app-api
tfile=$troot/etc/systemd/system/web-app-api.service.d/ctxshim.conf
mkdir -p "$sdir/web-.service.d" "$sdir/web-app-.service.d" "$sdir/service.d"
unit_file "$sdir/web-app-api.service"
printf '[Service]\nRootDirectory=/srv/app\n' >"$sdir/web-.service.d/root.conf"
uroot_refused "a group-writable library in a root set in web-.service.d/" "$aroot/opt/gw/libctxshim.so" 664 644
# prefix_hidden FILE: the RootDirectory= of FILE, hidden, is not read: the
# host's copy is checked, not the root's group-writable one.
prefix_hidden() {
	chmod 664 "$aroot/opt/gw/libctxshim.so"
	expect_status 0 "prefix: the RootDirectory= of a hidden $1 is not read" \
		env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" web-app-api
	check "prefix: the host's copy checked (hidden $1)" same "$dp_err" \
		"ctxshim: note: $troot/opt/gw/libctxshim.so was not test-loaded (--root): start web-app-api.service in that system to see that it loads"
	rm -rf "${troot:?}/etc"
	chmod 644 "$aroot/opt/gw/libctxshim.so"
}
printf '[Service]\n' >"$sdir/web-app-.service.d/root.conf"
prefix_hidden web-.service.d/root.conf
rm "$sdir/web-app-.service.d/root.conf"
mv "$sdir/web-.service.d/root.conf" "$sdir/service.d/root.conf"
printf '[Service]\n' >"$sdir/web-.service.d/root.conf"
prefix_hidden service.d/root.conf
# (an instance: through its template, web-app@.service)
tunit=web-app@x
tfile=$troot/etc/systemd/system/web-app@x.service.d/ctxshim.conf
unit_file "$sdir/web-app@.service"
mv "$sdir/service.d/root.conf" "$sdir/web-.service.d/root.conf"
uroot_refused "a group-writable library in a root set in web-.service.d/ (an instance)" "$aroot/opt/gw/libctxshim.so" 664 644
rm -rf "$sdir/web-"* "$sdir/service.d"
tunit=nginx
tfile=$troot/etc/systemd/system/nginx.service.d/ctxshim.conf
# A unit file, a drop-in and a .d/ directory that are links are read as
# that system reads them: an absolute target is a file of the root, not of
# this host (old: followed here, where /opt/units is not, and the
# RootDirectory= they set not seen: the root's group-writable copy was
# written).
rdir=$troot/run/systemd/system
mkdir -p "$rdir" "$troot/opt/units/nginx.d" "$sdir/nginx.service.d"
printf '[Service]\nRootDirectory=/srv/app\n' >"$troot/opt/units/nginx.service"
ln -s /opt/units/nginx.service "$rdir/nginx.service"
uroot_refused "a group-writable library in a root set in a linked unit file" "$aroot/opt/gw/libctxshim.so" 664 644
rm "$rdir/nginx.service"
printf '[Service]\nRootDirectory=/srv/app\n' >"$troot/opt/units/root.conf"
ln -s /opt/units/root.conf "$sdir/nginx.service.d/root.conf"
uroot_refused "a group-writable library in a root set in a linked drop-in" "$aroot/opt/gw/libctxshim.so" 664 644
rm -r "$sdir/nginx.service.d"
mv "$troot/opt/units/root.conf" "$troot/opt/units/nginx.d/root.conf"
ln -s /opt/units/nginx.d "$sdir/nginx.service.d"
uroot_refused "a group-writable library in a root set in a linked .d/ directory" "$aroot/opt/gw/libctxshim.so" 664 644
# A link to /dev/null hides a drop-in of that name still, as in systemd.
mkdir -p "$rdir/nginx.service.d"
ln -s /dev/null "$rdir/nginx.service.d/root.conf"
chmod 664 "$aroot/opt/gw/libctxshim.so"
expect_status 0 "a drop-in hidden by a link to /dev/null is not read" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" nginx
check "the host's copy checked (hidden by /dev/null)" same "$dp_err" \
	"ctxshim: note: $troot/opt/gw/libctxshim.so was not test-loaded (--root): start nginx.service in that system to see that it loads"
rm -rf "${troot:?}/etc" "$rdir/nginx.service.d"
chmod 644 "$aroot/opt/gw/libctxshim.so"
# masked DESCRIPTION UNIT MAIN WHY: the drop-in of UNIT is written, with
# the warning that MAIN is masked (WHY).
masked() {
	expect_status 0 "masked: $1 is written" \
		env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" "$2"
	check "masked: warns that it is masked ($1)" contains "$dp_err" \
		"ctxshim: warning: $3 is masked ($4): systemd does not start it, and the drop-in has no effect until it is unmasked"
	rm -rf "${troot:?}/etc"
}
# A masked unit (a link to /dev/null) is not started: the drop-in is
# written, with a warning (old: none).
ln -s /dev/null "$rdir/nginx.service"
masked "a link to /dev/null" nginx nginx.service "$rdir/nginx.service is a link to /dev/null"
rm -f "$rdir/nginx.service"
# An empty unit file masks the unit too (systemd.unit(5)): above another
# one, by itself, as the template of an instance, as an instance over its
# template, as the target of an alias or of a link out of the unit
# directories (old: read as a unit that sets nothing, without a warning).
# empty_masks DESCRIPTION UNIT MAIN EMPTY: the warning that EMPTY, an
# empty file, masks MAIN.
empty_masks() {
	masked "$1" "$2" "$3" "$4 is empty"
}
: >"$rdir/nginx.service"
empty_masks "an empty unit file above another" nginx nginx.service "$rdir/nginx.service"
mkdir -p "$troot/etc/systemd/system"
: >"$troot/etc/systemd/system/nginx.service"
empty_masks "an empty unit file in /etc" nginx nginx.service "$troot/etc/systemd/system/nginx.service"
: >"$sdir/empty.service"
empty_masks "an empty unit file by itself" empty empty.service "$sdir/empty.service"
ln -s empty.service "$rdir/web.service"
empty_masks "an alias of an empty unit file" web empty.service "$sdir/empty.service"
: >"$troot/opt/units/empty.service"
ln -s /opt/units/empty.service "$rdir/linked.service"
empty_masks "a link to an empty file" linked linked.service "$troot/opt/units/empty.service"
: >"$sdir/empty@.service"
empty_masks "an empty template" empty@x empty@x.service "$sdir/empty@.service"
unit_file "$sdir/empty@.service"
: >"$rdir/empty@x.service"
empty_masks "an empty instance over its template" empty@x empty@x.service "$rdir/empty@x.service"
rm -f "$rdir/nginx.service" "$rdir/web.service" "$rdir/linked.service" "$rdir/empty@x.service" \
	"$sdir/empty.service" "$sdir/empty@.service" "$troot/opt/units/empty.service"
# A link to any character device masks the unit, as systemd 252's
# null_or_empty() has it (old: read as its unit file, without a
# warning); one to a block device does not.  (Device nodes need root.)
mkdir -p "$troot/dev"
if mknod "$troot/dev/zero" c 1 5 2>/dev/null &&
	mknod "$troot/dev/loop9" b 7 9 2>/dev/null; then
	ln -s /dev/zero "$rdir/nginx.service"
	masked "a link to /dev/zero" nginx nginx.service \
		"$rdir/nginx.service is a link to the character device /dev/zero"
	rm -f "$rdir/nginx.service"
	ln -s /dev/loop9 "$rdir/nginx.service"
	expect_status 0 "a unit linked to a block device is written" \
		env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" nginx
	check "no mask (a block device)" not_contains "$dp_err" "masked"
	rm -rf "${troot:?}/etc" "$rdir/nginx.service"
else
	echo "# not root: no device node, a link to one not checked"
fi
rm -rf "${troot:?}/dev"
# A directory or a FIFO of the unit's name is no unit file: systemd 252
# takes the next directory's (old: taken, and the RootDirectory= of the
# one below not seen).
tunit=odd
tfile=$troot/etc/systemd/system/odd.service.d/ctxshim.conf
printf '[Service]\nRootDirectory=/srv/app\n' >"$sdir/odd.service"
mkdir "$rdir/odd.service"
uroot_refused "a group-writable library in a root set in a unit file below a directory of its name" \
	"$aroot/opt/gw/libctxshim.so" 664 644
rmdir "$rdir/odd.service"
mkfifo "$rdir/odd.service"
uroot_refused "a group-writable library in a root set in a unit file below a FIFO of its name" \
	"$aroot/opt/gw/libctxshim.so" 664 644
rm "$rdir/odd.service" "$sdir/odd.service"
tunit=nginx
tfile=$troot/etc/systemd/system/nginx.service.d/ctxshim.conf
# An empty drop-in is no mask: it sets nothing, and hides one of its name
# below it.
mkdir -p "$rdir/nginx.service.d"
: >"$rdir/nginx.service.d/root.conf"
chmod 664 "$aroot/opt/gw/libctxshim.so"
expect_status 0 "an empty drop-in is written" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" nginx
check "no mask, and the drop-in it hides not read" same "$dp_err" \
	"ctxshim: note: $troot/opt/gw/libctxshim.so was not test-loaded (--root): start nginx.service in that system to see that it loads"
rm -rf "${troot:?}/etc" "$rdir/nginx.service.d"
chmod 644 "$aroot/opt/gw/libctxshim.so"
# An alias (a link into a unit directory, here absolute) is the unit of
# its target's name, which systemd looks up by that name, with the
# drop-ins of both names (systemd 252; old: only web.service.d/ read, and
# the RootDirectory= of nginx.service.d/ not seen); the drop-in of the
# alias's name applies while the link is there: a note says so.
ln -s /usr/lib/systemd/system/nginx.service "$rdir/web.service"
tunit=web
tfile=$troot/etc/systemd/system/web.service.d/ctxshim.conf
uroot_refused "a group-writable library in a root set for the target of an alias" "$aroot/opt/gw/libctxshim.so" 664 644
rm -r "$sdir/nginx.service.d"
expect_status 0 "an alias is written" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" web
check "the note on the alias" contains "$dp_err" \
	"ctxshim: note: web.service is an alias of nginx.service ($rdir/web.service is a link): the drop-in applies while that link exists (write it for nginx.service to keep it)"
check "its unit file is found" not_contains "$dp_err" "no unit file"
rm -rf "${troot:?}/etc" "$troot/run" "$troot/opt/units"
tunit=nginx
tfile=$troot/etc/systemd/system/nginx.service.d/ctxshim.conf
# An alias link that systemd 252 rejects (to its own name, to another
# unit type) is skipped, and a lower directory's unit file read (old: a
# link to the same name in /usr/lib was followed round to itself, one to
# a .socket taken: no unit file, and its RootDirectory= not seen).
mkdir -p "$rdir"
printf '[Service]\nRootDirectory=/srv/app\n' >"$sdir/nginx.service"
ln -s ../../../usr/lib/systemd/system/nginx.service "$rdir/nginx.service"
uroot_refused "a group-writable library in a root set below a link to the same name" "$aroot/opt/gw/libctxshim.so" 664 644
rm "$rdir/nginx.service"
ln -s nginx.socket "$rdir/nginx.service"
uroot_refused "a group-writable library in a root set below a link to a socket" "$aroot/opt/gw/libctxshim.so" 664 644
rm "$rdir/nginx.service"
# An instance whose link leads to no unit (gone@x.service: neither it
# nor gone@.service is there) is its template's, and the link is no
# alias, whose target's drop-ins count (systemd 252's
# unit_file_find_fragment(); old: no unit file, the RootDirectory= of
# app@.service not seen and that of gone@x.service.d/ read); as is one
# whose link systemd rejects (to another instance).
printf '[Service]\nRootDirectory=/srv/app\n' >"$sdir/app@.service"
mkdir -p "$rdir/gone@x.service.d"
printf '[Service]\nRootDirectory=/srv/none\n' >"$rdir/gone@x.service.d/root.conf"
tunit=app@x
tfile=$troot/etc/systemd/system/app@x.service.d/ctxshim.conf
for t in gone@x.service gone@.service gone@y.service; do
	ln -s "$t" "$rdir/app@x.service"
	uroot_refused "a group-writable library in a root set in the template of an instance linked to $t" \
		"$aroot/opt/gw/libctxshim.so" 664 644
	rm "$rdir/app@x.service"
done
rm -r "$sdir/app@.service" "$rdir/gone@x.service.d"
# A link of an instance to a template is an alias of the template's
# instance: app@x.service -> web@.service is web@x.service, with the
# drop-ins of web@x.service.d/ (systemd 252; old: named web@.service, and
# those not read).
unit_file "$sdir/web@.service"
mkdir -p "$rdir/web@x.service.d"
printf '[Service]\nRootDirectory=/srv/app\n' >"$rdir/web@x.service.d/root.conf"
ln -s web@.service "$rdir/app@x.service"
uroot_refused "a group-writable library in a root set for the instance of a template that an instance links to" \
	"$aroot/opt/gw/libctxshim.so" 664 644
rm -r "$rdir/web@x.service.d"
expect_status 0 "an alias of an instance to a template is written" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" app@x
check "the note names the template's instance" contains "$dp_err" \
	"ctxshim: note: app@x.service is an alias of web@x.service ($rdir/app@x.service is a link): the drop-in applies while that link exists (write it for web@x.service to keep it)"
rm -rf "${troot:?}/etc" "$rdir/app@x.service" "$sdir/web@.service"
tunit=nginx
tfile=$troot/etc/systemd/system/nginx.service.d/ctxshim.conf
# systemd 252 follows 7 aliases, not 8: the unit then fails to load ("Too
# many levels of symbolic links"), not even by its template (old: 40
# followed, and written with the note of an alias).
unit_file "$sdir/hop0.service"
unit_file "$sdir/ihop1@.service"
i=1
while [ $i -le 8 ]; do
	ln -s "hop$((i - 1)).service" "$rdir/hop$i.service"
	ln -s "ihop$((i + 1))@x.service" "$rdir/ihop$i@x.service"
	i=$((i + 1))
done
expect_status 0 "seven aliases on the way are written" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" hop7
check "an alias through seven" contains "$dp_err" \
	"ctxshim: note: hop7.service is an alias of hop0.service ($rdir/hop7.service is a link)"
rm -rf "${troot:?}/etc"
for t in hop8:hop8 ihop1@x:ihop1@x; do
	expect_status 0 "eight aliases on the way ($t) are written" \
		env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" "${t%%:*}"
	check "warns that it does not load ($t)" contains "$dp_err" \
		"ctxshim: warning: systemd does not load ${t#*:}.service: the links from $rdir/${t#*:}.service go through more than 7 aliases, where it gives up (Too many levels of symbolic links), and the drop-in has no effect until they go through fewer"
	rm -rf "${troot:?}/etc"
done
# Nor is a link 8 aliases away a name of hop0.service, whose drop-ins
# systemd 252 reads (old: read, and their RootDirectory= checked).
mkdir -p "$rdir/hop8.service.d"
printf '[Service]\nRootDirectory=/srv/app\n' >"$rdir/hop8.service.d/root.conf"
chmod 664 "$aroot/opt/gw/libctxshim.so"
expect_status 0 "the unit of a link 8 aliases away is written" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" hop0
check "that link's drop-ins not read" not_contains "$dp_err" "RootDirectory"
rm -rf "${troot:?}/etc"
mv "$rdir/hop8.service.d" "$rdir/hop7.service.d"
tunit=hop0
tfile=$troot/etc/systemd/system/hop0.service.d/ctxshim.conf
uroot_refused "a group-writable library in a root set by a name 7 aliases away" \
	"$aroot/opt/gw/libctxshim.so" 664 644
rm -rf "$rdir/hop7.service.d"
rm -f "$rdir/"hop*.service "$rdir/"ihop*.service "$sdir/hop0.service" "$sdir/ihop1@.service"
tunit=nginx
tfile=$troot/etc/systemd/system/nginx.service.d/ctxshim.conf
# A link to no unit (web.service -> gone.service, which is not there)
# leaves the unit its own name: systemd 252 reads none of gone.service's
# drop-ins for it (old: read, their RootDirectory= checked, and the
# warning named gone.service).
ln -s gone.service "$rdir/web.service"
mkdir -p "$rdir/gone.service.d"
printf '[Service]\nRootDirectory=/srv/app\n' >"$rdir/gone.service.d/root.conf"
chmod 664 "$aroot/opt/gw/libctxshim.so"
expect_status 0 "a link to no unit is written" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" web
check "no unit file of its own name" contains "$dp_err" \
	"ctxshim: warning: no unit file web.service (the link $rdir/web.service leads to none) in $troot's /etc/systemd/system"
check "the drop-ins of the name it links to not read" not_contains "$dp_err" "RootDirectory"
rm -rf "${troot:?}/etc" "$rdir/web.service" "$rdir/gone.service.d"
chmod 644 "$aroot/opt/gw/libctxshim.so"
# The drop-ins of every alias of the unit are read, of their dash
# prefixes too, also where the unit is named by its own name (systemd 252
# reads those of every name that links to it; old: only the aliases
# named on the way, without their dash prefixes: the RootDirectory= of
# web-.service.d/ for the alias web-app.service was not seen).
printf '[Service]\n' >"$sdir/nginx.service"
mkdir -p "$sdir/web-.service.d"
printf '[Service]\nRootDirectory=/srv/app\n' >"$sdir/web-.service.d/root.conf"
ln -s nginx.service "$rdir/web-app.service"
uroot_refused "a group-writable library in a root set for an alias's dash prefix" "$aroot/opt/gw/libctxshim.so" 664 644
tunit=web-app
tfile=$troot/etc/systemd/system/web-app.service.d/ctxshim.conf
uroot_refused "a group-writable library in a root set for the dash prefix of the alias named" "$aroot/opt/gw/libctxshim.so" 664 644
tunit=nginx
tfile=$troot/etc/systemd/system/nginx.service.d/ctxshim.conf
# (not of a link whose name is not a unit's, which systemd skips)
rm -rf "$troot/run" "$sdir/web-.service.d"
mkdir -p "$rdir/web app.service.d"
printf '[Service]\nRootDirectory=/srv/none\n' >"$rdir/web app.service.d/root.conf"
ln -s nginx.service "$rdir/web app.service"
expect_status 0 "a link with a space in its name is no alias" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --print --root "$troot" nginx
check "its drop-ins not read (no warning on /srv/none)" same "$dp_err" ""
rm -rf "$troot/run" "$sdir/nginx.service"
# The unit directories in systemd's order: system.control above the
# others, generator.late below /usr/lib (old: system.control not read,
# generator.late read before /usr/lib; the RootDirectory= that each hides
# was read and the root's group-writable copy refused).
unit_file "$sdir/nginx.service"
chmod 664 "$aroot/opt/gw/libctxshim.so"
for hide in run/systemd/system.control:run/systemd/system \
	usr/lib/systemd/system:run/systemd/generator.late; do
	mkdir -p "$troot/${hide%:*}/nginx.service.d" "$troot/${hide#*:}/nginx.service.d"
	printf '[Service]\n' >"$troot/${hide%:*}/nginx.service.d/root.conf"
	printf '[Service]\nRootDirectory=/srv/app\n' >"$troot/${hide#*:}/nginx.service.d/root.conf"
	expect_status 0 "order: ${hide%:*} hides ${hide#*:}" \
		env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" nginx
	check "order: the host's copy checked (${hide%:*} over ${hide#*:})" same "$dp_err" \
		"ctxshim: note: $troot/opt/gw/libctxshim.so was not test-loaded (--root): start nginx.service in that system to see that it loads"
	rm -rf "${troot:?}/etc" "${troot:?}/run" "$sdir/nginx.service.d"
done
chmod 644 "$aroot/opt/gw/libctxshim.so"
# A drop-in whose name has a tab or a newline is read, as systemd reads
# it, and it names no other file (old: root<tab>.conf was not read, and
# its RootDirectory= not seen; p<newline>q.conf was read as p, which is no
# drop-in, with a RootDirectory= that does not exist, and hid the q.conf
# of /usr/lib, whose RootDirectory= was not seen).
mkdir -p "$rdir/nginx.service.d" "$sdir/nginx.service.d"
tabname=$(printf 'root\t.conf')
printf '[Service]\nRootDirectory=/srv/app\n' >"$rdir/nginx.service.d/$tabname"
uroot_refused "a group-writable library in a root set in a drop-in with a tab in its name" \
	"$aroot/opt/gw/libctxshim.so" 664 644
rm "$rdir/nginx.service.d/$tabname"
printf '[Service]\n' >"$rdir/nginx.service.d/p
q.conf"
printf '[Service]\nRootDirectory=/srv/none\n' >"$rdir/nginx.service.d/p"
printf '[Service]\nRootDirectory=/srv/app\n' >"$sdir/nginx.service.d/q.conf"
uroot_refused "a group-writable library in a root set in a drop-in after one with a newline in its name" \
	"$aroot/opt/gw/libctxshim.so" 664 644
rm -rf "${troot:?}/run" "$sdir/nginx.service.d"
# A bind covers what is below its destination, not the unit's root nor the
# directories on the way there: one that another user can write is
# refused (old: written when bound).
printf '[Service]\nRootDirectory=/srv/app\nBindReadOnlyPaths=/opt/bound:/opt/gw\n' >"$sdir/nginx.service"
for bdir in "$aroot" "$aroot/opt"; do
	chmod 775 "$bdir"
	expect_status 1 "bind: a group-writable ${bdir#"$troot"} is refused" \
		env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" nginx
	check "bind: says why (${bdir#"$troot"})" contains "$dp_err" \
		"ctxshim: refusing to write $tfile: $bdir is writable by its group or by others (mode 775): they could replace the library that nginx.service loads in its RootDirectory=/srv/app"
	check "bind: nothing written (${bdir#"$troot"})" test ! -e "$tfile"
	chmod 755 "$bdir"
done
# (what the bind covers is not checked)
chmod 777 "$aroot/opt/gw"
bound_written "a world-writable directory that the bind covers" BindReadOnlyPaths /opt/bound/libctxshim.so
chmod 755 "$aroot/opt/gw"
# A "-" entry whose source is not there binds what is put there later: no
# other user may be able to (old: skipped, and this was written).
mkdir -p "$troot/opt/drop"
chmod 777 "$troot/opt/drop"
printf '[Service]\nRootDirectory=/srv/app\nBindReadOnlyPaths=-/opt/drop/lib.so:/opt/gw/libctxshim.so\n' >"$sdir/nginx.service"
expect_status 1 "bind: a missing -SRC that another user can create is refused" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" nginx
check "bind: says why (a missing -SRC)" same "$dp_err" "ctxshim: refusing to write $tfile: $troot/opt/drop is writable by its group or by others (mode 777): they could replace the library that nginx.service loads
ctxshim: nginx.service's BindPaths= or BindReadOnlyPaths= entry with \"-\" puts $troot/opt/drop/lib.so at /opt/gw/libctxshim.so in its RootDirectory=/srv/app once it exists: drop that entry, or make that path one where only root can write (--print writes the drop-in to stdout without checks)"
check "bind: nothing written (a missing -SRC)" test ! -e "$tfile"
expect_status 0 "bind: --print prints it (a missing -SRC)" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --print --root "$troot" nginx
check "bind: --print says nothing (a missing -SRC)" same "$dp_err" ""
chmod 755 "$troot/opt/drop"
expect_status 0 "bind: a missing -SRC that only root can create is written" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" nginx
check "bind: the root's copy checked (a missing -SRC)" same "$dp_err" \
	"ctxshim: note: $aroot/opt/gw/libctxshim.so was not test-loaded (RootDirectory=/srv/app): start nginx.service to see that it loads"
rm -rf "${troot:?}/etc" "$troot/opt/drop"
printf '[Service]\nRootDirectory=/srv/app\n' >"$sdir/nginx.service"
# A bind applies without RootDirectory= too (old: not read, and the
# group-writable file that it puts at the library's path was written).
printf '[Service]\nBindReadOnlyPaths=/opt/bound:/opt/gw\n' >"$sdir/nginx.service"
chmod 664 "$troot/opt/bound/libctxshim.so"
expect_status 1 "bind: a group-writable library bound in without RootDirectory= is refused" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" nginx
check "bind: says why (without RootDirectory=)" contains "$dp_err" \
	"ctxshim: refusing to write $tfile: $troot/opt/bound/libctxshim.so is writable by its group or by others (mode 664): they could replace the library that nginx.service loads"
check "bind: nothing written (without RootDirectory=)" test ! -e "$tfile"
chmod 644 "$troot/opt/bound/libctxshim.so"
expect_status 0 "bind: a library bound in without RootDirectory= is written" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" nginx
check "bind: the note (without RootDirectory=)" contains "$dp_err" \
	"ctxshim: note: nginx.service's BindReadOnlyPaths= puts $troot/opt/bound/libctxshim.so at /opt/gw/libctxshim.so in its mount namespace: that file of this host is the one it loads, and the one checked"
rm -rf "${troot:?}/etc"
printf '[Service]\nRootDirectory=/srv/app\n' >"$sdir/nginx.service"
# The commands that systemd runs outside the unit's root
# (RootDirectoryStartOnly=yes, ExecStartPre=+...) load the host's copy:
# one that another user can replace is refused (old: written), and none
# there is no copy for them to load.
printf '[Service]\nRootDirectory=/srv/app\nRootDirectoryStartOnly=yes\n' \
	>"$troot/usr/lib/systemd/system/nginx.service"
chmod 664 "$troot/opt/gw/libctxshim.so"
expect_status 1 "trust: a group-writable copy on the host (RootDirectory=) is refused" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" nginx
check "trust: says why (the host's copy)" same "$dp_err" "ctxshim: refusing to write $tfile: $troot/opt/gw/libctxshim.so is writable by its group or by others (mode 664): they could replace the library that nginx.service loads
ctxshim: nginx.service's commands that run outside RootDirectory=/srv/app (RootDirectoryStartOnly=yes, ExecStartPre=+...) load $troot/opt/gw/libctxshim.so where it exists: remove it, or install it as root with mode 0644, in directories only root can write to (--print writes the drop-in to stdout without checks)"
check "trust: nothing written (the host's copy)" test ! -e "$troot/etc"
mv "$troot/opt/gw/libctxshim.so" "$troot/opt/gw/libctxshim.so.away"
expect_status 0 "trust: no copy on the host (RootDirectory=) is written" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" nginx
rm -rf "${troot:?}/etc"
# none, but where another user could put one (old: written)
chmod 775 "$troot/opt/gw"
expect_status 1 "trust: no copy on the host, in a group-writable directory, is refused" \
	env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin --root "$troot" nginx
check "trust: says why (no copy on the host)" same "$dp_err" "ctxshim: refusing to write $tfile: $troot/opt/gw is writable by its group or by others (mode 775): they could replace the library that nginx.service loads
ctxshim: nginx.service's commands that run outside RootDirectory=/srv/app (RootDirectoryStartOnly=yes, ExecStartPre=+...) load $troot/opt/gw/libctxshim.so where it exists: remove it, or install it as root with mode 0644, in directories only root can write to (--print writes the drop-in to stdout without checks)"
check "trust: nothing written (no copy on the host)" test ! -e "$troot/etc"
chmod 755 "$troot/opt/gw"
mv "$troot/opt/gw/libctxshim.so.away" "$troot/opt/gw/libctxshim.so"
unit_file "$troot/usr/lib/systemd/system/nginx.service"

# Without --root the library must load here: a drop-in with a library that
# does not would stop the service from starting.  That writes below
# /etc/systemd: run it in a mount namespace of its own, with an empty
# tmpfs there, so that the host's /etc is never touched.  The libraries
# are installed there, as root installs them (the build tree's, below a
# /tmp that everyone can write to, is refused: see above).
# private_etc COMMAND...: run it so, with $inst copied to /etc/systemd/inst
# (owners and modes kept); "written" is printed after its output when it
# left a drop-in for nginx.service.
inst=$dp_tmp/inst
# shellcheck disable=SC2317 # called through expect_status
private_etc() {
	# shellcheck disable=SC2016 # expanded by that sh
	unshare -m sh -c 'mount -t tmpfs -o mode=755 dp-test /etc/systemd || exit 99
		cp -a "$0" /etc/systemd/inst || exit 99
		if [ -f "$0/nginx.service" ]; then
			mkdir /etc/systemd/system || exit 99
			cp "$0/nginx.service" /etc/systemd/system/ || exit 99
		fi
		"$@"; rc=$?
		[ ! -e /etc/systemd/system/nginx.service.d/ctxshim.conf ] || echo written
		exit $rc' "$inst" "$@"
}
if [ "$(id -u)" = 0 ] && [ -d /etc/systemd ] && command -v unshare >/dev/null &&
	unshare -m sh -c 'mount -t tmpfs dp-test /etc/systemd' 2>/dev/null; then
	mkdir -p "$inst/lib" "$inst/nope" "$inst/build"
	chmod 755 "$inst" "$inst/lib" "$inst/nope" "$inst/build"
	cp "$built_lib" "$inst/lib/libctxshim.so"
	chmod 644 "$inst/lib/libctxshim.so"
	expect_status 0 "without --root: an installed library loads and is written" \
		private_etc env CTXSHIM_LIB=/etc/systemd/inst/lib/libctxshim.so "$S" systemd-dropin nginx
	check "written (in the private /etc)" contains "$dp_out" "written"
	check "no warning about the library" not_contains "$dp_err" "/etc/systemd/inst"
	check "nothing written to the host" test ! -e /etc/systemd/system/nginx.service.d/ctxshim.conf
	# A developer's test as root: the build tree's library, written with
	# a warning.
	cp "$built_lib" "$inst/build/libctxshim.so"
	: >"$inst/build/build.ninja"
	expect_status 0 "without --root: a library in a build directory is written" \
		private_etc env CTXSHIM_LIB=/etc/systemd/inst/build/libctxshim.so "$S" systemd-dropin nginx
	check "written (build directory)" contains "$dp_out" "written"
	check "with a warning" contains "$dp_err" \
		"ctxshim: warning: /etc/systemd/inst/build is a build directory: the library goes away with the next clean or rebuild"
	chown 65534 "$inst/build"
	expect_status 1 "without --root: a library in a directory of another user is refused" \
		private_etc env CTXSHIM_LIB=/etc/systemd/inst/build/libctxshim.so "$S" systemd-dropin nginx
	check "says why (another user)" contains "$dp_err" \
		"ctxshim: refusing to write /etc/systemd/system/nginx.service.d/ctxshim.conf: /etc/systemd/inst/build is owned by uid 65534, not root"
	check "nothing written (another user)" same "$dp_out" ""
	printf 'int dp_nope(void); int dp_f(void) { return dp_nope(); }\n' >"$dp_tmp/nope.c"
	${CC:-cc} -shared -fPIC -Wl,-z,now -o "$inst/nope/libctxshim.so" "$dp_tmp/nope.c" || exit 1
	expect_status 1 "a library that does not load is refused" \
		private_etc env CTXSHIM_LIB=/etc/systemd/inst/nope/libctxshim.so "$S" systemd-dropin nginx
	check "says why, with the loader's message" contains "$dp_err" "undefined symbol: dp_nope"
	check "nothing written (does not load)" same "$dp_out" ""
	# A unit with RootDirectory=: the copy there is checked, from / down
	# (this host has no /opt/gw/libctxshim.so: not what the unit loads).
	mkdir -p "$inst/app/opt/gw" "$inst/app/usr/bin"
	chmod 755 "$inst/app" "$inst/app/opt" "$inst/app/opt/gw"
	cp "$built_lib" "$inst/app/opt/gw/libctxshim.so"
	chmod 664 "$inst/app/opt/gw/libctxshim.so"
	cp /bin/true "$inst/app/usr/bin/true"
	printf '[Service]\nRootDirectory=/etc/systemd/inst/app\n' >"$inst/nginx.service"
	expect_status 1 "without --root: a group-writable library in the unit's root is refused" \
		private_etc env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin nginx
	check "says why (RootDirectory=)" contains "$dp_err" \
		"ctxshim: refusing to write /etc/systemd/system/nginx.service.d/ctxshim.conf: /etc/systemd/inst/app/opt/gw/libctxshim.so is writable by its group or by others (mode 664): they could replace the library that nginx.service loads in its RootDirectory=/etc/systemd/inst/app"
	check "nothing written (RootDirectory=)" same "$dp_out" ""
	chmod 644 "$inst/app/opt/gw/libctxshim.so"
	expect_status 0 "without --root: a library in the unit's root is written" \
		private_etc env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin nginx
	check "written (RootDirectory=)" contains "$dp_out" "written"
	check "not test-loaded here (RootDirectory=)" contains "$dp_err" \
		"ctxshim: note: /etc/systemd/inst/app/opt/gw/libctxshim.so was not test-loaded (RootDirectory=/etc/systemd/inst/app): start nginx.service to see that it loads"
	# Bound in from this host: that file is what is test-loaded (old: this
	# host's /opt/gw/libctxshim.so, which does not exist, was asked for).
	rm "$inst/app/opt/gw/libctxshim.so"
	printf '[Service]\nRootDirectory=/etc/systemd/inst/app\nBindReadOnlyPaths=/etc/systemd/inst/nope/libctxshim.so:/opt/gw/libctxshim.so\n' >"$inst/nginx.service"
	expect_status 1 "without --root: a bound library that does not load is refused" \
		private_etc env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin nginx
	check "says why, with the loader's message (bound)" contains "$dp_err" "undefined symbol: dp_nope"
	printf '[Service]\nRootDirectory=/etc/systemd/inst/app\nBindReadOnlyPaths=/etc/systemd/inst/lib/libctxshim.so:/opt/gw/libctxshim.so\n' >"$inst/nginx.service"
	expect_status 0 "without --root: a bound library that loads is written" \
		private_etc env CTXSHIM_LIB=/opt/gw/libctxshim.so "$S" systemd-dropin nginx
	check "written (bound)" contains "$dp_out" "written"
	check "no warning about the root (bound)" not_contains "$dp_err" "which has no"
	check "the note (bound)" contains "$dp_err" \
		"ctxshim: note: nginx.service's BindReadOnlyPaths= puts /etc/systemd/inst/lib/libctxshim.so at /opt/gw/libctxshim.so in its RootDirectory=/etc/systemd/inst/app: that file of this host is the one it loads, and the one checked"
	rm -rf "$inst/app" "$inst/nginx.service"
	# A statically linked true first in PATH ignores LD_PRELOAD: it must
	# not be what the library is tested with.
	printf 'int main(void) { return 0; }\n' >"$dp_tmp/true.c"
	if mkdir "$dp_tmp/static" &&
		${CC:-cc} -static -o "$dp_tmp/static/true" "$dp_tmp/true.c" 2>/dev/null; then
		expect_status 1 "refused with a static true first in PATH" \
			private_etc env PATH="$dp_tmp/static:$PATH" \
			CTXSHIM_LIB=/etc/systemd/inst/nope/libctxshim.so "$S" systemd-dropin nginx
		check "nothing written (static true)" same "$dp_out" ""
	fi
else
	echo "# not root or no mount namespace: the test-load without --root not run"
fi

expect_status 64 "no unit" "$S" systemd-dropin --print
expect_status 64 "two units" "$S" systemd-dropin --print a b
expect_status 64 "not a service" "$S" systemd-dropin --print foo.socket
expect_status 64 "path in the name" "$S" systemd-dropin --print ../../etc/x.service
expect_status 64 "--print with --remove" "$S" systemd-dropin --print --remove foo
expect_status 1 "--root must exist" "$S" systemd-dropin --root "$dp_tmp/none" foo

# systemd parses it: systemd-analyze verify loads the unit and its drop-ins
# from SYSTEMD_UNIT_PATH and warns about every line it cannot use.
if command -v systemd-analyze >/dev/null 2>&1; then
	units=$dp_tmp/units
	mkdir -p "$units/dp-test.service.d"
	printf '[Unit]\nDescription=test\n[Service]\nExecStart=/bin/true\n' \
		>"$units/dp-test.service"
	printf '[Service]\nEnvironment="X=a\\q"\n' >"$units/dp-test.service.d/bad.conf"
	SYSTEMD_UNIT_PATH=$units: systemd-analyze verify dp-test.service \
		>"$dp_tmp/verify" 2>&1
	check "systemd-analyze verify reports a bad drop-in (control)" \
		grep -q 'bad.conf' "$dp_tmp/verify"
	rm "$units/dp-test.service.d/bad.conf"
	"$S" systemd-dropin --print -n 'a b%c"d\e' -r k=v --log /tmp/x.log dp-test \
		>"$units/dp-test.service.d/ctxshim.conf"
	SYSTEMD_UNIT_PATH=$units: systemd-analyze verify dp-test.service \
		>"$dp_tmp/verify" 2>&1
	if grep -q ctxshim.conf "$dp_tmp/verify"; then
		fail "systemd-analyze verify complains about the drop-in"
		cat "$dp_tmp/verify"
	else
		ok "systemd-analyze verify accepts the drop-in"
	fi
else
	echo "# systemd-analyze not installed: drop-in not verified by systemd"
fi

dp_finish
