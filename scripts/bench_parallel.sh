#!/bin/bash
# Why: the data-parallel throughput figures — ref-b on a 2-core machine with
# 2 ranks x 1 thread against 1 rank x 2 threads (tokens/s ratio, goal >= 0.9),
# the share of the step spent in communication, FSDP against DDP step time, and
# what the fp64 gradient sum (train.proto grad_sum_fp64) costs — come from one
# command, so they are always measured together, in the same conditions, and
# can be re-measured on a quiet machine (docs/BENCHMARKS.md, "Data parallel on
# CPU"). Not a test: it asserts nothing and prints a table.
#
#   scripts/bench_parallel.sh [BUILD_DIR]        (default: build)
# Environment: STEPS (6; the table uses the median of steps 2..STEPS),
#   ROUNDS (1; runs alternate A B B32 C C32 per round, medians over rounds),
#   OUT (runs/bench_parallel).
# Every run: configs/ref-b.textproto's model (56.4 M parameters) on the
# byte-token demo corpus, global batch 4 rows x 512 tokens = 2,048 tokens a
# step (grad_accum 2 on 1 rank, 1 on 2 ranks), no eval/probe/checkpoint during
# the steps (the final checkpoint and eval come after the timed steps).
#   A    1 rank  x 2 threads, DDP
#   B    2 ranks x 1 thread,  DDP            (grad_sum_fp64, the default)
#   B32  2 ranks x 1 thread,  DDP, grad_sum_fp64=false
#   C    2 ranks x 1 thread,  FSDP           (grad_sum_fp64)
#   C32  2 ranks x 1 thread,  FSDP, grad_sum_fp64=false
# and the DDP gradient sum alone (tests/parallel/parallel_train_check
# --sync_repeats: 2 ranks, ref-b's gradients, after a barrier), fp64 and fp32.
# comm share = comm_s (seconds a step spends inside train/parallel's
# collectives on rank 0, blocking: it includes waiting for the other rank) /
# step time (tokens / tokens_per_s). The first step of each run is excluded
# as warm-up. Duration: 755 s for STEPS=4 under load 14-20 (before the
# sync-alone runs); estimated 4-5 min on a quiet machine for STEPS=6 (ref-b's
# ~500 tokens/s single-process step), not measured quiet.
set -u
cd "$(dirname "$0")/.."
build="${1:-build}"
bin="$build/bin/longctx"
[ -x "$bin" ] || { echo "bench_parallel: $bin missing (cmake --build $build --target longctx)"; exit 1; }
[ -f data/corpus/demo.ltok ] || { echo "bench_parallel: data/corpus/demo.ltok missing (bash scripts/prepare_demo_corpus.sh)"; exit 1; }
steps="${STEPS:-6}"; rounds="${ROUNDS:-1}"; out="${OUT:-runs/bench_parallel}"
[ "$steps" -ge 2 ] || { echo "bench_parallel: STEPS must be >= 2 (step 1 is warm-up)"; exit 1; }
rm -rf "$out"; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun="mpirun --allow-run-as-root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1"
common=(--config configs/ref-b.textproto --data.path=data/corpus/demo.ltok --data.tokenizer=byte
        --data.batch_size=2 --steps="$steps" --log_every=1 --eval_every=0 --eval_batches=1 --probe_every=0
        --ckpt_every=100000 --keep_checkpoints=1 --backend=cpu --tensorboard=false)
declare -A np=([A]=1 [B]=2 [B32]=2 [C]=2 [C32]=2)
declare -A extra=([A]="--threads=2 --grad_accum=2 --mode=DDP"
                  [B]="--threads=1 --grad_accum=1 --mode=DDP"
                  [B32]="--threads=1 --grad_accum=1 --mode=DDP --grad_sum_fp64=false"
                  [C]="--threads=1 --grad_accum=1 --mode=FSDP"
                  [C32]="--threads=1 --grad_accum=1 --mode=FSDP --grad_sum_fp64=false")
runs="A B B32 C C32"
echo "bench_parallel: $(date -u +%FT%TZ) $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "bench_parallel: cpu flags: $(grep -o -w 'avx2\|fma\|avx512f\|avx512_bf16\|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
start=$(date +%s)
for round in $(seq 1 "$rounds"); do
  for r in $runs; do
    dir="$out/$r.$round"
    # shellcheck disable=SC2086
    if ! $mpirun -np "${np[$r]}" "$bin" train "${common[@]}" ${extra[$r]} --out_dir="$dir" > "$dir.log" 2>&1; then
      echo "bench_parallel: FAIL: run $r (round $round) exited non-zero; last lines of $dir.log:"; tail -20 "$dir.log"; exit 1
    fi
    echo "bench_parallel: $r round $round done ($(( $(date +%s) - start )) s so far, load $(cut -d' ' -f1 /proc/loadavg))"
  done
done
# The DDP gradient sum alone (2 ranks, ref-b, after a barrier so no rank waits
# for the other): what the collectives cost when nobody waits, against the
# step's comm_s — the overlap argument of docs/BENCHMARKS.md.
check="$build/tests/parallel/parallel_train_check"
if [ -x "$check" ]; then
  for fp in true false; do
    $mpirun -np 2 "$check" --config=configs/ref-b.textproto --mode=ddp --layers=8 --seq_len=512 --batch_size=2 \
      --global_micro=2 --steps=3 --threads=1 --data=data/corpus/demo.ltok --fp64=$fp --sync_repeats=5 \
      > "$out/sync_alone.$fp.txt" 2>&1 || { echo "bench_parallel: FAIL: sync-alone run (fp64 $fp)"; tail "$out/sync_alone.$fp.txt"; exit 1; }
  done
else
  echo "bench_parallel: $check missing: no sync-alone figure (cmake --build $build --target parallel_train_check)"
fi
python3 - "$out" "$rounds" "$steps" <<'EOF'
import json, statistics, sys, glob, os
out, rounds, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def med(v): return statistics.median(v) if v else float('nan')
rows = {}
for r in ["A", "B", "B32", "C", "C32"]:
    tps, share, step_s, comm = [], [], [], []
    for k in range(1, rounds + 1):
        ev = [json.loads(l) for l in open(os.path.join(out, f"{r}.{k}", "metrics.jsonl"))]
        ev = [e for e in ev if e.get("kind") == "train" and e["step"] >= 2]
        tps.append(med([e["tokens_per_s"] for e in ev]))
        s = [e["tokens"] / e["tokens_per_s"] for e in ev]
        step_s.append(med(s))
        comm.append(med([e["comm_s"] for e in ev]))
        share.append(med([e["comm_s"] / (e["tokens"] / e["tokens_per_s"]) for e in ev]))
    rows[r] = dict(tps=med(tps), step_s=med(step_s), comm=med(comm), share=med(share), runs=tps)
print(f"\nbench_parallel: ref-b, 2,048 tokens a step, medians of steps 2..{steps} over {rounds} round(s)")
print("| run | ranks x threads | mode | grad sum | tokens/s | step s | comm s | comm share |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
desc = {"A": ("1 x 2", "DDP", "fp64"), "B": ("2 x 1", "DDP", "fp64"), "B32": ("2 x 1", "DDP", "fp32"),
        "C": ("2 x 1", "FSDP", "fp64"), "C32": ("2 x 1", "FSDP", "fp32")}
for r, x in rows.items():
    d = desc[r]
    print(f"| {r} | {d[0]} | {d[1]} | {d[2]} | {x['tps']:.1f} | {x['step_s']:.2f} | {x['comm']:.3f} | {100*x['share']:.1f} % |")
print(f"\ntokens/s ratio B/A (2 ranks x 1 thread vs 1 rank x 2 threads; goal >= 0.9): {rows['B']['tps']/rows['A']['tps']:.3f}")
print(f"FSDP vs DDP step time C/B: {rows['C']['step_s']/rows['B']['step_s']:.3f}")
print(f"fp64 gradient sum cost: DDP step B/B32 {rows['B']['step_s']/rows['B32']['step_s']:.3f}, "
      f"comm {rows['B']['comm']:.3f} s vs {rows['B32']['comm']:.3f} s; "
      f"FSDP step C/C32 {rows['C']['step_s']/rows['C32']['step_s']:.3f}, comm {rows['C']['comm']:.3f} s vs {rows['C32']['comm']:.3f} s")
for fp in ["true", "false"]:
    f = os.path.join(out, f"sync_alone.{fp}.txt")
    if not os.path.exists(f): continue
    lines = open(f).read().splitlines()
    alone = [l for l in lines if l.startswith("sync_alone_s")]
    steps_c = [float(l.split()[-1]) for l in lines if l.startswith("step ") and int(l.split()[1]) >= 2]
    if alone:
        print(f"DDP gradient sum alone after a barrier (grad_sum_fp64={fp}): {alone[0].split()[1]} s; "
              f"in the step (comm_s, steps 2-3 of that run, incl. waiting): {med(steps_c):.3f} s")
EOF
echo "bench_parallel: took $(( $(date +%s) - start )) s; load after: $(cut -d' ' -f1-3 /proc/loadavg)"
