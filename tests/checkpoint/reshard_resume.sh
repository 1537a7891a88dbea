#!/bin/bash
# Why: the resharding resume check, as one ctest. ZeRO-1/FSDP checkpoints are one
# shard file per rank (layout "sharded"), DDP's one full copy (layout "full");
# a rank of any new world reads only the ranges it needs from either, and
# every rank draws the whole global batch from one data cursor, so a run may
# resume on another world size or mode as long as batch_size x grad_accum x
# world is unchanged:
#   reference: 8 steps on 1 rank (DDP, grad_accum 4);
#   resumed:   steps 1-2 on 2 ranks (FSDP, grad_accum 2: 2 shard files),
#              3-4 on 1 rank (DDP, grad_accum 4: reads both shards, writes a full copy),
#              5-6 on 4 ranks (ZeRO-1, grad_accum 1: each rank reads its range of the full copy, 4 shard files),
#              7-8 on 2 ranks (FSDP, grad_accum 2: each rank reads its range from 2 of the 4 shards).
# Every step's loss must equal the reference's to 1e-5 relative and the rows
# seen (tokens_seen / seq_len) must be equal. Then same world and mode: 2 ranks
# FSDP 4 steps straight vs 2 + 2 resumed — losses and final weights bit for bit.
# And 3 ranks cannot keep a global batch of 4 rows: refused, naming a grad_accum
# or world that works.
#   reshard_resume.sh "MPIRUN..." LONGCTX_BINARY CONFIG DATA
set -u
mpirun="$1"; bin="$2"; config="$3"; data="$4"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
common="--config $config --data.path=$data --threads=1 --log_every=1 --ckpt_every=1 --keep_checkpoints=2 \
  --data.batch_size=1 --optim.decay_steps=8 --force_threads=true"
run() {  # run NP OUT ARGS...
  local np=$1 out=$2; shift 2
  if ! $mpirun -np "$np" "$bin" train $common --out_dir="$out" "$@" > "$tmp/last.log" 2>&1; then
    echo "reshard_resume: FAIL: $np ranks $* exited non-zero"; cat "$tmp/last.log"; exit 1
  fi
  grep -h "resumed from\|already at" "$tmp/last.log" | sed 's/^/  /'
  python3 -c 'import json,sys; m=json.load(open(sys.argv[1]+"/"+open(sys.argv[1]+"/latest").read().strip()+"/manifest.json")); l=m["layout"]
print("  wrote step %d: layout %s, %s, files %s" % (m["step"], l["kind"], m["mode"], " ".join(sorted(f for f in m["files"] if f.endswith(".safetensors")))))' "$out"
}
# step -> loss of metrics.jsonl (the last record of a step wins), as "step loss" lines.
losses() { python3 "$(dirname "$0")/../support/train_losses.py" "$1"; }
rows() {
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["tokens_seen"] // int(sys.argv[2]))' "$1" "$2"
}

run 1 "$tmp/ref" --steps=8 --grad_accum=4 --mode=DDP
run 2 "$tmp/res" --steps=2 --grad_accum=2 --mode=FSDP
run 1 "$tmp/res" --steps=4 --grad_accum=4 --mode=DDP
run 4 "$tmp/res" --steps=6 --grad_accum=1 --mode=ZERO1
run 2 "$tmp/res" --steps=8 --grad_accum=2 --mode=FSDP
losses "$tmp/ref/metrics.jsonl" > "$tmp/ref.txt"
losses "$tmp/res/metrics.jsonl" > "$tmp/res.txt"
seq_len=$(grep -o 'seq_len: [0-9]*' "$config" | head -1 | awk '{print $2}')
ref_rows=$(rows "$tmp/ref/step-00000008/trainer_state.json" "$seq_len")
res_rows=$(rows "$tmp/res/step-00000008/trainer_state.json" "$seq_len")
fail=0
if ! awk '
    FNR == NR { ref[$1] = $2; next }
    { n++; d = $2 - ref[$1]; if (d < 0) d = -d; r = d / (ref[$1] < 0 ? -ref[$1] : ref[$1]); if (r > worst) worst = r;
      printf "  step %d: uninterrupted %s, 2->1->4->2 ranks %s (rel %.3g)\n", $1, ref[$1], $2, r
      if (!($1 in ref) || r > 1e-5) bad++ }
    END { printf "reshard_resume: 2 (FSDP) -> 1 (DDP) -> 4 (ZeRO-1) -> 2 (FSDP) ranks: %d steps, worst relative loss difference %.3g\n", n, worst;
          exit (bad > 0 || n != 8) }' "$tmp/ref.txt" "$tmp/res.txt"; then fail=1; fi
echo "reshard_resume: rows seen: uninterrupted $ref_rows, resumed $res_rows"
[ "$ref_rows" = "$res_rows" ] && [ -n "$ref_rows" ] || fail=1

# Same world size and mode: bitwise.
run 2 "$tmp/same_ref" --steps=4 --grad_accum=2 --mode=FSDP
run 2 "$tmp/same" --steps=2 --grad_accum=2 --mode=FSDP
run 2 "$tmp/same" --steps=4 --grad_accum=2 --mode=FSDP
losses "$tmp/same_ref/metrics.jsonl" > "$tmp/a.txt"; losses "$tmp/same/metrics.jsonl" > "$tmp/b.txt"
same_files=0
for f in "$tmp/same_ref/step-00000004"/shard-*.safetensors; do
  cmp -s "$f" "$tmp/same/step-00000004/$(basename "$f")" && same_files=$((same_files + 1))
done
if cmp -s "$tmp/a.txt" "$tmp/b.txt" && [ "$same_files" -eq 2 ]; then
  echo "reshard_resume: same world (2 ranks FSDP, 2 + 2 steps): losses and both shard files (weights and moments) bitwise equal"
else
  echo "reshard_resume: same world: NOT bitwise equal"; diff "$tmp/a.txt" "$tmp/b.txt"; fail=1
fi

# A world that cannot keep the global batch (4 rows on 3 ranks of batch 1).
if $mpirun -np 3 "$bin" train $common --out_dir="$tmp/res" --steps=10 --grad_accum=1 --mode=DDP > "$tmp/refuse.log" 2>&1; then
  echo "reshard_resume: 3 ranks were not refused"; fail=1
elif grep -q "no grad_accum keeps it on 3 ranks" "$tmp/refuse.log"; then
  echo "reshard_resume: 3 ranks refused: $(grep -o 'the checkpoint.s global batch.*' "$tmp/refuse.log" | head -1)"
else
  echo "reshard_resume: 3 ranks failed without the expected message"; cat "$tmp/refuse.log"; fail=1
fi
[ "$fail" -eq 0 ] && echo "reshard_resume: PASS" || echo "reshard_resume: FAIL"
exit $fail
