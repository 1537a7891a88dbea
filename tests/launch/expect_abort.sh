#!/bin/bash
# Why: ctest can check an exit code or an output pattern, not both plus the
# elapsed time. A rank's AbortJob must end the whole mpirun job non-zero, with
# that rank's message, within seconds (never a hang in a collective). The
# bound is measured from the event it bounds: the aborting rank prints
# abort_event_ms=<wall clock ms> just before AbortJob; from then to mpirun's
# exit must be under MAX_SECONDS. (Start-up is bounded by ctest's TIMEOUT
# only: on a loaded machine mpirun alone can take tens of seconds.)
#   expect_abort.sh EXPECTED_MESSAGE MAX_SECONDS -- COMMAND...
set -u
expected="$1"; max_s="$2"; shift 3
start_ms=$(( $(date +%s%N) / 1000000 ))
out=$("$@" 2>&1); rc=$?
end_ms=$(( $(date +%s%N) / 1000000 ))
event_ms=$(printf '%s\n' "$out" | sed -n 's/.*abort_event_ms=\([0-9]*\).*/\1/p' | head -1)
if [ -z "$event_ms" ]; then
  echo "expect_abort: FAIL: no abort_event_ms line (the aborting rank never reached AbortJob)"; printf '%s\n' "$out"; exit 1
fi
echo "expect_abort: $(( (event_ms - start_ms) / 1000 )) s from start to the abort"
elapsed_ms=$(( end_ms - event_ms ))
elapsed="$((elapsed_ms / 1000)).$(printf %03d $((elapsed_ms % 1000)))"
printf '%s\n' "$out"
echo "expect_abort: exit code $rc ${elapsed} s after the abort"
fail=0
if [ "$rc" -eq 0 ]; then echo "expect_abort: FAIL: the job exited 0"; fail=1; fi
if ! printf '%s\n' "$out" | grep -qF -- "$expected"; then
  echo "expect_abort: FAIL: output lacks: $expected"; fail=1
fi
if [ "$elapsed_ms" -ge $((max_s * 1000)) ]; then
  echo "expect_abort: FAIL: took ${elapsed} s after the abort (limit ${max_s} s)"; fail=1
fi
if printf '%s\n' "$out" | grep -q "collective returned"; then
  echo "expect_abort: FAIL: a peer returned from a collective the aborted rank never joined"; fail=1
fi
exit $fail
