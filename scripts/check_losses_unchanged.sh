#!/usr/bin/env bash
# Why: a refactor that moves code around must not change what training
# computes. This runs the same two jobs with the binary of a reference commit
# and with this tree's binary, and fails unless every logged value is equal
# bit for bit (compared as the 17-digit numbers metrics.jsonl holds):
#   demo  configs/demo.textproto, 60 steps, one process;
#   fsdp  the same model on 2 ranks (mpirun), mode FSDP, 20 steps.
# Per step: loss, grad_norm, clip_scale, lr, tokens; at the end eval_loss,
# final_batch_loss, first/last loss. Both binaries run on this machine with the
# same threads, so the comparison holds on any CPU (a golden file would not:
# GEMM libraries round differently per ISA).
# Usage: scripts/check_losses_unchanged.sh [REF_COMMIT]
#   REF_COMMIT (default: the commit before train/ was split into layers) is
#   built in a throwaway worktree (target longctx only), or taken from
#   $REF_BIN. This tree's binary is $NEW_BIN (default build/bin/longctx).
#   Logs in $OUT (default runs/check_losses).
set -euo pipefail
cd "$(dirname "$0")/.."
REF=${1:-00bc3af}
NEW_BIN=${NEW_BIN:-build/bin/longctx}
OUT=${OUT:-runs/check_losses}
mkdir -p "$OUT"
[ -x "$NEW_BIN" ] || { echo "check_losses: $NEW_BIN missing (scripts/setup.sh --target longctx)" >&2; exit 1; }
[ -f data/corpus/demo.ltok ] || LONGCTX_BIN="$NEW_BIN" scripts/prepare_demo_corpus.sh >/dev/null
if [ -z "${REF_BIN:-}" ]; then
  WT=$(mktemp -d /tmp/longctx-ref.XXXXXX)
  trap 'git worktree remove --force "$WT" >/dev/null 2>&1 || true; rm -rf "$WT"' EXIT
  git worktree add --detach "$WT" "$REF" >/dev/null 2>&1 ||
    { echo "check_losses: cannot check out $REF (a clone with history is needed)" >&2; exit 1; }
  echo "check_losses: building $REF (longctx only) in $WT"
  cmake -S "$WT" -B "$WT/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLONGCTX_CUDA=OFF -DLONGCTX_TESTS=OFF >/dev/null
  cmake --build "$WT/build" -j"$(nproc)" --target longctx >/dev/null
  REF_BIN="$WT/build/bin/longctx"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
run() {  # run NAME BIN
  local name=$1 bin=$2
  rm -rf "$OUT/demo-$name" "$OUT/fsdp-$name"
  "$bin" train --config configs/demo.textproto --steps=60 --log_every=1 --threads=2 \
    --out_dir="$OUT/demo-$name" > "$OUT/demo-$name.log" 2>&1 ||
    { echo "check_losses: demo with $bin failed:"; tail -5 "$OUT/demo-$name.log"; exit 1; }
  mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$bin" train --config configs/demo.textproto \
    --steps=20 --log_every=1 --mode=FSDP --threads=1 --out_dir="$OUT/fsdp-$name" > "$OUT/fsdp-$name.log" 2>&1 ||
    { echo "check_losses: 2-rank FSDP with $bin failed:"; tail -5 "$OUT/fsdp-$name.log"; exit 1; }
}
run ref "$REF_BIN"
run new "$NEW_BIN"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
STEP = ("loss", "grad_norm", "clip_scale", "lr", "tokens")
END = ("eval_loss", "final_batch_loss", "first_loss", "last_loss", "final_step")
def load(run):
    steps, end = [], None
    for line in open(f"{run}/metrics.jsonl"):
        j = json.loads(line)
        if j.get("kind") == "train":
            steps.append({k: j[k] for k in STEP + ("step",)})
    for line in open(f"{run}.log"):  # the run's summary line on stdout
        if line.startswith("{") and '"final_step"' in line:
            j = json.loads(line)
            end = {k: j.get(k) for k in END}
    return steps, end
bad = 0
for job in ("demo", "fsdp"):
    a, ea = load(f"{out}/{job}-ref")
    b, eb = load(f"{out}/{job}-new")
    if len(a) != len(b) or not a or ea is None or eb is None:
        print(f"check_losses: {job}: {len(a)} steps before, {len(b)} after"); bad += 1; continue
    diff = [(x["step"], k, x[k], y[k]) for x, y in zip(a, b) for k in STEP if repr(x[k]) != repr(y[k])]
    diff += [("end", k, ea[k], eb[k]) for k in END if repr(ea[k]) != repr(eb[k])]
    for d in diff[:10]: print(f"check_losses: {job}: step {d[0]} {d[1]}: {d[2]!r} before, {d[3]!r} after")
    n = len(a) * len(STEP) + len(END)
    print(f"check_losses: {job}: {len(a)} steps, {n - len(diff)} of {n} values equal bit for bit"
          f" (last loss {a[-1]['loss']!r}, eval {ea['eval_loss']!r})")
    bad += bool(diff)
sys.exit(1 if bad else 0)
PY
