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
timeout 60 $B/backend_consistency_test --gtest_filter='*/cuda' > $OUT/backend.log 2>&1
echo "test rc=$? $(grep -E 'PASSED|FAILED' $OUT/backend.log | tr '\n' ' ') max err $(grep 'relative error' $OUT/backend.log | awk '{print $(NF-2)}' | sort -g | tail -1) $(el)"
timeout 60 $B/longctx bench attention --config configs/rnope-swa-8b.textproto --backend=cuda --precision=bf16 \
  --lengths=8192,32768 --kinds=full,swa --window=1024 --repeats=5 --layer=false > $OUT/bench-attn-8b.log 2>&1; echo "rc=$?"
grep -E '^  (full|swa) |precision bf16' $OUT/bench-attn-8b.log | cut -c1-100
timeout 60 $B/longctx bench attention --config configs/ref-b.textproto --backend=cuda --precision=bf16 \
  --lengths=16384,65536 --max_full_len=65536 --kinds=full --repeats=5 --layer=false > $OUT/bench-attn-refb.log 2>&1; echo "rc=$?"
grep -E '^  (full|swa) ' $OUT/bench-attn-refb.log | cut -c1-100
echo "=== peer $(el)"
PYTHONUNBUFFERED=1 timeout 90 python3 bench/torch_attention_peer.py --lengths=16384,65536 --heads=8 --head_dim=64 > $OUT/peer.jsonl 2>$OUT/peer.err; echo "rc=$?"
PYTHONUNBUFFERED=1 timeout 90 python3 bench/torch_attention_peer.py --lengths=8192,32768 --heads=32 --head_dim=128 >> $OUT/peer.jsonl 2>>$OUT/peer.err; echo "rc=$?"
tail -3 $OUT/peer.err
python3 -c "
import json
for l in open('$OUT/peer.jsonl'):
    r=json.loads(l); print(r['torch'], r['heads'], r['head_dim'], r['seq_len'], 'fwd %.2f ms fwd+bwd %.2f ms %.0f GFLOP/s = %.1f%% of %.0f' % (r['fwd_ms'], r['fwd_bwd_ms'], r['attn_gflops'], 100*r['attn_fraction_of_peak'], r['bf16_peak_gflops']))
"
echo "=== done $(el)"
