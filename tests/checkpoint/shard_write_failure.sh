#!/bin/bash
# Why: with sharded checkpoints every rank writes its own file, so a failure
# on a rank other than 0 (its disk, its I/O error) must fail the save on every
# rank with that rank's message — not leave rank 0 committing a checkpoint
# without that shard, nor the others training on — and leave no temporary
# directory and the previous checkpoint intact and verifiable. The test hook
# LONGCTX_TEST_FAIL_SHARD_WRITE=1:2 fails rank 1's shard write at step 2 of a
# 2-rank FSDP run saving every step.
#   shard_write_failure.sh "MPIRUN..." LONGCTX_BINARY CONFIG DATA
set -u
mpirun="$1"; bin="$2"; config="$3"; data="$4"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
out="$tmp/run"
start=$(date +%s)
timeout 120 $mpirun -np 2 -x LONGCTX_TEST_FAIL_SHARD_WRITE=1:2 "$bin" train --config "$config" --data.path="$data" \
  --out_dir="$out" --threads=1 --force_threads=true --mode=FSDP --grad_accum=1 --steps=4 --ckpt_every=1 \
  --keep_checkpoints=2 > "$tmp/log" 2>&1
rc=$?; secs=$(( $(date +%s) - start ))
fail=0
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { echo "shard_write_failure: exit code $rc (want a non-zero error, no timeout)"; fail=1; }
grep -q "checkpoint at step 2 failed on rank 1/2: .*injected failure" "$tmp/log" ||
  { echo "shard_write_failure: no error naming rank 1's failed write at step 2"; fail=1; }
grep -q "the previous checkpoint $out/step-00000001 is intact" "$tmp/log" ||
  { echo "shard_write_failure: the error does not name the intact checkpoint"; fail=1; }
[ -d "$out/step-00000002" ] && { echo "shard_write_failure: step-00000002 was committed without rank 1's shard"; fail=1; }
"$bin" checkpoint verify --checkpoint "$out/step-00000001" > "$tmp/verify" 2>&1 || { cat "$tmp/verify"; fail=1; }
ls -d "$out"/.tmp-* > /dev/null 2>&1 && { echo "shard_write_failure: temporary directories left:"; ls -a "$out"; fail=1; }
echo "shard_write_failure: exit $rc after ${secs}s; $(grep -o 'error: .*' "$tmp/log" | head -2 | cut -c1-300 | tr '\n' '|')"
if [ "$fail" -eq 0 ]; then echo "shard_write_failure: PASS"; else cat "$tmp/log"; echo "shard_write_failure: FAIL"; exit 1; fi
