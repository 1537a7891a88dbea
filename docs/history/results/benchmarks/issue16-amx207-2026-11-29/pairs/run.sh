#!/bin/bash
# usage: run.sh tag rounds amx lengths binA binB
tag=$1; rounds=$2; amx=$3; lengths=$4; A=$5; B=$6
cd /work/main
for r in $(seq 1 $rounds); do for which in A B; do bin=$A; [ $which = B ] && bin=$B
  for L in ${lengths//,/ }; do
    $bin bench attention --config configs/ref-b.textproto --lengths=$L --kinds=swa --window=1024 --precision=bf16 --threads=2 --repeats=3 --layer=false --attention_amx=$amx 2>/dev/null | grep '"bench":"attention"' | python3 -c "
import json,sys; j=json.loads(sys.stdin.readline()); print('$tag r$r $which L=%d fwd_ms %.2f bwd_ms %.2f ms/tok %.5f peak_bf16 %.0f'%(j['seq_len'],j['attn_fwd_ms'],j['attn_bwd_ms'],j['attn_ms_per_token'],j['peak_gflops_bf16']))"
  done; done; done
