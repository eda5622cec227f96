#!/usr/bin/env python3
"""tools/format.py: the C sources in the project's style (.clang-format).

usage: tools/format.py [--check] [FILE ...]

Without files: every *.c and *.h git tracks. Without --check it rewrites them: clang-format-14
(the version is pinned, since another one formats differently), then one pass clang-format
does not do: with ReflowComments off it moves a trailing comment's first line to the aligned
column but leaves the lines that continue it where they were, so they are re-indented to follow
it. With --check nothing is written; it exits 1 naming each file that either step would change
(the ctest lint_format, which .ci/run runs).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

CLANG_FORMAT = "clang-format-14"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sources():
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "*.c", "*.h"], stdout=subprocess.PIPE,
                         text=True, check=True).stdout.split()
    return [os.path.join(ROOT, f) for f in out]


def trailing_comment_start(line):
    """The column of a block comment that follows code on this line and does not end on it."""
    s = line.lstrip()
    if not s or s.startswith(("/*", "*", "//", "#")):
        return None
    col = None
    for m in re.finditer(r"/\*", line):
        if "*/" not in line[m.start():]:
            col = m.start()
    return col


def follow_comments(text):
    """text with every trailing comment's continuation lines indented under its first line."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        col = trailing_comment_start(lines[i])
        if col is None or i + 1 >= len(lines):
            i += 1
            continue
        first = lines[i + 1]
        indent = len(first) - len(first.lstrip())
        delta = (col + 1 if first.lstrip().startswith("*") else col + 3) - indent
        j = i + 1
        while j < len(lines):
            if delta and lines[j].strip():
                cur = len(lines[j]) - len(lines[j].lstrip())
                lines[j] = " " * max(0, cur + delta) + lines[j].lstrip()
            if "*/" in lines[j]:
                break
            j += 1
        i = j + 1
    return "\n".join(lines)


def formatted(path):
    p = subprocess.run([CLANG_FORMAT, f"--assume-filename={path}", "--style=file"],
                       stdin=open(path, "rb"), stdout=subprocess.PIPE, check=True, cwd=ROOT)
    return follow_comments(p.stdout.decode("utf-8", "surrogateescape"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="change nothing, exit 1 if a file would change")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    if shutil.which(CLANG_FORMAT) is None:
        sys.exit(f"format: {CLANG_FORMAT} is not installed (deploy/local/packages.txt has it: "
                 f"deploy/local/stack.sh deps)")
    files = [os.path.abspath(f) for f in a.files] or sources()
    differ = []
    for path in files:
        with open(path, "rb") as f:
            before = f.read().decode("utf-8", "surrogateescape")
        after = formatted(path)
        if after == before:
            continue
        differ.append(os.path.relpath(path, ROOT))
        if not a.check:
            with open(path, "wb") as f:
                f.write(after.encode("utf-8", "surrogateescape"))
    verb = "not formatted" if a.check else "formatted"
    for f in differ:
        print(f"format: {verb}: {f}")
    print(f"format: {len(files)} files, {len(differ)} {verb}"
          + (" (tools/format.py formats them)" if a.check and differ else ""))
    return 1 if a.check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
