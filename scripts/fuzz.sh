#!/usr/bin/env bash
# Why: the libFuzzer targets (tests/fuzz/*_fuzz.cc) need a clang build of the
# readers with coverage, ASan and UBSan, apart from the gcc build; this script makes
# that build (only the fuzz targets) and runs them, so CI and a person run the
# same thing.
#
#   scripts/fuzz.sh TARGET|all [EXECUTIONS]   fuzz for EXECUTIONS inputs (default 1000000);
#                                             new inputs go to build-fuzz/corpus/TARGET, crashes
#                                             to build-fuzz/crashes/TARGET-*; prints execs, exec/s, crashes
#   scripts/fuzz.sh --ci                      every target over its seed corpus and past crashes
#                                             (tests/fuzz/corpus, tests/fuzz/regressions), then
#                                             FUZZ_CI_SECONDS (default 20) of real fuzzing per target;
#                                             a crash is copied to tests/fuzz/regressions/TARGET/ (commit
#                                             it with the fix) and fails the run
# Options: --build-dir DIR (default build-fuzz), --seconds N (a time cap per target, default none).
# TARGET: safetensors token_file shard_reader config_loader tokenizer hf_config hf_import sft_jsonl checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TARGETS=(safetensors token_file shard_reader config_loader tokenizer hf_config hf_import sft_jsonl checkpoint)
BUILD=build-fuzz CI=0 SECONDS_CAP=0 ARGS=()
while (($#)); do
  case "$1" in
    --ci) CI=1 ;;
    --build-dir) BUILD=$2; shift ;;
    --seconds) SECONDS_CAP=$2; shift ;;
    -h|--help) sed -n 2,15p "$0"; exit 0 ;;
    *) ARGS+=("$1") ;;
  esac
  shift
done

CLANGXX=${CLANGXX:-clang++} CLANG=${CLANG:-clang}
if ! command -v "$CLANGXX" >/dev/null 2>&1; then
  echo "fuzz: error: $CLANGXX not found; the fuzz targets need clang (libFuzzer). Run scripts/setup.sh (it installs clang) or apt-get install clang" >&2
  exit 1
fi
probe=$(mktemp -d)
printf '#include <cstdint>\n#include <cstddef>\nextern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t){return 0;}\n' > "$probe/p.cc"
if ! "$CLANGXX" -fsanitize=fuzzer,address "$probe/p.cc" -o "$probe/p" 2>"$probe/err"; then
  echo "fuzz: error: $CLANGXX cannot link -fsanitize=fuzzer,address: $(head -3 "$probe/err"). Run scripts/setup.sh (clang, libclang-rt-dev)" >&2
  rm -rf "$probe"; exit 1
fi
rm -rf "$probe"

LAUNCHER=()
command -v ccache >/dev/null 2>&1 && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
if [ ! -f "$BUILD/build.ninja" ]; then
  echo "fuzz: configuring $BUILD (clang, ASan + UBSan, libFuzzer coverage)"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLONGCTX_CUDA=OFF -DLONGCTX_FUZZ=ON \
    -DCMAKE_C_COMPILER="$CLANG" -DCMAKE_CXX_COMPILER="$CLANGXX" "${LAUNCHER[@]}" \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" >"$BUILD.configure.log" 2>&1 ||
    { echo "fuzz: error: cmake configure of $BUILD failed; see $BUILD.configure.log" >&2; tail -20 "$BUILD.configure.log" >&2; exit 1; }
fi
cmake --build "$BUILD" --target longctx_fuzz_all -- -j"${FUZZ_JOBS:-$(nproc)}" >"$BUILD.build.log" 2>&1 ||
  { echo "fuzz: error: building the fuzz targets in $BUILD failed; see $BUILD.build.log" >&2; tail -30 "$BUILD.build.log" >&2; exit 1; }

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0:malloc_limit_mb=4096}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
if ((CI)); then
  for t in "${TARGETS[@]}"; do
    dirs=("$ROOT/tests/fuzz/corpus/$t")
    [ -d "$ROOT/tests/fuzz/regressions/$t" ] && dirs+=("$ROOT/tests/fuzz/regressions/$t")
    n=$(find "${dirs[@]}" -type f | wc -l)
    if [ "$n" -eq 0 ]; then echo "fuzz: error: no seed inputs for $t in tests/fuzz/corpus/$t" >&2; status=1; continue; fi
    log=$BUILD/ci-$t.log
    # -runs=0: run every given input once, mutate nothing. -rss_limit_mb: an input that makes a
    # reader allocate absurd memory fails here too.
    if "$BUILD/fuzz/${t}_fuzz" -runs=0 -rss_limit_mb=2048 -timeout=10 "${dirs[@]}" >"$log" 2>&1; then
      echo "fuzz: $t: $n inputs OK"
    else
      echo "fuzz: $t: FAILED over its $n inputs; see $log" >&2; tail -30 "$log" >&2; status=1
    fi
  done
  # Then fuzz each target for a fixed time from its seeds (new inputs go to a
  # scratch corpus; the committed seeds stay as they are). A crashing input is
  # saved under tests/fuzz/regressions/TARGET/, where every later --ci run
  # replays it.
  budget=${FUZZ_CI_SECONDS:-20}
  if ((budget > 0)); then
    for t in "${TARGETS[@]}"; do
      scratch=$BUILD/ci-corpus/$t crashes=$BUILD/ci-crashes/$t
      rm -rf "$crashes"; mkdir -p "$scratch" "$crashes"
      seeds=("$ROOT/tests/fuzz/corpus/$t"); [ -d "$ROOT/tests/fuzz/regressions/$t" ] && seeds+=("$ROOT/tests/fuzz/regressions/$t")
      log=$BUILD/ci-fuzz-$t.log
      set +e
      "$BUILD/fuzz/${t}_fuzz" -max_total_time="$budget" -rss_limit_mb=2048 -timeout=10 -max_len=65536 \
        -artifact_prefix="$crashes/" -print_final_stats=1 "$scratch" "${seeds[@]}" >"$log" 2>&1
      rc=$?
      set -e
      execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
      found=$(find "$crashes" -type f | wc -l)
      if ((rc == 0 && found == 0)); then
        echo "fuzz: $t: ${budget}s of fuzzing, $execs executions, 0 crashes"
      else
        mkdir -p "$ROOT/tests/fuzz/regressions/$t"
        for f in "$crashes"/*; do [ -f "$f" ] && cp "$f" "$ROOT/tests/fuzz/regressions/$t/"; done
        echo "fuzz: $t: CRASH after $execs executions (exit $rc); input(s) saved to tests/fuzz/regressions/$t/:" \
             "$(ls "$crashes" | tr '\n' ' '); see $log" >&2
        grep -m1 -A12 'ERROR: \|SUMMARY\|==ERROR' "$log" >&2 || tail -20 "$log" >&2
        status=1
      fi
    done
  fi
  exit $status
fi

TARGET=${ARGS[0]:-}
EXECS=${ARGS[1]:-1000000}
if [ -z "$TARGET" ]; then echo "usage: scripts/fuzz.sh TARGET|all [EXECUTIONS] | --ci  (targets: ${TARGETS[*]})" >&2; exit 2; fi
run=("$TARGET"); [ "$TARGET" = all ] && run=("${TARGETS[@]}")
for t in "${run[@]}"; do
  [ -x "$BUILD/fuzz/${t}_fuzz" ] || { echo "fuzz: error: unknown target $t (known: ${TARGETS[*]})" >&2; exit 2; }
  mkdir -p "$BUILD/corpus/$t" "$BUILD/crashes"
  log=$BUILD/fuzz-$t.log
  cap=(); ((SECONDS_CAP > 0)) && cap=(-max_total_time="$SECONDS_CAP")
  # New inputs go to the scratch corpus (first dir); the seeds stay as committed.
  seeds=("$ROOT/tests/fuzz/corpus/$t"); [ -d "$ROOT/tests/fuzz/regressions/$t" ] && seeds+=("$ROOT/tests/fuzz/regressions/$t")
  start=$(date +%s)
  set +e
  "$BUILD/fuzz/${t}_fuzz" -runs="$EXECS" "${cap[@]}" -rss_limit_mb=2048 -timeout=10 -max_len=65536 \
    -artifact_prefix="$BUILD/crashes/$t-" -print_final_stats=1 "$BUILD/corpus/$t" "${seeds[@]}" >"$log" 2>&1
  rc=$?
  set -e
  secs=$(( $(date +%s) - start ))
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  crashes=$(ls "$BUILD/crashes" | grep -c "^$t-" || true)
  echo "fuzz: $t: $execs executions in ${secs}s ($speed exec/s), exit $rc, crash files: $crashes; log $log"
  ((rc == 0)) || status=1
done
exit $status
