#!/usr/bin/env bash
# The main job: set up, build the demo corpus, train the main RNoPE-SWA model of
# configs/main.textproto (4 layers, mostly retrieval rows with a curriculum; see its
# comment) with the 1-needle NIAH probe every 50 steps, so that the probe's effective
# length rises from 0 past the 256-token training length within the run (progress
# lines with ETA, metrics in runs/main/metrics.jsonl, checkpoints in runs/main/step-*,
# probe heatmaps in runs/main/probe/, "loss_by_position" events every 50 steps, a
# TensorBoard event file in runs/main/), then
# evaluate the final checkpoint with `longctx eval` and plot the run (`longctx plot`:
# effective length per probe step, eval loss, PNG paths).
# Extra arguments are config overrides, e.g. scripts/main.sh --steps=50;
# CONFIG=configs/demo.textproto scripts/main.sh runs the 8-layer natural-text demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --target longctx
scripts/prepare_demo_corpus.sh
CONFIG=${CONFIG:-configs/main.textproto}
build/bin/longctx train --config "$CONFIG" "$@"
OUT_DIR=$(sed -n 's/^out_dir: *"\(.*\)"/\1/p' "$CONFIG")
for a in "$@"; do case "$a" in --out_dir=*) OUT_DIR=${a#--out_dir=};; esac; done
CKPT=$(ls -d "$OUT_DIR"/step-* | sort | tail -1)
echo "== longctx eval on $CKPT (the last training batch, then the eval split) =="
build/bin/longctx eval --checkpoint "$CKPT" --batch=last_train
build/bin/longctx eval --checkpoint "$CKPT" --batch=eval
PROBE_PNG=$(ls "$OUT_DIR"/probe/step-*.png 2>/dev/null | sort | tail -1 || true)
if [ -n "$PROBE_PNG" ]; then
  echo "== NIAH effective-length probe: heatmap $PROBE_PNG (JSON beside it; "kind": "probe" lines in $OUT_DIR/metrics.jsonl) =="
fi
echo "== longctx plot --run $OUT_DIR (TensorBoard: tensorboard --logdir $OUT_DIR) =="
build/bin/longctx plot --run "$OUT_DIR"
