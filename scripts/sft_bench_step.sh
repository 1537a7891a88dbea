#!/usr/bin/env bash
# Why: docs/BENCHMARKS.md "SFT: one 65,536-token step" — peak RSS and tokens/s
# of one training step of 65,536 tokens in one row (no document mask: one
# 65,536-token attention segment, the worst case of an SFT long row), with and
# without activation recomputation, back to back, through the real trainer
# (`longctx train --steps=1`; the step's tokens/s is metrics.jsonl's, which
# excludes start-up and the final checkpoint). Peak RSS is /usr/bin/time's
# "Maximum resident set size" of the whole process.
# Usage: scripts/sft_bench_step.sh CONFIG [ROWS SEQ_LEN] (default 1 65536)
#   e.g. scripts/sft_bench_step.sh configs/demo.textproto
#        scripts/sft_bench_step.sh configs/ref-b-rnope-swa.textproto
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${LONGCTX_BIN:-build/bin/longctx}
CFG=$1; ROWS=${2:-1}; T=${3:-65536}
name=$(basename "$CFG" .textproto)
out=runs/sft-bench/$name-${ROWS}x$T
grep -o 'avx512[a-z_0-9]*\|amx[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
for k in 0 1; do
  rm -rf "$out-r$k"
  echo "== $CFG rows $ROWS x $T, model.recompute_every $k | load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  /usr/bin/time -v "$BIN" train --config "$CFG" --data.path=data/corpus/demo.ltok --data.tokenizer=byte \
    --data.seq_len="$T" --data.batch_size="$ROWS" --data.document_mask=false --data.eval_fraction=0 \
    --steps=1 --log_every=1 --probe_every=0 --posfreq_every=0 --tensorboard=false \
    --model.recompute_every="$k" --out_dir="$out-r$k" "${@:4}" > "$out-r$k.log" 2>&1 || { tail -5 "$out-r$k.log"; exit 1; }
  python3 - "$out-r$k/metrics.jsonl" "$out-r$k.log" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import json, re, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if '"kind": "train"' in l or '"kind":"train"' in l]
log = open(sys.argv[2]).read()
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", log).group(1))
e = ev[-1]
print(f"tokens {e['tokens']}  step {e['tokens'] / e['tokens_per_s']:.1f} s  {e['tokens_per_s']:.0f} tokens/s  "
      f"peak RSS {rss / 1048576:.2f} GiB  loss {e['loss']:.4f}  | load after: {sys.argv[3]}")
PY
done
