#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# ctxshim systemd-dropin: the exact text, quoting of values for systemd,
# writing and removing below --root (only a library that loads), unit name
# handling, and (when systemd-analyze is installed) systemd itself parsing
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
# To undo: 'ctxshim systemd-dropin --remove nginx.service' (or remove this file),
# 'systemctl daemon-reload', and restart the unit.
# Note: this LD_PRELOAD replaces one that the unit sets itself.
[Service]
Environment=\"LD_PRELOAD=$lib\"
Environment=\"OTEL_SERVICE_NAME=nginx\""
plain=$dp_out

expect_status 0 "unit name without .service" "$S" systemd-dropin --print nginx
check "same text" same "$dp_out" "$plain"

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

expect_status 0 "template unit" "$S" systemd-dropin --print getty@.service
check "service name of a template" contains "$dp_out" 'OTEL_SERVICE_NAME=getty"'
expect_status 0 "instance unit" "$S" systemd-dropin --print 'getty@tty1'
check "service name of an instance" contains "$dp_out" 'OTEL_SERVICE_NAME=getty@tty1"'

# Writing below a root.
root=$dp_tmp/root
mkdir -p "$root${lib%/*}"
cp "$built_lib" "$root$lib"
expect_status 0 "write" "$S" systemd-dropin --root "$root" nginx
file=$root/etc/systemd/system/nginx.service.d/ctxshim.conf
check "says where" contains "$dp_out" "wrote $file"
check "tells how to apply" contains "$dp_out" "systemctl daemon-reload"
check "file has the printed text" same "$(cat "$file")" "$plain"
check "file is 0644" same "$(stat -c %a "$file")" 644
expect_status 0 "write again (idempotent)" "$S" systemd-dropin --root "$root" nginx
check "same file" same "$(cat "$file")" "$plain"
expect_status 0 "remove" "$S" systemd-dropin --remove --root "$root" nginx
check "file removed" test ! -e "$file"
check "empty .d directory removed" test ! -e "${file%/*}"
expect_status 0 "remove again" "$S" systemd-dropin --remove --root "$root" nginx

# The library must load: a drop-in with a library that does not would stop
# the service from starting.  A missing library is refused too; --print
# (above, with a path that does not exist here) writes without checks.
broken=$dp_tmp/broken
mkdir -p "$broken${lib%/*}"
printf 'int dp_nope(void); int dp_f(void) { return dp_nope(); }\n' >"$dp_tmp/nope.c"
${CC:-cc} -shared -fPIC -Wl,-z,now -o "$broken$lib" "$dp_tmp/nope.c" || exit 1
bfile=$broken/etc/systemd/system/nginx.service.d/ctxshim.conf
expect_status 1 "a library that does not load is refused" \
	"$S" systemd-dropin --root "$broken" nginx
check "says why, with the loader's message" contains "$dp_err" "undefined symbol: dp_nope"
check "nothing written" test ! -e "$bfile"
# A statically linked true first in PATH ignores LD_PRELOAD: it must not
# be what the library is tested with.
printf 'int main(void) { return 0; }\n' >"$dp_tmp/true.c"
if mkdir "$dp_tmp/static" && ${CC:-cc} -static -o "$dp_tmp/static/true" "$dp_tmp/true.c" 2>/dev/null; then
	expect_status 1 "refused with a static true first in PATH" \
		env PATH="$dp_tmp/static:$PATH" "$S" systemd-dropin --root "$broken" nginx
	check "nothing written (static true)" test ! -e "$bfile"
fi
printf 'not an ELF file\n' >"$broken$lib"
expect_status 1 "a file that is not a library is refused" \
	"$S" systemd-dropin --root "$broken" nginx
check "nothing written (not a library)" test ! -e "$bfile"
rm "$broken$lib"
expect_status 1 "a missing library is refused" "$S" systemd-dropin --root "$broken" nginx
check "names it" contains "$dp_err" "$broken$lib: No such file"
check "nothing written (missing)" test ! -e "$bfile"

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
