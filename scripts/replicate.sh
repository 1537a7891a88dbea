#!/usr/bin/env bash
# The CPU-scale replication (docs/EXPERIMENTS.md): trains a pure-RoPE, an
# RNoPE-SWA and (with MODELS="rope rnope-swa nope") a pure-NoPE model of the same
# size on the same retrieval + text mix and token budget (configs/replication/),
# then for each final checkpoint runs the one-needle NIAH probe from 128 tokens
# to 3x the training length, the same probe with STRING for the RoPE model, and
# the attention-mass / RoPE-pair analysis, and writes the table to
# $OUT/table.md. Everything is deterministic for a given machine and thread count.
#
#   scripts/replicate.sh                      # rope + rnope-swa, 1000 steps each
#   STEPS=600 TRIALS=16 scripts/replicate.sh  # a shorter budget
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/replication}
STEPS=${STEPS:-1000}
TRIALS=${TRIALS:-32}
MODELS=${MODELS:-"rope rnope-swa"}
THREADS=${THREADS:-0}
[ "${SKIP_SETUP:-0}" = 1 ] || scripts/setup.sh
[ -f data/corpus/demo.ltok ] || scripts/prepare_demo_corpus.sh
BIN=${BIN:-build/bin/longctx}
L=256                 # data.seq_len of configs/replication/*
S=96; W=32            # STRING at this scale: S ~ L/2.7, W = 32 (the paper's minimum); d >= S -> d - S + W
mkdir -p "$OUT"
# Progress: a line per stage with the elapsed time and an ETA (the models left at
# the mean time of the finished ones; during the first model, from its training
# step lines, which are passed through with their own ETA).
T0=$(date +%s)
N_MODELS=$(wc -w <<< "$MODELS")
MODELS_DONE=0
dur() { local s=$1; if [ "$s" -lt 60 ]; then echo "${s} s"; elif [ "$s" -lt 3600 ]; then printf '%d min %02d s' $((s / 60)) $((s % 60)); else printf '%d h %02d min' $((s / 3600)) $((s % 3600 / 60)); fi; }
stage() {  # stage MODEL WHAT
  local now=$(( $(date +%s) - T0 )) eta="after the first model"
  if [ "$MODELS_DONE" -gt 0 ]; then
    local per=$(( MODEL_END / MODELS_DONE ))
    local left=$(( per * N_MODELS - now )); [ "$left" -lt 0 ] && left=0
    eta=$(dur "$left")
  fi
  echo "== [replicate: model $((MODELS_DONE + 1))/$N_MODELS | $(dur "$now") elapsed | ETA $eta] $1: $2 =="
}
for m in $MODELS; do
  stage "$m" "train $STEPS steps"
  start=$(date +%s)
  "$BIN" train --config "configs/replication/$m.textproto" --out_dir="$OUT/$m" --steps="$STEPS" \
    --threads="$THREADS" --ckpt_every="$STEPS" --probe_every=$(( STEPS / 3 )) | tee "$OUT/$m.train.log" | grep -E "^step|probe|eval|error" || true
  echo "{\"train_seconds\": $(( $(date +%s) - start ))}" > "$OUT/$m.time.json"
  ckpt=$(ls -d "$OUT/$m"/step-* | sort | tail -1)
  stage "$m" "probe $ckpt"
  "$BIN" probe --checkpoint "$ckpt" --min_len 128 --max_len $(( 3 * L )) --len_step 128 --trials "$TRIALS" \
    --needles 1 --format compact --json_out "$OUT/$m.probe.json" --png "$OUT/$m.probe.png" | tail -3
  if [ "$m" = rope ]; then
    stage "$m" "probe with STRING (S=$S, W=$W)"
    "$BIN" probe --checkpoint "$ckpt" --min_len 128 --max_len $(( 3 * L )) --len_step 128 --trials "$TRIALS" \
      --needles 1 --format compact --string --string_s $S --string_w $W \
      --json_out "$OUT/$m.probe-string.json" --png "$OUT/$m.probe-string.png" | tail -3
  fi
  stage "$m" "attention analysis"
  "$BIN" analyze attention --checkpoint "$ckpt" --length $L --samples 16 --depth 0.5 --needles 1 \
    --format compact --json_out "$OUT/$m.attention.json" | head -4
  MODELS_DONE=$((MODELS_DONE + 1))
  MODEL_END=$(( $(date +%s) - T0 ))
done
echo "== [replicate: $N_MODELS/$N_MODELS models | $(dur $(( $(date +%s) - T0 ))) elapsed | ETA done] table =="
python3 scripts/replication_table.py "$OUT" $MODELS | tee "$OUT/table.md"
