#!/bin/bash
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s)
tar -C /tmp -xJf .gpu/lib.tar.xz
extra=""
for so in libcublas.so.13 libcudart.so.13 libnccl.so.2 libmpi.so.40; do
  if ! ldconfig -p | grep -q "$so"; then f=$(find / -xdev -name "$so" 2>/dev/null | head -1); [ -n "$f" ] && extra="$extra:$(dirname "$f")"; fi
done
export LD_LIBRARY_PATH=/tmp/gpulib$extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=.gpu/bin
el() { echo "[$(( $(date +%s) - T0 )) s]"; }
for cfg in 0 7 8 9; do
  export LONGCTX_MMA_CONFIG=$cfg
  timeout 60 $B/backend_consistency_test --gtest_filter='*Bf16*/cuda' > $OUT/test-$cfg.log 2>&1
  echo "config $cfg test rc=$? $(grep -c 'relative error' $OUT/test-$cfg.log) lines; max err $(grep 'relative error' $OUT/test-$cfg.log | awk '{print $(NF-2)}' | sort -g | tail -1) $(el)"
  timeout 60 $B/longctx bench attention --config configs/ref-b.textproto --backend=cuda --precision=bf16 \
    --lengths=16384,65536 --max_full_len=65536 --kinds=full,swa --window=1024 --repeats=3 --layer=false --row_peaks=false 2>&1 \
    | grep -E '^  (full|swa) ' | awk -v c=$cfg '{print "config", c, $1, $2, $4, $5}'
done | tee $OUT/configs.log
for cfg in 7 8 9; do
LONGCTX_MMA_CONFIG=$cfg timeout 60 $B/longctx bench --config configs/ref-b.textproto --backend=cuda --precision=bf16 --data.seq_len=16384 \
  --data.batch_size=1 --model.max_position_embeddings=16384 --steps=3 --warmup=1 2>&1 | grep achieved | sed "s/^/config $cfg 16K step /"
done
export LONGCTX_MMA_CONFIG=8
echo "=== ncu $(el)"
timeout 150 ncu --clock-control none --kernel-name regex:'Mma|RowStats' \
  --metrics gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
  --launch-count 14 $B/longctx bench attention --config configs/ref-b.textproto --backend=cuda --precision=bf16 \
  --lengths=16384 --kinds=full --repeats=1 --layer=false --row_peaks=false > $OUT/ncu.log 2>&1; echo "ncu rc=$?"
grep -E 'Mma|RowStats|gpu__time|warps_active|hmma' $OUT/ncu.log | sed 's/(AttentionView<float>.*//' | cut -c1-120 | tail -24
echo "=== done $(el)"
