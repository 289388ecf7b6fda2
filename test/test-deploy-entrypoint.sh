#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# ctxshim-entrypoint: starts its arguments with the shim loaded (seen by
# 'ctxshim status' on the very pid), wraps an existing entrypoint script,
# finds the library next to itself (the Kubernetes volume layout), and
# never stops a program from starting: a missing, unloadable or unsuitable
# library (or no dynamically linked program to test-load it with) only
# produces a note on stderr, and an unrelated entry of LD_PRELOAD that
# does not load is not blamed on the shim (old: the shim was left out).

. "$(dirname "$0")/deploy-lib.sh"

S=$CTXSHIM_CMD
E=$CTXSHIM_ENTRYPOINT
lib=$CTXSHIM_LIB
cd "$dp_tmp" || exit 1
want_preload=${dp_base_preload:+$dp_base_preload:}$lib
LD_PRELOAD=$dp_base_preload
export LD_PRELOAD
[ -n "$LD_PRELOAD" ] || unset LD_PRELOAD

expect_status 0 "--help" "$E" --help
check "--help synopsis" contains "$dp_out" " ctxshim-entrypoint [--] <command> [<argument>...]"
check "--help starts with an empty line, as ctxshim's and ctxdump's" same "${dp_out%%Usage:*}" "
"
expect_status 0 "--version" "$E" --version
check "--version format" contains "$dp_out" "ctxshim-entrypoint from ctxshim "
# shellcheck disable=SC2016 # expanded by that sh
for a in --help --version; do
	expect_status 1 "$a to a full device" sh -c 'exec "$0" "$1" >/dev/full' "$E" "$a"
	check "$a: says so in its name (old: cat's)" same "$dp_err" \
		"ctxshim-entrypoint: write error: No space left on device"
done
expect_status 64 "no command" "$E"
check "Try --help" contains "$dp_err" "Try 'ctxshim-entrypoint --help' for more information."
# A command that cannot run: exec's status with our message (old: the
# shell's "./ctxshim-entrypoint: 594: exec: /no/such: not found").
expect_status 127 "command not found" "$E" /no/such
check "says so in our name" same "$dp_err" "ctxshim-entrypoint: /no/such: not found"
expect_status 127 "command not found in PATH" "$E" no-such-command-dp
check "names it" same "$dp_err" "ctxshim-entrypoint: no-such-command-dp: not found"
printf '#!/bin/sh\n' >ep-noexec
chmod 644 ep-noexec
expect_status 126 "not executable" "$E" ./ep-noexec
check "says why" same "$dp_err" "ctxshim-entrypoint: ./ep-noexec: Permission denied (no execute permission)"
mkdir -p ep-pdir/ep-dircmd
expect_status 126 "a directory in PATH" env PATH="$dp_tmp/ep-pdir:$PATH" "$E" ep-dircmd

# The caller's variables: one named like the script's own keeps its value,
# one whose name no shell variable can have is kept (dash drops those),
# with the shim and without it.
expect_status 0 "the caller's variables" \
	env lib=mylib add=yes spring.profiles.active=prod "$E" env
check "keeps lib" contains "$dp_out" "lib=mylib"
check "keeps add" contains "$dp_out" "add=yes"
check "keeps spring.profiles.active" contains "$dp_out" "spring.profiles.active=prod"
check "with the shim" contains "$dp_out" "LD_PRELOAD=$want_preload"
expect_status 0 "the caller's variables, without the shim" \
	env lib=mylib spring.profiles.active=prod CTXSHIM_LIB=/nonexistent/libctxshim.so \
	"$E" env
check "keeps lib" contains "$dp_out" "lib=mylib"
check "keeps spring.profiles.active" contains "$dp_out" "spring.profiles.active=prod"

# The program it starts carries the shim: 'ctxshim status' on its pid.
OTEL_SERVICE_NAME=ep-service
export OTEL_SERVICE_NAME
start_blocked "$E" sh -c "$DP_BLOCKER"
expect_status 0 "ctxshim status on the started program" "$S" status "$bg_pid"
check "status: the shim is loaded" contains "$dp_out" "library:  $lib"
check "status: the version" contains "$dp_out" "version:  $("$S" --version | sed 's/.* //')"
case $dp_out in
*"state:    active"*)
	check "active, with the service name from the environment" \
		contains "$dp_out" "service:  ep-service"
	;;
*) check "state is reported" contains "$dp_out" "state:    passive" ;;
esac
check "the started program is the pid (exec)" \
	contains "$(tr '\0' ' ' <"/proc/$bg_pid/cmdline")" "sh -c echo ready"
release "$bg_pid" "$bg_go"
check "program exits normally" same "$?" 0
unset OTEL_SERVICE_NAME
check "no stderr when all is well" same "$(cat "$dp_tmp/err")" ""

expect_status 0 "environment of the program" "$E" env
check "LD_PRELOAD set" contains "$dp_out" "
LD_PRELOAD=$want_preload
"
expect_status 0 "quiet when all is well" "$E" /bin/true
check "nothing on stderr" same "$dp_err" ""
expect_status 7 "exit status passes through" "$E" sh -c 'exit 7'
expect_status 143 "death by signal passes through" "$E" sh -c 'kill -TERM $$'
expect_status 0 "-- before the command" "$E" -- printf '%s|' a 'b c'
check "arguments unchanged" same "$dp_out" "a|b c|"

# Wrapped around an existing entrypoint script.
cat >docker-entrypoint.sh <<'EOF'
#!/bin/sh
set -e
echo "entrypoint: setting up" >&2
exec "$@"
EOF
chmod 755 docker-entrypoint.sh
expect_status 0 "wrapping an existing entrypoint" "$E" ./docker-entrypoint.sh cat /proc/self/maps
check "the final program has the shim" contains "$dp_out" " $lib"
check "the wrapped entrypoint ran" contains "$dp_err" "entrypoint: setting up"

# An existing LD_PRELOAD stays first.
LD_PRELOAD=${dp_base_preload:+$dp_base_preload }/lib/x86_64-linux-gnu/libm.so.6
if [ -f /lib/x86_64-linux-gnu/libm.so.6 ]; then
	export LD_PRELOAD
	expect_status 0 "existing LD_PRELOAD" "$E" env
	check "kept first, shim appended" contains "$dp_out" "LD_PRELOAD=$LD_PRELOAD:$lib"
fi
LD_PRELOAD=$dp_base_preload
[ -n "$LD_PRELOAD" ] || unset LD_PRELOAD

# An unrelated entry of LD_PRELOAD that does not load is not the shim's
# fault: the shim is still added, and the entry stays for the loader to
# report (it ignores it, with or without the shim).
dp_broken_preload=${dp_base_preload:+$dp_base_preload:}/nonexistent/libdpother.so
expect_status 0 "a broken unrelated entry in LD_PRELOAD" env \
	LD_PRELOAD="$dp_broken_preload" "$E" env
check "the shim is added, the entry kept" contains "$dp_out" "
LD_PRELOAD=$dp_broken_preload:$lib
"
check "the shim is not blamed" test -z "$(printf '%s\n' "$dp_err" | grep 'ctxshim-entrypoint:')"

# Another copy of the shim in LD_PRELOAD (a pod spec that sets it too, with
# another path): only the first copy loaded would publish; ours takes its place.
mkdir -p copy
cp "$lib" copy/libctxshim.so
expect_status 0 "another libctxshim.so in LD_PRELOAD" env \
	LD_PRELOAD="${dp_base_preload:+$dp_base_preload:}$dp_tmp/copy/libctxshim.so" \
	"$E" cat /proc/self/maps
check "the other copy is not mapped" test -z "$(printf '%s\n' "$dp_out" | grep "$dp_tmp/copy/")"
check "the shim is mapped and active (OTEL_CTX)" contains "$dp_out" "OTEL_CTX"
check "says it replaced it" contains "$dp_err" "replaced $dp_tmp/copy/libctxshim.so in LD_PRELOAD by $lib"

# The same file under another path (an install symlink) is left alone.
mkdir -p link
ln -s "$lib" link/libctxshim.so
dp_link_preload=${dp_base_preload:+$dp_base_preload:}$dp_tmp/link/libctxshim.so
expect_status 0 "the shim under another path in LD_PRELOAD: env" env \
	LD_PRELOAD="$dp_link_preload" "$E" env
check "LD_PRELOAD is left as it was" contains "$dp_out" "
LD_PRELOAD=$dp_link_preload
"
check "no note about another copy" test -z "$(printf '%s\n' "$dp_err" | grep 'replaced')"
expect_status 0 "the shim under another path in LD_PRELOAD: maps" env \
	LD_PRELOAD="$dp_link_preload" "$E" cat /proc/self/maps
check "the shim is mapped and active (OTEL_CTX)" contains "$dp_out" "OTEL_CTX"

# ------------------------------------------------------------ never break

expect_status 0 "library missing (CTXSHIM_LIB)" env CTXSHIM_LIB=/nonexistent.so "$E" env
check "warns" contains "$dp_err" "ctxshim-entrypoint: CTXSHIM_LIB=/nonexistent.so does not exist"
check "says it runs without" contains "$dp_err" "starting env without the shim"
check "program runs unchanged (no shim in LD_PRELOAD)" \
	test -z "$(printf '%s\n' "$dp_out" | grep '^LD_PRELOAD=.*nonexistent')"
expect_status 9 "library missing: exit status still passes" \
	env CTXSHIM_LIB=/nonexistent.so "$E" sh -c 'exit 9'

# Not a library at all: the loader would print an error into every
# program's stderr.
printf 'not an ELF file\n' >garbage.so
expect_status 0 "library is garbage" env CTXSHIM_LIB="$dp_tmp/garbage.so" "$E" env
check "warns that it does not load" contains "$dp_err" "garbage.so does not load here"
check "program runs without it" \
	test -z "$(printf '%s\n' "$dp_out" | grep '^LD_PRELOAD=.*garbage')"

# The environment preloads that broken library already (a pod spec with
# LD_PRELOAD): the program still gets it out of the way.
mkdir bad
cp garbage.so bad/libctxshim.so
expect_status 0 "preloaded library is garbage" env \
	LD_PRELOAD="${dp_base_preload:+$dp_base_preload:}$dp_tmp/bad/libctxshim.so" \
	CTXSHIM_LIB="$dp_tmp/bad/libctxshim.so" "$E" env
check "says it removed it" contains "$dp_err" "removed libctxshim.so from LD_PRELOAD"
check "the program's LD_PRELOAD is without it" \
	test -z "$(printf '%s\n' "$dp_out" | grep '^LD_PRELOAD=.*bad')"
# The caller's other entries stay, in their order, a name that only ends
# in libctxshim.so among them.
mkdir keep
printf 'int dp_keep;\n' >keep.c
if ${CC:-cc} -shared -fPIC -o keep/libkeep.so keep.c; then
	cp keep/libkeep.so keep/mylibctxshim.so
	expect_status 0 "preloaded library is garbage, among others" env \
		LD_PRELOAD="${dp_base_preload:+$dp_base_preload:}$dp_tmp/keep/libkeep.so $dp_tmp/bad/libctxshim.so:$dp_tmp/keep/mylibctxshim.so" \
		CTXSHIM_LIB="$dp_tmp/bad/libctxshim.so" "$E" env
	check "the others are kept" contains "$dp_out" "
LD_PRELOAD=${dp_base_preload:+$dp_base_preload:}$dp_tmp/keep/libkeep.so:$dp_tmp/keep/mylibctxshim.so
"
else
	fail "cannot build a test library with ${CC:-cc}"
fi
# A relative CTXSHIM_LIB is made absolute: the command may change its
# working directory before it starts another program.
mkdir rel
cp "$lib" rel/libctxshim.so
expect_status 0 "a relative CTXSHIM_LIB" env CTXSHIM_LIB=rel/libctxshim.so "$E" env
check "LD_PRELOAD names it by its absolute path" contains "$dp_out" "
LD_PRELOAD=${dp_base_preload:+$dp_base_preload:}$dp_tmp/rel/libctxshim.so
"

# A library whose dependency is missing (like one built for a newer glibc):
# with it in LD_PRELOAD the program would not start at all.
printf 'int dp_dep(void) { return 1; }\n' >dep.c
printf 'int dp_dep(void); int dp_use(void) { return dp_dep(); }\n' >use.c
if ${CC:-cc} -shared -fPIC -o libdpdep.so dep.c &&
	${CC:-cc} -shared -fPIC -o libdpbroken.so use.c -L. -ldpdep; then
	rm libdpdep.so
	expect_status 0 "control: that library stops programs" sh -c \
		"LD_PRELOAD=$dp_tmp/libdpbroken.so /bin/true 2>/dev/null; test \$? -ne 0"
	expect_status 5 "library cannot load: program still starts" \
		env CTXSHIM_LIB="$dp_tmp/libdpbroken.so" "$E" sh -c 'exit 5'
	check "warns with the loader's message" contains "$dp_err" "libdpdep.so"
fi

# The test load itself must be trustworthy.  PATH directories with only
# the tools the script needs, plus the probe candidates under test.
# shellcheck disable=SC2016 # $LD_PRELOAD is for the program's shell
show_preload='echo "LD_PRELOAD=${LD_PRELOAD-}"'
mkdir tools
for t in awk dd head id od stat tr; do
	ln -s "$(command -v "$t")" "tools/$t"
done
# (a) A statically linked true first in PATH ignores LD_PRELOAD, so a test
# load with it proves nothing: the library that stops programs must still
# be caught (with the dynamically linked env or true further on).
printf 'int main(void) { return 0; }\n' >true.c
if [ -f libdpbroken.so ] && mkdir static &&
	${CC:-cc} -static -o static/true true.c 2>/dev/null; then
	expect_status 5 "static true first in PATH: a library that cannot load is still caught" \
		env PATH="$dp_tmp/static:$PATH" CTXSHIM_LIB="$dp_tmp/libdpbroken.so" \
		"$E" sh -c 'exit 5'
	check "warns with the loader's message (static true)" contains "$dp_err" "libdpdep.so"
	cp static/true tools/true
fi
# (b) Nothing dynamically linked to test with (only the static true, if
# it was built): start without the shim, and say why.
expect_status 0 "no program to test-load with: runs without the shim" \
	env PATH="$dp_tmp/tools" "$E" /bin/sh -c "$show_preload"
check "says it could not test" contains "$dp_err" "cannot test whether $lib loads here"
check "says it starts without" contains "$dp_err" "starting /bin/sh without the shim"
check "the program runs without the shim" same "$(printf '%s\n' "$dp_out" | grep -c "$lib")" 0
# (c) Only env to test with: its output on stdout is no loader error, and
# is not logged (the environment may hold secrets).
rm -f tools/true
ln -s "$(command -v env)" tools/env
expect_status 0 "only env to test-load with" env PATH="$dp_tmp/tools" \
	DP_SECRET=hunter2 "$E" /bin/sh -c "$show_preload"
check "the shim is loaded" same "$dp_out" "LD_PRELOAD=$want_preload"
check "nothing on stderr (no environment logged)" same "$dp_err" ""

# Unsuitable programs: musl (would fail to start with a glibc library in
# LD_PRELOAD) and 32-bit get no shim; static ones keep it for their children.
{
	printf '\177ELF\002\001\001\000\000\000\000\000\000\000\000\000'
	printf '\003\000\076\000\001\000\000\000'
	printf '\000\000\000\000\000\000\000\000\100\000\000\000\000\000\000\000'
	printf '\000\000\000\000\000\000\000\000\000\000\000\000\100\000\070\000'
	printf '\001\000\100\000\000\000\000\000'
	printf '\003\000\000\000\004\000\000\000\170\000\000\000\000\000\000\000'
	printf '\170\000\000\000\000\000\000\000\170\000\000\000\000\000\000\000'
	printf '\031\000\000\000\000\000\000\000\031\000\000\000\000\000\000\000'
	printf '\001\000\000\000\000\000\000\000/lib/ld-musl-x86_64.so.1\000'
} >musl-prog
chmod 755 musl-prog
expect_status 1 "control: check sees musl" "$S" check ./musl-prog
"$E" ./musl-prog >/dev/null 2>"$dp_tmp/err"
check "musl program: no shim, with a note" contains "$(cat "$dp_tmp/err")" \
	"not loading the shim: ./musl-prog is linked with musl"

printf 'int main(void) { return 4; }\n' >prog.c
if ${CC:-cc} -static -o static prog.c 2>/dev/null; then
	expect_status 4 "static program still runs" "$E" ./static
	check "with a note" contains "$dp_err" "statically linked"
fi
# A 32-bit program runs untouched, without the shim.  One that the command
# starts inherits LD_PRELOAD and runs too (its loader's words about a
# 64-bit library there: test-deploy-i386.sh).
if dp_prog32; then
	expect_status 5 "32-bit program still runs" "$E" ./prog32
	check "its output unchanged" same "$dp_out" p32
	check "with a note" contains "$dp_err" "not loading the shim: ./prog32 is a 32-bit program"
	expect_status 5 "a 32-bit program that the command starts runs" "$E" sh -c ./prog32
	check "its output unchanged" same "$dp_out" p32
fi
# A script whose #! runs env -i: it starts, with a note that says why its
# program shows no records.
printf '#!/usr/bin/env -S -i sh\nexit 6\n' >envi
chmod 755 envi
expect_status 6 "env -i script still runs" "$E" ./envi
check "with a note" contains "$dp_err" "note: ./envi is a script for /usr/bin/env -i"

# ------------------------------------------------------------ lookup

# Kubernetes layout: the init container copies both files into a volume;
# nothing tells the entrypoint where the library is.
mkdir vol
cp "$E" "$lib" vol/
expect_status 0 "library next to the script" env -u CTXSHIM_LIB vol/ctxshim-entrypoint cat /proc/self/maps
check "found and loaded" contains "$dp_out" " $dp_tmp/vol/libctxshim.so"
cd vol || exit 1
expect_status 0 "started by a relative path" env -u CTXSHIM_LIB ./ctxshim-entrypoint cat /proc/self/maps
check "library path made absolute" contains "$dp_out" " $dp_tmp/vol/libctxshim.so"
cd "$dp_tmp" || exit 1

# The build tree's script uses the library built there, as ctxshim does
# (old: "not found" before meson install); its copies (alone/, below) do not.
expect_status 0 "the build tree's script" env -u CTXSHIM_LIB "$E" cat /proc/self/maps
check "uses the build tree's library" contains "$dp_out" " $lib"
check "without a note" same "$dp_err" ""

# Alone, with no library anywhere it looks: a warning, and the program runs.
mkdir alone
cp "$E" alone/
found_elsewhere=
for f in /usr/lib/ctxshim/libctxshim.so /usr/lib/x86_64-linux-gnu/ctxshim/libctxshim.so \
	/usr/local/lib/ctxshim/libctxshim.so /usr/local/lib/x86_64-linux-gnu/ctxshim/libctxshim.so \
	/opt/ctxshim/libctxshim.so; do
	[ -f "$f" ] && found_elsewhere=$f
done
if [ -z "$found_elsewhere" ]; then
	expect_status 3 "no library anywhere: program runs" env -u CTXSHIM_LIB \
		alone/ctxshim-entrypoint sh -c 'exit 3'
	check "warns" contains "$dp_err" "libctxshim.so not found (set CTXSHIM_LIB)"
else
	echo "# $found_elsewhere is installed on this host: 'not found' case not run"
fi

# Other POSIX shells run it too.
if command -v bash >/dev/null; then
	expect_status 0 "bash --posix runs it" bash --posix "$E" env
	check "LD_PRELOAD set under bash" contains "$dp_out" "LD_PRELOAD=$want_preload"
fi

dp_finish
