#!/usr/bin/env python3
"""Markdown tables for docs/BENCHMARKS.md ("Training step") from the
JSON lines scripts/run_benchmarks.sh appends (one run of the script).

usage: benchmark_table.py RESULTS.jsonl
Prints the targets table (each figure with its target and whether it is met)
and the per-length attention table. Rows that were not run print "not run".
Standard library only.
"""
import json
import sys


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    return rows


def find(rows, row, system=None):
    for r in rows:
        if r.get("row") == row and (system is None or r.get("system") == system):
            return r
    return None


def pct(x):
    return f"{100 * x:.1f} %"


def verdict(ok):
    return "met" if ok else "**missed**"


def main():
    rows = load(sys.argv[1])
    out = ["| figure | target | measured | result |", "| --- | --- | --- | --- |"]

    def add(figure, target, measured, ok):
        out.append(f"| {figure} | {target} | {measured} | {'' if ok is None else verdict(ok)} |")

    cmp32 = find(rows, "ref-b-fp32", "comparison")
    if cmp32:
        r = cmp32["tokens_per_s_ratio"]
        add("ref-b fp32 tokens/s vs PyTorch fp32, same run", "≥ 1.6×",
            f"{cmp32['longctx_tokens_per_s']:.1f} vs {cmp32['pytorch_tokens_per_s']:.1f} tokens/s = **{r:.2f}×**", r >= 1.6)
        f = cmp32["longctx_fraction_of_peak"]
        add("ref-b fp32 achieved GFLOP/s vs measured sgemm peak", "≥ 65 %",
            f"{cmp32['longctx_gflops']:.1f} of {cmp32['peak_gflops']:.1f} GFLOP/s = **{pct(f)}** "
            f"(PyTorch {pct(cmp32['pytorch_fraction_of_peak'])})", f >= 0.65)
    else:
        add("ref-b fp32 vs PyTorch fp32", "≥ 1.6×", "not run", None)
    ob = find(rows, "ref-b-fp32-openblas", "longctx")
    if ob:
        add("(same step with OpenBLAS sgemm instead of oneDNN)", "—",
            f"{ob['tokens_per_s']:.1f} tokens/s, {ob['gflops']:.1f} of {ob['peak_gflops']:.1f} GFLOP/s = {pct(ob['fraction_of_peak'])}", None)
    sw = find(rows, "ref-b-rnope-swa", "comparison")
    if sw:
        add("(ref-b shape as RNoPE-SWA, window 128, fp32, vs PyTorch)", "—",
            f"{sw['longctx_tokens_per_s']:.1f} vs {sw['pytorch_tokens_per_s']:.1f} tokens/s = {sw['tokens_per_s_ratio']:.2f}×, "
            f"{pct(sw['longctx_fraction_of_peak'])} of peak", None)
    cmp16 = find(rows, "ref-b-bf16", "comparison")
    if cmp16:
        r = cmp16["tokens_per_s_ratio"]
        add("ref-b bf16 tokens/s vs PyTorch bf16 autocast, same run", "≥ 1.3×",
            f"{cmp16['longctx_tokens_per_s']:.1f} vs {cmp16['pytorch_tokens_per_s']:.2f} tokens/s = **{r:.1f}×** (see note)", r >= 1.3)
    else:
        add("ref-b bf16 vs PyTorch bf16 autocast", "≥ 1.3×", "not run", None)

    att = [r for r in rows if r.get("bench") == "attention"]
    swa = sorted((r for r in att if r["kind"] == "swa"), key=lambda r: r["seq_len"])
    if swa:
        ms = [r["attn_ms_per_token"] for r in swa]
        mean = sum(ms) / len(ms)
        lo, hi = min(ms) / mean - 1, max(ms) / mean - 1
        lens = f"L = {swa[0]['seq_len'] // 1024}K → {swa[-1]['seq_len'] // 1024}K"
        add(f"sliding-window layer time per token, {lens}, window {swa[0]['window'] // 1024}K", "flat within ±20 %",
            f"attention fwd+bwd {min(ms) * 1000:.1f}–{max(ms) * 1000:.1f} µs/token: **{100 * lo:+.0f} % / {100 * hi:+.0f} %** "
            f"around the mean; whole layer {min(r['layer_ms_per_token'] for r in swa) * 1000:.0f}–"
            f"{max(r['layer_ms_per_token'] for r in swa) * 1000:.0f} µs/token",
            lo >= -0.2 and hi <= 0.2)
    full16 = find(rows, "full-16k", "longctx")
    swa16 = find(rows, "rnope-swa-16k", "longctx")
    if full16 and swa16:
        r = swa16["tokens_per_s"] / full16["tokens_per_s"]
        add("RNoPE-SWA (window 1K) vs all-full-RoPE model, same shape, L = 16K, tokens/s", "≥ 2×",
            f"{swa16['tokens_per_s']:.1f} vs {full16['tokens_per_s']:.1f} tokens/s = **{r:.2f}×**", r >= 2.0)
    else:
        add("RNoPE-SWA vs full at 16K", "≥ 2×", "not run", None)
    if swa:
        b = [r["attn_bytes_per_token"] for r in swa]
        linear = max(b) == min(b)
        add(f"attention activation memory, {lens}", "grows linearly",
            f"{swa[0]['attn_bytes'] / 2**20:.1f} → {swa[-1]['attn_bytes'] / 2**20:.1f} MiB = {b[0]:.0f} bytes/token at every L "
            f"(measured RSS growth {swa[0]['attn_rss_gain_mb']:.0f} → {swa[-1]['attn_rss_gain_mb']:.0f} MiB)", linear)
    tl = find(rows, "tinyllama-1.1b", "longctx")
    if tl:
        ok = tl["peak_rss_mb"] * 2**20 < 24 * 2**30
        add("one AdamW step of TinyLlama-1.1B at T = 2048", "fits in 24 GiB; peak RSS and s/step",
            f"peak RSS **{tl['peak_rss_mb'] / 1024:.2f} GiB**, **{tl['step_seconds_median']:.1f} s/step** "
            f"({tl['tokens_per_s']:.1f} tokens/s, {pct(tl['fraction_of_peak'])} of peak), no recomputation", ok)
    else:
        add("TinyLlama-1.1B AdamW step at T = 2048", "fits in 24 GiB", "not run", None)
    print("\n".join(out))

    if att:
        print()
        print("| kind | L | attention fwd+bwd µs/token | attention GFLOP/s | attention activations MiB | bytes/token | RSS growth MiB | 1-layer model step µs/token |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in sorted(att, key=lambda r: (r["kind"] != "swa", r["seq_len"])):
            print(f"| {r['kind']} | {r['seq_len']} | {r['attn_ms_per_token'] * 1000:.1f} | {r['attn_gflops']:.1f} | "
                  f"{r['attn_bytes'] / 2**20:.1f} | {r['attn_bytes_per_token']:.0f} | {r['attn_rss_gain_mb']:.1f} | "
                  f"{r['layer_ms_per_token'] * 1000:.0f} |")


if __name__ == "__main__":
    main()
