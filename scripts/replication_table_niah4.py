#!/usr/bin/env python3
"""Markdown tables of the 4-needle replication (scripts/replicate_niah4.sh).

usage: replication_table_niah4.py OUT_DIR
Reads OUT_DIR/NAME.probe-{compact,paper}-{plain,string}.json, NAME.lbp.json,
NAME.time.json and NAME/metrics.jsonl for every run NAME = METHOD-PACKER-sSEED.
Standard library only.
"""
import glob
import json
import os
import re
import statistics
import sys


def load(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def last_posfreq(metrics_path):
    """share_ge_half / share_ge_three_quarters of the full-attention layers at the run's end."""
    ev = None
    if os.path.exists(metrics_path):
        with open(metrics_path) as f:
            for line in f:
                try:
                    e = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if e.get("kind") == "posfreq":
                    ev = e
    if ev is None:
        return None
    part = ev.get("full") or ev.get("sliding")
    return part["share_ge_half"], part["share_ge_three_quarters"], part["pairs_per_layer"]


def fmt_eff(p):
    """'1024 (512..1536)', with '>=' when no length failed."""
    if p is None:
        return "-"
    eff = p["effective_length"]
    ge = ">= " if p.get("first_failing_length") is None else ""
    return f"{ge}{eff} ({p['effective_length_low']}..{p['effective_length_high']})"


def mean_sd(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    if len(xs) == 1:
        return f"{xs[0]:.0f}"
    return f"{statistics.mean(xs):.0f} ± {statistics.stdev(xs):.0f}"


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    names = sorted({re.sub(r"\.time\.json$", "", os.path.basename(p)) for p in glob.glob(os.path.join(out, "*.time.json"))})
    if not names:
        print(f"replication_table_niah4: no runs in {out}", file=sys.stderr)
        return 1
    rows = []
    for n in names:
        m = re.match(r"(.+)-(default|join)-s(\d+)$", n)
        if not m:
            continue
        method, packer, seed = m.group(1), m.group(2), int(m.group(3))
        probes = {(fmt, s): load(os.path.join(out, f"{n}.probe-{fmt}-{s}.json"))
                  for fmt in ("compact", "paper") for s in ("plain", "string")}
        rows.append(dict(name=n, method=method, packer=packer, seed=seed, probes=probes,
                         lbp=load(os.path.join(out, f"{n}.lbp.json")),
                         time=load(os.path.join(out, f"{n}.time.json")),
                         posfreq=last_posfreq(os.path.join(out, n, "metrics.jsonl"))))
    print("## 4-needle effective length per run (95% Wilson range of the effective length)\n")
    print("| run | train s | f(i >= L/2) | f(i >= 3L/4) | compact | compact + STRING | paper | paper + STRING |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        pf = r["posfreq"]
        pfs = (f"{100 * pf[0]:.2f} %", f"{100 * pf[1]:.2f} %") if pf else ("-", "-")
        cells = [fmt_eff(r["probes"][(f, s)]) for f in ("compact", "paper") for s in ("plain", "string")]
        t = r["time"]["train_seconds"] if r["time"] else "-"
        print(f"| {r['name']} | {t} | {pfs[0]} | {pfs[1]} | " + " | ".join(cells) + " |")
    print("\n## Mean ± sd over seeds of the effective length\n")
    print("| method | packer | seeds | compact | compact + STRING | paper | paper + STRING |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    groups = {}
    for r in rows:
        groups.setdefault((r["method"], r["packer"]), []).append(r)
    for (method, packer), rs in sorted(groups.items()):
        cells = []
        for f in ("compact", "paper"):
            for s in ("plain", "string"):
                cells.append(mean_sd([r["probes"][(f, s)]["effective_length"] if r["probes"][(f, s)] else None
                                      for r in rs]))
        print(f"| {method} | {packer} | {len(rs)} | " + " | ".join(cells) + " |")
    print("\n## Pass rate / answer loss per length (compact, no STRING)\n")
    lengths = []
    for r in rows:
        p = r["probes"][("compact", "plain")]
        if p:
            lengths = [x["length"] for x in p["lengths"]]
            break
    print("| run | " + " | ".join(str(x) for x in lengths) + " |")
    print("| --- |" + " --- |" * len(lengths))
    for r in rows:
        p = r["probes"][("compact", "plain")]
        if not p:
            continue
        by = {x["length"]: x for x in p["lengths"]}
        cells = []
        for L in lengths:
            x = by.get(L)
            cells.append("-" if not x or not x.get("tested") else f"{x['pass_rate']:.2f} / {x['answer_loss']:.2f}")
        print(f"| {r['name']} | " + " | ".join(cells) + " |")
    print("\n## Loss by position (nats per token, buckets of the eval documents)\n")
    buckets = []
    for r in rows:
        if r["lbp"]:
            buckets = [(b["lo"], b["hi"]) for b in r["lbp"]["buckets"]]
            break
    print("| run | " + " | ".join(f"{lo}-{hi}" for lo, hi in buckets) + " |")
    print("| --- |" + " --- |" * len(buckets))
    for r in rows:
        if not r["lbp"]:
            continue
        by = {(b["lo"], b["hi"]): b for b in r["lbp"]["buckets"]}
        print(f"| {r['name']} | " + " | ".join(f"{by[k]['loss']:.3f}" if k in by else "-" for k in buckets) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
