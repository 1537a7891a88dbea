#!/bin/bash
# Why: a full disk during a save of a 2-rank FSDP run — both ranks writing
# their shard files at once — must end the job with a clear error (the first
# failing rank's, agreed by every rank: no rank trains on or hangs in a
# collective) within a minute, and leave the previous checkpoint intact and
# verifiable with no temporary directory behind. out_dir is a 1.2 MB tmpfs
# (needs root: otherwise the test exits 77, a skip that scripts/check_skips.py
# counts as unexplained, so CI fails rather than passing untested); one checkpoint of the tiny
# model (~0.65 MB) fits, the second does not.
#   full_disk_mpi.sh "MPIRUN..." LONGCTX_BINARY CONFIG DATA
set -u
mpirun="$1"; bin="$2"; config="$3"; data="$4"
tmp=$(mktemp -d); out="$tmp/small"; mkdir -p "$out"
if ! mount -t tmpfs -o size=1200k tmpfs "$out" 2>/dev/null; then
  echo "LONGCTX_SKIP(no_tmpfs_mount): full_disk_mpi cannot mount a tmpfs at $out (needs root)"; rm -rf "$tmp"; exit 77
fi
trap 'umount -l "$out"; rm -rf "$tmp"' EXIT
start=$(date +%s)
timeout 120 $mpirun -np 2 "$bin" train --config "$config" --data.path="$data" --out_dir="$out" --threads=1 \
  --force_threads=true --mode=FSDP --grad_accum=1 --steps=4 --ckpt_every=1 --keep_checkpoints=2 > "$tmp/log" 2>&1
rc=$?; secs=$(( $(date +%s) - start ))
fail=0
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { echo "full_disk_mpi: exit code $rc (want a non-zero error, no timeout)"; fail=1; }
grep -q "No space left on device" "$tmp/log" || { echo "full_disk_mpi: no 'No space left on device' message"; fail=1; }
grep -q "the previous checkpoint $out/step-00000001 is intact" "$tmp/log" ||
  { echo "full_disk_mpi: the error does not name the intact checkpoint"; fail=1; }
"$bin" checkpoint verify --checkpoint "$out/step-00000001" > "$tmp/verify" 2>&1 || { cat "$tmp/verify"; fail=1; }
ls -d "$out"/.tmp-* > /dev/null 2>&1 && { echo "full_disk_mpi: temporary directories left:"; ls -a "$out"; fail=1; }
echo "full_disk_mpi: exit $rc after ${secs}s; $(grep -o 'error: .*' "$tmp/log" | head -2 | cut -c1-300 | tr '\n' '|')"
if [ "$fail" -eq 0 ]; then echo "full_disk_mpi: PASS"; else cat "$tmp/log"; echo "full_disk_mpi: FAIL"; exit 1; fi
