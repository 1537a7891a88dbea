#!/usr/bin/env bash
# Why: the STRING paper's Table 1 measures the 4-needle effective length; at
# CPU scale a model learns 4-needle retrieval only through the trainer's
# retrieval curriculum (docs/EXPERIMENTS.md, "4-needle table"). This script is
# that table's one command: for each method (RoPE, RNoPE-SWA), each packer
# (the default, and position-frequency-aware join packing) and each seed, it
# trains configs/main.textproto's model with the 4-needle curriculum at
# L = 512, then probes the final checkpoint with 4 needles from L/2 to
# MAX_MULT x L in the compact and the paper format, with and without STRING,
# measures the loss by position beyond L, and writes $OUT/table.md from the
# JSON it leaves (scripts/replication_table_niah4.py). Every run is
# deterministic for a machine and thread count.
#
#   bash scripts/replicate_niah4.sh                      # 2 methods x 2 packers x 3 seeds
#   SEEDS="1" STEPS=40 MAX_MULT=2 TRIALS=4 OUT=/tmp/r4 bash scripts/replicate_niah4.sh   # a smoke run
# Env: OUT (runs/replication-niah4), SEEDS ("1 2 3"), METHODS ("rope rnope-swa"),
#      PACKERS ("default join"), STEPS (1200), TRIALS (16), MAX_MULT (16),
#      THREADS (0 = all cores), BIN (build/bin/longctx), SKIP_SETUP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/replication-niah4}
SEEDS=${SEEDS:-"1 2 3"}
METHODS=${METHODS:-"rope rnope-swa"}
PACKERS=${PACKERS:-"default join"}
STEPS=${STEPS:-1200}
TRIALS=${TRIALS:-16}
MAX_MULT=${MAX_MULT:-16}
THREADS=${THREADS:-0}
BIN=${BIN:-build/bin/longctx}
[ "${SKIP_SETUP:-0}" = 1 ] || scripts/setup.sh --target longctx
[ -f data/corpus/demo.ltok ] || scripts/prepare_demo_corpus.sh
L=512
S=$((L / 3)) W=32   # STRING: S = L/3 (the paper's range L/3..L/2), W = 32
# The curriculum that learns 4 needles at this scale (issue 46): 1 needle at 80
# and 128 tokens, 2 at 160, then 4 at 200 tokens and in whole rows.
TRAIN=(--data.seq_len=$L --model.max_position_embeddings=$L
       --data.retrieval_curriculum=0:1:80,150:1:128,300:2:160,500:4:200,700:4:0
       --probe_needles=4 --probe_min_len=256 --probe_max_len=1024 --probe_len_step=256 --probe_every=$((STEPS / 4))
       --probe_teacher_forced=false --loss_by_position_every=0 --posfreq_every=$STEPS
       --steps=$STEPS --ckpt_every=$STEPS --keep_checkpoints=1 --log_every=$((STEPS / 12 > 0 ? STEPS / 12 : 1))
       --threads=$THREADS)
mkdir -p "$OUT"
T0=$(date +%s)
runs=0 total=$(( $(wc -w <<< "$METHODS") * $(wc -w <<< "$PACKERS") * $(wc -w <<< "$SEEDS") ))
for m in $METHODS; do
  case "$m" in
    rope) MODEL=(--model.layer_pattern=ALL_ROPE_FULL) ;;
    rnope-swa) MODEL=() ;;  # configs/main.textproto: RNoPE-SWA, window 32, pattern group 2
    *) echo "replicate_niah4: error: unknown method $m (rope, rnope-swa)" >&2; exit 2 ;;
  esac
  for p in $PACKERS; do
    case "$p" in
      default) PACK=() ;;
      join) PACK=(--data.join_fraction=1) ;;
      *) echo "replicate_niah4: error: unknown packer $p (default, join)" >&2; exit 2 ;;
    esac
    for s in $SEEDS; do
      name=$m-$p-s$s dir=$OUT/$name
      runs=$((runs + 1))
      echo "== [replicate_niah4 $runs/$total | $(( $(date +%s) - T0 )) s] $name: train $STEPS steps =="
      start=$(date +%s)
      "$BIN" train --config configs/main.textproto --out_dir="$dir" "${TRAIN[@]}" "${MODEL[@]}" "${PACK[@]}" \
        --seed="$s" --data.shuffle_seed=$((1233 + s)) --data.retrieval_seed=$((6 + s)) > "$dir.train.log" 2>&1 ||
        { tail -20 "$dir.train.log" >&2; exit 1; }
      grep -E "^probe  step|^posfreq" "$dir.train.log" | cut -c1-160 || true
      echo "{\"train_seconds\": $(( $(date +%s) - start ))}" > "$dir.time.json"
      ckpt=$(ls -d "$dir"/step-* | sort | tail -1)
      for fmt in compact paper; do
        for str in plain string; do
          extra=(); [ "$str" = string ] && extra=(--string --string_s $S --string_w $W)
          [ "$m" = rnope-swa ] && [ "$str" = string ] && [ "${RNOPE_STRING:-1}" = 0 ] && continue
          echo "== $name: probe 4 needles, $fmt, $str, $((L / 2))..$((MAX_MULT * L)) =="
          "$BIN" probe --checkpoint "$ckpt" --min_len $((L / 2)) --max_len $((MAX_MULT * L)) --len_step $((L / 2)) \
            --trials "$TRIALS" --needles 4 --format "$fmt" "${extra[@]}" \
            --json_out "$dir.probe-$fmt-$str.json" > "$dir.probe-$fmt-$str.log" 2>&1 ||
            { tail -20 "$dir.probe-$fmt-$str.log" >&2; exit 1; }
          tail -2 "$dir.probe-$fmt-$str.log"
        done
      done
      "$BIN" eval --checkpoint "$ckpt" --loss_by_position --max_len $((4 * L)) > "$dir.lbp.json" 2> "$dir.lbp.log" ||
        { tail -20 "$dir.lbp.log" >&2; exit 1; }
    done
  done
done
python3 scripts/replication_table_niah4.py "$OUT" | tee "$OUT/table.md"
echo "replicate_niah4: $total runs in $(( $(date +%s) - T0 )) s; table: $OUT/table.md"
