#!/usr/bin/env python3
"""De-tags the Brown corpus ("The/at jury/nn ./.") into plain text, one file per sample.

Words keep their original spelling (the tag after the last '/' is dropped),
punctuation attaches to the previous word, `` and '' become double quotes, and
the corpus's paragraph breaks stay blank lines.
"""
import os
import re
import sys

NO_SPACE_BEFORE = {".", ",", ";", ":", "?", "!", ")", "'", "''", "'s"}
NO_SPACE_AFTER = {"(", "``"}


def detag_line(line):
    out = []
    prev = None
    for tok in line.split():
        word = tok.rsplit("/", 1)[0] if "/" in tok else tok
        if word == "``":
            text = '"'
        elif word == "''":
            text = '"'
        else:
            text = word
        if out and word not in NO_SPACE_BEFORE and prev not in NO_SPACE_AFTER:
            out.append(" ")
        out.append(text)
        prev = word
    return "".join(out)


def main(src, dst):
    names = sorted(n for n in os.listdir(src) if re.fullmatch(r"c[a-r]\d\d", n))
    if not names:
        sys.exit(f"brown_to_text: no Brown samples (ca01 ...) in {src}")
    for name in names:
        with open(os.path.join(src, name), encoding="utf-8", errors="replace") as f:
            paragraphs = [detag_line(l) for l in f if l.strip()]
        with open(os.path.join(dst, name + ".txt"), "w", encoding="utf-8") as f:
            f.write("\n\n".join(p for p in paragraphs if p) + "\n")
    print(f"brown_to_text: {len(names)} documents -> {dst}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
