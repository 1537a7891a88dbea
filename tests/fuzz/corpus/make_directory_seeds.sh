#!/usr/bin/env bash
# Why: the fuzz targets that read a whole directory start from real ones of a
# micro model (one layer, hidden 8), packed as their archive
# ("NAME\nLENGTH\nBYTES" per file, tests/fuzz/fuzz_util.h): for checkpoint,
# a full step (1 process) and a sharded one (2 FSDP ranks); for hf_import,
# the full step exported to Hugging Face in one file and in shards with a
# model.safetensors.index.json.
# Regenerate with: bash tests/fuzz/corpus/make_directory_seeds.sh [LONGCTX]
set -euo pipefail
cd "$(dirname "$0")/../../.."
bin=${1:-build/bin/longctx}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
micro=(--config configs/tiny-test.textproto --data.path=data/corpus/demo.ltok --model.hidden_size=8 --model.num_heads=2
       --model.num_kv_heads=1 --model.ffn_hidden_size=16 --model.num_layers=1 --steps=2 --ckpt_every=2 --log_every=1 --threads=1)
"$bin" train "${micro[@]}" --out_dir="$tmp/full" > /dev/null
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --allow-run-as-root --oversubscribe -np 2 \
  "$bin" train "${micro[@]}" --mode=FSDP --out_dir="$tmp/sharded" > /dev/null
pack() {  # pack DIR DST
  python3 - "$1" "$2" <<'PY'
import os, sys
d, dst = sys.argv[1], sys.argv[2]
with open(dst, "wb") as f:
    for name in sorted(os.listdir(d)):
        data = open(os.path.join(d, name), "rb").read()
        f.write(name.encode() + b"\n" + str(len(data)).encode() + b"\n" + data)
print(dst, os.path.getsize(dst), "bytes")
PY
}
mkdir -p tests/fuzz/corpus/checkpoint tests/fuzz/corpus/hf_import
for kind in full sharded; do pack "$tmp/$kind/step-00000002" "tests/fuzz/corpus/checkpoint/$kind.ckpt"; done
"$bin" convert --to hf --checkpoint "$tmp/full/step-00000002" --out "$tmp/hf1" > /dev/null
"$bin" convert --to hf --checkpoint "$tmp/full/step-00000002" --out "$tmp/hf2" --max_shard_size 1KB > /dev/null
[ -f "$tmp/hf2/model.safetensors.index.json" ] || { echo "make_directory_seeds: the sharded export wrote no index.json" >&2; exit 1; }
pack "$tmp/hf1" tests/fuzz/corpus/hf_import/single.hf
pack "$tmp/hf2" tests/fuzz/corpus/hf_import/sharded.hf
