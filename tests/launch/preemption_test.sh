#!/bin/bash
# Why: a preemption warning (SIGUSR1 from Slurm's --signal, or SIGTERM) must
# end a run at a step boundary with a checkpoint and exit code 75, and rerunning
# the same command must continue exactly: every step's loss equal to an
# uninterrupted run's (bit for bit: metrics.jsonl keeps full precision). With
# several ranks the signal goes to ONE rank only (the last), so the test also
# holds the ranks to agreeing at the step boundary.
#   preemption_test.sh LONGCTX CONFIG DATA NP SIGNAL [MPIRUN...]   (NP 1: no launcher)
set -u
longctx="$1"; config="$2"; data="$3"; np="$4"; sig="$5"; shift 5
launcher=("$@")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
steps=400
train() {  # OUT_DIR: the same command every time (the resume is a plain rerun)
  local cmd=("$longctx" train --config "$config" --data.path="$data" --steps=$steps --out_dir="$1"
             --log_every=1 --ckpt_every=100 --eval_every=0 --eval_batches=1 --posfreq_every=0
             --data.seq_len=128 --data.batch_size=4 --model.max_position_embeddings=128 --threads=1)
  if [ "$np" -gt 1 ]; then exec "${launcher[@]}" -np "$np" "${cmd[@]}"; else exec "${cmd[@]}"; fi
}
fail() { echo "preemption: FAIL: $*"; exit 1; }

timeout 300 bash -c "$(declare -f train); $(declare -p longctx config data steps np launcher); train '$work/ref'" \
  > "$work/ref.out" 2>&1 || { cat "$work/ref.out"; fail "the uninterrupted run failed"; }

train "$work/run" > "$work/run1.out" 2>&1 &
pid=$!
# Wait (bounded, 120 s) for step 40 of the run, then signal one process.
for _ in $(seq 1 1200); do
  n=$(grep -c '"kind":"train"' "$work/run/metrics.jsonl" 2>/dev/null); [ "${n:-0}" -ge 40 ] && break; sleep 0.1
done
target=$pid
if [ "$np" -gt 1 ]; then
  target=""
  for p in $(pgrep -P "$pid"); do
    r=$(tr '\0' '\n' < /proc/$p/environ 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
    [ "$r" = "$((np - 1))" ] && target=$p
  done
  [ -n "$target" ] || { kill "$pid"; fail "no rank $((np - 1)) under mpirun"; }
fi
kill -s "$sig" "$target"
echo "preemption: sent SIG$sig to $([ "$np" -gt 1 ] && echo "rank $((np - 1)) of $np" || echo "the process") after $(grep -c '"kind":"train"' "$work/run/metrics.jsonl") steps"
for _ in $(seq 1 1200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && { kill -9 "$pid"; fail "still running 120 s after the signal"; }
wait "$pid"; rc=$?
grep -E "preempted|error" "$work/run1.out"
[ "$rc" -eq 75 ] || { cat "$work/run1.out"; fail "exit code $rc after SIG$sig, expected 75"; }
grep -q "preempted by SIG$sig after step [0-9]*; checkpoint .* is complete; to resume, run the same command" \
  "$work/run1.out" || fail "no resume line"
stopped=$(sed -n 's/.*preempted by SIG[A-Z0-9]* after step \([0-9]*\);.*/\1/p' "$work/run1.out")
[ "$stopped" -lt "$steps" ] || fail "stopped at step $stopped, not before $steps"
# The summary line: what a preempted run did not measure (no final eval, no
# final-batch loss) is null, not a 0 that reads as a measurement; what it
# did (losses, tokens/s at log_every=1) is a number.
python3 - "$work/run1.out" <<'PY' || fail "the preempted run's summary line"
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith('{"')]
s = json.loads(lines[-1])
bad = [k for k in ("eval_loss", "eval_tokens", "final_batch_loss") if s.get(k, None) is not None]
bad += [k for k in ("first_loss", "last_loss", "tokens_per_s") if not isinstance(s.get(k), float) or s[k] <= 0]
print("preemption: summary:", json.dumps({k: s.get(k) for k in ("eval_loss", "eval_tokens", "final_batch_loss", "tokens_per_s", "last_loss")}))
if bad: print("preemption: FAIL: summary fields", bad, "in", lines[-1].strip()); sys.exit(1)
PY

timeout 300 bash -c "$(declare -f train); $(declare -p longctx config data steps np launcher); train '$work/run'" \
  > "$work/run2.out" 2>&1 || { cat "$work/run2.out"; fail "the resumed run failed"; }
grep -q "resumed from .*step-0*$stopped at step $stopped" "$work/run2.out" || { cat "$work/run2.out"; fail "did not resume from step $stopped"; }

python3 - "$work/ref/metrics.jsonl" "$work/run/metrics.jsonl" "$stopped" "$steps" <<'PY' || exit 1
import json, sys
def losses(p):
    d = {}
    for line in open(p):
        e = json.loads(line)
        if e.get("kind") == "train": d.setdefault(e["step"], []).append(e["loss"])
    return d
ref, run = losses(sys.argv[1]), losses(sys.argv[2])
stopped, steps = int(sys.argv[3]), int(sys.argv[4])
bad = [s for s in range(1, steps + 1) if ref.get(s) is None or run.get(s) != ref[s]]
print(f"preemption: stopped after step {stopped}, resumed; {steps - len(bad)}/{steps} step losses equal the "
      f"uninterrupted run's bit for bit (step {stopped}: {ref[stopped][0]!r}, step {stopped + 1}: {ref[stopped + 1][0]!r})")
if bad:
    print("preemption: FAIL: steps differ:", [(s, ref.get(s), run.get(s)) for s in bad[:5]]); sys.exit(1)
print("preemption: PASS")
PY
