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
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "=== gpu_check $(el)"
GPU_CHECK_DATA=.gpu/demo-shard.ltok GPU_CHECK_OUT=/tmp/gc timeout 200 bash scripts/gpu_check.sh .gpu/bin > $OUT/gpu_check.log 2>&1; echo "gpu_check rc=$?"
grep -E "gpu_check:|PASSED|relative error.*case 2|tokens/s at" $OUT/gpu_check.log | head -20
cp /tmp/gc/backend.log $OUT/backend.log 2>/dev/null
echo "=== sanitizers $(el)"
timeout 100 compute-sanitizer --tool memcheck $B/backend_consistency_test --gtest_filter='*Bf16*/cuda' > /tmp/mc.log 2>&1; echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' /tmp/mc.log)"
timeout 100 compute-sanitizer --tool racecheck $B/backend_consistency_test --gtest_filter='*Bf16*/cuda' > /tmp/rc.log 2>&1; echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' /tmp/rc.log)"
echo "=== bench attention ref-b bf16 $(el)"
timeout 150 $B/longctx bench attention --config configs/ref-b.textproto --backend=cuda --precision=bf16 \
  --lengths=2048,4096,8192,16384,32768,65536 --max_full_len=65536 --kinds=full,swa --window=1024 --repeats=5 \
  --layer=false > $OUT/bench-attn-refb.log 2>&1; echo "rc=$?"
grep -E '^  (full|swa) |peak' $OUT/bench-attn-refb.log | cut -c1-110
echo "=== bench attention 8B shape bf16 $(el)"
timeout 100 $B/longctx bench attention --config configs/rnope-swa-8b.textproto --backend=cuda --precision=bf16 \
  --lengths=8192,32768 --kinds=full,swa --window=1024 --repeats=3 --layer=false > $OUT/bench-attn-8b.log 2>&1; echo "rc=$?"
grep -E '^  (full|swa) |shape' $OUT/bench-attn-8b.log | cut -c1-110
echo "=== bench steps $(el)"
for cfgpr in ref-b:bf16 ref-b-rnope-swa:bf16 ref-b:fp32; do
  cfg=${cfgpr%%:*}; pr=${cfgpr##*:}; extra_flag=""
  [ "$cfg" = ref-b-rnope-swa ] && extra_flag="--model.sliding_window=1024"
  timeout 60 $B/longctx bench --config configs/$cfg.textproto --backend=cuda --precision=$pr $extra_flag --data.seq_len=16384 \
    --data.batch_size=1 --model.max_position_embeddings=16384 --steps=3 --warmup=1 > /tmp/step.log 2>&1
  echo "$cfg T=16384 $pr: $(grep -E 'step time|achieved' /tmp/step.log | tr -s ' ' | tr '\n' ' ')"
  tail -1 /tmp/step.log >> $OUT/steps.jsonl
done
timeout 60 $B/longctx bench --config configs/ref-b.textproto --backend=cuda --precision=bf16 --steps=5 --warmup=2 > /tmp/step.log 2>&1
echo "ref-b T=512 bf16: $(grep -E 'achieved' /tmp/step.log | tr -s ' ')"; tail -1 /tmp/step.log >> $OUT/steps.jsonl
echo "=== done $(el)"
