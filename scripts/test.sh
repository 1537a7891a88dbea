#!/usr/bin/env bash
# Sets up (scripts/setup.sh), builds and runs the whole test suite with ctest,
# then applies the expected-skips rule (scripts/check_skips.py): a skip passes
# only for hardware this machine lacks. Either failing fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BUILD_DIR="$BUILD_DIR" scripts/setup.sh
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
junit="$BUILD_DIR/ctest-junit.xml"
rm -f "$junit"
rc=0
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" --timeout 900 --output-junit "$(realpath "$junit")" || rc=$?
skips=0
python3 scripts/check_skips.py "$junit" || skips=$?
[ "$rc" -eq 0 ] || echo "test.sh: FAIL: ctest exited $rc"
[ "$skips" -eq 0 ] || echo "test.sh: FAIL: skips this machine does not explain (above)"
[ "$rc" -eq 0 ] && [ "$skips" -eq 0 ]
