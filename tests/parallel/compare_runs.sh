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
# Every run must report exactly the steps it was asked for (--steps=N in the
# arguments, else parallel_train_check's default of 50), numbered 1..N: a run
# that printed fewer, none, or the wrong ones is a failure in both modes, never
# an agreement and never "the difference expected".
steps=50
for a in "$@"; do case "$a" in --steps=*) steps="${a#--steps=}";; esac; done
# awk exit codes: 0 every step within 1e-5; 1 some step above 1e-5; 2 the runs
# are not comparable (missing, extra or repeated steps, a loss that is no number).
compare() {
  awk -v np="$1" -v want="$steps" -v mode="$mode" '
    function num(x) { return x ~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/ }
    FNR == NR { if ($1 == "step") { if (!num($4) || ($2 in ref)) broken = broken " np1:" $2; ref[$2] = $4; nref++ } next }
    $1 == "step" {
      if (!num($4) || ($2 in seen) || !($2 in ref)) { broken = broken " np" np ":" $2; next }
      seen[$2] = 1; n++; d = $4 - ref[$2]; if (d < 0) d = -d; a = ref[$2] < 0 ? -ref[$2] : ref[$2];
      r = a > 0 ? d / a : d; if (r > worst) worst = r
      if (r > 1e-5) { bad++; print "step " $2 ": " ref[$2] " vs " $4 " (" r ")" } }
    END {
      for (s = 1; s <= want; s++) if (!(s in ref) || !(s in seen)) { missing++ }
      printf "compare_runs: %s np %d vs np 1: %d of %d steps (np 1: %d), worst relative loss difference %.3g\n",
             mode, np, n, want, nref, worst
      if (missing > 0 || n != want || nref != want || broken != "") {
        printf "compare_runs: np %d is not comparable: %d of steps 1..%d missing, broken step lines:%s\n",
               np, missing, want, broken == "" ? " none" : broken
        exit 2 }
      exit (bad > 0) }' "$tmp/np1.txt" "$tmp/np$1.txt"
}
verdict=0
for np in 2 4; do
  compare $np; rc=$?
  [ "$rc" -gt "$verdict" ] && verdict=$rc
done
if [ "$verdict" -eq 2 ]; then echo "compare_runs: FAIL (a run did not report the steps it was asked for)"; exit 1; fi
# COMPARE_RUNS_EXPECT=differ: the runs must NOT agree (some step above 1e-5 on
# 2 or 4 ranks) — shows a case is sensitive enough that agreement means
# something (parallel.spike_case_is_sensitive: the fp32 gradient sum on a loss spike).
if [ "${COMPARE_RUNS_EXPECT:-agree}" = differ ]; then
  if [ "$verdict" -eq 1 ]; then echo "compare_runs: PASS (differs above 1e-5, as expected)"; exit 0; fi
  echo "compare_runs: FAIL (expected a difference above 1e-5, every step agreed)"; exit 1
fi
if [ "$verdict" -eq 0 ]; then echo "compare_runs: PASS"; exit 0; fi
echo "compare_runs: FAIL"; exit 1
