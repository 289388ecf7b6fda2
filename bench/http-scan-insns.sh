#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# Instructions per request-head byte of the HTTP/1.x scanner (target B4:
# <= 4), counted by callgrind over http_scan_feed() and everything it calls
# (memchr, memcpy), and, for a whole head in one read, over
# http_scan_whole(): the path the shim's read hook takes for such a read
# (its body is inlined there, ctxshim_request_ctx_whole(); this is the
# library's out-of-line copy of the same code).  Builds
# bench/http-scan-bench.c with the project's optimisation level (-O2, as
# buildtype=debugoptimized) into a temporary directory, so it needs no
# build tree.
#
#   bench/http-scan-insns.sh [ITERATIONS]
#
# Prints one line per profile, function and read size: instructions per
# request, per head byte, and PASS/MISS against 4 per byte.  Read size
# "whole" is the whole request in one read: http_scan_feed() is given the
# request (head and body), http_scan_whole() the head alone, as the shim
# does (the body comes in a later read, through the feed, not counted).
# Body bytes of the "post" profile are skipped without being looked at and
# are not counted as head bytes.

set -eu

src=$(cd "$(dirname "$0")/.." && pwd)
iters=${1:-2000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

: >"$tmp/config.h"
${CC:-gcc} -O2 -g -std=gnu11 -D_GNU_SOURCE -I"$tmp" -I"$src/proc-context" \
	"$src/bench/http-scan-bench.c" "$src/proc-context/http-scan.c" \
	"$src/proc-context/w3c.c" -o "$tmp/bench"

# count FUNCTION CHUNK: one row (CHUNK 0 or "whole": the whole request)
count() {
	out="$tmp/cg.out"
	info=$(valgrind --tool=callgrind --callgrind-out-file="$out" \
		--toggle-collect="$1" "$tmp/bench" "$profile" "$iters" "$2" 2>/dev/null)
	ir=$(sed -n 's/^summary: *//p' "$out" | awk '{print $1}')
	head=$(echo "$info" | sed 's/.*head_bytes=\([0-9]*\).*/\1/')
	req=$(echo "$info" | sed 's/.*request_bytes=\([0-9]*\).*/\1/')
	awk -v ir="$ir" -v n="$iters" -v head="$head" -v req="$req" -v p="$profile" \
		-v f="$1" -v c="$2" 'BEGIN {
		per = ir / n; pb = per / head
		printf "%-8s %-15s %5s %6d %6d %10.1f %10.2f  %s\n", p, f,
			(c == 0 || c == "whole" ? "whole" : c), head, req, per, pb,
			(pb <= 4 ? "PASS" : "MISS")
	}'
}

printf '%-8s %-15s %5s %6s %6s %10s %10s  %s\n' profile function read head req \
	insn/req insn/byte B4
for profile in minimal curl browser post; do
	for chunk in 0 64 7 1; do
		count http_scan_feed "$chunk"
		if [ "$chunk" = 0 ]; then
			count http_scan_whole whole
		fi
	done
done
