#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Tests reach a module's private headers only through its testing target.

A module's private headers live in pkg/<module>/src (the one its files share
is src/internal.h; a header of one part is src/<part>.h). A test that drives
internals links the module's <lib>_testing target (svc_module_testing() in
pkg/cmake/SvcModule.cmake), which is the one declared seam: no CMakeLists.txt
under tests/ names a pkg/.../src or services/.../src directory itself, and
no file outside pkg/ and tests/ includes a module's "internal.h".

Usage: check_private_headers.py REPO_ROOT
"""
import pathlib
import re
import sys

SRC_DIR = re.compile(r"(pkg|services)/[\w/-]*/src\b")
INCLUDE_INTERNAL = re.compile(r'#\s*include\s+"internal\.h"')


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    bad = []
    for cm in sorted((root / "tests").rglob("CMakeLists.txt")):
        for n, line in enumerate(cm.read_text().splitlines(), 1):
            if SRC_DIR.search(line):
                bad.append(f"{cm.relative_to(root)}:{n}: names a src/ directory; link <lib>_testing")
    for top in ("gateway", "services", "tools", "bench"):
        for f in sorted((root / top).rglob("*.[ch]")):
            for n, line in enumerate(f.read_text().splitlines(), 1):
                if INCLUDE_INTERNAL.search(line):
                    bad.append(f"{f.relative_to(root)}:{n}: includes a module's internal.h")
    for b in bad:
        print(b)
    print(f"check_private_headers: {len(bad)} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
