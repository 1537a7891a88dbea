#!/bin/bash
# Why: `checkpoint verify` must refuse every corruption of a sharded step that
# would break a resume from it, naming the step and the file, and a resume
# must skip such a step (saying which and why) and continue from the previous
# complete one instead of failing hard. Six corruptions of the newest step of a
# 2-rank FSDP run, each on a fresh copy of the run: manifest.json deleted, the
# layout's shard names swapped, a shard's "files" entry removed, a range
# edited, the manifest's world_size set to 3, COMPLETE deleted.
#   verify_corruptions.sh "MPIRUN..." LONGCTX_BINARY CONFIG DATA
set -u
mpirun="$1"; bin="$2"; config="$3"; data="$4"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
common=(--config "$config" --data.path="$data" --threads=1 --force_threads=true --log_every=1 --mode=FSDP
        --grad_accum=1 --ckpt_every=1 --keep_checkpoints=0)
if ! $mpirun -np 2 "$bin" train "${common[@]}" --out_dir="$tmp/run" --steps=2 > "$tmp/train.log" 2>&1; then
  echo "verify_corruptions: FAIL: 2-rank FSDP training failed"; cat "$tmp/train.log"; exit 1
fi
s1=step-00000001; s2=step-00000002
"$bin" checkpoint verify --checkpoint "$tmp/run/$s2" > "$tmp/v0.log" 2>&1 ||
  { echo "verify_corruptions: FAIL: the intact step does not verify"; cat "$tmp/v0.log"; exit 1; }
# Edits DIR/manifest.json with a Python expression on m.
edit() { python3 -c 'import json,sys
p=sys.argv[1]+"/manifest.json"; m=json.load(open(p)); exec(sys.argv[2]); json.dump(m,open(p,"w"),indent=2)' "$1" "$2"; }
# case name | corruption (shell, on $d) | what verify's message must contain
cases=(
  "manifest_deleted|rm \$d/manifest.json|$s2/manifest.json: missing"
  "shard_names_swapped|edit \$d 'sh=m[\"layout\"][\"shards\"]; sh[0][\"file\"],sh[1][\"file\"]=sh[1][\"file\"],sh[0][\"file\"]'|shard 0 (rank 0) names shard-00002-of-00002.safetensors"
  "files_entry_removed|edit \$d 'del m[\"files\"][\"shard-00001-of-00002.safetensors\"]'|shard-00001-of-00002.safetensors: not listed"
  "range_edited|edit \$d 'r=m[\"layout\"][\"shards\"][0][\"ranges\"][0]; r[2]=r[2]-1'|ranges of buffer 0 leave a gap"
  "world_size_3|edit \$d 'm[\"world_size\"]=3'|world_size 3"
  "complete_deleted|rm \$d/COMPLETE|$s2/COMPLETE: missing"
)
fail=0
for c in "${cases[@]}"; do
  IFS='|' read -r name corrupt want <<< "$c"
  run="$tmp/$name"; cp -r "$tmp/run" "$run"; d="$run/$s2"
  eval "$corrupt" || { echo "verify_corruptions: FAIL: $name: could not plant the corruption"; fail=1; continue; }
  if "$bin" checkpoint verify --checkpoint "$d" > "$tmp/$name.verify" 2>&1; then
    echo "verify_corruptions: FAIL: $name: verify passed ($(tail -1 "$tmp/$name.verify"))"; fail=1
  elif grep -qF -- "$want" "$tmp/$name.verify"; then
    echo "verify_corruptions: $name: verify refuses: $(grep -F -- "$want" "$tmp/$name.verify" | head -1 | sed "s|$tmp/||g" | cut -c1-240)"
  else
    echo "verify_corruptions: FAIL: $name: verify's message lacks '$want':"; sed "s|$tmp/||g" "$tmp/$name.verify"; fail=1
  fi
  # Resume: step 2 is skipped (named, with the reason), training continues from step 1.
  if ! timeout 120 $mpirun -np 2 "$bin" train "${common[@]}" --out_dir="$run" --steps=3 > "$tmp/$name.resume" 2>&1; then
    echo "verify_corruptions: FAIL: $name: resume failed: $(grep -m1 -i 'error' "$tmp/$name.resume" | sed "s|$tmp/||g" | cut -c1-300)"; fail=1; continue
  fi
  if ! grep -q "$s2.*\(corrupt\|no COMPLETE\).*$s1\|$s2.*$s1" "$tmp/$name.resume" ||
     ! grep -q "resum.*$s1\|falling back.*$s1" "$tmp/$name.resume"; then
    echo "verify_corruptions: FAIL: $name: resume did not say it skipped $s2 for $s1:"; sed "s|$tmp/||g" "$tmp/$name.resume" | head -20; fail=1; continue
  fi
  # Resumed at step 1: step 2 trained again (the first run's 1, 2, then 2, 3).
  steps=$(python3 -c 'import json,sys; print([json.loads(l)["step"] for l in open(sys.argv[1]) if json.loads(l).get("kind")=="train"])' "$run/metrics.jsonl")
  if [ "$steps" != "[1, 2, 2, 3]" ]; then
    echo "verify_corruptions: FAIL: $name: train steps logged $steps, not [1, 2, 2, 3] (a resume from $s1)"; fail=1; continue
  fi
  if ! "$bin" checkpoint verify --checkpoint "$run/step-00000003" > /dev/null 2>&1; then
    echo "verify_corruptions: FAIL: $name: the resumed run left no verified step 3"; fail=1; continue
  fi
  echo "verify_corruptions: $name: resume skips $s2: $(grep -m1 "$s2" "$tmp/$name.resume" | sed "s|$tmp/||g" | cut -c1-300); train steps logged $steps"
done
if [ "$fail" -eq 0 ]; then echo "verify_corruptions: PASS"; else echo "verify_corruptions: FAIL"; exit 1; fi
