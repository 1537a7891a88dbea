#!/usr/bin/env bash
# Why: the checkpoint fuzz target's seeds are real step directories of a
# micro model (one layer, hidden 8), one full (1 process) and one sharded
# (2 FSDP ranks), packed as the target's archive ("NAME\nLENGTH\nBYTES" per
# file). Regenerate with: bash tests/fuzz/corpus/make_checkpoint_seeds.sh [LONGCTX]
set -euo pipefail
cd "$(dirname "$0")/../../.."
bin=${1:-build/bin/longctx}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
micro=(--config configs/tiny-test.textproto --data.path=data/corpus/demo.ltok --model.hidden_size=8 --model.num_heads=2
       --model.num_kv_heads=1 --model.ffn_hidden_size=16 --model.num_layers=1 --steps=2 --ckpt_every=2 --log_every=1 --threads=1)
"$bin" train "${micro[@]}" --out_dir="$tmp/full" > /dev/null
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --allow-run-as-root --oversubscribe -np 2 \
  "$bin" train "${micro[@]}" --mode=FSDP --out_dir="$tmp/sharded" > /dev/null
out=tests/fuzz/corpus/checkpoint; mkdir -p "$out"
for kind in full sharded; do
  python3 - "$tmp/$kind/step-00000002" "$out/$kind.ckpt" <<'PY'
import os, sys
d, dst = sys.argv[1], sys.argv[2]
with open(dst, "wb") as f:
    for name in sorted(os.listdir(d)):
        data = open(os.path.join(d, name), "rb").read()
        f.write(name.encode() + b"\n" + str(len(data)).encode() + b"\n" + data)
print(dst, os.path.getsize(dst), "bytes")
PY
done
