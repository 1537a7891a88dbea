#!/bin/bash
# Why: the acceptance check — the same global batch on 1, 2 and 4
# ranks gives per-step losses that agree to 1e-5 relative, in every mode — is
# one ctest: run parallel_train_check under mpirun for each world size and
# compare the "step S loss L" lines against the 1-rank run. (DDP's bitwise
# parameter equality across ranks is checked inside the program every step.)
#   compare_runs.sh MODE "MPIRUN..." CHECK_BINARY [extra args...]
set -u
mode="$1"; mpirun="$2"; bin="$3"; shift 3
# COMPARE_RUNS_KEEP=DIR keeps each run's per-step output there (npN.txt/.err).
if [ -n "${COMPARE_RUNS_KEEP:-}" ]; then tmp="$COMPARE_RUNS_KEEP"; mkdir -p "$tmp"
else tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT; fi
# COMPARE_RUNS_REF=FILE: a 1-rank run's output to compare against instead of
# running np 1 again (one process: DDP = ZeRO-1 = FSDP bit for bit,
# tests/parallel/strategy_single_rank_test.cc).
nps="1 2 4"
if [ -n "${COMPARE_RUNS_REF:-}" ]; then cp "$COMPARE_RUNS_REF" "$tmp/np1.txt"; nps="2 4"; fi
for np in $nps; do
  if ! $mpirun -np $np "$bin" --mode="$mode" --global_micro=4 "$@" > "$tmp/np$np.txt" 2> "$tmp/np$np.err"; then
    echo "compare_runs: FAIL: $mode with $np ranks exited non-zero"; cat "$tmp/np$np.err" "$tmp/np$np.txt"; exit 1
  fi
  grep -h "^parallel_train_check" "$tmp/np$np.txt"
done
# COMPARE_RUNS_EXPECT=differ: the runs must NOT agree (some step above 1e-5 on
# 4 ranks) — shows a case is sensitive enough that agreement means something
# (parallel.spike_case_is_sensitive: the fp32 gradient sum on a loss spike).
fail=0
for np in 2 4; do
  if ! awk -v np=$np '
      FNR == NR { if ($1 == "step") ref[$2] = $4; next }
      $1 == "step" { n++; d = $4 - ref[$2]; if (d < 0) d = -d; r = d / (ref[$2] < 0 ? -ref[$2] : ref[$2]);
                     if (r > worst) worst = r; if (!($2 in ref) || r > 1e-5) { bad++; print "step " $2 ": " ref[$2] " vs " $4 " (" r ")" } }
      END { printf "compare_runs: '"$mode"' np %d vs np 1: %d steps, worst relative loss difference %.3g\n", np, n, worst;
            exit (bad > 0 || n == 0) }' "$tmp/np1.txt" "$tmp/np$np.txt"; then fail=1; fi
done
if [ "${COMPARE_RUNS_EXPECT:-agree}" = differ ]; then
  # fail = 1 here means some np 2 or np 4 step was above 1e-5: what is expected.
  if [ "$fail" -eq 1 ]; then echo "compare_runs: PASS (differs above 1e-5, as expected)"; exit 0; fi
  echo "compare_runs: FAIL (expected a difference above 1e-5, every step agreed)"; exit 1
fi
[ "$fail" -eq 0 ] && echo "compare_runs: PASS" || echo "compare_runs: FAIL"
exit $fail
