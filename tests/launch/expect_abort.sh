#!/bin/bash
# Why: ctest can check an exit code or an output pattern, not both plus the
# elapsed time. A rank's AbortJob must end the whole mpirun job non-zero, with
# that rank's message, within seconds (never a hang in a collective).
#   expect_abort.sh EXPECTED_MESSAGE MAX_SECONDS -- COMMAND...
set -u
expected="$1"; max_s="$2"; shift 3
start_ms=$(( $(date +%s%N) / 1000000 ))
out=$("$@" 2>&1); rc=$?
elapsed_ms=$(( $(date +%s%N) / 1000000 - start_ms ))
elapsed="$((elapsed_ms / 1000)).$(printf %03d $((elapsed_ms % 1000)))"
printf '%s\n' "$out"
echo "expect_abort: exit code $rc after ${elapsed} s"
fail=0
if [ "$rc" -eq 0 ]; then echo "expect_abort: FAIL: the job exited 0"; fail=1; fi
if ! printf '%s\n' "$out" | grep -qF -- "$expected"; then
  echo "expect_abort: FAIL: output lacks: $expected"; fail=1
fi
if [ "$elapsed_ms" -ge $((max_s * 1000)) ]; then
  echo "expect_abort: FAIL: took ${elapsed} s (limit ${max_s} s)"; fail=1
fi
if printf '%s\n' "$out" | grep -q "collective returned"; then
  echo "expect_abort: FAIL: a peer returned from a collective the aborted rank never joined"; fail=1
fi
exit $fail
