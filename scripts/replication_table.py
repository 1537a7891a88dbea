#!/usr/bin/env python3
"""Markdown tables for docs/EXPERIMENTS.md from the files scripts/replicate.sh writes.

usage: replication_table.py OUT_DIR MODEL [MODEL ...]
Reads OUT_DIR/MODEL.{probe,probe-string,attention,time}.json and OUT_DIR/MODEL/metrics.jsonl.
Standard library only.
"""
import json
import os
import sys


def load(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def metrics(path):
    out = []
    if os.path.exists(path):
        with open(path) as f:
            out = [json.loads(l) for l in f if l.strip()]
    return out


def main():
    out, models = sys.argv[1], sys.argv[2:]
    rows = []
    for m in models:
        rows.append((m, load(f"{out}/{m}.probe.json")))
        if os.path.exists(f"{out}/{m}.probe-string.json"):
            rows.append((m + " + STRING", load(f"{out}/{m}.probe-string.json")))
    lengths = []
    for _, p in rows:
        for l in (p or {}).get("lengths", []):
            if l.get("tested") and l["length"] not in lengths:
                lengths.append(l["length"])
    lengths.sort()

    print("### Training\n")
    print("| model | steps | tokens | train seconds | final train loss | last periodic probe: effective length |")
    print("| --- | --- | --- | --- | --- | --- |")
    for m in models:
        ms = metrics(f"{out}/{m}/metrics.jsonl")
        train = [e for e in ms if e.get("kind") == "train"]
        probes = [e for e in ms if e.get("kind") == "probe"]
        t = load(f"{out}/{m}.time.json") or {}
        last = train[-1] if train else {}
        print(f"| {m} | {last.get('step', '?')} | {last.get('tokens_seen', '?'):,} | {t.get('train_seconds', '?')} | "
              f"{last.get('loss', float('nan')):.4f} | {probes[-1]['effective_length'] if probes else '-'} |")

    print("\n### One-needle NIAH probe (pass rate / answer-digit NLL in nats per token; training length 256)\n")
    print("| model | effective length | " + " | ".join(str(x) for x in lengths) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in lengths) + " |")
    for name, p in rows:
        if p is None:
            continue
        by = {l["length"]: l for l in p["lengths"] if l.get("tested")}
        cells = []
        for x in lengths:
            l = by.get(x)
            cells.append("-" if l is None else f"{l['pass_rate']:.2f} / {l['answer_loss']:.2f}")
        print(f"| {name} | {p['effective_length']} | " + " | ".join(cells) + " |")
    trials = next((p["trials_per_length"] for _, p in rows if p), "?")
    print(f"\n{trials} trials per length; a length passes when its pass rate is >= 0.5.")

    print("\n### Attention mass of the question/answer queries (needle at ~50 % depth, length 256)\n")
    print("| model | layers | begin | needle | context | qc | entropy (nats) | answer NLL |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for m in models:
        a = load(f"{out}/{m}.attention.json")
        if a is None:
            continue
        for g in a["mass"]["summary"]:
            s = g["mass"]
            print(f"| {m} | {g['group']} ({g['layers']}) | {s['begin']:.4f} | {s['needle']:.4f} | {s['context']:.4f} | "
                  f"{s['qc']:.4f} | {g['entropy']:.3f} | {a['answer_nll']:.3f} |")
    print("\n### RoPE pairs: positional heads (|Spearman(dominant pair, distance)| >= threshold)\n")
    print("| model | RoPE heads | positional heads | mean share of the 4 lowest-frequency pairs |")
    print("| --- | --- | --- | --- |")
    for m in models:
        a = load(f"{out}/{m}.attention.json")
        if a is None or not a["rope_pairs"]["heads"]:
            continue
        heads = a["rope_pairs"]["heads"]
        low = sum(sum(h["share"][-4:]) for h in heads) / len(heads)
        pos = ", ".join(f"L{h['layer']}H{h['head']}" for h in a["rope_pairs"]["positional_heads"]) or "none"
        print(f"| {m} | {len(heads)} | {pos} (threshold {a['rope_pairs']['positional_threshold']}) | {low:.3f} |")


if __name__ == "__main__":
    main()
