#!/usr/bin/env python3
# Why: SFT needs conversations, and this machine has no chat data set — but the
# demo corpus (`longctx data corpus`, data/corpus/raw) holds real man pages and
# natural prose. This builder turns that local material into SFT JSONL
# (data/chat_template.h's {"messages": [...]} form), deterministically, so the
# data set ships as code, not as data:
#   manpage_option  long context: the whole man page, then "In the manual of X,
#                   what does option Y do?"; answer: the option's description
#                   as the page gives it
#   manpage_name    short instruction: "What does the command X do?" -> the
#                   NAME line's description
#   multi_needle    multi-needle retrieval: K "The secret code of NAME is NNNN."
#                   sentences inserted at seeded positions of a natural (Brown)
#                   document; the question asks for all K codes in order
# Usage: scripts/sft_build.py --out FILE.jsonl [--raw data/corpus/raw]
#        [--max_context_chars 0] [--needles 4] [--seed 1]
# Then: longctx data sft --input FILE.jsonl --out DIR --tokenizer byte
import argparse
import glob
import json
import os
import random
import re
import subprocess
import sys

OPTION_RE = re.compile(r"^ {7}(--?[A-Za-z0-9][\w-]*)(.*)$")


def read_docs(raw):
    files = sorted(glob.glob(os.path.join(raw, "**", "*.jsonl*"), recursive=True))
    if not files:
        sys.exit(f"sft_build: no *.jsonl[.zst] shards under {raw} (build them with `longctx data corpus`)")
    for path in files:
        if path.endswith(".zst"):
            text = subprocess.run(["zstd", "-dc", path], check=True, capture_output=True).stdout.decode("utf-8")
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
            except json.JSONDecodeError as e:
                print(f"{path}:{n}: skipped: {e}", file=sys.stderr)
                continue
            yield d


def man_name(text):
    m = re.search(r"^NAME\n\s+(\S+(?:, \S+)*) \\?[-\u2010-\u2014] (.+?)\n\s*\n", text, re.M | re.S)
    if not m:
        return None, None
    return m.group(1).split(",")[0].strip(), " ".join(m.group(2).split())


def man_options(text):
    """(option, description) pairs: an option line at 7 spaces, description at 11+."""
    lines = text.splitlines()
    out = []
    i = 0
    while i < len(lines):
        m = OPTION_RE.match(lines[i])
        if not m:
            i += 1
            continue
        opt, rest = m.group(1), m.group(2).strip()
        desc = []
        # Same-line description after 2+ spaces (e.g. "-a      do all").
        if re.match(r"^\S*\s{2,}\S", m.group(2)):
            desc.append(re.split(r"\s{2,}", m.group(2).strip(), maxsplit=1)[-1])
        j = i + 1
        while j < len(lines) and lines[j].startswith(" " * 11) and lines[j].strip():
            desc.append(lines[j].strip())
            j += 1
        d = " ".join(desc)
        if 20 <= len(d) <= 600:
            out.append((opt + (" " + rest if rest and not desc[:1] == [rest] and len(rest) < 40 else ""), d))
        i = max(j, i + 1)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--raw", default="data/corpus/raw")
    ap.add_argument("--max_context_chars", type=int, default=0, help="cut man pages longer than this (0 = whole)")
    ap.add_argument("--options_per_page", type=int, default=3)
    ap.add_argument("--needles", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    counts = {"manpage_option": 0, "manpage_name": 0, "multi_needle": 0}
    names = ["amber", "birch", "cobalt", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper"]
    with open(a.out + ".tmp", "w", encoding="utf-8") as out:
        def emit(kind, messages):
            counts[kind] += 1
            out.write(json.dumps({"messages": messages, "kind": kind}, ensure_ascii=False) + "\n")

        for d in read_docs(a.raw):
            text = d.get("text", "")
            kind = d.get("meta", {}).get("redpajama_set_name", "")
            if kind == "ManPages":
                cmd, what = man_name(text)
                if not cmd:
                    continue
                emit("manpage_name", [{"role": "user", "content": f"What does the command {cmd} do?"},
                                      {"role": "assistant", "content": f"{cmd}: {what}."}])
                page = text if a.max_context_chars <= 0 else text[: a.max_context_chars]
                opts = [o for o in man_options(page)]
                rng.shuffle(opts)
                seen = set()
                for opt, desc in opts:
                    key = opt.split()[0]
                    if key in seen or len(seen) >= a.options_per_page:
                        continue
                    seen.add(key)
                    emit("manpage_option", [
                        {"role": "system", "content": "Answer from the manual page given."},
                        {"role": "user", "content": f"{page}\n\nIn the manual of {cmd}, what does option {key} do?"},
                        {"role": "assistant", "content": desc}])
            elif kind == "BrownCorpus":
                sents = re.split(r"(?<=[.!?])\s+", " ".join(text.split()))
                if len(sents) < 2 * a.needles:
                    continue
                chosen = rng.sample(names, a.needles)
                codes = [f"{rng.randrange(10000):04d}" for _ in chosen]
                spots = sorted(rng.sample(range(len(sents) + 1), a.needles))
                for k, (spot, nm, code) in enumerate(reversed(list(zip(spots, chosen, codes)))):
                    sents.insert(spot, f"The secret code of {nm} is {code}.")
                order = sorted(zip(spots, chosen, codes))
                emit("multi_needle", [
                    {"role": "user", "content": " ".join(sents) + "\n\nList every secret code in the text above, "
                                                "in the order they appear."},
                    {"role": "assistant", "content": "; ".join(f"{nm}: {code}" for _, nm, code in order)}])
    os.replace(a.out + ".tmp", a.out)
    print(f"sft_build: {sum(counts.values())} examples {counts} -> {a.out}")


if __name__ == "__main__":
    main()
