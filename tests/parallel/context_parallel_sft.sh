#!/bin/bash
# Why: the SFT recipe's long steps have fewer rows than ranks (a 65,536-token
# step of 0.5M tokens is 8 rows); context parallelism is what lets every rank
# work on them. Scaled down: the 3:1 schedule of 512- and 4,096-token rows,
# 4,096 tokens a step, so the long step is ONE row, on 4 ranks with
# context_parallel 4 (the row split four ways; the 512-token steps' 8 rows
# each split too), against 1 process: every step's loss within TOL. Then a
# run resumed across C — 2 steps on 2 ranks (C 2), 2 on 1 process, 4 on 4
# ranks (C 4) — against 8 uninterrupted steps on 1 process: the same losses
# (TOL) and the same schedule position (sequence length of every step).
#   context_parallel_sft.sh "MPIRUN..." LONGCTX_BINARY CONFIG TOL
set -u
mpirun="$1"; bin="$2"; config="$3"; tol="$4"
cd "$(dirname "$0")/../.."
[ -f data/sft/byte/sft.lsft ] || LONGCTX_BIN="$bin" bash scripts/prepare_sft_data.sh > /dev/null ||
  { echo "context_parallel_sft: FAIL: scripts/prepare_sft_data.sh"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
common="--config $config --threads=1 --force_threads=true --log_every=1 --ckpt_every=1 --keep_checkpoints=2
  --eval_every=0 --eval_batches=0 --tensorboard=false --model.max_position_embeddings=4096 --grad_accum=1
  --data.sft.path=data/sft/byte --data.sft.seq_lens=512,4096 --data.sft.counts=3,1 --data.sft.tokens_per_batch=4096
  --data.sft.long_examples=drop --optim.decay_steps=8"
run() {  # NP CP OUT STEPS
  if ! $mpirun -np "$1" "$bin" train $common --context_parallel="$2" --out_dir="$3" --steps="$4" > "$3.log" 2>&1; then
    echo "context_parallel_sft: FAIL: $1 ranks, context_parallel $2, to step $4 exited non-zero"; tail -20 "$3.log"
    exit 1
  fi
  grep -h "resumed from" "$3.log" | sed 's/^/  /'
}
steps() { python3 tests/support/train_losses.py "$1" --shape; }  # step seq_len rows loss
compare() {  # NAME REF RUN
  awk -v tol="$tol" -v name="$1" '
    FNR == NR { L[$1] = $2; R[$1] = $3; ref[$1] = $4; nref++; next }
    { n++; if (!($1 in ref) || L[$1] != $2 || R[$1] != $3) { broken++; print "  step " $1 ": shape " $2 " x " $3 " vs " L[$1] " x " R[$1]; next }
      d = $4 - ref[$1]; if (d < 0) d = -d; rel = d / (ref[$1] < 0 ? -ref[$1] : ref[$1]); if (rel > worst) worst = rel
      if (rel > tol) { bad++; print "  step " $1 ": " ref[$1] " vs " $4 } }
    END { printf "context_parallel_sft: %s: %d of %d steps, worst relative loss difference %.3g\n", name, n, nref, worst
          exit (n != nref || broken > 0 || bad > 0) }' "$2" "$3"
}
run 1 1 "$tmp/ref" 8
run 4 4 "$tmp/cp4" 8
steps "$tmp/ref/metrics.jsonl" > "$tmp/ref.steps"
steps "$tmp/cp4/metrics.jsonl" > "$tmp/cp4.steps"
echo "  step seq_len rows loss (1 process):"; sed 's/^/    /' "$tmp/ref.steps"
long_rows=$(awk '$2 == 4096 { print $3 }' "$tmp/ref.steps" | sort -u)
[ "$long_rows" = 1 ] || { echo "context_parallel_sft: FAIL: the 4096-token steps have $long_rows rows, not 1"; exit 1; }
verdict=0
compare "4 ranks, C 4" "$tmp/ref.steps" "$tmp/cp4.steps" || verdict=1
run 2 2 "$tmp/res" 2
run 1 1 "$tmp/res" 4
run 4 4 "$tmp/res" 8
steps "$tmp/res/metrics.jsonl" > "$tmp/res.steps"
compare "resumed C 2 -> 1 -> 4" "$tmp/ref.steps" "$tmp/res.steps" || verdict=1
if [ $verdict -ne 0 ]; then echo "context_parallel_sft: FAIL"; exit 1; fi
echo "context_parallel_sft: PASS"
