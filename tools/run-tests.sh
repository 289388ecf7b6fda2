#!/bin/sh
# Builds (if needed) and runs every test suite, then prints one summary
# line "N passed, N failed[, N skipped]".  Exit status 0 only if nothing
# failed.  Usage: tools/run-tests.sh [BUILDDIR] [meson test args...]
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
[ $# -gt 0 ] && shift
if [ ! -f "$build/build.ninja" ]; then
	meson setup "$build" "$src" || exit 1
fi
meson compile -C "$build" || { echo "0 passed, 1 failed"; exit 1; }
meson test -C "$build" --print-errorlogs --num-processes 2 "$@"
status=$?
python3 - "$build/meson-logs/testlog.json" <<'PY'
import json, sys
counts = {"OK": 0, "FAIL": 0, "SKIP": 0, "TIMEOUT": 0, "ERROR": 0, "EXPECTEDFAIL": 0,
          "UNEXPECTEDPASS": 0}
try:
    with open(sys.argv[1]) as f:
        for line in f:
            line = line.strip()
            if line:
                r = json.loads(line).get("result", "ERROR")
                counts[r] = counts.get(r, 0) + 1
except OSError as e:
    print(f"cannot read {sys.argv[1]}: {e}", file=sys.stderr)
passed = counts["OK"] + counts["EXPECTEDFAIL"]
failed = counts["FAIL"] + counts["TIMEOUT"] + counts["ERROR"] + counts["UNEXPECTEDPASS"]
print(f"{passed} passed, {failed} failed, {counts['SKIP']} skipped")
PY
exit $status
