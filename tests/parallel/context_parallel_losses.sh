#!/bin/bash
# Why: context parallelism must train exactly what one process trains. The
# trainer itself (`longctx train`), on document-packed rows of the demo corpus
# (documents longer and shorter than a chunk), runs the same global batch of
# 2 rows a step on 1 process, on C = 2 and C = 4 ranks holding one row
# between them, and on dp 2 x C 2, for each layer pattern; every step's loss
# must be within TOL (relative) of the single process, and every run must
# report every step it was asked for.
#   context_parallel_losses.sh "MPIRUN..." LONGCTX_BINARY CONFIG DATA SEQ_LEN STEPS TOL [PATTERN...]
# PATTERN: rope_full | nope_full | swa_small | swa_large (window 1/4 of a C = 4
# chunk, resp. 3/4 of the row: inside a chunk and across several); default all.
# CONTEXT_PARALLEL_ARGS: more flags for every run (--context_parallel_balanced=false: the zig-zag).
set -u
mpirun="$1"; bin="$2"; config="$3"; data="$4"; T="$5"; steps="$6"; tol="$7"; shift 7
patterns=("$@"); [ ${#patterns[@]} -eq 0 ] && patterns=(rope_full swa_small swa_large nope_full)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
common="--config $config --data.path=$data --threads=1 --force_threads=true --log_every=1 --ckpt_every=0
  --eval_every=0 --steps=$steps --data.seq_len=$T --model.max_position_embeddings=$T --data.batch_size=1
  --tensorboard=false"
losses() { python3 "$(dirname "$0")/../support/train_losses.py" "$1"; }
verdict=0
for p in "${patterns[@]}"; do
  case "$p" in
    rope_full) model="--model.layer_pattern=ALL_ROPE_FULL" ;;
    nope_full) model="--model.layer_pattern=ALL_NOPE_FULL" ;;
    swa_small) model="--model.layer_pattern=RNOPE_SWA --model.sliding_window=$((T / 32))" ;;
    swa_large) model="--model.layer_pattern=RNOPE_SWA --model.sliding_window=$((T * 3 / 4))" ;;
    *) echo "context_parallel_losses: FAIL: unknown pattern $p"; exit 1 ;;
  esac
  # name np cp grad_accum
  for run in "ref 1 1 2" "c2 2 2 2" "c4 4 4 2" "dp2c2 4 2 1"; do
    set -- $run
    out="$tmp/$p-$1"
    if ! $mpirun -np "$2" "$bin" train $common $model --context_parallel="$3" --grad_accum="$4" --out_dir="$out" ${CONTEXT_PARALLEL_ARGS:-} \
        > "$out.log" 2>&1; then
      echo "context_parallel_losses: FAIL: $p $1 ($2 ranks, context_parallel $3) exited non-zero"; tail -20 "$out.log"
      exit 1
    fi
    losses "$out/metrics.jsonl" > "$out.losses"
  done
  for r in c2 c4 dp2c2; do
    awk -v want="$steps" -v tol="$tol" -v name="$p $r" '
      FNR == NR { ref[$1] = $2; nref++; next }
      { if (!($1 in ref)) { extra++; next }
        n++; d = $2 - ref[$1]; if (d < 0) d = -d; a = ref[$1] < 0 ? -ref[$1] : ref[$1]; rel = d / a
        if (rel > worst) worst = rel; if (rel > tol) { bad++; print "  step " $1 ": " ref[$1] " vs " $2 } }
      END { printf "context_parallel_losses: %-15s %d of %d steps (ref %d), worst relative difference %.3g\n",
                   name, n, want, nref, worst
            if (n != want || nref != want || extra > 0) { print "  not comparable: missing or extra steps"; exit 2 }
            exit bad > 0 }' "$tmp/$p-ref.losses" "$tmp/$p-$r.losses"
    rc=$?; [ $rc -gt $verdict ] && verdict=$rc
  done
done
if [ $verdict -ne 0 ]; then echo "context_parallel_losses: FAIL"; exit 1; fi
echo "context_parallel_losses: PASS"
