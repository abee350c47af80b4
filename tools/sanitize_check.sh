#!/usr/bin/env bash
# Build the compiled core with AddressSanitizer + UndefinedBehaviorSanitizer in a scratch copy of
# the tree and run the hashing, guard and shell tests under it; any sanitizer report fails.
#
#   tools/sanitize_check.sh            # PYTHON defaults to python3 (needs the [test] deps)
#   PYTHON=.venv/bin/python tools/sanitize_check.sh
#
# CPython itself is not instrumented: the runtime is preloaded (LD_PRELOAD), leaks are not
# checked (CPython keeps interned objects on purpose) and pymalloc is off so that ASan sees
# every Python object allocation. Set KEEP=1 to keep the scratch copy.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
case "$PY" in */*) PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")" ;; esac  # we cd away below
CC_BIN="${CC:-gcc}"
asan="$("$CC_BIN" -print-file-name=libasan.so)"
ubsan="$("$CC_BIN" -print-file-name=libubsan.so)"
[ -f "$asan" ] && [ -f "$ubsan" ] || { echo "sanitize_check: libasan/libubsan not found (install gcc)" >&2; exit 2; }

work="$(mktemp -d /tmp/loopcore-sanitize.XXXXXX)"
[ "${KEEP:-}" = 1 ] || trap 'rm -rf "$work"' EXIT
tar --exclude=.git --exclude=.venv --exclude=build --exclude='*.so' --exclude='src/_native/*.c' \
    --exclude=.hypothesis --exclude=__pycache__ -cf - . | tar -xf - -C "$work"
cd "$work"
echo "sanitize_check: building with -fsanitize=address,undefined in $work"
LOOPCORE_SANITIZE=address,undefined "$PY" setup.py -q build_ext --inplace -j 2 >build.log 2>&1 \
    || { tail -40 build.log >&2; exit 1; }

export LD_PRELOAD="$asan $ubsan"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:halt_on_error=1:detect_stack_use_after_return=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
export PYTHONMALLOC=malloc
export PYTHONPATH=src
set +e
"$PY" -m pytest -q -p no:cacheprovider \
    tests/test_hashing.py tests/test_hostile_hashing.py tests/test_hashing_fast.py tests/test_guard.py \
    tests/test_guard_state.py \
    tests/test_guard_twins.py tests/test_shell_twins.py >test.log 2>&1
rc=$?
set -e
tail -5 test.log
if grep -qE "ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer|SUMMARY: UndefinedBehaviorSanitizer" test.log; then
    grep -nE -A30 "ERROR: AddressSanitizer|runtime error:" test.log | head -80 >&2
    echo "sanitize_check: sanitizer report(s) above" >&2
    exit 1
fi
[ "$rc" -eq 0 ] || { echo "sanitize_check: tests failed under the sanitizers (rc=$rc)" >&2; tail -60 test.log >&2; exit 1; }
echo "sanitize_check: no sanitizer reports"
