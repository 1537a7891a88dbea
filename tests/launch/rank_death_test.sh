#!/bin/bash
# Why: a rank that dies (SIGKILL, OOM killer, a lost node) must end the whole
# job non-zero within 60 s, with a message naming the lost rank — never leave
# its peers hanging in a collective. We rely on the launcher for this (see
# docs/parallelism.md "Multi-node": mpirun's daemon and srun --kill-on-bad-exit=1 see the
# child's death at once and kill the rest); this test holds Open MPI to it on a
# real `longctx train` run: rank VICTIM of NP is killed mid-run (after its
# first progress lines, while steps run back to back).
#   rank_death_test.sh LONGCTX CONFIG DATA NP VICTIM MPIRUN...
# RANK_DEATH_TRAIN_ARGS: more train flags (e.g. --context_parallel=2: the
# victim's group peers wait in a K/V exchange, the others in a collective).
set -u
longctx="$1"; config="$2"; data="$3"; np="$4"; victim="$5"; shift 5
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
"$@" -np "$np" "$longctx" train --config "$config" --data.path="$data" --steps=1000000 \
  --out_dir="$work/run" --ckpt_every=0 --log_every=100 --eval_every=0 ${RANK_DEATH_TRAIN_ARGS:-} > "$work/out" 2>&1 &
mp=$!
# Wait (bounded) until training steps are running. This wait bounds start-up
# on a possibly loaded machine, not the behaviour under test (60 s from the
# kill, below), so it is generous.
for _ in $(seq 1 1800); do grep -q "^step " "$work/out" && break; sleep 0.1; done
grep -q "^step " "$work/out" || { cat "$work/out"; echo "rank_death: FAIL: no step within 180 s of start"; kill "$mp"; exit 1; }
vp=""
for p in $(pgrep -P "$mp"); do
  r=$(tr '\0' '\n' < /proc/$p/environ 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
  [ "$r" = "$victim" ] && vp=$p
done
[ -n "$vp" ] || { echo "rank_death: FAIL: no child of mpirun with OMPI_COMM_WORLD_RANK=$victim"; kill "$mp"; exit 1; }
start_ms=$(( $(date +%s%N) / 1000000 ))
kill -9 "$vp"
echo "rank_death: killed rank $victim/$np (pid $vp) with SIGKILL"
# Bounded wait for mpirun: 60 s, then kill it and fail.
while kill -0 "$mp" 2>/dev/null; do
  if [ $(( $(date +%s%N) / 1000000 - start_ms )) -ge 60000 ]; then
    echo "rank_death: FAIL: the job still runs 60 s after the kill"; kill -9 "$mp"; pkill -9 -P "$mp"; exit 1
  fi
  sleep 0.05
done
wait "$mp"; rc=$?
elapsed_ms=$(( $(date +%s%N) / 1000000 - start_ms ))
tail -n 8 "$work/out"
echo "rank_death: exit code $rc, $((elapsed_ms / 1000)).$(printf %03d $((elapsed_ms % 1000))) s after the kill"
fail=0
[ "$rc" -ne 0 ] || { echo "rank_death: FAIL: exit code 0"; fail=1; }
grep -qE "process rank $victim .*(exited on signal 9|killed)" "$work/out" ||
  { echo "rank_death: FAIL: no message naming rank $victim"; fail=1; }
[ "$fail" -eq 0 ] && echo "rank_death: PASS"
exit $fail
