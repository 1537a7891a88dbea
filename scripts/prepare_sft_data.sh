#!/usr/bin/env bash
# Why: the SFT scripts (sft_demo.sh, sft_main_niah.sh) train on the same SFT
# set: JSONL built from the local man pages and Brown documents
# (scripts/sft_build.py), then `longctx data sft` to data/sft/byte/sft.lsft
# with per-token loss flags. Built once; a rerun reuses it. Needs the demo
# corpus first (scripts/prepare_demo_corpus.sh).
# Usage: scripts/prepare_sft_data.sh   (LONGCTX_BIN=build/bin/longctx)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${LONGCTX_BIN:-build/bin/longctx}
mkdir -p data/sft
if [[ ! -f data/sft/byte/sft.lsft ]]; then
  python3 scripts/sft_build.py --out data/sft/sft.jsonl
  "$BIN" data sft --input data/sft/sft.jsonl --out data/sft/byte --tokenizer byte
fi
