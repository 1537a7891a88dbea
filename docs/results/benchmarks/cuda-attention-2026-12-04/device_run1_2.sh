#!/bin/bash
# Device run for the tensor-core attention (session 2026-12-04 16:41). Not tracked.
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s)
tar -C /tmp -xJf .gpu/lib.tar.xz
extra=""
for so in libcublas.so.13 libcudart.so.13 libnccl.so.2 libmpi.so.40; do
  if ! ldconfig -p | grep -q "$so"; then
    f=$(find / -xdev -name "$so" 2>/dev/null | head -1)
    [ -n "$f" ] && extra="$extra:$(dirname "$f")"
  fi
done
export LD_LIBRARY_PATH=/tmp/gpulib$extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
ldd .gpu/bin/longctx | grep "not found"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader
B=.gpu/bin
el() { echo "[$(( $(date +%s) - T0 )) s]"; }
echo "=== 1 backend_consistency_test cuda $(el)"
timeout 120 $B/backend_consistency_test --gtest_filter='*/cuda' > $OUT/backend.log 2>&1; echo "rc=$?"
grep -E "relative error|FAILED|PASSED|Failure|Expected|Which|actual|ratio|error:" $OUT/backend.log | head -70
echo "=== 2 bench attention bf16 $(el)"
timeout 200 $B/longctx bench attention --config configs/ref-b.textproto --backend=cuda --precision=bf16 \
  --lengths=2048,4096,8192,16384,32768,65536 --max_full_len=65536 --kinds=full,swa --window=1024 --repeats=5 \
  --layer=false > $OUT/bench-attn-bf16.log 2>&1; echo "rc=$?"
grep -vE '^\{' $OUT/bench-attn-bf16.log | tail -25
echo "=== 4 bench step $(el)"
for pr in bf16; do
timeout 100 $B/longctx bench --config configs/ref-b.textproto --backend=cuda --precision=$pr --data.seq_len=16384 \
  --data.batch_size=1 --model.max_position_embeddings=16384 --steps=3 --warmup=1 2>&1 | tail -4
done
timeout 60 $B/longctx bench --config configs/ref-b.textproto --backend=cuda --precision=bf16 --steps=5 --warmup=2 2>&1 | tail -3
echo "=== 5 gpu_check $(el)"
GPU_CHECK_DATA=.gpu/demo-shard.ltok GPU_CHECK_OUT=/tmp/gc timeout 200 bash scripts/gpu_check.sh .gpu/bin > $OUT/gpu_check.log 2>&1; echo "rc=$?"
grep -E "gpu_check|loss|within|tokens/s|PASSED|FAIL" $OUT/gpu_check.log | tail -25
echo "=== 6 memcheck $(el)"
timeout 100 compute-sanitizer --tool memcheck --print-limit 5 $B/backend_consistency_test --gtest_filter='*Bf16*/cuda' > $OUT/memcheck.log 2>&1; echo "rc=$?"
grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | tail -3
echo "=== 7 racecheck $(el)"
timeout 100 compute-sanitizer --tool racecheck --print-limit 5 $B/backend_consistency_test --gtest_filter='*Bf16*/cuda' > $OUT/racecheck.log 2>&1; echo "rc=$?"
grep -E "RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED" $OUT/racecheck.log | tail -3
echo "=== done $(el)"
