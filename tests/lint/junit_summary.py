#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What a ctest run did, from its JUnit file: passed, failed and skipped.

ctest's own "N% tests passed" counts a skipped test as passed (a cmocka
skip() exits 0; only a test with SKIP_RETURN_CODE shows as not run), so a
run can read "all tests passed" with whole cases left out. This reads the
file that `ctest --output-junit` writes (with --test-output-size-passed large
enough to keep every test's output) and counts:
  - tests ctest did not run or marked skipped (SKIP_RETURN_CODE, e.g. 77);
  - cmocka cases a test skipped ("[  SKIPPED ] case" in its output).
A skip is allowed only when ALLOWED (one "test" or "test:case" per line,
"# why" after it) lists it; any other skip fails the run, as a failure does.

Usage: junit_summary.py JUNIT_XML ALLOWED_SKIPS
Prints one line of counts, then one line per skip; exit 1 on a failure or an
unexpected skip, 2 when the file cannot be read.
"""
import re
import sys
import xml.etree.ElementTree as ET

CMOCKA_SKIP = re.compile(r"^\[  SKIPPED \] (\S+)\s*$", re.M)


def allowed(path):
    names = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            name = line.split("#", 1)[0].strip()
            if name:
                names.add(name)
    return names


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-3], file=sys.stderr)
        return 2
    try:
        root = ET.parse(sys.argv[1]).getroot()
        ok_skips = allowed(sys.argv[2])
    except (OSError, ET.ParseError) as e:
        print("junit_summary: %s" % e, file=sys.stderr)
        return 2
    passed = failed = 0
    skips = []  # (name, allowed)
    for case in root.iter("testcase"):
        name = case.get("name", "?")
        status = case.get("status", "")
        out = case.findtext("system-out") or ""
        if case.find("skipped") is not None or status in ("notrun", "disabled"):
            skips.append((name, name in ok_skips))
            continue
        if case.find("failure") is not None or case.find("error") is not None or status == "fail":
            failed += 1
        else:
            passed += 1
        for sub in CMOCKA_SKIP.findall(out):
            full = "%s:%s" % (name, sub)
            skips.append((full, full in ok_skips or name in ok_skips))
    unexpected = [n for n, ok in skips if not ok]
    print("%d passed, %d failed, %d skipped (%d not in the allowed list)"
          % (passed, failed, len(skips), len(unexpected)))
    for n, ok in skips:
        print("  skipped: %s%s" % (n, "" if ok else "  <- not allowed (tests/allowed-skips.txt)"))
    return 1 if failed or unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
