#!/bin/bash
# Why: the kill storm: checkpoints survive repeated SIGKILLs. A checkpoint-heavy sharded run (mpirun, 2 ranks,
# FSDP, a checkpoint every step) is SIGKILLed — mpirun and both ranks at once,
# like a lost node — at a random moment, N times, restarting each time (the
# killed job's out_dir lock must not block the restart). After
# every kill the checkpoint a restart resumes from (the newest step directory
# with COMPLETE) must verify against its manifest (`longctx checkpoint
# verify`), and every temporary directory present at a kill must be gone once
# a later save has succeeded. The run must also make progress: the newest
# complete step must advance at least once in every STALL_LIMIT (default 5)
# consecutive kills — a restart that resumes but never saves again, or never
# gets past its start, fails here even though the old checkpoint still
# verifies — and the last checkpoint must be later than the first one seen.
#   scripts/kill_storm.sh [N=100] [LONGCTX=build/bin/longctx] [DATA=data/corpus/demo.ltok]
# KILL_STORM_RESTART_CKPT_EVERY: --ckpt_every of every restart after the first
# run (default 1; 1000000 plants a job that resumes but stops saving).
# ctest runs it with N=10 (checkpoint.kill_storm). Prints "kill_storm: PASS".
set -u
n="${1:-100}"
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${2:-$root/build/bin/longctx}"
data="${3:-$root/data/corpus/demo.ltok}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun="mpirun --allow-run-as-root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
out="$tmp/run"
RANDOM=${KILL_STORM_SEED:-12}

newest_complete() {
  local best=""
  for d in "$out"/step-*; do [ -f "$d/COMPLETE" ] && best="$d"; done
  echo "$best"
}

fail=0; kills=0; verified=0; tmp_seen=0; tmp_checked=0; no_ckpt=0
stall=0; worst_stall=0; prev=-1; first=-1; stall_limit=${STALL_LIMIT:-5}
pending_tmps=""; pending_step=-1
for ((i = 1; i <= n; i++)); do
  every=1; [ "$i" -gt 1 ] && every="${KILL_STORM_RESTART_CKPT_EVERY:-1}"
  $mpirun -np 2 "$bin" train --config "$root/configs/tiny-test.textproto" --data.path="$data" \
    --out_dir="$out" --threads=1 --force_threads=true --mode=FSDP --grad_accum=2 --steps=1000000 \
    --ckpt_every="$every" --keep_checkpoints=2 --log_every=1000 > "$tmp/run.log" 2>&1 &
  pid=$!
  if ((i % 2)); then
    # Odd kills: 0.3 - 4.3 s after the launch, from mpirun's start-up and the
    # resume through several saves (on a loaded machine often still in start-up).
    sleep "$(( RANDOM % 4 )).$(( RANDOM % 10 ))$(( RANDOM % 10 ))"
  else
    # Even kills: timed from the event, not the launch — 0 - 2 s after this
    # run's first new checkpoint (bounded wait: a restart that never saves fails).
    before=$(newest_complete); before=${before##*step-}; before=$((10#${before:-0}))
    for _ in $(seq 1200); do
      cur=$(newest_complete); cur=${cur##*step-}; cur=$((10#${cur:-0}))
      [ "$cur" -gt "$before" ] && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if [ "$cur" -le "$before" ] && kill -0 "$pid" 2>/dev/null; then
      echo "kill_storm: FAIL: run $i saved no new checkpoint within 120 s of its launch"; tail -20 "$tmp/run.log"; fail=1
    fi
    sleep "$(( RANDOM % 2 )).$(( RANDOM % 10 ))$(( RANDOM % 10 ))"
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "kill_storm: FAIL: run $i ended by itself:"; tail -20 "$tmp/run.log"; fail=1; break
  fi
  if [ "$fail" -ne 0 ]; then kill -KILL "$pid" $(ps -o pid= --ppid "$pid" 2>/dev/null) 2>/dev/null; wait "$pid" 2>/dev/null; break; fi
  # mpirun starts each rank in a process group of its own: kill mpirun and
  # its ranks by pid, all at once, and wait until none is left (an orphaned
  # rank would go on saving next to the restarted job).
  ranks=$(ps -o pid= --ppid "$pid" 2>/dev/null | tr '\n' ' ')
  kill -KILL "$pid" $ranks 2>/dev/null
  wait "$pid" 2>/dev/null
  for _ in $(seq 100); do
    alive=0; for r in $ranks; do kill -0 "$r" 2>/dev/null && alive=1; done
    [ "$alive" -eq 0 ] && break; sleep 0.1
  done
  kills=$((kills + 1))
  latest=$(newest_complete)
  # Temporary directories of an earlier kill must be gone once a later save has
  # finished: two newer checkpoints (a kill can land between a save's rename
  # and its pruning, so one newer checkpoint does not prove its save finished).
  now=-1; [ -n "$latest" ] && now=$((10#${latest##*step-}))
  if [ "$now" -gt "$prev" ]; then stall=0; prev=$now; [ "$first" -lt 0 ] && first=$now; else stall=$((stall + 1)); fi
  [ "$stall" -gt "$worst_stall" ] && worst_stall=$stall
  if [ "$stall" -ge "$stall_limit" ]; then
    echo "kill_storm: FAIL: kill $kills: no new checkpoint in $stall consecutive kills (newest step $now)"; tail -5 "$tmp/run.log"; fail=1
  fi
  if [ -n "$pending_tmps" ] && [ "$now" -ge $((pending_step + 2)) ]; then
    for t in $pending_tmps; do
      tmp_checked=$((tmp_checked + 1))
      if [ -e "$t" ]; then echo "kill_storm: FAIL: kill $kills: $t survived the save of $latest"; fail=1; fi
    done
    pending_tmps=""
  fi
  if [ -z "$latest" ]; then
    no_ckpt=$((no_ckpt + 1))
  elif "$bin" checkpoint verify --checkpoint "$latest" > "$tmp/verify.log" 2>&1; then
    verified=$((verified + 1))
  else
    echo "kill_storm: FAIL: kill $kills: the checkpoint a restart would use does not verify:"; cat "$tmp/verify.log"; fail=1
  fi
  if [ -z "$pending_tmps" ]; then
    pending_tmps=$(ls -d "$out"/.tmp-* 2>/dev/null | tr '\n' ' ')
    pending_step=$now
    tmp_seen=$((tmp_seen + $(echo $pending_tmps | wc -w)))
  fi
  [ "$fail" -eq 0 ] || break
done
step=$(basename "$(newest_complete)")
echo "kill_storm: $kills SIGKILLs; newest complete checkpoint verified after $verified of them (none yet after $no_ckpt);" \
     "temporary dirs left by a kill: $tmp_seen seen, $tmp_checked checked gone after the next save; last checkpoint $step;" \
     "progress: first step $first, last $prev, longest run of kills without a new checkpoint $worst_stall (limit $stall_limit)"
if [ "$fail" -eq 0 ] && [ "$kills" -ge "$stall_limit" ] && [ "$prev" -le "$first" ]; then
  echo "kill_storm: FAIL: the newest checkpoint never advanced past step $first"; fail=1
fi
if [ "$fail" -eq 0 ] && [ "$verified" -gt 0 ]; then echo "kill_storm: PASS"; else echo "kill_storm: FAIL"; exit 1; fi
