#!/usr/bin/env bash
# Why: the two SFT checks that the demo models could not give
# (docs/EXPERIMENTS.md "SFT from a base that retrieves: NIAH to 65,536"):
#  (1) the NIAH probe up to 65,536 tokens on SFT'd models that do retrieve:
#      the main job's 4-layer model (configs/main.textproto, learns 1-needle
#      retrieval in 400 steps) pretrained as RNoPE-SWA and as the RoPE baseline
#      (ALL_ROPE_FULL, LR 1e-3, 800 steps: see below), fine-tuned with the 3:1 8,192/65,536 schedule
#      (configs/sft-main.textproto keeps theta 10k, configs/sft-main-rope.textproto
#      raises it to 2M), then probed (1 needle, compact format) at 256..65,536
#      tokens, bases included for reference;
#  (2) kill -9 during step 6 of the same RNoPE-SWA SFT run, rerun, and compare
#      with the uninterrupted run: every step's loss and the final weights' bytes.
# Finished pieces (a base's step-400 checkpoint, an SFT run's step 8, the SFT data,
# a probe JSON) are reused, so a rerun continues where it stopped.
# Usage: scripts/sft_main_niah.sh
#   SFT13_THREADS=1            --threads for the train runs (OMP_NUM_THREADS for probes)
#   SFT13_LENGTHS="256 512 1024 4096 16384 65536"   probe lengths
#   SFT13_TRIALS="256:32 512:32 1024:16 4096:8 16384:4 65536:4"   trials per length
#   SFT13_MODELS="base-rnope base-rope-lr1e-3 sft-rnope sft-rope rope-theta2m-lr0 sft-rope-theta10k"
#                              which checkpoints to probe
#   SFT13_SKIP_THETA10K=1      skip the RoPE SFT control at theta 10k
#   SFT13_SKIP_RESUME=1        skip (2)
#   LONGCTX_BIN=build/bin/longctx
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${LONGCTX_BIN:-build/bin/longctx}
THREADS=${SFT13_THREADS:-1}
LENGTHS=${SFT13_LENGTHS:-"256 512 1024 4096 16384 65536"}
TRIALS=${SFT13_TRIALS:-"256:32 512:32 1024:16 4096:8 16384:4 65536:4"}
MODELS=${SFT13_MODELS:-"base-rnope base-rope-lr1e-3 sft-rnope sft-rope rope-theta2m-lr0 sft-rope-theta10k"}
R=runs/sft13
[[ -x "$BIN" ]] || { echo "sft_main_niah: $BIN not found; build first (scripts/setup.sh --target longctx)" >&2; exit 1; }
mkdir -p "$R/probe"
echo "sft_main_niah: $(date -u) | $(uptime) | $(grep -o -w -E 'avx2|fma|avx512f|avx512bw|avx512vl|avx512_bf16|amx_tile|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"

# Data: the demo corpus (probe haystacks, eval split) and the SFT set.
LONGCTX_BIN="$BIN" bash scripts/prepare_demo_corpus.sh
LONGCTX_BIN="$BIN" bash scripts/prepare_sft_data.sh

# (1a) The two bases: configs/main.textproto as is, and with every layer RoPE full.
# main's recipe as is (LR 3e-3) taught the RoPE model no retrieval in 400 steps (nor
# in 1,200: SFT13_ROPE_LR3=1 reruns both); with LR 1e-3 (min 5e-4), 400 steps and a
# resume to 800, it passes 512 from about step 650, so that is the RoPE base.
base() {  # name, final step, extra flags
  local out=$R/$1 last=$2; shift 2
  [[ -f $out/step-$(printf %08d "$last")/COMPLETE ]] && return 0
  "$BIN" train --config configs/main.textproto --out_dir="$out" --threads="$THREADS" "$@" | tee -a "$out.log"
}
ROPE=(--model.layer_pattern=ALL_ROPE_FULL)
base base-rnope 400
[[ -f $R/base-rope-lr1e-3/step-00000800/COMPLETE ]] ||  # (step 400's checkpoint is not kept)
  base base-rope-lr1e-3 400 "${ROPE[@]}" --optim.lr=1e-3 --optim.min_lr=5e-4
base base-rope-lr1e-3 800 "${ROPE[@]}" --optim.lr=1e-3 --optim.min_lr=5e-4 --steps=800
if [[ -n ${SFT13_ROPE_LR3:-} ]]; then
  base base-rope 400 "${ROPE[@]}"
  base base-rope-1200 1200 "${ROPE[@]}" --steps=1200 --ckpt_every=400 --keep_checkpoints=3
fi
for b in base-rnope base-rope-lr1e-3 base-rope base-rope-1200; do  # effective length per probe step (training length 256)
  [[ -f $R/$b/metrics.jsonl ]] || continue
  python3 - "$R/$b/metrics.jsonl" "$b" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
print(sys.argv[2], "effective length by step:",
      " ".join(f'{e["step"]}:{e["effective_length"]}' for e in ev if e.get("kind") == "probe"))
PY
done

# (1b) SFT of both, 8 steps (S S S L S S S L), a checkpoint every step.
sft() {  # config, out_dir, extra flags
  local cfg=$1 out=$2; shift 2
  [[ -f $out/step-00000008/COMPLETE ]] && return 0
  "$BIN" train --config "$cfg" --out_dir="$out" --ckpt_every=1 --threads="$THREADS" "$@" | tee -a "$out.log"
}
sft configs/sft-main.textproto "$R/sft-rnope"
sft configs/sft-main-rope.textproto "$R/sft-rope"
steps_table() {
  python3 - "$1/metrics.jsonl" <<'PY'
import json, sys
print("step  seq_len  rows  tokens  loss_tokens  response_loss")
last = {}
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e.get("kind") == "train": last[e["step"]] = e
for s in sorted(last):
    e = last[s]
    print(f'{s:4d}  {e["seq_len"]:7d}  {e["rows"]:4d}  {e["tokens"]:6d}  {e["loss_tokens"]:11d}  {e["loss"]:.6f}')
PY
}
steps_table "$R/sft-rnope"; steps_table "$R/sft-rope"

# Controls. A step with lr 0 (and no weight decay) reports the loss of the given
# weights on the schedule's first batch (8 x 8,192, 1,427 response tokens) and
# saves them unchanged, under the config's theta: the RoPE base with theta raised to
# 2M before any SFT step (probed below as rope-theta2m-lr0), and both SFT'd models
# on batch 1 (step 1 of each SFT run is the base on the same batch).
ctl() {  # out_dir name, train flags
  local out=$R/$1; shift
  [[ -f $out/step-00000001/COMPLETE ]] && return 0
  "$BIN" train "$@" --optim.lr=0 --optim.min_lr=0 --optim.weight_decay=0 --steps=1 --ckpt_every=1 \
    --probe_every=1 --out_dir="$out" --threads="$THREADS" | tee "$out.log"
}
ctl rope-theta2m-lr0 --config configs/sft-main-rope.textproto
ctl sft-rope-b1 --config configs/sft-main-rope.textproto --init_from="$R/sft-rope/step-00000008"
ctl sft-rnope-b1 --config configs/sft-main.textproto --init_from="$R/sft-rnope/step-00000008"
grep -h "^step" "$R"/rope-theta2m-lr0.log "$R"/sft-rope-b1.log "$R"/sft-rnope-b1.log || true
# The RoPE baseline's SFT at theta 10,000 (no raise): separates the stage's theta
# raise from the SFT steps themselves.
if [[ -z ${SFT13_SKIP_THETA10K:-} ]]; then
  sft configs/sft-main-rope.textproto "$R/sft-rope-theta10k" --model.rope_theta=10000
  steps_table "$R/sft-rope-theta10k"
fi

# (2) Kill and resume: run B = run A's command into another out_dir, SIGKILL during
# step 6 (after step 5's checkpoint is COMPLETE), the same command again.
if [[ -z ${SFT13_SKIP_RESUME:-} && ! -f $R/sft-rnope-b/step-00000008/COMPLETE ]]; then
  B=$R/sft-rnope-b
  if [[ ! -d $B/step-00000005 ]]; then
    rm -rf "$B" "$B.log"
    "$BIN" train --config configs/sft-main.textproto --out_dir="$B" --ckpt_every=1 --threads="$THREADS" > "$B.log" 2>&1 &
    pid=$!
    until [[ -f $B/step-00000005/COMPLETE ]]; do
      kill -0 "$pid" 2>/dev/null || { echo "sft_main_niah: run B ended before step 5" >&2; exit 1; }
      sleep 0.5
    done
    sleep 3  # inside step 6 (an 8,192-token step takes tens of seconds)
    kill -9 "$pid"; wait "$pid" || echo "sft_main_niah: run B killed (exit $?) at $(date -u +%T); step-dirs: $(ls -d "$B"/step-* | xargs -n1 basename | tr '\n' ' ')"
  fi
  "$BIN" train --config configs/sft-main.textproto --out_dir="$B" --ckpt_every=1 --threads="$THREADS" 2>&1 | tee -a "$B.log"
fi
if [[ -z ${SFT13_SKIP_RESUME:-} ]]; then
  grep -h "resumed from" "$R/sft-rnope-b.log" || true
  python3 - "$R/sft-rnope/metrics.jsonl" "$R/sft-rnope-b/metrics.jsonl" <<'PY'
import json, sys
def steps(p):
    out = {}; n = {}
    for l in open(p):
        e = json.loads(l)
        if e.get("kind") == "train":
            out[e["step"]] = e; n[e["step"]] = n.get(e["step"], 0) + 1
    return out, n
a, _ = steps(sys.argv[1]); b, nb = steps(sys.argv[2])
print("step  seq_len  loss A (uninterrupted)   loss B (killed in 6, resumed)  equal  B lines")
ok = True
for s in sorted(a):
    eq = s in b and a[s]["loss"] == b[s]["loss"] and a[s]["seq_len"] == b[s]["seq_len"]
    ok &= eq
    print(f'{s:4d}  {a[s]["seq_len"]:7d}  {a[s]["loss"]!r:24}  {b.get(s, {}).get("loss")!r:30}  {eq}  {nb.get(s, 0)}')
print("all losses equal:", ok and sorted(a) == sorted(b))
PY
  for f in model.safetensors optimizer.safetensors; do
    cmp "$R/sft-rnope/step-00000008/$f" "$R/sft-rnope-b/step-00000008/$f" && echo "cmp $f: identical"
  done
fi

# (1c) The probe: 1 needle, compact format, each length on its own (pass k/N, answer loss).
for len in $LENGTHS; do  # lengths outer: a stopped sweep leaves every model probed to the same length
  for m in $MODELS; do
    case $m in base-rope-lr1e-3) ck=$R/$m/step-00000800 ;; base-*) ck=$R/$m/step-00000400 ;;
      *-lr0) ck=$R/$m/step-00000001 ;; *) ck=$R/$m/step-00000008 ;; esac
    j=$R/probe/$m-$len.json
    [[ -f $j ]] && continue
    n=4; for t in $TRIALS; do [[ ${t%%:*} == "$len" ]] && n=${t##*:}; done
    OMP_NUM_THREADS=$THREADS "$BIN" probe --checkpoint "$ck" --min_len "$len" --max_len "$len" \
      --trials "$n" --needles 1 --format compact --json_out "$j.tmp" && mv "$j.tmp" "$j"
  done
done
python3 - "$R/probe" "$MODELS" "$LENGTHS" <<'PY'
import json, os, sys
d, models, lengths = sys.argv[1], sys.argv[2].split(), [int(x) for x in sys.argv[3].split()]
print("model       " + "".join(f"{L:>18}" for L in lengths))
for m in models:
    row = []
    for L in lengths:
        p = f"{d}/{m}-{L}.json"
        if not os.path.exists(p): row.append(f'{"-":>18}'); continue
        r = json.load(open(p)); t = r["trials"]
        k = sum(x["passed"] for x in t)
        row.append(f'{k:>5}/{len(t):<3} {r["lengths"][0]["answer_loss"]:8.4f}')
    print(f"{m:12}" + "".join(row))
print("(pass k/N trials, mean answer loss in nats)")
PY
