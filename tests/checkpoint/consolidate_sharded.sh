#!/bin/bash
# Why: a ZeRO-1/FSDP checkpoint is one shard file per rank; `longctx checkpoint
# consolidate` must assemble them into one HF-layout model.safetensors that
# eval and generate read, and a 1-process eval/generate must read the sharded
# checkpoint itself (every rank's file, ranges reassembled) with the same
# result. Also init_from: a new stage started from the sharded checkpoint on
# 1 rank (DDP, reading every shard) and on 2 ranks (FSDP, each rank its
# range) and from the consolidated file sees the same first-step loss.
#   consolidate_sharded.sh "MPIRUN..." LONGCTX_BINARY CONFIG DATA
set -u
mpirun="$1"; bin="$2"; config="$3"; data="$4"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
common=(--config "$config" --data.path="$data" --threads=1 --force_threads=true --log_every=1)
fail=0
# The command's JSON line without its "checkpoint" field (the path differs).
strip() { python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); j.pop("checkpoint",None); print(json.dumps(j,sort_keys=True))' 2>/dev/null; }
if ! $mpirun -np 2 "$bin" train "${common[@]}" --out_dir="$tmp/run" --mode=FSDP --grad_accum=1 --steps=3 \
    --ckpt_every=1 > "$tmp/train.log" 2>&1; then
  echo "consolidate_sharded: FAIL: 2-rank FSDP training failed"; cat "$tmp/train.log"; exit 1
fi
ckpt="$tmp/run/step-00000003"
echo "consolidate_sharded: sharded checkpoint: $(cd "$ckpt" && ls *.safetensors | tr '\n' ' ')"
ls "$ckpt"/shard-00001-of-00002.safetensors "$ckpt"/shard-00002-of-00002.safetensors > /dev/null || fail=1
"$bin" checkpoint consolidate --checkpoint "$ckpt" --out "$tmp/hf" > "$tmp/cons.log" 2>&1 || { cat "$tmp/cons.log"; fail=1; }
for f in model.safetensors config.json; do [ -f "$tmp/hf/$f" ] || { echo "consolidate_sharded: no $f"; fail=1; }; done
"$bin" checkpoint verify --checkpoint "$tmp/hf" > "$tmp/verify.log" 2>&1 || { cat "$tmp/verify.log"; fail=1; }
for batch in eval last_train; do
  a=$("$bin" eval --checkpoint "$ckpt" --batch=$batch 2>/dev/null | strip); b=$("$bin" eval --checkpoint "$tmp/hf" --batch=$batch 2>/dev/null | strip)
  if [ -n "$a" ] && [ "$a" = "$b" ]; then echo "consolidate_sharded: eval --batch=$batch: sharded = consolidated: $a"
  else echo "consolidate_sharded: FAIL: eval --batch=$batch: sharded '$a', consolidated '$b'"; fail=1; fi
done
a=$("$bin" generate --checkpoint "$ckpt" --prompt 'The cat' --max_new_tokens 16 --json 2>/dev/null | strip)
b=$("$bin" generate --checkpoint "$tmp/hf" --prompt 'The cat' --max_new_tokens 16 --json 2>/dev/null | strip)
if [ -n "$a" ] && [ "$a" = "$b" ]; then echo "consolidate_sharded: generate: sharded = consolidated: $(echo "$a" | grep -o '"tokens": \[[^]]*\]')"
else echo "consolidate_sharded: FAIL: generate differs: '$a' vs '$b'"; fail=1; fi
# A corrupt shard is refused, naming it.
cp -r "$ckpt" "$tmp/bad"; printf 'X' | dd of="$tmp/bad/shard-00002-of-00002.safetensors" bs=1 seek=300 conv=notrunc 2>/dev/null
if "$bin" checkpoint consolidate --checkpoint "$tmp/bad" --out "$tmp/hf_bad" > "$tmp/bad.log" 2>&1; then
  echo "consolidate_sharded: FAIL: a corrupt shard was consolidated"; fail=1
elif grep -q "shard-00002-of-00002.safetensors: corrupt checkpoint file" "$tmp/bad.log"; then
  echo "consolidate_sharded: corrupt shard refused: $(grep -o 'shard-00002.*' "$tmp/bad.log" | head -1 | cut -c1-120)"
else echo "consolidate_sharded: FAIL: no message naming the corrupt shard"; cat "$tmp/bad.log"; fail=1; fi
# init_from the sharded and the consolidated checkpoints: same first loss.
first_loss() { python3 -c 'import json,sys
for l in open(sys.argv[1]):
  j=json.loads(l)
  if j.get("kind")=="train": print(repr(j["loss"])); break' "$1/metrics.jsonl"; }
"$bin" train "${common[@]}" --out_dir="$tmp/i1" --init_from="$ckpt" --steps=1 --grad_accum=2 > "$tmp/i1.log" 2>&1 || { cat "$tmp/i1.log"; fail=1; }
"$bin" train "${common[@]}" --out_dir="$tmp/i2" --init_from="$tmp/hf" --steps=1 --grad_accum=2 > "$tmp/i2.log" 2>&1 || { cat "$tmp/i2.log"; fail=1; }
$mpirun -np 2 "$bin" train "${common[@]}" --out_dir="$tmp/i3" --init_from="$ckpt" --steps=1 --grad_accum=1 --mode=FSDP > "$tmp/i3.log" 2>&1 || { cat "$tmp/i3.log"; fail=1; }
l1=$(first_loss "$tmp/i1"); l2=$(first_loss "$tmp/i2"); l3=$(first_loss "$tmp/i3")
if python3 -c 'import sys; a,b,c=map(float,sys.argv[1:]); sys.exit(0 if a==b and abs(a-c)<=1e-6*abs(a) else 1)' "$l1" "$l2" "$l3"; then
  echo "consolidate_sharded: init_from first loss: 1 rank from shards $l1, from consolidated $l2, 2 FSDP ranks from shards $l3"
else echo "consolidate_sharded: FAIL: init_from first losses $l1 / $l2 / $l3"; fail=1; fi
if [ "$fail" -eq 0 ]; then echo "consolidate_sharded: PASS"; else echo "consolidate_sharded: FAIL"; exit 1; fi
