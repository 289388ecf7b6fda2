#!/bin/sh
# Fails when libctxshim.so exports a defined symbol that is not in the
# version script, or when a name in the map is not exported.
# usage: symbols-leak.sh NM LIBRARY MAPFILE
set -eu
nm=$1 lib=$2 map=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Version nodes show up as absolute symbols named after the node; skip them.
"$nm" -D --defined-only "$lib" | awk '$2 != "A" {print $NF}' | sed 's/@.*//' \
	| sort -u >"$tmp/exported"
# Names listed under "global:" (comments stripped), across all version nodes.
sed -e 's,/\*.*\*/,,g' -e 's,#.*,,' "$map" \
	| awk '/global:/ {g = 1; next} /local:/ {g = 0} g' \
	| tr -d ' \t' | sed -n 's/;$//p' | grep -v -e '^$' -e '[*?]' \
	| sort -u >"$tmp/listed"

status=0
if [ -s "$tmp/exported" ] && comm -23 "$tmp/exported" "$tmp/listed" | grep -q .; then
	echo "exported but not in $map:"
	comm -23 "$tmp/exported" "$tmp/listed" | sed 's/^/  /'
	status=1
fi
if comm -13 "$tmp/exported" "$tmp/listed" | grep -q .; then
	echo "in $map but not exported:"
	comm -13 "$tmp/exported" "$tmp/listed" | sed 's/^/  /'
	status=1
fi
[ $status -eq 0 ] && echo "exports match $map ($(wc -l <"$tmp/exported") symbols)"
exit $status
