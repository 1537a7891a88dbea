#!/usr/bin/env bash
# Why: docs/BENCHMARKS.md shows curves where a reader would rather look than read
# a table; they must come from measured data (never retyped numbers) and be drawn
# by the project's own PNG writer (`longctx plot --series`, train/report/series_plot.h;
# no plotting library is installed). This script turns the measured records into
# (series, x, y) points files beside the PNGs (docs/figures/*.points.jsonl) and
# draws them:
#   bench_attention_time.png    attention fwd+bwd µs/token against L, RoPE sliding
#                               window (1024) and full attention, and a one-layer
#                               model step: docs/results/benchmarks/issue4-2026-11-22.jsonl
#                               (`longctx bench attention --config configs/ref-b.textproto`)
#   bench_attention_memory.png  attention activations against L (computed bytes, the
#                               measured RSS growth of one fwd+bwd, and what an L x L
#                               fp32 score matrix for ref-b's 8 heads would take): same file
#   bench_fp32_bf16_loss.png    training loss per step of two 200-step runs, fp32 and
#                               bf16 (docs/results/benchmarks/precision-2026-11-24.jsonl,
#                               the commands are in BENCHMARKS.md)
# Usage: docs/figures/make_benchmark_figures.sh [LONGCTX_BINARY]  (default build/bin/longctx)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-build/bin/longctx}
R=docs/results/benchmarks
F=docs/figures
python3 - "$R" "$F" <<'EOF'
import json, sys
r, f = sys.argv[1], sys.argv[2]
rows = [json.loads(l) for l in open(f"{r}/issue4-2026-11-22.jsonl")]
att = [d for d in rows if d.get("row") == "attention" and "kind" in d]
name = {"swa": "RoPE sliding window (1024)", "full": "full attention"}
with open(f"{f}/bench_attention_time.points.jsonl", "w") as o:
    for kind in ("swa", "full"):
        for d in att:
            if d["kind"] == kind:
                o.write(json.dumps({"series": f"{name[kind]}: attention fwd+bwd", "x": d["seq_len"],
                                    "y": round(d["attn_ms_per_token"] * 1000, 2)}) + "\n")
    for kind in ("swa", "full"):
        for d in att:
            if d["kind"] == kind:
                o.write(json.dumps({"series": f"{name[kind]}: whole 1-layer model step", "x": d["seq_len"],
                                    "y": round(d["layer_ms_per_token"] * 1000, 2)}) + "\n")
with open(f"{f}/bench_attention_memory.points.jsonl", "w") as o:
    mib = 1024.0 * 1024.0
    for d in att:
        if d["kind"] == "swa":
            o.write(json.dumps({"series": "attention fwd+bwd buffers (12,320 bytes/token, computed)",
                                "x": d["seq_len"], "y": round(d["attn_bytes"] / mib, 2)}) + "\n")
    for kind in ("swa", "full"):
        for d in att:
            if d["kind"] == kind and d["attn_rss_gain_mb"] > 0:
                o.write(json.dumps({"series": f"measured RSS growth of one fwd+bwd, {name[kind]}",
                                    "x": d["seq_len"], "y": round(d["attn_rss_gain_mb"], 2)}) + "\n")
    for d in att:
        if d["kind"] == "swa":
            L = d["seq_len"]
            o.write(json.dumps({"series": "an L x L fp32 score matrix, 8 heads (never allocated)",
                                "x": L, "y": round(8 * L * L * 4 / mib, 2)}) + "\n")
prec = [json.loads(l) for l in open(f"{r}/precision-2026-11-24.jsonl")]
with open(f"{f}/bench_fp32_bf16_loss.points.jsonl", "w") as o:
    for p in ("fp32", "bf16"):
        for d in prec:
            if d["precision"] == p and d.get("kind") == "train":
                o.write(json.dumps({"series": f"{p} training loss", "x": d["step"], "y": d["loss"]}) + "\n")
EOF
"$BIN" plot --series $F/bench_attention_time.points.jsonl --png $F/bench_attention_time.png \
  --title "Attention time per token vs L (ref-b shape, 2 threads, bench attention)" \
  --x_label "L (tokens in one segment)" --y_label "microseconds per token" --y_from_zero
"$BIN" plot --series $F/bench_attention_memory.points.jsonl --png $F/bench_attention_memory.png \
  --title "Attention activation memory vs L (ref-b shape: 8 heads, 4 kv heads, head_dim 64)" \
  --x_label "L (tokens in one segment)" --y_label "MiB (log scale)" --log_y
"$BIN" plot --series $F/bench_fp32_bf16_loss.points.jsonl --png $F/bench_fp32_bf16_loss.png \
  --title "Training loss per step, fp32 vs bf16 (main-job model, natural text)" \
  --x_label "step" --y_label "training loss (nats/token)"
