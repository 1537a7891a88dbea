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
for cfg in 0 1 2 3 4; do
  export LONGCTX_MMA_CONFIG=$cfg
  timeout 60 $B/backend_consistency_test --gtest_filter='*Bf16*/cuda' > $OUT/test-$cfg.log 2>&1
  echo "config $cfg test rc=$? max err $(grep 'relative error' $OUT/test-$cfg.log | awk '{print $(NF-2)}' | sort -g | tail -1) $(el)"
  timeout 60 $B/longctx bench attention --config configs/rnope-swa-8b.textproto --backend=cuda --precision=bf16 \
    --lengths=8192,32768 --kinds=full,swa --window=1024 --repeats=3 --layer=false --row_peaks=false 2>&1 \
    | grep -E '^  (full|swa) ' | awk -v c=$cfg '{print "config", c, $1, $2, $4, $5}'
done | tee $OUT/configs.log
echo "=== done $(el)"
