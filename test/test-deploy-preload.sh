#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# ctxshim preload install|uninstall|status against temporary roots: the
# previous /etc/ld.so.preload comes back byte for byte (and mode), with and
# without a file before; --dry-run changes nothing; an edit made after the
# install survives the uninstall; commented-out entries are not entries;
# installing another library path replaces the entry and keeps the first
# backup; a library that another user could replace or that other users
# cannot read is refused; the root's symbolic links are followed inside it,
# never to this host's files, and a link loop is refused.

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
check "about the root, not this host (old)" contains "$dp_err" \
	"ctxshim: WARNING: the system in $root load libctxshim.so"
check "the undo command names the root (old: this host's)" contains "$dp_err" \
	"ctxshim: WARNING: first.  To undo: ctxshim preload uninstall --root $(cd "$root" && pwd -P)"
check "file holds the library" same "$(cat "$pf")" "$lib"
check "file is 0644" same "$(stat -c %a "$pf")" 644
expect_status 0 "status: installed" "$S" preload status --root "$root"
check "status names the entry" contains "$dp_out" "installed: $lib in $pf"
# An entry is the file's bytes: a terminal escape in one is shown escaped
# (old: raw, to the terminal).
mkdir -p "$dp_tmp/resc/etc"
printf '/usr/lib/\033[2J/libctxshim.so\n' >"$dp_tmp/resc/etc/ld.so.preload"
expect_status 0 "status: an entry with an escape" "$S" preload status --root "$dp_tmp/resc"
check "names the entry escaped" contains "$dp_out" \
	"installed: /usr/lib/\\x1b[2J/libctxshim.so in $dp_tmp/resc/etc/ld.so.preload (the library does not exist!)"
# Its answer is its exit status: a report that cannot be written is
# "cannot tell" (old: exit 0 after "printf: I/O error"); so is one of "not
# installed" (old: exit 1).
mkdir -p "$dp_tmp/no-preload/etc"
# shellcheck disable=SC2016 # expanded by that sh
for r in "$root" "$dp_tmp/no-preload"; do
	expect_status 2 "status to a full device" \
		sh -c 'exec "$0" preload status --root "$1" >/dev/full' "$S" "$r"
	check "says so" same "$dp_err" "ctxshim: write error: No space left on device"
	expect_status 2 "status to a closed standard output" \
		sh -c 'exec "$0" preload status --root "$1" >&-' "$S" "$r"
	check "says so" same "$dp_err" "ctxshim: write error"
done
after=$(snapshot "$root")
expect_status 0 "install twice" "$S" preload install --root "$root"
check "second install is a no-op" same "$(snapshot "$root")" "$after"
check "says already" contains "$dp_out" "already loads"
expect_status 0 "uninstall --dry-run" "$S" preload uninstall --root "$root" --dry-run
check "dry run changes nothing" same "$(snapshot "$root")" "$after"
expect_status 0 "uninstall" "$S" preload uninstall --root "$root"
check "file removed again" test ! -e "$pf"
# var/ and var/lib/ too, which install created (old: left behind)
check "root as before" same "$(snapshot "$root")" "$before"
expect_status 1 "status after uninstall" "$S" preload status --root "$root"
expect_status 0 "uninstall again is a no-op" "$S" preload uninstall --root "$root"

# The undo command of the warning is the rest of its line, as it is pasted
# into a shell (old: in quotes, around the root in quotes of its own:
# 'ctxshim preload uninstall --root '/a b''), and it undoes the install;
# also the directories that install created, and those only.
# undo_line: the command after "To undo: " in $dp_err.
undo_line() {
	printf '%s\n' "$dp_err" | sed -n 's/^ctxshim: WARNING: first\.  To undo: //p'
}
for name in 'a b' "it's"; do
	root=$dp_tmp/$name
	mkdir -p "$root${lib%/*}"
	cp "$built_lib" "$root$lib"
	before=$(snapshot "$root")
	expect_status 0 "install below '$name'" "$S" preload install --root "$root"
	undo=$(undo_line)
	real=$(cd "$root" && pwd -P)
	case $name in
	"it's") quoted="'${real%/*}/it'\\''s'" ;;
	*) quoted="'$real'" ;;
	esac
	check "the undo command quotes '$name' once" same "$undo" \
		"ctxshim preload uninstall --root $quoted"
	expect_status 0 "sh runs it" env PATH="${S%/*}:$PATH" sh -c "$undo"
	check "it undid the install below '$name', etc/ and var/ too" \
		same "$(snapshot "$root")" "$before"
done
# Only empty ones: a file put in var/lib since keeps var/lib and var.
new_root r-made
expect_status 0 "install" "$S" preload install --root "$root"
: >"$root/var/lib/other"
expect_status 0 "uninstall" "$S" preload uninstall --root "$root"
check "keeps etc/, which was there before" test -d "$root/etc"
check "removes var/lib/ctxshim/" test ! -e "$root/var/lib/ctxshim"
check "keeps var/lib/ with a file in it" test -f "$root/var/lib/other"
# Those that were there before stay (var/lib/ctxshim itself goes when
# empty, as it did).
new_root r-older
mkdir -p "$root/var/lib/ctxshim"
expect_status 0 "install" "$S" preload install --root "$root"
check "notes none of them" test ! -e "$root/var/lib/ctxshim/made-dirs"
expect_status 0 "uninstall" "$S" preload uninstall --root "$root"
check "keeps var/lib/" test -d "$root/var/lib"
# A link planted below the root (var -> a directory outside it), and
# made-dirs edited: uninstall does not follow the link to remove an empty
# lib/ there (old: it did).
new_root r-link
mkdir -p "$dp_tmp/outside/lib/ctxshim"
printf 'var/lib\nvar\n' >"$dp_tmp/outside/lib/ctxshim/made-dirs"
ln -s "$dp_tmp/outside" "$root/var"
expect_status 0 "uninstall with var a link out of the root" "$S" preload uninstall --root "$root"
check "keeps the directory outside the root" test -d "$dp_tmp/outside/lib"
check "and the link" test -L "$root/var"

# ------------------------------------------------------------ links in the root

# An image tree's links point into the image: var -> /data/var is the
# root's /data/var, not this host's (old: install wrote the state into
# this host's directory through the link, and uninstall left its lib/
# there).  So are relative links, and a ".." that would climb out of the
# root stops at it, as it does in the image.  $outside stands for a
# directory of this host: it does not change, and uninstall leaves the
# root as it was.
outside=$dp_tmp/outside-host
mkdir -p "$outside/etc"
printf '/usr/lib/libhost.so\n' >"$outside/etc/ld.so.preload"
outside_before=$(snapshot "$outside")
# link_case NAME LINK TARGET WHERE: a new root with LINK -> TARGET in it:
# install, status and uninstall work on WHERE (the root's directory that
# the link names) and leave $outside alone.
link_case() {
	new_root "$1"
	[ "$2" != etc ] || rmdir "$root/etc"
	ln -s "$3" "$root/$2"
	before=$(snapshot "$root")
	expect_status 0 "$1: install" "$S" preload install --root "$root"
	case $2 in
	etc)
		check "$1: writes the root's $4/ld.so.preload" same \
			"$(cat "$root$4/ld.so.preload")" "$lib"
		state=/var/lib/ctxshim
		;;
	*)
		check "$1: writes ld.so.preload" same "$(cat "$pf")" "$lib"
		state=$4/lib/ctxshim
		;;
	esac
	check "$1: the state in the root's $state" test -f "$root$state/ld.so.preload.absent"
	check "$1: nothing changes outside the root" same "$(snapshot "$outside")" "$outside_before"
	expect_status 0 "$1: status" "$S" preload status --root "$root"
	check "$1: status reads the root's state" contains "$dp_out" "there was no"
	expect_status 0 "$1: uninstall" "$S" preload uninstall --root "$root"
	check "$1: the root as before, the directories made in $4 too" \
		same "$(snapshot "$root")" "$before"
	check "$1: nothing changed outside the root" same "$(snapshot "$outside")" "$outside_before"
}
link_case l-var-abs var "$outside" "$outside"
link_case l-var-up var "$(climb "$dp_tmp/l-var-up")${outside#/}" "$outside"
link_case l-var-rel var data/var /data/var
link_case l-etc-abs etc "$outside/etc" "$outside/etc"
# ld.so.preload itself an absolute link: status reads the root's file it
# names (old: this host's), install and uninstall refuse the link as they
# do a relative one, and the file of this host stays as it is.
new_root l-pf
mkdir -p "$root$outside/etc"
printf '/usr/lib/libfoo.so\n' >"$root$outside/etc/ld.so.preload"
ln -s "$outside/etc/ld.so.preload" "$pf"
printf '%s\n' "$lib" >"$outside/etc/ld.so.preload"
outside_before=$(snapshot "$outside")
expect_status 1 "l-pf: status reads the root's file, without the entry" \
	"$S" preload status --root "$root"
check "l-pf: names it" same "$dp_out" \
	"not installed ($root$outside/etc/ld.so.preload does not name libctxshim.so)"
expect_status 1 "l-pf: install refuses the link" "$S" preload install --root "$root"
check "l-pf: says why" contains "$dp_err" "$pf is a symbolic link (to $outside/etc/ld.so.preload)"
check "l-pf: nothing changes outside the root" same "$(snapshot "$outside")" "$outside_before"
printf '/usr/lib/libhost.so\n' >"$outside/etc/ld.so.preload"
printf '%s\n' "$lib" >"$root$outside/etc/ld.so.preload"
outside_before=$(snapshot "$outside")
expect_status 0 "l-pf: status reads the root's file, with the entry" \
	"$S" preload status --root "$root"
expect_status 1 "l-pf: uninstall refuses the link" "$S" preload uninstall --root "$root"
check "l-pf: says why" contains "$dp_err" "$pf is a symbolic link (to $outside/etc/ld.so.preload)"
check "l-pf: the root's file unchanged" same "$(cat "$root$outside/etc/ld.so.preload")" "$lib"
check "l-pf: nothing changed outside the root" same "$(snapshot "$outside")" "$outside_before"
# A link left in the place of the temporary file is removed, not written
# through (old: the new file was written into this host's file).
new_root l-new
ln -s "$outside/etc/ld.so.preload" "$pf.ctxshim-new"
outside_before=$(snapshot "$outside")
expect_status 0 "l-new: install over a stale link" "$S" preload install --root "$root"
check "l-new: writes ld.so.preload" same "$(cat "$pf")" "$lib"
check "l-new: and no link is left" test ! -L "$pf.ctxshim-new"
check "l-new: nothing changed outside the root" same "$(snapshot "$outside")" "$outside_before"
ln -s "$outside/etc/ld.so.preload" "$pf.ctxshim-new"
printf '/usr/lib/libfoo.so\n%s\n' "$lib" >"$pf"
expect_status 0 "l-new: uninstall over a stale link" "$S" preload uninstall --root "$root"
check "l-new: takes the entry out" same "$(cat "$pf")" /usr/lib/libfoo.so
check "l-new: nothing changed outside the root" same "$(snapshot "$outside")" "$outside_before"
# A link loop: one line that names the path and the link, and nothing
# written; status cannot tell (old: mkdir's message, or "not installed").
# loop_case NAME LINK OTHER PATH: LINK -> /OTHER and OTHER -> /LINK in a
# new root, where PATH cannot be resolved.
loop_case() {
	new_root "$1"
	[ "$2" != etc ] || rmdir "$root/etc"
	ln -s "/$3" "$root/$2"
	ln -s "/$2" "$root/$3"
	before=$(snapshot "$root")
	for a in install uninstall status; do
		want=1
		[ $a != status ] || want=2
		expect_status $want "$1: $a refuses a link loop in $2" "$S" preload $a --root "$root"
		check "$1: $a: one line that names the path and why" same "$dp_err" \
			"ctxshim: cannot resolve $root$4 inside $root: $root/$2: Too many levels of symbolic links"
		check "$1: $a: nothing written" same "$(snapshot "$root")" "$before"
	done
}
loop_case l-loop-var var var2 /var/lib/ctxshim
loop_case l-loop-etc etc etc2 /etc

# A root whose name ends with a newline is that directory, not the one
# without it ($(...) drops the newlines that end its output; old: the
# other, and "/<newline>" was this host).
new_root r-nl
nlroot="$root
"
mkdir -p "$nlroot${lib%/*}"
cp "$built_lib" "$nlroot$lib"
before=$(snapshot "$root")
expect_status 0 "install below a root that ends with a newline" \
	"$S" preload install --root "$nlroot"
check "writes its ld.so.preload" same "$(cat "$nlroot/etc/ld.so.preload")" "$lib"
check "not that of the root without the newline" same "$(snapshot "$root")" "$before"
expect_status 0 "status: installed there" "$S" preload status --root "$nlroot"
expect_status 0 "uninstall there" "$S" preload uninstall --root "$nlroot"
check "removes it" test ! -e "$nlroot/etc/ld.so.preload"

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
# The mode comes back whatever the umask (a root shell with umask 077
# would leave a file that other users' programs cannot read).
new_root r2u
printf '/usr/lib/libfoo.so\n' >"$pf"
chmod 644 "$pf"
# shellcheck disable=SC2016 # expanded by that sh
for a in install uninstall; do
	expect_status 0 "$a with umask 077" \
		sh -c 'umask 077 && exec "$0" preload "$1" --root "$2"' "$S" "$a" "$root"
done
check "mode 0644 restored" same "$(stat -c %a "$pf")" 644

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

# Hand-made, without a final newline: the other lines stay byte for byte,
# the last one still without a newline.
new_root r7
printf '# keep\r\n%s\n\n\t/usr/lib/libz.so  \t# z:%s\n/usr/lib/liby.so' "$lib" "$lib" >"$pf"
printf '# keep\r\n\n\t/usr/lib/libz.so  \t# z:%s\n/usr/lib/liby.so' "$lib" >"$dp_tmp/r7.want"
expect_status 0 "uninstall from a file without a final newline" "$S" preload uninstall --root "$root"
check "other lines byte for byte, no newline added" cmp "$pf" "$dp_tmp/r7.want"
new_root r8
printf '/usr/lib/liby.so\n/opt/old/libctxshim.so' >"$pf"
expect_status 0 "install over another path, no final newline" "$S" preload install --root "$root"
check "replaced in place, no newline added" same "$(od -An -c "$pf" | tr -d ' \n')" \
	"$(printf '/usr/lib/liby.so\n%s' "$lib" | od -An -c | tr -d ' \n')"
expect_status 0 "uninstall" "$S" preload uninstall --root "$root"
check "restored, without the old entry" same "$(cat "$pf")" /usr/lib/liby.so
# The entry is the last line, without a newline: the line before it keeps
# its own.
new_root r9
printf '/usr/lib/liby.so\n/opt/old/libctxshim.so' >"$pf"
expect_status 0 "uninstall of a last line without a newline" "$S" preload uninstall --root "$root"
check "the line before keeps its newline" same "$(od -An -c "$pf" | tr -d ' \n')" \
	"$(printf '/usr/lib/liby.so\n' | od -An -c | tr -d ' \n')"

# ------------------------------------------------------------ comments

# The loader ignores "#" to the end of the line: a commented-out entry is
# not an installed one, and its line stays as it is.
new_root c1
printf '#%s\n' "$lib" >"$pf"
cp -p "$pf" "$dp_tmp/c1.orig"
expect_status 1 "status: a commented-out entry is not installed" "$S" preload status --root "$root"
check "says not installed" contains "$dp_out" "not installed"
expect_status 0 "install next to a commented-out entry" "$S" preload install --root "$root"
check "entry added after the comment" same "$(cat "$pf")" "#$lib
$lib"
expect_status 0 "uninstall" "$S" preload uninstall --root "$root"
check "comment restored" cmp "$pf" "$dp_tmp/c1.orig"

new_root c2
printf '/usr/lib/libfoo.so # was %s\n%s # ours\n/usr/lib/libz.so\n' "$lib" "$lib" >"$pf"
expect_status 0 "uninstall of an entry with comments around" "$S" preload uninstall --root "$root"
check "a comment naming the library stays byte for byte; only the entry goes" \
	same "$(cat "$pf")" "/usr/lib/libfoo.so # was $lib
# ours
/usr/lib/libz.so"
expect_status 1 "status afterwards: not installed" "$S" preload status --root "$root"

# ------------------------------------------------------------ another path

# Installing again with another library path replaces the entry (two
# copies of the shim would both step aside), and keeps the first backup.
lib2=/opt/ctxshim2/libctxshim.so
new_root p1
mkdir -p "$root${lib2%/*}"
cp "$built_lib" "$root$lib2"
printf '/usr/lib/libfoo.so\n' >"$pf"
cp -p "$pf" "$dp_tmp/p1.orig"
"$S" preload install --root "$root" >/dev/null 2>&1
expect_status 0 "install with another path" env CTXSHIM_LIB=$lib2 "$S" preload install --root "$root"
check "says it replaced the entry" contains "$dp_out" "replaced $lib by $lib2"
check "one entry, the new one, in place of the old" same "$(cat "$pf")" "/usr/lib/libfoo.so
$lib2"
check "the first backup is kept" cmp "$root/var/lib/ctxshim/ld.so.preload.orig" "$dp_tmp/p1.orig"
expect_status 0 "status" "$S" preload status --root "$root"
check "status shows one entry" same "$(printf '%s\n' "$dp_out" | grep -c '^installed:')" 1
expect_status 0 "uninstall" "$S" preload uninstall --root "$root"
check "restored byte for byte" cmp "$pf" "$dp_tmp/p1.orig"
expect_status 1 "status: not installed" "$S" preload status --root "$root"

# Duplicates written by hand become one entry.
new_root p2
printf '%s\n/usr/lib/libfoo.so:%s\n' "$lib" "$lib" >"$pf"
expect_status 0 "install over duplicate entries" "$S" preload install --root "$root"
check "one entry left" same "$(cat "$pf")" "$lib
/usr/lib/libfoo.so"

# What an older ctxshim left after two installs: both entries in the file
# and the first one in the backup.  Uninstall leaves none of them.
new_root p3
mkdir -p "$root/var/lib/ctxshim"
printf '/usr/lib/libfoo.so\n%s\n' "$lib" >"$root/var/lib/ctxshim/ld.so.preload.orig"
printf '/usr/lib/libfoo.so\n%s\n%s\n' "$lib" "$lib2" >"$pf"
cp "$pf" "$root/var/lib/ctxshim/ld.so.preload.installed"
expect_status 0 "uninstall after two installs by an older ctxshim" "$S" preload uninstall --root "$root"
check "no libctxshim.so entry is left" same "$(cat "$pf")" /usr/lib/libfoo.so

# A backup left by an earlier install (uninstalled after an edit) is never
# overwritten: it is moved aside.
new_root p4
mkdir -p "$root/var/lib/ctxshim"
printf 'old backup\n' >"$root/var/lib/ctxshim/ld.so.preload.orig"
printf '/usr/lib/libnow.so\n' >"$pf"
cp -p "$pf" "$dp_tmp/p4.orig"
expect_status 0 "install with an old backup in place" "$S" preload install --root "$root"
check "old backup moved aside" same "$(cat "$root/var/lib/ctxshim/ld.so.preload.orig.1")" "old backup"
check "new backup is the current file" cmp "$root/var/lib/ctxshim/ld.so.preload.orig" "$dp_tmp/p4.orig"
"$S" preload uninstall --root "$root" >/dev/null 2>&1
check "uninstall restores the file from before this install" cmp "$pf" "$dp_tmp/p4.orig"

# The file removed by hand after the install: uninstall has no entry to
# take out, and keeps the backup, all that is left of the file before.
new_root p5
printf '/usr/lib/libimportant.so\n' >"$pf"
"$S" preload install --root "$root" >/dev/null 2>&1
rm "$pf"
expect_status 0 "uninstall after the file was removed by hand" \
	"$S" preload uninstall --root "$root"
check "says the file from before is kept" contains "$dp_err" \
	"kept in $root/var/lib/ctxshim/ld.so.preload.orig"
check "the backup is kept" same \
	"$(cat "$root/var/lib/ctxshim/ld.so.preload.orig")" /usr/lib/libimportant.so

# A symbolic link is refused: the rename would replace it by a file, and
# uninstall could not make it a link again.
new_root p6
mkdir -p "$root/srv"
printf '/usr/lib/libfoo.so\n' >"$root/srv/preload"
ln -s ../srv/preload "$pf"
expect_status 1 "install refuses a symbolic link" "$S" preload install --root "$root"
check "names the link's target" contains "$dp_err" "is a symbolic link (to ../srv/preload)"
check "the link stays" test -L "$pf"
check "the file it points to is unchanged" same "$(cat "$root/srv/preload")" \
	/usr/lib/libfoo.so
# Uninstall too, of an entry written by hand into the file it points to
# (old: the link became a file; the entry stayed in the file it named).
printf '/usr/lib/libfoo.so\n%s\n' "$lib" >"$root/srv/preload"
cp "$root/srv/preload" "$dp_tmp/p6.want"
for o in --dry-run ""; do
	# shellcheck disable=SC2086 # no option, or one
	expect_status 1 "uninstall${o:+ $o} refuses a symbolic link" \
		"$S" preload uninstall $o --root "$root"
	check "says what to do by hand" same "$dp_err" \
		"ctxshim: $pf is a symbolic link (to ../srv/preload): uninstall would replace the link by a file; remove $lib from the file it points to by hand"
	check "the link stays" test -L "$pf"
	check "the file it points to is unchanged" cmp "$root/srv/preload" "$dp_tmp/p6.want"
done

# A relative --root with CDPATH exported: cd would find the name through
# CDPATH and print it into the path.
new_root p7
dp_before=$dp_failed # the subshell fails only for its own checks
(
	cd "$dp_tmp" || exit 1
	CDPATH=.:/usr
	export CDPATH
	expect_status 0 "relative --root with CDPATH" \
		"$S" preload install --root p7 --dry-run
	check "the root's file" contains "$dp_out" "would append $lib to $pf"
	[ "$dp_failed" = "$dp_before" ]
) || fail "relative --root with CDPATH"

# ------------------------------------------------------------ trust

# Every process loads the library, setuid programs included: it must not
# be replaceable by another user, and every user must be able to load it.
# refused NAME DESCRIPTION: install of CTXSHIM_LIB below root NAME fails
# with DESCRIPTION in the message and writes nothing.
refused() {
	expect_status 1 "install refuses $2" "$S" preload install --root "$root"
	check "says why ($2)" contains "$dp_err" "$2"
	check "hints at installing the library" contains "$dp_err" "meson install"
	check "nothing written ($2)" test ! -e "$pf"
}
new_root t1
mkdir -p "$root/home/dev/build"
chmod 700 "$root/home/dev"
cp "$built_lib" "$root/home/dev/build/libctxshim.so"
CTXSHIM_LIB=/home/dev/build/libctxshim.so refused t1 "$root/home/dev is not searchable by everyone"
expect_status 1 "--dry-run refuses it too" env CTXSHIM_LIB=/home/dev/build/libctxshim.so \
	"$S" preload install --root "$root" --dry-run
new_root t2
chmod 775 "$root${lib%/*}"
refused t2 "$root${lib%/*} is writable by its group or by others"
new_root t3
chmod 646 "$root$lib"
refused t3 "$root$lib is writable by its group or by others"
new_root t4
chmod 600 "$root$lib"
refused t4 "$root$lib is not readable by everyone"
# Through a symbolic link into a world-writable directory.
new_root t5
mkdir -p "$root/scratch"
chmod 1777 "$root/scratch"
mv "$root$lib" "$root/scratch/libctxshim.so"
ln -s ../../../scratch/libctxshim.so "$root$lib"
refused t5 "$root/scratch is writable by its group or by others"
if [ "$(id -u)" = 0 ]; then
	new_root t6
	chown 65534 "$root$lib"
	refused t6 "$root$lib is owned by uid 65534, not root"
fi
# A build tree (here root-owned and safe otherwise): gone with the next clean.
new_root t8
mkdir -p "$root/src/ctxshim/build"
: >"$root/src/ctxshim/build/build.ninja"
cp "$built_lib" "$root/src/ctxshim/build/libctxshim.so"
CTXSHIM_LIB=/src/ctxshim/build/libctxshim.so refused t8 "$root/src/ctxshim/build is a build directory"
# A safe symbolic link (the libdir link of an install) is fine.
new_root t7
ln -s ctxshim-test/libctxshim.so "$root/usr/lib/libctxshim.so"
expect_status 0 "install through a safe symbolic link" env CTXSHIM_LIB=/usr/lib/libctxshim.so \
	"$S" preload install --root "$root"
check "the link's path is written" same "$(cat "$pf")" /usr/lib/libctxshim.so
# An absolute link is the root's: /usr/lib/ctxshim-test/... of the root, not
# of this host (which has no such file).
new_root t9
ln -s /usr/lib/ctxshim-test/libctxshim.so "$root/usr/lib/libctxshim.so"
expect_status 0 "install through an absolute link inside the root" \
	env CTXSHIM_LIB=/usr/lib/libctxshim.so "$S" preload install --root "$root"
check "the absolute link's path is written" same "$(cat "$pf")" /usr/lib/libctxshim.so
expect_status 0 "status through the absolute link" "$S" preload status --root "$root"
case $dp_out in
*"does not exist"*) fail "status finds the library in the root: $dp_out" ;;
*) ok "status finds the library in the root" ;;
esac

# ------------------------------------------------------------ errors

new_root r6
rm "$root$lib"
expect_status 1 "install refuses a library missing in the root" \
	"$S" preload install --root "$root"
check "names it" contains "$dp_err" "$root$lib: No such file"
check "nothing written" test ! -e "$pf"
# A root that is not there: install and uninstall fail (1); status cannot
# tell (2), as for a process that does not exist (old: 1, "no").
for a in install uninstall; do
	expect_status 1 "$a: --root must exist" "$S" preload $a --root "$dp_tmp/nonexistent"
	check "$a: the error names the command" same "$dp_err" \
		"ctxshim: preload: --root: $dp_tmp/nonexistent: No such directory"
done
expect_status 2 "status: a root that does not exist cannot tell" \
	"$S" preload status --root "$dp_tmp/nonexistent"
check "says why" same "$dp_err" \
	"ctxshim: preload: --root: $dp_tmp/nonexistent: No such directory"
check "and answers nothing" same "$dp_out" ""
: >"$dp_tmp/a-file"
expect_status 2 "status: a root that is a file cannot tell" \
	"$S" preload status --root "$dp_tmp/a-file"
check "says it is not a directory (old: No such directory)" same "$dp_err" \
	"ctxshim: preload: --root: $dp_tmp/a-file: Not a directory"
expect_status 1 "install: a root that is a file" "$S" preload install --root "$dp_tmp/a-file"
# The note that there was no file cannot be written: exit 1 with the
# reason, as for the other files (old: dash exited 2 at the failed
# redirection of ':', printing only its own "cannot create").
new_root r-absent
mkdir -p "$root/var/lib/ctxshim/ld.so.preload.absent"
expect_status 1 "install: the note cannot be written" "$S" preload install --root "$root"
check "says which file" contains "$dp_err" \
	"ctxshim: cannot write $root/var/lib/ctxshim/ld.so.preload.absent"
check "no preload file written" not_contains "$(ls "$root/etc")" ld.so.preload
# The why ends the message: a name with ": " and a newline in it is not
# taken for it (old: "cannot write .../r-odd: x\ny/...absent: x").
root="$dp_tmp/r-odd: x
y"
mkdir -p "$root/etc" "$root${lib%/*}" "$root/var/lib/ctxshim/ld.so.preload.absent"
cp "$built_lib" "$root$lib"
expect_status 1 "install: the note cannot be written, odd root" "$S" preload install --root "$root"
check "says why" same "$(printf '%s\n' "$dp_err" | grep -v WARNING | tail -n 2)" \
	"ctxshim: cannot write $root/var/lib/ctxshim/ld.so.preload.absent: Is a directory"
# A root that cannot be changed: one line that says what failed, on what,
# and why, as util-linux tools do (old: mkdir's or cp's message, then ours
# without the why, after the warning).
new_root e-etc
rm -r "${root:?}/etc"
: >"$root/etc"
expect_status 1 "install: etc is a file" "$S" preload install --root "$root"
check "one line" same "$dp_err" "ctxshim: cannot create $root/etc: File exists (not a directory)"
check "nothing written" test ! -e "$root/var"
new_root e-var
: >"$root/var"
expect_status 1 "install: var is a file" "$S" preload install --root "$root"
check "one line names it" same "$dp_err" \
	"ctxshim: cannot create $root/var/lib/ctxshim: $root/var is not a directory"
check "nothing written" test ! -e "$pf"
new_root e-dir
mkdir "$pf"
expect_status 1 "install: ld.so.preload is a directory" "$S" preload install --root "$root"
check "one line (old: cp's, then ours)" same "$dp_err" "ctxshim: $pf is not a regular file"
expect_status 0 "uninstall: nothing to do" "$S" preload uninstall --root "$root"
# A FIFO in its place is no file to read: opening it would wait for a
# writer for ever (old: it did; timeout(1) only ends such a hang).
new_root e-fifo
mkfifo "$pf"
expect_status 1 "status: ld.so.preload is a FIFO" timeout 60 "$S" preload status --root "$root"
check "says not installed" contains "$dp_out" "does not name libctxshim.so"
expect_status 0 "uninstall: nothing to do" timeout 60 "$S" preload uninstall --root "$root"
expect_status 1 "install: refused" timeout 60 "$S" preload install --root "$root"
check "one line" same "$dp_err" "ctxshim: $pf is not a regular file"
# A state file that cannot be replaced (a directory in its place).
new_root e-state
mkdir -p "$root/var/lib/ctxshim/ld.so.preload.installed"
expect_status 1 "install: the state cannot be written" "$S" preload install --root "$root"
check "one line, after the warning" same "$(printf '%s\n' "$dp_err" | grep -v WARNING)" \
	"ctxshim: cannot remove $root/var/lib/ctxshim/ld.so.preload.installed: Is a directory"
check "nothing written" test ! -e "$pf"
# Not root: as nobody (root runs this test as nobody with setpriv).
as_user=
if [ "$(id -u)" != 0 ]; then
	as_user="env"
elif command -v setpriv >/dev/null &&
	setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
	as_user="setpriv --reuid=65534 --regid=65534 --clear-groups"
fi
chmod 755 "$dp_tmp" # for nobody
new_root e-perm
printf '/usr/lib/libfoo.so\n' >"$pf"
if [ -n "$as_user" ]; then
	# shellcheck disable=SC2086 # the command and its options
	expect_status 1 "install as a user" $as_user "$S" preload install --root "$root"
	check "one line" same "$dp_err" "ctxshim: cannot create $root/var: Permission denied"
	mkdir -p "$root/var/lib/ctxshim"
	# shellcheck disable=SC2086
	expect_status 1 "install as a user, with the state directory there" \
		$as_user "$S" preload install --root "$root"
	check "one line after the warning" same "$(printf '%s\n' "$dp_err" | grep -v WARNING)" \
		"ctxshim: cannot back up $pf: Permission denied"
	chmod 600 "$pf"
	for a in install uninstall status; do
		want=1
		[ $a != status ] || want=2
		# shellcheck disable=SC2086
		expect_status $want "$a: a file the user cannot read" \
			$as_user "$S" preload $a --root "$root"
		check "one line (old: awk's, then ours or none)" same "$dp_err" \
			"ctxshim: cannot read $pf: Permission denied"
	done
else
	echo "# not run: no user to run as (setpriv)"
fi
# A read-only root: as root, in a mount namespace where it is mounted so.
# ro_run COMMAND...: COMMAND there.
ro_run() {
	# shellcheck disable=SC2016 # expanded by that sh
	unshare -m sh -c 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" &&
		exec "$@"' "$root" "$@"
}
new_root e-ro
printf '/usr/lib/libfoo.so\n' >"$pf"
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null &&
	ro_run true 2>/dev/null; then
	expect_status 1 "install in a read-only root" ro_run "$S" preload install --root "$root"
	check "one line (old: mkdir's, then ours)" same "$dp_err" \
		"ctxshim: cannot create $root/var: Read-only file system"
	"$S" preload install --root "$root" >/dev/null 2>&1
	expect_status 1 "uninstall in a read-only root" ro_run "$S" preload uninstall --root "$root"
	check "one line" same "$dp_err" \
		"ctxshim: cannot write $pf.ctxshim-new: Read-only file system"
	check "nothing changed" same "$(cat "$pf")" "/usr/lib/libfoo.so
$lib"
else
	echo "# not root or no mount namespace: no read-only root"
fi

# An empty --root (--root "$DESTDIR" with DESTDIR unset) is no root: taken
# as "/", it changed this host (old).  Only read-only and --dry-run forms
# here, so that a regression cannot touch this host's file either.
# empty_root ARGS...: preload ARGS (with an empty --root) is a usage error.
empty_root() {
	expect_status 64 "preload $*: usage error" "$S" preload "$@"
	check "preload $*: says why" same "$dp_err" \
		"ctxshim: preload: option '--root' requires a non-empty argument
Try 'ctxshim --help' for more information."
	check "preload $*: reports nothing" same "$dp_out" ""
}
empty_root status --root ''
empty_root status --root=
empty_root install --dry-run --root ''
empty_root uninstall --dry-run --root ''
# A newline or "#" in the library path: the loader ends an entry of the
# file there and would look for "/opt/a" in every program, and status and
# uninstall would not find the entry (old: written, "not installed",
# "nothing to do").
# odd_dir DIR SHOWN: install refuses a library in DIR, shown as SHOWN.
odd_dir() {
	new_root r-odd
	mkdir -p "$root$1"
	cp "$built_lib" "$root$1/libctxshim.so"
	expect_status 1 "install refuses a library in $2" \
		env CTXSHIM_LIB="$1/libctxshim.so" "$S" preload install --root "$root"
	check "says why" same "$dp_err" \
		"ctxshim: the library path must not contain a newline or '#' (the loader ends an entry of /etc/ld.so.preload there): $2/libctxshim.so"
	check "nothing written" test ! -e "$pf"
	rm -rf "$root"
}
odd_dir '/opt/a#b' '/opt/a#b'
odd_dir '/opt/a
b' '/opt/a\x0ab'
# A tab: the loader splits the entries of the file there as well.
new_root r-tab
tabdir=/opt/a$(printf '\t')b
mkdir -p "$root$tabdir"
cp "$built_lib" "$root$tabdir/libctxshim.so"
expect_status 1 "install refuses a library path with a tab" \
	env CTXSHIM_LIB="$tabdir/libctxshim.so" "$S" preload install --root "$root"
check "says why" same "$dp_err" \
	"ctxshim: the library path must not contain blanks or colons (the loader splits LD_PRELOAD and /etc/ld.so.preload there): $tabdir/libctxshim.so"
check "nothing written" test ! -e "$pf"
expect_status 64 "unknown action" "$S" preload frob
expect_status 64 "missing action" "$S" preload
expect_status 64 "unknown option" "$S" preload status --bogus

dp_finish
