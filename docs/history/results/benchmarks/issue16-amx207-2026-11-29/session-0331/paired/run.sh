#!/bin/bash
# Paired before/after: 3ac14a4 (BASE) against this session's HEAD (NEW), alternating
# invocations, nothing else running. Usage: BASE=... NEW=... OUT=dir bash run.sh
set -u
for round in 1 2 3 4; do
  for spec in "8192 swa" "32768 swa" "8192 full"; do
    set -- $spec
    for which in base new; do
      bin=$BASE; [ $which = new ] && bin=$NEW
      $bin bench attention --config configs/ref-b.textproto --lengths=$1 --kinds=$2 --window=1024 \
        --precision=bf16 --threads=2 --repeats=5 --layer=false 2>/dev/null | grep '"bench":"attention"' \
        | sed "s/^/{\"which\":\"$which\",\"round\":$round,\"r\":/; s/\$/}/" >> $OUT/attention.jsonl
    done
  done
done
