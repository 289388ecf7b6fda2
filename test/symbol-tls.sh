#!/bin/sh
# The OTEP-4947 symbol as readers require it: otel_thread_ctx_v1 in .dynsym,
# STT_TLS, STB_GLOBAL, default visibility, size 8, and an R_X86_64_TLSDESC
# relocation against it (the access model the OTEP recommends).
# usage: symbol-tls.sh READELF LIBRARY
set -eu
readelf=$1 lib=$2
status=0
line=$("$readelf" -W --dyn-syms "$lib" | awk '$NF == "otel_thread_ctx_v1"')
if [ -z "$line" ]; then
	echo "otel_thread_ctx_v1 is not in .dynsym of $lib"
	exit 1
fi
# Num: Value Size Type Bind Vis Ndx Name
set -- $line
[ "$3" = 8 ] || { echo "size is $3, want 8"; status=1; }
[ "$4" = TLS ] || { echo "type is $4, want TLS"; status=1; }
[ "$5" = GLOBAL ] || { echo "binding is $5, want GLOBAL"; status=1; }
[ "$6" = DEFAULT ] || { echo "visibility is $6, want DEFAULT"; status=1; }
[ "$7" != UND ] || { echo "the symbol is undefined"; status=1; }
if ! "$readelf" -W -r "$lib" | awk '$3 == "R_X86_64_TLSDESC" && $5 == "otel_thread_ctx_v1"' | grep -q .; then
	echo "no R_X86_64_TLSDESC relocation against otel_thread_ctx_v1"
	status=1
fi
[ $status -eq 0 ] && echo "otel_thread_ctx_v1: TLS GLOBAL DEFAULT size 8, TLSDESC"
exit $status
