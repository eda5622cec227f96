#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every cmocka group run with a group teardown goes through tests/support/group.h.

cmocka 1.1.5 prints a failed group teardown and still returns 0, so a check
made there (a service's exit status on SIGTERM, which under ASan is also the
leak check) passes whatever it finds. svc_test_run_group_tests[_name] counts
it. This check finds every call of cmocka_run_group_tests[_name] whose last
argument (the group teardown) is not NULL and fails naming each one.
tests/unit/support/test_group.c is the one exception: it shows cmocka's own
behaviour on purpose.

Usage: check_test_groups.py TESTS_DIR
"""
import pathlib
import re
import sys

CALL = re.compile(r"\bcmocka_run_group_tests(?:_name)?\s*\((?P<args>[^;]*)\)\s*;", re.S)
EXEMPT = {"unit/support/test_group.c"}


def last_argument(args: str) -> str:
    depth, start = 0, 0
    parts = []
    for i, ch in enumerate(args):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(args[start:i])
            start = i + 1
    parts.append(args[start:])
    return parts[-1].strip()


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    root = pathlib.Path(sys.argv[1])
    bad, seen = [], 0
    for path in sorted(root.rglob("*.c")):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        for m in CALL.finditer(text):
            seen += 1
            if rel in EXEMPT or last_argument(m.group("args")) in ("NULL", "0"):
                continue
            line = text.count("\n", 0, m.start()) + 1
            bad.append(f"{rel}:{line}: a group teardown through cmocka_run_group_tests: its "
                       f"failure would not count; use svc_test_run_group_tests[_name] "
                       f"(tests/support/group.h)")
    for b in bad:
        print(b)
    print(f"check_test_groups: {seen} plain cmocka group runs read, {len(bad)} with a teardown")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
