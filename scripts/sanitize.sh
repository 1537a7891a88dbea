#!/usr/bin/env bash
# Why: most of longctx's kernels are hand-written SIMD (packers that read whole
# 16-lane vectors near a buffer's end, tile products on padded operands,
# register transposes) and its readers parse untrusted files; a read one lane
# past an allocation or a signed overflow gives right answers until it does
# not. The tests check values; this script runs the same test suite on a build
# with AddressSanitizer and UndefinedBehaviorSanitizer (gcc), so such a read
# fails a test with a stack trace instead. Not part of CI: on the 2-core CI
# machine the instrumented build takes ~25 minutes and its tests ~10 (CI's
# budget is 30); run it after changing a kernel, a packer or a reader.
#
#   scripts/sanitize.sh [CTEST ARGS...]   e.g. scripts/sanitize.sh -R Attention
#
# Env: BUILD_DIR (default build-asan). Exits non-zero on any failure. The
# libFuzzer corpus test (fuzz_corpus) is left out: scripts/fuzz.sh is already an
# ASan build of its own (clang), and CI runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build-asan}
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"

scripts/setup.sh --no-build  # packages, tokenizer files, corpora (what the tests read)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLONGCTX_CUDA=OFF \
  -DCMAKE_CXX_FLAGS="$SAN" -DCMAKE_C_FLAGS="$SAN" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >"$BUILD.configure.log" 2>&1 ||
  { echo "sanitize: error: configuring $BUILD failed; see $BUILD.configure.log" >&2; tail -20 "$BUILD.configure.log" >&2; exit 1; }
cmake --build "$BUILD"
# The tests look for the tokenizer files in <build>/.cache among other places
# (the repository's .cache when the build is inside it): link it for a build
# directory elsewhere.
[ -e "$BUILD/.cache" ] || ln -s "$PWD/.cache" "$BUILD/.cache"

# detect_leaks=0: Open MPI and the OpenMP runtime keep allocations to exit
# (reported as leaks under mpirun); quarantine_size_mb=0: ASan otherwise keeps
# 256 MiB of freed blocks resident, which the streaming reader's peak-RSS test
# (ShardReaderTest.StreamingDoesNotHoldTheShardInMemory) counts as its own.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:halt_on_error=1:quarantine_size_mb=0:thread_local_quarantine_size_kb=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
ctest --test-dir "$BUILD" --output-on-failure -j"$(nproc)" --timeout 1800 -E '^fuzz_corpus$' "$@"
