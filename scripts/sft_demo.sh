#!/usr/bin/env bash
# Why: the end-to-end SFT path in one command, from a fresh tree: the demo
# corpus, the pretrained demo checkpoints (RNoPE-SWA, and the RoPE baseline with
# every layer RoPE full), the SFT data built from local material
# (scripts/sft_build.py → `longctx data sft`), the SFT stage of both
# (configs/sft-demo.textproto keeps theta 10k, configs/sft-demo-rope.textproto
# raises it to 2M) with the 3:1 8,192/65,536 schedule, then the NIAH probe on
# both SFT'd models at lengths up to 65,536. Steps already done (a checkpoint,
# a data file) are reused, so a rerun continues where it stopped; a killed SFT
# run resumes mid-schedule from its newest checkpoint.
# Usage: scripts/sft_demo.sh [--steps=N] [other longctx train overrides for the SFT runs]
#   SFT_DEMO_RUNS="rnope-swa rope"   which SFT runs to do (default both)
#   SFT_DEMO_PROBE_LENGTHS="..."      probe lengths (default 1024 8192 32768 65536)
#   SFT_DEMO_PROBE_TRIALS=2           trials per length
#   LONGCTX_BIN=build/bin/longctx     the binary (default: build/bin/longctx)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${LONGCTX_BIN:-build/bin/longctx}
RUNS=${SFT_DEMO_RUNS:-"rnope-swa rope"}
LENGTHS=${SFT_DEMO_PROBE_LENGTHS:-"1024 8192 32768 65536"}
TRIALS=${SFT_DEMO_PROBE_TRIALS:-2}
[[ -x "$BIN" ]] || { echo "sft_demo: $BIN not found; build first (scripts/test.sh or cmake --build build)" >&2; exit 1; }

# 1. The demo corpus (data/corpus/demo.ltok and the raw shards the SFT builder reads).
LONGCTX_BIN="$BIN" bash scripts/prepare_demo_corpus.sh

# 2. Pretrained checkpoints (300 steps each, as scripts/main.sh; probes off to save time).
pretrain() {  # out_dir, extra flags
  local out=$1; shift
  if [[ ! -f "$out/step-00000300/trainer_state.json" ]]; then
    "$BIN" train --config configs/demo.textproto --out_dir="$out" --probe_every=0 "$@"
  fi
}
pretrain runs/demo
[[ " $RUNS " == *" rope "* ]] && pretrain runs/demo-rope --model.layer_pattern=ALL_ROPE_FULL

# 3. SFT data: JSONL from the local man pages and Brown documents, then .lsft with loss flags.
LONGCTX_BIN="$BIN" bash scripts/prepare_sft_data.sh
# One packed 65,536-token row, decoded, loss-carrying tokens in ⟦ ⟧ (the dump's
# packer has no "drop", so pages over 65,536 tokens are split for the dump only).
"$BIN" data sft --dump data/sft/byte --seq_len 65536 --batch_size 1 --rows 1 --split_long_examples \
  > data/sft/dump-65536.txt
echo "sft_demo: decoded packed row in data/sft/dump-65536.txt; loss-carrying tokens:"
grep -o '⟦[^⟧]*⟧' data/sft/dump-65536.txt | head -5 || true

# 4. SFT (resumes from the newest checkpoint in out_dir when there is one).
for run in $RUNS; do
  if [[ $run == rnope-swa ]]; then cfg=configs/sft-demo.textproto; out=runs/sft-demo
  else cfg=configs/sft-demo-rope.textproto; out=runs/sft-demo-rope; fi
  "$BIN" train --config "$cfg" "$@"
  python3 - "$out/metrics.jsonl" <<'PY'
import json, sys
print("step  seq_len  rows  loss_tokens  response_loss")
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("kind") == "train":
        print(f'{e["step"]:4d}  {e["seq_len"]:7d}  {e["rows"]:4d}  {e["loss_tokens"]:11d}  {e["loss"]:.4f}')
PY
  # 5. NIAH probe of the SFT'd model at each length (paper format is 223 bytes of
  # boilerplate; the compact format keeps the haystack the bulk of the prompt).
  ckpt=$(cat "$out/latest" 2>/dev/null || ls -d "$out"/step-* | tail -1)
  [[ $ckpt == /* || $ckpt == runs/* ]] || ckpt="$out/$ckpt"
  for len in $LENGTHS; do
    "$BIN" probe --checkpoint "$ckpt" --min_len "$len" --max_len "$len" --len_step 128 --trials "$TRIALS" \
      --format compact --json_out "$out/probe-$len.json"
  done
done
