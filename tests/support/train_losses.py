#!/usr/bin/env python3
# Why: the multi-process shell tests compare runs by their per-step training
# losses; this is the one reader of metrics.jsonl they share. Prints "step
# loss" lines (the last record of a step wins, as after a resume), or with
# --shape "step seq_len rows loss".
#   train_losses.py METRICS_JSONL [--shape]
import json
import sys

d = {}
for line in open(sys.argv[1]):
    j = json.loads(line)
    if j.get("kind") == "train":
        d[j["step"]] = (j["seq_len"], j["rows"], j["loss"])
for s in sorted(d):
    seq_len, rows, loss = d[s]
    print(s, seq_len, rows, repr(loss)) if "--shape" in sys.argv[2:] else print(s, repr(loss))
