#!/usr/bin/env bash
# Runs the speed/memory rows of docs/BENCHMARKS.md ("Training step vs PyTorch",
# the training-step table) one after another and appends every JSON line to one file. Each row
# is a separate `longctx bench` invocation; the PyTorch rows run longctx and the
# PyTorch reference in the same invocation. Timings are only meaningful on an
# otherwise idle machine: the script prints the load average before each row
# and waits (up to WAIT_S seconds, default 600) for the 1-minute load to drop
# below MAX_LOAD (default 0.5) first.
# Usage: scripts/run_benchmarks.sh [OUT.jsonl] [--rows=fp32,openblas,rnope-swa,bf16,attention,swa16k,tinyllama]
#   default rows: fp32,openblas,rnope-swa,bf16,attention,swa16k (tinyllama needs ~22 GB free: opt in)
# Env: BUILD_DIR (default build), THREADS (default: all cores), MAX_LOAD, WAIT_S,
#      BF16_PEER_STEPS (default 1: PyTorch bf16 on a CPU without AVX512-BF16 takes minutes per step).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-results.jsonl}
ROWS=fp32,openblas,rnope-swa,bf16,attention,swa16k
for a in "$@"; do case "$a" in --rows=*) ROWS=${a#--rows=};; esac; done
[ "${OUT#--}" != "$OUT" ] && OUT=bench-results.jsonl
BIN=${BUILD_DIR:-build}/bin/longctx
THREADS=${THREADS:-$(nproc)}
MAX_LOAD=${MAX_LOAD:-0.5}
WAIT_S=${WAIT_S:-600}
[ -x "$BIN" ] || { echo "run_benchmarks: error: $BIN not built (scripts/setup.sh)" >&2; exit 1; }

wait_quiet() {
  local waited=0
  while :; do
    local load; load=$(cut -d' ' -f1 /proc/loadavg)
    if awk -v l="$load" -v m="$MAX_LOAD" 'BEGIN{exit !(l < m)}'; then break; fi
    if [ "$waited" -ge "$WAIT_S" ]; then echo "run_benchmarks: warning: load $load >= $MAX_LOAD after ${WAIT_S}s; measuring anyway" >&2; break; fi
    sleep 10; waited=$((waited + 10))
  done
  echo "run_benchmarks: $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg): $*" >&2
}

row() {  # row NAME COMMAND...: run, echo its output, keep its JSON lines
  local name=$1; shift
  wait_quiet "$name"
  "$@" | tee >(cat >&2) | grep '^{' | sed "s/^{/{\"row\":\"$name\",/" >> "$OUT"
  echo "run_benchmarks: $name done, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
}

has() { [[ ",$ROWS," == *",$1,"* ]]; }

if has fp32; then
  row ref-b-fp32 "$BIN" bench --config configs/ref-b.textproto --steps=10 --warmup=2 --threads="$THREADS" --peer=pytorch
fi
if has openblas; then  # the same step on OpenBLAS sgemm instead of oneDNN's
  row ref-b-fp32-openblas "$BIN" bench --config configs/ref-b.textproto --steps=10 --warmup=2 --threads="$THREADS" \
      --sgemm=openblas
fi
if has rnope-swa; then  # ref-b's shape as RNoPE-SWA (SSSN SSSN, window 128), PyTorch peer alongside
  row ref-b-rnope-swa "$BIN" bench --config configs/ref-b-rnope-swa.textproto --steps=10 --warmup=2 --threads="$THREADS" \
      --peer=pytorch
fi
if has bf16; then
  row ref-b-bf16 "$BIN" bench --config configs/ref-b.textproto --precision=bf16 --steps=5 --warmup=1 \
      --threads="$THREADS" --peer=pytorch --peer_steps="${BF16_PEER_STEPS:-1}" --peer_warmup=1
fi
if has attention; then
  row attention "$BIN" bench attention --config configs/ref-b.textproto --lengths=2048,4096,8192,16384,32768 \
      --window=1024 --kinds=swa,full --max_full_len=16384 --repeats=3 --threads="$THREADS"
fi
if has swa16k; then
  row full-16k "$BIN" bench --config configs/ref-b.textproto --data.seq_len=16384 --data.batch_size=1 \
      --model.max_position_embeddings=16384 \
      --steps=2 --warmup=1 --threads="$THREADS"
  row rnope-swa-16k "$BIN" bench --config configs/ref-b-rnope-swa.textproto --model.sliding_window=1024 \
      --data.seq_len=16384 --model.max_position_embeddings=16384 --data.batch_size=1 --steps=2 --warmup=1 \
      --threads="$THREADS"
fi
if has tinyllama; then  # one step, no warm-up: peak RSS of a full AdamW step of 1.1B at T = 2048
  row tinyllama-1.1b "$BIN" bench --config configs/tinyllama-1.1b.textproto --data.seq_len=2048 \
      --data.batch_size=1 --grad_accum=1 --steps=1 --warmup=0 --threads="$THREADS" --backend=cpu
fi
echo "run_benchmarks: JSON lines appended to $OUT" >&2
