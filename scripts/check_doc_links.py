#!/usr/bin/env python3
"""Fails when README.md or a docs/ page has a dead relative link, or a docs/*.md page is not linked from README.

Why: the documentation is a README plus one page per topic; pages get renamed,
moved to docs/history/ or split, and a link that points at nothing (or a
page nobody links to) is found only by a reader. This walks every Markdown
link and image in README.md and docs/**/*.md, resolves relative targets
against the file that holds them, checks that the file or directory exists
and that a #fragment names a heading of the target page (GitHub's anchor
rules), and checks that README.md links every top-level docs/*.md page.

  python3 scripts/check_doc_links.py [REPO_ROOT]

Prints one line per problem and exits 1, or prints a summary and exits 0.
External links (http, https, mailto) are not fetched.
"""
import pathlib
import re
import sys

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~)")


def strip_code(text):
    """The text without fenced blocks, indented code blocks and inline code spans."""
    out, in_fence = [], False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            in_fence = not in_fence
            out.append("")
            continue
        if in_fence or line.startswith("    ") or line.startswith("\t"):
            out.append("")
            continue
        out.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(out)


def anchors(path):
    """GitHub-style anchors of the headings of a Markdown file."""
    seen, result = {}, set()
    in_fence = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.lstrip()):
            in_fence = not in_fence
            continue
        m = None if in_fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = m.group(1).strip().lower()
        slug = re.sub(r"[^\w\- ]", "", slug)  # keeps letters, digits, _, -, space (Unicode-aware)
        slug = slug.replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        result.add(slug if n == 0 else f"{slug}-{n}")
    return result


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    readme = root / "README.md"
    pages = [readme] + sorted((root / "docs").rglob("*.md"))
    problems, checked = [], 0
    for page in pages:
        for target in LINK.findall(strip_code(page.read_text(encoding="utf-8"))):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            checked += 1
            path_part, _, fragment = target.partition("#")
            dest = page if not path_part else (page.parent / path_part).resolve()
            rel = page.relative_to(root)
            if not dest.exists():
                problems.append(f"{rel}: dead link {target}")
                continue
            if fragment and dest.suffix == ".md" and fragment.lower() not in anchors(dest):
                problems.append(f"{rel}: no heading #{fragment} in {dest.relative_to(root)}")
    readme_targets = {(readme.parent / t.partition("#")[0]).resolve()
                      for t in LINK.findall(strip_code(readme.read_text(encoding="utf-8")))
                      if t.partition("#")[0]}
    for page in sorted((root / "docs").glob("*.md")):
        if page.resolve() not in readme_targets:
            problems.append(f"README.md: does not link {page.relative_to(root)}")
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"check_doc_links: {checked} relative links in {len(pages)} files resolve; "
          f"README links all {len(list((root / 'docs').glob('*.md')))} docs/*.md pages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
