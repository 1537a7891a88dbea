#!/usr/bin/env bash
# Why: the attention figures (docs/BENCHMARKS.md, "Attention at GEMM speed") are
# attention fwd+bwd GFLOP/s over L and whole ref-b steps, each as a fraction of
# the GEMM peak of its own precision measured in the same run, before and after
# the change. They were first taken on a machine shared with other jobs; this
# one command re-takes the whole table (on a quiet machine, for the record).
#
#   bash scripts/bench_attention.sh                      # after only
#   BEFORE_BIN=/tmp/attn-old/build/bin/longctx bash scripts/bench_attention.sh
#
# Environment: LONGCTX_BIN (default build/bin/longctx), BEFORE_BIN (a build of
# the commit before the tiled attention, e.g. `git worktree add /tmp/attn-old 3ac0938`
# and build it: its bench has no bf16 attention and no peaks, so its rows are
# divided by the peaks of the after-run of the same precision, taken minutes
# apart), LENGTHS (default 2048,4096,8192,16384), STEP_T (default 512,16384),
# REPEATS (default 3: the median of 2 is their mean, so one repeat slowed by
# a noisy VM would set a whole row),
# MIN_SECONDS (default 1: `bench attention --min_seconds`, more repeats for a
# short row until its timed ones add up to this: repeats under 100 ms vary by
# more than 10 % on a shared VM),
# RERUN_SLOW (default 2: rows the bench flags as timed in a
# slow phase of the machine, a GEMM peak beside them >10 % below the best of
# the run, are rerun alone up to this many times; the table takes the first
# measurement of each row that was not slow, against the best peak of all the
# precision's invocations, and marks rows that stayed slow), STEPS (default 3 at T = 512, 1 at longer T), WARMUP
# (untimed steps first, default 1: a process's first step also page-faults
# its activations in and grows the kernels' scratch, which slows a long
# step by tens of percent), PARTS
# (default attn,steps: which halves run), OUT (raw outputs; default
# runs/bench-attention-<UTC time>). Prints a markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${LONGCTX_BIN:-build/bin/longctx}
BEFORE_BIN=${BEFORE_BIN:-}
LENGTHS=${LENGTHS:-2048,4096,8192,16384}
STEP_T=${STEP_T:-512,16384}
REPEATS=${REPEATS:-3}
MIN_SECONDS=${MIN_SECONDS:-1}
PARTS=${PARTS:-attn,steps}
OUT=${OUT:-runs/bench-attention-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
[ -x "$BIN" ] || { echo "bench_attention.sh: no binary at $BIN (build first or set LONGCTX_BIN)" >&2; exit 1; }

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
  echo "flags: $(grep -m1 -o -w -E 'avx2|fma|avx512f|avx512bw|avx512vl|avx512_bf16|avx512_fp16|amx_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  echo "cores: $(nproc)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo ?)"
} | tee "$OUT/machine.txt"

attn() {  # $1 = binary, $2 = precision, $3 = output file, [$4 = lengths, $5 = kinds]
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  nice -n 5 "$1" bench attention --config configs/ref-b.textproto --lengths="${4:-$LENGTHS}" --kinds="${5:-full,swa}" \
    --window=1024 --repeats="$REPEATS" --min_seconds="$MIN_SECONDS" --max_full_len=1000000 --precision="$2" > "$3"
}

# Python shared by the reruns and the table: rows(path) reads a file's JSON
# lines; chosen(out, prec) takes, per row of the after-run, its first
# measurement outside a slow phase (a peak beside it >10 % below the best
# peak of all the precision's invocations: the run and its reruns), else the
# run's; and returns those rows, that best peak and the rows still slow.
CHOSEN_PY='
import glob, json, os
def rows(path):
    r = []
    if os.path.exists(path):
        for line in open(path):
            if line.startswith("{"):
                r.append(json.loads(line))
    return r
def chosen(out, prec):
    run = rows(f"{out}/attn-after-{prec}.jsonl")
    js = list(run)
    for f in sorted(glob.glob(f"{out}/attn-rerun-{prec}-*.jsonl")):
        js += rows(f)
    best = max([j.get("run_peak_gflops", 0) for j in js] + [0])
    measured = [j for j in js if j.get("bench") == "attention"]
    ok = lambda j: "row_peak_after" in j and min(j["row_peak_before"], j["row_peak_after"]) >= 0.9 * best
    picked, slow = [], []
    for j in [j for j in run if j.get("bench") == "attention"]:
        good = [m for m in measured if (m["kind"], m["seq_len"]) == (j["kind"], j["seq_len"]) and ok(m)]
        picked.append(good[0] if good else j)
        if not good and "row_peak_after" in j:
            slow.append(j["kind"] + ":" + str(j["seq_len"]))
    return picked, best, slow
'

# The after-run's rows of precision $1 still without a measurement outside a
# slow phase (kind:L, one per line).
slow_left() {
  python3 -c "$CHOSEN_PY"'
import sys
print("\n".join(chosen(sys.argv[1], sys.argv[2])[2]))' "$OUT" "$1"
}

for prec in fp32 bf16; do
  [[ ",$PARTS," == *,attn,* ]] || break
  echo "== attention, $prec (after)" >&2
  attn "$BIN" "$prec" "$OUT/attn-after-$prec.jsonl"
  for try in $(seq 1 "${RERUN_SLOW:-2}"); do
    for row in $(slow_left "$prec"); do
      echo "== attention, $prec, $row: timed in a slow phase, rerun $try" >&2
      attn "$BIN" "$prec" "$OUT/attn-rerun-$prec-${row/:/-}-$try.jsonl" "${row#*:}" "${row%%:*}"
    done
  done
  if [ -n "$BEFORE_BIN" ]; then
    echo "== attention, $prec (before: $BEFORE_BIN)" >&2
    attn "$BEFORE_BIN" "$prec" "$OUT/attn-before-$prec.jsonl"
  fi
done

IFS=, read -r -a ts <<< "$STEP_T"
[[ ",$PARTS," == *,steps,* ]] || ts=()
for T in "${ts[@]+"${ts[@]}"}"; do
  batch=$(( T >= 2048 ? 1 : 2048 / T ))
  steps=${STEPS:-$(( T > 512 ? 1 : 3 ))}
  warmup=${WARMUP:-1}
  for cfg in ref-b ref-b-rnope-swa; do
    for prec in fp32 bf16; do
      echo "== step $cfg T=$T $prec (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
      nice -n 5 "$BIN" bench --config "configs/$cfg.textproto" --steps="$steps" --warmup="$warmup" \
        --data.seq_len="$T" --data.batch_size="$batch" --model.max_position_embeddings="$(( T > 512 ? T : 512 ))" \
        --precision="$prec" > "$OUT/step-$cfg-T$T-$prec.jsonl"
    done
  done
done

python3 -c "$CHOSEN_PY"'
exec(open("/dev/stdin").read())' "$OUT" <<'EOF'
import sys
out = sys.argv[1]
print("\n### Attention fwd+bwd (ref-b shape: 8 heads / 4 kv, head_dim 64; one L-token segment)\n")
print("| kind | L | precision | before GFLOP/s | before % of peak | after GFLOP/s | after % of peak | peak (GFLOP/s) | row peaks before / after | after % of the run's best peak | load (1/5/15 min) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for prec in ("fp32", "bf16"):
    after, best_peak, slow = chosen(out, prec)
    before = {(j["kind"], j["seq_len"]): j for j in rows(f"{out}/attn-before-{prec}.jsonl") if j.get("bench") == "attention"}
    for j in after:
        b = before.get((j["kind"], j["seq_len"]))
        peak = j["peak_gflops"]
        bg = f'{b["attn_gflops"]:.1f}' if b else "-"
        bf = f'{100 * b["attn_gflops"] / peak:.1f} %' if b else "-"
        rp = f'{j["row_peak_before"]:.0f} / {j["row_peak_after"]:.0f}' if "row_peak_after" in j else "-"
        rf = f'{100 * j["attn_gflops"] / best_peak:.1f} %' if "row_peak_after" in j else "-"
        if f'{j["kind"]}:{j["seq_len"]}' in slow:
            rf += " (slow phase)"
        elif j not in rows(f"{out}/attn-after-{prec}.jsonl"):
            rf += " (rerun)"
        print(f'| {j["kind"]} | {j["seq_len"]} | {prec} | {bg} | {bf} | {j["attn_gflops"]:.1f} | '
              f'{100 * j["attn_fraction_of_peak"]:.1f} % | {peak:.1f} | {rp} | {rf} | {j["loadavg_end"]} |')
for prec in ("fp32", "bf16"):
    for j in rows(f"{out}/attn-after-{prec}.jsonl"):
        if j.get("bench") == "attention-summary" and "peak_gflops_end" in j:
            flag = " (warning: the machine's speed changed during the run: rerun it)" if j["peak_drift_warning"] else ""
            _, best_peak, slow = chosen(out, prec)
            best = f', best of the run and its reruns {best_peak:.1f}' if "run_peak_gflops" in j else ""
            print(f'\n{prec}: GEMM peak {j["peak_gflops"]:.1f} GFLOP/s before the lengths, {j["peak_gflops_end"]:.1f} after '
                  f'({100 * j["peak_drift"]:+.1f} %){best}{flag}; timed in a slow phase by the run: '
                  f'{", ".join(j.get("slow_rows", [])) or "none"}; still slow after the reruns: '
                  f'{", ".join(sorted(slow)) or "none"}.')
print("\n### Whole ref-b training step (fraction of the GEMM peak of the step's precision)\n")
print("| config | T | precision | tokens/s | GFLOP/s | peak (GFLOP/s) | % of peak | load (start / end) |")
print("|---|---|---|---|---|---|---|---|")
for path in sorted(glob.glob(f"{out}/step-*.jsonl")):
    js = [j for j in rows(path) if j.get("system") == "longctx"]
    if not js:
        continue
    j = js[-1]
    print(f'| {j["config"]} | {j["seq_len"]} | {j["precision"]} | {j["tokens_per_s"]:.1f} | {j["gflops"]:.1f} | '
          f'{j["peak_gflops"]:.1f} | {100 * j["fraction_of_peak"]:.1f} % | {j["loadavg_start"]} / {j["loadavg_end"]} |')
EOF
