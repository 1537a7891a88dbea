#!/bin/bash
# Why: the data-parallel equality check at full size (ctest runs the same
# comparison on a 2-layer cut, tests/parallel/CMakeLists.txt): 50 steps of
# configs/demo.textproto's model (8 layers, 256-token rows) on the demo corpus
# with one global batch of 8 rows x 256 tokens (data.batch_size 2 x 4
# micro-batches: grad_accum 4/2/1 on 1/2/4 ranks) in DDP, ZeRO-1 and FSDP.
# tests/parallel/compare_runs.sh prints each mode's worst relative per-step
# loss difference against the 1-rank run (fails above 1e-5), and
# parallel_train_check aborts a DDP run unless every rank's parameter hash is
# equal after every step. The 1-rank run is made once (DDP) and is the
# reference of every mode: on one process the three modes are bitwise equal
# (strategy_single_rank_test), and one run fewer per mode matters on 2 cores.
# Logs go to $OUT (default runs/compare_parallel_demo).
#   scripts/compare_parallel_demo.sh [BUILD_DIR] [MODES...]     (default: build ddp zero1 fsdp)
# Environment: STEPS (50), LAYERS (8), THREADS (1: threads per rank on every
# world size — a GEMM may round differently with another count, so runs meant
# to agree bit for bit use the same; 0 = cores / local ranks, i.e. 2 threads
# on 1 rank and 1 on 2 or 4), EXTRA (more parallel_train_check flags, e.g.
# --fp64=false for the fp32 gradient sum).
set -u
cd "$(dirname "$0")/.."
build="${1:-build}"; shift || true
modes="${*:-ddp zero1 fsdp}"
bin="$build/tests/parallel/parallel_train_check"
[ -x "$bin" ] || { echo "compare_parallel_demo: $bin missing (ninja -C $build parallel_train_check)"; exit 1; }
[ -f data/corpus/demo.ltok ] || { echo "compare_parallel_demo: data/corpus/demo.ltok missing (bash scripts/main.sh makes it)"; exit 1; }
out="${OUT:-runs/compare_parallel_demo}"; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
mpirun="mpirun --allow-run-as-root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1"
args=(--data=data/corpus/demo.ltok --layers="${LAYERS:-8}" --seq_len=256 --batch_size=2 --steps="${STEPS:-50}"
      --threads="${THREADS:-1}" ${EXTRA:-})
start=$(date +%s)
if ! $mpirun -np 1 "$bin" --mode=ddp "${args[@]}" > "$out/np1.txt" 2> "$out/np1.err"; then
  echo "compare_parallel_demo: FAIL: the 1-rank run exited non-zero"; cat "$out/np1.err"; exit 1
fi
echo "compare_parallel_demo: 1-rank reference took $(( $(date +%s) - start )) s"
status=0
for mode in $modes; do
  start=$(date +%s)
  COMPARE_RUNS_REF="$out/np1.txt" COMPARE_RUNS_KEEP="$out/$mode" \
    tests/parallel/compare_runs.sh "$mode" "$mpirun" "$bin" "${args[@]}" > "$out/$mode.log" 2>&1 || status=1
  grep -h "^compare_runs\|^parallel_train_check" "$out/$mode.log"
  echo "compare_parallel_demo: $mode (2 and 4 ranks) took $(( $(date +%s) - start )) s"
done
exit $status
