#!/bin/sh
# The OTEP-4947 symbol as readers require it: otel_thread_ctx_v1 in .dynsym,
# STT_TLS, STB_GLOBAL, default visibility, size 8.  No relocation may name
# it: the shim reaches its own variable through a hidden alias, since a
# relocation against the exported name binds to whichever module defines it
# first (an executable's non-TLS definition kills the process in ld.so).
# The access stays TLSDESC (the model the OTEP recommends), through a
# symbol-less R_X86_64_TLSDESC whose addend is the variable's st_value;
# the eBPF profiler's resolveTLSAccess takes the first symbol-less one and
# adds st_value itself, so that first one must have addend 0.
# usage: symbol-tls.sh READELF LIBRARY
set -eu
readelf=$1 lib=$2
status=0
line=$("$readelf" -W --dyn-syms "$lib" | awk '$NF == "otel_thread_ctx_v1"')
if [ -z "$line" ]; then
	echo "otel_thread_ctx_v1 is not in .dynsym of $lib"
	exit 1
fi
# Num: Value Size Type Bind Vis Ndx Name (split on purpose)
# shellcheck disable=SC2086
set -- $line
value=$2
[ "$3" = 8 ] || { echo "size is $3, want 8"; status=1; }
[ "$4" = TLS ] || { echo "type is $4, want TLS"; status=1; }
[ "$5" = GLOBAL ] || { echo "binding is $5, want GLOBAL"; status=1; }
[ "$6" = DEFAULT ] || { echo "visibility is $6, want DEFAULT"; status=1; }
[ "$7" != UND ] || { echo "the symbol is undefined"; status=1; }
relocs=$("$readelf" -W -r "$lib")
if printf '%s\n' "$relocs" | awk '$5 ~ /^otel_thread_ctx_v1(@|$)/' | grep .; then
	echo "a relocation names otel_thread_ctx_v1"
	status=1
fi
# symbol-less TLSDESC: Offset Info Type Addend
anon=$(printf '%s\n' "$relocs" | awk '$3 == "R_X86_64_TLSDESC" && NF == 4 { print $4 }')
first=$(printf '%s\n' "$anon" | sed -n 1p)
own=$(printf '%s\n' "$value" | sed 's/^0*//; s/^$/0/')
if [ "$first" != 0 ]; then
	echo "the first symbol-less R_X86_64_TLSDESC has addend ${first:-(none)}, want 0"
	status=1
fi
if ! printf '%s\n' "$anon" | grep -qx "$own"; then
	echo "no symbol-less R_X86_64_TLSDESC with addend $own (otel_thread_ctx_v1)"
	status=1
fi
[ $status -eq 0 ] &&
	echo "otel_thread_ctx_v1: TLS GLOBAL DEFAULT size 8, TLSDESC through a hidden alias"
exit $status
