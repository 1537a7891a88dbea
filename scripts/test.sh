#!/usr/bin/env bash
# Sets up (scripts/setup.sh), builds and runs the whole test suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build} scripts/setup.sh
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j"$(nproc)" --timeout 900
