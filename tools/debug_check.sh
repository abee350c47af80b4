#!/usr/bin/env bash
# Build the compiled core with LOOPCORE_DEBUG_BUILD=1 (-O0 -g, Cython bounds and wraparound
# checks on) in a scratch copy of the tree and run the whole test suite on it: an
# out-of-bounds access the release build hides is an IndexError here.
#
#   PYTHON=.venv/bin/python tools/debug_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
case "$PY" in */*) PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")" ;; esac  # we cd away below
parent="$(mktemp -d /tmp/loopcore-debug.XXXXXX)"
[ "${KEEP:-}" = 1 ] || trap 'rm -rf "$parent"' EXIT
work="$parent/loopcore"
mkdir "$work"
tar --exclude=.git --exclude=.venv --exclude=build --exclude='*.so' --exclude='src/_native/*.c' \
    --exclude=.hypothesis --exclude=__pycache__ -cf - . | tar -xf - -C "$work"
# the real traces live beside the checkout: put them beside the copy too
if [ -d ../shared ]; then ln -s "$(cd ../shared && pwd)" "$parent/shared"; fi
cd "$work"
echo "debug_check: building with LOOPCORE_DEBUG_BUILD=1 in $work"
LOOPCORE_DEBUG_BUILD=1 "$PY" setup.py -q build_ext --inplace -j 2 >build.log 2>&1 || { tail -40 build.log >&2; exit 1; }
PYTHONPATH=src "$PY" -m pytest -q -p no:cacheprovider
