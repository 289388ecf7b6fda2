#!/bin/sh
# Quick start: installs the missing Debian packages, builds ctxshim into
# ./build and runs the demo (tools/demo.sh).
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
sh "$src/tools/install-deps.sh"
[ -f "$src/build/build.ninja" ] || meson setup "$src/build" "$src"
meson compile -C "$src/build"
exec sh "$src/tools/demo.sh" "$src/build"
