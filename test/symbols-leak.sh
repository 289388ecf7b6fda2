#!/bin/sh
# Fails when libctxshim.so exports a defined symbol that is not in the
# version script, or when a name in the map is not exported.  Versions
# count: a name of the anonymous node must be exported unversioned, a name
# of a named node (the libcurl flavours) with exactly that version.
# usage: symbols-leak.sh NM LIBRARY MAPFILE
set -eu
nm=$1 lib=$2 map=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# "name" or "name@VERSION" ("@@", the default version, counts as "@").
# Version nodes show up as absolute symbols named after the node; skip them.
"$nm" -D --defined-only "$lib" | awk '$2 != "A" {print $NF}' | sed 's/@@/@/' \
	| sort -u >"$tmp/exported"
# Names listed under "global:" (comments stripped), as "name" for the
# anonymous node and "name@NODE" for a named one.
sed -e 's,/\*.*\*/,,g' -e 's,#.*,,' "$map" | awk '
	/^[ \t]*[A-Za-z0-9_.]+[ \t]*\{/ { node = $1; sub(/\{.*/, "", node); g = 0; next }
	/^[ \t]*\{/ { node = ""; g = 0; next }
	/^[ \t]*\}/ { g = 0; next }
	/global:/ { g = 1; next }
	/local:/ { g = 0; next }
	g {
		gsub(/[ \t;]/, "")
		if ($0 == "" || $0 ~ /[*?]/) next
		print (node == "" ? $0 : $0 "@" node)
	}' | sort -u >"$tmp/listed"

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
