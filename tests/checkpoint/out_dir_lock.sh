#!/bin/bash
# Why: two jobs in one out_dir would interleave their saves (each pruning the
# other's checkpoints). The first job holds a lock on out_dir; a second job —
# one process or two ranks under mpirun — must fail at start, on every rank,
# with a message naming the out_dir and the holder's pid, without touching
# the out_dir; once the holder is SIGKILLed (the kernel drops its lock) the
# same command resumes from its checkpoint.
#   out_dir_lock.sh "MPIRUN..." LONGCTX_BINARY CONFIG DATA
set -u
mpirun="$1"; bin="$2"; config="$3"; data="$4"
tmp=$(mktemp -d)
out="$tmp/run"
args=(--config "$config" --data.path="$data" --out_dir="$out" --threads=1 --force_threads=true --log_every=1 --ckpt_every=1)
"$bin" train "${args[@]}" --steps=1000000 > "$tmp/holder.log" 2>&1 &
holder=$!
trap 'kill -KILL $holder 2>/dev/null; rm -rf "$tmp"' EXIT
fail=0
for _ in $(seq 600); do [ -f "$out/latest" ] && break; sleep 0.1; done
[ -f "$out/latest" ] || { echo "out_dir_lock: the first job saved no checkpoint in 60 s"; cat "$tmp/holder.log"; exit 1; }

"$bin" train "${args[@]}" --steps=3 > "$tmp/second.log" 2>&1
rc=$?
if [ "$rc" -eq 0 ]; then echo "out_dir_lock: FAIL: a second job in the same out_dir ran (exit 0)"; fail=1; fi
if grep -q "out_dir $out is in use by another longctx job (pid $holder on host" "$tmp/second.log"; then
  echo "out_dir_lock: second job refused (exit $rc): $(grep -o 'out_dir .* is in use.*lock file [^)]*' "$tmp/second.log" | head -1)"
else
  echo "out_dir_lock: FAIL: the second job's message does not name the out_dir and holder pid $holder:"; cat "$tmp/second.log"; fail=1
fi

timeout 120 $mpirun -np 2 "$bin" train "${args[@]}" --steps=3 --mode=FSDP --grad_accum=1 --data.batch_size=1 > "$tmp/mpi.log" 2>&1
rc=$?
n=$(grep -c "is in use by another longctx job (pid $holder" "$tmp/mpi.log")
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$n" -ge 2 ]; then
  echo "out_dir_lock: 2-rank job refused on both ranks (exit $rc, $n rank messages)"
else
  echo "out_dir_lock: FAIL: 2-rank job: exit $rc, $n messages naming the holder:"; cat "$tmp/mpi.log"; fail=1
fi

kill -KILL "$holder"; wait "$holder" 2>/dev/null
# The checkpoint a restart resumes from is the newest step directory with
# COMPLETE, not necessarily `latest`: a save marks its directory complete
# before it moves the pointer, and the kill can land between the two.
step=$(for d in "$out"/step-*; do [ -f "$d/COMPLETE" ] && basename "$d"; done | tail -1)
[ -n "$step" ] || { echo "out_dir_lock: FAIL: no complete checkpoint after the kill"; exit 1; }
"$bin" train "${args[@]}" --steps=$(( 10#${step#step-} + 1 )) > "$tmp/restart.log" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && grep -q "resumed from $out/$step" "$tmp/restart.log"; then
  echo "out_dir_lock: after SIGKILL of the holder the same command resumed from $step and finished"
else
  echo "out_dir_lock: FAIL: restart after SIGKILL (exit $rc):"; cat "$tmp/restart.log"; fail=1
fi
if [ "$fail" -eq 0 ]; then echo "out_dir_lock: PASS"; else echo "out_dir_lock: FAIL"; exit 1; fi
