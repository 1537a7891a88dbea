#!/bin/bash
# Why: context parallelism's price on one machine — a long row split over 2
# ranks of 1 thread each against the same row on 1 rank with 2 threads — and
# how much of its step is the K/V exchange, measured together in one command
# (docs/BENCHMARKS.md, "Context parallel on CPU"). Not a test: it asserts
# nothing and prints a table.
#   scripts/bench_context_parallel.sh [BUILD_DIR]      (default: build)
# Environment: SEQ (8192), STEPS (3; the median of steps 2..STEPS), CONFIG
# (configs/ref-b.textproto), OUT (runs/bench_context_parallel).
# Every run: one row of SEQ tokens of the byte-token demo corpus a step,
# grad_accum 1, no eval/probe/checkpoint during the steps.
#   A   1 rank  x 2 threads                (whole row)
#   B   2 ranks x 1 thread, context_parallel 2 (balanced split)
# comm share = comm_s (seconds rank 0 spends in the exchange's SendRecv and
# the gradient all-reduce; blocking, so it includes waiting for the other
# rank) / step time.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
BIN=$BUILD/bin/longctx
SEQ=${SEQ:-8192} STEPS=${STEPS:-3} CONFIG=${CONFIG:-configs/ref-b.textproto} OUT=${OUT:-runs/bench_context_parallel}
[ -x "$BIN" ] || { echo "bench_context_parallel: $BIN not found" >&2; exit 1; }
[ -f data/corpus/demo.ltok ] || LONGCTX_BIN="$BIN" bash scripts/prepare_demo_corpus.sh >/dev/null
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none"
common=(--config "$CONFIG" --data.path=data/corpus/demo.ltok --data.tokenizer=byte
  --data.seq_len="$SEQ" --model.max_position_embeddings="$SEQ" --data.batch_size=1 --grad_accum=1 --steps="$STEPS"
  --eval_every=0 --eval_batches=0 --ckpt_every=0 --probe_every=0 --loss_by_position_every=0 --tensorboard=false
  --log_every=1 --force_threads=true)
rm -rf "$OUT"; mkdir -p "$OUT"
$MPI -np 1 "$BIN" train "${common[@]}" --threads=2 --out_dir="$OUT/A" > "$OUT/A.log" 2>&1
$MPI -np 2 "$BIN" train "${common[@]}" --threads=1 --context_parallel=2 --out_dir="$OUT/B" > "$OUT/B.log" 2>&1
python3 - "$OUT" "$SEQ" <<'PY'
import json, statistics, sys
out, seq = sys.argv[1], int(sys.argv[2])
def rows(run):
    r = [json.loads(l) for l in open(f"{out}/{run}/metrics.jsonl")]
    return [j for j in r if j.get("kind") == "train" and j["step"] >= 2]
res = {}
for run in "AB":
    r = rows(run)
    tps = statistics.median(j["tokens_per_s"] for j in r)
    comm = statistics.median(j["comm_s"] * j["tokens_per_s"] / j["tokens"] for j in r)
    res[run] = (tps, comm, r[-1].get("context_bytes_full", 0), r[-1].get("context_bytes_window", 0), r[-1]["loss"])
print(f"bench_context_parallel: {seq}-token row, median of steps 2..{max(j['step'] for j in rows('A'))}")
print(f"  A 1 rank x 2 threads           {res['A'][0]:8.1f} tok/s  comm {100*res['A'][1]:5.1f} %  loss {res['A'][4]:.6f}")
print(f"  B 2 ranks x 1 thread, C 2      {res['B'][0]:8.1f} tok/s  comm {100*res['B'][1]:5.1f} %  loss {res['B'][4]:.6f}"
      f"  exchange {res['B'][2]/2**20:.1f} MiB full + {res['B'][3]/2**20:.1f} MiB window layers (rank 0, a step)")
print(f"  B / A tokens/s: {res['B'][0]/res['A'][0]:.3f}")
PY
