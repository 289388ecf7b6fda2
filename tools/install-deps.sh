#!/bin/sh
# Installs the Debian packages in tools/deps.txt that are missing.
# Needs root (or sudo).  Safe to run again.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
pkgs=$(grep -v -e '^#' -e '^$' "$here/deps.txt")
missing=
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
echo "installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing
