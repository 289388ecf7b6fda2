#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# The recipes of doc/deployment.md, as far as a machine without a container
# engine or a running systemd allows.  The blocks marked "<!-- test: NAME -->"
# are read out of the document:
#   dockerfile and dist-dockerfile: their build stage must install the
#                   package of every header the build includes (ninja's
#                   dependency log and dpkg), all from tools/deps.txt;
#   dropin          must equal 'ctxshim systemd-dropin --print' for the
#                   command shown in the text;
#   dockerfile      its COPY sources must exist in a DESTDIR install, and the
#                   image it describes (files at the COPY destinations, its
#                   ENV, its ENTRYPOINT) must start a program with the shim;
#   dockerfile-i386 its COPY sources must exist in a DESTDIR install (when
#                   the empty 32-bit library is built);
#   dist-dockerfile and kubernetes: the init container's copy into the
#                   shared volume and the application container's command
#                   and env (resolved like the kubelet does) must start a
#                   program with the shim (the YAML part needs python3-yaml).
# nginx-env is read by test-integration-nginx.c instead, which needs nginx.

. "$(dirname "$0")/deploy-lib.sh"

: "${CTXSHIM_BUILDDIR:?}" "${DP_PREFIX:?}" "${DP_LIBDIR:?}"
doc=$CTXSHIM_SRCDIR/doc/deployment.md
S=$CTXSHIM_CMD
cd "$dp_tmp" || exit 1
[ -z "$dp_base_preload" ] || { LD_PRELOAD=$dp_base_preload && export LD_PRELOAD; }

# block NAME: the fenced code block after "<!-- test: NAME -->".
block() {
	awk -v name="$1" '
		$0 == "<!-- test: " name " -->" { want = 1; next }
		want && /^```/ { if (inside) exit; inside = 1; next }
		inside { print }' "$doc"
}

# ------------------------------------------------------------ systemd

block dropin >dropin.doc
check "doc has the drop-in block" test -s dropin.doc
CTXSHIM_LIB=/usr/lib/x86_64-linux-gnu/ctxshim/libctxshim.so \
	"$S" systemd-dropin --print --service-name billing legacy-billing >dropin.out
check "drop-in in the doc is what the command prints" cmp dropin.doc dropin.out
check "the doc shows that command" grep -q \
	'^ctxshim systemd-dropin --service-name billing legacy-billing$' "$doc"

# ------------------------------------------------------------ build stage

# The packages the Dockerfiles' build stage installs must be the ones the
# build needs: the -dev package of every header that the installed files
# (everything but test/) were compiled with, as ninja recorded them and
# dpkg knows them, apart from the compiler's own (libc6-dev, linux-libc-dev,
# libgcc-*-dev, which gcc brings).  Each must also be in tools/deps.txt, and
# every package named must be one of tools/deps.txt's (or gcc, what
# build-essential brings) so that a typo cannot hide.
deps=$CTXSHIM_SRCDIR/tools/deps.txt
# apt_packages BLOCK: the packages of its "apt-get install" command.
apt_packages() {
	block "$1" | awk '
		{ line = line $0 }
		/\\$/ { sub(/\\$/, "", line); next }
		{
			if (line ~ /apt-get install/) {
				sub(/.*apt-get install/, "", line); sub(/&&.*/, "", line)
				n = split(line, w, /[ \t]+/)
				for (i = 1; i <= n; i++) if (w[i] != "" && w[i] !~ /^-/) print w[i]
			}
			line = ""
		}' | sort -u
}
apt_packages dockerfile >pkgs.docker
apt_packages dist-dockerfile >pkgs.dist
check "dockerfile: has an apt-get install list" test -s pkgs.docker
check "dist-dockerfile: the same build stage packages" cmp pkgs.docker pkgs.dist
grep -v -e '^#' -e '^$' "$deps" | sort -u >deps.list
while read -r pkg; do
	if [ "$pkg" = gcc ] || grep -qx "$pkg" deps.list; then
		ok "build stage: $pkg is a package of tools/deps.txt"
	else
		fail "build stage: $pkg is not in tools/deps.txt (a typo?)"
	fi
done <pkgs.docker
for pkg in gcc meson ninja-build pkg-config; do
	check "build stage installs $pkg" grep -qx "$pkg" pkgs.docker
done
if command -v dpkg-query >/dev/null && command -v ninja >/dev/null; then
	ninja -C "$CTXSHIM_BUILDDIR" -t deps 2>/dev/null | awk '
		/^[^ \t]/ { keep = ($1 !~ /^test\//) }
		keep && /^[ \t]+\/usr\// { print $1 }' | sort -u >headers
	check "ninja recorded the headers of the build" test -s headers
	# "pkg1:arch, pkg2: /path" lines; files of no package are reported.
	# shellcheck disable=SC2046 # the header list
	dpkg-query -S $(cat headers) 2>dpkg.err | grep -v '^diversion' |
		sed 's/: \/.*//' | tr ',' '\n' | sed 's/^ *//; s/:.*//' | sort -u >pkgs.needed
	sed 's/^/# /' dpkg.err
	grep -v -E -e '^(libc6-dev|linux-libc-dev|libgcc-[0-9]+-dev|gcc-[0-9]+|libcrypt-dev)$' \
		pkgs.needed >pkgs.wanted
	check "some headers come from -dev packages" test -s pkgs.wanted
	while read -r pkg; do
		if grep -qx "$pkg" pkgs.docker; then
			ok "build stage installs $pkg (headers of the build)"
		else
			fail "build stage lacks $pkg: the build includes its headers"
		fi
		check "tools/deps.txt lists $pkg" grep -qx "$pkg" deps.list
	done <pkgs.wanted
else
	echo "# dpkg-query or ninja not available: build stage packages not derived from the build"
fi

# ------------------------------------------------------------ images

dest=$dp_tmp/dest
if ! meson install -C "$CTXSHIM_BUILDDIR" --no-rebuild --quiet --destdir "$dest" \
	>install.log 2>&1; then
	fail "meson install --destdir"
	cat install.log
	dp_finish
fi
# The recipes build with --prefix=/usr on Debian x86_64: /out/usr/X is
# $dest$DP_PREFIX/X here when the libdir has the same layout.
case $DP_LIBDIR in
"$DP_PREFIX"/lib/x86_64-linux-gnu) ;;
*) dp_skip "libdir $DP_LIBDIR is not <prefix>/lib/x86_64-linux-gnu like the recipes" ;;
esac

# build_image BLOCK ROOT: put each "COPY --from=ctxshim SRC DST" of the
# Dockerfile block at ROOT/DST, taking SRC from the DESTDIR install.
build_image() {
	block "$1" | grep '^COPY --from=ctxshim ' >"$1.copies"
	check "$1: has COPY lines" test -s "$1.copies"
	while read -r _ _ src dst; do
		from=$dest$DP_PREFIX/${src#/out/usr/}
		if [ -f "$from" ]; then
			ok "$1: $src is installed"
		else
			fail "$1: $src is not what meson installs ($from missing)"
			continue
		fi
		mkdir -p "$2${dst%/*}"
		cp -p "$from" "$2$dst"
	done <"$1.copies"
}

img=$dp_tmp/img
build_image dockerfile "$img"
[ -z "${CTXSHIM_LIB32-}" ] || build_image dockerfile-i386 "$dp_tmp/img32"
# ENV NAME=VALUE lines, then ENTRYPOINT ["a", "b"]: the container's command
# is the entrypoint's words with a stand-in for the image's CMD (the real
# server is not here).
eval "$(block dockerfile | sed -n 's/^ENV \([A-Z_]*\)=\(.*\)$/\1='"'"'\2'"'"'; export \1/p')"
check "Dockerfile sets OTEL_SERVICE_NAME" test -n "${OTEL_SERVICE_NAME-}"
entry=$(block dockerfile | sed -n 's/^ENTRYPOINT \[\(.*\)\]$/\1/p' | sed 's/", *"/ /g; s/"//g')
check "Dockerfile has an exec-form ENTRYPOINT" test -n "$entry"
# shellcheck disable=SC2086 # the entrypoint's words
set -- $entry
check "ENTRYPOINT starts with ctxshim-entrypoint" same "$1" ctxshim-entrypoint
ep=$(cd "$img" && find . -name "$1" -type f | head -n 1)
check "ctxshim-entrypoint is in the image" test -n "$ep"
shift
# The wrapped entrypoint of the base image: a stand-in that execs "$@".
if [ $# -gt 0 ]; then
	mkdir -p "$img${1%/*}"
	printf '#!/bin/sh\nexec "$@"\n' >"$img$1"
	chmod 755 "$img$1"
	wrapped=$img$1
fi
start_blocked env -u CTXSHIM_LIB "$img/${ep#./}" ${wrapped:+"$wrapped"} \
	sh -c "$DP_BLOCKER"
expect_status 0 "image: ctxshim status on the program" "$S" status "$bg_pid"
check "image: library from the image's path" contains "$dp_out" \
	"library:  $img/usr/lib/x86_64-linux-gnu/ctxshim/libctxshim.so"
case $dp_out in
*"state:    active"*)
	check "image: service name from ENV" contains "$dp_out" "service:  $OTEL_SERVICE_NAME"
	;;
esac
release "$bg_pid" "$bg_go"
unset OTEL_SERVICE_NAME OTEL_RESOURCE_ATTRIBUTES

# ------------------------------------------------------------ Kubernetes

dist=$dp_tmp/dist
build_image dist-dockerfile "$dist"
block kubernetes >pod.yaml
check "doc has the Kubernetes block" test -s pod.yaml
if ! command -v python3 >/dev/null || ! python3 -c 'import yaml' 2>/dev/null; then
	echo "# python3 with yaml (python3-yaml) not available: pod spec not simulated"
	dp_finish
fi
# Flatten what a kubelet would do into lines for the shell: the init
# container's command and mount, the app's mount, command + args and env
# (fieldRef values resolved for a pod "checkout-7d4b9", namespace "shop",
# then $(VAR) references expanded).
python3 - pod.yaml >pod.flat <<'EOF' || fail "pod spec does not parse"
import re, sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
spec = doc["spec"]["template"]["spec"]
labels = doc["spec"]["template"]["metadata"]["labels"]
vols = {v["name"]: v for v in spec["volumes"]}
init = spec["initContainers"][0]
app = spec["containers"][0]
def mount(c):
    m = c["volumeMounts"][0]
    assert "emptyDir" in vols[m["name"]], "volume is not an emptyDir"
    return m["name"], m["mountPath"]
iv, ip = mount(init)
av, ap = mount(app)
assert iv == av, "init and app mount different volumes"
print("INIT_MOUNT", ip)
print("APP_MOUNT", ap)
for w in init["command"] + init.get("args", []):
    print("INIT_ARG", w)
for w in app.get("command", []) + app.get("args", []):
    print("APP_ARG", w)
fields = {"metadata.name": "checkout-7d4b9", "metadata.namespace": "shop"}
env = {}
for e in app.get("env", []):
    if "value" in e:
        v = e["value"]
    else:
        path = e["valueFrom"]["fieldRef"]["fieldPath"]
        m = re.match(r"metadata\.labels\['(.*)'\]", path)
        v = labels[m.group(1)] if m else fields[path]
    v = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), v)
    env[e["name"]] = v
    print("ENV", e["name"] + "=" + v)
EOF
val() { sed -n "s/^$1 //p" pod.flat; }
init_mount=$(val INIT_MOUNT)
check "init container copies into the shared volume" same "$(val INIT_ARG | tail -n 1)" "$init_mount/"
check "init container runs cp" same "$(val INIT_ARG | head -n 1)" cp
check "app mounts the volume at the same path" same "$(val APP_MOUNT)" "$init_mount"

# The init container: cp from the dist image into the volume.
vol=$dp_tmp/vol
mkdir "$vol"
val INIT_ARG | sed '1d;$d' >init.srcs
while IFS= read -r src; do
	if [ -f "$dist$src" ]; then
		cp "$dist$src" "$vol/"
		ok "init copies $src (present in ctxshim-dist)"
	else
		fail "init copies $src, which ctxshim-dist does not contain"
	fi
done <init.srcs

# The app container: paths in the volume re-rooted, the wrapped image
# entrypoint stood in for, the server replaced by the blocker.
val ENV | sed "s|$init_mount/|$vol/|g" >pod.env
while IFS= read -r kv; do
	# shellcheck disable=SC2163 # NAME=value pairs from the pod spec
	export "$kv"
done <pod.env
check "service name from the pod label" same "$OTEL_SERVICE_NAME" checkout
check "\$(VAR) references expanded" same "$OTEL_RESOURCE_ATTRIBUTES" \
	"k8s.pod.name=checkout-7d4b9,k8s.namespace.name=shop"
app_cmd=$(val APP_ARG | head -n 1)
case $app_cmd in
"$init_mount"/*) app_cmd=$vol/${app_cmd#"$init_mount"/} ;;
esac
check "app command is the entrypoint from the volume" test -x "$app_cmd"
wrapped=$(val APP_ARG | sed -n 2p)
case $wrapped in
/*)
	mkdir -p "$dp_tmp/app${wrapped%/*}"
	printf '#!/bin/sh\nexec "$@"\n' >"$dp_tmp/app$wrapped"
	chmod 755 "$dp_tmp/app$wrapped"
	wrapped=$dp_tmp/app$wrapped
	;;
esac
start_blocked env -u CTXSHIM_LIB "$app_cmd" "$wrapped" sh -c "$DP_BLOCKER"
expect_status 0 "pod: ctxshim status on the program" "$S" status "$bg_pid"
check "pod: library from the volume" contains "$dp_out" "library:  $vol/libctxshim.so"
case $dp_out in
*"state:    active"*)
	check "pod: service name from the label" contains "$dp_out" "service:  checkout"
	;;
esac
release "$bg_pid" "$bg_go"

dp_finish
