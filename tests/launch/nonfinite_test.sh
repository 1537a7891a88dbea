#!/bin/bash
# Why: a NaN on ONE rank must lead every rank to the same decision before any
# update. Injected with the test-only hook LONGCTX_TEST_INJECT_NONFINITE on the
# last rank at step 3 of a 2-rank run (and on the one process of a 1-rank run):
#  * skip policy: the job finishes (exit 0) with all its steps, rank 0 prints
#    the skip line, metrics.jsonl has one "nonfinite_skip" event at step 3, and
#    no recorded loss is NaN;
#  * stop policy (the default): the job exits non-zero with the step's message;
#  * skip with max_consecutive_nonfinite_skips=0: stops with the limit's message.
#   nonfinite_test.sh LONGCTX CONFIG DATA NP KIND [MPIRUN...]   (KIND loss|grad)
set -u
longctx="$1"; config="$2"; data="$3"; np="$4"; kind="$5"; shift 5
launcher=("$@")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail() { echo "nonfinite: FAIL: $*"; exit 1; }
run() {  # OUT_DIR overrides...
  local out="$1"; shift
  local cmd=("$longctx" train --config "$config" --data.path="$data" --steps=6 --out_dir="$out"
             --log_every=1 --ckpt_every=0 --eval_every=0 --eval_batches=1 --threads=1 "$@")
  if [ "$np" -gt 1 ]; then
    timeout 120 "${launcher[@]}" -np "$np" -x LONGCTX_TEST_INJECT_NONFINITE="$kind:$((np - 1)):3" "${cmd[@]}"
  else
    LONGCTX_TEST_INJECT_NONFINITE="$kind:0:3" timeout 120 "${cmd[@]}"
  fi
}
run "$work/skip" --skip_nonfinite=true > "$work/skip.out" 2>&1 || { cat "$work/skip.out"; fail "skip run failed"; }
grep -q "step      3: non-finite loss or gradient on 1 of $np ranks .*step skipped (1 in a row, 1 in this run)" \
  "$work/skip.out" || { cat "$work/skip.out"; fail "no skip line"; }
python3 - "$work/skip/metrics.jsonl" <<'PY' || fail "metrics"
import json, math, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
skips = [e for e in ev if e["kind"] == "nonfinite_skip"]
train = [e for e in ev if e["kind"] == "train"]
assert len(skips) == 1 and skips[0]["step"] == 3, skips
assert [e["step"] for e in train] == [1, 2, 3, 4, 5, 6], [e["step"] for e in train]
assert all(e["loss"] is not None and math.isfinite(e["loss"]) for e in train), train
print("nonfinite: skip: 1 nonfinite_skip event at step 3; steps 1-6 trained with finite losses",
      [round(e["loss"], 4) for e in train])
PY
run "$work/stop" > "$work/stop.out" 2>&1 && { cat "$work/stop.out"; fail "stop run exited 0"; }
grep -q "step 3: training loss is .*non-finite loss or gradient on 1 of $np ranks; stopping" "$work/stop.out" ||
  { cat "$work/stop.out"; fail "no stop message"; }
run "$work/limit" --skip_nonfinite=true --max_consecutive_nonfinite_skips=0 > "$work/limit.out" 2>&1 &&
  { cat "$work/limit.out"; fail "limit run exited 0"; }
grep -q "step 3: 1 consecutive steps with a non-finite loss or gradient skipped" "$work/limit.out" ||
  { cat "$work/limit.out"; fail "no limit message"; }
grep -h "non-finite" "$work/stop.out" "$work/limit.out" | head -2
echo "nonfinite: PASS"
