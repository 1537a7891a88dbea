#!/bin/bash
# Why: compare_runs.sh decides several mpi tests, so it must be able to say
# FAIL. Each planted case feeds it fake runs (a shell "mpirun" that runs a
# fake check binary printing step lines) and states the verdict it must give:
# a run with no step lines, too few steps, a repeated step or a NaN loss is a
# failure in "agree" and in "differ" mode alike; only real agreement passes
# "agree" and only a real difference passes "differ".
set -u
here="$(cd "$(dirname "$0")" && pwd)"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/mpirun" <<'SH'
#!/bin/bash
# fake mpirun: -np N BIN ARGS... -> NP=N BIN ARGS...
np="$2"; shift 2; NP="$np" exec "$@"
SH
cat > "$tmp/check" <<'SH'
#!/bin/bash
# fake parallel_train_check: FAKE decides what ranks > 1 print.
steps=50; for a in "$@"; do case "$a" in --steps=*) steps="${a#--steps=}";; esac; done
echo "parallel_train_check: fake world $NP"
for s in $(seq 1 "$steps"); do
  loss="2.5"
  if [ "$NP" -gt 1 ]; then
    case "$FAKE" in
      differ) [ "$s" -eq 3 ] && loss="2.6";;
      none) continue;;
      short) [ "$s" -eq "$steps" ] && continue;;
      repeat) [ "$s" -eq 2 ] && echo "step 1 loss 2.5";;
      nan) [ "$s" -eq 2 ] && loss="nan";;
    esac
  fi
  echo "step $s loss $loss grad_norm 1"
done
SH
chmod +x "$tmp/mpirun" "$tmp/check"
fails=0
expect() {  # expect VERDICT EXPECT_MODE FAKE
  out=$(FAKE="$3" COMPARE_RUNS_EXPECT="$2" "$here/compare_runs.sh" ddp "$tmp/mpirun" "$tmp/check" --steps=5 2>&1)
  got=FAIL; grep -q "compare_runs: PASS" <<<"$out" && got=PASS
  if [ "$got" = "$1" ]; then echo "compare_runs_planted: ok: $2 mode, $3 runs -> $got"
  else echo "compare_runs_planted: WRONG: $2 mode, $3 runs -> $got (want $1)"; echo "$out"; fails=$((fails + 1)); fi
}
expect PASS agree agree
expect FAIL agree differ
expect FAIL agree none
expect FAIL agree short
expect FAIL agree repeat
expect FAIL agree nan
expect PASS differ differ
expect FAIL differ agree
expect FAIL differ none
expect FAIL differ short
expect FAIL differ repeat
expect FAIL differ nan
[ "$fails" -eq 0 ] && echo "compare_runs_planted: PASS" || echo "compare_runs_planted: FAIL ($fails)"
exit "$fails"
