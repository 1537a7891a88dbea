#!/bin/bash
# Why: FSDP's bf16 gather (train/parallel/bf16_gather.h) sends matmul weights
# as bf16 because the bf16 matmul rounds them to exactly those values anyway:
# a 2-rank FSDP run on the bf16 path must then train bit for bit like the
# same run gathering fp32 (every "step S loss L grad_norm G" line equal), and
# agree with 2-rank DDP on the bf16 path (its worst relative loss difference
# is printed and must stay within 1e-5).
#   bf16_gather_mpi.sh "MPIRUN..." CHECK_BINARY [extra args...]
set -u
mpirun="$1"; bin="$2"; shift 2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
run() {  # name, args...
  local name="$1"; shift
  if ! $mpirun -np 2 "$bin" --precision=BF16 --global_micro=4 --threads=1 "$@" > "$tmp/$name.txt" 2> "$tmp/$name.err"; then
    echo "bf16_gather_mpi: FAIL: $name exited non-zero"; cat "$tmp/$name.err" "$tmp/$name.txt"; exit 1
  fi
  grep -h "^parallel_train_check" "$tmp/$name.txt"
}
run fsdp_bf16 --mode=fsdp --gather_bf16=true "$@"
run fsdp_fp32 --mode=fsdp --gather_bf16=false "$@"
run ddp --mode=ddp "$@"
cols() { awk '$1 == "step" { print $1, $2, $3, $4, $5, $6 }' "$1"; }
n=$(cols "$tmp/fsdp_bf16.txt" | wc -l)
if [ "$n" -eq 0 ] || ! diff <(cols "$tmp/fsdp_fp32.txt") <(cols "$tmp/fsdp_bf16.txt") > "$tmp/diff"; then
  echo "bf16_gather_mpi: FAIL: FSDP bf16 gather differs from the fp32 gather ($n steps):"; head -20 "$tmp/diff"; exit 1
fi
echo "bf16_gather_mpi: FSDP bf16 gather = fp32 gather bit for bit, $n steps (loss and gradient norm)"
if ! awk 'FNR == NR { if ($1 == "step") ref[$2] = $4; next }
          $1 == "step" { d = $4 - ref[$2]; if (d < 0) d = -d; r = d / (ref[$2] < 0 ? -ref[$2] : ref[$2]); if (r > w) w = r }
          END { printf "bf16_gather_mpi: FSDP (bf16 gather) vs DDP on the bf16 path: worst relative loss difference %.3g\n", w;
                exit (w > 1e-5) }' "$tmp/ddp.txt" "$tmp/fsdp_bf16.txt"; then
  echo "bf16_gather_mpi: FAIL"; exit 1
fi
echo "bf16_gather_mpi: PASS"
