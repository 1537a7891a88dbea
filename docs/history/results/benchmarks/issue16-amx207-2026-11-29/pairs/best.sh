#!/bin/bash
# usage: best.sh tag rounds amx L threads binA binB
tag=$1; rounds=$2; amx=$3; L=$4; th=$5; A=$6; B=$7
cd /work/main
for r in $(seq 1 $rounds); do for which in A B; do bin=$A; [ $which = B ] && bin=$B
    $bin bench attention --config configs/ref-b.textproto --lengths=$L --kinds=swa --window=1024 --precision=bf16 --threads=$th --repeats=5 --layer=false --attention_amx=$amx 2>/dev/null | grep '"bench":"attention"' | python3 -c "
import json,sys; j=json.loads(sys.stdin.readline()); print('$tag r$r $which L=%d best_ms %.2f median_ms/tok %.5f fwd %.1f bwd %.1f peak_bf16 %.0f'%(j['seq_len'],j['attn_best_ms'],j['attn_ms_per_token'],j['attn_fwd_ms'],j['attn_bwd_ms'],j['peak_gflops_bf16']))"
  done; done
