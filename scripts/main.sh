#!/usr/bin/env bash
# The main job: set up, build the demo corpus, train the demo RNoPE-SWA model
# (progress lines, metrics in runs/demo/metrics.jsonl, checkpoints in
# runs/demo/step-*, NIAH probe heatmaps in runs/demo/probe/, a TensorBoard event
# file in runs/demo/), then evaluate the final checkpoint with `longctx eval` and
# plot the run (`longctx plot`: effective length per probe step, eval loss, PNG paths).
# Extra arguments are config overrides, e.g. scripts/main.sh --steps=50
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/prepare_demo_corpus.sh
build/bin/longctx train --config configs/demo.textproto "$@"
OUT_DIR=$(sed -n 's/^out_dir: *"\(.*\)"/\1/p' configs/demo.textproto)
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
